/* SPDX-License-Identifier: MIT */
/* The verification engine's public face (auditlog_verifier_* in <auditlog.h>):
 * a handle over verify.c's al_verify_files, or its al_vstream_* for bytes fed
 * to it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "auditlog.h"
#include "verify.h"

/* The public classes are the engine's, by number. */
#define SAME(pub, in) _Static_assert((int)(pub) == (int)(in), #pub)
SAME(AUDITLOG_V_MODIFIED, AL_V_MODIFIED);
SAME(AUDITLOG_V_INSERTED, AL_V_INSERTED);
SAME(AUDITLOG_V_DELETED, AL_V_DELETED);
SAME(AUDITLOG_V_DUPLICATED, AL_V_DUPLICATED);
SAME(AUDITLOG_V_REORDERED, AL_V_REORDERED);
SAME(AUDITLOG_V_NONCANONICAL, AL_V_NONCANONICAL);
SAME(AUDITLOG_V_UNPARSEABLE, AL_V_UNPARSEABLE);
SAME(AUDITLOG_V_VERSION, AL_V_VERSION);
SAME(AUDITLOG_V_MISSING_FILE, AL_V_MISSING_FILE);
SAME(AUDITLOG_V_FORKED, AL_V_FORKED);
SAME(AUDITLOG_V_TRUNCATED, AL_V_TRUNCATED);
SAME(AUDITLOG_V_RECOVERED, AL_V_RECOVERED);
SAME(AUDITLOG_V_UNANCHORED, AL_V_UNANCHORED);
SAME(AUDITLOG_V_EXTRA_CHAIN, AL_V_EXTRA_CHAIN);
SAME(AUDITLOG_V_BAD_SEAL, AL_V_BAD_SEAL);
SAME(AUDITLOG_V_GAP, AL_V_GAP);
SAME(AUDITLOG_V_UNSEALED, AL_V_UNSEALED);
SAME(AUDITLOG_V_UNKNOWN_KEY, AL_V_UNKNOWN_KEY);
SAME(AUDITLOG_V_CLOCK, AL_V_CLOCK);
SAME(AUDITLOG_V_UNSIGNED_TAIL, AL_V_UNSIGNED_TAIL);
SAME(AUDITLOG_V_BAD_CHECKPOINT, AL_V_BAD_CHECKPOINT);
SAME(AUDITLOG_V_MISSING_CHAIN, AL_V_MISSING_CHAIN);
SAME(AUDITLOG_V_REWRITTEN, AL_V_REWRITTEN);
SAME(AUDITLOG_V_SHIPPER_DUPLICATE, AL_V_SHIPPER_DUPLICATE);
SAME(AUDITLOG_V_SAME_FILE, AL_V_SAME_FILE);
SAME(AUDITLOG_V__COUNT, AL_V__MAX);

struct auditlog_verifier {
	char **paths;
	unsigned n, cap;
	char **dirs; /* o.dirs: the directories added */
	unsigned n_dirs, cap_dirs;
	struct al_vopts o;
	bool strict, ran;
	struct al_vresult res;
	void (*on_finding)(void *ctx, const struct auditlog_finding *f);
	void *finding_ctx;
	void (*on_record)(void *ctx, const char *line, size_t len);
	void *record_ctx;
	char *stream_name;         /* auditlog_verifier_add_stream: fed, not files */
	struct al_vstream *stream; /* made at the first feed */
	struct al_vanchor *anchors; /* add_expect_head: o.anchors points here */
	unsigned n_anchors;
	struct al_vkey *vkeys;   /* o.vkeys points here; wiped at free */
	struct al_ckey *pubkeys; /* o.pubkeys */
	struct al_ckey *wkeys;   /* o.wkeys */
	struct al_vwnote *witness; /* o.witness */
	char **wnames;           /* "witness N", for findings */
	unsigned n_wfiles;
	char *registry;          /* add_registry: the sealer's registry (docs/format.md 26) */
};

AUDITLOG_API int auditlog_verifier_new(struct auditlog_verifier **ret_v)
{
	struct auditlog_verifier *v;

	if (!ret_v)
		return -EINVAL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	*ret_v = v;
	return 0;
}

AUDITLOG_API void auditlog_verifier_free(struct auditlog_verifier *v)
{
	if (!v)
		return;
	for (unsigned i = 0; i < v->n; i++)
		free(v->paths[i]);
	free(v->paths);
	for (unsigned i = 0; i < v->n_dirs; i++)
		free(v->dirs[i]);
	free(v->dirs);
	al_vstream_free(v->stream);
	al_vresult_free(&v->res);
	free(v->stream_name);
	free(v->anchors);
	if (v->vkeys)
		OPENSSL_cleanse(v->vkeys, v->o.n_vkeys * sizeof(*v->vkeys));
	free(v->vkeys);
	free(v->pubkeys);
	free(v->wkeys);
	al_witness_free(v->witness, v->o.n_witness);
	for (unsigned i = 0; i < v->n_wfiles; i++)
		free(v->wnames[i]);
	free(v->wnames);
	free(v->registry);
	free(v);
}

