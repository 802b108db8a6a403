#!/bin/bash
# The main job's demonstration: the bundled tools, each server against its own
# client, through this library over the RDMA device of this (virtual) host,
# then a short summary. Usage: scripts/tools-demo.sh BUILD_DIR
#
# The address is RXE_IP (set in the Soft-RoCE VM), else the first IPv4 address
# of the first RDMA device's network interface.
set -uo pipefail
cd "$(dirname "$0")/.."
build=$(readlink -f "$1")
tools=$build/examples
# Readiness (the kernel's view of listening ids) and bounded process control.
# shellcheck source=../tests/rxe/procs.sh
. tests/rxe/procs.sh

ip=${RXE_IP:-}
if [ -z "$ip" ]; then
	netdev=$(rdma link show 2>/dev/null | sed -n 's/.* netdev \([^ ]*\).*/\1/p' | head -n1)
	ip=$(ip -4 -o addr show dev "${netdev:-none}" 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
fi
if [ -z "$ip" ]; then
	echo "tools-demo: no RDMA device with an IPv4 address on this host" >&2
	exit 1
fi

results=()
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# demo NAME WHAT PORT "SERVER ARGS" "CLIENT ARGS": the server in the background
# until it listens, the client in the foreground, both bounded in time.
demo() {
	local name=$1 what=$2 port=$3 srv_args=$4 cli_args=$5 start srv rc
	echo "--- $name server: $name $srv_args"
	echo "--- $name client: $name $cli_args"
	start=$(now_us)
	# shellcheck disable=SC2086 # the argument strings are words
	timeout -k 2 60 "$tools/$name" $srv_args >"$log/$name.srv" 2>&1 &
	srv=$!
	if ! wait_ready cm "$port" "$srv" 20; then
		stop_proc "$srv"
		sed 's/^/    server| /' "$log/$name.srv"
		results+=("FAIL  $name: the server did not start listening")
		return
	fi
	# shellcheck disable=SC2086
	timeout -k 2 60 "$tools/$name" $cli_args >"$log/$name.cli" 2>&1
	rc=$?
	wait_exit "$srv" 20 || { stop_proc "$srv"; WAIT_RC=timeout; }
	sed 's/^/    server| /' "$log/$name.srv" | tail -n 4
	sed 's/^/    client| /' "$log/$name.cli" | tail -n 4
	if [ "$rc" = 0 ] && [ "$WAIT_RC" = 0 ]; then
		results+=("PASS  $(printf '%-9s %-46s %5ss' "$name" "$what" "$(secs_since "$start")")")
	else
		results+=("FAIL  $name: client exit $rc, server exit $WAIT_RC")
	fi
}

demo rping "10 pings of 64 B, each verified" 7201 \
	"-s -a $ip -p 7201 -C 10 -V" "-c -a $ip -p 7201 -C 10 -S 64 -V -v"
demo ucmatose "4 connections x 10 sends of 100 B each way" 7202 \
	"-b $ip -p 7202 -c 4 -C 10" "-s $ip -p 7202 -c 4 -C 10"
# udaddy's service port is fixed (7174), as in rdma-core.
demo udaddy "4 UD endpoints x 10 datagrams of 100 B" 7174 \
	"-b $ip -c 4 -C 10" "-s $ip -c 4 -C 10"
echo "--- cminfo $ip"
if "$tools/cminfo" "$ip"; then results+=("PASS  cminfo    the device behind $ip"); else results+=("FAIL  cminfo"); fi

lib=$(LD_TRACE_LOADED_OBJECTS=1 "$tools/rping" | awk '/librdmacm/ {print $3}')
echo
echo "Summary: the bundled tools over $ip (librdmacm: $(readlink -f "$lib"))"
printf '  %s\n' "${results[@]}"
! printf '%s\n' "${results[@]}" | grep -q '^FAIL'
