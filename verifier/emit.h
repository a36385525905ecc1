/* SPDX-License-Identifier: MIT */
/*
 * auditlog-verify --emit --format raw|ecs|ocsf: each verified line as it is,
 * or converted to one compact ECS or OCSF JSON object (docs/siem.md 2 and 8),
 * and, with --follow --state FILE, the verifying tail's position kept in
 * FILE (docs/siem.md 9; tail_state.c).
 */
#ifndef AUDITLOG_VERIFY_EMIT_H
#define AUDITLOG_VERIFY_EMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"

enum emit_format { EMIT_RAW, EMIT_ECS, EMIT_OCSF };

/* --state: the position is also saved every EMIT_BATCH lines while the tail
 * catches up (and whenever it has caught up), so a restart repeats at most
 * that many lines. */
#define EMIT_BATCH 1024u

/* "raw", "ecs" or "ocsf": 0, or -EINVAL. */
int emit_parse_format(const char *s, enum emit_format *ret);

struct tail_state;

struct emitter {
	enum emit_format fmt;
	int fd; /* standard output */
	/* the chain's id once known (a header emitted, or the state's) */
	char chain_id[33];
	/* resuming from a state: lines up to this record were emitted before */
	bool skipping;
	uint64_t skip_seq;
	struct tail_state *tail; /* NULL without --state */
	/* --follow: the lines passed on must go seq by seq. A jump (records
	 * not passed on: a file renamed while the inputs were listed, which
	 * the engine reports as missing-file, or damage) stops the emitting
	 * (gap), so that the caller verifies again from the last line passed
	 * on; a jump seen again after that (after `accept_after`) is let through. */
	bool check_seq, have_seq, gap, accept;
	uint64_t last_seq, gap_seq, accept_after;
	uint8_t last_hash[AL_HASH_LEN];
	uint64_t since_save;     /* lines emitted since the state was written */
	int error;               /* the first error (-errno), after which nothing is written */
	uint8_t dec[AL_LINE_MAX];
	/* whole lines, written PIPE_BUF bytes at most at a time (a longer line
	 * alone), so that a pipe reader never gets part of a line from a write
	 * and a tail killed between two writes leaves whole lines behind */
	size_t olen;
	uint8_t obuf[4096];
};

/* One line the engine verified (without its '\n'): written in e's format.
 * 0, or -errno (-EINVAL: a line the strict parser refuses, which a verified
 * line never is; -ENOMEM; a write's error); e->error keeps the first.
 * -EAGAIN (not kept): a seq jump with check_seq, e->gap set, nothing written
 * now or after (until the caller clears gap). */
int emit_line(struct emitter *e, const uint8_t *line, size_t len);

/* Write the lines held back. 0, or -errno (e->error keeps the first). */
int emit_flush(struct emitter *e);

/* The ECS or OCSF object of one canonical line (exposed for the tests'
* sake through the CLI only): a malloc'ed NUL-terminated compact JSON text,
 * or NULL (out of memory, or not a canonical line). chain_id may be "". */
char *emit_convert(enum emit_format fmt, const uint8_t *line, size_t len, const char *chain_id, uint8_t *dec);

#endif
