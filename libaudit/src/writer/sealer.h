/* SPDX-License-Identifier: MIT */
/*
 * The writer's seal step (docs/format.md 17, 19, 20): one interface that both
 * sealing modes serve. The in-process provider (seal_inproc.c) holds the
 * sealing state and the checkpoint signing key in the writing process; the
 * sealer service (issue 13) answers the same calls over its socket. The
 * writer never sees a seed: it asks for the epoch, a MAC and a signature.
 *
 * All calls come from one thread at a time (auditlog_open(), then the
 * worker); a provider needs no locking of its own for the writer's sake.
 */
#ifndef AUDITLOG_SEALER_H
#define AUDITLOG_SEALER_H

#include "symbols.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "format_v2.h"
#include "keyfile.h"
#include "internal.h"

#define al_sealer_inproc_open auditlog__al_sealer_inproc_open
#define al_sealer_inproc_advance auditlog__al_sealer_inproc_advance
#define al_sealer_socket_open auditlog__al_sealer_socket_open
#define al_clock_realtime auditlog__al_clock_realtime
#define al_clock_boottime auditlog__al_clock_boottime
#define al_clock_boot_id auditlog__al_clock_boot_id
#define al_state_lock auditlog__al_state_lock

/* Where the schedule (docs/format.md 17.2 rules 1-4) stands now. */
struct al_sealer_now {
	uint32_t epoch;      /* the current epoch */
	uint64_t boot_now;   /* the CLOCK_BOOTTIME reading it was computed from (ns) */
	uint64_t boot_start; /* CLOCK_BOOTTIME at which `epoch` began ... */
	uint64_t boot_end;   /* ... and at which it ends (boot_start + delta) */
	uint64_t wall;       /* the wall clock read with it (ns since 1970) */
	uint64_t expected;   /* the wall time the state predicts (17.2 rule 3) */
	bool clock;          /* |wall - expected| > delta: a clock record may be due (21) */
};

struct al_sealer;

struct al_sealer_ops {
	/* The current epoch and when it ends, by the boot clock. Cheap (no I/O,
	 * no key work): the worker calls it at every batch and every
	 * AL_EPOCH_CHECK_EVERY records. 0, or -ERANGE once the key is exhausted
	 * (17.2 rule 4), -EINVAL for a boot clock the state cannot belong to. */
	int (*now)(struct al_sealer *s, struct al_sealer_now *ret);

	/* Seal: the writer fills s->kind, s->epoch (the epoch now() gave when
	 * the records this seal covers were formatted), s->chain_id and, for an
	 * `open` seal, has_prev/prev_seal/prev_kind; (prev, seq, ts) are the
	 * seal's own chain input (docs/format.md 19.3). The provider fills
	 * s->key_id and s->mac (has_mac) and may raise s->epoch to the epoch it
	 * actually sealed with (never lower it). Before it uses a later epoch's
	 * key it makes that epoch durable in the sealing state (17.2 rule 5), so
	 * no seal on disk is ever ahead of the state. Returns 0, -ESTALE when
	 * the key of s->epoch is gone (the state is past it), -ERANGE when the
	 * key is exhausted, or another -errno (state file I/O). */
	int (*seal)(struct al_sealer *s, struct al_v2_seal *seal, const uint8_t prev[AL_HASH_LEN],
		    uint64_t seq, const char ts[AL_TS_LEN]);

	/* Sign a checkpoint note text (docs/format.md 20.2) with the chain's
	 * Ed25519 key under the key name `name` (the origin): the complete
	 * signed note into out. Returns its length, or -E2BIG / -EINVAL / -EIO. */
	long (*sign)(struct al_sealer *s, const uint8_t *name, size_t nlen, const uint8_t *text,
		     size_t tlen, uint8_t *out, size_t cap);

	/* The log's tail holds a seal of `epoch` under key `key_id`: refuse
	 * (-ESTALE) when this provider's state is below that epoch for that key
	 * (a sealing state replaced by an older copy, 17.2 rule 5). 0 otherwise. */
	int (*check_tail)(struct al_sealer *s, const uint8_t key_id[AL_SEAL_KID_LEN], uint32_t epoch);

	/* The socket provider only (NULL in-process): after a lost sealer, a new
	 * connection and HELLO naming this provider's key id. 0; -ESTALE when
	 * the sealer answers for another key, t0, delta or host; otherwise as
	 * al_sealer_socket_open(). On failure the provider stays lost. */
	int (*reconnect)(struct al_sealer *s);

