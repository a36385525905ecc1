/* SPDX-License-Identifier: MIT */
/*
 * Verification engine, first step (see verify.h). Uses the format layer of
 * libauditlog (al_parse, al_check_hash): there is no second copy of the
 * format. jansson only tells a non-canonical JSON line from garbage.
 */
#define OPENSSL_SUPPRESS_DEPRECATED 1 /* SHA256_Init/Update/Final: see chain.c */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "verify.h"

static const char *const class_names[AL_V__MAX] = {
	[AL_V_MODIFIED] = "modified",       [AL_V_INSERTED] = "inserted",
	[AL_V_DELETED] = "deleted",         [AL_V_DUPLICATED] = "duplicated",
	[AL_V_REORDERED] = "reordered",     [AL_V_NONCANONICAL] = "non-canonical",
	[AL_V_UNPARSEABLE] = "unparseable", [AL_V_VERSION] = "version",
	[AL_V_MISSING_FILE] = "missing-file", [AL_V_FORKED] = "forked",
	[AL_V_TRUNCATED] = "truncated",     [AL_V_RECOVERED] = "recovered",
};

const char *al_vclass_name(enum al_vclass c)
{
	return c < AL_V__MAX ? class_names[c] : "?";
}

bool al_vclass_is_integrity(enum al_vclass c, bool strict)
{
	return c != AL_V_RECOVERED || strict;
}

/* ---- files and their headers ---------------------------------------------- */

struct vfile {
	const char *path;
	const char *base;
	uint64_t size;
	bool has_header;
	char chain_id[33];
	bool has_prev;
	bool sealed_prev; /* reason io-error: the predecessor counts up to prev_size only */
	char prev_name[1025];
	uint64_t prev_seq, prev_size;
	uint8_t prev_hash[AL_HASH_LEN];
	uint64_t first_seq; /* the header's seq */
	bool skip;       /* wholly before --from: not read */
	int chain;       /* index into chains */
	int next;        /* first successor (index), -1 */
	bool visited;
	uint64_t limit;  /* bytes to verify (a sealed file: up to prev_size of its successor) */
	/* where the walk ended */
	bool have_last;
	uint64_t last_seq;
	uint8_t last_hash[AL_HASH_LEN];
};

struct vctx {
	const struct al_vopts *o;
	struct al_vresult *res;
	struct vfile *files;
	unsigned n;
	uint8_t *dec, *work;
	/* expect-head and from bookkeeping */
	bool saw_expect;
	bool expect_ok;
	bool saw_from;
	bool past_from; /* a record at or after --from was seen */
};

static void report(struct vctx *c, enum al_vclass cls, const char *file, uint64_t line, uint64_t off,
		   bool has_seq, uint64_t seq, const char *fmt, ...) __attribute__((format(printf, 8, 9)));

static void report(struct vctx *c, enum al_vclass cls, const char *file, uint64_t line, uint64_t off,
		   bool has_seq, uint64_t seq, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->res->findings[cls]++;
	if (c->o->on_finding) {
		struct al_finding f = {.cls = cls, .file = file, .line = line, .offset = off,
				       .seq = seq, .has_seq = has_seq, .msg = msg};
		c->o->on_finding(c->o->ctx, &f);
	}
}

static int read_head(struct vctx *c, struct vfile *f)
{
	int fd = open(f->path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t buf[AL_LINE_MAX];
	ssize_t n;
	struct al_parsed p;
	size_t off;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int r = errno ? -errno : -EINVAL;
		close(fd);
		return S_ISREG(st.st_mode) ? r : -EINVAL;
	}
	f->size = (uint64_t)st.st_size;
	n = pread(fd, buf, sizeof(buf), 0);
	close(fd);
	if (n < 0)
		return -errno;
	const uint8_t *nl = memchr(buf, '\n', (size_t)n);
	if (!nl || al_parse(buf, (size_t)(nl - buf), c->dec, &p, &off) != AL_PERR_OK ||
	    p.rec.type != AL_T_HEADER)
		return 0; /* no valid header: the walk reports why */
	f->has_header = true;
	f->first_seq = p.rec.f[AL_F_SEQ].u;
	memcpy(f->chain_id, p.rec.f[AL_F_CHAIN_ID].p, 32);
	if (p.rec.present & AL_BIT(AL_F_PREV_NAME)) {
		f->has_prev = true;
		f->sealed_prev = p.rec.f[AL_F_REASON].n == 8 &&
				 memcmp(p.rec.f[AL_F_REASON].p, "io-error", 8) == 0;
		snprintf(f->prev_name, sizeof(f->prev_name), "%.*s", (int)p.rec.f[AL_F_PREV_NAME].n,
			 p.rec.f[AL_F_PREV_NAME].p);
		f->prev_seq = p.rec.f[AL_F_PREV_SEQ].u;
		f->prev_size = p.rec.f[AL_F_PREV_SIZE].u;
		(void)al_unhex(p.rec.f[AL_F_PREV_HASH].p, 64, f->prev_hash);
	}
	return 0;
}

