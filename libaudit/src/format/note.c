/* SPDX-License-Identifier: MIT */
/* C2SP signed notes, tlog checkpoints, Ed25519 (docs/format.md 20). */

#include <openssl/evp.h>
#include <openssl/crypto.h>

#include "note.h"
#include "format_v2.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

static const uint8_t EM_DASH_SP[4] = { 0xe2, 0x80, 0x94, 0x20 }; /* "— " */

int al_ed25519_public(const uint8_t seed[AL_ED25519_SEED_LEN], uint8_t pub[AL_ED25519_PUB_LEN])
{
	EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed,
						   AL_ED25519_SEED_LEN);
	size_t n = AL_ED25519_PUB_LEN;
	int r = -EIO;

	if (k && EVP_PKEY_get_raw_public_key(k, pub, &n) == 1 && n == AL_ED25519_PUB_LEN)
		r = 0;
	EVP_PKEY_free(k); /* frees (and cleanses) the private key */
	return r;
}

int al_ed25519_sign(const uint8_t seed[AL_ED25519_SEED_LEN], const uint8_t *m, size_t n,
		    uint8_t sig[AL_ED25519_SIG_LEN])
{
	EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed,
						   AL_ED25519_SEED_LEN);
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	size_t sl = AL_ED25519_SIG_LEN;
	int r = -EIO;

	if (k && c && EVP_DigestSignInit(c, NULL, NULL, NULL, k) == 1 &&
	    EVP_DigestSign(c, sig, &sl, m, n) == 1 && sl == AL_ED25519_SIG_LEN)
		r = 0;
	EVP_MD_CTX_free(c);
	EVP_PKEY_free(k);
	return r;
}

int al_ed25519_verify(const uint8_t pub[AL_ED25519_PUB_LEN], const uint8_t *m, size_t n,
		      const uint8_t sig[AL_ED25519_SIG_LEN])
{
	EVP_PKEY *k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, AL_ED25519_PUB_LEN);
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int r = -EBADMSG;

	if (!k || !c)
		r = -ENOMEM;
	else if (EVP_DigestVerifyInit(c, NULL, NULL, NULL, k) == 1 &&
		 EVP_DigestVerify(c, sig, AL_ED25519_SIG_LEN, m, n) == 1)
		r = 0;
	EVP_MD_CTX_free(c);
	EVP_PKEY_free(k);
	return r;
}

/* SHA-256(name || 0x0A || type || pub)[0:4] */
static int key_id(const uint8_t *name, size_t n, uint8_t type, const uint8_t pub[AL_ED25519_PUB_LEN],
		  uint8_t out[AL_NOTE_KID_LEN])
{
	uint8_t m[AL_NOTE_NAME_MAX + 2 + AL_ED25519_PUB_LEN], h[AL_HASH_LEN];

	if (!name || n == 0 || n > AL_NOTE_NAME_MAX)
		return -EINVAL;
	memcpy(m, name, n);
	m[n] = 0x0a;
	m[n + 1] = type;
	memcpy(m + n + 2, pub, AL_ED25519_PUB_LEN);
	al_sha256(m, n + 2 + AL_ED25519_PUB_LEN, h);
	memcpy(out, h, AL_NOTE_KID_LEN);
	return 0;
}

int al_note_key_id(const uint8_t *name, size_t n, const uint8_t pub[AL_ED25519_PUB_LEN],
		   uint8_t out[AL_NOTE_KID_LEN])
{
	return key_id(name, n, 0x01, pub, out); /* signature type: Ed25519 */
}

int al_cosig_key_id(const uint8_t *name, size_t n, const uint8_t pub[AL_ED25519_PUB_LEN],
		    uint8_t out[AL_NOTE_KID_LEN])
{
	return key_id(name, n, 0x04, pub, out); /* signature type: cosignature/v1 */
}

long al_checkpoint_origin(const uint8_t *host, size_t hlen, const uint8_t chain_id[32],
			  uint8_t *out)
{
	if (!host || hlen == 0 || hlen > 63)
		return -EINVAL;
	memcpy(out, host, hlen);
	memcpy(out + hlen, "/auditlog/", 10);
	memcpy(out + hlen + 10, chain_id, 32);
	return (long)(hlen + 42);
}

