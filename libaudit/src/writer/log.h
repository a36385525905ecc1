/* SPDX-License-Identifier: MIT */
/* Private definitions shared by the writer's translation units. */
#ifndef AUDITLOG_LOG_H
#define AUDITLOG_LOG_H

#include "symbols.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include <liburing.h>

#include "auditlog.h"
#include "format.h"
#include "format_v2.h"
#include "internal.h"
#include "merkle.h"
#include "note.h"
#include "sealkey.h"
#include "sealer.h"

#define al_prepare auditlog__al_prepare
#define al_record_prepared auditlog__al_record_prepared

struct auditlog_config {
	char *path;
	unsigned version;
	size_t queue_slots;
	unsigned queue_lanes; /* 0: one a CPU, up to AL_LANES_MAX (x86 only; else 1) */
	enum auditlog_full_policy full_policy;
	uint64_t enospc_deadline_ms;
	uint64_t rotate_bytes;
	uint64_t rotate_age_s;
	size_t max_batch_bytes;
	enum auditlog_backend backend;
	uint64_t future_tolerance_s;
	uint64_t async_coalesce_us; /* 0: off */
	int worker_nice;            /* when has_worker_nice */
	bool has_worker_nice;
	cpu_set_t worker_cpus;      /* the worker's and its io-wq's CPUs, when has_worker_cpus */
	bool has_worker_cpus;
	uint64_t drop_behind_bytes; /* 0: never */
	/* v2, in-process sealing (docs/format.md 17, 19, 20) */
	char *seal_state_path;      /* the sealing state file (owned) */
	char *signing_key_path;     /* the checkpoint signing key file (owned) */
	char *sealer_socket;        /* or auditlog-sealer's socket (owned; docs/sealer.md) */
	unsigned sealer_policy;     /* AUDITLOG_SEALER_FAIL_CLOSED or _QUEUE */
	uint64_t ckpt_records;      /* a checkpoint every this many records (0: never by count) */
	uint64_t ckpt_ms;           /* ... or this many milliseconds (0: never by time) */
	struct al_io_hooks hooks;
	bool has_hooks;
	struct al_clock_hooks clock; /* test seam (internal.h) */
	bool has_clock;
};

/* The lanes a log of this config has (its queue_lanes, 0 made one a CPU;
 * fewer when each would hold under 64 slots; 1 where they are not built). */
#define al_queue_lanes auditlog__al_queue_lanes
unsigned al_queue_lanes(const struct auditlog_config *c);

/* The config's clock hooks, or NULL. */
static inline const struct al_clock_hooks *al_cfg_clock(const struct auditlog_config *c)
{
	return c->has_clock ? &c->clock : NULL;
}

/* ---- the queue ---------------------------------------------------------- */

static const char *const al_outcome_word[] = {"success", "failure", "unknown"};
static const uint8_t al_outcome_len[] = {7, 7, 7};

/* A PKCS#11 number the library has no name for: "0x%08llx" (docs/format.md 2.2). */
#define AL_P11_UNNAMED_LEN 24
static inline size_t al_p11_unnamed(char buf[AL_P11_UNNAMED_LEN], uint64_t v)
{
	return (size_t)snprintf(buf, AL_P11_UNNAMED_LEN, "0x%08llx", (unsigned long long)v);
}

struct waiter {
	_Atomic uint32_t done; /* futex word: 0 pending, 1 released */
	int32_t result;
	uint64_t seq;          /* the record's seq (record_sync), set by the worker */
	bool has_seq;
	struct waiter *next;
};

#define SLOT_EVENT 1
#define SLOT_BARRIER 2 /* auditlog_flush(): no record, only a waiter */
#define SLOT_SIZE 384   /* six cache lines */
#define SLOT_INLINE 336 /* what is left of them */

/* An event slot holds what its producer rendered (producer.c): v2, D_n and
 * the line's members (len[0] their bytes); v0 and v1, the members (len[0])
 * and, in v1, the members' part of the body (len[1]). Inline, or on the
 * heap when longer. */
