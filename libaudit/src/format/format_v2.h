/* SPDX-License-Identifier: MIT */
/*
 * Format v2, the record side (docs/format.md Part II, sections 12-15): the v2
 * body, caller-defined fields, the body digest and the two-block chain step
 * whose result is also the record's RFC 6962 leaf hash. Pure: no I/O, no
 * allocation.
 */
#ifndef AUDITLOG_FORMAT_V2_H
#define AUDITLOG_FORMAT_V2_H

#include "symbols.h"
#include "format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define al_sha256 auditlog__al_sha256
#define al_sha256_2blk_x2 auditlog__al_sha256_2blk_x2
#define al_sha256_ni_ok auditlog__al_sha256_ni_ok
#define al_v2_body auditlog__al_v2_body
#define al_v2_caller_check auditlog__al_v2_caller_check
#define al_v2_caller_decode auditlog__al_v2_caller_decode
#define al_v2_caller_json_len auditlog__al_v2_caller_json_len
#define al_v2_caller_key_ok auditlog__al_v2_caller_key_ok
#define al_v2_caller_sort auditlog__al_v2_caller_sort
#define al_v2_chain_step auditlog__al_v2_chain_step
#define al_v2_chain_step_node auditlog__al_v2_chain_step_node
#define al_v2_leaf_input auditlog__al_v2_leaf_input
#define al_v2_check_members auditlog__al_v2_check_members
#define al_v2_member_key auditlog__al_v2_member_key
#define al_v2_member_ok auditlog__al_v2_member_ok
#define al_v2_caller_key_cmp auditlog__al_v2_caller_key_cmp
#define al_v2_seal_members auditlog__al_v2_seal_members
#define al_v2_record_members auditlog__al_v2_record_members

#define AL_V2 2u

/* Type codes beyond v1's (section 12). */
enum al_v2_type { AL_T_SEAL = 4, AL_T_CHECKPOINT = 5, AL_T_TREE = 6, AL_T_CLOCK = 7 };

/* Tags of the v2 members (section 12); v1's are in docs/format.md 2.2-2.4. */
enum al_v2_tag {
	AL_TAG_CHAIN_ID = 0x11,
	AL_TAG_KIND = 0x50,
	AL_TAG_EPOCH = 0x51,
	AL_TAG_SEAL_KEY = 0x52,
	AL_TAG_PREV_SEAL = 0x53,
	AL_TAG_PREV_KIND = 0x54,
	AL_TAG_MAC = 0x55,
	AL_TAG_PREV_KEY = 0x56,
	AL_TAG_SIZE = 0x60,
	AL_TAG_FIRST_SEQ = 0x61,
	AL_TAG_RANGE = 0x62,
	AL_TAG_NOTE = 0x63,
	AL_TAG_EXPECTED = 0x70,
	AL_TAG_WALL = 0x71,
	AL_TAG_CALLER_STR = 0x80,
	AL_TAG_CALLER_INT = 0x81,
};

#define AL_V2_LEAF_INPUT_LEN 102u /* prev 32 || le64 seq || 30 ts || D 32 */
#define AL_CALLER_KEY_MAX 131u
#define AL_CALLER_STR_CAP 256u
#define AL_CALLER_JSON_MAX 2048u

/* One fixed member of a v2 body, in line order (tag from the tables). */
struct al_v2_member {
	uint8_t tag;
	bool is_int;
	const uint8_t *p; /* str: decoded bytes */
	size_t n;
	uint64_t u; /* int */
};

/* struct al_v2_field, one caller-defined field (section 14): format.h. */

/* The members of a parsed or decoded record in line order, as al_v2_body,
 * al_v2_check_members, al_v2_seal_check and al_v2_tree_check take them
 * (without @timestamp, seq, v, type, hash; caller fields not included).
 * Returns their count (0 for an unknown type). format.c. */
#define AL_V2_MEMBERS_MAX 11u
size_t al_v2_record_members(const struct al_record *r, struct al_v2_member m[AL_V2_MEMBERS_MAX]);

/* SHA-256 of n bytes (the fast path of chain.c's step). */
void al_sha256(const void *p, size_t n, uint8_t out[AL_HASH_LEN]);

/* True when this CPU runs the SHA-NI code below (CPUID: SHA, SSE4.1, SSSE3;
 * false off x86-64). Ask once and keep the answer. */
bool al_sha256_ni_ok(void);

/* oa = SHA-256 of a's first na bytes, ob = that of b's first nb, each of
 * 56..119 bytes (exactly two blocks once padded): computed together with
 * SHA-NI when `fast` (which only al_sha256_ni_ok() may make true: without
 * SHA-NI the instructions fault), one after the other with OpenSSL
 * otherwise. a and b are 128-byte buffers: their tails are overwritten with
 * the padding. The outputs may not alias a or b. */
