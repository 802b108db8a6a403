#!/bin/bash
# rsocket stream bandwidth and round-trip latency, rdma-core's library and
# ours side by side in the same run: rdma-core's own rstream (server and
# client on this host's RDMA device, both on the same library), runs
# alternating between the two libraries, the median of each figure over the
# runs. Numbers only, never a verdict: these machines are shared and noisy.
#
#   bench/rsocket_stream.sh [--lib PATH] [--runs R] [--count N]
#
#   bandwidth: rstream -S 65536 -C N (Gb/s; each side sends N messages)
#   latency:   rstream -S 64 -C N -T b (blocking; us per transfer)
#
# Run it where there is an RDMA device, e.g. in the Soft-RoCE VM:
#   tests/vm/rxe-vm auto -- bench/rsocket_stream.sh --lib build/src/librdmacm.so.1
set -euo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
LIB=$(dirname "$0")/../build/src/librdmacm.so.1
SYSLIB=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
RUNS=5 COUNT=1000
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--runs) RUNS=$2; shift ;;
	--count) COUNT=$2; shift ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
LIB=$(readlink -f "$LIB")
preloadable "$LIB" && preloadable "$SYSLIB" || exit 1
IP=${RXE_IP:?RXE_IP: the RDMA device address (set in the Soft-RoCE VM)}
command -v rstream >/dev/null || { echo "rstream (rdmacm-utils) is missing" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# one NAME LIBRARY KIND N PORT ARGS...: one rstream pair (common.sh's pair);
# the client's result line's Gb/sec and usec/xfer go to $out/NAME.KIND.
# Either side failing exits the script.
one() {
	local name=$1 lib=$2 kind=$3 n=$4 port=$5 line
	shift 5
	pair "rstream ($name $kind, run $n)" "$port" \
		-- env LD_PRELOAD="$lib" rstream -b "$IP" -p "$port" "$@" \
		-- env LD_PRELOAD="$lib" rstream -s "$IP" -p "$port" "$@" || exit 1
	line=$(tail -n 1 "$out/cli")
	[[ $line =~ $RSTREAM_RESULT_RE ]] ||
		{ echo "rstream printed no result line ($name $kind, run $n):" >&2; cat "$out/cli" >&2; exit 1; }
	# name bytes xfers iters total time Gb/sec usec/xfer
	awk '{ print $7, $8 }' <<< "$line" >> "$out/$name.$kind"
}

port=7900  # apart from cm_costs.sh's scripts (7700-7899): one listener per port
for ((n = 1; n <= RUNS; n++)); do
	for lib in rdma-core ours; do
		path=$SYSLIB
		[ "$lib" = ours ] && path=$LIB
		one "$lib" "$path" bw "$n" $((port++)) -S 65536 -C "$COUNT"
		one "$lib" "$path" lat "$n" $((port++)) -S 64 -C "$COUNT" -T b
	done
done

printf '%-28s %12s %12s %8s\n' "rstream, median of $RUNS" rdma-core ours ratio
row() { # LABEL KIND COLUMN
	local a b
	a=$(median_of "$out/rdma-core.$2" "$3")
	b=$(median_of "$out/ours.$2" "$3")
	printf '%-28s %12s %12s %8s\n' "$1" "$a" "$b" "$(ratio "$a" "$b")"
}
row "bandwidth 64 KiB (Gb/s)" bw 1
row "latency 64 B (us/xfer)" lat 2