AUDITLOG_API int auditlog_verifier_add_path(struct auditlog_verifier *v, const char *path)
{
	if (!v || !path || v->ran || v->stream_name)
		return -EINVAL;
	int r = al_verify_add_path(path, &v->paths, &v->n, &v->cap);
	return r < 0 ? r : al_verify_note_dir(path, &v->dirs, &v->n_dirs, &v->cap_dirs);
}

AUDITLOG_API int auditlog_verifier_add_stream(struct auditlog_verifier *v, const char *name)
{
	if (!v || !name || v->ran || v->n || v->stream_name)
		return -EINVAL;
	v->stream_name = strdup(name);
	return v->stream_name ? 0 : -ENOMEM;
}

/* May this setting change? -EINVAL for no verifier or a bad value; -EBUSY
 * once a stream's first feed has fixed the settings. */
static int settable(const struct auditlog_verifier *v, bool bad)
{
	if (!v || bad)
		return -EINVAL;
	return v->stream ? -EBUSY : 0;
}

AUDITLOG_API int auditlog_verifier_set_min_version(struct auditlog_verifier *v, unsigned version)
{
	int r = settable(v, version > 255);

	if (r)
		return r;
	v->o.min_version = version;
	return 0;
}

AUDITLOG_API int auditlog_verifier_set_strict(struct auditlog_verifier *v, int strict)
{
	int r = settable(v, false);

	if (r)
		return r;
	v->strict = strict != 0;
	return 0;
}

static bool chain_id_ok(const char *id)
{
	size_t i = 0;
	for (; id[i]; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return i == 32;
}

/* The anchor of chain id (NULL: the live file's), added or (replace) set. */
static int anchor(struct auditlog_verifier *v, const char *id, uint64_t seq, const uint8_t hash[32],
		  bool replace)
{
	int r = settable(v, !hash || (id && !chain_id_ok(id)));
	unsigned k = 0;

	if (r)
		return r;
	for (; k < v->n_anchors; k++)
		if (v->anchors[k].has_chain == (id != NULL) && (!id || strcmp(v->anchors[k].chain_id, id) == 0))
			break;
	if (k < v->n_anchors && !replace)
		return -EINVAL; /* one anchor a chain */
	if (k == v->n_anchors) {
		struct al_vanchor *a = realloc(v->anchors, (v->n_anchors + 1) * sizeof(*a));
		if (!a)
			return -ENOMEM;
		v->anchors = a;
		v->n_anchors++;
	}
	struct al_vanchor *a = &v->anchors[k];
	memset(a, 0, sizeof(*a));
	if (id) {
		a->has_chain = true;
		memcpy(a->chain_id, id, 33);
	}
	a->seq = seq;
	memcpy(a->hash, hash, AL_HASH_LEN);
	v->o.anchors = v->anchors;
	v->o.n_anchors = v->n_anchors;
	v->o.has_expect_head = true;
	return 0;
}

AUDITLOG_API int auditlog_verifier_set_expect_head(struct auditlog_verifier *v, uint64_t seq,
						       const uint8_t hash[32])
{
	return anchor(v, NULL, seq, hash, true);
}

AUDITLOG_API int auditlog_verifier_add_expect_head(struct auditlog_verifier *v, const char *chain_id,
						       uint64_t seq, const uint8_t hash[32])
{
	return anchor(v, chain_id, seq, hash, false);
}

AUDITLOG_API int auditlog_verifier_set_one_chain(struct auditlog_verifier *v, int on)
{
	int r = settable(v, false);

	if (r)
		return r;
	v->o.one_chain = on != 0;
	return 0;
}

AUDITLOG_API int auditlog_verifier_set_dedup(struct auditlog_verifier *v, int on)
{
	int r = settable(v, false);

	if (r)
		return r;
	v->o.dedup = on != 0;
	return 0;
}

AUDITLOG_API int auditlog_verifier_set_from(struct auditlog_verifier *v, uint64_t seq,
						const uint8_t hash[32])
{
	int r = settable(v, !hash);

	if (r)
		return r;
	v->o.has_from = true;
	v->o.from_seq = seq;
	memcpy(v->o.from_hash, hash, AL_HASH_LEN);
	return 0;
}

AUDITLOG_API int auditlog_verifier_add_verify_key(struct auditlog_verifier *v, const void *buf, size_t len)
{
	int r = settable(v, !buf);
	struct al_vkey k;

	if (r)
		return r;
	r = al_vkey_parse(buf, len, &k);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < v->o.n_vkeys && r == 0; i++)
		if (memcmp(v->vkeys[i].p.key_id, k.p.key_id, AL_SEAL_KID_LEN) == 0)
			r = -EINVAL; /* one key per key id */
	if (r == 0) {
		/* grown by hand so the old copy is wiped, not left on the heap */
		struct al_vkey *nk = calloc(v->o.n_vkeys + 1, sizeof(*nk));
		if (!nk) {
			r = -ENOMEM;
		} else {
			if (v->o.n_vkeys) {
				memcpy(nk, v->vkeys, v->o.n_vkeys * sizeof(*nk));
				OPENSSL_cleanse(v->vkeys, v->o.n_vkeys * sizeof(*nk));
			}
			free(v->vkeys);
			nk[v->o.n_vkeys] = k;
			v->vkeys = nk;
			v->o.vkeys = nk;
			v->o.n_vkeys++;
		}
	}
	OPENSSL_cleanse(&k, sizeof(k));
	return r;
}

