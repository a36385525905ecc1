/* SPDX-License-Identifier: MIT */
/*
 * The v2 producer path and caller-defined fields (docs/format.md 13-15):
 * every refusal of section 14, sorting, odd but legal values, lines that
 * parse and whose hashes check (the digest the producer computed is the one
 * the line implies) under concurrent producers; and v0/v1 lines byte for
 * byte as before the v2 producer path (golden hashes). Linked with
 * -Wl,--wrap=clock_gettime,--wrap=getrandom: with `frozen` set the wall
 * clock stands still and ids are fixed, so a log's bytes are a pure
 * function of the events written.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "internal.h"
#include "log.h"
#include "tu.h"

/* ---- a frozen wall clock and fixed ids ------------------------------------ */

static atomic_bool frozen;

int __real_clock_gettime(clockid_t c, struct timespec *ts);
int __wrap_clock_gettime(clockid_t c, struct timespec *ts);
ssize_t __real_getrandom(void *buf, size_t n, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t n, unsigned flags);

int __wrap_clock_gettime(clockid_t c, struct timespec *ts)
{
	if (c == CLOCK_REALTIME && atomic_load(&frozen)) {
		ts->tv_sec = 1796036894; /* 2026-11-30T11:08:14Z */
		ts->tv_nsec = 123456789;
		return 0;
	}
	return __real_clock_gettime(c, ts);
}

ssize_t __wrap_getrandom(void *buf, size_t n, unsigned flags)
{
	if (atomic_load(&frozen)) {
		memset(buf, 0x5a, n);
		return (ssize_t)n;
	}
	return __real_getrandom(buf, n, flags);
}

/* ---- helpers -------------------------------------------------------------- */

static void sha_hex(const uint8_t *p, size_t n, char out[65])
{
	uint8_t md[32];

	SHA256(p, n, md);
	al_hex(md, 32, out);
	out[64] = '\0';
}

/* ---- v2 logs ---------------------------------------------------------------- */

/* The one place a v2 config is made: a real sealing state and signing key. */
static void v2_config(struct auditlog_config *cfg)
{
	tu_v2_config_shared(cfg);
}

static struct auditlog *open_log(const char *path, unsigned version, size_t queue)
{
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log = NULL;

	if (version == 2)
		v2_config(cfg);
	else
		assert_int_equal(auditlog_config_set_format_version(cfg, version), 0);
	if (queue)
		assert_int_equal(auditlog_config_set_queue_capacity(cfg, queue), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	return log;
}

/* Every line of a file (NUL-terminated copies, without '\n'). */
struct lines {
	char **v;
	size_t n;
};

/* A v2 log's own records (seal, tree, checkpoint, clock: docs/format.md 12),
 * which a v1 log does not have; test_v2_writer checks them. A string value
 * cannot hold the unescaped member text. */
static bool v2_own_record(const char *line)
{
	static const char *const t[] = {",\"type\":\"seal\",", ",\"type\":\"tree\",",
					",\"type\":\"checkpoint\",", ",\"type\":\"clock\","};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strstr(line, t[i]))
			return true;
	return false;
}

/* The lines of a log but the v2 writer's own records: the header and events. */
static struct lines read_lines(const char *path)
{
	struct lines ls = {0};
	size_t len, pos = 0;
	uint8_t *buf = tu_read_file(path, &len);

	assert_non_null(buf);
	while (pos < len) {
		uint8_t *nl = memchr(buf + pos, '\n', len - pos);
		assert_non_null(nl);
		size_t n = (size_t)(nl - (buf + pos));
		ls.v = realloc(ls.v, (ls.n + 1) * sizeof(*ls.v));
		assert_non_null(ls.v);
		ls.v[ls.n] = malloc(n + 1);
		assert_non_null(ls.v[ls.n]);
		memcpy(ls.v[ls.n], buf + pos, n);
		ls.v[ls.n][n] = '\0';
		if (v2_own_record(ls.v[ls.n]))
			free(ls.v[ls.n]);
		else
			ls.n++;
		pos += n + 1;
	}
	free(buf);
	return ls;
}

static void free_lines(struct lines *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		free(ls->v[i]);
	free(ls->v);
}

/* The part of an event line after its fixed members: the caller fields
 * (',"k":v...'), up to ',"hash":'. The fixed members here end with actor. */
static char *caller_part(const char *line)
{
	const char *a = strstr(line, "\"actor\":\"user\"");
	const char *h = strstr(line, ",\"hash\":\"");

	assert_non_null(a);
	assert_non_null(h);
	a += strlen("\"actor\":\"user\"");
	return strndup(a, (size_t)(h - a));
}

static struct auditlog_field fstr(const char *key, const char *v)
{
	return (struct auditlog_field){.key = key, .kind = AUDITLOG_FIELD_STR, .str = v,
				       .str_len = v ? strlen(v) : 0};
}

static struct auditlog_field fint(const char *key, uint64_t u)
{
	return (struct auditlog_field){.key = key, .kind = AUDITLOG_FIELD_INT, .u = u};
}

/* The file intact (every line canonical, every hash checks on its
 * predecessor's) with `events` events. */
static void check_log(const char *path, uint64_t events)
{
	struct tu_walk w;

	if (tu_walk_file(path, &w, NULL, NULL) != 0)
		fail_msg("%s: %s", path, w.error);
	assert_int_equal(w.events, events);
}