struct slot {
	_Atomic uint64_t seq; /* Vyukov sequence */
	uint8_t kind;
	uint16_t len[2];
	uint64_t ts_ns; /* CLOCK_REALTIME; with lanes 0 (derived from stamp) unless a test's */
	/* with lanes: CLOCK_MONOTONIC read after the reservation (the producer),
	 * then the least stamp of this slot and those after it in the cut (the
	 * worker's merge key) */
	uint64_t stamp;
	struct waiter *waiter;
	uint8_t *heap;
	uint8_t inl[SLOT_INLINE];
};

/* What one side writes and the other reads sits AL_PAIR bytes from anything
 * else: x86 CPUs fetch a cache line's 128-byte buddy with it (Intel's
 * spatial prefetcher, AMD's L2 up/down one), so 64 bytes apart two lines
 * can still move between CPUs as one. Objects holding such groups are
 * allocated aligned to it (posix_memalign in auditlog_open). */
#define AL_PAIR 128

/* A lane: one Vyukov ring (docs/durability.md "Lanes"). Producers on CPU c use
 * lane c % nlanes; the worker merges the lanes by their stamps. */
struct lane {
	/* the producers' line: the position, and the coalescing wake position
	 * (an async record at it wakes a holding worker: the batch is full) */
	_Alignas(AL_PAIR) _Atomic uint64_t enq_pos;
	_Atomic uint64_t hold_wake_pos;
	_Atomic uint64_t opens; /* open slots reserved (stamp(), writer.c) */
	/* the worker's line */
	_Alignas(AL_PAIR) uint64_t deq_pos; /* every slot before it is taken */
	uint64_t cut_end;  /* [deq_pos, cut_end): the current cut's part of this lane */
	uint64_t pub_end;  /* the published prefix at the last cut (its end) */
	uint64_t opens_seen; /* opens at the last cut */
	uint64_t scan_until; /* open slots may lie below: scanned, not searched */
	struct slot *slots;
};
#define AL_LANES_MAX 16
#define AL_LOOK_EVERY 64 /* the worker looks at the lanes every this many slots taken */
#define AL_CUT_SPAN 256  /* a cut's reach into a lane, in slots, when it can choose */

/* ---- the producer (producer.c) -------------------------------------------- */

/* An event made ready by its producer, before any slot is reserved: lives
 * on the calling thread's stack. */
struct al_prep {
	struct al_record rec; /* decoded; strings point into the event, dec or cdec */
	struct al_v2_field caller[AL_CALLER_MAX]; /* sorted, empty strings dropped */
	size_t ncaller;
	char rvbuf[AL_P11_UNNAMED_LEN], mechbuf[AL_P11_UNNAMED_LEN];
	uint8_t dec[128 + 512 + 256 + 128 + 4096 + 64 + 64 + 256 + 128]; /* the caps of 2.2 */
	uint8_t cdec[AL_CALLER_MAX][AL_CALLER_STR_CAP];
	/* the slot's bytes: buf[0..data_len) (v2: D_n, after B_n was built
	 * there; v0/v1: the members), then v1's body part at AL_PREP_BODY */
	uint8_t buf[AL_LINE_MAX + AL_BODY_MAX];
	size_t data_len, body_len;
};
#define AL_PREP_BODY AL_LINE_MAX
_Static_assert(sizeof(((struct al_prep *)0)->buf) >= AL_HASH_LEN + AL_LINE_MAX &&
		       sizeof(((struct al_prep *)0)->buf) >= AL_PREP_BODY + AL_BODY_MAX,
	       "buf holds v2's D_n and members, or v1's members and then its body part");

/* Check, decode and render an event checked by check_event() for a log of
 * format version `version` (v2: with its caller fields, any order, and D_n):
 * 0, -EINVAL or -E2BIG (docs/format.md 14.2). */
int al_prepare(uint8_t version, const struct auditlog_event *ev, const struct auditlog_field *fields,
	       size_t n, struct al_prep *p);
/* auditlog_record's hand-off (writer.c) of an event so prepared. */
int al_record_prepared(struct auditlog *l, const struct al_prep *p);
/* ---- v2: where the chain's tree and seals stand ---------------------------- */

