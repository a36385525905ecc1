/* SPDX-License-Identifier: MIT */
/*
 * auditlog.h - group-commit, hash-chained audit trail.
 *
 * Callers enqueue events; one worker thread per log serializes them as NDJSON
 * lines carrying a SHA-256 chain (docs/format.md) and commits each batch with
 * one write and one fdatasync (io_uring, or pwrite+fdatasync when io_uring is
 * unavailable). docs/durability.md states the contract in full.
 *
 * Conventions: every function returning int returns 0 or a negative errno.
 * Out-parameters (ret_*) are written only on success. Destructors accept NULL.
 * The library never prints and never calls exit().
 */
#ifndef AUDITLOG_H
#define AUDITLOG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define AUDITLOG_API __attribute__((visibility("default")))
#else
#define AUDITLOG_API
#endif

#define AUDITLOG_VERSION_MAJOR 0
#define AUDITLOG_VERSION_MINOR 1

struct auditlog;        /* an open log: opaque */
struct auditlog_config; /* settings for auditlog_open(): opaque */

/* ---- configuration -------------------------------------------------------
 * A config is a plain value: not thread-safe, may be freed right after
 * auditlog_open() returns. Setters validate and return -EINVAL on a value out
 * of range, leaving the config unchanged.
 */

enum auditlog_full_policy {
	AUDITLOG_FULL_BLOCK = 0, /* record() waits for space (default) */
	AUDITLOG_FULL_EAGAIN = 1 /* record() returns -EAGAIN at once */
};

enum auditlog_backend {
	AUDITLOG_BACKEND_AUTO = 0,     /* io_uring, else pwrite (default) */
	AUDITLOG_BACKEND_IO_URING = 1, /* io_uring or fail with its error */
	AUDITLOG_BACKEND_PWRITE = 2    /* pwrite + fdatasync */
};

AUDITLOG_API int auditlog_config_new(struct auditlog_config **ret_cfg);
AUDITLOG_API void auditlog_config_free(struct auditlog_config *cfg);

/* Path of the active log file (required). Its directory must exist. */
AUDITLOG_API int auditlog_config_set_path(struct auditlog_config *cfg, const char *path);
/* Format version to write: 1 (default), 0, or 2 (sealed and checkpointed,
 * docs/format.md Part II: needs auditlog_config_set_sealing()). Never lower
 * than the log's last record. */
AUDITLOG_API int auditlog_config_set_format_version(struct auditlog_config *cfg, unsigned version);
/* Queue slots (rounded up to a power of two, 64..1<<24; default 16384). A
 * slot is 384 bytes: the default queue is 6 MiB of the process's memory,
 * touched as the queue goes round. */
AUDITLOG_API int auditlog_config_set_queue_capacity(struct auditlog_config *cfg, size_t slots);
/* Lanes: the queue split into this many rings (rounded up to a power of two,
 * at most 16; 0, the default: one a CPU; 1: one ring), a thread recording
 * into its CPU's, so that threads on different CPUs never write one line to
 * queue. The capacity above is shared between them (each at least 64 slots:
 * fewer lanes when the queue is small), so one thread can fill its lane
 * while the others have room. The chain keeps the callers' order across
 * lanes (docs/durability.md "Lanes"). -EOPNOTSUPP for more than 1 where
 * lanes are not built (they are on x86). */
AUDITLOG_API int auditlog_config_set_queue_lanes(struct auditlog_config *cfg, unsigned lanes);
AUDITLOG_API int auditlog_config_set_full_policy(struct auditlog_config *cfg, enum auditlog_full_policy p);
/* How long to retry a write that failed with ENOSPC before failing closed
 * (milliseconds; 0 fails at once; default 0). */
AUDITLOG_API int auditlog_config_set_enospc_deadline_ms(struct auditlog_config *cfg, uint64_t ms);
/* Rotate when the file reaches this size (bytes; 0 = never, default). */
AUDITLOG_API int auditlog_config_set_rotate_bytes(struct auditlog_config *cfg, uint64_t bytes);
/* Rotate when the file is this old (seconds; 0 = never, default). */
AUDITLOG_API int auditlog_config_set_rotate_age_s(struct auditlog_config *cfg, uint64_t seconds);
/* Upper bound of one batch (bytes, 16 KiB..64 MiB; default 3 MiB). It also
 * bounds what open reads back for crash recovery: 2 x this + 8 KiB
 * (docs/format.md 7), and a larger value makes open slower on a large log. */
AUDITLOG_API int auditlog_config_set_max_batch_bytes(struct auditlog_config *cfg, size_t bytes);
AUDITLOG_API int auditlog_config_set_backend(struct auditlog_config *cfg, enum auditlog_backend b);
/* The worker thread's nice value (-20..19; default: not set, the worker
 * keeps the nice of the thread that called auditlog_open()). The worker sets
 * it on itself before its first I/O, so the kernel's io_uring threads that
 * copy its batches into the page cache and run its fdatasyncs inherit it. A
 * nice below the opening thread's needs CAP_SYS_NICE or RLIMIT_NICE
 * (setpriority(2)): auditlog_open() then fails with -EACCES or -EPERM. Why one
 * may want it: when producers keep the queue full on few CPUs, at equal
 * priority they delay the worker and those threads and the disk idles
 * (docs/benchmarks.md, "The worker's priority"). -EINVAL outside -20..19. */
