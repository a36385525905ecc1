/* SPDX-License-Identifier: MIT */
/*
 * The v2 writer, in-process sealing (docs/format.md Part II, issue 12): what
 * it puts on disk, checked with the format layer alone (al_v2_seal_check,
 * al_v2_tree_check, al_v2_checkpoint_check, an independent Merkle range):
 * every write ends with a seal whose MAC verifies, epochs split and advance,
 * idle seals fill idle epochs, open/close seals frame each writer's life,
 * the tree continues across reopen, rotation and a v1 -> v2 upgrade; a
 * sealing state that is older, readable by others or a symlink is refused;
 * the persisted state moves forward and forgets old seeds; crash damage is
 * repaired from right after a seal. Epochs are driven by the clock hook.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tu.h"
#include "format_v2.h"
#include "keyfile.h"
#include "merkle.h"
#include "checkpoint.h"
#include "seal.h"
#include "sealkey.h"

#define DELTA (UINT64_C(1000000000)) /* 1 s epochs, driven by the test clock */
#define BOOT0 (UINT64_C(5000000000000))

static const uint8_t boot_a[16] = {0xb0, 0x07, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};

/* ---- an independent walk of what the writer wrote -------------------------- */

struct v2w {
	const struct tu_v2keys *k;
	struct al_seal_walk walk;
	uint8_t prev[AL_HASH_LEN];
	bool have_prev;
	uint64_t next_seq;
	struct al_merkle_range mr, mr_safe;
	bool tree_on, tree_on_safe;
	uint64_t first_seq, first_seq_safe;
	uint8_t safe_hash[AL_HASH_LEN];
	uint64_t safe_seq;
	char chain_id[33];
	unsigned kinds[4], trees, ckpts, clocks, events, recoveries, records, v2records, opens;
	uint32_t ep[1 << 14];
	uint8_t epk[1 << 14];
	unsigned nep;
	bool have_seal;
	uint64_t last_seal_seq;
	int last_kind;
	unsigned after_seal;       /* records after the last seal */
	uint64_t seal_end[1 << 14]; /* file offsets just past seals, last file */
	unsigned nends;
	uint64_t last_damage_off;   /* of the last recovery record */
	char err[256];
};

static int kind_of(const struct al_val *v)
{
	static const char *const w[] = {"batch", "idle", "open", "close"};
	for (int i = 0; i < 4; i++)
		if (strlen(w[i]) == v->n && memcmp(w[i], v->p, v->n) == 0)
			return i;
	return -1;
}

static size_t members(const struct al_record *r, struct al_v2_member *m)
{
	static const struct {
		int f;
		uint8_t tag;
		bool is_int;
	} T[] = {
		{AL_F_KIND, AL_TAG_KIND, false},	  {AL_F_EPOCH, AL_TAG_EPOCH, true},
		{AL_F_SEAL_KEY, AL_TAG_SEAL_KEY, false},  {AL_F_CHAIN_ID, AL_TAG_CHAIN_ID, false},
		{AL_F_PREV_SEAL, AL_TAG_PREV_SEAL, true}, {AL_F_PREV_KIND, AL_TAG_PREV_KIND, false},
		{AL_F_MAC, AL_TAG_MAC, false},		  {AL_F_SIZE, AL_TAG_SIZE, true},
		{AL_F_FIRST_SEQ, AL_TAG_FIRST_SEQ, true}, {AL_F_RANGE, AL_TAG_RANGE, false},
		{AL_F_NOTE, AL_TAG_NOTE, false},
	};
	size_t n = 0;
	for (size_t i = 0; i < sizeof(T) / sizeof(T[0]); i++)
		if (r->present & AL_BIT(T[i].f))
			m[n++] = (struct al_v2_member){T[i].tag, T[i].is_int, r->f[T[i].f].p,
						       r->f[T[i].f].n, r->f[T[i].f].u};
	return n;
}

static void v2w_init(struct v2w *w, const struct tu_v2keys *k)
{
	memset(w, 0, sizeof(*w));
	w->k = k;
	w->last_kind = -1;
	al_seal_walk_init(&w->walk, k->S);
}

#define FAIL(...)                                                      \
	do {                                                           \
		snprintf(w->err, sizeof(w->err), __VA_ARGS__);         \
		goto out;                                              \
	} while (0)

