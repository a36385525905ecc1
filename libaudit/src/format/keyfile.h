/* SPDX-License-Identifier: MIT */
/*
 * The v2 key files (docs/format.md 17): the verification key (the auditor's
 * secret), the sealing state (the sealer's) and the checkpoint key pair, read
 * from and written to memory buffers. Pure: no I/O, no allocation; parsing
 * is exact (one form per content) and leaves its output untouched on failure;
 * secrets in temporaries are cleansed.
 */
#ifndef AUDITLOG_KEYFILE_H
#define AUDITLOG_KEYFILE_H

#include "symbols.h"
#include "sealkey.h"
#include "note.h"

#include <stddef.h>
#include <stdint.h>

#define al_vkey_parse auditlog__al_vkey_parse
#define al_vkey_format auditlog__al_vkey_format
#define al_sstate_parse auditlog__al_sstate_parse
#define al_sstate_format auditlog__al_sstate_format
#define al_ckey_parse auditlog__al_ckey_parse
#define al_ckey_format auditlog__al_ckey_format
#define al_seal_host_ok auditlog__al_seal_host_ok
#define al_kv_line auditlog__al_kv_line
#define al_attest_parse auditlog__al_attest_parse
#define al_attest_format auditlog__al_attest_format
#define al_attest_check auditlog__al_attest_check

/* A key's fixed parameters (16.1). */
struct al_seal_params {
	uint8_t host[AL_SEAL_HOST_MAX];
	size_t host_len;
	uint8_t key_id[AL_SEAL_KID_LEN];
	uint64_t t0, delta;
};

struct al_vkey {
	struct al_seal_params p;
	uint8_t seed[AL_SEAL_SEED_LEN]; /* S */
};

struct al_sstate {
	struct al_seal_params p;
	uint64_t max_jump;
	uint8_t boot_id[16];
	uint64_t boot_start;
	struct al_seal_state st; /* epoch and C(epoch) */
};

/* The checkpoint key files: public (is_secret false: key = public key) or
 * signing (key = the RFC 8032 private key). */
struct al_ckey {
	uint8_t host[AL_SEAL_HOST_MAX];
	size_t host_len;
	uint8_t key[32];
};

/* Text files of "<name> <value>" lines (these key files, the witness state
 * and evidence bundles of docs/format.md 18.4 and 20.6): a cursor over the
 * bytes p[0..n), at i. */
struct al_kv {
	const uint8_t *p;
	size_t n, i;
};
/* The next line must be "<name> <value>\n" with a non-empty value: true with
 * the value (not NUL-terminated) and its length, the cursor past the line. */
bool al_kv_line(struct al_kv *c, const char *name, const uint8_t **v, size_t *vn);

/* [a-z0-9][a-z0-9.-]{0,62} */
bool al_seal_host_ok(const uint8_t *host, size_t n);

/* Parse a verification key file; its key-id must be the one its seed and
 * parameters give. -EINVAL for anything not exactly of the format, -EBADMSG
 * for a key id that does not match. */
int al_vkey_parse(const uint8_t *buf, size_t n, struct al_vkey *ret);
/* Write it (the caller cleanses the buffer). Returns the length or -E2BIG /
 * -EINVAL. */
long al_vkey_format(const struct al_vkey *k, char *out, size_t cap);

/* Parse a sealing state file; its node lines must be exactly C(epoch). The
 * key id cannot be checked without S. -EINVAL otherwise. */
int al_sstate_parse(const uint8_t *buf, size_t n, struct al_sstate *ret);
long al_sstate_format(const struct al_sstate *s, char *out, size_t cap);

/* is_secret selects "auditlog-signing-key 2" / "ed25519-seed" over
 * "auditlog-checkpoint-key 2" / "ed25519". */
int al_ckey_parse(const uint8_t *buf, size_t n, bool is_secret, struct al_ckey *ret);
long al_ckey_format(const struct al_ckey *k, bool is_secret, char *out, size_t cap);

/* An attestation statement (docs/format.md 27.1). */
struct al_attest {
	struct al_seal_params p;
	uint32_t epoch;
	uint64_t wall, boot_time; /* ns: CLOCK_REALTIME, CLOCK_BOOTTIME when made */
	uint8_t boot_id[16];
	bool has_nonce;
	uint8_t nonce[32];
	uint8_t mac[AL_HASH_LEN];
};
#define AL_ATTEST_MAX 1024u /* the longest statement is about 500 bytes */

/* Parse a statement exactly (27.1): -EINVAL for anything else. ret_tlen (may
 * be NULL): the length of the text the MAC covers (27.2). No key is needed;
 * the MAC is checked by al_attest_check. */
int al_attest_parse(const uint8_t *buf, size_t n, struct al_attest *ret, size_t *ret_tlen);

/* Write a statement for a's fields with the MAC under the epoch key K =
 * K(a->epoch) (a->mac is ignored). Returns the length or -E2BIG / -EINVAL. */
long al_attest_format(const struct al_attest *a, const uint8_t K[AL_SEAL_SEED_LEN], char *out,
		      size_t cap);

/* Check a parsed statement (buf, n: its bytes) with a verification key:
 * -ENOKEY when its key id is not the key's, -EINVAL when host, t0 or delta
 * differ, -EBADMSG when the MAC fails; 0 when it verifies. */
int al_attest_check(const struct al_attest *a, const uint8_t *buf, size_t n, const struct al_vkey *vk);

#endif
