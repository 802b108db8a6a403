#!/bin/bash
# Interoperability harness: rdma-core's own, unchanged binaries (rdmacm-utils'
# rping, ucmatose, cmtime; perftest's ib_send_bw -R; qperf -cm1) run through
# OUR librdmacm, on a real RDMA device (rxe0 in the Soft-RoCE VM).
#
#   run.sh [--lib PATH] [--reference] [--modes M1,M2,...] [--only REGEX]
#          [--strace] [--keep] [--logdir DIR] [--scale PERCENT] [--deadline SECONDS]
#          [--save DIR] [--verbose] [--list]
#
#   --lib PATH     our librdmacm.so.1 (default: <repo>/build/src/librdmacm.so.1)
#   --reference    self-check: "ours" := the system's rdma-core librdmacm, so every
#                  case must pass; a failure there is the harness's fault
#   --modes        any of preload,libpath,mixed-srv-ours,mixed-cli-ours (default: all)
#                    preload         server and client with LD_PRELOAD=<ours>
#                    libpath         server and client with LD_LIBRARY_PATH=<dir of ours>
#                    mixed-srv-ours  server LD_PRELOAD=<ours>, client on the system library
#                    mixed-cli-ours  server on the system library, client LD_PRELOAD=<ours>
#   --only REGEX   run the cases whose "tool args" matches REGEX (grep -E)
#   --strace       run our side under strace -f (openat, write, ioctl, poll...);
#                  failing cases print the strace tail (ucma commands are write()s)
#   --keep         keep the log directory (default: removed when all pass)
#   --logdir DIR   write the logs there (default: a new directory under $TMPDIR or /tmp).
#                  Keep it on a fast file system: LD_DEBUG output to the VM's 9p
#                  share makes every case ~10 times slower; use --save instead
#   --save DIR     at the end, copy the logs of the failed cases to DIR (e.g. an
#                  `rxe-vm --rw` directory; its NN-tool-mode directories from an
#                  earlier run are removed first)
#   --scale P      multiply every time limit by P percent (default 100)
#   --deadline S   start no case after S seconds; the cases left are reported as
#                  FAIL (not run), so a run that hangs everywhere still ends with
#                  its table inside an outer time limit (ctest passes one)
#   --verbose      also print the binding evidence of each passing case
#
# Environment: RXE_IP (required: the RDMA device's IPv4 address), RXE_DEV (rxe0).
# Output: one line per case `PASS|FAIL <tool> <mode> <args> (<seconds>s)`, for a
# failure the reason and the tails of the server's and client's logs, and last
# `N passed, M failed` alone on a line. Exit status 0 only if all passed.
#
# Each process runs under `timeout -k 2 N`; servers are waited for until the
# kernel shows their rdma_cm id (or TCP socket, qperf) listening, with a bound,
# and always stopped. Every process runs with LD_DEBUG=bindings: a case passes
# only if the server's and the client's rdma_* imports (rdma_listen /
# rdma_connect among them) were bound to the library the mode says, ours or
# the system's, and to no other.

set -u
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

REPO=$(cd "$HERE/../../.." && pwd)
OURS=$REPO/build/src/librdmacm.so.1
SYSLIB=${RDMACM_SYSTEM_LIB:-/usr/lib/x86_64-linux-gnu/librdmacm.so.1}
MODES=preload,libpath,mixed-srv-ours,mixed-cli-ours
ONLY='' STRACE=0 KEEP=0 LOGROOT='' SCALE=100 VERBOSE=0 LIST=0 REFERENCE=0 DEADLINE=0 SAVE=''

usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--lib) OURS=$2; shift ;;
	--reference) REFERENCE=1 ;;
	--modes) MODES=$2; shift ;;
	--only) ONLY=$2; shift ;;
	--strace) STRACE=1 ;;
	--keep) KEEP=1 ;;
	--logdir) LOGROOT=$2; shift ;;
	--save) SAVE=$2; shift ;;
	--scale) SCALE=$2; shift ;;
	--deadline) DEADLINE=$2; shift ;;
	--verbose) VERBOSE=1 ;;
	--list) LIST=1 ;;
	-h | --help) usage ;;
	*) echo "run.sh: unknown argument $1" >&2; usage ;;
	esac
	shift
