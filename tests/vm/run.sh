# shellcheck shell=bash
# `rxe-vm run`: one VM. Sourced by rxe-vm (`run2` is in run2.sh).

# cpu_of PID: the CPU seconds process PID has used so far (empty once it is
# gone). With the wall time it tells how much of a test waits: an idle TCG
# guest costs no CPU. No program started: it runs every 0.2 s.
CLK_TCK=$(getconf CLK_TCK)
cpu_of() {
	local f
	read -r -a f 2>/dev/null < "/proc/$1/stat" || return 0
	echo $(((f[13] + f[14]) / CLK_TCK))
}

cmd_run() {
	parse_opts "$@"
	[ ${#ARGS[@]} -gt 0 ] || usage
	local t0 tb='' reason='' rc s0 boot0 attempt qpid
	prepare
	t0=$(now) s0=$SECONDS cpu=
	# A guest that shows no sign of life within BOOT_TIMEOUT (seen once under
	# TCG: an empty console, nothing from qemu) gets one more boot. The
	# command's TIMEOUT still counts from the first start.
	for attempt in 1 2; do
		[ "$attempt" = 1 ] || { rm -rf "$RUNDIR"; reason=''; }
		new_rundir
		write_share 0 "" "" "${ARGS[@]}"
		start_vm 0 "hubport,id=n0,hubid=0"
		qpid=$QPID boot0=$SECONDS
		stream "$RUNDIR/share0/output" "" "$qpid"
		while alive "$qpid"; do
			c=$(cpu_of "$qpid") && [ -n "$c" ] && cpu=$c
			if [ -z "$tb" ] && [ -e "$RUNDIR/share0/started" ]; then
				tb=$(since "$t0")
			fi
			if [ -z "$tb" ] && ((SECONDS - boot0 >= BOOT_TIMEOUT)); then
				reason=boot; break
			fi
			if ((SECONDS - s0 >= TIMEOUT)); then
				reason=timeout
				request_dumps 0
				break
			fi
			sleep 0.2
		done
		[ -n "$reason" ] && kill -KILL "$qpid" 2>/dev/null
		wait "$qpid" 2>/dev/null || true
		wait "$STREAM_PID" 2>/dev/null || true
		[ "$reason" = boot ] && [ "$attempt" = 1 ] || break
		msg "VM did not come up within $BOOT_TIMEOUT s; booting it once more"
		diagnose 0
	done
	case $reason in
	timeout)
		msg "timed out after $TIMEOUT s; killed the VM"
		diagnose 0
		exit 124 ;;
	boot)
		msg "VM did not come up within $BOOT_TIMEOUT s; killed it"
		diagnose 0
		exit 125 ;;
	esac
	rc=$(vm_status 0)
	if [ -f "$RUNDIR/share0/rc" ]; then
		msg "$([ "$SIW" = 1 ] && echo siw0 || echo rxe0) up after $tb s, command exited $rc, $(since "$t0") s in all, ${cpu:-?} s of CPU"
	else
		msg "no exit status from the VM, $(since "$t0") s in all"
	fi
	[ "$VERBOSE" = 1 ] && tr -d '\r' < "$RUNDIR/console0.log" >&2
	exit "$rc"
}
