#!/usr/bin/env python3
"""rsockets against the device itself (issue 26's table), in one run: the
device with raw verbs (perftest over rdma_cm, -R), rdma-core's rsockets
(the system librdmacm.so.1 preloaded under rdma-core's own rstream and
riostream), ours (--lib preloaded the same way), and, through the rsocket
preload, iperf3 and sockperf (kernel TCP, rdma-core's librspreload, ours).
Rounds alternate between the columns (every round runs each column once;
even rounds in the reverse order); each figure is the median over the
rounds. Numbers only, never a verdict: these machines are shared and noisy.

  bench/rsocket_speed.py [--lib PATH] [--preload PATH] [--copies PATH]
                         [--runs R] [--count N] [--secs S] [--quick | --smoke]

  --lib PATH      our librdmacm.so.1 (default: build/src/librdmacm.so.1)
  --preload PATH  our librspreload.so, on --lib (default: its build tree's
                  preload/librspreload.so; "none": no preload rows)
  --copies PATH   libsend_copies.so (bench/send_copies.c; default: the build
                  tree's bench/libsend_copies.so; "none": no copies row)
  --runs R        rounds (default 3)
  --count N       64 KiB transfers per bandwidth run (default 1000; 1 MiB
                  runs move the same bytes), round trips per latency run
                  (the same N)
  --secs S        iperf3 and sockperf seconds (default 3)
  --quick         one round, tiny counts (skips rdma-core's preload, which
                  fails anyway)
  --smoke         the least that runs every part of this script once
                  (bench.smoke; no figures): --quick with N=10 and one pair
                  per kind: the device's 64 KiB ib_write_bw and ib_send_lat,
                  each library's 64 KiB rstream under libsend_copies.so
                  (its Gb/s and its copied/sent from one pair), ours'
                  zero-copy copied/sent (-T b), the preload's programs
                  through ours (not kernel TCP's column)

  device         ib_write_bw -R -s SIZE -n N; ib_send_lat -R -s 64 -n N (t_avg)
  rsockets       rstream -S SIZE -C N (both directions in turn; Gb/s as rstream
                 prints it); rstream -S 64 -C 1 -I N [-T b]; riostream -S 64 -C 1 -I N
  latency        one way: half a round trip (perftest's, rstream's and
                 sockperf's convention); means over the run (perftest's t_avg)
  copied/sent    the rstream client (64 KiB, N/5 sends) under
                 libsend_copies.so: libc copy calls (memcpy, memmove, mempcpy)
                 made inside its send calls, bytes per byte those calls sent;
                 inlined copies and other threads' are not seen
  blocking       the bandwidth runs again with -T b (blocking sends), and
                 ours once more with RSOCKET_ZCOPY_MIN=65536 (rsocket(7):
                 sends of 64 KiB and up go from the caller's buffer; only
                 blocking sends can), with its copied/sent
  preload        iperf3 -l 64K -t S (Gb/s, receiver); sockperf ping-pong
                 --tcp -m 64 -t S (mean one-way us); both ends preloaded (or
                 neither: kernel TCP, loopback in this host, no wire); a
                 preloaded figure counts only if rxe0 sent packets

Exit status 1 if any run of the device, rdma-core's rsockets, ours or
kernel TCP failed (after printing what it has); rdma-core's preload may fail
(rdma-core 44's runs neither program): "fail" in its cell, tried once.

Every process is started from here, without a shell, timeout, env, awk or
grep in front of it or after it (each exec costs 60-500 ms of CPU under
TCG): tests/rxe/runner/core.py bounds them and sees listeners over netlink,
and this parses their output itself.

Run it where there is an RDMA device, e.g. in the Soft-RoCE VM:
  tests/vm/rxe-vm run -- bench/rsocket_speed.py --lib build/src/librdmacm.so.1
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'rxe', 'runner'))
import core  # noqa: E402  (time limits, listeners over netlink, rxe0's counter)
import rsocket_speed_table as table  # noqa: E402  (output parsed, medians, the table)

SYSLIB = '/usr/lib/x86_64-linux-gnu/librdmacm.so.1'
SYSPRELOAD = '/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so'
PAIR_TIMEOUT = int(os.environ.get('PAIR_TIMEOUT') or 120)


def err(*lines):
    for line in lines:
        print(line, file=sys.stderr, flush=True)


def usage():
    err(__doc__.rstrip())
    sys.exit(2)


def options(argv):
    o = dict(lib=os.path.join(HERE, '../build/src/librdmacm.so.1'), preload='', copies='',
             runs=3, count=1000, secs=3, quick=False, smoke=False)
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ('--lib', '--preload', '--copies', '--runs', '--count', '--secs') and i + 1 < len(argv):
            v = argv[i + 1]
            i += 1
            if a in ('--runs', '--count', '--secs'):
                if not v.isdigit():
                    usage()
                v = int(v)
            o[a[2:]] = v
        elif a == '--quick':
            o.update(quick=True, runs=1, count=50, secs=1)
        elif a == '--smoke':
            o.update(quick=True, smoke=True, runs=1, count=10, secs=1)
        else:
            usage()
        i += 1
    o['lib'] = os.path.realpath(o['lib'])
    build = os.path.dirname(os.path.dirname(o['lib']))
    o['preload'] = o['preload'] or os.path.join(build, 'preload/librspreload.so')
    o['copies'] = o['copies'] or os.path.join(build, 'bench/libsend_copies.so')
    for k in ('preload', 'copies'):
        o[k] = None if o[k] == 'none' else os.path.realpath(o[k])
    return o


def preloadable(paths):
    """All of PATHS preload (one /bin/true under them all): the loader skips a
    preload it cannot load with one line on stderr and runs the program anyway,
    so a wrong --lib would otherwise measure the program's own library."""
    r = subprocess.run(['/bin/true'], env=dict(os.environ, LD_PRELOAD=' '.join(paths)),
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode == 0 and not r.stderr:
        return True
    err('cannot preload %s: %s' % (' '.join(paths), r.stderr.decode(errors='replace').strip()
                                  or '/bin/true failed under it'))
    return False


class Speed:
    def __init__(self, o, ip, dev, out):
        self.o, self.ip, self.dev, self.out = o, ip, dev, out
        self.res = {}       # (column, figure) -> every round's result
        self.port = 24000   # apart from the other benchmarks' ports
        self.zc = []        # the environment of ours' zero-copy runs, else empty
        self.n = 0          # the round
        self.big = max(o['count'] // 16, 5)    # perftest: at least 5 iterations
        self.copyn = max(o['count'] // 5, 10)

    def next_port(self):
        self.port += 1
        return self.port

    def record(self, col, fig, v):
        """One run's result ("fail" when V is empty)."""
        self.res.setdefault((col, fig), []).append(v or 'fail')

    def path(self, name):
        return os.path.join(self.out, name)

    def log(self, name):
        return core.read(self.path(name), '')

    def start(self, argv, name):
        """core.start with stdout and stderr in one new file NAME (both
        appending, as one `>NAME 2>&1` descriptor would: neither overwrites the other)."""
        f = self.path(name)
        if os.path.exists(f):
            os.unlink(f)
        return core.start(argv, f, f, append=True)

    def run(self, argv, name):
        p = self.start(argv, name)
        p.wait()
        return core.status(p)

    # --- one rdma_cm pair ------------------------------------------------------------

    def pair(self, what, port, server, client):
        """SERVER (waited for until an rdma_cm id listens on PORT) and its CLIENT,
        each bounded; output in srv and cli. True once the client and then the
        server exited 0; otherwise says why (WHAT, both logs)."""
        lim = core.limited(PAIR_TIMEOUT)
        s = self.start(lim + server, 'srv')
        rc = core.wait_ready('cm', port, s, 30)
        if rc:
            err('the server %s port %d%s:' % ('exited before it listened on' if rc == 1 else 'did not listen on',
                                            port, '' if rc == 1 else ' within 30 s'),
                self.log('srv').rstrip(), '%s: the server failed' % what)
            core.stop_proc(s)
            return False
        rc = self.run(lim + client, 'cli')
        if rc:
            err('%s: the client failed (status %d):' % (what, rc), self.log('cli').rstrip(), self.log('srv').rstrip())
            core.stop_proc(s)
            return False
        rc = core.wait_exit(s, 30)
        if rc != 0:
            err('%s: the server failed (status %s):' % (what, 'still running' if rc is None else rc),
                self.log('srv').rstrip())
            core.stop_proc(s)
            return False
        return True

    # --- the device: perftest --------------------------------------------------------

    def perftest(self, fig, field, prog, *args):
        """One perftest pair over rdma_cm; FIELD of its result line (the one that
        starts with the size) is FIG. -F: TCG's clock fails perftest's CPU
        frequency check, and perftest times with the TSC scaled by a frequency
        it estimates, so the client's wall-clock time (start-up and connection
        included) is FIG.wall, a bound: Gb/s at least (bw), us at most (lat)."""
        size, iters = core.arg_after('-s', args), int(core.arg_after('-n', args))
        what = '%s %s' % (prog, ' '.join(args))
        port, v = self.next_port(), ''

        def once(port):
            cmd = [prog, '-F', '-R', '-d', self.dev, '-p', str(port)] + list(args)
            return self.pair('%s (run %d)' % (what, self.n), port, cmd, cmd + [self.ip])
        t0 = time.time()
        ok = once(port)
        if not ok and self.perftest_race(what):
            t0 = time.time()
            ok = once(port + 100)
        if ok:
            t = (time.time() - t0) * 1e6
            rows = [w for w in (line.split() for line in self.log('cli').split('\n'))
                    if len(w) > 1 and w[0] == size and w[1].isdigit()]
            v = rows[-1][field - 1] if rows and len(rows[-1]) >= field else ''
            if not v:
                err('%s printed no result line:' % prog, self.log('cli').rstrip())
            v = table.clock_ok(v)
            if prog.endswith('_lat'):  # t_typical too (perftest's median; t_avg carries TCG's stalls)
                self.record('device', fig + '.typ', table.clock_ok(rows[-1][4] if rows and len(rows[-1]) >= 6 else ''))
            if self.n == 1:
                err('    %s: %s' % (what, '\n'.join(re.sub(' +', ' ', line) for line in self.log('cli').split('\n')
                                                      if re.match(' +%s +' % size, line))))
            # the client starts once the server listens: t0 is a little early
            if prog.endswith('_bw'):
                self.record('device', fig + '.wall', '%.3f' % (int(size) * iters * 8 / t / 1000))
            else:
                self.record('device', fig + '.wall', '%.1f' % (t / iters / 2))
        self.record('device', fig, v)

    def perftest_race(self, what):
        """The pair just failed with perftest's own listener race, by its sign
        (tests/rxe/runner/judge.py): after the control connection its server
        makes a new listener for the data connection, and a quick client's
        request in between is rejected (status 8; the client then crashes in
        perftest's retry). Its pair runs once more."""
        if not any(line.startswith('Event: RDMA_CM_EVENT_REJECTED; error: 8.')
                   for line in self.log('cli').split('\n')):
            return False
        err('RETRY %s (run %d): its client was rejected before its server listened again '
            "(perftest's own race); once more" % (what, self.n))
        return True

    # --- rsockets: rstream and riostream ---------------------------------------------

    def rs(self, col, lib, prog, fig, field, *args):
        """One rstream or riostream pair, both on LIB; FIELD of its result line
        (7: Gb/s, 8: usec/xfer) is COL's FIG."""
        port = self.next_port()
        env = self.zc + ['LD_PRELOAD=' + lib]
        what = '%s %s (%s, run %d)' % (prog, ' '.join(args), col, self.n)
        ok = self.pair(what, port, env + [prog, '-b', self.ip, '-p', str(port)] + list(args),
                       env + [prog, '-s', self.ip, '-p', str(port)] + list(args))
        self.record(col, fig, self.result(prog, col, field) if ok else '')

    def result(self, prog, col, field):
        """FIELD of the result line the client (cli) ended with, or '' (it says why)."""
        lines = self.log('cli').rstrip('\n').split('\n')
        if re.match(core.RSTREAM_RESULT_RE, lines[-1]):
            return lines[-1].split()[field - 1]
        err('%s printed no result line (%s, run %d):' % (prog, col, self.n), self.log('cli').rstrip())
        return ''

    def copies(self, col, lib, fig, *args, bw=None):
        """The rstream client's send calls under libsend_copies.so (64 KiB,
        COPYN sends): bytes copied per byte sent. With BW (--smoke), its
        Gb/s are that figure too (the same 64 KiB rstream pair: one fewer)."""
        port, v, f = self.next_port(), '', self.path('copies')
        if os.path.exists(f):
            os.unlink(f)
        rest = ['-S', '65536', '-C', str(self.copyn)] + list(args)
        ok = self.pair('rstream under libsend_copies.so (%s, run %d)' % (col, self.n), port,
                       self.zc + ['LD_PRELOAD=' + lib, 'rstream', '-b', self.ip, '-p', str(port)] + rest,
                       self.zc + ['LD_PRELOAD=%s %s' % (self.o['copies'], lib), 'SEND_COPIES_OUT=' + f,
                                  'rstream', '-s', self.ip, '-p', str(port)] + rest)
        if ok:
            w = core.read(f, '').split()
            if len(w) >= 2 and int(w[1]) > 0:
                v = '%.3f' % (int(w[0]) / int(w[1]))
            else:
                err('libsend_copies.so counted no bytes sent (%s): %s' % (col, core.read(f, '').strip()))
        self.record(col, fig, v)
        if bw:
            self.record(col, bw, self.result('rstream', col, 7) if ok else '')

    # --- programs under a preload ----------------------------------------------------

    def env_of(self, col):
        if col == 'ours':
            return ['LD_PRELOAD=' + self.o['preload'], 'LD_LIBRARY_PATH=' + os.path.dirname(self.o['lib'])]
        return ['LD_PRELOAD=' + SYSPRELOAD] if col == 'rdma-core' else []

    def server(self, col, port, cmd):
        """A server in the background, waited for until it listens (rdma_cm or TCP)."""
        p = self.start(core.limited(120) + self.env_of(col) + cmd, 'server.log')
        rc = core.wait_until(lambda: core.cm_listening(port) or core.tcp_listening(port), p, 20)
        if rc:
            last = (self.log('server.log').rstrip('\n').split('\n') or [''])[-1]
            why = 'exited before it listened on port %d' if rc == 1 else 'did not listen on port %d within 20 s'
            err('    %s: %s %s: %s' % (col, cmd[0], why % port, last))
        return p, rc == 0

    def client(self, col, cmd, limit):
        """'ok' only if CMD succeeded and, preloaded (not tcp), rxe0 sent
        packets meanwhile; 'no-rdma' when it succeeded without them (a
        fallback to kernel TCP); else 'fail'."""
        p0 = core.sent_pkts()
        rc = self.run(core.limited(limit) + self.env_of(col) + cmd, 'client.log')
        if rc:
            last = (self.log('client.log').rstrip('\n').split('\n') or [''])[-1]
            err('    %s: %s failed (status %d): %s' % (col, ' '.join(cmd), rc, last))
            return 'fail'
        if col != 'tcp' and core.sent_pkts() - p0 < 100:
            err('    %s: %s sent no packets on %s (kernel TCP fallback?)' % (col, ' '.join(cmd), self.dev))
            return 'no-rdma'
        return 'ok'

    def programs(self, col):
        """iperf3 and sockperf ping-pong through that column."""
        secs, limit = self.o['secs'], self.o['secs'] * 4 + 60
        if col == 'rdma-core':
            # rdma-core 44's preload runs neither (DESIGN.md): tried once, with a
            # short limit (a hang is its usual failure), then "fail".
            limit = secs * 2 + 15
            tried = self.res.get((col, 'iperf3'), []) + self.res.get((col, 'pp'), [])
            if self.res.get((col, 'iperf3')) and not any(table.number(v) for v in tried):
                self.record(col, 'iperf3', 'fail')
                self.record(col, 'pp', 'fail')
                return
        ip, t = self.ip, str(secs)
        for fig, srv, cli, parse in (
                ('iperf3', lambda p: ['iperf3', '-s', '-1', '-B', ip, '-p', p],
                 lambda p: ['iperf3', '-c', ip, '-p', p, '-t', t, '-l', '64K', '-f', 'm'], table.iperf3_gbits),
                ('pp', lambda p: ['sockperf', 'sr', '--tcp', '-i', ip, '-p', p],
                 lambda p: ['sockperf', 'pp', '--tcp', '-i', ip, '-p', p, '-t', t, '-m', '64'], table.sockperf_us)):
            port = str(self.next_port())
            p, ok = self.server(col, int(port), srv(port))
            r = self.client(col, cli(port), limit) if ok else 'fail'
            self.record(col, fig, parse(self.log('client.log')) if r == 'ok' else r)
            core.stop_proc(p)

    # --- the rounds ------------------------------------------------------------------

    def column(self, col):
        """One round of that column's figures."""
        o, count, big, copies = self.o, str(self.o['count']), str(self.big), self.o['copies']
        if col == 'device':
            self.perftest('bw64', 4, 'ib_write_bw', '-s', '65536', '-n', count, '--report_gbits')
            if not o['smoke']:
                self.perftest('bw1m', 4, 'ib_write_bw', '-s', '1048576', '-n', big, '--report_gbits')
            self.perftest('lat', 6, 'ib_send_lat', '-s', '64', '-n', count)
            if not o['smoke']:
                self.perftest('late', 6, 'ib_send_lat', '-s', '64', '-n', count, '-e')
            return
        if col == 'tcp':
            return self.programs('tcp')
        lib = o['lib'] if col == 'ours' else SYSLIB
        if o['smoke'] and copies:  # one 64 KiB rstream pair: its Gb/s and its copies
            self.copies(col, lib, 'copies', bw='bw64')
        else:
            self.rs(col, lib, 'rstream', 'bw64', 7, '-S', '65536', '-C', count)
        if not o['smoke']:
            self.rs(col, lib, 'rstream', 'bw1m', 7, '-S', '1048576', '-C', big)
            self.rs(col, lib, 'rstream', 'lat', 8, '-S', '64', '-C', '1', '-I', count)
            self.rs(col, lib, 'rstream', 'latb', 8, '-S', '64', '-C', '1', '-I', count, '-T', 'b')
            self.rs(col, lib, 'riostream', 'rio', 8, '-S', '64', '-C', '1', '-I', count)
        if copies and not o['smoke']:
            self.copies(col, lib, 'copies')
        if not o['smoke']:
            # Blocking sends, and ours with zero-copy sends (RSOCKET_ZCOPY_MIN):
            # rstream's defaults are non-blocking, which never go zero-copy.
            self.rs(col, lib, 'rstream', 'bw64b', 7, '-S', '65536', '-C', count, '-T', 'b')
            self.rs(col, lib, 'rstream', 'bw1mb', 7, '-S', '1048576', '-C', big, '-T', 'b')
        if col == 'ours':
            self.zc = ['RSOCKET_ZCOPY_MIN=65536']
            if not o['smoke']:
                self.rs('zc', lib, 'rstream', 'bw64b', 7, '-S', '65536', '-C', count, '-T', 'b')
                self.rs('zc', lib, 'rstream', 'bw1mb', 7, '-S', '1048576', '-C', big, '-T', 'b')
            if copies:
                self.copies('zc', lib, 'copiesb', '-T', 'b')
            self.zc = []
        if copies and not o['smoke']:
            self.copies(col, lib, 'copiesb', '-T', 'b')
        if o['preload'] and (col == 'ours' or not o['quick']):
            self.programs(col)

    def rounds(self):
        cols = ['device', 'rdma-core', 'ours']
        # (--smoke: kernel TCP's column runs the same programs() as ours' preload,
        # which it runs; and bench/preload_programs.sh runs both with the same programs)
        if self.o['preload'] and not self.o['smoke']:
            cols.append('tcp')
        t0 = time.time()
        for self.n in range(1, self.o['runs'] + 1):
            for col in (cols if self.n % 2 else cols[::-1]):
                err('round %d: %s (at %.1f s)' % (self.n, col, time.time() - t0))
                self.column(col)
        err('rounds: %.1f s' % (time.time() - t0))


def main():
    o = options(sys.argv[1:])
    if not preloadable([o['lib'], SYSLIB] + [p for p in (o['preload'], o['copies']) if p]):
        return 1
    ip, dev = os.environ.get('RXE_IP'), os.environ.get('RXE_DEV') or 'rxe0'
    if not ip:
        err('RXE_IP: the RDMA device address (set in the Soft-RoCE VM)')
        return 1
    for p in ['rstream', 'riostream', 'ib_write_bw', 'ib_send_lat'] + (['iperf3', 'sockperf'] if o['preload'] else []):
        if not shutil.which(p):
            err('%s is missing (scripts/deps.sh installs it)' % p)
            return 1
    out = tempfile.mkdtemp()
    try:
        s = Speed(o, ip, dev, out)
        s.rounds()
        return table.report(s.res, o, dev, SYSLIB, SYSPRELOAD)
    finally:
        for p in core.PROCS:
            core.stop_proc(p)
        shutil.rmtree(out, ignore_errors=True)


if __name__ == '__main__':
    core.on_signals()
    sys.exit(main())
