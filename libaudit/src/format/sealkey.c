/* SPDX-License-Identifier: MIT */
/* Seal keys: one-way tree, MAC keys, key id, covering set, seal MAC
 * (docs/format.md 16, 19.3). */

/*
 * HMAC-SHA-256 is built here on the SHA-256 context (RFC 2104), as chain.c
 * uses the low-level functions: OpenSSL 3.0's HMAC() and EVP_MAC fetch the
 * algorithm and allocate on every call, and a verifier of a token-shaped log
 * checks one seal per record. The context on the stack is cleansed with the
 * key. Checked against RFC 4231 by tests/test_v2_format.c.
 */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/opensslconf.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "sealkey.h"
#include "format_v2.h"

#include <errno.h>
#include <string.h>

#ifndef OPENSSL_NO_DEPRECATED_3_0
typedef SHA256_CTX sh_ctx;
static int sh_init(sh_ctx *c) { return SHA256_Init(c) == 1 ? 0 : -EIO; }
static int sh_update(sh_ctx *c, const void *p, size_t n) { return SHA256_Update(c, p, n) == 1 ? 0 : -EIO; }
static int sh_final(sh_ctx *c, uint8_t *out) { return SHA256_Final(out, c) == 1 ? 0 : -EIO; }
static void sh_done(sh_ctx *c) { OPENSSL_cleanse(c, sizeof(*c)); }
#else
typedef struct { EVP_MD_CTX *m; } sh_ctx;
static int sh_init(sh_ctx *c)
{
	c->m = EVP_MD_CTX_new();
	return c->m && EVP_DigestInit_ex(c->m, EVP_sha256(), NULL) == 1 ? 0 : -ENOMEM;
}
static int sh_update(sh_ctx *c, const void *p, size_t n) { return EVP_DigestUpdate(c->m, p, n) == 1 ? 0 : -EIO; }
static int sh_final(sh_ctx *c, uint8_t *out) { return EVP_DigestFinal_ex(c->m, out, NULL) == 1 ? 0 : -EIO; }
static void sh_done(sh_ctx *c) { EVP_MD_CTX_free(c->m); c->m = NULL; }
#endif

struct hmac {
	sh_ctx in;
	uint8_t opad[64];
};

static int hmac_init(struct hmac *h, const uint8_t *key, size_t klen)
{
	uint8_t k[64], ipad[64];
	int r;

	memset(k, 0, sizeof(k));
	if (klen > 64)
		al_sha256(key, klen, k);
	else if (klen)
		memcpy(k, key, klen);
	for (int i = 0; i < 64; i++) {
		ipad[i] = k[i] ^ 0x36;
		h->opad[i] = k[i] ^ 0x5c;
	}
	r = sh_init(&h->in);
	if (r == 0)
		r = sh_update(&h->in, ipad, sizeof(ipad));
	OPENSSL_cleanse(k, sizeof(k));
	OPENSSL_cleanse(ipad, sizeof(ipad));
	return r;
}

static int hmac_final(struct hmac *h, uint8_t out[AL_HASH_LEN], int r)
{
	uint8_t inner[AL_HASH_LEN];
	sh_ctx o;

	if (r == 0)
		r = sh_final(&h->in, inner);
	sh_done(&h->in);
	if (r == 0) {
		r = sh_init(&o);
		if (r == 0)
			r = sh_update(&o, h->opad, sizeof(h->opad));
		if (r == 0)
			r = sh_update(&o, inner, sizeof(inner));
		if (r == 0)
			r = sh_final(&o, out);
		sh_done(&o);
	}
	OPENSSL_cleanse(inner, sizeof(inner));
	OPENSSL_cleanse(h->opad, sizeof(h->opad));
	return r;
}

int al_hmac_sha256(const uint8_t *key, size_t klen, const void *m, size_t n,
		   uint8_t out[AL_HASH_LEN])
{
	struct hmac h;
	int r = hmac_init(&h, key, klen);

	if (r == 0 && n)
		r = sh_update(&h.in, m, n);
	return hmac_final(&h, out, r);
}

