"""The bundled tools (examples/: rping, ucmatose, udaddy, mckey, cmtime,
rdma_server + rdma_client) on a real RDMA device (rxe0 in the Soft-RoCE VM):
each against itself and against rdma-core's tool of the same name in both
directions, then their failure paths (no server, bad address, bad option,
a peer that stops answering).

  run.py tools [--tools DIR] [--lib PATH] [--libs ours,ref] [--only REGEX]
               [--keep] [--logdir DIR] [--scale PERCENT] [--list]

  --tools DIR   our tools (default <repo>/build/examples)
  --lib PATH    our librdmacm.so.1 (default <repo>/build/src/librdmacm.so.1)
  --libs L      the library under OUR tools, one or both of (default ours,ref):
                  ours  LD_LIBRARY_PATH=<dir of --lib>
                  ref   LD_PRELOAD=<the system's rdma-core librdmacm>: tells a
                        tool bug from a library bug
                rdma-core's tools always run on the system's library.
  --full        every pair case in every library mode (default: with rdma-core's
                library under our tools, only the first case of each tool)
  --only REGEX  the cases whose name matches (a Python regex, searched); names look like
                "pair rping ours srv=ours cli=theirs -v -C 10" or
                "fail rping ours no-server"
  --keep        keep the logs (default: removed when all pass)
  --scale P     multiply every time limit by P percent (default 100)
  --list        print the case names and exit

Environment: RXE_IP (required: the device's IPv4 address).
Output: `PASS|FAIL <case> (<s>s)`, for a failure the reason and log tails,
and last `N passed, M failed` alone on a line. Exit status 0 only if all
passed. Every process runs under a time limit (core.limited); servers are waited for
until they listen (or, mckey, until they have joined) with a bound, and
always stopped. Each process runs with LD_DEBUG=bindings and a case passes
only if its rdma_* calls went to the library the case says.
"""
import os
import re
import shutil
import signal
import tempfile

import core
import judge
from core import arg_after, has_line, count_lines, now, say, secs_since

# "tool|arguments given to both sides". Modest counts: the VM emulates its CPUs.
PAIRS = [
    'rping|-v -C 10',
    'rping|-v -V -C 50 -S 4096',
    'rping|-V -C 3 -S 65535',
    'rping|-q -v -V -C 5',
    'rping|-P -v -V -C 20',
    'ucmatose|-c 1 -C 10',
    'ucmatose|-c 4 -C 20 -S 8192',
    'ucmatose|-c 2 -C 5 -m',
    'udaddy|-c 1 -C 10',
    'udaddy|-c 3 -C 20 -S 1024',
    'mckey|-C 10',
    'mckey|-c 2 -C 5 -S 512',
    'cmtime|-c 20',
    'cmtime|-c 100 -r 1 -t 1000',
    'rdma_server|',
]
PAIRINGS = [('ours', 'ours'), ('ours', 'theirs'), ('theirs', 'ours')]  # server, client
PEER_TIMEOUT = 10  # RDMACM_TOOLS_TIMEOUT of our tools in the pair cases (seconds)
STALL_TIMEOUT = 3  # ... in the cases where the peer stops answering


