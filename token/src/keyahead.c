/* SPDX-License-Identifier: MIT */
/*
 * EC key pairs made ahead (docs/token.md "Key pairs made ahead"): up to
 * KA_DEPTH spare P-256 and P-384 key pairs per process, made by a helper
 * thread while the callers that took them wait for their records' fdatasync,
 * so a C_GenerateKeyPair of those curves does not wait for the curve
 * arithmetic too (DESIGN.md's key generation figure, docs/benchmarks.md).
 * The helper is woken when a take leaves KA_LOW or fewer, and then fills the
 * curve's stack up again: one wake-up every few pairs, not one a pair.
 *
 * What a spare is: a key pair EVP_PKEY_generate made from the curve's
 * parameters in the token's library context and exported (tok_ec_make),
 * exactly as the caller's thread would have; it is handed out once, then
 * belongs to the caller. It lives in this process's memory only, like every
 * session key, and is cleansed when taken, at C_Finalize and at exit. Pairs
 * made but never taken are CPU time spent for nothing: at most KA_DEPTH per
 * curve a process used.
 *
 * The rules that keep one key from ever being handed out twice:
 *  - a spare is taken under the lock and its slot cleansed in the same step;
 *  - a child of fork() starts with no spare and no helper: the spares' page
 *    is MADV_WIPEONFORK (zeros in the child), tok_ahead_atfork_child() wipes
 *    it too (the child's own C_Initialize follows), and tok_ahead_take()
 *    compares the owner's pid, for a clone() that ran no fork handler on a
 *    kernel without MADV_WIPEONFORK;
 *  - the page is MADV_DONTDUMP: no spare is in a core dump;
 *  - the helper runs at SCHED_IDLE: it never preempts a caller, and when the
 *    CPUs are busy the stack stays empty and callers make their keys themselves.
 *
 * Where it runs: anywhere the scheduler puts it, normally a CPU other than the
 * caller's. Pinning it to the caller's CPU (so its wake-up is local and it runs
 * only while that caller sleeps) was measured too and lost whenever the
 * fdatasync was short: a pair no longer fitted in the caller's sleep
 * (docs/benchmarks.md "EC key pairs made ahead").
 *
 * The helper stops (joined) at tok_crypto_fini and in an atexit handler
 * registered after OpenSSL's own, so it is never inside OpenSSL when
 * OPENSSL_cleanup runs at a process exit without C_Finalize.
 *
 * Secret key bytes drawn ahead (tok_ahead_secret): the private DRBG re-keys
 * its AES-CTR state on every generate call, which is most of the cost of a
 * 32-byte AES key, and after the caller's previous fdatasync it runs with a
 * cold cache (docs/benchmarks.md "AES key generation"). One call now draws
 * SB_SIZE bytes; each key takes the next len bytes, which are cleansed from
 * the pool as they are taken. The same rules as for the spares: taken under a
 * lock, gone in any child (the page is MADV_WIPEONFORK; else wiped by the fork
 * handler and on a pid change), wiped at C_Finalize and at exit; off with
 * keygen_ahead.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "engine_internal.h"

/* Spares per curve, and how few are left when a take wakes the helper: it is
 * woken once every KA_DEPTH - KA_LOW pairs, not for every pair. A wake-up of a
 * sleeping thread on another CPU cost the caller 15 µs at the median on the
 * 2-vCPU VM of docs/benchmarks.md ("EC key pairs made ahead, eight at a
 * time"): a third of what a P-256 key generation spends beyond its fdatasync. */
#define KA_DEPTH TOK_AHEAD_DEPTH
#define KA_LOW (TOK_AHEAD_DEPTH / 2)

/* The spares are on pages of their own, as the secret bytes below are:
 * MADV_WIPEONFORK (zeros in any child, fork handler or not) and MADV_DONTDUMP
 * (never in a core dump). */
struct ka_page {
	struct tok_ec_pair key[TOK_NCURVES][KA_DEPTH]; /* key[c][0 .. n[c] - 1] */
	unsigned n[TOK_NCURVES]; /* here too: a wiped page holds no spare */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct ka_page *page; /* the spares, mapped at the first take */
	size_t map_len;
	bool no_page; /* no memory for it, or the process exits: no spares */
	bool fill[TOK_NCURVES]; /* the helper makes pairs of c until it holds KA_DEPTH */
	bool waiting;           /* the helper sleeps on cv */
	pid_t owner;            /* the process the spares and the helper are of */
	bool running, stop, no_thread, atexit_set;
	uint64_t taken; /* spares handed out (tests, docs/benchmarks.md) */
	pthread_t th;
} ka = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

#define SB_SIZE 2048 /* 64 AES-256 keys */
#define SB_MAX 64    /* a longer secret comes from the DRBG directly */
/* The pool is a page of its own: MADV_WIPEONFORK makes it read as zeros
 * (left == 0) in any child, fork handler or not, and MADV_DONTDUMP keeps it
 * out of core dumps. Where the kernel has no MADV_WIPEONFORK (before 4.14)
 * the owner's pid is compared instead, a getpid() a key. */
