/* SPDX-License-Identifier: MIT */
/*
 * Differential test of the two parsers the verifier uses: the strict
 * canonical parser (al_parse) and jansson (JSON_REJECT_DUPLICATES). On one
 * corpus (the known-answer lines, v0/v1 and v2, real lines the library wrote,
 * 200,000 seeded mutations of them and 100,000 more of the v2 lines alone; a
 * sanitizer build divides both by AUDITLOG_TEST_SCALE)
 * they must give the same answer: whatever the
 * strict parser accepts, jansson parses into the same members, in the same
 * order, with the same values; and no line jansson rejects is accepted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tu.h"

struct corpus {
	uint8_t **line;
	size_t *len;
	size_t n, cap;
};

static void add(struct corpus *c, const uint8_t *p, size_t n)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 256;
		c->line = realloc(c->line, c->cap * sizeof(*c->line));
		c->len = realloc(c->len, c->cap * sizeof(*c->len));
	}
	c->line[c->n] = malloc(n + 1);
	memcpy(c->line[c->n], p, n);
	c->len[c->n++] = n;
}

/* Same answer, or fail with the line. Returns whether strict accepted. */
static bool compare(const uint8_t *line, size_t len, uint8_t *dec)
{
	struct al_parsed p;
	size_t off;
	json_error_t err;
	bool strict = al_parse(line, len, dec, &p, &off) == AL_PERR_OK;
	json_t *j = json_loadb((const char *)line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);

	if (!strict) {
		json_decref(j);
		return false;
	}
	if (!j || !json_is_object(j))
		fail_msg("strict accepted what jansson rejects: %.*s", (int)len, line);
	/* the members jansson sees, in order, against the strict record */
	unsigned k = 0;
	size_t ncaller = 0;
	const char *key;
	json_t *v;
	void *it = json_object_iter(j);
	for (; it; it = json_object_iter_next(j, it), k++) {
		key = json_object_iter_key(it);
		v = json_object_iter_value(it);
		if (!strcmp(key, "v")) {
			assert_true(json_is_integer(v));
			assert_int_equal(json_integer_value(v), p.rec.version);
			continue;
		}
		if (!strcmp(key, "type")) {
			assert_string_equal(json_string_value(v), al_type_name(p.rec.type));
			continue;
		}
		if (!strcmp(key, "hash")) {
			char hex[65] = {0};
			al_hex(p.hash, AL_HASH_LEN, hex);
			assert_string_equal(json_string_value(v), hex);
			continue;
		}
		int f = -1;
		for (int i = 0; i < AL_F__MAX; i++)
			if (!strcmp(al_field_key((enum al_field)i), key))
				f = i;
		if (f < 0) { /* a v2 caller field: the next one in line order */
			const struct al_v2_field *c = &p.rec.caller[ncaller];
			if (ncaller == p.rec.ncaller || c->key_len != strlen(key) ||
			    memcmp(c->key, key, c->key_len) != 0)
				fail_msg("jansson sees member %s that strict did not: %.*s", key, (int)len,
					 line);
			ncaller++;
			if (c->is_int ? !json_is_integer(v) || (uint64_t)json_integer_value(v) != c->u
				      : !json_is_string(v) || json_string_length(v) != c->n ||
						memcmp(json_string_value(v), c->p, c->n) != 0)
				fail_msg("caller field %s differs: %.*s", key, (int)len, line);
			continue;
		}
		if (!(p.rec.present & AL_BIT(f)))
			fail_msg("jansson sees member %s that strict did not: %.*s", key, (int)len, line);
		if (json_is_integer(v)) {
			assert_int_equal((uint64_t)json_integer_value(v), p.rec.f[f].u);
		} else {
			assert_true(json_is_string(v));
			size_t n = json_string_length(v);
			if (n != p.rec.f[f].n || memcmp(json_string_value(v), p.rec.f[f].p, n) != 0)
				fail_msg("member %s differs: %.*s", key, (int)len, line);
		}
	}
	/* the same number of members: every present field + v, type, hash + caller */
	unsigned present = 0;
	for (int i = 0; i < AL_F__MAX; i++)
		present += !!(p.rec.present & AL_BIT(i));
	assert_int_equal(ncaller, p.rec.ncaller);
	assert_int_equal(k, present + 3 + ncaller);
	json_decref(j);
	return true;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_differential(void **state)
{
	struct corpus c = {0};
	uint8_t *dec = malloc(AL_LINE_MAX * 4);
	json_error_t err;

	/* the known-answer lines */
	const char *vp = getenv("AUDITLOG_VECTORS");
	assert_non_null(vp);
	json_t *vectors = json_load_file(vp, 0, &err);
	assert_non_null(vectors);
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(vectors, "vectors"), i, v) {
		const char *hex = json_string_value(json_object_get(v, "line_hex"));
		size_t n = strlen(hex) / 2 - 1; /* without the '\n' */
		uint8_t *b = malloc(n + 1);
		assert_int_equal(al_unhex((const uint8_t *)hex, 2 * n, b), 0);
		add(&c, b, n);
		free(b);
	}
	json_decref(vectors);
	/* the v2 known-answer lines: every record type, caller fields */
	size_t v2_first = c.n;
	vp = getenv("AUDITLOG_V2_VECTORS");
	assert_non_null(vp);
	vectors = json_load_file(vp, 0, &err);
	assert_non_null(vectors);
	json_array_foreach(json_object_get(vectors, "records"), i, v) {
		const char *hex = json_string_value(json_object_get(v, "line_hex"));
		size_t n = strlen(hex) / 2 - 1;
		uint8_t *b = malloc(n + 1);
		assert_int_equal(al_unhex((const uint8_t *)hex, 2 * n, b), 0);
		add(&c, b, n);
		free(b);
	}
	json_decref(vectors);
	size_t v2_end = c.n;
	assert_true(v2_end - v2_first >= 20);

	/* real lines the library wrote: v0 and v1, events with hostile strings */
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	for (unsigned ver = 0; ver < 2; ver++) {
		struct auditlog_config *cfg = tu_config(path);
		struct auditlog *log;
		assert_int_equal(auditlog_config_set_format_version(cfg, ver), 0);
		assert_int_equal(auditlog_open(cfg, &log), 0);
		auditlog_config_free(cfg);
		static const char hostile[] = "a\"b\\c\n\t\x01\x1f\x7f\xc3\xa9\xe2\x80\xae\xff\xc0\x80 z";
		for (unsigned k = 0; k < 200; k++) {
			struct auditlog_event ev = tu_event("C_Sign", k);
			ev.detail = hostile;
			ev.detail_len = k % sizeof(hostile);
			ev.rv = k;
			assert_int_equal(auditlog_record(log, &ev), 0);
		}
		assert_int_equal(auditlog_close(log), 0);
	}
	size_t len;
	uint8_t *buf = tu_read_file(path, &len);
	for (size_t pos = 0; pos < len;) {
		uint8_t *nl = memchr(buf + pos, '\n', len - pos);
		add(&c, buf + pos, (size_t)(nl - (buf + pos)));
		pos = (size_t)(nl - buf) + 1;
	}
	free(buf);

	/* every line as it is: all canonical */
	size_t base = c.n;
	for (i = 0; i < base; i++)
		assert_true(compare(c.line[i], c.len[i], dec));

	/* seeded mutations: a byte changed, inserted or deleted, spaces, swaps */
	uint64_t seed = 0x5eed1234abcdull, accepted = 0, total = 0;
	uint8_t m[AL_LINE_MAX + 16];
	static const uint8_t alphabet[] = "\"\\{}[],: 0123456789abcdefnrtu.-+eE\x01\x7f\xc3\xa9\xff";
	/* 300,000 (fewer in the sanitizer builds: AUDITLOG_TEST_SCALE); the
	 * last third the v2 lines only */
	const unsigned rounds = 300000 / (unsigned)tu_test_scale(), v2_from = rounds / 3 * 2;
	for (unsigned round = 0; round < rounds; round++) {
		size_t k = round < v2_from ? rnd(&seed) % base
					  : v2_first + rnd(&seed) % (v2_end - v2_first);
		size_t n = c.len[k];
		if (n + 8 > sizeof(m))
			continue;
		memcpy(m, c.line[k], n);
		size_t at = rnd(&seed) % n;
		uint8_t b = alphabet[rnd(&seed) % (sizeof(alphabet) - 1)];
		switch (rnd(&seed) % 4) {
		case 0: m[at] = b; break;
		case 1: memmove(m + at + 1, m + at, n - at); m[at] = b; n++; break;
		case 2: memmove(m + at, m + at + 1, n - at - 1); n--; break;
		default: {
			size_t at2 = rnd(&seed) % n;
			uint8_t t = m[at];
			m[at] = m[at2];
			m[at2] = t;
		}
		}
		accepted += compare(m, n, dec);
		total++;
	}
	/* most mutations break the line; a few stay canonical (a digit of a
	 * value, the same byte swapped with itself): both parsers agreed on all */
	print_message("differential: %llu lines, %llu mutations, %llu still canonical\n",
		      (unsigned long long)base, (unsigned long long)total,
		      (unsigned long long)accepted);
	assert_true(total > rounds / 6 * 5);
	assert_true(accepted > 0 && accepted < total / 2);

	for (i = 0; i < c.n; i++)
		free(c.line[i]);
	free(c.line);
	free(c.len);
	free(dec);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_differential),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