def cases(lib_list, full, ip):
    """Every case in order: (kind, arguments...)."""
    for lib in lib_list:
        seen = set()
        for c in PAIRS:
            tool, args = c.split('|', 1)
            # Under rdma-core's library (a check of the tools, not of our
            # library), the first case of each tool is enough unless --full.
            if lib == 'ref' and not full and tool in seen:
                continue
            for sw, cw in PAIRINGS:
                yield ('pair', tool, lib, sw, cw, args)
            seen.add(tool)
    bad, far = 'no.such.host.invalid', '169.254.77.99'
    for lib in lib_list:
        f = lambda *a: ('fail', a[0], lib) + a[1:]
        # No server: rejected at once (nothing listens on the port).
        yield f('no-server', 'nonzero', 'REJECTED', 10, 'rping', '-c', '-a', ip, '-p', '7999', '-C', '1')
        yield f('no-server', 'nonzero', 'REJECTED', 10, 'ucmatose', '-s', ip, '-p', '7999')
        yield f('no-server', 'nonzero', 'REJECTED|UNREACHABLE', 15, 'udaddy', '-s', ip)
        yield f('no-server', 'nonzero', 'REJECTED', 15, 'cmtime', '-s', ip, '-p', '7999', '-c', '5')
        yield f('no-server', 'nonzero', 'rdma_connect.*(refused|failed)', 10, 'rdma_client', '-s', ip, '-p', '7999')
        # Bad addresses: a name that does not resolve; a neighbour that never answers ARP.
        for tool in ('rping', 'ucmatose', 'udaddy', 'cmtime', 'rdma_client', 'mckey'):
            args = {'rping': ['-c', '-C', '1', '-a'], 'mckey': ['-b', ip, '-m']}.get(tool, ['-s'])
            yield f('bad-name', 'nonzero', bad, 10, tool, *args, bad)
        yield f('unreachable', 'nonzero', 'ADDR_ERROR|timed out', 15, 'rping', '-c', '-a', far, '-C', '1')
        yield f('unreachable', 'nonzero', 'ADDR_ERROR|timed out', 15, 'ucmatose', '-s', far)
        yield f('unreachable', 'nonzero', 'ADDR_ERROR|timed out', 15, 'udaddy', '-s', far)
        yield f('unreachable', 'nonzero', 'ADDR_ERROR|timed out', 15, 'cmtime', '-s', far, '-c', '2', '-r', '0')
        yield f('unreachable', 'nonzero', 'rdma_create_ep.*(timed out|unreachable)', 15, 'rdma_client', '-s', far)
        yield f('unreachable', 'nonzero', 'failed|ERROR|invalid', 15, 'mckey', '-m', far, '-b', ip)
        # Bad options: rdma-core's statuses (rping EINVAL, the others 1) and a usage text.
        yield f('bad-option', '22', 'usage', 5, 'rping', '-x')
        yield f('bad-value', '22', 'invalid size', 5, 'rping', '-c', '-a', ip, '-S', '5')
        yield f('no-role', '22', 'usage', 5, 'rping', '-a', ip)
        for tool in ('ucmatose', 'udaddy', 'mckey', 'cmtime', 'rdma_server', 'rdma_client'):
            yield f('bad-option', '1', 'usage', 5, tool, '-x')
        yield f('bad-value', '1', 'invalid connections', 5, 'ucmatose', '-c', 'zero')
        yield f('no-group', '1', 'multicast', 5, 'mckey', '-s')
        # A peer that stops answering: ours fails within the peer timeout.
        for tool, sw, cw, stopped in (('rping', 'ours', 'ours', 'client'), ('rping', 'ours', 'theirs', 'client'),
                                      ('rping', 'ours', 'ours', 'server'), ('rping', 'theirs', 'ours', 'server'),
                                      ('ucmatose', 'theirs', 'ours', 'server'), ('udaddy', 'theirs', 'ours', 'server'),
                                      ('cmtime', 'theirs', 'ours', 'server'),
                                      ('rdma_server', 'theirs', 'ours', 'server')):
            yield ('stall', tool, lib, sw, cw, stopped)


def case_name(c):
    if c[0] == 'pair':
        _, tool, lib, sw, cw, args = c
        return 'pair %s %s srv=%s cli=%s%s' % (tool, lib, sw, cw, ' ' + args if args else '')
    if c[0] == 'fail':
        return 'fail %s %s %s' % (c[6], c[2], c[1])
    _, tool, lib, sw, cw, stopped = c
    return 'stall %s %s srv=%s cli=%s stopped=%s' % (tool, lib, sw, cw, stopped)


# coreutils' helper behind stdbuf(1).
STDBUF_LIB = '/usr/libexec/coreutils/libstdbuf.so'


