#!/bin/bash
# Interoperability harness: rdma-core's own, unchanged binaries (rdmacm-utils'
# rping, ucmatose, udaddy, mckey, cmtime, rdma_server/rdma_client,
# rdma_xserver/rdma_xclient; perftest's ib_send_bw -R; qperf -cm1) run through
# OUR librdmacm, on a real RDMA device (rxe0 in the Soft-RoCE VM).
#
#   run.sh [--lib PATH] [--reference] [--modes M1,M2,...] [--only REGEX]
#          [--strace] [--keep] [--logdir DIR] [--scale PERCENT] [--deadline SECONDS]
#          [--save DIR] [--verbose] [--preload-first LIB] [--list]
#
#   --lib PATH     our librdmacm.so.1 (default: <repo>/build/src/librdmacm.so.1)
#   --reference    self-check: "ours" := the system's rdma-core librdmacm, so every
#                  case must pass; a failure there is the harness's fault
#   --modes        any of preload,libpath,mixed-srv-ours,mixed-cli-ours (default: all)
#                    preload         server and client with LD_PRELOAD=<ours>
#                    libpath         server and client with LD_LIBRARY_PATH=<dir of ours>
#                    mixed-srv-ours  server LD_PRELOAD=<ours>, client on the system library
#                    mixed-cli-ours  server on the system library, client LD_PRELOAD=<ours>
#   --libpath-only REGEX  run the libpath mode only for the cases whose
#                  "tool args" matches REGEX (the loader finds the library the
#                  same way for every case of a tool: one case per tool shows it)
#   --only REGEX   run the cases whose "tool args" matches REGEX (grep -E)
#   --except REGEX skip the cases whose "tool args" matches REGEX
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
#   --preload-first LIB  preload LIB before ours on our side, in every mode: the
#                  sanitizer runtime a sanitized build of ours needs loaded first
#
# Environment: RXE_IP (required: the RDMA device's IPv4 address), RXE_DEV (rxe0).
# Output: one line per case `PASS|FAIL <tool> <mode> <args> (<seconds>s)`, for a
# failure the reason and the tails of the server's and client's logs, and last
# `N passed, M failed` alone on a line. Exit status 0 only if all passed.
#
# Each process runs under `timeout -k 2 N`; servers are waited for until the
# kernel shows their rdma_cm id (or TCP socket, qperf) listening, or (mckey)
# their QP attached to the group, with a bound, and always stopped. Every
# process runs with LD_DEBUG=bindings: a case passes only if the server's and
# the client's rdma_* imports (rdma_listen / rdma_connect among them; mckey:
# rdma_join_multicast_ex) were bound to the library the mode says, ours or the
# system's, and to no other. mckey's verdicts come last (see define_case).

set -u
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

REPO=$(cd "$HERE/../../.." && pwd)
OURS=$REPO/build/src/librdmacm.so.1
SYSLIB=${RDMACM_SYSTEM_LIB:-/usr/lib/x86_64-linux-gnu/librdmacm.so.1}
MODES=preload,libpath,mixed-srv-ours,mixed-cli-ours
ONLY='' EXCEPT='' LIBPATH_ONLY='' STRACE=0 KEEP=0 LOGROOT='' SCALE=100 VERBOSE=0 LIST=0 REFERENCE=0 DEADLINE=0 SAVE='' FIRST=''

usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--lib) OURS=$2; shift ;;
	--reference) REFERENCE=1 ;;
	--modes) MODES=$2; shift ;;
	--only) ONLY=$2; shift ;;
	--except) EXCEPT=$2; shift ;;
	--libpath-only) LIBPATH_ONLY=$2; shift ;;
	--strace) STRACE=1 ;;
	--keep) KEEP=1 ;;
	--logdir) LOGROOT=$2; shift ;;
	--save) SAVE=$2; shift ;;
	--scale) SCALE=$2; shift ;;
	--deadline) DEADLINE=$2; shift ;;
	--verbose) VERBOSE=1 ;;
	--preload-first) FIRST=$2; shift ;;
	--list) LIST=1 ;;
	-h | --help) usage ;;
	*) echo "run.sh: unknown argument $1" >&2; usage ;;
	esac
	shift
done
[ "$REFERENCE" = 1 ] && OURS=$SYSLIB

