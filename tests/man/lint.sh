#!/bin/bash
# Lints every manual page: mandoc must report nothing at warning level or
# above, groff must render it with all warnings enabled and print nothing.
#
# A stub page is a single line ".so manN/target.N" (the form man-db and
# mandoc resolve from the root of the manual tree). Its target must exist in
# the same tree and must not be a stub itself; both linters then read the stub
# from the tree's root, and mandoc's only permitted remark is that .so is
# "fragile" (it prefers hard links, which an install cannot rely on).
set -u
fail=0
stub_re='^\.so (man[1-8]/[A-Za-z0-9_.+-]+\.[1-8])$'
for page in "$@"; do
  first=$(head -n 1 "$page")
  if [[ $first =~ $stub_re ]]; then
    target=${BASH_REMATCH[1]}
    root=$(cd "$(dirname "$page")/.." && pwd)
    rel=$(basename "$(dirname "$page")")/$(basename "$page")
    if [ "$(wc -l < "$page")" -ne 1 ]; then
      out="stub page has more than its .so line"
    elif [ ! -f "$root/$target" ]; then
      out="stub target $target does not exist"
    elif [[ $(head -n 1 "$root/$target") =~ $stub_re ]]; then
      out="stub target $target is itself a stub"
    else
      out=$(cd "$root" && { mandoc -Tlint -Wwarning "$rel" 2>&1 | grep -v 'WARNING: \.so is fragile'; groff -man -ww -z "$rel" 2>&1; })
    fi
  else
    out=$( { mandoc -Tlint -Wwarning "$page"; groff -man -ww -z "$page"; } 2>&1 )
  fi
  if [ -n "$out" ]; then echo "FAIL: $page"; echo "$out"; fail=1; else echo "ok: $page"; fi
done
exit $fail
