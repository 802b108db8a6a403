#!/usr/bin/env python3
"""Compares the dynamic symbols of our librdmacm.so.1 with rdma-core's.

Passes when:
  * every function the reference library defines is defined by ours, with
    the same version node, as the default version;
  * ours defines nothing else but the newer-upstream allowlist below;
  * the version nodes RDMACM_1.0 .. RDMACM_1.5 exist, each inheriting from
    the previous one, and the SONAME is librdmacm.so.1;
  * the only libraries we need are libibverbs and libc (no C++ runtime),
    unless --allow-cxx-runtime is given (sanitizer builds).
"""
import argparse
import re
import subprocess
import sys

NODES = ["RDMACM_1.0", "RDMACM_1.1", "RDMACM_1.2", "RDMACM_1.3",
         "RDMACM_1.4", "RDMACM_1.5"]
# Newer than rdma-core 44: the API of RDMACM_1.4 and RDMACM_1.5.
NEWER = {
    "rdma_query_addrinfo": "RDMACM_1.4",
    "rdma_resolve_addrinfo": "RDMACM_1.4",
    "rdma_write_cm_event": "RDMACM_1.4",
    "repoll_create": "RDMACM_1.5",
    "repoll_ctl": "RDMACM_1.5",
    "repoll_wait": "RDMACM_1.5",
}
ALLOWED_NEEDED = {"libibverbs.so.1", "libc.so.6", "ld-linux-x86-64.so.2",
                  "libpthread.so.0", "libm.so.6"}


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], check=True,
                          capture_output=True, text=True).stdout


def defined_symbols(path):
    """{name: (version, is_default)} for every defined dynamic symbol."""
    out = {}
    for line in readelf("--dyn-syms", path).splitlines():
        f = line.split()
        if len(f) < 8 or not f[0][:-1].isdigit() or f[6] == "UND":
            continue
        if f[6] == "ABS" and f[3] == "OBJECT":
            continue  # a version node's own marker symbol
        if f[4] == "LOCAL":
            continue
        m = re.match(r"([^@]+)(@@?)(\S+)", f[7])
        if not m:
            out[f[7]] = (None, False)
            continue
        name, at, ver = m.groups()
        out[name] = (ver, at == "@@")
    return out


def version_defs(path):
    """[(node, parent or None)] from .gnu.version_d, in order."""
    defs, text = [], readelf("-V", path)
    section = text.split("Version definition section")[1].split("Version needs")[0]
    for m in re.finditer(r"Flags: (\S+)\s+Index: \d+\s+Cnt: \d+\s+Name: (\S+)"
                         r"(?:\s+0x\w+: Parent 1: (\S+))?", section):
        flags, name, parent = m.groups()
        if flags != "BASE":
            defs.append((name, parent))
    return defs


def dynamic_tags(path, tag):
    return re.findall(r"\(%s\)\s+\S+.*?\[(\S+)\]" % tag, readelf("-d", path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("reference")
    ap.add_argument("--allow-cxx-runtime", action="store_true")
    args = ap.parse_args()

    errors = []
    ours, ref = defined_symbols(args.ours), defined_symbols(args.reference)
    for name, (ver, _) in sorted(ref.items()):
        if name not in ours:
            errors.append(f"missing: {name}@{ver}")
        elif ours[name][0] != ver:
            errors.append(f"wrong version: {name}@{ours[name][0]}, reference has @{ver}")
        elif not ours[name][1]:
            errors.append(f"not the default version: {name}@{ver}")
    for name, (ver, _) in sorted(ours.items()):
        if name in ref:
            continue
        if NEWER.get(name) != ver:
            errors.append(f"exported but not API: {name}@{ver}")
    for name, ver in sorted(NEWER.items()):
        if ours.get(name, (None,))[0] != ver:
            errors.append(f"newer API missing: {name}@{ver}")

    expected = [(n, NODES[i - 1] if i else None) for i, n in enumerate(NODES)]
    got = version_defs(args.ours)
    if got != expected:
        errors.append(f"version nodes {got}, expected {expected}")

    soname = dynamic_tags(args.ours, "SONAME")
    if soname != ["librdmacm.so.1"]:
        errors.append(f"SONAME {soname}, expected librdmacm.so.1")
    allowed = set(ALLOWED_NEEDED)
    if args.allow_cxx_runtime:
        allowed |= {"libstdc++.so.6", "libgcc_s.so.1", "libasan.so.8",
                    "libubsan.so.1"}
    for lib in dynamic_tags(args.ours, "NEEDED"):
        if lib not in allowed:
            errors.append(f"needs {lib}")

    for e in errors:
        print("FAIL:", e)
    print(f"{len(ref)} reference symbols, {len(ours)} ours, "
          f"{len(got)} version nodes: {'FAIL' if errors else 'OK'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
