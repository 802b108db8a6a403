#!/bin/bash
# Ordinary socket programs over RDMA: unmodified TCP/UDP programs (nc, socat,
# iperf3, memcached, sockperf, redis, rdma-core's rstream -T s) with an rsocket
# preload (librspreload.so) under both ends, on a real device (rxe0 in the
# Soft-RoCE VM).
#
#   run.sh [--lib PATH] [--rdmacm PATH] [--only REGEX] [--except REGEX]
#          [--expect-fail REGEX [--expect-reason REGEX]] [--scale PERCENT] [--strace] [--keep]
#          [--logdir DIR] [--save DIR] [--list]
#
#   --lib PATH     the preload under test (default: rdma-core's,
#                  /usr/lib/x86_64-linux-gnu/rsocket/librspreload.so)
#   --rdmacm PATH  the librdmacm.so.1 the preload must run on: its directory
#                  goes first on LD_LIBRARY_PATH and every process must have
#                  loaded that file (default: whatever the loader finds,
#                  only reported)
#   --only REGEX, --except REGEX   select cases by name (grep -E)
#   --expect-fail REGEX  cases known to fail with this preload: their failure
#                  is XFAIL (not counted), their success XPASS (counted as a
#                  failure: the known pattern changed, update the caller)
#   --expect-reason REGEX  an expected failure counts only if its reason
#                  matches (grep -E), else it is FAIL
#   --scale P      multiply every time limit by P percent (default 100)
#   --strace       run every process under strace -f (logs kept in the case's directory)
#   --keep         keep the logs (default: removed when nothing failed)
#   --save DIR     copy the logs of failed and XFAIL cases to DIR at the end
#   --list         print the case names and exit
#
# Environment: RXE_IP (required: the RDMA device's IPv4 address), RXE_DEV (rxe0).
#
# Every process of every case runs with LD_PRELOAD=<the preload> under
# `timeout`, so no hang outlives its case. A case passes only if
#   - its programs did their job (exit statuses, result lines, files compared
#     with cmp, values read back), and a server that serves until stopped
#     (memcached, sockperf, redis) is alive and idle (under half a CPU over a
#     second) once its clients are done;
#   - every process loaded the preload (LD_DEBUG=files: "calling init: <lib>")
#     and the servers map it (/proc/PID/maps);
#   - a stream server listened as an rsocket (an rdma_cm id in `rdma res
#     show`), not as a kernel socket (`ss`), except where the preload is meant
#     to hand a kernel socket over (fork support);
#   - its bytes crossed rxe0 (hw_counters/sent_pkts rose by at least the case's
#     minimum: data bytes / 2 KiB, or one packet per message exchanged);
#   - and no kernel socket carried them: client and server share one host, so
#     kernel TCP or UDP between them would cross `lo`, whose byte counter must
#     rise by less than half the case's data bytes.
# Output: a line per case `PASS|FAIL|XFAIL|XPASS <case> (<s>) rxe +N pkts, lo
# +M bytes`, for a failure its reason and the tails of its logs; then a table
# and `N passed, M failed, K expected failures`. Exit status 0 only if no case
# failed unexpectedly (XPASS included).

set -u
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
# now_us secs_since tmo tail_file sent_pkts cm_listening tcp_listening wait_exit stop_proc
# shellcheck source=../interop/lib.sh
. "$HERE/../interop/lib.sh"

LIB=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
RDMACM='' ONLY='' EXCEPT='' XFAIL_RE='' XREASON_RE='' SCALE=100 STRACE=0 KEEP=0 LOGROOT='' SAVE='' LIST=0
usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--rdmacm) RDMACM=$2; shift ;;
	--only) ONLY=$2; shift ;;
	--except) EXCEPT=$2; shift ;;
	--expect-fail) XFAIL_RE=$2; shift ;;
	--expect-reason) XREASON_RE=$2; shift ;;
	--scale) SCALE=$2; shift ;;
	--strace) STRACE=1 ;;
	--keep) KEEP=1 ;;
	--logdir) LOGROOT=$2; shift ;;
	--save) SAVE=$2; shift ;;
	--list) LIST=1 ;;
	-h | --help) usage ;;
	*) echo "run.sh: unknown argument $1" >&2; usage ;;
	esac
	shift
done
: "${SCALE:?}" # read by tmo (lib.sh)

