/* SPDX-License-Identifier: MIT */
/*
 * p11-bench: PKCS#11 modules side by side, next to the raw cryptography
 * (docs/benchmarks.md).
 *
 * Each module is loaded once (dlopen + C_GetFunctionList) in this process, its
 * configuration written into a fresh directory and named by environment
 * (SOFTHSM2_CONF, SOFTTOKEN_CONF) before its C_Initialize. Every token is
 * prepared the same way: C_InitToken, SO login + C_InitPIN, user login, then
 * the same keys (an AES-256 key, 256 more labelled AES keys, an EC P-256 and
 * an RSA-2048 key pair). The same operations then run on every module,
 * alternating between them in rounds, next to a "raw" arm doing the same work
 * straight through OpenSSL EVP (algorithms fetched once, contexts reused):
 * the floor a module can approach. Every sample is an Init + operation pair,
 * the way a consumer calls them.
 *
 * Our token (libsofttoken.so) runs with its audit trail on (default policy),
 * then once more with it off. After its C_Finalize the harness counts the
 * audit records in its audit directory against the audited calls it made:
 * figures count only when the log holds exactly one record per audited call.
 *
 *   p11-bench [--module PATH]... [--iterations N] [--warmup N] [--threads LIST]
 *             [--data-sizes LIST] [--only PATTERNS] [--format table|json|csv]
 *             [--output FILE] [--compare BASELINE.json [--threshold PCT]]
 *             [--dir DIR] [--keep] [--no-raw] [--no-audit-off]
 *   p11-bench --compare BASELINE.json --input CURRENT.json [--threshold PCT]
 *
 * Exit status: 0 the run completed (whether or not the targets were met),
 * 1 a module, OpenSSL or the system failed, or our token's audit log does not
 * hold one record per audited call, 2 bad arguments or a refused directory,
 * 3 --compare found a result slower than the baseline beyond the threshold.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>

#include "benchutil.h"
#include "cli.h"
#include "p11names.h"

/* Last: in its default (compat) mode this header #defines common words
 * (value, count, params, ...) to the standard's field names. */
#include <p11-kit/pkcs11.h>

#ifndef P11_BENCH_BUILD_TYPE
#define P11_BENCH_BUILD_TYPE "unknown"
#endif
#ifndef P11_BENCH_C_FLAGS
#define P11_BENCH_C_FLAGS "unknown"
#endif
#ifndef RAMFS_MAGIC
#define RAMFS_MAGIC 0x858458f6
#endif
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

#define PROG "p11-bench"
const char *const bench_prog = PROG;
#define SOFTHSM_DEFAULT "/usr/lib/softhsm/libsofthsm2.so"

/* ---- defaults ------------------------------------------------------------- */

#define MAX_MODULES 8u
#define MAX_LIST 8u            /* entries of --threads and --data-sizes */
#define MAX_THREADS 64u
#define MAX_DATA (16u << 20)
#define ROUNDS 25u             /* chunks per (arm, case), the arms alternating */
#define AUTO_BUDGET_NS 400000000ull /* auto iterations: ~0.4 s per (arm, case) */
#define AUTO_MIN 20u
#define AUTO_MAX 20000u
#define AUTO_MIN_MT 4u
#define WARM_AUTO 10u          /* auto warm-up: at most this many calls... */
#define WARM_AUTO_NS 200000000ull /* ...or this long */
#define REWARM_BELOW_NS 1000000.0 /* one untimed call before each chunk when cheaper */
#define FIND_KEYS 256u         /* labelled AES keys besides the working key: 257 in all */
#define FIND_LABEL "p11bench-find-128"
#define FSYNC_SAMPLES 100u     /* raw write+fdatasync samples at the start and at the end */
#define KG_FSYNC_PER_ROUND 8u  /* and in each round of a key generation case */
#define FSYNC_LINE 340u        /* the size of a typical audit line */
#define DEF_THRESHOLD 10.0     /* --compare: percent */
#define DEF_PBKDF2 1000u       /* our token's key derivation at login; login is not timed */
#define T_SOFTHSM 2.0          /* targets (DESIGN.md): ops/s >= 2x SoftHSMv2's ... */
#define T_RAW 1.1              /* ... or time <= 1.1x raw; key generation: p50 <= raw p50 */
#define T_KG_FSYNC 1.1         /* ... + 1.1x the fdatasync p50 measured in the case's rounds */

#define SO_PIN "p11-bench-so-pin"
#define USER_PIN "p11-bench-user-pin"
#define TOKEN_LABEL "p11-bench"

/* ---- operations ----------------------------------------------------------- */

enum opid {
	OP_ENCRYPT,
	OP_DECRYPT,
	OP_EC_SIGN,
	OP_EC_VERIFY,
	OP_RSA_SIGN,
	OP_RSA_VERIFY,
	OP_SHA256,
	OP_KG_AES,
	OP_KG_EC,
	OP_KG_RSA,
	OP_FIND_ONE,
	OP_FIND_ALL,
};

