/* SPDX-License-Identifier: MIT */
/*
 * The tamper corpus (issue 3): logs the library wrote (rotated v1 files, and
 * a v0 -> v1 mixed set), mutated in every way docs/format.md section 11 lists.
 * Each mutation must give exactly one finding, of the right class, at the
 * right file, line, byte offset and seq; the untouched logs verify clean (in
 * any input order). The attacker who recomputes the chain gets the verdict
 * the table states: invisible without an anchor, caught by --expect-head, and
 * a downgrade or a forged repair visible even without one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/sha.h>

#include "tu.h"
#include "verify.h"

/* ---- findings ------------------------------------------------------------- */

struct finding {
	enum al_vclass cls;
	char file[512];
	uint64_t line, off, seq;
	bool has_seq;
	char msg[256];
};

struct got {
	unsigned n; /* all findings; the first 16 are kept */
	struct finding f[16];
};

static void collect(void *ctx, const struct al_finding *f)
{
	struct got *g = ctx;
	if (g->n < 16) {
		struct finding *d = &g->f[g->n];
		d->cls = f->cls;
		snprintf(d->file, sizeof(d->file), "%s", f->file);
		d->line = f->line;
		d->off = f->offset;
		d->seq = f->seq;
		d->has_seq = f->has_seq;
		snprintf(d->msg, sizeof(d->msg), "%s", f->msg);
	}
	g->n++;
}

static void dump(const struct got *g)
{
	for (unsigned i = 0; i < g->n && i < 16; i++)
		print_message("  finding: %s %s:%llu off %llu seq %llu%s: %s\n", al_vclass_name(g->f[i].cls),
			      g->f[i].file, (unsigned long long)g->f[i].line, (unsigned long long)g->f[i].off,
			      (unsigned long long)g->f[i].seq, g->f[i].has_seq ? "" : "(none)", g->f[i].msg);
}

/* ---- logs ------------------------------------------------------------------ */

struct fx {
	char *dir;
	unsigned n;
	char **files; /* chain order: oldest first, the active file last */
};

static void write_log(const char *path, unsigned version, unsigned n, uint64_t rotate)
{
	tu_write_log(path, version, n, rotate, 3, 7);
}

static uint64_t header_seq(const char *path)
{
	size_t len, off;
	uint8_t *buf = tu_read_file(path, &len), dec[AL_LINE_MAX];
	struct al_parsed p;
	assert_non_null(buf);
	uint8_t *nl = memchr(buf, '\n', len);
	assert_non_null(nl);
	assert_int_equal(al_parse(buf, (size_t)(nl - buf), dec, &p, &off), AL_PERR_OK);
	free(buf);
	return p.rec.f[AL_F_SEQ].u;
}

static int by_header_seq(const void *a, const void *b)
{
	uint64_t x = header_seq(*(char *const *)a), y = header_seq(*(char *const *)b);
	return x < y ? -1 : x > y;
}

/* The files of dir, in chain order (by their headers' seq). */
static void fx_load(struct fx *fx)
{
	unsigned n = tu_count_files(fx->dir), k = 0;
	char cmd[600], name[512];
	FILE *ls;

	fx->files = calloc(n + 1, sizeof(char *));
	snprintf(cmd, sizeof(cmd), "ls -1 '%s'", fx->dir);
	ls = popen(cmd, "r");
	assert_non_null(ls);
	while (k < n && fgets(name, sizeof(name), ls)) {
		name[strcspn(name, "\n")] = 0;
		fx->files[k++] = tu_path(fx->dir, name);
	}
	pclose(ls);
	fx->n = k;
	qsort(fx->files, k, sizeof(char *), by_header_seq);
}

static void fx_free(struct fx *fx)
{
	for (unsigned i = 0; i < fx->n; i++)
		free(fx->files[i]);
	free(fx->files);
	if (fx->dir) {
		tu_rmtree(fx->dir);
		free(fx->dir);
	}
	memset(fx, 0, sizeof(*fx));
}

static void put_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* A fresh copy of a fixture. */
static struct fx fx_copy(const struct fx *src)
{
	struct fx fx = {.dir = tu_mkdtemp(), .n = src->n};
	fx.files = calloc(src->n + 1, sizeof(char *));
	for (unsigned i = 0; i < src->n; i++) {
		size_t len;
		uint8_t *buf = tu_read_file(src->files[i], &len);
		assert_non_null(buf);
		fx.files[i] = tu_path(fx.dir, strrchr(src->files[i], '/') + 1);
		put_file(fx.files[i], buf, len);
		free(buf);
	}
	return fx;
}

/* v1, ~12 rotated files */
static struct fx fx_v1(unsigned events, uint64_t rotate)
{
	struct fx fx = {.dir = tu_mkdtemp()};
	char *path = tu_path(fx.dir, "audit.log");
	write_log(path, 1, events, rotate);
	free(path);
	fx_load(&fx);
	return fx;
}

/* v0 then v1 in the same chain */
static struct fx fx_mixed(unsigned events, uint64_t rotate)
{
	struct fx fx = {.dir = tu_mkdtemp()};
	char *path = tu_path(fx.dir, "audit.log");
	write_log(path, 0, events, rotate);
	write_log(path, 1, events, rotate);
	free(path);
	fx_load(&fx);
	return fx;
}

static void same_findings(const struct got *a, const struct got *b)
{
	if (a->n != b->n) {
		print_message("the walk alone:\n");
		dump(a);
		print_message("with workers:\n");
		dump(b);
	}
	assert_int_equal(a->n, b->n);
	for (unsigned i = 0; i < a->n && i < 16; i++) {
		const struct finding *x = &a->f[i], *y = &b->f[i];
		assert_int_equal(x->cls, y->cls);
		assert_string_equal(x->file, y->file);
		assert_int_equal(x->line, y->line);
		assert_int_equal(x->off, y->off);
		assert_int_equal(x->seq, y->seq);
		assert_int_equal(x->has_seq, y->has_seq);
		assert_string_equal(x->msg, y->msg);
	}
}

static void same_result(const struct al_vresult *a, const struct al_vresult *b)
{
	assert_int_equal(a->files, b->files);
	assert_int_equal(a->chains, b->chains);
	assert_int_equal(a->records, b->records);
	assert_int_equal(a->bytes, b->bytes);
	assert_memory_equal(a->findings, b->findings, sizeof(a->findings));
	assert_memory_equal(a->chain, b->chain, a->chains * sizeof(*a->chain));
}

/* Every verification runs twice: by the walk alone, and with worker threads
 * checking small blocks ahead of it (block sizes vary from run to run, so
 * that block edges fall everywhere). Both must report the same, finding for
 * finding (verify_par.c). */
static uint64_t taken_total; /* records the workers checked, over all runs */
static bool par_sparse;        /* flip_line: the parallel arm every fourth run under TSan */
static unsigned par_skipped;

/* The records passed on (--emit), as a count and an FNV-1a digest: the same
 * lines in the same order. */
static uint64_t emitted, emitted_n;

static void on_record(void *ctx, const uint8_t *line, size_t len)
{
	(void)ctx;
	for (size_t i = 0; i < len; i++)
		emitted = (emitted ^ line[i]) * 0x100000001b3ull;
	emitted = (emitted ^ '\n') * 0x100000001b3ull;
	emitted_n++;
}

/* The parallel arm's workers, one pool a block size, kept across the
 * thousands of verifications here (al_vopts.pool): a pool made and joined in
 * each was two thirds of this program's time. Freed by teardown. */
static struct {
	uint64_t block;
	struct al_vpool *pool;
} pools[8];
static unsigned npools;

static struct al_vpool *pool_of(uint64_t block)
{
	for (unsigned i = 0; i < npools; i++)
		if (pools[i].block == block)
			return pools[i].pool;
	assert_true(npools < sizeof(pools) / sizeof(pools[0]));
	/* keep: the arm passes on_record the bytes its workers checked */
	assert_int_equal(al_vpool_new(3, block, true, &pools[npools].pool), 0);
	pools[npools].block = block;
	return pools[npools++].pool;
}

static struct al_vresult verify_paths(char **paths, unsigned n, struct got *g, const struct al_vopts *base)
{
	static const uint64_t blocks[] = {512, 1777, 4096, 300};
	static unsigned turn;
	struct al_vopts o = base ? *base : (struct al_vopts){0};
	struct al_vresult res, par;
	struct got gp;
	uint64_t e1, n1;

	memset(g, 0, sizeof(*g));
	memset(&gp, 0, sizeof(gp));
	o.on_finding = collect;
	o.on_record = on_record;
	o.ctx = g;
	o.threads = 1;
	emitted = 0xcbf29ce484222325ull;
	emitted_n = 0;
	assert_int_equal(al_verify_files(paths, n, &o, &res), 0);
	e1 = emitted;
	n1 = emitted_n;
	assert_int_equal(res.taken, 0);
	/* the bit flips in the TSan build (AUDITLOG_TEST_SCALE=20) start the
	 * workers every fourth flip: thread start-up is most of its time there,
	 * and races show in any run; debug and ASan compare every flip */
	if (par_sparse && tu_test_scale() > 4 && par_skipped++ % 4)
		return res;
	o.ctx = &gp;
	o.threads = 3;
	o.block = base && base->block ? base->block : blocks[turn++ % (sizeof(blocks) / sizeof(blocks[0]))];
	o.pool = pool_of(o.block);
	emitted = 0xcbf29ce484222325ull;
	emitted_n = 0;
	assert_int_equal(al_verify_files(paths, n, &o, &par), 0);
	same_findings(g, &gp);
	same_result(&res, &par);
	assert_int_equal(emitted_n, n1);
	assert_int_equal(emitted, e1);
	taken_total += par.taken;
	al_vresult_free(&par);
	return res;
}

