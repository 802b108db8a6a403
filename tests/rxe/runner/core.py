"""What every harness needs: time, bounded processes, readiness, the
transport and what crossed its device, the binding evidence, log tails.

Every process runs under a time limit, kept here as `timeout -k 2 N` would
keep it (its status: 124 or 137 when the limit ended it, 128 + the signal
when a signal did), without `timeout` and `env` in front of it: in the TCG VM
each exec costs ~70 ms of CPU. Nothing waits without a bound, and every wait
polls its condition (never a fixed sleep).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import judge
import nldev

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), '../../..'))
SYSLIB = os.environ.get('RDMACM_SYSTEM_LIB', '/usr/lib/x86_64-linux-gnu/librdmacm.so.1')
RXE_DEV = os.environ.get('RXE_DEV') or 'rxe0'
# rxe (Soft-RoCE) or siw (Soft-iWARP): the VM's guest exports RXE_TRANSPORT
# (rxe-vm --siw: siw, and RXE_DEV siw0); run.py --transport overrides it.
TRANSPORT = os.environ.get('RXE_TRANSPORT') or ('siw' if RXE_DEV.startswith('siw') else 'rxe')
TRANSPORTS = ('rxe', 'siw')

# A line of rstream's results table: "name bytes xfers iters total time Gb/sec usec/xfer".
RSTREAM_RESULT_RE = (r'^[a-z0-9_]+ +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+s +[0-9.]+ +[0-9.]+$')


def say(*lines):
    for line in lines:
        print(line, flush=True)


def now():
    return time.monotonic()


def secs_since(t0):
    """Seconds since T0 with one decimal (truncated)."""
    d = int((now() - t0) * 10)
    return '%d.%d' % (d // 10, d % 10)


def tmo(t, scale):
    """Scaled timeout (SCALE a percentage, 100 = as written), at least 1."""
    return max(1, t * scale // 100)


def read(path, default=None):
    try:
        with open(path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')
    except OSError:
        return default


def lines_of(path):
    """The lines of a file (none if it is missing)."""
    text = read(path)
    if not text:
        return []
    return text[:-1].split('\n') if text.endswith('\n') else text.split('\n')


def count_lines(path, regex):
    """How many lines of PATH match REGEX (searched, ERE-like)."""
    r = re.compile(regex)
    return sum(1 for line in lines_of(path) if r.search(line))


def has_line(path, regex):
    return count_lines(path, regex) > 0


def realpath(p):
    return os.path.realpath(p)


def arg_after(flag, args):
    """The value following FLAG in ARGS, or None."""
    for i in range(len(args) - 1):
        if args[i] == flag:
            return args[i + 1]
    return None


# --- processes -----------------------------------------------------------------------

PROCS = []  # every background process, stopped at exit
# The harness's own variables, never inherited by a process it starts.
UNSET = ('LD_PRELOAD', 'LD_LIBRARY_PATH', 'LD_DEBUG', 'LD_DEBUG_OUTPUT')
KILL_AFTER = 2  # seconds between the limit's SIGTERM and its SIGKILL (timeout -k 2)


class Limit(str):
    """The head of a command: SECS of time, then NAME=VALUE words (as env(1)
    takes them), then the program and its arguments. Shown (in logs) as the
    `timeout` it stands for."""
    def __new__(cls, secs):
        s = super().__new__(cls, 'timeout -k %d %s' % (KILL_AFTER, secs))
        s.secs = secs
        return s


def limited(secs):
    """The prefix that bounds a process to SECS and clears what the harness sets itself."""
    return [Limit(secs)]


def status(p):
    """A finished process's status as the shell reports it (128 + signal;
    124 when its limit stopped it with SIGTERM, 137 with SIGKILL)."""
    if getattr(p, 'limit_hit', None):
        return 124 if p.limit_hit == signal.SIGTERM else 137
    rc = p.returncode
    return 128 - rc if rc < 0 else rc


def _watch():
    """The limits: SIGTERM to a process group at its deadline, SIGKILL
    KILL_AFTER later. Only processes still running under a limit are looked
    at (a harness starts hundreds; under TCG each look costs)."""
    while True:
        t = now()
        for p in list(_LIMITED):
            if p.poll() is not None:
                _LIMITED.remove(p)
                continue
            if t < p.deadline:
                continue
            sig = signal.SIGTERM if not p.limit_hit else signal.SIGKILL
            if sig == signal.SIGKILL and t < p.deadline + KILL_AFTER:
                continue
            p.limit_hit = sig
            try:
                os.killpg(p.pid, sig)
            except OSError:
                pass
            if sig == signal.SIGKILL:
                _LIMITED.remove(p)
        time.sleep(0.1)


_LIMITED = []  # started with a limit, not yet seen to exit or killed
_watcher = []


def start(argv, out, err, append=False, stdin=None):
    """Starts ARGV in the background (in a process group of its own), stdout
    and stderr to files (appended to with APPEND), stdin from the file STDIN
    (or the fd, when an int) or /dev/null. ARGV may begin with limited(SECS) and NAME=VALUE words."""
    argv, env, deadline = list(argv), None, None
    if argv and isinstance(argv[0], Limit):
        deadline = now() + argv.pop(0).secs
        env = {k: v for k, v in os.environ.items() if k not in UNSET}
        while argv and re.match(r'^[A-Za-z_][A-Za-z0-9_]*=', argv[0]):
            k, v = argv.pop(0).split('=', 1)
            env[k] = v
    mode = 'ab' if append else 'wb'
    with open(out, mode) as o, open(err, mode) as e, \
            open(stdin if isinstance(stdin, int) else stdin or os.devnull, 'rb', closefd=not isinstance(stdin, int)) as i:
        p = subprocess.Popen(argv, stdout=o, stderr=e, stdin=i, env=env, start_new_session=True)
    p.deadline, p.limit_hit = deadline, None
    PROCS.append(p)
    if deadline is not None:
        _LIMITED.append(p)
        if not _watcher:
            _watcher.append(threading.Thread(target=_watch, daemon=True))
            _watcher[0].start()
    return p


def run(argv, out, err, append=False, stdin=None):
    """Runs ARGV in the foreground (its limit ends it); its status."""
    p = start(argv, out, err, append, stdin)
    p.wait()
    return status(p)


def alive(p):
    return p.poll() is None


def wait_exit(p, secs):
    """P's status once it has exited within SECS, else None."""
    try:
        p.wait(timeout=max(secs, 0))
    except subprocess.TimeoutExpired:
        return None
    return status(p)


