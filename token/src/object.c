/* SPDX-License-Identifier: MIT */
/*
 * Objects: the per-token object table, defaults and attribute policy, and the
 * object calls (create, copy, destroy, size, get/set attributes, find).
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core.h"

#define IDX_BITS 24
#define IDX_MASK ((1ull << IDX_BITS) - 1)

/* ---- the table -------------------------------------------------------------- */

/* Stored encrypted and loaded only at login: private objects and anything
 * holding key material (docs/token.md). */
bool tok_obj_sealed(const struct tok_object *o)
{
	return o->private_obj || o->cls == CKO_SECRET_KEY || o->cls == CKO_PRIVATE_KEY;
}

static void obj_free(struct tok_object *o)
{
	tok_attrs_free(&o->attrs);
	if (o->cache)
		tok_key_cache_free(o->cache);
	pthread_mutex_destroy(&o->mu);
	free(o);
}

void tok_obj_put(struct tok_object *o)
{
	if (o && atomic_fetch_sub(&o->refs, 1) == 1)
		obj_free(o);
}

CK_RV tok_obj_publish(struct tok_token *t, struct tok_attrs *attrs, CK_SESSION_HANDLE owner,
		      struct tok_object **ret)
{
	struct tok_object *o = calloc(1, sizeof(*o));
	CK_ULONG v;
	size_t i;

	if (!o)
		return CKR_HOST_MEMORY;
	pthread_mutex_init(&o->mu, NULL);
	atomic_init(&o->refs, 2); /* the table's and the caller's */
	o->attrs = *attrs;
	*attrs = (struct tok_attrs){ 0 };
	o->cls = tok_attrs_ulong(&o->attrs, CKA_CLASS, &v) ? v : CKO_DATA;
	o->key_type = tok_attrs_ulong(&o->attrs, CKA_KEY_TYPE, &v) ? v : (CK_ULONG)-1;
	o->token_obj = tok_attrs_bool(&o->attrs, CKA_TOKEN, false);
	o->private_obj = tok_attrs_bool(&o->attrs, CKA_PRIVATE, false);
	o->owner = o->token_obj ? CK_INVALID_HANDLE : owner;
	if (o->token_obj) {
		uint8_t u[16];
		static const char hx[] = "0123456789abcdef";
		if (tok_random(u, sizeof(u)) != CKR_OK) {
			obj_free(o);
			return CKR_DEVICE_ERROR;
		}
		for (int k = 0; k < 16; k++) {
			o->uuid[2 * k] = hx[u[k] >> 4];
			o->uuid[2 * k + 1] = hx[u[k] & 15];
		}
	}
	pthread_rwlock_wrlock(&t->olock);
	for (i = t->free_lo; i < t->nobjs; i++)
		if (!t->objs[i])
			break;
	if (i == t->nobjs) {
		if (i >= IDX_MASK) {
			pthread_rwlock_unlock(&t->olock);
			obj_free(o);
			return CKR_DEVICE_MEMORY;
		}
		if (t->nobjs == t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 64;
			struct tok_object **n = realloc(t->objs, cap * sizeof(*n));
			if (!n) {
				pthread_rwlock_unlock(&t->olock);
				obj_free(o);
				return CKR_HOST_MEMORY;
			}
			t->objs = n;
			t->cap = cap;
		}
		t->nobjs++;
	}
	/* Handles are not reused while the module is loaded. */
	o->handle = (CK_OBJECT_HANDLE)((atomic_fetch_add(&tok_g.object_gen, 1) + 1) << IDX_BITS | (i + 1));
	t->objs[i] = o;
	t->free_lo = i + 1;
	pthread_rwlock_unlock(&t->olock);
	if (ret)
		*ret = o;
	else
		tok_obj_put(o);
	return CKR_OK;
}

static void unpublish_locked(struct tok_token *t, size_t i)
{
	struct tok_object *o = t->objs[i];

	t->objs[i] = NULL;
	if (i < t->free_lo)
		t->free_lo = i;
	atomic_store(&o->destroyed, true);
	tok_obj_put(o);
}

void tok_obj_unpublish(struct tok_token *t, struct tok_object *o)
{
	size_t i = (size_t)(o->handle & IDX_MASK) - 1;

	pthread_rwlock_wrlock(&t->olock);
	if (i < t->nobjs && t->objs[i] == o)
		unpublish_locked(t, i);
	pthread_rwlock_unlock(&t->olock);
}

static bool visible(struct tok_token *t, const struct tok_object *o)
{
	return !(o->token_obj ? tok_obj_sealed(o) : o->private_obj) ||
	       tok_login_state(t) == TOK_USER;
}

CK_RV tok_obj_get(struct tok_session *s, CK_OBJECT_HANDLE h, struct tok_object **ret)
{
	struct tok_token *t = s->tok;
	size_t i = (size_t)(h & IDX_MASK);
	struct tok_object *o = NULL;
	/* What another process changed or destroyed, first (one load when
	 * nothing changed). */
	CK_RV rv = tok_store_sync(t);

	if (rv != CKR_OK)
		return rv;
	pthread_rwlock_rdlock(&t->olock);
	if (i >= 1 && i <= t->nobjs && t->objs[i - 1] && t->objs[i - 1]->handle == h &&
	    visible(t, t->objs[i - 1])) {
		o = t->objs[i - 1];
		atomic_fetch_add(&o->refs, 1);
	}
	pthread_rwlock_unlock(&t->olock);
	if (!o)
		return CKR_OBJECT_HANDLE_INVALID;
	*ret = o;
	return CKR_OK;
}

