/* SPDX-License-Identifier: MIT */
/*
 * The crypto engine's mechanisms (token.h): algorithms fetched once, the
 * mechanism table, and operations (encrypt, decrypt, sign, verify, digest)
 * with the exact buffer rule of token.h.
 *
 * Choices worth knowing (for docs/token.md):
 *  - CKM_AES_GCM: IV 1..128 bytes (OpenSSL's GCM limit; ulIvBits is ignored,
 *    ulIvLen rules), tag ulTagBits in {32, 64, 96, 104, 112, 120, 128} (the
 *    lengths NIST SP 800-38D allows; 0 would mean no authentication). Both
 *    the v2.40-errata layout of CK_GCM_PARAMS (with ulIvBits) and the
 *    original one (without) are accepted, told apart by ulParameterLen.
 *    Multi-part decryption buffers the ciphertext: C_DecryptUpdate outputs
 *    nothing, C_DecryptFinal outputs everything once the tag verifies. A bad
 *    tag answers CKR_ENCRYPTED_DATA_INVALID and releases nothing.
 *  - CKM_AES_CBC_PAD decryption holds back the last plaintext block until
 *    C_DecryptFinal (the padding is in it), so every step's output length is
 *    known before it runs.
 *  - CKM_ECDSA*: the signature is r || s, each left-padded to the group
 *    order's size (not DER).
 *  - Mechanisms without multi-part (CKM_ECDSA, CKM_RSA_PKCS, CKM_RSA_PKCS_PSS,
 *    CKM_RSA_PKCS_OAEP, CKM_EDDSA) answer CKR_FUNCTION_NOT_SUPPORTED to
 *    update/final; the core checks tok_op_multipart_ok first.
 *  - A one-shot step after an update answers CKR_OPERATION_ACTIVE.
 *
 * Threads: after tok_crypto_init everything here is either per-operation or
 * read-only; no lock is taken around cryptography.
 */
#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include "engine_internal.h"

struct tok_algs tok_algs;

CK_RV tok_ossl_fail(void)
{
	ERR_clear_error();
	return CKR_DEVICE_ERROR;
}

bool tok_ossl_alive(void)
{
	/* OPENSSL_init_crypto answers 0 once OPENSSL_cleanup has run (its
	 * error then goes nowhere: the error queue is gone too). */
	return OPENSSL_init_crypto(0, NULL) == 1;
}

/* ---- algorithms, fetched once -------------------------------------------- */

static const char *const aes_names[TOK_AES_NMODES][3] = {
	[TOK_AES_ECB] = { "AES-128-ECB", "AES-192-ECB", "AES-256-ECB" },
	[TOK_AES_CBC] = { "AES-128-CBC", "AES-192-CBC", "AES-256-CBC" },
	[TOK_AES_GCM] = { "AES-128-GCM", "AES-192-GCM", "AES-256-GCM" },
	[TOK_AES_WRAP] = { "AES-128-WRAP", "AES-192-WRAP", "AES-256-WRAP" },
	[TOK_AES_WRAP_PAD] = { "AES-128-WRAP-PAD", "AES-192-WRAP-PAD", "AES-256-WRAP-PAD" },
	[TOK_AES_CTR] = { "AES-128-CTR", "AES-192-CTR", "AES-256-CTR" },
};
static const char *const md_names[TOK_NMDS] = {
	[TOK_SHA1] = "SHA1", [TOK_SHA256] = "SHA2-256", [TOK_SHA384] = "SHA2-384",
	[TOK_SHA512] = "SHA2-512", [TOK_SHA224] = "SHA2-224",
};

const char *tok_md_name(enum tok_md md)
{
	return md_names[md];
}

/* ---- a library context no ENGINE can divert --------------------------------
 *
 * A PKCS#11 module runs inside someone else's process. When that process has
 * set an ENGINE as default (openssl -engine, stunnel, nginx ssl_engine,
 * libengine-pkcs11-openssl), OpenSSL 3.0 hands every EVP_PKEY_CTX whose key
 * type has a NID to that engine's EVP_PKEY_METHOD (ENGINE_get_pkey_meth_engine
 * in int_ctx_new), whatever OSSL_LIB_CTX or property query the caller names:
 * EVP_PKEY_fromdata then fails (our keys are built that way, so C_SignInit
 * answered CKR_KEY_TYPE_INCONSISTENT) and a sign that works runs the engine's
 * code. RAND_bytes and RAND_add likewise go to an engine's RAND_METHOD.
 *
 * So the engine works in a library context of its own, tok_algs.lc, whose one
 * provider ("softtoken-shim") forwards to OpenSSL's default provider loaded
 * into a second private context (tok_algs.base, so the application's own
 * context and configuration are untouched, FIPS or not). The shim passes the
 * default provider's algorithms through unchanged, except that each key
 * manager's first name becomes "SOFTTOKEN-<name>" (its other names stay, so
 * EVP_PKEY_is_a(pk, "RSA") holds). A key made under that name has a key type
 * with no NID, which OpenSSL resolves by fetching from the context's providers
 * and never through an ENGINE table. Randomness comes from lc's own DRBGs.
 */
static const OSSL_ALGORITHM *shim_query(void *provctx, int op, int *no_cache)
{
	(void)provctx;
	*no_cache = 0;
	if (op == OSSL_OP_KEYMGMT)
		return tok_algs.keymgmt;
	/* The default provider's tables are static: nothing to unquery. */
	return OSSL_PROVIDER_query_operation(tok_algs.dflt, op, no_cache);
}

static int shim_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
		     const OSSL_DISPATCH **out, void **provctx)
{
	static const OSSL_DISPATCH shim_dispatch[] = {
		{ OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))shim_query },
		{ 0, NULL },
	};

	(void)handle;
	(void)in;
	/* The default provider's functions are called with its own context. */
	*provctx = OSSL_PROVIDER_get0_provider_ctx(tok_algs.dflt);
	*out = shim_dispatch;
	return *provctx != NULL;
}

static void keymgmt_free(void)
{
	if (!tok_algs.keymgmt)
		return;
	for (OSSL_ALGORITHM *a = tok_algs.keymgmt; a->algorithm_names; a++)
		free((char *)a->algorithm_names);
	free(tok_algs.keymgmt);
	tok_algs.keymgmt = NULL;
}

/* The default provider's key managers, first name prefixed "SOFTTOKEN-". */
static bool keymgmt_rename(void)
{
	const OSSL_ALGORITHM *src;
	int nc = 0;
	size_t n = 0;

	if (!(src = OSSL_PROVIDER_query_operation(tok_algs.dflt, OSSL_OP_KEYMGMT, &nc)))
		return false;
	while (src[n].algorithm_names)
		n++;
	if (!(tok_algs.keymgmt = calloc(n + 1, sizeof(*tok_algs.keymgmt))))
		return false;
	for (size_t i = 0; i < n; i++) {
		const char *names = src[i].algorithm_names, *colon = strchr(names, ':');
		int first = colon ? (int)(colon - names) : (int)strlen(names);
		char *nn;

		if (asprintf(&nn, "%s%.*s:%s", TOK_KEYMGMT(""), first, names, names) < 0)
			return false;
		tok_algs.keymgmt[i] = src[i];
		tok_algs.keymgmt[i].algorithm_names = nn;
	}
	return true;
}

static bool libctx_open(void)
{
	if (!(tok_algs.base = OSSL_LIB_CTX_new()) || !(tok_algs.lc = OSSL_LIB_CTX_new()))
		return false;
	if (!(tok_algs.dflt = OSSL_PROVIDER_load(tok_algs.base, "default")) || !keymgmt_rename())
		return false;
	if (!OSSL_PROVIDER_add_builtin(tok_algs.lc, "softtoken-shim", shim_init) ||
	    !(tok_algs.shim = OSSL_PROVIDER_load(tok_algs.lc, "softtoken-shim")))
		return false;
	return true;
}

static void libctx_close(void)
{
	OSSL_PROVIDER_unload(tok_algs.shim);
	OSSL_LIB_CTX_free(tok_algs.lc);
	keymgmt_free();
	OSSL_PROVIDER_unload(tok_algs.dflt);
	OSSL_LIB_CTX_free(tok_algs.base);
}

CK_RV tok_crypto_init(void)
{
	if (tok_algs.ready)
		return CKR_OK;
	if (!libctx_open())
		goto err;
	tok_crypto_set_rsa_min_bits(TOK_RSA_MIN_DEFAULT); /* the module sets rsa_min_bits next */
	tok_crypto_set_keygen_ahead(true);
	for (int m = 0; m < TOK_AES_NMODES; m++)
		for (int k = 0; k < 3; k++)
			if (!(tok_algs.aes[m][k] = EVP_CIPHER_fetch(tok_algs.lc, aes_names[m][k], NULL)))
				goto err;
	for (int i = 0; i < TOK_NMDS; i++)
		if (!(tok_algs.md[i] = EVP_MD_fetch(tok_algs.lc, md_names[i], NULL)))
			goto err;
	if (!(tok_algs.hmac = EVP_MAC_fetch(tok_algs.lc, "HMAC", NULL)) ||
	    !(tok_algs.cmac = EVP_MAC_fetch(tok_algs.lc, "CMAC", NULL)) ||
	    !(tok_algs.pbkdf2 = EVP_KDF_fetch(tok_algs.lc, "PBKDF2", NULL)) || !tok_ec_params_load())
		goto err;
	tok_algs.ready = true;
	return CKR_OK;
err:
	tok_crypto_fini();
	return tok_ossl_fail();
}

