/* SPDX-License-Identifier: MIT */
/*
 * The v2 format layer (docs/format.md Part II) against the known-answer
 * vectors of tests/vectors/v2_vectors.json, made by the independent
 * gen_v2_vectors.py from the spec: first the external vectors that script
 * checked (RFC 8032, RFC 4231, the RFC 6962 test tree, the sumdb note), then
 * ours (bodies, chain steps, seals, key tree, checkpoints, compact ranges,
 * proofs, caller fields). Negative cases: every flipped bit of a MAC input, a
 * signed note or a proof must fail.
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

#include "tu.h"
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "format.h"
#include "format_v2.h"
#include "keyfile.h"
#include "merkle.h"
#include "note.h"
#include "sealkey.h"
#include "seal.h"
#include "checkpoint.h"

static json_t *V;

static int load(void **state)
{
	(void)state;
	V = tu_json_file_env("AUDITLOG_V2_VECTORS");
	return V ? 0 : -1;
}

static int unload(void **state)
{
	json_decref(V);
	V = NULL;
	return 0;
}

static json_t *at(const char *path)
{
	/* "a.b.c" through objects */
	char buf[128], *save = NULL;
	json_t *o = V;

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *t = strtok_r(buf, ".", &save); t && o; t = strtok_r(NULL, ".", &save))
		o = json_object_get(o, t);
	assert_non_null(o);
	return o;
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	if (!s)
		fail_msg("member %s missing", k);
	return s;
}

static uint64_t num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_integer(v))
		fail_msg("member %s missing", k);
	return (uint64_t)json_integer_value(v);
}

/* hex string into a malloc'ed buffer (never NULL) */
static uint8_t *unhex(const char *s, size_t *ret_n)
{
	size_t n = strlen(s);
	uint8_t *b = malloc(n / 2 + 1);

	assert_non_null(b);
	assert_int_equal(n % 2, 0);
	assert_int_equal(al_unhex((const uint8_t *)s, n, b), 0);
	*ret_n = n / 2;
	return b;
}

static void unhex32(const char *s, uint8_t out[32])
{
	assert_int_equal(strlen(s), 64);
	assert_int_equal(al_unhex((const uint8_t *)s, 64, out), 0);
}

static void hex_eq(const uint8_t *got, size_t n, const char *want, const char *what)
{
	size_t wn;
	uint8_t *w = unhex(want, &wn);

	if (wn != n || memcmp(got, w, n) != 0) {
		char *g = malloc(2 * n + 1);
		assert_non_null(g);
		al_hex(got, n, g);
		g[2 * n] = 0;
		fail_msg("%s: got %s, want %s", what, g, want);
	}
	free(w);
}

/* an array of 64-hex strings into hashes */
static uint8_t (*hashes(json_t *a, size_t *ret_n))[32]
{
	size_t n = json_array_size(a);
	uint8_t (*h)[32] = calloc(n + 1, 32);

	assert_non_null(h);
	for (size_t i = 0; i < n; i++)
		unhex32(json_string_value(json_array_get(a, i)), h[i]);
	*ret_n = n;
	return h;
}

/* ---- external vectors ------------------------------------------------------ */

/* al_sha256, the one SHA-256 of the format layer (a padding of its own was
 * tried there, chain.c says why it went): FIPS 180-2's vectors (the 56-byte
 * one is the boundary where the length no longer fits the last block), then
 * every length 0..300 at every alignment against OpenSSL's EVP digest. */
static void test_sha256_padding(void **state)
{
	static const struct {
		const char *m, *h;
	} fips[] = {
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
	};
	uint8_t buf[304 + 8], a[32], b[32];
	unsigned int bn;

	(void)state;
	for (size_t i = 0; i < sizeof(fips) / sizeof(fips[0]); i++) {
		al_sha256(fips[i].m, strlen(fips[i].m), a);
		hex_eq(a, 32, fips[i].h, fips[i].m);
	}
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	for (size_t off = 0; off < 8; off++)
		for (size_t n = 0; n <= 300; n++) {
			al_sha256(buf + off, n, a);
			bn = 0;
			assert_int_equal(EVP_Digest(buf + off, n, b, &bn, EVP_sha256(), NULL), 1);
			assert_int_equal(bn, 32);
			if (memcmp(a, b, 32) != 0)
				fail_msg("al_sha256 differs from EVP at length %zu, offset %zu", n, off);
		}
}

static void test_rfc4231_hmac(void **state)
{
	json_t *a = at("external.hmac_sha256"), *v;
	size_t i;

	assert_int_equal(json_array_size(a), 7);
	json_array_foreach(a, i, v) {
		size_t kn, dn;
		uint8_t *k = unhex(str(v, "key"), &kn), *d = unhex(str(v, "data"), &dn);
		uint8_t mac[32], mac2[32];
		size_t b = num(v, "bytes");

		assert_int_equal(al_hmac_sha256(k, kn, d, dn, mac), 0);
		hex_eq(mac, b, str(v, "mac"), str(v, "name"));
		d[0] ^= 1;
		assert_int_equal(al_hmac_sha256(k, kn, d, dn, mac2), 0);
		assert_memory_not_equal(mac, mac2, 32);
		free(k);
		free(d);
	}
}

