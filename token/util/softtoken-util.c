/* SPDX-License-Identifier: MIT */
/*
 * softtoken-util: initialise a token, show the slots, delete a token.
 *
 * It drives the module itself (dlopen + C_GetFunctionList), so every change
 * goes through the same code, checks and audit trail as any application's.
 * PINs are read from files or descriptors (--so-pin-file, --pin-file; "-" is
 * standard input), never from the command line where `ps` shows them.
 */
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <p11-kit/pkcs11.h>

#include "cli.h"
#include "core.h"

#ifndef SOFTTOKEN_MODULE_PATH
#define SOFTTOKEN_MODULE_PATH "libsofttoken.so"
#endif

static CK_FUNCTION_LIST *p11;

static void usage(FILE *f)
{
	fputs("usage: softtoken-util [--module PATH] COMMAND [options]\n"
	      "\n"
	      "commands:\n"
	      "  show                              list the slots and their tokens\n"
	      "  init --slot N --label LABEL --so-pin-file F --pin-file F\n"
	      "                                    initialise (or re-initialise) the token in slot N:\n"
	      "                                    SO PIN, label, user PIN\n"
	      "  delete --slot N --so-pin-file F   erase the token in slot N (its objects and PINs)\n"
	      "\n"
	      "options:\n"
	      "  --module PATH                     the module to drive (default: $SOFTTOKEN_MODULE,\n"
	      "                                    else " SOFTTOKEN_MODULE_PATH ")\n"
	      "  -h, --help                        this text\n"
	      "  --version                         the version\n"
	      "\n"
	      "PIN files hold the PIN on their first line; '-' reads standard input.\n"
	      "The configuration is the module's: $SOFTTOKEN_CONF, else " TOK_DEFAULT_CONF ".\n"
	      "Exit status: 0 done, 1 the token refused (wrong PIN, ...), 2 usage or setup error.\n",
	      f);
}

static const char *rv_name(CK_RV rv)
{
	const char *n = auditlog_ckr_name(rv);
	return n ? n : "unknown CKR";
}

static int fail(const char *what, CK_RV rv)
{
	fprintf(stderr, "softtoken-util: %s: %s (0x%08lx)\n", what, rv_name(rv), (unsigned long)rv);
	return rv == CKR_PIN_INCORRECT || rv == CKR_PIN_LOCKED || rv == CKR_SESSION_EXISTS ? 1 : 2;
}

static int read_pin(const char *file, char *buf, size_t cap, size_t *ret_len)
{
	FILE *f = strcmp(file, "-") ? fopen(file, "re") : stdin;
	size_t n;

	if (!f) {
		fprintf(stderr, "softtoken-util: %s: %s\n", file, strerror(errno));
		return -1;
	}
	if (!fgets(buf, (int)cap, f)) {
		fprintf(stderr, "softtoken-util: %s: no PIN in it\n", file);
		if (f != stdin)
			fclose(f);
		return -1;
	}
	if (f != stdin)
		fclose(f);
	n = strcspn(buf, "\r\n");
	buf[n] = '\0';
	if (n < TOK_MIN_PIN || n > TOK_MAX_PIN) {
		fprintf(stderr, "softtoken-util: %s: a PIN has %d to %d characters\n", file, TOK_MIN_PIN,
			TOK_MAX_PIN);
		return -1;
	}
	*ret_len = n;
	return 0;
}

static int parse_slot(const char *s, CK_SLOT_ID *ret)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || !*s || *end || s[0] == '-') {
		fprintf(stderr, "softtoken-util: bad slot '%s'\n", s);
		return -1;
	}
	*ret = v;
	return 0;
}

static void print_field(const unsigned char *p, size_t n)
{
	while (n && p[n - 1] == ' ')
		n--;
	fwrite(p, 1, n, stdout);
}

