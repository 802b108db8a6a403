#!/usr/bin/env python3
"""Enforces the library's layering (see README.md in this directory).

  includes   sources: each layer includes only what it may (regex on #include)
  providers  objects: core/ needs no symbol defined by providers/ or src/rsocket/
  loops      objects: no call loop between core/'s object files, except ALLOWED_LOOPS
  rsocket_loops   objects: no call loop between src/rsocket/'s object files once
             the named service callbacks (WING_CALLBACKS) are set aside
  rsocket_shared  objects: the wing's shared plumbing (SHARED_OBJECTS,
             SHARED_TEMPLATES) is used by both socket kinds and calls neither

Objects are classified by their path (.../core/x.cpp.o, .../api/..., .../ucma/...,
.../rsocket/...), so the check is indifferent to how CMake groups them into targets.
Exit status: 0 clean, 1 violations, 2 usage or tool error.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

# Loops between core/ objects that are tolerated for now: sets of object
# basenames (without .o), one comment per entry saying why.  A loop is allowed
# when all its members are inside one entry.  The refactor aims at none.
ALLOWED_LOOPS = [
]

# The wing's upward calls that are allowed: the named service callbacks.  A
# service thread (stream_service.cpp, datagram_service.cpp) is below the
# sockets, which register with it, and calls back into them; those calls, and
# only those, are set aside before looking for loops between src/rsocket/'s
# objects.  Each entry: (caller object, callee object, functions, why).  A
# function is its demangled name without the parameters, matched by its tail
# ("StreamSocket::finish_close" matches rdmacm::rsocket::StreamSocket::
# finish_close()).  A loop that is no service callback belongs here only
# with "TODO issue 24" in its why, if it cannot be judged yet.
WING_CALLBACKS = [
    ("stream_service.cpp", "stream.cpp",
     ["StreamSocket::accept_requests", "StreamSocket::handle_cm_event",
      "StreamSocket::accept_timed_out"],
     "the listener thread hands a listener its requests, the connections thread a socket "
     "its CM events and an accepted connection's handshake deadline"),
    ("stream_service.cpp", "stream.cpp",
     ["StreamSocket::linger_done", "StreamSocket::finish_close",
      "StreamSocket::~StreamSocket"],
     "the linger service ends a lingering close and deletes the closed socket"),
    ("stream_service.cpp", "stream_queue.cpp",
     ["StreamSocket::send_keepalive", "StreamSocket::shrink_idle_send_ring"],
     "the keep-alive timer sends on the connection; the idle timer shrinks its grown send ring"),
    ("datagram_service.cpp", "datagram.cpp",
     ["DatagramSocket::get_dest", "DatagramSocket::send_udp", "DatagramSocket::send_ud"],
     "DatagramSocket::process_udp, run by the UDP service thread, forwards a "
     "datagram from the UDP socket as the rsocket's send"),
]

# The wing's shared plumbing: written once, under both socket kinds.  Each
# object here must be called (an edge, as for the loops) by a stream object
# and by a datagram object, and call neither kind.  A header template makes
# no edge (its instances are weak, one in each user), so each template here
# must instead have an instance, a member function defined in the object, in
# a stream object and in a datagram object.  The kinds are object name
# prefixes: stream.cpp, stream_io.cpp, ... and datagram.cpp, datagram_io.cpp, ...
SHARED_OBJECTS = ["sizes.cpp", "queue_pair.cpp"]
SHARED_TEMPLATES = ["CompletionWait", "ServiceThread"]
SOCKET_KINDS = ["stream", "datagram"]

LAYER_DIRS = {"core": "core", "api": "api", "rsocket": "rsocket",
              "providers": "providers", "ucma": "providers",
              "preload": "preload"}
STRONG = set("TDBRGS")          # strong definitions; W/V/u/i/C make no edges
DEFINED = STRONG | set("WVuiC")
UNDEFINED = set("Uwv")          # w/v: weak references, still a need


# --- rule 2: includes ----------------------------------------------------------

INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">]+)[">]', re.M)
SOURCE_EXTS = (".h", ".hpp", ".hh", ".c", ".cc", ".cpp", ".cxx", ".inc")


def include_violation(layer, path):
    """Why `layer` may not include `path` (its form relative to src/), or None."""
    top = path.split("/", 1)[0]
    if layer == "providers":
        if top in ("core", "api", "rsocket") and path != "core/transport.h":
            return 'providers/ include only "core/transport.h" from the library'
    elif layer == "common":
        if top in ("core", "api", "providers", "rsocket"):
            return "src/common/ includes nothing from the library but common/"
    elif layer == "core":
        if top in ("api", "providers", "rsocket"):
            return "core/ includes nothing from api/, providers/ or rsocket/"
    elif layer == "rsocket":
        if top in ("api", "providers") or (top == "core" and path != "core/cm.h"):
            return 'src/rsocket/ includes only "core/cm.h" from core/'
    elif layer == "preload":
        if top in ("core", "api", "providers", "rsocket", "src", "infiniband") or \
                (top == "rdma" and path != "rdma/rsocket.h"):
            return "preload/ includes only <rdma/rsocket.h> and libc headers"
    return None


def normalise_include(root, source, quote, name):
    """A quoted include that resolves next to its file is named relative to
    src/, include/ or the root, so "../core/cm.h" and "cm.h" both read core/cm.h."""
    if quote == '"':
        here = os.path.normpath(os.path.join(os.path.dirname(source), name))
        if os.path.exists(here):
            for base in (os.path.join(root, "src"), os.path.join(root, "include"), root):
                rel = os.path.relpath(here, base)
                if not rel.startswith(".."):
                    return rel.replace(os.sep, "/")
    return os.path.normpath(name).replace(os.sep, "/")


def check_includes(root):
    trees = {"src/common": "common", "src/core": "core", "src/rsocket": "rsocket",
             "providers": "providers", "preload": "preload"}
    problems = []
    for subdir, layer in trees.items():
        for dirpath, _, files in os.walk(os.path.join(root, subdir)):
            for name in sorted(files):
                if not name.endswith(SOURCE_EXTS):
                    continue
                source = os.path.join(dirpath, name)
                with open(source, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for m in INCLUDE_RE.finditer(text):
                    quote, inc = m.group(1), m.group(2)
                    why = include_violation(layer,
                                            normalise_include(root, source, quote, inc))
                    if why:
                        line = text.count("\n", 0, m.start()) + 1
                        close = '"' if quote == '"' else ">"
                        problems.append(f"{os.path.relpath(source, root)}:{line}: "
                                        f"#include {quote}{inc}{close}: {why}")
    return problems


# --- objects and their symbols -------------------------------------------------

class ObjectFile:
    def __init__(self, path, layer, undefined, defined):
        self.layer = layer
        self.undefined = undefined      # set of mangled names
        self.defined = defined          # mangled name -> nm type letter
        self.name = os.path.basename(path).removesuffix(".o")   # "ids.cpp"
        self.label = f"{layer}/{self.name}"


def classify(path):
    """The layer of an object, from the nearest directory naming one."""
    parts = os.path.normpath(path).split(os.sep)[:-1]
    for part in reversed(parts):
        if part in LAYER_DIRS:
            return LAYER_DIRS[part]
    return None


def read_object(nm, path, layer):
    out = subprocess.run([nm, "-P", "--no-sort", path], check=True,
                         capture_output=True, text=True).stdout
    undefined, defined = set(), {}
    for sym, kind, *_ in (line.split() for line in out.splitlines()):
        if kind in UNDEFINED:
            undefined.add(sym)
        elif kind in DEFINED:
            defined[sym] = kind
    return ObjectFile(path, layer, undefined, defined)


def definers(objects):
    """Symbol -> [(object, nm type)] for every object defining it."""
    result = {}
    for obj in objects:
        for sym, kind in obj.defined.items():
            result.setdefault(sym, []).append((obj, kind))
    return result


def strong_owner(objects):
    """Symbol -> the one object defining it strongly.  A symbol defined in more
    than one object (inline functions, templates, vtables, guard variables) or
    only weakly makes no edge."""
    return {sym: defs[0][0] for sym, defs in definers(objects).items()
            if len(defs) == 1 and defs[0][1] in STRONG}


def edges(objects, owner):
    """(A, B) -> symbols of B that A needs, for A != B."""
    result = {}
    for a in objects:
        for sym in a.undefined:
            b = owner.get(sym)
            if b is not None and b is not a:
                result.setdefault((a, b), set()).add(sym)
    return result


def demangler(cxxfilt):
    """Mangled name -> readable name (c++filt, batched; identity without it)."""
    cache = {}

    def demangle(names):
        todo = sorted(set(names) - cache.keys())
        if todo and cxxfilt:
            out = subprocess.run([cxxfilt], input="\n".join(todo) + "\n",
                                 capture_output=True, text=True).stdout.splitlines()
            if len(out) == len(todo):
                cache.update(zip(todo, out))
        return sorted(cache.get(n, n) for n in names)
    return demangle


def find_cxxfilt(nm):
    """The demangler beside nm (binutils' or LLVM's), else one on PATH."""
    for name in ("c++filt", "llvm-cxxfilt"):
        for candidate in (os.path.join(os.path.dirname(nm), name), name):
            found = shutil.which(candidate)
            if found:
                return found
    return None


def check_providers(objects, demangle):
    """Stricter than the loop edges: a symbol defined, even weakly, only by
    providers/ or rsocket/ objects counts; one core defines as well does not."""
    above = {}
    for sym, defs in definers(objects).items():
        layers = {obj.layer for obj, _ in defs}
        if layers <= {"providers", "rsocket"}:
            above[sym] = min((obj for obj, _ in defs), key=lambda o: o.label)
    needs = {}
    for a in (o for o in objects if o.layer == "core"):
        for sym in a.undefined & above.keys():
            needs.setdefault((a.label, above[sym].label), set()).add(sym)
    return [f"{a} needs from {b}: " + "; ".join(demangle(syms))
            for (a, b), syms in sorted(needs.items())]


# --- rule 3: no call loops inside core/ (and inside src/rsocket/) --------------

def reachable(start, successors):
    """Every node reachable from start by one or more calls."""
    seen, todo = set(), list(successors.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(successors.get(node, ()))
    return seen


def strongly_connected(nodes, successors):
    """The components of mutually reachable nodes (a few dozen objects, so
    one search per node is plenty); yields each as a set."""
    reach = {node: reachable(node, successors) for node in nodes}
    done = set()
    for node in nodes:
        if node not in done:
            component = {node} | {o for o in reach[node] if node in reach[o]}
            done |= component
            yield component


def function_name(demangled):
    """A demangled function's name without its parameters and qualifiers:
    "ns::S::f(int) const" -> "ns::S::f", "ns::S::operator()(int)" -> "ns::S::operator()"."""
    name = demangled.strip()
    while True:
        trimmed = re.sub(r"\s*(?:const|volatile|noexcept|&&|&)$", "", name)
        if trimmed == name:
            break
        name = trimmed
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                return name[:i]
    return name


def names_function(listed, demangled):
    fn = function_name(demangled)
    return fn == listed or fn.endswith("::" + listed)


def check_loops(objects, owner, demangle, allowed=ALLOWED_LOOPS, layer="core",
                callbacks=()):
    """No loop between `layer`'s objects, except sets listed in `allowed`,
    once the calls named in `callbacks` (see WING_CALLBACKS) are set aside."""
    mine = sorted((o for o in objects if o.layer == layer), key=lambda o: o.name)
    calls = {(a, b): syms for (a, b), syms in edges(mine, owner).items()
             if b.layer == layer}
    for caller, callee, functions, _ in callbacks:
        edge = next(((a, b) for a, b in calls if (a.name, b.name) == (caller, callee)),
                    None)
        syms = calls.get(edge, set())
        demangle(syms)      # one c++filt run for the edge, then cached
        for function in functions:
            named = {s for s in syms if names_function(function, demangle([s])[0])}
            if not named:
                print(f"note: allowed callback {caller} -> {callee}: {function} "
                      "is no longer such a call; fix or drop it", file=sys.stderr)
            syms = syms - named
        if edge and syms:
            calls[edge] = syms
        elif edge:
            del calls[edge]
    successors = {}
    for a, b in calls:
        successors.setdefault(a, []).append(b)
    problems, seen = [], []
    for component in strongly_connected(mine, successors):
        if len(component) < 2:
            continue
        names = {o.name for o in component}
        seen.append(names)
        if any(names <= set(entry) for entry in allowed):
            continue
        members = sorted(component, key=lambda o: o.name)
        lines = [f"loop between {len(members)} {layer} objects: "
                 + " ".join(sorted(names))]
        for a in members:
            for b in members:
                if (a, b) in calls:
                    lines.append(f"  {a.name} -> {b.name}: "
                                 + "; ".join(demangle(calls[(a, b)])))
        problems.append("\n".join(lines))
    for entry in allowed:
        if set(entry) not in seen:
            print(f"note: allowed loop {sorted(entry)} is no longer a loop "
                  "as listed; shrink or drop the entry", file=sys.stderr)
    return problems


# --- rule 4: the wing's shared plumbing is used by both socket kinds -----------

def socket_kind(obj, kinds):
    """"stream" for stream.cpp and stream_io.cpp, None for table.cpp."""
    stem = obj.name.split(".", 1)[0]
    return next((k for k in kinds if stem == k or stem.startswith(k + "_")), None)


def template_instances(obj, template):
    """The functions `obj` defines (weak or not) that belong to an instance of
    the class template `template`: its mangled name <length><name>I (name,
    then template arguments) appears in them.  Typeinfo, vtables and guard
    variables (_ZT*, _ZGV*) say nothing about the code being used."""
    token = f"{len(template)}{template}I"
    return {sym for sym in obj.defined
            if token in sym and not sym.startswith(("_ZT", "_ZGV"))}


def check_shared(objects, owner, demangle, shared=SHARED_OBJECTS,
                 templates=SHARED_TEMPLATES, kinds=SOCKET_KINDS):
    wing = sorted((o for o in objects if o.layer == "rsocket"), key=lambda o: o.name)
    calls = edges(wing, owner)
    problems = []
    for name in shared:
        target = next((o for o in wing if o.name == name), None)
        if target is None:
            problems.append(f"{name}: no such rsocket object (renamed? update "
                            "SHARED_OBJECTS in check.py)")
            continue
        for kind in kinds:
            if not any(b is target and socket_kind(a, kinds) == kind for a, b in calls):
                callers = sorted(a.name for a, b in calls if b is target)
                problems.append(f"{name} is called by no {kind} object (called by: "
                                + (" ".join(callers) or "none") + ")")
        for (a, b), syms in sorted(calls.items(), key=lambda e: (e[0][0].name, e[0][1].name)):
            if a is target and socket_kind(b, kinds):
                problems.append(f"{name} calls up into {b.name}: "
                                + "; ".join(demangle(syms)))
    for template in templates:
        for kind in kinds:
            if not any(template_instances(o, template) for o in wing
                       if socket_kind(o, kinds) == kind):
                problems.append(f"{template}<...>: no {kind} object holds an instance "
                                "of its members")
    return problems


# --- command line -------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="append", dest="checks",
                        choices=["includes", "providers", "loops", "rsocket_loops",
                                 "rsocket_shared"],
                        help="a rule to check, repeatable (default: all the inputs allow)")
    parser.add_argument("--source-root", help="the project's source tree (includes)")
    parser.add_argument("--objects", nargs="*", default=[],
                        help="object files (every check but includes)")
    parser.add_argument("--nm", default="nm")
    args = parser.parse_args(argv)
    if not args.checks and not args.source_root and not args.objects:
        parser.error("nothing to check: give --source-root and/or --objects")
    if (args.checks and "includes" in args.checks and not args.source_root) or \
            (set(args.checks or ()) - {"includes"} and not args.objects):
        parser.error("includes needs --source-root; the other checks need --objects")
    objects = []
    for path in args.objects:
        if classify(path) is None:
            print(f"error: cannot tell the layer of {path}", file=sys.stderr)
            return 2
        objects.append(read_object(args.nm, path, classify(path)))
    # By default, every check the inputs allow (the wing's once it has objects).
    wing = any(o.layer == "rsocket" for o in objects)
    checks = args.checks or ((["includes"] if args.source_root else [])
                             + (["providers", "loops"] if objects else [])
                             + (["rsocket_loops", "rsocket_shared"] if wing else []))
    cxxfilt = find_cxxfilt(args.nm)
    if "rsocket_loops" in checks and WING_CALLBACKS and not cxxfilt:
        print("error: rsocket_loops matches WING_CALLBACKS by demangled name: "
              "no c++filt found", file=sys.stderr)
        return 2
    demangle = demangler(cxxfilt)

    failed = False
    for check in checks:
        if check == "includes":
            problems = check_includes(args.source_root)
        elif check == "providers":
            problems = check_providers(objects, demangle)
        elif check == "loops":
            problems = check_loops(objects, strong_owner(objects), demangle)
        elif check == "rsocket_loops":
            problems = check_loops(objects, strong_owner(objects), demangle,
                                   allowed=(), layer="rsocket", callbacks=WING_CALLBACKS)
        else:
            problems = check_shared(objects, strong_owner(objects), demangle)
        for problem in problems:
            print(f"{check}: {problem}")
        print(f"{check}: {len(problems)} violation(s)" if problems else f"{check}: ok")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
