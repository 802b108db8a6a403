// The r* calls, as api/rsockets.cpp forwards them: each returns >= 0 or
// -errno. The only header of the wing that api/ includes.
#pragma once

#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>

namespace rdmacm::rsocket {

int socket(int domain, int type, int protocol);
int bind(int fd, const sockaddr* addr, socklen_t len);
int listen(int fd, int backlog);
int accept(int fd, sockaddr* addr, socklen_t* len);
int connect(int fd, const sockaddr* addr, socklen_t len);
int shutdown(int fd, int how);
int close(int fd);
ssize_t recv(int fd, void* buf, size_t len, int flags);
ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* src, socklen_t* src_len);
ssize_t recvv(int fd, const iovec* iov, int iovcnt, int flags);
ssize_t recvmsg(int fd, msghdr* msg, int flags);
// read(2) and readv(2): as recv and recvv with no flags, except that no bytes
// asked is 0 at once (recv(2) of no bytes waits for data, as TCP's).
ssize_t read(int fd, void* buf, size_t len);
ssize_t readv(int fd, const iovec* iov, int iovcnt);
ssize_t send(int fd, const void* buf, size_t len, int flags);
ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* dst,
               socklen_t dst_len);
ssize_t sendv(int fd, const iovec* iov, int iovcnt, int flags);
ssize_t sendmsg(int fd, const msghdr* msg, int flags);
int getpeername(int fd, sockaddr* addr, socklen_t* len);
int getsockname(int fd, sockaddr* addr, socklen_t* len);
int setsockopt(int fd, int level, int name, const void* value, socklen_t len);
int getsockopt(int fd, int level, int name, void* value, socklen_t* len);
off_t iomap(int fd, void* buf, size_t len, int prot, int flags, off_t offset);
int iounmap(int fd, void* buf, size_t len);
ssize_t iowrite(int fd, const void* buf, size_t len, off_t offset, int flags);
int get_flags(int fd);
int set_flags(int fd, int flags);

}  // namespace rdmacm::rsocket
