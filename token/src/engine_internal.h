/* SPDX-License-Identifier: MIT */
/*
 * Private to the crypto engine (mech.c, keys.c): the algorithms fetched once
 * at tok_crypto_init, and the prepared key kept in struct tok_object.cache.
 */
#ifndef TOK_ENGINE_INTERNAL_H
#define TOK_ENGINE_INTERNAL_H

#include <openssl/core.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/provider.h>

#include "token.h"

enum tok_aes_mode { TOK_AES_ECB, TOK_AES_CBC, TOK_AES_GCM, TOK_AES_WRAP, TOK_AES_WRAP_PAD, TOK_AES_CTR,
		    TOK_AES_NMODES };
enum tok_md { TOK_SHA1, TOK_SHA256, TOK_SHA384, TOK_SHA512, TOK_SHA224, TOK_NMDS };
enum tok_ec_curve { TOK_P256, TOK_P384, TOK_NCURVES };

/* Fetched by tok_crypto_init, read-only until tok_crypto_fini: the one piece
 * of module-global state the engine has (PKCS#11 forces it). */
struct tok_algs {
	bool ready;
	/* Every fetch and every key of the engine lives here (mech.c "a library
	 * context no ENGINE can divert"); base holds the default provider it
	 * forwards to. */
	OSSL_LIB_CTX *lc, *base;
	OSSL_PROVIDER *dflt, *shim;
	OSSL_ALGORITHM *keymgmt; /* the default provider's, renamed */
	unsigned rsa_min_bits;   /* tok_crypto_set_rsa_min_bits */
	EVP_CIPHER *aes[TOK_AES_NMODES][3]; /* [mode][0: 128, 1: 192, 2: 256] */
	EVP_MD *md[TOK_NMDS];
	EVP_MAC *hmac, *cmac;
	EVP_KDF *pbkdf2; /* the store's PIN records */
	/* The curves' domain parameters (tok_ec_params_load): key generation
	 * starts from them, so the group is built once, not per key (a fresh
	 * context and group name spends half of a P-256 key generation in
	 * EC_GROUP_new_by_curve_name_ex, docs/benchmarks.md) */
	EVP_PKEY *ec_params[TOK_NCURVES];
	bool keygen_ahead; /* tok_crypto_set_keygen_ahead (keyahead.c) */
};
extern struct tok_algs tok_algs;

/* The key manager names keys are made under in tok_algs.lc: "SOFTTOKEN-EC",
 * "SOFTTOKEN-RSA", "SOFTTOKEN-ED25519" (see mech.c). */
#define TOK_KEYMGMT(name) "SOFTTOKEN-" name

/* Builds tok_algs.ec_params (keys.c; tok_crypto_init). */
bool tok_ec_params_load(void);

/* A key pair of curve (enum tok_ec_curve) made from its parameters and
 * exported (false: OpenSSL failed); the pair made ahead for the caller
 * (keyahead.c), false when none is ready or keygen_ahead is off (either way
 * the next is asked for; the caller cleanses *out); the helper joined and the
 * spares cleansed (tok_crypto_fini); the parent's spares forgotten in a child
 * of fork(). */
#define TOK_EC_PT_MAX 140 /* an uncompressed P-384 point is 97 bytes */
#define TOK_EC_SK_MAX 64
struct tok_ec_pair {
	uint8_t pt[TOK_EC_PT_MAX]; /* the public point, uncompressed octets */
	size_t pt_len;
	uint8_t sk[TOK_EC_SK_MAX]; /* the private scalar, the curve's length */
};
bool tok_ec_make(int curve, struct tok_ec_pair *out); /* keys.c */
void tok_rsa_gen_fini(void);                              /* keys.c: the kept RSA context */
void tok_rsa_gen_atfork_child(void);
bool tok_ahead_take(int curve, struct tok_ec_pair *out);
void tok_ahead_stop(void);
void tok_ahead_atfork_child(void);
uint64_t tok_ahead_taken(void); /* spares handed out by this process so far */
#define TOK_AHEAD_DEPTH 8 /* spares kept per curve; a take that leaves half or fewer
			   * asks for the stack to be filled up (keyahead.c) */
unsigned tok_ahead_ready(int curve); /* spares of curve ready now (tests) */
/* len bytes of secret key from the pool drawn ahead of the private DRBG
 * (keyahead.c); false when keygen_ahead is off, len is over 64 or the DRBG
 * failed: the caller then draws them itself. */
bool tok_ahead_secret(uint8_t *out, size_t len);

/* The smallest RSA public key a signature is verified with (and imported). */
#define TOK_RSA_VERIFY_MIN 1024
#define TOK_RSA_MIN_DEFAULT 2048 /* rsa_min_bits' default */

/* The AES cipher of a mode for a key length (16/24/32), NULL otherwise. */
const EVP_CIPHER *tok_aes(enum tok_aes_mode mode, size_t key_len);
/* CKM_SHA_1.. / CKG_MGF1_SHA1.. to the fetched EVP_MD, NULL when unsupported. */
const EVP_MD *tok_md_of_mech(CK_MECHANISM_TYPE m);
const EVP_MD *tok_md_of_mgf(CK_ULONG mgf);

/* key->cache: built lazily by tok_key_cache_get under key->mu. */
enum tok_pkey_use { TOK_USE_SIGN, TOK_USE_VERIFY, TOK_USE_ENCRYPT, TOK_USE_DECRYPT, TOK_NUSES };
struct tok_keycache {
	EVP_PKEY *pkey;                 /* EC, RSA, Ed25519 keys */
	EVP_PKEY_CTX *tmpl[TOK_NUSES];  /* initialised for a use; operations get a dup
					 * (EVP_PKEY_CTX_dup skips the per-init fetch) */
	EVP_MAC_CTX *mac[TOK_NMDS];     /* secret keys: keyed HMAC per digest, duplicated per op */
};

/* The prepared key of an asymmetric or HMAC key object (caller holds key->mu).
 * CKR_KEY_TYPE_INCONSISTENT when its material does not make a key. */
CK_RV tok_key_cache_get(struct tok_object *key, struct tok_keycache **ret);
/* A fresh EVP_PKEY_CTX initialised for use on key's EVP_PKEY (caller frees). */
CK_RV tok_key_pctx(struct tok_object *key, enum tok_pkey_use use, EVP_PKEY_CTX **ret);
/* A fresh keyed HMAC context (digest md) for a secret key (caller frees). */
CK_RV tok_key_mac(struct tok_object *key, enum tok_md md, EVP_MAC_CTX **ret);
/* OpenSSL's name of a digest ("SHA2-256"). */
const char *tok_md_name(enum tok_md md);

/* False once OpenSSL's atexit cleanup has run (nothing of it may be freed). */
bool tok_ossl_alive(void);

/* OpenSSL failed: drop its thread-local error queue, answer CKR_DEVICE_ERROR. */
CK_RV tok_ossl_fail(void);

#endif
