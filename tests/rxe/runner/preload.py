"""Ordinary socket programs over RDMA: unmodified TCP/UDP programs (nc, socat,
iperf3, memcached, sockperf, redis, rdma-core's rstream -T s) with an rsocket
preload (librspreload.so) under both ends, on a real device (rxe0 in the
Soft-RoCE VM).

  run.py preload [--lib PATH] [--rdmacm PATH] [--only REGEX] [--except REGEX]
                 [--expect-fail REGEX [--expect-reason REGEX]] [--scale PERCENT] [--strace] [--keep]
                 [--logdir DIR] [--save DIR] [--list]

  --lib PATH     the preload under test (default: rdma-core's,
                 /usr/lib/x86_64-linux-gnu/rsocket/librspreload.so)
  --rdmacm PATH  the librdmacm.so.1 the preload must run on: its directory
                 goes first on LD_LIBRARY_PATH and every process must have
                 loaded that file (default: whatever the loader finds,
                 only reported)
  --only REGEX, --except REGEX   select cases by name (searched)
  --expect-fail REGEX  cases known to fail with this preload (the whole name
                 matches): their failure is XFAIL (not counted), their
                 success XPASS (counted as a failure: the known pattern
                 changed, update the caller)
  --expect-reason REGEX  an expected failure counts only if its reason
                 matches (searched), else it is FAIL
  --scale P      multiply every time limit by P percent (default 100)
  --strace       run every process under strace -f (logs kept in the case's directory)
  --keep         keep the logs (default: removed when nothing failed)
  --logdir DIR   write the logs there (default: a new directory under $TMPDIR or /tmp)
  --save DIR     copy the logs of failed and XFAIL cases to DIR at the end
  --list         print the case names and exit

The mixed cases pair the preload under test with rdma-core's (on rdma-core's
librdmacm, which they must load): in fork mode, one at each end
(rstream-fork-rdma-core-client, -server; on siw nc-rdma-core-client,
-server), and rdma-core's client of a listener that closes with its
connection not accepted (listener-close-rdma-core-client): left out when the
preload under test is rdma-core's or it is not installed.

Environment: RXE_IP (required: the RDMA device's IPv4 address), RXE_DEV (rxe0).

Every process of every case runs with LD_PRELOAD=<the preload> under a
time limit (core.limited), so no hang outlives its case. A case passes only if
  - its programs did their job (exit statuses, result lines, files compared,
    values read back), and a server that serves until stopped (memcached,
    sockperf, redis) is alive and idle (under half a CPU over a second) once
    its clients are done;
  - every process loaded the preload (LD_DEBUG=files: "calling init: <lib>")
    and the servers map it (/proc/PID/maps);
  - a stream server listened as an rsocket (an rdma_cm id in `rdma res
    show`), not as a kernel socket, except where the preload is meant to hand
    a kernel socket over (fork support);
  - its bytes crossed rxe0 (hw_counters/sent_pkts rose by at least the case's
    minimum: data bytes / 2 KiB, or one packet per message exchanged);
    on siw (--transport siw) siw received at least the case's data bytes
    (core.py's kprobe on siw_tcp_rx_data);
  - and (rxe) no kernel socket carried them: client and server share one
    host, so kernel TCP or UDP between them would cross `lo`, whose byte
    counter must rise by less than half the case's data bytes. On siw both
    ends talk TCP over lo themselves (siw's own), and a socket the preload did
    not take moves nothing through siw: the bytes siw received prove it.
    An rsocket listener there also shows as a kernel TCP listener (iw_cm
    listens on its port): only its rdma_cm id is asked for.
Output: a line per case `PASS|FAIL|XFAIL|XPASS <case> (<s>) rxe0 +N pkts, lo
+M bytes` (siw: its receive calls, bytes, frames),  for a failure its reason and the tails of its logs; then a table
and `N passed, M failed, K expected failures`. Exit status 0 only if no case
failed unexpectedly (XPASS included).
"""
import filecmp
import os
import re
import shutil
import signal
import tempfile
import time

import core
import judge
from core import now, say, secs_since

