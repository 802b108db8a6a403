# shellcheck shell=bash
# Bounded processes and readiness for the shell scripts that run in the
# Soft-RoCE VM (bench/common.sh, scripts/tools-demo.sh,
# tests/install/package_checks.sh): time, rxe's counter, waiting for a listener on
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
sent_pkts() {
	local v=0
	read -r v 2>/dev/null < "/sys/class/infiniband/${RXE_DEV:-rxe0}/ports/1/hw_counters/sent_pkts" || v=0
	echo "${v:-0}"
}

# Under TCG every program started costs a few tenths of a second (measured in
# the VM: /bin/true 0.16-0.3 s, `sleep 0.1` 0.67 s), so the checks polled
# below start as few as they can: one `rdma`, or none.

# True once an rdma_cm id listens on port $1 (as the kernel's resource tracker sees it).
cm_listening() {
	local line
	while IFS= read -r line; do
		[[ $line =~ state\ LISTEN\ .*src-addr\ [^\ ]*:$1(\ |$) ]] && return 0
	done <<< "$(rdma res show cm_id 2>/dev/null)"
	return 1
}
# True once a TCP socket listens on port $1 (read from /proc/net: no program started).
tcp_listening() {
	local f hex addr st
	printf -v hex ':%04X' "$1"
	for f in /proc/net/tcp /proc/net/tcp6; do
		[ -r "$f" ] || continue
		while read -r _ addr _ st _; do
			[[ $addr == *"$hex" && $st == 0A ]] && return 0
		done < "$f"
	done
	return 1
}
# True once a UDP socket is bound to port $1 (/proc/net again).
udp_listening() {
	local f hex addr
	printf -v hex ':%04X' "$1"
	for f in /proc/net/udp /proc/net/udp6; do
		[ -r "$f" ] || continue
		while read -r _ addr _; do
			[[ $addr == *"$hex" ]] && return 0
		done < "$f"
	done
	return 1
}

# maps PID ERE: true if a line of PID's /proc/PID/maps matches ERE (MAPPED:
# the match's first group, else the whole match), read with builtins only:
# whole, by mapfile's sequential reads. (`while read` seeks back after each
# line, and a seek in /proc/PID/maps counts its bytes again from the start:
# with a mapping added meanwhile, the loader at work, the next "line" began
# mid-line, and "/rdmacm/lib/librdmacm.so.1.5.0", the tail of
# /opt/rdmacm/lib/..., failed rxe.package in a clean-clone run.)
# shellcheck disable=SC2034 # MAPPED is read by the callers
maps() {
	local line lines
	{ mapfile -t lines < "/proc/$1/maps"; } 2>/dev/null || return 1
	for line in "${lines[@]}"; do
		[[ $line =~ $2 ]] && { MAPPED=${BASH_REMATCH[1]:-${BASH_REMATCH[0]}}; return 0; }
	done
	return 1
}

# nap SECONDS: sleeps without starting a program: bash's `read` timing out
# on a FIFO that nobody writes (opened once per shell, read and write, so it
# never sees an end of file). Falls back to sleep if no FIFO can be made.
nap() {
	if [ -z "${NAP_FD:-}" ]; then
		local f=${TMPDIR:-/tmp}/nap.$$.$RANDOM
		if mkfifo -m 600 "$f" 2>/dev/null && exec {NAP_FD}<>"$f"; then
			rm -f "$f"
		else
			rm -f "$f"
			NAP_FD=
			sleep "$1"
			return 0
		fi
	fi
	read -r -t "$1" -u "$NAP_FD" _ || :
}

# The loops below count wall-clock time, not iterations: under TCG a fork of
# `sleep` alone can take a few tenths of a second (nap above does not fork).

# wait_ready KIND PORT PID SECONDS: 0 when ready (KIND cm or tcp: listening
# on PORT; udp: bound to it); 1 when the server died first; 2 on timeout.
wait_ready() { wait_until "$4" ready_or_gone "$@" || return 2; return "$GONE"; }
ready_or_gone() { GONE=0; "$1_listening" "$2" && return 0; GONE=1; gone "$3"; }

# wait_until SECONDS CMD...: 0 once CMD succeeds (tried every POLL seconds,
# 0.1 unless set), 1 if it did not within SECONDS.
wait_until() {
	local end=$((${EPOCHREALTIME/./} + $1 * 1000000))
	shift
	until "$@"; do
		((${EPOCHREALTIME/./} < end)) || return 1
		nap "${POLL:-0.1}"
	done
}

# has_line FILE REGEX: a line of FILE matches the extended regular expression.
has_line() {
	local line
	[ -r "$1" ] || return 1
	while IFS= read -r line || [ -n "$line" ]; do [[ $line =~ $2 ]] && return 0; done < "$1"
	return 1
}
# wait_line FILE REGEX SECONDS: 0 once a line of FILE matches REGEX, 1 if none did within SECONDS.
wait_line() { wait_until "$3" has_line "$1" "$2"; }

# wait_exit PID SECONDS: 0 once PID has exited (its status in WAIT_RC), 1 if still running.
# shellcheck disable=SC2034 # WAIT_RC is read by the callers
wait_exit() {
	wait_until "$2" gone "$1" || return 1
	WAIT_RC=0
	wait "$1" 2>/dev/null || WAIT_RC=$?
	return 0
}
gone() { ! kill -0 "$1" 2>/dev/null; } # gone PID: PID has exited

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
