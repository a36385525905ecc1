/* SPDX-License-Identifier: MIT */
/*
 * The crypto engine's keys (token.h): prepared keys (key->cache), key checks
 * for C_CreateObject / C_UnwrapKey, key generation, wrapping, randomness.
 *
 * Encodings (for docs/token.md):
 *  - CKA_EC_PARAMS: the DER OID of P-256 (1.2.840.10045.3.1.7), P-384
 *    (1.3.132.0.34) or Ed25519 (1.3.101.112); for Ed25519 also the
 *    PrintableString "edwards25519" (PKCS#11 3.0). Key generation copies the
 *    caller's CKA_EC_PARAMS; unwrapping writes the OID form.
 *  - CKA_EC_POINT is written as a DER OCTET STRING wrapping the uncompressed
 *    point (EC) or the 32-byte key (Ed25519), as OpenSC and pkcs11-tool
 *    expect; on input the raw point is accepted as well (and compressed
 *    points for EC public keys). Private EC and Ed25519 keys carry
 *    CKA_EC_POINT too (generated, unwrapped or completed by tok_key_check).
 *  - Big integers (RSA parts) are unsigned big-endian without leading zeros.
 *  - A wrapped private key is its PKCS#8 PrivateKeyInfo DER; with
 *    CKM_AES_KEY_WRAP (RFC 3394) its length must be a multiple of 8, so use
 *    CKM_AES_KEY_WRAP_PAD (RFC 5649) for private keys.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "engine_internal.h"

#define RSA_IMPORT_MAX 16384
#define RSA_GEN_MAX 4096
#define SECRET_MAX 512

/* The DRBGs of tok_algs.lc (mech.c): RAND_bytes would take an application's
 * ENGINE RAND_METHOD instead. EVP_RAND_generate splits long requests. */
static CK_RV drbg_bytes(EVP_RAND_CTX *r, uint8_t *buf, size_t len)
{
	if (!len)
		return CKR_OK;
	if (!r || !EVP_RAND_generate(r, buf, len, 0, 0, NULL, 0))
		return tok_ossl_fail();
	return CKR_OK;
}

/* ---- curves and DER --------------------------------------------------------- */

struct curve {
	const char *group;  /* OpenSSL group name; NULL for Ed25519 */
	int idx;            /* its tok_algs.ec_params; -1 for Ed25519 */
	int nid;
	const uint8_t *oid; /* DER OID, the form we write */
	size_t oid_len;
	size_t len;         /* bytes of a coordinate, the order, or an Ed25519 key */
};

static const uint8_t oid_p256[] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
static const uint8_t oid_p384[] = { 0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22 };
static const uint8_t oid_ed25519[] = { 0x06, 0x03, 0x2b, 0x65, 0x70 };
static const uint8_t str_ed25519[] = { 0x13, 0x0c, 'e', 'd', 'w', 'a', 'r', 'd', 's', '2', '5', '5', '1', '9' };

static const struct curve curve_p256 = { "prime256v1", TOK_P256, NID_X9_62_prime256v1, oid_p256,
					 sizeof(oid_p256), 32 };
static const struct curve curve_p384 = { "secp384r1", TOK_P384, NID_secp384r1, oid_p384, sizeof(oid_p384),
					 48 };
static const struct curve curve_ed25519 = { NULL, -1, NID_ED25519, oid_ed25519, sizeof(oid_ed25519), 32 };

static const struct curve *const curves[TOK_NCURVES] = { [TOK_P256] = &curve_p256,
							 [TOK_P384] = &curve_p384 };

bool tok_ec_params_load(void)
{
	const struct curve *const *cv = curves;

	for (int i = 0; i < TOK_NCURVES; i++) {
		EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(tok_algs.lc, TOK_KEYMGMT("EC"), NULL);
		bool ok = ctx && EVP_PKEY_paramgen_init(ctx) > 0 &&
			  EVP_PKEY_CTX_set_group_name(ctx, cv[i]->group) > 0 &&
			  EVP_PKEY_paramgen(ctx, &tok_algs.ec_params[i]) > 0;

		EVP_PKEY_CTX_free(ctx);
		if (!ok)
			return false;
	}
	return true;
}

static bool attr_is(const struct tok_attr *a, const uint8_t *v, size_t len)
{
	return a->len == len && memcmp(a->value, v, len) == 0;
}

/* The curve of CKA_EC_PARAMS for key type kt (CKK_EC or CKK_EC_EDWARDS).
 * CKR_TEMPLATE_INCOMPLETE (absent), CKR_CURVE_NOT_SUPPORTED (a well-formed
 * OID, name or explicit parameters we do not support),
 * CKR_ATTRIBUTE_VALUE_INVALID (not DER). */
static CK_RV curve_of(const struct tok_attr *a, CK_KEY_TYPE kt, const struct curve **ret)
{
	if (!a)
		return CKR_TEMPLATE_INCOMPLETE;
	if (kt == CKK_EC && attr_is(a, oid_p256, sizeof(oid_p256)))
		*ret = &curve_p256;
	else if (kt == CKK_EC && attr_is(a, oid_p384, sizeof(oid_p384)))
		*ret = &curve_p384;
	else if (kt == CKK_EC_EDWARDS && (attr_is(a, oid_ed25519, sizeof(oid_ed25519)) ||
					  attr_is(a, str_ed25519, sizeof(str_ed25519))))
		*ret = &curve_ed25519;
	else if (a->len >= 2 && a->len < 128 && a->value[1] == a->len - 2 &&
		 (a->value[0] == 0x06 || a->value[0] == 0x13 || a->value[0] == 0x30))
		return CKR_CURVE_NOT_SUPPORTED;
	else
		return CKR_ATTRIBUTE_VALUE_INVALID;
	return CKR_OK;
}

/* DER OCTET STRING of len bytes (len < 256) into out (len + 3 bytes). */
static size_t der_octets(uint8_t *out, const uint8_t *v, size_t len)
{
	size_t h = 0;

	out[h++] = 0x04;
	if (len >= 128)
		out[h++] = 0x81;
	out[h++] = (uint8_t)len;
	memcpy(out + h, v, len);
	return h + len;
}

static bool point_len_ok(const struct curve *cv, size_t len, uint8_t first)
{
	if (!cv->group)
		return len == 32;
	return (len == 2 * cv->len + 1 && first == 0x04) ||
	       (len == cv->len + 1 && (first == 0x02 || first == 0x03));
}

/* The point inside CKA_EC_POINT: its DER OCTET STRING form, or the raw point. */
static bool ec_point_of(const struct curve *cv, const struct tok_attr *a, const uint8_t **p, size_t *len)
{
	if (!a || a->len < 2)
		return false;
	if (a->value[0] == 0x04) {
		size_t h = 2, l = a->value[1];

		if (l == 0x81 && a->len > 3) {
			l = a->value[2];
			h = 3;
		}
		if (l >= (h == 3 ? 128u : 0u) && l < 0x80 + (h == 3 ? 128u : 0u) && h + l == a->len &&
		    point_len_ok(cv, l, a->value[h])) {
			*p = a->value + h;
			*len = l;
			return true;
		}
	}
	if (point_len_ok(cv, a->len, a->value[0])) {
		*p = a->value;
		*len = a->len;
		return true;
	}
	return false;
}

static CK_RV set_bn(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, const BIGNUM *bn)
{
	uint8_t buf[RSA_IMPORT_MAX / 8 + 8];
	int n = BN_num_bytes(bn);
	CK_RV rv;

	if (n < 0 || (size_t)n > sizeof(buf))
		return CKR_ATTRIBUTE_VALUE_INVALID;
	BN_bn2bin(bn, buf);
	rv = tok_attrs_set(s, t, buf, (CK_ULONG)n);
	OPENSSL_cleanse(buf, (size_t)n);
	return rv;
}

static BIGNUM *bn_of(const struct tok_attrs *s, CK_ATTRIBUTE_TYPE t)
{
	const struct tok_attr *a = tok_attrs_get(s, t);

	if (!a || !a->len)
		return NULL;
	return BN_bin2bn(a->value, (int)a->len, NULL);
}

/* ---- EC ------------------------------------------------------------------- */

/* The uncompressed public point of scalar d (checked 1 <= d < order). */
static CK_RV ec_derive(const struct curve *cv, const uint8_t *priv, size_t priv_len, uint8_t *out,
		       size_t out_cap, size_t *out_len)
{
	EC_GROUP *g = NULL;
	EC_POINT *pt = NULL;
	BIGNUM *d = NULL;
	CK_RV rv = CKR_ATTRIBUTE_VALUE_INVALID;

	if (!priv_len || priv_len > cv->len)
		return CKR_ATTRIBUTE_VALUE_INVALID;
	if (!(g = EC_GROUP_new_by_curve_name_ex(tok_algs.lc, NULL, cv->nid)) || !(pt = EC_POINT_new(g)) ||
	    !(d = BN_secure_new()) || !BN_bin2bn(priv, (int)priv_len, d)) {
		rv = CKR_HOST_MEMORY;
		goto out;
	}
	BN_set_flags(d, BN_FLG_CONSTTIME);
	if (BN_is_zero(d) || BN_cmp(d, EC_GROUP_get0_order(g)) >= 0)
		goto out;
	if (!EC_POINT_mul(g, pt, d, NULL, NULL, NULL) ||
	    !(*out_len = EC_POINT_point2oct(g, pt, POINT_CONVERSION_UNCOMPRESSED, out, out_cap, NULL))) {
		rv = tok_ossl_fail();
		goto out;
	}
	rv = CKR_OK;
out:
	BN_clear_free(d);
	EC_POINT_free(pt);
	EC_GROUP_free(g);
	ERR_clear_error();
	return rv;
}