/* Walk one file of the chain (files in chain order). 0, or -1 with w->err. */
static int v2w_file_upto(struct v2w *w, const char *path, uint64_t limit)
{
	size_t len = 0, pos = 0, err_off;
	uint8_t *buf = tu_read_file(path, &len);
	if (limit && limit < len)
		len = (size_t)limit; /* what the next file's header says was durable */
	uint8_t *dec = malloc(AL_LINE_MAX), *work = malloc(AL_HASH_LEN + AL_BODY_MAX);
	struct al_parsed p;
	bool first = true;
	int rc = -1;

	assert_non_null(buf);
	w->nends = 0;
	while (pos < len) {
		uint8_t *line = buf + pos, *nl = memchr(line, '\n', len - pos);
		uint8_t prev[AL_HASH_LEN], h[AL_HASH_LEN];
		size_t n = nl ? (size_t)(nl - line) : len - pos;
		uint64_t off = pos;
		pos += n + 1;
		if (al_parse(line, n, dec, &p, &err_off) != AL_PERR_OK)
			continue; /* damage: a recovery record must name it */
		const struct al_record *r = &p.rec;
		uint64_t seq = r->f[AL_F_SEQ].u;
		memcpy(prev, w->prev, AL_HASH_LEN);
		if (r->type == AL_T_HEADER && first) {
			if (!w->chain_id[0])
				memcpy(w->chain_id, r->f[AL_F_CHAIN_ID].p, 32);
			if (r->present & AL_BIT(AL_F_PREV_HASH))
				assert_int_equal(al_unhex(r->f[AL_F_PREV_HASH].p, 64, prev), 0);
			else
				memset(prev, 0, AL_HASH_LEN);
		}
		first = false;
		if (r->type == AL_T_RECOVERY) {
			if (r->version == AL_V2 && r->f[AL_F_LAST_SEQ].u != w->safe_seq)
				FAIL("%s: recovery seq %llu names damage after seq %llu, not after the last seal/header (%llu)",
				     path, (unsigned long long)seq,
				     (unsigned long long)r->f[AL_F_LAST_SEQ].u,
				     (unsigned long long)w->safe_seq);
			memcpy(prev, w->safe_hash, AL_HASH_LEN);
			w->mr = w->mr_safe;
			w->tree_on = w->tree_on_safe;
			w->first_seq = w->first_seq_safe;
			w->next_seq = w->safe_seq + 1;
			w->after_seal = 0;
			w->recoveries++;
			w->last_damage_off = r->f[AL_F_DAMAGE_OFFSET].u;
		}
		if (!al_check_hash(&p, line, prev, work, h))
			continue; /* does not chain: damage */
		if (w->have_prev && seq != w->next_seq)
			FAIL("%s: seq %llu after %llu", path, (unsigned long long)seq,
			     (unsigned long long)w->next_seq - 1);
		w->records++;
		w->events += r->type == AL_T_EVENT;
		w->after_seal++;
		if (r->version == AL_V2) {
			struct al_v2_member m[12];
			size_t nm = members(r, m);
			w->v2records++;
			if (!w->tree_on) {
				al_merkle_range_init(&w->mr);
				w->first_seq = seq;
				w->tree_on = true;
			}
			if (r->type == AL_T_TREE || r->type == AL_T_CHECKPOINT) {
				struct al_v2_tree_state t = {.first_seq = w->first_seq, .size = w->mr.size};
				char origin[128];
				int o = snprintf(origin, sizeof(origin), "%s/auditlog/%s", w->k->host,
						 w->chain_id);
				memcpy(t.head, prev, AL_HASH_LEN);
				if (al_merkle_range_root(&w->mr, t.root) != 0)
					FAIL("%s: tree record at seq %llu over an empty tree", path,
					     (unsigned long long)seq);
				int cr = r->type == AL_T_TREE
						 ? al_v2_tree_check(m, nm, &t)
						 : al_v2_checkpoint_check(m, nm, &t, (const uint8_t *)origin,
									  (size_t)o, w->k->pub);
				if (cr != 0)
					FAIL("%s: %s at seq %llu does not check (%d)", path,
					     r->type == AL_T_TREE ? "tree" : "checkpoint",
					     (unsigned long long)seq, cr);
				w->trees += r->type == AL_T_TREE;
				w->ckpts += r->type == AL_T_CHECKPOINT;
			}
			w->clocks += r->type == AL_T_CLOCK;
			assert_int_equal(al_merkle_range_append(&w->mr, h), 0);
			if (r->type == AL_T_SEAL) {
				uint32_t e = 0;
				int sr = al_v2_seal_check(&w->walk, w->k->key_id,
							  (const uint8_t *)w->chain_id, prev, seq,
							  (const char *)r->f[AL_F_TIMESTAMP].p, m, nm, &e);
				int kd = kind_of(&r->f[AL_F_KIND]);
				if (sr != 0)
					FAIL("%s: seal at seq %llu does not verify (%d)", path,
					     (unsigned long long)seq, sr);
				if (kd == 2) {
					bool hp = r->present & AL_BIT(AL_F_PREV_SEAL);
					if (hp != w->have_seal ||
					    (hp && (r->f[AL_F_PREV_SEAL].u != w->last_seal_seq ||
						    kind_of(&r->f[AL_F_PREV_KIND]) != w->last_kind)))
						FAIL("%s: open seal at seq %llu names the wrong previous seal",
						     path, (unsigned long long)seq);
					w->opens++;
				}
				w->kinds[kd]++;
				assert_true(w->nep < sizeof(w->ep) / sizeof(w->ep[0]));
				w->epk[w->nep] = (uint8_t)kd;
				w->ep[w->nep++] = e;
				w->have_seal = true;
				w->last_seal_seq = seq;
				w->last_kind = kd;
				w->after_seal = 0;
				if (w->nends < sizeof(w->seal_end) / sizeof(w->seal_end[0]))
					w->seal_end[w->nends++] = off + n + 1;
			}
		}
		if (r->version < AL_V2 || r->type == AL_T_SEAL || r->type == AL_T_HEADER) {
			/* where honest damage may start (docs/format.md 19.5) */
			memcpy(w->safe_hash, h, AL_HASH_LEN);
			w->safe_seq = seq;
			w->mr_safe = w->mr;
			w->tree_on_safe = w->tree_on;
			w->first_seq_safe = w->first_seq;
		}
		memcpy(w->prev, h, AL_HASH_LEN);
		w->have_prev = true;
		w->next_seq = seq + 1;
	}
	rc = 0;
out:
	free(buf);
	free(dec);
	free(work);
	return rc;
}

static int v2w_file(struct v2w *w, const char *path)
{
	return v2w_file_upto(w, path, 0);
}

