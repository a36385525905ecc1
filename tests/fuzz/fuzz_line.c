/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the format layer (docs/format.md):
 *  1. any bytes given to the strict parser: it never crashes; when it accepts a
 *     line, re-emitting the parsed record reproduces the line byte for byte up
 *     to the hash, and the emitter's hash equals al_check_hash's;
 *  2. the same bytes cut into caller fields (any bytes, any length): the
 *     emitted line is at most 8 KiB, parses, and re-emits identically.
 * Build: cmake -DAUDITLOG_FUZZ=ON with clang (tests/fuzz/CMakeLists.txt).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

static uint8_t line[AL_LINE_MAX], line2[AL_LINE_MAX];
static uint8_t work[AL_HASH_LEN + AL_BODY_MAX];
static uint8_t dec[AL_LINE_MAX * 4], dec2[AL_LINE_MAX * 4];
static const uint8_t zero[AL_HASH_LEN];

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
}

static void check_fields(const uint8_t *data, size_t size)
{
	static const enum al_field str[] = {AL_F_ACTION, AL_F_RV, AL_F_MECHANISM, AL_F_KEY_LABEL,
					    AL_F_KEY_ID, AL_F_ACTOR, AL_F_DETAIL};
	struct al_record raw = {.version = (uint8_t)(size & 1), .type = AL_T_EVENT};
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
	long n = al_emit(&d, zero, line2, work, &eo);
	if (n < 0 || n > (long)AL_LINE_MAX)
		abort();
	if (al_parse(line2, (size_t)n - 1, dec, &p, &off) != AL_PERR_OK)
		abort();
	long n2 = al_emit(&p.rec, zero, line, work, &eo);
	if (n2 != n || memcmp(line, line2, (size_t)n) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_parsed(data, size);
	check_fields(data, size);
	return 0;
}
