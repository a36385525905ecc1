/* SPDX-License-Identifier: MIT */
/*
 * Lanes (auditlog_config_set_queue_lanes, docs/durability.md "Lanes"): the
 * queue split into one ring a CPU, merged by the worker. What callers rely
 * on must hold as with one ring: a record whose call returned before another
 * call began is before it in the chain, in any thread; nothing is lost or
 * doubled; flush and record_sync keep their contracts. Each event carries
 * in its detail what its thread had seen returned before its call began,
 * and the walk checks that all of it is earlier in the chain.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "log.h"
#include "tu.h"

#define NT 4 /* threads */

/* Each thread's count of calls returned so far. */
static _Atomic uint64_t returned[NT];

struct order {
	uint64_t in_chain[NT]; /* events of each thread seen so far in the walk */
	uint64_t events, broken, own_order;
};

/* detail: "t=<t> i=<i> seen=<n0>,<n1>,<n2>,<n3>" */
static void check_event(void *ctx, const struct al_parsed *p)
{
	struct order *o = ctx;
	char d[128];
	unsigned t;
	unsigned long long i, s[NT];

	if (!(p->rec.present & AL_BIT(AL_F_DETAIL)) || p->rec.f[AL_F_DETAIL].n >= sizeof(d))
		fail_msg("an event without this test's detail");
	memcpy(d, p->rec.f[AL_F_DETAIL].p, p->rec.f[AL_F_DETAIL].n);
	d[p->rec.f[AL_F_DETAIL].n] = '\0';
	if (sscanf(d, "t=%u i=%llu seen=%llu,%llu,%llu,%llu", &t, &i, &s[0], &s[1], &s[2], &s[3]) !=
		    6 ||
	    t >= NT)
		fail_msg("detail %s", d);
	o->events++;
	if (i != o->in_chain[t]) /* one thread's calls in their order, none lost */
		o->own_order++;
	for (unsigned k = 0; k < NT; k++)
		if (o->in_chain[k] < s[k]) /* returned before this call began, yet later */
			o->broken++;
	o->in_chain[t] = i + 1;
}

static void event_of(char *buf, size_t cap, unsigned t, uint64_t i, struct auditlog_event *ev)
{
	int n = snprintf(buf, cap, "t=%u i=%llu seen=", t, (unsigned long long)i);
	for (unsigned k = 0; k < NT; k++)
		n += snprintf(buf + n, cap - (size_t)n, k ? ",%llu" : "%llu",
			      (unsigned long long)atomic_load(&returned[k]));
	*ev = tu_event("C_Sign", t);
	ev->detail = buf;
	ev->detail_len = (size_t)n;
}

/* Record event i of thread t, then say it returned. */
static void record_as(struct auditlog *log, unsigned t, uint64_t i)
{
	char buf[128];
	struct auditlog_event ev;

	event_of(buf, sizeof(buf), t, i, &ev);
	assert_int_equal(auditlog_record(log, &ev), 0);
	atomic_store(&returned[t], i + 1);
}

/* Until *step reaches want; false after ~10 s. */
static bool wait_step(_Atomic unsigned *step, unsigned want)
{
	struct timespec ts = {0, 50 * 1000};
	time_t end = time(NULL) + 10;

	while (atomic_load(step) < want)
		if (time(NULL) > end)
			return false;
		else
			nanosleep(&ts, NULL);
	return true;
}

struct worker_arg {
	struct auditlog *log;
	unsigned t;
	uint64_t n;
};

static void *producer(void *arg)
{
	struct worker_arg *a = arg;
	char buf[128];

	for (uint64_t i = 0; i < a->n; i++) {
		struct auditlog_event ev;
		int r;

		event_of(buf, sizeof(buf), a->t, i, &ev);
		if (i % 97 == 13)
			r = auditlog_record_sync(a->log, &ev);
		else
			r = auditlog_record(a->log, &ev);
		assert_int_equal(r, 0);
		atomic_store(&returned[a->t], i + 1);
		if (i % 211 == 7)
			assert_int_equal(auditlog_flush(a->log), 0);
	}
	return NULL;
}

static void walk_checked(const char *path, uint64_t want)
{
	struct order o = {0};
	struct tu_walk w;

	assert_int_equal(tu_walk_file(path, &w, check_event, &o), 0);
	assert_int_equal(o.events, want);
	assert_int_equal(o.own_order, 0);
	assert_int_equal(o.broken, 0);
}

