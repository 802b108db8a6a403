"""Interoperability harness: rdma-core's own, unchanged binaries (rdmacm-utils'
rping, ucmatose, udaddy, mckey, cmtime, rdma_server/rdma_client,
rdma_xserver/rdma_xclient; perftest's ib_send_bw -R; qperf -cm1; the rsocket
tools rstream, riostream, rcopy; libfabric's fi_pingpong over its verbs
provider) run through OUR librdmacm, on a real RDMA device (rxe0 in the
Soft-RoCE VM; with --transport siw, siw0 under `rxe-vm --siw`: each case of
CASES says the transports it runs on and what it must show on each).

  run.py interop [--lib PATH] [--reference] [--modes M1,M2,...] [--only REGEX]
                 [--strace] [--keep] [--logdir DIR] [--scale PERCENT] [--deadline SECONDS]
                 [--save DIR] [--verbose] [--preload-first LIB] [--list]

  --lib PATH     our librdmacm.so.1 (default: <repo>/build/src/librdmacm.so.1)
  --reference    self-check: "ours" := the system's rdma-core librdmacm, so every
                 case must pass; a failure there is the harness's fault
  --modes        any of preload,libpath,mixed-srv-ours,mixed-cli-ours,reference
                 (default: the first four on rxe; on siw reference instead of preload)
                   preload         server and client with LD_PRELOAD=<ours>
                   libpath         server and client with LD_LIBRARY_PATH=<dir of ours>
                   mixed-srv-ours  server LD_PRELOAD=<ours>, client on the system library
                   mixed-cli-ours  server on the system library, client LD_PRELOAD=<ours>
                   reference       server and client on the system library (what
                                   rdma-core does there, beside ours)
  --libpath-only REGEX  run the libpath mode only for the cases whose
                 "tool args" matches REGEX (the loader finds the library the
                 same way for every case of a tool: one case per tool shows it)
  --only REGEX   run the cases whose "tool args" matches REGEX (a Python regex, searched)
  --except REGEX skip the cases whose "tool args" matches REGEX
  --strace       run our side under strace -f (openat, write, ioctl, poll...);
                 failing cases print the strace tail (ucma commands are write()s)
  --keep         keep the log directory (default: removed when all pass)
  --logdir DIR   write the logs there (default: a new directory under $TMPDIR or /tmp).
                 Keep it on a fast file system: LD_DEBUG output to the VM's 9p
                 share makes every case ~10 times slower; use --save instead
  --save DIR     at the end, copy the logs of the failed cases (and of first
                 attempts rerun) to DIR (e.g. an `rxe-vm --rw` directory; its
                 NN-tool-mode directories from an earlier run are removed first)
  --scale P      multiply every time limit by P percent (default 100)
  --deadline S   start no case after S seconds; the cases left are reported as
                 FAIL (not run), so a run that hangs everywhere still ends with
                 its table inside an outer time limit (ctest passes one)
  --verbose      also print the binding evidence of each passing case
  --preload-first LIB  preload LIB before ours on our side, in every mode: the
                 sanitizer runtime a sanitized build of ours needs loaded first

Environment: RXE_IP (required: the RDMA device's IPv4 address), RXE_DEV (rxe0).
Output: one line per case `PASS|FAIL <tool> <mode> <args> (<seconds>s)`, for a
failure the reason and the tails of the server's and client's logs, and last
`N passed, M failed` alone on a line. Exit status 0 only if all passed.

Each process runs under a time limit (core.limited); servers are waited for until the
kernel shows their rdma_cm id (or TCP socket, qperf) listening, or (mckey)
their QP attached to the group, with a bound, and always stopped. Every
process runs with LD_DEBUG=bindings: a case passes only if the server's and
the client's rdma_* imports (rdma_listen / rdma_connect among them; mckey:
rdma_join_multicast_ex; the rsocket tools: rlisten / rconnect) were bound to
the library the mode says, ours or the system's, and to no other. mckey's
verdicts come last (see define_case). A case's work must have crossed the
device (core.crossed: rxe0's packets; siw's receive calls, bytes or accepts,
counted by kprobes). On siw, what iWARP refuses (UD: udaddy, mckey) runs
with one library at both ends, must fail with EOPNOTSUPP from
rdma_create_qp, and the same way on both libraries (a last verdict each).
"""
import filecmp
import os
import re
import shutil
import tempfile

import core
import judge
from core import arg_after, lines_of, now, say, secs_since

