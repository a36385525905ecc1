/* SPDX-License-Identifier: MIT */
/*
 * auditlog-verify: prove audit logs intact, or say where and how they were
 * altered. Exit 0 intact, 1 integrity finding, 2 usage or I/O error.
 * See auditlog-verify --help and docs/auditlog-verify.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "cli.h"
#include "verify.h"
#include "prove.h"
#include "registry.h"
#include "attest.h"
#include "emit.h"
#include "tail_state.h"
#include "each_chain.h"

static const char usage[] =
	"usage: auditlog-verify [options] PATH...\n"
	"       auditlog-verify [options] -        (the log on standard input)\n"
	"\n"
	"Verify audit logs written by libauditlog: files, or directories of rotated files,\n"
	"or a stream on standard input (a rotated set concatenated in order).\n"
	"Files are grouped into chains by chain id and ordered by their headers' links.\n"
	"\n"
	"  --json                 print a machine report (every finding) on stdout\n"
	"  -q, --quiet            print nothing; only the exit code\n"
	"  --emit                 write every line that verified to stdout (the report goes\n"
	"                         to stderr), so a pipeline ingests only verified records\n"
	"  --expect-head [CHAIN_ID:]SEQ:HASH\n"
	"                         the record SEQ must exist with this hash (a head exported\n"
	"                         elsewhere: catches a cut tail or a recomputed chain); once\n"
	"                         per chain, without CHAIN_ID for the live file's chain\n"
	"  --from SEQ:HASH        start at a record verified before (a checkpoint): files\n"
	"                         wholly before it are not read, records before it not checked\n"
	"  --follow               then keep verifying the log as it grows, across\n"
	"                         rotations, until SIGINT or SIGTERM (with --emit: a\n"
	"                         pipeline gets each verified line as it is written)\n"
	"  --format raw|ecs|ocsf  with --emit: each verified line as it is (raw, the default),\n"
	"                         or as one ECS or OCSF 1.1.0 JSON object (docs/siem.md)\n"
	"  --state FILE           with --follow --emit: keep the tail's position in FILE\n"
	"                         (written atomically after each batch) and resume after\n"
	"                         it on restart; a FILE the log does not match: exit 2\n"
	"  --each-chain           with --follow and one directory: a tail for each writer's\n"
	"                         chain in it (each active name), and one for each chain that\n"
	"                         appears later; their lines go to stdout whole\n"
	"  --state-dir DIR        with --each-chain --emit: each chain's tail keeps its\n"
	"                         position in DIR/NAME.state (NAME: its active name)\n"
	"  --verify-key FILE      a v2 verification key (the auditor's secret): check every\n"
	"                         seal's MAC, and that records after its t0 are v2\n"
	"                         (repeatable: one per host key)\n"
	"  --pubkey FILE          a v2 checkpoint public key: check every checkpoint's\n"
	"                         signature (repeatable: one per host)\n"
	"  --witness FILE         checkpoints kept elsewhere (signed notes, concatenated):\n"
	"                         the chains must still hold them (repeatable)\n"
	"  --registry DIR         the sealer's registry of chains (auditlog-sealer --registry):\n"
	"                         each chain it names must be among the inputs and reach its\n"
	"                         registered close (missing-chain, truncated)\n"
	"  --witness-key FILE     a witness's public key (auditlog-keygen pubkey): only notes\n"
	"                         it cosigned are trusted as witnessed (repeatable: any one)\n"
	"  --one-chain            the inputs must hold one chain (another is a finding)\n"
	"  --dedup                a central copy: a byte-identical repeat of one of the\n"
	"                         last 64 records is shipper-duplicate (not a finding)\n"
	"  --min-version N        report records below format version N\n"
	"  --strict               count repaired crash damage and v2 seal gaps as findings\n"
	"  -j, --jobs N           check large files with N threads (default 0: one per\n"
	"                         CPU; 1: this thread alone); the findings do not change\n"
	"  --prove SEQ            write the evidence bundle of record SEQ (its line, the audit\n"
	"                         path, the first checkpoint that covers it) to stdout or --out;\n"
	"                         with --witness, a cosigned copy of that checkpoint's note\n"
	"  --prove-consistency SIZE1:SIZE2\n"
	"                         the bundle proving the checkpoint of size SIZE2 extends the\n"
	"                         one of size SIZE1\n"
	"  --out FILE             write the bundle to FILE (created; never overwritten)\n"
	"  --check-proof BUNDLE   check a bundle offline with --pubkey, without the log:\n"
	"                         exit 0 valid, 1 invalid (the part is named), 2 usage;\n"
	"                         with --witness-key, its notes must be cosigned\n"
	"  --attest FILE          check an attestation statement (auditlog-keygen --attest,\n"
	"                         docs/format.md 27) with --verify-key, then compare it with\n"
	"                         the seals of the logs given (PATH... optional)\n"
	"  --attest-nonce HEX     the challenge the statement must carry (64 hex digits)\n"
	"  --attest-max-age SECONDS\n"
	"                         a statement older than this is a finding (attest-age)\n"
	"  -h, --help             this text\n"
	"  --version              the version\n"
	"\n"
	"Exit status: 0 intact, 1 integrity finding, 2 usage or I/O error.\n";

static const char threat_note[] =
	"A v0/v1 chain detects any change made without recomputing the chain. Someone who can "
	"write the files can recompute it from an edit to the end, or cut the tail at a line "
	"boundary: only a head exported elsewhere (--expect-head SEQ:HASH) catches that.";

/* A code point that rewrites the terminal or the reading order: C0 and C1
 * controls, DEL, and the bidirectional controls (U+061C, U+200E-U+200F,
 * U+202A-U+202E, U+2066-U+2069). */
