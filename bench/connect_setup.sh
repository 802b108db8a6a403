#!/bin/bash
# Connection setup step by step, rdma-core's library and ours side by side in
# the same run: rdma-core's own cmtime (server and client on this host's RDMA
# device, both sides on the same library), rounds alternating between the two
# libraries, each step's median over the rounds in microseconds per
# connection, and the client's peak resident memory. Numbers only, never a
# verdict: these machines are shared and noisy.
#
#   bench/connect_setup.sh [--lib PATH] [--conns N] [--rounds R]
#
# Run it where there is an RDMA device, e.g. in the Soft-RoCE VM:
#   tests/vm/rxe-vm auto -- bench/connect_setup.sh --lib build/src/librdmacm.so.1
set -euo pipefail
# shellcheck source=bench/cmtime_pair.sh
. "$(dirname "$0")/cmtime_pair.sh"
LIB=$(dirname "$0")/../build/src/librdmacm.so.1
SYSLIB=/usr/lib/x86_64-linux-gnu/librdmacm.so.1
CONNS=100 ROUNDS=3
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--conns) CONNS=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
LIB=$(readlink -f "$LIB")
preloadable "$LIB" && preloadable "$SYSLIB" || exit 1
LIB_SHOWN=$LIB
IP=${RXE_IP:?RXE_IP: the RDMA device address (set in the Soft-RoCE VM)}
command -v cmtime >/dev/null || { echo "cmtime (rdmacm-utils) is missing" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Both libraries run from copies in $out: in the Soft-RoCE VM the root is a 9p
# mount that the guest does not cache, so every first touch of a code page
# would be a round trip to the host, and a library four times the size of the
# other would pay four times as many (measured: "create id" 2.5x for ours from
# the root, the same as rdma-core's from copies). The copies sit in the page
# cache, as an installed library does on a real host.
cp "$LIB" "$out/lib-ours.so"
cp "$(readlink -f "$SYSLIB")" "$out/lib-rdma-core.so"
LIB=$out/lib-ours.so SYSLIB=$out/lib-rdma-core.so

# round NAME PRELOAD N PORT: one cmtime pair; the client's table in $out/NAME.N
round() {
	cmtime_pair "$2" "$4" "$CONNS" "$out/$1.$3" 120 /usr/bin/time -f 'maxrss_kb %M'
}

port=7600
for ((n = 1; n <= ROUNDS; n++)); do
	round rdma-core "$SYSLIB" "$n" $((port++))
	round ours "$LIB" "$n" $((port++))
done

# "step:value" lines per library (value: us / conn, last column of cmtime's
# table; maxrss in kB), then the median over the rounds.
medians() {
	cat "$out/$1".* | awk -F: '
		/^maxrss_kb/ { split($0, f, " "); print "peak RSS (kB):" f[2]; next }
		NF == 2 && $2 ~ /[0-9]/ { gsub(/ +$/, "", $1); n = split($2, f, " "); print $1 ":" f[n] }' |
		sort -t: -k1,1 -k2,2n | awk -F: '
		function flush() { if (n) print step ":" v[int((n + 1) / 2)] }
		$1 != step { flush(); step = $1; n = 0 }
		{ v[++n] = $2 }
		END { flush() }'
}
medians rdma-core >"$out/ref.med"
medians ours >"$out/ours.med"
# A client that exited 0 without its table of steps measured nothing: fail
# rather than print an empty table.
grep -qv '^peak RSS' "$out/ref.med" && grep -qv '^peak RSS' "$out/ours.med" ||
	{ echo "connect_setup: no step figures in cmtime's output:" >&2; cat "$out"/*.1 >&2; exit 1; }

echo "Connection setup, $CONNS connections x $ROUNDS rounds per library, median of rounds"
echo "(rdma-core's cmtime on both sides; us per connection; lower is better)"
printf '%-16s %12s %12s %8s\n' step rdma-core ours ours/ref
sort "$out/ref.med" >"$out/ref.sorted"
sort "$out/ours.med" >"$out/ours.sorted"
join -t: "$out/ref.sorted" "$out/ours.sorted" |
	awk -F: '{ r = ($2 > 0) ? sprintf("%.2f", $3 / $2) : "-"; printf "%-16s %12s %12s %8s\n", $1, $2, $3, r }'
echo "library: $LIB_SHOWN (reference $(readlink -f /usr/lib/x86_64-linux-gnu/librdmacm.so.1)), both run from copies"
