/* SPDX-License-Identifier: MIT */
/*
 * The cryptographic calls: operation state (Init / single-part / Update /
 * Final), the output-buffer rules, key generation, wrapping, random. Each
 * operation writes one audit record where it ends (docs/token.md "Audit");
 * a length query or a CKR_BUFFER_TOO_SMALL answer writes none and keeps the
 * operation. The cryptography itself is the engine's (mech.c, keys.c).
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core.h"

enum step { STEP_INIT, STEP_ONESHOT, STEP_UPDATE, STEP_FINAL };

/* The call that ended the operation names its record. */
static const char *const act_name[TOK_SLOT__MAX][4] = {
	[TOK_SLOT_ENCRYPT] = { "C_EncryptInit", "C_Encrypt", "C_EncryptUpdate", "C_EncryptFinal" },
	[TOK_SLOT_DECRYPT] = { "C_DecryptInit", "C_Decrypt", "C_DecryptUpdate", "C_DecryptFinal" },
	[TOK_SLOT_SIGN] = { "C_SignInit", "C_Sign", "C_SignUpdate", "C_SignFinal" },
	[TOK_SLOT_VERIFY] = { "C_VerifyInit", "C_Verify", "C_VerifyUpdate", "C_VerifyFinal" },
	[TOK_SLOT_DIGEST] = { "C_DigestInit", "C_Digest", "C_DigestUpdate", "C_DigestFinal" },
};

static const enum tok_opkind slot_kind[TOK_SLOT__MAX] = {
	[TOK_SLOT_ENCRYPT] = TOK_OP_ENCRYPT, [TOK_SLOT_DECRYPT] = TOK_OP_DECRYPT,
	[TOK_SLOT_SIGN] = TOK_OP_SIGN,       [TOK_SLOT_VERIFY] = TOK_OP_VERIFY,
	[TOK_SLOT_DIGEST] = TOK_OP_DIGEST,
};

void tok_active_end(struct tok_active *a)
{
	tok_op_free(a->op);
	free(a->key_label);
	free(a->key_id);
	*a = (struct tok_active){ 0 };
}

/* The record that ends an operation. Digests are not audited (DESIGN.md). */
static CK_RV audit_end(struct tok_session *s, enum tok_opslot k, const char *action, CK_RV rv)
{
	struct tok_active *a = &s->act[k];

	if (k == TOK_SLOT_DIGEST)
		return CKR_OK;
	return tok_audit_write(&(struct tok_audit){
		.action = action, .rv = rv, .kind = TOK_AUD_CRYPTO, .s = s, .mech = a->mech,
		.has_mech = true, .key_label = a->key_label, .key_label_len = a->key_label_len,
		.key_id = a->key_id, .key_id_len = a->key_id_len });
}

static CK_RV copy_label_id(struct tok_active *a, struct tok_object *o)
{
	const struct tok_attr *l = tok_attrs_get(&o->attrs, CKA_LABEL);
	const struct tok_attr *id = tok_attrs_get(&o->attrs, CKA_ID);

	if (l && l->len) {
		a->key_label = malloc(l->len);
		if (!a->key_label)
			return CKR_HOST_MEMORY;
		memcpy(a->key_label, l->value, l->len);
		a->key_label_len = l->len;
	}
	if (id && id->len) {
		a->key_id = malloc(id->len);
		if (!a->key_id)
			return CKR_HOST_MEMORY;
		memcpy(a->key_id, id->value, id->len);
		a->key_id_len = id->len;
	}
	return CKR_OK;
}

