/* SPDX-License-Identifier: MIT */
/*
 * Fault injection through the I/O hooks, on both backends: a failed write or
 * fdatasync fails that batch and every later one in flight, seals the file
 * and continues in a new one that verifies; short writes are completed;
 * ENOSPC is retried until its deadline, then the log fails closed. Nothing
 * acknowledged is ever missing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "tu.h"

static bool force_ring;
static bool quiet_sync; /* run(): every event a record_sync on a quiet log (lead()) */

struct inj {
	_Atomic unsigned writes, fsyncs;
	unsigned wfail_from, wfail_to; /* 1-based call numbers, inclusive */
	int werr;
	unsigned ffail_from, ffail_to;
	int ferr;
	unsigned short_from, short_to;
	unsigned zero_fail; /* fail the Nth write at offset 0 (a new file's header) */
	_Atomic unsigned zero_writes;
	unsigned zero_ffail; /* fail the fdatasync after the Nth write at offset 0 (the header
			      * is in the file, never durable) */
	_Atomic unsigned zero_fsyncs;
	uint64_t rotate_bytes;
};

static bool in(unsigned n, unsigned from, unsigned to)
{
	return from && n >= from && n <= to;
}

static int inj_write(void *ctx, int fd, uint64_t off, size_t *len)
{
	struct inj *j = ctx;
	unsigned n = atomic_fetch_add(&j->writes, 1) + 1;
	if (in(n, j->wfail_from, j->wfail_to))
		return j->werr;
	if (off == 0 && atomic_fetch_add(&j->zero_writes, 1) + 1 == j->zero_fail)
		return -EIO;
	if (in(n, j->short_from, j->short_to) && *len > 1)
		*len /= 2;
	return 0;
}

static int inj_fsync(void *ctx, int fd, uint64_t off, size_t len)
{
	struct inj *j = ctx;
	unsigned n = atomic_fetch_add(&j->fsyncs, 1) + 1;
	if (off == 0 && atomic_fetch_add(&j->zero_fsyncs, 1) + 1 == j->zero_ffail)
		return -EIO;
	return in(n, j->ffail_from, j->ffail_to) ? j->ferr : 0;
}

struct outcome {
	unsigned n;
	int *res;       /* per event: result of its call (async: 0 when accepted) */
	bool *is_sync;
	int close_res;
	struct auditlog_stats st;
};

/* Event i: a C_Sign whose detail "ev-<i>" (in detail) tu_count_ids counts. */
static struct auditlog_event numbered(unsigned i, char detail[32])
{
	struct auditlog_event ev = tu_event("C_Sign", i);
	ev.detail = detail;
	ev.detail_len = (size_t)snprintf(detail, 32, "ev-%u", i);
	return ev;
}

/* Write n events (every 7th synchronous) through a log with the injector. */
static void run(const char *path, enum auditlog_backend be, struct inj *j, unsigned n,
		uint64_t enospc_deadline_ms, struct outcome *o)
{
	struct al_io_hooks h = {.ctx = j, .before_write = inj_write, .before_fsync = inj_fsync,
				.force_ring = force_ring};
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;
	char detail[32];

	assert_int_equal(auditlog_config_set_backend(cfg, be), 0);
	assert_int_equal(auditlog_config_set_enospc_deadline_ms(cfg, enospc_deadline_ms), 0);
	assert_int_equal(auditlog__config_set_io_hooks(cfg, &h), 0);
	if (j->rotate_bytes) {
		assert_int_equal(auditlog_config_set_rotate_bytes(cfg, j->rotate_bytes), 0);
		assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, 16u << 10), 0);
	}
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);

	o->n = n;
	o->res = calloc(n, sizeof(int));
	o->is_sync = calloc(n, sizeof(bool));
	for (unsigned i = 0; i < n; i++) {
		struct auditlog_event ev = numbered(i, detail);
		o->is_sync[i] = quiet_sync || i % 7 == 0;
		if (quiet_sync)
			usleep(2000); /* the worker sleeps: the caller commits */
		o->res[i] = o->is_sync[i] ? auditlog_record_sync(log, &ev) : auditlog_record(log, &ev);
		if (i % 50 == 49)
			usleep(2000); /* let several batches form */
	}
	(void)auditlog_flush(log);
	auditlog_get_stats(log, &o->st, sizeof(o->st));
	o->close_res = auditlog_close(log);
}

/* Nothing acknowledged is missing; nothing appears twice; a refused
 * synchronous record is absent; every async record accepted is present
 * unless the log failed closed (then it is counted as failed). */
