/* SPDX-License-Identifier: MIT */
/*
 * The configuration file (docs/token.md): lines of `key = value`, `#`
 * comments, blank lines. Unknown keys, repeated keys and bad values are
 * errors naming the file and the line; nothing is silently ignored.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* chosen from p11-bench runs (docs/benchmarks.md) */
#define TOK_AUDIT_COALESCE_US 5000 /* docs/benchmarks.md, 2026-12-04: 1.1x raw on ECDSA verify */
/* libauditlog's checkpoint defaults (auditlog_config_set_checkpoint_interval) */
#define TOK_CKPT_RECORDS_DEFAULT 100000
#define TOK_CKPT_MS_DEFAULT 1000

static void say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static bool parse_u64(const char *v, uint64_t lo, uint64_t hi, uint64_t *ret)
{
	char *end;
	unsigned long long x;

	if (!isdigit((unsigned char)v[0]))
		return false;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || *end || x < lo || x > hi)
		return false;
	*ret = x;
	return true;
}

static bool parse_bool(const char *v, bool *ret)
{
	if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "on") || !strcmp(v, "1"))
		*ret = true;
	else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "off") || !strcmp(v, "0"))
		*ret = false;
	else
		return false;
	return true;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

enum key {
	K_TOKEN_DIR, K_AUDIT_DIR, K_AUDIT_ENABLED, K_AUDIT_SYNC, K_AUDIT_FAIL_CLOSED,
	K_AUDIT_VERIFY, K_AUDIT_FORMAT, K_AUDIT_QUEUE, K_AUDIT_ROTATE_BYTES, K_AUDIT_ROTATE_AGE,
	K_AUDIT_ENOSPC, K_AUDIT_COALESCE, K_PBKDF2, K_MAX_PIN_FAILURES, K_SLOTS, K_AUDIT_BACKEND,
	K_AUDIT_QUEUE_FULL, K_RSA_MIN_BITS, K_AUDIT_SEAL_STATE, K_AUDIT_SIGNING_KEY,
	K_AUDIT_CKPT_RECORDS, K_AUDIT_CKPT_MS, K_AUDIT_SEALER_SOCKET, K_KEYGEN_AHEAD,
	K_AUDIT_DROP_BEHIND, K_AUDIT_WORKER_CPUS, K__MAX
};

static const char *const key_names[K__MAX] = {
	[K_TOKEN_DIR] = "token_dir",
	[K_AUDIT_DIR] = "audit_dir",
	[K_AUDIT_ENABLED] = "audit_enabled",
	[K_AUDIT_SYNC] = "audit_sync",
	[K_AUDIT_FAIL_CLOSED] = "audit_fail_closed",
	[K_AUDIT_VERIFY] = "audit_verify",
	[K_AUDIT_FORMAT] = "audit_format_version",
	[K_AUDIT_QUEUE] = "audit_queue_capacity",
	[K_AUDIT_ROTATE_BYTES] = "audit_rotate_bytes",
	[K_AUDIT_ROTATE_AGE] = "audit_rotate_age_s",
	[K_AUDIT_ENOSPC] = "audit_enospc_deadline_ms",
	[K_AUDIT_COALESCE] = "audit_async_coalesce_us",
	[K_PBKDF2] = "pbkdf2_iterations",
	[K_MAX_PIN_FAILURES] = "max_pin_failures",
	[K_SLOTS] = "slots",
	[K_AUDIT_BACKEND] = "audit_backend",
	[K_AUDIT_QUEUE_FULL] = "audit_queue_full",
	[K_RSA_MIN_BITS] = "rsa_min_bits",
	[K_AUDIT_SEAL_STATE] = "audit_seal_state",
	[K_AUDIT_SIGNING_KEY] = "audit_signing_key",
	[K_AUDIT_CKPT_RECORDS] = "audit_checkpoint_records",
	[K_AUDIT_CKPT_MS] = "audit_checkpoint_ms",
	[K_AUDIT_SEALER_SOCKET] = "audit_sealer_socket",
	[K_KEYGEN_AHEAD] = "keygen_ahead",
	[K_AUDIT_DROP_BEHIND] = "audit_drop_behind_bytes",
	[K_AUDIT_WORKER_CPUS] = "audit_worker_cpus",
};

/* An absolute path into *dst (relative ones would depend on the caller's cwd). */
static bool set_path(char **dst, const char *v)
{
	if (v[0] != '/')
		return false;
	free(*dst);
	*dst = strdup(v);
	return *dst != NULL;
}

