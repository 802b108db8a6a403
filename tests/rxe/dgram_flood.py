#!/usr/bin/env python3
"""A hostile peer of a datagram rsocket's UDP port (rsocket_dgram_flood.sh):
for --secs seconds, sends it garbage after the protocol's tag, malformed
DsUdpHeaders, plain datagrams (no tag: the application's, as kernel UDP
delivers them; their payload is one udpong's server only counts), well-formed
ones (op data, random QPNs) from ever new source ports, and, through a raw
socket, well-formed ones from made-up addresses of the subnet that nobody
owns (their address resolution can only time out) and from the UDP ports of
every other socket on --dst's address (claims naming another QPN for a peer
that works: the client of the pair under test). Prints what it sent."""
import argparse
import os
import random
import socket
import struct
import subprocess
import time

TAG = 0x55555555
CTRL = 7
# What a forwarded payload holds: to udpong's server an op it only counts,
# for a client id (255) no run of the test uses.
PAYLOAD = b"\xff\xff" + b"flood" * 8


def udp_header(qpn, op=0, version=4, length=16, ip=b"\0" * 4):
    return struct.pack("!IBBBBI", TAG, version, op, length, 0, qpn & 0xFFFFFF) + ip


def raw_packet(src, sport, dst, dport, payload):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload  # no checksum
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), random.randrange(65536), 0, 64,
                     socket.IPPROTO_UDP, 0, socket.inet_aton(src), socket.inet_aton(dst))
    return ip + udp  # the kernel fills the IP checksum


def peer_ports(dst, port, own):
    out = subprocess.run(["ss", "-Huan"], capture_output=True, text=True).stdout
    ports = set()
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 4:
            continue
        local = cols[3]
        host, _, p = local.rpartition(":")
        if host not in (dst, "0.0.0.0", "*") or not p.isdigit():
            continue
        p = int(p)
        if p != port and p not in own:
            ports.add(p)
    return ports


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dst", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--secs", type=float, default=30)
    ap.add_argument("--spoof-net", help="a.b.c: made-up sources a.b.c.200-249")
    args = ap.parse_args()
    dst = (args.dst, args.port)
    counts = dict(garbage=0, malformed=0, plain=0, sources=0, unresolvable=0, claims=0)
    junk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    junk.bind((args.dst, 0))
    own = {junk.getsockname()[1]}
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    malformed = [
        udp_header(0x1234)[:15],                       # short
        udp_header(0x1234, version=6),                 # v6 from a v4 source
        udp_header(0x1234, length=28),                 # the other length
        udp_header(0x1234, length=255) + b"x" * 64,    # past the datagram
        udp_header(0x1234, op=3),                      # no such op
        udp_header(0),                                 # special QPs
        udp_header(1),
    ]
    end = time.monotonic() + args.secs
    rounds = 0
    ports = set()
    while time.monotonic() < end:
        rounds += 1
        for _ in range(50):
            junk.sendto(struct.pack("!I", TAG) + os.urandom(random.randrange(0, 1500)), dst)
            counts["garbage"] += 1
        for _ in range(20):
            junk.sendto(PAYLOAD + os.urandom(random.randrange(0, 1000)), dst)
            counts["plain"] += 1
        for m in malformed:
            junk.sendto(m, dst)
            counts["malformed"] += 1
        for _ in range(50):  # new sources: each one a destination of its own
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                s.bind((args.dst, 0))
                s.sendto(udp_header(random.randrange(2, 1 << 24)) + PAYLOAD, dst)
                counts["sources"] += 1
            except OSError:
                pass
            s.close()
        if args.spoof_net:
            for host in range(200, 250):
                src = "%s.%d" % (args.spoof_net, host)
                pkt = raw_packet(src, random.randrange(1024, 65536), args.dst, args.port,
                                 udp_header(random.randrange(2, 1 << 24)) + PAYLOAD)
                raw.sendto(pkt, (args.dst, 0))
                counts["unresolvable"] += 1
        if rounds % 4 == 1:
            ports = peer_ports(args.dst, args.port, own)
        for p in ports:
            for _ in range(5):
                pkt = raw_packet(args.dst, p, args.dst, args.port,
                                 udp_header(random.randrange(2, 1 << 24), op=CTRL))
                raw.sendto(pkt, (args.dst, 0))
                counts["claims"] += 1
        time.sleep(0.05)
    print("flood: " + ", ".join("%s %d" % kv for kv in counts.items()))


if __name__ == "__main__":
    main()
