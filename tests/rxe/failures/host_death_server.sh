#!/bin/bash
# shellcheck disable=SC2015 # "A && B || C": C is meant whenever A or B fails
# A peer host that dies, over two VMs (`rxe-vm run2`): the client VM powers
# itself off while, on the server VM, connections are at three stages, for
# rdma-core's library and ours side by side, and for the bundled rping and
# rdma-core's rping:
#
#   rxe-vm run2 --server 'host_death.sh server ARGS' --client 'host_death.sh client ARGS'
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
ROLE=${1:-}
shift || true
BIN='' TOOLS='' LIB=''
while [ $# -gt 0 ]; do
	case $1 in
	--bin) BIN=$2; shift ;;
	--tools) TOOLS=$2; shift ;;
	--lib) LIB=$2; shift ;;
	*) echo "host_death.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$BIN" ] && [ -n "$TOOLS" ] && [ -n "$LIB" ] || { echo "usage: host_death.sh server|client --bin DIR --tools DIR --lib PATH" >&2; exit 2; }
REF=${RDMACM_SYSTEM_LIB:-/usr/lib/x86_64-linux-gnu/librdmacm.so.1}
OURDIR=$(dirname "$LIB")
# nap, wait_line: the waits below poll without starting a program (a `sleep`
# costs ~0.2 s of CPU under TCG; this script's loops started 150 of them).
# shellcheck source=../procs.sh
. "$(dirname "$0")/../procs.sh"
LOG=/tmp/host_death
mkdir -p "$LOG"
TOOLS_TIMEOUT=20 # our rping's default bound on a silent peer
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

# start NAME CMD...: runs CMD in the background; its output in $LOG/NAME.log,
# then its status in NAME.rc and the time it ended in NAME.end.
declare -A PID
start() {
	local name=$1
	shift
	( "$@" > "$LOG/$name.log" 2>&1; echo $? > "$LOG/$name.rc"; echo "$EPOCHREALTIME" > "$LOG/$name.end" ) &
	PID[$name]=$!
}
ours() { env LD_LIBRARY_PATH="$OURDIR" "$@"; }
theirs() { env LD_PRELOAD="$REF" "$@"; }

