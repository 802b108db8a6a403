#!/bin/bash
# User-space instructions per connection, rdma-core's library and ours side by
# side in one run: rdma-core's own cmtime client under callgrind (its server
# runs normally), once with SMALL and once with LARGE connections, so that
# start-up cancels out: (Ir(LARGE) - Ir(SMALL)) / (LARGE - SMALL), for the
# library's own object and for the whole client process (but cmtime's own
# code, which spins while it waits), for the library's calls as the program
# pays for them (each call from cmtime into the library with everything it
# runs in user space: libc's malloc, libibverbs; rdma-core's library leaves
# more of its work to libc than ours, which keeps ids and events in pools of
# its own), then ours' top functions. Instruction counts, not seconds:
# repeatable on a busy machine.
# By default 50 and 250 connections, the measurement issue 15 set the goals
# with (the whole client's figure moves a few percent with fewer).
#
#   bench/cm_instructions.sh [--lib PATH] [--small N] [--large N] [--top K] [--keep DIR] [--ours-only]
#
# --ours-only profiles only ours (rdma-core's column reads 0): bench.smoke's.
# --keep DIR leaves the callgrind profiles there (NAME.N.cg) for callgrind_annotate.
# --small 0 makes no start-up run (an empty profile stands for it), so the
# figures then include start-up: only for bench.smoke, where each callgrind
# run costs 11-21 s under TCG.
#
# Run it where there is an RDMA device, e.g. in the Soft-RoCE VM:
#   tests/vm/rxe-vm auto -- bench/cm_instructions.sh --lib build/src/librdmacm.so.1
set -euo pipefail
# shellcheck source=bench/cmtime_pair.sh
. "$(dirname "$0")/cmtime_pair.sh"
LIB=$(dirname "$0")/../build/src/librdmacm.so.1
SYSLIB=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
SMALL=50 LARGE=250 TOP=12 KEEP= NAMES='rdma-core ours'
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--small) SMALL=$2; shift ;;
	--large) LARGE=$2; shift ;;
	--top) TOP=$2; shift ;;
	--keep) KEEP=$2; shift ;;
	--ours-only) NAMES=ours ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
LIB=$(readlink -f "$LIB")
preloadable "$LIB" && preloadable "$SYSLIB" || exit 1
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
	[ "$n" != 0 ] || { : >"$out/$name.0.cg"; return; }
	port=$((port + 1))
	cmtime_pair "$preload" "$port" "$n" "$out/$name.$n.log" 600 \
		valgrind --tool=callgrind --callgrind-out-file="$out/$name.$n.cg"
}

# Callgrind's name compression, for the readers below: "(id) name" the first
# time, "(id)" after; the names neither reader uses are only recorded.
CG_NAMES='
	function name(kind, s,   id) {
		if (match(s, /^\([0-9]+\)/)) {
			id = substr(s, 2, RLENGTH - 2)
			if (length(s) > RLENGTH) tab[kind, id] = substr(s, RLENGTH + 2)
			return tab[kind, id]
		}
		return s
	}
	/^cfn=/ { name("fn", substr($0, 5)); next }
	/^(fl|fi|fe)=/ { name("fl", substr($0, 4)); next }
	/^(cfi|cfl)=/ { name("fl", substr($0, 5)); next }'

# self_costs FILE: "Ir<TAB>object<TAB>function" for every function, read from
# the profile itself (callgrind_annotate names code inlined from a header by
# the header's file and without its object, so summing its lines by object
# misses every inlined template: a third of ours).
self_costs() {
	awk "$CG_NAMES"'
	skip { skip = 0; next }
	/^ob=/ { ob = name("ob", substr($0, 4)); next }
	/^cob=/ { name("ob", substr($0, 5)); next }
	/^fn=/ { fn = name("fn", substr($0, 4)); next }
	/^calls=/ { skip = 1; next }  # the next line is the callee'"'"'s inclusive cost
	/^[0-9+*-]/ { cost[ob "\t" fn] += $2 }
	END { for (k in cost) print cost[k] "\t" k }' "$1"
}

