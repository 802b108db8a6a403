// repoll: epoll(7) over rsockets and ordinary fds.
//
// A set is a real kernel epoll fd (the epfd the application gets, so it can
// nest it in poll, select or another epoll set), registered in the fd table
// as a file of the wing that is not a socket (file.h), so that rclose(epfd)
// frees it and the socket calls answer ENOTSOCK. Ordinary fds go into the
// kernel set as they are: the kernel keeps their readiness, edge-triggering
// and one-shot. An rsocket's readiness is its state (the poll_state rpoll
// reads); the kernel set holds, edge-triggered, the fd that wakes it (its
// CQ's channel, its CM channel, a listener's accept queue: wait_fd), and the
// set looks at the socket's state only when that fd fired, when the socket
// was just added or modified, when it was ready at the last look (level-
// triggered), when any socket's state changed behind the set's back (the
// state-change broadcast every set holds: state_change.h) and, as rpoll's
// safety net, every wake_up_interval while asleep. So a wait costs the fds
// that fired plus the rsockets ready at the last look, never a scan of the
// set.
//
// A set nested in a set is a member as an rsocket is: its readiness is
// whether a wait on it would report something (its poll_state), its wake fd
// its kernel set; not the kernel set's own readiness, which a socket just
// added or a state change that made nothing ready would give.
//
// Rsockets: level-triggered ones are reported while ready; edge-triggered
// (EPOLLET) ones when their readiness is news (see news()); EPOLLONESHOT
// ones once, then not until EPOLL_CTL_MOD. An rsocket closed with rclose leaves every set (the kernel
// drops a closed fd from epoll sets the same way).
//
// Locks: registry_mutex (the list of sets, for rclose) before a set's mutex,
// before the socket locks poll_state / wait_fd / consume_wakeup take. Nothing
// under a socket lock comes back here. A set's mutex is never held asleep:
// repoll_wait sleeps in epoll_wait without it, so repoll_ctl from another
// thread goes ahead.
#include "common/mutex.h"
#include "rsocket/repoll.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "rsocket/clock.h"
#include "rsocket/config.h"
#include "rsocket/kernel_fds.h"
#include "rsocket/socket.h"
#include "rsocket/spin_budget.h"
#include "rsocket/state_change.h"
#include "rsocket/table.h"

namespace rdmacm::rsocket {
namespace {

// What a kernel event's data says: the set's own fds, or a member by fd and
// generation (a stale event of a deleted member does not match), the top
// bit telling an rsocket's wake fd from an ordinary fd.
constexpr uint64_t kPendingTag = ~0ull;
constexpr uint64_t kStateChangeTag = ~0ull - 1;
constexpr uint64_t kRsocketBit = 1ull << 63;
constexpr uint32_t kGenMask = 0x7fffffff;
constexpr int kBatch = 64;  // kernel events taken per epoll_wait
constexpr uint32_t kSocketEvents = EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP;
constexpr uint32_t kExclusiveOk =
    EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE;

uint64_t tag(int fd, uint32_t gen, bool rsocket) {
  return (rsocket ? kRsocketBit : 0) | (static_cast<uint64_t>(gen & kGenMask) << 32) |
         static_cast<uint32_t>(fd);
}

bool fd_open(int fd) { return fd >= 0 && fcntl(fd, F_GETFD) >= 0; }

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

class EpollSet;
Mutex registry_mutex;  // registry() (taken before no other lock)
std::vector<EpollSet*>& registry() {
  static auto* sets = new std::vector<EpollSet*>;  // never destroyed: rclose at exit
  return *sets;
}
std::atomic<int> live_sets{0};

class EpollSet final : public File {
 public:
  static EpollSet* create(int flags, int* err);

  int control(int op, int fd, const epoll_event* ev);
  int wait(epoll_event* out, int max, int timeout);
  void forget(File* f);

  int set_flags(int flags) override {
    if (fcntl(fd_, F_SETFL, flags) < 0) return -errno;
    fd_flags_ = flags;
    return 0;
  }
  void release(std::unique_ptr<File> self) override;
  // In rpoll (and a set nested in a set): readable while a wait would
  // report something, as the kernel's epoll fd polls (ready_now); it sleeps
  // on the kernel set, which whatever may make it ready fires.
  short poll_state(short events) override {
    if (!(events & POLLIN)) return 0;
    LockGuard lock(mutex_);
    return ready_now() ? POLLIN : 0;
  }
  int wait_fd() override { return fd_; }
  void consume_wakeup() override {}

