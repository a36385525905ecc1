/* SPDX-License-Identifier: MIT */
/*
 * v2 lines in the format layer (docs/format.md 12-15): al_emit, al_parse and
 * al_check_hash against every canonical line of tests/vectors/v2_vectors.json
 * (made by the independent gen_v2_vectors.py from the spec):
 *  - each line parses into exactly the vector's type, seq, timestamp, members
 *    and caller fields;
 *  - al_emit re-emits it byte for byte, both from the parsed record and from a
 *    record built from the vector's fields alone (the header pad computed);
 *    the body B_n and digest D_n are the vector's; the writer's split
 *    (al_emit_members, then al_emit_framed from D_n) agrees;
 *  - its hash follows from the previous line's (al_check_hash, the v2 step);
 *  - refused: every torn prefix, every flipped bit (by the parser or the
 *    hash), the v1 strict mutation classes and v2's own (caller keys, order,
 *    counts, caps, seal/checkpoint/tree/clock rules), each with its offset
 *    inside the line; al_emit returns -EINVAL / -E2BIG on the same rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>
#include <jansson.h>

#include "format.h"
#include "format_v2.h"
#include "merkle.h"
#include "tu.h"
#include "verify.h"

static json_t *V;

static int load(void **state)
{
	(void)state;
	V = tu_json_file_env("AUDITLOG_V2_VECTORS");
	return V ? 0 : -1;
}

static int unload(void **state)
{
	(void)state;
	json_decref(V);
	V = NULL;
	return 0;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	assert_non_null(p);
	return p;
}

/* hex string member `key` of o (or o itself when key is NULL), decoded */
static uint8_t *unhex_of(json_t *o, const char *key, size_t *n)
{
	const char *h = json_string_value(key ? json_object_get(o, key) : o);
	assert_non_null(h);
	size_t l = strlen(h);
	uint8_t *b = xmalloc(l / 2);
	assert_int_equal(al_unhex((const uint8_t *)h, l, b), 0);
	*n = l / 2;
	return b;
}

static int field_of(const char *key)
{
	for (int f = 0; f < AL_F__MAX; f++)
		if (!strcmp(al_field_key((enum al_field)f), key))
			return f;
	return -1;
}

static int type_of(const char *name)
{
	for (int t = 1; t < 16; t++)
		if (al_type_name((uint8_t)t) && !strcmp(al_type_name((uint8_t)t), name))
			return t;
	return -1;
}

/* ---- one vector record --------------------------------------------------- */

/* A record built from the vector's fields alone (not from a parse). */
struct built {
	struct al_record r;
	struct al_v2_field cf[AL_CALLER_MAX + 1];
	uint8_t *mem[64];
	size_t nmem;
	char ts[AL_TS_LEN];
};

static const uint8_t *keep(struct built *b, uint8_t *p)
{
	assert_true(b->nmem < 64);
	b->mem[b->nmem++] = p;
	return p;
}

static void built_free(struct built *b)
{
	for (size_t i = 0; i < b->nmem; i++)
		free(b->mem[i]);
}

/* value {"int": n} or {"str_hex": h} */
static void val_of(struct built *b, json_t *v, bool *is_int, const uint8_t **p, size_t *n,
		   uint64_t *u)
{
	json_t *i = json_object_get(v, "int");
	*is_int = i != NULL;
	*p = NULL;
	*n = 0;
	*u = 0;
	if (i)
		*u = (uint64_t)json_integer_value(i);
	else
		*p = keep(b, unhex_of(v, "str_hex", n));
}

static void build(struct built *b, json_t *rec, bool with_pad)
{
	size_t i;
	json_t *m;

	memset(b, 0, sizeof(*b));
	b->r.version = 2;
	b->r.type = (uint8_t)type_of(json_string_value(json_object_get(rec, "type")));
	const char *ts = json_string_value(json_object_get(rec, "timestamp"));
	assert_int_equal(strlen(ts), AL_TS_LEN);
	memcpy(b->ts, ts, AL_TS_LEN);
	b->r.present = AL_BIT(AL_F_TIMESTAMP) | AL_BIT(AL_F_SEQ);
	b->r.f[AL_F_TIMESTAMP] = (struct al_val){(const uint8_t *)b->ts, AL_TS_LEN, 0};
	b->r.f[AL_F_SEQ].u = (uint64_t)json_integer_value(json_object_get(rec, "seq"));
	json_array_foreach(json_object_get(rec, "members"), i, m) {
		const char *key = json_string_value(json_array_get(m, 0));
		int f = field_of(key);
		bool is_int;
		assert_true(f >= 0);
		if (f == AL_F_PAD && !with_pad)
			continue;
		b->r.present |= AL_BIT(f);
		val_of(b, json_array_get(m, 2), &is_int, &b->r.f[f].p, &b->r.f[f].n, &b->r.f[f].u);
	}
	json_array_foreach(json_object_get(rec, "caller"), i, m) {
		struct al_v2_field *c = &b->cf[b->r.ncaller++];
		c->key = (const uint8_t *)json_string_value(json_array_get(m, 0));
		c->key_len = strlen((const char *)c->key);
		val_of(b, json_array_get(m, 1), &c->is_int, &c->p, &c->n, &c->u);
	}
	b->r.caller = b->cf;
}

