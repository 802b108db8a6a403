# shellcheck shell=bash
# `rxe-vm run2`: sourced by rxe-vm (uses its functions and variables).
#
#   rxe-vm run2 [--timeout S] [--cwd DIR] [--env K=V]... [--rw DIR]...
#               --server 'SHELL COMMAND' --client 'SHELL COMMAND'
#
# Two VMs joined by a virtual wire (a qemu "stream" netdev over a unix socket in
# the run directory, so concurrent runs never compete for ports): real
# cross-host RoCE. The server VM is 169.254.77.1, the client 169.254.77.2; each
# sees the other as RXE_PEER_IP (RXE_PEER_IP6). Both commands run with bash -c.
# The client's command starts once the peer answers ping and the server's
# command has been running for a second. When the client's VM has ended, the
# server gets RDMACM_VM_GRACE seconds (default 10) to finish, then its VM is
# stopped (that alone is not a failure: many servers never exit).
# Exit status: the client's if non-zero, else the server's; 124 on timeout,
# 125 if a VM could not be brought up. A client that powers its VM off
# (echo o > /proc/sysrq-trigger) simulates a host failure; its status is then 125.

GRACE=${RDMACM_VM_GRACE:-10}

# True while VM $1 (process $2) runs but its command has not started.
booting() { alive "$2" && [ ! -e "$RUNDIR/share$1/started" ]; }

cmd_run2() {
	parse_opts "$@"
	[ -n "$SERVER_CMD" ] && [ -n "$CLIENT_CMD" ] && [ ${#ARGS[@]} -eq 0 ] || usage
	local t0 s0 reason='' cdone='' lingering='' sock i rc0 rc1
	prepare
	t0=$(now) s0=$SECONDS
	new_rundir
	sock="$RUNDIR/wire.sock"
	write_share 0 1 "" bash -c "$SERVER_CMD"
	write_share 1 0 /run/rxe-vm-peer/started bash -c "$CLIENT_CMD"

	start_vm 0 "stream,id=n0,server=on,addr.type=unix,addr.path=$sock"
	local spid=$QPID
	# The client's qemu connects when it starts: the server's socket must exist.
	for i in $(seq 100); do
		[ -S "$sock" ] || ! alive "$spid" && break
		sleep 0.1
	done
	if [ ! -S "$sock" ]; then
		diagnose 0
		die "the server VM did not open its socket"
	fi
	start_vm 1 "stream,id=n0,server=off,addr.type=unix,addr.path=$sock" "$RUNDIR/share0"
	local cpid=$QPID
	stream "$RUNDIR/share0/output" "[server] " "$spid"
	local out0=$STREAM_PID
	stream "$RUNDIR/share1/output" "[client] " "$cpid"
	local out1=$STREAM_PID

	while alive "$spid" || alive "$cpid"; do
		if ! alive "$cpid"; then
			cdone=${cdone:-$SECONDS}
			if ((SECONDS - cdone >= GRACE)); then lingering=1; break; fi
		fi
		if ! alive "$spid" && [ ! -e "$RUNDIR/share0/started" ]; then
			reason=server; break
		fi
		if ((SECONDS - s0 >= BOOT_TIMEOUT)) && { booting 0 "$spid" || booting 1 "$cpid"; }; then
			reason=boot; break
		fi
		if ((SECONDS - s0 >= TIMEOUT)); then
			reason=timeout
			request_dumps 0 1
			break
		fi
		sleep 0.2
	done
	kill -KILL "$spid" "$cpid" 2>/dev/null || true
	wait "$spid" "$cpid" 2>/dev/null || true
	wait "$out0" "$out1" 2>/dev/null || true

	case $reason in
	timeout) msg "timed out after $TIMEOUT s; killed both VMs"; diagnose 0; diagnose 1; exit 124 ;;
	boot) msg "a VM did not come up within $BOOT_TIMEOUT s; killed both"; diagnose 0; diagnose 1; exit 125 ;;
	server) msg "the server VM ended before its command started"; diagnose 0; exit 125 ;;
	esac
	if [ -n "$lingering" ] && [ ! -f "$RUNDIR/share0/rc" ]; then
		msg "server still running $GRACE s after the client ended; stopped it"
		rc0=0
	else
		rc0=$(vm_status 0)
	fi
	rc1=$(vm_status 1)
	msg "server exited $rc0, client exited $rc1, $(since "$t0") s in all"
	if [ "$VERBOSE" = 1 ]; then
		for i in 0 1; do msg "console of VM$i:"; tr -d '\r' < "$RUNDIR/console$i.log" >&2; done
	fi
	if [ "$rc1" != 0 ]; then exit "$rc1"; fi
	exit "$rc0"
}
