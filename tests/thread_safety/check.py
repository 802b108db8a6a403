#!/usr/bin/env python3
"""Proves the thread-safety build can fail: compiles fixture.cpp with clang and
the library's flags (RDMACM_THREAD_SAFETY_FLAGS), once as it stands, which must
compile without a single diagnostic, and once per broken rule (-DBREAK_...),
which must fail with clang's thread-safety diagnostic for that rule.

  check.py --cxx CLANG++ --source-root ROOT --case NAME -- FLAGS...

Exit status: 0 as expected, 1 not, 77 (ctest: skipped) without clang."""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# case -> (macro that breaks a rule, the diagnostic it must produce); None:
# the fixture as it stands, which must compile cleanly.
CASES = {
    "clean": (None, None),
    "unguarded_write": ("BREAK_UNGUARDED_WRITE",
                        "writing variable 'n_' requires holding mutex 'mu_' exclusively"),
    "write_after_unlock": ("BREAK_WRITE_AFTER_UNLOCK",
                           "writing variable 'n_' requires holding mutex 'mu_' exclusively"),
    "requires_unheld": ("BREAK_REQUIRES_UNHELD",
                        "calling function 'bump_locked' requires holding mutex 'mu_' exclusively"),
    "leaf_lock_unguarded": ("BREAK_LEAF_UNGUARDED",
                            "writing variable 'm_' requires holding mutex 'leaf_' exclusively"),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cxx", default="")
    parser.add_argument("--source-root", required=True)
    parser.add_argument("--case", choices=sorted(CASES), required=True)
    parser.add_argument("flags", nargs="*", help="the thread-safety flags (after --)")
    args = parser.parse_args()

    cxx = args.cxx and shutil.which(args.cxx)
    if not cxx:
        print(f"SKIP: no clang++ ({args.cxx or 'not found at configure time'}); "
              "the thread-safety analysis is clang's (scripts/deps.sh installs it)")
        return 77
    if not args.flags:
        print("FAIL: no thread-safety flags given")
        return 1

    macro, want = CASES[args.case]
    cmd = [cxx, "-std=c++20", "-fsyntax-only", "-Wall", "-Wextra", *args.flags,
           "-I", os.path.join(args.source_root, "src"),
           "-I", os.path.join(args.source_root, "include"),
           os.path.join(HERE, "fixture.cpp")]
    if macro:
        cmd.insert(1, f"-D{macro}")
    print("$ " + " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    print(out, end="")

    if macro is None:
        ok = proc.returncode == 0 and not out.strip()
        why = "compiles without a diagnostic" if ok else \
            f"must compile without a diagnostic (exit {proc.returncode})"
    else:
        errors = [l for l in out.splitlines() if ": error: " in l]
        right = [l for l in errors if want in l and "-Wthread-safety" in l]
        ok = proc.returncode != 0 and right and len(right) == len(errors)
        why = (f"fails with: {want}" if ok else
               f"must fail with exactly this error, from -Wthread-safety: {want} "
               f"(exit {proc.returncode}, {len(errors)} errors, {len(right)} of them that one)")
    print(f"{'ok  ' if ok else 'FAIL'} {args.case}: {why}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
