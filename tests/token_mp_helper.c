/* SPDX-License-Identifier: MIT */
/*
 * One application process for tests/test_token_mp.c: dlopens the module
 * (argv[1]) and runs the commands it reads on stdin, one a line, answering
 * each with one line "<rv> [values]" on stdout, so that a test can drive
 * several real processes against one token in an order it chooses.
 *
 *   init | fini | open | logout | quit
 *   inittoken SOPIN LABEL          C_InitToken (label blank padded)
 *   login u|so PIN [LEN]           C_Login (LEN: ulPinLen, default strlen)
 *   setpin OLD NEW [OLDLEN]        C_SetPIN
 *   initpin PIN                    C_InitPIN
 *   flags                          C_GetTokenInfo -> "<rv> <flags hex>"
 *   gen LABEL                      an AES-128 token key, extractable, not
 *                                  sensitive -> "<rv> <handle>"
 *   find LABEL                     -> "<rv> <count> <first handle>"
 *   setlabel H LABEL               C_SetAttributeValue(CKA_LABEL)
 *   setbool H extractable|sensitive 0|1
 *   getbool H extractable|sensitive -> "<rv> <0|1>"
 *   destroy H
 *   use H                          C_EncryptInit(CKM_AES_ECB, H) + C_Encrypt
 *                                  of 16 bytes
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <p11-kit/pkcs11.h>

#include "tu_p11.h"

static CK_FUNCTION_LIST *f;
static CK_SESSION_HANDLE sess;

static CK_ATTRIBUTE_TYPE attr_of(const char *name)
{
	return !strcmp(name, "extractable") ? CKA_EXTRACTABLE : CKA_SENSITIVE;
}

static void run(char *line)
{
	char *argv[8] = { 0 }, *save = NULL;
	int argc = 0;
	CK_RV rv = CKR_FUNCTION_FAILED;
	char extra[64] = "";

	for (char *w = strtok_r(line, " \n", &save); w && argc < 8; w = strtok_r(NULL, " \n", &save))
		argv[argc++] = w;
	if (argc == 0)
		return;
#define ARG(i) (argc > (i) ? argv[i] : "")
#define LEN(s) (CK_UTF8CHAR_PTR)(s), (CK_ULONG)strlen(s)
	if (!strcmp(argv[0], "init")) {
		rv = f->C_Initialize(NULL);
	} else if (!strcmp(argv[0], "fini")) {
		rv = f->C_Finalize(NULL);
	} else if (!strcmp(argv[0], "quit")) {
		exit(0);
	} else if (!strcmp(argv[0], "open")) {
		rv = f->C_OpenSession(0, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &sess);
	} else if (!strcmp(argv[0], "logout")) {
		rv = f->C_Logout(sess);
	} else if (!strcmp(argv[0], "inittoken")) {
		CK_UTF8CHAR lab[32];
		memset(lab, ' ', sizeof(lab));
		memcpy(lab, ARG(2), strlen(ARG(2)) < 32 ? strlen(ARG(2)) : 32);
		rv = f->C_InitToken(0, LEN(ARG(1)), lab);
	} else if (!strcmp(argv[0], "login")) {
		CK_ULONG n = argc > 3 ? (CK_ULONG)strtoull(argv[3], NULL, 0) : strlen(ARG(2));
		rv = f->C_Login(sess, !strcmp(ARG(1), "so") ? CKU_SO : CKU_USER, (CK_UTF8CHAR_PTR)ARG(2), n);
	} else if (!strcmp(argv[0], "setpin")) {
		CK_ULONG n = argc > 3 ? (CK_ULONG)strtoull(argv[3], NULL, 0) : strlen(ARG(1));
		rv = f->C_SetPIN(sess, (CK_UTF8CHAR_PTR)ARG(1), n, LEN(ARG(2)));
	} else if (!strcmp(argv[0], "initpin")) {
		rv = f->C_InitPIN(sess, LEN(ARG(1)));
	} else if (!strcmp(argv[0], "flags")) {
		CK_TOKEN_INFO ti;
		rv = f->C_GetTokenInfo(0, &ti);
		snprintf(extra, sizeof(extra), " 0x%lx", (unsigned long)ti.flags);
	} else if (!strcmp(argv[0], "gen")) {
		CK_BBOOL yes = CK_TRUE, no = CK_FALSE;
		CK_ULONG len = 16;
		CK_MECHANISM m = { CKM_AES_KEY_GEN, NULL, 0 };
		CK_OBJECT_HANDLE k = 0;
		CK_ATTRIBUTE t[] = {
			{ CKA_TOKEN, &yes, 1 }, { CKA_EXTRACTABLE, &yes, 1 }, { CKA_SENSITIVE, &no, 1 },
			{ CKA_VALUE_LEN, &len, sizeof(len) }, { CKA_LABEL, ARG(1), strlen(ARG(1)) },
		};
		rv = f->C_GenerateKey(sess, &m, t, 5, &k);
		snprintf(extra, sizeof(extra), " %lu", (unsigned long)k);
	} else if (!strcmp(argv[0], "find")) {
		CK_ATTRIBUTE t[] = { { CKA_LABEL, ARG(1), strlen(ARG(1)) } };
		CK_OBJECT_HANDLE hs[8] = { 0 };
		CK_ULONG n = 0;
		rv = f->C_FindObjectsInit(sess, t, 1);
		if (rv == CKR_OK)
			rv = f->C_FindObjects(sess, hs, 8, &n);
		if (rv == CKR_OK)
			rv = f->C_FindObjectsFinal(sess);
		snprintf(extra, sizeof(extra), " %lu %lu", (unsigned long)n, (unsigned long)hs[0]);
	} else if (!strcmp(argv[0], "setlabel")) {
		CK_ATTRIBUTE t[] = { { CKA_LABEL, ARG(2), strlen(ARG(2)) } };
		rv = f->C_SetAttributeValue(sess, strtoul(ARG(1), NULL, 0), t, 1);
	} else if (!strcmp(argv[0], "setbool")) {
		CK_BBOOL b = ARG(3)[0] == '1' ? CK_TRUE : CK_FALSE;
		CK_ATTRIBUTE t[] = { { attr_of(ARG(2)), &b, 1 } };
		rv = f->C_SetAttributeValue(sess, strtoul(ARG(1), NULL, 0), t, 1);
	} else if (!strcmp(argv[0], "getbool")) {
		CK_BBOOL b = 2;
		CK_ATTRIBUTE t[] = { { attr_of(ARG(2)), &b, 1 } };
		rv = f->C_GetAttributeValue(sess, strtoul(ARG(1), NULL, 0), t, 1);
		snprintf(extra, sizeof(extra), " %d", b);
	} else if (!strcmp(argv[0], "use")) {
		CK_MECHANISM m = { CKM_AES_ECB, NULL, 0 };
		CK_BYTE in[16] = { 0 }, out[16];
		CK_ULONG n = sizeof(out);
		rv = f->C_EncryptInit(sess, &m, strtoul(ARG(1), NULL, 0));
		if (rv == CKR_OK)
			rv = f->C_Encrypt(sess, in, sizeof(in), out, &n);
	} else if (!strcmp(argv[0], "destroy")) {
		rv = f->C_DestroyObject(sess, strtoul(ARG(1), NULL, 0));
	}
	printf("%lu%s\n", (unsigned long)rv, extra);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char line[512];

	if (argc != 2) {
		fprintf(stderr, "usage: token_mp_helper MODULE\n");
		return 2;
	}
	if (!tu_p11_load(argv[1], &f))
		return 1;
	while (fgets(line, sizeof(line), stdin))
		run(line);
	return 0;
}