static CK_RV op_init(CK_SESSION_HANDLE h, enum tok_opslot k, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE hKey)
{
	struct tok_session *s;
	struct tok_object *key = NULL;
	struct tok_active *a;
	CK_RV rv = tok_session_enter(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	pthread_mutex_lock(&s->mu);
	a = &s->act[k];
	if (k != TOK_SLOT_DIGEST) {
		rv = tok_audit_gate();
		if (rv != CKR_OK)
			goto out;
	}
	if (a->op) {
		rv = CKR_OPERATION_ACTIVE;
		goto out; /* the active operation goes on: no record */
	}
	if (!mech) {
		rv = CKR_ARGUMENTS_BAD;
		goto out;
	}
	a->mech = mech->mechanism;
	if (k != TOK_SLOT_DIGEST) {
		rv = tok_obj_get(s, hKey, &key);
		if (rv == CKR_OBJECT_HANDLE_INVALID)
			rv = CKR_KEY_HANDLE_INVALID;
	}
	if (rv == CKR_OK && key) {
		pthread_mutex_lock(&key->mu);
		rv = copy_label_id(a, key);
		if (rv == CKR_OK)
			rv = tok_op_init(slot_kind[k], mech, key, &a->op);
		pthread_mutex_unlock(&key->mu);
	} else if (rv == CKR_OK && s->digest_spare && tok_op_reinit_digest(s->digest_spare, mech) == CKR_OK) {
		a->op = s->digest_spare; /* (k is the digest slot: no key) */
		s->digest_spare = NULL;
	} else if (rv == CKR_OK) {
		rv = tok_op_init(slot_kind[k], mech, NULL, &a->op);
	}
	if (rv != CKR_OK) {
		/* The operation ends here: its one record says why. */
		arv = audit_end(s, k, act_name[k][STEP_INIT], rv);
		if (arv != CKR_OK)
			rv = arv;
		tok_active_end(a);
	}
	tok_obj_put(key);
out:
	pthread_mutex_unlock(&s->mu);
	tok_session_put(s);
	return rv;
}

/* Length queries and short buffers keep the operation and write nothing. */
static bool keeps_going(CK_RV rv, const void *out)
{
	return rv == CKR_BUFFER_TOO_SMALL || (rv == CKR_OK && !out);
}

static CK_RV op_step(CK_SESSION_HANDLE h, enum tok_opslot k, enum step st, CK_BYTE_PTR in,
		     CK_ULONG in_len, CK_BYTE_PTR out, CK_ULONG_PTR out_len)
{
	struct tok_session *s;
	struct tok_active *a;
	bool has_out = k == TOK_SLOT_ENCRYPT || k == TOK_SLOT_DECRYPT || st != STEP_UPDATE;
	CK_RV rv = tok_session_get(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	pthread_mutex_lock(&s->mu);
	a = &s->act[k];
	if (!a->op) {
		rv = CKR_OPERATION_NOT_INITIALIZED;
		goto out;
	}
	if ((in_len && !in) || (has_out && !out_len)) {
		rv = CKR_ARGUMENTS_BAD;
		goto end;
	}
	if (k != TOK_SLOT_DIGEST && (rv = tok_audit_gate()) != CKR_OK)
		goto end;
	if (st == STEP_ONESHOT && a->multipart) {
		rv = CKR_OPERATION_ACTIVE; /* C_Encrypt after C_EncryptUpdate */
		goto out;
	}
	if (st == STEP_UPDATE && !tok_op_multipart_ok(a->op)) {
		rv = CKR_MECHANISM_INVALID; /* single-part only (raw RSA, EdDSA) */
		goto end;
	}
	switch (st) {
	case STEP_ONESHOT:
		rv = tok_op_oneshot(a->op, in, in_len, out, out_len);
		break;
	case STEP_UPDATE:
		rv = tok_op_update(a->op, in, in_len, has_out ? out : NULL, has_out ? out_len : NULL);
		if (rv == CKR_BUFFER_TOO_SMALL || (rv == CKR_OK && has_out && !out))
			goto out; /* length query or short buffer: nothing happened */
		if (rv == CKR_OK) {
			a->multipart = true;
			goto out; /* the operation goes on: its record comes at Final */
		}
		break;
	case STEP_FINAL:
	default:
		rv = tok_op_final(a->op, out, out_len);
		break;
	}
	if (keeps_going(rv, out))
		goto out;
end:
	arv = audit_end(s, k, act_name[k][st], rv);
	if (arv != CKR_OK) {
		/* No record, no result. */
		if (out && out_len && rv == CKR_OK)
			OPENSSL_cleanse(out, *out_len);
		rv = arv;
	}
	if (k == TOK_SLOT_DIGEST && rv == CKR_OK && !s->digest_spare) {
		/* kept for the session's next digest (tok_op_reinit_digest) */
		s->digest_spare = a->op;
		a->op = NULL;
	}
	tok_active_end(a);
out:
	pthread_mutex_unlock(&s->mu);
	tok_session_put(s);
	return rv;
}

static CK_RV verify_step(CK_SESSION_HANDLE h, bool final, CK_BYTE_PTR data, CK_ULONG len,
			 CK_BYTE_PTR sig, CK_ULONG sig_len)
{
	struct tok_session *s;
	struct tok_active *a;
	CK_RV rv = tok_session_get(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	pthread_mutex_lock(&s->mu);
	a = &s->act[TOK_SLOT_VERIFY];
	if (!a->op) {
		rv = CKR_OPERATION_NOT_INITIALIZED;
		goto out;
	}
	if (!final && a->multipart) {
		rv = CKR_OPERATION_ACTIVE;
		goto out;
	}
	if ((len && !data) || (sig_len && !sig)) {
		rv = CKR_ARGUMENTS_BAD;
	} else if ((rv = tok_audit_gate()) == CKR_OK) {
		rv = final ? tok_op_verify_final(a->op, sig, sig_len)
			   : tok_op_verify(a->op, data, len, sig, sig_len);
	}
	arv = audit_end(s, TOK_SLOT_VERIFY, final ? "C_VerifyFinal" : "C_Verify", rv);
	if (arv != CKR_OK)
		rv = arv;
	tok_active_end(a);
out:
	pthread_mutex_unlock(&s->mu);
	tok_session_put(s);
	return rv;
}

/* ---- the C_* entry points --------------------------------------------------------- */

CK_RV C_EncryptInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k)
{
	return op_init(h, TOK_SLOT_ENCRYPT, m, k);
}

CK_RV C_Encrypt(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR out, CK_ULONG_PTR on)
{
	return op_step(h, TOK_SLOT_ENCRYPT, STEP_ONESHOT, in, n, out, on);
}

CK_RV C_EncryptUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR out, CK_ULONG_PTR on)
{
	return op_step(h, TOK_SLOT_ENCRYPT, STEP_UPDATE, in, n, out, on);
}

CK_RV C_EncryptFinal(CK_SESSION_HANDLE h, CK_BYTE_PTR out, CK_ULONG_PTR on)
{
	return op_step(h, TOK_SLOT_ENCRYPT, STEP_FINAL, NULL, 0, out, on);
}

CK_RV C_DecryptInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k)
{
	return op_init(h, TOK_SLOT_DECRYPT, m, k);
}

