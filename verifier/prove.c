/* SPDX-License-Identifier: MIT */
/* Evidence bundles (docs/format.md 18.4): written from a log, checked offline. */

#include "prove.h"

#include "cli.h"
#include "format.h"
#include "format_v2.h"
#include "merkle.h"
#include "note.h"
#include "verify.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUNDLE_MAX (1u << 20)

/* ---- the log, read for proving ------------------------------------------ */

/* where a line is: its file (index in the inputs) and byte offset */
struct ploc {
	uint32_t file;
	uint64_t off;
};

struct prec {
	uint64_t seq;
	uint8_t hash[AL_HASH_LEN];
	uint8_t version;
	struct ploc at;
};

struct pcp {
	uint64_t seq, size, first_seq;
	uint8_t *note;
	size_t len;
	struct ploc at;
};

/* a line of the wanted seq (crash damage may hold another one) */
struct pline {
	uint8_t *line;
	size_t len;
	struct ploc at;
};

/* the bytes a recovery record names as crash damage (docs/format.md 2.4) */
struct pdmg {
	uint32_t file;
	uint64_t off, len;
};

struct plog {
	struct prec *r;
	size_t n, cap;
	struct pcp *cp;
	size_t ncp, capcp;
	uint64_t want; /* the record whose line is kept (UINT64_MAX: none) */
	struct pline *cand;
	size_t ncand;
	struct pdmg *dmg;
	size_t ndmg;
	uint8_t *line; /* the wanted record's line, once damage is left out */
	size_t line_len;
};

static void plog_free(struct plog *l)
{
	for (size_t i = 0; i < l->ncp; i++)
		free(l->cp[i].note);
	free(l->cp);
	free(l->r);
	for (size_t i = 0; i < l->ncand; i++)
		free(l->cand[i].line);
	free(l->cand);
	free(l->dmg);
}

static bool damaged(const struct plog *l, struct ploc at)
{
	for (size_t i = 0; i < l->ndmg; i++)
		if (l->dmg[i].file == at.file && at.off >= l->dmg[i].off && at.off - l->dmg[i].off < l->dmg[i].len)
			return true;
	return false;
}

/* grow *a (n used, *cap allocated, elements of sz bytes) by one: 0 or -ENOMEM */
static int grow(void **a, size_t n, size_t *cap, size_t sz)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? 2 * *cap : 16;
	void *g = realloc(*a, c * sz);
	if (!g)
		return -ENOMEM;
	*a = g;
	*cap = c;
	return 0;
}

static int cmp_rec(const void *a, const void *b)
{
	uint64_t x = ((const struct prec *)a)->seq, y = ((const struct prec *)b)->seq;

	return x < y ? -1 : x > y;
}

static const struct prec *find_rec(const struct plog *l, uint64_t seq)
{
	struct prec k = {.seq = seq};

	return l->n ? bsearch(&k, l->r, l->n, sizeof(k), cmp_rec) : NULL;
}

/* One line of the log. Lines that do not parse (torn or repaired crash
 * damage) are no records and no leaves: skipped. */
static int take_line(struct plog *l, const uint8_t *s, size_t len, struct ploc at, uint8_t *dec,
		     struct al_parsed *p, size_t *capcand, size_t *capdmg)
{
	size_t off;

	if (al_parse(s, len, dec, p, &off) != AL_PERR_OK)
		return 0;
	if (grow((void **)&l->r, l->n, &l->cap, sizeof(*l->r)) < 0)
		return -ENOMEM;
	struct prec *r = &l->r[l->n++];
	r->seq = p->rec.f[AL_F_SEQ].u;
	r->version = p->rec.version;
	r->at = at;
	memcpy(r->hash, p->hash, AL_HASH_LEN);
	if (r->seq == l->want) {
		if (grow((void **)&l->cand, l->ncand, capcand, sizeof(*l->cand)) < 0)
			return -ENOMEM;
		struct pline *c = &l->cand[l->ncand];
		if (!(c->line = malloc(len)))
			return -ENOMEM;
		memcpy(c->line, s, len);
		c->len = len;
		c->at = at;
		l->ncand++;
	}
	if (p->rec.type == AL_T_RECOVERY) {
		if (grow((void **)&l->dmg, l->ndmg, capdmg, sizeof(*l->dmg)) < 0)
			return -ENOMEM;
		l->dmg[l->ndmg++] = (struct pdmg){at.file, p->rec.f[AL_F_DAMAGE_OFFSET].u,
						  p->rec.f[AL_F_DAMAGE_LENGTH].u};
	}
	if (p->rec.version == 2 && p->rec.type == AL_T_CHECKPOINT) {
		if (grow((void **)&l->cp, l->ncp, &l->capcp, sizeof(*l->cp)) < 0)
			return -ENOMEM;
		struct pcp *c = &l->cp[l->ncp];
		c->at = at;
		const struct al_val *nv = &p->rec.f[AL_F_NOTE];
		c->seq = r->seq;
		c->size = p->rec.f[AL_F_SIZE].u;
		c->first_seq = p->rec.f[AL_F_FIRST_SEQ].u;
		if (!(c->note = malloc(nv->n ? nv->n : 1)))
			return -ENOMEM;
		memcpy(c->note, nv->p, nv->n);
		c->len = nv->n;
		l->ncp++;
	}
	return 0;
}

