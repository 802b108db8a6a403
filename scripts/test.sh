#!/bin/bash
# The whole suite, fast phases first so that they fail early:
#   host    the normal build; its tests that need no RDMA device (unit, ABI,
#           layering, thread-safety fixture, manual, install, package)
#   tsan    the unit binaries under ThreadSanitizer (run whole)
#   fuzz    the libFuzzer targets, 20 s each from the committed corpus; their
#           clang build of the library's objects is also the thread-safety
#           check (RDMACM_THREAD_SAFETY: -Wthread-safety, as errors)
#   asan    the unit binaries and the inline-ABI tests under AddressSanitizer
#           and UBSan
#   rxe     the Soft-RoCE integration tests on the normal build and on the
#           sanitized one (in VMs, two at a time, or natively on an RDMA host)
# Ends with every FLAKY, RETRY and FORGIVEN line of the run (tests/FLAKY.md
# says what they mean) and fails if any phase failed or more than three cases
# needed a rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
logs=$PWD/build/suite-logs
phases=()

# phase NAME / phase_done: each phase's wall time, for the summary.
phase() { PHASE=$1 T0=$(date +%s); echo "=== phase $1"; }
phase_done() { phases+=("$(printf '%-6s %5d s' "$PHASE" $(( $(date +%s) - T0 )))"); PHASE=''; }
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
mkdir -p "$logs" && rm -f "$logs"/*.log "$logs/reruns"
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

phase tsan
scripts/build.sh build-tsan -DRDMACM_TSAN=ON --target unit_tests unit_device_tests
TSAN_OPTIONS=halt_on_error=1 unit_whole build-tsan
phase_done

phase fuzz
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRDMACM_FUZZ=ON >/dev/null
# fuzz compiles core/, api/ and rsocket/ with clang; rdmacm_ucma adds the
# kernel provider's, so that all pass the thread-safety analysis.
cmake --build build-fuzz --target fuzz rdmacm_ucma -j"$(nproc)"
(cd build-fuzz && ctest --output-on-failure -j2 -L fuzz)
phase_done

phase asan
scripts/build.sh build-asan -DRDMACM_SANITIZE=ON --target unit_tests unit_device_tests \
	rdmacm_abi_inline_test rdmacm rxe_tests rxe_1_4_tests rxe_rsocket_tests misuse_table
ASAN_OPTIONS=detect_leaks=1 unit_whole build-asan
(cd build-asan && ctest --output-on-failure -R '^abi\.inline\.')
phase_done

phase rxe
wait "$prepare" || { cat "$logs/vm-prepare.out"; false; }
# Fixture setups that the host phase ran already (the package) are not rerun.
# Two VMs side by side, one virtual CPU each (tests/vm/RxeTests.cmake): two at
# a time took 1,198 s where one at a time took 1,687 s (measured on this 2-core
# machine with two CPUs per VM, all passing, no reruns); the longest start
# first (COST). rxe.sanitized (the integration tests and rdma-core's tools
# over the sanitized library, built in build-asan) is one of them.
rc=0
(cd build && ctest --output-on-failure -j2 -L 'rxe|bench' -LE reference -FS rdmacm_deb) || rc=1
keep_log build rxe
keep_log build-asan sanitized
[ "$rc" = 0 ]
phase_done
