#!/bin/bash
# The system-wide switch, end to end, in the Soft-RoCE VM (whose root is a
# throw-away overlay of the host's): rdma-core's own rping and ucmatose, run
# with no environment variables, connect over rxe0 on rdma-core's library;
# after `dpkg -i` of our package on ours (seen in /proc/PID/maps of server and
# client), also after rdma-core's librdmacm1 is reinstalled as an upgrade
# would; after `dpkg -r`, and again after `dpkg -P`, on rdma-core's, with
# ldconfig's cache, /etc/ld.so.conf.d and rdma-core's files as they were.
# `apt-get check` is clean at every step.
#
#   package_vm.sh PACKAGE_DIR    (from build_deb.sh: rdmacm_*.deb, reference/librdmacm1_*.deb)
set -euo pipefail
[ "${RDMACM_IN_VM-}" = 1 ] || { echo "package_vm.sh: installs packages: run it in the VM only"; exit 2; }
dir=$1
deb=$(echo "$dir"/rdmacm_*.deb)
ref_deb=$(echo "$dir"/reference/librdmacm1_*.deb)
which_src=$(cd "$(dirname "$0")/../../examples" && pwd)/rdmacm-which
[ -f "$deb" ] && [ -f "$ref_deb" ] || { echo "FAIL: no package in $dir (build_deb.sh)"; exit 1; }
system_lib=$(dpkg -L librdmacm1 | grep '/librdmacm\.so\.1\.[0-9.]*$')
sent=/sys/class/infiniband/$RXE_DEV/ports/1/hw_counters/sent_pkts
work=$(mktemp -d)

fail() { echo "FAIL: $*"; exit 1; }
# wait_ready: waiting for a listener, bounded.
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
	local pid=$1 line state end=$((SECONDS + 20))
	while [ $SECONDS -lt $end ]; do
		while IFS= read -r line; do
			[[ $line =~ (/[^ ]*/librdmacm\.so[^/ ]*)$ ]] && { echo "${BASH_REMATCH[1]}"; return; }
		done 2>/dev/null <"/proc/$pid/maps"
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
	local want=$1 tool=$2 before spid cpid slib clib srv cli port rc=0 wr=0
	case $tool in
	rping) srv=(rping -s -a "$RXE_IP" -C 10 -v); cli=(rping -c -a "$RXE_IP" -C 10 -v) port=7174 ;;
	ucmatose) srv=(ucmatose); cli=(ucmatose -s "$RXE_IP") port=7471 ;;
	esac
	before=$(cat "$sent")
	env -i PATH=/usr/bin:/bin "${srv[@]}" >"$work/srv" 2>&1 & spid=$!
	slib=$(mapped_lib $spid)
	# Until it listens (or has died), with a bound.
	wait_ready cm $port $spid 60 || wr=$?
	[ $wr = 0 ] || { cat "$work/srv"; fail "$tool server: not listening (wait_ready $wr)"; }
	# The server stopped, the client waits for its answer: it cannot end
	# before its maps are read.
	kill -STOP $spid
	env -i PATH=/usr/bin:/bin "${cli[@]}" >"$work/cli" 2>&1 & cpid=$!
	clib=$(mapped_lib $cpid)
	kill -CONT $spid
	wait $cpid || rc=$?
	! peer_exit_race "$tool" $rc "$work/cli" "$tool client" || rc=0
	[ $rc = 0 ] || { cat "$work/cli"; fail "$tool client: exit status $rc"; }
	wait $spid || rc=$?
	! peer_exit_race "$tool" $rc "$work/srv" "$tool server" || rc=0
	[ $rc = 0 ] || { cat "$work/srv"; fail "$tool server: exit status $rc"; }
	expect_lib "$tool server (pid $spid)" "$slib" "$want"
	expect_lib "$tool client (pid $cpid)" "$clib" "$want"
	if [ "$tool" = rping ]; then
		[ "$(grep -c '^ping data: ' "$work/cli")" = 10 ] || { cat "$work/cli"; fail "rping client: not 10 pings"; }
	fi
	[ "$(cat "$sent")" -gt "$before" ] || fail "$tool: no packet sent on $RXE_DEV"
	echo "$tool: server and client exit 0, $(( $(cat "$sent") - before )) packets sent on $RXE_DEV"
}

