// rpoll and rselect over any mix of rsockets and ordinary fds.
#pragma once

#include <poll.h>
#include <sys/select.h>

namespace rdmacm::rsocket {

int poll(pollfd* fds, nfds_t nfds, int timeout);
int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout);

}  // namespace rdmacm::rsocket
