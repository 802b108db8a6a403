#!/bin/sh
# compare.sh PROGRAM OUR_LIBRARY REFERENCE_LIBRARY
# The CM on iWARP, ours against rdma-core's: runs cm_table (PROGRAM, linked
# to OUR_LIBRARY) on the iWARP device (RXE_IP, RXE_DEV), then again with
# rdma-core's library (REFERENCE_LIBRARY) preloaded, and fails on any
# difference in what they print (stdout), showing the diff (- ours,
# + rdma-core). Each run must have been answered by the library it was
# meant for, and the device must be iWARP, else nothing was compared.
prog=$1 ours=$2 ref=$3
[ -x "$prog" ] && [ -r "$ours" ] && [ -r "$ref" ] && [ -n "$RXE_IP" ] ||
	{ echo "usage: RXE_IP=... $0 PROGRAM OUR_LIBRARY REFERENCE_LIBRARY"; exit 2; }
grep -q RNIC "/sys/class/infiniband/${RXE_DEV:-siw0}/node_type" 2>/dev/null ||
	{ echo "FAIL: ${RXE_DEV:-siw0} is not an iWARP device"; exit 1; }
dir=$(mktemp -d) || exit 2
trap 'rm -rf "$dir"' EXIT

# Different listener ports for the two runs (cm_table prints them as
# "listen"): the first run's connections may linger in the kernel.
"$prog" 7600 >"$dir/ours.out" 2>"$dir/ours.err"; ours_rc=$?
# A sanitized program refuses a preloaded library ahead of its runtime unless told.
LD_PRELOAD=$ref ASAN_OPTIONS=verify_asan_link_order=0 \
	"$prog" 7700 >"$dir/ref.out" 2>"$dir/ref.err"; ref_rc=$?

# RDMACM_IWARP_KEEP=DIR: both outputs are kept there (ours.out, ref.out).
[ -n "${RDMACM_IWARP_KEEP:-}" ] && cp "$dir/ours.out" "$dir/ref.out" "$RDMACM_IWARP_KEEP/"
failed=0
for run in ours ref; do
	if [ -s "$dir/$run.err" ] && [ "$(grep -cv '^rdma_create_id from ' "$dir/$run.err")" != 0 ]; then
		echo "=== $run: stderr"
		cat "$dir/$run.err"
	fi
done
[ "$ours_rc" = 0 ] || { echo "FAIL: the run with our library exited $ours_rc"; failed=1; }
[ "$ref_rc" = 0 ] || { echo "FAIL: the run with rdma-core's library exited $ref_rc"; failed=1; }
# used RUN LIBRARY: the run's rdma_create_id came from LIBRARY.
used() {
	lib=$(sed -n 's/^rdma_create_id from //p' "$dir/$1.err" | head -n 1)
	[ -n "$lib" ] && [ "$(readlink -f "$lib")" = "$(readlink -f "$2")" ]
}
used ours "$ours" || { echo "FAIL: our run did not use $ours"; failed=1; }
used ref "$ref" || { echo "FAIL: the reference run did not use $ref"; failed=1; }
grep -q ' iwarp ' "$dir/ours.out" || { echo "FAIL: no id on an iWARP device"; failed=1; }
grep -qx end "$dir/ours.out" || { echo "FAIL: our run did not reach its end"; failed=1; }
cases=$(grep -c '^case ' "$dir/ours.out")
lines=$(wc -l <"$dir/ours.out")
# -F: each hunk names the case it is in.
if diff -u -F "^case " --label "ours" --label "rdma-core" "$dir/ours.out" "$dir/ref.out"; then
	echo "=== $cases cases, $lines lines: identical on both libraries"
else
	echo "FAIL: the answers differ (diff above: - ours, + rdma-core)"
	failed=1
fi
[ "$failed" = 0 ] && [ "$cases" -gt 0 ]
