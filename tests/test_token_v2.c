/* SPDX-License-Identifier: MIT */
/*
 * libsofttoken.so writing format v2 with in-process sealing (docs/token.md
 * "Format v2"), through its PKCS#11 interface: the trail is sealed and
 * checkpointed and verifies with the auditor's verification key and the
 * public key (the library's verifier API); a flipped byte in an old record is
 * found; the open-time check (audit_verify = full, no verification key)
 * passes a v2 trail and still catches tampering; several processes share one
 * sealing state, each with its own chain; and the configuration and key-file
 * refusals.
 *
 * argv[1] (or $SOFTTOKEN_MODULE) is the module to load.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <p11-kit/pkcs11.h>

#include "sealer.h"
#include "tu.h"
#include "tu_p11.h"

static const char *module_path;
static CK_FUNCTION_LIST *f;
static char *dir, *conf, *audit_dir, *token_dir, *key_dir, *log0;
static struct tu_v2keys keys;
static uint64_t keys_boot_start; /* CLOCK_BOOTTIME at the keys' t0 */

#define SO_PIN "so-secret-1234"
#define USER_PIN "user-secret-5678"
#define PIN(s) (CK_UTF8CHAR_PTR)(s), (CK_ULONG)strlen(s)
#define SEC UINT64_C(1000000000)

static uint64_t now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

/* Keys of host "tok-host" with epoch length delta seconds, t0 back seconds
 * ago (within this boot), the state at epoch 0. */
static void make_keys(uint64_t delta, uint64_t back)
{
	uint8_t boot[16];
	uint64_t wall = now_ns(CLOCK_REALTIME), boot_ns = now_ns(CLOCK_BOOTTIME);

	if (back * SEC >= boot_ns)
		back = 0;
	assert_int_equal(al_clock_boot_id(NULL, boot), 0);
	keys_boot_start = boot_ns - back * SEC;
	tu_v2_keys(key_dir, "tok-host", wall - back * SEC, delta * SEC, 0, boot, keys_boot_start, &keys);
}

/* The configuration: v2 with the keys, then extra lines. */
static void write_conf(const char *extra)
{
	FILE *fp = fopen(conf, "w");

	assert_non_null(fp);
	fprintf(fp, "token_dir = %s\naudit_dir = %s\npbkdf2_iterations = 1000\nslots = 1\n"
		    "audit_format_version = 2\naudit_seal_state = %s\naudit_signing_key = %s\n%s",
		token_dir, audit_dir, keys.state_path, keys.sign_path, extra ? extra : "");
	fclose(fp);
}

/* Only the given lines (for the configuration refusals). */
static void write_conf_raw(const char *lines)
{
	FILE *fp = fopen(conf, "w");

	assert_non_null(fp);
	fprintf(fp, "token_dir = %s\naudit_dir = %s\npbkdf2_iterations = 1000\nslots = 1\n%s", token_dir,
		audit_dir, lines);
	fclose(fp);
}

static int setup(void **state)
{
	(void)state;
	dir = tu_mkdtemp();
	conf = tu_path(dir, "softtoken.conf");
	audit_dir = tu_path(dir, "audit");
	token_dir = tu_path(dir, "tokens");
	key_dir = tu_path(dir, "keys");
	log0 = tu_path(audit_dir, "softtoken-0.log");
	assert_int_equal(mkdir(key_dir, 0700), 0);
	make_keys(10, 0);
	write_conf(NULL);
	setenv("SOFTTOKEN_CONF", conf, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	(void)f->C_Finalize(NULL);
	tu_rmtree(dir);
	tu_v2_keys_free(&keys);
	free(dir);
	free(conf);
	free(audit_dir);
	free(token_dir);
	free(key_dir);
	free(log0);
	return 0;
}

static void init_token(void)
{
	CK_UTF8CHAR lab[32];
	CK_SESSION_HANDLE h;

	memset(lab, ' ', sizeof(lab));
	memcpy(lab, "v2", 2);
	assert_int_equal(f->C_InitToken(0, PIN(SO_PIN), lab), CKR_OK);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h), CKR_OK);
	assert_int_equal(f->C_Login(h, CKU_SO, PIN(SO_PIN)), CKR_OK);
	assert_int_equal(f->C_InitPIN(h, PIN(USER_PIN)), CKR_OK);
	assert_int_equal(f->C_Logout(h), CKR_OK);
	assert_int_equal(f->C_CloseSession(h), CKR_OK);
}

