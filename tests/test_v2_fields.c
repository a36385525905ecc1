/* SPDX-License-Identifier: MIT */
/*
 * v0/v1 lines byte for byte as before the v2 producer path (golden hashes).
 * Linked with -Wl,--wrap=clock_gettime,--wrap=getrandom: with `frozen` set
 * the wall clock stands still and ids are fixed, so a log's bytes are a pure
 * function of the events written.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "internal.h"
#include "tu.h"

/* ---- a frozen wall clock and fixed ids ------------------------------------ */

static atomic_bool frozen;

int __real_clock_gettime(clockid_t c, struct timespec *ts);
int __wrap_clock_gettime(clockid_t c, struct timespec *ts);
ssize_t __real_getrandom(void *buf, size_t n, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t n, unsigned flags);

int __wrap_clock_gettime(clockid_t c, struct timespec *ts)
{
	if (c == CLOCK_REALTIME && atomic_load(&frozen)) {
		ts->tv_sec = 1796036894; /* 2026-11-30T11:08:14Z */
		ts->tv_nsec = 123456789;
		return 0;
	}
	return __real_clock_gettime(c, ts);
}

ssize_t __wrap_getrandom(void *buf, size_t n, unsigned flags)
{
	if (atomic_load(&frozen)) {
		memset(buf, 0x5a, n);
		return (ssize_t)n;
	}
	return __real_getrandom(buf, n, flags);
}

/* ---- helpers -------------------------------------------------------------- */

static void sha_hex(const uint8_t *p, size_t n, char out[65])
{
	uint8_t md[32];

	SHA256(p, n, md);
	al_hex(md, 32, out);
	out[64] = '\0';
}

/* ---- v0/v1 unchanged: golden logs ----------------------------------------- */

/* Events that reach every v0/v1 rule the producer path could disturb: every
 * member, names and unnamed numbers, repair, escapes, cuts, sync and async. */
static void golden_events(struct auditlog *log)
{
	static char longdetail[5000], longlabel[700];
	static uint8_t longid[200];
	static const char odd[] = "caf\xc3\xa9 \xe2\x82\x41 \xff\"q\"\\\n\t\x01\x1b\x7f end";

	memset(longdetail, 'd', sizeof(longdetail));
	memcpy(longdetail + 100, "\xc3\xa9\n", 3);
	memset(longlabel, 'l', sizeof(longlabel));
	for (size_t i = 0; i < sizeof(longid); i++)
		longid[i] = (uint8_t)i;
	for (unsigned i = 0; i < 40; i++) {
		struct auditlog_event ev = tu_event(i % 3 ? "C_Sign" : "C_Encrypt", i);
		switch (i % 8) {
		case 1:
			ev.detail = odd;
			ev.detail_len = sizeof(odd) - 1;
			break;
		case 2:
			ev.rv = 0x80000123; /* unnamed: 0x%08lx */
			ev.mechanism = 0x8000abcd;
			ev.outcome = AUDITLOG_OUTCOME_FAILURE;
			break;
		case 3:
			ev.detail = longdetail;
			ev.detail_len = sizeof(longdetail);
			ev.key_label = longlabel;
			ev.key_label_len = sizeof(longlabel);
			ev.key_id = longid;
			ev.key_id_len = sizeof(longid);
			break;
		case 4:
			ev.flags = 0;
			ev.key_label = NULL;
			ev.key_id = NULL;
			ev.actor = NULL;
			ev.outcome = AUDITLOG_OUTCOME_UNKNOWN;
			break;
		case 5:
			ev.rv = 0xc0; /* CKR_SIGNATURE_INVALID */
			ev.flags &= ~(unsigned)AUDITLOG_EV_MECHANISM;
			ev.actor = odd;
			ev.actor_len = 9;
			break;
		case 6:
			ev.action = odd;
			ev.action_len = sizeof(odd) - 1;
			break;
		}
		int r = i % 5 == 0 ? auditlog_record_sync(log, &ev) : auditlog_record(log, &ev);
		assert_int_equal(r, 0);
	}
}

static void golden(unsigned version, const char *want)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log"), got[65];
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;
	struct tu_walk w;
	uint8_t *buf;
	size_t len;

	atomic_store(&frozen, true);
	assert_int_equal(auditlog_config_set_format_version(cfg, version), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	golden_events(log);
	assert_int_equal(auditlog_close(log), 0);
	atomic_store(&frozen, false);
	assert_int_equal(tu_walk_file(path, &w, NULL, NULL), 0);
	assert_int_equal(w.events, 40);
	buf = tu_read_file(path, &len);
	assert_non_null(buf);
	sha_hex(buf, len, got);
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "v%u log %s (%zu bytes): sha256 %s, want %s; first lines:\n%.1500s\n",
			version, path, len, got, want, (const char *)buf);
		fail();
	}
	free(buf);
	tu_rmtree(dir);
	free(path);
	free(dir);
}

static void test_golden_v1(void **state)
{
	(void)state;
	golden(1, "e6b8189a54997e06bb4186c6dcd39c50cafcc6d97f25cc095cc7890016316a34");
}

static void test_golden_v0(void **state)
{
	(void)state;
	golden(0, "aafcf9718a233bc92737afee4496e604139d06dfd49962355f0e88aaa4fffc0e");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_v1),
		cmocka_unit_test(test_golden_v0),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
