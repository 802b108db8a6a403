#!/bin/bash
# Runs the bundled tools against the RDMA device of this (virtual) host and
# prints a short summary. Usage: scripts/tools-demo.sh BUILD_DIR
set -uo pipefail
build=$1
ip=${RXE_IP:-}
lib=$(readlink -f "$build/src/librdmacm.so.1")
results=()
run() {  # name, command...
  local name=$1; shift
  echo "--- $name: $*"
  if "$@"; then results+=("PASS  $name"); else results+=("FAIL  $name (exit $?)"); fi
}
run cminfo "$build/examples/cminfo" ${ip:+"$ip"}
echo
echo "Summary (library: $lib)"
printf '  %s\n' "${results[@]}"
! printf '%s\n' "${results[@]}" | grep -q '^FAIL'