/* The parse holds exactly the vector's fields. */
static void same_fields(const char *name, const struct al_parsed *p, json_t *rec)
{
	struct built b;
	unsigned members = 0, bits = 0;

	build(&b, rec, true);
	if (p->rec.version != 2 || p->rec.type != b.r.type || p->rec.present != b.r.present ||
	    p->rec.ncaller != b.r.ncaller)
		fail_msg("%s: parsed v%u type %u present %#llx, %zu caller fields; want v2 type %u "
			 "present %#llx, %zu", name, p->rec.version, p->rec.type,
			 (unsigned long long)p->rec.present, p->rec.ncaller, b.r.type,
			 (unsigned long long)b.r.present, b.r.ncaller);
	assert_ptr_equal(p->rec.caller, p->caller);
	for (int f = 0; f < AL_F__MAX; f++) {
		if (!(b.r.present & AL_BIT(f)))
			continue;
		bits++;
		if (f == AL_F_SEQ || (b.r.f[f].p == NULL && f != AL_F_TIMESTAMP)) {
			if (p->rec.f[f].u != b.r.f[f].u)
				fail_msg("%s: %s is %llu, want %llu", name, al_field_key((enum al_field)f),
					 (unsigned long long)p->rec.f[f].u,
					 (unsigned long long)b.r.f[f].u);
			continue;
		}
		if (p->rec.f[f].n != b.r.f[f].n || memcmp(p->rec.f[f].p, b.r.f[f].p, b.r.f[f].n))
			fail_msg("%s: member %s differs", name, al_field_key((enum al_field)f));
	}
	members = (unsigned)json_array_size(json_object_get(rec, "members"));
	assert_int_equal(bits, members + 2); /* + @timestamp and seq */
	for (size_t i = 0; i < b.r.ncaller; i++) {
		const struct al_v2_field *g = &p->rec.caller[i], *w = &b.cf[i];
		if (g->key_len != w->key_len || memcmp(g->key, w->key, w->key_len) ||
		    g->is_int != w->is_int || (g->is_int ? g->u != w->u
							: (g->n != w->n || memcmp(g->p, w->p, w->n))))
			fail_msg("%s: caller field %zu (%s) differs", name, i, (const char *)w->key);
	}
	built_free(&b);
}

static void test_vector_lines(void **state)
{
	json_t *recs = json_object_get(V, "records"), *rec;
	uint8_t *work = xmalloc(AL_HASH_LEN + AL_BODY_MAX), *out = xmalloc(AL_LINE_MAX);
	uint8_t *dec = xmalloc(AL_LINE_MAX), *body = xmalloc(AL_BODY_MAX);
	uint8_t *members = xmalloc(AL_LINE_MAX);
	unsigned types[8] = {0}, caller = 0, chained = 0;
	uint8_t last_hash[AL_HASH_LEN];
	const char *last_chain = "";
	size_t i;

	(void)state;
	assert_true(json_array_size(recs) >= 20);
	json_array_foreach(recs, i, rec) {
		const char *name = json_string_value(json_object_get(rec, "name"));
		const char *chain = json_string_value(json_object_get(rec, "chain"));
		size_t n, pn, hn, dn, bn;
		uint8_t *line = unhex_of(rec, "line_hex", &n);
		uint8_t *prev = unhex_of(rec, "prev", &pn);
		uint8_t *hash = unhex_of(rec, "hash", &hn);
		uint8_t *digest = unhex_of(rec, "digest", &dn);
		uint8_t *vbody = unhex_of(rec, "body_hex", &bn);
		struct al_parsed p;
		struct al_emit_out eo;
		uint8_t h[AL_HASH_LEN];
		size_t eoff = 0;
		enum al_perr e;

		assert_true(n > 1 && line[n - 1] == '\n');
		assert_int_equal(pn, 32);
		/* (a) parse into exactly the vector's fields */
		e = al_parse(line, n - 1, dec, &p, &eoff);
		if (e != AL_PERR_OK)
			fail_msg("%s: al_parse refuses the vector line: reason %d at %zu", name, (int)e,
				 eoff);
		same_fields(name, &p, rec);
		types[p.rec.type]++;
		caller += p.rec.ncaller > 0;
		/* (c) its hash from the previous line's, by the v2 step */
		if (!al_check_hash(&p, line, prev, work, h) || memcmp(h, hash, 32))
			fail_msg("%s: al_check_hash does not give the vector's hash", name);
		if (!strcmp(chain, last_chain) && p.rec.type != AL_T_HEADER) {
			/* the vector's prev is the line before it in its chain */
			assert_memory_equal(prev, last_hash, 32);
			chained++;
		}
		memcpy(last_hash, hash, 32);
		last_chain = chain;
		/* (b) re-emit from the parse, byte for byte */
		long l = al_emit(&p.rec, prev, out, work, &eo);
		if (l != (long)n || memcmp(out, line, n))
			fail_msg("%s: al_emit of the parsed record is not the line (%ld bytes)", name, l);
		assert_memory_equal(eo.hash, hash, 32);
		/* ... and from the vector's fields alone (the header's pad computed) */
		struct built b;
		build(&b, rec, false);
		l = al_emit(&b.r, prev, out, work, &eo);
		if (l != (long)n || memcmp(out, line, n))
			fail_msg("%s: al_emit of the vector's fields is not the line (%ld bytes)", name, l);
		assert_int_equal(eo.body_len, bn);
		built_free(&b);
		/* B_n and D_n, and the writer's split: the producer's members,
		 * the worker's line around them */
		build(&b, rec, true);
		assert_int_equal(al_v2_record_digest(&b.r, body, h), (long)bn);
		assert_memory_equal(body, vbody, bn);
		assert_memory_equal(h, digest, 32);
		l = al_emit_members(&b.r, members, NULL, NULL);
		if (b.r.type == AL_T_HEADER) {
			assert_int_equal(l, -EINVAL); /* its pad depends on seq */
		} else {
			assert_true(l >= 0);
			l = al_emit_framed(b.r.type, p.rec.f[AL_F_SEQ].u,
					   (const char *)p.rec.f[AL_F_TIMESTAMP].p, members, (size_t)l,
					   digest, prev, out, &eo);
			if (l != (long)n || memcmp(out, line, n))
				fail_msg("%s: al_emit_framed is not the line (%ld bytes)", name, l);
			assert_memory_equal(eo.hash, hash, 32);
		}
		/* the same record as v1 is refused where v1 lacks its type, and
		 * caller fields make no v1 line */
		b.r.version = 1;
		if (b.r.type > AL_T_RECOVERY) {
			assert_int_equal(al_emit(&b.r, prev, out, work, &eo), -EINVAL);
			assert_int_equal(al_v2_record_digest(&b.r, body, h), -EINVAL);
		}
		built_free(&b);
		free(line);
		free(prev);
		free(hash);
		free(digest);
		free(vbody);
	}
	for (int t = 1; t <= AL_T_CLOCK; t++)
		if (!types[t])
			fail_msg("no vector line of type %s", al_type_name((uint8_t)t));
	assert_true(caller >= 2);
	assert_true(chained >= 15);
	print_message("v2 lines: %zu vector lines parsed, re-emitted and chained (%u with caller "
		      "fields)\n", json_array_size(recs), caller);
	free(work);
	free(out);
	free(dec);
	free(body);
	free(members);
}

