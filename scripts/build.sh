#!/bin/bash
# Configures and builds one tree:
#   scripts/build.sh DIR [CMAKE ARGS...] [--target TARGET...]
# With --target, only those targets (and what they need) are built.
set -euo pipefail
dir=$1; shift
args=() targets=()
while [ $# -gt 0 ]; do
	if [ "$1" = --target ]; then shift; targets=("$@"); break; fi
	args+=("$1"); shift
done
cmake -S "$(dirname "$0")/.." -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${args[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)" ${targets[@]:+--target "${targets[@]}"}