# --- the cases ---------------------------------------------------------------------
# "tool|arguments shown and given to both sides" (mckey: see define_case).
# Counts are modest: the VM emulates its CPUs (TCG), and all of this has to fit
# in one boot. mckey comes first: its senders' exits are waited for at the end
# (see define_case), so they overlap the cases that follow.
CASES=(
	"mckey|-C 10"
	"mckey|-C 20 -S 1024 -o"
	"rping|-v -C 10 -S 64"
	"rping|-v -V -C 100 -S 4096"
	"rping|-v -V -C 3 -S 65535"
	"ucmatose|-c 1 -C 10"
	"ucmatose|-c 10 -C 100"
	"ucmatose|-c 4 -C 20 -S 8192"
	"udaddy|-c 1 -C 10"
	"udaddy|-c 4 -C 50 -S 1024"
	"cmtime|-c 200"
	"rdma_server|"
	"rdma_xserver|-c r"
	"ib_send_bw|-R -F -n 100"
	"ib_send_bw|-R -F -n 200 -s 4096"
	# One test per qperf client: see README.md (qperf's own race on a second test).
	"qperf|-cm1 -t 2 rc_lat"
	"qperf|-cm1 -t 2 rc_bw"
	# rsockets: rstream's
	# bandwidth/latency run (-S all: sizes from 64 B up), blocking, non-blocking,
	# poll-driven (async), data verified, small buffers, keepalive set,
	# addresses resolved through rdma_getaddrinfo; rcopy a 4 MiB file.
	"rstream|-C 100 -S 4096"
	"rstream|-S all -I 20"
	"rstream|-T b -C 200 -S 1024"
	"rstream|-T n -C 200 -S 16384"
	"rstream|-T a -C 200 -S 8192"
	"rstream|-T v -C 50 -S 65536"
	"rstream|-B 4096 -C 100 -S 10000"
	"rstream|-k 5 -C 50 -S 1024"
	"rstream|-T r -C 50 -S 4096"
	"rcopy|4M"
	# riostream: riomap'd receive buffers written with riowrite.
	"riostream|-C 100 -S 4096"
	"riostream|-T b -C 100 -S 65536"
	"riostream|-T a -C 100 -S 8192"
)

# define_case TOOL "ARGS" PORT: sets SRV and CLI (argument vectors), READY (cm,
# tcp or mcast) and WAIT_FOR (what to wait for: the port, or mcast's group),
# PERSIST (1: the server never exits by itself and is stopped after the
# client), DEFER (1: the client's exit may be waited for at the end of the
# run, once the server has exited), CT (the client's time limit, s), CHECK (a
# function run after both), SRV_SYM / CLI_SYM (an rdma_* call each side must
# have bound: the binding evidence).
define_case() {
	local tool=$1 port=$3 x
	local -a a r=() o=()
	read -r -a a <<< "$2"
	PERSIST=0 DEFER=0 READY=cm WAIT_FOR=$port CT=45 CHECK=check_none
	SRV_SYM=rdma_listen CLI_SYM=rdma_connect MIN_PKTS=0
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
	udaddy)
		# udaddy has no port option (its -p is the port space): always 7174,
		# fine for cases that run one at a time. Same -c on both sides, as ucmatose.
		SRV=(udaddy "${a[@]}")
		CLI=(udaddy -s "$RXE_IP" "${a[@]}")
		WAIT_FOR=7174 CHECK=check_udaddy ;;
	mckey)
		# A receiver ("server") and a sender (-s, "client") of a group of their
		# own: the case's port in its low 16 bits. -o (join as a send-only full
		# member) goes to the sender only: such a member's QP is not attached
		# to the group. The receiver is ready once its QP is attached: rxe then
		# puts the group's MAC address on the netdev (`ip maddr`).
		# Destroying a QP that has sent multicast datagrams takes ~50 s in the
		# kernel (rxe, with rdma-core's library too): once the receiver has
		# exited, the sender's exit and the case's verdict are deferred to the
		# end of the run.
		GROUP=239.77.$((port >> 8 & 255)).$((port & 255))
		for x in "${a[@]}"; do
			if [ "$x" = -o ]; then o+=("$x"); else r+=("$x"); fi
		done
		SRV=(mckey -m "$GROUP" -b "$RXE_IP" "${r[@]}")
		CLI=(mckey -m "$GROUP" -b "$RXE_IP" -s "${r[@]}" "${o[@]}")
		READY=mcast WAIT_FOR=$GROUP DEFER=1 CT=120 CHECK=check_mckey
		SRV_SYM=rdma_join_multicast_ex CLI_SYM=rdma_join_multicast_ex ;;
	rdma_server | rdma_xserver)
		# The synchronous endpoint API samples (rdma_getaddrinfo, rdma_create_ep,
		# rdma_get_request, rdma_post_*, rdma_get_*_comp). The servers listen on
		# the wildcard address. rdma_x*: -c r (RC); XRC is not supported by rxe.
		SRV=("$tool" -p "$port" "${a[@]}")
		CLI=("${tool/server/client}" -s "$RXE_IP" -p "$port" "${a[@]}")
		CHECK=check_endpoint ;;
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
	rstream | riostream)
		# One connection, then both sides exit. Each transfer is at least one
		# RDMA write on rxe0: fewer packets than transfers means the bytes went
		# some other way.
		SRV=("$tool" -b "$RXE_IP" -p "$port" "${a[@]}")
		CLI=("$tool" -s "$RXE_IP" -p "$port" "${a[@]}")
		CHECK=check_rstream SRV_SYM=rlisten CLI_SYM=rconnect
		MIN_PKTS=$(arg_after -C "${a[@]}")
		MIN_PKTS=${MIN_PKTS:-100} ;;
	rcopy)
		# The server serves until stopped; the client copies a file of the
		# given size, compared with cmp afterwards (4 MiB: over 1,000 packets).
		SRV=(rcopy -p "$port")
		CLI=(rcopy "$DIR/source" "$RXE_IP:$DIR/copy" -p "$port")
		PERSIST=1 CHECK=check_rcopy SRV_SYM=raccept CLI_SYM=rconnect MIN_PKTS=1000 ;;
	*) echo "unknown tool $tool" >&2; return 1 ;;
	esac
}

