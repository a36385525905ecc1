/* SPDX-License-Identifier: MIT */
/*
 * The format layer (docs/format.md): pure functions, no I/O, no allocation.
 * Shared by the writer and the verifier; there is no second copy.
 *
 * Values flow in three forms:
 *   raw      the caller's bytes (any bytes);
 *   decoded  after UTF-8 repair and cut (docs/format.md 3, steps 1 and 3):
 *            what the v1 body hashes;
 *   escaped  what stands between the quotes in the line.
 */
#ifndef AUDITLOG_FORMAT_H
#define AUDITLOG_FORMAT_H

#include "symbols.h"

#define al_v2_record_digest auditlog__al_v2_record_digest
#define al_emit_members auditlog__al_emit_members
#define al_emit_framed auditlog__al_emit_framed
#define al_emit_framed_node auditlog__al_emit_framed_node
#define al_emit_framed_v01 auditlog__al_emit_framed_v01

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AL_LINE_MAX 8192u             /* a line, '\n' included */
#define AL_BODY_MAX (AL_LINE_MAX + 64u) /* a body is never longer than its line + slack */
#define AL_HASH_LEN 32u
#define AL_HEADER_LINE 1024u          /* a padded header line, '\n' included */
#define AL_INT_MAX 9007199254740991ull /* 2^53 - 1 */
#define AL_CUT_MARKER "\xe2\x80\xa6[truncated]"
#define AL_CUT_MARKER_LEN 14u

enum al_type { AL_T_EVENT = 1, AL_T_HEADER = 2, AL_T_RECOVERY = 3 };
/* v2 adds types 4-7 (seal, checkpoint, tree, clock): format_v2.h. */

enum al_field {
	AL_F_TIMESTAMP,
	AL_F_SEQ,
	AL_F_ACTION,
	AL_F_OUTCOME,
	AL_F_RV,
	AL_F_SLOT,
	AL_F_SESSION,
	AL_F_MECHANISM,
	AL_F_KEY_LABEL,
	AL_F_KEY_ID,
	AL_F_ACTOR,
	AL_F_DETAIL,
	AL_F_FILE_ID,
	AL_F_CHAIN_ID,
	AL_F_REASON,
	AL_F_PREV_NAME,
	AL_F_PREV_SEQ,
	AL_F_PREV_HASH,
	AL_F_PREV_SIZE,
	AL_F_PAD,
	AL_F_LAST_SEQ,
	AL_F_DAMAGE_OFFSET,
	AL_F_DAMAGE_LENGTH,
	AL_F_DAMAGE_SHA256,
	AL_F_SEALED_NAME,    /* header: a file sealed before any record of it was durable */
	AL_F_SEALED_FILE_ID,
	AL_F_KEY2_LABEL, /* event: the second key of a derive, wrap or unwrap */
	AL_F_KEY2_ID,
	/* v2 (docs/format.md 12): the members of seal, checkpoint, tree and clock */
	AL_F_KIND,
	AL_F_EPOCH,
	AL_F_SEAL_KEY,
	AL_F_PREV_SEAL,
	AL_F_PREV_KIND,
	AL_F_MAC,
	AL_F_SIZE,
	AL_F_FIRST_SEQ,
	AL_F_RANGE,
	AL_F_NOTE,
	AL_F_EXPECTED,
	AL_F_WALL,
	AL_F_PREV_KEY, /* seal: the re-key mark (docs/format.md 17.4, 19.2) */
	AL_F__MAX
};

#define AL_BIT(f) (UINT64_C(1) << (f))

struct al_val {
	const uint8_t *p; /* str: bytes (raw or decoded, see above) */
	size_t n;
	uint64_t u; /* int */
};

/* One caller-defined field of a v2 event (docs/format.md 14), value decoded. */
struct al_v2_field {
	const uint8_t *key;
	size_t key_len;
	bool is_int;
	const uint8_t *p;
	size_t n;
	uint64_t u;
};

/* One record. `present` says which fields are set. */
struct al_record {
	uint8_t version;
	uint8_t type;
	uint64_t present;
	uint64_t plain; /* fields whose bytes are printable ASCII needing no escape (set by
			 * al_record_decode; an optimisation, 0 is always correct) */
	struct al_val f[AL_F__MAX];
	/* v2 events only: the caller-defined fields, decoded, in line order (sorted,
	 * docs/format.md 14.3). Read only when version is 2 and type is event, so a
	 * v0/v1 record may leave them unset. Not owned. */
	const struct al_v2_field *caller;
	size_t ncaller;
};

/* Where a canonical line failed to parse. */
enum al_perr {
	AL_PERR_OK = 0,
	AL_PERR_SYNTAX,    /* not the canonical shape (bad JSON, order, spacing, escape...) */
	AL_PERR_VALUE,     /* shape right, a value breaks its rule (cap, enum, hex, range) */
	AL_PERR_VERSION,   /* "v" is not a version this code knows */
	AL_PERR_TOO_LONG   /* longer than AL_LINE_MAX */
};

