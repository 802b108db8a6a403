# shellcheck shell=bash
# shellcheck disable=SC2034 # KERNEL, INITRD, SIW_DIR: set for qemu.sh and rundir.sh
# rxe-vm's `prepare`: picks Debian's current kernel and makes sure its cache
# entry (vm-image.sh), the initramfs and, for --siw, siw.ko (siw-build.sh) are
# built, under $CACHE's locks. Sourced by rxe-vm.

# Prints "PACKAGE VERSION" of the kernel that linux-image-amd64 currently points to.
# apt-cache takes about a second here, so the answer is remembered until the
# package lists change.
kernel_candidate() {
	local pkg ver stamp memo="$CACHE/.candidate"
	stamp=$(stat -c '%n %Y %s' /var/lib/apt/lists/*Packages* 2>/dev/null | md5sum | cut -c1-32)
	if [ -f "$memo" ] && [ "$(head -n 1 "$memo")" = "$stamp" ]; then
		sed -n 2p "$memo"
		return
	fi
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	[ -n "$pkg" ] || return 1
	ver=$(pkg_version "$pkg")
	[ -n "$ver" ] || return 1
	printf '%s\n%s %s\n' "$stamp" "$pkg" "$ver" > "$memo.$$"
	mv "$memo.$$" "$memo"
	echo "$pkg $ver"
}

# Sets KERNEL and INITRD, building whatever is missing. Safe to run concurrently.
prepare() {
	local cand pkg ver key kdir ikey
	ensure_packages
	mkdir -p "$CACHE"
	if [ -n "${RDMACM_VM_KERNEL_PKG:-}" ]; then
		cand="$RDMACM_VM_KERNEL_PKG any"
	else
		cand=$(kernel_candidate) || { apt_update_once; cand=$(kernel_candidate) || cand=; }
	fi
	if [ -n "$cand" ]; then
		read -r pkg ver <<< "$cand"
		key="$pkg-$ver"
	else
		# Offline and no package lists: fall back to the newest complete cache entry.
		key=$(cd "$CACHE" && ls -td linux-image-*/ 2>/dev/null | head -n 1) || true
		key=${key%/}
		if [ -z "$key" ] || [ "$(cat "$CACHE/$key/modules/wanted" 2>/dev/null)" != "$MODULES" ]; then
			die "cannot find Debian's kernel package (apt-cache)"
		fi
		msg "apt-cache knows no kernel, using cached $key"
	fi
	kdir="$CACHE/$key"
	exec 9> "$CACHE/.lock"
	flock 9
	if [ ! -f "$kdir/kernel-release" ] || [ "$(cat "$kdir/modules/wanted" 2>/dev/null)" != "$MODULES" ]; then
		local t0; t0=$(now)
		build_kernel_dir "$pkg" "$kdir"
		# Older kernels are stale now.
		find "$CACHE" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-*' ! -name "$key" -exec rm -rf {} +
		msg "kernel $(cat "$kdir/kernel-release") cached in $kdir ($(since "$t0") s)"
	fi
	ikey=$(cat "$HERE/guest-init.sh" "$kdir/modules/order" /bin/busybox | sha256sum | cut -c1-16)
	INITRD="$kdir/initrd-$ikey.img"
	if [ ! -f "$INITRD" ]; then
		rm -f "$kdir"/initrd-*.img
		build_initrd "$kdir" "$INITRD"
	fi
	KERNEL="$kdir/vmlinuz"
	[ -f "$kdir/vmlinux" ] && KERNEL="$kdir/vmlinux"
	flock -u 9
	exec 9>&-
	SIW_DIR=''
	if [ "$SIW" = 1 ]; then
		# A lock of its own: runs without --siw never wait for this build.
		exec 9> "$CACHE/.siw-lock"
		flock 9
		[ -s "$kdir/siw/order" ] || build_siw "${pkg:-}" "${ver:-}" "$kdir"
		flock -u 9
		exec 9>&-
			SIW_DIR="$kdir/siw"
	fi
}