/* The same files as one stream (al_vstream_*): concatenated in chain order
 * and fed in pieces of varying size. A stream must report what the files
 * report, class for class and seq for seq, each at the stream's line and
 * offset of the file's line and offset. */
static bool stream_elsewhere; /* records appended to a rotated file: a stream learns where the
			       * file should have ended at the next header, and says it there */
static bool stream_glued; /* a file cut inside a line: as a stream, its last line and the
			   * next file's header are one line (at least one finding, elsewhere) */

static void stream_like_files(const struct fx *fx, const struct al_vopts *base, const struct got *g,
			      const struct al_vresult *res)
{
	static unsigned turn;
	struct al_vopts o = base ? *base : (struct al_vopts){0};
	uint64_t lines_before[64], bytes_before[64], lines = 0, bytes = 0;
	struct al_vstream *st;
	struct al_vresult sr;
	struct got gs;

	assert_true(fx->n <= 64);
	memset(&gs, 0, sizeof(gs));
	o.on_finding = collect;
	o.ctx = &gs;
	assert_int_equal(al_vstream_new("stream", &o, &sr, &st), 0);
	for (unsigned i = 0; i < fx->n; i++) {
		size_t len;
		uint8_t *buf = tu_read_file(fx->files[i], &len);
		if (!buf) { /* removed by the test: not part of the stream either */
			lines_before[i] = lines;
			bytes_before[i] = bytes;
			continue;
		}
		lines_before[i] = lines;
		bytes_before[i] = bytes;
		for (size_t k = 0; k < len; k++)
			lines += buf[k] == '\n';
		if (len && buf[len - 1] != '\n')
			lines++; /* a last line without its newline: the next file's lines follow it */
		bytes += len;
		/* pieces of 1 byte to 8 KiB, in a pattern that changes from run to run */
		for (size_t k = 0, piece = 1 + turn++ % 97; k < len; k += piece, piece = 1 + (piece * 389 + 7) % 8191) {
			size_t m = len - k < piece ? len - k : piece;
			assert_int_equal(al_vstream_feed(st, buf + k, m), 0);
		}
		free(buf);
	}
	assert_int_equal(al_vstream_end(st), 0);
	if (stream_glued) {
		assert_true(gs.n >= 1);
		al_vresult_free(&sr);
		return;
	}
	if (gs.n != g->n) {
		print_message("files:\n");
		dump(g);
		print_message("stream:\n");
		dump(&gs);
	}
	assert_int_equal(gs.n, g->n);
	for (unsigned i = 0; i < g->n && i < 16; i++) {
		const struct finding *x = &g->f[i], *y = &gs.f[i];
		unsigned fi = 0;
		while (fi < fx->n && strcmp(fx->files[fi], x->file) != 0)
			fi++;
		if (x->cls != y->cls || x->seq != y->seq || x->has_seq != y->has_seq ||
		    (x->line && fi < fx->n && !stream_elsewhere &&
		     (y->line != lines_before[fi] + x->line || y->off != bytes_before[fi] + x->off))) {
			print_message("finding %u differs; files:\n", i);
			dump(g);
			print_message("stream:\n");
			dump(&gs);
			fail();
		}
		assert_string_equal(y->file, "stream");
	}
	assert_int_equal(sr.records, res->records);
	if (!o.has_from) /* (files wholly before it are not read) */
		assert_int_equal(sr.bytes, res->bytes);
	assert_int_equal(sr.chains, 1);
	assert_int_equal(sr.chain[0].last_seq, res->chain[0].last_seq);
	assert_memory_equal(sr.chain[0].head_hash, res->chain[0].head_hash, AL_HASH_LEN);
	al_vresult_free(&sr);
}

static struct got verify_fx(const struct fx *fx, const struct al_vopts *base)
{
	struct got g;
	struct al_vresult res = verify_paths(fx->files, fx->n, &g, base);
	stream_like_files(fx, base, &g, &res);
	al_vresult_free(&res);
	return g;
}

/* ---- lines of a file ---------------------------------------------------------- */

struct lines {
	uint8_t *buf;
	size_t size, n;
	size_t off[4096], len[4096]; /* len without '\n' */
	uint64_t seq[4096];
	unsigned version[4096];
};

static struct lines *lines_of(const char *path)
{
	struct lines *l = calloc(1, sizeof(*l));
	uint8_t dec[AL_LINE_MAX];
	l->buf = tu_read_file(path, &l->size);
	assert_non_null(l->buf);
	for (size_t pos = 0; pos < l->size;) {
		uint8_t *nl = memchr(l->buf + pos, '\n', l->size - pos);
		struct al_parsed p;
		size_t eoff;
		assert_non_null(nl);
		assert_true(l->n < 4096);
		l->off[l->n] = pos;
		l->len[l->n] = (size_t)(nl - (l->buf + pos));
		assert_int_equal(al_parse(l->buf + pos, l->len[l->n], dec, &p, &eoff), AL_PERR_OK);
		l->seq[l->n] = p.rec.f[AL_F_SEQ].u;
		l->version[l->n] = p.rec.version;
		l->n++;
		pos = (size_t)(nl - l->buf) + 1;
	}
	return l;
}

static void lines_free(struct lines *l)
{
	free(l->buf);
	free(l);
}

/* Exactly one finding: this class at this place. line is 1-based. */
static void expect_one(const char *what, const struct got *g, enum al_vclass cls, const char *file,
		       uint64_t line, uint64_t off, uint64_t seq)
{
	const struct finding *f = &g->f[0];
	if (g->n == 1 && f->cls == cls && strcmp(f->file, file) == 0 && f->line == line && f->off == off &&
	    f->has_seq && f->seq == seq)
		return;
	print_message("%s: want exactly one %s at %s:%llu off %llu seq %llu, got %u finding(s)\n", what,
		      al_vclass_name(cls), file, (unsigned long long)line, (unsigned long long)off,
		      (unsigned long long)seq, g->n);
	dump(g);
	fail_msg("%s: wrong verdict", what);
}

static void expect_none(const char *what, const struct got *g)
{
	if (g->n == 0)
		return;
	print_message("%s: want no finding, got %u\n", what, g->n);
	dump(g);
	fail_msg("%s: false positive", what);
}

/* Build a new file from `l` with line k (0-based) replaced by `repl`
 * (len `rl`, '\n' included; rl 0 deletes it), or inserted before it. */
static void splice_file(const char *path, const struct lines *l, size_t k, const void *repl, size_t rl, bool insert)
{
	uint8_t *out = malloc(l->size + rl + 1);
	size_t at = k < l->n ? l->off[k] : l->size, o = 0;
	memcpy(out, l->buf, at);
	o = at;
	memcpy(out + o, repl, rl);
	o += rl;
	size_t rest = insert || k >= l->n ? at : l->off[k] + l->len[k] + 1;
	memcpy(out + o, l->buf + rest, l->size - rest);
	o += l->size - rest;
	put_file(path, out, o);
	free(out);
}

/* line k with the first `from` replaced by `to`, '\n' appended */
static size_t edit_line(const struct lines *l, size_t k, const char *from, const char *to, char *out)
{
	char line[AL_LINE_MAX + 64];
	memcpy(line, l->buf + l->off[k], l->len[k]);
	line[l->len[k]] = 0;
	char *p = strstr(line, from);
	if (!p)
		fail_msg("line %zu has no '%s'", k + 1, from);
	size_t a = (size_t)(p - line);
	if (!to) { /* the character after `from`: another of its kind, same length */
		char *ch = p + strlen(from);
		*ch = *ch == '9' ? '8' : *ch == 'f' ? 'e' : (char)(*ch + 1);
		return (size_t)snprintf(out, AL_LINE_MAX + 64, "%s\n", line);
	}
	int n = snprintf(out, AL_LINE_MAX + 64, "%.*s%s%s\n", (int)a, line, to, p + strlen(from));
	return (size_t)n;
}

/* ---- clean logs ------------------------------------------------------------- */

static struct fx V1, MIXED; /* made once, copied for each mutation */

static int setup(void **state)
{
	V1 = fx_v1(1200, 32u << 10);
	MIXED = fx_mixed(600, 32u << 10);
	return 0;
}

static int teardown(void **state)
{
	fx_free(&V1);
	fx_free(&MIXED);
	for (unsigned i = 0; i < npools; i++)
		al_vpool_free(pools[i].pool);
	npools = 0;
	return 0;
}

