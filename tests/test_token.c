/* SPDX-License-Identifier: MIT */
/*
 * libsofttoken.so through its PKCS#11 interface (dlopen + C_GetFunctionList),
 * as an application sees it: initialisation and configuration errors, slots,
 * tokens, PINs and their lockout, sessions and login states, objects and
 * their attribute rules, find, persistence, the operation state machine and
 * buffer rules, the audit trail record by record, and fail-closed.
 *
 * argv[1] (or $SOFTTOKEN_MODULE) is the module to load.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <p11-kit/pkcs11.h>

#include "tu.h"
#include "tu_p11.h"
#include "verify.h"

/* test_token exports EVP_PKEY_generate (CMakeLists.txt): the module's calls
 * of it reach this wrapper first, which counts them, so that a test can say
 * that a call was refused before any key was made. */
static atomic_uint pkey_generated;

int EVP_PKEY_generate(void *ctx, void **ppkey);
int EVP_PKEY_generate(void *ctx, void **ppkey)
{
	static _Atomic(int (*)(void *, void **)) real;
	int (*fn)(void *, void **) = atomic_load(&real);

	if (!fn) {
		fn = (int (*)(void *, void **))dlsym(RTLD_NEXT, "EVP_PKEY_generate");
		if (!fn)
			return -1; /* OpenSSL's "not supported" */
		atomic_store(&real, fn);
	}
	atomic_fetch_add(&pkey_generated, 1);
	return fn(ctx, ppkey);
}

static const char *module_path;
static void *dl;
static CK_FUNCTION_LIST *f;
static char *dir, *conf, *audit_dir, *token_dir;

#define SO_PIN "so-secret-1234"
#define USER_PIN "user-secret-5678"
#define PIN(s) (CK_UTF8CHAR_PTR)(s), (CK_ULONG)strlen(s)

static void write_conf(const char *extra)
{
	FILE *fp = fopen(conf, "w");

	assert_non_null(fp);
	fprintf(fp, "# test configuration\ntoken_dir = %s\naudit_dir = %s\npbkdf2_iterations = 1000\n"
		    "slots = 2\nmax_pin_failures = 3\n%s",
		token_dir, audit_dir, extra ? extra : "");
	fclose(fp);
}

static int setup(void **state)
{
	dir = tu_mkdtemp();
	conf = tu_path(dir, "softtoken.conf");
	audit_dir = tu_path(dir, "audit");
	token_dir = tu_path(dir, "tokens");
	write_conf(NULL);
	setenv("SOFTTOKEN_CONF", conf, 1);
	return 0;
}

static int teardown(void **state)
{
	if (f)
		(void)f->C_Finalize(NULL);
	tu_rmtree(dir);
	free(dir);
	free(conf);
	free(audit_dir);
	free(token_dir);
	return 0;
}

static void init(void)
{
	assert_int_equal(f->C_Initialize(NULL), CKR_OK);
}

static void fini(void)
{
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
}

static void init_token(CK_SLOT_ID slot, const char *label)
{
	CK_UTF8CHAR lab[32];
	CK_SESSION_HANDLE h;
	size_t n = strlen(label);

	memset(lab, ' ', sizeof(lab));
	memcpy(lab, label, n);
	assert_int_equal(f->C_InitToken(slot, PIN(SO_PIN), lab), CKR_OK);
	assert_int_equal(f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h), CKR_OK);
	assert_int_equal(f->C_Login(h, CKU_SO, PIN(SO_PIN)), CKR_OK);
	assert_int_equal(f->C_InitPIN(h, PIN(USER_PIN)), CKR_OK);
	assert_int_equal(f->C_Logout(h), CKR_OK);
	assert_int_equal(f->C_CloseSession(h), CKR_OK);
}

static CK_SESSION_HANDLE open_rw(CK_SLOT_ID slot)
{
	CK_SESSION_HANDLE h;

	assert_int_equal(f->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h), CKR_OK);
	return h;
}

/* The module initialized, slot 0's token made (label), and a RW session of
 * its logged-in user. */
static CK_SESSION_HANDLE user_session(const char *label)
{
	CK_SESSION_HANDLE h;

	init();
	init_token(0, label);
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	return h;
}

/* ---- the audit log, read independently (jansson, not our parser) ---------- */

struct rec {
	char action[40], outcome[16], rv[48], mechanism[48], key_label[64], key_id[64], actor[16];
	char key2_label[64], key2_id[64];
	char detail[128];
	long long slot, session;
};

static size_t read_events(struct rec *out, size_t cap)
{
	char *path = tu_path(audit_dir, "softtoken-0.log");
	size_t len, n = 0;
	char *buf = (char *)tu_read_file(path, &len), *line, *save = NULL;

	assert_non_null(buf);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_error_t e;
		json_t *j = json_loads(line, JSON_REJECT_DUPLICATES, &e);
		const char *s;
		assert_non_null(j);
		s = json_string_value(json_object_get(j, "type"));
		assert_non_null(s);
		if (strcmp(s, "event") == 0) {
			struct rec *r = &out[n];
			assert_true(n < cap);
			memset(r, 0, sizeof(*r));
#define STR(k) do { const char *v = json_string_value(json_object_get(j, #k)); \
		if (v) snprintf(r->k, sizeof(r->k), "%s", v); } while (0)
			STR(action); STR(outcome); STR(rv); STR(mechanism); STR(key_label);
			STR(key_id); STR(actor); STR(detail); STR(key2_label); STR(key2_id);
#undef STR
			r->slot = json_object_get(j, "slot") ? json_integer_value(json_object_get(j, "slot")) : -1;
			r->session = json_object_get(j, "session") ? json_integer_value(json_object_get(j, "session")) : -1;
			n++;
		}
		json_decref(j);
	}
	free(buf);
	free(path);
	return n;
}

static void assert_no_pin_in_audit(void)
{
	char *path = tu_path(audit_dir, "softtoken-0.log");
	size_t len;
	char *buf = (char *)tu_read_file(path, &len);

	assert_non_null(buf);
	assert_null(memmem(buf, len, SO_PIN, strlen(SO_PIN)));
	assert_null(memmem(buf, len, USER_PIN, strlen(USER_PIN)));
	assert_null(memmem(buf, len, "wrong-pin", 9));
	free(buf);
	free(path);
}

static void assert_audit_verifies(void)
{
	char *path = tu_path(audit_dir, "softtoken-0.log");
	struct al_vopts o = { 0 };
	struct al_vresult res = { 0 };

	assert_int_equal(al_verify_files(&path, 1, &o, &res), 0);
	for (int c = 0; c < AL_V__MAX; c++)
		if (al_vclass_is_integrity(c, true) && res.findings[c])
			fail_msg("audit finding %s", al_vclass_name(c));
	al_vresult_free(&res);
	free(path);
}

/* softtoken-0.log and softtoken-1.log: two chains, not one finding. */
static void assert_two_chains_verify(void)
{
	char *paths[2] = { tu_path(audit_dir, "softtoken-0.log"), tu_path(audit_dir, "softtoken-1.log") };
	struct al_vopts o = { 0 };
	struct al_vresult res = { 0 };

	assert_int_equal(al_verify_files(paths, 2, &o, &res), 0);
	assert_int_equal(res.chains, 2);
	for (int k = 0; k < AL_V__MAX; k++)
		assert_int_equal(res.findings[k], 0);
	al_vresult_free(&res);
	free(paths[0]);
	free(paths[1]);
}

static const struct rec *find_rec(const struct rec *r, size_t n, const char *action, size_t nth)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(r[i].action, action) && nth-- == 0)
			return &r[i];
	return NULL;
}

static size_t count_rec(const struct rec *r, size_t n, const char *action)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += !strcmp(r[i].action, action);
	return c;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_initialize_args(void **state)
{
	CK_C_INITIALIZE_ARGS a = { 0 };
	CK_INFO info;
	CK_ULONG n;
	int dummy;

	assert_int_equal(f->C_GetInfo(&info), CKR_CRYPTOKI_NOT_INITIALIZED);
	assert_int_equal(f->C_GetSlotList(CK_FALSE, NULL, &n), CKR_CRYPTOKI_NOT_INITIALIZED);
	assert_int_equal(f->C_Finalize(NULL), CKR_CRYPTOKI_NOT_INITIALIZED);
	a.pReserved = &dummy;
	assert_int_equal(f->C_Initialize(&a), CKR_ARGUMENTS_BAD);
	a.pReserved = NULL;
	a.CreateMutex = (CK_CREATEMUTEX)(void (*)(void))setup; /* one of four */
	assert_int_equal(f->C_Initialize(&a), CKR_ARGUMENTS_BAD);
	a.CreateMutex = NULL;
	a.flags = CKF_LIBRARY_CANT_CREATE_OS_THREADS | CKF_OS_LOCKING_OK; /* GnuTLS's */
	assert_int_equal(f->C_Initialize(&a), CKR_OK);
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
	a.flags = CKF_OS_LOCKING_OK;
	assert_int_equal(f->C_Initialize(&a), CKR_OK);
	assert_int_equal(f->C_Initialize(NULL), CKR_CRYPTOKI_ALREADY_INITIALIZED);
	assert_int_equal(f->C_GetInfo(&info), CKR_OK);
	assert_int_equal(info.cryptokiVersion.major, 2);
	assert_int_equal(f->C_GetInfo(NULL), CKR_ARGUMENTS_BAD);
	assert_int_equal(f->C_Finalize(&dummy), CKR_ARGUMENTS_BAD);
	fini();
}

static void test_bad_config(void **state)
{
	static const char *const bad[] = {
		"colour = blue\n",            /* unknown key */
		"audit_queue_capacity = 0\n", /* out of range */
		"audit_rotate_bytes = 2x\n",  /* not a number */
		"audit_sync = sometimes\n",   /* not an enum value */
		"audit_dir = relative/path\n",/* relative path: refused */
		"just words\n",               /* no '=' */
		"max_pin_failures = 3\n",     /* given twice (write_conf sets it) */
		"keygen_ahead = maybe\n",     /* not a boolean */
		"audit_drop_behind_bytes = 1048575\n", /* below libauditlog's 1 MiB, not 0 */
		"audit_worker_cpus = 3-1\n",  /* not a CPU list */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_conf(bad[i]);
		assert_int_equal(f->C_Initialize(NULL), CKR_ARGUMENTS_BAD);
	}
	setenv("SOFTTOKEN_CONF", "/nonexistent/softtoken.conf", 1);
	assert_int_equal(f->C_Initialize(NULL), CKR_GENERAL_ERROR);
	setenv("SOFTTOKEN_CONF", conf, 1);
	write_conf(NULL);
	init();
	fini();
}

static void test_slots_and_token_init(void **state)
{
	CK_SLOT_ID slots[4];
	CK_ULONG n = 0;
	CK_TOKEN_INFO ti;
	CK_SESSION_HANDLE h;
	CK_UTF8CHAR lab[32];

	init();
	assert_int_equal(f->C_GetSlotList(CK_TRUE, NULL, &n), CKR_OK);
	assert_int_equal(n, 2);
	n = 1;
	assert_int_equal(f->C_GetSlotList(CK_TRUE, slots, &n), CKR_BUFFER_TOO_SMALL);
	assert_int_equal(n, 2);
	assert_int_equal(f->C_GetSlotList(CK_TRUE, slots, &n), CKR_OK);
	assert_int_equal(slots[1], 1);
	assert_int_equal(f->C_GetTokenInfo(7, &ti), CKR_SLOT_ID_INVALID);
	assert_int_equal(f->C_GetTokenInfo(0, &ti), CKR_OK);
	assert_false(ti.flags & CKF_TOKEN_INITIALIZED);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &h), CKR_TOKEN_NOT_RECOGNIZED);
	memset(lab, ' ', sizeof(lab));
	assert_int_equal(f->C_InitToken(0, PIN("123"), lab), CKR_PIN_LEN_RANGE);
	init_token(0, "first");
	assert_int_equal(f->C_GetTokenInfo(0, &ti), CKR_OK);
	assert_true(ti.flags & CKF_TOKEN_INITIALIZED);
	assert_true(ti.flags & CKF_USER_PIN_INITIALIZED);
	assert_memory_equal(ti.label, "first   ", 8);
	/* Re-initialising needs the SO PIN and no open session. */
	h = open_rw(0);
	assert_int_equal(f->C_InitToken(0, PIN(SO_PIN), lab), CKR_SESSION_EXISTS);
	assert_int_equal(f->C_CloseSession(h), CKR_OK);
	assert_int_equal(f->C_InitToken(0, PIN("wrong-pin"), lab), CKR_PIN_INCORRECT);
	fini();

	/* Persisted: label and PINs survive C_Finalize/C_Initialize. */
	init();
	assert_int_equal(f->C_GetTokenInfo(0, &ti), CKR_OK);
	assert_true(ti.flags & CKF_USER_PIN_INITIALIZED);
	assert_true(ti.flags & CKF_SO_PIN_COUNT_LOW); /* the wrong SO PIN above counted */
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	assert_int_equal(f->C_Logout(h), CKR_OK);
	fini();
}

