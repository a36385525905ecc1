/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the verifier's engine fed as a stream (al_vstream_*,
 * what auditlog-verify - and auditlog_verifier_feed run on hostile input):
 *  1. any bytes: it never crashes, leaks or reads out of bounds;
 *  2. the same bytes fed whole and fed in pieces (their sizes taken from the
 *     input) give the same findings, in the same order, at the same lines
 *     and offsets, and the same records, bytes and head.
 * Build: cmake -DAUDITLOG_FUZZ=ON with clang (tests/fuzz/CMakeLists.txt).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "verify.h"

struct trace {
	uint64_t n, sum; /* findings, and a digest of what they say */
};

static void on_finding(void *ctx, const struct al_finding *f)
{
	struct trace *t = ctx;
	t->n++;
	t->sum = t->sum * 1000003u + (uint64_t)f->cls * 7919u + f->line * 131u + f->offset * 17u +
		 (f->has_seq ? f->seq + 1 : 0);
}

static void run(const uint8_t *data, size_t size, size_t piece_seed, struct trace *t, struct al_vresult *res)
{
	struct al_vopts o = {.on_finding = on_finding, .ctx = t, .threads = 1};
	struct al_vstream *st;

	memset(t, 0, sizeof(*t));
	if (al_vstream_new("fuzz", &o, res, &st) < 0)
		abort();
	for (size_t k = 0, piece = piece_seed ? 1 + piece_seed % 257 : size; k < size;) {
		size_t m = size - k < piece ? size - k : piece;
		if (al_vstream_feed(st, data + k, m) < 0)
			abort();
		k += m;
		if (piece_seed)
			piece = 1 + (piece * 131 + data[k % size]) % 9000;
	}
	if (al_vstream_end(st) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace a, b;
	struct al_vresult ra, rb;

	run(data, size, 0, &a, &ra);
	run(data, size, size ? data[0] + 1u : 1u, &b, &rb);
	if (a.n != b.n || a.sum != b.sum || ra.records != rb.records || ra.bytes != rb.bytes ||
	    ra.bytes != size || ra.files != rb.files ||
	    (ra.chains && memcmp(ra.chain[0].head_hash, rb.chain[0].head_hash, AL_HASH_LEN) != 0))
		abort();
	al_vresult_free(&ra);
	al_vresult_free(&rb);
	return 0;
}
