/* SPDX-License-Identifier: MIT */
/*
 * "No record, no result", deterministically, through libsofttoken.so as an
 * application loads it, on both audit backends (pwrite and io_uring).
 *
 * This program defines fdatasync(): the module's copy of libauditlog calls
 * fdatasync through the dynamic linker, which binds it to the executable's
 * definition first (the executable exports it: -Wl,--export-dynamic-symbol),
 * the same interposition an LD_PRELOAD library makes. For the audit log's
 * descriptor it can hold the worker inside fdatasync, and it remembers how
 * many bytes of the log a completed fdatasync covers (the size before the
 * call). Other files (the store's) pass through untouched.
 *
 * It also defines io_uring_submit() and io_uring_submit_and_wait_timeout()
 * (liburing's, bound the same way): before a submission that holds a WRITE
 * of the audit log it can hold the worker, and after it, it waits for the
 * CQE of each FSYNC of the audit log in that submission (read from the
 * completion ring without consuming it) and, when that FSYNC succeeded,
 * remembers the byte range of the WRITE linked before it as covered.
 * (libauditlog commits a lone small batch inline with pwrite + fdatasync
 * even on io_uring; the io_uring test makes the record's batch large, so
 * that it goes through the ring, and says so when it did not.)
 *
 *  - C_Login, C_InitPIN, C_GenerateKey, C_DestroyObject write records that
 *    must be durable before the call returns: with the worker held, the call
 *    must not return; after the release, the byte range of its record must
 *    be covered by an fdatasync that completed before it returned.
 *  - A crypto operation whose record cannot be queued (audit_queue_full =
 *    fail, the worker held, the queue full) answers CKR_DEVICE_ERROR with
 *    its output wiped; a C_Sign on a session whose operation began before
 *    the trail failed answers CKR_DEVICE_ERROR and hands out nothing.
 *
 * Usage: test_token_durable libsofttoken.so
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>
#include <p11-kit/pkcs11.h>
#include <sys/syscall.h>

#include "tu.h"
#include "tu_p11.h"

/* ---- the interposer -------------------------------------------------------- */

static pthread_mutex_t im = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ic = PTHREAD_COND_INITIALIZER;
static bool holding;      /* hold the audit log's fdatasync */
static unsigned held;     /* fdatasync calls that found holding set */
static bool holding_ring; /* hold a ring submission that writes the audit log */
static unsigned held_ring; /* ring submissions that found holding_ring set */
static char audit_file[PATH_MAX]; /* the log being watched ("" = none) */

/* Byte ranges of the audit log covered by a completed fdatasync ([0, size
 * before the call)) or ring FSYNC (its linked WRITE's range), in the order
 * they completed. */
#define MAX_COVER 8192
static struct cover {
	off_t start, end;
	bool ring;
} cover[MAX_COVER];
static unsigned ncover;

static void add_cover(off_t start, off_t end, bool ring)
{
	pthread_mutex_lock(&im);
	if (ncover < MAX_COVER)
		cover[ncover++] = (struct cover){ start, end, ring };
	pthread_cond_broadcast(&ic);
	pthread_mutex_unlock(&im);
}

int fdatasync(int fd);
static bool is_audit_fd(int fd)
{
	char p[64], t[PATH_MAX];
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	n = readlink(p, t, sizeof(t) - 1);
	if (n <= 0)
		return false;
	t[n] = '\0';
	return audit_file[0] && strcmp(t, audit_file) == 0;
}

int fdatasync(int fd)
{
	static int (*real)(int);
	struct stat st;
	int r, e;

	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	if (!is_audit_fd(fd))
		return real(fd);
	pthread_mutex_lock(&im);
	if (holding) {
		held++;
		pthread_cond_broadcast(&ic);
		while (holding)
			pthread_cond_wait(&ic, &im);
	}
	pthread_mutex_unlock(&im);
	if (fstat(fd, &st) < 0)
		return -1;
	r = real(fd);
	e = errno;
	if (r == 0)
		add_cover(0, st.st_size, false);
	errno = e;
	return r;
}

/* ---- the ring ------------------------------------------------------------ */

struct ring_fsync {
	uint64_t user_data;
	off_t start, end; /* the linked WRITE's range ([0, 0) when none) */
};

/* Look at the SQEs prepared and not yet submitted: does one write the audit
 * log? Collect the audit log's FSYNCs (at most max). */
