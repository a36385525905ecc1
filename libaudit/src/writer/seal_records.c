/* SPDX-License-Identifier: MIT */
/*
 * The v2 records the writer adds to a chain (docs/format.md 19-21): the seal
 * that ends every batch (batch, idle, open, close), the tree and checkpoint
 * records, the clock record, and the Merkle tree they describe. The keys
 * stay behind the seal provider (sealer.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <stddef.h>

#include <openssl/crypto.h>

#include "log.h"
#include "sealer.h"
#include "seal.h"

const char *const al_seal_kind_word[4] = {"batch", "idle", "open", "close"};

void al_v2pos_copy(struct v2pos *dst, const struct v2pos *src)
{
	memcpy(dst, src, offsetof(struct v2pos, pend));
	memcpy(dst->pend, src->pend, (size_t)src->npend * AL_HASH_LEN);
	memcpy(&dst->tree, &src->tree, offsetof(struct al_merkle_range, h));
	memcpy(dst->tree.h, src->tree.h, (size_t)src->tree.n * AL_HASH_LEN);
}

static void pend_clear(struct v2pos *v)
{
	v->npend = v->phead = 0;
	v->step.open = false;
}

const struct al_merkle_range *al_v2_tree(struct v2pos *v, bool fast)
{
	if (v->step.open) /* the leaf half in: its nodes are one chain */
		al_merkle_step_finish(&v->tree, &v->step);
	if (v->npend > v->phead)
		/* -EOVERFLOW only past 2^53 leaves */
		(void)al_merkle_range_append_n(&v->tree, (const uint8_t (*)[AL_HASH_LEN])v->pend[v->phead],
					       v->npend - v->phead, fast);
	pend_clear(v);
	return &v->tree;
}

bool al_v2_tree_owed(struct v2pos *v, const uint8_t **left, const uint8_t **right)
{
	if (v->tree_state != V2T_ON)
		return false;
	while (!v->step.open) {
		if (v->phead == v->npend) {
			pend_clear(v);
			return false;
		}
		/* 0: in at once; -EOVERFLOW only past 2^53 leaves */
		(void)al_merkle_step_begin(&v->tree, &v->step, v->pend[v->phead++]);
	}
	al_merkle_step_node(&v->tree, &v->step, left, right);
	return true;
}

void al_v2_tree_paid(struct v2pos *v, const uint8_t node[AL_HASH_LEN])
{
	(void)al_merkle_step_done(&v->tree, &v->step, node);
}

void al_v2_leaf(struct v2pos *v, uint8_t type, uint64_t seq, const uint8_t hash[AL_HASH_LEN], bool fast)
{
	(void)type;
	if (v->tree_state == V2T_NONE) {
		/* the chain's first v2 record: leaf 0 (docs/format.md 18) */
		al_merkle_range_init(&v->tree);
		pend_clear(v);
		v->first_seq = seq;
		v->tree_state = V2T_ON;
	}
	if (v->tree_state == V2T_ON) {
		if (v->npend == V2_PEND && v->phead > 0) { /* the owed nodes' leaves first */
			memmove(v->pend[0], v->pend[v->phead], (size_t)(v->npend - v->phead) * AL_HASH_LEN);
			v->npend -= v->phead;
			v->phead = 0;
		}
		if (v->npend == V2_PEND)
			(void)al_v2_tree(v, fast);
		memcpy(v->pend[v->npend++], hash, AL_HASH_LEN);
	}
}

static int kind_index(const uint8_t *p, size_t n)
{
	for (int i = 0; i < 4; i++)
		if (strlen(al_seal_kind_word[i]) == n && memcmp(al_seal_kind_word[i], p, n) == 0)
			return i;
	return -1;
}

