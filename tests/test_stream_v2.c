/* SPDX-License-Identifier: MIT */
/*
 * A v2 log as a stream (al_vstream_*: `auditlog-verify -`, a SIEM's central
 * copy), where a stream differs from a file walk: it holds the lines after
 * each seal until it knows what they are (docs/auditlog-verify.md "Streams").
 *  - --emit: the lines of a batch are passed on when its seal comes, not
 *    before (they may turn out to be a crash's damage);
 *  - a batch longer than the hold's bound (8 MiB) verifies as it does among
 *    files, and a crash inside such a batch is what the documentation says:
 *    `recovered` among files, the lines' own findings in a stream;
 *  - the `unsigned-tail` notice of a cleanly closed log names its close seal.
 */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "tu.h"
#include "verify.h"

struct seen {
	uint64_t cls[AL_V__MAX];
	uint64_t emitted;
	char tail_msg[512];
};

static void on_finding(void *ctx, const struct al_finding *f)
{
	struct seen *s = ctx;
	s->cls[f->cls]++;
	if (f->cls == AL_V_UNSIGNED_TAIL)
		snprintf(s->tail_msg, sizeof(s->tail_msg), "%s", f->msg);
}

static void on_record(void *ctx, const uint8_t *line, size_t len)
{
	(void)line;
	(void)len;
	((struct seen *)ctx)->emitted++;
}

static uint64_t integrity(const struct seen *s)
{
	uint64_t n = 0;
	for (unsigned k = 0; k < AL_V__MAX; k++)
		n += al_vclass_is_integrity((enum al_vclass)k, false) ? s->cls[k] : 0;
	return n;
}

/* A v2 log of n events. big: the writer's writes are held (an I/O hook)
 * from the first event on, and the other n - 1 are queued only once the
 * worker waits in that hook, so that they go out in batches of max_batch
 * bytes (the worker takes what is queued, up to that). Waiting for the hook
 * makes it so whatever the scheduler does: queued as fast as they come, a
 * loaded machine's worker once formed its first batch after 21,000 of them
 * (CI, ASan, 2026-12-01), and no batch reached 9 MiB. */
static atomic_bool held, in_hold;

static int hold_write(void *ctx, int fd, uint64_t off, size_t *len)
{
	(void)ctx;
	(void)fd;
	(void)off;
	(void)len;
	if (atomic_load(&held))
		atomic_store(&in_hold, true);
	while (atomic_load(&held))
		usleep(1000);
	return 0;
}

static void write_v2(const char *path, unsigned n, size_t max_batch, bool big)
{
	struct auditlog_config *cfg = tu_config(path);
	struct al_io_hooks h = {.before_write = hold_write};
	struct auditlog *log;

	tu_v2_config_shared(cfg);
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, max_batch), 0);
	assert_int_equal(auditlog_config_set_queue_capacity(cfg, 1u << 17), 0);
	assert_int_equal(auditlog_config_set_backend(cfg, AUDITLOG_BACKEND_PWRITE), 0);
	assert_int_equal(auditlog_config_set_checkpoint_interval(cfg, 1u << 20, 0), 0);
	assert_int_equal(auditlog__config_set_io_hooks(cfg, &h), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	atomic_store(&held, big);
	atomic_store(&in_hold, false);
	for (unsigned i = 0; i < n; i++) {
		struct auditlog_event ev = tu_event("C_Sign", i);
		assert_int_equal(auditlog_record(log, &ev), 0);
		for (unsigned t = 0; big && i == 0 && !atomic_load(&in_hold) && t < 10000; t++)
			usleep(1000);
		if (big && i == 0)
			assert_true(atomic_load(&in_hold));
	}
	atomic_store(&held, false);
	assert_int_equal(auditlog_flush(log), 0);
	assert_int_equal(auditlog_close(log), 0);
}

/* The lines' start offsets and whether each is a seal; returns the count. */
static size_t index_lines(const uint8_t *buf, size_t len, uint64_t **ret_off, bool **ret_seal)
{
	size_t n = 0, cap = 1024;
	uint64_t *off = malloc(cap * sizeof(*off));
	bool *seal = malloc(cap);
	for (size_t at = 0; at < len;) {
		const uint8_t *nl = memchr(buf + at, '\n', len - at);
		assert_non_null(nl);
		if (n == cap) {
			cap *= 2;
			off = realloc(off, cap * sizeof(*off));
			seal = realloc(seal, cap);
			assert_true(off && seal);
		}
		off[n] = at;
		seal[n++] = memmem(buf + at, 96, ",\"type\":\"seal\",", 15) != NULL;
		at = (size_t)(nl - buf) + 1;
	}
	*ret_off = off;
	*ret_seal = seal;
	return n;
}

static void feed_all(struct al_vstream *st, const uint8_t *buf, size_t len, size_t piece)
{
	for (size_t k = 0, take; k < len; k += take) {
		take = len - k < piece ? len - k : piece;
		assert_int_equal(al_vstream_feed(st, buf + k, take), 0);
	}
}