static void test_login_states(void **state)
{
	CK_SESSION_HANDLE rw, ro;
	CK_SESSION_INFO si;

	init();
	init_token(0, "login");
	rw = open_rw(0);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &ro), CKR_OK);
	assert_int_equal(f->C_OpenSession(0, 0, NULL, NULL, &ro + 0), CKR_SESSION_PARALLEL_NOT_SUPPORTED);
	assert_int_equal(f->C_GetSessionInfo(ro, &si), CKR_OK);
	assert_int_equal(si.state, CKS_RO_PUBLIC_SESSION);
	assert_int_equal(f->C_Login(rw, CKU_SO, PIN(SO_PIN)), CKR_SESSION_READ_ONLY_EXISTS);
	assert_int_equal(f->C_Login(rw, 42, PIN(USER_PIN)), CKR_USER_TYPE_INVALID);
	assert_int_equal(f->C_Logout(rw), CKR_USER_NOT_LOGGED_IN);
	assert_int_equal(f->C_Login(rw, CKU_USER, PIN(USER_PIN)), CKR_OK);
	assert_int_equal(f->C_Login(ro, CKU_USER, PIN(USER_PIN)), CKR_USER_ALREADY_LOGGED_IN);
	assert_int_equal(f->C_Login(rw, CKU_SO, PIN(SO_PIN)), CKR_USER_ANOTHER_ALREADY_LOGGED_IN);
	assert_int_equal(f->C_GetSessionInfo(ro, &si), CKR_OK);
	assert_int_equal(si.state, CKS_RO_USER_FUNCTIONS); /* login is per token */
	assert_int_equal(f->C_GetSessionInfo(rw, &si), CKR_OK);
	assert_int_equal(si.state, CKS_RW_USER_FUNCTIONS);
	assert_int_equal(f->C_InitPIN(rw, PIN("newpin-000")), CKR_USER_NOT_LOGGED_IN); /* SO only */
	assert_int_equal(f->C_SetPIN(ro, PIN(USER_PIN), PIN("newpin-000")), CKR_SESSION_READ_ONLY);
	assert_int_equal(f->C_Logout(rw), CKR_OK);
	assert_int_equal(f->C_CloseSession(ro), CKR_OK);
	assert_int_equal(f->C_CloseSession(ro), CKR_SESSION_HANDLE_INVALID);
	assert_int_equal(f->C_Login(rw, CKU_SO, PIN(SO_PIN)), CKR_OK);
	assert_int_equal(f->C_GetSessionInfo(rw, &si), CKR_OK);
	assert_int_equal(si.state, CKS_RW_SO_FUNCTIONS);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &ro), CKR_SESSION_READ_WRITE_SO_EXISTS);
	/* Closing the last session ends the login. */
	assert_int_equal(f->C_CloseAllSessions(0), CKR_OK);
	assert_int_equal(f->C_GetSessionInfo(rw, &si), CKR_SESSION_HANDLE_INVALID);
	rw = open_rw(0);
	assert_int_equal(f->C_GetSessionInfo(rw, &si), CKR_OK);
	assert_int_equal(si.state, CKS_RW_PUBLIC_SESSION);
	fini();
}

static void test_pin_lockout_and_change(void **state)
{
	CK_SESSION_HANDLE h;
	CK_TOKEN_INFO ti;

	init();
	init_token(0, "pins");
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN("wrong-pin")), CKR_PIN_INCORRECT);
	assert_int_equal(f->C_GetTokenInfo(0, &ti), CKR_OK);
	assert_true(ti.flags & CKF_USER_PIN_COUNT_LOW);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN("wrong-pin")), CKR_PIN_INCORRECT);
	assert_int_equal(f->C_GetTokenInfo(0, &ti), CKR_OK);
	assert_true(ti.flags & CKF_USER_PIN_FINAL_TRY);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN("wrong-pin")), CKR_PIN_LOCKED);
	/* Locked: even the right PIN is refused, across a restart. */
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_PIN_LOCKED);
	fini();
	init();
	assert_int_equal(f->C_GetTokenInfo(0, &ti), CKR_OK);
	assert_true(ti.flags & CKF_USER_PIN_LOCKED);
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_PIN_LOCKED);
	/* The SO sets a new user PIN: unlocked. */
	assert_int_equal(f->C_Login(h, CKU_SO, PIN(SO_PIN)), CKR_OK);
	assert_int_equal(f->C_InitPIN(h, PIN("fresh-pin-1")), CKR_OK);
	assert_int_equal(f->C_Logout(h), CKR_OK);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN("fresh-pin-1")), CKR_OK);
	assert_int_equal(f->C_SetPIN(h, PIN("wrong-pin"), PIN("second-pin")), CKR_PIN_INCORRECT);
	assert_int_equal(f->C_SetPIN(h, PIN("fresh-pin-1"), PIN("ab")), CKR_PIN_LEN_RANGE);
	assert_int_equal(f->C_SetPIN(h, PIN("fresh-pin-1"), PIN("second-pin")), CKR_OK);
	assert_int_equal(f->C_Logout(h), CKR_OK);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN("fresh-pin-1")), CKR_PIN_INCORRECT);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN("second-pin")), CKR_OK);
	fini();
	assert_no_pin_in_audit();
	assert_audit_verifies();
}

static CK_OBJECT_HANDLE make_aes(CK_SESSION_HANDLE h, const char *label, bool token, bool sensitive)
{
	static CK_BYTE value[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
				     17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32 };
	CK_OBJECT_CLASS cls = CKO_SECRET_KEY;
	CK_KEY_TYPE kt = CKK_AES;
	CK_BBOOL tok = token, sens = sensitive, yes = CK_TRUE;
	CK_BYTE id[2] = { 0xab, 0x01 };
	CK_ATTRIBUTE t[] = {
		{ CKA_CLASS, &cls, sizeof(cls) }, { CKA_KEY_TYPE, &kt, sizeof(kt) },
		{ CKA_TOKEN, &tok, sizeof(tok) }, { CKA_SENSITIVE, &sens, sizeof(sens) },
		{ CKA_LABEL, (void *)label, strlen(label) }, { CKA_ID, id, sizeof(id) },
		{ CKA_ENCRYPT, &yes, sizeof(yes) }, { CKA_VALUE, value, sizeof(value) },
	};
	CK_OBJECT_HANDLE o;

	assert_int_equal(f->C_CreateObject(h, t, sizeof(t) / sizeof(t[0]), &o), CKR_OK);
	return o;
}

static CK_ULONG find_count(CK_SESSION_HANDLE h, CK_ATTRIBUTE *t, CK_ULONG n)
{
	CK_OBJECT_HANDLE found[600];
	CK_ULONG got = 0, total = 0;

	assert_int_equal(f->C_FindObjectsInit(h, t, n), CKR_OK);
	assert_int_equal(f->C_FindObjectsInit(h, t, n), CKR_OPERATION_ACTIVE);
	do {
		assert_int_equal(f->C_FindObjects(h, found, 7, &got), CKR_OK);
		total += got;
	} while (got);
	assert_int_equal(f->C_FindObjectsFinal(h), CKR_OK);
	assert_int_equal(f->C_FindObjectsFinal(h), CKR_OPERATION_NOT_INITIALIZED);
	return total;
}

static void test_objects(void **state)
{
	CK_SESSION_HANDLE h, ro;
	CK_OBJECT_HANDLE sk, pk, data, copy;
	CK_OBJECT_CLASS cls_data = CKO_DATA, cls_sk = CKO_SECRET_KEY;
	CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
	CK_BYTE buf[64];
	CK_ULONG size;
	char app[] = "tests";
	CK_ATTRIBUTE dt[] = { { CKA_CLASS, &cls_data, sizeof(cls_data) },
			      { CKA_TOKEN, &yes, sizeof(yes) },
			      { CKA_APPLICATION, app, sizeof(app) - 1 },
			      { CKA_VALUE, "public data", 11 } };
	CK_ATTRIBUTE by_class[] = { { CKA_CLASS, &cls_sk, sizeof(cls_sk) } };
	CK_ATTRIBUTE get[] = { { CKA_VALUE, buf, sizeof(buf) } };

	init();
	init_token(0, "objects");
	h = open_rw(0);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &ro), CKR_OK);
	/* A public data object needs no login, a token object a R/W session. */
	assert_int_equal(f->C_CreateObject(ro, dt, 4, &data), CKR_SESSION_READ_ONLY);
	assert_int_equal(f->C_CreateObject(h, dt, 4, &data), CKR_OK);
	/* Keys need a login. */
	{
		CK_KEY_TYPE kt = CKK_AES;
		CK_ATTRIBUTE kt_t[] = { { CKA_CLASS, &cls_sk, sizeof(cls_sk) }, { CKA_KEY_TYPE, &kt, sizeof(kt) },
					{ CKA_VALUE, buf, 16 } };
		assert_int_equal(f->C_CreateObject(h, kt_t, 3, &sk), CKR_USER_NOT_LOGGED_IN);
		assert_int_equal(f->C_CreateObject(h, kt_t, 1, &sk), CKR_TEMPLATE_INCOMPLETE);
	}
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	sk = make_aes(h, "sensitive-key", true, true);
	pk = make_aes(h, "plain-key", false, false);
	/* Sensitive values never leave; others do, and that is audited. */
	assert_int_equal(f->C_GetAttributeValue(h, sk, get, 1), CKR_ATTRIBUTE_SENSITIVE);
	assert_int_equal(get[0].ulValueLen, CK_UNAVAILABLE_INFORMATION);
	get[0].ulValueLen = sizeof(buf);
	assert_int_equal(f->C_GetAttributeValue(h, pk, get, 1), CKR_OK);
	assert_int_equal(get[0].ulValueLen, 32);
	assert_int_equal(buf[31], 32);
	get[0].pValue = NULL;
	assert_int_equal(f->C_GetAttributeValue(h, data, get, 1), CKR_OK);
	assert_int_equal(get[0].ulValueLen, 11);
	get[0].pValue = buf;
	get[0].ulValueLen = 3;
	assert_int_equal(f->C_GetAttributeValue(h, data, get, 1), CKR_BUFFER_TOO_SMALL);
	{
		CK_ATTRIBUTE modulus = { CKA_MODULUS, NULL, 0 };
		assert_int_equal(f->C_GetAttributeValue(h, data, &modulus, 1), CKR_ATTRIBUTE_TYPE_INVALID);
		assert_int_equal(f->C_GetAttributeValue(h, 0xdead, &modulus, 1), CKR_OBJECT_HANDLE_INVALID);
	}
	assert_int_equal(f->C_GetObjectSize(h, sk, &size), CKR_OK);
	assert_true(size > 32);
	/* Set: label yes, value and class no; sensitive only one way. */
	{
		CK_ATTRIBUTE lab = { CKA_LABEL, "renamed", 7 };
		CK_ATTRIBUTE cls = { CKA_CLASS, &cls_data, sizeof(cls_data) };
		CK_ATTRIBUTE unsens = { CKA_SENSITIVE, &no, sizeof(no) };
		assert_int_equal(f->C_SetAttributeValue(h, sk, &lab, 1), CKR_OK);
		assert_int_equal(f->C_SetAttributeValue(h, sk, &cls, 1), CKR_ATTRIBUTE_READ_ONLY);
		assert_int_equal(f->C_SetAttributeValue(h, sk, &unsens, 1), CKR_ATTRIBUTE_READ_ONLY);
		assert_int_equal(f->C_SetAttributeValue(ro, sk, &lab, 1), CKR_SESSION_READ_ONLY);
	}
	/* Copy, then destroy the copy. */
	{
		CK_ATTRIBUTE ct = { CKA_LABEL, "copied", 6 };
		CK_ATTRIBUTE bad = { CKA_VALUE, buf, 16 };
		assert_int_equal(f->C_CopyObject(h, pk, &bad, 1, &copy), CKR_ATTRIBUTE_READ_ONLY);
		assert_int_equal(f->C_CopyObject(h, pk, &ct, 1, &copy), CKR_OK);
		assert_int_equal(find_count(h, by_class, 1), 3);
		assert_int_equal(f->C_DestroyObject(h, copy), CKR_OK);
		assert_int_equal(f->C_DestroyObject(h, copy), CKR_OBJECT_HANDLE_INVALID);
	}
	assert_int_equal(find_count(h, by_class, 1), 2);
	assert_int_equal(find_count(h, NULL, 0), 3);
	/* Private objects vanish at logout; the session key is private too. */
	assert_int_equal(f->C_Logout(h), CKR_OK);
	assert_int_equal(find_count(h, NULL, 0), 1);
	assert_int_equal(f->C_GetAttributeValue(h, sk, get, 1), CKR_OBJECT_HANDLE_INVALID);
	fini();

	/* Token objects persist; the sealed key comes back only with a login. */
	init();
	h = open_rw(0);
	assert_int_equal(find_count(h, NULL, 0), 1);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	{
		CK_ATTRIBUTE lab = { CKA_LABEL, "renamed", 7 };
		assert_int_equal(find_count(h, &lab, 1), 1);
	}
	assert_int_equal(find_count(h, NULL, 0), 2); /* the session key is gone */
	fini();

	/* Field by field: the records of this test. */
	{
		static struct rec r[200];
		size_t n = read_events(r, 200);
		const struct rec *x = find_rec(r, n, "C_GetAttributeValue", 0);
		assert_non_null(x); /* the plain key's value left the token */
		assert_string_equal(x->outcome, "success");
		assert_string_equal(x->key_label, "plain-key");
		assert_string_equal(x->key_id, "ab01");
		assert_string_equal(x->detail, "CKA_VALUE");
		assert_string_equal(x->actor, "user");
		assert_int_equal(count_rec(r, n, "C_GetAttributeValue"), 1); /* not for public reads */
		x = find_rec(r, n, "C_CreateObject", 0);
		assert_string_equal(x->rv, "CKR_SESSION_READ_ONLY");
		assert_string_equal(x->outcome, "failure");
		assert_int_equal(x->slot, 0);
		x = find_rec(r, n, "C_CreateObject", 5);
		assert_non_null(x);
		assert_string_equal(x->key_label, "plain-key");
		assert_int_equal(count_rec(r, n, "C_CopyObject"), 2);
		assert_int_equal(count_rec(r, n, "C_DestroyObject"), 2);
		assert_int_equal(count_rec(r, n, "C_SetAttributeValue"), 4);
		assert_int_equal(count_rec(r, n, "C_FindObjectsFinal"), 7);
		x = find_rec(r, n, "C_FindObjectsFinal", 0);
		assert_string_equal(x->detail, "matched=3");
	}
	assert_audit_verifies();
}