static void test_clean(void **state)
{
	struct got g;
	assert_true(V1.n >= 10);
	assert_true(MIXED.n >= 10);
	for (int which = 0; which < 2; which++) {
		const struct fx *fx = which ? &MIXED : &V1;
		struct al_vresult res = verify_paths(fx->files, fx->n, &g, NULL);
		expect_none("clean log", &g);
		assert_int_equal(res.chains, 1);
		/* and the workers did check most of it */
		uint64_t before = taken_total;
		al_vresult_free(&res);
		res = verify_paths(fx->files, fx->n, &g, NULL);
		assert_true(taken_total - before > res.records / 2);
		uint64_t records = res.records;
		al_vresult_free(&res);
		/* the order of the inputs does not matter: the headers' links do */
		char **rev = calloc(fx->n, sizeof(char *));
		for (unsigned i = 0; i < fx->n; i++)
			rev[i] = fx->files[fx->n - 1 - i];
		res = verify_paths(rev, fx->n, &g, NULL);
		expect_none("reversed inputs", &g);
		assert_int_equal(res.records, records);
		assert_int_equal(res.chain[0].min_version, which ? 0 : 1);
		al_vresult_free(&res);
		/* one swap of two files in the middle of the list, too */
		rev[0] = fx->files[3];
		rev[fx->n - 4] = fx->files[fx->n - 1];
		res = verify_paths(rev, fx->n, &g, NULL);
		expect_none("shuffled inputs", &g);
		al_vresult_free(&res);
		free(rev);
	}
}

/* ---- one mutation at a time ---------------------------------------------- */

enum op { OP_DELETE, OP_INSERT, OP_REPLACE };

struct mut {
	const char *what;
	unsigned file; /* index in chain order */
	size_t line;   /* 0-based */
	enum op op;
	const char *from, *to; /* OP_REPLACE/OP_INSERT: edit of line `src` (NULL: copy it) */
	size_t src;            /* source line for OP_INSERT */
	const char *raw;       /* OP_INSERT/OP_REPLACE: this text instead */
	enum al_vclass cls;
	int at_line;    /* expected finding: line index (0-based) of the result, -1: line+0 */
	int seq_of;     /* expected seq: of this original line (0-based) */
};

static size_t fix_line(const struct lines *l, size_t k)
{
	return k == 99999 ? l->n - 1 : k == 99998 ? l->n : k;
}

static void run_mut(const struct fx *base, const struct mut *mm)
{
	struct fx fx = fx_copy(base);
	struct lines *l = lines_of(fx.files[mm->file]);
	struct mut mc = *mm, *m = &mc;
	m->line = fix_line(l, m->line);
	m->src = fix_line(l, m->src);
	m->seq_of = (int)fix_line(l, (size_t)m->seq_of);
	if (m->at_line >= 0)
		m->at_line = (int)fix_line(l, (size_t)m->at_line);
	char buf[AL_LINE_MAX + 64];
	size_t n = 0;
	const char *path = fx.files[m->file];

	if (m->raw)
		n = (size_t)snprintf(buf, sizeof(buf), "%s\n", m->raw);
	else if (m->from)
		n = edit_line(l, m->op == OP_INSERT ? m->src : m->line, m->from, m->to, buf);
	else if (m->op == OP_INSERT) {
		memcpy(buf, l->buf + l->off[m->src], l->len[m->src] + 1);
		n = l->len[m->src] + 1;
	}
	splice_file(path, l, m->line, buf, m->op == OP_DELETE ? 0 : n, m->op == OP_INSERT);
	struct got g = verify_fx(&fx, NULL);
	size_t at = m->at_line >= 0 ? (size_t)m->at_line : m->line;
	expect_one(m->what, &g, m->cls, path, at + 1, at < l->n ? l->off[at] : l->size, l->seq[m->seq_of]);
	lines_free(l);
	fx_free(&fx);
}

static void test_line_mutations(void **state)
{
	unsigned mid = V1.n / 2;
	const size_t k = 20;
	struct lines *ml = lines_of(V1.files[mid]);
	size_t tl = 1; /* a line with a \t escape in its detail */
	while (tl < ml->n && !memmem(ml->buf + ml->off[tl], ml->len[tl], "\\t", 2))
		tl++;
	assert_true(tl < ml->n);
	lines_free(ml);
	const struct mut muts[] = {
		{"delete a line", mid, k, OP_DELETE, .cls = AL_V_DELETED, .at_line = k, .seq_of = k + 1},
		{"delete the first event", mid, 1, OP_DELETE, .cls = AL_V_DELETED, .at_line = 1, .seq_of = 2},
		{"duplicate a line", mid, k + 1, OP_INSERT, .src = k, .cls = AL_V_DUPLICATED, .at_line = k + 1,
		 .seq_of = k},
		{"duplicate a line further on", mid, k + 6, OP_INSERT, .src = k, .cls = AL_V_DUPLICATED,
		 .at_line = k + 6, .seq_of = k},
		{"insert a second record with a seen seq", mid, k + 1, OP_INSERT, .src = k,
		 .from = "\"session\":", .to = "\"session\":9", .cls = AL_V_INSERTED, .at_line = k + 1,
		 .seq_of = k},
		{"insert a forged next record", mid, k + 1, OP_INSERT, .src = k + 1, .from = "\"session\":",
		 .to = "\"session\":9", .cls = AL_V_INSERTED, .at_line = k + 1, .seq_of = k + 1},
		{"insert a header in the middle", mid, k + 1, OP_INSERT, .src = 0, .cls = AL_V_INSERTED,
		 .at_line = k + 1, .seq_of = 0},
		{"insert garbage", mid, k + 1, OP_INSERT, .raw = "garbage", .cls = AL_V_UNPARSEABLE,
		 .at_line = k + 1, .seq_of = k + 1},
		{"insert an empty line", mid, k + 1, OP_INSERT, .raw = "", .cls = AL_V_UNPARSEABLE,
		 .at_line = k + 1, .seq_of = k + 1},
		{"modify a value", mid, k, OP_REPLACE, .from = "\"session\":", .to = "\"session\":1",
		 .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = k},
		{"modify the seq", mid, k, OP_REPLACE, .from = "\"seq\":", .to = "\"seq\":1", .cls = AL_V_MODIFIED,
		 .at_line = -1, .seq_of = k},
		{"modify the hash member", mid, k, OP_REPLACE, .from = "\"hash\":\"", .to = "\"hash\":\"0",
		 .cls = AL_V_NONCANONICAL, .at_line = -1, .seq_of = k}, /* 65 digits */
		{"modify the timestamp", mid, k, OP_REPLACE, .from = "\"@timestamp\":\"20",
		 .to = "\"@timestamp\":\"21", .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = k},
		{"modify the header's prev_seq", mid, 0, OP_REPLACE, .from = "\"prev_seq\":", .to = NULL,
		 .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = 0},
		{"modify the header's prev_hash", mid, 0, OP_REPLACE, .from = "\"prev_hash\":\"", .to = NULL,
		 .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = 0},
		{"modify the header's prev_size", mid, 0, OP_REPLACE, .from = "\"prev_size\":", .to = NULL,
		 .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = 0},
		{"modify the header's chain_id", mid, 0, OP_REPLACE, .from = "\"chain_id\":\"", .to = NULL,
		 .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = 0},
		{"modify the header's prev_name", mid, 0, OP_REPLACE, .from = "Z-", .to = NULL,
		 .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = 0},
		{"modify the hash member", mid, k, OP_REPLACE, .from = "\"hash\":\"", .to = NULL,
		 .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = k},
		{"modify the last hash of a file", mid, 99999, OP_REPLACE, .from = "\"hash\":\"", .to = NULL,
		 .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = 99999},
		{"modify the last record of a file", mid, 99999, OP_REPLACE, .from = "\"session\":", .to = NULL,
		 .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = 99999},
		{"append a forged record to a rotated file", mid, 99998, OP_INSERT, .src = 99999,
		 .from = "\"session\":", .to = NULL, .cls = AL_V_INSERTED, .at_line = 99998, .seq_of = 99999},
		{"downgrade a record's version", mid, k, OP_REPLACE, .from = "\"v\":1", .to = "\"v\":0",
		 .cls = AL_V_VERSION, .at_line = -1, .seq_of = k},
		{"unknown version", mid, k, OP_REPLACE, .from = "\"v\":1", .to = "\"v\":3", .cls = AL_V_VERSION,
		 .at_line = -1, .seq_of = k},
		{"add a key", mid, k, OP_REPLACE, .from = ",\"hash\"", .to = ",\"note\":\"x\",\"hash\"",
		 .cls = AL_V_NONCANONICAL, .at_line = -1, .seq_of = k},
		{"duplicate a key", mid, k, OP_REPLACE, .from = ",\"action\"", .to = ",\"v\":1,\"action\"",
		 .cls = AL_V_NONCANONICAL, .at_line = -1, .seq_of = k},
		{"reorder two keys", mid, k, OP_REPLACE, .from = "\"outcome\":\"success\",\"rv\":\"CKR_OK\"",
		 .to = "\"rv\":\"CKR_OK\",\"outcome\":\"success\"", .cls = AL_V_NONCANONICAL, .at_line = -1,
		 .seq_of = k},
		{"change whitespace", mid, k, OP_REPLACE, .from = ",\"seq\"", .to = ", \"seq\"",
		 .cls = AL_V_NONCANONICAL, .at_line = -1, .seq_of = k},
		{"trailing whitespace", mid, k, OP_REPLACE, .from = "\"}", .to = "\"} ", .cls = AL_V_NONCANONICAL,
		 .at_line = -1, .seq_of = k},
		{"a CR before the newline", mid, k, OP_REPLACE, .from = "\"}", .to = "\"}\r",
		 .cls = AL_V_NONCANONICAL, .at_line = -1, .seq_of = k},
		{"non-canonical escape \\u0043", mid, k, OP_REPLACE, .from = "\"C_", .to = "\"\\u0043_",
		 .cls = AL_V_NONCANONICAL, .at_line = -1, .seq_of = k},
		{"non-canonical escape \\/", mid, k, OP_REPLACE, .from = "\"user\"", .to = "\"us\\/er\"",
		 .cls = AL_V_NONCANONICAL, .at_line = -1, .seq_of = k},
		{"escape \\u0009 for \\t", mid, tl, OP_REPLACE, .from = "\\t", .to = "\\u0009",
		 .cls = AL_V_NONCANONICAL, .at_line = -1, .seq_of = tl},
		{"garbage for a record", mid, k, OP_REPLACE, .raw = "{\"@timestamp\":", .cls = AL_V_UNPARSEABLE,
		 .at_line = -1, .seq_of = k},
	};
	for (size_t i = 0; i < sizeof(muts) / sizeof(muts[0]); i++)
		run_mut(&V1, &muts[i]);

	/* the same on the mixed set, in its v0 part and in its v1 part */
	unsigned v0f = 2, v1f = MIXED.n - 3;
	struct lines *l0 = lines_of(MIXED.files[v0f]), *l1 = lines_of(MIXED.files[v1f]);
	assert_int_equal(l0->version[k], 0);
	assert_int_equal(l1->version[k], 1);
	lines_free(l0);
	lines_free(l1);
	const struct mut mixed[] = {
		{"v0: delete a line", v0f, k, OP_DELETE, .cls = AL_V_DELETED, .at_line = k, .seq_of = k + 1},
		{"v0: modify a value", v0f, k, OP_REPLACE, .from = "\"session\":", .to = "\"session\":1",
		 .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = k},
		{"v0: upgrade a record's version", v0f, k, OP_REPLACE, .from = "\"v\":0", .to = "\"v\":1",
		 .cls = AL_V_MODIFIED, .at_line = -1, .seq_of = k},
		{"v0: whitespace", v0f, k, OP_REPLACE, .from = ",\"seq\"", .to = ", \"seq\"",
		 .cls = AL_V_NONCANONICAL, .at_line = -1, .seq_of = k},
		{"v1 after v0: downgrade", v1f, k, OP_REPLACE, .from = "\"v\":1", .to = "\"v\":0",
		 .cls = AL_V_VERSION, .at_line = -1, .seq_of = k},
		{"v1 after v0: duplicate", v1f, k + 1, OP_INSERT, .src = k, .cls = AL_V_DUPLICATED,
		 .at_line = k + 1, .seq_of = k},
	};
	for (size_t i = 0; i < sizeof(mixed) / sizeof(mixed[0]); i++)
		run_mut(&MIXED, &mixed[i]);
}