# calls FILE OBJECT: instructions inside the calls cmtime makes into OBJECT,
# callees included (the profile's inclusive cost of each such call).
calls() {
	awk -v lib="$2" "$CG_NAMES"'
	/^ob=/ { ob = name("ob", substr($0, 4)); cob = ""; next }
	/^fn=/ { name("fn", substr($0, 4)); cob = ""; next }
	/^cob=/ { cob = name("ob", substr($0, 5)); next }
	/^calls=/ { call = 1; next }
	call {  # the call'"'"'s inclusive cost; the callee is in cob, or in ob if none was named
		call = 0
		if (ob ~ /\/cmtime$/ && index(cob != "" ? cob : ob, lib)) s += $2
		cob = ""
	}
	END { print s + 0 }' "$1"
}

# total FILE [OBJECT]: instructions of one object, or of the whole process
# but cmtime's own code and sched_yield (its main thread spins on sched_yield
# while it waits for events: that count is time, not work).
total() {
	self_costs "$1" | awk -F'\t' -v obj="${2:-}" '
		obj != "" && !index($2, obj) { next }
		obj == "" && ($2 ~ /\/cmtime$/ || $3 ~ /sched_yield/) { next }
		{ s += $1 }
		END { print s + 0 }'
}

: >"$out/rdma-core.$SMALL.cg"; : >"$out/rdma-core.$LARGE.cg"  # (--ours-only)
for name in $NAMES; do
	preload=$SYSLIB
	[ $name = ours ] && preload=$LIB
	profile $name "$preload" "$SMALL"
	profile $name "$preload" "$LARGE"
done

declare -A v
per_conn() { awk -v a="$1" -v b="$2" -v n=$((LARGE - SMALL)) 'BEGIN { printf "%.0f", (b - a) / n }'; }
printf '%-44s %12s %12s %8s\n' "instructions per connection (cmtime client)" rdma-core ours ratio
for what in library calls process; do
	for name in rdma-core ours; do
		obj=$(basename "$( [ $name = ours ] && echo "$LIB" || readlink -f "$SYSLIB")")
		if [ $what = library ]; then
			a=$(total "$out/$name.$SMALL.cg" "$obj"); b=$(total "$out/$name.$LARGE.cg" "$obj")
		elif [ $what = calls ]; then
			a=$(calls "$out/$name.$SMALL.cg" "$obj"); b=$(calls "$out/$name.$LARGE.cg" "$obj")
		else
			a=$(total "$out/$name.$SMALL.cg"); b=$(total "$out/$name.$LARGE.cg")
		fi
		v[$name]=$(per_conn "$a" "$b")
		# No instructions in the library's object: the profile is not of it.
		[ $what != library ] || [ "$b" != 0 ] || [[ " $NAMES " != *" $name "* ]] ||
			{ echo "cm_instructions: no instructions of $obj in $name's profile" >&2; exit 1; }
	done
	printf '%-44s %12s %12s %7sx\n' "$what" "${v[rdma-core]}" "${v[ours]}" \
		"$(awk -v a="${v[rdma-core]}" -v b="${v[ours]}" 'BEGIN { printf "%.2f", a ? b / a : 0 }')"
done
echo
echo "ours: top functions, instructions per connection (self, inlined code included)"
# (temporary files, not <(...): the VM has no /dev/fd)
for n in "$SMALL" "$LARGE"; do
	self_costs "$out/ours.$n.cg" | { grep -F "$(basename "$LIB")" || :; } |
		awk -F'\t' '{ print $3 "\t" $1 }' | sort -t "$(printf '\t')" -k1,1 >"$out/ours.$n.fn"
done
join -t "$(printf '\t')" -a 2 -e 0 -o 2.1,1.2,2.2 "$out/ours.$SMALL.fn" "$out/ours.$LARGE.fn" |
	awk -F'\t' -v n=$((LARGE - SMALL)) '{ printf "%8.0f  %s\n", ($3 - $2) / n, $1 }' |
	sort -rn | sed -n "1,${TOP}p"