static void test_find_many(void **state)
{
	CK_SESSION_HANDLE h;
	CK_OBJECT_CLASS cls = CKO_SECRET_KEY;
	CK_ATTRIBUTE by_class = { CKA_CLASS, &cls, sizeof(cls) };
	char label[32];

	init();
	init_token(1, "many");
	h = open_rw(1);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	for (int i = 0; i < 257; i++) {
		snprintf(label, sizeof(label), "key-%03d", i);
		make_aes(h, label, false, true);
	}
	assert_int_equal(find_count(h, &by_class, 1), 257);
	{
		CK_ATTRIBUTE one = { CKA_LABEL, "key-200", 7 };
		CK_ATTRIBUTE none = { CKA_LABEL, "key-2000", 8 };
		assert_int_equal(find_count(h, &one, 1), 1);
		assert_int_equal(find_count(h, &none, 1), 0);
	}
	fini();
}

/* Tamper found at open: audited calls answer CKR_DEVICE_ERROR and do nothing;
 * queries still work. */
static void test_fail_closed_on_tamper(void **state)
{
	char *path = tu_path(audit_dir, "softtoken-0.log");
	CK_SESSION_HANDLE h;
	CK_TOKEN_INFO ti;
	size_t len;
	uint8_t *buf;
	int fd;

	init();
	init_token(0, "tamper");
	fini();
	/* Change one byte of a record in the middle: full verification at
	 * C_Initialize finds it. */
	write_conf("audit_verify = full\n");
	buf = tu_read_file(path, &len);
	assert_non_null(buf);
	{
		char *p = memmem(buf, len, "\"C_InitToken\"", 13);
		assert_non_null(p);
		fd = open(path, O_WRONLY);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, "X", 1, (p - (char *)buf) + 3), 1);
		close(fd);
	}
	free(buf);
	init();
	assert_int_equal(f->C_GetTokenInfo(0, &ti), CKR_OK);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h),
			 CKR_DEVICE_ERROR);
	fini();
	/* Without full verification the O(1) open check sees an intact tail:
	 * the module runs (the damage is the verifier's to report). */
	write_conf(NULL);
	init();
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	fini();
	free(path);
}

/* Damage at the tail beyond the writer's repair bound: the log refuses to
 * open, the module fails closed. */
static void test_fail_closed_on_damaged_tail(void **state)
{
	char *path = tu_path(audit_dir, "softtoken-0.log");
	CK_SESSION_HANDLE h;
	CK_INFO info;
	FILE *fp;

	init();
	init_token(0, "tail");
	fini();
	fp = fopen(path, "a");
	assert_non_null(fp);
	for (int i = 0; i < 300000; i++)
		fputs("garbage garbage garbage garbage ", fp);
	fclose(fp);
	init();
	assert_int_equal(f->C_GetInfo(&info), CKR_OK);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h),
			 CKR_DEVICE_ERROR);
	fini();
	/* With audit_fail_closed = false the module runs without a trail. */
	write_conf("audit_fail_closed = false\n");
	init();
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	fini();
	free(path);
}

static void test_audit_records(void **state)
{
	static struct rec r[100];
	CK_SESSION_HANDLE h;
	CK_BYTE rnd[16];
	size_t n;

	init();
	init_token(0, "records");
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN("wrong-pin")), CKR_PIN_INCORRECT);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	assert_int_equal(f->C_GenerateRandom(h, rnd, sizeof(rnd)), CKR_OK);
	assert_int_equal(f->C_SeedRandom(h, rnd, sizeof(rnd)), CKR_OK);
	assert_int_equal(f->C_DeriveKey(h, &(CK_MECHANISM){ CKM_DH_PKCS_DERIVE, NULL, 0 }, 1, NULL, 0, NULL),
			 CKR_MECHANISM_INVALID);
	assert_int_equal(f->C_Logout(h), CKR_OK);
	assert_int_equal(f->C_CloseSession(h), CKR_OK);
	fini();

	n = read_events(r, 100);
	{
		static const char *const want[] = {
			"C_Initialize", "C_InitToken", "C_OpenSession", "C_Login", "C_InitPIN",
			"C_Logout", "C_CloseSession", "C_OpenSession", "C_Login", "C_Login",
			"C_GenerateRandom", "C_SeedRandom", "C_DeriveKey", "C_Logout",
			"C_CloseSession", "C_Finalize",
		};
		assert_int_equal(n, sizeof(want) / sizeof(want[0]));
		for (size_t i = 0; i < n; i++)
			assert_string_equal(r[i].action, want[i]);
	}
	assert_string_equal(r[1].actor, "so");
	assert_string_equal(r[1].key_label, "records"); /* the token's label */
	assert_string_equal(r[3].actor, "so");
	assert_string_equal(r[8].rv, "CKR_PIN_INCORRECT");
	assert_string_equal(r[8].outcome, "failure");
	assert_string_equal(r[8].actor, "user");
	assert_string_equal(r[9].rv, "CKR_OK");
	assert_int_equal(r[9].session, r[7].session);
	assert_int_equal(r[9].slot, 0);
	assert_string_equal(r[10].detail, "bytes=16");
	assert_string_equal(r[12].mechanism, "CKM_DH_PKCS_DERIVE");
	assert_string_equal(r[12].rv, "CKR_MECHANISM_INVALID");
	assert_no_pin_in_audit();
	assert_audit_verifies();
}

/* Operation state and buffer rules through the module (the engine's own
 * tests cover each mechanism). */
