/* SPDX-License-Identifier: MIT */
/*
 * Seal keys (docs/format.md 16, 19.3): the depth-32 one-way tree of epoch
 * keys, the per-epoch MAC key, the key id, the covering set a sealing state
 * holds (forward security) and the seal MAC. Pure: no I/O; every buffer that
 * held a seed is cleansed before it is released.
 */
#ifndef AUDITLOG_SEALKEY_H
#define AUDITLOG_SEALKEY_H

#include "symbols.h"
#include "format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define al_seal_node auditlog__al_seal_node
#define al_seal_mac_key auditlog__al_seal_mac_key
#define al_seal_key_id auditlog__al_seal_key_id
#define al_seal_state_init auditlog__al_seal_state_init
#define al_seal_state_advance auditlog__al_seal_state_advance
#define al_seal_state_wipe auditlog__al_seal_state_wipe
#define al_seal_walk_init auditlog__al_seal_walk_init
#define al_seal_walk_key auditlog__al_seal_walk_key
#define al_seal_walk_wipe auditlog__al_seal_walk_wipe
#define al_seal_mac auditlog__al_seal_mac
#define al_seal_mac_check auditlog__al_seal_mac_check
#define al_hmac_sha256 auditlog__al_hmac_sha256
#define al_seal_schedule auditlog__al_seal_schedule
#define al_attest_mac auditlog__al_attest_mac

#define AL_SEAL_DEPTH 32u
#define AL_SEAL_SEED_LEN 32u
#define AL_SEAL_KID_LEN 8u
#define AL_SEAL_HOST_MAX 63u
#define AL_SEAL_SCHEME 0x01u /* hmac-sha256-tree32 */

/* HMAC-SHA-256 (RFC 2104) of m under key; 0 or -errno. */
int al_hmac_sha256(const uint8_t *key, size_t klen, const void *m, size_t n,
		   uint8_t out[AL_HASH_LEN]);

/* node(depth, index) derived from the root S: `depth` HMACs. index < 2^depth. */
int al_seal_node(const uint8_t S[AL_SEAL_SEED_LEN], unsigned depth, uint64_t index,
		 uint8_t out[AL_SEAL_SEED_LEN]);

/* Kmac(e) = HMAC(K(e), "auditlog-v2 seal mac key"). */
int al_seal_mac_key(const uint8_t K[AL_SEAL_SEED_LEN], uint8_t out[AL_HASH_LEN]);

/* The key id of section 16.4. host: 1-63 bytes. */
int al_seal_key_id(const uint8_t S[AL_SEAL_SEED_LEN], const uint8_t *host, size_t host_len,
		   uint64_t t0, uint64_t delta, uint8_t out[AL_SEAL_KID_LEN]);

/* A sealing state: the covering set C(epoch), in ascending epoch order. */
struct al_seal_node_slot {
	uint8_t depth;
	uint32_t index;
	uint8_t seed[AL_SEAL_SEED_LEN];
};
struct al_seal_state {
	uint32_t epoch;
	unsigned n;
	struct al_seal_node_slot node[AL_SEAL_DEPTH + 1];
};

/* C(e) from the root (keygen, tests). */
int al_seal_state_init(struct al_seal_state *st, const uint8_t S[AL_SEAL_SEED_LEN], uint32_t e);

/* Move forward to epoch e (>= the current one) using only the kept seeds;
 * every seed no longer needed is cleansed. -EINVAL for an earlier epoch. The
 * current K(epoch) is st->node[0].seed. */
int al_seal_state_advance(struct al_seal_state *st, uint32_t e);

void al_seal_state_wipe(struct al_seal_state *st);

/* A verifier's walk from S: keeps the path of the last epoch, so consecutive
 * epochs cost about two HMACs instead of 32. Holds S: wipe it. */
struct al_seal_walk {
	uint8_t path[AL_SEAL_DEPTH + 1][AL_SEAL_SEED_LEN]; /* path[0] = S */
	uint32_t epoch;
	bool have;
};

/* Set up from S (copied). */
void al_seal_walk_init(struct al_seal_walk *w, const uint8_t S[AL_SEAL_SEED_LEN]);

/* K(e) into out. */
int al_seal_walk_key(struct al_seal_walk *w, uint32_t e, uint8_t out[AL_SEAL_SEED_LEN]);
void al_seal_walk_wipe(struct al_seal_walk *w);

/* mac = HMAC(kmac, "auditlog-v2 seal" 0x00 || prev || le64(seq) || ts || sbody)
 * (section 19.3; sbody: the seal's v2 body without its mac member). */
int al_seal_mac(const uint8_t kmac[AL_HASH_LEN], const uint8_t prev[AL_HASH_LEN], uint64_t seq,
		const char ts[AL_TS_LEN], const uint8_t *sbody, size_t n, uint8_t out[AL_HASH_LEN]);

/* Recompute and compare in constant time: true when mac matches. */
bool al_seal_mac_check(const uint8_t kmac[AL_HASH_LEN], const uint8_t prev[AL_HASH_LEN],
		       uint64_t seq, const char ts[AL_TS_LEN], const uint8_t *sbody, size_t n,
		       const uint8_t mac[AL_HASH_LEN]);

/* An attestation statement's MAC (docs/format.md 27.2): Katt(e) =
 * HMAC(K(e), "auditlog-v2 attest key"), then HMAC(Katt(e), "auditlog-v2
 * attestation" 0x00 || t) over the statement's text t before its mac line. */
int al_attest_mac(const uint8_t K[AL_SEAL_SEED_LEN], const uint8_t *t, size_t n,
		  uint8_t out[AL_HASH_LEN]);

/* The epoch schedule of a sealing state (docs/format.md 17.2 rules 1-4). */
struct al_seal_clock {
	uint64_t t0, delta, max_jump; /* the key's parameters */
	uint32_t epoch;               /* the state's epoch ... */
	uint8_t boot_id[16];          /* ... the boot it was written in ... */
	uint64_t boot_start;          /* ... and CLOCK_BOOTTIME when that epoch began */
};
struct al_seal_sched {
	uint32_t epoch;      /* the current epoch */
	uint64_t boot_start; /* CLOCK_BOOTTIME at which it began (the state to write) */
	uint64_t expected;   /* the wall time the state predicts now */
	bool clock;          /* the wall clock is more than delta away: a clock record */
};

/* Where the schedule stands now: boot id, CLOCK_BOOTTIME and wall clock (ns).
 * -EINVAL for a boot clock below the state's boot-start in the same boot (or
 * delta 0), -ERANGE once the key is exhausted (17.2 rule 4). ret is
 * written only on success. */
int al_seal_schedule(const struct al_seal_clock *c, const uint8_t boot_id[16], uint64_t boottime,
		     uint64_t wall, struct al_seal_sched *ret);

#endif