void al_v2_scan_note(struct v2pos *v, const struct al_parsed *p, int prev_version)
{
	const struct al_record *r = &p->rec;

	if (prev_version < 0) { /* the window's anchor: what came before is unknown */
		v->has_seal = false;
		pend_clear(v);
		if (r->version < AL_V2)
			v->tree_state = V2T_NONE;
		else if (r->type == AL_T_HEADER && r->f[AL_F_SEQ].u == 0 &&
			 !(r->present & AL_BIT(AL_F_PREV_NAME)))
			v->tree_state = V2T_NONE; /* a v2 chain's first record: leaf 0 */
		else
			v->tree_state = V2T_UNKNOWN;
	}
	if (r->version < AL_V2)
		return;
	if (r->type == AL_T_TREE || r->type == AL_T_CHECKPOINT) {
		uint8_t h[AL_MERKLE_RANGE_MAX][AL_HASH_LEN];
		const struct al_val *rg = &r->f[AL_F_RANGE];
		size_t n = rg->n / 64;
		/* the parser checked 64 hex digits per set bit of size */
		if (n <= AL_MERKLE_RANGE_MAX && al_unhex(rg->p, rg->n, h[0]) == 0 &&
		    al_merkle_range_set(&v->tree, r->f[AL_F_SIZE].u, h[0], n) == 0) {
			pend_clear(v); /* the record's range holds every leaf before it */
			v->first_seq = r->f[AL_F_FIRST_SEQ].u;
			v->tree_state = V2T_ON;
		}
	}
	al_v2_leaf(v, r->type, r->f[AL_F_SEQ].u, p->hash, false); /* a scan: no hurry */
	if (r->type == AL_T_SEAL) {
		int k = kind_index(r->f[AL_F_KIND].p, r->f[AL_F_KIND].n);
		v->has_seal = true;
		v->seal_kind = (uint8_t)(k < 0 ? K_BATCH : k);
		v->seal_epoch = (uint32_t)r->f[AL_F_EPOCH].u;
		v->seal_seq = r->f[AL_F_SEQ].u;
		(void)al_unhex(r->f[AL_F_SEAL_KEY].p, 2 * AL_SEAL_KID_LEN, v->seal_key);
	}
}

int al_v2_start(struct auditlog *l)
{
	int r = l->cfg.sealer_socket
			? al_sealer_socket_open(l->cfg.sealer_socket, al_cfg_clock(&l->cfg), &l->sealer)
			: al_sealer_inproc_open(l->cfg.seal_state_path, l->cfg.signing_key_path,
						al_cfg_clock(&l->cfg), &l->sealer);
	if (r < 0)
		return r;
	r = l->sealer->ops->now(l->sealer, &l->ep);
	if (r < 0)
		return r;
	l->fmt_epoch = l->ep.epoch;
	l->ckpt_boot = l->ep.boot_now;
	/* the clock, tree (or checkpoint) and seal lines a batch may end with:
	 * each well below these bounds (a range of 53 hashes is 3392 bytes, a
	 * note at most AL_NOTE_MAX, escaped at most twice that) */
	l->v2_reserve = 256 + (512 + AL_MERKLE_RANGE_MAX * 64 + 2 * AL_NOTE_MAX) + 512;
	return 0;
}

int al_v2_epoch(struct auditlog *l, bool *ret_moved)
{
	int r = l->sealer->ops->now(l->sealer, &l->ep);

	l->since_check = 0;
	if (r < 0)
		return r;
	*ret_moved = l->ep.epoch > l->fmt_epoch;
	return 0;
}

static uint64_t mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One request to the provider, counted in the stats (its round trip, for
 * the socket provider). */
static void count_request(struct auditlog *l, uint64_t t0, long r)
{
	atomic_fetch_add(&l->st.sealer_requests, 1);
	atomic_fetch_add(&l->st.sealer_wait_ns, mono_now() - t0);
	if (r < 0)
		atomic_fetch_add(&l->st.sealer_errors, 1);
}

static uint64_t next_ts(struct auditlog *l)
{
	return al_clamp_ts(l, al_clock_realtime(al_cfg_clock(&l->cfg)));
}