static bool hostile_cp(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
	       (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* The code point of a well-formed UTF-8 sequence of len bytes. */
static uint32_t utf8_cp(const unsigned char *p, size_t len)
{
	static const unsigned char lead_mask[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
	uint32_t cp = p[0] & lead_mask[len];
	for (size_t i = 1; i < len; i++)
		cp = cp << 6 | (p[i] & 0x3f);
	return cp;
}

/* Write s so that what reaches a terminal is exactly what the bytes are, and
 * cannot rewrite the screen or reorder what the auditor reads: a backslash
 * as \\, C0 controls and DEL as \xNN, C1 and bidirectional controls as
 * \uNNNN, each byte of what is not UTF-8 (the format's reading, also for
 * file names) as \xNN; everything else as itself. A message the engine cut
 * inside a character shows the bytes of the cut one as \xNN. */
static void put_safe(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0;

	while (i < n) {
		size_t j = i;
		while (j < n && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '\\')
			j++;
		fwrite(p + i, 1, j - i, out);
		if ((i = j) == n)
			break;
		size_t sub = 0, len = al_utf8_seq(p + i, n - i, &sub);
		if (len == 0) {
			for (size_t k = 0; k < sub; k++)
				fprintf(out, "\\x%02x", p[i + k]);
			i += sub;
			continue;
		}
		uint32_t cp = utf8_cp(p + i, len);
		if (cp == '\\')
			fputs("\\\\", out);
		else if (cp < 0x80 && hostile_cp(cp))
			fprintf(out, "\\x%02x", (unsigned)cp);
		else if (hostile_cp(cp))
			fprintf(out, "\\u%04x", (unsigned)cp);
		else
			fwrite(p + i, 1, len, out);
		i += len;
	}
}

/* s as a JSON string, never NULL (jansson refuses what is not UTF-8): each
 * maximal subpart of an ill-formed sequence becomes U+FFFD, as the format
 * repairs a field (docs/format.md 3, step 1). *repaired (may be NULL): true
 * when bytes were replaced. NULL only when out of memory. */
static json_t *json_text(const char *s, bool *repaired)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), o = 0;
	json_t *j;
	char *fix;

	if (repaired)
		*repaired = false;
	if ((j = json_string(s)))
		return j;
	if (!(fix = malloc(n * 3 + 1))) /* every byte at most one U+FFFD */
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t sub = 0, len = al_utf8_seq(p + i, n - i, &sub);
		if (len) {
			memcpy(fix + o, p + i, len);
			o += len;
			i += len;
		} else {
			memcpy(fix + o, "\xef\xbf\xbd", 3);
			o += 3;
			i += sub;
		}
	}
	fix[o] = 0;
	j = json_string(fix);
	free(fix);
	if (repaired)
		*repaired = j != NULL;
	return j;
}

struct report {
	bool json, quiet, strict, emit;
	struct emitter *em; /* --emit: the format, and --state's tail */
	FILE *out; /* the human report: stdout, or stderr with --emit */
	json_t *findings;
	unsigned long shown;
	/* progress bar (stderr on a TTY, inputs > 64 MiB) */
	bool bar, bar_drawn;
	struct timespec t0, last_draw;
};

static volatile sig_atomic_t stop_requested, signalled;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = signalled = 1;
}

static double since(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static void bar_clear(struct report *r)
{
	if (r->bar_drawn) {
		fputs("\r\033[K", stderr);
		r->bar_drawn = false;
	}
}

/* Bytes done, rate, ETA; redrawn at most 10 times a second. */
static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct report *r = ctx;
	struct timespec now;
	if (!r->bar)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (r->bar_drawn && since(&r->last_draw, &now) < 0.1 && done < total)
		return;
	r->last_draw = now;
	double el = since(&r->t0, &now), rate = el > 0 ? (double)done / el : 0;
	double eta = rate > 0 && total > done ? (double)(total - done) / rate : 0;
	unsigned pct = total ? (unsigned)(done * 100 / total) : 100, w = pct * 30 / 100;
	char bar[31];
	memset(bar, '#', w);
	memset(bar + w, '.', 30 - w);
	bar[30] = 0;
	fprintf(stderr, "\r[%s] %3u%% %.0f/%.0f MiB  %.0f MiB/s  ETA %u:%02u\033[K", bar, pct > 100 ? 100 : pct,
		(double)done / 1048576, (double)total / 1048576, rate / 1048576, (unsigned)eta / 60,
		(unsigned)eta % 60);
	r->bar_drawn = true;
}

/* --state: the position saved after the lines written so far reached
 * stdout (never before: a line the state names was delivered). A failure
 * ends the run (exit 2): going on would widen what a restart repeats. */
static int emit_failed;

static void emit_save(struct report *r)
{
	char err[512];
	int e;

	if ((e = emit_flush(r->em)) < 0) {
		if (!emit_failed)
			fprintf(stderr, "auditlog-verify: --emit: cannot write standard output: %s\n", strerror(-e));
		emit_failed = 1;
		stop_requested = 1;
	}
	if (emit_failed || !r->em || !r->em->tail || !tail_dirty(r->em->tail))
		return;
	if ((e = tail_save(r->em->tail, err, sizeof(err))) < 0) {
		fprintf(stderr, "auditlog-verify: --state: %s\n", err);
		emit_failed = 1;
		stop_requested = 1;
		return;
	}
	r->em->since_save = 0;
}

static void on_wait(void *ctx)
{
	emit_save(ctx); /* --follow --emit: what verified so far reaches the pipe now */
}

static void on_finding(void *ctx, const struct al_finding *f)
{
	struct report *r = ctx;
	if (r->json) {
		json_t *o = json_object();
		json_object_set_new(o, "class", json_string(al_vclass_name(f->cls)));
		bool repaired;
		json_object_set_new(o, "file", json_text(f->file, &repaired));
		if (repaired) { /* the name's exact bytes, to find the file by */
			size_t n = strlen(f->file);
			char *hex = malloc(2 * n + 1);
			if (hex) {
				al_hex((const uint8_t *)f->file, n, hex);
				hex[2 * n] = 0;
				json_object_set_new(o, "file_hex", json_string(hex));
				free(hex);
			}
		}
		json_object_set_new(o, "line", json_integer((json_int_t)f->line));
		json_object_set_new(o, "offset", json_integer((json_int_t)f->offset));
		json_object_set_new(o, "seq", f->has_seq ? json_integer((json_int_t)f->seq) : json_null());
		json_object_set_new(o, "integrity", json_boolean(al_vclass_is_integrity(f->cls, r->strict)));
		json_object_set_new(o, "message", json_text(f->msg, NULL));
		json_array_append_new(r->findings, o);
		return;
	}
	if (r->quiet)
		return;
	if (r->out == stderr)
		bar_clear(r);
	put_safe(r->out, f->file);
	fprintf(r->out, ":%" PRIu64 ": offset %" PRIu64, f->line, f->offset);
	if (f->has_seq)
		fprintf(r->out, ", seq %" PRIu64, f->seq);
	fprintf(r->out, ": %s: ", al_vclass_name(f->cls));
	put_safe(r->out, f->msg);
	fputc('\n', r->out);
	r->shown++;
}