/* ---- refused lines --------------------------------------------------------- */

struct stat {
	unsigned applied, bad;
};

/* al_parse refuses l, with the error offset inside it (torn: up to its end) */
static void expect_refused(const char *name, const char *what, const uint8_t *l, size_t n,
			   int want, bool torn, struct stat *st)
{
	uint8_t *dec = xmalloc(n + 1);
	struct al_parsed p;
	size_t eo = SIZE_MAX;
	enum al_perr e = al_parse(l, n, dec, &p, &eo);

	st->applied++;
	if (e == AL_PERR_OK) {
		print_error("%s: \"%s\" is ACCEPTED: %.*s\n", name, what, (int)(n < 400 ? n : 400), l);
		st->bad++;
	} else if (want >= 0 && (int)e != want) {
		print_error("%s: \"%s\": reason %d, want %d\n", name, what, (int)e, want);
		st->bad++;
	} else if (torn ? eo > n : eo >= n) {
		print_error("%s: \"%s\": error offset %zu outside the %zu-byte line\n", name, what, eo, n);
		st->bad++;
	}
	free(dec);
}

/* Replace the first (or last) `old` in line by `nw`; al_parse must refuse. */
struct mut {
	const char *what, *old, *nw;
	int want;
	bool last;
};

static bool splice(const uint8_t *line, size_t n, const struct mut *m, uint8_t *out, size_t *on)
{
	size_t ol = strlen(m->old), nl = strlen(m->nw);
	const uint8_t *hit = NULL;

	for (const uint8_t *q = line; (q = memmem(q, n - (size_t)(q - line), m->old, ol)); q++) {
		hit = q;
		if (!m->last)
			break;
	}
	if (!hit || n - ol + nl > AL_LINE_MAX + 64)
		return false;
	size_t at = (size_t)(hit - line);
	memcpy(out, line, at);
	memcpy(out + at, m->nw, nl);
	memcpy(out + at + nl, hit + ol, n - at - ol);
	*on = n - ol + nl;
	return true;
}

#define SYN AL_PERR_SYNTAX
#define VAL AL_PERR_VALUE
#define ANY (-1)

/* A header's pad follows its length (docs/format.md 2.3): a mutation that
 * changes the length is refused at the pad as often as at itself. */
static bool any_reason;

static void apply(const char *name, const uint8_t *line, size_t n, const struct mut *m, size_t nm,
		  bool must_apply, struct stat *st)
{
	uint8_t *out = xmalloc(AL_LINE_MAX + 64 + 8192);

	for (size_t i = 0; i < nm; i++) {
		size_t on;
		if (!splice(line, n, &m[i], out, &on)) {
			if (must_apply)
				fail_msg("%s: mutation \"%s\" does not apply (test bug)", name, m[i].what);
			continue;
		}
		expect_refused(name, m[i].what, out, on, any_reason ? ANY : m[i].want, false, st);
	}
	free(out);
}


/* The classes of tests/test_format.c's strict loop, on any v2 line. */
static const struct mut COMMON[] = {
	{"space after a comma", ",\"seq\":", ", \"seq\":", SYN, false},
	{"space after a colon", "\"seq\":", "\"seq\": ", SYN, false},
	{"space after the brace", "{\"@timestamp\"", "{ \"@timestamp\"", SYN, false},
	{"space before the closing brace", "\"}", "\" }", SYN, true},
	{"tab after a comma", ",\"type\"", ",\t\"type\"", SYN, false},
	{"CR between members", ",\"type\"", "\r,\"type\"", SYN, false},
	{"v 3", "\"v\":2", "\"v\":3", AL_PERR_VERSION, false},
	{"v 9", "\"v\":2", "\"v\":9", AL_PERR_VERSION, false},
	{"v with a leading zero", "\"v\":2", "\"v\":02", SYN, false},
	{"v as a string", "\"v\":2", "\"v\":\"2\"", SYN, false},
	{"type before v", "\"v\":2,\"type\":", "\"type\":\"x\",\"v\":2,\"x\":", SYN, false},
	{"unknown type", "\"type\":\"", "\"type\":\"z", VAL, false},
	{"type in uppercase", "\"type\":\"", "\"type\":\"E", VAL, false},
	{"seq with a leading zero", "\"seq\":", "\"seq\":0", ANY, false},
	{"seq negative", "\"seq\":", "\"seq\":-", SYN, false},
	{"seq 2^53", "\"seq\":", "\"seq\":9007199254740992", ANY, false},
	{"timestamp without Z", "Z\",\"seq\"", "\",\"seq\"", VAL, false},
	{"timestamp with +00:00", "Z\",\"seq\"", "+00:00\",\"seq\"", VAL, false},
	{"hash in uppercase", "\"hash\":\"", "\"hash\":\"A", SYN, false},
	{"hash with 65 digits", "\"hash\":\"", "\"hash\":\"0", SYN, false},
	{"hash without its quote", "\"}", "}", SYN, true},
	{"a member after hash", "\"}", "\",\"z\":1}", SYN, true},
	{"a duplicated seq", ",\"v\":2", ",\"seq\":1,\"v\":2", SYN, false},
	{"a member escaped needlessly", "\"type\"", "\"typ\\u0065\"", SYN, false},
	{"null member", ",\"hash\"", ",\"z\":null,\"hash\"", ANY, true},
};

