/* SPDX-License-Identifier: MIT */
/*
 * Parallel verification (verify.h, struct al_vpool): worker threads check a
 * file in blocks ahead of the walk. A record's hash needs only the stored
 * hash of the line before it, so each block is checked on its own: from the
 * line before its first line (the context) through its lines, for as long
 * as every line is a record that chains cleanly (canonical, seq +1, hash,
 * timestamp and version not going back, not a header or recovery record).
 * The walk in verify.c takes that clean prefix in one step when its own
 * chain state ends exactly at the context record; anything else (damage, a
 * held record, a finding) it walks line by line as before, so the findings
 * are the same with any number of threads. tests/test_tamper.c holds it to
 * that on its whole corpus, tests/v2_tamper.py on v2's.
 *
 * A v2 block is one of events only (a seal, tree, checkpoint or clock record
 * ends the clean prefix: the walk checks those itself) and carries each
 * record's hash, which the walk appends to the chain's Merkle tree.
 *
 * Memory: each worker reads one block (plus a line either side) into its own
 * buffer; at most `window` results wait for the walk.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format_v2.h"
#include "verify.h"

struct slot {
	bool ready;
	struct al_vblock b;
	uint8_t *buf; /* keep: the block's bytes, read here by its worker */
	uint8_t *hbuf; /* a v2 block's hashes (made by the first v2 block here) */
};

struct al_vpool {
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	pthread_t *th;
	unsigned nth;
	bool quit;
	uint64_t block;
	bool keep;
	unsigned window;
	struct slot *slot;
	/* the job: one file; blocks [head, take) are being checked or wait */
	int fd;
	uint64_t limit;
	unsigned min_version;
	bool has_expect;
	uint64_t expect_seq;
	uint64_t nblocks, take, head;
	unsigned busy;
};

struct job {
	int fd;
	uint64_t limit, block;
	unsigned min_version;
	bool has_expect;
	uint64_t expect_seq;
};