/* One record_fields call, and the same through record_fields_sync. */
static void expect(struct auditlog *log, const struct auditlog_field *f, size_t n, int want,
		   unsigned *accepted)
{
	struct auditlog_event ev = tu_event("login", 1);

	assert_int_equal(auditlog_record_fields(log, &ev, f, n), want);
	assert_int_equal(auditlog_record_fields_sync(log, &ev, f, n), want);
	if (want == 0)
		*accepted += 2;
}

static void expect_key(struct auditlog *log, const char *key, int want, unsigned *accepted)
{
	struct auditlog_field f[2] = {fstr("z", "zz"), fstr(key, "value")};
	expect(log, f, 2, want, accepted);
	f[1] = fint(key, 7);
	expect(log, f, 2, want, accepted);
}

/* docs/format.md 14.1's reserved names, copied from the spec's text. */
static const char *const reserved_keys[] = {
	"seq", "v", "type", "hash", "action", "outcome", "rv", "slot", "session",
	"mechanism", "key_label", "key_id", "actor", "detail", "file_id", "chain_id",
	"reason", "prev_name", "prev_seq", "prev_hash", "prev_size", "pad", "last_seq",
	"damage_offset", "damage_length", "damage_sha256", "kind", "epoch", "seal_key",
	"prev_seal", "prev_kind", "mac", "size", "first_seq", "range", "note", "expected",
	"wall",
};

static void test_refusals(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct auditlog *log = open_log(path, 2, 0);
	struct auditlog_event ev = tu_event("login", 1);
	struct auditlog_field f[AUDITLOG_FIELDS_MAX + 1];
	char k32[33], k33[34], k131[132], keys[17][16], big[260];
	unsigned ok = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(reserved_keys) / sizeof(reserved_keys[0]); i++) {
		expect_key(log, reserved_keys[i], -EINVAL, &ok);
		char near[40]; /* a prefix or an extension of a reserved name is fine */
		snprintf(near, sizeof(near), "%s_x", reserved_keys[i]);
		expect_key(log, near, 0, &ok);
		snprintf(near, sizeof(near), "x.%s", reserved_keys[i]);
		expect_key(log, near, 0, &ok);
	}
	/* the pattern's edges */
	memset(k32, 'a', 32);
	k32[32] = '\0';
	memset(k33, 'b', 33);
	k33[33] = '\0';
	expect_key(log, k32, 0, &ok);
	expect_key(log, k33, -EINVAL, &ok);
	for (int i = 0; i < 4; i++) { /* four parts of 32: 131 bytes, the longest key */
		memset(k131 + i * 33, (char)('c' + i), 32);
		if (i < 3)
			k131[i * 33 + 32] = '.';
	}
	k131[131] = '\0';
	expect_key(log, k131, 0, &ok);
	k131[33] = 'X';
	expect_key(log, k131, -EINVAL, &ok);
	static const char *const bad_keys[] = {
		"@timestamp", "", "A", "user.Name", "1abc", "a.1b", "_a", "a..b", ".a", "a.",
		"a-b", "a b", "a.b.c.d.e", "\xc3\xa9", "a\n", "a/b",
	};
	for (size_t i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); i++)
		expect_key(log, bad_keys[i], -EINVAL, &ok);
	static const char *const good_keys[] = {"a", "a.b.c.d", "a_", "a9_z.b0", "user.name", "v2",
						"seqs", "a.b_c9"};
	for (size_t i = 0; i < sizeof(good_keys) / sizeof(good_keys[0]); i++)
		expect_key(log, good_keys[i], 0, &ok);
	/* a 33-character part behind a dot */
	char k_dot33[40];
	snprintf(k_dot33, sizeof(k_dot33), "a.%s", k33);
	expect_key(log, k_dot33, -EINVAL, &ok);
	/* 16 fields pass, 17 do not */
	for (unsigned i = 0; i < 17; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%02u", i);
		f[i] = fint(keys[i], (uint64_t)i);
	}
	expect(log, f, 16, 0, &ok);
	expect(log, f, 17, -EINVAL, &ok);
	/* duplicates, also when one value is empty (it is omitted, still a duplicate) */
	struct auditlog_field dup[3] = {fstr("a", "x"), fint("b", 1), fstr("a", "y")};
	expect(log, dup, 3, -EINVAL, &ok);
	dup[2] = fint("a", 2);
	expect(log, dup, 3, -EINVAL, &ok);
	dup[2] = fstr("a", NULL);
	expect(log, dup, 3, -EINVAL, &ok);
	/* an empty value's key must still be a key */
	struct auditlog_field ek[1] = {fstr("Bad", "")};
	expect(log, ek, 1, -EINVAL, &ok);
	ek[0] = fstr("seq", NULL);
	expect(log, ek, 1, -EINVAL, &ok);
	/* integers: 2^53 - 1 passes, 2^53 does not */
	struct auditlog_field in[1] = {fint("n", 9007199254740991ull)};
	expect(log, in, 1, 0, &ok);
	in[0] = fint("n", 9007199254740992ull);
	expect(log, in, 1, -EINVAL, &ok);
	in[0] = fint("n", UINT64_MAX);
	expect(log, in, 1, -EINVAL, &ok);
	/* the 2048-byte JSON total: 8 fields ,"kNN":"<256 bytes>" are 8 * 265 = 2120;
	 * shorten the last value to land exactly on 2048, then one byte over */
	memset(big, 'x', sizeof(big));
	for (int i = 0; i < 8; i++) {
		f[i] = (struct auditlog_field){.key = keys[i], .kind = AUDITLOG_FIELD_STR, .str = big,
					       .str_len = 256};
	}
	/* 7 * (2 + 3 + 2 + 258) = 1855; the 8th: 2 + 3 + 2 + 2 + L = 2048 -> L = 184 */
	f[7].str_len = 184;
	expect(log, f, 8, 0, &ok);
	f[7].str_len = 185;
	expect(log, f, 8, -E2BIG, &ok);
	/* ...also when the bytes come from escapes: 92 quotes are 184 escaped bytes */
	char quotes[93];
	memset(quotes, '"', 92);
	f[7].str = quotes;
	f[7].str_len = 92;
	expect(log, f, 8, 0, &ok);
	quotes[92] = 'q';
	f[7].str_len = 93;
	expect(log, f, 8, -E2BIG, &ok);
	/* the calls' own arguments */
	struct auditlog_field a[1] = {fstr(NULL, "x")};
	expect(log, a, 1, -EINVAL, &ok);
	a[0] = fstr("a", "x");
	a[0].kind = 0;
	expect(log, a, 1, -EINVAL, &ok);
	a[0].kind = 3;
	expect(log, a, 1, -EINVAL, &ok);
	a[0] = (struct auditlog_field){.key = "a", .kind = AUDITLOG_FIELD_STR, .str = NULL,
				       .str_len = 3};
	expect(log, a, 1, -EINVAL, &ok);
	assert_int_equal(auditlog_record_fields(log, &ev, NULL, 1), -EINVAL);
	assert_int_equal(auditlog_record_fields_sync(log, &ev, NULL, 1), -EINVAL);
	assert_int_equal(auditlog_record_fields(NULL, &ev, NULL, 0), -EINVAL);
	assert_int_equal(auditlog_record_fields_sync(NULL, &ev, NULL, 0), -EINVAL);
	a[0] = fstr("a", "x");
	assert_int_equal(auditlog_record_fields(log, NULL, a, 1), -EINVAL);
	struct auditlog_event noact = ev;
	noact.action = NULL;
	assert_int_equal(auditlog_record_fields(log, &noact, a, 1), -EINVAL);
	noact = ev;
	noact.slot = 9007199254740992ull;
	assert_int_equal(auditlog_record_fields_sync(log, &noact, a, 1), -EINVAL);
	/* n = 0: fields may be anything */
	expect(log, NULL, 0, 0, &ok);
	expect(log, a, 0, 0, &ok);

	assert_int_equal(auditlog_close(log), 0);
	/* exactly the accepted records reached the log, nothing of a refused one */
	check_log(path, ok);

	/* on a v1 log: refused, whatever the fields; n = 0 is auditlog_record() */
	unlink(path);
	log = open_log(path, 1, 0);
	assert_int_equal(auditlog_record_fields(log, &ev, a, 1), -EOPNOTSUPP);
	assert_int_equal(auditlog_record_fields_sync(log, &ev, a, 1), -EOPNOTSUPP);
	assert_int_equal(auditlog_record_fields(log, &ev, a, 0), 0);
	assert_int_equal(auditlog_record_fields_sync(log, &ev, NULL, 0), 0);
	assert_int_equal(auditlog_close(log), 0);
	check_log(path, 2);
	tu_rmtree(dir);
	free(path);
	free(dir);
}