/* Log in, make an AES key, encrypt with it n times (async records), log out.
 * Returns the first CK_RV that was not CKR_OK. */
static CK_RV operate(int n)
{
	CK_OBJECT_CLASS cls = CKO_SECRET_KEY;
	CK_KEY_TYPE kt = CKK_AES;
	CK_ULONG len = 16;
	CK_BBOOL yes = CK_TRUE;
	CK_ATTRIBUTE t[] = { { CKA_CLASS, &cls, sizeof(cls) }, { CKA_KEY_TYPE, &kt, sizeof(kt) },
			     { CKA_VALUE_LEN, &len, sizeof(len) }, { CKA_ENCRYPT, &yes, sizeof(yes) } };
	CK_MECHANISM gen = { CKM_AES_KEY_GEN, NULL, 0 }, ecb = { CKM_AES_ECB, NULL, 0 };
	CK_SESSION_HANDLE h;
	CK_OBJECT_HANDLE k;
	CK_BYTE in[16] = "0123456789abcde", out[16];
	CK_ULONG ol;
	CK_RV rv;

	if ((rv = f->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h)) != CKR_OK)
		return rv;
	if ((rv = f->C_Login(h, CKU_USER, PIN(USER_PIN))) != CKR_OK)
		return rv;
	if ((rv = f->C_GenerateKey(h, &gen, t, 4, &k)) != CKR_OK)
		return rv;
	for (int i = 0; i < n; i++) {
		ol = sizeof(out);
		if ((rv = f->C_EncryptInit(h, &ecb, k)) != CKR_OK ||
		    (rv = f->C_Encrypt(h, in, sizeof(in), out, &ol)) != CKR_OK)
			return rv;
	}
	if ((rv = f->C_Logout(h)) != CKR_OK)
		return rv;
	return f->C_CloseSession(h);
}

static size_t count(const char *path, const char *needle)
{
	size_t len, c = 0, nl = strlen(needle);
	uint8_t *b = tu_read_file(path, &len);
	const uint8_t *p;

	assert_non_null(b);
	for (p = b; (p = memmem(p, len - (size_t)(p - b), needle, nl)) != NULL; p += nl)
		c++;
	free(b);
	return c;
}

static void add_keyfile(struct auditlog_verifier *v, const char *path, bool vkey)
{
	size_t len;
	uint8_t *b = tu_read_file(path, &len);

	assert_non_null(b);
	assert_int_equal(vkey ? auditlog_verifier_add_verify_key(v, b, len) : auditlog_verifier_add_pubkey(v, b, len),
			 0);
	free(b);
}

/* The audit directory through the library's verifier with the auditor's
 * verification key and the public key of k. */
static void verify_dir(const struct tu_v2keys *k, struct auditlog_vsummary *sum)
{
	struct auditlog_verifier *v = NULL;

	assert_int_equal(auditlog_verifier_new(&v), 0);
	assert_int_equal(auditlog_verifier_add_path(v, audit_dir), 0);
	add_keyfile(v, k->vkey_path, true);
	add_keyfile(v, k->pub_path, false);
	assert_int_equal(auditlog_verifier_run(v, sum, sizeof(*sum)), 0);
	auditlog_verifier_free(v);
}

static void assert_intact(const struct auditlog_vsummary *s, uint64_t chains)
{
	for (int c = 0; c < AUDITLOG_V__COUNT; c++)
		if (s->findings[c] && c != AUDITLOG_V_UNSIGNED_TAIL)
			fail_msg("finding %s (%llu)", auditlog_vclass_name((uint32_t)c),
				 (unsigned long long)s->findings[c]);
	assert_int_equal(s->integrity_findings, 0);
	assert_int_equal(s->chains, chains);
	assert_true(s->have_verify_key && s->have_pubkey);
	assert_true(s->seals > 0 && s->seals_checked == s->seals);
	assert_true(s->checkpoints > 0 && s->checkpoints_checked == s->checkpoints);
}