def stop_proc(p):
    """Stops a background process (its own process group) and everything under it."""
    if p.poll() is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except OSError:
        pass
    if wait_exit(p, 3) is not None:
        return
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        try:
            p.kill()
        except OSError:
            pass
    p.wait()


def stop_all():
    for p in PROCS:
        stop_proc(p)
    unprobe()


def on_signals():
    """INT and TERM: "interrupted", every process stopped, status 130."""
    def handler(signum, frame):
        say('interrupted')
        stop_all()
        os._exit(130)
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def stop_signal(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


# --- the device: what crossed it ----------------------------------------------------

def sent_pkts():
    """Packets rxe0 has sent so far (its hardware counter)."""
    try:
        return int(read('/sys/class/infiniband/%s/ports/1/hw_counters/sent_pkts' % RXE_DEV, '0').strip() or 0)
    except ValueError:
        return 0


TRACING = '/sys/kernel/tracing'
# siw has no hw_counters, and on one host both ends talk TCP over lo, whose
# counters count everything: kprobes on siw's own paths count what crossed
# it. rx: siw_tcp_rx_data, called for each batch of TCP payload a QP's socket
# has (its len argument: the bytes siw received); send, write: the iWARP SEND
# and RDMA WRITE frames placed; accept: each connection siw accepted.
SIW_PROBES = (('rx', 'siw_tcp_rx_data len=$arg4:u64'), ('send', 'siw_proc_send'),
              ('write', 'siw_proc_write'), ('accept', 'siw_accept'))
_probes = []


def _tracefs_write(f, text, flags=os.O_APPEND):
    """Writes TEXT to tracefs file F (no seek: tracefs refuses Python's append mode)."""
    fd = os.open(os.path.join(TRACING, f), os.O_WRONLY | flags)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _probe_name(unit):
    return 'rdmacm_siw_%s_%d' % (unit, os.getpid())


def _siw_setup():
    """The kprobes, once per process (removed at exit: unprobe)."""
    if _probes:
        return
    if not os.path.exists(TRACING + '/kprobe_events'):
        subprocess.run(['mount', '-t', 'tracefs', 'nodev', TRACING], capture_output=True)
    for unit, what in SIW_PROBES:
        name = _probe_name(unit)
        try:
            _tracefs_write('kprobe_events', 'p:%s %s\n' % (name, what))
            _probes.append(name)
            _tracefs_write('events/kprobes/%s/enable' % name, '1\n', 0)
        except OSError as e:
            raise SystemExit('setup: kprobe on %s: %s (tracefs, root)' % (what, e))
    # Room for every receive batch of a case (a 4 MiB file: a few thousand).
    _tracefs_write('buffer_size_kb', '8192\n', 0)


def unprobe():
    for name in _probes:
        try:
            _tracefs_write('events/kprobes/%s/enable' % name, '0\n', 0)
            _tracefs_write('kprobe_events', '-:%s\n' % name)
        except OSError:
            pass
    del _probes[:]


def siw_hits():
    """{unit: hits so far} of the siw kprobes (kprobe_profile: name, hits, misses)."""
    names = {_probe_name(u): u for u, _ in SIW_PROBES}
    out = {}
    for line in lines_of(TRACING + '/kprobe_profile'):
        w = line.split()
        if len(w) >= 2 and w[0] in names:
            out[names[w[0]]] = int(w[1])
    return out


def siw_rx_bytes():
    """The bytes siw received since the last mark: the rx probe's len= fields in the trace."""
    total, tag = 0, ' %s: ' % _probe_name('rx')
    for line in lines_of(TRACING + '/trace'):
        if tag in line:
            m = re.search(r' len=([0-9]+)', line)
            total += int(m.group(1)) if m else 0
    return total


def check_device():
    """None, or why RXE_DEV is not a device of TRANSPORT (iWARP: node type RNIC)."""
    node = read('/sys/class/infiniband/%s/node_type' % RXE_DEV)
    if node is None:
        return 'no RDMA device %s' % RXE_DEV
    if ('RNIC' in node) != (TRANSPORT == 'siw'):
        return '%s is not a%s device (node type %s)' % (RXE_DEV, 'n iWARP' if TRANSPORT == 'siw' else ' RoCE',
                                                          node.strip())
    return None


def device_mark():
    """A mark to measure what crosses the device from now on. On siw it also
    empties the trace (the received bytes are summed from it): one mark in
    use at a time for rx_bytes; the hit counts allow any number."""
    if TRANSPORT == 'rxe':
        return {'pkts': sent_pkts()}
    _siw_setup()
    _tracefs_write('trace', '', os.O_TRUNC)
    return siw_hits()


def device_moved(mark, counts_only=False):
    """{unit: count} since MARK: rxe pkts (packets sent); siw rx (receive
    calls), rx_bytes (not with COUNTS_ONLY: reading the trace pauses tracing,
    so only once the case's traffic is over), send, write, accept."""
    if TRANSPORT == 'rxe':
        return {'pkts': sent_pkts() - mark['pkts']}
    now_ = siw_hits()
    moved = {u: now_.get(u, 0) - mark.get(u, 0) for u, _ in SIW_PROBES}
    moved['rx_bytes'] = 0 if counts_only else siw_rx_bytes()
    return moved


def moved_text(moved):
    if TRANSPORT == 'rxe':
        return '%s +%d pkts' % (RXE_DEV, moved['pkts'])
    return 'siw: %d receive calls, %d bytes, %d writes, %d sends, %d accepts' % (
        moved['rx'], moved['rx_bytes'], moved['write'], moved['send'], moved['accept'])


UNIT_WORDS = {'pkts': 'packets left %s' % RXE_DEV, 'rx': 'siw receive calls', 'rx_bytes': 'bytes siw received',
              'write': 'RDMA WRITE frames siw placed', 'send': 'SEND frames siw placed', 'accept': 'siw accepts'}


def crossed(moved, want):
    """'' if MOVED has what WANT ({unit: minimum, or (minimum, maximum)})
    says the case's work makes on this transport, else why not: a reason
    that is never rerun (judge.py: "did not cross")."""
    for unit, w in sorted(want.items()):
        lo, hi = w if isinstance(w, tuple) else (w, None)
        n = moved.get(unit, 0)
        if n < lo or (hi is not None and n > hi):
            return ('%d %s (%s %d expected): the work did not cross the RDMA device as it should'
                    % (n, UNIT_WORDS[unit], 'at least' if hi is None else 'exactly' if hi == lo else '%d to' % lo,
                       lo if hi is None or hi == lo else hi))
    return ''


def want(rxe=None, siw=None):
    """What a case must move, per transport: {unit: minimum} (None: nothing asked)."""
    return (rxe if TRANSPORT == 'rxe' else siw) or {}


# --- readiness ----------------------------------------------------------------------

def lo_bytes():
    return int(read('/sys/class/net/lo/statistics/tx_bytes', '0').strip() or 0)


def cm_listening(port):
    """An rdma_cm id listens on PORT (as the kernel's resource tracker sees it)."""
    return int(port) in nldev.listening_ports()


def _sockets(kind, port, state):
    """A socket of /proc/net/KIND{,6} bound to PORT in STATE (hex, e.g. 0A LISTEN, 07 unconnected UDP)."""
    want = ':%04X' % int(port)
    for f in ('/proc/net/%s' % kind, '/proc/net/%s6' % kind):
        for line in lines_of(f)[1:]:
            w = line.split()
            if len(w) > 3 and w[1].endswith(want) and w[3] == state:
                return True
    return False


def tcp_listening(port):
    return _sockets('tcp', port, '0A')


def udp_bound(port):
    return _sockets('udp', port, '07')


def mcast_attached(group):
    """A QP is attached to the IPv4 multicast group: rxe then puts the group's
    MAC address (01:00:5e + the group's low 23 bits) on its netdev."""
    b = [int(x) for x in group.split('.')]
    mac = '01005e%02x%02x%02x' % (b[1] & 127, b[2], b[3])
    return any(len(w) > 4 and w[4] == mac for w in (line.split() for line in lines_of('/proc/net/dev_mcast')))


def wait_until(cond, p, secs):
    """0 once COND() holds; 1 if process P ended first; 2 after SECS (wall clock)."""
    end = now() + secs
    while True:
        if cond():
            return 0
        if not alive(p):
            return 1
        if now() >= end:
            return 2
        time.sleep(0.1)


def wait_ready(kind, what, p, secs):
    """0 when ready (KIND cm or tcp: listening on port WHAT; mcast: a QP
    attached to group WHAT); 1 when the server died first; 2 on timeout."""
    cond = {'cm': lambda: cm_listening(what), 'tcp': lambda: tcp_listening(what),
            'mcast': lambda: mcast_attached(what)}[kind]
    return wait_until(cond, p, secs)


def wait_line(path, regex, p, secs):
    """0 once PATH has a line matching REGEX, 1 if P died first, 2 on timeout."""
    return wait_until(lambda: has_line(path, regex), p, secs)


# --- the binding evidence ---------------------------------------------------------

# The library's symbols: rdma_* and the rsocket family.
RSOCKET_SYMS = ('socket|bind|listen|accept|connect|shutdown|close|recv|recvfrom|recvmsg|send|sendto|sendmsg|'
                'read|readv|write|writev|poll|select|getpeername|getsockname|setsockopt|getsockopt|fcntl|'
                'iomap|iounmap|iowrite')


def debug_files(prefix):
    """The LD_DEBUG_OUTPUT files PREFIX.<pid>."""
    d, base = os.path.split(prefix)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith(base + '.')) if os.path.isdir(d) else []


