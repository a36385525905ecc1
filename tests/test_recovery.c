/* SPDX-License-Identifier: MIT */
/*
 * Opening an existing log: the chain continues; tail damage within the bound
 * (a torn line, a NUL hole before complete lines) is repaired with a
 * recovery record and never truncated; damage beyond it fails with -EBADMSG
 * and leaves the file untouched; an untrusted tail starts a new chain; and
 * opening reads only the bounded tail, however large the log.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tu.h"

#define SMALL_BATCH (16u << 10) /* bound = 2 x 16 KiB + 8 KiB = 40 KiB */

static int write_events_batch(const char *path, unsigned n, size_t batch,
			      struct auditlog_stats *st)
{
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, batch), 0);
	int r = auditlog_open(cfg, &log);
	auditlog_config_free(cfg);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < n; i++) {
		struct auditlog_event ev = tu_event("C_Encrypt", i);
		assert_int_equal(auditlog_record(log, &ev), 0);
	}
	assert_int_equal(auditlog_flush(log), 0);
	if (st)
		auditlog_get_stats(log, st, sizeof(*st));
	assert_int_equal(auditlog_close(log), 0);
	return 0;
}

static int write_events(const char *path, unsigned n, struct auditlog_stats *st)
{
	return write_events_batch(path, n, SMALL_BATCH, st);
}

static void append_bytes(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	close(fd);
}

/* Open refuses the log (-EBADMSG) and writes not a byte to it. */
static void assert_refused_untouched(const char *path, size_t batch)
{
	size_t len1, len2;
	uint8_t *before = tu_read_file(path, &len1);
	assert_int_equal(write_events_batch(path, 1, batch, NULL), -EBADMSG);
	uint8_t *after = tu_read_file(path, &len2);
	assert_int_equal(len1, len2);
	assert_memory_equal(before, after, len1);
	free(before);
	free(after);
}

static void walk_ok(const char *path, struct tu_walk *w)
{
	int r = tu_walk_file(path, w, NULL, NULL);
	if (r)
		fail_msg("%s: %s", path, w->error);
}

