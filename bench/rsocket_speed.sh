#!/bin/bash
# rsockets against the device itself (issue 26's table), in one run: the
# device with raw verbs (perftest over rdma_cm, -R), rdma-core's rsockets
# (the system librdmacm.so.1 preloaded under rdma-core's own rstream and
# riostream), ours (--lib preloaded the same way), and, through the rsocket
# preload, iperf3 and sockperf (kernel TCP, rdma-core's librspreload, ours).
# Rounds alternate between the columns (every round runs each column once;
# even rounds in the reverse order); each figure is the median over the
# rounds. Numbers only, never a verdict: these machines are shared and noisy.
#
#   bench/rsocket_speed.sh [--lib PATH] [--preload PATH] [--copies PATH]
#                          [--runs R] [--count N] [--secs S] [--quick | --smoke]
#
#   --lib PATH      our librdmacm.so.1 (default: build/src/librdmacm.so.1)
#   --preload PATH  our librspreload.so, on --lib (default: its build tree's
#                   preload/librspreload.so; "none": no preload rows)
#   --copies PATH   libsend_copies.so (bench/send_copies.c; default: the build
#                   tree's bench/libsend_copies.so; "none": no copies row)
#   --runs R        rounds (default 3)
#   --count N       64 KiB transfers per bandwidth run (default 1000; 1 MiB
#                   runs move the same bytes), round trips per latency run
#                   (the same N)
#   --secs S        iperf3 and sockperf seconds (default 3)
#   --quick         one round, tiny counts (skips rdma-core's preload, which
#                   fails anyway)
#   --smoke         the least that runs every part of this script once
#                   (bench.smoke; no figures): --quick with N=10 and one pair
#                   per kind: the device's 64 KiB ib_write_bw and ib_send_lat,
#                   each library's 64 KiB rstream and copied/sent, ours'
#                   zero-copy copied/sent (-T b), the preload's programs
#                   through ours (not kernel TCP's column)
#
#   device         ib_write_bw -R -s SIZE -n N; ib_send_lat -R -s 64 -n N (t_avg)
#   rsockets       rstream -S SIZE -C N (both directions in turn; Gb/s as rstream
#                  prints it); rstream -S 64 -C 1 -I N [-T b]; riostream -S 64 -C 1 -I N
#   latency        one way: half a round trip (perftest's, rstream's and
#                  sockperf's convention); means over the run (perftest's t_avg)
#   copied/sent    the rstream client (64 KiB, N/5 sends) under
#                  libsend_copies.so: libc copy calls (memcpy, memmove, mempcpy)
#                  made inside its send calls, bytes per byte those calls sent;
#                  inlined copies and other threads' are not seen
#   blocking       the bandwidth runs again with -T b (blocking sends), and
#                  ours once more with RSOCKET_ZCOPY_MIN=65536 (rsocket(7):
#                  sends of 64 KiB and up go from the caller's buffer; only
#                  blocking sends can), with its copied/sent
#   preload        iperf3 -l 64K -t S (Gb/s, receiver); sockperf ping-pong
#                  --tcp -m 64 -t S (mean one-way us); both ends preloaded (or
#                  neither: kernel TCP, loopback in this host, no wire); a
#                  preloaded figure counts only if rxe0 sent packets
#
# Exit status 1 if any run of the device, rdma-core's rsockets, ours or
# kernel TCP failed (after printing what it has); rdma-core's preload may fail
# (rdma-core 44's runs neither program): "fail" in its cell, tried once.
#
# Run it where there is an RDMA device, e.g. in the Soft-RoCE VM:
#   tests/vm/rxe-vm run -- bench/rsocket_speed.sh --lib build/src/librdmacm.so.1
set -uo pipefail
HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
# pair start client record fails median_of ratio preloadable sent_pkts stop_proc
# shellcheck source=bench/common.sh
. "$HERE/common.sh"
LIB=$HERE/../build/src/librdmacm.so.1 PRELOAD='' COPIES=''
SYSLIB=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
SYSPRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
RUNS=3 COUNT=1000 SECS=3 QUICK=0 SMOKE=0
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--preload) PRELOAD=$2; shift ;;
	--copies) COPIES=$2; shift ;;
	--runs) RUNS=$2; shift ;;
	--count) COUNT=$2; shift ;;
	--secs) SECS=$2; shift ;;
	--quick) QUICK=1 RUNS=1 COUNT=50 SECS=1 ;;
	--smoke) QUICK=1 SMOKE=1 RUNS=1 COUNT=10 SECS=1 ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
