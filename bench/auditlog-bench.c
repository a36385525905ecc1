/* SPDX-License-Identifier: MIT */
/*
 * auditlog-bench: the library's figures (docs/benchmarks.md), each next to a
 * baseline measured in the same run, on the same file system, with lines of
 * the same size:
 *
 *   sustained   durable events/s, producers on every core, close included
 *   ceiling     best of a batch-size sweep of plain pwrite + fdatasync; both
 *               measured in rounds (--rounds), the ratio of medians
 *   sync        auditlog_record_sync() latency vs one pwrite + fdatasync,
 *               interleaved in rounds so that noise hits both
 *   enqueue     auditlog_record() latency, 2 producers: every other call timed
 *               whole, the others' hand-off alone (reserve, copy, publish)
 *   CPU         per event: the "auditlog-worker" thread, the producers, their
 *               sum and the whole process
 *   token       token-shaped logs (one record per batch): bytes and
 *               fdatasyncs per record
 *
 *   auditlog-bench [--json] [--events N] [--threads N] [--format-version 0|1|2]
 *                  [--seal-state FILE --signing-key FILE] [--line-size N]
 *                  [--phases LIST] [--coalesce-us N] [--token-records N]
 *                  [--token-gap-us N] [--max-batch-bytes N] [--rotate-bytes N] [--queue N]
 *                  [--worker-nice N] [--drop-behind-bytes N] [--sweep-seconds N]
 *                  [--prime-bytes N] [--rounds N]
 *                  [--dir DIR] [--keep] [--backend B] [--sync-samples N]
 *                  [--enqueue-samples N] [--sealer-socket PATH]
 *   auditlog-bench --log PATH [--events N] [--threads N] [--format-version 0|1|2]
 *                  [--line-size N] [--rotate-bytes N] [--backend B] [--json]
 *
 * Exit status: 0 the run completed (whether or not the targets were met),
 * 1 the library or the system failed, 2 bad arguments or a refused target
 * (tmpfs, ramfs, fdatasync disabled).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#else
#define HAVE_TSC 0
#endif

#include <auditlog.h>

#include "benchutil.h"
#include "cli.h"
#include "format.h"
#include "format_v2.h"
#include "log.h"
#include "merkle.h"
#include "note.h"
#include "seal.h"
#include "sealkey.h"

#ifndef AUDITLOG_BENCH_BUILD_TYPE
#define AUDITLOG_BENCH_BUILD_TYPE "unknown"
#endif
#ifndef AUDITLOG_BENCH_C_FLAGS
#define AUDITLOG_BENCH_C_FLAGS "unknown"
#endif
#ifndef RAMFS_MAGIC
#define RAMFS_MAGIC 0x858458f6
#endif
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

#define PROG "auditlog-bench"
const char *const bench_prog = PROG;

/* ---- defaults and targets (docs/benchmarks.md, DESIGN.md "Figures") ------- */

#define DEF_EVENTS 2000000u
#define DEF_SYNC_SAMPLES 2000u
#define SYNC_ROUNDS 10u
#define DEF_ENQ_SAMPLES 250000u /* per producer */
#define ENQ_THREADS 2u
#define ENQ_WARMUP 2000u
#define SUSTAINED_QUEUE (1u << 18)
#define POOL_LINES 16384u           /* preformatted lines for the raw baselines */
#define SWEEP_BYTES (128ull << 20)  /* per batch size at least this much and... */
#define SWEEP_DEF_MS 1000u          /* ...this long (--sweep-seconds), but never longer */
#define SWEEP_MIN_MS 100u           /* than twice that; the bounds of --sweep-seconds */
#define SWEEP_MAX_MS 600000u
#define SWEEP_MIN_BATCHES 4u
#define DEF_ROUNDS 5u               /* the sustained phase and its ceiling, this many times */
#define MAX_ROUNDS 9u
#define FSYNC_FLOOR_NS 2000.0       /* a faster median fdatasync is no fdatasync */
#define PRIME_EVENT_BYTES 512u      /* --prime-bytes auto: this much a sustained event... */
#define PRIME_MIN (UINT64_C(64) << 20)  /* ...at least this... */
#define PRIME_MAX (UINT64_C(1) << 30)   /* ...at most this, and a quarter of MemAvailable */

#define T_SUSTAINED 1000000.0
#define T_RATIO 0.9
#define T_SYNC_RATIO 1.2
#define T_ENQ_P50 100.0
#define T_ENQ_P999 2000.0
#define T_WORKER_V1 500.0 /* v0 and v1 */
#define T_WORKER_V2 350.0
#define T_TOTAL_CPU 1200.0 /* producers + worker (+ sealer), ns per event */
#define NTARGETS 7

#define LINE_SIZE_MAX 4096u   /* --line-size: the detail member pads up to its cap */
#define DEF_TOKEN_RECORDS 2000u
#define DEF_TOKEN_GAP_US 100u /* the token's ECDSA verify: one operation per 65-80 us */
#define TOKEN_COALESCE_US 5000u /* the token's default audit_async_coalesce_us */
#define V2_STEP_EVENTS 100000u  /* format-layer timing of v2's producer step */

/* --phases */
#define PH_SUSTAINED 1u /* with the raw ceiling it is compared with */
#define PH_SYNC 2u
#define PH_ENQUEUE 4u
#define PH_TOKEN 8u
#define PH_PARTS 16u /* v2's format functions one by one (measure_parts) */
#define PH_ALL (PH_SUSTAINED | PH_SYNC | PH_ENQUEUE | PH_TOKEN | PH_PARTS)

static const unsigned sweep_sizes[] = {16, 64, 256, 1024, 2048, 4096, 8192, 16384};
#define NSWEEP (sizeof(sweep_sizes) / sizeof(sweep_sizes[0]))

/* ---- events: the shape of the token's records ----------------------------- */

#define NVAR 64u /* variants per producer, cycled */

#define CKR_OK_ 0x0ull
#define CKR_SIGNATURE_INVALID_ 0xc0ull
#define CKM_SHA256_RSA_PKCS_ 0x40ull
#define CKM_ECDSA_ 0x1041ull
#define CKM_AES_GCM_ 0x1087ull

static const char *const ev_actions[] = {"C_Sign", "C_Encrypt", "C_Decrypt", "C_Verify"};
static const struct {
	const char *label;
	uint64_t mech;
	uint8_t id[8];
} ev_keys[] = {
	{"payments-signing-key", CKM_ECDSA_, {0x5a, 0x01, 0x3c, 0x9e, 0x21, 0x7f, 0x00, 0x01}},
	{"tls-frontend-ecdsa-p256", CKM_ECDSA_, {0x5a, 0x01, 0x3c, 0x9e, 0x21, 0x7f, 0x00, 0x02}},
	{"customer-data-aes256-gcm", CKM_AES_GCM_, {0x7b, 0x42, 0x10, 0xd3, 0x88, 0x05, 0x00, 0x01}},
	{"release-code-signing-rsa3072", CKM_SHA256_RSA_PKCS_,
	 {0x19, 0xe4, 0x6a, 0x02, 0xc7, 0x30, 0x00, 0x07}},
};

/* --line-size: each variant's shape. Members are dropped, most optional
 * first, until the line fits, then `detail` pads it to the size asked for.
 * Without --line-size every variant is the token's shape (drop 0, no detail). */
#define DROP_LABEL (1u << 0)
#define DROP_KEY_ID (1u << 1)
#define DROP_MECH (1u << 2)
#define DROP_SESSION (1u << 3)
#define DROP_SLOT (1u << 4)
#define DROP_RV (1u << 5)
#define DROP_ACTOR (1u << 6)
static const unsigned drop_levels[] = {
	0,
	DROP_LABEL,
	DROP_LABEL | DROP_KEY_ID,
	DROP_LABEL | DROP_KEY_ID | DROP_MECH,
	DROP_LABEL | DROP_KEY_ID | DROP_MECH | DROP_SESSION,
	DROP_LABEL | DROP_KEY_ID | DROP_MECH | DROP_SESSION | DROP_SLOT,
	DROP_LABEL | DROP_KEY_ID | DROP_MECH | DROP_SESSION | DROP_SLOT | DROP_RV,
	DROP_LABEL | DROP_KEY_ID | DROP_MECH | DROP_SESSION | DROP_SLOT | DROP_RV | DROP_ACTOR,
};
#define NDROP (sizeof(drop_levels) / sizeof(drop_levels[0]))

struct shape {
	unsigned drop;
	size_t detail; /* bytes of g_detail in the event's detail member */
	size_t actor;  /* 0: "user"; else bytes of g_actor (a few bytes more than "user") */
};
static struct shape g_shape[NVAR];
static char g_detail[LINE_SIZE_MAX]; /* plain printable ASCII: nothing to escape */
static const char g_actor[] = "user.abcdefghijklmnopqrstuvwxyz";

/* Variant v of producer t: the four operations in turn; sign/verify with the
 * ECDSA and RSA keys, encrypt/decrypt with the AES key; four sessions per
 * producer on slot 0; 2 of every 64 events a failed C_Verify. g_shape[v] then
 * drops members or adds a detail (--line-size). */
static void make_event(struct auditlog_event *ev, unsigned t, unsigned v)
{
	static const unsigned sigkeys[] = {0, 1, 3};
	unsigned a = v % 4, k = (a == 1 || a == 2) ? 2 : sigkeys[(v / 4) % 3];
	bool fail = a == 3 && (v / 4) % 8 == 7;
	const struct shape *sh = &g_shape[v & (NVAR - 1)];

	*ev = (struct auditlog_event){
		.flags = AUDITLOG_EV_RV | AUDITLOG_EV_MECHANISM | AUDITLOG_EV_SLOT |
			 AUDITLOG_EV_SESSION,
		.outcome = fail ? AUDITLOG_OUTCOME_FAILURE : AUDITLOG_OUTCOME_SUCCESS,
		.rv = fail ? CKR_SIGNATURE_INVALID_ : CKR_OK_,
		.mechanism = ev_keys[k].mech,
		.slot = 0,
		.session = (uint64_t)t * 4 + (v / 4) % 4 + 1,
		.action = ev_actions[a],
		.action_len = strlen(ev_actions[a]),
		.key_label = ev_keys[k].label,
		.key_label_len = strlen(ev_keys[k].label),
		.key_id = ev_keys[k].id,
		.key_id_len = sizeof(ev_keys[k].id),
		.actor = "user",
		.actor_len = 4,
	};
	if (sh->drop & DROP_LABEL)
		ev->key_label = NULL, ev->key_label_len = 0;
	if (sh->drop & DROP_KEY_ID)
		ev->key_id = NULL, ev->key_id_len = 0;
	if (sh->drop & DROP_MECH)
		ev->flags &= ~AUDITLOG_EV_MECHANISM;
	if (sh->drop & DROP_SESSION)
		ev->flags &= ~AUDITLOG_EV_SESSION;
	if (sh->drop & DROP_SLOT)
		ev->flags &= ~AUDITLOG_EV_SLOT;
	if (sh->drop & DROP_RV)
		ev->flags &= ~AUDITLOG_EV_RV;
	if (sh->drop & DROP_ACTOR)
		ev->actor = NULL, ev->actor_len = 0;
	if (sh->detail) {
		ev->detail = g_detail;
		ev->detail_len = sh->detail;
	}
	if (sh->actor && ev->actor) {
		ev->actor = g_actor;
		ev->actor_len = sh->actor;
	}
}

/* ---- small helpers -------------------------------------------------------- */

struct opts {
	bool json, keep;
	uint64_t events;
	unsigned threads;
	unsigned version;
	uint64_t rotate_bytes;
	const char *dir;
	const char *log_path;
	enum auditlog_backend backend;
	unsigned sync_samples;
	unsigned enq_samples;
	const char *seal_state, *signing_key; /* v2: auditlog_config_set_sealing */
	const char *sealer_socket; /* v2: the sealer arms (auditlog_config_set_sealer_socket) */
	unsigned line_size;    /* 0: the token's shape as it is */
	unsigned phases;       /* PH_* */
	uint64_t coalesce_us;  /* auditlog_config_set_async_coalesce_us of every log */
	size_t max_batch;      /* auditlog_config_set_max_batch_bytes; 0: the library's */
	unsigned sweep_ms;     /* each raw ceiling point runs at least this long */
	size_t queue;          /* the sustained phase's queue slots (auditlog_config_set_queue_capacity) */
	int worker_nice;       /* auditlog_config_set_worker_nice of every log, when has_worker_nice */
	bool has_worker_nice;
	const char *worker_cpus; /* auditlog_config_set_worker_cpus of every log, or NULL */
	uint64_t drop_behind;  /* auditlog_config_set_drop_behind_bytes, when has_drop_behind */
	bool has_drop_behind;
	unsigned lanes;        /* auditlog_config_set_queue_lanes of every log, when has_lanes */
	bool has_lanes;
	uint64_t prime_bytes;  /* written and unlinked before the sustained phase and its ceiling */
	bool has_prime_bytes;  /* else auto (prime_size()) */
	unsigned rounds;       /* the sustained phase and its ceiling measured this many times */
	unsigned token_records;
	uint64_t token_gap_us;
};

static bool g_progress; /* progress lines on stderr (set once in main) */

