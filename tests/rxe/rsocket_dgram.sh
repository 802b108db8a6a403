#!/bin/bash
# Datagram rsockets on a real device (rxe0 in the Soft-RoCE VM): rdma-core's
# udpong, server and client both on our library, in each mode given
# (default: b = blocking, n = non-blocking, a = rpoll, e = echo: every
# message back; a mode ending in 6, e.g. n6, runs over IPv6, RXE_IP6). A mode passes only if
# the client completes its exchange, its bytes crossed rxe0 (sent_pkts rose
# by at least the message count) and both processes bound their r* calls to
# our library (LD_DEBUG=bindings).
#
#   rsocket_dgram.sh --lib PATH/librdmacm.so.1 [MODE...]
#
# Environment: RXE_IP (the device's IPv4 address), RXE_DEV (default rxe0).
# Output: `PASS|FAIL <mode> ...` per mode, the udpong result lines, and last
# `N passed, M failed`. Exit status 0 only if all passed.
set -u
LIB='' MODES=()
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	*) MODES+=("$1") ;;
	esac
	shift
done
[ -n "$LIB" ] && [ -n "${RXE_IP:-}" ] || { echo "usage: RXE_IP=... $0 --lib PATH [MODE...]" >&2; exit 2; }
[ ${#MODES[@]} -gt 0 ] || MODES=(b n a e n6)
LIBDIR=$(cd "$(dirname "$LIB")" && pwd)
OURS=$(readlink -f "$LIB")
COUNTER=/sys/class/infiniband/${RXE_DEV:-rxe0}/ports/1/hw_counters/sent_pkts
COUNT=200 SIZE=1000
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0 fail=0 port=7300

# Every r* symbol the program bound went to our library, and it bound some.
bound_to_ours() { # $1: LD_DEBUG_OUTPUT prefix
	local f lines
	lines=$(cat "$1".* 2>/dev/null | grep -E "normal symbol \`r(socket|sendto|recvfrom|send|recv|bind|connect)'" || true)
	[ -n "$lines" ] || { echo "no r* bindings in $1.*"; return 1; }
	if echo "$lines" | grep -v "to $LIBDIR/librdmacm.so.1 " | grep -q .; then
		echo "r* bound elsewhere:"; echo "$lines" | grep -v "to $LIBDIR/librdmacm.so.1 " | head -3
		return 1
	fi
}

for mode in "${MODES[@]}"; do
	port=$((port + 1))
	ip=$RXE_IP
	case $mode in *6) ip=${RXE_IP6:?}; mode=${mode%6} ;; esac
	rm -f "$TMP"/*
	env LD_LIBRARY_PATH="$LIBDIR" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$TMP/srv" \
		timeout -k 2 60 udpong -b "$ip" -p $port -T "$mode" >"$TMP/srv.out" 2>&1 &
	srv=$!
	# Ready once its port is bound: a datagram rsocket binds a kernel UDP
	# socket of its own to its port at rbind (as rdma-core's does).
	end=$((SECONDS + 30))
	until ss -Hlun "sport = :$port" 2>/dev/null | grep -q .; do
		kill -0 "$srv" 2>/dev/null && [ $SECONDS -lt $end ] || break
		sleep 0.1
	done
	before=$(cat "$COUNTER")
	env LD_LIBRARY_PATH="$LIBDIR" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$TMP/cli" \
		timeout -k 2 60 udpong -s "$ip" -p $port -T "$mode" -C $COUNT -S $SIZE >"$TMP/cli.out" 2>&1
	rc=$?
	after=$(cat "$COUNTER")
	# The server still runs (blocked in a receive): udpong itself, timeout's
	# child, maps our library.
	mapped=no
	for pid in $(pgrep -P "$srv"); do grep -q " $OURS\$" "/proc/$pid/maps" 2>/dev/null && mapped=yes; done
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	sent=$((after - before))
	why=''
	[ $rc -eq 0 ] || why="client exit $rc"
	[ -z "$why" ] && ! grep -q "^custom" "$TMP/cli.out" && why="no result line"
	[ -z "$why" ] && [ $sent -lt $COUNT ] && why="only $sent packets crossed rxe"
	[ -z "$why" ] && [ $mapped != yes ] && why="server does not map $OURS"
	[ -z "$why" ] && { b=$(bound_to_ours "$TMP/srv") || why="server: $b"; }
	[ -z "$why" ] && { b=$(bound_to_ours "$TMP/cli") || why="client: $b"; }
	if [ -z "$why" ]; then
		pass=$((pass + 1))
		echo "PASS -T $mode $ip: sent_pkts +$sent, server maps $OURS"
		sed 's/^/    /' "$TMP/cli.out"
	else
		fail=$((fail + 1))
		echo "FAIL -T $mode $ip: $why"
		echo "  client:"; tail -5 "$TMP/cli.out" | sed 's/^/    /'
		echo "  server:"; tail -5 "$TMP/srv.out" | sed 's/^/    /'
	fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