/* A point on the curve (not at infinity), in uncompressed form into out. */
static CK_RV ec_check_point(const struct curve *cv, const uint8_t *p, size_t len, uint8_t *out,
			    size_t out_cap, size_t *out_len)
{
	EC_GROUP *g = EC_GROUP_new_by_curve_name_ex(tok_algs.lc, NULL, cv->nid);
	EC_POINT *pt = g ? EC_POINT_new(g) : NULL;
	CK_RV rv = CKR_ATTRIBUTE_VALUE_INVALID;

	if (!pt)
		rv = CKR_HOST_MEMORY;
	else if (EC_POINT_oct2point(g, pt, p, len, NULL) && !EC_POINT_is_at_infinity(g, pt) &&
		 EC_POINT_is_on_curve(g, pt, NULL) == 1 &&
		 (*out_len = EC_POINT_point2oct(g, pt, POINT_CONVERSION_UNCOMPRESSED, out, out_cap, NULL)))
		rv = CKR_OK;
	EC_POINT_free(pt);
	EC_GROUP_free(g);
	ERR_clear_error();
	return rv;
}

/* Free a parameter array made by OSSL_PARAM_BLD_to_param (every value in
 * the array's own blocks: the token pushes no _ptr parameter) with every
 * value wiped first. OSSL_PARAM_free wipes only the values OSSL_PARAM_BLD
 * kept in secure memory, which it does for BIGNUMs flagged BN_FLG_SECURE
 * alone: a key's parts made from attribute bytes (BN_bin2bn) would stay
 * behind in freed heap memory. */
static void params_clear_free(OSSL_PARAM *params)
{
	for (OSSL_PARAM *p = params; p && p->key; p++)
		if (p->data && p->data_size)
			OPENSSL_cleanse(p->data, p->data_size);
	OSSL_PARAM_free(params);
}

static CK_RV pkey_fromdata(const char *type, OSSL_PARAM_BLD *b, int selection, EVP_PKEY **ret)
{
	OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(b);
	EVP_PKEY_CTX *ctx = params ? EVP_PKEY_CTX_new_from_name(tok_algs.lc, type, NULL) : NULL;
	EVP_PKEY *pk = NULL;
	CK_RV rv = CKR_KEY_TYPE_INCONSISTENT;

	if (ctx && EVP_PKEY_fromdata_init(ctx) > 0 && EVP_PKEY_fromdata(ctx, &pk, selection, params) > 0) {
		*ret = pk;
		rv = CKR_OK;
	}
	EVP_PKEY_CTX_free(ctx);
	params_clear_free(params);
	ERR_clear_error();
	return rv;
}

static CK_RV ec_pkey(const struct tok_object *key, EVP_PKEY **ret)
{
	const struct tok_attrs *s = &key->attrs;
	bool priv = key->cls == CKO_PRIVATE_KEY;
	const struct curve *cv;
	const struct tok_attr *v = tok_attrs_get(s, CKA_VALUE);
	uint8_t pt[133];
	const uint8_t *p;
	size_t len;
	OSSL_PARAM_BLD *b = NULL;
	BIGNUM *d = NULL;
	CK_RV rv;

	if ((rv = curve_of(tok_attrs_get(s, CKA_EC_PARAMS), CKK_EC, &cv)) != CKR_OK)
		return CKR_KEY_TYPE_INCONSISTENT;
	if (priv) {
		if (!v)
			return CKR_KEY_TYPE_INCONSISTENT;
		if ((rv = ec_derive(cv, v->value, v->len, pt, sizeof(pt), &len)) != CKR_OK)
			return rv == CKR_HOST_MEMORY ? rv : CKR_KEY_TYPE_INCONSISTENT;
		p = pt;
	} else if (!ec_point_of(cv, tok_attrs_get(s, CKA_EC_POINT), &p, &len)) {
		return CKR_KEY_TYPE_INCONSISTENT;
	}
	rv = CKR_HOST_MEMORY;
	if (!(b = OSSL_PARAM_BLD_new()) ||
	    !OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME, cv->group, 0) ||
	    !OSSL_PARAM_BLD_push_octet_string(b, OSSL_PKEY_PARAM_PUB_KEY, p, len))
		goto out;
	if (priv && (!(d = BN_secure_new()) || !BN_bin2bn(v->value, (int)v->len, d) ||
		     !OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_PRIV_KEY, d)))
		goto out;
	rv = pkey_fromdata(TOK_KEYMGMT("EC"), b, priv ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, ret);
out:
	OSSL_PARAM_BLD_free(b);
	BN_clear_free(d);
	return rv;
}

/* ---- RSA ------------------------------------------------------------------ */

static const CK_ATTRIBUTE_TYPE rsa_attr[8] = {
	CKA_MODULUS, CKA_PUBLIC_EXPONENT, CKA_PRIVATE_EXPONENT, CKA_PRIME_1, CKA_PRIME_2,
	CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT,
};
static const char *const rsa_param[8] = {
	OSSL_PKEY_PARAM_RSA_N, OSSL_PKEY_PARAM_RSA_E, OSSL_PKEY_PARAM_RSA_D,
	OSSL_PKEY_PARAM_RSA_FACTOR1, OSSL_PKEY_PARAM_RSA_FACTOR2, OSSL_PKEY_PARAM_RSA_EXPONENT1,
	OSSL_PKEY_PARAM_RSA_EXPONENT2, OSSL_PKEY_PARAM_RSA_COEFFICIENT1,
};
enum { RN, RE, RD, RP, RQ, RDP, RDQ, RQI };

struct rsa_parts {
	BIGNUM *bn[8];
};

static void rsa_parts_free(struct rsa_parts *r)
{
	for (int i = 0; i < 8; i++)
		BN_clear_free(r->bn[i]);
}

static void rsa_parts_read(const struct tok_attrs *s, bool priv, struct rsa_parts *r)
{
	memset(r, 0, sizeof(*r));
	for (int i = 0; i < (priv ? 8 : 2); i++) {
		r->bn[i] = bn_of(s, rsa_attr[i]);
		if (r->bn[i] && i >= RD)
			BN_set_flags(r->bn[i], BN_FLG_CONSTTIME);
	}
}

/* Fill the CRT parts from d, p, q when they are missing. */
static bool rsa_complete_crt(struct rsa_parts *r, BN_CTX *bc)
{
	BIGNUM *t;
	bool ok;

	if (!r->bn[RD] || !r->bn[RP] || !r->bn[RQ] || (r->bn[RDP] && r->bn[RDQ] && r->bn[RQI]))
		return true;
	if (!(t = BN_new()))
		return false;
	for (int i = RDP; i <= RQI; i++) {
		BN_clear_free(r->bn[i]);
		if (!(r->bn[i] = BN_secure_new())) {
			BN_free(t);
			return false;
		}
		BN_set_flags(r->bn[i], BN_FLG_CONSTTIME);
	}
	ok = BN_sub(t, r->bn[RP], BN_value_one()) && BN_mod(r->bn[RDP], r->bn[RD], t, bc) &&
	     BN_sub(t, r->bn[RQ], BN_value_one()) && BN_mod(r->bn[RDQ], r->bn[RD], t, bc) &&
	     BN_mod_inverse(r->bn[RQI], r->bn[RQ], r->bn[RP], bc) != NULL;
	BN_free(t);
	return ok;
}

static CK_RV rsa_pkey_of(struct rsa_parts *r, bool priv, EVP_PKEY **ret)
{
	OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
	BN_CTX *bc = BN_CTX_new();
	CK_RV rv = CKR_HOST_MEMORY;
	int n = 2;

	if (!b || !bc)
		goto out;
	if (!r->bn[RN] || !r->bn[RE] || (priv && !r->bn[RD])) {
		rv = CKR_KEY_TYPE_INCONSISTENT;
		goto out;
	}
	if (priv) {
		if (!rsa_complete_crt(r, bc)) {
			rv = tok_ossl_fail();
			goto out;
		}
		n = r->bn[RP] && r->bn[RQ] ? 8 : 3;
	}
	for (int i = 0; i < n; i++)
		if (!OSSL_PARAM_BLD_push_BN(b, rsa_param[i], r->bn[i]))
			goto out;
	rv = pkey_fromdata(TOK_KEYMGMT("RSA"), b, priv ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, ret);
out:
	BN_CTX_free(bc);
	OSSL_PARAM_BLD_free(b);
	return rv;
}

static CK_RV rsa_pkey(const struct tok_object *key, EVP_PKEY **ret)
{
	struct rsa_parts r;
	CK_RV rv;

	rsa_parts_read(&key->attrs, key->cls == CKO_PRIVATE_KEY, &r);
	rv = rsa_pkey_of(&r, key->cls == CKO_PRIVATE_KEY, ret);
	rsa_parts_free(&r);
	return rv;
}

/* ---- Ed25519 -------------------------------------------------------------- */

static CK_RV ed_pkey(const struct tok_object *key, EVP_PKEY **ret)
{
	const struct tok_attr *v = tok_attrs_get(&key->attrs, CKA_VALUE);
	const uint8_t *p;
	size_t len;
	EVP_PKEY *pk;

	if (key->cls == CKO_PRIVATE_KEY) {
		if (!v || v->len != 32)
			return CKR_KEY_TYPE_INCONSISTENT;
		pk = EVP_PKEY_new_raw_private_key_ex(tok_algs.lc, TOK_KEYMGMT("ED25519"), NULL, v->value, 32);
	} else {
		if (!ec_point_of(&curve_ed25519, tok_attrs_get(&key->attrs, CKA_EC_POINT), &p, &len))
			return CKR_KEY_TYPE_INCONSISTENT;
		pk = EVP_PKEY_new_raw_public_key_ex(tok_algs.lc, TOK_KEYMGMT("ED25519"), NULL, p, len);
	}
	if (!pk)
		return tok_ossl_fail();
	*ret = pk;
	return CKR_OK;
}

