# shellcheck shell=bash
# rxe-vm's native mode: a host with an RDMA device runs `auto` and
# `prepare --unless-native` without a VM. Sourced by rxe-vm.

native_ok() {
	[ -c /dev/infiniband/rdma_cm ] && [ -r /dev/infiniband/rdma_cm ] || return 1
	[ -d /sys/class/infiniband ] && [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ] || return 1
	# --siw wants an iWARP device (node type RNIC).
	[ "$SIW" = 0 ] || [ -n "$(native_iwarp)" ]
}

native_iwarp() {
	local d
	for d in /sys/class/infiniband/*; do
		grep -q RNIC "$d/node_type" 2>/dev/null && { basename "$d"; return; }
	done
}

# Exports RXE_DEV, RXE_NETDEV, RXE_IP for the host's first RDMA device (unless already set).
native_env() {
	local dev ndev ip
	if [ "$SIW" = 1 ]; then
		dev=${RXE_DEV:-$(native_iwarp)}
	else
		dev=${RXE_DEV:-$(ls /sys/class/infiniband | head -n 1)}
	fi
	ndev=${RXE_NETDEV:-$(cat "/sys/class/infiniband/$dev/ports/1/gid_attrs/ndevs/0" 2>/dev/null || true)}
	ip=${RXE_IP:-$(ip -4 -o addr show dev "$ndev" 2>/dev/null | awk '{ sub("/.*", "", $4); print $4; exit }')}
	export RXE_DEV="$dev" RXE_NETDEV="$ndev" RXE_IP="$ip"
}

cmd_auto() {
	parse_opts "$@"
	[ ${#ARGS[@]} -gt 0 ] || usage
	if [ -z "${RDMACM_VM_FORCE:-}" ] && native_ok; then
		native_env
		cd "$CWD" || exit
		local kv
		for kv in "${ENVS[@]}"; do export "${kv?}"; done
		msg "host has RDMA ($RXE_DEV); running natively"
		exec timeout -k 10 "$TIMEOUT" "${ARGS[@]}"
	fi
	exec "$SELF" run "$@"
}