ssize_t al_pread_full(int fd, uint8_t *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* The most lines that can start in a block: a record's line holds at least
 * its 64-digit hash. */
static size_t max_lines(uint64_t block)
{
	return (size_t)(block / (2 * AL_HASH_LEN)) + 1;
}

/* Check block k: the lines that start in [k*block, (k+1)*block) (never the
 * file's first line: the walk reads headers itself). *hbuf: where a v2
 * block's hashes go (allocated here the first time, max_lines of them). */
static void check_block(const struct job *j, uint64_t k, uint8_t *buf, uint8_t *dec, uint8_t *work,
			uint8_t **hbuf, struct al_vblock *b)
{
	uint64_t a = k * j->block, e = a + j->block < j->limit ? a + j->block : j->limit;
	uint64_t r0 = a > AL_LINE_MAX ? a - AL_LINE_MAX : 0;
	uint64_t r1 = e + AL_LINE_MAX < j->limit ? e + AL_LINE_MAX : j->limit;
	struct al_parsed p;
	size_t eoff;
	uint8_t h[AL_HASH_LEN];

	memset(b, 0, offsetof(struct al_vblock, ring_seq));
	b->hashes = NULL;
	b->k = k;
	b->start = b->end = e; /* no line starts here: nothing to take */
	ssize_t got = al_pread_full(j->fd, buf, (size_t)(r1 - r0), r0);
	if (got < 0)
		return; /* the walk reads it itself and reports the error */
	b->data = buf;
	b->data_off = r0;
	b->data_len = (size_t)got;
	size_t n = (size_t)got, from = a ? (size_t)(a - 1 - r0) : 0;
	if (from >= n)
		return;
	/* the first line starting at or after a: right after a '\n' */
	uint8_t *nl = memchr(buf + from, '\n', n - from);
	if (!nl || r0 + (uint64_t)(nl - buf) + 1 >= e)
		return;
	size_t s = (size_t)(nl - buf) + 1; /* index of the first line */
	b->start = b->end = r0 + s;
	/* the context: the line ending at s - 1 */
	size_t cs = s - 1;
	while (cs > 0 && buf[cs - 1] != '\n')
		cs--;
	if (cs == 0 && r0 > 0)
		return; /* longer than a record can be */
	if (al_parse(buf + cs, s - 1 - cs, dec, &p, &eoff) != AL_PERR_OK)
		return;
	b->has_ctx = true;
	b->ctx_seq = p.rec.f[AL_F_SEQ].u;
	memcpy(b->ctx_hash, p.hash, AL_HASH_LEN);

	const uint8_t *prev = b->ctx_hash;
	uint64_t seq_want = b->ctx_seq + 1;
	size_t pos = s;
	while (r0 + pos < e) {
		const uint8_t *line = buf + pos;
		nl = memchr(line, '\n', n - pos);
		if (!nl)
			break; /* too long, or the file ends inside it */
		size_t len = (size_t)(nl - line);
		if (len + 1 > AL_LINE_MAX || al_parse(line, len, dec, &p, &eoff) != AL_PERR_OK)
			break;
		const struct al_record *r = &p.rec;
		uint64_t seq = r->f[AL_F_SEQ].u;
		const uint8_t *ts = r->f[AL_F_TIMESTAMP].p;
		if (r->type == AL_T_HEADER || r->type == AL_T_RECOVERY || seq != seq_want ||
		    r->version < j->min_version)
			break;
		if (b->lines && (r->version < b->last_version || memcmp(ts, b->last_ts, AL_TS_LEN) < 0))
			break;
		/* v2: events only, and never after v0/v1 lines in one block */
		bool v2 = r->version >= AL_V2;
		if (v2 && (r->type != AL_T_EVENT || (b->lines && b->min_version < AL_V2)))
			break;
		if (v2 && !b->lines) {
			if (!*hbuf && !(*hbuf = malloc(max_lines(j->block) * AL_HASH_LEN)))
				break;
			b->hashes = *hbuf;
		}
		if (v2 && b->lines >= max_lines(j->block))
			break; /* (cannot be: a line holds its hash) */
		if (!al_check_hash(&p, line, prev, work, h))
			break;
		if (v2)
			memcpy(*hbuf + b->lines * AL_HASH_LEN, p.hash, AL_HASH_LEN);
		if (!b->lines) {
			b->first_seq = seq;
			memcpy(b->first_ts, ts, AL_TS_LEN);
			b->first_version = b->min_version = b->max_version = r->version;
		}
		if (r->version < b->min_version)
			b->min_version = r->version;
		if (r->version > b->max_version)
			b->max_version = r->version;
		b->last_seq = seq;
		b->last_version = r->version;
		memcpy(b->last_ts, ts, AL_TS_LEN);
		memcpy(b->last_hash, p.hash, AL_HASH_LEN);
		if (j->has_expect && seq == j->expect_seq) {
			b->has_expect = true;
			memcpy(b->expect_hash, p.hash, AL_HASH_LEN);
		}
		b->events += r->type == AL_T_EVENT;
		unsigned i = (unsigned)(b->lines % AL_VRING);
		b->ring_seq[i] = seq;
		b->ring_off[i] = r0 + pos;
		b->ring_len[i] = (uint32_t)len;
		b->lines++;
		prev = b->last_hash;
		seq_want = seq + 1;
		pos += len + 1;
	}
	b->end = r0 + pos;
}

static void *worker(void *arg)
{
	struct al_vpool *pl = arg;
	uint8_t *buf = malloc(pl->block + 2 * AL_LINE_MAX);
	uint8_t *dec = malloc(AL_LINE_MAX);
	uint8_t *work = malloc(AL_HASH_LEN + AL_BODY_MAX);
	struct al_vblock *b = malloc(sizeof(*b));

	if (pl->keep) { /* the slots hold the bytes */
		free(buf);
		buf = NULL;
	}
	pthread_mutex_lock(&pl->mu);
	for (;;) {
		while (!pl->quit && !(pl->take < pl->nblocks && pl->take < pl->head + pl->window))
			pthread_cond_wait(&pl->work, &pl->mu);
		if (pl->quit)
			break;
		uint64_t k = pl->take++;
		struct job j = {.fd = pl->fd, .limit = pl->limit, .block = pl->block,
				.min_version = pl->min_version, .has_expect = pl->has_expect,
				.expect_seq = pl->expect_seq};
		pl->busy++;
		/* slot k % window is free: the walk is done with block k - window */
		struct slot *own = &pl->slot[k % pl->window];
		uint8_t *into = pl->keep ? own->buf : buf;
		pthread_mutex_unlock(&pl->mu);
		if (into && dec && work && b) {
			check_block(&j, k, into, dec, work, &own->hbuf, b);
			if (!pl->keep)
				b->data = NULL; /* (its own buffer: read again next block) */
		} else if (b) { /* out of memory: an empty result; the walk reads the block itself */
			memset(b, 0, sizeof(*b));
			b->k = k;
			b->start = b->end = k * j.block;
		}
		pthread_mutex_lock(&pl->mu);
		struct slot *sl = &pl->slot[k % pl->window];
		if (b)
			sl->b = *b;
		else
			sl->b = (struct al_vblock){.k = k, .start = k * j.block, .end = k * j.block};
		sl->ready = true;
		pl->busy--;
		pthread_cond_broadcast(&pl->done);
	}
	pthread_mutex_unlock(&pl->mu);
	free(buf);
	free(dec);
	free(work);
	free(b);
	return NULL;
}

unsigned al_vpool_cpus(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

int al_vpool_new(unsigned threads, uint64_t block, bool keep, struct al_vpool **ret)
{
	struct al_vpool *pl = calloc(1, sizeof(*pl));
	int r;

	if (!pl)
		return -ENOMEM;
	pthread_mutex_init(&pl->mu, NULL);
	pthread_cond_init(&pl->work, NULL);
	pthread_cond_init(&pl->done, NULL);
	pl->block = block ? block : AL_VBLOCK;
	pl->window = 4 * threads;
	pl->keep = keep;
	pl->slot = calloc(pl->window, sizeof(*pl->slot));
	pl->th = calloc(threads, sizeof(*pl->th));
	if (!pl->slot || !pl->th) {
		al_vpool_free(pl);
		return -ENOMEM;
	}
	for (unsigned i = 0; keep && i < pl->window; i++)
		if (!(pl->slot[i].buf = malloc(pl->block + 2 * AL_LINE_MAX))) {
			al_vpool_free(pl);
			return -ENOMEM;
		}
	for (; pl->nth < threads; pl->nth++) {
		r = pthread_create(&pl->th[pl->nth], NULL, worker, pl);
		if (r) {
			al_vpool_free(pl);
			return -r;
		}
	}
	*ret = pl;
	return 0;
}

uint64_t al_vpool_block(const struct al_vpool *pl)
{
	return pl->block;
}

void al_vpool_free(struct al_vpool *pl)
{
	if (!pl)
		return;
	pthread_mutex_lock(&pl->mu);
	pl->quit = true;
	pthread_cond_broadcast(&pl->work);
	pthread_mutex_unlock(&pl->mu);
	for (unsigned i = 0; i < pl->nth; i++)
		pthread_join(pl->th[i], NULL);
	pthread_cond_destroy(&pl->work);
	pthread_cond_destroy(&pl->done);
	pthread_mutex_destroy(&pl->mu);
	free(pl->th);
	for (unsigned i = 0; pl->slot && i < pl->window; i++) {
		free(pl->slot[i].buf);
		free(pl->slot[i].hbuf);
	}
	free(pl->slot);
	free(pl);
}

void al_vpool_start(struct al_vpool *pl, int fd, uint64_t limit, unsigned min_version, bool has_expect,
		    uint64_t expect_seq)
{
	pthread_mutex_lock(&pl->mu);
	pl->fd = fd;
	pl->limit = limit;
	pl->min_version = min_version;
	pl->has_expect = has_expect;
	pl->expect_seq = expect_seq;
	pl->head = pl->take = 0;
	pl->nblocks = (limit + pl->block - 1) / pl->block;
	pthread_cond_broadcast(&pl->work);
	pthread_mutex_unlock(&pl->mu);
}

const struct al_vblock *al_vpool_peek(struct al_vpool *pl)
{
	const struct al_vblock *b = NULL;

	pthread_mutex_lock(&pl->mu);
	if (pl->head < pl->nblocks) {
		struct slot *sl = &pl->slot[pl->head % pl->window];
		while (!sl->ready)
			pthread_cond_wait(&pl->done, &pl->mu);
		b = &sl->b; /* not written again before al_vpool_next */
	}
	pthread_mutex_unlock(&pl->mu);
	return b;
}

void al_vpool_next(struct al_vpool *pl)
{
	pthread_mutex_lock(&pl->mu);
	pl->slot[pl->head % pl->window].ready = false;
	pl->head++;
	pthread_cond_broadcast(&pl->work);
	pthread_mutex_unlock(&pl->mu);
}

void al_vpool_stop(struct al_vpool *pl)
{
	pthread_mutex_lock(&pl->mu);
	pl->nblocks = pl->take; /* hand out no more */
	while (pl->busy)
		pthread_cond_wait(&pl->done, &pl->mu);
	for (unsigned i = 0; i < pl->window; i++)
		pl->slot[i].ready = false;
	pl->head = pl->take = pl->nblocks = 0;
	pthread_mutex_unlock(&pl->mu);
}