static unsigned pending_sqes(struct io_uring *ring, bool *ret_writes, struct ring_fsync *fs, unsigned max)
{
	const struct io_uring_sqe *prev = NULL;
	unsigned n = 0;

	*ret_writes = false;
	for (unsigned i = ring->sq.sqe_head; i != ring->sq.sqe_tail; i++) {
		const struct io_uring_sqe *sqe = &ring->sq.sqes[i & ring->sq.ring_mask];
		bool audit = !(sqe->flags & IOSQE_FIXED_FILE) && is_audit_fd(sqe->fd);
		if (audit && sqe->opcode == IORING_OP_WRITE)
			*ret_writes = true;
		if (audit && sqe->opcode == IORING_OP_FSYNC && n < max) {
			fs[n] = (struct ring_fsync){ .user_data = sqe->user_data };
			if (prev && prev->opcode == IORING_OP_WRITE && (prev->flags & IOSQE_IO_LINK) &&
			    prev->fd == sqe->fd) {
				fs[n].start = (off_t)prev->off;
				fs[n].end = (off_t)(prev->off + prev->len);
			}
			n++;
		}
		prev = sqe;
	}
	return n;
}

/* Wait (up to 10 s) for the CQE of each FSYNC, without consuming it (the
 * worker reaps it as usual), and cover what the successful ones covered. */
static void await_fsyncs(struct io_uring *ring, const struct ring_fsync *fs, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		for (int tries = 0; tries < 100000; tries++) {
			unsigned head = *ring->cq.khead, tail = __atomic_load_n(ring->cq.ktail, __ATOMIC_ACQUIRE);
			const struct io_uring_cqe *found = NULL;
			for (unsigned i = head; i != tail && !found; i++)
				if (ring->cq.cqes[i & ring->cq.ring_mask].user_data == fs[k].user_data)
					found = &ring->cq.cqes[i & ring->cq.ring_mask];
			if (found) {
				if (found->res == 0 && fs[k].end > fs[k].start)
					add_cover(fs[k].start, fs[k].end, true);
				break;
			}
			usleep(100);
		}
	}
}

static unsigned before_submit(struct io_uring *ring, struct ring_fsync *fs, unsigned max)
{
	bool writes;
	unsigned n = pending_sqes(ring, &writes, fs, max);

	pthread_mutex_lock(&im);
	if (writes && holding_ring) {
		held_ring++;
		pthread_cond_broadcast(&ic);
		while (holding_ring)
			pthread_cond_wait(&ic, &im);
	}
	pthread_mutex_unlock(&im);
	return n;
}

int io_uring_submit(struct io_uring *ring)
{
	static int (*real)(struct io_uring *);
	struct ring_fsync fs[64];
	unsigned n;
	int r;

	if (!real)
		real = (int (*)(struct io_uring *))dlsym(RTLD_NEXT, "io_uring_submit");
	n = before_submit(ring, fs, 64);
	r = real(ring);
	if (r >= 0)
		await_fsyncs(ring, fs, n);
	return r;
}

int io_uring_submit_and_wait_timeout(struct io_uring *ring, struct io_uring_cqe **cqe_ptr, unsigned wait_nr,
				     struct __kernel_timespec *ts, sigset_t *sigmask)
{
	static int (*real)(struct io_uring *, struct io_uring_cqe **, unsigned, struct __kernel_timespec *,
			   sigset_t *);
	struct ring_fsync fs[64];
	unsigned n;
	int r;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "io_uring_submit_and_wait_timeout");
	n = before_submit(ring, fs, 64);
	r = real(ring, cqe_ptr, wait_nr, ts, sigmask);
	await_fsyncs(ring, fs, n);
	return r;
}

static void hold(bool on)
{
	pthread_mutex_lock(&im);
	holding = on;
	if (on)
		held = 0;
	pthread_cond_broadcast(&ic);
	pthread_mutex_unlock(&im);
}

static void hold_ring(bool on)
{
	pthread_mutex_lock(&im);
	holding_ring = on;
	if (on)
		held_ring = 0;
	pthread_cond_broadcast(&ic);
	pthread_mutex_unlock(&im);
}

/* Wait (im held) until pred or the timeout; false on timeout. */
static bool wait_for(bool (*pred)(void *), void *arg, unsigned ms)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	while (!pred(arg))
		if (pthread_cond_timedwait(&ic, &im, &dl) == ETIMEDOUT)
			return pred(arg);
	return true;
}

/* ---- the module ------------------------------------------------------------- */

static const char *module_path;
static void *dl;
static CK_FUNCTION_LIST_PTR p11;
static char *dir;
static CK_SESSION_HANDLE sess;
static CK_BBOOL yes = CK_TRUE, no = CK_FALSE;