static void check_files(const char *dir, struct outcome *o, bool failed_closed,
			unsigned orphans)
{
	struct tu_ids f = tu_ids_new("ev-", o->n);
	unsigned files = tu_walk_chain(dir, "audit.log", tu_count_ids, &f);
	unsigned missing_async = 0;

	/* every file is in the chain, but sealed files that never held a durable record */
	assert_int_equal(files + orphans, tu_count_files(dir));
	for (unsigned i = 0; i < o->n; i++) {
		if (f.count[i] > 1)
			fail_msg("ev-%u written %u times", i, f.count[i]);
		if (o->res[i] == 0 && o->is_sync[i] && f.count[i] != 1)
			fail_msg("acknowledged ev-%u is missing", i);
		if (o->res[i] != 0 && f.count[i] != 0)
			fail_msg("refused ev-%u (%d) is in the log", i, o->res[i]);
		if (o->res[i] == 0 && !o->is_sync[i] && f.count[i] == 0)
			missing_async++;
	}
	if (!failed_closed)
		assert_int_equal(missing_async, 0);
	else
		assert_true(missing_async <= o->st.events_failed);
	/* and the verifier agrees: sealed files and their successors are intact */
	assert_int_equal(tu_verify_dir(dir), 0);
	tu_ids_free(&f);
	free(o->res);
	free(o->is_sync);
}

static void check(const char *dir, struct outcome *o, bool failed_closed)
{
	check_files(dir, o, failed_closed, 0);
}

static unsigned count_res(struct outcome *o, int res)
{
	unsigned n = 0;
	for (unsigned i = 0; i < o->n; i++)
		n += o->res[i] == res;
	return n;
}

static void write_eio(enum auditlog_backend be)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct inj j = {.wfail_from = 6, .wfail_to = 6, .werr = -EIO};
	struct outcome o;

	run(path, be, &j, 700, 0, &o);
	assert_int_equal(o.close_res, 0);
	assert_int_equal(o.st.error, 0);
	assert_int_equal(o.st.write_errors, 1);
	assert_int_equal(o.st.failovers, 1);
	assert_int_equal(tu_count_files(dir), 2);
	check(dir, &o, false);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void fsync_eio(enum auditlog_backend be)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct inj j = {.ffail_from = 4, .ffail_to = 4, .ferr = -EIO};
	struct outcome o;

	run(path, be, &j, 700, 0, &o);
	assert_int_equal(o.close_res, 0);
	assert_int_equal(o.st.fsync_errors, 1);
	assert_int_equal(o.st.failovers, 1);
	/* the batch written but not synced stays in the sealed file beyond prev_size */
	check(dir, &o, false);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void short_writes(enum auditlog_backend be)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct inj j = {.short_from = 2, .short_to = 40};
	struct outcome o;

	run(path, be, &j, 700, 0, &o);
	assert_int_equal(o.close_res, 0);
	assert_true(o.st.short_writes > 0);
	assert_int_equal(o.st.failovers, 0);
	assert_int_equal(count_res(&o, 0), 700);
	assert_int_equal(tu_count_files(dir), 1);
	check(dir, &o, false);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void enospc_fail_closed(enum auditlog_backend be)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct inj j = {.wfail_from = 5, .wfail_to = 1000000, .werr = -ENOSPC};
	struct outcome o;

	run(path, be, &j, 400, 0, &o);
	assert_int_equal(o.close_res, -ENOSPC);
	assert_int_equal(o.st.error, -ENOSPC);
	assert_true(count_res(&o, -ENOSPC) > 0);
	/* once closed, every later call is refused: the last one was */
	assert_int_equal(o.res[399], -ENOSPC);
	assert_int_equal(tu_count_files(dir), 1);
	check(dir, &o, true);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void enospc_transient(enum auditlog_backend be)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct inj j = {.wfail_from = 5, .wfail_to = 7, .werr = -ENOSPC};
	struct outcome o;

	run(path, be, &j, 400, 10000, &o);
	assert_int_equal(o.close_res, 0);
	assert_int_equal(o.st.enospc_retries, 3);
	assert_int_equal(count_res(&o, 0), 400);
	assert_int_equal(tu_count_files(dir), 1);
	check(dir, &o, false);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void eio_forever(enum auditlog_backend be)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct inj j = {.wfail_from = 5, .wfail_to = 1000000, .werr = -EIO};
	struct outcome o;

	run(path, be, &j, 300, 0, &o);
	/* each new file fails too: after a bounded number of failovers, fail closed */
	assert_int_equal(o.close_res, -EIO);
	assert_int_equal(o.st.error, -EIO);
	assert_true(o.st.failovers >= 1 && o.st.failovers <= 4);
	assert_int_equal(o.res[299], -EIO);
	free(o.res);
	free(o.is_sync);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* Faults in batches a record_sync caller commits itself: a failed
 * fdatasync fails that caller alone and the worker fails over; a short
 * write is completed and a transient ENOSPC retried, the caller waiting for
 * the worker. (With every batch through the ring nobody but the worker
 * commits, and the outcome is the same.) */