__attribute__((format(printf, 1, 2))) static void progress(const char *fmt, ...)
{
	va_list ap;

	if (!g_progress)
		return;
	va_start(ap, fmt);
	fputs(PROG ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

__attribute__((format(printf, 1, 2))) static void error_msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs(PROG ": ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_clock_ns(clockid_t id)
{
	struct timespec ts;
	if (clock_gettime(id, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The enqueue timer: the TSC, fenced so the call cannot leak out of the
 * window, or CLOCK_MONOTONIC where there is none. */
static inline uint64_t tick_start(void)
{
#if HAVE_TSC
	_mm_lfence();
	uint64_t t = __rdtsc();
	_mm_lfence();
	return t;
#else
	return now_ns();
#endif
}

static inline uint64_t tick_end(void)
{
#if HAVE_TSC
	unsigned aux;
	uint64_t t = __rdtscp(&aux);
	_mm_lfence();
	return t;
#else
	return now_ns();
#endif
}

static inline uint64_t raw_tick(void)
{
#if HAVE_TSC
	return __rdtsc();
#else
	return now_ns();
#endif
}

static int write_full(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t w = pwrite(fd, p, len, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		p += w;
		len -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* dir/name into out; a path too long for out is an error, never cut. */
static int join_path(char *out, size_t cap, const char *dir, const char *name)
{
	int n = snprintf(out, cap, "%s/%s", dir, name);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int datasync(int fd)
{
	return fdatasync(fd) < 0 ? -errno : 0;
}

/* ---- argument parsing ----------------------------------------------------- */

static unsigned parse_phases(const char *arg)
{
	static const struct {
		const char *name;
		unsigned bit;
	} ph[] = {{"sustained", PH_SUSTAINED}, {"sync", PH_SYNC}, {"enqueue", PH_ENQUEUE},
		  {"token", PH_TOKEN}, {"parts", PH_PARTS}, {"all", PH_ALL}};
	unsigned m = 0;
	const char *p = arg;

	for (;;) {
		size_t n = strcspn(p, ",");
		unsigned bit = 0;
		for (size_t i = 0; i < sizeof(ph) / sizeof(ph[0]); i++)
			if (strlen(ph[i].name) == n && strncmp(p, ph[i].name, n) == 0)
				bit = ph[i].bit;
		if (!bit)
			bad_arg("--phases: '%.*s' is not sustained, sync, enqueue, token, parts or all",
				(int)n, p);
		m |= bit;
		if (!p[n])
			break;
		p += n + 1;
	}
	return m;
}

/* --sweep-seconds: 0.1..600 s in tenths (a tenth is for tests, whose sweeps
 * measure nothing), as milliseconds */
static unsigned arg_sweep(const char *val)
{
	char *end;
	double v, tenths;
	bool ok;
	long n;

	errno = 0;
	v = strtod(val, &end);
	tenths = v * 10;
	/* in range before the rounding (no NaN or huge value converted) */
	ok = end != val && !*end && !errno && tenths > SWEEP_MIN_MS / 100 - 0.5 &&
	     tenths < SWEEP_MAX_MS / 100 + 0.5;
	n = ok ? (long)(tenths + 0.5) : 0;
	if (!ok || tenths - (double)n > 1e-6 || (double)n - tenths > 1e-6)
		bad_arg("--sweep-seconds: %s is out of range 0.1..600 (in tenths)", val);
	return (unsigned)n * 100;
}

static void usage(FILE *f)
{
	fputs("usage: " PROG " [options]\n"
	      "       " PROG " --log PATH [--events N] [--threads N] [--format-version 0|1|2]\n"
	      "                     [--line-size N] [--rotate-bytes N] [--backend B] [--json]\n"
	      "\n"
	      "Measures durable throughput, record_sync and enqueue latency, CPU per event and\n"
	      "token-shaped logs of libauditlog next to raw pwrite+fdatasync baselines of the\n"
	      "same run.\n"
	      "\n"
	      "  --json               print one JSON object instead of the table\n"
	      "  --events N           events of the sustained phase (default 2000000)\n"
	      "  --threads N          producer threads (default: online CPUs)\n"
	      "  --format-version V   0, 1 or 2 (default 1); 2 needs the two files below\n"
	      "  --seal-state FILE    v2: the sealing state file (auditlog_config_set_sealing)\n"
	      "  --signing-key FILE   v2: the checkpoint signing key file\n"
	      "  --sealer-socket PATH v2: also run the sync and token-shaped phases sealing\n"
	      "                       through the auditlog-sealer listening at PATH, in the\n"
	      "                       same rounds as in-process sealing\n"
	      "  --line-size N        lines of N bytes (drop members, pad with a detail;\n"
	      "                       default: the token's shape, about 340 bytes)\n"
	      "  --phases LIST        of sustained,sync,enqueue,token,parts (default: all);\n"
	      "                       sustained includes its raw ceiling; parts times v2's\n"
	      "                       format functions one by one\n"
	      "  --coalesce-us N      auditlog_config_set_async_coalesce_us of every log\n"
	      "                       (default 0, the library's)\n"
	      "  --token-records N    records of each token-shaped arm (default 2000)\n"
	      "  --token-gap-us N     gap between the async arms' records (default 100)\n"
	      "  --max-batch-bytes N  auditlog_config_set_max_batch_bytes (K/M suffixes;\n"
	      "                       default: the library's, 3 MiB)\n"
	      "  --rotate-bytes N     rotate the log at N bytes (K/M/G suffixes; default 0 = never)\n"
	      "  --queue N            the sustained phase's queue slots (64..2^24, default 2^18)\n"
	      "  --lanes N            the queue's lanes, every log (0: one a CPU, 1: one\n"
	      "                       ring, ..16; default: the library's, one a CPU)\n"
	      "  --worker-nice N      auditlog_config_set_worker_nice of every log (-20..19;\n"
	      "                       default: not set, the worker keeps the bench's nice)\n"
	      "  --worker-cpus LIST   auditlog_config_set_worker_cpus of every log (e.g. 0 or\n"
	      "                       0-3,8; default: not set, the worker keeps the bench's)\n"
	      "  --drop-behind-bytes N auditlog_config_set_drop_behind_bytes of every log\n"
	      "                       (K/M/G suffixes; 0 = never; default: the library's, 1 GiB)\n"
	      "  --prime-bytes N      before the sustained phase and before its raw ceiling,\n"
	      "                       write N bytes to a scratch file and unlink it, so that\n"
	      "                       both take memory the guest touched a moment ago (K/M/G;\n"
	      "                       0 = off; default: 512 bytes an event, 64 MiB to 1 GiB,\n"
	      "                       at most a quarter of free memory and of free disk)\n"
	      "  --sweep-seconds N    each raw ceiling batch size runs at least N s (and 128 MB),\n"
	      "                       at most 2N (0.1..600, tenths, default 1); with --events\n"
	      "                       large enough, both sides of the ratio run that long\n"
	      "  --rounds N           the sustained phase and its ceiling N times, interleaved\n"
	      "                       (1..9, default 5): the first round sweeps every batch\n"
	      "                       size, the others measure its best size again; both\n"
	      "                       sides of the ratio are medians of the N rounds\n"
	      "  --dir DIR            put the files in a new directory under DIR\n"
	      "                       (default /var/tmp); it is removed at the end\n"
	      "  --keep               keep that directory\n"
	      "  --backend B          auto, io_uring or pwrite (default auto)\n"
	      "  --sync-samples N     record_sync and raw fdatasync samples each (default 2000)\n"
	      "  --enqueue-samples N  timed calls per producer, half whole, half the hand-off\n"
	      "                       alone (default 250000)\n"
	      "  --log PATH           only write --events events into PATH through the library\n"
	      "                       and keep it (an existing log is continued); no other phase\n"
	      "  -h, --help           this text\n"
	      "  --version            the version\n",
	      f);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	enum {
		OPT_JSON = 256, OPT_EVENTS, OPT_THREADS, OPT_VERSION, OPT_ROTATE, OPT_DIR, OPT_LOG, OPT_KEEP,
		OPT_BACKEND, OPT_SYNC, OPT_ENQ, OPT_SEAL, OPT_SIGN, OPT_LINE, OPT_PHASES, OPT_COALESCE,
		OPT_TOKEN_N, OPT_TOKEN_GAP, OPT_MAX_BATCH, OPT_SEALER, OPT_QUEUE, OPT_LANES, OPT_NICE, OPT_CPUS, OPT_SWEEP_S,
		OPT_DROP, OPT_PRIME, OPT_ROUNDS
	};
	static const struct option lo[] = {
		{"json", no_argument, NULL, OPT_JSON},
		{"events", required_argument, NULL, OPT_EVENTS},
		{"threads", required_argument, NULL, OPT_THREADS},
		{"format-version", required_argument, NULL, OPT_VERSION},
		{"rotate-bytes", required_argument, NULL, OPT_ROTATE},
		{"dir", required_argument, NULL, OPT_DIR},
		{"log", required_argument, NULL, OPT_LOG},
		{"keep", no_argument, NULL, OPT_KEEP},
		{"backend", required_argument, NULL, OPT_BACKEND},
		{"sync-samples", required_argument, NULL, OPT_SYNC},
		{"enqueue-samples", required_argument, NULL, OPT_ENQ},
		{"seal-state", required_argument, NULL, OPT_SEAL},
		{"signing-key", required_argument, NULL, OPT_SIGN},
		{"line-size", required_argument, NULL, OPT_LINE},
		{"phases", required_argument, NULL, OPT_PHASES},
		{"coalesce-us", required_argument, NULL, OPT_COALESCE},
		{"token-records", required_argument, NULL, OPT_TOKEN_N},
		{"token-gap-us", required_argument, NULL, OPT_TOKEN_GAP},
		{"max-batch-bytes", required_argument, NULL, OPT_MAX_BATCH},
		{"queue", required_argument, NULL, OPT_QUEUE},
		{"lanes", required_argument, NULL, OPT_LANES},
		{"sweep-seconds", required_argument, NULL, OPT_SWEEP_S},
		{"drop-behind-bytes", required_argument, NULL, OPT_DROP},
		{"prime-bytes", required_argument, NULL, OPT_PRIME},
		{"rounds", required_argument, NULL, OPT_ROUNDS},
		{"worker-nice", required_argument, NULL, OPT_NICE},
		{"worker-cpus", required_argument, NULL, OPT_CPUS},
		{"sealer-socket", required_argument, NULL, OPT_SEALER},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int c;

	*o = (struct opts){
		.events = DEF_EVENTS,
		.threads = ncpu > 0 ? (unsigned)ncpu : 1,
		.version = 1,
		.backend = AUDITLOG_BACKEND_AUTO,
		.sync_samples = DEF_SYNC_SAMPLES,
		.enq_samples = DEF_ENQ_SAMPLES,
		.phases = PH_ALL,
		.token_records = DEF_TOKEN_RECORDS,
		.token_gap_us = DEF_TOKEN_GAP_US,
		.queue = SUSTAINED_QUEUE,
		.sweep_ms = SWEEP_DEF_MS,
		.rounds = DEF_ROUNDS,
	};
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		switch (c) {
		case OPT_JSON: o->json = true; break;
		case OPT_KEEP: o->keep = true; break;
		case OPT_EVENTS:
			o->events = arg_u64("--events", optarg, 1, UINT64_C(1) << 40, false);
			break;
		case OPT_THREADS:
			o->threads = (unsigned)arg_u64("--threads", optarg, 1, 1024, false);
			break;
		case OPT_VERSION:
			o->version = (unsigned)arg_u64("--format-version", optarg, 0, 2, false);
			break;
		case OPT_ROTATE:
			o->rotate_bytes = arg_u64("--rotate-bytes", optarg, 0, UINT64_C(1) << 50, true);
			break;
		case OPT_DIR:
			if (!*optarg)
				bad_arg("--dir: empty path");
			o->dir = optarg;
			break;
		case OPT_LOG:
			if (!*optarg)
				bad_arg("--log: empty path");
			o->log_path = optarg;
			break;
		case OPT_BACKEND:
			if (strcmp(optarg, "auto") == 0)
				o->backend = AUDITLOG_BACKEND_AUTO;
			else if (strcmp(optarg, "io_uring") == 0 || strcmp(optarg, "io-uring") == 0)
				o->backend = AUDITLOG_BACKEND_IO_URING;
			else if (strcmp(optarg, "pwrite") == 0)
				o->backend = AUDITLOG_BACKEND_PWRITE;
			else
				bad_arg("--backend: '%s' is not auto, io_uring or pwrite", optarg);
			break;
		case OPT_SYNC:
			o->sync_samples = (unsigned)arg_u64("--sync-samples", optarg, SYNC_ROUNDS,
							    1000000, false);
			break;
		case OPT_ENQ:
			o->enq_samples = (unsigned)arg_u64("--enqueue-samples", optarg, 1000,
							   4000000, false);
			break;
		case OPT_SEAL:
			if (!*optarg)
				bad_arg("--seal-state: empty path");
			o->seal_state = optarg;
			break;
		case OPT_SIGN:
			if (!*optarg)
				bad_arg("--signing-key: empty path");
			o->signing_key = optarg;
			break;
		case OPT_LINE:
			o->line_size = (unsigned)arg_u64("--line-size", optarg, 1, LINE_SIZE_MAX, true);
			break;
		case OPT_PHASES:
			o->phases = parse_phases(optarg);
			break;
		case OPT_COALESCE:
			o->coalesce_us = arg_u64("--coalesce-us", optarg, 0,
						 AUDITLOG_ASYNC_COALESCE_MAX_US, false);
			break;
		case OPT_TOKEN_N:
			o->token_records = (unsigned)arg_u64("--token-records", optarg, 10, 1000000,
							     false);
			break;
		case OPT_MAX_BATCH:
			o->max_batch = (size_t)arg_u64("--max-batch-bytes", optarg, 1,
						       UINT64_C(1) << 30, true);
			break;
		case OPT_QUEUE:
			o->queue = (size_t)arg_u64("--queue", optarg, 64, UINT64_C(1) << 24, false);
			break;
		case OPT_LANES:
			o->lanes = (unsigned)arg_u64("--lanes", optarg, 0, 16, false);
			o->has_lanes = true;
			break;
		case OPT_DROP:
			o->drop_behind = arg_u64("--drop-behind-bytes", optarg, 0, UINT64_C(1) << 50, true);
			o->has_drop_behind = true;
			break;
		case OPT_PRIME:
			o->prime_bytes = arg_u64("--prime-bytes", optarg, 0, UINT64_C(1) << 40, true);
			o->has_prime_bytes = true;
			break;
		case OPT_SWEEP_S:
			o->sweep_ms = arg_sweep(optarg);
			break;
		case OPT_ROUNDS:
			o->rounds = (unsigned)arg_u64("--rounds", optarg, 1, MAX_ROUNDS, false);
			break;
		case OPT_NICE: {
			char *end;
			long v;
			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < -20 || v > 19)
				bad_arg("--worker-nice: '%s' is not an integer in -20..19", optarg);
			o->worker_nice = (int)v;
			o->has_worker_nice = true;
			break;
		}
		case OPT_CPUS: {
			struct auditlog_config *probe = NULL;
			bool ok = auditlog_config_new(&probe) == 0 &&
				  auditlog_config_set_worker_cpus(probe, optarg) == 0;
			auditlog_config_free(probe);
			if (!ok)
				bad_arg("--worker-cpus: '%s' is not a CPU list such as 0-3,8", optarg);
			o->worker_cpus = optarg;
			break;
		}
		case OPT_TOKEN_GAP:
			o->token_gap_us = arg_u64("--token-gap-us", optarg, 0, 1000000, false);
			break;
		case OPT_SEALER:
			if (!*optarg)
				bad_arg("--sealer-socket: empty path");
			o->sealer_socket = optarg;
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
	if (o->log_path && o->dir)
		bad_arg("--log and --dir exclude each other");
	if (o->log_path && o->keep)
		bad_arg("--keep has no meaning with --log (the log is always kept)");
	if (o->threads > o->events)
		bad_arg("--threads %u is more than --events %" PRIu64, o->threads, o->events);
	if (o->version == 2 && (!o->seal_state || !o->signing_key))
		bad_arg("--format-version 2 needs --seal-state FILE and --signing-key FILE "
			"(auditlog_config_set_sealing)");
	if (o->version < 2 && (o->seal_state || o->signing_key))
		bad_arg("--seal-state and --signing-key are for --format-version 2 only");
	if (o->sealer_socket && (o->version != 2 || o->log_path))
		bad_arg("--sealer-socket is for --format-version 2 without --log");
	if (o->log_path && o->phases != PH_ALL)
		bad_arg("--phases has no meaning with --log");

	/* the library owns the valid ranges: ask it */
	struct auditlog_config *cfg;
	if (auditlog_config_new(&cfg) == 0) {
		int r = auditlog_config_set_rotate_bytes(cfg, o->rotate_bytes);
		int rb = o->max_batch ? auditlog_config_set_max_batch_bytes(cfg, o->max_batch) : 0;
		int rd = o->has_drop_behind ? auditlog_config_set_drop_behind_bytes(cfg, o->drop_behind) : 0;
		auditlog_config_free(cfg);
		if (rd < 0)
			bad_arg("--drop-behind-bytes: the library refuses %" PRIu64 " (0, or 1 MiB and more)",
				o->drop_behind);
		if (r < 0)
			bad_arg("--rotate-bytes: the library refuses %" PRIu64
				" (0 = never; a size must not be that small)",
				o->rotate_bytes);
		if (rb < 0)
			bad_arg("--max-batch-bytes: the library refuses %zu (16 KiB..64 MiB)",
				o->max_batch);
	}
}

/* ---- environment ---------------------------------------------------------- */

struct env {
	char date[32];
	char kernel[300];
	char cpu[256];
	long nproc, nconf;
	char target[PATH_MAX];
	unsigned long fs_magic;
	char fs_type[64];      /* from mountinfo, else from the magic */
	char device[256];      /* mount source */
	char dev_id[32];       /* major:minor */
	char mount_point[PATH_MAX];
	char mount_opts[512];  /* per-mount + super options */
	char write_cache[32];  /* the block device's cache mode, when known */
	char rotational[8];
	char build_type[32];
	char cflags[256];
	char compiler[64];
	char timer[64];
	char load_start[64], load_end[64]; /* /proc/loadavg: others' work skews every figure */
	double tick_ns;        /* ns per timer tick */
	double timer_overhead_ns;
	double timer_resolution_ns; /* smallest step between two readings */
};

/* The mount holding `path` (its st_dev, the longest mount point that is a
 * prefix of its real path) from /proc/self/mountinfo. */
static void find_mount(struct env *e, const char *path, dev_t dev)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0, best = 0;
	char want[32];

	if (!f)
		return;
	snprintf(want, sizeof(want), "%u:%u", major(dev), minor(dev));
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *fld[64];
		int n = 0;
		for (char *t = strtok_r(line, " \n", &save); t && n < 64;
		     t = strtok_r(NULL, " \n", &save))
			fld[n++] = t;
		int dash = -1;
		for (int i = 6; i < n; i++)
			if (strcmp(fld[i], "-") == 0) {
				dash = i;
				break;
			}
		if (n < 6 || dash < 0 || dash + 3 > n || strcmp(fld[2], want) != 0)
			continue;
		size_t ml = strlen(fld[4]);
		bool prefix = strcmp(fld[4], "/") == 0 ||
			      (strncmp(path, fld[4], ml) == 0 && (path[ml] == '/' || !path[ml]));
		if (!prefix || ml < best)
			continue;
		best = ml;
		snprintf(e->mount_point, sizeof(e->mount_point), "%s", fld[4]);
		snprintf(e->fs_type, sizeof(e->fs_type), "%s", fld[dash + 1]);
		snprintf(e->device, sizeof(e->device), "%s", fld[dash + 2]);
		snprintf(e->mount_opts, sizeof(e->mount_opts), "%s; super %s", fld[5],
			 dash + 3 < n ? fld[dash + 3] : "?");
	}
	free(line);
	fclose(f);
}

static void gather_env(struct env *e, const char *target)
{
	struct utsname u;
	struct statfs sf;
	struct stat st;
	char buf[4096], path[128];
	time_t now = time(NULL);
	struct tm tm;

	memset(e, 0, sizeof(*e));
	gmtime_r(&now, &tm);
	strftime(e->date, sizeof(e->date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (uname(&u) == 0)
		snprintf(e->kernel, sizeof(e->kernel), "%s %s %s %s", u.sysname, u.release,
			 u.version, u.machine);
	snprintf(e->cpu, sizeof(e->cpu), "unknown");
	FILE *f = fopen("/proc/cpuinfo", "re");
	if (f) {
		/* the first CPU's model name, family/model/stepping and whether it
		 * has SHA extensions (the chain hash is SHA-256) */
		char name[128] = "", fam[16] = "?", mod[16] = "?", step[16] = "?";
		bool sha = false;
		while (fgets(buf, sizeof(buf), f)) {
			char *c = strchr(buf, ':');
			if (buf[0] == '\n')
				break; /* end of the first CPU */
			if (!c)
				continue;
			*c++ = '\0';
			c += strspn(c, " \t");
			c[strcspn(c, "\n")] = '\0';
			buf[strcspn(buf, "\t")] = '\0';
			if (!strcmp(buf, "model name") || !strcmp(buf, "Model") ||
			    !strcmp(buf, "cpu model"))
				snprintf(name, sizeof(name), "%s", c);
			else if (!strcmp(buf, "cpu family"))
				snprintf(fam, sizeof(fam), "%s", c);
			else if (!strcmp(buf, "model"))
				snprintf(mod, sizeof(mod), "%s", c);
			else if (!strcmp(buf, "stepping"))
				snprintf(step, sizeof(step), "%s", c);
			else if (!strcmp(buf, "flags") || !strcmp(buf, "Features"))
				sha = strstr(c, " sha_ni") || strstr(c, " sha2");
		}
		fclose(f);
		if (name[0])
			snprintf(e->cpu, sizeof(e->cpu), "%s (family %s, model %s, stepping %s%s)",
				 name, fam, mod, step, sha ? ", SHA extensions" : "");
	}
	e->nproc = sysconf(_SC_NPROCESSORS_ONLN);
	e->nconf = sysconf(_SC_NPROCESSORS_CONF);
	(void)read_small("/proc/loadavg", e->load_start, sizeof(e->load_start));

	if (!realpath(target, e->target))
		snprintf(e->target, sizeof(e->target), "%s", target);
	snprintf(e->fs_type, sizeof(e->fs_type), "unknown");
	snprintf(e->device, sizeof(e->device), "unknown");
	if (statfs(e->target, &sf) == 0) {
		e->fs_magic = (unsigned long)sf.f_type;
		snprintf(e->fs_type, sizeof(e->fs_type), "%s", magic_name(e->fs_magic));
	}
	if (stat(e->target, &st) == 0) {
		snprintf(e->dev_id, sizeof(e->dev_id), "%u:%u", major(st.st_dev), minor(st.st_dev));
		find_mount(e, e->target, st.st_dev);
		/* the block device's cache mode: a partition's queue is its disk's */
		snprintf(path, sizeof(path), "/sys/dev/block/%s/queue/write_cache", e->dev_id);
		if (read_small(path, e->write_cache, sizeof(e->write_cache)) < 0) {
			snprintf(path, sizeof(path), "/sys/dev/block/%s/../queue/write_cache",
				 e->dev_id);
			(void)read_small(path, e->write_cache, sizeof(e->write_cache));
		}
		snprintf(path, sizeof(path), "/sys/dev/block/%s/queue/rotational", e->dev_id);
		if (read_small(path, e->rotational, sizeof(e->rotational)) < 0) {
			snprintf(path, sizeof(path), "/sys/dev/block/%s/../queue/rotational",
				 e->dev_id);
			(void)read_small(path, e->rotational, sizeof(e->rotational));
		}
	}
	snprintf(e->build_type, sizeof(e->build_type), "%s", AUDITLOG_BENCH_BUILD_TYPE);
	snprintf(e->cflags, sizeof(e->cflags), "%s", AUDITLOG_BENCH_C_FLAGS);
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

/* tmpfs, ramfs and a disabled fdatasync make the ceiling meaningless. */
static int check_target(const struct env *e, const char *dir, char *why, size_t cap)
{
	const char *pre = getenv("LD_PRELOAD");

	if (e->fs_magic == TMPFS_MAGIC || e->fs_magic == RAMFS_MAGIC) {
		snprintf(why, cap, "%s is on %s: fdatasync there reaches no disk", dir,
			 e->fs_magic == TMPFS_MAGIC ? "tmpfs" : "ramfs");
		return -1;
	}
	if (strcmp(e->fs_type, "overlay") == 0) {
		const char *u = strstr(e->mount_opts, "upperdir=");
		if (u) {
			char up[PATH_MAX];
			struct statfs sf;
			snprintf(up, sizeof(up), "%s", u + 9);
			up[strcspn(up, ",")] = '\0';
			if (statfs(up, &sf) == 0 &&
			    ((unsigned long)sf.f_type == TMPFS_MAGIC ||
			     (unsigned long)sf.f_type == RAMFS_MAGIC)) {
				snprintf(why, cap, "%s is on an overlay whose upper layer is in memory",
					 dir);
				return -1;
			}
		}
	}
	if (pre && strstr(pre, "eatmydata")) {
		snprintf(why, cap, "LD_PRELOAD has libeatmydata: fdatasync is disabled");
		return -1;
	}
	if (strstr(e->mount_opts, "nobarrier") || strstr(e->mount_opts, "barrier=0")) {
		snprintf(why, cap, "%s is mounted without barriers: fdatasync does not flush",
			 e->mount_point);
		return -1;
	}
	return 0;
}

/* A median one-line write+fdatasync in a couple of microseconds is not a
 * write to stable storage (a stubbed fdatasync, a RAM disk). */
static int probe_fsync(const char *dir, double *ret_ns)
{
	char path[PATH_MAX];
	uint64_t d[32], off = 0;
	char line[256];
	int fd, r = 0;

	memset(line, 'x', sizeof(line));
	line[sizeof(line) - 1] = '\n';
	if (join_path(path, sizeof(path), dir, "fsync-probe.dat") < 0)
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (unsigned i = 0; i < 32 && r == 0; i++) {
		uint64_t t0 = now_ns();
		r = write_full(fd, line, sizeof(line), off);
		if (r == 0)
			r = datasync(fd);
		d[i] = now_ns() - t0;
		off += sizeof(line);
	}
	close(fd);
	unlink(path);
	if (r < 0)
		return r;
	qsort(d, 32, sizeof(d[0]), cmp_u64);
	*ret_ns = (double)d[16];
	return 0;
}

static void calibrate_timer(struct env *e)
{
	enum { N = 100000 };
	uint64_t *d = malloc(N * sizeof(*d));

#if HAVE_TSC
	struct timespec ten_ms = {0, 10 * 1000 * 1000};
	uint64_t n0 = now_ns(), t0 = tick_start();
	for (int i = 0; i < 10; i++) /* 100 ms, in steps a signal cannot stretch far */
		nanosleep(&ten_ms, NULL);
	uint64_t t1 = tick_end(), n1 = now_ns();
	e->tick_ns = (double)(n1 - n0) / (double)(t1 - t0);
	snprintf(e->timer, sizeof(e->timer), "rdtsc/rdtscp+lfence, %.1f MHz",
		 1000.0 / e->tick_ns);
#else
	e->tick_ns = 1.0;
	snprintf(e->timer, sizeof(e->timer), "clock_gettime(CLOCK_MONOTONIC)");
#endif
	if (!d) {
		e->timer_overhead_ns = NAN;
		return;
	}
	for (int i = 0; i < N; i++) {
		uint64_t a = tick_start();
		uint64_t b = tick_end();
		d[i] = b - a;
	}
	/* resolution: the smallest step between back-to-back unfenced readings */
	uint64_t step = UINT64_MAX, prev = raw_tick();
	for (int i = 0; i < N; i++) {
		uint64_t t = raw_tick();
		if (t != prev && t - prev < step)
			step = t - prev;
		prev = t;
	}
	qsort(d, N, sizeof(d[0]), cmp_u64);
	e->timer_overhead_ns = (double)d[N / 2] * e->tick_ns;
	e->timer_resolution_ns = step == UINT64_MAX ? NAN : (double)step * e->tick_ns;
	free(d);
}

/* ---- the worker thread's CPU time ----------------------------------------- */

/* The library names its worker "auditlog-worker"; only one log is open at a
 * time here. It names itself when it starts: look for up to a second. */
static pid_t find_worker(void)
{
	for (int tries = 0; tries < 200; tries++) {
		DIR *d = opendir("/proc/self/task");
		struct dirent *de;
		pid_t found = 0;
		if (!d)
			return 0;
		while ((de = readdir(d))) {
			char path[300], comm[64];
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
			if (read_small(path, comm, sizeof(comm)) > 0 &&
			    strcmp(comm, "auditlog-worker") == 0) {
				found = (pid_t)strtol(de->d_name, NULL, 10);
				break;
			}
		}
		closedir(d);
		if (found)
			return found;
		struct timespec five_ms = {0, 5 * 1000 * 1000};
		nanosleep(&five_ms, NULL);
	}
	return 0;
}

/* The CPU-time clock of another thread of this process, by its TID: what
 * glibc's pthread_getcpuclockid() computes for a pthread_t (the kernel's
 * MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)), which we cannot use for a
 * thread the library created. The kernel answers it for threads of the
 * caller's own thread group, to the nanosecond, including the time of a
 * thread running at that moment on another CPU. */
static clockid_t tid_cpu_clock(pid_t tid)
{
	return (clockid_t)((~(unsigned)tid << 3) | 6u);
}

/* A thread's scheduler counts: switches away from it that it asked for
 * (sleeps) and that it did not (preemptions), from /proc/.../status, and
 * its moves between CPUs (se.nr_migrations, /proc/.../sched; needs
 * CONFIG_SCHED_DEBUG, else 0 and false). */
struct sched_counts {
	unsigned long long voluntary, involuntary, migrations;
	bool have_migrations;
};

static bool thread_sched_counts(pid_t tid, struct sched_counts *c)
{
	char path[64], buf[8192];
	const char *q;

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	if (read_small(path, buf, sizeof(buf)) <= 0 ||
	    !(q = strstr(buf, "\nvoluntary_ctxt_switches:")))
		return false;
	c->voluntary = strtoull(q + strlen("\nvoluntary_ctxt_switches:"), NULL, 10);
	if (!(q = strstr(buf, "\nnonvoluntary_ctxt_switches:")))
		return false;
	c->involuntary = strtoull(q + strlen("\nnonvoluntary_ctxt_switches:"), NULL, 10);
	snprintf(path, sizeof(path), "/proc/self/task/%d/sched", (int)tid);
	if (read_small(path, buf, sizeof(buf)) > 0 && (q = strstr(buf, "\nse.nr_migrations")) &&
	    (q = strchr(q, ':'))) {
		c->migrations = strtoull(q + 1, NULL, 10);
		c->have_migrations = true;
	}
	return true;
}

/* On-CPU ns of a thread: its CPU-time clock (1 ns), else schedstat's first
 * field (ns, but behind by up to a scheduler tick for a running thread), else
 * utime+stime (clock ticks, 10 ms at USER_HZ 100). *src names the source. */
static int thread_cpu_ns(pid_t tid, uint64_t *ret, const char **src)
{
	char path[64], buf[1024];
	unsigned long long v;
	struct timespec ts;

	if (clock_gettime(tid_cpu_clock(tid), &ts) == 0) {
		*ret = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		*src = "cpuclock";
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)tid);
	if (read_small(path, buf, sizeof(buf)) > 0 && sscanf(buf, "%llu", &v) == 1) {
		*ret = v;
		*src = "schedstat";
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	if (read_small(path, buf, sizeof(buf)) > 0) {
		char *p = strrchr(buf, ')');
		unsigned long long ut, stt;
		/* after "pid (comm)": state is field 3, utime 14, stime 15 */
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
				&ut, &stt) == 2) {
			long hz = sysconf(_SC_CLK_TCK);
			*ret = (ut + stt) * (1000000000ull / (uint64_t)(hz > 0 ? hz : 100));
			*src = "stat";
			return 0;
		}
	}
	return -ENOENT;
}

/* ---- opening logs ----------------------------------------------------------- */

static int open_log(const struct opts *o, const char *path, size_t queue, uint64_t rotate,
		    uint64_t coalesce_us, struct auditlog **ret)
{
	struct auditlog_config *cfg;
	int r;

	r = auditlog_config_new(&cfg);
	if (r < 0)
		return r;
	if ((r = auditlog_config_set_path(cfg, path)) < 0 ||
	    (r = auditlog_config_set_format_version(cfg, o->version)) < 0 ||
	    (queue && (r = auditlog_config_set_queue_capacity(cfg, queue)) < 0) ||
	    (o->has_lanes && (r = auditlog_config_set_queue_lanes(cfg, o->lanes)) < 0) ||
	    (r = auditlog_config_set_rotate_bytes(cfg, rotate)) < 0 ||
	    (r = auditlog_config_set_backend(cfg, o->backend)) < 0 ||
	    (r = auditlog_config_set_async_coalesce_us(cfg, coalesce_us)) < 0 ||
	    (o->max_batch && (r = auditlog_config_set_max_batch_bytes(cfg, o->max_batch)) < 0) ||
	    (o->has_worker_nice && (r = auditlog_config_set_worker_nice(cfg, o->worker_nice)) < 0) ||
	    (o->worker_cpus && (r = auditlog_config_set_worker_cpus(cfg, o->worker_cpus)) < 0) ||
	    (o->has_drop_behind &&
	     (r = auditlog_config_set_drop_behind_bytes(cfg, o->drop_behind)) < 0) ||
	    (o->seal_state &&
	     (r = auditlog_config_set_sealing(cfg, o->seal_state, o->signing_key)) < 0) ||
	    (!o->seal_state && o->sealer_socket &&
	     (r = auditlog_config_set_sealer_socket(cfg, o->sealer_socket)) < 0)) {
		auditlog_config_free(cfg);
		return r;
	}
	r = auditlog_open(cfg, ret);
	auditlog_config_free(cfg);
	return r;
}

static unsigned g_version; /* the format version asked for (open_hint) */

static const char *open_hint(int r)
{
	if (g_version == 2 && r == -EOPNOTSUPP)
		return " (auditlog_open refuses format version 2: this build of the library does "
		       "not write v2 yet)";
	switch (r) {
	case -EPROTO: return " (the log's last record has a higher format version)";
	case -EBUSY: return " (another writer holds the log)";
	case -EBADMSG: return " (the log's tail is damaged beyond repair)";
	case -EACCES:
	case -EPERM: return " (a --worker-nice below the bench's needs CAP_SYS_NICE or RLIMIT_NICE)";
	default: return "";
	}
}

/* ---- producers ------------------------------------------------------------------ */

struct producer {
	pthread_t tid;
	struct auditlog *log;
	pthread_barrier_t *gate;
	struct auditlog_event ev[NVAR];
	uint64_t n;
	uint64_t *ticks; /* enqueue phase: the whole calls' samples, (n + 1) / 2 */
	uint64_t *hticks; /* and the hand-offs', n / 2 */
	struct al_prep *prep; /* the event a timed hand-off takes */
	unsigned version;     /* the log's format version (al_prepare) */
	uint64_t nw, nh;      /* samples taken of each */
	unsigned warmup;
	int err;
	uint64_t cpu_ns; /* this thread's CPU time from the gate to its last record */
};

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	int r;

	for (unsigned i = 0; i < p->warmup; i++) {
		r = auditlog_record(p->log, &p->ev[i & (NVAR - 1)]);
		if (r < 0) {
			p->err = r;
			break;
		}
	}
	pthread_barrier_wait(p->gate);
	if (p->err)
		return NULL;
	uint64_t c0 = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	if (!p->ticks) {
		for (uint64_t i = 0; i < p->n; i++) {
			r = auditlog_record(p->log, &p->ev[i & (NVAR - 1)]);
			if (r < 0) {
				p->err = r;
				break;
			}
		}
		p->cpu_ns = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		return NULL;
	}
	/* Every other call is timed whole (auditlog_record); in between, the
	 * event is prepared untimed (al_prepare: decode and render, the work
	 * moved into producers) and only its hand-off is timed (reserve, copy,
	 * publish: what auditlog_record does after al_prepare). */
	uint64_t nw = 0, nh = 0;
	for (uint64_t i = 0; i < p->n; i++) {
		const struct auditlog_event *ev = &p->ev[i & (NVAR - 1)];
		uint64_t t0, t1;
		if (i & 1) {
			r = al_prepare((uint8_t)p->version, ev, NULL, 0, p->prep);
			if (r < 0)
				goto fail;
			t0 = tick_start();
			r = al_record_prepared(p->log, p->prep);
			t1 = tick_end();
			p->hticks[nh++] = t1 - t0;
		} else {
			t0 = tick_start();
			r = auditlog_record(p->log, ev);
			t1 = tick_end();
			p->ticks[nw++] = t1 - t0;
		}
		if (r < 0) {
fail:
			p->err = r;
			break;
		}
	}
	p->nw = nw;
	p->nh = nh;
	p->cpu_ns = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0; /* the timer included */
	return NULL;
}

/* Start `nthreads` producers sharing `events`, release them together (the
 * start time is taken as they pass the gate) and join them. Returns 0 or the
 * first producer's error. */
static int run_producers(struct producer *p, unsigned nthreads, struct auditlog *log,
			 uint64_t events, uint64_t **ticks, unsigned warmup, uint64_t *ret_t0)
{
	pthread_barrier_t gate;
	unsigned started = 0;
	int r = 0;

	pthread_barrier_init(&gate, NULL, nthreads + 1);
	for (unsigned i = 0; i < nthreads; i++) {
		p[i].log = log;
		p[i].gate = &gate;
		p[i].n = events / nthreads + (i < events % nthreads);
		p[i].ticks = ticks ? ticks[i] : NULL;
		p[i].warmup = warmup;
		p[i].err = 0;
		for (unsigned v = 0; v < NVAR; v++)
			make_event(&p[i].ev[v], i, v);
	}
	for (; started < nthreads; started++) {
		r = pthread_create(&p[started].tid, NULL, producer_main, &p[started]);
		if (r)
			break;
	}
	if (started < nthreads) {
		/* cannot release the barrier with fewer parties: it was sized for all */
		error_msg("pthread_create: %s", strerror(r));
		exit(1);
	}
	pthread_barrier_wait(&gate);
	*ret_t0 = now_ns();
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(p[i].tid, NULL);
	pthread_barrier_destroy(&gate);
	for (unsigned i = 0; i < nthreads; i++)
		if (p[i].err)
			return p[i].err;
	return 0;
}

/* ---- v2's non-event records, counted in the file ------------------------------------ */

/* The writer's counters give records and events, not the types between them:
 * read the bytes [off0, off1) of a log file back and count each line's
 * "type" (v2: header, seal, tree, checkpoint; v0/v1 have no seal or tree). */
struct rectypes {
	bool counted;
	uint64_t event, header, seal, tree, checkpoint, other;
};

static int count_types(const char *path, off_t off0, off_t off1, struct rectypes *t)
{
	static const char key[] = "\"type\":\"";
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	off_t at = off0;
	int r = 0;

	memset(t, 0, sizeof(*t));
	if (!f)
		return -errno;
	if (fseeko(f, off0, SEEK_SET) < 0) {
		r = -errno;
		goto out;
	}
	while (at < off1) {
		ssize_t n = getline(&line, &cap, f);
		if (n < 0)
			break;
		at += n;
		const char *p = memmem(line, (size_t)n, key, sizeof(key) - 1);
		const char *v = p ? p + sizeof(key) - 1 : "";
		if (strncmp(v, "event\"", 6) == 0)
			t->event++;
		else if (strncmp(v, "seal\"", 5) == 0)
			t->seal++;
		else if (strncmp(v, "tree\"", 5) == 0)
			t->tree++;
		else if (strncmp(v, "checkpoint\"", 11) == 0)
			t->checkpoint++;
		else if (strncmp(v, "header\"", 7) == 0)
			t->header++;
		else
			t->other++;
	}
	if (ferror(f))
		r = -EIO;
	else
		t->counted = true;
out:
	free(line);
	fclose(f);
	return r;
}

static off_t file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : -1;
}

/* ---- memory for the page cache, the same for both sides of the ratio ------------ */

/*
 * On a guest with free page reporting (this project's VM: "A growing file on
 * this VM" in docs/benchmarks.md) memory the guest freed a while ago has gone
 * back to the host, and its next first touch costs microseconds a page:
 * a file whose page cache grows into such memory is written at a third of
 * the speed or less. Whichever of the library and the raw ceiling met it
 * first ran slower for it, not for the disk, and the ratio went from 0.38 to
 * 1.63 with the machine's history. So before each side the same number of
 * bytes is written to a scratch file (no fdatasync) and unlinked: its dirty
 * pages are dropped unwritten, and the side that follows takes those pages.
 */
static uint64_t prime_size(const struct opts *o, const char *dir)
{
	uint64_t want = o->events * PRIME_EVENT_BYTES, avail = 0;
	char buf[4096], *p;
	struct statvfs vfs;

	if (o->has_prime_bytes)
		return o->prime_bytes;
	if (want < PRIME_MIN)
		want = PRIME_MIN;
	if (want > PRIME_MAX)
		want = PRIME_MAX;
	if (read_small("/proc/meminfo", buf, sizeof(buf)) >= 0 &&
	    (p = strstr(buf, "MemAvailable:")) && sscanf(p + 13, "%" SCNu64, &avail) == 1 &&
	    avail * 1024 / 4 < want)
		want = avail * 1024 / 4;
	/* the file system reserves the dirty pages' blocks though none is written */
	if (statvfs(dir, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize / 4 < want)
		want = (uint64_t)vfs.f_bavail * vfs.f_frsize / 4;
	return want & ~((UINT64_C(1) << 20) - 1);
}

/* Write `bytes` to a scratch file in dir and unlink it; the seconds it took,
 * or a negative errno (reported by the caller, not fatal: the phase runs). */
static double prime_cache(const char *dir, uint64_t bytes)
{
	static uint8_t chunk[1u << 20];
	char path[PATH_MAX];
	uint64_t t0 = now_ns(), off;
	int fd, r = 0;

	if (!bytes)
		return 0;
	if (join_path(path, sizeof(path), dir, "prime.dat") < 0)
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	memset(chunk, 'p', sizeof(chunk));
	for (off = 0; off < bytes && r == 0; off += sizeof(chunk))
		r = write_full(fd, chunk, bytes - off < sizeof(chunk) ? bytes - off : sizeof(chunk), off);
	if (unlink(path) < 0 && r == 0)
		r = -errno;
	close(fd);
	return r < 0 ? r : (double)(now_ns() - t0) / 1e9;
}

static void prime_before(const char *dir, const char *what, uint64_t bytes, double *ret_s)
{
	double s;

	if (!bytes)
		return;
	progress("priming %" PRIu64 " MiB of page cache before %s", bytes >> 20, what);
	s = prime_cache(dir, bytes);
	if (s < 0)
		error_msg("priming the page cache before %s: %s (measured unprimed)", what,
			  strerror((int)-s));
	*ret_s = s;
}

/* ---- phase 1: sustained throughput --------------------------------------- */

struct sustained {
	double seconds, events_per_s, line_avg;
	struct auditlog_stats st;
	bool worker_found;
	const char *worker_src;
	double worker_res_ns; /* the source's resolution */
	/* the worker's scheduler counts over the phase (sched_found) */
	bool sched_found;
	struct sched_counts sched;
	uint64_t worker_ns, process_ns, producers_ns;
	double worker_ns_per_event, process_ns_per_event, producers_ns_per_event;
	double parts_ns_per_event; /* producers + worker: DESIGN.md's total */
	double other_ns_per_event; /* process - producers - worker: io_uring's io-wq, main */
	/* what the online CPUs could sustain at process_ns_per_event, and the
	 * share of their time the process used: against the raw ceiling, they
	 * say when the CPUs, not the disk, set the sustained figure */
	double cpu_bound_events_per_s, cpu_busy;
	struct rectypes types; /* the whole log file (not counted with --rotate-bytes) */
	/* the phase's log opened again (measure_reopen): what open's tail scan
	 * costs at this max_batch_bytes, on a long file */
	unsigned reopens;
	uint64_t reopen_bytes;
	double reopen_p50_ms, reopen_min_ms, reopen_max_ms;
	/* events/s of each round (the first is events_per_s, whose phase every
	 * other figure here is of) and their median: the sustained figure */
	double round_eps[MAX_ROUNDS];
	/* and each round's CPU per event: the worker, the producers, the rest
	 * of the process (io_uring's io-wq, which copies the batches into the
	 * page cache); NAN where the worker was not found */
	double round_worker_ns[MAX_ROUNDS], round_producers_ns[MAX_ROUNDS],
		round_other_ns[MAX_ROUNDS];
	unsigned nrounds;
	double median_eps;
};

/* One round's figures into s's rounds (round 1's included). */
static void keep_round(struct sustained *s, const struct sustained *one)
{
	if (s->nrounds >= MAX_ROUNDS)
		return;
	s->round_eps[s->nrounds] = one->events_per_s;
	s->round_worker_ns[s->nrounds] = one->worker_ns_per_event;
	s->round_producers_ns[s->nrounds] = one->producers_ns_per_event;
	s->round_other_ns[s->nrounds] = one->other_ns_per_event;
	s->nrounds++;
}

/* Resolution of thread_cpu_ns()'s source. */
static double cpu_src_res_ns(pid_t tid, const char *src)
{
	struct timespec ts;

	if (strcmp(src, "cpuclock") == 0 && clock_getres(tid_cpu_clock(tid), &ts) == 0)
		return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
	if (strcmp(src, "stat") == 0) {
		long hz = sysconf(_SC_CLK_TCK);
		return 1e9 / (double)(hz > 0 ? hz : 100);
	}
	return 1.0; /* schedstat: ns, up to a tick behind for a running thread */
}

/* Open the sustained phase's log REOPENS times (then close it at once),
 * with the bench's settings but the library's queue size: open reads back
 * 2 x max_batch_bytes + 8 KiB of the tail and chains every line of it
 * (docs/format.md 7), so this is the figure a larger batch costs. */
#define REOPENS 9
static int measure_reopen(const struct opts *o, const char *path, struct sustained *s)
{
	uint64_t t[REOPENS];
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	s->reopen_bytes = (uint64_t)st.st_size;
	for (unsigned i = 0; i < REOPENS; i++) {
		struct auditlog *log;
		uint64_t t0 = now_ns();
		int r = open_log(o, path, 0, o->rotate_bytes, 0, &log);
		t[i] = now_ns() - t0;
		if (r < 0) {
			error_msg("reopen %s: %s%s", path, strerror(-r), open_hint(r));
			return r;
		}
		r = auditlog_close(log);
		if (r < 0) {
			error_msg("reopen %s: close: %s", path, strerror(-r));
			return r;
		}
	}
	qsort(t, REOPENS, sizeof(t[0]), cmp_u64);
	s->reopens = REOPENS;
	s->reopen_p50_ms = (double)t[REOPENS / 2] / 1e6;
	s->reopen_min_ms = (double)t[0] / 1e6;
	s->reopen_max_ms = (double)t[REOPENS - 1] / 1e6;
	return 0;
}

static int phase_sustained(const struct opts *o, const struct env *e, const char *path,
			   bool count, struct sustained *s)
{
	struct producer *p = calloc(o->threads, sizeof(*p));
	struct auditlog *log;
	uint64_t t0, t1, w0 = 0, w1 = 0, c0, c1;
	struct sched_counts sc0, sc1;
	pid_t wtid;
	int r, rc;

	memset(s, 0, sizeof(*s));
	if (!p)
		return -ENOMEM;
	r = open_log(o, path, o->queue, o->rotate_bytes, o->coalesce_us, &log);
	if (r < 0) {
		error_msg("cannot open %s: %s%s", path, strerror(-r), open_hint(r));
		free(p);
		return r;
	}
	wtid = find_worker();
	s->worker_found = wtid > 0 && thread_cpu_ns(wtid, &w0, &s->worker_src) == 0;
	s->sched_found = s->worker_found && thread_sched_counts(wtid, &sc0);
	c0 = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID);

	progress("sustained: the producers start");
	r = run_producers(p, o->threads, log, o->events, NULL, 0, &t0);
	progress("sustained: the producers are done");
	if (r < 0)
		error_msg("auditlog_record: %s", strerror(-r));
	rc = auditlog_flush(log);
	if (rc < 0) {
		error_msg("auditlog_flush: %s", strerror(-rc));
		if (!r)
			r = rc;
	}
	if (s->worker_found && thread_cpu_ns(wtid, &w1, &s->worker_src) < 0)
		s->worker_found = false;
	c1 = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	if (s->sched_found) /* read again at the end, or not at all */
		s->sched_found = s->worker_found && thread_sched_counts(wtid, &sc1);
	if (s->sched_found) {
		s->sched.voluntary = sc1.voluntary - sc0.voluntary;
		s->sched.involuntary = sc1.involuntary - sc0.involuntary;
		s->sched.migrations = sc1.migrations - sc0.migrations;
		s->sched.have_migrations = sc0.have_migrations && sc1.have_migrations;
	}
	if (s->worker_found) /* while the thread lives */
		s->worker_res_ns = cpu_src_res_ns(wtid, s->worker_src);
	auditlog_get_stats(log, &s->st, sizeof(s->st));
	rc = auditlog_close(log);
	t1 = now_ns();
	progress("sustained: closed, %.3f s", (double)(t1 - t0) / 1e9);
	for (unsigned i = 0; i < o->threads; i++)
		s->producers_ns += p[i].cpu_ns;
	free(p);
	if (rc < 0) {
		error_msg("auditlog_close: %s", strerror(-rc));
		if (!r)
			r = rc;
	}
	if (r < 0)
		return r;
	if (s->st.events_written != o->events || s->st.events_failed || s->st.error) {
		error_msg("sustained phase: %" PRIu64 " events recorded but %" PRIu64
			  " written, %" PRIu64 " failed (log error %d)",
			  o->events, s->st.events_written, s->st.events_failed, s->st.error);
		return -EIO;
	}
	if (count && !o->rotate_bytes && (r = count_types(path, 0, file_size(path), &s->types)) < 0)
		error_msg("cannot read %s back: %s", path, strerror(-r)); /* not a figure: go on */
	s->seconds = (double)(t1 - t0) / 1e9;
	s->events_per_s = (double)o->events / s->seconds;
	s->line_avg = s->st.records_written ?
			      (double)s->st.bytes_written / (double)s->st.records_written : 0;
	s->worker_ns = w1 - w0;
	s->worker_ns_per_event = s->worker_found ? (double)s->worker_ns / (double)o->events : NAN;
	s->process_ns = c1 - c0;
	s->process_ns_per_event = (double)s->process_ns / (double)o->events;
	s->producers_ns_per_event = (double)s->producers_ns / (double)o->events;
	s->parts_ns_per_event = s->producers_ns_per_event + s->worker_ns_per_event;
	s->other_ns_per_event = s->worker_found ?
		(double)((int64_t)s->process_ns - (int64_t)s->producers_ns - (int64_t)s->worker_ns) /
			(double)o->events : NAN;
	double ncpu = e->nproc > 0 ? (double)e->nproc : 1; /* the report's "online" */
	s->cpu_bound_events_per_s = 1e9 * ncpu / s->process_ns_per_event;
	s->cpu_busy = (double)s->process_ns / (s->seconds * 1e9 * ncpu);
	return 0;
}

/* ---- preformatted lines for the raw baselines ---------------------------------- */

struct pool {
	uint8_t *buf;  /* the lines twice over, so that any window is contiguous */
	size_t *off;   /* 2 * POOL_LINES + 1 offsets */
	size_t bytes;  /* one copy */
	double avg;
};

static void set_str(struct al_record *r, enum al_field f, const void *p, size_t n)
{
	r->present |= AL_BIT(f);
	r->f[f].p = p;
	r->f[f].n = n;
}

/* What formatting one event by the library's format layer needs. */
struct fmtbuf {
	uint8_t *line, *work, *dec;
	char ts[AL_TS_LEN], rvb[24], mechb[24];
};

static int fmtbuf_init(struct fmtbuf *b)
{
	b->line = malloc(AL_LINE_MAX);
	b->work = malloc(AL_HASH_LEN + AL_BODY_MAX);
	b->dec = malloc(AL_LINE_MAX * 3);
	return b->line && b->work && b->dec ? 0 : -ENOMEM;
}

static void fmtbuf_free(struct fmtbuf *b)
{
	free(b->line);
	free(b->work);
	free(b->dec);
}

/* ev as the writer turns it into a record (writer.c format_slot: the members
 * it has, CKR_/CKM_ names or 0x%08llx), decoded, of `version`, with seq. */
static int decode_event(struct fmtbuf *b, const struct auditlog_event *ev, unsigned version,
			uint64_t seq, uint64_t ts_ns, struct al_record *d)
{
	static const char *const outcome[] = {"success", "failure", "unknown"};
	struct al_record raw = {.type = AL_T_EVENT};
	const char *n;
	int r;

	al_format_ts(ts_ns, b->ts);
	set_str(&raw, AL_F_TIMESTAMP, b->ts, AL_TS_LEN);
	set_str(&raw, AL_F_ACTION, ev->action, ev->action_len);
	set_str(&raw, AL_F_OUTCOME, outcome[ev->outcome], strlen(outcome[ev->outcome]));
	if (ev->flags & AUDITLOG_EV_RV) {
		n = auditlog_ckr_name(ev->rv);
		if (!n) {
			snprintf(b->rvb, sizeof(b->rvb), "0x%08llx", (unsigned long long)ev->rv);
			n = b->rvb;
		}
		set_str(&raw, AL_F_RV, n, strlen(n));
	}
	if (ev->flags & AUDITLOG_EV_MECHANISM) {
		n = auditlog_ckm_name(ev->mechanism);
		if (!n) {
			snprintf(b->mechb, sizeof(b->mechb), "0x%08llx",
				 (unsigned long long)ev->mechanism);
			n = b->mechb;
		}
		set_str(&raw, AL_F_MECHANISM, n, strlen(n));
	}
	if (ev->key_label && ev->key_label_len)
		set_str(&raw, AL_F_KEY_LABEL, ev->key_label, ev->key_label_len);
	if (ev->key_id && ev->key_id_len)
		set_str(&raw, AL_F_KEY_ID, ev->key_id, ev->key_id_len);
	if (ev->actor && ev->actor_len)
		set_str(&raw, AL_F_ACTOR, ev->actor, ev->actor_len);
	if (ev->detail && ev->detail_len)
		set_str(&raw, AL_F_DETAIL, ev->detail, ev->detail_len);
	if (ev->flags & AUDITLOG_EV_SLOT) {
		raw.present |= AL_BIT(AL_F_SLOT);
		raw.f[AL_F_SLOT].u = ev->slot;
	}
	if (ev->flags & AUDITLOG_EV_SESSION) {
		raw.present |= AL_BIT(AL_F_SESSION);
		raw.f[AL_F_SESSION].u = ev->session;
	}
	r = al_record_decode(&raw, d, b->dec, AL_LINE_MAX * 3);
	if (r < 0)
		return r;
	d->version = (uint8_t)version;
	d->type = AL_T_EVENT;
	d->present |= AL_BIT(AL_F_SEQ);
	d->f[AL_F_SEQ].u = seq;
	return 0;
}

/* The line of ev into b->line, chained onto prev (updated). Its length. */
static long emit_event(struct fmtbuf *b, const struct auditlog_event *ev, unsigned version,
		       uint64_t seq, uint64_t ts_ns, uint8_t prev[AL_HASH_LEN])
{
	struct al_record d;
	struct al_emit_out eo;
	int r = decode_event(b, ev, version, seq, ts_ns, &d);

	if (r < 0)
		return r;
	long n = al_emit(&d, prev, b->line, b->work, &eo);
	if (n > 0)
		memcpy(prev, eo.hash, AL_HASH_LEN);
	return n;
}

static long variant_line_len(struct fmtbuf *b, unsigned v, unsigned version, uint64_t seq,
			     uint64_t ts_ns)
{
	struct auditlog_event ev;
	uint8_t prev[AL_HASH_LEN] = {0};

	make_event(&ev, 0, v);
	return emit_event(b, &ev, version, seq, ts_ns, prev);
}

/* Set g_shape so that every variant's line is `size` bytes at the sequence
 * numbers of a run of `events` (the digits of seq change the length by a
 * byte or two; the report gives the library's average). 0 or -ERANGE with
 * *min_len, the shortest line these events can make. */
static int shape_lines(unsigned size, unsigned version, uint64_t events, long *min_len)
{
	struct fmtbuf b;
	uint64_t seq = events / 2 + 1, ts = realtime_ns();
	int r = 0;

	for (size_t i = 0; i < sizeof(g_detail); i++)
		g_detail[i] = "abcdefghijklmnopqrstuvwxyz0123456789 "[i % 37];
	memset(g_shape, 0, sizeof(g_shape));
	if (!size)
		return 0;
	r = fmtbuf_init(&b);
	*min_len = LONG_MAX;
	for (unsigned v = 0; v < NVAR && r == 0; v++) {
		bool fit = false;
		for (unsigned k = 0; k < NDROP && !fit; k++) {
			g_shape[v] = (struct shape){.drop = drop_levels[k]};
			long l0 = variant_line_len(&b, v, version, seq, ts);
			if (l0 < 0) {
				r = (int)l0;
				break;
			}
			if (k == NDROP - 1 && l0 < *min_len)
				*min_len = l0;
			if (l0 == (long)size) {
				fit = true;
				break;
			}
			if (l0 > (long)size)
				continue;
			g_shape[v].detail = 1;
			long l1 = variant_line_len(&b, v, version, seq, ts);
			if (l1 < 0) {
				r = (int)l1;
				break;
			}
			long want = (long)size - l1 + 1;
			if (want >= 1 && want <= (long)sizeof(g_detail)) {
				g_shape[v].detail = (size_t)want;
			} else if (!(drop_levels[k] & DROP_ACTOR) &&
				   4 + (size_t)((long)size - l0) < sizeof(g_actor)) {
				/* closer than a detail member can come: a longer actor */
				g_shape[v].detail = 0;
				g_shape[v].actor = 4 + (size_t)((long)size - l0);
			} else {
				continue;
			}
			fit = variant_line_len(&b, v, version, seq, ts) == (long)size;
		}
		if (r == 0 && !fit) {
			if (*min_len == LONG_MAX)
				*min_len = variant_line_len(&b, v, version, seq, ts);
			r = -ERANGE;
		}
	}
	fmtbuf_free(&b);
	return r;
}

/* Real lines of the same events, made by the library's own format layer. */
static int make_pool(struct pool *pl, unsigned nthreads, unsigned version, uint64_t seq0)
{
	struct fmtbuf b;
	uint8_t prev[AL_HASH_LEN] = {0};
	uint64_t ts0 = realtime_ns();
	size_t longest = 0, cap, used = 0;
	int r;

	memset(pl, 0, sizeof(*pl));
	r = fmtbuf_init(&b);
	for (unsigned v = 0; v < NVAR; v++)
		if (g_shape[v].detail > longest)
			longest = g_shape[v].detail;
	cap = (size_t)POOL_LINES * (longest + 1024); /* a line without detail: < 1 KiB */
	pl->buf = malloc(cap * 2);
	pl->off = malloc((2 * POOL_LINES + 1) * sizeof(size_t));
	if (r < 0 || !pl->buf || !pl->off) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < POOL_LINES; i++) {
		struct auditlog_event ev;

		make_event(&ev, i % nthreads, (i / nthreads) & (NVAR - 1));
		long n = emit_event(&b, &ev, version, seq0 + i, ts0 + i * 1000u, prev);
		if (n < 0) {
			r = (int)n;
			goto out;
		}
		if (used + (size_t)n > cap) {
			r = -E2BIG;
			goto out;
		}
		pl->off[i] = used;
		memcpy(pl->buf + used, b.line, (size_t)n);
		used += (size_t)n;
	}
	pl->bytes = used;
	memcpy(pl->buf + used, pl->buf, used);
	for (unsigned i = 0; i < POOL_LINES; i++)
		pl->off[POOL_LINES + i] = pl->off[i] + used;
	pl->off[2 * POOL_LINES] = 2 * used;
	pl->avg = (double)used / POOL_LINES;
out:
	fmtbuf_free(&b);
	return r;
}

static void free_pool(struct pool *pl)
{
	free(pl->buf);
	free(pl->off);
}

/* ---- phase 2: the raw group-commit ceiling ------------------------------------ */

struct sweep_pt {
	unsigned batch;
	uint64_t lines, bytes, batches;
	double seconds, events_per_s, mb_per_s, batch_ms;
	/* of batch_ms: in pwrite (the copy into the page cache, where the guest's
	 * first touches of memory show) and in fdatasync (the disk) */
	double write_ms, fsync_ms;
	/* the slowest batch: a disk stall's size, and how far past its limit
	 * the point can run (it stops at the first batch that ends past it) */
	double max_batch_ms;
	/* events/s of each round that measured this size (the first is
	 * events_per_s above, whose details the other fields are: only the
	 * first round's best size is measured again), and their median */
	double round_eps[MAX_ROUNDS];
	unsigned nrounds;
	double median_eps;
};

struct ceiling {
	struct sweep_pt pt[NSWEEP];
	unsigned best;        /* the first sweep's best size: the ceiling's */
	double events_per_s;  /* its median_eps: the ceiling */
	double first_events_per_s; /* its first round: the ceiling before rounds */
};

/* One size of the sweep: batches of b lines at a growing offset of a new
 * file, each pwrite followed by fdatasync, for at least min_ms. */
static int sweep_point(const char *path, const struct pool *pl, unsigned b, unsigned min_ms,
		       struct sweep_pt *pt)
{
	const uint64_t min_ns = (uint64_t)min_ms * 1000000u, max_ns = 2 * min_ns;
	uint64_t off = 0, t0, el = 0, tw, tf, tend, w_ns = 0, f_ns = 0, max_ns_b = 0;
	size_t at = 0;
	int r = 0, fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	memset(pt, 0, sizeof(*pt));
	if (fd < 0) {
		r = -errno;
		error_msg("cannot create %s: %s", path, strerror(-r));
		return r;
	}
	progress("raw ceiling: batches of %u lines", b);
	pt->batch = b;
	t0 = now_ns();
	while (r == 0) {
		size_t len = pl->off[at + b] - pl->off[at];
		tw = now_ns();
		r = write_full(fd, pl->buf + pl->off[at], len, off);
		tf = now_ns();
		if (r == 0)
			r = datasync(fd);
		tend = now_ns();
		w_ns += tf - tw;
		f_ns += tend - tf;
		if (tend - tw > max_ns_b)
			max_ns_b = tend - tw;
		if (r < 0) {
			error_msg("raw ceiling: write/fdatasync: %s", strerror(-r));
			break;
		}
		off += len;
		at = (at + b) % POOL_LINES;
		pt->lines += b;
		pt->batches++;
		el = now_ns() - t0;
		if (pt->batches >= SWEEP_MIN_BATCHES &&
		    ((off >= SWEEP_BYTES && el >= min_ns) || el >= max_ns))
			break;
	}
	close(fd);
	unlink(path);
	pt->bytes = off;
	pt->seconds = (double)el / 1e9;
	pt->events_per_s = pt->seconds > 0 ? (double)pt->lines / pt->seconds : 0;
	pt->mb_per_s = pt->seconds > 0 ? (double)off / 1e6 / pt->seconds : 0;
	pt->batch_ms = pt->batches ? (double)el / 1e6 / (double)pt->batches : 0;
	pt->write_ms = pt->batches ? (double)w_ns / 1e6 / (double)pt->batches : 0;
	pt->fsync_ms = pt->batches ? (double)f_ns / 1e6 / (double)pt->batches : 0;
	pt->max_batch_ms = (double)max_ns_b / 1e6;
	pt->round_eps[0] = pt->events_per_s;
	pt->nrounds = 1;
	return r;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The median of n values (n >= 1; an even n: the mean of the middle two). */
static double median_of(const double *v, unsigned n)
{
	double t[MAX_ROUNDS];

	assert(n >= 1 && n <= MAX_ROUNDS);
	memcpy(t, v, n * sizeof(*t));
	qsort(t, n, sizeof(*t), cmp_double);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* Each size's median over the rounds that measured it; the ceiling is that
 * of the size the first sweep found best, the only size measured again. */
static void ceiling_settle(struct ceiling *c)
{
	for (unsigned k = 0; k < NSWEEP; k++)
		c->pt[k].median_eps = median_of(c->pt[k].round_eps, c->pt[k].nrounds);
	c->events_per_s = c->pt[c->best].median_eps;
}

/* The first round: every size. */
static int phase_ceiling(const char *dir, const struct pool *pl, unsigned min_ms, struct ceiling *c)
{
	char path[PATH_MAX];
	int r = 0;

	memset(c, 0, sizeof(*c));
	if (join_path(path, sizeof(path), dir, "raw-ceiling.dat") < 0)
		return -ENAMETOOLONG;
	for (unsigned k = 0; k < NSWEEP && r == 0; k++) {
		r = sweep_point(path, pl, sweep_sizes[k], min_ms, &c->pt[k]);
		if (c->pt[k].events_per_s > c->first_events_per_s) {
			c->first_events_per_s = c->pt[k].events_per_s;
			c->best = k;
		}
	}
	ceiling_settle(c);
	return r;
}

/* A later round: the first sweep's best size again. Only it: picking the
 * best of several sizes in every round would pick the luckiest again. */
static int ceiling_round(const char *dir, const struct pool *pl, unsigned min_ms, struct ceiling *c)
{
	struct sweep_pt *pt = &c->pt[c->best], one;
	char path[PATH_MAX];
	int r;

	if (join_path(path, sizeof(path), dir, "raw-ceiling.dat") < 0)
		return -ENAMETOOLONG;
	progress("raw ceiling: a round at %u lines", pt->batch);
	r = sweep_point(path, pl, pt->batch, min_ms, &one);
	progress("raw ceiling: the round done");
	if (r == 0 && pt->nrounds < MAX_ROUNDS)
		pt->round_eps[pt->nrounds++] = one.events_per_s;
	ceiling_settle(c);
	return r;
}

/* ---- phase 3: record_sync vs one raw write+fdatasync ----------------------------- */

struct synclat {
	unsigned n, rounds;
	double p50_us, p99_us, raw_p50_us, raw_p99_us, ratio;
	size_t raw_line_len;
	/* --sealer-socket: record_sync sealing through auditlog-sealer, in the
	 * same rounds (sealer_ratio: its p50 / raw p50; sealer_vs_inproc: its
	 * p50 / in-process p50), and the seal requests' mean round trip */
	bool sealer;
	double s_p50_us, s_p99_us, s_ratio, s_vs_inproc, s_rtt_us, s_requests_per_record;
	/* the share of samples whose caller committed its own batch (lead()),
	 * in process and through the sealer */
	double lead_share, s_lead_share;
};

/* One synchronous sample of arm a: 0 in-process (or the only log), 1 raw
 * write+fdatasync, 2 through the sealer. */
static int sync_sample(struct auditlog *log, struct auditlog *slog, int fd, const struct pool *pl,
		       unsigned best, size_t len, uint64_t *roff, const struct auditlog_event *ev,
		       unsigned a)
{
	int r;

	if (a == 0)
		return auditlog_record_sync(log, ev);
	if (a == 2)
		return auditlog_record_sync(slog, ev);
	r = write_full(fd, pl->buf + pl->off[best], len, *roff);
	if (r == 0)
		r = datasync(fd);
	*roff += len;
	return r;
}

static int close_counted(struct auditlog *log, const char *what, int r)
{
	int rc = auditlog_close(log);

	if (rc < 0) {
		error_msg("auditlog_close (%s): %s", what, strerror(-rc));
		if (!r)
			r = rc;
	}
	return r;
}

static int phase_sync(const struct opts *o, const char *dir, const struct pool *pl,
		      double line_avg, struct synclat *s)
{
	static const char *const arm_name[3] = {"auditlog_record_sync", "raw write+fdatasync",
						 "auditlog_record_sync (sealer)"};
	char lpath[PATH_MAX], rpath[PATH_MAX], spath[PATH_MAX];
	uint64_t *lat[3] = {calloc(o->sync_samples, sizeof(uint64_t)),
			    calloc(o->sync_samples, sizeof(uint64_t)),
			    calloc(o->sync_samples, sizeof(uint64_t))};
	struct auditlog_event ev[NVAR];
	struct auditlog *log = NULL, *slog = NULL;
	unsigned per = o->sync_samples / SYNC_ROUNDS, cnt[3] = {0}, best = 0;
	unsigned narms = o->sealer_socket ? 3 : 2;
	uint64_t roff = 0;
	int fd = -1, r;

	memset(s, 0, sizeof(*s));
	s->sealer = narms == 3;
	if (join_path(lpath, sizeof(lpath), dir, "sync.log") < 0 ||
	    join_path(rpath, sizeof(rpath), dir, "raw-sync.dat") < 0 ||
	    join_path(spath, sizeof(spath), dir, "sync-sealer.log") < 0) {
		r = -ENAMETOOLONG;
		goto out;
	}
	if (!lat[0] || !lat[1] || !lat[2]) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned v = 0; v < NVAR; v++)
		make_event(&ev[v], 0, v);
	/* the raw line: the pool line closest to the library's average */
	for (unsigned i = 1; i < POOL_LINES; i++) {
		double di = fabs((double)(pl->off[i + 1] - pl->off[i]) - line_avg);
		double db = fabs((double)(pl->off[best + 1] - pl->off[best]) - line_avg);
		if (di < db)
			best = i;
	}
	s->raw_line_len = pl->off[best + 1] - pl->off[best];

	r = open_log(o, lpath, 16384, 0, o->coalesce_us, &log);
	if (r < 0) {
		error_msg("cannot open %s: %s%s", lpath, strerror(-r), open_hint(r));
		log = NULL;
		goto out;
	}
	if (s->sealer) {
		struct opts so = *o;
		so.seal_state = so.signing_key = NULL; /* the socket instead */
		r = open_log(&so, spath, 16384, 0, o->coalesce_us, &slog);
		if (r < 0) {
			error_msg("cannot open %s through the sealer at %s: %s", spath,
				  o->sealer_socket, strerror(-r));
			slog = NULL;
			goto out;
		}
	}
	fd = open(rpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		r = -errno;
		error_msg("cannot create %s: %s", rpath, strerror(-r));
		goto out;
	}
	/* warm every path up (the log's header, the first extents) */
	for (unsigned i = 0; i < 20; i++)
		for (unsigned a = 0; a < narms; a++) {
			r = sync_sample(log, slog, fd, pl, best, s->raw_line_len, &roff,
					&ev[i & (NVAR - 1)], a);
			if (r < 0) {
				error_msg("sync warm-up, %s: %s", arm_name[a], strerror(-r));
				goto out;
			}
		}
	struct auditlog_stats st0, st1, lst0, lst1;
	auditlog_get_stats(log, &lst0, sizeof(lst0));
	if (slog)
		auditlog_get_stats(slog, &st0, sizeof(st0));
	for (unsigned round = 0; round < SYNC_ROUNDS; round++) {
		progress("sync latency: round %u of %u", round + 1, SYNC_ROUNDS);
		for (unsigned k = 0; k < narms; k++) {
			/* rotate which goes first, so none always follows another */
			unsigned a = (k + round) % narms;
			for (unsigned i = 0; i < per; i++) {
				uint64_t t0 = now_ns();
				r = sync_sample(log, slog, fd, pl, best, s->raw_line_len, &roff,
						&ev[(cnt[a] + i) & (NVAR - 1)], a);
				uint64_t t1 = now_ns();
				if (r < 0) {
					error_msg("%s: %s", arm_name[a], strerror(-r));
					goto out;
				}
				lat[a][cnt[a] + i] = t1 - t0;
			}
			cnt[a] += per;
		}
	}
	for (unsigned a = 0; a < narms; a++)
		qsort(lat[a], cnt[a], sizeof(uint64_t), cmp_u64);
	s->n = cnt[0];
	s->rounds = SYNC_ROUNDS;
	s->p50_us = (double)pct(lat[0], cnt[0], 0.50) / 1e3;
	s->p99_us = (double)pct(lat[0], cnt[0], 0.99) / 1e3;
	s->raw_p50_us = (double)pct(lat[1], cnt[1], 0.50) / 1e3;
	s->raw_p99_us = (double)pct(lat[1], cnt[1], 0.99) / 1e3;
	s->ratio = s->p50_us / s->raw_p50_us;
	auditlog_get_stats(log, &lst1, sizeof(lst1));
	s->lead_share = (double)(lst1.caller_commits - lst0.caller_commits) / (double)cnt[0];
	if (slog) {
		auditlog_get_stats(slog, &st1, sizeof(st1));
		s->s_lead_share = (double)(st1.caller_commits - st0.caller_commits) / (double)cnt[2];
		s->s_p50_us = (double)pct(lat[2], cnt[2], 0.50) / 1e3;
		s->s_p99_us = (double)pct(lat[2], cnt[2], 0.99) / 1e3;
		s->s_ratio = s->s_p50_us / s->raw_p50_us;
		s->s_vs_inproc = s->s_p50_us / s->p50_us;
		uint64_t nreq = st1.sealer_requests - st0.sealer_requests;
		s->s_rtt_us = nreq ? (double)(st1.sealer_wait_ns - st0.sealer_wait_ns) / 1e3 /
					     (double)nreq
				   : NAN;
		s->s_requests_per_record = (double)nreq / (double)cnt[2];
	}
out:
	if (fd >= 0)
		close(fd);
	unlink(rpath);
	if (log)
		r = close_counted(log, "sync phase", r);
	if (slog)
		r = close_counted(slog, "sync phase, sealer", r);
	for (unsigned a = 0; a < 3; a++)
		free(lat[a]);
	return r;
}

/* ---- phase 4: enqueue latency ------------------------------------------------------- */

struct enqlat {
	uint64_t n, hn; /* samples of whole calls, of hand-offs */
	unsigned threads;
	double p50_ns, p99_ns, p999_ns, max_ns;        /* auditlog_record, the whole call */
	double h_p50_ns, h_p99_ns, h_p999_ns, h_max_ns; /* its hand-off (al_record_prepared) */
	size_t queue;
	uint64_t high_water;
	bool blocked; /* the queue filled: some samples include waiting */
	double cpu_ns_per_call; /* the producers' CPU per timed call, the timer included */
	double line_ns; /* a cache line from one CPU to another, one way (NAN: one CPU) */
	int line_cpu[2];
};

/* ---- a cache line between two CPUs ------------------------------------------ */

/*
 * The yardstick of the hand-off: when the other producer reserved last, the
 * queue's position line comes from its CPU, and no queue shared by two
 * producers does better than that. Two threads pinned to two CPUs pass a
 * counter back and forth; one way is half a round trip, timed over batches of
 * LINE_BATCH round trips (the timer's 20 ns once per batch), the median of
 * LINE_BATCHES. How far apart the two vCPUs are (one core's threads, one
 * CCD, two) is the host's choice, and it moves this figure 2-3x between
 * runs on the VM of docs/benchmarks.md.
 */
#define LINE_BATCH 64u
#define LINE_BATCHES 400u

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

struct line_pp {
	_Alignas(64) _Atomic uint64_t v;
	_Alignas(64) int cpu[2];
	pthread_barrier_t go;
	uint64_t ticks[LINE_BATCHES];
	bool pinned[2];
};

struct line_end {
	struct line_pp *pp;
	unsigned side; /* 0 starts each round trip and times them, 1 answers */
};

static bool pin_self(int cpu)
{
	cpu_set_t cs;

	CPU_ZERO(&cs);
	CPU_SET(cpu, &cs);
	return pthread_setaffinity_np(pthread_self(), sizeof(cs), &cs) == 0;
}

/* One end of the ping-pong: in round trip i, side s waits for the counter
 * to read 2i + s, then writes 2i + s + 1. */
static void *line_end_main(void *arg)
{
	const struct line_end *le = arg;
	struct line_pp *pp = le->pp;
	unsigned s = le->side;

	pp->pinned[s] = pin_self(pp->cpu[s]);
	pthread_barrier_wait(&pp->go);
	if (!pp->pinned[0] || !pp->pinned[1])
		return NULL;
	for (uint64_t b = 0, i = 0; b < LINE_BATCHES; b++) {
		uint64_t t0 = s == 0 ? tick_start() : 0;
		for (unsigned k = 0; k < LINE_BATCH; k++, i++) {
			while (atomic_load_explicit(&pp->v, memory_order_acquire) != 2 * i + s)
				cpu_relax();
			atomic_store_explicit(&pp->v, 2 * i + s + 1, memory_order_release);
		}
		if (s == 0)
			pp->ticks[b] = tick_end() - t0;
	}
	return NULL;
}

/* One way, in ns, between the first two CPUs this process may run on;
 * NAN when there is only one (or pinning fails). */
static double line_transfer_ns(const struct env *e, int ret_cpu[2])
{
	struct line_pp *pp = aligned_alloc(64, sizeof(*pp));
	cpu_set_t cs;
	pthread_t t[2];
	double r = NAN;
	int k = 0;

	ret_cpu[0] = ret_cpu[1] = -1;
	if (!pp)
		return NAN;
	memset(pp, 0, sizeof(*pp));
	if (sched_getaffinity(0, sizeof(cs), &cs) == 0)
		for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
			if (CPU_ISSET(c, &cs))
				pp->cpu[k++] = c;
	struct line_end ends[2] = {{pp, 0}, {pp, 1}};
	if (k == 2 && pthread_barrier_init(&pp->go, NULL, 2) == 0) {
		if (pthread_create(&t[0], NULL, line_end_main, &ends[0]) == 0) {
			if (pthread_create(&t[1], NULL, line_end_main, &ends[1]) != 0) {
				pp->pinned[1] = false; /* side 0 sees it after the barrier */
				pthread_barrier_wait(&pp->go);
			} else {
				pthread_join(t[1], NULL);
			}
			pthread_join(t[0], NULL);
			if (pp->pinned[0] && pp->pinned[1]) {
				qsort(pp->ticks, LINE_BATCHES, sizeof(pp->ticks[0]), cmp_u64);
				r = (double)pp->ticks[LINE_BATCHES / 2] * e->tick_ns / LINE_BATCH / 2;
				ret_cpu[0] = pp->cpu[0];
				ret_cpu[1] = pp->cpu[1];
			}
		}
		pthread_barrier_destroy(&pp->go);
	}
	free(pp);
	return r;
}

static int phase_enqueue(const struct opts *o, const char *dir, const struct env *e,
			 struct enqlat *q)
{
	char path[PATH_MAX];
	struct producer *p = calloc(ENQ_THREADS, sizeof(*p));
	uint64_t *ticks[ENQ_THREADS] = {0}, *hticks[ENQ_THREADS] = {0}, *all = NULL, t0, total, n = 0;
	struct auditlog *log;
	struct auditlog_stats st;
	size_t queue = 64;
	int r, rc;

	memset(q, 0, sizeof(*q));
	q->line_ns = line_transfer_ns(e, q->line_cpu);
	total = (uint64_t)o->enq_samples * ENQ_THREADS;
	while (queue < total + ENQ_WARMUP * ENQ_THREADS + 64)
		queue <<= 1; /* every event fits: no producer ever waits for the worker */
	if (queue > (1u << 24))
		queue = 1u << 24;
	if (!p) {
		r = -ENOMEM;
		goto out_free;
	}
	for (unsigned i = 0; i < ENQ_THREADS; i++) {
		size_t half = (o->enq_samples + 1) / 2 * sizeof(uint64_t);
		ticks[i] = malloc(half);
		hticks[i] = malloc(half);
		p[i].prep = malloc(sizeof(*p[i].prep));
		if (!ticks[i] || !hticks[i] || !p[i].prep) {
			r = -ENOMEM;
			goto out_free;
		}
		memset(ticks[i], 0, half); /* fault the pages in */
		memset(hticks[i], 0, half);
		memset(p[i].prep, 0, sizeof(*p[i].prep));
		p[i].hticks = hticks[i];
		p[i].version = o->version;
	}
	if (join_path(path, sizeof(path), dir, "enqueue.log") < 0) {
		r = -ENAMETOOLONG;
		goto out_free;
	}
	r = open_log(o, path, queue, 0, o->coalesce_us, &log);
	if (r < 0) {
		error_msg("cannot open %s: %s%s", path, strerror(-r), open_hint(r));
		goto out_free;
	}
	r = run_producers(p, ENQ_THREADS, log, total, ticks, ENQ_WARMUP, &t0);
	if (r < 0)
		error_msg("auditlog_record: %s", strerror(-r));
	rc = auditlog_flush(log);
	if (rc < 0 && !r)
		r = rc;
	auditlog_get_stats(log, &st, sizeof(st));
	rc = auditlog_close(log);
	if (rc < 0 && !r)
		r = rc;
	if (r < 0)
		goto out_free;
	if (st.events_written != total + (uint64_t)ENQ_WARMUP * ENQ_THREADS) {
		error_msg("enqueue phase: %" PRIu64 " events recorded but %" PRIu64 " written",
			  total + (uint64_t)ENQ_WARMUP * ENQ_THREADS, st.events_written);
		r = -EIO;
		goto out_free;
	}
	all = malloc(total * sizeof(uint64_t));
	if (!all) {
		r = -ENOMEM;
		goto out_free;
	}
	for (unsigned i = 0; i < ENQ_THREADS; i++) {
		memcpy(all + n, ticks[i], p[i].nw * sizeof(uint64_t));
		n += p[i].nw;
	}
	qsort(all, n, sizeof(uint64_t), cmp_u64);
	q->n = n;
	q->threads = ENQ_THREADS;
	q->p50_ns = (double)pct(all, n, 0.50) * e->tick_ns;
	q->p99_ns = (double)pct(all, n, 0.99) * e->tick_ns;
	q->p999_ns = (double)pct(all, n, 0.999) * e->tick_ns;
	q->max_ns = (double)all[n - 1] * e->tick_ns;
	n = 0;
	for (unsigned i = 0; i < ENQ_THREADS; i++) {
		memcpy(all + n, hticks[i], p[i].nh * sizeof(uint64_t));
		n += p[i].nh;
	}
	qsort(all, n, sizeof(uint64_t), cmp_u64);
	q->hn = n;
	q->h_p50_ns = (double)pct(all, n, 0.50) * e->tick_ns;
	q->h_p99_ns = (double)pct(all, n, 0.99) * e->tick_ns;
	q->h_p999_ns = (double)pct(all, n, 0.999) * e->tick_ns;
	q->h_max_ns = (double)all[n - 1] * e->tick_ns;
	uint64_t cpu = 0;
	for (unsigned i = 0; i < ENQ_THREADS; i++)
		cpu += p[i].cpu_ns;
	q->cpu_ns_per_call = (double)cpu / (double)(q->n + q->hn);
	q->queue = queue;
	q->high_water = st.queue_high_water;
	q->blocked = st.queue_high_water >= queue;
out_free:
	for (unsigned i = 0; i < ENQ_THREADS; i++) {
		free(ticks[i]);
		free(hticks[i]);
		if (p)
			free(p[i].prep);
	}
	free(all);
	free(p);
	return r;
}

/* ---- phase 5: token-shaped logs ---------------------------------------------------------- */

/* The token audits one operation at a time, so each record tends to be its
 * own batch: what does a record cost on disk then? One producer on a fresh
 * log: `sync` calls auditlog_record_sync (one batch per record by contract);
 * the async arms call auditlog_record every gap_us (the producer spins in
 * between, as a token's caller computing its next operation would), with the
 * library's coalescing window off and at the token's default. */
struct token_arm {
	const char *name;
	bool sync;
	bool sealer; /* through --sealer-socket */
	uint64_t gap_us, coalesce_us;
	uint64_t records;  /* operations audited in the arm: events recorded */
	double seconds;
	struct auditlog_stats d; /* the arm's deltas (counters only) */
	double bytes_per_record, fsyncs_per_record, batches_per_record, records_per_batch;
	double worker_ns_per_record;
	double caller_ns_per_record; /* sync arm: the caller's CPU in record_sync (NAN: async,
				      * whose caller spins through its gaps) */
	double others_ns_per_record; /* process CPU but the caller's: worker, io-wq */
	bool exact; /* the log grew by exactly one event record per operation */
	struct rectypes types; /* the records the arm added, by type (v2: seals, trees) */
	double seals_per_record, trees_per_record, checkpoints_per_record;
};
#define NTOKEN 3u
#define NTOKEN_MAX 5u /* --sealer-socket: sync and async again, through the sealer */
#define TOKEN_WARMUP 10u

static int token_arm_run(const struct opts *o, const char *dir, struct token_arm *a)
{
	char path[PATH_MAX], name[64];
	struct auditlog_event ev[NVAR];
	struct auditlog *log;
	struct auditlog_stats s0, s1;
	uint64_t w0 = 0, w1 = 0, t0, next, c0, c1, p0, p1;
	const char *src = "none";
	int r = 0, rc;

	snprintf(name, sizeof(name), "token-%s.log", a->name);
	if (join_path(path, sizeof(path), dir, name) < 0)
		return -ENAMETOOLONG;
	for (unsigned v = 0; v < NVAR; v++)
		make_event(&ev[v], 0, v);
	struct opts so = *o;
	if (a->sealer)
		so.seal_state = so.signing_key = NULL; /* the socket instead */
	r = open_log(&so, path, 16384, 0, a->coalesce_us, &log);
	if (r < 0) {
		error_msg("cannot open %s: %s%s", path, strerror(-r), open_hint(r));
		return r;
	}
	for (unsigned i = 0; i < TOKEN_WARMUP && r == 0; i++)
		r = auditlog_record_sync(log, &ev[i]);
	pid_t wtid = find_worker();
	bool wf = wtid > 0 && thread_cpu_ns(wtid, &w0, &src) == 0;
	auditlog_get_stats(log, &s0, sizeof(s0));
	off_t off0 = file_size(path), off1 = -1;
	c0 = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	p0 = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	t0 = next = now_ns();
	for (uint64_t i = 0; i < a->records && r == 0; i++) {
		const struct auditlog_event *e = &ev[i & (NVAR - 1)];
		if (a->sync) {
			r = auditlog_record_sync(log, e);
			continue;
		}
		r = auditlog_record(log, e);
		next += a->gap_us * 1000u;
		while (now_ns() < next)
			; /* the caller's next operation */
	}
	if (r == 0)
		r = auditlog_flush(log);
	a->seconds = (double)(now_ns() - t0) / 1e9;
	c1 = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	p1 = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	if (wf && thread_cpu_ns(wtid, &w1, &src) < 0)
		wf = false;
	auditlog_get_stats(log, &s1, sizeof(s1));
	off1 = file_size(path); /* before close: its close seal is not the arm's */
	rc = auditlog_close(log);
	if (r < 0)
		error_msg("token-shaped arm %s: %s", a->name, strerror(-r));
	else if (rc < 0)
		error_msg("auditlog_close (token-shaped arm %s): %s", a->name, strerror(-(r = rc)));
	if (r < 0)
		return r;
	a->d.events_written = s1.events_written - s0.events_written;
	a->d.records_written = s1.records_written - s0.records_written;
	a->d.batches = s1.batches - s0.batches;
	a->d.bytes_written = s1.bytes_written - s0.bytes_written;
	a->d.fsyncs = s1.fsyncs - s0.fsyncs;
	a->d.largest_batch = s1.largest_batch;
	a->d.coalesced_batches = s1.coalesced_batches - s0.coalesced_batches;
	a->d.inline_batches = s1.inline_batches - s0.inline_batches;
	if (off0 < 0 || off1 < off0)
		r = -EIO;
	else
		r = count_types(path, off0, off1, &a->types);
	if (r < 0) {
		error_msg("token-shaped arm %s: cannot read %s back: %s", a->name, path,
			  strerror(-r));
		return r;
	}
	/* v0/v1: one record per operation; v2: one event record per operation and
	 * the seal and tree records the writer adds, nothing else */
	a->exact = a->d.events_written == a->records && a->types.event == a->records &&
		   a->types.header == 0 && a->types.other == 0 &&
		   a->d.records_written == a->records + a->types.seal + a->types.tree +
						   a->types.checkpoint &&
		   (o->version == 2 || a->d.records_written == a->records);
	double n = (double)a->records;
	a->seals_per_record = (double)a->types.seal / n;
	a->trees_per_record = (double)a->types.tree / n;
	a->checkpoints_per_record = (double)a->types.checkpoint / n;
	a->bytes_per_record = (double)a->d.bytes_written / n;
	a->fsyncs_per_record = (double)a->d.fsyncs / n;
	a->batches_per_record = (double)a->d.batches / n;
	a->records_per_batch = a->d.batches ? (double)a->d.records_written / (double)a->d.batches : 0;
	a->worker_ns_per_record = wf ? (double)(w1 - w0) / n : NAN;
	a->caller_ns_per_record = a->sync ? (double)(c1 - c0) / n : NAN;
	a->others_ns_per_record = ((double)(p1 - p0) - (double)(c1 - c0)) / n;
	if (!a->exact) {
		error_msg("token-shaped arm %s: %" PRIu64 " operations but %" PRIu64
			  " events and %" PRIu64 " records written (in the file: %" PRIu64
			  " events, %" PRIu64 " seals, %" PRIu64 " trees, %" PRIu64 " checkpoints, %" PRIu64
			  " others)",
			  a->name, a->records, a->d.events_written, a->d.records_written, a->types.event,
			  a->types.seal, a->types.tree, a->types.checkpoint,
			  a->types.other + a->types.header);
		return -EIO;
	}
	return 0;
}

static int phase_token(const struct opts *o, const char *dir, struct token_arm *arms,
		       unsigned *ret_n)
{
	unsigned n = o->sealer_socket ? NTOKEN_MAX : NTOKEN;

	arms[0] = (struct token_arm){.name = "sync", .sync = true, .coalesce_us = o->coalesce_us};
	arms[1] = (struct token_arm){.name = "async", .gap_us = o->token_gap_us,
				     .coalesce_us = o->coalesce_us};
	arms[2] = (struct token_arm){.name = "async-coalesce", .gap_us = o->token_gap_us,
				     .coalesce_us = TOKEN_COALESCE_US};
	arms[3] = (struct token_arm){.name = "sync-sealer", .sync = true, .sealer = true,
				     .coalesce_us = o->coalesce_us};
	arms[4] = (struct token_arm){.name = "async-sealer", .gap_us = o->token_gap_us,
				     .sealer = true, .coalesce_us = o->coalesce_us};
	*ret_n = n;
	for (unsigned i = 0; i < n; i++) {
		arms[i].records = o->token_records;
		progress("token-shaped: %s, %u records", arms[i].name, o->token_records);
		int r = token_arm_run(o, dir, &arms[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- v2's producer step, by the format layer alone ---------------------------------------- */

/* DESIGN.md "Chain step (v2)" moves the body digest D_n into the producers
 * (al_v2_record_digest after decoding the event). Timed here on this run's
 * events, one thread, CPU time: what v2 adds to a producer's auditlog_record
 * whatever the writer's hand-off costs. decode_ns is the decode alone,
 * digest_ns what al_v2_record_digest adds to it. */
struct v2step {
	int err; /* 0, or al_v2_record_digest's error for these events */
	double decode_ns, digest_ns;
};

static void measure_v2_step(struct v2step *v)
{
	struct fmtbuf b;
	struct auditlog_event ev[NVAR];
	uint8_t *body = malloc(AL_BODY_MAX), dig[AL_HASH_LEN];
	uint64_t ts = realtime_ns(), c0, c1, c2;
	struct al_record d;

	memset(v, 0, sizeof(*v));
	v->decode_ns = v->digest_ns = NAN;
	if (fmtbuf_init(&b) < 0 || !body) {
		v->err = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < NVAR; i++)
		make_event(&ev[i], 0, i);
	c0 = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	for (unsigned i = 0; i < V2_STEP_EVENTS && !v->err; i++)
		v->err = decode_event(&b, &ev[i & (NVAR - 1)], 2, i, ts + i, &d);
	c1 = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	for (unsigned i = 0; i < V2_STEP_EVENTS && !v->err; i++) {
		v->err = decode_event(&b, &ev[i & (NVAR - 1)], 2, i, ts + i, &d);
		if (!v->err) {
			long n = al_v2_record_digest(&d, body, dig);
			if (n < 0)
				v->err = (int)n;
		}
	}
	c2 = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	if (!v->err) {
		v->decode_ns = (double)(c1 - c0) / V2_STEP_EVENTS;
		v->digest_ns = (double)(c2 - c1) / V2_STEP_EVENTS - v->decode_ns;
	}
out:
	fmtbuf_free(&b);
	free(body);
}

/* ---- --phases parts: each v2 format function alone ------------------------------------ */

/* Issue 12 asks for the cost of each part of v2: CPU time per call of the
 * format-layer function that does it, one thread, on this run's events,
 * with fixed test keys (the writer calls the same functions):
 *   digest      al_v2_record_digest  producer, per event (decode excluded)
 *   members     al_emit_members      producer, per event: the line's members
 *   emit        al_emit_framed       worker, per event: the line + chain step
 *   emit_node   al_emit_framed_node  the same with a Merkle node hashed beside
 *                                    (the writer's way with SHA-NI: against
 *                                    emit + tree_append)
 *   chain step  al_v2_chain_step     worker, per event (inside emit)
 *   tree        al_merkle_range_append_n  worker, per event (64 at a time)
 *   tree, one   al_merkle_range_append  the same one leaf at a time
 *   tree root   al_merkle_range_root    per tree or checkpoint record
 *   seal        al_v2_seal_sign      per batch (members, body, HMAC)
 *   seal key    al_seal_mac_key      per epoch (Kmac of a new epoch key)
 *   signature   al_note_sign         per checkpoint (Ed25519 over the note)
 * The sustained phase's worker and producer CPU are the figures that count;
 * these say where inside them the time goes. */
#define PARTS_N 200000u
#define PARTS_SIGN_N 2000u
enum { P_DIGEST, P_MEMBERS, P_EMIT, P_CHAIN, P_TREE, P_TREE1, P_ROOT, P_SEAL, P_SEALKEY, P_SIGN,
       P_EMIT_NODE, NPARTS };
static const char *const part_name[NPARTS] = {"digest",    "members",     "emit",
					      "chain_step", "tree_append", "tree_append_one", "tree_root",
					      "seal",      "seal_key",    "signature", "emit_node"};
static const char *const part_fn[NPARTS] = {
	"al_v2_record_digest",    "al_emit_members",      "al_emit_framed",
	"al_v2_chain_step",       "al_merkle_range_append_n", "al_merkle_range_append",
	"al_merkle_range_root",
	"al_v2_seal_sign",        "al_seal_mac_key",      "al_note_sign", "al_emit_framed_node"};
static const char *const part_per[NPARTS] = {"event", "event",  "event", "event",     "event",
					     "event", "record", "batch", "epoch", "checkpoint", "event"};
struct parts {
	int err;
	double ns[NPARTS];
	unsigned n[NPARTS];
};

static int measure_parts(struct parts *P)
{
	struct fmtbuf b;
	struct auditlog_event ev[NVAR];
	struct al_record d[1];
	uint8_t *body = malloc(AL_BODY_MAX), *line = malloc(AL_LINE_MAX + 1);
	uint8_t *members = malloc(AL_LINE_MAX);
	uint8_t (*dig)[AL_HASH_LEN] = malloc(NVAR * AL_HASH_LEN);
	uint8_t prev[AL_HASH_LEN] = {0}, root[AL_HASH_LEN], seed[32];
	uint8_t origin[AL_ORIGIN_MAX], text[AL_NOTE_MAX], note[AL_NOTE_MAX], kmac[AL_HASH_LEN];
	struct al_merkle_range *tree = malloc(sizeof(*tree));
	struct al_emit_out eo;
	char ts[AL_TS_LEN];
	uint64_t t0, base = realtime_ns();
	volatile uint8_t sink = 0;
	long n;
	int r = 0;

	memset(P, 0, sizeof(*P));
	for (unsigned k = 0; k < NPARTS; k++)
		P->ns[k] = NAN;
	if (fmtbuf_init(&b) < 0 || !body || !line || !members || !dig || !tree) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < 32; i++)
		seed[i] = (uint8_t)(0x40 + i); /* a fixed test key: the cost does not depend on it */
	al_format_ts(base, ts);
	/* decoded records (fmtbuf holds one at a time: keep the digests, emit each
	 * from a fresh decode below) */
	for (unsigned i = 0; i < NVAR && !r; i++) {
		make_event(&ev[i], 0, i);
		r = decode_event(&b, &ev[i], 2, i, base + i, &d[0]);
		if (!r && (n = al_v2_record_digest(&d[0], body, dig[i])) < 0)
			r = (int)n;
	}
	if (r)
		goto out;

#define TIMED(k, iters, stmt)                                                 \
	do {                                                                  \
		t0 = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);                   \
		for (unsigned i_ = 0; i_ < (iters) && !r; i_++) {             \
			unsigned i = i_;                                      \
			(void)i;                                              \
			stmt;                                                 \
		}                                                             \
		P->ns[k] = (double)(cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / (iters); \
		P->n[k] = (iters);                                            \
	} while (0)

	/* digest and emit work on one decoded record per variant, decoded once
	 * (the decode is the producer's encoding, reported by the enqueue phase) */
	r = decode_event(&b, &ev[0], 2, 0, base, &d[0]);
	if (r)
		goto out;
	TIMED(P_DIGEST, PARTS_N, if ((n = al_v2_record_digest(&d[0], body, dig[0])) < 0) r = (int)n);
	long mn = 0;
	TIMED(P_MEMBERS, PARTS_N, if ((mn = al_emit_members(&d[0], members, NULL, NULL)) < 0) r = (int)mn);
	TIMED(P_EMIT, PARTS_N, {
		if ((n = al_emit_framed(AL_T_EVENT, i, ts, members, (size_t)mn, dig[0], prev, line,
					&eo)) < 0)
			r = (int)n;
		memcpy(prev, eo.hash, AL_HASH_LEN);
	});
	TIMED(P_CHAIN, PARTS_N, {
		al_v2_chain_step(prev, i, ts, dig[i & (NVAR - 1)], root);
		memcpy(prev, root, AL_HASH_LEN);
	});
	/* the writer's way: the leaves held back, 64 at a time (writer/log.h
	 * V2_PEND), their nodes hashed two by two; and one at a time beside it */
	static uint8_t held[64][AL_HASH_LEN];
	bool sha_ni = al_sha256_ni_ok();
	al_merkle_range_init(tree);
	TIMED(P_TREE, PARTS_N, {
		memcpy(held[i & 63], prev, AL_HASH_LEN);
		prev[i & 31] ^= (uint8_t)i;
		if ((i & 63) == 63)
			r = al_merkle_range_append_n(tree, (const uint8_t (*)[AL_HASH_LEN])held, 64, sha_ni);
	});
	struct al_node_job job = {.l = held[0], .r = held[1]};
	TIMED(P_EMIT_NODE, PARTS_N, {
		if ((n = al_emit_framed_node(AL_T_EVENT, i, ts, members, (size_t)mn, dig[0], prev, line,
					     &eo, &job, sha_ni)) < 0)
			r = (int)n;
		memcpy(prev, eo.hash, AL_HASH_LEN);
		memcpy(held[i & 63], job.out, AL_HASH_LEN); /* the next node takes it */
		job.l = held[i & 63];
	});
	al_merkle_range_init(tree);
	TIMED(P_TREE1, PARTS_N, r = al_merkle_range_append(tree, prev); prev[i & 31] ^= (uint8_t)i);
	TIMED(P_ROOT, PARTS_N / 10, r = al_merkle_range_root(tree, root); sink ^= root[0]);
	if (r)
		goto out;
	struct al_v2_seal seal = {.kind = "batch", .epoch = 12345};
	memcpy(seal.key_id, seed, sizeof(seal.key_id));
	memset(seal.chain_id, 'a', sizeof(seal.chain_id));
	TIMED(P_SEAL, PARTS_N / 10, r = al_v2_seal_sign(&seal, kmac, prev, i, ts); prev[0] ^= seal.mac[0]);
	TIMED(P_SEALKEY, PARTS_N / 10, r = al_seal_mac_key(seed, kmac); seed[0] ^= kmac[0]);
	uint8_t cid[32];
	memset(cid, 'b', sizeof(cid));
	long on = al_checkpoint_origin((const uint8_t *)"bench", 5, cid, origin);
	long tn = on < 0 ? on :
		al_checkpoint_text(origin, (size_t)on, tree->size, root, tree->size,
				   prev, 0, text, sizeof(text));
	if (tn < 0) {
		r = (int)tn;
		goto out;
	}
	uint8_t pub[AL_ED25519_PUB_LEN]; /* held, as the writer's sealer holds it */
	if ((r = al_ed25519_public(seed, pub)) < 0)
		goto out;
	TIMED(P_SIGN, PARTS_SIGN_N, {
		n = al_note_sign(seed, pub, origin, (size_t)on, text, (size_t)tn, note, sizeof(note));
		if (n < 0)
			r = (int)n;
		sink ^= note[0];
	});
#undef TIMED
out:
	(void)sink;
	P->err = r;
	fmtbuf_free(&b);
	free(body);
	free(line);
	free(members);
	free(dig);
	free(tree);
	return r;
}

/* ---- reporting ------------------------------------------------------------------------ */

struct target {
	const char *name;
	double value;
	double limit;
	bool ge; /* value >= limit passes; else value <= limit */
	const char *unit;
};

static bool target_pass(const struct target *t)
{
	if (!isfinite(t->value))
		return false;
	return t->ge ? t->value >= t->limit : t->value <= t->limit;
}

static void jnum(struct jw *j, const char *k, double v)
{
	jkey(j, k);
	if (isfinite(v))
		fprintf(j->f, "%.6g", v);
	else
		fputs("null", j->f);
}

static void json_env(struct jw *j, const struct env *e)
{
	jopen(j, "environment", '{');
	jstr(j, "date", e->date);
	jstr(j, "kernel", e->kernel);
	jstr(j, "cpu_model", e->cpu);
	jnum(j, "nproc", (double)e->nproc);
	jnum(j, "ncpu_configured", (double)e->nconf);
	jstr(j, "loadavg_start", e->load_start);
	if (e->load_end[0])
		jstr(j, "loadavg_end", e->load_end);
	jstr(j, "target", e->target);
	jstr(j, "fs_type", e->fs_type);
	char m[32];
	snprintf(m, sizeof(m), "0x%lx", e->fs_magic);
	jstr(j, "fs_magic", m);
	jstr(j, "device", e->device);
	jstr(j, "device_id", e->dev_id);
	jstr(j, "mount_point", e->mount_point);
	jstr(j, "mount_options", e->mount_opts);
	jstr(j, "write_cache", e->write_cache);
	jstr(j, "build_type", e->build_type);
	jstr(j, "c_flags", e->cflags);
	jstr(j, "compiler", e->compiler);
	if (e->tick_ns > 0) {
		jstr(j, "timer", e->timer);
		jfix(j, "timer_overhead_ns", e->timer_overhead_ns, 1);
		jfix(j, "timer_resolution_ns", e->timer_resolution_ns, 1);
	}
	jclose(j, '}');
}

static void print_env(const struct env *e)
{
	printf("environment\n");
	printf("  date          %s\n", e->date);
	printf("  kernel        %s\n", e->kernel);
	printf("  cpu           %s, %ld online (%ld configured)\n", e->cpu, e->nproc, e->nconf);
	printf("  load average  %s at the start", e->load_start[0] ? e->load_start : "?");
	if (e->load_end[0])
		printf(", %s at the end", e->load_end);
	printf(" (1, 5, 15 min; runnable/total)\n");
	printf("  target        %s\n", e->target);
	printf("  file system   %s (magic 0x%lx) on %s (dev %s, mounted at %s)\n", e->fs_type,
	       e->fs_magic, e->device, e->dev_id, e->mount_point[0] ? e->mount_point : "?");
	printf("  mount opts    %s\n", e->mount_opts[0] ? e->mount_opts : "?");
	printf("  write cache   %s%s\n", e->write_cache[0] ? e->write_cache : "unknown",
	       e->rotational[0] ? (strcmp(e->rotational, "0") == 0 ? ", non-rotational" :
									 ", rotational") :
				  "");
	printf("  build         %s (%s), %s\n", e->build_type, e->cflags,
	       e->compiler[0] ? e->compiler : "unknown compiler");
	printf("  library       auditlog %d.%d\n", AUDITLOG_VERSION_MAJOR, AUDITLOG_VERSION_MINOR);
	if (e->tick_ns > 0)
		printf("  timer         %s, overhead %.1f ns per reading pair, "
		       "resolution %.1f ns\n",
		       e->timer, e->timer_overhead_ns, e->timer_resolution_ns);
}

struct report {
	const struct opts *o;
	const struct env *e;
	const struct sustained *su;
	const struct ceiling *c;
	const struct synclat *sy;
	const struct enqlat *q;
	const struct token_arm *tok; /* ntok */
	unsigned ntok;
	const struct v2step *v2;
	const struct parts *parts;
	double raw_line_avg;
	double ratio;       /* the rounds' median against the best size's median */
	double ratio_first; /* the first round alone: its phase against its sweep's best point */
	uint64_t prime_bytes;
	double prime_s[2]; /* before the sustained phase, before the ceiling; < 0: -errno */
	struct target t[NTARGETS];
	bool t_run[NTARGETS]; /* its phase ran */
};

static void print_table(const struct report *R)
{
	const struct opts *o = R->o;
	const struct sustained *su = R->su;
	const struct ceiling *c = R->c;
	const struct synclat *sy = R->sy;
	const struct enqlat *q = R->q;
	unsigned ph = o->phases;
	char a[32], b[32];

	printf(PROG ": auditlog %d.%d, %s\n\n", AUDITLOG_VERSION_MAJOR, AUDITLOG_VERSION_MINOR,
	       R->e->date);
	print_env(R->e);
	printf("  backend       %s, format v%u, rotate %s, coalescing window %" PRIu64 " us\n",
	       (ph & PH_SUSTAINED) ? auditlog_backend_name((enum auditlog_backend)su->st.backend) :
				     "-",
	       o->version, o->rotate_bytes ? "by size" : "never", o->coalesce_us);

	printf("\nworkload\n");
	fmt_count((double)o->events, a, sizeof(a));
	printf("  events        %s by %u producer threads (auditlog_record, queue %zu slots)\n", a,
	       o->threads, o->queue);
	if (o->has_worker_nice)
		printf("  worker nice   %d (auditlog_config_set_worker_nice; the producers keep the bench's)\n",
		       o->worker_nice);
	if (o->worker_cpus)
		printf("  worker CPUs   %s (auditlog_config_set_worker_cpus: the worker and its io_uring\n"
		       "                threads; the producers keep the bench's)\n", o->worker_cpus);
	if (o->has_drop_behind)
		printf("  drop behind   %" PRIu64 " bytes (auditlog_config_set_drop_behind_bytes)\n",
		       o->drop_behind);
	printf("  shape         C_Sign/C_Encrypt/C_Decrypt/C_Verify with mechanism, key label\n"
	       "                (20-28 chars), 8-byte key id, slot, session, outcome, rv, actor\n");
	if (o->line_size)
		printf("  --line-size   %u: members dropped, then a detail pads each line to it\n",
		       o->line_size);
	if (ph & PH_SUSTAINED)
		printf("  line size     %.1f bytes on average (library, headers included); raw "
		       "baseline lines %.1f\n",
		       su->line_avg, R->raw_line_avg);

	if (ph & PH_SUSTAINED) {
		printf("\nsustained (durable: from the producers' start to auditlog_close() "
		       "returning)\n");
		fmt_count(su->events_per_s, a, sizeof(a));
		printf("  throughput    %s events/s (%.3f s, %.1f MB/s)%s\n", a, su->seconds,
		       (double)su->st.bytes_written / 1e6 / su->seconds,
		       su->nrounds > 1 ? "; round 1, whose figures these are" : "");
		if (su->nrounds > 1) {
			printf("  rounds        ");
			for (unsigned i = 0; i < su->nrounds; i++) {
				fmt_count(su->round_eps[i], a, sizeof(a));
				printf("%s%s", i ? ", " : "", a);
			}
			fmt_count(su->median_eps, a, sizeof(a));
			printf(" events/s: median %s\n", a);
			printf("  rounds' CPU   ns/event, worker / producers / rest of the process:");
			for (unsigned i = 0; i < su->nrounds; i++)
				printf("%s %.0f / %.0f / %.0f", i ? "," : "", su->round_worker_ns[i],
				       su->round_producers_ns[i], su->round_other_ns[i]);
			printf("\n");
		}
		printf("  batches       %" PRIu64 " (%.0f records on average, largest %" PRIu64
		       "; %" PRIu64 " formed ahead), %" PRIu64 " fdatasyncs, queue high water %" PRIu64
		       "\n",
		       su->st.batches,
		       su->st.batches ? (double)su->st.records_written / (double)su->st.batches : 0,
		       su->st.largest_batch, su->st.batches_ahead, su->st.fsyncs,
		       su->st.queue_high_water);
		if (su->st.rotations)
			printf("  rotations     %" PRIu64 "\n", su->st.rotations);
		printf("  reopened      p50 %.2f ms (%.2f-%.2f) to open the %.1f MB file again, %u times "
		       "(the library's queue size; open reads back 2 x max_batch_bytes + 8 KiB)\n",
		       su->reopen_p50_ms, su->reopen_min_ms, su->reopen_max_ms, (double)su->reopen_bytes / 1e6,
		       su->reopens);
		if (su->types.counted && o->version == 2)
			printf("  v2 records    %" PRIu64 " seals, %" PRIu64 " trees, %" PRIu64
			       " checkpoints in the log (%.2f seals/s)\n",
			       su->types.seal, su->types.tree, su->types.checkpoint,
			       (double)su->types.seal / su->seconds);
		printf("\nCPU per event (sustained phase)\n");
		if (su->worker_found)
			printf("  worker        %7.1f ns  (%.3f s on CPU; thread auditlog-worker, %s, "
			       "resolution %.0f ns)\n",
			       su->worker_ns_per_event, (double)su->worker_ns / 1e9, su->worker_src,
			       su->worker_res_ns);
		else
			printf("  worker        not found (no thread named auditlog-worker)\n");
		if (su->sched_found) {
			printf("                %llu sleeps, %llu preemptions", su->sched.voluntary,
			       su->sched.involuntary);
			if (su->sched.have_migrations)
				printf(", %llu moves between CPUs", su->sched.migrations);
			printf(" (its context switches)\n");
		}
		printf("  producers     %7.1f ns  (CLOCK_THREAD_CPUTIME_ID of each, summed)\n",
		       su->producers_ns_per_event);
		printf("  sum of both   %7.1f ns  (DESIGN.md's total)\n", su->parts_ns_per_event);
		printf("  process       %7.1f ns  (CLOCK_PROCESS_CPUTIME_ID; other threads %.1f: "
		       "io_uring io-wq, main)\n",
		       su->process_ns_per_event, su->other_ns_per_event);
		fmt_count(su->cpu_bound_events_per_s, a, sizeof(a));
		printf("  the CPUs' bound %s events/s (online CPUs / process CPU per event); "
		       "busy %.0f %% of the phase\n",
		       a, 100 * su->cpu_busy);

		if (R->prime_bytes)
			printf("\nprimed         %" PRIu64 " MiB written and unlinked before each side "
			       "(%.2f s, %.2f s; a negative figure is an error)\n",
			       R->prime_bytes >> 20, R->prime_s[0], R->prime_s[1]);
		else
			printf("\nprimed         no (--prime-bytes 0, or no free memory or disk for it)\n");
		printf("\nraw ceiling (pwrite at a growing offset + fdatasync, same directory, real "
		       "lines; each size >= %g s)\n", o->sweep_ms / 1e3);
		printf("  %12s %14s %10s %12s %10s %10s %10s %10s %14s\n", "batch lines", "events/s",
		       "MB/s", "ms/batch", "pwrite", "fdatasync", "slowest", "seconds", "rounds' median");
		for (unsigned k = 0; k < NSWEEP; k++) {
			const struct sweep_pt *pt = &c->pt[k];
			char m[32];
			fmt_count(pt->events_per_s, a, sizeof(a));
			fmt_count(pt->median_eps, m, sizeof(m));
			printf("  %12u %14s %10.1f %12.3f %10.3f %10.3f %10.3f %10.2f %9s of %u%s\n",
			       pt->batch, a, pt->mb_per_s, pt->batch_ms, pt->write_ms, pt->fsync_ms,
			       pt->max_batch_ms, pt->seconds, m, pt->nrounds,
			       k == c->best ? "  <- ceiling" : "");
		}
		fmt_count(c->events_per_s, a, sizeof(a));
		printf("  ceiling       %s events/s (the median of the first sweep's best size); "
		       "sustained / ceiling = %.3f (medians of %u rounds)\n", a, R->ratio, su->nrounds);
		if (su->nrounds > 1)
			printf("  round 1 alone %.3f (its phase against its sweep's best point)\n",
			       R->ratio_first);
	}

	if (ph & PH_SYNC) {
		printf("\nrecord_sync latency (%u rounds of %u, interleaved with the raw baseline)\n",
		       sy->rounds, sy->n / (sy->rounds ? sy->rounds : 1));
		printf("  record_sync        p50 %8.1f us   p99 %8.1f us\n", sy->p50_us, sy->p99_us);
		printf("  pwrite+fdatasync   p50 %8.1f us   p99 %8.1f us   (one %zu-byte line)\n",
		       sy->raw_p50_us, sy->raw_p99_us, sy->raw_line_len);
		printf("  ratio              %.3f (record_sync p50 / raw p50)\n", sy->ratio);
		printf("  caller's commits   %.3f of the samples\n", sy->lead_share);
		if (sy->sealer) {
			printf("  record_sync sealer p50 %8.1f us   p99 %8.1f us   (%s)\n", sy->s_p50_us,
			       sy->s_p99_us, o->sealer_socket);
			printf("  sealer ratio       %.3f (sealer p50 / raw p50), %.3f (sealer p50 / "
			       "in-process p50)\n",
			       sy->s_ratio, sy->s_vs_inproc);
			printf("  seal round trip    %.1f us mean, %.2f requests per record\n",
			       sy->s_rtt_us, sy->s_requests_per_record);
			printf("  caller's commits   %.3f of the samples through the sealer\n",
			       sy->s_lead_share);
		}
	}

	if (ph & PH_ENQUEUE) {
		fmt_count((double)q->n, a, sizeof(a));
		fmt_count((double)q->queue, b, sizeof(b));
		printf("\nenqueue (%u producers, queue %s slots; every other call timed whole, the "
		       "others' hand-off alone)\n",
		       q->threads, b);
		printf("  auditlog_record  p50 %.0f ns   p99 %.0f ns   p99.9 %.0f ns   max %.0f ns  "
		       "(%s samples: decode, render, hand-off)\n",
		       q->p50_ns, q->p99_ns, q->p999_ns, q->max_ns, a);
		fmt_count((double)q->hn, a, sizeof(a));
		printf("  hand-off         p50 %.0f ns   p99 %.0f ns   p99.9 %.0f ns   max %.0f ns  "
		       "(%s samples: reserve, copy, publish)\n",
		       q->h_p50_ns, q->h_p99_ns, q->h_p999_ns, q->h_max_ns, a);
		printf("  timer overhead %.1f ns per sample (resolution %.1f ns), not subtracted%s\n",
		       R->e->timer_overhead_ns, R->e->timer_resolution_ns,
		       q->blocked ? "; THE QUEUE FILLED: samples include waiting" : "");
		printf("  producer CPU   %.1f ns per call (timer included)\n", q->cpu_ns_per_call);
		if (isfinite(q->line_ns))
			printf("  a cache line   %.1f ns one way from CPU %d to CPU %d (ping-pong, this "
			       "run): what a hand-off pays when the other producer reserved last\n",
			       q->line_ns, q->line_cpu[0], q->line_cpu[1]);
		if (R->v2->err)
			printf("  v2 producer step (format layer alone): not measured, "
			       "al_v2_record_digest: %s\n",
			       strerror(-R->v2->err));
		else
			printf("  v2 producer step (format layer alone, one thread): decode %.1f ns + "
			       "body digest %.1f ns per event\n",
			       R->v2->decode_ns, R->v2->digest_ns);
	}

	if (ph & PH_TOKEN) {
		printf("\ntoken-shaped logs (one producer, %u records an arm, fresh log each)\n",
		       o->token_records);
		printf("  %-15s %6s %9s %10s %10s %11s %9s %14s %14s %14s\n", "arm", "gap us",
		       "window us", "bytes/rec", "fsyncs/rec", "batches/rec", "rec/batch",
		       "worker ns/rec", "caller ns/rec", "others ns/rec");
		for (unsigned i = 0; i < R->ntok; i++) {
			const struct token_arm *t = &R->tok[i];
			char gap[16];
			snprintf(gap, sizeof(gap), t->sync ? "sync" : "%" PRIu64, t->gap_us);
			char caller[24];
			snprintf(caller, sizeof(caller), isfinite(t->caller_ns_per_record) ? "%.0f" : "-",
				 t->caller_ns_per_record);
			printf("  %-15s %6s %9" PRIu64 " %10.1f %10.3f %11.3f %9.2f %14.0f %14s "
			       "%14.0f\n",
			       t->name, gap, t->coalesce_us, t->bytes_per_record, t->fsyncs_per_record,
			       t->batches_per_record, t->records_per_batch, t->worker_ns_per_record,
			       caller, t->others_ns_per_record);
		}
		if (o->version == 2) {
			printf("  v2 records an arm added, per operation:\n");
			for (unsigned i = 0; i < R->ntok; i++) {
				const struct token_arm *t = &R->tok[i];
				printf("  %-15s seals %.3f, trees %.3f, checkpoints %.4f "
				       "(%" PRIu64 ", %" PRIu64 ", %" PRIu64 ")\n",
				       t->name, t->seals_per_record, t->trees_per_record,
				       t->checkpoints_per_record, t->types.seal, t->types.tree,
				       t->types.checkpoint);
			}
		}
		printf("  every arm's log holds exactly one event record per operation (v2: and\n"
		       "  the seals and trees above); CPU: the worker's, the caller's in\n"
		       "  record_sync (async callers spin through their gaps: not shown), and the\n"
		       "  process's but the caller's (worker, io-wq)\n");
	}

	if (ph & PH_PARTS) {
		const struct parts *P = R->parts;
		printf("\nv2 parts (format layer alone, one thread, CPU time per call, test keys)\n");
		if (P->err)
			printf("  not measured: %s\n", strerror(-P->err));
		else
			for (unsigned k = 0; k < NPARTS; k++)
				printf("  %-12s %9.1f ns per %-10s (%s, %u calls)\n", part_name[k],
				       P->ns[k], part_per[k], part_fn[k], P->n[k]);
	}

	printf("\nfigures against their targets\n");
	printf("  %-26s %16s %16s  %s\n", "figure", "measured", "target", "result");
	for (unsigned i = 0; i < NTARGETS; i++) {
		const struct target *t = &R->t[i];
		char lim[48];
		if (!R->t_run[i])
			continue;
		if (t->limit >= 1000000) {
			fmt_count(t->value, a, sizeof(a));
			fmt_count(t->limit, b, sizeof(b));
		} else {
			snprintf(a, sizeof(a), t->limit < 10 ? "%.3f" : "%.1f", t->value);
			snprintf(b, sizeof(b), t->limit < 10 ? "%.2f" : "%.0f", t->limit);
		}
		snprintf(lim, sizeof(lim), "%s %s", t->ge ? ">=" : "<=", b);
		printf("  %-26s %16s %16s  %s%s%s\n", t->name, a, lim, target_pass(t) ? "PASS" : "FAIL",
		       t->unit[0] ? "  " : "", t->unit);
	}
}

static void print_json(const struct report *R)
{
	const struct opts *o = R->o;
	const struct sustained *su = R->su;
	const struct ceiling *c = R->c;
	const struct synclat *sy = R->sy;
	const struct enqlat *q = R->q;
	unsigned ph = o->phases;
	struct jw j = {stdout, true};
	bool all = true;

	jopen(&j, NULL, '{');
	jstr(&j, "tool", PROG);
	jopen(&j, "phases", '[');
	static const char *const phn[] = {"sustained", "sync", "enqueue", "token", "parts"};
	for (unsigned i = 0; i < sizeof(phn) / sizeof(phn[0]); i++)
		if (ph & (1u << i)) {
			fprintf(j.f, "%s\"%s\"", j.first ? "" : ",", phn[i]);
			j.first = false;
		}
	jclose(&j, ']');
	if (ph & PH_SUSTAINED)
		jstr(&j, "backend", auditlog_backend_name((enum auditlog_backend)su->st.backend));
	ju64(&j, "format_version", o->version);
	ju64(&j, "threads", o->threads);
	ju64(&j, "events", o->events);
	ju64(&j, "line_size_requested", o->line_size);
	ju64(&j, "coalesce_us", o->coalesce_us);
	ju64(&j, "max_batch_bytes", o->max_batch); /* 0: the library's default */
	jfix(&j, "sweep_seconds", o->sweep_ms / 1e3, 1);
	ju64(&j, "queue_slots", o->queue); /* the sustained phase's */
	if (o->has_lanes) /* absent: the library's default */
		ju64(&j, "queue_lanes", o->lanes);
	if (o->has_worker_nice) /* absent: not set, the worker keeps the bench's nice */
		jnum(&j, "worker_nice", o->worker_nice);
	if (o->worker_cpus) /* absent: not set */
		jstr(&j, "worker_cpus", o->worker_cpus);
	if (o->has_drop_behind) /* absent: the library's default */
		ju64(&j, "drop_behind_bytes", o->drop_behind);
	if (ph & PH_SUSTAINED) {
		jfix(&j, "line_bytes_avg", su->line_avg, 1);
		jfix(&j, "raw_line_bytes_avg", R->raw_line_avg, 1);
		/* the rounds' median; sustained_seconds and every other
		 * figure of the phase are round 1's */
		jfix(&j, "sustained_events_per_s", su->median_eps, 0);
		jfix(&j, "sustained_seconds", su->seconds, 3);
		ju64(&j, "rounds", su->nrounds);
		jopen(&j, "sustained_rounds_events_per_s", '[');
		for (unsigned i = 0; i < su->nrounds; i++)
			jfix(&j, NULL, su->round_eps[i], 0);
		jclose(&j, ']');
		static const char *const rcpu[] = {"sustained_rounds_worker_cpu_ns_per_event",
						   "sustained_rounds_producers_cpu_ns_per_event",
						   "sustained_rounds_other_cpu_ns_per_event"};
		const double *rv[] = {su->round_worker_ns, su->round_producers_ns, su->round_other_ns};
		for (unsigned k = 0; k < 3; k++) {
			jopen(&j, rcpu[k], '[');
			for (unsigned i = 0; i < su->nrounds; i++)
				jfix(&j, NULL, rv[k][i], 1);
			jclose(&j, ']');
		}
		jfix(&j, "raw_ceiling_events_per_s", c->events_per_s, 0);
		ju64(&j, "raw_ceiling_batch_lines", c->pt[c->best].batch);
		jfix(&j, "ratio_round1", R->ratio_first, 3);
		ju64(&j, "prime_bytes", R->prime_bytes);
		jfix(&j, "prime_sustained_s", R->prime_s[0], 3);
		jfix(&j, "prime_ceiling_s", R->prime_s[1], 3);
		jfix(&j, "ratio_to_ceiling", R->ratio, 3);
	}
	if (ph & PH_SYNC) {
		jfix(&j, "sync_p50_us", sy->p50_us, 1);
		jfix(&j, "sync_p99_us", sy->p99_us, 1);
		jfix(&j, "raw_fsync_p50_us", sy->raw_p50_us, 1);
		jfix(&j, "raw_fsync_p99_us", sy->raw_p99_us, 1);
		jfix(&j, "sync_ratio", sy->ratio, 3);
		jfix(&j, "sync_caller_commit_share", sy->lead_share, 3);
		if (sy->sealer) {
			jfix(&j, "sealer_caller_commit_share", sy->s_lead_share, 3);
			jfix(&j, "sealer_sync_p50_us", sy->s_p50_us, 1);
			jfix(&j, "sealer_sync_p99_us", sy->s_p99_us, 1);
			jfix(&j, "sealer_sync_ratio", sy->s_ratio, 3);
			jfix(&j, "sealer_vs_inproc_p50", sy->s_vs_inproc, 3);
			jfix(&j, "sealer_rtt_us", sy->s_rtt_us, 1);
			jfix(&j, "sealer_requests_per_record", sy->s_requests_per_record, 3);
		}
		ju64(&j, "sync_samples", sy->n);
	}
	if (ph & PH_ENQUEUE) {
		jfix(&j, "enqueue_p50_ns", q->p50_ns, 1);
		jfix(&j, "enqueue_p99_ns", q->p99_ns, 1);
		jfix(&j, "enqueue_p999_ns", q->p999_ns, 1);
		jfix(&j, "enqueue_max_ns", q->max_ns, 1);
		ju64(&j, "enqueue_samples", q->n);
		jfix(&j, "handoff_p50_ns", q->h_p50_ns, 1);
		if (isfinite(q->line_ns))
			jfix(&j, "line_transfer_ns", q->line_ns, 1);
		jfix(&j, "handoff_p99_ns", q->h_p99_ns, 1);
		jfix(&j, "handoff_p999_ns", q->h_p999_ns, 1);
		jfix(&j, "handoff_max_ns", q->h_max_ns, 1);
		ju64(&j, "handoff_samples", q->hn);
		ju64(&j, "enqueue_threads", q->threads);
		jbool(&j, "enqueue_queue_filled", q->blocked);
		jfix(&j, "enqueue_cpu_ns_per_call", q->cpu_ns_per_call, 1);
		jfix(&j, "timer_overhead_ns", R->e->timer_overhead_ns, 1);
		jopen(&j, "v2_producer_step", '{');
		if (R->v2->err) {
			jstr(&j, "error", strerror(-R->v2->err));
		} else {
			jfix(&j, "decode_ns", R->v2->decode_ns, 1);
			jfix(&j, "digest_ns", R->v2->digest_ns, 1);
		}
		ju64(&j, "events", V2_STEP_EVENTS);
		jclose(&j, '}');
	}
	if ((ph & PH_PARTS) && !R->parts->err) {
		char k[64];
		for (unsigned i = 0; i < NPARTS; i++) {
			snprintf(k, sizeof(k), "part_%s_ns", part_name[i]);
			jfix(&j, k, R->parts->ns[i], 1);
		}
	}
	if (ph & PH_SUSTAINED) {
		jfix(&j, "worker_cpu_ns_per_event", su->worker_ns_per_event, 1);
		jstr(&j, "worker_cpu_source", su->worker_found ? su->worker_src : "none");
		jfix(&j, "worker_cpu_resolution_ns", su->worker_found ? su->worker_res_ns : NAN, 0);
		if (su->sched_found) { /* absent: not read */
			ju64(&j, "worker_voluntary_switches", su->sched.voluntary);
			ju64(&j, "worker_involuntary_switches", su->sched.involuntary);
			if (su->sched.have_migrations)
				ju64(&j, "worker_migrations", su->sched.migrations);
		}
		jfix(&j, "producers_cpu_ns_per_event", su->producers_ns_per_event, 1);
		jfix(&j, "total_cpu_ns_per_event", su->parts_ns_per_event, 1);
		jfix(&j, "process_cpu_ns_per_event", su->process_ns_per_event, 1);
		jfix(&j, "other_threads_cpu_ns_per_event", su->other_ns_per_event, 1);
		jfix(&j, "cpu_bound_events_per_s", su->cpu_bound_events_per_s, 0);
		jfix(&j, "cpu_busy_fraction", su->cpu_busy, 3);
		ju64(&j, "batches", su->st.batches);
		ju64(&j, "batches_ahead", su->st.batches_ahead);
		ju64(&j, "cache_drops", su->st.cache_drops);
		ju64(&j, "queue_high_water", su->st.queue_high_water);
		ju64(&j, "fsyncs", su->st.fsyncs);
		ju64(&j, "largest_batch", su->st.largest_batch);
		ju64(&j, "bytes_written", su->st.bytes_written);
		ju64(&j, "rotations", su->st.rotations);
		jfix(&j, "reopen_p50_ms", su->reopen_p50_ms, 3);
		jfix(&j, "reopen_min_ms", su->reopen_min_ms, 3);
		jfix(&j, "reopen_max_ms", su->reopen_max_ms, 3);
		ju64(&j, "reopen_file_bytes", su->reopen_bytes);
		if (su->types.counted) {
			ju64(&j, "log_seals", su->types.seal);
			ju64(&j, "log_trees", su->types.tree);
			ju64(&j, "log_checkpoints", su->types.checkpoint);
		}
		jopen(&j, "raw_sweep", '[');
		for (unsigned k = 0; k < NSWEEP; k++) {
			const struct sweep_pt *pt = &c->pt[k];
			jopen(&j, NULL, '{');
			ju64(&j, "batch_lines", pt->batch);
			jfix(&j, "events_per_s", pt->events_per_s, 0);
			jfix(&j, "mb_per_s", pt->mb_per_s, 1);
			jfix(&j, "ms_per_batch", pt->batch_ms, 3);
			jfix(&j, "write_ms_per_batch", pt->write_ms, 3);
			jfix(&j, "fsync_ms_per_batch", pt->fsync_ms, 3);
			jfix(&j, "max_batch_ms", pt->max_batch_ms, 3);
			jfix(&j, "seconds", pt->seconds, 3);
			jopen(&j, "rounds_events_per_s", '[');
			for (unsigned i = 0; i < pt->nrounds; i++)
				jfix(&j, NULL, pt->round_eps[i], 0);
			jclose(&j, ']');
			jfix(&j, "median_events_per_s", pt->median_eps, 0);
			jclose(&j, '}');
		}
		jclose(&j, ']');
	}
	if (ph & PH_TOKEN) {
		/* the figures bench/ab compares are top-level numbers */
		for (unsigned i = 0; i < R->ntok; i++) {
			const struct token_arm *t = &R->tok[i];
			static const char *const pre[NTOKEN_MAX] = {
				"token_sync", "token_async", "token_async_coalesce", "token_sync_sealer",
				"token_async_sealer"};
			char k[64];
#define TK(name) (snprintf(k, sizeof(k), "%s_%s", pre[i], name), k)
			jfix(&j, TK("bytes_per_record"), t->bytes_per_record, 1);
			jfix(&j, TK("fsyncs_per_record"), t->fsyncs_per_record, 3);
			jfix(&j, TK("batches_per_record"), t->batches_per_record, 3);
#undef TK
		}
		jopen(&j, "token", '[');
		for (unsigned i = 0; i < R->ntok; i++) {
			const struct token_arm *t = &R->tok[i];
			jopen(&j, NULL, '{');
			jstr(&j, "arm", t->name);
			jbool(&j, "record_sync", t->sync);
			jbool(&j, "sealer", t->sealer);
			ju64(&j, "gap_us", t->sync ? 0 : t->gap_us);
			ju64(&j, "coalesce_us", t->coalesce_us);
			ju64(&j, "records", t->records);
			jfix(&j, "seconds", t->seconds, 3);
			ju64(&j, "events_written", t->d.events_written);
			ju64(&j, "records_written", t->d.records_written);
			ju64(&j, "batches", t->d.batches);
			ju64(&j, "inline_batches", t->d.inline_batches);
			ju64(&j, "coalesced_batches", t->d.coalesced_batches);
			ju64(&j, "fsyncs", t->d.fsyncs);
			ju64(&j, "bytes_written", t->d.bytes_written);
			jfix(&j, "bytes_per_record", t->bytes_per_record, 1);
			jfix(&j, "fsyncs_per_record", t->fsyncs_per_record, 3);
			jfix(&j, "batches_per_record", t->batches_per_record, 3);
			jfix(&j, "records_per_batch", t->records_per_batch, 2);
			jfix(&j, "worker_cpu_ns_per_record", t->worker_ns_per_record, 0);
			jfix(&j, "caller_cpu_ns_per_record", t->caller_ns_per_record, 0);
			jfix(&j, "other_threads_cpu_ns_per_record", t->others_ns_per_record, 0);
			ju64(&j, "seals", t->types.seal);
			ju64(&j, "trees", t->types.tree);
			ju64(&j, "checkpoints", t->types.checkpoint);
			jfix(&j, "seals_per_record", t->seals_per_record, 3);
			jfix(&j, "trees_per_record", t->trees_per_record, 3);
			jfix(&j, "checkpoints_per_record", t->checkpoints_per_record, 4);
			jbool(&j, "one_record_per_operation", t->exact);
			jclose(&j, '}');
		}
		jclose(&j, ']');
	}
	jopen(&j, "targets", '{');
	for (unsigned i = 0; i < NTARGETS; i++) {
		const struct target *t = &R->t[i];
		char lim[48];
		if (!R->t_run[i])
			continue;
		snprintf(lim, sizeof(lim), t->limit >= 1000 ? "%s %.0f" : "%s %g", t->ge ? ">=" : "<=",
			 t->limit);
		jopen(&j, t->name, '{');
		jnum(&j, "value", t->value);
		jstr(&j, "target", lim);
		jbool(&j, "pass", target_pass(t));
		jclose(&j, '}');
		all &= target_pass(t);
	}
	jclose(&j, '}');
	jbool(&j, "all_pass", all);
	json_env(&j, R->e);
	jclose(&j, '}');
	fputc('\n', stdout);
}

/* ---- the temporary directory ---------------------------------------------------------- */

/* The files of dir whose names start with prefix ("": all of them). */
static void remove_files(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (d) {
		while ((de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
			    strncmp(de->d_name, prefix, strlen(prefix)) != 0)
				continue;
			if (unlinkat(dirfd(d), de->d_name, 0) < 0)
				error_msg("cannot remove %s/%s: %s", dir, de->d_name,
					  strerror(errno));
		}
		closedir(d);
	}
}

/* Remove what this run made: regular files in its own mkdtemp directory. */
static void remove_dir(const char *dir)
{
	remove_files(dir, "");
	if (rmdir(dir) < 0)
		error_msg("cannot remove %s: %s", dir, strerror(errno));
}

/* ---- --log PATH ----------------------------------------------------------------------- */

static int run_log_mode(const struct opts *o)
{
	struct producer *p = calloc(o->threads, sizeof(*p));
	struct auditlog *log;
	struct auditlog_stats st0, st;
	struct env e;
	char dir[PATH_MAX], head[65], a[32];
	uint64_t t0, t1, w0 = 0, w1 = 0;
	const char *wsrc = "none";
	pid_t wtid;
	int r, rc;

	if (!p)
		return 1;
	snprintf(dir, sizeof(dir), "%s", o->log_path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	gather_env(&e, dir);

	r = open_log(o, o->log_path, o->queue, o->rotate_bytes, o->coalesce_us, &log);
	if (r < 0) {
		error_msg("cannot open %s: %s%s", o->log_path, strerror(-r), open_hint(r));
		free(p);
		return 1;
	}
	auditlog_get_stats(log, &st0, sizeof(st0));
	wtid = find_worker();
	bool wfound = wtid > 0 && thread_cpu_ns(wtid, &w0, &wsrc) == 0;
	progress("writing %" PRIu64 " events into %s", o->events, o->log_path);
	r = run_producers(p, o->threads, log, o->events, NULL, 0, &t0);
	if (r < 0)
		error_msg("auditlog_record: %s", strerror(-r));
	rc = auditlog_flush(log);
	if (rc < 0 && !r) {
		error_msg("auditlog_flush: %s", strerror(-rc));
		r = rc;
	}
	if (wfound && thread_cpu_ns(wtid, &w1, &wsrc) < 0)
		wfound = false;
	auditlog_get_stats(log, &st, sizeof(st));
	rc = auditlog_close(log);
	t1 = now_ns();
	free(p);
	if (rc < 0 && !r) {
		error_msg("auditlog_close: %s", strerror(-rc));
		r = rc;
	}
	if (r < 0)
		return 1;
	uint64_t written = st.events_written - st0.events_written;
	if (written != o->events || st.events_failed) {
		error_msg("%" PRIu64 " events recorded but %" PRIu64 " written, %" PRIu64 " failed",
			  o->events, written, st.events_failed);
		return 1;
	}
	double secs = (double)(t1 - t0) / 1e9;
	double avg = st.records_written ? (double)st.bytes_written / (double)st.records_written : 0;
	for (int i = 0; i < 32; i++)
		snprintf(head + 2 * i, 3, "%02x", st.head_hash[i]);
	if (o->json) {
		struct jw j = {stdout, true};
		jopen(&j, NULL, '{');
		jstr(&j, "tool", PROG);
		jstr(&j, "mode", "log");
		jstr(&j, "log", o->log_path);
		jstr(&j, "backend", auditlog_backend_name((enum auditlog_backend)st.backend));
		ju64(&j, "format_version", o->version);
		ju64(&j, "threads", o->threads);
		ju64(&j, "events", o->events);
		jfix(&j, "sustained_events_per_s", (double)o->events / secs, 0);
		jfix(&j, "seconds", secs, 3);
		jfix(&j, "line_bytes_avg", avg, 1);
		jfix(&j, "worker_cpu_ns_per_event", wfound ? (double)(w1 - w0) / (double)o->events : NAN,
		     1);
		ju64(&j, "rotations", st.rotations);
		ju64(&j, "recoveries", st.recoveries);
		ju64(&j, "head_seq", st.head_seq);
		jstr(&j, "head_hash", head);
		json_env(&j, &e);
		jclose(&j, '}');
		fputc('\n', stdout);
		return 0;
	}
	printf(PROG " --log: auditlog %d.%d, %s\n\n", AUDITLOG_VERSION_MAJOR, AUDITLOG_VERSION_MINOR,
	       e.date);
	print_env(&e);
	fmt_count((double)o->events, a, sizeof(a));
	printf("\nlog           %s (kept)\n", o->log_path);
	printf("backend       %s, format v%u\n",
	       auditlog_backend_name((enum auditlog_backend)st.backend), o->version);
	printf("events        %s written by %u threads (%.3f s, %.0f events/s, close included)\n", a,
	       o->threads, secs, (double)o->events / secs);
	printf("line size     %.1f bytes on average (this run's records)\n", avg);
	if (wfound)
		printf("worker CPU    %.0f ns/event\n", (double)(w1 - w0) / (double)o->events);
	printf("files         %" PRIu64 " rotations, %" PRIu64 " recoveries at open\n", st.rotations,
	       st.recoveries);
	printf("chain head    seq %" PRIu64 " hash %s\n", st.head_seq, head);
	return 0;
}

/* ---- rounds after the first: the ratio's two sides again ----------------------------- */

/*
 * The disk's rate moves from second to second (up to 40 % between two sizes
 * of one sweep on this project's VM), and a ceiling that is the best of
 * single one-second points takes the luckiest of them, against one sample
 * of the library: a ratio biased low by the noise alone. So the first
 * round's sweep only picks the batch size; that size and the sustained
 * phase are measured o->rounds times in all, interleaved (round 2 starts
 * with the ceiling, round 3 with the library, and so on) so that a slow
 * stretch of the disk falls on both, each side primed as in the first
 * round. Both figures are the medians of their rounds (docs/benchmarks.md,
 * "Rounds: the ratio of medians").
 */
static int more_rounds(const struct opts *o, const struct env *e, const char *dir,
		       const struct pool *pl, uint64_t prime_bytes, struct sustained *su,
		       struct ceiling *c)
{
	char path[PATH_MAX];
	double ignored;
	int r;

	if (join_path(path, sizeof(path), dir, "sustained-round.log") < 0)
		return -ENAMETOOLONG;
	for (unsigned round = 2; round <= o->rounds; round++) {
		for (unsigned side = 0; side < 2; side++) {
			bool ceiling = (side == 0) == (round % 2 == 0);
			if (ceiling) {
				progress("round %u of %u: the raw ceiling at its best size", round, o->rounds);
				prime_before(dir, "the raw ceiling", prime_bytes, &ignored);
				r = ceiling_round(dir, pl, o->sweep_ms, c);
			} else {
				struct sustained one;
				progress("round %u of %u: sustained", round, o->rounds);
				prime_before(dir, "the sustained phase", prime_bytes, &ignored);
				r = phase_sustained(o, e, path, false, &one);
				/* with its rotated files (--rotate-bytes) */
				remove_files(dir, "sustained-round.log");
				if (r == 0)
					keep_round(su, &one);
			}
			if (r < 0)
				return r;
		}
	}
	su->median_eps = median_of(su->round_eps, su->nrounds);
	return 0;
}

/* ---- main ------------------------------------------------------------------------------- */

static int run_bench(const struct opts *o)
{
	const char *base = o->dir ? o->dir : "/var/tmp";
	char tmpl[PATH_MAX], lpath[PATH_MAX], why[PATH_MAX + 128];
	struct env e;
	struct sustained su = {0};
	struct ceiling c = {0};
	struct synclat sy = {0};
	struct enqlat q = {0};
	struct token_arm tok[NTOKEN_MAX] = {{0}};
	unsigned ntok = 0;
	struct v2step v2 = {0};
	struct parts parts = {0};
	struct pool pl = {0};
	struct stat st;
	double probe_ns = 0, line_avg, prime_s[2] = {0, 0};
	unsigned ph = o->phases;
	uint64_t prime_bytes = 0;
	int r, ret = 1;

	if (stat(base, &st) < 0)
		bad_arg("--dir %s: %s", base, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		bad_arg("--dir %s: not a directory", base);
	if ((size_t)snprintf(tmpl, sizeof(tmpl), "%s/auditlog-bench.XXXXXX", base) >= sizeof(tmpl))
		bad_arg("--dir %s: path too long", base);
	if (!mkdtemp(tmpl)) {
		error_msg("cannot create a directory under %s: %s", base, strerror(errno));
		return 1;
	}
	gather_env(&e, tmpl);
	if (check_target(&e, tmpl, why, sizeof(why)) < 0) {
		error_msg("refusing the target: %s; use --dir on a disk-backed file system", why);
		remove_dir(tmpl);
		return 2;
	}
	r = probe_fsync(tmpl, &probe_ns);
	if (r < 0) {
		error_msg("write+fdatasync in %s: %s", tmpl, strerror(-r));
		goto out;
	}
	if (probe_ns < FSYNC_FLOOR_NS) {
		error_msg("refusing the target: a one-line write+fdatasync in %s takes %.0f ns "
			  "(median): fdatasync does not reach stable storage there",
			  tmpl, probe_ns);
		remove_dir(tmpl);
		return 2;
	}
	calibrate_timer(&e);
	if (ph & PH_SUSTAINED)
		prime_bytes = prime_size(o, tmpl);

	if (ph & PH_SUSTAINED) {
		progress("sustained: %" PRIu64 " events by %u threads in %s", o->events, o->threads,
			 tmpl);
		if (join_path(lpath, sizeof(lpath), tmpl, "sustained.log") < 0) {
			error_msg("%s: path too long", tmpl);
			goto out;
		}
		prime_before(tmpl, "the sustained phase", prime_bytes, &prime_s[0]);
		if (phase_sustained(o, &e, lpath, true, &su) < 0 || measure_reopen(o, lpath, &su) < 0)
			goto out;
		su.nrounds = 0;
		keep_round(&su, &su);
		su.median_eps = su.events_per_s;
	}
	if (ph & (PH_SUSTAINED | PH_SYNC)) {
		r = make_pool(&pl, o->threads, o->version, o->events / 2);
		if (r < 0) {
			error_msg("cannot format the baseline lines: %s", strerror(-r));
			goto out;
		}
	}
	if (ph & PH_SUSTAINED) {
		prime_before(tmpl, "the raw ceiling", prime_bytes, &prime_s[1]);
		if (phase_ceiling(tmpl, &pl, o->sweep_ms, &c) < 0 ||
		    more_rounds(o, &e, tmpl, &pl, prime_bytes, &su, &c) < 0)
			goto out;
	}
	/* the raw sync line: the library's average, else the pool's */
	line_avg = (ph & PH_SUSTAINED) ? su.line_avg : pl.avg;
	if ((ph & PH_SYNC) && phase_sync(o, tmpl, &pl, line_avg, &sy) < 0)
		goto out;
	if (ph & PH_ENQUEUE) {
		progress("enqueue latency: %u producers, %u samples each", ENQ_THREADS,
			 o->enq_samples);
		if (phase_enqueue(o, tmpl, &e, &q) < 0)
			goto out;
		measure_v2_step(&v2);
	}
	if ((ph & PH_TOKEN) && phase_token(o, tmpl, tok, &ntok) < 0)
		goto out;
	if (ph & PH_PARTS) {
		progress("v2 parts: format functions, %u calls each", PARTS_N);
		if (measure_parts(&parts) < 0)
			error_msg("v2 parts: %s", strerror(-parts.err)); /* reported, not fatal */
	}

	(void)read_small("/proc/loadavg", e.load_end, sizeof(e.load_end));
	struct report R = {
		.o = o, .e = &e, .su = &su, .c = &c, .sy = &sy, .q = &q, .tok = tok, .ntok = ntok, .v2 = &v2,
		.parts = &parts,
		.raw_line_avg = pl.avg,
		.ratio = (ph & PH_SUSTAINED) ? su.median_eps / c.events_per_s : NAN,
		.ratio_first = (ph & PH_SUSTAINED) ? su.events_per_s / c.first_events_per_s : NAN,
		.prime_bytes = prime_bytes,
		.prime_s = {prime_s[0], prime_s[1]},
	};
	R.t[0] = (struct target){"sustained_events_per_s", su.median_eps, T_SUSTAINED, true,
				 "events/s"};
	R.t[1] = (struct target){"ratio_to_ceiling", R.ratio, T_RATIO, true, ""};
	R.t[2] = (struct target){"sync_ratio", sy.ratio, T_SYNC_RATIO, false, ""};
	/* DESIGN.md's enqueue figures are the hand-off's: work moved into the
	 * producers (al_prepare) is their CPU per event, reported apart */
	R.t[3] = (struct target){"handoff_p50_ns", q.h_p50_ns, T_ENQ_P50, false, "ns"};
	R.t[4] = (struct target){"handoff_p999_ns", q.h_p999_ns, T_ENQ_P999, false, "ns"};
	R.t[5] = (struct target){"worker_cpu_ns_per_event", su.worker_ns_per_event,
				 o->version == 2 ? T_WORKER_V2 : T_WORKER_V1, false, "ns"};
	R.t[6] = (struct target){"total_cpu_ns_per_event", su.parts_ns_per_event, T_TOTAL_CPU,
				 false, "ns (producers + worker)"};
	/* the absolute and CPU targets are for the token's shape (about 340 bytes) */
	bool shape340 = o->line_size == 0;
	R.t_run[0] = (ph & PH_SUSTAINED) && shape340;
	R.t_run[1] = (ph & PH_SUSTAINED) != 0; /* DESIGN.md: at every line size */
	R.t_run[2] = (ph & PH_SYNC) != 0;
	R.t_run[3] = R.t_run[4] = (ph & PH_ENQUEUE) != 0;
	R.t_run[5] = R.t_run[6] = (ph & PH_SUSTAINED) && shape340;
	if (o->json)
		print_json(&R);
	else
		print_table(&R);
	fflush(stdout);
	ret = 0;
out:
	free_pool(&pl);
	if (o->keep)
		error_msg("files kept in %s", tmpl);
	else
		remove_dir(tmpl);
	return ret;
}

int main(int argc, char **argv)
{
	struct opts o;
	long min_len = 0;
	int r;

	parse_args(argc, argv, &o);
	g_version = o.version;
	g_progress = isatty(STDERR_FILENO);
	r = shape_lines(o.line_size, o.version, o.events, &min_len);
	if (r == -ERANGE) {
		/* the smallest size every variant reaches exactly, for the message */
		unsigned lo = 0;
		for (unsigned n = o.line_size + 1; n <= (unsigned)min_len + 64 && !lo; n++)
			if (shape_lines(n, o.version, o.events, &(long){0}) == 0)
				lo = n;
		bad_arg("--line-size %u: these events make no line of that size in format v%u; "
			"the shortest, with only action and outcome, is %ld bytes (its timestamp "
			"and hash alone take 122) and the smallest size all of them reach is %u",
			o.line_size, o.version, min_len, lo);
	}
	if (r < 0) {
		error_msg("cannot shape the lines (--line-size %u, format v%u): %s", o.line_size,
			  o.version, strerror(-r));
		return 1;
	}
	if (o.log_path)
		return run_log_mode(&o);
	return run_bench(&o);
}
