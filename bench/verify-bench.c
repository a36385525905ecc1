/* SPDX-License-Identifier: MIT */
/*
 * verify-bench: the verifier's figures (docs/benchmarks.md), each next to a
 * baseline measured in the same run on the same file:
 *
 *   engine    al_verify_files (what auditlog-verify runs), one core, and
 *             with one worker thread per CPU (--jobs 0, its default)
 *   naive     a jansson-only verifier in C: json_loadb per line + SHA-256 of
 *             the line (no canonical check, no chain): what a quick script does
 *   sha256sum coreutils over the file: one hash, no parsing
 *
 *   verify-bench [--dir DIR] [--events N] [--runs N] [--keep] [--log FILE]
 *                [--verify-key FILE --pubkey FILE]
 *
 * Writes a log of N events (default 3,300,000: > 1 GiB) with the library into
 * a new directory under DIR (default /var/tmp; tmpfs and ramfs are refused),
 * or takes FILE (a log kept by an earlier run), then times each contender
 * --runs times (default 3) on the file, warm in the page cache, and prints
 * the median. The two engine arms alternate within each run. Timings are
 * never asserted anywhere. With the v2 keys of a given v2 log (one made by
 * tests/vectors/v2log.py, or by the writer), four more arms alternate on one
 * core: the engine without keys (seal and tree structure only), with the
 * verification key alone (every seal MAC), with the public key alone (every
 * checkpoint signature) and with both.
 * Exit 0 the run completed, 1 a failure, 2 bad arguments or a refused DIR.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <auditlog.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "cli.h"
#include "verify.h"

#ifndef VERIFY_BENCH_BUILD_TYPE
#define VERIFY_BENCH_BUILD_TYPE "unknown"
#endif

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The bench's event shape (docs/benchmarks.md, "The workload"). */
static int write_log(const char *path, unsigned long n)
{
	static const char *const actions[] = {"C_Sign", "C_Verify", "C_Encrypt", "C_Decrypt"};
	static const char *const labels[] = {"payments-signing-key", "release-code-signing-rsa3072",
					     "customer-data-aes256-gcm", "tls-frontend-ecdsa-p256"};
	static const uint64_t mechs[] = {0x1041, 0x1041, 0x1087, 0x1087};
	struct auditlog_config *cfg = NULL;
	struct auditlog *log = NULL;
	int r;

	if ((r = auditlog_config_new(&cfg)) < 0 || (r = auditlog_config_set_path(cfg, path)) < 0 ||
	    (r = auditlog_config_set_queue_capacity(cfg, 1u << 18)) < 0 || (r = auditlog_open(cfg, &log)) < 0)
		goto out;
	for (unsigned long i = 0; i < n; i++) {
		unsigned k = (unsigned)(i % 4);
		uint8_t id[8] = {0x7b, 0x42, 0x10, 0xd3, 0x88, 0x05, 0, (uint8_t)k};
		bool bad = k == 1 && i % 64 < 8 && i % 32 == 1;
		struct auditlog_event ev = {
			.flags = AUDITLOG_EV_RV | AUDITLOG_EV_MECHANISM | AUDITLOG_EV_SLOT | AUDITLOG_EV_SESSION,
			.outcome = bad ? AUDITLOG_OUTCOME_FAILURE : AUDITLOG_OUTCOME_SUCCESS,
			.rv = bad ? 0xc0 : 0, /* CKR_SIGNATURE_INVALID */
			.mechanism = mechs[k],
			.slot = 0,
			.session = 1 + i % 4,
			.action = actions[k],
			.action_len = strlen(actions[k]),
			.key_label = labels[k],
			.key_label_len = strlen(labels[k]),
			.key_id = id,
			.key_id_len = sizeof(id),
			.actor = "user",
			.actor_len = 4,
		};
		if ((r = auditlog_record(log, &ev)) < 0)
			goto out;
	}
out:
	if (log) {
		int c = auditlog_close(log);
		if (!r)
			r = c;
	}
	auditlog_config_free(cfg);
	return r;
}

/* A key file's bytes (at most 4 KiB) parsed: 0 or -errno. */
static int read_key(const char *path, bool verify, struct al_vkey *vk, struct al_ckey *ck)
{
	uint8_t buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
	int r = n < 0 ? -errno : verify ? al_vkey_parse(buf, (size_t)n, vk) : al_ckey_parse(buf, (size_t)n, false, ck);

	if (fd >= 0)
		close(fd);
	OPENSSL_cleanse(buf, sizeof(buf));
	return r;
}

