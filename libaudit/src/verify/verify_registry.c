/* SPDX-License-Identifier: MIT */
/*
 * The sealer's registry of chains (docs/format.md 26): verify its own chain
 * with the keys given, read the segments its verified records name, and
 * compare them with the chains a run found among the inputs: a registered
 * chain that is absent is missing-chain, one cut before its registered close
 * is truncated (26.2).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "verify.h"

struct load {
	struct al_vregistry *g;
	const struct al_vopts *o; /* the caller's: findings go to its callback */
	uint8_t dec[AL_LINE_MAX];
};

static void load_finding(void *ctx, const struct al_finding *f)
{
	const struct load *l = ctx;

	if (l->o->on_finding)
		l->o->on_finding(l->o->ctx, f);
}

static bool field_is(const struct al_v2_field *f, const char *key)
{
	return f->key_len == strlen(key) && memcmp(f->key, key, f->key_len) == 0;
}

static bool hex_ok(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return true;
}

/* One verified registry line: a chain-open, chain-close or chain-lost event
 * (26.1) becomes or ends a segment; any other event is a registry record
 * that is not the format's (g->bad); seals, checkpoints, headers pass. */
static void load_record(void *ctx, const uint8_t *line, size_t len)
{
	struct load *l = ctx;
	struct al_vregistry *g = l->g;
	struct al_parsed p;
	struct al_vreg_seg s = {0};
	size_t off;
	unsigned have = 0;
	enum al_vreg_end end;

	if (len > AL_LINE_MAX || al_parse(line, len, l->dec, &p, &off) != AL_PERR_OK)
		return; /* it verified, so it parsed there: not reached */
	if (p.rec.type != AL_T_EVENT)
		return;
	const struct al_val *a = &p.rec.f[AL_F_ACTION];
#define ACTION(w) (a->n == sizeof(w) - 1 && memcmp(a->p, w, a->n) == 0)
	if (p.rec.version < 2)
		end = (enum al_vreg_end)-1;
	else if (ACTION("chain-open"))
		end = AL_VREG_OPEN;
	else if (ACTION("chain-close"))
		end = AL_VREG_CLOSE;
	else if (ACTION("chain-lost"))
		end = AL_VREG_LOST;
	else
		end = (enum al_vreg_end)-1;
#undef ACTION
	if ((int)end < 0) {
		g->bad = true;
		return;
	}
	for (size_t i = 0; i < p.rec.ncaller; i++) {
		const struct al_v2_field *f = &p.rec.caller[i];
		if (field_is(f, "chain.id") && !f->is_int && f->n == 32 && hex_ok(f->p, 32)) {
			memcpy(s.chain_id, f->p, 32);
			have |= 1;
		} else if (field_is(f, "chain.first") && f->is_int) {
			s.first = f->u;
			have |= 2;
		} else if (field_is(f, "chain.last") && f->is_int) {
			s.last = f->u;
			have |= 4;
		} else if (field_is(f, "chain.head") && !f->is_int && f->n == 64 && hex_ok(f->p, 64) &&
			   al_unhex(f->p, 64, s.head) == 0) {
			have |= 8;
		} else if (field_is(f, "peer.pid") && f->is_int) {
			s.pid = f->u;
		} else if (field_is(f, "peer.uid") && f->is_int) {
			s.uid = f->u;
		} else if (field_is(f, "peer.gid") && f->is_int) {
			s.gid = f->u;
		}
	}
	if ((have & 3) != 3 || (end != AL_VREG_OPEN && (have & 12) != 12) ||
	    (end != AL_VREG_OPEN && s.last < s.first)) {
		g->bad = true;
		return;
	}
	g->records++;
	s.end = end;
	s.at = p.rec.f[AL_F_SEQ].u;
	if (end != AL_VREG_OPEN) {
		/* ends the open segment of that chain and first seal, the latest */
		for (unsigned i = g->n; i-- > 0;) {
			struct al_vreg_seg *o = &g->seg[i];
			if (o->end == AL_VREG_OPEN && o->first == s.first && strcmp(o->chain_id, s.chain_id) == 0) {
				o->end = end;
				o->last = s.last;
				memcpy(o->head, s.head, AL_HASH_LEN);
				return;
			}
		}
		/* its chain-open is not among the verified records: keep the end */
	}
	if (g->n == g->cap) {
		unsigned nc = g->cap ? g->cap * 2 : 16;
		struct al_vreg_seg *ns = realloc(g->seg, nc * sizeof(*ns));
		if (!ns) {
			g->bad = true; /* reported as unusable below rather than lost */
			return;
		}
		g->seg = ns;
		g->cap = nc;
	}
	g->seg[g->n++] = s;
}

