#!/bin/bash
# Installs what building and testing need on Debian 12 (as root). Idempotent:
# does nothing when everything is already there.
set -euo pipefail
PACKAGES=(
  build-essential cmake pkg-config python3   # toolchain
  libibverbs-dev ibverbs-providers           # libibverbs, the rxe provider
  libgtest-dev                               # unit and integration tests
  librdmacm-dev rdmacm-utils                 # rdma-core: the ABI reference and peer tools
  perftest qperf                             # peer tools for the interop tests (ib_send_bw, qperf)
  python3-pyelftools                         # DWARF reader for the ABI layout tests
  mandoc groff-base                          # manual page lint
  clang libclang-rt-14-dev                   # libFuzzer targets (tests/fuzz)
  # ordinary socket programs run under the rsocket preload (tests/rxe/preload, bench/preload_programs.sh)
  netcat-traditional netcat-openbsd socat iperf3 memcached libmemcached-tools sockperf redis-server redis-tools
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # memcached and redis-server are services: keep them from starting on
  # install (the tests start their own instances, inside the VM).
  policy=/usr/sbin/policy-rc.d own_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && own_policy=1
    trap '[ "$own_policy" = 0 ] || rm -f "$policy"' EXIT
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