/* Write each set of fields as one event, then return the caller parts of the
 * lines (after the header), in order. */
static struct lines write_fields(const char *dir, const struct auditlog_field *const *sets,
				 const size_t *ns, size_t nsets)
{
	char *path = tu_path(dir, "audit.log");
	struct auditlog *log;
	struct lines ls, out = {0};

	unlink(path);
	log = open_log(path, 2, 0);
	for (size_t i = 0; i < nsets; i++) {
		struct auditlog_event ev = tu_event("login", i);
		assert_int_equal(auditlog_record_fields(log, &ev, sets[i], ns[i]), 0);
	}
	assert_int_equal(auditlog_close(log), 0);
	check_log(path, nsets);
	ls = read_lines(path);
	assert_int_equal(ls.n, nsets + 1);
	out.n = nsets;
	out.v = calloc(nsets, sizeof(*out.v));
	assert_non_null(out.v);
	for (size_t i = 0; i < nsets; i++)
		out.v[i] = caller_part(ls.v[i + 1]);
	free_lines(&ls);
	free(path);
	return out;
}

static void test_sorting(void **state)
{
	char *dir = tu_mkdtemp();
	/* bytewise: '.' 0x2e < '_' 0x5f < letters; a prefix first */
	const struct auditlog_field s0[] = {
		fstr("ab", "4"), fint("b", 5), fstr("a_b", "3"), fstr("a.b", "2"), fint("a", 0),
		fstr("a.b.c", "2c"), fstr("a.a", "1"), fstr("aa", "3a"),
	};
	const struct auditlog_field s1[] = {fint("z", 1), fint("y", 2), fint("x", 3)};
	const struct auditlog_field s2[] = {fstr("user.name", "alice")};
	const struct auditlog_field *const sets[] = {s0, s1, s2};
	const size_t ns[] = {8, 3, 1};
	struct lines got = write_fields(dir, sets, ns, 3);

	(void)state;
	assert_string_equal(got.v[0], ",\"a\":0,\"a.a\":\"1\",\"a.b\":\"2\",\"a.b.c\":\"2c\","
				      "\"a_b\":\"3\",\"aa\":\"3a\",\"ab\":\"4\",\"b\":5");
	assert_string_equal(got.v[1], ",\"x\":3,\"y\":2,\"z\":1");
	assert_string_equal(got.v[2], ",\"user.name\":\"alice\"");
	free_lines(&got);
	tu_rmtree(dir);
	free(dir);
}