done
[ "$REFERENCE" = 1 ] && OURS=$SYSLIB

# --- the cases ---------------------------------------------------------------------
# "tool|arguments shown and given to both sides". Counts are modest: the VM
# emulates its CPUs (TCG), and all of this has to fit in one boot.
CASES=(
	"rping|-v -C 10 -S 64"
	"rping|-v -V -C 100 -S 4096"
	"rping|-v -V -C 3 -S 65535"
	"ucmatose|-c 1 -C 10"
	"ucmatose|-c 10 -C 100"
	"ucmatose|-c 4 -C 20 -S 8192"
	"cmtime|-c 200"
	"ib_send_bw|-R -F -n 100"
	"ib_send_bw|-R -F -n 200 -s 4096"
	# One test per qperf client: see README.md (qperf's own race on a second test).
	"qperf|-cm1 -t 2 rc_lat"
	"qperf|-cm1 -t 2 rc_bw"
)

# define_case TOOL "ARGS" PORT: sets SRV and CLI (argument vectors), READY (cm or
# tcp), PERSIST (1: the server never exits by itself and is stopped after the
# client), CT (the client's time limit, s), CHECK (a function run after both).
define_case() {
	local tool=$1 port=$3
	local -a a
	read -r -a a <<< "$2"
	PERSIST=0 READY=cm CT=45 CHECK=check_none
	case $tool in
	rping)
		SRV=(rping -s -a "$RXE_IP" -p "$port" "${a[@]}")
		CLI=(rping -c -a "$RXE_IP" -p "$port" "${a[@]}")
		CHECK=check_rping ;;
	ucmatose)
		# The server preallocates its -c connections, so both sides get the same arguments.
		SRV=(ucmatose -p "$port" "${a[@]}")
		CLI=(ucmatose -s "$RXE_IP" -p "$port" "${a[@]}")
		CHECK=check_ucmatose ;;
	cmtime)
		# The server serves until stopped.
		SRV=(cmtime -p "$port" "${a[@]}")
		CLI=(cmtime -s "$RXE_IP" -p "$port" "${a[@]}")
		PERSIST=1 CT=90 CHECK=check_cmtime ;;
	ib_send_bw)
		# -F: under emulated CPUs perftest's cycle-counter calibration often fails
		# ("Correlation coefficient r^2: 0.77 < 0.9"); without -F the side that
		# notices exits 1 ("Can't produce a report") and its peer spins forever
		# waiting for the final handshake (measured: ~10% of runs with rdma-core).
		SRV=(ib_send_bw -d "$RXE_DEV" -p "$port" "${a[@]}")
		CLI=(ib_send_bw -d "$RXE_DEV" -p "$port" "${a[@]}" "$RXE_IP")
		CHECK=check_perftest ;;
	qperf)
		# qperf's control connection is TCP (port -lp); -cm1 sets up the RDMA
		# connection of each test with rdma_cm. The server serves until stopped.
		# Each test's server (a forked child) binds port 0, sends the port to the
		# client and only then calls rdma_listen: a client whose library is
		# already initialised (a second test in the same client) can connect
		# first and gets REJECTED (status 8, no listener). Seen with rdma-core's
		# library too, so each case runs one test per client.
		SRV=(qperf -lp "$port")
		CLI=(qperf "$RXE_IP" -lp "$port" "${a[@]}")
		READY=tcp PERSIST=1 CT=60 CHECK=check_qperf ;;
	*) echo "unknown tool $tool" >&2; return 1 ;;
	esac
}

# --- per-tool checks (beyond exit statuses); print the problem, return 1 -------------