/* ---- walking one file -------------------------------------------------------- */

#define RING 64

struct walk {
	struct vctx *c;
	struct vfile *f;
	struct al_vchain *ch;
	uint8_t prev[AL_HASH_LEN];
	uint64_t last_seq;
	bool have_seq;
	char last_ts[AL_TS_LEN];
	bool have_ts;
	unsigned last_version;
	/* recent records, to tell a duplicate from an insertion */
	uint64_t ring_seq[RING];
	uint64_t ring_digest[RING]; /* digest() of the line: same bytes or not */
	unsigned ring_n;
	uint64_t cur_digest;
	/* a damaged region waiting for a recovery record that names it */
	bool damage;
	uint64_t damage_off, damage_line, damage_lines;
	SHA256_CTX damage_sha;  /* the damaged bytes so far */
	SHA256_CTX damage_nonl; /* the same without the last line's '\n' (the writer adds
				 * one when the damage does not end in one) */
	enum al_vclass damage_cls;
	char damage_msg[160];
	uint64_t absorbed; /* lines of the damage just reported: they held the seqs skipped next */
};

/* A fast 64-bit digest of a line (8 bytes a step): tells the same bytes from
 * other bytes for the duplicate/insertion call; not a security function. */
static uint64_t digest(const uint8_t *p, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v;
		memcpy(&v, p + i, 8);
		h = (h ^ v) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	uint64_t v = 0;
	memcpy(&v, p + i, n - i);
	h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 29);
}

static void remember(struct walk *w, uint64_t seq)
{
	unsigned i = w->ring_n++ % RING;
	w->ring_seq[i] = seq;
	w->ring_digest[i] = w->cur_digest;
}

static int seen(const struct walk *w, uint64_t seq)
{
	unsigned n = w->ring_n < RING ? w->ring_n : RING;
	int r = 0;
	for (unsigned i = 0; i < n; i++)
		if (w->ring_seq[i] == seq)
			r = w->ring_digest[i] == w->cur_digest ? 2 : 1;
	return r; /* 0 never, 1 seq seen with other content, 2 the same line again */
}

static enum al_vclass classify_unparsed(const uint8_t *line, size_t len, enum al_perr e)
{
	json_error_t err;
	json_t *j;

	if (e == AL_PERR_VERSION)
		return AL_V_VERSION;
	j = json_loadb((const char *)line, len,
		       JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL, &err);
	if (!j) /* a duplicated key is JSON all the same, just never canonical */
		return json_error_code(&err) == json_error_duplicate_key ? AL_V_NONCANONICAL
									 : AL_V_UNPARSEABLE;
	bool obj = json_is_object(j) && (size_t)err.position == len;
	json_decref(j);
	return obj ? AL_V_NONCANONICAL : AL_V_UNPARSEABLE;
}

static void flush_damage(struct walk *w)
{
	if (!w->damage)
		return;
	if (w->c->o->has_from && !w->c->past_from) { /* before the checkpoint: verified then */
		w->damage = false;
		return;
	}
	report(w->c, w->damage_cls, w->f->path, w->damage_line, w->damage_off, w->have_seq,
	       w->have_seq ? w->last_seq + 1 : 0, "%s%s", w->damage_msg,
	       w->damage_lines > 1 ? " (and the lines after it, up to the next valid record)" : "");
	w->absorbed = w->damage_lines;
	w->damage = false;
}

/* The chain goes on from record p with hash h. */
static void follow(struct walk *w, const struct al_parsed *p, const uint8_t h[AL_HASH_LEN])
{
	memcpy(w->prev, h, AL_HASH_LEN);
	w->last_seq = p->rec.f[AL_F_SEQ].u;
	w->have_seq = true;
	memcpy(w->last_ts, p->rec.f[AL_F_TIMESTAMP].p, AL_TS_LEN);
	w->have_ts = true;
	w->last_version = p->rec.version;
}

