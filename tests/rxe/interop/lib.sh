# shellcheck shell=bash
# Helpers of the interop harness (sourced by run.sh; bash).
#
# One "run" = one case in one library mode: a server started in the background,
# waited for until it listens, one client in the foreground, checks, cleanup.
# Every process runs under `timeout -k 2 N`; nothing waits without a bound.
#
# Globals used (set by run.sh): OURS OURDIR SYSLIB RXE_IP RXE_DEV LOGROOT
# STRACE VERBOSE SCALE.

# --- small things ----------------------------------------------------------------

now_us() { echo "${EPOCHREALTIME/./}"; }
secs_since() { # $1: start in microseconds -> seconds with one decimal
	local d=$(($(now_us) - $1))
	printf '%d.%d' $((d / 1000000)) $((d % 1000000 / 100000))
}
# Scaled timeout (SCALE is a percentage, 100 = as written).
tmo() {
	local t=$(($1 * ${SCALE:-100} / 100))
	echo $((t < 1 ? 1 : t))
}

# --- known races of the peers, and the rerun rule ---------------------------------
# Every harness (interop, tools, preload, the package test) judges a failure
# with these, so that a peer's known race is forgiven by its sign on every side
# and in every harness, and one flake never costs a run.
#
# FORGIVEN: a race of rdma-core's own tool at its exit, after the case's work
#   was done and checked: the case passes (the line stays in the log).
# RETRY: a race of a peer tool that spoils the case before its work is done:
#   the case runs once more at once, the second verdict counts.
# FLAKY: any other failure that does not prove our library wrong: the case
#   runs once more at once, the second verdict counts. Never for a sanitizer
#   report, a signal in a process on our library, a wrong binding or a data
#   mismatch. scripts/test.sh lists every such line of a run and fails a run
#   with more than three FLAKY lines.
FORGIVEN=0 RETRIED=0 FLAKY_N=0

# peer_exit_race TOOL RC ERRFILE [CASE]: 0 (and RACE := a description) if RC
# is rdma-core 44's rping exiting 255 after its pings: its CM thread calls
# rdma_get_cm_event on the channel main() has just destroyed (fixed upstream
# by "rping: terminate CM event thread before exiting"). Server and client
# share that teardown, so both are judged by it.
peer_exit_race() {
	local l last=''
	[ "$1" = rping ] && [ "$2" = 255 ] && [ -e "$3" ] || return 1
	while IFS= read -r l; do last=$l; done < "$3"
	case $last in
	'rdma_get_cm_event: Bad file descriptor' | 'rdma_get_cm_event: Invalid argument') ;;
	*) return 1 ;;
	esac
	RACE="rdma-core's rping exited 255 ('$last') after its pings: its CM thread races rdma_destroy_event_channel at exit (fixed upstream)"
	FORGIVEN=$((FORGIVEN + 1))
	echo "    FORGIVEN ${4:+$4: }$RACE"
}

# known_race TOOL DIR MODE ARGS: 0 (and RACE := a description) if the case
# whose logs are in DIR failed with a peer tool's own race, by its sign:
# - qperf, ib_send_bw -R: the server tells the client where to connect before
#   it calls rdma_listen, and a quick client's connect request in between is
#   rejected (no listener). qperf: its server child sends the port it bound;
#   ib_send_bw: after the control connection its server makes a new listener
#   for the data connections, and rdma-core 44's client, rejected with status
#   8, crashes in perftest's retry. See README.md.
# - rstream -T a on rdma-core's library (a mixed mode): rdma-core 44's rpoll
#   now and then reports POLLHUP while data is still unread, and rstream
#   exits 16 (POLLHUP) on that side without a word (measured with rdma-core on
#   both sides too).
known_race() {
	local side=''
	case $1 in
	qperf) grep -q '^unexpected event from RDMA CM: Event rejected' "$2/client.out" 2>/dev/null ;;
	ib_send_bw) grep -q '^Event: RDMA_CM_EVENT_REJECTED; error: 8\.' "$2/client.err" 2>/dev/null ;;
	rstream)
		case "$3 $4 " in
		mixed-srv-ours*'-T a '*) side=client ;;
		mixed-cli-ours*'-T a '*) side=server ;;
		*) false ;;
		esac && [ "$(cat "$2/$side.rc" 2>/dev/null)" = 16 ] && [ ! -s "$2/$side.err" ] ;;
	*) false ;;
	esac || return 1
	case $1 in
	rstream) RACE="rdma-core's rstream on rdma-core's library ($side) exited 16: its rpoll reported POLLHUP with data unread (rdma-core 44's own race)" ;;
	*) RACE="$1's client was rejected: its server had not called rdma_listen yet ($1's own race, README.md)" ;;
	esac
}

# is_signal STATUS: STATUS is that of a process a crash ended (under
# `timeout`, 128 + the signal): SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE,
# SIGSEGV. Only those: rdma-core's tools exit with a negative errno, which
# reads as 128 + something too (ucmatose's "return status -110" is 146).
is_signal() { case $1 in 132 | 133 | 134 | 135 | 136 | 139) true ;; *) false ;; esac; }