arg_after() { # arg_after FLAG ARGS...: the value following FLAG
	local f=$1; shift
	while [ $# -gt 1 ]; do [ "$1" = "$f" ] && { echo "$2"; return; }; shift; done
}
check_none() { :; }
check_rping() {
	local c n
	c=$(arg_after -C "$@")
	if grep -qi 'mismatch' "$DIR"/server.out "$DIR"/server.err "$DIR"/client.out "$DIR"/client.err; then
		echo "data mismatch reported"; return 1
	fi
	case " $* " in *" -v "*) ;; *) return 0 ;; esac
	# -v prints every ping's data: rdma-ping-0 .. rdma-ping-(C-1) on both sides.
	n=$(grep -c '^ping data: rdma-ping-' "$DIR/client.out")
	[ "$n" = "$c" ] || { echo "client printed $n of $c pings"; return 1; }
	n=$(grep -c '^server ping data: rdma-ping-' "$DIR/server.out")
	[ "$n" = "$c" ] || { echo "server printed $n of $c pings"; return 1; }
	[ "$(grep -o '^ping data: rdma-ping-[0-9]*' "$DIR/client.out" | tail -n 1)" = "ping data: rdma-ping-$((c - 1))" ] ||
		{ echo "client's last ping is not rdma-ping-$((c - 1))"; return 1; }
}
check_ucmatose() {
	grep -qx 'return status 0' "$DIR/server.out" || { echo "server did not print 'return status 0'"; return 1; }
	grep -qx 'return status 0' "$DIR/client.out" || { echo "client did not print 'return status 0'"; return 1; }
	grep -qx 'data transfers complete' "$DIR/client.out" || { echo "client: no 'data transfers complete'"; return 1; }
}
check_cmtime() {
	local step
	grep -Eq '^step +total ms +max ms +min us +us / conn' "$DIR/client.out" ||
		{ echo "client printed no timing table"; return 1; }
	for step in 'create id' 'resolve addr' 'resolve route' 'create qp' 'connect' 'disconnect' 'destroy'; do
		grep -Eq "^$step *: +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+\$" "$DIR/client.out" ||
			{ echo "timing table has no '$step' row"; return 1; }
	done
}
check_perftest() {
	local n re
	n=$(arg_after -n "$@")
	# " #bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]"; with a
	# failed clock calibration (-F) the rates may read inf or nan, so only the
	# size and the iteration count are checked.
	re="^[[:space:]]*[0-9]+[[:space:]]+${n:-[0-9]+}([[:space:]]+[-+0-9.a-z]+){3}"
	grep -Eq "$re" "$DIR/client.out" || { echo "client printed no result line"; return 1; }
	grep -Eq "$re" "$DIR/server.out" || { echo "server printed no result line"; return 1; }
}
check_qperf() {
	local t
	for t in "$@"; do
		case $t in
		rc_lat) grep -A3 '^rc_lat:' "$DIR/client.out" | grep -Eq 'latency *= *[0-9.]+ [mun]?s' ||
			{ echo "no rc_lat latency result"; return 1; } ;;
		rc_bw) grep -A3 '^rc_bw:' "$DIR/client.out" | grep -Eq 'bw *= *[0-9.]+ [KMG]?B/sec' ||
			{ echo "no rc_bw bandwidth result"; return 1; } ;;
		esac
	done
}

# --- one case in one mode ------------------------------------------------------------

PASSED=0 FAILED=0 RUN=0 BOUND=0
FAILURES=() FAILED_DIRS=()

