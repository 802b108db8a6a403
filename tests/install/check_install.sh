#!/bin/bash
# Checks an installed tree: the files are there, and a consumer built with
# find_package(rdmacm) and one built with pkg-config link to the tree's
# librdmacm.so.1 and run.
#
#   check_install.sh BUILD_DIR                  the tree of `cmake --install` into a scratch prefix
#   check_install.sh BUILD_DIR --deb FILE.deb   the Debian package's files (dpkg-deb -x), and
#                                               that the package stays out of rdma-core's way
set -euo pipefail
build=$1 src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
if [ "${2-}" = --deb ]; then
  deb=$3
  dpkg-deb -x "$deb" "$work/root"
  prefix=$(cd "$(dirname "$(find "$work/root" -path '*/bin/cminfo')")/.." && pwd)
  # Every file under one prefix of its own: nothing any rdma-core package owns.
  outside=$(dpkg-deb -c "$deb" | awk '{ print $6 }' | grep -v '^\./opt/$' | grep -v "^\.${prefix#"$work/root"}/" || true)
  [ -z "$outside" ] || { echo "FAIL: files outside ${prefix#"$work/root"}:"; echo "$outside"; exit 1; }
  depends=$(dpkg-deb -f "$deb" Depends)
  grep -q librdmacm <<<"$depends" && { echo "FAIL: the package depends on rdma-core's library: $depends"; exit 1; }
  # The list first: grep -q stops reading at its match, and under pipefail
  # tar's SIGPIPE would then fail the check now and then.
  control=$(dpkg-deb --ctrl-tarfile "$deb" | tar -t)
  grep -qx './postinst' <<<"$control" || { echo "FAIL: no postinst"; exit 1; }
  echo "package: one prefix ${prefix#"$work/root"}, Depends: $depends"
else
  prefix=$work/prefix
  cmake --install "$build" --prefix "$prefix" >/dev/null
fi
libdir=$(dirname "$(find "$prefix" -name librdmacm.so.1 | head -1)")
for f in share/man/man1/cminfo.1 share/man/man1/rdmacm-which.1 include/rdma/rdma_cma.h include/rdma/rdma_verbs.h \
         include/rdma/rsocket.h include/rdma/rdma_cma_abi.h include/infiniband/ib.h bin/cminfo bin/rdmacm-which; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
# librspreload.so, where rdma-core puts its own, whenever the tree builds it.
if [ -n "$(find "$build" -name librspreload.so -print -quit)" ] && [ ! -e "$libdir/rsocket/librspreload.so" ]; then
  echo "FAIL: librspreload.so built but not installed in $libdir/rsocket"; exit 1
fi
[ -L "$libdir/librdmacm.so" ] || { echo "FAIL: no librdmacm.so dev link"; exit 1; }
# rdmacm-which tells our library from others by this string.
grep -qa 'rdmacm-ident: ' "$libdir/librdmacm.so.1" || { echo "FAIL: no identifying string in the library"; exit 1; }
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
