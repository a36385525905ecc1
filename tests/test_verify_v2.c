/* SPDX-License-Identifier: MIT */
/*
 * The v2 side of the public verification API: key and witness files
 * (auditlog_verifier_add_verify_key / _add_pubkey / _add_witness) refused
 * when they are not exactly their format, an honest log from the independent
 * writer (tests/vectors/v2log.py, run into a mkdtemp directory) intact with
 * every key, the summary saying what was checked, --emit's lines held until
 * a proof covers them, the same from a stream and with threads; and a
 * finding's message cut at a UTF-8 boundary.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tu.h"
#include "format.h"

static char *dir;
static uint8_t *vkey, *pubkey, *witness, *logbytes;
static size_t vkey_n, pubkey_n, witness_n, log_n;

static uint8_t *read_in(const char *name, size_t *n)
{
	char *p = tu_path(dir, name);
	uint8_t *b = tu_read_file(p, n);
	free(p);
	return b;
}

static int make_log(void **state)
{
	const char *py = getenv("AUDITLOG_V2LOG");
	(void)state;
	if (!py) {
		fprintf(stderr, "AUDITLOG_V2LOG is not set: run through ctest\n");
		return -1;
	}
	dir = tu_mkdtemp();
	pid_t pid = fork();
	if (pid == 0) {
		/* 1000 records, batches of 16, a checkpoint every 100 */
		execlp("python3", "python3", py, dir, "1000", "16", "100", (char *)NULL);
		_exit(127);
	}
	int st = 0;
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	vkey = read_in("vkey", &vkey_n);
	pubkey = read_in("pubkey", &pubkey_n);
	witness = read_in("witness", &witness_n);
	logbytes = read_in("audit.log", &log_n);
	return vkey && pubkey && witness && logbytes ? 0 : -1;
}

static int drop_log(void **state)
{
	(void)state;
	free(vkey);
	free(pubkey);
	free(witness);
	free(logbytes);
	tu_rmtree(dir);
	free(dir);
	return 0;
}

static void test_key_files(void **state)
{
	struct auditlog_verifier *v;
	(void)state;

	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_add_verify_key(v, "garbage\n", 8), -EINVAL);
	assert_int_equal(auditlog_verifier_add_verify_key(v, pubkey, pubkey_n), -EINVAL);
	assert_int_equal(auditlog_verifier_add_verify_key(v, NULL, 0), -EINVAL);
	/* a key id that is not the seed's: the last hex digit of key-id changed */
	uint8_t *bad = malloc(vkey_n);
	memcpy(bad, vkey, vkey_n);
	char *kid = strstr((char *)bad, "key-id ");
	assert_non_null(kid);
	kid[7 + 15] = kid[7 + 15] == '0' ? '1' : '0';
	assert_int_equal(auditlog_verifier_add_verify_key(v, bad, vkey_n), -EBADMSG);
	free(bad);
	assert_int_equal(auditlog_verifier_add_verify_key(v, vkey, vkey_n - 1), -EINVAL); /* no final \n */
	assert_int_equal(auditlog_verifier_add_verify_key(v, vkey, vkey_n), 0);
	assert_int_equal(auditlog_verifier_add_verify_key(v, vkey, vkey_n), -EINVAL); /* that key id again */
	assert_int_equal(auditlog_verifier_add_pubkey(v, vkey, vkey_n), -EINVAL);
	assert_int_equal(auditlog_verifier_add_pubkey(v, pubkey, pubkey_n), 0);
	assert_int_equal(auditlog_verifier_add_pubkey(v, pubkey, pubkey_n), -EINVAL); /* that host again */
	assert_int_equal(auditlog_verifier_add_witness(v, "x", 1), -EINVAL);
	assert_int_equal(auditlog_verifier_add_witness(v, witness, witness_n - 1), -EINVAL);
	assert_int_equal(auditlog_verifier_add_witness(v, pubkey, pubkey_n), -EINVAL);
	assert_int_equal(auditlog_verifier_add_witness(v, witness, witness_n), 0);
	auditlog_verifier_free(v);
}