#define OF_SIZES (1u << 0)   /* runs at each --data-sizes instead of its own size */
#define OF_THREADS (1u << 1) /* also runs with each --threads count above 1 */
#define OF_KEYGEN (1u << 2)  /* makes a key: its audit record is durable before return */
#define OF_NORAW (1u << 3)   /* no raw counterpart */
#define OF_KG_SEARCH (1u << 4) /* ... by a search whose time varies far beyond the rule
				* (RSA's primes): judged outside EVP_PKEY_generate */

static const struct opdef {
	const char *name;
	enum opid id;
	size_t bytes;
	unsigned fl;
	const char *what;
} opdefs[] = {
	{"aes-gcm-encrypt", OP_ENCRYPT, 4096, OF_SIZES | OF_THREADS,
	 "C_EncryptInit + C_Encrypt, CKM_AES_GCM, AES-256, 96-bit IV, 128-bit tag"},
	{"aes-gcm-decrypt", OP_DECRYPT, 4096, 0, "C_DecryptInit + C_Decrypt, CKM_AES_GCM, AES-256"},
	{"ecdsa-p256-sign", OP_EC_SIGN, 32, OF_THREADS, "C_SignInit + C_Sign, CKM_ECDSA, P-256"},
	{"ecdsa-p256-verify", OP_EC_VERIFY, 32, 0, "C_VerifyInit + C_Verify, CKM_ECDSA, P-256"},
	{"rsa2048-sign", OP_RSA_SIGN, 32, 0, "C_SignInit + C_Sign, CKM_SHA256_RSA_PKCS, 2048 bits"},
	{"rsa2048-verify", OP_RSA_VERIFY, 32, 0,
	 "C_VerifyInit + C_Verify, CKM_SHA256_RSA_PKCS, 2048 bits"},
	{"sha256", OP_SHA256, 4096, OF_SIZES, "C_DigestInit + C_Digest, CKM_SHA256"},
	{"keygen-aes256", OP_KG_AES, 0, OF_KEYGEN, "C_GenerateKey, CKM_AES_KEY_GEN, 32 bytes"},
	{"keygen-ec-p256", OP_KG_EC, 0, OF_KEYGEN, "C_GenerateKeyPair, CKM_EC_KEY_PAIR_GEN, P-256"},
	{"keygen-rsa2048", OP_KG_RSA, 0, OF_KEYGEN | OF_KG_SEARCH,
	 "C_GenerateKeyPair, CKM_RSA_PKCS_KEY_PAIR_GEN, 2048 bits, e = 65537"},
	{"find-1-of-257", OP_FIND_ONE, 0, OF_NORAW,
	 "C_FindObjectsInit (class + label) + C_FindObjects + C_FindObjectsFinal: 1 match"},
	{"find-257-by-class", OP_FIND_ALL, 0, OF_NORAW,
	 "C_FindObjectsInit (class) + C_FindObjects + C_FindObjectsFinal: 257 matches"},
};
#define NOPS (sizeof(opdefs) / sizeof(opdefs[0]))

struct casedef {
	const struct opdef *op;
	size_t bytes;
	unsigned threads;
};

/* ---- options -------------------------------------------------------------- */

enum fmt { FMT_TABLE, FMT_JSON, FMT_CSV };

struct opts {
	const char *modules[MAX_MODULES];
	unsigned nmodules;
	unsigned iterations; /* 0: auto */
	unsigned warmup;
	bool warmup_set;
	unsigned threads[MAX_LIST];
	unsigned nthreads;
	size_t sizes[MAX_LIST];
	unsigned nsizes;
	const char *only;
	enum fmt format;
	const char *output;
	const char *compare;
	const char *input;
	double threshold;
	const char *dir;
	bool keep, no_raw, no_audit_off;
	const char *audit_sync;
	long long audit_coalesce_us; /* -1: the token's default */
	const char *token_opt[MAX_LIST]; /* --token-option KEY=VALUE, in order */
	unsigned ntoken_opt;
	unsigned pbkdf2;
};

/* ---- small helpers -------------------------------------------------------- */

static volatile sig_atomic_t g_stop; /* SIGINT/SIGTERM: stop, clean up, exit 1 */
static bool g_tty;                   /* a progress bar on stderr */
static bool g_bar_drawn;

static void clear_bar(void)
{
	if (g_bar_drawn) {
		fputs("\r\033[K", stderr);
		g_bar_drawn = false;
	}
}

__attribute__((format(printf, 1, 2))) static void error_msg(const char *fmt, ...)
{
	va_list ap;

	clear_bar();
	va_start(ap, fmt);
	fputs(PROG ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static const char *ckr_name(CK_RV rv)
{
	static _Thread_local char buf[24];
	const char *n = al_p11_lookup(al_ckr_names, al_ckr_count, rv);

	if (n)
		return n;
	snprintf(buf, sizeof(buf), "0x%08lx", (unsigned long)rv);
	return buf;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t len = strlen(text);

	if (fd < 0)
		return -errno;
	while (len) {
		ssize_t w = write(fd, text, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;
			close(fd);
			return -e;
		}
		text += w;
		len -= (size_t)w;
	}
	return close(fd) < 0 ? -errno : 0;
}

__attribute__((format(printf, 3, 4))) static int path_fmt(char *out, size_t cap, const char *fmt,
							   ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, cap, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* A fixed-width, space-padded PKCS#11 string as a C string. */
static void p11_str(char *out, size_t cap, const unsigned char *s, size_t n)
{
	size_t j = 0;

	while (n && s[n - 1] == ' ')
		n--;
	for (size_t i = 0; i < n && j + 1 < cap; i++)
		out[j++] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
	out[j] = '\0';
}

static void fmt_us(double us, char *out, size_t cap)
{
	if (!isfinite(us))
		snprintf(out, cap, "-");
	else if (us < 100)
		snprintf(out, cap, "%.2f", us);
	else if (us < 10000)
		snprintf(out, cap, "%.1f", us);
	else
		snprintf(out, cap, "%.0f", us);
}

static void fmt_size(size_t n, char *out, size_t cap)
{
	if (n >= (1u << 20) && n % (1u << 20) == 0)
		snprintf(out, cap, "%zuM", n >> 20);
	else if (n >= 1024 && n % 1024 == 0)
		snprintf(out, cap, "%zuK", n >> 10);
	else
		snprintf(out, cap, "%zu", n);
}

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

/* ---- the calling thread's own fdatasync ------------------------------------ */

/* p11-bench exports fdatasync (bench/CMakeLists.txt), so a module's call to it
 * lands here first: each thread adds up the time it spent in its own
 * fdatasyncs. Our token's durable record, when the caller commits it
 * (docs/durability.md "The caller's commit"), is one such call inside the
 * PKCS#11 call, so a key generation's time beyond its own record's
 * fdatasync is measured on the same call, not against a probe run between
 * rounds (docs/benchmarks.md). The batches the audit worker commits go
 * through io_uring and are not seen here. */
static __thread struct {
	uint64_t ns;
	unsigned calls;
} own_sync;

int fdatasync(int fd)
{
	static _Atomic(int (*)(int)) real;
	int (*f)(int) = atomic_load(&real);

	if (!f) {
		f = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
		if (!f) {
			errno = ENOSYS;
			return -1;
		}
		atomic_store(&real, f);
	}
	uint64_t t = now_ns();
	int r = f(fd);
	own_sync.ns += now_ns() - t;
	own_sync.calls++;
	return r;
}

/* p11-bench exports EVP_PKEY_generate too: each thread adds up the time it
 * spent in its own calls of it, a module's (the token's RSA key generation)
 * and the raw arm's alike. An RSA-2048 key generation is a prime search of
 * 40 ms to over 1 s, so the p50 of a few dozen calls moves by tens of ms,
 * against a rule whose allowance is 1.1 fdatasyncs (~0.2 ms): rows marked
 * OF_KG_SEARCH are judged on each call's time outside it (evaluate()). */
static __thread struct {
	uint64_t ns;
	unsigned calls;
} own_kg;

int EVP_PKEY_generate(EVP_PKEY_CTX *ctx, EVP_PKEY **ppkey)
{
	static _Atomic(int (*)(EVP_PKEY_CTX *, EVP_PKEY **)) real;
	int (*f)(EVP_PKEY_CTX *, EVP_PKEY **) = atomic_load(&real);

	if (!f) {
		f = (int (*)(EVP_PKEY_CTX *, EVP_PKEY **))dlsym(RTLD_NEXT, "EVP_PKEY_generate");
		if (!f)
			return -1; /* OpenSSL's "not supported" */
		atomic_store(&real, f);
	}
	uint64_t t = now_ns();
	int r = f(ctx, ppkey);
	own_kg.ns += now_ns() - t;
	own_kg.calls++;
	return r;
}

/* ---- progress bar (stderr on a TTY) -------------------------------------- */

static void progress(double frac, const char *what, const char *arm)
{
	int w = 30, fill;

	if (!g_tty)
		return;
	if (frac < 0)
		frac = 0;
	if (frac > 1)
		frac = 1;
	fill = (int)(frac * w + 0.5);
	fprintf(stderr, "\r\033[K[%.*s%*s] %3.0f%%  %s  %s", fill,
		"##############################", w - fill, "", frac * 100, what, arm);
	fflush(stderr);
	g_bar_drawn = true;
}

/* ---- argument parsing ----------------------------------------------------- */

static void usage(FILE *f)
{
	fputs("usage: " PROG " [options]\n"
	      "       " PROG " --compare BASELINE.json --input CURRENT.json [--threshold PCT]\n"
	      "\n"
	      "Runs the same PKCS#11 operations on each module, alternating between them, next\n"
	      "to a raw OpenSSL EVP arm. Without --module: our token (libsofttoken.so, with its\n"
	      "audit trail on, then off) and SoftHSMv2 (" SOFTHSM_DEFAULT ").\n"
	      "\n"
	      "  --module PATH        a PKCS#11 module (repeatable); its file name must contain\n"
	      "                       'softtoken' (ours) or 'softhsm' (SoftHSMv2)\n"
	      "  --iterations N       timed calls per module and operation (default: auto,\n"
	      "                       about 0.4 s each, 20 to 20000); with threads, in all\n"
	      "  --warmup N           untimed calls first (default: up to 10 within 0.2 s)\n"
	      "  --threads LIST       thread counts of the threaded runs (default 1,2,4,8)\n"
	      "  --data-sizes LIST    sizes for AES-GCM encrypt and SHA-256 (default\n"
	      "                       256,4K,64K,1M; K and M are powers of 1024)\n"
	      "  --only PATTERNS      only operations matching one of these comma-separated\n"
	      "                       shell patterns (e.g. 'aes-*,sha256')\n"
	      "  --format F           table (default), json or csv\n"
	      "  --output FILE        write the report to FILE instead of stdout\n"
	      "  --compare BASE       compare ops/s with BASE (a --format json report);\n"
	      "                       exit 3 when a result is slower beyond the threshold\n"
	      "  --threshold PCT      for --compare (default 10)\n"
	      "  --input FILE         with --compare: compare FILE instead of running\n"
	      "  --dir DIR            make the run's directory under DIR (default /var/tmp;\n"
	      "                       not tmpfs: the audit trail's fdatasync must reach a disk)\n"
	      "  --keep               keep that directory (tokens, configs, audit logs)\n"
	      "  --no-raw             skip the raw OpenSSL arm\n"
	      "  --no-audit-off       skip our token's second run with its audit trail off\n"
	      "  --audit-sync P       our token's audit_sync policy (default sensitive)\n"
	      "  --audit-coalesce-us N  our token's audit_async_coalesce_us (default: the\n"
	      "                       token's own default)\n"
	      "  --token-option KEY=VALUE  one more line of our token's softtoken.conf\n"
	      "                       (repeatable, up to 8; the token checks it)\n"
	      "  --pbkdf2-iterations N  our token's PIN key derivation (default 1000, its\n"
	      "                       minimum; login is not timed)\n"
	      "  -h, --help           this text\n"
	      "  --version            the version\n"
	      "\n"
	      "Exit status: 0 done, 1 failure (module, OpenSSL, system, audit record count),\n"
	      "2 bad arguments, 3 --compare found a regression.\n",
	      f);
}

/* A comma-separated list of integers into out[]; duplicates are dropped. */
static unsigned arg_list(const char *opt, const char *val, uint64_t lo, uint64_t hi, bool suffixes,
			 uint64_t *out)
{
	char buf[256], *save = NULL;
	unsigned n = 0;

	if (strlen(val) >= sizeof(buf))
		bad_arg("%s: list too long", opt);
	snprintf(buf, sizeof(buf), "%s", val);
	if (!*val || *val == ',' || strstr(val, ",,") || val[strlen(val) - 1] == ',')
		bad_arg("%s: empty element in '%s'", opt, val);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v = arg_u64(opt, t, lo, hi, suffixes);
		bool dup = false;
		for (unsigned i = 0; i < n; i++)
			dup |= out[i] == v;
		if (dup)
			continue;
		if (n == MAX_LIST)
			bad_arg("%s: at most %u values", opt, MAX_LIST);
		out[n++] = v;
	}
	if (n == 0)
		bad_arg("%s: empty list", opt);
	return n;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	enum {
		OPT_MODULE = 256, OPT_ITER, OPT_WARM, OPT_THREADS, OPT_SIZES, OPT_ONLY, OPT_FORMAT,
		OPT_OUTPUT, OPT_COMPARE, OPT_THRESHOLD, OPT_INPUT, OPT_DIR, OPT_KEEP, OPT_NORAW,
		OPT_NOOFF, OPT_SYNC, OPT_PBKDF2, OPT_COALESCE, OPT_TOKOPT
	};
	static const struct option lo[] = {
		{"module", required_argument, NULL, OPT_MODULE},
		{"iterations", required_argument, NULL, OPT_ITER},
		{"warmup", required_argument, NULL, OPT_WARM},
		{"threads", required_argument, NULL, OPT_THREADS},
		{"data-sizes", required_argument, NULL, OPT_SIZES},
		{"only", required_argument, NULL, OPT_ONLY},
		{"format", required_argument, NULL, OPT_FORMAT},
		{"output", required_argument, NULL, OPT_OUTPUT},
		{"compare", required_argument, NULL, OPT_COMPARE},
		{"threshold", required_argument, NULL, OPT_THRESHOLD},
		{"input", required_argument, NULL, OPT_INPUT},
		{"dir", required_argument, NULL, OPT_DIR},
		{"keep", no_argument, NULL, OPT_KEEP},
		{"no-raw", no_argument, NULL, OPT_NORAW},
		{"no-audit-off", no_argument, NULL, OPT_NOOFF},
		{"audit-sync", required_argument, NULL, OPT_SYNC},
		{"audit-coalesce-us", required_argument, NULL, OPT_COALESCE},
		{"pbkdf2-iterations", required_argument, NULL, OPT_PBKDF2},
		{"token-option", required_argument, NULL, OPT_TOKOPT},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	uint64_t l[MAX_LIST];
	bool threshold_set = false;
	int c;

	*o = (struct opts){
		.threads = {1, 2, 4, 8},
		.nthreads = 4,
		.sizes = {256, 4096, 65536, 1u << 20},
		.nsizes = 4,
		.format = FMT_TABLE,
		.threshold = DEF_THRESHOLD,
		.audit_sync = "sensitive",
		.audit_coalesce_us = -1,
		.pbkdf2 = DEF_PBKDF2,
	};
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (c) {
		case OPT_MODULE:
			if (!*optarg)
				bad_arg("--module: empty path");
			if (o->nmodules == MAX_MODULES)
				bad_arg("--module: at most %u modules", MAX_MODULES);
			o->modules[o->nmodules++] = optarg;
			break;
		case OPT_ITER:
			o->iterations = (unsigned)arg_u64("--iterations", optarg, 1, 10000000, false);
			break;
		case OPT_WARM:
			o->warmup = (unsigned)arg_u64("--warmup", optarg, 0, 100000, false);
			o->warmup_set = true;
			break;
		case OPT_THREADS:
			o->nthreads = arg_list("--threads", optarg, 1, MAX_THREADS, false, l);
			for (unsigned i = 0; i < o->nthreads; i++)
				o->threads[i] = (unsigned)l[i];
			break;
		case OPT_SIZES:
			o->nsizes = arg_list("--data-sizes", optarg, 1, MAX_DATA, true, l);
			for (unsigned i = 0; i < o->nsizes; i++)
				o->sizes[i] = (size_t)l[i];
			break;
		case OPT_ONLY:
			if (!*optarg)
				bad_arg("--only: empty pattern");
			o->only = optarg;
			break;
		case OPT_FORMAT:
			if (strcmp(optarg, "table") == 0)
				o->format = FMT_TABLE;
			else if (strcmp(optarg, "json") == 0)
				o->format = FMT_JSON;
			else if (strcmp(optarg, "csv") == 0)
				o->format = FMT_CSV;
			else
				bad_arg("--format: '%s' is not table, json or csv", optarg);
			break;
		case OPT_OUTPUT:
			if (!*optarg)
				bad_arg("--output: empty path");
			o->output = optarg;
			break;
		case OPT_COMPARE:
			if (!*optarg)
				bad_arg("--compare: empty path");
			o->compare = optarg;
			break;
		case OPT_THRESHOLD: {
			char *end;
			errno = 0;
			double v = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(v) || v < 0 || v >= 100)
				bad_arg("--threshold: '%s' is not a percentage in 0..100", optarg);
			o->threshold = v;
			threshold_set = true;
			break;
		}
		case OPT_INPUT:
			if (!*optarg)
				bad_arg("--input: empty path");
			o->input = optarg;
			break;
		case OPT_DIR:
			if (!*optarg)
				bad_arg("--dir: empty path");
			o->dir = optarg;
			break;
		case OPT_KEEP: o->keep = true; break;
		case OPT_NORAW: o->no_raw = true; break;
		case OPT_NOOFF: o->no_audit_off = true; break;
		case OPT_SYNC:
			if (strcmp(optarg, "sensitive") && strcmp(optarg, "all") && strcmp(optarg, "none"))
				bad_arg("--audit-sync: '%s' is not sensitive, all or none", optarg);
			o->audit_sync = optarg;
			break;
		case OPT_COALESCE:
			o->audit_coalesce_us = (long long)arg_u64("--audit-coalesce-us", optarg, 0,
								  1000000, false);
			break;
		case OPT_TOKOPT: {
			const char *eq = strchr(optarg, '=');
			size_t k = eq ? (size_t)(eq - optarg) : 0;
			if (!k || strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789_") != k ||
			    strpbrk(optarg, "\n\r#"))
				bad_arg("--token-option: '%s' is not KEY=VALUE (a key of a-z, 0-9 "
					"and _, no newline or #)", optarg);
			if (o->ntoken_opt == MAX_LIST)
				bad_arg("--token-option: more than %u", MAX_LIST);
			o->token_opt[o->ntoken_opt++] = optarg;
			break;
		}
		case OPT_PBKDF2:
			o->pbkdf2 = (unsigned)arg_u64("--pbkdf2-iterations", optarg, 1000, 100000000,
						      false);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			exit(cli_version(bench_prog));
		default: /* '?', ':' */
			exit(cli_bad_option(bench_prog, ":h", lo, argv));
		}
	}
	if (optind < argc)
		bad_arg("unexpected argument '%s'", argv[optind]);
	if (o->input && !o->compare)
		bad_arg("--input needs --compare");
	if (threshold_set && !o->compare)
		bad_arg("--threshold needs --compare");
	if (o->only) {
		/* every pattern must select something: a typo is an error, not an empty run */
		char buf[512], *save = NULL;
		if (strlen(o->only) >= sizeof(buf))
			bad_arg("--only: too long");
		snprintf(buf, sizeof(buf), "%s", o->only);
		for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			bool hit = false;
			for (unsigned i = 0; i < NOPS; i++)
				hit |= fnmatch(t, opdefs[i].name, 0) == 0;
			if (!hit)
				bad_arg("--only: '%s' matches no operation (see docs/benchmarks.md)", t);
		}
	}
}

static bool op_selected(const struct opts *o, const struct opdef *op)
{
	char buf[512], *save = NULL;

	if (!o->only)
		return true;
	snprintf(buf, sizeof(buf), "%s", o->only);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (fnmatch(t, op->name, 0) == 0)
			return true;
	return false;
}

/* The cases in run order: single-threaded ones, then the threaded ones. */
static unsigned build_cases(const struct opts *o, struct casedef **ret)
{
	struct casedef *c = calloc(NOPS * (MAX_LIST + 1) + 2 * MAX_LIST, sizeof(*c));
	unsigned n = 0;

	if (!c)
		return 0;
	for (unsigned i = 0; i < NOPS; i++) {
		const struct opdef *op = &opdefs[i];
		if (!op_selected(o, op))
			continue;
		if (op->fl & OF_SIZES)
			for (unsigned k = 0; k < o->nsizes; k++)
				c[n++] = (struct casedef){op, o->sizes[k], 1};
		else
			c[n++] = (struct casedef){op, op->bytes, 1};
	}
	for (unsigned i = 0; i < NOPS; i++) {
		const struct opdef *op = &opdefs[i];
		if (!(op->fl & OF_THREADS) || !op_selected(o, op))
			continue;
		for (unsigned k = 0; k < o->nthreads; k++)
			if (o->threads[k] > 1) /* one thread: the single-threaded case */
				c[n++] = (struct casedef){op, op->bytes, o->threads[k]};
	}
	*ret = c;
	return n;
}

/* ---- modules, arms, workers ----------------------------------------------- */

enum kind { KIND_RAW, KIND_SOFTHSM, KIND_SOFTTOKEN };
enum audit { AUDIT_NA, AUDIT_ON, AUDIT_OFF };

struct module {
	char path[PATH_MAX]; /* as given */
	char real[PATH_MAX]; /* resolved: the same module named twice is refused */
	enum kind kind;
	char name[48]; /* from the file name: "softtoken", "softhsm2" */
	void *dl;
	CK_FUNCTION_LIST *f;
};

/* The raw arm's shared material; read-only once made. */
struct rawkeys {
	EVP_CIPHER *aes;
	EVP_MD *sha;
	unsigned char key[32];
	EVP_PKEY *ec, *rsa;
};

/* One worker's reused contexts (one per thread). */
struct rawctx {
	EVP_CIPHER_CTX *enc, *dec;
	EVP_MD_CTX *md;
	EVP_PKEY_CTX *ec_sign, *ec_verify, *rsa_sign, *rsa_verify, *kg_ec, *kg_rsa;
};

struct arm {
	char name[64];      /* "softtoken", "softtoken-noaudit", "softhsm2", "raw" */
	struct module *mod; /* NULL: the raw arm */
	enum audit audit;
	char dir[PATH_MAX]; /* config, tokens and audit trail of this arm */
	char conf[PATH_MAX], audit_dir[PATH_MAX];
	bool initialized, failed;
	char err[320];      /* why it failed */
	CK_SLOT_ID slot;
	CK_SESSION_HANDLE sess[MAX_THREADS];
	unsigned nsess;
	bool logged_in;
	CK_OBJECT_HANDLE aes, ec_pub, ec_priv, rsa_pub, rsa_priv;
	/* fixtures for decrypt and verify, made by this arm */
	unsigned char ct_iv[12];
	unsigned char ct[4096 + 16];
	size_t ct_len;
	unsigned char ecsig[160], rsasig[512];
	size_t ecsig_len, rsasig_len;
	struct rawkeys rk;
	/* module identity (C_GetInfo, C_GetTokenInfo) */
	char manufacturer[40], description[40], token_model[24];
	unsigned lib_major, lib_minor, ck_major, ck_minor, fw_major, fw_minor;
	/* accounting */
	atomic_uint_fast64_t audited; /* audited calls made (DESIGN.md's record table) */
	uint64_t busy_ns;    /* time spent in this arm's calls, setup and C_Finalize included */
	uint64_t setup_ns, finalize_ns;
	uint64_t found;      /* "type":"event" records in its audit directory */
	int audit_status;    /* -1 not checked, 0 one record per audited call, 1 mismatch, 2 error */
};

struct worker {
	struct arm *a;
	unsigned idx; /* thread index: session and IV prefix */
	CK_SESSION_HANDLE s;
	struct rawctx rc;
	unsigned char *in, *out;
	size_t cap;
	uint64_t ivctr;
	const char *fn;  /* the call that failed */
	CK_RV rv;
	char err[320];
};

static void note_audited(struct arm *a, unsigned n)
{
	atomic_fetch_add_explicit(&a->audited, n, memory_order_relaxed);
}

__attribute__((format(printf, 3, 4))) static int work_fail(struct worker *w, const char *fn,
							   const char *fmt, ...)
{
	va_list ap;

	w->fn = fn;
	va_start(ap, fmt);
	vsnprintf(w->err, sizeof(w->err), fmt, ap);
	va_end(ap);
	return -1;
}

static int p11_fail(struct worker *w, const char *fn, CK_RV rv)
{
	w->rv = rv;
	return work_fail(w, fn, "%s: %s", fn, ckr_name(rv));
}

static int ossl_fail(struct worker *w, const char *what)
{
	char e[256] = "no OpenSSL error queued";
	unsigned long code = ERR_get_error();

	if (code)
		ERR_error_string_n(code, e, sizeof(e));
	ERR_clear_error();
	return work_fail(w, what, "OpenSSL %s: %s", what, e);
}

#define P11(w, call, name)                                        \
	do {                                                      \
		CK_RV rv_ = (call);                               \
		if (rv_ != CKR_OK)                                \
			return p11_fail((w), (name), rv_);        \
	} while (0)

/* A fresh 96-bit IV per encryption: thread index, then a counter. */
static void next_iv(struct worker *w, unsigned char iv[12])
{
	uint64_t c = ++w->ivctr;

	iv[0] = 0x50;
	iv[1] = (unsigned char)w->idx;
	iv[2] = 0;
	iv[3] = 0;
	for (int i = 0; i < 8; i++)
		iv[4 + i] = (unsigned char)(c >> (8 * i));
}

static const CK_BBOOL ck_true = CK_TRUE, ck_false = CK_FALSE;
static const CK_OBJECT_CLASS cls_secret = CKO_SECRET_KEY;
static const CK_KEY_TYPE kt_aes = CKK_AES;
static const CK_ULONG aes_len = 32, rsa_bits = 2048;
static const unsigned char rsa_e[] = {0x01, 0x00, 0x01};
/* the DER OID of prime256v1 (P-256), CKA_EC_PARAMS */
static const unsigned char p256_oid[] = {0x06, 0x08, 0x2a, 0x86, 0x48,
					 0xce, 0x3d, 0x03, 0x01, 0x07};

#define ATTR(t, p, n) {(t), (void *)(p), (n)}

/* ---- the operations through PKCS#11 --------------------------------------- */

static int p11_keypair(struct worker *w, bool ec, bool token, const char *label,
		       CK_OBJECT_HANDLE *ret_pub, CK_OBJECT_HANDLE *ret_priv)
{
	CK_FUNCTION_LIST *f = w->a->mod->f;
	CK_MECHANISM m = {ec ? CKM_EC_KEY_PAIR_GEN : CKM_RSA_PKCS_KEY_PAIR_GEN, NULL, 0};
	const CK_BBOOL *tok = token ? &ck_true : &ck_false;
	size_t ll = label ? strlen(label) : 0;
	CK_ATTRIBUTE pub_ec[] = {
		ATTR(CKA_TOKEN, tok, sizeof(CK_BBOOL)),
		ATTR(CKA_VERIFY, &ck_true, sizeof(CK_BBOOL)),
		ATTR(CKA_EC_PARAMS, p256_oid, sizeof(p256_oid)),
		ATTR(CKA_LABEL, label, ll),
	};
	CK_ATTRIBUTE pub_rsa[] = {
		ATTR(CKA_TOKEN, tok, sizeof(CK_BBOOL)),
		ATTR(CKA_VERIFY, &ck_true, sizeof(CK_BBOOL)),
		ATTR(CKA_MODULUS_BITS, &rsa_bits, sizeof(CK_ULONG)),
		ATTR(CKA_PUBLIC_EXPONENT, rsa_e, sizeof(rsa_e)),
		ATTR(CKA_LABEL, label, ll),
	};
	CK_ATTRIBUTE priv[] = {
		ATTR(CKA_TOKEN, tok, sizeof(CK_BBOOL)),
		ATTR(CKA_PRIVATE, &ck_true, sizeof(CK_BBOOL)),
		ATTR(CKA_SENSITIVE, &ck_true, sizeof(CK_BBOOL)),
		ATTR(CKA_SIGN, &ck_true, sizeof(CK_BBOOL)),
		ATTR(CKA_LABEL, label, ll),
	};
	CK_ATTRIBUTE *pub = ec ? pub_ec : pub_rsa;
	CK_ULONG npub = ec ? 4 : 5, npriv = 5;

	if (!label) { /* the label is the last attribute: leave it out */
		npub--;
		npriv--;
	}
	note_audited(w->a, 1);
	P11(w, f->C_GenerateKeyPair(w->s, &m, pub, npub, priv, npriv, ret_pub, ret_priv),
	    "C_GenerateKeyPair");
	return 0;
}

static int p11_aeskey(struct worker *w, bool token, const char *label, CK_OBJECT_HANDLE *ret)
{
	CK_FUNCTION_LIST *f = w->a->mod->f;
	CK_MECHANISM m = {CKM_AES_KEY_GEN, NULL, 0};
	CK_ATTRIBUTE t[] = {
		ATTR(CKA_CLASS, &cls_secret, sizeof(cls_secret)),
		ATTR(CKA_KEY_TYPE, &kt_aes, sizeof(kt_aes)),
		ATTR(CKA_TOKEN, token ? &ck_true : &ck_false, sizeof(CK_BBOOL)),
		ATTR(CKA_PRIVATE, &ck_true, sizeof(CK_BBOOL)),
		ATTR(CKA_SENSITIVE, &ck_true, sizeof(CK_BBOOL)),
		ATTR(CKA_ENCRYPT, &ck_true, sizeof(CK_BBOOL)),
		ATTR(CKA_DECRYPT, &ck_true, sizeof(CK_BBOOL)),
		ATTR(CKA_VALUE_LEN, &aes_len, sizeof(aes_len)),
		ATTR(CKA_LABEL, label, label ? strlen(label) : 0),
	};

	note_audited(w->a, 1);
	P11(w, f->C_GenerateKey(w->s, &m, t, label ? 9 : 8, ret), "C_GenerateKey");
	return 0;
}

static int p11_encrypt(struct worker *w, const unsigned char iv[12], const unsigned char *in,
		       size_t n, unsigned char *out, size_t *ret_len)
{
	CK_FUNCTION_LIST *f = w->a->mod->f;
	CK_GCM_PARAMS gp = {.pIv = (unsigned char *)iv, .ulIvLen = 12, .ulIvBits = 96,
			    .ulTagBits = 128};
	CK_MECHANISM m = {CKM_AES_GCM, &gp, sizeof(gp)};
	CK_ULONG len = w->cap;

	note_audited(w->a, 1);
	P11(w, f->C_EncryptInit(w->s, &m, w->a->aes), "C_EncryptInit");
	P11(w, f->C_Encrypt(w->s, (unsigned char *)in, n, out, &len), "C_Encrypt");
	if (len != n + 16)
		return work_fail(w, "C_Encrypt", "C_Encrypt: %lu bytes out of %zu, not %zu",
				 (unsigned long)len, n, n + 16);
	*ret_len = len;
	return 0;
}

static int p11_sign(struct worker *w, bool ec, unsigned char *sig, size_t cap, size_t *ret_len)
{
	CK_FUNCTION_LIST *f = w->a->mod->f;
	CK_MECHANISM m = {ec ? CKM_ECDSA : CKM_SHA256_RSA_PKCS, NULL, 0};
	CK_ULONG len = cap;
	size_t want = ec ? 64 : 256;

	note_audited(w->a, 1);
	P11(w, f->C_SignInit(w->s, &m, ec ? w->a->ec_priv : w->a->rsa_priv), "C_SignInit");
	P11(w, f->C_Sign(w->s, w->in, 32, sig, &len), "C_Sign");
	if (len != want)
		return work_fail(w, "C_Sign", "C_Sign: a %lu-byte signature, not %zu",
				 (unsigned long)len, want);
	*ret_len = len;
	return 0;
}

static int p11_find(struct worker *w, bool one)
{
	CK_FUNCTION_LIST *f = w->a->mod->f;
	CK_ATTRIBUTE t[] = {
		ATTR(CKA_CLASS, &cls_secret, sizeof(cls_secret)),
		ATTR(CKA_LABEL, FIND_LABEL, strlen(FIND_LABEL)),
	};
	CK_OBJECT_HANDLE h[FIND_KEYS + 64];
	CK_ULONG got = 0, total = 0, want = one ? 1 : FIND_KEYS + 1;
	CK_RV rv;

	P11(w, f->C_FindObjectsInit(w->s, t, one ? 2 : 1), "C_FindObjectsInit");
	do {
		rv = f->C_FindObjects(w->s, h, sizeof(h) / sizeof(h[0]), &got);
		if (rv != CKR_OK)
			break;
		total += got;
	} while (got == sizeof(h) / sizeof(h[0]));
	note_audited(w->a, 1); /* the record is written by C_FindObjectsFinal */
	CK_RV rv2 = f->C_FindObjectsFinal(w->s);
	if (rv != CKR_OK)
		return p11_fail(w, "C_FindObjects", rv);
	if (rv2 != CKR_OK)
		return p11_fail(w, "C_FindObjectsFinal", rv2);
	if (total != want)
		return work_fail(w, "C_FindObjects", "C_FindObjects: %lu objects found, not %lu",
				 (unsigned long)total, (unsigned long)want);
	return 0;
}

/* One timed call: Init + operation, as a consumer makes it. */
static int p11_op(struct worker *w, enum opid op, size_t n)
{
	CK_FUNCTION_LIST *f = w->a->mod->f;
	struct arm *a = w->a;
	unsigned char iv[12];
	CK_GCM_PARAMS gp = {.pIv = a->ct_iv, .ulIvLen = 12, .ulIvBits = 96, .ulTagBits = 128};
	CK_MECHANISM m = {CKM_AES_GCM, &gp, sizeof(gp)};
	CK_OBJECT_HANDLE h1, h2;
	CK_ULONG len;
	size_t sl;

	switch (op) {
	case OP_ENCRYPT:
		next_iv(w, iv);
		return p11_encrypt(w, iv, w->in, n, w->out, &sl);
	case OP_DECRYPT:
		len = w->cap;
		note_audited(a, 1);
		P11(w, f->C_DecryptInit(w->s, &m, a->aes), "C_DecryptInit");
		P11(w, f->C_Decrypt(w->s, a->ct, a->ct_len, w->out, &len), "C_Decrypt");
		if (len != a->ct_len - 16)
			return work_fail(w, "C_Decrypt", "C_Decrypt: %lu bytes, not %zu",
					 (unsigned long)len, a->ct_len - 16);
		return 0;
	case OP_EC_SIGN:
	case OP_RSA_SIGN:
		return p11_sign(w, op == OP_EC_SIGN, w->out, w->cap, &sl);
	case OP_EC_VERIFY:
	case OP_RSA_VERIFY:
		m = (CK_MECHANISM){op == OP_EC_VERIFY ? CKM_ECDSA : CKM_SHA256_RSA_PKCS, NULL, 0};
		note_audited(a, 1);
		P11(w, f->C_VerifyInit(w->s, &m, op == OP_EC_VERIFY ? a->ec_pub : a->rsa_pub),
		    "C_VerifyInit");
		if (op == OP_EC_VERIFY)
			P11(w, f->C_Verify(w->s, w->in, 32, a->ecsig, a->ecsig_len), "C_Verify");
		else
			P11(w, f->C_Verify(w->s, w->in, 32, a->rsasig, a->rsasig_len), "C_Verify");
		return 0;
	case OP_SHA256: /* C_Digest* writes no audit record */
		m = (CK_MECHANISM){CKM_SHA256, NULL, 0};
		len = w->cap;
		P11(w, f->C_DigestInit(w->s, &m), "C_DigestInit");
		P11(w, f->C_Digest(w->s, w->in, n, w->out, &len), "C_Digest");
		if (len != 32)
			return work_fail(w, "C_Digest", "C_Digest: %lu bytes, not 32",
					 (unsigned long)len);
		return 0;
	case OP_KG_AES: /* session objects: they go with the keygen session */
		return p11_aeskey(w, false, NULL, &h1);
	case OP_KG_EC:
		return p11_keypair(w, true, false, NULL, &h1, &h2);
	case OP_KG_RSA:
		return p11_keypair(w, false, false, NULL, &h1, &h2);
	case OP_FIND_ONE:
		return p11_find(w, true);
	case OP_FIND_ALL:
		return p11_find(w, false);
	}
	return work_fail(w, "?", "unknown operation %d", (int)op);
}

/* ---- the same operations through OpenSSL EVP (the raw arm) ---------------- */

static void rawctx_free(struct rawctx *rc)
{
	EVP_CIPHER_CTX_free(rc->enc);
	EVP_CIPHER_CTX_free(rc->dec);
	EVP_MD_CTX_free(rc->md);
	EVP_PKEY_CTX_free(rc->ec_sign);
	EVP_PKEY_CTX_free(rc->ec_verify);
	EVP_PKEY_CTX_free(rc->rsa_sign);
	EVP_PKEY_CTX_free(rc->rsa_verify);
	EVP_PKEY_CTX_free(rc->kg_ec);
	EVP_PKEY_CTX_free(rc->kg_rsa);
	memset(rc, 0, sizeof(*rc));
}

static EVP_PKEY_CTX *pkey_ctx(EVP_PKEY *k, int (*init)(EVP_PKEY_CTX *), bool rsa_pkcs1,
			      const EVP_MD *md)
{
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_from_pkey(NULL, k, NULL);

	if (!c || init(c) != 1 ||
	    (rsa_pkcs1 && (EVP_PKEY_CTX_set_rsa_padding(c, RSA_PKCS1_PADDING) != 1 ||
			   EVP_PKEY_CTX_set_signature_md(c, md) != 1))) {
		EVP_PKEY_CTX_free(c);
		return NULL;
	}
	return c;
}

/* The contexts one raw worker reuses: the key schedule and the key pairs'
 * operations are set up once, as a module could keep them per key. */
static int rawctx_init(struct worker *w)
{
	struct rawctx *rc = &w->rc;
	const struct rawkeys *k = &w->a->rk;

	rc->enc = EVP_CIPHER_CTX_new();
	rc->dec = EVP_CIPHER_CTX_new();
	rc->md = EVP_MD_CTX_new();
	if (!rc->enc || !rc->dec || !rc->md ||
	    EVP_EncryptInit_ex2(rc->enc, k->aes, k->key, NULL, NULL) != 1 ||
	    EVP_DecryptInit_ex2(rc->dec, k->aes, k->key, NULL, NULL) != 1)
		return ossl_fail(w, "cipher contexts");
	rc->ec_sign = pkey_ctx(k->ec, EVP_PKEY_sign_init, false, NULL);
	rc->ec_verify = pkey_ctx(k->ec, EVP_PKEY_verify_init, false, NULL);
	rc->rsa_sign = pkey_ctx(k->rsa, EVP_PKEY_sign_init, true, k->sha);
	rc->rsa_verify = pkey_ctx(k->rsa, EVP_PKEY_verify_init, true, k->sha);
	if (!rc->ec_sign || !rc->ec_verify || !rc->rsa_sign || !rc->rsa_verify)
		return ossl_fail(w, "key contexts");
	rc->kg_ec = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
	rc->kg_rsa = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
	if (!rc->kg_ec || !rc->kg_rsa || EVP_PKEY_keygen_init(rc->kg_ec) != 1 ||
	    EVP_PKEY_CTX_set_group_name(rc->kg_ec, "P-256") != 1 ||
	    EVP_PKEY_keygen_init(rc->kg_rsa) != 1 ||
	    EVP_PKEY_CTX_set_rsa_keygen_bits(rc->kg_rsa, 2048) != 1)
		return ossl_fail(w, "key generation contexts");
	return 0;
}

static int raw_sha256(struct worker *w, const unsigned char *in, size_t n, unsigned char out[32])
{
	unsigned int len = 0;

	if (EVP_DigestInit_ex2(w->rc.md, w->a->rk.sha, NULL) != 1 ||
	    EVP_DigestUpdate(w->rc.md, in, n) != 1 || EVP_DigestFinal_ex(w->rc.md, out, &len) != 1 ||
	    len != 32)
		return ossl_fail(w, "SHA-256");
	return 0;
}

static int raw_encrypt(struct worker *w, const unsigned char iv[12], const unsigned char *in,
		       size_t n, unsigned char *out)
{
	EVP_CIPHER_CTX *c = w->rc.enc;
	int l1 = 0, l2 = 0;

	if (EVP_EncryptInit_ex2(c, NULL, NULL, iv, NULL) != 1 ||
	    EVP_EncryptUpdate(c, out, &l1, in, (int)n) != 1 ||
	    EVP_EncryptFinal_ex(c, out + l1, &l2) != 1 || (size_t)(l1 + l2) != n ||
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, 16, out + n) != 1)
		return ossl_fail(w, "AES-256-GCM encrypt");
	return 0;
}

