/* SPDX-License-Identifier: MIT */
/*
 * emit_writer PATH VERSION [STATE SIGNING_KEY]: a token-shaped log for
 * tests/cli_emit.py. Writes, through the public API, one event for every
 * PKCS#11 function the OCSF mapping of docs/siem.md 8 names (and some it
 * does not), with slots, sessions, mechanisms, keys, second keys, named and
 * unnamed return values, all three outcomes, hostile bytes in strings (quotes,
 * backslashes, controls, U+0000, invalid UTF-8, bidirectional controls,
 * U+2028) and, in v2 (VERSION 2, with the keys auditlog-keygen made), the
 * caller-defined fields the ECS mapping of docs/siem.md 2.1 sorts out. Every
 * 9th event is synchronous. Exit 0, or 1 with a message; 2 for usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <auditlog.h>

#define S(x) (x), (sizeof(x) - 1)

static const char *const actions[] = {
	"C_Initialize", "C_GetSlotList", "C_GetTokenInfo", "C_InitToken", "C_OpenSession", "C_Login",
	"C_InitPIN", "C_SetPIN", "C_GenerateKey", "C_GenerateKeyPair", "C_CreateObject", "C_CopyObject",
	"C_SetAttributeValue", "C_GetAttributeValue", "C_FindObjectsInit", "C_FindObjects", "C_FindObjectsFinal",
	"C_SignInit", "C_Sign", "C_EncryptInit", "C_Encrypt", "C_Decrypt", "C_Digest", "C_GenerateRandom",
	"C_DeriveKey", "C_WrapKey", "C_UnwrapKey", "C_DestroyObject", "C_Logout", "C_CloseSession",
	"C_CloseAllSessions", "C_Finalize", "login", "app.export",
};

/* strings a SIEM pipeline must survive (lengths given: one holds U+0000) */
static const struct {
	const char *p;
	size_t n;
} hostile[] = {
	{S("plain detail")},
	{S("quote \" backslash \\ slash / tab \t newline \n cr \r")},
	{S("nul \0 inside, bell \a, escape \x1b[2J, del \x7f")},
	{S("invalid utf-8: \xff\xfe, cut \xc3, overlong \xc0\xaf, surrogate \xed\xa0\x80")},
	{S("bidi \xe2\x80\xae" "evil\xe2\x80\xac, line sep \xe2\x80\xa8, bom \xef\xbb\xbf, C1 \xc2\x85")},
	{S("unicode: \xc3\xa9\xe2\x82\xac\xf0\x9f\x94\x91 and a key")},
};

