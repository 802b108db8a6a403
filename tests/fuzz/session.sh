#!/bin/bash
# One fuzz session: session.sh FUZZER SEED_DIR WORK_DIR SECONDS [LIBFUZZER ARGS...]
# The fuzzer grows a fresh copy of the seed corpus in WORK_DIR/corpus (the
# repository is never written) and leaves any reproducer in WORK_DIR.
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 seconds=$4
shift 4
rm -rf "$work"
mkdir -p "$work/corpus"
cp -r "$seeds"/. "$work/corpus/"
# -timeout: a hang is a finding, not a stuck suite.
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$work/" "$@" "$work/corpus"
