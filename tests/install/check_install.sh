#!/bin/bash
# Installs the build tree into a scratch prefix and builds a consumer against
# it with find_package(rdmacm) and with pkg-config; both must link to the
# installed librdmacm.so.1 and run.
set -euo pipefail
build=$1 src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name librdmacm.so.1 | head -1)")
for f in share/man/man1/cminfo.1 include/rdma/rdma_cma.h include/rdma/rdma_verbs.h include/rdma/rsocket.h \
         include/rdma/rdma_cma_abi.h include/infiniband/ib.h bin/cminfo; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
[ -L "$libdir/librdmacm.so" ] || { echo "FAIL: no librdmacm.so dev link"; exit 1; }
export PKG_CONFIG_PATH=$libdir/pkgconfig
libs=$(echo $(pkg-config --libs librdmacm))
[ "$(readlink -f "$(sed -n 's/^-L\(\S*\) .*/\1/p' <<<"$libs")")" = "$libdir" ] && [ "${libs##* }" = -lrdmacm ] \
  || { echo "FAIL: pkg-config libs: $libs"; exit 1; }
cmake -S "$src/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
for exe in with_cmake with_pkgconfig; do
  LD_LIBRARY_PATH=$libdir "$work/consumer/$exe" >/dev/null || { echo "FAIL: $exe"; exit 1; }
  deps=$(LD_LIBRARY_PATH=$libdir ldd "$work/consumer/$exe")
  grep -q "librdmacm.so.1 => $libdir/" <<<"$deps" \
    || { echo "FAIL: $exe not linked to the installed library"; exit 1; }
  echo "$exe: OK"
done