/* ---- the key cache -------------------------------------------------------- */

void tok_key_cache_free(void *cache)
{
	struct tok_keycache *c = cache;

	if (!c)
		return;
	/* At process exit the module's destructor may run after OpenSSL's own
	 * atexit cleanup: its objects (and an ENGINE a key references) are gone
	 * then, so they are left alone. */
	if (!tok_ossl_alive()) {
		free(c);
		return;
	}
	EVP_PKEY_free(c->pkey);
	for (int i = 0; i < TOK_NUSES; i++)
		EVP_PKEY_CTX_free(c->tmpl[i]);
	for (int i = 0; i < TOK_NMDS; i++)
		EVP_MAC_CTX_free(c->mac[i]);
	free(c);
}

CK_RV tok_key_cache_get(struct tok_object *key, struct tok_keycache **ret)
{
	struct tok_keycache *c = key->cache;
	CK_RV rv = CKR_OK;

	if (c) {
		*ret = c;
		return CKR_OK;
	}
	if (!(c = calloc(1, sizeof(*c))))
		return CKR_HOST_MEMORY;
	if (key->cls == CKO_PRIVATE_KEY || key->cls == CKO_PUBLIC_KEY) {
		switch (key->key_type) {
		case CKK_EC: rv = ec_pkey(key, &c->pkey); break;
		case CKK_RSA: rv = rsa_pkey(key, &c->pkey); break;
		case CKK_EC_EDWARDS: rv = ed_pkey(key, &c->pkey); break;
		default: rv = CKR_KEY_TYPE_INCONSISTENT; break;
		}
	}
	if (rv != CKR_OK) {
		tok_key_cache_free(c);
		return rv;
	}
	key->cache = c;
	*ret = c;
	return CKR_OK;
}

CK_RV tok_key_pctx(struct tok_object *key, enum tok_pkey_use use, EVP_PKEY_CTX **ret)
{
	struct tok_keycache *c;
	EVP_PKEY_CTX *t;
	CK_RV rv;
	int ok;

	if ((rv = tok_key_cache_get(key, &c)) != CKR_OK)
		return rv;
	if (!c->pkey)
		return CKR_KEY_TYPE_INCONSISTENT;
	if (!c->tmpl[use]) {
		if (!(t = EVP_PKEY_CTX_new_from_pkey(tok_algs.lc, c->pkey, NULL)))
			return tok_ossl_fail();
		switch (use) {
		case TOK_USE_SIGN: ok = EVP_PKEY_sign_init(t); break;
		case TOK_USE_VERIFY: ok = EVP_PKEY_verify_init(t); break;
		case TOK_USE_ENCRYPT: ok = EVP_PKEY_encrypt_init(t); break;
		default: ok = EVP_PKEY_decrypt_init(t); break;
		}
		if (ok <= 0) {
			EVP_PKEY_CTX_free(t);
			return tok_ossl_fail();
		}
		c->tmpl[use] = t;
	}
	if (!(*ret = EVP_PKEY_CTX_dup(c->tmpl[use])))
		return tok_ossl_fail();
	return CKR_OK;
}

CK_RV tok_key_mac(struct tok_object *key, enum tok_md md, EVP_MAC_CTX **ret)
{
	const struct tok_attr *v = tok_attrs_get(&key->attrs, CKA_VALUE);
	struct tok_keycache *c;
	CK_RV rv;

	if (!v || !v->len)
		return CKR_KEY_SIZE_RANGE;
	if ((rv = tok_key_cache_get(key, &c)) != CKR_OK)
		return rv;
	if (!c->mac[md]) {
		OSSL_PARAM params[] = {
			OSSL_PARAM_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)tok_md_name(md), 0),
			OSSL_PARAM_END,
		};
		EVP_MAC_CTX *m = EVP_MAC_CTX_new(tok_algs.hmac);

		if (!m)
			return CKR_HOST_MEMORY;
		if (!EVP_MAC_init(m, v->value, v->len, params)) {
			EVP_MAC_CTX_free(m);
			return tok_ossl_fail();
		}
		c->mac[md] = m;
	}
	if (!(*ret = EVP_MAC_CTX_dup(c->mac[md])))
		return tok_ossl_fail();
	return CKR_OK;
}

/* ---- tok_key_check -------------------------------------------------------- */

static CK_RV check_secret(CK_KEY_TYPE kt, struct tok_attrs *s)
{
	const struct tok_attr *v = tok_attrs_get(s, CKA_VALUE);
	CK_ULONG vl;

	if (!v)
		return CKR_TEMPLATE_INCOMPLETE;
	switch (kt) {
	case CKK_AES:
		if (v->len != 16 && v->len != 24 && v->len != 32)
			return CKR_ATTRIBUTE_VALUE_INVALID;
		break;
	case CKK_GENERIC_SECRET:
	case CKK_SHA256_HMAC:
	case CKK_SHA384_HMAC:
	case CKK_SHA512_HMAC:
		if (!v->len)
			return CKR_ATTRIBUTE_VALUE_INVALID;
		if (v->len > SECRET_MAX)
			return CKR_KEY_SIZE_RANGE;
		break;
	default:
		return CKR_ATTRIBUTE_VALUE_INVALID;
	}
	if (tok_attrs_ulong(s, CKA_VALUE_LEN, &vl) && vl != v->len)
		return CKR_TEMPLATE_INCONSISTENT;
	return tok_attrs_set_ulong(s, CKA_VALUE_LEN, v->len);
}

static CK_RV check_ec(CK_OBJECT_CLASS cls, struct tok_attrs *s)
{
	const struct curve *cv;
	const struct tok_attr *v, *pa = tok_attrs_get(s, CKA_EC_POINT);
	uint8_t pt[133], given[133], der[140];
	const uint8_t *p;
	size_t len, glen;
	CK_RV rv;

	if ((rv = curve_of(tok_attrs_get(s, CKA_EC_PARAMS), CKK_EC, &cv)) != CKR_OK)
		return rv;
	if (cls == CKO_PUBLIC_KEY) {
		if (!pa)
			return CKR_TEMPLATE_INCOMPLETE;
		if (!ec_point_of(cv, pa, &p, &len))
			return CKR_ATTRIBUTE_VALUE_INVALID;
		return ec_check_point(cv, p, len, pt, sizeof(pt), &len);
	}
	if (!(v = tok_attrs_get(s, CKA_VALUE)))
		return CKR_TEMPLATE_INCOMPLETE;
	if ((rv = ec_derive(cv, v->value, v->len, pt, sizeof(pt), &len)) != CKR_OK)
		return rv;
	if (pa) {
		if (!ec_point_of(cv, pa, &p, &glen) ||
		    ec_check_point(cv, p, glen, given, sizeof(given), &glen) != CKR_OK ||
		    glen != len || memcmp(given, pt, len) != 0)
			return CKR_ATTRIBUTE_VALUE_INVALID;
		return CKR_OK;
	}
	return tok_attrs_set(s, CKA_EC_POINT, der, der_octets(der, pt, len));
}

static CK_RV check_ed25519(CK_OBJECT_CLASS cls, struct tok_attrs *s)
{
	const struct curve *cv;
	const struct tok_attr *v, *pa = tok_attrs_get(s, CKA_EC_POINT);
	const uint8_t *p;
	uint8_t pub[32], der[40];
	size_t len = sizeof(pub);
	EVP_PKEY *pk;
	CK_RV rv;

	if ((rv = curve_of(tok_attrs_get(s, CKA_EC_PARAMS), CKK_EC_EDWARDS, &cv)) != CKR_OK)
		return rv;
	if (cls == CKO_PUBLIC_KEY) {
		if (!pa)
			return CKR_TEMPLATE_INCOMPLETE;
		return ec_point_of(cv, pa, &p, &len) ? CKR_OK : CKR_ATTRIBUTE_VALUE_INVALID;
	}
	if (!(v = tok_attrs_get(s, CKA_VALUE)))
		return CKR_TEMPLATE_INCOMPLETE;
	if (v->len != 32)
		return CKR_ATTRIBUTE_VALUE_INVALID;
	if (!(pk = EVP_PKEY_new_raw_private_key_ex(tok_algs.lc, TOK_KEYMGMT("ED25519"), NULL, v->value, 32)))
		return tok_ossl_fail();
	if (!EVP_PKEY_get_raw_public_key(pk, pub, &len) || len != 32) {
		EVP_PKEY_free(pk);
		return tok_ossl_fail();
	}
	EVP_PKEY_free(pk);
	if (pa) {
		size_t gl;

		if (!ec_point_of(cv, pa, &p, &gl) || gl != 32 || memcmp(p, pub, 32) != 0)
			return CKR_ATTRIBUTE_VALUE_INVALID;
		return CKR_OK;
	}
	return tok_attrs_set(s, CKA_EC_POINT, der, der_octets(der, pub, 32));
}