void tok_obj_drop_private(struct tok_token *t)
{
	pthread_rwlock_wrlock(&t->olock);
	for (size_t i = 0; i < t->nobjs; i++) {
		struct tok_object *o = t->objs[i];
		if (o && (o->token_obj ? tok_obj_sealed(o) : o->private_obj))
			unpublish_locked(t, i);
	}
	pthread_rwlock_unlock(&t->olock);
}

void tok_obj_drop_session(struct tok_token *t, CK_SESSION_HANDLE owner)
{
	pthread_rwlock_wrlock(&t->olock);
	for (size_t i = 0; i < t->nobjs; i++)
		if (t->objs[i] && !t->objs[i]->token_obj && t->objs[i]->owner == owner)
			unpublish_locked(t, i);
	pthread_rwlock_unlock(&t->olock);
}

void tok_obj_drop_all(struct tok_token *t)
{
	pthread_rwlock_wrlock(&t->olock);
	for (size_t i = 0; i < t->nobjs; i++)
		if (t->objs[i])
			unpublish_locked(t, i);
	t->nobjs = 0;
	t->free_lo = 0;
	pthread_rwlock_unlock(&t->olock);
}

void tok_obj_drop_token_objects(struct tok_token *t)
{
	pthread_rwlock_wrlock(&t->olock);
	for (size_t i = 0; i < t->nobjs; i++)
		if (t->objs[i] && t->objs[i]->token_obj)
			unpublish_locked(t, i);
	pthread_rwlock_unlock(&t->olock);
}

struct tok_object *tok_obj_by_uuid(struct tok_token *t, const char *uuid)
{
	struct tok_object *o = NULL;

	pthread_rwlock_rdlock(&t->olock);
	for (size_t i = 0; i < t->nobjs; i++) {
		if (t->objs[i] && t->objs[i]->token_obj && !memcmp(t->objs[i]->uuid, uuid, 32)) {
			o = t->objs[i];
			atomic_fetch_add(&o->refs, 1);
			break;
		}
	}
	pthread_rwlock_unlock(&t->olock);
	return o;
}

bool tok_obj_same_kind(const struct tok_object *o, const struct tok_attrs *attrs)
{
	CK_ULONG cls = CKO_DATA, kt = (CK_ULONG)-1;

	(void)tok_attrs_ulong(attrs, CKA_CLASS, &cls);
	(void)tok_attrs_ulong(attrs, CKA_KEY_TYPE, &kt);
	return cls == o->cls && kt == o->key_type && o->token_obj == tok_attrs_bool(attrs, CKA_TOKEN, false) &&
	       o->private_obj == tok_attrs_bool(attrs, CKA_PRIVATE, false);
}

void tok_obj_replace_attrs(struct tok_object *o, struct tok_attrs *attrs)
{
	struct tok_attrs old;

	/* The key material cannot change (CKA_VALUE and the key parts are
	 * never settable), so the engine's prepared key (cache) stays. */
	pthread_mutex_lock(&o->mu);
	old = o->attrs;
	o->attrs = *attrs;
	pthread_mutex_unlock(&o->mu);
	*attrs = (struct tok_attrs){ 0 };
	tok_attrs_free(&old);
}

void tok_obj_prune(struct tok_token *t, const char (*names)[33], size_t n)
{
	pthread_rwlock_wrlock(&t->olock);
	for (size_t i = 0; i < t->nobjs; i++) {
		struct tok_object *o = t->objs[i];
		size_t k;
		if (!o || !o->token_obj)
			continue;
		for (k = 0; k < n; k++)
			if (!memcmp(names[k], o->uuid, 32))
				break;
		if (k == n)
			unpublish_locked(t, i);
	}
	pthread_rwlock_unlock(&t->olock);
}

/* ---- attribute policy -------------------------------------------------------- */

static bool in(CK_ATTRIBUTE_TYPE t, const CK_ATTRIBUTE_TYPE *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (list[i] == t)
			return true;
	return false;
}

#define IN(t, ...) in(t, (const CK_ATTRIBUTE_TYPE[]){ __VA_ARGS__ }, \
		      sizeof((const CK_ATTRIBUTE_TYPE[]){ __VA_ARGS__ }) / sizeof(CK_ATTRIBUTE_TYPE))

