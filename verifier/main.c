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

#include "cli.h"
#include "verify.h"

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
	"  --expect-head SEQ:HASH the record SEQ must exist with this hash (a head exported\n"
	"                         elsewhere: catches a cut tail or a recomputed chain)\n"
	"  --from SEQ:HASH        start at a record verified before (a checkpoint): files\n"
	"                         wholly before it are not read, records before it not checked\n"
	"  --follow               then keep verifying the log as it grows, across\n"
	"                         rotations, until SIGINT or SIGTERM (with --emit: a\n"
	"                         pipeline gets each verified line as it is written)\n"
	"  --min-version N        report records below format version N\n"
	"  --strict               count repaired crash damage as a finding\n"
	"  -j, --jobs N           check large files with N threads (default 0: one per\n"
	"                         CPU; 1: this thread alone); the findings do not change\n"
	"  -h, --help             this text\n"
	"  --version              the version\n"
	"\n"
	"Exit status: 0 intact, 1 integrity finding, 2 usage or I/O error.\n";

static const char threat_note[] =
	"A v0/v1 chain detects any change made without recomputing the chain. Someone who can "
	"write the files can recompute it from an edit to the end, or cut the tail at a line "
	"boundary: only a head exported elsewhere (--expect-head SEQ:HASH) catches that.";

/* Write s with control and bidirectional-override characters made visible, so
 * that a log cannot rewrite the terminal or reorder what the auditor reads. */
static void put_safe(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		unsigned c = *p;
		if (c < 0x20 || c == 0x7f) {
			fprintf(out, "\\x%02x", c);
			p++;
			continue;
		}
		/* U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069 */
		if ((c == 0xd8 && p[1] == 0x9c) ||
		    (c == 0xe2 && p[1] == 0x80 && (p[2] == 0x8e || p[2] == 0x8f || (p[2] >= 0xaa && p[2] <= 0xae))) ||
		    (c == 0xe2 && p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9)) {
			unsigned cp = c == 0xd8 ? 0x061c : ((c & 0x0f) << 12) | ((p[1] & 0x3f) << 6) | (p[2] & 0x3f);
			fprintf(out, "\\u%04x", cp);
			p += c == 0xd8 ? 2 : 3;
			continue;
		}
		fputc((int)c, out);
		p++;
	}
}

