/* SPDX-License-Identifier: MIT */
/*
 * The checkpoint and tree records (docs/format.md 20): what a verifier checks
 * against the chain it walked, in one place. Pure: no I/O; OpenSSL allocates
 * its key object for the signature check.
 */
#ifndef AUDITLOG_CHECKPOINT_H
#define AUDITLOG_CHECKPOINT_H

#include "symbols.h"
#include "format_v2.h"
#include "merkle.h"
#include "note.h"

#define al_v2_tree_check auditlog__al_v2_tree_check
#define al_v2_checkpoint_check auditlog__al_v2_checkpoint_check

/* What the walk gives at a tree or checkpoint record at seq c: the tree of
 * records first_seq .. c-1 (its head and size), and record c-1's hash. */
struct al_v2_tree_state {
	uint64_t first_seq, size;
	uint8_t root[AL_HASH_LEN];
	uint8_t head[AL_HASH_LEN];
};

/* A tree record's members: 0 when size, first_seq and range are those of t
 * (the range folds to t->root); -EBADMSG when they differ; -EINVAL when the
 * members break the rules. */
int al_v2_tree_check(const struct al_v2_member *m, size_t n, const struct al_v2_tree_state *t);

/* A checkpoint record's members: as al_v2_tree_check, and the note is
 * exactly section 20.2's text for origin and t, signed by pub:
 * 0, -EBADMSG (bad-checkpoint: any mismatch, a signature of pub that fails,
 * or none by pub at all), -EINVAL (not a checkpoint). */
int al_v2_checkpoint_check(const struct al_v2_member *m, size_t n, const struct al_v2_tree_state *t,
			   const uint8_t *origin, size_t olen, const uint8_t pub[AL_ED25519_PUB_LEN]);

#endif
