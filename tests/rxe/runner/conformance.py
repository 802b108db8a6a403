"""Socket calls as the kernel answers them: tests/rxe/conformance/'s sockconf
(plain BSD socket calls, one behaviour a case, each case in a process of its
own under a bound) run three ways in one boot, over the kernel (no preload),
over our preload and over rdma-core 44's, and each case's observation
compared with the kernel's.

  run.py conformance --sockconf PATH --lib PATH --rdmacm PATH [--reference-lib PATH]
                     [--differences FILE] [--man FILE] [--only REGEX] [--bound S] [--long-bound S]
                     [--no-reference] [--keep] [--logdir DIR]

  --sockconf PATH    the case program (build-h/tests/rxe/conformance/sockconf)
  --lib PATH         our librspreload.so
  --rdmacm PATH      our librdmacm.so.1 (its directory goes on LD_LIBRARY_PATH)
  --reference-lib PATH  rdma-core's preload (default
                     /usr/lib/x86_64-linux-gnu/rsocket/librspreload.so); its
                     column is information only
  --differences FILE the documented differences (default
                     tests/rxe/conformance/differences.txt): lines "case reason"
  --man FILE         rsocket(7) (default man/man7/rsocket.7): every reason must
                     be in its "Differences from TCP and UDP" section
  --only REGEX       the cases to run (sockconf --only)
  --bound S, --long-bound S   a case's bound (sockconf's, default 4 and 12)
  --reference-bound S, --reference-long-bound S   the same for rdma-core's
                     column (default 2 and 6: it hangs in many cases, and
                     its column is information only)

Environment: RXE_IP (required), RXE_IP6 (the IPv6 cases; skipped without it), RXE_DEV.

The verdict of a case: same (ours == kernel), documented (listed in the
differences file, its reason in rsocket(7)), or DIFFERS. The run fails if
  - a case of ours DIFFERS;
  - a documented case matches the kernel (a stale entry), or its reason is
    not in rsocket(7)'s section;
  - the kernel's observation is not the one the case expects of Linux (the
    case is wrong), or the kernel run moved packets on the RDMA device;
  - a data case that is the same on ours did not move packets on the RDMA
    device (its bytes took kernel TCP or UDP; loopback cases are exempt).
Output: the table (case | kernel | ours | rdma-core 44 | verdict), then the
counts per class.
"""
import os
import re
import tempfile

import core
import judge
from core import now, say, secs_since

REFERENCE_LIB = '/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so'
SECTION = 'Differences from TCP and UDP'


def man_section(path):
    """The text of rsocket(7)'s SECTION, roff requests and font escapes
    dropped, lines joined by spaces ('' if it has no such section)."""
    text, inside = [], False
    for line in core.lines_of(path):
        if re.match(r'^\.S[SH] ', line):
            if inside:
                break
            inside = line[4:].strip().strip('"') == SECTION
            continue
        if inside:
            line = re.sub(r'\\f[BIRP]', '', line)
            line = re.sub(r'^\.(B|I|BR|IR|RB|RI) ', '', line)
            if line.startswith('.'):
                continue
            text.append(line.replace('\\-', '-'))
    return ' '.join(' '.join(text).split())


def differences(path):
    """{case: reason} from the differences file ('#' comments)."""
    d = {}
    for line in core.lines_of(path):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        w = line.split(None, 1)
        d[w[0]] = w[1].strip() if len(w) > 1 else ''
    return d