/* stderr while fn runs: the module's messages (tok_msg). */
struct call {
	CK_RV (*fn)(CK_VOID_PTR);
	CK_RV rv;
};

static void call_fn(void *ctx)
{
	struct call *c = ctx;
	c->rv = c->fn(NULL);
}

static char *stderr_of(CK_RV (*fn)(CK_VOID_PTR), CK_RV *ret_rv)
{
	struct call c = {.fn = fn};
	char *out = tu_stderr_of(dir, call_fn, &c);

	*ret_rv = c.rv;
	return out;
}

/* C_Initialize fails with want, its message names what, and no record is
 * written. */
static void refused(CK_RV want, const char *what)
{
	struct stat st;
	CK_RV rv;
	char *msg = stderr_of(f->C_Initialize, &rv);

	if (rv != want || !strstr(msg, what))
		fail_msg("C_Initialize: 0x%lx (want 0x%lx), message \"%s\" (want \"%s\")", (unsigned long)rv,
			 (unsigned long)want, msg, what);
	free(msg);
	assert_true(stat(log0, &st) < 0 || st.st_size == 0);
}

static CK_RV init_only(CK_VOID_PTR a)
{
	CK_RV rv = f->C_Initialize(a);

	if (rv == CKR_OK)
		(void)f->C_Finalize(NULL);
	return rv;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_v2_trail_verifies(void **state)
{
	struct auditlog_vsummary s;
	struct tu_v2keys other;
	char *odir;

	(void)state;
	assert_int_equal(f->C_Initialize(NULL), CKR_OK);
	init_token();
	assert_int_equal(operate(5), CKR_OK);
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
	/* operations audited, in v2, framed by open and close seals */
	assert_int_equal(count(log0, "\"action\":\"C_InitToken\""), 1);
	assert_int_equal(count(log0, "\"action\":\"C_Encrypt\""), 5);
	assert_int_equal(count(log0, "\"action\":\"C_GenerateKey\""), 1);
	assert_true(count(log0, "\"type\":\"seal\"") >= 2);
	assert_true(count(log0, "\"type\":\"checkpoint\"") >= 1);
	assert_int_equal(count(log0, "\"v\":1,"), 0);
	assert_true(count(log0, "\"v\":2,") > 10);
	memset(&s, 0, sizeof(s));
	verify_dir(&keys, &s);
	assert_intact(&s, 1);
	assert_true(s.records > 10);

	/* A second life of the process continues the chain, still intact. */
	assert_int_equal(f->C_Initialize(NULL), CKR_OK);
	assert_int_equal(operate(1), CKR_OK);
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
	memset(&s, 0, sizeof(s));
	verify_dir(&keys, &s);
	assert_intact(&s, 1);

	/* Another host's keys do not vouch for this trail. */
	odir = tu_path(dir, "other");
	assert_int_equal(mkdir(odir, 0700), 0);
	tu_v2_keys(odir, "tok-host", keys.t0, keys.delta, 0, (const uint8_t[16]){ 0 }, 0, &other);
	memset(&s, 0, sizeof(s));
	verify_dir(&other, &s);
	assert_true(s.integrity_findings > 0);
	assert_int_equal(s.seals_checked, 0);
	tu_v2_keys_free(&other);
	free(odir);

	/* A flipped byte in an old record (the C_InitToken event) is found. */
	{
		size_t len;
		uint8_t *b = tu_read_file(log0, &len);
		uint8_t *p = memmem(b, len, "\"action\":\"C_InitToken\"", 22);
		FILE *fp;
		assert_non_null(p);
		p[10] ^= 0x01; /* C_InitToken -> B_InitToken */
		fp = fopen(log0, "w");
		assert_non_null(fp);
		assert_int_equal(fwrite(b, 1, len, fp), len);
		fclose(fp);
		free(b);
	}
	memset(&s, 0, sizeof(s));
	verify_dir(&keys, &s);
	assert_true(s.integrity_findings > 0);
}

/* audit_verify = full checks the directory at C_Initialize without the
 * verification key (the token never has it): a v2 trail passes, a tampered
 * one fails closed. */
static void test_v2_open_check(void **state)
{
	CK_SESSION_HANDLE h;

	(void)state;
	write_conf("audit_verify = full\n");
	assert_int_equal(f->C_Initialize(NULL), CKR_OK);
	init_token();
	assert_int_equal(operate(3), CKR_OK);
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
	/* passes: audited calls work */
	assert_int_equal(f->C_Initialize(NULL), CKR_OK);
	assert_int_equal(operate(1), CKR_OK);
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
	/* an edit in the middle of the v2 chain: fails closed */
	{
		size_t len;
		uint8_t *b = tu_read_file(log0, &len);
		uint8_t *p = memmem(b, len, "\"action\":\"C_GenerateKey\"", 24);
		FILE *fp;
		assert_non_null(p);
		p[11] = 'X';
		fp = fopen(log0, "w");
		assert_non_null(fp);
		assert_int_equal(fwrite(b, 1, len, fp), len);
		fclose(fp);
		free(b);
	}
	assert_int_equal(f->C_Initialize(NULL), CKR_OK);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &h), CKR_DEVICE_ERROR);
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
}