static int raw_sign(struct worker *w, bool ec, unsigned char *sig, size_t cap, size_t *ret_len)
{
	unsigned char d[32];
	size_t len = cap;

	if (ec) {
		if (EVP_PKEY_sign(w->rc.ec_sign, sig, &len, w->in, 32) != 1)
			return ossl_fail(w, "ECDSA sign");
	} else {
		if (raw_sha256(w, w->in, 32, d) < 0)
			return -1;
		if (EVP_PKEY_sign(w->rc.rsa_sign, sig, &len, d, 32) != 1)
			return ossl_fail(w, "RSA PKCS#1 v1.5 sign");
	}
	*ret_len = len;
	return 0;
}

static int raw_op(struct worker *w, enum opid op, size_t n)
{
	struct rawctx *rc = &w->rc;
	struct arm *a = w->a;
	unsigned char iv[12], d[32], key[32];
	EVP_PKEY *pk = NULL;
	int l1 = 0, l2 = 0;
	size_t sl;

	switch (op) {
	case OP_ENCRYPT:
		next_iv(w, iv);
		return raw_encrypt(w, iv, w->in, n, w->out);
	case OP_DECRYPT:
		if (EVP_DecryptInit_ex2(rc->dec, NULL, NULL, a->ct_iv, NULL) != 1 ||
		    EVP_DecryptUpdate(rc->dec, w->out, &l1, a->ct, (int)(a->ct_len - 16)) != 1 ||
		    EVP_CIPHER_CTX_ctrl(rc->dec, EVP_CTRL_AEAD_SET_TAG, 16,
					a->ct + a->ct_len - 16) != 1 ||
		    EVP_DecryptFinal_ex(rc->dec, w->out + l1, &l2) != 1)
			return ossl_fail(w, "AES-256-GCM decrypt");
		return 0;
	case OP_EC_SIGN:
	case OP_RSA_SIGN:
		return raw_sign(w, op == OP_EC_SIGN, w->out, w->cap, &sl);
	case OP_EC_VERIFY:
		if (EVP_PKEY_verify(rc->ec_verify, a->ecsig, a->ecsig_len, w->in, 32) != 1)
			return ossl_fail(w, "ECDSA verify");
		return 0;
	case OP_RSA_VERIFY:
		if (raw_sha256(w, w->in, 32, d) < 0)
			return -1;
		if (EVP_PKEY_verify(rc->rsa_verify, a->rsasig, a->rsasig_len, d, 32) != 1)
			return ossl_fail(w, "RSA PKCS#1 v1.5 verify");
		return 0;
	case OP_SHA256:
		return raw_sha256(w, w->in, n, w->out);
	case OP_KG_AES: /* what a module's AES key generation needs: 32 secret random bytes */
		if (RAND_priv_bytes(key, sizeof(key)) != 1)
			return ossl_fail(w, "RAND_priv_bytes");
		OPENSSL_cleanse(key, sizeof(key));
		return 0;
	case OP_KG_EC:
	case OP_KG_RSA:
		if (EVP_PKEY_generate(op == OP_KG_EC ? rc->kg_ec : rc->kg_rsa, &pk) != 1)
			return ossl_fail(w, op == OP_KG_EC ? "EC P-256 keygen" : "RSA-2048 keygen");
		EVP_PKEY_free(pk);
		return 0;
	case OP_FIND_ONE:
	case OP_FIND_ALL:
		break;
	}
	return work_fail(w, "?", "no raw counterpart for operation %d", (int)op);
}

static int do_op(struct worker *w, enum opid op, size_t n)
{
	return w->a->mod ? p11_op(w, op, n) : raw_op(w, op, n);
}

/* ---- workers ---------------------------------------------------------------- */

static void worker_close(struct worker *w)
{
	rawctx_free(&w->rc);
	free(w->in);
	free(w->out);
	w->in = w->out = NULL;
}

/* Buffers for `data` bytes of input, and the raw arm's contexts. */
static int worker_open(struct worker *w, struct arm *a, unsigned idx, size_t data)
{
	*w = (struct worker){.a = a, .idx = idx, .cap = (data < 4096 ? 4096 : data) + 64};
	w->in = malloc(w->cap);
	w->out = malloc(w->cap);
	if (!w->in || !w->out) {
		worker_close(w);
		return work_fail(w, "malloc", "out of memory");
	}
	for (size_t i = 0; i < w->cap; i++)
		w->in[i] = (unsigned char)(i * 31 + 7);
	if (a->mod) {
		w->s = a->sess[idx < a->nsess ? idx : 0];
	} else if (rawctx_init(w) < 0) {
		char e[sizeof(w->err)];
		memcpy(e, w->err, sizeof(e));
		worker_close(w);
		memcpy(w->err, e, sizeof(e));
		return -1;
	}
	return 0;
}

/* ---- module arms: load, configure, prepare the token ----------------------- */

static int arm_error(struct arm *a, const struct worker *w)
{
	snprintf(a->err, sizeof(a->err), "%s", w->err);
	a->failed = true;
	return -1;
}

__attribute__((format(printf, 2, 3))) static int arm_fail(struct arm *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(a->err, sizeof(a->err), fmt, ap);
	va_end(ap);
	a->failed = true;
	return -1;
}

