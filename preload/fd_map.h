// The program's descriptors that stand for something inside librdmacm.
//
// Every rsocket (and every repoll set) the interposer creates is given to the
// program as a descriptor of the kernel's own: a TCP/UDP socket of the same
// domain and type for an rsocket (an epoll instance for a repoll set), the
// "placeholder". The placeholder keeps the number reserved, answers fstat(),
// F_GETFD and options an rsocket cannot honour as a socket would, shares
// dup()s as the kernel does, and is the very socket a connection falls back
// to when no RDMA route exists. The map says, per descriptor number, which
// librdmacm descriptor it stands for.
//
// Lookups are lock-free (two-level array of atomic pointers, as rdma-core's
// indexer): read() and write() on every descriptor of the process pass here.
// Entries are shared by the dup()s of a placeholder and freed with the last;
// like rdma-core, closing a descriptor while another thread uses it is the
// program's race.
#pragma once

#include <atomic>
#include <sys/socket.h>
#include <sys/types.h>

namespace rspreload {

enum class Kind : int {
  kernel,        // not (or no longer) ours: every call goes to libc
  rsocket,       // calls go to librdmacm's r* calls on `rfd`
  repoll,        // an epoll instance: calls go to repoll_* on `rfd`
  fork_pending,  // RDMAV_FORK_SAFE: a TCP socket that becomes an rsocket on first I/O
};

enum class ForkRole : int { none, listening, active, passive };

struct Entry {
  std::atomic<Kind> kind{Kind::kernel};
  std::atomic<int> refs{1};  // descriptors of the program sharing this entry
  int rfd = -1;              // the descriptor inside librdmacm
  int domain = 0;
  ForkRole fork = ForkRole::none;
  std::atomic<pid_t> mover{0};  // fork_pending: the process one of whose threads moves it (fork.cpp)
  sockaddr_storage bound{};  // what bind() gave, for a fall back to TCP
  socklen_t bound_len = 0;
  // A listener whose placeholder listens on kernel TCP too (listener.h).
  std::atomic<bool> twin{false};
  std::atomic<unsigned> turn{0};  // which side accept() looks at first
};

// The entry of `fd`, or null when `fd` is an ordinary descriptor.
Entry* find_entry(int fd);

// `fd` now stands for `e` (a new entry, or one shared after dup()); returns
// false when memory runs out. An entry left at `fd` by a close we could not
// see is dropped first.
bool map_fd(int fd, Entry* e);

// Maps `fd` to a new entry of `kind` standing for librdmacm descriptor `rfd`
// (-1 for none); false when memory runs out (`fd` stays an ordinary
// descriptor, and an `rfd` given is the caller's to close).
bool map_new(int fd, Kind kind, int rfd, int domain, ForkRole fork = ForkRole::none);

// Forgets `fd` (before the caller closes the placeholder, so the number is
// never reused while still mapped); returns its entry with one reference
// still to drop, or null.
Entry* unmap_fd(int fd);

// Drops one reference; the last closes `e->rfd` in librdmacm and frees `e`.
// Returns rclose's result (0 when other references remain).
int release(Entry* e);

// Calls `fn` on every descriptor mapped now (a process just forked: no other
// thread runs).
void for_each_entry(void (*fn)(int fd, Entry* e));

// Entry of `fd` when it is an rsocket, else null: the hot path of every call.
// A fork-pending socket (RDMAV_FORK_SAFE) becomes an rsocket here, on its
// first use after accept() or connect() (fork.cpp).
Entry* rsocket_entry(int fd);
// An rsocket's entry, or an epoll descriptor's that stands for a repoll set
// (pollable as the set: readable while a member is ready): what rpoll
// watches in the descriptor's place (e->rfd).
Entry* rpoll_entry(int fd);

}  // namespace rspreload