static const char L_LEFT[] = "auditlog-v2 tree left";
static const char L_RIGHT[] = "auditlog-v2 tree right";
static const char L_MAC[] = "auditlog-v2 seal mac key";
static const char L_KID[] = "auditlog-v2 key id";
static const char L_SEAL[] = "auditlog-v2 seal"; /* then 0x00 */
static const char L_ATT_KEY[] = "auditlog-v2 attest key";
static const char L_ATT[] = "auditlog-v2 attestation"; /* then 0x00 */

/* child of node n (left: bit 0), n and out may alias */
static int child(const uint8_t n[AL_SEAL_SEED_LEN], unsigned bit, uint8_t out[AL_SEAL_SEED_LEN])
{
	uint8_t tmp[AL_HASH_LEN];
	int r = bit ? al_hmac_sha256(n, AL_SEAL_SEED_LEN, L_RIGHT, sizeof(L_RIGHT) - 1, tmp)
		    : al_hmac_sha256(n, AL_SEAL_SEED_LEN, L_LEFT, sizeof(L_LEFT) - 1, tmp);

	if (r == 0)
		memcpy(out, tmp, AL_SEAL_SEED_LEN);
	OPENSSL_cleanse(tmp, sizeof(tmp));
	return r;
}

int al_seal_node(const uint8_t S[AL_SEAL_SEED_LEN], unsigned depth, uint64_t index,
		 uint8_t out[AL_SEAL_SEED_LEN])
{
	uint8_t n[AL_SEAL_SEED_LEN];
	int r = 0;

	if (depth > AL_SEAL_DEPTH || index >> depth)
		return -EINVAL;
	memcpy(n, S, sizeof(n));
	for (unsigned d = 0; d < depth && r == 0; d++)
		r = child(n, (unsigned)(index >> (depth - 1 - d)) & 1u, n);
	if (r == 0)
		memcpy(out, n, sizeof(n));
	OPENSSL_cleanse(n, sizeof(n));
	return r;
}

int al_seal_mac_key(const uint8_t K[AL_SEAL_SEED_LEN], uint8_t out[AL_HASH_LEN])
{
	return al_hmac_sha256(K, AL_SEAL_SEED_LEN, L_MAC, sizeof(L_MAC) - 1, out);
}


int al_seal_key_id(const uint8_t S[AL_SEAL_SEED_LEN], const uint8_t *host, size_t host_len,
		   uint64_t t0, uint64_t delta, uint8_t out[AL_SEAL_KID_LEN])
{
	uint8_t m[sizeof(L_KID) + 2 + AL_SEAL_HOST_MAX + 16], mac[AL_HASH_LEN];
	size_t n = 0;
	int r;

	if (!host || host_len == 0 || host_len > AL_SEAL_HOST_MAX)
		return -EINVAL;
	memcpy(m, L_KID, sizeof(L_KID)); /* the label and its 0x00 */
	n = sizeof(L_KID);
	m[n++] = AL_SEAL_SCHEME;
	m[n++] = (uint8_t)host_len;
	memcpy(m + n, host, host_len);
	n += host_len;
	(void)al_put_le64(m + n, t0);
	(void)al_put_le64(m + n + 8, delta);
	n += 16;
	r = al_hmac_sha256(S, AL_SEAL_SEED_LEN, m, n, mac);
	if (r == 0)
		memcpy(out, mac, AL_SEAL_KID_LEN);
	return r;
}

/* Fill C(e) below node (d, i), which covers e: descend to e, keeping the right
 * sibling of each left turn. Slots go to st->node[pos...], deepest first. */
static int descend(struct al_seal_state *st, const uint8_t seed[AL_SEAL_SEED_LEN], unsigned d,
		   uint32_t e, struct al_seal_node_slot *tmp, unsigned *ntmp)
{
	uint8_t n[AL_SEAL_SEED_LEN];
	int r = 0;

	memcpy(n, seed, sizeof(n));
	*ntmp = 0;
	for (unsigned lvl = d; lvl < AL_SEAL_DEPTH && r == 0; lvl++) {
		unsigned bit = (e >> (AL_SEAL_DEPTH - 1 - lvl)) & 1u;
		uint32_t idx = (uint32_t)((uint64_t)e >> (AL_SEAL_DEPTH - 1 - lvl));
		if (bit == 0) {
			struct al_seal_node_slot *s = &tmp[(*ntmp)++];
			s->depth = (uint8_t)(lvl + 1);
			s->index = idx + 1;
			r = child(n, 1, s->seed);
		}
		if (r == 0)
			r = child(n, bit, n);
	}
	if (r == 0)
		memcpy(st->node[0].seed, n, sizeof(n));
	OPENSSL_cleanse(n, sizeof(n));
	return r;
}

