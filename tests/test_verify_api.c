/* SPDX-License-Identifier: MIT */
/*
 * The public verification API (auditlog_verifier_* in <auditlog.h>), through
 * libauditlog.so as an application links it: a clean rotated log, one changed
 * byte found at its line, an expected head that the chain does not reach,
 * the emitted lines, the same verdict with and without worker threads, the
 * rotated set fed as a stream, and the argument and state errors.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <auditlog.h>

/* Under $TMPDIR, else /var/tmp (a real disk), as tests/tu.c does. */
static char dir[512];
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

	const char *base = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/auditlog-vapi.XXXXXX", base && *base ? base : "/var/tmp");
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

/* A file large enough for the workers (two 4 MiB blocks and more): the same
 * verdict with 1 and with 4 threads, clean and with one byte changed. */
static void verify_big(const char *file, unsigned threads, struct seen *s, struct auditlog_vsummary *sum)
{
	struct auditlog_verifier *v;

	memset(s, 0, sizeof(*s));
	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_add_path(v, file), 0);
	assert_int_equal(auditlog_verifier_set_on_finding(v, on_finding, s), 0);
	assert_int_equal(auditlog_verifier_set_threads(v, threads), 0);
	assert_int_equal(auditlog_verifier_run(v, sum, sizeof(*sum)), 0);
	auditlog_verifier_free(v);
}

static void test_threads(void **state)
{
	char bigdir[sizeof(dir) + 8], big[sizeof(dir) + 16];
	struct auditlog_config *cfg;
	struct auditlog *log;
	struct auditlog_vsummary one, four;
	struct seen s1, s4;
	struct stat st;

	snprintf(bigdir, sizeof(bigdir), "%s/big", dir); /* (not among the files of dir) */
	snprintf(big, sizeof(big), "%s/a.log", bigdir);
	assert_int_equal(mkdir(bigdir, 0700), 0);
	assert_int_equal(auditlog_config_new(&cfg), 0);
	assert_int_equal(auditlog_config_set_path(cfg, big), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	for (int i = 0; i < 60000; i++) {
		struct auditlog_event ev = { .action = "C_Encrypt", .action_len = 9,
					     .detail = "a detail long enough to fill two blocks quickly",
					     .detail_len = 47 };
		assert_int_equal(auditlog_record(log, &ev), 0);
	}
	assert_int_equal(auditlog_close(log), 0);
	assert_int_equal(stat(big, &st), 0);
	assert_true(st.st_size > (9 << 20));

	verify_big(big, 1, &s1, &one);
	verify_big(big, 4, &s4, &four);
	assert_int_equal(one.integrity_findings, 0);
	assert_int_equal(four.integrity_findings, 0);
	assert_int_equal(one.records, 60001);
	assert_memory_equal(&one, &four, sizeof(one));

	int fd = open(big, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "B", 1, st.st_size / 2 + 3), 1);
	close(fd);
	verify_big(big, 1, &s1, &one);
	verify_big(big, 4, &s4, &four);
	assert_true(one.integrity_findings > 0);
	assert_memory_equal(&one, &four, sizeof(one));
	assert_int_equal(s1.findings, s4.findings);
	assert_int_equal(s1.first.cls, s4.first.cls);
	assert_int_equal(s1.first.line, s4.first.line);
	assert_int_equal(s1.first.offset, s4.first.offset);
	assert_true(s1.first.offset <= (uint64_t)st.st_size / 2 + 3);
}

/* The rotated set as a stream: its files concatenated in chain order (by
 * the seq in their names: the writer's rotated files end in -<first seq>,
 * the active file comes last), fed in pieces of 1 to 700 bytes. The same
 * verdict and records as the files; then a line changed in the stream is
 * found at its line of the stream. */
static int by_seq(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	const char *dx = strrchr(x, '-'), *dy = strrchr(y, '-');
	unsigned long long sx = dx ? strtoull(dx + 1, NULL, 10) : ~0ull, sy = dy ? strtoull(dy + 1, NULL, 10) : ~0ull;
	return sx < sy ? -1 : sx > sy;
}

