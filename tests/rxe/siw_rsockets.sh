#!/bin/bash
# rsockets and their tools over Soft-iWARP (siw0 in the VM: `rxe-vm --siw`), in
# rxe.siw_smoke's boot after siw_smoke.sh: rdma-core's library and ours side by
# side, and mixed both ways.
#
#   rcopy       rdma-core's rcopy, a 4 MiB file, the copy compared (4 pairings)
#   keepalive   an idle connection with SO_KEEPALIVE, TCP_KEEPIDLE 1 s
#               (siw_keepalive_peer.py): at least 3 probes arrive as RDMA
#               WRITE frames and no SEND (rdma-core's probe: a zero-byte
#               write), and the connection carries data afterwards (4 pairings)
#   preload     ordinary socket programs under librspreload.so (1 MiB files,
#               iperf3 4 MiB): nc.traditional, socat, OpenBSD nc, iperf3,
#               rstream -T s under ours (on our
#               librdmacm); nc.traditional and rstream -T s under rdma-core's
#               (on its own), and nc.traditional with one preload at each end
#   mckey       multicast: fails on both libraries with the same messages and
#               exit status (iWARP has no UD QPs, no multicast)
#
#   siw_rsockets.sh --lib PATH/librdmacm.so.1 --preload PATH/librspreload.so [--only REGEX]
#
# Bytes: client and server share the VM, so siw talks over `lo` and eth0's
# counters stay still, and siw has no hw_counters. A kprobe on
# siw_tcp_rx_data (siw's receive path, called for each batch of TCP payload a
# QP's socket has) records its length argument: the bytes siw received, summed
# per case; kprobes on siw_proc_send and siw_proc_write count the iWARP SEND and
# RDMA WRITE frames placed. A case passes only if siw received at least its data
# bytes, each process loaded the libraries it was meant to (LD_DEBUG=libs:
# "calling init: PATH"), and a server that should listen as an rsocket has an
# rdma_cm id listening on its port (programs whose sockets the preload did not
# take would talk kernel TCP over lo, which siw never sees).
#
# Environment: RXE_IP (siw0's address), RXE_DEV (siw0). Needs root (tracefs).
# Output: `PASS|FAIL <case>: ...` per case and last `N passed, M failed`.
# A failed case runs once more (a `FLAKY siw_rsockets <case>:` line, the second
# verdict counts: tests/FLAKY.md), except when a process loaded the wrong
# library, a file differs, or the bytes did not cross siw.
set -u
LIB='' PRELOAD='' ONLY=''
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--preload) PRELOAD=$2; shift ;;
	--only) ONLY=$2; shift ;;
	*) echo "usage: $0 --lib PATH/librdmacm.so.1 --preload PATH/librspreload.so [--only REGEX]" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$LIB" ] && [ -n "$PRELOAD" ] && [ -n "${RXE_IP:-}" ] ||
	{ echo "usage: RXE_IP=... $0 --lib PATH/librdmacm.so.1 --preload PATH/librspreload.so" >&2; exit 2; }
