"""The kernel's RDMA resource tracker over netlink (what `rdma res show cm_id`
asks), without starting a process: in the TCG VM one `rdma` costs ~80 ms of
CPU, and a readiness wait used to start one every 100 ms beside the server it
was waiting for. Layouts: include/uapi/rdma/rdma_netlink.h."""
import os
import socket
import struct

NETLINK_RDMA = 20
NLDEV = 5                      # RDMA_NL_NLDEV
CMD_GET, CMD_RES_CM_ID_GET = 1, 11
ATTR_DEV_INDEX = 1
ATTR_RES_CM_ID, ATTR_RES_CM_ID_ENTRY, ATTR_RES_STATE, ATTR_RES_SRC_ADDR = 30, 31, 27, 33
CM_LISTEN = 8                  # enum rdma_cm_state (drivers/infiniband/core/cma_priv.h)
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3


def _attrs(buf):
    """{type: [payload, ...]} of a run of netlink attributes."""
    out, i = {}, 0
    while i + 4 <= len(buf):
        n, t = struct.unpack_from('=HH', buf, i)
        if n < 4:
            break
        out.setdefault(t & 0x3fff, []).append(buf[i + 4:i + n])
        i += (n + 3) & ~3
    return out


def _dump(cmd, attrs=b''):
    """The attribute maps of every message of a dump of nldev command CMD."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_RDMA) as s:
        s.settimeout(5)
        s.send(struct.pack('=IHHII', 16 + len(attrs), NLDEV << 10 | cmd, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + attrs)
        msgs = []
        while True:
            buf = s.recv(1 << 16)
            i = 0
            while i + 16 <= len(buf):
                n, t = struct.unpack_from('=IH', buf, i)
                if n < 16:
                    return msgs
                if t == NLMSG_DONE:
                    return msgs
                if t == NLMSG_ERROR:
                    err = struct.unpack_from('=i', buf, i + 16)[0]
                    raise OSError(-err, os.strerror(-err))
                msgs.append(_attrs(buf[i + 16:i + n]))
                i += (n + 3) & ~3


def listening_ports():
    """The ports on which an rdma_cm id of any RDMA device is in state LISTEN
    (as `rdma res show cm_id` lists them)."""
    ports = set()
    for dev in _dump(CMD_GET):
        idx = dev[ATTR_DEV_INDEX][0][:4]
        for m in _dump(CMD_RES_CM_ID_GET, struct.pack('=HH', 8, ATTR_DEV_INDEX) + idx):
            for table in m.get(ATTR_RES_CM_ID, []):
                for entry in _attrs(table).get(ATTR_RES_CM_ID_ENTRY, []):
                    a = _attrs(entry)
                    state, src = a.get(ATTR_RES_STATE), a.get(ATTR_RES_SRC_ADDR)
                    # sockaddr_in and sockaddr_in6 both keep the port at offset 2, in network order.
                    if state and src and state[0][0] == CM_LISTEN and len(src[0]) >= 4:
                        ports.add(struct.unpack_from('!H', src[0], 2)[0])
    return ports