AUDITLOG_API int auditlog_config_set_worker_nice(struct auditlog_config *cfg, int nice);
/* The CPUs the worker thread and the kernel's io_uring threads that run its
 * writes and fdatasyncs may run on, as a list such as "0-3,8" (what taskset -c
 * and systemd's CPUAffinity= take; each CPU below 1024). Default: not set,
 * the worker keeps the opening thread's affinity and those threads the
 * process's cpuset. The worker sets both on itself before its first I/O
 * (pthread_setaffinity_np, IORING_REGISTER_IOWQ_AFF, Linux 5.14): when
 * either fails (no CPU of the list allowed to the process, a kernel without
 * the io_uring call) auditlog_open() fails with its error (-EINVAL) rather
 * than run unconfined. A batch a record_sync caller commits on a quiet log
 * is written on that caller's thread (docs/durability.md, "The caller's
 * commit"). Why one may want it: to keep the audit trail off CPUs set apart
 * for latency-bound work, or on one CPU (docs/benchmarks.md, "The worker on
 * one CPU": less CPU per event, fewer events per second on two CPUs).
 * -EINVAL for a malformed list; NULL unsets it. */
AUDITLOG_API int auditlog_config_set_worker_cpus(struct auditlog_config *cfg, const char *cpus);
/* The log file's pages more than `bytes` behind its durable end are dropped
 * from the page cache as the file grows (POSIX_FADV_DONTNEED over what is
 * already on disk, at most once per 8 MiB written; done by io_uring's threads,
 * or by the worker with the pwrite backend). 0 leaves them to the kernel.
 * Default 1 GiB: a burst shorter than that drops nothing (dropping costs
 * ~250 ns a page), a log that keeps growing holds at most that much of the
 * cache. A write-once log kept in the cache pushes other files out, and on a
 * guest that hands free memory back to its host (free page reporting) every
 * page the cache takes anew costs a fault: a growing log there ran at a third
 * to a half of its rate after its first gigabyte (docs/benchmarks.md, "The
 * page cache dropped behind the durable end"). A reader within that distance
 * of the end (a SIEM shipper tailing the file) finds its pages cached; one
 * further behind reads them from disk. -EINVAL below AUDITLOG_DROP_BEHIND_MIN
 * (1 MiB), except 0. */
#define AUDITLOG_DROP_BEHIND_MIN (UINT64_C(1) << 20)
AUDITLOG_API int auditlog_config_set_drop_behind_bytes(struct auditlog_config *cfg, uint64_t bytes);
/* A tail record more than this far in the future is untrusted (seconds; default 600). */
AUDITLOG_API int auditlog_config_set_future_tolerance_s(struct auditlog_config *cfg, uint64_t seconds);
/* Group commit's one bounded wait (microseconds, 0..AUDITLOG_ASYNC_COALESCE_MAX_US;
 * 0 = off, the default). A batch holding only records of auditlog_record()
 * may wait until `us` have passed since its first record was enqueued, so
 * that records arriving in that window share its write and fdatasync. It
 * never waits once a record_sync() or a flush() is queued, nor while the log
 * closes: those commit at once, and no caller waiting for durability is ever
 * delayed by the window. It commits at once as well when the records queued
 * might fill a batch (max_batch_bytes at the longest line, or half the queue).
 * Cost: on power loss, an auditlog_record() that returned may be lost if it
 * was enqueued within the window plus one fdatasync before the loss (without
 * coalescing: within one fdatasync). docs/durability.md. -EINVAL above the
 * maximum. */
#define AUDITLOG_ASYNC_COALESCE_MAX_US 1000000u
AUDITLOG_API int auditlog_config_set_async_coalesce_us(struct auditlog_config *cfg, uint64_t us);

/* Format v2, in-process sealing (for single-user deployments: the writing
 * process holds the keys; docs/format.md 17, 22): the sealing state file
 * (made by auditlog-keygen, advanced by the writer as epochs pass) and the
 * checkpoint signing key file. Both paths are copied. auditlog_open() with
 * format version 2 and no sealing answers -EINVAL.
 *
 * Both files must be regular files, not symbolic links, that neither group
 * nor others may access (mode 0600 or stricter); their host ids must agree.
 * The state's directory must be writable by the writer: each epoch advance
 * writes a new state file there (O_EXCL, fdatasync, rename over, directory
 * fsync) before that epoch's key is used, never a lower epoch than the file
 * holds, under an OFD lock on "<state>.lock" beside it, so several
 * processes may share one state. Keep that directory out of backups and
 * snapshots: a copy of the state taken at epoch e forges every epoch >= e.
 * What is sealed when, and what it costs: docs/durability.md "Format v2". */
AUDITLOG_API int auditlog_config_set_sealing(struct auditlog_config *cfg, const char *state_path,
					    const char *signing_key_path);
/* Format v2 with auditlog-sealer (several users' programs on one host:
 * docs/sealer.md, docs/keys.md "Deployments"): the sealer, listening on the
 * UNIX socket at `path`, holds the sealing state and the signing key; this
 * process holds neither. The path is copied. Exactly one of this and
 * auditlog_config_set_sealing() with format version 2 (auditlog_open()
 * answers -EINVAL for both or neither; version 1 ignores both).
 * auditlog_open() connects: -ENOENT / -ECONNREFUSED when no sealer listens,
 * -EACCES when the sealer refuses this process's uid and gid, -EPROTO for a
 * peer that does not speak the protocol. A sealer lost later (it exited, or
 * gave no answer within 5 s) fails the log closed with -ENOTCONN (or
 * -ETIMEDOUT) at the next seal: the batch that seal would have ended is not
 * written and its records are reported failed; nothing is reopened. That is
 * the default policy; auditlog_config_set_sealer_policy() may queue instead. */