/* The prev_size the header of the file at path names (0: none). */
static uint64_t header_prev_size(const char *path)
{
	size_t len, err_off;
	uint8_t *b = tu_read_file(path, &len), dec[AL_LINE_MAX];
	uint8_t *nl = b ? memchr(b, '\n', len) : NULL;
	struct al_parsed p;
	uint64_t r = 0;
	if (nl && al_parse(b, (size_t)(nl - b), dec, &p, &err_off) == AL_PERR_OK &&
	    (p.rec.present & AL_BIT(AL_F_PREV_SIZE)))
		r = p.rec.f[AL_F_PREV_SIZE].u;
	free(b);
	return r;
}

static void v2w_done(struct v2w *w)
{
	al_seal_walk_wipe(&w->walk);
}

/* Check the seal epochs' structure: within a writer's life e then e or e+1. */
static void check_epoch_steps(const struct v2w *w)
{
	for (unsigned i = 1; i < w->nep; i++) {
		assert_true(w->ep[i] >= w->ep[i - 1]);
		if (w->epk[i] != 2 /* open */)
			assert_true(w->ep[i] <= w->ep[i - 1] + 1);
	}
}

/* ---- fixtures ---------------------------------------------------------------- */

struct fx {
	char *dir, *path;
	struct tu_v2keys k;
	struct tu_clock clk;
	/* write ends seen by the I/O hooks (the active file's fd at open) */
	uint64_t wend[1 << 14];
	_Atomic unsigned nw;
	struct al_io_hooks io;
	_Atomic unsigned fsyncs;
	unsigned fail_fsync; /* fail this (1-based) fdatasync with -EIO; 0: none */
};

static int before_fsync(void *ctx, int fd, uint64_t off, size_t len)
{
	struct fx *f = ctx;
	(void)fd, (void)off, (void)len;
	unsigned n = atomic_fetch_add(&f->fsyncs, 1) + 1;
	return f->fail_fsync && n == f->fail_fsync ? -EIO : 0;
}

static void after_write(void *ctx, int fd, uint64_t off, size_t len, long res)
{
	struct fx *f = ctx;
	(void)fd;
	if (res > 0 && (size_t)res == len) {
		unsigned i = atomic_fetch_add(&f->nw, 1);
		if (i < sizeof(f->wend) / sizeof(f->wend[0]))
			f->wend[i] = off + len;
	}
}

static struct fx *fx_new(uint32_t epoch)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->dir = tu_mkdtemp();
	f->path = tu_path(f->dir, "audit.log");
	memcpy(f->clk.boot_id, boot_a, 16);
	/* the state says epoch `epoch` began at BOOT0; the clock is 1 ms later */
	atomic_store(&f->clk.boot, BOOT0 + 1000000u);
	/* t0 such that the wall clock now is 1 ms into `epoch` */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t wall = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	tu_v2_keys(f->dir, "host-1.example", wall - epoch * DELTA - 1000000u, DELTA, epoch, boot_a,
		   BOOT0, &f->k);
	f->io.ctx = f;
	f->io.after_write = after_write;
	f->io.before_fsync = before_fsync;
	return f;
}

static void fx_free(struct fx *f)
{
	tu_rmtree(f->dir);
	free(f->dir);
	free(f->path);
	tu_v2_keys_free(&f->k);
	free(f);
}

static struct auditlog_config *fx_config(struct fx *f)
{
	struct auditlog_config *cfg = tu_config(f->path);
	tu_v2_config(cfg, &f->k, &f->clk);
	assert_int_equal(auditlog__config_set_io_hooks(cfg, &f->io), 0);
	return cfg;
}

static struct auditlog *fx_open(struct fx *f)
{
	struct auditlog_config *cfg = fx_config(f);
	struct auditlog *log = NULL;
	int r = auditlog_open(cfg, &log);
	auditlog_config_free(cfg);
	assert_int_equal(r, 0);
	return log;
}

static void put_events(struct auditlog *log, unsigned n, bool sync)
{
	for (unsigned i = 0; i < n; i++) {
		struct auditlog_event ev = tu_event("C_Sign", i);
		assert_int_equal(sync ? auditlog_record_sync(log, &ev) : auditlog_record(log, &ev), 0);
	}
}

/* The boot clock to a point of an epoch; the wall clock moves as much (so
 * that the state's prediction stays right and no clock record is due). */
static void boot_set(struct fx *f, uint32_t epoch_from0, uint64_t frac_ns)
{
	uint64_t to = BOOT0 + epoch_from0 * DELTA + frac_ns;
	uint64_t was = atomic_exchange(&f->clk.boot, to);
	atomic_fetch_add(&f->clk.wall_offset, (int64_t)(to - was));
}

static void walk_one(struct fx *f, struct v2w *w)
{
	v2w_init(w, &f->k);
	if (v2w_file(w, f->path) != 0)
		fail_msg("%s", w->err);
}

/* every write the writer made ends right after a seal line */
static void check_writes_end_in_seals(struct fx *f, const struct v2w *w)
{
	unsigned nw = atomic_load(&f->nw);
	assert_true(nw > 0);
	for (unsigned i = 0; i < nw; i++) {
		bool found = false;
		for (unsigned j = 0; j < w->nends && !found; j++)
			found = w->seal_end[j] == f->wend[i];
		if (!found)
			fail_msg("write %u ends at %llu, not right after a seal", i,
				 (unsigned long long)f->wend[i]);
	}
}

/* ---- tests --------------------------------------------------------------------- */