/* Which attributes an object of this class may carry at all. */
static bool attr_allowed(CK_OBJECT_CLASS cls, CK_ATTRIBUTE_TYPE t)
{
	if (IN(t, CKA_CLASS, CKA_TOKEN, CKA_PRIVATE, CKA_MODIFIABLE, CKA_LABEL, CKA_COPYABLE,
	       CKA_DESTROYABLE))
		return true;
	switch (cls) {
	case CKO_DATA:
		return IN(t, CKA_APPLICATION, CKA_OBJECT_ID, CKA_VALUE);
	case CKO_CERTIFICATE:
		return IN(t, CKA_CERTIFICATE_TYPE, CKA_TRUSTED, CKA_CERTIFICATE_CATEGORY,
			  CKA_CHECK_VALUE, CKA_START_DATE, CKA_END_DATE, CKA_SUBJECT, CKA_ID,
			  CKA_ISSUER, CKA_SERIAL_NUMBER, CKA_VALUE, CKA_URL,
			  CKA_HASH_OF_SUBJECT_PUBLIC_KEY, CKA_HASH_OF_ISSUER_PUBLIC_KEY,
			  CKA_JAVA_MIDP_SECURITY_DOMAIN, CKA_NAME_HASH_ALGORITHM);
	case CKO_SECRET_KEY:
	case CKO_PUBLIC_KEY:
	case CKO_PRIVATE_KEY:
		if (IN(t, CKA_KEY_TYPE, CKA_ID, CKA_START_DATE, CKA_END_DATE, CKA_DERIVE, CKA_LOCAL,
		       CKA_KEY_GEN_MECHANISM))
			return true;
		if (cls == CKO_SECRET_KEY)
			return IN(t, CKA_SENSITIVE, CKA_ENCRYPT, CKA_DECRYPT, CKA_SIGN, CKA_VERIFY,
				  CKA_WRAP, CKA_UNWRAP, CKA_EXTRACTABLE, CKA_ALWAYS_SENSITIVE,
				  CKA_NEVER_EXTRACTABLE, CKA_CHECK_VALUE, CKA_WRAP_WITH_TRUSTED,
				  CKA_TRUSTED, CKA_VALUE, CKA_VALUE_LEN);
		if (cls == CKO_PUBLIC_KEY)
			return IN(t, CKA_SUBJECT, CKA_ENCRYPT, CKA_VERIFY, CKA_VERIFY_RECOVER,
				  CKA_WRAP, CKA_TRUSTED, CKA_PUBLIC_KEY_INFO, CKA_MODULUS,
				  CKA_MODULUS_BITS, CKA_PUBLIC_EXPONENT, CKA_EC_PARAMS, CKA_EC_POINT);
		return IN(t, CKA_SUBJECT, CKA_SENSITIVE, CKA_DECRYPT, CKA_SIGN, CKA_SIGN_RECOVER,
			  CKA_UNWRAP, CKA_EXTRACTABLE, CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE,
			  CKA_WRAP_WITH_TRUSTED, CKA_ALWAYS_AUTHENTICATE, CKA_PUBLIC_KEY_INFO,
			  CKA_MODULUS, CKA_PUBLIC_EXPONENT, CKA_PRIVATE_EXPONENT, CKA_PRIME_1,
			  CKA_PRIME_2, CKA_EXPONENT_1, CKA_EXPONENT_2, CKA_COEFFICIENT,
			  CKA_EC_PARAMS, CKA_EC_POINT, CKA_VALUE);
	default:
		return false;
	}
}

/* Set by the token only, never by a template. */
static bool attr_token_only(CK_ATTRIBUTE_TYPE t)
{
	return IN(t, CKA_LOCAL, CKA_KEY_GEN_MECHANISM, CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE);
}

static CK_RV dflt_bool(struct tok_attrs *a, CK_ATTRIBUTE_TYPE t, bool v)
{
	return tok_attrs_get(a, t) ? CKR_OK : tok_attrs_set_bool(a, t, v);
}

static CK_RV dflt_empty(struct tok_attrs *a, CK_ATTRIBUTE_TYPE t)
{
	return tok_attrs_get(a, t) ? CKR_OK : tok_attrs_set(a, t, NULL, 0);
}