static void verify_files(const char *dir, struct seen *s, struct al_vresult *res)
{
	char **paths = NULL;
	unsigned n = 0, cap = 0;
	struct al_vopts o = {.on_finding = on_finding, .on_record = on_record, .ctx = s, .threads = 1};

	assert_int_equal(al_verify_add_path(dir, &paths, &n, &cap), 0);
	assert_int_equal(al_verify_files(paths, n, &o, res), 0);
	for (unsigned i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

/* --emit through a stream, no key: a batch's lines go out when its seal
 * has come, none before; all of them then. */
static void test_emit_waits_for_the_seal(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	size_t len;
	uint64_t *off;
	bool *seal;

	write_v2(path, 300, 16u << 10, false);
	uint8_t *buf = tu_read_file(path, &len);
	size_t n = index_lines(buf, len, &off, &seal);
	/* the last batch seal with at least two records before it */
	size_t k = n;
	for (size_t i = n - 1; i > 2 && k == n; i--)
		if (seal[i] && !seal[i - 1] && !seal[i - 2] && i + 1 < n)
			k = i;
	assert_true(k < n);
	struct seen s = {0};
	struct al_vopts o = {.on_finding = on_finding, .on_record = on_record, .ctx = &s};
	struct al_vresult res;
	struct al_vstream *st;
	assert_int_equal(al_vstream_new("stream", &o, &res, &st), 0);
	feed_all(st, buf, off[k], 4096); /* everything before seal k */
	uint64_t before = s.emitted;
	size_t prev = k - 1;
	while (!seal[prev])
		prev--;
	/* lines up to and with the previous seal went out, its batch's did not */
	assert_int_equal(before, prev + 1);
	feed_all(st, buf + off[k], off[k + 1] - off[k], 4096); /* the seal */
	assert_int_equal(s.emitted, k + 1);
	feed_all(st, buf + off[k + 1], len - off[k + 1], 4096);
	assert_int_equal(al_vstream_end(st), 0);
	assert_int_equal(s.emitted, n);
	assert_int_equal(res.records, n);
	assert_int_equal(integrity(&s), 0);
	al_vresult_free(&res);
	free(off);
	free(seal);
	free(buf);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* A batch longer than the hold's bound (8 MiB of lines after a seal): the
 * stream checks them as they come once the bound is passed; intact, its
 * lines all passed on. Then the same batch cut by a crash inside its last
 * part (more than 8 MiB of complete records after the seal, then a torn
 * one) and repaired by the writer: among files one `recovered`; in a
 * stream the lines beyond the bound were checked before the recovery record
 * came, so it cannot repair them: integrity findings, and no `recovered`
 * (docs/auditlog-verify.md "Streams"). */
static void test_batch_beyond_the_bound(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	size_t len;
	uint64_t *off;
	bool *seal;

	write_v2(path, 40000, 16u << 20, true);
	uint8_t *buf = tu_read_file(path, &len);
	size_t n = index_lines(buf, len, &off, &seal);
	/* the longest batch: from a seal to the next */
	size_t best = 0, a = 0, b = 0, last = 0;
	for (size_t i = 1; i < n; i++) {
		if (!seal[i])
			continue;
		if (off[i] - off[last] > best) {
			best = off[i] - off[last];
			a = last;
			b = i;
		}
		last = i;
	}
	print_message("longest batch: %zu bytes, lines %zu..%zu of %zu\n", best, a + 2, b + 1, n);
	if (best < (9u << 20))
		fail_msg("the writer made no batch longer than 9 MiB (longest %zu bytes)", best);

	/* intact, as a stream in pieces of 64 KiB and one of 1 MiB */
	for (size_t piece = 65536; piece <= (1u << 20); piece *= 16) {
		struct seen s = {0};
		struct al_vopts o = {.on_finding = on_finding, .on_record = on_record, .ctx = &s};
		struct al_vresult res;
		struct al_vstream *st;
		assert_int_equal(al_vstream_new("stream", &o, &res, &st), 0);
		feed_all(st, buf, len, piece);
		assert_int_equal(al_vstream_end(st), 0);
		assert_int_equal(integrity(&s), 0);
		assert_int_equal(res.records, n);
		assert_int_equal(s.emitted, n);
		al_vresult_free(&res);
	}

	/* the crash: cut in the middle of the line 9 MiB after seal a */
	size_t t = a + 1;
	while (off[t] - off[a + 1] < (9u << 20))
		t++;
	assert_true(t < b);
	assert_int_equal(truncate(path, (off_t)(off[t] + (off[t + 1] - off[t]) / 2)), 0);
	write_v2(path, 10, 16u << 20, false); /* the writer repairs it (bound: 2 x 16 MiB + 8 KiB) */
	free(buf);
	buf = tu_read_file(path, &len);

	struct seen fs = {0};
	struct al_vresult fres;
	verify_files(dir, &fs, &fres);
	assert_int_equal(fs.cls[AL_V_RECOVERED], 1);
	assert_int_equal(integrity(&fs), 0);

	struct seen s = {0};
	struct al_vopts o = {.on_finding = on_finding, .on_record = on_record, .ctx = &s};
	struct al_vresult res;
	struct al_vstream *st;
	assert_int_equal(al_vstream_new("stream", &o, &res, &st), 0);
	feed_all(st, buf, len, 65536);
	assert_int_equal(al_vstream_end(st), 0);
	print_message("beyond the bound, the stream:");
	for (unsigned k = 0; k < AL_V__MAX; k++)
		if (s.cls[k])
			print_message(" %s %llu", al_vclass_name((enum al_vclass)k), (unsigned long long)s.cls[k]);
	print_message("\n");
	assert_int_equal(s.cls[AL_V_RECOVERED], 0);
	assert_int_equal(s.cls[AL_V_UNPARSEABLE], 1); /* the torn line */
	assert_true(integrity(&s) > 0);
	al_vresult_free(&res);
	al_vresult_free(&fres);
	free(off);
	free(seal);
	free(buf);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_emit_waits_for_the_seal),
		cmocka_unit_test(test_batch_beyond_the_bound),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
