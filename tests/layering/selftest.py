#!/usr/bin/env python3
"""Proves check.py can fail: each rule is broken on purpose in tiny fixtures
(objects compiled here, a fake source tree) and must be reported, naming the
offending symbols or lines; the clean fixtures must pass."""
import argparse
import contextlib
import io
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORE = "src/CMakeFiles/rdmacm_core.dir/core"
API = "src/CMakeFiles/rdmacm_api.dir/api"
UCMA = "providers/ucma/CMakeFiles/rdmacm_ucma.dir"
RSOCKET = "src/rsocket/CMakeFiles/rdmacm_rsocket.dir"

# Object fixtures: where the object goes (as CMake would place it) -> source.
OBJECTS = {
    # a <-> b: a two-object loop; c -> d -> e -> c: a three-object loop that
    # f only calls into (f must not be reported).
    f"{CORE}/a.cpp.o": "int b_func(); int a_func() { return b_func() + 1; }",
    f"{CORE}/b.cpp.o": "int a_func(); int b_func() { return a_func() * 2; }",
    f"{CORE}/c.cpp.o": "int d_func(); int c_func() { return d_func(); }",
    f"{CORE}/d.cpp.o": "int e_func(); int d_func() { return e_func(); }",
    f"{CORE}/e.cpp.o": "int c_func(); int e_func() { return c_func(); }",
    f"{CORE}/f.cpp.o": "int c_func(); int f_func() { return c_func(); }",
    # Core needing the provider and the rsocket wing.
    f"{CORE}/needs_kernel.cpp.o": "int ucma_write(); int go() { return ucma_write(); }",
    f"{CORE}/needs_wing.cpp.o": "int rsocket_thing(); int go2() { return rsocket_thing(); }",
    f"{CORE}/needs_weak.cpp.o": "int ucma_hook(); __attribute__((weak)) int ucma_probe();\n"
                                "int go3() { return ucma_hook() + (ucma_probe ? ucma_probe() : 0); }",
    f"{UCMA}/kernel.cpp.o": "int ucma_write() { return 3; }\n"
                            "__attribute__((weak)) int ucma_hook() { return 5; }\n"
                            "int ucma_probe() { return 6; }",
    f"{RSOCKET}/wing.cpp.o": "int rsocket_thing() { return 4; }",
    # Clean: low <- high, with the usual noise that must make no edge:
    # header inlines and vtables emitted in both, a weak definition in high
    # that low calls, a strong symbol defined twice.  api/ and the provider
    # call core (allowed).
    f"{CORE}/low.cpp.o": """
        struct Shape { virtual int area() { return 1; } virtual ~Shape() {} };
        inline int helper(int x) { return x + 1; }
        int hook(); int twice();
        int low() { Shape s; return helper(s.area()) + hook() + twice(); }""",
    f"{CORE}/high.cpp.o": """
        struct Shape { virtual int area() { return 1; } virtual ~Shape() {} };
        inline int helper(int x) { return x + 1; }
        __attribute__((weak)) int hook() { return 0; }
        int twice() { return 2; }
        int low(); int high() { Shape s; return helper(low()) + s.area(); }""",
    f"{CORE}/other.cpp.o": "int twice() { return 2; } int other() { return 0; }",
    f"{API}/entry.cpp.o": "int high(); extern \"C\" int rdma_x() { return high(); }",
    f"{UCMA}/clean_kernel.cpp.o": """
        struct Shape { virtual int area() { return 1; } virtual ~Shape() {} };
        inline int helper(int x) { return x + 1; }
        int low(); int kernel_op() { Shape s; return helper(low()) + s.area(); }""",
}

