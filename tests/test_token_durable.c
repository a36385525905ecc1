/* SPDX-License-Identifier: MIT */
/*
 * "No record, no result", deterministically, through libsofttoken.so as an
 * application loads it (audit_backend = pwrite).
 *
 * This program defines fdatasync(): the module's copy of libauditlog calls
 * fdatasync through the dynamic linker, which binds it to the executable's
 * definition first (the executable exports it: -Wl,--export-dynamic-symbol),
 * the same interposition an LD_PRELOAD library makes. For the audit log's
 * descriptor it can hold the worker inside fdatasync, and it remembers how
 * many bytes of the log a completed fdatasync covers (the size before the
 * call). Other files (the store's) pass through untouched.
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

#include <p11-kit/pkcs11.h>

#include "tu.h"

/* ---- the interposer -------------------------------------------------------- */

static pthread_mutex_t im = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ic = PTHREAD_COND_INITIALIZER;
static bool holding;     /* hold the audit log's fdatasync */
static unsigned held;    /* fdatasync calls that found holding set */
static off_t synced;     /* bytes of the audit log covered by a completed fdatasync */
static char audit_file[PATH_MAX]; /* the log being watched ("" = none) */

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
	if (r == 0) {
		pthread_mutex_lock(&im);
		if (st.st_size > synced)
			synced = st.st_size;
		pthread_cond_broadcast(&ic);
		pthread_mutex_unlock(&im);
	}
	errno = e;
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

static void start(const char *extra)
{
	char *cpath = tu_path(dir, "softtoken.conf");
	FILE *f = fopen(cpath, "w");

	assert_non_null(f);
	fprintf(f, "token_dir = %s/tokens\naudit_dir = %s/audit\npbkdf2_iterations = 1000\n"
		   "audit_backend = pwrite\n%s", dir, dir, extra);
	fclose(f);
	setenv("SOFTTOKEN_CONF", cpath, 1);
	free(cpath);
	snprintf(audit_file, sizeof(audit_file), "%s/audit/softtoken-0.log", dir);
	CK(p11->C_Initialize(NULL));
}

static int setup(void **state)
{
	CK_C_GetFunctionList getfl;
	unsigned char label[32];

	(void)state;
	dir = tu_mkdtemp();
	dl = dlopen(module_path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		fprintf(stderr, "dlopen %s: %s\n", module_path, dlerror());
		return -1;
	}
	getfl = (CK_C_GetFunctionList)dlsym(dl, "C_GetFunctionList");
	if (!getfl || getfl(&p11) != CKR_OK)
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
	off_t synced_at_return;
};

static void *call_thread(void *arg)
{
	struct call *c = arg;
	CK_RV rv = c->fn(c);

	pthread_mutex_lock(&im);
	c->rv = rv;
	c->synced_at_return = synced;
	c->done = true;
	pthread_cond_broadcast(&ic);
	pthread_mutex_unlock(&im);
	return NULL;
}

static bool done_or_held(void *arg)
{
	return ((struct call *)arg)->done || held > 0;
}

static bool is_done(void *arg)
{
	return ((struct call *)arg)->done;
}

/* The end offset of the last record of action in the audit log. */
static off_t record_end(const char *action)
{
	size_t len;
	uint8_t *buf = tu_read_file(audit_file, &len);
	char needle[128];
	off_t end = -1;
	size_t ls = 0;

	assert_non_null(buf);
	snprintf(needle, sizeof(needle), "\"action\":\"%s\"", action);
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		buf[i] = '\0';
		if (strstr((char *)buf + ls, needle) && strstr((char *)buf + ls, "\"type\":\"event\""))
			end = (off_t)i + 1;
		ls = i + 1;
	}
	free(buf);
	return end;
}

static void check_durable(const char *action, CK_RV (*fn)(struct call *c), struct call *c)
{
	pthread_t t;
	off_t end;
	bool reached, early;

	c->fn = fn;
	c->done = false;
	hold(true);
	assert_int_equal(pthread_create(&t, NULL, call_thread, c), 0);
	pthread_mutex_lock(&im);
	reached = wait_for(done_or_held, c, 10000);
	early = c->done;
	/* The worker is inside the log's fdatasync: the call must wait for it. */
	if (reached && !early)
		early = wait_for(is_done, c, 300);
	pthread_mutex_unlock(&im);
	/* Release and join before any verdict: a failed check must not leave
	 * the worker held for the next test. */
	hold(false);
	assert_int_equal(pthread_join(t, NULL), 0);
	if (!reached)
		fail_msg("%s: neither returned nor reached the audit log's fdatasync in 10 s", action);
	if (early)
		fail_msg("%s returned (rv 0x%lx) while its record was not yet durable", action, c->rv);
	assert_int_equal(c->rv, CKR_OK);
	end = record_end(action);
	assert_true(end > 0);
	if (end > c->synced_at_return)
		fail_msg("%s returned with its record (ending at byte %lld) beyond what an fdatasync covered (%lld)",
			 action, (long long)end, (long long)c->synced_at_return);
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

static void test_sensitive_records_durable(void **state)
{
	struct call c = { 0 };

	(void)state;
	check_durable("C_Login", do_login_so, &c);
	check_durable("C_InitPIN", do_init_pin, &c);
	CK(p11->C_Logout(sess));
	check_durable("C_Login", do_login_user, &c);
	check_durable("C_GenerateKey", do_generate_key, &c);
	check_durable("C_DestroyObject", do_destroy, &c);
}

/* ---- a result whose record cannot be queued ---------------------------------- */

static bool any_held(void *arg)
{
	(void)arg;
	return held > 0;
}

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
		cmocka_unit_test(test_no_record_no_result),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s libsofttoken.so\n", argv[0]);
		return 2;
	}
	module_path = argv[1];
	return cmocka_run_group_tests(tests, setup, teardown);
}