LIB=$(readlink -f "$LIB")
BUILD=$(dirname "$(dirname "$LIB")")
[ -n "$PRELOAD" ] || PRELOAD=$BUILD/preload/librspreload.so
[ -n "$COPIES" ] || COPIES=$BUILD/bench/libsend_copies.so
[ "$PRELOAD" = none ] || PRELOAD=$(readlink -f "$PRELOAD")
[ "$COPIES" = none ] || COPIES=$(readlink -f "$COPIES")
preloadable "$LIB" && preloadable "$SYSLIB" || exit 1
[ "$PRELOAD" = none ] || preloadable "$PRELOAD" || exit 1
[ "$COPIES" = none ] || preloadable "$COPIES" || exit 1
IP=${RXE_IP:?RXE_IP: the RDMA device address (set in the Soft-RoCE VM)}
DEV=${RXE_DEV:-rxe0}
need=(rstream riostream ib_write_bw ib_send_lat)
[ "$PRELOAD" = none ] || need+=(iperf3 sockperf)
for p in "${need[@]}"; do
	command -v "$p" >/dev/null || { echo "$p is missing (scripts/deps.sh installs it)" >&2; exit 1; }
done
BIG=$((COUNT / 16)) COPYN=$((COUNT / 5))
[ "$BIG" -ge 5 ] || BIG=5  # perftest: at least 5 iterations
[ "$COPYN" -ge 10 ] || COPYN=10
out=$(mktemp -d)
trap 'for p in $(jobs -p); do stop_proc "$p"; done; rm -rf "$out"' EXIT

# perftest PORT FIGURE FIELD PROGRAM ARGS...: one perftest pair over
# rdma_cm; FIELD of the result line (the one that starts with the size) goes
# to $out/device.FIGURE. -F: TCG's clock fails perftest's CPU-frequency check,
# and perftest times with the TSC scaled by a frequency it estimates, so the
# client's wall-clock time (start-up and connection included) goes to
# $out/device.FIGURE.wall as a bound: Gb/s at least (bw), us at most (lat).
# clock_ok VALUE: VALUE, or "clock" when perftest printed inf, nan or 0
# while data moved: its clock estimate failed.
clock_ok() {
	case $1 in
	*inf* | *nan*) echo clock ;;
	0 | 0.0*) if awk -v x="$1" 'BEGIN { exit !(x + 0 > 0) }'; then echo "$1"; else echo clock; fi ;;
	*) echo "$1" ;;
	esac
}
# perftest_race WHAT: 0 (after a RETRY line) if the pair just failed with
# perftest's own listener race, by its sign (tests/rxe/runner/judge.py): after
# the control connection its server makes a new listener for the data
# connection, and a quick client's request in between is rejected (status 8;
# the client then crashes in perftest's retry). Its pair runs once more.
perftest_race() {
	grep -q '^Event: RDMA_CM_EVENT_REJECTED; error: 8\.' "$out/cli" || return 1
	echo "RETRY $1 (run $n): its client was rejected before its server listened again (perftest's own race); once more" >&2
}
perftest_pair() { # PORT PROGRAM ARGS...
	local port=$1 prog=$2
	shift 2
	pair "$prog $* (run $n)" "$port" -- "$prog" -F -R -d "$DEV" -p "$port" "$@" \
		-- "$prog" -F -R -d "$DEV" -p "$port" "$@" "$IP"
}
perftest() {
	local port=$1 fig=$2 field=$3 prog=$4 size iters v='' t0 t1
	shift 4
	size=$(awk '{ for (i = 1; i < NF; i++) if ($i == "-s") print $(i + 1) }' <<< "$*")
	iters=$(awk '{ for (i = 1; i < NF; i++) if ($i == "-n") print $(i + 1) }' <<< "$*")
	t0=$(now_us)
	if perftest_pair "$port" "$prog" "$@" ||
		{ perftest_race "$prog $*" && t0=$(now_us) && perftest_pair $((port + 100)) "$prog" "$@"; }; then
		t1=$(now_us)
		v=$(awk -v s="$size" -v f="$field" '$1 == s && NF >= f && $2 ~ /^[0-9]+$/ { print $f }' "$out/cli" | tail -n 1)
		[ -n "$v" ] || { echo "$prog printed no result line:" >&2; cat "$out/cli" >&2; }
		v=$(clock_ok "$v")
		# latency: t_typical too (perftest's median; t_avg carries TCG's stalls)
		case $prog in *_lat) record device "$fig.typ" "$(clock_ok "$(awk -v s="$size" '$1 == s && NF >= 6 && $2 ~ /^[0-9]+$/ { print $5 }' "$out/cli" | tail -n 1)")" ;; esac
		[ "$n" != 1 ] || echo "    $prog $*: $(grep -E "^ +$size +" "$out/cli" | tr -s ' ')" >&2
		# the client starts once the server listens: t0 is a little early
		case $prog in
		*_bw) record device "$fig.wall" "$(awk -v b="$size" -v n="$iters" -v t=$((t1 - t0)) 'BEGIN { printf "%.3f", b * n * 8 / t / 1000 }')" ;;
		*) record device "$fig.wall" "$(awk -v n="$iters" -v t=$((t1 - t0)) 'BEGIN { printf "%.1f", t / n / 2 }')" ;;
		esac
	fi
	record device "$fig" "$v"
}