enum { V2T_NONE, V2T_ON, V2T_UNKNOWN }; /* tree: not started (v0/v1 so far), on, unknown */
enum { K_BATCH, K_IDLE, K_OPEN, K_CLOSE };
extern const char *const al_seal_kind_word[4];

#define V2_PEND 64u /* leaves the tree holds back before appending them together */

struct v2pos {
	uint8_t tree_state;
	uint64_t first_seq;           /* seq of leaf 0 (the chain's first v2 record) */
	bool has_seal;                /* the chain's last seal so far: */
	uint8_t seal_kind;            /* K_* */
	uint32_t seal_epoch;
	uint64_t seal_seq;
	uint8_t seal_key[AL_SEAL_KID_LEN];
	/* leaves not yet in tree, pend[phead..npend): the worker appends them
	 * one node at a time beside its chain steps (al_v2_tree_owed, step
	 * open while a leaf is half in), al_v2_tree() the rest, two nodes
	 * hashed at a time (al_merkle_range_append_n); read tree only through
	 * al_v2_tree() */
	unsigned npend, phead;
	struct al_merkle_step step;
	uint8_t pend[V2_PEND][AL_HASH_LEN];
	struct al_merkle_range tree;  /* last: copied up to tree.n */
};

/* dst = src, copying only the used hashes (range and pending leaves). */
void al_v2pos_copy(struct v2pos *dst, const struct v2pos *src);

/* The tree with every leaf so far in it (fast: al_sha256_ni_ok()'s answer). */
const struct al_merkle_range *al_v2_tree(struct v2pos *v, bool fast);

/* The next interior node the tree owes for its pending leaves: its children
 * in *left, *right (valid until the next call on v), true; false when none
 * is owed. al_v2_tree_paid() gives the node's hash. */
bool al_v2_tree_owed(struct v2pos *v, const uint8_t **left, const uint8_t **right);
void al_v2_tree_paid(struct v2pos *v, const uint8_t node[AL_HASH_LEN]);

/* ---- batches ------------------------------------------------------------ */

enum bstate { B_FREE, B_INFLIGHT, B_HELD }; /* held: formatted, its seal not yet made */

#define OP_WRITE 0
#define OP_FSYNC 1
#define PENDING_RES INT32_MIN

struct batch {
	uint8_t *buf;
	size_t len;
	uint64_t off;        /* file offset of buf[0] */
	size_t written;      /* bytes of buf already on the file */
	enum bstate state;
	int ops;             /* completions outstanding */
	long w_res;          /* result of the last write: bytes or -errno; INT_MIN pending */
	int f_res;           /* result of the fsync; INT_MIN pending */
	int err;             /* first error of this batch */
	uint64_t enospc_since_ns;
	bool complete;       /* written and fdatasync'ed */
	bool issued;         /* its I/O was issued (else it waits its turn) */
	bool write_cqe_skipped; /* the write was issued with IOSQE_CQE_SKIP_SUCCESS */
	bool retry_pending;  /* ENOSPC: resubmit at retry_at_ns */
	uint64_t retry_at_ns;
	uint64_t retry_delay_ms;
	uint64_t id;         /* submission order */
	uint32_t nrec, nevents;
	uint64_t last_seq;
	uint64_t last_ts_ns;
	char last_ts_str[AL_TS_LEN];
	uint8_t last_hash[AL_HASH_LEN];
	size_t pending_len;  /* bytes the write in flight should have written */
	size_t issued_len;   /* bytes it was issued for (a test hook may cut it) */
	struct waiter *waiters;
	bool is_close;       /* v2: ends with the close seal */
	struct v2pos v2_after; /* v2: the tree and seals after its last record */
};

/* ---- the log ------------------------------------------------------------ */

struct head {
	uint64_t seq;
	uint8_t hash[AL_HASH_LEN];
	uint64_t ts_ns;
	char ts_str[AL_TS_LEN];
	uint8_t version;
	bool empty; /* no record yet (never true after open: a header is written) */
};

