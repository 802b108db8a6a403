#!/bin/bash
# rdmacm-which on this host (no RDMA needed): it names our library when the
# loader would give a program ours (LD_LIBRARY_PATH) or a process has it
# mapped (LD_PRELOAD), rdma-core's with its package otherwise, and fails on
# a program or process without librdmacm.
#
#   check_which.sh BUILD_DIR
set -uo pipefail
build=$(cd "$1" && pwd)
which=$(cd "$(dirname "$0")/../../examples" && pwd)/rdmacm-which
ours=$build/src
ref=$(command -v rping) || { echo "FAIL: rdma-core's rping (rdmacm-utils) not installed"; exit 1; }
version=$(grep -a -o -m1 'rdmacm-ident: rdmacm [0-9.]*' "$ours/librdmacm.so.1" | head -n 1)
version=${version#rdmacm-ident: }
[ -n "$version" ] || { echo "FAIL: no identifying string in $ours/librdmacm.so.1"; exit 1; }
fail=0

# check WANT_STATUS WANT_REGEX CMD...
check() {
  local want_status=$1 want=$2 out status; shift 2
  out=$("$@" 2>&1); status=$?
  if [ "$status" = "$want_status" ] && [[ $out =~ $want ]]; then
    echo "ok: $out"
  else
    echo "FAIL: $* gave status $status: $out (wanted $want_status, /$want/)"; fail=1
  fi
}

check 0 "^$ref: .*/librdmacm\\.so\\.1[0-9.]* \\(ours: $version\\)$" env LD_LIBRARY_PATH="$ours" "$which" "$ref"
check 0 "^$ref: .* \\(not rdmacm's; package librdmacm1(:[a-z0-9]+)?\\)$" env -u LD_LIBRARY_PATH "$which" rping
LD_PRELOAD=$ours/librdmacm.so.1 sleep 30 & pid=$!
for _ in $(seq 100); do grep -q librdmacm "/proc/$pid/maps" 2>/dev/null && break; sleep 0.05; done
check 0 "^pid $pid \\(sleep\\): $ours/librdmacm\\.so\\.1[0-9.]* \\(ours: $version\\)$" "$which" $pid
kill $pid; wait $pid 2>/dev/null
sleep 30 & pid=$!
check 1 "^pid $pid \\(sleep\\): no librdmacm loaded$" "$which" $pid
kill $pid; wait $pid 2>/dev/null
check 1 "cannot read /proc/$pid/maps" "$which" $pid
check 1 ": does not load librdmacm\\.so\\.1$" "$which" true
check 1 "no such program" "$which" no-such-program-here
check 2 "^usage: " "$which" -x
exit $fail