# Each case and the transports it runs on (every one must pass there). On
# siw (Soft-iWARP) a few programs, smaller files (FILE_SIZE, IPERF_MIB): TCG
# runs siw's TCP and iWARP framing both.
RXE, SIW, BOTH = ('rxe',), ('siw',), ('rxe', 'siw')
CASES = [('rstream-sockets', BOTH), ('rstream-blocking', RXE), ('rstream-poll', RXE), ('rstream-fork', RXE),
         ('rstream-fork-rdma-core-client', RXE), ('rstream-fork-rdma-core-server', RXE), ('nc-traditional', BOTH),
         ('nc-rdma-core-client', SIW), ('nc-rdma-core-server', SIW), ('socat-server', RXE), ('socat-client', RXE),
         ('socat-both', SIW), ('nc-openbsd', BOTH), ('iperf3', BOTH), ('memcached', RXE), ('sockperf-tcp', RXE),
         ('sockperf-udp', RXE), ('redis', RXE), ('listener-close-rdma-core-client', RXE)]
TRANSPORTS = ('rxe', 'siw')
# rdma-core's preload (on rdma-core's librdmacm): the other end of the mixed cases.
REFERENCE_LIB = '/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so'
MIXED = ('rstream-fork-rdma-core-client', 'rstream-fork-rdma-core-server', 'nc-rdma-core-client',
         'nc-rdma-core-server', 'listener-close-rdma-core-client')
PROGRAMS = ['rstream', 'nc.traditional', 'nc.openbsd', 'socat', 'iperf3', 'memcached', 'memcslap', 'memccp',
            'memccat', 'sockperf', 'redis-server', 'redis-benchmark', 'python3']
FILE_SIZE = {'rxe': 4 << 20, 'siw': 1 << 20}
IPERF_MIB = {'rxe': 16, 'siw': 4}


def status_text(rc, secs):
    """A process's exit status in words."""
    if rc == 0:
        return 'exit 0'
    if rc == 124:
        return 'hung: stopped after its %ss limit' % secs
    if rc == 137:
        return 'hung: killed after its %ss limit' % secs
    if 130 <= rc <= 199:
        try:
            return 'killed by ' + signal.Signals(rc - 128).name
        except ValueError:
            return 'killed by SIG%d' % (rc - 128)
    return 'exit status %d' % rc


class Case:
    """One attempt at a case: its port, directory, processes and verdict."""