static void test_operation_rules(void **state)
{
	static struct rec r[100];
	CK_SESSION_HANDLE h;
	CK_OBJECT_HANDLE k;
	CK_BYTE iv[16] = { 0 }, in[32] = { 1 }, out[64];
	CK_ULONG olen;
	CK_MECHANISM cbc = { CKM_AES_CBC, iv, sizeof(iv) };
	CK_MECHANISM sha = { CKM_SHA256, NULL, 0 };
	size_t n;

	init();
	init_token(0, "ops");
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	k = make_aes(h, "op-key", false, true);
	assert_int_equal(f->C_Encrypt(h, in, sizeof(in), out, &olen), CKR_OPERATION_NOT_INITIALIZED);
	assert_int_equal(f->C_EncryptInit(h, &cbc, 0xbad), CKR_KEY_HANDLE_INVALID);
	assert_int_equal(f->C_EncryptInit(h, &cbc, k), CKR_OK);
	assert_int_equal(f->C_EncryptInit(h, &cbc, k), CKR_OPERATION_ACTIVE);
	assert_int_equal(f->C_Encrypt(h, in, sizeof(in), NULL, &olen), CKR_OK);   /* length query */
	assert_int_equal(olen, 32);
	olen = 8;
	assert_int_equal(f->C_Encrypt(h, in, sizeof(in), out, &olen), CKR_BUFFER_TOO_SMALL);
	assert_int_equal(olen, 32);
	olen = sizeof(out);
	assert_int_equal(f->C_Encrypt(h, in, sizeof(in), out, &olen), CKR_OK);    /* still active */
	assert_int_equal(olen, 32);
	assert_int_equal(f->C_Encrypt(h, in, sizeof(in), out, &olen), CKR_OPERATION_NOT_INITIALIZED);
	/* Digests work and are not audited. */
	assert_int_equal(f->C_DigestInit(h, &sha), CKR_OK);
	olen = sizeof(out);
	assert_int_equal(f->C_Digest(h, (CK_BYTE_PTR)"abc", 3, out, &olen), CKR_OK);
	assert_int_equal(olen, 32);
	assert_int_equal(out[0], 0xba); /* SHA-256("abc") = ba7816bf... */
	assert_int_equal(out[1], 0x78);
	/* A finished digest is reused by the session's next one (its OpenSSL
	 * context reinitialised): each must start from scratch, whatever came
	 * before it: another mechanism, a short buffer, a refused one-shot. */
	{
		static const CK_BYTE empty256[4] = { 0xe3, 0xb0, 0xc4, 0x42 }, abc1[4] = { 0xa9, 0x99, 0x3e, 0x36 },
				     a256[4] = { 0xca, 0x97, 0x81, 0x12 }, abc256[4] = { 0xba, 0x78, 0x16, 0xbf };
		CK_MECHANISM sha1 = { CKM_SHA_1, NULL, 0 };
		assert_int_equal(f->C_DigestInit(h, &sha), CKR_OK);
		olen = sizeof(out);
		assert_int_equal(f->C_Digest(h, (CK_BYTE_PTR)"", 0, out, &olen), CKR_OK);
		assert_memory_equal(out, empty256, 4);
		assert_int_equal(f->C_DigestInit(h, &sha1), CKR_OK);
		olen = sizeof(out);
		assert_int_equal(f->C_Digest(h, (CK_BYTE_PTR)"abc", 3, out, &olen), CKR_OK);
		assert_int_equal(olen, 20);
		assert_memory_equal(out, abc1, 4);
		assert_int_equal(f->C_DigestInit(h, &sha), CKR_OK);
		assert_int_equal(f->C_DigestUpdate(h, (CK_BYTE_PTR)"a", 1), CKR_OK);
		assert_int_equal(f->C_DigestUpdate(h, (CK_BYTE_PTR)"bc", 2), CKR_OK);
		olen = sizeof(out);
		assert_int_equal(f->C_DigestFinal(h, out, &olen), CKR_OK);
		assert_memory_equal(out, abc256, 4);
		assert_int_equal(f->C_DigestInit(h, &sha), CKR_OK);
		olen = 8;
		assert_int_equal(f->C_Digest(h, (CK_BYTE_PTR)"abc", 3, out, &olen), CKR_BUFFER_TOO_SMALL);
		olen = sizeof(out);
		assert_int_equal(f->C_Digest(h, (CK_BYTE_PTR)"abc", 3, out, &olen), CKR_OK);
		assert_memory_equal(out, abc256, 4);
		assert_int_equal(f->C_DigestInit(h, &sha), CKR_OK);
		assert_int_equal(f->C_DigestUpdate(h, (CK_BYTE_PTR)"a", 1), CKR_OK);
		olen = sizeof(out);
		assert_int_equal(f->C_Digest(h, (CK_BYTE_PTR)"bc", 2, out, &olen), CKR_OPERATION_ACTIVE);
		assert_int_equal(f->C_DigestFinal(h, out, &olen), CKR_OK);
		assert_memory_equal(out, a256, 4);
		assert_int_equal(f->C_DigestInit(h, &(CK_MECHANISM){ CKM_AES_CBC, NULL, 0 }), CKR_MECHANISM_INVALID);
		assert_int_equal(f->C_DigestInit(h, &sha), CKR_OK);
		olen = sizeof(out);
		assert_int_equal(f->C_Digest(h, (CK_BYTE_PTR)"abc", 3, out, &olen), CKR_OK);
		assert_memory_equal(out, abc256, 4);
	}
	/* A key without CKA_DECRYPT... has it by default; a mechanism it can't do: */
	assert_int_equal(f->C_SignInit(h, &(CK_MECHANISM){ CKM_ECDSA, NULL, 0 }, k),
			 CKR_KEY_TYPE_INCONSISTENT);
	fini();
	n = read_events(r, 100);
	assert_int_equal(count_rec(r, n, "C_Encrypt"), 1);       /* one record for the operation */
	assert_int_equal(count_rec(r, n, "C_EncryptInit"), 1);   /* the failed init */
	assert_int_equal(count_rec(r, n, "C_SignInit"), 1);
	assert_int_equal(count_rec(r, n, "C_Digest"), 0);
	{
		const struct rec *x = find_rec(r, n, "C_Encrypt", 0);
		assert_string_equal(x->mechanism, "CKM_AES_CBC");
		assert_string_equal(x->key_label, "op-key");
		assert_string_equal(x->outcome, "success");
	}
	assert_audit_verifies();
}

/* Keys through the module: generation, use, wrapping, digesting a key, and
 * their records; error paths answer the right CKR. */
static void test_keys(void **state)
{
	static struct rec r[200];
	CK_SESSION_HANDLE h;
	CK_OBJECT_HANDLE pub, priv, aes, kek, unwrapped;
	CK_BYTE p256[] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
	CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
	CK_ULONG len32 = 32, olen;
	CK_OBJECT_CLASS sk = CKO_SECRET_KEY;
	CK_KEY_TYPE aes_t = CKK_AES;
	CK_MECHANISM ecgen = { CKM_EC_KEY_PAIR_GEN, NULL, 0 }, aesgen = { CKM_AES_KEY_GEN, NULL, 0 };
	CK_MECHANISM ecdsa = { CKM_ECDSA_SHA256, NULL, 0 }, kw = { CKM_AES_KEY_WRAP, NULL, 0 };
	CK_MECHANISM sha = { CKM_SHA256, NULL, 0 };
	CK_ATTRIBUTE pubt[] = { { CKA_EC_PARAMS, p256, sizeof(p256) }, { CKA_LABEL, "ec-pub", 6 } };
	CK_ATTRIBUTE privt[] = { { CKA_LABEL, "ec-priv", 7 }, { CKA_ID, "\x42", 1 },
				 { CKA_TOKEN, &yes, 1 } };
	CK_ATTRIBUTE aest[] = { { CKA_VALUE_LEN, &len32, sizeof(len32) }, { CKA_LABEL, "gen-aes", 7 },
				{ CKA_EXTRACTABLE, &yes, 1 } };
	CK_ATTRIBUTE kekt[] = { { CKA_VALUE_LEN, &len32, sizeof(len32) }, { CKA_LABEL, "kek", 3 },
				{ CKA_EXTRACTABLE, &no, 1 } };
	CK_ATTRIBUTE unwt[] = { { CKA_CLASS, &sk, sizeof(sk) }, { CKA_KEY_TYPE, &aes_t, sizeof(aes_t) },
				{ CKA_LABEL, "unwrapped", 9 } };
	CK_BYTE sig[128], wrapped[64], digest[32], msg[] = "message";
	size_t n;

	init();
	init_token(0, "keys");
	h = open_rw(0);
	assert_int_equal(f->C_GenerateKeyPair(h, &ecgen, pubt, 2, privt, 3, &pub, &priv), CKR_USER_NOT_LOGGED_IN);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	assert_int_equal(f->C_GenerateKeyPair(h, &ecgen, pubt, 1, privt, 3, &pub, &priv), CKR_OK);
	{
		/* A template may not contradict what the mechanism makes. */
		CK_KEY_TYPE rsa = CKK_RSA;
		CK_ATTRIBUTE badt[] = { { CKA_EC_PARAMS, p256, sizeof(p256) }, { CKA_KEY_TYPE, &rsa, sizeof(rsa) } };
		CK_OBJECT_HANDLE x, y;
		assert_int_equal(f->C_GenerateKeyPair(h, &ecgen, badt, 2, privt, 1, &x, &y),
				 CKR_TEMPLATE_INCONSISTENT);
	}
	/* Sign, the length query and short buffer writing nothing. */
	assert_int_equal(f->C_SignInit(h, &ecdsa, priv), CKR_OK);
	assert_int_equal(f->C_Sign(h, msg, sizeof(msg), NULL, &olen), CKR_OK);
	assert_int_equal(olen, 64);
	olen = 10;
	assert_int_equal(f->C_Sign(h, msg, sizeof(msg), sig, &olen), CKR_BUFFER_TOO_SMALL);
	olen = sizeof(sig);
	assert_int_equal(f->C_Sign(h, msg, sizeof(msg), sig, &olen), CKR_OK);
	assert_int_equal(f->C_VerifyInit(h, &ecdsa, pub), CKR_OK);
	assert_int_equal(f->C_Verify(h, msg, sizeof(msg), sig, olen), CKR_OK);
	sig[5] ^= 1;
	assert_int_equal(f->C_VerifyInit(h, &ecdsa, pub), CKR_OK);
	assert_int_equal(f->C_Verify(h, msg, sizeof(msg), sig, olen), CKR_SIGNATURE_INVALID);
	/* Multi-part sign: Update then Final; a one-shot call is refused. */
	assert_int_equal(f->C_SignInit(h, &ecdsa, priv), CKR_OK);
	assert_int_equal(f->C_SignUpdate(h, msg, 3), CKR_OK);
	assert_int_equal(f->C_Sign(h, msg, sizeof(msg), sig, &olen), CKR_OPERATION_ACTIVE);
	assert_int_equal(f->C_SignUpdate(h, msg + 3, sizeof(msg) - 3), CKR_OK);
	olen = sizeof(sig);
	assert_int_equal(f->C_SignFinal(h, sig, &olen), CKR_OK);
	assert_int_equal(f->C_VerifyInit(h, &ecdsa, pub), CKR_OK);
	assert_int_equal(f->C_Verify(h, msg, sizeof(msg), sig, olen), CKR_OK);
	/* The public key cannot sign. */
	assert_int_equal(f->C_SignInit(h, &ecdsa, pub), CKR_KEY_TYPE_INCONSISTENT);

	/* Wrap and unwrap. */
	assert_int_equal(f->C_GenerateKey(h, &aesgen, aest, 3, &aes), CKR_OK);
	assert_int_equal(f->C_GenerateKey(h, &aesgen, kekt, 3, &kek), CKR_OK);
	assert_int_equal(f->C_WrapKey(h, &kw, kek, aes, NULL, &olen), CKR_OK);
	assert_int_equal(olen, 40);
	assert_int_equal(f->C_WrapKey(h, &kw, aes, kek, wrapped, &olen), CKR_KEY_UNEXTRACTABLE);
	olen = sizeof(wrapped);
	assert_int_equal(f->C_WrapKey(h, &kw, kek, aes, wrapped, &olen), CKR_OK);
	assert_int_equal(f->C_UnwrapKey(h, &kw, kek, wrapped, olen, unwt, 3, &unwrapped), CKR_OK);
	wrapped[3] ^= 1;
	assert_int_equal(f->C_UnwrapKey(h, &kw, kek, wrapped, olen, unwt, 3, &unwrapped + 0),
			 CKR_WRAPPED_KEY_INVALID);
	/* Both keys digest to the same value: the unwrapped key is the key. */
	{
		CK_BYTE d2[32];
		CK_ULONG dlen = sizeof(digest), dlen2 = sizeof(d2);
		assert_int_equal(f->C_DigestKey(h, aes), CKR_OPERATION_NOT_INITIALIZED);
		assert_int_equal(f->C_DigestInit(h, &sha), CKR_OK);
		assert_int_equal(f->C_DigestKey(h, aes), CKR_OK);
		assert_int_equal(f->C_DigestFinal(h, digest, &dlen), CKR_OK);
		assert_int_equal(f->C_DigestInit(h, &sha), CKR_OK);
		assert_int_equal(f->C_DigestKey(h, unwrapped), CKR_OK);
		assert_int_equal(f->C_DigestFinal(h, d2, &dlen2), CKR_OK);
		assert_memory_equal(digest, d2, 32);
	}
	fini();

	/* The token private key persisted, sealed; its public half was a
	 * session object and is gone. */
	init();
	h = open_rw(0);
	{
		CK_OBJECT_CLASS pc = CKO_PRIVATE_KEY;
		CK_ATTRIBUTE t = { CKA_CLASS, &pc, sizeof(pc) };
		assert_int_equal(find_count(h, &t, 1), 0);
		assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
		assert_int_equal(find_count(h, &t, 1), 1);
	}
	fini();

	n = read_events(r, 200);
	{
		const struct rec *x = find_rec(r, n, "C_GenerateKeyPair", 1);
		assert_non_null(x);
		assert_string_equal(x->outcome, "success");
		assert_string_equal(x->mechanism, "CKM_EC_KEY_PAIR_GEN");
		assert_string_equal(x->key_label, "ec-priv");
		assert_string_equal(x->key_id, "42");
		x = find_rec(r, n, "C_GenerateKeyPair", 0);
		assert_string_equal(x->rv, "CKR_USER_NOT_LOGGED_IN");
		x = find_rec(r, n, "C_Sign", 0);
		assert_string_equal(x->mechanism, "CKM_ECDSA_SHA256");
		assert_string_equal(x->key_label, "ec-priv");
		assert_int_equal(count_rec(r, n, "C_Sign"), 1);      /* query + short buffer: none */
		assert_int_equal(count_rec(r, n, "C_SignFinal"), 1);
		assert_int_equal(count_rec(r, n, "C_Verify"), 3);
		assert_string_equal(find_rec(r, n, "C_Verify", 1)->rv, "CKR_SIGNATURE_INVALID");
		assert_int_equal(count_rec(r, n, "C_SignInit"), 1);  /* the refused public key */
		assert_int_equal(count_rec(r, n, "C_WrapKey"), 2);   /* query: none */
		/* two keys: the wrapping (unwrapping) key, then the wrapped (new) one */
		assert_string_equal(find_rec(r, n, "C_WrapKey", 1)->key_label, "kek");
		assert_string_equal(find_rec(r, n, "C_WrapKey", 1)->key2_label, "gen-aes");
		assert_string_equal(find_rec(r, n, "C_WrapKey", 0)->key_label, "gen-aes");
		assert_string_equal(find_rec(r, n, "C_WrapKey", 0)->key2_label, "kek");
		assert_int_equal(count_rec(r, n, "C_UnwrapKey"), 2);
		assert_string_equal(find_rec(r, n, "C_UnwrapKey", 0)->key_label, "kek");
		assert_string_equal(find_rec(r, n, "C_UnwrapKey", 0)->key2_label, "unwrapped");
		assert_string_equal(find_rec(r, n, "C_UnwrapKey", 1)->key_label, "kek");
		assert_string_equal(find_rec(r, n, "C_UnwrapKey", 1)->key2_label, ""); /* none made */
		assert_int_equal(count_rec(r, n, "C_DigestKey"), 2); /* not for OPERATION_NOT_INITIALIZED */
		assert_int_equal(count_rec(r, n, "C_DigestFinal"), 0);
	}
	assert_audit_verifies();
}

