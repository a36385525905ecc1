/* SPDX-License-Identifier: MIT */
/* The chain step (docs/format.md 5): hash_n = SHA-256(prev || body). */

/*
 * Speed matters here: the worker hashes every record. In OpenSSL 3.0 the
 * one-shot SHA256() goes through EVP_Q_digest, which fetches the algorithm by
 * name on every call (a lock, string compares, an allocation): ~1.2 us for a
 * 300-byte record here, against ~0.32 us for SHA256_Init/Update/Final and
 * ~0.43 us for a pre-fetched EVP_MD with a reused context (measured by
 * bench/auditlog-bench's author, 2026-11-30). The low-level functions are
 * deprecated in 3.0 but present; builds without them fall back to EVP.
 */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/opensslconf.h>
#include <openssl/sha.h>

#include <stdbool.h>
#include <string.h>

#include "format.h"
#include "format_v2.h"

#ifndef OPENSSL_NO_DEPRECATED_3_0
/* SHA-256 for every part of the format (chain steps, bodies, Merkle nodes,
 * notes, HMAC keys longer than a block). Padding it here and handing the
 * block function whole blocks (no copy into the context, no cleanse) cut
 * the v2 worker's instructions by ~10 % under callgrind but changed no
 * measured time with SHA-NI (docs/benchmarks.md, "SHA-256 padded by the
 * caller"): not kept. */
void al_sha256(const void *p, size_t n, uint8_t out[AL_HASH_LEN])
{
	SHA256_CTX c;

	SHA256_Init(&c);
	SHA256_Update(&c, p, n);
	SHA256_Final(out, &c);
}
#else
#include <openssl/evp.h>
void al_sha256(const void *p, size_t n, uint8_t out[AL_HASH_LEN])
{
	unsigned int len = 0;
	/* EVP_Digest with the implicit fetch: slower, but always there */
	(void)EVP_Digest(p, n, out, &len, EVP_sha256(), NULL);
}
#endif

/*
 * Two SHA-256 at once, each of a message already padded to exactly two
 * blocks: the Merkle tree's interior nodes (65 bytes) two by two. With
 * SHA-NI the two compressions run interleaved, each round's instructions of
 * one hiding the other's latency: ~60 ns a node against ~100 for one at a
 * time through SHA256_Init/Update/Final on the test VM (docs/benchmarks.md,
 * "Merkle nodes two at a time"). Without SHA-NI (or off x86-64): OpenSSL,
 * one after the other. The CPU is asked once, by whoever holds the state
 * (the writer at open: a CPUID is a VM exit on a guest). The constants are
 * FIPS 180-4's (4.2.2, 5.3.3).
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

static const uint32_t sha_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};
static const uint32_t sha_iv[8] = {
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

#define SHANI __attribute__((target("sha,sse4.1,ssse3")))
#define SHANI_INLINE SHANI __attribute__((always_inline)) static inline

/* The big-endian word order of a block, lane by lane. */
SHANI_INLINE __m128i be_mask(void)
{
	return _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
}

/* One 64-byte block into each of two states, held as SHA-NI wants them
 * (s0 = ABEF, s1 = CDGH). The message schedule is kept four words to a
 * register, X[j] = W[4j..4j+3], X[j] from X[j-4..j-1] (FIPS 180-4 6.2.2). */