static int cmd_show(void)
{
	CK_SLOT_ID slots[TOK_MAX_SLOTS];
	CK_ULONG n = TOK_MAX_SLOTS;
	CK_RV rv = p11->C_GetSlotList(CK_TRUE, slots, &n);

	if (rv != CKR_OK)
		return fail("C_GetSlotList", rv);
	for (CK_ULONG i = 0; i < n; i++) {
		CK_TOKEN_INFO ti;
		rv = p11->C_GetTokenInfo(slots[i], &ti);
		if (rv != CKR_OK)
			return fail("C_GetTokenInfo", rv);
		printf("slot %lu: ", (unsigned long)slots[i]);
		if (!(ti.flags & CKF_TOKEN_INITIALIZED)) {
			puts("(not initialised)");
			continue;
		}
		printf("label \"");
		print_field(ti.label, sizeof(ti.label));
		printf("\", serial ");
		print_field(ti.serialNumber, sizeof(ti.serialNumber));
		printf(", user PIN %s%s%s, sessions %lu\n",
		       (ti.flags & CKF_USER_PIN_INITIALIZED) ? "set" : "not set",
		       (ti.flags & CKF_USER_PIN_LOCKED) ? " (locked)" : "",
		       (ti.flags & CKF_SO_PIN_LOCKED) ? ", SO PIN locked" : "",
		       (unsigned long)ti.ulSessionCount);
	}
	return 0;
}

static int cmd_init(CK_SLOT_ID slot, const char *label, const char *so_file, const char *pin_file)
{
	char so[TOK_MAX_PIN + 2], pin[TOK_MAX_PIN + 2];
	unsigned char lab[32];
	size_t so_len, pin_len;
	CK_SESSION_HANDLE h;
	CK_RV rv;
	int r = 2;

	if (strlen(label) > 32) {
		fprintf(stderr, "softtoken-util: a label has at most 32 bytes\n");
		return 2;
	}
	if (read_pin(so_file, so, sizeof(so), &so_len) < 0 || read_pin(pin_file, pin, sizeof(pin), &pin_len) < 0)
		return 2;
	tok_pad(lab, sizeof(lab), label);
	rv = p11->C_InitToken(slot, (CK_UTF8CHAR_PTR)so, so_len, lab);
	if (rv != CKR_OK) {
		r = fail("C_InitToken", rv);
		goto out;
	}
	rv = p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h);
	if (rv != CKR_OK) {
		r = fail("C_OpenSession", rv);
		goto out;
	}
	rv = p11->C_Login(h, CKU_SO, (CK_UTF8CHAR_PTR)so, so_len);
	if (rv == CKR_OK)
		rv = p11->C_InitPIN(h, (CK_UTF8CHAR_PTR)pin, pin_len);
	if (rv != CKR_OK) {
		r = fail("setting the user PIN", rv);
		(void)p11->C_CloseSession(h);
		goto out;
	}
	(void)p11->C_Logout(h);
	(void)p11->C_CloseSession(h);
	printf("slot %lu: token \"%s\" initialised\n", (unsigned long)slot, label);
	r = 0;
out:
	explicit_bzero(so, sizeof(so));
	explicit_bzero(pin, sizeof(pin));
	return r;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

