/* SPDX-License-Identifier: MIT */
/*
 * --emit --format ecs|ocsf: a verified line converted by the mappings of
 * docs/siem.md 2 (ECS) and 8 (OCSF 1.1.0). The line is read with the format
 * layer's strict parser (al_parse), the one reader of canonical lines; the
 * output is built with jansson and written compact, one object a line.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "emit.h"
#include "format_v2.h"
#include "tail_state.h"

#define ECS_VERSION "8.11.0"
#define OCSF_VERSION "1.1.0"

int emit_parse_format(const char *s, enum emit_format *ret)
{
	static const char *const names[] = {"raw", "ecs", "ocsf"};
	for (unsigned i = 0; i < 3; i++)
		if (strcmp(s, names[i]) == 0) {
			*ret = (enum emit_format)i;
			return 0;
		}
	return -EINVAL;
}

/* ---- building the object -------------------------------------------------- */

struct conv {
	json_t *root;
	bool failed; /* out of memory, or a string jansson refused */
	const struct al_parsed *p;
	const uint8_t *line;
	size_t len;
	const char *chain_id;
};

/* A decoded value as a JSON string. Verified lines hold only valid UTF-8
 * (docs/format.md 3: the writer repairs, the parser refuses the rest), and
 * json_stringn keeps U+0000; NULL marks the conversion failed. */
static json_t *jstr(struct conv *c, const uint8_t *p, size_t n)
{
	json_t *j = json_stringn((const char *)p, n);
	if (!j)
		c->failed = true;
	return j;
}

/* The object at a dotted path under `at` (created as needed). */
static json_t *obj_path(struct conv *c, json_t *at, const char *path, size_t n)
{
	while (n > 0 && at) {
		const char *dot = memchr(path, '.', n);
		size_t k = dot ? (size_t)(dot - path) : n;
		char key[64];
		if (k >= sizeof(key)) {
			c->failed = true;
			return NULL;
		}
		memcpy(key, path, k);
		key[k] = 0;
		json_t *next = json_object_get(at, key);
		if (!next || !json_is_object(next)) {
			next = json_object();
			if (!next || json_object_set_new(at, key, next) < 0) {
				c->failed = true;
				return NULL;
			}
		}
		at = next;
		if (!dot)
			break;
		path += k + 1;
		n -= k + 1;
	}
	return at;
}

/* Set the member at dotted path `path` (the last part its key) to v (taken). */
static void put(struct conv *c, json_t *at, const char *path, json_t *v)
{
	const char *dot = strrchr(path, '.');
	if (!v) {
		c->failed = true;
		return;
	}
	if (dot && !(at = obj_path(c, at, path, (size_t)(dot - path)))) {
		json_decref(v);
		return;
	}
	if (json_object_set_new(at, dot ? dot + 1 : path, v) < 0)
		c->failed = true;
}

static bool has(const struct conv *c, enum al_field f)
{
	return (c->p->rec.present & AL_BIT(f)) != 0;
}

static json_t *fstr(struct conv *c, enum al_field f)
{
	return jstr(c, c->p->rec.f[f].p, c->p->rec.f[f].n);
}

static bool fis(const struct conv *c, enum al_field f, const char *s)
{
	size_t n = strlen(s);
	return has(c, f) && c->p->rec.f[f].n == n && memcmp(c->p->rec.f[f].p, s, n) == 0;
}

static json_t *fval(struct conv *c, enum al_field f)
{
	static const uint64_t ints = AL_BIT(AL_F_SEQ) | AL_BIT(AL_F_SLOT) | AL_BIT(AL_F_SESSION) |
				     AL_BIT(AL_F_PREV_SEQ) | AL_BIT(AL_F_PREV_SIZE) | AL_BIT(AL_F_LAST_SEQ) |
				     AL_BIT(AL_F_DAMAGE_OFFSET) | AL_BIT(AL_F_DAMAGE_LENGTH) |
				     AL_BIT(AL_F_EPOCH) | AL_BIT(AL_F_PREV_SEAL) | AL_BIT(AL_F_SIZE) |
				     AL_BIT(AL_F_FIRST_SEQ);
	if (ints & AL_BIT(f))
		return json_integer((json_int_t)c->p->rec.f[f].u);
	return fstr(c, f);
}

