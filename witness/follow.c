/* SPDX-License-Identifier: MIT */
/*
 * auditlog-witness follow (docs/format.md 20.6, docs/siem.md): the witness
 * as a service at the centre. Each FILE is the central copy of one host's
 * chain, growing as the shipper writes it. Its lines go, as they arrive, to
 * a stream verifier of the library (auditlog_verifier_add_stream / _feed)
 * holding the registered hosts' public keys, so that a checkpoint reaches
 * the witness only once it verified against the lines before it (the chain,
 * the tree, the host's signature). A checkpoint is then cosigned when
 *   - its chain is new (nothing held) and this copy had no finding so far
 *     (first use), or
 *   - it is larger than the held one and this copy met the held checkpoint
 *     (same size, same root) with no finding since: the lines between the
 *     two were verified, so the new tree extends the held one;
 * and it is kept atomically (state_store). A smaller checkpoint is never
 * cosigned (before the held one: already witnessed; after it: moving
 * backwards). On restart the copies are read again from their start and the
 * held notes re-read: nothing is cosigned twice, nothing moves back.
 *
 * Shippers may repeat lines (RELP after a reconnect) and interleave two
 * files of a rotation (imfile after a restart): lines are put back in seq
 * order in a bounded buffer before the verifier; a line byte-identical to
 * the one fed at its seq (among the last SEEN_RING) is dropped, and the
 * verifier drops byte-identical repeats of its last records (set_dedup);
 * anything else is a finding.
 */
#include "cli.h"
#include "format_v2.h"
#include "witness.h"

#include <auditlog.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define READ_CHUNK (256u * 1024u)
#define LINE_CAP (256u * 1024u) /* above AL_LINE_MAX: a longer line is fed as it is */
#define REORDER_MAX 16384u      /* lines held back waiting for a lower seq */
#define POLL_NS (50L * 1000 * 1000)
#define SEEN_RING 65536u        /* the lines fed last, by seq: a shipper's repeat of one is dropped */

struct pend {
	uint64_t seq;
	char *line; /* with its '\n' */
	size_t len;
};

struct fctx;

struct src {
	struct fctx *f;
	const char *path;
	int fd;
	uint64_t off;
	char *part; /* an incomplete last line */
	size_t plen;
	struct auditlog_verifier *v;
	/* lines back in seq order */
	struct pend *q; /* sorted by seq */
	size_t nq;
	bool have_next;
	uint64_t next;
	struct seen {
		uint64_t seq1; /* seq + 1; 0: empty */
		uint8_t h[AL_HASH_LEN];
	} *seen;
	uint64_t repeats;
	/* what the witness may conclude from this copy */
	bool clean; /* no finding from its start */
	bool met;   /* the held checkpoint met, no finding since */
	bool dead;  /* no longer followed (shrunk, unreadable) */
	uint64_t cosigned, refused, top; /* top: the largest checkpoint size it verified */
	uint64_t nfind; /* findings so far, notices included */
	bool have_origin;
	uint8_t origin[AL_ORIGIN_MAX];
	size_t olen;
};

struct fctx {
	int dfd;
	const char *dir;
	struct al_ckey wk;
	struct hosts hs;
	int err; /* 2: an I/O error on the state */
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static bool integrity(uint32_t cls)
{
	return cls != AUDITLOG_V_SHIPPER_DUPLICATE && cls != AUDITLOG_V_UNSIGNED_TAIL && cls != AUDITLOG_V_CLOCK;
}

static void on_finding(void *ctx, const struct auditlog_finding *f)
{
	struct src *s = ctx;

	s->nfind++;
	if (!integrity(f->cls))
		return;
	if (s->clean || s->met)
		fprintf(stderr, PROG ": %s: line %" PRIu64 ": %s: %s; a later checkpoint of this copy is cosigned "
				"only after a checkpoint equal to the held one (docs/format.md 20.6)\n",
			s->path, f->line, auditlog_vclass_name(f->cls), f->msg);
	s->clean = false;
	s->met = false;
}

__attribute__((format(printf, 2, 3))) static void src_refuse(struct src *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, PROG ": refused: %s: ", s->path);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	s->refused++;
}

/* A checkpoint the stream verifier checked without a finding (its note
 * signed by its host, exactly the chain's tree): cosign it or not (the
 * header comment's rules). */
