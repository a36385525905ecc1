/* SPDX-License-Identifier: MIT */
/*
 * A login service's audit trail: every authentication attempt is one event
 * with caller-defined fields (user.name, source.ip, auth.method, attempt),
 * written to a sealed, checkpointed log (format v2, docs/format.md Part II).
 * A successful login and a lockout are recorded with _sync: the service
 * grants access (or locks the account) only once the record is on disk. A
 * failed attempt is recorded asynchronously.
 *
 * The attempts come from standard input, one per line:
 *     <user> <source ip> <method> ok|bad
 * e.g.
 *     printf 'alice 192.0.2.7 password bad\nalice 192.0.2.7 password ok\n' |
 *         login-service audit.log state.key signing.key
 *
 * The sealing state and the checkpoint signing key are files made by
 * auditlog-keygen (docs/format.md 17); their paths come from the command line
 * or from $AUDITLOG_SEAL_STATE and $AUDITLOG_SIGNING_KEY, never the keys
 * themselves. In-process sealing is for single-user deployments: this
 * process holds the keys (DESIGN.md "Key custody").
 *
 * Build against an installed libauditlog with
 *   cc login-service.c $(pkg-config --cflags --libs auditlog)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <auditlog.h>

#define MAX_FAILURES 3 /* consecutive failures before a lockout */

/* Consecutive failures per user: a tiny table is enough for an example. */
struct user {
	char name[64];
	unsigned failures;
	int locked;
};

static struct user *find_user(struct user *users, size_t *n, size_t cap, const char *name)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(users[i].name, name) == 0)
			return &users[i];
	if (*n == cap || strlen(name) >= sizeof(users[0].name))
		return NULL;
	snprintf(users[*n].name, sizeof(users[0].name), "%s", name);
	users[*n].failures = 0;
	users[*n].locked = 0;
	return &users[(*n)++];
}

static struct auditlog_field str_field(const char *key, const char *value)
{
	return (struct auditlog_field){
		.key = key, .kind = AUDITLOG_FIELD_STR, .str = value, .str_len = strlen(value)};
}

/* One attempt: returns 0 when it was recorded as the service needs, or the
 * -errno of the record call (then the service must not grant access). */
static int record_attempt(struct auditlog *log, struct user *u, const char *ip,
			  const char *method, int ok)
{
	const char *action = "auth.login";
	struct auditlog_event ev = {
		.outcome = ok ? AUDITLOG_OUTCOME_SUCCESS : AUDITLOG_OUTCOME_FAILURE,
		.actor = "login-service",
		.actor_len = strlen("login-service"),
	};
	struct auditlog_field f[] = {
		str_field("user.name", u->name),
		str_field("source.ip", ip),
		str_field("auth.method", method),
		{.key = "attempt", .kind = AUDITLOG_FIELD_INT, .u = u->failures + 1},
	};
	size_t n = sizeof(f) / sizeof(f[0]);

	if (u->locked) { /* refused whatever the password: still an attempt */
		ev.outcome = AUDITLOG_OUTCOME_FAILURE;
		ev.detail = "account locked";
		ev.detail_len = strlen(ev.detail);
	}
	ev.action = action;
	ev.action_len = strlen(action);
	if (ok && !u->locked) {
		/* access is granted only after this record is durable */
		u->failures = 0;
		return auditlog_record_fields_sync(log, &ev, f, n);
	}
	int r = auditlog_record_fields(log, &ev, f, n);
	if (r < 0 || u->locked)
		return r;
	if (++u->failures < MAX_FAILURES)
		return 0;
	/* the lockout must be on disk before the service acts on it */
	u->locked = 1;
	ev.action = "auth.lockout";
	ev.action_len = strlen(ev.action);
	ev.detail = "too many failed attempts";
	ev.detail_len = strlen(ev.detail);
	return auditlog_record_fields_sync(log, &ev, f, n);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "audit.log";
	const char *state = argc > 2 ? argv[2] : getenv("AUDITLOG_SEAL_STATE");
	const char *signing = argc > 3 ? argv[3] : getenv("AUDITLOG_SIGNING_KEY");
	struct auditlog_config *cfg;
	struct auditlog *log;
	struct user users[64];
	size_t nusers = 0;
	char line[512];
	int r, failed = 0;

	if (!state || !signing) {
		fprintf(stderr, "usage: %s LOG [SEAL_STATE SIGNING_KEY] < attempts\n"
				"(or set AUDITLOG_SEAL_STATE and AUDITLOG_SIGNING_KEY)\n",
			argv[0]);
		return 2;
	}
	if ((r = auditlog_config_new(&cfg)) < 0 || (r = auditlog_config_set_path(cfg, path)) < 0 ||
	    (r = auditlog_config_set_format_version(cfg, 2)) < 0 ||
	    (r = auditlog_config_set_sealing(cfg, state, signing)) < 0) {
		fprintf(stderr, "config: %s\n", strerror(-r));
		auditlog_config_free(cfg);
		return 1;
	}
	r = auditlog_open(cfg, &log);
	auditlog_config_free(cfg);
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(-r));
		return 1;
	}

	while (fgets(line, sizeof(line), stdin)) {
		char user[64], ip[64], method[32], result[8];
		if (sscanf(line, "%63s %63s %31s %7s", user, ip, method, result) != 4) {
			fprintf(stderr, "skipped: %s", line);
			continue;
		}
		struct user *u = find_user(users, &nusers, sizeof(users) / sizeof(users[0]), user);
		if (!u) {
			fprintf(stderr, "too many users, skipped: %s", line);
			continue;
		}
		int ok = strcmp(result, "ok") == 0;
		r = record_attempt(log, u, ip, method, ok);
		if (r < 0) {
			/* no record, no access: fail closed */
			fprintf(stderr, "%s from %s: not recorded (%s), access denied\n", user, ip,
				strerror(-r));
			failed = 1;
			continue;
		}
		printf("%s from %s: %s\n", user, ip,
		       u->locked ? "locked" : ok ? "access granted" : "denied");
	}

	r = auditlog_close(log); /* drains and syncs the asynchronous records */
	if (r < 0) {
		fprintf(stderr, "close: %s\n", strerror(-r));
		failed = 1;
	}
	return failed;
}
