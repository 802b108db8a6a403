#!/bin/bash
# Datagram rsockets on a real device (rxe0 in the Soft-RoCE VM): rdma-core's
# udpong, server and client both on our library, in each case given.
#
# A case is LETTERS[6][:SIZE]. Each letter is one udpong -T option (b =
# blocking, n = non-blocking, a = rpoll, e = echo: every message back; "be"
# is blocking echo); a 6 runs it over IPv6 (RXE_IP6); SIZE is udpong's -S
# (default 1000), a number or max, max-1, max+1: the largest datagram one UD
# message holds on this port (its active MTU, at most rsockets' 2048-byte
# slot, less our 8-byte IPv4 or 24-byte IPv6 header: 1016 and 1000 on rxe's
# MTU of 1024), give or take one.
#
# A case whose size fits passes only if the client completes its exchange,
# its bytes crossed rxe0 (sent_pkts rose by at least the message count) and
# both processes bound their r* calls to our library (LD_DEBUG=bindings).
# A case whose size does not fit passes only if the client's first data send
# failed at once with EMSGSIZE (udpong says "rsend: Message too long" and
# exits by itself, with no result line): never a silent drop (a UD message
# over the MTU is dropped by the device unseen: rdma-core 44's udpong at
# 1017 bytes reports "0 transfers", in echo mode it waits for ever).
#
# The case "ref" (ref6: over IPv6) is rdma-core's own library as the client
# against our server: rdma-core 44's datagram rsockets cannot run on RoCE at
# all (its address handles lack a GRH; rconnect fails with ENOENT), so mixed
# pairs mean nothing here; the case asserts that failure as measured, so a
# newer rdma-core that works shows up.
#
#   rsocket_dgram.sh --lib PATH/librdmacm.so.1 [CASE...]
#
# Environment: RXE_IP (the device's IPv4 address), RXE_IP6, RXE_DEV (default rxe0).
# Output: `PASS|FAIL <case> ...` per case, the udpong result lines, and last
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
[[ -n $LIB && -n ${RXE_IP:-} ]] || { echo "usage: RXE_IP=... $0 --lib PATH [MODE...]" >&2; exit 2; }
# Every mode at the default size; the largest datagram and one byte past it
# in blocking and echo mode (the size is checked where every mode sends, so
# the non-blocking and rpoll modes add nothing there: 8 such cases cost 58 s),
# on both families, and far past it.
[ ${#MODES[@]} -gt 0 ] || MODES=(b n a e n6
	b:max e:max b6:max e6:max
	b:max+1 e:max+1 b6:max+1 e6:1500 ref)
LIBDIR=$(cd "$(dirname "$LIB")" && pwd)
OURS=$(readlink -f "$LIB")
COUNT=200 SIZE=1000
# One UD message: the port's active MTU, at most the 2048-byte slot.
MTU=$(ibv_devinfo -d "${RXE_DEV:-rxe0}" -i 1 | awk '$1 == "active_mtu:" { print $2 }')
[ -n "$MTU" ] || { echo "no active_mtu for ${RXE_DEV:-rxe0}" >&2; exit 2; }
[ "$MTU" -le 2048 ] || MTU=2048
echo "active MTU $MTU: datagrams of at most $((MTU - 8)) bytes (IPv4), $((MTU - 24)) (IPv6)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0 fail=0 port=7300
# Polling and checks with shell builtins (each program started costs 0.1-0.3 s
# of CPU under TCG): nap, wait_ready, sent_pkts, now_us, maps, stop_proc.
# shellcheck source=procs.sh
. "$(dirname "$0")/procs.sh"

# Every r* symbol the program bound went to our library, and it bound some.
bound_to_ours() { # $1: LD_DEBUG_OUTPUT prefix
	local line n=0
	# One grep over the loader's output (thousands of lines: a bash loop over
	# them costs seconds under TCG), then the few lines it found.
	# (A here-string, not <(...): the VM has no /dev/fd for bash's process
	# substitution.)
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		n=$((n + 1))
		[[ $line == *"to $LIBDIR/librdmacm.so.1 "* ]] || { echo "r* bound elsewhere: $line"; return 1; }
	done <<< "$(grep -hE "normal symbol \`r(socket|sendto|recvfrom|send|recv|bind|connect)'" "$1".* 2>/dev/null)"
	[ $n -gt 0 ] || { echo "no r* bindings in $1.*"; return 1; }
}

for spec in "${MODES[@]}"; do
	port=$((port + 1))
	mode=${spec%%:*} size=$SIZE ip=$RXE_IP hdr=8 ref=no clilib=$LIBDIR topts=()
	case $mode in *6) ip=${RXE_IP6:?}; mode=${mode%6} hdr=24 ;; esac
	[ "$mode" = ref ] && { ref=yes mode=b clilib=''; }
	case $spec in
	*:max*) d=${spec#*:max} size=$((MTU - hdr + ${d:-0})) ;; # max, max-1, max+1
	*:*) size=${spec#*:} ;;
	esac
	fits=yes
	[ "$size" -le $((MTU - hdr)) ] || fits=no
	for ((i = 0; i < ${#mode}; i++)); do topts+=(-T "${mode:i:1}"); done
	rm -f "$TMP"/*
	env LD_LIBRARY_PATH="$LIBDIR" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$TMP/srv" \
		timeout -k 2 60 udpong -b "$ip" -p $port "${topts[@]}" >"$TMP/srv.out" 2>&1 &
	srv=$!
	# Ready once its port is bound: a datagram rsocket binds a kernel UDP
	# socket of its own to its port at rbind (as rdma-core's does).
	wait_ready udp $port $srv 30
	before=$(sent_pkts)
	start=$(now_us)
	env LD_LIBRARY_PATH="$clilib" LD_DEBUG=bindings LD_DEBUG_OUTPUT="$TMP/cli" \
		timeout -k 2 60 udpong -s "$ip" -p $port "${topts[@]}" -C $COUNT -S "$size" >"$TMP/cli.out" 2>&1
	rc=$?
	ms=$((($(now_us) - start) / 1000))
	sent=$(($(sent_pkts) - before))
	# The server still runs (blocked in a receive): udpong itself, timeout's
	# child, maps our library.
	mapped=no kids=()
	read -r -a kids 2>/dev/null < "/proc/$srv/task/$srv/children"
	for pid in "${kids[@]}"; do maps "$pid" " $OURS\$" && mapped=yes; done
	stop_proc "$srv"
	why=''
	if [ $ref = yes ]; then
		# rdma-core 44 on RoCE: its first QP's address handle (no GRH) is refused.
		[ $rc -ne 0 ] && [ $rc -ne 124 ] || why="client exit $rc, expected rdma-core's rconnect failure"
		[ -z "$why" ] && ! grep -q "^rconnect: No such file or directory" "$TMP/cli.out" &&
			why="not rdma-core 44's 'rconnect: No such file or directory'"
		[ -z "$why" ] && b=$(bound_to_ours "$TMP/cli") && why="client bound to ours"
		result="rdma-core's client: rconnect ENOENT"
	elif [ $fits = yes ]; then
		[ $rc -eq 0 ] || why="client exit $rc"
		[ -z "$why" ] && ! grep -q "^custom" "$TMP/cli.out" && why="no result line"
		[ -z "$why" ] && [ $sent -lt $COUNT ] && why="only $sent packets crossed rxe"
		result="sent_pkts +$sent"
	else
		# Exited by itself (not the timeout), its first data send refused.
		[ $rc -eq 0 ] || why="client exit $rc (124: it waited)"
		[ -z "$why" ] && grep -q "^custom" "$TMP/cli.out" && why="a result line: the datagrams went nowhere"
		[ -z "$why" ] && ! grep -q "^rsend: Message too long" "$TMP/cli.out" && why="no EMSGSIZE from rsend"
		[ -z "$why" ] && [ $sent -ge $COUNT ] && why="$sent packets crossed rxe"
		result="EMSGSIZE at once, sent_pkts +$sent"
	fi
	[ -z "$why" ] && [ $mapped != yes ] && why="server does not map $OURS"
	[ -z "$why" ] && { b=$(bound_to_ours "$TMP/srv") || why="server: $b"; }
	[ -z "$why" ] && [ $ref = no ] && { b=$(bound_to_ours "$TMP/cli") || why="client: $b"; }
	if [ -z "$why" ]; then
		pass=$((pass + 1))
		echo "PASS $spec ${topts[*]} -S $size $ip: $result, client ${ms} ms, server maps $OURS"
		sed 's/^/    /' "$TMP/cli.out"
	else
		fail=$((fail + 1))
		echo "FAIL $spec ${topts[*]} -S $size $ip: $why"
		echo "  client:"; tail -5 "$TMP/cli.out" | sed 's/^/    /'
		echo "  server:"; tail -5 "$TMP/srv.out" | sed 's/^/    /'
	fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