AUDITLOG_API int auditlog_config_set_sealer_socket(struct auditlog_config *cfg, const char *path);
/* What a writer sealing through auditlog-sealer does when it loses the sealer
 * (it exited, closed the connection, or gave no answer within 5 s):
 *   AUDITLOG_SEALER_FAIL_CLOSED (the default): the log fails closed as
 *     auditlog_config_set_sealer_socket() says.
 *   AUDITLOG_SEALER_QUEUE: the log stays open and nothing unsealed is
 *     written. The batch whose seal failed is held in memory, unwritten;
 *     auditlog_record() keeps accepting records into the queue (its capacity
 *     and full policy bound them); auditlog_record_sync(),
 *     auditlog_record_fields_sync() and auditlog_flush() called while the
 *     sealer is known to be away return -EAGAIN at once and enqueue nothing;
 *     a synchronous caller whose record was queued before the loss was seen
 *     waits until its record is sealed and durable. The worker reconnects
 *     with backoff (50 ms doubling to 1 s); on reconnect it checks that the
 *     sealer has the same key and is not behind the chain's last seal
 *     (otherwise the log fails closed with -ESTALE), seals the held batch
 *     with the sealer's current epoch and goes on in the same chain: an
 *     absence of two epochs or more is a `gap` for auditlog-verify. A log
 *     closed while the sealer is away fails what is queued (-ENOTCONN).
 * Stats: sealer_* in struct auditlog_stats. docs/sealer.md section 2,
 * docs/durability.md "With a sealer". 0, or -EINVAL for another value.
 * In-process sealing ignores it. */
#define AUDITLOG_SEALER_FAIL_CLOSED 0u
#define AUDITLOG_SEALER_QUEUE 1u
AUDITLOG_API int auditlog_config_set_sealer_policy(struct auditlog_config *cfg, unsigned policy);
/* v2: a signed checkpoint record every `records` records or `ms` milliseconds,
 * whichever comes first (0 turns one off, not both; default 100000 and 1000),
 * and always at close. */
AUDITLOG_API int auditlog_config_set_checkpoint_interval(struct auditlog_config *cfg,
							 uint64_t records, uint64_t ms);

/* ---- events ---------------------------------------------------------------
 * An event is a parameter block the caller fills and keeps ownership of; the
 * library copies what it needs before auditlog_record*() returns. Zero-init it
 * ({0}) so that absent members are absent. Strings are (pointer, length),
 * need not be NUL-terminated nor valid UTF-8 (invalid bytes become U+FFFD);
 * a NULL pointer or a zero length means absent. Long values are cut as
 * docs/format.md says.
 *
 * A call that uses two keys (a derivation: base and derived key; a wrap:
 * wrapping and wrapped key; an unwrap: unwrapping and new key) names the
 * first in key_label/key_id and the second in key2_label/key2_id
 * (docs/format.md 2.2), and sets AUDITLOG_EV_KEY2. The key2 members were
 * appended to the struct after its first release: the library reads them
 * only when AUDITLOG_EV_KEY2 is set, so a program built against the older,
 * shorter struct (which never sets the bit) is read as before; a library
 * older than the members refuses the bit with -EINVAL. A log
 * line with key2 members is refused as not canonical by verifiers built
 * before them.
 */

enum auditlog_outcome {
	AUDITLOG_OUTCOME_SUCCESS = 0,
	AUDITLOG_OUTCOME_FAILURE = 1,
	AUDITLOG_OUTCOME_UNKNOWN = 2
};

#define AUDITLOG_EV_RV (1u << 0)        /* rv is set (a CK_RV) */
#define AUDITLOG_EV_MECHANISM (1u << 1) /* mechanism is set (a CK_MECHANISM_TYPE) */
#define AUDITLOG_EV_SLOT (1u << 2)      /* slot is set */
#define AUDITLOG_EV_SESSION (1u << 3)   /* session is set */
#define AUDITLOG_EV_KEY2 (1u << 4)      /* key2_label/key2_id are valid (may still be absent) */

struct auditlog_event {
	uint32_t flags;   /* AUDITLOG_EV_* */
	uint32_t outcome; /* enum auditlog_outcome */
	uint64_t rv;        /* written as its CKR_* name, or 0x%08lx */
	uint64_t mechanism; /* written as its CKM_* name, or 0x%08lx */
	uint64_t slot;      /* at most 2^53-1 */
	uint64_t session;   /* at most 2^53-1 */
	const char *action; /* required, e.g. "C_Sign" */
	size_t action_len;
	const char *key_label;
	size_t key_label_len;
	const void *key_id; /* raw CKA_ID bytes, written as hex */
	size_t key_id_len;
	const char *actor;
	size_t actor_len;
	const char *detail;
	size_t detail_len;
	/* read only with AUDITLOG_EV_KEY2 (appended: see above) */
	const char *key2_label; /* the second key's CKA_LABEL */
	size_t key2_label_len;
	const void *key2_id; /* the second key's raw CKA_ID bytes, written as hex */
	size_t key2_id_len;
};