long al_checkpoint_text(const uint8_t *origin, size_t olen, uint64_t size,
			const uint8_t root[AL_HASH_LEN], uint64_t last_seq,
			const uint8_t head[AL_HASH_LEN], uint64_t first_seq, uint8_t *out,
			size_t cap)
{
	/* worst case: origin + 20 + 44 + "seq " 20 + "head " 64 + "first-seq " 20 + 6 \n */
	size_t need = olen + 20 + 44 + 4 + 20 + 5 + 64 + 10 + 20 + 6;
	uint8_t *o = out;

	if (size == 0 || olen == 0 || !origin)
		return -EINVAL;
	if (need > cap)
		return -E2BIG;
	memcpy(o, origin, olen);
	o += olen;
	*o++ = '\n';
	o = al_put_dec(o, size);
	*o++ = '\n';
	o += EVP_EncodeBlock(o, root, AL_HASH_LEN); /* 44 characters */
	*o++ = '\n';
	memcpy(o, "seq ", 4);
	o += 4;
	o = al_put_dec(o, last_seq);
	*o++ = '\n';
	memcpy(o, "head ", 5);
	o += 5;
	al_hex(head, AL_HASH_LEN, (char *)o);
	o += 64;
	*o++ = '\n';
	memcpy(o, "first-seq ", 10);
	o += 10;
	o = al_put_dec(o, first_seq);
	*o++ = '\n';
	return (long)(o - out);
}

long al_note_sign(const uint8_t seed[AL_ED25519_SEED_LEN], const uint8_t *pub, const uint8_t *name,
		  size_t nlen, const uint8_t *text, size_t tlen, uint8_t *out, size_t cap)
{
	uint8_t blob[AL_NOTE_KID_LEN + AL_ED25519_SIG_LEN];
	size_t need;
	int r;

	if (!tlen || text[tlen - 1] != '\n' || nlen == 0 || nlen > AL_NOTE_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < nlen; i++)
		if (name[i] <= 0x20 || name[i] == '+')
			return -EINVAL;
	need = tlen + 1 + sizeof(EM_DASH_SP) + nlen + 1 + 92 + 1;
	if (need > cap || need > (size_t)LONG_MAX)
		return -E2BIG;
	r = al_ed25519_sign(seed, text, tlen, blob + AL_NOTE_KID_LEN);
	if (r)
		return r;
	r = al_note_key_id(name, nlen, pub, blob);
	if (r)
		return r;
	memcpy(out, text, tlen);
	out[tlen] = '\n';
	memcpy(out + tlen + 1, EM_DASH_SP, sizeof(EM_DASH_SP));
	memcpy(out + tlen + 5, name, nlen);
	out[tlen + 5 + nlen] = ' ';
	(void)EVP_EncodeBlock(out + tlen + 6 + nlen, blob, sizeof(blob)); /* 92 characters */
	out[tlen + 6 + nlen + 92] = '\n';
	return (long)need;
}

/* Well-formed UTF-8 (RFC 3629: no overlong form, no surrogate, <= U+10FFFF). */
static bool utf8_ok(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t c = s[i];
		size_t need;
		uint8_t lo = 0x80, hi = 0xbf;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			need = 1;
		else if (c >= 0xe0 && c <= 0xef) {
			need = 2;
			if (c == 0xe0)
				lo = 0xa0;
			if (c == 0xed)
				hi = 0x9f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3;
			if (c == 0xf0)
				lo = 0x90;
			if (c == 0xf4)
				hi = 0x8f;
		} else
			return false;
		if (n - i - 1 < need)
			return false;
		for (size_t k = 1; k <= need; k++) {
			uint8_t d = s[i + k];
			if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xbf))
				return false;
		}
		i += need + 1;
	}
	return true;
}

static bool b64_char(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/' || c == '=';
}

/* Strict base64 of exactly len bytes (68: key id + Ed25519 signature; 76:
 * key id + time + signature), len not a multiple of 3 (one or two pads). */