#define AL_CALLER_MAX 16u /* caller-defined fields of one record (docs/format.md 14) */

struct al_parsed {
	struct al_record rec;        /* strings decoded into the caller's buffer; rec.caller
				      * points into `caller` below (re-point it after a copy) */
	uint8_t hash[AL_HASH_LEN];   /* the line's "hash" */
	size_t hash_member_off;      /* offset of ,"hash":" in the line (v0 body) */
	struct al_v2_field caller[AL_CALLER_MAX]; /* keys point into the line; last, out of
						   * the v0/v1 fast path's cache lines */
};

/* Field metadata (docs/format.md 2). */
const char *al_field_key(enum al_field f);
const char *al_type_name(uint8_t type);

/* Decode raw bytes into their decoded form for field f (UTF-8 repair and cut;
 * key_id: hex and cut). out must hold al_decoded_max(f, n) bytes. Returns the
 * decoded length (0 = absent). */
size_t al_decode_field(enum al_field f, const uint8_t *raw, size_t n, uint8_t *out);
size_t al_decoded_max(enum al_field f, size_t raw_len);
/* The same for any text with a cap on its escaped length (0: none): UTF-8
 * repair, then the cut with its marker (docs/format.md 3, steps 1 and 3).
 * out must hold min(3 n, cap) bytes (3 n without a cap). */
size_t al_decode_text(const uint8_t *raw, size_t n, size_t cap, uint8_t *out);
/* Length of decoded (valid UTF-8) bytes once escaped (docs/format.md 3 step 2). */
size_t al_escaped_len(const uint8_t *dec, size_t n);

/* Convert a record whose string fields are raw into one whose fields are
 * decoded, using `buf` (size `cap`) for the bytes. Fields whose result is
 * empty are dropped. out may be raw itself. Returns 0 or -ENOBUFS. */
int al_record_decode(const struct al_record *raw, struct al_record *out, uint8_t *buf, size_t cap);

/* Serialize a decoded record as its canonical line, hashing it onto `prev`.
 * line: AL_LINE_MAX bytes; work: AL_HASH_LEN + AL_BODY_MAX bytes (the body is
 * built at work + AL_HASH_LEN). Header records get their pad computed here.
 * Versions 0, 1 and 2 (v2: every type of docs/format.md 12, an event with its
 * caller fields; the chain step of section 15 over the body digest of 13).
 * Returns the line length ('\n' included) or -E2BIG / -EINVAL: -EINVAL for a
 * record the format does not allow (a type its version lacks, a required
 * member missing, a v2 member or caller field that breaks its rule), -E2BIG
 * for a line over AL_LINE_MAX or caller fields over 2048 bytes (14.2). */
struct al_emit_out {
	size_t body_len; /* v0/v1: the hashed body; v2: B_n (0 from al_emit_framed) */
	uint8_t hash[AL_HASH_LEN];
};
long al_emit(const struct al_record *dec, const uint8_t prev[AL_HASH_LEN], uint8_t *line,
	     uint8_t *work, struct al_emit_out *out);

/* v2, split as the writer runs it (DESIGN.md "Chain step (v2)"). The
 * producer computes the body digest D_n of a decoded v2 record (docs/format.md
 * 13; the body B_n is built in `body`, AL_BODY_MAX bytes) and returns B_n's
 * length, or -EINVAL / -E2BIG as al_emit would; seq and @timestamp are not
 * read. It then renders the record's members as its line carries them, from
 * the one after "type" through the caller fields (al_emit_members; out:
 * AL_LINE_MAX bytes; a record al_v2_record_digest accepted, not checked
 * again; -E2BIG when even the longest seq would put the line over
 * AL_LINE_MAX). The worker adds the common four, the chain step and the hash
 * (al_emit_framed; ts: AL_TS_LEN bytes); it takes D_n and the members as
 * given, not checked against each other. Neither takes a header (its pad
 * depends on its seq). */
long al_v2_record_digest(const struct al_record *dec, uint8_t *body, uint8_t digest[AL_HASH_LEN]);
/* Every version's members, as above. v0 and v1 records are checked here
 * (v2's by al_v2_record_digest); a v1 record also gets the members' part of
 * its body (al_encode_v1's bytes after seq) in body (AL_BODY_MAX bytes),
 * *body_len its length (0 for v0 and v2, where body may be NULL). */
long al_emit_members(const struct al_record *dec, uint8_t *out, uint8_t *body, size_t *body_len);
/* The worker's half of a v0/v1 record split the same way: the common four,
 * the producer's members (al_emit_members), then the chain step over the
 * body, built in work (AL_HASH_LEN + AL_BODY_MAX bytes) from @timestamp, seq
 * and, in v1, the members' part of the body (body_members, bn bytes; v0's
 * body is the line itself). Not a header. */
