// Clang's thread-safety annotations (-Wthread-safety), as macros that vanish
// under other compilers. The idiom and names are those of clang's
// ThreadSafetyAnalysis documentation (also abseil's thread_annotations.h):
//
//   GUARDED_BY(mu)       this member is read and written only with mu held
//   PT_GUARDED_BY(mu)    what this pointer points to is (the pointer is not)
//   REQUIRES(mu)         the caller holds mu (exclusively)
//   EXCLUDES(mu)         the caller does not hold mu (the function takes it)
//   ACQUIRE / RELEASE    the function takes / lets go of the capability
//   TRY_ACQUIRE(ok, mu)  takes it when the function returns ok
//   ACQUIRED_AFTER(mu)   a lock order: this lock is taken after mu, not before
//   RETURN_CAPABILITY(mu) the function returns (a reference to) mu
//   NO_THREAD_SAFETY_ANALYSIS  not checked: give the reason on the same line
//
// The library builds with -Wthread-safety -Werror=thread-safety under clang
// (RDMACM_THREAD_SAFETY; tests/thread_safety proves the check bites).
// std::mutex carries no annotations in libstdc++: lock through common/mutex.h.
#pragma once

#if defined(__clang__)
#define RDMACM_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define RDMACM_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) RDMACM_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY RDMACM_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) RDMACM_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) RDMACM_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) RDMACM_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) RDMACM_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) RDMACM_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) RDMACM_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) RDMACM_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) RDMACM_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) RDMACM_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) RDMACM_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) RDMACM_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) RDMACM_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) RDMACM_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) RDMACM_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) RDMACM_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS RDMACM_THREAD_ANNOTATION(no_thread_safety_analysis)
