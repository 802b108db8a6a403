#!/bin/bash
# What a connection costs a socket program, kernel TCP, our preload and
# rdma-core's side by side in one boot (issue 39's table): bench/conn_memory
# (a poll() or epoll server and a client, 4 KiB echoed on each connection,
# all kept open) bare, under our librspreload.so and under rdma-core's. For
# each count: KiB per connection above the processes' base (resident, and of
# it pinned by RDMA registration), the server's and the client's; that step's
# connections a second; the median round trip on one connection while the
# others idle (a wait's cost as the loop holds more); and, for the preloads,
# rxe0's sent_pkts (a column that sent nothing fell back to TCP). Numbers
# only, no verdict.
#
#   bench/conn_memory.sh --bin PATH --lib PATH [--rdmacm PATH] [--ref PATH] [--at 1,256,4096] [--secs S]
#                        [--epoll] [--pings K] [--bytes N] [--idle S]
#
#   --bin PATH     build/bench/conn_memory
#   --lib PATH     our librspreload.so; --rdmacm PATH: the librdmacm.so.1 it runs on
#   --ref PATH     rdma-core's preload (default /usr/lib/x86_64-linux-gnu/rsocket/librspreload.so;
#                  "none" to leave it out)
#   --secs S       a step's bound (default 120): a column that stalls shows "stuck at N"
#   --epoll        the server's loop is epoll (default: poll); --pings K: round trips timed (default 100)
#   --bytes N      echoed once on each connection (default 4096); --idle S: memory read after the
#                  connections idled S seconds (default 0: at once)
#
# Run it where there is an RDMA device with memory for the counts (rsockets'
# default buffers are 2 x 128 KiB a side, registered), e.g.:
#   RDMACM_VM_MEM=8192 tests/vm/rxe-vm auto -- bench/conn_memory.sh --bin build/bench/conn_memory \
#       --lib build/preload/librspreload.so --rdmacm build/src/librdmacm.so.1
set -uo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
BIN='' LIB='' RDMACM='' REF=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so AT=1,256,4096 SECS=120 PINGS=100 LOOP=
BYTES=4096 IDLE=0
while [ $# -gt 0 ]; do
	case $1 in
	--bin) BIN=$2; shift ;;
	--lib) LIB=$2; shift ;;
	--rdmacm) RDMACM=$2; shift ;;
	--ref) REF=$2; shift ;;
	--at) AT=$2; shift ;;
	--secs) SECS=$2; shift ;;
	--pings) PINGS=$2; shift ;;
	--epoll) LOOP=--epoll ;;
	--bytes) BYTES=$2; shift ;;
	--idle) IDLE=$2; shift ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
socket_columns

# run COLUMN: conn_memory under that column's preload; its lines in $out/COLUMN.
run() {
	local env port=$((7470 + RANDOM % 400)) before
	column_env "$1"
	before=$(sent_pkts)
	env "${env[@]}" timeout $((SECS * 4 + 60)) "$BIN" --addr "$RXE_IP" --port $port --at "$AT" \
		--secs "$SECS" --pings "$PINGS" --bytes "$BYTES" --idle "$IDLE" $LOOP --step-cmd "rdma res show | sed 's/^/kernel /'" >"$out/$1" 2>"$out/$1.err"
	echo "status $? sent_pkts $(($(sent_pkts) - before))" >>"$out/$1"
}
for c in "${columns[@]}"; do run "$c"; done

# val COLUMN LINE KEY: KEY's value on the line that starts with LINE ("base", "conns=N").
val() {
	local w
	while read -ra w; do
		[ "${w[0]:-}" = "$2" ] || continue
		for kv in "${w[@]:1}"; do [ "${kv%%=*}" != "$3" ] || { echo "${kv#*=}"; return; }; done
	done <"$out/$1"
}
# per_conn COLUMN N SIDE KIND: KiB a connection at N (above the base), or why not.
per_conn() {
	local base now
	base=$(val "$1" base "${3}_${4}_kib") now=$(val "$1" "conns=$2" "${3}_${4}_kib")
	if [ -n "$now" ] && [ -n "$base" ]; then
		awk -v a="$base" -v b="$now" -v n="$2" 'BEGIN { printf "%.0f", (b - a) / n }'
	else
		# A step past its bound says "stuck at N"; a process the outer
		# timeout ended (status 124) says nothing: "hung".
		grep -m1 -o '^stuck at [0-9]*' "$out/$1" | tr ' ' _ | grep . ||
			{ grep -q '^status 124 ' "$out/$1" && echo hung; } || echo -
	fi
}

fmt='%-8s %-10s %12s %12s %12s %12s %9s %9s\n'
# shellcheck disable=SC2059
printf "$fmt" conns column srv_rss/conn srv_pin/conn cli_rss/conn cli_pin/conn conn/s ping_us
for n in ${AT//,/ }; do
	for c in "${columns[@]}"; do
		# shellcheck disable=SC2059
		printf "$fmt" "$n" "$c" "$(per_conn "$c" "$n" server rss)" "$(per_conn "$c" "$n" server pin)" \
			"$(per_conn "$c" "$n" client rss)" "$(per_conn "$c" "$n" client pin)" \
			"$(val "$c" "conns=$n" conns_per_s)" "$(val "$c" "conns=$n" ping_us)"
	done
done
echo "(KiB per connection above the processes' base, $BYTES bytes echoed on each, read after ${IDLE} s idle;"
echo " pin: RDMA-registered; conn/s: that step's connections"
echo " a second; ping_us: median 64-byte round trip on one connection, all the others idle, --pings $PINGS)"
for c in "${columns[@]}"; do
	echo "$c: $(tail -1 "$out/$c"), secs $(awk -F'secs=' 'NF > 1 { s = $2 } END { print s + 0 }' "$out/$c")"
	[ -s "$out/$c.err" ] && sed 's/^/    /' "$out/$c.err" | head -3
done
echo "the kernel's share at each count, all connections open (rdma res show: objects on the device):"
for c in "${columns[@]}"; do
	awk -v c="$c" '$1 ~ /^conns=/ { n = $1 } $1 == "kernel" { $1 = ""; print "    " c " " n ":" $0 }' "$out/$c"
done