static bool set_key(struct tok_config *c, enum key k, const char *v)
{
	uint64_t u;

	switch (k) {
	case K_TOKEN_DIR:
		return set_path(&c->token_dir, v);
	case K_AUDIT_DIR:
		return set_path(&c->audit_dir, v);
	case K_AUDIT_SEAL_STATE:
		return set_path(&c->audit_seal_state, v);
	case K_AUDIT_SIGNING_KEY:
		return set_path(&c->audit_signing_key, v);
	case K_AUDIT_SEALER_SOCKET:
		return set_path(&c->audit_sealer_socket, v);
	case K_AUDIT_CKPT_RECORDS:
		/* the library's bound (auditlog_config_set_checkpoint_interval) */
		if (!parse_u64(v, 0, INT32_MAX, &c->audit_checkpoint_records))
			return false;
		c->audit_checkpoint_set = true;
		return true;
	case K_AUDIT_CKPT_MS:
		if (!parse_u64(v, 0, UINT64_C(1) << 32, &c->audit_checkpoint_ms))
			return false;
		c->audit_checkpoint_set = true;
		return true;
	case K_AUDIT_ENABLED:
		return parse_bool(v, &c->audit_enabled);
	case K_AUDIT_FAIL_CLOSED:
		return parse_bool(v, &c->audit_fail_closed);
	case K_AUDIT_SYNC:
		if (!strcmp(v, "sensitive"))
			c->audit_sync = TOK_SYNC_SENSITIVE;
		else if (!strcmp(v, "all"))
			c->audit_sync = TOK_SYNC_ALL;
		else if (!strcmp(v, "none"))
			c->audit_sync = TOK_SYNC_NONE;
		else
			return false;
		return true;
	case K_AUDIT_VERIFY:
		if (!strcmp(v, "tail"))
			c->audit_verify = TOK_VERIFY_TAIL;
		else if (!strcmp(v, "full"))
			c->audit_verify = TOK_VERIFY_FULL;
		else
			return false;
		return true;
	case K_AUDIT_FORMAT:
		if (!parse_u64(v, 0, 2, &u))
			return false;
		c->audit_format_version = (unsigned)u;
		return true;
	case K_AUDIT_QUEUE:
		return parse_u64(v, 64, 1u << 24, &c->audit_queue_capacity);
	case K_AUDIT_ROTATE_BYTES:
		return parse_u64(v, 0, UINT64_MAX, &c->audit_rotate_bytes);
	case K_AUDIT_ROTATE_AGE:
		return parse_u64(v, 0, UINT64_MAX, &c->audit_rotate_age_s);
	case K_AUDIT_ENOSPC:
		return parse_u64(v, 0, UINT64_MAX, &c->audit_enospc_deadline_ms);
	case K_AUDIT_DROP_BEHIND:
		/* libauditlog's bound: 0 (off) or at least 1 MiB */
		if (!parse_u64(v, 0, UINT64_MAX, &u) || (u != 0 && u < AUDITLOG_DROP_BEHIND_MIN))
			return false;
		c->audit_drop_behind_bytes = u;
		c->audit_drop_behind_set = true;
		return true;
	case K_AUDIT_WORKER_CPUS: {
		/* libauditlog's own check of the list, here: a bad one is the
		 * configuration's error, said at C_Initialize */
		struct auditlog_config *probe = NULL;
		bool ok = auditlog_config_new(&probe) == 0 &&
			  auditlog_config_set_worker_cpus(probe, v) == 0;
		auditlog_config_free(probe);
		if (!ok)
			return false;
		free(c->audit_worker_cpus);
		return (c->audit_worker_cpus = strdup(v)) != NULL;
	}
	case K_AUDIT_COALESCE:
		return parse_u64(v, 0, AUDITLOG_ASYNC_COALESCE_MAX_US, &c->audit_async_coalesce_us);
	case K_PBKDF2:
		return parse_u64(v, 1000, 100000000, &c->pbkdf2_iterations);
	case K_MAX_PIN_FAILURES:
		return parse_u64(v, 1, 1000, &c->max_pin_failures);
	case K_SLOTS:
		return parse_u64(v, 1, TOK_MAX_SLOTS, &c->slots);
	case K_AUDIT_BACKEND:
		if (!strcmp(v, "auto"))
			c->audit_backend = AUDITLOG_BACKEND_AUTO;
		else if (!strcmp(v, "io_uring"))
			c->audit_backend = AUDITLOG_BACKEND_IO_URING;
		else if (!strcmp(v, "pwrite"))
			c->audit_backend = AUDITLOG_BACKEND_PWRITE;
		else
			return false;
		return true;
	case K_AUDIT_QUEUE_FULL:
		if (!strcmp(v, "block"))
			c->audit_queue_eagain = false;
		else if (!strcmp(v, "fail"))
			c->audit_queue_eagain = true;
		else
			return false;
		return true;
	case K_RSA_MIN_BITS:
		return parse_u64(v, 1024, 4096, &c->rsa_min_bits);
	case K_KEYGEN_AHEAD:
		return parse_bool(v, &c->keygen_ahead);
	default:
		return false;
	}
}

