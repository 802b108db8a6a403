#!/bin/bash
# Zero-copy stream sends (zcopy_min, rsocket(7)) on the device, with rdma-core's
# rsockets as the peer: rdma-core's rstream with -T bv (blocking, every byte
# verified by the receiver) and an odd size, so each send's bytes differ from
# the last and a send that returned before the device had read the caller's
# buffer shows up as a verification failure on the other side.
#
#   rsocket_zcopy.sh --lib PATH/librdmacm.so.1 --copies PATH/libsend_copies.so
#
# Cases (each: both exit 0, rstream's result rows, rxe0's packets rose by at
# least the bytes sent / 4 KiB):
#   cli-zcopy   our client sends with RSOCKET_ZCOPY_MIN=65536 to rdma-core's
#               server, under libsend_copies.so: at most 1 byte copied in 100 sent
#   cli-copy    the same without RSOCKET_ZCOPY_MIN: at least 99 in 100 copied
#               (the counter sees the send buffer's copy, so the case above can fail)
#   srv-zcopy   rdma-core's client against our server with RSOCKET_ZCOPY_MIN
#               (the server's echoes of the latency phase go zero-copy)
#   both-zcopy  ours on both ends, both with RSOCKET_ZCOPY_MIN
#
# Environment: RXE_IP (the device's IPv4 address), RXE_DEV (default rxe0).
# Output: PASS|FAIL per case, last `N passed, M failed`; exit 0 only if all passed.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/rxe/procs.sh
. "$HERE/procs.sh"
LIB='' COPIES=''
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--copies) COPIES=$2; shift ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
if [ -z "$LIB" ] || [ -z "$COPIES" ] || [ -z "${RXE_IP:-}" ]; then
	echo "usage: RXE_IP=... $0 --lib PATH --copies PATH" >&2
	exit 2
fi
LIB=$(readlink -f "$LIB") COPIES=$(readlink -f "$COPIES")
SIZE=1000003 COUNT=20 ZMIN=65536
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0 fail=0 port=7350

# run_case NAME SERVER_ENV CLIENT_ENV CHECK: an rstream pair, each side's
# environment a space-separated K=V list ("" = rdma-core's own library).
run_case() {
	local name=$1 senv=$2 cenv=$3 check=$4 srv cli why='' before sent
	port=$((port + 1))
	rm -f "$TMP"/*
	# shellcheck disable=SC2086 # word splitting of the K=V lists is meant
	env $senv timeout -k 2 120 rstream -b "$RXE_IP" -p $port -T b -T v -S $SIZE -C $COUNT >"$TMP/srv.out" 2>&1 &
	srv=$!
	wait_ready cm $port $srv 30 || why="server not listening"
	before=$(sent_pkts)
	if [ -z "$why" ]; then
		# shellcheck disable=SC2086
		env $cenv SEND_COPIES_OUT="$TMP/copies" timeout -k 2 120 \
			rstream -s "$RXE_IP" -p $port -T b -T v -S $SIZE -C $COUNT >"$TMP/cli.out" 2>&1
		cli=$?
		wait_exit $srv 30 || why="server still running"
		[ -z "$why" ] && [ $cli -ne 0 ] && why="client exit $cli"
		[ -z "$why" ] && [ "$WAIT_RC" -ne 0 ] && why="server exit $WAIT_RC"
	fi
	stop_proc $srv
	sent=$(($(sent_pkts) - before))
	# Latency (2 x COUNT) and bandwidth (COUNT) transfers of SIZE bytes, 4 KiB a packet at most.
	[ -z "$why" ] && [ $sent -lt $((3 * COUNT * SIZE / 4096)) ] && why="rxe0 sent $sent packets, fewer than the bytes need"
	[ -z "$why" ] && ! grep -Eq "$RSTREAM_RESULT_RE" "$TMP/cli.out" && why="no result row"
	[ -z "$why" ] && why=$($check)
	if [ -z "$why" ]; then
		pass=$((pass + 1)); echo "PASS $name (rxe0: $sent packets$(copies_note))"
	else
		fail=$((fail + 1)); echo "FAIL $name: $why"
		sed 's/^/  server: /' "$TMP/srv.out"; sed 's/^/  client: /' "$TMP/cli.out"
	fi
}

# libsend_copies.so's "COPIED SENT" for the client, as hundredths copied.
copied_pct() {
	awk '{ c += $1; s += $2 } END { if (s > 0) printf "%d", c * 100 / s; else print "none" }' "$TMP/copies" 2>/dev/null
}
copies_note() { [ -s "$TMP/copies" ] && echo ", copied $(copied_pct)% of the bytes sent"; }
none() { :; }
few_copies() {
	local p; p=$(copied_pct)
	[ "$p" != none ] && [ "${p:-100}" -le 1 ] || echo "the client copied ${p:-?}% of what it sent (want <= 1%)"
}
all_copied() {
	local p; p=$(copied_pct)
	[ "$p" != none ] && [ "${p:-0}" -ge 99 ] || echo "the client copied ${p:-?}% of what it sent (want >= 99%)"
}

ours="LD_PRELOAD=$LIB"
run_case cli-zcopy "" "LD_PRELOAD=$COPIES:$LIB RSOCKET_ZCOPY_MIN=$ZMIN" few_copies
run_case cli-copy "" "LD_PRELOAD=$COPIES:$LIB" all_copied
run_case srv-zcopy "$ours RSOCKET_ZCOPY_MIN=$ZMIN" "" none
run_case both-zcopy "$ours RSOCKET_ZCOPY_MIN=$ZMIN" "$ours RSOCKET_ZCOPY_MIN=$ZMIN" none
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
