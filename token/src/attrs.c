/* SPDX-License-Identifier: MIT */
/* Attribute sets: an object is its attributes (token.h). */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "token.h"

static bool attr_inline(CK_ULONG len)
{
	return len && len <= TOK_ATTR_INLINE;
}

static void attr_clear(struct tok_attr *a)
{
	if (a->value) {
		OPENSSL_cleanse(a->value, a->len);
		if (a->value != a->inl)
			free(a->value);
	}
	a->value = NULL;
	a->len = 0;
}

/* An entry moved to e (a grown array, a deleted entry's place) points at
 * its own inline value again. */
static void attr_moved(struct tok_attr *e)
{
	if (attr_inline(e->len))
		e->value = e->inl;
}

static void type_bit(CK_ATTRIBUTE_TYPE t, unsigned *w, uint64_t *bit)
{
	uint32_t h = (uint32_t)t * 0x9e3779b1u ^ (uint32_t)((uint64_t)t >> 32);

	*w = h >> 31;
	*bit = (uint64_t)1 << (h >> 25 & 63);
}

static bool maybe_has(const struct tok_attrs *s, CK_ATTRIBUTE_TYPE t)
{
	unsigned w;
	uint64_t bit;

	type_bit(t, &w, &bit);
	return s->seen[w] & bit;
}

void tok_attrs_free(struct tok_attrs *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		attr_clear(&s->a[i]);
	free(s->a);
	s->a = NULL;
	s->n = s->cap = 0;
	s->seen[0] = s->seen[1] = 0;
}

const struct tok_attr *tok_attrs_get(const struct tok_attrs *s, CK_ATTRIBUTE_TYPE t)
{
	if (!maybe_has(s, t))
		return NULL;
	for (size_t i = 0; i < s->n; i++)
		if (s->a[i].type == t)
			return &s->a[i];
	return NULL;
}

/* Room for one more entry. Not realloc: the old array holds inline values
 * (a short secret among them, perhaps), and is cleansed before it is freed. */
static CK_RV attrs_grow(struct tok_attrs *s)
{
	size_t cap = s->cap ? s->cap * 2 : 16;
	struct tok_attr *a;

	if (s->n < s->cap)
		return CKR_OK;
	if (!(a = malloc(cap * sizeof(*a))))
		return CKR_HOST_MEMORY;
	if (s->n) {
		memcpy(a, s->a, s->n * sizeof(*a));
		for (size_t i = 0; i < s->n; i++)
			attr_moved(&a[i]);
		OPENSSL_cleanse(s->a, s->n * sizeof(*a));
	}
	free(s->a);
	s->a = a;
	s->cap = cap;
	return CKR_OK;
}

/* The entry of type t, emptied (its old value cleansed), or a new one; NULL
 * when the set cannot grow. */
static struct tok_attr *entry_for(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t)
{
	struct tok_attr *e = (struct tok_attr *)tok_attrs_get(s, t);
	unsigned w;
	uint64_t bit;

	if (e) {
		attr_clear(e);
		return e;
	}
	if (attrs_grow(s) != CKR_OK)
		return NULL;
	e = &s->a[s->n++];
	e->type = t;
	e->value = NULL;
	e->len = 0;
	type_bit(t, &w, &bit);
	s->seen[w] |= bit;
	return e;
}

/* Give e the value: heap (len > TOK_ATTR_INLINE, taken over) or copied
 * inline from small (cleansed after). */
static void entry_fill(struct tok_attr *e, uint8_t *heap, uint8_t *small, CK_ULONG len)
{
	e->len = len;
	if (heap) {
		e->value = heap;
	} else if (len) {
		memcpy(e->inl, small, len);
		e->value = e->inl;
		OPENSSL_cleanse(small, len);
	} else {
		e->value = NULL;
	}
}

CK_RV tok_attrs_set(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, const void *value, CK_ULONG len)
{
	struct tok_attr *e;
	uint8_t small[TOK_ATTR_INLINE];
	uint8_t *copy = NULL;

	/* The value is copied before the set changes: it may be one of the
	 * set's own. */
	if (attr_inline(len)) {
		memcpy(small, value, len);
	} else if (len) {
		if (!(copy = malloc(len)))
			return CKR_HOST_MEMORY;
		memcpy(copy, value, len);
	}
	if (!(e = entry_for(s, t))) {
		if (copy)
			OPENSSL_cleanse(copy, len);
		free(copy);
		OPENSSL_cleanse(small, sizeof(small));
		return CKR_HOST_MEMORY;
	}
	entry_fill(e, copy, small, len);
	return CKR_OK;
}

CK_RV tok_attrs_take(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, uint8_t *value, CK_ULONG len)
{
	struct tok_attr *e;
	uint8_t small[TOK_ATTR_INLINE];

	if (len <= TOK_ATTR_INLINE) { /* inline, as tok_attrs_set keeps it */
		if (len)
			memcpy(small, value, len);
		OPENSSL_cleanse(value, len);
		free(value);
		value = NULL;
	}
	if (!(e = entry_for(s, t))) {
		OPENSSL_cleanse(value ? value : small, len);
		free(value);
		return CKR_HOST_MEMORY;
	}
	entry_fill(e, value, small, len);
	return CKR_OK;
}