struct auditlog {
	struct auditlog_config cfg; /* a copy; path owned */
	char *dir;                  /* directory of the log */
	char *base;                 /* basename */
	int dirfd;
	int fd;
	int efd; /* eventfd waking the worker */

	/* queue: nlanes rings of mask + 1 slots each (set at open: read by
	 * every producer, written by nobody after) */
	struct lane *lanes;
	unsigned nlanes;
	uint64_t gen; /* this log's number in the process */
	uint64_t mask;
	struct slot *slot_mem;
	_Alignas(AL_PAIR) _Atomic uint32_t worker_sleeping;
	_Atomic uint32_t space_gen;   /* futex: bumped when slots are freed and someone waits */
	_Atomic uint32_t full_waiters;
	/* what every producer reads on every call, on a line of its own that
	 * changes only when the log fails or a sealer goes away or comes back */
	_Alignas(AL_PAIR) _Atomic int32_t error; /* sticky: the error that closed the log */
	_Atomic uint32_t sealer_away; /* AUDITLOG_SEALER_QUEUE: sync calls get -EAGAIN */
	/* 1: publish() needs no fence, the worker's membarrier() stands for it
	 * (offer_barrier(), writer.c); set at open, cleared only if that call fails */
	_Atomic uint32_t light_publish;
	_Alignas(AL_PAIR) _Atomic uint64_t barriers;
	/* slots carrying a waiter (record_sync, flush) reserved by producers, and
	 * taken by the worker: a coalescing batch never waits while they differ */
	_Atomic uint64_t sync_enq;
	uint64_t sync_taken;           /* worker only */
	_Atomic uint32_t stopping;

	/* worker state; first the lanes' merge (cut(), writer.c), off the
	 * lines above that every producer reads */
	_Alignas(AL_PAIR) uint64_t cut_off; /* CLOCK_REALTIME - CLOCK_MONOTONIC at the current cut */
	bool cut_stalled;   /* a lane held a slot reserved, not yet published */
	/* the last looks_max looks at the lanes (enough to span the queue): look
	 * k (at k % looks_max) read the clock look_t, then each lane i's position
	 * look_e[k % looks_max * nlanes + i] */
	uint64_t *look_t, *look_e;
	uint64_t nlooks, looks_max;
	unsigned since_look; /* slots taken since the last look */
	pthread_t worker;
	bool worker_started;
	/* with cfg.has_worker_nice or has_worker_cpus: 1 once the worker has
	 * set them on itself (the result in worker_setup_err: 0 or -errno),
	 * which auditlog_open waits for */
	_Atomic uint32_t worker_ready;
	int worker_setup_err;
	bool uring;
	bool cqe_skip; /* IORING_FEAT_CQE_SKIP */
	struct io_uring ring;
	bool efd_armed;
	uint64_t efd_buf;
	struct batch batches[AL_NBATCH];
	uint64_t next_batch_id;
	size_t line_est; /* bytes a record, the last batch's average */
	uint64_t file_off;     /* where the next batch goes */
	uint64_t file_created_ns;
	uint64_t file_first_seq;
	uint8_t chain_id[16];
	struct head tail;      /* last record formatted (maybe not durable yet) */
	struct head durable;   /* last record made durable */
	uint64_t durable_size; /* file bytes through the durable head */
	uint64_t dropped_upto; /* the active file's page cache dropped below this */
	bool nlink_known;      /* the active file's link count shows a deletion */
	bool drop_inflight;    /* an IORING_OP_FADVISE of it not completed yet */
	uint64_t last_ts_ns;
	bool need_header;      /* the next batch starts with a header */
	const char *header_reason;
	char prev_name[NAME_MAX + 1];     /* the file holding the durable head, for the next header */
	char switched_name[NAME_MAX + 1]; /* the name the last switch renamed the file to */
	uint8_t file_id[16];              /* of the active file's header */
	/* a file sealed before any record of it became durable (its header's
	 * batch failed): named in the next header (docs/format.md 2.3, 6) */
	char sealed_name[NAME_MAX + 1];
	uint8_t sealed_id[16];
	char header_detail[NAME_MAX + 256];
	uint64_t header_prev_size;
	struct head header_prev;
	uint32_t consecutive_failovers;
	/* records of failed batches, re-written into the next file (canonical lines) */
	uint8_t *requeue;
	size_t requeue_len, requeue_pos, requeue_cap;
	uint64_t lost_sync;      /* failed sync records not re-written (told to their callers) */
	int failover_err;        /* a batch failed: seal the file once nothing is in flight */
	uint64_t failover_off;
	bool rotate_pending;
	struct waiter *lead_waiter; /* a record_sync caller holding the worker's role
				     * (lead()): its waiter; NULL otherwise */
	uint64_t hold_since_ns;  /* coalescing: when the held batch began waiting (0: none) */
	uint64_t hold_until_ns;  /* and when it stops waiting (monotonic) */
	struct {
		uint8_t b, op;
		int32_t res;
	} fake_cq[16];           /* completions made up by the pwrite backend and injected faults */
	unsigned fake_n;
	uint8_t *pdec;           /* decode buffer for re-parsed lines */