static CK_RV check_rsa(CK_OBJECT_CLASS cls, struct tok_attrs *s)
{
	bool priv = cls == CKO_PRIVATE_KEY;
	struct rsa_parts r;
	BN_CTX *bc = BN_CTX_new();
	BIGNUM *t = BN_new(), *u = BN_new(), *m = BN_new();
	CK_RV rv = CKR_HOST_MEMORY;
	int bits;

	rsa_parts_read(s, priv, &r);
	if (!bc || !t || !u || !m)
		goto out;
	rv = CKR_TEMPLATE_INCOMPLETE;
	if (priv) {
		if (!r.bn[RD])
			goto out;
		if ((!r.bn[RP]) != (!r.bn[RQ])) /* one prime alone is no use */
			goto out;
		/* derivable public parts: n = p q, e = d^-1 mod lcm(p-1, q-1) */
		if (!r.bn[RN] && r.bn[RP]) {
			if (!(r.bn[RN] = BN_new()) || !BN_mul(r.bn[RN], r.bn[RP], r.bn[RQ], bc))
				goto fail;
			if ((rv = set_bn(s, CKA_MODULUS, r.bn[RN])) != CKR_OK)
				goto out;
		}
		if (!r.bn[RE] && r.bn[RP]) {
			BIGNUM *g = BN_new();
			bool ok = g && BN_sub(t, r.bn[RP], BN_value_one()) &&
				  BN_sub(u, r.bn[RQ], BN_value_one()) && BN_gcd(g, t, u, bc) &&
				  BN_mul(m, t, u, bc) && BN_div(m, NULL, m, g, bc);

			BN_free(g);
			if (!ok || !(r.bn[RE] = BN_mod_inverse(NULL, r.bn[RD], m, bc))) {
				rv = CKR_ATTRIBUTE_VALUE_INVALID;
				goto out;
			}
			if ((rv = set_bn(s, CKA_PUBLIC_EXPONENT, r.bn[RE])) != CKR_OK)
				goto out;
		}
		rv = CKR_TEMPLATE_INCOMPLETE;
	}
	if (!r.bn[RN] || !r.bn[RE])
		goto out;
	bits = BN_num_bits(r.bn[RN]);
	rv = CKR_KEY_SIZE_RANGE;
	/* rsa_min_bits binds private keys; smaller public keys verify */
	if (bits < (priv ? (int)tok_algs.rsa_min_bits : TOK_RSA_VERIFY_MIN) || bits > RSA_IMPORT_MAX)
		goto out;
	rv = CKR_ATTRIBUTE_VALUE_INVALID;
	if (!BN_is_odd(r.bn[RN]) || !BN_is_odd(r.bn[RE]) || BN_is_one(r.bn[RE]) ||
	    BN_cmp(r.bn[RE], r.bn[RN]) >= 0)
		goto out;
	if (priv) {
		if (BN_is_zero(r.bn[RD]) || BN_cmp(r.bn[RD], r.bn[RN]) >= 0)
			goto out;
		if (r.bn[RP]) {
			if (!BN_mul(t, r.bn[RP], r.bn[RQ], bc))
				goto fail;
			if (BN_cmp(t, r.bn[RN]) != 0)
				goto out;
			if (r.bn[RDP] || r.bn[RDQ] || r.bn[RQI]) {
				struct rsa_parts c = { { NULL, NULL, r.bn[RD], r.bn[RP], r.bn[RQ] } };
				bool same;

				/* given CRT parts must be the ones d, p, q make (missing
				 * ones are computed when the key is prepared) */
				if (!rsa_complete_crt(&c, bc)) {
					c.bn[RD] = c.bn[RP] = c.bn[RQ] = NULL;
					rsa_parts_free(&c);
					goto fail;
				}
				same = true;
				for (int i = RDP; i <= RQI; i++)
					same &= !r.bn[i] || !BN_cmp(c.bn[i], r.bn[i]);
				c.bn[RD] = c.bn[RP] = c.bn[RQ] = NULL;
				rsa_parts_free(&c);
				if (!same)
					goto out;
			}
		}
		/* e and d are inverse: (2^e)^d = 2 mod n */
		if (!BN_set_word(m, 2) || !BN_mod_exp(t, m, r.bn[RE], r.bn[RN], bc) ||
		    !BN_mod_exp_mont_consttime(u, t, r.bn[RD], r.bn[RN], bc, NULL))
			goto fail;
		if (BN_cmp(u, m) != 0)
			goto out;
	} else {
		/* CKA_MODULUS_BITS is derived (PKCS#11: not given to C_CreateObject) */
		CK_ULONG mb;

		if (tok_attrs_ulong(s, CKA_MODULUS_BITS, &mb) && mb != (CK_ULONG)bits) {
			rv = CKR_TEMPLATE_INCONSISTENT;
			goto out;
		}
		if ((rv = tok_attrs_set_ulong(s, CKA_MODULUS_BITS, (CK_ULONG)bits)) != CKR_OK)
			goto out;
	}
	rv = CKR_OK;
	goto out;
fail:
	rv = tok_ossl_fail();
out:
	rsa_parts_free(&r);
	BN_clear_free(t);
	BN_clear_free(u);
	BN_clear_free(m);
	BN_CTX_free(bc);
	ERR_clear_error();
	return rv;
}

CK_RV tok_key_check(CK_OBJECT_CLASS cls, CK_KEY_TYPE kt, struct tok_attrs *attrs)
{
	if (!attrs)
		return CKR_ARGUMENTS_BAD;
	if (cls == CKO_SECRET_KEY)
		return check_secret(kt, attrs);
	if (cls != CKO_PUBLIC_KEY && cls != CKO_PRIVATE_KEY)
		return CKR_ATTRIBUTE_VALUE_INVALID;
	switch (kt) {
	case CKK_EC: return check_ec(cls, attrs);
	case CKK_EC_EDWARDS: return check_ed25519(cls, attrs);
	case CKK_RSA: return check_rsa(cls, attrs);
	default: return CKR_ATTRIBUTE_VALUE_INVALID;
	}
}

/* ---- attributes of an EVP_PKEY (key generation, unwrapping) --------------- */

static CK_RV set_common(struct tok_attrs *s, CK_KEY_TYPE kt, CK_MECHANISM_TYPE gen)
{
	CK_RV rv = tok_attrs_set_ulong(s, CKA_KEY_TYPE, kt);

	if (rv == CKR_OK && gen != CK_UNAVAILABLE_INFORMATION) {
		if ((rv = tok_attrs_set_bool(s, CKA_LOCAL, true)) == CKR_OK)
			rv = tok_attrs_set_ulong(s, CKA_KEY_GEN_MECHANISM, gen);
	}
	return rv;
}

/* An EC key's public point (the uncompressed octets) and its private
 * scalar, coordinate-length big-endian; sk holds TOK_EC_SK_MAX bytes. */
static bool ec_export(EVP_PKEY *pk, const struct curve *cv, uint8_t pt[TOK_EC_PT_MAX], size_t *pt_len,
		      uint8_t *sk)
{
	BIGNUM *bn = NULL;
	bool ok = EVP_PKEY_get_octet_string_param(pk, OSSL_PKEY_PARAM_PUB_KEY, pt, TOK_EC_PT_MAX, pt_len) &&
		  EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_PRIV_KEY, &bn) &&
		  BN_bn2binpad(bn, sk, (int)cv->len) >= 0;

	BN_clear_free(bn);
	return ok;
}

/* The attributes an EC or EdDSA key pair is made of: the curve, the point
 * (DER OCTET STRING) in both, the private value in priv (pub may be NULL). */
static CK_RV ec_attrs(const uint8_t *pv, size_t pv_len, const uint8_t *pt, size_t pt_len, const uint8_t *sk,
		      size_t sk_len, struct tok_attrs *pub, struct tok_attrs *priv)
{
	uint8_t der[TOK_EC_PT_MAX + 4];
	size_t dlen = der_octets(der, pt, pt_len);
	CK_RV rv;

	if (pub && ((rv = tok_attrs_set(pub, CKA_EC_PARAMS, pv, pv_len)) != CKR_OK ||
		    (rv = tok_attrs_set(pub, CKA_EC_POINT, der, dlen)) != CKR_OK))
		return rv;
	if ((rv = tok_attrs_set(priv, CKA_EC_PARAMS, pv, pv_len)) == CKR_OK &&
	    (rv = tok_attrs_set(priv, CKA_EC_POINT, der, dlen)) == CKR_OK)
		rv = tok_attrs_set(priv, CKA_VALUE, sk, sk_len);
	return rv;
}

/* Set t from p, an OSSL_PARAM_UNSIGNED_INTEGER of data_size bytes (the
 * host's byte order, OSSL_PARAM(3)), as the big-endian bytes without leading
 * zeros PKCS#11 wants; written once, into the buffer the set keeps. */
static CK_RV set_uint_param(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, const OSSL_PARAM *p)
{
	const uint8_t *d = p->data;
	size_t n = p->data_size;
	uint8_t *v = NULL;

	if (p->data_type != OSSL_PARAM_UNSIGNED_INTEGER)
		return CKR_GENERAL_ERROR;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	while (n && !d[n - 1])
		n--;
	if (n && !(v = malloc(n)))
		return CKR_HOST_MEMORY;
	for (size_t i = 0; i < n; i++)
		v[i] = d[n - 1 - i];
#else
	while (n && !d[0]) {
		d++;
		n--;
	}
	if (n && !(v = malloc(n)))
		return CKR_HOST_MEMORY;
	memcpy(v, d, n);
#endif
	return tok_attrs_take(s, t, n ? v : NULL, (CK_ULONG)n);
}

/* Fill priv (and pub when not NULL) from pk of type kt on curve cv (RSA, EC,
 * Ed25519); params is the CKA_EC_PARAMS to write (NULL: the OID). */
