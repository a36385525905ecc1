/* SPDX-License-Identifier: MIT */
/*
 * The verification engine against logs the library wrote: clean logs (one
 * file, a rotated set, mixed versions) verify without a finding; each
 * mutation is found with its class and place; --expect-head catches what a
 * v0/v1 chain alone cannot (a cut tail, a recomputed chain); repaired crash
 * damage is reported as recovered, not as tampering.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tu.h"
#include "verify.h"

struct got {
	uint64_t n[AL_V__MAX];
	uint64_t first_line[AL_V__MAX];
	char first_file[AL_V__MAX][256];
	char first_msg[AL_V__MAX][512];
};

static void collect(void *ctx, const struct al_finding *f)
{
	struct got *g = ctx;
	if (!g->n[f->cls]++) {
		g->first_line[f->cls] = f->line;
		snprintf(g->first_file[f->cls], sizeof(g->first_file[0]), "%s", f->file);
		snprintf(g->first_msg[f->cls], sizeof(g->first_msg[0]), "%s", f->msg);
	}
}

static void write_log(const char *path, unsigned version, unsigned n, uint64_t rotate)
{
	tu_write_log(path, version, n, rotate, 2, 0);
}

/* All regular files of dir, sorted. */
static unsigned list_dir(const char *dir, char ***ret)
{
	unsigned n = tu_count_files(dir), k = 0;
	char **p = calloc(n + 1, sizeof(char *));
	FILE *ls;
	char cmd[512], name[512];
	snprintf(cmd, sizeof(cmd), "ls -1 '%s'", dir);
	ls = popen(cmd, "r");
	while (ls && k < n && fgets(name, sizeof(name), ls)) {
		name[strcspn(name, "\n")] = 0;
		p[k++] = tu_path(dir, name);
	}
	if (ls)
		pclose(ls);
	*ret = p;
	return k;
}

static void free_list(char **p, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(p[i]);
	free(p);
}

static struct al_vresult run_verify(const char *dir, struct got *g, const struct al_vopts *base)
{
	char **paths;
	unsigned n = list_dir(dir, &paths);
	struct al_vopts o = base ? *base : (struct al_vopts){0};
	struct al_vresult res;
	memset(g, 0, sizeof(*g));
	o.on_finding = collect;
	o.ctx = g;
	assert_int_equal(al_verify_files(paths, n, &o, &res), 0);
	free_list(paths, n);
	return res;
}

static uint64_t total(const struct got *g)
{
	uint64_t t = 0;
	for (int k = 0; k < AL_V__MAX; k++)
		t += g->n[k];
	return t;
}