# The marks a failure's text carries when it proves our library wrong
# whatever the timing (harnesses word their reasons so).
NO_RERUN_RE='wrong library|WRONG BINDING|did not load|loaded librdmacm|does not map|on our library|killed by SIG(ILL|TRAP|ABRT|BUS|FPE|SEGV)|mismatch|differs|did not cross|crossed lo|on kernel TCP'
SANITIZER_RE='ERROR: (Address|Leak|Memory)Sanitizer|WARNING: ThreadSanitizer|runtime error: |SUMMARY: UndefinedBehaviorSanitizer'

# rerun_allowed WHY DIR: 0 if a case that failed with WHY, its logs in DIR,
# may be run once more.
rerun_allowed() {
	! grep -Eq -- "$NO_RERUN_RE" <<< "$1" && ! grep -rEqs -- "$SANITIZER_RE" "$2"
}

# judge_rerun HARNESS CASE WHY DIR TOOL MODE ARGS: after a first failure,
# prints the RETRY or FLAKY line and returns 0 if the case is to run once
# more, else 1.
judge_rerun() {
	if known_race "$5" "$4" "$6" "$7"; then
		RETRIED=$((RETRIED + 1))
		echo "RETRY $1 $2: $RACE; once more"
	elif rerun_allowed "$3" "$4"; then
		FLAKY_N=$((FLAKY_N + 1))
		echo "FLAKY $1 $2: $3"
	else
		return 1
	fi
}

# rerun_summary HARNESS: one line with the counts, if any.
rerun_summary() {
	[ $((FORGIVEN + RETRIED + FLAKY_N)) = 0 ] ||
		echo "$1: $FLAKY_N FLAKY reruns, $RETRIED RETRY reruns (known peer races), $FORGIVEN FORGIVEN (lines above)"
}

# Prints the last $2 lines of file $1 (long lines cut), indented, under a title.
tail_file() {
	local f=$1 n=$2 title=$3
	[ -e "$f" ] || return 0
	if [ ! -s "$f" ]; then
		printf '    --- %s: (empty)\n' "$title"
		return 0
	fi
	printf '    --- %s (last %d lines of %s)\n' "$title" "$n" "$f"
	tail -n "$n" "$f" | cut -c1-200 | sed 's/^/    | /'
}

# --- library selection -----------------------------------------------------------

# Sets ENVV (an array of K=V) for a process on library side $1:
#   preload  LD_PRELOAD=<ours>
#   libpath  LD_LIBRARY_PATH=<dir of ours> (same soname, found first)
#   (with FIRST set, a sanitizer runtime, it is preloaded before ours in both)
#   sys      nothing: the system's librdmacm through the normal search
lib_env() {
	ENVV=()
	case $1 in
	preload) ENVV+=("LD_PRELOAD=${FIRST:+$FIRST }$OURS") ;;
	libpath) ENVV+=("LD_LIBRARY_PATH=$OURDIR" ${FIRST:+"LD_PRELOAD=$FIRST"}) ;;
	sys) ;;
	*) echo "lib_env: unknown side $1" >&2; return 1 ;;
	esac
}

# The realpath the process on side $1 must have bound its rdma_* symbols to
# (WANT_OURS and WANT_SYS are set once by run.sh: forks are slow under TCG).
expected_lib() {
	case $1 in
	preload | libpath) echo "$WANT_OURS" ;;
	sys) echo "$WANT_SYS" ;;
	esac
}

# Builds CMD (an array) to run "$@" as ROLE ($1) on library side $2 under
# `timeout -k 2 $3`, with LD_DEBUG=bindings written to $DIR/ROLE.bind.<pid>
# and, with STRACE=1 on our side, strace -f into $DIR/ROLE.strace.
build_cmd() {
	local role=$1 side=$2 t=$3
	shift 3
	lib_env "$side" || return 1
	ENVV+=("LD_DEBUG=bindings" "LD_DEBUG_OUTPUT=$DIR/$role.bind")
	CMD=(timeout -k 2 "$t" env -u LD_PRELOAD -u LD_LIBRARY_PATH -u LD_DEBUG -u LD_DEBUG_OUTPUT)
	if [ "${STRACE:-0}" = 1 ] && [ "$side" != sys ]; then
		# The environment goes to the traced program only, not to strace itself.
		CMD+=(strace -f -qq -tt -s 48 -o "$DIR/$role.strace"
			-e "trace=openat,write,ioctl,poll,ppoll,epoll_wait,close")
		local e
		for e in "${ENVV[@]}"; do CMD+=(-E "$e"); done
	else
		CMD+=("${ENVV[@]}")
	fi
	CMD+=("$@")
}

