# shellcheck shell=bash
# Sourced by the bench scripts that measure rdma-core's cmtime client.
#
# cmtime_pair PRELOAD PORT CONNS LOG SECONDS [WRAPPER ARG...]: rdma-core's
# cmtime server on $IP:PORT, then its client making CONNS connections under
# WRAPPER (valgrind, strace, time, or nothing), both with LD_PRELOAD=PRELOAD,
# each bounded by SECONDS. The client's output goes to LOG, the server's to
# srv beside it. If the client fails, prints both and exits the script. The
# server serves until stopped: it is stopped here.
cmtime_pair() {
	local preload=$1 port=$2 conns=$3 log=$4 secs=$5 srv
	shift 5
	LD_PRELOAD=$preload timeout "$secs" cmtime -b "$IP" -p "$port" -c "$conns" >"$(dirname "$log")/srv" 2>&1 &
	srv=$!
	sleep 1
	LD_PRELOAD=$preload timeout "$secs" "$@" cmtime -s "$IP" -p "$port" -c "$conns" >"$log" 2>&1 ||
		{ echo "cmtime failed ($*, $log):" >&2; cat "$log" "$(dirname "$log")/srv" >&2; exit 1; }
	kill "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || true
}