/* Several processes load the token at once and share one sealing state
 * (epochs of 1 s, so that they advance it concurrently): each writes its own
 * chain, every seal and checkpoint verifies. */
#define NPROC 3
static void test_v2_processes_share_state(void **state)
{
	struct auditlog_vsummary s;
	pid_t pid[NPROC];
	int go[2];

	(void)state;
	tu_v2_keys_free(&keys);
	tu_rmtree(key_dir);
	assert_int_equal(mkdir(key_dir, 0700), 0);
	make_keys(1, 5); /* the first seal advances the state by about 5 epochs */
	write_conf("audit_sync = all\n");
	assert_int_equal(f->C_Initialize(NULL), CKR_OK);
	init_token();
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
	assert_int_equal(pipe(go), 0);
	for (int i = 0; i < NPROC; i++) {
		pid[i] = fork();
		assert_true(pid[i] >= 0);
		if (pid[i] == 0) {
			char c;
			close(go[1]);
			if (read(go[0], &c, 1) != 0)
				_exit(2);
			if (f->C_Initialize(NULL) != CKR_OK)
				_exit(3);
			/* about 2.5 s: every process crosses epochs, with idle seals */
			for (int k = 0; k < 10; k++) {
				if (operate(3) != CKR_OK)
					_exit(4);
				usleep(250000);
			}
			_exit(f->C_Finalize(NULL) == CKR_OK ? 0 : 5);
		}
	}
	close(go[0]);
	close(go[1]); /* all start together */
	for (int i = 0; i < NPROC; i++) {
		int st;
		assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("process %d: status 0x%x", i, st);
	}
	memset(&s, 0, sizeof(s));
	verify_dir(&keys, &s);
	/* the parent's chain (softtoken-0.log, continued by one child) and
	 * one per other child */
	assert_intact(&s, NPROC);
	for (int i = 0; i < NPROC; i++) {
		char name[32], *p;
		snprintf(name, sizeof(name), "softtoken-%d.log", i);
		p = tu_path(audit_dir, name);
		assert_true(count(p, "\"action\":\"C_Encrypt\"") >= 30);
		assert_true(count(p, "\"kind\":\"close\"") >= 1);
		free(p);
	}
}

