#!/bin/bash
# Datagram rsockets against a hostile peer (rxe0 in the Soft-RoCE VM): while
# dgram_flood.py floods a udpong server's UDP port with garbage, malformed
# headers, plain datagrams (no rsocket tag: delivered to udpong as kernel
# UDP would, bounded as a receive buffer), claims from thousands of new
# sources, from made-up addresses whose resolution can only time out, and
# from the client's own address naming other QPNs, rdma-core's udpong pair
# on our library keeps working: each client run completes in time, its
# bytes cross rxe0, and afterwards the server's destination table is within
# its bound (the library's test hook RDMACM_TEST_DGRAM_STATS), it has
# evicted, and its RSS grew by less than 16 MiB.
#
#   rsocket_dgram_flood.sh --lib PATH/librdmacm.so.1 [--secs N]
#
# Environment: RXE_IP (the device's IPv4 address), RXE_DEV (default rxe0).
# Output: `PASS|FAIL <check> ...` lines, last `N passed, M failed`.
set -u
LIB='' SECS=40
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--secs) SECS=$2; shift ;;
	*) echo "unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$LIB" ] && [ -n "${RXE_IP:-}" ] || { echo "usage: RXE_IP=... $0 --lib PATH" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
LIBDIR=$(cd "$(dirname "$LIB")" && pwd)
COUNTER=/sys/class/infiniband/${RXE_DEV:-rxe0}/ports/1/hw_counters/sent_pkts
COUNT=200 SIZE=1000 port=7400
TMP=$(mktemp -d)
srv='' flood=''
trap 'kill $srv $flood 2>/dev/null; rm -rf "$TMP"' EXIT
pass=0 fail=0
# shellcheck source=procs.sh
. "$HERE/procs.sh"
check() { # $1: name, $2: why it failed (empty: passed)
	if [ -z "$2" ]; then pass=$((pass + 1)); echo "PASS $1"
	else fail=$((fail + 1)); echo "FAIL $1: $2"; fi
}

env LD_LIBRARY_PATH="$LIBDIR" RDMACM_TEST_DGRAM_STATS="$TMP/stats" \
	timeout -k 2 $((SECS + 240)) udpong -b "$RXE_IP" -p $port -T b >"$TMP/srv.out" 2>&1 &
srv=$!
wait_ready udp $port $srv 30
spid=$(pgrep -P "$srv" | head -1)
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$spid/status" 2>/dev/null || echo 0; }

# One client run: completes within 60 s, its bytes crossed rxe0.
client() { # $1: name
	local before after rc t0 why=''
	before=$(cat "$COUNTER"); t0=$SECONDS
	env LD_LIBRARY_PATH="$LIBDIR" timeout -k 2 60 udpong -s "$RXE_IP" -p $port -T b \
		-C $COUNT -S $SIZE >"$TMP/cli.out" 2>&1
	rc=$?
	after=$(cat "$COUNTER")
	[ $rc -eq 0 ] || why="client exit $rc"
	[ -z "$why" ] && ! grep -q "^custom" "$TMP/cli.out" && why="no result line"
	[ -z "$why" ] && [ $((after - before)) -lt $COUNT ] && why="only $((after - before)) packets crossed rxe"
	check "$1 ($((SECONDS - t0)) s, sent_pkts +$((after - before)))" "$why"
	[ -z "$why" ] || tail -5 "$TMP/cli.out" | sed 's/^/    /'
}

client "pair before the flood"
rss0=$(rss)
python3 "$HERE/dgram_flood.py" --dst "$RXE_IP" --port $port --secs "$SECS" \
	--spoof-net "${RXE_IP%.*}" >"$TMP/flood.out" 2>&1 &
flood=$!
sleep 3
n=0
while kill -0 "$flood" 2>/dev/null; do
	n=$((n + 1))
	client "pair during the flood, run $n"
	[ $n -lt 10 ] || break
done
wait "$flood"; flood=''
cat "$TMP/flood.out"
client "pair after the flood"
sleep 1.5  # the hook writes at most once a second
rss1=$(rss)
stats=$(cat "$TMP/stats" 2>/dev/null)
echo "server table: ${stats:-no figures}; RSS ${rss0} -> ${rss1} KiB"
read -r _ peers _ max _ evictions _ resolving <<<"$stats"
why=''
kill -0 "$spid" 2>/dev/null || why="the server is gone: $(tail -3 "$TMP/srv.out")"
[ -z "$why" ] && [ -z "$stats" ] && why="no figures from the test hook"
[ -z "$why" ] && [ "$peers" -gt "$max" ] && why="$peers destinations, past $max"
[ -z "$why" ] && [ "$evictions" -eq 0 ] && why="nothing evicted (did the flood reach it?)"
[ -z "$why" ] && [ "$resolving" -gt 8 ] && why="$resolving resolutions at once"
check "destination table bounded" "$why"
check "server RSS bounded" "$([ $((rss1 - rss0)) -lt 16384 ] || echo "grew $((rss1 - rss0)) KiB")"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