void tok_crypto_fini(void)
{
	/* Process exit after OpenSSL's cleanup: nothing of OpenSSL's may be
	 * touched now; what tok_algs holds stays referenced (not a leak) until
	 * the process is gone. */
	if (!tok_ossl_alive())
		return;
	tok_ahead_stop(); /* the helper uses ec_params */
	tok_rsa_gen_fini();
	for (int m = 0; m < TOK_AES_NMODES; m++)
		for (int k = 0; k < 3; k++)
			EVP_CIPHER_free(tok_algs.aes[m][k]);
	for (int i = 0; i < TOK_NMDS; i++)
		EVP_MD_free(tok_algs.md[i]);
	EVP_MAC_free(tok_algs.hmac);
	EVP_MAC_free(tok_algs.cmac);
	EVP_KDF_free(tok_algs.pbkdf2);
	for (int i = 0; i < TOK_NCURVES; i++)
		EVP_PKEY_free(tok_algs.ec_params[i]);
	libctx_close();
	memset(&tok_algs, 0, sizeof(tok_algs));
}

const EVP_CIPHER *tok_aes(enum tok_aes_mode mode, size_t key_len)
{
	switch (key_len) {
	case 16: return tok_algs.aes[mode][0];
	case 24: return tok_algs.aes[mode][1];
	case 32: return tok_algs.aes[mode][2];
	default: return NULL;
	}
}

const EVP_MD *tok_md_of_mech(CK_MECHANISM_TYPE m)
{
	switch (m) {
	case CKM_SHA_1: return tok_algs.md[TOK_SHA1];
	case CKM_SHA256: return tok_algs.md[TOK_SHA256];
	case CKM_SHA384: return tok_algs.md[TOK_SHA384];
	case CKM_SHA512: return tok_algs.md[TOK_SHA512];
	case CKM_SHA224: return tok_algs.md[TOK_SHA224];
	default: return NULL;
	}
}

const EVP_MD *tok_md_of_mgf(CK_ULONG mgf)
{
	switch (mgf) {
	case CKG_MGF1_SHA1: return tok_algs.md[TOK_SHA1];
	case CKG_MGF1_SHA256: return tok_algs.md[TOK_SHA256];
	case CKG_MGF1_SHA384: return tok_algs.md[TOK_SHA384];
	case CKG_MGF1_SHA512: return tok_algs.md[TOK_SHA512];
	default: return NULL;
	}
}

/* ---- the mechanism table ------------------------------------------------- */

#define EC_FLAGS (CKF_EC_F_P | CKF_EC_NAMEDCURVE | CKF_EC_UNCOMPRESS)
#define RSA_OP_MAX 8192
#define RSA_GEN_MAX 4096

/* Key sizes: bytes for AES and HMAC, bits for RSA, EC, EdDSA and (as
 * PKCS#11 says for it) CKM_GENERIC_SECRET_KEY_GEN. */
static struct tok_mech_info mech_table[] = {
	{ CKM_AES_KEY_GEN, { 16, 32, CKF_GENERATE } },
	{ CKM_AES_ECB, { 16, 32, CKF_ENCRYPT | CKF_DECRYPT } },
	{ CKM_AES_CBC, { 16, 32, CKF_ENCRYPT | CKF_DECRYPT } },
	{ CKM_AES_CBC_PAD, { 16, 32, CKF_ENCRYPT | CKF_DECRYPT } },
	{ CKM_AES_GCM, { 16, 32, CKF_ENCRYPT | CKF_DECRYPT } },
	{ CKM_AES_CTR, { 16, 32, CKF_ENCRYPT | CKF_DECRYPT } },
	{ CKM_AES_CMAC, { 16, 32, CKF_SIGN | CKF_VERIFY } },
	{ CKM_AES_KEY_WRAP, { 16, 32, CKF_WRAP | CKF_UNWRAP } },
	{ CKM_AES_KEY_WRAP_PAD, { 16, 32, CKF_WRAP | CKF_UNWRAP } },
	{ CKM_GENERIC_SECRET_KEY_GEN, { 8, 4096, CKF_GENERATE } },
	{ CKM_SHA256_HMAC, { 1, 512, CKF_SIGN | CKF_VERIFY } },
	{ CKM_SHA384_HMAC, { 1, 512, CKF_SIGN | CKF_VERIFY } },
	{ CKM_SHA512_HMAC, { 1, 512, CKF_SIGN | CKF_VERIFY } },
	{ CKM_SHA224, { 0, 0, CKF_DIGEST } },
	{ CKM_SHA_1, { 0, 0, CKF_DIGEST } },
	{ CKM_SHA256, { 0, 0, CKF_DIGEST } },
	{ CKM_SHA384, { 0, 0, CKF_DIGEST } },
	{ CKM_SHA512, { 0, 0, CKF_DIGEST } },
	{ CKM_EC_KEY_PAIR_GEN, { 256, 384, CKF_GENERATE_KEY_PAIR | EC_FLAGS } },
	{ CKM_ECDSA, { 256, 384, CKF_SIGN | CKF_VERIFY | EC_FLAGS } },
	{ CKM_ECDSA_SHA256, { 256, 384, CKF_SIGN | CKF_VERIFY | EC_FLAGS } },
	{ CKM_ECDSA_SHA384, { 256, 384, CKF_SIGN | CKF_VERIFY | EC_FLAGS } },
	{ CKM_ECDH1_DERIVE, { 256, 384, CKF_DERIVE | EC_FLAGS } },
	{ CKM_RSA_PKCS_KEY_PAIR_GEN, { TOK_RSA_MIN_DEFAULT, RSA_GEN_MAX, CKF_GENERATE_KEY_PAIR } },
	{ CKM_RSA_PKCS, { TOK_RSA_MIN_DEFAULT, RSA_OP_MAX, CKF_ENCRYPT | CKF_DECRYPT | CKF_SIGN | CKF_VERIFY } },
	{ CKM_SHA256_RSA_PKCS, { TOK_RSA_MIN_DEFAULT, RSA_OP_MAX, CKF_SIGN | CKF_VERIFY } },
	{ CKM_RSA_PKCS_PSS, { TOK_RSA_MIN_DEFAULT, RSA_OP_MAX, CKF_SIGN | CKF_VERIFY } },
	{ CKM_SHA256_RSA_PKCS_PSS, { TOK_RSA_MIN_DEFAULT, RSA_OP_MAX, CKF_SIGN | CKF_VERIFY } },
	{ CKM_RSA_PKCS_OAEP, { TOK_RSA_MIN_DEFAULT, RSA_OP_MAX, CKF_ENCRYPT | CKF_DECRYPT } },
	{ CKM_EC_EDWARDS_KEY_PAIR_GEN, { 255, 255, CKF_GENERATE_KEY_PAIR } },
	{ CKM_EDDSA, { 255, 255, CKF_SIGN | CKF_VERIFY } },
};

static bool is_rsa_mech(CK_MECHANISM_TYPE t)
{
	switch (t) {
	case CKM_RSA_PKCS_KEY_PAIR_GEN: case CKM_RSA_PKCS: case CKM_SHA256_RSA_PKCS:
	case CKM_RSA_PKCS_PSS: case CKM_SHA256_RSA_PKCS_PSS: case CKM_RSA_PKCS_OAEP:
		return true;
	default:
		return false;
	}
}

void tok_crypto_set_keygen_ahead(bool on)
{
	tok_algs.keygen_ahead = on;
}

void tok_crypto_atfork_child(void)
{
	tok_ahead_atfork_child();
	tok_rsa_gen_atfork_child();
}

void tok_crypto_set_rsa_min_bits(unsigned bits)
{
	assert(bits >= TOK_RSA_VERIFY_MIN && bits <= RSA_GEN_MAX);
	tok_algs.rsa_min_bits = bits;
	for (size_t i = 0; i < sizeof(mech_table) / sizeof(mech_table[0]); i++)
		if (is_rsa_mech(mech_table[i].type))
			mech_table[i].info.ulMinKeySize = bits;
}

const struct tok_mech_info *tok_mech_table(size_t *ret_n)
{
	*ret_n = sizeof(mech_table) / sizeof(mech_table[0]);
	return mech_table;
}

static const CK_MECHANISM_INFO *mech_info(CK_MECHANISM_TYPE t)
{
	for (size_t i = 0; i < sizeof(mech_table) / sizeof(mech_table[0]); i++)
		if (mech_table[i].type == t)
			return &mech_table[i].info;
	return NULL;
}

/* ---- operations ---------------------------------------------------------- */

enum op_family {
	F_BLOCK,   /* AES ECB / CBC / CBC_PAD */
	F_STREAM,  /* AES CTR: output = input */
	F_GCM,
	F_DIGEST,
	F_HMAC,    /* EVP_MAC: HMAC-SHA-256/384/512, AES-CMAC */
	F_SIGN,    /* EVP_PKEY_sign/verify: ECDSA*, RSA PKCS#1 v1.5 and PSS signatures */
	F_EDDSA,
	F_RSA_ENC, /* RSA PKCS#1 v1.5 / OAEP encryption */
};

struct tok_op {
	enum tok_opkind kind;
	CK_MECHANISM_TYPE mech;
	enum op_family fam;
	bool multipart;
	bool updated;   /* an update ran: one-shot steps refused */