static void test_v2_refusals(void **state)
{
	char *link, line[1024];

	(void)state;
	/* configuration */
	write_conf_raw("audit_format_version = 2\n");
	refused(CKR_ARGUMENTS_BAD, "needs audit_seal_state");
	snprintf(line, sizeof(line), "audit_format_version = 2\naudit_seal_state = %s\n", keys.state_path);
	write_conf_raw(line);
	refused(CKR_ARGUMENTS_BAD, "needs audit_signing_key");
	snprintf(line, sizeof(line), "audit_seal_state = %s\naudit_signing_key = %s\n", keys.state_path,
		 keys.sign_path);
	write_conf_raw(line); /* keys with the default version 1 */
	refused(CKR_ARGUMENTS_BAD, "audit_seal_state is set but audit_format_version is 1");
	write_conf_raw("audit_format_version = 3\n");
	refused(CKR_ARGUMENTS_BAD, "want 0, 1 or 2");
	write_conf_raw("audit_format_version = 2\naudit_seal_state = keys/sealing-state\n");
	refused(CKR_ARGUMENTS_BAD, "want an absolute path");
	write_conf("audit_checkpoint_records = 0\naudit_checkpoint_ms = 0\n");
	refused(CKR_ARGUMENTS_BAD, "may not both be 0");
	/* the sealer's socket (docs/token.md): exclusive with the key files, v2 only */
	snprintf(line, sizeof(line),
		 "audit_format_version = 2\naudit_sealer_socket = /run/auditlog-sealer/sock\n"
		 "audit_seal_state = %s\naudit_signing_key = %s\n",
		 keys.state_path, keys.sign_path);
	write_conf_raw(line);
	refused(CKR_ARGUMENTS_BAD, "audit_sealer_socket and audit_seal_state are both set");
	write_conf_raw("audit_format_version = 2\naudit_sealer_socket = /run/auditlog-sealer/sock\n"
		       "audit_signing_key = /k/signing-key\n");
	refused(CKR_ARGUMENTS_BAD, "audit_sealer_socket and audit_signing_key are both set");
	write_conf_raw("audit_sealer_socket = /run/auditlog-sealer/sock\n");
	refused(CKR_ARGUMENTS_BAD, "audit_sealer_socket is set but audit_format_version is 1");
	write_conf_raw("audit_format_version = 2\naudit_sealer_socket = sock\n");
	refused(CKR_ARGUMENTS_BAD, "want an absolute path");
	/* nothing listens there: refused before anything is written */
	write_conf_raw("audit_format_version = 2\naudit_sealer_socket = /nonexistent-auditlog-test/sock\n");
	refused(CKR_GENERAL_ERROR, "cannot reach the sealer at /nonexistent-auditlog-test/sock: No such file");

	/* key files the library refuses: said, nothing written */
	write_conf(NULL);
	assert_int_equal(chmod(keys.state_path, 0640), 0);
	refused(CKR_GENERAL_ERROR, "audit_seal_state");
	refused(CKR_GENERAL_ERROR, "has mode 0640");
	/* audit_fail_closed = false: said, and the token runs without a trail */
	write_conf("audit_fail_closed = false\n");
	{
		CK_RV rv;
		char *msg = stderr_of(init_only, &rv);
		struct stat st;
		assert_int_equal(rv, CKR_OK);
		assert_non_null(strstr(msg, "has mode 0640"));
		assert_true(stat(log0, &st) < 0 || st.st_size == 0);
		free(msg);
	}
	write_conf(NULL);
	assert_int_equal(chmod(keys.state_path, 0600), 0);
	assert_int_equal(chmod(keys.sign_path, 0604), 0);
	refused(CKR_GENERAL_ERROR, "audit_signing_key");
	assert_int_equal(chmod(keys.sign_path, 0600), 0);
	link = tu_path(key_dir, "state-link");
	assert_int_equal(symlink(keys.state_path, link), 0);
	snprintf(line, sizeof(line),
		 "audit_format_version = 2\naudit_seal_state = %s\naudit_signing_key = %s\n", link,
		 keys.sign_path);
	write_conf_raw(line);
	refused(CKR_GENERAL_ERROR, "is a symbolic link");
	free(link);
	link = tu_path(key_dir, "absent");
	snprintf(line, sizeof(line),
		 "audit_format_version = 2\naudit_seal_state = %s\naudit_signing_key = %s\n", keys.state_path,
		 link);
	write_conf_raw(line);
	refused(CKR_GENERAL_ERROR, "does not exist");
	free(link);
	/* the public key where the signing key belongs: not its format */
	snprintf(line, sizeof(line),
		 "audit_format_version = 2\naudit_seal_state = %s\naudit_signing_key = %s\n", keys.state_path,
		 keys.pub_path);
	write_conf_raw(line);
	assert_int_equal(chmod(keys.pub_path, 0600), 0);
	refused(CKR_GENERAL_ERROR, "not both of auditlog-keygen's format");

	/* keys in audit_dir or in token_dir */
	{
		char *moved = tu_path(dir, "signing-key");
		assert_int_equal(rename(keys.sign_path, moved), 0);
		snprintf(line, sizeof(line),
			 "token_dir = %s\naudit_dir = %s\npbkdf2_iterations = 1000\nslots = 1\n"
			 "audit_format_version = 2\naudit_seal_state = %s\naudit_signing_key = %s\n",
			 token_dir, dir, keys.state_path, moved);
		{
			FILE *fp = fopen(conf, "w");
			assert_non_null(fp);
			fputs(line, fp);
			fclose(fp);
		}
		refused(CKR_GENERAL_ERROR, "is in audit_dir: refused");
		snprintf(line, sizeof(line),
			 "token_dir = %s\naudit_dir = %s\npbkdf2_iterations = 1000\nslots = 1\n"
			 "audit_format_version = 2\naudit_seal_state = %s\naudit_signing_key = %s\n",
			 dir, audit_dir, keys.state_path, moved);
		{
			FILE *fp = fopen(conf, "w");
			assert_non_null(fp);
			fputs(line, fp);
			fclose(fp);
		}
		refused(CKR_GENERAL_ERROR, "is in token_dir: refused");
		assert_int_equal(rename(moved, keys.sign_path), 0);
		free(moved);
	}

	write_conf_raw("audit_checkpoint_ms = 500\n");
	refused(CKR_ARGUMENTS_BAD, "audit_checkpoint_ms is set but audit_format_version is 1");

	/* all well: it works, with a checkpoint after every record */
	write_conf("audit_sync = all\naudit_checkpoint_records = 1\naudit_checkpoint_ms = 0\n");
	assert_int_equal(f->C_Initialize(NULL), CKR_OK);
	init_token();
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
	/* 8 events (C_Initialize ... C_Finalize) */
	assert_true(count(log0, "\"type\":\"checkpoint\"") >= 8);
}

