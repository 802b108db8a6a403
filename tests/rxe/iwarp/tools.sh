#!/bin/bash
# rdma-core's rdma_server/rdma_client (the synchronous endpoint calls:
# rdma_getaddrinfo, rdma_create_ep, rdma_get_request, rdma_post_*) and
# cmtime -c 50 (50 connections set up and torn down at once) over
# Soft-iWARP, server and client on rdma-core's library, both on ours, and
# mixed both ways (rxe.siw_smoke's boot, ../CMakeLists.txt).
#
#   tools.sh --lib PATH/librdmacm.so.1      (RXE_IP, RXE_DEV: the siw device)
#
# A pair passes if both sides exit 0 and print what they should, each process
# initialised the library it was meant to (LD_DEBUG=libs), and the work went
# through siw, counted by kprobes: rdma_server's messages on siw's receive
# path (siw_tcp_rx_data: one call at least per message, 2 a run), cmtime's
# connections on siw's accept (siw_accept: 50). A failed pair runs once more
# (a `FLAKY iwarp_tools <case>:` line) unless a process loaded the wrong
# library or the work did not go through siw.
set -u
[ "${1:-}" = --lib ] && [ -n "${2:-}" ] && [ -n "${RXE_IP:-}" ] ||
	{ echo "usage: RXE_IP=... $0 --lib PATH/librdmacm.so.1" >&2; exit 2; }
OURS=$(readlink -f "$2")
OURDIR=$(dirname "$OURS")
DEV=${RXE_DEV:-siw0}
grep -q RNIC "/sys/class/infiniband/$DEV/node_type" 2>/dev/null ||
	{ echo "FAIL setup: $DEV is not an iWARP device"; exit 1; }
W=$(mktemp -d)
TR=/sys/kernel/tracing
PROBES='iwarp_tools_rx:siw_tcp_rx_data iwarp_tools_accept:siw_accept'
unprobe() {
	for p in $PROBES; do
		echo 0 > "$TR/events/kprobes/${p%%:*}/enable"
		echo "-:${p%%:*}" >> "$TR/kprobe_events"
	done 2>/dev/null
}
trap 'unprobe; rm -rf "$W"' EXIT
[ -e "$TR/kprobe_events" ] || mount -t tracefs nodev "$TR" || { echo "FAIL setup: no tracefs"; exit 1; }
for p in $PROBES; do
	echo "p:${p%%:*} ${p#*:}" >> "$TR/kprobe_events" && echo 1 > "$TR/events/kprobes/${p%%:*}/enable" ||
		{ echo "FAIL setup: kprobe on ${p#*:}"; exit 1; }
done
hits() { awk -v n="$1" '$1 == n { print $2 }' "$TR/kprobe_profile"; }

passed=0 failed=0 port=7500

# on LIB ROLE: the environment that runs ROLE (server or client) on library
# LIB (sys: rdma-core's, as the tools are linked; ours: first on the path).
on() {
	echo "LD_DEBUG=libs LD_DEBUG_OUTPUT=$W/$2.ld"
	[ "$1" = sys ] || echo "LD_LIBRARY_PATH=$OURDIR"
}

# initialised ROLE LIB: the librdmacm.so.1 ROLE's process initialised is LIB's.
initialised() {
	local got
	got=$(sed -n 's/.*calling init: \(.*\/librdmacm\.so\.1\)$/\1/p' "$W/$1".ld.* 2>/dev/null | head -n 1)
	[ -n "$got" ] || { echo "$1 initialised no librdmacm.so.1"; return; }
	got=$(readlink -f "$got")
	case $2 in
	ours) [ "$got" = "$OURS" ] || echo "$1 initialised $got, not ours" ;;
	sys) [ "$got" != "$OURS" ] || echo "$1 initialised ours, not rdma-core's" ;;
	esac
}