static void accept(struct walk *w, const struct al_parsed *p, const uint8_t h[AL_HASH_LEN],
		   const uint8_t *line, size_t len, bool clean)
{
	if (clean && w->c->o->on_record)
		w->c->o->on_record(w->c->o->ctx, line, len);
	uint64_t seq = p->rec.f[AL_F_SEQ].u;
	w->absorbed = 0;
	follow(w, p, h);
	remember(w, seq);
	struct al_vchain *ch = w->ch;
	if (!ch->records) {
		ch->first_seq = seq;
		memcpy(ch->first_ts, p->rec.f[AL_F_TIMESTAMP].p, AL_TS_LEN);
		ch->min_version = ch->max_version = p->rec.version;
	}
	ch->records++;
	ch->events += p->rec.type == AL_T_EVENT;
	ch->last_seq = seq;
	memcpy(ch->head_hash, h, AL_HASH_LEN);
	memcpy(ch->last_ts, p->rec.f[AL_F_TIMESTAMP].p, AL_TS_LEN);
	if (p->rec.version < ch->min_version)
		ch->min_version = p->rec.version;
	if (p->rec.version > ch->max_version)
		ch->max_version = p->rec.version;
	w->c->res->records++;
	if (w->c->o->has_expect_head && seq == w->c->o->expect_seq) {
		w->c->saw_expect = true;
		w->c->expect_ok = CRYPTO_memcmp(h, w->c->o->expect_hash, AL_HASH_LEN) == 0;
	}
}

