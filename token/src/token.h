/* SPDX-License-Identifier: MIT */
/*
 * libsofttoken internals. Two halves meet here:
 *
 *  - the module core (module.c, session.c, object.c, store.c, audit.c,
 *    config.c): PKCS#11 entry points, slots, sessions, login, objects, the
 *    persistent store and the audit trail; it owns every CK_* buffer rule
 *    (NULL output = length query, CKR_BUFFER_TOO_SMALL keeps the operation)
 *    and the operation state machine (ACTIVE / NOT_INITIALIZED);
 *  - the crypto engine (mech.c, keys.c): mechanisms on OpenSSL 3 EVP, key
 *    generation, key import/export, wrapping. It never sees a session, a
 *    handle or the audit log; it answers CK_RV.
 *
 * Everything is internal (hidden visibility); the module exports only
 * C_GetFunctionList and C_GetInterfaceList.
 */
#ifndef TOK_TOKEN_H
#define TOK_TOKEN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <p11-kit/pkcs11.h>

/* ---- attribute sets -------------------------------------------------------
 * An object is its attribute set. Values are owned copies; every value is
 * cleansed when replaced or freed. A value of at most TOK_ATTR_INLINE bytes
 * (each CK_BBOOL and CK_ULONG: most of a key's 30-odd attributes) lives in
 * its entry, not in a heap block of its own, so that building an object
 * costs a few allocations rather than one per attribute. Such a value moves
 * with the set's array: a value pointer is valid until the set is next
 * changed, as an entry pointer always was.
 */
#define TOK_ATTR_INLINE 8
struct tok_attr {
	CK_ATTRIBUTE_TYPE type;
	CK_ULONG len;
	uint8_t *value; /* NULL when len == 0; inl when len <= TOK_ATTR_INLINE */
	uint8_t inl[TOK_ATTR_INLINE];
};

struct tok_attrs {
	size_t n, cap;
	struct tok_attr *a;
	/* A bit per hash of each type ever set since the set was last empty:
	 * a clear bit means absent without a scan (most of the look-ups that
	 * complete a new object's defaults are of absent types). */
	uint64_t seen[2];
};

void tok_attrs_free(struct tok_attrs *s); /* cleanses every value */
const struct tok_attr *tok_attrs_get(const struct tok_attrs *s, CK_ATTRIBUTE_TYPE t);
/* Set (replace or add) a copy of value. CKR_OK or CKR_HOST_MEMORY. */
CK_RV tok_attrs_set(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, const void *value, CK_ULONG len);
/* Set t to value, a malloc'd buffer of len bytes the set takes over (or
 * cleanses and frees, when it keeps the value inline or cannot grow). */
CK_RV tok_attrs_take(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, uint8_t *value, CK_ULONG len);
/* Move every attribute of src into dst, replacing dst's of the same types;
 * the values are handed over, not copied (a key's parts then exist once on
 * the heap). src is left empty, also on CKR_HOST_MEMORY (what was not moved
 * yet is cleansed and freed). */
CK_RV tok_attrs_move(struct tok_attrs *dst, struct tok_attrs *src);
CK_RV tok_attrs_set_ulong(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, CK_ULONG v);
CK_RV tok_attrs_set_bool(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, bool v);
void tok_attrs_del(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t);
/* Typed reads: false when absent or of the wrong length. */
bool tok_attrs_ulong(const struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, CK_ULONG *ret);
/* A CK_BBOOL attribute, dflt when absent. */
bool tok_attrs_bool(const struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, bool dflt);
/* Copy every attribute of a caller's template (validated lengths of typed
 * attributes: CK_ULONG and CK_BBOOL ones). CKR_ATTRIBUTE_VALUE_INVALID,
 * CKR_TEMPLATE_INCONSISTENT (an attribute twice), CKR_ARGUMENTS_BAD. */
CK_RV tok_attrs_from_template(struct tok_attrs *s, const CK_ATTRIBUTE *t, CK_ULONG n);
CK_RV tok_attrs_copy(struct tok_attrs *dst, const struct tok_attrs *src);

/* ---- objects ------------------------------------------------------------- */
struct tok_token;