def bindings(prefix, sym, rsockets):
    """From the LD_DEBUG=bindings files PREFIX.<pid>: (files, targets, hit, n):
    the files whose imports bound rdma_* (and with RSOCKETS the r* family)
    symbols went to, the one SYM went to, how many bindings. Lines look like
    "179: binding file rping [0] to /x/librdmacm.so.1 [0]: normal symbol `rdma_connect' [RDMACM_1.0]".
    Only the program's (and other libraries') imports count, not librdmacm's internal ones."""
    files = debug_files(prefix)
    if rsockets:
        pat = re.compile(r'normal symbol .(rdma_[a-z_]+|r(%s)).( |$)' % RSOCKET_SYMS)
    else:
        pat = re.compile(r'normal symbol `rdma_')
    lib = re.compile(r'binding file [^ ]*librdmacm[^ ]* ')
    targets, hit, n = [], None, 0
    needle = "symbol `%s'" % sym
    for f in files:
        for line in lines_of(f):
            if 'normal symbol' not in line or not pat.search(line) or lib.search(line):
                continue
            t = re.sub(r' \[[0-9]+\]: normal symbol.*', '', re.sub(r'.* to ', '', line, count=1))
            if t not in targets:
                targets.append(t)
            n += 1
            if needle in line:
                hit = t
    return files, targets, hit, n