# rs COLUMN LIBRARY PROGRAM PORT FIGURE FIELD ARGS...: one rstream or
# riostream pair, both on LIBRARY; FIELD of its result line (7: Gb/s, 8:
# usec/xfer) goes to $out/COLUMN.FIGURE.
rs() {
	local col=$1 lib=$2 prog=$3 port=$4 fig=$5 field=$6 v='' line
	shift 6
	if pair "$prog $* ($col, run $n)" "$port" \
			-- env $ZC LD_PRELOAD="$lib" "$prog" -b "$IP" -p "$port" "$@" \
			-- env $ZC LD_PRELOAD="$lib" "$prog" -s "$IP" -p "$port" "$@"; then
		line=$(tail -n 1 "$out/cli")
		if [[ $line =~ $RSTREAM_RESULT_RE ]]; then
			v=$(awk -v f="$field" '{ print $f }' <<< "$line")
		else
			echo "$prog printed no result line ($col, run $n):" >&2
			cat "$out/cli" >&2
		fi
	fi
	record "$col" "$fig" "$v"
}

# copies COLUMN LIBRARY PORT FIGURE [ARGS...]: the rstream client's send
# calls under libsend_copies.so (64 KiB, COPYN sends); bytes copied per byte sent.
copies() {
	local col=$1 lib=$2 port=$3 fig=$4 v=''
	shift 4
	rm -f "$out/copies"
	if pair "rstream under libsend_copies.so ($col, run $n)" "$port" \
			-- env $ZC LD_PRELOAD="$lib" rstream -b "$IP" -p "$port" -S 65536 -C "$COPYN" "$@" \
			-- env $ZC LD_PRELOAD="$COPIES $lib" SEND_COPIES_OUT="$out/copies" \
				rstream -s "$IP" -p "$port" -S 65536 -C "$COPYN" "$@"; then
		v=$(awk '$2 > 0 { printf "%.3f", $1 / $2 }' "$out/copies" 2>/dev/null)
		[ -n "$v" ] || echo "libsend_copies.so counted no bytes sent ($col): $(cat "$out/copies" 2>/dev/null)" >&2
	fi
	record "$col" "$fig" "$v"
}