static void test_reopen_continues(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct tu_walk w;
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(write_events(path, 50, NULL), 0);
	walk_ok(path, &w);
	assert_int_equal(w.events, 250);
	assert_int_equal(w.headers, 1);
	assert_int_equal(w.recoveries, 0);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void test_torn_tail(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct auditlog_stats st;
	struct tu_walk w;
	static const char torn[] = "{\"@timestamp\":\"2026-11-30T10:48:14.1234";

	assert_int_equal(write_events(path, 100, NULL), 0);
	struct stat before;
	stat(path, &before);
	append_bytes(path, torn, sizeof(torn) - 1);
	assert_int_equal(write_events(path, 10, &st), 0);
	assert_int_equal(st.recoveries, 1);
	/* never truncated: the torn bytes are still there */
	size_t len;
	uint8_t *buf = tu_read_file(path, &len);
	assert_memory_equal(buf + before.st_size, torn, sizeof(torn) - 1);
	assert_int_equal(buf[before.st_size + sizeof(torn) - 1], '\n');
	free(buf);
	walk_ok(path, &w);
	assert_int_equal(w.events, 110);
	assert_int_equal(w.recoveries, 1);

	/* a second crash later: two recovery records, still one valid chain */
	append_bytes(path, torn, 10);
	assert_int_equal(write_events(path, 10, &st), 0);
	assert_int_equal(st.recoveries, 1);
	walk_ok(path, &w);
	assert_int_equal(w.events, 120);
	assert_int_equal(w.recoveries, 2);
	assert_int_equal(tu_verify_dir(dir), 2);
	assert_int_equal(tu_verify_stream(path), 2);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* A crash between a line's bytes and its '\n': the record is whole and
 * chains on, so it is kept and ended, not called damage (a recovery record
 * naming a valid record would repeat its seq). */
static void test_missing_newline(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct auditlog_stats st;
	struct tu_walk w;

	assert_int_equal(write_events(path, 100, NULL), 0);
	assert_int_equal(truncate(path, (off_t)(tu_file_size(path) - 1)), 0);
	assert_int_equal(write_events(path, 10, &st), 0);
	assert_int_equal(st.recoveries, 0);
	walk_ok(path, &w);
	assert_int_equal(w.events, 110);
	assert_int_equal(w.recoveries, 0);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* Zero the bytes of lines [from, to) of the file's last lines: a batch lost
 * while a later one reached the disk. */
static void punch_lines(const char *path, unsigned from_end, unsigned count)
{
	size_t len;
	uint8_t *buf = tu_read_file(path, &len);
	size_t starts[64];
	unsigned n = 0;
	for (size_t i = len - 1; i > 0 && n < 64; i--)
		if (buf[i - 1] == '\n')
			starts[n++] = i; /* start of the n-th line from the end */
	assert_true(n > from_end);
	size_t a = starts[from_end - 1], b = starts[from_end - 1 - count];
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	uint8_t *z = calloc(1, b - a);
	assert_int_equal(pwrite(fd, z, b - a, (off_t)a), (ssize_t)(b - a));
	close(fd);
	free(z);
	free(buf);
}

static void test_nul_hole(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct auditlog_stats st;
	struct tu_walk w;

	assert_int_equal(write_events(path, 100, NULL), 0);
	/* lines 6..4 from the end become NULs; the last 3 lines stay complete */
	punch_lines(path, 6, 3);
	assert_int_equal(write_events(path, 10, &st), 0);
	assert_int_equal(st.recoveries, 1);
	assert_int_equal(st.head_seq, 94 + 1 + 10); /* 94 intact events, recovery, 10 new */
	walk_ok(path, &w);
	assert_int_equal(w.recoveries, 1);
	assert_int_equal(w.events, 94 + 10);
	/* the verifier agrees: the hole and the complete lines after it are the
	 * damage the recovery record names, one finding, recovered */
	assert_int_equal(tu_verify_dir(dir), 1);
	assert_int_equal(tu_verify_stream(path), 1); /* a stream waits for the repair */
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void test_damage_beyond_bound(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");

	assert_int_equal(write_events(path, 300, NULL), 0);
	uint8_t *zeros = calloc(1, 50u << 10);
	append_bytes(path, zeros, 50u << 10);
	assert_refused_untouched(path, SMALL_BATCH);
	free(zeros);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void test_damage_within_bound(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct auditlog_stats st;
	struct tu_walk w;

	assert_int_equal(write_events(path, 300, NULL), 0);
	uint8_t *zeros = calloc(1, 30u << 10);
	append_bytes(path, zeros, 30u << 10);
	assert_int_equal(write_events(path, 5, &st), 0);
	assert_int_equal(st.recoveries, 1);
	walk_ok(path, &w);
	assert_int_equal(w.events, 305);
	assert_int_equal(tu_verify_dir(dir), 1);
	assert_int_equal(tu_verify_stream(path), 1); /* a stream waits for the repair */
	free(zeros);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* Append one correctly chained event with the given timestamp. */
static void append_chained(const char *path, uint64_t ts_ns)
{
	struct tu_walk w;
	walk_ok(path, &w);
	struct al_record r = {.version = 1, .type = AL_T_EVENT};
	char ts[AL_TS_LEN];
	al_format_ts(ts_ns, ts);
	r.present = AL_BIT(AL_F_TIMESTAMP) | AL_BIT(AL_F_SEQ) | AL_BIT(AL_F_ACTION) |
		    AL_BIT(AL_F_OUTCOME);
	r.f[AL_F_TIMESTAMP] = (struct al_val){(const uint8_t *)ts, AL_TS_LEN, 0};
	r.f[AL_F_SEQ].u = w.last_seq + 1;
	r.f[AL_F_ACTION] = (struct al_val){(const uint8_t *)"C_Login", 7, 0};
	r.f[AL_F_OUTCOME] = (struct al_val){(const uint8_t *)"success", 7, 0};
	uint8_t line[AL_LINE_MAX], work[AL_HASH_LEN + AL_BODY_MAX];
	struct al_emit_out eo;
	long n = al_emit(&r, w.last_hash, line, work, &eo);
	assert_true(n > 0);
	append_bytes(path, line, (size_t)n);
}

static void test_untrusted_future(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct auditlog_stats st;
	struct tu_walk w;
	struct timespec now;

	assert_int_equal(write_events(path, 10, NULL), 0);
	clock_gettime(CLOCK_REALTIME, &now);
	append_chained(path, ((uint64_t)now.tv_sec + 86400) * 1000000000u);
	walk_ok(path, &w); /* the future record chains correctly */
	assert_int_equal(write_events(path, 3, &st), 0);
	assert_int_equal(st.untrusted_restarts, 1);
	assert_int_equal(tu_count_files(dir), 2);
	walk_ok(path, &w);
	assert_string_equal(w.reason, "untrusted-tail");
	assert_int_equal(w.first_seq, 0);
	assert_int_equal(w.events, 3);
	size_t len;
	char *buf = (char *)tu_read_file(path, &len);
	assert_non_null(strstr(buf, "in the future"));
	free(buf);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void test_untrusted_seq(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct auditlog_stats st;
	struct tu_walk w;
	struct al_record r = {.version = 1, .type = AL_T_HEADER};
	char ts[AL_TS_LEN];
	static const uint8_t prev[32] = {1, 2, 3};
	char prev_hex[64];

	/* a file continuing a chain right at the end of the seq range */
	al_format_ts(1700000000ull * 1000000000u, ts);
	al_hex(prev, 32, prev_hex);
	r.present = AL_BIT(AL_F_TIMESTAMP) | AL_BIT(AL_F_SEQ) | AL_BIT(AL_F_FILE_ID) |
		    AL_BIT(AL_F_CHAIN_ID) | AL_BIT(AL_F_REASON) | AL_BIT(AL_F_PREV_NAME) |
		    AL_BIT(AL_F_PREV_SEQ) | AL_BIT(AL_F_PREV_HASH) | AL_BIT(AL_F_PREV_SIZE);
	r.f[AL_F_TIMESTAMP] = (struct al_val){(const uint8_t *)ts, AL_TS_LEN, 0};
	r.f[AL_F_SEQ].u = AL_INT_MAX - 10;
	r.f[AL_F_FILE_ID] = (struct al_val){(const uint8_t *)"0123456789abcdef0123456789abcdef", 32, 0};
	r.f[AL_F_CHAIN_ID] = (struct al_val){(const uint8_t *)"00112233445566778899aabbccddeeff", 32, 0};
	r.f[AL_F_REASON] = (struct al_val){(const uint8_t *)"rotate", 6, 0};
	r.f[AL_F_PREV_NAME] = (struct al_val){(const uint8_t *)"old.log", 7, 0};
	r.f[AL_F_PREV_SEQ].u = AL_INT_MAX - 11;
	r.f[AL_F_PREV_HASH] = (struct al_val){(const uint8_t *)prev_hex, 64, 0};
	r.f[AL_F_PREV_SIZE].u = 4096;
	uint8_t line[AL_LINE_MAX], work[AL_HASH_LEN + AL_BODY_MAX];
	struct al_emit_out eo;
	long n = al_emit(&r, prev, line, work, &eo);
	assert_true(n > 0);
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_int_equal(write(fd, line, (size_t)n), n);
	close(fd);

	assert_int_equal(write_events(path, 3, &st), 0);
	assert_int_equal(st.untrusted_restarts, 1);
	assert_int_equal(tu_count_files(dir), 2);
	walk_ok(path, &w);
	assert_string_equal(w.reason, "untrusted-tail");
	assert_int_equal(w.last_seq, 3);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void torn_head(const void *content, size_t n, int expect)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct auditlog_stats st;
	struct tu_walk w;
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_int_equal(write(fd, content, n), (ssize_t)n);
	close(fd);
	assert_int_equal(write_events(path, 2, &st), expect);
	if (expect == 0) {
		/* kept aside, a new chain begun and told why */
		assert_int_equal(st.untrusted_restarts, 1);
		assert_int_equal(tu_count_files(dir), 2);
		walk_ok(path, &w);
		assert_string_equal(w.reason, "untrusted-tail");
		assert_int_equal(w.events, 2);
	} else {
		assert_int_equal(tu_count_files(dir), 1);
	}
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void test_torn_first_header(void **state)
{
	static const char part[] = "{\"@timestamp\":\"2026-11-30T11:56:22.175328349Z\",\"seq\":0,\"v\":1,"
				   "\"type\":\"header\",\"file_id\":\"0123";
	uint8_t zeros[700] = {0};
	torn_head(part, sizeof(part) - 1, 0);
	torn_head(part, 20, 0);
	torn_head(zeros, sizeof(zeros), 0);
	/* anything else without a complete line is not ours: never blessed */
	torn_head("hello world", 11, -EBADMSG);
	static const char ev[] = "{\"@timestamp\":\"2026-11-30T11:56:22.175328349Z\",\"seq\":5,\"v\":1,"
				 "\"type\":\"event\"";
	torn_head(ev, sizeof(ev) - 1, -EBADMSG);
}

struct reads {
	_Atomic uint64_t bytes;
	_Atomic unsigned calls;
};

static void count_read(void *ctx, int fd, uint64_t off, size_t len)
{
	struct reads *r = ctx;
	atomic_fetch_add(&r->bytes, len);
	atomic_fetch_add(&r->calls, 1);
}

static void test_open_reads_bounded_tail(void **state)
{
	char *dir = tu_mkdtemp(), *a = tu_path(dir, "a.log"), *path = tu_path(dir, "audit.log");
	size_t alen;

	/* a real log of ~300 KiB: its head and its tail are what a 1 GiB log shows */
	assert_int_equal(write_events(a, 1000, NULL), 0);
	uint8_t *abuf = tu_read_file(a, &alen);
	assert_true(alen > 200u << 10);
	uint64_t big = 1ull << 30;
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, abuf, alen, 0), (ssize_t)alen);
	/* a sparse middle, then the last 100 KiB of the log again, ending at 1 GiB */
	size_t tail = 100u << 10;
	assert_int_equal(pwrite(fd, abuf + alen - tail, tail, (off_t)(big - tail)), (ssize_t)tail);
	close(fd);

	struct reads rd = {0};
	struct al_io_hooks h = {.ctx = &rd, .before_read = count_read};
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, SMALL_BATCH), 0);
	assert_int_equal(auditlog__config_set_io_hooks(cfg, &h), 0);
	uint64_t bound = auditlog__tail_bound(cfg);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	/* the head line (at most one line, 8 KiB) and the bounded tail: nothing else */
	assert_true(atomic_load(&rd.bytes) <= bound + AL_LINE_MAX);
	assert_int_equal(atomic_load(&rd.calls), 2);
	struct auditlog_event ev = tu_event("C_Sign", 1);
	assert_int_equal(auditlog_record_sync(log, &ev), 0);
	struct auditlog_stats st;
	auditlog_get_stats(log, &st, sizeof(st));
	assert_int_equal(st.head_seq, 1000 + 1); /* continued from the tail's last record */
	assert_int_equal(auditlog_close(log), 0);
	free(abuf);
	free(a);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* Batches of 1 MiB: a window of 2 MiB + 8 KiB, read into the mapping of 2
 * MiB pages (file.c, window_map(); the heap under AddressSanitizer): the
 * chain continues from its last line, damage that reaches back to the
 * window's first kibibyte is repaired, damage one byte longer than the
 * window is refused and leaves the file as it was. */
static void test_large_window(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	const size_t batch = 1u << 20;
	struct auditlog_stats st;
	struct tu_walk w;
	struct stat sb;

	assert_int_equal(write_events_batch(path, 12000, batch, NULL), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_true((size_t)sb.st_size > 3 * batch); /* longer than the window */
	assert_int_equal(write_events_batch(path, 10, batch, &st), 0);
	assert_int_equal(st.recoveries, 0);
	assert_int_equal(st.head_seq, 12010);
	walk_ok(path, &w);
	assert_int_equal(w.events, 12010);
	assert_int_equal(w.headers, 1);

	/* damage to the window's end from 1 KiB past its start: the window
	 * still holds a whole line before it (~300 bytes), to anchor on */
	struct auditlog_config *cfg = tu_config(path);
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, batch), 0);
	uint64_t bound = auditlog__tail_bound(cfg);
	auditlog_config_free(cfg);
	uint8_t *zeros = calloc(1, bound + 1);
	assert_non_null(zeros);
	append_bytes(path, zeros, bound - 1024);
	assert_int_equal(write_events_batch(path, 5, batch, &st), 0);
	assert_int_equal(st.recoveries, 1);
	walk_ok(path, &w);
	assert_int_equal(w.events, 12015);
	assert_int_equal(w.recoveries, 1);
	assert_int_equal(tu_verify_dir(dir), 1);

	/* damage longer than the window: refused, not a byte written */
	append_bytes(path, zeros, bound + 1);
	assert_refused_untouched(path, batch);
	free(zeros);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reopen_continues),
		cmocka_unit_test(test_torn_tail),
		cmocka_unit_test(test_missing_newline),
		cmocka_unit_test(test_nul_hole),
		cmocka_unit_test(test_damage_beyond_bound),
		cmocka_unit_test(test_damage_within_bound),
		cmocka_unit_test(test_untrusted_future),
		cmocka_unit_test(test_untrusted_seq),
		cmocka_unit_test(test_open_reads_bounded_tail),
		cmocka_unit_test(test_torn_first_header),
		cmocka_unit_test(test_large_window),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
