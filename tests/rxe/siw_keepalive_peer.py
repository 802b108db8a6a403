#!/usr/bin/env python3
"""One end of an idle rsocket stream connection with keep-alive probes, for
run.py interop's keepalive case (--transport siw): rsocket calls through ctypes on whatever librdmacm.so.1 the
loader finds (LD_LIBRARY_PATH picks ours; none, rdma-core's).

  siw_keepalive_peer.py server IP PORT   listens, accepts one connection, prints
                                         "accepted", waits for a line on stdin,
                                         sends "bye" and waits for the peer's close
  siw_keepalive_peer.py client IP PORT IDLE
                                         connects, sets SO_KEEPALIVE and
                                         TCP_KEEPIDLE=IDLE (read back), prints
                                         "keepalive IDLE", then blocks in rrecv
                                         until "bye" arrives: the connection
                                         outlived its probes

Exit 0 on success; on a failure, the call and its errno on stderr, exit 1.
"""
import ctypes
import os
import socket
import struct
import sys

SOL_SOCKET, SO_REUSEADDR, SO_KEEPALIVE = 1, 2, 9
IPPROTO_TCP, TCP_KEEPIDLE = 6, 4

lib = ctypes.CDLL('librdmacm.so.1', use_errno=True)


def check(name, rc):
    if rc < 0:
        e = ctypes.get_errno()
        sys.stderr.write('%s: %s (errno %d)\n' % (name, os.strerror(e), e))
        sys.exit(1)
    return rc


def addr(ip, port):
    b = struct.pack('=H', socket.AF_INET) + struct.pack('>H', port) + socket.inet_aton(ip) + bytes(8)
    return ctypes.create_string_buffer(b, len(b)), len(b)


def setint(fd, level, name, value, what):
    v = ctypes.c_int(value)
    check('rsetsockopt ' + what, lib.rsetsockopt(fd, level, name, ctypes.byref(v), ctypes.sizeof(v)))


def getint(fd, level, name, what):
    v, n = ctypes.c_int(0), ctypes.c_uint(4)
    check('rgetsockopt ' + what, lib.rgetsockopt(fd, level, name, ctypes.byref(v), ctypes.byref(n)))
    return v.value


def recv_exact(fd, n):
    buf, got = ctypes.create_string_buffer(n), b''
    while len(got) < n:
        r = check('rrecv', lib.rrecv(fd, buf, n - len(got), 0))
        if r == 0:
            break
        got += buf.raw[:r]
    return got


def out(line):
    sys.stdout.write(line + '\n')
    sys.stdout.flush()


def main():
    role, ip, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    fd = check('rsocket', lib.rsocket(socket.AF_INET, socket.SOCK_STREAM, 0))
    a, alen = addr(ip, port)
    if role == 'server':
        setint(fd, SOL_SOCKET, SO_REUSEADDR, 1, 'SO_REUSEADDR')
        check('rbind', lib.rbind(fd, a, alen))
        check('rlisten', lib.rlisten(fd, 1))
        c = check('raccept', lib.raccept(fd, None, None))
        out('accepted')
        sys.stdin.readline()
        check('rsend', lib.rsend(c, b'bye', 3, 0))
        buf = ctypes.create_string_buffer(16)
        rest = check('rrecv (the peer closing)', lib.rrecv(c, buf, 16, 0))
        out('peer closed (%d)' % rest)
        lib.rclose(c)
        lib.rclose(fd)
        return 0
    idle = int(sys.argv[4])
    check('rconnect', lib.rconnect(fd, a, alen))
    setint(fd, SOL_SOCKET, SO_KEEPALIVE, 1, 'SO_KEEPALIVE')
    setint(fd, IPPROTO_TCP, TCP_KEEPIDLE, idle, 'TCP_KEEPIDLE')
    on, t = getint(fd, SOL_SOCKET, SO_KEEPALIVE, 'SO_KEEPALIVE'), getint(fd, IPPROTO_TCP, TCP_KEEPIDLE, 'TCP_KEEPIDLE')
    if not on or t != idle:
        sys.stderr.write('keep-alive reads back as SO_KEEPALIVE %d, TCP_KEEPIDLE %d\n' % (on, t))
        return 1
    out('keepalive %d' % t)
    got = recv_exact(fd, 3)
    if got != b'bye':
        sys.stderr.write('received %r, not bye\n' % got)
        return 1
    out('bye')
    lib.rclose(fd)
    return 0


if __name__ == '__main__':
    sys.exit(main())