/* Two adjacent lines swapped: one finding, `reordered`, at the first of them. */
static void test_swap(void **state)
{
	for (int which = 0; which < 2; which++) {
		const struct fx *base = which ? &MIXED : &V1;
		for (size_t k = 1; k < 40; k += 13) {
			struct fx fx = fx_copy(base);
			unsigned mid = fx.n / 2 + (unsigned)which;
			struct lines *l = lines_of(fx.files[mid]);
			uint8_t *out = malloc(l->size);
			size_t a = l->off[k], la = l->len[k] + 1, lb = l->len[k + 1] + 1;
			memcpy(out, l->buf, l->size);
			memcpy(out + a, l->buf + l->off[k + 1], lb);
			memcpy(out + a + lb, l->buf + l->off[k], la);
			put_file(fx.files[mid], out, l->size);
			struct got g = verify_fx(&fx, NULL);
			expect_one("swap two lines", &g, AL_V_REORDERED, fx.files[mid], k + 1, a, l->seq[k + 1]);
			free(out);
			lines_free(l);
			fx_free(&fx);
		}
	}
}

/* A record moved to an earlier place: one reordered finding where it is. A
 * forged record with a seq of later: inserted. A record moved to a later
 * place: deleted where it is missing, reordered where it turns up (the walk
 * streams: it cannot know at the gap that the record comes later). */
static void test_moves(void **state)
{
	unsigned mid = V1.n / 2;
	struct fx fx = fx_copy(&V1);
	struct lines *l = lines_of(fx.files[mid]);
	uint8_t *out = malloc(l->size + AL_LINE_MAX);
	const size_t a = 10, b = 25; /* line b moves before line a */
	size_t o = l->off[a], lb = l->len[b] + 1;
	struct got g;

	memcpy(out, l->buf, o);
	memcpy(out + o, l->buf + l->off[b], lb);
	memcpy(out + o + lb, l->buf + o, l->off[b] - o);
	memcpy(out + l->off[b] + lb, l->buf + l->off[b] + lb, l->size - l->off[b] - lb);
	put_file(fx.files[mid], out, l->size);
	g = verify_fx(&fx, NULL);
	expect_one("a record moved earlier", &g, AL_V_REORDERED, fx.files[mid], a + 1, l->off[a], l->seq[b]);

	/* a forged copy of a later record put earlier: the original is still there */
	char line[AL_LINE_MAX + 64];
	size_t n = edit_line(l, b, "\"session\":", "\"session\":77", line);
	splice_file(fx.files[mid], l, a, line, n, true);
	g = verify_fx(&fx, NULL);
	expect_one("a forged later record put earlier", &g, AL_V_INSERTED, fx.files[mid], a + 1, l->off[a],
		   l->seq[b]);

	/* line a moves after line b: two findings */
	memcpy(out, l->buf, l->off[a]);
	size_t la = l->len[a] + 1;
	memcpy(out + l->off[a], l->buf + l->off[a] + la, l->off[b] + lb - l->off[a] - la);
	memcpy(out + l->off[b] + lb - la, l->buf + l->off[a], la);
	memcpy(out + l->off[b] + lb, l->buf + l->off[b] + lb, l->size - l->off[b] - lb);
	put_file(fx.files[mid], out, l->size);
	g = verify_fx(&fx, NULL);
	if (!(g.n == 2 && g.f[0].cls == AL_V_DELETED && g.f[0].line == a + 1 && g.f[1].cls == AL_V_REORDERED &&
	      g.f[1].line == b + 1 && g.f[1].seq == l->seq[a])) {
		dump(&g);
		fail_msg("a record moved later");
	}
	free(out);
	lines_free(l);
	fx_free(&fx);
}

static void truncate_to(const char *path, uint64_t size)
{
	assert_int_equal(truncate(path, (off_t)size), 0);
}