# --- the cases (name: the function case_<name with - as _>) -------------------------
CASES=(
	rstream-sockets rstream-blocking rstream-poll rstream-fork
	nc-traditional
	socat-server
	socat-client
	nc-openbsd
	iperf3
	memcached
	sockperf-tcp
	sockperf-udp
	redis
)

FILE_SIZE=$((4 << 20))
lo_bytes() { cat /sys/class/net/lo/statistics/tx_bytes; }

# --- running processes under the preload ----------------------------------------------

# Builds CMD: "$@" as process ROLE ($1) under `timeout -k 2 $2`, preloaded,
# LD_DEBUG=files into $DIR/ROLE.ld.<pid>, extra environment in EXTRA_ENV.
preload_cmd() {
	local role=$1 t=$2 e
	shift 2
	local -a env=("LD_PRELOAD=$LIB" "LD_DEBUG=files" "LD_DEBUG_OUTPUT=$DIR/$role.ld" "${EXTRA_ENV[@]}")
	[ -z "$RDMACM" ] || env+=("LD_LIBRARY_PATH=$(dirname "$RDMACM_REAL")")
	CMD=(timeout -k 2 "$(tmo "$t")" env -u LD_PRELOAD -u LD_LIBRARY_PATH -u LD_DEBUG -u LD_DEBUG_OUTPUT)
	if [ "$STRACE" = 1 ]; then
		CMD+=(strace -f -qq -tt -s 64 -o "$DIR/$role.strace")
		for e in "${env[@]}"; do CMD+=(-E "$e"); done
	else
		CMD+=("${env[@]}")
	fi
	CMD+=("$@")
	ROLES+=("$role")
	echo "${EXTRA_ENV[*]} $*" > "$DIR/$role.cmd"
}

# why TEXT: records the case's (first) failure.
why() { [ -n "$WHY" ] || WHY=$1; }

# status_text STATUS SECONDS: a process's exit status in words.
status_text() {
	case $1 in
	0) echo "exit 0" ;;
	124) echo "hung: stopped after its ${2}s limit" ;;
	137) echo "hung: killed after its ${2}s limit" ;;
	1[3-9][0-9]) echo "killed by SIG$(kill -l $(($1 - 128)) 2>/dev/null || echo $(($1 - 128)))" ;;
	*) echo "exit status $1" ;;
	esac
}

# The program's pid under a `timeout` pid (timeout -> env, exec'd into the program; strace: its child).
prog_pid() {
	local p=$1 c
	c=$(pgrep -P "$p" | head -n 1)
	[ "$STRACE" = 1 ] && [ -n "$c" ] && c=$(pgrep -P "$c" | head -n 1)
	echo "$c"
}

# srv ROLE READY PORT SECONDS CMD...: starts a server in the background
# (SRV_PID[ROLE]) and waits until it listens. READY: rdma (an rdma_cm id
# listening on PORT), any (that or a kernel TCP listener), udp (an rdma_cm id
# bound to PORT). A kernel listener where an rsocket is wanted fails at once.
declare -A SRV_PID
srv() {
	local role=$1 ready=$2 port=$3 t=$4 pid end p
	shift 4
	[ -z "$WHY" ] || return 1
	preload_cmd "$role" "$t" "$@"
	"${CMD[@]}" > "$DIR/$role.out" 2> "$DIR/$role.err" < /dev/null &
	pid=$!
	SRV_PID[$role]=$pid
	end=$(($(now_us) + $(tmo 20) * 1000000))
	while :; do
		case $ready in
		rdma | any) cm_listening "$port" && break ;;
		# A datagram rsocket binds a kernel UDP socket of its own to its port
		# (as rdma-core's does) and makes its rdma_cm id only when the first
		# datagram moves: ready once the port is bound; the data checks tell
		# an rsocket from a kernel socket.
		udp) ss -Hlun "sport = :$port" 2>/dev/null | grep -q . && break ;;
		esac
		if [ "$ready" = any ] && tcp_listening "$port"; then break; fi
		if [ "$ready" = rdma ] && tcp_listening "$port"; then
			why "$role listens on kernel TCP port $port, not as an rsocket (the preload did not take its socket)"; return 1
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			why "$role ended ($(status_text $? "$t")) before it listened on port $port"; return 1
		fi
		if (($(now_us) > end)); then why "$role not listening on port $port after $(tmo 20)s"; return 1; fi
		sleep 0.1
	done
	p=$(prog_pid "$pid")
	if [ -n "$p" ] && ! grep -qF "$LIB_REAL" "/proc/$p/maps" 2>/dev/null; then
		why "$role (pid $p) does not map $LIB_REAL"; return 1
	fi
	EVIDENCE+="$role maps the preload; "
}