class Case:
    """One attempt at a case: its number, port, directory and verdict."""


class Tools:
    def __init__(self, o):
        self.o = o
        self.passed = self.failed = self.run = 0
        self.failures = []
        self.deferred = []
        self.keep = o.keep
        self.real = {}

    def scaled(self, s):
        return s * self.o.scale // 100

    def prog(self, who, tool):
        if who == 'ours':
            return os.path.join(self.o.tools, tool)
        return shutil.which(tool) or '/usr/bin/' + tool

    def mkcmd(self, c, role, who, lib, t, argv):
        """ARGV as ROLE limited to T seconds, our tools (WHO=ours) on library
        LIB, with LD_DEBUG=bindings into DIR/ROLE.bind.<pid>."""
        cmd = core.limited(t) + ['LD_DEBUG=bindings', 'LD_DEBUG_OUTPUT=%s/%s.bind' % (c.dir, role),
                                     'RDMACM_TOOLS_TIMEOUT=%d' % c.tools_timeout]
        if who == 'ours':
            cmd += {'ours': ['LD_LIBRARY_PATH=' + self.ourdir], 'ref': ['LD_PRELOAD=' + core.SYSLIB]}.get(lib, [])
        else:
            # rdma-core's tools buffer stdout in a file: line-buffer it, so
            # that what they print can be waited for (and survives a kill).
            # What `stdbuf -oL` sets, without its exec.
            cmd += ['LD_PRELOAD=' + STDBUF_LIB, '_STDBUF_O=L']
        return cmd + list(argv)

    def realpath_of(self, p):
        if p not in self.real:
            self.real[p] = os.path.realpath(p)
        return self.real[p]

    def bound(self, c, role, who, lib, sym):
        """(ok, evidence or the problem): ROLE bound its rdma_* imports to the
        library WHO/LIB must use, and nothing else, and SYM is among them."""
        want = self.ours if who == 'ours' and lib == 'ours' else self.realpath_of(core.SYSLIB)
        files, targets, hit, n = core.bindings('%s/%s.bind' % (c.dir, role), sym, rsockets=False)
        if not files:
            return False, '%s: no LD_DEBUG=bindings output' % role
        bad = None
        for t in targets:
            if self.realpath_of(t) != want:
                bad = '%s: rdma_* bound to %s, expected %s' % (role, t, want)
        if bad:
            return False, bad
        if hit is None:
            return False, '%s: %s not bound (to %s)' % (role, sym, want)
        return True, '%s %s -> %s' % (role, sym, os.path.basename(want))

    # --- a case's frame -----------------------------------------------------------

    def new_case(self, name):
        c = Case()
        self.run += 1
        c.name, c.run, c.port = name, self.run, 21000 + self.run
        c.dir = '%s/%03d' % (self.logroot, self.run)
        os.makedirs(c.dir, exist_ok=True)
        with open(c.dir + '/case', 'w') as f:
            f.write(name + '\n')
        c.t0, c.why, c.ev, c.secs = now(), '', '', None
        return c

    def end_case(self, c, rerun_allowed):
        """PASS or FAIL with the logs' tails; or, the first time a case fails in
        a way the rerun rule allows, the FLAKY line and True (run it again)."""
        secs = '%ss, exit checked at the end' % c.secs if c.secs else '%ss' % secs_since(c.t0)
        if c.why and rerun_allowed and judge.judge_rerun('tools', '%s (%s)' % (c.name, secs), c.why, c.dir):
            self.keep = True
            return True
        if not c.why:
            self.passed += 1
            say('PASS %s (%s)' % (c.name, secs))
            return False
        self.failed += 1
        self.failures.append('%s: %s' % (c.name, c.why))
        say('FAIL %s (%s)' % (c.name, secs), '    reason: ' + c.why)
        if c.ev:
            say('    bound: ' + c.ev)
        for f in ('server', 'client'):
            if os.path.exists('%s/%s.cmd' % (c.dir, f)):
                say('    %s: %s' % (f, core.read('%s/%s.cmd' % (c.dir, f)).rstrip('\n')))
        for f in ('server.out', 'server.err', 'client.out', 'client.err'):
            core.tail_file('%s/%s' % (c.dir, f), 10, f)
        return False

    def twice(self, fn, *a):
        """Runs one case; if it failed and the rerun rule allows, once more at
        once (the second verdict counts). A deferred pair's exit is judged
        once, at the end."""
        if fn(*a, rerun=True):
            fn(*a, rerun=False)

    # --- pairs ------------------------------------------------------------------------

    def define_pair(self, c, tool, args):
        """Sets c's srv_tool cli_tool, srv and cli (argument vectors), ready
        (cm PORT or line REGEX), persist (the server serves until stopped),
        defer (check the client's exit at the end), ct (the client's time
        limit), check, bind_srv/bind_cli (a symbol each side must have bound)."""
        ip, a, p = self.ip, args.split(), str(c.port)
        c.srv_tool = c.cli_tool = tool
        c.persist, c.defer, c.clients, c.ct = False, False, 1, 60
        c.ready, c.bind_srv, c.bind_cli = ('cm', p), 'rdma_listen', 'rdma_connect'
        if tool == 'rping':
            c.srv = ['-s', '-a', ip, '-p', p] + a
            c.cli = ['-c', '-a', ip, '-p', p] + a
            # -P: the server serves until stopped; two clients, one after the other.
            if '-P' in a:
                c.persist, c.clients = True, 2
        elif tool == 'ucmatose':
            c.srv, c.cli = ['-p', p] + a, ['-s', ip, '-p', p] + a
        elif tool == 'udaddy':
            # The port is always 7174 (-p is the port space).
            c.srv, c.cli, c.ready = a, ['-s', ip] + a, ('cm', '7174')
        elif tool == 'mckey':
            # The receiver plays the server; it is ready once joined. The
            # sender uses one QP whatever -c says: each receiving QP gets
            # what every sending QP sends, and has -C receives posted.
            # On Linux 6.1, rxe leaks a reference on a QP that has sent
            # multicast: destroying it takes 50 s (the kernel warns from
            # __rxe_cleanup), for rdma-core's mckey -s as for ours. So the
            # sender's exit is checked at the end of the run (defer), and
            # all such waits overlap.
            group = '239.77.%d.%d' % (c.run // 250, c.run % 250 + 1)
            c.srv = ['-m', group, '-b', ip] + a
            c.cli = ['-m', group, '-b', ip, '-s'] + a + ['-c', '1']
            c.defer, c.ct = True, 120
            c.ready, c.bind_srv, c.bind_cli = ('line', '^mckey: joined'), 'rdma_leave_multicast', 'rdma_leave_multicast'
        elif tool == 'cmtime':
            c.srv, c.cli = ['-p', p], ['-s', ip, '-p', p] + a
            c.persist, c.ct = True, 120
        elif tool == 'rdma_server':
            c.cli_tool = 'rdma_client'
            c.srv, c.cli = ['-p', p], ['-s', ip, '-p', p]
        else:
            raise SystemExit('unknown tool ' + tool)
        c.check = getattr(self, 'check_' + tool)
        c.ct = self.scaled(c.ct)

    def start_server(self, c, who, lib, secs):
        """Starts the server in the background (c.sp) and waits until it is
        ready. True, or False with c.why."""
        kind, what = c.ready
        cmd = self.mkcmd(c, 'server', who, lib, secs, [self.prog(who, c.srv_tool)] + c.srv)
        with open(c.dir + '/server.cmd', 'w') as f:
            f.write(' '.join(cmd) + '\n')
        c.sp = core.start(cmd, c.dir + '/server.out', c.dir + '/server.err')
        if kind == 'cm':
            s = self.scaled(20)
            wr = core.wait_ready('cm', what, c.sp, s)
        else:
            s = self.scaled(30)
            wr = core.wait_line(c.dir + '/server.out', what, c.sp, s)
        if wr == 0:
            return True
        if wr == 1:
            c.why = 'server exited (%d) before it was ready' % core.wait_exit(c.sp, 5)
        else:
            c.why = 'server not ready (%s %s) within %ds' % (kind, what, s)
        return False

    def client_cmd(self, c, who, lib, secs):
        cmd = self.mkcmd(c, 'client', who, lib, secs, [self.prog(who, c.cli_tool)] + c.cli)
        with open(c.dir + '/client.cmd', 'w') as f:
            f.write(' '.join(cmd) + '\n')
        return cmd

    def client_status(self, c, rc, who='ours', lib='ours'):
        """c.why := what a client's exit status RC says, unless set."""
        if c.why:
            return
        if judge.is_signal(rc) and who == 'ours' and lib == 'ours':
            c.why = 'client killed by signal %d on our library' % (rc - 128)
        elif rc in (124, 137):
            c.why = 'client timed out after %ds' % c.ct
        elif rc != 0:
            c.why = 'client exit status %d' % rc

    def finish_pair(self, c, lib, sw, cw, args, rerun):
        """The tool's checks, the binding evidence (also for failed cases: a
        wrong binding is the first thing to know about a failure), the verdict."""
        if not c.why:
            c.why = c.check(c, args.split()) or ''
        ok, ev = self.bound(c, 'server', sw, lib, c.bind_srv)
        if not ok and not c.why:
            c.why = 'wrong library: ' + ev
        c.ev = ev
        if os.path.exists(c.dir + '/client.cmd'):
            ok, ev = self.bound(c, 'client', cw, lib, c.bind_cli)
            if not ok and not c.why:
                c.why = 'wrong library: ' + ev
            c.ev += '; ' + ev
        return self.end_case(c, rerun)

    def pair(self, tool, lib, sw, cw, args, rerun):
        c = self.new_case(case_name(('pair', tool, lib, sw, cw, args)))
        c.tools_timeout = PEER_TIMEOUT
        self.define_pair(c, tool, args)
        d = c.dir
        if not self.start_server(c, sw, lib, c.ct + 40):
            pass
        elif not c.defer:
            cmd = self.client_cmd(c, cw, lib, c.ct)
            open(d + '/client.out', 'w').close()
            for _ in range(c.clients):
                rc = core.run(cmd, d + '/client.out', d + '/client.err', append=True)
                if cw == 'theirs' and judge.peer_exit_race(tool, rc, d + '/client.err', c.name + ' (client)'):
                    rc = 0
                self.client_status(c, rc, cw, lib)
            s = self.scaled(20)
            if c.persist:
                # Until the server has seen the (last) client go, if it says so.
                if tool == 'rping':
                    core.wait_line(d + '/server.err', '^server DISCONNECT EVENT', c.sp, 5)
                rc = core.wait_exit(c.sp, 0)
                if rc is not None and not c.why:
                    c.why = 'server exited (%d) by itself; it should serve until stopped' % rc
            else:
                rc = core.wait_exit(c.sp, s)
                if rc is not None:
                    if sw == 'theirs' and judge.peer_exit_race(tool, rc, d + '/server.err', c.name + ' (server)'):
                        rc = 0
                    if judge.is_signal(rc) and sw == 'ours' and lib == 'ours' and not c.why:
                        c.why = 'server killed by signal %d on our library' % (rc - 128)
                    if rc != 0 and not c.why:
                        c.why = 'server exit status %d' % rc
                elif not c.why:
                    c.why = 'server still running %ds after the client ended' % s
        else:
            # The server ends first; then the client is done but for its exit.
            cmd = self.client_cmd(c, cw, lib, c.ct)
            cp = core.start(cmd, d + '/client.out', d + '/client.err')
            rc = core.wait_exit(c.sp, c.ct)
            if rc is None:
                c.why = 'server still running after %ds' % c.ct
            elif rc != 0:
                c.why = 'server exit status %d' % rc
            core.wait_line(d + '/client.out', '^data transfers complete$', cp, self.scaled(20))
            if not c.why and core.alive(cp):
                c.secs = secs_since(c.t0)
                self.deferred.append((cp, tool, lib, sw, cw, args, c))
                core.stop_proc(c.sp)
                return False
            rc = core.wait_exit(cp, c.ct)
            if rc is None:
                core.stop_proc(cp)
                rc = core.status(cp)
            self.client_status(c, rc, cw, lib)
        core.stop_proc(c.sp)
        return self.finish_pair(c, lib, sw, cw, args, rerun)

    def finish_deferred(self):
        """The verdicts of the deferred pairs, once their clients have exited."""
        for cp, tool, lib, sw, cw, args, c in self.deferred:
            c.why, c.ev = '', ''
            rc = core.wait_exit(cp, c.ct)
            if rc is not None:
                self.client_status(c, rc, cw, lib)
            else:
                c.why = 'client still running %ds after it was done' % c.ct
                core.stop_proc(cp)
            self.finish_pair(c, lib, sw, cw, args, False)
        self.deferred = []

    # --- checks: the problem, or None ---------------------------------------------------

    def need(self, c, f, regex, what):
        if not has_line('%s/%s' % (c.dir, f), regex):
            return '%s: no %s' % (f, what)

    def check_rping(self, c, a):
        n = int(arg_after('-C', a)) * c.clients
        for f in ('server.out', 'server.err', 'client.out', 'client.err'):
            if has_line('%s/%s' % (c.dir, f), '[Mm]ismatch'):
                return '%s: data mismatch reported' % f
        why = self.need(c, 'server.err', r'^server DISCONNECT EVENT\.\.\.$', "'server DISCONNECT EVENT...'")
        if why or '-v' not in a:
            return why
        k = count_lines(c.dir + '/client.out', '^ping data: rdma-ping-')
        if k != n:
            return 'client printed %d of %d pings' % (k, n)
        k = count_lines(c.dir + '/server.out', '^server ping data: rdma-ping-')
        if k != n:
            return 'server printed %d of %d pings' % (k, n)
        n //= c.clients
        return self.need(c, 'client.out', '^ping data: rdma-ping-%d: ' % (n - 1), 'last ping rdma-ping-%d' % (n - 1))

    def needs(self, c, *checks):
        for f, regex, what in checks:
            why = self.need(c, f, regex, what)
            if why:
                return why

    def check_ucmatose(self, c, a):
        why = self.needs(c, ('server.out', '^cmatose: starting server$', "'cmatose: starting server'"),
                         ('client.out', '^cmatose: starting client$', "'cmatose: starting client'"),
                         ('client.out', '^data transfers complete$', "'data transfers complete'"),
                         ('server.out', '^disconnected$', "'disconnected'"),
                         ('server.out', '^return status 0$', "'return status 0'"),
                         ('client.out', '^return status 0$', "'return status 0'"))
        if not why and '-m' in a:
            why = self.need(c, 'server.out', '^migrating to new event channel$', "'migrating to new event channel'")
        return why

    def check_udaddy(self, c, a):
        return self.needs(c, ('server.out', '^udaddy: starting server$', "'udaddy: starting server'"),
                          ('client.out', '^udaddy: starting client$', "'udaddy: starting client'"),
                          ('server.out', '^data transfers complete$', "'data transfers complete'"),
                          ('client.out', '^data transfers complete$', "'data transfers complete'"),
                          ('server.out', '^return status 0$', "'return status 0'"),
                          ('client.out', '^return status 0$', "'return status 0'"))

    def check_mckey(self, c, a):
        return self.needs(c, ('server.out', '^mckey: joined dgid: [0-9a-f:.]+ mlid 0x[0-9a-f]+ sl [0-9]+$',
                              "'mckey: joined dgid: ...'"),
                          ('client.out', '^mckey: joined dgid: ', "'mckey: joined dgid: ...'"),
                          ('server.out', '^data transfers complete$', "'data transfers complete'"),
                          ('server.out', '^return status 0$', "'return status 0'"),
                          ('client.out', '^return status 0$', "'return status 0'"))

    def check_cmtime(self, c, a):
        return self.needs(c, ('client.out', '^step +total ms +max ms +min us +us / conn$', 'timing table'),
                          *[('client.out', r'^%s *: +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$' % s, "'%s' row" % s)
                            for s in ('create id', 'resolve addr', 'resolve route', 'create qp', 'connect',
                                      'disconnect', 'destroy')])

    def check_rdma_server(self, c, a):
        return self.needs(c, ('server.out', '^rdma_server: end 0$', "'rdma_server: end 0'"),
                          ('client.out', '^rdma_client: end 0$', "'rdma_client: end 0'"))

    # --- failure paths of our tools -------------------------------------------------------

    def fail(self, name, lib, want, regex, mx, tool, *argv, rerun):
        """Our tool ARGV must exit with WANT ("nonzero" or a number) within MX
        seconds, and print a line matching REGEX (stdout or stderr)."""
        c = self.new_case(case_name(('fail', name, lib, want, regex, mx, tool)))
        c.tools_timeout = PEER_TIMEOUT
        mx = self.scaled(mx)
        limit = mx + 20
        cmd = self.mkcmd(c, 'client', 'ours', lib, limit, [os.path.join(self.o.tools, tool)] + list(argv))
        with open(c.dir + '/client.cmd', 'w') as f:
            f.write(' '.join(cmd) + '\n')
        rc = core.run(cmd, c.dir + '/client.out', c.dir + '/client.err')
        secs = secs_since(c.t0)
        if judge.is_signal(rc) and lib == 'ours':
            c.why = 'killed by signal %d on our library' % (rc - 128)
        elif rc in (124, 137):
            c.why = 'hung: killed after %ds' % limit
        elif want == 'nonzero' and rc == 0:
            c.why = 'exit status 0, expected a failure'
        elif want != 'nonzero' and str(rc) != want:
            c.why = 'exit status %d, expected %s' % (rc, want)
        elif not has_line(c.dir + '/client.out', regex) and not has_line(c.dir + '/client.err', regex):
            c.why = 'no message matching /%s/' % regex
        elif int(secs.split('.')[0]) >= mx:
            c.why = 'took %ss, more than %ds' % (secs, mx)
        return self.end_case(c, rerun)

    def stall(self, tool, lib, sw, cw, stopped, rerun):
        """A pair where one side (STOPPED: server or client) is stopped with
        SIGSTOP once the exchange is under way (rping: after 3 pings; the
        others: as soon as the server listens). The other side, which is ours,
        must fail within the peer timeout (RDMACM_TOOLS_TIMEOUT=STALL_TIMEOUT)
        and say so; then the stopped one is killed."""
        c = self.new_case(case_name(('stall', tool, lib, sw, cw, stopped)))
        c.tools_timeout = STALL_TIMEOUT
        side = 'server' if stopped == 'client' else 'client'
        self.define_pair(c, tool, '-v' if tool == 'rping' else '')
        if tool == 'cmtime':
            c.cli += ['-c', '5']
        limit = STALL_TIMEOUT + self.scaled(15)
        victim = cp = None
        if self.start_server(c, sw, lib, 120):
            if stopped == 'server':
                victim = c.sp.pid
                core.stop_signal(victim, signal.SIGSTOP)
            cp = core.start(self.client_cmd(c, cw, lib, 120), c.dir + '/client.out', c.dir + '/client.err')
            live = cp
            if stopped == 'client':
                live = c.sp
                if core.wait_line(c.dir + '/client.out', '^ping data: rdma-ping-2:', cp, self.scaled(20)) != 0:
                    c.why = 'the client did not get 3 pings through'
                else:
                    victim = cp.pid
                    core.stop_signal(victim, signal.SIGSTOP)
            c.t0 = now()  # timed from the stop on
            if not c.why:
                rc = core.wait_exit(live, limit)
                if rc is None:
                    c.why = 'the %s still runs %ds after its peer stopped answering' % (side, limit)
                elif rc == 0:
                    c.why = 'the %s exited 0 though its peer stopped answering' % side
                elif rc in (124, 137):
                    c.why = 'the %s hung (killed by timeout)' % side
                elif not has_line('%s/%s.err' % (c.dir, side),
                                  'nothing from the peer|timed out|still waiting|no answer|within [0-9]+ ms'):
                    c.why = 'the %s failed (%d) without saying that its peer went silent' % (side, rc)
            if victim:
                core.stop_signal(victim, signal.SIGKILL)
            if cp:
                core.stop_proc(cp)
        core.stop_proc(c.sp)
        return self.end_case(c, rerun)

    # --- main --------------------------------------------------------------------------------

    def main(self):
        o = self.o
        lib_list = o.libs.split(',')
        if o.list:
            for c in cases(lib_list, o.full, 'RXE_IP'):
                if not o.only or re.search(o.only, case_name(c)):
                    say(case_name(c))
            return 0
        self.ip = os.environ.get('RXE_IP') or core.die(
            'tools', 'RXE_IP must be the IPv4 address of the RDMA device (run inside tests/vm/rxe-vm)')
        if not os.path.isfile(o.lib):
            core.die('tools', 'no library at %s (build first, or --lib)' % o.lib)
        if not os.access(os.path.join(o.tools, 'rping'), os.X_OK):
            core.die('tools', 'no tools in %s (build first, or --tools)' % o.tools)
        for t in ('rping', 'ucmatose', 'udaddy', 'mckey', 'cmtime', 'rdma_server', 'rdma_client'):
            if not shutil.which(t):
                core.die('tools', "rdma-core's %s is missing (apt-get install rdmacm-utils)" % t)
        self.ours = os.path.realpath(o.lib)
        self.ourdir = os.path.dirname(self.ours)
        if o.logdir:
            self.logroot = o.logdir
            os.makedirs(o.logdir, exist_ok=True)
        else:
            self.logroot = tempfile.mkdtemp(prefix='rdmacm-tools.', dir=os.environ.get('TMPDIR', '/tmp'))
        say("tools: ours = %s on %s; rdma-core's = rdmacm-utils %s on %s"
            % (o.tools, self.ours, core.dpkg_version('rdmacm-utils') or '', os.path.realpath(core.SYSLIB)),
            'tools: library modes for our tools: %s; device at %s; logs in %s' % (o.libs, self.ip, self.logroot))
        t_all = now()
        for c in cases(lib_list, o.full, self.ip):
            if o.only and not re.search(o.only, case_name(c)):
                continue
            self.twice(getattr(self, c[0]), *c[1:])
        # The verdicts of the pairs whose client is still exiting.
        self.finish_deferred()
        say('tools: %d cases in %ss' % (self.run, secs_since(t_all)))
        return core.end_run('tools', '%d passed, %d failed' % (self.passed, self.failed), self.failed,
                            self.failures, self.logroot, self.keep)


def add_options(p, repo):
    p.add_argument('--tools', default=os.path.join(repo, 'build/examples'))
    p.add_argument('--lib', default=os.path.join(repo, 'build/src/librdmacm.so.1'))
    p.add_argument('--libs', default='ours,ref')
    p.add_argument('--only', default='')
    p.add_argument('--keep', action='store_true')
    p.add_argument('--logdir', default='')
    p.add_argument('--scale', type=int, default=100)
    p.add_argument('--list', action='store_true')
    p.add_argument('--full', action='store_true')


def main(o):
    return Tools(o).main()
