#!/bin/bash
# The whole suite: unit, ABI and Soft-RoCE integration tests on the normal
# build, then unit, ABI and Soft-RoCE tests again under AddressSanitizer and UBSan.
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
echo "test.sh: all suites passed in $(( $(date +%s) - start )) s"