static void test_odd_values(void **state)
{
	char *dir = tu_mkdtemp();
	static const char nul[] = {'a', '\0', 'b'};
	static const char ctl[] = "\x01\x1f\"\\\n\r\t\b\f\x7f/";
	char longv[300], quotes[300], euro[300];
	/* 100 euro signs (3 bytes each) = 300 bytes */
	for (int i = 0; i < 100; i++)
		memcpy(euro + 3 * i, "\xe2\x82\xac", 3);
	memset(longv, 'v', sizeof(longv));
	memset(quotes, '"', sizeof(quotes));
	const struct auditlog_field s0[] = {
		{.key = "nul", .kind = AUDITLOG_FIELD_STR, .str = nul, .str_len = 3},
		fstr("bad", "\xff\xfe"),
		fstr("trunc", "\xe2\x82\x41"),
		fstr("ctl", ctl),
		fstr("empty", ""),
		fstr("null", NULL),
		fint("zero", 0),
		fint("max", 9007199254740991ull),
	};
	const struct auditlog_field s1[] = {
		{.key = "long", .kind = AUDITLOG_FIELD_STR, .str = longv, .str_len = 300},
	};
	const struct auditlog_field s2[] = {
		{.key = "quotes", .kind = AUDITLOG_FIELD_STR, .str = quotes, .str_len = 300},
	};
	const struct auditlog_field s3[] = {
		{.key = "euro", .kind = AUDITLOG_FIELD_STR, .str = euro, .str_len = 300},
	};
	const struct auditlog_field s4[] = {
		{.key = "fits", .kind = AUDITLOG_FIELD_STR, .str = longv, .str_len = 256},
		fstr("only.empty", ""),
	};
	const struct auditlog_field s5[] = {fstr("only.empty", "")};
	const struct auditlog_field *const sets[] = {s0, s1, s2, s3, s4, s5};
	const size_t ns[] = {8, 1, 1, 1, 2, 1};
	struct lines got = write_fields(dir, sets, ns, 6);
	char want[400];

	(void)state;
	/* section 3: repair (maximal subparts), escapes, raw everything else */
	assert_string_equal(got.v[0], ",\"bad\":\"\xef\xbf\xbd\xef\xbf\xbd\","
				      "\"ctl\":\"\\u0001\\u001f\\\"\\\\\\n\\r\\t\\b\\f\x7f/\","
				      "\"max\":9007199254740991,\"nul\":\"a\\u0000b\","
				      "\"trunc\":\"\xef\xbf\xbd" "A\",\"zero\":0");
	/* cut: the longest prefix of whole units within 256 - 14, then the marker */
	snprintf(want, sizeof(want), ",\"long\":\"%.*s" AL_CUT_MARKER "\"", 242, longv);
	assert_string_equal(got.v[1], want);
	strcpy(want, ",\"quotes\":\"");
	for (int i = 0; i < 121; i++) /* 121 escapes of 2 bytes: 242 */
		strcat(want, "\\\"");
	strcat(want, AL_CUT_MARKER "\"");
	assert_string_equal(got.v[2], want);
	/* 80 euro signs are 240 bytes; an 81st would pass 242 */
	snprintf(want, sizeof(want), ",\"euro\":\"%.*s" AL_CUT_MARKER "\"", 240, euro);
	assert_string_equal(got.v[3], want);
	snprintf(want, sizeof(want), ",\"fits\":\"%.*s\"", 256, longv);
	assert_string_equal(got.v[4], want);
	assert_string_equal(got.v[5], "");
	free_lines(&got);
	tu_rmtree(dir);
	free(dir);
}


/* ---- end to end, concurrent producers ---------------------------------------- */

#define NPROD 4
#define PER_PROD 20000

struct prod {
	struct auditlog *log;
	unsigned id;
	int err;
};

static void *producer(void *arg)
{
	struct prod *p = arg;
	char detail[32], ip[32], longv[300];

	memset(longv, 'L', sizeof(longv));
	memcpy(longv + 50, "\xc3\xa9\"\x01", 4);
	for (unsigned i = 0; i < PER_PROD && !p->err; i++) {
		struct auditlog_event ev = tu_event(i % 2 ? "login" : "logout", p->id);
		struct auditlog_field f[5] = {
			fint("t", p->id),
			fint("i", i),
			fstr("user.name", i % 3 ? "alice" : "b\xc3\xb6" "b \"the\" \xff"),
			{.key = "source.ip", .kind = AUDITLOG_FIELD_STR, .str = ip,
			 .str_len = (size_t)snprintf(ip, sizeof(ip), "10.%u.%u.%u", p->id,
						     (i >> 8) & 255, i & 255)},
			{.key = "long.note", .kind = AUDITLOG_FIELD_STR, .str = longv, .str_len = 300},
		};
		size_t n = i % 7 == 0 ? 5 : 4; /* a long value: the slot's heap */
		int r;

		if (i % 11 == 0) { /* no fields: identified by the detail */
			ev.detail = detail;
			ev.detail_len = (size_t)snprintf(detail, sizeof(detail), "t%u-%u", p->id, i);
			r = i % 2 ? auditlog_record(p->log, &ev) : auditlog_record_fields(p->log, &ev, NULL, 0);
		} else if (i % 500 == 1) {
			r = auditlog_record_fields_sync(p->log, &ev, f, n);
		} else {
			r = auditlog_record_fields(p->log, &ev, f, n);
		}
		if (r < 0)
			p->err = r;
	}
	return NULL;
}