/* v2 events with caller fields (the vector a-event-caller) */
#define V1 {"v 1: a type or caller fields v1 lacks", "\"v\":2", "\"v\":1", ANY, false}
#define X16 "xxxxxxxxxxxxxxxx"
#define X256 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16 X16

static const struct mut CALLER[] = {
	V1,
	{"caller keys unsorted", "\"a.b\":0,\"a_b\":\"x\"", "\"a_b\":\"x\",\"a.b\":0", SYN, false},
	{"a caller key repeated", "\"a.b\":0,", "\"a.b\":0,\"a.b\":0,", SYN, false},
	{"a reserved caller key", "\"a.b\":0,", "\"a.b\":0,\"a.c\":0,\"mac\":1,", SYN, false},
	{"a caller key in uppercase", "\"ab\":", "\"aB\":", SYN, false},
	{"a caller key starting with a digit", "\"a.b\":0", "\"0\":0,\"a.b\":0", SYN, false},
	{"a caller key with an empty part", "\"a.b\":0", "\"a..b\":0", SYN, false},
	{"a caller key ending in a dot", "\"a.b\":0", "\"a.\":0,\"a.b\":0", SYN, false},
	{"a caller key with five parts", "\"a.b\":0", "\"a.a.a.a.a\":0,\"a.b\":0", SYN, false},
	{"a caller key part of 33", "\"a.b\":0",
	 "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":0,\"a.b\":0", SYN, false},
	{"a caller key escaped", "\"ab\":", "\"a\\u0062\":", SYN, false},
	{"a fixed member after the caller fields", ",\"hash\"", ",\"zz\":1,\"detail\":\"d\",\"hash\"",
	 SYN, true},
	{"a fixed member among the caller fields (actor moved)", "\"actor\":\"sshd\",\"a.b\":0",
	 "\"a.b\":0,\"actor\":\"sshd\"", SYN, false},
	{"an empty caller string", "\"a_b\":\"x\"", "\"a_b\":\"\"", VAL, false},
	{"a caller integer 2^53", "\"ab\":9007199254740991", "\"ab\":9007199254740992", VAL, false},
	{"a caller integer with a leading zero", "\"a.b\":0", "\"a.b\":00", SYN, false},
	{"a caller integer negative", "\"attempt\":3", "\"attempt\":-3", SYN, false},
	{"a caller integer as a float", "\"attempt\":3", "\"attempt\":3.0", SYN, false},
	{"a caller value null", "\"attempt\":3", "\"attempt\":null", SYN, false},
	{"a caller value true", "\"attempt\":3", "\"attempt\":true", SYN, false},
	{"a caller value an object", "\"attempt\":3", "\"attempt\":{}", SYN, false},
	{"a caller string over its cap (257)", "\"a_b\":\"x\"", "\"a_b\":\"" X256 "x\"", VAL, false},
	{"a caller string over its cap (255 + an escape)", "\"a_b\":\"x\"",
	 "\"a_b\":\"" X256 "\\n\"", VAL, false},
	{"a caller string escaped needlessly", "\"a_b\":\"x\"", "\"a_b\":\"\\u0078\"", SYN, false},
	{"a caller string with a raw control", "\"a_b\":\"x\"", "\"a_b\":\"\x01\"", SYN, false},
};

static const struct mut SEAL[] = {
	V1,
	{"a seal kind not a kind", "\"kind\":\"", "\"kind\":\"x", VAL, false},
	{"a seal epoch 2^32", "\"epoch\":", "\"epoch\":4294967296", VAL, false},
	{"a seal epoch 2^32 + digits", "\"epoch\":", "\"epoch\":99999999999", VAL, false},
	{"a seal_key in uppercase", "\"seal_key\":\"", "\"seal_key\":\"A", VAL, false},
	{"a seal_key of 17 digits", "\"seal_key\":\"", "\"seal_key\":\"0", VAL, false},
	{"a chain_id of 33 digits", "\"chain_id\":\"", "\"chain_id\":\"0", VAL, false},
	{"a mac of 65 digits", "\"mac\":\"", "\"mac\":\"0", VAL, false},
	{"a mac in uppercase", "\"mac\":\"", "\"mac\":\"A", ANY, false},
	{"a seal without its mac", ",\"mac\":\"", ",\"xmac\":\"", SYN, false},
	{"prev_seal alone", ",\"mac\"", ",\"prev_seal\":1,\"mac\"", ANY, false},
	{"prev_kind alone", ",\"mac\"", ",\"prev_kind\":\"close\",\"mac\"", ANY, false},
	{"caller fields in a seal", ",\"hash\"", ",\"zz\":1,\"hash\"", SYN, true},
	{"members of a seal reordered", "\"kind\":", "\"epoch\":1,\"kind\":", SYN, false},
};

static const struct mut REOPEN[] = { /* the open seal with prev_seal, prev_kind */
	{"prev_kind not a kind", "\"prev_kind\":\"close\"", "\"prev_kind\":\"x\"", VAL, false},
	{"prev_seal without prev_kind", ",\"prev_kind\":\"close\"", "", VAL, false},
	{"prev_kind without prev_seal", ",\"prev_seal\":13", "", VAL, false},
	{"prev_* in a batch seal", "\"kind\":\"open\"", "\"kind\":\"batch\"", VAL, false},
	{"prev_* swapped", "\"prev_seal\":13,\"prev_kind\":\"close\"",
	 "\"prev_kind\":\"close\",\"prev_seal\":13", SYN, false},
};

