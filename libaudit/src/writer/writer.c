/* SPDX-License-Identifier: MIT */
/*
 * The group-commit engine: a bounded lock-free MPSC queue (Vyukov's bounded
 * ring, one consumer; or one a CPU, merged in the callers' order: "Lanes"
 * below), one worker thread that formats everything queued into
 * a batch and commits it with one write linked to one fdatasync (io_uring, or
 * pwrite+fdatasync with the same completion logic), two batches in flight,
 * waiters released strictly in batch order. docs/durability.md.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "format_v2.h"

#define DEC_CAP (AL_LINE_MAX * 3)
#define INLINE_MAX (64u << 10) /* a lone batch up to this size is committed inline */
#define DROP_STEP (8u << 20)   /* the page cache is dropped behind the end this much at a time */
#define DROP_MAX (1u << 30)    /* ... and at most this much a request (an SQE's len is 32 bits) */
#define UD_EVENTFD UINT64_MAX  /* user_data of the eventfd's poll */
#define UD_DROP (UINT64_MAX - 1) /* ... and of a page-cache drop */

static const uint8_t zero_hash[AL_HASH_LEN];

_Static_assert(sizeof(struct slot) == SLOT_SIZE && SLOT_SIZE % 64 == 0, "a queue slot is whole cache lines");

/* ---- futex ---------------------------------------------------------------- */