	/* AES */
	EVP_CIPHER_CTX *cctx;
	const EVP_CIPHER *cipher;
	bool keyed;     /* cctx holds key and IV */
	bool pad;       /* CKM_AES_CBC_PAD */
	uint8_t key[32];
	size_t key_len;
	uint8_t iv[128];
	size_t iv_len;
	size_t rem;     /* input bytes cctx buffers (total input % 16) */
	uint64_t ctr_room; /* CTR: bytes left before the counter's ulCounterBits wrap */
	uint64_t ctr_done; /* CTR: bytes processed since the key was set */
	bool held;      /* CBC_PAD decryption: held_pt is the last plaintext block */
	uint8_t held_pt[16];
	/* GCM */
	uint8_t *aad;
	size_t aad_len, tag_len;
	uint8_t *gbuf;  /* decryption: the ciphertext so far */
	size_t gbuf_len, gbuf_cap;

	/* digests, hash-then-sign */
	EVP_MD_CTX *mdctx;
	const EVP_MD *md;
	/* HMAC */
	EVP_MAC_CTX *mac;
	/* asymmetric */
	EVP_PKEY_CTX *pctx;
	bool ecdsa;            /* signature is r || s */
	size_t sig_len;        /* exact signature length (F_SIGN, F_EDDSA, F_HMAC) */
	size_t order_len;      /* ECDSA: bytes of the group order */
	size_t mod_len;        /* RSA: bytes of the modulus */
	size_t max_in;         /* raw input limit (RSA_PKCS sign, encryption) */
	size_t exact_in;       /* raw PSS: the input is a hash of this length */
	bool digest_info;      /* CKM_SHA256_RSA_PKCS: DigestInfo prefix */
};

/* The buffer rule of token.h: true when out holds need bytes and the step may
 * run; otherwise *out_len = need and *rv says why it stops (CKR_OK for a
 * length query, CKR_BUFFER_TOO_SMALL). */
static bool out_room(const uint8_t *out, CK_ULONG *out_len, size_t need, CK_RV *rv)
{
	if (!out) {
		*out_len = need;
		*rv = CKR_OK;
		return false;
	}
	if (*out_len < need) {
		*out_len = need;
		*rv = CKR_BUFFER_TOO_SMALL;
		return false;
	}
	return true;
}

void tok_op_free(struct tok_op *op)
{
	if (!op)
		return;
	EVP_CIPHER_CTX_free(op->cctx);
	EVP_MD_CTX_free(op->mdctx);
	EVP_MAC_CTX_free(op->mac);
	EVP_PKEY_CTX_free(op->pctx);
	if (op->gbuf)
		OPENSSL_cleanse(op->gbuf, op->gbuf_cap);
	free(op->gbuf);
	free(op->aad);
	OPENSSL_cleanse(op, sizeof(*op));
	free(op);
}

bool tok_op_multipart_ok(const struct tok_op *op)
{
	return op->multipart;
}

/* ---- tok_op_init --------------------------------------------------------- */

static CK_ATTRIBUTE_TYPE usage_attr(enum tok_opkind kind)
{
	switch (kind) {
	case TOK_OP_ENCRYPT: return CKA_ENCRYPT;
	case TOK_OP_DECRYPT: return CKA_DECRYPT;
	case TOK_OP_SIGN: return CKA_SIGN;
	case TOK_OP_VERIFY: return CKA_VERIFY;
	default: return 0;
	}
}

/* Class, type and usage of the key an operation needs. */
static CK_RV check_key(enum tok_opkind kind, const struct tok_object *key, CK_OBJECT_CLASS cls,
		       CK_KEY_TYPE kt, CK_KEY_TYPE kt2)
{
	if (!key)
		return CKR_ARGUMENTS_BAD;
	if (key->cls != cls || (key->key_type != kt && key->key_type != kt2))
		return CKR_KEY_TYPE_INCONSISTENT;
	if (!tok_attrs_bool(&key->attrs, usage_attr(kind), false))
		return CKR_KEY_FUNCTION_NOT_PERMITTED;
	return CKR_OK;
}

static CK_RV init_aes(struct tok_op *op, const CK_MECHANISM *mech, struct tok_object *key)
{
	const struct tok_attr *v;
	enum tok_aes_mode mode;
	CK_RV rv;

	if (op->kind != TOK_OP_ENCRYPT && op->kind != TOK_OP_DECRYPT)
		return CKR_MECHANISM_INVALID;
	rv = check_key(op->kind, key, CKO_SECRET_KEY, CKK_AES, CKK_AES);
	if (rv != CKR_OK)
		return rv;

	switch (mech->mechanism) {
	case CKM_AES_ECB:
		mode = TOK_AES_ECB;
		op->fam = F_BLOCK;
		break;
	case CKM_AES_CBC:
	case CKM_AES_CBC_PAD:
		mode = TOK_AES_CBC;
		op->fam = F_BLOCK;
		op->pad = mech->mechanism == CKM_AES_CBC_PAD;
		if (!mech->pParameter || mech->ulParameterLen != 16)
			return CKR_MECHANISM_PARAM_INVALID;
		memcpy(op->iv, mech->pParameter, 16);
		op->iv_len = 16;
		break;
	case CKM_AES_CTR: {
		const CK_AES_CTR_PARAMS *p = mech->pParameter;
		uint64_t ctr;

		mode = TOK_AES_CTR;
		op->fam = F_STREAM;
		if (!p || mech->ulParameterLen != sizeof(*p) || p->ulCounterBits < 1 || p->ulCounterBits > 128)
			return CKR_MECHANISM_PARAM_INVALID;
		memcpy(op->iv, p->cb, 16);
		op->iv_len = 16;
		/* OpenSSL increments all 128 bits; PKCS#11 only the low
		 * ulCounterBits, and a wrap would repeat the key stream: the
		 * input may take the counter up to 2^bits - 1, no further. */
		{
			unsigned __int128 c = 0, mask, room; /* blocks left: 2^bits - counter */

			for (unsigned i = 0; i < 16; i++)
				c = c << 8 | p->cb[i];
			mask = p->ulCounterBits == 128 ? ~(unsigned __int128)0
						       : ((unsigned __int128)1 << p->ulCounterBits) - 1;
			c &= mask;
			room = mask - c + 1; /* 0: 2^128 blocks (bits 128, counter 0) */
			ctr = room == 0 || room > UINT64_MAX / 16 ? UINT64_MAX : (uint64_t)room * 16;
		}
		op->ctr_room = ctr;
		break;
	}
	default: { /* CKM_AES_GCM */
		/* The original v2.40 layout, before the errata added ulIvBits. */
		struct gcm_v240 {
			CK_BYTE_PTR pIv;
			CK_ULONG ulIvLen;
			CK_BYTE_PTR pAAD;
			CK_ULONG ulAADLen;
			CK_ULONG ulTagBits;
		} g;
		mode = TOK_AES_GCM;
		op->fam = F_GCM;
		if (!mech->pParameter)
			return CKR_MECHANISM_PARAM_INVALID;
		if (mech->ulParameterLen == sizeof(CK_GCM_PARAMS)) {
			const CK_GCM_PARAMS *p = mech->pParameter;
			g = (struct gcm_v240){ p->pIv, p->ulIvLen, p->pAAD, p->ulAADLen, p->ulTagBits };
		} else if (mech->ulParameterLen == sizeof(struct gcm_v240)) {
			memcpy(&g, mech->pParameter, sizeof(g));
		} else {
			return CKR_MECHANISM_PARAM_INVALID;
		}
		if (!g.pIv || g.ulIvLen < 1 || g.ulIvLen > sizeof(op->iv))
			return CKR_MECHANISM_PARAM_INVALID;
		if (g.ulAADLen && !g.pAAD)
			return CKR_MECHANISM_PARAM_INVALID;
		if (g.ulTagBits % 8 || !(g.ulTagBits == 32 || g.ulTagBits == 64 ||
					 (g.ulTagBits >= 96 && g.ulTagBits <= 128)))
			return CKR_MECHANISM_PARAM_INVALID;
		memcpy(op->iv, g.pIv, g.ulIvLen);
		op->iv_len = g.ulIvLen;
		op->tag_len = g.ulTagBits / 8;
		if (g.ulAADLen) {
			if (!(op->aad = malloc(g.ulAADLen)))
				return CKR_HOST_MEMORY;
			memcpy(op->aad, g.pAAD, g.ulAADLen);
			op->aad_len = g.ulAADLen;
		}
		break;
	}
	}

	v = tok_attrs_get(&key->attrs, CKA_VALUE);
	if (!v || !(op->cipher = tok_aes(mode, v->len)))
		return CKR_KEY_SIZE_RANGE;
	memcpy(op->key, v->value, v->len);
	op->key_len = v->len;
	op->multipart = true;
	if (!(op->cctx = EVP_CIPHER_CTX_new()))
		return CKR_HOST_MEMORY;
	return CKR_OK;
}

static CK_RV init_digest(struct tok_op *op, const CK_MECHANISM *mech)
{
	op->fam = F_DIGEST;
	op->multipart = true;
	if (!(op->md = tok_md_of_mech(mech->mechanism)))
		return CKR_MECHANISM_INVALID;
	if (!(op->mdctx = EVP_MD_CTX_new()))
		return CKR_HOST_MEMORY;
	if (!EVP_DigestInit_ex2(op->mdctx, op->md, NULL))
		return tok_ossl_fail();
	return CKR_OK;
}

CK_RV tok_op_reinit_digest(struct tok_op *op, const CK_MECHANISM *mech)
{
	if (!op || !mech || op->fam != F_DIGEST || op->kind != TOK_OP_DIGEST || op->mech != mech->mechanism)
		return CKR_MECHANISM_INVALID;
	if (!EVP_DigestInit_ex2(op->mdctx, op->md, NULL))
		return tok_ossl_fail();
	op->updated = false;
	return CKR_OK;
}

