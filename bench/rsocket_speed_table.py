"""bench/rsocket_speed.py's figures read from the programs' output (no awk
or sed started per figure), its table: medians over the rounds, ratios, the
printed rows and notes, and the verdict on failed runs (exit status 1).

RES maps (column, figure) to every round's result: a number as the program
printed it, "clock" (perftest's clock estimate failed under TCG), "fail" or
"no-rdma" (a preloaded run that sent nothing on the device)."""
import os
import re
import sys
import time

NUMBER = re.compile(r'^[0-9.]+$')
POSITIVE = re.compile(r'^[0-9.]*[1-9][0-9.]*$')
FMT = '%-40s %9s %9s %9s %9s %8s %8s %8s'


def number(v):
    return bool(NUMBER.match(v))


def clock_ok(v):
    """V, or "clock" when perftest printed inf, nan or 0 while data moved: its clock estimate failed."""
    if 'inf' in v or 'nan' in v:
        return 'clock'
    if v == '0' or v.startswith('0.0'):
        return v if number(v) and float(v) > 0 else 'clock'
    return v


def iperf3_gbits(text):
    """The receiver's Mbits/sec, in Gb/s."""
    for line in text.split('\n'):
        if line.endswith(' receiver'):
            w = line.split()
            for i in range(len(w) - 1):
                if w[i + 1] == 'Mbits/sec' and number(w[i]):
                    return '%.3f' % (float(w[i]) / 1000)
    return ''


def sockperf_us(text):
    """sockperf's "Summary: Latency is X usec"."""
    for line in text.split('\n'):
        i = line.find('Summary: Latency is ')
        if i >= 0:
            w = line[i + 20:].split(' ')
            if len(w) > 1 and w[1].startswith('usec') and number(w[0]):
                return w[0]
    return ''


