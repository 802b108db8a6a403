#!/bin/bash
# User-space instructions per connection, rdma-core's library and ours side by
# side in one run: rdma-core's own cmtime client under callgrind (its server
# runs normally), once with SMALL and once with LARGE connections, so that
# start-up cancels out: (Ir(LARGE) - Ir(SMALL)) / (LARGE - SMALL), for the
# library's own object and for the whole client process (but cmtime's own
# code, which spins while it waits), then ours' top functions. Instruction counts, not seconds: repeatable on a busy machine.
#
#   bench/cm_instructions.sh [--lib PATH] [--small N] [--large N] [--top K] [--keep DIR]
#
# --keep DIR leaves the callgrind profiles there (NAME.N.cg) for callgrind_annotate.
#
# Run it where there is an RDMA device, e.g. in the Soft-RoCE VM:
#   tests/vm/rxe-vm auto -- bench/cm_instructions.sh --lib build/src/librdmacm.so.1
set -euo pipefail
# shellcheck source=bench/cmtime_pair.sh
. "$(dirname "$0")/cmtime_pair.sh"
LIB=$(dirname "$0")/../build/src/librdmacm.so.1
SYSLIB=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
SMALL=20 LARGE=60 TOP=12 KEEP=
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--small) SMALL=$2; shift ;;
	--large) LARGE=$2; shift ;;
	--top) TOP=$2; shift ;;
	--keep) KEEP=$2; shift ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
LIB=$(readlink -f "$LIB")
IP=${RXE_IP:?RXE_IP: the RDMA device address (set in the Soft-RoCE VM)}
for p in cmtime valgrind callgrind_annotate; do
	command -v $p >/dev/null || { echo "$p is missing" >&2; exit 1; }
done
out=$(mktemp -d)
trap '[ -z "$KEEP" ] || cp "$out"/*.cg "$KEEP"/; rm -rf "$out"' EXIT
port=7700

# profile NAME PRELOAD N: one cmtime pair, the client under callgrind.
profile() {
	local name=$1 preload=$2 n=$3
	port=$((port + 1))
	cmtime_pair "$preload" "$port" "$n" "$out/$name.$n.log" 600 \
		valgrind --tool=callgrind --callgrind-out-file="$out/$name.$n.cg"
}

# total FILE [OBJECT]: instructions of one object's functions, or of the whole
# process but cmtime's own code and sched_yield (its main thread spins on
# sched_yield while it waits for events: that count is time, not work).
total() {
	callgrind_annotate --auto=no --threshold=100 "$1" | awk -v obj="${2:-}" '
		!/\[[^]]*\][ \t]*$/ { next }
		obj != "" && !index($0, obj) { next }
		obj == "" && (/\/cmtime\][ \t]*$/ || /sched_yield/) { next }
		{ gsub(/,/, "", $1); s += $1 }
		END { print s + 0 }'
}

for name in rdma-core ours; do
	preload=$SYSLIB
	[ $name = ours ] && preload=$LIB
	profile $name "$preload" "$SMALL"
	profile $name "$preload" "$LARGE"
done

declare -A v
per_conn() { awk -v a="$1" -v b="$2" -v n=$((LARGE - SMALL)) 'BEGIN { printf "%.0f", (b - a) / n }'; }
printf '%-44s %12s %12s %8s\n' "instructions per connection (cmtime client)" rdma-core ours ratio
for what in library process; do
	for name in rdma-core ours; do
		obj=$(basename "$( [ $name = ours ] && echo "$LIB" || readlink -f "$SYSLIB")")
		if [ $what = library ]; then
			a=$(total "$out/$name.$SMALL.cg" "$obj"); b=$(total "$out/$name.$LARGE.cg" "$obj")
		else
			a=$(total "$out/$name.$SMALL.cg"); b=$(total "$out/$name.$LARGE.cg")
		fi
		v[$name]=$(per_conn "$a" "$b")
	done
	printf '%-44s %12s %12s %7sx\n' "$what" "${v[rdma-core]}" "${v[ours]}" \
		"$(awk -v a="${v[rdma-core]}" -v b="${v[ours]}" 'BEGIN { printf "%.2f", a ? b / a : 0 }')"
done
echo
echo "ours: top functions over $LARGE connections (Ir, self)"
callgrind_annotate --auto=no --threshold=100 "$out/ours.$LARGE.cg" | grep "$(basename "$LIB")" | sed -n "1,${TOP}p"
