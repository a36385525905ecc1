/* SPDX-License-Identifier: MIT */
/* The chain step (docs/format.md 5): hash_n = SHA-256(prev || body). */
#include <string.h>

#include <openssl/sha.h>

#include "format.h"

void al_chain_step_inplace(uint8_t *buf, size_t body_len, uint8_t out[AL_HASH_LEN])
{
	/* One-shot SHA256() runs the low-level implementation directly: no EVP
	 * context, no provider lookup per record. */
	SHA256(buf, AL_HASH_LEN + body_len, out);
}
