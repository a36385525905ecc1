/* SPDX-License-Identifier: MIT */
/*
 * Canonical line emitter, v1 body encoder and strict parser (docs/format.md).
 * One field table drives all three so they cannot drift apart.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <string.h>

#include <openssl/crypto.h>

#include "format.h"
#include "format_v2.h"

enum kind {
	K_STR,    /* text: UTF-8 repaired, escaped, capped */
	K_INT,    /* integer <= 2^53-1 */
	K_HEX,    /* exactly `cap` lowercase hex digits */
	K_KEYID,  /* caller bytes as hex, cut at the cap */
	K_ENUM,   /* one of a fixed list of words */
	K_TS,     /* RFC 3339 timestamp */
	K_PAD,    /* dots */
	K_V2STR   /* a v2 member's text: its rule is format_v2.c's (al_v2_member_ok) */
};

struct fdesc {
	const char *key;
	uint8_t keylen;
	/* what precedes the value in a line, `,"key":"`, zero-padded: emit
	 * copies all 32 bytes and moves on by keylen + 4 (integers) or + 5.
	 * A copy of the key's own, variable length was GCC's `rep movsq`,
	 * whose start-up cost about 13 % of emit (perf, 2026-12-01). */
	char pre[32];
	uint8_t tag;
	uint8_t kind;
	uint16_t cap; /* K_STR: max escaped bytes (0 = none); K_HEX: exact digits */
	const char *const *words; /* K_ENUM */
};

static const char *const outcome_words[] = {"success", "failure", "unknown", NULL};
static const char *const reason_words[] = {"new", "rotate", "io-error", "untrusted-tail", NULL};

#define KEY(s) s, sizeof(s) - 1
#define FKEY(s) KEY(s), ",\"" s "\":\""
static const struct fdesc F[AL_F__MAX] = {
	[AL_F_TIMESTAMP] = {FKEY("@timestamp"), 0x01, K_TS, 0, NULL},
	[AL_F_SEQ] = {FKEY("seq"), 0x02, K_INT, 0, NULL},
	[AL_F_ACTION] = {FKEY("action"), 0x03, K_STR, 128, NULL},
	[AL_F_OUTCOME] = {FKEY("outcome"), 0x04, K_ENUM, 0, outcome_words},
	[AL_F_RV] = {FKEY("rv"), 0x05, K_STR, 64, NULL},
	[AL_F_SLOT] = {FKEY("slot"), 0x06, K_INT, 0, NULL},
	[AL_F_SESSION] = {FKEY("session"), 0x07, K_INT, 0, NULL},
	[AL_F_MECHANISM] = {FKEY("mechanism"), 0x08, K_STR, 64, NULL},
	[AL_F_KEY_LABEL] = {FKEY("key_label"), 0x09, K_STR, 512, NULL},
	[AL_F_KEY_ID] = {FKEY("key_id"), 0x0a, K_KEYID, 256, NULL},
	[AL_F_ACTOR] = {FKEY("actor"), 0x0b, K_STR, 128, NULL},
	[AL_F_DETAIL] = {FKEY("detail"), 0x0c, K_STR, 4096, NULL},
	[AL_F_FILE_ID] = {FKEY("file_id"), 0x10, K_HEX, 32, NULL},
	[AL_F_CHAIN_ID] = {FKEY("chain_id"), 0x11, K_HEX, 32, NULL},
	[AL_F_REASON] = {FKEY("reason"), 0x12, K_ENUM, 0, reason_words},
	[AL_F_PREV_NAME] = {FKEY("prev_name"), 0x13, K_STR, 1024, NULL},
	[AL_F_PREV_SEQ] = {FKEY("prev_seq"), 0x14, K_INT, 0, NULL},
	[AL_F_PREV_HASH] = {FKEY("prev_hash"), 0x15, K_HEX, 64, NULL},
	[AL_F_PREV_SIZE] = {FKEY("prev_size"), 0x16, K_INT, 0, NULL},
	[AL_F_PAD] = {FKEY("pad"), 0x17, K_PAD, 0, NULL},
	[AL_F_LAST_SEQ] = {FKEY("last_seq"), 0x20, K_INT, 0, NULL},
	[AL_F_DAMAGE_OFFSET] = {FKEY("damage_offset"), 0x21, K_INT, 0, NULL},
	[AL_F_DAMAGE_LENGTH] = {FKEY("damage_length"), 0x22, K_INT, 0, NULL},
	[AL_F_DAMAGE_SHA256] = {FKEY("damage_sha256"), 0x23, K_HEX, 64, NULL},
	[AL_F_SEALED_NAME] = {FKEY("sealed_name"), 0x18, K_STR, 1024, NULL},
	[AL_F_SEALED_FILE_ID] = {FKEY("sealed_file_id"), 0x19, K_HEX, 32, NULL},
	[AL_F_KEY2_LABEL] = {FKEY("key2_label"), 0x0d, K_STR, 256, NULL},
	[AL_F_KEY2_ID] = {FKEY("key2_id"), 0x0e, K_KEYID, 128, NULL},
	/* v2 (docs/format.md 12); tags from format_v2.h, value rules in format_v2.c */
	[AL_F_KIND] = {FKEY("kind"), AL_TAG_KIND, K_V2STR, 0, NULL},
	[AL_F_EPOCH] = {FKEY("epoch"), AL_TAG_EPOCH, K_INT, 0, NULL},
	[AL_F_SEAL_KEY] = {FKEY("seal_key"), AL_TAG_SEAL_KEY, K_V2STR, 0, NULL},
	[AL_F_PREV_SEAL] = {FKEY("prev_seal"), AL_TAG_PREV_SEAL, K_INT, 0, NULL},
	[AL_F_PREV_KIND] = {FKEY("prev_kind"), AL_TAG_PREV_KIND, K_V2STR, 0, NULL},
	[AL_F_MAC] = {FKEY("mac"), AL_TAG_MAC, K_V2STR, 0, NULL},
	[AL_F_SIZE] = {FKEY("size"), AL_TAG_SIZE, K_INT, 0, NULL},
	[AL_F_FIRST_SEQ] = {FKEY("first_seq"), AL_TAG_FIRST_SEQ, K_INT, 0, NULL},
	[AL_F_RANGE] = {FKEY("range"), AL_TAG_RANGE, K_V2STR, 0, NULL},
	[AL_F_NOTE] = {FKEY("note"), AL_TAG_NOTE, K_V2STR, 0, NULL},
	[AL_F_EXPECTED] = {FKEY("expected"), AL_TAG_EXPECTED, K_V2STR, 0, NULL},
	[AL_F_WALL] = {FKEY("wall"), AL_TAG_WALL, K_V2STR, 0, NULL},
	[AL_F_PREV_KEY] = {FKEY("prev_key"), AL_TAG_PREV_KEY, K_V2STR, 0, NULL},
};

/* A member whose value rule is format_v2.c's (the tags v2 adds). */
static inline bool v2_member(int f)
{
	return F[f].tag >= AL_TAG_KIND && F[f].tag < AL_TAG_CALLER_STR;
}

/* Members after the common four, in line order, per type. */
static const uint8_t order_event[] = {AL_F_ACTION,     AL_F_OUTCOME,   AL_F_RV,
				      AL_F_SLOT,       AL_F_SESSION,   AL_F_MECHANISM,
				      AL_F_KEY_LABEL,  AL_F_KEY_ID,    AL_F_KEY2_LABEL,
				      AL_F_KEY2_ID,    AL_F_ACTOR,     AL_F_DETAIL};
static const uint8_t order_header[] = {AL_F_FILE_ID,   AL_F_CHAIN_ID,  AL_F_REASON,
				       AL_F_PREV_NAME, AL_F_PREV_SEQ,  AL_F_PREV_HASH,
				       AL_F_PREV_SIZE, AL_F_SEALED_NAME, AL_F_SEALED_FILE_ID,
				       AL_F_DETAIL,    AL_F_PAD};
static const uint8_t order_recovery[] = {AL_F_LAST_SEQ, AL_F_DAMAGE_OFFSET,
					 AL_F_DAMAGE_LENGTH, AL_F_DAMAGE_SHA256};
/* v2 only (docs/format.md 12, 19-21) */
static const uint8_t order_seal[] = {AL_F_KIND,      AL_F_EPOCH,     AL_F_SEAL_KEY, AL_F_CHAIN_ID,
				     AL_F_PREV_SEAL, AL_F_PREV_KIND, AL_F_PREV_KEY, AL_F_MAC};
