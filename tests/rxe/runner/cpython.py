"""CPython's own socket tests (test.test_socket from Debian's
libpython3.11-testsuite: a public suite nobody here wrote), the TCP and UDP
classes, run three ways in one boot: over the kernel (no preload), over our
librspreload.so and over rdma-core 44's. Their server address is rxe0's
($RXE_IP, $RXE_IP6), so that preloaded sockets can take the RDMA path.

Each way is one process of tests/rxe/public/cpython_socket.py (a test that
hangs is killed after --hang seconds without an end, noted as `hang`, and the
process started again past it). The table gives each class's tests that pass
on the kernel, and how many of those pass on each preload; every test the
kernel passes and ours does not is listed, with rdma-core's outcome beside it.

Asserted: the kernel run is whole (no hang); ours passes every test the kernel
passes, except those named in tests/rxe/public/differences.txt (each with its
reason, as rsocket(7) gives it; an entry that ours passes is stale and fails
the run too); ours moved rxe0 packets (the tests' bytes took RDMA) and the
kernel's did not. rdma-core's column is information.
"""
import os
import re
import sys

import core

SCRIPT = os.path.join(core.__file__.rsplit('/runner/', 1)[0], 'public', 'cpython_socket.py')
DIFFS = os.path.join(os.path.dirname(SCRIPT), 'differences.txt')
REFERENCE_PRELOAD = '/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so'
# The TCP and UDP classes of test_socket (UDP-Lite, SCTP, Unix, CAN, RDS ...
# are no socket a preload takes; the Windows and macOS ones skip on Linux).
CLASSES = '''BasicTCPTest BasicTCPTest2 BasicUDPTest BasicSocketPairTest ContextManagersTest
GeneralModuleTests InheritanceTest InterruptedRecvTimeoutTest InterruptedSendTimeoutTest
NetworkConnectionAttributesTest NetworkConnectionBehaviourTest NetworkConnectionNoServer
NonBlockingTCPTests RecvmsgIntoTCPTest RecvmsgIntoUDP6Test RecvmsgIntoUDPTest RecvmsgTCPTest
RecvmsgUDP6Test RecvmsgUDPTest SendfileUsingSendTest SendfileUsingSendfileTest SendmsgTCPTest
SendmsgUDP6Test SendmsgUDPTest TCPCloserTest TCPTimeoutTest UDPTimeoutTest'''.split()


def add_options(p, repo):
    p.add_argument('--lib', required=True, help="our librspreload.so")
    p.add_argument('--rdmacm', required=True, help="our librdmacm.so.1 (goes first on LD_LIBRARY_PATH)")
    p.add_argument('--reference', default=REFERENCE_PRELOAD, help="rdma-core's librspreload.so ('' to skip)")
    p.add_argument('--classes', default=' '.join(CLASSES))
    p.add_argument('--hang', type=int, default=60, help="seconds a test may run (the longest take 3 s in a quiet VM, over 20 s on a host at load 8)")
    p.add_argument('--limit', type=int, default=400, help="seconds for one way in all (ours: 45-75 s in a quiet VM, 295 s at load 8)")
    p.add_argument('--logdir', default='/tmp/cpython-socket')


def read_differences(path):
    """test id -> reason, from DIFFERENCES ("<test id> <reason>" lines, '#' comments)."""
    out = {}
    for line in core.lines_of(path):
        line = line.strip()
        if line and not line.startswith('#'):
            tid, _, why = line.partition(' ')
            out[tid] = why.strip()
    return out


def traceback_of(path, tid):
    """The lines of TID's last traceback in PATH (cpython_socket.py's stderr)."""
    out, inside = [], False
    for line in core.lines_of(path):
        if line.startswith('TRACEBACK '):
            inside = line.split()[1] == tid
            if inside:
                out = []
        elif line.startswith('END TRACEBACK'):
            inside = False
        elif inside:
            out.append(line.rstrip())
    return out


def run_way(o, name, env, classes):
    """Runs the classes under ENV: test id -> outcome (ok, fail, error, skip,
    hang, or `lost` for those a process died in before they ended)."""
    outcomes, skip, t0, start = {}, [], core.now(), 0
    log = os.path.join(o.logdir, name + '.out')
    err = os.path.join(o.logdir, name + '.err')
    open(log, 'w').close()
    while core.now() - t0 < o.limit:
        left = max(1, int(o.limit - (core.now() - t0)))
        argv = core.limited(left) + env + ['CPYTHON_SOCKET_SKIP=' + ' '.join(skip),
                                           '/usr/bin/python3.11', SCRIPT] + classes
        p = core.start(argv, log, err, append=True)
        current, last, hung = None, core.now(), False
        while True:
            lines = core.lines_of(log)
            for line in lines[start:]:
                w = line.split()
                if len(w) >= 2 and w[0] == 'START':
                    current, last = w[1], core.now()
                elif len(w) >= 3 and w[0] == 'END':
                    outcomes[w[1]] = w[2]
                    current, last = None, core.now()
            start = len(lines)
            if not core.alive(p):
                break
            if current and core.now() - last > o.hang:
                hung = True
                core.stop_proc(p)
                break
            core.wait_exit(p, 0.2)
        if current is None:  # every test it started has ended
            if core.status(p) in (124, 137):
                core.say('  %s: out of time (%d s)' % (name, o.limit))
            break
        # A test hung, or the process died in it: note it, go on past it.
        outcomes[current] = 'hang' if hung or core.status(p) in (124, 137) else 'lost'
        core.say('  %s: %s %s (status %d)' % (name, outcomes[current], current, core.status(p)))
        skip = list(outcomes)
    return outcomes