int al_registry_load(const char *path, const struct al_vopts *o, struct al_vregistry *g)
{
	/* Two walks: the first with every key reports the registry's findings;
	 * the second, with the verification key alone, passes on the records its
	 * seals cover. (With a public key the walk would hold back the records
	 * after the last checkpoint, and a live registry's tail is just that.) */
	struct al_vopts ro = {
		.vkeys = o->vkeys,
		.n_vkeys = o->n_vkeys,
		.pubkeys = o->pubkeys,
		.n_pubkeys = o->n_pubkeys,
		.one_chain = true, /* a second chain there is extra-chain */
		.min_version = 2,
		.threads = 1,
		.on_finding = load_finding,
	};
	struct al_vopts rr = {
		.vkeys = o->vkeys,
		.n_vkeys = o->n_vkeys,
		.one_chain = true,
		.min_version = 2,
		.threads = 1,
		.on_record = load_record,
	};
	struct al_vresult res2 = {0};
	struct load *l;
	char **paths = NULL, **dirs = NULL;
	unsigned n = 0, cap = 0, n_dirs = 0, cap_dirs = 0;
	int r;

	memset(g, 0, sizeof(*g));
	g->name = strdup(path);
	l = calloc(1, sizeof(*l));
	if (!g->name || !l) {
		free(l);
		return -ENOMEM;
	}
	l->g = g;
	l->o = o;
	ro.ctx = rr.ctx = l;
	r = al_verify_add_path(path, &paths, &n, &cap);
	if (r == 0) /* a directory: taken whole, a rotation while it is listed too */
		r = al_verify_note_dir(path, &dirs, &n_dirs, &cap_dirs);
	ro.dirs = rr.dirs = dirs;
	ro.n_dirs = rr.n_dirs = n_dirs;
	if (r == 0 && n == 0)
		r = -ENOENT;
	if (r == 0)
		r = al_verify_files(paths, n, &ro, &g->res);
	if (r == 0)
		r = al_verify_files(paths, n, &rr, &res2);
	al_vresult_free(&res2);
	for (unsigned i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	for (unsigned i = 0; i < n_dirs; i++)
		free(dirs[i]);
	free(dirs);
	free(l);
	return r;
}

static void report(const struct al_vopts *o, struct al_vresult *res, enum al_vclass cls, const char *file,
		   bool has_seq, uint64_t seq, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static void report(const struct al_vopts *o, struct al_vresult *res, enum al_vclass cls, const char *file,
		   bool has_seq, uint64_t seq, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap); /* ASCII only: a cut splits no character */
	va_end(ap);
	res->findings[cls]++;
	if (o->on_finding) {
		struct al_finding f = {.cls = cls, .file = file, .seq = seq, .has_seq = has_seq, .msg = msg};
		o->on_finding(o->ctx, &f);
	}
}

static const char *end_word(enum al_vreg_end e)
{
	return e == AL_VREG_CLOSE ? "closed" : e == AL_VREG_LOST ? "lost" : "open";
}

unsigned al_registry_chains(const struct al_vregistry *g)
{
	unsigned k = 0;

	for (unsigned i = 0; i < g->n; i++) {
		unsigned j = 0;
		while (j < i && strcmp(g->seg[j].chain_id, g->seg[i].chain_id) != 0)
			j++;
		k += j == i;
	}
	return k;
}

void al_registry_compare(const struct al_vregistry *g, const struct al_vopts *o, struct al_vresult *res)
{
	for (int c = 0; c < AL_V__MAX; c++)
		res->findings[c] += g->res.findings[c];
	if (g->bad)
		report(o, res, AL_V_UNPARSEABLE, g->name, false, 0,
		       "the registry holds a verified event that is not a chain-open, chain-close or chain-lost "
		       "record of docs/format.md 26.1 (or one without its fields): it is not the sealer's");
	for (unsigned i = 0; i < g->n; i++) {
		const struct al_vreg_seg *s = &g->seg[i];
		const struct al_vchain *ch = NULL;
		bool first = true;

		for (unsigned j = 0; j < i && first; j++)
			first = strcmp(g->seg[j].chain_id, s->chain_id) != 0;
		for (unsigned k = 0; k < res->chains && !ch; k++)
			if (res->chain[k].records && strcmp(res->chain[k].chain_id, s->chain_id) == 0)
				ch = &res->chain[k];
		if (!ch) {
			if (!first)
				continue; /* one finding a chain */
			uint64_t lo = s->first, hi = 0;
			bool open = false;
			for (unsigned j = i; j < g->n; j++) {
				const struct al_vreg_seg *t = &g->seg[j];
				if (strcmp(t->chain_id, s->chain_id) != 0)
					continue;
				lo = t->first < lo ? t->first : lo;
				if (t->end == AL_VREG_OPEN)
					open = true;
				else if (t->last > hi)
					hi = t->last;
			}
			if (open && hi < lo)
				report(o, res, AL_V_MISSING_CHAIN, g->name, true, lo,
				       "the sealer registered chain %s (sealed from seq %" PRIu64 ", still open; peer pid "
				       "%" PRIu64 " uid %" PRIu64 " gid %" PRIu64 "), which is not among the inputs",
				       s->chain_id, lo, s->pid, s->uid, s->gid);
			else
				report(o, res, AL_V_MISSING_CHAIN, g->name, true, lo,
				       "the sealer registered chain %s (sealed seq %" PRIu64 "..%" PRIu64 "%s; peer pid "
				       "%" PRIu64 " uid %" PRIu64 " gid %" PRIu64 "), which is not among the inputs",
				       s->chain_id, lo, hi, open ? ", a segment of it still open" : "", s->pid, s->uid,
				       s->gid);
			continue;
		}
		if (s->end == AL_VREG_OPEN) {
			if (ch->last_seq < s->first)
				report(o, res, AL_V_TRUNCATED, g->name, true, s->first,
				       "chain %s ends at seq %" PRIu64 ", before seq %" PRIu64 ", the first seal the "
				       "sealer registered for it (registry seq %" PRIu64 ", still open)",
				       s->chain_id, ch->last_seq, s->first, s->at);
			continue;
		}
		if (ch->last_seq < s->last) {
			/* a lost writer's last seal may never have reached its disk */
			report(o, res, s->end == AL_VREG_CLOSE ? AL_V_TRUNCATED : AL_V_GAP, g->name, true, s->last,
			       "chain %s ends at seq %" PRIu64 "; the sealer registered it %s at seq %" PRIu64
			       " (segment %" PRIu64 "..%" PRIu64 ", registry seq %" PRIu64 "): seq %" PRIu64 "..%" PRIu64
			       " %s",
			       s->chain_id, ch->last_seq, end_word(s->end), s->last, s->first, s->last, s->at,
			       ch->last_seq + 1, s->last,
			       s->end == AL_VREG_CLOSE ? "are missing"
						       : "are not there: its writer was lost (died with batches in "
							 "flight, or the tail was cut: not told apart)");
		} else if (s->end == AL_VREG_CLOSE && ch->last_seq == s->last &&
			   CRYPTO_memcmp(ch->head_hash, s->head, AL_HASH_LEN) != 0) {
			report(o, res, AL_V_MODIFIED, g->name, true, s->last,
			       "chain %s ends at seq %" PRIu64 " with another record than the close seal the sealer "
			       "registered there (registry seq %" PRIu64 "): the chain was rewritten",
			       s->chain_id, s->last, s->at);
		}
	}
}

void al_registry_free(struct al_vregistry *g)
{
	if (!g)
		return;
	free(g->name);
	free(g->seg);
	al_vresult_free(&g->res);
	memset(g, 0, sizeof(*g));
}
