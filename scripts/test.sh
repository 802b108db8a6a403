#!/bin/bash
# The whole suite. The normal build and its tests first, so that they fail
# early; then the VM tests start, and the sanitizer phases run beside them:
#   host    the normal build; its tests that need no RDMA device (unit, ABI,
#           layering, thread-safety fixture, manual, install, package)
#   rxe     the Soft-RoCE integration tests on the normal build and on the
#           sanitized one (in VMs, two at a time, or natively on an RDMA host)
#   asan    the unit binaries and the inline-ABI tests under AddressSanitizer
#           and UBSan (its tree is also rxe.sanitized's: that VM test waits
#           for it, tests/await_build.sh)
#   tsan    the unit binaries under ThreadSanitizer (run whole)
#   fuzz    the libFuzzer targets, 20 s each from the committed corpus; their
#           clang build of the library's objects is also the thread-safety
#           check (RDMACM_THREAD_SAFETY: -Wthread-safety, as errors)
# The sanitizer trees build at the lowest priority (`lowest`): they take the
# CPU that the VMs leave idle (a VM test waits a quarter of its time: timeouts,
# peers) instead of a phase of their own (~480 s on this 2-core machine). Their
# tests run at normal priority with RDMACM_TIME_SCALE=2 (tests/common/
# time_scale.h: a loaded host).
# Ends with every FLAKY, RETRY and FORGIVEN line of the run (tests/FLAKY.md
# says what they mean) and fails if any phase failed or more than three cases
# needed a rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
logs=$PWD/build/suite-logs
phases=() failed=() rxe_group=''

