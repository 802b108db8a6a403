# shellcheck shell=bash
# rxe-vm's boot image, built once per kernel into its cache directory: the
# kernel (vmlinuz, and the ELF vmlinux inside it), the modules the guest loads,
# and the initramfs (busybox + modules + guest-init.sh). Sourced by rxe-vm.

# Unpacks the ELF kernel from a bzImage: qemu boots an ELF with a PVH note directly,
# which skips the BIOS and the slow (under TCG) decompression, about 3 s per boot.
extract_vmlinux() {
	local in=$1 out=$2 magic dec off
	for magic in '\xfd7zXZ\x00:xz' '\x28\xb5\x2f\xfd:zstd' '\x1f\x8b\x08:gzip'; do
		dec=${magic##*:}
		command -v "$dec" >/dev/null || continue
		for off in $(LC_ALL=C grep -obUaP "${magic%:*}" "$in" | cut -d: -f1); do
			tail -c +$((off + 1)) "$in" | "$dec" -dc > "$out" 2>/dev/null || true
			[ "$(head -c 4 "$out" | od -An -tx1 | tr -d ' ')" = 7f454c46 ] && return 0
		done
	done
	return 1
}

# Downloads the kernel package and keeps vmlinuz plus the modules we need, in load order.
build_kernel_dir() {
	local pkg=$1 dir=$2 tmp kver
	tmp=$(mktemp -d "$CACHE/.build.XXXXXX")
	msg "fetching $pkg"
	apt_download "$tmp" "$pkg" || { rm -rf "$tmp"; die "apt-get download $pkg failed"; }
	dpkg-deb -x "$tmp"/*.deb "$tmp/root"
	kver=$(ls "$tmp/root/lib/modules")
	depmod -b "$tmp/root" "$kver"
	mkdir -p "$tmp/out/modules"
	cp "$tmp/root/boot/vmlinuz-$kver" "$tmp/out/vmlinuz"
	if grep -qx 'CONFIG_PVH=y' "$tmp/root/boot/config-$kver"; then
		extract_vmlinux "$tmp/out/vmlinuz" "$tmp/out/vmlinux" || rm -f "$tmp/out/vmlinux"
	fi
	# shellcheck disable=SC2086
	copy_modules "$tmp/root" "$kver" "$tmp/out/modules" "" $MODULES
	[ -s "$tmp/out/modules/order" ] || die "no modules found in $pkg"
	echo "$MODULES" > "$tmp/out/modules/wanted"
	echo "$kver" > "$tmp/out/kernel-release"
	rm -rf "$dir"
	mv "$tmp/out" "$dir"
	rm -rf "$tmp"
}

# copy_modules ROOT KVER DIR SKIP MODULE...: the MODULEs of kernel KVER in the
# tree ROOT and the modules they need, decompressed into DIR and named in load
# order in DIR/order, except those named in the list SKIP.
copy_modules() {
	local root=$1 kver=$2 dir=$3 skip=" ${4//$'\n'/ } " f m
	shift 4
	modprobe -d "$root" -S "$kver" --show-depends -a "$@" |
		awk '$1 == "insmod" && !seen[$2]++ { print $2 }' > "$root.paths"
	while read -r f; do
		m=$(basename "$f"); m=${m%.xz}; m=${m%.zst}; m=${m%.gz}
		[[ $skip == *" $m "* ]] && continue
		case $f in
		*.xz) xz -dc "$f" ;; *.zst) zstd -dc "$f" ;; *.gz) gzip -dc "$f" ;; *) cat "$f" ;;
		esac > "$dir/$m"
		echo "$m" >> "$dir/order"
	done < "$root.paths"
}

build_initrd() {
	local kdir=$1 out=$2 tmp
	tmp=$(mktemp -d "$CACHE/.initrd.XXXXXX")
	mkdir -p "$tmp"/{bin,dev,proc,sys,modules}
	cp /bin/busybox "$tmp/bin/busybox"
	install -m 0755 "$HERE/guest-init.sh" "$tmp/init"
	cp "$kdir"/modules/* "$tmp/modules/"
	mknod -m 0600 "$tmp/dev/console" c 5 1
	(cd "$tmp" && find . | cpio -o -H newc -R 0:0 --quiet) | gzip -1 > "$out.tmp"
	mv "$out.tmp" "$out"
	rm -rf "$tmp"
}