static int one(struct auditlog *log, unsigned version, unsigned i)
{
	const char *a = actions[i % (sizeof(actions) / sizeof(actions[0]))];
	const unsigned char id[] = {0x01, 0xa2, (unsigned char)i}, id2[] = {0xff, 0x00, (unsigned char)(i >> 1)};
	const char *h = hostile[i % 6].p;
	size_t hn = hostile[i % 6].n;
	char port_s[16];
	int port_n = snprintf(port_s, sizeof(port_s), "%u", 1000 + i);
	struct auditlog_event ev = {
		.flags = AUDITLOG_EV_SLOT | (i % 4 ? AUDITLOG_EV_RV : 0) | (i % 3 ? AUDITLOG_EV_SESSION : 0) |
			 (i % 5 == 1 ? AUDITLOG_EV_MECHANISM : 0),
		.outcome = i % 7 == 3 ? AUDITLOG_OUTCOME_FAILURE : i % 11 == 5 ? AUDITLOG_OUTCOME_UNKNOWN
										  : AUDITLOG_OUTCOME_SUCCESS,
		.rv = i % 7 == 3 ? 0xa0 /* CKR_PIN_INCORRECT */ : i % 11 == 5 ? 0x80000123ul : 0,
		.mechanism = 0x1041, /* CKM_ECDSA_SHA256 */
		.slot = i % 2,
		.session = 7 + i % 3,
		.action = a,
		.action_len = strlen(a),
		.actor = i % 6 == 2 ? NULL : i % 2 ? "user" : "so",
		.actor_len = i % 6 == 2 ? 0 : 4 - 2 * (i % 2 == 0),
		.detail = i % 8 == 7 ? NULL : h,
		.detail_len = i % 8 == 7 ? 0 : hn,
	};
	if (i % 4 != 1) {
		ev.key_label = hostile[(i + 3) % 6].p;
		ev.key_label_len = hostile[(i + 3) % 6].n;
		ev.key_id = id;
		ev.key_id_len = sizeof(id);
	}
	if (!strcmp(a, "C_DeriveKey") || !strcmp(a, "C_WrapKey") || !strcmp(a, "C_UnwrapKey")) {
		ev.flags |= AUDITLOG_EV_KEY2;
		ev.key2_label = "second key";
		ev.key2_label_len = 10;
		ev.key2_id = id2;
		ev.key2_id_len = sizeof(id2);
	}
	if (version < 2)
		return i % 9 == 0 ? auditlog_record_sync(log, &ev) : auditlog_record(log, &ev);
	struct auditlog_field f[] = {
		{.key = "source.ip", .kind = AUDITLOG_FIELD_STR, .str = "192.0.2.7", .str_len = 9},
		{.key = "destination.ip", .kind = AUDITLOG_FIELD_STR, .str = "not-an-ip", .str_len = 9},
		{.key = "client.ip", .kind = AUDITLOG_FIELD_STR, .str = "2001:db8::1", .str_len = 11},
		{.key = "source.port", .kind = AUDITLOG_FIELD_INT, .u = 1000 + i},
		{.key = "server.port", .kind = AUDITLOG_FIELD_STR, .str = port_s, .str_len = (size_t)port_n},
		{.key = "host.name", .kind = AUDITLOG_FIELD_INT, .u = i},
		{.key = "user.name", .kind = AUDITLOG_FIELD_STR, .str = "mallory", .str_len = 7},
		{.key = "event.action", .kind = AUDITLOG_FIELD_STR, .str = "forged", .str_len = 6},
		{.key = "a.b", .kind = AUDITLOG_FIELD_STR, .str = "dot", .str_len = 3},
		{.key = "a_b", .kind = AUDITLOG_FIELD_STR, .str = "underscore", .str_len = 10},
		{.key = "attempt", .kind = AUDITLOG_FIELD_INT, .u = i},
		{.key = "note.text", .kind = AUDITLOG_FIELD_STR, .str = h, .str_len = hn > 200 ? 200 : hn},
		{.key = "labels", .kind = AUDITLOG_FIELD_STR, .str = "x", .str_len = 1},
	};
	size_t nf = i % 3 == 0 ? 0 : sizeof(f) / sizeof(f[0]);
	return i % 9 == 0 ? auditlog_record_fields_sync(log, &ev, f, nf) : auditlog_record_fields(log, &ev, f, nf);
}

int main(int argc, char **argv)
{
	struct auditlog_config *cfg = NULL;
	struct auditlog *log = NULL;
	int r;

	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: emit_writer PATH VERSION [STATE SIGNING_KEY]\n");
		return 2;
	}
	unsigned version = (unsigned)atoi(argv[2]);
	if ((r = auditlog_config_new(&cfg)) < 0 || (r = auditlog_config_set_path(cfg, argv[1])) < 0 ||
	    (r = auditlog_config_set_format_version(cfg, version)) < 0 ||
	    (argc == 5 && (r = auditlog_config_set_sealing(cfg, argv[3], argv[4])) < 0) ||
	    (argc == 5 && (r = auditlog_config_set_checkpoint_interval(cfg, 20, 0)) < 0) ||
	    (r = auditlog_open(cfg, &log)) < 0) {
		fprintf(stderr, "emit_writer: %s: open: %s\n", argv[1], strerror(-r));
		auditlog_config_free(cfg);
		return 1;
	}
	auditlog_config_free(cfg);
	unsigned n = 2 * (unsigned)(sizeof(actions) / sizeof(actions[0]));
	for (unsigned i = 0; i < n; i++) {
		if ((r = one(log, version, i)) < 0) {
			fprintf(stderr, "emit_writer: record %u: %s\n", i, strerror(-r));
			auditlog_close(log);
			return 1;
		}
	}
	if ((r = auditlog_close(log)) < 0) {
		fprintf(stderr, "emit_writer: close: %s\n", strerror(-r));
		return 1;
	}
	return 0;
}
