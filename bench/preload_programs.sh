#!/bin/bash
# Ordinary socket programs through our rsocket preload beside kernel TCP (and
# beside another preload, e.g. rdma-core's, with --ref): iperf3, sockperf
# (TCP ping-pong latency, TCP throughput) and redis-benchmark, server and
# client on this host's RDMA device address, both preloaded (or neither, for
# kernel TCP); runs alternate between the columns; the median of each figure
# over the runs. Numbers only, never a verdict: these machines are shared and
# noisy.
#
#   bench/preload_programs.sh --lib PATH [--rdmacm PATH] [--ref PATH] [--runs R] [--secs S] [--smoke]
#
#   --lib PATH     our librspreload.so
#   --rdmacm PATH  the librdmacm.so.1 it runs on (its directory goes first on LD_LIBRARY_PATH)
#   --ref PATH     a third column: another preload (rdma-core's:
#                  /usr/lib/x86_64-linux-gnu/rsocket/librspreload.so; with
#                  rdma-core 44 none of these programs works through it)
#   --runs R       runs per column (default 3); --secs S: iperf3 and sockperf seconds (default 3)
#   --smoke        one run of each program through ours, as short as it goes
#                  (bench.smoke; no figures, no kernel TCP column): --runs 1
#                  --secs 1, redis-benchmark -c 5 -n 100
#
#   iperf3 -t S                       receiver's Mbit/s
#   sockperf pp --tcp -m 64 -t S      round-trip latency, median and mean (us)
#   sockperf tp --tcp -m 1400 -t S    Mbit/s sent
#   redis-benchmark -c 50 -t set,get  requests per second (-n 10000 per run)
#
# Kernel TCP here is loopback inside one host (the VM): no NIC, no wire.
# A preloaded figure counts only if rxe0 sent packets during its run
# (hw_counters/sent_pkts); otherwise it shows as "no-rdma" (a fallback to
# kernel TCP), and a failed run as "fail".
#
# Exit status: 1 (after the table) if any run of the kernel TCP or ours
# column failed or showed "no-rdma", 0 otherwise. The --ref column may fail
# (rdma-core 44's preload runs none of these programs): it never changes the
# exit status.
#
# Run it where there is an RDMA device, e.g. in the Soft-RoCE VM:
#   tests/vm/rxe-vm auto -- bench/preload_programs.sh --lib build/preload/librspreload.so \
#       --rdmacm build/src/librdmacm.so.1
set -uo pipefail
HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
# preloadable start client record fails median_of ratio stop_proc
# shellcheck source=bench/common.sh
. "$HERE/common.sh"
LIB='' RDMACM='' REF='' RUNS=3 SECS=3 REQS=10000 CONNS=50 COLS=(tcp ours)
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--rdmacm) RDMACM=$2; shift ;;
	--ref) REF=$2; shift ;;
	--runs) RUNS=$2; shift ;;
	--secs) SECS=$2; shift ;;
	--smoke) RUNS=1 SECS=1 REQS=100 CONNS=5 COLS=(ours) ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
[ -f "$LIB" ] || { echo "preload_programs: --lib PATH (our librspreload.so) is required" >&2; exit 2; }
preloadable "$LIB" || exit 1
IP=${RXE_IP:?RXE_IP: the RDMA device address (set in the Soft-RoCE VM)}
for p in iperf3 sockperf redis-server redis-benchmark; do
	command -v "$p" >/dev/null || { echo "$p is missing (scripts/deps.sh installs it)" >&2; exit 1; }
done
[ -z "$REF" ] || COLS+=(ref)
out=$(mktemp -d)
trap 'for p in $(jobs -p); do stop_proc "$p"; done; rm -rf "$out"' EXIT