static void test_truncation_and_files(void **state)
{
	unsigned mid = V1.n / 2, last = V1.n - 1;
	const size_t k = 15;
	struct fx fx;
	struct lines *l;
	struct got g;

	/* a middle file cut inside a line, and at a line boundary */
	for (int boundary = 0; boundary < 2; boundary++) {
		fx = fx_copy(&V1);
		l = lines_of(fx.files[mid]);
		truncate_to(fx.files[mid], l->off[k] + (boundary ? 0 : 57));
		stream_glued = !boundary;
		g = verify_fx(&fx, NULL);
		stream_glued = false;
		expect_one(boundary ? "middle file cut at a line" : "middle file cut in a line", &g,
			   AL_V_TRUNCATED, fx.files[mid], k + 1, l->off[k], l->seq[k]);
		lines_free(l);
		fx_free(&fx);
	}
	/* the active file cut inside a line */
	fx = fx_copy(&V1);
	l = lines_of(fx.files[last]);
	truncate_to(fx.files[last], l->off[k] + 100);
	g = verify_fx(&fx, NULL);
	expect_one("active file cut in a line", &g, AL_V_TRUNCATED, fx.files[last], k + 1, l->off[k], l->seq[k]);
	lines_free(l);
	fx_free(&fx);

	/* a record appended to a rotated file that chains from its last one: the
	 * next file's header says where the file ended */
	fx = fx_copy(&V1);
	l = lines_of(fx.files[mid]);
	{
		uint8_t dec[AL_LINE_MAX], line[AL_LINE_MAX], work[AL_HASH_LEN + AL_BODY_MAX];
		struct al_parsed p;
		struct al_emit_out eo;
		size_t eoff, z = l->n - 1;
		assert_int_equal(al_parse(l->buf + l->off[z], l->len[z], dec, &p, &eoff), AL_PERR_OK);
		struct al_record r = p.rec;
		r.f[AL_F_SEQ].u++;
		r.plain = 0;
		long len = al_emit(&r, p.hash, line, work, &eo);
		assert_true(len > 0);
		int fd = open(fx.files[mid], O_WRONLY | O_APPEND | O_CLOEXEC);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, line, (size_t)len), len);
		close(fd);
		stream_elsewhere = true;
		g = verify_fx(&fx, NULL);
		stream_elsewhere = false;
		expect_one("a chained record appended to a rotated file", &g, AL_V_INSERTED, fx.files[mid],
			   l->n + 1, l->size, l->seq[z] + 1);
	}
	lines_free(l);
	fx_free(&fx);

	/* lines longer than the walk's 1 MiB buffer and than a record (garbage
	 * holding many "seq": keys, as records run together would): one finding,
	 * and a stream fed in small pieces says the same as the file */
	{
		size_t big = (5u << 19) + 77, mid_len = 20000;
		fx = fx_copy(&V1);
		l = lines_of(fx.files[mid]);
		char *junk = malloc(big + mid_len + 2);
		assert_non_null(junk);
		for (size_t i = 0; i < big + mid_len; i++)
			junk[i] = "{\"seq\":1,a"[i % 11];
		junk[big] = '\n';
		junk[big + mid_len + 1] = '\n';
		splice_file(fx.files[mid], l, 9, junk, big + mid_len + 2, true);
		g = verify_fx(&fx, NULL);
		assert_int_equal(g.n, 1);
		assert_int_equal(g.f[0].cls, AL_V_UNPARSEABLE);
		assert_string_equal(g.f[0].file, fx.files[mid]);
		assert_int_equal(g.f[0].line, 10);
		assert_int_equal(g.f[0].off, l->off[9]);
		/* and a record deleted after them: its line number counts the long
		 * line's pieces the same way in the file and in the stream */
		size_t k2 = l->n - 5, a = l->off[9], b = l->off[k2], e = l->off[k2 + 1], o = 0;
		uint8_t *out = malloc(l->size + big + mid_len + 2);
		assert_non_null(out);
		memcpy(out, l->buf, a);
		o = a;
		memcpy(out + o, junk, big + mid_len + 2);
		o += big + mid_len + 2;
		memcpy(out + o, l->buf + a, b - a);
		o += b - a;
		memcpy(out + o, l->buf + e, l->size - e);
		o += l->size - e;
		put_file(fx.files[mid], out, o);
		free(out);
		free(junk);
		g = verify_fx(&fx, NULL);
		assert_int_equal(g.n, 2);
		assert_int_equal(g.f[1].cls, AL_V_DELETED);
		assert_int_equal(g.f[1].seq, l->seq[k2 + 1]);
		lines_free(l);
		fx_free(&fx);
	}

	/* a rotated file removed: the middle one, the first one */
	unsigned gone[] = {mid, 0};
	for (int i = 0; i < 2; i++) {
		fx = fx_copy(&V1);
		l = lines_of(fx.files[gone[i] + 1]);
		assert_int_equal(unlink(fx.files[gone[i]]), 0);
		char **rest = calloc(fx.n, sizeof(char *));
		unsigned n = 0;
		for (unsigned j = 0; j < fx.n; j++)
			if (j != gone[i])
				rest[n++] = fx.files[j];
		struct al_vresult res = verify_paths(rest, n, &g, NULL);
		expect_one(i ? "first file removed" : "middle file removed", &g, AL_V_MISSING_FILE,
			   fx.files[gone[i] + 1], 1, 0, l->seq[0]);
		al_vresult_free(&res);
		free(rest);
		lines_free(l);
		fx_free(&fx);
	}
}

/* ---- every bit of a few lines ----------------------------------------------- */

/* What a flip must be reported as, decided here from the mutated line alone:
 * the strict parser accepts it (then the hash tells: modified, or a version
 * decrease), jansson reads an object (non-canonical), or neither. */
static enum al_vclass oracle(const uint8_t *line, size_t len, unsigned prev_version)
{
	uint8_t dec[AL_LINE_MAX];
	struct al_parsed p;
	size_t off;
	json_error_t err;
	enum al_perr e = al_parse(line, len, dec, &p, &off);
	if (e == AL_PERR_OK)
		return p.rec.version < prev_version ? AL_V_VERSION : AL_V_MODIFIED;
	if (e == AL_PERR_VERSION)
		return AL_V_VERSION;
	json_t *j = json_loadb((const char *)line, len, JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, &err);
	bool dup = !j && json_error_code(&err) == json_error_duplicate_key;
	bool obj = j && json_is_object(j) && (size_t)err.position == len;
	json_decref(j);
	return dup || obj ? AL_V_NONCANONICAL : AL_V_UNPARSEABLE;
}

/* Flip every bit of line k of file `fi` (inside the header's pad: every
 * 16th byte); each flip: exactly one finding, at that line. */