struct seen {
	uint8_t bits[NPROD][PER_PROD];
	unsigned long bad, dups, with_fields;
};

static void on_event(void *ctx, const struct al_parsed *p)
{
	struct seen *s = ctx;
	const struct al_record *r = &p->rec;
	unsigned t = NPROD, i = PER_PROD;

	if (r->version != 2) {
		s->bad++;
		return;
	}
	if (r->ncaller) {
		for (size_t k = 0; k < r->ncaller; k++) {
			const struct al_v2_field *f = &r->caller[k];
			if (f->key_len == 1 && f->key[0] == 't' && f->is_int)
				t = (unsigned)f->u;
			if (f->key_len == 1 && f->key[0] == 'i' && f->is_int)
				i = (unsigned)f->u;
		}
		s->with_fields++;
	} else if (r->present & AL_BIT(AL_F_DETAIL)) {
		char buf[32];
		snprintf(buf, sizeof(buf), "%.*s", (int)r->f[AL_F_DETAIL].n, r->f[AL_F_DETAIL].p);
		if (sscanf(buf, "t%u-%u", &t, &i) != 2)
			t = NPROD;
	}
	if (t >= NPROD || i >= PER_PROD) {
		s->bad++;
		return;
	}
	if (s->bits[t][i])
		s->dups++;
	s->bits[t][i] = 1;
}

static void concurrent(enum auditlog_backend be)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log = NULL;
	struct prod p[NPROD];
	pthread_t th[NPROD];
	struct seen *s = calloc(1, sizeof(*s));
	struct tu_walk w;

	assert_non_null(s);
	v2_config(cfg);
	assert_int_equal(auditlog_config_set_backend(cfg, be), 0);
	assert_int_equal(auditlog_config_set_queue_capacity(cfg, 256), 0); /* producers wait */
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, 64u << 10), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	for (unsigned t = 0; t < NPROD; t++) {
		p[t] = (struct prod){log, t, 0};
		assert_int_equal(pthread_create(&th[t], NULL, producer, &p[t]), 0);
	}
	for (unsigned t = 0; t < NPROD; t++) {
		pthread_join(th[t], NULL);
		assert_int_equal(p[t].err, 0);
	}
	assert_int_equal(auditlog_close(log), 0);
	/* every line canonical and every hash checks: D_n as the producer computed it
	 * is the one al_check_hash derives from the line */
	if (tu_walk_file(path, &w, on_event, s) != 0)
		fail_msg("%s: %s", path, w.error);
	assert_int_equal(w.events, (uint64_t)NPROD * PER_PROD);
	assert_int_equal(s->bad, 0);
	assert_int_equal(s->dups, 0);
	for (unsigned t = 0; t < NPROD; t++)
		for (unsigned i = 0; i < PER_PROD; i++)
			if (!s->bits[t][i])
				fail_msg("event t%u-%u missing", t, i);
	assert_int_equal(s->with_fields, (uint64_t)NPROD * (PER_PROD - (PER_PROD + 10) / 11));
	free(s);
	tu_rmtree(dir);
	free(path);
	free(dir);
}

static void test_concurrent_uring(void **state)
{
	(void)state;
	concurrent(AUDITLOG_BACKEND_AUTO);
}

static void test_concurrent_pwrite(void **state)
{
	(void)state;
	concurrent(AUDITLOG_BACKEND_PWRITE);
}


/* ---- a failed write: the re-queued v2 records keep their fields ----------- */

struct fail_nth {
	_Atomic unsigned writes;
	unsigned nth;
};

static int fail_write(void *ctx, int fd, uint64_t off, size_t *len)
{
	struct fail_nth *f = ctx;
	(void)fd;
	(void)off;
	(void)len;
	return atomic_fetch_add(&f->writes, 1) + 1 == f->nth ? -EIO : 0;
}

#define NFAIL 400

struct fseen {
	unsigned count[NFAIL];
	unsigned bad;
};

static void on_fail_event(void *ctx, const struct al_parsed *p)
{
	struct fseen *s = ctx;
	const struct al_record *r = &p->rec;
	char want[32];
	uint64_t n = NFAIL;
	bool name_ok = false;

	for (size_t k = 0; k < r->ncaller; k++) {
		const struct al_v2_field *f = &r->caller[k];
		if (f->key_len == 1 && f->key[0] == 'n' && f->is_int)
			n = f->u;
	}
	if (n >= NFAIL) {
		s->bad++;
		return;
	}
	snprintf(want, sizeof(want), "user-%u\xc3\xa9", (unsigned)n);
	for (size_t k = 0; k < r->ncaller; k++) {
		const struct al_v2_field *f = &r->caller[k];
		if (f->key_len == 9 && memcmp(f->key, "user.name", 9) == 0)
			name_ok = f->n == strlen(want) && memcmp(f->p, want, f->n) == 0;
	}
	if (r->ncaller != 2 || !name_ok)
		s->bad++;
	s->count[n]++;
}