CK_RV tok_obj_complete(struct tok_session *s, struct tok_attrs *a, CK_OBJECT_CLASS cls,
		       CK_KEY_TYPE kt, bool local)
{
	struct tok_token *t = s->tok;
	enum tok_login who = tok_login_state(t);
	bool is_key = cls == CKO_SECRET_KEY || cls == CKO_PUBLIC_KEY || cls == CKO_PRIVATE_KEY;
	bool secretish = cls == CKO_SECRET_KEY || cls == CKO_PRIVATE_KEY;
	CK_ULONG v;
	CK_RV rv = CKR_OK;

	if (tok_attrs_ulong(a, CKA_CLASS, &v) && v != cls)
		return CKR_TEMPLATE_INCONSISTENT;
	if (is_key && tok_attrs_ulong(a, CKA_KEY_TYPE, &v) && v != kt)
		return CKR_TEMPLATE_INCONSISTENT;
	for (size_t i = 0; i < a->n; i++) {
		if (!attr_allowed(cls, a->a[i].type))
			return CKR_ATTRIBUTE_TYPE_INVALID;
		if (attr_token_only(a->a[i].type))
			return CKR_ATTRIBUTE_READ_ONLY;
	}
	if (tok_attrs_bool(a, CKA_TRUSTED, false) && who != TOK_SO)
		return CKR_ATTRIBUTE_READ_ONLY; /* only the SO marks a key trusted */
	rv = tok_attrs_set_ulong(a, CKA_CLASS, cls);
	if (rv == CKR_OK && is_key)
		rv = tok_attrs_set_ulong(a, CKA_KEY_TYPE, kt);
	if (rv == CKR_OK)
		rv = dflt_bool(a, CKA_TOKEN, false);
	if (rv == CKR_OK)
		rv = dflt_bool(a, CKA_PRIVATE, secretish);
	if (rv != CKR_OK)
		return rv;
	if (tok_attrs_bool(a, CKA_TOKEN, false) && !tok_session_rw(s))
		return CKR_SESSION_READ_ONLY;
	if (tok_attrs_bool(a, CKA_PRIVATE, false) && who != TOK_USER)
		return CKR_USER_NOT_LOGGED_IN;
	/* Key material is sealed under the master key: only a login has it. */
	if (secretish && who == TOK_PUBLIC)
		return CKR_USER_NOT_LOGGED_IN;
	if (tok_attrs_bool(a, CKA_TOKEN, false) && who == TOK_PUBLIC && cls != CKO_PUBLIC_KEY &&
	    cls != CKO_DATA && cls != CKO_CERTIFICATE)
		return CKR_USER_NOT_LOGGED_IN;
	rv = dflt_bool(a, CKA_MODIFIABLE, true);
	if (rv == CKR_OK) rv = dflt_bool(a, CKA_COPYABLE, true);
	if (rv == CKR_OK) rv = dflt_bool(a, CKA_DESTROYABLE, true);
	if (rv == CKR_OK) rv = dflt_empty(a, CKA_LABEL);
	if (rv != CKR_OK || !is_key)
		return rv;
	rv = dflt_empty(a, CKA_ID);
	if (rv == CKR_OK) rv = dflt_empty(a, CKA_START_DATE);
	if (rv == CKR_OK) rv = dflt_empty(a, CKA_END_DATE);
	if (rv == CKR_OK) rv = dflt_bool(a, CKA_DERIVE, false);
	if (rv == CKR_OK) rv = tok_attrs_set_bool(a, CKA_LOCAL, local);
	if (rv == CKR_OK && !tok_attrs_get(a, CKA_KEY_GEN_MECHANISM))
		rv = tok_attrs_set_ulong(a, CKA_KEY_GEN_MECHANISM, CK_UNAVAILABLE_INFORMATION);
	if (rv != CKR_OK)
		return rv;
	/* Usage defaults: what the class can do (as SoftHSMv2 does). */
	if (cls == CKO_SECRET_KEY) {
		rv = dflt_bool(a, CKA_ENCRYPT, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_DECRYPT, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_SIGN, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_VERIFY, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_WRAP, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_UNWRAP, true);
	} else if (cls == CKO_PUBLIC_KEY) {
		rv = dflt_bool(a, CKA_ENCRYPT, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_VERIFY, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_WRAP, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_VERIFY_RECOVER, false);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_TRUSTED, false);
		if (rv == CKR_OK) rv = dflt_empty(a, CKA_SUBJECT);
	} else {
		rv = dflt_bool(a, CKA_DECRYPT, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_SIGN, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_UNWRAP, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_SIGN_RECOVER, false);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_ALWAYS_AUTHENTICATE, false);
		if (rv == CKR_OK) rv = dflt_empty(a, CKA_SUBJECT);
	}
	if (rv == CKR_OK && secretish) {
		bool sens, extr;
		rv = dflt_bool(a, CKA_SENSITIVE, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_EXTRACTABLE, true);
		if (rv == CKR_OK) rv = dflt_bool(a, CKA_WRAP_WITH_TRUSTED, false);
		sens = tok_attrs_bool(a, CKA_SENSITIVE, true);
		extr = tok_attrs_bool(a, CKA_EXTRACTABLE, true);
		if (rv == CKR_OK) rv = tok_attrs_set_bool(a, CKA_ALWAYS_SENSITIVE, local && sens);
		if (rv == CKR_OK) rv = tok_attrs_set_bool(a, CKA_NEVER_EXTRACTABLE, local && !extr);
		if (rv == CKR_OK && cls == CKO_SECRET_KEY) {
			rv = dflt_bool(a, CKA_TRUSTED, false);
		}
	}
	return rv;
}

/* ---- helpers shared by the calls ----------------------------------------------- */

static CK_RV persist_new(struct tok_token *t, struct tok_object *o)
{
	CK_RV rv;

	if (!o->token_obj)
		return CKR_OK;
	pthread_mutex_lock(&t->mu);
	rv = tok_store_lock(t);
	if (rv == CKR_OK) {
		rv = tok_store_save_object(t, o);
		tok_store_unlock(t);
	}
	pthread_mutex_unlock(&t->mu);
	return rv;
}

CK_RV tok_obj_add(struct tok_session *s, struct tok_attrs *attrs, struct tok_object **ret)
{
	struct tok_token *t = s->tok;
	struct tok_object *o = NULL;
	CK_RV rv = tok_obj_publish(t, attrs, s->handle, &o);

	if (rv != CKR_OK)
		return rv;
	rv = persist_new(t, o);
	if (rv != CKR_OK) {
		tok_obj_unpublish(t, o);
		tok_obj_put(o);
		return rv;
	}
	*ret = o;
	return CKR_OK;
}

void tok_obj_discard(struct tok_token *t, struct tok_object *o)
{
	if (!o)
		return;
	if (o->token_obj) {
		pthread_mutex_lock(&t->mu);
		if (tok_store_lock(t) == CKR_OK) {
			(void)tok_store_delete_object(t, o);
			tok_store_unlock(t);
		}
		pthread_mutex_unlock(&t->mu);
	}
	tok_obj_unpublish(t, o);
	tok_obj_put(o);
}

CK_RV tok_obj_create(struct tok_session *s, struct tok_attrs *attrs, struct tok_audit *a,
		     CK_OBJECT_HANDLE *ret_h, struct tok_object **ret_o)
{
	struct tok_object *o = NULL;
	CK_RV rv, arv;

	rv = tok_obj_add(s, attrs, &o);
	a->rv = rv;
	arv = tok_audit_obj(a, o);
	if (rv == CKR_OK && arv != CKR_OK) {
		tok_obj_discard(s->tok, o); /* not audited: the object never existed */
		return arv;
	}
	if (rv == CKR_OK) {
		*ret_h = o->handle;
		if (ret_o) {
			*ret_o = o;
			o = NULL;
		}
	}
	tok_obj_put(o);
	return rv;
}

/* ---- C_CreateObject / C_CopyObject / C_DestroyObject ---------------------------- */

