#!/usr/bin/python3.11
"""CPython's own socket tests (Debian's libpython3.11-testsuite: test.test_socket),
the TCP and UDP classes, run in this process over whatever socket layer it has
(the kernel's, or an rsocket preload given by the caller in LD_PRELOAD).

    cpython_socket.py CLASS|CLASS.TEST ...

The tests' server address (test.support.socket_helper.HOST, HOSTv4, HOSTv6)
is set to $RXE_IP / $RXE_IP6 when those are set, so that a preloaded process
can take the RDMA path (RoCE has no loopback). One line per test on stdout,
flushed as it happens:

    START <test id>
    END <test id> <ok|fail|error|skip> <seconds>

so that a caller who must kill a hung process knows which test hung; and on
stderr each failure's traceback, between `TRACEBACK <test id>` and
`END TRACEBACK`.
"""
import os
import sys
import time
import unittest

sys.dont_write_bytecode = True


def main(classes):
    from test.support import socket_helper
    if os.environ.get('RXE_IP'):
        socket_helper.HOST = socket_helper.HOSTv4 = os.environ['RXE_IP']
    if os.environ.get('RXE_IP6'):
        socket_helper.HOSTv6 = os.environ['RXE_IP6']
    # bind_port(sock, host=HOST) took HOST's value when it was defined.
    socket_helper.bind_port.__defaults__ = (socket_helper.HOST,)
    import test.test_socket as ts
    # HOST is bound by name in test_socket at import: rebind it there too.
    ts.HOST = socket_helper.HOST
    skip = set(os.environ.get('CPYTHON_SOCKET_SKIP', '').split())

    class Lines(unittest.TextTestResult):
        def startTest(self, test):
            self._t0 = time.monotonic()
            print('START', test.id(), flush=True)
            super().startTest(test)

        def _end(self, test, what):
            print('END', test.id(), what, '%.1f' % (time.monotonic() - self._t0), flush=True)

        def addSuccess(self, test):
            super().addSuccess(test)
            self._end(test, 'ok')

        def _why(self, test, err):
            # On stderr, whatever the verbosity: the caller quotes it for a
            # test that fails here and passes on the kernel.
            sys.stderr.write('TRACEBACK %s\n%sEND TRACEBACK\n' % (test.id(), self._exc_info_to_string(err, test)))
            sys.stderr.flush()

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self._why(test, err)
            self._end(test, 'fail')

        def addError(self, test, err):
            super().addError(test, err)
            self._why(test, err)
            self._end(test, 'error')

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self._end(test, 'skip')

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self._end(test, 'ok')

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self._end(test, 'fail')

    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    for name in classes:  # a class, or one test as Class.method
        tests = (loader.loadTestsFromName(name, ts) if '.' in name
                 else loader.loadTestsFromTestCase(getattr(ts, name)))
        for t in tests:
            if t.id() not in skip:
                suite.addTest(t)
    with open(os.devnull, 'w') as quiet:
        unittest.TextTestRunner(stream=sys.stderr if os.environ.get('CPYTHON_SOCKET_VERBOSE') else quiet,
                                resultclass=Lines, verbosity=2).run(suite)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
