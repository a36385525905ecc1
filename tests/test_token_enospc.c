/* SPDX-License-Identifier: MIT */
/*
 * The token fails closed on a real full disk: its audit directory on a small
 * tmpfs in a private mount namespace (root only; exit 77 without it). Once
 * the trail cannot take a record, the call that saw it and every later
 * audited call answer CKR_DEVICE_ERROR and do nothing; queries still answer;
 * after a restart with space the trail continues and verifies.
 *
 * argv[1] (or $SOFTTOKEN_MODULE) is the module to load.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <p11-kit/pkcs11.h>

#include "tu.h"
#include "tu_p11.h"
#include "verify.h"

static CK_FUNCTION_LIST *f;
static char *dir, *mnt;

#define SO_PIN "so-secret-1234"
#define USER_PIN "user-secret-5678"
#define PIN(s) (CK_UTF8CHAR_PTR)(s), (CK_ULONG)strlen(s)

static int fill(const char *path)
{
	static char buf[4096];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t n;

	if (fd < 0)
		return -errno;
	do
		n = write(fd, buf, sizeof(buf));
	while (n > 0);
	n = n < 0 ? -errno : 0;
	close(fd);
	return n == -ENOSPC ? 0 : -EIO;
}

static void test_full_disk(void **state)
{
	char *conf = tu_path(dir, "softtoken.conf"), *filler = tu_path(mnt, "filler");
	CK_UTF8CHAR lab[32];
	CK_SESSION_HANDLE h, h2;
	CK_TOKEN_INFO ti;
	CK_BYTE rnd[8];
	FILE *fp = fopen(conf, "w");

	assert_non_null(fp);
	fprintf(fp, "token_dir = %s/tokens\naudit_dir = %s/audit\npbkdf2_iterations = 1000\n"
		    "audit_enospc_deadline_ms = 0\n", dir, mnt);
	fclose(fp);
	setenv("SOFTTOKEN_CONF", conf, 1);

	assert_int_equal(f->C_Initialize(NULL), CKR_OK);
	memset(lab, ' ', sizeof(lab));
	assert_int_equal(f->C_InitToken(0, PIN(SO_PIN), lab), CKR_OK);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h), CKR_OK);
	assert_int_equal(f->C_Login(h, CKU_SO, PIN(SO_PIN)), CKR_OK);
	assert_int_equal(f->C_InitPIN(h, PIN(USER_PIN)), CKR_OK);
	assert_int_equal(f->C_Logout(h), CKR_OK);

	assert_int_equal(fill(filler), 0);
	/* The log's last page may still have room for a few records: log in
	 * and out until a record cannot be written. That login does not
	 * happen. */
	{
		CK_RV rv = CKR_OK;
		int i;
		for (i = 0; i < 200 && rv == CKR_OK; i++) {
			rv = f->C_Login(h, CKU_USER, PIN(USER_PIN));
			if (rv == CKR_OK)
				rv = f->C_Logout(h);
		}
		assert_int_equal(rv, CKR_DEVICE_ERROR);
		assert_true(i > 0 && i < 200);
	}
	{
		CK_SESSION_INFO si;
		assert_int_equal(f->C_GetSessionInfo(h, &si), CKR_OK);
		assert_int_equal(si.state, CKS_RW_PUBLIC_SESSION);
	}
	/* Sticky, even with space again: every audited call, none does anything. */
	assert_int_equal(unlink(filler), 0);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_DEVICE_ERROR);
	assert_int_equal(f->C_GenerateRandom(h, rnd, sizeof(rnd)), CKR_DEVICE_ERROR);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &h2), CKR_DEVICE_ERROR);
	assert_int_equal(f->C_GetTokenInfo(0, &ti), CKR_OK); /* not audited: answers */
	/* Only reduces privilege: succeeds unrecorded after fail-closed (DESIGN.md). */
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);

	/* A restart with space: the chain continues and verifies. */
	assert_int_equal(f->C_Initialize(NULL), CKR_OK);
	assert_int_equal(f->C_OpenSession(0, CKF_SERIAL_SESSION, NULL, NULL, &h), CKR_OK);
	assert_int_equal(f->C_Login(h, CKU_USER, PIN(USER_PIN)), CKR_OK);
	assert_int_equal(f->C_Finalize(NULL), CKR_OK);
	{
		char *audit = tu_path(mnt, "audit"), **paths = NULL;
		unsigned n = 0, cap = 0;
		struct al_vopts o = { 0 };
		struct al_vresult res = { 0 };
		assert_int_equal(al_verify_add_path(audit, &paths, &n, &cap), 0);
		assert_int_equal(al_verify_files(paths, n, &o, &res), 0);
		for (int c = 0; c < AL_V__MAX; c++)
			if (al_vclass_is_integrity(c, false) && res.findings[c])
				fail_msg("audit finding %s", al_vclass_name(c));
		al_vresult_free(&res);
		for (unsigned i = 0; i < n; i++)
			free(paths[i]);
		free(paths);
		free(audit);
	}
	free(conf);
	free(filler);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_full_disk) };
	const char *module = argc > 1 ? argv[1] : getenv("SOFTTOKEN_MODULE");
	int r;

	if (!module) {
		fprintf(stderr, "usage: test_token_enospc MODULE\n");
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "test_token_enospc: SKIP: needs root to mount a small tmpfs\n");
		return 77;
	}
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		fprintf(stderr, "test_token_enospc: SKIP: no private mount namespace: %s\n", strerror(errno));
		return 77;
	}
	dir = tu_mkdtemp();
	mnt = tu_path(dir, "mnt");
	if (mkdir(mnt, 0700) < 0 || mount("softtoken-enospc", mnt, "tmpfs", 0, "size=256k,mode=0700") < 0) {
		fprintf(stderr, "test_token_enospc: mount tmpfs: %s\n", strerror(errno));
		return 1;
	}
	if (!tu_p11_load(module, &f))
		return 1;
	r = cmocka_run_group_tests(tests, NULL, NULL);
	umount2(mnt, MNT_DETACH);
	tu_rmtree(dir);
	free(mnt);
	free(dir);
	return r;
}