static const char *const key_hint[K__MAX] = {
	[K_TOKEN_DIR] = "an absolute path",
	[K_AUDIT_DIR] = "an absolute path",
	[K_AUDIT_ENABLED] = "true or false",
	[K_AUDIT_SYNC] = "sensitive, all or none",
	[K_AUDIT_FAIL_CLOSED] = "true or false",
	[K_AUDIT_VERIFY] = "tail or full",
	[K_AUDIT_FORMAT] = "0, 1 or 2",
	[K_AUDIT_QUEUE] = "64..16777216",
	[K_AUDIT_ROTATE_BYTES] = "bytes, 0 = never",
	[K_AUDIT_ROTATE_AGE] = "seconds, 0 = never",
	[K_AUDIT_ENOSPC] = "milliseconds",
	[K_AUDIT_COALESCE] = "microseconds, 0..1000000 (0 = off)",
	[K_PBKDF2] = "1000..100000000",
	[K_MAX_PIN_FAILURES] = "1..1000",
	[K_SLOTS] = "1..64",
	[K_AUDIT_BACKEND] = "auto, io_uring or pwrite",
	[K_AUDIT_QUEUE_FULL] = "block or fail",
	[K_RSA_MIN_BITS] = "1024..4096",
	[K_AUDIT_SEAL_STATE] = "an absolute path",
	[K_AUDIT_SIGNING_KEY] = "an absolute path",
	[K_AUDIT_SEALER_SOCKET] = "an absolute path",
	[K_AUDIT_CKPT_RECORDS] = "records, 0..2147483647 (0 = by time only)",
	[K_AUDIT_CKPT_MS] = "milliseconds, 0..4294967296 (0 = by count only)",
	[K_KEYGEN_AHEAD] = "true or false",
	[K_AUDIT_DROP_BEHIND] = "bytes, 0 (off) or at least 1048576",
};