# The rsocket wing.  Names match SHARED_OBJECTS and SHARED_TEMPLATES in
# check.py, so check.py runs on them with its own lists.
BROKEN = "src/CMakeFiles/rdmacm_rsocket.dir/broken/rsocket"   # variants, same names
TEMPLATES = """
    template <class S> struct CompletionWait { int wait(S* s) { return s->n + 1; } };
    template <class S> struct ServiceThread { int run(S* s) { return s->n + 2; } };
"""
OBJECTS.update({
    # Clean: both kinds call sizes and queue_pair and instantiate both
    # templates; stream.cpp calls stream_io.cpp (downward).
    f"{RSOCKET}/sizes.cpp.o": "int sizes_get() { return 1; }",
    f"{RSOCKET}/queue_pair.cpp.o": "int qp_create() { return 2; }",
    f"{RSOCKET}/stream_io.cpp.o": "int stream_io_op() { return 3; }",
    f"{RSOCKET}/stream.cpp.o": TEMPLATES + """
        struct StreamSocket { int n; }; int sizes_get(); int qp_create(); int stream_io_op();
        int stream_op(StreamSocket* s) {
          CompletionWait<StreamSocket> w; ServiceThread<StreamSocket> t;
          return w.wait(s) + t.run(s) + sizes_get() + qp_create() + stream_io_op(); }""",
    f"{RSOCKET}/datagram.cpp.o": TEMPLATES + """
        struct DatagramSocket { int n; }; int sizes_get(); int qp_create();
        int datagram_op(DatagramSocket* s) {
          CompletionWait<DatagramSocket> w; ServiceThread<DatagramSocket> t;
          return w.wait(s) + t.run(s) + sizes_get() + qp_create(); }""",
    # Broken: a datagram object using queue_pair and CompletionWait only (it
    # derives from ServiceThread, so holds its typeinfo, but calls none of
    # its code); a sizes calling up into a stream object.
    f"{BROKEN}/datagram.cpp.o": TEMPLATES + """
        struct DatagramSocket : ServiceThread<DatagramSocket> { int n; virtual ~DatagramSocket(); };
        DatagramSocket::~DatagramSocket() {} int qp_create();
        int datagram_op(DatagramSocket* s) {
          CompletionWait<DatagramSocket> w; return w.wait(s) + qp_create(); }""",
    f"{BROKEN}/sizes.cpp.o": "int stream_io_op(); int sizes_get() { return stream_io_op(); }",
    # A loop in the wing: loop_a <-> loop_b.
    f"{RSOCKET}/loop_a.cpp.o": "int loop_b(); int loop_a() { return loop_b() + 1; }",
    f"{RSOCKET}/loop_b.cpp.o": "int loop_a(); int loop_b() { return loop_a() * 2; }",
    # A service and its socket: echo.cpp registers with echo_service.cpp
    # (svc_watch), whose thread calls back (Echo::ready, ~Echo, sock_poke).
    f"{RSOCKET}/echo.cpp.o": """
        struct Echo { int ready() const; ~Echo(); };
        int Echo::ready() const { return 1; } Echo::~Echo() {}
        int svc_watch(); int sock_poke() { return 2; } int echo_open() { return svc_watch(); }""",
    f"{RSOCKET}/echo_service.cpp.o": """
        struct Echo { int ready() const; ~Echo(); }; int sock_poke();
        int svc_watch() { return 0; }
        int svc_run(Echo* e) { int r = e->ready() + sock_poke(); delete e; return r; }""",
})
WING_CLEAN = [f"{RSOCKET}/{n}.cpp.o"
              for n in ("sizes", "queue_pair", "stream_io", "stream", "datagram")]

CLEAN = [f"{CORE}/low.cpp.o", f"{CORE}/high.cpp.o", f"{CORE}/other.cpp.o",
         f"{API}/entry.cpp.o", f"{UCMA}/clean_kernel.cpp.o"]