struct tok_object {
	CK_OBJECT_HANDLE handle;
	atomic_uint refs;          /* the token's table holds one */
	pthread_mutex_t mu;        /* guards attrs and cache */
	struct tok_attrs attrs;
	CK_OBJECT_CLASS cls;       /* fixed at creation */
	CK_KEY_TYPE key_type;      /* CKK_* for keys, (CK_ULONG)-1 otherwise */
	bool token_obj;            /* CKA_TOKEN */
	bool private_obj;          /* CKA_PRIVATE: invisible until login */
	CK_SESSION_HANDLE owner;   /* session objects: the session that made it */
	atomic_bool destroyed;     /* removed from the table; freed at the last unref */
	char uuid[33];             /* token objects: file name in the store */
	void *cache;               /* engine's prepared key (EVP_PKEY, ...), see tok_key_cache_free */
};

/* ---- crypto engine (mech.c / keys.c) --------------------------------------
 * Engine functions that take a struct tok_object read its attributes; the
 * caller holds key->mu for the duration of the call. An operation keeps no
 * pointer to the object once tok_op_init returns.
 */
CK_RV tok_crypto_init(void);   /* fetch algorithms once (C_Initialize) */
void tok_crypto_fini(void);    /* release them (C_Finalize) */
/* rsa_min_bits (1024..4096; tok_crypto_init sets 2048): the smallest RSA
 * modulus generated, imported as a private key, or used for signing,
 * decryption and encryption; C_GetMechanismInfo reports it as ulMinKeySize
 * of every RSA mechanism. Public keys down to 1024 bits are imported and
 * verify signatures. Call after tok_crypto_init, before any operation. */
void tok_crypto_set_rsa_min_bits(unsigned bits);
/* keygen_ahead (tok_crypto_init sets it on): one spare P-256 and P-384 key
 * pair made ahead by a helper thread (keyahead.c, docs/token.md). Call after
 * tok_crypto_init, before any operation. */
void tok_crypto_set_keygen_ahead(bool on);
/* A child of fork(): forget what the parent made ahead (its atfork handler). */
void tok_crypto_atfork_child(void);
void tok_key_cache_free(void *cache);

struct tok_mech_info {
	CK_MECHANISM_TYPE type;
	CK_MECHANISM_INFO info;
};
/* The mechanisms the token advertises; every one of them works. */
const struct tok_mech_info *tok_mech_table(size_t *ret_n);

enum tok_opkind { TOK_OP_ENCRYPT, TOK_OP_DECRYPT, TOK_OP_SIGN, TOK_OP_VERIFY, TOK_OP_DIGEST };

struct tok_op; /* one active cryptographic operation */

/* Check the mechanism, its parameters and the key (type, size, and the usage
 * attribute the kind needs: CKA_ENCRYPT, CKA_DECRYPT, CKA_SIGN, CKA_VERIFY;
 * key is NULL for TOK_OP_DIGEST) and start an operation. Answers
 * CKR_MECHANISM_INVALID, CKR_MECHANISM_PARAM_INVALID,
 * CKR_KEY_TYPE_INCONSISTENT, CKR_KEY_FUNCTION_NOT_PERMITTED, CKR_KEY_SIZE_RANGE,
 * CKR_HOST_MEMORY, CKR_DEVICE_ERROR. */
CK_RV tok_op_init(enum tok_opkind kind, const CK_MECHANISM *mech, struct tok_object *key,
		  struct tok_op **ret_op);
void tok_op_free(struct tok_op *op);
/* A finished digest made ready for the next one with the same mechanism:
 * its OpenSSL context is reinitialised instead of allocated anew (a digest
 * costs a fraction of a microsecond: the allocations were half of our
 * per-call cost). CKR_OK, or CKR_MECHANISM_INVALID when op cannot serve
 * mech (free it and make a new one). */
CK_RV tok_op_reinit_digest(struct tok_op *op, const CK_MECHANISM *mech);
bool tok_op_multipart_ok(const struct tok_op *op); /* false: single-part only (e.g. raw RSA) */