# cli [-i IN] [-o OUT] ROLE SECONDS CMD...: runs a client in the foreground.
cli() {
	local in=/dev/null out='' role t rc
	while :; do
		case $1 in
		-i) in=$2; shift 2 ;;
		-o) out=$2; shift 2 ;;
		*) break ;;
		esac
	done
	role=$1 t=$2
	shift 2
	[ -z "$WHY" ] || return 1
	preload_cmd "$role" "$t" "$@"
	"${CMD[@]}" > "${out:-$DIR/$role.out}" 2> "$DIR/$role.err" < "$in"
	rc=$?
	[ "$rc" = 0 ] || { why "$role: $(status_text "$rc" "$(tmo "$t")")"; return 1; }
}

# srv_done ROLE SECONDS: the server ends by itself (after its client) with status 0.
srv_done() {
	local pid=${SRV_PID[$1]}
	if wait_exit "$pid" "$(tmo "$2")"; then
		[ "$WAIT_RC" = 0 ] || why "$1: $(status_text "$WAIT_RC" "?")"
	else
		why "$1 did not end within $(tmo "$2")s after its client"
	fi
	unset "SRV_PID[$1]"
}

# srv_alive ROLE: a server that serves until stopped is still there.
srv_alive() {
	kill -0 "${SRV_PID[$1]}" 2>/dev/null && return 0
	wait "${SRV_PID[$1]}"
	why "$1 died ($(status_text $? "?"))"
	unset "SRV_PID[$1]"
	return 1
}

# srv_idle ROLE: a server with no client left does not spin: it used less
# than half a CPU over a second (a readiness call that never blocks, e.g. an
# epoll that sees only a placeholder socket, keeps it busy).
srv_idle() {
	local p t0 t1
	[ -z "$WHY" ] || return 1
	p=$(prog_pid "${SRV_PID[$1]}")
	[ -n "$p" ] || return 0
	t0=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null) || return 0
	sleep 1
	t1=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null) || return 0
	[ $((t1 - t0)) -lt $(($(getconf CLK_TCK) / 2)) ] ||
		why "$1 spins with no client: $((t1 - t0)) clock ticks of CPU in 1s (a readiness call that never blocks?)"
}

same_file() { # same_file A B: B is a copy of A
	cmp -s "$1" "$2" || why "$(basename "$2") differs from the source ($(stat -c %s "$2" 2>/dev/null || echo no) bytes of $(stat -c %s "$1"))"
}
has() { # has ROLE ERE: ROLE's stdout or stderr has a line matching ERE
	grep -Eq -- "$2" "$DIR/$1.out" "$DIR/$1.err" 2>/dev/null || why "$1 printed no line matching '$2'"
}

# --- the cases: set BYTES (data bytes the case moves) and MIN_PKTS ---------------------
# Ports: PORT (unique per case), PORT+1 for a second listener.

# shellcheck disable=SC2086 # $1, $2: words for rstream
rstream_case() { # SERVER-ARGS CLIENT-ARGS [READY]; -S 65536 -C 50: 3.2 MiB each way
	BYTES=$((65536 * 50 * 2))
	srv server "${3:-rdma}" "$PORT" 60 rstream -b "$RXE_IP" -p "$PORT" $1 -S 65536 -C 50
	cli client 30 rstream -s "$RXE_IP" -p "$PORT" $2 -S 65536 -C 50
	srv_done server 10
	has client "$RSTREAM_RESULT_RE"
	has server "$RSTREAM_RESULT_RE"
}
case_rstream_sockets() { rstream_case "-T s" "-T s"; }
case_rstream_blocking() { rstream_case "-T s -T b" "-T s -T b"; }
case_rstream_poll() { rstream_case "-T s -T a" "-T s -T a"; }
case_rstream_fork() {
	# The server forks after accept (rdma-core's fork support: a kernel TCP
	# socket until the child's first call, then the RDMA connection).
	EXTRA_ENV=(RDMAV_FORK_SAFE=1)
	rstream_case "-T f" "-T s" any
}

case_nc_traditional() {
	BYTES=$FILE_SIZE
	srv server rdma "$PORT" 60 nc.traditional -l -s "$RXE_IP" -p "$PORT"
	# srv wrote its stdout to server.out: that is the copy.
	cli -i "$SRC" client 30 nc.traditional -q 1 "$RXE_IP" "$PORT"
	srv_done server 10
	same_file "$SRC" "$DIR/server.out"
}

