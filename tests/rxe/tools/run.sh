#!/bin/bash
# The bundled tools (examples/: rping, ucmatose, udaddy, mckey, cmtime,
# rdma_server + rdma_client) on a real RDMA device (rxe0 in the Soft-RoCE VM):
# each against itself and against rdma-core's tool of the same name in both
# directions, then their failure paths (no server, bad address, bad option,
# a peer that stops answering).
#
#   run.sh [--tools DIR] [--lib PATH] [--libs ours,ref] [--only REGEX]
#          [--keep] [--logdir DIR] [--scale PERCENT] [--list]
#
#   --tools DIR   our tools (default <repo>/build/examples)
#   --lib PATH    our librdmacm.so.1 (default <repo>/build/src/librdmacm.so.1)
#   --libs L      the library under OUR tools, one or both of (default ours,ref):
#                   ours  LD_LIBRARY_PATH=<dir of --lib>
#                   ref   LD_PRELOAD=<the system's rdma-core librdmacm>: tells a
#                         tool bug from a library bug
#                 rdma-core's tools always run on the system's library.
#   --full        every pair case in every library mode (default: with rdma-core's
#                 library under our tools, only the first case of each tool)
#   --only REGEX  the cases whose name matches (a bash ERE); names look like
#                 "pair rping ours srv=ours cli=theirs -v -C 10" or
#                 "fail rping ours no-server"
#   --keep        keep the logs (default: removed when all pass)
#   --scale P     multiply every time limit by P percent (default 100)
#   --list        print the case names and exit
#
# Environment: RXE_IP (required: the device's IPv4 address).
# Output: `PASS|FAIL <case> (<s>s)`, for a failure the reason and log tails,
# and last `N passed, M failed` alone on a line. Exit status 0 only if all
# passed. Every process runs under `timeout -k 2 N`; servers are waited for
# until they listen (or, mckey, until they have joined) with a bound, and
# always stopped. Each process runs with LD_DEBUG=bindings and a case passes
# only if its rdma_* calls went to the library the case says.

set -u
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
# Timing, readiness, process control and binding evidence are the interop
# harness's: one implementation of each.
# shellcheck source=../interop/lib.sh
. "$HERE/../interop/lib.sh"

REPO=$(cd "$HERE/../../.." && pwd)
TOOLS=$REPO/build/examples
OURS=$REPO/build/src/librdmacm.so.1
SYSLIB=${RDMACM_SYSTEM_LIB:-/usr/lib/x86_64-linux-gnu/librdmacm.so.1}
# shellcheck disable=SC2034 # SCALE is read by tmo (lib.sh)
LIBS=ours,ref ONLY='' KEEP=0 LOGROOT='' SCALE=100 LIST=0 FULL=0
PEER_TIMEOUT=10 # RDMACM_TOOLS_TIMEOUT of our tools in the pair cases (seconds)
STALL_TIMEOUT=3 # ... in the cases where the peer stops answering

usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--tools) TOOLS=$2; shift ;;
	--lib) OURS=$2; shift ;;
	--libs) LIBS=$2; shift ;;
	--only) ONLY=$2; shift ;;
	--keep) KEEP=1 ;;
	--logdir) LOGROOT=$2; shift ;;
	--scale) SCALE=$2; shift ;;
	--list) LIST=1 ;;
	--full) FULL=1 ;;
	-h | --help) usage ;;
	*) echo "run.sh: unknown argument $1" >&2; usage ;;
	esac
	shift
done

# --- the cases ----------------------------------------------------------------------
# "tool|arguments given to both sides". Modest counts: the VM emulates its CPUs.
PAIRS=(
	"rping|-v -C 10"
	"rping|-v -V -C 50 -S 4096"
	"rping|-V -C 3 -S 65535"
	"rping|-q -v -V -C 5"
	"rping|-P -v -V -C 20"
	"ucmatose|-c 1 -C 10"
	"ucmatose|-c 4 -C 20 -S 8192"
	"ucmatose|-c 2 -C 5 -m"
	"udaddy|-c 1 -C 10"
	"udaddy|-c 3 -C 20 -S 1024"
	"mckey|-C 10"
	"mckey|-c 2 -C 5 -S 512"
	"cmtime|-c 20"
	"cmtime|-c 100 -r 1 -t 1000"
	"rdma_server|"
)
PAIRINGS=("ours ours" "ours theirs" "theirs ours") # server, client

# --- running things -------------------------------------------------------------------