/* Output-producing steps share one buffer rule, which the engine implements
 * exactly: out == NULL sets *out_len to the size that suffices and changes
 * nothing; *out_len too small returns CKR_BUFFER_TOO_SMALL with the size
 * needed and changes nothing (the same call may be repeated); otherwise the
 * step runs and *out_len is the bytes written. Any other error leaves the
 * operation unusable (the core then ends it).
 *
 * oneshot: C_Encrypt, C_Decrypt, C_Sign, C_Digest (whole input at once).
 * update: C_EncryptUpdate / C_DecryptUpdate (output) and C_SignUpdate /
 *         C_VerifyUpdate / C_DigestUpdate (out NULL, out_len NULL).
 * final: C_EncryptFinal / C_DecryptFinal / C_SignFinal / C_DigestFinal. */
CK_RV tok_op_oneshot(struct tok_op *op, const uint8_t *in, size_t in_len, uint8_t *out, CK_ULONG *out_len);
CK_RV tok_op_update(struct tok_op *op, const uint8_t *in, size_t in_len, uint8_t *out, CK_ULONG *out_len);
CK_RV tok_op_final(struct tok_op *op, uint8_t *out, CK_ULONG *out_len);
/* C_Verify and C_VerifyFinal: CKR_OK, CKR_SIGNATURE_INVALID, CKR_SIGNATURE_LEN_RANGE. */
CK_RV tok_op_verify(struct tok_op *op, const uint8_t *data, size_t len, const uint8_t *sig, size_t sig_len);
CK_RV tok_op_verify_final(struct tok_op *op, const uint8_t *sig, size_t sig_len);
/* C_DigestKey: feed a secret key's value into a digest operation. */
CK_RV tok_op_digest_key(struct tok_op *op, struct tok_object *key);

/* Key generation: fill the attributes the mechanism determines (CKA_VALUE and
 * CKA_VALUE_LEN for secrets; CKA_EC_PARAMS/CKA_EC_POINT/CKA_VALUE,
 * CKA_MODULUS/CKA_PUBLIC_EXPONENT/CKA_PRIVATE_EXPONENT/primes/exponents/
 * coefficient for RSA, CKA_EC_PARAMS/CKA_EC_POINT/CKA_VALUE for Ed25519),
 * plus CKA_KEY_TYPE, CKA_LOCAL=TRUE, CKA_KEY_GEN_MECHANISM. The template is the
 * caller's (for CKA_VALUE_LEN, CKA_EC_PARAMS, CKA_MODULUS_BITS,
 * CKA_PUBLIC_EXPONENT). Answers CKR_TEMPLATE_INCOMPLETE,
 * CKR_ATTRIBUTE_VALUE_INVALID, CKR_KEY_SIZE_RANGE, CKR_CURVE_NOT_SUPPORTED,
 * CKR_MECHANISM_INVALID. The core adds defaults and usage flags and checks
 * the class/key type the caller asked for. */
CK_RV tok_generate_key(const CK_MECHANISM *mech, const struct tok_attrs *tmpl, struct tok_attrs *out);
CK_RV tok_generate_key_pair(const CK_MECHANISM *mech, const struct tok_attrs *pub_tmpl,
			    const struct tok_attrs *priv_tmpl, struct tok_attrs *pub_out,
			    struct tok_attrs *priv_out);
/* The same, and where OpenSSL made the pair itself (RSA, Ed25519) its key
 * as a prepared key for the private key object into *ret_cache (a
 * struct tok_object's cache, freed by tok_key_cache_free); else *ret_cache
 * is left alone. */
CK_RV tok_generate_key_pair_cached(const CK_MECHANISM *mech, const struct tok_attrs *pub_tmpl,
				   const struct tok_attrs *priv_tmpl, struct tok_attrs *pub_out,
				   struct tok_attrs *priv_out, void **ret_cache);
/* The key type a key pair generation mechanism makes, or
 * CKR_MECHANISM_INVALID: known before the pair is made, so that the caller
 * checks its templates and session first. */
CK_RV tok_key_pair_type(CK_MECHANISM_TYPE m, CK_KEY_TYPE *ret_kt);

/* C_CreateObject / C_UnwrapKey: check a key's material for its class and type
 * (lengths, a point on the curve, consistent RSA parts) and complete derived
 * public attributes (CKA_VALUE_LEN; for a private key created without its
 * public part, CKA_EC_POINT or CKA_MODULUS/CKA_PUBLIC_EXPONENT when derivable).
 * CKR_TEMPLATE_INCOMPLETE, CKR_ATTRIBUTE_VALUE_INVALID, CKR_KEY_SIZE_RANGE. */