static const struct mut TREE[] = { /* tree and checkpoint */
	V1,
	{"size 0", "\"size\":", "\"size\":0,\"x\":", ANY, false},
	{"a range of another size", "\"range\":\"", "\"range\":\"00", VAL, false},
	{"a range in uppercase", "\"range\":\"", "\"range\":\"A", VAL, false},
	{"first_seq 2^53", "\"first_seq\":", "\"first_seq\":9007199254740992,\"x\":", ANY, false},
	{"range before first_seq", "\"first_seq\":", "\"range\":\"\",\"first_seq\":", ANY, false},
};

static const struct mut CLOCK[] = {
	V1,
	{"an expected time without Z", "Z\",\"wall\"", "\",\"wall\"", VAL, false},
	{"a wall time of Feb 30", "\"wall\":\"2026-11-30", "\"wall\":\"2026-02-30", VAL, false},
	{"a clock epoch 2^32", "\"epoch\":", "\"epoch\":4294967296", VAL, false},
	{"a clock without its wall", ",\"wall\":\"", ",\"wallx\":\"", SYN, false},
};

static const struct mut CHECKPOINT[] = {
	{"a note that is empty", "\"note\":\"", "\"note\":\"\",\"x\":\"", ANY, false},
	{"a note with an escaped slash", "\"note\":\"", "\"note\":\"\\/", SYN, false},
	{"a note with \\u000a for \\n", "\\n", "\\u000a", SYN, false},
	{"a checkpoint without its note", ",\"note\":\"", ",\"notex\":\"", SYN, false},
};

static const struct mut HEADER[] = {
	{"a header pad one dot short", "\"pad\":\".", "\"pad\":\"", VAL, false},
	{"a header with caller fields", ",\"pad\"", ",\"zz\":1,\"pad\"", SYN, false},
};

static void strict_one(const char *name, const uint8_t *line, size_t n, uint8_t type,
		       struct stat *st)
{
	any_reason = type == AL_T_HEADER;
	apply(name, line, n, COMMON, sizeof(COMMON) / sizeof(COMMON[0]), false, st);
	if (!strcmp(name, "a-event-caller"))
		apply(name, line, n, CALLER, sizeof(CALLER) / sizeof(CALLER[0]), true, st);
	if (type == AL_T_SEAL)
		apply(name, line, n, SEAL, sizeof(SEAL) / sizeof(SEAL[0]), true, st);
	if (!strcmp(name, "a-reopen"))
		apply(name, line, n, REOPEN, sizeof(REOPEN) / sizeof(REOPEN[0]), true, st);
	if (type == AL_T_TREE || type == AL_T_CHECKPOINT)
		apply(name, line, n, TREE, sizeof(TREE) / sizeof(TREE[0]), true, st);
	if (type == AL_T_CHECKPOINT)
		apply(name, line, n, CHECKPOINT, sizeof(CHECKPOINT) / sizeof(CHECKPOINT[0]), true, st);
	if (type == AL_T_CLOCK)
		apply(name, line, n, CLOCK, sizeof(CLOCK) / sizeof(CLOCK[0]), true, st);
	if (type == AL_T_HEADER)
		apply(name, line, n, HEADER, sizeof(HEADER) / sizeof(HEADER[0]), true, st);
	/* every torn line, and what a line never has around it */
	for (size_t k = 0; k < n; k++)
		expect_refused(name, "torn line", line, k, ANY, true, st);
	uint8_t *l = xmalloc(n + 8);
	memcpy(l, line, n);
	l[n] = ' ';
	int tail = any_reason ? ANY : SYN;
	expect_refused(name, "trailing space", l, n + 1, tail, false, st);
	l[n] = '\n';
	expect_refused(name, "its \\n handed to al_parse", l, n + 1, tail, false, st);
	l[n] = '\r';
	expect_refused(name, "CR at the end", l, n + 1, tail, false, st);
	l[n] = '}';
	expect_refused(name, "a second closing brace", l, n + 1, tail, false, st);
	free(l);
}

/* 17 caller fields, and more than 2048 bytes of them: built on an event */
static void strict_counts(const uint8_t *line, size_t n, struct stat *st)
{
	static const char anchor[] = ",\"hash\":\"";
	const uint8_t *h = memmem(line, n, anchor, strlen(anchor));
	uint8_t *l = xmalloc(AL_LINE_MAX);
	char f[64];
	size_t at, o;

	assert_non_null(h);
	at = (size_t)(h - line);
	for (unsigned want = 16; want <= 17; want++) {
		memcpy(l, line, at);
		o = at;
		for (unsigned k = 0; k < want; k++)
			o += (size_t)snprintf((char *)l + o, 64, ",\"zz%02u\":%u", k, k);
		memcpy(l + o, line + at, n - at);
		o += n - at;
		uint8_t *dec = xmalloc(o);
		struct al_parsed p;
		size_t eo;
		enum al_perr e = al_parse(l, o, dec, &p, &eo);
		if (want == 16) {
			/* 16 parse (the hash is then wrong, which is not al_parse's) */
			assert_int_equal(e, AL_PERR_OK);
			assert_int_equal(p.rec.ncaller, 16);
		} else {
			expect_refused("fields", "17 caller fields", l, o, VAL, false, st);
		}
		free(dec);
	}
	/* 2048 bytes of caller JSON parse, 2049 do not: 8 of ,"zzNN":"y..." (10 + v) */
	for (size_t total = 2048; total <= 2049; total++) {
		memcpy(l, line, at);
		o = at;
		for (unsigned k = 0; k < 8; k++) {
			size_t v = 246 + (k == 7 ? total - 2048 : 0);
			o += (size_t)snprintf((char *)l + o, sizeof(f), ",\"zz%02u\":\"", k);
			memset(l + o, 'y', v);
			o += v;
			l[o++] = '"';
		}
		memcpy(l + o, line + at, n - at);
		o += n - at;
		uint8_t *dec = xmalloc(o);
		struct al_parsed p;
		size_t eo;
		if (total == 2048)
			assert_int_equal(al_parse(l, o, dec, &p, &eo), AL_PERR_OK);
		else
			expect_refused("fields", "2049 bytes of caller fields", l, o, VAL, false, st);
		free(dec);
	}
	free(l);
}