static unsigned flip_line(struct fx *fx, unsigned fi, size_t k)
{
	struct lines *l = lines_of(fx->files[fi]);
	uint8_t *buf = malloc(l->size);
	unsigned flips = 0;
	size_t a = l->off[k], end = a + l->len[k]; /* the '\n' too */
	const uint8_t *pad = memmem(l->buf + a, l->len[k], "\"pad\":\"", 7);
	unsigned prev_version = k ? l->version[k - 1] : fi ? 1 : 0;

	assert_true(k < l->n);

	if (k == 0 && fi > 0) { /* the version before a header: the last line of the file before */
		struct lines *pl = lines_of(fx->files[fi - 1]);
		prev_version = pl->version[pl->n - 1];
		lines_free(pl);
	}
	/* sanitizer builds (AUDITLOG_TEST_SCALE=n): every bit of every n-th byte */
	size_t step = tu_test_scale();
	int fd = open(fx->files[fi], O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	memcpy(buf, l->buf, l->size);
	par_sparse = true;
	for (size_t i = a; i <= end; i++) {
		if (pad && i > (size_t)(pad - l->buf) + 8 && i < end - 80 && i % 16)
			continue;
		if (step > 1 && i % step && i != end)
			continue;
		for (int bit = 0; bit < 8; bit++) {
			buf[i] = l->buf[i] ^ (uint8_t)(1u << bit);
			assert_int_equal(pwrite(fd, buf + i, 1, (off_t)i), 1);
			enum al_vclass want;
			if (i == end) /* the '\n': two lines in one, or a file ending in a line */
				want = end + 1 == l->size ? AL_V_TRUNCATED : AL_V_UNPARSEABLE;
			else
				want = oracle(buf + a, l->len[k], prev_version);
			/* a rotated file's last '\n' flipped: as a stream, its last line runs
			 * into the next file's header */
			stream_glued = i == end && end + 1 == l->size && fi + 1 < fx->n;
			struct got g = verify_fx(fx, NULL);
			stream_glued = false;
			char what[96];
			snprintf(what, sizeof(what), "file %u line %zu byte %zu bit %d", fi, k + 1, i - a, bit);
			if (!(g.n == 1 && g.f[0].cls == want && !strcmp(g.f[0].file, fx->files[fi]) &&
			      g.f[0].line == k + 1 && g.f[0].off == a && (g.f[0].has_seq ? g.f[0].seq == l->seq[k] :
							     l->seq[k] == 0))) {
				print_message("%s: %s\n", what, al_vclass_name(want));
				expect_one(what, &g, want, fx->files[fi], k + 1, a, l->seq[k]);
			}
			flips++;
		}
		buf[i] = l->buf[i];
		assert_int_equal(pwrite(fd, buf + i, 1, (off_t)i), 1);
	}
	par_sparse = false;
	close(fd);
	free(buf);
	lines_free(l);
	return flips;
}

static void test_bit_flips(void **state)
{
	struct fx fx = fx_v1(70, 8u << 10); /* small: one verification per flip */
	unsigned flips = 0;
	assert_true(fx.n >= 3);
	struct lines *l = lines_of(fx.files[1]);
	size_t n1 = l->n;
	lines_free(l);
	flips += flip_line(&fx, 0, 0);      /* the chain's first header */
	flips += flip_line(&fx, 1, 0);      /* a header that links to its predecessor */
	flips += flip_line(&fx, 1, 5);      /* an event */
	flips += flip_line(&fx, 1, n1 - 1); /* the last event of a rotated file */
	l = lines_of(fx.files[fx.n - 1]);
	flips += flip_line(&fx, l->n >= 3 ? fx.n - 1 : fx.n - 2, 2); /* in the active file if it has one */
	lines_free(l);
	fx_free(&fx);

	fx = fx_mixed(30, 8u << 10);
	l = lines_of(fx.files[1]);
	assert_int_equal(l->version[4], 0);
	lines_free(l);
	flips += flip_line(&fx, 1, 4); /* a v0 event */
	fx_free(&fx);
	print_message("%u single-bit flips, each found once at its line\n", flips);
	{
		/* sanitizer builds flip every bit of every n-th byte only */
		assert_true(flips * tu_test_scale() > 10000u);
	}
}

/* ---- the attacker who recomputes the chain ------------------------------------ */

enum rw_act { RW_KEEP, RW_DROP, RW_NUL };

struct rw {
	/* per record (seq as in the original): keep it (maybe edited), drop it,
	 * or overwrite it with NUL bytes that a forged recovery record names */
	enum rw_act (*edit)(struct rw *rw, struct al_record *rec, uint64_t seq);
	uint64_t from, to; /* the records the edit is about */
	bool forge_empty_recovery; /* after dropped records: a recovery record naming 0 bytes */
	/* out: where the forged recovery record landed */
	char *rec_file;
	uint64_t rec_line, rec_off, rec_seq;
};

/* Rewrite the whole chain: every record re-emitted with the format layer
 * (al_emit), seqs renumbered, each header's prev_* recomputed. */
static void rewrite(struct fx *fx, struct rw *rw)
{
	uint8_t prev[AL_HASH_LEN] = {0}, line[AL_LINE_MAX], dec[AL_LINE_MAX];
	uint8_t *work = malloc(AL_HASH_LEN + AL_BODY_MAX);
	uint64_t next = 0, prev_size = 0;
	char last_ts[AL_TS_LEN];

	for (unsigned fi = 0; fi < fx->n; fi++) {
		struct lines *l = lines_of(fx->files[fi]);
		uint8_t *out = malloc(2 * l->size + 65536);
		size_t o = 0, lineno = 0, nul_start = 0;
		bool nul = false, dropped = false;
		for (size_t k = 0; k < l->n; k++) {
			struct al_parsed p;
			struct al_emit_out eo;
			size_t eoff;
			assert_int_equal(al_parse(l->buf + l->off[k], l->len[k], dec, &p, &eoff), AL_PERR_OK);
			uint64_t orig = p.rec.f[AL_F_SEQ].u;
			enum rw_act act = rw->edit ? rw->edit(rw, &p.rec, orig) : RW_KEEP;
			if (act == RW_DROP) {
				dropped = true;
				continue;
			}
			if (act == RW_NUL) {
				if (!nul)
					nul_start = o;
				nul = true;
				memset(out + o, 0, l->len[k] + 1);
				o += l->len[k] + 1;
				continue;
			}
			if (nul || (dropped && rw->forge_empty_recovery)) {
				/* the forged crash repair: chained from the last record kept */
				uint8_t md[AL_HASH_LEN];
				char hex[64];
				size_t dl = nul ? o - nul_start : 0;
				SHA256(out + nul_start, dl, md);
				al_hex(md, AL_HASH_LEN, hex);
				if (nul)
					out[o++] = '\n';
				struct al_record r = {.version = p.rec.version, .type = AL_T_RECOVERY};
				r.present = AL_BIT(AL_F_TIMESTAMP) | AL_BIT(AL_F_SEQ) | AL_BIT(AL_F_LAST_SEQ) |
					    AL_BIT(AL_F_DAMAGE_OFFSET) | AL_BIT(AL_F_DAMAGE_LENGTH) |
					    AL_BIT(AL_F_DAMAGE_SHA256);
				r.f[AL_F_TIMESTAMP] = (struct al_val){.p = (const uint8_t *)last_ts, .n = AL_TS_LEN};
				r.f[AL_F_SEQ].u = next;
				r.f[AL_F_LAST_SEQ].u = next - 1;
				r.f[AL_F_DAMAGE_OFFSET].u = nul ? nul_start : o;
				r.f[AL_F_DAMAGE_LENGTH].u = dl;
				r.f[AL_F_DAMAGE_SHA256] = (struct al_val){.p = (const uint8_t *)hex, .n = 64};
				long n = al_emit(&r, prev, line, work, &eo);
				assert_true(n > 0);
				rw->rec_file = fx->files[fi];
				rw->rec_line = ++lineno + (nul ? 1 : 0);
				rw->rec_off = o;
				rw->rec_seq = next++;
				memcpy(out + o, line, (size_t)n);
				o += (size_t)n;
				memcpy(prev, eo.hash, AL_HASH_LEN);
				nul = dropped = false;
			}
			p.rec.f[AL_F_SEQ].u = next++;
			if (p.rec.type == AL_T_HEADER && (p.rec.present & AL_BIT(AL_F_PREV_SEQ))) {
				char hex[64];
				al_hex(prev, AL_HASH_LEN, hex);
				p.rec.f[AL_F_PREV_SEQ].u = next - 2;
				p.rec.f[AL_F_PREV_SIZE].u = prev_size;
				memcpy((uint8_t *)p.rec.f[AL_F_PREV_HASH].p, hex, 64);
			}
			long n = al_emit(&p.rec, prev, line, work, &eo);
			assert_true(n > 0);
			memcpy(out + o, line, (size_t)n);
			o += (size_t)n;
			lineno++;
			memcpy(prev, eo.hash, AL_HASH_LEN);
			memcpy(last_ts, p.rec.f[AL_F_TIMESTAMP].p, AL_TS_LEN);
		}
		put_file(fx->files[fi], out, o);
		prev_size = o;
		free(out);
		lines_free(l);
	}
	free(work);
}

static enum rw_act edit_session(struct rw *rw, struct al_record *rec, uint64_t seq)
{
	if (seq == rw->from)
		rec->f[AL_F_SESSION].u = 4242;
	return RW_KEEP;
}

static enum rw_act downgrade(struct rw *rw, struct al_record *rec, uint64_t seq)
{
	if (seq >= rw->from)
		rec->version = 0;
	return RW_KEEP;
}

static enum rw_act ts_back(struct rw *rw, struct al_record *rec, uint64_t seq)
{
	static const char early[] = "2001-01-01T00:00:00.000000000Z";
	if (seq == rw->from)
		rec->f[AL_F_TIMESTAMP] = (struct al_val){.p = (const uint8_t *)early, .n = AL_TS_LEN};
	return RW_KEEP;
}

static enum rw_act drop_range(struct rw *rw, struct al_record *rec, uint64_t seq)
{
	return seq >= rw->from && seq <= rw->to ? RW_DROP : RW_KEEP;
}

static enum rw_act nul_range(struct rw *rw, struct al_record *rec, uint64_t seq)
{
	return seq >= rw->from && seq <= rw->to ? RW_NUL : RW_KEEP;
}

/* records 10..20 of the middle file: events, in one file */
static void mid_range(const struct fx *fx, struct rw *rw)
{
	struct lines *l = lines_of(fx->files[fx->n / 2]);
	rw->from = l->seq[10];
	rw->to = l->seq[20];
	lines_free(l);
}

static struct al_vopts head_of(const struct fx *fx)
{
	struct got g;
	struct al_vresult res = verify_paths(fx->files, fx->n, &g, NULL);
	expect_none("before the attack", &g);
	struct al_vopts o = {.has_expect_head = true, .expect_seq = res.chain[0].last_seq};
	memcpy(o.expect_hash, res.chain[0].head_hash, AL_HASH_LEN);
	al_vresult_free(&res);
	return o;
}

/* Exactly one finding of this class, about the expected head (no place in a file). */
static void expect_head_finding(const char *what, const struct got *g, enum al_vclass cls, uint64_t seq)
{
	if (g->n == 1 && g->f[0].cls == cls && g->f[0].seq == seq)
		return;
	print_message("%s: want one %s about seq %llu\n", what, al_vclass_name(cls), (unsigned long long)seq);
	dump(g);
	fail_msg("%s", what);
}

static void test_recomputed_chain(void **state)
{
	struct fx fx = fx_copy(&V1);
	struct al_vopts head = head_of(&fx);
	struct got g;

	/* edit one record, recompute the chain to the end (headers too) */
	struct rw rw = {.edit = edit_session, .from = 300};
	rewrite(&fx, &rw);
	g = verify_fx(&fx, NULL);
	expect_none("recomputed chain, no anchor (undetectable by design)", &g);
	g = verify_fx(&fx, &head);
	expect_head_finding("recomputed chain, --expect-head", &g, AL_V_MODIFIED, head.expect_seq);
	fx_free(&fx);

	/* the tail cut at a line boundary */
	fx = fx_copy(&V1);
	head = head_of(&fx);
	struct lines *l = lines_of(fx.files[fx.n - 1]);
	truncate_to(fx.files[fx.n - 1], l->off[l->n - 3]);
	g = verify_fx(&fx, NULL);
	expect_none("tail cut at a line, no anchor (undetectable by design)", &g);
	g = verify_fx(&fx, &head);
	expect_head_finding("tail cut, --expect-head", &g, AL_V_TRUNCATED, head.expect_seq);
	lines_free(l);
	fx_free(&fx);

	/* records deleted, the rest renumbered and rehashed */
	fx = fx_copy(&V1);
	head = head_of(&fx);
	rw = (struct rw){.edit = drop_range};
	mid_range(&fx, &rw);
	rewrite(&fx, &rw);
	g = verify_fx(&fx, NULL);
	expect_none("deleted and renumbered, no anchor (undetectable by design)", &g);
	g = verify_fx(&fx, &head);
	expect_head_finding("deleted and renumbered, --expect-head", &g, AL_V_TRUNCATED, head.expect_seq);
	fx_free(&fx);
}

/* Blocks smaller than a line: every line is the first of its block, so the
 * walk decides for each line whether it may take the workers' check
 * (verify_par.c): a version or a timestamp going back across a block edge,
 * --from, --expect-head and --min-version must give what the walk alone
 * gives (verify_paths compares the two). */
static void test_block_edges(void **state)
{
	struct al_vopts o = {.block = 200};
	struct got g;
	struct lines *l = lines_of(V1.files[V1.n / 2]);
	uint64_t seq = l->seq[7];
	struct al_vresult res;

	lines_free(l);
	g = verify_fx(&V1, &o);
	expect_none("clean, a block a line", &g);
	res = verify_paths(V1.files, V1.n, &g, &o);
	o.has_expect_head = true;
	o.expect_seq = res.chain[0].last_seq - 3;
	memcpy(o.expect_hash, res.chain[0].head_hash, AL_HASH_LEN); /* not that record's */
	al_vresult_free(&res);
	g = verify_fx(&V1, &o);
	expect_head_finding("a wrong expected head, a block a line", &g, AL_V_MODIFIED, o.expect_seq);
	o.has_expect_head = false;
	o.has_from = true;
	o.from_seq = seq;
	memset(o.from_hash, 0, AL_HASH_LEN);
	g = verify_fx(&V1, &o);
	assert_int_equal(g.n, 1);
	o.has_from = false;
	o.min_version = 1;
	g = verify_fx(&MIXED, &o);
	assert_true(g.n >= 1);
	assert_int_equal(g.f[0].cls, AL_V_VERSION);
	o.min_version = 0;

	enum rw_act (*edits[])(struct rw *, struct al_record *, uint64_t) = {downgrade, ts_back};
	for (int i = 0; i < 2; i++) {
		struct fx fx = fx_copy(&V1);
		struct rw rw = {.edit = edits[i], .from = seq};
		rewrite(&fx, &rw);
		g = verify_fx(&fx, &o);
		assert_int_equal(g.n, 1);
		assert_int_equal(g.f[0].cls, i ? AL_V_REORDERED : AL_V_VERSION);
		assert_int_equal(g.f[0].seq, seq);
		fx_free(&fx);
	}
}

static void test_downgrade_attack(void **state)
{
	struct fx fx = fx_copy(&V1);
	struct al_vopts head = head_of(&fx);
	struct got g;

	/* from record 700 on, v0 with a recomputed chain: the decrease shows */
	struct rw rw = {.edit = downgrade, .from = 700};
	rewrite(&fx, &rw);
	char *file = NULL;
	size_t line = 0, off = 0;
	for (unsigned i = 0; i < fx.n && !file; i++) {
		struct lines *l = lines_of(fx.files[i]);
		for (size_t k = 0; k < l->n && !file; k++)
			if (l->seq[k] == 700) {
				file = fx.files[i];
				line = k;
				off = l->off[k];
			}
		lines_free(l);
	}
	assert_non_null(file);
	g = verify_fx(&fx, NULL);
	expect_one("downgrade from seq 700, recomputed", &g, AL_V_VERSION, file, line + 1, off, 700);
	fx_free(&fx);

	/* the whole chain rewritten as v0: only --min-version 1 or an anchor sees it */
	fx = fx_copy(&V1);
	rw = (struct rw){.edit = downgrade, .from = 0};
	rewrite(&fx, &rw);
	g = verify_fx(&fx, NULL);
	expect_none("whole chain downgraded, no anchor", &g);
	struct al_vopts mv = {.min_version = 1};
	g = verify_fx(&fx, &mv);
	assert_true(g.n > 1000);
	for (unsigned i = 0; i < 16; i++)
		assert_int_equal(g.f[i].cls, AL_V_VERSION);
	g = verify_fx(&fx, &head);
	expect_head_finding("whole chain downgraded, --expect-head", &g, AL_V_MODIFIED, head.expect_seq);
	fx_free(&fx);
}

static void test_forged_recovery(void **state)
{
	struct fx fx = fx_copy(&V1);
	struct al_vopts head = head_of(&fx);
	struct got g;

	/* records deleted and a recovery record put in their place that names
	 * no damage: no crash leaves that */
	struct rw rw = {.edit = drop_range, .forge_empty_recovery = true};
	mid_range(&fx, &rw);
	rewrite(&fx, &rw);
	assert_non_null(rw.rec_file);
	g = verify_fx(&fx, NULL);
	expect_one("recovery record naming no damage", &g, AL_V_INSERTED, rw.rec_file, rw.rec_line, rw.rec_off,
		   rw.rec_seq);
	fx_free(&fx);

	/* records overwritten with NUL bytes, a recovery record naming them
	 * exactly, the rest renumbered: a crash repair cannot be told from this
	 * forgery; it is reported (recovered: exit 0, 1 with --strict), and the
	 * exported head catches it */
	fx = fx_copy(&V1);
	rw = (struct rw){.edit = nul_range};
	mid_range(&fx, &rw);
	rewrite(&fx, &rw);
	g = verify_fx(&fx, NULL);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.f[0].cls, AL_V_RECOVERED);
	assert_false(al_vclass_is_integrity(AL_V_RECOVERED, false));
	assert_true(al_vclass_is_integrity(AL_V_RECOVERED, true));
	g = verify_fx(&fx, &head);
	assert_int_equal(g.n, 2);
	assert_int_equal(g.f[0].cls, AL_V_RECOVERED);
	assert_int_equal(g.f[1].cls, AL_V_TRUNCATED);
	fx_free(&fx);
}


