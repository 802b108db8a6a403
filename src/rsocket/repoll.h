// repoll_create / repoll_ctl / repoll_wait: epoll(7) over any mix of
// rsockets and ordinary fds (repoll.cpp tells how). Each returns >= 0 or
// -errno, as the other calls of the wing.
#pragma once

#include <sys/epoll.h>

namespace rdmacm::rsocket {

class File;

int repoll_create(int flags);
int repoll_ctl(int epfd, int op, int fd, epoll_event* event);
int repoll_wait(int epfd, epoll_event* events, int maxevents, int timeout);

// rclose: the socket or set leaves every set it is in (as close(2) takes an
// fd out of kernel epoll sets), before its fds close. Takes no socket lock.
void repoll_forget(File* f);

}  // namespace rdmacm::rsocket
