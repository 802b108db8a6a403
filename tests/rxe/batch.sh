#!/bin/sh
# Runs each argument as a command (in one VM boot), reports each, and fails if
# any failed, so one broken check does not hide the others.
failed=0
for cmd in "$@"; do
  echo "=== $cmd"
  if sh -c "$cmd"; then echo "=== PASS: $cmd"; else echo "=== FAIL ($?): $cmd"; failed=$((failed + 1)); fi
done
echo "=== $# commands, $failed failed"
[ "$failed" = 0 ]
