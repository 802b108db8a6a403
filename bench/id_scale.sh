#!/bin/bash
# Ids at scale, rdma-core's library and ours side by side in one run: for each
# count, bench/id_scale (N ids on one channel: create, resolve address, take
# and acknowledge the events, destroy) under each library, rounds alternating,
# the median of the rounds. Microseconds per id and resident bytes per live id:
# constant figures across counts mean O(1) per id. Numbers only, no verdict.
#
#   bench/id_scale.sh --bin PATH [--lib PATH] [--counts "1000 5000 10000"] [--rounds R] [--create-only]
#
# --create-only: no address resolved (a resolved id holds an ephemeral port:
# 28,232 on Debian's defaults, so 100,000 resolved ids fail on either
# library): create and destroy only, up to any count.
#
# Run it where there is an RDMA device, e.g. in the Soft-RoCE VM:
#   tests/vm/rxe-vm auto -- bench/id_scale.sh --bin build/bench/id_scale
set -euo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
LIB=$(dirname "$0")/../build/src/librdmacm.so.1
BIN=$(dirname "$0")/../build/bench/id_scale
SYSLIB=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
COUNTS="1000 5000 10000" ROUNDS=3 ONLY=
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--bin) BIN=$2; shift ;;
	--counts) COUNTS=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--create-only) ONLY=create-only ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
LIB=$(readlink -f "$LIB")
# (id_scale is linked with ours: a preload the loader ignored would measure
# ours under the name of the column)
preloadable "$LIB" && preloadable "$SYSLIB" || exit 1
IP=${RXE_IP:?RXE_IP: the RDMA device address (set in the Soft-RoCE VM)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Both libraries run from page-cached copies (see connect_setup.sh: the VM's
# 9p root makes every first touch of a code page a trip to the host).
LIB_SHOWN=$LIB
cp "$LIB" "$out/lib-ours.so"
cp "$(readlink -f "$SYSLIB")" "$out/lib-rdma-core.so"
LIB=$out/lib-ours.so SYSLIB=$out/lib-rdma-core.so

for n in $COUNTS; do
	for ((r = 1; r <= ROUNDS; r++)); do
		for name in rdma-core ours; do
			preload=$SYSLIB
			[ $name = ours ] && preload=$LIB
			LD_PRELOAD=$preload timeout 300 "$BIN" "$n" "$IP" ${ONLY:+"$ONLY"} >>"$out/$name.$n" ||
				{ echo "id_scale failed ($name, $n ids)" >&2; exit 1; }
		done
	done
done

# median COLUMN FILE
median() { awk -v c="$1" '{ print $c }' "$2" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "Ids on one channel, median of $ROUNDS rounds (us per id; RSS bytes per live id)"
printf '%7s %-9s %8s %8s %8s %8s %8s\n' ids library create resolve events destroy RSS/id
for n in $COUNTS; do
	for name in rdma-core ours; do
		printf '%7s %-9s' "$n" "$name"
		for c in 2 3 4 5 6; do printf ' %8s' "$(median $c "$out/$name.$n")"; done
		echo
	done
done
echo "library: $LIB_SHOWN (reference $(readlink -f /usr/lib/x86_64-linux-gnu/librdmacm.so.1)), both run from copies"