CK_RV C_CreateObject(CK_SESSION_HANDLE h, CK_ATTRIBUTE_PTR pTemplate, CK_ULONG ulCount,
		     CK_OBJECT_HANDLE_PTR phObject)
{
	struct tok_session *s;
	struct tok_attrs attrs = { 0 };
	struct tok_audit a = { .action = "C_CreateObject", .kind = TOK_AUD_SENSITIVE };
	CK_ULONG cls, kt = (CK_ULONG)-1;
	CK_RV rv = tok_session_enter(h, &s);

	if (rv != CKR_OK)
		return rv;
	a.s = s;
	if (!phObject) {
		rv = CKR_ARGUMENTS_BAD;
		goto out_put;
	}
	rv = tok_attrs_from_template(&attrs, pTemplate, ulCount);
	if (rv != CKR_OK)
		goto out;
	if (!tok_attrs_ulong(&attrs, CKA_CLASS, &cls)) {
		rv = CKR_TEMPLATE_INCOMPLETE;
		goto out;
	}
	if (cls == CKO_SECRET_KEY || cls == CKO_PUBLIC_KEY || cls == CKO_PRIVATE_KEY) {
		if (!tok_attrs_ulong(&attrs, CKA_KEY_TYPE, &kt)) {
			rv = CKR_TEMPLATE_INCOMPLETE;
			goto out;
		}
	} else if (cls != CKO_DATA && cls != CKO_CERTIFICATE) {
		rv = CKR_ATTRIBUTE_VALUE_INVALID;
		goto out;
	}
	if (cls == CKO_CERTIFICATE && !tok_attrs_get(&attrs, CKA_CERTIFICATE_TYPE)) {
		rv = CKR_TEMPLATE_INCOMPLETE;
		goto out;
	}
	rv = tok_obj_complete(s, &attrs, cls, kt, false);
	if (rv == CKR_OK && kt != (CK_ULONG)-1)
		rv = tok_key_check(cls, kt, &attrs);
	if (rv != CKR_OK)
		goto out;
	rv = tok_obj_create(s, &attrs, &a, phObject, NULL);
	goto out_free;
out:
	a.rv = rv;
	{
		const struct tok_attr *l = tok_attrs_get(&attrs, CKA_LABEL);
		if (l) {
			a.key_label = (const char *)l->value;
			a.key_label_len = l->len;
		}
		CK_RV arv = tok_audit_write(&a);
		if (arv != CKR_OK)
			rv = arv;
	}
out_free:
	tok_attrs_free(&attrs);
out_put:
	tok_session_put(s);
	return rv;
}

/* May the caller change attribute t (C_SetAttributeValue, C_CopyObject)? */
static CK_RV attr_settable(struct tok_object *o, CK_ATTRIBUTE_TYPE t, const struct tok_attr *nv,
			   bool copy)
{
	bool cur, want;

	if (!attr_allowed(o->cls, t))
		return CKR_ATTRIBUTE_TYPE_INVALID;
	if (IN(t, CKA_LABEL, CKA_ID, CKA_START_DATE, CKA_END_DATE, CKA_SUBJECT, CKA_APPLICATION,
	       CKA_OBJECT_ID, CKA_ENCRYPT, CKA_DECRYPT, CKA_SIGN, CKA_VERIFY, CKA_WRAP, CKA_UNWRAP,
	       CKA_DERIVE, CKA_SIGN_RECOVER, CKA_VERIFY_RECOVER))
		return CKR_OK;
	if (copy && IN(t, CKA_TOKEN, CKA_PRIVATE, CKA_MODIFIABLE, CKA_DESTROYABLE))
		return CKR_OK;
	if (t == CKA_COPYABLE || t == CKA_SENSITIVE || t == CKA_EXTRACTABLE) {
		if (nv->len != sizeof(CK_BBOOL))
			return CKR_ATTRIBUTE_VALUE_INVALID;
		cur = tok_attrs_bool(&o->attrs, t, t != CKA_SENSITIVE);
		want = nv->value[0] != CK_FALSE;
		/* One way only: COPYABLE and EXTRACTABLE may become false,
		 * SENSITIVE may become true. */
		if (t == CKA_SENSITIVE ? (cur && !want) : (!cur && want))
			return CKR_ATTRIBUTE_READ_ONLY;
		return CKR_OK;
	}
	return CKR_ATTRIBUTE_READ_ONLY;
}

