#!/bin/bash
# Installs what building and testing need on Debian 12 (as root). Idempotent:
# does nothing when everything is already there.
set -euo pipefail
PACKAGES=(
  build-essential cmake pkg-config python3   # toolchain; python3 also runs the VM harnesses (tests/rxe/runner)
  libibverbs-dev ibverbs-providers           # libibverbs, the rxe provider
  libgtest-dev                               # unit and integration tests
  librdmacm-dev rdmacm-utils                 # rdma-core: the ABI reference and peer tools
  perftest qperf                             # peer tools for the interop tests (ib_send_bw, qperf)
  libfabric-bin                              # fi_pingpong: libfabric's verbs provider over librdmacm (interop, siw_smoke)
  python3-pyelftools                         # DWARF reader for the ABI layout tests
  mandoc groff-base man-db                   # manual page lint; `man` for the installed manual
  qemu-system-x86 busybox-static kmod cpio ibverbs-utils  # the Soft-RoCE VM (tests/vm/rxe-vm)
  libelf1                                    # the VM's siw.ko build (kbuild's objtool; rxe-vm --siw)
  clang libclang-rt-14-dev                   # libFuzzer targets (tests/fuzz)
  # ordinary socket programs run under the rsocket preload (tests/rxe/preload, bench/preload_programs.sh)
  netcat-traditional netcat-openbsd socat iperf3 memcached libmemcached-tools sockperf redis-server redis-tools
  libpython3.11-testsuite                    # CPython's socket tests, the public suite of rxe.conformance (runner/cpython.py)
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
  # On a freshly booted machine unattended-upgrades often holds apt's locks:
  # wait for them (up to 20 minutes) instead of failing at once.
  apt=(apt-get -o DPkg::Lock::Timeout=1200)
  for i in $(seq 40); do
    "${apt[@]}" update -qq && break
    [ "$i" = 40 ] && { echo "deps: apt-get update kept failing" >&2; exit 1; }
    echo "deps: apt-get update failed (another apt running?); again in 30 s" >&2
    sleep 30
  done
  "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