CK_RV tok_key_check(CK_OBJECT_CLASS cls, CK_KEY_TYPE kt, struct tok_attrs *attrs);

/* Wrapping (CKM_AES_KEY_WRAP, CKM_AES_KEY_WRAP_PAD). The wrapped value is a
 * secret key's CKA_VALUE, or a private key's PKCS#8 PrivateKeyInfo DER. Same
 * buffer rule as tok_op_oneshot. CKR_KEY_NOT_WRAPPABLE,
 * CKR_WRAPPING_KEY_TYPE_INCONSISTENT, CKR_KEY_FUNCTION_NOT_PERMITTED
 * (the wrapping key lacks CKA_WRAP / the unwrapping key CKA_UNWRAP),
 * CKR_KEY_SIZE_RANGE (AES_KEY_WRAP of a value not a multiple of 8). */
CK_RV tok_wrap(const CK_MECHANISM *mech, struct tok_object *wrapping, struct tok_object *key,
	       uint8_t *out, CK_ULONG *out_len);
/* Unwrap into out: CKA_VALUE (+ CKA_VALUE_LEN) for cls CKO_SECRET_KEY, or the
 * private key's attributes from PKCS#8 (CKA_KEY_TYPE set from the DER) for
 * CKO_PRIVATE_KEY. CKR_WRAPPED_KEY_INVALID, CKR_WRAPPED_KEY_LEN_RANGE,
 * CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT. */
CK_RV tok_unwrap(const CK_MECHANISM *mech, struct tok_object *unwrapping, CK_OBJECT_CLASS cls,
		 CK_KEY_TYPE kt, const uint8_t *wrapped, size_t wrapped_len, struct tok_attrs *out);

/* C_DeriveKey with CKM_ECDH1_DERIVE (CKD_NULL, CKD_SHA256_KDF): fill out
 * with CKA_VALUE and CKA_VALUE_LEN of a new secret key of type kt
 * (CKK_GENERIC_SECRET or CKK_AES; length from the template's CKA_VALUE_LEN,
 * else Z's for CKD_NULL, 32 for the KDF). The base key: an EC private key
 * with CKA_DERIVE. CKR_MECHANISM_PARAM_INVALID (a bad peer point or KDF),
 * CKR_KEY_TYPE_INCONSISTENT, CKR_KEY_FUNCTION_NOT_PERMITTED,
 * CKR_TEMPLATE_INCOMPLETE, CKR_ATTRIBUTE_VALUE_INVALID, CKR_KEY_SIZE_RANGE. */
CK_RV tok_derive(const CK_MECHANISM *mech, struct tok_object *base, CK_KEY_TYPE kt, const struct tok_attrs *tmpl,
		 struct tok_attrs *out);

/* The store's crypto (store.c), in the engine's private library context:
 * AES-256-GCM over in[0..len) with aad (enc: out and tag written; else tag
 * checked, false on a mismatch); PBKDF2-HMAC-SHA256 of a PIN into 32 bytes;
 * HMAC-SHA256(key, label). False on any failure (OpenSSL's error queue
 * cleared). */
bool tok_store_gcm(bool enc, const uint8_t key[32], const uint8_t nonce[12], const uint8_t *aad,
		   size_t aad_len, const uint8_t *in, size_t len, uint8_t *out, uint8_t tag[16]);
bool tok_store_pbkdf2(const uint8_t *pin, size_t len, const uint8_t *salt, size_t salt_len, uint64_t iterations,
		      uint8_t out[32]);
bool tok_store_hmac(const uint8_t key[32], const char *label, uint8_t out[32]);

CK_RV tok_random(uint8_t *buf, size_t len);          /* RAND_bytes */
CK_RV tok_seed_random(const uint8_t *buf, size_t len); /* RAND_add */

/* Attributes whose value is secret (never returned for a sensitive or
 * non-extractable key): CKA_VALUE of secret and private keys, the RSA
 * private parts. */
bool tok_attr_is_secret(CK_OBJECT_CLASS cls, CK_ATTRIBUTE_TYPE t);

#endif