	/* Release everything; key material is cleansed. NULL-safe via al_sealer_free. */
	void (*free)(struct al_sealer *s);
};

/* Every provider starts with this (the key's public parameters). */
struct al_sealer {
	const struct al_sealer_ops *ops;
	uint8_t host[AL_SEAL_HOST_MAX]; /* host id: the checkpoint origin's first part */
	size_t host_len;
	uint8_t key_id[AL_SEAL_KID_LEN];
	uint64_t t0, delta;
};

static inline void al_sealer_free(struct al_sealer *s)
{
	if (s)
		s->ops->free(s);
}

/* How often (in records) the worker re-reads the epoch inside one batch. */
#define AL_EPOCH_CHECK_EVERY 64u

/*
 * The in-process provider: loads the sealing state file (docs/format.md 17.2)
 * and the checkpoint signing key file (17.3), whose host ids must agree.
 * Both must be regular files (not symbolic links) that neither group nor
 * others may read or write. Returns 0, or
 *   -ELOOP    a path is a symbolic link
 *   -EINVAL   not a regular file, or not exactly its format, or the two hosts differ
 *   -EPERM    a file whose mode lets group or others in (mode & 077)
 *   -EFBIG    a file far larger than its format allows
 *   -ERANGE   the key is exhausted
 *   other -errno from the system (open, read).
 * clock: the config's test hooks (or NULL). The state is advanced and made
 * durable as epochs pass (rule 5), under an OFD lock on `<state>.lock`
 * beside it, so processes sharing a state serialise; the file is re-read
 * under the lock and never replaced by a lower epoch.
 */
int al_sealer_inproc_open(const char *state_path, const char *signing_key_path,
			  const struct al_clock_hooks *clock, struct al_sealer **ret);

/* The in-process provider only (auditlog-sealer's timer): advance the state
 * to `epoch` now, durably first (as a seal of that epoch would), so the keys
 * of earlier epochs are erased even when nobody seals. 0 when the state is
 * already there or past it; otherwise as seal(). */
int al_sealer_inproc_advance(struct al_sealer *s, uint32_t epoch);

/*
 * The socket provider (seal_socket.c): the same calls answered by
 * auditlog-sealer over its UNIX socket (docs/sealer.md). Connects and says
 * hello at open: 0, or -errno from connect (-ENOENT, -ECONNREFUSED...),
 * -EACCES when the sealer refuses this process's user and group, -EPROTO for
 * an answer that is not the protocol. Afterwards a lost sealer (it exited,
 * closed the connection, or gave no answer within 5 s) makes every call
 * answer -ENOTCONN (-ETIMEDOUT for the wait), and the writer fails closed
 * or, with AUDITLOG_SEALER_QUEUE, calls reconnect(). A call made in a process
 * other than the one that opened the connection (a forked child) answers
 * -ECHILD and sends nothing.
 * now() asks the sealer once per epoch and answers from the boot clock in
 * between (no I/O). clock: the config's test hooks (or NULL): only this
 * process's readings follow them, the sealer keeps its own clock.
 */
int al_sealer_socket_open(const char *path, const struct al_clock_hooks *clock,
			  struct al_sealer **ret);

/* The clocks, through the test hooks when set (docs: internal.h). */
uint64_t al_clock_realtime(const struct al_clock_hooks *h);
uint64_t al_clock_boottime(const struct al_clock_hooks *h);
/* The kernel's boot id (/proc/sys/kernel/random/boot_id); 0 or -errno. */
int al_clock_boot_id(const struct al_clock_hooks *h, uint8_t out[16]);

/* An OFD lock on a sealing state's lock file, <state>.lock (docs/format.md
 * 17.2 rule 5): exclusive (F_WRLCK) to advance or replace the state, shared
 * (F_RDLCK) to read it while nobody replaces it. lock_path is taken under
 * dirfd (AT_FDCWD: as given); a shared lock opens an existing file read-only
 * and makes it (0600) only when there is none. Waits for the lock. Returns
 * the descriptor (closing it releases the lock) or -errno. The writer's
 * in-process mode, auditlog-sealer and auditlog-keygen all take this one. */
int al_state_lock(int dirfd, const char *lock_path, short type);

#endif
