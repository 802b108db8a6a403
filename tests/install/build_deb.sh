#!/bin/bash
# Builds the Debian package (cmake/Packaging.cmake) from a build tree into
# BUILD_DIR/package, and puts the .deb of the installed rdma-core librdmacm1
# in BUILD_DIR/package/reference: the VM test reinstalls it as an upgrade
# of rdma-core would.
#
#   build_deb.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
out=$build/package
rm -rf "$out"
mkdir -p "$out/reference"
if ! (cd "$build" && cpack -G DEB --config CPackConfig.cmake) >"$build/cpack.log" 2>&1; then
  cat "$build/cpack.log"; echo "FAIL: cpack"; exit 1
fi
ls "$out"/rdmacm_*.deb
ver=$(dpkg-query -W -f='${Version}' librdmacm1)
arch=$(dpkg --print-architecture)
cached=/var/cache/apt/archives/librdmacm1_${ver//:/%3a}_$arch.deb
if [ -f "$cached" ]; then
  cp "$cached" "$out/reference/"
else
  (cd "$out/reference" && apt-get download -q "librdmacm1=$ver") \
    || { echo "FAIL: librdmacm1 $ver is neither in the apt cache nor downloadable"; exit 1; }
fi
ls "$out"/reference/*.deb