static void test_clean_logs(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct got g;

	write_log(path, 0, 3000, 64u << 10);
	write_log(path, 1, 3000, 64u << 10);
	struct al_vresult res = run_verify(dir, &g, NULL);
	assert_int_equal(total(&g), 0);
	assert_int_equal(res.chains, 1);
	assert_true(res.files >= 10);
	assert_int_equal(res.chain[0].events, 6000);
	assert_int_equal(res.chain[0].min_version, 0);
	assert_int_equal(res.chain[0].max_version, 1);
	assert_int_equal(res.chain[0].first_seq, 0);
	assert_int_equal(res.chain[0].last_seq, res.records - 1);
	al_vresult_free(&res);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* A fresh rotated log in dir; returns the name of its third file (a middle one). */
static char *fixture(const char *dir)
{
	char *path = tu_path(dir, "audit.log");
	write_log(path, 1, 2000, 64u << 10);
	free(path);
	char **paths;
	unsigned n = list_dir(dir, &paths);
	assert_true(n >= 5);
	char *mid = strdup(paths[2]);
	free_list(paths, n);
	return mid;
}

/* Run a shell command with the file to mutate in $F. */
static void shell(const char *cmd, const char *file)
{
	assert_int_equal(setenv("F", file, 1), 0);
	assert_int_equal(system(cmd), 0);
}

static void mutation(const char *sed, enum al_vclass expect, bool also_only)
{
	char *dir = tu_mkdtemp();
	char *mid = fixture(dir);
	struct got g;

	shell(sed, mid);
	struct al_vresult res = run_verify(dir, &g, NULL);
	if (!g.n[expect])
		fail_msg("mutation '%s' not reported as %s", sed, al_vclass_name(expect));
	if (expect != AL_V_MISSING_FILE) /* that one is reported at the file that names it */
		assert_string_equal(g.first_file[expect], mid);
	if (also_only && total(&g) != g.n[expect])
		fail_msg("mutation '%s': other findings too", sed);
	al_vresult_free(&res);
	free(mid);
	tu_rmtree(dir);
	free(dir);
}

static void test_mutations(void **state)
{
	mutation("sed -i '10s/\"session\":\\([0-9]*\\)/\"session\":7\\1/' \"$F\"", AL_V_MODIFIED, true);
	mutation("sed -i '10d' \"$F\"", AL_V_DELETED, false);
	mutation("sed -i '10p' \"$F\"", AL_V_DUPLICATED, false);
	mutation("sed -i '10{h;d};11{G}' \"$F\"", AL_V_REORDERED, false);
	mutation("sed -i '10s/,\"seq\"/, \"seq\"/' \"$F\"", AL_V_NONCANONICAL, false);
	mutation("sed -i '10s/,\"seq\"/,\"seq\":1,\"seq\"/' \"$F\"", AL_V_NONCANONICAL, false);
	mutation("sed -i '10s/.*/garbage/' \"$F\"", AL_V_UNPARSEABLE, false);
	mutation("sed -i '10s/\"v\":1/\"v\":0/' \"$F\"", AL_V_VERSION, false);
	mutation("sed -i '10s/\"v\":1/\"v\":7/' \"$F\"", AL_V_VERSION, false);
	mutation("sed -i '10s/^/{\"@timestamp\":\"2026-01-01T00:00:00.000000000Z\",\"seq\":1,\"v\":1,\"type\":\"header\"}\\n/' \"$F\"",
		 AL_V_NONCANONICAL, false);
	/* a second, different record with a seq already seen */
	mutation("sed -i '10{p;s/\"session\":/\"session\":1/}' \"$F\"", AL_V_INSERTED, false);
	mutation("rm \"$F\"", AL_V_MISSING_FILE, true);
	mutation("truncate -s -200 \"$F\"", AL_V_TRUNCATED, false);
}

struct at_seq {
	uint64_t seq;
	uint8_t hash[AL_HASH_LEN];
	bool found;
};

static void grab(void *ctx, const struct al_parsed *p)
{
	struct at_seq *a = ctx;
	if (p->rec.f[AL_F_SEQ].u == a->seq) {
		memcpy(a->hash, p->hash, AL_HASH_LEN);
		a->found = true;
	}
}

/* --from: a daily job verifies only what is new. */
static void test_from_checkpoint(void **state)
{
	char *dir = tu_mkdtemp();
	char *mid = fixture(dir); /* ~2000 events in >= 5 files; mid is the third */
	struct at_seq a = {.seq = 1500};
	struct got g;

	tu_walk_chain(dir, "audit.log", grab, &a);
	assert_true(a.found);
	struct al_vopts o = {.has_from = true, .from_seq = a.seq};
	memcpy(o.from_hash, a.hash, AL_HASH_LEN);
	struct al_vresult res = run_verify(dir, &g, &o);
	assert_int_equal(total(&g), 0);
	assert_true(res.records < 600); /* only what follows the checkpoint */
	al_vresult_free(&res);

	/* damage before the checkpoint is not looked at again */
	shell("sed -i '10s/.*/garbage/' \"$F\"", mid);
	res = run_verify(dir, &g, &o);
	assert_int_equal(total(&g), 0);
	al_vresult_free(&res);
	/* ...but it is without --from */
	res = run_verify(dir, &g, NULL);
	assert_int_equal(g.n[AL_V_UNPARSEABLE], 1);
	al_vresult_free(&res);

	/* a wrong checkpoint hash, a checkpoint beyond the log */
	o.from_hash[0] ^= 1;
	res = run_verify(dir, &g, &o);
	assert_int_equal(g.n[AL_V_MODIFIED], 1);
	al_vresult_free(&res);
	o.from_seq = 1u << 30;
	res = run_verify(dir, &g, &o);
	assert_int_equal(g.n[AL_V_TRUNCATED], 1);
	al_vresult_free(&res);
	free(mid);
	tu_rmtree(dir);
	free(dir);
}

/* A chain's first file: its header must hash from the zero start. */
static void test_first_header(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct got g;
	size_t len;

	write_log(path, 1, 100, 0);
	uint8_t *buf = tu_read_file(path, &len);
	uint8_t *id = (uint8_t *)strstr((char *)buf, "\"file_id\":\"") + 11;
	*id = *id == '0' ? '1' : '0'; /* still canonical hex: only the hash tells */
	FILE *out = fopen(path, "w");
	assert_int_equal(fwrite(buf, 1, len, out), len);
	fclose(out);
	free(buf);
	struct al_vresult res = run_verify(dir, &g, NULL);
	assert_int_equal(g.n[AL_V_MODIFIED], 1);
	assert_int_equal(g.first_line[AL_V_MODIFIED], 1);
	al_vresult_free(&res);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* Every single-bit flip of a record is found. */
static void test_bit_flips(void **state)
{
	char *dir = tu_mkdtemp();
	char *mid = tu_path(dir, "audit.log"); /* a small log: one verification per flip */
	write_log(mid, 1, 40, 0);
	size_t len;
	uint8_t *orig = tu_read_file(mid, &len);
	/* the 20th line */
	size_t a = 0;
	for (unsigned k = 0; k < 19; k++)
		a = (size_t)((uint8_t *)memchr(orig + a, '\n', len - a) - orig) + 1;
	size_t b = (size_t)((uint8_t *)memchr(orig + a, '\n', len - a) - orig);
	unsigned missed = 0, flips = 0;
	for (size_t i = a; i < b; i++) { /* every bit of the line */
		for (int bit = 0; bit < 8; bit++) {
			orig[i] ^= (uint8_t)(1u << bit);
			int fd = open(mid, O_WRONLY | O_TRUNC | O_CLOEXEC);
			assert_int_equal(write(fd, orig, len), (ssize_t)len);
			close(fd);
			orig[i] ^= (uint8_t)(1u << bit);
			/* the one file, named (not the directory listed by ls each
			 * time: a fork a flip, most of this test's time under TSan) */
			struct got g = {0};
			struct al_vopts o = {.on_finding = collect, .ctx = &g};
			struct al_vresult res;
			assert_int_equal(al_verify_files(&mid, 1, &o, &res), 0);
			missed += total(&g) == 0;
			flips++;
			al_vresult_free(&res);
		}
	}
	assert_true(flips > 2000);
	assert_int_equal(missed, 0);
	free(orig);
	free(mid);
	tu_rmtree(dir);
	free(dir);
}

static struct al_vopts head_of(const char *dir)
{
	struct got g;
	struct al_vresult res = run_verify(dir, &g, NULL);
	struct al_vopts o = {.has_expect_head = true, .expect_seq = res.chain[0].last_seq};
	memcpy(o.expect_hash, res.chain[0].head_hash, AL_HASH_LEN);
	al_vresult_free(&res);
	return o;
}

/* What a v0/v1 chain cannot prove alone, an exported head can. */
static void test_expect_head(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct got g;

	write_log(path, 1, 500, 0);
	struct al_vopts o = head_of(dir);
	struct al_vresult res = run_verify(dir, &g, &o);
	assert_int_equal(total(&g), 0);
	al_vresult_free(&res);

	/* cut the last line at a line boundary: invisible without the head */
	shell("sed -i '$d' \"$F\"", path);
	res = run_verify(dir, &g, NULL);
	assert_int_equal(total(&g), 0);
	al_vresult_free(&res);
	res = run_verify(dir, &g, &o);
	assert_int_equal(g.n[AL_V_TRUNCATED], 1);
	al_vresult_free(&res);

	/* the attacker who recomputes: edit seq 100 and rehash to the end */
	tu_rmtree(dir);
	free(dir);
	free(path);
	dir = tu_mkdtemp();
	path = tu_path(dir, "audit.log");
	write_log(path, 1, 500, 0);
	o = head_of(dir);
	size_t len;
	uint8_t *buf = tu_read_file(path, &len);
	FILE *out = fopen(path, "w");
	uint8_t prev[AL_HASH_LEN] = {0}, *dec = malloc(AL_LINE_MAX), *work = malloc(AL_HASH_LEN + AL_BODY_MAX);
	uint8_t line[AL_LINE_MAX];
	for (size_t pos = 0; pos < len;) {
		uint8_t *nl = memchr(buf + pos, '\n', len - pos);
		struct al_parsed p;
		size_t off;
		assert_int_equal(al_parse(buf + pos, (size_t)(nl - (buf + pos)), dec, &p, &off), AL_PERR_OK);
		if (p.rec.f[AL_F_SEQ].u == 100)
			p.rec.f[AL_F_SESSION].u = 4242; /* the forged edit */
		struct al_emit_out eo;
		long n = al_emit(&p.rec, prev, line, work, &eo);
		assert_true(n > 0);
		fwrite(line, 1, (size_t)n, out);
		memcpy(prev, eo.hash, AL_HASH_LEN);
		pos = (size_t)(nl - buf) + 1;
	}
	fclose(out);
	res = run_verify(dir, &g, NULL);
	assert_int_equal(total(&g), 0); /* undetectable without an anchor: stated in the output */
	al_vresult_free(&res);
	res = run_verify(dir, &g, &o);
	assert_int_equal(g.n[AL_V_MODIFIED], 1);
	al_vresult_free(&res);
	free(buf);
	free(dec);
	free(work);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void test_recovered(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct got g;

	write_log(path, 1, 200, 0);
	shell("printf '{\"@timestamp\":\"2026-11-30T10:4' >> \"$F\"", path);
	write_log(path, 1, 10, 0); /* reopening repairs it */
	struct al_vresult res = run_verify(dir, &g, NULL);
	assert_int_equal(g.n[AL_V_RECOVERED], 1);
	assert_int_equal(total(&g), 1);
	assert_false(al_vclass_is_integrity(AL_V_RECOVERED, false));
	assert_true(al_vclass_is_integrity(AL_V_RECOVERED, true));
	al_vresult_free(&res);

	/* a NUL hole before complete lines, repaired */
	shell("dd if=/dev/zero bs=1 count=300 >> \"$F\" 2>/dev/null", path);
	shell("printf '%s\\n' '{\"@timestamp\":\"2026-11-30T10:48:14.123456789Z\",\"seq\":999}' >> \"$F\"",
	      path);
	write_log(path, 1, 10, 0);
	res = run_verify(dir, &g, NULL);
	assert_int_equal(g.n[AL_V_RECOVERED], 2);
	assert_int_equal(total(&g), 2);
	al_vresult_free(&res);
	free(path);
	tu_rmtree(dir);
	free(dir);
}


/* A log directory an attacker (or a careless operator) filled: a FIFO, a
 * symlink to the log and a symlink loop beside it are not log files and
 * must neither block nor fail the run; a FIFO named on the command line is
 * an error, at once. And many files verify in few descriptors. */
static void test_hostile_dir(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	char *fifo = tu_path(dir, "audit.log.fifo"), *lnk = tu_path(dir, "audit.log.link");
	char *loop = tu_path(dir, "loop");
	char **paths = NULL;
	unsigned n = 0, cap = 0;
	struct al_vopts o = {.threads = 1};
	struct al_vresult res;
	struct rlimit old, low;

	/* ~1,500 rotated files */
	tu_write_log(path, 1, 15000, 4096, 3, 0); /* ~1,500 rotated files */
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(symlink(path, lnk), 0);
	assert_int_equal(symlink(loop, loop), 0);
	assert_int_equal(al_verify_add_path(dir, &paths, &n, &cap), 0);
	for (unsigned i = 0; i < n; i++) /* only the log's own files were listed */
		assert_null(strstr(paths[i], "fifo") ?: strstr(paths[i], "link") ?: strstr(paths[i], "loop"));
	assert_true(n > 1100);
	/* under a limit far below the number of files */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 256;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	assert_int_equal(al_verify_files(paths, n, &o, &res), 0);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(res.files, n);
	assert_int_equal(res.chains, 1);
	for (int k = 0; k < AL_V__MAX; k++)
		assert_int_equal(res.findings[k], 0);
	al_vresult_free(&res);
	/* named on the command line: refused at once, not waited on */
	char *one[] = {fifo};
	assert_int_equal(al_verify_files(one, 1, &o, &res), -EINVAL);
	al_vresult_free(&res);
	char *two[] = {lnk};
	assert_int_equal(al_verify_files(two, 1, &o, &res), -ELOOP);
	al_vresult_free(&res);
	for (unsigned i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	free(path);
	free(fifo);
	free(lnk);
	free(loop);
	tu_rmtree(dir);
	free(dir);
}

/* A rotated set of a v1 log (300 events, 4 KiB files) in a directory of
 * its own, listed: audit.log first, then the rotated files by time. */
struct rotated {
	char *dir, *path, **paths;
	unsigned n;
};

static void rotated_make(struct rotated *r)
{
	r->dir = tu_mkdtemp();
	r->path = tu_path(r->dir, "audit.log");
	write_log(r->path, 1, 300, 4096);
	r->n = list_dir(r->dir, &r->paths);
	assert_true(r->n >= 4);
	assert_string_equal(r->paths[0], r->path);
}

static void rotated_free(struct rotated *r)
{
	free_list(r->paths, r->n);
	free(r->path);
	tu_rmtree(r->dir);
	free(r->dir);
}

/* --follow: a stop asked for at the first wait (on_wait gets the
 * finding collector's ctx) */
static volatile sig_atomic_t follow_stop;
static void stop_follow(void *ctx)
{
	(void)ctx;
	follow_stop = 1;
}

/* A rotation while a directory was listed: the listing holds the active
 * name, the writer then renames that file and opens a new one, which names
 * the renamed file as its predecessor. With the directory given whole
 * (al_vopts.dirs), the engine takes the renamed file in (and, for two
 * rotations, the one before it): no finding. Given file by file, the file
 * is missing from the inputs, as before, except under --follow with the
 * active file among them (a tail of DIR/NAME*). A FIFO or a symlink under
 * that name is not taken in (nor blocks). */
static void test_renamed_after_listing(void **state)
{
	struct rotated r;
	rotated_make(&r);
	char *dir = r.dir, **paths = r.paths, *dirs[] = {dir};
	unsigned n = r.n;
	struct got g;
	struct al_vopts o = {.threads = 1, .on_finding = collect, .ctx = &g};
	struct al_vresult res;

	/* the newest rotated file was renamed after the listing: not in it */
	for (unsigned drop = 1; drop <= 2; drop++) {
		memset(&g, 0, sizeof(g));
		o.dirs = dirs;
		o.n_dirs = 1;
		assert_int_equal(al_verify_files(paths, n - drop, &o, &res), 0);
		assert_int_equal(res.files, n);
		assert_int_equal(res.chains, 1);
		assert_int_equal(total(&g), 0);
		al_vresult_free(&res);
		/* named one by one: the missing predecessor is a finding */
		memset(&g, 0, sizeof(g));
		o.dirs = NULL;
		o.n_dirs = 0;
		assert_int_equal(al_verify_files(paths, n - drop, &o, &res), 0);
		assert_int_equal(res.files, n - drop);
		assert_int_equal(g.n[AL_V_MISSING_FILE], 1);
		al_vresult_free(&res);
		/* ...but a tail of DIR/audit.log* (--follow, the active file
		 * named): its glob was expanded before the rename, so the
		 * renamed files are taken in as from a listing */
		memset(&g, 0, sizeof(g));
		o.follow = true;
		o.poll_ms = 1;
		o.stop = &follow_stop;
		o.on_wait = stop_follow;
		follow_stop = 0;
		assert_int_equal(al_verify_files(paths, n - drop, &o, &res), 0);
		assert_int_equal(res.files, n);
		assert_int_equal(total(&g), 0);
		al_vresult_free(&res);
		o.follow = false;
		o.stop = NULL;
		o.on_wait = NULL;
	}
	/* the directory given as "dir/" (as a user may type it): the same */
	char *slashed = tu_path(dir, ""), *sdirs[] = {slashed};
	memset(&g, 0, sizeof(g));
	o.dirs = sdirs;
	o.n_dirs = 1;
	assert_int_equal(al_verify_files(paths, n - 1, &o, &res), 0);
	assert_int_equal(res.files, n);
	assert_int_equal(total(&g), 0);
	al_vresult_free(&res);
	free(slashed);
	/* under that name a FIFO, then a symlink to the real file: not taken
	 * in, the predecessor is missing */
	char *moved = tu_path(dir, "moved");
	assert_int_equal(rename(paths[n - 1], moved), 0);
	for (int how = 0; how < 2; how++) {
		if (how == 0)
			assert_int_equal(mkfifo(paths[n - 1], 0600), 0);
		else
			assert_int_equal(symlink(moved, paths[n - 1]), 0);
		memset(&g, 0, sizeof(g));
		o.dirs = dirs;
		o.n_dirs = 1;
		assert_int_equal(al_verify_files(paths, n - 1, &o, &res), 0);
		assert_int_equal(res.files, n - 1);
		assert_int_equal(g.n[AL_V_MISSING_FILE], 1);
		al_vresult_free(&res);
		assert_int_equal(unlink(paths[n - 1]), 0);
	}
	assert_int_equal(rename(moved, paths[n - 1]), 0);
	/* a directory not given whole (another one is): not taken in */
	char *other[] = {moved};
	o.dirs = other;
	memset(&g, 0, sizeof(g));
	assert_int_equal(al_verify_files(paths, n - 1, &o, &res), 0);
	assert_int_equal(g.n[AL_V_MISSING_FILE], 1);
	al_vresult_free(&res);
	free(moved);
	rotated_free(&r);
}

/* A rotated set streamed with its active file first (`cat audit.log*`, the
 * shell's order): the findings stand, and the header out of place says the
 * files may be out of order; streamed oldest first, it is intact. */
static void test_stream_out_of_order(void **state)
{
	struct rotated r;
	rotated_make(&r);
	char **paths = r.paths;
	unsigned n = r.n;
	struct got g;
	struct al_vopts o = {.threads = 1, .on_finding = collect, .ctx = &g};
	struct al_vresult res;
	struct al_vstream *st;

	for (int active_first = 0; active_first < 2; active_first++) {
		memset(&g, 0, sizeof(g));
		assert_int_equal(al_vstream_new("stream", &o, &res, &st), 0);
		for (unsigned k = 0; k < n; k++) {
			unsigned i = active_first ? k : (k + 1) % n;
			size_t len;
			uint8_t *b = tu_read_file(paths[i], &len);
			assert_non_null(b);
			assert_int_equal(al_vstream_feed(st, b, len), 0);
			free(b);
		}
		assert_int_equal(al_vstream_end(st), 0);
		if (active_first) {
			assert_true(g.n[AL_V_INSERTED] >= 1);
			assert_non_null(strstr(g.first_msg[AL_V_INSERTED], "are the files out of order?"));
		} else {
			assert_int_equal(total(&g), 0);
		}
		al_vresult_free(&res);
	}
	rotated_free(&r);
}

/* One file reached under two names is read once: the same path twice (a
 * file given alone and in its directory) says nothing; a hard link is a
 * same-file notice at the other name, and the name kept is the one the
 * successor's header links by, wherever the link sorts. A copy (another
 * inode, the same bytes) is still a finding. */
static void test_same_file_two_names(void **state)
{
	struct rotated r;
	rotated_make(&r);
	char *dir = r.dir, **paths = r.paths;
	unsigned n = r.n;
	struct got g;
	struct al_vopts o = {.threads = 1, .on_finding = collect, .ctx = &g};
	struct al_vresult res;

	/* every input twice */
	char **twice = calloc(2 * n, sizeof(*twice));
	assert_non_null(twice);
	for (unsigned i = 0; i < n; i++)
		twice[i] = twice[n + i] = paths[i];
	memset(&g, 0, sizeof(g));
	assert_int_equal(al_verify_files(twice, 2 * n, &o, &res), 0);
	assert_int_equal(res.files, n);
	assert_int_equal(res.chains, 1);
	assert_int_equal(total(&g), 0);
	al_vresult_free(&res);
	/* a hard link to the newest rotated file (the active file's header
	 * names it) and one to the active file, each listed before the file */
	char *l1 = tu_path(dir, "0-link"), *l2 = tu_path(dir, "1-link");
	assert_int_equal(link(paths[n - 1], l1), 0);
	assert_int_equal(link(paths[0], l2), 0);
	char **with = calloc(n + 2, sizeof(*with));
	assert_non_null(with);
	with[0] = l1;
	with[1] = l2;
	memcpy(with + 2, paths, n * sizeof(*paths));
	memset(&g, 0, sizeof(g));
	assert_int_equal(al_verify_files(with, n + 2, &o, &res), 0);
	assert_int_equal(res.files, n);
	assert_int_equal(res.chains, 1);
	assert_int_equal(g.n[AL_V_SAME_FILE], 2);
	assert_int_equal(total(&g), 2);
	assert_false(al_vclass_is_integrity(AL_V_SAME_FILE, true));
	al_vresult_free(&res);
	/* the same, with an input dropped before the file whose name gives way
	 * (the kept files move down over the dropped: the name goes to where
	 * that file is now) */
	char **moved = calloc(n + 2, sizeof(*moved));
	assert_non_null(moved);
	moved[0] = l2;
	moved[1] = paths[0];
	moved[2] = l1;
	memcpy(moved + 3, paths + 1, (n - 1) * sizeof(*paths));
	memset(&g, 0, sizeof(g));
	assert_int_equal(al_verify_files(moved, n + 2, &o, &res), 0);
	assert_int_equal(res.files, n);
	assert_int_equal(res.chains, 1);
	assert_int_equal(g.n[AL_V_SAME_FILE], 2);
	assert_int_equal(total(&g), 2);
	al_vresult_free(&res);
	free(moved);
	/* a copy of that file under another name (a second file continuing
	 * the one before it): forked, as before */
	assert_int_equal(unlink(l1), 0);
	uint8_t *b;
	size_t blen;
	assert_non_null(b = tu_read_file(paths[n - 1], &blen));
	FILE *fp = fopen(l1, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(b, 1, blen, fp), blen);
	fclose(fp);
	free(b);
	memset(&g, 0, sizeof(g));
	assert_int_equal(al_verify_files(with, n + 2, &o, &res), 0);
	assert_int_equal(res.files, n + 1);
	assert_int_equal(g.n[AL_V_SAME_FILE], 1);
	assert_int_equal(g.n[AL_V_FORKED], 1);
	assert_int_equal(total(&g), 2);
	al_vresult_free(&res);
	free(with);
	free(twice);
	free(l1);
	free(l2);
	rotated_free(&r);
}

/* A wall clock that stands still: two writers name their rotated files
 * alike (<name>.<time>-<first seq>) when their files end at the same seqs */
static uint64_t still_wall(void *ctx)
{
	(void)ctx;
	return UINT64_C(1780000000) * 1000000000u;
}

static uint64_t boot_now(void *ctx)
{
	struct timespec ts;
	(void)ctx;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void boot_id_of(void *ctx, uint8_t out[16])
{
	(void)ctx;
	memset(out, 7, 16);
}

/* n records, each durable before the next (one a batch: the files end at
 * the same seqs in every run), rotated every 4 KiB, at a still clock */
static void write_still(const char *path, unsigned n)
{
	struct auditlog_config *cfg = tu_config(path);
	struct al_clock_hooks h = {.realtime = still_wall, .boottime = boot_now, .boot_id = boot_id_of};
	struct auditlog *log;

	assert_int_equal(auditlog_config_set_format_version(cfg, 1), 0);
	assert_int_equal(auditlog_config_set_rotate_bytes(cfg, 4096), 0);
	assert_int_equal(auditlog__config_set_clock(cfg, &h), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	for (unsigned i = 0; i < n; i++) {
		struct auditlog_event ev = tu_event("C_Sign", i);
		assert_int_equal(auditlog_record_sync(log, &ev), 0);
	}
	assert_int_equal(auditlog_close(log), 0);
}

/* Two chains in two directories whose files have the same names: each
 * file's predecessor is the input of that name in its own chain, in
 * whichever order the inputs come (the links look a name up in a sorted
 * index, where the files of one name are neighbours). */
static void test_same_names_two_dirs(void **state)
{
	char *da = tu_mkdtemp(), *db = tu_mkdtemp();
	char *pa = tu_path(da, "audit.log"), *pb = tu_path(db, "audit.log");
	char **la, **lb;

	write_still(pa, 120);
	write_still(pb, 120);
	unsigned na = list_dir(da, &la), nb = list_dir(db, &lb), n = na + nb;
	assert_true(na >= 4);
	assert_int_equal(na, nb);
	for (unsigned i = 0; i < na; i++) /* the same names */
		assert_string_equal(strrchr(la[i], '/'), strrchr(lb[i], '/'));
	char **both = calloc(n, sizeof(*both));
	assert_non_null(both);
	for (int order = 0; order < 3; order++) {
		/* a then b; the same backwards; a and b in turn */
		for (unsigned i = 0; i < n; i++) {
			unsigned k = order == 0 ? i : order == 1 ? n - 1 - i : (i % 2 ? na : 0) + i / 2;
			both[i] = k < na ? la[k] : lb[k - na];
		}
		struct got g;
		struct al_vopts o = {.threads = 1, .on_finding = collect, .ctx = &g};
		struct al_vresult res;
		memset(&g, 0, sizeof(g));
		assert_int_equal(al_verify_files(both, n, &o, &res), 0);
		assert_int_equal(res.files, n);
		assert_int_equal(res.chains, 2);
		assert_int_equal(res.records, 2 * (120 + na)); /* the events and a header a file */
		assert_int_equal(total(&g), 0);
		al_vresult_free(&res);
	}
	free(both);
	free_list(la, na);
	free_list(lb, nb);
	free(pa);
	free(pb);
	tu_rmtree(da);
	tu_rmtree(db);
	free(da);
	free(db);
}

/* --follow when the listing held only the active name and the writer's
 * first rotation came before the opening: the file there is the new one,
 * its header not written yet, and is left out (being created). Nothing to
 * tail: -EAGAIN, nothing reported (the caller lists again). Before, it was
 * -EXDEV, which the CLI took for two writers' chains and exited 2 naming
 * none: seen once in CI. */
static void test_follow_only_new_file(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log"), *dirs[] = {dir};
	struct got g;
	struct al_vopts o = {.threads = 1, .on_finding = collect, .ctx = &g, .follow = true, .poll_ms = 1,
			     .stop = &follow_stop, .on_wait = stop_follow, .dirs = dirs, .n_dirs = 1};
	struct al_vresult res;
	(void)state;

	for (int k = 0; k < 2; k++) {
		/* empty, then the first bytes of a header */
		int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
		assert_true(fd >= 0);
		if (k)
			assert_int_equal(write(fd, "{\"@timestamp\":\"2026-12-06T10:", 30), 30);
		close(fd);
		memset(&g, 0, sizeof(g));
		follow_stop = 0;
		assert_int_equal(al_verify_files(&path, 1, &o, &res), -EAGAIN);
		assert_int_equal(total(&g), 0);
		al_vresult_free(&res);
	}
	tu_rmtree(dir);
	free(path);
	free(dir);
}

/* --follow when a rotation came between the listing and the opening: the
 * listed active name is now the writer's new file, still empty, and the
 * file that was there has its rotated name, which no listed file names.
 * The new file is left out (it is being created), the renamed one is met
 * as the successor of the newest rotated file: every record, no finding,
 * one chain. Kept, the empty file was a torn first header reported, and a
 * second chain (-EXDEV: listed again, the report already out). */
static void test_follow_file_being_created(void **state)
{
	struct rotated r;
	rotated_make(&r);
	char *dir = r.dir, **paths = r.paths, *dirs[] = {dir};
	unsigned n = r.n;
	struct got g;
	struct al_vopts o = {.threads = 1, .on_finding = collect, .ctx = &g, .follow = true, .poll_ms = 1,
			     .stop = &follow_stop, .on_wait = stop_follow, .dirs = dirs, .n_dirs = 1};
	struct al_vresult res;

	/* all records, for comparison: verified before the "rotation" */
	struct al_vopts plain = {.threads = 1, .on_finding = collect, .ctx = &g};
	memset(&g, 0, sizeof(g));
	assert_int_equal(al_verify_files(paths, n, &plain, &res), 0);
	uint64_t records = res.records;
	al_vresult_free(&res);

	/* the writer renames audit.log to <name>.<time>-<its first seq> and
	 * creates audit.log anew: the listing (paths) is as it was */
	size_t len;
	char *head = (char *)tu_read_file(paths[0], &len), *sp = strstr(head, "\"seq\":");
	assert_non_null(sp);
	char name[128];
	snprintf(name, sizeof(name), "audit.log.20990101T000000.000000000Z-%llu", strtoull(sp + 6, NULL, 10));
	free(head);
	char *moved = tu_path(dir, name);
	assert_int_equal(rename(paths[0], moved), 0);
	int fd = open(paths[0], O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);

	memset(&g, 0, sizeof(g));
	follow_stop = 0;
	assert_int_equal(al_verify_files(paths, n, &o, &res), 0);
	assert_int_equal(total(&g), 0);
	assert_int_equal(res.chains, 1);
	assert_int_equal(res.records, records);
	assert_int_equal(res.files, n); /* the n - 1 rotated files, the renamed one */
	al_vresult_free(&res);

	/* the same empty file under a rotated name is a crash's torn header:
	 * reported (recovered), with and without --follow, and the chain is
	 * tailed all the same (before, a second chain: -EXDEV) */
	char *torn = tu_path(dir, "audit.log.20990101T000000.000000000Z-99999");
	assert_int_equal(rename(paths[0], torn), 0);
	char **with = calloc(n, sizeof(*with));
	assert_non_null(with);
	memcpy(with, paths + 1, (n - 1) * sizeof(*with));
	with[n - 1] = torn;
	for (int f = 0; f < 2; f++) {
		o.follow = f;
		memset(&g, 0, sizeof(g));
		follow_stop = 0;
		assert_int_equal(al_verify_files(with, n, &o, &res), 0);
		assert_int_equal(g.n[AL_V_RECOVERED], 1);
		assert_int_equal(total(&g), 1);
		/* the renamed file is not among the inputs; the tail meets it
		 * as the successor of the file it tails */
		if (f)
			assert_int_equal(res.records, records);
		else
			assert_true(res.records < records);
		al_vresult_free(&res);
	}
	free(with);
	free(torn);
	free(moved);
	rotated_free(&r);
}

/* Findings and the lines passed on (one ctx for both callbacks). */
struct got_lines {
	struct got g; /* first: collect() takes the whole as its own */
	uint64_t lines;
};

static void count_line(void *ctx, const uint8_t *line, size_t len)
{
	(void)line;
	(void)len;
	((struct got_lines *)ctx)->lines++;
}

static void put_file(const char *dir, const char *name, const void *p, size_t len)
{
	char *path = tu_path(dir, name);
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, len), (ssize_t)len);
	close(fd);
	free(path);
}

/* --follow tails one chain. Beside it: the old chain the writer left when
 * its active file was deleted (a new chain begins at the active name), a
 * copy of another log's file under a rotated name, a file with no header.
 * Each is one extra-chain finding, not verified, none of its lines passed
 * on; the chain at the active name is tailed, every line of it passed on.
 * Two chains under active names: -EXDEV, nothing reported, unless a
 * resumed tail's chain is one of them (it follows that). Before, any
 * second chain was -EXDEV, which the CLI took for a rotation in progress
 * and tried again 50 times: a tail that never started. */
static void test_follow_other_chains(void **state)
{
	struct rotated r, other;
	rotated_make(&r);
	rotated_make(&other);
	char *dir = r.dir, *dirs[] = {dir}, **paths;
	struct got_lines gl;
	struct al_vopts o = {.threads = 1, .on_finding = collect, .on_record = count_line, .ctx = &gl,
			     .poll_ms = 1, .stop = &follow_stop, .on_wait = stop_follow, .dirs = dirs, .n_dirs = 1};
	struct al_vresult res;
	char id[33];
	(void)state;

	/* the active file deleted: the writer starts a new chain there */
	assert_int_equal(unlink(r.path), 0);
	write_log(r.path, 1, 20, 0);
	/* the new chain alone, without --follow: what the tail must verify */
	memset(&gl, 0, sizeof(gl));
	assert_int_equal(al_verify_files(&r.path, 1, &o, &res), 0);
	assert_int_equal(total(&gl.g), 0);
	uint64_t records = res.records, lines = gl.lines;
	assert_true(records > 20 && lines == records);
	al_vresult_free(&res);

	o.follow = true;
	for (int round = 0; round < 2; round++) {
		if (round == 1) {
			/* a file of another chain under a rotated name, and one
			 * with no header */
			size_t len;
			uint8_t *p = tu_read_file(other.paths[1], &len);
			put_file(dir, "audit.log.20990101T000000.000000000Z-77777", p, len);
			free(p);
			put_file(dir, "audit.log.20990101T000000.000000000Z-88888", "garbage\n", 8);
		}
		unsigned n = list_dir(dir, &paths);
		memset(&gl, 0, sizeof(gl));
		follow_stop = 0;
		assert_int_equal(al_verify_files(paths, n, &o, &res), 0);
		assert_int_equal(gl.g.n[AL_V_EXTRA_CHAIN], round ? 3 : 1);
		assert_int_equal(total(&gl.g), gl.g.n[AL_V_EXTRA_CHAIN]);
		char want[64];
		snprintf(want, sizeof(want), "(%u file(s) among the inputs", r.n - 1);
		assert_non_null(strstr(gl.g.first_msg[AL_V_EXTRA_CHAIN], want));
		assert_int_equal(res.chains, round ? 2 : 1); /* (the file with no header: its own) */
		if (!round) /* the chain tailed, the only one */
			snprintf(id, sizeof(id), "%s", res.chain[0].chain_id);
		assert_int_equal(res.records, records);
		assert_int_equal(gl.lines, lines);
		al_vresult_free(&res);
		free_list(paths, n);
	}

	/* another log's active file beside, under a name no writer rotates */
	size_t len;
	uint8_t *p = tu_read_file(other.path, &len);
	put_file(dir, "other.log", p, len);
	free(p);
	unsigned n = list_dir(dir, &paths);
	memset(&gl, 0, sizeof(gl));
	assert_int_equal(al_verify_files(paths, n, &o, &res), -EXDEV);
	assert_int_equal(total(&gl.g), 0);
	assert_int_equal(gl.lines, 0);
	assert_int_equal(res.chains, 2); /* named for the message */
	al_vresult_free(&res);
	/* a resumed tail (its chain given) follows its own, and tells that one
	 * as any other chain */
	o.follow_chain = id;
	memset(&gl, 0, sizeof(gl));
	follow_stop = 0;
	assert_int_equal(al_verify_files(paths, n, &o, &res), 0);
	assert_int_equal(gl.g.n[AL_V_EXTRA_CHAIN], 3); /* the old chain, the other (2 files), the junk */
	assert_int_equal(total(&gl.g), 3);
	assert_int_equal(res.records, records);
	assert_int_equal(gl.lines, lines);
	al_vresult_free(&res);
	/* ...and is refused when its chain is not at an active name */
	o.follow_chain = "0123456789abcdef0123456789abcdef";
	memset(&gl, 0, sizeof(gl));
	assert_int_equal(al_verify_files(paths, n, &o, &res), -EXDEV);
	assert_int_equal(total(&gl.g), 0);
	al_vresult_free(&res);
	free_list(paths, n);
	rotated_free(&other);
	rotated_free(&r);
}

/* --follow, another chain's file beside the log under a name that is not
 * of the rotated form: the writer's chain is the one whose active path the
 * others extend (audit.log.bak, audit.log~). Under an unrelated name (a
 * second writer's log, as in the token's audit_dir, or a copy) the usage
 * error of the test above, whether the log was rotated or not. */
static unsigned list_prefixed(const char *dir, const char *prefix, char ***ret)
{
	unsigned n = list_dir(dir, ret), m = 0;
	for (unsigned i = 0; i < n; i++) {
		if (strncmp(strrchr((*ret)[i], '/') + 1, prefix, strlen(prefix)) == 0)
			(*ret)[m++] = (*ret)[i];
		else
			free((*ret)[i]);
	}
	return m;
}

static void test_follow_owner_by_name(void **state)
{
	struct rotated r, other;
	rotated_make(&r);
	rotated_make(&other);
	char *dir = r.dir, **paths, *fresh = tu_mkdtemp(), *fpath = tu_path(fresh, "audit.log");
	struct got_lines gl;
	struct al_vopts o = {.threads = 1, .on_finding = collect, .on_record = count_line, .ctx = &gl,
			     .poll_ms = 1, .stop = &follow_stop, .on_wait = stop_follow, .follow = true};
	struct al_vresult res;
	size_t len;
	uint8_t *p = tu_read_file(other.path, &len);
	(void)state;

	write_log(fpath, 1, 20, 0); /* a log not rotated yet */
	for (int rot = 0; rot < 2; rot++) {
		const char *d = rot ? dir : fresh;
		/* the writer's files alone: what the tail must read */
		unsigned n = list_dir(d, &paths);
		memset(&gl, 0, sizeof(gl));
		follow_stop = 0;
		assert_int_equal(al_verify_files(paths, n, &o, &res), 0);
		assert_int_equal(total(&gl.g), 0);
		char id[33];
		snprintf(id, sizeof(id), "%s", res.chain[0].chain_id);
		uint64_t records = res.records;
		assert_true(records > 0 && gl.lines == records);
		al_vresult_free(&res);
		free_list(paths, n);

		/* beside it, names that extend its own; then, with an unrelated
		 * one too, given whole and as DIR/audit.log* */
		static const char *const beside[] = {"audit.log.bak", "audit.log~", "other.log", NULL};
		for (unsigned k = 0; k < 4; k++) {
			if (beside[k])
				put_file(d, beside[k], p, len);
			n = k < 3 ? list_dir(d, &paths) : list_prefixed(d, "audit.log", &paths);
			memset(&gl, 0, sizeof(gl));
			follow_stop = 0;
			if (k == 2) {
				assert_int_equal(al_verify_files(paths, n, &o, &res), -EXDEV);
				assert_int_equal(total(&gl.g), 0);
				assert_int_equal(gl.lines, 0);
				assert_int_equal(res.chains, 2); /* named for the message */
			} else {
				assert_int_equal(al_verify_files(paths, n, &o, &res), 0);
				assert_int_equal(gl.g.n[AL_V_EXTRA_CHAIN], 1); /* the other chain, once */
				assert_int_equal(total(&gl.g), 1);
				char want[64];
				snprintf(want, sizeof(want), "(%u file(s) among the inputs", k ? 2 : 1);
				assert_non_null(strstr(gl.g.first_msg[AL_V_EXTRA_CHAIN], want));
				assert_string_equal(res.chain[0].chain_id, id);
				assert_int_equal(res.records, records);
				assert_int_equal(gl.lines, records);
			}
			al_vresult_free(&res);
			free_list(paths, n);
		}
	}
	tu_rmtree(fresh);
	free(fpath);
	free(fresh);
	free(p);
	rotated_free(&other);
	rotated_free(&r);
}

/* --follow while the writer begins a new chain at its active name: the
 * tailed file deleted (the writer's next open finds rotated files but no
 * active file), or renamed aside (an untrusted tail). The tail reads the
 * old file to its end, reports the new chain (extra-chain) and the deletion
 * (missing-file: what it read is in no file now), and ends by itself.
 * Before, it waited for a successor that could never come, silently. */
struct new_chain_tail {
	struct got g; /* first: collect() takes the whole as its own */
	const char *path, *aside;
	unsigned waits;
};

static void new_chain_wait(void *ctx)
{
	struct new_chain_tail *t = ctx;
	if (t->waits++ == 0) {
		if (t->aside)
			assert_int_equal(rename(t->path, t->aside), 0);
		else
			assert_int_equal(unlink(t->path), 0);
		write_log(t->path, 1, 20, 0);
	}
	if (t->waits > 5000)
		follow_stop = 1; /* never ended by itself: the asserts below say so */
}

static void test_follow_new_chain(void **state)
{
	(void)state;
	for (int aside = 0; aside < 2; aside++) {
		struct rotated r;
		rotated_make(&r);
		char *moved = tu_path(r.dir, "audit.log.20990101T000000.000000000Z-99999");
		struct new_chain_tail t = {.path = r.path, .aside = aside ? moved : NULL};
		struct al_vopts o = {.threads = 1, .on_finding = collect, .ctx = &t, .follow = true,
				     .poll_ms = 1, .stop = &follow_stop, .on_wait = new_chain_wait};
		struct al_vresult res;

		struct al_vopts plain = {.threads = 1, .on_finding = collect, .ctx = &t};
		assert_int_equal(al_verify_files(r.paths, r.n, &plain, &res), 0);
		uint64_t records = res.records;
		al_vresult_free(&res);
		memset(&t.g, 0, sizeof(t.g));
		follow_stop = 0;
		assert_int_equal(al_verify_files(r.paths, r.n, &o, &res), 0);
		assert_true(t.waits > 0 && t.waits <= 5000);
		assert_int_equal(t.g.n[AL_V_EXTRA_CHAIN], 1);
		assert_string_equal(t.g.first_file[AL_V_EXTRA_CHAIN], r.path);
		assert_int_equal(t.g.n[AL_V_MISSING_FILE], aside ? 0 : 1);
		assert_int_equal(total(&t.g), aside ? 1 : 2);
		assert_int_equal(res.chains, 1);
		assert_int_equal(res.records, records);
		al_vresult_free(&res);
		free(moved);
		rotated_free(&r);
	}
}

/* --emit with workers passes on the bytes they checked: a line changed in
 * the file after its block was checked (while the walk is behind) is never
 * emitted changed. */
struct emit_race {
	const char *path;
	uint8_t *orig;
	size_t orig_len;
	uint64_t change_at; /* offset of the line changed at the first emit */
	unsigned emitted, bad;
};

static void emit_race_record(void *ctx, const uint8_t *line, size_t len)
{
	struct emit_race *er = ctx;
	if (!er->emitted++) {
		/* let the workers run their window ahead, then change a line there */
		struct timespec ts = {.tv_nsec = 200 * 1000000};
		nanosleep(&ts, NULL);
		int fd = open(er->path, O_WRONLY | O_CLOEXEC);
		uint8_t *p = memmem(er->orig + er->change_at, er->orig_len - er->change_at, "C_Sign", 6);
		assert_true(fd >= 0 && p);
		assert_int_equal(pwrite(fd, "C_Sigm", 6, (off_t)(p - er->orig)), 6);
		close(fd);
	}
	/* every line emitted is one of the original file, byte for byte */
	if (!memmem(er->orig, er->orig_len, line, len))
		er->bad++;
}

static void test_emit_verified_bytes(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct emit_race er = {.path = path};
	struct al_vopts o = {.threads = 3, .block = 4096, .on_record = emit_race_record, .ctx = &er};
	struct al_vresult res;

	tu_write_log(path, 1, 3000, 0, 3, 0);
	er.orig = tu_read_file(path, &er.orig_len);
	assert_non_null(er.orig);
	er.change_at = 5 * 4096 + 100;
	char *one[] = {path};
	assert_int_equal(al_verify_files(one, 1, &o, &res), 0);
	assert_true(er.emitted > 1000);
	assert_true(res.taken > 0);
	assert_int_equal(er.bad, 0);
	al_vresult_free(&res);
	free(er.orig);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_logs),   cmocka_unit_test(test_mutations),
		cmocka_unit_test(test_bit_flips),    cmocka_unit_test(test_expect_head),
		cmocka_unit_test(test_recovered),    cmocka_unit_test(test_first_header),
		cmocka_unit_test(test_from_checkpoint),
		cmocka_unit_test(test_hostile_dir),
		cmocka_unit_test(test_renamed_after_listing),
		cmocka_unit_test(test_same_file_two_names),
		cmocka_unit_test(test_same_names_two_dirs),
		cmocka_unit_test(test_follow_only_new_file),
		cmocka_unit_test(test_follow_file_being_created),
		cmocka_unit_test(test_follow_other_chains),
		cmocka_unit_test(test_follow_owner_by_name),
		cmocka_unit_test(test_follow_new_chain),
		cmocka_unit_test(test_stream_out_of_order),
		cmocka_unit_test(test_emit_verified_bytes),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