static void test_rfc8032_ed25519(void **state)
{
	json_t *a = at("external.ed25519"), *v;
	size_t i;

	assert_int_equal(json_array_size(a), 3);
	json_array_foreach(a, i, v) {
		uint8_t seed[32], pub[32], sig[64], want[32];
		size_t mn, sn;
		uint8_t *m = unhex(str(v, "message"), &mn), *ws = unhex(str(v, "signature"), &sn);

		unhex32(str(v, "seed"), seed);
		unhex32(str(v, "public"), want);
		assert_int_equal(al_ed25519_public(seed, pub), 0);
		assert_memory_equal(pub, want, 32);
		assert_int_equal(al_ed25519_sign(seed, m, mn, sig), 0);
		assert_int_equal(sn, 64);
		assert_memory_equal(sig, ws, 64);
		assert_int_equal(al_ed25519_verify(pub, m, mn, sig), 0);
		for (size_t bit = 0; bit < 64 * 8; bit += 7) {
			sig[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			assert_int_equal(al_ed25519_verify(pub, m, mn, sig), -EBADMSG);
			sig[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
		if (mn) {
			m[0] ^= 0x80;
			assert_int_equal(al_ed25519_verify(pub, m, mn, sig), -EBADMSG);
		}
		free(m);
		free(ws);
	}
}

/* every single-bit flip of every proof element, and wrong sizes, must fail */
static void inclusion_negatives(uint64_t idx, uint64_t size, const uint8_t leaf[32],
				uint8_t (*p)[32], size_t n, const uint8_t root[32])
{
	uint8_t bad[32];

	for (size_t j = 0; j < n; j++)
		for (unsigned bit = 0; bit < 256; bit++) {
			p[j][bit / 8] ^= (uint8_t)(1u << (bit % 8));
			assert_int_not_equal(al_merkle_verify_inclusion(idx, size, leaf, (const uint8_t(*)[32])p, n, root), 0);
			p[j][bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
	memcpy(bad, leaf, 32);
	bad[31] ^= 1;
	assert_int_not_equal(al_merkle_verify_inclusion(idx, size, bad, (const uint8_t(*)[32])p, n, root), 0);
	memcpy(bad, root, 32);
	bad[0] ^= 1;
	assert_int_not_equal(al_merkle_verify_inclusion(idx, size, leaf, (const uint8_t(*)[32])p, n, bad), 0);
	assert_int_not_equal(al_merkle_verify_inclusion(idx, size * 2, leaf, (const uint8_t(*)[32])p, n, root), 0);
	assert_int_not_equal(al_merkle_verify_inclusion(idx ^ 1, size, leaf, (const uint8_t(*)[32])p, n, root), 0);
	if (n)
		assert_int_not_equal(al_merkle_verify_inclusion(idx, size, leaf, (const uint8_t(*)[32])p, n - 1, root), 0);
	assert_int_equal(al_merkle_verify_inclusion(size, size, leaf, (const uint8_t(*)[32])p, n, root), -EINVAL);
}

static void consistency_negatives(uint64_t m, uint64_t sz, const uint8_t r1[32],
				  const uint8_t r2[32], uint8_t (*p)[32], size_t n)
{
	uint8_t bad[32];

	if (m == 0 || m == sz)
		return; /* trivial proofs carry no hash */
	for (size_t j = 0; j < n; j++)
		for (unsigned bit = 0; bit < 256; bit++) {
			p[j][bit / 8] ^= (uint8_t)(1u << (bit % 8));
			assert_int_not_equal(al_merkle_verify_consistency(m, sz, r1, r2, (const uint8_t(*)[32])p, n), 0);
			p[j][bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
	memcpy(bad, r1, 32);
	bad[5] ^= 4;
	assert_int_not_equal(al_merkle_verify_consistency(m, sz, bad, r2, (const uint8_t(*)[32])p, n), 0);
	memcpy(bad, r2, 32);
	bad[5] ^= 4;
	assert_int_not_equal(al_merkle_verify_consistency(m, sz, r1, bad, (const uint8_t(*)[32])p, n), 0);
	assert_int_not_equal(al_merkle_verify_consistency(m, sz, r1, r2, (const uint8_t(*)[32])p, n - 1), 0);
	assert_int_not_equal(al_merkle_verify_consistency(m, sz, r2, r1, (const uint8_t(*)[32])p, n), 0);
	assert_int_not_equal(al_merkle_verify_consistency(m + 1, sz, r1, r2, (const uint8_t(*)[32])p, n), 0);
	assert_int_equal(al_merkle_verify_consistency(sz + 1, sz, r1, r2, (const uint8_t(*)[32])p, n), -EINVAL);
}

static void check_proofs(json_t *tv, uint8_t (*leaves)[32], uint8_t (*roots)[32])
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(tv, "inclusion"), i, v) {
		size_t n;
		uint64_t idx = num(v, "index"), size = num(v, "size");
		uint8_t(*p)[32] = hashes(json_object_get(v, "path"), &n);

		assert_int_equal(al_merkle_verify_inclusion(idx, size, leaves[idx], (const uint8_t(*)[32])p, n, roots[size]), 0);
		inclusion_negatives(idx, size, leaves[idx], p, n, roots[size]);
		/* generation (proof.c) gives exactly the vector's path */
		{
			uint8_t g[AL_MERKLE_PROOF_MAX][32];
			size_t gn = 0;
			assert_int_equal(al_merkle_inclusion_proof((const uint8_t(*)[32])leaves, size, idx, g, AL_MERKLE_PROOF_MAX, &gn), 0);
			assert_int_equal(gn, n);
			if (n)
				assert_memory_equal(g, p, n * 32);
			if (n)
				assert_int_equal(al_merkle_inclusion_proof((const uint8_t(*)[32])leaves, size, idx, g, n - 1, &gn), -ENOBUFS);
			assert_int_equal(al_merkle_inclusion_proof((const uint8_t(*)[32])leaves, size, size, g, AL_MERKLE_PROOF_MAX, &gn), -EINVAL);
		}
		free(p);
	}
	json_array_foreach(json_object_get(tv, "consistency"), i, v) {
		size_t n;
		uint64_t a = num(v, "size1"), b = num(v, "size2");
		uint8_t(*p)[32] = hashes(json_object_get(v, "proof"), &n);

		assert_int_equal(al_merkle_verify_consistency(a, b, roots[a], roots[b], (const uint8_t(*)[32])p, n), 0);
		consistency_negatives(a, b, roots[a], roots[b], p, n);
		{
			uint8_t g[AL_MERKLE_PROOF_MAX][32];
			size_t gn = 99;
			assert_int_equal(al_merkle_consistency_proof((const uint8_t(*)[32])leaves, a, b, g, AL_MERKLE_PROOF_MAX, &gn), 0);
			assert_int_equal(gn, n);
			if (n)
				assert_memory_equal(g, p, n * 32);
			assert_int_equal(al_merkle_consistency_proof((const uint8_t(*)[32])leaves, b + 1, b, g, AL_MERKLE_PROOF_MAX, &gn), -EINVAL);
		}
		free(p);
	}
}

static void test_rfc6962_tree(void **state)
{
	json_t *t = at("external.rfc6962");
	json_t *in = json_object_get(t, "leaf_inputs"), *cr = json_object_get(t, "compact_ranges");
	uint8_t leaves[8][32], roots[9][32];
	struct al_merkle_range r;
	size_t nr;
	uint8_t(*rs)[32] = hashes(json_object_get(t, "roots"), &nr);

	assert_int_equal(json_array_size(in), 8);
	assert_int_equal(nr, 9);
	memcpy(roots, rs, sizeof(roots));
	free(rs);
	al_merkle_range_init(&r);
	assert_int_equal(al_merkle_range_root(&r, leaves[0]), -EINVAL);
	for (size_t i = 0; i < 8; i++) {
		size_t n, nc;
		uint8_t *d = unhex(json_string_value(json_array_get(in, i)), &n);
		uint8_t m[64], root[32];
		uint8_t(*c)[32] = hashes(json_array_get(cr, i), &nc);

		m[0] = 0x00;
		memcpy(m + 1, d, n);
		al_sha256(m, n + 1, leaves[i]);
		hex_eq(leaves[i], 32, json_string_value(json_array_get(json_object_get(t, "leaf_hashes"), i)), "leaf hash");
		assert_int_equal(al_merkle_range_append(&r, leaves[i]), 0);
		assert_int_equal(r.size, i + 1);
		assert_int_equal(r.n, nc);
		assert_memory_equal(r.h, c, nc * 32);
		assert_int_equal(al_merkle_range_root(&r, root), 0);
		assert_memory_equal(root, roots[i + 1], 32);
		free(c);
		free(d);
	}
	check_proofs(t, leaves, roots);
	/* every proof of the 8-leaf tree that generation gives, the verifier takes */
	for (uint64_t size = 1; size <= 8; size++) {
		uint8_t g[AL_MERKLE_PROOF_MAX][32];
		size_t gn;
		for (uint64_t i = 0; i < size; i++) {
			assert_int_equal(al_merkle_inclusion_proof((const uint8_t(*)[32])leaves, size, i, g, AL_MERKLE_PROOF_MAX, &gn), 0);
			assert_int_equal(al_merkle_verify_inclusion(i, size, leaves[i], (const uint8_t(*)[32])g, gn, roots[size]), 0);
		}
		for (uint64_t m = 0; m <= size; m++) {
			assert_int_equal(al_merkle_consistency_proof((const uint8_t(*)[32])leaves, m, size, g, AL_MERKLE_PROOF_MAX, &gn), 0);
			if (m)
				assert_int_equal(al_merkle_verify_consistency(m, size, roots[m], roots[size], (const uint8_t(*)[32])g, gn), 0);
			else
				assert_int_equal(gn, 0);
		}
	}
}

/* Two SHA-256 at once (the Merkle nodes' fast path) against one at a time,
 * at every length it takes; al_merkle_range_append_n against appends one by
 * one from every start up to 300 leaves, across its 64-leaf chunks. */
static void test_merkle_append_n(void **state)
{
	enum { NL = 600 };
	static struct al_merkle_range ref[NL + 1];
	static uint8_t leaves[NL][32];
	static const size_t ms[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 256, 299};
	uint8_t ma[128], mb[128], a[128], b[128], oa[32], ob[32], wa[32], wb[32];
	int ni = al_sha256_ni_ok(); /* "fast" may only be its answer */

	(void)state;
	if (!ni)
		print_message("this CPU has no SHA-NI: both arms run OpenSSL\n");
	for (size_t i = 0; i < 128; i++)
		ma[i] = (uint8_t)(i * 29 + 3), mb[i] = (uint8_t)(i * 71 + 11);
	for (size_t na = 56; na <= 119; na++)
		for (size_t nb = 56; nb <= 119; nb++)
			for (int fast = 0; fast <= ni; fast++) {
				memcpy(a, ma, sizeof(a));
				memcpy(b, mb, sizeof(b));
				al_sha256(ma, na, wa);
				al_sha256(mb, nb, wb);
				al_sha256_2blk_x2(a, na, b, nb, oa, ob, fast);
				if (memcmp(oa, wa, 32) != 0 || memcmp(ob, wb, 32) != 0)
					fail_msg("two at once differ at lengths %zu, %zu (fast %d)", na, nb, fast);
			}
	for (size_t i = 0; i < NL; i++)
		al_sha256(&i, sizeof(i), leaves[i]);
	al_merkle_range_init(&ref[0]);
	for (size_t i = 0; i < NL; i++) {
		ref[i + 1] = ref[i];
		assert_int_equal(al_merkle_range_append(&ref[i + 1], leaves[i]), 0);
	}
	for (size_t s = 0; s <= 300; s++)
		for (size_t j = 0; j < sizeof(ms) / sizeof(ms[0]); j++)
			for (int fast = 0; fast <= ni; fast++) {
				struct al_merkle_range r = ref[s];
				size_t m = ms[j];

				assert_int_equal(al_merkle_range_append_n(&r, (const uint8_t(*)[32])leaves[s], m, fast), 0);
				if (r.size != ref[s + m].size || r.n != ref[s + m].n ||
				    memcmp(r.h, ref[s + m].h, (size_t)r.n * 32) != 0)
					fail_msg("append_n of %zu leaves onto %zu differs (fast %d)", m, s, fast);
			}
	/* the limit one at a time keeps: 2^53 - 1 leaves */
	{
		struct al_merkle_range r = ref[1], r0;

		r.size = AL_MERKLE_MAX_SIZE - 3; /* its range no longer matches: size is what is checked */
		r0 = r;
		assert_int_equal(al_merkle_range_append_n(&r, (const uint8_t(*)[32])leaves, 3, ni), -EOVERFLOW);
		assert_memory_equal(&r, &r0, sizeof(r));
	}
}

/* A leaf appended one node at a time (the writer's way, beside its chain
 * steps) against al_merkle_range_append, from every size up to 300; and the
 * chain step with a node beside it against the two hashed apart. */
static void test_merkle_step(void **state)
{
	enum { NL = 300 };
	static uint8_t leaves[NL][32];
	struct al_merkle_range ref, r;
	struct al_merkle_step st = {0};
	int ni = al_sha256_ni_ok();
	char ts[AL_TS_LEN];

	(void)state;
	for (size_t i = 0; i < NL; i++)
		al_sha256(&i, sizeof(i), leaves[i]);
	al_merkle_range_init(&ref);
	al_merkle_range_init(&r);
	for (size_t i = 0; i < NL; i++) {
		unsigned owed = 0, want = 0;
		int rc;

		for (uint64_t s = ref.size; s & 1; s >>= 1)
			want++;
		assert_int_equal(al_merkle_range_append(&ref, leaves[i]), 0);
		rc = al_merkle_step_begin(&r, &st, leaves[i]);
		assert_int_equal(rc, want > 0);
		while (rc == 1) {
			const uint8_t *a, *b;
			uint8_t h[32];

			assert_true(st.open);
			al_merkle_step_node(&r, &st, &a, &b);
			al_merkle_node(a, b, h);
			owed++;
			rc = al_merkle_step_done(&r, &st, h) ? 0 : 1;
		}
		assert_false(st.open);
		assert_int_equal(owed, want);
		if (r.size != ref.size || r.n != ref.n || memcmp(r.h, ref.h, (size_t)r.n * 32) != 0)
			fail_msg("stepped append of leaf %zu differs", i);
	}
	r.size = AL_MERKLE_MAX_SIZE - 1;
	assert_int_equal(al_merkle_step_begin(&r, &st, leaves[0]), -EOVERFLOW);

	memset(ts, '7', sizeof(ts));
	for (int fast = 0; fast <= ni; fast++)
		for (int with = 0; with <= 1; with++) {
			struct al_node_job job = {.l = leaves[1], .r = leaves[2]};
			uint8_t want_c[32], want_n[32], got[32];

			al_v2_chain_step(leaves[3], 12345, ts, leaves[4], want_c);
			al_merkle_node(leaves[1], leaves[2], want_n);
			al_v2_chain_step_node(leaves[3], 12345, ts, leaves[4], got, with ? &job : NULL, fast);
			assert_memory_equal(got, want_c, 32);
			if (with)
				assert_memory_equal(job.out, want_n, 32);
		}
}

static void test_sumdb_note(void **state)
{
	json_t *t = at("external.note");
	uint8_t seed[32], pub[32], kid[4], out[512];
	size_t tn, sn, tl = 0;
	uint8_t *text = unhex(str(t, "text_hex"), &tn), *signed_ = unhex(str(t, "signed_hex"), &sn);
	const char *name = str(t, "name");
	long n;

	unhex32(str(t, "seed"), seed);
	assert_int_equal(al_ed25519_public(seed, pub), 0);
	hex_eq(pub, 32, str(t, "public"), "note public key");
	assert_int_equal(al_note_key_id((const uint8_t *)name, strlen(name), pub, kid), 0);
	hex_eq(kid, 4, str(t, "key_id"), "note key id");
	n = al_note_sign(seed, pub, (const uint8_t *)name, strlen(name), text, tn, out, sizeof(out));
	assert_int_equal(n, (long)sn);
	assert_memory_equal(out, signed_, sn);
	assert_int_equal(al_note_verify(pub, (const uint8_t *)name, strlen(name), signed_, sn, &tl), 0);
	assert_int_equal(tl, tn);
	assert_int_equal(al_note_verify(pub, (const uint8_t *)"EnochRoot", 9, signed_, sn, NULL), -ENOKEY);
	/* another key's line is ignored, unless the note is then malformed: not
	 * UTF-8 (a lone continuation byte) or a control character */
	{
		static const char extra[] = "\xe2\x80\x94 other.example/k AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n";
		size_t xl = sizeof(extra) - 1;
		uint8_t *two = malloc(sn + xl);
		assert_non_null(two);
		memcpy(two, signed_, sn);
		memcpy(two + sn, extra, xl);
		assert_int_equal(al_note_verify(pub, (const uint8_t *)name, strlen(name), two, sn + xl, NULL), 0);
		two[sn + 6] = 0x80;
		assert_int_equal(al_note_verify(pub, (const uint8_t *)name, strlen(name), two, sn + xl, NULL), -EBADMSG);
		two[sn + 6] = 0x01;
		assert_int_equal(al_note_verify(pub, (const uint8_t *)name, strlen(name), two, sn + xl, NULL), -EBADMSG);
		two[sn + 6] = '+';
		assert_int_equal(al_note_verify(pub, (const uint8_t *)name, strlen(name), two, sn + xl, NULL), -EBADMSG);
		free(two);
	}
	/* the known key's signature over a changed text: rejected, not ignored */
	signed_[3] ^= 0x20;
	assert_int_equal(al_note_verify(pub, (const uint8_t *)name, strlen(name), signed_, sn, NULL), -EBADMSG);
	signed_[3] ^= 0x20;
	for (size_t bit = 0; bit < sn * 8; bit++) {
		signed_[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_not_equal(al_note_verify(pub, (const uint8_t *)name, strlen(name), signed_, sn, NULL), 0);
		signed_[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	free(text);
	free(signed_);
}

/* ---- our vectors ----------------------------------------------------------- */

struct members {
	struct al_v2_member m[16];
	size_t nm;
	struct al_v2_field f[AL_CALLER_MAX + 2];
	size_t nf;
	uint8_t *bufs[40];
	size_t nb;
};

static void members_free(struct members *x)
{
	for (size_t i = 0; i < x->nb; i++)
		free(x->bufs[i]);
	x->nb = 0;
}

static void value(struct members *x, json_t *val, bool *is_int, const uint8_t **p, size_t *n,
		  uint64_t *u)
{
	json_t *iv = json_object_get(val, "int");

	if (iv) {
		*is_int = true;
		*u = (uint64_t)json_integer_value(iv);
		*p = NULL;
		*n = 0;
	} else {
		uint8_t *b = unhex(json_string_value(json_object_get(val, "str_hex")), n);
		*is_int = false;
		*p = b;
		*u = 0;
		assert_true(x->nb < 40);
		x->bufs[x->nb++] = b;
	}
}

static void load_members(json_t *rec, struct members *x, bool skip_mac)
{
	json_t *v;
	size_t i;

	memset(x, 0, sizeof(*x));
	json_array_foreach(json_object_get(rec, "members"), i, v) {
		uint8_t tag = (uint8_t)json_integer_value(json_array_get(v, 1));
		struct al_v2_member *m;
		if (skip_mac && tag == AL_TAG_MAC)
			continue;
		m = &x->m[x->nm++];
		m->tag = tag;
		value(x, json_array_get(v, 2), &m->is_int, &m->p, &m->n, &m->u);
	}
	json_array_foreach(json_object_get(rec, "caller"), i, v) {
		struct al_v2_field *f = &x->f[x->nf++];
		f->key = (const uint8_t *)json_string_value(json_array_get(v, 0));
		f->key_len = strlen((const char *)f->key);
		value(x, json_array_get(v, 1), &f->is_int, &f->p, &f->n, &f->u);
	}
}

static const struct al_v2_member *member(const struct members *x, uint8_t tag)
{
	for (size_t i = 0; i < x->nm; i++)
		if (x->m[i].tag == tag)
			return &x->m[i];
	fail_msg("no member with tag 0x%02x", tag);
	return NULL;
}

static uint8_t type_code(const char *t)
{
	static const char *const names[] = { "", "event", "header", "recovery", "seal",
					     "checkpoint", "tree", "clock" };
	for (uint8_t i = 1; i < 8; i++)
		if (strcmp(names[i], t) == 0)
			return i;
	fail_msg("type %s", t);
	return 0;
}

static void check_seal(json_t *rec, const struct members *full, const uint8_t prev[32],
		       uint64_t seq, const char *ts)
{
	json_t *s = json_object_get(rec, "seal"), *kt = at("keytree");
	struct members x;
	struct al_seal_walk w;
	uint8_t S[32], K[32], kmac[32], mac[32], sbody[512], p2[32];
	uint32_t e = (uint32_t)num(s, "epoch");
	long sn;

	load_members(rec, &x, true);
	sn = al_v2_body(AL_T_SEAL, x.m, x.nm, NULL, 0, sbody, sizeof(sbody));
	assert_true(sn > 0);
	/* the MAC input: label, prev, seq, ts, S_n */
	{
		size_t mn;
		uint8_t *mi = unhex(str(s, "mac_input_hex"), &mn);
		assert_int_equal(mn, 17 + 32 + 8 + 30 + (size_t)sn);
		assert_memory_equal(mi + 17 + 70, sbody, (size_t)sn);
		free(mi);
	}
	assert_int_equal(member(full, AL_TAG_EPOCH)->u, e);
	/* a seal after a re-key (17.4) carries its key's seed */
	unhex32(json_object_get(s, "seed") ? str(s, "seed") : str(kt, "seed"), S);
	al_seal_walk_init(&w, S);
	assert_int_equal(al_seal_walk_key(&w, e, K), 0);
	al_seal_walk_wipe(&w);
	assert_int_equal(al_seal_mac_key(K, kmac), 0);
	hex_eq(kmac, 32, str(s, "mac_key"), "seal mac key");
	assert_int_equal(al_seal_mac(kmac, prev, seq, ts, sbody, (size_t)sn, mac), 0);
	hex_eq(mac, 32, str(s, "mac"), "seal mac");
	/* the mac member's value is its hex */
	{
		char hx[64];
		al_hex(mac, 32, hx);
		assert_int_equal(member(full, AL_TAG_MAC)->n, 64);
		assert_memory_equal(member(full, AL_TAG_MAC)->p, hx, 64);
	}
	assert_true(al_seal_mac_check(kmac, prev, seq, ts, sbody, (size_t)sn, mac));
	/* a flipped bit anywhere in what the MAC covers, or in the MAC, fails */
	for (size_t bit = 0; bit < (size_t)sn * 8; bit++) {
		sbody[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_false(al_seal_mac_check(kmac, prev, seq, ts, sbody, (size_t)sn, mac));
		sbody[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	memcpy(p2, prev, 32);
	for (unsigned bit = 0; bit < 256; bit++) {
		p2[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_false(al_seal_mac_check(kmac, p2, seq, ts, sbody, (size_t)sn, mac));
		p2[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		mac[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_false(al_seal_mac_check(kmac, prev, seq, ts, sbody, (size_t)sn, mac));
		mac[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	assert_false(al_seal_mac_check(kmac, prev, seq + 1, ts, sbody, (size_t)sn, mac));
	/* another epoch's key does not verify it (replay of an old epoch) */
	al_seal_walk_init(&w, S);
	assert_int_equal(al_seal_walk_key(&w, e + 1, K), 0);
	al_seal_walk_wipe(&w);
	assert_int_equal(al_seal_mac_key(K, kmac), 0);
	assert_false(al_seal_mac_check(kmac, prev, seq, ts, sbody, (size_t)sn, mac));
	members_free(&x);
}

static void check_checkpoint(json_t *rec, const struct members *x, const uint8_t (*leaves)[32],
			     size_t nleaves)
{
	json_t *c = json_object_get(rec, "checkpoint");
	const char *origin = str(c, "origin");
	uint8_t root[32], head[32], seed[32], pub[32], text[AL_NOTE_MAX], note[AL_NOTE_MAX], kid[4];
	uint64_t size = num(c, "size"), first = num(c, "first_seq");
	const struct al_v2_member *rm = member(x, AL_TAG_RANGE), *nm = member(x, AL_TAG_NOTE);
	struct al_merkle_range r;
	uint8_t rh[54][32], got[32];
	size_t tl = 0;
	long tn, nn;

	assert_int_equal(size, nleaves);
	unhex32(str(c, "root"), root);
	unhex32(str(c, "head"), head);
	unhex32(json_string_value(at("signing_seed")), seed);
	assert_int_equal(al_ed25519_public(seed, pub), 0);
	hex_eq(pub, 32, str(c, "public"), "checkpoint public key");
	assert_int_equal(al_note_key_id((const uint8_t *)origin, strlen(origin), pub, kid), 0);
	hex_eq(kid, 4, str(c, "key_id"), "checkpoint key id");
	/* the range member folds to the root, and equals the appended leaves' */
	assert_int_equal(rm->n % 64, 0);
	assert_int_equal(al_unhex(rm->p, rm->n, rh[0]), 0);
	assert_int_equal(al_merkle_range_set(&r, size, rh[0], rm->n / 64), 0);
	assert_int_equal(al_merkle_range_root(&r, got), 0);
	assert_memory_equal(got, root, 32);
	al_merkle_range_init(&r);
	for (size_t i = 0; i < nleaves; i++)
		assert_int_equal(al_merkle_range_append(&r, leaves[i]), 0);
	assert_int_equal(r.n * 64, rm->n);
	assert_memory_equal(r.h, rh, r.n * 32);
	/* a range whose length does not fit its size is refused */
	if ((size_t)__builtin_popcountll(size + 1) != rm->n / 64)
		assert_int_equal(al_merkle_range_set(&r, size + 1, rh[0], rm->n / 64), -EINVAL);
	assert_int_equal(al_merkle_range_set(&r, 0, rh[0], 0), -EINVAL);
	assert_memory_equal(head, leaves[nleaves - 1], 32);
	/* the note text, rebuilt, and signed deterministically */
	tn = al_checkpoint_text((const uint8_t *)origin, strlen(origin), size, root,
				num(c, "last_seq"), head, first, text, sizeof(text));
	assert_true(tn > 0);
	hex_eq(text, (size_t)tn, str(c, "text_hex"), "checkpoint text");
	nn = al_note_sign(seed, pub, (const uint8_t *)origin, strlen(origin), text, (size_t)tn, note,
			  sizeof(note));
	assert_true(nn > 0);
	hex_eq(note, (size_t)nn, str(c, "note_hex"), "checkpoint note");
	assert_int_equal(nm->n, (size_t)nn);
	assert_memory_equal(nm->p, note, (size_t)nn);
	assert_int_equal(al_note_verify(pub, (const uint8_t *)origin, strlen(origin), note,
					(size_t)nn, &tl), 0);
	assert_int_equal(tl, (size_t)tn);
	for (size_t bit = 0; bit < (size_t)nn * 8; bit++) {
		note[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_int_not_equal(al_note_verify(pub, (const uint8_t *)origin, strlen(origin),
						    note, (size_t)nn, NULL), 0);
		note[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	/* another key (a forged checkpoint) does not verify */
	seed[0] ^= 1;
	assert_int_equal(al_ed25519_public(seed, pub), 0);
	assert_int_not_equal(al_note_verify(pub, (const uint8_t *)origin, strlen(origin), note,
					    (size_t)nn, NULL), 0);
}

/* The member table of the new types: the vectors pass, and every dropped,
 * repeated or swapped member fails; a seal rebuilt from its fields gives the
 * same body. */
static void check_member_rules(uint8_t type, const struct members *x, const uint8_t *body,
			       size_t blen)
{
	struct al_v2_member m[16];

	if (type < AL_T_SEAL) {
		assert_int_equal(al_v2_check_members(type, x->m, x->nm), -ENOTSUP);
		return;
	}
	assert_int_equal(al_v2_check_members(type, x->m, x->nm), 0);
	for (size_t i = 0; i < x->nm; i++) {
		size_t k = 0;
		for (size_t j = 0; j < x->nm; j++)
			if (j != i)
				m[k++] = x->m[j];
		/* prev_key is the one member a seal may drop: an open without the re-key mark */
		assert_int_equal(al_v2_check_members(type, m, k), x->m[i].tag == AL_TAG_PREV_KEY ? 0 : -EINVAL);
		memcpy(m, x->m, x->nm * sizeof(m[0]));
		m[x->nm] = x->m[i];
		assert_int_equal(al_v2_check_members(type, m, x->nm + 1), -EINVAL);
		if (i + 1 < x->nm) {
			memcpy(m, x->m, x->nm * sizeof(m[0]));
			m[i] = x->m[i + 1];
			m[i + 1] = x->m[i];
			assert_int_equal(al_v2_check_members(type, m, x->nm), -EINVAL);
		}
		/* a value against its rule: a string one byte short, an int out of range */
		memcpy(m, x->m, x->nm * sizeof(m[0]));
		if (m[i].is_int)
			m[i].u = UINT64_MAX;
		else
			m[i].n--;
		if (m[i].tag != AL_TAG_NOTE)
			assert_int_equal(al_v2_check_members(type, m, x->nm), -EINVAL);
	}
	if (type == AL_T_SEAL && x->nm == 8) {
		/* the re-key mark without prev_seal and prev_kind is refused */
		size_t k = 0;
		for (size_t j = 0; j < x->nm; j++)
			if (x->m[j].tag != AL_TAG_PREV_SEAL && x->m[j].tag != AL_TAG_PREV_KIND)
				m[k++] = x->m[j];
		assert_int_equal(al_v2_check_members(type, m, k), -EINVAL);
	}
	if (type == AL_T_SEAL && x->nm == 5) {
		/* prev_seal and prev_kind belong to an open seal only */
		static const uint8_t close_[] = "close";
		bool is_open = member(x, AL_TAG_KIND)->n == 4 &&
			       memcmp(member(x, AL_TAG_KIND)->p, "open", 4) == 0;
		memcpy(m, x->m, 4 * sizeof(m[0]));
		m[4] = (struct al_v2_member){ AL_TAG_PREV_SEAL, true, NULL, 0, 1 };
		m[5] = (struct al_v2_member){ AL_TAG_PREV_KIND, false, close_, 5, 0 };
		m[6] = x->m[4];
		assert_int_equal(al_v2_check_members(type, m, 7), is_open ? 0 : -EINVAL);
	}
	if (type == AL_T_SEAL) {
		struct al_v2_seal sl = { 0 };
		struct al_v2_member sm[AL_V2_SEAL_MEMBERS];
		char hex[AL_V2_SEAL_HEX];
		uint8_t b2[512];
		char kind[8] = { 0 }, pkind[8] = { 0 };
		int k;
		long n2;

		memcpy(kind, member(x, AL_TAG_KIND)->p, member(x, AL_TAG_KIND)->n);
		sl.kind = kind;
		sl.epoch = (uint32_t)member(x, AL_TAG_EPOCH)->u;
		assert_int_equal(al_unhex(member(x, AL_TAG_SEAL_KEY)->p, 16, sl.key_id), 0);
		memcpy(sl.chain_id, member(x, AL_TAG_CHAIN_ID)->p, 32);
		for (size_t i = 0; i < x->nm; i++)
			if (x->m[i].tag == AL_TAG_PREV_SEAL) {
				sl.has_prev = true;
				sl.prev_seal = x->m[i].u;
				memcpy(pkind, member(x, AL_TAG_PREV_KIND)->p, member(x, AL_TAG_PREV_KIND)->n);
				sl.prev_kind = pkind;
			} else if (x->m[i].tag == AL_TAG_PREV_KEY) {
				sl.has_prev_key = true;
				assert_int_equal(al_unhex(x->m[i].p, 16, sl.prev_key), 0);
			}
		sl.has_mac = true;
		assert_int_equal(al_unhex(member(x, AL_TAG_MAC)->p, 64, sl.mac), 0);
		k = al_v2_seal_members(&sl, sm, hex);
		assert_int_equal(k, (int)x->nm);
		n2 = al_v2_body(AL_T_SEAL, sm, (size_t)k, NULL, 0, b2, sizeof(b2));
		assert_int_equal(n2, (long)blen);
		assert_memory_equal(b2, body, blen);
		sl.kind = "shut";
		assert_int_equal(al_v2_seal_members(&sl, sm, hex), -EINVAL);
		sl.kind = "batch";
		sl.has_prev = true;
		sl.prev_kind = "close";
		assert_int_equal(al_v2_seal_members(&sl, sm, hex), -EINVAL); /* prev_* only in open */
		sl.kind = "open";
		sl.has_prev = false;
		sl.has_prev_key = true;
		assert_int_equal(al_v2_seal_members(&sl, sm, hex), -EINVAL); /* prev_key only with them */
	}
}

/* The verifier's composite checks (seal.c, checkpoint.c) on the vectors. */
static void check_seal_record(const struct members *x, const uint8_t prev[32], uint64_t seq,
			      const char *ts, json_t *rec)
{
	json_t *kt = at("keytree"), *sj = json_object_get(rec, "seal");
	struct al_seal_walk w;
	struct al_v2_seal sl = { 0 };
	uint8_t S[32], kid[8], chain[32], K[32], kmac[32], p2[32];
	uint32_t ep = 0;
	char kind[8] = { 0 };

	unhex32(str(kt, "seed"), S);
	assert_int_equal(al_unhex((const uint8_t *)str(kt, "key_id"), 16, kid), 0);
	if (json_object_get(sj, "seed")) { /* after a re-key (17.4): that key's */
		unhex32(str(sj, "seed"), S);
		assert_int_equal(al_unhex(member(x, AL_TAG_SEAL_KEY)->p, 16, kid), 0);
	}
	memcpy(chain, member(x, AL_TAG_CHAIN_ID)->p, 32);
	al_seal_walk_init(&w, S);
	assert_int_equal(al_v2_seal_check(&w, kid, chain, prev, seq, ts, x->m, x->nm, &ep), 0);
	assert_int_equal(ep, member(x, AL_TAG_EPOCH)->u);
	memcpy(p2, prev, 32);
	p2[7] ^= 0x10;
	assert_int_equal(al_v2_seal_check(&w, kid, chain, p2, seq, ts, x->m, x->nm, NULL), -EBADMSG);
	assert_int_equal(al_v2_seal_check(&w, kid, chain, prev, seq + 1, ts, x->m, x->nm, NULL), -EBADMSG);
	chain[31] = chain[31] == '0' ? '1' : '0'; /* another chain's seal spliced in */
	assert_int_equal(al_v2_seal_check(&w, kid, chain, prev, seq, ts, x->m, x->nm, NULL), -EBADMSG);
	chain[31] = member(x, AL_TAG_CHAIN_ID)->p[31];
	kid[0] ^= 1;
	assert_int_equal(al_v2_seal_check(&w, kid, chain, prev, seq, ts, x->m, x->nm, NULL), -ENOKEY);
	kid[0] ^= 1;
	assert_int_equal(al_v2_seal_check(&w, kid, chain, prev, seq, ts, x->m, x->nm - 1, NULL), -EINVAL);
	/* the writer's side makes the same MAC */
	memcpy(kind, member(x, AL_TAG_KIND)->p, member(x, AL_TAG_KIND)->n);
	sl.kind = kind;
	sl.epoch = ep;
	memcpy(sl.key_id, kid, 8);
	memcpy(sl.chain_id, chain, 32);
	if (x->nm >= 7) {
		static char pk[8];
		memset(pk, 0, sizeof(pk));
		memcpy(pk, member(x, AL_TAG_PREV_KIND)->p, member(x, AL_TAG_PREV_KIND)->n);
		sl.has_prev = true;
		sl.prev_seal = member(x, AL_TAG_PREV_SEAL)->u;
		sl.prev_kind = pk;
	}
	if (x->nm == 8) {
		sl.has_prev_key = true;
		assert_int_equal(al_unhex(member(x, AL_TAG_PREV_KEY)->p, 16, sl.prev_key), 0);
	}
	assert_int_equal(al_seal_walk_key(&w, ep, K), 0);
	assert_int_equal(al_seal_mac_key(K, kmac), 0);
	assert_int_equal(al_v2_seal_sign(&sl, kmac, prev, seq, ts), 0);
	assert_true(sl.has_mac);
	{
		char hx[64];
		al_hex(sl.mac, 32, hx);
		assert_memory_equal(hx, member(x, AL_TAG_MAC)->p, 64);
	}
	al_seal_walk_wipe(&w);
}

static void check_tree_record(uint8_t type, const struct members *x, const uint8_t (*leaves)[32],
			      size_t nleaves, uint64_t first_seq, json_t *rec)
{
	struct al_v2_tree_state t = { .first_seq = first_seq, .size = nleaves };
	struct al_merkle_range r;
	uint8_t seed[32], pub[32];
	const char *origin = NULL;

	al_merkle_range_init(&r);
	for (size_t i = 0; i < nleaves; i++)
		assert_int_equal(al_merkle_range_append(&r, leaves[i]), 0);
	assert_int_equal(al_merkle_range_root(&r, t.root), 0);
	memcpy(t.head, leaves[nleaves - 1], 32);
	if (type == AL_T_TREE) {
		assert_int_equal(al_v2_tree_check(x->m, x->nm, &t), 0);
		t.root[0] ^= 1;
		assert_int_equal(al_v2_tree_check(x->m, x->nm, &t), -EBADMSG);
		t.root[0] ^= 1;
		t.size++;
		assert_int_equal(al_v2_tree_check(x->m, x->nm, &t), -EBADMSG);
		return;
	}
	origin = str(json_object_get(rec, "checkpoint"), "origin");
	unhex32(json_string_value(at("signing_seed")), seed);
	assert_int_equal(al_ed25519_public(seed, pub), 0);
	assert_int_equal(al_v2_checkpoint_check(x->m, x->nm, &t, (const uint8_t *)origin,
						strlen(origin), pub), 0);
	/* the note signs another head, a wrong root, another origin, another key */
	t.head[3] ^= 1;
	assert_int_equal(al_v2_checkpoint_check(x->m, x->nm, &t, (const uint8_t *)origin,
						strlen(origin), pub), -EBADMSG);
	t.head[3] ^= 1;
	t.root[3] ^= 1;
	assert_int_equal(al_v2_checkpoint_check(x->m, x->nm, &t, (const uint8_t *)origin,
						strlen(origin), pub), -EBADMSG);
	t.root[3] ^= 1;
	t.first_seq++;
	assert_int_equal(al_v2_checkpoint_check(x->m, x->nm, &t, (const uint8_t *)origin,
						strlen(origin), pub), -EBADMSG);
	t.first_seq--;
	assert_int_equal(al_v2_checkpoint_check(x->m, x->nm, &t, (const uint8_t *)"x.example/auditlog/00000000000000000000000000000000",
						50, pub), -EBADMSG);
	pub[0] ^= 1;
	assert_int_equal(al_v2_checkpoint_check(x->m, x->nm, &t, (const uint8_t *)origin,
						strlen(origin), pub), -EBADMSG);
}

static void test_records(void **state)
{
	json_t *recs = at("records"), *rec;
	uint8_t prevh[32] = {0}, (*leaves)[32] = calloc(64, 32);
	const char *chain = "";
	size_t i, nleaves = 0, checkpoints = 0, seals = 0, callers = 0;
	uint64_t first_seq = 0;

	assert_non_null(leaves);
	assert_true(json_array_size(recs) >= 20);
	json_array_foreach(recs, i, rec) {
		struct members x;
		uint8_t body[AL_LINE_MAX], D[32], E[AL_V2_LEAF_INPUT_LEN], h[32], prev[32];
		const char *ts = str(rec, "timestamp");
		uint64_t seq = num(rec, "seq");
		uint8_t type = type_code(str(rec, "type"));
		long n;

		if (strcmp(chain, str(rec, "chain")) != 0) {
			chain = str(rec, "chain");
			nleaves = 0;
		} else {
			/* the vectors chain: prev is the previous record's hash */
			hex_eq(prevh, 32, str(rec, "prev"), "prev is the previous hash");
		}
		assert_int_equal(strlen(ts), AL_TS_LEN);
		assert_int_equal(al_parse_ts((const uint8_t *)ts, AL_TS_LEN, NULL), 0);
		unhex32(str(rec, "prev"), prev);
		load_members(rec, &x, false);
		if (x.nf) {
			assert_int_equal(al_v2_caller_check(x.f, x.nf), 0);
			callers++;
		}
		n = al_v2_body(type, x.m, x.nm, x.f, x.nf, body, sizeof(body));
		assert_true(n > 2);
		hex_eq(body, (size_t)n, str(rec, "body_hex"), str(rec, "name"));
		assert_int_equal(al_v2_body(type, x.m, x.nm, x.f, x.nf, body, (size_t)n - 1), -E2BIG);
		al_sha256(body, (size_t)n, D);
		hex_eq(D, 32, str(rec, "digest"), "body digest");
		al_v2_leaf_input(prev, seq, ts, D, E);
		hex_eq(E, sizeof(E), str(rec, "leaf_input_hex"), "leaf input");
		al_v2_chain_step(prev, seq, ts, D, h);
		hex_eq(h, 32, str(rec, "hash"), "chain hash");
		/* the chain hash is the RFC 6962 leaf hash of E_n */
		{
			uint8_t m[1 + sizeof(E)], lh[32];
			m[0] = 0;
			memcpy(m + 1, E, sizeof(E));
			al_sha256(m, sizeof(m), lh);
			assert_memory_equal(lh, h, 32);
		}
		D[0] ^= 1;
		al_v2_chain_step(prev, seq, ts, D, prevh);
		assert_memory_not_equal(prevh, h, 32);
		check_member_rules(type, &x, body, (size_t)n);
		if (type == AL_T_SEAL) {
			check_seal(rec, &x, prev, seq, ts);
			check_seal_record(&x, prev, seq, ts, rec);
			seals++;
		}
		if (nleaves == 0)
			first_seq = seq;
		if (type == AL_T_TREE || type == AL_T_CHECKPOINT)
			check_tree_record(type, &x, (const uint8_t(*)[32])leaves, nleaves, first_seq, rec);
		if (type == AL_T_CHECKPOINT || type == AL_T_TREE) {
			assert_int_equal(member(&x, AL_TAG_SIZE)->u, nleaves);
			if (type == AL_T_CHECKPOINT) {
				check_checkpoint(rec, &x, (const uint8_t(*)[32])leaves, nleaves);
				checkpoints++;
			}
		}
		memcpy(prevh, h, 32);
		assert_true(nleaves < 64);
		memcpy(leaves[nleaves++], h, 32);
		members_free(&x);
	}
	assert_true(seals >= 8);
	assert_true(checkpoints >= 3);
	assert_true(callers >= 3);
	free(leaves);
}

static void test_trees(void **state)
{
	json_t *tv;
	size_t i;

	json_array_foreach(at("trees"), i, tv) {
		size_t nl, k;
		uint8_t(*leaves)[32] = hashes(json_object_get(tv, "leaves"), &nl);
		uint8_t(*roots)[32] = calloc(nl + 1, 32);
		struct al_merkle_range r;
		json_t *s;

		assert_non_null(roots);
		al_merkle_range_init(&r);
		json_array_foreach(json_object_get(tv, "sizes"), k, s) {
			size_t nc;
			uint8_t(*c)[32] = hashes(json_object_get(s, "range"), &nc);
			assert_int_equal(num(s, "size"), k + 1);
			assert_int_equal(al_merkle_range_append(&r, leaves[k]), 0);
			assert_int_equal(r.n, nc);
			assert_memory_equal(r.h, c, nc * 32);
			assert_int_equal(al_merkle_range_root(&r, roots[k + 1]), 0);
			hex_eq(roots[k + 1], 32, str(s, "root"), "tree root");
			free(c);
		}
		check_proofs(tv, leaves, roots);
		free(leaves);
		free(roots);
	}
}

static void same_state(const struct al_seal_state *a, const struct al_seal_state *b)
{
	assert_int_equal(a->epoch, b->epoch);
	assert_int_equal(a->n, b->n);
	for (unsigned i = 0; i < a->n; i++) {
		assert_int_equal(a->node[i].depth, b->node[i].depth);
		assert_int_equal(a->node[i].index, b->node[i].index);
		assert_memory_equal(a->node[i].seed, b->node[i].seed, 32);
	}
}

static void test_keytree(void **state)
{
	json_t *kt = at("keytree"), *v;
	uint8_t S[32], out[32], mk[32], kid[8];
	struct al_seal_walk w;
	struct al_seal_state st, st2;
	const char *host = str(kt, "host");
	size_t i;

	unhex32(str(kt, "seed"), S);
	assert_int_equal(al_seal_key_id(S, (const uint8_t *)host, strlen(host), num(kt, "t0"),
					num(kt, "delta"), kid), 0);
	hex_eq(kid, 8, str(kt, "key_id"), "key id");
	kid[0] ^= 1;
	assert_int_equal(al_seal_key_id(S, (const uint8_t *)host, strlen(host), num(kt, "t0") + 1,
					num(kt, "delta"), out), 0);
	assert_memory_not_equal(out, kid, 8);
	al_seal_walk_init(&w, S);
	json_array_foreach(json_object_get(kt, "epochs"), i, v) {
		uint32_t e = (uint32_t)num(v, "epoch");
		assert_int_equal(al_seal_node(S, 32, e, out), 0);
		hex_eq(out, 32, str(v, "key"), "K(e) from the root");
		assert_int_equal(al_seal_walk_key(&w, e, out), 0);
		hex_eq(out, 32, str(v, "key"), "K(e) by the walk");
		assert_int_equal(al_seal_mac_key(out, mk), 0);
		hex_eq(mk, 32, str(v, "mac_key"), "Kmac(e)");
	}
	/* the walk going backwards too */
	assert_int_equal(al_seal_walk_key(&w, 0, out), 0);
	hex_eq(out, 32, str(json_array_get(json_object_get(kt, "epochs"), 0), "key"), "K(0) again");
	al_seal_walk_wipe(&w);
	json_array_foreach(json_object_get(kt, "nodes"), i, v) {
		assert_int_equal(al_seal_node(S, (unsigned)num(v, "depth"), num(v, "index"), out), 0);
		hex_eq(out, 32, str(v, "seed"), "node");
	}
	assert_int_equal(al_seal_node(S, 33, 0, out), -EINVAL);
	assert_int_equal(al_seal_node(S, 2, 4, out), -EINVAL);
	json_array_foreach(json_object_get(kt, "covering"), i, v) {
		json_t *nodes = json_object_get(v, "nodes"), *nd;
		size_t k;
		assert_int_equal(al_seal_state_init(&st, S, (uint32_t)num(v, "epoch")), 0);
		assert_int_equal(st.n, json_array_size(nodes));
		json_array_foreach(nodes, k, nd) {
			assert_int_equal(st.node[k].depth, json_integer_value(json_array_get(nd, 0)));
			assert_int_equal(st.node[k].index, json_integer_value(json_array_get(nd, 1)));
			hex_eq(st.node[k].seed, 32, json_string_value(json_array_get(nd, 2)),
			       "covering seed");
			/* forward security: no kept node covers an earlier epoch */
			assert_true(((uint64_t)st.node[k].index << (32 - st.node[k].depth)) >= st.epoch);
		}
	}
	json_array_foreach(json_object_get(kt, "advance"), i, v) {
		uint32_t a = (uint32_t)num(v, "from"), b = (uint32_t)num(v, "to");
		assert_int_equal(al_seal_state_init(&st, S, a), 0);
		assert_int_equal(al_seal_state_advance(&st, b), 0);
		assert_int_equal(al_seal_state_init(&st2, S, b), 0);
		same_state(&st, &st2);
		assert_int_equal(al_seal_state_advance(&st, b), 0); /* same epoch: no change */
		same_state(&st, &st2);
		if (b > 0)
			assert_int_equal(al_seal_state_advance(&st, b - 1), -EINVAL);
		same_state(&st, &st2);
	}
	/* step by step across a boundary equals the direct derivation */
	assert_int_equal(al_seal_state_init(&st, S, 250), 0);
	for (uint32_t e = 251; e <= 260; e++) {
		assert_int_equal(al_seal_state_advance(&st, e), 0);
		assert_int_equal(al_seal_node(S, 32, e, out), 0);
		assert_memory_equal(st.node[0].seed, out, 32);
	}
	al_seal_state_wipe(&st);
	al_seal_state_wipe(&st2);
	for (size_t b = 0; b < sizeof(st); b++)
		assert_int_equal(((uint8_t *)&st)[b], 0);
}

static void test_caller_fields(void **state)
{
	json_t *c = at("caller"), *v, *s;
	size_t i;

	json_array_foreach(json_object_get(c, "valid"), i, v) {
		const char *k = json_string_value(v);
		if (!al_v2_caller_key_ok((const uint8_t *)k, strlen(k)))
			fail_msg("valid key %s refused", k);
	}
	json_array_foreach(json_object_get(c, "invalid_hex"), i, v) {
		size_t n;
		uint8_t *k = unhex(json_string_value(v), &n);
		if (al_v2_caller_key_ok(k, n))
			fail_msg("invalid key %s accepted", json_string_value(v));
		free(k);
	}
	json_array_foreach(json_object_get(c, "sets"), i, s) {
		const char *res = str(s, "result");
		struct members x;
		json_t *fv;
		size_t k;
		bool ok = strcmp(res, "ok") == 0;

		memset(&x, 0, sizeof(x));
		json_array_foreach(json_object_get(s, ok ? "canonical" : "fields"), k, fv) {
			struct al_v2_field *f;
			if (x.nf >= sizeof(x.f) / sizeof(x.f[0]))
				break; /* "seventeen" is refused on its count anyway */
			f = &x.f[x.nf++];
			f->key = (const uint8_t *)json_string_value(json_array_get(fv, 0));
			f->key_len = strlen((const char *)f->key);
			value(&x, json_array_get(fv, 1), &f->is_int, &f->p, &f->n, &f->u);
		}
		al_v2_caller_sort(x.f, x.nf);
		if (ok) {
			/* the raw fields, decoded by 14.2 and sorted, are the canonical ones */
			struct members raw;
			static uint8_t dec[AL_CALLER_MAX + 2][AL_CALLER_STR_CAP];
			size_t nr = 0;
			memset(&raw, 0, sizeof(raw));
			json_array_foreach(json_object_get(s, "fields"), k, fv) {
				struct al_v2_field *f = &raw.f[nr];
				f->key = (const uint8_t *)json_string_value(json_array_get(fv, 0));
				f->key_len = strlen((const char *)f->key);
				value(&raw, json_array_get(fv, 1), &f->is_int, &f->p, &f->n, &f->u);
				if (!f->is_int) {
					f->n = al_v2_caller_decode(f->p, f->n, dec[nr]);
					f->p = dec[nr];
					if (f->n == 0)
						continue; /* omitted */
				}
				nr++;
			}
			al_v2_caller_sort(raw.f, nr);
			assert_int_equal(nr, x.nf);
			for (size_t q = 0; q < nr; q++) {
				assert_int_equal(raw.f[q].key_len, x.f[q].key_len);
				assert_memory_equal(raw.f[q].key, x.f[q].key, x.f[q].key_len);
				assert_int_equal(raw.f[q].is_int, x.f[q].is_int);
				assert_int_equal(raw.f[q].u, x.f[q].u);
				assert_int_equal(raw.f[q].n, x.f[q].n);
				if (x.f[q].n)
					assert_memory_equal(raw.f[q].p, x.f[q].p, x.f[q].n);
			}
			members_free(&raw);
			uint8_t body[4096];
			size_t jn;
			uint8_t *j = unhex(str(s, "json_hex"), &jn);
			long n = al_v2_body(AL_T_EVENT, NULL, 0, x.f, x.nf, body, sizeof(body));
			assert_int_equal(al_v2_caller_check(x.f, x.nf), 0);
			assert_int_equal(al_v2_caller_json_len(x.f, x.nf), jn);
			assert_true(n >= 2);
			hex_eq(body + 2, (size_t)n - 2, str(s, "body_hex"), str(s, "name"));
			free(j);
			if (x.nf >= 2) { /* out of order is not canonical */
				struct al_v2_field t = x.f[0];
				x.f[0] = x.f[1];
				x.f[1] = t;
				assert_int_equal(al_v2_caller_check(x.f, x.nf), -EINVAL);
			}
		} else {
			int want = strcmp(res, "E2BIG") == 0 ? -E2BIG : -EINVAL;
			if (strcmp(str(s, "name"), "seventeen") == 0)
				x.nf = 17; /* 18 slots: the 17 fields are all there */
			assert_int_equal(al_v2_caller_check(x.f, x.nf), want);
		}
		members_free(&x);
	}
}

/* ---- attestation statements (docs/format.md 27) ----------------------------- */

static void test_attestations(void **state)
{
	json_t *arr = at("attestations"), *v, *f = at("files");
	const char *vkt = str(f, "verification_key");
	struct al_vkey vk;
	size_t i;

	(void)state;
	assert_true(json_array_size(arr) >= 3);
	assert_int_equal(al_vkey_parse((const uint8_t *)vkt, strlen(vkt), &vk), 0);
	json_array_foreach(arr, i, v) {
		const char *text = str(v, "text");
		size_t n = strlen(text), tlen = 0;
		struct al_attest a;
		uint8_t K[32];
		char out[AL_ATTEST_MAX], *b = malloc(n + 1);

		assert_non_null(b);
		assert_int_equal(al_attest_parse((const uint8_t *)text, n, &a, &tlen), 0);
		assert_int_equal(tlen, n - 69); /* "mac " 64 hex "\n" */
		assert_int_equal(a.epoch, num(v, "epoch"));
		assert_int_equal(a.wall, num(v, "wall"));
		/* made again from its fields and K(e): the same bytes */
		assert_int_equal(al_seal_node(vk.seed, 32, a.epoch, K), 0);
		assert_int_equal(al_attest_format(&a, K, out, sizeof(out)), (long)n);
		assert_memory_equal(out, text, n);
		assert_int_equal(al_attest_format(&a, K, out, n), -E2BIG);
		assert_int_equal(al_attest_check(&a, (const uint8_t *)text, n, &vk), 0);
		/* every flipped bit is refused, by the parser or by the MAC */
		for (size_t bit = 0; bit < n * 8; bit++) {
			struct al_attest a2;
			memcpy(b, text, n);
			b[bit / 8] ^= (char)(1u << (bit % 8));
			int r = al_attest_parse((const uint8_t *)b, n, &a2, NULL);
			if (r == 0)
				r = al_attest_check(&a2, (const uint8_t *)b, n, &vk);
			assert_int_not_equal(r, 0);
		}
		/* another epoch's key does not make this MAC */
		assert_int_equal(al_seal_node(vk.seed, 32, a.epoch ^ 1u, K), 0);
		assert_int_equal(al_attest_format(&a, K, out, sizeof(out)), (long)n);
		assert_memory_not_equal(out, text, n);
		OPENSSL_cleanse(K, sizeof(K));
		free(b);
	}
	OPENSSL_cleanse(&vk, sizeof(vk));
}

/* ---- key files and the epoch schedule -------------------------------------- */

static int parse_any(int which, const uint8_t *b, size_t n)
{
	struct al_vkey k;
	struct al_sstate st;
	struct al_ckey ck;

	switch (which) {
	case 0: return al_vkey_parse(b, n, &k);
	case 1: return al_sstate_parse(b, n, &st);
	case 2: return al_ckey_parse(b, n, false, &ck);
	default: return al_ckey_parse(b, n, true, &ck);
	}
}

/* Changes that keep nothing of the format must be refused. */
static void file_mutations(int which, const char *f)
{
	size_t n = strlen(f), lines = 0;
	char *b = malloc(n + 8);

	assert_non_null(b);
	assert_int_equal(parse_any(which, (const uint8_t *)f, n), 0);
	/* each line removed; the file cut anywhere; a byte added at the end */
	for (size_t i = 0; i < n; i++) {
		if (f[i] != '\n')
			continue;
		size_t start = i, end = i + 1;
		while (start > 0 && f[start - 1] != '\n')
			start--;
		memcpy(b, f, start);
		memcpy(b + start, f + end, n - end);
		assert_int_not_equal(parse_any(which, (const uint8_t *)b, n - (end - start)), 0);
		lines++;
	}
	assert_true(lines >= 3);
	for (size_t cut = 0; cut < n; cut++)
		assert_int_not_equal(parse_any(which, (const uint8_t *)f, cut), 0);
	memcpy(b, f, n);
	b[n] = '\n';
	assert_int_not_equal(parse_any(which, (const uint8_t *)b, n + 1), 0);
	/* CR before the first newline, a space doubled, upper-case hex */
	for (size_t i = 0; i < n; i++) {
		memcpy(b, f, n);
		if (f[i] == '\n') {
			memcpy(b, f, i);
			b[i] = '\r';
			memcpy(b + i + 1, f + i, n - i);
			assert_int_not_equal(parse_any(which, (const uint8_t *)b, n + 1), 0);
		} else if (f[i] == ' ') {
			memcpy(b, f, i);
			b[i] = ' ';
			memcpy(b + i + 1, f + i, n - i);
			assert_int_not_equal(parse_any(which, (const uint8_t *)b, n + 1), 0);
			if (f[i + 1] >= '1' && f[i + 1] <= '9') { /* a leading zero */
				b[i + 1] = '0';
				assert_int_not_equal(parse_any(which, (const uint8_t *)b, n + 1), 0);
			}
		} else if (f[i] >= 'a' && f[i] <= 'f' && i > 0 && f[i - 1] != '-' &&
			   strchr("0123456789abcdef", f[i - 1]) && strchr("0123456789abcdef\n", f[i + 1])) {
			b[i] = (char)(f[i] - 'a' + 'A');
			assert_int_not_equal(parse_any(which, (const uint8_t *)b, n), 0);
		}
	}
	free(b);
}

static void test_key_files(void **state)
{
	json_t *f = at("files"), *kt = at("keytree");
	const char *vk = str(f, "verification_key"), *ss = str(f, "sealing_state");
	struct al_vkey k;
	struct al_sstate st, st2;
	struct al_seal_state want;
	struct al_ckey pk, sk;
	char out[4096];
	uint8_t S[32], pub[32];
	size_t n = strlen(vk);
	char *b = malloc(n + 1);

	assert_non_null(b);
	unhex32(str(kt, "seed"), S);
	/* the verification key */
	assert_int_equal(al_vkey_parse((const uint8_t *)vk, n, &k), 0);
	assert_memory_equal(k.seed, S, 32);
	assert_int_equal(k.p.t0, num(kt, "t0"));
	assert_int_equal(k.p.delta, num(kt, "delta"));
	assert_int_equal(k.p.host_len, strlen(str(kt, "host")));
	assert_memory_equal(k.p.host, str(kt, "host"), k.p.host_len);
	hex_eq(k.p.key_id, 8, str(kt, "key_id"), "file key id");
	assert_int_equal(al_vkey_format(&k, out, sizeof(out)), (long)n);
	assert_memory_equal(out, vk, n);
	assert_int_equal(al_vkey_format(&k, out, n), -E2BIG);
	/* every flipped bit is refused: the key id binds seed and parameters */
	for (size_t bit = 0; bit < n * 8; bit++) {
		memcpy(b, vk, n);
		b[bit / 8] ^= (char)(1u << (bit % 8));
		assert_int_not_equal(al_vkey_parse((const uint8_t *)b, n, &k), 0);
	}
	file_mutations(0, vk);
	al_seal_state_wipe(&want);
	/* the sealing state */
	n = strlen(ss);
	assert_int_equal(al_sstate_parse((const uint8_t *)ss, n, &st), 0);
	assert_int_equal(st.st.epoch, num(f, "sealing_state_epoch"));
	assert_int_equal(st.max_jump, 3162240);
	assert_int_equal(st.boot_start, 12345678901ull);
	assert_int_equal(al_seal_state_init(&want, S, st.st.epoch), 0);
	same_state(&st.st, &want);
	assert_int_equal(al_sstate_format(&st, out, sizeof(out)), (long)n);
	assert_memory_equal(out, ss, n);
	file_mutations(1, ss);
	/* a state moved to another epoch without its nodes is not a state */
	st2 = st;
	st2.st.epoch++;
	assert_int_equal(al_sstate_format(&st2, out, sizeof(out)), -EINVAL);
	st2 = st;
	assert_int_equal(al_seal_state_advance(&st2.st, st.st.epoch + 1), 0);
	assert_true(al_sstate_format(&st2, out, sizeof(out)) > 0);
	assert_int_equal(al_sstate_parse((const uint8_t *)out, strlen(out), &st), 0);
	same_state(&st.st, &st2.st);
	al_seal_state_wipe(&st.st);
	al_seal_state_wipe(&st2.st);
	al_seal_state_wipe(&want);
	/* the checkpoint keys */
	assert_int_equal(al_ckey_parse((const uint8_t *)str(f, "checkpoint_key"),
				       strlen(str(f, "checkpoint_key")), false, &pk), 0);
	assert_int_equal(al_ckey_parse((const uint8_t *)str(f, "signing_key"),
				       strlen(str(f, "signing_key")), true, &sk), 0);
	assert_int_not_equal(al_ckey_parse((const uint8_t *)str(f, "signing_key"),
					   strlen(str(f, "signing_key")), false, &pk), 0);
	assert_int_equal(al_ed25519_public(sk.key, pub), 0);
	assert_memory_equal(pub, pk.key, 32);
	assert_int_equal(al_ckey_format(&pk, false, out, sizeof(out)), (long)strlen(str(f, "checkpoint_key")));
	assert_string_equal(out, str(f, "checkpoint_key"));
	assert_int_equal(al_ckey_format(&sk, true, out, sizeof(out)), (long)strlen(str(f, "signing_key")));
	assert_string_equal(out, str(f, "signing_key"));
	file_mutations(2, str(f, "checkpoint_key"));
	file_mutations(3, str(f, "signing_key"));
	OPENSSL_cleanse(&sk, sizeof(sk));
	OPENSSL_cleanse(out, sizeof(out));
	OPENSSL_cleanse(&k, sizeof(k));
	free(b);
}

static void test_hosts(void **state)
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(at("hosts"), "valid"), i, v) {
		const char *h = json_string_value(v);
		if (!al_seal_host_ok((const uint8_t *)h, strlen(h)))
			fail_msg("valid host %s refused", h);
	}
	json_array_foreach(json_object_get(at("hosts"), "invalid_hex"), i, v) {
		size_t n;
		uint8_t *h = unhex(json_string_value(v), &n);
		if (al_seal_host_ok(h, n))
			fail_msg("invalid host %s accepted", json_string_value(v));
		free(h);
	}
}

static void test_schedule(void **state)
{
	json_t *v;
	size_t i;

	json_array_foreach(at("schedule"), i, v) {
		json_t *s = json_object_get(v, "state");
		struct al_seal_clock c = { .t0 = num(at("keytree"), "t0"),
					   .delta = num(at("keytree"), "delta"),
					   .max_jump = num(s, "max_jump"),
					   .epoch = (uint32_t)num(s, "epoch"),
					   .boot_start = num(s, "boot_start") };
		struct al_seal_sched out = { .epoch = 77 };
		uint8_t bid[16];
		const char *err = json_string_value(json_object_get(v, "error"));
		int r;

		assert_int_equal(al_unhex((const uint8_t *)str(s, "boot_id"), 32, c.boot_id), 0);
		assert_int_equal(al_unhex((const uint8_t *)str(v, "boot_id"), 32, bid), 0);
		r = al_seal_schedule(&c, bid, num(v, "boottime"), num(v, "wall"), &out);
		if (err) {
			assert_int_equal(r, strcmp(err, "ERANGE") == 0 ? -ERANGE : -EINVAL);
			assert_int_equal(out.epoch, 77); /* untouched */
			continue;
		}
		if (r != 0)
			fail_msg("%s: %d", str(v, "name"), r);
		assert_int_equal(out.epoch, num(v, "epoch"));
		assert_int_equal(out.boot_start, num(v, "boot_start"));
		assert_int_equal(out.expected, num(v, "expected"));
		assert_int_equal(out.clock, json_is_true(json_object_get(v, "clock")));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256_padding),
		cmocka_unit_test(test_rfc4231_hmac),
		cmocka_unit_test(test_rfc8032_ed25519),
		cmocka_unit_test(test_rfc6962_tree),
		cmocka_unit_test(test_merkle_append_n),
		cmocka_unit_test(test_merkle_step),
		cmocka_unit_test(test_sumdb_note),
		cmocka_unit_test(test_records),
		cmocka_unit_test(test_trees),
		cmocka_unit_test(test_keytree),
		cmocka_unit_test(test_caller_fields),
		cmocka_unit_test(test_key_files),
		cmocka_unit_test(test_attestations),
		cmocka_unit_test(test_schedule),
		cmocka_unit_test(test_hosts),
	};

	return cmocka_run_group_tests(tests, load, unload);
}