#define PIN "1234"
#define SO_PIN "12345678"
#define CK(call) assert_int_equal((call), CKR_OK)

static CK_RV start_backend(const char *backend, const char *extra)
{
	char *cpath = tu_path(dir, "softtoken.conf");
	FILE *f = fopen(cpath, "w");

	assert_non_null(f);
	fprintf(f, "token_dir = %s/tokens\naudit_dir = %s/audit\npbkdf2_iterations = 1000\n"
		   "audit_backend = %s\n%s", dir, dir, backend, extra);
	fclose(f);
	setenv("SOFTTOKEN_CONF", cpath, 1);
	free(cpath);
	snprintf(audit_file, sizeof(audit_file), "%s/audit/softtoken-0.log", dir);
	return p11->C_Initialize(NULL);
}

static void start(const char *extra)
{
	CK(start_backend("pwrite", extra));
}

static int setup(void **state)
{
	unsigned char label[32];

	(void)state;
	dir = tu_mkdtemp();
	if (!(dl = tu_p11_load(module_path, &p11)))
		return -1;
	start("");
	memset(label, ' ', sizeof(label));
	memcpy(label, "durable", 7);
	if (p11->C_InitToken(0, (CK_UTF8CHAR_PTR)SO_PIN, 8, label) != CKR_OK ||
	    p11->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &sess) != CKR_OK)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	hold(false);
	if (p11)
		(void)p11->C_Finalize(NULL);
	if (dl)
		dlclose(dl);
	if (dir) {
		tu_rmtree(dir);
		free(dir);
	}
	return 0;
}

/* ---- C_* calls run in a thread while the worker is held ---------------------- */

struct call {
	CK_RV (*fn)(struct call *c);
	CK_OBJECT_HANDLE obj;
	CK_RV rv;
	bool done;
	pid_t tid;
	unsigned covers_at_return; /* cover[0..this) had completed when it returned */
};

static void *call_thread(void *arg)
{
	struct call *c = arg;
	CK_RV rv;

	pthread_mutex_lock(&im);
	c->tid = (pid_t)syscall(SYS_gettid);
	pthread_cond_broadcast(&ic);
	pthread_mutex_unlock(&im);
	rv = c->fn(c);
	pthread_mutex_lock(&im);
	c->rv = rv;
	c->covers_at_return = ncover;
	c->done = true;
	pthread_cond_broadcast(&ic);
	pthread_mutex_unlock(&im);
	return NULL;
}

static bool done_or_held(void *arg)
{
	return ((struct call *)arg)->done || held > 0;
}

static bool done_or_held_ring(void *arg)
{
	return ((struct call *)arg)->done || held_ring > 0;
}

static bool is_done(void *arg)
{
	return ((struct call *)arg)->done;
}

static bool any_held(void *arg)
{
	(void)arg;
	return held > 0;
}

/* The byte range of the last record of action in the audit log. */
static void record_range(const char *action, off_t *ret_start, off_t *ret_end)
{
	size_t len;
	uint8_t *buf = tu_read_file(audit_file, &len);
	char needle[128];
	size_t ls = 0;

	assert_non_null(buf);
	*ret_start = *ret_end = -1;
	snprintf(needle, sizeof(needle), "\"action\":\"%s\"", action);
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		buf[i] = '\0';
		if (strstr((char *)buf + ls, needle) && strstr((char *)buf + ls, "\"type\":\"event\"")) {
			*ret_start = (off_t)ls;
			*ret_end = (off_t)i + 1;
		}
		ls = i + 1;
	}
	free(buf);
}

/* Is the thread tid asleep in futex(2) (its record queued, waiting for the
 * worker)? */