 private:
  struct Member {
    epoll_data_t data;
    uint32_t events;   // as the application gave them
    uint32_t gen;      // tells this member's kernel events from a predecessor's
    File* file;        // an rsocket or a nested set; null: an ordinary fd, the kernel's business
    int wake_fd = -1;  // the file's wait_fd, as registered in the kernel set
    uint32_t last = 0;  // readiness at the last look
    bool queued = false;    // in check_
    bool activity = false;  // its wake fd brought something since the last look
    bool fresh = false;     // added or modified since the last look
    bool disarmed = false;  // EPOLLONESHOT, reported
    bool send_news = false;  // a send found no room since its last report (news)
    uint64_t looked = 0;    // the check() round that last looked at it
  };
  using Members = std::unordered_map<int, Member>;

  EpollSet() : File(Kind::epoll) {}
  int control_kernel(int op, int fd, const epoll_event* ev, Members::iterator it) REQUIRES(mutex_);
  int control_file(int op, int fd, File* f, const epoll_event* ev, Members::iterator it)
      REQUIRES(mutex_);
  void drop(Members::iterator it) REQUIRES(mutex_);
  int take_kernel(const epoll_event* kev, int n, epoll_event* out, const std::vector<int>& stashed)
      REQUIRES(mutex_);
  Member* member_of(uint64_t tag) REQUIRES(mutex_);
  int take_stash(epoll_event* out, int max, std::vector<int>* fds) REQUIRES(mutex_);
  bool ready_now() REQUIRES(mutex_);
  int check(epoll_event* out, int room, bool peek = false) REQUIRES(mutex_);
  uint32_t look(int fd, Member& m) REQUIRES(mutex_);
  bool news(Member& m, uint32_t ready) REQUIRES(mutex_);
  void queue(int fd, Member& m) REQUIRES(mutex_);
  void queue_all() REQUIRES(mutex_);
  void queue_changed() REQUIRES(mutex_);
  void update_pending() REQUIRES(mutex_);
  int sleep_ms(int timeout, uint64_t start) REQUIRES(mutex_);

