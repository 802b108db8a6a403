"""The CM on iWARP step by step, ours against rdma-core's: tests/rxe/iwarp's
cm_table (linked to our library) runs on the iWARP device, then again with
rdma-core's library preloaded, and any difference in what they print
(stdout) fails, shown as a diff (- ours, + rdma-core) whose hunks name
their case.

  run.py cmtable --prog PATH --lib PATH --ref PATH [--keep DIR] [--transport siw]

  --prog PATH   iwarp_cm_table
  --lib PATH    our librdmacm.so.1 (the one cm_table is linked to)
  --ref PATH    rdma-core's librdmacm.so.1
  --keep DIR    copy both outputs there (ours.out, ref.out)

Environment: RXE_IP, RXE_DEV (an iWARP device: siw0 under `rxe-vm --siw`).
Each run must have been answered by the library it was meant for (cm_table
prints "rdma_create_id from PATH" on stderr), our run must have made an id on
an iWARP device and reached its end. Output: the verdict, `N passed, M
failed` last. Nothing here is rerun: the two runs are compared, not timed.
"""
import difflib
import os
import re
import shutil
import tempfile

import core
from core import lines_of, say

TRANSPORTS = ('siw',)


def add_options(p, repo):
    p.add_argument('--prog', required=True)
    p.add_argument('--lib', required=True)
    p.add_argument('--ref', required=True)
    p.add_argument('--keep', default='')


def used(path, lib):
    """The run whose stderr is PATH took rdma_create_id from LIB."""
    got = [x[len('rdma_create_id from '):] for x in lines_of(path) if x.startswith('rdma_create_id from ')]
    return bool(got) and os.path.realpath(got[0]) == os.path.realpath(lib)


def main(o):
    d = tempfile.mkdtemp(prefix='rdmacm-cmtable.', dir=os.environ.get('TMPDIR', '/tmp'))
    t0 = core.now()
    # Different listener ports for the two runs (cm_table prints them as
    # "listen"): the first run's connections may linger in the kernel. A
    # sanitized program refuses a library preloaded ahead of its runtime unless told.
    rc = {'ours': core.run(core.limited(300) + [o.prog, '7600'], d + '/ours.out', d + '/ours.err'),
          'ref': core.run(core.limited(300) + ['LD_PRELOAD=' + o.ref, 'ASAN_OPTIONS=verify_asan_link_order=0',
                                               o.prog, '7700'], d + '/ref.out', d + '/ref.err')}
    if o.keep:
        for f in ('ours.out', 'ref.out'):
            shutil.copy(os.path.join(d, f), o.keep)
    why = []
    for run in ('ours', 'ref'):
        extra = [x for x in lines_of('%s/%s.err' % (d, run)) if not x.startswith('rdma_create_id from ')]
        if extra:
            say('=== %s: stderr' % run, *extra)
        if rc[run] != 0:
            why.append('the run with %s library exited %d' % ('our' if run == 'ours' else "rdma-core's", rc[run]))
    if not used(d + '/ours.err', o.lib):
        why.append('our run did not use %s (wrong library)' % o.lib)
    if not used(d + '/ref.err', o.ref):
        why.append('the reference run did not use %s (wrong library)' % o.ref)
    ours, ref = lines_of(d + '/ours.out'), lines_of(d + '/ref.out')
    if not any(' iwarp ' in x for x in ours):
        why.append('no id on an iWARP device')
    if 'end' not in ours:
        why.append('our run did not reach its end')
    cases = sum(1 for x in ours if x.startswith('case '))
    if not cases:
        why.append('no case ran')
    diff, case = [], ''
    for line in difflib.unified_diff(ours, ref, 'ours', 'rdma-core', lineterm=''):
        if line.startswith('@@'):
            # Each hunk names the case it is in (diff -F "^case ").
            first = int(re.match(r'@@ -([0-9]+)', line).group(1))
            case = next((x for x in reversed(ours[:first]) if x.startswith('case ')), '')
            line += ' ' + case
        diff.append(line)
    if diff:
        say(*diff)
        why.append('the answers differ (diff above: - ours, + rdma-core)')
    name = 'cm_table: %d cases, %d lines, ours against rdma-core\'s (%ss)' % (cases, len(ours), core.secs_since(t0))
    if why:
        say('FAIL ' + name, *['    reason: ' + w for w in why])
    else:
        say('PASS ' + name + ': identical on both libraries')
    return core.end_run('cmtable', '%d passed, %d failed' % (0 if why else 1, 1 if why else 0), bool(why),
                        [], d, False)