static bool in_futex(pid_t tid)
{
	char p[64], b[32] = "";
	FILE *f;
	bool yes_;

	snprintf(p, sizeof(p), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(p, "r");
	if (!f)
		return false;
	yes_ = fgets(b, sizeof(b), f) && atol(b) == SYS_futex;
	fclose(f);
	return yes_;
}

static void generate_random(unsigned n)
{
	uint8_t b;

	for (unsigned i = 0; i < n; i++)
		CK(p11->C_GenerateRandom(sess, &b, 1));
}

/*
 * Run the call with the worker held, and require that it did not return
 * while held and that, when it returned, a completed fdatasync (or ring
 * FSYNC) covered its record's bytes.
 *
 * ring = false: the worker is held inside the audit log's fdatasync.
 * ring = true (audit_backend = io_uring): the worker is first held inside
 * the inline fdatasync of a lone queued record (C_GenerateRandom); 400 more
 * are queued behind it, then the call, until its thread sleeps in futex
 * (its record queued); released, the worker writes them as one batch over
 * libauditlog's inline bound (64 KiB), through the ring, and is held again
 * before that submission. The record must then be covered by a ring FSYNC.
 */
static void check_durable(const char *action, CK_RV (*fn)(struct call *c), struct call *c, bool ring)
{
	pthread_t t;
	off_t start, end;
	bool reached, early, covered = false, by_ring = false;

	c->fn = fn;
	c->done = false;
	c->tid = 0;
	hold(true);
	hold_ring(ring);
	if (ring) {
		generate_random(1);
		pthread_mutex_lock(&im);
		reached = wait_for(any_held, NULL, 10000);
		pthread_mutex_unlock(&im);
		if (!reached) {
			hold(false);
			hold_ring(false);
			fail_msg("%s: the worker never reached the inline fdatasync of a lone record", action);
		}
		generate_random(400);
	}
	assert_int_equal(pthread_create(&t, NULL, call_thread, c), 0);
	if (ring) {
		pid_t tid = 0;
		int i;
		for (i = 0; i < 10000; i++) {
			bool done;
			pthread_mutex_lock(&im);
			tid = c->tid;
			done = c->done;
			pthread_mutex_unlock(&im);
			if (done || (tid && in_futex(tid)))
				break;
			usleep(1000);
		}
		hold(false); /* the inline batch completes; the ring batch is next */
		pthread_mutex_lock(&im);
		reached = i < 10000 && wait_for(done_or_held_ring, c, 10000);
	} else {
		pthread_mutex_lock(&im);
		reached = wait_for(done_or_held, c, 10000);
	}
	early = c->done;
	/* The worker is held before its write or inside its fdatasync: the
	 * call must wait for it. */
	if (reached && !early)
		early = wait_for(is_done, c, 300);
	pthread_mutex_unlock(&im);
	/* Release and join before any verdict: a failed check must not leave
	 * the worker held for the next test. */
	hold(false);
	hold_ring(false);
	assert_int_equal(pthread_join(t, NULL), 0);
	if (!reached)
		fail_msg("%s: neither returned nor reached the audit log's %s in 10 s", action,
			 ring ? "ring submission" : "fdatasync");
	if (early)
		fail_msg("%s returned (rv 0x%lx) while its record was not yet durable", action, c->rv);
	assert_int_equal(c->rv, CKR_OK);
	record_range(action, &start, &end);
	assert_true(end > 0);
	pthread_mutex_lock(&im);
	for (unsigned i = 0; i < c->covers_at_return; i++)
		if (cover[i].start <= start && end <= cover[i].end) {
			covered = true;
			by_ring |= cover[i].ring;
		}
	pthread_mutex_unlock(&im);
	if (!covered)
		fail_msg("%s returned with its record (bytes %lld..%lld) not covered by a completed fdatasync",
			 action, (long long)start, (long long)end);
	if (ring && !by_ring)
		fail_msg("%s: its record was not written through the ring (the test proves nothing)", action);
}

static CK_RV do_login_so(struct call *c)
{
	(void)c;
	return p11->C_Login(sess, CKU_SO, (CK_UTF8CHAR_PTR)SO_PIN, 8);
}

static CK_RV do_init_pin(struct call *c)
{
	(void)c;
	return p11->C_InitPIN(sess, (CK_UTF8CHAR_PTR)PIN, 4);
}

static CK_RV do_login_user(struct call *c)
{
	(void)c;
	return p11->C_Login(sess, CKU_USER, (CK_UTF8CHAR_PTR)PIN, 4);
}

static CK_RV do_generate_key(struct call *c)
{
	CK_MECHANISM m = { CKM_AES_KEY_GEN, NULL, 0 };
	CK_ULONG len = 32;
	CK_ATTRIBUTE t[] = { { CKA_VALUE_LEN, &len, sizeof(len) }, { CKA_TOKEN, &yes, 1 },
			     { CKA_ENCRYPT, &yes, 1 } };

	return p11->C_GenerateKey(sess, &m, t, 3, &c->obj);
}

static CK_RV do_destroy(struct call *c)
{
	return p11->C_DestroyObject(sess, c->obj);
}

static void sensitive_records(bool ring)
{
	struct call c = { 0 };

	check_durable("C_Login", do_login_so, &c, ring);
	check_durable("C_InitPIN", do_init_pin, &c, ring);
	CK(p11->C_Logout(sess));
	check_durable("C_Login", do_login_user, &c, ring);
	check_durable("C_GenerateKey", do_generate_key, &c, ring);
	check_durable("C_DestroyObject", do_destroy, &c, ring);
}

static void test_sensitive_records_durable(void **state)
{
	(void)state;
	sensitive_records(false);
}

/* The same through the ring (audit_backend = io_uring). */
static void test_sensitive_records_durable_ring(void **state)
{
	CK_RV rv;

	(void)state;
	CK(p11->C_Finalize(NULL));
	rv = start_backend("io_uring", "");
	if (rv != CKR_OK) {
		/* io_uring unavailable (kernel, seccomp): a failure, as in
		 * test_writer, never a silent skip (the next test still runs). */
		CK(start_backend("pwrite", ""));
		CK(p11->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &sess));
		fail_msg("audit_backend = io_uring: C_Initialize answered 0x%lx (io_uring unavailable?)", rv);
	}
	CK(p11->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &sess));
	sensitive_records(true);
}