static void futex_wait(_Atomic uint32_t *w, uint32_t val, const struct timespec *to)
{
	(void)syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, to, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *w)
{
	(void)syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void waiter_release(struct waiter *w, int result)
{
	w->result = result;
	atomic_store_explicit(&w->done, 1, memory_order_release);
	futex_wake_all(&w->done);
}

/*
 * Waiting for a batch: the caller sleeps on its waiter's futex. It used to
 * poll (sched_yield) for up to 2 ms first, to skip the futex wake-up; on the
 * 2-vCPU VM we measure on that made record_sync slower, not faster: a vCPU
 * kept busy by the poller is one the fdatasync's completion, the worker and
 * the sealer then wait for (docs/benchmarks.md, "The synchronous caller
 * sleeps"). A record_sync on a quiet log does not wait here at all: it
 * commits its own batch (lead()).
 */
static int waiter_wait(struct waiter *w)
{
	while (!atomic_load_explicit(&w->done, memory_order_acquire))
		futex_wait(&w->done, 0, NULL);
	return w->result;
}

/*
 * worker_sleeping says who holds the worker's role, the state the worker
 * alone touches (the queue's read side, the batches, the file, the chain):
 *   0           the worker thread, awake;
 *   SLEEP_ANY   nobody: the worker sleeps and wants waking by any record;
 *   SLEEP_HOLD  nobody: the worker sleeps holding a coalescing batch, and
 *               wants waking only by a record with a waiter or a full batch
 *               (auditlog_config_set_async_coalesce_us);
 *   SLEEP_LEAD  a record_sync caller, committing its own batch (lead());
 *               SLEEP_CLAIM is added when the worker woke meanwhile and
 *               waits for the role back (reclaim()), SLEEP_PEND by a
 *               producer that published meanwhile: the caller wakes the
 *               worker when it hands the role back.
 * Only compare-and-swap moves it out of SLEEP_ANY or SLEEP_HOLD, so the
 * role has exactly one holder; its acquire and release order the state.
 */
#define SLEEP_ANY 1u
#define SLEEP_HOLD 2u
#define SLEEP_LEAD 4u
#define SLEEP_CLAIM 8u
#define SLEEP_PEND 16u

/*
 * publish() and the worker's sleep are a Dekker pair: the producer stores
 * its slot's seq and then loads worker_sleeping; the worker stores
 * SLEEP_ANY (or SLEEP_HOLD) and then loads the slot's seq. Each side needs a
 * full barrier between its store and its load, or both may read the old
 * value: the worker sleeps and the record waits for the next one. On x86
 * the producer's fence waits until every store of its hand-off (the slot's
 * lines, owned by the worker's core a moment ago) is visible: ~70 ns of a
 * ~120 ns hand-off between two vCPUs (docs/benchmarks.md, "The hand-off's
 * fence"). The worker sleeps far less often than producers publish, so the
 * barrier is moved to its side: membarrier(PRIVATE_EXPEDITED) runs a full
 * barrier on every CPU then running a thread of this process (a thread
 * not running has passed one in the context switch), so a producer's seq
 * store is visible to the worker's load after it, or that producer's load
 * of worker_sleeping comes after the worker's store. Where membarrier() is
 * missing or refused (kernels before 4.14, seccomp), producers fence as
 * before. A record_sync caller's hand-back of the role (lead()) keeps its
 * plain fence: a producer that sees SLEEP_LEAD marks it SLEEP_PEND with a
 * compare-and-swap, a full barrier it pays only then.
 */
/* (GCC's -Wtsan flags the fences below, in offer_barrier() and publish()
 * once inlined: ThreadSanitizer does not model fences, nor membarrier(), here
 * as in lead() and worker_main, where it stays silent.) */
#if defined(__SANITIZE_THREAD__)
#pragma GCC diagnostic ignored "-Wtsan"
#endif
static bool membarrier_register(void)
{
	return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* The worker's barrier after it offered its role. False: it could not be
 * made (membarrier() failed after registering, which it should not): the
 * worker must look at the queue again before it sleeps; producers fence
 * from now on. */
static bool offer_barrier(struct auditlog *l)
{
	if (atomic_load_explicit(&l->light_publish, memory_order_relaxed)) {
		if (!(l->cfg.has_hooks && l->cfg.hooks.membarrier_fails) &&
		    syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
			return true;
		atomic_store(&l->light_publish, 0);
		atomic_thread_fence(memory_order_seq_cst);
		return false;
	}
	atomic_thread_fence(memory_order_seq_cst);
	return true;
}

static void wake_worker(struct auditlog *l)
{
	uint64_t one = 1;
	ssize_t r = write(l->efd, &one, sizeof(one));
	(void)r; /* an eventfd write only fails when the counter would overflow */
}

/* ---- record formatting ---------------------------------------------------- */

/* The hash the chain's next record is hashed onto. */
static const uint8_t *chain_prev(const struct auditlog *l)
{
	return l->tail.empty ? zero_hash : l->tail.hash;
}

/* The chain moved on by one record: seq, its hash and time. */
static void tail_advance(struct auditlog *l, uint8_t type, uint8_t version, uint64_t seq,
			 const uint8_t hash[AL_HASH_LEN], uint64_t ts_ns, const char ts[AL_TS_LEN])
{
	l->tail.seq = seq;
	memcpy(l->tail.hash, hash, AL_HASH_LEN);
	l->tail.ts_ns = ts_ns;
	memcpy(l->tail.ts_str, ts, AL_TS_LEN);
	l->tail.version = version;
	l->tail.empty = false;
	if (l->sealer && version == AL_V2) /* every v2 record is a Merkle leaf */
		al_v2_leaf(&l->v2, type, seq, hash, l->sha_ni);
}

static long append_common(struct auditlog *l, struct al_record *dec, uint64_t ts_ns, uint8_t *out)
{
	struct al_emit_out eo;
	long n;

	dec->version = (uint8_t)l->cfg.version;
	dec->f[AL_F_SEQ].u = al_next_seq(l);
	dec->present |= AL_BIT(AL_F_TIMESTAMP) | AL_BIT(AL_F_SEQ);
	n = al_emit(dec, chain_prev(l), out, l->work, &eo);
	if (n >= 0)
		tail_advance(l, dec->type, dec->version, dec->f[AL_F_SEQ].u, eo.hash, ts_ns,
			     (const char *)dec->f[AL_F_TIMESTAMP].p);
	return n;
}

uint64_t al_clamp_ts(struct auditlog *l, uint64_t ts_ns)
{
	if (!l->tail.empty && ts_ns < l->tail.ts_ns)
		return l->tail.ts_ns;
	return ts_ns;
}

long al_chain_append(struct auditlog *l, struct al_record *raw, uint64_t ts_ns, uint8_t *out)
{
	char ts[AL_TS_LEN];
	int r;

	ts_ns = al_clamp_ts(l, ts_ns);
	al_format_ts_cached(&l->ts_cache, ts_ns, ts);
	raw->f[AL_F_TIMESTAMP].p = (const uint8_t *)ts;
	raw->f[AL_F_TIMESTAMP].n = AL_TS_LEN;
	raw->present |= AL_BIT(AL_F_TIMESTAMP);
	r = al_record_decode(raw, raw, l->dec, DEC_CAP); /* in place */
	if (r < 0)
		return r;
	return append_common(l, raw, ts_ns, out);
}

long al_chain_append_decoded(struct auditlog *l, struct al_record *dec, uint64_t ts_ns,
			     uint8_t *out)
{
	char ts[AL_TS_LEN];

	ts_ns = al_clamp_ts(l, ts_ns);
	al_format_ts_cached(&l->ts_cache, ts_ns, ts);
	dec->f[AL_F_TIMESTAMP].p = (const uint8_t *)ts;
	dec->f[AL_F_TIMESTAMP].n = AL_TS_LEN;
	return append_common(l, dec, ts_ns, out);
}

long al_format_header(struct auditlog *l, uint8_t *out)
{
	struct al_record rec = {.type = AL_T_HEADER};
	uint8_t fid[16];
	char fid_hex[32], cid_hex[32], prev_hex[64], sid_hex[32];
	uint64_t ts = al_wall_ns(l);
	bool linked = strcmp(l->header_reason, "rotate") == 0 ||
		      strcmp(l->header_reason, "io-error") == 0;
	long n;

	al_random_id(fid);
	al_hex(fid, 16, fid_hex);
	al_hex(l->chain_id, 16, cid_hex);
	rec.present = AL_BIT(AL_F_FILE_ID) | AL_BIT(AL_F_CHAIN_ID) | AL_BIT(AL_F_REASON);
	rec.f[AL_F_FILE_ID] = (struct al_val){(const uint8_t *)fid_hex, 32, 0};
	rec.f[AL_F_CHAIN_ID] = (struct al_val){(const uint8_t *)cid_hex, 32, 0};
	rec.f[AL_F_REASON] = (struct al_val){(const uint8_t *)l->header_reason,
					     strlen(l->header_reason), 0};
	if (linked) {
		al_hex(l->header_prev.hash, AL_HASH_LEN, prev_hex);
		rec.present |= AL_BIT(AL_F_PREV_NAME) | AL_BIT(AL_F_PREV_SEQ) |
			       AL_BIT(AL_F_PREV_HASH) | AL_BIT(AL_F_PREV_SIZE);
		rec.f[AL_F_PREV_NAME] = (struct al_val){(const uint8_t *)l->prev_name,
							strlen(l->prev_name), 0};
		rec.f[AL_F_PREV_SEQ].u = l->header_prev.seq;
		rec.f[AL_F_PREV_HASH] = (struct al_val){(const uint8_t *)prev_hex, 64, 0};
		rec.f[AL_F_PREV_SIZE].u = l->header_prev_size;
		if (strcmp(l->header_reason, "io-error") == 0)
			ts = l->header_prev.ts_ns; /* re-written records keep their times */
		if (l->sealed_name[0]) {
			al_hex(l->sealed_id, 16, sid_hex);
			rec.present |= AL_BIT(AL_F_SEALED_NAME) | AL_BIT(AL_F_SEALED_FILE_ID);
			rec.f[AL_F_SEALED_NAME] = (struct al_val){(const uint8_t *)l->sealed_name,
								  strlen(l->sealed_name), 0};
			rec.f[AL_F_SEALED_FILE_ID] = (struct al_val){(const uint8_t *)sid_hex, 32, 0};
		}
	}
	if (l->header_detail[0]) {
		rec.present |= AL_BIT(AL_F_DETAIL);
		rec.f[AL_F_DETAIL] = (struct al_val){(const uint8_t *)l->header_detail,
						     strlen(l->header_detail), 0};
	}
	n = al_chain_append(l, &rec, ts, out);
	if (n >= 0) {
		l->file_first_seq = l->tail.seq;
		l->need_header = false;
		l->header_detail[0] = '\0';
		l->sealed_name[0] = '\0';
		memcpy(l->file_id, fid, sizeof(fid));
	}
	return n;
}

/* A slot's wall time: with lanes, unless set, its stamp's (cut()). */
static inline uint64_t slot_ts(const struct auditlog *l, const struct slot *s)
{
	return s->ts_ns || l->nlanes == 1 ? s->ts_ns : s->stamp + l->cut_off;
}

/* The producer rendered the event (producer.c): the worker adds @timestamp,
 * seq, the chain step and the hash. The slot holds, in v2, D_n and the
 * members; in v0/v1 the members and v1's body part. */
static long format_slot(struct auditlog *l, const struct slot *s, uint8_t *out)
{
	const uint8_t *d = s->heap ? s->heap : s->inl;
	uint8_t version = (uint8_t)l->cfg.version;
	uint64_t seq = al_next_seq(l), ts_ns = al_clamp_ts(l, slot_ts(l, s));
	struct al_emit_out eo;
	char ts[AL_TS_LEN];
	long n;

	al_format_ts_cached(&l->ts_cache, ts_ns, ts);
	if (version == AL_V2) {
		/* with SHA-NI, a node the tree owes is hashed beside the chain
		 * step, hiding in its latency (docs/benchmarks.md, "Merkle nodes
		 * beside the chain step") */
		struct al_node_job job, *jp = NULL;

		if (l->sha_ni && al_v2_tree_owed(&l->v2, &job.l, &job.r))
			jp = &job;
		n = al_emit_framed_node(AL_T_EVENT, seq, ts, d + AL_HASH_LEN, s->len[0], d,
					chain_prev(l), out, &eo, jp, l->sha_ni);
		if (jp && n >= 0)
			al_v2_tree_paid(&l->v2, job.out);
	} else
		n = al_emit_framed_v01(version, AL_T_EVENT, seq, ts, d, s->len[0], d + s->len[0],
				       s->len[1], chain_prev(l), out, l->work, &eo);
	if (n >= 0)
		tail_advance(l, AL_T_EVENT, version, seq, eo.hash, ts_ns, ts);
	return n;
}

/* ---- the queue ------------------------------------------------------------ */

/*
 * Lanes (docs/durability.md "Lanes"): nlanes Vyukov rings, a producer using
 * its CPU's, so that two producers on two CPUs share no written line. With
 * one lane the chain's order is the ring's. With more, each record carries
 * a CLOCK_MONOTONIC stamp read after its reservation (a locked instruction:
 * the reservation is visible before the clock is read), and the worker
 * commits in rounds, each a cut: it reads the clock (t_w), fences, reads
 * every lane's position, and takes exactly the records stamped below a bound
 * T <= t_w. Every record stamped before t_w was reserved before the worker
 * looked, so a cut misses none of them; a record whose call returned before
 * another's began has the lower stamp, so a cut holding the later one holds
 * the earlier, and the merge (below) puts it first: the chain's order extends
 * the callers' order across threads, as one ring's did.
 */

/* Whether the slot at position pos of lane q is published. */
static inline bool lane_ready(const struct auditlog *l, const struct lane *q, uint64_t pos)
{
	const struct slot *s = &q->slots[pos & l->mask];
	return atomic_load_explicit(&s->seq, memory_order_acquire) == pos + 1;
}

static inline struct slot *lane_slot(const struct auditlog *l, const struct lane *q, uint64_t pos)
{
	return &q->slots[pos & l->mask];
}

/* The worker's clock read for a cut, done before any later load (the
 * positions): RDTSC is not ordered with loads after it but by LFENCE. Lanes
 * are built only where this holds (config.c, LANES_SUPPORTED). */
static inline uint64_t cut_clock(void)
{
	uint64_t t = mono_ns();
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_lfence();
#endif
	return t;
}

/* A look at the lanes: the clock, then every lane's position. */
static void look(struct auditlog *l)
{
	uint64_t k = l->nlooks % l->looks_max, *e = l->look_e + k * l->nlanes;

	l->look_t[k] = cut_clock();
	for (unsigned i = 0; i < l->nlanes; i++) {
		e[i] = atomic_load_explicit(&l->lanes[i].enq_pos, memory_order_acquire);
		if (__builtin_expect(l->cfg.has_hooks, 0) && l->cfg.hooks.cut_read)
			l->cfg.hooks.cut_read(l->cfg.hooks.ctx, i);
	}
	l->nlooks++;
	l->since_look = 0;
}

static inline const uint64_t *look_pos(const struct auditlog *l, uint64_t k)
{
	return l->look_e + (k % l->looks_max) * l->nlanes;
}

/* The looks kept: nlooks - kept .. nlooks - 1. */
static inline uint64_t looks_kept(const struct auditlog *l)
{
	return l->nlooks < l->looks_max ? l->nlooks : l->looks_max;
}

/* A bound below the stamp of lane i's slot at pos, reserved and not yet
 * published: the clock of the newest look that read the lane's position
 * at or before pos (the slot was reserved after that read, and stamped
 * after its reservation); 0 when no look kept is that old. */
static uint64_t stamp_floor(const struct auditlog *l, unsigned i, uint64_t pos)
{
	/* a lane's position never falls from one look to the next: the looks
	 * that read it at or before pos are the oldest kept, up to one */
	uint64_t lo = l->nlooks - looks_kept(l), hi = l->nlooks;

	while (lo < hi) { /* the first look past pos */
		uint64_t mid = lo + (hi - lo) / 2;
		if (look_pos(l, mid)[i] <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > l->nlooks - looks_kept(l) ? l->look_t[(lo - 1) % l->looks_max] : 0;
}

/* Whether look k reaches at most AL_CUT_SPAN slots past every lane's next. */
static bool look_short(const struct auditlog *l, uint64_t k)
{
	const uint64_t *e = look_pos(l, k);
	for (unsigned i = 0; i < l->nlanes; i++)
		if (e[i] > l->lanes[i].deq_pos + AL_CUT_SPAN)
			return false;
	return true;
}

/* Whether look k reaches any slot not taken. */
static bool look_reaches(const struct auditlog *l, uint64_t k)
{
	const uint64_t *e = look_pos(l, k);
	for (unsigned i = 0; i < l->nlanes; i++)
		if (e[i] > l->lanes[i].deq_pos)
			return true;
	return false;
}

/*
 * In a lane with no open slot in [lo, hi) (stamp(), below), the published
 * slots are a prefix and their stamps rise: the first position in [lo, hi)
 * that is not published or (unless published_only) not stamped below T,
 * found by binary search, reading about log2(hi - lo) slots.
 */
static uint64_t lane_search(const struct auditlog *l, const struct lane *q, uint64_t lo,
			    uint64_t hi, uint64_t T, bool published_only)
{
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		bool in = (mid < q->pub_end || lane_ready(l, q, mid)) &&
			  (published_only || lane_slot(l, q, mid)->stamp < T);
		if (in)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * A new cut, made when the last one is taken. It takes a look (t, then the
 * positions e) and chooses one of the looks kept (the worker also takes one
 * every AL_LOOK_EVERY slots): every record stamped below look j's t_j was
 * reserved before look j read its lane, at a position below e_j, so the cut
 * reads no slot at or past e_j. It chooses the newest look that reaches at
 * most AL_CUT_SPAN slots into every lane (else the oldest kept; and one
 * that reaches a slot at all), so that the slots a cut reads are still in
 * the worker's cache when they are taken: when the worker is behind, an
 * older look; when not, the one just taken (always, with newest: the last
 * cut chose an older one and came out empty, its records stamped after
 * t_j). T starts at t_j. A lane with no open slot (stamp(): reserved while
 * the slot before it was another thread's and unpublished) is in stamp
 * order with its published slots a prefix, and is binary-searched. A lane
 * that may hold one is read slot by slot up to e_j (or its first slot not
 * yet published), and T is lowered (1) for that unpublished slot, to a
 * bound on its stamp (stamp_floor: open slots may follow it), and (2)
 * where the lane holds, after a slot stamped at or above T, one stamped
 * below it: each lane is taken in ring order (its order of reservation,
 * which never contradicts the callers'), so the cut in a lane must be a
 * prefix, and T is lowered until it is. The records below T are then each
 * lane's prefix [deq_pos, cut_end). The merge key of a slot is the least
 * stamp from it to its lane's cut_end: its own stamp when the lane's part
 * is in stamp order (the usual case, in which the cut only reads slots);
 * otherwise it is written over the stamp, and the slot's wall time (ts_ns,
 * else derived from the stamp when formatted) set first.
 */
static void cut(struct auditlog *l, bool newest)
{
	uint64_t j, t, T;
	const uint64_t *e;
	uint64_t pub[AL_LANES_MAX];
	bool sorted[AL_LANES_MAX], fast[AL_LANES_MAX], stalled, changed, force_scan = false;
	unsigned restarts = 0;
	struct timespec rt;

	look(l);
	clock_gettime(CLOCK_REALTIME, &rt);
	l->cut_off = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec -
		     l->look_t[(l->nlooks - 1) % l->looks_max];
	j = l->nlooks - 1;
	if (!newest && !look_short(l, j)) {
		/* the looks' positions grow with k: look_short holds for the
		 * oldest ones, if any; find the newest of those */
		uint64_t lo = l->nlooks - looks_kept(l), hi = j; /* hi: not short */
		if (look_short(l, lo)) {
			while (hi - lo > 1) {
				uint64_t mid = lo + (hi - lo) / 2;
				if (look_short(l, mid))
					lo = mid;
				else
					hi = mid;
			}
			j = look_reaches(l, lo) ? lo : hi;
		} else {
			j = lo;
		}
	}
	e = look_pos(l, j);
again:
	t = T = l->look_t[j % l->looks_max];
	stalled = false;
	/* one pass a lane: the published prefix below e_j, its part below t_j,
	 * whether that part is in stamp order, and any slot below T after it;
	 * in a lane with no open slot, by binary search (lane_search()) */
	for (unsigned i = 0; i < l->nlanes; i++) {
		struct lane *q = &l->lanes[i];
		uint64_t p = q->deq_pos, end = UINT64_MAX, prev = 0;

		sorted[i] = true;
		fast[i] = !force_scan && q->deq_pos >= q->scan_until;
		if (fast[i]) {
			q->cut_end = lane_search(l, q, q->deq_pos, e[i], t, false);
			p = pub[i] = lane_search(l, q, q->cut_end, e[i], 0, true);
			/* a slot not yet published: with no open slot, none
			 * after it is reserved, so its stamp bounds nothing */
			stalled |= p < e[i];
			continue;
		}
		for (; p < e[i]; p++) {
			if (p >= q->pub_end && !lane_ready(l, q, p))
				break;
			uint64_t st = lane_slot(l, q, p)->stamp;
			if (end == UINT64_MAX) {
				if (st >= t)
					end = p;
				else if (st < prev)
					sorted[i] = false;
				prev = st;
			} else if (st < T) {
				T = st;
			}
		}
		if (p > q->pub_end)
			q->pub_end = p;
		q->cut_end = end == UINT64_MAX ? p : end;
		if (p < e[i]) {
			uint64_t lb = stamp_floor(l, i, p);
			if (lb < T)
				T = lb;
			stalled = true;
		}
	}
	/* A lane searched holds no open slot below what the search read, unless
	 * its count of them moved: an open slot's count is raised before it is
	 * published, and any slot the search found published was published
	 * after every open slot below it (docs/durability.md "Lanes"). Read
	 * after the search; a lane whose count moved is scanned until its
	 * position now, and the cut made again. */
	for (unsigned i = 0; i < l->nlanes; i++) {
		struct lane *q = &l->lanes[i];
		uint64_t c = atomic_load_explicit(&q->opens, memory_order_acquire);
		if (c != q->opens_seen) {
			q->opens_seen = c;
			q->scan_until = atomic_load_explicit(&q->enq_pos, memory_order_acquire);
			if (fast[i]) {
				force_scan = ++restarts > 2; /* then every lane is scanned */
				goto again;
			}
		}
	}
	for (unsigned i = 0; i < l->nlanes; i++) /* the searches stand */
		if (fast[i] && pub[i] > l->lanes[i].pub_end)
			l->lanes[i].pub_end = pub[i];
	while (T < t) { /* rare: each lane's part again, below the lowered T */
		changed = false;
		for (unsigned i = 0; i < l->nlanes; i++) {
			struct lane *q = &l->lanes[i];
			uint64_t p = q->deq_pos, stop = q->pub_end < e[i] ? q->pub_end : e[i];

			if (fast[i]) { /* in stamp order: no slot below T after cut_end */
				q->cut_end = lane_search(l, q, q->deq_pos, q->cut_end, T, false);
				continue;
			}

			while (p < stop && lane_slot(l, q, p)->stamp < T)
				p++;
			q->cut_end = p;
			for (uint64_t r = p + 1; r < stop; r++)
				if (lane_slot(l, q, r)->stamp < T) {
					T = lane_slot(l, q, r)->stamp;
					changed = true;
				}
		}
		if (!changed)
			break;
	}
	for (unsigned i = 0; i < l->nlanes; i++) {
		struct lane *q = &l->lanes[i];
		uint64_t m = UINT64_MAX;

		if (sorted[i])
			continue;
		for (uint64_t r = q->cut_end; r-- > q->deq_pos;) {
			struct slot *s = lane_slot(l, q, r);
			if (!s->ts_ns)
				s->ts_ns = s->stamp + l->cut_off;
			if (s->stamp < m)
				m = s->stamp;
			s->stamp = m;
		}
	}
	l->cut_stalled = stalled;
}

/* The current cut's next slot in the chain's order, or NULL. */
static struct slot *cut_head(struct auditlog *l, struct lane **ret_q)
{
	struct lane *best = NULL;
	uint64_t key = 0;

	for (unsigned i = 0; i < l->nlanes; i++) {
		struct lane *q = &l->lanes[i];
		if (q->deq_pos < q->cut_end) {
			uint64_t k = lane_slot(l, q, q->deq_pos)->stamp;
			if (!best || k < key) {
				best = q;
				key = k;
			}
		}
	}
	if (!best)
		return NULL;
	*ret_q = best;
	return lane_slot(l, best, best->deq_pos);
}

/* Slots reserved and not taken, over all lanes. */
static uint64_t q_depth(struct auditlog *l)
{
	uint64_t d = 0;

	for (unsigned i = 0; i < l->nlanes; i++) {
		struct lane *q = &l->lanes[i];
		uint64_t n = atomic_load_explicit(&q->enq_pos, memory_order_relaxed) - q->deq_pos;
		d += n > l->mask + 1 ? l->mask + 1 : n; /* reserved, not yet published */
	}
	return d;
}

/*
 * The next slot to take, in the chain's order, or NULL when there is none
 * now (one lane: the ring's next slot unless unpublished; lanes: a new cut
 * is made when the last is taken, and once more, from a look taken then,
 * when it came out empty with records published after its look's clock
 * read: the new look's clock is past their stamps).
 */
static struct slot *q_front(struct auditlog *l, struct lane **ret_q)
{
	struct slot *s;

	if (l->nlanes == 1) {
		struct lane *q = &l->lanes[0];
		if (!lane_ready(l, q, q->deq_pos))
			return NULL;
		*ret_q = q;
		return lane_slot(l, q, q->deq_pos);
	}
	s = cut_head(l, ret_q);
	if (!s && q_depth(l) == 0) {
		/* nothing reserved and not taken: no cut can take anything (an
		 * idle worker asks several times a turn) */
		l->cut_stalled = false; /* as a cut would find */
		return NULL;
	}
	for (int i = 0; !s && i < 2; i++) {
		bool published = false;
		cut(l, i > 0);
		s = cut_head(l, ret_q);
		if (s || l->cut_stalled)
			break;
		for (unsigned k = 0; k < l->nlanes; k++)
			published |= l->lanes[k].pub_end > l->lanes[k].deq_pos;
		if (!published)
			break;
	}
	return s;
}

static bool q_pending(struct auditlog *l)
{
	struct lane *q;
	return q_front(l, &q) != NULL;
}

static uint64_t q_capacity(const struct auditlog *l)
{
	return (uint64_t)l->nlanes * (l->mask + 1);
}

/* Where a slot's publication is news for a worker about to sleep (taken by
 * the worker, or lead(), before it offers its role): each lane's next slot;
 * but when the last cut met a slot reserved and not yet published and has
 * no more of the lane to take, the end of the lane's published prefix
 * (what was published before it is known: it waits for that slot). */
struct qmark {
	uint64_t pos[AL_LANES_MAX];
};

static void q_mark(const struct auditlog *l, struct qmark *m)
{
	for (unsigned i = 0; i < l->nlanes; i++) {
		const struct lane *q = &l->lanes[i];
		bool known = l->nlanes > 1 && l->cut_stalled && q->deq_pos >= q->cut_end;
		m->pos[i] = known && q->pub_end > q->deq_pos ? q->pub_end : q->deq_pos;
	}
}

static bool q_marked_ready(const struct auditlog *l, const struct qmark *m)
{
	for (unsigned i = 0; i < l->nlanes; i++)
		if (lane_ready(l, &l->lanes[i], m->pos[i]))
			return true;
	return false;
}

static int check_event(const struct auditlog_event *ev)
{
	if (!ev || !ev->action || ev->action_len == 0 || ev->outcome > AUDITLOG_OUTCOME_UNKNOWN)
		return -EINVAL;
	if ((ev->flags & AUDITLOG_EV_SLOT) && ev->slot > AL_INT_MAX)
		return -EINVAL;
	if ((ev->flags & AUDITLOG_EV_SESSION) && ev->session > AL_INT_MAX)
		return -EINVAL;
	if (ev->flags & ~(AUDITLOG_EV_RV | AUDITLOG_EV_MECHANISM | AUDITLOG_EV_SLOT |
			  AUDITLOG_EV_SESSION | AUDITLOG_EV_KEY2))
		return -EINVAL;
	return 0;
}

static void wait_for_space(struct auditlog *l, struct lane *q, uint64_t pos)
{
	struct slot *s = lane_slot(l, q, pos);
	struct timespec to = {0, 100 * 1000 * 1000};
	uint32_t gen = atomic_load(&l->space_gen);

	atomic_fetch_add(&l->full_waiters, 1);
	/* seq_cst: the worker reads full_waiters after freeing slots */
	if ((int64_t)(atomic_load(&s->seq) - pos) < 0 && !atomic_load(&l->error))
		futex_wait(&l->space_gen, gen, &to);
	atomic_fetch_sub(&l->full_waiters, 1);
}

/* The calling thread's lane: its CPU's. A thread moved to another CPU
 * before its reservation only shares a lane for that record, which stays
 * correct (the worker takes a lane in ring order). */
static inline struct lane *my_lane(struct auditlog *l)
{
	if (l->nlanes == 1)
		return &l->lanes[0];
	int c = sched_getcpu(); /* glibc reads it from the thread's rseq area */
	return &l->lanes[(unsigned)(c < 0 ? 0 : c) & (l->nlanes - 1)];
}

/* Reserve the next slot of lane q (Vyukov's bounded ring): waits or answers
 * -EAGAIN when the lane is full, as configured. heap (the caller's, may be
 * NULL) is freed when it fails. */
static inline __attribute__((always_inline)) int reserve(struct auditlog *l, struct lane *q,
							 uint8_t *heap, struct slot **ret_s,
							 uint64_t *ret_pos)
{
	struct slot *s = NULL;
	uint64_t pos = 0;
	int r;

	pos = atomic_load_explicit(&q->enq_pos, memory_order_relaxed);
	for (;;) {
		s = lane_slot(l, q, pos);
		uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
		int64_t dif = (int64_t)(seq - pos);
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&q->enq_pos, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed))
				break;
		} else if (dif < 0) {
			if (l->cfg.full_policy == AUDITLOG_FULL_EAGAIN) {
				free(heap);
				return -EAGAIN;
			}
			wait_for_space(l, q, pos);
			r = atomic_load(&l->error);
			if (r) {
				free(heap);
				return r;
			}
			pos = atomic_load_explicit(&q->enq_pos, memory_order_relaxed);
		} else {
			pos = atomic_load_explicit(&q->enq_pos, memory_order_relaxed);
		}
	}
	*ret_s = s;
	*ret_pos = pos;
	return 0;
}

/* The producer's timestamp: the worker clamps it to stay non-decreasing. */
static inline uint64_t producer_now_ns(const struct auditlog *l)
{
	struct timespec ts;

	if (__builtin_expect(l->cfg.has_clock, 0)) /* tests drive the clock */
		return al_wall_ns(l);
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The slot's times. With lanes, the stamp: CLOCK_MONOTONIC read after the
 * reservation (its locked instruction made it visible first; the compiler
 * is kept from moving either), @timestamp derived from it by the worker;
 * with one lane, @timestamp read here. Either way one clock read, unless a
 * test drives the wall clock. */
/* This thread's last reservation in a lane: the log's number, the lane and
 * the position. */
static __thread struct {
	uint64_t gen;
	const struct lane *q;
	uint64_t pos;
} last_reserved;

static _Atomic uint64_t log_gens; /* auditlog_open numbers each log */

static inline __attribute__((always_inline)) void stamp(const struct auditlog *l, struct lane *q,
							struct slot *s, uint64_t pos)
{
	if (l->nlanes > 1) {
		/* Open: the slot before this one was reserved by another thread
		 * and not yet published, so its stamp may come after this
		 * one's. Counted before this slot is published (cut()). When
		 * it was this thread's own, or published, it was stamped
		 * before: it is published before its call returns, and this
		 * stamp is read after its publication was seen. */
		if (!(last_reserved.gen == l->gen && last_reserved.q == q &&
		      last_reserved.pos + 1 == pos) &&
		    atomic_load_explicit(&lane_slot(l, q, pos - 1)->seq, memory_order_acquire) ==
			    pos - 1)
			atomic_fetch_add_explicit(&q->opens, 1, memory_order_relaxed);
		last_reserved.gen = l->gen;
		last_reserved.q = q;
		last_reserved.pos = pos;
		atomic_signal_fence(memory_order_seq_cst);
		if (__builtin_expect(l->cfg.has_hooks, 0) && l->cfg.hooks.before_stamp)
			l->cfg.hooks.before_stamp(l->cfg.hooks.ctx);
		s->stamp = mono_ns();
		/* 0: the worker derives it (format_slot) */
		s->ts_ns = __builtin_expect(l->cfg.has_clock, 0) ? al_wall_ns(l) : 0;
	} else {
		s->ts_ns = producer_now_ns(l);
	}
}

/* Hand the filled slot to the worker, and wake it when it sleeps. */
/* Returns true when the caller, a record_sync (lead set), took the worker's
 * role from the sleeping worker instead of waking it: it commits next. */
static inline __attribute__((always_inline)) bool publish(struct auditlog *l, struct lane *q,
							  struct slot *s, uint64_t pos,
							  struct waiter *w, bool lead)
{
	if (w) /* before the slot is published: a coalescing worker sees it first */
		atomic_fetch_add_explicit(&l->sync_enq, 1, memory_order_relaxed);
	atomic_store_explicit(&s->seq, pos + 1, memory_order_release);

	/* Dekker with the worker (offer_barrier()): publish, then look whether
	 * it sleeps. A worker holding a coalescing batch is woken only by a
	 * waiter or a full batch, and makes no membarrier() for it: the
	 * records that would wake it fence here. */
	if (atomic_load_explicit(&l->light_publish, memory_order_relaxed) && !w &&
	    pos + 1 < atomic_load_explicit(&q->hold_wake_pos, memory_order_relaxed))
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
	uint32_t sl = atomic_load_explicit(&l->worker_sleeping, memory_order_relaxed);
	for (;;) {
		if (sl == SLEEP_ANY ||
		    (sl == SLEEP_HOLD &&
		     (w || pos + 1 >= atomic_load_explicit(&q->hold_wake_pos, memory_order_relaxed)))) {
			uint32_t to = lead ? SLEEP_LEAD : 0;
			if (atomic_compare_exchange_weak_explicit(&l->worker_sleeping, &sl, to,
								  memory_order_acquire,
								  memory_order_relaxed)) {
				if (lead)
					return true;
				wake_worker(l);
				return false;
			}
		} else if ((sl & SLEEP_LEAD) && !(sl & SLEEP_PEND)) {
			/* a record_sync caller holds the role: it wakes the worker
			 * for this record when it hands the role back (lead()) */
			if (atomic_compare_exchange_weak_explicit(&l->worker_sleeping, &sl,
								  sl | SLEEP_PEND,
								  memory_order_release,
								  memory_order_relaxed))
				return false;
		} else {
			return false;
		}
	}
}

/* The slot's bytes of a prepared event: its two parts, back to back. */
static inline void copy_prep(uint8_t *d, const struct al_prep *p)
{
	memcpy(d, p->buf, p->data_len);
	if (p->body_len)
		memcpy(d + p->data_len, p->buf + AL_PREP_BODY, p->body_len);
}

/*
 * The hand-off of an event its producer prepared (al_prepare, producer.c:
 * checked, decoded and rendered before a slot is reserved, so that an error
 * queues nothing and the worker only frames it). What does not fit inline
 * is copied to the heap before the reservation too; only a short copy
 * happens while the slot is held. 0 queued, 1 queued and the caller (a
 * record_sync, w set) holds the worker's role: it calls lead() next.
 */
static int handoff(struct auditlog *l, const struct al_prep *p, struct waiter *w)
{
	size_t total = p->data_len + p->body_len;
	uint8_t *heap = NULL;
	struct slot *s = NULL;
	struct lane *q;
	uint64_t pos = 0;
	int r;

	if (total > SLOT_INLINE) {
		heap = malloc(total);
		if (!heap)
			return -ENOMEM;
		copy_prep(heap, p);
	}
	q = my_lane(l);
	r = reserve(l, q, heap, &s, &pos);
	if (r < 0)
		return r;
	stamp(l, q, s, pos);
	s->kind = SLOT_EVENT;
	s->waiter = w;
	s->heap = heap;
	/* the members' bytes, after D_n in v2 (format_slot reads them so) */
	s->len[0] = (uint16_t)(p->data_len - (l->cfg.version == AL_V2 ? AL_HASH_LEN : 0));
	s->len[1] = (uint16_t)p->body_len;
	if (!heap)
		copy_prep(s->inl, p);
	return publish(l, q, s, pos, w, w != NULL);
}

/* Noinline: the preparation's buffers (struct al_prep, ~28 KiB) stay off
 * the stack of a flush. */
static __attribute__((noinline)) int enqueue_event(struct auditlog *l,
						   const struct auditlog_event *ev,
						   const struct auditlog_field *fields, size_t n,
						   struct waiter *w)
{
	struct al_prep p;
	int r = al_prepare((uint8_t)l->cfg.version, ev, fields, n, &p);

	if (r < 0)
		return r;
	return handoff(l, &p, w);
}

/* fields/nfields: caller-defined fields, only on a v2 log (checked by the
 * caller). 0 queued, 1 queued and the caller (a record_sync) holds the
 * worker's role: it calls lead() next. */
static int enqueue(struct auditlog *l, const struct auditlog_event *ev,
		   const struct auditlog_field *fields, size_t nfields, uint8_t kind,
		   struct waiter *w)
{
	struct slot *s = NULL;
	struct lane *q;
	uint64_t pos = 0;
	int r;

	r = atomic_load_explicit(&l->error, memory_order_relaxed);
	if (r)
		return r;
	if (kind == SLOT_EVENT) {
		r = check_event(ev);
		if (r < 0)
			return r;
		return enqueue_event(l, ev, fields, nfields, w);
	}
	q = my_lane(l);
	r = reserve(l, q, NULL, &s, &pos); /* a barrier */
	if (r < 0)
		return r;
	stamp(l, q, s, pos);
	s->kind = kind;
	s->waiter = w;
	s->heap = NULL;
	return publish(l, q, s, pos, w, false);
}

/* The log fails closed with err, unless it already has: the first error stays. */
static void fail_closed(struct auditlog *l, int err)
{
	int32_t expected = 0;
	atomic_compare_exchange_strong(&l->error, &expected, (int32_t)err);
}

/* ---- I/O submission and completion ---------------------------------------- */

static unsigned inflight_batches(struct auditlog *l);

static void fake_complete(struct auditlog *l, struct batch *b, uint8_t op, int32_t res)
{
	assert(l->fake_n < sizeof(l->fake_cq) / sizeof(l->fake_cq[0]));
	l->fake_cq[l->fake_n].b = (uint8_t)(b - l->batches);
	l->fake_cq[l->fake_n].op = op;
	l->fake_cq[l->fake_n].res = res;
	l->fake_n++;
}

/* Is the active file still what the log wrote? Read when a batch is about to
 * be acknowledged (retire_checked()): its write and fdatasync completed, on
 * whichever path (inline or the ring), and so did those of every batch
 * before it. A change before the read is this batch's to see, one after it
 * the next batch's. The log then fails closed and never makes a file again
 * on its own, which would hide what happened behind a fresh start:
 *  - -ENOENT: the file lost its last link (it was deleted, or its
 *    directory was): what a batch wrote reaches nobody once it is closed.
 *    Not read on a file system that reports no link count (l->nlink_known,
 *    open_locked()).
 *  - -ENODATA: the file was truncated (logrotate's copytruncate). Either it
 *    is shorter than this batch's end (the batch's own records were cut),
 *    or the byte before this batch, the last of a batch this log wrote, is
 *    no longer a '\n': a truncation before the write leaves a hole there,
 *    read as NUL, that the write extended the file over. Every batch ends
 *    with a '\n', and so does a file the log opened: recovery ends any
 *    damage it leaves in place with one (file.c, open_batch()). That byte
 *    is read at every batch: a batch that skipped it would hide a hole
 *    before it from every later batch's read.
 * One fstat and one pread of a byte in the page cache a batch (~1-1.5 µs
 * each; 4-8 µs for the first system call after a stretch of computing, as
 * any is on the VM we measure on: docs/benchmarks.md, "RSA-2048 key
 * generation: the parts copied once, and a deleted log found by the
 * library", and "A truncated log found by the library"). */
static int file_check(struct auditlog *l, const struct batch *b)
{
	const struct al_io_hooks *h = l->cfg.has_hooks ? &l->cfg.hooks : NULL;
	struct stat st;
	char c;

	if (fstat(l->fd, &st) < 0)
		return 0; /* nothing learnt: the write and fdatasync succeeded */
	if (l->nlink_known && al_nlink(l, &st) == 0)
		return -ENOENT;
	if ((uint64_t)st.st_size < b->off + b->len)
		return -ENODATA;
	if (b->off == 0)
		return 0;
	if (h && h->before_read)
		h->before_read(h->ctx, l->fd, b->off - 1, 1);
	if (pread(l->fd, &c, 1, (off_t)(b->off - 1)) == 1 && c != '\n')
		return -ENODATA;
	return 0;
}

/* Issue the write of what is left of b, linked to an fdatasync of the batch. */
static void issue_io(struct auditlog *l, struct batch *b)
{
	const struct al_io_hooks *h = l->cfg.has_hooks ? &l->cfg.hooks : NULL;
	size_t want = b->len - b->written, len = want; /* a hook may shorten len */
	uint64_t off = b->off + b->written;
	int inj_w = 0, inj_f = 0;
	bool do_fsync = !(h && h->skip_fsync);

	b->w_res = PENDING_RES;
	b->f_res = PENDING_RES;
	b->ops = 2;
	b->write_cqe_skipped = false;
	if (h && h->before_write)
		inj_w = h->before_write(h->ctx, l->fd, off, &len);
	if (inj_w < 0) {
		fake_complete(l, b, OP_WRITE, inj_w);
		fake_complete(l, b, OP_FSYNC, -ECANCELED);
		return;
	}
	if (do_fsync && h && h->before_fsync)
		inj_f = h->before_fsync(h->ctx, l->fd, b->off, b->len);
	if (inj_f < 0 || !do_fsync) {
		fake_complete(l, b, OP_FSYNC, inj_f < 0 ? inj_f : 0);
		do_fsync = false;
	}
	b->pending_len = want;
	b->issued_len = len;

	/*
	 * A lone small batch (nothing else in flight: typically a record_sync on
	 * a quiet log) is committed right here with pwrite + fdatasync. Through
	 * io_uring the buffered write and the fsync run in io-wq threads, and
	 * each hand-off is one more cross-CPU wake-up (~40 us each on the VM we
	 * measure on): a sync record cost 1.45x a raw write+fdatasync that way,
	 * 1.1x inline. Under load batches are large or overlap, and io_uring
	 * pipelines them. A record_sync caller holding the worker's role
	 * (lead()) never touches the ring: its io-wq would be its own thread's.
	 */
	bool leading = l->lead_waiter != NULL;
	bool use_ring = l->uring && !leading &&
			((h && h->force_ring) || !(b->len <= INLINE_MAX && inflight_batches(l) == 1));
	if (!use_ring && l->uring && !leading)
		atomic_fetch_add(&l->st.inline_batches, 1);

	if (use_ring) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
		assert(sqe); /* the ring has room for every batch's pair */
		io_uring_prep_write(sqe, l->fd, b->buf + b->written, (unsigned)len, off);
		io_uring_sqe_set_data64(sqe, (uint64_t)(b - l->batches) << 1 | OP_WRITE);
		if (do_fsync) {
			sqe->flags |= IOSQE_IO_LINK;
			/* A write that succeeds posts no CQE: its fsync's CQE says it
			 * (the fsync only runs after the whole write). One wake-up per
			 * batch instead of two. A failed or short write still posts. */
			if (l->cqe_skip) {
				sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
				b->write_cqe_skipped = true;
			}
			sqe = io_uring_get_sqe(&l->ring);
			assert(sqe);
			io_uring_prep_fsync(sqe, l->fd, IORING_FSYNC_DATASYNC);
			io_uring_sqe_set_data64(sqe, (uint64_t)(b - l->batches) << 1 | OP_FSYNC);
		}
		(void)io_uring_submit(&l->ring); /* failures surface as missing CQEs: see reap */
		return;
	}

	ssize_t w;
	do
		w = pwrite(l->fd, b->buf + b->written, len, (off_t)off);
	while (w < 0 && errno == EINTR);
	fake_complete(l, b, OP_WRITE, w < 0 ? -errno : (int32_t)w);
	if (do_fsync) {
		int fr = 0;
		if (w < 0 || (size_t)w < want)
			fr = -ECANCELED;
		else if (fdatasync(l->fd) < 0)
			fr = -errno;
		fake_complete(l, b, OP_FSYNC, fr);
	}
}

static void fail_inflight_from(struct auditlog *l, struct batch *b, int err)
{
	if (!b->err)
		b->err = err;
	if (!l->failover_err) {
		l->failover_err = err;
		l->failover_off = b->off;
	}
}

static void handle_enospc(struct auditlog *l, struct batch *b)
{
	uint64_t now = al_now_ns();

	atomic_fetch_add(&l->st.enospc_retries, 1);
	if (!b->enospc_since_ns)
		b->enospc_since_ns = now;
	if (now - b->enospc_since_ns >= l->cfg.enospc_deadline_ms * 1000000u) {
		/* fail closed: the disk stays full; no new file would fare better */
		fail_closed(l, -ENOSPC);
		fail_inflight_from(l, b, -ENOSPC);
		return;
	}
	b->retry_delay_ms = b->retry_delay_ms ? b->retry_delay_ms * 2 : 1;
	if (b->retry_delay_ms > 100)
		b->retry_delay_ms = 100;
	b->retry_pending = true;
	b->retry_at_ns = now + b->retry_delay_ms * 1000000u;
}

static void handle_cqe(struct auditlog *l, unsigned bi, unsigned op, int32_t res)
{
	const struct al_io_hooks *h = l->cfg.has_hooks ? &l->cfg.hooks : NULL;
	struct batch *b = &l->batches[bi];

	assert(b->state == B_INFLIGHT && b->ops > 0);
	if (op == OP_WRITE) {
		b->w_res = res;
		if (h && h->after_write)
			h->after_write(h->ctx, l->fd, b->off + b->written, b->issued_len, res);
		if (b->write_cqe_skipped) {
			/* A write issued with CQE_SKIP_SUCCESS posts only when it fails
			 * or comes up short, and then the kernel also suppresses the
			 * -ECANCELED CQE of its linked fsync (REQ_F_SKIP_LINK_CQES). */
			b->f_res = -ECANCELED;
			b->ops--;
		}
	} else {
		if (res != -ECANCELED && h && h->fsync_result)
			res = h->fsync_result(h->ctx, b->off, b->len, res);
		if (res != -ECANCELED && b->write_cqe_skipped && b->w_res == PENDING_RES) {
			/* the linked write succeeded whole, or this fsync would not have run */
			b->w_res = (long)b->issued_len;
			b->ops--;
			if (h && h->after_write)
				h->after_write(h->ctx, l->fd, b->off + b->written, b->issued_len,
					       b->w_res);
		}
		b->f_res = res;
		if (res != -ECANCELED && h && h->after_fsync && !(h->skip_fsync))
			h->after_fsync(h->ctx, l->fd, b->off, b->len, res);
	}
	if (--b->ops > 0)
		return;

	if (b->err) /* failed already (a sibling failed before us) */
		return;
	if (b->w_res < 0) {
		if (b->w_res == -ENOSPC) {
			handle_enospc(l, b);
		} else if (b->w_res == -EINTR || b->w_res == -EAGAIN) {
			issue_io(l, b);
		} else {
			atomic_fetch_add(&l->st.write_errors, 1);
			fail_inflight_from(l, b, (int)b->w_res);
		}
		return;
	}
	if ((size_t)b->w_res < b->pending_len) {
		if (b->w_res == 0) {
			atomic_fetch_add(&l->st.write_errors, 1);
			fail_inflight_from(l, b, -EIO);
			return;
		}
		/* short write: its linked fsync was cancelled; resubmit the rest */
		atomic_fetch_add(&l->st.short_writes, 1);
		b->written += (size_t)b->w_res;
		issue_io(l, b);
		return;
	}
	b->written = b->len;
	if (b->f_res < 0) {
		atomic_fetch_add(&l->st.fsync_errors, 1);
		fail_inflight_from(l, b, b->f_res);
		return;
	}
	atomic_fetch_add(&l->st.fsyncs, 1);
	b->complete = true;
}

static int inflight_ops(struct auditlog *l)
{
	int n = 0;
	for (unsigned i = 0; i < AL_NBATCH; i++)
		if (l->batches[i].state == B_INFLIGHT)
			n += l->batches[i].ops;
	return n;
}

static unsigned inflight_batches(struct auditlog *l)
{
	unsigned n = 0;
	for (unsigned i = 0; i < AL_NBATCH; i++)
		n += l->batches[i].state == B_INFLIGHT;
	return n;
}

static void drain_fake(struct auditlog *l)
{
	while (l->fake_n) {
		/* FIFO: handle_cqe may queue more (a resubmission) */
		unsigned bi = l->fake_cq[0].b, op = l->fake_cq[0].op;
		int32_t res = l->fake_cq[0].res;
		memmove(&l->fake_cq[0], &l->fake_cq[1], (l->fake_n - 1) * sizeof(l->fake_cq[0]));
		l->fake_n--;
		handle_cqe(l, bi, op, res);
	}
}

/* Handle what completed (the worker's sleep waits for it). */
static void reap(struct auditlog *l)
{
	drain_fake(l);
	if (!l->uring)
		return;
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;

	io_uring_for_each_cqe(&l->ring, head, cqe)
	{
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		n++;
		if (ud == UD_EVENTFD) {
			l->efd_armed = false; /* the eventfd fired */
			continue;
		}
		if (ud == UD_DROP) { /* advice: its result changes nothing */
			l->drop_inflight = false;
			continue;
		}
		handle_cqe(l, (unsigned)(ud >> 1), (unsigned)(ud & 1), cqe->res);
	}
	io_uring_cq_advance(&l->ring, n);
	drain_fake(l);
}

/*
 * What is durable and more than drop_behind_bytes behind the end leaves the
 * page cache (auditlog_config_set_drop_behind_bytes): those pages are clean,
 * so POSIX_FADV_DONTNEED only frees them, and the next pages the log takes
 * are these, not memory the kernel has to find (on a guest with free page
 * reporting, fault in from its host: docs/benchmarks.md, "A growing file on
 * this VM"). Through the ring an io-wq thread does it (~0.5 ms per 8 MiB
 * here), one request at a time; the pwrite backend's worker does it itself.
 * Only the worker calls this: a record_sync caller holding its role never
 * pays for it.
 */
static void drop_behind(struct auditlog *l)
{
	uint64_t keep = l->cfg.drop_behind_bytes, end = l->durable_size, upto, len;

	if (!keep || l->drop_inflight || l->fd < 0 || l->failover_err || end <= keep ||
	    end - keep < l->dropped_upto + DROP_STEP)
		return;
	upto = end - keep;
	len = upto - l->dropped_upto;
	if (len > DROP_MAX)
		len = DROP_MAX;
	if (l->uring) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
		if (!sqe)
			return; /* next time */
		io_uring_prep_fadvise(sqe, l->fd, l->dropped_upto, (off_t)len, POSIX_FADV_DONTNEED);
		io_uring_sqe_set_data64(sqe, UD_DROP);
		l->drop_inflight = true;
		(void)io_uring_submit(&l->ring);
	} else {
		(void)posix_fadvise(l->fd, (off_t)l->dropped_upto, (off_t)len, POSIX_FADV_DONTNEED);
	}
	l->dropped_upto += len;
	atomic_fetch_add(&l->st.cache_drops, 1);
}

/* ---- retiring batches in order ------------------------------------------- */

/* The oldest batch in flight, or of them the oldest not issued yet (formed
 * ahead, submit()). */
static struct batch *oldest_of(struct auditlog *l, bool unissued)
{
	struct batch *o = NULL;
	for (unsigned i = 0; i < AL_NBATCH; i++) {
		struct batch *b = &l->batches[i];
		if (b->state == B_INFLIGHT && !(unissued && b->issued) && (!o || b->id < o->id))
			o = b;
	}
	return o;
}

static struct batch *oldest_inflight(struct auditlog *l)
{
	return oldest_of(l, false);
}

static void release_waiters(struct auditlog *l, struct batch *b, int result)
{
	struct waiter *w = b->waiters;
	b->waiters = NULL;
	while (w) {
		struct waiter *next = w->next; /* w may vanish once released */
		if (w == l->lead_waiter) { /* the committing caller's own: it is awake */
			w->result = result;
			atomic_store_explicit(&w->done, 1, memory_order_release);
		} else {
			waiter_release(w, result);
		}
		w = next;
	}
}

static void retire_ok(struct auditlog *l, struct batch *b)
{
	pthread_mutex_lock(&l->head_lock);
	l->durable.seq = b->last_seq;
	memcpy(l->durable.hash, b->last_hash, AL_HASH_LEN);
	l->durable.ts_ns = b->last_ts_ns;
	memcpy(l->durable.ts_str, b->last_ts_str, AL_TS_LEN);
	l->durable.version = (uint8_t)l->cfg.version;
	l->durable.empty = false;
	l->durable_size = b->off + b->len;
	pthread_mutex_unlock(&l->head_lock);
	if (l->sealer) {
		al_v2pos_copy(&l->v2_durable, &b->v2_after);
		if (b->is_close) {
			l->close_done = true;
			l->close_inflight = false;
		}
	}
	atomic_fetch_add(&l->st.events_written, b->nevents);
	atomic_fetch_add(&l->st.records_written, b->nrec);
	atomic_fetch_add(&l->st.batches, 1);
	atomic_fetch_add(&l->st.bytes_written, b->len);
	if (b->nrec > atomic_load(&l->st.largest_batch))
		atomic_store(&l->st.largest_batch, b->nrec);
	l->consecutive_failovers = 0;
	release_waiters(l, b, 0);
	b->state = B_FREE;
}

/* The oldest batch in flight, complete: acknowledged once its file is found
 * still the log's (file_check(): every batch before it is acknowledged, so
 * the byte before it was written and made durable). false: it is not, and
 * the log failed closed, with no failover: nothing of the batch is
 * acknowledged, and a new file would hide what happened. */
static bool retire_checked(struct auditlog *l, struct batch *b)
{
	int r = file_check(l, b);

	if (r < 0) {
		fail_closed(l, r);
		fail_inflight_from(l, b, r);
		return false;
	}
	retire_ok(l, b);
	return true;
}

static void retire(struct auditlog *l)
{
	struct batch *b;

	while (!l->failover_err && (b = oldest_inflight(l)) && b->complete && retire_checked(l, b))
		;
}

/* Keep the event lines of a failed batch for the next file, except those
 * whose record_sync callers are told the error. */
static void save_for_requeue(struct auditlog *l, struct batch *b)
{
	size_t pos = 0, err_off;
	struct al_parsed p;

	while (pos < b->len) {
		const uint8_t *line = b->buf + pos;
		const uint8_t *nl = memchr(line, '\n', b->len - pos);
		assert(nl);
		size_t n = (size_t)(nl - line) + 1;
		pos += n;
		if (al_parse(line, n - 1, l->pdec, &p, &err_off) != AL_PERR_OK ||
		    p.rec.type != AL_T_EVENT)
			continue;
		bool sync = false;
		for (struct waiter *w = b->waiters; w; w = w->next)
			if (w->has_seq && w->seq == p.rec.f[AL_F_SEQ].u)
				sync = true;
		if (sync) {
			l->lost_sync++;
			atomic_fetch_add(&l->st.events_failed, 1);
			continue;
		}
		if (l->requeue_len + n > l->requeue_cap) {
			size_t cap = l->requeue_cap ? l->requeue_cap * 2 : 1u << 16;
			while (cap < l->requeue_len + n)
				cap *= 2;
			uint8_t *q = realloc(l->requeue, cap);
			if (!q) { /* cannot keep it: count it, never pretend */
				atomic_fetch_add(&l->st.events_failed, 1);
				continue;
			}
			l->requeue = q;
			l->requeue_cap = cap;
		}
		memcpy(l->requeue + l->requeue_len, line, n);
		l->requeue_len += n;
	}
}

/* All I/O has stopped after a failure: fail the batches, seal the file and
 * continue in a new one (or fail closed). */
static void failover(struct auditlog *l)
{
	int err = l->failover_err;
	struct batch *b;
	int r;

	/* batches before the failed one that completed are durable */
	while ((b = oldest_inflight(l)) && b->complete && !b->err && b->off < l->failover_off &&
	       retire_checked(l, b))
		;
	/* the failed batch and every later one (a held one last): nothing of
	 * them is acknowledged */
	while ((b = oldest_inflight(l)) || (b = l->held)) {
		if (!atomic_load(&l->error))
			save_for_requeue(l, b);
		else
			atomic_fetch_add(&l->st.events_failed, b->nevents);
		release_waiters(l, b, err);
		b->state = B_FREE;
		if (b == l->held) {
			l->held = NULL;
			l->tail_stage = 0;
			l->held_nrec = 0;
		}
	}
	l->failover_err = 0;
	l->tail = l->durable; /* the chain resumes from the last durable record */
	if (l->sealer) { /* and so do its tree and seals */
		al_v2pos_copy(&l->v2, &l->v2_durable);
		l->close_inflight = false;
	}

	if (atomic_load(&l->error))
		return; /* failed closed (ENOSPC past its deadline) */
	atomic_fetch_add(&l->st.failovers, 1);
	if (++l->consecutive_failovers > 3) {
		fail_closed(l, err);
		return;
	}
	r = al_file_switch(l, "io-error");
	if (r < 0) {
		fail_closed(l, err);
		return;
	}
	snprintf(l->header_detail, sizeof(l->header_detail),
		 "write or fdatasync failed (%s) at offset %llu of %s; %llu synchronous record(s) "
		 "were reported failed to their callers and are not re-written",
		 strerror(-err), (unsigned long long)l->failover_off, l->switched_name,
		 (unsigned long long)l->lost_sync);
	l->lost_sync = 0;
}

/* ---- forming batches -------------------------------------------------------- */

/* A free batch; a buffer beyond the first AL_INFLIGHT is allocated here, the
 * first time it is needed (a quiet log never needs it). NULL: none free, or
 * no memory for one more (the worker then waits for a completion, as with
 * AL_INFLIGHT buffers only). */
static struct batch *free_batch(struct auditlog *l)
{
	for (unsigned i = 0; i < AL_NBATCH; i++) {
		struct batch *b = &l->batches[i];
		if (b->state != B_FREE)
			continue;
		if (!b->buf && !(b->buf = malloc(l->cfg.max_batch_bytes)))
			return NULL;
		return b;
	}
	return NULL;
}

static struct batch *newest_inflight(struct auditlog *l)
{
	struct batch *o = NULL;
	for (unsigned i = 0; i < AL_NBATCH; i++) {
		struct batch *b = &l->batches[i];
		if (b->state == B_INFLIGHT && (!o || b->id > o->id))
			o = b;
	}
	return o;
}

static void note_record(struct batch *b, struct auditlog *l, bool event)
{
	b->nrec++;
	b->nevents += event;
	b->last_seq = l->tail.seq;
	memcpy(b->last_hash, l->tail.hash, AL_HASH_LEN);
	b->last_ts_ns = l->tail.ts_ns;
	memcpy(b->last_ts_str, l->tail.ts_str, AL_TS_LEN);
}

/* Consume lane q's next slot (q_front's) into b (or fail it when the log is
 * closed). */
static void take_slot(struct auditlog *l, struct batch *b, struct lane *q)
{
	struct slot *s = lane_slot(l, q, q->deq_pos);
	struct waiter *w = s->waiter;
	int err = atomic_load(&l->error);

	if (s->kind == SLOT_BARRIER) {
		/* flush: released with the last batch holding records before it */
		struct batch *t = b->nrec ? b : newest_inflight(l);
		if (t && !err) {
			w->next = t->waiters;
			t->waiters = w;
		} else {
			waiter_release(w, err);
		}
	} else if (err) {
		atomic_fetch_add(&l->st.events_failed, 1);
		if (w)
			waiter_release(w, err);
	} else {
		long n = format_slot(l, s, b->buf + b->len);
		if (n < 0) { /* cannot happen for a checked event; never pretend */
			atomic_fetch_add(&l->st.events_failed, 1);
			if (w)
				waiter_release(w, (int)n);
		} else {
			b->len += (size_t)n;
			note_record(b, l, true);
			if (w) {
				w->seq = l->tail.seq;
				w->has_seq = true;
				w->next = b->waiters;
				b->waiters = w;
			}
		}
	}
	if (w)
		l->sync_taken++;
	free(s->heap);
	s->heap = NULL;
	atomic_store_explicit(&s->seq, q->deq_pos + l->mask + 1, memory_order_release);
	q->deq_pos++;
	if (l->nlanes > 1 && ++l->since_look >= AL_LOOK_EVERY)
		look(l); /* for a later cut to choose (cut()) */
}

static void take_requeued(struct auditlog *l, struct batch *b)
{
	while (l->requeue_pos < l->requeue_len &&
	       b->len + AL_LINE_MAX + l->v2_reserve <= l->cfg.max_batch_bytes) {
		const uint8_t *line = l->requeue + l->requeue_pos;
		const uint8_t *nl = memchr(line, '\n', l->requeue_len - l->requeue_pos);
		struct al_parsed p;
		size_t err_off;
		long n = -EBADMSG;

		assert(nl);
		l->requeue_pos += (size_t)(nl - line) + 1;
		if (al_parse(line, (size_t)(nl - line), l->pdec, &p, &err_off) == AL_PERR_OK) {
			uint64_t ts = al_ts_ns((const char *)p.rec.f[AL_F_TIMESTAMP].p);
			p.rec.present &= ~(AL_BIT(AL_F_TIMESTAMP) | AL_BIT(AL_F_SEQ));
			n = al_chain_append_decoded(l, &p.rec, ts, b->buf + b->len);
		}
		if (n < 0) {
			atomic_fetch_add(&l->st.events_failed, 1);
			continue;
		}
		b->len += (size_t)n;
		note_record(b, l, true);
	}
	if (l->requeue_pos == l->requeue_len)
		l->requeue_pos = l->requeue_len = 0;
}

/* The log failed closed with records still waiting to be re-written:
 * they are lost, and counted so. */
static void drop_requeued(struct auditlog *l)
{
	for (size_t i = l->requeue_pos; i < l->requeue_len; i++)
		if (l->requeue[i] == '\n')
			atomic_fetch_add(&l->st.events_failed, 1);
	l->requeue_pos = l->requeue_len = 0;
}

static bool rotation_due(struct auditlog *l)
{
	if (l->cfg.rotate_bytes && l->file_off >= l->cfg.rotate_bytes)
		return true;
	if (l->cfg.rotate_age_s &&
	    al_wall_ns(l) - l->file_created_ns >= l->cfg.rotate_age_s * 1000000000u)
		return true;
	return false;
}

/* Has a lane reached its wake position (its share of a full batch) in the
 * hold? */
static bool hold_full(struct auditlog *l)
{
	for (unsigned i = 0; i < l->nlanes; i++)
		if (atomic_load_explicit(&l->lanes[i].enq_pos, memory_order_relaxed) >=
		    atomic_load_explicit(&l->lanes[i].hold_wake_pos, memory_order_relaxed))
			return true;
	return false;
}

/*
 * The one bounded wait of group commit (DESIGN.md, docs/durability.md): with
 * async_coalesce_us set, a batch that would hold only async records waits
 * until that long after its first record was enqueued, so that the records
 * of callers issuing one operation every ~100 us share one write and one
 * fdatasync instead of paying one each. It commits at once when a slot with
 * a waiter (record_sync, flush) is queued, when the log closes or has failed,
 * when a header or re-queued records are due, and when the queued records
 * might fill a batch or one lane holds its share of one (hold_full()). The
 * window starts at the first record's enqueue time (its CLOCK_REALTIME stamp,
 * clamped to [0, window] of age so that a clock step never lengthens it).
 * Returns true when the queue is to be left alone for now (l->hold_until_ns
 * says until when).
 */
static uint64_t hold_max(struct auditlog *l)
{
	uint64_t n = l->cfg.max_batch_bytes / AL_LINE_MAX, q = q_capacity(l) / 2;
	return n < q ? n : q;
}

static bool coalesce_hold(struct auditlog *l, bool *ret_empty)
{
	uint64_t window = l->cfg.async_coalesce_us * 1000u, now;

	*ret_empty = false;
	if (!window)
		return false;
	struct lane *q;
	const struct slot *s = q_front(l, &q);
	if (!s) {
		/* nothing to hold; records that arrive from now on are left for
		 * the next turn's decision (fill_and_submit()'s take_queue) */
		assert(!l->hold_since_ns);
		*ret_empty = true;
		if (l->cfg.has_hooks && l->cfg.hooks.after_empty_look)
			l->cfg.hooks.after_empty_look(l->cfg.hooks.ctx);
		return false;
	}
	now = mono_ns();
	if (l->need_header || l->requeue_len || atomic_load(&l->stopping) ||
	    atomic_load(&l->error) || atomic_load(&l->sync_enq) != l->sync_taken ||
	    q_depth(l) >= hold_max(l))
		goto commit;
	if (!l->hold_since_ns) {
		uint64_t per = hold_max(l) / l->nlanes;
		struct timespec ts;
		uint64_t rt, age = 0;

		clock_gettime(CLOCK_REALTIME, &ts);
		rt = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		uint64_t sts = slot_ts(l, s);
		if (s->kind == SLOT_EVENT && rt > sts)
			age = rt - sts < window ? rt - sts : window;
		if (age >= window)
			return false; /* waited its window already (left over from a full batch) */
		l->hold_since_ns = now;
		l->hold_until_ns = now + (window - age);
		/* v2: never past the epoch's end (its records are sealed in it) */
		if (l->sealer && l->sealer->ops->now(l->sealer, &l->ep) == 0) {
			uint64_t left = l->ep.boot_end > l->ep.boot_now ? l->ep.boot_end - l->ep.boot_now : 0;
			if (now + left < l->hold_until_ns)
				l->hold_until_ns = now + left;
		}
		for (unsigned i = 0; i < l->nlanes; i++) /* a lane's share of a full batch */
			atomic_store_explicit(&l->lanes[i].hold_wake_pos,
					      l->lanes[i].deq_pos + (per ? per : 1),
					      memory_order_relaxed);
	}
	/* a lane holding its share ends the hold, as it wakes a sleeping worker
	 * (publish()): holding on would spin, the worker woken at every look */
	if (now < l->hold_until_ns && !hold_full(l))
		return true;
commit:
	if (l->hold_since_ns) {
		atomic_fetch_add(&l->st.coalesced_batches, 1);
		atomic_fetch_add(&l->st.coalesce_wait_ns, now - l->hold_since_ns);
		l->hold_since_ns = 0;
		for (unsigned i = 0; i < l->nlanes; i++) /* no hold: publish() needs no fence */
			atomic_store_explicit(&l->lanes[i].hold_wake_pos, UINT64_MAX,
					      memory_order_relaxed);
	}
	return false;
}

/* Form the next batch from the header to write, the re-queued records and,
 * with take_queue, the queue, and submit it. Returns true when it did
 * anything. take_queue is false when the coalescing decision found the queue
 * empty: a record queued since has not been through it, and taken here it
 * would be committed at once, its window skipped (the worker's next turn
 * decides for it). */
static void submit(struct auditlog *l, struct batch *b);

static bool fill_and_submit(struct auditlog *l, bool take_queue)
{
	struct batch *b = free_batch(l);
	struct slot *s;
	struct lane *q;
	bool progress = false, v2 = l->sealer != NULL, first_of_file = l->need_header;
	uint32_t sealed_upto = 0; /* b->nrec at the last seal in b */
	size_t reserve = v2 ? l->v2_reserve : 0;
	int r;

	if (!b)
		return false;
	uint64_t depth = q_depth(l);
	if (depth > atomic_load(&l->st.queue_high_water))
		atomic_store(&l->st.queue_high_water, depth);
	/* with size rotation, do not let one batch run far past the limit */
	size_t limit = l->cfg.max_batch_bytes;
	if (l->cfg.rotate_bytes && l->file_off < l->cfg.rotate_bytes &&
	    l->cfg.rotate_bytes - l->file_off + AL_LINE_MAX + reserve < limit)
		limit = (size_t)(l->cfg.rotate_bytes - l->file_off) + AL_LINE_MAX + reserve;
	b->len = 0;
	b->nrec = b->nevents = 0;
	b->waiters = NULL;
	b->is_close = false;
	if (v2 && !atomic_load(&l->error)) {
		/* the epoch at the batch's start (a boot-clock read) */
		bool moved;
		r = al_v2_epoch(l, &moved);
		if (r < 0 && al_v2_sealer_lost(l, r)) {
			al_v2_sealer_away(l); /* nothing formed yet: queue */
			return false;
		}
		if (r < 0)
			fail_closed(l, r);
		else if (moved)
			l->fmt_epoch = l->ep.epoch;
	}
	if (l->need_header && !atomic_load(&l->error)) {
		long n = al_format_header(l, b->buf);
		if (n < 0) {
			fail_closed(l, (int32_t)n);
		} else {
			b->len += (size_t)n;
			note_record(b, l, false);
		}
	}
	if (l->requeue_len && atomic_load(&l->error))
		drop_requeued(l);
	if (l->requeue_len)
		take_requeued(l, b);
	while (take_queue && b->len + AL_LINE_MAX + reserve <= limit && (s = q_front(l, &q))) {
		if (v2 && ++l->since_check >= AL_EPOCH_CHECK_EVERY && !atomic_load(&l->error)) {
			/* split at an epoch boundary (docs/format.md 19.2): the
			 * records formatted in e get e's seal, the rest e+1's */
			bool moved;
			r = al_v2_epoch(l, &moved);
			if (r < 0 && al_v2_sealer_lost(l, r)) {
				break; /* QUEUE: the tail's seal fails too, and holds the batch */
			} else if (r < 0) {
				fail_closed(l, r);
			} else if (moved) {
				if (b->nrec > sealed_upto) {
					long n = al_v2_seal_line(l, K_BATCH, b->buf + b->len);
					if (n < 0 && al_v2_sealer_lost(l, (int)n)) {
						break; /* as above */
					} else if (n < 0) {
						fail_closed(l, (int)n);
					} else {
						b->len += (size_t)n;
						note_record(b, l, false);
						sealed_upto = b->nrec;
					}
				}
				l->fmt_epoch = l->ep.epoch;
				continue; /* the seal took room: look again */
			}
		}
		bool barrier = s->kind == SLOT_BARRIER;
		take_slot(l, b, q);
		progress = true;
		/* A flush with nothing before it was released at once: what was
		 * queued after it goes back through the coalescing decision
		 * (its caller, just woken, may be queueing async records now). */
		if (barrier && b->nrec == 0 && !b->waiters && l->cfg.async_coalesce_us)
			break;
	}
	if (v2 && !atomic_load(&l->error)) {
		/* every batch ends with a seal (decision 1 of issue 12) */
		int kind = -1;
		if (atomic_load(&l->stopping) && !q_pending(l) && !l->requeue_len &&
		    !l->close_inflight && !l->close_done)
			kind = K_CLOSE; /* the last batch: a checkpoint, then the close seal */
		else if (b->nrec > sealed_upto)
			kind = K_BATCH;
		else if (b->len == 0 && al_v2_idle_due(l)) {
			kind = K_IDLE;
			l->fmt_epoch = l->ep.epoch;
		}
		if (kind >= 0) {
			unsigned k = 0;
			bool content = b->nrec > 0;
			r = al_v2_batch_tail(l, b->buf, &b->len, l->file_off, kind, first_of_file,
					     kind == K_CLOSE, content, &k);
			if (r < 0 && al_v2_sealer_lost(l, r)) {
				/* AUDITLOG_SEALER_QUEUE: keep the batch, unwritten and
				 * unacknowledged, until a sealer seals it */
				l->held = b;
				l->held_kind = kind;
				l->held_tree = first_of_file;
				l->held_ckpt = kind == K_CLOSE;
				l->held_content = content;
				b->state = B_HELD;
				if (kind == K_CLOSE)
					l->close_inflight = true;
				al_v2_sealer_away(l);
				return true;
			} else if (r < 0) {
				fail_closed(l, r);
			} else {
				b->nrec += k - 1;
				note_record(b, l, false);
				if (kind == K_CLOSE) {
					b->is_close = true;
					l->close_inflight = true;
				}
			}
		}
	}
	if (v2 && b->len && atomic_load(&l->error)) {
		/* the seal step failed: nothing unsealed is written; the log is
		 * closed with that error and these records fail with it */
		int err = atomic_load(&l->error);
		atomic_fetch_add(&l->st.events_failed, b->nevents);
		release_waiters(l, b, err);
		b->len = 0;
		return true;
	}
	if (progress && atomic_load(&l->full_waiters)) {
		atomic_fetch_add(&l->space_gen, 1);
		futex_wake_all(&l->space_gen);
	}
	if (b->len == 0) {
		assert(!b->waiters);
		return progress;
	}
	submit(l, b);
	return true;
}

/* A worker's turn at the queue (the worker's, or a record_sync caller's in
 * lead()): the coalescing decision, then, unless it holds (*held), the next
 * batch, taking queued slots only when the decision saw them. True when a
 * batch was formed. */
static bool hold_or_fill(struct auditlog *l, bool *held)
{
	bool empty;

	*held = coalesce_hold(l, &empty);
	return !*held && fill_and_submit(l, !empty);
}

/* A sealer came back (or did not): finish the held batch, or give up. */
static bool resume_held(struct auditlog *l)
{
	struct batch *b = l->held;
	bool stopping = atomic_load(&l->stopping), moved;
	unsigned k = 0;
	int r = al_v2_reconnect(l, stopping);

	if (r == 0 && !stopping)
		return false; /* still away: the worker sleeps until the next attempt */
	if (r == 0)
		r = -ENOTCONN; /* closing, and no sealer: what is queued fails */
	if (r > 0 && b) {
		r = al_v2_epoch(l, &moved); /* the sealer's epoch, asked again */
		if (r == 0)
			r = al_v2_batch_tail(l, b->buf, &b->len, l->file_off, l->held_kind,
					     l->held_tree, l->held_ckpt, l->held_content, &k);
		if (r < 0 && al_v2_sealer_lost(l, r) && !stopping) {
			al_v2_sealer_away(l); /* lost again at once: back off */
			return true;
		}
	}
	if (r < 0) {
		fail_closed(l, r);
		atomic_store(&l->sealer_away, 0); /* callers get the log's error now */
		if (b) {
			atomic_fetch_add(&l->st.events_failed, b->nevents);
			release_waiters(l, b, r);
			b->state = B_FREE;
			b->len = 0;
			l->held = NULL;
			l->close_inflight = false;
		}
		return true;
	}
	if (!b)
		return true;
	l->held = NULL;
	b->nrec += k - 1;
	note_record(b, l, false);
	if (l->held_kind == K_CLOSE)
		b->is_close = true;
	submit(l, b);
	return true;
}

/* Batches whose write was issued and that are not retired yet. */
static unsigned issued_batches(struct auditlog *l)
{
	unsigned n = 0;
	for (unsigned i = 0; i < AL_NBATCH; i++)
		n += l->batches[i].state == B_INFLIGHT && l->batches[i].issued;
	return n;
}

/* Issue formed batches in order while fewer than AL_INFLIGHT are issued and
 * not yet retired (so the bytes not yet durable stay within AL_INFLIGHT
 * batches at the file's end: docs/format.md 7). */
static bool issue_queued(struct auditlog *l)
{
	bool any = false;
	if (l->failover_err)
		return false;
	while (issued_batches(l) < AL_INFLIGHT) {
		struct batch *o = oldest_of(l, true);
		if (!o)
			break;
		o->issued = true;
		issue_io(l, o);
		any = true;
	}
	return any;
}

/* Every issue slot is taken: form the next batch ahead only when the queue
 * holds enough to fill it, or is half full (a batch formed now waits for its
 * turn anyway, and would be smaller than one formed then). */
static bool ahead_wait(struct auditlog *l)
{
	if (issued_batches(l) < AL_INFLIGHT)
		return false;
	uint64_t depth = q_depth(l);
	uint64_t full = l->cfg.max_batch_bytes / (l->line_est ? l->line_est : AL_LINE_MAX);
	uint64_t half = q_capacity(l) / 2;
	return depth < (full < half ? full : half);
}

/* Give b its place in the file and issue its write and fdatasync, or keep it
 * formed ahead until the oldest batch in flight retires. */
static void submit(struct auditlog *l, struct batch *b)
{
	if (b->nrec)
		l->line_est = b->len / b->nrec;
	if (l->sealer)
		al_v2pos_copy(&b->v2_after, &l->v2);
	b->off = l->file_off;
	l->file_off += b->len;
	b->written = 0;
	b->complete = false;
	b->err = 0;
	b->enospc_since_ns = 0;
	b->retry_pending = false;
	b->retry_delay_ms = 0;
	b->id = l->next_batch_id++;
	b->state = B_INFLIGHT;
	b->issued = false;
	b->ops = 0;
	issue_queued(l);
	if (!b->issued) /* formed ahead: written when the oldest in flight retires */
		atomic_fetch_add(&l->st.batches_ahead, 1);
}

/* ---- the worker ------------------------------------------------------------- */

static void arm_eventfd(struct auditlog *l)
{
	if (!l->uring || l->efd_armed)
		return;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
	assert(sqe);
	io_uring_prep_read(sqe, l->efd, &l->efd_buf, sizeof(l->efd_buf), 0);
	io_uring_sqe_set_data64(sqe, UD_EVENTFD);
	l->efd_armed = true;
}

static uint64_t next_retry_ns(struct auditlog *l)
{
	uint64_t t = 0;
	for (unsigned i = 0; i < AL_NBATCH; i++) {
		struct batch *b = &l->batches[i];
		if (b->state == B_INFLIGHT && b->retry_pending && (!t || b->retry_at_ns < t))
			t = b->retry_at_ns;
	}
	return t;
}

static bool run_retries(struct auditlog *l)
{
	uint64_t now = al_now_ns();
	bool any = false;
	for (unsigned i = 0; i < AL_NBATCH; i++) {
		struct batch *b = &l->batches[i];
		if (b->state == B_INFLIGHT && b->retry_pending && b->retry_at_ns <= now) {
			b->retry_pending = false;
			issue_io(l, b);
			any = true;
		}
	}
	return any;
}

/* The worker, awake, takes its role back; when a record_sync caller holds
 * it (lead()), it waits until that caller is done. */
static void reclaim(struct auditlog *l)
{
	uint32_t s = atomic_load_explicit(&l->worker_sleeping, memory_order_acquire);

	for (;;) {
		if (s == 0) /* a producer took the role from the sleep and woke us */
			return;
		if (s & SLEEP_LEAD) {
			if (!(s & SLEEP_CLAIM)) {
				if (!atomic_compare_exchange_weak(&l->worker_sleeping, &s,
								  s | SLEEP_CLAIM))
					continue;
				s |= SLEEP_CLAIM;
			}
			/* a producer's SLEEP_PEND changes the word: wait again */
			futex_wait(&l->worker_sleeping, s, NULL);
			s = atomic_load_explicit(&l->worker_sleeping, memory_order_acquire);
			continue;
		}
		/* acquire on failure too: the value read decides the next turn, and
		 * a 0 written by lead()'s hand-back makes this thread the holder
		 * (the loop's first test), which must see that caller's state */
		if (atomic_compare_exchange_weak_explicit(&l->worker_sleeping, &s, 0,
							  memory_order_acquire, memory_order_acquire))
			return;
	}
}

/*
 * The caller's commit. A record_sync caller whose publish() found the worker
 * asleep took the worker's role (SLEEP_LEAD) instead of waking it. When the
 * log is quiet (nothing in flight, no retry, failover, rotation, held batch
 * or close under way) it runs the worker's own steps here, on its own
 * thread: the batch (its record and whatever was queued before it) is
 * formed, sealed, written with pwrite and fdatasync'ed, and its waiters are
 * released. That saves the two cross-CPU wake-ups of a hand-off (the
 * worker's, then the caller's), the part of a lone record_sync beyond one
 * write+fdatasync (docs/benchmarks.md, "The caller commits"). Anything left
 * over (a retry, a failover, records queued meanwhile, a record that did
 * not fit the batch) goes back to the worker, woken, through the same steps
 * as ever: the recovery logic stays the worker's. The role is handed back
 * as SLEEP_ANY: the worker still sleeps, its eventfd armed.
 */
/* What only the worker finishes: I/O in flight or its completions, a failover,
 * re-written records, a held batch, a rotation. */
static bool worker_busy(struct auditlog *l)
{
	return inflight_batches(l) || l->fake_n || l->failover_err || l->requeue_len || l->held ||
	       l->rotate_pending;
}

static void lead(struct auditlog *l, struct waiter *w)
{
	const struct al_io_hooks *h = l->cfg.has_hooks ? &l->cfg.hooks : NULL;
	int cs;

	/* pwrite, fdatasync and a sealer's poll are cancellation points */
	(void)pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	if (h && h->before_lead)
		h->before_lead(h->ctx);
	bool busy = worker_busy(l);
	if (!busy && !atomic_load(&l->sealer_away) && !atomic_load(&l->stopping) &&
	    !atomic_load(&l->error) && !(h && h->force_ring) && !rotation_due(l)) {
		bool held;
		l->lead_waiter = w;
		if (hold_or_fill(l, &held)) {
			drain_fake(l);
			retire(l);
		}
		if (atomic_load_explicit(&w->done, memory_order_relaxed))
			atomic_fetch_add(&l->st.caller_commits, 1);
		l->lead_waiter = NULL;
		busy = worker_busy(l);
	}
	struct qmark m;
	q_mark(l, &m);
	uint32_t old = atomic_exchange(&l->worker_sleeping, SLEEP_ANY);
	if (old & SLEEP_CLAIM)
		futex_wake_all(&l->worker_sleeping);
	/* A record queued while the role was here did not wake the worker: its
	 * producer marked SLEEP_PEND; one whose producer saw SLEEP_ANY did wake
	 * it. The fence pairs with a fencing publish()'s (no membarrier). */
	atomic_thread_fence(memory_order_seq_cst);
	if (busy || (old & SLEEP_PEND) || q_marked_ready(l, &m) || atomic_load(&l->stopping)) {
		uint32_t e = SLEEP_ANY;
		if (atomic_compare_exchange_strong(&l->worker_sleeping, &e, 0))
			wake_worker(l);
	}
	(void)pthread_setcancelstate(cs, NULL);
}

/* The worker's nice and CPUs, set on itself before any I/O: the io_uring
 * threads its requests start are made from it and take its nice, and
 * IORING_REGISTER_IOWQ_AFF confines this thread's io-wq (it applies to the
 * calling task's). 0 or -errno. */
static int worker_setup(struct auditlog *l)
{
	if (l->cfg.has_worker_nice &&
	    setpriority(PRIO_PROCESS, (id_t)gettid(), l->cfg.worker_nice) < 0)
		return -errno;
	if (l->cfg.has_worker_cpus) {
		int r = pthread_setaffinity_np(pthread_self(), sizeof(l->cfg.worker_cpus),
					       &l->cfg.worker_cpus);
		if (r)
			return -r;
		if (l->uring) {
			/* the call confines this task's io-wq, which its first
			 * submission makes: a NOP, reaped here, before anything
			 * else is in the ring */
			struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
			struct io_uring_cqe *cqe;
			assert(sqe);
			io_uring_prep_nop(sqe);
			io_uring_sqe_set_data64(sqe, 0);
			if ((r = io_uring_submit_and_wait(&l->ring, 1)) < 0 ||
			    (r = io_uring_peek_cqe(&l->ring, &cqe)) < 0)
				return r;
			io_uring_cqe_seen(&l->ring, cqe);
			r = io_uring_register_iowq_aff(&l->ring, sizeof(l->cfg.worker_cpus),
						       &l->cfg.worker_cpus);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* Does the worker set anything on itself before its first I/O (which
 * auditlog_open then waits for)? */
static bool worker_setup_due(const struct auditlog_config *c)
{
	return c->has_worker_nice || c->has_worker_cpus;
}

static void *worker_main(void *arg)
{
	struct auditlog *l = arg;

	/* a name tools (and the benchmark's CPU accounting) can find */
	(void)pthread_setname_np(pthread_self(), "auditlog-worker");
	if (worker_setup_due(&l->cfg)) {
		int r = worker_setup(l);
		l->worker_setup_err = r;
		atomic_store_explicit(&l->worker_ready, 1, memory_order_release);
		futex_wake_all(&l->worker_ready);
		if (r < 0)
			return NULL; /* auditlog_open joins it and fails */
	}
	for (;;) {
		bool progress = false;

		if (!(l->cfg.has_hooks && l->cfg.hooks.hold_completions &&
		      l->cfg.hooks.hold_completions(l->cfg.hooks.ctx)))
			reap(l);
		if (l->failover_err) /* the file is being sealed: no retry into it */
			for (unsigned i = 0; i < AL_NBATCH; i++)
				if (l->batches[i].retry_pending) {
					l->batches[i].retry_pending = false;
					l->batches[i].err = l->failover_err;
				}
		progress |= run_retries(l);
		retire(l);
		drop_behind(l);
		progress |= issue_queued(l);
		if (l->failover_err && inflight_ops(l) == 0 && !next_retry_ns(l)) {
			failover(l);
			progress = true;
		}
		bool pending = q_pending(l) || l->requeue_len || l->need_header;
		if (!l->failover_err && pending && !l->rotate_pending && !l->held && rotation_due(l) &&
		    !atomic_load(&l->error) && !l->need_header)
			l->rotate_pending = true;
		if (l->rotate_pending && inflight_batches(l) == 0) {
			int r = al_file_switch(l, "rotate");
			l->rotate_pending = false;
			if (r < 0) {
				fail_closed(l, r);
			} else {
				atomic_fetch_add(&l->st.rotations, 1);
			}
			progress = true;
		}
		bool held = false, away = l->held || atomic_load(&l->sealer_away);
		if (away && !l->failover_err && !l->rotate_pending) {
			if (resume_held(l)) /* AUDITLOG_SEALER_QUEUE */
				progress = true;
		} else if (!l->failover_err && !l->rotate_pending && !ahead_wait(l) && free_batch(l)) {
			if (hold_or_fill(l, &held))
				progress = true;
		}
		if (progress)
			continue;

		if (atomic_load(&l->stopping) && !q_pending(l) && inflight_batches(l) == 0 &&
		    !l->requeue_len && !l->failover_err &&
		    (!l->sealer || l->close_done || atomic_load(&l->error)))
			break;

		/* Nothing to do now: sleep until a completion, an event or a retry.
		 * What the sleep needs is read before the worker offers its role
		 * (SLEEP_ANY, SLEEP_HOLD): from then until reclaim() a record_sync
		 * caller may hold it (lead()), and the worker touches none of it. */
		bool want_events = !l->failover_err && !l->rotate_pending && !away && !ahead_wait(l) &&
				   free_batch(l);
		uint64_t retry = next_retry_ns(l), now = al_now_ns();
		uint64_t timeout = retry ? (retry > now ? retry - now : 1) : 0;
		if (held) {
			uint64_t mnow = mono_ns();
			uint64_t left = l->hold_until_ns > mnow ? l->hold_until_ns - mnow : 1;
			if (!timeout || left < timeout)
				timeout = left;
		}
		if (want_events) {
			/* v2: wake for the epoch's idle seal (its midpoint) */
			uint64_t t2 = al_v2_timeout(l);
			if (t2 && (!timeout || t2 < timeout))
				timeout = t2;
		}
		if (away) { /* the next reconnection attempt */
			uint64_t t3 = al_v2_reconnect_timeout(l);
			if (t3 && (!timeout || t3 < timeout))
				timeout = t3;
		}
		if (atomic_load(&l->stopping) && !timeout)
			timeout = 10 * 1000 * 1000; /* draining: never sleep without bound */
		if (l->uring && want_events)
			arm_eventfd(l);
		uint64_t taken = l->sync_taken;
		struct qmark m;
		q_mark(l, &m);
		if (held) {
			/* sleep until the window ends, a waiter or close comes, the
			 * batch fills, or a completion: never spin. A plain fence,
			 * not offer_barrier(): the producers that must wake a
			 * holding worker fence themselves (publish()), and the
			 * IPIs of a membarrier() a completion cost the token's
			 * callers up to 40 % of a fast operation on a VM
			 * (docs/benchmarks.md, "The coalescing worker's barrier") */
			atomic_store(&l->worker_sleeping, SLEEP_HOLD);
			atomic_thread_fence(memory_order_seq_cst);
			if (atomic_load(&l->sync_enq) != taken || atomic_load(&l->stopping) || hold_full(l)) {
				reclaim(l);
				continue;
			}
		} else if (want_events) {
			atomic_store(&l->worker_sleeping, SLEEP_ANY);
			bool seen = offer_barrier(l);
			if (l->cfg.has_hooks && l->cfg.hooks.after_offer)
				l->cfg.hooks.after_offer(l->cfg.hooks.ctx);
			if (!seen || q_marked_ready(l, &m) || atomic_load(&l->stopping)) {
				reclaim(l);
				/* a caller may have held the role and taken the slot
				 * meanwhile: never sleep unoffered but to drain */
				if (q_pending(l) || !atomic_load(&l->stopping))
					continue;
			}
		}
		if (l->uring) {
			/* completions are handled at the top, once the role is back */
			struct __kernel_timespec ts = {(long long)(timeout / 1000000000u),
						       (long long)(timeout % 1000000000u)};
			struct io_uring_cqe *cqe;
			int r = io_uring_submit_and_wait_timeout(&l->ring, &cqe, 1,
								 timeout ? &ts : NULL, NULL);
			(void)r; /* -ETIME / -EINTR: just look again */
		} else if (want_events || timeout) {
			/* pwrite backend: the eventfd, bounded by a due retry or
			 * the coalescing window (ppoll: microseconds count here) */
			struct pollfd pfd = {.fd = l->efd, .events = POLLIN};
			struct timespec ts = {(time_t)(timeout / 1000000000u),
					      (long)(timeout % 1000000000u)};
			if (ppoll(&pfd, 1, timeout || !want_events ? &ts : NULL, NULL) > 0 &&
			    (pfd.revents & POLLIN)) {
				uint64_t v;
				ssize_t rr = read(l->efd, &v, sizeof(v));
				(void)rr;
			}
		}
		reclaim(l);
	}
	return NULL;
}

/* ---- the API ---------------------------------------------------------------- */

/* n bytes, zeroed, aligned as their type asks (AL_PAIR, log.h: calloc gives
 * 16 bytes); NULL when out of memory. Freed with free(). */
static void *zalloc_aligned(size_t align, size_t n)
{
	void *p;

	if (posix_memalign(&p, align, n))
		return NULL;
	return memset(p, 0, n);
}

static void log_free(struct auditlog *l)
{
	if (!l)
		return;
	if (l->uring)
		io_uring_queue_exit(&l->ring);
	if (l->fd >= 0)
		close(l->fd);
	if (l->dirfd >= 0)
		close(l->dirfd);
	if (l->efd >= 0)
		close(l->efd);
	if (l->slot_mem) {
		for (uint64_t i = 0; i < q_capacity(l); i++)
			free(l->slot_mem[i].heap);
		munmap(l->slot_mem, q_capacity(l) * sizeof(struct slot));
	}
	free(l->lanes);
	free(l->look_t);
	free(l->look_e);
	for (unsigned i = 0; i < AL_NBATCH; i++)
		free(l->batches[i].buf);
	free(l->requeue);
	free(l->work);
	free(l->dec);
	free(l->pdec);
	free(l->dir);
	free(l->base);
	al_sealer_free(l->sealer);
	free(l->cfg.path);
	free(l->cfg.seal_state_path);
	free(l->cfg.signing_key_path);
	free(l->cfg.sealer_socket);
	if (l->alive)
		munmap((void *)l->alive, (size_t)sysconf(_SC_PAGESIZE));
	pthread_mutex_destroy(&l->head_lock);
	free(l);
}

AUDITLOG_API int auditlog_open(const struct auditlog_config *cfg, struct auditlog **ret_log)
{
	struct auditlog *l;
	int r;

	if (!cfg || !cfg->path || !ret_log)
		return -EINVAL;
	/* v2 takes exactly one seal provider (v1 ignores both) */
	if (cfg->version == 2 && !cfg->seal_state_path == !cfg->sealer_socket)
		return -EINVAL;
	l = zalloc_aligned(_Alignof(struct auditlog), sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->fd = l->dirfd = l->efd = -1;
	l->sha_ni = cfg->version == 2 && al_sha256_ni_ok(); /* only v2 builds a tree */
	pthread_mutex_init(&l->head_lock, NULL);
	l->cfg = *cfg;
	l->cfg.path = strdup(cfg->path);
	l->cfg.seal_state_path = cfg->seal_state_path ? strdup(cfg->seal_state_path) : NULL;
	l->cfg.signing_key_path = cfg->signing_key_path ? strdup(cfg->signing_key_path) : NULL;
	l->cfg.sealer_socket = cfg->sealer_socket ? strdup(cfg->sealer_socket) : NULL;
	/* the capacity is split between the lanes, each at least 64 slots */
	l->nlanes = al_queue_lanes(cfg);
	l->mask = cfg->queue_slots / l->nlanes;
	l->mask = (l->mask < 64 ? 64 : l->mask) - 1;
	/* Page-aligned, so a slot owns its cache lines and the producer filling
	 * one never shares a line with the one beside it; zero already (a
	 * memset would write all of it once more). Populated in the mmap: every
	 * page is written just below anyway (each slot's seq), and faulting
	 * them in one at a time made open 7-15 ms slower at the default 16,384
	 * slots (docs/benchmarks.md "Opening a log"). In 4 KiB pages: in 2 MiB
	 * ones, as open's tail window (file.c), open was faster still, but a
	 * queue that fills ran a fifth slower ("Opening a log: 2 MiB pages for
	 * the tail window"). */
	void *slots = mmap(NULL, q_capacity(l) * sizeof(struct slot), PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	l->slot_mem = slots == MAP_FAILED ? NULL : slots;
	l->lanes = zalloc_aligned(_Alignof(struct lane), l->nlanes * sizeof(*l->lanes));
	/* looks enough to span the queue taken AL_LOOK_EVERY slots apart */
	l->looks_max = 64;
	while (l->looks_max * AL_LOOK_EVERY < q_capacity(l))
		l->looks_max <<= 1;
	l->look_t = calloc(l->looks_max, sizeof(uint64_t));
	l->look_e = calloc(l->looks_max * l->nlanes, sizeof(uint64_t));
	l->work = malloc(AL_HASH_LEN + AL_BODY_MAX);
	l->dec = malloc(DEC_CAP);
	l->pdec = malloc(AL_LINE_MAX);
	if (!l->cfg.path || !l->slot_mem || !l->lanes || !l->look_t || !l->look_e || !l->work || !l->dec || !l->pdec ||
	    (cfg->seal_state_path && (!l->cfg.seal_state_path || !l->cfg.signing_key_path)) ||
	    (cfg->sealer_socket && !l->cfg.sealer_socket)) {
		r = -ENOMEM;
		goto err;
	}
	l->gen = atomic_fetch_add(&log_gens, 1) + 1;
	for (unsigned i = 0; i < l->nlanes; i++) {
		struct lane *q = &l->lanes[i];
		q->slots = l->slot_mem + (size_t)i * (l->mask + 1);
		for (uint64_t j = 0; j <= l->mask; j++)
			atomic_init(&q->slots[j].seq, j);
		atomic_init(&q->hold_wake_pos, UINT64_MAX); /* no hold */
	}
	for (unsigned i = 0; i < AL_INFLIGHT; i++) {
		l->batches[i].buf = malloc(cfg->max_batch_bytes);
		if (!l->batches[i].buf) {
			r = -ENOMEM;
			goto err;
		}
	}
	l->efd = eventfd(0, EFD_CLOEXEC);
	if (l->efd < 0) {
		r = -errno;
		goto err;
	}
	/* the fork check: a page the kernel zeroes in a child (Linux >= 4.14) */
	void *pg = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pg == MAP_FAILED) {
		r = -errno;
		goto err;
	}
	l->alive = pg;
	if (madvise(pg, (size_t)sysconf(_SC_PAGESIZE), MADV_WIPEONFORK) < 0) {
		r = -errno; /* EINVAL: a kernel without it */
		goto err;
	}
	*l->alive = 1;
	if (!(cfg->has_hooks && cfg->hooks.no_membarrier) && membarrier_register())
		atomic_init(&l->light_publish, 1);

	if (cfg->version == 2) {
		r = al_v2_start(l);
		if (r < 0)
			goto err;
	}
	r = al_file_open(l);
	if (r < 0)
		goto err;

	if (cfg->backend != AUDITLOG_BACKEND_PWRITE) {
		struct io_uring_params p = {0};
		r = io_uring_queue_init_params(16, &l->ring, &p);
		if (r == 0) {
			l->uring = true;
			l->cqe_skip = p.features & IORING_FEAT_CQE_SKIP;
		}
		else if (cfg->backend == AUDITLOG_BACKEND_IO_URING)
			goto err;
	}
	r = pthread_create(&l->worker, NULL, worker_main, l);
	if (r) {
		r = -r;
		goto err;
	}
	if (worker_setup_due(cfg)) {
		while (!atomic_load_explicit(&l->worker_ready, memory_order_acquire))
			futex_wait(&l->worker_ready, 0, NULL);
		if (l->worker_setup_err < 0) {
			pthread_join(l->worker, NULL);
			r = l->worker_setup_err;
			goto err;
		}
	}
	l->worker_started = true;
	*ret_log = l;
	return 0;
err:
	log_free(l);
	return r;
}

/* A forked child holds a copy of the handle whose worker thread, I/O ring
 * and sealer connection are the parent's: it must use none of them. */
static inline bool forked(const struct auditlog *l)
{
	return !*l->alive;
}

/* What every recording call checks first: -EINVAL, -ECHILD in a forked
 * child, and for a synchronous call -EAGAIN while a QUEUE writer's sealer
 * is away (AUDITLOG_SEALER_QUEUE: nothing can be acknowledged then). */
static inline int may_record(const struct auditlog *l, bool sync)
{
	if (!l)
		return -EINVAL;
	if (forked(l))
		return -ECHILD;
	if (sync && atomic_load_explicit(&l->sealer_away, memory_order_relaxed))
		return -EAGAIN;
	return 0;
}

/* auditlog_record's hand-off alone, of an event prepared (checked with
 * check_event, then al_prepare) by the caller: what auditlog-bench times. */
int al_record_prepared(struct auditlog *l, const struct al_prep *p)
{
	int r = may_record(l, false);

	if (r < 0)
		return r;
	r = atomic_load_explicit(&l->error, memory_order_relaxed);
	if (r)
		return r;
	return handoff(l, p, NULL);
}

AUDITLOG_API int auditlog_record(struct auditlog *log, const struct auditlog_event *ev)
{
	int r = may_record(log, false);

	if (r < 0)
		return r;
	return enqueue(log, ev, NULL, 0, SLOT_EVENT, NULL);
}

AUDITLOG_API int auditlog_record_sync(struct auditlog *log, const struct auditlog_event *ev)
{
	struct waiter w = {0};
	int r = may_record(log, true);

	if (r < 0)
		return r;
	r = enqueue(log, ev, NULL, 0, SLOT_EVENT, &w);
	if (r < 0)
		return r;
	if (r > 0)
		lead(log, &w);
	return waiter_wait(&w);
}

/* n > 0 needs a v2 log; n = 0 is auditlog_record() whatever fields is */
static int check_fields(struct auditlog *log, const struct auditlog_field *fields, size_t n,
			bool sync)
{
	int r = may_record(log, sync);

	if (r < 0)
		return r;
	if (n && !fields)
		return -EINVAL;
	if (n && log->cfg.version < AL_V2)
		return -EOPNOTSUPP;
	return 0;
}

AUDITLOG_API int auditlog_record_fields(struct auditlog *log, const struct auditlog_event *ev,
					const struct auditlog_field *fields, size_t n)
{
	int r = check_fields(log, fields, n, false);

	if (r < 0)
		return r;
	return enqueue(log, ev, fields, n, SLOT_EVENT, NULL);
}

AUDITLOG_API int auditlog_record_fields_sync(struct auditlog *log, const struct auditlog_event *ev,
					     const struct auditlog_field *fields, size_t n)
{
	struct waiter w = {0};
	int r = check_fields(log, fields, n, true);

	if (r < 0)
		return r;
	r = enqueue(log, ev, fields, n, SLOT_EVENT, &w);
	if (r < 0)
		return r;
	if (r > 0)
		lead(log, &w);
	return waiter_wait(&w);
}

AUDITLOG_API int auditlog_flush(struct auditlog *log)
{
	struct waiter w = {0};
	int r = may_record(log, true);

	if (r < 0)
		return r;
	atomic_fetch_add(&log->barriers, 1);
	r = enqueue(log, NULL, NULL, 0, SLOT_BARRIER, &w);
	if (r < 0) {
		atomic_fetch_sub(&log->barriers, 1);
		return r;
	}
	return waiter_wait(&w);
}

AUDITLOG_API int auditlog_close(struct auditlog *log)
{
	int r;

	if (!log)
		return 0;
	if (forked(log)) {
		/* the child's copy: freed, nothing written, the parent's log,
		 * worker and sealer connection untouched */
		log->worker_started = false;
		log_free(log);
		return -ECHILD;
	}
	atomic_store(&log->stopping, 1);
	wake_worker(log);
	if (log->worker_started)
		pthread_join(log->worker, NULL);
	r = atomic_load(&log->error);
	log_free(log);
	return r;
}

AUDITLOG_API int auditlog_get_stats(struct auditlog *log, struct auditlog_stats *ret, size_t size)
{
	struct auditlog_stats s = {0};

	if (!log || !ret)
		return -EINVAL;
	uint64_t enq = 0;
	for (unsigned i = 0; i < log->nlanes; i++)
		enq += atomic_load(&log->lanes[i].enq_pos);
	enq -= atomic_load(&log->barriers);
	s.events_enqueued = enq;
	s.events_written = atomic_load(&log->st.events_written);
	s.events_failed = atomic_load(&log->st.events_failed);
	s.records_written = atomic_load(&log->st.records_written);
	s.batches = atomic_load(&log->st.batches);
	s.bytes_written = atomic_load(&log->st.bytes_written);
	s.fsyncs = atomic_load(&log->st.fsyncs);
	s.largest_batch = atomic_load(&log->st.largest_batch);
	s.queue_high_water = atomic_load(&log->st.queue_high_water);
	s.write_errors = atomic_load(&log->st.write_errors);
	s.fsync_errors = atomic_load(&log->st.fsync_errors);
	s.enospc_retries = atomic_load(&log->st.enospc_retries);
	s.short_writes = atomic_load(&log->st.short_writes);
	s.rotations = atomic_load(&log->st.rotations);
	s.failovers = atomic_load(&log->st.failovers);
	s.recoveries = atomic_load(&log->st.recoveries);
	s.untrusted_restarts = atomic_load(&log->st.untrusted_restarts);
	pthread_mutex_lock(&log->head_lock);
	s.head_seq = log->durable.seq;
	memcpy(s.head_hash, log->durable.hash, AL_HASH_LEN);
	pthread_mutex_unlock(&log->head_lock);
	s.error = atomic_load(&log->error);
	s.backend = log->uring ? AUDITLOG_BACKEND_IO_URING : AUDITLOG_BACKEND_PWRITE;
	s.fence_free_publish = atomic_load(&log->light_publish);
	s.inline_batches = atomic_load(&log->st.inline_batches);
	s.coalesced_batches = atomic_load(&log->st.coalesced_batches);
	s.coalesce_wait_ns = atomic_load(&log->st.coalesce_wait_ns);
	s.sealer_requests = atomic_load(&log->st.sealer_requests);
	s.sealer_errors = atomic_load(&log->st.sealer_errors);
	s.sealer_reconnects = atomic_load(&log->st.sealer_reconnects);
	s.sealer_wait_ns = atomic_load(&log->st.sealer_wait_ns);
	s.sealer_away = atomic_load(&log->sealer_away);
	s.caller_commits = atomic_load(&log->st.caller_commits);
	s.batches_ahead = atomic_load(&log->st.batches_ahead);
	s.cache_drops = atomic_load(&log->st.cache_drops);
	s.queue_lanes = log->nlanes;
	memcpy(ret, &s, size < sizeof(s) ? size : sizeof(s));
	return 0;
}