/* Four threads on two CPUs, lanes forced to 4 (two of them used): every
 * record in the chain after all that had returned before its call began. */
static void test_order_across_lanes(void **state)
{
	char *dir = tu_mkdtemp();
	char *path = tu_path(dir, "audit.log");
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;
	struct auditlog_stats st;
	struct worker_arg a[NT];
	pthread_t th[NT];
	uint64_t n = 20000 / tu_test_scale();

	assert_int_equal(auditlog_config_set_queue_lanes(cfg, 4), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	assert_int_equal(auditlog_get_stats(log, &st, sizeof(st)), 0);
	assert_int_equal(st.queue_lanes, 4);
	for (unsigned t = 0; t < NT; t++) {
		atomic_store(&returned[t], 0);
		a[t] = (struct worker_arg){log, t, n};
		assert_int_equal(pthread_create(&th[t], NULL, producer, &a[t]), 0);
	}
	for (unsigned t = 0; t < NT; t++)
		pthread_join(th[t], NULL);
	assert_int_equal(auditlog_get_stats(log, &st, sizeof(st)), 0);
	assert_int_equal(st.events_enqueued, NT * n);
	assert_int_equal(auditlog_close(log), 0);
	walk_checked(path, NT * n);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/*
 * A lane shared by two threads, one of them held between its reservation
 * and its stamp (the before_stamp hook): A reserves slot p of lane 0 and
 * stops; B, on A's CPU, reserves p+1, records X and returns; C, on the
 * other CPU (lane 1), begins after X returned and records Y; then A goes on,
 * its stamp the latest of the three. The worker must neither take Y while
 * p is unpublished (its stamp unknown) nor, once it is, put Y before X
 * because A's stamp is above Y's: lane 0 holds A's record before X. Each
 * round's three events are checked by the walk like all others.
 */
struct scene {
	struct auditlog *log;
	unsigned rounds;
	/* round * 8 + step: 0 begun, 1 A held, 2 X returned, 3 Y returned,
	 * 4 A returned; C moves it to the next round */
	_Atomic unsigned phase;
};

static _Thread_local bool thread_is_a;

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	assert_int_equal(pthread_setaffinity_np(pthread_self(), sizeof(set), &set), 0);
}

static void wait_phase(struct scene *sc, unsigned want)
{
	if (!wait_step(&sc->phase, want))
		fail_msg("phase %u never came (at %u)", want, atomic_load(&sc->phase));
}

static void held_stamp(void *ctx)
{
	struct scene *sc = ctx;
	unsigned base;

	if (!thread_is_a)
		return;
	base = atomic_load(&sc->phase) & ~7u;
	atomic_store(&sc->phase, base + 1);
	wait_phase(sc, base + 3);
}

static void *thread_a(void *arg)
{
	struct scene *sc = arg;

	pin(0);
	for (unsigned r = 0; r < sc->rounds; r++) {
		wait_phase(sc, r * 8);
		thread_is_a = true;
		record_as(sc->log, 0, r); /* held in its stamp until Y returned */
		thread_is_a = false;
		atomic_store(&sc->phase, r * 8 + 4);
	}
	return NULL;
}

static void *thread_b(void *arg)
{
	struct scene *sc = arg;

	pin(0);
	for (unsigned r = 0; r < sc->rounds; r++) {
		wait_phase(sc, r * 8 + 1);
		record_as(sc->log, 1, r); /* X: lane 0, after A's reservation */
		atomic_store(&sc->phase, r * 8 + 2);
	}
	return NULL;
}

static void *thread_c(void *arg)
{
	struct scene *sc = arg;

	pin(1);
	for (unsigned r = 0; r < sc->rounds; r++) {
		wait_phase(sc, r * 8 + 2);
		record_as(sc->log, 2, r); /* Y: lane 1, begun after X returned */
		atomic_store(&sc->phase, r * 8 + 3);
		wait_phase(sc, r * 8 + 4);
		atomic_store(&sc->phase, (r + 1) * 8);
	}
	return NULL;
}

static void test_shared_lane_held_stamp(void **state)
{
	char *dir = tu_mkdtemp();
	char *path = tu_path(dir, "audit.log");
	struct auditlog_config *cfg = tu_config(path);
	struct scene sc = {.rounds = 200};
	struct al_io_hooks h = {.ctx = &sc, .before_stamp = held_stamp};
	pthread_t a, b, c;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		auditlog_config_free(cfg);
		skip(); /* two CPUs are needed for two lanes in use */
	}
	assert_int_equal(auditlog_config_set_queue_lanes(cfg, 2), 0);
	assert_int_equal(auditlog__config_set_io_hooks(cfg, &h), 0);
	assert_int_equal(auditlog_open(cfg, &sc.log), 0);
	auditlog_config_free(cfg);
	for (unsigned t = 0; t < NT; t++)
		atomic_store(&returned[t], 0);
	assert_int_equal(pthread_create(&a, NULL, thread_a, &sc), 0);
	assert_int_equal(pthread_create(&b, NULL, thread_b, &sc), 0);
	assert_int_equal(pthread_create(&c, NULL, thread_c, &sc), 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	pthread_join(c, NULL);
	assert_int_equal(auditlog_close(sc.log), 0);

	walk_checked(path, 3 * sc.rounds);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/*
 * A cut's reading of the lanes is not one instant: the worker reads lane 0's
 * position, then lane 1's. In between (the cut_read hook), A on CPU 0 records
 * X in lane 0 and returns, then C on CPU 1 records Y in lane 1. The worker
 * then sees Y but not X: only the clock read before the positions (Y's stamp
 * is above it) keeps Y out of this cut, else Y is committed before X.
 */
struct between {
	struct auditlog *log;
	/* round * 4 + step: 1 X wanted, 2 X returned, 3 Y returned */
	_Atomic unsigned armed, round, step;
	unsigned rounds;
};

static void between_reads(void *ctx, unsigned i)
{
	struct between *bw = ctx;
	unsigned r;

	if (i != 0 || !atomic_exchange(&bw->armed, 0))
		return;
	r = atomic_load(&bw->round);
	atomic_store(&bw->step, r * 4 + 1);
	(void)wait_step(&bw->step, r * 4 + 3); /* no assert on the worker: the walk fails */
}

static void *between_a(void *arg)
{
	struct between *bw = arg;

	pin(0);
	for (unsigned r = 0; r < bw->rounds; r++) {
		if (!wait_step(&bw->step, r * 4 + 1))
			fail_msg("round %u: no cut", r);
		record_as(bw->log, 0, r); /* X */
		atomic_store(&bw->step, r * 4 + 2);
	}
	return NULL;
}

static void *between_c(void *arg)
{
	struct between *bw = arg;

	pin(1);
	for (unsigned r = 0; r < bw->rounds; r++) {
		if (!wait_step(&bw->step, r * 4 + 2))
			fail_msg("round %u: no X", r);
		record_as(bw->log, 2, r); /* Y */
		atomic_store(&bw->step, r * 4 + 3);
	}
	return NULL;
}

static void test_cut_between_reads(void **state)
{
	char *dir = tu_mkdtemp();
	char *path = tu_path(dir, "audit.log");
	struct auditlog_config *cfg = tu_config(path);
	struct between bw = {.rounds = 100};
	struct al_io_hooks h = {.ctx = &bw, .cut_read = between_reads};
	pthread_t a, c;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		auditlog_config_free(cfg);
		skip();
	}
	assert_int_equal(auditlog_config_set_queue_lanes(cfg, 2), 0);
	assert_int_equal(auditlog__config_set_io_hooks(cfg, &h), 0);
	assert_int_equal(auditlog_open(cfg, &bw.log), 0);
	auditlog_config_free(cfg);
	for (unsigned t = 0; t < NT; t++)
		atomic_store(&returned[t], 0);
	assert_int_equal(pthread_create(&a, NULL, between_a, &bw), 0);
	assert_int_equal(pthread_create(&c, NULL, between_c, &bw), 0);
	for (unsigned r = 0; r < bw.rounds; r++) {
		/* a record from this thread wakes the worker into a cut */
		atomic_store(&bw.round, r);
		atomic_store(&bw.armed, 1);
		record_as(bw.log, 1, r);
		if (!wait_step(&bw.step, r * 4 + 3))
			fail_msg("round %u never ended", r);
	}
	pthread_join(a, NULL);
	pthread_join(c, NULL);
	assert_int_equal(auditlog_close(bw.log), 0);
	walk_checked(path, 3 * bw.rounds);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void test_setter(void **state)
{
	char *dir = tu_mkdtemp();
	char *path = tu_path(dir, "audit.log");
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;
	struct auditlog_stats st;

	/* the default: a lane a CPU, a power of two, at most 16 (x86) */
	unsigned want = 1;
	while (want < 16 && (long)want < sysconf(_SC_NPROCESSORS_CONF))
		want <<= 1;
	assert_int_equal(auditlog_open(cfg, &log), 0);
	assert_int_equal(auditlog_get_stats(log, &st, sizeof(st)), 0);
#if defined(__x86_64__) || defined(__i386__)
	assert_int_equal(st.queue_lanes, want);
#else
	assert_int_equal(st.queue_lanes, 1);
#endif
	assert_int_equal(auditlog_close(log), 0);
	assert_int_equal(auditlog_config_set_queue_lanes(NULL, 1), -EINVAL);
	assert_int_equal(auditlog_config_set_queue_lanes(cfg, 17), -EINVAL);
	/* 3 is rounded up to 4; a 64-slot queue keeps one lane of 64 */
	assert_int_equal(auditlog_config_set_queue_lanes(cfg, 3), 0);
	assert_int_equal(auditlog_config_set_queue_capacity(cfg, 64), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	assert_int_equal(auditlog_get_stats(log, &st, sizeof(st)), 0);
	assert_int_equal(st.queue_lanes, 1);
	assert_int_equal(auditlog_close(log), 0);
	/* 128 slots: two lanes of 64; 256: the four asked */
	assert_int_equal(auditlog_config_set_queue_capacity(cfg, 128), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	assert_int_equal(auditlog_get_stats(log, &st, sizeof(st)), 0);
	assert_int_equal(st.queue_lanes, 2);
	assert_int_equal(auditlog_close(log), 0);
	assert_int_equal(auditlog_config_set_queue_capacity(cfg, 256), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	assert_int_equal(auditlog_get_stats(log, &st, sizeof(st)), 0);
	assert_int_equal(st.queue_lanes, 4);
	assert_int_equal(auditlog_close(log), 0);
	auditlog_config_free(cfg);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* The handle and its lanes sit where their types ask (AL_PAIR, log.h): what
 * producers write and the worker reads 128 bytes from anything else. calloc
 * gave 16 bytes, so the lines the layout keeps apart could share a line, or
 * a line's prefetched buddy, by chance of the heap. Opened after allocations
 * of several sizes, so that a 16-byte allocator would land off it. */
static void test_layout(void **state)
{
	char *dir = tu_mkdtemp();
	char *path = tu_path(dir, "audit.log");
	struct auditlog_config *cfg = tu_config(path);
	void *churn[8] = {0};

	(void)state;
	assert_true(_Alignof(struct auditlog) >= AL_PAIR && _Alignof(struct lane) >= AL_PAIR);
	assert_true(offsetof(struct lane, deq_pos) - offsetof(struct lane, enq_pos) >= AL_PAIR);
	assert_true(offsetof(struct auditlog, error) - offsetof(struct auditlog, worker_sleeping) >= AL_PAIR);
	assert_true(offsetof(struct auditlog, cut_off) - offsetof(struct auditlog, barriers) >= AL_PAIR);
	assert_int_equal(auditlog_config_set_queue_lanes(cfg, 2), 0);
	for (unsigned i = 0; i < 8; i++) {
		struct auditlog *log;
		churn[i] = malloc(16 * (i + 1) + 36 * 1024 * (i & 1));
		assert_non_null(churn[i]);
		assert_int_equal(auditlog_open(cfg, &log), 0);
		assert_int_equal((uintptr_t)log % AL_PAIR, 0);
		assert_int_equal((uintptr_t)log->lanes % AL_PAIR, 0);
		assert_int_equal(auditlog_close(log), 0);
	}
	for (unsigned i = 0; i < 8; i++)
		free(churn[i]);
	auditlog_config_free(cfg);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_setter),
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_order_across_lanes),
		cmocka_unit_test(test_shared_lane_held_stamp),
		cmocka_unit_test(test_cut_between_reads),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
