/* SPDX-License-Identifier: MIT */
/*
 * Verify logs from a program with the public API (auditlog_verifier_* in
 * <auditlog.h>): the files or directories given, every finding printed with
 * where it is, the verdict as the exit code (0 intact, 1 findings, 2 could not
 * read). auditlog-verify is the full tool; this is what an application that
 * checks its own trail needs. Optional: --expect-head SEQ:HASH.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <auditlog.h>

static void on_finding(void *ctx, const struct auditlog_finding *f)
{
	(void)ctx;
	/* msg may quote bytes from the log: a real tool escapes them */
	printf("%s: line %" PRIu64 ", offset %" PRIu64 ": %s\n", f->file, f->line, f->offset,
	       auditlog_vclass_name(f->cls));
}

static int parse_head(const char *s, uint64_t *seq, uint8_t hash[32])
{
	char *end;
	*seq = strtoull(s, &end, 10);
	if (end == s || *end != ':' || strlen(end + 1) != 64)
		return -1;
	for (int i = 0; i < 32; i++)
		if (sscanf(end + 1 + 2 * i, "%2hhx", &hash[i]) != 1)
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct auditlog_verifier *v;
	struct auditlog_vsummary sum;
	int i = 1, r;

	if (argc < 2) {
		fprintf(stderr, "usage: %s [--expect-head SEQ:HASH] PATH...\n", argv[0]);
		return 2;
	}
	if (auditlog_verifier_new(&v) < 0 || auditlog_verifier_set_on_finding(v, on_finding, NULL) < 0)
		return 2;
	if (!strcmp(argv[1], "--expect-head") && argc > 3) {
		uint64_t seq;
		uint8_t hash[32];
		if (parse_head(argv[2], &seq, hash) < 0) {
			fprintf(stderr, "--expect-head wants SEQ:HASH (64 hex digits)\n");
			return 2;
		}
		auditlog_verifier_set_expect_head(v, seq, hash);
		i = 3;
	}
	for (; i < argc; i++) {
		r = auditlog_verifier_add_path(v, argv[i]);
		if (r < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(-r));
			auditlog_verifier_free(v);
			return 2;
		}
	}
	r = auditlog_verifier_run(v, &sum, sizeof(sum));
	if (r < 0) {
		fprintf(stderr, "cannot read the input: %s\n", strerror(-r));
		auditlog_verifier_free(v);
		return 2;
	}
	printf("%s: %" PRIu64 " records in %" PRIu64 " file(s), %" PRIu64 " chain(s)\n",
	       sum.integrity_findings ? "findings" : "intact", sum.records, sum.files, sum.chains);
	for (unsigned c = 0; c < sum.chains; c++) {
		struct auditlog_vchain ch;
		if (auditlog_verifier_chain(v, c, &ch, sizeof(ch)) == 0) {
			printf("chain %s: seq %" PRIu64 "..%" PRIu64 ", head ", ch.chain_id, ch.first_seq,
			       ch.last_seq);
			for (int k = 0; k < 32; k++)
				printf("%02x", ch.head_hash[k]);
			putchar('\n');
		}
	}
	auditlog_verifier_free(v);
	return sum.integrity_findings ? 1 : 0;
}