void al_sha256_2blk_x2(uint8_t a[128], size_t na, uint8_t b[128], size_t nb, uint8_t oa[AL_HASH_LEN],
		       uint8_t ob[AL_HASH_LEN], bool fast);

/* True when key matches section 14.1: the pattern, and no reserved name. */
bool al_v2_caller_key_ok(const uint8_t *key, size_t n);

/* A caller's string value made canonical (section 14.2: section 3 with cap
 * 256) into out (AL_CALLER_STR_CAP bytes). Returns its length; 0 means the
 * field is omitted. */
size_t al_v2_caller_decode(const uint8_t *raw, size_t n, uint8_t out[AL_CALLER_STR_CAP]);

/* Keys in bytewise (memcmp) order, a prefix first (14.3): <0, 0, >0. */
int al_v2_caller_key_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn);

/* Sort fields by key, bytewise (14.3), in place; stable, no allocation. */
void al_v2_caller_sort(struct al_v2_field *f, size_t n);

/* The caller fields' JSON length: sum of ,"key":value (section 14.2). */
size_t al_v2_caller_json_len(const struct al_v2_field *f, size_t n);

/* Check a canonical set (what a line may carry): at most 16, keys valid,
 * strictly ascending (no duplicate), strings non-empty and at most 256
 * escaped bytes, integers <= 2^53-1, JSON total <= 2048. Returns 0, -EINVAL,
 * or -E2BIG (only the total is over). */
int al_v2_caller_check(const struct al_v2_field *f, size_t n);

/* The v2 body B_n (section 13) of a record of `type`: members in line order
 * (without @timestamp, seq, v, type, hash), then caller fields in line order.
 * Returns its length, or -E2BIG when it does not fit `cap`. */
long al_v2_body(uint8_t type, const struct al_v2_member *m, size_t nm, const struct al_v2_field *f,
		size_t nf, uint8_t *out, size_t cap);

/* E_n = prev || le64(seq) || ts || D_n (section 15). */
void al_v2_leaf_input(const uint8_t prev[AL_HASH_LEN], uint64_t seq, const char ts[AL_TS_LEN],
		      const uint8_t digest[AL_HASH_LEN], uint8_t out[AL_V2_LEAF_INPUT_LEN]);

/* hash_n = SHA-256(0x00 || E_n): two compression blocks (section 15). */
void al_v2_chain_step(const uint8_t prev[AL_HASH_LEN], uint64_t seq, const char ts[AL_TS_LEN],
		      const uint8_t digest[AL_HASH_LEN], uint8_t out[AL_HASH_LEN]);

/* The same, and node's hash beside it (format.h, al_emit_framed_node). */
void al_v2_chain_step_node(const uint8_t prev[AL_HASH_LEN], uint64_t seq, const char ts[AL_TS_LEN],
			   const uint8_t digest[AL_HASH_LEN], uint8_t out[AL_HASH_LEN],
			   struct al_node_job *node, bool fast);

/* The key of a v2 member tag (section 12), NULL for a tag v2 does not add. */
const char *al_v2_member_key(uint8_t tag);

/* The value rule of one v2 member alone (sections 12, 19-21: a kind word,
 * epoch <= 2^32-1, hex lengths, size >= 1, timestamps; range: 64 hex digits
 * per bit of `size`, the record's size member). Members v1 defines (tags
 * below 0x50, chain_id too) are true here: their rules are format.c's. */
bool al_v2_member_ok(const struct al_v2_member *m, uint64_t size);

/* Check the members of a seal, checkpoint, tree or clock record (line order,
 * required and optional members, kinds and value rules of sections 12 and
 * 19-21): 0, or -EINVAL naming nothing more. Other types: -ENOTSUP (their
 * members are v1's, format.c). */
int al_v2_check_members(uint8_t type, const struct al_v2_member *m, size_t n);

/* A seal's fields (section 19). kind: "batch", "idle", "open", "close". */
struct al_v2_seal {
	const char *kind;
	uint32_t epoch;
	uint8_t key_id[8];
	char chain_id[32];   /* 32 lowercase hex, no NUL needed */
	bool has_prev;       /* open only: the chain's previous seal */
	uint64_t prev_seal;
	const char *prev_kind;
	bool has_prev_key;   /* with has_prev: that seal was under another key (17.4) */
	uint8_t prev_key[8];
	bool has_mac;        /* false: the members S_n is made of (the MAC input) */
	uint8_t mac[AL_HASH_LEN];
};
/* The seal's members in line order into m (room for AL_V2_SEAL_MEMBERS); hex is scratch for
 * the hex values (AL_V2_SEAL_HEX bytes) and must outlive m. Returns the
 * number of members, or -EINVAL. */
#define AL_V2_SEAL_HEX (16u + 64u + 16u)
#define AL_V2_SEAL_MEMBERS 8u
int al_v2_seal_members(const struct al_v2_seal *s, struct al_v2_member m[AL_V2_SEAL_MEMBERS], char *hex);

#endif