def table(ways, diffs):
    kernel, ours = ways['kernel'], ways['ours']
    ref = ways.get('rdma-core 44', {})
    by_class = {}
    for tid, k in kernel.items():
        if k != 'ok':
            continue
        cls = tid.split('.')[-2]
        c = by_class.setdefault(cls, [0, 0, 0, 0])
        c[0] += 1
        c[1] += ours.get(tid) == 'ok'
        c[2] += tid in diffs and ours.get(tid) != 'ok'
        c[3] += ref.get(tid) == 'ok'
    core.say('', '%-36s %6s %6s %10s %12s' % ('class (tests the kernel passes)', 'kernel', 'ours', 'documented', 'rdma-core 44'))
    tot = [0, 0, 0, 0]
    for cls in sorted(by_class):
        c = by_class[cls]
        tot = [a + b for a, b in zip(tot, c)]
        core.say('%-36s %6d %6d %10d %12s' % (cls, c[0], c[1], c[2], c[3] if ref else '-'))
    core.say('%-36s %6d %6d %10d %12s' % ('all', tot[0], tot[1], tot[2], tot[3] if ref else '-'))
    return tot


def main(o):
    os.makedirs(o.logdir, exist_ok=True)
    classes = o.classes.split()
    diffs = read_differences(DIFFS)
    ours_env = ['LD_PRELOAD=' + o.lib, 'LD_LIBRARY_PATH=' + os.path.dirname(os.path.realpath(o.rdmacm))]
    ways, pkts = {}, {}
    plan = [('kernel', []), ('ours', ours_env)]
    if o.reference:
        plan.append(('rdma-core 44', ['LD_PRELOAD=' + o.reference]))
    for name, env in plan:
        p0, t0 = core.sent_pkts(), core.now()
        ways[name] = run_way(o, name, env, classes)
        pkts[name] = core.sent_pkts() - p0
        n = {}
        for v in ways[name].values():
            n[v] = n.get(v, 0) + 1
        core.say('cpython: %s: %s in %s s, rxe0 +%d packets' % (
            name, ', '.join('%d %s' % (c, k) for k, c in sorted(n.items())), core.secs_since(t0), pkts[name]))
    tot = table(ways, diffs)
    failures = []
    kernel, ours, ref = ways['kernel'], ways['ours'], ways.get('rdma-core 44', {})
    if not kernel or any(v in ('hang', 'lost') for v in kernel.values()):
        failures.append('the kernel run is not whole: %s' % sorted(t for t, v in kernel.items() if v in ('hang', 'lost')))
    differ = sorted(t for t, v in kernel.items() if v == 'ok' and ours.get(t) != 'ok')
    if differ:
        core.say('', 'tests the kernel passes and ours does not (rdma-core 44 beside):')
        for t in differ:
            core.say('  %-80s ours %-5s rdma-core %-5s %s' % (t, ours.get(t, 'none'), ref.get(t, '-'),
                                                       '(documented: %s)' % diffs[t] if t in diffs else 'DIFFERS'))
    for t in differ:
        if t not in diffs:
            failures.append('%s: %s on ours, ok on the kernel' % (t, ours.get(t, 'none')))
            for line in traceback_of(os.path.join(o.logdir, 'ours.err'), t)[-12:]:
                core.say('    | ' + line)
    for t in sorted(diffs):
        if ours.get(t) == 'ok':
            failures.append('%s: documented as a difference, but ours passes it (stale entry)' % t)
    if pkts['ours'] < 1000:
        failures.append('ours moved %d rxe0 packets: the tests did not take RDMA' % pkts['ours'])
    if pkts['kernel'] > 100:
        failures.append('the kernel run moved %d rxe0 packets' % pkts['kernel'])
    if failures:
        core.say('cpython: failed:', *['  ' + f for f in failures])
    core.say('cpython: of %d tests the kernel passes, ours passes %d, %d are documented differences, '
             'rdma-core 44 passes %s; %d failures%s' % (tot[0], tot[1], tot[2], tot[3] if ref else '-', len(failures),
                                                       ''.join(' (%s)' % f for f in failures)))
    return 1 if failures else 0
