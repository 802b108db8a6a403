// The C library's own socket and I/O calls, found with dlsym(RTLD_NEXT) on
// first use. Nothing here depends on a constructor having run: a program (or
// another library's constructor) may call read() or recv() before this module
// was initialised, and those calls must reach libc, not a null pointer.
#pragma once

#include <atomic>
#include <stddef.h>

namespace rspreload {

// dlsym(RTLD_NEXT, name); aborts with a message when libc lacks the symbol
// (a call we forward to must exist).
void* next_symbol(const char* name);

template <typename Fn>
class NextCall {
 public:
  explicit constexpr NextCall(const char* name) : name_(name) {}

  Fn get() {
    Fn fn = fn_.load(std::memory_order_acquire);
    if (!fn) {
      fn = reinterpret_cast<Fn>(next_symbol(name_));
      fn_.store(fn, std::memory_order_release);
    }
    return fn;
  }

  template <typename... Args>
  auto operator()(Args... args) {
    return get()(args...);
  }

 private:
  const char* name_;
  std::atomic<Fn> fn_{nullptr};
};

}  // namespace rspreload

// real::name(...) calls libc's `name`.
#define RSPRELOAD_REAL(name) \
  inline ::rspreload::NextCall<decltype(&::name)> name { #name }
