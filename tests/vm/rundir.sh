# shellcheck shell=bash
# rxe-vm's run directory ($TMPDIR/rxe-vm.XXXXXX, removed on exit) and the
# share each VM reads from it (/run/rxe-vm in the guest). Sourced by rxe-vm.

RUNDIR='' PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	if [ -n "${RDMACM_VM_KEEP:-}" ]; then
		msg "kept $RUNDIR"
	elif [ -n "$RUNDIR" ]; then
		rm -rf "$RUNDIR"
	fi
}

# Removes run directories left behind by runners that were killed with SIGKILL.
sweep_stale() {
	local d p
	for d in "$TMPBASE"/rxe-vm.*; do
		[ -f "$d/runner.pid" ] || continue
		read -r p < "$d/runner.pid" || continue
		kill -0 "$p" 2>/dev/null || rm -rf "$d"
	done
}

new_rundir() {
	sweep_stale
	RUNDIR=$(mktemp -d "$TMPBASE/rxe-vm.XXXXXX")
	echo $$ > "$RUNDIR/runner.pid"
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
}

# Writes the share of VM number $1 (0, 1): stage2.sh, vm.conf, cmd.sh.
# $2: peer VM's index or "", $3: a file of the peer's share (mounted at
# /run/rxe-vm-peer) to wait for before the command starts, or "". Then the command.
write_share() {
	local i=$1 peer=$2 wait=$3 share="$RUNDIR/share$1" kv n=0 d
	shift 3
	mkdir -p "$share"
	cp "$HERE/guest-stage2.sh" "$share/stage2.sh"
	{
		echo "RXE_IP=169.254.77.$((i + 1)) RXE_PREFIX=24 RXE_IP6=fd00:77::$((i + 1))"
		if [ -n "$peer" ]; then
			echo "RXE_PEER_IP=169.254.77.$((peer + 1)) RXE_PEER_IP6=fd00:77::$((peer + 1))"
		fi
		if [ -n "$wait" ]; then echo "WAIT_PEER=$wait"; fi
		if [ "$SIW" = 1 ]; then printf 'RXE_TRANSPORT=siw SIW_MODULES=%q\n' "$SIW_DIR"; fi
		if [ "${RDMACM_VM_PROFILE:-0}" = 1 ]; then printf 'PROFILE=%q\n' "$HERE/acct_summary.py"; fi
	} > "$share/vm.conf"
	{
		printf 'cd -- %q || exit 125\n' "$CWD"
		# gtest's own variables, and the tests' time scale for a slow host
		# (tests/common/time_scale.h), reach the command in the VM.
		while read -r kv; do printf 'export %q\n' "$kv"; done < <(env | grep -E '^(GTEST_[A-Za-z0-9_]*|RDMACM_TIME_SCALE)=' || true)
		for kv in "${ENVS[@]}"; do printf 'export %q\n' "$kv"; done
		printf 'exec'; printf ' %q' "$@"; printf '\n'
	} > "$share/cmd.sh"
	: > "$share/output"
	: > "$share/rw-mounts"
	for d in "${RWS[@]}"; do
		echo "rw$n $d" >> "$share/rw-mounts"
		n=$((n + 1))
	done
	if [ -n "$wait" ]; then echo "peer /run/rxe-vm-peer" >> "$share/rw-mounts"; fi
}
