/* SPDX-License-Identifier: MIT */
/* Format v2 records: body, caller fields, chain step (docs/format.md 12-15). */

#include "format_v2.h"
#include "merkle.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

/* Every member key docs/format.md defines, any type and version (14.1),
 * with its length: producers check every caller key, so no strlen here. */
#define R(k) { k, sizeof(k) - 1 }
static const struct {
	const char *k;
	uint8_t n;
} reserved[] = {
	R("seq"), R("v"), R("type"), R("hash"), R("action"), R("outcome"), R("rv"), R("slot"),
	R("session"), R("mechanism"), R("key_label"), R("key_id"), R("key2_label"), R("key2_id"),
	R("actor"), R("detail"),
	R("file_id"), R("chain_id"), R("reason"), R("prev_name"), R("prev_seq"), R("prev_hash"),
	R("prev_size"), R("pad"), R("last_seq"), R("damage_offset"), R("damage_length"),
	R("damage_sha256"), R("kind"), R("epoch"), R("seal_key"), R("prev_seal"), R("prev_kind"), R("prev_key"),
	R("mac"), R("size"), R("first_seq"), R("range"), R("note"), R("expected"), R("wall"),
};
#undef R

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
		if (reserved[r].n == n && memcmp(reserved[r].k, key, n) == 0)
			return false;
	return true;
}

size_t al_v2_caller_decode(const uint8_t *raw, size_t n, uint8_t out[AL_CALLER_STR_CAP])
{
	/* decoded <= escaped <= cap, so 256 bytes of out always suffice */
	return n ? al_decode_text(raw, n, AL_CALLER_STR_CAP, out) : 0;
}

int al_v2_caller_key_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	if (c)
		return c;
	return an < bn ? -1 : an > bn;
}

