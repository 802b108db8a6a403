# shellcheck shell=bash
# Sourced by the bench scripts: the shell helpers of tests/rxe/procs.sh (now_us,
# sent_pkts, cm_listening, tcp_listening, wait_ready, wait_exit, stop_proc,
# RSTREAM_RESULT_RE), and the checks every benchmark makes so that a run that
# did not measure what its column says fails instead of printing a number.
# shellcheck source=tests/rxe/procs.sh
. "$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)/../tests/rxe/procs.sh"

# preloadable PATH: 0 if the dynamic loader preloads PATH. It ignores a
# preload it cannot load with one line on stderr and runs the program anyway,
# so a wrong --lib would otherwise measure the program's own library under
# our name.
preloadable() {
	local err
	err=$(LD_PRELOAD=$1 /bin/true 2>&1) && [ -z "$err" ] && return 0
	echo "cannot preload $1: ${err:-/bin/true failed under it}" >&2
	return 1
}

# The socket benchmarks' start (conn_memory.sh, conn_cycle.sh), after their
# options (BIN, LIB, RDMACM, REF): checks them, makes $out (gone at exit) and
# columns: kernel, ours, then the ones given, then rdma-core's preload unless
# REF is none.
socket_columns() {
	[ -x "$BIN" ] && [ -n "$LIB" ] && [ -n "${RXE_IP:-}" ] || { echo "usage: RXE_IP=... $0 --bin PATH --lib PATH" >&2; exit 2; }
	LIB=$(readlink -f "$LIB")
	preloadable "$LIB" || exit 2
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
	columns=(kernel ours "$@")
	[ "$REF" = none ] || { preloadable "$REF" && columns+=(rdma-core); }
}

# column_env COLUMN [VAR=VALUE...]: env=(...), the environment of a run in
# that column: our preload (on RDMACM's library if given) with the variables
# given, rdma-core's preload, or none (kernel).
# shellcheck disable=SC2034  # env is the caller's (a local it declared)
column_env() {
	case $1 in
	kernel) env=() ;;
	rdma-core) env=(LD_PRELOAD="$REF") ;;
	*) env=(LD_PRELOAD="$LIB" ${RDMACM:+LD_LIBRARY_PATH="$(dirname "$(readlink -f "$RDMACM")")"} "${@:2}") ;;
	esac
}

# server_listens PORT PID LOG [SECONDS]: waits (30 s by default) until an
# rdma_cm id listens on PORT (rsocket listeners are rdma_cm ids too). If the
# server PID exits first or never listens, prints why and LOG, returns 1.
server_listens() {
	local port=$1 pid=$2 log=$3 secs=${4:-30} rc=0
	wait_ready cm "$port" "$pid" "$secs" || rc=$?
	case $rc in
	0) return 0 ;;
	1) echo "the server exited before it listened on port $port:" >&2 ;;
	*) echo "the server did not listen on port $port within $secs s:" >&2 ;;
	esac
	cat "$log" >&2
	return 1
}

# stop_server PID: stop_proc (tests/rxe/procs.sh) under `set -e`. It
# reaps a server that has already exited with `wait`, whose status (the
# server's) would end a set -e script right there, before it says why.
stop_server() { stop_proc "$1" || :; }