static const uint8_t order_checkpoint[] = {AL_F_SIZE, AL_F_FIRST_SEQ, AL_F_RANGE, AL_F_NOTE};
static const uint8_t order_tree[] = {AL_F_SIZE, AL_F_FIRST_SEQ, AL_F_RANGE};
static const uint8_t order_clock[] = {AL_F_EPOCH, AL_F_EXPECTED, AL_F_WALL};

#define PREV_ALL (AL_BIT(AL_F_PREV_NAME) | AL_BIT(AL_F_PREV_SEQ) | AL_BIT(AL_F_PREV_HASH) | \
		  AL_BIT(AL_F_PREV_SIZE))
/* a header's sealed_*: both or neither, and only in a file that continues another */
#define SEALED_ALL (AL_BIT(AL_F_SEALED_NAME) | AL_BIT(AL_F_SEALED_FILE_ID))

struct tdesc {
	const char *name;
	uint8_t namelen;
	const uint8_t *order;
	uint8_t n;
	uint64_t required;
	uint8_t min_version; /* the first format version that has the type */
};

#define AL_T_MAX AL_T_CLOCK
#define AL_ORDER_MAX 12u /* the longest order (event) */

static const struct tdesc T[AL_T_MAX + 1] = {
	[AL_T_EVENT] = {KEY("event"), order_event, sizeof(order_event),
			AL_BIT(AL_F_ACTION) | AL_BIT(AL_F_OUTCOME), 0},
	[AL_T_HEADER] = {KEY("header"), order_header, sizeof(order_header),
			 AL_BIT(AL_F_FILE_ID) | AL_BIT(AL_F_CHAIN_ID) | AL_BIT(AL_F_REASON), 0},
	[AL_T_RECOVERY] = {KEY("recovery"), order_recovery, sizeof(order_recovery),
			   AL_BIT(AL_F_LAST_SEQ) | AL_BIT(AL_F_DAMAGE_OFFSET) |
				   AL_BIT(AL_F_DAMAGE_LENGTH) | AL_BIT(AL_F_DAMAGE_SHA256), 0},
	[AL_T_SEAL] = {KEY("seal"), order_seal, sizeof(order_seal),
		       AL_BIT(AL_F_KIND) | AL_BIT(AL_F_EPOCH) | AL_BIT(AL_F_SEAL_KEY) |
			       AL_BIT(AL_F_CHAIN_ID) | AL_BIT(AL_F_MAC),
		       AL_V2},
	[AL_T_CHECKPOINT] = {KEY("checkpoint"), order_checkpoint, sizeof(order_checkpoint),
			     AL_BIT(AL_F_SIZE) | AL_BIT(AL_F_FIRST_SEQ) | AL_BIT(AL_F_RANGE) |
				     AL_BIT(AL_F_NOTE),
			     AL_V2},
	[AL_T_TREE] = {KEY("tree"), order_tree, sizeof(order_tree),
		       AL_BIT(AL_F_SIZE) | AL_BIT(AL_F_FIRST_SEQ) | AL_BIT(AL_F_RANGE), AL_V2},
	[AL_T_CLOCK] = {KEY("clock"), order_clock, sizeof(order_clock),
			AL_BIT(AL_F_EPOCH) | AL_BIT(AL_F_EXPECTED) | AL_BIT(AL_F_WALL), AL_V2},
};

static const struct tdesc *type_desc(uint8_t type)
{
	if (type < AL_T_EVENT || type > AL_T_MAX)
		return NULL;
	return &T[type];
}

const char *al_field_key(enum al_field f)
{
	return f < AL_F__MAX ? F[f].key : NULL;
}

const char *al_type_name(uint8_t type)
{
	const struct tdesc *t = type_desc(type);
	return t ? t->name : NULL;
}

/* ---- hex, timestamps ---------------------------------------------------- */

static const char hexdig[] = "0123456789abcdef";

/* "000102...ff": two digits per byte value, one 2-byte copy per input byte */
static const char hexpairs[513] =
	"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
	"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
	"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
	"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

void al_hex(const uint8_t *in, size_t n, char *out)
{
	size_t i = 0;
#if defined(__SSE2__)
	/* 16 bytes at a time (every line's 32-byte hash): split the nibbles,
	 * interleave them high first, add '0', and 'a' - '0' - 10 more above 9 */
	const __m128i lo4 = _mm_set1_epi8(0x0f), nine = _mm_set1_epi8(9);
	const __m128i zero = _mm_set1_epi8('0'), gap = _mm_set1_epi8('a' - '0' - 10);
	for (; n - i >= 16; i += 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(in + i));
		__m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), lo4), lo = _mm_and_si128(v, lo4);
		__m128i a = _mm_unpacklo_epi8(hi, lo), b = _mm_unpackhi_epi8(hi, lo);
		a = _mm_add_epi8(_mm_add_epi8(a, zero), _mm_and_si128(_mm_cmpgt_epi8(a, nine), gap));
		b = _mm_add_epi8(_mm_add_epi8(b, zero), _mm_and_si128(_mm_cmpgt_epi8(b, nine), gap));
		_mm_storeu_si128((__m128i *)(void *)(out + 2 * i), a);
		_mm_storeu_si128((__m128i *)(void *)(out + 2 * i + 16), b);
	}
#endif
	for (; i < n; i++)
		memcpy(out + 2 * i, hexpairs + 2 * in[i], 2);
}

/* lowercase hex digit values + 1; 0 for everything else */
#define HX(c, v) [c] = v + 1
static const uint8_t hexv1[256] = {
	HX('0', 0), HX('1', 1), HX('2', 2), HX('3', 3), HX('4', 4), HX('5', 5), HX('6', 6),
	HX('7', 7), HX('8', 8), HX('9', 9), HX('a', 10), HX('b', 11), HX('c', 12), HX('d', 13),
	HX('e', 14), HX('f', 15),
};

static int lhex(uint8_t c)
{
	return (int)hexv1[c] - 1;
}

int al_unhex(const uint8_t *in, size_t n2, uint8_t *out)
{
	uint8_t bad = 0;

	if (n2 & 1)
		return -EINVAL;
	for (size_t i = 0; i < n2; i += 2) {
		uint8_t h = (uint8_t)(hexv1[in[i]] - 1), l = (uint8_t)(hexv1[in[i + 1]] - 1);
		bad |= h | l;
		out[i / 2] = (uint8_t)(h << 4 | (l & 15));
	}
	return bad & 0xf0 ? -EINVAL : 0;
}

/* Howard Hinnant's days-from-civil and its inverse (proleptic Gregorian). */
static void civil_from_days(int64_t z, int *y, unsigned *m, unsigned *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t yy = (int64_t)yoe + era * 400;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int)(yy + (*m <= 2));
}

static int64_t days_from_civil(int y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static const char digits2[200] = "00010203040506070809101112131415161718192021222324"
				 "25262728293031323334353637383940414243444546474849"
				 "50515253545556575859606162636465666768697071727374"
				 "75767778798081828384858687888990919293949596979899";

/* v in exactly n digits (v < 10^n), two a step from the last: the 9 digits
 * of a timestamp's nanoseconds are written for every record. */
static void put_digits(char *p, unsigned v, int n)
{
	while (n >= 2) {
		unsigned d = v % 100 * 2;
		v /= 100;
		n -= 2;
		p[n] = digits2[d];
		p[n + 1] = digits2[d + 1];
	}
	if (n)
		p[0] = (char)('0' + v % 10);
}

void al_format_ts(uint64_t ns, char out[AL_TS_LEN])
{
	uint64_t sec = ns / 1000000000u;
	unsigned frac = (unsigned)(ns % 1000000000u);
	int y;
	unsigned mo, d;
	civil_from_days((int64_t)(sec / 86400), &y, &mo, &d);
	unsigned sod = (unsigned)(sec % 86400);
	put_digits(out, (unsigned)y, 4);
	out[4] = '-';
	put_digits(out + 5, mo, 2);
	out[7] = '-';
	put_digits(out + 8, d, 2);
	out[10] = 'T';
	put_digits(out + 11, sod / 3600, 2);
	out[13] = ':';
	put_digits(out + 14, sod / 60 % 60, 2);
	out[16] = ':';
	put_digits(out + 17, sod % 60, 2);
	out[19] = '.';
	put_digits(out + 20, frac, 9);
	out[29] = 'Z';
}

void al_format_ts_cached(struct al_ts_cache *c, uint64_t ns, char out[AL_TS_LEN])
{
	uint64_t sec = ns / 1000000000u;

	if (!c->valid || c->sec != sec) {
		al_format_ts(ns, out);
		memcpy(c->prefix, out, sizeof(c->prefix));
		c->sec = sec;
		c->valid = true;
		return;
	}
	memcpy(out, c->prefix, sizeof(c->prefix));
	put_digits(out + 20, (unsigned)(ns % 1000000000u), 9);
	out[29] = 'Z';
}

static int digits(const uint8_t *s, int n, unsigned *ret)
{
	unsigned v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	*ret = v;
	return 0;
}

int al_parse_ts(const uint8_t *s, size_t n, int64_t *ret_sec)
{
	unsigned y, mo, d, h, mi, se, frac;
	static const uint8_t mdays[13] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

	if (n != AL_TS_LEN || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
	    s[16] != ':' || s[19] != '.' || s[29] != 'Z')
		return -EINVAL;
	if (digits(s, 4, &y) || digits(s + 5, 2, &mo) || digits(s + 8, 2, &d) ||
	    digits(s + 11, 2, &h) || digits(s + 14, 2, &mi) || digits(s + 17, 2, &se) ||
	    digits(s + 20, 9, &frac))
		return -EINVAL;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo] || h > 23 || mi > 59 ||
	    se > 59)
		return -EINVAL;
	if (mo == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)))
		return -EINVAL;
	if (ret_sec)
		*ret_sec = days_from_civil((int)y, mo, d) * 86400 + h * 3600 + mi * 60 + se;
	return 0;
}