static enum kind module_kind(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	if (strstr(b, "softhsm"))
		return KIND_SOFTHSM;
	if (strstr(b, "softtoken"))
		return KIND_SOFTTOKEN;
	return KIND_RAW; /* unknown */
}

static int module_load(struct module *m)
{
	CK_C_GetFunctionList gfl;
	CK_RV rv;

	m->dl = dlopen(m->path, RTLD_NOW | RTLD_LOCAL);
	if (!m->dl) {
		error_msg("cannot load %s: %s", m->path, dlerror());
		return -1;
	}
	gfl = (CK_C_GetFunctionList)dlsym(m->dl, "C_GetFunctionList");
	if (!gfl) {
		error_msg("%s has no C_GetFunctionList", m->path);
		return -1;
	}
	rv = gfl(&m->f);
	if (rv != CKR_OK || !m->f) {
		error_msg("%s: C_GetFunctionList: %s", m->path, ckr_name(rv));
		return -1;
	}
	return 0;
}

/* The arm's directory and configuration; its variable is set just before its
 * C_Initialize, since both modules read their configuration there. */
static int arm_write_config(struct arm *a, const struct opts *o)
{
	char tokens[PATH_MAX], text[3 * PATH_MAX + 512];

	if (mkdir(a->dir, 0700) < 0 || path_fmt(tokens, sizeof(tokens), "%s/tokens", a->dir) < 0 ||
	    mkdir(tokens, 0700) < 0)
		return arm_fail(a, "cannot make %s: %s", a->dir, strerror(errno));
	if (a->mod->kind == KIND_SOFTHSM) {
		if (path_fmt(a->conf, sizeof(a->conf), "%s/softhsm2.conf", a->dir) < 0)
			return arm_fail(a, "%s: path too long", a->dir);
		snprintf(text, sizeof(text),
			 "# written by " PROG "\n"
			 "directories.tokendir = %s\n"
			 "objectstore.backend = file\n"
			 "log.level = ERROR\n"
			 "slots.removable = false\n",
			 tokens);
	} else {
		if (path_fmt(a->conf, sizeof(a->conf), "%s/softtoken.conf", a->dir) < 0 ||
		    path_fmt(a->audit_dir, sizeof(a->audit_dir), "%s/audit", a->dir) < 0)
			return arm_fail(a, "%s: path too long", a->dir);
		if (mkdir(a->audit_dir, 0700) < 0)
			return arm_fail(a, "cannot make %s: %s", a->audit_dir, strerror(errno));
		snprintf(text, sizeof(text),
			 "# written by " PROG "\n"
			 "token_dir = %s\n"
			 "audit_dir = %s\n"
			 "audit_enabled = %s\n"
			 "audit_sync = %s\n"
			 "pbkdf2_iterations = %u\n",
			 tokens, a->audit_dir, a->audit == AUDIT_OFF ? "false" : "true",
			 o->audit_sync, o->pbkdf2);
		if (o->audit_coalesce_us >= 0) {
			size_t n = strlen(text);
			snprintf(text + n, sizeof(text) - n, "audit_async_coalesce_us = %lld\n",
				 o->audit_coalesce_us);
		}
		for (unsigned i = 0; i < o->ntoken_opt; i++) {
			const char *v = o->token_opt[i], *eq = strchr(v, '=');
			size_t n = strlen(text);
			if (snprintf(text + n, sizeof(text) - n, "%.*s = %s\n", (int)(eq - v), v,
				     eq + 1) >= (int)(sizeof(text) - n))
				return arm_fail(a, "--token-option: the configuration is too long");
		}
	}
	int r = write_file(a->conf, text);
	if (r < 0)
		return arm_fail(a, "cannot write %s: %s", a->conf, strerror(-r));
	return 0;
}

static void pad32(unsigned char out[32], const char *s)
{
	size_t n = strlen(s);

	memset(out, ' ', 32);
	memcpy(out, s, n < 32 ? n : 32);
}

/* The first slot whose token is uninitialised, or (want_label) the one whose
 * token carries our label: SoftHSMv2 renumbers its slots after C_InitToken. */
static int find_slot(struct arm *a, bool want_label, CK_SLOT_ID *ret)
{
	CK_FUNCTION_LIST *f = a->mod->f;
	CK_SLOT_ID *list = NULL;
	CK_ULONG n = 0;
	CK_TOKEN_INFO ti;
	unsigned char label[32];
	CK_RV rv;
	int r = -1;

	pad32(label, TOKEN_LABEL);
	rv = f->C_GetSlotList(CK_TRUE, NULL, &n);
	if (rv != CKR_OK)
		return arm_fail(a, "C_GetSlotList: %s", ckr_name(rv));
	list = calloc(n ? n : 1, sizeof(*list));
	if (!list)
		return arm_fail(a, "out of memory");
	rv = f->C_GetSlotList(CK_TRUE, list, &n);
	if (rv != CKR_OK) {
		free(list);
		return arm_fail(a, "C_GetSlotList: %s", ckr_name(rv));
	}
	for (CK_ULONG i = 0; i < n && r < 0; i++) {
		if (f->C_GetTokenInfo(list[i], &ti) != CKR_OK)
			continue;
		bool init = ti.flags & CKF_TOKEN_INITIALIZED;
		if ((!want_label && !init) ||
		    (want_label && init && memcmp(ti.label, label, 32) == 0)) {
			*ret = list[i];
			r = 0;
		}
	}
	free(list);
	if (r < 0)
		return arm_fail(a, want_label ? "no token labelled '" TOKEN_LABEL "' after C_InitToken"
					      : "no slot with an uninitialised token");
	return 0;
}

#define ARM_P11(a, call, name)                                                       \
	do {                                                                         \
		CK_RV rv_ = (call);                                                  \
		if (rv_ != CKR_OK)                                                   \
			return arm_fail((a), "%s: %s", (name), ckr_name(rv_));       \
	} while (0)

/* C_Initialize, then the token prepared the same way in every module:
 * C_InitToken, an RW session, SO login, C_InitPIN, SO logout, user login, and
 * one session per thread. */
static int arm_initialize(struct arm *a, unsigned nsess)
{
	CK_FUNCTION_LIST *f = a->mod->f;
	CK_C_INITIALIZE_ARGS ia = {.flags = CKF_OS_LOCKING_OK};
	CK_INFO info;
	CK_TOKEN_INFO ti;
	unsigned char label[32];
	const char *var = a->mod->kind == KIND_SOFTHSM ? "SOFTHSM2_CONF" : "SOFTTOKEN_CONF";
	CK_SLOT_ID slot;
	CK_RV rv;

	if (setenv(var, a->conf, 1) < 0)
		return arm_fail(a, "setenv %s: %s", var, strerror(errno));
	note_audited(a, 1);
	rv = f->C_Initialize(&ia);
	if (rv != CKR_OK)
		return arm_fail(a, "C_Initialize (%s=%s): %s", var, a->conf, ckr_name(rv));
	a->initialized = true;
	if (f->C_GetInfo(&info) == CKR_OK) {
		p11_str(a->manufacturer, sizeof(a->manufacturer), info.manufacturerID, 32);
		p11_str(a->description, sizeof(a->description), info.libraryDescription, 32);
		a->lib_major = info.libraryVersion.major;
		a->lib_minor = info.libraryVersion.minor;
		a->ck_major = info.cryptokiVersion.major;
		a->ck_minor = info.cryptokiVersion.minor;
	}
	if (find_slot(a, false, &slot) < 0)
		return -1;
	pad32(label, TOKEN_LABEL);
	note_audited(a, 1);
	ARM_P11(a, f->C_InitToken(slot, (unsigned char *)SO_PIN, strlen(SO_PIN), label),
		"C_InitToken");
	if (find_slot(a, true, &a->slot) < 0)
		return -1;
	if (f->C_GetTokenInfo(a->slot, &ti) == CKR_OK) {
		p11_str(a->token_model, sizeof(a->token_model), ti.model, 16);
		a->fw_major = ti.firmwareVersion.major;
		a->fw_minor = ti.firmwareVersion.minor;
	}
	note_audited(a, 1);
	ARM_P11(a, f->C_OpenSession(a->slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL,
				    &a->sess[0]),
		"C_OpenSession");
	a->nsess = 1;
	note_audited(a, 1);
	ARM_P11(a, f->C_Login(a->sess[0], CKU_SO, (unsigned char *)SO_PIN, strlen(SO_PIN)),
		"C_Login (SO)");
	note_audited(a, 1);
	ARM_P11(a, f->C_InitPIN(a->sess[0], (unsigned char *)USER_PIN, strlen(USER_PIN)),
		"C_InitPIN");
	note_audited(a, 1);
	ARM_P11(a, f->C_Logout(a->sess[0]), "C_Logout (SO)");
	note_audited(a, 1);
	ARM_P11(a, f->C_Login(a->sess[0], CKU_USER, (unsigned char *)USER_PIN, strlen(USER_PIN)),
		"C_Login (user)");
	a->logged_in = true;
	while (a->nsess < nsess) {
		note_audited(a, 1);
		ARM_P11(a, f->C_OpenSession(a->slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL,
					    &a->sess[a->nsess]),
			"C_OpenSession");
		a->nsess++;
	}
	return 0;
}

/* Which keys the selected cases need. */
#define NEED_FIND (1u << 0)
#define NEED_EC (1u << 1)
#define NEED_RSA (1u << 2)

/* The keys, all token objects: the AES-256 working key, 256 more labelled
 * AES keys (257 secret keys for C_FindObjects), an EC P-256 and an RSA-2048
 * pair, each only when a selected case uses it; then the fixtures: a 4 KiB
 * ciphertext and one signature with each pair. */
static int arm_keys(struct arm *a, unsigned need)
{
	struct worker w;
	char label[32];
	CK_OBJECT_HANDLE h;
	size_t len = 0;

	if (worker_open(&w, a, 0, 4096) < 0)
		return arm_error(a, &w);
	if (p11_aeskey(&w, true, "p11bench-aes", &a->aes) < 0)
		goto fail;
	for (unsigned i = 0; i < FIND_KEYS && (need & NEED_FIND); i++) {
		snprintf(label, sizeof(label), "p11bench-find-%03u", i);
		if (p11_aeskey(&w, true, label, &h) < 0)
			goto fail;
		if (g_stop)
			goto stop;
	}
	if ((need & NEED_EC) &&
	    (p11_keypair(&w, true, true, "p11bench-ec", &a->ec_pub, &a->ec_priv) < 0 ||
	     p11_sign(&w, true, a->ecsig, sizeof(a->ecsig), &a->ecsig_len) < 0))
		goto fail;
	if ((need & NEED_RSA) &&
	    (p11_keypair(&w, false, true, "p11bench-rsa", &a->rsa_pub, &a->rsa_priv) < 0 ||
	     p11_sign(&w, false, a->rsasig, sizeof(a->rsasig), &len) < 0))
		goto fail;
	a->rsasig_len = len;
	memset(a->ct_iv, 0xa5, sizeof(a->ct_iv));
	if (p11_encrypt(&w, a->ct_iv, w.in, 4096, a->ct, &a->ct_len) < 0)
		goto fail;
	worker_close(&w);
	return 0;
stop:
	snprintf(w.err, sizeof(w.err), "interrupted");
fail:
	worker_close(&w);
	return arm_error(a, &w);
}

/* Log out, close every session, C_Finalize (timed: our token drains its
 * audit queue there). */
static void arm_finalize(struct arm *a)
{
	CK_FUNCTION_LIST *f = a->mod->f;
	uint64_t t0 = now_ns();
	CK_RV rv;

	if (!a->initialized)
		return;
	if (a->logged_in) {
		note_audited(a, 1);
		(void)f->C_Logout(a->sess[0]);
		a->logged_in = false;
	}
	while (a->nsess) {
		note_audited(a, 1);
		(void)f->C_CloseSession(a->sess[--a->nsess]);
	}
	uint64_t t1 = now_ns();
	note_audited(a, 1);
	rv = f->C_Finalize(NULL);
	a->finalize_ns = now_ns() - t1;
	a->busy_ns += now_ns() - t0;
	a->initialized = false;
	if (rv != CKR_OK && !a->failed)
		arm_fail(a, "C_Finalize: %s", ckr_name(rv));
}

/* ---- the raw arm -------------------------------------------------------------- */

static int raw_setup(struct arm *a)
{
	struct rawkeys *k = &a->rk;
	struct worker w;
	size_t len;

	k->aes = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
	k->sha = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (!k->aes || !k->sha || RAND_bytes(k->key, sizeof(k->key)) != 1)
		return arm_fail(a, "OpenSSL: cannot fetch AES-256-GCM and SHA256");
	k->ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	k->rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	if (!k->ec || !k->rsa)
		return arm_fail(a, "OpenSSL: cannot make the EC and RSA keys");
	if (worker_open(&w, a, 0, 4096) < 0)
		return arm_error(a, &w);
	memset(a->ct_iv, 0xa5, sizeof(a->ct_iv));
	if (raw_encrypt(&w, a->ct_iv, w.in, 4096, a->ct) < 0 ||
	    raw_sign(&w, true, a->ecsig, sizeof(a->ecsig), &a->ecsig_len) < 0 ||
	    raw_sign(&w, false, a->rsasig, sizeof(a->rsasig), &len) < 0) {
		worker_close(&w);
		return arm_error(a, &w);
	}
	a->ct_len = 4096 + 16;
	a->rsasig_len = len;
	worker_close(&w);
	a->initialized = true;
	return 0;
}

static void raw_free(struct arm *a)
{
	EVP_CIPHER_free(a->rk.aes);
	EVP_MD_free(a->rk.sha);
	EVP_PKEY_free(a->rk.ec);
	EVP_PKEY_free(a->rk.rsa);
	OPENSSL_cleanse(a->rk.key, sizeof(a->rk.key));
	memset(&a->rk, 0, sizeof(a->rk));
}

/* ---- our token's audit trail: one record per audited call ------------------ */

/* "type":"event" lines of one file. Keys and values are canonical JSON (no
 * whitespace; a quote inside a string is escaped), so the member cannot
 * appear inside another field. */
static int count_events_file(int dirfd_, const char *name, uint64_t *n)
{
	int fd = openat(dirfd_, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	if (fd < 0)
		return -errno;
	f = fdopen(fd, "r");
	if (!f) {
		int e = errno;
		close(fd);
		return -e;
	}
	while ((len = getline(&line, &cap, f)) > 0)
		if (memmem(line, (size_t)len, "\"type\":\"event\"", 14))
			(*n)++;
	int e = ferror(f) ? EIO : 0;
	free(line);
	fclose(f);
	return -e;
}

/* Every regular file under dir (subdirectories too, a few levels deep). */
static int count_events_dir(const char *dir, unsigned depth, uint64_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int r = 0;

	if (!d)
		return -errno;
	while (r == 0 && (de = readdir(d))) {
		struct stat st;
		char sub[PATH_MAX];
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			break;
		}
		if (S_ISREG(st.st_mode))
			r = count_events_file(dirfd(d), de->d_name, n);
		else if (S_ISDIR(st.st_mode) && depth < 4)
			r = path_fmt(sub, sizeof(sub), "%s/%s", dir, de->d_name) < 0
				    ? -ENAMETOOLONG
				    : count_events_dir(sub, depth + 1, n);
	}
	closedir(d);
	return r;
}

/* After our token's C_Finalize (its audit queue drained): the number of event
 * records in its audit directory must equal the audited calls this harness
 * made, counted by DESIGN.md's table: C_Initialize, C_Finalize, C_InitToken,
 * C_InitPIN, C_OpenSession, C_CloseSession, C_Login, C_Logout, each
 * C_GenerateKey(Pair), each Init + operation pair of sign, verify, encrypt and
 * decrypt, each C_FindObjectsFinal; C_Digest* and the informational calls none.
 * Sets a->found and a->audit_status; returns 0 when they match. */
static int check_audit(struct arm *a)
{
	uint64_t expected = atomic_load(&a->audited);
	int r;

	a->found = 0;
	r = count_events_dir(a->audit_dir, 0, &a->found);
	if (r < 0) {
		a->audit_status = 2;
		error_msg("%s: cannot read the audit trail in %s: %s", a->name, a->audit_dir,
			  strerror(-r));
		return -1;
	}
	if (a->found != expected) {
		a->audit_status = 1;
		error_msg("AUDIT RECORD COUNT MISMATCH: %s made %" PRIu64 " audited calls but %s "
			  "holds %" PRIu64 " event records (%+" PRId64 "): its figures do not count",
			  a->name, expected, a->audit_dir, a->found,
			  (int64_t)a->found - (int64_t)expected);
		return -1;
	}
	a->audit_status = 0;
	return 0;
}

/* ---- running the cases ---------------------------------------------------------- */

#define MAX_ARMS (2 * MAX_MODULES + 1)

