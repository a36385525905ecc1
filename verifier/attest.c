/* SPDX-License-Identifier: MIT */
/*
 * auditlog-verify --attest FILE --verify-key KEY [PATH...]: the checks of
 * docs/format.md 27.4. The statement's MAC and epoch come first; then the
 * seals of the chains given are read for their places only (chain id, seq,
 * kind, epoch, key id, @timestamp): their MACs and the chain itself are the
 * ordinary verification's, run beside this one.
 */
#include "attest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "cli.h"
#include "format.h"
#include "format_v2.h"

#define NS UINT64_C(1000000000)

struct last_seal {
	uint8_t chain_id[32];
	uint64_t seq, ts;
	uint32_t epoch;
	bool close;
	unsigned file;
	uint64_t line;
};

struct run {
	const struct attest_opts *o;
	const char *stmt;
	unsigned findings, notices;
};

static void finding(struct run *r, const char *file, uint64_t line, const uint64_t *seq, const char *cls,
		    bool notice, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static void finding(struct run *r, const char *file, uint64_t line, const uint64_t *seq, const char *cls,
		    bool notice, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (notice)
		r->notices++;
	else
		r->findings++;
	if (r->o->quiet)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->o->put(stdout, file);
	if (line)
		printf(":%" PRIu64, line);
	if (seq)
		printf(", seq %" PRIu64, *seq);
	printf(": %s: %s\n", cls, msg);
}


static void fmt_time(uint64_t ns, char out[AL_TS_LEN + 1])
{
	al_format_ts(ns, out);
	out[AL_TS_LEN] = 0;
}

struct seal_walk {
	struct run *r;
	char **paths;
	const struct al_attest *a;
	char kid[2 * AL_SEAL_KID_LEN], wts[AL_TS_LEN + 1];
	struct last_seal **chains;
	size_t *nchains, cap;
	uint8_t dec[AL_LINE_MAX];
	struct al_parsed p;
};

/* One line of a file: a seal under the statement's key id is checked
 * against the statement, and kept as its chain's last if it is. */
static int seal_line(void *ctx, unsigned i, uint64_t line, uint64_t pos, const char *s, size_t len)
{
	struct seal_walk *w = ctx;
	const struct al_attest *a = w->a;
	const struct al_record *rec = &w->p.rec;
	uint64_t d = a->p.delta;
	size_t off;

	(void)pos;
	if (al_parse((const uint8_t *)s, len, w->dec, &w->p, &off) != AL_PERR_OK)
		return 0; /* the ordinary verification reports it */
	if (rec->version != AL_V2 || rec->type != AL_T_SEAL || rec->f[AL_F_SEAL_KEY].n != sizeof(w->kid) ||
	    memcmp(rec->f[AL_F_SEAL_KEY].p, w->kid, sizeof(w->kid)) != 0)
		return 0;
	uint64_t seq = rec->f[AL_F_SEQ].u, ts = al_ts_ns(rec->f[AL_F_TIMESTAMP].p);
	uint32_t e = (uint32_t)rec->f[AL_F_EPOCH].u;
	if (e > a->epoch && ts + d < a->wall)
		finding(w->r, w->paths[i], line, &seq, "attest-conflict", false,
			"a seal of epoch %" PRIu32 ", later than the attested %" PRIu32 ", dated more than "
			"delta before the statement (%s): the state could not have made it then",
			e, a->epoch, w->wts);
	else if (e < a->epoch && ts > a->wall + d)
		finding(w->r, w->paths[i], line, &seq, "attest-conflict", false,
			"a seal of epoch %" PRIu32 ", before the attested %" PRIu32 ", dated more than "
			"delta after the statement (%s): made with a key the state had erased (an "
			"older copy of the state, or the verification key)",
			e, a->epoch, w->wts);
	struct last_seal *c = NULL;
	for (size_t j = 0; j < *w->nchains && !c; j++)
		if (memcmp((*w->chains)[j].chain_id, rec->f[AL_F_CHAIN_ID].p, 32) == 0)
			c = &(*w->chains)[j];
	if (!c) {
		if (*w->nchains == w->cap) {
			size_t nc = w->cap ? 2 * w->cap : 16;
			struct last_seal *g = realloc(*w->chains, nc * sizeof(*g));
			if (!g) {
				fprintf(stderr, "auditlog-verify: %s\n", strerror(ENOMEM));
				return 2;
			}
			*w->chains = g;
			w->cap = nc;
		}
		c = &(*w->chains)[(*w->nchains)++];
		memcpy(c->chain_id, rec->f[AL_F_CHAIN_ID].p, 32);
		c->seq = 0;
		c->file = i;
	} else if (seq < c->seq) {
		return 0;
	}
	c->seq = seq;
	c->ts = ts;
	c->epoch = e;
	c->close = rec->f[AL_F_KIND].n == 5 && memcmp(rec->f[AL_F_KIND].p, "close", 5) == 0;
	c->file = i;
	c->line = line;
	return 0;
}

/* The seals of the files under key id kid: each one against the statement,
 * and the last of each chain kept in *chains. 0, or 2 (unreadable). */
static int read_seals(struct run *r, char **paths, unsigned n, const struct al_attest *a,
		      struct last_seal **chains, size_t *nchains)
{
	static struct seal_walk w;

	w = (struct seal_walk){.r = r, .paths = paths, .a = a, .chains = chains, .nchains = nchains};
	al_hex(a->p.key_id, AL_SEAL_KID_LEN, w.kid);
	fmt_time(a->wall, w.wts);
	return cli_each_line("auditlog-verify", paths, n, AL_LINE_MAX, seal_line, &w);
}

int attest_verify(const char *statement, char **paths, unsigned n, const struct attest_opts *o)
{
	struct run r = {.o = o, .stmt = statement};
	struct al_attest a;
	const struct al_vkey *vk = NULL;
	struct last_seal *chains = NULL;
	size_t nchains = 0;
	uint8_t *buf = NULL;
	size_t len = 0;
	char kid[2 * AL_SEAL_KID_LEN + 1], wts[AL_TS_LEN + 1];
	int ret;

	ret = cli_read_small(statement, AL_ATTEST_MAX, false, &buf, &len);
	if (ret < 0) {
		fprintf(stderr, "auditlog-verify: cannot read the attestation %s: %s\n", statement, strerror(-ret));
		return 2;
	}
	if (al_attest_parse(buf, len, &a, NULL) < 0) {
		finding(&r, statement, 0, NULL, "bad-attestation", false,
			"not an attestation statement (docs/format.md 27.1)");
		goto out;
	}
	al_hex(a.p.key_id, AL_SEAL_KID_LEN, kid);
	kid[sizeof(kid) - 1] = 0;
	fmt_time(a.wall, wts);
	for (unsigned i = 0; i < o->n_vkeys && !vk; i++)
		if (memcmp(o->vkeys[i].p.key_id, a.p.key_id, AL_SEAL_KID_LEN) == 0)
			vk = &o->vkeys[i];
	if (!vk) {
		finding(&r, statement, 0, NULL, "unknown-key", false,
			"key id %s is not that of a verification key given: nothing checked", kid);
		goto out;
	}
	int c = al_attest_check(&a, buf, len, vk);
	if (c < 0) {
		finding(&r, statement, 0, NULL, "bad-attestation", false, "%s",
			c == -EBADMSG ? "the MAC does not verify: the statement was changed, or not made with "
					"the key of its epoch"
				      : "host, t0 or delta are not those of the verification key of its key id");
		goto out;
	}
	if (o->has_nonce && (!a.has_nonce || CRYPTO_memcmp(a.nonce, o->nonce, sizeof(a.nonce)) != 0)) {
		finding(&r, statement, 0, NULL, "bad-attestation", false,
			"its nonce is %s, not the challenge given: made before it (replayed), or for another "
			"request", a.has_nonce ? "another" : "absent");
		goto out;
	}
	struct timespec now_ts;
	clock_gettime(CLOCK_REALTIME, &now_ts);
	uint64_t now = (uint64_t)now_ts.tv_sec * NS + (uint64_t)now_ts.tv_nsec;
	if (!o->quiet)
		printf("attestation: host %.*s, key id %s, epoch %" PRIu32 ", made at %s (%" PRIu64
		       " s ago)%s: MAC verified\n",
		       (int)a.p.host_len, (const char *)a.p.host, kid, a.epoch, wts,
		       now > a.wall ? (now - a.wall) / NS : 0, a.has_nonce ? ", with the nonce" : "");
	/* the epoch against the statement's own time (27.4) */
	uint64_t d = a.p.delta;
	if (a.wall < a.p.t0) {
		finding(&r, statement, 0, NULL, "attest-epoch", false,
			"made at %s, before the key's t0: its clock, or the statement, is wrong", wts);
	} else {
		uint64_t w = (a.wall - a.p.t0) / d;
		if ((uint64_t)a.epoch + 1 < w)
			finding(&r, statement, 0, NULL, "attest-epoch", false,
				"the state was at epoch %" PRIu32 " at %s, when the schedule says %" PRIu64
				": it was behind, and the keys of epochs %" PRIu32 " to %" PRIu64
				" were still on the host (a state no holder advanced, or an old copy)",
				a.epoch, wts, w, a.epoch, w - 2);
		else if ((uint64_t)a.epoch > w + 1)
			finding(&r, statement, 0, NULL, "attest-epoch", false,
				"epoch %" PRIu32 " at %s, when the schedule says %" PRIu64
				": the statement's wall clock lies behind its epoch",
				a.epoch, wts, w);
	}
	if (a.wall > now + d)
		finding(&r, statement, 0, NULL, "attest-age", false,
			"made at %s, in the future of this verifier's clock", wts);
	else if (o->max_age && now > a.wall && now - a.wall > o->max_age)
		finding(&r, statement, 0, NULL, "attest-age", false,
			"made at %s, %" PRIu64 " s ago, more than --attest-max-age: an old statement", wts,
			(now - a.wall) / NS);
	/* the chains */
	if ((ret = read_seals(&r, paths, n, &a, &chains, &nchains)) != 0)
		goto done;
	for (size_t i = 0; i < nchains; i++) {
		struct last_seal *s = &chains[i];
		if (!s->close && s->ts < a.wall && (uint64_t)s->epoch + 1 < a.epoch)
			finding(&r, paths[s->file], s->line, &s->seq, "attest-lag", true,
				"chain %.32s: its last seal (epoch %" PRIu32 ", not a close) lies more than one epoch "
				"behind the attested %" PRIu32 ": its writer stopped sealing (it died, or the tail "
				"was cut)",
				(const char *)s->chain_id, s->epoch, a.epoch);
	}
	if (!o->quiet)
		printf("attestation: %zu chain%s with seals under key id %s compared (their seals' places only: "
		       "run auditlog-verify --verify-key on them for the seals themselves); %u finding%s, "
		       "%u notice%s\n",
		       nchains, nchains == 1 ? "" : "s", kid, r.findings, r.findings == 1 ? "" : "s", r.notices,
		       r.notices == 1 ? "" : "s");
	goto done;
out:
	ret = 0;
done:
	free(chains);
	free(buf);
	if (ret)
		return ret;
	return r.findings ? 1 : 0;
}
