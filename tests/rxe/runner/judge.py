"""The known races of the peers, and the rerun rule: one rule for every harness.

Every harness (interop, tools, preload, the package test) judges a failure
with these, so that a peer's known race is forgiven by its sign on every side
and in every harness, and one flake never costs a run.

FORGIVEN: a race of rdma-core's own tool at its exit, after the case's work
  was done and checked: the case passes (the line stays in the log).
RETRY: a race of a peer tool that spoils the case before its work is done:
  the case runs once more at once, the second verdict counts.
FLAKY: any other failure that does not prove our library wrong: the case
  runs once more at once, the second verdict counts. Never for a sanitizer
  report, a signal in a process on our library, a wrong binding or a data
  mismatch. scripts/test.sh lists every such line of a run and fails a run
  with more than three FLAKY lines.

The shell users reach these through `run.py judge ...` (see run.py).
"""
import os
import re
import signal

FORGIVEN = 0
RETRIED = 0
FLAKY_N = 0


def _read(path):
    try:
        with open(path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')
    except OSError:
        return None


def peer_exit_race(tool, rc, errfile, case=''):
    """The race's description (and a FORGIVEN line) if RC is rdma-core 44's
    rping exiting 255 after its pings: its CM thread calls rdma_get_cm_event
    on the channel main() has just destroyed (fixed upstream by "rping:
    terminate CM event thread before exiting"). Server and client share that
    teardown, so both are judged by it. Else None."""
    global FORGIVEN
    if tool != 'rping' or str(rc) != '255':
        return None
    text = _read(errfile)
    if text is None:
        return None
    lines = text.split('\n')[:-1]  # complete lines only, as `read` sees them
    last = lines[-1] if lines else ''
    if last not in ('rdma_get_cm_event: Bad file descriptor', 'rdma_get_cm_event: Invalid argument'):
        return None
    race = ("rdma-core's rping exited 255 ('%s') after its pings: its CM thread races "
            "rdma_destroy_event_channel at exit (fixed upstream)" % last)
    FORGIVEN += 1
    print('    FORGIVEN %s%s' % (case + ': ' if case else '', race), flush=True)
    return race


def _grep(path, regex):
    text = _read(path)
    return text is not None and re.search(regex, text, re.M) is not None


def known_race(tool, d, mode, args):
    """The race's description if the case whose logs are in D failed with a
    peer tool's own race, by its sign; else None.
    - qperf, ib_send_bw -R: the server tells the client where to connect before
      it calls rdma_listen, and a quick client's connect request in between is
      rejected (no listener). qperf: its server child sends the port it bound;
      ib_send_bw: after the control connection its server makes a new listener
      for the data connections, and rdma-core 44's client, rejected with status
      8, crashes in perftest's retry. See tests/rxe/interop/README.md.
    - rstream -T a on rdma-core's library (a mixed mode, or `reference`:
      both sides on rdma-core's): rdma-core 44's rpoll now and then reports
      POLLHUP while data is still unread, and rstream exits 16 (POLLHUP) on
      that side without a word.
    - fi_pingpong -e rdm (libfabric 1.17's ofi_rxm over verbs): after its
      result row, a side dies of SIGSEGV inside libfabric.so.1 as it tears
      its endpoints down (libfabric's handler prints a backtrace and exits
      1). Seen on siw with rdma-core's library on both sides and with ours;
      the sign: that side's result row, then "terminated with signal 11",
      and no frame of the backtrace outside libfabric, fi_pingpong and libc."""
    if tool == 'qperf':
        hit = _grep(os.path.join(d, 'client.out'), r'^unexpected event from RDMA CM: Event rejected')
    elif tool == 'ib_send_bw':
        hit = _grep(os.path.join(d, 'client.err'), r'^Event: RDMA_CM_EVENT_REJECTED; error: 8\.')
    elif tool == 'rstream':
        s = '%s %s ' % (mode, args)
        sides = (['client'] if s.startswith('mixed-srv-ours ') else
                 ['server'] if s.startswith('mixed-cli-ours ') else
                 ['server', 'client'] if s.startswith('reference ') else []) if '-T a ' in s else []
        side, hit = None, False
        for side in sides:
            rc = _read(os.path.join(d, '%s.rc' % side))
            err = os.path.join(d, '%s.err' % side)
            hit = rc is not None and rc.rstrip('\n') == '16' and not (os.path.exists(err) and os.path.getsize(err) > 0)
            if hit:
                break
    elif tool == 'fi_pingpong':
        side, hit = None, False
        for side in (['server', 'client'] if '-e rdm' in args else []):
            text = ''.join(_read(os.path.join(d, '%s.%s' % (side, f))) or '' for f in ('out', 'err'))
            frames = re.findall(r'^(\S+)\(\S*\)\[0x[0-9a-f]+\]$', text, re.M)
            hit = (re.search(r'^1k +20 +=20 +40k ', text, re.M) is not None and
                   re.search(r'terminated with signal 11 at PC=', text) is not None and
                   bool(frames) and 'libfabric.so' in frames[0] and
                   all(re.search(r'libfabric\.so|/fi_pingpong$|^fi_pingpong$|libc\.so', f) for f in frames))
            if hit:
                break
    else:
        hit = False
    if not hit:
        return None
    if tool == 'fi_pingpong':
        return ("fi_pingpong -e rdm's %s died of SIGSEGV inside libfabric after its result row "
                "(libfabric 1.17's rxm teardown; seen on rdma-core's library too)" % side)
    if tool == 'rstream':
        return ("rdma-core's rstream on rdma-core's library (%s) exited 16: its rpoll reported "
                "POLLHUP with data unread (rdma-core 44's own race)" % side)
    return "%s's client was rejected: its server had not called rdma_listen yet (%s's own race, README.md)" % (tool, tool)


def caught_signal(d):
    """The crash a side of the case in D died of although its status says
    otherwise, or None: libfabric catches a fatal signal, prints "terminated
    with signal N at PC=..." and a backtrace, and exits 1. Named as the
    signal it was ("server killed by SIGSEGV"), so that only known_race's
    libfabric sign is rerun."""
    for side in ('server', 'client'):
        text = ''.join(_read(os.path.join(d, '%s.%s' % (side, f))) or '' for f in ('out', 'err'))
        m = re.search(r'terminated with signal ([0-9]+) at PC=', text)
        if m:
            try:
                name = signal.Signals(int(m.group(1))).name
            except ValueError:
                name = 'SIG' + m.group(1)
            return "%s killed by %s (libfabric's backtrace)" % (side, name)
    return None


def is_signal(status):
    """STATUS is that of a process a crash ended (128 + the signal, as the
    shell and core.status report it): SIGILL, SIGTRAP, SIGABRT, SIGBUS,
    SIGFPE, SIGSEGV. Only those: rdma-core's tools exit with a negative
    errno, which reads as 128 + something too (ucmatose's "return status
    -110" is 146)."""
    return str(status) in ('132', '133', '134', '135', '136', '139')


# The marks a failure's text carries when it proves our library wrong
# whatever the timing (harnesses word their reasons so).
NO_RERUN_RE = (r'wrong library|WRONG BINDING|did not load|loaded librdmacm|does not map|on our library|'
               r'killed by SIG(ILL|TRAP|ABRT|BUS|FPE|SEGV)|mismatch|differs|did not cross|crossed lo|on kernel TCP')
SANITIZER_RE = (r'ERROR: (Address|Leak|Memory)Sanitizer|WARNING: ThreadSanitizer|runtime error: |'
                r'SUMMARY: UndefinedBehaviorSanitizer')


def sanitizer_report(*paths):
    """True if a file among PATHS (directories: every file under them) holds a sanitizer report."""
    for p in paths:
        files = [p]
        if os.path.isdir(p):
            files = [os.path.join(r, f) for r, _, fs in os.walk(p) for f in fs]
        for f in files:
            text = _read(f)
            if text is not None and re.search(SANITIZER_RE, text):
                return True
    return False


def rerun_allowed(why, d):
    """A case that failed with WHY, its logs in D, may be run once more."""
    return not re.search(NO_RERUN_RE, why) and not sanitizer_report(d)


def judge_rerun(harness, case, why, d, tool='-', mode='-', args='-'):
    """After a first failure: prints the RETRY or FLAKY line and returns True
    if the case is to run once more, else False."""
    global RETRIED, FLAKY_N
    race = known_race(tool, d, mode, args)
    if race:
        RETRIED += 1
        print('RETRY %s %s: %s; once more' % (harness, case, race), flush=True)
    elif rerun_allowed(why, d):
        FLAKY_N += 1
        print('FLAKY %s %s: %s' % (harness, case, why), flush=True)
    else:
        return False
    return True


def rerun_summary(harness):
    """One line with the counts, if any."""
    if FORGIVEN + RETRIED + FLAKY_N:
        print('%s: %d FLAKY reruns, %d RETRY reruns (known peer races), %d FORGIVEN (lines above)'
              % (harness, FLAKY_N, RETRIED, FORGIVEN), flush=True)