/* C_DeriveKey, C_WrapKey and C_UnwrapKey records name both keys (labels and
 * ids, docs/token.md), and the trail verifies. */
/* C_GenerateKeyPair checks the session, the login and the templates before
 * it makes a pair: a refusal costs no RSA prime search (up to a second) and
 * makes no key. */
static void test_keypair_checked_first(void **state)
{
	CK_SESSION_HANDLE rw, ro;
	CK_OBJECT_HANDLE pub, priv;
	CK_ULONG bits = 2048;
	CK_BBOOL yes = CK_TRUE;
	CK_BYTE ed[] = { 0x13, 0x0c, 'e', 'd', 'w', 'a', 'r', 'd', 's', '2', '5', '5', '1', '9' };
	CK_MECHANISM rsagen = { CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0 };
	CK_MECHANISM edgen = { CKM_EC_EDWARDS_KEY_PAIR_GEN, NULL, 0 };
	CK_MECHANISM nogen = { CKM_AES_KEY_GEN, NULL, 0 };
	CK_ATTRIBUTE pubt[] = { { CKA_MODULUS_BITS, &bits, sizeof(bits) } };
	CK_ATTRIBUTE edt[] = { { CKA_EC_PARAMS, ed, sizeof(ed) } };
	CK_ATTRIBUTE tokt[] = { { CKA_TOKEN, &yes, 1 } };
	CK_ATTRIBUTE badt[] = { { CKA_VALUE_LEN, &bits, sizeof(bits) } };
	unsigned n0;

	init();
	init_token(0, "first");
	rw = open_rw(0);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &ro), CKR_OK);
	n0 = atomic_load(&pkey_generated);
	/* no login: the private key is refused */
	assert_int_equal(f->C_GenerateKeyPair(rw, &rsagen, pubt, 1, NULL, 0, &pub, &priv),
			 CKR_USER_NOT_LOGGED_IN);
	assert_int_equal(f->C_Login(rw, CKU_USER, PIN(USER_PIN)), CKR_OK);
	/* a token object from a read-only session */
	assert_int_equal(f->C_GenerateKeyPair(ro, &rsagen, pubt, 1, tokt, 1, &pub, &priv),
			 CKR_SESSION_READ_ONLY);
	assert_int_equal(f->C_GenerateKeyPair(ro, &edgen, edt, 1, tokt, 1, &pub, &priv),
			 CKR_SESSION_READ_ONLY);
	/* an attribute the class does not have */
	assert_int_equal(f->C_GenerateKeyPair(rw, &rsagen, pubt, 1, badt, 1, &pub, &priv),
			 CKR_ATTRIBUTE_TYPE_INVALID);
	assert_int_equal(f->C_GenerateKeyPair(rw, &nogen, pubt, 1, NULL, 0, &pub, &priv),
			 CKR_MECHANISM_INVALID);
	assert_int_equal(atomic_load(&pkey_generated), n0);
	/* the same calls allowed: each makes one key, which the wrapper sees */
	assert_int_equal(f->C_GenerateKeyPair(ro, &rsagen, pubt, 1, NULL, 0, &pub, &priv), CKR_OK);
	assert_int_equal(atomic_load(&pkey_generated), n0 + 1);
	assert_int_equal(f->C_GenerateKeyPair(rw, &edgen, edt, 1, tokt, 1, &pub, &priv), CKR_OK);
	assert_int_equal(atomic_load(&pkey_generated), n0 + 2);
	fini();
}

static void test_two_key_records(void **state)
{
	static struct rec r[100];
	CK_SESSION_HANDLE h;
	CK_OBJECT_HANDLE pub, priv, derived, kek, unwrapped, bad = 0;
	CK_BYTE p256[] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
	CK_BYTE point[80], wrapped[64];
	CK_BBOOL yes = CK_TRUE;
	CK_ULONG len16 = 16, len32 = 32, olen;
	CK_OBJECT_CLASS sk = CKO_SECRET_KEY;
	CK_KEY_TYPE aes_t = CKK_AES;
	CK_MECHANISM ecgen = { CKM_EC_KEY_PAIR_GEN, NULL, 0 }, aesgen = { CKM_AES_KEY_GEN, NULL, 0 };
	CK_MECHANISM kw = { CKM_AES_KEY_WRAP, NULL, 0 };
	CK_ATTRIBUTE pubt[] = { { CKA_EC_PARAMS, p256, sizeof(p256) } };
	CK_ATTRIBUTE privt[] = { { CKA_LABEL, "ecdh-base", 9 }, { CKA_ID, "\x51", 1 },
				 { CKA_DERIVE, &yes, 1 } };
	CK_ATTRIBUTE dert[] = { { CKA_CLASS, &sk, sizeof(sk) }, { CKA_KEY_TYPE, &aes_t, sizeof(aes_t) },
				{ CKA_VALUE_LEN, &len16, sizeof(len16) }, { CKA_LABEL, "derived-aes", 11 },
				{ CKA_EXTRACTABLE, &yes, 1 }, { CKA_ID, "\x52\x02", 2 } };
	CK_ATTRIBUTE kekt[] = { { CKA_VALUE_LEN, &len32, sizeof(len32) }, { CKA_LABEL, "kek-2", 5 },
				{ CKA_ID, "\x53", 1 } };
	CK_ATTRIBUTE unwt[] = { { CKA_CLASS, &sk, sizeof(sk) }, { CKA_KEY_TYPE, &aes_t, sizeof(aes_t) },
				{ CKA_LABEL, "unwrapped-2", 11 }, { CKA_ID, "\x54", 1 } };
	CK_ATTRIBUTE pt = { CKA_EC_POINT, point, sizeof(point) };
	CK_ECDH1_DERIVE_PARAMS dp = { CKD_NULL, 0, NULL, 0, point };
	CK_MECHANISM ecdh = { CKM_ECDH1_DERIVE, &dp, sizeof(dp) };
	const struct rec *x;
	size_t n;

	(void)state;
	init();
	init_token(0, "two-keys");
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	assert_int_equal(f->C_GenerateKeyPair(h, &ecgen, pubt, 1, privt, 3, &pub, &priv), CKR_OK);
	assert_int_equal(f->C_GetAttributeValue(h, pub, &pt, 1), CKR_OK);
	dp.ulPublicDataLen = pt.ulValueLen;
	/* ECDH with its own public point: a shared secret like any other */
	assert_int_equal(f->C_DeriveKey(h, &ecdh, priv, dert, 6, &derived), CKR_OK);
	assert_int_equal(f->C_DeriveKey(h, &ecdh, priv, dert, 5, &bad), CKR_OK); /* same, no ID */
	dp.ulPublicDataLen = 3; /* not a point: fails, no key made */
	assert_int_equal(f->C_DeriveKey(h, &ecdh, priv, dert, 6, &bad) == CKR_OK, false);
	assert_int_equal(f->C_GenerateKey(h, &aesgen, kekt, 3, &kek), CKR_OK);
	olen = sizeof(wrapped);
	assert_int_equal(f->C_WrapKey(h, &kw, kek, derived, wrapped, &olen), CKR_OK);
	assert_int_equal(f->C_UnwrapKey(h, &kw, kek, wrapped, olen, unwt, 4, &unwrapped), CKR_OK);
	fini();

	n = read_events(r, 100);
	assert_int_equal(count_rec(r, n, "C_DeriveKey"), 3);
	x = find_rec(r, n, "C_DeriveKey", 0);
	assert_string_equal(x->outcome, "success");
	assert_string_equal(x->mechanism, "CKM_ECDH1_DERIVE");
	assert_string_equal(x->key_label, "ecdh-base");
	assert_string_equal(x->key_id, "51");
	assert_string_equal(x->key2_label, "derived-aes");
	assert_string_equal(x->key2_id, "5202");
	x = find_rec(r, n, "C_DeriveKey", 1);
	assert_string_equal(x->key2_label, "derived-aes");
	assert_string_equal(x->key2_id, ""); /* no CKA_ID: absent */
	x = find_rec(r, n, "C_DeriveKey", 2);
	assert_string_equal(x->outcome, "failure");
	assert_string_equal(x->key_label, "ecdh-base");
	assert_string_equal(x->key2_label, "");
	assert_string_equal(x->key2_id, "");
	x = find_rec(r, n, "C_WrapKey", 0);
	assert_string_equal(x->outcome, "success");
	assert_string_equal(x->key_label, "kek-2");
	assert_string_equal(x->key_id, "53");
	assert_string_equal(x->key2_label, "derived-aes");
	assert_string_equal(x->key2_id, "5202");
	x = find_rec(r, n, "C_UnwrapKey", 0);
	assert_string_equal(x->outcome, "success");
	assert_string_equal(x->key_label, "kek-2");
	assert_string_equal(x->key_id, "53");
	assert_string_equal(x->key2_label, "unwrapped-2");
	assert_string_equal(x->key2_id, "54");
	/* one key only: no key2 members */
	x = find_rec(r, n, "C_GenerateKey", 0);
	assert_string_equal(x->key_label, "kek-2");
	assert_string_equal(x->key2_label, "");
	assert_audit_verifies();
}

/* A store file that does not parse is reported, never skipped. */
static void test_corrupt_store(void **state)
{
	char *tj = tu_path(token_dir, "slot0/token.json");
	CK_SESSION_HANDLE h;
	FILE *fp;

	init();
	init_token(0, "corrupt");
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	make_aes(h, "stored", true, true);
	fini();
	/* A sealed object file with one flipped byte: the login says so. */
	{
		char *od = tu_path(token_dir, "slot0/objects"), *obj;
		DIR *d = opendir(od);
		struct dirent *e;
		int fd;
		assert_non_null(d);
		while ((e = readdir(d)) && e->d_name[0] == '.')
			;
		assert_non_null(e);
		obj = tu_path(od, e->d_name);
		closedir(d);
		fd = open(obj, O_RDWR);
		assert_true(fd >= 0);
		/* Flipped, not overwritten: a random byte may be 0xff already. */
		{
			unsigned char byte;
			assert_int_equal(pread(fd, &byte, 1, 60), 1);
			byte ^= 0xff;
			assert_int_equal(pwrite(fd, &byte, 1, 60), 1);
		}
		close(fd);
		free(obj);
		free(od);
	}
	init();
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_GENERAL_ERROR);
	fini();
	/* token.json that is not JSON: C_Initialize refuses. */
	fp = fopen(tj, "w");
	assert_non_null(fp);
	fputs("{\"format\":1,", fp);
	fclose(fp);
	assert_int_equal(f->C_Initialize(NULL), CKR_GENERAL_ERROR);
	free(tj);
}