/* ---- the log ------------------------------------------------------------- */

/* Open (or create) the log at cfg's path, recover its tail if a crash left it
 * damaged, and start the worker. Returns:
 *   -EBUSY    another writer holds the log's lock
 *   -ELOOP    the path is a symbolic link
 *   -EINVAL   bad config, or the path is not a regular file
 *   -EMLINK   the file has more than one hard link
 *   -EBADMSG  the tail is damaged beyond what may be repaired (docs/format.md 7)
 *   -EPROTO   the configured version is lower than the log's last record
 * and with format version 2 and sealing (auditlog_config_set_sealing):
 *   -ESTALE   the sealing state's epoch is below that of the last seal at the
 *             log's tail (a state replaced by an older copy)
 *   -ELOOP    a key file is a symbolic link
 *   -EINVAL   a key file is not a regular file, not exactly its format
 *             (docs/format.md 17), or the two files name different hosts
 *   -EPERM    a key file's mode lets group or others in (mode & 077)
 *   -EFBIG    a key file far larger than its format allows
 *   -ERANGE   the sealing key is exhausted (docs/format.md 17.2 rule 4)
 *   -EBADMSG  also: no tree or checkpoint record within the bounded tail
 *             (docs/format.md 20.4), so the tree cannot be continued in O(1)
 *   other -errno from the system.
 * Nothing is written to the log when the key files are refused. Later, a
 * seal step that fails (the state file cannot be advanced: -EIO, -ENOSPC...;
 * another key put in its place: -ESTALE; the key exhausted: -ERANGE) fails
 * the log closed with that error, and the batch it would have sealed is not
 * written: its records are reported failed, never written unsealed. A v2 log
 * opens with one synchronous batch ending in an `open` seal, and
 * auditlog_close() ends it with a checkpoint and a `close` seal.
 */
AUDITLOG_API int auditlog_open(const struct auditlog_config *cfg, struct auditlog **ret_log);

/* Enqueue an event and return; it is written by the next batch. The calling
 * thread decodes the event and renders its line's members first (on a v2 log
 * it also hashes them), using about 28 KiB of its stack; the worker only
 * numbers, chains and writes it. Never drops:
 * a full queue blocks or returns -EAGAIN as configured. -EINVAL for a bad
 * event (no action, outcome out of range, slot/session above 2^53-1),
 * -ENOMEM when a long string could not be copied, and once the log has failed
 * closed, the error that closed it (e.g. -EIO, -ENOSPC; -ENOENT: its file
 * was deleted, or its directory, while it was open; -ENODATA: its file was
 * truncated while it was open: docs/durability.md "When the disk fails").
 * -ECHILD in a process forked from the one that opened the log: a child
 * never uses its parent's log (docs/sealer.md section 2). Thread-safe. */
AUDITLOG_API int auditlog_record(struct auditlog *log, const struct auditlog_event *ev);

/* Like auditlog_record(), then wait until this event's batch and every
 * earlier batch are written and fdatasync'ed. Returns 0 only then; a negative
 * errno means the event was not made durable by this call (docs/durability.md
 * says what happens to it). -EAGAIN at once, nothing enqueued, while an
 * AUDITLOG_SEALER_QUEUE log's sealer is away (auditlog_config_set_sealer_policy).
 * Thread-safe. */
AUDITLOG_API int auditlog_record_sync(struct auditlog *log, const struct auditlog_event *ev);

/* ---- caller-defined fields (format v2) -------------------------------------
 * Up to AUDITLOG_FIELDS_MAX (key, value) pairs an application adds to an
 * event, written after its fixed members (docs/format.md 14): e.g.
 *   struct auditlog_field f[] = {
 *       {.key = "user.name", .kind = AUDITLOG_FIELD_STR, .str = name, .str_len = n},
 *       {.key = "attempt", .kind = AUDITLOG_FIELD_INT, .u = 3},
 *   };
 * The array may be in any order (the line has them sorted by key, bytewise)
 * and stays the caller's: everything is copied before the call returns.
 */

#define AUDITLOG_FIELD_STR 1u /* .str / .str_len: a string */
#define AUDITLOG_FIELD_INT 2u /* .u: an integer, 0 .. 2^53-1 */
#define AUDITLOG_FIELDS_MAX 16u

struct auditlog_field {
	/* NUL-terminated, matching [a-z][a-z0-9_]{0,31}(\.[a-z][a-z0-9_]{0,31}){0,3}
	 * and none of the member names docs/format.md defines (14.1 lists them:
	 * "actor", "detail", "session", "seq", ...). */
	const char *key;
	uint32_t kind;     /* AUDITLOG_FIELD_STR or AUDITLOG_FIELD_INT */
	const char *str;   /* STR: any bytes, as an event's strings: (str, str_len), need
			    * not be UTF-8 nor NUL-terminated; repaired, escaped, and cut
			    * with the marker when over 256 escaped bytes; empty (NULL or
			    * length 0) means the field is left out of the line */
	size_t str_len;
	uint64_t u;        /* INT: the value. The member of the other kind is ignored. */
};

