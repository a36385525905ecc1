/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the format layer (docs/format.md):
 *  1. any bytes given to the strict parser: it never crashes; when it accepts a
 *     line, re-emitting the parsed record reproduces the line byte for byte up
 *     to the hash, and the emitter's hash equals al_check_hash's;
 *     (v2 too: every record type); for a non-header of any version, the
 *     writer's split, al_emit_members then al_emit_framed (v2, with
 *     al_v2_record_digest's D_n) or al_emit_framed_v01, gives the same line;
 *  2. the same bytes cut into fields (any bytes, any length), as a v0, v1 or
 *     v2 event (v2: the rest cut into up to 16 caller fields, strings and
 *     integers): the emitted line is at most 8 KiB, parses, and re-emits
 *     identically (a v2 event may be refused only with -E2BIG, its caller
 *     fields over 2048 bytes).
 * Build: cmake -DAUDITLOG_FUZZ=ON with clang (tests/fuzz/CMakeLists.txt).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "format_v2.h"

static uint8_t line[AL_LINE_MAX], line2[AL_LINE_MAX], members[AL_LINE_MAX], split[AL_LINE_MAX];
static uint8_t work[AL_HASH_LEN + AL_BODY_MAX];
static uint8_t dec[AL_LINE_MAX * 4], dec2[AL_LINE_MAX * 4];
static const uint8_t zero[AL_HASH_LEN];

/* A line that is not a header, as the writer makes it: the producer's
 * members (and v2's D_n, v1's body part), the worker's line around them (any
 * seq: the members' bound does not depend on it). The writer makes only
 * 30-byte timestamps. */
static void check_split(const struct al_parsed *p, const uint8_t *want, long n)
{
	static uint8_t bpart[AL_BODY_MAX];
	const struct al_record *r = &p->rec;
	struct al_emit_out eo;
	uint8_t d[AL_HASH_LEN];
	size_t bn;
	long mn, sn;

	if (r->type == AL_T_HEADER || r->f[AL_F_TIMESTAMP].n != AL_TS_LEN)
		return;
	if (r->version == AL_V2) {
		if (al_v2_record_digest(r, work, d) < 0 ||
		    (mn = al_emit_members(r, members, NULL, NULL)) < 0)
			abort();
		sn = al_emit_framed(r->type, r->f[AL_F_SEQ].u, (const char *)r->f[AL_F_TIMESTAMP].p,
				    members, (size_t)mn, d, zero, split, &eo);
	} else {
		if ((mn = al_emit_members(r, members, bpart, &bn)) < 0)
			abort();
		sn = al_emit_framed_v01(r->version, r->type, r->f[AL_F_SEQ].u,
					(const char *)r->f[AL_F_TIMESTAMP].p, members, (size_t)mn,
					bpart, bn, zero, split, work, &eo);
	}
	if (sn != n || memcmp(split, want, (size_t)n) != 0)
		abort();
}

static void check_parsed(const uint8_t *data, size_t size)
{
	struct al_parsed p;
	struct al_emit_out eo;
	uint8_t h[AL_HASH_LEN];
	size_t off;

	if (al_parse(data, size, dec, &p, &off) != AL_PERR_OK) {
		if (off > size)
			abort();
		return;
	}
	long n = al_emit(&p.rec, zero, line, work, &eo);
	if (n < 0 || (size_t)n != size + 1 || line[size] != '\n')
		abort();
	if (memcmp(line, data, p.hash_member_off) != 0)
		abort();
	(void)al_check_hash(&p, data, zero, work, h);
	if (memcmp(h, eo.hash, AL_HASH_LEN) != 0)
		abort();
	check_split(&p, line, n);
}

static void check_fields(const uint8_t *data, size_t size)
{
	static const enum al_field str[] = {AL_F_ACTION,    AL_F_RV,         AL_F_MECHANISM,
					    AL_F_KEY_LABEL, AL_F_KEY_ID,     AL_F_ACTOR,
					    AL_F_DETAIL,    AL_F_KEY2_LABEL, AL_F_KEY2_ID};
	struct al_record raw = {.version = (uint8_t)(size % 3), .type = AL_T_EVENT};
	static uint8_t vals[AL_CALLER_MAX][AL_CALLER_STR_CAP];
	static char keys[AL_CALLER_MAX][4];
	struct al_v2_field cf[AL_CALLER_MAX];
	struct al_record d;
	struct al_emit_out eo;
	struct al_parsed p;
	char ts[AL_TS_LEN];
	size_t pos = 0, off;

	al_format_ts(1764500000ull * 1000000000u + size, ts);
	raw.present = AL_BIT(AL_F_TIMESTAMP) | AL_BIT(AL_F_SEQ) | AL_BIT(AL_F_OUTCOME);
	raw.f[AL_F_TIMESTAMP] = (struct al_val){(const uint8_t *)ts, AL_TS_LEN, 0};
	raw.f[AL_F_SEQ].u = size;
	raw.f[AL_F_OUTCOME] = (struct al_val){(const uint8_t *)"failure", 7, 0};
	/* the first bytes say how long each field is */
	for (unsigned i = 0; i < sizeof(str) / sizeof(str[0]); i++) {
		size_t want = pos < size ? (size_t)data[pos++] * 37 : 0;
		size_t n = want < size - pos ? want : size - pos;
		raw.present |= AL_BIT(str[i]);
		raw.f[str[i]] = (struct al_val){data + pos, n, 0};
		pos += n;
	}
	if (!raw.f[AL_F_ACTION].n)
		raw.f[AL_F_ACTION] = (struct al_val){(const uint8_t *)"C_Sign", 6, 0};
	if (al_record_decode(&raw, &d, dec2, sizeof(dec2)) < 0)
		abort();
	if (raw.version == AL_V2) {
		/* the rest: caller fields k00 < k01 < ..., a length byte each (0: an
		 * integer from the next 7 bytes) */
		for (unsigned i = 0; i < AL_CALLER_MAX && pos < size; i++) {
			struct al_v2_field *c = &cf[d.ncaller];
			size_t want = data[pos++];
			snprintf(keys[i], sizeof(keys[i]), "k%02u", i);
			c->key = (const uint8_t *)keys[i];
			c->key_len = 3;
			if (want == 0) {
				uint64_t u = 0;
				for (int b = 0; b < 7 && pos < size; b++)
					u = u << 8 | data[pos++];
				c->is_int = true;
				c->u = u & AL_INT_MAX;
				c->p = NULL;
				c->n = 0;
			} else {
				size_t n = want < size - pos ? want : size - pos;
				c->is_int = false;
				c->u = 0;
				c->n = al_v2_caller_decode(data + pos, n, vals[i]);
				c->p = vals[i];
				pos += n;
				if (!c->n)
					continue; /* omitted */
			}
			d.ncaller++;
		}
		d.caller = cf;
	}
	long n = al_emit(&d, zero, line2, work, &eo);
	if (raw.version == AL_V2 && n == -E2BIG && al_v2_caller_json_len(cf, d.ncaller) > AL_CALLER_JSON_MAX)
		return;
	if (n < 0 || n > (long)AL_LINE_MAX)
		abort();
	if (al_parse(line2, (size_t)n - 1, dec, &p, &off) != AL_PERR_OK)
		abort();
	long n2 = al_emit(&p.rec, zero, line, work, &eo);
	if (n2 != n || memcmp(line, line2, (size_t)n) != 0)
		abort();
	check_split(&p, line, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_parsed(data, size);
	check_fields(data, size);
	return 0;
}