static CK_RV attrs_of_pkey(EVP_PKEY *pk, CK_KEY_TYPE kt, const struct curve *cv, const struct tok_attr *params,
			   struct tok_attrs *pub, struct tok_attrs *priv)
{
	const uint8_t *pv = params ? params->value : cv ? cv->oid : NULL;
	size_t pv_len = params ? params->len : cv ? cv->oid_len : 0;
	uint8_t buf[TOK_EC_PT_MAX], sk[TOK_EC_SK_MAX];
	size_t len;
	CK_RV rv = CKR_OK;

	if (kt == CKK_RSA) {
		/* Every part in one EVP_PKEY_get_params, written by the provider
		 * into buffers of our own. Each EVP_PKEY_get_bn_param exports
		 * all eight again (38 µs warm);
		 * EVP_PKEY_export builds and copies a parameter list first
		 * (11.3 µs right after a prime search, against 6.2 for this:
		 * docs/benchmarks.md, "RSA-2048 key generation: the parts in
		 * place, ..."). */
		int bits = EVP_PKEY_get_bits(pk);
		size_t nlen = bits > 0 ? ((size_t)bits + 7) / 8 : 0, off = 0;
		/* The export pads every part to its buffer a byte at a time
		 * (constant time): the parts of p or q get buffers their size,
		 * e 8 bytes. A key they do not fit (an exponent of more than 64
		 * bits) is read again at the modulus's size. */
		size_t half = ((size_t)(bits + 1) / 2 + 7) / 8;
		const size_t tight[8] = { nlen, 8, nlen, half, half, half, half, half };
		OSSL_PARAM ps[9];
		uint8_t *b;
		int ok;

		if (!nlen || nlen > RSA_IMPORT_MAX / 8)
			return CKR_GENERAL_ERROR;
		if (!(b = malloc(8 * nlen)))
			return CKR_HOST_MEMORY;
		for (int i = 0; i < 8; off += tight[i], i++)
			ps[i] = OSSL_PARAM_construct_BN(rsa_param[i], b + off, tight[i]);
		ps[8] = OSSL_PARAM_construct_end();
		ERR_set_mark();
		ok = EVP_PKEY_get_params(pk, ps);
		if (ok != 1) {
			ERR_pop_to_mark();
			for (int i = 0; i < 8; i++)
				ps[i] = OSSL_PARAM_construct_BN(rsa_param[i], b + (size_t)i * nlen, nlen);
			ok = EVP_PKEY_get_params(pk, ps);
		} else {
			ERR_clear_last_mark();
		}
		if (ok != 1)
			rv = tok_ossl_fail();
		for (int i = 0; i < 8 && rv == CKR_OK; i++) {
			/* what it wrote (3.0 pads the buffer and says so) */
			OSSL_PARAM v = ps[i];

			v.data_size = ps[i].return_size;
			if (!OSSL_PARAM_modified(&ps[i]) || v.data_size > ps[i].data_size) /* a public key */
				rv = CKR_GENERAL_ERROR;
			else if (i < 2 && pub)
				rv = set_uint_param(pub, rsa_attr[i], &v);
			if (rv == CKR_OK)
				rv = set_uint_param(priv, rsa_attr[i], &v);
		}
		OPENSSL_cleanse(b, 8 * nlen);
		free(b);
		if (rv == CKR_OK && pub)
			rv = tok_attrs_set_ulong(pub, CKA_MODULUS_BITS, (CK_ULONG)bits);
		return rv;
	}
	if (kt == CKK_EC) {
		if (!ec_export(pk, cv, buf, &len, sk))
			rv = tok_ossl_fail();
	} else {
		size_t sl = 32;

		len = 32;
		if (!EVP_PKEY_get_raw_public_key(pk, buf, &len) || !EVP_PKEY_get_raw_private_key(pk, sk, &sl) ||
		    len != 32 || sl != 32)
			rv = tok_ossl_fail();
	}
	if (rv == CKR_OK)
		rv = ec_attrs(pv, pv_len, buf, len, sk, cv->len, pub, priv);
	OPENSSL_cleanse(sk, sizeof(sk));
	return rv;
}

bool tok_ec_make(int curve, struct tok_ec_pair *out)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(tok_algs.lc, tok_algs.ec_params[curve], NULL);
	EVP_PKEY *pk = NULL;
	bool ok = ctx && EVP_PKEY_keygen_init(ctx) > 0 && EVP_PKEY_generate(ctx, &pk) > 0 &&
		  ec_export(pk, curves[curve], out->pt, &out->pt_len, out->sk);

	EVP_PKEY_free(pk);
	EVP_PKEY_CTX_free(ctx);
	return ok;
}

/* ---- key generation ------------------------------------------------------- */

CK_RV tok_generate_key(const CK_MECHANISM *mech, const struct tok_attrs *tmpl, struct tok_attrs *out)
{
	uint8_t key[SECRET_MAX];
	CK_KEY_TYPE kt;
	CK_ULONG len;
	CK_RV rv;

	if (!mech || !tmpl || !out)
		return CKR_ARGUMENTS_BAD;
	if (mech->mechanism != CKM_AES_KEY_GEN && mech->mechanism != CKM_GENERIC_SECRET_KEY_GEN)
		return CKR_MECHANISM_INVALID;
	if (!tok_attrs_get(tmpl, CKA_VALUE_LEN))
		return CKR_TEMPLATE_INCOMPLETE;
	if (!tok_attrs_ulong(tmpl, CKA_VALUE_LEN, &len))
		return CKR_ATTRIBUTE_VALUE_INVALID;
	if (mech->mechanism == CKM_AES_KEY_GEN) {
		kt = CKK_AES;
		if (len != 16 && len != 24 && len != 32)
			return CKR_KEY_SIZE_RANGE;
	} else {
		kt = CKK_GENERIC_SECRET;
		if (len < 1 || len > SECRET_MAX)
			return CKR_KEY_SIZE_RANGE;
	}
	if (!tok_ahead_secret(key, len) &&
	    (rv = drbg_bytes(RAND_get0_private(tok_algs.lc), key, len)) != CKR_OK)
		return rv;
	rv = tok_attrs_set(out, CKA_VALUE, key, len);
	OPENSSL_cleanse(key, len);
	if (rv == CKR_OK)
		rv = tok_attrs_set_ulong(out, CKA_VALUE_LEN, len);
	if (rv == CKR_OK)
		rv = set_common(out, kt, mech->mechanism);
	return rv;
}

/* An attribute of the public template, else of the private one. */
static const struct tok_attr *either(const struct tok_attrs *a, const struct tok_attrs *b, CK_ATTRIBUTE_TYPE t)
{
	const struct tok_attr *r = tok_attrs_get(a, t);

	return r ? r : tok_attrs_get(b, t);
}

static CK_RV keygen(const char *type, EVP_PKEY_CTX **ret_ctx)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(tok_algs.lc, type, NULL);

	if (!ctx || EVP_PKEY_keygen_init(ctx) <= 0) {
		EVP_PKEY_CTX_free(ctx);
		return tok_ossl_fail();
	}
	*ret_ctx = ctx;
	return CKR_OK;
}

/*
 * One RSA key generation context kept from call to call, as a program
 * calling OpenSSL itself keeps its own: a new one (the keymgmt's fetch by
 * name and its generation context) cost 20-28 us after the previous call's
 * prime search had left the caches cold, all of it on the caller's time
 * outside the search (docs/benchmarks.md, "RSA key generation: one context
 * kept"). It holds no secret: the modulus size and the public exponent,
 * set again when a call asks for others. One caller at a time uses it (a
 * trylock: a concurrent caller makes its own as before); a context whose
 * generation failed is freed, not kept; a child of fork() drops one its
 * parent had in use (tok_rsa_gen_atfork_child).
 */
static struct {
	pthread_mutex_t mu;
	EVP_PKEY_CTX *ctx;
	int bits;  /* what ctx was last set to (0: nothing yet), */
	BIGNUM *e; /* so that an unchanged pair is not set again */
} rsa_gen = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, NULL };

/* The kept context, locked, into *ret_ctx (true); or a new one (false). */
static CK_RV rsa_gen_take(EVP_PKEY_CTX **ret_ctx, bool *kept)
{
	*kept = false;
	if (pthread_mutex_trylock(&rsa_gen.mu) == 0) {
		if (rsa_gen.ctx || keygen(TOK_KEYMGMT("RSA"), &rsa_gen.ctx) == CKR_OK) {
			*ret_ctx = rsa_gen.ctx;
			*kept = true;
			return CKR_OK;
		}
		pthread_mutex_unlock(&rsa_gen.mu);
	}
	return keygen(TOK_KEYMGMT("RSA"), ret_ctx);
}

/* The modulus size and public exponent on ctx. Setting them costs ~10 us
 * cold (parameters through the provider, a copy of e): the kept context is
 * set only when they differ from its last ones. */
static bool rsa_gen_params(EVP_PKEY_CTX *ctx, bool kept, int bits, BIGNUM *e)
{
	if (kept && rsa_gen.bits == bits && rsa_gen.e && BN_cmp(rsa_gen.e, e) == 0)
		return true;
	if (kept)
		rsa_gen.bits = 0; /* unknown until both are set */
	if (EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, bits) <= 0 || EVP_PKEY_CTX_set1_rsa_keygen_pubexp(ctx, e) <= 0)
		return false;
	if (kept) {
		BN_free(rsa_gen.e);
		rsa_gen.e = BN_dup(e);
		rsa_gen.bits = rsa_gen.e ? bits : 0;
	}
	return true;
}