# --- per-tool checks (beyond exit statuses); print the problem, return 1 -------------

arg_after() { # arg_after FLAG ARGS...: the value following FLAG
	local f=$1; shift
	while [ $# -gt 1 ]; do [ "$1" = "$f" ] && { echo "$2"; return; }; shift; done
}
# has_line ROLE ERE: ROLE's stdout has a line matching ERE as a whole.
has_line() {
	grep -Eqx -- "$2" "$DIR/$1.out" || { echo "$1 did not print '$2'"; return 1; }
}
# no_line ROLE ERE: no line of ROLE's stdout or stderr contains a match of ERE.
no_line() {
	! grep -Eq -- "$2" "$DIR/$1.out" "$DIR/$1.err" || { echo "$1 printed '$(grep -Eh -m1 -- "$2" "$DIR/$1.out" "$DIR/$1.err" | head -n 1)'"; return 1; }
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
	has_line server 'return status 0' && has_line client 'return status 0' &&
		has_line client 'data transfers complete'
}
check_udaddy() {
	# The server receives every datagram, then replies; the client receives the replies.
	check_ucmatose && has_line server 'receiving data transfers' && has_line server 'sending replies' &&
		has_line server 'data transfers complete'
}
check_mckey() {
	local role g=${GROUP//./\\.}
	for role in server client; do
		has_line "$role" "mckey: joined dgid: ::ffff:$g mlid 0x[0-9a-f]+ sl [0-9]+" &&
			has_line "$role" 'data transfers complete' && has_line "$role" 'return status 0' &&
			no_line "$role" 'failed|failure|error' || return 1
	done
	# The receiver polled its CQ until it had all of the sender's datagrams.
	has_line server 'receiving data transfers' && has_line client 'initiating data transfers'
}
check_endpoint() {
	# "<name>: start" and "<name>: end 0" on both sides; "device doesn't support
	# IBV_SEND_INLINE" would mean that rdma_create_ep did not return the QP's
	# capabilities in the caller's ibv_qp_init_attr (rdma_client reads them).
	has_line server "${SRV[0]}: start" && has_line server "${SRV[0]}: end 0" &&
		has_line client "${CLI[0]}: start" && has_line client "${CLI[0]}: end 0" &&
		no_line server "doesn't support" && no_line client "doesn't support"
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
check_rstream() {
	grep -Eq "$RSTREAM_RESULT_RE" "$DIR/client.out" || { echo "client printed no result line"; return 1; }
	grep -Eq "$RSTREAM_RESULT_RE" "$DIR/server.out" || { echo "server printed no result line"; return 1; }
	no_line client 'fail|error|mismatch' && no_line server 'fail|error|mismatch'
}
check_rcopy() {
	cmp -s "$DIR/source" "$DIR/copy" || { echo "the copy differs from the source (or is missing)"; return 1; }
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

PASSED=0 FAILED=0 RUN=0 BOUND=0 SECS='' RETRY=no
FAILURES=() FAILED_DIRS=() DEFERRED=()

# The state of the case being run (globals, so that a deferred case can be
# finished later): TOOL ARGS MODE SRV_SIDE CLI_SIDE PORT DIR T0 D0 SPID WHY PH,
# and define_case's.

# case_setup TOOL "ARGS" MODE NUMBER T0 D0: (re)creates a case's state.
case_setup() {
	TOOL=$1 ARGS=$2 MODE=$3 RUN=$4 T0=$5 D0=$6
	case $MODE in
	preload) SRV_SIDE=preload CLI_SIDE=preload ;;
	libpath) SRV_SIDE=libpath CLI_SIDE=libpath ;;
	mixed-srv-ours) SRV_SIDE=preload CLI_SIDE=sys ;;
	mixed-cli-ours) SRV_SIDE=sys CLI_SIDE=preload ;;
	*) echo "unknown mode $MODE" >&2; exit 2 ;;
	esac
	PORT=$((20000 + RUN))
	DIR=$(printf '%s/%02d-%s-%s' "$LOGROOT" "$RUN" "$TOOL" "$MODE")
	define_case "$TOOL" "$ARGS" "$PORT" || exit 2
}