	/* v2 (docs/format.md Part II): the seal step and what the chain holds */
	struct al_sealer *sealer;
	bool sha_ni;              /* al_sha256_ni_ok(), asked at open: the tree's fast path */
	struct v2pos v2;          /* after the last record formatted */
	struct v2pos v2_durable;  /* after the durable head */
	struct al_sealer_now ep;  /* the last epoch reading */
	uint32_t fmt_epoch;       /* the epoch records are being formatted in */
	unsigned since_check;     /* records since the last epoch reading */
	bool tree_due;            /* the next batch carries a tree record */
	uint64_t tree_rec_end;    /* file offset just past the last tree/checkpoint */
	uint64_t ckpt_seq;        /* tail seq at the last checkpoint ... */
	uint64_t ckpt_boot;       /* ... and its boot-clock time */
	int64_t clock_noted;      /* wall - expected, as the last clock record said */
	bool close_inflight, close_done;
	struct batch *held;       /* the batch whose seal failed, kept unwritten */
	int held_kind;            /* K_* of its seal */
	bool held_tree, held_ckpt, held_content; /* its batch-tail arguments */
	uint8_t tail_stage;       /* al_v2_batch_tail's progress in it: 1 clock line made,
				   * 2 tree/checkpoint too (only the seal is left) */
	unsigned held_nrec;       /* ... and how many records those are */
	uint64_t reconnect_at;    /* monotonic ns of the next attempt */
	uint64_t reconnect_delay; /* ns, doubling */
	size_t v2_reserve;        /* batch bytes kept for the clock/tree/checkpoint/seal lines */
	char range_hex[AL_MERKLE_RANGE_MAX * 64];
	uint8_t note[AL_NOTE_MAX];

	/* one word in a MADV_WIPEONFORK page: 1 in the process that opened the
	 * log, 0 in a forked child (whose calls answer -ECHILD) */
	volatile uint8_t *alive;

	struct al_ts_cache ts_cache;

	/* scratch */
	uint8_t *work;  /* AL_HASH_LEN + AL_BODY_MAX */
	uint8_t *dec;   /* decoded strings of one record */
	uint8_t line[AL_LINE_MAX];

	/* stats (worker writes, anyone reads) */
	struct {
		_Atomic uint64_t events_written, events_failed, records_written, batches,
			bytes_written, fsyncs, largest_batch, queue_high_water, write_errors,
			fsync_errors, enospc_retries, short_writes, rotations, failovers,
			recoveries, untrusted_restarts, inline_batches, coalesced_batches,
			coalesce_wait_ns, sealer_requests, sealer_errors, sealer_reconnects,
			sealer_wait_ns, caller_commits, batches_ahead, cache_drops;
	} st;
	pthread_mutex_t head_lock; /* guards the durable head for stats */
};

/* file.c */
int al_file_open(struct auditlog *l);
int al_file_switch(struct auditlog *l, const char *reason);
int al_read_hooked(struct auditlog *l, void *buf, size_t len, uint64_t off);
int al_write_sync(struct auditlog *l, const void *buf, size_t len, uint64_t off);
void al_random_id(uint8_t out[16]);
uint64_t al_now_ns(void);