static void check_line(struct walk *w, const uint8_t *line, size_t len, uint64_t lineno, uint64_t off)
{
	struct vctx *c = w->c;
	const char *path = w->f->path;
	struct al_parsed p;
	size_t eoff;
	uint8_t h[AL_HASH_LEN];
	enum al_perr e = len + 1 > AL_LINE_MAX ? AL_PERR_TOO_LONG : al_parse(line, len, c->dec, &p, &eoff);

	if (e != AL_PERR_OK) {
		if (!w->damage) {
			w->damage = true;
			w->damage_off = off;
			w->damage_line = lineno;
			w->damage_lines = 0;
			SHA256_Init(&w->damage_sha);
			w->damage_cls = e == AL_PERR_TOO_LONG ? AL_V_UNPARSEABLE : classify_unparsed(line, len, e);
			snprintf(w->damage_msg, sizeof(w->damage_msg), "%s at byte %zu of the line",
				 e == AL_PERR_VERSION ? "unknown format version" :
				 e == AL_PERR_TOO_LONG ? "line longer than 8192 bytes" :
				 w->damage_cls == AL_V_NONCANONICAL ? "JSON, but not the canonical line" :
								     "not a record",
				 e == AL_PERR_TOO_LONG ? (size_t)AL_LINE_MAX : eoff);
		}
		w->damage_lines++;
		SHA256_Update(&w->damage_sha, line, len);
		w->damage_nonl = w->damage_sha;
		SHA256_Update(&w->damage_sha, "\n", 1);
		return;
	}
	uint64_t seq = p.rec.f[AL_F_SEQ].u;
	if (c->o->has_from && !c->past_from) {
		if (seq < c->o->from_seq) { /* verified before: only keep the state */
			w->damage = false;
			follow(w, &p, p.hash);
			return;
		}
		c->past_from = true;
		if (seq == c->o->from_seq) {
			bool same = CRYPTO_memcmp(p.hash, c->o->from_hash, AL_HASH_LEN) == 0;
			c->saw_from = true;
			if (!same)
				report(c, AL_V_MODIFIED, path, lineno, off, true, seq,
				       "the checkpoint's record has another hash than --from says");
			w->damage = false;
			w->cur_digest = digest(line, len);
			/* go on from the trusted hash (on a mismatch, from the line's own, so
			 * that one wrong checkpoint is one finding) */
			accept(w, &p, same ? c->o->from_hash : p.hash, line, len, same);
			return;
		}
	}
	w->cur_digest = digest(line, len);
	/* w->prev is always set: the link of the file's header, or the zero start */
	bool chains = al_check_hash(&p, line, w->prev, c->work, h);
	memcpy(h, p.hash, AL_HASH_LEN); /* the line's own hash carries the chain on */

	if (w->damage) {
		if (p.rec.type == AL_T_RECOVERY && p.rec.f[AL_F_DAMAGE_OFFSET].u == w->damage_off &&
		    w->have_seq && p.rec.f[AL_F_LAST_SEQ].u == w->last_seq && chains) {
			uint8_t md[AL_HASH_LEN], want[AL_HASH_LEN];
			uint64_t dl = p.rec.f[AL_F_DAMAGE_LENGTH].u, span = off - w->damage_off;
			bool len_ok = dl == span || dl + 1 == span;
			SHA256_Final(md, dl == span ? &w->damage_sha : &w->damage_nonl);
			(void)al_unhex(p.rec.f[AL_F_DAMAGE_SHA256].p, 64, want);
			bool sha_ok = CRYPTO_memcmp(md, want, AL_HASH_LEN) == 0;
			if (len_ok && sha_ok) {
				w->damage = false;
				report(c, AL_V_RECOVERED, path, w->damage_line, w->damage_off, true, seq,
				       "crash damage of %llu bytes repaired by the writer (recovery record "
				       "at line %llu)",
				       (unsigned long long)dl, (unsigned long long)lineno);
				accept(w, &p, h, line, len, true);
				return;
			}
		}
		flush_damage(w);
	}

	bool clean = true; /* no finding on this line: --emit passes it on */
	if (w->have_ts && memcmp(p.rec.f[AL_F_TIMESTAMP].p, w->last_ts, AL_TS_LEN) < 0) {
		report(c, AL_V_REORDERED, path, lineno, off, true, seq, "timestamp goes back");
		clean = false;
	}
	if (p.rec.version < w->last_version || p.rec.version < c->o->min_version)
		clean = false;
	if (p.rec.version < w->last_version)
		report(c, AL_V_VERSION, path, lineno, off, true, seq, "format version decreases from %u to %u",
		       w->last_version, p.rec.version);
	else if (p.rec.version < c->o->min_version)
		report(c, AL_V_VERSION, path, lineno, off, true, seq, "format version %u is below --min-version %u",
		       p.rec.version, c->o->min_version);
	if (lineno > 1 && p.rec.type == AL_T_HEADER) {
		report(c, AL_V_INSERTED, path, lineno, off, true, seq, "a header in the middle of a file");
		return;
	}
	if (!w->have_seq) { /* the first record of a chain: it starts from 32 zero bytes */
		bool start = seq == 0 || p.rec.type == AL_T_HEADER;
		if (p.rec.type == AL_T_HEADER && seq != 0) {
			report(c, AL_V_MODIFIED, path, lineno, off, true, seq,
			       "a chain's first header must have seq 0");
			clean = false;
		} else if (start && !chains) {
			report(c, AL_V_MODIFIED, path, lineno, off, true, seq,
			       "the chain's first record does not hash from the zero start");
			clean = false;
		}
		/* (a record after reported damage in a file without a header is an anchor) */
		accept(w, &p, h, line, len, clean && start && chains);
		return;
	}
	if (seq == w->last_seq + 1) {
		if (!chains)
			report(c, AL_V_MODIFIED, path, lineno, off, true, seq,
			       "hash does not follow from the previous record");
		accept(w, &p, h, line, len, clean && chains);
		return;
	}
	if (seq > w->last_seq + 1 && seq - w->last_seq - 1 <= w->absorbed) {
		/* the lines just reported as damaged held these seqs: no second finding */
		accept(w, &p, h, line, len, false);
		return;
	}
	if (seq > w->last_seq + 1) {
		report(c, AL_V_DELETED, path, lineno, off, true, seq,
		       "seq jumps from %llu to %llu: %llu record(s) missing",
		       (unsigned long long)w->last_seq, (unsigned long long)seq,
		       (unsigned long long)(seq - w->last_seq - 1));
		accept(w, &p, h, line, len, false);
		return;
	}
	int s = seen(w, seq);
	if (s == 2)
		report(c, AL_V_DUPLICATED, path, lineno, off, true, seq, "record seq %llu appears again",
		       (unsigned long long)seq);
	else if (s == 1)
		report(c, AL_V_INSERTED, path, lineno, off, true, seq,
		       "a second, different record with seq %llu", (unsigned long long)seq);
	else
		report(c, AL_V_REORDERED, path, lineno, off, true, seq, "seq goes back from %llu to %llu",
		       (unsigned long long)w->last_seq, (unsigned long long)seq);
	/* the chain state stays where it was: the next record should follow it */
}