/* The log's files in chain order (names[] to free). */
static unsigned list_set(char *names[64])
{
	char cmd[sizeof(dir) + 32], name[512];
	unsigned n = 0;
	FILE *ls;

	snprintf(cmd, sizeof(cmd), "ls -1 %s", dir);
	ls = popen(cmd, "r");
	assert_non_null(ls);
	while (n < 64 && fgets(name, sizeof(name), ls)) {
		name[strcspn(name, "\n")] = 0;
		if (strncmp(name, "audit.log", 9) == 0)
			names[n++] = strdup(name);
	}
	pclose(ls);
	qsort(names, n, sizeof(char *), by_seq);
	return n;
}

static struct auditlog_vsummary feed_set(struct seen *s, const char *flip_from, const char *flip_to)
{
	struct auditlog_verifier *v;
	struct auditlog_vsummary sum;
	char *names[64];
	unsigned n = list_set(names);
	bool flipped = false;

	memset(s, 0, sizeof(*s));
	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_feed(v, "x", 1), -EINVAL); /* no stream added */
	assert_int_equal(auditlog_verifier_add_stream(v, "siem"), 0);
	assert_int_equal(auditlog_verifier_add_path(v, dir), -EINVAL);
	assert_int_equal(auditlog_verifier_add_stream(v, "again"), -EINVAL);
	assert_int_equal(auditlog_verifier_set_on_finding(v, on_finding, s), 0);
	assert_int_equal(auditlog_verifier_set_on_record(v, on_record, s), 0);
	for (unsigned i = 0; i < n; i++) {
		char p[sizeof(dir) + 512];
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		FILE *f = fopen(p, "r");
		char buf[65536];
		size_t len;
		assert_non_null(f);
		len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = 0;
		char *at = flip_from && !flipped ? strstr(buf, flip_from) : NULL;
		if (at) {
			memcpy(at, flip_to, strlen(flip_to));
			flipped = true;
		}
		for (size_t k = 0, piece = 1; k < len; k += piece, piece = 1 + (piece * 31 + 5) % 700)
			assert_int_equal(auditlog_verifier_feed(v, buf + k, len - k < piece ? len - k : piece), 0);
		free(names[i]);
	}
	assert_int_equal(auditlog_verifier_set_strict(v, 1), -EBUSY); /* fixed by the first feed */
	assert_int_equal(auditlog_verifier_run(v, &sum, sizeof(sum)), 0);
	assert_int_equal(auditlog_verifier_feed(v, "x", 1), -EINVAL); /* after the run */
	auditlog_verifier_free(v);
	assert_true(!flip_from || flipped);
	return sum;
}

static void test_stream(void **state)
{
	struct seen fs = { 0 }, ss;
	struct auditlog_vsummary files = run(&fs, NULL);
	struct auditlog_vsummary stream = feed_set(&ss, NULL, NULL);

	assert_int_equal(stream.integrity_findings, 0);
	assert_int_equal(ss.findings, 0);
	assert_int_equal(stream.records, files.records);
	assert_int_equal(stream.bytes, files.bytes);
	assert_int_equal(stream.files, files.files); /* a segment a file */
	assert_int_equal(ss.records, fs.records);

	stream = feed_set(&ss, "\"detail\":\"x\"", "\"detail\":\"z\"");
	assert_true(stream.integrity_findings > 0);
	assert_int_equal(ss.first.cls, AUDITLOG_V_MODIFIED);
	assert_string_equal(ss.file, "siem");
	assert_true(ss.first.line >= 2);
	assert_true(ss.first.has_seq);
}

/* The first file of the log as a stream, its record lines [from, to)
 * replayed after line `to` (as RELP may after a reconnect), one byte of the
 * replay changed when `flip`; with dedup or not. */
static struct auditlog_vsummary feed_replay(struct seen *s, bool dedup, unsigned from, unsigned to, bool flip)
{
	struct auditlog_verifier *v;
	struct auditlog_vsummary sum;
	char *names[64], p[sizeof(dir) + 512], buf[65536], out[2 * 65536];
	size_t len, o = 0, start[1024];
	unsigned n = list_set(names), lines = 0;
	FILE *f;