uint64_t al_ts_ns(const void *ts)
{
	const uint8_t *t = ts;
	int64_t sec = 0;
	uint64_t frac = 0;

	if (al_parse_ts(t, AL_TS_LEN, &sec) < 0 || sec < 0)
		return 0;
	for (unsigned i = 20; i < 29; i++)
		frac = frac * 10 + (uint64_t)(t[i] - '0');
	return (uint64_t)sec * 1000000000u + frac;
}

/* ---- decoding: UTF-8 repair and cut ------------------------------------- */

/* Length of the well-formed UTF-8 sequence at s (Unicode table 3-7), or, when
 * ill-formed, 0 with *sub set to the length of the maximal subpart (>= 1). */
static size_t utf8_seq(const uint8_t *s, size_t n, size_t *sub)
{
	uint8_t c = s[0];
	size_t need;
	uint8_t lo = 0x80, hi = 0xBF;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		need = 1;
	else if (c >= 0xE0 && c <= 0xEF) {
		need = 2;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 3;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else {
		*sub = 1;
		return 0;
	}
	for (size_t i = 1; i <= need; i++) {
		if (i >= n || s[i] < lo || s[i] > hi) {
			*sub = i;
			return 0;
		}
		lo = 0x80;
		hi = 0xBF;
	}
	return need + 1;
}

size_t al_utf8_seq(const uint8_t *s, size_t n, size_t *sub)
{
	return utf8_seq(s, n, sub);
}

/* Bytes written as themselves: everything but '"', '\\' and controls.
 * (Non-ASCII bytes of valid UTF-8 are copied too.) */
static inline bool safe_out(uint8_t c)
{
	return c >= 0x20 && c != '"' && c != '\\';
}

/* ASCII that decodes and escapes to itself: the common case, copied in runs.
 * A table: one load per byte on the worker's hottest loop. */
#define PLAIN8(b) [b] = 1, [b + 1] = 1, [b + 2] = 1, [b + 3] = 1, [b + 4] = 1, [b + 5] = 1, \
		  [b + 6] = 1, [b + 7] = 1
static const bool plain_tab[256] = {
	[0x20] = 1, [0x21] = 1, /* 0x22 '"' */ [0x23] = 1, [0x24] = 1, [0x25] = 1, [0x26] = 1,
	[0x27] = 1, PLAIN8(0x28), PLAIN8(0x30), PLAIN8(0x38), PLAIN8(0x40), PLAIN8(0x48),
	PLAIN8(0x50), [0x58] = 1, [0x59] = 1, [0x5a] = 1, [0x5b] = 1, /* 0x5c '\\' */
	[0x5d] = 1, [0x5e] = 1, [0x5f] = 1, PLAIN8(0x60), PLAIN8(0x68), PLAIN8(0x70), PLAIN8(0x78),
};

static inline bool plain_ascii(uint8_t c)
{
	return plain_tab[c];
}

/* The end of the run of plain bytes that starts at i (i itself is plain):
 * 16 bytes at a time where SSE2 is there (every x86-64). A byte ends the run
 * when it is '"', '\\', below 0x20 or from 0x80 up: as a signed byte, below
 * 0x20 covers both ranges. */
static inline size_t plain_run_end(const uint8_t *s, size_t i, size_t n)
{
	i++;
#if defined(__SSE2__)
	const __m128i quote = _mm_set1_epi8('"'), bsl = _mm_set1_epi8('\\'), sp = _mm_set1_epi8(0x20);
	while (n - i >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		__m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bsl)),
					    _mm_cmplt_epi8(v, sp));
		unsigned m = (unsigned)_mm_movemask_epi8(stop);
		if (m)
			return i + (size_t)__builtin_ctz(m);
		i += 16;
	}
#endif
	while (i < n && plain_ascii(s[i]))
		i++;
	return i;
}

/* Eight bytes at once (SWAR): true when none of them ends a plain run, i.e.
 * none is below 0x20, from 0x80 up, '"' or '\\'. The has-zero and has-less
 * tests are exact as yes/no answers for the word. */
static inline uint64_t load8(const uint8_t *s)
{
	uint64_t x;
	memcpy(&x, s, 8); /* byte order does not matter to plain8 */
	return x;
}

static inline bool plain8(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
	uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
	uint64_t bad = (x & high) | ((x - ones * 0x20) & ~x & high) | ((q - ones) & ~q & high) |
		       ((b - ones) & ~b & high);
	return bad == 0;
}

/* Every byte of s[0..n) plain (n > 0): whole strings, the decoder's check.
 * Strings of 8 bytes and more are looked at through overlapping words, so
 * the short names most records carry take one or two steps, not a loop. */
static inline bool all_plain(const uint8_t *s, size_t n)
{
	if (n >= 4 && n < 8) { /* two overlapping 4-byte words in one */
		uint32_t a, b;
		memcpy(&a, s, 4);
		memcpy(&b, s + n - 4, 4);
		return plain8((uint64_t)a | (uint64_t)b << 32);
	}
	if (n < 8) {
		for (size_t i = 0; i < n; i++)
			if (!plain_ascii(s[i]))
				return false;
		return true;
	}
	if (n < 16)
		return plain8(load8(s)) && plain8(load8(s + n - 8));
#if defined(__SSE2__)
	const __m128i quote = _mm_set1_epi8('"'), bsl = _mm_set1_epi8('\\'), sp = _mm_set1_epi8(0x20);
	__m128i stop = _mm_setzero_si128();
	for (size_t i = 0;; i += 16) {
		if (i > n - 16)
			i = n - 16; /* the last 16, overlapping */
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		stop = _mm_or_si128(stop, _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote),
								     _mm_cmpeq_epi8(v, bsl)),
						       _mm_cmplt_epi8(v, sp)));
		if (i == n - 16)
			break;
	}
	return _mm_movemask_epi8(stop) == 0;
#else
	return plain_ascii(s[0]) && plain_run_end(s, 0, n - 8) == n - 8 &&
	       plain8(load8(s + n - 8));
#endif
}

static unsigned esc_len_ascii(uint8_t c)
{
	if (c == '"' || c == '\\')
		return 2;
	if (c >= 0x20)
		return 1;
	if (c == '\b' || c == '\t' || c == '\n' || c == '\f' || c == '\r')
		return 2;
	return 6;
}

size_t al_decoded_max(enum al_field f, size_t n)
{
	if (F[f].kind == K_KEYID)
		return n * 2 < F[f].cap ? n * 2 : F[f].cap;
	/* every input byte yields at most 3 output bytes (U+FFFD) */
	if (F[f].kind == K_STR && F[f].cap && n * 3 > F[f].cap)
		return F[f].cap; /* decoded <= escaped <= cap */
	return n * 3;
}