static void test_failover_requeue(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct fail_nth fn = {.nth = 4};
	struct al_io_hooks h = {.ctx = &fn, .before_write = fail_write};
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;
	struct auditlog_stats st;
	struct fseen *s = calloc(1, sizeof(*s));
	char name[32];
	int res[NFAIL];

	(void)state;
	assert_non_null(s);
	v2_config(cfg);
	assert_int_equal(auditlog__config_set_io_hooks(cfg, &h), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	for (unsigned i = 0; i < NFAIL; i++) {
		struct auditlog_event ev = tu_event("login", i);
		struct auditlog_field f[2] = {
			{.key = "user.name", .kind = AUDITLOG_FIELD_STR, .str = name,
			 .str_len = (size_t)snprintf(name, sizeof(name), "user-%u\xc3\xa9", i)},
			fint("n", i),
		};
		/* a sync record of the failed batch answers -EIO (not made durable
		 * by this call, docs/durability.md); nothing else fails */
		res[i] = i % 7 == 0 ? auditlog_record_fields_sync(log, &ev, f, 2)
				    : auditlog_record_fields(log, &ev, f, 2);
		if (res[i] != 0 && !(i % 7 == 0 && res[i] == -EIO))
			fail_msg("event %u: %d", i, res[i]);
		if (i % 50 == 49)
			usleep(2000); /* several batches */
	}
	assert_int_equal(auditlog_flush(log), 0);
	assert_int_equal(auditlog_get_stats(log, &st, sizeof(st)), 0);
	assert_int_equal(auditlog_close(log), 0);
	assert_int_equal(st.write_errors, 1);
	assert_int_equal(st.failovers, 1);
	assert_int_equal(tu_walk_chain(dir, "audit.log", on_fail_event, s), 2);
	assert_int_equal(s->bad, 0);
	/* everything accepted is there once, with its fields; a refused one is not */
	for (unsigned i = 0; i < NFAIL; i++)
		if (s->count[i] != (res[i] == 0 ? 1u : 0u))
			fail_msg("event n=%u (%d) written %u times", i, res[i], s->count[i]);
	free(s);
	tu_rmtree(dir);
	free(path);
	free(dir);
}

/* ---- v0/v1 unchanged: golden logs ----------------------------------------- */

/* Events that reach every v0/v1 rule the producer path could disturb: every
 * member, names and unnamed numbers, repair, escapes, cuts, sync and async. */
static void golden_events(struct auditlog *log, bool fields_api)
{
	static char longdetail[5000], longlabel[700];
	static uint8_t longid[200];
	static const char odd[] = "caf\xc3\xa9 \xe2\x82\x41 \xff\"q\"\\\n\t\x01\x1b\x7f end";

	memset(longdetail, 'd', sizeof(longdetail));
	memcpy(longdetail + 100, "\xc3\xa9\n", 3);
	memset(longlabel, 'l', sizeof(longlabel));
	for (size_t i = 0; i < sizeof(longid); i++)
		longid[i] = (uint8_t)i;
	for (unsigned i = 0; i < 40; i++) {
		struct auditlog_event ev = tu_event(i % 3 ? "C_Sign" : "C_Encrypt", i);
		switch (i % 8) {
		case 1:
			ev.detail = odd;
			ev.detail_len = sizeof(odd) - 1;
			break;
		case 2:
			ev.rv = 0x80000123; /* unnamed: 0x%08lx */
			ev.mechanism = 0x8000abcd;
			ev.outcome = AUDITLOG_OUTCOME_FAILURE;
			break;
		case 3:
			ev.detail = longdetail;
			ev.detail_len = sizeof(longdetail);
			ev.key_label = longlabel;
			ev.key_label_len = sizeof(longlabel);
			ev.key_id = longid;
			ev.key_id_len = sizeof(longid);
			break;
		case 4:
			ev.flags = 0;
			ev.key_label = NULL;
			ev.key_id = NULL;
			ev.actor = NULL;
			ev.outcome = AUDITLOG_OUTCOME_UNKNOWN;
			break;
		case 5:
			ev.rv = 0xc0; /* CKR_SIGNATURE_INVALID */
			ev.flags &= ~(unsigned)AUDITLOG_EV_MECHANISM;
			ev.actor = odd;
			ev.actor_len = 9;
			break;
		case 6:
			ev.action = odd;
			ev.action_len = sizeof(odd) - 1;
			break;
		}
		int r;
		if (fields_api) /* n = 0 is auditlog_record(), fields NULL or not */
			r = i % 5 == 0 ? auditlog_record_fields_sync(log, &ev, NULL, 0)
				       : auditlog_record_fields(log, &ev, (const struct auditlog_field *)&ev, 0);
		else
			r = i % 5 == 0 ? auditlog_record_sync(log, &ev) : auditlog_record(log, &ev);
		assert_int_equal(r, 0);
	}
}

static void golden(unsigned version, const char *want, bool fields_api)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log"), got[65];
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;
	struct tu_walk w;
	uint8_t *buf;
	size_t len;

	atomic_store(&frozen, true);
	assert_int_equal(auditlog_config_set_format_version(cfg, version), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	golden_events(log, fields_api);
	assert_int_equal(auditlog_close(log), 0);
	atomic_store(&frozen, false);
	assert_int_equal(tu_walk_file(path, &w, NULL, NULL), 0);
	assert_int_equal(w.events, 40);
	buf = tu_read_file(path, &len);
	assert_non_null(buf);
	sha_hex(buf, len, got);
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "v%u log %s (%zu bytes): sha256 %s, want %s; first lines:\n%.1500s\n",
			version, path, len, got, want, (const char *)buf);
		fail();
	}
	free(buf);
	tu_rmtree(dir);
	free(path);
	free(dir);
}