# The harness forks little: under TCG every fork costs, so helpers set
# variables instead of printing, and checks read files with bash itself.

# PROG := the binary of tool $2 for side $1 (ours | theirs).
prog() { if [ "$1" = ours ]; then PROG=$TOOLS/$2; else PROG=$(type -P "$2") || PROG=/usr/bin/$2; fi; }
# SECS := $1 seconds scaled by --scale.
scaled() { SECS=$(($1 * SCALE / 100)); }

# mkcmd ROLE WHO LIB SECONDS ARGV...: sets CMD to run ARGV as ROLE (server or
# client) under `timeout -k 2 SECONDS`, our tools (WHO=ours) on library LIB,
# with LD_DEBUG=bindings into $DIR/ROLE.bind.<pid>.
mkcmd() {
	local role=$1 who=$2 lib=$3 t=$4
	shift 4
	CMD=(timeout -k 2 "$t" env -u LD_PRELOAD -u LD_LIBRARY_PATH -u LD_DEBUG -u LD_DEBUG_OUTPUT
		LD_DEBUG=bindings "LD_DEBUG_OUTPUT=$DIR/$role.bind" "RDMACM_TOOLS_TIMEOUT=$TOOLS_TIMEOUT")
	if [ "$who" = ours ]; then
		case $lib in
		ours) CMD+=("LD_LIBRARY_PATH=$OURDIR") ;;
		ref) CMD+=("LD_PRELOAD=$SYSLIB") ;;
		esac
	else
		# rdma-core's tools buffer stdout in a file: line-buffer it, so
		# that what they print can be waited for (and survives a kill).
		CMD+=(stdbuf -oL)
	fi
	CMD+=("$@")
}
# bound ROLE WHO LIB SYMBOL: from ROLE's LD_DEBUG=bindings output, checks that
# the program bound its rdma_* imports to the library WHO/LIB must use, and
# nothing else, and that SYMBOL is among them. Sets BOUND (the evidence, or
# the problem); returns 0/1. (lib.sh's check_binding does the same with a
# dozen processes; this is one awk, as each fork is slow in the VM.)
declare -A REAL
realpath_of() { [ -n "${REAL[$1]:-}" ] || REAL[$1]=$(readlink -f "$1"); RP=${REAL[$1]}; }
bound() {
	local role=$1 want t found=0 ok=1 out
	local -a files
	if [ "$2" = ours ] && [ "$3" = ours ]; then want=$OURS; else realpath_of "$SYSLIB"; want=$RP; fi
	files=("$DIR/$role.bind".*)
	[ -e "${files[0]}" ] || { BOUND="$role: no LD_DEBUG=bindings output"; return 1; }
	# "binding file rping [0] to /x/librdmacm.so.1 [0]: normal symbol `rdma_connect' [RDMACM_1.0]"
	out=$(awk -v sym="\`$4'" '
		/normal symbol `rdma_/ && $4 !~ /librdmacm/ {
			t = $0; sub(/.* to /, "", t); sub(/ \[[0-9]+\]: normal symbol.*/, "", t)
			if (!(t in seen)) { seen[t] = 1; print "T " t }
			if (index($0, sym)) print "S"
		}' "${files[@]}")
	while read -r kind t; do
		case $kind in
		S) found=1 ;;
		T) realpath_of "$t"; [ "$RP" = "$want" ] || { ok=0; BOUND="$role: rdma_* bound to $t, expected $want"; } ;;
		esac
	done <<< "$out"
	[ "$ok" = 1 ] || return 1
	[ "$found" = 1 ] || { BOUND="$role: $4 not bound (to $want)"; return 1; }
	BOUND="$role $4 -> ${want##*/}"
}

# PID := the program a `timeout ... env ... prog` started (env execs prog).
prog_pid() { PID=$(pgrep -P "$1") && PID=${PID%%$'\n'*}; }

# wait_line FILE REGEX PID SECONDS: 0 once FILE has a line matching REGEX,
# 1 if PID died first, 2 on timeout.
wait_line() {
	local f=$1 re=$2 pid=$3 n=$(($4 * 10))
	while ((n-- > 0)); do
		has_line "$f" "$re" && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 2
}
# has_line FILE REGEX: FILE has a line matching REGEX. COUNT := how many.
has_line() {
	local l
	COUNT=0
	[ -e "$1" ] || return 1
	while IFS= read -r l; do [[ $l =~ $2 ]] && COUNT=$((COUNT + 1)); done < "$1"
	[ "$COUNT" -gt 0 ]
}

PASSED=0 FAILED=0 RUN=0 RERUN=no
FAILURES=()

# twice FUNCTION ARGS...: runs one case; if it failed and the rerun rule
# allows, once more at once (the second verdict counts). A deferred pair's
# exit is judged once, at the end. run_pair, run_fail and run_stall are the
# cases (pair_once, fail_once, stall_once) run so.
twice() {
	RERUN=allowed
	"$@"
	[ "$RERUN" != now ] || { RERUN=no; "$@"; }
	RERUN=no
}
run_pair() { twice pair_once "$@"; }
run_fail() { twice fail_once "$@"; }
run_stall() { twice stall_once "$@"; }

# new_case NAME: 0 if the case is selected (sets DIR, PORT, T0), else 1.
new_case() {
	CASE=$1
	if [ -n "$ONLY" ] && ! [[ $CASE =~ $ONLY ]]; then return 1; fi
	if [ "$LIST" = 1 ]; then echo "$CASE"; return 1; fi
	RUN=$((RUN + 1))
	PORT=$((21000 + RUN))
	DIR=$(printf '%s/%03d' "$LOGROOT" "$RUN")
	mkdir -p "$DIR"
	echo "$CASE" > "$DIR/case"
	T0=$(now_us)
	WHY='' EV=''
	return 0
}

# end_case: reports PASS or FAIL (WHY) with the logs' tails; or, the first
# time a case run by `twice` fails in a way the rerun rule allows (lib.sh),
# the FLAKY line, and RERUN := now.
end_case() {
	local secs f
	# A deferred case reports its time until done, its exit checked later.
	if [ -n "${CASE_SECS:-}" ]; then secs="${CASE_SECS}s, exit checked at the end"; else secs="$(secs_since "$T0")s"; fi
	if [ -n "$WHY" ] && [ "$RERUN" = allowed ] && judge_rerun tools "$CASE ($secs)" "$WHY" "$DIR" - - -; then
		RERUN=now KEEP=1
		return
	fi
	if [ -z "$WHY" ]; then
		PASSED=$((PASSED + 1))
		echo "PASS $CASE ($secs)"
		return
	fi
	FAILED=$((FAILED + 1))
	FAILURES+=("$CASE: $WHY")
	echo "FAIL $CASE ($secs)"
	echo "    reason: $WHY"
	[ -n "$EV" ] && echo "    bound: $EV"
	for f in server.cmd client.cmd; do [ -e "$DIR/$f" ] && echo "    ${f%.cmd}: $(cat "$DIR/$f")"; done
	for f in server.out server.err client.out client.err; do tail_file "$DIR/$f" 10 "$f"; done
}

# --- pairs: a server and a client ---------------------------------------------------

arg_after() { # arg_after FLAG ARGS...: the value following FLAG
	local f=$1; shift
	while [ $# -gt 1 ]; do [ "$1" = "$f" ] && { echo "$2"; return; }; shift; done
}
has_flag() { local f=$1; shift; case " $* " in *" $f "*) return 0 ;; esac; return 1; }
need() { # need FILE REGEX WHAT: FILE has a line matching REGEX, else says WHAT is missing
	has_line "$DIR/$1" "$2" || { echo "$1: no $3"; return 1; }
}

check_rping() {
	local c f
	c=$(($(arg_after -C "$@") * CLIENTS))
	for f in server.out server.err client.out client.err; do
		! has_line "$DIR/$f" '[Mm]ismatch' || { echo "$f: data mismatch reported"; return 1; }
	done
	need server.err '^server DISCONNECT EVENT\.\.\.$' "'server DISCONNECT EVENT...'" || return 1
	has_flag -v "$@" || return 0
	has_line "$DIR/client.out" '^ping data: rdma-ping-'
	[ "$COUNT" = "$c" ] || { echo "client printed $COUNT of $c pings"; return 1; }
	has_line "$DIR/server.out" '^server ping data: rdma-ping-'
	[ "$COUNT" = "$c" ] || { echo "server printed $COUNT of $c pings"; return 1; }
	c=$((c / CLIENTS))
	need client.out "^ping data: rdma-ping-$((c - 1)): " "last ping rdma-ping-$((c - 1))"
}
check_ucmatose() {
	need server.out '^cmatose: starting server$' "'cmatose: starting server'" &&
		need client.out '^cmatose: starting client$' "'cmatose: starting client'" &&
		need client.out '^data transfers complete$' "'data transfers complete'" &&
		need server.out '^disconnected$' "'disconnected'" &&
		need server.out '^return status 0$' "'return status 0'" &&
		need client.out '^return status 0$' "'return status 0'" || return 1
	if has_flag -m "$@"; then
		need server.out '^migrating to new event channel$' "'migrating to new event channel'" || return 1
	fi
}
check_udaddy() {
	need server.out '^udaddy: starting server$' "'udaddy: starting server'" &&
		need client.out '^udaddy: starting client$' "'udaddy: starting client'" &&
		need server.out '^data transfers complete$' "'data transfers complete'" &&
		need client.out '^data transfers complete$' "'data transfers complete'" &&
		need server.out '^return status 0$' "'return status 0'" &&
		need client.out '^return status 0$' "'return status 0'"
}
check_mckey() {
	need server.out '^mckey: joined dgid: [0-9a-f:.]+ mlid 0x[0-9a-f]+ sl [0-9]+$' "'mckey: joined dgid: ...'" &&
		need client.out '^mckey: joined dgid: ' "'mckey: joined dgid: ...'" &&
		need server.out '^data transfers complete$' "'data transfers complete'" &&
		need server.out '^return status 0$' "'return status 0'" &&
		need client.out '^return status 0$' "'return status 0'"
}
check_cmtime() {
	local step
	need client.out '^step +total ms +max ms +min us +us / conn$' "timing table" || return 1
	for step in 'create id' 'resolve addr' 'resolve route' 'create qp' 'connect' 'disconnect' 'destroy'; do
		need client.out "^$step *: +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+\$" "'$step' row" || return 1
	done
}
check_rdma_server() {
	need server.out '^rdma_server: end 0$' "'rdma_server: end 0'" &&
		need client.out '^rdma_client: end 0$' "'rdma_client: end 0'"
}

# define_pair TOOL "ARGS": SRV_TOOL CLI_TOOL, SRV and CLI
# (argument vectors), READY ("cm PORT" or "line REGEX"), PERSIST (the server
# serves until stopped), DEFER (check the client's exit at the end), CT (the
# client's time limit), CHECK, BIND_SRV/BIND_CLI (a symbol each side must
# have bound).
define_pair() {
	local tool=$1 ip=$RXE_IP group
	local -a a
	read -r -a a <<< "$2"
	SRV_TOOL=$tool CLI_TOOL=$tool PERSIST=0 DEFER=0 CLIENTS=1 CT=60 CHECK=check_$tool
	READY="cm $PORT" BIND_SRV=rdma_listen BIND_CLI=rdma_connect
	case $tool in
	rping)
		SRV=(-s -a "$ip" -p "$PORT" "${a[@]}")
		CLI=(-c -a "$ip" -p "$PORT" "${a[@]}")
		# -P: the server serves until stopped; two clients, one after the other.
		[[ " $2 " == *" -P "* ]] && PERSIST=1 CLIENTS=2 ;;
	ucmatose)
		SRV=(-p "$PORT" "${a[@]}")
		CLI=(-s "$ip" -p "$PORT" "${a[@]}") ;;
	udaddy)
		# The port is always 7174 (-p is the port space).
		SRV=("${a[@]}")
		CLI=(-s "$ip" "${a[@]}")
		READY="cm 7174" ;;
	mckey)
		# The receiver plays the server; it is ready once joined. The
		# sender uses one QP whatever -c says: each receiving QP gets
		# what every sending QP sends, and has -C receives posted.
		# On Linux 6.1, rxe leaks a reference on a QP that has sent
		# multicast: destroying it takes 50 s (the kernel warns from
		# __rxe_cleanup), for rdma-core's mckey -s as for ours. So the
		# sender's exit is checked at the end of the run (DEFER), and
		# all such waits overlap.
		group=239.77.$((RUN / 250)).$((RUN % 250 + 1))
		SRV=(-m "$group" -b "$ip" "${a[@]}")
		CLI=(-m "$group" -b "$ip" -s "${a[@]}" -c 1)
		DEFER=1 CT=120
		READY='line ^mckey: joined' BIND_SRV=rdma_leave_multicast BIND_CLI=rdma_leave_multicast ;;
	cmtime)
		SRV=(-p "$PORT")
		CLI=(-s "$ip" -p "$PORT" "${a[@]}")
		PERSIST=1 CT=120 ;;
	rdma_server)
		CLI_TOOL=rdma_client
		SRV=(-p "$PORT")
		CLI=(-s "$ip" -p "$PORT") ;;
	*) echo "unknown tool $tool" >&2; return 1 ;;
	esac
	scaled "$CT"
	CT=$SECS
}

# start_server WHO LIB SECONDS: starts SRV_TOOL (WHO's) with SRV in the
# background (SPID) and waits until it is READY. Returns 0, or 1 with WHY.
start_server() {
	local kind=${READY%% *} what=${READY#* } wr
	prog "$1" "$SRV_TOOL"
	mkcmd server "$1" "$2" "$3" "$PROG" "${SRV[@]}"
	echo "${CMD[*]}" > "$DIR/server.cmd"
	"${CMD[@]}" > "$DIR/server.out" 2> "$DIR/server.err" < /dev/null &
	SPID=$!
	if [ "$kind" = cm ]; then
		scaled 20
		wait_ready cm "$what" "$SPID" "$SECS"
	else
		scaled 30
		wait_line "$DIR/server.out" "$what" "$SPID" "$SECS"
	fi
	wr=$?
	case $wr in
	0) return 0 ;;
	1) wait "$SPID"; WHY="server exited ($?) before it was ready" ;;
	*) WHY="server not ready ($READY) within ${SECS}s" ;;
	esac
	return 1
}

# client_cmd WHO LIB SECONDS: CMD := the client (CLI_TOOL, WHO's, with CLI).
client_cmd() {
	prog "$1" "$CLI_TOOL"
	mkcmd client "$1" "$2" "$3" "$PROG" "${CLI[@]}"
	echo "${CMD[*]}" > "$DIR/client.cmd"
}

# client_status RC [WHO LIB]: WHY := what a client's exit status RC says,
# unless set (WHO LIB: which tool on which library, for a signal).
client_status() {
	[ -z "$WHY" ] || return 0
	if is_signal "$1" && [ "${2:-ours}" = ours ] && [ "${3:-ours}" = ours ]; then
		WHY="client killed by signal $(($1 - 128)) on our library"
	elif [ "$1" = 124 ] || [ "$1" = 137 ]; then
		WHY="client timed out after ${CT}s"
	elif [ "$1" != 0 ]; then
		WHY="client exit status $1"
	fi
}

# finish_pair LIB SERVER_WHO CLIENT_WHO "ARGS": the tool's checks, the
# binding evidence (also for failed cases: a wrong binding is the first
# thing to know about a failure), the verdict.
finish_pair() {
	local lib=$1 sw=$2 cw=$3 args=$4
	local -a ta
	if [ -z "$WHY" ]; then
		read -r -a ta <<< "$args"
		WHY=$("$CHECK" "${ta[@]}") || [ -n "$WHY" ] || WHY="$CHECK failed"
	fi
	bound server "$sw" "$lib" "$BIND_SRV" || [ -n "$WHY" ] || WHY="wrong library: $BOUND"
	EV=$BOUND
	if [ -e "$DIR/client.cmd" ]; then
		bound client "$cw" "$lib" "$BIND_CLI" || [ -n "$WHY" ] || WHY="wrong library: $BOUND"
		EV+="; $BOUND"
	fi
	end_case
}

# Pairs whose client's exit is checked at the end of the run (see mckey in
# define_pair): "client pid|tool|lib|server who|client who|args|RUN|DIR|seconds|case".
DEFERRED=()

# pair_once TOOL LIB SERVER_WHO CLIENT_WHO "ARGS"
pair_once() {
	local tool=$1 lib=$2 sw=$3 cw=$4 args=$5 cpid i rc
	new_case "pair $tool $lib srv=$sw cli=$cw${args:+ $args}" || return 0
	TOOLS_TIMEOUT=$PEER_TIMEOUT
	define_pair "$tool" "$args" || exit 2
	if ! start_server "$sw" "$lib" $((CT + 40)); then
		:
	elif [ "$DEFER" = 0 ]; then
		client_cmd "$cw" "$lib" "$CT"
		: > "$DIR/client.out"
		for ((i = 0; i < CLIENTS; i++)); do
			"${CMD[@]}" >> "$DIR/client.out" 2>> "$DIR/client.err" < /dev/null
			rc=$?
			[ "$cw" != theirs ] || ! peer_exit_race "$tool" "$rc" "$DIR/client.err" "$CASE (client)" || rc=0
			client_status "$rc" "$cw" "$lib"
		done
		scaled 20
		if [ "$PERSIST" = 1 ]; then
			# Until the server has seen the (last) client go, if it says so.
			[ "$tool" = rping ] && wait_line "$DIR/server.err" '^server DISCONNECT EVENT' "$SPID" 5
			if wait_exit "$SPID" 0; then
				[ -n "$WHY" ] || WHY="server exited ($WAIT_RC) by itself; it should serve until stopped"
			fi
		elif wait_exit "$SPID" "$SECS"; then
			[ "$sw" != theirs ] || ! peer_exit_race "$tool" "$WAIT_RC" "$DIR/server.err" "$CASE (server)" || WAIT_RC=0
			if is_signal "$WAIT_RC" && [ "$sw" = ours ] && [ "$lib" = ours ]; then
				[ -n "$WHY" ] || WHY="server killed by signal $((WAIT_RC - 128)) on our library"
			fi
			[ "$WAIT_RC" = 0 ] || [ -n "$WHY" ] || WHY="server exit status $WAIT_RC"
		else
			[ -n "$WHY" ] || WHY="server still running ${SECS}s after the client ended"
		fi
	else
		# The server ends first; then the client is done but for its exit.
		client_cmd "$cw" "$lib" "$CT"
		"${CMD[@]}" > "$DIR/client.out" 2> "$DIR/client.err" < /dev/null &
		cpid=$!
		if ! wait_exit "$SPID" "$CT"; then
			WHY="server still running after ${CT}s"
		elif [ "$WAIT_RC" != 0 ]; then
			WHY="server exit status $WAIT_RC"
		fi
		scaled 20
		wait_line "$DIR/client.out" '^data transfers complete$' "$cpid" "$SECS"
		if [ -z "$WHY" ] && kill -0 "$cpid" 2>/dev/null; then
			DEFERRED+=("$cpid|$tool|$lib|$sw|$cw|$args|$RUN|$DIR|$(secs_since "$T0")|$CASE")
			stop_proc "$SPID" 2>/dev/null
			return 0
		fi
		wait_exit "$cpid" "$CT" || stop_proc "$cpid" 2>/dev/null
		client_status "${WAIT_RC:-124}" "$cw" "$lib"
	fi
	stop_proc "$SPID" 2>/dev/null
	finish_pair "$lib" "$sw" "$cw" "$args"
}

# The verdicts of the deferred pairs, once their clients have exited.
finish_deferred() {
	local d cpid tool lib sw cw args runs=$RUN
	for d in "${DEFERRED[@]}"; do
		IFS='|' read -r cpid tool lib sw cw args RUN DIR CASE_SECS CASE <<< "$d"
		WHY='' EV=''
		PORT=$((21000 + RUN))
		define_pair "$tool" "$args"
		if wait_exit "$cpid" "$CT"; then
			client_status "$WAIT_RC" "$cw" "$lib"
		else
			WHY="client still running ${CT}s after it was done"
			stop_proc "$cpid" 2>/dev/null
		fi
		finish_pair "$lib" "$sw" "$cw" "$args"
	done
	DEFERRED=() RUN=$runs CASE_SECS=''
}

# --- failure paths of our tools --------------------------------------------------------

# fail_once NAME LIB STATUS REGEX SECONDS ARGV...: our tool ARGV (its name
# first) must exit with STATUS ("nonzero" or a number) within SECONDS, and
# print a line matching REGEX (stdout or stderr).
fail_once() {
	local name=$1 lib=$2 want=$3 re=$4 max=$5 tool=$6 rc secs limit
	shift 6
	new_case "fail $tool $lib $name" || return 0
	TOOLS_TIMEOUT=$PEER_TIMEOUT
	scaled "$max"
	max=$SECS limit=$((SECS + 20))
	mkcmd client ours "$lib" "$limit" "$TOOLS/$tool" "$@"
	echo "${CMD[*]}" > "$DIR/client.cmd"
	"${CMD[@]}" > "$DIR/client.out" 2> "$DIR/client.err" < /dev/null
	rc=$?
	secs=$(secs_since "$T0")
	if is_signal "$rc" && [ "$lib" = ours ]; then
		WHY="killed by signal $((rc - 128)) on our library"
	elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		WHY="hung: killed after ${limit}s"
	elif [ "$want" = nonzero ] && [ "$rc" = 0 ]; then
		WHY="exit status 0, expected a failure"
	elif [ "$want" != nonzero ] && [ "$rc" != "$want" ]; then
		WHY="exit status $rc, expected $want"
	elif ! has_line "$DIR/client.out" "$re" && ! has_line "$DIR/client.err" "$re"; then
		WHY="no message matching /$re/"
	elif [ "${secs%.*}" -ge "$max" ]; then
		WHY="took ${secs}s, more than ${max}s"
	fi
	end_case
}

# stall_once TOOL LIB SERVER_WHO CLIENT_WHO STOPPED: a pair where one side
# (STOPPED: server or client) is stopped with SIGSTOP once the exchange is
# under way (rping: after 3 pings; the others: as soon as the server
# listens). The other side, which is ours, must fail within the peer timeout
# (RDMACM_TOOLS_TIMEOUT=STALL_TIMEOUT) and say so; then the stopped one is killed.
stall_once() {
	local tool=$1 lib=$2 sw=$3 cw=$4 stopped=$5 cpid='' victim='' live side=client limit
	new_case "stall $tool $lib srv=$sw cli=$cw stopped=$stopped" || return 0
	TOOLS_TIMEOUT=$STALL_TIMEOUT
	[ "$stopped" = client ] && side=server
	if [ "$tool" = rping ]; then define_pair rping "-v"; else define_pair "$tool" ""; fi
	[ "$tool" = cmtime ] && CLI+=(-c 5)
	scaled 15
	limit=$((STALL_TIMEOUT + SECS))
	if start_server "$sw" "$lib" 120; then
		if [ "$stopped" = server ] && prog_pid "$SPID"; then
			victim=$PID
			kill -STOP "$victim"
		fi
		client_cmd "$cw" "$lib" 120
		"${CMD[@]}" > "$DIR/client.out" 2> "$DIR/client.err" < /dev/null &
		cpid=$!
		live=$cpid
		if [ "$stopped" = client ]; then
			live=$SPID
			scaled 20
			if ! wait_line "$DIR/client.out" '^ping data: rdma-ping-2:' "$cpid" "$SECS"; then
				WHY="the client did not get 3 pings through"
			elif prog_pid "$cpid"; then
				victim=$PID
				kill -STOP "$victim"
			fi
		fi
		T0=$(now_us) # timed from the stop on
		if [ -n "$WHY" ]; then
			:
		elif ! wait_exit "$live" "$limit"; then
			WHY="the $side still runs ${limit}s after its peer stopped answering"
		elif [ "$WAIT_RC" = 0 ]; then
			WHY="the $side exited 0 though its peer stopped answering"
		elif [ "$WAIT_RC" = 124 ] || [ "$WAIT_RC" = 137 ]; then
			WHY="the $side hung (killed by timeout)"
		elif ! has_line "$DIR/$side.err" 'nothing from the peer|timed out|still waiting|no answer|within [0-9]+ ms'; then
			WHY="the $side failed ($WAIT_RC) without saying that its peer went silent"
		fi
		[ -n "$victim" ] && kill -KILL "$victim" 2>/dev/null
		[ -n "$cpid" ] && stop_proc "$cpid" 2>/dev/null
	fi
	stop_proc "$SPID" 2>/dev/null
	end_case
}

# --- main --------------------------------------------------------------------------------

run_all() {
	local lib c who tool args seen
	IFS=, read -r -a lib_list <<< "$LIBS"
	for lib in "${lib_list[@]}"; do
		seen=' '
		for c in "${PAIRS[@]}"; do
			# Under rdma-core's library (a check of the tools, not of our
			# library), the first case of each tool is enough unless --full.
			[ "$lib" = ref ] && [ "$FULL" = 0 ] && [[ $seen == *" ${c%%|*} "* ]] && continue
			for who in "${PAIRINGS[@]}"; do
				run_pair "${c%%|*}" "$lib" "${who% *}" "${who#* }" "${c#*|}"
			done
			seen+="${c%%|*} "
		done
	done
	for lib in "${lib_list[@]}"; do
		local ip=$RXE_IP bad=no.such.host.invalid far=169.254.77.99
		# No server: rejected at once (nothing listens on the port).
		run_fail no-server "$lib" nonzero 'REJECTED' 10 rping -c -a "$ip" -p 7999 -C 1
		run_fail no-server "$lib" nonzero 'REJECTED' 10 ucmatose -s "$ip" -p 7999
		run_fail no-server "$lib" nonzero 'REJECTED|UNREACHABLE' 15 udaddy -s "$ip"
		run_fail no-server "$lib" nonzero 'REJECTED' 15 cmtime -s "$ip" -p 7999 -c 5
		run_fail no-server "$lib" nonzero 'rdma_connect.*(refused|failed)' 10 rdma_client -s "$ip" -p 7999
		# Bad addresses: a name that does not resolve; a neighbour that never answers ARP.
		for tool in rping ucmatose udaddy cmtime rdma_client mckey; do
			case $tool in
			rping) args="-c -C 1 -a" ;;
			mckey) args="-b $ip -m" ;;
			*) args="-s" ;;
			esac
			# shellcheck disable=SC2086 # $args are words
			run_fail bad-name "$lib" nonzero "$bad" 10 $tool $args "$bad"
		done
		run_fail unreachable "$lib" nonzero 'ADDR_ERROR|timed out' 15 rping -c -a "$far" -C 1
		run_fail unreachable "$lib" nonzero 'ADDR_ERROR|timed out' 15 ucmatose -s "$far"
		run_fail unreachable "$lib" nonzero 'ADDR_ERROR|timed out' 15 udaddy -s "$far"
		run_fail unreachable "$lib" nonzero 'ADDR_ERROR|timed out' 15 cmtime -s "$far" -c 2 -r 0
		run_fail unreachable "$lib" nonzero 'rdma_create_ep.*(timed out|unreachable)' 15 rdma_client -s "$far"
		run_fail unreachable "$lib" nonzero 'failed|ERROR|invalid' 15 mckey -m "$far" -b "$ip"
		# Bad options: rdma-core's statuses (rping EINVAL, the others 1) and a usage text.
		run_fail bad-option "$lib" 22 'usage' 5 rping -x
		run_fail bad-value "$lib" 22 'invalid size' 5 rping -c -a "$ip" -S 5
		run_fail no-role "$lib" 22 'usage' 5 rping -a "$ip"
		for tool in ucmatose udaddy mckey cmtime rdma_server rdma_client; do
			run_fail bad-option "$lib" 1 'usage' 5 "$tool" -x
		done
		run_fail bad-value "$lib" 1 'invalid connections' 5 ucmatose -c zero
		run_fail no-group "$lib" 1 'multicast' 5 mckey -s
		# A peer that stops answering: ours fails within the peer timeout.
		run_stall rping "$lib" ours ours client
		run_stall rping "$lib" ours theirs client
		run_stall rping "$lib" ours ours server
		run_stall rping "$lib" theirs ours server
		run_stall ucmatose "$lib" theirs ours server
		run_stall udaddy "$lib" theirs ours server
		run_stall cmtime "$lib" theirs ours server
		run_stall rdma_server "$lib" theirs ours server
	done
	# The verdicts of the pairs whose client is still exiting.
	finish_deferred
}

if [ "$LIST" = 1 ]; then
	RXE_IP=${RXE_IP:-RXE_IP}
	run_all
	exit 0
fi

: "${RXE_IP:?RXE_IP must be the IPv4 address of the RDMA device (run inside tests/vm/rxe-vm)}"
[ -f "$OURS" ] || { echo "run.sh: no library at $OURS (build first, or --lib)" >&2; exit 2; }
[ -x "$TOOLS/rping" ] || { echo "run.sh: no tools in $TOOLS (build first, or --tools)" >&2; exit 2; }
for t in rping ucmatose udaddy mckey cmtime rdma_server rdma_client; do
	command -v "$t" > /dev/null || { echo "run.sh: rdma-core's $t is missing (apt-get install rdmacm-utils)" >&2; exit 2; }
done
OURS=$(readlink -f "$OURS")
OURDIR=$(dirname "$OURS")
if [ -z "$LOGROOT" ]; then
	LOGROOT=$(mktemp -d "${TMPDIR:-/tmp}/rdmacm-tools.XXXXXX")
else
	mkdir -p "$LOGROOT"
fi
cleanup() {
	local p
	for p in $(jobs -p); do stop_proc "$p" 2>/dev/null; done
}
trap cleanup EXIT
trap 'echo "interrupted"; exit 130' INT TERM

echo "tools: ours = $TOOLS on $OURS; rdma-core's = rdmacm-utils $(dpkg-query -W -f='${Version}' rdmacm-utils 2>/dev/null) on $(readlink -f "$SYSLIB")"
echo "tools: library modes for our tools: $LIBS; device at $RXE_IP; logs in $LOGROOT"
T_ALL=$(now_us)
run_all
echo "tools: $RUN cases in $(secs_since "$T_ALL")s"
if [ "$FAILED" != 0 ]; then
	echo "tools: failed:"
	printf '  %s\n' "${FAILURES[@]}"
fi
if [ "$FAILED" = 0 ] && [ "$KEEP" = 0 ]; then rm -rf "$LOGROOT"; fi
rerun_summary tools
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