case_socat_server() {
	BYTES=$FILE_SIZE
	srv server rdma "$PORT" 60 socat -u "TCP-LISTEN:$PORT,bind=$RXE_IP,reuseaddr" "CREATE:$DIR/copy"
	cli -i "$SRC" client 30 nc.traditional -q 1 "$RXE_IP" "$PORT"
	srv_done server 10
	same_file "$SRC" "$DIR/copy"
}

case_socat_client() {
	BYTES=$FILE_SIZE
	srv server rdma "$PORT" 60 nc.traditional -l -s "$RXE_IP" -p "$PORT"
	cli client 30 socat -u "OPEN:$SRC" "TCP:$RXE_IP:$PORT"
	srv_done server 10
	same_file "$SRC" "$DIR/server.out"
}

case_nc_openbsd() {
	BYTES=$FILE_SIZE
	srv server rdma "$PORT" 60 nc.openbsd -l "$RXE_IP" "$PORT"
	cli -i "$SRC" client 30 nc.openbsd -N "$RXE_IP" "$PORT"
	srv_done server 10
	same_file "$SRC" "$DIR/server.out"
}

case_iperf3() {
	# 16 MiB, then the server (-1: one client) ends; both report the bytes.
	# iperf3's data socket is non-blocking: a send that takes part of a
	# block counts those bytes and the next send is a whole block, so the total
	# may run up to one block (128 KiB) over -n: "16.1 MBytes" is a pass.
	BYTES=$((16 << 20))
	srv server rdma "$PORT" 60 iperf3 -s -1 -B "$RXE_IP" -p "$PORT"
	cli client 30 iperf3 -c "$RXE_IP" -p "$PORT" -n 16M
	srv_done server 10
	has client '^\[ *[0-9]+\] .* 16\.[01] MBytes .* sender$'
	has client '^\[ *[0-9]+\] .* receiver$'
	has client '^iperf Done'
}

case_memcached() {
	# memcslap's load, then a 500 KB value stored with memccp and read back
	# with memccat.
	local s="--servers=$RXE_IP:$PORT" n=500
	BYTES=$((500 * 1000 * 2)) MIN_PKTS=$n
	head -c $((500 * 1000)) /dev/urandom > "$DIR/value"
	srv memcached rdma "$PORT" 120 memcached -u root -l "$RXE_IP" -p "$PORT" -U 0 -t 2 -m 64
	cli slap-set 30 memcslap "$s" --test=set --execute-number=$n --concurrency=2
	cli slap-get 30 memcslap "$s" --test=get --execute-number=$n --concurrency=2
	cli memccp 30 memccp "$s" "$DIR/value"
	cli memccat 30 memccat "$s" --file="$DIR/copy" value
	srv_alive memcached
	srv_idle memcached
	has slap-set '^Time to set +[0-9]+ keys by +2 threads: +[0-9.]+ seconds'
	has slap-get '^Time to get +[0-9]+ keys by +2 threads: +[0-9.]+ seconds'
	same_file "$DIR/value" "$DIR/copy"
}

# shellcheck disable=SC2086 # $1: --tcp or nothing (UDP)
sockperf_case() { # --tcp|'' READY
	local n
	srv server "$2" "$PORT" 60 sockperf sr $1 -i "$RXE_IP" -p "$PORT"
	cli client 30 sockperf pp $1 -i "$RXE_IP" -p "$PORT" -t 2 -m 64
	srv_alive server
	srv_idle server
	has client '^sockperf: Summary: Latency is [0-9.]+ usec'
	# "[Total Run] RunTime=1.001 sec; Warm up time=400 msec; SentMessages=32824; ReceivedMessages=32823"
	n=$(sed -n 's/.*\[Total Run\].*ReceivedMessages=\([0-9]*\).*/\1/p' "$DIR/client.out" 2>/dev/null | head -n 1)
	[ "${n:-0}" -gt 0 ] || why "client received no messages"
	BYTES=$((${n:-0} * 64 * 2)) MIN_PKTS=${n:-1}
}
case_sockperf_tcp() { sockperf_case --tcp rdma; }
case_sockperf_udp() { sockperf_case '' udp; }