SHANI_INLINE void block_x2(__m128i *s0, __m128i *s1, const uint8_t *p, __m128i *t0, __m128i *t1,
			  const uint8_t *q)
{
	const __m128i bs = be_mask();
	__m128i x[4], y[4], a0 = *s0, a1 = *s1, b0 = *t0, b1 = *t1;

#pragma GCC unroll 16
	for (int j = 0; j < 16; j++) {
		__m128i k = _mm_loadu_si128((const __m128i *)(sha_k + 4 * j)), m, n;

		if (j < 4) {
			x[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), bs);
			y[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(q + 16 * j)), bs);
		} else {
			x[j & 3] = _mm_sha256msg2_epu32(
				_mm_add_epi32(_mm_sha256msg1_epu32(x[j & 3], x[(j + 1) & 3]),
					      _mm_alignr_epi8(x[(j + 3) & 3], x[(j + 2) & 3], 4)),
				x[(j + 3) & 3]);
			y[j & 3] = _mm_sha256msg2_epu32(
				_mm_add_epi32(_mm_sha256msg1_epu32(y[j & 3], y[(j + 1) & 3]),
					      _mm_alignr_epi8(y[(j + 3) & 3], y[(j + 2) & 3], 4)),
				y[(j + 3) & 3]);
		}
		m = _mm_add_epi32(x[j & 3], k);
		n = _mm_add_epi32(y[j & 3], k);
		a1 = _mm_sha256rnds2_epu32(a1, a0, m);
		b1 = _mm_sha256rnds2_epu32(b1, b0, n);
		a0 = _mm_sha256rnds2_epu32(a0, a1, _mm_shuffle_epi32(m, 0x0E));
		b0 = _mm_sha256rnds2_epu32(b0, b1, _mm_shuffle_epi32(n, 0x0E));
	}
	*s0 = _mm_add_epi32(*s0, a0);
	*s1 = _mm_add_epi32(*s1, a1);
	*t0 = _mm_add_epi32(*t0, b0);
	*t1 = _mm_add_epi32(*t1, b1);
}

SHANI_INLINE void state_iv(__m128i *s0, __m128i *s1)
{
	__m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)sha_iv), 0xB1);     /* CDAB */
	__m128i u = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(sha_iv + 4)), 0x1B); /* EFGH */

	*s0 = _mm_alignr_epi8(t, u, 8);     /* ABEF */
	*s1 = _mm_blend_epi16(u, t, 0xF0); /* CDGH */
}

SHANI_INLINE void state_out(__m128i s0, __m128i s1, uint8_t out[AL_HASH_LEN])
{
	__m128i t = _mm_shuffle_epi32(s0, 0x1B), u = _mm_shuffle_epi32(s1, 0xB1);

	_mm_storeu_si128((__m128i *)out, _mm_shuffle_epi8(_mm_blend_epi16(t, u, 0xF0), be_mask()));
	_mm_storeu_si128((__m128i *)(out + 16), _mm_shuffle_epi8(_mm_alignr_epi8(u, t, 8), be_mask()));
}

/* Pad the n-byte message at the start of b (56 <= n <= 119) to two blocks. */
static void pad_2blk(uint8_t b[128], size_t n)
{
	uint64_t bits = (uint64_t)n * 8;

	b[n] = 0x80;
	memset(b + n + 1, 0, 128 - 8 - (n + 1));
	for (int i = 0; i < 8; i++)
		b[127 - i] = (uint8_t)(bits >> (8 * i));
}

static SHANI void sha256_2blk_x2_ni(const uint8_t a[128], const uint8_t b[128], uint8_t oa[AL_HASH_LEN],
				    uint8_t ob[AL_HASH_LEN])
{
	__m128i s0, s1, t0, t1;

	state_iv(&s0, &s1);
	state_iv(&t0, &t1);
	block_x2(&s0, &s1, a, &t0, &t1, b);
	block_x2(&s0, &s1, a + 64, &t0, &t1, b + 64);
	state_out(s0, s1, oa);
	state_out(t0, t1, ob);
}

bool al_sha256_ni_ok(void)
{
	unsigned a, b, c, d;

	/* leaf 1: SSSE3 (ECX 9), SSE4.1 (ECX 19); leaf 7: SHA (EBX 29) */
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19)))
		return false;
	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
}
#else
bool al_sha256_ni_ok(void)
{
	return false;
}
#endif

void al_sha256_2blk_x2(uint8_t a[128], size_t na, uint8_t b[128], size_t nb, uint8_t oa[AL_HASH_LEN],
		       uint8_t ob[AL_HASH_LEN], bool fast)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (fast) {
		pad_2blk(a, na);
		pad_2blk(b, nb);
		sha256_2blk_x2_ni(a, b, oa, ob);
		return;
	}
#endif
	(void)fast;
	al_sha256(a, na, oa);
	al_sha256(b, nb, ob);
}

void al_chain_step_inplace(uint8_t *buf, size_t body_len, uint8_t out[AL_HASH_LEN])
{
	al_sha256(buf, AL_HASH_LEN + body_len, out);
}
