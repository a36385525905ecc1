/* SPDX-License-Identifier: MIT */
/* RFC 6962 Merkle trees: node hash, compact range, proofs (docs/format.md 18). */

#include "merkle.h"
#include "format_v2.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* An interior node's message: 0x01 || l || r (RFC 6962 2.1). */
void al_merkle_node_msg(uint8_t m[AL_MERKLE_NODE_MSG_LEN], const uint8_t l[AL_HASH_LEN],
			const uint8_t r[AL_HASH_LEN])
{
	m[0] = 0x01;
	memcpy(m + 1, l, AL_HASH_LEN);
	memcpy(m + 1 + AL_HASH_LEN, r, AL_HASH_LEN);
}

void al_merkle_node(const uint8_t l[AL_HASH_LEN], const uint8_t r[AL_HASH_LEN],
		    uint8_t out[AL_HASH_LEN])
{
	uint8_t m[AL_MERKLE_NODE_MSG_LEN];

	al_merkle_node_msg(m, l, r);
	al_sha256(m, sizeof(m), out);
}

void al_merkle_range_init(struct al_merkle_range *r)
{
	r->size = 0;
	r->n = 0;
}

int al_merkle_range_append(struct al_merkle_range *r, const uint8_t leaf[AL_HASH_LEN])
{
	struct al_merkle_step st;
	int rc = al_merkle_step_begin(r, &st, leaf);

	if (rc > 0)
		al_merkle_step_finish(r, &st);
	return rc < 0 ? rc : 0;
}

int al_merkle_step_begin(struct al_merkle_range *r, struct al_merkle_step *st,
			 const uint8_t leaf[AL_HASH_LEN])
{
	if (r->size >= AL_MERKLE_MAX_SIZE - 1)
		return -EOVERFLOW;
	if (!(r->size & 1)) {
		memcpy(r->h[r->n++], leaf, AL_HASH_LEN);
		r->size++;
		return 0;
	}
	memcpy(st->acc, leaf, AL_HASH_LEN);
	st->n = r->n;
	st->s = r->size;
	st->open = true;
	return 1;
}

void al_merkle_step_node(const struct al_merkle_range *r, const struct al_merkle_step *st,
			 const uint8_t **left, const uint8_t **right)
{
	*left = r->h[st->n - 1];
	*right = st->acc;
}

bool al_merkle_step_done(struct al_merkle_range *r, struct al_merkle_step *st,
			 const uint8_t node[AL_HASH_LEN])
{
	memcpy(st->acc, node, AL_HASH_LEN);
	st->n--;
	st->s >>= 1;
	if (st->s & 1)
		return false;
	memcpy(r->h[st->n], st->acc, AL_HASH_LEN);
	r->n = st->n + 1;
	r->size++;
	st->open = false;
	return true;
}

void al_merkle_step_finish(struct al_merkle_range *r, struct al_merkle_step *st)
{
	const uint8_t *a, *b;
	uint8_t h[AL_HASH_LEN];

	/* one node per trailing 1-bit of the old size: equal subtrees pair up */
	while (st->open) {
		al_merkle_step_node(r, st, &a, &b);
		al_merkle_node(a, b, h);
		(void)al_merkle_step_done(r, st, h);
	}
}

/* Hash np node pairs (l[i], r[i]) into o[i], two at a time. o[i] may not
 * alias an input of a pair after i. */
static void nodes(size_t np, const uint8_t *const *l, const uint8_t *const *r, uint8_t (*o)[AL_HASH_LEN],
		  bool fast)
{
	size_t i = 0;

	for (; i + 1 < np; i += 2) {
		uint8_t a[128], b[128]; /* two blocks each, padded in place */

		al_merkle_node_msg(a, l[i], r[i]);
		al_merkle_node_msg(b, l[i + 1], r[i + 1]);
		al_sha256_2blk_x2(a, AL_MERKLE_NODE_MSG_LEN, b, AL_MERKLE_NODE_MSG_LEN, o[i], o[i + 1], fast);
	}
	if (i < np)
		al_merkle_node(l[i], r[i], o[i]);
}

#define CHUNK 64u

/*
 * Append m <= CHUNK leaves level by level: at level k the new nodes hold the
 * indices [s >> k, ...); the first pairs with the range's subtree of height
 * k when s has bit k (the range's smallest left), the others pair among
 * themselves, and a last one without a right sibling stays a subtree of the
 * new range. Every pair of one level is independent of the others, which is
 * what lets nodes() hash them two at a time.
 */