/* auditlog_record() with caller-defined fields, n entries of `fields` (n = 0:
 * exactly auditlog_record(); fields may then be NULL). The whole call is
 * refused, and nothing queued, when anything is wrong:
 *   -EINVAL      as auditlog_record(), or fields NULL with n > 0, n above
 *                AUDITLOG_FIELDS_MAX, a NULL key, an unknown kind, a key that
 *                breaks the pattern or is a member name, two entries with the
 *                same key (even when one is empty), an integer above 2^53-1,
 *                str NULL with str_len > 0
 *   -E2BIG       the fields written as JSON (each ,"key":value) exceed 2048 bytes
 *   -EOPNOTSUPP  n > 0 on a log that writes format v0 or v1 (fields exist only
 *                in v2 records: auditlog_config_set_format_version())
 * otherwise as auditlog_record() (-EAGAIN, -ENOMEM, the log's error). The
 * calling thread decodes, renders and hashes the event as auditlog_record()
 * says. Thread-safe. */
AUDITLOG_API int auditlog_record_fields(struct auditlog *log, const struct auditlog_event *ev,
					const struct auditlog_field *fields, size_t n);

/* The same, then wait as auditlog_record_sync() does. Thread-safe. */
AUDITLOG_API int auditlog_record_fields_sync(struct auditlog *log, const struct auditlog_event *ev,
					     const struct auditlog_field *fields, size_t n);

/* Wait until everything enqueued before this call is durable. -EAGAIN and
 * -ECHILD as auditlog_record_sync(). Thread-safe. */
AUDITLOG_API int auditlog_flush(struct auditlog *log);

/* Drain the queue, sync, stop the worker, close the file, free the handle.
 * Returns 0, or the first error the log met. NULL is a no-op returning 0.
 * No other call may be running on or follow this handle. In a forked child
 * it frees the child's copy of the handle only, writes nothing, and returns
 * -ECHILD. */
AUDITLOG_API int auditlog_close(struct auditlog *log);

/* ---- inspection ---------------------------------------------------------- */

struct auditlog_stats {
	uint64_t events_enqueued;    /* accepted by record()/record_sync() */
	uint64_t events_written;     /* made durable (event records) */
	uint64_t events_failed;      /* could not be made durable (log failed closed) */
	uint64_t records_written;    /* all records made durable, headers included */
	uint64_t batches;            /* batches made durable */
	uint64_t bytes_written;      /* bytes made durable */
	uint64_t fsyncs;             /* completed fdatasync calls */
	uint64_t largest_batch;      /* records in the largest batch */
	uint64_t queue_high_water;   /* most events queued at once (approximate) */
	uint64_t write_errors;       /* failed writes */
	uint64_t fsync_errors;       /* failed fdatasyncs */
	uint64_t enospc_retries;     /* ENOSPC retries */
	uint64_t short_writes;       /* writes the kernel cut short (completed by the worker) */
	uint64_t rotations;          /* files rotated by size or age */
	uint64_t failovers;          /* files sealed after an I/O error */
	uint64_t recoveries;         /* recovery records written at open */
	uint64_t untrusted_restarts; /* new chains started over an untrusted tail */
	uint64_t head_seq;           /* seq of the durable head */
	uint8_t head_hash[32];       /* hash of the durable head */
	int32_t error;               /* 0, or the -errno that closed the log */
	uint32_t backend;            /* enum auditlog_backend actually running */
	uint64_t inline_batches;     /* io_uring backend: lone small batches committed with
				      * pwrite+fdatasync in the worker (docs/durability.md) */
	uint64_t coalesced_batches;  /* batches that waited for auditlog_config_set_async_coalesce_us */
	uint64_t coalesce_wait_ns;   /* their total wait (nanoseconds) */
	/* v2 seal step (appended; docs/sealer.md section 2): */
	uint64_t sealer_requests;    /* seal and checkpoint-signature requests made */
	uint64_t sealer_errors;      /* of them failed, and failed reconnection attempts */
	uint64_t sealer_reconnects;  /* AUDITLOG_SEALER_QUEUE: connections re-established */
	uint64_t sealer_wait_ns;     /* total time the worker waited for those answers */
	uint64_t sealer_away;        /* 1 while a QUEUE writer has no sealer, else 0 */
	/* (appended) */
	uint64_t caller_commits;     /* batches a record_sync caller committed on its own
				      * thread, the worker asleep (docs/durability.md) */
	/* (appended) */
	uint64_t fence_free_publish; /* 1 while producers publish without a memory fence,
				      * the worker's membarrier() standing for it; 0 where
				      * the kernel refuses that call (docs/durability.md) */
	/* (appended) */
	uint64_t batches_ahead;      /* batches formed while two were being written, each
				      * written as soon as the older one completed: how often
				      * the disk, not the worker, set the pace (docs/durability.md) */
	/* (appended) */
	uint64_t cache_drops;        /* page-cache drops asked behind the durable end
				      * (auditlog_config_set_drop_behind_bytes) */
	/* (appended) */
	uint64_t queue_lanes;        /* the queue's lanes (auditlog_config_set_queue_lanes) */
};

/* Copy a snapshot of the counters. size = sizeof(struct auditlog_stats) of
 * the caller (fields beyond it are not written). Thread-safe. */
AUDITLOG_API int auditlog_get_stats(struct auditlog *log, struct auditlog_stats *ret_stats, size_t size);

/* "io_uring" or "pwrite". */
AUDITLOG_API const char *auditlog_backend_name(enum auditlog_backend b);