static void checkpoint(struct src *s, const uint8_t *note, size_t len)
{
	struct fctx *f = s->f;
	struct al_vwnote *w = NULL;
	unsigned nw = 0;
	const struct al_ckey *hk;
	char name[AL_ORIGIN_MAX + 2];
	struct held h = {0};
	size_t tlen = 0, ol = 0;
	uint8_t *out = NULL;

	if (al_witness_parse(note, len, s->path, &w, &nw) < 0 || nw != 1) {
		src_refuse(s, "a checkpoint whose note is not of docs/format.md 20.2");
		goto out;
	}
	if (!(hk = hosts_find(&f->hs, w->host, w->host_len))) {
		src_refuse(s, "host %.*s is not registered (no key of it in --hosts)", (int)w->host_len,
			   (const char *)w->host);
		goto out;
	}
	if (al_note_verify(hk->key, w->origin, w->olen, note, len, &tlen) != 0 ||
	    state_name(w->origin, w->olen, name, sizeof(name)) < 0) {
		src_refuse(s, "size %" PRIu64 ": no valid signature of host %.*s", w->size, (int)w->host_len,
			   (const char *)w->host);
		goto out;
	}
	if (s->have_origin && (s->olen != w->olen || memcmp(s->origin, w->origin, w->olen) != 0)) {
		src_refuse(s, "a checkpoint of another chain (%.*s) in this copy", (int)w->olen,
			   (const char *)w->origin);
		s->met = false;
		goto out;
	}
	memcpy(s->origin, w->origin, w->olen);
	s->olen = w->olen;
	s->have_origin = true;
	if (w->size > s->top)
		s->top = w->size;
	if (flock(f->dfd, LOCK_EX) < 0) {
		f->err = io_error("cannot lock --state", f->dir, errno);
		goto out;
	}
	int r = state_load(f->dfd, name, w->origin, w->olen, &h);
	if (r) {
		f->err = 2; /* unreadable or malformed: said; never overwritten */
		goto unlock;
	}
	if (!h.note) {
		if (!s->clean) {
			src_refuse(s, "size %" PRIu64 ": a new chain is registered only from a copy without findings",
				   w->size);
			goto unlock;
		}
	} else if (w->size < h.size) {
		if (s->met)
			src_refuse(s, "size %" PRIu64 " after the held %" PRIu64 " (moving backwards)", w->size, h.size);
		goto unlock; /* before the held one: witnessed already */
	} else if (w->size == h.size) {
		if (CRYPTO_memcmp(w->root, h.root, AL_HASH_LEN) != 0) {
			src_refuse(s, "size %" PRIu64 ": inconsistent: the held note of this size has another root",
				   w->size);
			s->met = false;
		} else {
			s->met = true;
		}
		goto unlock;
	} else if (!s->met) {
		src_refuse(s, "size %" PRIu64 ": not shown consistent with the held %" PRIu64 ": this copy did not "
			      "reach the held checkpoint without a finding", w->size, h.size);
		goto unlock;
	}
	if ((r = cosign_store(f->dfd, name, &f->wk, w, note, len, tlen, &out, &ol))) {
		f->err = r;
		goto unlock;
	}
	s->met = true;
	s->cosigned++;
	printf("cosigned %.*s size %" PRIu64 "\n", (int)w->olen, (const char *)w->origin, w->size);
	fflush(stdout);
unlock:
	(void)flock(f->dfd, LOCK_UN);
out:
	free(out);
	free(h.note);
	al_witness_free(w, nw);
}

/* the seq of a line: its first "seq":N; false without one */
static bool line_seq(const char *l, size_t len, uint64_t *ret)
{
	const char *p = memmem(l, len, "\"seq\":", 6);
	uint64_t v = 0;
	size_t i, k = 0;

	if (!p)
		return false;
	for (i = (size_t)(p - l) + 6; i < len && l[i] >= '0' && l[i] <= '9' && k < 17; i++, k++)
		v = v * 10 + (uint64_t)(l[i] - '0');
	*ret = v;
	return k > 0 && k < 17;
}

/* One line to the verifier. A checkpoint's note and tree are checked while
 * its line is fed (a bad-checkpoint finding otherwise): one fed without any
 * finding (not a shipper's repeat either) goes to the witness. */
static int feed(struct src *s, const char *l, size_t len)
{
	json_t *j = NULL, *note = NULL;
	uint64_t before = s->nfind;
	int r;

	if (memmem(l, len, "\"type\":\"checkpoint\"", 19) && (j = json_loadb(l, len, 0, NULL))) {
		note = json_object_get(j, "note");
		if (!json_is_string(note))
			note = NULL;
	}
	if (note) {
		struct al_vwnote *w = NULL;
		unsigned nw = 0;
		if (al_witness_parse((const uint8_t *)json_string_value(note), json_string_length(note), s->path, &w,
				     &nw) == 0 && nw == 1 && !hosts_find(&s->f->hs, w->host, w->host_len)) {
			src_refuse(s, "host %.*s is not registered (no key of it in --hosts)", (int)w->host_len,
				   (const char *)w->host);
			note = NULL;
		}
		al_witness_free(w, nw);
	}
	r = auditlog_verifier_feed(s->v, l, len);
	if (r < 0) {
		json_decref(j);
		return io_error("cannot verify", s->path, -r);
	}
	if (note && s->nfind == before)
		checkpoint(s, (const uint8_t *)json_string_value(note), json_string_length(note));
	json_decref(j);
	return 0;
}