client() {
	# Not before every server listens.
	wait_line /run/rxe-vm-peer/output '^LISTENING-ALL' 180 || { echo "the server never said LISTENING-ALL"; exit 1; }
	start rping_c_ours ours "$TOOLS/rping" -c -a "$RXE_PEER_IP" -p 7301 -C 0
	start rping_b_ours ours "$TOOLS/rping" -c -a "$RXE_PEER_IP" -p 7302 -C 0
	start rping_b_ref /usr/bin/rping -c -a "$RXE_PEER_IP" -p 7303 -C 0
	start rping_c_ref /usr/bin/rping -c -a "$RXE_PEER_IP" -p 7304 -C 0
	start hs_ours "$BIN/peer_death" handshake 7305
	start hs_ref "$BIN/peer_death" handshake 7306
	start pd_ours ours "$BIN/peer_death" client 7310
	start pd_ref theirs "$BIN/peer_death" client 7311
	nap 5
	# The idle pair: the rping clients stop between two pings.
	pkill -STOP -x rping -P "${PID[rping_b_ours]}" 2>/dev/null
	pkill -STOP -x rping -P "${PID[rping_b_ref]}" 2>/dev/null
	# Power off once both library checks have their three connections (the
	# last one, A, only requested: give its request a moment to arrive).
	wait_line "$LOG/pd_ours.log" 'A requested' 120 && wait_line "$LOG/pd_ref.log" 'A requested' 60 ||
		{ echo "the library checks did not connect"; tail -n 20 "$LOG"/*.log; exit 1; }
	nap 2
	echo "client: powering off (host death)"
	# Our part is done: the power-off is the test, not a failure of the client.
	echo 0 > /run/rxe-vm/rc
	sync
	# Notice to each peer_death server (a TCP connection to its port + 1000),
	# at the last moment: a stall of its transfer counts as the death only
	# after it (before, it is this VM running slowly on a loaded host).
	local p
	for p in 8310 8311; do
		{ : <> "/dev/tcp/$RXE_PEER_IP/$p"; } 2> /dev/null || echo "client: no notice to port $p"
	done
	echo o > /proc/sysrq-trigger
	sleep 60
}

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
		t=$(awk -v a="$(< "$LOG/$name.end")" -v b="$T_DEATH" 'BEGIN { printf "%.1f", a - b }')
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

server() {
	ip neigh replace 169.254.77.99 lladdr 02:00:00:00:00:99 dev "${RXE_NETDEV:-eth0}" nud permanent
	start pd_ours ours timeout 500 "$BIN/peer_death" server 7310 ours
	start pd_ref theirs timeout 500 "$BIN/peer_death" server 7311 ref
	start rping_c_ours ours timeout 500 "$TOOLS/rping" -s -a "$RXE_IP" -p 7301
	start rping_b_ours ours timeout 500 "$TOOLS/rping" -s -a "$RXE_IP" -p 7302
	start rping_a_ours ours timeout 500 "$TOOLS/rping" -s -a "$RXE_IP" -p 7305
	start rping_b_ref timeout 500 stdbuf -oL /usr/bin/rping -s -a "$RXE_IP" -p 7303
	start rping_c_ref timeout 500 stdbuf -oL /usr/bin/rping -s -a "$RXE_IP" -p 7304
	start rping_a_ref timeout 500 stdbuf -oL /usr/bin/rping -s -a "$RXE_IP" -p 7306
	local i n
	for ((i = 0; i < 400; i++)); do # 8 listeners, seen by the kernel
		n=$(rdma res show cm_id 2>/dev/null | grep -c 'state LISTEN')
		((n >= 8)) && break
		nap 0.3
	done
	echo "LISTENING-ALL ($n listeners)"
	if ! wait_line "$LOG/pd_ours.log" '^DIE' 200 || ! wait_line "$LOG/pd_ref.log" '^DIE' 60; then
		echo "FAIL: the peer_death servers did not get their connections"
		tail -n 20 "$LOG"/*.log
		exit 1
	fi
	start unreach_ours ours timeout 500 "$BIN/peer_death" unreachable 169.254.77.99
	start unreach_ref theirs timeout 500 "$BIN/peer_death" unreachable 169.254.77.99
	# The death: when C's transfer stopped (the earlier of the two), as the
	# peer_death servers saw it.
	local a b
	death_of "$LOG/pd_ours.log"
	a=$DEATH
	death_of "$LOG/pd_ref.log"
	b=$DEATH
	T_DEATH=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", (a < b ? a : b) }')
	echo "server: the client's host died at $T_DEATH (ours saw it at $a, rdma-core's at $b)"
	# Ours and the library checks must end by themselves; rdma-core's rping
	# servers are only measured, until then.
	local left end=$((SECONDS + 300))
	while ((SECONDS < end)); do
		left=0
		for n in pd_ours pd_ref rping_c_ours rping_b_ours rping_a_ours unreach_ours unreach_ref; do
			[ -f "$LOG/$n.rc" ] || left=$((left + 1))
		done
		[ "$left" = 0 ] && break
		nap 0.5
	done
	nap 2
	for n in pd_ours pd_ref unreach_ours unreach_ref; do
		echo "--- $n"
		grep -E '^(RESULT|[A-C]:)' "$LOG/$n.log"
	done
	echo "--- times from the death (C's transfer stopped), s"
	report rping_a_ours ours "fail-within $((TOOLS_TIMEOUT + 15))"
	report rping_b_ours ours "fail-within $((TOOLS_TIMEOUT + 15))"
	report rping_c_ours ours "fail-within $((TOOLS_TIMEOUT + 15))"
	report rping_a_ref rdma-core measure
	report rping_b_ref rdma-core measure
	report rping_c_ref rdma-core measure
	report pd_ours ours ok
	report pd_ref rdma-core ok
	report unreach_ours ours ok
	report unreach_ref rdma-core ok
	if [ -f "$LOG/rping_b_ref.rc" ]; then
		fail "rdma-core's rping server on an idle connection exited: measure again (README)"
	else
		echo "rdma-core's rping server on the idle connection still waits; stopping it"
	fi
	pkill -x rping 2>/dev/null
	echo "=== host_death: $failed failed"
	[ "$failed" = 0 ]
}

case $ROLE in
server) server ;;
client) client ;;
*) echo "usage: host_death.sh server|client ..." >&2; exit 2 ;;
esac