struct result {
	struct arm *a;
	struct casedef c;
	uint64_t *samples;
	size_t n, cap;
	uint64_t sum_ns;  /* the samples' sum */
	uint64_t wall_ns; /* threaded: the rounds' wall clock, first start to last end */
	unsigned per;     /* timed calls per worker (thread) */
	double est_ns;    /* median warm-up call */
	bool failed;
	char err[320];
	/* statistics, microseconds */
	double ops, mean, p50, p95, p99, min, max;
	/* against the other arms (our token, audit on) */
	double vs_raw, vs_softhsm, audit_overhead_us;
	double fsync_p50; /* key generation: the fdatasync p50 of the case's own rounds */
	double durable_p50; /* and the p50 of the raw operation followed by one write+fdatasync */
	double durable_out_p50; /* OF_KG_SEARCH: of that, outside EVP_PKEY_generate */
	double kg_allowed; /* and the p50 its target allows, raw p50 + 1.1x that */
	/* Key generation on one of our modules: each call's time in the
	 * fdatasync it made on its own thread (the token's caller commit), or
	 * UINT64_MAX when it made none or more than one; from them the p50 of
	 * that fdatasync and of the call beyond it, over own_calls calls. */
	uint64_t *own;
	double own_fsync_p50, beyond_own_p50;
	size_t own_calls;
	/* OF_KG_SEARCH, every arm: each call's time inside EVP_PKEY_generate
	 * on its own thread, and from them the p50 of that time and of the
	 * call outside it */
	uint64_t *kgt;
	double kg_in_p50, kg_out_p50;
	bool kg_search;    /* judged outside the search (OF_KG_SEARCH, figures at hand) */
	double judged_p50; /* what the key generation rule compared: p50, or kg_out_p50 */
	double kg_fsync;   /* and the fdatasync p50 it allowed 1.1 of */
	bool target_eval, target_pass;
	const char *criterion;
};

struct run {
	const struct opts *o;
	const char *dir; /* the run's directory: the fdatasync probe's file */
	struct casedef *cases;
	unsigned ncases;
	struct result *res;
	size_t nres, capres;
	unsigned case_done, case_total; /* progress */
	size_t max_data;
	bool auto_iter;
};

static struct result *new_result(struct run *R, struct arm *a, const struct casedef *c)
{
	if (R->nres == R->capres) {
		size_t cap = R->capres ? 2 * R->capres : 64;
		struct result *p = realloc(R->res, cap * sizeof(*p));
		if (!p)
			return NULL;
		R->res = p;
		R->capres = cap;
	}
	struct result *r = &R->res[R->nres++];
	*r = (struct result){.a = a, .c = *c, .vs_raw = NAN, .vs_softhsm = NAN,
			     .audit_overhead_us = NAN, .fsync_p50 = NAN, .durable_p50 = NAN,
			     .kg_allowed = NAN, .own_fsync_p50 = NAN, .beyond_own_p50 = NAN,
			     .kg_in_p50 = NAN, .kg_out_p50 = NAN, .judged_p50 = NAN,
			     .durable_out_p50 = NAN, .kg_fsync = NAN,
			     .criterion = ""};
	return r;
}

static int reserve_samples(struct result *r, size_t more)
{
	if (r->n + more <= r->cap)
		return 0;
	size_t cap = r->n + more;
	uint64_t *p = realloc(r->samples, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	r->samples = p;
	if ((r->c.op->fl & OF_KEYGEN) && r->a->mod) {
		uint64_t *q = realloc(r->own, cap * sizeof(*q));
		if (!q)
			return -ENOMEM; /* cap unchanged: the next call tries again */
		r->own = q;
	}
	if (r->c.op->fl & OF_KG_SEARCH) {
		uint64_t *q = realloc(r->kgt, cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		r->kgt = q;
	}
	r->cap = cap;
	return 0;
}

/* How many untimed calls come first: --warmup N, or up to WARM_AUTO within
 * WARM_AUTO_NS; at least one when iterations are automatic (the estimate). */
static bool warm_more(const struct run *R, unsigned done, uint64_t t0)
{
	const struct opts *o = R->o;

	if (o->warmup_set)
		return done < o->warmup || (done == 0 && R->auto_iter);
	return done == 0 || (done < WARM_AUTO && now_ns() - t0 < WARM_AUTO_NS);
}

struct mt_arg {
	const struct run *R;
	struct result *r;
	struct arm *a;
	unsigned idx, warm_mode, iters;
	pthread_barrier_t *bar;
	uint64_t *samples, *est, *own, *kgt;
	unsigned nest, est_cap;
	uint64_t t0, t1;
	int ret;
	char err[320];
};

/* Open a private session for the key generation calls and close it after
 * them, so the session keys they make go away with it. */
static int keygen_session(struct worker *w, bool open)
{
	CK_FUNCTION_LIST *f = w->a->mod->f;

	note_audited(w->a, 1);
	if (open)
		P11(w, f->C_OpenSession(w->a->slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL,
					&w->s),
		    "C_OpenSession");
	else
		P11(w, f->C_CloseSession(w->s), "C_CloseSession");
	return 0;
}

/* One worker's share of a chunk: warm-up (mode 1: --warmup / auto, timed into
 * est[] for the estimate; mode 2: one call when calls are cheap), then `iters`
 * timed calls into samples[]. With a barrier the threads start together. */
static int worker_chunk(struct worker *w, struct mt_arg *m)
{
	const struct casedef *c = &m->r->c;
	enum opid op = c->op->id;
	bool kg = (c->op->fl & OF_KEYGEN) && w->a->mod;
	CK_SESSION_HANDLE saved = w->s;
	uint64_t t0 = now_ns(), t;
	int r = 0;

	if (kg && keygen_session(w, true) < 0) {
		r = -1;
		goto barrier;
	}
	if (m->warm_mode == 1) {
		for (unsigned i = 0; warm_more(m->R, i, t0) && !g_stop; i++) {
			t = now_ns();
			if ((r = do_op(w, op, c->bytes)) < 0)
				goto barrier;
			if (m->est && m->nest < m->est_cap)
				m->est[m->nest++] = now_ns() - t;
		}
	} else if (m->warm_mode == 2) {
		r = do_op(w, op, c->bytes);
	}
barrier:
	if (m->bar)
		pthread_barrier_wait(m->bar);
	m->t0 = now_ns();
	for (unsigned i = 0; r == 0 && i < m->iters; i++) {
		if (g_stop) {
			r = work_fail(w, "interrupted", "interrupted");
			break;
		}
		uint64_t s0 = own_sync.ns, k0 = own_kg.ns;
		unsigned n0 = own_sync.calls;
		t = now_ns();
		r = do_op(w, op, c->bytes);
		m->samples[i] = now_ns() - t;
		if (m->own)
			m->own[i] = own_sync.calls - n0 == 1 ? own_sync.ns - s0 : UINT64_MAX;
		if (m->kgt)
			m->kgt[i] = own_kg.ns - k0;
	}
	m->t1 = now_ns();
	if (kg && w->s != saved) {
		if (keygen_session(w, false) < 0 && r == 0)
			r = -1;
		w->s = saved;
	}
	return r;
}

static void *mt_main(void *p)
{
	struct mt_arg *m = p;
	struct worker w;

	if (worker_open(&w, m->a, m->idx, m->r->c.bytes) < 0) {
		m->ret = -1;
		snprintf(m->err, sizeof(m->err), "%s", w.err);
		pthread_barrier_wait(m->bar);
		m->t0 = m->t1 = now_ns();
		return NULL;
	}
	m->ret = worker_chunk(&w, m);
	if (m->ret < 0)
		snprintf(m->err, sizeof(m->err), "%s", w.err);
	worker_close(&w);
	return NULL;
}

static int est_cmp_set(struct result *r, uint64_t *est, unsigned n)
{
	if (!est || n == 0)
		return 0;
	qsort(est, n, sizeof(*est), cmp_u64);
	r->est_ns = (double)est[n / 2];
	return 0;
}

/* One chunk of case r->c on its arm: `iters` timed calls per worker after the
 * given warm-up. Single-threaded chunks use the arm's main worker. */
static int run_chunk(struct run *R, struct result *r, struct worker *w0, unsigned warm_mode,
		     unsigned iters)
{
	unsigned nt = r->c.threads;
	uint64_t t0 = now_ns();
	uint64_t *est = NULL;
	unsigned per_est = R->o->warmup_set ? R->o->warmup + 1 : WARM_AUTO + 1;
	int ret = 0;

	if (reserve_samples(r, (size_t)nt * iters) < 0)
		return -ENOMEM;
	if (warm_mode == 1) {
		est = calloc((size_t)nt * per_est, sizeof(*est));
		if (!est)
			return -ENOMEM;
	}
	if (nt == 1) {
		struct mt_arg m = {.R = R, .r = r, .a = r->a, .warm_mode = warm_mode,
				   .iters = iters, .samples = r->samples + r->n, .est = est,
				   .est_cap = per_est, .own = r->own ? r->own + r->n : NULL,
				   .kgt = r->kgt ? r->kgt + r->n : NULL};
		ret = worker_chunk(w0, &m);
		if (ret < 0)
			snprintf(r->err, sizeof(r->err), "%s", w0->err);
		else {
			r->n += iters;
			for (unsigned i = 0; i < iters; i++)
				r->sum_ns += m.samples[i];
			r->wall_ns += m.t1 - m.t0;
			est_cmp_set(r, est, m.nest);
		}
	} else {
		pthread_t th[MAX_THREADS];
		struct mt_arg m[MAX_THREADS];
		pthread_barrier_t bar;
		unsigned started = 0, nest = 0;
		uint64_t first = UINT64_MAX, last = 0;

		if (pthread_barrier_init(&bar, NULL, nt + 0) != 0) {
			free(est);
			return -ENOMEM;
		}
		for (unsigned t = 0; t < nt; t++) {
			m[t] = (struct mt_arg){.R = R, .r = r, .a = r->a, .idx = t,
					       .warm_mode = warm_mode, .iters = iters, .bar = &bar,
					       .samples = r->samples + r->n + (size_t)t * iters,
					       .own = r->own ? r->own + r->n + (size_t)t * iters : NULL,
					       .kgt = r->kgt ? r->kgt + r->n + (size_t)t * iters : NULL,
					       .est = est ? est + (size_t)t * per_est : NULL,
					       .est_cap = per_est};
		}
		/* every thread must reach the barrier: start them all or none */
		for (; started < nt; started++)
			if (pthread_create(&th[started], NULL, mt_main, &m[started]) != 0)
				break;
		if (started < nt) {
			/* the started ones wait at the barrier forever: no way back */
			error_msg("pthread_create: %s", strerror(errno));
			exit(1);
		}
		for (unsigned t = 0; t < nt; t++)
			pthread_join(th[t], NULL);
		pthread_barrier_destroy(&bar);
		for (unsigned t = 0; t < nt; t++) {
			if (m[t].ret < 0 && ret == 0) {
				ret = -1;
				snprintf(r->err, sizeof(r->err), "thread %u: %.280s", t, m[t].err);
			}
			first = m[t].t0 < first ? m[t].t0 : first;
			last = m[t].t1 > last ? m[t].t1 : last;
			if (est) {
				memmove(est + nest, est + (size_t)t * per_est,
					m[t].nest * sizeof(*est));
				nest += m[t].nest;
			}
		}
		if (ret == 0) {
			for (size_t i = 0; i < (size_t)nt * iters; i++)
				r->sum_ns += r->samples[r->n + i];
			r->n += (size_t)nt * iters;
			r->wall_ns += last - first;
			est_cmp_set(r, est, nest);
		}
	}
	free(est);
	r->a->busy_ns += now_ns() - t0;
	if (ret < 0) {
		r->failed = true;
		return -1;
	}
	return 0;
}

static unsigned decide_per(const struct run *R, const struct result *r)
{
	unsigned nt = r->c.threads;

	if (!R->auto_iter)
		return nt == 1 ? R->o->iterations : (R->o->iterations + nt - 1) / nt;
	double est = r->est_ns > 0 ? r->est_ns : 1;
	double per = (double)AUTO_BUDGET_NS / est;
	unsigned lo = nt == 1 ? AUTO_MIN : AUTO_MIN_MT;
	unsigned hi = nt == 1 ? AUTO_MAX : (AUTO_MAX / nt > lo ? AUTO_MAX / nt : lo);
	if (per < lo)
		return lo;
	if (per > hi)
		return hi;
	return (unsigned)per;
}

/* The p50s of own[] and of each call beyond it, over the calls that made
 * exactly one fdatasync on their own thread; for a search (kgt[] kept), of
 * each call beyond it and outside EVP_PKEY_generate: the module's own work
 * after the search, its record's write included, which the search's 0.1-1 s
 * would otherwise bury. */
static void own_stats(struct result *r)
{
	uint64_t *o = r->own ? malloc(r->n * sizeof(*o)) : NULL, *b = o ? malloc(r->n * sizeof(*b)) : NULL;
	size_t k = 0;

	for (size_t i = 0; b && i < r->n; i++) {
		if (r->own[i] == UINT64_MAX || r->own[i] > r->samples[i])
			continue;
		uint64_t rest = r->samples[i] - r->own[i];
		if (r->kgt) /* the search, as kg_stats() bounds it */
			rest -= r->kgt[i] < rest ? r->kgt[i] : rest;
		o[k] = r->own[i];
		b[k++] = rest;
	}
	r->own_calls = k;
	if (k) {
		qsort(o, k, sizeof(*o), cmp_u64);
		qsort(b, k, sizeof(*b), cmp_u64);
		r->own_fsync_p50 = (double)pct(o, k, 0.50) / 1e3;
		r->beyond_own_p50 = (double)pct(b, k, 0.50) / 1e3;
	}
	free(o);
	free(b);
}

/* OF_KG_SEARCH: the p50s of kgt[] and of each call outside it. */
static void kg_stats(struct result *r)
{
	uint64_t *in = r->kgt ? malloc(r->n * sizeof(*in)) : NULL,
		 *out = in ? malloc(r->n * sizeof(*out)) : NULL;

	if (out) {
		for (size_t i = 0; i < r->n; i++) {
			in[i] = r->kgt[i] < r->samples[i] ? r->kgt[i] : r->samples[i];
			out[i] = r->samples[i] - in[i];
		}
		qsort(in, r->n, sizeof(*in), cmp_u64);
		qsort(out, r->n, sizeof(*out), cmp_u64);
		r->kg_in_p50 = (double)pct(in, r->n, 0.50) / 1e3;
		r->kg_out_p50 = (double)pct(out, r->n, 0.50) / 1e3;
	}
	free(in);
	free(out);
}

static void result_stats(struct result *r)
{
	if (r->n == 0)
		return;
	/* before the samples are sorted: these pair them with own[] and kgt[] */
	own_stats(r);
	kg_stats(r);
	qsort(r->samples, r->n, sizeof(*r->samples), cmp_u64);
	r->mean = (double)r->sum_ns / (double)r->n / 1e3;
	r->p50 = (double)pct(r->samples, r->n, 0.50) / 1e3;
	r->p95 = (double)pct(r->samples, r->n, 0.95) / 1e3;
	r->p99 = (double)pct(r->samples, r->n, 0.99) / 1e3;
	r->min = (double)r->samples[0] / 1e3;
	r->max = (double)r->samples[r->n - 1] / 1e3;
	if (r->c.threads == 1)
		r->ops = (double)r->n * 1e9 / (double)r->sum_ns;
	else
		r->ops = (double)r->n * 1e9 / (double)(r->wall_ns ? r->wall_ns : 1);
}

static void case_label(const struct casedef *c, char *out, size_t cap)
{
	char sz[24];

	fmt_size(c->bytes, sz, sizeof(sz));
	if (c->bytes && c->threads > 1)
		snprintf(out, cap, "%s %sB x%u", c->op->name, sz, c->threads);
	else if (c->bytes)
		snprintf(out, cap, "%s %sB", c->op->name, sz);
	else
		snprintf(out, cap, "%s", c->op->name);
}

/* One raw pwrite of an audit-line-sized line + fdatasync at the end of fd
 * (the probe file, only ever appended to), its time into *ret; with w,
 * operation op on w first (the raw arm), timed with it, and the part of
 * that time spent outside EVP_PKEY_generate into *ret_out. 0, -errno, or
 * -EPROTO (w->err says it). */
static int durable_sample(int fd, struct worker *w, enum opid op, uint64_t *ret, uint64_t *ret_out)
{
	static char line[FSYNC_LINE];
	static uint64_t off;
	uint64_t t0, k0 = own_kg.ns;

	if (!line[0]) {
		memset(line, 'x', sizeof(line));
		line[sizeof(line) - 1] = '\n';
	}
	t0 = now_ns();
	if (w && do_op(w, op, 0) < 0)
		return -EPROTO;
	ssize_t k = pwrite(fd, line, sizeof(line), (off_t)off);
	if (k != (ssize_t)sizeof(line))
		return k < 0 ? -errno : -EIO;
	if (fdatasync(fd) < 0)
		return -errno;
	*ret = now_ns() - t0;
	if (ret_out)
		*ret_out = *ret - (own_kg.ns - k0);
	off += sizeof(line);
	return 0;
}

/* n durable_samples into dir's probe file (the audit logs' file system),
 * their times into out: what one durable record costs at least. With w, the
 * first nw are each followed by one of operation op on w, times into wout:
 * what a program doing the work and making one line durable by hand costs,
 * the caches it finds after the fdatasync's sleep included. */
static int fsync_burst(const char *dir, unsigned n, uint64_t *out, struct worker *w, enum opid op,
		       unsigned nw, uint64_t *wout, uint64_t *wout_out)
{
	char path[PATH_MAX];
	int fd, r = 0;

	if (path_fmt(path, sizeof(path), "%s/fdatasync-probe.dat", dir) < 0)
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (unsigned i = 0; i < n && r == 0; i++) {
		r = durable_sample(fd, NULL, op, &out[i], NULL);
		if (r == 0 && w && i < nw)
			r = durable_sample(fd, w, op, &wout[i], &wout_out[i]);
	}
	close(fd);
	return r;
}

/* The median of n samples (ns, sorted here) in µs; NAN for none. */
static double p50_us(uint64_t *v, unsigned n)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_u64);
	return (double)pct(v, n, 0.50) / 1e3;
}