static bool b64_decode(const uint8_t *s, size_t n, uint8_t *out, size_t len)
{
	uint8_t tmp[AL_COSIG_BLOB_LEN + 3], again[4 * (AL_COSIG_BLOB_LEN + 2) / 3 + 1];
	size_t want = 4 * ((len + 2) / 3);

	if (n != want || len > AL_COSIG_BLOB_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!b64_char(s[i]))
			return false;
	/* EVP_DecodeBlock counts the pad bytes */
	if (EVP_DecodeBlock(tmp, s, (int)n) != (int)(3 * (n / 4)))
		return false;
	/* canonical: re-encoding gives the same characters */
	if (EVP_EncodeBlock(again, tmp, (int)len) != (int)n || memcmp(again, s, n) != 0)
		return false;
	memcpy(out, tmp, len);
	return true;
}

/* A note's shape (no control character but newline, UTF-8, at most 64 KiB,
 * ends in '\n'): the offset just past its last blank line's first '\n' (the
 * text's length), or 0 when malformed. */
static size_t note_split(const uint8_t *note, size_t len)
{
	if (!note || len < 2 || note[len - 1] != '\n' || len > 64 * 1024)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (note[i] < 0x20 && note[i] != '\n')
			return 0; /* no control character but newline */
	if (!utf8_ok(note, len))
		return 0;
	for (size_t i = len - 1; i-- > 0;)
		if (note[i] == '\n' && note[i + 1] == '\n')
			return i + 1;
	return 0; /* no blank line, or an empty text */
}

/* The signature line at note + p: "— <name> <sig>\n"; false when it is not one. */
static bool sig_line(const uint8_t *note, size_t len, size_t p, const uint8_t **name, size_t *nl,
		     const uint8_t **sig, size_t *sl, size_t *ll)
{
	const uint8_t *l = note + p, *e = memchr(l, '\n', len - p), *sp;

	*ll = (size_t)(e - l);
	if (*ll < sizeof(EM_DASH_SP) + 2 || memcmp(l, EM_DASH_SP, sizeof(EM_DASH_SP)) != 0)
		return false;
	sp = memchr(l + 4, ' ', *ll - 4);
	if (!sp || sp == l + 4)
		return false;
	*name = l + 4;
	*nl = (size_t)(sp - (l + 4));
	for (size_t i = 0; i < *nl; i++)
		if ((*name)[i] == '+')
			return false;
	*sig = sp + 1;
	*sl = (size_t)(e - sp - 1);
	return true;
}

int al_note_verify(const uint8_t pub[AL_ED25519_PUB_LEN], const uint8_t *name, size_t nlen,
		   const uint8_t *note, size_t len, size_t *ret_text_len)
{
	uint8_t kid[AL_NOTE_KID_LEN], blob[68];
	size_t split = note_split(note, len), p, tlen;
	bool found = false, bad = false;
	unsigned nsig = 0;

	if (split == 0 || !name || nlen == 0 || nlen > AL_NOTE_NAME_MAX)
		return -EBADMSG;
	tlen = split;
	(void)al_note_key_id(name, nlen, pub, kid); /* nlen checked above */
	for (p = split + 1; p < len; nsig++) {
		const uint8_t *ln, *sig;
		size_t nl, sl, ll;

		if (nsig >= 100 || !sig_line(note, len, p, &ln, &nl, &sig, &sl, &ll))
			return -EBADMSG;
		if (nl == nlen && memcmp(ln, name, nlen) == 0 && b64_decode(sig, sl, blob, sizeof(blob)) &&
		    memcmp(blob, kid, AL_NOTE_KID_LEN) == 0) {
			if (al_ed25519_verify(pub, note, tlen, blob + AL_NOTE_KID_LEN) == 0)
				found = true;
			else
				bad = true;
		}
		p += ll + 1;
	}
	if (nsig == 0 || bad)
		return -EBADMSG;
	if (!found)
		return -ENOKEY;
	if (ret_text_len)
		*ret_text_len = tlen;
	return 0;
}