class Preload:
    def __init__(self, o):
        self.o = o
        self.passed = self.failed = self.xfailed = self.run = 0
        self.summary, self.failed_dirs = [], []
        self.keep = o.keep

    def tmo(self, t):
        return core.tmo(t, self.o.scale)

    # --- running processes under the preload ----------------------------------------------

    def why(self, c, text):
        """Records the case's (first) failure."""
        if not c.why:
            c.why = text

    def preload_cmd(self, c, role, t, argv):
        """ARGV as process ROLE limited to T seconds, preloaded,
        LD_DEBUG=files into DIR/ROLE.ld.<pid>, extra environment c.extra_env."""
        lib, rdmacm = self.libs_of(c, role)
        env = ['LD_PRELOAD=' + lib, 'LD_DEBUG=files', 'LD_DEBUG_OUTPUT=%s/%s.ld' % (c.dir, role)] + c.extra_env
        if rdmacm and rdmacm != os.path.realpath(core.SYSLIB):
            env.append('LD_LIBRARY_PATH=' + os.path.dirname(rdmacm))
        cmd = core.limited(self.tmo(t))
        if self.o.strace:
            cmd += ['strace', '-f', '-qq', '-tt', '-s', '64', '-o', '%s/%s.strace' % (c.dir, role)]
            for e in env:
                cmd += ['-E', e]
        else:
            cmd += env
        c.roles.append(role)
        with open('%s/%s.cmd' % (c.dir, role), 'w') as f:
            f.write(' '.join(c.extra_env) + ' ' + ' '.join(argv) + '\n')
        return cmd + argv

    def libs_of(self, c, role):
        """The preload and librdmacm ROLE runs with: the ones under test, or
        rdma-core's on its own library for the other end of a mixed case."""
        return c.libs.get(role, (self.lib, self.rdmacm))

    def prog_pid(self, p):
        """The program's pid (under --strace: strace's first child)."""
        if not self.o.strace:
            return p.pid
        kids = core.read('/proc/%d/task/%d/children' % (p.pid, p.pid), '').split()
        return int(kids[0]) if kids else None

    def srv(self, c, role, ready, port, t, *argv):
        """Starts a server in the background (c.srv_pid[ROLE]) and waits until
        it listens. READY: rdma (an rdma_cm id listening on PORT), any (that or
        a kernel TCP listener), udp (a socket bound to PORT). A kernel listener
        without an rdma_cm id where an rsocket is wanted fails at once (the
        preload's listener has both: it answers kernel TCP too, for loopback
        clients and clients without the preload; the data checks prove that
        the case's bytes went over RDMA all the same)."""
        if c.why:
            return False
        cmd = self.preload_cmd(c, role, t, list(argv))
        p = core.start(cmd, '%s/%s.out' % (c.dir, role), '%s/%s.err' % (c.dir, role))
        c.srv_pid[role] = p
        end = now() + self.tmo(20)
        while True:
            if ready in ('rdma', 'any') and core.cm_listening(port):
                break
            # A datagram rsocket binds a kernel UDP socket of its own to its port
            # (as rdma-core's does) and makes its rdma_cm id only when the first
            # datagram moves: ready once the port is bound; the data checks tell
            # an rsocket from a kernel socket.
            if ready == 'udp' and core.udp_bound(port):
                break
            if ready == 'any' and core.tcp_listening(port):
                break
            if ready == 'rdma' and core.tcp_listening(port) and not core.cm_listening(port):
                self.why(c, '%s listens on kernel TCP port %d, not as an rsocket (the preload did not take its socket)'
                         % (role, port))
                return False
            if not core.alive(p):
                self.why(c, '%s ended (%s) before it listened on port %d' % (role, status_text(core.status(p), t), port))
                return False
            if now() > end:
                self.why(c, '%s not listening on port %d after %ds' % (role, port, self.tmo(20)))
                return False
            time.sleep(0.1)
        k, lib = self.prog_pid(p), self.libs_of(c, role)[0]
        if k and lib not in core.read('/proc/%d/maps' % k, ''):
            self.why(c, '%s (pid %d) does not map %s' % (role, k, lib))
            return False
        c.evidence += '%s maps the preload; ' % role
        return True

    def cli(self, c, role, t, *argv, stdin=None, out=None):
        """Runs a client in the foreground; its status must be 0."""
        if c.why:
            return False
        cmd = self.preload_cmd(c, role, t, list(argv))
        rc = core.run(cmd, out or '%s/%s.out' % (c.dir, role), '%s/%s.err' % (c.dir, role), stdin=stdin)
        if rc != 0:
            self.why(c, '%s: %s' % (role, status_text(rc, self.tmo(t))))
            return False
        return True

    def srv_done(self, c, role, secs):
        """The server ends by itself (after its client) with status 0."""
        p = c.srv_pid.pop(role, None)
        if p is None:
            return
        rc = core.wait_exit(p, self.tmo(secs))
        if rc is None:
            self.why(c, '%s did not end within %ds after its client' % (role, self.tmo(secs)))
            c.leftover.append(p)  # stopped with the others at the end of the case
        elif rc != 0:
            self.why(c, '%s: %s' % (role, status_text(rc, '?')))

    def srv_alive(self, c, role):
        """A server that serves until stopped is still there."""
        p = c.srv_pid.get(role)
        if p is None:
            return False
        if core.alive(p):
            return True
        self.why(c, '%s died (%s)' % (role, status_text(core.status(p), '?')))
        del c.srv_pid[role]
        return False

    def srv_idle(self, c, role):
        """A server with no client left does not spin: it used less than half a
        CPU over a second (a readiness call that never blocks, e.g. an epoll
        that sees only a placeholder socket, keeps it busy)."""
        if c.why or role not in c.srv_pid:
            return
        k = self.prog_pid(c.srv_pid[role])
        if not k:
            return

        def ticks():
            s = core.read('/proc/%d/stat' % k)
            if not s:
                return None
            w = s.rpartition(')')[2].split()
            return int(w[11]) + int(w[12])
        t0 = ticks()
        if t0 is None:
            return
        time.sleep(1)  # the interval CPU time is measured over, not a wait for a condition
        t1 = ticks()
        if t1 is None:
            return
        if t1 - t0 >= os.sysconf('SC_CLK_TCK') // 2:
            self.why(c, '%s spins with no client: %d clock ticks of CPU in 1s (a readiness call that never blocks?)'
                     % (role, t1 - t0))

    def same_file(self, c, a, b):
        """B is a copy of A."""
        if not (os.path.isfile(b) and filecmp.cmp(a, b, shallow=False)):
            size = os.path.getsize(b) if os.path.isfile(b) else 'no'
            self.why(c, '%s differs from the source (%s bytes of %d)' % (os.path.basename(b), size, os.path.getsize(a)))

    def has(self, c, role, regex):
        """ROLE's stdout or stderr has a line matching REGEX."""
        if not any(core.has_line('%s/%s.%s' % (c.dir, role, f), regex) for f in ('out', 'err')):
            self.why(c, "%s printed no line matching '%s'" % (role, regex))

    # --- the cases: set c.bytes (data bytes the case moves) and c.min_pkts ---------------------
    # Ports: c.port (unique per case), c.port + 1 for a second listener.

    def rstream_case(self, c, srv_args, cli_args, ready='rdma'):
        """-S 65536 -C 50: 3.2 MiB each way."""
        c.bytes = 65536 * 50 * 2
        p = str(c.port)
        self.srv(c, 'server', ready, c.port, 60, 'rstream', '-b', self.ip, '-p', p, *srv_args.split(),
                 '-S', '65536', '-C', '50')
        self.cli(c, 'client', 30, 'rstream', '-s', self.ip, '-p', p, *cli_args.split(), '-S', '65536', '-C', '50')
        self.srv_done(c, 'server', 10)
        self.has(c, 'client', core.RSTREAM_RESULT_RE)
        self.has(c, 'server', core.RSTREAM_RESULT_RE)

    def case_rstream_sockets(self, c):
        self.rstream_case(c, '-T s', '-T s')

    def case_rstream_blocking(self, c):
        self.rstream_case(c, '-T s -T b', '-T s -T b')

    def case_rstream_poll(self, c):
        self.rstream_case(c, '-T s -T a', '-T s -T a')

    def case_rstream_fork(self, c):
        # The server forks after accept (rdma-core's fork support: a kernel TCP
        # socket until the child's first call, then the RDMA connection).
        c.extra_env = ['RDMAV_FORK_SAFE=1']
        self.rstream_case(c, '-T f', '-T s', 'any')

    def case_rstream_fork_rdma_core_client(self, c):
        # The same with rdma-core 44's preload under the client: its move
        # (the active side: peek the zero, rconnect from any port) against ours.
        c.libs['client'] = (REFERENCE_LIB, os.path.realpath(core.SYSLIB))
        self.case_rstream_fork(c)

    def case_rstream_fork_rdma_core_server(self, c):
        # rdma-core 44's preload under the forking server (the passive side:
        # announce, then a blocking raccept) and ours under the client.
        c.libs['server'] = (REFERENCE_LIB, os.path.realpath(core.SYSLIB))
        self.case_rstream_fork(c)

    def case_nc_traditional(self, c):
        c.bytes, p = os.path.getsize(c.src), str(c.port)
        self.srv(c, 'server', 'rdma', c.port, 60, 'nc.traditional', '-l', '-s', self.ip, '-p', p)
        # srv wrote its stdout to server.out: that is the copy.
        self.cli(c, 'client', 30, 'nc.traditional', '-q', '1', self.ip, p, stdin=c.src)
        self.srv_done(c, 'server', 10)
        self.same_file(c, c.src, c.dir + '/server.out')

    def case_nc_rdma_core_client(self, c):
        # rdma-core 44's preload (on its own library) at one end, ours at the other.
        c.libs['client'] = (REFERENCE_LIB, os.path.realpath(core.SYSLIB))
        self.case_nc_traditional(c)

    def case_nc_rdma_core_server(self, c):
        c.libs['server'] = (REFERENCE_LIB, os.path.realpath(core.SYSLIB))
        self.case_nc_traditional(c)

    # A server (Python's socket module, our preload) that closes its
    # listener with a connection made but not accepted; a client (nc, on
    # rdma-core 44's preload, which never reads the connection manager's
    # disconnect) with nothing to send, which ends when the connection does:
    # it must see the end (the kernel's client reads a reset), not wait for
    # ever. The server stays up, so only the listener's close can tell it.
    LISTENER_CLOSE_SERVER = """if 1:
        import select, socket, sys, time
        l = socket.socket()
        l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        l.bind((sys.argv[1], int(sys.argv[2])))
        l.listen(4)
        print('queued:', len(select.select([l], [], [], 20)[0]), flush=True)
        l.close()
        time.sleep(30)
    """

    def case_listener_close_rdma_core_client(self, c):
        c.libs['client'] = (REFERENCE_LIB, os.path.realpath(core.SYSLIB))
        c.min_pkts = 1  # over RDMA (rdma-core's preload leaves a socket it cannot take on TCP)
        p = str(c.port)
        self.srv(c, 'server', 'rdma', c.port, 60, 'python3', '-c', self.LISTENER_CLOSE_SERVER, self.ip, p)
        self.cli(c, 'client', 15, 'nc.traditional', self.ip, p, stdin='/dev/null')
        self.srv_alive(c, 'server')
        self.has(c, 'server', '^queued: 1$')

    def case_socat_both(self, c):
        # socat at both ends: a TCP-LISTEN server writing a file, a client reading one.
        c.bytes, p = os.path.getsize(c.src), str(c.port)
        self.srv(c, 'server', 'rdma', c.port, 60, 'socat', '-u', 'TCP-LISTEN:%s,bind=%s,reuseaddr' % (p, self.ip),
                 'CREATE:%s/copy' % c.dir)
        self.cli(c, 'client', 30, 'socat', '-u', 'OPEN:' + c.src, 'TCP:%s:%s' % (self.ip, p))
        self.srv_done(c, 'server', 10)
        self.same_file(c, c.src, c.dir + '/copy')

    def case_socat_server(self, c):
        c.bytes, p = os.path.getsize(c.src), str(c.port)
        self.srv(c, 'server', 'rdma', c.port, 60, 'socat', '-u', 'TCP-LISTEN:%s,bind=%s,reuseaddr' % (p, self.ip),
                 'CREATE:%s/copy' % c.dir)
        self.cli(c, 'client', 30, 'nc.traditional', '-q', '1', self.ip, p, stdin=c.src)
        self.srv_done(c, 'server', 10)
        self.same_file(c, c.src, c.dir + '/copy')

    def case_socat_client(self, c):
        c.bytes, p = os.path.getsize(c.src), str(c.port)
        self.srv(c, 'server', 'rdma', c.port, 60, 'nc.traditional', '-l', '-s', self.ip, '-p', p)
        self.cli(c, 'client', 30, 'socat', '-u', 'OPEN:' + c.src, 'TCP:%s:%s' % (self.ip, p))
        self.srv_done(c, 'server', 10)
        self.same_file(c, c.src, c.dir + '/server.out')

    def case_nc_openbsd(self, c):
        c.bytes, p = os.path.getsize(c.src), str(c.port)
        self.srv(c, 'server', 'rdma', c.port, 60, 'nc.openbsd', '-l', self.ip, p)
        self.cli(c, 'client', 30, 'nc.openbsd', '-N', self.ip, p, stdin=c.src)
        self.srv_done(c, 'server', 10)
        self.same_file(c, c.src, c.dir + '/server.out')

    def case_iperf3(self, c):
        # 16 MiB (siw: 4), then the server (-1: one client) ends; both report
        # the bytes. iperf3's data socket is non-blocking: a send that takes
        # part of a block counts those bytes and the next send is a whole block,
        # so the total may run up to one block (128 KiB) over -n: "16.1 MBytes"
        # is a pass (iperf3 prints two decimals under 10: "4.12 MBytes").
        n, p = IPERF_MIB[core.TRANSPORT], str(c.port)
        c.bytes = n << 20
        self.srv(c, 'server', 'rdma', c.port, 60, 'iperf3', '-s', '-1', '-B', self.ip, '-p', p)
        self.cli(c, 'client', 30, 'iperf3', '-c', self.ip, '-p', p, '-n', '%dM' % n)
        self.srv_done(c, 'server', 10)
        self.has(c, 'client', r'^\[ *[0-9]+\] .* %d\.[01]%s MBytes .* sender$' % (n, '' if n >= 10 else '[0-9]'))
        self.has(c, 'client', r'^\[ *[0-9]+\] .* receiver$')
        self.has(c, 'client', '^iperf Done')

    def case_memcached(self, c):
        # memcslap's load, then a 500 KB value stored with memccp and read back
        # with memccat.
        s, n = '--servers=%s:%d' % (self.ip, c.port), 500
        c.bytes, c.min_pkts = 500 * 1000 * 2, n
        with open(c.dir + '/value', 'wb') as f:
            f.write(os.urandom(500 * 1000))
        self.srv(c, 'memcached', 'rdma', c.port, 120, 'memcached', '-u', 'root', '-l', self.ip, '-p', str(c.port),
                 '-U', '0', '-t', '2', '-m', '64')
        self.cli(c, 'slap-set', 30, 'memcslap', s, '--test=set', '--execute-number=%d' % n, '--concurrency=2')
        self.cli(c, 'slap-get', 30, 'memcslap', s, '--test=get', '--execute-number=%d' % n, '--concurrency=2')
        self.cli(c, 'memccp', 30, 'memccp', s, c.dir + '/value')
        self.cli(c, 'memccat', 30, 'memccat', s, '--file=%s/copy' % c.dir, 'value')
        self.srv_alive(c, 'memcached')
        self.srv_idle(c, 'memcached')
        self.has(c, 'slap-set', '^Time to set +[0-9]+ keys by +2 threads: +[0-9.]+ seconds')
        self.has(c, 'slap-get', '^Time to get +[0-9]+ keys by +2 threads: +[0-9.]+ seconds')
        self.same_file(c, c.dir + '/value', c.dir + '/copy')

    def sockperf_case(self, c, tcp, ready):
        p = str(c.port)
        self.srv(c, 'server', ready, c.port, 60, 'sockperf', 'sr', *tcp, '-i', self.ip, '-p', p)
        self.cli(c, 'client', 30, 'sockperf', 'pp', *tcp, '-i', self.ip, '-p', p, '-t', '2', '-m', '64')
        self.srv_alive(c, 'server')
        self.srv_idle(c, 'server')
        self.has(c, 'client', '^sockperf: Summary: Latency is [0-9.]+ usec')
        # "[Total Run] RunTime=1.001 sec; Warm up time=400 msec; SentMessages=32824; ReceivedMessages=32823"
        n = 0
        for line in core.lines_of(c.dir + '/client.out'):
            m = re.search(r'\[Total Run\].*ReceivedMessages=([0-9]*)', line)
            if m:
                n = int(m.group(1) or 0)
                break
        if n <= 0:
            self.why(c, 'client received no messages')
        c.bytes, c.min_pkts = n * 64 * 2, n or 1

    def case_sockperf_tcp(self, c):
        self.sockperf_case(c, ['--tcp'], 'rdma')

    def case_sockperf_udp(self, c):
        self.sockperf_case(c, [], 'udp')

    def case_redis(self, c):
        n = 2000
        c.bytes, c.min_pkts = n * 2 * 40, n * 2
        self.srv(c, 'redis', 'rdma', c.port, 120, 'redis-server', '--bind', self.ip, '--port', str(c.port),
                 '--save', '', '--appendonly', 'no', '--protected-mode', 'no', '--daemonize', 'no')
        self.cli(c, 'benchmark', 60, 'redis-benchmark', '-h', self.ip, '-p', str(c.port), '-c', '50', '-n', str(n),
                 '-t', 'set,get', '--csv')
        self.srv_alive(c, 'redis')
        self.srv_idle(c, 'redis')
        # "SET","909.09","72.065",...: requests per second, latencies
        self.has(c, 'benchmark', '^"SET","[0-9.]+",')
        self.has(c, 'benchmark', '^"GET","[0-9.]+",')

    # --- one case --------------------------------------------------------------------------

    def check_loaded(self, c):
        """Every process of the case loaded the preload (and the librdmacm wanted)."""
        rl = ''
        for role in c.roles:
            prefix = '%s.ld.' % role
            files = sorted(f for f in os.listdir(c.dir) if f.startswith(prefix))
            lib, rdmacm = self.libs_of(c, role)
            for f in files:
                text = core.read(os.path.join(c.dir, f), '')
                pid = f[len(prefix):]
                if 'calling init: ' + lib not in text:
                    return self.why(c, '%s (%s) did not load %s (LD_DEBUG=files)' % (role, pid, lib))
                m = re.search(r'calling init: ([^ \n]*librdmacm[^ \n]*)', text)
                rl = os.path.realpath(m.group(1)) if m else ''
                if rdmacm and rl != rdmacm:
                    return self.why(c, '%s (%s) loaded librdmacm %s, not %s' % (role, pid, rl or '(none)', rdmacm))
            if not files:
                return self.why(c, '%s left no LD_DEBUG output (did it start?)' % role)
        c.evidence += 'all %d processes loaded the preload (on %s)' % (len(c.roles), rl or 'no librdmacm')

    def run_case(self, name, rerun):
        """One case; True if it is to run once more."""
        o, c = self.o, Case()
        self.run += 1
        c.port = 21000 + self.run * 10
        c.dir = '%s/%02d-%s' % (self.logroot, self.run, name)
        os.makedirs(c.dir, exist_ok=True)
        c.why, c.evidence, c.bytes, c.min_pkts, c.roles, c.extra_env, c.srv_pid = '', '', 0, None, [], [], {}
        c.libs = {}
        c.leftover = []
        c.src = self.source
        t0, mark, l0 = now(), core.device_mark(), core.lo_bytes()
        getattr(self, 'case_' + name.replace('-', '_'))(c)
        for p in c.leftover:
            core.stop_proc(p)
        for r, p in c.srv_pid.items():
            # A server that ended by itself during a failed case: how it ended.
            if c.why and not core.alive(p):
                c.why += '; %s had ended: %s' % (r, status_text(core.status(p), '?'))
            core.stop_proc(p)
        moved, lo, secs = core.device_moved(mark), core.lo_bytes() - l0, secs_since(t0)
        if c.min_pkts is None:
            c.min_pkts = c.bytes // 2048
        # rxe: packets sent (at least one per 2 KiB, or per message); siw:
        # the bytes it received, at least the case's.
        self.why(c, core.crossed(moved, core.want(rxe={'pkts': c.min_pkts}, siw={'rx_bytes': c.bytes})))
        # On siw both ends talk TCP over lo (siw's own TCP): lo tells nothing
        # there; a socket the preload did not take moves no byte through siw.
        # (A case that moves no data bytes: not one byte on lo.)
        if lo >= max(c.bytes // 2, 1) and core.TRANSPORT == 'rxe':
            self.why(c, '%d bytes crossed lo (the case moves %d): kernel sockets carried the data' % (lo, c.bytes))
        self.check_loaded(c)
        if o.expect_fail and re.fullmatch(o.expect_fail, name):
            if not c.why:
                verdict = 'XPASS'
                self.failed += 1
            elif o.expect_reason and not re.search(o.expect_reason, c.why):
                verdict = 'FAIL'
                self.failed += 1
                c.why = "failed, but not as expected ('%s'): %s" % (o.expect_reason, c.why)
            else:
                verdict = 'XFAIL'
                self.xfailed += 1
        elif c.why and rerun and judge.judge_rerun('preload', '%s (%ss)' % (name, secs), c.why, c.dir):
            self.keep = True
            self.failed_dirs.append(c.dir)
            return True
        elif c.why:
            verdict = 'FAIL'
            self.failed += 1
        else:
            verdict = 'PASS'
            self.passed += 1
        dev = moved['pkts' if core.TRANSPORT == 'rxe' else 'rx_bytes']
        say('%s %s (%ss) %s, lo +%d bytes' % (verdict, name, secs, core.moved_text(moved), lo))
        self.summary.append('%-6s %-16s %6ss %9s %11s  %s' % (verdict, name, secs, dev, lo, c.why or 'ok'))
        if c.why or verdict == 'XPASS':
            self.failed_dirs.append(c.dir)
            say('    reason: ' + (c.why or 'passed, but expected to fail (--expect-fail): the known pattern changed'))
            if c.evidence:
                say('    evidence: ' + c.evidence)
            for r in c.roles:
                d = '%s/%s' % (c.dir, r)
                say('    %s: %s' % (r, core.read(d + '.cmd', '').rstrip('\n')))
                core.tail_file(d + '.err', 6, r + ' stderr')
                out = core.read(d + '.out', '')
                if out and '\0' not in out:  # (not a copy of the binary source file)
                    core.tail_file(d + '.out', 6, r + ' stdout')
                core.tail_file(d + '.strace', 15, r + ' strace')
        return False

    # --- main --------------------------------------------------------------------------------

    def main(self):
        o = self.o
        selected = [c for c, on in CASES if core.TRANSPORT in on and not (o.except_ and re.search(o.except_, c))
                    and (not o.only or re.search(o.only, c))]
        # The mixed cases pair the preload under test with rdma-core's: not
        # when that is rdma-core's, nor where it is not installed.
        if not os.path.isfile(REFERENCE_LIB) or os.path.realpath(o.lib) == os.path.realpath(REFERENCE_LIB):
            selected = [c for c in selected if c not in MIXED]
        if o.list:
            say(*selected)
            return 0
        self.ip = os.environ.get('RXE_IP') or core.die(
            'preload', 'RXE_IP must be the IPv4 address of the RDMA device (run inside tests/vm/rxe-vm)')
        if not os.path.isfile(o.lib):
            core.die('preload', 'no preload at ' + o.lib)
        self.lib = os.path.realpath(o.lib)
        self.rdmacm = ''
        if o.rdmacm:
            if not os.path.isfile(o.rdmacm):
                core.die('preload', 'no librdmacm at ' + o.rdmacm)
            self.rdmacm = os.path.realpath(o.rdmacm)
        for p in PROGRAMS:
            if not shutil.which(p):
                core.die('preload', '%s is not installed (tests/rxe/preload/packages.sh installs them)' % p)
        if o.logdir:
            self.logroot = o.logdir
            os.makedirs(o.logdir, exist_ok=True)
        else:
            self.logroot = tempfile.mkdtemp(prefix='rdmacm-preload.', dir=os.environ.get('TMPDIR', '/tmp'))
        self.source = self.logroot + '/source'
        with open(self.source, 'wb') as f:
            f.write(os.urandom(FILE_SIZE[core.TRANSPORT]))
        say('preload: %s%s' % (self.lib, ' on ' + self.rdmacm if self.rdmacm else ''),
            'preload: %d cases on %s at %s%s; logs in %s'
            % (len(selected), core.RXE_DEV, self.ip, '; expected to fail: ' + o.expect_fail if o.expect_fail else '',
               self.logroot))
        t_all = now()
        # A case that failed in a way the rerun rule allows (judge.py) runs once more.
        for name in selected:
            if self.run_case(name, True):
                self.run_case(name, False)
        say('', '%-6s %-16s %7s %9s %11s  %s' % ('verdict', 'case', 'time', 'rxe pkts' if core.TRANSPORT == 'rxe'
                                                 else 'siw bytes', 'lo bytes', 'reason'),
            *self.summary)
        say('preload: %ss in all' % secs_since(t_all))
        # The logs of the expected failures are kept too (their reasons are the point).
        return core.end_run('preload', '%d passed, %d failed, %d expected failures'
                            % (self.passed, self.failed, self.xfailed), self.failed, [], self.logroot,
                            self.keep or self.xfailed, o.save, self.failed_dirs)


def add_options(p, repo):
    p.add_argument('--lib', default=REFERENCE_LIB)
    p.add_argument('--rdmacm', default='')
    p.add_argument('--only', default='')
    p.add_argument('--except', dest='except_', default='')
    p.add_argument('--expect-fail', default='')
    p.add_argument('--expect-reason', default='')
    p.add_argument('--scale', type=int, default=100)
    p.add_argument('--strace', action='store_true')
    p.add_argument('--keep', action='store_true')
    p.add_argument('--logdir', default='')
    p.add_argument('--save', default='')
    p.add_argument('--list', action='store_true')


def main(o):
    return Preload(o).main()