case_redis() {
	local n=2000
	BYTES=$((n * 2 * 40)) MIN_PKTS=$((n * 2))
	srv redis rdma "$PORT" 120 redis-server --bind "$RXE_IP" --port "$PORT" --save '' \
		--appendonly no --protected-mode no --daemonize no
	cli benchmark 60 redis-benchmark -h "$RXE_IP" -p "$PORT" -c 50 -n $n -t set,get --csv
	srv_alive redis
	srv_idle redis
	# "SET","909.09","72.065",...: requests per second, latencies
	has benchmark '^"SET","[0-9.]+",'
	has benchmark '^"GET","[0-9.]+",'
}

# --- one case --------------------------------------------------------------------------

PASSED=0 FAILED=0 XFAILED=0 RUN=0 RERUN=no
SUMMARY=() FAILED_DIRS=()

# Every process of the case loaded the preload (and the librdmacm wanted).
check_loaded() {
	local role f n rl=
	for role in "${ROLES[@]}"; do
		n=0
		for f in "$DIR/$role.ld".*; do
			[ -e "$f" ] || continue
			n=$((n + 1))
			grep -qF "calling init: $LIB_REAL" "$f" ||
				{ why "$role (${f##*.}) did not load $LIB_REAL (LD_DEBUG=files)"; return; }
			rl=$(sed -n 's/.*calling init: \([^ ]*librdmacm[^ ]*\).*/\1/p' "$f" | head -n 1)
			rl=$(readlink -f "$rl")
			if [ -n "$RDMACM" ] && [ "$rl" != "$RDMACM_REAL" ]; then
				why "$role (${f##*.}) loaded librdmacm ${rl:-(none)}, not $RDMACM_REAL"
				return
			fi
		done
		[ "$n" -gt 0 ] || { why "$role left no LD_DEBUG output (did it start?)"; return; }
	done
	EVIDENCE+="all ${#ROLES[@]} processes loaded the preload"
	EVIDENCE+=" (on ${rl:-no librdmacm})"
}