static void rsa_gen_drop(void)
{
	EVP_PKEY_CTX_free(rsa_gen.ctx);
	BN_free(rsa_gen.e);
	rsa_gen.ctx = NULL;
	rsa_gen.e = NULL;
	rsa_gen.bits = 0;
}

/* A generation context done with: rsa_gen's unlocked (and dropped when its
 * generation failed), any other freed. */
static void gen_ctx_release(EVP_PKEY_CTX *ctx, bool kept, bool ok)
{
	if (!kept) {
		EVP_PKEY_CTX_free(ctx);
		return;
	}
	if (!ok)
		rsa_gen_drop();
	pthread_mutex_unlock(&rsa_gen.mu);
}

/* In a child of fork(): a context the parent had in use at the fork (another
 * of its threads inside a generation) is in no known state and its lock is
 * held by a thread the child does not have: abandoned, not freed, and the
 * lock made anew, so that the child's calls and C_Finalize never wait on it. */
void tok_rsa_gen_atfork_child(void)
{
	if (pthread_mutex_trylock(&rsa_gen.mu) == 0) {
		pthread_mutex_unlock(&rsa_gen.mu);
		return;
	}
	rsa_gen = (__typeof__(rsa_gen)){ .mu = PTHREAD_MUTEX_INITIALIZER };
}

void tok_rsa_gen_fini(void)
{
	pthread_mutex_lock(&rsa_gen.mu);
	rsa_gen_drop();
	pthread_mutex_unlock(&rsa_gen.mu);
}

CK_RV tok_generate_key_pair(const CK_MECHANISM *mech, const struct tok_attrs *pub_tmpl,
			    const struct tok_attrs *priv_tmpl, struct tok_attrs *pub_out,
			    struct tok_attrs *priv_out)
{
	return tok_generate_key_pair_cached(mech, pub_tmpl, priv_tmpl, pub_out, priv_out, NULL);
}

CK_RV tok_key_pair_type(CK_MECHANISM_TYPE m, CK_KEY_TYPE *ret_kt)
{
	switch (m) {
	case CKM_EC_KEY_PAIR_GEN:
		*ret_kt = CKK_EC;
		return CKR_OK;
	case CKM_EC_EDWARDS_KEY_PAIR_GEN:
		*ret_kt = CKK_EC_EDWARDS;
		return CKR_OK;
	case CKM_RSA_PKCS_KEY_PAIR_GEN:
		*ret_kt = CKK_RSA;
		return CKR_OK;
	default:
		return CKR_MECHANISM_INVALID;
	}
}

CK_RV tok_generate_key_pair_cached(const CK_MECHANISM *mech, const struct tok_attrs *pub_tmpl,
				   const struct tok_attrs *priv_tmpl, struct tok_attrs *pub_out,
				   struct tok_attrs *priv_out, void **ret_cache)
{
	const struct curve *cv = NULL;
	const struct tok_attr *params = NULL;
	EVP_PKEY_CTX *ctx = NULL;
	EVP_PKEY *pk = NULL;
	CK_KEY_TYPE kt;
	CK_RV rv;
	bool kept = false; /* ctx is rsa_gen's */

	if (!mech || !pub_tmpl || !priv_tmpl || !pub_out || !priv_out)
		return CKR_ARGUMENTS_BAD;
	if ((rv = tok_key_pair_type(mech->mechanism, &kt)) != CKR_OK)
		return rv;
	switch (mech->mechanism) {
	case CKM_EC_KEY_PAIR_GEN:
	case CKM_EC_EDWARDS_KEY_PAIR_GEN:
		params = either(pub_tmpl, priv_tmpl, CKA_EC_PARAMS);
		if ((rv = curve_of(params, kt, &cv)) != CKR_OK)
			return rv;
		if (kt == CKK_EC) { /* made ahead, else from the curve's parameters now */
			struct tok_ec_pair kp;

			if (!tok_ahead_take(cv->idx, &kp) && !tok_ec_make(cv->idx, &kp))
				rv = tok_ossl_fail();
			else
				rv = ec_attrs(params ? params->value : cv->oid, params ? params->len : cv->oid_len,
					      kp.pt, kp.pt_len, kp.sk, cv->len, pub_out, priv_out);
			OPENSSL_cleanse(&kp, sizeof(kp));
			if (rv != CKR_OK)
				return rv;
			goto common;
		} else if ((rv = keygen(TOK_KEYMGMT("ED25519"), &ctx)) != CKR_OK) {
			return rv;
		}
		break;
	case CKM_RSA_PKCS_KEY_PAIR_GEN: {
		const struct tok_attr *ea = either(pub_tmpl, priv_tmpl, CKA_PUBLIC_EXPONENT);
		BIGNUM *e;
		CK_ULONG bits;
		int ok;

		if (!either(pub_tmpl, priv_tmpl, CKA_MODULUS_BITS))
			return CKR_TEMPLATE_INCOMPLETE;
		if (!tok_attrs_ulong(pub_tmpl, CKA_MODULUS_BITS, &bits) &&
		    !tok_attrs_ulong(priv_tmpl, CKA_MODULUS_BITS, &bits))
			return CKR_ATTRIBUTE_VALUE_INVALID;
		if (bits < tok_algs.rsa_min_bits || bits > RSA_GEN_MAX)
			return CKR_KEY_SIZE_RANGE;
		if (ea) {
			if (!ea->len || ea->len > 32 || !(e = BN_bin2bn(ea->value, (int)ea->len, NULL)))
				return CKR_ATTRIBUTE_VALUE_INVALID;
		} else if (!(e = BN_new()) || !BN_set_word(e, RSA_F4)) {
			BN_free(e);
			return CKR_HOST_MEMORY;
		}
		if (!BN_is_odd(e) || BN_is_one(e)) {
			BN_free(e);
			return CKR_ATTRIBUTE_VALUE_INVALID;
		}
		if ((rv = rsa_gen_take(&ctx, &kept)) != CKR_OK) {
			BN_free(e);
			return rv;
		}
		ok = rsa_gen_params(ctx, kept, (int)bits, e);
		BN_free(e);
		if (!ok) {
			rv = tok_ossl_fail();
			goto out;
		}
		break;
	}
	default:
		return CKR_MECHANISM_INVALID;
	}
	if (EVP_PKEY_generate(ctx, &pk) <= 0) {
		rv = tok_ossl_fail();
		goto out;
	}
	rv = attrs_of_pkey(pk, kt, cv, params, pub_out, priv_out);
common:
	if (rv == CKR_OK)
		rv = set_common(pub_out, kt, mech->mechanism);
	if (rv == CKR_OK)
		rv = set_common(priv_out, kt, mech->mechanism);
out:
	gen_ctx_release(ctx, kept, pk != NULL);
	if (rv == CKR_OK && pk && ret_cache) {
		/* the key as the private key object's prepared key: it is
		 * not freed on the caller's time, nor made again from the
		 * attributes at the object's first use (without the memory,
		 * that is what happens) */
		struct tok_keycache *c = calloc(1, sizeof(*c));
		if (c) {
			c->pkey = pk;
			pk = NULL;
			*ret_cache = c;
		}
	}
	EVP_PKEY_free(pk);
	return rv;
}

/* ---- wrapping ------------------------------------------------------------- */

/* The wrap cipher for mech and the (wrapping) key, with its optional IV. */
static CK_RV wrap_setup(const CK_MECHANISM *mech, const struct tok_object *wk, bool wrap,
			const EVP_CIPHER **ret_c, const uint8_t **ret_iv)
{
	const struct tok_attr *v;
	size_t iv_len;

	if (!mech || !wk)
		return CKR_ARGUMENTS_BAD;
	if (!tok_algs.ready)
		return CKR_CRYPTOKI_NOT_INITIALIZED;
	if (mech->mechanism == CKM_AES_KEY_WRAP)
		iv_len = 8;
	else if (mech->mechanism == CKM_AES_KEY_WRAP_PAD)
		iv_len = 4;
	else
		return CKR_MECHANISM_INVALID;
	/* optional parameter: the initial value (8 bytes; 4 for RFC 5649) */
	if (mech->pParameter && mech->ulParameterLen == iv_len)
		*ret_iv = mech->pParameter;
	else if (!mech->pParameter && !mech->ulParameterLen)
		*ret_iv = NULL;
	else
		return CKR_MECHANISM_PARAM_INVALID;
	if (wk->cls != CKO_SECRET_KEY || wk->key_type != CKK_AES)
		return wrap ? CKR_WRAPPING_KEY_TYPE_INCONSISTENT : CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT;
	if (!tok_attrs_bool(&wk->attrs, wrap ? CKA_WRAP : CKA_UNWRAP, false))
		return CKR_KEY_FUNCTION_NOT_PERMITTED;
	v = tok_attrs_get(&wk->attrs, CKA_VALUE);
	if (!v || !(*ret_c = tok_aes(mech->mechanism == CKM_AES_KEY_WRAP ? TOK_AES_WRAP : TOK_AES_WRAP_PAD, v->len)))
		return wrap ? CKR_WRAPPING_KEY_SIZE_RANGE : CKR_UNWRAPPING_KEY_SIZE_RANGE;
	return CKR_OK;
}