LIBDIR=$(cd "$(dirname "$LIB")" && pwd)
OURS=$(readlink -f "$LIB")
OUR_PRELOAD=$(readlink -f "$PRELOAD")
SYS_PRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
HERE=$(dirname "$(readlink -f "$0")")
PEER=$HERE/siw_keepalive_peer.py
IP=$RXE_IP
TMP=$(mktemp -d)
T=/sys/kernel/tracing
PROBES=''
cleanup() {
	for p in $PROBES; do echo 0 > "$T/events/kprobes/$p/enable"; done 2>/dev/null
	for p in $PROBES; do echo "-:$p" >> "$T/kprobe_events"; done 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
pass=0 fail=0 port=7600

grep -q RNIC "/sys/class/infiniband/${RXE_DEV:-siw0}/node_type" 2>/dev/null ||
	{ echo "FAIL setup: ${RXE_DEV:-siw0} is not an iWARP device"; exit 1; }
[ -e "$T/kprobe_events" ] || mount -t tracefs nodev "$T" || { echo "FAIL setup: no tracefs"; exit 1; }
probe() { # NAME DEFINITION
	echo "p:$1 $2" >> "$T/kprobe_events" || { echo "FAIL setup: kprobe $2"; exit 1; }
	PROBES="$PROBES $1"
	echo 1 > "$T/events/kprobes/$1/enable" || { echo "FAIL setup: enabling kprobe $1"; exit 1; }
}
probe siw_rs_rx 'siw_tcp_rx_data len=$arg4:u64'
probe siw_rs_send siw_proc_send
probe siw_rs_write siw_proc_write
probe siw_rs_term siw_proc_terminate
# Room for every receive batch of a case (iperf3's 16 MiB: a few thousand).
echo 8192 > "$T/buffer_size_kb"
hits() { awk -v p="$1" '$1 == p { print $2 }' "$T/kprobe_profile"; }
# rx_bytes: siw's receive bytes since the last rx_reset (the trace's len= fields).
rx_reset() { echo > "$T/trace"; }
rx_bytes() {
	awk '/ siw_rs_rx: / { for (i = NF; i > 0; i--) if ($i ~ /^len=/) { s += substr($i, 5); break } }
		END { printf "%d\n", s }' "$T/trace"
}

loaded() { # ROLE PATH...: process ROLE initialised each PATH (LD_DEBUG=libs)
	local role=$1 want got
	shift
	for want in "$@"; do
		got=$(sed -n 's/.*calling init: \(.*\)$/\1/p' "$TMP/$role".ld.* 2>/dev/null | while read -r f; do
			readlink -f "$f"; done | grep -Fx "$(readlink -f "$want")")
		[ -n "$got" ] || { echo "$role did not load $want"; return 1; }
	done
}
# not_loaded ROLE PATH: process ROLE did not initialise PATH.
not_loaded() {
	if sed -n 's/.*calling init: \(.*\)$/\1/p' "$TMP/$1".ld.* 2>/dev/null | while read -r f; do
		readlink -f "$f"; done | grep -qFx "$(readlink -f "$2")"; then echo "$1 loaded $2"; return 1; fi
}

# A side: ours (rdma-core's tools on our librdmacm), sys (rdma-core's),
# pl-ours (our preload on our librdmacm), pl-sys (rdma-core's preload on its own).
side_env() {
	case $1 in
	ours) echo "LD_LIBRARY_PATH=$LIBDIR" ;;
	sys) ;;
	pl-ours) echo "LD_PRELOAD=$OUR_PRELOAD LD_LIBRARY_PATH=$LIBDIR" ;;
	pl-sys) echo "LD_PRELOAD=$SYS_PRELOAD" ;;
	esac
}
side_ok() { # ROLE SIDE
	case $2 in
	ours) loaded "$1" "$OURS" ;;
	sys) not_loaded "$1" "$OURS" && loaded "$1" /usr/lib/x86_64-linux-gnu/librdmacm.so.1 ;;
	pl-ours) loaded "$1" "$OUR_PRELOAD" "$OURS" ;;
	pl-sys) loaded "$1" "$SYS_PRELOAD" /usr/lib/x86_64-linux-gnu/librdmacm.so.1 && not_loaded "$1" "$OURS" ;;
	esac
}

cm_listening() { rdma res show cm_id 2>/dev/null | grep 'state LISTEN' | grep -q ":$1 "; }

# start_server SIDE READY CMD...: the server in the background (SRV), until it
# listens: READY rdma (an rdma_cm id on PORT; on iWARP the kernel's iw_cm
# listens on a TCP socket of its own beside it, so `ss` tells nothing) or
# line:REGEX (its stdout has such a line); else WHY says why. Its stdin: the fifo $TMP/go.
start_server() {
	local side=$1 ready=$2 end
	shift 2
	rm -f "$TMP/go"
	mkfifo "$TMP/go"
	# shellcheck disable=SC2046
	timeout -k 2 90 env $(side_env "$side") LD_DEBUG=libs LD_DEBUG_OUTPUT="$TMP/server.ld" "$@" \
		<"$TMP/go" >"$TMP/server.out" 2>"$TMP/server.err" &
	SRV=$!
	exec 7>"$TMP/go"
	end=$((SECONDS + 30))
	while :; do
		case $ready in
		rdma) cm_listening "$PORT" && break ;;
		line:*) grep -qE "${ready#line:}" "$TMP/server.out" && break ;;
		esac
		kill -0 "$SRV" 2>/dev/null || { why "the server ended before it was ready"; return 1; }
		[ $SECONDS -lt $end ] || { why "the server not ready after 30 s"; return 1; }
		sleep 0.1
	done
}
stop_server() { exec 7>&-; [ -n "$SRV" ] || return 0; kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null; }
# end_server: the server's own exit status, within 20 s of its client's end.
end_server() {
	local end=$((SECONDS + 20))
	exec 7>&-
	while kill -0 "$SRV" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.1; done
	kill -0 "$SRV" 2>/dev/null && { kill "$SRV"; wait "$SRV" 2>/dev/null; SRV_RC=hung; return; }
	wait "$SRV"
	SRV_RC=$?
}