# (the case: "tool|arguments shown and given to both sides" (mckey: see
# define_case), the transports it runs on and what it must show on each,
# the modes it leaves out there). Counts are modest: the VM emulates its
# CPUs (TCG), and all of this has to fit in one boot. mckey comes first: its
# senders' exits are waited for at the end (see define_case), so they
# overlap the cases that follow.
#   pass     the work done, checked, its bytes over the device
#   refused  iWARP has no UD QPs (so no UD and no multicast): rdma_create_qp
#            fails with EOPNOTSUPP, the same way on rdma-core's library and
#            ours (the first error line and the exit status compared); run
#            with one library at both ends (modes reference and libpath)
RXE = {'rxe': 'pass'}
SIW = {'siw': 'pass'}
BOTH = {'rxe': 'pass', 'siw': 'pass'}
NO_UD = {'rxe': 'pass', 'siw': 'refused'}
CASES = [
    ('mckey|-C 10', NO_UD, ()),
    ('mckey|-C 20 -S 1024 -o', RXE, ()),
    ('rping|-v -C 10 -S 64', RXE, ()),
    ('rping|-v -C 10 -S 1024', SIW, ()),
    ('rping|-v -V -C 100 -S 4096', RXE, ()),
    ('rping|-v -V -C 3 -S 65535', RXE, ()),
    ('ucmatose|-c 1 -C 10', RXE, ()),
    ('ucmatose|-c 10 -C 100', RXE, ()),
    ('ucmatose|-c 4 -C 20 -S 8192', RXE, ()),
    ('ucmatose|-c 2 -C 10 -S 1024', SIW, ()),
    ('udaddy|-c 1 -C 10', NO_UD, ()),
    ('udaddy|-c 4 -C 50 -S 1024', RXE, ()),
    ('cmtime|-c 200', RXE, ()),
    # 50 connections set up and torn down at once; siw must accept each.
    ('cmtime|-c 50', SIW, ()),
    ('rdma_server|', BOTH, ()),
    ('rdma_xserver|-c r', RXE, ()),
    ('ib_send_bw|-R -F -n 100', RXE, ()),
    ('ib_send_bw|-R -F -n 200 -s 4096', RXE, ()),
    ('ib_send_bw|-R -F -n 200 -s 65536', SIW, ()),
    # One test per qperf client: see README.md (qperf's own race on a second test).
    ('qperf|-cm1 -t 2 rc_lat', RXE, ()),
    ('qperf|-cm1 -t 2 rc_bw', RXE, ()),
    # libfabric's verbs provider (librdmacm under libfabric.so.1): an MSG
    # endpoint; on siw also an RDM one (ofi_rxm over verbs' MSG endpoints).
    # Not -e rdm over rxe: ofi_rxm fails fi_enable with EINVAL there on
    # rdma-core's library and ours alike.
    ('fi_pingpong|-p verbs -e msg -I 100 -S 1024', RXE, ()),
    ('fi_pingpong|-p verbs -e msg -I 20 -S 1024', SIW, ()),
    ('fi_pingpong|-p verbs -e rdm -I 20 -S 1024', SIW, ()),
    # rsockets: rstream's bandwidth/latency run (-S all: sizes from 64 B up),
    # blocking, non-blocking, poll-driven (async), data verified, small
    # buffers, keepalive set, addresses resolved through rdma_getaddrinfo;
    # rcopy a 4 MiB file. On siw (rdma-core's format on iWARP: each message
    # a write and a 4-byte SEND) 64 KiB transfers, 64 B blocking, rpoll-driven.
    ('rstream|-C 100 -S 4096', RXE, ()),
    ('rstream|-S 65536 -C 10', SIW, ()),
    ('rstream|-S all -I 5', RXE, ()),
    ('rstream|-T b -C 200 -S 1024', RXE, ()),
    ('rstream|-T b -S 64 -C 100', SIW, ()),
    ('rstream|-T n -C 200 -S 16384', RXE, ()),
    ('rstream|-T a -C 200 -S 8192', RXE, ()),
    # Not with rdma-core's library at both ends: its rpoll's own race
    # (POLLHUP with data unread, judge.py) failed that pair one run in three,
    # twice in a row in a clean-clone run (tests/FLAKY.md); nothing of ours
    # runs in it.
    ('rstream|-T a -S 65536 -C 10', SIW, ('reference',)),
    ('rstream|-T v -C 50 -S 65536', RXE, ()),
    ('rstream|-B 4096 -C 100 -S 10000', RXE, ()),
    ('rstream|-k 5 -C 50 -S 1024', RXE, ()),
    ('rstream|-T r -C 50 -S 4096', RXE, ()),
    ('rcopy|4M', BOTH, ()),
    # riostream: riomap'd receive buffers written with riowrite.
    ('riostream|-C 100 -S 4096', RXE, ()),
    ('riostream|-S 65536 -C 10', SIW, ()),
    ('riostream|-T b -C 100 -S 65536', RXE, ()),
    ('riostream|-T a -C 100 -S 8192', RXE, ()),
    # An idle rsocket connection with SO_KEEPALIVE and TCP_KEEPIDLE 1 s
    # (siw_keepalive_peer.py): its probes counted as they cross siw.
    ('keepalive|1', SIW, ()),
]
SIDES = {'preload': ('preload', 'preload'), 'libpath': ('libpath', 'libpath'),
         'mixed-srv-ours': ('preload', 'sys'), 'mixed-cli-ours': ('sys', 'preload'),
         'reference': ('sys', 'sys')}  # server, client
MODES = {'rxe': 'preload,libpath,mixed-srv-ours,mixed-cli-ours',
         'siw': 'reference,libpath,mixed-srv-ours,mixed-cli-ours'}
TRANSPORTS = ('rxe', 'siw')


def shown(c):
    """A case's "tool args", as --only, --except and --libpath-only see it."""
    tool, args = c[0].split('|', 1)
    return '%s %s' % (tool, args)


def outcome(c):
    """What case C must show on this transport ('pass', 'refused'), or None: not run there."""
    return c[1].get(core.TRANSPORT)


class Case:
    """One case in one mode: its state (a deferred one is finished later)."""