CK_RV tok_attrs_move(struct tok_attrs *dst, struct tok_attrs *src)
{
	CK_RV rv = CKR_OK;
	size_t i;

	for (i = 0; i < src->n && rv == CKR_OK; i++) {
		struct tok_attr *a = &src->a[i], *e = entry_for(dst, a->type);

		if (!e) {
			rv = CKR_HOST_MEMORY;
			break;
		}
		entry_fill(e, attr_inline(a->len) ? NULL : a->value, a->inl, a->len);
		a->value = NULL; /* handed over, or its inline bytes cleansed */
		a->len = 0;
	}
	tok_attrs_free(src);
	return rv;
}

CK_RV tok_attrs_set_ulong(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, CK_ULONG v)
{
	return tok_attrs_set(s, t, &v, sizeof(v));
}

CK_RV tok_attrs_set_bool(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, bool v)
{
	CK_BBOOL b = v ? CK_TRUE : CK_FALSE;

	return tok_attrs_set(s, t, &b, sizeof(b));
}

void tok_attrs_del(struct tok_attrs *s, CK_ATTRIBUTE_TYPE t)
{
	for (size_t i = 0; i < s->n; i++) {
		if (s->a[i].type == t) {
			attr_clear(&s->a[i]);
			s->a[i] = s->a[--s->n];
			attr_moved(&s->a[i]);
			OPENSSL_cleanse(&s->a[s->n], sizeof(s->a[s->n]));
			return;
		}
	}
}

bool tok_attrs_ulong(const struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, CK_ULONG *ret)
{
	const struct tok_attr *a = tok_attrs_get(s, t);

	if (!a || a->len != sizeof(CK_ULONG))
		return false;
	memcpy(ret, a->value, sizeof(CK_ULONG));
	return true;
}

bool tok_attrs_bool(const struct tok_attrs *s, CK_ATTRIBUTE_TYPE t, bool dflt)
{
	const struct tok_attr *a = tok_attrs_get(s, t);

	if (!a || a->len != sizeof(CK_BBOOL))
		return dflt;
	return a->value[0] != CK_FALSE;
}

/* Attributes whose value is a CK_ULONG or a CK_BBOOL: a template giving them
 * another length is refused at the door, so the rest of the module can read
 * them with tok_attrs_ulong/bool without a second check. */
static CK_ULONG typed_len(CK_ATTRIBUTE_TYPE t)
{
	switch (t) {
	case CKA_CLASS: case CKA_KEY_TYPE: case CKA_CERTIFICATE_TYPE:
	case CKA_VALUE_LEN: case CKA_MODULUS_BITS: case CKA_KEY_GEN_MECHANISM:
		return sizeof(CK_ULONG);
	case CKA_TOKEN: case CKA_PRIVATE: case CKA_MODIFIABLE: case CKA_COPYABLE:
	case CKA_DESTROYABLE: case CKA_SENSITIVE: case CKA_EXTRACTABLE:
	case CKA_ALWAYS_SENSITIVE: case CKA_NEVER_EXTRACTABLE: case CKA_LOCAL:
	case CKA_ENCRYPT: case CKA_DECRYPT: case CKA_SIGN: case CKA_VERIFY:
	case CKA_SIGN_RECOVER: case CKA_VERIFY_RECOVER: case CKA_WRAP: case CKA_UNWRAP:
	case CKA_DERIVE: case CKA_TRUSTED: case CKA_WRAP_WITH_TRUSTED:
	case CKA_ALWAYS_AUTHENTICATE:
		return sizeof(CK_BBOOL);
	default:
		return 0;
	}
}

CK_RV tok_attrs_from_template(struct tok_attrs *s, const CK_ATTRIBUTE *t, CK_ULONG n)
{
	if (n && !t)
		return CKR_ARGUMENTS_BAD;
	for (CK_ULONG i = 0; i < n; i++) {
		CK_ULONG want = typed_len(t[i].type);
		CK_RV rv;

		if (t[i].ulValueLen && !t[i].pValue)
			return CKR_ARGUMENTS_BAD;
		if (want && t[i].ulValueLen != want)
			return CKR_ATTRIBUTE_VALUE_INVALID;
		if (tok_attrs_get(s, t[i].type))
			return CKR_TEMPLATE_INCONSISTENT;
		rv = tok_attrs_set(s, t[i].type, t[i].pValue, t[i].ulValueLen);
		if (rv != CKR_OK)
			return rv;
	}
	return CKR_OK;
}

CK_RV tok_attrs_copy(struct tok_attrs *dst, const struct tok_attrs *src)
{
	for (size_t i = 0; i < src->n; i++) {
		CK_RV rv = tok_attrs_set(dst, src->a[i].type, src->a[i].value, src->a[i].len);
		if (rv != CKR_OK)
			return rv;
	}
	return CKR_OK;
}