# Checks, from the LD_DEBUG=bindings output of ROLE ($1), that the program
# bound its rdma_* imports to the library of side $2 and nowhere else, and
# that symbol $3 (rdma_listen / rdma_connect) is among them. Prints the
# evidence (or the problem) and returns 0/1.
check_binding() {
	local role=$1 side=$2 sym=$3 want out kind t hit='' n=0 bad=0
	want=$(expected_lib "$side")
	if ! compgen -G "$DIR/$role.bind.*" > /dev/null; then
		echo "$role: no LD_DEBUG=bindings output (did the program start?)"
		return 1
	fi
	# Lines look like "  179: binding file rping [0] to /x/librdmacm.so.1 [0]: normal symbol `rdma_connect' [RDMACM_1.0]".
	# Only the program's (and other libraries') imports count, not librdmacm's internal ones.
	# The library's symbols: rdma_* and the rsocket family.
	out=$(awk -v sym="$sym" -v pat="normal symbol .(rdma_[a-z_]+|r(socket|bind|listen|accept|connect|shutdown|close|recv|recvfrom|recvmsg|send|sendto|sendmsg|read|readv|write|writev|poll|select|getpeername|getsockname|setsockopt|getsockopt|fcntl|iomap|iounmap|iowrite)).( |$)" '
		$0 ~ pat && !/binding file [^ ]*librdmacm[^ ]* / {
			t = $0; sub(/.* to /, "", t); sub(/ \[[0-9]+\]: normal symbol.*/, "", t)
			seen[t] = 1; n++
			if (index($0, "symbol `" sym "\047")) hit = t
		}
		END { for (t in seen) print "T " t; if (hit != "") print "H " hit; print "N " n + 0 }' "$DIR/$role.bind".*)
	while read -r kind t; do
		case $kind in
		T) [ "$t" = "$want" ] || [ "$(readlink -f "$t")" = "$want" ] ||
			{ echo "$role: rdma_* bound to $t, expected $want"; bad=1; } ;;
		H) hit=$t ;;
		N) n=$t ;;
		esac
	done <<< "$out"
	if [ "$n" = 0 ]; then
		echo "$role: no rdma_* symbol bindings in LD_DEBUG output"
		return 1
	fi
	[ "$bad" = 0 ] || return 1
	if [ -z "$hit" ]; then
		echo "$role: $sym not bound"
		return 1
	fi
	echo "$role $sym -> $hit (${want##*/})"
}

# A line of rstream's results table: "name bytes xfers iters total time Gb/sec usec/xfer".
# shellcheck disable=SC2034 # used by run.sh and ../preload/run.sh
RSTREAM_RESULT_RE='^[a-z0-9_]+ +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9]+ +[0-9.]+[kmg]? +[0-9.]+s +[0-9.]+ +[0-9.]+$'

# Packets rxe0 has sent so far (its hardware counter).
sent_pkts() { cat "/sys/class/infiniband/${RXE_DEV:-rxe0}/ports/1/hw_counters/sent_pkts" 2>/dev/null || echo 0; }

# --- readiness -------------------------------------------------------------------

# True once an rdma_cm id listens on port $1 (as the kernel's resource tracker sees it).
cm_listening() {
	rdma res show cm_id 2>/dev/null | grep -Eq "state LISTEN .*src-addr [^ ]*:$1( |\$)"
}
tcp_listening() {
	ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}
# True once a QP is attached to the IPv4 multicast group $1: rxe then puts the
# group's MAC address (01:00:5e + the group's low 23 bits) on its netdev.
mcast_attached() {
	local b mac
	IFS=. read -r -a b <<< "$1"
	printf -v mac '01:00:5e:%02x:%02x:%02x' $((b[1] & 127)) "${b[2]}" "${b[3]}"
	ip maddr show 2>/dev/null | grep -Eq "link +$mac( |\$)"
}

# The loops below count wall-clock time, not iterations: under TCG a fork of
# `sleep` alone can take a few tenths of a second.

# wait_ready KIND WHAT PID SECONDS: 0 when ready (KIND cm or tcp: listening
# on port WHAT; mcast: a QP attached to group WHAT); 1 when the server died
# first; 2 on timeout.
wait_ready() {
	local kind=$1 what=$2 pid=$3 end=$(($(now_us) + $4 * 1000000))
	while :; do
		case $kind in
		cm) cm_listening "$what" && return 0 ;;
		tcp) tcp_listening "$what" && return 0 ;;
		mcast) mcast_attached "$what" && return 0 ;;
		esac
		kill -0 "$pid" 2>/dev/null || return 1
		(($(now_us) < end)) || return 2
		sleep 0.1
	done
}

# wait_exit PID SECONDS: 0 once PID has exited (its status in WAIT_RC), 1 if still running.
wait_exit() {
	local pid=$1 end=$(($(now_us) + $2 * 1000000))
	while kill -0 "$pid" 2>/dev/null && (($(now_us) < end)); do sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then return 1; fi
	# shellcheck disable=SC2034 # read by run.sh
	WAIT_RC=0
	wait "$pid" 2>/dev/null || WAIT_RC=$?
	return 0
}

# Stops a background `timeout` (its own process group) and everything under it.
stop_proc() {
	local pid=$1
	kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
	kill -TERM "$pid" 2>/dev/null
	wait_exit "$pid" 3 && return 0
	kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null || true
	return 0
}