struct sb_page {
	size_t left; /* bytes not yet taken: the last left of buf */
	pid_t owner; /* without wipe_on_fork: the process that filled buf */
	uint8_t buf[SB_SIZE];
};
static struct {
	pthread_mutex_t mu;
	struct sb_page *p; /* mapped at the first use */
	size_t map_len;
	bool wipe_on_fork, no_page, atexit_set;
} sb = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* A private mapping of at least len bytes for key material: read as zeros in
 * any child (*wipe_on_fork, where the kernel has MADV_WIPEONFORK: 4.14 on),
 * left out of core dumps. NULL: no memory. */
static void *key_map(size_t len, size_t *map_len, bool *wipe_on_fork)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	void *m;

	*map_len = (len + pg - 1) / pg * pg;
	m = mmap(NULL, *map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	*wipe_on_fork = madvise(m, *map_len, MADV_WIPEONFORK) == 0;
	(void)madvise(m, *map_len, MADV_DONTDUMP);
	return m;
}

/* Caller holds ka.mu: no spare, none asked for, no helper running. */
static void forget_locked(void)
{
	if (ka.page)
		OPENSSL_cleanse(ka.page, sizeof(*ka.page)); /* the counts too */
	for (int c = 0; c < TOK_NCURVES; c++)
		ka.fill[c] = false;
	ka.running = false;
}

static int wanted_locked(void)
{
	for (int c = 0; c < TOK_NCURVES; c++)
		if (ka.fill[c] && ka.page->n[c] < KA_DEPTH) /* fill: there is a page */
			return c;
	return -1;
}

static void *helper(void *arg)
{
	const struct sched_param sp = { 0 };

	(void)arg;
	(void)pthread_setname_np(pthread_self(), "softtoken-keys");
	/* runs only on a CPU nothing else wants; failure leaves it SCHED_OTHER */
	(void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	pthread_mutex_lock(&ka.mu);
	for (;;) {
		int c;

		while (!ka.stop && (c = wanted_locked()) < 0) {
			ka.waiting = true;
			pthread_cond_wait(&ka.cv, &ka.mu);
			ka.waiting = false;
		}
		if (ka.stop)
			break;
		pthread_mutex_unlock(&ka.mu);
		struct tok_ec_pair kp;
		bool ok = tok_ec_make(c, &kp); /* failed: the next caller makes its own */
		pthread_mutex_lock(&ka.mu);
		if (ok && !ka.stop && ka.fill[c] && ka.page->n[c] < KA_DEPTH)
			ka.page->key[c][ka.page->n[c]++] = kp;
		if (!ok || ka.page->n[c] >= KA_DEPTH) /* full, or asked again at the next take */
			ka.fill[c] = false;
		OPENSSL_cleanse(&kp, sizeof(kp));
	}
	pthread_mutex_unlock(&ka.mu);
	return NULL;
}

static void stop_helper(void)
{
	bool join;

	pthread_mutex_lock(&ka.mu);
	join = ka.running && ka.owner == getpid();
	ka.stop = true;
	pthread_cond_broadcast(&ka.cv);
	pthread_mutex_unlock(&ka.mu);
	if (join)
		(void)pthread_join(ka.th, NULL);
	pthread_mutex_lock(&ka.mu);
	forget_locked();
	pthread_mutex_unlock(&ka.mu);
}

/* Process exit: before OPENSSL_cleanup (registered earlier, so run later);
 * or dlclose() of the module, which runs what was registered with its
 * __dso_handle. That is what atexit() does in a shared object, and it is
 * called by its name here because a sanitizer's atexit() drops the handle
 * (ThreadSanitizer's then calls into the unloaded module at exit). */
extern void *__dso_handle;
int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

/* Caller holds sb.mu. */
static void secret_wipe_locked(void)
{
	if (sb.p)
		OPENSSL_cleanse(sb.p, sizeof(*sb.p));
}

/* Process exit or dlclose(): nobody calls in any more. */
static void secret_at_exit(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&sb.mu);
	secret_wipe_locked();
	if (sb.p)
		munmap(sb.p, sb.map_len);
	sb.p = NULL;
	sb.no_page = true;
	pthread_mutex_unlock(&sb.mu);
}

/* Caller holds sb.mu: the page, mapped (false: no memory, or at exit). */
static bool secret_page_locked(void)
{
	if (sb.p || sb.no_page)
		return sb.p != NULL;
	if (!sb.atexit_set) {
		if (__cxa_atexit(secret_at_exit, NULL, &__dso_handle) != 0)
			return false;
		sb.atexit_set = true;
	}
	sb.p = key_map(sizeof(*sb.p), &sb.map_len, &sb.wipe_on_fork);
	return sb.p != NULL;
}

static void at_exit(void *arg)
{
	(void)arg;
	stop_helper(); /* ka.stop stays set: no helper starts again */
	pthread_mutex_lock(&ka.mu);
	if (ka.page) /* cleansed by stop_helper */
		munmap(ka.page, ka.map_len);
	ka.page = NULL;
	ka.no_page = true;
	pthread_mutex_unlock(&ka.mu);
}

