// What an fd of the wing stands for, as the fd table and repoll hold it:
// the kernel's struct file, beside which the socket operations (socket.h,
// the kernel's proto_ops) are a second layer. An rsocket is one kind of
// file, a repoll set the other; each kind has a typed accessor, as the
// kernel's sock_from_file (socket_of in socket.h, repoll.cpp's set_of).
#pragma once

#include <memory>

namespace rdmacm::rsocket {

class File {
 public:
  // What the fd is (the kernel tells by f_op).
  enum class Kind { socket, epoll };

  virtual ~File() = default;

  Kind kind() const { return kind_; }
  // The fd the application knows this file by.
  int fd() const { return fd_; }

  // rfcntl's F_GETFL / F_SETFL.
  int flags() const { return fd_flags_; }
  virtual int set_flags(int flags) = 0;

  // rpoll's and repoll's view. poll_state answers events ready now, after
  // processing what completed (never sleeping); wait_fd is the fd to sleep
  // on when nothing is (armed first); consume_wakeup is called when that fd
  // fired.
  virtual short poll_state(short events) = 0;
  virtual int wait_fd() = 0;
  virtual void consume_wakeup() = 0;

  // rclose, once the fd has left the table and every repoll set: the file
  // takes its own ownership over (the kernel's release). It may keep itself
  // a while (a stream lingering for its peer's close: service.cpp); if not,
  // it is gone when this returns.
  virtual void release(std::unique_ptr<File> self) = 0;

 protected:
  explicit File(Kind kind) : kind_(kind) {}

  int fd_ = -1;
  int fd_flags_ = 0;

 private:
  const Kind kind_;
};

}  // namespace rdmacm::rsocket