/* The naive verifier: every line through jansson, and its SHA-256. */
static int naive(const char *path, uint64_t *ret_lines)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint64_t lines = 0;
	int r = 0;

	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	const uint8_t *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	(void)madvise((void *)m, (size_t)st.st_size, MADV_SEQUENTIAL);
	for (size_t pos = 0; pos < (size_t)st.st_size;) {
		const uint8_t *nl = memchr(m + pos, '\n', (size_t)st.st_size - pos);
		size_t len = nl ? (size_t)(nl - (m + pos)) : (size_t)st.st_size - pos;
		json_error_t err;
		uint8_t md[SHA256_DIGEST_LENGTH];
		json_t *j = json_loadb((const char *)m + pos, len, JSON_REJECT_DUPLICATES, &err);
		if (!j) {
			r = -EBADMSG;
			break;
		}
		json_decref(j);
		SHA256(m + pos, len, md);
		lines++;
		pos += len + 1;
	}
	munmap((void *)m, (size_t)st.st_size);
	*ret_lines = lines;
	return r;
}

/* One row of the table: seconds, records/s (none when records is 0), MB/s,
 * and the one-core engine's time over this one. */
static void row(const char *name, double t, uint64_t records, double mb, double engine)
{
	char rate[32] = "-";
	if (records)
		snprintf(rate, sizeof(rate), "%.0f", (double)records / t);
	printf("%-34s %10.3f %14s %10.1f %8.2f\n", name, t, rate, mb / t, engine / t);
}

static void runs_of(const char *label, const double *t, unsigned long runs)
{
	printf("%s", label);
	for (unsigned long i = 0; i < runs; i++)
		printf(" %.3f", t[i]);
}