CK_RV C_Decrypt(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR out, CK_ULONG_PTR on)
{
	return op_step(h, TOK_SLOT_DECRYPT, STEP_ONESHOT, in, n, out, on);
}

CK_RV C_DecryptUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR out, CK_ULONG_PTR on)
{
	return op_step(h, TOK_SLOT_DECRYPT, STEP_UPDATE, in, n, out, on);
}

CK_RV C_DecryptFinal(CK_SESSION_HANDLE h, CK_BYTE_PTR out, CK_ULONG_PTR on)
{
	return op_step(h, TOK_SLOT_DECRYPT, STEP_FINAL, NULL, 0, out, on);
}

CK_RV C_SignInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k)
{
	return op_init(h, TOK_SLOT_SIGN, m, k);
}

CK_RV C_Sign(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR sig, CK_ULONG_PTR sn)
{
	return op_step(h, TOK_SLOT_SIGN, STEP_ONESHOT, in, n, sig, sn);
}

CK_RV C_SignUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n)
{
	return op_step(h, TOK_SLOT_SIGN, STEP_UPDATE, in, n, NULL, NULL);
}

CK_RV C_SignFinal(CK_SESSION_HANDLE h, CK_BYTE_PTR sig, CK_ULONG_PTR sn)
{
	return op_step(h, TOK_SLOT_SIGN, STEP_FINAL, NULL, 0, sig, sn);
}

CK_RV C_VerifyInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k)
{
	return op_init(h, TOK_SLOT_VERIFY, m, k);
}

CK_RV C_Verify(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR sig, CK_ULONG sn)
{
	return verify_step(h, false, in, n, sig, sn);
}

CK_RV C_VerifyUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n)
{
	return op_step(h, TOK_SLOT_VERIFY, STEP_UPDATE, in, n, NULL, NULL);
}

CK_RV C_VerifyFinal(CK_SESSION_HANDLE h, CK_BYTE_PTR sig, CK_ULONG sn)
{
	return verify_step(h, true, NULL, 0, sig, sn);
}

CK_RV C_DigestInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m)
{
	return op_init(h, TOK_SLOT_DIGEST, m, CK_INVALID_HANDLE);
}

CK_RV C_Digest(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR out, CK_ULONG_PTR on)
{
	return op_step(h, TOK_SLOT_DIGEST, STEP_ONESHOT, in, n, out, on);
}