def median_of(values):
    """The median of the numbers among VALUES (the lower one of two middles);
    with none, the first value recorded (fail, no-rdma ...); - for no run."""
    if not values:
        return '-'
    nums = sorted((v for v in values if number(v)), key=float)
    return nums[(len(nums) + 1) // 2 - 1] if nums else values[0]


def ratio(a, b):
    """B / A as "1.23x", or - when either is not a positive number."""
    if not (POSITIVE.match(a) and POSITIVE.match(b)):
        return '-'
    try:
        fa, fb = float(a), float(b)
    except ValueError:
        return '-'
    return '%.2fx' % (fb / fa) if fa > 0 and fb > 0 else '-'


def report(res, o, dev, syslib, syspreload):
    def m(col, fig):
        return median_of(res.get((col, fig)))

    def line(*cells):
        print(FMT % cells)

    def row(label, fig, dfig=None, col='ours', tcp=True):
        """The device's cell is DFIG's (default FIG's, in parentheses when
        not); ratios against that cell and against rdma-core's."""
        dfig = dfig or fig
        d, r, c = m('device', dfig), m('rdma-core', fig), m(col, fig)
        line(label, d if dfig == fig else '(%s)' % d, m('tcp', fig) if tcp else '-', r, c,
             ratio(d, r), ratio(d, c), ratio(r, c))

    def device(label, fig):
        line(label, m('device', fig), '-', '-', '-', '-', '-', '-')

    def copies(label, fig, col='ours'):
        r, c = m('rdma-core', fig), m(col, fig)
        line(label, '0', '-', r, c, '-', '-', ratio(r, c))

    load = ' '.join(open('/proc/loadavg').read().split()[:3])
    print()
    print('rsockets against the device: median of %d round(s), N=%d, %s, load %s, %d CPU(s)'
          % (o['runs'], o['count'], time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), load,
             len(os.sched_getaffinity(0))))
    line('figure', 'device', 'kern TCP', 'rdma-core', 'ours', 'rdma/dev', 'ours/dev', 'ours/rdma')
    row('bandwidth, 64 KiB sends (Gb/s)', 'bw64')
    row('bandwidth, 1 MiB sends (Gb/s)', 'bw1m')
    row('latency 64 B, nonblocking (us)', 'lat')
    row('latency 64 B, blocking -T b (us)', 'latb', 'lat')
    row('riostream latency 64 B (us)', 'rio', 'lat')
    device('device, completion events (-e) (us)', 'late')
    device('device, t_typical (median): polling (us)', 'lat.typ')
    device('device, t_typical (median): -e (us)', 'late.typ')
    device('device by wall clock: 64 KiB (Gb/s, >=)', 'bw64.wall')
    device('device by wall clock: 1 MiB (Gb/s, >=)', 'bw1m.wall')
    device('device by wall clock: 64 B lat (us, <=)', 'lat.wall')
    if o['copies']:
        copies('copied per byte sent, 64 KiB', 'copies')
    row('blocking -T b: bandwidth, 64 KiB (Gb/s)', 'bw64b', 'bw64')
    row('blocking -T b: bandwidth, 1 MiB (Gb/s)', 'bw1mb', 'bw1m')
    # ours with zero-copy sends (column zc) against the device and rdma-core's copying sends
    row('  ours zero-copy: 64 KiB (Gb/s)', 'bw64b', 'bw64', 'zc', False)
    row('  ours zero-copy: 1 MiB (Gb/s)', 'bw1mb', 'bw1m', 'zc', False)
    if o['copies']:
        copies('  copied per byte sent, 64 KiB -T b', 'copiesb')
        copies('  ours zero-copy: copied per byte sent', 'copiesb', 'zc')
    if o['preload']:
        row('preload: iperf3 -l 64K (Gb/s)', 'iperf3', 'bw64')
        row('preload: sockperf ping-pong 64 B (us)', 'pp', 'lat')
    print('(device: perftest over rdma_cm on %s; rdma-core: %s; ours: %s)' % (dev, syslib, o['lib']))
    print("(device by wall clock: the whole perftest client, start-up and connection\n"
          " included, against its bytes or round trips: a bound on perftest's own figure\n"
          " when TCG leaves its TSC-based clock in doubt)\n"
          "(a device cell in parentheses is the device figure the ratios use: 64 KiB\n"
          " ib_write_bw for iperf3, ib_send_lat's polling latency for the blocking and\n"
          " preloaded rows; copied/sent of raw verbs is 0: the device reads the\n"
          " caller's registered buffer)")
    if o['preload']:
        print('(preload: ours %s; rdma-core %s%s)' % (o['preload'], syspreload,
                                                     ', not run with --quick' if o['quick'] else ''))
    sys.stdout.flush()

    # "clock": perftest printed inf, nan or 0, its clock estimate (TSC against
    # gettimeofday) failing under TCG; the run itself passed. Medians skip it.
    files = sorted(('%s.%s' % k, v) for k, v in res.items())
    inf = ' '.join('%s:%d' % (f, v.count('clock')) for f, v in files if f.startswith('device.') and 'clock' in v)
    if inf:
        print("(perftest's clock failed under TCG (inf, nan or 0 printed), runs per figure: %s)" % inf)
    # Every other run of the device, the two libraries and kernel TCP must have
    # given a number; rdma-core's preload figures may fail.
    bad = {}
    for f, values in files:
        col = f.split('.', 1)[0]
        if f in ('rdma-core.iperf3', 'rdma-core.pp') or col not in ('device', 'rdma-core', 'ours', 'zc', 'tcp'):
            continue
        for v in values:
            if not number(v) and not (col == 'device' and v == 'clock'):
                bad['%s:%s' % (f, v)] = bad.get('%s:%s' % (f, v), 0) + 1
    if bad:
        print('rsocket_speed: failed runs (count, file:result):', file=sys.stderr)
        for k in sorted(bad):
            print('%7d %s' % (bad[k], k), file=sys.stderr)
        return 1
    return 0