/* Name of a PKCS#11 return value or mechanism, NULL when the library knows none. */
AUDITLOG_API const char *auditlog_ckr_name(uint64_t rv);
AUDITLOG_API const char *auditlog_ckm_name(uint64_t mechanism);

/* ---- verification -------------------------------------------------------------
 * The verifier's engine, the same code auditlog-verify runs: walks log files
 * (several, rotated sets, v0 and v1 records mixed), groups them into chains by
 * chain_id, orders each chain by its headers' links, checks every record, and
 * reports every problem with file, line, byte offset and seq, classified as
 * docs/format.md section 11 says. Streams each file, or bytes fed to it:
 * memory does not grow with the log. A v0/v1 chain cannot show a recomputed tail without an
 * expected head (auditlog_verifier_set_expect_head): an intact verdict without
 * one does not rule that out.
 *
 * A verifier is not thread-safe; distinct verifiers are independent.
 */

enum auditlog_vclass {
	AUDITLOG_V_MODIFIED = 0,    /* a record's hash does not follow from its predecessor */
	AUDITLOG_V_INSERTED = 1,    /* a record that cannot belong where it is */
	AUDITLOG_V_DELETED = 2,     /* a seq gap: records missing */
	AUDITLOG_V_DUPLICATED = 3,  /* a record seen before, again */
	AUDITLOG_V_REORDERED = 4,   /* seq or time goes backwards */
	AUDITLOG_V_NONCANONICAL = 5,/* valid JSON, not the canonical line */
	AUDITLOG_V_UNPARSEABLE = 6, /* not a JSON object line */
	AUDITLOG_V_VERSION = 7,     /* unknown or decreasing version, or below the minimum */
	AUDITLOG_V_MISSING_FILE = 8,/* a file the chain needs is not among the inputs */
	AUDITLOG_V_FORKED = 9,      /* two files continue the same record */
	AUDITLOG_V_TRUNCATED = 10,  /* the chain ends before what something names */
	AUDITLOG_V_RECOVERED = 11,  /* crash damage a recovery record names (informational) */
	AUDITLOG_V_UNANCHORED = 12, /* expected heads were given, none for this chain */
	AUDITLOG_V_EXTRA_CHAIN = 13,/* more than one chain where one was demanded */
	/* v2 (docs/format.md 23) */
	AUDITLOG_V_BAD_SEAL = 14,   /* a seal's MAC, epoch, chain id or open link is wrong */
	AUDITLOG_V_GAP = 15,        /* seals more than one epoch apart (integrity only if strict) */
	AUDITLOG_V_UNSEALED = 16,   /* complete records after a chain's last seal */
	AUDITLOG_V_UNKNOWN_KEY = 17,/* a seal by a key id no verification key given has */
	AUDITLOG_V_CLOCK = 18,      /* a timestamp far outside its seal's epoch (a notice) */
	AUDITLOG_V_UNSIGNED_TAIL = 19, /* records after the last checkpoint (a notice) */
	AUDITLOG_V_BAD_CHECKPOINT = 20, /* a checkpoint or tree record that is not the chain's */
	AUDITLOG_V_MISSING_CHAIN = 21,  /* a witnessed chain absent from the inputs */
	AUDITLOG_V_REWRITTEN = 22,  /* a witnessed checkpoint the chain no longer holds */
	AUDITLOG_V_SHIPPER_DUPLICATE = 23, /* with dedup: a shipper's repeat of a verified line (a notice) */
	AUDITLOG_V_SAME_FILE = 24,  /* one file given under two names (a hard link): read once (a notice) */
	AUDITLOG_V__COUNT = 25
};

/* One finding, passed to the on_finding callback (valid during the call). */
struct auditlog_finding {
	uint32_t cls;     /* enum auditlog_vclass */
	uint32_t has_seq; /* seq is set */
	const char *file; /* the path as added */
	uint64_t line;    /* 1-based; 0 when not about one line */
	uint64_t offset;  /* byte offset in the file */
	uint64_t seq;
	const char *msg;  /* what exactly, in words (bytes from the log may appear:
			   * escape them before a terminal) */
};

/* What a run found. Fields are only ever appended. */
struct auditlog_vsummary {
	uint64_t files, chains, records, bytes;
	uint64_t findings[32];       /* per enum auditlog_vclass */
	uint64_t integrity_findings; /* findings that make the verdict "not intact" */
	/* v2: seals and checkpoints met; of them, the MACs checked (with a
	 * verification key) and the signatures checked (with a public key);
	 * records after the chains' last checkpoints (with a public key); lines
	 * on_record never got because no proof covered them (keys given) */
	uint64_t seals, checkpoints, seals_checked, checkpoints_checked, unsigned_tail, pending;
	uint32_t have_verify_key, have_pubkey; /* 1 when one was given */
};

/* One chain of the inputs. Fields are only ever appended. */
struct auditlog_vchain {
	char chain_id[33];             /* 32 hex digits */
	uint32_t files;
	uint64_t records, events;
	uint64_t first_seq, last_seq;
	uint8_t head_hash[32];         /* the hash of last_seq's record */
	char first_ts[31], last_ts[31]; /* RFC 3339 */
	uint32_t min_version, max_version;
	uint64_t seals, checkpoints;   /* v2 records of those types */
	uint64_t unsigned_tail;        /* with a public key: records after the last checkpoint */
	uint64_t tree_size;            /* leaves of the chain's Merkle tree the walk reached */
};