static void append_chunk(struct al_merkle_range *r, const uint8_t (*leaf)[AL_HASH_LEN], size_t m, bool fast)
{
	uint8_t buf[2][CHUNK][AL_HASH_LEN];
	uint8_t left[AL_MERKLE_RANGE_MAX + 1][AL_HASH_LEN]; /* leftovers, by level */
	bool has_left[AL_MERKLE_RANGE_MAX + 1] = {false};
	const uint8_t *pl[CHUNK], *pr[CHUNK];
	const uint8_t (*cur)[AL_HASH_LEN] = leaf;
	uint64_t a = r->size;
	size_t c = m;
	unsigned k = 0, top = 0;

	for (; c > 0; k++, a >>= 1) {
		uint8_t (*nxt)[AL_HASH_LEN] = buf[k & 1];
		size_t i = 0, np = 0;

		if (a & 1) { /* the range's smallest subtree is this node's left sibling */
			pl[np] = r->h[--r->n];
			pr[np++] = cur[0];
			i = 1;
		}
		for (; i + 1 < c; i += 2) {
			pl[np] = cur[i];
			pr[np++] = cur[i + 1];
		}
		if (i < c) {
			memcpy(left[k], cur[i], AL_HASH_LEN);
			has_left[k] = true;
			top = k;
		}
		/* nxt is the buffer cur is not (cur is leaf or the other one) */
		nodes(np, pl, pr, nxt, fast);
		cur = (const uint8_t (*)[AL_HASH_LEN])nxt;
		c = np;
	}
	/* the range's untouched subtrees, then what was left, largest first */
	for (unsigned j = top + 1; j-- > 0;)
		if (has_left[j])
			memcpy(r->h[r->n++], left[j], AL_HASH_LEN);
	r->size += m;
}

int al_merkle_range_append_n(struct al_merkle_range *r, const uint8_t (*leaf)[AL_HASH_LEN], size_t m,
			     bool fast)
{
	if (m > AL_MERKLE_MAX_SIZE - 1 - r->size)
		return -EOVERFLOW;
	while (m > 0) {
		size_t c = m < CHUNK ? m : CHUNK;

		append_chunk(r, leaf, c, fast);
		leaf += c;
		m -= c;
	}
	return 0;
}

int al_merkle_range_root(const struct al_merkle_range *r, uint8_t out[AL_HASH_LEN])
{
	uint8_t acc[AL_HASH_LEN];

	if (r->size == 0 || r->n == 0)
		return -EINVAL;
	memcpy(acc, r->h[r->n - 1], AL_HASH_LEN);
	for (unsigned j = r->n - 1; j-- > 0;)
		al_merkle_node(r->h[j], acc, acc);
	memcpy(out, acc, AL_HASH_LEN);
	return 0;
}

int al_merkle_range_set(struct al_merkle_range *r, uint64_t size, const uint8_t *hashes,
			size_t n)
{
	if (size == 0 || size >= AL_MERKLE_MAX_SIZE || (size_t)__builtin_popcountll(size) != n ||
	    !hashes)
		return -EINVAL;
	r->size = size;
	r->n = (unsigned)n;
	memcpy(r->h, hashes, n * AL_HASH_LEN);
	return 0;
}

int al_merkle_verify_inclusion(uint64_t index, uint64_t size, const uint8_t leaf[AL_HASH_LEN],
			       const uint8_t (*path)[AL_HASH_LEN], size_t n,
			       const uint8_t root[AL_HASH_LEN])
{
	uint64_t fn = index, sn;
	uint8_t r[AL_HASH_LEN];

	if (index >= size)
		return -EINVAL;
	sn = size - 1;
	memcpy(r, leaf, AL_HASH_LEN);
	for (size_t i = 0; i < n; i++) {
		if (sn == 0)
			return -EBADMSG;
		if ((fn & 1) || fn == sn) {
			al_merkle_node(path[i], r, r);
			while (!(fn & 1) && fn != 0) {
				fn >>= 1;
				sn >>= 1;
			}
		} else {
			al_merkle_node(r, path[i], r);
		}
		fn >>= 1;
		sn >>= 1;
	}
	return sn == 0 && memcmp(r, root, AL_HASH_LEN) == 0 ? 0 : -EBADMSG;
}

int al_merkle_verify_consistency(uint64_t m, uint64_t sz, const uint8_t r1[AL_HASH_LEN],
				 const uint8_t r2[AL_HASH_LEN], const uint8_t (*proof)[AL_HASH_LEN],
				 size_t n)
{
	uint64_t fn, sn;
	uint8_t fr[AL_HASH_LEN], sr[AL_HASH_LEN];
	size_t i = 0;

	if (m > sz)
		return -EINVAL;
	if (m == sz)
		return n == 0 && memcmp(r1, r2, AL_HASH_LEN) == 0 ? 0 : -EBADMSG;
	if (m == 0)
		return n == 0 ? 0 : -EBADMSG;
	if (n == 0)
		return -EBADMSG;
	/* a power-of-two first tree is itself the first node of the path */
	if ((m & (m - 1)) == 0) {
		memcpy(fr, r1, AL_HASH_LEN);
	} else {
		memcpy(fr, proof[0], AL_HASH_LEN);
		i = 1;
	}
	memcpy(sr, fr, AL_HASH_LEN);
	fn = m - 1;
	sn = sz - 1;
	while (fn & 1) {
		fn >>= 1;
		sn >>= 1;
	}
	for (; i < n; i++) {
		if (sn == 0)
			return -EBADMSG;
		if ((fn & 1) || fn == sn) {
			al_merkle_node(proof[i], fr, fr);
			al_merkle_node(proof[i], sr, sr);
			while (!(fn & 1) && fn != 0) {
				fn >>= 1;
				sn >>= 1;
			}
		} else {
			al_merkle_node(sr, proof[i], sr);
		}
		fn >>= 1;
		sn >>= 1;
	}
	return sn == 0 && memcmp(fr, r1, AL_HASH_LEN) == 0 && memcmp(sr, r2, AL_HASH_LEN) == 0
		       ? 0
		       : -EBADMSG;
}