	assert_true(n >= 1);
	snprintf(p, sizeof(p), "%s/%s", dir, names[0]);
	for (unsigned i = 0; i < n; i++)
		free(names[i]);
	f = fopen(p, "r");
	assert_non_null(f);
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	for (size_t k = 0; k < len && lines < 1023; k++)
		if (k == 0 || buf[k - 1] == '\n')
			start[lines++] = k;
	start[lines] = len;
	assert_true(lines > to + 1);
	memcpy(out, buf, start[to]);
	o = start[to];
	memcpy(out + o, buf + start[from], start[to] - start[from]);
	if (flip) {
		char *d = memmem(out + o, start[to] - start[from], "\"detail\":\"x\"", 12);
		assert_non_null(d);
		d[10] = 'z';
	}
	o += start[to] - start[from];
	memcpy(out + o, buf + start[to], len - start[to]);
	o += len - start[to];

	memset(s, 0, sizeof(*s));
	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_add_stream(v, "central"), 0);
	assert_int_equal(auditlog_verifier_set_dedup(v, dedup), 0);
	assert_int_equal(auditlog_verifier_set_on_finding(v, on_finding, s), 0);
	assert_int_equal(auditlog_verifier_set_on_record(v, on_record, s), 0);
	for (size_t k = 0, piece = 1; k < o; k += piece, piece = 1 + (piece * 31 + 5) % 700)
		assert_int_equal(auditlog_verifier_feed(v, out + k, o - k < piece ? o - k : piece), 0);
	assert_int_equal(auditlog_verifier_set_dedup(v, 1), -EBUSY); /* fixed by the first feed */
	assert_int_equal(auditlog_verifier_run(v, &sum, sizeof(sum)), 0);
	auditlog_verifier_free(v);
	return sum;
}

static void test_dedup(void **state)
{
	struct seen clean, s;
	struct auditlog_vsummary sum = feed_replay(&clean, true, 5, 5, false); /* nothing replayed */

	assert_int_equal(sum.integrity_findings, 0);
	assert_int_equal(clean.findings, 0);
	assert_true(clean.records > 20);
	assert_int_equal(auditlog_verifier_set_dedup(NULL, 1), -EINVAL);
	assert_string_equal(auditlog_vclass_name(AUDITLOG_V_SHIPPER_DUPLICATE), "shipper-duplicate");

	/* lines 10..19 again after line 20: a shipper's replay */
	sum = feed_replay(&s, true, 10, 20, false);
	assert_int_equal(sum.integrity_findings, 0);
	assert_int_equal(sum.findings[AUDITLOG_V_SHIPPER_DUPLICATE], 10);
	assert_int_equal(s.findings, 10);
	assert_int_equal(s.first.cls, AUDITLOG_V_SHIPPER_DUPLICATE);
	assert_int_equal(s.first.line, 21);
	assert_int_equal(s.records, clean.records); /* skipped, the chain goes on */

	/* without --dedup: a duplicated finding each */
	sum = feed_replay(&s, false, 10, 20, false);
	assert_int_equal(sum.findings[AUDITLOG_V_DUPLICATED], 10);
	assert_int_equal(sum.findings[AUDITLOG_V_SHIPPER_DUPLICATE], 0);
	assert_int_equal(sum.integrity_findings, 10);

	/* a repeat with one byte changed is no shipper's: still a finding */
	sum = feed_replay(&s, true, 10, 20, true);
	assert_int_equal(sum.findings[AUDITLOG_V_SHIPPER_DUPLICATE], 9);
	assert_int_equal(sum.findings[AUDITLOG_V_INSERTED], 1);
	assert_int_equal(sum.integrity_findings, 1);

	/* the header replayed with the lines after it (imfile re-reading a
	 * rotated file from its start): a repeat like any other */
	sum = feed_replay(&s, true, 0, 3, false);
	assert_int_equal(sum.integrity_findings, 0);
	assert_int_equal(sum.findings[AUDITLOG_V_SHIPPER_DUPLICATE], 3);
	assert_int_equal(s.records, clean.records);
	sum = feed_replay(&s, false, 0, 3, false);
	assert_true(sum.integrity_findings > 0);

	/* beyond the ring (64 records) a repeat is not told from a forged one */
}