static void t_basic(void **state)
{
	(void)state;
	struct fx *f = fx_new(7);
	struct auditlog *log = fx_open(f);
	struct v2w w;

	put_events(log, 50, false);
	put_events(log, 5, true);
	put_events(log, 200, false);
	assert_int_equal(auditlog_flush(log), 0);
	put_events(log, 3, true);
	assert_int_equal(auditlog_close(log), 0);

	walk_one(f, &w);
	assert_int_equal(w.events, 258);
	assert_int_equal(w.kinds[2], 1); /* open */
	assert_int_equal(w.kinds[3], 1); /* close */
	assert_true(w.kinds[0] >= 3);    /* batch seals */
	assert_true(w.trees >= 1);       /* the first batch of the file */
	assert_true(w.ckpts >= 1);       /* at close */
	assert_int_equal(w.after_seal, 0);
	assert_int_equal(w.last_kind, 3);
	assert_int_equal(w.first_seq, 0); /* a v2 chain's tree starts at its header */
	assert_int_equal(w.v2records, w.records);
	for (unsigned i = 0; i < w.nep; i++)
		assert_int_equal(w.ep[i], 7);
	check_writes_end_in_seals(f, &w);
	v2w_done(&w);
	fx_free(f);
}

static void t_epochs_split(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog *log = fx_open(f);
	struct v2w w;

	for (uint32_t e = 0; e < 6; e++) {
		boot_set(f, e, 1000000u);
		put_events(log, 400, false);
		boot_set(f, e, DELTA / 4);
		put_events(log, 400, false);
		assert_int_equal(auditlog_flush(log), 0);
	}
	assert_int_equal(auditlog_close(log), 0);
	walk_one(f, &w);
	assert_int_equal(w.events, 4800);
	check_epoch_steps(&w);
	assert_int_equal(w.ep[0], 0);
	assert_int_equal(w.ep[w.nep - 1], 5);
	for (uint32_t e = 0; e < 6; e++) {
		bool seen = false;
		for (unsigned i = 0; i < w.nep; i++)
			seen |= w.ep[i] == e;
		assert_true(seen);
	}
	check_writes_end_in_seals(f, &w);
	v2w_done(&w);
	fx_free(f);
}

/* A batch formed while the epoch changes is split: seal of e, then e+1's. */
static void t_split_in_batch(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog_config *cfg = fx_config(f);
	struct auditlog *log = NULL;
	struct v2w w;

	/* hold async records for a while so that one batch takes them all */
	assert_int_equal(auditlog_config_set_async_coalesce_us(cfg, 200000), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	/* the worker formats them as the epochs pass: 1/4 epoch a clock read
	 * (at a batch's start, every 64 records, and wherever else it looks) */
	atomic_store(&f->clk.boot_step, DELTA / 4);
	put_events(log, 3000, false);
	assert_int_equal(auditlog_flush(log), 0);
	atomic_store(&f->clk.boot_step, 0);
	assert_int_equal(auditlog_close(log), 0);

	walk_one(f, &w);
	/* (the clock leaps here, so seals may also be more than one epoch apart) */
	/* some write holds a seal of epoch 0 followed by one of epoch 1 */
	bool split = false;
	unsigned nw = atomic_load(&f->nw);
	for (unsigned i = 0; i + 1 < w.nends && !split; i++) {
		if (w.ep[i + 1] != w.ep[i] + 1 || w.epk[i] != 0)
			continue;
		bool boundary = false; /* a write ends at seal i? then no split */
		for (unsigned j = 0; j < nw; j++)
			boundary |= f->wend[j] == w.seal_end[i];
		split = !boundary;
	}
	assert_true(split);
	check_writes_end_in_seals(f, &w);
	v2w_done(&w);
	fx_free(f);
}

static bool file_has(const char *path, const char *needle)
{
	size_t n;
	uint8_t *b = tu_read_file(path, &n);
	bool r = b && memmem(b, n, needle, strlen(needle));
	free(b);
	return r;
}

static void wait_for(const char *path, const char *needle)
{
	for (int i = 0; i < 3000 && !file_has(path, needle); i++)
		usleep(1000);
	assert_true(file_has(path, needle));
}

static void t_idle(void **state)
{
	(void)state;
	struct fx *f = fx_new(3);
	struct auditlog *log = fx_open(f);
	struct v2w w;
	char needle[64];

	/* each idle seal is written and fdatasynced on its own */
	for (uint32_t e = 1; e <= 4; e++) {
		unsigned fs = atomic_load(&f->fsyncs);
		boot_set(f, e, DELTA / 4); /* before the midpoint: nothing yet */
		usleep(20000);
		snprintf(needle, sizeof(needle), "\"kind\":\"idle\",\"epoch\":%u,", 3 + e);
		assert_false(file_has(f->path, needle));
		boot_set(f, e, DELTA / 2 + 1000u);
		wait_for(f->path, needle);
		for (int i = 0; i < 1000 && atomic_load(&f->fsyncs) == fs; i++)
			usleep(1000);
		assert_int_equal(atomic_load(&f->fsyncs), fs + 1);
	}
	/* a skipped epoch (the clock jumps past two) is a gap the verifier reports */
	assert_int_equal(auditlog_close(log), 0);
	walk_one(f, &w);
	assert_int_equal(w.kinds[1], 4);
	assert_int_equal(w.ep[0], 3);
	check_epoch_steps(&w);
	check_writes_end_in_seals(f, &w);
	v2w_done(&w);
	fx_free(f);
}

static void t_reopen(void **state)
{
	(void)state;
	struct fx *f = fx_new(10);
	struct v2w w;

	for (int life = 0; life < 3; life++) {
		struct auditlog *log = fx_open(f);
		put_events(log, 100, false);
		put_events(log, 2, true);
		boot_set(f, (uint32_t)life + 1, 1000u);
		assert_int_equal(auditlog_close(log), 0);
	}
	walk_one(f, &w);
	assert_int_equal(w.opens, 3);
	assert_int_equal(w.kinds[3], 3);
	assert_int_equal(w.events, 306);
	assert_true(w.ckpts >= 3); /* and each checks against the one tree */
	assert_int_equal(w.first_seq, 0);
	check_epoch_steps(&w);
	v2w_done(&w);
	fx_free(f);
}

/* Files of the chain, oldest first: rotated names sort by their time. */
static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static unsigned chain_files(struct fx *f, char **out, unsigned cap)
{
	DIR *d = opendir(f->dir);
	struct dirent *e;
	unsigned n = 0;
	assert_non_null(d);
	while ((e = readdir(d)))
		if (strncmp(e->d_name, "audit.log.", 10) == 0 && n < cap)
			out[n++] = tu_path(f->dir, e->d_name);
	closedir(d);
	qsort(out, n, sizeof(out[0]), cmpstr);
	out[n++] = strdup(f->path);
	return n;
}

static void walk_chain(struct fx *f, struct v2w *w)
{
	char *files[256];
	unsigned n = chain_files(f, files, 255);
	v2w_init(w, &f->k);
	for (unsigned i = 0; i < n; i++) {
		uint64_t upto = i + 1 < n ? header_prev_size(files[i + 1]) : 0;
		if (v2w_file_upto(w, files[i], upto) != 0)
			fail_msg("%s", w->err);
	}
	for (unsigned i = 0; i < n; i++)
		free(files[i]);
}

static void t_rotation(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog_config *cfg = fx_config(f);
	struct auditlog *log = NULL;
	struct v2w w;

	assert_int_equal(auditlog_config_set_rotate_bytes(cfg, 64u << 10), 0);
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, 16u << 10), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	for (int i = 0; i < 20; i++) {
		put_events(log, 150, false);
		assert_int_equal(auditlog_flush(log), 0);
		if (i % 5 == 4)
			boot_set(f, (uint32_t)i / 5 + 1, 1000u);
	}
	assert_int_equal(auditlog_close(log), 0);
	assert_true(tu_count_files(f->dir) > 6); /* keys + several log files */
	walk_chain(f, &w);
	assert_int_equal(w.events, 3000);
	assert_int_equal(w.opens, 1);
	assert_int_equal(w.kinds[3], 1);
	assert_int_equal(w.first_seq, 0); /* one tree across every file */
	check_epoch_steps(&w);
	v2w_done(&w);

	/* and the next writer continues it */
	log = fx_open(f);
	put_events(log, 10, true);
	assert_int_equal(auditlog_close(log), 0);
	walk_chain(f, &w);
	assert_int_equal(w.opens, 2);
	assert_int_equal(w.events, 3010);
	v2w_done(&w);
	fx_free(f);
}