  // Everything below but pending_fd_; taken before the member sockets'
  // locks (poll_state, wait_fd, consume_wakeup).
  Mutex mutex_;
  Members members_ GUARDED_BY(mutex_);
  std::deque<int> check_ GUARDED_BY(mutex_);  // rsockets to look at before sleeping (an fd
                                              // may also have stale entries from before a DEL)
  uint64_t round_ GUARDED_BY(mutex_) = 0;     // check() calls, so that one reports an fd once
  // rsocket members (not nested sets: their kernel sets wake this one, and
  // a wait spins only for rsockets)
  unsigned sockets_ GUARDED_BY(mutex_) = 0;
  uint64_t changes_seen_ = 0;  // the state-change log's cursor (under mutex_ once made)
  std::vector<int> changed_ GUARDED_BY(mutex_);  // queue_changed's, kept for its capacity
  SpinBudget spin_;  // how long a wait looks before it sleeps, with rsockets in the set
  uint32_t next_gen_ GUARDED_BY(mutex_) = 0;
  // Ordinary fds' kernel events that ready_now took and no wait reported yet
  // (data: their tag): the next wait reports them first.
  std::vector<epoll_event> stash_ GUARDED_BY(mutex_);
  int pending_fd_ = -1;  // an eventfd in the set, readable while check_ is not empty
  bool pending_ GUARDED_BY(mutex_) = false;
};

EpollSet* EpollSet::create(int flags, int* err) {
  auto* set = new EpollSet;
  set->fd_ = kernel_epoll(flags);
  set->pending_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int bell_fd = state_change_subscribe(&set->changes_seen_);
  epoll_event pending{EPOLLIN, {.u64 = kPendingTag}};
  epoll_event bell{EPOLLIN | EPOLLET, {.u64 = kStateChangeTag}};
  if (bell_fd < 0) {
    *err = bell_fd;
  } else if (set->fd_ < 0 || set->pending_fd_ < 0 ||
             epoll_ctl(set->fd_, EPOLL_CTL_ADD, set->pending_fd_, &pending) ||
             epoll_ctl(set->fd_, EPOLL_CTL_ADD, bell_fd, &bell)) {
    *err = -errno;
  } else if (!insert_file(set->fd_, set)) {
    *err = -ENOMEM;
  } else {
    LockGuard lock(registry_mutex);
    registry().push_back(set);
    ++live_sets;
    return set;
  }
  if (bell_fd >= 0) state_change_unsubscribe();
  if (set->fd_ >= 0) ::close(set->fd_);
  if (set->pending_fd_ >= 0) ::close(set->pending_fd_);
  delete set;
  return nullptr;
}

void EpollSet::release(std::unique_ptr<File>) {
  {
    LockGuard lock(registry_mutex);
    std::erase(registry(), this);
    --live_sets;
  }
  ::close(fd_);  // the kernel set, and with it every registration
  ::close(pending_fd_);
  state_change_unsubscribe();
}

void EpollSet::drop(Members::iterator it) {
  Member& m = it->second;
  if (m.file) {
    if (m.wake_fd >= 0) epoll_ctl(fd_, EPOLL_CTL_DEL, m.wake_fd, nullptr);
    if (socket_of(m.file)) --sockets_;
  }
  members_.erase(it);
}

void EpollSet::forget(File* f) {
  LockGuard lock(mutex_);
  auto it = members_.find(f->fd());
  if (it != members_.end() && it->second.file == f) drop(it);
}

int EpollSet::control(int op, int fd, const epoll_event* ev) {
  File* f = find_file(fd);  // an rsocket or a set; else an ordinary fd
  LockGuard lock(mutex_);
  auto it = members_.find(fd);
  // A member whose fd was closed without EPOLL_CTL_DEL, its number now
  // another kind of fd: gone, as the kernel forgets a closed fd.
  if (it != members_.end() && (it->second.file != nullptr) != (f != nullptr)) {
    drop(it);
    it = members_.end();
  }
  return f ? control_file(op, fd, f, ev, it) : control_kernel(op, fd, ev, it);
}

int EpollSet::control_kernel(int op, int fd, const epoll_event* ev, Members::iterator it) {
  if (op != EPOLL_CTL_ADD && it == members_.end()) return -ENOENT;
  uint32_t gen = op == EPOLL_CTL_ADD ? ++next_gen_ & kGenMask : it->second.gen;
  epoll_event kev{ev ? ev->events : 0, {.u64 = tag(fd, gen, false)}};
  if (epoll_ctl(fd_, op, fd, &kev)) {
    int err = errno;
    // Closed since: the kernel has forgotten it already.
    if (it != members_.end() && (err == ENOENT || err == EBADF)) members_.erase(it);
    return -err;
  }
  std::erase_if(stash_, [fd](const epoll_event& e) { return static_cast<int>(e.data.u64) == fd; });
  if (op == EPOLL_CTL_DEL)
    members_.erase(it);
  else  // ADD also replaces the entry of an fd closed without DEL
    members_[fd] = Member{ev->data, ev->events, gen, nullptr};
  return 0;
}

// An rsocket, or a set nested in this one: readable while a wait on it would
// report something (its poll_state), not while its kernel set holds events
// (a socket just added to it, a state change that made nothing ready).
int EpollSet::control_file(int op, int fd, File* f, const epoll_event* ev,
                           Members::iterator it) {
  bool exists = it != members_.end();
  if (op == EPOLL_CTL_ADD && exists) return -EEXIST;
  if (op != EPOLL_CTL_ADD && !exists) return -ENOENT;
  if (op == EPOLL_CTL_DEL) {
    drop(it);
    return 0;
  }
  // The kernel's rules for EPOLLEXCLUSIVE (meaningless here: one waiter
  // takes each event anyway).
  if (ev->events & EPOLLEXCLUSIVE) {
    if (op == EPOLL_CTL_MOD || (ev->events & ~kExclusiveOk)) return -EINVAL;
  } else if (op == EPOLL_CTL_MOD && (it->second.events & EPOLLEXCLUSIVE)) {
    return -EINVAL;
  }
  if (op == EPOLL_CTL_ADD) {
    uint32_t gen = ++next_gen_ & kGenMask;
    bool socket = socket_of(f) != nullptr;
    int wake = -1;
    if (!socket) {
      // A set's wake fd is its kernel set, registered at once: the kernel
      // refuses a loop or too deep a nest (ELOOP), as it would here.
      wake = f->wait_fd();
      epoll_event kev{EPOLLIN | EPOLLET, {.u64 = tag(fd, gen, true)}};
      if (epoll_ctl(fd_, EPOLL_CTL_ADD, wake, &kev)) return -errno;
    }
    it = members_.emplace(fd, Member{ev->data, ev->events, gen, f, wake}).first;
    if (socket) ++sockets_;
  }
  Member& m = it->second;
  m.data = ev->data;
  m.events = ev->events;
  m.disarmed = false;
  m.fresh = true;
  queue(fd, m);
  update_pending();  // wakes a waiter to look at it
  return 0;
}

void EpollSet::queue(int fd, Member& m) {
  if (m.queued) return;
  m.queued = true;
  check_.push_back(fd);
}

void EpollSet::queue_all() {
  for (auto& [fd, m] : members_)
    if (m.file) queue(fd, m);
}

// The rsockets whose state changed since the last bell (or all of them, if
// more changed than the log keeps).
void EpollSet::queue_changed() {
  changed_.clear();
  if (!state_changes_since(&changes_seen_, &changed_)) return queue_all();
  for (int fd : changed_) {
    auto it = members_.find(fd);
    if (it != members_.end() && it->second.file) queue(fd, it->second);
  }
}

// The pending eventfd is readable exactly while some rsocket waits for a
// look or a stashed event for a wait, so the kernel fd polls readable then
// (nesting) and waiters wake (a look in rpoll took that event from under
// another thread's epoll_wait).
void EpollSet::update_pending() {
  if ((check_.empty() && stash_.empty()) == !pending_) return;
  uint64_t c = 1;
  if (pending_) {
    if (::read(pending_fd_, &c, sizeof(c)) < 0) {
      // Already empty.
    }
  } else if (::write(pending_fd_, &c, sizeof(c)) < 0) {
    // Cannot fill up: one write at a time.
  }
  pending_ = !pending_;
}

// Arms the socket's wake-up (registering its wake fd if it changed, as when
// a connecting socket gets its CQ), then reads its state: anything that
// happens after the arming fires the wake fd.
uint32_t EpollSet::look(int fd, Member& m) {
  File* s = m.file;
  int wake = s->wait_fd();
  if (wake != m.wake_fd) {
    if (m.wake_fd >= 0) epoll_ctl(fd_, EPOLL_CTL_DEL, m.wake_fd, nullptr);
    epoll_event kev{EPOLLIN | EPOLLET, {.u64 = tag(fd, m.gen, true)}};
    m.wake_fd = epoll_ctl(fd_, EPOLL_CTL_ADD, wake, &kev) ? -1 : wake;
    // A wake-up from before (a blocking rconnect's, or one that came while
    // the socket was out of the set) is no news: the look below sees what it
    // brought. Taking it used up the arming, so arm again, or nothing would
    // wake this set until the next timeout (redis-benchmark, which deletes
    // and adds its connection around every request, waited for its 250 ms
    // timer each time).
    if (readable(wake)) {
      s->consume_wakeup();
      s->wait_fd();
    }
  }
  uint32_t interest = (m.events & kSocketEvents) | EPOLLERR | EPOLLHUP;
  // poll(2)'s and epoll(7)'s bits have the same values.
  short polled = s->poll_state(static_cast<short>(interest & (POLLIN | POLLOUT | POLLPRI | POLLRDHUP)));
  uint32_t ready = static_cast<uint16_t>(polled) & (kSocketEvents | EPOLLERR | EPOLLHUP);
  if (ready & EPOLLHUP) ready |= EPOLLRDHUP;  // the peer's side is closed too
  return ready & interest;
}

// Kernel events: ordinary fds go out as the kernel reports them; an
// rsocket's wake fd queues it for a look.
// The member a kernel event's tag names, if it is still the one the
// kernel queued the event for.
EpollSet::Member* EpollSet::member_of(uint64_t t) {
  auto it = members_.find(static_cast<int>(static_cast<uint32_t>(t)));
  if (it == members_.end() || it->second.gen != ((t >> 32) & kGenMask) ||
      !(t & kRsocketBit) != !it->second.file)
    return nullptr;  // deleted (and perhaps added again) since
  return &it->second;
}

// The stashed events (ready_now's) of members still there; their fds in *fds.
int EpollSet::take_stash(epoll_event* out, int max, std::vector<int>* fds) {
  int got = 0;
  size_t i = 0;
  for (; i < stash_.size() && got < max; ++i) {
    Member* m = member_of(stash_[i].data.u64);
    if (!m) continue;
    fds->push_back(static_cast<int>(static_cast<uint32_t>(stash_[i].data.u64)));
    out[got++] = {stash_[i].events, m->data};
  }
  stash_.erase(stash_.begin(), stash_.begin() + static_cast<std::ptrdiff_t>(i));
  return got;
}

// stashed: ordinary fds this wait reported from the stash already (a
// level-triggered one comes again from the kernel).
int EpollSet::take_kernel(const epoll_event* kev, int n, epoll_event* out,
                          const std::vector<int>& stashed) {
  int got = 0;
  for (int i = 0; i < n; ++i) {
    uint64_t t = kev[i].data.u64;
    if (t == kPendingTag) continue;  // update_pending's business
    if (t == kStateChangeTag) {  // reported as one if it made something new
      queue_changed();
      continue;
    }
    Member* mp = member_of(t);
    if (!mp) continue;
    Member& m = *mp;
    int fd = static_cast<int>(static_cast<uint32_t>(t));
    if (!m.file) {
      if (std::find(stashed.begin(), stashed.end(), fd) == stashed.end())
        out[got++] = {kev[i].events, m.data};
      continue;
    }
    // Only if still there: another thread (the application's rrecv or
    // rsend) may have taken the event, and what it brought; taking one that
    // is not there would sleep.
    if (m.wake_fd >= 0 && readable(m.wake_fd)) {
      m.file->consume_wakeup();
      m.activity = true;
    }
    queue(fd, m);
  }
  return got;
}

// Whether an edge-triggered member's readiness is news: ready for something
// it was not at the last look; just added or modified; readable after a
// completion (it does not say what it brought, and a spurious report costs
// the application one EAGAIN where a missed one would hang it); or room to
// send after a send found none (completions of our own, credits sent and
// acknowledged, are no news for a writer).
bool EpollSet::news(Member& m, uint32_t ready) {
  if (ready & ~m.last) return true;
  if (m.fresh) return ready != 0;
  if (m.activity && (ready & ~static_cast<uint32_t>(EPOLLOUT))) return true;
  if ((ready & EPOLLOUT) && !m.send_news) m.send_news = socket_of(m.file)->take_send_blocked();
  return (ready & EPOLLOUT) && m.send_news;
}

// Whether a wait would report anything now, reporting nothing: takes the
// kernel's events (an ordinary fd's goes to stash_, for the next wait) and
// looks at the queued rsockets; one that a wait would report stays queued
// as it was (the pending eventfd keeps the kernel set readable), the others
// are looked at as a wait would.
bool EpollSet::ready_now() {
  epoll_event kev[kBatch];
  int n = epoll_wait(fd_, kev, kBatch, 0);
  for (int i = 0; i < n; ++i) {
    Member* m = kev[i].data.u64 < kStateChangeTag ? member_of(kev[i].data.u64) : nullptr;
    if (m && !m->file) {
      stash_.push_back(kev[i]);
      kev[i].data.u64 = kPendingTag;  // not take_kernel's
    }
  }
  take_kernel(kev, std::max(n, 0), nullptr, {});
  bool any = !stash_.empty() || check(nullptr, 1, true);
  update_pending();
  return any;
}

// Looks at the queued rsockets, each at most once, until room runs out.
// peek (ready_now): reports none; one that would be reported stays queued
// as it was, and counts.
int EpollSet::check(epoll_event* out, int room, bool peek) {
  int got = 0;
  ++round_;
  for (size_t n = check_.size(); n && got < room; --n) {
    int fd = check_.front();
    check_.pop_front();
    auto it = members_.find(fd);
    if (it == members_.end() || !it->second.queued) continue;
    Member& m = it->second;
    // A stale entry of an fd deleted and added again while queued: its
    // live entry is further on, and the fd is looked at once per round.
    if (m.looked == round_) continue;
    m.looked = round_;
    m.queued = false;
    if (m.disarmed) continue;
    uint32_t ready = look(fd, m);
    bool edge = m.events & EPOLLET;
    bool report = !edge ? ready != 0 : news(m, ready);
    if (report && peek) {
      ++got;
      queue(fd, m);
      continue;
    }
    m.last = ready;
    m.activity = m.fresh = false;
    if (report) {
      if (ready & EPOLLOUT) {  // reported
        socket_of(m.file)->take_send_blocked();
        m.send_news = false;
      }
      out[got++] = {ready, m.data};
      if (m.events & EPOLLONESHOT) m.disarmed = true;
    }
    if (ready && !edge && !m.disarmed) queue(fd, m);  // level-triggered: again next time
  }
  return got;
}

// How long the next epoll_wait may sleep: what is left of the timeout,
// at most wake_up_interval while rsockets are in the set.
int EpollSet::sleep_ms(int timeout, uint64_t start) {
  int ms = timeout;
  if (timeout > 0) {
    uint64_t spent = (now_us() - start) / 1000;
    ms = spent >= static_cast<uint64_t>(timeout) ? 0 : timeout - static_cast<int>(spent);
  }
  if (sockets_ && ms != 0) {
    int interval = std::max(config().wake_up_interval, 1);
    ms = ms < 0 ? interval : std::min(ms, interval);
  }
  return ms;
}

// With rsockets in the set, a wait first looks without sleeping for as long
// as the set's spin budget says (spin_budget.h): a reply one round trip away
// is taken without a sleep and a wake-up. A set of ordinary fds only is the
// kernel's epoll, unchanged.
int EpollSet::wait(epoll_event* out, int max, int timeout) {
  const uint64_t start = timeout ? now_us() : 0;
  const uint64_t spin_us = timeout ? spin_.us() : 0;
  epoll_event kev[kBatch];
  std::vector<int> stashed;
  for (;;) {
    int ms, got;
    {
      LockGuard lock(mutex_);
      stashed.clear();
      got = take_stash(out, max, &stashed);
      if (got == max) {
        update_pending();
        return got;
      }
      ms = check_.empty() && !got ? sleep_ms(timeout, start) : 0;
      if (ms && sockets_ && now_us() - start < spin_us) ms = 0;
    }
    int n = epoll_wait(fd_, kev, std::min(max - got, kBatch), ms);
    if (n < 0) return got ? got : -errno;  // EINTR included, as epoll_wait
    LockGuard lock(mutex_);
    got += take_kernel(kev, n, out + got, stashed);
    // Slept the whole interval: rpoll's safety net, a look at every rsocket.
    if (!n && ms > 0 && sockets_) queue_all();
    got += check(out + got, max - got);
    update_pending();
    if (got || !timeout ||
        (timeout > 0 && (now_us() - start) / 1000 >= static_cast<uint64_t>(timeout))) {
      if (timeout) spin_.learn(now_us() - start);
      return got;
    }
  }
}

// The set behind a file, if it is one (the kernel's is_file_epoll).
EpollSet* set_of(File* f) {
  return f && f->kind() == File::Kind::epoll ? static_cast<EpollSet*>(f) : nullptr;
}

// epfd's set, or the error epoll_ctl/epoll_wait give for such an epfd.
int find_set(int epfd, EpollSet** set) {
  File* f = find_file(epfd);
  if (!f) return fd_open(epfd) ? -EINVAL : -EBADF;
  *set = set_of(f);
  return *set ? 0 : -EINVAL;
}

}  // namespace

int repoll_create(int flags) {
  // epoll_create1's flags (rdma-core 44 ignores bits it does not know).
  if (flags & ~EPOLL_CLOEXEC) return -EINVAL;
  int err = 0;
  EpollSet* set = EpollSet::create(flags, &err);
  return set ? set->fd() : err;
}

// In the kernel's order: the event's address, the fds, then the rest.
int repoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  if (op != EPOLL_CTL_DEL && !event) return -EFAULT;
  if (!find_file(epfd) && !fd_open(epfd)) return -EBADF;
  if (!find_file(fd) && !fd_open(fd)) return -EBADF;
  EpollSet* set;
  if (int err = find_set(epfd, &set)) return err;
  if (fd == epfd) return -EINVAL;
  if (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD && op != EPOLL_CTL_DEL) return -EINVAL;
  return set->control(op, fd, event);
}

int repoll_wait(int epfd, epoll_event* events, int maxevents, int timeout) {
  if (maxevents <= 0 || maxevents > INT_MAX / static_cast<int>(sizeof(epoll_event)))
    return -EINVAL;
  if (!events) return -EFAULT;
  EpollSet* set;
  if (int err = find_set(epfd, &set)) return err;
  return set->wait(events, maxevents, timeout);
}

void repoll_forget(File* f) {
  if (!live_sets.load(std::memory_order_acquire)) return;
  LockGuard lock(registry_mutex);
  for (EpollSet* set : registry()) set->forget(f);
}

}  // namespace rdmacm::rsocket