static void sync_faults(enum auditlog_backend be)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct inj j = {.ffail_from = 3, .ffail_to = 3, .ferr = -EIO,
			.short_from = 6, .short_to = 6,
			.wfail_from = 10, .wfail_to = 11, .werr = -ENOSPC};
	struct outcome o;

	quiet_sync = true;
	run(path, be, &j, 20, 10000, &o);
	quiet_sync = false;
	assert_int_equal(o.close_res, 0);
	assert_int_equal(count_res(&o, -EIO), 1); /* the caller whose fsync failed */
	assert_int_equal(count_res(&o, 0), 19);
	assert_int_equal(o.st.fsync_errors, 1);
	assert_int_equal(o.st.failovers, 1);
	assert_int_equal(o.st.short_writes, 1);
	assert_int_equal(o.st.enospc_retries, 2);
	if (!force_ring)
		assert_true(o.st.caller_commits > 0);
	else
		assert_int_equal(o.st.caller_commits, 0);
	assert_int_equal(tu_count_files(dir), 2);
	check(dir, &o, false);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* io_uring with every batch through the ring, io_uring as it runs (lone
 * small batches inline), and the pwrite backend */
/* The first batch of a rotated file (its header) fails: the next file must
 * link to the file that holds the durable head, not to the sealed one. */
static void header_batch_fails(enum auditlog_backend be)
{
	/* the header's write fails (an empty sealed file), or its fdatasync (the
	 * header is in the sealed file: the next header names that file in
	 * sealed_name / sealed_file_id, so the verifier does not call it a fork) */
	for (int in_file = 0; in_file < 2; in_file++) {
		char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
		struct inj j = {.zero_fail = in_file ? 0 : 2, .zero_ffail = in_file ? 2 : 0,
				.rotate_bytes = 64u << 10};
		struct outcome o;

		run(path, be, &j, 1500, 0, &o);
		assert_int_equal(o.close_res, 0);
		assert_int_equal(o.st.failovers, 1);
		assert_true(o.st.rotations >= 2);
		check_files(dir, &o, false, 1);
		free(path);
		tu_rmtree(dir);
		free(dir);
	}
}

/* A batch formed ahead (docs/durability.md): while AL_INFLIGHT batches are in
 * flight the worker forms the next, written once the oldest retires. The
 * test leaves the completions unreaped until one was formed ahead, then lets
 * them in. With every fdatasync succeeding, each record is in the file once;
 * with the first completion after the release failing, the failed batch, the
 * one in flight beside it and the one formed ahead (never written) go into
 * the next file: nothing twice, nothing missing, and the verifier agrees. */
struct ahead {
	_Atomic unsigned writes; /* issued */
	_Atomic bool hold;
	_Atomic int fail_next; /* -errno: the next fdatasync completion's result */
	_Atomic unsigned failed;
};

static bool ahead_hold(void *ctx)
{
	struct ahead *a = ctx;
	if (!atomic_load(&a->hold))
		return false;
	usleep(500);
	return true;
}

static int ahead_write(void *ctx, int fd, uint64_t off, size_t *len)
{
	struct ahead *a = ctx;
	(void)fd;
	(void)off;
	(void)len;
	atomic_fetch_add(&a->writes, 1);
	return 0;
}

static int ahead_fsync_result(void *ctx, uint64_t off, size_t len, int res)
{
	struct ahead *a = ctx;
	int e = atomic_exchange(&a->fail_next, 0);
	(void)off;
	(void)len;
	if (!e)
		return res;
	atomic_fetch_add(&a->failed, 1);
	return e;
}

static bool formed_ahead(const struct auditlog_stats *st, void *ctx)
{
	(void)ctx;
	return st->batches_ahead > 0;
}

struct ahead_producer {
	struct auditlog *log;
	struct outcome *o;
	unsigned from;
};

/* The asynchronous records, from a thread of their own: with a small queue it
 * blocks on the full queue until the test lets the completions in. */
static void *ahead_produce(void *arg)
{
	struct ahead_producer *p = arg;
	char detail[32];

	for (unsigned i = p->from; i < p->o->n; i++) {
		struct auditlog_event ev = numbered(i, detail);
		p->o->res[i] = auditlog_record(p->log, &ev);
	}
	return NULL;
}

/* max_batch: 16 KiB, so a batch formed ahead is a full one (~46 records); or
 * 1 MiB with a queue of 256, so it is formed when the queue is half full. */
