/* SPDX-License-Identifier: MIT */
/*
 * The sealer's registry of chains (docs/format.md 26, docs/sealer.md 6): a
 * v2 log the sealer writes with the library's own writer, sealed in-process
 * with the sealer's own state and signing key. One `chain-open` record per
 * segment (durable before the segment's first MAC leaves the sealer), one
 * `chain-close` or `chain-lost` when it ends.
 */
#ifndef AUDITLOG_SEALER_REGISTRY_H
#define AUDITLOG_SEALER_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "format.h"
#include "format_v2.h"

struct registry;
struct al_clock_hooks;

/* What the sealer knows of one segment (one connection's chain). */
struct reg_segment {
	char chain_id[32];
	struct ucred peer;
	uint64_t first, last;     /* seqs of its first and its last seal */
	uint8_t head[AL_HASH_LEN]; /* the last seal record's chain hash */
	bool last_close;          /* the last seal was a `close` */
};

/* Open (or continue) DIR/registry.log, creating DIR (0700) when missing,
 * format v2 sealed in-process with the given state and signing key. 0 or
 * -errno (auditlog_open's). clock: the test clock hook (docs/sealer.md), or NULL. */
int registry_open(const char *dir, const char *state, const char *signing_key,
		  const struct al_clock_hooks *clock, struct registry **ret);

/* chain-open for seg, durable when it returns 0; -errno otherwise. */
int registry_chain_open(struct registry *g, const struct reg_segment *seg);

/* chain-close (seg->last_close) or chain-lost, queued (durable with the
 * registry's next batch). 0 or -errno. */
int registry_chain_end(struct registry *g, const struct reg_segment *seg);

/* Close the log (its checkpoint and close seal): 0 or its first error. NULL-safe. */
int registry_close(struct registry *g);

/* The chain hash (docs/format.md 15) of the seal record the sealer just
 * MACed: its members (19.1, the MAC included), prev, seq and timestamp. 0 or
 * -EINVAL. */
int registry_seal_hash(const struct al_v2_seal *sl, const uint8_t prev[AL_HASH_LEN], uint64_t seq,
		       const char ts[AL_TS_LEN], uint8_t out[AL_HASH_LEN]);

#endif
