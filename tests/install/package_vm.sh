#!/bin/bash
# The system-wide switch, end to end, in the Soft-RoCE VM (whose root is a
# throw-away overlay of the host's): rdma-core's own rping and ucmatose, run
# with no environment variables, connect over rxe0 on rdma-core's library;
# after `dpkg -i` of our package on ours (seen in /proc/PID/maps of server and
# client), also after rdma-core's librdmacm1 is reinstalled as an upgrade
# would; after `dpkg -r`, and again after `dpkg -P`, on rdma-core's, with
# ldconfig's cache, /etc/ld.so.conf.d and rdma-core's files as they were.
# `apt-get check` is clean at every step.
#
#   package_vm.sh PACKAGE_DIR    (from build_deb.sh: rdmacm_*.deb, reference/librdmacm1_*.deb)
set -euo pipefail
[ "${RDMACM_IN_VM-}" = 1 ] || { echo "package_vm.sh: installs packages: run it in the VM only"; exit 2; }
dir=$1
deb=$(echo "$dir"/rdmacm_*.deb)
ref_deb=$(echo "$dir"/reference/librdmacm1_*.deb)
which_src=$(cd "$(dirname "$0")/../../examples" && pwd)/rdmacm-which
[[ -f $deb && -f $ref_deb ]] || { echo "FAIL: no package in $dir (build_deb.sh)"; exit 1; }

# fail, step, snapshot, as_before, apt_check, mapped_lib, expect_lib, pair.
# shellcheck source=package_checks.sh
. "$(dirname "$0")/package_checks.sh"

step "before: rdma-core's library"
ldconfig  # the VM's cache, as the host's dpkg left it
snapshot >"$work/before"
apt_check before
pair theirs rping
pair theirs ucmatose
"$which_src" rping | tee "$work/which" || true
grep -q "not rdmacm's; package librdmacm1" "$work/which" || fail "rdmacm-which: rping not on rdma-core's"

step "dpkg -i $(basename "$deb")"
dpkg -i "$deb"
apt_check "after install"
echo "ldconfig -p, librdmacm.so.1 in the loader's order:"
ldconfig -p | grep -F 'librdmacm.so.1 '
pair ours rping
pair ours ucmatose
# Every other package on rdma-core's library gets ours too (those installed).
progs=(rping ucmatose)
for p in ib_send_bw qperf fio; do command -v $p >/dev/null && progs+=("$p"); done
/opt/rdmacm/bin/rdmacm-which "${progs[@]}" | tee "$work/which" || true
[ "$(grep -c '(ours: rdmacm ' "$work/which")" = ${#progs[@]} ] || fail "rdmacm-which: not all on ours"
for lib in libfabric.so.1 libuct_rdmacm.so.0; do
	path=$(find /usr/lib/x86_64-linux-gnu -name "$lib" -print -quit)
	[ -n "$path" ] || continue
	ldd "$path" | grep -F 'librdmacm.so.1 =>' | tee "$work/ldd" || true
	grep -q '/opt/rdmacm/lib/' "$work/ldd" || fail "$lib: not on ours"
done
# A running process: its PID.
env -i PATH=/usr/bin:/bin rping -s -a "$RXE_IP" -C 1 >/dev/null 2>&1 & spid=$!
mapped_lib $spid >/dev/null
/opt/rdmacm/bin/rdmacm-which $spid | tee "$work/which" || true
grep -q "(ours: rdmacm " "$work/which" || fail "rdmacm-which PID: not ours"
kill $spid; wait $spid 2>/dev/null || true

step "rdma-core's librdmacm1 reinstalled ($(basename "$ref_deb")), as its upgrade would"
dpkg -i "$ref_deb"
apt_check "after reinstalling librdmacm1"
ldconfig -p | grep -F 'librdmacm.so.1 '
pair ours rping

step "dpkg -r rdmacm"
dpkg -r rdmacm
apt_check "after remove"
[ ! -e /opt/rdmacm ] || { find /opt/rdmacm; fail "files left in /opt/rdmacm"; }
as_before remove
pair theirs rping
pair theirs ucmatose
"$which_src" rping "$(command -v ucmatose)" | tee "$work/which" || true
[ "$(grep -c "not rdmacm's; package librdmacm1" "$work/which")" = 2 ] || fail "rdmacm-which: not on rdma-core's"

step "dpkg -i, then dpkg -P rdmacm"
dpkg -i "$deb" >/dev/null
pair ours rping
dpkg -P rdmacm
apt_check "after purge"
as_before purge
[ -z "$(dpkg-query -W -f='${Status}' rdmacm 2>/dev/null)" ] || fail "dpkg still knows rdmacm"
pair theirs rping
echo
echo "package: PASS"