/* read_log's walk of the lines (cli_each_line) */
struct log_walk {
	struct plog *l;
	size_t capcand, capdmg;
	uint8_t dec[AL_LINE_MAX];
	struct al_parsed p;
};

static int log_line(void *ctx, unsigned file, uint64_t line, uint64_t pos, const char *s, size_t len)
{
	struct log_walk *w = ctx;
	int r = take_line(w->l, (const uint8_t *)s, len, (struct ploc){file, pos}, w->dec, &w->p,
			  &w->capcand, &w->capdmg);

	(void)line;
	if (r < 0) {
		fprintf(stderr, "auditlog-verify: %s\n", strerror(-r));
		return 2;
	}
	return 0;
}

/* Every record of the files, sorted by seq; the lines a recovery record
 * names as crash damage are left out (a complete line there was never
 * acknowledged, and the recovery record reuses its seq). A seq given twice
 * with other bytes (two chains, or a rewritten record) is refused. 0, 1, 2. */
static int read_log(char **paths, unsigned n, struct plog *l)
{
	static struct log_walk w;
	int ret;

	w = (struct log_walk){.l = l};
	ret = cli_each_line("auditlog-verify", paths, n, AL_LINE_MAX, log_line, &w);
	if (ret)
		return ret;
	size_t k = 0;
	if (l->ndmg) {
		for (size_t i = 0; i < l->n; i++)
			if (!damaged(l, l->r[i].at))
				l->r[k++] = l->r[i];
		l->n = k;
		k = 0;
		for (size_t i = 0; i < l->ncp; i++) {
			if (damaged(l, l->cp[i].at))
				free(l->cp[i].note);
			else
				l->cp[k++] = l->cp[i];
		}
		l->ncp = k;
		k = 0;
	}
	for (size_t i = 0; i < l->ncand && !l->line; i++) {
		if (!damaged(l, l->cand[i].at)) {
			l->line = l->cand[i].line;
			l->line_len = l->cand[i].len;
		}
	}
	if (l->n)
		qsort(l->r, l->n, sizeof(*l->r), cmp_rec);
	for (size_t i = 0; i < l->n; i++) {
		if (k && l->r[k - 1].seq == l->r[i].seq) {
			if (memcmp(l->r[k - 1].hash, l->r[i].hash, AL_HASH_LEN) != 0) {
				fprintf(stderr, "auditlog-verify: two records with seq %" PRIu64 " and other hashes: "
						"give the files of one chain (and run auditlog-verify on them)\n",
					l->r[i].seq);
				return 1;
			}
			continue; /* the same record twice (a file given twice) */
		}
		l->r[k++] = l->r[i];
	}
	l->n = k;
	return 0;
}