/* A crash cut a rotated file's first batch before its seal: the repair
 * starts right after its header, the tree and the open seal's previous seal
 * come from the file before it (read from its bounded tail). */
static void t_crash_rotated_first_batch(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog_config *cfg = fx_config(f);
	struct auditlog *log = NULL;
	struct v2w w;
	size_t len;

	assert_int_equal(auditlog_config_set_rotate_bytes(cfg, 32u << 10), 0);
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, 16u << 10), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	for (int i = 0; i < 6; i++) {
		put_events(log, 60, false);
		assert_int_equal(auditlog_flush(log), 0);
	}
	assert_int_equal(auditlog_close(log), 0);
	uint8_t *b = tu_read_file(f->path, &len);
	uint8_t *nl = memchr(b, '\n', len);
	assert_non_null(nl);
	uint64_t cut = (uint64_t)(nl - b) + 1 + 57; /* the header, and a torn line */
	assert_int_equal(truncate(f->path, (off_t)cut), 0);
	free(b);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	put_events(log, 4, true);
	assert_int_equal(auditlog_close(log), 0);
	auditlog_config_free(cfg);
	walk_chain(f, &w);
	assert_int_equal(w.recoveries, 1);
	assert_int_equal(w.opens, 2);
	assert_int_equal(w.first_seq, 0);
	assert_true(w.ckpts >= 1);
	v2w_done(&w);
	fx_free(f);
}

/* A wall-clock step is noted once in a clock record; epochs go on by the
 * boot clock (docs/format.md 17.2 rule 3, 21). */
static void t_clock_step(void **state)
{
	(void)state;
	struct fx *f = fx_new(50);
	struct auditlog *log = fx_open(f);
	struct v2w w;

	put_events(log, 5, true);
	atomic_fetch_add(&f->clk.wall_offset, (int64_t)3600 * 1000000000); /* +1 h */
	put_events(log, 5, true);
	put_events(log, 5, true); /* no second record for the same step */
	atomic_fetch_sub(&f->clk.wall_offset, (int64_t)3600 * 1000000000); /* and back */
	put_events(log, 5, true);
	assert_int_equal(auditlog_close(log), 0);
	walk_one(f, &w);
	assert_int_equal(w.clocks, 2);
	for (unsigned i = 0; i < w.nep; i++)
		assert_int_equal(w.ep[i], 50); /* the boot clock did not move */
	assert_true(file_has(f->path, "\"type\":\"clock\",\"epoch\":50,"));
	v2w_done(&w);
	fx_free(f);
}