/* ---- a result whose record cannot be queued ---------------------------------- */

static bool all_bytes(const uint8_t *b, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != v)
			return false;
	return true;
}

static void test_no_record_no_result(void **state)
{
	static const uint8_t p256[] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
	CK_MECHANISM gen = { CKM_EC_KEY_PAIR_GEN, NULL, 0 }, m = { CKM_ECDSA, NULL, 0 };
	CK_ATTRIBUTE pt[] = { { CKA_EC_PARAMS, (void *)p256, sizeof(p256) }, { CKA_TOKEN, &no, 1 } };
	CK_ATTRIBUTE kt[] = { { CKA_SIGN, &yes, 1 }, { CKA_TOKEN, &no, 1 } };
	CK_OBJECT_HANDLE pub, priv;
	CK_SESSION_HANDLE s2;
	uint8_t hash[32] = { 7 }, sig[64];
	CK_ULONG sl;
	CK_RV rv = CKR_OK;
	unsigned n;

	(void)state;
	CK(p11->C_Finalize(NULL));
	start("audit_queue_capacity = 64\naudit_queue_full = fail\n");
	CK(p11->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &sess));
	CK(p11->C_Login(sess, CKU_USER, (CK_UTF8CHAR_PTR)PIN, 4));
	CK(p11->C_GenerateKeyPair(sess, &gen, pt, 2, kt, 2, &pub, &priv));
	CK(p11->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &s2));
	CK(p11->C_SignInit(s2, &m, priv)); /* begins before the trail fails */

	/* One signature's record takes the worker into the held fdatasync. */
	hold(true);
	sl = sizeof(sig);
	CK(p11->C_SignInit(sess, &m, priv));
	CK(p11->C_Sign(sess, hash, sizeof(hash), sig, &sl));
	pthread_mutex_lock(&im);
	n = wait_for(any_held, NULL, 10000);
	pthread_mutex_unlock(&im);
	if (!n) {
		hold(false);
		fail_msg("the worker never reached the audit log's fdatasync");
	}
	/* Fill the queue: the first signature whose record finds no room. */
	for (n = 0; n < 1000; n++) {
		CK(p11->C_SignInit(sess, &m, priv));
		memset(sig, 0xa5, sizeof(sig));
		sl = sizeof(sig);
		rv = p11->C_Sign(sess, hash, sizeof(hash), sig, &sl);
		if (rv != CKR_OK)
			break;
	}
	hold(false); /* (the trail has failed: nothing more is queued) */
	assert_int_equal(rv, CKR_DEVICE_ERROR);
	assert_true(n >= 1 && n <= 64); /* the queue's room, not some other failure */
	if (!all_bytes(sig, sizeof(sig), 0))
		fail_msg("C_Sign answered CKR_DEVICE_ERROR and left its signature in the buffer");
	/* The trail has failed: the operation begun before hands out nothing. */
	memset(sig, 0xa5, sizeof(sig));
	sl = sizeof(sig);
	assert_int_equal(p11->C_Sign(s2, hash, sizeof(hash), sig, &sl), CKR_DEVICE_ERROR);
	assert_true(all_bytes(sig, sizeof(sig), 0xa5) || all_bytes(sig, sizeof(sig), 0));
	assert_int_equal(p11->C_SignInit(sess, &m, priv), CKR_DEVICE_ERROR);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sensitive_records_durable),
		cmocka_unit_test(test_sensitive_records_durable_ring),
		cmocka_unit_test(test_no_record_no_result),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s libsofttoken.so\n", argv[0]);
		return 2;
	}
	module_path = argv[1];
	return cmocka_run_group_tests(tests, setup, teardown);
}