# run_client SIDE CMD... (status in CLI_RC; stdin from $CLI_IN, default /dev/null).
run_client() {
	local side=$1
	shift
	# shellcheck disable=SC2046
	timeout -k 2 60 env $(side_env "$side") LD_DEBUG=libs LD_DEBUG_OUTPUT="$TMP/client.ld" "$@" \
		<"${CLI_IN:-/dev/null}" >"$TMP/client.out" 2>"$TMP/client.err"
	CLI_RC=$?
}

logs() {
	local r
	for r in server client; do
		sed "s/^/  [$r] /" "$TMP/$r.err" 2>/dev/null | tail -n 8
		if LC_ALL=C grep -qaP '\x00' "$TMP/$r.out" 2>/dev/null; then echo "  [$r] (binary output)"
		else sed "s/^/  [$r] /" "$TMP/$r.out" 2>/dev/null | tail -n 8; fi
	done
}

# case NAME FUNCTION ARGS...: runs FUNCTION (which sets WHY, NEVER, NOTE) once
# more if it failed in a way that does not prove a library wrong.
case_() {
	local name=$1
	shift
	[ -z "$ONLY" ] || [[ $name =~ $ONLY ]] || return 0
	attempt "$@"
	if [ -n "$WHY" ] && [ "$NEVER" = 0 ]; then
		echo "FLAKY siw_rsockets $name: $WHY"
		logs
		attempt "$@"
	fi
	if [ -z "$WHY" ]; then
		pass=$((pass + 1))
		echo "PASS $name: $NOTE"
	else
		fail=$((fail + 1))
		echo "FAIL $name: $WHY${NOTE:+ ($NOTE)}"
		logs
	fi
}
attempt() {
	port=$((port + 1)) PORT=$port WHY='' NEVER=0 NOTE='' SRV=''
	rm -rf "${TMP:?}"/*
	local s0 w0 t0=$SECONDS
	s0=$(hits siw_rs_send) w0=$(hits siw_rs_write)
	rx_reset
	"$@"
	[ -n "$SRV" ] && stop_server
	SENDS=$(( $(hits siw_rs_send) - s0 )) WRITES=$(( $(hits siw_rs_write) - w0 )) RXB=$(rx_bytes)
	NOTE="siw received $RXB bytes ($WRITES writes, $SENDS sends), $((SECONDS - t0)) s${NOTE:+; $NOTE}"
}
why() { [ -n "$WHY" ] || { WHY=$1; NEVER=${2:-0}; }; }
# crossed MIN: siw received at least MIN bytes (a failure that is never rerun).
crossed() { [ -n "$WHY" ] || [ "$RXB_NOW" -ge "$1" ] || why "siw received $RXB_NOW bytes, fewer than the $1 moved: the bytes did not cross siw" 1; }
sides_ok() { # SRV_SIDE CLI_SIDE
	local w
	[ -n "$WHY" ] && return
	w=$(side_ok server "$1") || { why "$w" 1; return; }
	w=$(side_ok client "$2") || why "$w" 1
}
same_file() { cmp -s "$1" "$2" || why "$(basename "$2") differs from the source ($(stat -c %s "$2" 2>/dev/null || echo no) bytes of $(stat -c %s "$1"))" 1; }

# --- rcopy: a 4 MiB file --------------------------------------------------------------------
head -c $((4 << 20)) /dev/urandom > "$TMP.src"
trap 'cleanup; rm -f "$TMP.src" "$TMP.src1"' EXIT
rcopy_case() { # SRV CLI
	start_server "$1" rdma rcopy -p "$PORT" || return
	run_client "$2" rcopy "$TMP.src" "$IP:$TMP/copy" -p "$PORT"
	[ "$CLI_RC" = 0 ] || why "client exit $CLI_RC"
	grep -q '^4194304 bytes in ' "$TMP/client.out" || why "client printed no result line"
	[ -n "$WHY" ] || same_file "$TMP.src" "$TMP/copy"
	RXB_NOW=$(rx_bytes)
	crossed $((4 << 20))
	sides_ok "$1" "$2"
}

# --- keep-alive: probes on an idle connection ----------------------------------------------
keepalive_case() { # SRV CLI
	local end n=0 s0 wr0
	start_server "$1" rdma python3 "$PEER" server "$IP" "$PORT" || return
	# shellcheck disable=SC2046
	timeout -k 2 60 env $(side_env "$2") LD_DEBUG=libs LD_DEBUG_OUTPUT="$TMP/client.ld" \
		python3 "$PEER" client "$IP" "$PORT" 1 >"$TMP/client.out" 2>"$TMP/client.err" &
	local cli=$!
	end=$((SECONDS + 20))
	until grep -q '^keepalive 1$' "$TMP/client.out"; do
		kill -0 $cli 2>/dev/null && [ $SECONDS -lt $end ] || { why "the client did not set its keep-alive"; break; }
		sleep 0.1
	done
	# Nothing else moves now: each WRITE frame siw places is a probe (the
	# client's; the server's rsocket sends nothing). At least 3, within 10 s,
	# and no SEND: a probe is a zero-byte RDMA write on both libraries, which
	# takes none of the peer's receives.
	s0=$(hits siw_rs_send) wr0=$(hits siw_rs_write)
	end=$((SECONDS + 10))
	while [ -z "$WHY" ]; do
		n=$(( $(hits siw_rs_write) - wr0 ))
		[ "$n" -ge 3 ] && break
		[ $SECONDS -lt $end ] || { why "$n keep-alive probes crossed siw in 10 s (TCP_KEEPIDLE 1 s)" 1; break; }
		sleep 0.1
	done
	n=$(( $(hits siw_rs_send) - s0 ))
	NOTE="probes: $(( $(hits siw_rs_write) - wr0 )) writes, $n sends"
	[ "$n" = 0 ] || why "$n SENDs crossed siw while the connection was idle: a probe that takes a receive of the peer's" 1
	echo go >&7
	wait $cli
	CLI_RC=$?
	end_server
	[ "$CLI_RC" = 0 ] || why "client exit $CLI_RC"
	[ "$SRV_RC" = 0 ] || why "server exit $SRV_RC"
	grep -q '^bye$' "$TMP/client.out" || why "the client did not receive the server's bytes after the probes"
	sides_ok "$1" "$2"
}

# --- the preload: ordinary programs --------------------------------------------------------
# A 1 MiB file (the first MiB of rcopy's): enough to take many writes and
# credit updates, cheap under TCG.
head -c $((1 << 20)) "$TMP.src" > "$TMP.src1"
# The end of a 1 MiB copy case: both exits, the copy, its bytes over siw.
copy_ends() { # SRV CLI COPY
	[ "$CLI_RC" = 0 ] || why "client exit $CLI_RC"
	end_server
	[ "$SRV_RC" = 0 ] || why "server exit $SRV_RC"
	SRV=''
	[ -n "$WHY" ] || same_file "$TMP.src1" "$3"
	RXB_NOW=$(rx_bytes)
	crossed $((1 << 20))
	sides_ok "$1" "$2"
}
# nc.traditional: the server's stdout is the copy.
nc_case() { # SRV CLI
	start_server "$1" rdma nc.traditional -l -s "$IP" -p "$PORT" || return
	CLI_IN=$TMP.src1 run_client "$2" nc.traditional -q 1 "$IP" "$PORT"
	copy_ends "$1" "$2" "$TMP/server.out"
}
nc_openbsd_case() {
	start_server "$1" rdma nc.openbsd -l "$IP" "$PORT" || return
	CLI_IN=$TMP.src1 run_client "$2" nc.openbsd -N "$IP" "$PORT"
	copy_ends "$1" "$2" "$TMP/server.out"
}
socat_case() { # socat -u server, socat -u client
	start_server "$1" rdma socat -u "TCP-LISTEN:$PORT,bind=$IP,reuseaddr" "CREATE:$TMP/copy" || return
	run_client "$2" socat -u "OPEN:$TMP.src1" "TCP:$IP:$PORT"
	copy_ends "$1" "$2" "$TMP/copy"
}
iperf3_case() {
	start_server "$1" rdma iperf3 -s -1 -B "$IP" -p "$PORT" || return
	run_client "$2" iperf3 -c "$IP" -p "$PORT" -n 4M
	[ "$CLI_RC" = 0 ] || why "client exit $CLI_RC"
	end_server
	[ "$SRV_RC" = 0 ] || why "server exit $SRV_RC"
	SRV=''
	# A non-blocking sender may go up to a block (128 KiB) over -n.
	grep -qE '^\[ *[0-9]+\] .* 4\.[01][0-9]* MBytes .* sender$' "$TMP/client.out" || why "client reported no 4 MBytes sent"
	grep -qE '^\[ *[0-9]+\] .* receiver$' "$TMP/client.out" || why "client printed no receiver line"
	grep -q '^iperf Done' "$TMP/client.out" || why "client did not print iperf Done"
	RXB_NOW=$(rx_bytes)
	crossed $((4 << 20))
	sides_ok "$1" "$2"
}
rstream_s_case() { # rstream -T s (plain sockets calls) under the preload, 64 KiB x 50 each way
	start_server "$1" rdma rstream -T s -b "$IP" -p "$PORT" -S 65536 -C 50 || return
	run_client "$2" rstream -T s -s "$IP" -p "$PORT" -S 65536 -C 50
	[ "$CLI_RC" = 0 ] || why "client exit $CLI_RC"
	end_server
	[ "$SRV_RC" = 0 ] || why "server exit $SRV_RC"
	SRV=''
	grep -q '^custom ' "$TMP/client.out" || why "client printed no result line"
	RXB_NOW=$(rx_bytes)
	crossed $((65536 * 50 * 2))
	sides_ok "$1" "$2"
}

# --- mckey: no multicast on iWARP -----------------------------------------------------------
declare -A mc_err mc_rc
mckey_case() { # LIB ROLE-ARGS...
	local lib=$1 key
	shift
	key="$lib${*:+ $*}"
	run_client "$lib" mckey -m 239.77.1.1 -b "$IP" "$@"
	mc_rc[$key]=$CLI_RC
	mc_err[$key]=$(cat "$TMP/client.out" "$TMP/client.err" | grep '^mckey: ' | grep -v 'starting\|joining' | tr '\n' '|')
	NOTE="exit $CLI_RC, ${mc_err[$key]}"
	[ "$CLI_RC" != 0 ] || why "mckey succeeded: multicast over iWARP?" 1
	case ${mc_err[$key]} in
	'mckey: unable to create QP: Operation not supported|'*) ;;
	*) why "its first error is not EOPNOTSUPP from rdma_create_qp" 1 ;;
	esac
	[ -n "$WHY" ] || { key=$(side_ok client "$lib") || why "$key" 1; }
	RXB_NOW=0
}

PAIRS=("sys sys" "ours ours" "ours sys" "sys ours")
for p in "${PAIRS[@]}"; do
	set -- $p
	case_ "rcopy server $1, client $2" rcopy_case "$1" "$2"
done
for p in "${PAIRS[@]}"; do
	set -- $p
	case_ "keepalive server $1, client $2" keepalive_case "$1" "$2"
done
for c in nc nc_openbsd socat iperf3 rstream_s; do
	case_ "preload ${c//_/-} ours" "${c}_case" pl-ours pl-ours
done
for c in nc rstream_s; do
	case_ "preload ${c//_/-} rdma-core's" "${c}_case" pl-sys pl-sys
done
case_ "preload nc server ours, client rdma-core's" nc_case pl-ours pl-sys
case_ "preload nc server rdma-core's, client ours" nc_case pl-sys pl-ours
for lib in sys ours; do
	case_ "mckey on $lib fails as it should" mckey_case "$lib"
done
if [ -n "${mc_err[sys]+x}" ] && [ -n "${mc_err[ours]+x}" ] &&
	[ "${mc_err[sys]}|${mc_rc[sys]}" != "${mc_err[ours]}|${mc_rc[ours]}" ]; then
	fail=$((fail + 1))
	echo "FAIL mckey: rdma-core's '${mc_err[sys]}' exit ${mc_rc[sys]}, ours '${mc_err[ours]}' exit ${mc_rc[ours]}"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