/* Checkpoints every N records and every T ms (boot clock), each checked. */
static void t_checkpoint_interval(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog_config *cfg = fx_config(f);
	struct auditlog *log = NULL;
	struct v2w w;

	assert_int_equal(auditlog_config_set_checkpoint_interval(cfg, 50, 0), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	for (int i = 0; i < 50; i++)
		put_events(log, 10, true);
	assert_int_equal(auditlog_close(log), 0);
	walk_one(f, &w);
	/* 500 events and their seals: a checkpoint at least every 50 records */
	assert_true(w.ckpts >= w.records / 51);
	assert_true(w.ckpts <= w.records / 40 + 2);
	v2w_done(&w);

	/* by time: 1000 ms; the boot clock moves 600 ms a batch */
	assert_int_equal(auditlog_config_set_checkpoint_interval(cfg, 0, 1000), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	unsigned before = w.ckpts + 1; /* the close of the first life */
	for (int i = 0; i < 10; i++) {
		atomic_fetch_add(&f->clk.boot, 600000000u);
		put_events(log, 1, true);
	}
	assert_int_equal(auditlog_close(log), 0);
	auditlog_config_free(cfg);
	walk_one(f, &w);
	assert_true(w.ckpts - before >= 4 && w.ckpts - before <= 7);
	v2w_done(&w);
	fx_free(f);
}

/* Two logs sharing one sealing state: each advances it under the lock, it
 * never goes back, and both logs' seals verify. */
static void t_shared_state(void **state)
{
	(void)state;
	struct fx *f = fx_new(5);
	char *p2 = tu_path(f->dir, "other.log");
	struct auditlog_config *cfg2 = fx_config(f);
	struct auditlog *a = fx_open(f), *b = NULL;
	struct v2w w;
	size_t n;

	assert_int_equal(auditlog_config_set_path(cfg2, p2), 0);
	assert_int_equal(auditlog_open(cfg2, &b), 0);
	for (uint32_t e = 1; e <= 4; e++) {
		boot_set(f, e, 1000u);
		put_events(e % 2 ? a : b, 3, true);
		put_events(e % 2 ? b : a, 3, true);
	}
	assert_int_equal(auditlog_close(a), 0);
	assert_int_equal(auditlog_close(b), 0);
	walk_one(f, &w);
	check_epoch_steps(&w);
	v2w_done(&w);
	v2w_init(&w, &f->k);
	if (v2w_file(&w, p2) != 0)
		fail_msg("%s", w.err);
	assert_int_equal(w.ep[w.nep - 1], 9);
	v2w_done(&w);
	uint8_t *s = tu_read_file(f->k.state_path, &n);
	struct al_sstate ss;
	assert_int_equal(al_sstate_parse(s, n, &ss), 0);
	assert_int_equal(ss.st.epoch, 9);
	al_seal_state_wipe(&ss.st);
	free(s);
	auditlog_config_free(cfg2);
	free(p2);
	fx_free(f);
}

/* The same for a new chain's first file (header, then a cut): no earlier
 * seal, the tree starts at the header. */
static void t_crash_first_batch(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog *log = fx_open(f);
	struct v2w w;

	assert_int_equal(auditlog_close(log), 0);
	assert_int_equal(truncate(f->path, 1024 + 57), 0); /* the header is 1024 bytes */
	log = fx_open(f);
	put_events(log, 4, true);
	assert_int_equal(auditlog_close(log), 0);
	walk_one(f, &w);
	assert_int_equal(w.recoveries, 1);
	assert_int_equal(w.last_damage_off, 1024);
	assert_int_equal(w.opens, 1);
	assert_int_equal(w.first_seq, 0);
	v2w_done(&w);
	fx_free(f);
}

/* A failed fdatasync seals the file; the chain, its tree and its seals go on
 * in the next file, and every seal there verifies. */
static void t_failover(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog *log;
	struct v2w w;
	struct auditlog_stats st;

	f->fail_fsync = 4; /* open's batch is the 1st */
	log = fx_open(f);
	for (int i = 0; i < 6; i++) {
		put_events(log, 20, false);
		(void)auditlog_flush(log); /* the failed batch's flush fails */
	}
	put_events(log, 3, true);
	assert_int_equal(auditlog_get_stats(log, &st, sizeof(st)), 0);
	assert_int_equal(st.failovers, 1);
	assert_int_equal(auditlog_close(log), 0);
	walk_chain(f, &w);
	assert_int_equal(w.events, 123); /* the async records were re-written */
	assert_int_equal(w.opens, 1);
	assert_int_equal(w.kinds[3], 1);
	assert_int_equal(w.first_seq, 0);
	v2w_done(&w);
	fx_free(f);
}

/* The coalescing wait never runs past the epoch's end (its records are
 * sealed in it): with a 1 s window and 5 ms left in the epoch, an async
 * record is written within a fraction of the window. */
static void t_coalesce_epoch_end(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog_config *cfg = fx_config(f);
	struct auditlog *log = NULL;
	struct timespec a, b;

	assert_int_equal(auditlog_config_set_async_coalesce_us(cfg, 1000000), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	uint64_t before = tu_file_size(f->path);
	boot_set(f, 0, DELTA - 5000000u);
	clock_gettime(CLOCK_MONOTONIC, &a);
	put_events(log, 1, false);
	while (tu_file_size(f->path) == before)
		usleep(500);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
	assert_true(ms < 500);
	assert_int_equal(auditlog_close(log), 0);
	fx_free(f);
}

/* Bad configurations: v2 without sealing, key files of two hosts. */
static void t_config_refused(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog_config *cfg = tu_config(f->path);
	struct auditlog *log = NULL;
	struct tu_v2keys other;
	char *d2 = tu_mkdtemp();

	assert_int_equal(auditlog_config_set_format_version(cfg, 2), 0);
	assert_int_equal(auditlog_open(cfg, &log), -EINVAL); /* no sealing */
	tu_v2_keys(d2, "host-2.example", f->k.t0, DELTA, 0, boot_a, BOOT0, &other);
	assert_int_equal(auditlog_config_set_sealing(cfg, f->k.state_path, other.sign_path), 0);
	assert_int_equal(auditlog_open(cfg, &log), -EINVAL); /* two hosts */
	assert_int_equal(access(f->path, F_OK), -1);
	auditlog_config_free(cfg);
	tu_v2_keys_free(&other);
	tu_rmtree(d2);
	free(d2);
	fx_free(f);
}

/* Open finds a tree record within its bounded tail, reading back at most
 * one more batch; a tail written with far larger batches and no tree record
 * in reach is refused rather than scanned (open stays O(1)). */
static void t_tree_out_of_reach(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog_config *cfg = fx_config(f);
	struct auditlog *log = NULL;
	struct v2w w;
	size_t len;

	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, 1u << 20), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	for (int i = 0; i < 40; i++) {
		put_events(log, 100, false);
		assert_int_equal(auditlog_flush(log), 0); /* ~33 KB batches */
	}
	assert_int_equal(auditlog_close(log), 0);
	walk_one(f, &w);
	/* the last seal at least 100 KB past the last tree record before it */
	uint8_t *b = tu_read_file(f->path, &len);
	uint64_t cut = 0, last_tree = 0;
	for (size_t pos = 0; pos < len;) {
		uint8_t *nl = memchr(b + pos, '\n', len - pos);
		size_t n = (size_t)(nl - (b + pos)) + 1;
		if (memmem(b + pos, n < 120 ? n : 120, "\"type\":\"tree\"", 13))
			last_tree = pos + n;
		if (memmem(b + pos, n < 120 ? n : 120, "\"type\":\"seal\"", 13) &&
		    pos + n > last_tree + (100u << 10) && !cut)
			cut = pos + n;
		pos += n;
	}
	free(b);
	v2w_done(&w);
	assert_true(cut > 0);
	assert_int_equal(truncate(f->path, (off_t)cut), 0);
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, 16u << 10), 0);
	assert_int_equal(auditlog_open(cfg, &log), -EBADMSG);
	/* with the batch size it was written with, the window reaches it */
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, 1u << 20), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	put_events(log, 3, true);
	assert_int_equal(auditlog_close(log), 0);
	walk_one(f, &w);
	assert_int_equal(w.opens, 2);
	v2w_done(&w);
	auditlog_config_free(cfg);
	fx_free(f);
}

