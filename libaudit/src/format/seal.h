/* SPDX-License-Identifier: MIT */
/*
 * The seal record (docs/format.md 19), built and checked in one place for the
 * writer (or sealer) and the verifier: its members, its MAC over the body
 * without `mac`, the key id and chain id it must name. Pure: no I/O, no
 * allocation.
 */
#ifndef AUDITLOG_SEAL_H
#define AUDITLOG_SEAL_H

#include "symbols.h"
#include "format_v2.h"
#include "sealkey.h"

#define al_v2_seal_sign auditlog__al_v2_seal_sign
#define al_v2_seal_check auditlog__al_v2_seal_check
#define al_v2_seal_check_cached auditlog__al_v2_seal_check_cached

/* Fill s->mac (and has_mac) for a seal at (prev, seq, ts) with the MAC key
 * of s->epoch. 0 or -EINVAL / -EIO. */
int al_v2_seal_sign(struct al_v2_seal *s, const uint8_t kmac[AL_HASH_LEN],
		    const uint8_t prev[AL_HASH_LEN], uint64_t seq, const char ts[AL_TS_LEN]);

/* Check a parsed seal record's members m (line order) at (prev, seq, ts)
 * against the verification key (walk w, key id) and the chain's id (32 hex):
 *   0        the MAC verifies (ret_epoch: its epoch);
 *   -ENOKEY  its seal_key is not this key's (unknown-key);
 *   -EBADMSG its chain id is another chain's, or the MAC fails (bad-seal);
 *   -EINVAL  the members break section 12/19's rules (not a seal). */
int al_v2_seal_check(struct al_seal_walk *w, const uint8_t key_id[AL_SEAL_KID_LEN],
		     const uint8_t chain_id[32], const uint8_t prev[AL_HASH_LEN], uint64_t seq,
		     const char ts[AL_TS_LEN], const struct al_v2_member *m, size_t n,
		     uint32_t *ret_epoch);

/* A verifier's MAC key of the last epoch it checked (a token-shaped log has
 * a seal a record, mostly of one epoch): holds key material, cleanse it. */
struct al_seal_kmac {
	bool have;
	uint32_t epoch;
	uint8_t kmac[AL_HASH_LEN];
};

/* al_v2_seal_check, taking Kmac(epoch) from cache when it holds that epoch
 * and keeping it there (cache NULL: al_v2_seal_check). */
int al_v2_seal_check_cached(struct al_seal_walk *w, struct al_seal_kmac *cache,
			    const uint8_t key_id[AL_SEAL_KID_LEN], const uint8_t chain_id[32],
			    const uint8_t prev[AL_HASH_LEN], uint64_t seq, const char ts[AL_TS_LEN],
			    const struct al_v2_member *m, size_t n, uint32_t *ret_epoch);

#endif
