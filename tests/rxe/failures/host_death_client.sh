#!/bin/bash
# shellcheck disable=SC2015 # "A && B || C": C is meant whenever A or B fails
# The dying host of rxe.host_death (host_death_server.sh tells the whole
# test): once the server VM says LISTENING-ALL, this VM's clients connect to
# each of its servers, stop the idle pair's rpings, and once both peer_death
# clients have their connections this VM powers itself off.
#
#   host_death_client.sh --bin DIR (peer_death) --tools DIR (our rping) --lib PATH (our librdmacm.so.1)
set -u
BIN='' TOOLS='' LIB='' OPTS='bin tools lib'
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
LOG=/tmp/host_death
mkdir -p "$LOG"

# Not before every server listens.
wait_line /run/rxe-vm-peer/output '^LISTENING-ALL' 180 || { echo "the server never said LISTENING-ALL"; exit 1; }
start rping_c_ours ours "$TOOLS/rping" -c -a "$RXE_PEER_IP" -p 7301 -C 0
start rping_b_ours ours "$TOOLS/rping" -c -a "$RXE_PEER_IP" -p 7302 -C 0
start rping_b_ref /usr/bin/rping -c -a "$RXE_PEER_IP" -p 7303 -C 0
start rping_c_ref /usr/bin/rping -c -a "$RXE_PEER_IP" -p 7304 -C 0
start hs_ours "$BIN/peer_death" handshake 7305
start hs_ref "$BIN/peer_death" handshake 7306
start pd_ours ours "$BIN/peer_death" client 7310
start pd_ref ref "$BIN/peer_death" client 7311
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
for p in 8310 8311; do
	{ : <> "/dev/tcp/$RXE_PEER_IP/$p"; } 2> /dev/null || echo "client: no notice to port $p"
done
echo o > /proc/sysrq-trigger
sleep 60