step "before: rdma-core's library"
ldconfig  # the VM's cache, as the host's dpkg left it
snapshot >"$work/before"
apt_check before
pair theirs rping
pair theirs ucmatose
"$which_src" rping | tee "$work/which" || true
grep -q "not rdmacm's; package librdmacm1" "$work/which" || fail "rdmacm-which: rping not on rdma-core's"

step "dpkg -i $(basename "$deb")"
dpkg -i "$deb"
apt_check "after install"
echo "ldconfig -p, librdmacm.so.1 in the loader's order:"
ldconfig -p | grep -F 'librdmacm.so.1 '
pair ours rping
pair ours ucmatose
# Every other package on rdma-core's library gets ours too (those installed).
progs=(rping ucmatose)
for p in ib_send_bw qperf fio; do command -v $p >/dev/null && progs+=("$p"); done
/opt/rdmacm/bin/rdmacm-which "${progs[@]}" | tee "$work/which" || true
[ "$(grep -c '(ours: rdmacm ' "$work/which")" = ${#progs[@]} ] || fail "rdmacm-which: not all on ours"
for lib in libfabric.so.1 libuct_rdmacm.so.0; do
	path=$(find /usr/lib/x86_64-linux-gnu -name "$lib" -print -quit)
	[ -n "$path" ] || continue
	ldd "$path" | grep -F 'librdmacm.so.1 =>' | tee "$work/ldd" || true
	grep -q '/opt/rdmacm/lib/' "$work/ldd" || fail "$lib: not on ours"
done
# A running process: its PID.
env -i PATH=/usr/bin:/bin rping -s -a "$RXE_IP" -C 1 >/dev/null 2>&1 & spid=$!
mapped_lib $spid >/dev/null
/opt/rdmacm/bin/rdmacm-which $spid | tee "$work/which" || true
grep -q "(ours: rdmacm " "$work/which" || fail "rdmacm-which PID: not ours"
kill $spid; wait $spid 2>/dev/null || true

step "rdma-core's librdmacm1 reinstalled ($(basename "$ref_deb")), as its upgrade would"
dpkg -i "$ref_deb"
apt_check "after reinstalling librdmacm1"
ldconfig -p | grep -F 'librdmacm.so.1 '
pair ours rping

step "dpkg -r rdmacm"
dpkg -r rdmacm
apt_check "after remove"
[ ! -e /opt/rdmacm ] || { find /opt/rdmacm; fail "files left in /opt/rdmacm"; }
snapshot >"$work/after"
diff "$work/before" "$work/after" || fail "remove: the state differs from before"
echo "ldconfig's cache, /etc/ld.so.conf.d, rdma-core's files: as before"
pair theirs rping
pair theirs ucmatose
"$which_src" rping "$(command -v ucmatose)" | tee "$work/which" || true
[ "$(grep -c "not rdmacm's; package librdmacm1" "$work/which")" = 2 ] || fail "rdmacm-which: not on rdma-core's"

step "dpkg -i, then dpkg -P rdmacm"
dpkg -i "$deb" >/dev/null
pair ours rping
dpkg -P rdmacm
apt_check "after purge"
snapshot >"$work/after"
diff "$work/before" "$work/after" || fail "purge: the state differs from before"
[ -z "$(dpkg-query -W -f='${Status}' rdmacm 2>/dev/null)" ] || fail "dpkg still knows rdmacm"
echo "ldconfig's cache, /etc/ld.so.conf.d, rdma-core's files: as before"
pair theirs rping
echo
echo "package: PASS"
