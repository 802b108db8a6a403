#!/bin/bash
# Installs the manual into a scratch prefix and checks it there:
# every page is there, every .so stub resolves inside the installed tree, and
# `man -w NAME` and `man NAME` find and render our page for every page name,
# stubs included (man-db is required: scripts/deps.sh installs it).
#
# Usage: install_check.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
# Only the man/ directory's install script: the manual does not depend on
# the rest of the build being up to date.
if ! cmake -DCMAKE_INSTALL_PREFIX="$prefix" -P "$build/man/cmake_install.cmake" \
    >"$prefix/install.log" 2>&1; then
  echo "FAIL: installing man/"; cat "$prefix/install.log"; exit 1
fi
mandir=$prefix/share/man
command -v man >/dev/null || { echo "FAIL: man (man-db) is not installed: apt-get install man-db"; exit 1; }
fail=0
count=0
for page in "$src"/man/man[1-8]/*.[1-8]; do
  sec=$(basename "$(dirname "$page")")
  rel=$sec/$(basename "$page")
  name=$(basename "$page"); name=${name%.*}; num=${sec#man}
  count=$((count + 1))
  if ! cmp -s "$page" "$mandir/$rel"; then
    echo "FAIL: $rel not installed as in the source tree"; fail=1; continue
  fi
  # mandoc resolves .so relative to the working directory: the tree's root.
  out=$(cd "$mandir" && mandoc -Tascii "$rel" 2>&1 | sed 's/.\x08//g')
  if ! grep -q '^NAME' <<<"$out"; then
    echo "FAIL: $rel does not render from the installed tree"; echo "$out" | head -5; fail=1
  fi
  where=$(MANPATH=$mandir man -w "$num" "$name" 2>&1)
  if [[ $where != "$mandir"/* ]]; then
    echo "FAIL: man -w $num $name gives '$where'"; fail=1; continue
  fi
  # The title line of our pages names our manual, not rdma-core's.
  title=$(MANPATH=$mandir MANWIDTH=100 man -P cat "$num" "$name" 2>/dev/null | sed -n 1p)
  if [[ $title != *rdmacm* ]]; then
    echo "FAIL: man $num $name renders '$title'"; fail=1
  fi
done
echo "$count pages checked in $mandir"
exit $fail