/* Walk f up to f->limit bytes, a buffer at a time: lines are checked where
 * they lie; only a line cut by the buffer's end is moved to its start. */
static int walk_file(struct vctx *c, struct vfile *f, struct walk *w)
{
	int fd = open(f->path, O_RDONLY | O_CLOEXEC);
	size_t cap = 1u << 20, have = 0, pos = 0;
	uint8_t *buf = malloc(cap);
	uint64_t base = 0, lineno = 0; /* base: file offset of buf[0] */
	bool eof = false;
	int r = 0;

	if (fd < 0 || !buf) {
		r = fd < 0 ? -errno : -ENOMEM;
		goto out;
	}
	w->f = f;
	for (;;) {
		uint8_t *nl = pos < have ? memchr(buf + pos, '\n', have - pos) : NULL;
		if (nl) {
			size_t len = (size_t)(nl - (buf + pos));
			check_line(w, buf + pos, len, ++lineno, base + pos);
			pos += len + 1;
			continue;
		}
		if (eof)
			break;
		/* keep the partial line, refill behind it */
		if (pos) {
			memmove(buf, buf + pos, have - pos);
			base += pos;
			have -= pos;
			pos = 0;
		}
		if (have == cap) { /* a line longer than the buffer: not a record */
			check_line(w, buf, AL_LINE_MAX, ++lineno, base);
			base += have;
			have = 0;
			continue;
		}
		uint64_t left = f->limit - base - have;
		size_t want = cap - have < left ? cap - have : (size_t)left;
		ssize_t n = want ? pread(fd, buf + have, want, (off_t)(base + have)) : 0;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		have += (size_t)n;
		eof = n == 0 || base + have >= f->limit;
	}
	if (pos < have) { /* a last line without its '\n' */
		flush_damage(w);
		report(c, AL_V_TRUNCATED, f->path, lineno + 1, base + pos, false, 0,
		       "the file ends inside a line (%zu bytes without a newline)", have - pos);
	}
	flush_damage(w);
	c->res->bytes += base + have;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return r;
}

/* Walk the files linked from `first` on, as one chain. */
static int walk_from(struct vctx *c, int first)
{
	struct walk *w = calloc(1, sizeof(*w));
	int r = 0;

	if (!w)
		return -ENOMEM;
	w->c = c;
	w->ch = &c->res->chain[c->files[first].chain];
	for (int cur = first; cur >= 0 && !c->files[cur].visited; cur = c->files[cur].next) {
		struct vfile *f = &c->files[cur];
		f->visited = true;
		if (f->skip)
			continue; /* the next file starts from its header's link */
		if (f->has_prev && w->have_seq && f->prev_seq > w->last_seq)
			report(c, AL_V_TRUNCATED, f->path, 1, 0, true, f->prev_seq + 1,
			       "continues %s from seq %llu, but that file ends at seq %llu", f->prev_name,
			       (unsigned long long)f->prev_seq, (unsigned long long)w->last_seq);
		else if (f->has_prev && w->have_seq && f->prev_seq < w->last_seq)
			report(c, AL_V_INSERTED, f->path, 1, 0, true, f->prev_seq + 1,
			       "continues %s from seq %llu, but that file goes on to seq %llu",
			       f->prev_name, (unsigned long long)f->prev_seq,
			       (unsigned long long)w->last_seq);
		else if (f->has_prev && w->have_seq && memcmp(f->prev_hash, w->prev, AL_HASH_LEN) != 0)
			report(c, AL_V_MODIFIED, f->path, 1, 0, true, f->prev_seq + 1,
			       "its header names seq %llu of %s with another hash than that file ends with",
			       (unsigned long long)f->prev_seq, f->prev_name);
		/* go on from the header's link, as the writer did (also when the file
		 * it names is missing); a chain's first file starts from zeros */
		if (f->has_prev) {
			memcpy(w->prev, f->prev_hash, AL_HASH_LEN);
			w->last_seq = f->prev_seq;
			w->have_seq = true;
		} else {
			memset(w->prev, 0, AL_HASH_LEN);
		}
		r = walk_file(c, f, w);
		if (r < 0)
			break;
	}
	free(w);
	return r;
}

/* ---- chains ------------------------------------------------------------------- */

static int find_chain(struct al_vresult *res, const char *id)
{
	for (unsigned i = 0; i < res->chains; i++)
		if (strcmp(res->chain[i].chain_id, id) == 0)
			return (int)i;
	return -1;
}