/* One case on every arm of the phase: each arm warms up (and estimates its
 * iterations), then the arms take turns in rounds, the first arm of each round
 * rotating, so that the machine's drift hits them all alike. A key generation
 * case has one more member in the rotation: a burst of raw write+fdatasync,
 * the baseline its target is measured against (DESIGN.md: medians against
 * medians, same run), taken while its arms run rather than before and after
 * the whole run: this disk's fdatasync drifts by 50 % within minutes. */
static int run_case(struct run *R, const struct casedef *c, struct arm **arms, struct worker *w0,
		    unsigned narms)
{
	struct result *rs[MAX_ARMS];
	struct worker *ws[MAX_ARMS];
	unsigned m = 0, rounds = ROUNDS, per[MAX_ARMS];
	uint64_t fs[ROUNDS * KG_FSYNC_PER_ROUND], ds[ROUNDS * KG_FSYNC_PER_ROUND],
		dso[ROUNDS * KG_FSYNC_PER_ROUND];
	unsigned nfs = 0, nds = 0;
	struct worker *rw = NULL; /* the raw arm's, for the durable composite */
	char what[96];
	int ret = 0;

	case_label(c, what, sizeof(what));
	for (unsigned k = 0; k < narms; k++) {
		if (arms[k]->failed || (!arms[k]->mod && (c->op->fl & OF_NORAW)))
			continue;
		rs[m] = new_result(R, arms[k], c);
		if (!rs[m])
			return -ENOMEM;
		ws[m++] = &w0[k];
	}
	if (m == 0)
		return 0;
	for (unsigned i = 0; i < m && !g_stop; i++) {
		progress(((double)R->case_done + (double)i / (m * (ROUNDS + 1))) / R->case_total,
			 what, rs[i]->a->name);
		if (run_chunk(R, rs[i], ws[i], 1, 0) < 0)
			ret = -1;
		per[i] = decide_per(R, rs[i]);
		if (per[i] < rounds)
			rounds = per[i];
	}
	bool probe = (c->op->fl & OF_KEYGEN) && R->dir;
	unsigned slots = m + probe, rw_per = 0;
	for (unsigned i = 0; i < m; i++)
		if (!rs[i]->a->mod && !rs[i]->failed) {
			rw = ws[i];
			rw_per = per[i] / rounds; /* as many as the raw arm's rounds hold */
		}
	if (rw_per > KG_FSYNC_PER_ROUND)
		rw_per = KG_FSYNC_PER_ROUND;
	for (unsigned round = 0; round < rounds && !g_stop; round++) {
		for (unsigned j = 0; j < slots; j++) {
			unsigned i = (round + j) % slots;
			if (i == m) {
				/* the plain write+fdatasync and the raw arm's operation
				 * followed by one, interleaved */
				int fr = fsync_burst(R->dir, KG_FSYNC_PER_ROUND, fs + nfs, rw, c->op->id,
						     rw_per, ds + nds, dso + nds);
				if (fr == 0) {
					nfs += KG_FSYNC_PER_ROUND;
					nds += rw_per;
				} else {
					error_msg("%s: write+fdatasync in %s: %s", what, R->dir,
						  fr == -EPROTO ? rw->err : strerror(-fr));
					ret = -1;
					slots = m;
				}
				continue;
			}
			if (rs[i]->failed)
				continue;
			unsigned lo = (unsigned)((uint64_t)per[i] * round / rounds);
			unsigned hi = (unsigned)((uint64_t)per[i] * (round + 1) / rounds);
			bool rewarm = rs[i]->est_ns < REWARM_BELOW_NS &&
				      (!R->o->warmup_set || R->o->warmup > 0);
			progress(((double)R->case_done +
				  (double)(m + round * m + j) / (m * (rounds + 1))) /
					 R->case_total,
				 what, rs[i]->a->name);
			if (run_chunk(R, rs[i], ws[i], rewarm ? 2 : 0, hi - lo) < 0)
				ret = -1;
		}
	}
	double fs50 = p50_us(fs, nfs), ds50 = p50_us(ds, nds), dso50 = p50_us(dso, nds);
	for (unsigned i = 0; i < m; i++) {
		rs[i]->fsync_p50 = fs50;
		rs[i]->durable_p50 = ds50;
		if (c->op->fl & OF_KG_SEARCH)
			rs[i]->durable_out_p50 = dso50;
	}
	for (unsigned i = 0; i < m; i++) {
		if (rs[i]->failed)
			error_msg("%s, %s: %s", rs[i]->a->name, what, rs[i]->err);
		else
			result_stats(rs[i]);
	}
	R->case_done++;
	return g_stop ? -EINTR : ret;
}

/* A phase: set every arm up, run every case on all of them, finalize. */
static int run_phase(struct run *R, struct arm **arms, unsigned narms, unsigned nsess)
{
	struct worker w0[MAX_ARMS];
	unsigned need = 0;
	int ret = 0;

	for (unsigned i = 0; i < R->ncases; i++) {
		enum opid id = R->cases[i].op->id;
		need |= id == OP_FIND_ONE || id == OP_FIND_ALL ? NEED_FIND : 0;
		need |= id == OP_EC_SIGN || id == OP_EC_VERIFY ? NEED_EC : 0;
		need |= id == OP_RSA_SIGN || id == OP_RSA_VERIFY ? NEED_RSA : 0;
	}

	for (unsigned k = 0; k < narms; k++) {
		struct arm *a = arms[k];
		uint64_t t0 = now_ns();
		if (!a->failed) {
			if (a->mod)
				progress((double)R->case_done / R->case_total, "setting up", a->name);
			if (a->mod && arm_initialize(a, nsess) == 0)
				(void)arm_keys(a, need);
			else if (!a->mod)
				(void)raw_setup(a);
		}
		a->setup_ns = now_ns() - t0;
		a->busy_ns += a->setup_ns;
		if (a->failed) {
			error_msg("%s: %s", a->name, a->err);
			ret = -1;
		}
		if (a->failed)
			w0[k] = (struct worker){.a = a};
		else if (worker_open(&w0[k], a, 0, R->max_data) < 0) {
			arm_error(a, &w0[k]);
			error_msg("%s: %s", a->name, a->err);
			ret = -1;
		}
	}
	for (unsigned i = 0; i < R->ncases && !g_stop; i++) {
		int r = run_case(R, &R->cases[i], arms, w0, narms);
		if (r == -ENOMEM) {
			error_msg("out of memory");
			ret = -1;
			break;
		}
		if (r < 0)
			ret = -1;
	}
	for (unsigned k = 0; k < narms; k++) {
		worker_close(&w0[k]);
		if (arms[k]->mod)
			arm_finalize(arms[k]);
	}
	return g_stop ? -EINTR : ret;
}

/* ---- environment and the raw fdatasync --------------------------------------- */

struct env {
	char date[32], host[256], kernel[300], cpu[256];
	long nproc;
	char load_start[64], load_end[64];
	char dir[PATH_MAX], fs_type[32];
	unsigned long fs_magic;
	char openssl[128], compiler[64];
	uint64_t fsync[2 * FSYNC_SAMPLES];
	unsigned nfsync;
	double fsync_p50_us, fsync_p99_us;
	double process_wall_s;
	char ours_absent[PATH_MAX]; /* our token's default path when it is not built */
};

