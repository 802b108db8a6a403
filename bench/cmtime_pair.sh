# shellcheck shell=bash
# Sourced by the bench scripts that measure rdma-core's cmtime client.
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
#
# cmtime_pair PRELOAD PORT CONNS LOG SECONDS [WRAPPER ARG...]: rdma-core's
# cmtime server on $IP:PORT, waited for until it listens, then its client
# making CONNS connections under WRAPPER (valgrind, strace, time, or nothing),
# both with LD_PRELOAD=PRELOAD, each bounded by SECONDS. The client's output
# goes to LOG, the server's to srv beside it. If the server dies or does not
# listen within 30 s, or the client fails or reports a failed connection,
# prints both and exits the script.
# The server serves until stopped: it is stopped here.
cmtime_pair() {
	local preload=$1 port=$2 conns=$3 log=$4 secs=$5 srv
	shift 5
	LD_PRELOAD=$preload timeout "$secs" cmtime -b "$IP" -p "$port" -c "$conns" >"$(dirname "$log")/srv" 2>&1 &
	srv=$!
	server_listens "$port" "$srv" "$(dirname "$log")/srv" ||
		{ echo "cmtime server failed ($preload)" >&2; stop_server "$srv"; exit 1; }
	# rdma-core 44's client exits 0 and prints its table when connections
	# fail ("event: RDMA_CM_EVENT_REJECTED, error: 8" each): its errors fail the run too.
	if ! LD_PRELOAD=$preload timeout "$secs" "$@" cmtime -s "$IP" -p "$port" -c "$conns" >"$log" 2>&1 ||
		grep -Eq '(^event: |_ERROR)[^ ]*, error: |^failure|failing connection' "$log"; then
		echo "cmtime failed ($*, $log):" >&2
		cat "$log" "$(dirname "$log")/srv" >&2
		stop_server "$srv"
		exit 1
	fi
	stop_server "$srv"
}