/* A sealing state replaced by an older copy (-ESTALE): C_Initialize fails
 * naming the state and the chain, and writes nothing. */
static void test_v2_older_state(void **state)
{
	uint8_t boot[16];
	size_t before, after;
	struct stat st;
	char *msg;
	CK_RV rv;

	(void)state;
	tu_v2_keys_free(&keys);
	tu_rmtree(key_dir);
	assert_int_equal(mkdir(key_dir, 0700), 0);
	make_keys(1, 60); /* the writer's first seal is at about epoch 60 */
	write_conf(NULL);
	assert_int_equal(init_only(NULL), CKR_OK);
	assert_int_equal(stat(log0, &st), 0);
	before = (size_t)st.st_size;
	assert_int_equal(al_clock_boot_id(NULL, boot), 0);
	tu_v2_state_write(&keys, 10, boot, keys_boot_start);
	msg = stderr_of(f->C_Initialize, &rv);
	if (rv != CKR_GENERAL_ERROR || !strstr(msg, keys.state_path) || !strstr(msg, "softtoken-0.log") ||
	    !strstr(msg, "older copy"))
		fail_msg("C_Initialize: 0x%lx, \"%s\"", (unsigned long)rv, msg);
	free(msg);
	assert_int_equal(stat(log0, &st), 0);
	after = (size_t)st.st_size;
	assert_int_equal(before, after);
	{
		/* nor went on to another chain */
		char *p1 = tu_path(audit_dir, "softtoken-1.log");
		assert_true(stat(p1, &st) < 0 && errno == ENOENT);
		free(p1);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_v2_trail_verifies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_open_check, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_processes_share_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_older_state, setup, teardown),
	};

	module_path = argc > 1 ? argv[1] : getenv("SOFTTOKEN_MODULE");
	if (!module_path) {
		fprintf(stderr, "usage: test_token_v2 MODULE (or $SOFTTOKEN_MODULE)\n");
		return 2;
	}
	if (!tu_p11_load(module_path, &f))
		return 1;
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