static void gather_env(struct env *e, const char *dir)
{
	struct utsname u;
	struct statfs sf;
	time_t now = time(NULL);
	struct tm tm;
	char buf[1024];

	gmtime_r(&now, &tm);
	strftime(e->date, sizeof(e->date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (gethostname(e->host, sizeof(e->host) - 1) < 0)
		snprintf(e->host, sizeof(e->host), "unknown");
	if (uname(&u) == 0)
		snprintf(e->kernel, sizeof(e->kernel), "%s %s %s %s", u.sysname, u.release,
			 u.version, u.machine);
	snprintf(e->cpu, sizeof(e->cpu), "unknown");
	FILE *f = fopen("/proc/cpuinfo", "re");
	if (f) {
		while (fgets(buf, sizeof(buf), f)) {
			char *c = strchr(buf, ':');
			if (!c || (strncmp(buf, "model name", 10) && strncmp(buf, "Model", 5)))
				continue;
			c++;
			c += strspn(c, " \t");
			c[strcspn(c, "\n")] = '\0';
			snprintf(e->cpu, sizeof(e->cpu), "%s", c);
			break;
		}
		fclose(f);
	}
	e->nproc = sysconf(_SC_NPROCESSORS_ONLN);
	(void)read_small("/proc/loadavg", e->load_start, sizeof(e->load_start));
	if (!realpath(dir, e->dir))
		snprintf(e->dir, sizeof(e->dir), "%s", dir);
	snprintf(e->fs_type, sizeof(e->fs_type), "unknown");
	if (statfs(dir, &sf) == 0) {
		e->fs_magic = (unsigned long)sf.f_type;
		snprintf(e->fs_type, sizeof(e->fs_type), "%s", magic_name(e->fs_magic));
	}
	snprintf(e->openssl, sizeof(e->openssl), "%s", OpenSSL_version(OPENSSL_VERSION));
#ifdef __VERSION__
	snprintf(e->compiler, sizeof(e->compiler), "%s%s",
#ifdef __clang__
		 "clang ",
#else
		 "gcc ",
#endif
		 __VERSION__);
#endif
}

/* FSYNC_SAMPLES raw write+fdatasync (fsync_burst): called at the start and at
 * the end of the run, for the report's environment. */
static int probe_fsync(struct env *e, const char *dir)
{
	int r;

	if (e->nfsync + FSYNC_SAMPLES > 2 * FSYNC_SAMPLES)
		return 0;
	r = fsync_burst(dir, FSYNC_SAMPLES, e->fsync + e->nfsync, NULL, 0, 0, NULL, NULL);
	if (r < 0)
		return r;
	e->nfsync += FSYNC_SAMPLES;
	uint64_t s[2 * FSYNC_SAMPLES];
	memcpy(s, e->fsync, e->nfsync * sizeof(*s));
	qsort(s, e->nfsync, sizeof(*s), cmp_u64);
	e->fsync_p50_us = (double)pct(s, e->nfsync, 0.5) / 1e3;
	e->fsync_p99_us = (double)pct(s, e->nfsync, 0.99) / 1e3;
	return 0;
}

/* ---- comparing the arms: ratios, audit overhead, targets ---------------------- */

static bool same_case(const struct casedef *x, const struct casedef *y)
{
	return x->op == y->op && x->bytes == y->bytes && x->threads == y->threads;
}

static const struct result *find_arm_result(const struct run *R, const struct result *like,
					    enum kind kind, enum audit audit, const struct module *mod)
{
	for (size_t i = 0; i < R->nres; i++) {
		const struct result *r = &R->res[i];
		enum kind k = r->a->mod ? r->a->mod->kind : KIND_RAW;
		if (r->failed || r->n == 0 || !same_case(&r->c, &like->c) || k != kind ||
		    r->a->audit != audit || (mod && r->a->mod != mod))
			continue;
		return r;
	}
	return NULL;
}

/* The fdatasync p50 a key generation row is judged with: its own rounds',
 * else (no probe ran in them) the run's. */
static double kg_fsync_p50(const struct result *r, const struct env *e)
{
	return isfinite(r->fsync_p50) ? r->fsync_p50 : e->fsync_p50_us;
}

/* DESIGN.md, per operation, our token with its audit trail on: ops/s >= 2x
 * SoftHSMv2's, or time <= 1.1x the raw arm's (times per call, 1 / (ops/s):
 * with threads, the throughput); key generation (its record is durable before
 * the call returns): p50 <= the raw arm's p50 + 1.1x the fdatasync p50 of the
 * case's own rounds, medians against medians. */
static void evaluate(struct run *R, const struct env *e)
{
	for (size_t i = 0; i < R->nres; i++) {
		struct result *r = &R->res[i];
		if (r->failed || r->n == 0)
			continue;
		const struct result *raw = find_arm_result(R, r, KIND_RAW, AUDIT_NA, NULL);
		const struct result *hsm = find_arm_result(R, r, KIND_SOFTHSM, AUDIT_NA, NULL);
		if (raw && r->a->mod)
			r->vs_raw = raw->ops / r->ops;
		if (hsm && r->a->mod && r->a->mod->kind != KIND_SOFTHSM)
			r->vs_softhsm = r->ops / hsm->ops;
		if (!r->a->mod || r->a->mod->kind != KIND_SOFTTOKEN || r->a->audit != AUDIT_ON)
			continue;
		const struct result *off =
			find_arm_result(R, r, KIND_SOFTTOKEN, AUDIT_OFF, r->a->mod);
		if (off)
			r->audit_overhead_us = 1e6 / r->ops - 1e6 / off->ops;
		if (!raw && !hsm)
			continue;
		r->target_eval = true;
		bool by_hsm = hsm && r->ops >= T_SOFTHSM * hsm->ops;
		if (r->c.op->fl & OF_KEYGEN) {
			/* A search (RSA): both sides outside EVP_PKEY_generate,
			 * the same function in both arms, timed on the same
			 * calls; and the fdatasync is the one the raw arm's
			 * composite makes right after its own key generation
			 * (its time outside it, less the raw arm's): a disk left
			 * idle through a 0.1-1 s search answers it ~2x slower
			 * than the probe's back-to-back ones (docs/benchmarks.md) */
			bool search = (r->c.op->fl & OF_KG_SEARCH) && raw &&
				      isfinite(raw->kg_out_p50) && isfinite(r->kg_out_p50) &&
				      isfinite(r->durable_out_p50);
			r->kg_search = search;
			r->judged_p50 = search ? r->kg_out_p50 : r->p50;
			r->kg_fsync = search ? r->durable_out_p50 - raw->kg_out_p50 : kg_fsync_p50(r, e);
			if (raw)
				r->kg_allowed = (search ? raw->kg_out_p50 : raw->p50) +
						T_KG_FSYNC * r->kg_fsync;
			bool by_raw = raw && r->judged_p50 <= r->kg_allowed;
			const char *kg = search ? "raw+1.1 fdatasync, search out" : "raw+1.1 fdatasync";
			r->target_pass = by_hsm || by_raw;
			r->criterion = by_raw ? kg : by_hsm ? "2x softhsm2" : raw ? kg : "2x softhsm2";
		} else {
			bool by_raw = raw && r->ops * T_RAW >= raw->ops;
			r->target_pass = by_hsm || by_raw;
			r->criterion = by_hsm ? "2x softhsm2" : by_raw ? "1.1x raw" :
				       hsm    ? "2x softhsm2" : "1.1x raw";
		}
	}
}

/* ---- reports ------------------------------------------------------------------- */

struct report {
	const struct opts *o;
	const struct env *e;
	struct run *R;
	struct arm **arms;
	unsigned narms;
	const char *audit_check; /* "pass", "fail", "not run" */
};

static const char *kind_name(enum kind k)
{
	return k == KIND_SOFTHSM ? "softhsm2" : k == KIND_SOFTTOKEN ? "softtoken" : "raw";
}

static const char *audit_name(enum audit a)
{
	return a == AUDIT_ON ? "on" : a == AUDIT_OFF ? "off" : "n/a";
}

static const char *arm_path(const struct arm *a)
{
	return a->mod ? a->mod->path : "raw";
}

static void print_json(FILE *f, const struct report *P)
{
	const struct env *e = P->e;
	const struct opts *o = P->o;
	struct jw j = {f, true};
	char ver[32];

	jopen(&j, NULL, '{');
	jstr(&j, "tool", PROG);
	jopen(&j, "metadata", '{');
	jstr(&j, "time", e->date);
	jstr(&j, "host", e->host);
	jstr(&j, "cpu", e->cpu);
	ju64(&j, "nproc", (uint64_t)(e->nproc > 0 ? e->nproc : 0));
	jstr(&j, "kernel", e->kernel);
	jstr(&j, "loadavg_start", e->load_start);
	jstr(&j, "loadavg_end", e->load_end);
	jstr(&j, "build_type", P11_BENCH_BUILD_TYPE);
	jstr(&j, "c_flags", P11_BENCH_C_FLAGS);
	jstr(&j, "compiler", e->compiler);
	jstr(&j, "openssl", e->openssl);
	jstr(&j, "dir", e->dir);
	jstr(&j, "fs_type", e->fs_type);
	jfix(&j, "fdatasync_p50_us", e->fsync_p50_us, 1);
	jfix(&j, "fdatasync_p99_us", e->fsync_p99_us, 1);
	ju64(&j, "fdatasync_samples", e->nfsync);
	ju64(&j, "fdatasync_line_bytes", FSYNC_LINE);
	if (o->iterations)
		ju64(&j, "iterations", o->iterations);
	else
		jstr(&j, "iterations", "auto");
	if (o->warmup_set)
		ju64(&j, "warmup", o->warmup);
	else
		jstr(&j, "warmup", "auto");
	ju64(&j, "rounds", ROUNDS);
	jopen(&j, "threads", '[');
	for (unsigned i = 0; i < o->nthreads; i++)
		fprintf(f, "%s%u", i ? "," : "", o->threads[i]);
	jclose(&j, ']');
	jopen(&j, "data_sizes", '[');
	for (unsigned i = 0; i < o->nsizes; i++)
		fprintf(f, "%s%zu", i ? "," : "", o->sizes[i]);
	jclose(&j, ']');
	if (o->only)
		jstr(&j, "only", o->only);
	jstr(&j, "audit_sync", o->audit_sync);
	if (o->audit_coalesce_us >= 0)
		ju64(&j, "audit_async_coalesce_us", (uint64_t)o->audit_coalesce_us);
	if (o->ntoken_opt) {
		jopen(&j, "token_options", '[');
		for (unsigned i = 0; i < o->ntoken_opt; i++)
			jstr(&j, NULL, o->token_opt[i]);
		jclose(&j, ']');
	}
	ju64(&j, "pbkdf2_iterations", o->pbkdf2);
	jfix(&j, "process_wall_s", e->process_wall_s, 3);
	if (e->ours_absent[0]) {
		jstr(&j, "softtoken_absent", e->ours_absent);
	}
	jstr(&j, "audit_check", P->audit_check);
	jopen(&j, "modules", '[');
	for (unsigned k = 0; k < P->narms; k++) {
		const struct arm *a = P->arms[k];
		jopen(&j, NULL, '{');
		jstr(&j, "arm", a->name);
		jstr(&j, "module", arm_path(a));
		jstr(&j, "kind", kind_name(a->mod ? a->mod->kind : KIND_RAW));
		jstr(&j, "audit", audit_name(a->audit));
		if (a->mod) {
			jstr(&j, "manufacturer", a->manufacturer);
			jstr(&j, "library_description", a->description);
			snprintf(ver, sizeof(ver), "%u.%u", a->lib_major, a->lib_minor);
			jstr(&j, "library_version", ver);
			snprintf(ver, sizeof(ver), "%u.%u", a->ck_major, a->ck_minor);
			jstr(&j, "cryptoki_version", ver);
			jstr(&j, "token_model", a->token_model);
			snprintf(ver, sizeof(ver), "%u.%u", a->fw_major, a->fw_minor);
			jstr(&j, "token_firmware", ver);
			jfix(&j, "finalize_ms", (double)a->finalize_ns / 1e6, 3);
		} else {
			jstr(&j, "library_version", e->openssl);
		}
		jfix(&j, "wall_s", (double)a->busy_ns / 1e9, 3);
		jfix(&j, "setup_s", (double)a->setup_ns / 1e9, 3);
		if (a->mod && a->mod->kind == KIND_SOFTTOKEN) {
			ju64(&j, "audited_calls", atomic_load(&a->audited));
			ju64(&j, "audit_records", a->found);
			if (a->audit == AUDIT_ON)
				jstr(&j, "audit_records_check",
				     a->audit_status == 0   ? "pass"
				     : a->audit_status == 1 ? "fail"
				     : a->audit_status == 2 ? "error" : "not run");
		}
		if (a->failed)
			jstr(&j, "error", a->err);
		jclose(&j, '}');
	}
	jclose(&j, ']');
	jclose(&j, '}');
	jopen(&j, "results", '[');
	for (size_t i = 0; i < P->R->nres; i++) {
		const struct result *r = &P->R->res[i];
		jopen(&j, NULL, '{');
		jstr(&j, "module", arm_path(r->a));
		jstr(&j, "arm", r->a->name);
		jstr(&j, "audit", audit_name(r->a->audit));
		jstr(&j, "operation", r->c.op->name);
		ju64(&j, "threads", r->c.threads);
		ju64(&j, "data_bytes", r->c.bytes);
		ju64(&j, "iterations", r->n);
		if (r->failed) {
			jstr(&j, "error", r->err);
			jclose(&j, '}');
			continue;
		}
		jfix(&j, "ops_per_sec", r->ops, 1);
		jfix(&j, "mean_us", r->mean, 3);
		jfix(&j, "p50_us", r->p50, 3);
		jfix(&j, "p95_us", r->p95, 3);
		jfix(&j, "p99_us", r->p99, 3);
		jfix(&j, "min_us", r->min, 3);
		jfix(&j, "max_us", r->max, 3);
		/* the figures a row may lack (NAN) */
		const struct { const char *k; double v; int prec; } opt[] = {
			{"time_vs_raw", r->vs_raw, 3},
			{"ops_vs_softhsm2", r->vs_softhsm, 3},
			{"audit_overhead_us", r->audit_overhead_us, 3},
			{"fdatasync_p50_us", r->fsync_p50, 1},
			{"allowed_p50_us", r->kg_allowed, 1},
			{"raw_then_fdatasync_p50_us", r->durable_p50, 1},
			{"own_fdatasync_p50_us", r->own_fsync_p50, 1},
			{"beyond_own_fdatasync_p50_us", r->beyond_own_p50, 1},
			{"in_keygen_p50_us", r->kg_in_p50, 1},
			{"outside_keygen_p50_us", r->kg_out_p50, 1},
			{"judged_p50_us", r->judged_p50, 1},
			{"raw_then_fdatasync_outside_keygen_p50_us", r->durable_out_p50, 1},
			{"allowed_fdatasync_p50_us", r->kg_fsync, 1},
		};
		for (size_t k = 0; k < sizeof(opt) / sizeof(opt[0]); k++)
			if (isfinite(opt[k].v))
				jfix(&j, opt[k].k, opt[k].v, opt[k].prec);
		if (r->own)
			ju64(&j, "own_fdatasync_calls", r->own_calls);
		if (r->target_eval) {
			jopen(&j, "target", '{');
			jstr(&j, "criterion", r->criterion);
			jbool(&j, "pass", r->target_pass);
			jbool(&j, "counted", strcmp(P->audit_check, "pass") == 0);
			jclose(&j, '}');
		}
		jclose(&j, '}');
	}
	jclose(&j, ']');
	jclose(&j, '}');
	fputc('\n', f);
}

static void csv_field(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\n\r")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void csv_num(FILE *f, double v, int prec)
{
	fputc(',', f);
	if (isfinite(v))
		fprintf(f, "%.*f", prec, v);
}

static void print_csv(FILE *f, const struct report *P)
{
	fputs("module,arm,audit,operation,threads,data_bytes,iterations,ops_per_sec,mean_us,"
	      "p50_us,p95_us,p99_us,min_us,max_us,time_vs_raw,ops_vs_softhsm2,audit_overhead_us,"
	      "target,error\n",
	      f);
	for (size_t i = 0; i < P->R->nres; i++) {
		const struct result *r = &P->R->res[i];
		bool ok = !r->failed;
		csv_field(f, arm_path(r->a));
		fputc(',', f);
		csv_field(f, r->a->name);
		fprintf(f, ",%s,%s,%u,%zu,%zu", audit_name(r->a->audit), r->c.op->name, r->c.threads,
			r->c.bytes, r->n);
		csv_num(f, ok ? r->ops : NAN, 1);
		csv_num(f, ok ? r->mean : NAN, 3);
		csv_num(f, ok ? r->p50 : NAN, 3);
		csv_num(f, ok ? r->p95 : NAN, 3);
		csv_num(f, ok ? r->p99 : NAN, 3);
		csv_num(f, ok ? r->min : NAN, 3);
		csv_num(f, ok ? r->max : NAN, 3);
		csv_num(f, r->vs_raw, 3);
		csv_num(f, r->vs_softhsm, 3);
		csv_num(f, r->audit_overhead_us, 3);
		fprintf(f, ",%s,", r->target_eval ? (r->target_pass ? "pass" : "fail") : "");
		if (r->failed)
			csv_field(f, r->err);
		fputc('\n', f);
	}
}

static void print_table(FILE *f, const struct report *P)
{
	const struct env *e = P->e;
	const struct opts *o = P->o;
	const struct run *R = P->R;
	char a[32], b[32], sz[24], m[8][16];
	bool any_ours = false, any_hsm = false;

	fprintf(f, PROG ": %s, %s\n\n", e->date, e->host);
	fprintf(f, "environment\n");
	fprintf(f, "  kernel        %s\n", e->kernel);
	fprintf(f, "  cpu           %s, %ld online\n", e->cpu, e->nproc);
	fprintf(f, "  load average  %s at the start, %s at the end\n", e->load_start, e->load_end);
	fprintf(f, "  build         %s (%s), %s, %s\n", P11_BENCH_BUILD_TYPE, P11_BENCH_C_FLAGS,
		e->compiler[0] ? e->compiler : "unknown compiler", e->openssl);
	fprintf(f, "  directory     %s (%s)\n", e->dir, e->fs_type);
	fprintf(f, "  fdatasync     p50 %.1f us, p99 %.1f us: pwrite of a %u-byte line + fdatasync "
		   "there, %u samples of this run\n",
		e->fsync_p50_us, e->fsync_p99_us, FSYNC_LINE, e->nfsync);
	if (o->iterations)
		snprintf(a, sizeof(a), "%u", o->iterations);
	else
		snprintf(a, sizeof(a), "auto (~%.1f s)", (double)AUTO_BUDGET_NS / 1e9);
	if (o->warmup_set)
		snprintf(b, sizeof(b), "%u", o->warmup);
	else
		snprintf(b, sizeof(b), "auto (<= %u)", WARM_AUTO);
	fprintf(f, "  method        iterations %s per module and operation, warm-up %s, in %u "
		   "rounds alternating the modules\n",
		a, b, ROUNDS);

	fprintf(f, "\nmodules\n");
	for (unsigned k = 0; k < P->narms; k++) {
		const struct arm *ar = P->arms[k];
		if (!ar->mod) {
			fprintf(f, "  %-20s %s EVP, in process\n", ar->name, e->openssl);
			continue;
		}
		any_ours |= ar->mod->kind == KIND_SOFTTOKEN && ar->audit == AUDIT_ON;
		any_hsm |= ar->mod->kind == KIND_SOFTHSM;
		fprintf(f, "  %-20s %s: %s %u.%u (%s), cryptoki %u.%u%s%s\n", ar->name, ar->mod->path,
			ar->description, ar->lib_major, ar->lib_minor, ar->manufacturer, ar->ck_major,
			ar->ck_minor,
			ar->mod->kind == KIND_SOFTTOKEN
				? (ar->audit == AUDIT_ON ? ", audit on" : ", audit off")
				: "",
			ar->failed ? " [FAILED]" : "");
	}
	if (e->ours_absent[0])
		fprintf(f, "  %-20s %s: not built yet (no such file): SoftHSMv2 and raw only; its "
			   "rows come when it exists\n",
			"softtoken", e->ours_absent);

	fprintf(f, "\nresults: microseconds per call (Init + operation); ops/s of all threads\n");
	fprintf(f, "  %-18s %5s %3s  %-18s %6s %11s %9s %9s %9s %9s %9s %9s %7s %7s\n", "operation",
		"bytes", "thr", "module", "iters", "ops/s", "mean", "p50", "p95", "p99", "min", "max",
		"vs raw", any_hsm ? "vs hsm" : "");
	const struct casedef *prev = NULL;
	for (size_t i = 0; i < R->nres; i++) {
		const struct result *r = &R->res[i];
		bool same = prev && same_case(prev, &r->c);
		if (r->c.bytes)
			fmt_size(r->c.bytes, sz, sizeof(sz));
		else
			snprintf(sz, sizeof(sz), "-");
		if (same)
			fprintf(f, "  %-18s %5s %3s  ", "", "", "");
		else
			fprintf(f, "%s  %-18s %5s %3u  ", prev ? "\n" : "", r->c.op->name, sz,
				r->c.threads);
		prev = &r->c;
		if (r->failed) {
			fprintf(f, "%-18s FAILED: %s\n", r->a->name, r->err);
			continue;
		}
		fmt_count(r->ops, a, sizeof(a));
		fmt_us(r->mean, m[0], 16);
		fmt_us(r->p50, m[1], 16);
		fmt_us(r->p95, m[2], 16);
		fmt_us(r->p99, m[3], 16);
		fmt_us(r->min, m[4], 16);
		fmt_us(r->max, m[5], 16);
		if (isfinite(r->vs_raw))
			snprintf(m[6], 16, "%.2fx", r->vs_raw);
		else
			snprintf(m[6], 16, "%s", "");
		if (isfinite(r->vs_softhsm))
			snprintf(m[7], 16, "%.2fx", r->vs_softhsm);
		else
			snprintf(m[7], 16, "%s", "");
		fprintf(f, "%-18s %6zu %11s %9s %9s %9s %9s %9s %9s %7s %7s\n", r->a->name, r->n, a,
			m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7]);
	}
	fprintf(f, "\n  vs raw: time per call relative to the raw arm (1 / ops/s); vs hsm: ops/s "
		   "relative to SoftHSMv2's\n");

	fprintf(f, "\nper module (whole run)\n");
	fprintf(f, "  %-20s %12s %10s %14s %14s %14s\n", "module", "wall in calls", "setup",
		"C_Finalize", "audited calls", "audit records");
	for (unsigned k = 0; k < P->narms; k++) {
		const struct arm *ar = P->arms[k];
		char fin[32] = "-", exp_[32] = "-", got[48] = "-";
		if (ar->mod)
			snprintf(fin, sizeof(fin), "%.3f ms", (double)ar->finalize_ns / 1e6);
		if (ar->mod && ar->mod->kind == KIND_SOFTTOKEN) {
			fmt_count((double)atomic_load(&ar->audited), exp_, sizeof(exp_));
			fmt_count((double)ar->found, a, sizeof(a));
			snprintf(got, sizeof(got), "%s%s", a,
				 ar->audit != AUDIT_ON     ? ""
				 : ar->audit_status == 0 ? " (equal)"
				 : ar->audit_status == 1 ? " (MISMATCH)"
							 : " (unread)");
		}
		fprintf(f, "  %-20s %10.3f s %8.3f s %14s %14s %14s\n", ar->name,
			(double)ar->busy_ns / 1e9, (double)ar->setup_ns / 1e9, fin, exp_, got);
	}
	fprintf(f, "  whole process: %.3f s wall clock (every arm, setup and each C_Finalize's "
		   "audit drain included)\n",
		e->process_wall_s);

	fprintf(f, "\ntargets (DESIGN.md): our token with its audit trail on, per operation\n");
	if (!any_ours) {
		fprintf(f, "  not evaluated: our token did not run\n");
		return;
	}
	if (strcmp(P->audit_check, "pass") != 0)
		fprintf(f, "  NOT COUNTED: the audit log does not hold one record per audited call "
			   "(above)\n");
	fprintf(f, "  %-18s %5s %3s %12s %12s %12s %12s  %-17s %s\n", "operation", "bytes", "thr",
		"ops/s", "2x softhsm2", "raw ops/s", "audit us", "criterion", "result");
	for (size_t i = 0; i < R->nres; i++) {
		const struct result *r = &R->res[i];
		if (!r->a->mod || r->a->mod->kind != KIND_SOFTTOKEN || r->a->audit != AUDIT_ON ||
		    r->failed)
			continue;
		const struct result *raw = find_arm_result(R, r, KIND_RAW, AUDIT_NA, NULL);
		const struct result *hsm = find_arm_result(R, r, KIND_SOFTHSM, AUDIT_NA, NULL);
		char h[32] = "-", rw[32] = "-", ov[32] = "-";
		if (hsm)
			fmt_count(2 * hsm->ops, h, sizeof(h));
		if (raw)
			fmt_count(raw->ops, rw, sizeof(rw));
		if (isfinite(r->audit_overhead_us))
			snprintf(ov, sizeof(ov), "%+.2f", r->audit_overhead_us);
		fmt_count(r->ops, a, sizeof(a));
		if (r->c.bytes)
			fmt_size(r->c.bytes, sz, sizeof(sz));
		else
			snprintf(sz, sizeof(sz), "-");
		fprintf(f, "  %-18s %5s %3u %12s %12s %12s %12s  %-17s %s\n", r->c.op->name, sz,
			r->c.threads, a, h, rw, ov, r->criterion,
			!r->target_eval ? "-" : r->target_pass ? "PASS" : "FAIL");
	}
	fprintf(f, "  audit us: time per call with the audit trail on minus off; key generation "
		   "passes when its p50 <= raw p50 + 1.1 x the fdatasync p50 measured in its rounds;\n"
		   "  RSA's (a prime search) when its p50 outside EVP_PKEY_generate <= raw's + 1.1 x "
		   "the write+fdatasync p50 a raw program makes right after its own key generation\n");
	for (size_t i = 0; i < R->nres; i++) {
		const struct result *r = &R->res[i];
		if (r->target_eval && isfinite(r->kg_allowed)) {
			/* a second module of ours (--module twice) is named */
			bool other = strcmp(r->a->name, "softtoken") != 0;
			const struct result *raw = find_arm_result(R, r, KIND_RAW, AUDIT_NA, NULL);
			if (r->kg_search && raw)
				fprintf(f, "  %-18s%s%s%s p50 %.1f us (in EVP_PKEY_generate %.1f, outside "
					   "%.1f), allowed outside %.1f us (raw's outside %.1f + 1.1 x "
					   "write+fdatasync after a raw key generation, p50 %.1f us; "
					   "back to back: %.1f us)",
					r->c.op->name, other ? " (" : "", other ? r->a->name : "",
					other ? ")" : "", r->p50, r->kg_in_p50, r->kg_out_p50,
					r->kg_allowed, raw->kg_out_p50, r->kg_fsync, kg_fsync_p50(r, e));
			else
				fprintf(f, "  %-18s%s%s%s p50 %.1f us, allowed %.1f us (raw p50 + 1.1 x "
					   "fdatasync p50 %.1f us)",
					r->c.op->name, other ? " (" : "", other ? r->a->name : "",
					other ? ")" : "", r->p50, r->kg_allowed, r->kg_fsync);
			if (isfinite(r->durable_p50))
				fprintf(f, "; raw then one write+fdatasync: p50 %.1f us", r->durable_p50);
			if (r->own_calls)
				fprintf(f, "; beyond its own fdatasync (p50 %.1f us, %zu of %zu calls)%s: p50 %.1f us",
					r->own_fsync_p50, r->own_calls, r->n,
					r->kgt ? " and outside EVP_PKEY_generate" : "", r->beyond_own_p50);
			fputc('\n', f);
		}
	}
}

/* ---- --compare ------------------------------------------------------------------ */

static json_t *load_report(const char *path)
{
	json_error_t je;
	json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);

	if (!j) {
		error_msg("%s:%d: not a JSON report: %s", path, je.line, je.text);
		return NULL;
	}
	if (!json_is_array(json_object_get(j, "results"))) {
		error_msg("%s: no \"results\" array (make it with --format json)", path);
		json_decref(j);
		return NULL;
	}
	return j;
}

/* The identity of a result across runs: the arm's name (stable between two
 * builds of one module, unlike its path), operation, threads, size. */
static bool result_key(json_t *it, char *out, size_t cap)
{
	json_t *arm = json_object_get(it, "arm");
	const char *a = json_string_value(arm ? arm : json_object_get(it, "module"));
	const char *op = json_string_value(json_object_get(it, "operation"));
	json_t *t = json_object_get(it, "threads"), *b = json_object_get(it, "data_bytes");

	if (!a || !op || !json_is_integer(t) || !json_is_integer(b))
		return false;
	snprintf(out, cap, "%s|%s|%" JSON_INTEGER_FORMAT "|%" JSON_INTEGER_FORMAT, a, op,
		 json_integer_value(t), json_integer_value(b));
	return true;
}

/* Ops/s of every result in cur against the same result in base; returns the
 * number of regressions beyond threshold percent. */
static int compare_reports(FILE *f, const char *base_path, json_t *base, json_t *cur,
			   double threshold)
{
	json_t *br = json_object_get(base, "results"), *cr = json_object_get(cur, "results");
	size_t i, k;
	json_t *it, *bt;
	unsigned compared = 0, regressions = 0, unmatched = 0;
	char key[512], bkey[512], x[32], y[32];

	fprintf(f, "\ncompare: ops/s against %s (regression: slower by more than %.1f%%)\n",
		base_path, threshold);
	fprintf(f, "  %-20s %-18s %7s %3s %14s %14s %9s\n", "arm", "operation", "bytes", "thr",
		"baseline", "current", "change");
	json_array_foreach(cr, i, it) {
		double c = json_number_value(json_object_get(it, "ops_per_sec"));
		json_t *found = NULL;
		if (!result_key(it, key, sizeof(key)) ||
		    !json_is_number(json_object_get(it, "ops_per_sec")))
			continue;
		json_array_foreach(br, k, bt) {
			if (result_key(bt, bkey, sizeof(bkey)) && strcmp(key, bkey) == 0 &&
			    json_is_number(json_object_get(bt, "ops_per_sec"))) {
				found = bt;
				break;
			}
		}
		if (!found) {
			unmatched++;
			continue;
		}
		double b = json_number_value(json_object_get(found, "ops_per_sec"));
		double ch = b > 0 ? (c / b - 1) * 100 : 0;
		bool reg = b > 0 && c < b * (1 - threshold / 100);
		compared++;
		regressions += reg;
		fmt_count(b, x, sizeof(x));
		fmt_count(c, y, sizeof(y));
		fprintf(f, "  %-20s %-18s %7" JSON_INTEGER_FORMAT " %3" JSON_INTEGER_FORMAT
			   " %14s %14s %+8.1f%%%s\n",
			json_string_value(json_object_get(it, "arm"))
				? json_string_value(json_object_get(it, "arm"))
				: json_string_value(json_object_get(it, "module")),
			json_string_value(json_object_get(it, "operation")),
			json_integer_value(json_object_get(it, "data_bytes")),
			json_integer_value(json_object_get(it, "threads")), x, y, ch,
			reg ? "  REGRESSION" : "");
	}
	fprintf(f, "  %u results compared, %u slower beyond %.1f%%, %u without a baseline\n",
		compared, regressions, threshold, unmatched);
	return (int)regressions;
}

static int compare_files(const struct opts *o, json_t *cur_mem)
{
	json_t *base = load_report(o->compare), *cur = cur_mem;
	int n;

	if (!base)
		return 2;
	if (!cur) {
		cur = load_report(o->input);
		if (!cur) {
			json_decref(base);
			return 2;
		}
	} else {
		json_incref(cur);
	}
	/* stdout carries a JSON or CSV report: keep it parseable */
	FILE *f = (o->format != FMT_TABLE && !o->output && !o->input) ? stderr : stdout;
	n = compare_reports(f, o->compare, base, cur, o->threshold);
	json_decref(base);
	json_decref(cur);
	return n > 0 ? 3 : 0;
}

/* ---- main ------------------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (remove(path) < 0)
		error_msg("cannot remove %s: %s", path, strerror(errno));
	return 0;
}

static void remove_tree(const char *dir)
{
	if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0)
		error_msg("cannot remove %s: %s", dir, strerror(errno));
}

/* Our token's default path: given by CMake once the target exists, else
 * where the build puts it next to this program (<build>/token/). */
static void default_ours(char *out, size_t cap)
{
#ifdef P11_BENCH_SOFTTOKEN
	snprintf(out, cap, "%s", P11_BENCH_SOFTTOKEN);
#else
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0) {
		snprintf(out, cap, "libsofttoken.so");
		return;
	}
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	snprintf(out, cap, "%s/../token/libsofttoken.so", exe);
#endif
}