CK_RV C_CopyObject(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE hObject, CK_ATTRIBUTE_PTR pTemplate,
		   CK_ULONG ulCount, CK_OBJECT_HANDLE_PTR phNewObject)
{
	struct tok_session *s;
	struct tok_object *o = NULL;
	struct tok_attrs tmpl = { 0 }, attrs = { 0 };
	struct tok_audit a = { .action = "C_CopyObject", .kind = TOK_AUD_SENSITIVE };
	CK_RV rv = tok_session_enter(h, &s);

	if (rv != CKR_OK)
		return rv;
	a.s = s;
	if (!phNewObject) {
		rv = CKR_ARGUMENTS_BAD;
		goto out_put;
	}
	rv = tok_obj_get(s, hObject, &o);
	if (rv == CKR_OK)
		rv = tok_attrs_from_template(&tmpl, pTemplate, ulCount);
	if (rv != CKR_OK)
		goto out;
	pthread_mutex_lock(&o->mu);
	if (!tok_attrs_bool(&o->attrs, CKA_COPYABLE, true))
		rv = CKR_ACTION_PROHIBITED;
	for (size_t i = 0; rv == CKR_OK && i < tmpl.n; i++)
		rv = attr_settable(o, tmpl.a[i].type, &tmpl.a[i], true);
	if (rv == CKR_OK)
		rv = tok_attrs_copy(&attrs, &o->attrs);
	pthread_mutex_unlock(&o->mu);
	if (rv == CKR_OK)
		rv = tok_attrs_copy(&attrs, &tmpl);
	if (rv == CKR_OK && tok_attrs_bool(&attrs, CKA_TOKEN, false) && !tok_session_rw(s))
		rv = CKR_SESSION_READ_ONLY;
	if (rv == CKR_OK && tok_attrs_bool(&attrs, CKA_PRIVATE, false) &&
	    tok_login_state(s->tok) != TOK_USER)
		rv = CKR_USER_NOT_LOGGED_IN;
	if (rv == CKR_OK && o->cls != CKO_PUBLIC_KEY && o->cls != CKO_DATA &&
	    o->cls != CKO_CERTIFICATE && tok_login_state(s->tok) == TOK_PUBLIC)
		rv = CKR_USER_NOT_LOGGED_IN;
	if (rv == CKR_OK) {
		rv = tok_obj_create(s, &attrs, &a, phNewObject, NULL);
		goto done;
	}
out:
	a.rv = rv;
	{
		CK_RV arv = tok_audit_obj(&a, o);
		if (arv != CKR_OK)
			rv = arv;
	}
done:
	tok_attrs_free(&attrs);
	tok_attrs_free(&tmpl);
	tok_obj_put(o);
out_put:
	tok_session_put(s);
	return rv;
}

/* A token object about to change: the token's mutex and the store's lock
 * taken (taking it brings the object up to date), and the object still
 * there. *mu_held and *locked say what to release, whatever the answer. */
static CK_RV lock_live(struct tok_token *t, struct tok_object *o, bool *mu_held, bool *locked)
{
	pthread_mutex_lock(&t->mu);
	*mu_held = true;
	CK_RV rv = tok_store_lock(t);
	*locked = rv == CKR_OK;
	if (rv == CKR_OK && atomic_load(&o->destroyed))
		rv = CKR_OBJECT_HANDLE_INVALID;
	return rv;
}

CK_RV C_DestroyObject(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE hObject)
{
	struct tok_session *s;
	struct tok_object *o = NULL;
	struct tok_token *t;
	struct tok_audit a = { .action = "C_DestroyObject", .kind = TOK_AUD_SENSITIVE };
	CK_RV rv = tok_session_enter(h, &s), arv;
	bool locked = false, mu_held = false;

	if (rv != CKR_OK)
		return rv;
	a.s = s;
	t = s->tok;
	rv = tok_obj_get(s, hObject, &o);
	if (rv == CKR_OK && o->token_obj && !tok_session_rw(s))
		rv = CKR_SESSION_READ_ONLY;
	if (rv == CKR_OK && o->token_obj) /* decided on the object as the store now has it */
		rv = lock_live(t, o, &mu_held, &locked);
	if (rv == CKR_OK) {
		pthread_mutex_lock(&o->mu);
		if (!tok_attrs_bool(&o->attrs, CKA_DESTROYABLE, true))
			rv = CKR_ACTION_PROHIBITED;
		pthread_mutex_unlock(&o->mu);
	}
	if (rv == CKR_OK && o->token_obj)
		rv = tok_store_delete_object(t, o);
	if (rv == CKR_OK)
		tok_obj_unpublish(t, o);
	if (locked)
		tok_store_unlock(t);
	if (mu_held)
		pthread_mutex_unlock(&t->mu);
	/* A deletion cannot be undone: when its record then fails, the call
	 * answers CKR_DEVICE_ERROR and the object is gone (docs/token.md). */
	a.rv = rv;
	arv = tok_audit_obj(&a, o);
	if (arv != CKR_OK)
		rv = arv;
	tok_obj_put(o);
	tok_session_put(s);
	return rv;
}

CK_RV C_GetObjectSize(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE hObject, CK_ULONG_PTR pulSize)
{
	struct tok_session *s;
	struct tok_object *o;
	CK_RV rv = tok_session_enter(h, &s);
	CK_ULONG n = 0;

	if (rv != CKR_OK)
		return rv;
	if (!pulSize) {
		rv = CKR_ARGUMENTS_BAD;
		goto out;
	}
	rv = tok_obj_get(s, hObject, &o);
	if (rv != CKR_OK)
		goto out;
	pthread_mutex_lock(&o->mu);
	for (size_t i = 0; i < o->attrs.n; i++)
		n += sizeof(CK_ATTRIBUTE_TYPE) + sizeof(CK_ULONG) + o->attrs.a[i].len;
	pthread_mutex_unlock(&o->mu);
	*pulSize = n;
	tok_obj_put(o);
out:
	tok_session_put(s);
	return rv;
}

static const char *secret_name(CK_ATTRIBUTE_TYPE t)
{
	switch (t) {
	case CKA_VALUE: return "CKA_VALUE";
	case CKA_PRIVATE_EXPONENT: return "CKA_PRIVATE_EXPONENT";
	case CKA_PRIME_1: return "CKA_PRIME_1";
	case CKA_PRIME_2: return "CKA_PRIME_2";
	case CKA_EXPONENT_1: return "CKA_EXPONENT_1";
	case CKA_EXPONENT_2: return "CKA_EXPONENT_2";
	case CKA_COEFFICIENT: return "CKA_COEFFICIENT";
	default: return "secret";
	}
}

/* ---- attributes ------------------------------------------------------------------ */