static bool is_pkcs11(enum al_field f)
{
	return f == AL_F_SLOT || f == AL_F_SESSION || f == AL_F_MECHANISM || f == AL_F_KEY_LABEL ||
	       f == AL_F_KEY_ID || f == AL_F_KEY2_LABEL || f == AL_F_KEY2_ID;
}

static json_t *hash_hex(struct conv *c)
{
	char hex[2 * AL_HASH_LEN];
	al_hex(c->p->hash, AL_HASH_LEN, hex);
	return jstr(c, (const uint8_t *)hex, sizeof(hex));
}

static char *dump(struct conv *c)
{
	char *s = c->failed ? NULL : json_dumps(c->root, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(c->root);
	return s;
}

/* ---- ECS (docs/siem.md 2) ------------------------------------------------- */

enum ecs_kind { ECS_KEYWORD, ECS_LONG, ECS_IP };

/* The ECS fields a caller-defined field may fill (docs/siem.md 2.1): none is
 * reserved (filled from a fixed member). Sorted for bsearch. */
static const struct ecs_field {
	const char *name;
	enum ecs_kind kind;
} ecs_fields[] = {
	{"client.address", ECS_KEYWORD},   {"client.domain", ECS_KEYWORD},
	{"client.ip", ECS_IP},             {"client.port", ECS_LONG},
	{"cloud.account.id", ECS_KEYWORD}, {"cloud.provider", ECS_KEYWORD},
	{"cloud.region", ECS_KEYWORD},     {"container.id", ECS_KEYWORD},
	{"container.name", ECS_KEYWORD},   {"destination.address", ECS_KEYWORD},
	{"destination.domain", ECS_KEYWORD}, {"destination.ip", ECS_IP},
	{"destination.port", ECS_LONG},    {"error.id", ECS_KEYWORD},
	{"error.message", ECS_KEYWORD},    {"error.type", ECS_KEYWORD},
	{"file.name", ECS_KEYWORD},        {"file.path", ECS_KEYWORD},
	{"group.domain", ECS_KEYWORD},     {"group.id", ECS_KEYWORD},
	{"group.name", ECS_KEYWORD},       {"host.hostname", ECS_KEYWORD},
	{"host.id", ECS_KEYWORD},          {"host.ip", ECS_IP},
	{"host.name", ECS_KEYWORD},        {"http.request.id", ECS_KEYWORD},
	{"http.request.method", ECS_KEYWORD}, {"http.response.status_code", ECS_LONG},
	{"log.level", ECS_KEYWORD},        {"log.logger", ECS_KEYWORD},
	{"network.protocol", ECS_KEYWORD}, {"network.transport", ECS_KEYWORD},
	{"network.type", ECS_KEYWORD},     {"organization.id", ECS_KEYWORD},
	{"organization.name", ECS_KEYWORD}, {"process.command_line", ECS_KEYWORD},
	{"process.executable", ECS_KEYWORD}, {"process.exit_code", ECS_LONG},
	{"process.name", ECS_KEYWORD},     {"process.parent.pid", ECS_LONG},
	{"process.pid", ECS_LONG},         {"process.title", ECS_KEYWORD},
	{"process.working_directory", ECS_KEYWORD}, {"server.address", ECS_KEYWORD},
	{"server.domain", ECS_KEYWORD},    {"server.ip", ECS_IP},
	{"server.port", ECS_LONG},         {"service.environment", ECS_KEYWORD},
	{"service.id", ECS_KEYWORD},       {"service.name", ECS_KEYWORD},
	{"service.type", ECS_KEYWORD},     {"service.version", ECS_KEYWORD},
	{"source.address", ECS_KEYWORD},   {"source.domain", ECS_KEYWORD},
	{"source.ip", ECS_IP},             {"source.port", ECS_LONG},
	{"span.id", ECS_KEYWORD},          {"tls.cipher", ECS_KEYWORD},
	{"tls.version", ECS_KEYWORD},      {"trace.id", ECS_KEYWORD},
	{"transaction.id", ECS_KEYWORD},   {"url.domain", ECS_KEYWORD},
	{"url.full", ECS_KEYWORD},         {"url.original", ECS_KEYWORD},
	{"url.path", ECS_KEYWORD},         {"url.query", ECS_KEYWORD},
	{"url.scheme", ECS_KEYWORD},       {"user.domain", ECS_KEYWORD},
	{"user.effective.id", ECS_KEYWORD}, {"user.effective.name", ECS_KEYWORD},
	{"user.email", ECS_KEYWORD},       {"user.full_name", ECS_KEYWORD},
	{"user.hash", ECS_KEYWORD},        {"user.id", ECS_KEYWORD},
	{"user.target.id", ECS_KEYWORD},   {"user.target.name", ECS_KEYWORD},
	{"user_agent.original", ECS_KEYWORD},
};

static int ecs_cmp(const void *k, const void *e)
{
	return strcmp(k, ((const struct ecs_field *)e)->name);
}

static const struct ecs_field *ecs_lookup(const char *key)
{
	return bsearch(key, ecs_fields, sizeof(ecs_fields) / sizeof(ecs_fields[0]), sizeof(ecs_fields[0]),
		       ecs_cmp);
}

/* Does the value fit the ECS field's type (docs/siem.md 2.1)? */
static bool ecs_fits(const struct ecs_field *ef, const struct al_v2_field *v)
{
	char ip[64];
	unsigned char bin[16];

	switch (ef->kind) {
	case ECS_LONG: return v->is_int;
	case ECS_KEYWORD: return true;
	case ECS_IP:
		if (v->is_int || v->n >= sizeof(ip))
			return false;
		memcpy(ip, v->p, v->n);
		ip[v->n] = 0;
		return inet_pton(AF_INET, ip, bin) == 1 || inet_pton(AF_INET6, ip, bin) == 1;
	}
	return false;
}

static json_t *decimal(uint64_t u)
{
	char s[24];
	snprintf(s, sizeof(s), "%" PRIu64, u);
	return json_string(s);
}

/* A caller-defined field (docs/format.md 14) into ECS: the field of that
 * name when the list has it and the value fits, else labels.<key, . → _>
 * (a label already taken by an earlier key gets _2, _3, ...). */
static void ecs_caller(struct conv *c, const struct al_v2_field *v)
{
	char key[AL_CALLER_KEY_MAX + 1], label[AL_CALLER_KEY_MAX + 16];
	const struct ecs_field *ef;

	if (v->key_len > AL_CALLER_KEY_MAX) {
		c->failed = true;
		return;
	}
	memcpy(key, v->key, v->key_len);
	key[v->key_len] = 0;
	if ((ef = ecs_lookup(key)) && ecs_fits(ef, v)) {
		if (v->is_int)
			put(c, c->root, key, ef->kind == ECS_LONG ? json_integer((json_int_t)v->u) : decimal(v->u));
		else
			put(c, c->root, key, jstr(c, v->p, v->n));
		return;
	}
	json_t *labels = obj_path(c, c->root, "labels", 6);
	if (!labels)
		return;
	for (size_t i = 0; i < v->key_len; i++)
		if (key[i] == '.')
			key[i] = '_';
	snprintf(label, sizeof(label), "%s", key);
	for (unsigned k = 2; json_object_get(labels, label); k++)
		snprintf(label, sizeof(label), "%s_%u", key, k);
	json_t *val = v->is_int ? decimal(v->u) : jstr(c, v->p, v->n);
	if (!val || json_object_set_new(labels, label, val) < 0)
		c->failed = true;
}

static char *to_ecs(struct conv *c)
{
	const struct al_record *r = &c->p->rec;
	json_t *root = c->root;
	bool event = r->type == AL_T_EVENT;
	char path[64];

	put(c, root, "@timestamp", fstr(c, AL_F_TIMESTAMP));
	put(c, root, "ecs.version", json_string(ECS_VERSION));
	put(c, root, "event.kind", json_string(event ? "event" : "state"));
	if (has(c, AL_F_ACTION))
		put(c, root, "event.action", fstr(c, AL_F_ACTION));
	if (has(c, AL_F_OUTCOME))
		put(c, root, "event.outcome", fstr(c, AL_F_OUTCOME));
	put(c, root, "event.sequence", json_integer((json_int_t)r->f[AL_F_SEQ].u));
	put(c, root, "event.hash", hash_hex(c));
	put(c, root, "event.original", jstr(c, c->line, c->len));
	if (has(c, AL_F_RV) && !fis(c, AL_F_RV, "CKR_OK"))
		put(c, root, "error.code", fstr(c, AL_F_RV));
	if (has(c, AL_F_ACTOR))
		put(c, root, "user.name", fstr(c, AL_F_ACTOR));
	if (has(c, AL_F_DETAIL))
		put(c, root, "message", fstr(c, AL_F_DETAIL));
	put(c, root, "auditlog.type", json_string(al_type_name(r->type)));
	put(c, root, "auditlog.v", json_integer(r->version));
	if (c->chain_id[0])
		put(c, root, "auditlog.chain_id", json_string(c->chain_id));
	for (int f = 0; f < AL_F__MAX; f++) {
		if (!has(c, (enum al_field)f))
			continue;
		switch (f) {
		case AL_F_TIMESTAMP: case AL_F_SEQ: case AL_F_ACTION: case AL_F_OUTCOME: case AL_F_RV:
		case AL_F_ACTOR: case AL_F_DETAIL: case AL_F_PAD:
			continue; /* above, or (pad) nothing but dots */
		case AL_F_CHAIN_ID:
			if (c->chain_id[0])
				continue; /* the same id (the engine checked it) */
			break;
		default: break;
		}
		snprintf(path, sizeof(path), "auditlog.%s%s", is_pkcs11((enum al_field)f) ? "pkcs11." : "",
			 al_field_key((enum al_field)f));
		put(c, root, path, fval(c, (enum al_field)f));
	}
	if (event && r->version >= AL_V2)
		for (size_t i = 0; i < r->ncaller; i++)
			ecs_caller(c, &r->caller[i]);
	return dump(c);
}

/* ---- OCSF 1.1.0 (docs/siem.md 8) ------------------------------------------ */

struct ocsf_class {
	unsigned cls, cat, act;
	const char *cls_name, *cat_name, *act_name;
};

#define API_ACTIVITY 6003u, 6u
#define AUTHENTICATION 3002u, 3u
#define ENTITY_MGMT 3004u, 3u
#define APP_CAT "Application Activity"
#define IAM_CAT "Identity & Access Management"

static const struct {
	const char *action;
	struct ocsf_class c;
} ocsf_actions[] = {
	{"C_Login", {AUTHENTICATION, 1, "Authentication", IAM_CAT, "Logon"}},
	{"C_Logout", {AUTHENTICATION, 2, "Authentication", IAM_CAT, "Logoff"}},
	{"C_GenerateKey", {ENTITY_MGMT, 1, "Entity Management", IAM_CAT, "Create"}},
	{"C_GenerateKeyPair", {ENTITY_MGMT, 1, "Entity Management", IAM_CAT, "Create"}},
	{"C_CreateObject", {ENTITY_MGMT, 1, "Entity Management", IAM_CAT, "Create"}},
	{"C_CopyObject", {ENTITY_MGMT, 1, "Entity Management", IAM_CAT, "Create"}},
	{"C_DeriveKey", {ENTITY_MGMT, 1, "Entity Management", IAM_CAT, "Create"}},
	{"C_UnwrapKey", {ENTITY_MGMT, 1, "Entity Management", IAM_CAT, "Create"}},
	{"C_WrapKey", {ENTITY_MGMT, 2, "Entity Management", IAM_CAT, "Read"}},
	{"C_SetAttributeValue", {ENTITY_MGMT, 3, "Entity Management", IAM_CAT, "Update"}},
	{"C_DestroyObject", {ENTITY_MGMT, 4, "Entity Management", IAM_CAT, "Delete"}},
	{"C_OpenSession", {API_ACTIVITY, 1, "API Activity", APP_CAT, "Create"}},
	{"C_InitToken", {API_ACTIVITY, 3, "API Activity", APP_CAT, "Update"}},
	{"C_InitPIN", {API_ACTIVITY, 3, "API Activity", APP_CAT, "Update"}},
	{"C_SetPIN", {API_ACTIVITY, 3, "API Activity", APP_CAT, "Update"}},
	{"C_CloseSession", {API_ACTIVITY, 4, "API Activity", APP_CAT, "Delete"}},
	{"C_CloseAllSessions", {API_ACTIVITY, 4, "API Activity", APP_CAT, "Delete"}},
};

static struct ocsf_class ocsf_classify(const struct conv *c)
{
	static const struct ocsf_class read = {API_ACTIVITY, 2, "API Activity", APP_CAT, "Read"},
				       other = {API_ACTIVITY, 99, "API Activity", APP_CAT, "Other"},
				       base = {0, 0, 99, "Base Event", "Uncategorized", "Other"};
	const struct al_val *a = &c->p->rec.f[AL_F_ACTION];

	if (c->p->rec.type != AL_T_EVENT)
		return base;
	for (size_t i = 0; i < sizeof(ocsf_actions) / sizeof(ocsf_actions[0]); i++)
		if (fis(c, AL_F_ACTION, ocsf_actions[i].action))
			return ocsf_actions[i].c;
	if ((a->n > 5 && memcmp(a->p, "C_Get", 5) == 0) || (a->n > 6 && memcmp(a->p, "C_Find", 6) == 0))
		return read;
	return other;
}

/* ms since 1970 of a verified @timestamp */
static uint64_t ts_ms(const struct al_val *ts)
{
	int64_t sec = 0;
	uint64_t ms = 0;
	if (al_parse_ts(ts->p, ts->n, &sec) < 0 || sec < 0)
		return 0;
	for (unsigned i = 20; i < 23; i++)
		ms = ms * 10 + (uint64_t)(ts->p[i] - '0');
	return (uint64_t)sec * 1000u + ms;
}

/* {"type":"key","name":LABEL,"uid":ID}, "unknown" for a name when neither */
static json_t *ocsf_key(struct conv *c, enum al_field label, enum al_field id)
{
	json_t *k = json_object();
	if (!k) {
		c->failed = true;
		return NULL;
	}
	put(c, k, "type", json_string("key"));
	if (has(c, label))
		put(c, k, "name", fstr(c, label));
	if (has(c, id))
		put(c, k, "uid", fstr(c, id));
	if (!has(c, label) && !has(c, id))
		put(c, k, "name", json_string("unknown"));
	return k;
}

static char *to_ocsf(struct conv *c)
{
	const struct al_record *r = &c->p->rec;
	struct ocsf_class k = ocsf_classify(c);
	json_t *root = c->root;
	bool event = r->type == AL_T_EVENT, pkcs11 = event && r->f[AL_F_ACTION].n > 2 &&
							     memcmp(r->f[AL_F_ACTION].p, "C_", 2) == 0;
	char name[96], path[64];

	put(c, root, "activity_id", json_integer(k.act));
	put(c, root, "activity_name", event || k.cls ? json_string(k.act_name) : json_string(al_type_name(r->type)));
	put(c, root, "category_uid", json_integer(k.cat));
	put(c, root, "category_name", json_string(k.cat_name));
	put(c, root, "class_uid", json_integer(k.cls));
	put(c, root, "class_name", json_string(k.cls_name));
	put(c, root, "type_uid", json_integer((json_int_t)k.cls * 100 + k.act));
	snprintf(name, sizeof(name), "%s: %s", k.cls_name, k.act_name);
	put(c, root, "type_name", json_string(name));
	put(c, root, "time", json_integer((json_int_t)ts_ms(&r->f[AL_F_TIMESTAMP])));
	unsigned sev = r->type == AL_T_RECOVERY ? 3 : 1;
	put(c, root, "severity_id", json_integer(sev));
	put(c, root, "severity", json_string(sev == 3 ? "Medium" : "Informational"));
	if (has(c, AL_F_OUTCOME)) {
		unsigned st = fis(c, AL_F_OUTCOME, "success") ? 1 : fis(c, AL_F_OUTCOME, "failure") ? 2 : 0;
		put(c, root, "status_id", json_integer(st));
		put(c, root, "status", json_string(st == 1 ? "Success" : st == 2 ? "Failure" : "Unknown"));
	}
	if (has(c, AL_F_RV))
		put(c, root, "status_code", fstr(c, AL_F_RV));
	if (has(c, AL_F_DETAIL))
		put(c, root, "message", fstr(c, AL_F_DETAIL));
	put(c, root, "metadata.version", json_string(OCSF_VERSION));
	put(c, root, "metadata.product.name", json_string("auditlog"));
	put(c, root, "metadata.product.vendor_name", json_string("auditlog"));
	put(c, root, "metadata.product.version", json_string(cli_project_version));
	put(c, root, "metadata.uid", hash_hex(c));
	put(c, root, "metadata.sequence", json_integer((json_int_t)r->f[AL_F_SEQ].u));
	put(c, root, "metadata.original_time", fstr(c, AL_F_TIMESTAMP));

	if (k.cls == 6003) {
		put(c, root, "api.operation", fstr(c, AL_F_ACTION));
		if (pkcs11)
			put(c, root, "api.service.name", json_string("PKCS#11"));
		put(c, root, "actor.user.name", has(c, AL_F_ACTOR) ? fstr(c, AL_F_ACTOR) : json_string("unknown"));
		if (has(c, AL_F_SESSION))
			put(c, root, "actor.session.uid", decimal(r->f[AL_F_SESSION].u));
		put(c, root, c->chain_id[0] ? "src_endpoint.uid" : "src_endpoint.name",
		    json_string(c->chain_id[0] ? c->chain_id : "unknown"));
		if (has(c, AL_F_KEY_LABEL) || has(c, AL_F_KEY_ID)) {
			json_t *res = json_array();
			if (!res || json_array_append_new(res, ocsf_key(c, AL_F_KEY_LABEL, AL_F_KEY_ID)) < 0)
				c->failed = true;
			put(c, root, "resources", res);
		}
	} else if (k.cls == 3002) {
		put(c, root, "user.name", has(c, AL_F_ACTOR) ? fstr(c, AL_F_ACTOR) : json_string("unknown"));
		put(c, root, "service.name", json_string("PKCS#11"));
		if (has(c, AL_F_SLOT))
			put(c, root, "service.uid", decimal(r->f[AL_F_SLOT].u));
		if (has(c, AL_F_SESSION))
			put(c, root, "session.uid", decimal(r->f[AL_F_SESSION].u));
	} else if (k.cls == 3004) {
		bool two = has(c, AL_F_KEY2_LABEL) || has(c, AL_F_KEY2_ID);
		put(c, root, "entity", two ? ocsf_key(c, AL_F_KEY2_LABEL, AL_F_KEY2_ID)
					   : ocsf_key(c, AL_F_KEY_LABEL, AL_F_KEY_ID));
		if (has(c, AL_F_ACTOR))
			put(c, root, "actor.user.name", fstr(c, AL_F_ACTOR));
		if (has(c, AL_F_SESSION))
			put(c, root, "actor.session.uid", decimal(r->f[AL_F_SESSION].u));
	}
	put(c, root, "raw_data", jstr(c, c->line, c->len));

	json_t *al = obj_path(c, root, "unmapped.auditlog", 17);
	if (!al)
		return dump(c);
	if (c->chain_id[0])
		put(c, al, "chain_id", json_string(c->chain_id));
	put(c, al, "seq", json_integer((json_int_t)r->f[AL_F_SEQ].u));
	put(c, al, "hash", hash_hex(c));
	put(c, al, "type", json_string(al_type_name(r->type)));
	put(c, al, "v", json_integer(r->version));
	for (int f = 0; f < AL_F__MAX; f++) {
		if (!has(c, (enum al_field)f))
			continue;
		switch (f) {
		case AL_F_TIMESTAMP: case AL_F_SEQ: case AL_F_OUTCOME: case AL_F_RV: case AL_F_DETAIL:
		case AL_F_PAD:
			continue; /* mapped above, or (pad) nothing but dots */
		case AL_F_CHAIN_ID:
			if (c->chain_id[0])
				continue;
			break;
		default: break;
		}
		snprintf(path, sizeof(path), "%s%s", is_pkcs11((enum al_field)f) ? "pkcs11." : "",
			 al_field_key((enum al_field)f));
		put(c, al, path, fval(c, (enum al_field)f));
	}
	if (event && r->version >= AL_V2 && r->ncaller) {
		json_t *fields = obj_path(c, root, "unmapped.fields", 15);
		for (size_t i = 0; fields && i < r->ncaller; i++) {
			const struct al_v2_field *v = &r->caller[i];
			json_t *val = v->is_int ? json_integer((json_int_t)v->u) : jstr(c, v->p, v->n);
			/* the key as it is (a JSON member name; keys are unique) */
			if (!val || json_object_setn_new(fields, (const char *)v->key, v->key_len, val) < 0)
				c->failed = true;
		}
	}
	return dump(c);
}

static char *convert(enum emit_format fmt, const uint8_t *line, size_t len, const char *chain_id,
		     const struct al_parsed *p)
{
	struct conv c = {.line = line, .len = len, .chain_id = chain_id, .p = p};

	if (!(c.root = json_object()))
		return NULL;
	return fmt == EMIT_ECS ? to_ecs(&c) : to_ocsf(&c);
}

char *emit_convert(enum emit_format fmt, const uint8_t *line, size_t len, const char *chain_id, uint8_t *dec)
{
	struct al_parsed p;
	size_t err_off;

	if (al_parse(line, len, dec, &p, &err_off) != AL_PERR_OK)
		return NULL;
	p.rec.caller = p.caller;
	return convert(fmt, line, len, chain_id, &p);
}

/* ---- the emitter ----------------------------------------------------------- */

int emit_flush(struct emitter *e)
{
	int r;

	if (e->error)
		return e->error;
	if (e->olen && (r = cli_write_all(e->fd, e->obuf, e->olen, NULL)) < 0)
		return e->error = r;
	e->olen = 0;
	return 0;
}

/* One line: its an bytes at a, then a newline. */
static int put_line(struct emitter *e, const void *a, size_t an)
{
	size_t n = an + 1;
	int r;

	if (e->olen + n > sizeof(e->obuf) && (r = emit_flush(e)) < 0)
		return r;
	if (n > sizeof(e->obuf)) { /* alone, in one write but for its '\n' */
		uint8_t *tmp = malloc(n);
		if (!tmp)
			return e->error = -ENOMEM;
		memcpy(tmp, a, an);
		tmp[an] = '\n';
		r = cli_write_all(e->fd, tmp, n, NULL);
		free(tmp);
		return r < 0 ? (e->error = r) : 0;
	}
	memcpy(e->obuf + e->olen, a, an);
	e->obuf[e->olen + an] = '\n';
	e->olen += n;
	return 0;
}

int emit_line(struct emitter *e, const uint8_t *line, size_t len)
{
	struct al_parsed p;
	size_t err_off;
	int r = 0;

	if (e->error)
		return e->error;
	if (e->gap)
		return 0; /* dropped: verified again after the restart */
	if (e->fmt == EMIT_RAW && !e->tail && !e->check_seq)
		return put_line(e, line, len);
	if (al_parse(line, len, e->dec, &p, &err_off) != AL_PERR_OK)
		return e->error = -EINVAL;
	p.rec.caller = p.caller;
	uint64_t seq = p.rec.f[AL_F_SEQ].u;
	if (e->skipping) {
		if (seq <= e->skip_seq)
			return 0; /* emitted before the restart */
		e->skipping = false;
	}
	if (e->check_seq && e->have_seq && seq != e->last_seq + 1 &&
	    !(e->accept && e->last_seq == e->accept_after)) {
		e->gap = true;
		e->gap_seq = seq;
		return -EAGAIN;
	}
	e->have_seq = true;
	e->last_seq = seq;
	memcpy(e->last_hash, p.hash, AL_HASH_LEN);
	if (p.rec.type == AL_T_HEADER && p.rec.f[AL_F_CHAIN_ID].n == 32) {
		memcpy(e->chain_id, p.rec.f[AL_F_CHAIN_ID].p, 32);
		e->chain_id[32] = 0;
	}
	if (e->fmt == EMIT_RAW) {
		r = put_line(e, line, len);
	} else {
		char *s = convert(e->fmt, line, len, e->chain_id, &p);
		if (!s)
			return e->error = -ENOMEM;
		r = put_line(e, s, strlen(s));
		free(s);
	}
	if (r < 0)
		return r;
	if (e->tail && (r = tail_note(e->tail, line, len, &p)) < 0)
		return e->error = r;
	e->since_save++;
	return 0;
}