static void test_strict(void **state)
{
	json_t *recs = json_object_get(V, "records"), *rec;
	struct stat st = {0};
	size_t i;

	(void)state;
	json_array_foreach(recs, i, rec) {
		const char *name = json_string_value(json_object_get(rec, "name"));
		size_t n;
		uint8_t *line = unhex_of(rec, "line_hex", &n);
		strict_one(name, line, n - 1,
			   (uint8_t)type_of(json_string_value(json_object_get(rec, "type"))), &st);
		if (!strcmp(name, "a-event-plain"))
			strict_counts(line, n - 1, &st);
		free(line);
	}
	print_message("v2 strict: %u refused lines\n", st.applied);
	if (st.bad)
		fail_msg("%u of %u mutated v2 lines are not refused as they must be", st.bad,
			 st.applied);
	assert_true(st.applied > 5000);
}

/* Every bit of every vector line (its \n included): the parser or the hash. */
static void test_bit_flips(void **state)
{
	json_t *recs = json_object_get(V, "records"), *rec;
	uint8_t *work = xmalloc(AL_HASH_LEN + AL_BODY_MAX), *dec = xmalloc(AL_LINE_MAX + 1);
	unsigned flips = 0, by_parse = 0, by_hash = 0, undetected = 0;
	size_t i;

	(void)state;
	json_array_foreach(recs, i, rec) {
		const char *name = json_string_value(json_object_get(rec, "name"));
		size_t n, pn;
		uint8_t *l = unhex_of(rec, "line_hex", &n), *prev = unhex_of(rec, "prev", &pn);
		uint8_t got[AL_HASH_LEN];
		struct al_parsed p;
		size_t eo;

		for (size_t k = 0; k < n; k++) {
			for (int bit = 0; bit < 8; bit++) {
				size_t len = k == n - 1 ? n : n - 1;
				l[k] ^= (uint8_t)(1u << bit);
				flips++;
				if (al_parse(l, len, dec, &p, &eo) != AL_PERR_OK) {
					by_parse++;
				} else if (!al_check_hash(&p, l, prev, work, got)) {
					by_hash++;
				} else {
					undetected++;
					print_error("%s: bit %d of byte %zu flipped goes undetected\n", name,
						    bit, k);
				}
				l[k] ^= (uint8_t)(1u << bit);
			}
		}
		free(l);
		free(prev);
	}
	print_message("v2 bit flips: %u, %u caught by al_parse, %u by the hash\n", flips, by_parse,
		      by_hash);
	assert_int_equal(undetected, 0);
	assert_true(by_hash > 1000);
	free(work);
	free(dec);
}

/* ---- al_emit refuses what al_parse refuses ---------------------------------- */

/* the vector record `name`, built */
static void built_of(struct built *b, const char *name)
{
	json_t *recs = json_object_get(V, "records"), *rec;
	size_t i;

	json_array_foreach(recs, i, rec)
		if (!strcmp(json_string_value(json_object_get(rec, "name")), name)) {
			build(b, rec, false);
			return;
		}
	fail_msg("no vector record %s", name);
}

static long emit(const struct al_record *r)
{
	static uint8_t line[AL_LINE_MAX], work[AL_HASH_LEN + AL_BODY_MAX];
	static const uint8_t zero[AL_HASH_LEN];
	struct al_emit_out eo;
	long n = al_emit(r, zero, line, work, &eo);

	if (n > 0) { /* what al_emit writes, al_parse takes */
		uint8_t dec[AL_LINE_MAX];
		struct al_parsed p;
		size_t off;
		assert_int_equal(al_parse(line, (size_t)n - 1, dec, &p, &off), AL_PERR_OK);
		assert_true(al_check_hash(&p, line, zero, work, eo.hash));
	}
	return n;
}

