#!/bin/bash
# The benchmarks with their real counts, rdma-core's library and ours side by
# side; prints their tables. Builds the tree first (scripts/build.sh), then runs
# each benchmark in its own Soft-RoCE VM boot (tests/vm/rxe-vm auto: natively
# where the host has an RDMA device). Numbers only, never a verdict: run it on
# a quiet host. Exits 1 if any benchmark failed (each says why), 2 on misuse.
#
#   scripts/bench.sh [--build DIR] [--ref] [NAME...]
#
#   NAME     connect_setup rsocket_stream preload_programs cm_costs rsocket_speed
#            conn_cycle conn_memory (the default: all seven; conn_memory's VM
#            has 10 GiB unless RDMACM_VM_MEM says), or one of cm_costs' parts:
#            cm_instructions cm_syscalls id_scale
#   --build DIR  the build tree (default: build)
#   --ref    preload_programs also runs rdma-core's preload (a third column,
#            which may fail: rdma-core 44's runs none of these programs)
#
#   scripts/bench.sh                            # all seven
#   scripts/bench.sh cm_costs rsocket_stream    # only those
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build REF=
ALL=(connect_setup rsocket_stream preload_programs cm_costs rsocket_speed conn_cycle conn_memory)
names=()
usage() { sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--build) [ $# -ge 2 ] || usage; BUILD=$2; shift ;;
	--ref) REF=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so ;;
	connect_setup | rsocket_stream | preload_programs | cm_costs | rsocket_speed | conn_cycle | conn_memory | \
		cm_instructions | cm_syscalls | id_scale)
		names+=("$1") ;;
	*) usage ;;
	esac
	shift
done
[ ${#names[@]} -gt 0 ] || names=("${ALL[@]}")
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac

echo "=== building $BUILD"
"$ROOT/scripts/build.sh" "$BUILD" || { echo "bench: the build failed" >&2; exit 1; }
LIB=$BUILD/src/librdmacm.so.1
PRELOAD=$BUILD/preload/librspreload.so
ID_SCALE=$BUILD/bench/id_scale

# The VM's time limit (seconds, boot included) of each benchmark at its
# default counts: generous, a limit only against a hang.
declare -A LIMIT=([connect_setup]=900 [rsocket_stream]=900 [preload_programs]=1800 [rsocket_speed]=1800
	[cm_costs]=3600 [cm_instructions]=2400 [cm_syscalls]=900 [id_scale]=900 [conn_cycle]=1500
	[conn_memory]=1800)

failed=()
for name in "${names[@]}"; do
	cmd=("$ROOT/bench/$name.sh" --lib "$LIB")
	[ "$name" != rsocket_speed ] || cmd[0]=$ROOT/bench/$name.py
	case $name in
	preload_programs)
		[ -f "$PRELOAD" ] || { echo "bench: $PRELOAD was not built" >&2; failed+=("$name"); continue; }
		cmd=("$ROOT/bench/$name.sh" --lib "$PRELOAD" --rdmacm "$LIB" ${REF:+--ref "$REF"}) ;;
	cm_costs | id_scale) cmd+=(--bin "$ID_SCALE") ;;
	rsocket_speed) cmd+=(--preload "$PRELOAD" --copies "$BUILD/bench/libsend_copies.so") ;;
	conn_cycle | conn_memory)  # socket programs under our preload (README's tables)
		[ -f "$PRELOAD" ] || { echo "bench: $PRELOAD was not built" >&2; failed+=("$name"); continue; }
		cmd=("$ROOT/bench/$name.sh" --bin "$BUILD/bench/$name" --lib "$PRELOAD" --rdmacm "$LIB")
		if [ "$name" = conn_cycle ]; then
			cmd+=(--cm-bin "$BUILD/bench/cm_cycle" --rounds 5)
		else
			cmd+=(--ref none --at "1,256,4096" --epoll --pings 200 --secs 300)
		fi ;;
	esac
	echo
	echo "=== $name: ${cmd[*]}"
	start=$SECONDS
	if [ "$name" = conn_memory ]; then
		RDMACM_VM_MEM=${RDMACM_VM_MEM:-10240} "$ROOT/tests/vm/rxe-vm" auto --timeout "${LIMIT[$name]}" -- "${cmd[@]}"
	else
		"$ROOT/tests/vm/rxe-vm" auto --timeout "${LIMIT[$name]}" -- "${cmd[@]}"
	fi
	rc=$?
	echo "=== $name: exit $rc, $((SECONDS - start)) s"
	[ "$rc" = 0 ] || failed+=("$name (exit $rc)")
done
echo
if [ ${#failed[@]} -gt 0 ]; then
	echo "=== bench: ${#failed[@]} of ${#names[@]} failed: ${failed[*]}"
	exit 1
fi
echo "=== bench: ${#names[@]} of ${#names[@]} ran"