static void ahead_run(bool fail, size_t max_batch, size_t queue)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct ahead a = {0};
	struct al_io_hooks h = {.ctx = &a, .before_write = ahead_write,
				.hold_completions = ahead_hold, .fsync_result = ahead_fsync_result,
				.force_ring = true};
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog_stats st;
	struct auditlog *log;
	struct outcome o = {.n = 600};
	struct ahead_producer prod = {.o = &o, .from = 12};
	pthread_t th;
	char detail[32];

	assert_int_equal(auditlog__config_set_io_hooks(cfg, &h), 0);
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, max_batch), 0);
	if (queue)
		assert_int_equal(auditlog_config_set_queue_capacity(cfg, queue), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	prod.log = log;
	o.res = calloc(o.n, sizeof(int));
	o.is_sync = calloc(o.n, sizeof(bool));
	/* ten records durable, one batch each; then, completions held, two
	 * batches of one record each issued, before the others are queued (one
	 * batch formed from a stream could take them all) */
	for (unsigned i = 0; i < prod.from; i++) {
		struct auditlog_event ev = numbered(i, detail);
		o.is_sync[i] = i < 10;
		if (i == 10)
			atomic_store(&a.hold, true);
		unsigned w = atomic_load(&a.writes);
		o.res[i] = o.is_sync[i] ? auditlog_record_sync(log, &ev) : auditlog_record(log, &ev);
		assert_int_equal(o.res[i], 0);
		for (unsigned t = 0; t < 50000 && atomic_load(&a.writes) == w; t++)
			usleep(100);
		assert_int_equal(atomic_load(&a.writes), w + 1);
	}
	assert_int_equal(pthread_create(&th, NULL, ahead_produce, &prod), 0);
	if (!tu_stats_wait(log, formed_ahead, NULL, 5000)) {
		assert_int_equal(auditlog_get_stats(log, &st, sizeof(st)), 0);
		fail_msg("no batch was formed ahead with two in flight (max_batch %zu, queue %zu; "
			 "%llu queued, %llu written, queue high water %llu)",
			 max_batch, queue, (unsigned long long)st.events_enqueued,
			 (unsigned long long)st.events_written, (unsigned long long)st.queue_high_water);
	}
	assert_int_equal(auditlog_get_stats(log, &st, sizeof(st)), 0);
	assert_int_equal(st.events_written, 10); /* the two in flight are not reaped yet */
	if (fail)
		atomic_store(&a.fail_next, -EIO);
	atomic_store(&a.hold, false);
	assert_int_equal(pthread_join(th, NULL), 0);
	for (unsigned i = 0; i < o.n; i++)
		assert_int_equal(o.res[i], 0);
	/* a flush whose batch failed returns -EIO before the records are re-written */
	(void)auditlog_flush(log);
	if (!tu_stats_wait(log, tu_all_written, NULL, 5000))
		fail_msg("the records of the batches in flight and formed ahead were not all written");
	assert_int_equal(auditlog_get_stats(log, &o.st, sizeof(o.st)), 0);
	assert_int_equal(o.st.failovers, fail);
	assert_int_equal(o.st.fsync_errors, fail);
	assert_int_equal(atomic_load(&a.failed), fail);
	assert_int_equal(o.st.events_written, o.n);
	assert_int_equal(auditlog_close(log), 0);
	assert_int_equal(tu_count_files(dir), 1 + fail);
	check(dir, &o, false);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void test_ahead(void **state)
{
	(void)state;
	for (int fail = 0; fail < 2; fail++) {
		ahead_run(fail, 16u << 10, 0);
		ahead_run(fail, 1u << 20, 256);
	}
}

#define BOTH(fn)                                                                                   \
	static void test_##fn(void **state)                                                        \
	{                                                                                          \
		force_ring = true;                                                                 \
		fn(AUDITLOG_BACKEND_IO_URING);                                                     \
		force_ring = false;                                                                \
		fn(AUDITLOG_BACKEND_IO_URING);                                                     \
		fn(AUDITLOG_BACKEND_PWRITE);                                                       \
	}
BOTH(write_eio)
BOTH(fsync_eio)
BOTH(short_writes)
BOTH(enospc_fail_closed)
BOTH(enospc_transient)
BOTH(eio_forever)
BOTH(header_batch_fails)
BOTH(sync_faults)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_eio),          cmocka_unit_test(test_fsync_eio),
		cmocka_unit_test(test_short_writes),       cmocka_unit_test(test_enospc_fail_closed),
		cmocka_unit_test(test_enospc_transient),   cmocka_unit_test(test_eio_forever),
		cmocka_unit_test(test_header_batch_fails), cmocka_unit_test(test_sync_faults),
		cmocka_unit_test(test_ahead),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