CK_RV C_GetAttributeValue(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE hObject, CK_ATTRIBUTE_PTR pTemplate,
			  CK_ULONG ulCount)
{
	struct tok_session *s;
	struct tok_object *o = NULL;
	CK_RV rv = tok_session_get(h, &s), res = CKR_OK;
	char detail[256] = "";
	size_t dlen = 0;
	bool secret_out = false;

	if (rv != CKR_OK)
		return rv;
	if (ulCount && !pTemplate) {
		rv = CKR_ARGUMENTS_BAD;
		goto out_put;
	}
	rv = tok_obj_get(s, hObject, &o);
	if (rv != CKR_OK)
		goto out_put;
	pthread_mutex_lock(&o->mu);
	{
		bool hidden = tok_attrs_bool(&o->attrs, CKA_SENSITIVE, false) ||
			      !tok_attrs_bool(&o->attrs, CKA_EXTRACTABLE, true);
		for (CK_ULONG i = 0; i < ulCount; i++) {
			CK_ATTRIBUTE *t = &pTemplate[i];
			const struct tok_attr *v;
			bool secret = tok_attr_is_secret(o->cls, t->type);

			if (secret && hidden) {
				t->ulValueLen = CK_UNAVAILABLE_INFORMATION;
				res = CKR_ATTRIBUTE_SENSITIVE;
				continue;
			}
			v = tok_attrs_get(&o->attrs, t->type);
			if (!v) {
				t->ulValueLen = CK_UNAVAILABLE_INFORMATION;
				if (res != CKR_ATTRIBUTE_SENSITIVE)
					res = CKR_ATTRIBUTE_TYPE_INVALID;
				continue;
			}
			if (!t->pValue) {
				t->ulValueLen = v->len;
				continue;
			}
			if (t->ulValueLen < v->len) {
				t->ulValueLen = CK_UNAVAILABLE_INFORMATION;
				if (res == CKR_OK)
					res = CKR_BUFFER_TOO_SMALL;
				continue;
			}
			if (v->len)
				memcpy(t->pValue, v->value, v->len);
			t->ulValueLen = v->len;
			if (secret) {
				secret_out = true;
				const char *nm = secret_name(t->type);
				if (dlen + strlen(nm) + 2 < sizeof(detail))
					dlen += (size_t)snprintf(detail + dlen, sizeof(detail) - dlen,
								 "%s%s", dlen ? "," : "", nm);
			}
		}
	}
	pthread_mutex_unlock(&o->mu);
	rv = res;
	if (secret_out) {
		/* A secret value leaves the token: recorded, durably, before the
		 * caller may use it; no record, no value. */
		struct tok_audit a = { .action = "C_GetAttributeValue", .kind = TOK_AUD_SENSITIVE,
				       .s = s, .rv = rv, .detail = detail,
				       .handed_out = true };
		CK_RV arv = tok_audit_gate();
		if (arv == CKR_OK)
			arv = tok_audit_obj(&a, o);
		if (arv != CKR_OK) {
			for (CK_ULONG i = 0; i < ulCount; i++)
				if (pTemplate[i].pValue && tok_attr_is_secret(o->cls, pTemplate[i].type) &&
				    pTemplate[i].ulValueLen != CK_UNAVAILABLE_INFORMATION) {
					OPENSSL_cleanse(pTemplate[i].pValue, pTemplate[i].ulValueLen);
					pTemplate[i].ulValueLen = CK_UNAVAILABLE_INFORMATION;
				}
			rv = arv;
		}
	}
	tok_obj_put(o);
out_put:
	tok_session_put(s);
	return rv;
}

CK_RV C_SetAttributeValue(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE hObject, CK_ATTRIBUTE_PTR pTemplate,
			  CK_ULONG ulCount)
{
	struct tok_session *s;
	struct tok_object *o = NULL;
	struct tok_token *t;
	struct tok_attrs tmpl = { 0 }, old = { 0 }, next = { 0 };
	struct tok_audit a = { .action = "C_SetAttributeValue", .kind = TOK_AUD_SENSITIVE };
	CK_RV rv = tok_session_get(h, &s), arv;
	bool swapped = false, locked = false, mu_held = false;

	if (rv != CKR_OK)
		return rv;
	a.s = s;
	t = s->tok;
	rv = tok_obj_get(s, hObject, &o);
	if (rv == CKR_OK)
		rv = tok_attrs_from_template(&tmpl, pTemplate, ulCount);
	if (rv == CKR_OK && o->token_obj && !tok_session_rw(s))
		rv = CKR_SESSION_READ_ONLY;
	/* The whole read-modify-write, and its record, under the store's lock,
	 * on the attributes the store has now: never from a stale copy (a
	 * one-way attribute another process set stays set). */
	if (rv == CKR_OK && o->token_obj)
		rv = lock_live(t, o, &mu_held, &locked);
	if (rv != CKR_OK)
		goto out;
	pthread_mutex_lock(&o->mu);
	if (!tok_attrs_bool(&o->attrs, CKA_MODIFIABLE, true))
		rv = CKR_ACTION_PROHIBITED;
	for (size_t i = 0; rv == CKR_OK && i < tmpl.n; i++)
		rv = attr_settable(o, tmpl.a[i].type, &tmpl.a[i], false);
	if (rv == CKR_OK)
		rv = tok_attrs_copy(&next, &o->attrs);
	if (rv == CKR_OK)
		rv = tok_attrs_copy(&next, &tmpl);
	if (rv == CKR_OK) {
		old = o->attrs;
		o->attrs = next;
		next = (struct tok_attrs){ 0 };
		swapped = true;
	}
	pthread_mutex_unlock(&o->mu);
	if (swapped && o->token_obj)
		rv = tok_store_save_object(t, o);
out:
	a.rv = rv;
	arv = tok_audit_obj(&a, o);
	if (swapped && (rv != CKR_OK || arv != CKR_OK)) {
		/* Not stored or not audited: the old attributes stay. */
		pthread_mutex_lock(&o->mu);
		next = o->attrs;
		o->attrs = old;
		old = (struct tok_attrs){ 0 };
		pthread_mutex_unlock(&o->mu);
		if (o->token_obj)
			(void)tok_store_save_object(t, o);
	}
	if (locked)
		tok_store_unlock(t);
	if (mu_held)
		pthread_mutex_unlock(&t->mu);
	if (arv != CKR_OK)
		rv = arv;
	tok_attrs_free(&old);
	tok_attrs_free(&next);
	tok_attrs_free(&tmpl);
	tok_obj_put(o);
	tok_session_put(s);
	return rv;
}

