/* SPDX-License-Identifier: MIT */
/* Format v2 records: body, caller fields, chain step (docs/format.md 12-15). */

/* The low-level SHA-256 functions, as in chain.c (why: see there). */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/opensslconf.h>
#include <openssl/sha.h>
#include <openssl/evp.h>

#include "format_v2.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

void al_sha256(const void *p, size_t n, uint8_t out[AL_HASH_LEN])
{
#ifndef OPENSSL_NO_DEPRECATED_3_0
	SHA256_CTX c;

	SHA256_Init(&c);
	SHA256_Update(&c, p, n);
	SHA256_Final(out, &c);
#else
	unsigned int len = 0;
	(void)EVP_Digest(p, n, out, &len, EVP_sha256(), NULL);
#endif
}

/* Every member key docs/format.md defines, any type and version (14.1). */
static const char *const reserved[] = {
	"seq", "v", "type", "hash", "action", "outcome", "rv", "slot", "session", "mechanism",
	"key_label", "key_id", "actor", "detail", "file_id", "chain_id", "reason", "prev_name",
	"prev_seq", "prev_hash", "prev_size", "pad", "last_seq", "damage_offset",
	"damage_length", "damage_sha256", "kind", "epoch", "seal_key", "prev_seal",
	"prev_kind", "mac", "size", "first_seq", "range", "note", "expected", "wall",
};

bool al_v2_caller_key_ok(const uint8_t *key, size_t n)
{
	size_t i = 0, parts = 0;

	if (!key || n == 0 || n > AL_CALLER_KEY_MAX)
		return false;
	/* [a-z][a-z0-9_]{0,31} (\.[a-z][a-z0-9_]{0,31}){0,3} */
	for (;;) {
		size_t start = i;
		if (i >= n || key[i] < 'a' || key[i] > 'z')
			return false;
		i++;
		while (i < n && ((key[i] >= 'a' && key[i] <= 'z') ||
				 (key[i] >= '0' && key[i] <= '9') || key[i] == '_'))
			i++;
		if (i - start > 32 || ++parts > 4)
			return false;
		if (i == n)
			break;
		if (key[i] != '.')
			return false;
		i++;
	}
	for (size_t r = 0; r < sizeof(reserved) / sizeof(reserved[0]); r++)
		if (strlen(reserved[r]) == n && memcmp(reserved[r], key, n) == 0)
			return false;
	return true;
}

/* memcmp order, a prefix first */
static int key_cmp(const struct al_v2_field *a, const struct al_v2_field *b)
{
	size_t m = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c = memcmp(a->key, b->key, m);

	if (c)
		return c;
	return a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
}

void al_v2_caller_sort(struct al_v2_field *f, size_t n)
{
	/* insertion sort: at most a few dozen fields */
	for (size_t i = 1; i < n; i++) {
		struct al_v2_field x = f[i];
		size_t j = i;
		while (j > 0 && key_cmp(&f[j - 1], &x) > 0) {
			f[j] = f[j - 1];
			j--;
		}
		f[j] = x;
	}
}

/* Escaped length of decoded (valid UTF-8) bytes, docs/format.md 3 step 2. */
static size_t esc_len(const uint8_t *s, size_t n)
{
	size_t e = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' ||
		    c == '\f')
			e += 2;
		else if (c < 0x20)
			e += 6;
		else
			e += 1;
	}
	return e;
}

static size_t dec_len(uint64_t v)
{
	size_t d = 1;

	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

size_t al_v2_caller_json_len(const struct al_v2_field *f, size_t n)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++)
		total += 2 + f[i].key_len + 2 + (f[i].is_int ? dec_len(f[i].u) : 2 + esc_len(f[i].p, f[i].n));
	return total;
}

int al_v2_caller_check(const struct al_v2_field *f, size_t n)
{
	if (n > AL_CALLER_MAX || (n && !f))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!al_v2_caller_key_ok(f[i].key, f[i].key_len))
			return -EINVAL;
		if (i && key_cmp(&f[i - 1], &f[i]) >= 0)
			return -EINVAL; /* unsorted or duplicate */
		if (f[i].is_int ? f[i].u > AL_INT_MAX
				: (f[i].n == 0 || esc_len(f[i].p, f[i].n) > AL_CALLER_STR_CAP))
			return -EINVAL;
	}
	return al_v2_caller_json_len(f, n) > AL_CALLER_JSON_MAX ? -E2BIG : 0;
}

static uint8_t *le32(uint8_t *o, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		*o++ = (uint8_t)(v >> (8 * i));
	return o;
}

static uint8_t *le64(uint8_t *o, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		*o++ = (uint8_t)(v >> (8 * i));
	return o;
}

long al_v2_body(uint8_t type, const struct al_v2_member *m, size_t nm, const struct al_v2_field *f,
		size_t nf, uint8_t *out, size_t cap)
{
	size_t need = 2;
	uint8_t *o = out;

	for (size_t i = 0; i < nm; i++) {
		if (!m[i].is_int && m[i].n > UINT32_MAX)
			return -E2BIG;
		need += 1 + (m[i].is_int ? 8 : 4 + m[i].n);
	}
	for (size_t i = 0; i < nf; i++) {
		if (f[i].key_len > AL_CALLER_KEY_MAX || (!f[i].is_int && f[i].n > UINT32_MAX))
			return -E2BIG;
		need += 2 + f[i].key_len + (f[i].is_int ? 8 : 4 + f[i].n);
	}
	if (need > cap || need > (size_t)LONG_MAX)
		return -E2BIG;
	*o++ = AL_V2;
	*o++ = type;
	for (size_t i = 0; i < nm; i++) {
		*o++ = m[i].tag;
		if (m[i].is_int) {
			o = le64(o, m[i].u);
		} else {
			o = le32(o, (uint32_t)m[i].n);
			if (m[i].n)
				memcpy(o, m[i].p, m[i].n);
			o += m[i].n;
		}
	}
	for (size_t i = 0; i < nf; i++) {
		*o++ = f[i].is_int ? AL_TAG_CALLER_INT : AL_TAG_CALLER_STR;
		*o++ = (uint8_t)f[i].key_len;
		memcpy(o, f[i].key, f[i].key_len);
		o += f[i].key_len;
		if (f[i].is_int) {
			o = le64(o, f[i].u);
		} else {
			o = le32(o, (uint32_t)f[i].n);
			if (f[i].n)
				memcpy(o, f[i].p, f[i].n);
			o += f[i].n;
		}
	}
	return (long)(o - out);
}

void al_v2_leaf_input(const uint8_t prev[AL_HASH_LEN], uint64_t seq, const char ts[AL_TS_LEN],
		      const uint8_t digest[AL_HASH_LEN], uint8_t out[AL_V2_LEAF_INPUT_LEN])
{
	memcpy(out, prev, AL_HASH_LEN);
	le64(out + 32, seq);
	memcpy(out + 40, ts, AL_TS_LEN);
	memcpy(out + 70, digest, AL_HASH_LEN);
}

void al_v2_chain_step(const uint8_t prev[AL_HASH_LEN], uint64_t seq, const char ts[AL_TS_LEN],
		      const uint8_t digest[AL_HASH_LEN], uint8_t out[AL_HASH_LEN])
{
	/* 0x00 || E_n: 103 bytes, padded to exactly two 64-byte blocks */
	uint8_t m[1 + AL_V2_LEAF_INPUT_LEN];

	m[0] = 0x00;
	al_v2_leaf_input(prev, seq, ts, digest, m + 1);
	al_sha256(m, sizeof(m), out);
}