# The preload columns' environments (common.sh's start and client).
env_of() {
	ENVV=()
	case $1 in
	ours) ENVV=("LD_PRELOAD=$PRELOAD" "LD_LIBRARY_PATH=$(dirname "$LIB")") ;;
	rdma-core) ENVV=("LD_PRELOAD=$SYSPRELOAD") ;;
	esac
}
# programs COLUMN: iperf3 and sockperf ping-pong through that column.
programs() {
	local col=$1 CLIENT_LIMIT
	# rdma-core 44's preload runs neither (DESIGN.md): tried once, with a
	# short limit (a hang is its usual failure), then "fail".
	[ "$col" != rdma-core ] || CLIENT_LIMIT=$((SECS * 2 + 15))
	if [ "$col" = rdma-core ] && [ -s "$out/rdma-core.iperf3" ] && ! grep -Eq '^[0-9.]+$' "$out/rdma-core.iperf3" "$out/rdma-core.pp"; then
		record "$col" iperf3 fail; record "$col" pp fail; return
	fi
	port=$((port + 1))
	if start "$col" "$port" iperf3 -s -1 -B "$IP" -p "$port" &&
		client "$col" iperf3 -c "$IP" -p "$port" -t "$SECS" -l 64K -f m; then
		record "$col" iperf3 "$(awk '/ receiver$/ { for (i = 1; i < NF; i++) if ($(i + 1) == "Mbits/sec") printf "%.3f", $i / 1000 }' "$out/client.log")"
	else fails "$col" iperf3; fi
	stop_proc "$SPID"
	port=$((port + 1))
	if start "$col" "$port" sockperf sr --tcp -i "$IP" -p "$port" &&
		client "$col" sockperf pp --tcp -i "$IP" -p "$port" -t "$SECS" -m 64; then
		record "$col" pp "$(sed -n 's/.*Summary: Latency is \([0-9.]*\) usec.*/\1/p' "$out/client.log")"
	else fails "$col" pp; fi
	stop_proc "$SPID"
}

# column NAME: one round of that column's figures.
column() {
	local lib=$SYSLIB
	case $1 in
	device)
		perftest $((port += 1)) bw64 4 ib_write_bw -s 65536 -n "$COUNT" --report_gbits
		if [ "$SMOKE" = 1 ]; then
			perftest $((port += 1)) lat 6 ib_send_lat -s 64 -n "$COUNT"
			return
		fi
		perftest $((port += 1)) bw1m 4 ib_write_bw -s 1048576 -n "$BIG" --report_gbits
		perftest $((port += 1)) lat 6 ib_send_lat -s 64 -n "$COUNT"
		perftest $((port += 1)) late 6 ib_send_lat -s 64 -n "$COUNT" -e
		return ;;
	tcp) programs tcp; return ;;
	ours) lib=$LIB ;;
	esac
	if [ "$SMOKE" = 1 ]; then
		rs "$1" "$lib" rstream $((port += 1)) bw64 7 -S 65536 -C "$COUNT"
		[ "$COPIES" = none ] || copies "$1" "$lib" $((port += 1)) copies
		if [ "$1" = ours ]; then
			ZC=RSOCKET_ZCOPY_MIN=65536
			[ "$COPIES" = none ] || copies zc "$lib" $((port += 1)) copiesb -T b
			ZC=
			[ "$PRELOAD" = none ] || programs ours
		fi
		return
	fi
	rs "$1" "$lib" rstream $((port += 1)) bw64 7 -S 65536 -C "$COUNT"
	rs "$1" "$lib" rstream $((port += 1)) bw1m 7 -S 1048576 -C "$BIG"
	rs "$1" "$lib" rstream $((port += 1)) lat 8 -S 64 -C 1 -I "$COUNT"
	rs "$1" "$lib" rstream $((port += 1)) latb 8 -S 64 -C 1 -I "$COUNT" -T b
	rs "$1" "$lib" riostream $((port += 1)) rio 8 -S 64 -C 1 -I "$COUNT"
	[ "$COPIES" = none ] || copies "$1" "$lib" $((port += 1)) copies
	# Blocking sends, and ours with zero-copy sends (RSOCKET_ZCOPY_MIN):
	# rstream's defaults are non-blocking, which never go zero-copy.
	rs "$1" "$lib" rstream $((port += 1)) bw64b 7 -S 65536 -C "$COUNT" -T b
	rs "$1" "$lib" rstream $((port += 1)) bw1mb 7 -S 1048576 -C "$BIG" -T b
	if [ "$1" = ours ]; then
		ZC=RSOCKET_ZCOPY_MIN=65536
		rs zc "$lib" rstream $((port += 1)) bw64b 7 -S 65536 -C "$COUNT" -T b
		rs zc "$lib" rstream $((port += 1)) bw1mb 7 -S 1048576 -C "$BIG" -T b
		[ "$COPIES" = none ] || copies zc "$lib" $((port += 1)) copiesb -T b
		ZC=
	fi
	[ "$COPIES" = none ] || copies "$1" "$lib" $((port += 1)) copiesb -T b
	if [ "$PRELOAD" != none ] && { [ "$1" = ours ] || [ "$QUICK" = 0 ]; }; then
		programs "$1"
	fi
}

