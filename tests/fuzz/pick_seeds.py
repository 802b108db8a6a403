#!/usr/bin/env python3
"""Picks a small seed corpus out of a large one: pick_seeds.py FUZZER CORPUS OUT [N]

A long run leaves thousands of inputs; the repository keeps a few dozen. This
runs FUZZER once per input to read the input's coverage features (libFuzzer's
-features_dir), then takes inputs greedily, each time the one adding the most
features not yet covered (the smaller on a tie), until N are taken or none
adds anything. Run -merge=1 first on a very large corpus: one run per input.
Inputs already in OUT are kept and counted as taken.
"""
import array
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile


def features(fuzzer, path, tmp):
    one, feat = os.path.join(tmp, "one"), os.path.join(tmp, "feat")
    for d in (one, feat):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    shutil.copy(path, one)
    subprocess.run([fuzzer, "-runs=0", "-features_dir=" + feat, one],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    found = set()
    for name in os.listdir(feat):
        a = array.array("I")
        with open(os.path.join(feat, name), "rb") as f:
            a.frombytes(f.read())
        found.update(a)
    return found


def main():
    fuzzer, corpus, out = sys.argv[1:4]
    limit = int(sys.argv[4]) if len(sys.argv) > 4 else 30
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        kept = [os.path.join(out, n) for n in sorted(os.listdir(out))]
        pool = [os.path.join(corpus, n) for n in sorted(os.listdir(corpus))]
        covered = set()
        for path in kept:
            covered |= features(fuzzer, path, tmp)
        sets = {path: features(fuzzer, path, tmp) for path in pool}
        total = set(covered).union(*sets.values())
        while len(kept) < limit and sets:
            best = max(sets, key=lambda p: (len(sets[p] - covered), -os.path.getsize(p)))
            if not sets[best] - covered:
                break
            covered |= sets.pop(best)
            with open(best, "rb") as f:
                name = hashlib.sha1(f.read()).hexdigest()
            shutil.copy(best, os.path.join(out, name))
            kept.append(best)
    print(f"{len(kept)} inputs cover {len(covered)} of {len(total)} features")


if __name__ == "__main__":
    main()