static void test_emit_refuses(void **state)
{
	json_t *sets = json_object_get(json_object_get(V, "caller"), "sets"), *set;
	struct built b;
	size_t i;
	unsigned ok = 0, refused = 0;

	(void)state;
	/* the caller-field sets of the vectors, sorted as the API will */
	json_array_foreach(sets, i, set) {
		const char *name = json_string_value(json_object_get(set, "name"));
		const char *result = json_string_value(json_object_get(set, "result"));
		json_t *fl = json_object_get(set, "fields"), *m;
		struct al_v2_field cf[32];
		uint8_t vals[32][AL_CALLER_STR_CAP];
		size_t nf = 0, j;

		built_of(&b, "a-event-plain");
		assert_true(json_array_size(fl) <= 32);
		json_array_foreach(fl, j, m) {
			struct al_v2_field *c = &cf[nf];
			const uint8_t *raw;
			size_t rn;
			c->key = (const uint8_t *)json_string_value(json_array_get(m, 0));
			c->key_len = strlen((const char *)c->key);
			val_of(&b, json_array_get(m, 1), &c->is_int, &raw, &rn, &c->u);
			if (!c->is_int) {
				c->n = al_v2_caller_decode(raw, rn, vals[nf]);
				c->p = vals[nf];
				if (!c->n)
					continue; /* omitted, not counted (14.2) */
			}
			nf++;
		}
		al_v2_caller_sort(cf, nf);
		b.r.caller = cf;
		b.r.ncaller = nf;
		long n = emit(&b.r);
		if (!strcmp(result, "ok")) {
			if (n <= 0)
				fail_msg("caller set %s: al_emit %ld, want a line", name, n);
			ok++;
		} else {
			long want = !strcmp(result, "E2BIG") ? -E2BIG : -EINVAL;
			if (n != want)
				fail_msg("caller set %s: al_emit %ld, want %ld", name, n, want);
			refused++;
		}
		built_free(&b);
	}
	/* unsorted, repeated, reserved: as given, without the sort */
	{
		struct al_v2_field two[2] = {
			{(const uint8_t *)"b", 1, true, NULL, 0, 1},
			{(const uint8_t *)"a", 1, true, NULL, 0, 2},
		};
		built_of(&b, "a-event-plain");
		b.r.caller = two;
		b.r.ncaller = 2;
		assert_int_equal(emit(&b.r), -EINVAL);
		two[1].key = (const uint8_t *)"b";
		assert_int_equal(emit(&b.r), -EINVAL);
		two[0].key = (const uint8_t *)"a";
		assert_true(emit(&b.r) > 0);
		two[1].key = (const uint8_t *)"user.Name";
		two[1].key_len = 9;
		assert_int_equal(emit(&b.r), -EINVAL);
		two[1].key = (const uint8_t *)"kind";
		two[1].key_len = 4;
		assert_int_equal(emit(&b.r), -EINVAL);
		two[1].key_len = 1;
		two[1].key = (const uint8_t *)"b";
		two[1].is_int = false;
		two[1].p = (const uint8_t *)"";
		two[1].n = 0; /* empty: the caller must omit it */
		assert_int_equal(emit(&b.r), -EINVAL);
		/* the same fields on a v1 event are not read (a v1 line has none) */
		b.r.version = 1;
		assert_true(emit(&b.r) > 0);
		built_free(&b);
		/* caller fields on a record that is not an event */
		built_of(&b, "a-seal-batch");
		b.r.caller = two;
		b.r.ncaller = 1;
		assert_int_equal(emit(&b.r), -EINVAL);
		built_free(&b);
		built_of(&b, "a-header");
		b.r.caller = two;
		b.r.ncaller = 1;
		assert_int_equal(emit(&b.r), -EINVAL);
		built_free(&b);
	}
	/* the new types' member rules */
	built_of(&b, "a-seal-batch");
	assert_true(emit(&b.r) > 0);
	b.r.f[AL_F_EPOCH].u = 1ull << 32;
	assert_int_equal(emit(&b.r), -EINVAL);
	b.r.f[AL_F_EPOCH].u = 4;
	b.r.present |= AL_BIT(AL_F_PREV_SEAL);
	b.r.f[AL_F_PREV_SEAL].u = 1;
	assert_int_equal(emit(&b.r), -EINVAL); /* prev_seal alone */
	b.r.present |= AL_BIT(AL_F_PREV_KIND);
	b.r.f[AL_F_PREV_KIND] = (struct al_val){(const uint8_t *)"close", 5, 0};
	assert_int_equal(emit(&b.r), -EINVAL); /* prev_* in a batch seal */
	b.r.f[AL_F_KIND] = (struct al_val){(const uint8_t *)"open", 4, 0};
	assert_true(emit(&b.r) > 0);
	b.r.f[AL_F_KIND] = (struct al_val){(const uint8_t *)"Open", 4, 0};
	assert_int_equal(emit(&b.r), -EINVAL);
	b.r.f[AL_F_KIND] = (struct al_val){(const uint8_t *)"open", 4, 0};
	b.r.present &= ~AL_BIT(AL_F_MAC);
	assert_int_equal(emit(&b.r), -EINVAL);
	built_free(&b);
	built_of(&b, "a-tree");
	b.r.f[AL_F_SIZE].u = 9; /* 2 bits: the range holds one hash */
	assert_int_equal(emit(&b.r), -EINVAL);
	b.r.f[AL_F_SIZE].u = 0;
	assert_int_equal(emit(&b.r), -EINVAL);
	built_free(&b);
	built_of(&b, "a-clock");
	b.r.f[AL_F_WALL].n = 29;
	assert_int_equal(emit(&b.r), -EINVAL);
	built_free(&b);
	built_of(&b, "a-event-plain");
	b.r.f[AL_F_TIMESTAMP].n = 29; /* the chain step takes exactly 30 bytes */
	assert_int_equal(emit(&b.r), -EINVAL);
	b.r.f[AL_F_TIMESTAMP].n = 30;
	b.r.version = 3;
	assert_int_equal(emit(&b.r), -EINVAL);
	built_free(&b);
	print_message("v2 emit: %u caller sets emitted, %u refused\n", ok, refused);
	assert_true(ok >= 5 && refused >= 5);
}

/* ---- the verifier takes v2 records (no seal or checkpoint checks yet) ------ */

struct wlog {
	FILE *f;
	uint8_t prev[AL_HASH_LEN];
	uint64_t seq;
	struct al_merkle_range tree; /* of the v2 records (docs/format.md 18) */
};

static void put_rec(struct wlog *w, struct al_record *r)
{
	static uint8_t line[AL_LINE_MAX], work[AL_HASH_LEN + AL_BODY_MAX];
	char *ts = xmalloc(AL_TS_LEN);
	struct al_emit_out eo;

	al_format_ts(1764547200000000000ull + w->seq * 1000, ts);
	r->present |= AL_BIT(AL_F_TIMESTAMP) | AL_BIT(AL_F_SEQ);
	r->f[AL_F_TIMESTAMP] = (struct al_val){(const uint8_t *)ts, AL_TS_LEN, 0};
	r->f[AL_F_SEQ].u = w->seq++;
	long n = al_emit(r, w->prev, line, work, &eo);
	assert_true(n > 0);
	assert_int_equal(fwrite(line, 1, (size_t)n, w->f), (size_t)n);
	memcpy(w->prev, eo.hash, AL_HASH_LEN);
	if (r->version == 2)
		assert_int_equal(al_merkle_range_append(&w->tree, eo.hash), 0);
	free(ts);
}

