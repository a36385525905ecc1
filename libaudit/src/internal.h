/* SPDX-License-Identifier: MIT */
/*
 * Internal seams of libauditlog, for its own tests (linked against the
 * static library). Nothing here is exported from libauditlog.so.
 */
#ifndef AUDITLOG_INTERNAL_H
#define AUDITLOG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auditlog.h"

/*
 * I/O hooks: every write, fdatasync and read the library makes on a log file
 * passes through them, on both backends, so that tests can count calls,
 * inject -EIO/-ENOSPC or a short write at the Nth call, and model power loss
 * (which bytes a completed fdatasync covered). Called from the thread that
 * does the I/O (the worker, or the caller of auditlog_open()).
 */
struct al_io_hooks {
	void *ctx;
	/* Before a write of len bytes at off. Return -errno to fail it without
	 * any I/O, or shorten *len to make the kernel write less (a short write). */
	int (*before_write)(void *ctx, int fd, uint64_t off, size_t *len);
	/* After the write completed: res = bytes written or -errno. */
	void (*after_write)(void *ctx, int fd, uint64_t off, size_t len, long res);
	/* Before an fdatasync that covers a batch written at [off, off+len). */
	int (*before_fsync)(void *ctx, int fd, uint64_t off, size_t len);
	void (*after_fsync)(void *ctx, int fd, uint64_t off, size_t len, int res);
	/* Before a read (open reads only the head line and the tail; the
	 * writer, the byte before a batch: writer.c, file_check()). */
	void (*before_read)(void *ctx, int fd, uint64_t off, size_t len);
	/* Negative control for the power-loss test: pretend every fdatasync
	 * succeeded without issuing it. Never set outside that test. */
	bool skip_fsync;
	/* Never commit a lone small batch inline: send every batch through
	 * io_uring, so tests cover that path whatever the batch sizes. */
	bool force_ring;
	/* A record_sync caller took the worker's role (lead()), before it does
	 * anything with it: a test pausing here widens the window in which the
	 * worker wakes, or looks at the queue, while the role is the caller's. */
	void (*before_lead)(void *ctx);
	/* The worker offered its role (SLEEP_ANY), before it looks at the queue
	 * one last time and sleeps: the other side of the same window. */
	void (*after_offer)(void *ctx);
	/* With async_coalesce_us: the worker's coalescing decision found the
	 * queue empty, before it forms a batch (of a header, re-queued records
	 * or a v2 seal): a test recording meanwhile checks that those records
	 * still go through the decision. */
	void (*after_empty_look)(void *ctx);
	/* With lanes: a producer reserved its slot and is about to read its
	 * stamp (writer.c, stamp()): a test pausing one thread here makes the
	 * slot stay unpublished while others record, and its stamp come after
	 * theirs (a lane's order no longer the stamps'). */
	void (*before_stamp)(void *ctx);
	/* With lanes: the worker making a cut read lane i's position, before
	 * the next lane's: a test recording meanwhile, in lane i and then in
	 * another, checks that the cut holds neither. */
	void (*cut_read)(void *ctx, unsigned i);
	/* Never register for membarrier(): producers fence every publish, as
	 * on a kernel or under a seccomp filter without it. */
	bool no_membarrier;
	/* The worker's membarrier() fails, as it should never once registered:
	 * the log must switch its producers to fencing and lose no record. */
	bool membarrier_fails;
	/* Asked at the top of each worker turn: true leaves the completions that
	 * arrived unreaped for that turn (the hook should sleep a little), so a
	 * test can keep AL_INFLIGHT batches in flight while the queue fills and
	 * the worker forms the next batch ahead. */
	bool (*hold_completions)(void *ctx);
	/* At an fdatasync's completion: the result the worker acts on (res, or a
	 * -errno failing a batch whose fdatasync ran). */
	int (*fsync_result)(void *ctx, uint64_t off, size_t len, int res);
	/* The file system reports no link count (st_nlink 0 for every file, as
	 * some FUSE file systems do): the writer reads 0 wherever it reads the
	 * active file's link count (al_nlink()). */
	bool no_link_count;
};

int auditlog__config_set_io_hooks(struct auditlog_config *cfg, const struct al_io_hooks *h);

/*
 * Clock hooks (tests only): when set, the writer reads every wall-clock time
 * (record timestamps it makes itself, rotation age, the epoch schedule),
 * every CLOCK_BOOTTIME reading (epochs, idle seals, checkpoint intervals) and
 * the boot id through them, so epoch, clock-step and idle-seal tests run in
 * milliseconds. Any of the three may be NULL (the real clock is read). With
 * hooks set the worker never sleeps longer than 2 ms at a time, so a test
 * that moves its clock sees the effect promptly. Called from the worker and
 * from auditlog_open().
 */
struct al_clock_hooks {
	void *ctx;
	uint64_t (*realtime)(void *ctx);
	uint64_t (*boottime)(void *ctx);
	void (*boot_id)(void *ctx, uint8_t out[16]);
};

int auditlog__config_set_clock(struct auditlog_config *cfg, const struct al_clock_hooks *h);

/* The tail window auditlog_open() may read: inflight x max_batch + 8 KiB.
 * v2 may read one more max_batch when no tree record lies in it, and the
 * same window of the previous file when the active one's first batch lost
 * its seal (docs/format.md 19.5, 20.4): still O(1) in the log's size. */
uint64_t auditlog__tail_bound(const struct auditlog_config *cfg);

/* Batches in flight at once (write + fdatasync pairs): the tail window above
 * counts these. */
#define AL_INFLIGHT 2u
/* Batch buffers: while AL_INFLIGHT batches are being written the worker may
 * form one more, issued as soon as the oldest retires. A batch not yet issued
 * has no byte on the file, so the window above is unchanged. The buffers
 * beyond AL_INFLIGHT are allocated at their first use. */
#define AL_NBATCH 3u
#define AL_DROP_BEHIND_DEFAULT (UINT64_C(1) << 30) /* auditlog_config_set_drop_behind_bytes */

#endif