static void t_upgrade(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog_config *cfg = tu_config(f->path);
	struct auditlog *log = NULL;
	struct v2w w;

	assert_int_equal(auditlog_open(cfg, &log), 0); /* v1 */
	put_events(log, 20, true);
	assert_int_equal(auditlog_close(log), 0);
	log = fx_open(f);
	put_events(log, 20, true);
	assert_int_equal(auditlog_close(log), 0);
	walk_one(f, &w);
	assert_int_equal(w.events, 40);
	assert_int_equal(w.first_seq, 21); /* the open seal: the first v2 record */
	assert_true(w.trees >= 1);
	assert_true(w.ckpts >= 1);
	assert_false(w.kinds[2] != 1 || w.kinds[3] != 1);
	v2w_done(&w);
	/* versions never decrease: a v1 writer is refused */
	assert_int_equal(auditlog_open(cfg, &log), -EPROTO);
	auditlog_config_free(cfg);
	fx_free(f);
}

static void t_state_older_refused(void **state)
{
	(void)state;
	struct fx *f = fx_new(20);
	struct auditlog *log = fx_open(f);
	put_events(log, 10, true);
	boot_set(f, 3, 1000u);
	put_events(log, 10, true);
	assert_int_equal(auditlog_close(log), 0);
	/* the state on disk advanced to 23; an older copy put back is refused */
	tu_v2_state_write(&f->k, 22, boot_a, BOOT0 + 2 * DELTA);
	struct auditlog_config *cfg = fx_config(f);
	assert_int_equal(auditlog_open(cfg, &log), -ESTALE);
	/* nothing was written */
	tu_v2_state_write(&f->k, 23, boot_a, BOOT0 + 3 * DELTA);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	assert_int_equal(auditlog_close(log), 0);
	auditlog_config_free(cfg);
	fx_free(f);
}

static void t_state_file_refused(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog_config *cfg = fx_config(f);
	struct auditlog *log = NULL;
	char *other = tu_path(f->dir, "state-real");

	assert_int_equal(chmod(f->k.state_path, 0640), 0);
	assert_int_equal(auditlog_open(cfg, &log), -EPERM);
	assert_int_equal(chmod(f->k.state_path, 0604), 0);
	assert_int_equal(auditlog_open(cfg, &log), -EPERM);
	assert_int_equal(chmod(f->k.state_path, 0600), 0);
	assert_int_equal(chmod(f->k.sign_path, 0644), 0);
	assert_int_equal(auditlog_open(cfg, &log), -EPERM);
	assert_int_equal(chmod(f->k.sign_path, 0600), 0);
	/* a symbolic link */
	assert_int_equal(rename(f->k.state_path, other), 0);
	assert_int_equal(symlink(other, f->k.state_path), 0);
	assert_int_equal(auditlog_open(cfg, &log), -ELOOP);
	assert_int_equal(unlink(f->k.state_path), 0);
	/* not a regular file */
	assert_int_equal(mkdir(f->k.state_path, 0700), 0);
	assert_int_equal(auditlog_open(cfg, &log), -EINVAL);
	assert_int_equal(rmdir(f->k.state_path), 0);
	assert_int_equal(rename(other, f->k.state_path), 0);
	/* no log file came of any of it */
	assert_int_equal(access(f->path, F_OK), -1);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	assert_int_equal(auditlog_close(log), 0);
	auditlog_config_free(cfg);
	free(other);
	fx_free(f);
}