struct report {
	bool json, quiet, strict, emit;
	FILE *out; /* the human report: stdout, or stderr with --emit */
	json_t *findings;
	unsigned long shown;
	/* progress bar (stderr on a TTY, inputs > 64 MiB) */
	bool bar, bar_drawn;
	struct timespec t0, last_draw;
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
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

static void on_wait(void *ctx)
{
	(void)ctx;
	fflush(stdout); /* --follow --emit: what verified so far reaches the pipe now */
}

static void on_finding(void *ctx, const struct al_finding *f)
{
	struct report *r = ctx;
	if (r->json) {
		json_t *o = json_object();
		json_object_set_new(o, "class", json_string(al_vclass_name(f->cls)));
		json_object_set_new(o, "file", json_string(f->file));
		json_object_set_new(o, "line", json_integer((json_int_t)f->line));
		json_object_set_new(o, "offset", json_integer((json_int_t)f->offset));
		json_object_set_new(o, "seq", f->has_seq ? json_integer((json_int_t)f->seq) : json_null());
		json_object_set_new(o, "integrity", json_boolean(al_vclass_is_integrity(f->cls, r->strict)));
		json_object_set_new(o, "message", json_string(f->msg));
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
	(void)ctx;
	fwrite(line, 1, len, stdout);
	putchar('\n');
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
static int list_inputs(char **args, int nargs, char ***ret, unsigned *ret_n)
{
	char **paths = NULL;
	unsigned n = 0, cap = 0;

	for (int i = 0; i < nargs; i++) {
		int r = al_verify_add_path(args[i], &paths, &n, &cap);
		if (r < 0) {
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

/* Does a second listing name the same files? (A rotation adds a name.) */
static bool same_listing(char **args, int nargs, char **paths, unsigned n)
{
	char **again = NULL;
	unsigned m = 0;
	bool same;

	if (list_inputs(args, nargs, &again, &m) < 0)
		return false;
	same = m == n;
	for (unsigned i = 0; same && i < n; i++)
		same = strcmp(paths[i], again[i]) == 0;
	free_list(again, m);
	return same;
}

/* SEQ:HASH */
static int parse_seq_hash(const char *s, uint64_t *ret_seq, uint8_t ret_hash[AL_HASH_LEN])
{
	char *end;
	errno = 0;
	unsigned long long seq = strtoull(s, &end, 10);
	if (errno || end == s || *end != ':' || strlen(end + 1) != 64 ||
	    al_unhex((const uint8_t *)end + 1, 64, ret_hash) < 0)
		return -EINVAL;
	*ret_seq = seq;
	return 0;
}

/* The log on standard input, fed to the engine as it is read. */
static int verify_stdin(const struct al_vopts *o, struct al_vresult *res)
{
	static uint8_t buf[1 << 20];
	struct al_vstream *st;
	int r = al_vstream_new("(stdin)", o, res, &st);

	if (r < 0)
		return r;
	for (;;) {
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
		{"strict", no_argument, NULL, 's'},     {"help", no_argument, NULL, 'h'},
		{"follow", no_argument, NULL, 'F'},
		{NULL, 0, NULL, 0},
	};
	opterr = 0; /* a bad option gets one line: cli_bad_option */
	struct report rep = {0};
	struct al_vopts o = {.on_finding = on_finding, .ctx = &rep};
	char **paths = NULL;
	unsigned n = 0;
	int c, r, ret, follow_tries = 0;

	while ((c = getopt_long(argc, argv, "qhj:", opts, NULL)) != -1) {
		switch (c) {
		case 'J': rep.json = true; break;
		case 'q': rep.quiet = true; break;
		case 'E': rep.emit = true; break;
		case 's': rep.strict = true; break;
		case 'F': o.follow = true; break;
		case 'e':
			if (parse_seq_hash(optarg, &o.expect_seq, o.expect_hash) < 0) {
				fprintf(stderr, "auditlog-verify: --expect-head wants SEQ:HASH (64 hex digits)\n");
				return 2;
			}
			o.has_expect_head = true;
			break;
		case 'f':
			if (parse_seq_hash(optarg, &o.from_seq, o.from_hash) < 0) {
				fprintf(stderr, "auditlog-verify: --from wants SEQ:HASH (64 hex digits)\n");
				return 2;
			}
			o.has_from = true;
			break;
		case 'j': {
			char *end;
			errno = 0;
			unsigned long v = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || optarg[0] == '-' || v > 1024) {
				fprintf(stderr, "auditlog-verify: --jobs wants a number of threads, 0 to 1024\n");
				return 2;
			}
			o.threads = (unsigned)v;
			break;
		}
		case 'm': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || end == optarg || v > 255) {
				fprintf(stderr, "auditlog-verify: --min-version wants a number\n");
				return 2;
			}
			o.min_version = (unsigned)v;
			break;
		}
		case 'h': fputs(usage, stdout); return 0;
		case 'V': return cli_version("auditlog-verify");
		default: return cli_bad_option("auditlog-verify", "qhj:", opts, argv);
		}
	}
	if (optind >= argc) {
		fputs(usage, stderr);
		return 2;
	}
	if (rep.emit && rep.json) {
		fprintf(stderr, "auditlog-verify: --emit and --json both want stdout\n");
		return 2;
	}
	rep.out = rep.emit ? stderr : stdout;
	if (rep.emit)
		o.on_record = on_record;
	/* "-": the log on standard input, as a stream (cat of a rotated set in
	 * order, or a pipe from wherever the trail is kept) */
	bool from_stdin = false;
	for (int i = optind; i < argc; i++)
		from_stdin |= strcmp(argv[i], "-") == 0;
	if (from_stdin && (argc - optind != 1 || o.follow)) {
		fprintf(stderr, "auditlog-verify: - (standard input) is the only input when given, and not "
				"with --follow\n");
		return 2;
	}
	if (from_stdin)
		goto verify;
relist:
	/* --follow: a rotation may rename a file between the listing and the
	 * opening; list until two listings agree (names). */
	for (int tries = 0;; tries++) {
		r = list_inputs(argv + optind, argc - optind, &paths, &n);
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
			fprintf(stderr, "auditlog-verify: --follow: no complete record to start from yet\n");
			ret = 2;
			goto out;
		}
	}
	qsort(paths, n, sizeof(char *), cmp_str); /* stable output; order comes from the links */
verify:
	if (rep.json && !rep.findings)
		rep.findings = json_array();
	if (o.follow) {
		struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: the poll wakes */
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		o.stop = &stop_requested;
		o.on_wait = on_wait;
	}
	/* the progress bar: a terminal on stderr, more than 64 MiB to read
	 * (AUDITLOG_VERIFY_PROGRESS_MIN overrides the size, for tests) */
	uint64_t total_size = 0, bar_min = 64ull << 20;
	const char *pm = getenv("AUDITLOG_VERIFY_PROGRESS_MIN");
	if (pm && *pm) {
		char *end;
		unsigned long long v = strtoull(pm, &end, 10);
		if (!*end)
			bar_min = v;
	}
	/* the workers' block size (AUDITLOG_VERIFY_BLOCK=BYTES, for tests: a
	 * small log in many blocks) */
	const char *bs = getenv("AUDITLOG_VERIFY_BLOCK");
	if (bs && *bs) {
		char *end;
		unsigned long long v = strtoull(bs, &end, 10);
		if (!*end)
			o.block = v;
	}
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
	r = from_stdin ? verify_stdin(&o, &res) : al_verify_files(paths, n, &o, &res);
	bar_clear(&rep);
	if (r == -ENOENT && o.follow && follow_tries++ < 50) {
		/* A file was renamed between the listing and its opening (the
		 * engine opens every input before it reports anything). */
		al_vresult_free(&res);
		free_list(paths, n);
		paths = NULL;
		n = 0;
		usleep(20000);
		goto relist;
	}
	if (r < 0) {
		if (r == -EXDEV)
			fprintf(stderr, "auditlog-verify: --follow wants the files of one chain (found several)\n");
		else
			fprintf(stderr, "auditlog-verify: cannot read the input: %s\n", strerror(-r));
		al_vresult_free(&res);
		json_decref(rep.findings);
		ret = 2;
		goto out;
	}
	uint64_t integrity = 0, total = 0;
	for (int k = 0; k < AL_V__MAX; k++) {
		total += res.findings[k];
		if (al_vclass_is_integrity((enum al_vclass)k, rep.strict))
			integrity += res.findings[k];
	}
	const char *verdict = integrity ? "findings" : "intact";

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
		}
		for (int k = 0; k < AL_V__MAX; k++)
			json_object_set_new(counts, al_vclass_name((enum al_vclass)k),
					    json_integer((json_int_t)res.findings[k]));
		json_object_set_new(j, "chains", chains);
		json_object_set_new(j, "counts", counts);
		json_object_set_new(j, "findings", rep.findings);
		json_object_set_new(j, "expect_head_checked", json_boolean(o.has_expect_head));
		json_object_set_new(j, "note", json_string(threat_note));
		json_dumpf(j, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
		putchar('\n');
		json_decref(j);
	} else if (!rep.quiet) {
		fprintf(rep.out, "%s: %u file(s), %u chain(s), %" PRIu64 " records, %" PRIu64 " bytes\n", verdict,
		       res.files, res.chains, res.records, res.bytes);
		for (unsigned i = 0; i < res.chains; i++) {
			struct al_vchain *ch = &res.chain[i];
			char hex[65] = {0};
			al_hex(ch->head_hash, AL_HASH_LEN, hex);
			fprintf(rep.out, "chain %s: %u file(s), seq %" PRIu64 "..%" PRIu64 ", %s .. %s, v%u..v%u\n",
			       ch->chain_id[0] ? ch->chain_id : "(no header)", ch->files, ch->first_seq,
			       ch->last_seq, ch->first_ts, ch->last_ts, ch->min_version, ch->max_version);
			fprintf(rep.out, "  head %" PRIu64 ":%s\n", ch->last_seq, hex);
		}
		if (total) {
			fprintf(rep.out, "findings:");
			for (int k = 0; k < AL_V__MAX; k++)
				if (res.findings[k])
					fprintf(rep.out, " %s %" PRIu64, al_vclass_name((enum al_vclass)k), res.findings[k]);
			fputc('\n', rep.out);
		}
		if (!o.has_expect_head)
			fprintf(rep.out, "note: %s\n", threat_note);
	}
	al_vresult_free(&res);
	ret = integrity ? 1 : 0;
out:
	for (unsigned i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return ret;
}