static CK_OBJECT_HANDLE make_data(CK_SESSION_HANDLE h, const void *label, size_t n)
{
	CK_OBJECT_CLASS cls = CKO_DATA;
	CK_BBOOL yes = CK_TRUE;
	CK_ATTRIBUTE t[] = { { CKA_CLASS, &cls, sizeof(cls) }, { CKA_TOKEN, &yes, 1 },
			     { CKA_LABEL, (void *)label, n } };
	CK_OBJECT_HANDLE o;

	assert_int_equal(f->C_CreateObject(h, t, 3, &o), CKR_OK);
	return o;
}

static char *first_object_file(void)
{
	char *od = tu_path(token_dir, "slot0/objects"), *obj;
	DIR *d = opendir(od);
	struct dirent *e;

	assert_non_null(d);
	while ((e = readdir(d)) && e->d_name[0] == '.')
		;
	assert_non_null(e);
	obj = tu_path(od, e->d_name);
	closedir(d);
	free(od);
	return obj;
}

/* The store's own checks (docs/token.md "Storage"): a plaintext file of a
 * key class, token.json through a symlink, a world-writable token_dir, a
 * symlink at the predictable temporary name, a world-writable store file. */
static void test_store_checks(void **state)
{
	char *tj = tu_path(token_dir, "slot0/token.json"), *elsewhere = tu_path(dir, "token.json.real");
	char *victim = tu_path(dir, "victim"), tmpname[64], *tmp, *obj;
	CK_SESSION_HANDLE h;
	size_t len, vlen;
	uint8_t *b, *v;
	FILE *fp;

	init();
	init_token(0, "checks");
	h = open_rw(0);
	make_data(h, "plain", 5);
	fini();

	/* A plaintext object file turned into a secret key: refused, named. */
	obj = first_object_file();
	b = tu_read_file(obj, &len);
	assert_non_null(b);
	for (size_t off = 44; off + 12 <= len;) {
		uint64_t type = 0;
		uint32_t n = 0;
		memcpy(&type, b + off, 8);
		memcpy(&n, b + off + 8, 4);
		if (type == CKA_CLASS && n == sizeof(CK_ULONG)) {
			CK_ULONG sk = CKO_SECRET_KEY;
			memcpy(b + off + 12, &sk, sizeof(sk));
		}
		off += 12 + n;
	}
	fp = fopen(obj, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(b, 1, len, fp), len);
	fclose(fp);
	assert_int_equal(f->C_Initialize(NULL), CKR_GENERAL_ERROR);
	assert_int_equal(unlink(obj), 0);
	free(obj);
	free(b);

	/* token.json through a symlink: refused. */
	assert_int_equal(rename(tj, elsewhere), 0);
	assert_int_equal(symlink(elsewhere, tj), 0);
	assert_int_equal(f->C_Initialize(NULL), CKR_GENERAL_ERROR);
	assert_int_equal(unlink(tj), 0);
	assert_int_equal(rename(elsewhere, tj), 0);

	/* A world-writable token.json, also in a private directory: refused. */
	assert_int_equal(chmod(tj, 0666), 0);
	assert_int_equal(f->C_Initialize(NULL), CKR_GENERAL_ERROR);
	assert_int_equal(chmod(tj, 0600), 0);

	/* A world-writable token_dir: refused. */
	assert_int_equal(chmod(token_dir, 0777), 0);
	assert_int_equal(f->C_Initialize(NULL), CKR_GENERAL_ERROR);
	assert_int_equal(chmod(token_dir, 02770), 0); /* a group's shared directory is fine */
	init();

	/* A symlink planted at token.json's temporary name: the write (here a
	 * failure count) is refused and the target untouched. */
	fp = fopen(victim, "w");
	assert_non_null(fp);
	fputs("victim", fp);
	fclose(fp);
	snprintf(tmpname, sizeof(tmpname), "slot0/.token.json.tmp.%ld", (long)getpid());
	tmp = tu_path(token_dir, tmpname);
	assert_int_equal(symlink(victim, tmp), 0);
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN("wrong-pin")), CKR_DEVICE_ERROR);
	v = tu_read_file(victim, &vlen);
	assert_non_null(v);
	assert_int_equal(vlen, 6);
	assert_memory_equal(v, "victim", 6);
	free(v);
	assert_int_equal(unlink(tmp), 0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	/* store.lock removed while in use: a new process would lock another
	 * file; writes are refused instead. */
	{
		char *lk = tu_path(token_dir, "slot0/store.lock");
		assert_int_equal(unlink(lk), 0);
		free(lk);
		CK_OBJECT_CLASS cls = CKO_DATA;
		CK_BBOOL yes = CK_TRUE;
		CK_ATTRIBUTE t[] = { { CKA_CLASS, &cls, sizeof(cls) }, { CKA_TOKEN, &yes, 1 } };
		CK_OBJECT_HANDLE o;
		assert_int_equal(f->C_CreateObject(h, t, 2, &o), CKR_DEVICE_ERROR);
	}
	fini();
	free(tmp);
	free(victim);
	free(tj);
	free(elsewhere);
}

/* Every byte value in every text field: the label (32 bytes, as given), the
 * PINs, an object's CKA_LABEL; all read back after a restart, and the trail
 * still verifies. */
static void test_text_fields_every_byte(void **state)
{
	char prev[8] = "";
	/* Every byte in the debug and ASan builds. Under TSan, 512 initialisations
	 * of one thread's token are 70 s of CI and find no race that 32 don't. */
#ifdef __SANITIZE_THREAD__
	const int step = 17; /* 0, 17, .., 255: both ends and 14 between */
#else
	const int step = 1;
#endif

	for (int c = 0; c < 256; c += step) {
		CK_UTF8CHAR lab[32];
		CK_TOKEN_INFO ti;
		CK_SESSION_HANDLE h;
		char so[8] = { 's', 'o', (char)c, 'p', 'i', 'n', (char)c, 0 };
		char us[6] = { (char)c, 'u', 's', 'e', 'r', (char)c };
		char ol[3] = { 'o', (char)c, 'l' };
		CK_ATTRIBUTE q[] = { { CKA_LABEL, ol, sizeof(ol) } };

		memset(lab, ' ', sizeof(lab));
		lab[0] = (CK_UTF8CHAR)c;
		lab[7] = (CK_UTF8CHAR)c;
		lab[31] = (CK_UTF8CHAR)c;
		init();
		/* Re-initialised with the SO PIN of the round before (C_InitToken
		 * keeps it), which C_SetPIN then changes to this round's. */
		assert_int_equal(f->C_InitToken(0, (CK_UTF8CHAR_PTR)(c ? prev : so), 7, lab), CKR_OK);
		h = open_rw(0);
		assert_int_equal(f->C_Login(h, CKU_SO, (CK_UTF8CHAR_PTR)(c ? prev : so), 7), CKR_OK);
		assert_int_equal(f->C_SetPIN(h, (CK_UTF8CHAR_PTR)(c ? prev : so), 7, (CK_UTF8CHAR_PTR)so, 7),
				 CKR_OK);
		memcpy(prev, so, sizeof(prev));
		assert_int_equal(f->C_InitPIN(h, (CK_UTF8CHAR_PTR)us, sizeof(us)), CKR_OK);
		assert_int_equal(f->C_Logout(h), CKR_OK);
		make_data(h, ol, sizeof(ol));
		fini();
		init(); /* everything from disk */
		assert_int_equal(f->C_GetTokenInfo(0, &ti), CKR_OK);
		assert_memory_equal(ti.label, lab, 32);
		h = open_rw(0);
		assert_int_equal(f->C_Login(h, CKU_SO, (CK_UTF8CHAR_PTR)so, 7), CKR_OK);
		assert_int_equal(f->C_Logout(h), CKR_OK);
		assert_int_equal(f->C_Login(h, CKU_USER, (CK_UTF8CHAR_PTR)us, sizeof(us)), CKR_OK);
		assert_int_equal(find_count(h, q, 1), 1);
		fini();
	}
	assert_audit_verifies();
}

/* audit_drop_behind_bytes reaches libauditlog: at 1 MiB the trail's first
 * 8 MiB leave the page cache as it grows past 9 MiB (docs/durability.md; that
 * 0 turns the drops off is test_writer's test_drop_behind). */
static void test_audit_drop_behind(void **state)
{
	const uint64_t mib = 1u << 20, pg = (uint64_t)sysconf(_SC_PAGESIZE);
	char *log = tu_path(audit_dir, "softtoken-0.log");
	CK_SESSION_HANDLE h;
	CK_BYTE buf[16];
	unsigned n = 0;

	if (tu_on_tmpfs(dir)) {
		free(log);
		skip();
	}
	write_conf("audit_drop_behind_bytes = 1048576\n");
	h = user_session("drop");
	while (tu_file_size(log) < 10 * mib) { /* queued records */
		assert_int_equal(f->C_GenerateRandom(h, buf, sizeof(buf)), CKR_OK);
		assert_true(++n < 1000000);
	}
	assert_int_equal(f->C_CloseSession(h), CKR_OK);
	fini();
	assert_int_equal(tu_resident_pages(log, 0, 8 * mib), 0);
	uint64_t end = tu_file_size(log);
	assert_int_equal(tu_resident_pages(log, (end - 1) / pg * pg, pg), 1);
	struct tu_walk w;
	assert_int_equal(tu_walk_file(log, &w, NULL, NULL), 0);
	assert_true(w.events > n);
	free(log);
}

/* The audit directory deleted while the token runs: the next durable record
 * lands in a file with no link; the token fails closed, does not re-create
 * the directory, and the calls that only reduce privilege still succeed,
 * unrecorded, counted in the next trail's first record. */
static void test_audit_dir_deleted(void **state)
{
	CK_SESSION_HANDLE h, h2;
	struct stat st;
	struct rec r[64];
	size_t n;

	init();
	init_token(0, "gone");
	h = open_rw(0);
	h2 = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	tu_rmtree(audit_dir);
	{
		CK_OBJECT_CLASS cls = CKO_DATA;
		CK_ATTRIBUTE t[] = { { CKA_CLASS, &cls, sizeof(cls) } };
		CK_OBJECT_HANDLE o;
		assert_int_equal(f->C_CreateObject(h, t, 1, &o), CKR_DEVICE_ERROR);
	}
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &h), CKR_DEVICE_ERROR);
	assert_int_equal(stat(audit_dir, &st), -1); /* not silently re-created */
	assert_int_equal(f->C_Logout(h), CKR_OK);
	assert_int_equal(f->C_CloseSession(h), CKR_OK);
	assert_int_equal(f->C_CloseAllSessions(0), CKR_OK);
	(void)h2;
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
	init();
	n = read_events(r, 64);
	assert_true(n >= 1);
	assert_string_equal(r[0].action, "C_Initialize");
	assert_string_equal(r[0].detail, "unrecorded_after_fail_closed=4");
	fini();
	n = read_events(r, 64);
	assert_string_equal(r[n - 1].action, "C_Finalize");
	assert_string_equal(r[n - 1].detail, "");
}

/* The log file alone deleted while only queued records are written (no
 * durable record to notice it): libauditlog finds it at the first batch
 * written after the deletion, the log fails closed, and a later queued
 * record answers CKR_DEVICE_ERROR. The file is not made again. */
static void test_audit_file_deleted_queued(void **state)
{
	CK_SESSION_HANDLE h;
	CK_BYTE rnd[16];
	CK_RV rv = CKR_OK;
	struct stat st;
	char *log;
	int i;

	init();
	init_token(0, "gone");
	h = open_rw(0);
	log = tu_path(audit_dir, "softtoken-0.log");
	assert_int_equal(unlink(log), 0);
	/* each call queues a record; one of the first few is refused once the
	 * worker has written one (bounded: 5 s) */
	for (i = 0; i < 5000 && rv == CKR_OK; i++) {
		rv = f->C_GenerateRandom(h, rnd, sizeof(rnd));
		if (rv == CKR_OK)
			usleep(1000);
	}
	assert_int_equal(rv, CKR_DEVICE_ERROR);
	assert_int_equal(stat(log, &st), -1); /* not made again */
	assert_int_equal(f->C_GenerateRandom(h, rnd, sizeof(rnd)), CKR_DEVICE_ERROR);
	assert_int_equal(f->C_CloseSession(h), CKR_OK);
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
	free(log);
}