run_case() {
	local name=$1 fn=case_${1//-/_} t0 p0 l0 pkts lo verdict secs r
	RUN=$((RUN + 1))
	PORT=$((21000 + RUN * 10))
	DIR=$(printf '%s/%02d-%s' "$LOGROOT" "$RUN" "$name")
	mkdir -p "$DIR"
	WHY='' EVIDENCE='' BYTES=0 MIN_PKTS='' ROLES=() EXTRA_ENV=() SRV_PID=()
	SRC=$SOURCE
	t0=$(now_us) p0=$(sent_pkts) l0=$(lo_bytes)
	"$fn"
	for r in "${!SRV_PID[@]}"; do
		# A server that ended by itself during a failed case: how it ended.
		if [ -n "$WHY" ] && ! kill -0 "${SRV_PID[$r]}" 2>/dev/null; then
			wait "${SRV_PID[$r]}"
			WHY+="; $r had ended: $(status_text $? "?")"
		fi
		stop_proc "${SRV_PID[$r]}"
	done
	pkts=$(($(sent_pkts) - p0)) lo=$(($(lo_bytes) - l0))
	secs=$(secs_since "$t0")
	MIN_PKTS=${MIN_PKTS:-$((BYTES / 2048))}
	[ "$pkts" -ge "$MIN_PKTS" ] ||
		why "only $pkts packets left $RXE_DEV (at least $MIN_PKTS expected for $BYTES bytes): the data did not cross the RDMA device"
	[ "$lo" -lt $((BYTES / 2)) ] ||
		why "$lo bytes crossed lo (the case moves $BYTES): kernel sockets carried the data"
	check_loaded
	if [ -n "$XFAIL_RE" ] && grep -Eqx -- "$XFAIL_RE" <<< "$name"; then
		if [ -z "$WHY" ]; then
			verdict=XPASS FAILED=$((FAILED + 1))
		elif [ -n "$XREASON_RE" ] && ! grep -Eq -- "$XREASON_RE" <<< "$WHY"; then
			verdict=FAIL FAILED=$((FAILED + 1)) WHY="failed, but not as expected ('$XREASON_RE'): $WHY"
		else
			verdict=XFAIL XFAILED=$((XFAILED + 1))
		fi
	elif [ -n "$WHY" ] && [ "$RERUN" = allowed ] && judge_rerun preload "$name (${secs}s)" "$WHY" "$DIR" - - -; then
		RERUN=now KEEP=1
		FAILED_DIRS+=("$DIR")
		return
	elif [ -n "$WHY" ]; then
		verdict=FAIL FAILED=$((FAILED + 1))
	else
		verdict=PASS PASSED=$((PASSED + 1))
	fi
	echo "$verdict $name (${secs}s) rxe +$pkts pkts, lo +$lo bytes"
	SUMMARY+=("$(printf '%-6s %-16s %6ss %9s %11s  %s' "$verdict" "$name" "$secs" "$pkts" "$lo" "${WHY:-ok}")")
	if [ -n "$WHY" ] || [ "$verdict" = XPASS ]; then
		FAILED_DIRS+=("$DIR")
		echo "    reason: ${WHY:-passed, but expected to fail (--expect-fail): the known pattern changed}"
		[ -z "$EVIDENCE" ] || echo "    evidence: $EVIDENCE"
		for r in "${ROLES[@]}"; do
			echo "    $r: $(cat "$DIR/$r.cmd")"
			tail_file "$DIR/$r.err" 6 "$r stderr"
			# (not a copy of the binary source file)
			! LC_ALL=C grep -qI '' "$DIR/$r.out" 2>/dev/null || tail_file "$DIR/$r.out" 6 "$r stdout"
			tail_file "$DIR/$r.strace" 15 "$r strace"
		done
	fi
}

# --- main --------------------------------------------------------------------------------

selected=()
for c in "${CASES[@]}"; do
	if [ -n "$EXCEPT" ] && grep -Eq -- "$EXCEPT" <<< "$c"; then continue; fi
	if [ -z "$ONLY" ] || grep -Eq -- "$ONLY" <<< "$c"; then selected+=("$c"); fi
done
if [ "$LIST" = 1 ]; then printf '%s\n' "${selected[@]}"; exit 0; fi

: "${RXE_IP:?RXE_IP must be the IPv4 address of the RDMA device (run inside tests/vm/rxe-vm)}"
RXE_DEV=${RXE_DEV:-rxe0}
[ -f "$LIB" ] || { echo "run.sh: no preload at $LIB" >&2; exit 2; }
LIB_REAL=$(readlink -f "$LIB")
LIB=$LIB_REAL
RDMACM_REAL=''
if [ -n "$RDMACM" ]; then
	[ -f "$RDMACM" ] || { echo "run.sh: no librdmacm at $RDMACM" >&2; exit 2; }
	RDMACM_REAL=$(readlink -f "$RDMACM")
fi
for p in rstream nc.traditional nc.openbsd socat iperf3 memcached memcslap memccp memccat sockperf redis-server redis-benchmark; do
	command -v "$p" > /dev/null || { echo "run.sh: $p is not installed (tests/rxe/preload/packages.sh installs them)" >&2; exit 2; }
done
if [ -z "$LOGROOT" ]; then LOGROOT=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-preload.XXXXXX"); else mkdir -p "$LOGROOT"; fi
SOURCE=$LOGROOT/source
head -c "$FILE_SIZE" /dev/urandom > "$SOURCE"

cleanup() {
	local p
	for p in $(jobs -p); do stop_proc "$p"; done
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT TERM

echo "preload: $LIB_REAL${RDMACM:+ on $RDMACM_REAL}"
echo "preload: ${#selected[@]} cases on $RXE_DEV at $RXE_IP${XFAIL_RE:+; expected to fail: $XFAIL_RE}; logs in $LOGROOT"
T_ALL=$(now_us)
# A case that failed in a way the rerun rule allows (lib.sh) runs once more.
for c in "${selected[@]}"; do
	RERUN=allowed
	run_case "$c"
	[ "$RERUN" != now ] || { RERUN=no; run_case "$c"; }
done
echo
printf '%-6s %-16s %7s %9s %11s  %s\n' verdict case time 'rxe pkts' 'lo bytes' 'reason'
printf '%s\n' "${SUMMARY[@]}"
echo "preload: $(secs_since "$T_ALL")s in all"
if [ -n "$SAVE" ] && mkdir -p "$SAVE"; then
	rm -rf "$SAVE"/[0-9][0-9]-*/
	for f in "${FAILED_DIRS[@]}"; do cp -r "$f" "$SAVE/"; done
	[ "${#FAILED_DIRS[@]}" = 0 ] || echo "preload: logs of the failed and XFAIL cases copied to $SAVE"
fi
if [ "$FAILED" = 0 ] && [ "$XFAILED" = 0 ] && [ "$KEEP" = 0 ]; then rm -rf "$LOGROOT"; fi
rerun_summary preload
echo "$PASSED passed, $FAILED failed, $XFAILED expected failures"
[ "$FAILED" = 0 ]