long al_v2_seal_line(struct auditlog *l, int kind, uint8_t *out)
{
	struct al_v2_seal s = {.kind = al_seal_kind_word[kind], .epoch = l->fmt_epoch};
	struct al_record rec = {.type = AL_T_SEAL};
	char ts[AL_TS_LEN], kid[2 * AL_SEAL_KID_LEN], pkid[2 * AL_SEAL_KID_LEN], mac[64];
	uint64_t ts_ns = next_ts(l);
	long n;
	int r;

	al_hex(l->chain_id, 16, s.chain_id);
	if (kind == K_OPEN && l->v2.has_seal) {
		s.has_prev = true;
		s.prev_seal = l->v2.seal_seq;
		s.prev_kind = al_seal_kind_word[l->v2.seal_kind];
		/* the chain's last seal is under another key: a re-key, marked
		 * here and only here (docs/format.md 17.4) */
		if (memcmp(l->v2.seal_key, l->sealer->key_id, AL_SEAL_KID_LEN) != 0) {
			s.has_prev_key = true;
			memcpy(s.prev_key, l->v2.seal_key, AL_SEAL_KID_LEN);
		}
	}
	al_format_ts_cached(&l->ts_cache, ts_ns, ts);
	uint64_t t0 = mono_now();
	r = l->sealer->ops->seal(l->sealer, &s, l->tail.hash, al_next_seq(l), ts);
	count_request(l, t0, r);
	if (r < 0)
		return r;
	al_hex(s.key_id, AL_SEAL_KID_LEN, kid);
	al_hex(s.mac, AL_HASH_LEN, mac);
	rec.present = AL_BIT(AL_F_KIND) | AL_BIT(AL_F_EPOCH) | AL_BIT(AL_F_SEAL_KEY) |
		      AL_BIT(AL_F_CHAIN_ID) | AL_BIT(AL_F_MAC);
	rec.f[AL_F_KIND] = (struct al_val){(const uint8_t *)s.kind, strlen(s.kind), 0};
	rec.f[AL_F_EPOCH].u = s.epoch;
	rec.f[AL_F_SEAL_KEY] = (struct al_val){(const uint8_t *)kid, sizeof(kid), 0};
	rec.f[AL_F_CHAIN_ID] = (struct al_val){(const uint8_t *)s.chain_id, 32, 0};
	rec.f[AL_F_MAC] = (struct al_val){(const uint8_t *)mac, sizeof(mac), 0};
	if (s.has_prev) {
		rec.present |= AL_BIT(AL_F_PREV_SEAL) | AL_BIT(AL_F_PREV_KIND);
		rec.f[AL_F_PREV_SEAL].u = s.prev_seal;
		rec.f[AL_F_PREV_KIND] = (struct al_val){(const uint8_t *)s.prev_kind,
							strlen(s.prev_kind), 0};
		if (s.has_prev_key) {
			al_hex(s.prev_key, AL_SEAL_KID_LEN, pkid);
			rec.present |= AL_BIT(AL_F_PREV_KEY);
			rec.f[AL_F_PREV_KEY] = (struct al_val){(const uint8_t *)pkid, sizeof(pkid), 0};
		}
	}
	n = al_chain_append_decoded(l, &rec, ts_ns, out);
	OPENSSL_cleanse(mac, sizeof(mac));
	if (n < 0)
		return n;
	l->v2.has_seal = true;
	l->v2.seal_kind = (uint8_t)kind;
	l->v2.seal_epoch = s.epoch;
	l->v2.seal_seq = l->tail.seq;
	memcpy(l->v2.seal_key, s.key_id, AL_SEAL_KID_LEN);
	if (s.epoch > l->fmt_epoch) /* a provider may seal with a later epoch */
		l->fmt_epoch = s.epoch;
	return n;
}

/* The tree's compact range in hex (docs/format.md 18.3) into l->range_hex. */
static size_t range_hex(struct auditlog *l, const struct al_merkle_range *t)
{
	for (unsigned i = 0; i < t->n; i++)
		al_hex(t->h[i], AL_HASH_LEN, l->range_hex + 64 * i);
	return (size_t)t->n * 64;
}