size_t al_decode_text(const uint8_t *s, size_t n, size_t cap, uint8_t *out)
{
	size_t i = 0, o = 0, esc = 0, cut_o = 0;
	bool capped = cap != 0;
	size_t room = capped ? cap - AL_CUT_MARKER_LEN : 0;

	while (i < n) {
		if (plain_ascii(s[i])) {
			size_t j = plain_run_end(s, i, n);
			size_t run = j - i, keep = run;
			if (capped) {
				size_t e0 = esc;
				if (e0 < room) /* boundaries inside the run that still fit the room */
					cut_o = o + (run < room - e0 ? run : room - e0);
				if (e0 + run > cap) {
					memcpy(out + o, s + i, cut_o > o ? cut_o - o : 0);
					memcpy(out + cut_o, AL_CUT_MARKER, AL_CUT_MARKER_LEN);
					return cut_o + AL_CUT_MARKER_LEN;
				}
				esc = e0 + run;
			}
			memcpy(out + o, s + i, keep);
			o += keep;
			i = j;
			continue;
		}
		size_t sub = 0, len = utf8_seq(s + i, n - i, &sub);
		size_t el;
		const uint8_t *src;
		static const uint8_t fffd[3] = {0xEF, 0xBF, 0xBD};

		if (len) {
			el = len == 1 ? esc_len_ascii(s[i]) : len;
			src = s + i;
			i += len;
		} else {
			len = 3;
			el = 3;
			src = fffd;
			i += sub;
		}
		if (capped) {
			if (esc + el > cap) { /* does not fit: cut */
				memcpy(out + cut_o, AL_CUT_MARKER, AL_CUT_MARKER_LEN);
				return cut_o + AL_CUT_MARKER_LEN;
			}
			esc += el;
			if (esc <= room)
				cut_o = o + len;
		}
		memcpy(out + o, src, len);
		o += len;
	}
	return o;
}

size_t al_decode_field(enum al_field f, const uint8_t *raw, size_t n, uint8_t *out)
{
	const struct fdesc *d = &F[f];

	if (n == 0)
		return 0;
	if (d->kind == K_KEYID) {
		if (2 * n <= d->cap) {
			al_hex(raw, n, (char *)out);
			return 2 * n;
		}
		size_t keep = (d->cap - AL_CUT_MARKER_LEN) / 2;
		al_hex(raw, keep, (char *)out);
		memcpy(out + 2 * keep, AL_CUT_MARKER, AL_CUT_MARKER_LEN);
		return 2 * keep + AL_CUT_MARKER_LEN;
	}
	return al_decode_text(raw, n, d->kind == K_STR ? d->cap : 0, out);
}

int al_record_decode(const struct al_record *raw, struct al_record *out, uint8_t *buf, size_t cap)
{
	size_t used = 0;

	if (out != raw) /* in place is allowed, and saves copying the record */
		*out = *raw;
	out->plain = 0;
	for (uint64_t m = raw->present; m; m &= m - 1) {
		int f = __builtin_ctzll(m);
		if (F[f].kind == K_INT)
			continue;
		if (F[f].kind != K_KEYID && raw->f[f].n &&
		    (F[f].kind != K_STR || !F[f].cap || raw->f[f].n <= F[f].cap)) {
			/* the common case: printable ASCII that fits decodes to itself */
			const uint8_t *p = raw->f[f].p;
			size_t n = raw->f[f].n;
			if (all_plain(p, n)) {
				out->plain |= AL_BIT(f);
				continue;
			}
		}
		size_t need = al_decoded_max((enum al_field)f, raw->f[f].n);
		if (need > cap - used)
			return -ENOBUFS;
		size_t n = al_decode_field((enum al_field)f, raw->f[f].p, raw->f[f].n, buf + used);
		if (n == 0) {
			out->present &= ~AL_BIT(f);
			continue;
		}
		if (F[f].kind == K_KEYID && n == 2 * raw->f[f].n) /* before: out may be raw */
			out->plain |= AL_BIT(f); /* lowercase hex, not cut: nothing to escape */
		out->f[f].p = buf + used;
		out->f[f].n = n;
		used += n;
	}
	return 0;
}

/* ---- emitting ------------------------------------------------------------ */

/* The first w and the last w bytes of s[0..n) to o (w <= n <= 2w): the
 * two copies overlap when n < 2w. */
static inline __attribute__((always_inline)) void put_ends(uint8_t *o, const uint8_t *s, size_t n,
							    size_t w)
{
	uint8_t a[16], b[16];

	memcpy(a, s, w);
	memcpy(b, s + n - w, w);
	memcpy(o, a, w);
	memcpy(o + n - w, b, w);
}

/* A line's strings are mostly short (names, labels, ids: 4-32 bytes) and of
 * a length known only at run time, where memcpy is a call: up to 32 bytes
 * are copied here with two loads and two stores of a fixed width that may
 * overlap (every byte read lies within s[0..n), every byte written within
 * o[0..n); s and o do not overlap, as for memcpy). */
static inline uint8_t *put(uint8_t *o, const void *src, size_t n)
{
	const uint8_t *s = src;

	if (n > 32) {
		memcpy(o, s, n);
	} else if (n >= 16) {
		put_ends(o, s, n, 16);
	} else if (n >= 8) {
		put_ends(o, s, n, 8);
	} else if (n >= 4) {
		put_ends(o, s, n, 4);
	} else if (n) {
		uint8_t x = s[0], y = s[n / 2], z = s[n - 1];
		o[0] = x;
		o[n / 2] = y;
		o[n - 1] = z;
	}
	return o + n;
}

/* Decimal, written in place from its last digit, two digits a step: the
 * line's integers (seq, slot, session, epoch...) are 1-16 digits. A loop of
 * one digit a division into a buffer, then a copy of variable length, was
 * ~10 % of emit (perf, 2026-12-01). al_put_dec serves every decimal of the
 * format layer (lines, checkpoint notes); digits2 is put_digits' table. */
static const uint64_t pow10_u64[20] = {
	1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull,
	1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull,
	100000000000000ull, 1000000000000000ull, 10000000000000000ull, 100000000000000000ull,
	1000000000000000000ull, 10000000000000000000ull,
};

/* The digits of v: floor(log10(2^bits)) (1233/4096 ~ log10 2), one more
 * when v reaches the next power of ten; 0 has one. */
static inline unsigned dec_len(uint64_t v)
{
	unsigned t = ((unsigned)(64 - __builtin_clzll(v | 1)) * 1233u) >> 12;
	unsigned n = t + (v >= pow10_u64[t]);
	return n ? n : 1;
}

static inline uint8_t *put_dec(uint8_t *o, uint64_t v)
{
	unsigned n = dec_len(v);
	uint8_t *e = o + n;
	while (v >= 100) {
		unsigned d = (unsigned)(v % 100) * 2;
		v /= 100;
		e -= 2;
		e[0] = (uint8_t)digits2[d];
		e[1] = (uint8_t)digits2[d + 1];
	}
	if (v >= 10) {
		e -= 2;
		e[0] = (uint8_t)digits2[v * 2];
		e[1] = (uint8_t)digits2[v * 2 + 1];
	} else {
		*--e = (uint8_t)('0' + v);
	}
	return o + n;
}

/* for the other units (note.c); the lines here inline put_dec */
uint8_t *al_put_dec(uint8_t *o, uint64_t v)
{
	return put_dec(o, v);
}

/* The end of the run of safe_out bytes that starts at i (i itself is safe):
 * 16 at a time with SSE2, as plain_run_end, but bytes from 0x80 up are safe
 * here (v <= 0x1f unsigned: min(v, 0x1f) == v). */
static inline size_t safe_run_end(const uint8_t *s, size_t i, size_t n)
{
	i++;
#if defined(__SSE2__)
	const __m128i quote = _mm_set1_epi8('"'), bsl = _mm_set1_epi8('\\'), c1f = _mm_set1_epi8(0x1f);
	while (n - i >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		__m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bsl)),
					    _mm_cmpeq_epi8(_mm_min_epu8(v, c1f), v));
		unsigned m = (unsigned)_mm_movemask_epi8(stop);
		if (m)
			return i + (size_t)__builtin_ctz(m);
		i += 16;
	}
#endif
	while (i < n && safe_out(s[i]))
		i++;
	return i;
}

/* Escape decoded (valid UTF-8) bytes. */
static uint8_t *put_escaped(uint8_t *o, const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (safe_out(c)) {
			size_t j = safe_run_end(s, i, n);
			memcpy(o, s + i, j - i);
			o += j - i;
			i = j - 1;
			continue;
		}
		*o++ = '\\';
		switch (c) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '\b': *o++ = 'b'; break;
		case '\t': *o++ = 't'; break;
		case '\n': *o++ = 'n'; break;
		case '\f': *o++ = 'f'; break;
		case '\r': *o++ = 'r'; break;
		default:
			o = put(o, "u00", 3);
			*o++ = (uint8_t)hexdig[c >> 4];
			*o++ = (uint8_t)hexdig[c & 15];
		}
	}
	return o;
}

size_t al_escaped_len(const uint8_t *s, size_t n)
{
	size_t e = 0;
	for (size_t i = 0; i < n; i++)
		e += s[i] >= 0x80 ? 1 : esc_len_ascii(s[i]);
	return e;
}