# client_status STATUS: records a failure of the client in WHY (and its status
# in client.rc, for known_race).
client_status() {
	local ct
	ct=$(tmo "$CT")
	echo "$1" > "$DIR/client.rc"
	if is_signal "$1" && [ "$CLI_SIDE" != sys ]; then
		WHY="${WHY:+$WHY; }client killed by signal $(($1 - 128)) on our library"
	elif [ "$1" = 124 ] || [ "$1" = 137 ]; then
		WHY="${WHY:+$WHY; }client timed out after ${ct}s (status $1)"
	elif [ "$1" != 0 ]; then
		WHY="${WHY:+$WHY; }client exit status $1"
	fi
}

# server_status: after the client (or, DEFER, in its place), records in WHY
# how the server ended. A server that serves one client exits soon after it;
# after a failed client only a short grace (for its error messages) before it
# is stopped. DEFER: the server ends first, within the client's time limit.
server_status() {
	local grace
	if [ "$PERSIST" = 1 ]; then
		if wait_exit "$SPID" 0; then
			WHY="${WHY:+$WHY; }server exited by itself with status $WAIT_RC (it should serve until stopped)"
		fi
		return
	fi
	if [ "$DEFER" = 1 ]; then grace=$(tmo "$CT"); elif [ -z "$WHY" ]; then grace=$(tmo 15); else grace=2; fi
	if wait_exit "$SPID" "$grace"; then
		echo "$WAIT_RC" > "$DIR/server.rc"
		! peer_exit_race "$TOOL" "$WAIT_RC" "$DIR/server.err" "$TOOL $MODE $ARGS (server)" || WAIT_RC=0
		if is_signal "$WAIT_RC" && [ "$SRV_SIDE" != sys ]; then
			WHY="${WHY:+$WHY; }server killed by signal $((WAIT_RC - 128)) on our library"
		elif [ "$WAIT_RC" != 0 ] && [ -z "$WHY" ]; then
			if [ "$WAIT_RC" = 124 ] || [ "$WAIT_RC" = 137 ]; then WHY="server timed out"; else WHY="server exit status $WAIT_RC"; fi
		fi
		PH+=", server done $(secs_since "$T0")s"
	else
		[ -n "$WHY" ] || WHY="server did not exit within ${grace}s after the client (stopped)"
	fi
}

