/* SPDX-License-Identifier: MIT */
/*
 * Crash recovery's one rule (docs/format.md 7 and 2.4), shared by the
 * writer's open (file.c: the tail scan) and the verifier (verify.c): does a
 * recovery record repair the damage that starts right after a record? Pure:
 * the caller supplies the bytes through two callbacks.
 */
#ifndef AUDITLOG_RECOVERY_H
#define AUDITLOG_RECOVERY_H

#include <stdbool.h>
#include <stdint.h>

#include "format.h"
#include "format_v2.h"

/* The longest damage a writer repairs: its tail window at the largest
 * max_batch_bytes (2 batches in flight x 64 MiB + 8 KiB). */
#define AL_RECOVERY_MAX ((UINT64_C(2) << 26) + 8192u)

/* The last intact record before the damage. */
struct al_tailrec {
	uint64_t seq;
	uint8_t hash[AL_HASH_LEN];
	char ts[AL_TS_LEN];
	uint8_t version;
	uint8_t type; /* its record type: v2 damage starts only after a seal or a header */
};

/* The bytes of the file the damage is in, for al_recovery_repairs:
 * sha: SHA-256 of the len bytes from offset off into out (false: unreadable);
 * byte: the byte at off, or -1. */
struct al_recovery_io {
	bool (*sha)(void *ctx, uint64_t off, uint64_t len, uint8_t out[AL_HASH_LEN]);
	int (*byte)(void *ctx, uint64_t off);
	void *ctx;
};

/* Bytes held in memory: [start, start + n) of the file, at buf. */
struct al_recovery_mem {
	const uint8_t *buf;
	uint64_t start;
	size_t n;
};

/* An al_recovery_io that reads m (which must outlive its use). */
struct al_recovery_io al_recovery_mem_io(const struct al_recovery_mem *m);

/* Is p (its line: `line`, at file offset line_off) the recovery record that
 * repairs damage starting at damage_off, right after record t? Exactly when:
 * it is a recovery record; seq t.seq + 1, last_seq t.seq, damage_offset
 * damage_off; 1 <= damage_length <= AL_RECOVERY_MAX; its line starts right
 * after the damage (the damage ends in '\n'), or one byte later when that byte
 * is the '\n' the writer added to damage that does not; version and timestamp
 * do not go back; it chains from t's hash; and damage_sha256 is the SHA-256 of
 * the damaged bytes. When t is a v2 record, it must be a seal (the end of a
 * committed batch) or a header (a file's first line, whose first batch a
 * crash cut before its seal): docs/format.md 19.5. work: AL_HASH_LEN + AL_BODY_MAX bytes. */
bool al_recovery_repairs(const struct al_parsed *p, const uint8_t *line, uint64_t line_off,
			 uint64_t damage_off, const struct al_tailrec *t, const struct al_recovery_io *io,
			 uint8_t *work);

/* May honest crash damage start right after a record of this version and
 * type? Always in v0/v1; in v2 only after a seal (the end of a committed
 * batch) or a header (a file's first line, whose first batch a crash cut
 * before its seal): complete lines after the last seal were never
 * acknowledged (docs/format.md 19.5). The one statement of that rule, for
 * the writer's open and the verifier. */
static inline bool al_recovery_may_follow(uint8_t version, uint8_t type)
{
	return version < 2 || type == AL_T_SEAL || type == AL_T_HEADER;
}

/* True when a file of `size` bytes starting with buf (all of it, or its
 * first AL_LINE_MAX bytes) is what a crash leaves while a chain's first
 * header is written: shorter than a line, no complete line, only NULs or
 * the start of a header. Nothing in it was ever acknowledged (docs/format.md
 * 7: the writer renames it aside; the verifier reports it recovered). */
bool al_torn_first_header(const uint8_t *buf, uint64_t size);

/* Cheap pre-check on a line's first bytes: might it be a recovery record? */
bool al_maybe_recovery(const uint8_t *line, size_t len);

#endif