static long tree_line(struct auditlog *l, bool signed_, uint8_t *out)
{
	struct al_record rec = {.type = signed_ ? AL_T_CHECKPOINT : AL_T_TREE};
	struct v2pos *v = &l->v2;
	const struct al_merkle_range *t = al_v2_tree(v, l->sha_ni);
	size_t rn = range_hex(l, t);

	rec.present = AL_BIT(AL_F_SIZE) | AL_BIT(AL_F_FIRST_SEQ) | AL_BIT(AL_F_RANGE);
	rec.f[AL_F_SIZE].u = t->size;
	rec.f[AL_F_FIRST_SEQ].u = v->first_seq;
	rec.f[AL_F_RANGE] = (struct al_val){(const uint8_t *)l->range_hex, rn, 0};
	if (signed_) {
		uint8_t origin[AL_ORIGIN_MAX], text[AL_NOTE_MAX], root[AL_HASH_LEN], cid[32];
		long on, tn, nn;

		/* the tree covers first_seq .. the tail (docs/format.md 20.1) */
		if (t->size != l->tail.seq + 1 - v->first_seq)
			return -EINVAL;
		al_hex(l->chain_id, 16, (char *)cid);
		on = al_checkpoint_origin(l->sealer->host, l->sealer->host_len, cid, origin);
		if (on < 0)
			return on;
		if (al_merkle_range_root(t, root) < 0)
			return -EINVAL;
		tn = al_checkpoint_text(origin, (size_t)on, t->size, root, l->tail.seq,
					l->tail.hash, v->first_seq, text, sizeof(text));
		if (tn < 0)
			return tn;
		uint64_t t0 = mono_now();
		nn = l->sealer->ops->sign(l->sealer, origin, (size_t)on, text, (size_t)tn, l->note,
					  sizeof(l->note));
		count_request(l, t0, nn);
		if (nn < 0)
			return nn;
		rec.present |= AL_BIT(AL_F_NOTE);
		rec.f[AL_F_NOTE] = (struct al_val){l->note, (size_t)nn, 0};
	}
	return al_chain_append_decoded(l, &rec, next_ts(l), out);
}

static long clock_line(struct auditlog *l, uint8_t *out)
{
	struct al_record rec = {.type = AL_T_CLOCK};
	char exp[AL_TS_LEN], wall[AL_TS_LEN];

	al_format_ts(l->ep.expected, exp);
	al_format_ts(l->ep.wall, wall);
	rec.present = AL_BIT(AL_F_EPOCH) | AL_BIT(AL_F_EXPECTED) | AL_BIT(AL_F_WALL);
	rec.f[AL_F_EPOCH].u = l->ep.epoch;
	rec.f[AL_F_EXPECTED] = (struct al_val){(const uint8_t *)exp, AL_TS_LEN, 0};
	rec.f[AL_F_WALL] = (struct al_val){(const uint8_t *)wall, AL_TS_LEN, 0};
	return al_chain_append_decoded(l, &rec, next_ts(l), out);
}

/* A clock record is due when the wall clock moved more than delta away
 * from what the last clock record (or the state, at first) said. */
static bool clock_due(struct auditlog *l)
{
	int64_t off = (int64_t)(l->ep.wall - l->ep.expected);
	int64_t d = off - l->clock_noted;

	if (!l->ep.clock && !l->clock_noted)
		return false;
	return (uint64_t)(d < 0 ? -d : d) > l->sealer->delta;
}

int al_v2_batch_tail(struct auditlog *l, uint8_t *buf, size_t *len, uint64_t file_at, int kind,
		     bool tree, bool ckpt, bool content, unsigned *ret_nrec)
{
	unsigned k = 0;
	long n;

	/* a held batch (AUDITLOG_SEALER_QUEUE) resumes where its tail failed */
	unsigned stage = l->tail_stage;

	k = l->held_nrec;
	l->tail_stage = 0;
	l->held_nrec = 0;
	if (stage == 2)
		goto seal;
	if (stage == 0 && clock_due(l)) {
		n = clock_line(l, buf + *len);
		if (n < 0)
			return (int)n;
		*len += (size_t)n;
		k++;
		l->clock_noted = (int64_t)(l->ep.wall - l->ep.expected);
	}
	if (l->v2.tree_state == V2T_ON && al_v2_tree(&l->v2, l->sha_ni)->size > 0) {
		l->tail_stage = 1; /* a failed signature leaves the clock line */
		l->held_nrec = k;
		if (!ckpt && content)
			ckpt = (l->cfg.ckpt_records && l->tail.seq - l->ckpt_seq >= l->cfg.ckpt_records) ||
			       (l->cfg.ckpt_ms &&
				l->ep.boot_now - l->ckpt_boot >= l->cfg.ckpt_ms * 1000000u);
		uint64_t at = file_at + *len;
		if (!ckpt && !tree)
			tree = l->tree_due || at < l->tree_rec_end ||
			       at - l->tree_rec_end > l->cfg.max_batch_bytes / 2;
		if (ckpt || tree) {
			n = tree_line(l, ckpt, buf + *len);
			if (n < 0) /* tail_stage 1: the tree step is retried */
				return (int)n;
			*len += (size_t)n;
			k++;
			l->tree_rec_end = file_at + *len;
			l->tree_due = false;
			if (ckpt) {
				l->ckpt_seq = l->tail.seq;
				l->ckpt_boot = l->ep.boot_now;
			}
		}
	}
seal:
	n = al_v2_seal_line(l, kind, buf + *len);
	if (n < 0) {
		/* what is in buf stays: a retry (AUDITLOG_SEALER_QUEUE) adds the seal */
		l->tail_stage = 2;
		l->held_nrec = k;
		return (int)n;
	}
	l->tail_stage = 0;
	l->held_nrec = 0;
	*len += (size_t)n;
	*ret_nrec = k + 1;
	return 0;
}

