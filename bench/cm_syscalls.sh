#!/bin/bash
# System calls per connection, rdma-core's library and ours side by side in
# one run: rdma-core's own cmtime client under strace (its server runs
# normally), with SMALL and with LARGE connections, so that start-up cancels
# out: (count(LARGE) - count(SMALL)) / (LARGE - SMALL). Prints every system
# call that either library makes per connection, then the rdma_cm (ucma)
# commands among the writes, by name. Counts, not seconds: repeatable (but for
# cmtime's own sched_yield loop, shown apart).
#
#   bench/cm_syscalls.sh [--lib PATH] [--small N] [--large N] [--ours-only]
#
# --small 0 makes no start-up run (the figures then include start-up: only
# for bench.smoke). --ours-only traces only ours (rdma-core's column reads 0).
#
# Run it where there is an RDMA device, e.g. in the Soft-RoCE VM:
#   tests/vm/rxe-vm auto -- bench/cm_syscalls.sh --lib build/src/librdmacm.so.1
set -euo pipefail
# shellcheck source=bench/cmtime_pair.sh
. "$(dirname "$0")/cmtime_pair.sh"
LIB=$(dirname "$0")/../build/src/librdmacm.so.1
SYSLIB=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
SMALL=20 LARGE=60 NAMES='rdma-core ours'
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--small) SMALL=$2; shift ;;
	--large) LARGE=$2; shift ;;
	--ours-only) NAMES=ours ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
LIB=$(readlink -f "$LIB")
preloadable "$LIB" && preloadable "$SYSLIB" || exit 1
IP=${RXE_IP:?RXE_IP: the RDMA device address (set in the Soft-RoCE VM)}
for p in cmtime strace; do
	command -v $p >/dev/null || { echo "$p is missing" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
port=7800

# trace NAME PRELOAD N: one cmtime pair, the client under strace; leaves
# NAME.N.calls (name count per line) and NAME.N.ucma (command count per line).
trace() {
	local name=$1 preload=$2 n=$3
	[ "$n" != 0 ] || { : >"$out/$name.0.calls"; : >"$out/$name.0.ucma"; return; }
	port=$((port + 1))
	# -xx -s 4: each write's first four bytes, the ucma command number.
	cmtime_pair "$preload" "$port" "$n" "$out/$name.$n.log" 300 \
		strace -f -qq -xx -s 4 -o "$out/$name.$n.strace"
	# "PID  name(args) = result", possibly split by <unfinished ...>/<... resumed>.
	sed -En 's/^[0-9]+ +([a-z_0-9]+)\(.*/\1/p' "$out/$name.$n.strace" |
		sort | uniq -c | awk '{ print $2, $1 }' >"$out/$name.$n.calls"
	# The rdma_cm fds' writes: a ucma command header starts with the command
	# (u32, little-endian). -xx prints every string in hex, paths included.
	local path cm_fds
	path=$(printf /dev/infiniband/rdma_cm | od -An -tx1 | tr -d ' \n' | sed 's/../\\\\x&/g')
	cm_fds=$(sed -En "s/^[0-9]+ +openat\(.*\"$path\".*= ([0-9]+)$/\1/p" "$out/$name.$n.strace" | sort -u | paste -sd'|')
	# A client that connected made ucma commands: none found means the trace
	# was not read right, and the table would show zeros.
	grep -E "^[0-9]+ +write\((${cm_fds:-none}), \"" "$out/$name.$n.strace" >"$out/$name.$n.cmw" ||
		{ echo "cm_syscalls: no write to /dev/infiniband/rdma_cm in $name's trace ($n connections)" >&2; exit 1; }
	sed -E 's/.*write\([0-9]+, "\\x([0-9a-f]{2}).*/\1/' "$out/$name.$n.cmw" | sort | uniq -c | awk '{ print $2, $1 }' >"$out/$name.$n.ucma"
}

for f in calls ucma; do : >"$out/rdma-core.$SMALL.$f"; : >"$out/rdma-core.$LARGE.$f"; done  # (--ours-only)
for name in $NAMES; do
	preload=$SYSLIB
	[ $name = ours ] && preload=$LIB
	trace $name "$preload" "$SMALL"
	trace $name "$preload" "$LARGE"
done

commands=(CREATE_ID DESTROY_ID BIND_IP RESOLVE_IP RESOLVE_ROUTE QUERY_ROUTE CONNECT LISTEN ACCEPT
	REJECT DISCONNECT INIT_QP_ATTR GET_EVENT GET_OPTION SET_OPTION NOTIFY JOIN_IP_MCAST LEAVE_MCAST
	MIGRATE_ID QUERY BIND RESOLVE_ADDR JOIN_MCAST)

# table KIND LABEL: per-connection counts of every key either library has.
table() {
	local kind=$1 label=$2
	printf '%-44s %10s %10s\n' "$label" rdma-core ours
	awk -v n=$((LARGE - SMALL)) -v kind="$kind" -v names="${commands[*]}" '
		BEGIN { split(names, cmd, " "); for (i = 1; i < ARGC; i++) idx[ARGV[i]] = i }
		# (by name: an empty file, --small 0, has no first line to count)
		{ v[idx[FILENAME], $1] = $2; keys[$1] = 1 }
		END {
			for (k in keys) {
				a = (v[3, k] - v[1, k]) / n; b = (v[4, k] - v[2, k]) / n
				if (a < 0.05 && b < 0.05) continue
				# cmtime spins on sched_yield while it waits for events: the
				# count is its waiting time, not library work.
				if (k == "sched_yield") { printf "  %-42s %10.1f %10.1f\n", "(sched_yield: cmtime waiting, not counted)", a, b; continue }
				ta += a; tb += b
				label = k
				if (kind == "ucma") label = cmd[index("0123456789abcdef", substr(k, 1, 1)) * 16 - 16 + index("0123456789abcdef", substr(k, 2, 1))]
				printf "  %-42s %10.1f %10.1f\n", label, a, b
			}
			printf "  %-42s %10.1f %10.1f\n", "total", ta, tb
		}' "$out/rdma-core.$SMALL.$kind" "$out/ours.$SMALL.$kind" "$out/rdma-core.$LARGE.$kind" "$out/ours.$LARGE.$kind" |
		sort -k1,1 | awk '/total/ { t = $0; next } { print } END { print t }'
}
table calls "system calls per connection (cmtime client)"
echo
table ucma "ucma commands per connection"
