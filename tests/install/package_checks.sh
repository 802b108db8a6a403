# shellcheck shell=bash
# The checks of package_vm.sh: each ends the test with "FAIL: ..." (exit 1)
# when it does not hold. rdma-core's library, rxe0's counter, a directory:
system_lib=$(dpkg -L librdmacm1 | grep '/librdmacm\.so\.1\.[0-9.]*$')
sent=/sys/class/infiniband/$RXE_DEV/ports/1/hw_counters/sent_pkts
work=$(mktemp -d)

fail() { echo "FAIL: $*"; exit 1; }
# wait_ready: waiting for a listener, bounded; maps: what a process has mapped.
# shellcheck source=../rxe/procs.sh
. "$(dirname "$0")/../rxe/procs.sh"
# rdma-core 44's rping at its exit is judged as every harness judges it (its
# known race, tests/rxe/runner/judge.py): peer_exit_race TOOL STATUS ERRFILE CASE.
judge=$(cd "$(dirname "$0")/../rxe/runner" && pwd)/run.py
peer_exit_race() { [ "$2" != 0 ] && "$judge" judge peer-exit-race "$@"; }
step() { echo; echo "== $* (at ${SECONDS} s)"; }

# The state that removing the package must give back exactly.
snapshot() {
	ldconfig -p
	ls -l /etc/ld.so.conf.d
	sha256sum "$system_lib"
	readlink "$(dirname "$system_lib")/librdmacm.so.1"
	dpkg --verify librdmacm1 rdmacm-utils || echo "dpkg --verify: status $?"
}
as_before() { # as_before STEP: the state is the snapshot taken before anything
	snapshot >"$work/after"
	diff "$work/before" "$work/after" || fail "$1: the state differs from before"
	echo "ldconfig's cache, /etc/ld.so.conf.d, rdma-core's files: as before"
}

# The installed packages' dependencies, from dpkg's status alone: with the
# archive's package lists (19 MiB) apt rebuilt its cache after every dpkg
# step, 15 s of CPU each under TCG; what is installed is all a check of
# installed packages needs. (dpkg's own failures end the script: set -e.)
apt_check() {
	mkdir -p "$work/lists/partial"
	apt-get check -o Dir::State::Lists="$work/lists" -o Dir::Cache::pkgcache= \
		-o Dir::Cache::srcpkgcache= >"$work/apt" 2>&1 || { cat "$work/apt"; fail "apt-get check $1"; }
	echo "apt-get check $1: clean"
}

# The librdmacm a process maps: polls (shell builtins only, fast) until the
# loader has mapped one (the forked shell and env map none) or the process has
# ended (then the test fails).
mapped_lib() {
	local pid=$1 state end=$((SECONDS + 20))
	while [ $SECONDS -lt $end ]; do
		maps "$pid" '(/[^ ]*/librdmacm\.so[^/ ]*)$' && { echo "$MAPPED"; return; }
		state=Z
		read -r _ _ state _ 2>/dev/null <"/proc/$pid/stat" || true
		[ "$state" != Z ] || break
	done
	echo "(none seen)"
}

# expect_lib WHO PATH ours|theirs
expect_lib() {
	local who=$1 lib=$2 want=$3
	echo "$who: $lib"
	case $want in
	ours) [[ $lib == /opt/rdmacm/lib/librdmacm.so.1* ]] || fail "$who is not on our library" ;;
	theirs) [ "$(readlink -f "$lib")" = "$(readlink -f "$system_lib")" ] || fail "$who is not on rdma-core's library" ;;
	esac
}

# A server and a client of rdma-core's TOOL, no environment variables, both
# on the expected library, both exit 0 and packets left through rxe0.
pair() {
	local want=$1 tool=$2 before spid cpid slib clib srv cli port rc=0 wr
	case $tool in
	rping) srv=(rping -s -a "$RXE_IP" -C 10 -v); cli=(rping -c -a "$RXE_IP" -C 10 -v) port=7174 ;;
	ucmatose) srv=(ucmatose); cli=(ucmatose -s "$RXE_IP") port=7471 ;;
	esac
	before=$(cat "$sent")
	# stderr apart: the race's judge reads its last line, and stdout (a file:
	# buffered) is flushed after it when the tool exits.
	env -i PATH=/usr/bin:/bin "${srv[@]}" >"$work/srv" 2>"$work/srv.err" & spid=$!
	slib=$(mapped_lib $spid)
	# Until it listens (or has died), with a bound.
	wait_ready cm $port $spid 60 || { wr=$?; cat "$work/srv" "$work/srv.err"; fail "$tool server: not listening (wait_ready $wr)"; }
	# The server stopped, the client waits for its answer: it cannot end
	# before its maps are read.
	kill -STOP $spid
	env -i PATH=/usr/bin:/bin "${cli[@]}" >"$work/cli" 2>"$work/cli.err" & cpid=$!
	clib=$(mapped_lib $cpid)
	kill -CONT $spid
	wait $cpid || rc=$?
	! peer_exit_race "$tool" $rc "$work/cli.err" "$tool client" || rc=0
	[ $rc = 0 ] || { cat "$work/cli" "$work/cli.err"; fail "$tool client: exit status $rc"; }
	wait $spid || rc=$?
	! peer_exit_race "$tool" $rc "$work/srv.err" "$tool server" || rc=0
	[ $rc = 0 ] || { cat "$work/srv" "$work/srv.err"; fail "$tool server: exit status $rc"; }
	expect_lib "$tool server (pid $spid)" "$slib" "$want"
	expect_lib "$tool client (pid $cpid)" "$clib" "$want"
	if [ "$tool" = rping ]; then
		[ "$(grep -c '^ping data: ' "$work/cli")" = 10 ] || { cat "$work/cli"; fail "rping client: not 10 pings"; }
	fi
	[ "$(cat "$sent")" -gt "$before" ] || fail "$tool: no packet sent on $RXE_DEV"
	echo "$tool: server and client exit 0, $(( $(cat "$sent") - before )) packets sent on $RXE_DEV"
}