/* ---- AUDITLOG_SEALER_QUEUE: a lost sealer, and coming back ------------------- */

#define RECONNECT_FIRST_NS (50u * 1000000u)
#define RECONNECT_MAX_NS (1000u * 1000000u)

bool al_v2_sealer_lost(const struct auditlog *l, int r)
{
	return l->cfg.sealer_socket && l->cfg.sealer_policy == AUDITLOG_SEALER_QUEUE &&
	       (r == -ENOTCONN || r == -ETIMEDOUT || r == -EPROTO);
}

void al_v2_sealer_away(struct auditlog *l)
{
	if (atomic_load(&l->sealer_away))
		return;
	atomic_store(&l->sealer_away, 1);
	l->reconnect_delay = RECONNECT_FIRST_NS;
	l->reconnect_at = mono_now() + l->reconnect_delay;
}

int al_v2_reconnect(struct auditlog *l, bool force)
{
	uint64_t now = mono_now();
	int r;

	if (!atomic_load(&l->sealer_away))
		return 1;
	if (!force && now < l->reconnect_at)
		return 0;
	r = l->sealer->ops->reconnect(l->sealer);
	/* not behind the chain's last seal (a restarted sealer on an older copy
	 * of the state: 17.2 rule 5) */
	if (r == 0 && l->v2.has_seal)
		r = l->sealer->ops->check_tail(l->sealer, l->v2.seal_key, l->v2.seal_epoch);
	if (r == -ESTALE || r == -EACCES || r == -ERANGE)
		return r; /* it answered, and says no: fail closed */
	if (r < 0) {
		atomic_fetch_add(&l->st.sealer_errors, 1);
		l->reconnect_delay *= 2;
		if (l->reconnect_delay > RECONNECT_MAX_NS)
			l->reconnect_delay = RECONNECT_MAX_NS;
		l->reconnect_at = now + l->reconnect_delay;
		return 0;
	}
	atomic_fetch_add(&l->st.sealer_reconnects, 1);
	atomic_store(&l->sealer_away, 0);
	return 1;
}

uint64_t al_v2_reconnect_timeout(struct auditlog *l)
{
	uint64_t now;

	if (!atomic_load(&l->sealer_away))
		return 0;
	now = mono_now();
	return l->reconnect_at > now ? l->reconnect_at - now : 1;
}

bool al_v2_idle_due(struct auditlog *l)
{
	if (!l->sealer || l->close_done || l->close_inflight)
		return false;
	if (l->sealer->ops->now(l->sealer, &l->ep) < 0)
		return false;
	return (!l->v2.has_seal || l->v2.seal_epoch < l->ep.epoch) &&
	       l->ep.boot_now >= l->ep.boot_start + l->sealer->delta / 2;
}

uint64_t al_v2_timeout(struct auditlog *l)
{
	uint64_t mid, t;

	if (!l->sealer || l->close_done)
		return 0;
	if (l->sealer->ops->now(l->sealer, &l->ep) < 0)
		return 0;
	mid = l->ep.boot_start + l->sealer->delta / 2;
	if (l->v2.has_seal && l->v2.seal_epoch >= l->ep.epoch)
		mid += l->sealer->delta; /* this epoch has its seal: the next one's midpoint */
	t = mid > l->ep.boot_now ? mid - l->ep.boot_now : 1000;
	if (l->cfg.has_clock && t > 2000000u)
		t = 2000000u; /* a test's clock moves by itself: look often */
	return t;
}