class Interop:
    def __init__(self, o):
        self.o = o
        self.passed = self.failed = self.run = self.bound = 0
        self.failures, self.failed_dirs, self.deferred = [], [], []
        self.refusals = {}  # case -> {mode: (error lines, status)} of what iWARP refuses

    # --- a case's state -----------------------------------------------------------

    def setup(self, tool, args, mode, run, t0, kmsg_mark):
        c = Case()
        c.tool, c.args, c.mode, c.run, c.t0, c.kmsg_mark = tool, args, mode, run, t0, kmsg_mark
        c.srv_side, c.cli_side = SIDES[mode]
        c.port = 20000 + run
        c.dir = '%s/%02d-%s-%s' % (self.logroot, run, tool, mode)
        c.name = '%s %s%s' % (tool, mode, ' ' + args if args else '')
        c.why, c.ph, c.sp, c.secs, c.mark, c.go = '', '', None, None, None, None
        self.define_case(c)
        return c

    def define_case(self, c):
        """Sets srv and cli (argument vectors), ready (cm, tcp or mcast) and
        wait_for (the port, or mckey's group), persist (the server never exits
        by itself and is stopped after the client), defer (the client's exit
        may be waited for at the end of the run, once the server has exited),
        ct (the client's time limit, s), check (run after both), srv_sym /
        cli_sym (a call each side must have bound: the binding evidence),
        want (what its work must move on the device, core.crossed: rxe
        packets sent; siw receive calls, bytes received, accepts)."""
        ip, p, a, tool = self.ip, str(c.port), c.args.split(), c.tool
        c.persist, c.defer, c.ready, c.wait_for, c.ct, c.check = False, False, 'cm', p, 45, self.check_none
        c.srv_sym, c.cli_sym, c.want = 'rdma_listen', 'rdma_connect', {}
        if tool == 'rping':
            c.srv = ['rping', '-s', '-a', ip, '-p', p] + a
            c.cli = ['rping', '-c', '-a', ip, '-p', p] + a
            c.check = self.check_rping
            # siw: every ping is a round trip of SEND, RDMA READ, SEND, RDMA
            # WRITE (each waits for the last): a receive batch at least per ping.
            c.want = core.want(siw={'rx': int(arg_after('-C', a))})
        elif tool == 'ucmatose':
            # The server preallocates its -c connections, so both sides get the same arguments.
            c.srv, c.cli = ['ucmatose', '-p', p] + a, ['ucmatose', '-s', ip, '-p', p] + a
            c.check = self.check_ucmatose
            # siw: both sides of each connection send at once (measured: a
            # receive call per message); batches may merge: at least one per
            # connection and direction.
            c.want = core.want(siw={'rx': 2 * int(arg_after('-c', a))})
        elif tool == 'udaddy':
            # udaddy has no port option (its -p is the port space): always 7174,
            # fine for cases that run one at a time. Same -c on both sides, as ucmatose.
            c.srv, c.cli = ['udaddy'] + a, ['udaddy', '-s', ip] + a
            c.wait_for, c.check = '7174', self.check_udaddy
        elif tool == 'mckey':
            # A receiver ("server") and a sender (-s, "client") of a group of their
            # own: the case's port in its low 16 bits. -o (join as a send-only full
            # member) goes to the sender only: such a member's QP is not attached
            # to the group. The receiver is ready once its QP is attached: rxe then
            # puts the group's MAC address on the netdev (`ip maddr`).
            # Destroying a QP that has sent multicast datagrams takes ~50 s in the
            # kernel (rxe, with rdma-core's library too): once the receiver has
            # exited, the sender's exit and the case's verdict are deferred to the
            # end of the run.
            c.group = '239.77.%d.%d' % (c.port >> 8 & 255, c.port & 255)
            r, o = [x for x in a if x != '-o'], [x for x in a if x == '-o']
            c.srv = ['mckey', '-m', c.group, '-b', ip] + r
            c.cli = ['mckey', '-m', c.group, '-b', ip, '-s'] + r + o
            c.ready, c.wait_for, c.defer, c.ct, c.check = 'mcast', c.group, True, 120, self.check_mckey
            c.srv_sym = c.cli_sym = 'rdma_join_multicast_ex'
        elif tool in ('rdma_server', 'rdma_xserver'):
            # The synchronous endpoint API samples (rdma_getaddrinfo, rdma_create_ep,
            # rdma_get_request, rdma_post_*, rdma_get_*_comp). The servers listen on
            # the wildcard address. rdma_x*: -c r (RC); XRC is not supported by rxe.
            c.srv = [tool, '-p', p] + a
            c.cli = [tool.replace('server', 'client', 1), '-s', ip, '-p', p] + a
            c.check = self.check_endpoint
            # siw: its two messages (one each way) on siw's receive path.
            c.want = core.want(siw={'rx': 2})
        elif tool == 'cmtime':
            # The server serves until stopped.
            c.srv, c.cli = ['cmtime', '-p', p] + a, ['cmtime', '-s', ip, '-p', p] + a
            c.persist, c.ct, c.check = True, 90, self.check_cmtime
            # siw: each connection accepted by siw, no more, no fewer.
            n = int(arg_after('-c', a))
            c.want = core.want(siw={'accept': (n, n)})
        elif tool == 'ib_send_bw':
            # -F: under emulated CPUs perftest's cycle-counter calibration often fails
            # ("Correlation coefficient r^2: 0.77 < 0.9"); without -F the side that
            # notices exits 1 ("Can't produce a report") and its peer spins forever
            # waiting for the final handshake (measured: ~10% of runs with rdma-core).
            c.srv = ['ib_send_bw', '-d', core.RXE_DEV, '-p', p] + a
            c.cli = ['ib_send_bw', '-d', core.RXE_DEV, '-p', p] + a + [ip]
            c.check = self.check_perftest
            # siw (measured: 425-427 receive calls for 200 SENDs of 64 KiB): one per 10 messages.
            c.want = core.want(siw={'rx': int(arg_after('-n', a)) // 10})
        elif tool == 'qperf':
            # qperf's control connection is TCP (port -lp); -cm1 sets up the RDMA
            # connection of each test with rdma_cm. The server serves until stopped.
            # Each test's server (a forked child) binds port 0, sends the port to the
            # client and only then calls rdma_listen: a client whose library is
            # already initialised (a second test in the same client) can connect
            # first and gets REJECTED (status 8, no listener). Seen with rdma-core's
            # library too, so each case runs one test per client.
            c.srv, c.cli = ['qperf', '-lp', p], ['qperf', ip, '-lp', p] + a
            c.ready, c.persist, c.ct, c.check = 'tcp', True, 60, self.check_qperf
        elif tool == 'fi_pingpong':
            # Its control channel is TCP (server -B, client -P): the server is
            # ready once that port listens. The verbs provider's connection is
            # librdmacm's, called from libfabric.so.1. Every ping is answered
            # before the next: at least one packet per message, 2 -I in all.
            c.srv, c.cli = ['fi_pingpong', '-B', p] + a, ['fi_pingpong', '-P', p] + a + [ip]
            n = 2 * int(arg_after('-I', a))
            c.ready, c.check, c.want = 'tcp', self.check_pingpong, core.want(rxe={'pkts': n}, siw={'rx': n})
        elif tool in ('rstream', 'riostream'):
            # One connection, then both sides exit. Each transfer is at least one
            # RDMA write on rxe0: fewer packets than transfers means the bytes went
            # some other way. siw: receive batches merge; at least 10 calls.
            c.srv, c.cli = [tool, '-b', ip, '-p', p] + a, [tool, '-s', ip, '-p', p] + a
            c.check, c.srv_sym, c.cli_sym = self.check_rstream, 'rlisten', 'rconnect'
            c.want = core.want(rxe={'pkts': int(arg_after('-C', a) or 100)}, siw={'rx': 10})
        elif tool == 'rcopy':
            # The server serves until stopped; the client copies a file of the
            # given size, compared with cmp afterwards (4 MiB: over 1,000 packets).
            c.srv = ['rcopy', '-p', p]
            c.cli = ['rcopy', c.dir + '/source', '%s:%s/copy' % (ip, c.dir), '-p', p]
            c.persist, c.check, c.srv_sym, c.cli_sym = True, self.check_rcopy, 'raccept', 'rconnect'
            c.want = core.want(rxe={'pkts': 1000}, siw={'rx_bytes': 4 << 20})
        elif tool == 'keepalive':
            # An idle rsocket connection (siw_keepalive_peer.py, rsocket calls
            # through ctypes on the librdmacm.so.1 the loader finds): the
            # client sets SO_KEEPALIVE and TCP_KEEPIDLE (ARGS seconds), then
            # nothing moves but its probes (see run_keepalive); afterwards the
            # server's bytes still arrive.
            peer = os.path.join(core.REPO, 'tests/rxe/siw_keepalive_peer.py')
            c.srv = ['python3', peer, 'server', ip, p]
            c.cli = ['python3', peer, 'client', ip, p, c.args]
            c.check, c.srv_sym, c.cli_sym = self.check_keepalive, 'raccept', 'rconnect'
        else:
            raise SystemExit('unknown tool ' + tool)

    # --- per-tool checks (beyond exit statuses): the problem, or None ----------------------

    def has_line(self, c, role, regex):
        """ROLE's stdout has a line matching REGEX as a whole."""
        r = re.compile(regex)
        if not any(r.fullmatch(line) for line in lines_of('%s/%s.out' % (c.dir, role))):
            return "%s did not print '%s'" % (role, regex)

    def no_line(self, c, role, regex):
        """No line of ROLE's stdout or stderr contains a match of REGEX."""
        r = re.compile(regex)
        for f in ('out', 'err'):
            for line in lines_of('%s/%s.%s' % (c.dir, role, f)):
                if r.search(line):
                    return "%s printed '%s'" % (role, line)

    def first(self, *whys):
        for w in whys:
            w = w() if callable(w) else w
            if w:
                return w

    def grep(self, c, f, regex):
        r = re.compile(regex)
        return any(r.search(line) for line in lines_of('%s/%s' % (c.dir, f)))

    def check_none(self, c, a):
        return None

    def check_rping(self, c, a):
        n = int(arg_after('-C', a))
        if any(self.grep(c, f, '(?i)mismatch') for f in ('server.out', 'server.err', 'client.out', 'client.err')):
            return 'data mismatch reported'
        if '-v' not in a:
            return None
        # -v prints every ping's data: rdma-ping-0 .. rdma-ping-(C-1) on both sides.
        k = core.count_lines(c.dir + '/client.out', '^ping data: rdma-ping-')
        if k != n:
            return 'client printed %d of %d pings' % (k, n)
        k = core.count_lines(c.dir + '/server.out', '^server ping data: rdma-ping-')
        if k != n:
            return 'server printed %d of %d pings' % (k, n)
        last = [m.group(0) for m in (re.match('^ping data: rdma-ping-[0-9]*', x)
                                     for x in lines_of(c.dir + '/client.out')) if m]
        if not last or last[-1] != 'ping data: rdma-ping-%d' % (n - 1):
            return "client's last ping is not rdma-ping-%d" % (n - 1)

    def check_ucmatose(self, c, a):
        return self.first(lambda: self.has_line(c, 'server', 'return status 0'),
                          lambda: self.has_line(c, 'client', 'return status 0'),
                          lambda: self.has_line(c, 'client', 'data transfers complete'))

    def check_udaddy(self, c, a):
        # The server receives every datagram, then replies; the client receives the replies.
        return self.first(lambda: self.check_ucmatose(c, a),
                          lambda: self.has_line(c, 'server', 'receiving data transfers'),
                          lambda: self.has_line(c, 'server', 'sending replies'),
                          lambda: self.has_line(c, 'server', 'data transfers complete'))

    def check_mckey(self, c, a):
        g = c.group.replace('.', '\\.')
        for role in ('server', 'client'):
            why = self.first(
                lambda: self.has_line(c, role, 'mckey: joined dgid: ::ffff:%s mlid 0x[0-9a-f]+ sl [0-9]+' % g),
                lambda: self.has_line(c, role, 'data transfers complete'),
                lambda: self.has_line(c, role, 'return status 0'),
                lambda: self.no_line(c, role, 'failed|failure|error'))
            if why:
                return why
        # The receiver polled its CQ until it had all of the sender's datagrams.
        return self.first(lambda: self.has_line(c, 'server', 'receiving data transfers'),
                          lambda: self.has_line(c, 'client', 'initiating data transfers'))

    def check_endpoint(self, c, a):
        # "<name>: start" and "<name>: end 0" on both sides; "device doesn't support
        # IBV_SEND_INLINE" would mean that rdma_create_ep did not return the QP's
        # capabilities in the caller's ibv_qp_init_attr (rdma_client reads them).
        s, k = c.srv[0], c.cli[0]
        return self.first(lambda: self.has_line(c, 'server', s + ': start'),
                          lambda: self.has_line(c, 'server', s + ': end 0'),
                          lambda: self.has_line(c, 'client', k + ': start'),
                          lambda: self.has_line(c, 'client', k + ': end 0'),
                          lambda: self.no_line(c, 'server', "doesn't support"),
                          lambda: self.no_line(c, 'client', "doesn't support"))

    def check_cmtime(self, c, a):
        if not self.grep(c, 'client.out', '^step +total ms +max ms +min us +us / conn'):
            return 'client printed no timing table'
        for step in ('create id', 'resolve addr', 'resolve route', 'create qp', 'connect', 'disconnect', 'destroy'):
            if not self.grep(c, 'client.out', r'^%s *: +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' % step):
                return "timing table has no '%s' row" % step

    def check_rstream(self, c, a):
        for role in ('client', 'server'):
            if not self.grep(c, role + '.out', core.RSTREAM_RESULT_RE):
                return '%s printed no result line' % role
        return self.first(lambda: self.no_line(c, 'client', 'fail|error|mismatch'),
                          lambda: self.no_line(c, 'server', 'fail|error|mismatch'))

    def check_rcopy(self, c, a):
        src, cp = c.dir + '/source', c.dir + '/copy'
        if not (os.path.isfile(src) and os.path.isfile(cp) and filecmp.cmp(src, cp, shallow=False)):
            return 'the copy differs from the source (or is missing)'
        if not self.grep(c, 'client.out', '^%d bytes in ' % os.path.getsize(src)):
            return 'client printed no result line'

    def check_perftest(self, c, a):
        # " #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]"; with a
        # failed clock calibration (-F) the rates may read inf or nan, so only the
        # size and the iteration count are checked.
        n, size = arg_after('-n', a), arg_after('-s', a)
        regex = r'^\s*%s\s+%s(\s+[-+0-9.a-z]+){3}' % (size or '[0-9]+', n or '[0-9]+')
        for role in ('client', 'server'):
            if not self.grep(c, role + '.out', regex):
                return '%s printed no result line' % role

    def check_pingpong(self, c, a):
        # "bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec", e.g.
        # "1k 100 =100 200k 0.82s ...": every ping acknowledged, on both sides.
        n, size = arg_after('-I', a), int(arg_after('-S', a))
        label = '%dk' % (size >> 10) if size >= 1024 and size % 1024 == 0 else str(size)
        regex = r'^%s\s+%s\s+=%s\s' % (label, n, n)
        for role in ('client', 'server'):
            if not self.grep(c, role + '.out', regex):
                return '%s printed no result line for %s x %s' % (role, n, label)

    def check_qperf(self, c, a):
        lines = lines_of(c.dir + '/client.out')
        for t, what, regex in (('rc_lat', 'no rc_lat latency result', r'latency *= *[0-9.]+ [mun]?s'),
                               ('rc_bw', 'no rc_bw bandwidth result', r'bw *= *[0-9.]+ [KMG]?B/sec')):
            if t not in a:
                continue
            near = [x for i, line in enumerate(lines) if line.startswith(t + ':') for x in lines[i:i + 4]]
            if not any(re.search(regex, x) for x in near):
                return what

    # --- processes ----------------------------------------------------------------------------

    def build_cmd(self, c, role, side, t, argv):
        """ARGV as ROLE on library SIDE limited to T seconds, with
        LD_DEBUG=bindings written to DIR/ROLE.bind.<pid> and, with --strace on
        our side, strace -f into DIR/ROLE.strace.
          preload  LD_PRELOAD=<ours>
          libpath  LD_LIBRARY_PATH=<dir of ours> (same soname, found first)
          (with --preload-first, a sanitizer runtime, it is preloaded before ours in both)
          sys      nothing: the system's librdmacm through the normal search"""
        first = self.o.preload_first
        env = {'preload': ['LD_PRELOAD=' + (first + ' ' if first else '') + self.ours],
               'libpath': ['LD_LIBRARY_PATH=' + self.ourdir] + (['LD_PRELOAD=' + first] if first else []),
               'sys': []}[side]
        env += ['LD_DEBUG=' + ('bindings,libs' if c.tool == 'keepalive' else 'bindings'),
                'LD_DEBUG_OUTPUT=%s/%s.bind' % (c.dir, role)]
        cmd = core.limited(t)
        if self.o.strace and side != 'sys':
            # The environment goes to the traced program only, not to strace itself.
            cmd += ['strace', '-f', '-qq', '-tt', '-s', '48', '-o', '%s/%s.strace' % (c.dir, role),
                    '-e', 'trace=openat,write,ioctl,poll,ppoll,epoll_wait,close']
            for e in env:
                cmd += ['-E', e]
        else:
            cmd += env
        return cmd + argv

    def check_binding(self, c, role, side, sym):
        """(ok, text): from ROLE's LD_DEBUG=bindings output, the program bound its
        rdma_* (and r*) imports to the library of SIDE and nowhere else, and SYM
        is among them. The text: the evidence, or the problem."""
        want = self.want_sys if side == 'sys' else self.want_ours
        if c.tool == 'keepalive':
            return self.check_dlopened(c, role, want, sym)
        files, targets, hit, n = core.bindings('%s/%s.bind' % (c.dir, role), sym, rsockets=True)
        if not files:
            return False, '%s: no LD_DEBUG=bindings output (did the program start?)' % role
        bad = ['%s: rdma_* bound to %s, expected %s' % (role, t, want)
               for t in targets if t != want and os.path.realpath(t) != want]
        if n == 0:
            return False, '%s: no rdma_* symbol bindings in LD_DEBUG output' % role
        if bad:
            return False, '\n'.join(bad)
        if hit is None:
            return False, '%s: %s not bound' % (role, sym)
        return True, '%s %s -> %s (%s)' % (role, sym, hit, os.path.basename(want))

    def check_dlopened(self, c, role, want, sym):
        """(ok, text) for a program that opens librdmacm.so.1 itself (ctypes):
        its dlsym lookups show as the library binding its own symbols, so the
        evidence is LD_DEBUG=libs: the one librdmacm it initialised is WANT,
        and SYM was looked up there."""
        files = core.debug_files('%s/%s.bind' % (c.dir, role))
        inits = {os.path.realpath(m.group(1)) for f in files for line in lines_of(f)
                 for m in [re.search(r'calling init: (\S*librdmacm\S*)$', line)] if m}
        if not files:
            return False, '%s: no LD_DEBUG output (did the program start?)' % role
        if inits != {want}:
            return False, '%s: initialised librdmacm %s, expected %s' % (role, sorted(inits) or 'none', want)
        r = re.compile(r" to (\S+) \[[0-9]+\]: normal symbol `%s'" % sym)
        if not any(os.path.realpath(m.group(1)) == want for f in files for line in lines_of(f)
                   for m in [r.search(line)] if m):
            return False, '%s: %s not looked up in %s' % (role, sym, want)
        return True, '%s %s -> %s (initialised, dlsym)' % (role, sym, os.path.basename(want))

    def client_status(self, c, st):
        """Records a failure of the client in c.why (and its status in client.rc, for known_race)."""
        with open(c.dir + '/client.rc', 'w') as f:
            f.write('%d\n' % st)
        if judge.is_signal(st) and c.cli_side != 'sys':
            self.add_why(c, 'client killed by signal %d on our library' % (st - 128))
        elif st in (124, 137):
            self.add_why(c, 'client timed out after %ds (status %d)' % (self.tmo(c.ct), st))
        elif st != 0:
            self.add_why(c, 'client exit status %d' % st)

    def add_why(self, c, why):
        c.why = c.why + '; ' + why if c.why else why

    def tmo(self, t):
        return core.tmo(t, self.o.scale)

    def server_status(self, c):
        """After the client (or, defer, in its place), records in c.why how the
        server ended. A server that serves one client exits soon after it;
        after a failed client only a short grace (for its error messages)
        before it is stopped. defer: the server ends first, within the
        client's time limit."""
        if c.persist:
            rc = core.wait_exit(c.sp, 0)
            if rc is not None:
                self.add_why(c, 'server exited by itself with status %d (it should serve until stopped)' % rc)
            return
        grace = self.tmo(c.ct) if c.defer else self.tmo(15) if not c.why else 2
        rc = core.wait_exit(c.sp, grace)
        if rc is None:
            if not c.why:
                c.why = 'server did not exit within %ds after the client (stopped)' % grace
            return
        with open(c.dir + '/server.rc', 'w') as f:
            f.write('%d\n' % rc)
        if judge.peer_exit_race(c.tool, rc, c.dir + '/server.err', '%s %s %s (server)' % (c.tool, c.mode, c.args)):
            rc = 0
        if judge.is_signal(rc) and c.srv_side != 'sys':
            self.add_why(c, 'server killed by signal %d on our library' % (rc - 128))
        elif rc != 0 and not c.why:
            c.why = 'server timed out' if rc in (124, 137) else 'server exit status %d' % rc
        c.ph += ', server done %ss' % secs_since(c.t0)

    def run_case(self, tool, args, mode, rerun, expect='pass'):
        """One case in one mode, to show EXPECT (CASES); True if it is to run once more."""
        self.run += 1
        c = self.setup(tool, args, mode, self.run, now(), core.kmsg_mark())
        if expect == 'refused':
            # Only the side that makes the QP is judged, by its binding too.
            c.check, c.srv_sym = self.check_refused, 'rdma_create_qp' if tool == 'mckey' else c.srv_sym
            c.cli_sym = 'rdma_create_qp'
        c.expect = expect
        d = c.dir
        os.makedirs(d, exist_ok=True)
        if tool == 'rcopy':
            with open(d + '/source', 'wb') as f:
                f.write(os.urandom(4 << 20))
        c.mark = core.device_mark()
        for role, argv in (('server', c.srv), ('client', c.cli)):
            with open('%s/%s.cmd' % (d, role), 'w') as f:
                f.write(' '.join(argv) + '\n')
        if not shutil.which(c.srv[0]) or not shutil.which(c.cli[0]):
            c.why = '%s is not installed (apt-get install rdmacm-utils perftest qperf libfabric-bin)' % tool
            return self.finish_case(c, rerun)
        ct, ready = self.tmo(c.ct), self.tmo(20)
        if expect == 'refused' and tool == 'mckey':
            # The receiver alone: it fails before it could join.
            rc = core.run(self.build_cmd(c, 'server', c.srv_side, ct, c.srv), d + '/server.out', d + '/server.err')
            self.refused_status(c, 'server', rc)
            return self.finish_case(c, rerun)
        stdin = None
        if tool == 'keepalive':
            stdin, c.go = os.pipe()
        c.sp = core.start(self.build_cmd(c, 'server', c.srv_side, ct + ready + 30, c.srv),
                          d + '/server.out', d + '/server.err', stdin=stdin)
        if stdin is not None:
            os.close(stdin)
        wr = core.wait_ready(c.ready, c.wait_for, c.sp, ready)
        c.ph = 'ready %ss' % secs_since(c.t0)
        if wr == 1:
            c.why = 'server exited (%d) before it was ready (%s %s)' % (core.wait_exit(c.sp, 5), c.ready, c.wait_for)
        elif wr == 2:
            c.why = 'server not ready (%s %s) after %ds' % (c.ready, c.wait_for, ready)
        else:
            cmd = self.build_cmd(c, 'client', c.cli_side, ct, c.cli)
            tc = now()
            if expect == 'refused':
                self.refused_status(c, 'client', core.run(cmd, d + '/client.out', d + '/client.err'))
            elif tool == 'keepalive':
                self.run_keepalive(c, cmd)
            elif not c.defer:
                rc = core.run(cmd, d + '/client.out', d + '/client.err')
                if judge.peer_exit_race(tool, rc, d + '/client.err', '%s %s %s (client)' % (tool, mode, args)):
                    rc = 0
                self.client_status(c, rc)
                c.ph += ', client %ss' % secs_since(tc)
                self.server_status(c)
            else:
                cp = core.start(cmd, d + '/client.out', d + '/client.err')
                self.server_status(c)
                if not c.why and core.alive(cp):
                    # Done but for the client's exit: finished by finish_deferred.
                    self.deferred.append((cp, tc, secs_since(c.t0), c))
                    return False
                rc = core.wait_exit(cp, ct if not c.why else 2)
                if rc is not None:
                    self.client_status(c, rc)
                else:
                    core.stop_proc(cp)
                    self.add_why(c, 'client stopped')
                c.ph += ', client %ss' % secs_since(tc)
        return self.finish_case(c, rerun)

    # --- what iWARP refuses, and keep-alive probes -------------------------------------

    REFUSAL = 'unable to create QP: Operation not supported'

    def refused_status(self, c, role, rc):
        """ROLE, the side that makes a UD QP, ended with RC: kept for check_refused."""
        with open('%s/%s.rc' % (c.dir, role), 'w') as f:
            f.write('%d\n' % rc)
        c.refusing, c.refused_rc = role, rc
        side = c.srv_side if role == 'server' else c.cli_side
        if judge.is_signal(rc) and side != 'sys':
            self.add_why(c, '%s killed by signal %d on our library' % (role, rc - 128))
        elif rc in (124, 137):
            self.add_why(c, '%s timed out (status %d) where iWARP refuses at once' % (role, rc))

    def check_refused(self, c, a):
        """The side making the QP failed, its first error EOPNOTSUPP from
        rdma_create_qp (its lines kept, with its status, to compare the two
        libraries at the end: compare_refusals)."""
        role, t = c.refusing, c.tool
        text = [x for f in ('out', 'err') for x in lines_of('%s/%s.%s' % (c.dir, role, f))]
        errs = [x for x in text if x.startswith(t + ': ') and not re.search('starting|connecting|joining', x)]
        self.refusals.setdefault(shown((c.tool + '|' + c.args,)), {})[c.mode] = (errs, c.refused_rc)
        if c.refused_rc == 0:
            return '%s succeeded: UD over iWARP? (differs from the refusal iWARP makes)' % role
        if not errs or errs[0] != '%s: %s' % (t, self.REFUSAL):
            return "%s's first error differs from EOPNOTSUPP from rdma_create_qp: %s" % (role, errs[:1] or 'none')

    def compare_refusals(self):
        """Each refused case failed the same way on both libraries: the same
        error lines, the same exit status."""
        for case, seen in self.refusals.items():
            if len(seen) < 2:
                continue
            name = '%s refused alike on both libraries' % case
            (m1, v1), (m2, v2) = sorted(seen.items())
            if v1 == v2:
                self.passed += 1
                say('PASS %s (%s, exit %d)' % (name, ' | '.join(v1[0]), v1[1]))
            else:
                self.failed += 1
                why = '%s: %s exit %d; %s: %s exit %d' % (m1, v1[0], v1[1], m2, v2[0], v2[1])
                self.failures.append('%s: %s' % (name, why))
                say('FAIL %s' % name, '    reason: the refusals differ: ' + why)

    def run_keepalive(self, c, cmd):
        """The client connects and sets its keep-alive; then nothing moves
        but its probes: each RDMA WRITE frame siw places is one (the server's
        rsocket sends nothing). At least 3 within 10 s (TCP_KEEPIDLE 1 s), and
        no SEND: a probe is a zero-byte RDMA write on both libraries, which
        takes none of the peer's receives. Then the server sends its bytes."""
        d, idle = c.dir, c.args
        cp = core.start(cmd, d + '/client.out', d + '/client.err')
        if core.wait_line(d + '/client.out', '^keepalive %s$' % idle, cp, self.tmo(20)) != 0:
            self.add_why(c, 'the client did not set its keep-alive')
        else:
            mark, end = core.device_mark(), now() + self.tmo(10)
            while True:
                moved = core.device_moved(mark, counts_only=True)
                if moved['write'] >= 3 or now() > end:
                    break
                core.time.sleep(0.1)
            c.ph += ', probes: %d writes, %d sends' % (moved['write'], moved['send'])
            if moved['write'] < 3:
                self.add_why(c, '%d keep-alive probes crossed siw in %ds (TCP_KEEPIDLE %s s): the probes did not cross '
                             'the device' % (moved['write'], self.tmo(10), idle))
            elif moved['send']:
                self.add_why(c, '%d SENDs crossed siw while the connection was idle: a probe that takes a receive of '
                             "the peer's (differs from rdma-core's zero-byte write)" % moved['send'])
        os.write(c.go, b'go\n')
        os.close(c.go)
        c.go = None
        rc = core.wait_exit(cp, self.tmo(c.ct))
        if rc is None:
            core.stop_proc(cp)
            rc = core.status(cp)
        self.client_status(c, rc)
        self.server_status(c)

    def check_keepalive(self, c, a):
        return self.has_line(c, 'client', 'bye')

    def finish_deferred(self):
        """The deferred cases, once their clients have exited (within their time limits)."""
        for cp, tc, secs, c in self.deferred:
            # Its server is gone: the client's exit is judged once.
            c.why, c.sp = '', None  # the server has been waited for
            # Its time limit (timeout) ends it anyway: this wait is only a bound.
            rc = core.wait_exit(cp, self.tmo(c.ct))
            if rc is not None:
                self.client_status(c, rc)
            else:
                c.why = 'client still running (stopped)'
                core.stop_proc(cp)
            c.ph += ', client exited by %ss (waited for at the end)' % secs_since(tc)
            c.secs = "%ss + the client's exit" % secs
            self.finish_case(c, False)
        self.deferred = []

    def finish_case(self, c, rerun):
        """Stops the server, runs the checks and the binding evidence, prints
        the verdict and counts it; True if the case is to run once more."""
        ev, bok, b2 = '', True, ''
        kmsg = core.kmsg_since(c.kmsg_mark)
        if c.go is not None:
            os.close(c.go)
            c.go = None
        if c.sp:
            core.stop_proc(c.sp)
        d = c.dir
        if os.path.exists(d + '/server.out'):
            if not c.why and c.want:
                moved = core.device_moved(c.mark)
                c.why = core.crossed(moved, c.want)
                c.ph += ', ' + core.moved_text(moved)
            if c.tool == 'fi_pingpong' and judge.caught_signal(d):
                c.why = judge.caught_signal(d)
            if not c.why:
                c.why = c.check(c, c.args.split()) or ''
            # The binding evidence is checked for every case, also failing ones
            # (a wrong binding is the first thing to know about a failure).
            ok, b1 = self.check_binding(c, 'server', c.srv_side, c.srv_sym)
            bok = ok
            if os.path.exists(d + '/client.out'):
                ok, b2 = self.check_binding(c, 'client', c.cli_side, c.cli_sym)
                bok = bok and ok
            ev = b1 + ('; ' + b2 if b2 else '')
            if bok:
                self.bound += 1 + (1 if b2 else 0)
            else:
                if not c.why:
                    c.why = 'wrong library: ' + ev
                ev = 'WRONG BINDING: ' + ev
        secs = c.secs or '%ss' % secs_since(c.t0)
        if c.why and rerun and judge.judge_rerun('interop', '%s (%s)' % (c.name, secs), c.why, d,
                                                 c.tool, c.mode, c.args):
            self.failed_dirs.append(d)
            return True
        if not c.why:
            self.passed += 1
            say('PASS %s (%s)' % (c.name, secs))
            if self.o.verbose:
                say('    bound: ' + ev, '    times: ' + c.ph)
            return False
        self.failed += 1
        self.failures.append('%s: %s' % (c.name, c.why))
        self.failed_dirs.append(d)
        say('FAIL %s (%s)' % (c.name, secs), '    reason: ' + c.why)
        if ev:
            say('    bound: ' + ev)
        say('    times: ' + c.ph,
            '    server: [%s] %s' % (c.srv_side, core.read(d + '/server.cmd', '').rstrip('\n')),
            '    client: [%s] %s' % (c.cli_side, core.read(d + '/client.cmd', '').rstrip('\n')))
        for f, n, title in (('server.out', 12, 'server stdout'), ('server.err', 12, 'server stderr'),
                            ('client.out', 12, 'client stdout'), ('client.err', 12, 'client stderr'),
                            ('server.strace', 25, 'server strace'), ('client.strace', 25, 'client strace')):
            core.tail_file('%s/%s' % (d, f), n, title)
        new = [x for x in kmsg if 'speed is unknown' not in x][-8:]
        with open(d + '/dmesg', 'w') as f:
            f.write(''.join(x + '\n' for x in new))
        if new:
            core.tail_file(d + '/dmesg', 8, 'new kernel messages')
        return False

    # --- main ------------------------------------------------------------------------------------

    def skip_mode(self, c, mode):
        """MODE is left out for case C: by --libpath-only, by the case on this
        transport, or (a refusal) with two libraries."""
        if outcome(c) == 'refused' and mode not in ('reference', 'libpath'):
            return True
        return mode in c[2] or (mode == 'libpath' and self.o.libpath_only
                                and not re.search(self.o.libpath_only, shown(c)))

    def main(self):
        o = self.o
        o.modes = o.modes or MODES[core.TRANSPORT]
        modes = o.modes.split(',')
        for m in modes:
            if m not in SIDES:
                core.die('interop', 'unknown mode ' + m)
        selected = [c for c in CASES if outcome(c) and not (o.except_ and re.search(o.except_, shown(c)))
                    and (not o.only or re.search(o.only, shown(c)))]
        if o.list:
            for c in selected:
                tool, args = c[0].split('|', 1)
                for m in modes:
                    if not self.skip_mode(c, m):
                        say('%s %s%s' % (tool, m, ' ' + args if args else ''))
            return 0
        self.ip = os.environ.get('RXE_IP') or core.die(
            'interop', 'RXE_IP must be the IPv4 address of the RDMA device (run inside tests/vm/rxe-vm)')
        lib = core.SYSLIB if o.reference else o.lib
        if not os.path.isfile(lib):
            core.die('interop', 'no library at %s (build first, or --lib)' % lib)
        if not os.path.isfile(core.SYSLIB):
            core.die('interop', 'no system librdmacm at %s' % core.SYSLIB)
        self.ours = os.path.abspath(lib)
        self.ourdir = os.path.dirname(self.ours)
        self.want_ours, self.want_sys = os.path.realpath(self.ours), os.path.realpath(core.SYSLIB)
        if os.path.basename(self.ours) != 'librdmacm.so.1' and 'libpath' in o.modes:
            core.die('interop', 'libpath mode needs the library under its soname librdmacm.so.1 (got %s)' % self.ours)
        if o.logdir:
            self.logroot = o.logdir
            os.makedirs(o.logdir, exist_ok=True)
        else:
            self.logroot = tempfile.mkdtemp(prefix='rdmacm-interop.', dir=os.environ.get('TMPDIR', '/tmp'))
        ver = lambda p: core.dpkg_version(p) or '?'
        say('interop: ours = %s%s' % (self.want_ours, ' (--reference: rdma-core itself)' if o.reference else ''),
            'interop: system = %s' % self.want_sys,
            'interop: rdmacm-utils %s, perftest %s, qperf %s, libfabric-bin %s; device %s at %s'
            % (ver('rdmacm-utils'), ver('perftest'), ver('qperf'), ver('libfabric-bin'), core.RXE_DEV, self.ip),
            'interop: %d cases x %d modes (%s); logs in %s' % (len(selected), len(modes), o.modes, self.logroot))
        t_all = now()
        for c in selected:
            tool, args = c[0].split('|', 1)
            for m in modes:
                if self.skip_mode(c, m):
                    continue
                if o.deadline and now() - t_all > o.deadline:
                    n = '%s %s%s' % (tool, m, ' ' + args if args else '')
                    self.failed += 1
                    self.failures.append('%s: not run, deadline of %ds reached' % (n, o.deadline))
                    say('FAIL %s (0.0s)' % n,
                        "    reason: not run: the harness's deadline (%ds) was reached" % o.deadline)
                    continue
                if self.run_case(tool, args, m, True, outcome(c)):
                    self.run_case(tool, args, m, False, outcome(c))
        self.finish_deferred()
        self.compare_refusals()
        say('interop: %d processes verified bound to the expected librdmacm; %ss in all'
            % (self.bound, secs_since(t_all)))
        return core.end_run('interop', '%d passed, %d failed' % (self.passed, self.failed), self.failed,
                            self.failures, self.logroot, o.keep, o.save, self.failed_dirs)


def add_options(p, repo):
    p.add_argument('--lib', default=os.path.join(repo, 'build/src/librdmacm.so.1'))
    p.add_argument('--reference', action='store_true')
    p.add_argument('--modes', default='')
    p.add_argument('--only', default='')
    p.add_argument('--except', dest='except_', default='')
    p.add_argument('--libpath-only', default='')
    p.add_argument('--strace', action='store_true')
    p.add_argument('--keep', action='store_true')
    p.add_argument('--logdir', default='')
    p.add_argument('--save', default='')
    p.add_argument('--scale', type=int, default=100)
    p.add_argument('--deadline', type=int, default=0)
    p.add_argument('--verbose', action='store_true')
    p.add_argument('--preload-first', default='')
    p.add_argument('--list', action='store_true')


def main(o):
    return Interop(o).main()