static uint64_t node_lo(const struct al_seal_node_slot *s)
{
	return (uint64_t)s->index << (AL_SEAL_DEPTH - s->depth);
}

static uint64_t node_hi(const struct al_seal_node_slot *s)
{
	return (((uint64_t)s->index + 1) << (AL_SEAL_DEPTH - s->depth)) - 1;
}

/* Rebuild st as C(e) from `from` (a node covering e) and the kept slots that
 * lie wholly after e. */
static int rebuild(struct al_seal_state *st, const uint8_t from[AL_SEAL_SEED_LEN], unsigned d,
		   uint32_t e, const struct al_seal_node_slot *later, unsigned nlater)
{
	struct al_seal_node_slot tmp[AL_SEAL_DEPTH];
	struct al_seal_state out;
	unsigned nt = 0;
	int r;

	memset(&out, 0, sizeof(out));
	r = descend(&out, from, d, e, tmp, &nt);
	if (r == 0) {
		out.epoch = e;
		out.node[0].depth = AL_SEAL_DEPTH;
		out.node[0].index = e;
		out.n = 1;
		for (unsigned j = nt; j-- > 0;) /* deepest right sibling first */
			out.node[out.n++] = tmp[j];
		for (unsigned j = 0; j < nlater; j++)
			out.node[out.n++] = later[j];
		*st = out;
	}
	OPENSSL_cleanse(tmp, sizeof(tmp));
	OPENSSL_cleanse(&out, sizeof(out));
	return r;
}

int al_seal_state_init(struct al_seal_state *st, const uint8_t S[AL_SEAL_SEED_LEN], uint32_t e)
{
	return rebuild(st, S, 0, e, NULL, 0);
}

int al_seal_state_advance(struct al_seal_state *st, uint32_t e)
{
	struct al_seal_node_slot later[AL_SEAL_DEPTH + 1], from;
	unsigned nl = 0, k;
	int r;

	if (st->n == 0 || e < st->epoch)
		return -EINVAL;
	if (e == st->epoch)
		return 0;
	for (k = 0; k < st->n; k++)
		if (node_lo(&st->node[k]) <= e && e <= node_hi(&st->node[k]))
			break;
	if (k == st->n)
		return -EINVAL; /* cannot happen for a well-formed C(epoch) */
	from = st->node[k];
	for (unsigned j = k + 1; j < st->n; j++)
		later[nl++] = st->node[j];
	r = rebuild(st, from.seed, from.depth, e, later, nl);
	OPENSSL_cleanse(&from, sizeof(from));
	OPENSSL_cleanse(later, sizeof(later));
	return r;
}

void al_seal_state_wipe(struct al_seal_state *st)
{
	if (st)
		OPENSSL_cleanse(st, sizeof(*st));
}

void al_seal_walk_init(struct al_seal_walk *w, const uint8_t S[AL_SEAL_SEED_LEN])
{
	memcpy(w->path[0], S, AL_SEAL_SEED_LEN);
	w->have = false;
	w->epoch = 0;
}

int al_seal_walk_key(struct al_seal_walk *w, uint32_t e, uint8_t out[AL_SEAL_SEED_LEN])
{
	unsigned d = 0;
	int r = 0;

	/* keep the common prefix of the previous epoch's path */
	if (w->have) {
		uint32_t x = w->epoch ^ e;
		d = x ? (unsigned)__builtin_clz(x) : AL_SEAL_DEPTH;
	}
	w->have = false;
	for (; d < AL_SEAL_DEPTH && r == 0; d++)
		r = child(w->path[d], (e >> (AL_SEAL_DEPTH - 1 - d)) & 1u, w->path[d + 1]);
	if (r)
		return r;
	w->epoch = e;
	w->have = true;
	memcpy(out, w->path[AL_SEAL_DEPTH], AL_SEAL_SEED_LEN);
	return 0;
}

void al_seal_walk_wipe(struct al_seal_walk *w)
{
	if (w)
		OPENSSL_cleanse(w, sizeof(*w));
}

