#!/bin/bash
# shellcheck disable=SC2015 # "A && B || C": C is meant whenever A or B fails
# A peer host that dies, over two VMs (`rxe-vm run2`): the client VM
# (host_death_client.sh) powers itself off while, on the server VM (this
# script), connections are at three stages, for rdma-core's library and ours
# side by side, and for the bundled rping and rdma-core's rping:
#
#   rxe-vm run2 --server 'host_death_server.sh ARGS' --client 'host_death_client.sh ARGS'
#   ARGS: --bin DIR (peer_death) --tools DIR (our rping) --lib PATH (our librdmacm.so.1)
#
# Server VM, at once:
#   peer_death server 7310 (ours), 7311 (rdma-core's): connections A
#     (mid-handshake), B (idle), C (mid-transfer); it checks its own events and
#     completions (see peer_death.cpp) and exits 0 only if all are right; the
#     client's notice comes to its TCP port 8310 (8311) just before the
#     power-off;
#   our rping -s on 7301 (client pinging: mid-transfer), 7302 (client stopped
#     with SIGSTOP: idle), 7305 (client sent a request, then nothing:
#     mid-handshake); rdma-core's rping -s on 7304, 7303, 7306 likewise;
#   peer_death unreachable 169.254.77.99 (ours and rdma-core's): a static
#     neighbour entry for an address nobody owns; the connect must end in
#     UNREACHABLE.
# Once both peer_death clients have their connections, the client powers its
# VM off. The server times each process from the death as the peer_death
# servers date it (their C transfer's last completion), and asserts: our rpings exit non-zero with a message
# within RDMACM_TOOLS_TIMEOUT (20 s) plus slack; both peer_death servers and
# both unreachable runs exit 0. rdma-core's rpings are measured: the idle one
# must still be waiting when everything else is done (then it is killed).
# Output: "TABLE <case> <who> exit=<status> t=<s> <last message>" lines.
set -u
BIN='' TOOLS='' LIB='' OPTS='bin tools lib'
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
LOG=/tmp/host_death
mkdir -p "$LOG"
TOOLS_TIMEOUT=20 # our rping's default bound on a silent peer

# death_of LOG: DEATH := the epoch seconds of LOG's "DIE <label> at <t> ..." line.
death_of() {
	local l
	DEATH=0
	while IFS= read -r l; do
		if [[ $l =~ ^DIE\ [a-z]+\ at\ ([0-9.]+) ]]; then DEATH=${BASH_REMATCH[1]}; fi
	done < "$1"
}

# report NAME WHO EXPECT: a TABLE line for NAME; EXPECT is "fail-within S"
# (must exit non-zero within S s of the death, with a message), "ok" (exit 0)
# or "measure".
report() {
	local name=$1 who=$2 expect=$3 rc=running t msg
	if [ -f "$LOG/$name.rc" ]; then
		rc=$(< "$LOG/$name.rc")
		t=$(elapsed "$(< "$LOG/$name.end")" "$T_DEATH")
	else
		t=$(awk -v a="$EPOCHREALTIME" -v b="$T_DEATH" 'BEGIN { printf ">%.0f", a - b }')
	fi
	msg=$(grep -v '^$' "$LOG/$name.log" 2>/dev/null | tail -n 1)
	echo "TABLE $name $who exit=$rc t=$t ${msg:-<no message>}"
	case $expect in
	fail-within*)
		local bound=${expect#fail-within }
		[ "$rc" != running ] && [ "$rc" != 0 ] || fail "$name: exit $rc, expected a failure"
		[ "$rc" = running ] || awk -v t="$t" -v b="$bound" 'BEGIN { exit !(t <= b) }' || fail "$name: took $t s (bound $bound)"
		grep -q 'rping: ' "$LOG/$name.log" || fail "$name: no message"
		;;
	ok) [ "$rc" = 0 ] || { fail "$name: exit $rc"; cat "$LOG/$name.log"; } ;;
	esac
}

# listening N: at least N rdma_cm ids listen, as the kernel sees them (in $n).
listening() { n=$(rdma res show cm_id 2>/dev/null | grep -c 'state LISTEN'); ((n >= $1)); }
# ended NAME...: every NAME started has ended.
ended() { for n; do [ -f "$LOG/$n.rc" ] || return 1; done; }

ip neigh replace 169.254.77.99 lladdr 02:00:00:00:00:99 dev "${RXE_NETDEV:-eth0}" nud permanent
start pd_ours ours timeout 500 "$BIN/peer_death" server 7310 ours
start pd_ref ref timeout 500 "$BIN/peer_death" server 7311 ref
for c in c:7301 b:7302 a:7305; do start "rping_${c%:*}_ours" ours timeout 500 "$TOOLS/rping" -s -a "$RXE_IP" -p "${c#*:}"; done
for c in b:7303 c:7304 a:7306; do start "rping_${c%:*}_ref" timeout 500 stdbuf -oL /usr/bin/rping -s -a "$RXE_IP" -p "${c#*:}"; done
POLL=0.3 wait_until 300 listening 8 || : # 8 listeners
echo "LISTENING-ALL ($n listeners)"
if ! wait_line "$LOG/pd_ours.log" '^DIE' 200 || ! wait_line "$LOG/pd_ref.log" '^DIE' 60; then
	echo "FAIL: the peer_death servers did not get their connections"
	tail -n 20 "$LOG"/*.log
	exit 1
fi
start unreach_ours ours timeout 500 "$BIN/peer_death" unreachable 169.254.77.99
start unreach_ref ref timeout 500 "$BIN/peer_death" unreachable 169.254.77.99
# The death: when C's transfer stopped (the earlier of the two), as the
# peer_death servers saw it.
death_of "$LOG/pd_ours.log"
a=$DEATH
death_of "$LOG/pd_ref.log"
b=$DEATH
T_DEATH=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", (a < b ? a : b) }')
echo "server: the client's host died at $T_DEATH (ours saw it at $a, rdma-core's at $b)"
# Ours and the library checks must end by themselves; rdma-core's rping
# servers are only measured, until then.
POLL=0.5 wait_until 300 ended pd_ours pd_ref rping_c_ours rping_b_ours rping_a_ours unreach_ours unreach_ref || :
nap 2
for n in pd_ours pd_ref unreach_ours unreach_ref; do
	echo "--- $n"
	grep -E '^(RESULT|[A-C]:)' "$LOG/$n.log"
done
echo "--- times from the death (C's transfer stopped), s"
for c in a b c; do report "rping_${c}_ours" ours "fail-within $((TOOLS_TIMEOUT + 15))"; done
for c in a b c; do report "rping_${c}_ref" rdma-core measure; done
for c in pd unreach; do report "${c}_ours" ours ok; report "${c}_ref" rdma-core ok; done
if [ -f "$LOG/rping_b_ref.rc" ]; then
	fail "rdma-core's rping server on an idle connection exited: measure again (README)"
else
	echo "rdma-core's rping server on the idle connection still waits; stopping it"
fi
pkill -x rping 2>/dev/null
finish host_death
