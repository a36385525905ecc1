/* SPDX-License-Identifier: MIT */
/*
 * witness_api PATH PUBKEY WITNESS_FILE WITNESS_KEY (tests/witness.py)
 *
 * auditlog_verifier_add_witness_key through libauditlog.so as an application
 * links it: the key's refusals (not a key file, a second key of the same
 * witness name, after the first feed), then PATH verified with the host's
 * public key, the witness file and the witness's key. Prints
 * "bad-checkpoint N rewritten N truncated N" and exits 0, or 1 with a
 * message when the API answers other than its contract says.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <auditlog.h>

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *b = malloc(1 << 20);

	*n = f && b ? fread(b, 1, 1 << 20, f) : 0;
	if (f)
		fclose(f);
	if (!*n) {
		fprintf(stderr, "witness_api: cannot read %s\n", path);
		exit(1);
	}
	return b;
}

static int fail(const char *what, int r)
{
	fprintf(stderr, "witness_api: %s: %d\n", what, r);
	return 1;
}

int main(int argc, char **argv)
{
	struct auditlog_verifier *v = NULL, *s = NULL;
	struct auditlog_vsummary sum;
	size_t pn, wn, kn;
	int r, ret = 1;

	if (argc != 5) {
		fprintf(stderr, "usage: witness_api PATH PUBKEY WITNESS_FILE WITNESS_KEY\n");
		return 2;
	}
	char *pub = slurp(argv[2], &pn), *wit = slurp(argv[3], &wn), *wk = slurp(argv[4], &kn);
	if ((r = auditlog_verifier_new(&v)) < 0)
		return fail("new", r);
	if ((r = auditlog_verifier_add_witness_key(v, wit, wn)) != -EINVAL) {
		fail("a witness file as a witness key: not -EINVAL", r);
		goto out;
	}
	if ((r = auditlog_verifier_add_witness_key(v, wk, kn)) != 0) {
		fail("add_witness_key", r);
		goto out;
	}
	if ((r = auditlog_verifier_add_witness_key(v, wk, kn)) != -EINVAL) {
		fail("the same witness name again: not -EINVAL", r);
		goto out;
	}
	if ((r = auditlog_verifier_add_path(v, argv[1])) < 0 || (r = auditlog_verifier_add_pubkey(v, pub, pn)) < 0 ||
	    (r = auditlog_verifier_add_witness(v, wit, wn)) < 0 || (r = auditlog_verifier_run(v, &sum, sizeof(sum))) < 0) {
		fail("path, pubkey, witness, run", r);
		goto out;
	}
	/* after the first feed the settings are fixed */
	if ((r = auditlog_verifier_new(&s)) < 0 || (r = auditlog_verifier_add_stream(s, "s")) < 0 ||
	    (r = auditlog_verifier_feed(s, "", 0)) < 0) {
		fail("a stream", r);
		goto out;
	}
	if ((r = auditlog_verifier_add_witness_key(s, wk, kn)) != -EBUSY) {
		fail("add_witness_key after a feed: not -EBUSY", r);
		goto out;
	}
	printf("bad-checkpoint %llu rewritten %llu truncated %llu\n",
	       (unsigned long long)sum.findings[AUDITLOG_V_BAD_CHECKPOINT],
	       (unsigned long long)sum.findings[AUDITLOG_V_REWRITTEN],
	       (unsigned long long)sum.findings[AUDITLOG_V_TRUNCATED]);
	ret = 0;
out:
	auditlog_verifier_free(v);
	auditlog_verifier_free(s);
	free(pub);
	free(wit);
	free(wk);
	return ret;
}