/* A checkpoint key file (17.3) onto a list, one key per host name: the
 * public keys of hosts, or of witnesses (their names). */
static int add_ckey(struct auditlog_verifier *v, const void *buf, size_t len, struct al_ckey **list,
		    const struct al_ckey **o_list, unsigned *n)
{
	int r = settable(v, !buf);
	struct al_ckey k;

	if (r)
		return r;
	r = al_ckey_parse(buf, len, false, &k);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < *n; i++)
		if ((*list)[i].host_len == k.host_len && memcmp((*list)[i].host, k.host, k.host_len) == 0)
			return -EINVAL; /* one key per name */
	struct al_ckey *nk = realloc(*list, (*n + 1) * sizeof(*nk));
	if (!nk)
		return -ENOMEM;
	nk[*n] = k;
	*list = nk;
	*o_list = nk;
	(*n)++;
	return 0;
}

AUDITLOG_API int auditlog_verifier_add_pubkey(struct auditlog_verifier *v, const void *buf, size_t len)
{
	return v ? add_ckey(v, buf, len, &v->pubkeys, &v->o.pubkeys, &v->o.n_pubkeys) : -EINVAL;
}

AUDITLOG_API int auditlog_verifier_add_witness_key(struct auditlog_verifier *v, const void *buf, size_t len)
{
	return v ? add_ckey(v, buf, len, &v->wkeys, &v->o.wkeys, &v->o.n_wkeys) : -EINVAL;
}

AUDITLOG_API int auditlog_verifier_add_witness(struct auditlog_verifier *v, const void *buf, size_t len)
{
	int r = settable(v, !buf);
	char name[32], *dup, **names;

	if (r)
		return r;
	/* each name its own allocation: the notes point at it */
	snprintf(name, sizeof(name), "witness %u", v->n_wfiles + 1);
	dup = strdup(name);
	names = dup ? realloc(v->wnames, (v->n_wfiles + 1) * sizeof(*names)) : NULL;
	if (!names) {
		free(dup);
		return -ENOMEM;
	}
	v->wnames = names;
	r = al_witness_parse(buf, len, dup, &v->witness, &v->o.n_witness);
	if (r < 0) {
		free(dup);
		return r;
	}
	names[v->n_wfiles++] = dup;
	v->o.witness = v->witness;
	return 0;
}

AUDITLOG_API int auditlog_verifier_add_registry(struct auditlog_verifier *v, const char *path)
{
	int r = settable(v, !path || (v && v->registry));

	if (r)
		return r;
	v->registry = strdup(path);
	return v->registry ? 0 : -ENOMEM;
}

AUDITLOG_API int auditlog_verifier_set_threads(struct auditlog_verifier *v, unsigned threads)
{
	int r = settable(v, threads > 1024);

	if (r)
		return r;
	v->o.threads = threads;
	return 0;
}

static void finding_cb(void *ctx, const struct al_finding *f)
{
	struct auditlog_verifier *v = ctx;
	struct auditlog_finding pf = {
		.cls = (uint32_t)f->cls,
		.has_seq = f->has_seq,
		.file = f->file,
		.line = f->line,
		.offset = f->offset,
		.seq = f->seq,
		.msg = f->msg,
	};

	if (v->on_finding)
		v->on_finding(v->finding_ctx, &pf);
}

static void record_cb(void *ctx, const uint8_t *line, size_t len)
{
	struct auditlog_verifier *v = ctx;

	v->on_record(v->record_ctx, (const char *)line, len);
}