# run_case TOOL "ARGS" MODE
run_case() {
	local ct ready wr st tc cpid rc
	case_setup "$1" "$2" "$3" $((RUN + 1)) "$(now_us)" "$(dmesg 2>/dev/null | wc -l)"
	WHY='' PH='' SPID=''
	mkdir -p "$DIR"
	[ "$TOOL" != rcopy ] || head -c $((4 << 20)) /dev/urandom > "$DIR/source"
	P0=$(sent_pkts)
	echo "${SRV[*]}" > "$DIR/server.cmd"
	echo "${CLI[*]}" > "$DIR/client.cmd"
	if ! command -v "${SRV[0]}" >/dev/null || ! command -v "${CLI[0]}" >/dev/null; then
		WHY="$TOOL is not installed (apt-get install rdmacm-utils perftest qperf)"
		finish_case
		return
	fi
	ct=$(tmo "$CT") ready=$(tmo 20)
	build_cmd server "$SRV_SIDE" $((ct + ready + 30)) "${SRV[@]}"
	"${CMD[@]}" > "$DIR/server.out" 2> "$DIR/server.err" < /dev/null &
	SPID=$!
	wait_ready "$READY" "$WAIT_FOR" "$SPID" "$ready"
	wr=$?
	PH="ready $(secs_since "$T0")s"
	if [ "$wr" = 1 ]; then
		wait "$SPID"; st=$?
		WHY="server exited ($st) before it was ready ($READY $WAIT_FOR)"
	elif [ "$wr" = 2 ]; then
		WHY="server not ready ($READY $WAIT_FOR) after ${ready}s"
	else
		build_cmd client "$CLI_SIDE" "$ct" "${CLI[@]}"
		tc=$(now_us)
		if [ "$DEFER" = 0 ]; then
			"${CMD[@]}" > "$DIR/client.out" 2> "$DIR/client.err" < /dev/null
			rc=$?
			! peer_exit_race "$TOOL" "$rc" "$DIR/client.err" "$TOOL $MODE $ARGS (client)" || rc=0
			client_status "$rc"
			PH+=", client $(secs_since "$tc")s"
			server_status
		else
			"${CMD[@]}" > "$DIR/client.out" 2> "$DIR/client.err" < /dev/null &
			cpid=$!
			server_status
			if [ -z "$WHY" ] && kill -0 "$cpid" 2>/dev/null; then
				# Done but for the client's exit: finished by finish_deferred.
				DEFERRED+=("$cpid|$tc|$(secs_since "$T0")|$TOOL|$MODE|$RUN|$T0|$D0|$PH|$ARGS")
				return
			fi
			if wait_exit "$cpid" "$(if [ -z "$WHY" ]; then echo "$ct"; else echo 2; fi)"; then
				client_status "$WAIT_RC"
			else
				stop_proc "$cpid"
				WHY="${WHY:+$WHY; }client stopped"
			fi
			PH+=", client $(secs_since "$tc")s"
		fi
	fi
	finish_case
}

# The deferred cases, once their clients have exited (within their time limits).
finish_deferred() {
	local d cpid tc secs runs=$RUN
	for d in "${DEFERRED[@]}"; do
		IFS='|' read -r cpid tc secs TOOL MODE RUN T0 D0 PH ARGS <<< "$d"
		RETRY=no  # its server is gone: the client's exit is judged once
		case_setup "$TOOL" "$ARGS" "$MODE" "$RUN" "$T0" "$D0"
		WHY='' SPID=''  # the server has been waited for
		# Its time limit (timeout) ends it anyway: this wait is only a bound.
		if wait_exit "$cpid" "$(tmo "$CT")"; then
			client_status "$WAIT_RC"
		else
			WHY="client still running (stopped)"
			stop_proc "$cpid"
		fi
		PH+=", client exited by $(secs_since "$tc")s (waited for at the end)"
		SECS="${secs}s + the client's exit"
		finish_case
	done
	DEFERRED=() RUN=$runs SECS=
}