# attempt TOOL SERVER_LIB CLIENT_LIB: one run; sets WHY (empty: passed),
# FINAL (1: a failure no rerun may forgive) and SEEN (what siw counted).
attempt() {
	local tool=$1 sl=$2 cl=$3 srv crc src rx0 acc0 rx acc end
	port=$((port + 1))
	rm -f "$W"/*
	WHY='' FINAL=0
	rx0=$(hits iwarp_tools_rx) acc0=$(hits iwarp_tools_accept)
	local server=(rdma_server -s "$RXE_IP" -p "$port") client=(rdma_client -s "$RXE_IP" -p "$port")
	if [ "$tool" = cmtime ]; then
		server=(cmtime -b "$RXE_IP" -p "$port") client=(cmtime -s "$RXE_IP" -p "$port" -c 50)
	fi
	# shellcheck disable=SC2046
	timeout -k 2 90 env $(on "$sl" server) stdbuf -oL "${server[@]}" >"$W/server.out" 2>&1 &
	srv=$!
	end=$((SECONDS + 30))
	until rdma res show cm_id 2>/dev/null | grep 'state LISTEN' | grep -q ":$port "; do
		if ! kill -0 $srv 2>/dev/null || [ $SECONDS -ge $end ]; then WHY='the server did not listen'; break; fi
		sleep 0.1
	done
	if [ -z "$WHY" ]; then
		# shellcheck disable=SC2046
		timeout -k 2 90 env $(on "$cl" client) stdbuf -oL "${client[@]}" >"$W/client.out" 2>&1
		crc=$?
	fi
	if [ "$tool" = cmtime ]; then
		kill $srv 2>/dev/null  # it serves until stopped
	else
		# rdma_server ends a moment after its client: give it 15 s, then
		# record what the kernel holds (the server's log says where it was).
		end=$((SECONDS + 15))
		while kill -0 $srv 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
		if kill -0 $srv 2>/dev/null; then
			{ echo "still running 15 s after its client; the kernel's view:"
			  rdma res show cm_id; rdma res show qp; } >>"$W/server.out" 2>&1
			kill $srv
		fi
	fi
	wait $srv
	src=$?
	rx=$(($(hits iwarp_tools_rx) - rx0)) acc=$(($(hits iwarp_tools_accept) - acc0))
	SEEN="siw: $rx receive calls, $acc accepts"
	[ -n "$WHY" ] && return
	case $tool in
	rdma_server)
		[ "$crc" = 0 ] || WHY="client exit $crc"
		[ -n "$WHY" ] || [ "$src" = 0 ] || WHY="server exit $src"
		[ -n "$WHY" ] || grep -q '^rdma_client: end 0$' "$W/client.out" || WHY='the client did not end with 0'
		[ -n "$WHY" ] || grep -q '^rdma_server: end 0$' "$W/server.out" || WHY='the server did not end with 0'
		[ -n "$WHY" ] || [ "$rx" -ge 2 ] || { WHY="$rx siw receive calls, not 2: the messages did not cross siw"; FINAL=1; } ;;
	cmtime)
		[ "$crc" = 0 ] || WHY="client exit $crc"
		[ -n "$WHY" ] || grep -qE '^connect +: +[0-9.]+' "$W/client.out" || WHY='the client printed no connect row'
		[ -n "$WHY" ] || [ "$acc" = 50 ] || { WHY="$acc siw accepts, not 50: the connections did not go through siw"; FINAL=1; } ;;
	esac
	if [ -z "$WHY" ]; then
		WHY=$(initialised server "$sl")$(initialised client "$cl")
		[ -z "$WHY" ] || FINAL=1
	fi
}

show_logs() {
	for role in server client; do
		tail -n 12 "$W/$role.out" 2>/dev/null | sed "s/^/  [$role] /"
	done
}

for tool in rdma_server cmtime; do
	for libs in "sys sys" "ours ours" "ours sys" "sys ours"; do
		# shellcheck disable=SC2086
		set -- $libs
		name="$tool server $1, client $2"
		attempt $tool "$1" "$2"
		if [ -n "$WHY" ] && [ "$FINAL" = 0 ]; then
			echo "FLAKY iwarp_tools $name: $WHY ($SEEN)"
			show_logs
			attempt $tool "$1" "$2"
		fi
		if [ -z "$WHY" ]; then
			passed=$((passed + 1))
			echo "PASS $name: $SEEN"
		else
			failed=$((failed + 1))
			echo "FAIL $name: $WHY ($SEEN)"
			show_logs
		fi
	done
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