static void test_errors(void **state)
{
	struct auditlog_verifier *v;
	struct auditlog_vsummary sum;

	assert_int_equal(auditlog_verifier_new(NULL), -EINVAL);
	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_add_path(v, "/nonexistent/audit.log"), -ENOENT);
	assert_int_equal(auditlog_verifier_set_min_version(v, 1000), -EINVAL);
	assert_int_equal(auditlog_verifier_set_threads(v, 1025), -EINVAL);
	assert_int_equal(auditlog_verifier_set_threads(NULL, 1), -EINVAL);
	assert_int_equal(auditlog_verifier_run(v, &sum, sizeof(sum) + 1), -EINVAL);
	assert_int_equal(auditlog_verifier_chain(v, 0, NULL, 0), -EINVAL); /* not run */
	assert_null(auditlog_vclass_name(AUDITLOG_V__COUNT));
	auditlog_verifier_free(v);
	auditlog_verifier_free(NULL);
}

/* Anchors bound to chains, through the public API: a second chain beside the
 * log (a small file of its own) is counted; anchored by id, each verifies;
 * with the log's anchor only, the other chain is unanchored; one_chain makes
 * it a finding. */
static struct auditlog_vsummary run_with(struct seen *s, const char *chain_a, const struct auditlog_vchain *a,
					 const char *chain_b, const struct auditlog_vchain *b, int one)
{
	struct auditlog_verifier *v;
	struct auditlog_vsummary sum;

	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_add_path(v, dir), 0);
	assert_int_equal(auditlog_verifier_set_on_finding(v, on_finding, s), 0);
	if (a)
		assert_int_equal(auditlog_verifier_add_expect_head(v, chain_a, a->last_seq, a->head_hash), 0);
	if (b)
		assert_int_equal(auditlog_verifier_add_expect_head(v, chain_b, b->last_seq, b->head_hash), 0);
	if (a) /* one anchor a chain */
		assert_int_equal(auditlog_verifier_add_expect_head(v, chain_a, a->last_seq, a->head_hash), -EINVAL);
	assert_int_equal(auditlog_verifier_set_one_chain(v, one), 0);
	assert_int_equal(auditlog_verifier_run(v, &sum, sizeof(sum)), 0);
	auditlog_verifier_free(v);
	return sum;
}

static void test_anchored_chains(void **state)
{
	char other[sizeof(dir) + 16];
	struct auditlog_config *cfg;
	struct auditlog *log;
	struct auditlog_verifier *v;
	struct auditlog_vsummary sum;
	struct auditlog_vchain ch[2];
	struct seen s = { 0 };

	snprintf(other, sizeof(other), "%s/other.log", dir);
	assert_int_equal(auditlog_config_new(&cfg), 0);
	assert_int_equal(auditlog_config_set_path(cfg, other), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	struct auditlog_event ev = { .action = "C_Login", .action_len = 7 };
	assert_int_equal(auditlog_record_sync(log, &ev), 0);
	assert_int_equal(auditlog_close(log), 0);

	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_add_path(v, dir), 0);
	assert_int_equal(auditlog_verifier_run(v, &sum, sizeof(sum)), 0);
	assert_int_equal(sum.chains, 2);
	assert_int_equal(sum.integrity_findings, 0);
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(auditlog_verifier_chain(v, i, &ch[i], sizeof(ch[i])), 0);
	auditlog_verifier_free(v);

	sum = run_with(&s, ch[0].chain_id, &ch[0], ch[1].chain_id, &ch[1], 0);
	assert_int_equal(sum.integrity_findings, 0);
	memset(&s, 0, sizeof(s));
	sum = run_with(&s, ch[0].chain_id, &ch[0], NULL, NULL, 0);
	assert_int_equal(sum.integrity_findings, 1);
	assert_int_equal(s.first.cls, AUDITLOG_V_UNANCHORED);
	memset(&s, 0, sizeof(s));
	sum = run_with(&s, NULL, NULL, NULL, NULL, 1);
	assert_int_equal(sum.integrity_findings, 1);
	assert_int_equal(s.first.cls, AUDITLOG_V_EXTRA_CHAIN);
	/* a chain id that is not 32 lowercase hex digits */
	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_add_expect_head(v, "ABC", 1, ch[0].head_hash), -EINVAL);
	auditlog_verifier_free(v);
	assert_int_equal(unlink(other), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean),
		cmocka_unit_test(test_expect_head_not_reached),
		cmocka_unit_test(test_one_byte_changed),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_dedup),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_anchored_chains),
	};
	return cmocka_run_group_tests(tests, write_log, remove_log);
}