static uint8_t *put_member(uint8_t *o, const struct al_record *r, int f)
{
	/* the 32 bytes reach past the key and the quote only into what the
	 * rest of the line (at least the hash member) overwrites */
	memcpy(o, F[f].pre, sizeof(F[f].pre));
	if (F[f].kind == K_INT)
		return put_dec(o + F[f].keylen + 4, r->f[f].u);
	o += F[f].keylen + 5;
	if (r->plain & AL_BIT(f))
		o = put(o, r->f[f].p, r->f[f].n);
	else
		o = put_escaped(o, r->f[f].p, r->f[f].n);
	*o++ = '"';
	return o;
}

static size_t member_len(const struct al_record *r, int f)
{
	size_t n = 4 + F[f].keylen; /* , " " : */
	if (F[f].kind == K_INT)
		return n + dec_len(r->f[f].u);
	return n + 2 + al_escaped_len(r->f[f].p, r->f[f].n);
}

static const uint8_t dots[AL_HEADER_LINE] = {[0 ... AL_HEADER_LINE - 1] = '.'};

/* The members of a record in line order as format_v2.c takes them (the v2
 * body without @timestamp and seq, docs/format.md 13). m: AL_ORDER_MAX. */
static size_t v2_members(const struct al_record *r, const struct tdesc *t, struct al_v2_member *m)
{
	size_t k = 0;

	for (unsigned i = 0; i < t->n; i++) {
		int f = t->order[i];
		if (!(r->present & AL_BIT(f)))
			continue;
		m[k++] = (struct al_v2_member){F[f].tag, F[f].kind == K_INT, r->f[f].p, r->f[f].n,
					       r->f[f].u};
	}
	return k;
}

size_t al_v2_record_members(const struct al_record *r, struct al_v2_member m[AL_V2_MEMBERS_MAX])
{
	const struct tdesc *t = type_desc(r->type);

	return t ? v2_members(r, t, m) : 0;
}

/* The rules a v2 record's members and caller fields must meet beyond v1's:
 * the new types' members (format_v2.c), caller fields in events only. */
static int check_v2(const struct al_record *r, const struct tdesc *t)
{
	if (t->min_version == AL_V2) {
		struct al_v2_member m[AL_ORDER_MAX];
		if (r->ncaller || al_v2_check_members(r->type, m, v2_members(r, t, m)) < 0)
			return -EINVAL;
		return 0;
	}
	if (r->type != AL_T_EVENT)
		return r->ncaller ? -EINVAL : 0;
	return al_v2_caller_check(r->caller, r->ncaller);
}

/* Validates what the emitter relies on; values themselves were built by us. */
static int check_record(const struct al_record *r, const struct tdesc *t, bool with_ts)
{
	if (!t || r->version > AL_V2 || r->version < t->min_version)
		return -EINVAL;
	if ((r->present & t->required) != t->required)
		return -EINVAL;
	if (with_ts && (!(r->present & AL_BIT(AL_F_TIMESTAMP)) || !(r->present & AL_BIT(AL_F_SEQ))))
		return -EINVAL;
	for (uint64_t m = r->present & ~(with_ts ? 0 : AL_BIT(AL_F_SEQ)); m; m &= m - 1) {
		int f = __builtin_ctzll(m);
		if (F[f].kind == K_INT && r->f[f].u > AL_INT_MAX)
			return -EINVAL;
	}
	if (r->version < AL_V2)
		return 0;
	/* the chain step reads exactly 30 bytes of it (docs/format.md 15) */
	if (with_ts && r->f[AL_F_TIMESTAMP].n != AL_TS_LEN)
		return -EINVAL;
	return check_v2(r, t);
}

/* D_n of a record already checked (or parsed): B_n through format_v2.c. */
static long v2_digest(const struct al_record *r, const struct tdesc *t, uint8_t *body,
		      uint8_t digest[AL_HASH_LEN])
{
	struct al_v2_member m[AL_ORDER_MAX];
	size_t nc = r->type == AL_T_EVENT ? r->ncaller : 0;
	long n = al_v2_body(r->type, m, v2_members(r, t, m), r->caller, nc, body, AL_BODY_MAX);

	if (n >= 0)
		al_sha256(body, (size_t)n, digest);
	return n;
}

long al_v2_record_digest(const struct al_record *dec, uint8_t *body, uint8_t digest[AL_HASH_LEN])
{
	const struct tdesc *t = type_desc(dec->type);
	int r = check_record(dec, t, false);

	if (r < 0)
		return r;
	if (dec->version != AL_V2)
		return -EINVAL;
	return v2_digest(dec, t, body, digest);
}

/* One caller field of a v2 event: ,"key":value */
static uint8_t *put_caller(uint8_t *o, const struct al_v2_field *c)
{
	*o++ = ',';
	*o++ = '"';
	o = put(o, c->key, c->key_len);
	*o++ = '"';
	*o++ = ':';
	if (c->is_int)
		return put_dec(o, c->u);
	*o++ = '"';
	o = put_escaped(o, c->p, c->n);
	*o++ = '"';
	return o;
}

static uint8_t *enc_field(uint8_t *o, const struct al_record *r, int f);

/* A v1 body's common part (docs/format.md 5): version, type, @timestamp,
 * seq; its members follow. */
static uint8_t *enc_v1_common(uint8_t *o, const struct al_record *r)
{
	*o++ = 1;
	*o++ = r->type;
	o = enc_field(o, r, AL_F_TIMESTAMP);
	return enc_field(o, r, AL_F_SEQ);
}

/* The common four: {"@timestamp":"...","seq":N,"v":V,"type":"T" */
static uint8_t *put_head(uint8_t *o, const uint8_t *ts, size_t tsn, bool ts_plain, uint64_t seq,
			 uint8_t version, const struct tdesc *t)
{
	o = put(o, "{\"@timestamp\":\"", 15);
	o = ts_plain ? put(o, ts, tsn) : put_escaped(o, ts, tsn);
	o = put(o, "\",\"seq\":", 8);
	o = put_dec(o, seq);
	o = put(o, ",\"v\":", 5);
	*o++ = (uint8_t)('0' + version);
	o = put(o, ",\"type\":\"", 9);
	o = put(o, t->name, t->namelen);
	*o++ = '"';
	return o;
}

/* The longest head of a v2 record that is not a header: a 30-byte
 * @timestamp, a 16-digit seq, type "checkpoint" (al_emit_members' bound). */
#define V2_HEAD_MAX (15u + AL_TS_LEN + 8u + 16u + 5u + 1u + 9u + 10u + 1u)

static uint8_t *put_tail(uint8_t *o, const uint8_t hash[AL_HASH_LEN])
{
	o = put(o, ",\"hash\":\"", 9);
	al_hex(hash, AL_HASH_LEN, (char *)o);
	o += 64;
	return put(o, "\"}\n", 3);
}

/* Whether a record's members might not fit a line: only then are they
 * measured one by one. Caps keep every decoded record far below AL_LINE_MAX,
 * so this is for records whose worst escaping (6 bytes a byte) could not. */
static bool must_measure(const struct al_record *r, size_t ncaller)
{
	size_t worst = 160 + 64;
	for (uint64_t m = r->present; m; m &= m - 1) {
		int f = __builtin_ctzll(m);
		worst += 6u + F[f].keylen + (F[f].kind == K_INT ? 16u : 6u * r->f[f].n);
	}
	if (ncaller) /* checked: their JSON is at most AL_CALLER_JSON_MAX bytes */
		worst += al_v2_caller_json_len(r->caller, ncaller);
	return worst > AL_LINE_MAX;
}

/* The members after the common four, in line order, then the caller fields
 * (ncaller: 0 unless a v2 event). used: the bytes the line holds before o
 * (or could, at most); measure: refuse (NULL) what would leave no room for
 * the hash member within AL_LINE_MAX. bo: v1's body, built in the same pass
 * (NULL: none); *ret_bo gets its end. */
static uint8_t *put_members(uint8_t *o, size_t used, const struct al_record *r, const struct tdesc *t,
			    size_t ncaller, bool measure, uint8_t *bo, uint8_t **ret_bo)
{
	const uint8_t *start = o;

	for (unsigned i = 0; i < t->n; i++) {
		int f = t->order[i];
		if (!(r->present & AL_BIT(f)))
			continue;
		if (measure && used + (size_t)(o - start) + member_len(r, f) + 76 > AL_LINE_MAX)
			return NULL;
		o = put_member(o, r, f);
		if (bo)
			bo = enc_field(bo, r, f);
	}
	if (ncaller) {
		if (measure && used + (size_t)(o - start) + al_v2_caller_json_len(r->caller, ncaller) +
				       76 > AL_LINE_MAX)
			return NULL;
		for (size_t i = 0; i < ncaller; i++)
			o = put_caller(o, &r->caller[i]);
	}
	if (ret_bo)
		*ret_bo = bo;
	return o;
}