static CK_RV init_hmac(struct tok_op *op, const CK_MECHANISM *mech, struct tok_object *key)
{
	const struct tok_attr *v;
	enum tok_md md;
	CK_KEY_TYPE kt;
	CK_RV rv;

	if (op->kind != TOK_OP_SIGN && op->kind != TOK_OP_VERIFY)
		return CKR_MECHANISM_INVALID;
	switch (mech->mechanism) {
	case CKM_SHA384_HMAC: md = TOK_SHA384; kt = CKK_SHA384_HMAC; op->sig_len = 48; break;
	case CKM_SHA512_HMAC: md = TOK_SHA512; kt = CKK_SHA512_HMAC; op->sig_len = 64; break;
	default: md = TOK_SHA256; kt = CKK_SHA256_HMAC; op->sig_len = 32; break;
	}
	if (mech->pParameter || mech->ulParameterLen)
		return CKR_MECHANISM_PARAM_INVALID;
	rv = check_key(op->kind, key, CKO_SECRET_KEY, CKK_GENERIC_SECRET, kt);
	if (rv != CKR_OK)
		return rv;
	v = tok_attrs_get(&key->attrs, CKA_VALUE);
	if (!v || v->len < 1 || v->len > 512)
		return CKR_KEY_SIZE_RANGE;
	op->fam = F_HMAC;
	op->multipart = true;
	return tok_key_mac(key, md, &op->mac);
}

/* AES-CMAC (NIST SP 800-38B, RFC 4493): the full 16-byte MAC. */
static CK_RV init_cmac(struct tok_op *op, const CK_MECHANISM *mech, struct tok_object *key)
{
	static const char *const cbc[3] = { "AES-128-CBC", "AES-192-CBC", "AES-256-CBC" };
	const struct tok_attr *v;
	OSSL_PARAM params[2];
	CK_RV rv;

	if (op->kind != TOK_OP_SIGN && op->kind != TOK_OP_VERIFY)
		return CKR_MECHANISM_INVALID;
	if (mech->pParameter || mech->ulParameterLen)
		return CKR_MECHANISM_PARAM_INVALID;
	if ((rv = check_key(op->kind, key, CKO_SECRET_KEY, CKK_AES, CKK_AES)) != CKR_OK)
		return rv;
	v = tok_attrs_get(&key->attrs, CKA_VALUE);
	if (!v || (v->len != 16 && v->len != 24 && v->len != 32))
		return CKR_KEY_SIZE_RANGE;
	op->fam = F_HMAC;
	op->multipart = true;
	op->sig_len = 16;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, (char *)cbc[(v->len - 16) / 8], 0);
	params[1] = OSSL_PARAM_construct_end();
	if (!(op->mac = EVP_MAC_CTX_new(tok_algs.cmac)))
		return CKR_HOST_MEMORY;
	if (!EVP_MAC_init(op->mac, v->value, v->len, params))
		return tok_ossl_fail();
	return CKR_OK;
}

/* Key bits in the mechanism's advertised range; an RSA public key may be
 * smaller for verification (down to TOK_RSA_VERIFY_MIN): rsa_min_bits binds
 * what the token signs, decrypts and encrypts, not the signatures it checks. */
static CK_RV check_bits(CK_MECHANISM_TYPE m, enum tok_opkind kind, const EVP_PKEY *pkey)
{
	const CK_MECHANISM_INFO *mi = mech_info(m);
	int bits = EVP_PKEY_get_bits(pkey);
	CK_ULONG min = mi->ulMinKeySize;

	if (kind == TOK_OP_VERIFY && is_rsa_mech(m))
		min = TOK_RSA_VERIFY_MIN;
	if (bits <= 0 || (CK_ULONG)bits < min || (CK_ULONG)bits > mi->ulMaxKeySize)
		return CKR_KEY_SIZE_RANGE;
	return CKR_OK;
}

static CK_RV init_ecdsa(struct tok_op *op, const CK_MECHANISM *mech, struct tok_object *key)
{
	struct tok_keycache *c;
	CK_RV rv;

	if (op->kind != TOK_OP_SIGN && op->kind != TOK_OP_VERIFY)
		return CKR_MECHANISM_INVALID;
	rv = check_key(op->kind, key, op->kind == TOK_OP_SIGN ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY,
		       CKK_EC, CKK_EC);
	if (rv != CKR_OK)
		return rv;
	if ((rv = tok_key_cache_get(key, &c)) != CKR_OK)
		return rv;
	if ((rv = check_bits(mech->mechanism, op->kind, c->pkey)) != CKR_OK)
		return rv;
	op->fam = F_SIGN;
	op->ecdsa = true;
	op->order_len = ((size_t)EVP_PKEY_get_bits(c->pkey) + 7) / 8;
	op->sig_len = 2 * op->order_len;
	if (mech->mechanism != CKM_ECDSA) {
		op->md = tok_algs.md[mech->mechanism == CKM_ECDSA_SHA256 ? TOK_SHA256 : TOK_SHA384];
		op->multipart = true;
		if (!(op->mdctx = EVP_MD_CTX_new()))
			return CKR_HOST_MEMORY;
		if (!EVP_DigestInit_ex2(op->mdctx, op->md, NULL))
			return tok_ossl_fail();
	}
	return tok_key_pctx(key, op->kind == TOK_OP_SIGN ? TOK_USE_SIGN : TOK_USE_VERIFY, &op->pctx);
}

/* Largest PSS salt for a modulus of bits and a hash of h_len bytes (RFC 8017
 * 9.1.1: emLen >= hLen + sLen + 2, emLen = ceil((modBits - 1) / 8)). */
static size_t pss_max_salt(int bits, size_t h_len)
{
	size_t em_len = ((size_t)bits - 1 + 7) / 8;

	return em_len >= h_len + 2 ? em_len - h_len - 2 : 0;
}

static CK_RV init_rsa(struct tok_op *op, const CK_MECHANISM *mech, struct tok_object *key)
{
	CK_MECHANISM_TYPE m = mech->mechanism;
	bool enc = m == CKM_RSA_PKCS_OAEP ||
		   (m == CKM_RSA_PKCS && (op->kind == TOK_OP_ENCRYPT || op->kind == TOK_OP_DECRYPT));
	bool priv = op->kind == TOK_OP_SIGN || op->kind == TOK_OP_DECRYPT;
	struct tok_keycache *c;
	enum tok_pkey_use use;
	int bits;
	CK_RV rv;

	if (enc ? (op->kind != TOK_OP_ENCRYPT && op->kind != TOK_OP_DECRYPT)
		: (op->kind != TOK_OP_SIGN && op->kind != TOK_OP_VERIFY))
		return CKR_MECHANISM_INVALID;
	rv = check_key(op->kind, key, priv ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY, CKK_RSA, CKK_RSA);
	if (rv != CKR_OK)
		return rv;
	if ((rv = tok_key_cache_get(key, &c)) != CKR_OK)
		return rv;
	if ((rv = check_bits(m, op->kind, c->pkey)) != CKR_OK)
		return rv;
	bits = EVP_PKEY_get_bits(c->pkey);
	op->mod_len = ((size_t)bits + 7) / 8;
	op->sig_len = op->mod_len;
	op->fam = enc ? F_RSA_ENC : F_SIGN;

	switch (op->kind) {
	case TOK_OP_SIGN: use = TOK_USE_SIGN; break;
	case TOK_OP_VERIFY: use = TOK_USE_VERIFY; break;
	case TOK_OP_ENCRYPT: use = TOK_USE_ENCRYPT; break;
	default: use = TOK_USE_DECRYPT; break;
	}

	if (m == CKM_RSA_PKCS || m == CKM_SHA256_RSA_PKCS) {
		if ((rv = tok_key_pctx(key, use, &op->pctx)) != CKR_OK)
			return rv;
		if (EVP_PKEY_CTX_set_rsa_padding(op->pctx, RSA_PKCS1_PADDING) <= 0)
			return tok_ossl_fail();
		op->max_in = op->mod_len - 11;
		if (m == CKM_SHA256_RSA_PKCS) {
			/* Hash here, sign DigestInfo || hash raw: no per-op fetch of the
			 * digest inside the provider. */
			op->digest_info = true;
			op->md = tok_algs.md[TOK_SHA256];
		}
	} else if (m == CKM_RSA_PKCS_OAEP) {
		const CK_RSA_PKCS_OAEP_PARAMS *p = mech->pParameter;
		const EVP_MD *md, *mgf;
		size_t h;

		if (!p || mech->ulParameterLen != sizeof(*p))
			return CKR_MECHANISM_PARAM_INVALID;
		if (!(md = tok_md_of_mech(p->hashAlg)) || !(mgf = tok_md_of_mgf(p->mgf)))
			return CKR_MECHANISM_PARAM_INVALID;
		if (p->source != CKZ_DATA_SPECIFIED && !(p->source == 0 && p->ulSourceDataLen == 0))
			return CKR_MECHANISM_PARAM_INVALID;
		if (p->ulSourceDataLen && !p->pSourceData)
			return CKR_MECHANISM_PARAM_INVALID;
		h = (size_t)EVP_MD_get_size(md);
		if (op->mod_len < 2 * h + 2)
			return CKR_KEY_SIZE_RANGE;
		op->max_in = op->mod_len - 2 * h - 2;
		if ((rv = tok_key_pctx(key, use, &op->pctx)) != CKR_OK)
			return rv;
		if (EVP_PKEY_CTX_set_rsa_padding(op->pctx, RSA_PKCS1_OAEP_PADDING) <= 0 ||
		    EVP_PKEY_CTX_set_rsa_oaep_md(op->pctx, md) <= 0 ||
		    EVP_PKEY_CTX_set_rsa_mgf1_md(op->pctx, mgf) <= 0)
			return tok_ossl_fail();
		if (p->ulSourceDataLen) {
			void *label = OPENSSL_memdup(p->pSourceData, p->ulSourceDataLen);

			if (!label)
				return CKR_HOST_MEMORY;
			if (EVP_PKEY_CTX_set0_rsa_oaep_label(op->pctx, label, (int)p->ulSourceDataLen) <= 0) {
				OPENSSL_free(label);
				return tok_ossl_fail();
			}
		}
	} else { /* CKM_RSA_PKCS_PSS, CKM_SHA256_RSA_PKCS_PSS */
		const CK_RSA_PKCS_PSS_PARAMS *p = mech->pParameter;
		const EVP_MD *md, *mgf;
		size_t h;

		if (!p || mech->ulParameterLen != sizeof(*p))
			return CKR_MECHANISM_PARAM_INVALID;
		if (!(md = tok_md_of_mech(p->hashAlg)) || !(mgf = tok_md_of_mgf(p->mgf)))
			return CKR_MECHANISM_PARAM_INVALID;
		if (m == CKM_SHA256_RSA_PKCS_PSS && p->hashAlg != CKM_SHA256)
			return CKR_MECHANISM_PARAM_INVALID;
		h = (size_t)EVP_MD_get_size(md);
		if (p->sLen > pss_max_salt(bits, h))
			return CKR_MECHANISM_PARAM_INVALID;
		if ((rv = tok_key_pctx(key, use, &op->pctx)) != CKR_OK)
			return rv;
		if (EVP_PKEY_CTX_set_rsa_padding(op->pctx, RSA_PKCS1_PSS_PADDING) <= 0 ||
		    EVP_PKEY_CTX_set_signature_md(op->pctx, md) <= 0 ||
		    EVP_PKEY_CTX_set_rsa_mgf1_md(op->pctx, mgf) <= 0 ||
		    EVP_PKEY_CTX_set_rsa_pss_saltlen(op->pctx, (int)p->sLen) <= 0)
			return tok_ossl_fail();
		if (m == CKM_SHA256_RSA_PKCS_PSS)
			op->md = md;
		else
			op->exact_in = h;
	}

	if (op->md) {
		op->multipart = true;
		if (!(op->mdctx = EVP_MD_CTX_new()))
			return CKR_HOST_MEMORY;
		if (!EVP_DigestInit_ex2(op->mdctx, op->md, NULL))
			return tok_ossl_fail();
	}
	return CKR_OK;
}

