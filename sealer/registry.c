/* SPDX-License-Identifier: MIT */
/* The sealer's registry of chains: registry.h, docs/format.md 26. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <auditlog.h>

#include "internal.h"
#include "registry.h"

struct registry {
	struct auditlog *log;
};

int registry_open(const char *dir, const char *state, const char *signing_key,
		  const struct al_clock_hooks *clock, struct registry **ret)
{
	struct auditlog_config *cfg = NULL;
	struct registry *g;
	char *path = NULL;
	int r;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	g = calloc(1, sizeof(*g));
	if (!g || asprintf(&path, "%s/registry.log", dir) < 0) {
		free(g);
		return -ENOMEM;
	}
	if ((r = auditlog_config_new(&cfg)) < 0 || (r = auditlog_config_set_path(cfg, path)) < 0 ||
	    (r = auditlog_config_set_format_version(cfg, 2)) < 0 ||
	    (r = auditlog_config_set_sealing(cfg, state, signing_key)) < 0 ||
	    (clock && (r = auditlog__config_set_clock(cfg, clock)) < 0) ||
	    (r = auditlog_open(cfg, &g->log)) < 0)
		goto err;
	auditlog_config_free(cfg);
	free(path);
	*ret = g;
	return 0;
err:
	auditlog_config_free(cfg);
	free(path);
	free(g);
	return r;
}

/* One registry record: action, then the segment's fields (14.3 sorts them). */
static int put(struct registry *g, const char *action, const struct reg_segment *seg, bool end, bool sync)
{
	char head[2 * AL_HASH_LEN];
	struct auditlog_field f[7] = {
		{.key = "chain.id", .kind = AUDITLOG_FIELD_STR, .str = seg->chain_id, .str_len = 32},
		{.key = "chain.first", .kind = AUDITLOG_FIELD_INT, .u = seg->first},
		{.key = "peer.pid", .kind = AUDITLOG_FIELD_INT, .u = (uint64_t)seg->peer.pid},
		{.key = "peer.uid", .kind = AUDITLOG_FIELD_INT, .u = seg->peer.uid},
		{.key = "peer.gid", .kind = AUDITLOG_FIELD_INT, .u = seg->peer.gid},
		{.key = "chain.last", .kind = AUDITLOG_FIELD_INT, .u = seg->last},
		{.key = "chain.head", .kind = AUDITLOG_FIELD_STR, .str = head, .str_len = sizeof(head)},
	};
	struct auditlog_event ev = {
		.outcome = AUDITLOG_OUTCOME_SUCCESS,
		.action = action,
		.action_len = strlen(action),
		.actor = "auditlog-sealer",
		.actor_len = 15,
	};
	size_t n = end ? 7 : 5;

	al_hex(seg->head, AL_HASH_LEN, head);
	return sync ? auditlog_record_fields_sync(g->log, &ev, f, n) : auditlog_record_fields(g->log, &ev, f, n);
}

int registry_chain_open(struct registry *g, const struct reg_segment *seg)
{
	return put(g, "chain-open", seg, false, true);
}

int registry_chain_end(struct registry *g, const struct reg_segment *seg)
{
	return put(g, seg->last_close ? "chain-close" : "chain-lost", seg, true, false);
}

int registry_close(struct registry *g)
{
	int r;

	if (!g)
		return 0;
	r = auditlog_close(g->log);
	free(g);
	return r;
}

int registry_seal_hash(const struct al_v2_seal *sl, const uint8_t prev[AL_HASH_LEN], uint64_t seq,
		       const char ts[AL_TS_LEN], uint8_t out[AL_HASH_LEN])
{
	struct al_v2_member m[AL_V2_SEAL_MEMBERS];
	char hex[AL_V2_SEAL_HEX];
	uint8_t body[256], d[AL_HASH_LEN];
	long bn;
	int k = al_v2_seal_members(sl, m, hex);

	if (k < 0)
		return k;
	bn = al_v2_body(AL_T_SEAL, m, (size_t)k, NULL, 0, body, sizeof(body));
	if (bn < 0)
		return -EINVAL;
	al_sha256(body, (size_t)bn, d);
	al_v2_chain_step(prev, seq, ts, d, out);
	return 0;
}