# pair WHAT PORT -- SERVER... -- CLIENT...: one server (in the background,
# waited for until an rdma_cm id listens on PORT) and its client, each under
# `timeout ${PAIR_TIMEOUT:-120}`, their output in $out/srv and $out/cli ($out:
# the caller's scratch directory). 0 once the client and then the server
# exited 0 (the server ends with its client: one that fails or hangs after
# the client's transfers is a failed run too); otherwise says why (WHAT, both
# logs) and returns 1.
# shellcheck disable=SC2154 # $out: the caller's
pair() {
	local what=$1 port=$2 srv rc=0 s=()
	shift 2
	[ "${1:-}" = -- ] || { echo "pair: usage" >&2; return 2; }
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do s+=("$1"); shift; done
	[ $# -gt 1 ] || { echo "pair: usage" >&2; return 2; }
	shift
	timeout "${PAIR_TIMEOUT:-120}" "${s[@]}" >"$out/srv" 2>&1 </dev/null &
	srv=$!
	server_listens "$port" "$srv" "$out/srv" ||
		{ echo "$what: the server failed" >&2; stop_server "$srv"; return 1; }
	timeout "${PAIR_TIMEOUT:-120}" "$@" >"$out/cli" 2>&1 </dev/null || rc=$?
	if [ "$rc" != 0 ]; then
		echo "$what: the client failed (status $rc):" >&2
		cat "$out/cli" "$out/srv" >&2
		stop_server "$srv"
		return 1
	fi
	WAIT_RC=
	if ! wait_exit "$srv" 30 || [ "$WAIT_RC" != 0 ]; then
		echo "$what: the server failed (status ${WAIT_RC:-still running}):" >&2
		cat "$out/srv" >&2
		stop_server "$srv"
		return 1
	fi
}

# median_of FILE [COLUMN]: the median of the numbers in COLUMN (1) of FILE's
# lines; with none, the first word recorded (fail, no-rdma ...); - for no file.
median_of() {
	[ -s "$1" ] || { echo -; return; }
	# One line (one round): its value as it is, without starting awk and
	# sort (a tenth of a second or more each under TCG).
	local lines f
	mapfile -t lines < "$1"
	if [ "${#lines[@]}" = 1 ]; then
		read -ra f <<< "${lines[0]}"
		echo "${f[${2:-1} - 1]:-}"
		return
	fi
	awk -v c="${2:-1}" '{ print $c }' "$1" | {
		local v
		v=$(grep -E '^[0-9.]+$' | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
		echo "${v:-$(awk -v c="${2:-1}" 'NR == 1 { print $c }' "$1")}"
	}
}

# ratio A B: B / A as "1.23x", or - when either is not a positive number.
ratio() {
	[[ $1 =~ ^[0-9.]*[1-9][0-9.]*$ && $2 =~ ^[0-9.]*[1-9][0-9.]*$ ]] || { echo -; return; }
	awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", b / a; else print "-" }'
}

# Programs under a preload (bench/preload_programs.sh; bench/rsocket_speed.py has its own).
# The caller defines env_of COLUMN (sets the array ENVV: the environment of a
# process in that column; empty for kernel TCP, whose column is named tcp) and
# $out, and sets SECS (a client's limit: SECS * 4 + 60 s).
#
# up_or_gone PORT PID: listening on rdma_cm or kernel TCP (a preload may fall back), or gone (GONE=1)
up_or_gone() { ready_or_gone cm "$1" "$2" || ready_or_gone tcp "$1" "$2"; }
# start COLUMN PORT CMD...: a server in the background (SPID), waited for
# until it listens (rdma_cm or TCP).
start() {
	local col=$1 port=$2 rc=0
	shift 2
	env_of "$col"
	timeout -k 2 120 env "${ENVV[@]}" "$@" > "$out/server.log" 2>&1 < /dev/null &
	SPID=$!
	wait_until 20 up_or_gone "$port" "$SPID" || rc=2
	[ "$rc" = 0 ] && [ "$GONE" = 0 ] && return 0
	echo "    $col: $1 $([ "$rc" = 2 ] && echo "did not listen on port $port within 20 s" ||
		echo "exited before it listened on port $port"): $(tail -n 1 "$out/server.log")" >&2
	return 1
}
# client COLUMN CMD...: runs a client, its output in $out/client.log. Status 0
# only if it succeeded and, preloaded (not tcp), rxe0 sent packets meanwhile;
# NORDMA=1 when it succeeded without them (a fallback to kernel TCP).
client() {
	local col=$1 p0 rc
	shift
	env_of "$col"
	p0=$(sent_pkts)
	# shellcheck disable=SC2153 # SECS: the caller's
	timeout -k 2 $((SECS * 4 + 60)) env "${ENVV[@]}" "$@" > "$out/client.log" 2>&1 < /dev/null
	rc=$?
	[ "$rc" = 0 ] || { echo "    $col: $* failed (status $rc): $(tail -n 1 "$out/client.log")" >&2; return 1; }
	if [ "$col" != tcp ] && [ $(($(sent_pkts) - p0)) -lt 100 ]; then
		echo "    $col: $* sent no packets on rxe0 (kernel TCP fallback?)" >&2
		NORDMA=1
		return 1
	fi
}
# record COLUMN FIGURE VALUE: one run's result ("fail" when VALUE is empty)
record() { echo "${3:-fail}" >> "$out/$1.$2"; }
# fails COLUMN FIGURE...: a failed run of every FIGURE (no-rdma after a fallback)
fails() {
	local c=$1 f
	shift
	for f in "$@"; do if [ "${NORDMA:-0}" = 1 ]; then record "$c" "$f" no-rdma; else record "$c" "$f" fail; fi; done
	NORDMA=0
}