class Conformance:
    def __init__(self, o):
        self.o = o
        self.failures = []

    def fail(self, text):
        self.failures.append(text)

    def list_cases(self):
        out, err = self.logroot + '/list.out', self.logroot + '/list.err'
        if core.run(core.limited(30) + [self.o.sockconf, '--list'], out, err) != 0:
            core.die('conformance', 'sockconf --list failed (%s)' % err)
        cases = []
        for line in core.lines_of(out):
            w = line.split('\t')
            if len(w) == 4 and (not self.o.only or re.search(self.o.only, w[0])):
                cases.append({'name': w[0], 'cls': w[1], 'flags': w[2].split(','), 'expect': w[3]})
        return cases

    def column(self, label, env, cases, bound, long_bound, only=None):
        """Runs every case under ENV (those ONLY matches, if given), each within
        BOUND seconds (LONG_BOUND for the long ones); {case: (observation, rxe packets)}."""
        o = self.o
        n_long = sum(1 for c in cases if 'long' in c['flags'])
        limit = int(((len(cases) - n_long) * bound + n_long * long_bound) * 1.3) + 60
        argv = [o.sockconf, '--addr', self.ip, '--addr6', self.ip6, '--bound', str(bound), '--long-bound',
                str(long_bound), '--counter', '/sys/class/infiniband/%s/ports/1/hw_counters/sent_pkts' % core.RXE_DEV]
        if only or o.only:
            argv += ['--only', only or o.only]
        out, err = '%s/%s.out' % (self.logroot, label), '%s/%s.err' % (self.logroot, label)
        t0 = now()
        rc = core.run(core.limited(limit) + env + argv, out, err)
        say('conformance: %s: %d cases in %ss (status %d)' % (label, len(cases), secs_since(t0), rc))
        if rc != 0:
            self.fail('%s: sockconf ended with status %d (limit %ds); stderr in %s' % (label, rc, limit, err))
        res = {}
        for line in core.lines_of(out):
            w = line.split('\t')
            if len(w) == 3:
                res[w[0]] = (w[1], int(w[2][4:]) if w[2].startswith('rxe=') else -1)
        for c in cases:
            if c['name'] not in res:
                res[c['name']] = ('(no line)', -1)
                self.fail('%s: no line for %s' % (label, c['name']))
        return res

    def main(self):
        o = self.o
        self.ip = os.environ.get('RXE_IP') or core.die(
            'conformance', 'RXE_IP must be the IPv4 address of the RDMA device (run inside tests/vm/rxe-vm)')
        self.ip6 = os.environ.get('RXE_IP6', '')
        for p in (o.sockconf, o.lib, o.rdmacm):
            if not os.path.isfile(p):
                core.die('conformance', 'no such file: ' + p)
        if o.logdir:
            self.logroot = o.logdir
            os.makedirs(o.logdir, exist_ok=True)
        else:
            self.logroot = tempfile.mkdtemp(prefix='rdmacm-conformance.', dir=os.environ.get('TMPDIR', '/tmp'))
        cases = self.list_cases()
        docs = differences(o.differences)
        section = man_section(o.man)
        say('conformance: %d cases on %s at %s%s; logs in %s'
            % (len(cases), core.RXE_DEV, self.ip, ' and ' + self.ip6 if self.ip6 else '', self.logroot))
        t_all = now()
        kern = self.column('kernel', [], cases, o.bound, o.long_bound)
        ours = self.column('ours', ['LD_PRELOAD=' + os.path.realpath(o.lib),
                                    'LD_LIBRARY_PATH=' + os.path.dirname(os.path.realpath(o.rdmacm))], cases,
                           o.bound, o.long_bound)
        # A case of ours that answered otherwise than the kernel runs once more
        # (judge.py's rule: a FLAKY line, more than three make the suite red;
        # never after a sanitizer report): a timing class is read from a clock
        # on emulated CPUs that another VM shares.
        again = [c for c in cases if ours[c['name']][0] != kern[c['name']][0] and c['name'] not in docs
                 and judge.judge_rerun('conformance', c['name'], 'ours "%s", the kernel "%s"'
                                       % (ours[c['name']][0], kern[c['name']][0]), self.logroot)]
        if again:
            ours.update(self.column('ours-again', ['LD_PRELOAD=' + os.path.realpath(o.lib),
                                                   'LD_LIBRARY_PATH=' + os.path.dirname(os.path.realpath(o.rdmacm))],
                                    again, o.bound, o.long_bound,
                                    only='^(%s)$' % '|'.join(re.escape(c['name']) for c in again)))
        ref = None
        if not o.no_reference and os.path.isfile(o.reference_lib):
            ref = self.column('rdma-core', ['LD_PRELOAD=' + o.reference_lib], cases, o.reference_bound,
                              o.reference_long_bound)
        names = {c['name'] for c in cases}
        for name, reason in docs.items():
            if name not in names and not o.only:
                self.fail('differences.txt: %s is no case' % name)
            if name in names and (not reason or reason not in section):
                self.fail("differences.txt: %s's reason is not in rsocket(7)'s \"%s\" section: %s"
                          % (name, SECTION, reason or '(none)'))
        rows, counts = [], {}
        for c in cases:
            name, cls = c['name'], c['cls']
            k, r = kern[name]
            u, up = ours[name]
            g = ref[name][0] if ref else '-'
            if c['expect'] and k != c['expect']:
                self.fail('%s: the kernel answered "%s", the case expects "%s" of Linux (the case is wrong)'
                          % (name, k, c['expect']))
            if r != 0:
                self.fail('%s: the kernel run moved %d packets on %s' % (name, r, core.RXE_DEV))
            if u == k:
                verdict = 'same'
                if name in docs:
                    self.fail('%s: documented as a difference, but ours answers as the kernel (a stale entry)' % name)
                if 'data' in c['flags'] and 'loop' not in c['flags'] and up <= 0 and 'skipped' not in k:
                    self.fail('%s: ours moved no packets on %s (its bytes took a kernel socket)' % (name, core.RXE_DEV))
                    verdict = 'same, no RDMA'
            elif name in docs:
                verdict = 'documented'
            else:
                verdict = 'DIFFERS'
                self.fail('%s: ours differs from the kernel' % name)
            n = counts.setdefault(cls, [0, 0, 0, 0, 0])
            n[0] += 1
            n[{'same': 1, 'documented': 2}.get(verdict, 3)] += 1
            n[4] += 1 if ref and g == k else 0
            rows.append((name, k, u, g, verdict, up))
        say('', 'case | kernel | ours | rdma-core 44 | verdict (rxe packets of ours)')
        for name, k, u, g, verdict, up in rows:
            say('%s | %s | %s | %s | %s (%d)' % (name, k, '=' if u == k else u, '=' if g == k else g, verdict, up))
        say('', '%-12s %5s %5s %10s %7s %16s' % ('class', 'cases', 'same', 'documented', 'differs', 'rdma-core same'))
        tot = [0, 0, 0, 0, 0]
        for cls, n in counts.items():
            say('%-12s %5d %5d %10d %7d %16s' % (cls, n[0], n[1], n[2], n[3], n[4] if ref else '-'))
            tot = [a + b for a, b in zip(tot, n)]
        say('%-12s %5d %5d %10d %7d %16s' % ('all', tot[0], tot[1], tot[2], tot[3], tot[4] if ref else '-'))
        say('conformance: %ss in all' % secs_since(t_all))
        return core.end_run('conformance', '%d cases: %d same, %d documented, %d differ; %d failures'
                            % (tot[0], tot[1], tot[2], tot[3], len(self.failures)),
                            bool(self.failures), self.failures, self.logroot, o.keep)


def add_options(p, repo):
    p.add_argument('--sockconf', required=True)
    p.add_argument('--lib', required=True)
    p.add_argument('--rdmacm', required=True)
    p.add_argument('--reference-lib', default=REFERENCE_LIB)
    p.add_argument('--no-reference', action='store_true')
    p.add_argument('--differences', default=os.path.join(repo, 'tests/rxe/conformance/differences.txt'))
    p.add_argument('--man', default=os.path.join(repo, 'man/man7/rsocket.7'))
    p.add_argument('--only', default='')
    p.add_argument('--bound', type=int, default=4)
    p.add_argument('--long-bound', type=int, default=12)
    p.add_argument('--reference-bound', type=int, default=2)
    p.add_argument('--reference-long-bound', type=int, default=6)
    p.add_argument('--keep', action='store_true')
    p.add_argument('--logdir', default='')


def main(o):
    return Conformance(o).main()