long al_emit(const struct al_record *in, const uint8_t prev[AL_HASH_LEN], uint8_t *line,
	     uint8_t *work, struct al_emit_out *out)
{
	const struct tdesc *t = type_desc(in->type);
	struct al_record padded;
	const struct al_record *r = in;
	uint8_t *o = line;
	int r_;

	r_ = check_record(in, t, true);
	if (r_ < 0)
		return r_;
	size_t ncaller = in->version == AL_V2 && in->type == AL_T_EVENT ? in->ncaller : 0;

	if (in->type == AL_T_HEADER) {
		/* L = length without pad: common part + members + ,"hash":"64"}\n */
		size_t L = 15 + al_escaped_len(in->f[AL_F_TIMESTAMP].p, in->f[AL_F_TIMESTAMP].n) +
			   8 + 5 + 1 + 9 + t->namelen + 1 + dec_len(in->f[AL_F_SEQ].u);
		for (unsigned i = 0; i < t->n; i++)
			if (t->order[i] != AL_F_PAD && (in->present & AL_BIT(t->order[i])))
				L += member_len(in, t->order[i]);
		L += 9 + 64 + 2 + 1;
		padded = *in;
		padded.present &= ~AL_BIT(AL_F_PAD);
		if (L < AL_HEADER_LINE) {
			size_t k = L + 10 <= AL_HEADER_LINE ? AL_HEADER_LINE - 9 - L : 1;
			padded.present |= AL_BIT(AL_F_PAD);
			padded.f[AL_F_PAD].p = dots;
			padded.f[AL_F_PAD].n = k;
		}
		r = &padded;
	}

	o = put_head(o, r->f[AL_F_TIMESTAMP].p, r->f[AL_F_TIMESTAMP].n,
		     r->plain & AL_BIT(AL_F_TIMESTAMP), r->f[AL_F_SEQ].u, r->version, t);
	/* v1: the body (al_encode_v1's bytes) is built in the same pass over the
	 * members as the line */
	uint8_t *bo = NULL;
	if (r->version == 1)
		bo = enc_v1_common(work + AL_HASH_LEN, r);
	o = put_members(o, (size_t)(o - line), r, t, ncaller, must_measure(r, ncaller), bo, &bo);
	if (!o)
		return -E2BIG;

	if (r->version == AL_V2) {
		uint8_t d[AL_HASH_LEN];
		long bn = v2_digest(r, t, work + AL_HASH_LEN, d);
		if (bn < 0)
			return bn;
		al_v2_chain_step(prev, r->f[AL_F_SEQ].u, (const char *)r->f[AL_F_TIMESTAMP].p, d,
				 out->hash);
		out->body_len = (size_t)bn;
	} else {
		uint8_t *body = work + AL_HASH_LEN;
		size_t body_len;
		if (r->version == 0) {
			body_len = (size_t)(o - line);
			memcpy(body, line, body_len);
			body[body_len++] = '}';
		} else {
			body_len = (size_t)(bo - body); /* = al_encode_v1(r, body) */
		}
		memcpy(work, prev, AL_HASH_LEN);
		al_chain_step_inplace(work, body_len, out->hash);
		out->body_len = body_len;
	}

	o = put_tail(o, out->hash);
	assert((size_t)(o - line) <= AL_LINE_MAX);
	return (long)(o - line);
}

long al_emit_members(const struct al_record *dec, uint8_t *out, uint8_t *body, size_t *body_len)
{
	const struct tdesc *t = type_desc(dec->type);
	size_t ncaller = dec->version == AL_V2 && dec->type == AL_T_EVENT ? dec->ncaller : 0;
	uint8_t *o, *bo = NULL;

	if (!t || dec->version > AL_V2 || dec->type == AL_T_HEADER)
		return -EINVAL; /* a header's pad depends on its seq */
	if (dec->version < AL_V2) { /* v2's check is al_v2_record_digest's */
		int r = check_record(dec, t, false);
		if (r < 0)
			return r;
	}
	if (dec->version == 1 && !body)
		return -EINVAL;
	o = put_members(out, V2_HEAD_MAX, dec, t, ncaller, must_measure(dec, ncaller),
			dec->version == 1 ? body : NULL, &bo);
	if (!o)
		return -E2BIG;
	if (body_len)
		*body_len = dec->version == 1 ? (size_t)(bo - body) : 0;
	return (long)(o - out);
}

long al_emit_framed_v01(uint8_t version, uint8_t type, uint64_t seq, const char *ts,
			const uint8_t *members, size_t n, const uint8_t *body_members, size_t bn,
			const uint8_t prev[AL_HASH_LEN], uint8_t *line, uint8_t *work,
			struct al_emit_out *out)
{
	const struct tdesc *t = type_desc(type);
	uint8_t *o, *b = work + AL_HASH_LEN;

	if (!t || type == AL_T_HEADER || version > 1 || t->min_version > version || seq > AL_INT_MAX)
		return -EINVAL;
	if (n > AL_LINE_MAX - V2_HEAD_MAX - 76 || (version == 1 && bn > AL_BODY_MAX - 64))
		return -E2BIG; /* not from al_emit_members */
	o = put_head(line, (const uint8_t *)ts, AL_TS_LEN, true, seq, version, t);
	o = put(o, members, n);
	if (version == 0) { /* the body is the line without its hash member, closed */
		b = put(b, line, (size_t)(o - line));
		*b++ = '}';
	} else { /* al_encode_v1's bytes: the common part, then the producer's */
		struct al_record h; /* only what enc_v1_common reads */
		h.type = type;
		h.f[AL_F_TIMESTAMP] = (struct al_val){(const uint8_t *)ts, AL_TS_LEN, 0};
		h.f[AL_F_SEQ] = (struct al_val){NULL, 0, seq};
		b = enc_v1_common(b, &h);
		b = put(b, body_members, bn);
	}
	memcpy(work, prev, AL_HASH_LEN);
	out->body_len = (size_t)(b - (work + AL_HASH_LEN));
	al_chain_step_inplace(work, out->body_len, out->hash);
	o = put_tail(o, out->hash);
	return (long)(o - line);
}

long al_emit_framed(uint8_t type, uint64_t seq, const char *ts, const uint8_t *members,
		    size_t n, const uint8_t digest[AL_HASH_LEN], const uint8_t prev[AL_HASH_LEN],
		    uint8_t *line, struct al_emit_out *out)
{
	return al_emit_framed_node(type, seq, ts, members, n, digest, prev, line, out, NULL, false);
}

long al_emit_framed_node(uint8_t type, uint64_t seq, const char *ts, const uint8_t *members,
			 size_t n, const uint8_t digest[AL_HASH_LEN], const uint8_t prev[AL_HASH_LEN],
			 uint8_t *line, struct al_emit_out *out, struct al_node_job *node, bool fast)
{
	const struct tdesc *t = type_desc(type);
	uint8_t *o;

	if (!t || type == AL_T_HEADER || t->min_version > AL_V2 || seq > AL_INT_MAX)
		return -EINVAL;
	if (n > AL_LINE_MAX - V2_HEAD_MAX - 76)
		return -E2BIG; /* not from al_emit_members */
	o = put_head(line, (const uint8_t *)ts, AL_TS_LEN, true, seq, AL_V2, t);
	o = put(o, members, n);
	al_v2_chain_step_node(prev, seq, ts, digest, out->hash, node, fast);
	out->body_len = 0;
	o = put_tail(o, out->hash);
	return (long)(o - line);
}

static uint8_t *enc_field(uint8_t *o, const struct al_record *r, int f)
{
	*o++ = F[f].tag;
	if (F[f].kind == K_INT)
		return al_put_le64(o, r->f[f].u);
	o = al_put_le32(o, (uint32_t)r->f[f].n);
	return put(o, r->f[f].p, r->f[f].n);
}

size_t al_encode_v1(const struct al_record *r, uint8_t *out)
{
	const struct tdesc *t = type_desc(r->type);
	uint8_t *o = out;

	assert(t);
	o = enc_v1_common(o, r);
	for (unsigned i = 0; i < t->n; i++)
		if (r->present & AL_BIT(t->order[i]))
			o = enc_field(o, r, t->order[i]);
	return (size_t)(o - out);
}

/* ---- strict parsing -------------------------------------------------------- */

struct pcur {
	const uint8_t *s;
	size_t n, i;
	uint8_t *dec;
	size_t dec_used;
	enum al_perr err;
	size_t err_off;
};

