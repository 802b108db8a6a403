"""What every harness needs: time, bounded processes, readiness, rxe's
counter, the binding evidence, log tails.

Every process runs under `timeout -k 2 N` (its status: 124 or 137 when the
limit ended it, 128 + the signal when a signal did); nothing waits without a
bound, and every wait polls its condition (never a fixed sleep).
"""
import os
import re
import signal
import subprocess
import sys
import time

SYSLIB = os.environ.get('RDMACM_SYSTEM_LIB', '/usr/lib/x86_64-linux-gnu/librdmacm.so.1')
RXE_DEV = os.environ.get('RXE_DEV') or 'rxe0'

# A line of rstream's results table: "name bytes xfers iters total time Gb/sec usec/xfer".
RSTREAM_RESULT_RE = (r'^[a-z0-9_]+ +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9]+ +[0-9.]+[kmg]? +[0-9.]+s +[0-9.]+ +[0-9.]+$')


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


def status(p):
    """A finished process's status as the shell reports it (128 + signal)."""
    rc = p.returncode
    return 128 - rc if rc < 0 else rc


def start(argv, out, err, append=False, stdin=None):
    """Starts ARGV in the background, stdout and stderr to files (appended
    to with APPEND), stdin from the file STDIN or /dev/null."""
    mode = 'ab' if append else 'wb'
    with open(out, mode) as o, open(err, mode) as e, open(stdin or os.devnull, 'rb') as i:
        p = subprocess.Popen(argv, stdout=o, stderr=e, stdin=i)
    PROCS.append(p)
    return p


def run(argv, out, err, append=False, stdin=None):
    """Runs ARGV in the foreground; its status."""
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
    """Stops a background `timeout` (its own process group) and everything under it."""
    if p.poll() is not None:
        return
    try:
        p.send_signal(signal.SIGTERM)
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


def on_signals():
    """INT and TERM: "interrupted", every process stopped, status 130."""
    def handler(signum, frame):
        say('interrupted')
        stop_all()
        os._exit(130)
    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def prog_pid(pid):
    """The program a `timeout ... env ... prog` started (env execs prog): the
    first child of PID, or None."""
    kids = read('/proc/%d/task/%d/children' % (pid, pid))
    if kids is None:  # a kernel without CONFIG_PROC_CHILDREN: every process's parent
        kids = ' '.join(p for p in os.listdir('/proc') if p.isdigit() and
                        (read('/proc/%s/stat' % p, '').rpartition(')')[2].split() or ['', ''])[1] == str(pid))
    kids = kids.split()
    return int(kids[0]) if kids else None


def stop_signal(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def timeout_env(secs):
    """The prefix that bounds a process and clears what the harness sets itself."""
    return ['timeout', '-k', '2', str(secs), 'env', '-u', 'LD_PRELOAD', '-u', 'LD_LIBRARY_PATH',
            '-u', 'LD_DEBUG', '-u', 'LD_DEBUG_OUTPUT']


# --- rxe and readiness ------------------------------------------------------------

def sent_pkts():
    """Packets rxe0 has sent so far (its hardware counter)."""
    try:
        return int(read('/sys/class/infiniband/%s/ports/1/hw_counters/sent_pkts' % RXE_DEV, '0').strip() or 0)
    except ValueError:
        return 0


def lo_bytes():
    return int(read('/sys/class/net/lo/statistics/tx_bytes', '0').strip() or 0)


def cm_listening(port):
    """An rdma_cm id listens on PORT (as the kernel's resource tracker sees it)."""
    r = subprocess.run(['rdma', 'res', 'show', 'cm_id'], capture_output=True, text=True)
    return re.search(r'state LISTEN .*src-addr [^ ]*:%s( |$)' % port, r.stdout, re.M) is not None


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


def bindings(prefix, sym, rsockets):
    """From the LD_DEBUG=bindings files PREFIX.<pid>: (files, targets, hit, n):
    the files whose imports bound rdma_* (and with RSOCKETS the r* family)
    symbols went to, the one SYM went to, how many bindings. Lines look like
    "179: binding file rping [0] to /x/librdmacm.so.1 [0]: normal symbol `rdma_connect' [RDMACM_1.0]".
    Only the program's (and other libraries') imports count, not librdmacm's internal ones."""
    d, base = os.path.split(prefix)
    files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith(base + '.')) if os.path.isdir(d) else []
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