# finish_case: stops the server, runs the checks and the binding evidence,
# prints the verdict and counts it. The time shown: SECS if set, else since T0.
finish_case() {
	local ev='' b1='' b2='' bok=1 secs
	local -a ta
	[ -z "$SPID" ] || stop_proc "$SPID"
	if [ -e "$DIR/server.out" ]; then
		if [ -z "$WHY" ] && [ "${MIN_PKTS:-0}" -gt 0 ]; then
			local sent=$(($(sent_pkts) - P0))
			[ "$sent" -ge "$MIN_PKTS" ] || WHY="only $sent packets left $RXE_DEV (at least $MIN_PKTS expected): the bytes did not cross the RDMA device"
			PH+=", $sent packets sent"
		fi
		if [ -z "$WHY" ]; then
			read -r -a ta <<< "$ARGS"
			WHY=$("$CHECK" "${ta[@]}") || { [ -n "$WHY" ] || WHY="check $CHECK failed"; }
		fi
		# The binding evidence is checked for every case, also failing ones
		# (a wrong binding is the first thing to know about a failure).
		b1=$(check_binding server "$SRV_SIDE" "$SRV_SYM") || bok=0
		if [ -e "$DIR/client.out" ]; then
			b2=$(check_binding client "$CLI_SIDE" "$CLI_SYM") || bok=0
		fi
		ev="$b1${b2:+; $b2}"
		if [ "$bok" = 1 ]; then
			BOUND=$((BOUND + 1 + (${#b2} > 0)))
		else
			ev="WRONG BINDING: $ev"
			[ -n "$WHY" ] || WHY="wrong library: $b1${b2:+; $b2}"
		fi
	fi

	secs=${SECS:-$(secs_since "$T0")s}
	if [ -n "$WHY" ] && [ "$RETRY" = allowed ] &&
		judge_rerun interop "$TOOL $MODE${ARGS:+ $ARGS} ($secs)" "$WHY" "$DIR" "$TOOL" "$MODE" "$ARGS"; then
		RETRY=now
		FAILED_DIRS+=("$DIR")
		return
	fi
	if [ -z "$WHY" ]; then
		PASSED=$((PASSED + 1))
		echo "PASS $TOOL $MODE${ARGS:+ $ARGS} ($secs)"
		[ "$VERBOSE" = 1 ] && echo "    bound: $ev" && echo "    times: $PH"
	else
		FAILED=$((FAILED + 1))
		FAILURES+=("$TOOL $MODE${ARGS:+ $ARGS}: $WHY")
		FAILED_DIRS+=("$DIR")
		echo "FAIL $TOOL $MODE${ARGS:+ $ARGS} ($secs)"
		echo "    reason: $WHY"
		[ -n "$ev" ] && echo "    bound: $ev"
		echo "    times: ${PH:-}"
		echo "    server: [$SRV_SIDE] $(cat "$DIR/server.cmd")"
		echo "    client: [$CLI_SIDE] $(cat "$DIR/client.cmd")"
		tail_file "$DIR/server.out" 12 "server stdout"
		tail_file "$DIR/server.err" 12 "server stderr"
		tail_file "$DIR/client.out" 12 "client stdout"
		tail_file "$DIR/client.err" 12 "client stderr"
		tail_file "$DIR/server.strace" 25 "server strace"
		tail_file "$DIR/client.strace" 25 "client strace"
		dmesg 2>/dev/null | tail -n +$((D0 + 1)) | grep -v "speed is unknown" | tail -n 8 > "$DIR/dmesg"
		[ -s "$DIR/dmesg" ] && tail_file "$DIR/dmesg" 8 "new kernel messages"
	fi
}

# --- main ----------------------------------------------------------------------------

IFS=, read -r -a mode_list <<< "$MODES"
# skip_mode CASE MODE: 0 if --libpath-only leaves MODE out for CASE.
skip_mode() {
	[ "$2" = libpath ] && [ -n "$LIBPATH_ONLY" ] && ! grep -Eq -- "$LIBPATH_ONLY" <<< "${1%%|*} ${1#*|}"
}
selected=()
for c in "${CASES[@]}"; do
	if [ -n "$EXCEPT" ] && grep -Eq -- "$EXCEPT" <<< "${c%%|*} ${c#*|}"; then continue; fi
	if [ -z "$ONLY" ] || grep -Eq -- "$ONLY" <<< "${c%%|*} ${c#*|}"; then selected+=("$c"); fi
done
if [ "$LIST" = 1 ]; then
	for c in "${selected[@]}"; do
		args=${c#*|}
		for m in "${mode_list[@]}"; do
			skip_mode "$c" "$m" || echo "${c%%|*} $m${args:+ $args}"
		done
	done
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
	# Any server or deferred client still around (interrupted run): stop it.
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
	args=${c#*|}
	for m in "${mode_list[@]}"; do
		! skip_mode "$c" "$m" || continue
		if [ "$DEADLINE" != 0 ] && (($(now_us) - T_ALL > DEADLINE * 1000000)); then
			n="${c%%|*} $m${args:+ $args}"
			FAILED=$((FAILED + 1))
			FAILURES+=("$n: not run, deadline of ${DEADLINE}s reached")
			echo "FAIL $n (0.0s)"
			echo "    reason: not run: the harness's deadline (${DEADLINE}s) was reached"
			continue
		fi
		RETRY=allowed
		run_case "${c%%|*}" "$args" "$m"
		[ "$RETRY" != now ] || { RETRY=no; run_case "${c%%|*}" "$args" "$m"; }
	done
done
finish_deferred
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
rerun_summary interop
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