int al_seal_mac(const uint8_t kmac[AL_HASH_LEN], const uint8_t prev[AL_HASH_LEN], uint64_t seq,
		const char ts[AL_TS_LEN], const uint8_t *sbody, size_t n, uint8_t out[AL_HASH_LEN])
{
	uint8_t s[8];
	struct hmac h;
	int r;

	(void)al_put_le64(s, seq);
	r = hmac_init(&h, kmac, AL_HASH_LEN);
	if (r == 0)
		r = sh_update(&h.in, L_SEAL, sizeof(L_SEAL)); /* with its 0x00 */
	if (r == 0)
		r = sh_update(&h.in, prev, AL_HASH_LEN);
	if (r == 0)
		r = sh_update(&h.in, s, sizeof(s));
	if (r == 0)
		r = sh_update(&h.in, ts, AL_TS_LEN);
	if (r == 0 && n)
		r = sh_update(&h.in, sbody, n);
	return hmac_final(&h, out, r);
}

bool al_seal_mac_check(const uint8_t kmac[AL_HASH_LEN], const uint8_t prev[AL_HASH_LEN],
		       uint64_t seq, const char ts[AL_TS_LEN], const uint8_t *sbody, size_t n,
		       const uint8_t mac[AL_HASH_LEN])
{
	uint8_t want[AL_HASH_LEN];
	bool ok = al_seal_mac(kmac, prev, seq, ts, sbody, n, want) == 0 &&
		  CRYPTO_memcmp(want, mac, AL_HASH_LEN) == 0;

	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

int al_attest_mac(const uint8_t K[AL_SEAL_SEED_LEN], const uint8_t *t, size_t n,
		  uint8_t out[AL_HASH_LEN])
{
	uint8_t katt[AL_HASH_LEN];
	struct hmac h;
	int r = al_hmac_sha256(K, AL_SEAL_SEED_LEN, L_ATT_KEY, sizeof(L_ATT_KEY) - 1, katt);

	if (r == 0) {
		r = hmac_init(&h, katt, sizeof(katt));
		if (r == 0)
			r = sh_update(&h.in, L_ATT, sizeof(L_ATT)); /* with its 0x00 */
		if (r == 0 && n)
			r = sh_update(&h.in, t, n);
		r = hmac_final(&h, out, r);
	}
	OPENSSL_cleanse(katt, sizeof(katt));
	return r;
}

int al_seal_schedule(const struct al_seal_clock *c, const uint8_t boot_id[16], uint64_t boottime,
		     uint64_t wall, struct al_seal_sched *ret)
{
	typedef unsigned __int128 u128;
	u128 e, bs, expected;
	__int128 diff;

	if (c->delta == 0)
		return -EINVAL;
	if (memcmp(boot_id, c->boot_id, 16) == 0) {
		/* rule 1: the boot clock alone */
		if (boottime < c->boot_start)
			return -EINVAL;
		e = (u128)c->epoch + (boottime - c->boot_start) / c->delta;
		bs = (u128)c->boot_start + (e - c->epoch) * c->delta;
	} else {
		/* rule 2: after a reboot, the wall clock within [epoch, epoch + max-jump] */
		u128 w = wall >= c->t0 ? (wall - c->t0) / c->delta : 0;
		u128 hi = (u128)c->epoch + c->max_jump;
		e = w > c->epoch ? w : c->epoch;
		if (e > hi)
			e = hi;
		if (wall >= c->t0 && e == w) {
			/* keep the wall clock's phase within the epoch */
			u128 phase = (u128)(wall - c->t0) - w * c->delta;
			bs = boottime > phase ? boottime - phase : 0;
		} else {
			bs = boottime;
		}
	}
	/* rule 4: past 2^32-1, or ending past what a ns clock holds (2554) */
	if (e > UINT32_MAX || (u128)c->t0 + (e + 1) * c->delta > UINT64_MAX)
		return -ERANGE;
	expected = (u128)c->t0 + e * c->delta + (boottime - bs); /* < t0 + (e+1)·delta */
	diff = (__int128)wall - (__int128)expected;
	ret->epoch = (uint32_t)e;
	ret->boot_start = (uint64_t)bs;
	ret->expected = (uint64_t)expected;
	ret->clock = (diff < 0 ? -diff : diff) > (__int128)c->delta;
	return 0;
}