# Source-tree fixtures: path -> text.  Each bad file breaks one include rule.
SOURCES_CLEAN = {
    "src/core/cm.h": "#pragma once\n#include <cstddef>\n",
    "src/core/transport.h": "#pragma once\n",
    "src/core/ids.cpp": '#include "core/cm.h"\n#include "transport.h"\n#include "common/mutex.h"\n',
    "src/common/mutex.h": '#pragma once\n#include <mutex>\n#include "thread_annotations.h"\n',
    "src/common/thread_annotations.h": "#pragma once\n",
    "src/api/entry.h": "#pragma once\n",
    "providers/ucma/kernel.cpp": '#include "core/transport.h"\n#include <rdma/rdma_user_cm.h>\n',
    "src/rsocket/socket.cpp": '#include "core/cm.h"\n#include "rsocket/socket.h"\n'
                              "#include <rdma/rsocket.h>\n#include <infiniband/verbs.h>\n",
    "src/rsocket/socket.h": '#pragma once\n#include "common/mutex.h"\n',
    "preload/preload.c": '#include <rdma/rsocket.h>\n#include <dlfcn.h>\n#include "real.h"\n',
    "preload/real.h": "#pragma once\n",
}
SOURCES_BAD = {
    "providers/ucma/bad.cpp": '#include "core/cm.h"\n',
    "src/core/bad_api.cpp": '#include "api/entry.h"\n',
    "src/core/bad_relative.cpp": '\n\n  #  include "../api/entry.h"\n',
    "src/rsocket/bad.cpp": '#include "core/objects.h"\n',
    "src/common/bad.h": '#include "common/mutex.h"\n#include "core/leaf_lock.h"\n',
    "preload/bad.c": "#include <stdio.h>\n#include <rdma/rdma_cma.h>\n",
}