static CK_RV wrap_run(const EVP_CIPHER *c, const struct tok_object *wk, const uint8_t *iv, bool enc,
		      const uint8_t *in, size_t in_len, uint8_t *out, size_t *out_len)
{
	const struct tok_attr *v = tok_attrs_get(&wk->attrs, CKA_VALUE);
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int l1 = 0, l2 = 0;
	CK_RV rv = CKR_OK;

	if (!ctx)
		return CKR_HOST_MEMORY;
	if (in_len > INT_MAX)
		rv = CKR_KEY_SIZE_RANGE;
	else if (!EVP_CipherInit_ex2(ctx, c, v->value, iv, enc, NULL) ||
		 !EVP_CipherUpdate(ctx, out, &l1, in, (int)in_len) ||
		 !EVP_CipherFinal_ex(ctx, out + l1, &l2))
		rv = enc ? tok_ossl_fail() : CKR_WRAPPED_KEY_INVALID;
	EVP_CIPHER_CTX_free(ctx);
	ERR_clear_error();
	*out_len = (size_t)l1 + (size_t)l2;
	return rv;
}

static CK_RV pkcs8_of(struct tok_object *key, uint8_t **ret, size_t *ret_len)
{
	struct tok_keycache *c;
	PKCS8_PRIV_KEY_INFO *p8;
	unsigned char *der = NULL;
	int len;
	CK_RV rv;

	if ((rv = tok_key_cache_get(key, &c)) != CKR_OK)
		return rv == CKR_HOST_MEMORY ? rv : CKR_KEY_NOT_WRAPPABLE;
	if (!(p8 = EVP_PKEY2PKCS8(c->pkey)))
		return tok_ossl_fail();
	len = i2d_PKCS8_PRIV_KEY_INFO(p8, &der);
	PKCS8_PRIV_KEY_INFO_free(p8);
	if (len <= 0)
		return tok_ossl_fail();
	*ret = der;
	*ret_len = (size_t)len;
	return CKR_OK;
}

CK_RV tok_wrap(const CK_MECHANISM *mech, struct tok_object *wrapping, struct tok_object *key,
	       uint8_t *out, CK_ULONG *out_len)
{
	const EVP_CIPHER *c;
	const uint8_t *iv, *in;
	uint8_t *der = NULL;
	size_t in_len = 0, need, w;
	CK_RV rv;

	if (!key || !out_len)
		return CKR_ARGUMENTS_BAD;
	if ((rv = wrap_setup(mech, wrapping, true, &c, &iv)) != CKR_OK)
		return rv;
	/* The core checks CKA_EXTRACTABLE; an explicit FALSE stops here too. */
	if (!tok_attrs_bool(&key->attrs, CKA_EXTRACTABLE, true))
		return CKR_KEY_UNEXTRACTABLE;
	if (key->cls == CKO_SECRET_KEY) {
		const struct tok_attr *v = tok_attrs_get(&key->attrs, CKA_VALUE);

		if (!v || !v->len)
			return CKR_KEY_NOT_WRAPPABLE;
		in = v->value;
		in_len = v->len;
	} else if (key->cls == CKO_PRIVATE_KEY) {
		if ((rv = pkcs8_of(key, &der, &in_len)) != CKR_OK)
			return rv;
		in = der;
	} else {
		return CKR_KEY_NOT_WRAPPABLE;
	}
	if (mech->mechanism == CKM_AES_KEY_WRAP) {
		if (in_len % 8 || in_len < 16) {
			rv = CKR_KEY_SIZE_RANGE;
			goto out;
		}
		need = in_len + 8;
	} else {
		need = (in_len + 7) / 8 * 8 + 8;
	}
	if (!out) {
		*out_len = need;
		rv = CKR_OK;
	} else if (*out_len < need) {
		*out_len = need;
		rv = CKR_BUFFER_TOO_SMALL;
	} else if ((rv = wrap_run(c, wrapping, iv, true, in, in_len, out, &w)) == CKR_OK) {
		*out_len = w;
		if (w != need)
			rv = CKR_GENERAL_ERROR;
	}
out:
	if (der) {
		OPENSSL_cleanse(der, in_len);
		OPENSSL_free(der);
	}
	return rv;
}

static CK_RV unwrap_private(const uint8_t *der, size_t len, CK_KEY_TYPE want, struct tok_attrs *out)
{
	const unsigned char *p = der;
	PKCS8_PRIV_KEY_INFO *p8 = d2i_PKCS8_PRIV_KEY_INFO(NULL, &p, (long)len);
	EVP_PKEY *pk = p8 ? EVP_PKCS82PKEY_ex(p8, tok_algs.lc, NULL) : NULL;
	const struct curve *cv = NULL;
	CK_KEY_TYPE kt;
	CK_RV rv = CKR_WRAPPED_KEY_INVALID;

	PKCS8_PRIV_KEY_INFO_free(p8);
	if (!pk || p != der + len)
		goto out;
	if (EVP_PKEY_is_a(pk, "RSA")) {
		BIGNUM *f3 = NULL;

		kt = CKK_RSA;
		if (EVP_PKEY_get_bn_param(pk, OSSL_PKEY_PARAM_RSA_FACTOR3, &f3)) { /* multi-prime */
			BN_clear_free(f3);
			goto out;
		}
	} else if (EVP_PKEY_is_a(pk, "EC")) {
		char name[64];

		kt = CKK_EC;
		if (!EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_GROUP_NAME, name, sizeof(name), NULL))
			goto out;
		switch (OBJ_sn2nid(name)) {
		case NID_X9_62_prime256v1: cv = &curve_p256; break;
		case NID_secp384r1: cv = &curve_p384; break;
		default: rv = CKR_CURVE_NOT_SUPPORTED; goto out;
		}
	} else if (EVP_PKEY_is_a(pk, "ED25519")) {
		kt = CKK_EC_EDWARDS;
		cv = &curve_ed25519;
	} else {
		goto out;
	}
	if (want != CK_UNAVAILABLE_INFORMATION && want != kt) {
		rv = CKR_TEMPLATE_INCONSISTENT;
		goto out;
	}
	if ((rv = attrs_of_pkey(pk, kt, cv, NULL, NULL, out)) == CKR_OK)
		rv = set_common(out, kt, CK_UNAVAILABLE_INFORMATION);
out:
	EVP_PKEY_free(pk);
	ERR_clear_error();
	return rv;
}

CK_RV tok_unwrap(const CK_MECHANISM *mech, struct tok_object *unwrapping, CK_OBJECT_CLASS cls,
		 CK_KEY_TYPE kt, const uint8_t *wrapped, size_t wrapped_len, struct tok_attrs *out)
{
	const EVP_CIPHER *c;
	const uint8_t *iv;
	uint8_t *plain;
	size_t len;
	CK_RV rv;

	if (!out || (wrapped_len && !wrapped))
		return CKR_ARGUMENTS_BAD;
	if ((rv = wrap_setup(mech, unwrapping, false, &c, &iv)) != CKR_OK)
		return rv;
	if (wrapped_len % 8 || wrapped_len < (mech->mechanism == CKM_AES_KEY_WRAP ? 24u : 16u))
		return CKR_WRAPPED_KEY_LEN_RANGE;
	if (cls != CKO_SECRET_KEY && cls != CKO_PRIVATE_KEY)
		return CKR_TEMPLATE_INCONSISTENT;
	if (!(plain = malloc(wrapped_len)))
		return CKR_HOST_MEMORY;
	if ((rv = wrap_run(c, unwrapping, iv, false, wrapped, wrapped_len, plain, &len)) != CKR_OK)
		goto out;
	if (cls == CKO_SECRET_KEY) {
		if ((kt == CKK_AES && len != 16 && len != 24 && len != 32) || !len || len > SECRET_MAX) {
			rv = CKR_WRAPPED_KEY_INVALID;
			goto out;
		}
		if ((rv = tok_attrs_set(out, CKA_VALUE, plain, len)) == CKR_OK)
			rv = tok_attrs_set_ulong(out, CKA_VALUE_LEN, len);
	} else {
		rv = unwrap_private(plain, len, kt, out);
	}
out:
	OPENSSL_cleanse(plain, wrapped_len);
	free(plain);
	return rv;
}

/* ---- key derivation ------------------------------------------------------ */

/* The ECDH value Z (SEC 1 3.3.1: the x-coordinate of d * Q, cv->len bytes)
 * of the private key base and the peer's public point. */
static CK_RV ecdh_z(struct tok_object *base, const struct curve *cv, const uint8_t *pub, size_t pub_len,
		    uint8_t *z, size_t *z_len)
{
	struct tok_attr pa = { .type = CKA_EC_POINT, .len = pub_len, .value = (uint8_t *)pub };
	struct tok_keycache *c;
	uint8_t pt[133];
	const uint8_t *p;
	size_t len;
	OSSL_PARAM_BLD *b = NULL;
	EVP_PKEY *peer = NULL;
	EVP_PKEY_CTX *ctx = NULL;
	CK_RV rv;

	/* the raw point or its DER OCTET STRING, on the base key's curve */
	if (!ec_point_of(cv, &pa, &p, &len) || ec_check_point(cv, p, len, pt, sizeof(pt), &len) != CKR_OK)
		return CKR_MECHANISM_PARAM_INVALID;
	if ((rv = tok_key_cache_get(base, &c)) != CKR_OK)
		return rv;
	rv = CKR_HOST_MEMORY;
	if (!(b = OSSL_PARAM_BLD_new()) ||
	    !OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME, cv->group, 0) ||
	    !OSSL_PARAM_BLD_push_octet_string(b, OSSL_PKEY_PARAM_PUB_KEY, pt, len))
		goto out;
	if ((rv = pkey_fromdata(TOK_KEYMGMT("EC"), b, EVP_PKEY_PUBLIC_KEY, &peer)) != CKR_OK) {
		rv = CKR_MECHANISM_PARAM_INVALID;
		goto out;
	}
	*z_len = cv->len;
	if (!(ctx = EVP_PKEY_CTX_new_from_pkey(tok_algs.lc, c->pkey, NULL)) || EVP_PKEY_derive_init(ctx) <= 0 ||
	    EVP_PKEY_derive_set_peer(ctx, peer) <= 0 || EVP_PKEY_derive(ctx, z, z_len) <= 0 || *z_len != cv->len)
		rv = tok_ossl_fail();
	else
		rv = CKR_OK;
