# shellcheck shell=bash
# rxe-vm's qemu: starting a VM, streaming its output, asking it for a dump
# of its tasks, and its exit status (or why it gave none). Sourced by rxe-vm.

# Starts VM number $1 in the background with the -netdev $2; sets QPID.
# $3 (optional): the peer VM's share, mounted read-only at /run/rxe-vm-peer.
start_vm() {
	local i=$1 netdev=$2 peer=${3:-} share="$RUNDIR/share$1" n=0 d
	local args=(
		-name "rxe-vm$i" -machine pc -accel tcg -cpu "$VM_CPU_MODEL" -smp "$VM_CPUS" -m "$VM_MEM"
		-nodefaults -no-user-config -display none -no-reboot
		-kernel "$KERNEL" -initrd "$INITRD"
		# no_timer_check: under TCG on a loaded host the kernel's check of the
		# IO-APIC timer can miss its ticks and panic ("IO-APIC + timer doesn't
		# work!", seen at load 16 on 2 cores); the timer itself works.
		-append "console=ttyS0 quiet panic=-1 no_timer_check rdinit=/init ${RDMACM_VM_APPEND:-}"
		-serial "file:$RUNDIR/console$i.log"
		-netdev "$netdev"
		-device "virtio-net-pci,netdev=n0,mac=52:54:00:4d:00:0$((i + 1)),romfile="
	)
	# 9p shares: the host root (read-only), the run share, then the --rw directories.
	local tags=(hostroot share) paths=(/ "$share") ro=(on off)
	for d in "${RWS[@]}"; do tags+=("rw$n"); paths+=("$d"); ro+=(off); n=$((n + 1)); done
	if [ -n "$peer" ]; then tags+=(peer); paths+=("$peer"); ro+=(on); fi
	for n in "${!tags[@]}"; do
		args+=(-fsdev "local,id=fs$n,path=${paths[n]},security_model=none,readonly=${ro[n]},multidevs=remap"
			-device "virtio-9p-pci,fsdev=fs$n,mount_tag=${tags[n]}")
	done
	# qemu links librdmacm: keep the caller's library overrides away from it.
	# pdeathsig: qemu dies with this runner even if the runner is SIGKILLed.
	env -u LD_PRELOAD -u LD_LIBRARY_PATH setpriv --pdeathsig KILL \
		qemu-system-x86_64 "${args[@]}" </dev/null >"$RUNDIR/qemu$i.log" 2>&1 &
	QPID=$!
	PIDS+=("$QPID")
}

alive() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	[ "${s:0:1}" != Z ]
}

# Streams file $1 to stdout, lines prefixed by $2, while process $3 lives.
stream() {
	if [ -n "$2" ]; then
		tail -s 0.2 -n +1 -F --pid="$3" "$1" 2>/dev/null | sed -u "s/^/$2/" &
	else
		tail -s 0.2 -n +1 -F --pid="$3" "$1" 2>/dev/null &
	fi
	PIDS+=("$!")
	# shellcheck disable=SC2034 # for run.sh and run2.sh
	STREAM_PID=$!
}

# On a timeout: asks the VMs $@ to describe their tasks (guest-stage2.sh's
# dump_state), and waits a little for it.
request_dumps() {
	local i n waiting
	for i in "$@"; do : > "$RUNDIR/share$i/dump-request"; done
	for ((n = 0; n < DUMP_WAIT * 5; n++)); do
		waiting=0
		for i in "$@"; do
			local sh="$RUNDIR/share$i"
			if [ -e "$sh/started" ] && [ ! -e "$sh/rc" ] && [ ! -e "$sh/dump.done" ]; then waiting=1; fi
		done
		[ "$waiting" = 1 ] || break
		sleep 0.2
	done
}

# Prints why VM $1 did not give an exit status.
diagnose() {
	local i=$1 share="$RUNDIR/share$1"
	if [ -f "$share/init-failed" ]; then
		msg "VM$i: init failed: $(cat "$share/init-failed")"
	elif [ -f "$share/setup-failed" ]; then
		msg "VM$i: rxe0 setup failed:"
		sed 's/^/  /' "$share/setup-failed" >&2
	elif [ ! -f "$share/started" ]; then
		msg "VM$i: did not boot"
	fi
	if grep -qv 'hub 0 is not connected' "$RUNDIR/qemu$i.log" 2>/dev/null; then
		msg "VM$i: qemu said:"
		grep -v 'hub 0 is not connected' "$RUNDIR/qemu$i.log" | tail -n 20 | sed 's/^/  /' >&2
	fi
	if [ -s "$share/dump.txt" ]; then
		msg "VM$i: the state of its tasks when the time was up:"
		cat "$share/dump.txt" >&2
	fi
	msg "VM$i: last lines of the serial console:"
	tail -n 40 "$RUNDIR/console$i.log" 2>/dev/null | tr -d '\r' | sed 's/^/  /' >&2
}

# Exit status of VM $1's command, or 125 after a diagnosis.
vm_status() {
	local rc
	if read -r rc 2>/dev/null < "$RUNDIR/share$1/rc" && [[ $rc =~ ^[0-9]+$ ]]; then
		echo "$rc"
	else
		diagnose "$1"
		echo 125
	fi
}