def run_check(*args):
    proc = subprocess.run([sys.executable, os.path.join(HERE, "check.py"), *args],
                          capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


class Results:
    def __init__(self):
        self.failures = 0

    def expect(self, name, got, want_rc, must_contain=(), must_not_contain=()):
        rc, output = got
        missing = [s for s in must_contain if s not in output]
        present = [s for s in must_not_contain if s in output]
        ok = rc == want_rc and not missing and not present
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
        if not ok:
            self.failures += 1
            print(f"     exit {rc} (wanted {want_rc}); missing {missing}; "
                  f"unexpected {present}\n     output:\n{output}")


def write_tree(root, files):
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cxx", default="c++")
    parser.add_argument("--nm", default="nm")
    args = parser.parse_args()
    r = Results()
    with tempfile.TemporaryDirectory(prefix="layering-selftest-") as tmp:
        objs = {}
        for rel, code in OBJECTS.items():
            src = os.path.join(tmp, "fixture-src", rel[:-2].replace("/", "_"))
            write_tree(tmp, {os.path.relpath(src, tmp): code + "\n"})
            obj = os.path.join(tmp, "build", rel)
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            subprocess.run([args.cxx, "-std=c++17", "-O0", "-fPIC", "-c", "-x", "c++",
                            src, "-o", obj], check=True)
            objs[rel] = obj
        nm = ["--nm", args.nm]
        clean = [objs[o] for o in CLEAN]

        r.expect("clean objects pass both symbol rules",
                 run_check(*nm, "--objects", *clean), 0, ["providers: ok", "loops: ok"])
        loops = [objs[f"{CORE}/{n}.cpp.o"] for n in "abcdef"] + clean + \
            [objs[f"{CORE}/needs_kernel.cpp.o"], objs[f"{UCMA}/kernel.cpp.o"]]
        r.expect("loops are found, with the calls that make them",
                 run_check(*nm, "--check", "loops", "--objects", *loops), 1,
                 ["loop between 2 core objects: a.cpp b.cpp",
                  "a.cpp -> b.cpp: b_func()", "b.cpp -> a.cpp: a_func()",
                  "loop between 3 core objects: c.cpp d.cpp e.cpp",
                  "c.cpp -> d.cpp: d_func()", "e.cpp -> c.cpp: c_func()"],
                 ["f.cpp ->", "low.cpp", "high.cpp"])
        r.expect("core needing the provider or the rsocket wing fails",
                 run_check(*nm, "--check", "providers", "--objects",
                           objs[f"{CORE}/needs_kernel.cpp.o"], objs[f"{UCMA}/kernel.cpp.o"],
                           objs[f"{CORE}/needs_wing.cpp.o"], objs[f"{RSOCKET}/wing.cpp.o"],
                           objs[f"{CORE}/needs_weak.cpp.o"], *clean), 1,
                 ["core/needs_kernel.cpp needs from providers/kernel.cpp: ucma_write()",
                  "core/needs_weak.cpp needs from providers/kernel.cpp: ucma_hook(); ucma_probe()",
                  "core/needs_wing.cpp needs from rsocket/wing.cpp: rsocket_thing()"],
                 ["low.cpp needs", "high.cpp needs"])
        stray = os.path.join(tmp, "build", "elsewhere", "x.cpp.o")
        os.makedirs(os.path.dirname(stray))
        os.link(objs[f"{CORE}/low.cpp.o"], stray)
        r.expect("an object of no known layer is an error",
                 run_check(*nm, "--objects", stray, *clean), 2, ["cannot tell the layer"])

        sys.path.insert(0, HERE)
        import check  # the allow-lists are module constants; pass some in instead
        found = [check.read_object(args.nm, objs[f"{CORE}/{n}.cpp.o"], "core") for n in "ab"]
        owner = check.strong_owner(found)
        r.expect("an allowed loop passes",
                 (len(check.check_loops(found, owner, lambda s: sorted(s),
                                        [{"a.cpp", "b.cpp"}])), ""), 0)
        r.expect("a loop reaching beyond its allowed set fails",
                 (len(check.check_loops(found, owner, lambda s: sorted(s),
                                        [{"a.cpp"}])), ""), 1)
        # The wing: loops, service callbacks, shared plumbing.
        wing = [objs[o] for o in WING_CLEAN]
        r.expect("a clean wing passes every symbol rule",
                 run_check(*nm, "--objects", *clean, *wing), 0,
                 ["providers: ok", "loops: ok", "rsocket_loops: ok", "rsocket_shared: ok"])
        pair = [objs[f"{RSOCKET}/loop_{n}.cpp.o"] for n in "ab"]
        core_pair = [objs[f"{CORE}/{n}.cpp.o"] for n in "ab"]
        r.expect("a loop in the wing is found, and only by rsocket_loops",
                 run_check(*nm, "--check", "rsocket_loops", "--check", "loops",
                           "--objects", *wing, *pair, *clean), 1,
                 ["loop between 2 rsocket objects: loop_a.cpp loop_b.cpp",
                  "loop_a.cpp -> loop_b.cpp: loop_b()", "loop_b.cpp -> loop_a.cpp: loop_a()",
                  "loops: ok"],
                 ["stream.cpp ->", "core objects"])
        r.expect("rsocket_loops ignores core's loops",
                 run_check(*nm, "--check", "rsocket_loops", "--objects",
                           *wing, *core_pair, *clean), 0, ["rsocket_loops: ok"])
        echo = [check.read_object(args.nm, objs[f"{RSOCKET}/{n}.cpp.o"], "rsocket")
                for n in ("echo", "echo_service")]
        owner = check.strong_owner(echo)
        demangle = check.demangler(check.find_cxxfilt(args.nm))
        named = ("echo_service.cpp", "echo.cpp",
                 ["Echo::ready", "Echo::~Echo", "sock_poke"], "the service calls back")
        r.expect("a loop made by named service callbacks passes",
                 (len(check.check_loops(echo, owner, demangle, (), "rsocket", [named])),
                  ""), 0)
        partly = ("echo_service.cpp", "echo.cpp", ["Echo::ready", "Echo::~Echo"], "")
        got = check.check_loops(echo, owner, demangle, (), "rsocket", [partly])
        r.expect("a call the callback list does not name still makes the loop",
                 (len(got), "\n".join(got)), 1,
                 ["echo.cpp -> echo_service.cpp: svc_watch()",
                  "echo_service.cpp -> echo.cpp: sock_poke()"], ["Echo::ready", "~Echo"])
        gone = ("echo_service.cpp", "echo.cpp", ["Echo::gone"], "")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            check.check_loops(echo, owner, demangle, (), "rsocket", [named, gone])
        r.expect("a listed callback that makes no such call is noted",
                 (0, err.getvalue()), 0,
                 ["allowed callback echo_service.cpp -> echo.cpp: Echo::gone is no longer"],
                 ["Echo::ready is no longer"])
        r.expect("without the callback list the service loop fails",
                 (len(check.check_loops(echo, owner, demangle, (), "rsocket", [])), ""), 1)
        swap = {f"{RSOCKET}/datagram.cpp.o": f"{BROKEN}/datagram.cpp.o"}
        r.expect("shared plumbing used by one socket kind only fails",
                 run_check(*nm, "--check", "rsocket_shared", "--objects",
                           *[objs[swap.get(o, o)] for o in WING_CLEAN]), 1,
                 ["sizes.cpp is called by no datagram object (called by: stream.cpp)",
                  "ServiceThread<...>: no datagram object holds an instance"],
                 ["queue_pair.cpp is called", "CompletionWait<...>", "no stream object"])
        swap = {f"{RSOCKET}/sizes.cpp.o": f"{BROKEN}/sizes.cpp.o"}
        r.expect("shared plumbing calling up into a socket kind fails",
                 run_check(*nm, "--check", "rsocket_shared", "--objects",
                           *[objs[swap.get(o, o)] for o in WING_CLEAN]), 1,
                 ["sizes.cpp calls up into stream_io.cpp: stream_io_op()"],
                 ["is called by no"])
        r.expect("a shared object that is gone fails",
                 run_check(*nm, "--check", "rsocket_shared", "--objects",
                           *[objs[o] for o in WING_CLEAN if "queue_pair" not in o]), 1,
                 ["queue_pair.cpp: no such rsocket object"])
        names = {"ns::S::f(int) const": "ns::S::f", "ns::S::~S()": "ns::S::~S",
                 "ns::L::operator()(ns::A const&, ns::A const&) const": "ns::L::operator()",
                 "f(void (*)(int))": "f", "g": "g"}
        wrong = {d: check.function_name(d) for d, want in names.items()
                 if check.function_name(d) != want}
        r.expect("callback names are demangled names without parameters",
                 (len(wrong), str(wrong)), 0)

        layouts = {  # object path -> layer, before and after the api/ split
            "b/src/CMakeFiles/rdmacm_core.dir/core/ids.cpp.o": "core",
            "b/src/CMakeFiles/rdmacm_core.dir/api/ids.cpp.o": "api",
            "/w/core/b/src/CMakeFiles/rdmacm_core.dir/api/ids.cpp.o": "api",
            "b/src/CMakeFiles/rdmacm_api.dir/api/ids.cpp.o": "api",
            "b/providers/ucma/CMakeFiles/rdmacm_ucma.dir/kernel_transport.cpp.o": "providers",
            "b/src/CMakeFiles/rdmacm_rsocket.dir/rsocket/socket.cpp.o": "rsocket",
            "b/src/rsocket/CMakeFiles/rdmacm_rsocket.dir/socket.cpp.o": "rsocket",
            "b/src/CMakeFiles/rdmacm_other.dir/x.cpp.o": None}
        wrong = {p: check.classify(p) for p, layer in layouts.items()
                 if check.classify(p) != layer}
        r.expect("objects are classified by path", (len(wrong), str(wrong)), 0)

        src_clean = os.path.join(tmp, "tree-clean")
        write_tree(src_clean, SOURCES_CLEAN)
        r.expect("clean source tree passes",
                 run_check("--source-root", src_clean), 0, ["includes: ok"])
        src_bad = os.path.join(tmp, "tree-bad")
        write_tree(src_bad, {**SOURCES_CLEAN, **SOURCES_BAD})
        r.expect("each bad include is reported, and only those",
                 run_check("--source-root", src_bad), 1,
                 ['providers/ucma/bad.cpp:1: #include "core/cm.h"',
                  'src/core/bad_api.cpp:1: #include "api/entry.h"',
                  'src/core/bad_relative.cpp:3: #include "../api/entry.h"',
                  'src/rsocket/bad.cpp:1: #include "core/objects.h"',
                  'src/common/bad.h:2: #include "core/leaf_lock.h"',
                  "preload/bad.c:2: #include <rdma/rdma_cma.h>"],
                 ["kernel.cpp:", "ids.cpp:", "socket.cpp:", "preload.c:", "bad.c:1",
                  "bad.h:1", "mutex.h:", "socket.h:"])
    print(f"{r.failures} failure(s)")
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