#define STR(s) (struct al_val){(const uint8_t *)(s), sizeof(s) - 1, 0}

static void put_event(struct wlog *w, uint8_t v, bool caller)
{
	static const struct al_v2_field cf[2] = {
		{(const uint8_t *)"client.ip", 9, false, (const uint8_t *)"192.0.2.7", 9, 0},
		{(const uint8_t *)"user.name", 9, false, (const uint8_t *)"alice", 5, 0},
	};
	struct al_record r = {.version = v, .type = AL_T_EVENT};
	r.present = AL_BIT(AL_F_ACTION) | AL_BIT(AL_F_OUTCOME);
	r.f[AL_F_ACTION] = STR("login");
	r.f[AL_F_OUTCOME] = STR("success");
	if (caller) {
		r.caller = cf;
		r.ncaller = 2;
	}
	put_rec(w, &r);
}

/* header v1, events v1, then a v2 batch (events, a tree, an event, its
 * seal: the tree and seal rules of docs/format.md 19-20 hold); downgrade: a
 * v1 event after them */
static void write_mixed(const char *path, bool downgrade)
{
	struct wlog w = {.f = fopen(path, "we")};
	struct al_record r = {.version = 1, .type = AL_T_HEADER};
	char range[65] = {0};

	assert_non_null(w.f);
	al_merkle_range_init(&w.tree);
	r.present = AL_BIT(AL_F_FILE_ID) | AL_BIT(AL_F_CHAIN_ID) | AL_BIT(AL_F_REASON);
	r.f[AL_F_FILE_ID] = STR("0123456789abcdef0123456789abcdef");
	r.f[AL_F_CHAIN_ID] = STR("fa7446a3494477e7c87c8c4e4f8e9e2f");
	r.f[AL_F_REASON] = STR("new");
	put_rec(&w, &r);
	for (int i = 0; i < 3; i++)
		put_event(&w, 1, false);
	put_event(&w, 2, true);
	put_event(&w, 2, false);
	r = (struct al_record){.version = 2, .type = AL_T_TREE};
	r.present = AL_BIT(AL_F_SIZE) | AL_BIT(AL_F_FIRST_SEQ) | AL_BIT(AL_F_RANGE);
	r.f[AL_F_SIZE].u = 2; /* records 4 and 5: one subtree */
	r.f[AL_F_FIRST_SEQ].u = 4;
	assert_int_equal(w.tree.size, 2);
	al_hex(w.tree.h[0], AL_HASH_LEN, range);
	r.f[AL_F_RANGE] = (struct al_val){(const uint8_t *)range, 64, 0};
	put_rec(&w, &r);
	put_event(&w, 2, true);
	r = (struct al_record){.version = 2, .type = AL_T_SEAL};
	r.present = AL_BIT(AL_F_KIND) | AL_BIT(AL_F_EPOCH) | AL_BIT(AL_F_SEAL_KEY) |
		    AL_BIT(AL_F_CHAIN_ID) | AL_BIT(AL_F_MAC);
	r.f[AL_F_KIND] = STR("batch");
	r.f[AL_F_EPOCH].u = 7;
	r.f[AL_F_SEAL_KEY] = STR("be7291f90227f6bf");
	r.f[AL_F_CHAIN_ID] = STR("fa7446a3494477e7c87c8c4e4f8e9e2f");
	r.f[AL_F_MAC] = STR("732acb021b619e07f9c6b27353503848fc33ce315663418b60c2e419c0500902");
	put_rec(&w, &r);
	if (downgrade)
		put_event(&w, 1, false);
	assert_int_equal(fclose(w.f), 0);
}

struct vgot {
	unsigned n[AL_V__MAX];
	uint64_t seq[AL_V__MAX];
};

static void vcollect(void *ctx, const struct al_finding *f)
{
	struct vgot *g = ctx;
	g->n[f->cls]++;
	g->seq[f->cls] = f->seq;
}

static void test_verify_mixed(void **state)
{
	(void)state;
	for (int down = 0; down <= 1; down++) {
		char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
		struct al_vopts o = {0};
		struct al_vresult res;
		struct vgot g = {0};
		unsigned total = 0;

		write_mixed(path, down);
		o.on_finding = vcollect;
		o.ctx = &g;
		assert_int_equal(al_verify_files(&path, 1, &o, &res), 0);
		for (int k = 0; k < AL_V__MAX; k++) {
			total += g.n[k];
			if (g.n[k])
				print_message("%s: %u %s finding(s)\n", down ? "v2 -> v1" : "v1 -> v2",
					      g.n[k], al_vclass_name((enum al_vclass)k));
		}
		assert_int_equal(res.chains, 1);
		assert_int_equal(res.records, down ? 10 : 9);
		assert_int_equal(res.chain[0].min_version, 1);
		assert_int_equal(res.chain[0].max_version, 2);
		if (!down) {
			assert_int_equal(total, 0); /* v1 -> v2 verifies */
		} else {
			assert_int_equal(total, 1); /* the downgrade, and only it */
			assert_int_equal(g.n[AL_V_VERSION], 1);
			assert_int_equal(g.seq[AL_V_VERSION], 9);
		}
		al_vresult_free(&res);
		free(path);
		tu_rmtree(dir);
		free(dir);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vector_lines),
		cmocka_unit_test(test_strict),
		cmocka_unit_test(test_bit_flips),
		cmocka_unit_test(test_emit_refuses),
		cmocka_unit_test(test_verify_mixed),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, load, unload);
}