static void name_arm(struct arm *a, struct arm *const *arms, unsigned narms, const char *base)
{
	snprintf(a->name, sizeof(a->name), "%s", base);
	for (unsigned n = 2;; n++) {
		bool dup = false;
		for (unsigned k = 0; k < narms; k++)
			dup |= arms[k] != a && strcmp(arms[k]->name, a->name) == 0;
		if (!dup)
			return;
		snprintf(a->name, sizeof(a->name), "%s-%u", base, n);
	}
}

int main(int argc, char **argv)
{
	static struct module mods[MAX_MODULES];
	static struct arm armv[MAX_ARMS];
	struct arm *all[MAX_ARMS], *p1[MAX_ARMS], *p2[MAX_ARMS];
	unsigned nmods = 0, nall = 0, n1 = 0, n2 = 0, nsess = 1;
	struct opts o;
	struct env e = {0};
	struct run R = {0};
	char tmpl[PATH_MAX], ours[PATH_MAX];
	struct stat st;
	uint64_t t_start = now_ns();
	int ret = 0;
	bool failed = false;

	parse_args(argc, argv, &o);
	if (o.input)
		return compare_files(&o, NULL);
	g_tty = isatty(STDERR_FILENO);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	/* the modules: named, or ours and SoftHSMv2 by default */
	if (o.nmodules == 0) {
		default_ours(ours, sizeof(ours));
		if (access(ours, F_OK) == 0)
			o.modules[o.nmodules++] = ours;
		else
			snprintf(e.ours_absent, sizeof(e.ours_absent), "%s", ours);
		if (access(SOFTHSM_DEFAULT, F_OK) == 0)
			o.modules[o.nmodules++] = SOFTHSM_DEFAULT;
		else
			error_msg("SoftHSMv2 is not installed (%s): apt-get install softhsm2",
				  SOFTHSM_DEFAULT);
		if (e.ours_absent[0])
			error_msg("our token %s does not exist (not built yet): running %sraw only",
				  ours, o.nmodules ? "SoftHSMv2 and " : "");
		if (o.nmodules == 0 && o.no_raw)
			bad_arg("nothing to measure: no module found and --no-raw");
	}
	for (unsigned i = 0; i < o.nmodules; i++) {
		struct module *m = &mods[nmods];
		if (access(o.modules[i], R_OK) < 0)
			bad_arg("--module %s: %s", o.modules[i], strerror(errno));
		if (!realpath(o.modules[i], m->real))
			bad_arg("--module %s: %s", o.modules[i], strerror(errno));
		if (path_fmt(m->path, sizeof(m->path), "%s", o.modules[i]) < 0)
			bad_arg("--module %s: path too long", o.modules[i]);
		m->kind = module_kind(m->path);
		if (m->kind == KIND_RAW)
			bad_arg("--module %s: cannot tell how to configure it: its file name must "
				"contain 'softtoken' (ours, SOFTTOKEN_CONF) or 'softhsm' (SoftHSMv2, "
				"SOFTHSM2_CONF)",
				o.modules[i]);
		for (unsigned k = 0; k < nmods; k++)
			if (strcmp(mods[k].real, m->real) == 0)
				bad_arg("--module %s: given twice", o.modules[i]);
		nmods++;
	}

	/* the run's directory: on a disk, for the audit trail's fdatasync */
	const char *base = o.dir ? o.dir : "/var/tmp";
	if (stat(base, &st) < 0)
		bad_arg("--dir %s: %s", base, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		bad_arg("--dir %s: not a directory", base);
	if (path_fmt(tmpl, sizeof(tmpl), "%s/p11-bench.XXXXXX", base) < 0)
		bad_arg("--dir %s: path too long", base);
	if (!mkdtemp(tmpl)) {
		error_msg("cannot create a directory under %s: %s", base, strerror(errno));
		return 1;
	}
	gather_env(&e, tmpl);
	if (e.fs_magic == TMPFS_MAGIC || e.fs_magic == RAMFS_MAGIC) {
		error_msg("refusing %s: it is on %s, where fdatasync reaches no disk and the audit "
			  "trail's durability costs nothing; use --dir on a disk-backed file system",
			  tmpl, e.fs_type);
		remove_tree(tmpl);
		return 2;
	}
	int r = probe_fsync(&e, tmpl);
	if (r < 0) {
		error_msg("write+fdatasync in %s: %s", tmpl, strerror(-r));
		ret = 1;
		goto out;
	}

	/* arms: phase 1 every module (ours with audit on) and raw, alternating;
	 * phase 2 our token(s) again with the audit trail off */
	for (unsigned i = 0; i < nmods; i++) {
		struct module *m = &mods[i];
		struct arm *a = &armv[nall];
		if (module_load(m) < 0) {
			ret = 1;
			goto out;
		}
		*a = (struct arm){.mod = m, .audit_status = -1,
				  .audit = m->kind == KIND_SOFTTOKEN ? AUDIT_ON : AUDIT_NA};
		all[nall++] = a;
		name_arm(a, all, nall, kind_name(m->kind));
		p1[n1++] = a;
	}
	if (!o.no_raw) {
		struct arm *a = &armv[nall];
		*a = (struct arm){.audit_status = -1};
		all[nall++] = a;
		name_arm(a, all, nall, "raw");
		p1[n1++] = a;
	}
	for (unsigned i = 0; i < n1 && !o.no_audit_off; i++) {
		if (!p1[i]->mod || p1[i]->mod->kind != KIND_SOFTTOKEN)
			continue;
		struct arm *a = &armv[nall];
		char nm[64];
		*a = (struct arm){.mod = p1[i]->mod, .audit = AUDIT_OFF, .audit_status = -1};
		all[nall++] = a;
		snprintf(nm, sizeof(nm), "%.50s-noaudit", p1[i]->name);
		name_arm(a, all, nall, nm);
		p2[n2++] = a;
	}
	for (unsigned k = 0; k < nall; k++) {
		struct arm *a = all[k];
		if (path_fmt(a->dir, sizeof(a->dir), "%s/%s", tmpl, a->name) < 0) {
			error_msg("%s: path too long", tmpl);
			ret = 1;
			goto out;
		}
		if (a->mod && arm_write_config(a, &o) < 0) {
			error_msg("%s: %s", a->name, a->err);
			ret = 1;
			goto out;
		}
	}

	R.o = &o;
	R.dir = tmpl;
	R.auto_iter = o.iterations == 0;
	R.ncases = build_cases(&o, &R.cases);
	if (R.ncases == 0) {
		error_msg("out of memory");
		ret = 1;
		goto out;
	}
	R.max_data = 4096;
	for (unsigned i = 0; i < R.ncases; i++) {
		if (R.cases[i].bytes > R.max_data)
			R.max_data = R.cases[i].bytes;
		if (R.cases[i].threads > nsess)
			nsess = R.cases[i].threads;
	}
	R.case_total = R.ncases * (n2 ? 2 : 1);

	if (run_phase(&R, p1, n1, nsess) < 0)
		failed = true;
	for (unsigned k = 0; k < n1; k++)
		if (p1[k]->audit == AUDIT_ON && !p1[k]->failed && !g_stop &&
		    check_audit(p1[k]) < 0)
			failed = true;
	if (n2 && !g_stop) {
		if (run_phase(&R, p2, n2, nsess) < 0)
			failed = true;
		for (unsigned k = 0; k < n2; k++) {
			uint64_t want = atomic_load(&p2[k]->audited);
			(void)count_events_dir(p2[k]->audit_dir, 0, &p2[k]->found);
			if (p2[k]->found)
				error_msg("note: %s wrote %" PRIu64 " event records with audit_enabled = "
					  "false (%" PRIu64 " audited calls)",
					  p2[k]->name, p2[k]->found, want);
		}
	}
	clear_bar();
	if (g_stop) {
		error_msg("interrupted");
		ret = 1;
		goto out;
	}
	(void)probe_fsync(&e, tmpl);
	(void)read_small("/proc/loadavg", e.load_end, sizeof(e.load_end));
	e.process_wall_s = (double)(now_ns() - t_start) / 1e9;
	evaluate(&R, &e);

	const char *check = "not run";
	for (unsigned k = 0; k < n1; k++)
		if (p1[k]->audit == AUDIT_ON)
			check = p1[k]->audit_status == 0 && strcmp(check, "fail") != 0 ? "pass" : "fail";
	for (unsigned k = 0; k < nall; k++)
		failed |= all[k]->failed;
	for (size_t i = 0; i < R.nres; i++)
		failed |= R.res[i].failed;

	struct report P = {.o = &o, .e = &e, .R = &R, .arms = all, .narms = nall,
			   .audit_check = check};
	FILE *out = stdout;
	if (o.output) {
		out = fopen(o.output, "we");
		if (!out) {
			error_msg("cannot write %s: %s", o.output, strerror(errno));
			ret = 1;
			goto out;
		}
	}
	if (o.format == FMT_JSON)
		print_json(out, &P);
	else if (o.format == FMT_CSV)
		print_csv(out, &P);
	else
		print_table(out, &P);
	if (out != stdout ? fclose(out) != 0 : fflush(out) != 0) {
		error_msg("cannot write %s: %s", o.output ? o.output : "stdout", strerror(errno));
		failed = true;
	}
	ret = failed ? 1 : 0;
	if (o.compare) {
		char *buf = NULL;
		size_t len = 0;
		FILE *mf = open_memstream(&buf, &len);
		json_t *cur = NULL;
		if (mf) {
			print_json(mf, &P);
			fclose(mf);
			cur = json_loadb(buf, len, 0, NULL);
		}
		free(buf);
		if (!cur) {
			error_msg("cannot build this run's JSON for --compare");
			ret = 1;
		} else {
			int c = compare_files(&o, cur);
			json_decref(cur);
			if (ret == 0)
				ret = c;
		}
	}
out:
	clear_bar();
	for (unsigned k = 0; k < nall; k++) {
		if (all[k]->mod && all[k]->initialized)
			arm_finalize(all[k]);
		if (!all[k]->mod)
			raw_free(all[k]);
	}
	/* the modules stay loaded: unloading SoftHSMv2 races its atexit handlers */
	for (size_t i = 0; i < R.nres; i++) {
		free(R.res[i].samples);
		free(R.res[i].own);
		free(R.res[i].kgt);
	}
	free(R.res);
	free(R.cases);
	if (o.keep)
		error_msg("files kept in %s", tmpl);
	else
		remove_tree(tmpl);
	return ret;
}