CK_RV tok_config_load(struct tok_config *c, char *err, size_t errlen)
{
	const char *path = getenv("SOFTTOKEN_CONF");
	bool seen[K__MAX] = { false };
	char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0;
	CK_RV rv = CKR_ARGUMENTS_BAD;
	FILE *f;

	*c = (struct tok_config){
		.audit_enabled = true,
		.audit_sync = TOK_SYNC_SENSITIVE,
		.audit_fail_closed = true,
		.audit_verify = TOK_VERIFY_TAIL,
		.audit_format_version = 1,
		/* 1.5 MiB of slots, populated in every process's C_Initialize:
		 * 16,384 cost 4-10 ms more there and 4.5 MiB of memory, for
		 * records that leave the queue within a coalescing window of
		 * at most 128 (docs/token.md) */
		.audit_queue_capacity = 4096,
		/* async records share a commit within this window (docs/token.md) */
		.audit_async_coalesce_us = TOK_AUDIT_COALESCE_US,
		.pbkdf2_iterations = 600000,
		.max_pin_failures = 10,
		.slots = 4,
		.audit_backend = AUDITLOG_BACKEND_AUTO,
		.rsa_min_bits = 2048,
		/* one EC key pair per curve made ahead (docs/token.md) */
		.keygen_ahead = true,
	};
	if (!path || !*path)
		path = TOK_DEFAULT_CONF;
	c->path = strdup(path);
	if (!c->path)
		return CKR_HOST_MEMORY;
	f = fopen(path, "re");
	if (!f) {
		say(err, errlen, "cannot read the configuration %s: %s (set SOFTTOKEN_CONF)", path,
		    strerror(errno));
		rv = CKR_GENERAL_ERROR;
		goto fail;
	}
	while (getline(&line, &cap, f) >= 0) {
		char *s, *eq, *k, *v;
		int key;

		lineno++;
		if (strlen(line) > 4096) {
			say(err, errlen, "%s:%u: line too long", path, lineno);
			goto fail;
		}
		s = strchr(line, '#');
		if (s)
			*s = '\0';
		s = trim(line);
		if (!*s)
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			say(err, errlen, "%s:%u: expected `key = value`", path, lineno);
			goto fail;
		}
		*eq = '\0';
		k = trim(s);
		v = trim(eq + 1);
		for (key = 0; key < K__MAX; key++)
			if (!strcmp(k, key_names[key]))
				break;
		if (key == K__MAX) {
			say(err, errlen, "%s:%u: unknown key '%.64s'", path, lineno, k);
			goto fail;
		}
		if (seen[key]) {
			say(err, errlen, "%s:%u: '%s' given twice", path, lineno, k);
			goto fail;
		}
		seen[key] = true;
		if (!set_key(c, (enum key)key, v)) {
			if (errno == ENOMEM) {
				rv = CKR_HOST_MEMORY;
				goto fail;
			}
			say(err, errlen, "%s:%u: bad value '%.64s' for %s (want %s)", path, lineno, v, k,
			    key_hint[key] ? key_hint[key] : "another value");
			goto fail;
		}
	}
	if (ferror(f)) {
		say(err, errlen, "cannot read the configuration %s: %s", path, strerror(errno));
		rv = CKR_GENERAL_ERROR;
		goto fail;
	}
	if (!c->token_dir) {
		say(err, errlen, "%s: token_dir is required", path);
		goto fail;
	}
	/* Format v2 (docs/token.md "Format v2"): the sealer's socket, or both
	 * in-process key files, never both modes; only with v2, so that no
	 * setting is silently ignored. */
	if (c->audit_sealer_socket && (c->audit_seal_state || c->audit_signing_key)) {
		say(err, errlen,
		    "%s: audit_sealer_socket and %s are both set: give the sealer's socket (auditlog-sealer holds "
		    "the keys) or audit_seal_state and audit_signing_key (in-process sealing), not both",
		    path, c->audit_seal_state ? "audit_seal_state" : "audit_signing_key");
		goto fail;
	}
	if (c->audit_format_version == 2 && !c->audit_sealer_socket &&
	    (!c->audit_seal_state || !c->audit_signing_key)) {
		say(err, errlen,
		    "%s: audit_format_version = 2 needs %s (the %s file of auditlog-keygen), or "
		    "audit_sealer_socket instead of both key files (auditlog-sealer)",
		    path, !c->audit_seal_state ? "audit_seal_state" : "audit_signing_key",
		    !c->audit_seal_state ? "sealing-state" : "signing-key");
		goto fail;
	}
	if (c->audit_format_version != 2 && (c->audit_seal_state || c->audit_signing_key ||
					      c->audit_sealer_socket || c->audit_checkpoint_set)) {
		say(err, errlen, "%s: %s is set but audit_format_version is %u (it applies to 2 only)", path,
		    c->audit_seal_state ? "audit_seal_state"
		    : c->audit_signing_key ? "audit_signing_key"
		    : c->audit_sealer_socket ? "audit_sealer_socket"
		    : seen[K_AUDIT_CKPT_RECORDS] ? "audit_checkpoint_records" : "audit_checkpoint_ms",
		    c->audit_format_version);
		goto fail;
	}
	if (c->audit_checkpoint_set) {
		/* the library's defaults for the one not given */
		if (!seen[K_AUDIT_CKPT_RECORDS])
			c->audit_checkpoint_records = TOK_CKPT_RECORDS_DEFAULT;
		if (!seen[K_AUDIT_CKPT_MS])
			c->audit_checkpoint_ms = TOK_CKPT_MS_DEFAULT;
		if (!c->audit_checkpoint_records && !c->audit_checkpoint_ms) {
			say(err, errlen, "%s: audit_checkpoint_records and audit_checkpoint_ms may not both be 0",
			    path);
			goto fail;
		}
	}
	if (!c->audit_dir && asprintf(&c->audit_dir, "%s/audit", c->token_dir) < 0) {
		c->audit_dir = NULL;
		rv = CKR_HOST_MEMORY;
		goto fail;
	}
	free(line);
	fclose(f);
	return CKR_OK;
fail:
	free(line);
	if (f)
		fclose(f);
	tok_config_free(c);
	return rv;
}

void tok_config_free(struct tok_config *c)
{
	free(c->path);
	free(c->token_dir);
	free(c->audit_dir);
	free(c->audit_seal_state);
	free(c->audit_signing_key);
	free(c->audit_sealer_socket);
	free(c->audit_worker_cpus);
	c->path = c->token_dir = c->audit_dir = NULL;
	c->audit_seal_state = c->audit_signing_key = c->audit_sealer_socket = NULL;
	c->audit_worker_cpus = NULL;
}

/* Here rather than in module.c: softtoken-util shares this file. */
void tok_pad(unsigned char *dst, size_t n, const char *src)
{
	size_t l = src ? strlen(src) : 0;

	memset(dst, ' ', n);
	memcpy(dst, src, l < n ? l : n);
}