static bool fail(struct pcur *c, enum al_perr e)
{
	if (c->err == AL_PERR_OK) {
		c->err = e;
		c->err_off = c->i;
	}
	return false;
}

/* Inlined so that each literal's memcmp has a constant length the compiler
 * expands in place (the strict parser calls this a dozen times a line). */
/* A literal that does not match: the error is placed at its first byte that
 * differs (or where the line ends), not at its start. Cold: only refused
 * lines get here. */
static __attribute__((noinline, cold)) bool lit_fail(struct pcur *c, const char *s, size_t n)
{
	while (n && c->i < c->n && c->s[c->i] == (uint8_t)*s) {
		c->i++;
		s++;
		n--;
	}
	return fail(c, AL_PERR_SYNTAX);
}

static inline __attribute__((always_inline)) bool lit(struct pcur *c, const char *s, size_t n)
{
	if (c->n - c->i < n || memcmp(c->s + c->i, s, n) != 0)
		return lit_fail(c, s, n);
	c->i += n;
	return true;
}

static bool parse_uint(struct pcur *c, uint64_t *ret)
{
	uint64_t v = 0;
	size_t start = c->i;

	if (c->i >= c->n || c->s[c->i] < '0' || c->s[c->i] > '9')
		return fail(c, AL_PERR_SYNTAX);
	if (c->s[c->i] == '0') {
		c->i++;
		if (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9')
			return fail(c, AL_PERR_SYNTAX); /* leading zero */
		*ret = 0;
		return true;
	}
	while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') {
		if (c->i - start >= 16) { /* 17+ digits > 2^53-1 */
			c->i = start;
			return fail(c, AL_PERR_VALUE);
		}
		v = v * 10 + (uint64_t)(c->s[c->i++] - '0');
	}
	if (v > AL_INT_MAX) {
		c->i = start;
		return fail(c, AL_PERR_VALUE);
	}
	*ret = v;
	return true;
}

/* Parse a canonical JSON string (after its opening quote) into c->dec.
 * On return *esc_len is the length between the quotes. */
static bool parse_string(struct pcur *c, struct al_val *v, size_t *esc_len)
{
	size_t start = c->i;
	uint8_t *o = c->dec + c->dec_used;
	uint8_t *o0 = o;

	for (;;) {
		if (c->i >= c->n)
			return fail(c, AL_PERR_SYNTAX);
		uint8_t ch = c->s[c->i];
		if (ch == '"')
			break;
		if (ch < 0x20)
			return fail(c, AL_PERR_SYNTAX);
		if (ch == '\\') {
			if (c->i + 1 >= c->n)
				return fail(c, AL_PERR_SYNTAX);
			uint8_t e = c->s[c->i + 1], d;
			switch (e) {
			case '"': d = '"'; break;
			case '\\': d = '\\'; break;
			case 'b': d = '\b'; break;
			case 't': d = '\t'; break;
			case 'n': d = '\n'; break;
			case 'f': d = '\f'; break;
			case 'r': d = '\r'; break;
			case 'u': {
				int h, l;
				if (c->n - c->i < 6 || c->s[c->i + 2] != '0' || c->s[c->i + 3] != '0' ||
				    (h = lhex(c->s[c->i + 4])) < 0 || h > 1 ||
				    (l = lhex(c->s[c->i + 5])) < 0)
					return fail(c, AL_PERR_SYNTAX);
				d = (uint8_t)(h << 4 | l);
				if (esc_len_ascii(d) != 6) /* has a short form */
					return fail(c, AL_PERR_SYNTAX);
				c->i += 4;
				break;
			}
			default:
				return fail(c, AL_PERR_SYNTAX);
			}
			*o++ = d;
			c->i += 2;
			continue;
		}
		if (plain_ascii(ch)) {
			size_t j = plain_run_end(c->s, c->i, c->n);
			memcpy(o, c->s + c->i, j - c->i);
			o += j - c->i;
			c->i = j;
			continue;
		}
		if (ch < 0x80) {
			*o++ = ch;
			c->i++;
			continue;
		}
		size_t sub, len = utf8_seq(c->s + c->i, c->n - c->i, &sub);
		if (!len)
			return fail(c, AL_PERR_SYNTAX);
		memcpy(o, c->s + c->i, len);
		o += len;
		c->i += len;
	}
	*esc_len = c->i - start;
	c->i++; /* closing quote */
	v->p = o0;
	v->n = (size_t)(o - o0);
	c->dec_used += v->n;
	if (v->n == 0) { /* "" is never written: absent members are omitted */
		c->i = start;
		return fail(c, AL_PERR_VALUE);
	}
	return true;
}

static bool all_lhex(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (lhex(p[i]) < 0)
			return false;
	return true;
}

static bool check_value(struct pcur *c, int f, const struct al_val *v, size_t esc, size_t vstart)
{
	const struct fdesc *d = &F[f];
	bool ok = true;

	switch (d->kind) {
	case K_STR:
		ok = !d->cap || esc <= d->cap;
		break;
	case K_HEX:
		ok = v->n == d->cap && all_lhex(v->p, v->n);
		break;
	case K_KEYID:
		if (v->n <= d->cap && v->n % 2 == 0 && all_lhex(v->p, v->n))
			ok = true;
		else
			ok = v->n == d->cap && all_lhex(v->p, d->cap - AL_CUT_MARKER_LEN) &&
			     memcmp(v->p + d->cap - AL_CUT_MARKER_LEN, AL_CUT_MARKER,
				    AL_CUT_MARKER_LEN) == 0;
		break;
	case K_ENUM:
		ok = false;
		for (const char *const *w = d->words; *w; w++)
			if (strlen(*w) == v->n && memcmp(*w, v->p, v->n) == 0)
				ok = true;
		break;
	case K_TS:
		ok = al_parse_ts(v->p, v->n, NULL) == 0;
		break;
	case K_PAD:
		for (size_t i = 0; i < v->n; i++)
			ok = ok && v->p[i] == '.';
		/* line without pad: n + 1 ('\n') - 9 - k */
		if (ok) {
			size_t L = c->n + 1 - 9 - v->n;
			size_t k = L + 10 <= AL_HEADER_LINE ? AL_HEADER_LINE - 9 - L : 1;
			ok = L < AL_HEADER_LINE && v->n == k;
		}
		break;
	default:
		break;
	}
	if (!ok) {
		c->i = vstart;
		return fail(c, AL_PERR_VALUE);
	}
	return true;
}

static bool parse_value(struct pcur *c, int f, struct al_val *v)
{
	size_t vstart = c->i, esc = 0;

	if (F[f].kind == K_INT)
		return parse_uint(c, &v->u);
	if (!lit(c, "\"", 1) || !parse_string(c, v, &esc))
		return false;
	return check_value(c, f, v, esc, vstart);
}

/* A v2 member's value rule (format_v2.c); `size` is the record's size member
 * (parsed before range, which needs it). */
/* The v2 helpers stay out of al_parse's body (noinline): inlined, they
 * doubled it and slowed the v0/v1 fast path around them. */
static __attribute__((noinline)) bool check_v2_value(struct pcur *c, int f, const struct al_val *v, uint64_t size,
			   size_t vstart)
{
	struct al_v2_member m = {F[f].tag, F[f].kind == K_INT, v->p, v->n, v->u};

	if (al_v2_member_ok(&m, size))
		return true;
	c->i = vstart;
	return fail(c, AL_PERR_VALUE);
}

/* One caller field of a v2 event, at its key (after ,"): the key's pattern,
 * its order after the one before, the value's kind and cap, the count and the
 * JSON total (docs/format.md 14). */
static __attribute__((noinline)) bool parse_caller(struct pcur *c, struct al_parsed *out, size_t kstart, size_t *json)
{
	struct al_record *r = &out->rec;
	size_t k = c->i, e = k, vstart, esc;
	struct al_v2_field *cf = &out->caller[r->ncaller];

	while (e < c->n && e - k <= AL_CALLER_KEY_MAX && c->s[e] != '"')
		e++;
	if (e + 1 >= c->n || c->s[e] != '"' || c->s[e + 1] != ':' ||
	    !al_v2_caller_key_ok(c->s + k, e - k) ||
	    (r->ncaller && al_v2_caller_key_cmp(cf[-1].key, cf[-1].key_len, c->s + k, e - k) >= 0)) {
		/* not a key, a reserved or fixed one (out of order), unsorted, repeated */
		c->i = kstart;
		return fail(c, AL_PERR_SYNTAX);
	}
	if (r->ncaller == AL_CALLER_MAX) {
		c->i = kstart;
		return fail(c, AL_PERR_VALUE);
	}
	c->i = e + 2;
	vstart = c->i;
	cf->key = c->s + k;
	cf->key_len = e - k;
	if (c->i < c->n && c->s[c->i] == '"') {
		struct al_val v;
		c->i++;
		if (!parse_string(c, &v, &esc))
			return false;
		if (esc > AL_CALLER_STR_CAP) {
			c->i = vstart;
			return fail(c, AL_PERR_VALUE);
		}
		cf->is_int = false;
		cf->p = v.p;
		cf->n = v.n;
		cf->u = 0;
	} else {
		cf->is_int = true;
		cf->p = NULL;
		cf->n = 0;
		if (!parse_uint(c, &cf->u))
			return false;
	}
	*json += c->i - kstart; /* canonical: the line's bytes are the field's JSON */
	if (*json > AL_CALLER_JSON_MAX) {
		c->i = kstart;
		return fail(c, AL_PERR_VALUE);
	}
	r->ncaller++;
	return true;
}

