#!/usr/bin/env python3
"""Where a VM command's CPU went (rxe-vm with RDMACM_VM_PROFILE=1).

Runs inside the guest: `acct_summary.py on FILE` starts the kernel's process
accounting (acct(2), BSD_PROCESS_ACCT) into FILE, and `sum FILE` stops it and
prints the CPU of every process that ended, by command name,
heaviest first: under TCG a process start costs 60-150 ms of CPU (/bin/true
~60 ms, grep ~150 ms, python3 ~500 ms), so which commands a harness starts
how often is most of what a VM test costs.
"""
import collections
import ctypes
import struct
import sys

RECORD = struct.Struct('<BBHIIIIIIfHHHHHHHH16s')  # struct acct_v3, 64 bytes


def comp_t(v):
    """An acct comp_t (13-bit mantissa, 3-bit base-8 exponent) in ticks."""
    return (v & 0x1fff) << (3 * (v >> 13))


def summary(path, top=25):
    data = open(path, 'rb').read()
    per = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for off in range(0, len(data) - RECORD.size + 1, RECORD.size):
        f = RECORD.unpack_from(data, off)
        if f[1] & 0x0f != 3:
            continue
        comm = f[18].split(b'\0')[0].decode(errors='replace')
        p = per[comm]
        p[0] += 1
        p[1] += comp_t(f[10]) / 100  # AHZ ticks
        p[2] += comp_t(f[11]) / 100
    n = sum(p[0] for p in per.values())
    cpu = sum(p[1] + p[2] for p in per.values())
    print('rxe-vm-profile: %d processes ended, %.1f s of CPU (user+sys), heaviest:' % (n, cpu))
    for comm, (k, u, s) in sorted(per.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:top]:
        print('rxe-vm-profile:   %-16s %5d x %7.1f ms = %6.1f s' % (comm, k, 1000 * (u + s) / k, u + s))


def main():
    libc = ctypes.CDLL(None, use_errno=True)
    what = sys.argv[1]
    if what == 'on':
        open(sys.argv[2], 'wb').close()
        if libc.acct(sys.argv[2].encode()) != 0:
            print('rxe-vm-profile: acct: errno %d' % ctypes.get_errno())
    else:
        libc.acct(None)
        summary(sys.argv[2])


if __name__ == '__main__':
    main()
