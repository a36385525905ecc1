/* SPDX-License-Identifier: MIT */
/*
 * C2SP signed notes and tlog checkpoints (docs/format.md 20): the checkpoint
 * text of a v2 chain, the note key id, Ed25519 (RFC 8032) signing and
 * verification through OpenSSL's EVP. Pure: no I/O; OpenSSL allocates its
 * key objects (once per checkpoint, never per record).
 */
#ifndef AUDITLOG_NOTE_H
#define AUDITLOG_NOTE_H

#include "symbols.h"
#include "format.h"

#include <stddef.h>
#include <stdint.h>

#define al_ed25519_public auditlog__al_ed25519_public
#define al_ed25519_sign auditlog__al_ed25519_sign
#define al_ed25519_verify auditlog__al_ed25519_verify
#define al_note_key_id auditlog__al_note_key_id
#define al_checkpoint_origin auditlog__al_checkpoint_origin
#define al_checkpoint_text auditlog__al_checkpoint_text
#define al_note_sign auditlog__al_note_sign
#define al_note_verify auditlog__al_note_verify
#define al_cosig_key_id auditlog__al_cosig_key_id
#define al_cosig_line auditlog__al_cosig_line
#define al_cosig_verify auditlog__al_cosig_verify

#define AL_ED25519_SEED_LEN 32u
#define AL_ED25519_PUB_LEN 32u
#define AL_ED25519_SIG_LEN 64u
#define AL_NOTE_KID_LEN 4u
/* origin: host (<= 63) + "/auditlog/" + 32 hex */
#define AL_ORIGIN_MAX (63u + 10u + 32u)
#define AL_NOTE_NAME_MAX 255u
/* a checkpoint note: text (origin, size, root, 3 extension lines) + blank
 * line + one signature line; comfortably below this */
#define AL_NOTE_MAX 1024u
/* a cosignature's signature: key id, time (8 bytes), Ed25519 signature */
#define AL_COSIG_BLOB_LEN (AL_NOTE_KID_LEN + 8u + AL_ED25519_SIG_LEN)
#define AL_COSIG_B64_LEN 104u

int al_ed25519_public(const uint8_t seed[AL_ED25519_SEED_LEN], uint8_t pub[AL_ED25519_PUB_LEN]);
int al_ed25519_sign(const uint8_t seed[AL_ED25519_SEED_LEN], const uint8_t *m, size_t n,
		    uint8_t sig[AL_ED25519_SIG_LEN]);
/* 0 when sig is pub's signature of m, -EBADMSG otherwise. */
int al_ed25519_verify(const uint8_t pub[AL_ED25519_PUB_LEN], const uint8_t *m, size_t n,
		      const uint8_t sig[AL_ED25519_SIG_LEN]);

/* key id = SHA-256(name || 0x0A || 0x01 || pub)[0:4] (C2SP signed-note).
 * -EINVAL for an empty name or one longer than AL_NOTE_NAME_MAX. */
int al_note_key_id(const uint8_t *name, size_t n, const uint8_t pub[AL_ED25519_PUB_LEN],
		   uint8_t out[AL_NOTE_KID_LEN]);

/* "<host>/auditlog/<chain id>" into out (AL_ORIGIN_MAX); returns its length or
 * -EINVAL (host 1-63 bytes, chain id 32 bytes). */
long al_checkpoint_origin(const uint8_t *host, size_t hlen, const uint8_t chain_id[32],
			  uint8_t *out);

/* The note text of section 20.2 (origin, size, b64 root, "seq", "head",
 * "first-seq" lines). Returns its length or -E2BIG / -EINVAL (size 0). */
long al_checkpoint_text(const uint8_t *origin, size_t olen, uint64_t size,
			const uint8_t root[AL_HASH_LEN], uint64_t last_seq,
			const uint8_t head[AL_HASH_LEN], uint64_t first_seq, uint8_t *out,
			size_t cap);

/* text (ending in '\n') + "\n" + "— <name> <b64(key id || sig)>\n" into out.
 * pub: the seed's public key (al_ed25519_public), which the key id needs;
 * the caller derives it once (a scalar multiplication, as costly as half the
 * signature), not at every note. Returns the note's length or -E2BIG /
 * -EINVAL / -EIO. */
long al_note_sign(const uint8_t seed[AL_ED25519_SEED_LEN], const uint8_t *pub, const uint8_t *name,
		  size_t nlen, const uint8_t *text, size_t tlen, uint8_t *out, size_t cap);

/* Open a signed note with one known key (name, pub): the note is split at
 * its last blank line; signature lines of other keys are ignored. Returns 0
 * when a signature of that key verifies (ret_text_len: the text's length,
 * final '\n' included), -EBADMSG for a malformed note or a signature of that
 * key that fails, -ENOKEY when no line carries that key. */
int al_note_verify(const uint8_t pub[AL_ED25519_PUB_LEN], const uint8_t *name, size_t nlen,
		   const uint8_t *note, size_t len, size_t *ret_text_len);

/* C2SP tlog-cosignature/v1 (a witness's signature on a checkpoint note,
 * docs/format.md 20.6): key id = SHA-256(name || 0x0A || 0x04 || pub)[0:4];
 * the signature line is "— <name> b64(key id || t (8 bytes, big-endian) ||
 * sig)" where sig is the Ed25519 signature of "cosignature/v1\ntime <t>\n"
 * || the note's text (t: seconds since the epoch, in decimal). */
int al_cosig_key_id(const uint8_t *name, size_t n, const uint8_t pub[AL_ED25519_PUB_LEN],
		    uint8_t out[AL_NOTE_KID_LEN]);
/* That line (with its '\n') for text (ending in '\n') into out: its length,
 * or -EINVAL (a name with a space or '+', empty or too long), -E2BIG, -EIO,
 * -ENOMEM. */
long al_cosig_line(const uint8_t seed[AL_ED25519_SEED_LEN], const uint8_t *name, size_t nlen, uint64_t t,
		   const uint8_t *text, size_t tlen, uint8_t *out, size_t cap);
/* A note's cosignature by (name, pub): 0 when one verifies and none by that
 * key fails (ret_time: its t, the latest if several), -EBADMSG for a
 * malformed note or a cosignature line of that key (name and key id) whose
 * signature fails (its time or the text changed), -ENOKEY when no line
 * carries that key, -ENOMEM. */
int al_cosig_verify(const uint8_t pub[AL_ED25519_PUB_LEN], const uint8_t *name, size_t nlen,
		    const uint8_t *note, size_t len, uint64_t *ret_time);

#endif