struct login_then_random {
	CK_SESSION_HANDLE h;
	CK_RV login, random;
};

static void login_then_random(void *ctx)
{
	struct login_then_random *c = ctx;
	CK_BYTE rnd[16];

	c->login = f->C_Login(c->h, CKU_USER, PIN(USER_PIN));
	c->random = f->C_GenerateRandom(c->h, rnd, sizeof(rnd));
}

/* The log truncated under the token (logrotate's copytruncate): the next
 * durable record finds the hole the truncation left before it, the token
 * fails closed and says why on stderr, once; the file is left as it is. */
static void test_audit_file_truncated(void **state)
{
	struct login_then_random c = {0};
	char *tmp = tu_mkdtemp(), *log, *msg;

	init();
	init_token(0, "cut");
	c.h = open_rw(0);
	log = tu_path(audit_dir, "softtoken-0.log");
	assert_int_equal(truncate(log, 0), 0);
	msg = tu_stderr_of(tmp, login_then_random, &c);
	assert_int_equal(c.login, CKR_DEVICE_ERROR);
	assert_int_equal(c.random, CKR_DEVICE_ERROR);
	assert_non_null(strstr(msg, "was truncated while the token ran"));
	assert_null(strstr(strstr(msg, "truncated") + 1, "truncated while")); /* once */
	assert_true(tu_file_size(log) > 0); /* the batch that found it, over a hole */
	assert_int_equal(f->C_CloseSession(c.h), CKR_OK);
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
	free(msg);
	free(log);
	tu_rmtree(tmp);
	free(tmp);
}

/* A secret handed out while the overall rv is an error is recorded as what
 * it is: outcome success, the attribute named. */
static void test_secret_out_with_error_rv(void **state)
{
	CK_SESSION_HANDLE h;
	CK_OBJECT_HANDLE k;
	CK_BYTE val[32], small[1];
	CK_ATTRIBUTE t1[] = { { CKA_VALUE, val, sizeof(val) }, { CKA_MODULUS, NULL, 0 } };
	CK_ATTRIBUTE t2[] = { { CKA_VALUE, val, sizeof(val) }, { CKA_LABEL, small, sizeof(small) } };
	struct rec r[64];
	size_t n;

	init();
	init_token(0, "partial");
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	k = make_aes(h, "extractable", false, false);
	assert_int_equal(f->C_GetAttributeValue(h, k, t1, 2), CKR_ATTRIBUTE_TYPE_INVALID);
	assert_int_equal(t1[0].ulValueLen, 32);
	assert_int_equal(f->C_GetAttributeValue(h, k, t2, 2), CKR_BUFFER_TOO_SMALL);
	assert_int_equal(t2[0].ulValueLen, 32);
	fini();
	n = read_events(r, 64);
	assert_int_equal(count_rec(r, n, "C_GetAttributeValue"), 2);
	for (size_t i = 0; i < 2; i++) {
		const struct rec *g = find_rec(r, n, "C_GetAttributeValue", i);
		assert_string_equal(g->outcome, "success");
		assert_string_equal(g->detail, "CKA_VALUE");
		assert_string_equal(g->rv, i == 0 ? "CKR_ATTRIBUTE_TYPE_INVALID" : "CKR_BUFFER_TOO_SMALL");
	}
}

/* A session P-256 pair's CKA_EC_POINT into pt (its length returned). */
static CK_ULONG ec_point_of_new_pair(CK_SESSION_HANDLE h, CK_BYTE *pt, CK_ULONG cap)
{
	static const CK_BYTE oid[] = { 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07 };
	CK_MECHANISM m = { CKM_EC_KEY_PAIR_GEN, NULL, 0 };
	CK_ATTRIBUTE pubt[] = { { CKA_EC_PARAMS, (CK_VOID_PTR)oid, sizeof(oid) } };
	CK_ATTRIBUTE get = { CKA_EC_POINT, pt, cap };
	CK_OBJECT_HANDLE pub, priv;

	if (f->C_GenerateKeyPair(h, &m, pubt, 1, NULL, 0, &pub, &priv) != CKR_OK ||
	    f->C_GetAttributeValue(h, pub, &get, 1) != CKR_OK)
		return 0;
	return get.ulValueLen;
}

/* A new extractable AES-256 key's value into v, its length (0: failed),
 * from session h. */
static CK_ULONG aes_value_of_new_key(CK_SESSION_HANDLE h, CK_BYTE *v, CK_ULONG cap)
{
	CK_MECHANISM m = { CKM_AES_KEY_GEN, NULL, 0 };
	CK_ULONG len = 32;
	CK_BBOOL no = CK_FALSE, yes = CK_TRUE;
	CK_ATTRIBUTE t[] = { { CKA_VALUE_LEN, &len, sizeof(len) },
			     { CKA_SENSITIVE, &no, sizeof(no) },
			     { CKA_EXTRACTABLE, &yes, sizeof(yes) } };
	CK_ATTRIBUTE get = { CKA_VALUE, v, cap };
	CK_OBJECT_HANDLE k;

	if (f->C_GenerateKey(h, &m, t, 3, &k) != CKR_OK || f->C_GetAttributeValue(h, k, &get, 1) != CKR_OK)
		return 0;
	return get.ulValueLen;
}

/* An application that exits without C_Finalize: the destructor drains the
 * queue and says so in the last record. */
static void test_exit_without_finalize(void **state)
{
	static struct rec r[200];
	size_t n;
	pid_t pid;
	int st;

	init();
	init_token(0, "exit");
	fini();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		CK_SESSION_HANDLE h;
		CK_BYTE rnd[8], pt[80];
		if (f->C_Initialize(NULL) != CKR_OK ||
		    f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &h) != CKR_OK)
			_exit(1);
		for (int i = 0; i < 100; i++)
			if (f->C_GenerateRandom(h, rnd, sizeof(rnd)) != CKR_OK) /* queued records */
				_exit(1);
		/* an EC pair starts the helper that makes the next (keyahead.c):
		 * it stops before OpenSSL's exit handler, so the exit is clean */
		if (f->C_Login(h, CKU_USER, PIN(USER_PIN)) != CKR_OK || !ec_point_of_new_pair(h, pt, sizeof(pt)))
			_exit(1);
		exit(0); /* no C_Finalize */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	n = read_events(r, 200);
	assert_int_equal(count_rec(r, n, "C_GenerateRandom"), 100);
	assert_string_equal(r[n - 1].action, "C_Finalize");
	assert_string_equal(r[n - 1].detail, "process exit without C_Finalize");
	assert_audit_verifies();
}

/* A child forked after C_Initialize: it initialises again and writes its
 * own chain; the parent goes on with its sessions and its chain. (Not in
 * the TSan build: TSan cannot start threads in the child of a threaded
 * process.) */
static __attribute__((unused)) void test_fork_child(void **state)
{
	CK_SESSION_HANDLE h;
	CK_BYTE rnd[8];
	pid_t pid;
	int st;

	init();
	init_token(0, "fork");
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		CK_SESSION_HANDLE c;
		CK_BYTE b[8];
		if (f->C_GenerateRandom(h, b, sizeof(b)) != CKR_CRYPTOKI_NOT_INITIALIZED ||
		    f->C_Initialize(NULL) != CKR_OK ||
		    f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &c) != CKR_OK ||
		    f->C_Login(c, CKU_USER, PIN(USER_PIN)) != CKR_OK ||
		    f->C_GenerateRandom(c, b, sizeof(b)) != CKR_OK || f->C_Finalize(NULL) != CKR_OK)
			_exit(1);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(f->C_GenerateRandom(h, rnd, sizeof(rnd)), CKR_OK);
	fini();
	assert_two_chains_verify();
}

static int threads_named(const char *name);

/* audit_worker_cpus reaches libauditlog: the trail's worker thread may run
 * on that CPU only (that its io_uring threads follow is test_writer's
 * test_worker_cpus). */
static void test_audit_worker_cpus(void **state)
{
	cpu_set_t mine;
	char line[64], want[16] = "";
	bool all;

	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &mine))
			snprintf(want, sizeof(want), "%d", c);
	snprintf(line, sizeof(line), "audit_worker_cpus = %s\n", want);
	write_conf(line);
	init();
	assert_int_equal(tu_threads_on("auditlog-worker", want, &all), 1);
	assert_true(all);
	fini();

	/* a CPU this process may not run on: the trail cannot start, and
	 * neither does the token (its trail is required) */
	for (int c = CPU_SETSIZE - 1; c >= 0; c--)
		if (!CPU_ISSET(c, &mine)) {
			snprintf(line, sizeof(line), "audit_worker_cpus = %d\n", c);
			break;
		}
	write_conf(line);
	assert_int_not_equal(f->C_Initialize(NULL), CKR_OK);
	assert_int_equal(threads_named("auditlog-worker"), 0);
}

/* Threads of this process named name (their /proc comm). */
static int threads_named(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char p[300], comm[32] = "";
		FILE *fp;
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", e->d_name);
		if (!(fp = fopen(p, "r")))
			continue; /* ended meanwhile */
		if (fgets(comm, sizeof(comm), fp) && !strncmp(comm, name, strlen(name)) &&
		    comm[strlen(name)] == '\n')
			n++;
		fclose(fp);
	}
	closedir(d);
	return n;
}

/* keygen_ahead: the helper starts at the first EC pair, not before; off,
 * no helper ever starts, and pairs are still made. */
static void test_keygen_ahead_thread(void **state)
{
	CK_BYTE pt[80], k1[32], k2[32];
	CK_SESSION_HANDLE h;

	for (int on = 1; on >= 0; on--) {
		write_conf(on ? NULL : "keygen_ahead = false\n");
		init();
		if (on)
			init_token(0, "ahead");
		h = open_rw(0);
		assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
		assert_int_equal(threads_named("softtoken-keys"), 0);
		for (int i = 0; i < 3; i++)
			assert_int_equal(ec_point_of_new_pair(h, pt, sizeof(pt)), 67);
		/* secret keys, from the pool drawn ahead or each for itself */
		assert_int_equal(aes_value_of_new_key(h, k1, sizeof(k1)), 32);
		assert_int_equal(aes_value_of_new_key(h, k2, sizeof(k2)), 32);
		assert_memory_not_equal(k1, k2, sizeof(k1));
		/* a thread names itself once it runs, and this one runs at
		 * SCHED_IDLE: on a busy machine that can take a while */
		usleep(20 * 1000);
		for (int i = 0; on && i < 500 && threads_named("softtoken-keys") == 0; i++)
			usleep(10 * 1000);
		assert_int_equal(threads_named("softtoken-keys"), on);
		fini();
		assert_int_equal(threads_named("softtoken-keys"), 0); /* joined at C_Finalize */
	}
	write_conf(NULL);
	assert_audit_verifies();
}

/* What a key made ahead must never be: a child forked while the parent holds
 * some (made by make, of want bytes; settle: ms for the helper to make them)
 * never gets one. The parent's next keys (8: the EC stack's depth,
 * keyahead.c) all differ from the child's first.
 * (Not in the TSan build, as test_fork_child.) */
