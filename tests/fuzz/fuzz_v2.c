/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the v2 format layer's readers of untrusted bytes
 * (docs/format.md Part II). The first input byte picks one:
 *  0  a signed note opened with a fixed key (al_note_verify): no crash; an
 *     accepted note's text ends in '\n' and lies inside the input;
 *  1-3  the key files (verification key, sealing state, checkpoint keys; 3
 *     public and 9 signing): no crash; an accepted file re-formats to exactly its bytes (one form each);
 *  4  Merkle proofs with sizes, index and hashes taken from the input:
 *     no crash, and a proof never verifies for a size it cannot have;
 *  5  caller fields carved from the input: the check never crashes, and a
 *     set it accepts encodes into a bounded body.
 * Build: cmake -DAUDITLOG_FUZZ=ON with clang (tests/fuzz/CMakeLists.txt).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format_v2.h"
#include "keyfile.h"
#include "merkle.h"
#include "note.h"

/* the checkpoint key and first origin of tests/vectors/v2_vectors.json, so that
 * the seeds (its notes) reach the accepting path */
static const uint8_t pub[32] = {
	0xb8, 0x97, 0xd7, 0x5f, 0xf5, 0x9f, 0x01, 0x52,
	0x2d, 0xce, 0x89, 0xa8, 0xa4, 0x70, 0xc7, 0x7e,
	0x18, 0x3b, 0x2d, 0xa6, 0x9f, 0x87, 0x5a, 0x3e,
	0xaa, 0x23, 0x3d, 0x61, 0x00, 0xd8, 0x6a, 0xd4
};

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void note(const uint8_t *d, size_t n)
{
	size_t tl = 0;
	static const uint8_t name[] = "host-1.example/auditlog/fa7446a3494477e7c87c8c4e4f8e9e2f";

	if (al_note_verify(pub, name, sizeof(name) - 1, d, n, &tl) == 0 &&
	    (tl == 0 || tl > n || d[tl - 1] != '\n'))
		abort();
}

static void keyfile(int which, bool secret, const uint8_t *d, size_t n)
{
	static char out[8192];
	long m = -1;

	if (which == 1) {
		struct al_vkey k;
		if (al_vkey_parse(d, n, &k) == 0)
			m = al_vkey_format(&k, out, sizeof(out));
		else
			return;
	} else if (which == 2) {
		struct al_sstate s;
		if (al_sstate_parse(d, n, &s) == 0)
			m = al_sstate_format(&s, out, sizeof(out));
		else
			return;
	} else {
		struct al_ckey k;
		if (al_ckey_parse(d, n, secret, &k) == 0)
			m = al_ckey_format(&k, secret, out, sizeof(out));
		else
			return;
	}
	if (m < 0 || (size_t)m != n || memcmp(out, d, n) != 0)
		abort();
}

static void proofs(const uint8_t *d, size_t n)
{
	uint8_t leaf[32] = { 0 }, r1[32] = { 0 }, r2[32] = { 0 };
	uint64_t a, b, idx;
	size_t k;

	if (n < 24)
		return;
	a = rd64(d) & 0xffff;
	b = rd64(d + 8) & 0xffff;
	idx = rd64(d + 16) & 0xffff;
	d += 24;
	n -= 24;
	k = n / 32;
	if (k > 64)
		k = 64;
	if (n >= 32)
		memcpy(leaf, d, 32);
	if (n >= 64)
		memcpy(r1, d + 32, 32);
	if (n >= 96)
		memcpy(r2, d + 64, 32);
	/* a proof longer than the tree's height never verifies */
	if (al_merkle_verify_inclusion(idx, b, leaf, (const uint8_t(*)[32])d, k, r1) == 0 &&
	    (idx >= b || k > 64))
		abort();
	if (al_merkle_verify_consistency(a, b, r1, r2, (const uint8_t(*)[32])d, k) == 0 && a > b)
		abort();
	{
		struct al_merkle_range r;
		uint8_t root[32];
		if (al_merkle_range_set(&r, b, d, k) == 0 && al_merkle_range_root(&r, root) != 0)
			abort();
	}
}

static void caller(const uint8_t *d, size_t n)
{
	struct al_v2_field f[AL_CALLER_MAX + 2];
	static uint8_t body[16384];
	size_t nf = 0;

	/* each field: key length, value length, int flag, then the bytes */
	while (n >= 3 && nf < AL_CALLER_MAX + 2) {
		size_t kl = d[0] % 140, vl = d[1] * 2u;
		bool is_int = d[2] & 1;
		d += 3;
		n -= 3;
		if (kl + (is_int ? 8 : vl) > n)
			break;
		f[nf].key = d;
		f[nf].key_len = kl;
		f[nf].is_int = is_int;
		f[nf].p = is_int ? NULL : d + kl;
		f[nf].n = is_int ? 0 : vl;
		f[nf].u = is_int ? rd64(d + kl) : 0;
		d += kl + (is_int ? 8 : vl);
		n -= kl + (is_int ? 8 : vl);
		nf++;
	}
	al_v2_caller_sort(f, nf);
	if (al_v2_caller_check(f, nf) == 0) {
		long m = al_v2_body(AL_T_EVENT, NULL, 0, f, nf, body, sizeof(body));
		/* 16 fields of at most 1 + 1 + 131 + 4 + 256 bytes */
		if (m < 0 || (size_t)m > 2 + AL_CALLER_MAX * (6 + AL_CALLER_KEY_MAX + AL_CALLER_STR_CAP))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 6) {
	case 0: note(data + 1, size - 1); break;
	case 1: case 2: case 3: keyfile(data[0] % 6, (data[0] / 6) & 1, data + 1, size - 1); break;
	case 4: proofs(data + 1, size - 1); break;
	default: caller(data + 1, size - 1); break;
	}
	return 0;
}
