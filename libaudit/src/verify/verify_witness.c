/* SPDX-License-Identifier: MIT */
/*
 * Witness files (docs/format.md 20.5): checkpoints kept outside the log (by a
 * SIEM, a witness), as C2SP signed notes concatenated. Each note's text is a
 * tlog checkpoint whose origin names a chain: <host id>/auditlog/<chain id>,
 * its size and its root are what the walk compares (verify.c). The
 * signatures are checked there, with a public key of the origin's host.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "verify.h"

static const char EM_DASH_SP[] = "\xe2\x80\x94 "; /* "— " */

/* One line [p, end): its length (without '\n'), or -1 without a '\n'. */
static long line_len(const uint8_t *p, const uint8_t *end)
{
	const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
	return nl ? (long)(nl - p) : -1;
}

static bool decimal(const uint8_t *s, size_t n, uint64_t *ret)
{
	uint64_t v = 0;
	if (n == 0 || n > 16 || (s[0] == '0' && n > 1))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*ret = v;
	return true;
}

/* The 44 characters of a base64 SHA-256 (canonical: re-encoding gives them). */
static bool root_b64(const uint8_t *s, size_t n, uint8_t out[AL_HASH_LEN])
{
	uint8_t tmp[36], again[48];
	if (n != 44 || s[43] != '=' || s[42] == '=')
		return false;
	for (size_t i = 0; i < 43; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '+' || s[i] == '/'))
			return false;
	if (EVP_DecodeBlock(tmp, s, 44) != 33 || EVP_EncodeBlock(again, tmp, 32) != 44 || memcmp(again, s, 44) != 0)
		return false;
	memcpy(out, tmp, AL_HASH_LEN);
	return true;
}

/* The origin <host>/auditlog/<32 hex> into the note's fields. */
static bool origin(const uint8_t *s, size_t n, struct al_vwnote *w)
{
	static const char mid[] = "/auditlog/";
	const size_t ml = sizeof(mid) - 1;
	if (n < 1 + ml + 32 || n > AL_ORIGIN_MAX)
		return false;
	size_t hl = n - ml - 32;
	if (memcmp(s + hl, mid, ml) != 0 || !al_seal_host_ok(s, hl))
		return false;
	for (size_t i = n - 32; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	memcpy(w->origin, s, n);
	w->olen = n;
	memcpy(w->host, s, hl);
	w->host_len = hl;
	memcpy(w->chain_id, s + n - 32, 32);
	w->chain_id[32] = 0;
	return true;
}

int al_witness_parse(const uint8_t *buf, size_t n, const char *src, struct al_vwnote **list, unsigned *count)
{
	const uint8_t *p = buf, *end = buf + n;
	unsigned k = 0, had = *count;
	int r = 0;

	if (n == 0)
		return -EINVAL;
	while (p < end) {
		struct al_vwnote w = {.src = src, .index = ++k};
		const uint8_t *start = p;
		long l;
		/* the text: origin, size, root, extension lines; a blank line */
		for (unsigned i = 0;; i++) {
			l = line_len(p, end);
			if (l < 0 || (l == 0 && i < 3) || i > 64) {
				r = -EINVAL;
				goto fail;
			}
			if (l == 0)
				break;
			if ((i == 0 && !origin(p, (size_t)l, &w)) || (i == 1 && !decimal(p, (size_t)l, &w.size)) ||
			    (i == 1 && w.size == 0) || (i == 2 && !root_b64(p, (size_t)l, w.root))) {
				r = -EINVAL;
				goto fail;
			}
			p += l + 1;
		}
		p++; /* the blank line */
		/* one signature line or more: "— <name> <base64>" */
		unsigned sigs = 0;
		while (p < end && (size_t)(end - p) >= 4 && memcmp(p, EM_DASH_SP, 4) == 0) {
			l = line_len(p, end);
			if (l < 0) {
				r = -EINVAL;
				goto fail;
			}
			p += l + 1;
			sigs++;
		}
		if (!sigs) {
			r = -EINVAL;
			goto fail;
		}
		w.len = (size_t)(p - start);
		w.note = malloc(w.len);
		struct al_vwnote *nl = realloc(*list, (*count + 1) * sizeof(**list));
		if (!w.note || !nl) {
			free(w.note);
			if (nl)
				*list = nl;
			r = -ENOMEM;
			goto fail;
		}
		memcpy(w.note, start, w.len);
		*list = nl;
		(*list)[(*count)++] = w;
	}
	return 0;
fail:
	/* nothing of this file stays */
	for (unsigned i = had; i < *count; i++)
		free((*list)[i].note);
	*count = had;
	return r;
}

void al_witness_free(struct al_vwnote *list, unsigned count)
{
	for (unsigned i = 0; list && i < count; i++)
		free(list[i].note);
	free(list);
}