struct auditlog_verifier; /* opaque */

AUDITLOG_API int auditlog_verifier_new(struct auditlog_verifier **ret_v);
AUDITLOG_API void auditlog_verifier_free(struct auditlog_verifier *v);
/* A log file, or a directory whose regular files (not dot files) are taken.
 * A directory is taken whole: a file a writer renamed in it after it was
 * listed (a rotation), which a file read from it names as its predecessor,
 * is read too (docs/auditlog-verify.md, "Description").
 * 0, -ENOENT and the like from stat/opendir, -ENOMEM. */
AUDITLOG_API int auditlog_verifier_add_path(struct auditlog_verifier *v, const char *path);
/* Instead of files: a stream, the bytes of a log fed in order with
 * auditlog_verifier_feed (a pipe, a SIEM's copy of the trail). One chain; a
 * header that links to the record before it (the next file of a rotated
 * set, concatenated in order) starts a new segment whose link is checked as
 * a file's. Findings name the stream `name` (file), with line numbers and
 * offsets counted in the stream. Memory stays constant. -EINVAL once a path
 * was added, or a second time. (A file sealed after a write error is not
 * cut at the size its successor records, as it is among files: see
 * docs/auditlog-verify.md.) */
AUDITLOG_API int auditlog_verifier_add_stream(struct auditlog_verifier *v, const char *name);
/* The stream's next len bytes, in pieces of any size: a line with its
 * newline, or whatever a read() returned. Findings are reported (and
 * verified lines passed to on_record) as lines complete, during the call.
 * The first feed fixes the settings: the set_* calls answer -EBUSY after
 * it. _run then ends the stream (a last line without its newline is a
 * truncated finding) and fills the summary. 0, -EINVAL (no stream added,
 * or after _run), -ENOMEM. */
AUDITLOG_API int auditlog_verifier_feed(struct auditlog_verifier *v, const void *buf, size_t len);
/* Report every record below this version (default 0). */
AUDITLOG_API int auditlog_verifier_set_min_version(struct auditlog_verifier *v, unsigned version);
/* Count recovered crash damage as an integrity finding (default: informational). */
AUDITLOG_API int auditlog_verifier_set_strict(struct auditlog_verifier *v, int strict);
/* The head exported elsewhere: the chain must reach seq with this hash. */
AUDITLOG_API int auditlog_verifier_set_expect_head(struct auditlog_verifier *v, uint64_t seq,
						   const uint8_t hash[32]);
/* An expected head of one chain: chain_id is its 32 lowercase hex digits, or
 * NULL for the chain the live file is in (the only chain; among several the
 * one whose last file has the writer's active name; as auditlog-verify's
 * --expect-head without an id). Once per chain (set_expect_head is this with
 * NULL, replacing). With any anchor given, a chain that has none is an
 * integrity finding (AUDITLOG_V_UNANCHORED). 0, -EINVAL (a bad id or hash, a
 * second anchor for the same chain), -ENOMEM, -EBUSY. */
AUDITLOG_API int auditlog_verifier_add_expect_head(struct auditlog_verifier *v, const char *chain_id,
						   uint64_t seq, const uint8_t hash[32]);
/* More than one chain (with records) among the inputs is an integrity finding
 * (AUDITLOG_V_EXTRA_CHAIN); default off. The summary counts chains either way. */
AUDITLOG_API int auditlog_verifier_set_one_chain(struct auditlog_verifier *v, int on);
/* For a central copy a shipper (RELP after a reconnect) may repeat lines in:
 * a line byte-identical to one of the last 64 records the walk saw in this
 * chain (a replayed range of them too) is AUDITLOG_V_SHIPPER_DUPLICATE, not an
 * integrity finding, counted and skipped (the chain goes on from where it
 * was); any other repeat is as without it (duplicated, inserted, reordered).
 * Default off. 0, -EINVAL (no verifier), -EBUSY (after the first feed). */
AUDITLOG_API int auditlog_verifier_set_dedup(struct auditlog_verifier *v, int on);
/* Start at a record verified before (a checkpoint): files wholly before it are
 * not read, records before it not checked; it must carry this hash. */
AUDITLOG_API int auditlog_verifier_set_from(struct auditlog_verifier *v, uint64_t seq,
					    const uint8_t hash[32]);
AUDITLOG_API int auditlog_verifier_set_on_finding(struct auditlog_verifier *v,
						  void (*cb)(void *ctx, const struct auditlog_finding *f),
						  void *ctx);
/* Each line that verified, in chain order, without its newline. With v2 keys
 * given, a v2 line is passed on only once the proofs those keys check cover
 * it: the seal after it verified (a verification key) and a checkpoint after
 * it verified (a public key); lines a failed proof covers, and those after
 * the last proof, are never passed on (the summary's `pending`). */
AUDITLOG_API int auditlog_verifier_set_on_record(struct auditlog_verifier *v,
						 void (*cb)(void *ctx, const char *line, size_t len),
						 void *ctx);
/* Threads that check large files (several MiB) ahead of the walk: 0, the
 * default, one per CPU the process may run on; 1 none. At most 1024. The
 * findings, and the records passed to on_record (in order, by the calling
 * thread), are the same with any number. Not used on a stream. */
