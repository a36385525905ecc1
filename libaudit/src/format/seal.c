/* SPDX-License-Identifier: MIT */
/* Seal records: sign and check (docs/format.md 19). */

#include <openssl/crypto.h>

#include "seal.h"

#include <errno.h>
#include <string.h>

/* S_n: the seal's v2 body without its mac member (19.3). */
static long seal_sbody(const struct al_v2_member *m, size_t n, uint8_t *out, size_t cap)
{
	struct al_v2_member s[AL_V2_SEAL_MEMBERS];
	size_t k = 0;

	for (size_t i = 0; i < n && k < AL_V2_SEAL_MEMBERS; i++)
		if (m[i].tag != AL_TAG_MAC)
			s[k++] = m[i];
	return al_v2_body(AL_T_SEAL, s, k, NULL, 0, out, cap);
}

int al_v2_seal_sign(struct al_v2_seal *s, const uint8_t kmac[AL_HASH_LEN],
		    const uint8_t prev[AL_HASH_LEN], uint64_t seq, const char ts[AL_TS_LEN])
{
	struct al_v2_member m[AL_V2_SEAL_MEMBERS];
	char hex[AL_V2_SEAL_HEX];
	uint8_t body[256];
	long bn;
	int k, r;

	s->has_mac = false;
	k = al_v2_seal_members(s, m, hex);
	if (k < 0)
		return k;
	bn = al_v2_body(AL_T_SEAL, m, (size_t)k, NULL, 0, body, sizeof(body));
	if (bn < 0)
		return -EINVAL;
	r = al_seal_mac(kmac, prev, seq, ts, body, (size_t)bn, s->mac);
	if (r == 0)
		s->has_mac = true;
	return r;
}

int al_v2_seal_check(struct al_seal_walk *w, const uint8_t key_id[AL_SEAL_KID_LEN],
		     const uint8_t chain_id[32], const uint8_t prev[AL_HASH_LEN], uint64_t seq,
		     const char ts[AL_TS_LEN], const struct al_v2_member *m, size_t n,
		     uint32_t *ret_epoch)
{
	return al_v2_seal_check_cached(w, NULL, key_id, chain_id, prev, seq, ts, m, n, ret_epoch);
}

int al_v2_seal_check_cached(struct al_seal_walk *w, struct al_seal_kmac *cache,
			    const uint8_t key_id[AL_SEAL_KID_LEN], const uint8_t chain_id[32],
			    const uint8_t prev[AL_HASH_LEN], uint64_t seq, const char ts[AL_TS_LEN],
			    const struct al_v2_member *m, size_t n, uint32_t *ret_epoch)
{
	const struct al_v2_member *mac = NULL, *kid = NULL, *chain = NULL, *ep = NULL;
	uint8_t body[256], want[AL_HASH_LEN], K[AL_SEAL_SEED_LEN], kmac[AL_HASH_LEN];
	char kid_hex[2 * AL_SEAL_KID_LEN];
	long bn;
	int r;

	if (al_v2_check_members(AL_T_SEAL, m, n) != 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (m[i].tag == AL_TAG_MAC)
			mac = &m[i];
		else if (m[i].tag == AL_TAG_SEAL_KEY)
			kid = &m[i];
		else if (m[i].tag == AL_TAG_CHAIN_ID)
			chain = &m[i];
		else if (m[i].tag == AL_TAG_EPOCH)
			ep = &m[i];
	}
	al_hex(key_id, AL_SEAL_KID_LEN, kid_hex);
	if (memcmp(kid->p, kid_hex, sizeof(kid_hex)) != 0)
		return -ENOKEY;
	if (memcmp(chain->p, chain_id, 32) != 0)
		return -EBADMSG;
	bn = seal_sbody(m, n, body, sizeof(body));
	if (bn < 0 || al_unhex(mac->p, 64, want) != 0)
		return -EINVAL;
	if (cache && cache->have && cache->epoch == (uint32_t)ep->u) {
		memcpy(kmac, cache->kmac, AL_HASH_LEN);
		r = 0;
	} else {
		r = al_seal_walk_key(w, (uint32_t)ep->u, K);
		if (r == 0)
			r = al_seal_mac_key(K, kmac);
		if (r == 0 && cache) {
			memcpy(cache->kmac, kmac, AL_HASH_LEN);
			cache->epoch = (uint32_t)ep->u;
			cache->have = true;
		}
	}
	if (r == 0)
		r = al_seal_mac_check(kmac, prev, seq, ts, body, (size_t)bn, want) ? 0 : -EBADMSG;
	OPENSSL_cleanse(K, sizeof(K));
	OPENSSL_cleanse(kmac, sizeof(kmac));
	if (r == 0 && ret_epoch)
		*ret_epoch = (uint32_t)ep->u;
	return r;
}
