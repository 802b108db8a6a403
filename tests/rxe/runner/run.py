#!/usr/bin/env python3
"""The integration harnesses of the Soft-RoCE VM, one runner:

  run.py interop [options]   rdma-core's own tools through our librdmacm
  run.py tools [options]     our bundled tools (examples/) against themselves and rdma-core's
  run.py preload [options]   ordinary Debian programs under an rsocket preload
  run.py conformance [options]
                             socket calls case by case over the kernel, our
                             preload and rdma-core's (tests/rxe/conformance/)
  run.py cpython [options]   CPython's socket tests over the kernel, our preload and rdma-core's
  run.py judge peer-exit-race TOOL STATUS ERRFILE [CASE]
                             (for shell scripts) status 0 and a FORGIVEN line if
                             STATUS is TOOL's known race at its exit
  run.py judge sanitizer FILE...
                             status 0 if a FILE holds a sanitizer report
  run.py judge rerun HARNESS CASE WHY DIR TOOL MODE ARGS
                             status 0 and a RETRY or FLAKY line if the case
                             that failed with WHY (logs in DIR: server.rc,
                             client.err ...) is to run once more, else 1
                             (MODE as interop's, or reference: both sides on
                             rdma-core's library)

  run.py cmtable [options]   the CM on iWARP step by step (iwarp/cm_table), ours
                             diffed against rdma-core's

Every harness takes --transport rxe|siw (default: RXE_TRANSPORT, which the
VM's guest exports; siw0 under `rxe-vm --siw`): the cases it runs, what each
must show and how its bytes are proven to have crossed the device (rxe's
hw_counters, siw's kprobes: core.py) follow it. A harness without cases for
a transport refuses it.
`run.py HARNESS --help` describes a harness's options. The rules that judge a
failure (a peer's known race, the rerun rule) are judge.py's, one copy for all.
"""
import argparse
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, HERE)
REPO = os.path.realpath(os.path.join(HERE, '../../..'))

import core  # noqa: E402
import judge  # noqa: E402


def judge_cli(args):
    if args[:1] == ['peer-exit-race'] and len(args) in (4, 5):
        return 0 if judge.peer_exit_race(*args[1:]) else 1
    if args[:1] == ['rerun'] and len(args) == 8:
        return 0 if judge.judge_rerun(*args[1:]) else 1
    if args[:1] == ['sanitizer'] and len(args) > 1:
        return 0 if judge.sanitizer_report(*args[1:]) else 1
    print(__doc__, file=sys.stderr)
    return 2


def main(argv):
    if not argv or argv[0] not in ('interop', 'tools', 'preload', 'conformance', 'cpython', 'cmtable', 'judge'):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == 'judge':
        return judge_cli(argv[1:])
    mod = __import__(argv[0])
    p = argparse.ArgumentParser(prog='run.py ' + argv[0], description=mod.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
                                usage=argparse.SUPPRESS)
    mod.add_options(p, REPO)
    p.add_argument('--transport', choices=core.TRANSPORTS, default=core.TRANSPORT)
    o = p.parse_args(argv[1:])
    core.TRANSPORT = o.transport
    if o.transport not in getattr(mod, 'TRANSPORTS', ('rxe',)):
        core.die(argv[0], 'has no cases for transport %s' % o.transport)
    why = None if getattr(o, 'list', False) else core.check_device()
    if why:
        core.die(argv[0], 'setup: ' + why, 1)
    sys.stdout.reconfigure(line_buffering=True)
    core.on_signals()
    try:
        return mod.main(o)
    finally:
        core.stop_all()


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