static int key_cmp(const struct al_v2_field *a, const struct al_v2_field *b)
{
	return al_v2_caller_key_cmp(a->key, a->key_len, b->key, b->key_len);
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
		total += 2 + f[i].key_len + 2 + (f[i].is_int ? dec_len(f[i].u) : 2 + al_escaped_len(f[i].p, f[i].n));
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
				: (f[i].n == 0 || al_escaped_len(f[i].p, f[i].n) > AL_CALLER_STR_CAP))
			return -EINVAL;
	}
	return al_v2_caller_json_len(f, n) > AL_CALLER_JSON_MAX ? -E2BIG : 0;
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
			o = al_put_le64(o, m[i].u);
		} else {
			o = al_put_le32(o, (uint32_t)m[i].n);
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
			o = al_put_le64(o, f[i].u);
		} else {
			o = al_put_le32(o, (uint32_t)f[i].n);
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
	al_put_le64(out + 32, seq);
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

void al_v2_chain_step_node(const uint8_t prev[AL_HASH_LEN], uint64_t seq, const char ts[AL_TS_LEN],
			   const uint8_t digest[AL_HASH_LEN], uint8_t out[AL_HASH_LEN],
			   struct al_node_job *node, bool fast)
{
	uint8_t a[128], b[128]; /* two blocks each, padded in place */

	if (!node || !fast) {
		al_v2_chain_step(prev, seq, ts, digest, out);
		if (node)
			al_merkle_node(node->l, node->r, node->out);
		return;
	}
	a[0] = 0x00;
	al_v2_leaf_input(prev, seq, ts, digest, a + 1);
	al_merkle_node_msg(b, node->l, node->r);
	al_sha256_2blk_x2(a, 1 + AL_V2_LEAF_INPUT_LEN, b, AL_MERKLE_NODE_MSG_LEN, out, node->out, true);
}

/* ---- the members of the new record types (sections 12, 19-21) ------------- */

enum { OPT = 0, REQ = 1, OPEN_ONLY = 2, REKEY = 3 /* with the OPEN_ONLY pair */ };

struct mdesc {
	uint8_t tag;
	bool is_int;
	uint8_t need;
};

static const struct mdesc seal_m[] = {
	{ AL_TAG_KIND, false, REQ },       { AL_TAG_EPOCH, true, REQ },
	{ AL_TAG_SEAL_KEY, false, REQ },   { AL_TAG_CHAIN_ID, false, REQ },
	{ AL_TAG_PREV_SEAL, true, OPEN_ONLY }, { AL_TAG_PREV_KIND, false, OPEN_ONLY },
	{ AL_TAG_PREV_KEY, false, REKEY },
	{ AL_TAG_MAC, false, REQ },
};
static const struct mdesc checkpoint_m[] = {
	{ AL_TAG_SIZE, true, REQ }, { AL_TAG_FIRST_SEQ, true, REQ },
	{ AL_TAG_RANGE, false, REQ }, { AL_TAG_NOTE, false, REQ },
};
static const struct mdesc tree_m[] = {
	{ AL_TAG_SIZE, true, REQ }, { AL_TAG_FIRST_SEQ, true, REQ }, { AL_TAG_RANGE, false, REQ },
};
static const struct mdesc clock_m[] = {
	{ AL_TAG_EPOCH, true, REQ }, { AL_TAG_EXPECTED, false, REQ }, { AL_TAG_WALL, false, REQ },
};

const char *al_v2_member_key(uint8_t tag)
{
	switch (tag) {
	case AL_TAG_KIND: return "kind";
	case AL_TAG_EPOCH: return "epoch";
	case AL_TAG_SEAL_KEY: return "seal_key";
	case AL_TAG_PREV_SEAL: return "prev_seal";
	case AL_TAG_PREV_KIND: return "prev_kind";
	case AL_TAG_PREV_KEY: return "prev_key";
	case AL_TAG_MAC: return "mac";
	case AL_TAG_SIZE: return "size";
	case AL_TAG_FIRST_SEQ: return "first_seq";
	case AL_TAG_RANGE: return "range";
	case AL_TAG_NOTE: return "note";
	case AL_TAG_EXPECTED: return "expected";
	case AL_TAG_WALL: return "wall";
	default: return NULL;
	}
}

static bool is_lhex(const uint8_t *p, size_t n, size_t want)
{
	if (n != want)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return true;
}

static bool is_kind(const uint8_t *p, size_t n)
{
	static const char *const kinds[] = { "batch", "idle", "open", "close" };

	for (size_t i = 0; i < 4; i++)
		if (strlen(kinds[i]) == n && memcmp(kinds[i], p, n) == 0)
			return true;
	return false;
}

bool al_v2_member_ok(const struct al_v2_member *m, uint64_t size)
{
	switch (m->tag) {
	case AL_TAG_KIND:
	case AL_TAG_PREV_KIND: return is_kind(m->p, m->n);
	case AL_TAG_EPOCH: return m->u <= UINT32_MAX;
	case AL_TAG_SEAL_KEY:
	case AL_TAG_PREV_KEY: return is_lhex(m->p, m->n, 16);
	case AL_TAG_CHAIN_ID: return is_lhex(m->p, m->n, 32);
	case AL_TAG_MAC: return is_lhex(m->p, m->n, 64);
	case AL_TAG_PREV_SEAL:
	case AL_TAG_FIRST_SEQ: return m->u <= AL_INT_MAX;
	case AL_TAG_SIZE: return m->u >= 1 && m->u <= AL_INT_MAX;
	case AL_TAG_NOTE: return m->n > 0 && m->n <= AL_LINE_MAX;
	case AL_TAG_EXPECTED:
	case AL_TAG_WALL: return m->n == AL_TS_LEN && al_parse_ts(m->p, m->n, NULL) == 0;
	case AL_TAG_RANGE: return is_lhex(m->p, m->n, 64u * (size_t)__builtin_popcountll(size));
	default: return true;
	}
}

int al_v2_check_members(uint8_t type, const struct al_v2_member *m, size_t n)
{
	const struct mdesc *d;
	size_t nd, j = 0, prev = 0, rekey = 0;
	bool open = false;
	uint64_t size = 0;

	switch (type) {
	case AL_T_SEAL: d = seal_m; nd = sizeof(seal_m) / sizeof(seal_m[0]); break;
	case AL_T_CHECKPOINT: d = checkpoint_m; nd = sizeof(checkpoint_m) / sizeof(checkpoint_m[0]); break;
	case AL_T_TREE: d = tree_m; nd = sizeof(tree_m) / sizeof(tree_m[0]); break;
	case AL_T_CLOCK: d = clock_m; nd = sizeof(clock_m) / sizeof(clock_m[0]); break;
	default: return -ENOTSUP;
	}
	for (size_t i = 0; i < nd; i++) {
		if (j < n && m[j].tag == d[i].tag) {
			if (m[j].is_int != d[i].is_int || (!m[j].is_int && !m[j].p && m[j].n) ||
			    !al_v2_member_ok(&m[j], size))
				return -EINVAL;
			if (m[j].tag == AL_TAG_KIND)
				open = m[j].n == 4 && memcmp(m[j].p, "open", 4) == 0;
			if (m[j].tag == AL_TAG_SIZE)
				size = m[j].u;
			if (d[i].need == OPEN_ONLY)
				prev++;
			if (d[i].need == REKEY)
				rekey++;
			j++;
		} else if (d[i].need == REQ) {
			return -EINVAL;
		}
	}
	if (j != n)
		return -EINVAL; /* unknown, repeated or misplaced members */
	/* prev_seal and prev_kind: together, in an open seal only */
	if (prev == 1 || (prev == 2 && !open) || (rekey && prev != 2))
		return -EINVAL; /* and prev_key only with them */
	return 0;
}

int al_v2_seal_members(const struct al_v2_seal *s, struct al_v2_member m[AL_V2_SEAL_MEMBERS], char *hex)
{
	int k = 0;

	if (!s->kind || !is_kind((const uint8_t *)s->kind, strlen(s->kind)) ||
	    !is_lhex((const uint8_t *)s->chain_id, 32, 32) ||
	    (s->has_prev && (strcmp(s->kind, "open") != 0 || !s->prev_kind ||
			     !is_kind((const uint8_t *)s->prev_kind, strlen(s->prev_kind)) ||
			     s->prev_seal > AL_INT_MAX)) || (s->has_prev_key && !s->has_prev))
		return -EINVAL;
	al_hex(s->key_id, 8, hex);
	m[k++] = (struct al_v2_member){ AL_TAG_KIND, false, (const uint8_t *)s->kind, strlen(s->kind), 0 };
	m[k++] = (struct al_v2_member){ AL_TAG_EPOCH, true, NULL, 0, s->epoch };
	m[k++] = (struct al_v2_member){ AL_TAG_SEAL_KEY, false, (const uint8_t *)hex, 16, 0 };
	m[k++] = (struct al_v2_member){ AL_TAG_CHAIN_ID, false, (const uint8_t *)s->chain_id, 32, 0 };
	if (s->has_prev) {
		m[k++] = (struct al_v2_member){ AL_TAG_PREV_SEAL, true, NULL, 0, s->prev_seal };
		m[k++] = (struct al_v2_member){ AL_TAG_PREV_KIND, false, (const uint8_t *)s->prev_kind,
						strlen(s->prev_kind), 0 };
		if (s->has_prev_key) {
			al_hex(s->prev_key, 8, hex + 80);
			m[k++] = (struct al_v2_member){ AL_TAG_PREV_KEY, false, (const uint8_t *)hex + 80, 16, 0 };
		}
	}
	if (s->has_mac) {
		al_hex(s->mac, AL_HASH_LEN, hex + 16);
		m[k++] = (struct al_v2_member){ AL_TAG_MAC, false, (const uint8_t *)hex + 16, 64, 0 };
	}
	return k;
}