# run_case TOOL "ARGS" MODE
run_case() {
	local tool=$1 args=$2 mode=$3 srv_side cli_side port t0 spid rc=0 why='' ev='' st wr d0
	case $mode in
	preload) srv_side=preload cli_side=preload ;;
	libpath) srv_side=libpath cli_side=libpath ;;
	mixed-srv-ours) srv_side=preload cli_side=sys ;;
	mixed-cli-ours) srv_side=sys cli_side=preload ;;
	*) echo "unknown mode $mode" >&2; exit 2 ;;
	esac
	RUN=$((RUN + 1))
	PH=''
	port=$((20000 + RUN))
	DIR=$(printf '%s/%02d-%s-%s' "$LOGROOT" "$RUN" "$tool" "$mode")
	mkdir -p "$DIR"
	t0=$(now_us)
	d0=$(dmesg 2>/dev/null | wc -l)

	define_case "$tool" "$args" "$port" || exit 2
	echo "${SRV[*]}" > "$DIR/server.cmd"
	echo "${CLI[*]}" > "$DIR/client.cmd"
	if ! command -v "$tool" >/dev/null; then
		why="$tool is not installed (apt-get install rdmacm-utils perftest qperf)"
	else
		local ct ready
		ct=$(tmo "$CT") ready=$(tmo 20)
		build_cmd server "$srv_side" $((ct + ready + 30)) "${SRV[@]}"
		"${CMD[@]}" > "$DIR/server.out" 2> "$DIR/server.err" < /dev/null &
		spid=$!
		wait_ready "$READY" "$port" "$spid" "$ready"
		wr=$?
		PH="listening $(secs_since "$t0")s"
		if [ "$wr" = 1 ]; then
			wait "$spid"; st=$?
			why="server exited ($st) before listening on port $port"
		elif [ "$wr" = 2 ]; then
			why="server not listening on port $port after ${ready}s"
		else
			build_cmd client "$cli_side" "$ct" "${CLI[@]}"
			local tc
			tc=$(now_us)
			"${CMD[@]}" > "$DIR/client.out" 2> "$DIR/client.err" < /dev/null
			rc=$?
			PH+=", client $(secs_since "$tc")s"
			if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
				why="client timed out after ${ct}s (status $rc)"
			elif [ "$rc" != 0 ]; then
				why="client exit status $rc"
			fi
			if [ "$PERSIST" = 1 ]; then
				if wait_exit "$spid" 0; then
					why="${why:+$why; }server exited by itself with status $WAIT_RC (it should serve until stopped)"
				fi
			# A server that serves one client exits soon after it; after a failed
			# client only a short grace (for its error messages) before it is stopped.
			elif wait_exit "$spid" "$(if [ -z "$why" ]; then tmo 15; else echo 2; fi)"; then
				if [ "$WAIT_RC" != 0 ] && [ -z "$why" ]; then
					if [ "$WAIT_RC" = 124 ] || [ "$WAIT_RC" = 137 ]; then why="server timed out"; else why="server exit status $WAIT_RC"; fi
				fi
			else
				[ -n "$why" ] || why="server did not exit within $(tmo 15)s after the client (stopped)"
			fi
		fi
		PH+=", server done $(secs_since "$t0")s"
		stop_proc "$spid"
		if [ -z "$why" ]; then
			local -a ta
			read -r -a ta <<< "$args"
			why=$("$CHECK" "${ta[@]}") || { [ -n "$why" ] || why="check $CHECK failed"; }
		fi
		# The binding evidence is checked for every case, also failing ones
		# (a wrong binding is the first thing to know about a failure).
		local b1='' b2='' bok=1
		b1=$(check_binding server "$srv_side" rdma_listen) || bok=0
		if [ -e "$DIR/client.out" ]; then
			b2=$(check_binding client "$cli_side" rdma_connect) || bok=0
		fi
		ev="$b1${b2:+; $b2}"
		if [ "$bok" = 1 ]; then
			BOUND=$((BOUND + 1 + (${#b2} > 0)))
		else
			ev="WRONG BINDING: $ev"
			[ -n "$why" ] || why="wrong library: $b1${b2:+; $b2}"
		fi
	fi

	local secs
	secs=$(secs_since "$t0")
	if [ -z "$why" ]; then
		PASSED=$((PASSED + 1))
		echo "PASS $tool $mode $args (${secs}s)"
		[ "$VERBOSE" = 1 ] && echo "    bound: $ev" && echo "    times: $PH"
	else
		FAILED=$((FAILED + 1))
		FAILURES+=("$tool $mode $args: $why")
		FAILED_DIRS+=("$DIR")
		echo "FAIL $tool $mode $args (${secs}s)"
		echo "    reason: $why"
		[ -n "$ev" ] && echo "    bound: $ev"
		echo "    times: ${PH:-}"
		echo "    server: [$srv_side] $(cat "$DIR/server.cmd")"
		echo "    client: [$cli_side] $(cat "$DIR/client.cmd")"
		tail_file "$DIR/server.out" 12 "server stdout"
		tail_file "$DIR/server.err" 12 "server stderr"
		tail_file "$DIR/client.out" 12 "client stdout"
		tail_file "$DIR/client.err" 12 "client stderr"
		tail_file "$DIR/server.strace" 25 "server strace"
		tail_file "$DIR/client.strace" 25 "client strace"
		dmesg 2>/dev/null | tail -n +$((d0 + 1)) | grep -v "speed is unknown" | tail -n 8 > "$DIR/dmesg"
		[ -s "$DIR/dmesg" ] && tail_file "$DIR/dmesg" 8 "new kernel messages"
	fi
}

# --- main ----------------------------------------------------------------------------

IFS=, read -r -a mode_list <<< "$MODES"
selected=()
for c in "${CASES[@]}"; do
	if [ -z "$ONLY" ] || grep -Eq -- "$ONLY" <<< "${c%%|*} ${c#*|}"; then selected+=("$c"); fi
done
if [ "$LIST" = 1 ]; then
	for c in "${selected[@]}"; do for m in "${mode_list[@]}"; do echo "${c%%|*} $m ${c#*|}"; done; done
	exit 0
fi

: "${RXE_IP:?RXE_IP must be the IPv4 address of the RDMA device (run inside tests/vm/rxe-vm)}"
RXE_DEV=${RXE_DEV:-rxe0}
[ -f "$OURS" ] || { echo "run.sh: no library at $OURS (build first, or --lib)" >&2; exit 2; }
[ -f "$SYSLIB" ] || { echo "run.sh: no system librdmacm at $SYSLIB" >&2; exit 2; }
OURS=$(cd "$(dirname "$OURS")" && pwd)/$(basename "$OURS")
OURDIR=$(dirname "$OURS")
WANT_OURS=$(readlink -f "$OURS")
WANT_SYS=$(readlink -f "$SYSLIB")
if [ "$(basename "$OURS")" != librdmacm.so.1 ] && [[ $MODES == *libpath* ]]; then
	echo "run.sh: libpath mode needs the library under its soname librdmacm.so.1 (got $OURS)" >&2
	exit 2
fi
if [ -z "$LOGROOT" ]; then
	LOGROOT=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-interop.XXXXXX")
else
	mkdir -p "$LOGROOT"
fi

cleanup() {
	# Any server still around (interrupted run): stop it.
	local p
	for p in $(jobs -p); do stop_proc "$p"; done
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT TERM

ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo '?'; }
echo "interop: ours = $(readlink -f "$OURS")$([ "$REFERENCE" = 1 ] && echo ' (--reference: rdma-core itself)')"
echo "interop: system = $(readlink -f "$SYSLIB")"
echo "interop: rdmacm-utils $(ver rdmacm-utils), perftest $(ver perftest), qperf $(ver qperf); device $RXE_DEV at $RXE_IP"
echo "interop: ${#selected[@]} cases x ${#mode_list[@]} modes (${MODES}); logs in $LOGROOT"
T_ALL=$(now_us)
for c in "${selected[@]}"; do
	for m in "${mode_list[@]}"; do
		if [ "$DEADLINE" != 0 ] && (($(now_us) - T_ALL > DEADLINE * 1000000)); then
			FAILED=$((FAILED + 1))
			FAILURES+=("${c%%|*} $m ${c#*|}: not run, deadline of ${DEADLINE}s reached")
			echo "FAIL ${c%%|*} $m ${c#*|} (0.0s)"
			echo "    reason: not run: the harness's deadline (${DEADLINE}s) was reached"
			continue
		fi
		run_case "${c%%|*}" "${c#*|}" "$m"
	done
done
echo "interop: $BOUND processes verified bound to the expected librdmacm; $(secs_since "$T_ALL")s in all"
if [ "$FAILED" != 0 ]; then
	echo "interop: failed:"
	printf '  %s\n' "${FAILURES[@]}"
fi
if [ -n "$SAVE" ] && mkdir -p "$SAVE"; then
	rm -rf "$SAVE"/[0-9][0-9]-*/
	for f in "${FAILED_DIRS[@]}"; do cp -r "$f" "$SAVE/"; done
	[ "${#FAILED_DIRS[@]}" = 0 ] || echo "interop: logs of the failed cases copied to $SAVE"
fi
if [ "$FAILED" = 0 ] && [ "$KEEP" = 0 ]; then rm -rf "$LOGROOT"; fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
