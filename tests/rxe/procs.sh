# shellcheck shell=bash
# Bounded processes and readiness for the shell scripts that run in the
# Soft-RoCE VM (bench/common.sh, scripts/tools-demo.sh,
# tests/install/package_vm.sh): time, rxe's counter, waiting for a listener on
# the condition, stopping a background `timeout`. The harnesses themselves are
# Python (tests/rxe/runner/core.py does the same there); the rules that judge
# a failure are only in tests/rxe/runner/judge.py, reached from shell through
# `tests/rxe/runner/run.py judge ...`.

now_us() { echo "${EPOCHREALTIME/./}"; }
secs_since() { # $1: start in microseconds -> seconds with one decimal
	local d=$(($(now_us) - $1))
	printf '%d.%d' $((d / 1000000)) $((d % 1000000 / 100000))
}

# A line of rstream's results table: "name bytes xfers iters total time Gb/sec usec/xfer"
# (the same as RSTREAM_RESULT_RE in tests/rxe/runner/core.py).
# shellcheck disable=SC2034 # used by bench/rsocket_stream.sh
RSTREAM_RESULT_RE='^[a-z0-9_]+ +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+s +[0-9.]+ +[0-9.]+$'

# Packets rxe0 has sent so far (its hardware counter).
sent_pkts() { cat "/sys/class/infiniband/${RXE_DEV:-rxe0}/ports/1/hw_counters/sent_pkts" 2>/dev/null || echo 0; }

# True once an rdma_cm id listens on port $1 (as the kernel's resource tracker sees it).
cm_listening() {
	rdma res show cm_id 2>/dev/null | grep -Eq "state LISTEN .*src-addr [^ ]*:$1( |\$)"
}
tcp_listening() {
	ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

# The loops below count wall-clock time, not iterations: under TCG a fork of
# `sleep` alone can take a few tenths of a second.

# wait_ready KIND PORT PID SECONDS: 0 when ready (KIND cm or tcp: listening
# on PORT); 1 when the server died first; 2 on timeout.
wait_ready() {
	local kind=$1 what=$2 pid=$3 end=$(($(now_us) + $4 * 1000000))
	while :; do
		case $kind in
		cm) cm_listening "$what" && return 0 ;;
		tcp) tcp_listening "$what" && return 0 ;;
		esac
		kill -0 "$pid" 2>/dev/null || return 1
		(($(now_us) < end)) || return 2
		sleep 0.1
	done
}

# wait_exit PID SECONDS: 0 once PID has exited (its status in WAIT_RC), 1 if still running.
# shellcheck disable=SC2034 # WAIT_RC is read by the callers
wait_exit() {
	local pid=$1 end=$(($(now_us) + $2 * 1000000))
	while kill -0 "$pid" 2>/dev/null && (($(now_us) < end)); do sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then return 1; fi
	WAIT_RC=0
	wait "$pid" 2>/dev/null || WAIT_RC=$?
	return 0
}

# Stops a background `timeout` (its own process group) and everything under it.
stop_proc() {
	local pid=$1
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
	kill -TERM "$pid" 2>/dev/null
	wait_exit "$pid" 3 && return 0
	kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null || true
	return 0
}