static void t_state_advances(void **state)
{
	(void)state;
	struct fx *f = fx_new(100);
	struct auditlog *log = fx_open(f);
	uint8_t node[32];
	char hex[65] = {0};
	size_t n;

	put_events(log, 5, true);
	boot_set(f, 2, 1000u);
	put_events(log, 5, true);
	assert_int_equal(auditlog_close(log), 0);
	uint8_t *b = tu_read_file(f->k.state_path, &n);
	struct al_sstate ss;
	assert_non_null(b);
	assert_int_equal(al_sstate_parse(b, n, &ss), 0);
	assert_int_equal(ss.st.epoch, 102);
	assert_int_equal(ss.boot_start, BOOT0 + 2 * DELTA);
	for (uint32_t e = 100; e < 102; e++) {
		assert_int_equal(al_seal_node(f->k.S, 32, e, node), 0);
		al_hex(node, 32, hex);
		assert_null(memmem(b, n, hex, 64)); /* the old epochs' keys are gone */
	}
	assert_int_equal(al_seal_node(f->k.S, 32, 102, node), 0);
	al_hex(node, 32, hex);
	assert_non_null(memmem(b, n, hex, 64));
	struct stat st;
	assert_int_equal(stat(f->k.state_path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	free(b);
	al_seal_state_wipe(&ss.st);
	fx_free(f);
}

/* Cut a copy of a log at `cut` bytes, reopen it, write, close, walk. */
static void crash_at(struct fx *f, const uint8_t *full, uint64_t cut, struct v2w *w)
{
	int fd = open(f->path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, full, cut), (ssize_t)cut);
	close(fd);
	struct auditlog *log = fx_open(f);
	put_events(log, 3, true);
	assert_int_equal(auditlog_close(log), 0);
	walk_one(f, w);
}

static void t_crash_tail(void **state)
{
	(void)state;
	struct fx *f = fx_new(0);
	struct auditlog_config *cfg = fx_config(f);
	struct auditlog *log = NULL;
	struct v2w w;
	size_t len;

	/* each 30 records one batch, whatever the machine's load: held until
	 * their flush (the cuts below need more than 5 lines between two seals) */
	assert_int_equal(auditlog_config_set_async_coalesce_us(cfg, 1000000), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);

	for (int i = 0; i < 5; i++) {
		put_events(log, 30, false);
		assert_int_equal(auditlog_flush(log), 0);
	}
	assert_int_equal(auditlog_close(log), 0);
	uint8_t *full = tu_read_file(f->path, &len);
	walk_one(f, &w);
	assert_true(w.nends >= 5);
	/* the seal before the close batch, and the one before it */
	uint64_t s1 = w.seal_end[w.nends - 3], s2 = w.seal_end[w.nends - 2];
	v2w_done(&w);
	assert_true(s1 < s2);

	/* right after a seal: clean, no recovery; the open names that seal */
	crash_at(f, full, s1, &w);
	assert_int_equal(w.recoveries, 0);
	assert_int_equal(w.opens, 2);
	v2w_done(&w);
	/* a torn line right after a seal */
	crash_at(f, full, s1 + 40, &w);
	assert_int_equal(w.recoveries, 1);
	assert_int_equal(w.last_damage_off, s1);
	v2w_done(&w);
	/* whole lines after a seal, then a cut inside the batch: the complete
	 * lines were never sealed and are damage too */
	uint64_t mid = s1;
	for (int k = 0; k < 5; k++)
		mid = (uint64_t)((const uint8_t *)memchr(full + mid, '\n', len - mid) - full) + 1;
	assert_true(mid < s2);
	crash_at(f, full, mid + 10, &w);
	assert_int_equal(w.recoveries, 1);
	assert_int_equal(w.last_damage_off, s1);
	v2w_done(&w);
	/* the same at a line boundary: no torn line at all */
	crash_at(f, full, mid, &w);
	assert_int_equal(w.recoveries, 1);
	assert_int_equal(w.last_damage_off, s1);
	v2w_done(&w);
	/* a seal lacking only its newline is kept whole */
	crash_at(f, full, s2 - 1, &w);
	assert_int_equal(w.recoveries, 0);
	v2w_done(&w);
	free(full);
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_basic),
		cmocka_unit_test(t_epochs_split),
		cmocka_unit_test(t_split_in_batch),
		cmocka_unit_test(t_idle),
		cmocka_unit_test(t_reopen),
		cmocka_unit_test(t_rotation),
		cmocka_unit_test(t_crash_rotated_first_batch),
		cmocka_unit_test(t_crash_first_batch),
		cmocka_unit_test(t_failover),
		cmocka_unit_test(t_coalesce_epoch_end),
		cmocka_unit_test(t_config_refused),
		cmocka_unit_test(t_tree_out_of_reach),
		cmocka_unit_test(t_upgrade),
		cmocka_unit_test(t_clock_step),
		cmocka_unit_test(t_checkpoint_interval),
		cmocka_unit_test(t_shared_state),
		cmocka_unit_test(t_state_older_refused),
		cmocka_unit_test(t_state_file_refused),
		cmocka_unit_test(t_state_advances),
		cmocka_unit_test(t_crash_tail),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