/* CK_EDDSA_PARAMS (PKCS#11 3.0), not in p11-kit's v2.40 header. */
struct eddsa_params {
	CK_BBOOL phFlag;
	CK_ULONG ulContextDataLen;
	CK_BYTE_PTR pContextData;
};

static CK_RV init_eddsa(struct tok_op *op, const CK_MECHANISM *mech, struct tok_object *key)
{
	struct tok_keycache *c;
	CK_RV rv;
	int ok;

	if (op->kind != TOK_OP_SIGN && op->kind != TOK_OP_VERIFY)
		return CKR_MECHANISM_INVALID;
	if (mech->pParameter) {
		/* Only pure Ed25519: no prehash, no context. */
		const struct eddsa_params *p = mech->pParameter;

		if (mech->ulParameterLen != sizeof(*p) || p->phFlag || p->ulContextDataLen)
			return CKR_MECHANISM_PARAM_INVALID;
	} else if (mech->ulParameterLen) {
		return CKR_MECHANISM_PARAM_INVALID;
	}
	rv = check_key(op->kind, key, op->kind == TOK_OP_SIGN ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY,
		       CKK_EC_EDWARDS, CKK_EC_EDWARDS);
	if (rv != CKR_OK)
		return rv;
	if ((rv = tok_key_cache_get(key, &c)) != CKR_OK)
		return rv;
	op->fam = F_EDDSA;
	op->sig_len = 64;
	if (!(op->mdctx = EVP_MD_CTX_new()))
		return CKR_HOST_MEMORY;
	if (op->kind == TOK_OP_SIGN)
		ok = EVP_DigestSignInit_ex(op->mdctx, NULL, NULL, tok_algs.lc, NULL, c->pkey, NULL);
	else
		ok = EVP_DigestVerifyInit_ex(op->mdctx, NULL, NULL, tok_algs.lc, NULL, c->pkey, NULL);
	return ok > 0 ? CKR_OK : tok_ossl_fail();
}

CK_RV tok_op_init(enum tok_opkind kind, const CK_MECHANISM *mech, struct tok_object *key,
		  struct tok_op **ret_op)
{
	struct tok_op *op;
	CK_RV rv;

	if (!mech || !ret_op)
		return CKR_ARGUMENTS_BAD;
	if (!tok_algs.ready)
		return CKR_CRYPTOKI_NOT_INITIALIZED;
	if (!(op = calloc(1, sizeof(*op))))
		return CKR_HOST_MEMORY;
	op->kind = kind;
	op->mech = mech->mechanism;

	switch (mech->mechanism) {
	case CKM_AES_ECB: case CKM_AES_CBC: case CKM_AES_CBC_PAD: case CKM_AES_GCM: case CKM_AES_CTR:
		rv = init_aes(op, mech, key);
		break;
	case CKM_SHA_1: case CKM_SHA224: case CKM_SHA256: case CKM_SHA384: case CKM_SHA512:
		rv = kind == TOK_OP_DIGEST ? init_digest(op, mech) : CKR_MECHANISM_INVALID;
		break;
	case CKM_SHA256_HMAC: case CKM_SHA384_HMAC: case CKM_SHA512_HMAC:
		rv = init_hmac(op, mech, key);
		break;
	case CKM_AES_CMAC:
		rv = init_cmac(op, mech, key);
		break;
	case CKM_ECDSA: case CKM_ECDSA_SHA256: case CKM_ECDSA_SHA384:
		rv = init_ecdsa(op, mech, key);
		break;
	case CKM_RSA_PKCS: case CKM_SHA256_RSA_PKCS: case CKM_RSA_PKCS_PSS:
	case CKM_SHA256_RSA_PKCS_PSS: case CKM_RSA_PKCS_OAEP:
		rv = init_rsa(op, mech, key);
		break;
	case CKM_EDDSA:
		rv = init_eddsa(op, mech, key);
		break;
	default:
		rv = CKR_MECHANISM_INVALID;
		break;
	}
	if (rv == CKR_OK && kind == TOK_OP_DIGEST && op->fam != F_DIGEST)
		rv = CKR_MECHANISM_INVALID;
	if (rv != CKR_OK) {
		tok_op_free(op);
		return rv;
	}
	*ret_op = op;
	return CKR_OK;
}

/* ---- AES ------------------------------------------------------------------ */

static bool enc_of(const struct tok_op *op)
{
	return op->kind == TOK_OP_ENCRYPT;
}

/* EVP_CipherUpdate over any length (its lengths are int). */
static CK_RV cipher_update(EVP_CIPHER_CTX *c, uint8_t *out, size_t *written, const uint8_t *in, size_t len)
{
	size_t done = 0, w = 0;

	while (done < len) {
		int chunk = len - done > (1u << 30) ? (1 << 30) : (int)(len - done);
		int outl = 0;

		if (!EVP_CipherUpdate(c, out ? out + w : NULL, &outl, in + done, chunk))
			return tok_ossl_fail();
		done += (size_t)chunk;
		w += (size_t)outl;
	}
	*written = w;
	return CKR_OK;
}

/* Key the cipher context (again, for a one-shot step: it starts afresh). */
static CK_RV aes_key(struct tok_op *op)
{
	int enc = enc_of(op);

	if (op->fam == F_GCM) {
		if (!EVP_CipherInit_ex2(op->cctx, op->cipher, NULL, NULL, enc, NULL) ||
		    EVP_CIPHER_CTX_ctrl(op->cctx, EVP_CTRL_GCM_SET_IVLEN, (int)op->iv_len, NULL) <= 0 ||
		    !EVP_CipherInit_ex2(op->cctx, NULL, op->key, op->iv, enc, NULL))
			return tok_ossl_fail();
		size_t w;
		CK_RV rv;

		if (op->aad_len && (rv = cipher_update(op->cctx, NULL, &w, op->aad, op->aad_len)) != CKR_OK)
			return rv;
	} else {
		if (!EVP_CipherInit_ex2(op->cctx, op->cipher, op->key, op->iv_len ? op->iv : NULL, enc, NULL) ||
		    !EVP_CIPHER_CTX_set_padding(op->cctx, 0))
			return tok_ossl_fail();
	}
	op->keyed = true;
	op->rem = 0;
	op->held = false;
	return CKR_OK;
}

static CK_RV len_range(const struct tok_op *op)
{
	return enc_of(op) ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE;
}

/* Output of a block-mode update of in_len more bytes. */
static size_t block_update_len(const struct tok_op *op, size_t in_len)
{
	size_t blocks = (op->rem + in_len) / 16;

	if (op->pad && !enc_of(op)) /* the last complete block is held back */
		return blocks ? (op->held ? 16 : 0) + 16 * (blocks - 1) : 0;
	return 16 * blocks;
}

