#!/bin/bash
# Second stage inside the Soft-RoCE VM, run by the initramfs /init in the chroot
# (the host's root under a tmpfs overlay), as root, with the host's bash.
#
# The runner copies this file into the run share (/run/rxe-vm) with:
#   vm.conf  shell variables: RXE_IP RXE_PREFIX RXE_IP6 RXE_PEER_IP RXE_PEER_IP6 WAIT_PEER,
#            with --siw also RXE_TRANSPORT=siw and SIW_MODULES (the host's cache
#            directory of siw.ko and what it needs, with their load `order`)
#   cmd.sh   "cd DIR; export K=V ...; exec CMD ARGS" (shell-quoted)
# It sets up rxe0 (or siw0) on eth0 (which /init has configured), then runs cmd.sh with
# its output going to the file `output` of the share, and leaves the exit status
# in `rc`. Setup problems are written to `setup-failed` (and the console) instead.
# If the runner creates `dump-request` (its timeout is up), dump_state writes
# `dump.txt` and then `dump.done`.

S=/run/rxe-vm
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RXE_PEER_IP='' RXE_PEER_IP6='' WAIT_PEER='' RXE_TRANSPORT=rxe SIW_MODULES='' PROFILE=''
. "$S/vm.conf"
DEV=${RXE_TRANSPORT}0

log() { echo "rxe-vm-stage2: $*"; }

# Wait up to $1 tenths of a second for the command "$2..." to succeed.
wait_for() {
	local n=$1; shift
	until "$@" >/dev/null 2>&1; do
		((n-- > 0)) || return 1
		sleep 0.1
	done
}

port_active() { grep -q ACTIVE "/sys/class/infiniband/$DEV/ports/1/state"; }
# The IPv4 address shows up in the GID table as ::ffff:a.b.c.d.
gid_has_ip() { grep -qx "0000:0000:0000:0000:0000:ffff:$(printf '%02x%02x:%02x%02x' ${RXE_IP//./ })" \
	/sys/class/infiniband/rxe0/ports/1/gids/*; }

# siw.ko (built out of tree, unsigned) and the modules it needs that the
# initramfs lacks, from the host's cache over the read-only root.
load_siw() {
	local m
	[ -s "$SIW_MODULES/order" ] || { echo "no siw modules in '$SIW_MODULES'"; return 1; }
	while read -r m; do
		[ -d "/sys/module/${m%.ko}" ] || insmod "$SIW_MODULES/$m" || { echo "insmod $SIW_MODULES/$m failed"; return 1; }
	done < "$SIW_MODULES/order"
}

# Each step says what went wrong (set -e does not work inside an `if`).
setup() {
	# eth0 is already configured by /init.
	[ "$RXE_TRANSPORT" != siw ] || load_siw || return 1
	rdma link add "$DEV" type "$RXE_TRANSPORT" netdev eth0 || { echo "rdma link add $DEV failed"; return 1; }
	wait_for 100 port_active || { echo "$DEV port 1 is not ACTIVE"; cat "/sys/class/infiniband/$DEV/ports/1/state"; return 1; }
	[ "$RXE_TRANSPORT" = siw ] || wait_for 100 gid_has_ip || { echo "rxe0 has no GID for $RXE_IP"; return 1; }
	test -c /dev/infiniband/rdma_cm || { echo "no /dev/infiniband/rdma_cm"; return 1; }
	test -r /sys/class/misc/rdma_cm/abi_version || { echo "no /sys/class/misc/rdma_cm/abi_version"; return 1; }
	ibv_devices | grep -qw "$DEV" || { echo "ibv_devices does not list $DEV"; ibv_devices; return 1; }
	rdma link show | grep -q "$DEV/1 state ACTIVE" || { echo "rdma link does not show $DEV ACTIVE"; rdma link show; return 1; }
	if [ -n "$WAIT_PEER" ]; then
		# Two-VM runs: the link is up once the peer answers.
		wait_for 600 busybox ping -c 1 -W 1 "$RXE_PEER_IP" || { echo "peer $RXE_PEER_IP does not answer"; return 1; }
		# The client starts once the server's command has started.
		wait_for 1200 test -e "$WAIT_PEER" || { echo "peer command did not start"; return 1; }
		sleep 1
	fi
}

# Where every user task waits: state, wchan and kernel stack, the end of the
# kernel log, then (slow under TCG: ~10 s each) gdb backtraces of the processes
# that are not shells, if gdb is installed. Written progressively.
dump_state() {
	local t pid n st wchan comm max=0 gdbs=()
	# Processes that exist now, not the ones this dump starts (or itself).
	for pid in /proc/[0-9]*; do ((${pid#/proc/} > max)) && max=${pid#/proc/}; done
	echo "=== tasks at the timeout: pid/tid state wchan comm (kernel stacks of non-shells)"
	for t in /proc/[0-9]*/task/[0-9]*; do
		pid=${t%/task/*} n=${pid#/proc/}
		((n <= max && n != BASHPID)) || continue
		[ -e "$pid/exe" ] || continue # kernel thread
		read -r st < "$t/stat" || continue
		st=${st##*) } wchan='' comm=''
		read -r wchan < "$t/wchan" || true
		read -r comm < "$t/comm" || true
		echo "$n/${t##*/} ${st%% *} $wchan $comm"
		is_shell "$comm" || sed 's/^/    /' "$t/stack" 2>/dev/null
		[ "${t##*/}" = "$n" ] && ! is_shell "$comm" && gdbs+=("$n") # for gdb, below
	done
	echo "=== kernel log since /init"
	dmesg | sed '1,/Run \/init/d' | grep -v 'speed is unknown' | tail -n 30
	command -v gdb >/dev/null || return 0
	for n in "${gdbs[@]}"; do
		[ -e "/proc/$n/exe" ] || continue
		echo "=== gdb: $n $(tr '\0' ' ' < "/proc/$n/cmdline")"
		timeout 20 gdb -p "$n" -batch -nx -ex 'thread apply all bt' 2>&1 | grep -E '^(Thread|#)'
	done
}
is_shell() { case $1 in init | bash | sh | dash | sleep | busybox | timeout | cat | tail | sed) true ;; *) false ;; esac; }

