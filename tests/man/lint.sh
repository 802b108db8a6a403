#!/bin/bash
# Lints every manual page: mandoc must report nothing at warning level or
# above, groff must render it with all warnings enabled and print nothing.
set -u
fail=0
for page in "$@"; do
  out=$( { mandoc -Tlint -Wwarning "$page"; groff -man -ww -z "$page"; } 2>&1 )
  if [ -n "$out" ]; then echo "FAIL: $page"; echo "$out"; fail=1; else echo "ok: $page"; fi
done
exit $fail
