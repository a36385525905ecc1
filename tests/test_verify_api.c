/* SPDX-License-Identifier: MIT */
/*
 * The public verification API (auditlog_verifier_* in <auditlog.h>), through
 * libauditlog.so as an application links it: a clean rotated log, one changed
 * byte found at its line, an expected head that the chain does not reach,
 * the emitted lines, and the argument and state errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <auditlog.h>

static char dir[] = "/var/tmp/auditlog-vapi.XXXXXX";
static char path[sizeof(dir) + 16];

struct seen {
	unsigned findings, records;
	struct auditlog_finding first;
	char file[256];
};

static void on_finding(void *ctx, const struct auditlog_finding *f)
{
	struct seen *s = ctx;
	if (s->findings++ == 0) {
		s->first = *f;
		snprintf(s->file, sizeof(s->file), "%s", f->file);
	}
}

static void on_record(void *ctx, const char *line, size_t len)
{
	struct seen *s = ctx;
	assert_true(len > 0 && line[0] == '{' && line[len - 1] == '}');
	s->records++;
}

static int write_log(void **state)
{
	struct auditlog_config *cfg;
	struct auditlog *log;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/audit.log", dir);
	assert_int_equal(auditlog_config_new(&cfg), 0);
	assert_int_equal(auditlog_config_set_path(cfg, path), 0);
	assert_int_equal(auditlog_config_set_rotate_bytes(cfg, 8192), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	for (int i = 0; i < 200; i++) {
		struct auditlog_event ev = { .action = "C_Sign", .action_len = 6, .detail = "x", .detail_len = 1 };
		assert_int_equal(auditlog_record(log, &ev), 0);
		if (i % 50 == 49)
			assert_int_equal(auditlog_flush(log), 0); /* batches small enough to rotate */
	}
	assert_int_equal(auditlog_close(log), 0);
	return 0;
}

static int remove_log(void **state)
{
	char cmd[sizeof(dir) + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static struct auditlog_vsummary run(struct seen *s, int (*tweak)(struct auditlog_verifier *))
{
	struct auditlog_verifier *v;
	struct auditlog_vsummary sum;

	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_add_path(v, dir), 0);
	assert_int_equal(auditlog_verifier_set_on_finding(v, on_finding, s), 0);
	assert_int_equal(auditlog_verifier_set_on_record(v, on_record, s), 0);
	if (tweak)
		assert_int_equal(tweak(v), 0);
	assert_int_equal(auditlog_verifier_run(v, &sum, sizeof(sum)), 0);
	assert_int_equal(auditlog_verifier_run(v, &sum, sizeof(sum)), -EINVAL); /* once */
	if (sum.chains) {
		struct auditlog_vchain ch;
		assert_int_equal(auditlog_verifier_chain(v, 0, &ch, sizeof(ch)), 0);
		assert_int_equal(strlen(ch.chain_id), 32);
		assert_int_equal(auditlog_verifier_chain(v, (unsigned)sum.chains, &ch, sizeof(ch)), -ERANGE);
	}
	auditlog_verifier_free(v);
	return sum;
}

static void test_clean(void **state)
{
	struct seen s = { 0 };
	struct auditlog_vsummary sum = run(&s, NULL);

	assert_int_equal(sum.integrity_findings, 0);
	assert_int_equal(s.findings, 0);
	assert_int_equal(sum.chains, 1);
	assert_true(sum.files >= 3); /* rotated */
	assert_int_equal(sum.records, s.records); /* every record emitted */
	assert_true(sum.records >= 200 + sum.files); /* events + a header per file */
}

static int bad_head(struct auditlog_verifier *v)
{
	uint8_t h[32] = { 0 };
	return auditlog_verifier_set_expect_head(v, 100000, h);
}

static void test_expect_head_not_reached(void **state)
{
	struct seen s = { 0 };
	struct auditlog_vsummary sum = run(&s, bad_head);

	assert_true(sum.integrity_findings > 0);
	assert_int_equal(s.first.cls, AUDITLOG_V_TRUNCATED);
	assert_string_equal(auditlog_vclass_name(s.first.cls), "truncated");
}

static void test_one_byte_changed(void **state)
{
	struct seen s = { 0 };
	int fd = open(path, O_RDWR);
	char buf[4096], *p;
	ssize_t n;

	assert_true(fd >= 0);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
	p = strstr(buf, "\"detail\":\"x\"");
	assert_non_null(p); /* an event in the active file */
	assert_int_equal(pwrite(fd, "y", 1, (p - buf) + 10), 1);
	struct auditlog_vsummary sum = run(&s, NULL);
	assert_true(sum.integrity_findings > 0);
	assert_int_equal(s.first.cls, AUDITLOG_V_MODIFIED);
	assert_string_equal(s.file, path);
	assert_true(s.first.line >= 2); /* after the file's header */
	assert_true(s.first.has_seq);
	assert_int_equal(pwrite(fd, "x", 1, (p - buf) + 10), 1); /* restore */
	close(fd);
}

static void test_errors(void **state)
{
	struct auditlog_verifier *v;
	struct auditlog_vsummary sum;

	assert_int_equal(auditlog_verifier_new(NULL), -EINVAL);
	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_add_path(v, "/nonexistent/audit.log"), -ENOENT);
	assert_int_equal(auditlog_verifier_set_min_version(v, 1000), -EINVAL);
	assert_int_equal(auditlog_verifier_run(v, &sum, sizeof(sum) + 1), -EINVAL);
	assert_int_equal(auditlog_verifier_chain(v, 0, NULL, 0), -EINVAL); /* not run */
	assert_null(auditlog_vclass_name(AUDITLOG_V__COUNT));
	auditlog_verifier_free(v);
	auditlog_verifier_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean),
		cmocka_unit_test(test_expect_head_not_reached),
		cmocka_unit_test(test_one_byte_changed),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, write_log, remove_log);
}