struct got {
	uint64_t n[32];
	uint64_t records;
	size_t bytes;
};

static void on_finding(void *ctx, const struct auditlog_finding *f)
{
	struct got *g = ctx;
	g->n[f->cls]++;
}

static void on_record(void *ctx, const char *line, size_t len)
{
	struct got *g = ctx;
	assert_true(len > 0 && line[0] == '{' && line[len - 1] == '}');
	g->records++;
	g->bytes += len + 1;
}

/* mode 0 files, 1 files with 4 threads, 2 a stream; keys: bit 0 verify
 * key, bit 1 public key, bit 2 witness */
static void run_one(int mode, int keys, struct auditlog_vsummary *s, struct got *g)
{
	struct auditlog_verifier *v;
	char *p = tu_path(dir, "audit.log");

	memset(g, 0, sizeof(*g));
	assert_int_equal(auditlog_verifier_new(&v), 0);
	if (keys & 1)
		assert_int_equal(auditlog_verifier_add_verify_key(v, vkey, vkey_n), 0);
	if (keys & 2)
		assert_int_equal(auditlog_verifier_add_pubkey(v, pubkey, pubkey_n), 0);
	if (keys & 4)
		assert_int_equal(auditlog_verifier_add_witness(v, witness, witness_n), 0);
	assert_int_equal(auditlog_verifier_set_on_finding(v, on_finding, g), 0);
	assert_int_equal(auditlog_verifier_set_on_record(v, on_record, g), 0);
	if (mode == 2) {
		assert_int_equal(auditlog_verifier_add_stream(v, "stdin"), 0);
		for (size_t off = 0; off < log_n; off += 777)
			assert_int_equal(auditlog_verifier_feed(v, logbytes + off, log_n - off < 777 ? log_n - off : 777), 0);
	} else {
		assert_int_equal(auditlog_verifier_add_path(v, p), 0);
		assert_int_equal(auditlog_verifier_set_threads(v, mode == 1 ? 4 : 1), 0);
	}
	assert_int_equal(auditlog_verifier_run(v, s, sizeof(*s)), 0);
	auditlog_verifier_free(v);
	free(p);
}

static void test_honest(void **state)
{
	struct auditlog_vsummary s;
	struct got g;
	(void)state;

	for (int mode = 0; mode < 3; mode++) {
		/* without keys: structure only, every line passed on */
		run_one(mode, 0, &s, &g);
		assert_int_equal(s.integrity_findings, 0);
		assert_true(s.seals > 60 && s.checkpoints >= 10);
		assert_int_equal(s.seals_checked, 0);
		assert_int_equal(s.checkpoints_checked, 0);
		assert_int_equal(s.have_verify_key, 0);
		assert_int_equal(g.records, s.records);
		assert_int_equal(g.bytes, log_n);

		/* every key: every MAC and signature checked; the close seal after
		 * the last checkpoint is the unsigned tail, and it and that
		 * checkpoint are never passed on (no proof covers them) */
		run_one(mode, 7, &s, &g);
		assert_int_equal(s.integrity_findings, 0);
		assert_int_equal(s.have_verify_key, 1);
		assert_int_equal(s.have_pubkey, 1);
		assert_int_equal(s.seals_checked, s.seals);
		assert_int_equal(s.checkpoints_checked, s.checkpoints);
		assert_int_equal(s.unsigned_tail, 1);
		assert_int_equal(s.findings[AUDITLOG_V_UNSIGNED_TAIL], 1);
		assert_int_equal(g.n[AUDITLOG_V_UNSIGNED_TAIL], 1);
		assert_int_equal(s.pending, 2);
		assert_int_equal(g.records, s.records - 2);

		/* the public key alone: lines go out at the next checkpoint's check */
		run_one(mode, 2, &s, &g);
		assert_int_equal(s.integrity_findings, 0);
		assert_int_equal(s.seals_checked, 0);
		assert_int_equal(s.checkpoints_checked, s.checkpoints);
		assert_int_equal(s.pending, 2);
		assert_int_equal(g.records, s.records - 2);

		/* the verification key alone: lines go out at their seal's check */
		run_one(mode, 1, &s, &g);
		assert_int_equal(s.integrity_findings, 0);
		assert_int_equal(s.pending, 0);
		assert_int_equal(g.records, s.records);
	}
}