static CK_RV block_update(struct tok_op *op, const uint8_t *in, size_t in_len, uint8_t *out, CK_ULONG *out_len)
{
	size_t need, w;
	CK_RV rv;

	if (in_len && !in)
		return CKR_ARGUMENTS_BAD;
	need = block_update_len(op, in_len);
	if (!out_room(out, out_len, need, &rv))
		return rv;
	if (!op->keyed && (rv = aes_key(op)) != CKR_OK)
		return rv;
	if (op->pad && !enc_of(op) && (op->rem + in_len) / 16) {
		size_t blocks = (op->rem + in_len) / 16, first, second, pos = 0;
		uint8_t scratch[32]; /* the tail (< 16 bytes) outputs nothing */

		if (op->held) {
			memcpy(out, op->held_pt, 16);
			pos = 16;
		}
		/* first: input completing every block but the last; second: the
		 * rest of the last block, decrypted into held_pt. */
		first = 16 * (blocks - 1) > op->rem ? 16 * (blocks - 1) - op->rem : 0;
		second = 16 * blocks - op->rem - first;
		if ((rv = cipher_update(op->cctx, out + pos, &w, in, first)) != CKR_OK)
			return rv;
		pos += w;
		if ((rv = cipher_update(op->cctx, op->held_pt, &w, in + first, second)) != CKR_OK)
			return rv;
		if (w != 16)
			return tok_ossl_fail();
		op->held = true;
		if ((rv = cipher_update(op->cctx, scratch, &w, in + first + second, in_len - first - second)) != CKR_OK)
			return rv;
		if (w != 0 || pos != need)
			return tok_ossl_fail();
	} else {
		if ((rv = cipher_update(op->cctx, out, &w, in, in_len)) != CKR_OK)
			return rv;
		if (w != need)
			return tok_ossl_fail();
	}
	op->rem = (op->rem + in_len) % 16;
	*out_len = need;
	return CKR_OK;
}

/* Length of the CBC_PAD plaintext in held_pt, or 16+ when the padding is bad;
 * no early exit on the padding bytes. */
static size_t unpad_len(const uint8_t blk[16])
{
	unsigned p = blk[15], bad = (p == 0) | (p > 16);

	for (unsigned i = 0; i < 16; i++) {
		unsigned in_pad = (unsigned)(15 - i) < p;

		bad |= in_pad & (blk[i] != p);
	}
	return bad ? 17 : 16 - p;
}

static CK_RV block_final(struct tok_op *op, uint8_t *out, CK_ULONG *out_len)
{
	size_t need, w;
	CK_RV rv;

	if (!op->pad) {
		if (op->rem)
			return len_range(op);
		need = 0;
	} else if (enc_of(op)) {
		need = 16;
	} else {
		if (op->rem || !op->held)
			return CKR_ENCRYPTED_DATA_LEN_RANGE;
		need = unpad_len(op->held_pt);
		if (need > 16)
			return CKR_ENCRYPTED_DATA_INVALID;
	}
	if (!out_room(out, out_len, need, &rv))
		return rv;
	if (op->pad && enc_of(op)) {
		uint8_t pad[16];
		size_t p = 16 - op->rem;

		if (!op->keyed && (rv = aes_key(op)) != CKR_OK)
			return rv;
		memset(pad, (int)p, p);
		if ((rv = cipher_update(op->cctx, out, &w, pad, p)) != CKR_OK)
			return rv;
		if (w != 16)
			return tok_ossl_fail();
	} else if (op->pad) {
		memcpy(out, op->held_pt, need);
	}
	*out_len = need;
	return CKR_OK;
}

static CK_RV block_oneshot(struct tok_op *op, const uint8_t *in, size_t in_len, uint8_t *out, CK_ULONG *out_len)
{
	size_t need, w;
	uint8_t *tmp = NULL, *dst;
	CK_RV rv;

	if (in_len && !in)
		return CKR_ARGUMENTS_BAD;
	if (enc_of(op)) {
		if (!op->pad && in_len % 16)
			return CKR_DATA_LEN_RANGE;
		need = op->pad ? (in_len / 16 + 1) * 16 : in_len;
	} else {
		if (in_len % 16 || (op->pad && !in_len))
			return CKR_ENCRYPTED_DATA_LEN_RANGE;
		need = in_len; /* suffices; CBC_PAD's exact length is known after decryption */
	}
	if (!out) {
		*out_len = need;
		return CKR_OK;
	}
	if (*out_len < need && !(op->pad && !enc_of(op))) {
		*out_len = need;
		return CKR_BUFFER_TOO_SMALL;
	}
	if ((rv = aes_key(op)) != CKR_OK)
		return rv;
	if (enc_of(op)) {
		if ((rv = cipher_update(op->cctx, out, &w, in, in_len)) != CKR_OK)
			return rv;
		if (op->pad) {
			uint8_t pad[16];
			size_t p = 16 - in_len % 16, w2;

			memset(pad, (int)p, p);
			if ((rv = cipher_update(op->cctx, out + w, &w2, pad, p)) != CKR_OK)
				return rv;
			w += w2;
		}
		if (w != need)
			return tok_ossl_fail();
		*out_len = need;
		return CKR_OK;
	}
	if (!op->pad) {
		if ((rv = cipher_update(op->cctx, out, &w, in, in_len)) != CKR_OK)
			return rv;
		*out_len = w;
		return w == need ? CKR_OK : tok_ossl_fail();
	}
	/* CBC_PAD decryption: into out when it holds the ciphertext's length,
	 * else into a scratch buffer to learn the exact length. */
	dst = out;
	if (*out_len < in_len) {
		if (!(tmp = malloc(in_len)))
			return CKR_HOST_MEMORY;
		dst = tmp;
	}
	if ((rv = cipher_update(op->cctx, dst, &w, in, in_len)) != CKR_OK)
		goto done;
	if (w != in_len) {
		rv = tok_ossl_fail();
		goto done;
	}
	need = unpad_len(dst + in_len - 16);
	if (need > 16) {
		OPENSSL_cleanse(dst, in_len);
		rv = CKR_ENCRYPTED_DATA_INVALID;
		goto done;
	}
	need += in_len - 16;
	if (dst == tmp) {
		if (*out_len < need) {
			*out_len = need;
			op->keyed = false; /* the retry starts afresh */
			rv = CKR_BUFFER_TOO_SMALL;
			goto done;
		}
		memcpy(out, tmp, need);
	} else {
		OPENSSL_cleanse(out + need, in_len - need);
	}
	*out_len = need;
	rv = CKR_OK;
done:
	if (tmp) {
		OPENSSL_cleanse(tmp, in_len);
		free(tmp);
	}
	return rv;
}

/* AES-CTR: output = input, for one-shot and update steps alike (a one-shot
 * step starts the key stream afresh). */
static CK_RV stream_step(struct tok_op *op, const uint8_t *in, size_t in_len, uint8_t *out, CK_ULONG *out_len,
			 bool oneshot)
{
	uint64_t done = oneshot ? 0 : op->ctr_done;
	size_t w;
	CK_RV rv;

	if (in_len && !in)
		return CKR_ARGUMENTS_BAD;
	if (in_len > op->ctr_room - done)
		return len_range(op); /* the counter would wrap */
	if (!out_room(out, out_len, in_len, &rv))
		return rv;
	if ((oneshot || !op->keyed) && (rv = aes_key(op)) != CKR_OK)
		return rv;
	if ((rv = cipher_update(op->cctx, out, &w, in, in_len)) != CKR_OK)
		return rv;
	if (w != in_len)
		return tok_ossl_fail();
	op->ctr_done = done + in_len;
	*out_len = w;
	return CKR_OK;
}

/* GCM encryption: output = input; the tag comes at the end. GCM decryption:
 * the ciphertext is buffered until the tag at its end can be checked. */
static CK_RV gcm_update(struct tok_op *op, const uint8_t *in, size_t in_len, uint8_t *out, CK_ULONG *out_len)
{
	size_t w;
	CK_RV rv;

	if (in_len && !in)
		return CKR_ARGUMENTS_BAD;
	if (!out_room(out, out_len, enc_of(op) ? in_len : 0, &rv))
		return rv;
	if (enc_of(op)) {
		if (!op->keyed && (rv = aes_key(op)) != CKR_OK)
			return rv;
		if ((rv = cipher_update(op->cctx, out, &w, in, in_len)) != CKR_OK)
			return rv;
		*out_len = w;
		return w == in_len ? CKR_OK : tok_ossl_fail();
	}
	if (in_len > SIZE_MAX / 2 - op->gbuf_len)
		return CKR_DATA_LEN_RANGE;
	if (op->gbuf_len + in_len > op->gbuf_cap) {
		size_t cap = op->gbuf_cap ? op->gbuf_cap : 256;
		uint8_t *b;

		while (cap < op->gbuf_len + in_len)
			cap *= 2;
		/* no realloc: the old buffer is cleansed, not left in the heap */
		if (!(b = malloc(cap)))
			return CKR_HOST_MEMORY;
		if (op->gbuf_len)
			memcpy(b, op->gbuf, op->gbuf_len);
		if (op->gbuf)
			OPENSSL_cleanse(op->gbuf, op->gbuf_cap);
		free(op->gbuf);
		op->gbuf = b;
		op->gbuf_cap = cap;
	}
	if (in_len)
		memcpy(op->gbuf + op->gbuf_len, in, in_len);
	op->gbuf_len += in_len;
	*out_len = 0;
	return CKR_OK;
}

/* Decrypt ct || tag into out (ct_len bytes); on a bad tag out is wiped. */
static CK_RV gcm_decrypt(struct tok_op *op, const uint8_t *in, size_t in_len, uint8_t *out)
{
	size_t ct_len = in_len - op->tag_len, w;
	int outl;
	CK_RV rv;

	if ((rv = aes_key(op)) != CKR_OK)
		return rv;
	if ((rv = cipher_update(op->cctx, out, &w, in, ct_len)) != CKR_OK)
		return rv;
	if (EVP_CIPHER_CTX_ctrl(op->cctx, EVP_CTRL_GCM_SET_TAG, (int)op->tag_len,
				(void *)(in + ct_len)) <= 0)
		return tok_ossl_fail();
	if (EVP_CipherFinal_ex(op->cctx, out ? out + w : NULL, &outl) <= 0) {
		if (ct_len)
			OPENSSL_cleanse(out, ct_len);
		ERR_clear_error();
		return CKR_ENCRYPTED_DATA_INVALID;
	}
	return CKR_OK;
}