/* seal_records.c: the v2 records the writer adds (docs/format.md 19-21) */
/* Load the seal provider (auditlog_open, v2 with sealing). */
int al_v2_start(struct auditlog *l);
/* Read the epoch; when it moved past fmt_epoch, *ret_moved. 0 or -errno. */
int al_v2_epoch(struct auditlog *l, bool *ret_moved);
/* Append a seal of `kind` (K_*) for epoch l->fmt_epoch to out; the line
 * length or -errno. */
long al_v2_seal_line(struct auditlog *l, int kind, uint8_t *out);
/* Append to buf at *len what ends a batch (docs/format.md 19.2, decision 1):
 * a clock record when due, a tree record when `tree` (or due by bytes at file
 * offset file_at), a checkpoint when `ckpt` (or due), and the seal of `kind`.
 * *ret_nrec gets the number of records appended. 0 or -errno. */
int al_v2_batch_tail(struct auditlog *l, uint8_t *buf, size_t *len, uint64_t file_at, int kind,
		     bool tree, bool ckpt, bool content, unsigned *ret_nrec);
/* A v2 record (type, seq, hash) was appended: its Merkle leaf. */
void al_v2_leaf(struct v2pos *v, uint8_t type, uint64_t seq, const uint8_t hash[AL_HASH_LEN], bool fast);
/* The tail scan's view: note a chained record p (prev_version: the version of
 * the record before it, or -1 when p is the window's anchor). */
void al_v2_scan_note(struct v2pos *v, const struct al_parsed *p, int prev_version);
/* True when a v2 idle seal is due now (docs/format.md 19.2). */
bool al_v2_idle_due(struct auditlog *l);
/* ns of the boot clock until the worker must next look (idle seal). */
uint64_t al_v2_timeout(struct auditlog *l);
/* AUDITLOG_SEALER_QUEUE: is r a lost sealer (rather than its answer)? */
bool al_v2_sealer_lost(const struct auditlog *l, int r);
/* AUDITLOG_SEALER_QUEUE: mark the sealer away (first attempt after backoff). */
void al_v2_sealer_away(struct auditlog *l);
/* AUDITLOG_SEALER_QUEUE: when due, reconnect. 1 reconnected, 0 not yet (or
 * not due), -errno when the log must fail closed (another key, a sealer
 * behind the chain). */
int al_v2_reconnect(struct auditlog *l, bool force);
/* ns (monotonic) until the next reconnection attempt, 0 when not away. */
uint64_t al_v2_reconnect_timeout(struct auditlog *l);

/* writer.c */
/* Append the next record of the chain (raw strings; ts_ns is clamped to stay
 * non-decreasing) to out, advancing l->tail. Returns the line length. */
long al_chain_append(struct auditlog *l, struct al_record *raw, uint64_t ts_ns, uint8_t *out);
/* Same for a record whose strings are already decoded (a re-parsed line). */
long al_chain_append_decoded(struct auditlog *l, struct al_record *dec, uint64_t ts_ns,
			     uint8_t *out);
/* ts_ns kept non-decreasing along the chain (the tail's time at least). */
uint64_t al_clamp_ts(struct auditlog *l, uint64_t ts_ns);
/* The seq the chain's next record takes. */
static inline uint64_t al_next_seq(const struct auditlog *l)
{
	return l->tail.empty ? 0 : l->tail.seq + 1;
}
/* The wall clock, through the test hooks when set. */
static inline uint64_t al_wall_ns(const struct auditlog *l)
{
	return al_clock_realtime(al_cfg_clock(&l->cfg));
}
/* The header the next file starts with (l->need_header state). */
long al_format_header(struct auditlog *l, uint8_t *out);
/* The active file's link count from its fstat, through the test hooks when
 * set (no_link_count: a file system that reports none). */
static inline nlink_t al_nlink(const struct auditlog *l, const struct stat *st)
{
	return l->cfg.has_hooks && l->cfg.hooks.no_link_count ? 0 : st->st_nlink;
}

#endif
