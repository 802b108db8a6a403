/*
 * libsend_copies.so: how many bytes a sender's library copies per byte it
 * sends (bench/rsocket_speed.py's "copied per byte sent" column).
 *
 *   LD_PRELOAD="libsend_copies.so librdmacm.so.1" SEND_COPIES_OUT=FILE rstream -s ...
 *
 * Preloaded in front of the librdmacm under test, it wraps the rsocket send
 * calls (rsend, rsendto, rsendmsg, rwrite, rwritev, riowrite) and libc's copy
 * calls (memcpy, memmove, mempcpy and their _chk forms). A copy counts when
 * the thread that makes it is inside a send call: the library's own copies,
 * and the verbs provider's (inline data) under it. The bytes the send calls
 * returned are the bytes sent. At exit it appends "COPIED SENT" (two numbers)
 * to $SEND_COPIES_OUT, or prints them on stderr if anything was sent.
 *
 * What it does not see: copies the compiler inlined (fixed small sizes, or a
 * loop it wrote itself), copies made by another thread (a library's service
 * thread), and the kernel's (rxe reading the registered buffer is the wire).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#define EXPORT __attribute__((visibility("default")))

static __thread int in_send __attribute__((tls_model("initial-exec")));
static uint64_t copied, sent;

/* Lazy lookups; a copy asked for while dlsym itself runs (it may copy)
 * is done byte by byte, and counted like any other. */
static __thread int resolving __attribute__((tls_model("initial-exec")));

static void *lookup(const char *name)
{
	void *f;

	resolving++;
	f = dlsym(RTLD_NEXT, name);
	resolving--;
	if (!f) {
		static const char msg[] = "send_copies: a symbol is missing under the preload\n";
		(void)!write(2, msg, sizeof msg - 1);
		abort();
	}
	return f;
}

#define REAL(name) \
	static __typeof__(&name) real_##name; \
	if (!real_##name) \
		real_##name = (__typeof__(&name))lookup(#name)

static void *slow_move(void *dst, const void *src, size_t n)
{
	volatile unsigned char *d = dst;
	const volatile unsigned char *s = src;

	if (d < s)
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
	else
		for (size_t i = n; i-- > 0;)
			d[i] = s[i];
	return dst;
}

static void count(size_t n)
{
	if (in_send)
		__atomic_add_fetch(&copied, n, __ATOMIC_RELAXED);
}

#define COPY(name, end)                                                   \
	EXPORT void *name(void *dst, const void *src, size_t n)           \
	{                                                                 \
		count(n);                                                 \
		if (resolving)                                            \
			return (char *)slow_move(dst, src, n) + end * n;  \
		REAL(name);                                               \
		return real_##name(dst, src, n);                          \
	}
COPY(memcpy, 0)
COPY(memmove, 0)
COPY(mempcpy, 1)  /* returns dst + n */

/* glibc's fortified copies (not declared without _FORTIFY_SOURCE) */
void *__memcpy_chk(void *, const void *, size_t, size_t);
void *__memmove_chk(void *, const void *, size_t, size_t);
void *__mempcpy_chk(void *, const void *, size_t, size_t);
#define COPY_CHK(name, end)                                               \
	EXPORT void *name(void *dst, const void *src, size_t n, size_t m) \
	{                                                                 \
		count(n);                                                 \
		if (resolving)                                            \
			return (char *)slow_move(dst, src, n) + end * n;  \
		REAL(name);                                               \
		return real_##name(dst, src, n, m);                       \
	}
COPY_CHK(__memcpy_chk, 0)
COPY_CHK(__memmove_chk, 0)
COPY_CHK(__mempcpy_chk, 1)

static ssize_t done(ssize_t r)
{
	in_send--;
	if (r > 0)
		__atomic_add_fetch(&sent, (uint64_t)r, __ATOMIC_RELAXED);
	return r;
}

EXPORT ssize_t rsend(int s, const void *buf, size_t len, int flags)
{
	REAL(rsend);
	in_send++;
	return done(real_rsend(s, buf, len, flags));
}

EXPORT ssize_t rsendto(int s, const void *buf, size_t len, int flags,
		       const struct sockaddr *to, socklen_t tolen)
{
	REAL(rsendto);
	in_send++;
	return done(real_rsendto(s, buf, len, flags, to, tolen));
}

EXPORT ssize_t rsendmsg(int s, const struct msghdr *msg, int flags)
{
	REAL(rsendmsg);
	in_send++;
	return done(real_rsendmsg(s, msg, flags));
}

EXPORT ssize_t rwrite(int s, const void *buf, size_t count)
{
	REAL(rwrite);
	in_send++;
	return done(real_rwrite(s, buf, count));
}

EXPORT ssize_t rwritev(int s, const struct iovec *iov, int iovcnt)
{
	REAL(rwritev);
	in_send++;
	return done(real_rwritev(s, iov, iovcnt));
}

/* riowrite returns size_t: the bytes written, or (size_t)-1. */
EXPORT size_t riowrite(int s, const void *buf, size_t count, off_t offset, int flags)
{
	REAL(riowrite);
	in_send++;
	size_t r = real_riowrite(s, buf, count, offset, flags);
	done(r == (size_t)-1 ? -1 : (ssize_t)r);
	return r;
}

__attribute__((destructor)) static void report(void)
{
	const char *path = getenv("SEND_COPIES_OUT");
	char line[64];
	int fd = 2, n;

	n = snprintf(line, sizeof line, "%llu %llu\n",
		     (unsigned long long)__atomic_load_n(&copied, __ATOMIC_RELAXED),
		     (unsigned long long)__atomic_load_n(&sent, __ATOMIC_RELAXED));
	if (path && *path)
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	else if (!__atomic_load_n(&sent, __ATOMIC_RELAXED))
		return; /* nothing sent, nowhere asked: quiet (e.g. under /bin/true) */
	if (fd >= 0 && n > 0)
		(void)!write(fd, line, (size_t)n);
	if (fd > 2)
		close(fd);
}