/* the buffered lines from s->next on, while they follow each other */
static int drain(struct src *s)
{
	size_t k = 0;
	int ret = 0;

	while (k < s->nq && !ret && s->q[k].seq <= s->next) {
		ret = feed(s, s->q[k].line, s->q[k].len);
		if (s->q[k].seq >= s->next) {
			struct seen *e = &s->seen[s->q[k].seq % SEEN_RING];
			e->seq1 = s->q[k].seq + 1;
			al_sha256(s->q[k].line, s->q[k].len, e->h);
			s->next = s->q[k].seq + 1;
		}
		free(s->q[k].line);
		k++;
	}
	if (k) {
		memmove(s->q, s->q + k, (s->nq - k) * sizeof(*s->q));
		s->nq -= k;
	}
	return ret;
}

/* One complete line (with its '\n'), in seq order: a line of the next seq
 * (or of one already fed: a repeat) goes to the verifier now; a later one
 * waits for the lines before it, up to REORDER_MAX of them (then the
 * lowest goes: the gap is a finding of the verifier's). */
static int line_in(struct src *s, const char *l, size_t len)
{
	uint64_t seq;
	uint8_t h[AL_HASH_LEN];
	int ret;

	if (!line_seq(l, len, &seq))
		return feed(s, l, len); /* not a record: the verifier says what */
	if (!s->have_next) {
		s->have_next = true;
		s->next = seq;
	}
	if (seq <= s->next) {
		struct seen *e = &s->seen[seq % SEEN_RING];
		al_sha256(l, len, h);
		if (seq < s->next && e->seq1 == seq + 1 && CRYPTO_memcmp(e->h, h, AL_HASH_LEN) == 0) {
			s->repeats++; /* byte for byte a line fed before, in its place: nothing new */
			return 0;
		}
		if ((ret = feed(s, l, len)))
			return ret;
		if (seq == s->next) {
			e->seq1 = seq + 1;
			memcpy(e->h, h, AL_HASH_LEN);
		}
		if (seq == s->next)
			s->next = seq + 1;
		return drain(s);
	}
	size_t i = s->nq;
	while (i > 0 && s->q[i - 1].seq > seq)
		i--;
	if (i > 0 && s->q[i - 1].seq == seq && s->q[i - 1].len == len && memcmp(s->q[i - 1].line, l, len) == 0)
		return 0; /* a repeat of a line still waiting */
	struct pend *nq = realloc(s->q, (s->nq + 1) * sizeof(*nq));
	char *c = malloc(len);
	if (!nq || !c) {
		free(c);
		if (nq)
			s->q = nq;
		return io_error("cannot follow", s->path, ENOMEM);
	}
	s->q = nq;
	memcpy(c, l, len);
	if (i < s->nq)
		memmove(s->q + i + 1, s->q + i, (s->nq - i) * sizeof(*s->q));
	s->q[i] = (struct pend){seq, c, len};
	s->nq++;
	if (s->nq > REORDER_MAX) {
		s->next = s->q[0].seq;
		return drain(s);
	}
	return 0;
}

/* Read what arrived: 1 when bytes came, 0 none, 2 an error said. */
static int src_poll(struct src *s, char *buf)
{
	struct stat st;
	ssize_t n;
	int ret;

	if (s->dead)
		return 0;
	if (s->fd < 0) {
		s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
		if (s->fd < 0)
			return errno == ENOENT ? 0 : io_error("cannot open", s->path, errno);
	}
	if (fstat(s->fd, &st) < 0)
		return io_error("cannot read", s->path, errno);
	if ((uint64_t)st.st_size < s->off) {
		src_refuse(s, "it shrank below the %" PRIu64 " bytes read (a central copy only grows): no longer "
			      "followed", s->off);
		s->dead = true;
		return 0;
	}
	n = pread(s->fd, buf, READ_CHUNK, (off_t)s->off);
	if (n < 0)
		return io_error("cannot read", s->path, errno);
	if (n == 0)
		return 0;
	s->off += (uint64_t)n;
	for (size_t i = 0; i < (size_t)n;) {
		const char *nl = memchr(buf + i, '\n', (size_t)n - i);
		size_t take = nl ? (size_t)(nl - (buf + i)) + 1 : (size_t)n - i;
		if (s->plen + take > LINE_CAP) { /* a line no log has: fed as it is, the verifier says what */
			if ((ret = feed(s, s->part, s->plen)))
				return ret;
			s->plen = 0;
		}
		if (!nl || s->plen) {
			memcpy(s->part + s->plen, buf + i, take);
			s->plen += take;
			if (nl) {
				if ((ret = line_in(s, s->part, s->plen)))
					return ret;
				s->plen = 0;
			}
		} else if ((ret = line_in(s, buf + i, take))) {
			return ret;
		}
		i += take;
	}
	return 1;
}

