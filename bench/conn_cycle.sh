#!/bin/bash
# Connection setup as a socket program sees it, kernel TCP, our preload and
# rdma-core's side by side in one boot (issue 39's "setup" row):
# bench/conn_cycle (CYCLES times in a row: connect, 1 KiB echoed, close,
# against a server that accepts, echoes and closes) bare, under our
# librspreload.so and under rdma-core's, rounds alternating between the
# columns; each figure's median over the rounds, in microseconds: the whole
# cycle (median and 90th percentile) and its steps. Numbers only, no verdict.
# Column "no-ahead" is ours without endpoints made ahead for the run
# (RSOCKET_ENDPOINTS_AHEAD=0, rsocket(7); "ours" makes them, the default).
# With --cm-bin, columns "cm" and "cm-384" are the connection manager's own
# cycle on RDMACM's library, the baseline of issue 39's "within 2x of the
# CM's connect/disconnect": bench/cm_cycle (create id to ESTABLISHED, then
# disconnect to destroyed; no echo) with cmtime's QP (1 deep) and with
# rsockets' (384 deep both ways: rxe maps a QP's rings whole at creation).
#
#   bench/conn_cycle.sh --bin PATH --lib PATH [--rdmacm PATH] [--cm-bin PATH] [--ref PATH]
#                       [--cycles N] [--rounds R]
#
#   --bin PATH     build/bench/conn_cycle; --cm-bin PATH: build/bench/cm_cycle
#   --lib PATH     our librspreload.so; --rdmacm PATH: the librdmacm.so.1 it runs on
#   --ref PATH     rdma-core's preload (default /usr/lib/x86_64-linux-gnu/rsocket/librspreload.so;
#                  "none" to leave it out)
#   --cycles N     cycles a run (default 200); --rounds R: runs a column (default 3)
#
# A preloaded run counts only if rxe0 sent packets during it; otherwise its
# figures show "no-rdma" (a fallback to kernel TCP), and a failed run "fail".
# Run it where there is an RDMA device, e.g.:
#   tests/vm/rxe-vm auto -- bench/conn_cycle.sh --bin build/bench/conn_cycle \
#       --lib build/preload/librspreload.so --rdmacm build/src/librdmacm.so.1
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
BIN='' CM_BIN='' LIB='' RDMACM='' REF=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so CYCLES=200 ROUNDS=3
while [ $# -gt 0 ]; do
	case $1 in
	--bin) BIN=$2; shift ;;
	--cm-bin) CM_BIN=$2; shift ;;
	--lib) LIB=$2; shift ;;
	--rdmacm) RDMACM=$2; shift ;;
	--ref) REF=$2; shift ;;
	--cycles) CYCLES=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$CM_BIN" ]; then socket_columns no-ahead cm cm-384; else socket_columns no-ahead; fi
keys=(cycle_us p90_us connect_us echo_us close_us)

# run COLUMN: one run under that column's preload; each figure appended to
# $out/COLUMN.KEY (or why there is none).
run() {
	local env port=$((7460 + RANDOM % 400)) before line why='' k
	local bin=$BIN extra=()
	case $1 in
	cm | cm-384)  # the CM's own: linked to our library, on RDMACM's if given
		bin=$CM_BIN extra=(--depth "${1#cm-}")
		[ "$1" != cm ] || extra=(--depth 1)
		env=(${RDMACM:+LD_LIBRARY_PATH="$(dirname "$(readlink -f "$RDMACM")")"}) ;;
	*) column_env "$1" "RSOCKET_ENDPOINTS_AHEAD=$([ "$1" = no-ahead ] && echo 0 || echo 2)" ;;
	esac
	before=$(sent_pkts)
	line=$(env "${env[@]}" timeout $((CYCLES / 2 + 60)) "$bin" --addr "$RXE_IP" --port "$port" \
		--cycles "$CYCLES" "${extra[@]}" 2>"$out/$1.err") || why=fail
	[ -n "$why" ] || [ "$1" = kernel ] || [ "$(($(sent_pkts) - before))" -gt 0 ] || why=no-rdma
	for k in "${keys[@]}"; do
		if [ -n "$why" ]; then
			echo "$why"
		elif [[ $line =~ (^| )$k=([0-9]+) ]]; then
			echo "${BASH_REMATCH[2]}"
		else
			echo -  # not a step of this column (the CM's cycle echoes nothing)
		fi >>"$out/$1.$k"
	done
}
for ((r = 0; r < ROUNDS; r++)); do
	for c in "${columns[@]}"; do run "$c"; done
done

fmt='%-10s %10s %10s %11s %9s %9s\n'
# shellcheck disable=SC2059
printf "$fmt" column cycle_us p90_us connect_us echo_us close_us
for c in "${columns[@]}"; do
	figures=()
	for k in "${keys[@]}"; do figures+=("$(median_of "$out/$c.$k")"); done
	# shellcheck disable=SC2059
	printf "$fmt" "$c" "${figures[@]}"
done
echo "(microseconds, median over $ROUNDS runs of each run's median of $CYCLES cycles: connect, 1 KiB echoed, close)"
for c in ours no-ahead; do
	for base in rdma-core cm cm-384; do
		[ -s "$out/$base.cycle_us" ] &&
			echo "a cycle, $c / $base's: $(ratio "$(median_of "$out/$base.cycle_us")" "$(median_of "$out/$c.cycle_us")")"
	done
done
for c in "${columns[@]}"; do
	[ -s "$out/$c.err" ] && { echo "$c:"; sed 's/^/    /' "$out/$c.err" | head -3; }
done
[ "$(median_of "$out/ours.cycle_us")" != fail ]