/* The slot directory: token.json and objects/ (no symlinks followed). */
static int rm_tree(const char *dir)
{
	return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int cmd_delete(CK_SLOT_ID slot, const char *so_file)
{
	struct tok_config cfg;
	char err[512] = "", so[TOK_MAX_PIN + 2], *dir = NULL;
	size_t so_len;
	CK_SESSION_HANDLE h;
	CK_RV rv;
	int r = 2;

	if (read_pin(so_file, so, sizeof(so), &so_len) < 0)
		return 2;
	/* The SO proves the right to delete by logging in (an audited call). */
	rv = p11->C_OpenSession(slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &h);
	if (rv != CKR_OK) {
		r = fail("C_OpenSession", rv);
		goto out;
	}
	rv = p11->C_Login(h, CKU_SO, (CK_UTF8CHAR_PTR)so, so_len);
	if (rv != CKR_OK) {
		r = fail("C_Login (SO)", rv);
		(void)p11->C_CloseSession(h);
		goto out;
	}
	(void)p11->C_Logout(h);
	(void)p11->C_CloseSession(h);
	(void)p11->C_Finalize(NULL);
	p11 = NULL;
	if (tok_config_load(&cfg, err, sizeof(err)) != CKR_OK) {
		fprintf(stderr, "softtoken-util: %s\n", err);
		goto out;
	}
	if (asprintf(&dir, "%s/slot%lu", cfg.token_dir, (unsigned long)slot) < 0 || rm_tree(dir) != 0) {
		fprintf(stderr, "softtoken-util: cannot remove %s\n", dir ? dir : "the slot directory");
	} else {
		printf("slot %lu: token deleted (%s removed)\n", (unsigned long)slot, dir);
		r = 0;
	}
	free(dir);
	tok_config_free(&cfg);
out:
	explicit_bzero(so, sizeof(so));
	return r;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "module", required_argument, NULL, 'm' }, { "slot", required_argument, NULL, 's' },
		{ "label", required_argument, NULL, 'l' },  { "so-pin-file", required_argument, NULL, 'S' },
		{ "pin-file", required_argument, NULL, 'P' }, { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	const char *module = getenv("SOFTTOKEN_MODULE"), *label = NULL, *so_file = NULL,
		   *pin_file = NULL, *cmd;
	CK_SLOT_ID slot = 0;
	bool have_slot = false;
	CK_C_GetFunctionList getfl;
	CK_RV rv;
	void *dl;
	int c, r;

	if (!module)
		module = SOFTTOKEN_MODULE_PATH;
	opterr = 0; /* a bad option gets one line: cli_bad_option */
	while ((c = getopt_long(argc, argv, "m:s:l:S:P:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': module = optarg; break;
		case 's':
			if (parse_slot(optarg, &slot) < 0)
				return 2;
			have_slot = true;
			break;
		case 'l': label = optarg; break;
		case 'S': so_file = optarg; break;
		case 'P': pin_file = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V': return cli_version("softtoken-util");
		default: return cli_bad_option("softtoken-util", "m:s:l:S:P:h", opts, argv);
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	cmd = argv[optind];
	if (strcmp(cmd, "show") && strcmp(cmd, "init") && strcmp(cmd, "delete"))
		return cli_usage_error("softtoken-util", "unknown command '%s'", cmd);
	if ((!strcmp(cmd, "init") && (!have_slot || !label || !so_file || !pin_file)) ||
	    (!strcmp(cmd, "delete") && (!have_slot || !so_file))) {
		fprintf(stderr, "softtoken-util: %s needs --slot%s\n", cmd,
			!strcmp(cmd, "init") ? ", --label, --so-pin-file and --pin-file" : " and --so-pin-file");
		return 2;
	}
	dl = dlopen(module, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		fprintf(stderr, "softtoken-util: cannot load the module: %s (use --module PATH)\n", dlerror());
		return 2;
	}
	getfl = (CK_C_GetFunctionList)dlsym(dl, "C_GetFunctionList");
	if (!getfl || getfl(&p11) != CKR_OK) {
		fprintf(stderr, "softtoken-util: %s is not a PKCS#11 module\n", module);
		return 2;
	}
	rv = p11->C_Initialize(NULL);
	if (rv != CKR_OK)
		return fail("C_Initialize (the module said why above)", rv);
	if (!strcmp(cmd, "show"))
		r = cmd_show();
	else if (!strcmp(cmd, "init"))
		r = cmd_init(slot, label, so_file, pin_file);
	else
		r = cmd_delete(slot, so_file);
	if (p11)
		(void)p11->C_Finalize(NULL);
	dlclose(dl);
	return r;
}