static void env(const char *dir)
{
	struct utsname u;
	char model[256] = "?";
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "model name", 10)) {
			char *c = strchr(line, ':');
			const char *v = c ? c + 2 : line;
			size_t n = strcspn(v, "\n");
			if (n >= sizeof(model))
				n = sizeof(model) - 1;
			memcpy(model, v, n);
			model[n] = 0;
			break;
		}
	if (f)
		fclose(f);
	uname(&u);
	printf("machine: %s, %ld online CPU(s), %s %s\n", model, sysconf(_SC_NPROCESSORS_ONLN), u.sysname,
	       u.release);
	printf("build: %s; directory: %s\n", VERIFY_BENCH_BUILD_TYPE, dir);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"dir", required_argument, NULL, 'd'},  {"events", required_argument, NULL, 'n'},
		{"runs", required_argument, NULL, 'r'}, {"keep", no_argument, NULL, 'k'},
		{"log", required_argument, NULL, 'l'},  {"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{"verify-key", required_argument, NULL, 'K'}, {"pubkey", required_argument, NULL, 'P'},
		{NULL, 0, NULL, 0},
	};
	const char *base = "/var/tmp", *given = NULL, *vkey_path = NULL, *pub_path = NULL;
	unsigned long events = 3300000, runs = 3;
	bool keep = false;
	int c, r;

	opterr = 0; /* a bad option gets one line: cli_bad_option */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'd': base = optarg; break;
		case 'k': keep = true; break;
		case 'l': given = optarg; break;
		case 'K': vkey_path = optarg; break;
		case 'P': pub_path = optarg; break;
		case 'n':
		case 'r': {
			errno = 0;
			unsigned long v = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || !v || (c == 'r' && v > 99)) {
				fprintf(stderr, "verify-bench: bad number: %s\n", optarg);
				return 2;
			}
			*(c == 'n' ? &events : &runs) = v;
			break;
		}
		case 'h':
			printf("usage: verify-bench [--dir DIR] [--events N] [--runs N] [--keep] [--log FILE]\n"
			       "                    [--verify-key FILE --pubkey FILE]   (a v2 log's keys, with --log)\n"
			       "       verify-bench --version\n");
			return 0;
		case 'V': return cli_version("verify-bench");
		default: return cli_bad_option("verify-bench", "h", opts, argv);
		}
	}
	struct al_vkey vk;
	struct al_ckey ck;
	bool v2 = vkey_path || pub_path;
	if (v2 && (!vkey_path || !pub_path || !given)) {
		fprintf(stderr, "verify-bench: --verify-key and --pubkey go together, with --log\n");
		return 2;
	}
	if (v2 && ((r = read_key(vkey_path, true, &vk, NULL)) < 0 || (r = read_key(pub_path, false, NULL, &ck)) < 0)) {
		fprintf(stderr, "verify-bench: a key file: %s\n", strerror(-r));
		return 2;
	}
	struct statfs sf;
	if (statfs(given ? given : base, &sf) < 0 || sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC) {
		fprintf(stderr, "verify-bench: %s: %s\n", given ? given : base,
			errno ? strerror(errno) : "tmpfs/ramfs refused: use a real disk");
		return 2;
	}
	char dir[4096], path[4200], cmd[4400];
	double t0 = now();
	if (given) {
		snprintf(path, sizeof(path), "%s", given);
		snprintf(dir, sizeof(dir), "(given)");
		keep = true;
		env(path);
	} else {
		snprintf(dir, sizeof(dir), "%s/verify-bench.XXXXXX", base);
		if (!mkdtemp(dir)) {
			perror("verify-bench: mkdtemp");
			return 1;
		}
		snprintf(path, sizeof(path), "%s/audit.log", dir);
		env(dir);
		r = write_log(path, events);
		if (r < 0) {
			fprintf(stderr, "verify-bench: writing the log: %s\n", strerror(-r));
			return 1;
		}
	}
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "verify-bench: %s: %s\n", path, strerror(errno));
		return 1;
	}
	/* the engine counts the records (a given log's too) */
	uint64_t records = given ? 0 : events + 1;
	double mb = (double)st.st_size / 1e6;

	/* runs alternate: one core, then all cores (the order flips each run) */
	double te[100], tc[100], tp[100], tpc[100], tn[100], ts[100];
	unsigned workers = al_vpool_cpus();
	char *paths[1] = {path};
	for (unsigned long i = 0; i < 2 * runs; i++) {
		bool par = (i % 2) ^ ((i / 2) % 2);
		struct al_vopts o = {.threads = par ? 0 : 1};
		struct al_vresult res;
		double a = now(), ac = cpu_now();
		r = al_verify_files(paths, 1, &o, &res);
		double t = now() - a, tcpu = cpu_now() - ac;
		*(par ? &tp[i / 2] : &te[i / 2]) = t;
		*(par ? &tpc[i / 2] : &tc[i / 2]) = tcpu;
		uint64_t bad = 0;
		for (int k = 0; k < AL_V__MAX; k++)
			bad += res.findings[k];
		if (!records)
			records = res.records;
		/* (the workers take files of two blocks and more) */
		bool big = (uint64_t)st.st_size >= 2ull * AL_VBLOCK;
		/* (a v2 file is the walk's alone: its seals and tree, verify.c) */
		bool v1 = res.chains && res.chain[0].max_version < 2;
		if (r < 0 || bad || res.records != records ||
		    (par && workers > 1 && big && v1 && res.taken < records / 2)) {
			fprintf(stderr, "verify-bench: the engine did not verify the log clean%s\n",
				par ? " with its workers" : "");
			return 1;
		}
		al_vresult_free(&res);
	}
	printf("log: %" PRIu64 " records, %lld bytes (%.1f bytes a line)%s%.1f s; one file, %s; warm page "
	       "cache\n", records, (long long)st.st_size, (double)st.st_size / (double)records,
	       given ? ", given; runs took " : ", written in ", now() - t0, v2 ? "v2" : "v1");

	/* v2, one core: no keys, the verification key alone (seal MACs), the
	 * public key alone (checkpoint signatures), both; the four alternate, the
	 * order rotating each run so that drift hits each arm alike */
	enum { VK_NONE, VK_VKEY, VK_PUB, VK_BOTH, NVK };
	static const char *const vk_name[NVK] = {"engine, no keys (structure)",
						 "engine, --verify-key (MACs)",
						 "engine, --pubkey (signatures)",
						 "engine, both keys (MACs, sigs)"};
	double tk[NVK][100], tkc[NVK][100];
	uint64_t seals = 0, ckpts = 0;
	for (unsigned long i = 0; v2 && i < NVK * runs; i++) {
		unsigned arm = (unsigned)((i + i / NVK) % NVK);
		bool sk = arm == VK_VKEY || arm == VK_BOTH, pk = arm == VK_PUB || arm == VK_BOTH;
		struct al_vopts o = {.threads = 1};
		struct al_vresult res;
		if (sk) {
			o.vkeys = &vk;
			o.n_vkeys = 1;
		}
		if (pk) {
			o.pubkeys = &ck;
			o.n_pubkeys = 1;
		}
		double a = now(), ac = cpu_now();
		r = al_verify_files(paths, 1, &o, &res);
		tk[arm][i / NVK] = now() - a;
		tkc[arm][i / NVK] = cpu_now() - ac;
		uint64_t bad = 0;
		for (int k = 0; k < AL_V__MAX; k++)
			bad += al_vclass_is_integrity((enum al_vclass)k, false) ? res.findings[k] : 0;
		if (r < 0 || bad || res.records != records ||
		    (sk && (res.seals_checked != res.seals || !res.seals)) ||
		    (pk && res.checkpoints_checked != res.checkpoints)) {
			fprintf(stderr, "verify-bench: the engine did not verify the v2 log clean (%s)\n",
				vk_name[arm]);
			return 1;
		}
		seals = res.seals;
		ckpts = res.checkpoints;
		al_vresult_free(&res);
	}
	if (v2) {
		double m[NVK], mc2[NVK];
		for (unsigned k = 0; k < NVK; k++) {
			m[k] = median(tk[k], (int)runs);
			mc2[k] = median(tkc[k], (int)runs);
		}
		printf("\nv2, one core: %" PRIu64 " seals, %" PRIu64 " checkpoints (%.1f records a seal)\n",
		       seals, ckpts, seals ? (double)records / (double)seals : 0);
		printf("%-34s %10s %14s %10s %8s\n", "contender (median of runs)", "seconds", "records/s", "MB/s",
		       "ratio");
		for (unsigned k = 0; k < NVK; k++) {
			row(vk_name[k], m[k], records, mb, m[VK_NONE]);
			row("  same, CPU time", mc2[k], records, mb, m[VK_NONE]);
		}
		printf("(ratio: no-keys time / contender time)\nruns (sorted):");
		for (unsigned k = 0; k < NVK; k++)
			runs_of(k == VK_NONE ? " no keys" : k == VK_VKEY ? "; verify-key" : k == VK_PUB ? "; pubkey" : "; both",
				tk[k], runs);
		printf("\ntarget: the verifier with both keys >= 1,000,000 records/s per core: %s\n\n",
		       records / mc2[VK_BOTH] >= 1e6 ? "met" : "NOT met");
		OPENSSL_cleanse(&vk, sizeof(vk));
	}

	for (unsigned long i = 0; i < runs; i++) {
		uint64_t lines = 0;
		double a = now();
		if (naive(path, &lines) < 0 || lines != records) {
			fprintf(stderr, "verify-bench: the naive parse failed\n");
			return 1;
		}
		tn[i] = now() - a;
	}
	snprintf(cmd, sizeof(cmd), "sha256sum '%s' >/dev/null", path);
	for (unsigned long i = 0; i < runs; i++) {
		double a = now();
		if (system(cmd) != 0) {
			fprintf(stderr, "verify-bench: sha256sum failed\n");
			return 1;
		}
		ts[i] = now() - a;
	}
	double ratio[100];
	for (unsigned long i = 0; i < runs; i++)
		ratio[i] = te[i] / tp[i];
	double mr = median(ratio, (int)runs);
	double me = median(te, (int)runs), mc = median(tc, (int)runs), mp = median(tp, (int)runs),
	       mpc = median(tpc, (int)runs), mn = median(tn, (int)runs), ms = median(ts, (int)runs);
	char all[64];
	snprintf(all, sizeof(all), "engine, %u workers (all cores)", workers);
	printf("\n%-34s %10s %14s %10s %8s\n", "contender (median of runs)", "seconds", "records/s", "MB/s",
	       "ratio");
	row("engine (auditlog-verify), 1 core", me, records, mb, me);
	row("  same, CPU time", mc, records, mb, me);
	row(all, mp, records, mb, me);
	row("  same, CPU time (all threads)", mpc, records, mb, me);
	row("naive: jansson + SHA-256 a line", mn, records, mb, me);
	row("sha256sum of the file", ms, 0, mb, me);
	printf("(ratio: engine time on 1 core / contender time; > 1: the contender is faster)\n");
	printf("runs (sorted):");
	runs_of(" engine", te, runs);
	runs_of("; all cores", tp, runs);
	runs_of("; naive", tn, runs);
	runs_of("; sha256sum", ts, runs);
	printf("\nspeed-up with all cores: %.2fx on %u CPU(s) (median of the runs' ratios)\n", mr, workers);
	printf("\ntarget: >= 1,000,000 records/s per core on canonical lines: %s\n",
	       records / mc >= 1e6 ? "met" : "NOT met");
	if (!keep) {
		unlink(path);
		rmdir(dir);
	} else {
		printf("kept: %s\n", path);
	}
	return 0;
}
