/* SPDX-License-Identifier: MIT */
/* RFC 9162 proof generation from the leaf hashes of a tree (docs/format.md 18.2). */

#include "merkle.h"

#include <errno.h>
#include <string.h>

/* MTH(D[0:n)) of n >= 1 leaf hashes, through the compact range (O(n)). */
static void mth(const uint8_t (*l)[AL_HASH_LEN], uint64_t n, uint8_t out[AL_HASH_LEN])
{
	struct al_merkle_range r;

	al_merkle_range_init(&r);
	for (uint64_t i = 0; i < n; i++)
		(void)al_merkle_range_append(&r, l[i]); /* n < 2^53: checked by the callers */
	(void)al_merkle_range_root(&r, out);
}

/* largest power of two < n (n > 1) */
static uint64_t kpow(uint64_t n)
{
	uint64_t k = 1;

	while (k << 1 < n)
		k <<= 1;
	return k;
}

struct out {
	uint8_t (*h)[AL_HASH_LEN];
	size_t n, cap;
};

static int put(struct out *o, const uint8_t (*l)[AL_HASH_LEN], uint64_t n)
{
	if (o->n == o->cap)
		return -ENOBUFS;
	mth(l, n, o->h[o->n++]);
	return 0;
}

/* RFC 9162 2.1.3.1: PATH(m, D[n]) */
static int path(struct out *o, uint64_t m, const uint8_t (*l)[AL_HASH_LEN], uint64_t n)
{
	uint64_t k;
	int r;

	if (n == 1)
		return 0;
	k = kpow(n);
	if (m < k)
		return (r = path(o, m, l, k)) < 0 ? r : put(o, l + k, n - k);
	return (r = path(o, m - k, l + k, n - k)) < 0 ? r : put(o, l, k);
}

/* RFC 9162 2.1.4.1: SUBPROOF(m, D[n], b) */
static int subproof(struct out *o, uint64_t m, const uint8_t (*l)[AL_HASH_LEN], uint64_t n, bool b)
{
	uint64_t k;
	int r;

	if (m == n)
		return b ? 0 : put(o, l, n);
	k = kpow(n);
	if (m <= k)
		return (r = subproof(o, m, l, k, b)) < 0 ? r : put(o, l + k, n - k);
	return (r = subproof(o, m - k, l + k, n - k, false)) < 0 ? r : put(o, l, k);
}

int al_merkle_inclusion_proof(const uint8_t (*leaves)[AL_HASH_LEN], uint64_t size, uint64_t index,
			      uint8_t (*out)[AL_HASH_LEN], size_t cap, size_t *ret_n)
{
	struct out o = {out, 0, cap};
	int r;

	if (!leaves || !out || !ret_n || size == 0 || size >= AL_MERKLE_MAX_SIZE || index >= size)
		return -EINVAL;
	if ((r = path(&o, index, leaves, size)) < 0)
		return r;
	*ret_n = o.n;
	return 0;
}

int al_merkle_consistency_proof(const uint8_t (*leaves)[AL_HASH_LEN], uint64_t m, uint64_t size,
				uint8_t (*out)[AL_HASH_LEN], size_t cap, size_t *ret_n)
{
	struct out o = {out, 0, cap};
	int r;

	if (!leaves || !out || !ret_n || size == 0 || size >= AL_MERKLE_MAX_SIZE || m > size)
		return -EINVAL;
	if (m > 0 && m < size && (r = subproof(&o, m, leaves, size, true)) < 0)
		return r;
	*ret_n = o.n;
	return 0;
}