/* The leaf hashes first_seq .. first_seq+size-1 (v2 records, all present). */
static int leaves_of(const struct plog *l, uint64_t first_seq, uint64_t size, uint8_t (**ret)[AL_HASH_LEN])
{
	const struct prec *a = find_rec(l, first_seq);
	uint8_t(*h)[AL_HASH_LEN];

	if (size == 0) {
		fprintf(stderr, "auditlog-verify: a checkpoint of tree size 0 (run auditlog-verify on the log)\n");
		return 1;
	}
	if (!a || (size_t)(l->r + l->n - a) < size || a[size - 1].seq != first_seq + size - 1) {
		fprintf(stderr, "auditlog-verify: the files lack records of the tree (seq %" PRIu64 "..%" PRIu64
				"): give every file of the chain\n",
			first_seq, first_seq + size - 1);
		return 1;
	}
	if (!(h = malloc(size * AL_HASH_LEN))) {
		fprintf(stderr, "auditlog-verify: %s\n", strerror(ENOMEM));
		return 2;
	}
	for (uint64_t i = 0; i < size; i++) {
		if (a[i].version != 2) {
			fprintf(stderr, "auditlog-verify: record %" PRIu64 " is not v2, yet in a tree\n", a[i].seq);
			free(h);
			return 1;
		}
		memcpy(h[i], a[i].hash, AL_HASH_LEN);
	}
	*ret = h;
	return 0;
}

/* ---- notes -------------------------------------------------------------- */

struct pnote {
	uint8_t origin[AL_ORIGIN_MAX];
	size_t olen;
	uint8_t host[AL_SEAL_HOST_MAX];
	size_t host_len;
	uint64_t size, last_seq, first_seq;
	uint8_t root[AL_HASH_LEN], head[AL_HASH_LEN];
	size_t text_len;
};

/* "name <decimal>\n" or "name <64 hex>\n" at s (n bytes left): the bytes used, 0 if not */
static size_t ext_line(const uint8_t *s, size_t n, const char *name, uint64_t *num, uint8_t *hash)
{
	size_t k = strlen(name);
	const uint8_t *nl;

	if (n < k + 2 || memcmp(s, name, k) != 0 || s[k] != ' ' || !(nl = memchr(s, '\n', n)))
		return 0;
	size_t vl = (size_t)(nl - s) - k - 1;
	if (num ? cli_parse_udec((const char *)s + k + 1, vl, AL_INT_MAX, num) < 0
		: (vl != 2 * AL_HASH_LEN || al_unhex(s + k + 1, vl, hash) < 0))
		return 0;
	return (size_t)(nl - s) + 1;
}

/* A checkpoint note's form (20.2): what its text says. With key, also its
 * signature by that key. NULL, or what is wrong. */
static const char *note_read(const uint8_t *note, size_t len, const struct al_ckey *key, struct pnote *ret)
{
	struct al_vwnote *w = NULL;
	unsigned nw = 0;
	struct pnote p = {0};
	uint8_t text[AL_NOTE_MAX];
	size_t off, u;
	long tl;

	if (al_witness_parse(note, len, "bundle", &w, &nw) < 0 || nw != 1) {
		al_witness_free(w, nw);
		return "not one signed checkpoint note (docs/format.md 20.2)";
	}
	memcpy(p.origin, w->origin, w->olen);
	p.olen = w->olen;
	memcpy(p.host, w->host, w->host_len);
	p.host_len = w->host_len;
	p.size = w->size;
	memcpy(p.root, w->root, AL_HASH_LEN);
	al_witness_free(w, nw);
	/* the three extension lines after origin, size and root */
	off = 0;
	for (int i = 0; i < 3; i++) {
		const uint8_t *nl = memchr(note + off, '\n', len - off);
		if (!nl)
			return "not a checkpoint note";
		off = (size_t)(nl - note) + 1;
	}
	if (!(u = ext_line(note + off, len - off, "seq", &p.last_seq, NULL)))
		return "no \"seq\" extension line";
	off += u;
	if (!(u = ext_line(note + off, len - off, "head", NULL, p.head)))
		return "no \"head\" extension line";
	off += u;
	if (!(u = ext_line(note + off, len - off, "first-seq", &p.first_seq, NULL)))
		return "no \"first-seq\" extension line";
	off += u;
	tl = al_checkpoint_text(p.origin, p.olen, p.size, p.root, p.last_seq, p.head, p.first_seq, text,
				sizeof(text));
	if (tl < 0 || (size_t)tl != off || memcmp(text, note, off) != 0 || off >= len || note[off] != '\n')
		return "its text is not the checkpoint text of docs/format.md 20.2";
	p.text_len = off;
	if (key) {
		size_t vl = 0;
		if (key->host_len != p.host_len || memcmp(key->host, p.host, p.host_len) != 0)
			return "its origin is not of the public key's host";
		int r = al_note_verify(key->key, p.origin, p.olen, note, len, &vl);
		if (r == -ENOKEY)
			return "no signature line of the public key";
		if (r < 0 || vl != off)
			return "the signature of the public key does not verify";
	}
	*ret = p;
	return NULL;
}