AUDITLOG_API int auditlog_verifier_set_on_finding(struct auditlog_verifier *v,
						      void (*cb)(void *ctx, const struct auditlog_finding *f),
						      void *ctx)
{
	int r = settable(v, false);

	if (r)
		return r;
	v->on_finding = cb;
	v->finding_ctx = ctx;
	return 0;
}

AUDITLOG_API int auditlog_verifier_set_on_record(struct auditlog_verifier *v,
						     void (*cb)(void *ctx, const char *line, size_t len),
						     void *ctx)
{
	int r = settable(v, false);

	if (r)
		return r;
	v->on_record = cb;
	v->record_ctx = ctx;
	return 0;
}

/* The engine's options from the settings: at the run, or the first feed. */
static void engine_opts(struct auditlog_verifier *v)
{
	v->o.on_finding = finding_cb;
	v->o.on_record = v->on_record ? record_cb : NULL;
	v->o.ctx = v;
}

AUDITLOG_API int auditlog_verifier_feed(struct auditlog_verifier *v, const void *buf, size_t len)
{
	int r;

	if (!v || (!buf && len) || !v->stream_name || v->ran)
		return -EINVAL;
	if (!v->stream) {
		engine_opts(v);
		r = al_vstream_new(v->stream_name, &v->o, &v->res, &v->stream);
		if (r < 0)
			return r;
	}
	return al_vstream_feed(v->stream, buf, len);
}

AUDITLOG_API int auditlog_verifier_run(struct auditlog_verifier *v, struct auditlog_vsummary *ret,
					   size_t size)
{
	struct auditlog_vsummary s = { 0 };
	int r;

	if (!v || !ret || v->ran || size > sizeof(s))
		return -EINVAL;
	if (v->stream_name) {
		r = v->stream ? 0 : auditlog_verifier_feed(v, "", 0); /* nothing fed: an empty stream */
		if (r == 0) {
			r = al_vstream_end(v->stream);
			v->stream = NULL;
		}
	} else {
		engine_opts(v);
		v->o.dirs = v->dirs;
		v->o.n_dirs = v->n_dirs;
		r = al_verify_files(v->paths, v->n, &v->o, &v->res);
	}
	v->ran = true;
	if (r == 0 && v->registry) {
		/* after the inputs: their chains are what the registry is compared with */
		struct al_vregistry g;
		r = al_registry_load(v->registry, &v->o, &g);
		if (r == 0)
			al_registry_compare(&g, &v->o, &v->res);
		al_registry_free(&g);
	}
	if (r < 0)
		return r;
	s.files = v->res.files;
	s.chains = v->res.chains;
	s.seals = v->res.seals;
	s.checkpoints = v->res.checkpoints;
	s.seals_checked = v->res.seals_checked;
	s.checkpoints_checked = v->res.checkpoints_checked;
	s.unsigned_tail = v->res.unsigned_tail;
	s.pending = v->res.pending;
	s.have_verify_key = v->o.n_vkeys > 0;
	s.have_pubkey = v->o.n_pubkeys > 0;
	s.records = v->res.records;
	s.bytes = v->res.bytes;
	for (int c = 0; c < AL_V__MAX; c++) {
		s.findings[c] = v->res.findings[c];
		if (al_vclass_is_integrity((enum al_vclass)c, v->strict))
			s.integrity_findings += v->res.findings[c];
	}
	memcpy(ret, &s, size);
	return 0;
}

AUDITLOG_API int auditlog_verifier_chain(struct auditlog_verifier *v, unsigned i,
					     struct auditlog_vchain *ret, size_t size)
{
	struct auditlog_vchain c = { 0 };
	const struct al_vchain *ch;

	if (!v || !ret || !v->ran || size > sizeof(c))
		return -EINVAL;
	if (i >= v->res.chains)
		return -ERANGE;
	ch = &v->res.chain[i];
	memcpy(c.chain_id, ch->chain_id, sizeof(c.chain_id));
	c.files = ch->files;
	c.records = ch->records;
	c.events = ch->events;
	c.first_seq = ch->first_seq;
	c.last_seq = ch->last_seq;
	memcpy(c.head_hash, ch->head_hash, sizeof(c.head_hash));
	memcpy(c.first_ts, ch->first_ts, sizeof(c.first_ts));
	memcpy(c.last_ts, ch->last_ts, sizeof(c.last_ts));
	c.min_version = ch->min_version;
	c.max_version = ch->max_version;
	c.seals = ch->seals;
	c.checkpoints = ch->checkpoints;
	c.unsigned_tail = ch->unsigned_tail;
	c.tree_size = ch->tree_size;
	memcpy(ret, &c, size);
	return 0;
}

AUDITLOG_API const char *auditlog_vclass_name(uint32_t cls)
{
	return cls < AL_V__MAX ? al_vclass_name((enum al_vclass)cls) : NULL;
}