static CK_RV gcm_encrypt_finish(struct tok_op *op, uint8_t *tag)
{
	uint8_t last[16];
	int outl = 0;

	if (EVP_CipherFinal_ex(op->cctx, last, &outl) <= 0 || outl != 0 ||
	    EVP_CIPHER_CTX_ctrl(op->cctx, EVP_CTRL_GCM_GET_TAG, (int)op->tag_len, tag) <= 0)
		return tok_ossl_fail();
	return CKR_OK;
}

static CK_RV gcm_final(struct tok_op *op, uint8_t *out, CK_ULONG *out_len)
{
	CK_RV rv;

	if (enc_of(op)) {
		if (!out_room(out, out_len, op->tag_len, &rv))
			return rv;
		if (!op->keyed && (rv = aes_key(op)) != CKR_OK)
			return rv;
		if ((rv = gcm_encrypt_finish(op, out)) != CKR_OK)
			return rv;
		*out_len = op->tag_len;
		return CKR_OK;
	}
	if (op->gbuf_len < op->tag_len)
		return CKR_ENCRYPTED_DATA_LEN_RANGE;
	if (!out_room(out, out_len, op->gbuf_len - op->tag_len, &rv))
		return rv;
	if ((rv = gcm_decrypt(op, op->gbuf ? op->gbuf : (const uint8_t *)"", op->gbuf_len, out)) != CKR_OK)
		return rv;
	*out_len = op->gbuf_len - op->tag_len;
	return CKR_OK;
}

static CK_RV gcm_oneshot(struct tok_op *op, const uint8_t *in, size_t in_len, uint8_t *out, CK_ULONG *out_len)
{
	size_t w;
	CK_RV rv;

	if (in_len && !in)
		return CKR_ARGUMENTS_BAD;
	if (enc_of(op)) {
		if (in_len > SIZE_MAX - 16)
			return CKR_DATA_LEN_RANGE;
		if (!out_room(out, out_len, in_len + op->tag_len, &rv))
			return rv;
		if ((rv = aes_key(op)) != CKR_OK)
			return rv;
		if ((rv = cipher_update(op->cctx, out, &w, in, in_len)) != CKR_OK)
			return rv;
		if (w != in_len)
			return tok_ossl_fail();
		if ((rv = gcm_encrypt_finish(op, out + in_len)) != CKR_OK)
			return rv;
		*out_len = in_len + op->tag_len;
		return CKR_OK;
	}
	if (in_len < op->tag_len)
		return CKR_ENCRYPTED_DATA_LEN_RANGE;
	if (!out_room(out, out_len, in_len - op->tag_len, &rv))
		return rv;
	if ((rv = gcm_decrypt(op, in, in_len, out)) != CKR_OK)
		return rv;
	*out_len = in_len - op->tag_len;
	return CKR_OK;
}

/* ---- signatures ----------------------------------------------------------- */

static const uint8_t sha256_digest_info[19] = {
	0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
	0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20,
};

/* The input EVP_PKEY_sign/verify takes: raw input checked, or the hash of the
 * accumulated data (with DigestInfo for CKM_SHA256_RSA_PKCS). */
struct tbs {
	uint8_t buf[sizeof(sha256_digest_info) + EVP_MAX_MD_SIZE];
	const uint8_t *p;
	size_t len;
};

static CK_RV tbs_raw(const struct tok_op *op, const uint8_t *in, size_t in_len, struct tbs *t)
{
	if (in_len && !in)
		return CKR_ARGUMENTS_BAD;
	if (op->exact_in && in_len != op->exact_in)
		return CKR_DATA_LEN_RANGE;
	if (op->max_in && in_len > op->max_in)
		return CKR_DATA_LEN_RANGE;
	t->p = in_len ? in : t->buf;
	t->len = in_len;
	return CKR_OK;
}

static CK_RV tbs_hash(struct tok_op *op, struct tbs *t)
{
	size_t off = op->digest_info ? sizeof(sha256_digest_info) : 0;
	unsigned int hl;

	if (op->digest_info)
		memcpy(t->buf, sha256_digest_info, off);
	if (!EVP_DigestFinal_ex(op->mdctx, t->buf + off, &hl))
		return tok_ossl_fail();
	t->p = t->buf;
	t->len = off + hl;
	return CKR_OK;
}

static CK_RV pkey_sign(struct tok_op *op, const struct tbs *t, uint8_t *out)
{
	if (op->ecdsa) {
		uint8_t der[160];
		size_t der_len = sizeof(der);
		const unsigned char *p = der;
		const BIGNUM *r, *s;
		ECDSA_SIG *sig;
		int ok;

		if (EVP_PKEY_sign(op->pctx, der, &der_len, t->p, t->len) <= 0)
			return tok_ossl_fail();
		if (!(sig = d2i_ECDSA_SIG(NULL, &p, (long)der_len)))
			return tok_ossl_fail();
		ECDSA_SIG_get0(sig, &r, &s);
		ok = BN_bn2binpad(r, out, (int)op->order_len) > 0 &&
		     BN_bn2binpad(s, out + op->order_len, (int)op->order_len) > 0;
		ECDSA_SIG_free(sig);
		return ok ? CKR_OK : tok_ossl_fail();
	} else {
		size_t len = op->sig_len;

		if (EVP_PKEY_sign(op->pctx, out, &len, t->p, t->len) <= 0 || len != op->sig_len)
			return tok_ossl_fail();
		return CKR_OK;
	}
}

static CK_RV pkey_verify(struct tok_op *op, const struct tbs *t, const uint8_t *sig, size_t sig_len)
{
	int ok;

	if (sig_len != op->sig_len)
		return CKR_SIGNATURE_LEN_RANGE;
	if (!sig)
		return CKR_ARGUMENTS_BAD;
	if (op->ecdsa) {
		BIGNUM *r = BN_bin2bn(sig, (int)op->order_len, NULL);
		BIGNUM *s = BN_bin2bn(sig + op->order_len, (int)op->order_len, NULL);
		ECDSA_SIG *es = ECDSA_SIG_new();
		unsigned char *der = NULL;
		int der_len;

		if (!r || !s || !es || !ECDSA_SIG_set0(es, r, s)) {
			BN_free(r);
			BN_free(s);
			ECDSA_SIG_free(es);
			return CKR_HOST_MEMORY;
		}
		der_len = i2d_ECDSA_SIG(es, &der);
		ECDSA_SIG_free(es);
		if (der_len <= 0)
			return tok_ossl_fail();
		ok = EVP_PKEY_verify(op->pctx, der, (size_t)der_len, t->p, t->len);
		OPENSSL_free(der);
	} else {
		ok = EVP_PKEY_verify(op->pctx, sig, sig_len, t->p, t->len);
	}
	ERR_clear_error();
	return ok == 1 ? CKR_OK : CKR_SIGNATURE_INVALID;
}

static CK_RV hmac_compute(struct tok_op *op, uint8_t *mac)
{
	size_t len = 0;

	if (!EVP_MAC_final(op->mac, mac, &len, op->sig_len) || len != op->sig_len)
		return tok_ossl_fail();
	return CKR_OK;
}

/* Feed data to the running hash or MAC. */
static CK_RV absorb(struct tok_op *op, const uint8_t *in, size_t in_len)
{
	if (in_len && !in)
		return CKR_ARGUMENTS_BAD;
	if (!in_len)
		return CKR_OK;
	if (op->fam == F_HMAC)
		return EVP_MAC_update(op->mac, in, in_len) ? CKR_OK : tok_ossl_fail();
	return EVP_DigestUpdate(op->mdctx, in, in_len) ? CKR_OK : tok_ossl_fail();
}

static CK_RV rsa_enc_oneshot(struct tok_op *op, const uint8_t *in, size_t in_len, uint8_t *out, CK_ULONG *out_len)
{
	size_t len;
	uint8_t *tmp;
	CK_RV rv;

	if (in_len && !in)
		return CKR_ARGUMENTS_BAD;
	if (op->kind == TOK_OP_ENCRYPT) {
		if (in_len > op->max_in)
			return CKR_DATA_LEN_RANGE;
		if (!out_room(out, out_len, op->mod_len, &rv))
			return rv;
		len = op->mod_len;
		if (EVP_PKEY_encrypt(op->pctx, out, &len, in_len ? in : (const uint8_t *)"", in_len) <= 0 ||
		    len != op->mod_len)
			return tok_ossl_fail();
		*out_len = len;
		return CKR_OK;
	}
	if (in_len != op->mod_len)
		return CKR_ENCRYPTED_DATA_LEN_RANGE;
	if (!out) {
		*out_len = op->mod_len; /* suffices; the exact length is known after decryption */
		return CKR_OK;
	}
	if (!(tmp = malloc(op->mod_len)))
		return CKR_HOST_MEMORY;
	len = op->mod_len;
	if (EVP_PKEY_decrypt(op->pctx, tmp, &len, in, in_len) <= 0) {
		ERR_clear_error();
		rv = CKR_ENCRYPTED_DATA_INVALID;
	} else if (*out_len < len) {
		*out_len = len;
		rv = CKR_BUFFER_TOO_SMALL;
	} else {
		if (len)
			memcpy(out, tmp, len);
		*out_len = len;
		rv = CKR_OK;
	}
	OPENSSL_cleanse(tmp, op->mod_len);
	free(tmp);
	return rv;
}

