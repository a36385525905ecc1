/* SPDX-License-Identifier: MIT */
/*
 * The smallest useful program: open a log, record an event, record one that
 * must be durable before we go on, close. Build against an installed
 * libauditlog with
 *   cc minimal.c $(pkg-config --cflags --libs auditlog)
 * or with CMake: find_package(auditlog) and link auditlog::auditlog.
 */
#include <stdio.h>
#include <string.h>

#include <auditlog.h>

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "audit.log";
	struct auditlog_config *cfg;
	struct auditlog *log;
	int r;

	if ((r = auditlog_config_new(&cfg)) < 0 || (r = auditlog_config_set_path(cfg, path)) < 0) {
		fprintf(stderr, "config: %s\n", strerror(-r));
		return 1;
	}
	r = auditlog_open(cfg, &log);
	auditlog_config_free(cfg);
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(-r));
		return 1;
	}

	struct auditlog_event ev = {
		.flags = AUDITLOG_EV_RV | AUDITLOG_EV_SLOT | AUDITLOG_EV_SESSION,
		.outcome = AUDITLOG_OUTCOME_SUCCESS,
		.rv = 0, /* CKR_OK */
		.slot = 0,
		.session = 1,
		.action = "C_Login",
		.action_len = strlen("C_Login"),
		.actor = "user",
		.actor_len = 4,
	};
	/* a login must be on disk before the caller is told it succeeded */
	r = auditlog_record_sync(log, &ev);
	if (r < 0)
		fprintf(stderr, "record_sync: %s\n", strerror(-r));

	ev.action = "C_Logout";
	ev.action_len = strlen("C_Logout");
	if (r == 0 && (r = auditlog_record(log, &ev)) < 0)
		fprintf(stderr, "record: %s\n", strerror(-r));

	int rc = auditlog_close(log); /* drains and syncs the C_Logout record */
	if (rc < 0)
		fprintf(stderr, "close: %s\n", strerror(-rc));
	return r < 0 || rc < 0;
}
