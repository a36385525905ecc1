/* SPDX-License-Identifier: MIT */
/*
 * RFC 6962 / RFC 9162 Merkle trees over the chain hashes of v2 records
 * (docs/format.md 18): interior node hashes, the compact range of [0, n),
 * inclusion and consistency proof verification. Leaves arrive already hashed
 * (a v2 chain hash is the leaf hash). Pure: no I/O, no allocation.
 */
#ifndef AUDITLOG_MERKLE_H
#define AUDITLOG_MERKLE_H

#include "symbols.h"
#include "format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define al_merkle_node auditlog__al_merkle_node
#define al_merkle_range_init auditlog__al_merkle_range_init
#define al_merkle_range_append auditlog__al_merkle_range_append
#define al_merkle_range_append_n auditlog__al_merkle_range_append_n
#define al_merkle_node_msg auditlog__al_merkle_node_msg
#define al_merkle_step_begin auditlog__al_merkle_step_begin
#define al_merkle_step_node auditlog__al_merkle_step_node
#define al_merkle_step_done auditlog__al_merkle_step_done
#define al_merkle_step_finish auditlog__al_merkle_step_finish
#define al_merkle_range_root auditlog__al_merkle_range_root
#define al_merkle_range_set auditlog__al_merkle_range_set
#define al_merkle_verify_inclusion auditlog__al_merkle_verify_inclusion
#define al_merkle_verify_consistency auditlog__al_merkle_verify_consistency
#define al_merkle_inclusion_proof auditlog__al_merkle_inclusion_proof
#define al_merkle_consistency_proof auditlog__al_merkle_consistency_proof

#define AL_MERKLE_MAX_SIZE (UINT64_C(1) << 53) /* a tree never holds more leaves */
#define AL_MERKLE_RANGE_MAX 53u                /* popcount of any size below that */
#define AL_MERKLE_PROOF_MAX 64u /* hashes in any proof of such a tree (at most 54) */

/* The compact range of [0, size): h[0..n) from the largest subtree down. */
struct al_merkle_range {
	uint64_t size;
	unsigned n;
	uint8_t h[AL_MERKLE_RANGE_MAX + 1][AL_HASH_LEN];
};

/* out = SHA-256(0x01 || l || r). out may alias l or r. */
void al_merkle_node(const uint8_t l[AL_HASH_LEN], const uint8_t r[AL_HASH_LEN],
		    uint8_t out[AL_HASH_LEN]);

void al_merkle_range_init(struct al_merkle_range *r);

/* Append one leaf hash. -EOVERFLOW once the tree holds 2^53 leaves. */
int al_merkle_range_append(struct al_merkle_range *r, const uint8_t leaf[AL_HASH_LEN]);

/* Append m leaf hashes, as m al_merkle_range_append would, hashing the
 * interior nodes of each level two at a time (with SHA-NI when `fast`, the
 * answer of al_sha256_ni_ok()). -EOVERFLOW, r untouched, when the tree would
 * pass 2^53 - 1 leaves (the limit one at a time keeps). */
int al_merkle_range_append_n(struct al_merkle_range *r, const uint8_t (*leaf)[AL_HASH_LEN], size_t m,
			     bool fast);

/*
 * One leaf appended one interior node at a time, so that the caller can hash
 * each node beside other work of its own (the writer: beside the next chain
 * step, two SHA-256 interleaved). Appending a leaf to a range of odd size
 * carries a node up one level per trailing 1-bit of the size; while a step is
 * open the range must not be read or changed except through it.
 *
 * al_merkle_step_begin: 0 when the leaf went in at once (even size), 1 when
 * a node is owed (st open), -EOVERFLOW as al_merkle_range_append.
 * al_merkle_step_node: the owed node's children.
 * al_merkle_step_done: their hash given; true when the leaf is in (st closed),
 * false when the next level's node is owed.
 * al_merkle_step_finish: the owed nodes hashed here, one after the other
 * (al_merkle_range_append is begin and finish).
 */