long al_emit_framed_v01(uint8_t version, uint8_t type, uint64_t seq, const char *ts,
			const uint8_t *members, size_t n, const uint8_t *body_members, size_t bn,
			const uint8_t prev[AL_HASH_LEN], uint8_t *line, uint8_t *work,
			struct al_emit_out *out);
long al_emit_framed(uint8_t type, uint64_t seq, const char *ts, const uint8_t *members,
		    size_t n, const uint8_t digest[AL_HASH_LEN], const uint8_t prev[AL_HASH_LEN],
		    uint8_t *line, struct al_emit_out *out);
/* A Merkle interior node to hash beside a v2 chain step:
 * out = SHA-256(0x01 || l || r) (docs/format.md 18). */
struct al_node_job {
	const uint8_t *l, *r;
	uint8_t out[AL_HASH_LEN];
};
/* al_emit_framed, and node's hash with it (when node is not NULL and the
 * record is formed): with SHA-NI (fast) the two run interleaved, the node
 * costing little more than the chain step's latency alone. */
long al_emit_framed_node(uint8_t type, uint64_t seq, const char *ts, const uint8_t *members,
			 size_t n, const uint8_t digest[AL_HASH_LEN], const uint8_t prev[AL_HASH_LEN],
			 uint8_t *line, struct al_emit_out *out, struct al_node_job *node, bool fast);

/* v1 body of a decoded record into out (AL_BODY_MAX). Returns its length. */
size_t al_encode_v1(const struct al_record *dec, uint8_t *out);

/* Chain step: out = SHA-256(prev || body), where the caller placed prev in
 * buf[0..32) and the body right after it. */
void al_chain_step_inplace(uint8_t *buf, size_t body_len, uint8_t out[AL_HASH_LEN]);

/* Strict parser: accepts exactly the canonical lines (without '\n') of
 * versions 0, 1 and 2 and nothing else (AL_PERR_VERSION for any other "v").
 * Fields not in `present` are zero, except that a v0/v1 line leaves the
 * slots of v2's members (AL_F_KIND and after) unwritten: read `present`. Decoded strings go to `dec` (at least len bytes). On failure
 * returns the reason and sets *err_off to the byte where it was found. */
enum al_perr al_parse(const uint8_t *line, size_t len, uint8_t *dec, struct al_parsed *out,
		      size_t *err_off);

/* Recompute a parsed line's hash onto prev; true when it matches the line's
 * hash (constant-time compare). work: AL_HASH_LEN + AL_BODY_MAX bytes. v2:
 * D_n and the two-block step of format_v2.c (docs/format.md 13, 15). */
bool al_check_hash(const struct al_parsed *p, const uint8_t *line, const uint8_t prev[AL_HASH_LEN],
		   uint8_t *work, uint8_t out_hash[AL_HASH_LEN]);

/* RFC 3339 with 9 fraction digits and Z (30 bytes, no NUL). ns since epoch. */
#define AL_TS_LEN 30u
void al_format_ts(uint64_t ns, char out[AL_TS_LEN]);
/* Same, reusing the date and time of day from the previous call in the same
 * second (the worker formats up to millions a second). */
struct al_ts_cache {
	uint64_t sec;
	bool valid;
	char prefix[20]; /* "YYYY-MM-DDTHH:MM:SS." */
};
void al_format_ts_cached(struct al_ts_cache *c, uint64_t ns, char out[AL_TS_LEN]);
/* Check the same format (years 1970-9999, a real calendar date); -EINVAL on
 * anything else. ret_sec (may be NULL): seconds since the epoch. The fixed
 * format makes byte order equal time order, so callers compare strings. */
int al_parse_ts(const uint8_t *s, size_t n, int64_t *ret_sec);
/* ns since 1970 of a record's @timestamp (AL_TS_LEN bytes, 2.1's form); 0 when
 * it is not that form or before 1970. */
uint64_t al_ts_ns(const void *ts);

/* Little-endian fixed-width integers, as every body and derivation writes
 * them (docs/format.md 4, 13, 16); each returns the byte after it. */
static inline uint8_t *al_put_le32(uint8_t *o, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		*o++ = (uint8_t)(v >> (8 * i));
	return o;
}

static inline uint8_t *al_put_le64(uint8_t *o, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		*o++ = (uint8_t)(v >> (8 * i));
	return o;
}

void al_hex(const uint8_t *in, size_t n, char *out); /* 2n lowercase digits, no NUL */
/* v in decimal at o (1-20 digits, no NUL); returns the end */
uint8_t *al_put_dec(uint8_t *o, uint64_t v);
int al_unhex(const uint8_t *in, size_t n2, uint8_t *out); /* n2 even; -EINVAL */
/* The format's UTF-8 reading (docs/format.md 3, step 1), for those who show
 * bytes to people (the verifier's output): the length of the well-formed
 * sequence at s (n >= 1), or 0 when ill-formed, with *sub set to the length
 * of its maximal subpart (>= 1: the bytes one U+FFFD replaces). */
size_t al_utf8_seq(const uint8_t *s, size_t n, size_t *sub);

#endif