/* ---- writing -------------------------------------------------------------- */

static void put_hex_line(FILE *f, const char *name, const uint8_t *b, size_t n)
{
	char hex[2 * AL_NOTE_MAX];

	for (size_t i = 0; i < n; i += AL_NOTE_MAX / 2) {
		size_t k = n - i < AL_NOTE_MAX / 2 ? n - i : AL_NOTE_MAX / 2;
		if (i == 0)
			fprintf(f, "%s ", name);
		al_hex(b + i, k, hex);
		fwrite(hex, 1, 2 * k, f);
	}
	fputc('\n', f);
}

static FILE *open_out(const char *out)
{
	int fd;
	FILE *f;

	if (!out || strcmp(out, "-") == 0)
		return stdout;
	fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		fprintf(stderr, "auditlog-verify: --out %s: %s\n", out, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	return f;
}

static int close_out(FILE *f, const char *out)
{
	int bad = ferror(f);

	if (f == stdout)
		return fflush(f) || bad ? 2 : 0;
	if (fflush(f) || bad || fsync(fileno(f)) < 0) {
		fprintf(stderr, "auditlog-verify: --out %s: %s\n", out, strerror(errno ? errno : EIO));
		fclose(f);
		return 2;
	}
	return fclose(f) ? 2 : 0;
}

/* The note to write for checkpoint c: a witnessed copy of it (the same
 * origin, size and root, and the log's signature line among its lines) when
 * one is given, else the log's own. */
static void best_note(const struct pcp *c, const struct pnote *nt, const struct al_vwnote *w, unsigned nw,
		      const uint8_t **ret, size_t *ret_len)
{
	const uint8_t *sig = c->note + nt->text_len + 1; /* the log's signature line */
	size_t sl = c->len - nt->text_len - 1;

	*ret = c->note;
	*ret_len = c->len;
	for (unsigned i = 0; i < nw; i++) {
		if (w[i].olen != nt->olen || memcmp(w[i].origin, nt->origin, nt->olen) != 0 || w[i].size != nt->size ||
		    memcmp(w[i].root, nt->root, AL_HASH_LEN) != 0 || w[i].len <= c->len ||
		    memcmp(w[i].note, c->note, nt->text_len + 1) != 0)
			continue;
		for (size_t k = nt->text_len + 1; k + sl <= w[i].len; k++)
			if ((k == nt->text_len + 1 || w[i].note[k - 1] == '\n') && memcmp(w[i].note + k, sig, sl) == 0) {
				*ret = w[i].note;
				*ret_len = w[i].len;
				return;
			}
	}
}

/* The checkpoint's note agrees with the leaves the files give. */
static int note_matches(const struct pcp *c, uint8_t (*h)[AL_HASH_LEN], struct pnote *ret)
{
	struct al_merkle_range r;
	uint8_t root[AL_HASH_LEN];
	const char *why = note_read(c->note, c->len, NULL, ret);

	if (why) {
		fprintf(stderr, "auditlog-verify: the checkpoint at seq %" PRIu64 ": note %s\n", c->seq, why);
		return 1;
	}
	al_merkle_range_init(&r);
	for (uint64_t i = 0; i < c->size; i++)
		(void)al_merkle_range_append(&r, h[i]);
	(void)al_merkle_range_root(&r, root);
	if (ret->size != c->size || ret->first_seq != c->first_seq || memcmp(root, ret->root, AL_HASH_LEN) != 0 ||
	    memcmp(h[c->size - 1], ret->head, AL_HASH_LEN) != 0) {
		fprintf(stderr, "auditlog-verify: the checkpoint at seq %" PRIu64 " does not match the records "
				"before it (run auditlog-verify on the log)\n",
			c->seq);
		return 1;
	}
	return 0;
}

int prove_inclusion(char **paths, unsigned n, uint64_t seq, const char *out, const struct al_vwnote *w,
		    unsigned nw)
{
	struct plog l = {.want = seq};
	static uint8_t dec[AL_LINE_MAX], work[AL_HASH_LEN + AL_BODY_MAX];
	uint8_t prev[AL_HASH_LEN] = {0}, chk[AL_HASH_LEN], path[AL_MERKLE_PROOF_MAX][AL_HASH_LEN];
	uint8_t(*h)[AL_HASH_LEN] = NULL;
	const struct pcp *c = NULL;
	struct al_parsed p;
	struct pnote nt;
	size_t np, off;
	FILE *f;
	int ret;

	if ((ret = read_log(paths, n, &l)))
		goto out;
	ret = 1;
	const struct prec *t = find_rec(&l, seq);
	if (!t || !l.line || t->version != 2) {
		fprintf(stderr, "auditlog-verify: --prove %" PRIu64 ": %s\n", seq,
			!t ? "no record with this seq in the files" : "the record is not v2 (no tree holds it)");
		goto out;
	}
	/* the first checkpoint whose tree holds it */
	for (size_t i = 0; i < l.ncp; i++)
		if (l.cp[i].first_seq <= seq && seq - l.cp[i].first_seq < l.cp[i].size && (!c || l.cp[i].seq < c->seq))
			c = &l.cp[i];
	if (!c) {
		fprintf(stderr, "auditlog-verify: --prove %" PRIu64 ": no checkpoint in the files covers it yet "
				"(an unsigned tail: the next checkpoint will)\n", seq);
		goto out;
	}
	if ((ret = leaves_of(&l, c->first_seq, c->size, &h)) || (ret = note_matches(c, h, &nt)))
		goto out;
	ret = 1;
	if (seq > 0) {
		const struct prec *pr = find_rec(&l, seq - 1);
		if (!pr) {
			fprintf(stderr, "auditlog-verify: --prove %" PRIu64 ": the files lack the record before it\n", seq);
			goto out;
		}
		memcpy(prev, pr->hash, AL_HASH_LEN);
	}
	if (al_parse(l.line, l.line_len, dec, &p, &off) != AL_PERR_OK || !al_check_hash(&p, l.line, prev, work, chk)) {
		fprintf(stderr, "auditlog-verify: --prove %" PRIu64 ": the record's hash is not the chain's (run "
				"auditlog-verify on the log)\n", seq);
		goto out;
	}
	if (al_merkle_inclusion_proof((const uint8_t(*)[AL_HASH_LEN])h, c->size, seq - c->first_seq, path,
				      AL_MERKLE_PROOF_MAX, &np) < 0)
		goto out;
	ret = 2;
	if (!(f = open_out(out)))
		goto out;
	fprintf(f, "auditlog-inclusion-proof 1\norigin ");
	fwrite(nt.origin, 1, nt.olen, f);
	fprintf(f, "\nindex %" PRIu64 "\ntree-size %" PRIu64 "\n", seq - c->first_seq, c->size);
	put_hex_line(f, "prev", prev, AL_HASH_LEN);
	fputs("line ", f);
	fwrite(l.line, 1, l.line_len, f);
	fputc('\n', f);
	for (size_t i = 0; i < np; i++)
		put_hex_line(f, "path", path[i], AL_HASH_LEN);
	const uint8_t *wn;
	size_t wl;
	best_note(c, &nt, w, nw, &wn, &wl);
	put_hex_line(f, "note", wn, wl);
	ret = close_out(f, out);
	if (ret == 0)
		fprintf(stderr, "auditlog-verify: record %" PRIu64 " is leaf %" PRIu64 " of the checkpoint at seq %" PRIu64
				" (tree size %" PRIu64 ")\n",
			seq, seq - c->first_seq, c->seq, c->size);
out:
	free(h);
	plog_free(&l);
	return ret;
}

int prove_consistency(char **paths, unsigned n, uint64_t m, uint64_t sz, const char *out,
		      const struct al_vwnote *w, unsigned nw)
{
	struct plog l = {.want = UINT64_MAX};
	uint8_t proof[AL_MERKLE_PROOF_MAX][AL_HASH_LEN];
	uint8_t(*h)[AL_HASH_LEN] = NULL;
	const struct pcp *c1 = NULL, *c2 = NULL;
	struct pnote n1, n2;
	size_t np;
	FILE *f;
	int ret;

	if ((ret = read_log(paths, n, &l)))
		goto out;
	ret = 1;
	for (size_t i = 0; i < l.ncp; i++) {
		if (l.cp[i].size == m && !c1)
			c1 = &l.cp[i];
		if (l.cp[i].size == sz && !c2)
			c2 = &l.cp[i];
	}
	if (!c1 || !c2 || c1->first_seq != c2->first_seq) {
		fprintf(stderr, "auditlog-verify: --prove-consistency %" PRIu64 ":%" PRIu64 ": %s\n", m, sz,
			!c1 || !c2 ? "no checkpoint of that size in the files (both sizes must be checkpoints')"
				   : "the two checkpoints are of different trees");
		goto out;
	}
	if ((ret = leaves_of(&l, c2->first_seq, sz, &h)) || (ret = note_matches(c1, h, &n1)) ||
	    (ret = note_matches(c2, h, &n2)))
		goto out;
	ret = 1;
	if (al_merkle_consistency_proof((const uint8_t(*)[AL_HASH_LEN])h, m, sz, proof, AL_MERKLE_PROOF_MAX, &np) < 0)
		goto out;
	ret = 2;
	if (!(f = open_out(out)))
		goto out;
	fprintf(f, "auditlog-consistency-proof 1\norigin ");
	fwrite(n2.origin, 1, n2.olen, f);
	fprintf(f, "\nsize1 %" PRIu64 "\nsize2 %" PRIu64 "\n", m, sz);
	for (size_t i = 0; i < np; i++)
		put_hex_line(f, "proof", proof[i], AL_HASH_LEN);
	const uint8_t *wn;
	size_t wl;
	best_note(c1, &n1, w, nw, &wn, &wl);
	put_hex_line(f, "note1", wn, wl);
	best_note(c2, &n2, w, nw, &wn, &wl);
	put_hex_line(f, "note2", wn, wl);
	ret = close_out(f, out);
out:
	free(h);
	plog_free(&l);
	return ret;
}

/* ---- checking ------------------------------------------------------------- */

static bool peek(const struct al_kv *b, const char *name)
{
	size_t k = strlen(name);

	return b->n - b->i > k && memcmp(b->p + b->i, name, k) == 0 && b->p[b->i + k] == ' ';
}

static bool dec_field(struct al_kv *b, const char *name, uint64_t *ret)
{
	const uint8_t *v;
	size_t vl;

	return al_kv_line(b, name, &v, &vl) && cli_parse_udec((const char *)v, vl, AL_INT_MAX, ret) == 0;
}

static bool hash_field(struct al_kv *b, const char *name, uint8_t out[AL_HASH_LEN])
{
	const uint8_t *v;
	size_t vl;

	return al_kv_line(b, name, &v, &vl) && vl == 2 * AL_HASH_LEN && al_unhex(v, vl, out) == 0;
}

/* hex of a note, decoded into a new buffer */
static bool note_field(struct al_kv *b, const char *name, uint8_t **ret, size_t *ret_len)
{
	const uint8_t *v;
	size_t vl;
	uint8_t *o;

	if (!al_kv_line(b, name, &v, &vl) || vl == 0 || vl % 2 || vl / 2 > AL_NOTE_MAX * 8 || !(o = malloc(vl / 2)))
		return false;
	if (al_unhex(v, vl, o) < 0) {
		free(o);
		return false;
	}
	*ret = o;
	*ret_len = vl / 2;
	return true;
}

static int invalid(const char *part, const char *why)
{
	fprintf(stderr, "auditlog-verify: invalid: %s: %s\n", part, why);
	return 1;
}

static const struct al_ckey *key_of(const uint8_t *note, size_t len, const struct al_ckey *keys, unsigned nkeys)
{
	struct pnote p;

	if (note_read(note, len, NULL, &p))
		return NULL;
	for (unsigned i = 0; i < nkeys; i++)
		if (keys[i].host_len == p.host_len && memcmp(keys[i].host, p.host, p.host_len) == 0)
			return &keys[i];
	return NULL;
}

/* --check-proof --witness-key: the witnesses' public keys; a note of the
 * bundle must then carry a cosignature of one of them that verifies. */
static const struct al_ckey *cp_wkeys;
static unsigned cp_n_wkeys;

/* A cosignature of a witness key given (C2SP tlog-cosignature/v1,
 * docs/format.md 20.6) on a note: said on stdout; 1 (invalid) when none, or
 * when one of theirs does not verify. */
static int check_cosigned(const char *part, const uint8_t *note, size_t len)
{
	const struct al_ckey *by = NULL;
	uint64_t at = 0;
	char why[256];

	for (unsigned i = 0; i < cp_n_wkeys; i++) {
		const struct al_ckey *w = &cp_wkeys[i];
		uint64_t t = 0;
		int r = al_cosig_verify(w->key, w->host, w->host_len, note, len, &t);
		if (r == -ENOKEY)
			continue;
		if (r < 0) {
			snprintf(why, sizeof(why), "a cosignature of witness %.*s does not verify (its time or the note "
				 "changed)", (int)w->host_len, (const char *)w->host);
			return invalid(part, why);
		}
		if (!by) {
			by = w;
			at = t;
		}
	}
	if (!by)
		return invalid(part, "no cosignature of the --witness-key given");
	printf("cosigned: %s by %.*s at %" PRIu64 " (seconds since 1970)\n", part, (int)by->host_len,
	       (const char *)by->host, at);
	return 0;
}

/* a note of the bundle, checked with its host's key (and the witnesses') */
static int check_note(const char *part, const uint8_t *note, size_t len, const uint8_t *origin, size_t olen,
		      const struct al_ckey *keys, unsigned nkeys, struct pnote *ret)
{
	const struct al_ckey *k;
	const char *why = note_read(note, len, NULL, ret);

	if (why)
		return invalid(part, why);
	if (ret->olen != olen || memcmp(ret->origin, origin, olen) != 0)
		return invalid(part, "its origin is not the bundle's origin");
	if (!(k = key_of(note, len, keys, nkeys)))
		return invalid(part, "no --pubkey of its origin's host");
	if ((why = note_read(note, len, k, ret)))
		return invalid(part, why);
	return cp_n_wkeys ? check_cosigned(part, note, len) : 0;
}

static int check_inclusion(struct al_kv *b, const struct al_ckey *keys, unsigned nkeys)
{
	static uint8_t dec[AL_LINE_MAX], work[AL_HASH_LEN + AL_BODY_MAX];
	uint8_t prev[AL_HASH_LEN], leaf[AL_HASH_LEN], path[AL_MERKLE_PROOF_MAX][AL_HASH_LEN];
	const uint8_t *origin, *line;
	size_t olen, llen, np = 0, off, nlen = 0;
	uint64_t index, size;
	uint8_t *note = NULL;
	struct al_parsed p;
	struct pnote nt;
	int ret = 1;

	if (!al_kv_line(b, "origin", &origin, &olen) || olen == 0 || olen > AL_ORIGIN_MAX)
		return invalid("bundle", "no \"origin\" line");
	if (!dec_field(b, "index", &index))
		return invalid("index", "not a decimal leaf index");
	if (!dec_field(b, "tree-size", &size))
		return invalid("tree-size", "not a decimal tree size");
	if (!hash_field(b, "prev", prev))
		return invalid("prev", "not 64 lowercase hex digits");
	if (!al_kv_line(b, "line", &line, &llen))
		return invalid("bundle", "no \"line\" line");
	while (peek(b, "path")) {
		if (np == AL_MERKLE_PROOF_MAX || !hash_field(b, "path", path[np]))
			return invalid("path", "a path line is not 64 lowercase hex digits (or too many)");
		np++;
	}
	if (!note_field(b, "note", &note, &nlen))
		return invalid("note", "not the hex of a note");
	if (b->i != b->n) {
		ret = invalid("bundle", "lines after the note");
		goto out;
	}
	if (llen > AL_LINE_MAX - 1 || al_parse(line, llen, dec, &p, &off) != AL_PERR_OK) {
		ret = invalid("line", "not a canonical line of the format (docs/format.md 3, 12-14)");
		goto out;
	}
	if (p.rec.version != 2) {
		ret = invalid("line", "not a v2 record (no tree holds it)");
		goto out;
	}
	if (!al_check_hash(&p, line, prev, work, leaf)) {
		ret = invalid("line", "its hash is not the chain step of prev and the line (docs/format.md 15): the line "
				      "or prev was changed");
		goto out;
	}
	if ((ret = check_note("note", note, nlen, origin, olen, keys, nkeys, &nt)))
		goto out;
	ret = 1;
	if (size != nt.size) {
		ret = invalid("tree-size", "not the note's tree size");
		goto out;
	}
	uint64_t seq = p.rec.f[AL_F_SEQ].u;
	if (seq < nt.first_seq || index != seq - nt.first_seq) {
		ret = invalid("index", "not the line's seq minus the note's first-seq");
		goto out;
	}
	if (index >= size) {
		ret = invalid("index", "not below the tree size");
		goto out;
	}
	if (al_merkle_verify_inclusion(index, size, leaf, (const uint8_t(*)[AL_HASH_LEN])path, np, nt.root) != 0) {
		ret = invalid("path", "the audit path does not lead from the record's hash to the note's root");
		goto out;
	}
	char hex[2 * AL_HASH_LEN + 1] = {0};
	al_hex(leaf, AL_HASH_LEN, hex);
	printf("valid: record %" PRIu64 " (hash %s) is leaf %" PRIu64 " of the tree of size %" PRIu64 " signed by ",
	       seq, hex, index, size);
	fwrite(nt.origin, 1, nt.olen, stdout);
	putchar('\n');
	ret = 0;
out:
	free(note);
	return ret;
}

static int check_consistency(struct al_kv *b, const struct al_ckey *keys, unsigned nkeys)
{
	uint8_t proof[AL_MERKLE_PROOF_MAX][AL_HASH_LEN];
	const uint8_t *origin;
	size_t olen, np = 0, l1 = 0, l2 = 0;
	uint64_t m, sz;
	uint8_t *n1 = NULL, *n2 = NULL;
	struct pnote p1, p2;
	int ret = 1;

	if (!al_kv_line(b, "origin", &origin, &olen) || olen == 0 || olen > AL_ORIGIN_MAX)
		return invalid("bundle", "no \"origin\" line");
	if (!dec_field(b, "size1", &m) || !dec_field(b, "size2", &sz) || m == 0 || m > sz)
		return invalid("size1/size2", "not two decimal sizes with 1 <= size1 <= size2");
	while (peek(b, "proof")) {
		if (np == AL_MERKLE_PROOF_MAX || !hash_field(b, "proof", proof[np]))
			return invalid("proof", "a proof line is not 64 lowercase hex digits (or too many)");
		np++;
	}
	if (!note_field(b, "note1", &n1, &l1))
		return invalid("note1", "not the hex of a note");
	if (!note_field(b, "note2", &n2, &l2)) {
		ret = invalid("note2", "not the hex of a note");
		goto out;
	}
	if (b->i != b->n) {
		ret = invalid("bundle", "lines after note2");
		goto out;
	}
	if ((ret = check_note("note1", n1, l1, origin, olen, keys, nkeys, &p1)) ||
	    (ret = check_note("note2", n2, l2, origin, olen, keys, nkeys, &p2)))
		goto out;
	ret = 1;
	if (p1.size != m || p2.size != sz) {
		ret = invalid("size1/size2", "not the notes' tree sizes");
		goto out;
	}
	if (p1.first_seq != p2.first_seq) {
		ret = invalid("note2", "its first-seq is not note1's (another tree)");
		goto out;
	}
	if (al_merkle_verify_consistency(m, sz, p1.root, p2.root, (const uint8_t(*)[AL_HASH_LEN])proof, np) != 0) {
		ret = invalid("proof", "the consistency proof does not lead from note1's root to note2's");
		goto out;
	}
	printf("valid: the tree of size %" PRIu64 " extends the tree of size %" PRIu64 ", both signed by ", sz, m);
	fwrite(p1.origin, 1, p1.olen, stdout);
	putchar('\n');
	ret = 0;
out:
	free(n1);
	free(n2);
	return ret;
}

int check_proof(const char *path, const struct al_ckey *keys, unsigned nkeys, const struct al_ckey *wkeys,
		unsigned n_wkeys)
{
	uint8_t *buf = NULL;
	size_t n = 0;
	int ret, r = cli_read_small(path, BUNDLE_MAX, false, &buf, &n);

	if (r < 0) {
		fprintf(stderr, "auditlog-verify: --check-proof %s: %s\n", path, strerror(-r));
		return 2;
	}
	struct al_kv b = {buf, n, 0};
	const uint8_t *v;
	size_t vl;
	cp_wkeys = wkeys;
	cp_n_wkeys = n_wkeys;
	if (al_kv_line(&b, "auditlog-inclusion-proof", &v, &vl) && vl == 1 && v[0] == '1')
		ret = check_inclusion(&b, keys, nkeys);
	else if (b.i = 0, al_kv_line(&b, "auditlog-consistency-proof", &v, &vl) && vl == 1 && v[0] == '1')
		ret = check_consistency(&b, keys, nkeys);
	else
		ret = invalid("bundle", "not an evidence bundle (docs/format.md 18.4)");
	free(buf);
	return ret;
}