/* ---- find ----------------------------------------------------------------------- */

/* Compare without an early exit: every object costs the same whatever the
 * template and whether it is visible (timing reveals no private object). */
static bool matches(const struct tok_attrs *obj, const struct tok_attrs *tmpl)
{
	unsigned miss = 0;

	for (size_t i = 0; i < tmpl->n; i++) {
		const struct tok_attr *v = tok_attrs_get(obj, tmpl->a[i].type);
		CK_ULONG n = tmpl->a[i].len;
		if (!v) {
			miss |= 1;
			continue;
		}
		miss |= v->len != n;
		miss |= (unsigned)CRYPTO_memcmp(v->value ? v->value : (const uint8_t *)"",
						tmpl->a[i].value ? tmpl->a[i].value : (const uint8_t *)"",
						v->len < n ? v->len : n) != 0;
	}
	return miss == 0;
}

CK_RV C_FindObjectsInit(CK_SESSION_HANDLE h, CK_ATTRIBUTE_PTR pTemplate, CK_ULONG ulCount)
{
	struct tok_session *s;
	struct tok_token *t;
	struct tok_attrs tmpl = { 0 };
	CK_RV rv = tok_session_get(h, &s);

	if (rv != CKR_OK)
		return rv;
	t = s->tok;
	/* Objects other processes created or destroyed (one load when none). */
	rv = tok_store_sync(t);
	if (rv != CKR_OK) {
		tok_session_put(s);
		return rv;
	}
	pthread_mutex_lock(&s->mu);
	if (s->find_active) {
		rv = CKR_OPERATION_ACTIVE;
		goto out;
	}
	rv = tok_attrs_from_template(&tmpl, pTemplate, ulCount);
	if (rv != CKR_OK)
		goto out;
	pthread_rwlock_rdlock(&t->olock);
	free(s->found);
	s->found = malloc((t->nobjs ? t->nobjs : 1) * sizeof(*s->found));
	s->nfound = s->found_pos = 0;
	if (!s->found) {
		rv = CKR_HOST_MEMORY;
	} else {
		for (size_t i = 0; i < t->nobjs; i++) {
			struct tok_object *o = t->objs[i];
			bool m, vis;
			if (!o)
				continue;
			vis = visible(t, o);
			pthread_mutex_lock(&o->mu);
			m = matches(&o->attrs, &tmpl);
			pthread_mutex_unlock(&o->mu);
			s->found[s->nfound] = o->handle;
			s->nfound += (size_t)(m & vis);
		}
	}
	pthread_rwlock_unlock(&t->olock);
	if (rv == CKR_OK)
		s->find_active = true;
out:
	pthread_mutex_unlock(&s->mu);
	tok_attrs_free(&tmpl);
	tok_session_put(s);
	return rv;
}

CK_RV C_FindObjects(CK_SESSION_HANDLE h, CK_OBJECT_HANDLE_PTR ph, CK_ULONG max, CK_ULONG_PTR pulCount)
{
	struct tok_session *s;
	CK_RV rv = tok_session_get(h, &s);
	CK_ULONG n = 0;

	if (rv != CKR_OK)
		return rv;
	pthread_mutex_lock(&s->mu);
	if (!s->find_active)
		rv = CKR_OPERATION_NOT_INITIALIZED;
	else if (!pulCount || (max && !ph))
		rv = CKR_ARGUMENTS_BAD;
	else {
		while (n < max && s->found_pos < s->nfound)
			ph[n++] = s->found[s->found_pos++];
		*pulCount = n;
	}
	pthread_mutex_unlock(&s->mu);
	tok_session_put(s);
	return rv;
}

CK_RV C_FindObjectsFinal(CK_SESSION_HANDLE h)
{
	struct tok_session *s;
	char detail[48];
	CK_RV rv = tok_session_get(h, &s);

	if (rv != CKR_OK)
		return rv;
	pthread_mutex_lock(&s->mu);
	if (!s->find_active) {
		rv = CKR_OPERATION_NOT_INITIALIZED;
	} else {
		snprintf(detail, sizeof(detail), "matched=%zu", s->nfound);
		rv = tok_audit_gate();
		if (rv == CKR_OK)
			rv = tok_audit_write(&(struct tok_audit){ .action = "C_FindObjectsFinal",
								  .rv = CKR_OK, .kind = TOK_AUD_CRYPTO,
								  .s = s, .detail = detail });
		s->find_active = false;
		free(s->found);
		s->found = NULL;
		s->nfound = s->found_pos = 0;
	}
	pthread_mutex_unlock(&s->mu);
	tok_session_put(s);
	return rv;
}