# phase NAME / phase_done [STATUS]: each phase's wall time, for the summary.
phase() { PHASE=$1 T0=$(date +%s); echo "=== phase $1"; }
phase_done() {
	local how=''
	[ "${1:-0}" = 0 ] || { how=' (failed)'; failed+=("$PHASE"); }
	phases+=("$(printf '%-6s %5d s, from %4d s%s' "$PHASE" $(($(date +%s) - T0)) $((T0 - start)) "$how")")
	PHASE=''
}
# lowest CMD...: CMD at the lowest priority: nice 19 in a session of its own
# whose autogroup is set to nice 19 too. With the kernel's autogroups on
# (sched_autogroup_enabled, the default on these machines) nice only ranks
# the processes of one session: the VM tests run in a session of their own
# (setsid, below), and against it a niced build in this script's session
# still took half of the CPU (measured: the VM tests 10-15% slower while the
# builds ran, the run 1,604-1,700 s).
lowest() {
	setsid -w bash -c 'echo 19 > /proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' lowest "$@"
}
# keep_log BUILD NAME: ctest's full log (every test's output), for the summary.
keep_log() { cp "$1/Testing/Temporary/LastTest.log" "$logs/$2.log" 2>/dev/null || true; }
# unit_whole BUILD: both unit binaries, whole (one process each: under a
# sanitizer one process per TEST costs ~10x), with ctest's time limits.
unit_whole() {
	local b=$1 t rc=0
	for t in unit_tests:20 unit_device_tests:10; do
		echo "--- $b/tests/unit/${t%:*}"
		RDMACM_TEST_TIMEOUT=${t#*:} timeout 900 "$b/tests/unit/${t%:*}" --gtest_brief=1 \
			2>&1 | tee "$logs/$(basename "$b")-${t%:*}.log" || rc=1
	done
	return $rc
}
summary() {
	local rc=$? n
	set +e
	[ -z "${PHASE:-}" ] || phases+=("$(printf '%-6s %5d s (failed)' "$PHASE" $(( $(date +%s) - T0 )))")
	# A failure outside the phases (the host build, the VM's preparation)
	# leaves the VM tests nothing to wait for.
	[ -z "$rxe_group" ] || kill -TERM -- "-$rxe_group" 2>/dev/null
	echo
	echo "=== phases"
	printf '  %s\n' "${phases[@]}"
	echo "=== FLAKY, RETRY and FORGIVEN lines of this run (tests/FLAKY.md)"
	grep -hE '^[[:space:]]*(FLAKY|RETRY|FORGIVEN) ' "$logs"/*.log 2>/dev/null | sed 's/^[[:space:]]*/  /' | sort -u > "$logs/reruns"
	if [ -s "$logs/reruns" ]; then cat "$logs/reruns"; else echo "  (none)"; fi
	n=$(grep -c '^  FLAKY ' "$logs/reruns")
	if [ "$rc" = 0 ] && [ "$n" -gt 3 ]; then
		echo "test.sh: $n cases needed a rerun (more than 3): the run is red"
		rc=1
	fi
	echo "test.sh: $([ "$rc" = 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
	exit "$rc"
}
trap summary EXIT

scripts/deps.sh
mkdir -p "$logs" && rm -f "$logs"/*.log "$logs/reruns" "$logs"/rxe.*
# The VM's kernel cache is made while the normal tree builds, then siw.ko
# (Soft-iWARP, rxe.siw_smoke). A failed siw build fails only the siw tests:
# their fixture, rxe.vm.prepare_siw, tries again and reports.
{ tests/vm/rxe-vm prepare && { tests/vm/rxe-vm prepare --siw || true; }; } > "$logs/vm-prepare.out" 2>&1 & prepare=$!

phase host
# The sanitized tree's VM test runs from this tree's ctest (tests/CMakeLists.txt).
scripts/build.sh build -DRDMACM_SANITIZED_TREE="$PWD/build-asan"
(cd build && ctest --output-on-failure -j2 -LE 'rxe|bench') || { keep_log build host; false; }
keep_log build host
phase_done

wait "$prepare" || { cat "$logs/vm-prepare.out"; false; }
# The VM tests, in a session (process group) of their own (stopped with it if this
# script ends early), their output as it comes with "[rxe] " before each line.
# Fixture setups that the host phase ran already (the package) are not rerun.
# Two VMs side by side, one virtual CPU each (tests/vm/RxeTests.cmake): two at
# a time took 1,198 s where one at a time took 1,687 s (measured on this 2-core
# machine with two CPUs per VM, all passing, no reruns); the longest start
# first (COST). rxe.sanitized (the integration tests and rdma-core's tools
# over the sanitized library, built in build-asan) is one of them: it waits
# for the asan phase's build (RDMACM_AWAIT_BUILDS, tests/await_build.sh).
mkdir -p build-asan && rm -f build-asan/.build-status
rxe_t0=$(date +%s)
RDMACM_AWAIT_BUILDS=1 setsid bash -c 'echo $$ > "$0/rxe.pgid"; cd build &&
	ctest --output-on-failure -j2 -L "rxe|bench" -LE reference -FS rdmacm_deb; echo $? > "$0/rxe.rc"' "$logs" \
	2>&1 | sed -u 's/^/[rxe] /' &
rxe_pipe=$!
for _ in $(seq 100); do [ -s "$logs/rxe.pgid" ] && break; sleep 0.1; done
rxe_group=$(cat "$logs/rxe.pgid")

phase asan
# build-asan/.build-status: what rxe.sanitized waits for (ok or failed).
if lowest scripts/build.sh build-asan -DRDMACM_SANITIZE=ON --target unit_tests unit_device_tests \
	rdmacm_abi_inline_test rdmacm rxe_tests rxe_1_4_tests rxe_rsocket_tests misuse_table; then
	echo ok > build-asan/.build-status
	rc=0
	RDMACM_TIME_SCALE=2 ASAN_OPTIONS=detect_leaks=1 unit_whole build-asan || rc=1
	(cd build-asan && ctest --output-on-failure -R '^abi\.inline\.') || rc=1
	phase_done $rc
else
	echo failed > build-asan/.build-status
	phase_done 1
fi

phase tsan
rc=0
lowest scripts/build.sh build-tsan -DRDMACM_TSAN=ON --target unit_tests unit_device_tests &&
	RDMACM_TIME_SCALE=2 TSAN_OPTIONS=halt_on_error=1 unit_whole build-tsan || rc=1
phase_done $rc

phase fuzz
rc=0
# fuzz compiles core/, api/ and rsocket/ with clang; rdmacm_ucma adds the
# kernel provider's, so that all pass the thread-safety analysis.
{ CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRDMACM_FUZZ=ON >/dev/null &&
	lowest cmake --build build-fuzz --target fuzz rdmacm_ucma -j"$(nproc)" &&
	(cd build-fuzz && ctest --output-on-failure -j2 -L fuzz); } || rc=1
phase_done $rc

PHASE=rxe T0=$rxe_t0
echo "=== phase rxe: waiting for the VM tests (started at $((rxe_t0 - start)) s)"
wait "$rxe_pipe" || true
rxe_group=''
keep_log build rxe
keep_log build-asan sanitized
phase_done "$(cat "$logs/rxe.rc" 2>/dev/null || echo 1)"
[ ${#failed[@]} = 0 ] || { echo "test.sh: failed: ${failed[*]}"; false; }