/* Caller holds ka.mu. */
static void start_locked(void)
{
	sigset_t all, old;

	if (ka.running || ka.stop || ka.no_thread)
		return;
	if (!ka.atexit_set) {
		if (__cxa_atexit(at_exit, NULL, &__dso_handle) != 0) {
			ka.no_thread = true;
			return;
		}
		ka.atexit_set = true;
	}
	/* the helper takes no signal of the application's */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ka.running = pthread_create(&ka.th, NULL, helper, NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* no thread (RLIMIT_NPROC, a seccomp filter): the callers make every key */
	ka.no_thread = !ka.running;
}

bool tok_ahead_take(int curve, struct tok_ec_pair *out)
{
	pid_t me = getpid();
	bool got;

	if (!tok_algs.keygen_ahead)
		return false;
	pthread_mutex_lock(&ka.mu);
	if (ka.owner != me) { /* first use, or a clone() that ran no fork handler */
		forget_locked(); /* the parent's spares: never handed out here */
		ka.owner = me;
	}
	if (!ka.page && !ka.no_page) {
		bool wof;
		ka.page = key_map(sizeof(*ka.page), &ka.map_len, &wof);
		ka.no_page = !ka.page; /* no memory: the callers make every pair */
	}
	if (!ka.page) {
		pthread_mutex_unlock(&ka.mu);
		return false;
	}
	got = ka.page->n[curve] > 0;
	if (got) {
		struct tok_ec_pair *k = &ka.page->key[curve][--ka.page->n[curve]];
		*out = *k;
		OPENSSL_cleanse(k, sizeof(*k));
		ka.taken++;
	}
	if (ka.page->n[curve] <= KA_LOW && !ka.fill[curve]) {
		ka.fill[curve] = true;
		start_locked();
		if (ka.running && ka.waiting) /* else it looks again before it sleeps */
			pthread_cond_signal(&ka.cv);
	}
	pthread_mutex_unlock(&ka.mu);
	return got;
}

bool tok_ahead_secret(uint8_t *out, size_t len)
{
	struct sb_page *p;
	bool ok = true;

	if (!tok_algs.keygen_ahead || !len || len > SB_MAX)
		return false;
	pthread_mutex_lock(&sb.mu);
	if (!secret_page_locked()) {
		pthread_mutex_unlock(&sb.mu);
		return false;
	}
	p = sb.p;
	if (!sb.wipe_on_fork && p->owner != getpid()) {
		/* first use, or a clone() that ran no fork handler */
		OPENSSL_cleanse(p, sizeof(*p));
		p->owner = getpid();
	}
	if (p->left < len) {
		EVP_RAND_CTX *r = RAND_get0_private(tok_algs.lc);
		OPENSSL_cleanse(p->buf, sizeof(p->buf));
		p->left = 0;
		ok = r && EVP_RAND_generate(r, p->buf, sizeof(p->buf), 0, 0, NULL, 0) == 1;
		if (ok) {
			p->left = sizeof(p->buf);
		} else {
			OPENSSL_cleanse(p->buf, sizeof(p->buf));
			(void)tok_ossl_fail(); /* no stale error if the caller's own draw works */
		}
	}
	if (ok) {
		uint8_t *b = p->buf + sizeof(p->buf) - p->left;
		memcpy(out, b, len);
		OPENSSL_cleanse(b, len);
		p->left -= len;
	}
	pthread_mutex_unlock(&sb.mu);
	return ok; /* false: the caller asks the DRBG itself, and reports its error */
}

void tok_ahead_stop(void)
{
	stop_helper();
	pthread_mutex_lock(&sb.mu);
	secret_wipe_locked();
	pthread_mutex_unlock(&sb.mu);
	pthread_mutex_lock(&ka.mu);
	ka.stop = false; /* a later C_Initialize may start it again */
	pthread_mutex_unlock(&ka.mu);
}

void tok_ahead_atfork_child(void)
{
	/* The parent's helper does not exist here and its lock may have been
	 * held at the fork: start over, the parent's spares wiped. */
	bool atexit_set = ka.atexit_set, no_page = ka.no_page;
	struct ka_page *page = ka.page; /* zeros here already with MADV_WIPEONFORK */
	size_t map_len = ka.map_len;

	if (page)
		OPENSSL_cleanse(page, sizeof(*page));
	OPENSSL_cleanse(&ka, sizeof(ka));
	ka = (__typeof__(ka)){ .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
			       .page = page, .map_len = map_len, .no_page = no_page,
			       .atexit_set = atexit_set };
	/* The parent's secret bytes are the parent's next keys (with
	 * MADV_WIPEONFORK the kernel has zeroed them already). */
	sb.mu = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	secret_wipe_locked();
}

uint64_t tok_ahead_taken(void)
{
	uint64_t n;

	pthread_mutex_lock(&ka.mu);
	n = ka.taken;
	pthread_mutex_unlock(&ka.mu);
	return n;
}

unsigned tok_ahead_ready(int curve)
{
	unsigned n;

	pthread_mutex_lock(&ka.mu);
	n = ka.owner == getpid() && ka.page ? ka.page->n[curve] : 0;
	pthread_mutex_unlock(&ka.mu);
	return n;
}