int al_verify_files(char *const *paths, unsigned n, const struct al_vopts *o, struct al_vresult *res)
{
	struct vctx c = {.o = o, .res = res, .n = n};
	int r = 0;

	memset(res, 0, sizeof(*res));
	c.files = calloc(n ? n : 1, sizeof(*c.files));
	c.dec = malloc(AL_LINE_MAX);
	c.work = malloc(AL_HASH_LEN + AL_BODY_MAX);
	res->chain = calloc(n ? n : 1, sizeof(*res->chain));
	if (!c.files || !c.dec || !c.work || !res->chain) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		struct vfile *f = &c.files[i];
		f->path = paths[i];
		const char *sl = strrchr(paths[i], '/');
		f->base = sl ? sl + 1 : paths[i];
		f->next = -1;
		r = read_head(&c, f);
		if (r < 0)
			goto out;
		f->limit = f->size;
		const char *id = f->has_header ? f->chain_id : "";
		f->chain = find_chain(res, id);
		if (f->chain < 0) {
			f->chain = (int)res->chains++;
			snprintf(res->chain[f->chain].chain_id, sizeof(res->chain[0].chain_id), "%s", id);
		}
		res->chain[f->chain].files++;
		res->files++;
	}
	/* links: successor of a file = the file whose header names it as prev */
	for (unsigned i = 0; i < n; i++) {
		struct vfile *g = &c.files[i];
		if (!g->has_prev)
			continue;
		int found = -1;
		for (unsigned k = 0; k < n; k++)
			if (k != i && c.files[k].chain == g->chain && strcmp(c.files[k].base, g->prev_name) == 0)
				found = (int)k;
		if (found < 0) {
			report(&c, AL_V_MISSING_FILE, g->path, 1, 0, true, g->prev_seq + 1,
			       "continues %s (up to seq %llu), which is not among the inputs", g->prev_name,
			       (unsigned long long)g->prev_seq);
			continue;
		}
		struct vfile *f = &c.files[found];
		if (f->next >= 0) {
			report(&c, AL_V_FORKED, g->path, 1, 0, true, g->prev_seq + 1,
			       "continues %s, which %s continues too", f->path, c.files[f->next].path);
			continue;
		}
		f->next = (int)i;
		if (o->has_from && g->prev_seq < o->from_seq) {
			f->skip = true; /* every record of f is before the checkpoint */
			continue;
		}
		if (g->sealed_prev && g->prev_size <= f->size)
			f->limit = g->prev_size; /* beyond it: a sealed file's unacknowledged tail */
		else if (g->prev_size != f->size)
			report(&c, AL_V_MODIFIED, f->path, 0, f->size, true, g->prev_seq,
			       "the file is %llu bytes long, but %s recorded %llu when it continued it",
			       (unsigned long long)f->size, g->path, (unsigned long long)g->prev_size);
	}
	/* walk each chain from its start(s): files without a predecessor among
	 * the inputs; then whatever no start reached (a cycle of links) */
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < n; i++) {
			bool is_start = true;
			for (unsigned k = 0; k < n && pass == 0; k++)
				if (c.files[k].next == (int)i)
					is_start = false;
			if (!is_start || c.files[i].visited)
				continue;
			r = walk_from(&c, (int)i);
			if (r < 0)
				goto out;
		}
	}
	if (o->has_from && !c.saw_from)
		report(&c, AL_V_TRUNCATED, n ? paths[n - 1] : "", 0, 0, true, o->from_seq,
		       "no record with seq %llu (the --from checkpoint) among the inputs",
		       (unsigned long long)o->from_seq);
	if (o->has_expect_head) {
		if (!c.saw_expect)
			report(&c, AL_V_TRUNCATED, n ? paths[n - 1] : "", 0, 0, true, o->expect_seq,
			       "no record with seq %llu: the log ends before the expected head",
			       (unsigned long long)o->expect_seq);
		else if (!c.expect_ok)
			report(&c, AL_V_MODIFIED, n ? paths[n - 1] : "", 0, 0, true, o->expect_seq,
			       "the record with seq %llu does not have the expected hash: the chain was "
			       "rewritten", (unsigned long long)o->expect_seq);
	}
out:
	free(c.files);
	free(c.dec);
	free(c.work);
	return r;
}

void al_vresult_free(struct al_vresult *res)
{
	if (!res)
		return;
	free(res->chain);
	res->chain = NULL;
}
