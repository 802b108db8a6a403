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
