# shellcheck shell=bash
# rxe-vm --siw: siw.ko built out of tree, once per kernel. Sourced by rxe-vm
# (uses copy_modules of vm-image.sh).

# Soft-iWARP for --siw. Debian builds its kernel without siw (CONFIG_RDMA_SIW is
# not set), so siw.ko is built out of tree from the same kernel's own source
# and headers (apt-get download: the image, linux-headers-$KV and what it
# depends on, linux-kbuild-X.Y, linux-source-X.Y, at the image's version or,
# where the archive moved one on, its upstream release: apt_download_near).
# Unsigned, it loads (the kernel is tainted, not refused). Writes $3/siw/:
# the modules siw needs that the initramfs lacks (libcrc32c, crc32c_generic)
# and siw.ko, decompressed, in load order (`order`); stage2 loads them from
# there over the host root. It lives in the kernel's cache directory, so a
# new kernel version drops it and the next --siw run builds it again.
build_siw() {
	local pkg=$1 ver=$2 kdir=$3 kver xy tmp hdr deps src f t0 t1 t2 t3
	t0=$(now)
	kver=$(cat "$kdir/kernel-release")
	[ -n "$pkg" ] || pkg=linux-image-$kver
	xy=$(echo "$kver" | cut -d. -f1,2)
	if [ -z "$ver" ] || [ "$ver" = any ]; then
		ver=$(pkg_version "$pkg")
		[ -n "$ver" ] || die "siw: no version of $pkg known to apt-cache"
	fi
	tmp=$(mktemp -d "$CACHE/.siw.XXXXXX")
	msg "siw: fetching $pkg, linux-headers-$kver, linux-source-$xy ($ver)"
	# The image and its headers exactly; the source, linux-kbuild-X.Y and the
	# headers' common part (the headers' own dependencies) of the same upstream
	# release at least.
	apt_download "$tmp" "$pkg=$ver" "linux-headers-$kver=$ver" ||
		{ rm -rf "$tmp"; die "siw: apt-get download failed"; }
	hdr=$(ls "$tmp"/linux-headers-"$kver"_*.deb)
	deps=$(dpkg-deb -f "$hdr" Depends | tr ',' '\n' | awk '$1 ~ /^linux-(headers-.*-common|kbuild-)/ { print $1 }')
	for f in "linux-source-$xy" $deps; do
		apt_download_near "$tmp" "$f" "$ver" || { rm -rf "$tmp"; die "siw: apt-get download $f ($ver) failed"; }
	done
	t1=$(since "$t0")
	for f in "$tmp"/*.deb; do
		case $f in */linux-source-*) ;; *) dpkg-deb -x "$f" "$tmp/root" ;; esac
	done
	# Only the driver's directory of the source tarball.
	src=drivers/infiniband/sw/siw
	dpkg-deb --fsys-tarfile "$tmp"/linux-source-"$xy"_*.deb | tar -xO "./usr/src/linux-source-$xy.tar.xz" |
		xz -dc | tar -x -C "$tmp" --wildcards "linux-source-$xy/$src/*" || { rm -rf "$tmp"; die "siw: no $src in linux-source-$xy"; }
	# The headers' Makefile includes the common one by its absolute path.
	hdr=$tmp/root/usr/src/linux-headers-$kver
	sed -i "s|^include /usr/src/|include $tmp/root/usr/src/|" "$hdr/Makefile"
	t2=$(since "$t0")
	if ! make -C "$hdr" M="$tmp/linux-source-$xy/$src" CONFIG_RDMA_SIW=m -j"$(nproc)" modules >"$tmp/build.log" 2>&1; then
		tail -n 30 "$tmp/build.log" >&2
		rm -rf "$tmp"
		die "siw: building siw.ko failed"
	fi
	t3=$(since "$t0")
	# Its place among the kernel's modules gives the load order of what it needs.
	mkdir -p "$tmp/root/lib/modules/$kver/extra" "$tmp/out"
	strip --strip-debug -o "$tmp/root/lib/modules/$kver/extra/siw.ko" "$tmp/linux-source-$xy/$src/siw.ko"
	depmod -b "$tmp/root" "$kver"
	# Not those the initramfs has loaded already; crc32c_generic serves for
	# crc32c (crc32c-intel, the other provider, wants SSE4.2).
	copy_modules "$tmp/root" "$kver" "$tmp/out" "$(cat "$kdir/modules/order") crc32c-intel.ko" crc32c_generic siw
	grep -qx siw.ko "$tmp/out/order" 2>/dev/null || { rm -rf "$tmp"; die "siw: siw.ko is not in its own load order"; }
	rm -rf "$kdir/siw"
	mv "$tmp/out" "$kdir/siw"
	rm -rf "$tmp"
	msg "siw: siw.ko for $kver cached in $kdir/siw ($(since "$t0") s: download $t1 s, unpack $t2 s, build $t3 s, cumulative)"
}