static void on_record(void *ctx, const uint8_t *line, size_t len)
{
	struct report *r = ctx;
	int e = emit_line(r->em, line, len);

	if (e == -EAGAIN) { /* a seq jump: stop, verify again from the last line (main) */
		stop_requested = 1;
		return;
	}
	if (e < 0 && !emit_failed) {
		if (e == -EINVAL) /* never: the engine verified it with the same parser */
			fprintf(stderr, "auditlog-verify: --emit: the format's parser refuses a verified line\n");
		else
			fprintf(stderr, "auditlog-verify: --emit: cannot write standard output: %s\n", strerror(-e));
		emit_failed = 1;
		stop_requested = 1;
	}
	if (r->em->tail && r->em->since_save >= EMIT_BATCH)
		emit_save(r);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* --follow: a file whose first line is not complete yet is being created
 * (a rotation's new active file before its header is written). It is left
 * out of the start: the follower meets it as the successor of the file it
 * tails. */
static bool first_line_complete(const char *path)
{
	char buf[AL_LINE_MAX];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return true; /* let the engine report it */
	n = read(fd, buf, sizeof(buf));
	close(fd);
	return n > 0 && memchr(buf, '\n', (size_t)n) != NULL;
}

static void free_list(char **paths, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

/* The inputs, directories expanded. 0, or -errno after saying which. */
static int list_inputs_as(char **args, int nargs, char ***ret, unsigned *ret_n, bool quiet_enoent)
{
	char **paths = NULL;
	unsigned n = 0, cap = 0;

	for (int i = 0; i < nargs; i++) {
		int r = al_verify_add_path(args[i], &paths, &n, &cap);
		if (r < 0) {
			if (r == -ENOENT && quiet_enoent) {
				free_list(paths, n);
				return r;
			}
			fprintf(stderr, "auditlog-verify: ");
			put_safe(stderr, args[i]);
			fprintf(stderr, ": %s\n", strerror(-r));
			free_list(paths, n);
			return r;
		}
	}
	*ret = paths;
	*ret_n = n;
	return 0;
}

static int list_inputs(char **args, int nargs, char ***ret, unsigned *ret_n)
{
	return list_inputs_as(args, nargs, ret, ret_n, false);
}

/* Does a second listing name the same files? (A rotation adds a name.) */
static bool same_listing(char **args, int nargs, char **paths, unsigned n)
{
	char **again = NULL;
	unsigned m = 0;
	bool same;

	if (list_inputs_as(args, nargs, &again, &m, true) < 0)
		return false;
	same = m == n;
	for (unsigned i = 0; same && i < n; i++)
		same = strcmp(paths[i], again[i]) == 0;
	free_list(again, m);
	return same;
}

/* Say on one line why the value of `what` (an option or a variable) is
 * refused; the exit status for it. */
static int refuse(const char *what, const char *val, const char *why)
{
	fprintf(stderr, "auditlog-verify: %s \"", what);
	put_safe(stderr, val);
	fprintf(stderr, "\": %s\n", why);
	return 2;
}

/* A number from 0 to max for `what`; what it is (`wants`) says the error.
 * 0, or 2 after saying why. */
static int parse_num(const char *what, const char *val, uint64_t max, const char *wants, uint64_t *ret)
{
	char why[160];

	if (cli_parse_udec(val, strlen(val), max, ret) == 0)
		return 0;
	snprintf(why, sizeof(why), "wants %s from 0 to %" PRIu64 ", in decimal digits only", wants, max);
	return refuse(what, val, why);
}

/* [CHAIN_ID:]SEQ:HASH (the chain id only when chain_ok). NULL, or why not. */
static const char *parse_anchor(const char *s, bool chain_ok, struct al_vanchor *ret)
{
	struct al_vanchor a = {0};
	const char *c1 = strchr(s, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, *seq = s;
	uint8_t id[16];

	if (!c1 || (c2 && (!chain_ok || strchr(c2 + 1, ':'))))
		return chain_ok ? "wants [CHAIN_ID:]SEQ:HASH" : "wants SEQ:HASH";
	if (c2) {
		if (c1 - s != 32 || al_unhex((const uint8_t *)s, 32, id) < 0)
			return "the chain id is not 32 lowercase hex digits";
		memcpy(a.chain_id, s, 32);
		a.has_chain = true;
		seq = c1 + 1;
		c1 = c2;
	}
	/* A seq is a JSON integer the writer keeps at most 2^53-1 (docs/format.md):
	 * a larger one is a typo, not a head that could be found. */
	if (cli_parse_udec(seq, (size_t)(c1 - seq), AL_INT_MAX, &a.seq) < 0)
		return "the seq is not decimal digits from 0 to 9007199254740991 (2^53-1: no record has a "
		       "larger one)";
	if (strlen(c1 + 1) != 2 * AL_HASH_LEN || al_unhex((const uint8_t *)c1 + 1, 2 * AL_HASH_LEN, a.hash) < 0)
		return "the hash is not 64 lowercase hex digits";
	*ret = a;
	return NULL;
}

/* The bytes of a key or witness file (at most max bytes): 0, or 2 with a
 * message. *ret is freed (and cleansed) by the caller. */
static int read_small(const char *what, const char *path, size_t max, uint8_t **ret, size_t *ret_len)
{
	int r = cli_read_small(path, max, true, ret, ret_len);
	return r < 0 ? refuse(what, path, strerror(-r)) : 0;
}

static struct al_vkey *vkeys;
static struct al_ckey *pubkeys;
static struct al_vwnote *witness;
static unsigned n_vkeys, n_pubkeys, n_witness;

static int add_key(int opt, const char *path)
{
	uint8_t *buf = NULL;
	size_t n = 0;
	int r, ret;
	const char *what = opt == 'K' ? "--verify-key" : opt == 'P' ? "--pubkey" : "--witness";

	if ((ret = read_small(what, path, opt == 'W' ? (64u << 20) : 4096, &buf, &n)))
		return ret;
	if (opt == 'K') {
		struct al_vkey k, *nk = malloc((n_vkeys + 1) * sizeof(*nk));
		r = nk ? al_vkey_parse(buf, n, &k) : -ENOMEM;
		for (unsigned i = 0; r == 0 && i < n_vkeys; i++)
			if (memcmp(vkeys[i].p.key_id, k.p.key_id, sizeof(k.p.key_id)) == 0)
				r = -EEXIST;
		if (r == 0) {
			if (n_vkeys)
				memcpy(nk, vkeys, n_vkeys * sizeof(*nk));
			nk[n_vkeys] = k;
			if (vkeys)
				OPENSSL_cleanse(vkeys, n_vkeys * sizeof(*vkeys));
			free(vkeys);
			vkeys = nk;
			n_vkeys++;
		} else {
			free(nk);
		}
		OPENSSL_cleanse(&k, sizeof(k));
	} else if (opt == 'P') {
		struct al_ckey k, *nk = realloc(pubkeys, (n_pubkeys + 1) * sizeof(*nk));
		if (nk)
			pubkeys = nk;
		r = nk ? al_ckey_parse(buf, n, false, &k) : -ENOMEM;
		for (unsigned i = 0; r == 0 && i < n_pubkeys; i++)
			if (pubkeys[i].host_len == k.host_len && memcmp(pubkeys[i].host, k.host, k.host_len) == 0)
				r = -EEXIST;
		if (r == 0)
			pubkeys[n_pubkeys++] = k;
	} else {
		r = al_witness_parse(buf, n, path, &witness, &n_witness);
	}
	OPENSSL_cleanse(buf, n);
	free(buf);
	if (r == 0)
		return 0;
	return refuse(what, path,
		      r == -EBADMSG ? "its key-id is not the one its seed and parameters give" :
		      r == -EEXIST ? (opt == 'K' ? "a second key with the same key id" : "a second key of the same host") :
		      r == -ENOMEM ? strerror(ENOMEM) :
		      opt == 'K' ? "not a verification key file (docs/format.md 17.1)" :
		      opt == 'P' ? "not a checkpoint public key file (docs/format.md 17.3)" :
				   "not a witness file (signed checkpoint notes, docs/format.md 20.5)");
}

/* --witness-key: witness public keys (docs/format.md 20.6); the notes each
 * cosigned are listed in the report. */
#define OPT_WITNESS_KEY 0x157
static struct al_ckey *wkeys;
static unsigned n_wkeys;

static int add_witness_key(const char *path)
{
	uint8_t *buf = NULL;
	size_t n = 0;
	struct al_ckey k, *nk = NULL;
	int r, ret;

	if ((ret = read_small("--witness-key", path, 4096, &buf, &n)))
		return ret;
	r = al_ckey_parse(buf, n, false, &k);
	OPENSSL_cleanse(buf, n);
	free(buf);
	for (unsigned i = 0; r == 0 && i < n_wkeys; i++)
		if (wkeys[i].host_len == k.host_len && memcmp(wkeys[i].host, k.host, k.host_len) == 0)
			r = -EEXIST;
	if (r == 0 && !(nk = realloc(wkeys, (n_wkeys + 1) * sizeof(*nk))))
		r = -ENOMEM;
	if (r < 0)
		return refuse("--witness-key", path,
			      r == -EEXIST ? "a second key of the same witness name" :
			      r == -ENOMEM ? strerror(ENOMEM) : "not a checkpoint public key file (docs/format.md 17.3)");
	nk[n_wkeys++] = k;
	wkeys = nk;
	return 0;
}

/* Which witness cosigned which chain at what size (text, or a JSON array). */
static void cosigned_report(FILE *out, json_t *arr)
{
	for (unsigned i = 0; i < n_witness; i++) {
		const struct al_vwnote *w = &witness[i];
		const struct al_ckey *k = w->cosigned_by ? &wkeys[w->cosigned_by - 1] : NULL;
		char when[32] = "?";
		struct tm tm;
		time_t t = (time_t)w->cosig_time;

		if (!k)
			continue;
		if (gmtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		if (arr) {
			json_t *o = json_object();
			json_object_set_new(o, "chain_id", json_string(w->chain_id));
			json_object_set_new(o, "size", json_integer((json_int_t)w->size));
			json_object_set_new(o, "witness", json_stringn((const char *)k->host, k->host_len));
			json_object_set_new(o, "time", json_string(when));
			json_array_append_new(arr, o);
		} else {
			fprintf(out, "witness: chain %s size %" PRIu64 " cosigned by %.*s at %s (%s, note %u)\n",
				w->chain_id, w->size, (int)k->host_len, (const char *)k->host, when, w->src, w->index);
		}
	}
}

/* The --expect-head anchors. At file scope so that they stay reachable
 * whichever way main() returns (no leak report under ASan). */
static struct al_vanchor *anchors;

/* Add an --expect-head anchor: one per chain, one without a chain id (the
 * live file's chain). 0, or 2 after saying why not. */
static int add_anchor(const char *arg, struct al_vanchor **list, unsigned *n)
{
	struct al_vanchor a, *grown;
	const char *why = parse_anchor(arg, true, &a);

	if (why)
		return refuse("--expect-head", arg, why);
	for (unsigned i = 0; i < *n; i++)
		if ((*list)[i].has_chain == a.has_chain && (!a.has_chain || !strcmp((*list)[i].chain_id, a.chain_id)))
			return refuse("--expect-head", arg,
				      a.has_chain ? "a second anchor for this chain (one per chain)"
						  : "a second anchor without a chain id (give the others as "
						    "CHAIN_ID:SEQ:HASH)");
	if (!(grown = realloc(*list, (*n + 1) * sizeof(**list))))
		return refuse("--expect-head", arg, strerror(ENOMEM));
	grown[(*n)++] = a;
	*list = grown;
	return 0;
}

/* The log on standard input, fed to the engine as it is read. What verified
 * is written out before each read that may wait (--emit from a pipe passes
 * lines on as they come, not a stdio buffer at a time). */
static int verify_stdin(const struct al_vopts *o, struct al_vresult *res, struct report *rep)
{
	static uint8_t buf[1 << 20];
	struct al_vstream *st;
	int r = al_vstream_new("(stdin)", o, res, &st);

	if (r < 0)
		return r;
	for (;;) {
		if (rep->emit)
			emit_save(rep);
		ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			al_vstream_free(st);
			return r;
		}
		if (n == 0)
			break;
		r = al_vstream_feed(st, buf, (size_t)n);
		if (r < 0) {
			al_vstream_free(st);
			return r;
		}
	}
	return al_vstream_end(st);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"version", no_argument, NULL, 'V'},
		{"json", no_argument, NULL, 'J'},       {"quiet", no_argument, NULL, 'q'},
		{"jobs", required_argument, NULL, 'j'},
		{"emit", no_argument, NULL, 'E'},
		{"expect-head", required_argument, NULL, 'e'},
		{"min-version", required_argument, NULL, 'm'},
		{"from", required_argument, NULL, 'f'},
		{"dedup", no_argument, NULL, 'D'},
		{"one-chain", no_argument, NULL, 'O'},   {"strict", no_argument, NULL, 's'},     {"help", no_argument, NULL, 'h'},
		{"follow", no_argument, NULL, 'F'},
		{"verify-key", required_argument, NULL, 'K'},
		{"pubkey", required_argument, NULL, 'P'},
		{"witness", required_argument, NULL, 'W'},
		{"witness-key", required_argument, NULL, OPT_WITNESS_KEY},
		{"prove", required_argument, NULL, 'X'},
		{"prove-consistency", required_argument, NULL, 'Y'},
		{"out", required_argument, NULL, 'o'},
		{"check-proof", required_argument, NULL, 'Z'},
		{"registry", required_argument, NULL, 'G'},
		/* attestations (attest.c) */
		{"attest", required_argument, NULL, 0x1a0},
		{"attest-nonce", required_argument, NULL, 0x1a1},
		{"attest-max-age", required_argument, NULL, 0x1a2},
		/* --emit --format, --follow --state (emit.c, tail_state.c) */
		{"format", required_argument, NULL, 0x1b0},
		{"state", required_argument, NULL, 'S'},
		/* --follow --each-chain (each_chain.c) */
		{"each-chain", no_argument, NULL, 0x1c0},
		{"state-dir", required_argument, NULL, 0x1c1},
		{NULL, 0, NULL, 0},
	};
	opterr = 0; /* a bad option gets one line: cli_bad_option */
	struct report rep = {0};
	struct al_vopts o = {.on_finding = on_finding, .ctx = &rep};
	char **paths = NULL;
	char **dirs = NULL;
	unsigned dirs_cap = 0;
	unsigned n = 0, n_anchors = 0;
	int c, r, ret, follow_tries = 0;
	/* evidence bundles (prove.c): one of --prove, --prove-consistency, --check-proof */
	int prove_mode = 0;
	uint64_t prove_a = 0, prove_b = 0;
	const char *prove_out = NULL, *bundle = NULL;
	/* --registry (registry.c): the sealer's registry, after the inputs */
	const char *registry_dir = NULL;
	struct al_vregistry reg = {0};
	/* attestations (attest.c) */
	const char *attest_file = NULL;
	struct attest_opts ao = {.put = put_safe};
	/* --format, --state (emit.c, tail_state.c) */
	static struct emitter em = {.fmt = EMIT_RAW};
	int gap_tries = 0;
	const char *state_path = NULL, *format_arg = NULL;
	/* --each-chain (each_chain.c): the options each chain's tail gets */
	bool each_chain = false;
	const char *state_dir = NULL;
	struct each_chain ec = {.self = argv[0], .put = put_safe};
	rep.em = &em;

	while ((c = getopt_long(argc, argv, "qhj:", opts, NULL)) != -1) {
		switch (c) {
		case 'J': rep.json = true; break;
		case 'q': rep.quiet = true; pass_add(&ec, "-q", NULL); break;
		case 'E': rep.emit = true; pass_add(&ec, "--emit", NULL); break;
		case 's': rep.strict = true; pass_add(&ec, "--strict", NULL); break;
		case 'O': o.one_chain = true; break;
		case 'D': o.dedup = true; pass_add(&ec, "--dedup", NULL); break;
		case 'F': o.follow = true; break;
		case 'K':
		case 'P':
		case 'W':
			if ((ret = add_key(c, optarg)))
				goto out;
			pass_add(&ec, c == 'K' ? "--verify-key" : c == 'P' ? "--pubkey" : "--witness", optarg);
			break;
		case 'e':
			if ((ret = add_anchor(optarg, &anchors, &n_anchors)))
				goto out;
			break;
		case 'f': {
			struct al_vanchor a;
			const char *why = parse_anchor(optarg, false, &a);
			if (why) {
				ret = refuse("--from", optarg, why);
				goto out;
			}
			o.from_seq = a.seq;
			memcpy(o.from_hash, a.hash, AL_HASH_LEN);
			o.has_from = true;
			break;
		}
		case 'j': {
			uint64_t v;
			if ((ret = parse_num("--jobs", optarg, 1024, "a number of threads", &v)))
				goto out;
			o.threads = (unsigned)v;
			pass_add(&ec, "--jobs", optarg);
			break;
		}
		case 'm': {
			uint64_t v;
			if ((ret = parse_num("--min-version", optarg, 255, "a format version", &v)))
				goto out;
			o.min_version = (unsigned)v;
			pass_add(&ec, "--min-version", optarg);
			break;
		}
		case 'X':
		case 'Y':
		case 'Z':
			if (prove_mode) {
				ret = refuse("--prove", optarg, "one of --prove, --prove-consistency, --check-proof");
				goto out;
			}
			prove_mode = c;
			if (c == 'Z') {
				bundle = optarg;
			} else if (c == 'X') {
				if ((ret = parse_num("--prove", optarg, AL_INT_MAX, "a seq", &prove_a)))
					goto out;
			} else {
				const char *colon = strchr(optarg, ':');
				if (!colon || cli_parse_udec(optarg, (size_t)(colon - optarg), AL_INT_MAX, &prove_a) < 0 ||
				    cli_parse_udec(colon + 1, strlen(colon + 1), AL_INT_MAX, &prove_b) < 0 || prove_a == 0 ||
				    prove_a > prove_b) {
					ret = refuse("--prove-consistency", optarg,
						     "wants SIZE1:SIZE2, decimal tree sizes with 1 <= SIZE1 <= SIZE2");
					goto out;
				}
			}
			break;
		case OPT_WITNESS_KEY:
			if ((ret = add_witness_key(optarg)))
				goto out;
			pass_add(&ec, "--witness-key", optarg);
			break;
		case 'o': prove_out = optarg; break;
		case 'G':
			if (registry_dir) {
				ret = refuse("--registry", optarg, "is given once");
				goto out;
			}
			registry_dir = optarg;
			break;
		case 0x1b0:
			format_arg = optarg;
			if (emit_parse_format(optarg, &em.fmt) < 0) {
				ret = refuse("--format", optarg, "wants raw, ecs or ocsf");
				goto out;
			}
			pass_add(&ec, "--format", optarg);
			break;
		case 'S': state_path = optarg; break;
		case 0x1c0: each_chain = true; break;
		case 0x1c1: state_dir = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		case 0x1a0: attest_file = optarg; break;
		case 0x1a1:
			if (strlen(optarg) != 64 || strspn(optarg, "0123456789abcdef") != 64) {
				ret = refuse("--attest-nonce", optarg, "wants 64 lowercase hex digits");
				goto out;
			}
			(void)al_unhex((const uint8_t *)optarg, 64, ao.nonce);
			ao.has_nonce = true;
			break;
		case 0x1a2: {
			uint64_t v;
			if ((ret = parse_num("--attest-max-age", optarg, UINT64_MAX / 1000000000u, "seconds", &v)))
				goto out;
			ao.max_age = v ? v * 1000000000u : 1;
			break;
		}
		case 'V': return cli_version("auditlog-verify");
		default: return cli_bad_option("auditlog-verify", "qhj:", opts, argv);
		}
	}
	if (each_chain || state_dir) {
		ret = each_chain_check(&ec, each_chain, state_dir, o.follow, rep.emit,
				       state_path || o.has_from || n_anchors || registry_dir || rep.json ||
					       o.one_chain || prove_mode || prove_out || attest_file ||
					       ao.has_nonce || ao.max_age,
				       argv + optind, argc - optind);
		if (!ret)
			ret = each_chain_run(&ec);
		rep.emit = false; /* the tails emitted: nothing of this process's to save */
		goto out;
	}
	if ((ao.has_nonce || ao.max_age) && !attest_file) {
		fprintf(stderr, "auditlog-verify: --attest-nonce and --attest-max-age go with --attest\n");
		ret = 2;
		goto out;
	}
	if (attest_file) {
		if (n_vkeys == 0 || prove_mode || o.follow || rep.json || rep.emit ||
		    (optind < argc && strcmp(argv[optind], "-") == 0)) {
			fprintf(stderr, "auditlog-verify: --attest FILE wants --verify-key KEY and the log's files "
					"(optional), and not --json, --emit, --follow or a proof option\n");
			ret = 2;
			goto out;
		}
		if (optind < argc && (r = list_inputs(argv + optind, argc - optind, &paths, &n)) < 0) {
			ret = 2;
			goto out;
		}
		if (n)
			qsort(paths, n, sizeof(char *), cmp_str);
		ao.vkeys = vkeys;
		ao.n_vkeys = n_vkeys;
		ao.quiet = rep.quiet;
		ret = attest_verify(attest_file, paths, n, &ao);
		goto out;
	}
	if (prove_out && (prove_mode == 0 || prove_mode == 'Z')) {
		fprintf(stderr, "auditlog-verify: --out goes with --prove or --prove-consistency\n");
		ret = 2;
		goto out;
	}
	if (prove_mode == 'Z') {
		if (optind < argc || n_pubkeys == 0) {
			fprintf(stderr, "auditlog-verify: --check-proof BUNDLE wants --pubkey FILE and no log\n");
			ret = 2;
			goto out;
		}
		ret = check_proof(bundle, pubkeys, n_pubkeys, wkeys, n_wkeys);
		goto out;
	}
	if (prove_mode && (optind >= argc || o.follow || strcmp(argv[optind], "-") == 0)) {
		fprintf(stderr, "auditlog-verify: --prove and --prove-consistency want the log's files\n");
		ret = 2;
		goto out;
	}
	if (prove_mode) {
		if ((r = list_inputs(argv + optind, argc - optind, &paths, &n)) < 0) {
			ret = 2;
			goto out;
		}
		ret = prove_mode == 'X' ? prove_inclusion(paths, n, prove_a, prove_out, witness, n_witness)
					: prove_consistency(paths, n, prove_a, prove_b, prove_out, witness, n_witness);
		goto out;
	}
	if (optind >= argc) {
		fputs(usage, stderr);
		ret = 2;
		goto out;
	}
	o.anchors = anchors;
	o.n_anchors = n_anchors;
	o.has_expect_head = n_anchors > 0; /* (the summary's "checked against a head") */
	o.vkeys = vkeys;
	o.n_vkeys = n_vkeys;
	o.pubkeys = pubkeys;
	o.n_pubkeys = n_pubkeys;
	o.witness = witness;
	o.n_witness = n_witness;
	o.wkeys = wkeys;
	o.n_wkeys = n_wkeys;
	/* knobs for tests, as strict as the options: the progress bar's
	 * threshold (AUDITLOG_VERIFY_PROGRESS_MIN, bytes; default 64 MiB) and the
	 * workers' block size (AUDITLOG_VERIFY_BLOCK, bytes: a small log in many
	 * blocks; 0 the default). Empty is unset. */
	uint64_t bar_min = 64ull << 20;
	const char *pm = getenv("AUDITLOG_VERIFY_PROGRESS_MIN"), *bs = getenv("AUDITLOG_VERIFY_BLOCK");
	if (pm && *pm && (ret = parse_num("AUDITLOG_VERIFY_PROGRESS_MIN", pm, UINT64_MAX, "a number of bytes",
					  &bar_min)))
		goto out;
	if (bs && *bs && (ret = parse_num("AUDITLOG_VERIFY_BLOCK", bs, 1u << 30, "a number of bytes", &o.block)))
		goto out;
	if (rep.emit && rep.json) {
		fprintf(stderr, "auditlog-verify: --emit and --json both want stdout\n");
		ret = 2;
		goto out;
	}
	rep.out = rep.emit ? stderr : stdout;
	if (rep.emit)
		o.on_record = on_record;
	em.fd = STDOUT_FILENO;
	em.check_seq = rep.emit && o.follow;
	if ((format_arg && !rep.emit) || (state_path && (!rep.emit || !o.follow || o.has_from))) {
		fprintf(stderr, "auditlog-verify: %s\n",
			format_arg && !rep.emit ? "--format goes with --emit"
						: "--state goes with --follow --emit, and not with --from");
		ret = 2;
		goto out;
	}
	if (state_path) {
		char err[512];
		struct tail_state *ts = NULL;
		if ((r = tail_state_open(state_path, argv + optind, argc - optind, &ts, err, sizeof(err))) < 0) {
			fprintf(stderr, "auditlog-verify: --state ");
			put_safe(stderr, state_path);
			fprintf(stderr, ": %s\n", err);
			ret = 2;
			goto out;
		}
		em.tail = ts;
		if (r == 1) { /* resume after the last record emitted before */
			tail_resume(ts, &o.from_seq, o.from_hash, em.chain_id);
			o.has_from = true;
			em.skipping = true;
			em.skip_seq = o.from_seq;
			em.have_seq = true;
			em.last_seq = o.from_seq;
			memcpy(em.last_hash, o.from_hash, AL_HASH_LEN);
		}
	}
	/* "-": the log on standard input, as a stream (cat of a rotated set in
	 * order, or a pipe from wherever the trail is kept) */
	bool from_stdin = false;
	for (int i = optind; i < argc; i++)
		from_stdin |= strcmp(argv[i], "-") == 0;
	if (from_stdin && (argc - optind != 1 || o.follow)) {
		fprintf(stderr, "auditlog-verify: - (standard input) is the only input when given, and not "
				"with --follow\n");
		ret = 2;
		goto out;
	}
	if (o.follow) {
		struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: the poll wakes */
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	if (from_stdin)
		goto verify;
	/* the directories given: the engine takes in a file the writer renamed
	 * in one after it was listed (al_vopts.dirs) */
	for (int i = optind; i < argc; i++) {
		if (al_verify_note_dir(argv[i], &dirs, &o.n_dirs, &dirs_cap) < 0) {
			ret = 2;
			goto out;
		}
	}
	o.dirs = dirs;
relist:
	/* --follow: a rotation may rename a file between the listing and the
	 * opening; list until two listings agree (names). A file named on the
	 * command line may be missing for that instant too: the writer renamed
	 * its active file and has not created the new one yet (DIR/NAME*). */
	for (int tries = 0;; tries++) {
		r = list_inputs_as(argv + optind, argc - optind, &paths, &n, o.follow && tries < 50);
		if (r == -ENOENT && o.follow && tries < 50) {
			usleep(20000);
			continue;
		}
		if (r < 0) {
			ret = 2;
			goto out;
		}
		if (!o.follow || tries == 50 || same_listing(argv + optind, argc - optind, paths, n))
			break;
		free_list(paths, n);
		paths = NULL;
		n = 0;
	}
	if (o.follow) {
		unsigned k = 0;
		for (unsigned i = 0; i < n; i++) {
			if (first_line_complete(paths[i]))
				paths[k++] = paths[i];
			else
				free(paths[i]);
		}
		n = k;
		if (n == 0) {
			/* the writer has created its file but not yet written its
			 * header (or nothing exists yet): wait for it, as for a
			 * partial last line; a stop ends it with nothing verified */
			free_list(paths, 0);
			paths = NULL;
			if (stop_requested) {
				ret = 0;
				goto out;
			}
			struct timespec ts = {0, 100 * 1000 * 1000};
			nanosleep(&ts, NULL);
			goto relist;
		}
	}
	if (n > 1) /* (an empty directory: paths is NULL, which qsort may not be given) */
		qsort(paths, n, sizeof(char *), cmp_str); /* stable output; order comes from the links */
verify:
	if (rep.json && !rep.findings)
		rep.findings = json_array();
	if (o.follow) {
		o.stop = &stop_requested;
		o.on_wait = on_wait;
	}
	/* the progress bar: a terminal on stderr, more than bar_min to read */
	uint64_t total_size = 0;
	for (unsigned i = 0; i < n; i++) {
		struct stat st;
		if (stat(paths[i], &st) == 0)
			total_size += (uint64_t)st.st_size;
	}
	if (!rep.quiet && !o.follow && isatty(STDERR_FILENO) && total_size > bar_min) {
		rep.bar = true;
		clock_gettime(CLOCK_MONOTONIC, &rep.t0);
		o.on_progress = on_progress;
	}

	struct al_vresult res;
	/* a resumed tail (--state), or one verifying again after a gap: the
	 * chain it has been passing on */
	o.follow_chain = o.follow && em.chain_id[0] ? em.chain_id : NULL;
	r = from_stdin ? verify_stdin(&o, &res, &rep) : al_verify_files(paths, n, &o, &res);
	bar_clear(&rep);
	if ((r == -ENOENT || r == -EAGAIN) && o.follow && follow_tries++ < 50) {
		/* A file was renamed between the listing and its opening (the
		 * engine opens every input before it reports anything), or
		 * (-EAGAIN) only a rotation's new file was listed, its header not
		 * yet written when it was opened: nothing to tail yet. */
		al_vresult_free(&res);
		free_list(paths, n);
		paths = NULL;
		n = 0;
		usleep(20000);
		goto relist;
	}
	if (r == 0 && em.gap && !signalled) {
		/* --follow --emit: records before em.gap_seq were not passed on.
		 * Verify again from the last line passed on: a file renamed while
		 * the inputs were listed is found this time; a jump that stays
		 * (damage, a deleted file) is let through on the fourth try. */
		if (++gap_tries >= 4) {
			em.accept = true;
			em.accept_after = em.last_seq;
		}
		fprintf(stderr, "auditlog-verify: --follow: records %" PRIu64 "..%" PRIu64 " were not passed on; "
				"verifying again from seq %" PRIu64 "%s\n", em.last_seq + 1, em.gap_seq - 1, em.last_seq,
			em.accept ? " (the last time: a gap that stays is passed on, its findings stand)" : "");
		usleep(100000); /* a rotation in progress settles */
		emit_save(&rep);
		o.has_from = true;
		o.from_seq = em.last_seq;
		memcpy(o.from_hash, em.last_hash, AL_HASH_LEN);
		em.skipping = true;
		em.skip_seq = em.last_seq;
		em.gap = false;
		stop_requested = 0;
		al_vresult_free(&res);
		free_list(paths, n);
		paths = NULL;
		n = 0;
		goto relist;
	}
	if (r < 0) {
		if (r == -EXDEV) {
			fprintf(stderr, "auditlog-verify: --follow tails one chain, and the inputs hold several "
					"that could be it (each at a writer's active name, not <name>.<time>-<seq>, "
					"or none at one), and the names do not say which is the writer's:");
			for (unsigned i = 0; i < res.chains; i++)
				if (res.chain[i].chain_id[0])
					fprintf(stderr, " %s", res.chain[i].chain_id);
			fprintf(stderr, "; give the files of one writer: its active file and its rotated "
					"ones (DIR/NAME*, e.g. softtoken-0.log*), and one tail for each\n");
		} else if (r == -EIDRM && !res.chains) {
			fprintf(stderr, "auditlog-verify: --follow: chain %s, which this tail passes on, is no "
					"longer among the inputs\n", em.chain_id);
		} else if (r == -EIDRM) {
			fprintf(stderr, "auditlog-verify: --follow: the log's active file holds chain %s, not "
					"chain %s, which this tail passes on (%s): the writer began a new chain (its "
					"header's reason says why). Verify the old chain's files without --follow; "
					"%s\n",
				res.chain[0].chain_id, em.chain_id,
				em.tail ? "its --state file names it" : "its lines so far",
				em.tail ? "remove the --state file to tail the new one" : "start the tail again");
		} else if (r == -EAGAIN) {
			fprintf(stderr, "auditlog-verify: --follow: no file among the inputs begins with a log's "
					"header, listed again for a second: nothing to tail\n");
		} else if (r == -ELOOP && !res.err_path) {
			fprintf(stderr, "auditlog-verify: --follow: every file of the chain has a successor among "
					"the inputs (their headers' links loop): no file to tail\n");
		} else if (res.err_path) { /* escaped: a listed name is any bytes */
			fputs("auditlog-verify: cannot read ", stderr);
			put_safe(stderr, res.err_path);
			fprintf(stderr, ": %s%s\n", strerror(-r),
				r == -ELOOP    ? " (a symlink: never followed, name the file it points to)"
				: r == -EINVAL ? " (not a regular file)"
				: r == -ESTALE ? " (replaced while it was being verified: run again)"
					       : "");
		} else
			fprintf(stderr, "auditlog-verify: cannot read the input: %s\n", strerror(-r));
		al_vresult_free(&res);
		json_decref(rep.findings);
		ret = 2;
		goto out;
	}
	ret = 0;
	if (registry_dir && o.follow) {
		fprintf(stderr, "auditlog-verify: --registry is not for --follow\n");
		ret = 2;
	} else if (registry_dir) {
		ret = registry_check(registry_dir, &o, &res, &reg);
	}
	if (ret) {
		al_vresult_free(&res);
		json_decref(rep.findings);
		goto out;
	}
	uint64_t integrity = 0, total = 0;
	for (int k = 0; k < AL_V__MAX; k++) {
		total += res.findings[k];
		if (al_vclass_is_integrity((enum al_vclass)k, rep.strict))
			integrity += res.findings[k];
	}
	/* Nothing verified is no proof: an empty directory, an empty pipe (the
	 * command feeding it failed), a trail deleted whole. Not "intact". */
	bool empty = !o.follow && res.records == 0 && integrity == 0;
	const char *verdict = integrity ? "findings" : empty ? "empty" : "intact";

	if (rep.json) {
		json_t *j = json_object(), *chains = json_array(), *counts = json_object();
		json_object_set_new(j, "verdict", json_string(verdict));
		json_object_set_new(j, "files", json_integer(res.files));
		json_object_set_new(j, "records", json_integer((json_int_t)res.records));
		json_object_set_new(j, "bytes", json_integer((json_int_t)res.bytes));
		for (unsigned i = 0; i < res.chains; i++) {
			struct al_vchain *ch = &res.chain[i];
			char hex[65] = {0};
			al_hex(ch->head_hash, AL_HASH_LEN, hex);
			json_array_append_new(chains, json_pack("{s:s,s:i,s:I,s:I,s:I,s:I,s:s,s:s,s:s,s:i,s:i}",
				"chain_id", ch->chain_id, "files", ch->files, "records", (json_int_t)ch->records,
				"events", (json_int_t)ch->events, "first_seq", (json_int_t)ch->first_seq,
				"last_seq", (json_int_t)ch->last_seq, "head_hash", hex,
				"first_timestamp", ch->first_ts, "last_timestamp", ch->last_ts,
				"min_version", ch->min_version, "max_version", ch->max_version));
			json_t *jc = json_array_get(chains, json_array_size(chains) - 1);
			json_object_set_new(jc, "seals", json_integer((json_int_t)ch->seals));
			json_object_set_new(jc, "checkpoints", json_integer((json_int_t)ch->checkpoints));
			json_object_set_new(jc, "unsigned_tail", json_integer((json_int_t)ch->unsigned_tail));
			json_object_set_new(jc, "tree_size", json_integer((json_int_t)ch->tree_size));
		}
		for (int k = 0; k < AL_V__MAX; k++)
			json_object_set_new(counts, al_vclass_name((enum al_vclass)k),
					    json_integer((json_int_t)res.findings[k]));
		json_object_set_new(j, "chains", chains);
		json_object_set_new(j, "counts", counts);
		json_object_set_new(j, "findings", rep.findings);
		json_object_set_new(j, "expect_head_checked", json_boolean(o.has_expect_head));
		/* v2: what was and was not checked */
		json_object_set_new(j, "seals", json_integer((json_int_t)res.seals));
		json_object_set_new(j, "seals_checked", json_boolean(n_vkeys > 0));
		json_object_set_new(j, "seal_macs_verified", json_integer((json_int_t)res.seals_checked));
		json_object_set_new(j, "checkpoints", json_integer((json_int_t)res.checkpoints));
		json_object_set_new(j, "checkpoints_checked", json_boolean(n_pubkeys > 0));
		json_object_set_new(j, "checkpoint_signatures_verified",
				    json_integer((json_int_t)res.checkpoints_checked));
		json_object_set_new(j, "unsigned_tail", json_integer((json_int_t)res.unsigned_tail));
		json_object_set_new(j, "witnessed", json_integer((json_int_t)n_witness));
		if (n_wkeys) {
			json_t *arr = json_array();
			cosigned_report(NULL, arr);
			json_object_set_new(j, "cosigned", arr);
		}
		json_object_set_new(j, "note", json_string(threat_note));
		if (registry_dir)
			registry_json(j, &reg, n_vkeys > 0);
		json_dumpf(j, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
		putchar('\n');
		json_decref(j);
	} else if (!rep.quiet) {
		fprintf(rep.out, "%s: %u file(s), %u chain(s), %" PRIu64 " records, %" PRIu64 " bytes\n", verdict,
		       res.files, res.chains, res.records, res.bytes);
		for (unsigned i = 0; i < res.chains; i++) {
			struct al_vchain *ch = &res.chain[i];
			const char *id = ch->chain_id[0] ? ch->chain_id : "(no header)";
			char hex[65] = {0};
			if (!ch->records) { /* files with no header and no record (a README, junk) */
				fprintf(rep.out, "chain %s: %u file(s), no records\n", id, ch->files);
				continue;
			}
			al_hex(ch->head_hash, AL_HASH_LEN, hex);
			fprintf(rep.out, "chain %s: %u file(s), seq %" PRIu64 "..%" PRIu64 ", %s .. %s, v%u..v%u\n",
			       id, ch->files, ch->first_seq, ch->last_seq, ch->first_ts, ch->last_ts,
			       ch->min_version, ch->max_version);
			fprintf(rep.out, "  head %" PRIu64 ":%s\n", ch->last_seq, hex);
		}
		if (total) {
			fprintf(rep.out, "findings:");
			for (int k = 0; k < AL_V__MAX; k++)
				if (res.findings[k])
					fprintf(rep.out, " %s %" PRIu64, al_vclass_name((enum al_vclass)k), res.findings[k]);
			fputc('\n', rep.out);
		}
		if (res.seals || res.checkpoints || n_vkeys || n_pubkeys || n_witness) {
			fprintf(rep.out, "v2: %" PRIu64 " seal(s), ", res.seals);
			if (n_vkeys)
				fprintf(rep.out, "%" PRIu64 " MAC(s) verified", res.seals_checked);
			else
				fprintf(rep.out, "MACs not checked (no --verify-key)");
			fprintf(rep.out, "; %" PRIu64 " checkpoint(s), ", res.checkpoints);
			if (n_pubkeys)
				fprintf(rep.out, "%" PRIu64 " signature(s) verified, unsigned tail %" PRIu64 " record(s)",
					res.checkpoints_checked, res.unsigned_tail);
			else
				fprintf(rep.out, "signatures not checked (no --pubkey)");
			fprintf(rep.out, "; %u witnessed checkpoint(s)\n", n_witness);
			cosigned_report(rep.out, NULL);
			if (rep.emit && res.pending)
				fprintf(rep.out, "v2: %" PRIu64 " verified line(s) not emitted: no seal or checkpoint "
					"covers them\n", res.pending);
		}
		if (registry_dir)
			registry_print(rep.out, &reg, n_vkeys > 0);
		if (!o.has_expect_head && !n_vkeys && !n_pubkeys && !n_witness)
			fprintf(rep.out, "note: %s\n", threat_note);
	}
	al_vresult_free(&res);
	ret = integrity ? 1 : empty ? 2 : 0;
	if (empty && !rep.quiet)
		fprintf(stderr, "auditlog-verify: the inputs hold no log record: nothing was verified\n");
out:
	free(ec.pass);
	if (rep.emit) { /* the last lines, and (--state) their position */
		emit_save(&rep);
		if (emit_failed)
			ret = 2;
	}
	tail_state_free(em.tail);
	for (unsigned i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	free(anchors);
	if (vkeys)
		OPENSSL_cleanse(vkeys, n_vkeys * sizeof(*vkeys));
	free(vkeys);
	free(pubkeys);
	free(wkeys);
	al_witness_free(witness, n_witness);
	al_registry_free(&reg);
	free_list(dirs, o.n_dirs);
	return ret;
}
