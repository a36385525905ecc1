/* SPDX-License-Identifier: MIT */
/*
 * auditlog-verify: prove audit logs intact, or say where and how they were
 * altered. Exit 0 intact, 1 integrity finding, 2 usage or I/O error.
 * See auditlog-verify --help and docs/auditlog-verify.md.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "verify.h"

static const char usage[] =
	"usage: auditlog-verify [options] PATH...\n"
	"\n"
	"Verify audit logs written by libauditlog: files, or directories of rotated files.\n"
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
	"  --min-version N        report records below format version N\n"
	"  --strict               count repaired crash damage as a finding\n"
	"  -h, --help             this text\n"
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
};

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

/* PATH: a file, or a directory whose regular files (not dot files) are taken. */
static int add_path(const char *path, char ***list, unsigned *n, unsigned *cap)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(path);
		struct dirent *e;
		if (!d)
			return -errno;
		while ((e = readdir(d))) {
			char *p;
			struct stat fs;
			if (e->d_name[0] == '.')
				continue;
			if (asprintf(&p, "%s/%s", path, e->d_name) < 0) {
				closedir(d);
				return -ENOMEM;
			}
			if (stat(p, &fs) < 0 || !S_ISREG(fs.st_mode)) {
				free(p);
				continue;
			}
			if (*n == *cap) {
				*cap = *cap ? *cap * 2 : 16;
				*list = realloc(*list, *cap * sizeof(char *));
			}
			(*list)[(*n)++] = p;
		}
		closedir(d);
		return 0;
	}
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		*list = realloc(*list, *cap * sizeof(char *));
	}
	(*list)[(*n)++] = strdup(path);
	return 0;
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

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},       {"quiet", no_argument, NULL, 'q'},
		{"emit", no_argument, NULL, 'E'},
		{"expect-head", required_argument, NULL, 'e'},
		{"min-version", required_argument, NULL, 'm'},
		{"from", required_argument, NULL, 'f'},
		{"strict", no_argument, NULL, 's'},     {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct report rep = {0};
	struct al_vopts o = {.on_finding = on_finding, .ctx = &rep};
	char **paths = NULL;
	unsigned n = 0, cap = 0;
	int c, r;

	while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (c) {
		case 'j': rep.json = true; break;
		case 'q': rep.quiet = true; break;
		case 'E': rep.emit = true; break;
		case 's': rep.strict = true; break;
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
		default: fputs(usage, stderr); return 2;
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
	for (int i = optind; i < argc; i++) {
		r = add_path(argv[i], &paths, &n, &cap);
		if (r < 0) {
			fprintf(stderr, "auditlog-verify: ");
			put_safe(stderr, argv[i]);
			fprintf(stderr, ": %s\n", strerror(-r));
			return 2;
		}
	}
	qsort(paths, n, sizeof(char *), cmp_str); /* stable output; order comes from the links */
	if (rep.json)
		rep.findings = json_array();

	struct al_vresult res;
	r = al_verify_files(paths, n, &o, &res);
	if (r < 0) {
		fprintf(stderr, "auditlog-verify: cannot read the input: %s\n", strerror(-r));
		return 2;
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
	for (unsigned i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return integrity ? 1 : 0;
}
