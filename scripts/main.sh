#!/bin/bash
# The main job: build, then run the bundled tools through this library over
# RDMA: natively when this host has an RDMA device, else in the Soft-RoCE VM.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh build
exec tests/vm/rxe-vm auto --timeout 300 -- scripts/tools-demo.sh build
