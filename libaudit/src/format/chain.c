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

void al_chain_step_inplace(uint8_t *buf, size_t body_len, uint8_t out[AL_HASH_LEN])
{
	al_sha256(buf, AL_HASH_LEN + body_len, out);
}