static int src_open(struct src *s, struct fctx *f, const char *path)
{
	int r;

	memset(s, 0, sizeof(*s));
	s->f = f;
	s->path = path;
	s->fd = -1;
	s->clean = true;
	if (!(s->part = malloc(LINE_CAP)) || !(s->seen = calloc(SEEN_RING, sizeof(*s->seen))))
		return io_error("cannot follow", path, ENOMEM);
	if ((r = auditlog_verifier_new(&s->v)) < 0 || (r = auditlog_verifier_add_stream(s->v, path)) < 0 ||
	    (r = auditlog_verifier_set_dedup(s->v, 1)) < 0 ||
	    (r = auditlog_verifier_set_on_finding(s->v, on_finding, s)) < 0)
		return io_error("cannot verify", path, -r);
	for (unsigned k = 0; k < f->hs.n; k++) {
		char txt[256];
		long tl = al_ckey_format(&f->hs.k[k], false, txt, sizeof(txt));
		if (tl < 0 || (r = auditlog_verifier_add_pubkey(s->v, txt, (size_t)tl)) < 0)
			return io_error("cannot verify", path, tl < 0 ? (int)-tl : -r);
	}
	return 0;
}

static void src_close(struct src *s)
{
	if (s->fd >= 0)
		close(s->fd);
	auditlog_verifier_free(s->v);
	for (size_t i = 0; i < s->nq; i++)
		free(s->q[i].line);
	free(s->q);
	free(s->part);
	free(s->seen);
}

int cmd_follow(const char *dir, const char *keyf, const char *hostsdir, char *const *files, unsigned n, bool once)
{
	struct fctx f = {.dfd = -1, .dir = dir};
	struct src *s = calloc(n, sizeof(*s));
	char *buf = malloc(READ_CHUNK);
	unsigned opened = 0;
	int ret = 0;

	if (!s || !buf) {
		ret = io_error("cannot follow", files[0], ENOMEM);
		goto out;
	}
	if ((ret = read_key(keyf, true, &f.wk)) || (ret = hosts_load(hostsdir, &f.hs)))
		goto out;
	if (f.hs.n == 0) {
		ret = cli_usage_error(PROG, "--hosts %s holds no host public key", hostsdir);
		goto out;
	}
	f.dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f.dfd < 0) {
		ret = io_error("cannot open --state", dir, errno);
		goto out;
	}
	for (; opened < n; opened++)
		if ((ret = src_open(&s[opened], &f, files[opened]))) {
			opened++;
			goto out;
		}
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!stop && !f.err) {
		bool any = false;
		for (unsigned i = 0; i < n && !f.err; i++) {
			int r = src_poll(&s[i], buf);
			if (r == 2) {
				ret = 2;
				goto out;
			}
			any |= r == 1;
		}
		if (!any && once)
			break;
		if (!any) {
			struct timespec ts = {0, POLL_NS};
			nanosleep(&ts, NULL);
		}
	}
	if (f.err) {
		ret = f.err;
		goto out;
	}
	/* what each copy came to */
	for (unsigned i = 0; i < n; i++) {
		struct held h = {0};
		char name[AL_ORIGIN_MAX + 2];

		if (s[i].have_origin && state_name(s[i].origin, s[i].olen, name, sizeof(name)) == 0 &&
		    state_load(f.dfd, name, s[i].origin, s[i].olen, &h) == 0 && h.note && s[i].top < h.size)
			src_refuse(&s[i], "its checkpoints reach size %" PRIu64 ", below the held %" PRIu64
					  " (moving backwards, or not yet arrived)", s[i].top, h.size);
		free(h.note);
		fprintf(stderr, PROG ": %s: %" PRIu64 " bytes, %" PRIu64 " repeated line(s) dropped, %" PRIu64
				" checkpoint(s) cosigned, %" PRIu64 " refused\n", s[i].path, s[i].off, s[i].repeats,
			s[i].cosigned, s[i].refused);
		if (s[i].refused)
			ret = 1;
	}
out:
	for (unsigned i = 0; i < opened; i++)
		src_close(&s[i]);
	if (f.dfd >= 0)
		close(f.dfd);
	OPENSSL_cleanse(&f.wk, sizeof(f.wk));
	free(f.hs.k);
	free(s);
	free(buf);
	return ret;
}