AUDITLOG_API int auditlog_verifier_set_threads(struct auditlog_verifier *v, unsigned threads);
/* v2 keys (docs/format.md 17), as the bytes of their files (the caller reads
 * them; a key is never a command-line argument). Each may be given several
 * times, once per key id or host; they must come before the first feed.
 *
 * A verification key file (17.1, the auditor's secret): every seal of its key
 * id is checked (MAC, epoch sequence, chain id, the open seal's link); a seal
 * by a key id none has is AUDITLOG_V_UNKNOWN_KEY; a timestamp more than one
 * epoch outside its seal's epoch is AUDITLOG_V_CLOCK (a notice); every record
 * dated at or after the earliest t0 of the keys given must be v2
 * (AUDITLOG_V_VERSION). Without one, seals are checked for structure only.
 * 0, -EINVAL (not such a file, or a second key with the same key id),
 * -EBADMSG (its key id does not match its seed and parameters), -ENOMEM,
 * -EBUSY. The key is wiped when the verifier is freed. */
AUDITLOG_API int auditlog_verifier_add_verify_key(struct auditlog_verifier *v, const void *buf, size_t len);
/* A checkpoint public key file (17.3, "auditlog-checkpoint-key 2"): every
 * checkpoint of a chain of its host must carry a valid signature of it and
 * be exactly the chain's tree (AUDITLOG_V_BAD_CHECKPOINT otherwise); records
 * after a chain's last checkpoint are AUDITLOG_V_UNSIGNED_TAIL (a notice,
 * with their count). 0, -EINVAL (not such a file, or a second key of the
 * same host), -ENOMEM, -EBUSY. */
AUDITLOG_API int auditlog_verifier_add_pubkey(struct auditlog_verifier *v, const void *buf, size_t len);
/* A witness file (docs/format.md 20.5: signed checkpoint notes kept outside
 * the log, concatenated). For each note, the chain its origin names must hold
 * a tree of that size with that root (AUDITLOG_V_REWRITTEN otherwise), reach
 * that size (AUDITLOG_V_TRUNCATED) and be among the inputs
 * (AUDITLOG_V_MISSING_CHAIN); with a public key of the origin's host, a note
 * it did not sign is AUDITLOG_V_BAD_CHECKPOINT and not compared. Findings
 * name the file "witness N" (N: the call's rank, from 1). 0, -EINVAL (not
 * that format: nothing of it is kept), -ENOMEM, -EBUSY. */
AUDITLOG_API int auditlog_verifier_add_witness(struct auditlog_verifier *v, const void *buf, size_t len);
/* The registry of auditlog-sealer (docs/format.md 26): its log file, or the
 * directory of its files (the sealer's --registry DIR), read at
 * auditlog_verifier_run, after the inputs. It is verified as one chain with
 * the verification and public keys given (its findings name its files); then
 * every chain its verified records name must be among the inputs
 * (AUDITLOG_V_MISSING_CHAIN), reach its registered close
 * (AUDITLOG_V_TRUNCATED; a chain ending at that seq with another hash:
 * AUDITLOG_V_MODIFIED) and the first seal of a still-open segment
 * (AUDITLOG_V_TRUNCATED); one that ends before the last seal of a lost
 * writer's segment is AUDITLOG_V_GAP (integrity only when strict). Findings
 * about the comparison name the path as given. Once per verifier. 0, -EINVAL
 * (no path, or a second one), -ENOMEM, -EBUSY (after a stream's first feed).
 * auditlog_verifier_run answers -ENOENT (and other -errno) when the registry
 * cannot be read. */
AUDITLOG_API int auditlog_verifier_add_registry(struct auditlog_verifier *v, const char *path);
/* A witness's public key (an auditlog-keygen public key file, 17.3: its
 * host id is the witness's name, the cosignature's key name; docs/format.md
 * 20.6). With one or more given, a witnessed note is compared only when one
 * of them cosigned it (C2SP tlog-cosignature/v1: key id, time, Ed25519 over
 * "cosignature/v1\ntime <t>\n" and the note's text); a note without such a
 * cosignature, or with a cosignature line of one of them that does not
 * verify, is AUDITLOG_V_BAD_CHECKPOINT ("not trusted as witnessed") and not
 * compared. Any one of the keys suffices. 0, -EINVAL (not such a file, or a
 * second key of the same name), -ENOMEM, -EBUSY. */
AUDITLOG_API int auditlog_verifier_add_witness_key(struct auditlog_verifier *v, const void *buf, size_t len);
/* Verify everything added. Returns 0 when it ran (the verdict is in the
 * summary: intact when integrity_findings is 0 and records is not: no
 * record verified proves nothing, which auditlog-verify calls "empty"),
 * or -errno when an input could not be read. size = sizeof(struct auditlog_vsummary) of the caller.
 * May be called once per verifier. */
AUDITLOG_API int auditlog_verifier_run(struct auditlog_verifier *v, struct auditlog_vsummary *ret,
				       size_t size);
/* Chain i (0 <= i < summary.chains) of the last run. -ERANGE beyond. */
AUDITLOG_API int auditlog_verifier_chain(struct auditlog_verifier *v, unsigned i,
					 struct auditlog_vchain *ret, size_t size);
/* "modified", "inserted", ...; NULL for an unknown class. */
AUDITLOG_API const char *auditlog_vclass_name(uint32_t cls);

#ifdef __cplusplus
}
#endif
#endif /* AUDITLOG_H */