# env_of COLUMN: the environment of a process in that column (an array ENVV).
LIB=$(readlink -f "$LIB")
[ -z "$RDMACM" ] || RDMACM_DIR=$(dirname "$(readlink -f "$RDMACM")")
[ -z "$REF" ] || REF=$(readlink -f "$REF")
env_of() {
	ENVV=()
	case $1 in
	ours) ENVV=("LD_PRELOAD=$LIB")
		[ -z "$RDMACM" ] || ENVV+=("LD_LIBRARY_PATH=$RDMACM_DIR") ;;
	ref) ENVV=("LD_PRELOAD=$REF") ;;
	esac
}
port=23000
for ((n = 1; n <= RUNS; n++)); do
	for col in "${COLS[@]}"; do
		echo "run $n: $col" >&2
		port=$((port + 1))
		if start "$col" "$port" iperf3 -s -1 -B "$IP" -p "$port" &&
			client "$col" iperf3 -c "$IP" -p "$port" -t "$SECS" -f m; then
			record "$col" iperf3 "$(awk '/ receiver$/ { for (i = 1; i < NF; i++) if ($(i + 1) == "Mbits/sec") print $i }' "$out/client.log")"
		else fails "$col" iperf3; fi
		stop_proc "$SPID"

		port=$((port + 1))
		if start "$col" "$port" sockperf sr --tcp -i "$IP" -p "$port"; then
			if client "$col" sockperf pp --tcp -i "$IP" -p "$port" -t "$SECS" -m 64; then
				record "$col" lat50 "$(awk '/percentile 50.000 =/ { print $NF }' "$out/client.log")"
				record "$col" latavg "$(sed -n 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p' "$out/client.log")"
			else fails "$col" lat50 latavg; fi
			if client "$col" sockperf tp --tcp -i "$IP" -p "$port" -t "$SECS" -m 1400; then
				record "$col" tp "$(sed -n 's/.*Summary: BandWidth is .*(\([0-9.]*\) Mbps).*/\1/p' "$out/client.log")"
			else fails "$col" tp; fi
		else fails "$col" lat50 latavg tp; fi
		stop_proc "$SPID"

		port=$((port + 1))
		if start "$col" "$port" redis-server --bind "$IP" --port "$port" --save '' --appendonly no \
				--protected-mode no --daemonize no &&
			client "$col" redis-benchmark -h "$IP" -p "$port" -c "$CONNS" -n "$REQS" -t set,get --csv; then
			record "$col" set "$(awk -F'"' '$2 == "SET" { print $4 }' "$out/client.log")"
			record "$col" get "$(awk -F'"' '$2 == "GET" { print $4 }' "$out/client.log")"
		else fails "$col" set get; fi
		stop_proc "$SPID"
	done
done

# median COLUMN FIGURE: common.sh's median_of on that column's results
median() { median_of "$out/$1.$2"; }
hdr=$(printf '%-44s %12s %12s %9s' "preload programs, median of $RUNS runs" "kernel TCP" ours ours/TCP)
[ -z "$REF" ] && echo "$hdr" || printf '%s %12s\n' "$hdr" reference
row() { # LABEL FIGURE
	local a b line
	a=$(median tcp "$2") b=$(median ours "$2")
	line=$(printf '%-44s %12s %12s %9s' "$1" "$a" "$b" "$(ratio "$a" "$b")")
	[ -z "$REF" ] && echo "$line" || printf '%s %12s\n' "$line" "$(median ref "$2")"
}
row "iperf3 -t $SECS (Mbit/s)" iperf3
row "sockperf TCP ping-pong 64 B, median (us)" lat50
row "sockperf TCP ping-pong 64 B, mean (us)" latavg
row "sockperf TCP throughput 1400 B (Mbit/s)" tp
row "redis-benchmark -c $CONNS SET (requests/s)" set
row "redis-benchmark -c $CONNS GET (requests/s)" get
echo "(kernel TCP: loopback in one host; ours${REF:+, reference}: both ends preloaded, packets on rxe0)"
[ -z "$REF" ] || echo "(reference: $REF)"

# Every run of the kernel TCP and ours columns must have given a number.
bad=$(cd "$out" && grep -HvE '^[0-9.]+$' tcp.* ours.* 2>/dev/null | sed 's/^\([a-z]*\)\.\([a-z0-9]*\):/\1 \2 /' | sort | uniq -c)
if [ -n "$bad" ]; then
	echo "preload_programs: failed runs (count, column, figure, result):" >&2
	echo "$bad" >&2
	exit 1
fi