CK_RV C_DigestUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n)
{
	return op_step(h, TOK_SLOT_DIGEST, STEP_UPDATE, in, n, NULL, NULL);
}

CK_RV C_DigestFinal(CK_SESSION_HANDLE h, CK_BYTE_PTR out, CK_ULONG_PTR on)
{
	return op_step(h, TOK_SLOT_DIGEST, STEP_FINAL, NULL, 0, out, on);
}

CK_RV C_DigestKey(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE hKey)
{
	struct tok_session *s;
	struct tok_object *key = NULL;
	struct tok_active *a;
	CK_RV rv = tok_session_get(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	pthread_mutex_lock(&s->mu);
	a = &s->act[TOK_SLOT_DIGEST];
	if (!a->op) {
		rv = CKR_OPERATION_NOT_INITIALIZED;
		goto out;
	}
	rv = tok_audit_gate();
	if (rv == CKR_OK) {
		rv = tok_obj_get(s, hKey, &key);
		if (rv == CKR_OBJECT_HANDLE_INVALID)
			rv = CKR_KEY_HANDLE_INVALID;
	}
	if (rv == CKR_OK) {
		pthread_mutex_lock(&key->mu);
		rv = tok_op_digest_key(a->op, key);
		pthread_mutex_unlock(&key->mu);
	}
	if (rv == CKR_OK)
		a->multipart = true;
	/* A key's value went into a digest: a key-use record, durable. */
	arv = tok_audit_obj(&(struct tok_audit){ .action = "C_DigestKey", .rv = rv,
						 .kind = TOK_AUD_SENSITIVE, .s = s,
						 .mech = a->mech, .has_mech = true }, key);
	if (arv != CKR_OK)
		rv = arv;
	if (rv != CKR_OK)
		tok_active_end(a); /* an error ends the digest */
	tok_obj_put(key);
out:
	pthread_mutex_unlock(&s->mu);
	tok_session_put(s);
	return rv;
}

/* ---- not offered: no mechanism advertises recovery or dual functions ----------- */

CK_RV C_SignRecoverInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k)
{
	return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV C_SignRecover(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR sig, CK_ULONG_PTR sn)
{
	return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV C_VerifyRecoverInit(CK_SESSION_HANDLE h, CK_MECHANISM_PTR m, CK_OBJECT_HANDLE k)
{
	return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV C_VerifyRecover(CK_SESSION_HANDLE h, CK_BYTE_PTR sig, CK_ULONG sn, CK_BYTE_PTR out, CK_ULONG_PTR on)
{
	return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV C_DigestEncryptUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR out,
			    CK_ULONG_PTR on)
{
	return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV C_DecryptDigestUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR out,
			    CK_ULONG_PTR on)
{
	return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV C_SignEncryptUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR out,
			  CK_ULONG_PTR on)
{
	return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV C_DecryptVerifyUpdate(CK_SESSION_HANDLE h, CK_BYTE_PTR in, CK_ULONG n, CK_BYTE_PTR out,
			    CK_ULONG_PTR on)
{
	return CKR_FUNCTION_NOT_SUPPORTED;
}

/* ---- keys --------------------------------------------------------------------------- */

/* Template + what the mechanism determined, moved into the template's set
 * (made is left empty: a key's parts are not copied again); the template may
 * not set the values the mechanism makes. */
static CK_RV merge(struct tok_attrs *dst, struct tok_attrs *made)
{
	for (size_t i = 0; i < made->n; i++) {
		const struct tok_attr *t = tok_attrs_get(dst, made->a[i].type);
		if (t && (t->len != made->a[i].len ||
			  (t->len && memcmp(t->value, made->a[i].value, t->len) != 0)) &&
		    made->a[i].type != CKA_LOCAL && made->a[i].type != CKA_KEY_GEN_MECHANISM)
			return CKR_TEMPLATE_INCONSISTENT;
	}
	return tok_attrs_move(dst, made);
}

/* The token-only attributes the engine fills are set after the template's
 * checks (tok_obj_complete refuses them from a caller). */
static CK_RV split_local(struct tok_attrs *made, CK_ULONG *gen_mech)
{
	if (!tok_attrs_ulong(made, CKA_KEY_GEN_MECHANISM, gen_mech))
		*gen_mech = CK_UNAVAILABLE_INFORMATION;
	tok_attrs_del(made, CKA_KEY_GEN_MECHANISM);
	tok_attrs_del(made, CKA_LOCAL);
	return CKR_OK;
}

CK_RV C_GenerateKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR mech, CK_ATTRIBUTE_PTR pTemplate,
		    CK_ULONG ulCount, CK_OBJECT_HANDLE_PTR phKey)
{
	struct tok_session *s;
	struct tok_attrs attrs = { 0 }, made = { 0 };
	struct tok_audit a = { .action = "C_GenerateKey", .kind = TOK_AUD_SENSITIVE };
	CK_ULONG kt, gm;
	CK_RV rv = tok_session_get(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	a.s = s;
	if (!mech || !phKey) {
		rv = CKR_ARGUMENTS_BAD;
		goto out;
	}
	a.mech = mech->mechanism;
	a.has_mech = true;
	rv = tok_attrs_from_template(&attrs, pTemplate, ulCount);
	if (rv == CKR_OK)
		rv = tok_generate_key(mech, &attrs, &made);
	if (rv == CKR_OK)
		rv = split_local(&made, &gm);
	if (rv == CKR_OK && !tok_attrs_ulong(&made, CKA_KEY_TYPE, &kt))
		rv = CKR_GENERAL_ERROR;
	if (rv == CKR_OK)
		rv = tok_obj_complete(s, &attrs, CKO_SECRET_KEY, kt, true);
	if (rv == CKR_OK)
		rv = merge(&attrs, &made);
	if (rv == CKR_OK)
		rv = tok_attrs_set_ulong(&attrs, CKA_KEY_GEN_MECHANISM, gm);
	if (rv == CKR_OK) {
		rv = tok_obj_create(s, &attrs, &a, phKey, NULL);
		goto done;
	}
out:
	a.rv = rv;
	arv = tok_audit_write(&a);
	if (arv != CKR_OK)
		rv = arv;
done:
	tok_attrs_free(&made);
	tok_attrs_free(&attrs);
	tok_session_put(s);
	return rv;
}

CK_RV C_GenerateKeyPair(CK_SESSION_HANDLE h, CK_MECHANISM_PTR mech, CK_ATTRIBUTE_PTR pPubT,
			CK_ULONG nPub, CK_ATTRIBUTE_PTR pPrivT, CK_ULONG nPriv,
			CK_OBJECT_HANDLE_PTR phPub, CK_OBJECT_HANDLE_PTR phPriv)
{
	struct tok_session *s;
	struct tok_attrs pub = { 0 }, priv = { 0 }, mpub = { 0 }, mpriv = { 0 };
	struct tok_object *opub = NULL, *opriv = NULL;
	void *kc = NULL; /* the private key prepared, if the engine made it */
	struct tok_audit a = { .action = "C_GenerateKeyPair", .kind = TOK_AUD_SENSITIVE };
	CK_ULONG kt = 0, mkt, gm;
	CK_RV rv = tok_session_enter(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	a.s = s;
	if (!mech || !phPub || !phPriv) {
		rv = CKR_ARGUMENTS_BAD;
		goto out;
	}
	a.mech = mech->mechanism;
	a.has_mech = true;
	rv = tok_attrs_from_template(&pub, pPubT, nPub);
	if (rv == CKR_OK)
		rv = tok_attrs_from_template(&priv, pPrivT, nPriv);
	if (rv == CKR_OK)
		rv = tok_key_pair_type(mech->mechanism, &kt);
	/* The templates, the session and the login are checked before the
	 * pair is made: a read-only session or a missing login answers at
	 * once, not after an RSA prime search (up to a second), and an EC pair
	 * made ahead is not spent on a call that fails. */
	if (rv == CKR_OK)
		rv = tok_obj_complete(s, &pub, CKO_PUBLIC_KEY, kt, true);
	if (rv == CKR_OK)
		rv = tok_obj_complete(s, &priv, CKO_PRIVATE_KEY, kt, true);
	if (rv == CKR_OK)
		rv = tok_generate_key_pair_cached(mech, &pub, &priv, &mpub, &mpriv, &kc);
	if (rv == CKR_OK)
		rv = split_local(&mpub, &gm);
	if (rv == CKR_OK)
		rv = split_local(&mpriv, &gm);
	if (rv == CKR_OK && (!tok_attrs_ulong(&mpriv, CKA_KEY_TYPE, &mkt) || mkt != kt))
		rv = CKR_GENERAL_ERROR;
	if (rv == CKR_OK)
		rv = merge(&pub, &mpub);
	if (rv == CKR_OK)
		rv = merge(&priv, &mpriv);
	if (rv == CKR_OK)
		rv = tok_attrs_set_ulong(&pub, CKA_KEY_GEN_MECHANISM, gm);
	if (rv == CKR_OK)
		rv = tok_attrs_set_ulong(&priv, CKA_KEY_GEN_MECHANISM, gm);
	if (rv == CKR_OK)
		rv = tok_obj_add(s, &pub, &opub);
	if (rv == CKR_OK) {
		rv = tok_obj_add(s, &priv, &opriv);
		if (rv != CKR_OK) {
			tok_obj_discard(s->tok, opub);
			opub = NULL;
		} else {
			pthread_mutex_lock(&opriv->mu);
			if (!opriv->cache) {
				opriv->cache = kc;
				kc = NULL;
			}
			pthread_mutex_unlock(&opriv->mu);
		}
	}
out:
	/* One record for the pair, named by the private key. */
	a.rv = rv;
	arv = tok_audit_obj(&a, opriv);
	if (rv == CKR_OK && arv != CKR_OK) {
		tok_obj_discard(s->tok, opub);
		tok_obj_discard(s->tok, opriv);
		opub = opriv = NULL;
	}
	if (arv != CKR_OK)
		rv = arv;
	if (rv == CKR_OK) {
		*phPub = opub->handle;
		*phPriv = opriv->handle;
	}
	tok_obj_put(opub);
	tok_obj_put(opriv);
	tok_key_cache_free(kc);
	tok_attrs_free(&pub);
	tok_attrs_free(&priv);
	tok_attrs_free(&mpub);
	tok_attrs_free(&mpriv);
	tok_session_put(s);
	return rv;
}

/* Lock two objects' mutexes in address order (they may be one object). */
static void lock2(struct tok_object *a, struct tok_object *b)
{
	if (a == b) {
		pthread_mutex_lock(&a->mu);
	} else if (a < b) {
		pthread_mutex_lock(&a->mu);
		pthread_mutex_lock(&b->mu);
	} else {
		pthread_mutex_lock(&b->mu);
		pthread_mutex_lock(&a->mu);
	}
}

static void unlock2(struct tok_object *a, struct tok_object *b)
{
	pthread_mutex_unlock(&a->mu);
	if (a != b)
		pthread_mutex_unlock(&b->mu);
}

CK_RV C_WrapKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE hWrapping,
		CK_OBJECT_HANDLE hKey, CK_BYTE_PTR out, CK_ULONG_PTR out_len)
{
	struct tok_session *s;
	struct tok_object *w = NULL, *k = NULL;
	struct tok_audit a = { .action = "C_WrapKey", .kind = TOK_AUD_SENSITIVE };
	CK_RV rv = tok_session_enter(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	a.s = s;
	if (!mech || !out_len) {
		rv = CKR_ARGUMENTS_BAD;
		goto out;
	}
	a.mech = mech->mechanism;
	a.has_mech = true;
	rv = tok_obj_get(s, hWrapping, &w);
	if (rv == CKR_OBJECT_HANDLE_INVALID)
		rv = CKR_WRAPPING_KEY_HANDLE_INVALID;
	if (rv == CKR_OK) {
		rv = tok_obj_get(s, hKey, &k);
		if (rv == CKR_OBJECT_HANDLE_INVALID)
			rv = CKR_KEY_HANDLE_INVALID;
	}
	if (rv != CKR_OK)
		goto out;
	lock2(w, k);
	if (!tok_attrs_bool(&k->attrs, CKA_EXTRACTABLE, true))
		rv = CKR_KEY_UNEXTRACTABLE;
	else if (tok_attrs_bool(&k->attrs, CKA_WRAP_WITH_TRUSTED, false) &&
		 !tok_attrs_bool(&w->attrs, CKA_TRUSTED, false))
		rv = CKR_KEY_NOT_WRAPPABLE;
	else
		rv = tok_wrap(mech, w, k, out, out_len);
	unlock2(w, k);
	if (keeps_going(rv, out))
		goto quiet;
out:
	a.rv = rv;
	a.first = w; /* the wrapping key, then the wrapped one */
	arv = tok_audit_obj(&a, k);
	if (arv != CKR_OK) {
		if (rv == CKR_OK)
			OPENSSL_cleanse(out, *out_len);
		rv = arv;
	}
quiet:
	tok_obj_put(w);
	tok_obj_put(k);
	tok_session_put(s);
	return rv;
}

CK_RV C_UnwrapKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE hUnwrapping,
		  CK_BYTE_PTR wrapped, CK_ULONG wrapped_len, CK_ATTRIBUTE_PTR pTemplate,
		  CK_ULONG ulCount, CK_OBJECT_HANDLE_PTR phKey)
{
	struct tok_session *s;
	struct tok_object *u = NULL;
	struct tok_attrs attrs = { 0 }, made = { 0 };
	struct tok_audit a = { .action = "C_UnwrapKey", .kind = TOK_AUD_SENSITIVE };
	CK_ULONG cls = 0, kt = (CK_ULONG)-1;
	CK_RV rv = tok_session_enter(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	a.s = s;
	if (!mech || !phKey || (wrapped_len && !wrapped) || !wrapped_len) {
		rv = CKR_ARGUMENTS_BAD;
		goto out;
	}
	a.mech = mech->mechanism;
	a.has_mech = true;
	rv = tok_attrs_from_template(&attrs, pTemplate, ulCount);
	if (rv == CKR_OK && !tok_attrs_ulong(&attrs, CKA_CLASS, &cls))
		rv = CKR_TEMPLATE_INCOMPLETE;
	if (rv == CKR_OK && cls != CKO_SECRET_KEY && cls != CKO_PRIVATE_KEY)
		rv = CKR_TEMPLATE_INCONSISTENT;
	if (rv == CKR_OK && !tok_attrs_ulong(&attrs, CKA_KEY_TYPE, &kt) && cls == CKO_SECRET_KEY)
		rv = CKR_TEMPLATE_INCOMPLETE;
	if (rv == CKR_OK) {
		rv = tok_obj_get(s, hUnwrapping, &u);
		if (rv == CKR_OBJECT_HANDLE_INVALID)
			rv = CKR_UNWRAPPING_KEY_HANDLE_INVALID;
	}
	if (rv == CKR_OK) {
		pthread_mutex_lock(&u->mu);
		rv = tok_unwrap(mech, u, cls, kt, wrapped, wrapped_len, &made);
		pthread_mutex_unlock(&u->mu);
	}
	if (rv == CKR_OK && !tok_attrs_ulong(&made, CKA_KEY_TYPE, &kt) &&
	    !tok_attrs_ulong(&attrs, CKA_KEY_TYPE, &kt))
		rv = CKR_WRAPPED_KEY_INVALID;
	if (rv == CKR_OK) {
		tok_attrs_del(&made, CKA_LOCAL);
		tok_attrs_del(&made, CKA_KEY_GEN_MECHANISM);
		rv = tok_obj_complete(s, &attrs, cls, kt, false);
	}
	if (rv == CKR_OK)
		rv = merge(&attrs, &made);
	if (rv == CKR_OK)
		rv = tok_key_check(cls, kt, &attrs);
	a.first = u; /* the unwrapping key, then the new one */
	if (rv == CKR_OK) {
		rv = tok_obj_create(s, &attrs, &a, phKey, NULL);
		goto done;
	}
out:
	a.rv = rv;
	arv = tok_audit_obj(&a, NULL);
	if (arv != CKR_OK)
		rv = arv;
done:
	tok_obj_put(u);
	tok_attrs_free(&made);
	tok_attrs_free(&attrs);
	tok_session_put(s);
	return rv;
}

CK_RV C_DeriveKey(CK_SESSION_HANDLE h, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE hBase,
		  CK_ATTRIBUTE_PTR pTemplate, CK_ULONG ulCount, CK_OBJECT_HANDLE_PTR phKey)
{
	struct tok_session *s;
	struct tok_object *base = NULL;
	struct tok_attrs attrs = { 0 }, made = { 0 };
	struct tok_audit a = { .action = "C_DeriveKey", .kind = TOK_AUD_SENSITIVE };
	CK_ULONG cls = CKO_SECRET_KEY, kt = CKK_GENERIC_SECRET;
	bool base_sens = true, base_never = true;
	CK_RV rv = tok_session_enter(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	a.s = s;
	if (!mech) {
		rv = CKR_ARGUMENTS_BAD;
		goto out;
	}
	a.mech = mech->mechanism;
	a.has_mech = true;
	if (mech->mechanism != CKM_ECDH1_DERIVE) {
		rv = CKR_MECHANISM_INVALID; /* the one derivation offered */
		goto out;
	}
	if (!phKey) {
		rv = CKR_ARGUMENTS_BAD;
		goto out;
	}
	rv = tok_attrs_from_template(&attrs, pTemplate, ulCount);
	if (rv == CKR_OK && tok_attrs_get(&attrs, CKA_CLASS) && (!tok_attrs_ulong(&attrs, CKA_CLASS, &cls) ||
								  cls != CKO_SECRET_KEY))
		rv = CKR_TEMPLATE_INCONSISTENT;
	if (rv == CKR_OK && tok_attrs_get(&attrs, CKA_KEY_TYPE) && !tok_attrs_ulong(&attrs, CKA_KEY_TYPE, &kt))
		rv = CKR_ATTRIBUTE_VALUE_INVALID;
	if (rv == CKR_OK) {
		rv = tok_obj_get(s, hBase, &base);
		if (rv == CKR_OBJECT_HANDLE_INVALID)
			rv = CKR_KEY_HANDLE_INVALID;
	}
	if (rv == CKR_OK) {
		pthread_mutex_lock(&base->mu);
		rv = tok_derive(mech, base, kt, &attrs, &made);
		base_sens = tok_attrs_bool(&base->attrs, CKA_ALWAYS_SENSITIVE, false);
		base_never = tok_attrs_bool(&base->attrs, CKA_NEVER_EXTRACTABLE, false);
		pthread_mutex_unlock(&base->mu);
	}
	if (rv == CKR_OK)
		rv = tok_obj_complete(s, &attrs, CKO_SECRET_KEY, kt, false);
	if (rv == CKR_OK)
		rv = merge(&attrs, &made);
	if (rv == CKR_OK)
		rv = tok_key_check(CKO_SECRET_KEY, kt, &attrs);
	/* PKCS#11: a derived key was always sensitive (never extractable) only
	 * when its base key was too. */
	if (rv == CKR_OK && !base_sens)
		rv = tok_attrs_set_bool(&attrs, CKA_ALWAYS_SENSITIVE, false);
	if (rv == CKR_OK && !base_never)
		rv = tok_attrs_set_bool(&attrs, CKA_NEVER_EXTRACTABLE, false);
	a.first = base; /* the base key, then the derived one */
	if (rv == CKR_OK) {
		rv = tok_obj_create(s, &attrs, &a, phKey, NULL);
		goto done;
	}
out:
	a.rv = rv;
	arv = tok_audit_obj(&a, NULL);
	if (arv != CKR_OK)
		rv = arv;
done:
	tok_obj_put(base);
	tok_attrs_free(&made);
	tok_attrs_free(&attrs);
	tok_session_put(s);
	return rv;
}

/* ---- random --------------------------------------------------------------------------- */

CK_RV C_GenerateRandom(CK_SESSION_HANDLE h, CK_BYTE_PTR buf, CK_ULONG len)
{
	struct tok_session *s;
	char detail[32];
	CK_RV rv = tok_session_get(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	rv = tok_audit_gate();
	if (rv != CKR_OK)
		goto out;
	rv = len && !buf ? CKR_ARGUMENTS_BAD : tok_random(buf, len);
	snprintf(detail, sizeof(detail), "bytes=%lu", (unsigned long)len);
	arv = tok_audit_write(&(struct tok_audit){ .action = "C_GenerateRandom", .rv = rv,
						   .kind = TOK_AUD_CRYPTO, .s = s, .detail = detail });
	if (arv != CKR_OK) {
		if (rv == CKR_OK)
			OPENSSL_cleanse(buf, len);
		rv = arv;
	}
out:
	tok_session_put(s);
	return rv;
}

CK_RV C_SeedRandom(CK_SESSION_HANDLE h, CK_BYTE_PTR seed, CK_ULONG len)
{
	struct tok_session *s;
	char detail[32];
	CK_RV rv = tok_session_get(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	rv = tok_audit_gate();
	if (rv != CKR_OK)
		goto out;
	rv = len && !seed ? CKR_ARGUMENTS_BAD : tok_seed_random(seed, len);
	snprintf(detail, sizeof(detail), "bytes=%lu", (unsigned long)len);
	arv = tok_audit_write(&(struct tok_audit){ .action = "C_SeedRandom", .rv = rv,
						   .kind = TOK_AUD_CRYPTO, .s = s, .detail = detail });
	if (arv != CKR_OK)
		rv = arv;
out:
	tok_session_put(s);
	return rv;
}