/* ---- whole chains: one first file, anchors bound to chains -------------------- */

/* A fixture with one more file: dir/name holding bytes [0, len) of src
 * (len 0: all of it). */
static struct fx fx_plus(const struct fx *src, unsigned from, const char *name, size_t len)
{
	struct fx fx = fx_copy(src);
	size_t n;
	uint8_t *buf = tu_read_file(fx.files[from], &n);
	assert_non_null(buf);
	fx.files = realloc(fx.files, (fx.n + 2) * sizeof(char *));
	fx.files[fx.n] = tu_path(fx.dir, name);
	put_file(fx.files[fx.n], buf, len ? len : n);
	fx.n++;
	free(buf);
	return fx;
}

static bool has_finding(const struct got *g, enum al_vclass cls, const char *file, uint64_t line, uint64_t seq)
{
	for (unsigned i = 0; i < g->n && i < 16; i++)
		if (g->f[i].cls == cls && (!file || strcmp(g->f[i].file, file) == 0) &&
		    (line == UINT64_MAX || g->f[i].line == line) && (seq == UINT64_MAX || g->f[i].seq == seq))
			return true;
	return false;
}

static void want_finding(const char *what, const struct got *g, enum al_vclass cls, const char *file,
			 uint64_t line, uint64_t seq)
{
	if (has_finding(g, cls, file, line, seq))
		return;
	print_message("%s: want a %s finding at %s line %lld seq %lld\n", what, al_vclass_name(cls),
		      file ? file : "*", (long long)line, (long long)seq);
	dump(g);
	fail_msg("%s", what);
}

static struct al_vresult verify_set(const struct fx *fx, struct got *g, const struct al_vopts *base)
{
	return verify_paths(fx->files, fx->n, g, base);
}

static enum rw_act new_chain_id(struct rw *rw, struct al_record *rec, uint64_t seq)
{
	if (rec->type == AL_T_HEADER)
		memcpy((uint8_t *)rec->f[AL_F_CHAIN_ID].p, "0123456789abcdef0123456789abcdef", 32);
	return edit_session(rw, rec, seq);
}