struct al_merkle_step {
	bool open;
	unsigned n;                  /* range hashes below the carried node */
	uint64_t s;                  /* the old size, shifted one level a node */
	uint8_t acc[AL_HASH_LEN];    /* the node being carried up */
};
int al_merkle_step_begin(struct al_merkle_range *r, struct al_merkle_step *st,
			 const uint8_t leaf[AL_HASH_LEN]);
void al_merkle_step_node(const struct al_merkle_range *r, const struct al_merkle_step *st,
			 const uint8_t **left, const uint8_t **right);
bool al_merkle_step_done(struct al_merkle_range *r, struct al_merkle_step *st,
			 const uint8_t node[AL_HASH_LEN]);
void al_merkle_step_finish(struct al_merkle_range *r, struct al_merkle_step *st);

/* An interior node's message, 0x01 || l || r (65 bytes). */
#define AL_MERKLE_NODE_MSG_LEN (1 + 2 * AL_HASH_LEN)
void al_merkle_node_msg(uint8_t m[AL_MERKLE_NODE_MSG_LEN], const uint8_t l[AL_HASH_LEN],
			const uint8_t r[AL_HASH_LEN]);

/* The tree head of the range. -EINVAL for an empty range. */
int al_merkle_range_root(const struct al_merkle_range *r, uint8_t out[AL_HASH_LEN]);

/* Load a range read from a record: n hashes (32 bytes each, concatenated)
 * for a tree of `size` leaves. -EINVAL unless n = popcount(size), 0 < size
 * <= 2^53. r is untouched on failure. */
int al_merkle_range_set(struct al_merkle_range *r, uint64_t size, const uint8_t *hashes,
			size_t n);

/* RFC 9162 2.1.3.2: 0 when `path` (n hashes) proves leaf `index` of a tree of
 * `size` leaves with head `root`; -EINVAL when index >= size; -EBADMSG when
 * the proof fails. */
int al_merkle_verify_inclusion(uint64_t index, uint64_t size, const uint8_t leaf[AL_HASH_LEN],
			       const uint8_t (*path)[AL_HASH_LEN], size_t n,
			       const uint8_t root[AL_HASH_LEN]);

/* RFC 9162 2.1.4.2: 0 when `proof` (n hashes) shows the tree of size m with
 * head r1 is a prefix of the tree of size sz with head r2. m = sz needs an
 * empty proof and equal heads; m = 0 an empty proof. -EINVAL when m > sz,
 * -EBADMSG when the proof fails. */
int al_merkle_verify_consistency(uint64_t m, uint64_t sz, const uint8_t r1[AL_HASH_LEN],
				 const uint8_t r2[AL_HASH_LEN], const uint8_t (*proof)[AL_HASH_LEN],
				 size_t n);

/* Proof generation (proof.c), from the `size` leaf hashes of a tree; O(size)
 * hashing per proof element, no allocation. RFC 9162 2.1.3.1: the audit path
 * PATH(index, D[size]); 2.1.4.1: the consistency proof PROOF(m, D[size]),
 * empty when m is 0 or size. The n hashes go to out (cap of them;
 * AL_MERKLE_PROOF_MAX always suffices) in the RFC's order and *ret_n = n.
 * 0; -EINVAL (size 0 or >= 2^53, index >= size, m > size); -ENOBUFS (cap too
 * small; out partly written, *ret_n untouched). */
int al_merkle_inclusion_proof(const uint8_t (*leaves)[AL_HASH_LEN], uint64_t size, uint64_t index,
			      uint8_t (*out)[AL_HASH_LEN], size_t cap, size_t *ret_n);
int al_merkle_consistency_proof(const uint8_t (*leaves)[AL_HASH_LEN], uint64_t m, uint64_t size,
				uint8_t (*out)[AL_HASH_LEN], size_t cap, size_t *ret_n);

#endif
