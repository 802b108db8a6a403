#!/bin/sh
# compare.sh PROGRAM OUR_LIBRARY REFERENCE_LIBRARY
# Runs the addrinfo table (PROGRAM, linked to OUR_LIBRARY), then again with
# rdma-core's library (REFERENCE_LIBRARY) preloaded, and fails on any difference in the
# compared outcomes (stdout), printing the diff. The cases not compared
# (stderr) are shown for the record.
prog=$1 ours=$2 ref=$3
[ -x "$prog" ] && [ -r "$ours" ] && [ -r "$ref" ] ||
	{ echo "usage: $0 PROGRAM OUR_LIBRARY REFERENCE_LIBRARY"; exit 2; }
dir=$(mktemp -d) || exit 2
trap 'rm -rf "$dir"' EXIT
# The VM's hostname is "(none)": inside the VM (a throwaway overlay) give it a
# name that resolves, through /etc/hosts, to both of rxe0's addresses.
if [ "$RDMACM_IN_VM" = 1 ] && [ -n "$RXE_IP" ] && [ -n "$RXE_IP6" ]; then
	echo rdmacm-rxe-vm >/proc/sys/kernel/hostname &&
		printf '%s rdmacm-rxe-vm\n%s rdmacm-rxe-vm\n' "$RXE_IP" "$RXE_IP6" >>/etc/hosts ||
		echo "note: could not name the VM; the \$HOST cases test an unknown name"
fi

"$prog" >"$dir/ours.out" 2>"$dir/ours.err"; ours_rc=$?
# A sanitized program refuses a preloaded library ahead of its runtime unless told.
LD_PRELOAD=$ref ASAN_OPTIONS=verify_asan_link_order=0 \
	"$prog" >"$dir/ref.out" 2>"$dir/ref.err"; ref_rc=$?

for run in ours ref; do
	echo "=== $run: stderr (cases not compared, and which library answered)"
	cat "$dir/$run.err"
done
failed=0
[ "$ours_rc" = 0 ] || { echo "FAIL: the run with our library exited $ours_rc"; failed=1; }
[ "$ref_rc" = 0 ] || { echo "FAIL: the run with rdma-core's library exited $ref_rc"; failed=1; }
# Each run must have been answered by the library it was meant for.
grep -qx "rdma_getaddrinfo from $ours" "$dir/ours.err" ||
	{ echo "FAIL: our run did not use $ours"; failed=1; }
grep -qx "rdma_getaddrinfo from $ref" "$dir/ref.err" ||
	{ echo "FAIL: the reference run did not use $ref"; failed=1; }
cases=$(grep -c '^case ' "$dir/ours.out")
# -F: each hunk names the case it is in.
if diff -u -F "^case " --label "ours" --label "rdma-core" "$dir/ours.out" "$dir/ref.out"; then
	echo "=== $cases compared cases: identical outcomes"
else
	echo "FAIL: the outcomes differ (diff above: - ours, + rdma-core)"
	failed=1
fi
[ "$failed" = 0 ] && [ "$cases" -gt 0 ]
