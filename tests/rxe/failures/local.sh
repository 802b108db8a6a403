#!/bin/bash
# shellcheck disable=SC2015 # "A && B || C": C is meant whenever A or B fails
# One VM's failure cases, on our library and on rdma-core's (LD_PRELOAD), in
# one boot (tests/rxe/failures/local_failures.cpp does the RDMA side):
#
#   local.sh --bin DIR --lib PATH [--libs ours,ref]   (ours: ours, ref: rdma-core's)
#
# For each library:
#   unreachable  rdma_resolve_addr to an address on eth0's subnet that nobody
#                answers ARP for: ADDR_ERROR (-ETIMEDOUT) within 10 s; to an
#                address with no route: the call fails (ENETUNREACH) or ADDR_ERROR
#   restart      a server process killed (SIGKILL) under a connection: the
#                client gets DISCONNECTED within 5 s (the kernel sends the
#                DREQ when it closes the dead process's ids), is refused
#                (REJECTED) while nothing listens, and connects again with a
#                new id once the server is started again
#   addr-change  ids bound, listening and connected on a second address of
#                eth0 while that address is deleted and added again, then
#                eth0's MAC changed and restored: no event at all (Linux 6.1
#                raises ADDR_CHANGE only for a bonding fail-over), on both
#                libraries alike; what a send then gives is printed
#   removal      `rdma link delete rxe0` under ids bound, listening and
#                connected with QPs: DEVICE_REMOVAL on all four; the program
#                destroys everything and stays alive 20 s. Ours: the delete
#                must complete within 5 s of the destroys, while the process
#                lives. rdma-core's: measured (it keeps the device open, so
#                the delete waits for the process to exit). rxe0 is added
#                back before the next library.
# Output: the programs' lines, "TABLE ..." summaries, "=== local: N failed".
set -u
BIN='' LIB='' LIBS=ours,ref OPTS='bin lib libs'
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
NETDEV=${RXE_NETDEV:-eth0}
LOG=/tmp/local_failures
mkdir -p "$LOG"
run() { "$WHO" timeout 120 "$BIN/local_failures" "$@"; } # the program on library $WHO
# shellcheck disable=SC2086 # the dotted quad split into four numbers
gid_of() { printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${1//./ }; }
has_gid() { # has_gid GID: rxe0 has it
	local f line
	for f in /sys/class/infiniband/rxe0/ports/1/gids/*; do
		read -r line 2>/dev/null < "$f" && [ "$line" = "$1" ] && return 0
	done
	return 1
}
wait_gid() { wait_until 10 has_gid "$(gid_of "$1")"; } # wait_gid IP: rxe0 has IP's GID within 10 s

resolve() { # resolve CASE IP EXPECTED(ERE) FAILURE
	local out
	out=$(run resolve "$2")
	echo "$out"
	grep -qE "resolve_addr $2: $3" <<< "$out" || fail "$4"
	echo "TABLE unreachable-$1 $WHO $(grep -o 'resolve_addr.*' <<< "$out")"
}
unreachable() {
	resolve arp 169.254.77.99 'RDMA_CM_EVENT_ADDR_ERROR\(-110\) within=10s' "no ARP answer: expected ADDR_ERROR(-110) within 10 s"
	resolve route 10.99.99.1 '(-1 errno=ENETUNREACH|RDMA_CM_EVENT_ADDR_ERROR)' "no route: expected ENETUNREACH or ADDR_ERROR"
}

show() { out=$(< "$1"); echo "$out"; } # show FILE: the caller's $out := FILE, printed
stop_serve() { kill "-$1" "$s" 2>/dev/null; pkill "-$1" -f "local_failures serve $port"; wait "$s" 2>/dev/null; }
restart() {
	local port=7420 s c t_kill out
	run serve $port > "$LOG/serve1.$WHO" 2>&1 & s=$!
	wait_line "$LOG/serve1.$WHO" LISTENING 20 || { fail "server did not listen"; kill $s; return; }
	run reconnect $port > "$LOG/reconnect.$WHO" 2>&1 & c=$!
	wait_line "$LOG/reconnect.$WHO" 'ESTABLISHED 1' 20 || fail "first connection"
	t_kill=$EPOCHREALTIME
	stop_serve KILL
	# Restarted once the client has been refused while nothing listened.
	wait_line "$LOG/reconnect.$WHO" '^REFUSED 1$' 60 || fail "restart: the client was not refused within 60 s of the kill"
	run serve $port > "$LOG/serve2.$WHO" 2>&1 & s=$!
	wait $c
	stop_serve TERM
	show "$LOG/reconnect.$WHO"
	grep -q 'server killed: RDMA_CM_EVENT_DISCONNECTED(0)' <<< "$out" || fail "restart: no DISCONNECTED"
	local t_dis noticed
	t_dis=$(sed -n 's/^DISCONNECTED_EPOCH //p' <<< "$out")
	noticed=$(elapsed "${t_dis:-0}" "$t_kill")
	echo "restart ($WHO): DISCONNECTED $noticed s after the kill"
	awk -v n="$noticed" 'BEGIN { exit !(n >= 0 && n <= 5) }' || fail "restart: DISCONNECTED not within 5 s of the kill"
	grep -q 'ESTABLISHED again' <<< "$out" || fail "restart: no reconnection"
	grep -q 'after 0 refusal' <<< "$out" && fail "restart: not refused while the server was down"
	echo "TABLE restart $WHO $(grep -o 'server killed.*' <<< "$out") after ${noticed}s; $(grep -o 'ESTABLISHED again.*' <<< "$out")"
}

addr_change() {
	local ip=169.254.77.50 w out mac
	mac=$(< "/sys/class/net/$NETDEV/address")
	ip addr add "$ip/24" dev "$NETDEV" || { fail "ip addr add"; return; }
	wait_gid $ip || fail "no GID for $ip"
	rm -f "$LOG/watch.stop.$WHO"
	run watch $ip 7430 110 "$LOG/watch.stop.$WHO" > "$LOG/watch.$WHO" 2>&1 & w=$!
	wait_line "$LOG/watch.$WHO" READY 20 || fail "watch: not ready"
	ip addr del "$ip/24" dev "$NETDEV"
	nap 3
	ip addr add "$ip/24" dev "$NETDEV"
	wait_gid $ip || fail "no GID for $ip after re-adding it"
	nap 2
	ip link set "$NETDEV" address 02:00:00:00:77:99 && echo "MAC changed to 02:00:00:00:77:99" || echo "MAC change refused"
	nap 3
	ip link set "$NETDEV" address "$mac"
	# Events come within milliseconds of a change; 3 s more for a late one,
	# then the watch is told to stop (and says whether it was still watching).
	nap 3
	touch "$LOG/watch.stop.$WHO"
	wait "$w"
	show "$LOG/watch.$WHO"
	ip addr del "$ip/24" dev "$NETDEV"
	grep -q 'watch: .*until told to stop' <<< "$out" || fail "addr-change: the watch ended before the changes were done"
	grep -q 'watch: 0 event(s)' <<< "$out" || fail "addr-change: events (Linux 6.1 gives none)"
	echo "TABLE addr-change $WHO $(grep -o 'watch:.*' <<< "$out"); $(grep -o 'send after.*' <<< "$out")"
}

removal() {
	local r d rc t_ready t_del t_destroyed t_exit out e_del e_des e_exit
	run removal 7440 > "$LOG/removal.$WHO" 2>&1 & r=$!
	wait_line "$LOG/removal.$WHO" READY 20 || { fail "removal: not ready"; kill $r; return; }
	t_ready=$EPOCHREALTIME
	( timeout 60 rdma link delete rxe0; echo "$? $EPOCHREALTIME" > "$LOG/delete.$WHO" ) & d=$!
	wait_line "$LOG/removal.$WHO" DESTROYED 60
	t_destroyed=$EPOCHREALTIME
	wait_line "$LOG/removal.$WHO" EXIT 40
	t_exit=$EPOCHREALTIME
	wait $d $r
	show "$LOG/removal.$WHO"
	read -r rc t_del < "$LOG/delete.$WHO"
	e_del=$(elapsed "$t_del" "$t_ready") e_des=$(elapsed "$t_destroyed" "$t_ready") e_exit=$(elapsed "$t_exit" "$t_ready")
	echo "removal ($WHO): rdma link delete exited $rc $e_del s after it started;" \
		"ids destroyed at $e_des s, process exit at $e_exit s"
	grep -q 'DEVICE_REMOVAL on 4 of 4' <<< "$out" || fail "removal: DEVICE_REMOVAL did not reach every id"
	if [ "$WHO" = ours ]; then
		[ "$rc" = 0 ] || fail "removal: rdma link delete exited $rc"
		awk -v d="$t_del" -v x="$t_destroyed" -v e="$t_exit" 'BEGIN { exit !(d <= x + 5 && d < e) }' ||
			fail "removal: the delete did not complete within 5 s of the destroys while the process lived"
	fi
	echo "TABLE removal $WHO link-delete=${e_del}s rc=$rc destroyed=${e_des}s exit=${e_exit}s"
	# rxe0 back for what follows.
	rdma link show rxe0/1 > /dev/null 2>&1 || timeout 30 rdma link add rxe0 type rxe netdev "$NETDEV" ||
		{ fail "rdma link add rxe0"; return; }
	wait_gid "$RXE_IP" || fail "rxe0 has no GID for $RXE_IP after re-adding it"
}

for WHO in ${LIBS//,/ }; do
	echo "=== library: $WHO"
	for step in unreachable restart addr_change removal; do echo "--- $step ($WHO)"; $step; done
done
finish local