static void test_decoy_files(void **state)
{
	struct fx one = fx_v1(400, 0), fx; /* one file, no rotation */
	struct al_vresult ref, res;
	struct got g;
	uint64_t base_records;

	ref = verify_set(&V1, &g, NULL);
	expect_none("the rotated set", &g);
	base_records = ref.records;

	/* a copy of the first rotated file under another name, and a header-only copy */
	for (int hdr_only = 0; hdr_only < 2; hdr_only++) {
		struct lines *l = lines_of(V1.files[0]);
		fx = fx_plus(&V1, 0, hdr_only ? "first-header-copy" : "first-copy", hdr_only ? l->len[0] + 1 : 0);
		res = verify_set(&fx, &g, NULL);
		want_finding("a second first file", &g, AL_V_INSERTED, fx.files[fx.n - 1], 1, 0);
		assert_int_equal(res.records, base_records); /* nothing counted twice */
		assert_int_equal(res.chains, 1);
		assert_int_equal(res.chain[0].last_seq, ref.chain[0].last_seq);
		assert_memory_equal(res.chain[0].head_hash, ref.chain[0].head_hash, AL_HASH_LEN);
		al_vresult_free(&res);
		lines_free(l);
		fx_free(&fx);
	}

	/* a stale copy of the active file: its first 100 lines as audit.log.bak */
	{
		struct lines *l = lines_of(one.files[0]);
		fx = fx_plus(&one, 0, "audit.log.bak", l->off[100]);
		res = verify_set(&fx, &g, NULL);
		want_finding("a stale copy of the active file", &g, AL_V_INSERTED, fx.files[1], 1, 0);
		assert_false(has_finding(&g, AL_V_FORKED, NULL, UINT64_MAX, UINT64_MAX));
		assert_int_equal(res.records, l->n);
		assert_int_equal(res.chain[0].last_seq, l->seq[l->n - 1]);
		al_vresult_free(&res);
		lines_free(l);
		fx_free(&fx);
	}

	/* audit.log rewritten (one record edited, the chain recomputed) beside its
	 * original bytes as audit.log~: the anchor is not fooled by the copy */
	for (int new_id = 0; new_id < 2; new_id++) {
		struct al_vopts head;
		res = verify_set(&one, &g, NULL);
		head = (struct al_vopts){.has_expect_head = true, .expect_seq = res.chain[0].last_seq};
		memcpy(head.expect_hash, res.chain[0].head_hash, AL_HASH_LEN);
		al_vresult_free(&res);

		fx = fx_plus(&one, 0, "audit.log~", 0);
		struct fx live = {.n = 1, .files = fx.files}; /* rewrite audit.log only */
		struct rw rw = {.edit = new_id ? new_chain_id : edit_session, .from = 300};
		rewrite(&live, &rw);
		res = verify_set(&fx, &g, &head);
		assert_true(g.n > 0);
		if (!new_id) {
			/* one chain, two first files: the copy is inserted, the histories
			 * fork at seq 300, and the live file's head is not the anchor */
			want_finding("rewrite beside its original", &g, AL_V_INSERTED, fx.files[1], 1, 0);
			want_finding("rewrite beside its original", &g, AL_V_FORKED, NULL, UINT64_MAX, 300);
			want_finding("rewrite beside its original", &g, AL_V_MODIFIED, NULL, 0, head.expect_seq);
			assert_int_equal(res.chains, 1);
		} else {
			/* a new chain id: two chains; the anchor binds to the live
			 * file's (audit.log: a rewrite), the other is unanchored */
			assert_int_equal(res.chains, 2);
			want_finding("rewrite with a new chain id", &g, AL_V_MODIFIED, NULL, 0, head.expect_seq);
			want_finding("rewrite with a new chain id", &g, AL_V_UNANCHORED, fx.files[1], 0, UINT64_MAX);
			/* bound by chain id to the live file's chain, it is a rewrite */
			struct al_vanchor a = {.has_chain = true, .seq = head.expect_seq};
			memcpy(a.chain_id, "0123456789abcdef0123456789abcdef", 33);
			memcpy(a.hash, head.expect_hash, AL_HASH_LEN);
			struct al_vopts bound = {.anchors = &a, .n_anchors = 1};
			al_vresult_free(&res);
			res = verify_set(&fx, &g, &bound);
			want_finding("anchor bound to the live chain", &g, AL_V_MODIFIED, NULL, 0, head.expect_seq);
			want_finding("anchor bound to the live chain", &g, AL_V_UNANCHORED, fx.files[1], 0, UINT64_MAX);
			/* --one-chain: more than one chain is a finding of its own */
			struct al_vopts oc = {.one_chain = true};
			al_vresult_free(&res);
			res = verify_set(&fx, &g, &oc);
			want_finding("--one-chain", &g, AL_V_EXTRA_CHAIN, NULL, 0, UINT64_MAX);
			al_vresult_free(&res);
			res = verify_set(&fx, &g, NULL);
			expect_none("two chains, each intact", &g);
		}
		al_vresult_free(&res);
		fx_free(&fx);
	}
	al_vresult_free(&ref);
	fx_free(&one);
}

/* v2 in blocks: the workers check runs of v2 events, and the walk takes each
 * run in one step, appending its hashes to the chain's tree; seals, trees
 * and checkpoints it checks line by line (verify_par.c). A sealed log from the
 * library, verified with and without workers (verify_paths compares the two,
 * finding for finding), the workers taking over a third of it; then bit flips in an
 * event, a seal, a tree and a checkpoint record, each compared the same way. */
static void test_v2_blocks(void **state)
{
	struct fx fx = {.dir = tu_mkdtemp()};
	char *path = tu_path(fx.dir, "audit.log");
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;

	tu_v2_config_shared(cfg);
	assert_int_equal(auditlog_config_set_format_version(cfg, 2), 0);
	assert_int_equal(auditlog_config_set_rotate_bytes(cfg, 64u << 10), 0);
	assert_int_equal(auditlog_config_set_checkpoint_interval(cfg, 90, 0), 0);
	/* batches of 40 events, each ended by a flush: a seal every 40 (the
	 * window holds a batch while max_batch_bytes, 1 MiB here, holds 128 of
	 * the longest lines) */
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, 1u << 20), 0);
	assert_int_equal(auditlog_config_set_async_coalesce_us(cfg, AUDITLOG_ASYNC_COALESCE_MAX_US), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	for (unsigned i = 0; i < 600; i++) {
		struct auditlog_event ev = tu_event(i % 3 ? "C_Sign" : "C_Encrypt", i);
		assert_int_equal(auditlog_record(log, &ev), 0);
		if (i % 40 == 39)
			assert_int_equal(auditlog_flush(log), 0);
	}
	assert_int_equal(auditlog_close(log), 0);
	free(path);
	fx_load(&fx);
	assert_true(fx.n >= 3);

	static const uint64_t blocks[] = {4096, 1777};
	struct got g;
	for (unsigned b = 0; b < 2; b++) {
		struct al_vopts o = {.block = blocks[b]};
		uint64_t before = taken_total;
		struct al_vresult res = verify_paths(fx.files, fx.n, &g, &o);
		expect_none("a clean v2 log", &g);
		assert_true(res.records > 600);
		print_message("block %llu: %llu of %llu records taken\n", (unsigned long long)blocks[b],
			      (unsigned long long)(taken_total - before), (unsigned long long)res.records);
		assert_true(taken_total - before > res.records / 3);
		al_vresult_free(&res);
	}

	/* in the second file: its first event, seal, tree and checkpoint */
	static const char *const types[] = {"\"type\":\"event\"", "\"type\":\"seal\"",
					    "\"type\":\"tree\"", "\"type\":\"checkpoint\""};
	struct lines *l = lines_of(fx.files[1]);
	unsigned runs = 0;
	for (unsigned t = 0; t < 4; t++) {
		size_t k = 1;
		while (k < l->n && !memmem(l->buf + l->off[k], l->len[k], types[t], strlen(types[t])))
			k++;
		assert_true(k < l->n);
		int fd = open(fx.files[1], O_WRONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		for (size_t i = l->off[k]; i < l->off[k] + l->len[k]; i += 5 * tu_test_scale()) {
			uint8_t c = l->buf[i] ^ (uint8_t)(1u << (i % 8));
			assert_int_equal(pwrite(fd, &c, 1, (off_t)i), 1);
			struct al_vopts o = {.block = blocks[i % 2]};
			struct al_vresult res = verify_paths(fx.files, fx.n, &g, &o);
			assert_true(g.n >= 1);
			al_vresult_free(&res);
			assert_int_equal(pwrite(fd, l->buf + i, 1, (off_t)i), 1);
			runs++;
		}
		close(fd);
	}
	lines_free(l);
	print_message("v2 in blocks: %u flips, the same with and without workers\n", runs);
	fx_free(&fx);
}

/* A damaged line stands for the records that really are in it: a line of
 * garbage with five "seq": in it, where one record was, must not hide the
 * four records deleted after it. */
static void test_damage_hides_no_deletion(void **state)
{
	struct fx fx = fx_copy(&V1);
	unsigned mid = fx.n / 2;
	struct lines *l = lines_of(fx.files[mid]);
	const size_t k = 10;
	static const char junk[] = "xx\"seq\":1,\"seq\":2,\"seq\":3,\"seq\":4,\"seq\":5\n";
	struct got g;

	assert_true(l->n > k + 6);
	size_t rest = l->off[k + 5];
	uint8_t *out = malloc(l->size + sizeof(junk));
	memcpy(out, l->buf, l->off[k]);
	memcpy(out + l->off[k], junk, sizeof(junk) - 1);
	memcpy(out + l->off[k] + sizeof(junk) - 1, l->buf + rest, l->size - rest);
	put_file(fx.files[mid], out, l->off[k] + sizeof(junk) - 1 + l->size - rest);
	free(out);
	struct al_vresult res = verify_paths(fx.files, fx.n, &g, NULL);
	want_finding("garbage line, then 4 records deleted", &g, AL_V_UNPARSEABLE, fx.files[mid], k + 1,
		     l->seq[k]);
	want_finding("garbage line, then 4 records deleted", &g, AL_V_DELETED, fx.files[mid], k + 2,
		     l->seq[k + 5]);
	al_vresult_free(&res);
	lines_free(l);
	fx_free(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean),
		cmocka_unit_test(test_line_mutations),
		cmocka_unit_test(test_swap),
		cmocka_unit_test(test_moves),
		cmocka_unit_test(test_truncation_and_files),
		cmocka_unit_test(test_bit_flips),
		cmocka_unit_test(test_recomputed_chain),
		cmocka_unit_test(test_downgrade_attack),
		cmocka_unit_test(test_block_edges),
		cmocka_unit_test(test_forged_recovery),
		cmocka_unit_test(test_decoy_files),
		cmocka_unit_test(test_damage_hides_no_deletion),
		cmocka_unit_test(test_v2_blocks),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, setup, teardown);
}