static void test_golden_v1(void **state)
{
	(void)state;
	golden(1, "e6b8189a54997e06bb4186c6dcd39c50cafcc6d97f25cc095cc7890016316a34", false);
	golden(1, "e6b8189a54997e06bb4186c6dcd39c50cafcc6d97f25cc095cc7890016316a34", true);
}

static void test_golden_v0(void **state)
{
	(void)state;
	golden(0, "aafcf9718a233bc92737afee4496e604139d06dfd49962355f0e88aaa4fffc0e", false);
	golden(0, "aafcf9718a233bc92737afee4496e604139d06dfd49962355f0e88aaa4fffc0e", true);
}


/* Remove the line's ,"seq":N member: a v2 log's seals and tree records take
 * seqs of their own between the events. */
static void drop_seq(char *line)
{
	char *a = strstr(line, ",\"seq\":"), *b = a ? strchr(a + 1, ',') : NULL;
	assert_non_null(b);
	memmove(a, b, strlen(b) + 1);
}

/* The same events on a v1 and a v2 log, clock and ids frozen: every line is
 * the same but for "v", "seq" and "hash" (the producer's decoding of the fixed
 * members is the worker's v1 decoding: repair, escapes, cuts, names), and
 * the v2 file checks. */
/* Every line of the v1 log p1 is the v2 log p2's but for "v", "seq" and "hash". */
static void same_but_version(const char *p1, const char *p2)
{
	struct lines l1 = read_lines(p1), l2 = read_lines(p2);

	assert_int_equal(l1.n, l2.n);
	for (size_t i = 0; i < l1.n; i++) {
		char *v = strstr(l1.v[i], ",\"v\":1,"), *h1 = strstr(l1.v[i], ",\"hash\":\""),
		     *h2 = strstr(l2.v[i], ",\"hash\":\"");
		assert_non_null(v);
		assert_non_null(h1);
		assert_non_null(h2);
		v[5] = '2';
		*h1 = *h2 = '\0';
		drop_seq(l1.v[i]);
		drop_seq(l2.v[i]);
		assert_string_equal(l1.v[i], l2.v[i]);
	}
	free_lines(&l1);
	free_lines(&l2);
}

static void test_v2_fixed_members(void **state)
{
	char *dir = tu_mkdtemp(), *p1 = tu_path(dir, "v1.log"), *p2 = tu_path(dir, "v2.log");
	struct auditlog *log;

	(void)state;
	atomic_store(&frozen, true);
	log = open_log(p1, 1, 0);
	golden_events(log, false);
	assert_int_equal(auditlog_close(log), 0);
	log = open_log(p2, 2, 0);
	golden_events(log, true);
	assert_int_equal(auditlog_close(log), 0);
	atomic_store(&frozen, false);
	check_log(p2, 40);
	same_but_version(p1, p2);
	tu_rmtree(dir);
	free(p1);
	free(p2);
	free(dir);
}

/* A v2 slot holds D_n and the rendered members inline up to SLOT_INLINE
 * bytes, on the heap beyond: events whose detail grows a byte at a time
 * (plain, and with escapes and a repaired byte) cross that boundary, through
 * a small queue that wraps many times; each line is v1's but for "v", "seq"
 * and "hash", and the v2 file checks. */
#define SWEEP_MIN 1u
#define SWEEP_MAX 300u

static void sweep_events(struct auditlog *log)
{
	static char d[SWEEP_MAX];

	for (unsigned n = SWEEP_MIN; n < SWEEP_MAX; n++) {
		for (unsigned k = 0; k < 2; k++) {
			struct auditlog_event ev = tu_event("C_Sign", n);
			memset(d, 'x', n);
			if (k && n > 3)
				memcpy(d + n / 2, "\"\xff\n", 3);
			ev.detail = d;
			ev.detail_len = n;
			assert_int_equal(n % 50 ? auditlog_record(log, &ev) : auditlog_record_sync(log, &ev), 0);
		}
	}
}

static void test_slot_boundary(void **state)
{
	char *dir = tu_mkdtemp(), *p1 = tu_path(dir, "v1.log"), *p2 = tu_path(dir, "v2.log");
	struct auditlog *log;

	(void)state;
	atomic_store(&frozen, true);
	log = open_log(p1, 1, 64); /* the smallest queue */
	sweep_events(log);
	assert_int_equal(auditlog_close(log), 0);
	log = open_log(p2, 2, 64);
	sweep_events(log);
	assert_int_equal(auditlog_close(log), 0);
	atomic_store(&frozen, false);
	check_log(p2, 2 * (SWEEP_MAX - SWEEP_MIN));
	/* both sides of the boundary were written: a slot's bytes are D_n and
	 * the members between "type" and "hash" */
	struct lines l2 = read_lines(p2);
	size_t lo = SIZE_MAX, hi = 0;
	for (size_t i = 0; i < l2.n; i++) {
		const char *t = strstr(l2.v[i], ",\"type\":\"event\""), *h = strstr(l2.v[i], ",\"hash\":\"");
		if (!t)
			continue;
		size_t bytes = 32 + (size_t)(h - (t + strlen(",\"type\":\"event\"")));
		lo = bytes < lo ? bytes : lo;
		hi = bytes > hi ? bytes : hi;
	}
	free_lines(&l2);
	assert_true(lo <= SLOT_INLINE && hi > SLOT_INLINE);
	same_but_version(p1, p2);
	tu_rmtree(dir);
	free(p1);
	free(p2);
	free(dir);
}