static void keep_msg(void *ctx, const struct auditlog_finding *fd)
{
	snprintf(ctx, 600, "%s", fd->msg);
}

/* A message longer than 511 bytes is cut at a UTF-8 boundary: a header whose
 * prev_name (not among the inputs: missing-file) is 400 two-byte characters. */
static void test_message_cut(void **state)
{
	struct al_record r = {.version = 1, .type = AL_T_HEADER};
	uint8_t line[AL_LINE_MAX], work[AL_HASH_LEN + AL_BODY_MAX], name[800], prev[AL_HASH_LEN] = {7};
	char ts[AL_TS_LEN];
	struct al_emit_out eo;
	char *d = tu_mkdtemp(), *p = tu_path(d, "audit.log");
	(void)state;

	for (size_t i = 0; i < sizeof(name); i += 2) {
		name[i] = 0xc3;
		name[i + 1] = 0xa9; /* é */
	}
	al_format_ts(1764547200000000000ull, ts);
	r.present = AL_BIT(AL_F_TIMESTAMP) | AL_BIT(AL_F_SEQ) | AL_BIT(AL_F_FILE_ID) | AL_BIT(AL_F_CHAIN_ID) |
		    AL_BIT(AL_F_REASON) | AL_BIT(AL_F_PREV_NAME) | AL_BIT(AL_F_PREV_SEQ) | AL_BIT(AL_F_PREV_HASH) |
		    AL_BIT(AL_F_PREV_SIZE);
	r.f[AL_F_TIMESTAMP] = (struct al_val){(const uint8_t *)ts, AL_TS_LEN, 0};
	r.f[AL_F_SEQ].u = 10;
	r.f[AL_F_FILE_ID] = (struct al_val){(const uint8_t *)"0123456789abcdef0123456789abcdef", 32, 0};
	r.f[AL_F_CHAIN_ID] = (struct al_val){(const uint8_t *)"fedcba9876543210fedcba9876543210", 32, 0};
	r.f[AL_F_REASON] = (struct al_val){(const uint8_t *)"rotate", 6, 0};
	r.f[AL_F_PREV_NAME] = (struct al_val){name, sizeof(name), 0};
	r.f[AL_F_PREV_SEQ].u = 9;
	char hex[65] = {0};
	al_hex(prev, AL_HASH_LEN, hex);
	r.f[AL_F_PREV_HASH] = (struct al_val){(const uint8_t *)hex, 64, 0};
	r.f[AL_F_PREV_SIZE].u = 4096;
	long n = al_emit(&r, prev, line, work, &eo);
	assert_true(n > 0);
	FILE *f = fopen(p, "we");
	assert_non_null(f);
	assert_int_equal(fwrite(line, 1, (size_t)n, f), (size_t)n);
	assert_int_equal(fclose(f), 0);

	struct auditlog_verifier *v;
	struct auditlog_vsummary s;
	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_add_path(v, p), 0);
	static char msg[600];
	assert_int_equal(auditlog_verifier_set_on_finding(v, keep_msg, msg), 0);
	assert_int_equal(auditlog_verifier_run(v, &s, sizeof(s)), 0);
	assert_int_equal(s.findings[AUDITLOG_V_MISSING_FILE], 1);
	size_t len = strlen(msg), i = 0;
	assert_true(len >= 500 && len <= 511); /* it was cut */
	while (i < len) {
		size_t sub, k = al_utf8_seq((const uint8_t *)msg + i, len - i, &sub);
		assert_true(k > 0); /* whole characters only */
		i += k;
	}
	auditlog_verifier_free(v);
	free(p);
	tu_rmtree(d);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_files),
		cmocka_unit_test(test_honest),
		cmocka_unit_test(test_message_cut),
	};
	return cmocka_run_group_tests(tests, make_log, drop_log);
}