def kmsg_mark():
    """A mark in the kernel's log: /dev/kmsg opened at its end (None if it
    cannot be read). Cheaper than a `dmesg` per case (~150 ms in the VM)."""
    try:
        fd = os.open('/dev/kmsg', os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    os.lseek(fd, 0, os.SEEK_END)
    return fd


def kmsg_since(mark):
    """The kernel's messages logged since MARK (which it closes)."""
    lines = []
    if mark is None:
        return lines
    try:
        while True:
            try:
                rec = os.read(mark, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:  # records overwritten meanwhile: go on from the oldest left
                continue
            if not rec:
                break
            lines.append(rec.decode(errors='replace').partition(';')[2].split('\n')[0])
    finally:
        os.close(mark)
    return lines


def save_logs(save, dirs):
    """Copies DIRS into SAVE, after removing SAVE's NN-* directories of an earlier run."""
    os.makedirs(save, exist_ok=True)
    for e in os.listdir(save):
        if re.match('[0-9][0-9]-', e) and os.path.isdir(os.path.join(save, e)):
            shutil.rmtree(os.path.join(save, e), ignore_errors=True)
    for d in dirs:
        shutil.copytree(d, os.path.join(save, os.path.basename(d)), dirs_exist_ok=True)


def end_run(harness, counts, failed, failures, logroot, keep, save='', saved=()):
    """The end of a harness's run: FAILURES listed, the case directories
    SAVED copied to SAVE, LOGROOT removed unless something FAILED or KEEP,
    the rerun counts, and last COUNTS alone on a line. Its exit status."""
    if failures:
        say('%s: failed:' % harness, *['  ' + f for f in failures])
    if save:
        save_logs(save, saved)
        if saved:
            say('%s: logs of %d cases copied to %s' % (harness, len(saved), save))
    if not failed and not keep:
        shutil.rmtree(logroot, ignore_errors=True)
    judge.rerun_summary(harness)
    say(counts)
    return 0 if not failed else 1


def tail_file(path, n, title):
    """The last N lines of PATH (long lines cut), indented, under a title."""
    if not os.path.exists(path):
        return
    if os.path.getsize(path) == 0:
        say('    --- %s: (empty)' % title)
        return
    say('    --- %s (last %d lines of %s)' % (title, n, path))
    for line in lines_of(path)[-n:]:
        say('    | ' + line[:200])


def dpkg_version(pkg):
    r = subprocess.run(['dpkg-query', '-W', '-f=${Version}', pkg], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def die(harness, msg, code=2):
    print('run.py %s: %s' % (harness, msg), file=sys.stderr, flush=True)
    sys.exit(code)
