#!/bin/bash
# The whole suite: unit, ABI and Soft-RoCE integration tests on the normal
# build; unit, ABI and Soft-RoCE tests again under AddressSanitizer and UBSan;
# the unit tests under ThreadSanitizer; the fuzz targets, briefly.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/deps.sh
tests/vm/rxe-vm prepare

scripts/build.sh build
(cd build && ctest --output-on-failure -j2)

scripts/build.sh build-asan -DRDMACM_SANITIZE=ON
# unit and ABI tests, then (label sanitized, one VM boot) the rxe tests and
# rdma-core's tools over the sanitized library
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j2 -L 'unit|abi|sanitized')

# unit tests (fault injection, concurrency) under ThreadSanitizer
scripts/build.sh build-tsan -DRDMACM_TSAN=ON
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j2 -L unit)

# the libFuzzer targets (clang), 20 s each from the committed seed corpus
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRDMACM_FUZZ=ON >/dev/null
cmake --build build-fuzz --target fuzz -j"$(nproc)"
(cd build-fuzz && ctest --output-on-failure -L fuzz)
echo "test.sh: all suites passed in $(( $(date +%s) - start )) s"