out:
	EVP_PKEY_CTX_free(ctx);
	EVP_PKEY_free(peer);
	OSSL_PARAM_BLD_free(b);
	return rv;
}

/* ANSI X9.63 KDF with SHA-256 (SEC 1 3.6.1): SHA-256(Z || counter || info)... */
static CK_RV x963_sha256(const uint8_t *z, size_t z_len, const uint8_t *info, size_t info_len, uint8_t *out,
			 size_t len)
{
	EVP_KDF *kdf = EVP_KDF_fetch(tok_algs.lc, "X963KDF", NULL);
	EVP_KDF_CTX *k = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM params[4], *q = params;
	CK_RV rv = CKR_OK;

	*q++ = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA2-256", 0);
	*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)z, z_len);
	if (info_len)
		*q++ = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_len);
	*q = OSSL_PARAM_construct_end();
	if (!k || EVP_KDF_derive(k, out, len, params) <= 0)
		rv = tok_ossl_fail();
	EVP_KDF_CTX_free(k);
	EVP_KDF_free(kdf);
	return rv;
}

CK_RV tok_derive(const CK_MECHANISM *mech, struct tok_object *base, CK_KEY_TYPE kt, const struct tok_attrs *tmpl,
		 struct tok_attrs *out)
{
	const CK_ECDH1_DERIVE_PARAMS *p;
	const struct curve *cv;
	uint8_t z[66], key[SECRET_MAX];
	size_t z_len = 0;
	CK_ULONG len;
	bool has_len;
	CK_RV rv;

	if (!mech || !base || !tmpl || !out)
		return CKR_ARGUMENTS_BAD;
	if (!tok_algs.ready)
		return CKR_CRYPTOKI_NOT_INITIALIZED;
	if (mech->mechanism != CKM_ECDH1_DERIVE)
		return CKR_MECHANISM_INVALID;
	p = mech->pParameter;
	if (!p || mech->ulParameterLen != sizeof(*p) || (p->kdf != CKD_NULL && p->kdf != CKD_SHA256_KDF) ||
	    (p->kdf == CKD_NULL && p->ulSharedDataLen) || (p->ulSharedDataLen && !p->pSharedData) ||
	    !p->pPublicData || !p->ulPublicDataLen)
		return CKR_MECHANISM_PARAM_INVALID;
	if (base->cls != CKO_PRIVATE_KEY || base->key_type != CKK_EC)
		return CKR_KEY_TYPE_INCONSISTENT;
	if (!tok_attrs_bool(&base->attrs, CKA_DERIVE, false))
		return CKR_KEY_FUNCTION_NOT_PERMITTED;
	if (curve_of(tok_attrs_get(&base->attrs, CKA_EC_PARAMS), CKK_EC, &cv) != CKR_OK)
		return CKR_KEY_TYPE_INCONSISTENT;
	/* the new key's length: CKA_VALUE_LEN, else Z's (CKD_NULL) or 32 */
	has_len = tok_attrs_get(tmpl, CKA_VALUE_LEN) != NULL;
	if (has_len && !tok_attrs_ulong(tmpl, CKA_VALUE_LEN, &len))
		return CKR_ATTRIBUTE_VALUE_INVALID;
	if (kt == CKK_AES) {
		if (!has_len)
			return CKR_TEMPLATE_INCOMPLETE;
		if (len != 16 && len != 24 && len != 32)
			return CKR_ATTRIBUTE_VALUE_INVALID;
	} else if (kt == CKK_GENERIC_SECRET) {
		if (!has_len)
			len = p->kdf == CKD_NULL ? cv->len : 32;
		if (len < 1 || len > SECRET_MAX)
			return CKR_ATTRIBUTE_VALUE_INVALID;
	} else {
		return CKR_TEMPLATE_INCONSISTENT;
	}
	if (p->kdf == CKD_NULL && len > cv->len)
		return CKR_KEY_SIZE_RANGE; /* no KDF: at most Z itself */
	if ((rv = ecdh_z(base, cv, p->pPublicData, p->ulPublicDataLen, z, &z_len)) != CKR_OK)
		goto out;
	if (p->kdf == CKD_NULL)
		memcpy(key, z, len); /* Z's leading bytes */
	else if ((rv = x963_sha256(z, z_len, p->pSharedData, p->ulSharedDataLen, key, len)) != CKR_OK)
		goto out;
	if ((rv = tok_attrs_set(out, CKA_VALUE, key, len)) == CKR_OK)
		rv = tok_attrs_set_ulong(out, CKA_VALUE_LEN, len);
out:
	OPENSSL_cleanse(z, sizeof(z));
	OPENSSL_cleanse(key, sizeof(key));
	return rv;
}

/* ---- the store's primitives ---------------------------------------------------
 * PIN records and sealed objects (store.c) use the same private context as
 * the operations: the explicit fetches of tok_crypto_init, never the
 * application's default context (its properties, providers or config). */

bool tok_store_gcm(bool enc, const uint8_t key[32], const uint8_t nonce[12], const uint8_t *aad,
		   size_t aad_len, const uint8_t *in, size_t len, uint8_t *out, uint8_t tag[16])
{
	const EVP_CIPHER *gcm = tok_aes(TOK_AES_GCM, 32);
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int n;
	bool ok = false;

	if (!c || !gcm || len > INT_MAX || aad_len > INT_MAX)
		goto out;
	if (EVP_CipherInit_ex2(c, gcm, key, nonce, enc, NULL) != 1 ||
	    EVP_CipherUpdate(c, NULL, &n, aad, (int)aad_len) != 1 ||
	    (len && EVP_CipherUpdate(c, out, &n, in, (int)len) != 1))
		goto out;
	if (!enc && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, tag) != 1)
		goto out;
	if (EVP_CipherFinal_ex(c, out + len, &n) != 1)
		goto out;
	if (enc && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag) != 1)
		goto out;
	ok = true;
out:
	EVP_CIPHER_CTX_free(c);
	if (!ok)
		ERR_clear_error();
	return ok;
}

bool tok_store_pbkdf2(const uint8_t *pin, size_t len, const uint8_t *salt, size_t salt_len, uint64_t iterations,
		      uint8_t out[32])
{
	int pkcs5 = 1; /* PKCS5_PBKDF2_HMAC's semantics: the records' own bounds apply */
	OSSL_PARAM params[] = {
		OSSL_PARAM_octet_string(OSSL_KDF_PARAM_PASSWORD, (void *)pin, len),
		OSSL_PARAM_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_len),
		OSSL_PARAM_uint64(OSSL_KDF_PARAM_ITER, &iterations),
		OSSL_PARAM_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)tok_md_name(TOK_SHA256), 0),
		OSSL_PARAM_int(OSSL_KDF_PARAM_PKCS5, &pkcs5),
		OSSL_PARAM_END,
	};
	EVP_KDF_CTX *k = EVP_KDF_CTX_new(tok_algs.pbkdf2);
	bool ok = k && EVP_KDF_derive(k, out, 32, params) == 1;

	EVP_KDF_CTX_free(k);
	if (!ok)
		ERR_clear_error();
	return ok;
}

bool tok_store_hmac(const uint8_t key[32], const char *label, uint8_t out[32])
{
	OSSL_PARAM params[] = {
		OSSL_PARAM_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)tok_md_name(TOK_SHA256), 0),
		OSSL_PARAM_END,
	};
	EVP_MAC_CTX *m = EVP_MAC_CTX_new(tok_algs.hmac);
	size_t n = 0;
	bool ok = m && EVP_MAC_init(m, key, 32, params) == 1 &&
		  EVP_MAC_update(m, (const uint8_t *)label, strlen(label)) == 1 &&
		  EVP_MAC_final(m, out, &n, 32) == 1 && n == 32;

	EVP_MAC_CTX_free(m);
	if (!ok)
		ERR_clear_error();
	return ok;
}

/* ---- randomness, secrecy -------------------------------------------------- */

CK_RV tok_random(uint8_t *buf, size_t len)
{
	return drbg_bytes(RAND_get0_public(tok_algs.lc), buf, len);
}

CK_RV tok_seed_random(const uint8_t *buf, size_t len)
{
	/* Mixed into both DRBGs of this thread as additional input: credited
	 * with no entropy, the caller's seed is never trusted. */
	EVP_RAND_CTX *r[2] = { RAND_get0_public(tok_algs.lc), RAND_get0_private(tok_algs.lc) };

	for (int i = 0; i < 2; i++)
		if (!r[i] || !EVP_RAND_reseed(r[i], 0, NULL, 0, buf, len))
			return tok_ossl_fail();
	return CKR_OK;
}

bool tok_attr_is_secret(CK_OBJECT_CLASS cls, CK_ATTRIBUTE_TYPE t)
{
	switch (t) {
	case CKA_VALUE:
		return cls == CKO_SECRET_KEY || cls == CKO_PRIVATE_KEY;
	case CKA_PRIVATE_EXPONENT: case CKA_PRIME_1: case CKA_PRIME_2:
	case CKA_EXPONENT_1: case CKA_EXPONENT_2: case CKA_COEFFICIENT:
		return cls == CKO_PRIVATE_KEY;
	default:
		return false;
	}
}