# The runner asks for dump_state (by creating dump-request) just before it
# stops the VM on a timeout.
# Looks once a second without starting a program (under TCG each `sleep`
# costs ~60 ms of CPU: 9% of a VM test's when this looked twice a second):
# bash's read timing out on a FIFO that nobody writes (procs.sh's nap too).
watch_for_dump_request() {
	local f=/tmp/rxe-vm-watch.$$ fd
	mkfifo "$f" && exec {fd}<>"$f" && rm -f "$f" || fd=''
	while [ ! -e "$S/dump-request" ]; do
		if [ -n "$fd" ]; then read -r -t 1 -u "$fd" _; else sleep 1; fi
	done
	dump_state > "$S/dump.txt" 2>&1
	: > "$S/dump.done"
}

if ! (setup) > "$S/setup.log" 2>&1; then
	cat "$S/setup.log"
	log "setup of $DEV failed"
	cp "$S/setup.log" "$S/setup-failed"
	exit 1
fi
: > "$S/started"
log "$DEV is up ($RXE_IP); running the command"
watch_for_dump_request & watcher=$!
# siw counts the memory a process registers against RLIMIT_MEMLOCK, even
# root's (rxe does not): 8 MiB by default, too little for e.g. fi_pingpong.
[ "$RXE_TRANSPORT" = siw ] && ulimit -l unlimited
# An iWARP id's port is a TCP port, and siw has no port mapper: the kernel
# picks a client id's port from the range TCP's ephemeral ports come from,
# and siw's bind fails (rdma_connect EADDRINUSE, both libraries) when a TCP
# socket without SO_REUSEADDR holds it, e.g. in TIME_WAIT for 60 s after
# fi_pingpong's control connection. With no TIME_WAIT sockets, a collision
# needs a TCP socket open at that moment. iwarp/cm_table's tcp_port_taken
# shows the collision itself.
[ "$RXE_TRANSPORT" = siw ] && sysctl -qw net.ipv4.tcp_max_tw_buckets=0

[ -z "$PROFILE" ] || python3 "$PROFILE" on /tmp/rxe-vm-acct >>"$S/output" 2>&1
env -i PATH="$PATH" HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb LANG=C.UTF-8 \
	RXE_DEV="$DEV" RXE_NETDEV=eth0 RXE_TRANSPORT="$RXE_TRANSPORT" RXE_IP="$RXE_IP" RXE_IP6="$RXE_IP6" \
	${RXE_PEER_IP:+RXE_PEER_IP="$RXE_PEER_IP"} ${RXE_PEER_IP6:+RXE_PEER_IP6="$RXE_PEER_IP6"} \
	RDMACM_IN_VM=1 \
	/bin/bash "$S/cmd.sh" </dev/null >>"$S/output" 2>&1
rc=$?
kill "$watcher" 2>/dev/null
if [ -n "$PROFILE" ]; then
	python3 "$PROFILE" sum /tmp/rxe-vm-acct >>"$S/output" 2>&1
	awk '$1 == "cpu" { printf "rxe-vm-profile: the guest: %d s user, %d s system, %d s idle\n", $2 / 100, ($4 + $7 + $8) / 100, $5 / 100 }' /proc/stat >>"$S/output"
fi
log "the command exited $rc"
echo "$rc" > "$S/rc.tmp"
mv "$S/rc.tmp" "$S/rc"