/* ---- the second key (docs/format.md 2.2: key2_label, key2_id) -------------- */

#define KEY2_EVENTS 4u

static void key2_events(struct auditlog *log)
{
	static const char odd[] = "derived \x01\xc3\xa9\xff";
	static const char junk[] = "MUST-NOT-APPEAR";
	static char longlabel[300];
	static uint8_t id[100];

	memset(longlabel, 'w', sizeof(longlabel));
	for (size_t i = 0; i < sizeof(id); i++)
		id[i] = (uint8_t)(0xa0 + i);
	for (unsigned i = 0; i < KEY2_EVENTS; i++) {
		struct auditlog_event ev = tu_event("C_DeriveKey", i);
		switch (i) {
		case 0: /* both, repaired and escaped; an id of 64 bytes fits exactly */
			ev.flags |= AUDITLOG_EV_KEY2;
			ev.key2_label = odd;
			ev.key2_label_len = sizeof(odd) - 1;
			ev.key2_id = id;
			ev.key2_id_len = 64;
			break;
		case 1: /* both cut at their caps (256, 128): a slot's heap */
			ev.flags |= AUDITLOG_EV_KEY2;
			ev.key2_label = longlabel;
			ev.key2_label_len = sizeof(longlabel);
			ev.key2_id = id;
			ev.key2_id_len = sizeof(id);
			break;
		case 2: /* without the flag the members are not read (an old caller's
			 * struct ends before them) */
			ev.key2_label = junk;
			ev.key2_label_len = sizeof(junk) - 1;
			ev.key2_id = junk;
			ev.key2_id_len = sizeof(junk) - 1;
			break;
		case 3: /* the flag with both absent: nothing written */
			ev.flags |= AUDITLOG_EV_KEY2;
			break;
		}
		assert_int_equal(i % 2 ? auditlog_record_sync(log, &ev) : auditlog_record(log, &ev), 0);
	}
}

static void test_key2(void **state)
{
	char *dir = tu_mkdtemp(), *path[3] = {tu_path(dir, "v0.log"), tu_path(dir, "v1.log"),
					      tu_path(dir, "v2.log")};
	char want0[600], want1[600], hex[2 * 64 + 1];
	uint8_t id[64];
	size_t o;

	(void)state;
	for (size_t i = 0; i < sizeof(id); i++)
		id[i] = (uint8_t)(0xa0 + i);
	al_hex(id, 64, hex);
	hex[128] = '\0';
	snprintf(want0, sizeof(want0),
		 ",\"key_id\":\"01a2\",\"key2_label\":\"derived \\u0001\xc3\xa9\xef\xbf\xbd\","
		 "\"key2_id\":\"%s\",\"actor\":\"user\",",
		 hex);
	o = (size_t)snprintf(want1, sizeof(want1), ",\"key_id\":\"01a2\",\"key2_label\":\"");
	memset(want1 + o, 'w', 242);
	o += 242;
	o += (size_t)snprintf(want1 + o, sizeof(want1) - o, "\xe2\x80\xa6[truncated]\",\"key2_id\":\"%.114s"
			      "\xe2\x80\xa6[truncated]\",\"actor\":\"user\",", hex);
	assert_true(o < sizeof(want1));
	for (unsigned v = 0; v <= 2; v++) {
		struct auditlog *log = open_log(path[v], v, 0);
		struct lines ls;
		key2_events(log);
		assert_int_equal(auditlog_close(log), 0);
		check_log(path[v], KEY2_EVENTS);
		ls = read_lines(path[v]);
		assert_int_equal(ls.n, 1 + KEY2_EVENTS);
		if (!strstr(ls.v[1], want0))
			fail_msg("v%u: %s\nlacks %s", v, ls.v[1], want0);
		if (!strstr(ls.v[2], want1))
			fail_msg("v%u: %s\nlacks %s", v, ls.v[2], want1);
		for (unsigned i = 3; i <= 4; i++)
			if (strstr(ls.v[i], "key2") || strstr(ls.v[i], "MUST"))
				fail_msg("v%u: %s", v, ls.v[i]);
		free_lines(&ls);
	}
	/* and the verification engine takes them */
	for (unsigned v = 0; v <= 2; v++)
		assert_int_equal(tu_verify_stream(path[v]), 0);
	tu_rmtree(dir);
	for (unsigned v = 0; v <= 2; v++)
		free(path[v]);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_sorting),
		cmocka_unit_test(test_odd_values),
		cmocka_unit_test(test_concurrent_uring),
		cmocka_unit_test(test_concurrent_pwrite),
		cmocka_unit_test(test_failover_requeue),
		cmocka_unit_test(test_v2_fixed_members),
		cmocka_unit_test(test_slot_boundary),
		cmocka_unit_test(test_key2),
		cmocka_unit_test(test_golden_v1),
		cmocka_unit_test(test_golden_v0),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