/* ---- the steps ------------------------------------------------------------ */

CK_RV tok_op_oneshot(struct tok_op *op, const uint8_t *in, size_t in_len, uint8_t *out, CK_ULONG *out_len)
{
	struct tbs t;
	CK_RV rv;

	if (!op || !out_len)
		return CKR_ARGUMENTS_BAD;
	if (op->updated)
		return CKR_OPERATION_ACTIVE;
	if (op->kind == TOK_OP_VERIFY)
		return CKR_FUNCTION_NOT_SUPPORTED; /* tok_op_verify */
	switch (op->fam) {
	case F_BLOCK:
		return block_oneshot(op, in, in_len, out, out_len);
	case F_GCM:
		return gcm_oneshot(op, in, in_len, out, out_len);
	case F_RSA_ENC:
		return rsa_enc_oneshot(op, in, in_len, out, out_len);
	case F_DIGEST: {
		unsigned int hl;
		size_t need = (size_t)EVP_MD_get_size(op->md);

		if (in_len && !in)
			return CKR_ARGUMENTS_BAD;
		if (!out_room(out, out_len, need, &rv))
			return rv;
		if ((rv = absorb(op, in, in_len)) != CKR_OK)
			return rv;
		if (!EVP_DigestFinal_ex(op->mdctx, out, &hl))
			return tok_ossl_fail();
		*out_len = hl;
		return CKR_OK;
	}
	case F_HMAC:
		if (in_len && !in)
			return CKR_ARGUMENTS_BAD;
		if (!out_room(out, out_len, op->sig_len, &rv))
			return rv;
		if ((rv = absorb(op, in, in_len)) != CKR_OK || (rv = hmac_compute(op, out)) != CKR_OK)
			return rv;
		*out_len = op->sig_len;
		return CKR_OK;
	case F_STREAM:
		return stream_step(op, in, in_len, out, out_len, true);
	case F_EDDSA: {
		size_t len = 64;

		if (in_len && !in)
			return CKR_ARGUMENTS_BAD;
		if (!out_room(out, out_len, 64, &rv))
			return rv;
		if (EVP_DigestSign(op->mdctx, out, &len, in_len ? in : (const uint8_t *)"", in_len) <= 0 ||
		    len != 64)
			return tok_ossl_fail();
		*out_len = 64;
		return CKR_OK;
	}
	case F_SIGN:
		if (!op->md && (rv = tbs_raw(op, in, in_len, &t)) != CKR_OK)
			return rv;
		if (op->md && in_len && !in)
			return CKR_ARGUMENTS_BAD;
		if (!out_room(out, out_len, op->sig_len, &rv))
			return rv;
		if (op->md && ((rv = absorb(op, in, in_len)) != CKR_OK || (rv = tbs_hash(op, &t)) != CKR_OK))
			return rv;
		if ((rv = pkey_sign(op, &t, out)) != CKR_OK)
			return rv;
		*out_len = op->sig_len;
		return CKR_OK;
	}
	return CKR_GENERAL_ERROR;
}

CK_RV tok_op_update(struct tok_op *op, const uint8_t *in, size_t in_len, uint8_t *out, CK_ULONG *out_len)
{
	CK_RV rv;

	if (!op)
		return CKR_ARGUMENTS_BAD;
	if (!op->multipart)
		return CKR_FUNCTION_NOT_SUPPORTED;
	switch (op->fam) {
	case F_BLOCK:
	case F_GCM:
		if (!out_len)
			return CKR_ARGUMENTS_BAD;
		rv = op->fam == F_BLOCK ? block_update(op, in, in_len, out, out_len)
					: gcm_update(op, in, in_len, out, out_len);
		break;
	case F_STREAM:
		if (!out_len)
			return CKR_ARGUMENTS_BAD;
		rv = stream_step(op, in, in_len, out, out_len, false);
		break;
	default:
		rv = absorb(op, in, in_len);
		break;
	}
	/* A length query or a short buffer is not the start of a multi-part run. */
	if (rv == CKR_OK && (op->fam == F_BLOCK || op->fam == F_GCM || op->fam == F_STREAM ? out != NULL : true))
		op->updated = true;
	return rv;
}

CK_RV tok_op_final(struct tok_op *op, uint8_t *out, CK_ULONG *out_len)
{
	struct tbs t;
	CK_RV rv;

	if (!op || !out_len)
		return CKR_ARGUMENTS_BAD;
	if (!op->multipart)
		return CKR_FUNCTION_NOT_SUPPORTED;
	switch (op->fam) {
	case F_BLOCK:
		return block_final(op, out, out_len);
	case F_GCM:
		return gcm_final(op, out, out_len);
	case F_DIGEST: {
		unsigned int hl;

		if (!out_room(out, out_len, (size_t)EVP_MD_get_size(op->md), &rv))
			return rv;
		if (!EVP_DigestFinal_ex(op->mdctx, out, &hl))
			return tok_ossl_fail();
		*out_len = hl;
		return CKR_OK;
	}
	case F_HMAC:
		if (op->kind != TOK_OP_SIGN)
			return CKR_FUNCTION_NOT_SUPPORTED;
		if (!out_room(out, out_len, op->sig_len, &rv))
			return rv;
		if ((rv = hmac_compute(op, out)) != CKR_OK)
			return rv;
		*out_len = op->sig_len;
		return CKR_OK;
	case F_STREAM:
		if (!out_room(out, out_len, 0, &rv))
			return rv;
		*out_len = 0;
		return CKR_OK;
	case F_SIGN:
		if (op->kind != TOK_OP_SIGN)
			return CKR_FUNCTION_NOT_SUPPORTED;
		if (!out_room(out, out_len, op->sig_len, &rv))
			return rv;
		if ((rv = tbs_hash(op, &t)) != CKR_OK || (rv = pkey_sign(op, &t, out)) != CKR_OK)
			return rv;
		*out_len = op->sig_len;
		return CKR_OK;
	default:
		return CKR_FUNCTION_NOT_SUPPORTED;
	}
}

static CK_RV verify_end(struct tok_op *op, const uint8_t *sig, size_t sig_len)
{
	struct tbs t;
	CK_RV rv;

	if (op->fam == F_HMAC) {
		uint8_t mac[EVP_MAX_MD_SIZE];

		if (sig_len != op->sig_len)
			return CKR_SIGNATURE_LEN_RANGE;
		if (!sig)
			return CKR_ARGUMENTS_BAD;
		if ((rv = hmac_compute(op, mac)) != CKR_OK)
			return rv;
		rv = CRYPTO_memcmp(mac, sig, op->sig_len) == 0 ? CKR_OK : CKR_SIGNATURE_INVALID;
		OPENSSL_cleanse(mac, sizeof(mac));
		return rv;
	}
	if (sig_len != op->sig_len)
		return CKR_SIGNATURE_LEN_RANGE;
	if ((rv = tbs_hash(op, &t)) != CKR_OK)
		return rv;
	return pkey_verify(op, &t, sig, sig_len);
}

CK_RV tok_op_verify(struct tok_op *op, const uint8_t *data, size_t len, const uint8_t *sig, size_t sig_len)
{
	struct tbs t;
	CK_RV rv;

	if (!op)
		return CKR_ARGUMENTS_BAD;
	if (op->kind != TOK_OP_VERIFY)
		return CKR_FUNCTION_NOT_SUPPORTED;
	if (op->updated)
		return CKR_OPERATION_ACTIVE;
	if (len && !data)
		return CKR_ARGUMENTS_BAD;
	switch (op->fam) {
	case F_EDDSA: {
		int ok;

		if (sig_len != 64)
			return CKR_SIGNATURE_LEN_RANGE;
		if (!sig)
			return CKR_ARGUMENTS_BAD;
		ok = EVP_DigestVerify(op->mdctx, sig, sig_len, len ? data : (const uint8_t *)"", len);
		ERR_clear_error();
		return ok == 1 ? CKR_OK : CKR_SIGNATURE_INVALID;
	}
	case F_HMAC:
		if ((rv = absorb(op, data, len)) != CKR_OK)
			return rv;
		return verify_end(op, sig, sig_len);
	case F_SIGN:
		if (op->md) {
			if ((rv = absorb(op, data, len)) != CKR_OK)
				return rv;
			return verify_end(op, sig, sig_len);
		}
		if ((rv = tbs_raw(op, data, len, &t)) != CKR_OK)
			return rv;
		return pkey_verify(op, &t, sig, sig_len);
	default:
		return CKR_FUNCTION_NOT_SUPPORTED;
	}
}

CK_RV tok_op_verify_final(struct tok_op *op, const uint8_t *sig, size_t sig_len)
{
	if (!op)
		return CKR_ARGUMENTS_BAD;
	if (op->kind != TOK_OP_VERIFY || !op->multipart)
		return CKR_FUNCTION_NOT_SUPPORTED;
	return verify_end(op, sig, sig_len);
}

CK_RV tok_op_digest_key(struct tok_op *op, struct tok_object *key)
{
	const struct tok_attr *v;
	CK_RV rv;

	if (!op || !key)
		return CKR_ARGUMENTS_BAD;
	if (op->fam != F_DIGEST)
		return CKR_OPERATION_NOT_INITIALIZED;
	if (key->cls != CKO_SECRET_KEY || !(v = tok_attrs_get(&key->attrs, CKA_VALUE)))
		return CKR_KEY_INDIGESTIBLE;
	if ((rv = absorb(op, v->value, v->len)) != CKR_OK)
		return rv;
	op->updated = true;
	return CKR_OK;
}