COLS=(device rdma-core ours)
# (--smoke: kernel TCP's column runs the same programs() as ours' preload,
# which it runs; and bench/preload_programs.sh runs both with the same programs)
[ "$PRELOAD" = none ] || [ "$SMOKE" = 1 ] || COLS+=(tcp)
port=24000  # apart from the other benchmarks' ports
ZC=''       # the environment of ours' zero-copy runs (column()), else empty
for ((n = 1; n <= RUNS; n++)); do
	order=("${COLS[@]}")
	if ((n % 2 == 0)); then
		order=()
		for ((i = ${#COLS[@]} - 1; i >= 0; i--)); do order+=("${COLS[i]}"); done
	fi
	for col in "${order[@]}"; do
		echo "round $n: $col" >&2
		column "$col"
	done
done

m() { median_of "$out/$1.$2"; }
fmt='%-40s %9s %9s %9s %9s %8s %8s %8s\n'
echo
echo "rsockets against the device: median of $RUNS round(s), N=$COUNT, $(date -u '+%F %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPU(s)"
# shellcheck disable=SC2059
printf "$fmt" figure device "kern TCP" rdma-core ours rdma/dev ours/dev ours/rdma
# row LABEL FIGURE [DEVICE-FIGURE]: the device's cell is DEVICE-FIGURE's
# (default FIGURE's); ratios against that cell and against rdma-core's.
row() {
	local d t r o
	d=$(m device "${3:-$2}") t=$(m tcp "$2") r=$(m rdma-core "$2") o=$(m ours "$2")
	# shellcheck disable=SC2059
	printf "$fmt" "$1" "$([ "${3:-$2}" = "$2" ] && echo "$d" || echo "($d)")" "$t" "$r" "$o" \
		"$(ratio "$d" "$r")" "$(ratio "$d" "$o")" "$(ratio "$r" "$o")"
}
row "bandwidth, 64 KiB sends (Gb/s)" bw64
row "bandwidth, 1 MiB sends (Gb/s)" bw1m
row "latency 64 B, nonblocking (us)" lat
row "latency 64 B, blocking -T b (us)" latb lat
row "riostream latency 64 B (us)" rio lat
# shellcheck disable=SC2059
{
printf "$fmt" "device, completion events (-e) (us)" "$(m device late)" - - - - - -
printf "$fmt" "device, t_typical (median): polling (us)" "$(m device lat.typ)" - - - - - -
printf "$fmt" "device, t_typical (median): -e (us)" "$(m device late.typ)" - - - - - -
printf "$fmt" "device by wall clock: 64 KiB (Gb/s, >=)" "$(m device bw64.wall)" - - - - - -
printf "$fmt" "device by wall clock: 1 MiB (Gb/s, >=)" "$(m device bw1m.wall)" - - - - - -
printf "$fmt" "device by wall clock: 64 B lat (us, <=)" "$(m device lat.wall)" - - - - - -
}
# shellcheck disable=SC2059
[ "$COPIES" = none ] ||
	printf "$fmt" "copied per byte sent, 64 KiB" 0 - "$(m rdma-core copies)" "$(m ours copies)" - - "$(ratio "$(m rdma-core copies)" "$(m ours copies)")"
row "blocking -T b: bandwidth, 64 KiB (Gb/s)" bw64b bw64
row "blocking -T b: bandwidth, 1 MiB (Gb/s)" bw1mb bw1m
# zrow LABEL FIGURE DEVICE-FIGURE: ours with zero-copy sends (column zc)
# against the device and rdma-core's copying sends.
zrow() {
	local d r o
	d=$(m device "$3") r=$(m rdma-core "$2") o=$(m zc "$2")
	# shellcheck disable=SC2059
	printf "$fmt" "$1" "$([ "$2" = "$3" ] && echo "$d" || echo "($d)")" - "$r" "$o" \
		"$(ratio "$d" "$r")" "$(ratio "$d" "$o")" "$(ratio "$r" "$o")"
}
zrow "  ours zero-copy: 64 KiB (Gb/s)" bw64b bw64
zrow "  ours zero-copy: 1 MiB (Gb/s)" bw1mb bw1m
[ "$COPIES" = none ] || {
	# shellcheck disable=SC2059
	printf "$fmt" "  copied per byte sent, 64 KiB -T b" 0 - "$(m rdma-core copiesb)" "$(m ours copiesb)" - - "$(ratio "$(m rdma-core copiesb)" "$(m ours copiesb)")"
	# shellcheck disable=SC2059
	printf "$fmt" "  ours zero-copy: copied per byte sent" 0 - "$(m rdma-core copiesb)" "$(m zc copiesb)" - - "$(ratio "$(m rdma-core copiesb)" "$(m zc copiesb)")"
}
if [ "$PRELOAD" != none ]; then
	row "preload: iperf3 -l 64K (Gb/s)" iperf3 bw64
	row "preload: sockperf ping-pong 64 B (us)" pp lat
fi
cat <<EOF
(device: perftest over rdma_cm on $DEV; rdma-core: $SYSLIB; ours: $LIB)
(device by wall clock: the whole perftest client, start-up and connection
 included, against its bytes or round trips: a bound on perftest's own figure
 when TCG leaves its TSC-based clock in doubt)
(a device cell in parentheses is the device figure the ratios use: 64 KiB
 ib_write_bw for iperf3, ib_send_lat's polling latency for the blocking and
 preloaded rows; copied/sent of raw verbs is 0: the device reads the
 caller's registered buffer)
EOF
[ "$PRELOAD" = none ] || echo "(preload: ours $PRELOAD; rdma-core $SYSPRELOAD$([ "$QUICK" = 0 ] || echo ', not run with --quick'))"

# "clock": perftest printed inf, nan or 0, its clock estimate (TSC against
# gettimeofday) failing under TCG; the run itself passed. Medians skip it.
inf=$(cd "$out" && grep -c '^clock$' device.* 2>/dev/null | grep -v ':0$' | tr '\n' ' ')
[ -z "$inf" ] || echo "(perftest's clock failed under TCG (inf, nan or 0 printed), runs per figure: $inf)"
# Every other run of the device, the two libraries and kernel TCP must have
# given a number; rdma-core's preload figures may fail.
bad=$(cd "$out" && grep -HvE '^([0-9.]+|clock)$' device.* 2>/dev/null
	grep -HvE '^[0-9.]+$' rdma-core.* ours.* zc.* tcp.* 2>/dev/null | grep -Ev '^rdma-core\.(iperf3|pp):')
bad=$(sort <<< "$bad" | uniq -c | sed '/^ *1 $/d')
if [ -n "$bad" ]; then
	echo "rsocket_speed: failed runs (count, file:result):" >&2
	echo "$bad" >&2
	exit 1
fi