static __attribute__((noinline)) bool v2_record_ok(const struct al_record *r, const struct tdesc *t)
{
	struct al_v2_member m[AL_ORDER_MAX];

	return al_v2_check_members(r->type, m, v2_members(r, t, m)) == 0;
}

enum al_perr al_parse(const uint8_t *line, size_t len, uint8_t *dec, struct al_parsed *out,
		      size_t *err_off)
{
	struct pcur c = {.s = line, .n = len, .dec = dec};
	struct al_record *r = &out->rec;
	const struct tdesc *t = NULL;
	uint64_t v;
	struct al_val tv;
	size_t esc, caller_json = 0;
	unsigned pos = 0;

	/* v0/v1's part only: a v0/v1 line never reads or writes v2's slots, and
	 * zeroing them too costs the verifier's fast path (rep stos) */
	memset(r, 0, offsetof(struct al_record, f[AL_F_KIND]));
	r->caller = out->caller;
	r->ncaller = 0;
	if (len + 1 > AL_LINE_MAX) {
		*err_off = AL_LINE_MAX - 1;
		return AL_PERR_TOO_LONG;
	}
	if (!lit(&c, "{\"@timestamp\":", 14) || !parse_value(&c, AL_F_TIMESTAMP, &r->f[AL_F_TIMESTAMP]))
		goto err;
	if (!lit(&c, ",\"seq\":", 7) || !parse_uint(&c, &r->f[AL_F_SEQ].u))
		goto err;
	r->present = AL_BIT(AL_F_TIMESTAMP) | AL_BIT(AL_F_SEQ);
	if (!lit(&c, ",\"v\":", 5))
		goto err;
	{
		size_t vpos = c.i;
		if (!parse_uint(&c, &v))
			goto err;
		if (v > AL_V2) {
			c.i = vpos;
			fail(&c, AL_PERR_VERSION);
			goto err;
		}
		r->version = (uint8_t)v;
		if (v == AL_V2)
			memset(&r->f[AL_F_KIND], 0, sizeof(r->f) - offsetof(struct al_record, f[AL_F_KIND]) +
							    offsetof(struct al_record, f));
	}
	if (!lit(&c, ",\"type\":\"", 9))
		goto err;
	{
		size_t tpos = c.i;
		if (!parse_string(&c, &tv, &esc))
			goto err;
		for (uint8_t ty = AL_T_EVENT; ty <= AL_T_MAX && !t; ty++)
			if (T[ty].min_version <= r->version && T[ty].namelen == tv.n &&
			    memcmp(T[ty].name, tv.p, tv.n) == 0) {
				t = &T[ty];
				r->type = ty;
			}
		c.dec_used -= tv.n; /* the type name is not kept */
		if (!t) {
			c.i = tpos;
			fail(&c, AL_PERR_VALUE);
			goto err;
		}
	}
	for (;;) {
		size_t kstart = c.i;
		if (!lit(&c, ",\"", 2))
			goto err;
		if (c.n - c.i >= 6 && memcmp(line + c.i, "hash\":", 6) == 0) {
			c.i += 6;
			out->hash_member_off = kstart;
			break;
		}
		/* the next key must be one of the remaining members, in order */
		unsigned j = pos;
		for (; j < t->n; j++) {
			const struct fdesc *d = &F[t->order[j]];
			if (c.n - c.i > (size_t)d->keylen + 1 && line[c.i + d->keylen] == '"' &&
			    line[c.i + d->keylen + 1] == ':' && memcmp(line + c.i, d->key, d->keylen) == 0)
				break;
		}
		if (j == t->n) {
			if (r->version == AL_V2 && r->type == AL_T_EVENT) {
				/* after the fixed members: caller fields only */
				if (!parse_caller(&c, out, kstart, &caller_json))
					goto err;
				pos = t->n;
				continue;
			}
			/* unknown, repeated or out-of-order key */
			c.i = kstart;
			fail(&c, AL_PERR_SYNTAX);
			goto err;
		}
		int f = t->order[j];
		c.i += F[f].keylen + 2;
		size_t vstart = c.i;
		if (!parse_value(&c, f, &r->f[f]))
			goto err;
		if (r->version == AL_V2 && v2_member(f) &&
		    !check_v2_value(&c, f, &r->f[f], r->f[AL_F_SIZE].u, vstart))
			goto err;
		r->present |= AL_BIT(f);
		pos = j + 1;
	}
	{
		size_t hpos = c.i;
		if (!lit(&c, "\"", 1))
			goto err;
		/* lowercase hex only: al_unhex refuses anything else in one pass */
		if (c.n - c.i < 64 || al_unhex(line + c.i, 64, out->hash) < 0) {
			fail(&c, AL_PERR_SYNTAX);
			goto err;
		}
		c.i += 64;
		if (!lit(&c, "\"}", 2))
			goto err;
		if (c.i != c.n) {
			fail(&c, AL_PERR_SYNTAX);
			goto err;
		}
		if ((r->present & t->required) != t->required) {
			c.i = hpos;
			fail(&c, AL_PERR_VALUE);
			goto err;
		}
		/* a header shorter than AL_HEADER_LINE without its pad is not canonical */
		if (r->type == AL_T_HEADER && !(r->present & AL_BIT(AL_F_PAD)) &&
		    len + 1 < AL_HEADER_LINE) {
			c.i = hpos;
			fail(&c, AL_PERR_VALUE);
			goto err;
		}
		uint64_t prev = r->present & PREV_ALL;
		uint64_t sealed = r->present & SEALED_ALL;
		if ((prev != 0 && prev != PREV_ALL) || (sealed != 0 && (sealed != SEALED_ALL || !prev))) {
			c.i = hpos;
			fail(&c, AL_PERR_VALUE);
			goto err;
		}
		/* the new types' rules across members (a seal's prev_*: together, open only) */
		if (t->min_version == AL_V2 && !v2_record_ok(r, t)) {
			c.i = hpos;
			fail(&c, AL_PERR_VALUE);
			goto err;
		}
	}
	return AL_PERR_OK;
err:
	*err_off = c.err_off;
	return c.err;
}

/* Out of line: the v0/v1 path stays as the verifier's fast path had it. */
static __attribute__((noinline)) bool check_hash_v2(const struct al_parsed *p,
						    const uint8_t prev[AL_HASH_LEN], uint8_t *body,
						    uint8_t out_hash[AL_HASH_LEN])
{
	uint8_t d[AL_HASH_LEN];
	const struct tdesc *t = type_desc(p->rec.type);

	if (!t || p->rec.f[AL_F_TIMESTAMP].n != AL_TS_LEN || v2_digest(&p->rec, t, body, d) < 0) {
		memset(out_hash, 0, AL_HASH_LEN); /* not a parsed line */
		return false;
	}
	al_v2_chain_step(prev, p->rec.f[AL_F_SEQ].u, (const char *)p->rec.f[AL_F_TIMESTAMP].p, d,
			 out_hash);
	return CRYPTO_memcmp(out_hash, p->hash, AL_HASH_LEN) == 0;
}

bool al_check_hash(const struct al_parsed *p, const uint8_t *line, const uint8_t prev[AL_HASH_LEN],
		   uint8_t *work, uint8_t out_hash[AL_HASH_LEN])
{
	uint8_t *body = work + AL_HASH_LEN;
	size_t n;

	if (p->rec.version == AL_V2)
		return check_hash_v2(p, prev, body, out_hash);
	if (p->rec.version == 0) {
		n = p->hash_member_off;
		memcpy(body, line, n);
		body[n++] = '}';
	} else {
		n = al_encode_v1(&p->rec, body);
	}
	memcpy(work, prev, AL_HASH_LEN);
	al_chain_step_inplace(work, n, out_hash);
	return CRYPTO_memcmp(out_hash, p->hash, AL_HASH_LEN) == 0;
}
