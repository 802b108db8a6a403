// The libc calls the interposer forwards to (see real.h).
#pragma once

#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <unistd.h>

#include "real.h"

extern "C" int close_range(unsigned int first, unsigned int last, int flags) noexcept;

namespace rspreload::real {
RSPRELOAD_REAL(socket);
RSPRELOAD_REAL(bind);
RSPRELOAD_REAL(listen);
RSPRELOAD_REAL(accept);
RSPRELOAD_REAL(accept4);
RSPRELOAD_REAL(connect);
RSPRELOAD_REAL(shutdown);
RSPRELOAD_REAL(close);
RSPRELOAD_REAL(close_range);
RSPRELOAD_REAL(dup);
RSPRELOAD_REAL(dup2);
RSPRELOAD_REAL(dup3);
RSPRELOAD_REAL(fcntl);
RSPRELOAD_REAL(fcntl64);
RSPRELOAD_REAL(ioctl);
RSPRELOAD_REAL(getsockname);
RSPRELOAD_REAL(getpeername);
RSPRELOAD_REAL(setsockopt);
RSPRELOAD_REAL(getsockopt);
RSPRELOAD_REAL(read);
RSPRELOAD_REAL(readv);
RSPRELOAD_REAL(recv);
RSPRELOAD_REAL(recvfrom);
RSPRELOAD_REAL(recvmsg);
RSPRELOAD_REAL(write);
RSPRELOAD_REAL(writev);
RSPRELOAD_REAL(send);
RSPRELOAD_REAL(sendto);
RSPRELOAD_REAL(sendmsg);
RSPRELOAD_REAL(sendmmsg);
RSPRELOAD_REAL(recvmmsg);
RSPRELOAD_REAL(sendfile);
RSPRELOAD_REAL(sendfile64);
RSPRELOAD_REAL(poll);
RSPRELOAD_REAL(ppoll);
RSPRELOAD_REAL(select);
RSPRELOAD_REAL(pselect);
RSPRELOAD_REAL(epoll_create);
RSPRELOAD_REAL(epoll_create1);
RSPRELOAD_REAL(epoll_ctl);
RSPRELOAD_REAL(epoll_wait);
RSPRELOAD_REAL(epoll_pwait);
RSPRELOAD_REAL(epoll_pwait2);
}  // namespace rspreload::real