static __attribute__((unused)) void fork_keys_differ(const char *label,
						     CK_ULONG (*make)(CK_SESSION_HANDLE, CK_BYTE *, CK_ULONG),
						     CK_ULONG want, unsigned settle)
{
	CK_BYTE first[80], mine[80], theirs[80];
	CK_ULONG nc = 0;
	CK_SESSION_HANDLE h;
	int p[2], st;
	pid_t pid;

	h = user_session(label);
	assert_int_equal(make(h, first, sizeof(first)), want);
	usleep(settle * 1000);
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		CK_SESSION_HANDLE c;
		CK_ULONG n;
		if (f->C_Initialize(NULL) != CKR_OK ||
		    f->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &c) != CKR_OK ||
		    f->C_Login(c, CKU_USER, PIN(USER_PIN)) != CKR_OK)
			_exit(1);
		n = make(c, mine, sizeof(mine));
		if (!n || write(p[1], &n, sizeof(n)) != sizeof(n) || write(p[1], mine, n) != (ssize_t)n)
			_exit(1);
		_exit(f->C_Finalize(NULL) == CKR_OK ? 0 : 1);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &nc, sizeof(nc)), sizeof(nc));
	assert_int_equal(nc, want);
	assert_int_equal(read(p[0], theirs, nc), (ssize_t)nc);
	close(p[0]);
	/* the parent's next keys: as many as it holds made ahead of a kind */
	for (int i = 0; i < 8; i++) {
		assert_int_equal(make(h, mine, sizeof(mine)), want);
		assert_memory_not_equal(mine, theirs, want);
		assert_memory_not_equal(mine, first, want);
	}
	assert_memory_not_equal(first, theirs, want);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	fini();
	assert_two_chains_verify();
}

/* The EC pair made ahead by the helper (keyahead.c). */
static __attribute__((unused)) void test_fork_keys_ahead(void **state)
{
	fork_keys_differ("ahead", ec_point_of_new_pair, 67, 100);
}

/* Secret key bytes drawn ahead (keyahead.c): the parent's next keys' bytes
 * are in its memory when it forks; without the wipe the child's first key
 * would be the parent's next. */
static __attribute__((unused)) void test_fork_secret_ahead(void **state)
{
	fork_keys_differ("secret", aes_value_of_new_key, 32, 0);
}

/* A session RSA-2048 pair made on h: CKR_OK or what the call returned. */
static CK_RV rsa_pair(CK_SESSION_HANDLE h)
{
	CK_MECHANISM m = { CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0 };
	CK_ULONG bits = 2048;
	CK_ATTRIBUTE pubt[] = { { CKA_MODULUS_BITS, &bits, sizeof(bits) } };
	CK_OBJECT_HANDLE pub, priv;

	return f->C_GenerateKeyPair(h, &m, pubt, 1, NULL, 0, &pub, &priv);
}

struct rsa_loop {
	CK_SESSION_HANDLE h;
	atomic_bool stop;
	atomic_int made;
	_Atomic CK_RV rv; /* read by the test while the thread runs */
};

static void *rsa_loop(void *arg)
{
	struct rsa_loop *r = arg;

	while (!atomic_load(&r->stop) && (r->rv = rsa_pair(r->h)) == CKR_OK)
		atomic_fetch_add(&r->made, 1);
	return NULL;
}

/* A child forked while another thread of its parent is inside an RSA key
 * generation, holding the generation context the token keeps (keys.c
 * rsa_gen; the thread holds it for all but ~0.3 % of each call): the child
 * makes its own pair and finalizes without waiting for the parent's lock,
 * which no thread of the child will ever release. A child that hangs is
 * killed by its alarm. (Not in the TSan build, as test_fork_child; nor in
 * the ASan build: GCC 12's ASan allocator takes no lock at fork, so a child
 * forked while the other thread is inside malloc can block on that thread's
 * allocator lock for good, as seen on 2026-12-05 with gdb in
 * SizeClassAllocator64::GetFromAllocator; glibc's malloc locks its arenas
 * around fork, so the debug build runs it on the real allocator.) */
static __attribute__((unused)) void test_fork_rsa_generating(void **state)
{
	struct rsa_loop r = { .h = user_session("rsafork") };
	pthread_t t;
	pid_t pid;
	int st;

	assert_int_equal(pthread_create(&t, NULL, rsa_loop, &r), 0);
	for (int i = 0; i < 3000 && atomic_load(&r.made) < 1 && r.rv == CKR_OK; i++)
		usleep(10 * 1000);
	assert_true(atomic_load(&r.made) >= 1); /* the context is kept; the thread is in its next call */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		CK_SESSION_HANDLE c;
		alarm(60);
		if (f->C_Initialize(NULL) != CKR_OK ||
		    f->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &c) != CKR_OK ||
		    f->C_Login(c, CKU_USER, PIN(USER_PIN)) != CKR_OK || rsa_pair(c) != CKR_OK)
			_exit(1);
		_exit(f->C_Finalize(NULL) == CKR_OK ? 0 : 2);
	}
	atomic_store(&r.stop, true);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(r.rv, CKR_OK);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_false(WIFSIGNALED(st)); /* SIGALRM: the child waited on its parent's lock */
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	fini();
	assert_two_chains_verify();
}

/* Two processes at once: each writes its own chain; the directory verifies. */
static void test_two_processes(void **state)
{
	int to_child[2], to_parent[2];
	char c = 0;
	pid_t pid;
	int st;

	init();
	init_token(0, "procs");
	fini();
	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(to_parent), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		CK_SESSION_HANDLE h;
		if (f->C_Initialize(NULL) != CKR_OK ||
		    f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &h) != CKR_OK)
			_exit(1);
		if (write(to_parent[1], "r", 1) != 1 || read(to_child[0], &c, 1) != 1)
			_exit(1);
		_exit(f->C_Finalize(NULL) == CKR_OK ? 0 : 1);
	}
	assert_int_equal(read(to_parent[0], &c, 1), 1); /* the child holds softtoken-0.log */
	init();
	{
		CK_SESSION_HANDLE h = open_rw(0);
		assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	}
	fini();
	assert_int_equal(write(to_child[1], "g", 1), 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	{
		char *p1 = tu_path(audit_dir, "softtoken-1.log");
		size_t len;
		uint8_t *b = tu_read_file(p1, &len);
		assert_non_null(b); /* the parent's chain */
		assert_non_null(memmem(b, len, "\"C_Login\"", 9));
		free(b);
		free(p1);
	}
	assert_two_chains_verify();
	close(to_child[0]);
	close(to_child[1]);
	close(to_parent[0]);
	close(to_parent[1]);
}

/* Many threads, one session each: every operation succeeds and leaves
 * exactly one record. */
struct worker {
	CK_OBJECT_HANDLE key;
	int ops;
	CK_RV rv;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	CK_SESSION_HANDLE h;
	CK_BYTE iv[12] = { 0 }, in[256] = { 0 }, out[512];
	CK_GCM_PARAMS gp = { iv, sizeof(iv), 96, NULL, 0, 128 };
	CK_MECHANISM m = { CKM_AES_GCM, &gp, sizeof(gp) };

	w->rv = f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &h);
	for (int i = 0; w->rv == CKR_OK && i < w->ops; i++) {
		CK_ULONG olen = sizeof(out);
		iv[0] = (CK_BYTE)i;
		w->rv = f->C_EncryptInit(h, &m, w->key);
		if (w->rv == CKR_OK)
			w->rv = f->C_Encrypt(h, in, sizeof(in), out, &olen);
		if (w->rv == CKR_OK && olen != sizeof(in) + 16)
			w->rv = CKR_GENERAL_ERROR;
	}
	if (w->rv == CKR_OK)
		w->rv = f->C_CloseSession(h);
	return NULL;
}

static void test_threads(void **state)
{
	static struct rec r[2000];
	struct worker w[4];
	pthread_t th[4];
	CK_SESSION_HANDLE h;
	CK_OBJECT_HANDLE k;
	size_t n;

	init();
	init_token(0, "threads");
	h = open_rw(0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	k = make_aes(h, "shared-key", false, true);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .key = k, .ops = 250 };
		assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(w[i].rv, CKR_OK);
	}
	fini();
	n = read_events(r, 2000);
	assert_int_equal(count_rec(r, n, "C_Encrypt"), 1000);
	assert_audit_verifies();
}

/* Threads making secret keys at once, in their own sessions: they share the
 * bytes drawn ahead (keyahead.c), which are refilled under them several times
 * (64 keys a fill); every key is different, and each has its record. */
#define KG_THREADS 4
#define KG_KEYS 48
struct keymaker {
	CK_BYTE v[KG_KEYS][32];
	CK_RV rv;
};

static void *make_keys(void *arg)
{
	struct keymaker *m = arg;
	CK_SESSION_HANDLE h;

	m->rv = f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &h);
	for (int i = 0; m->rv == CKR_OK && i < KG_KEYS; i++)
		if (aes_value_of_new_key(h, m->v[i], sizeof(m->v[i])) != 32)
			m->rv = CKR_GENERAL_ERROR;
	if (m->rv == CKR_OK)
		m->rv = f->C_CloseSession(h);
	return NULL;
}

static int cmp_key(const void *a, const void *b)
{
	return memcmp(a, b, 32);
}

static void test_threads_keygen(void **state)
{
	static struct keymaker m[KG_THREADS];
	static struct rec r[1000];
	static CK_BYTE all[KG_THREADS * KG_KEYS][32];
	pthread_t th[KG_THREADS];
	size_t n;

	(void)user_session("keygen"); /* the login is the token's: every session has it */
	for (int i = 0; i < KG_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, make_keys, &m[i]), 0);
	for (int i = 0; i < KG_THREADS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(m[i].rv, CKR_OK);
		memcpy(all[i * KG_KEYS], m[i].v, sizeof(m[i].v));
	}
	qsort(all, KG_THREADS * KG_KEYS, 32, cmp_key);
	for (int i = 1; i < KG_THREADS * KG_KEYS; i++)
		assert_memory_not_equal(all[i - 1], all[i], 32);
	fini();
	n = read_events(r, 1000);
	assert_int_equal(count_rec(r, n, "C_GenerateKey"), KG_THREADS * KG_KEYS);
	assert_audit_verifies();
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_initialize_args, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_config, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slots_and_token_init, setup, teardown),
		cmocka_unit_test_setup_teardown(test_login_states, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_lockout_and_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_objects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_find_many, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_operation_rules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fail_closed_on_tamper, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fail_closed_on_damaged_tail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keypair_checked_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_key_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_checks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_text_fields_every_byte, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_dir_deleted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_file_deleted_queued, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_file_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_drop_behind, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit_worker_cpus, setup, teardown),
		cmocka_unit_test_setup_teardown(test_secret_out_with_error_rv, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exit_without_finalize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_processes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keygen_ahead_thread, setup, teardown),
#ifndef __SANITIZE_THREAD__
		cmocka_unit_test_setup_teardown(test_fork_child, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_keys_ahead, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fork_secret_ahead, setup, teardown),
#ifndef __SANITIZE_ADDRESS__
		cmocka_unit_test_setup_teardown(test_fork_rsa_generating, setup, teardown),
#endif
#endif
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads_keygen, setup, teardown),
	};

	module_path = argc > 1 ? argv[1] : getenv("SOFTTOKEN_MODULE");
	if (!module_path) {
		fprintf(stderr, "usage: test_token MODULE (or $SOFTTOKEN_MODULE)\n");
		return 2;
	}
	if (!(dl = tu_p11_load(module_path, &f)))
		return 1;
	/* Only the two entry points leave the module. */
	if (!dlsym(dl, "C_GetInterfaceList") || dlsym(dl, "C_Initialize") || dlsym(dl, "auditlog_open")) {
		fprintf(stderr, "the module exports more (or less) than its two entry points\n");
		return 1;
	}
	/* PKCS#11 3.0 discovery: one interface, "PKCS 11", our function list. */
	{
		struct { CK_UTF8CHAR *name; void *fl; CK_FLAGS flags; } ifs[2];
		CK_RV (*getif)(void *, CK_ULONG *) = (CK_RV (*)(void *, CK_ULONG *))dlsym(dl, "C_GetInterfaceList");
		CK_ULONG n = 0;
		if (getif(NULL, &n) != CKR_OK || n != 1 || getif(ifs, &n) != CKR_OK ||
		    strcmp((const char *)ifs[0].name, "PKCS 11") != 0 || ifs[0].fl != f) {
			fprintf(stderr, "C_GetInterfaceList does not offer \"PKCS 11\" with our list\n");
			return 1;
		}
	}
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
