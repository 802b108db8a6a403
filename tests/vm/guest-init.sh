#!/bin/busybox sh
# PID 1 of the Soft-RoCE test VM. `rxe-vm prepare` puts this file as /init into an
# initramfs together with a static busybox and the kernel modules listed in
# /modules/order (already in load order).
#
# It loads the modules, builds the root file system (the host's / over 9p,
# read-only, under a tmpfs overlay), mounts the per-run share at /run/rxe-vm and
# then runs /run/rxe-vm/stage2.sh (written by the runner) inside that root.
# Whatever happens, the VM powers off at the end.

/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

log() { echo "rxe-vm-init: $*"; }
halt_vm() {
	sync
	echo o > /proc/sysrq-trigger
	sleep 30
}
fail() {
	log "FATAL: $*"
	# Tell the runner why, if the share is already mounted.
	[ -d /newroot/run/rxe-vm ] && echo "$*" > /newroot/run/rxe-vm/init-failed
	halt_vm
}

for m in $(cat /modules/order); do
	insmod "/modules/$m" || fail "insmod $m failed"
done

log "modules loaded"
p9="trans=virtio,version=9p2000.L,msize=262144"
mkdir -p /lower /rw /newroot
mount -t 9p -o "$p9,ro,cache=loose" hostroot /lower || fail "cannot mount the host root (9p)"
mount -t tmpfs -o mode=0755 rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
	fail "cannot mount the overlay root"

mkdir -p /newroot/run/rxe-vm
mount -t 9p -o "$p9" share /newroot/run/rxe-vm || fail "cannot mount the run share (9p)"

for d in proc sys dev; do mkdir -p "/newroot/$d"; done
mount -t proc proc /newroot/proc
mount -t sysfs sysfs /newroot/sys
mount -t devtmpfs devtmpfs /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 shm /newroot/dev/shm
mount -t configfs configfs /newroot/sys/kernel/config 2>/dev/null

# Extra writable host directories (rxe-vm run --rw DIR): lines "TAG PATH".
if [ -f /newroot/run/rxe-vm/rw-mounts ]; then
	while read -r tag path; do
		[ -n "$tag" ] || continue
		mkdir -p "/newroot$path"
		mount -t 9p -o "$p9" "$tag" "/newroot$path" || fail "cannot mount $path (9p $tag)"
	done < /newroot/run/rxe-vm/rw-mounts
fi

# The network, with busybox (host binaries are slow to start the first time):
# eth0 is the VM's only link, an isolated virtual wire (see rxe-vm).
[ -f /newroot/run/rxe-vm/stage2.sh ] || fail "no stage2.sh in the run share"
. /newroot/run/rxe-vm/vm.conf
echo 0 > /proc/sys/net/ipv6/conf/eth0/accept_dad
ip link set lo up &&
	ip link set eth0 up &&
	ip addr add "$RXE_IP/$RXE_PREFIX" dev eth0 &&
	ip -6 addr add "$RXE_IP6/64" dev eth0 &&
	ip route add 224.0.0.0/4 dev eth0 || fail "cannot configure eth0"

log "root file system ready"
chroot /newroot /bin/bash /run/rxe-vm/stage2.sh
rc=$?
[ -f /newroot/run/rxe-vm/rc ] || log "stage2 ended ($rc) without writing an exit status"
halt_vm