/* "cosignature/v1\ntime <t>\n" || text: the message a cosignature signs */
static uint8_t *cosig_message(uint64_t t, const uint8_t *text, size_t tlen, size_t *ret_len)
{
	char head[48];
	int hl = snprintf(head, sizeof(head), "cosignature/v1\ntime %" PRIu64 "\n", t);
	uint8_t *m = malloc((size_t)hl + tlen);

	if (!m)
		return NULL;
	memcpy(m, head, (size_t)hl);
	memcpy(m + hl, text, tlen);
	*ret_len = (size_t)hl + tlen;
	return m;
}

long al_cosig_line(const uint8_t seed[AL_ED25519_SEED_LEN], const uint8_t *name, size_t nlen, uint64_t t,
		   const uint8_t *text, size_t tlen, uint8_t *out, size_t cap)
{
	uint8_t pub[AL_ED25519_PUB_LEN], blob[AL_COSIG_BLOB_LEN], *m;
	size_t need = sizeof(EM_DASH_SP) + nlen + 1 + AL_COSIG_B64_LEN + 1, ml = 0;
	int r;

	if (!tlen || text[tlen - 1] != '\n' || nlen == 0 || nlen > AL_NOTE_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < nlen; i++)
		if (name[i] <= 0x20 || name[i] == '+')
			return -EINVAL;
	if (need > cap)
		return -E2BIG;
	if ((r = al_ed25519_public(seed, pub)) < 0 || (r = al_cosig_key_id(name, nlen, pub, blob)) < 0)
		return r;
	for (int i = 0; i < 8; i++)
		blob[AL_NOTE_KID_LEN + i] = (uint8_t)(t >> (56 - 8 * i)); /* big-endian */
	if (!(m = cosig_message(t, text, tlen, &ml)))
		return -ENOMEM;
	r = al_ed25519_sign(seed, m, ml, blob + AL_NOTE_KID_LEN + 8);
	free(m);
	if (r < 0)
		return r;
	memcpy(out, EM_DASH_SP, sizeof(EM_DASH_SP));
	memcpy(out + 4, name, nlen);
	out[4 + nlen] = ' ';
	(void)EVP_EncodeBlock(out + 5 + nlen, blob, sizeof(blob)); /* 104 characters and a NUL */
	out[5 + nlen + AL_COSIG_B64_LEN] = '\n';
	return (long)need;
}

int al_cosig_verify(const uint8_t pub[AL_ED25519_PUB_LEN], const uint8_t *name, size_t nlen,
		    const uint8_t *note, size_t len, uint64_t *ret_time)
{
	uint8_t kid[AL_NOTE_KID_LEN], blob[AL_COSIG_BLOB_LEN];
	size_t split = note_split(note, len), p;
	bool found = false, bad = false;
	uint64_t when = 0;
	unsigned nsig = 0;

	if (split == 0 || !name || nlen == 0 || nlen > AL_NOTE_NAME_MAX)
		return -EBADMSG;
	(void)al_cosig_key_id(name, nlen, pub, kid); /* nlen checked above */
	for (p = split + 1; p < len; nsig++) {
		const uint8_t *ln, *sig;
		size_t nl, sl, ll, ml = 0;

		if (nsig >= 100 || !sig_line(note, len, p, &ln, &nl, &sig, &sl, &ll))
			return -EBADMSG;
		p += ll + 1;
		if (nl != nlen || memcmp(ln, name, nlen) != 0 || !b64_decode(sig, sl, blob, sizeof(blob)) ||
		    memcmp(blob, kid, AL_NOTE_KID_LEN) != 0)
			continue;
		uint64_t t = 0;
		for (int i = 0; i < 8; i++)
			t = t << 8 | blob[AL_NOTE_KID_LEN + i];
		uint8_t *m = cosig_message(t, note, split, &ml);
		if (!m)
			return -ENOMEM;
		if (al_ed25519_verify(pub, m, ml, blob + AL_NOTE_KID_LEN + 8) == 0) {
			if (!found || t > when)
				when = t;
			found = true;
		} else {
			bad = true;
		}
		free(m);
	}
	if (nsig == 0 || bad)
		return -EBADMSG;
	if (!found)
		return -ENOKEY;
	if (ret_time)
		*ret_time = when;
	return 0;
}
