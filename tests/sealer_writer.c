/* SPDX-License-Identifier: MIT */
/*
 * sealer_writer PATH SOCKET EVENTS PAUSE_MS [hold]
 *
 * A real v2 writer sealing through auditlog-sealer (the public API only):
 * opens PATH with format version 2 and auditlog_config_set_sealer_socket
 * (SOCKET), a checkpoint every 30 records; writes EVENTS events, every 5th
 * synchronous, sleeping PAUSE_MS after every 40 (past an epoch at Δ 1 s);
 * closes. "open: <error>" on stderr and exit 1 when the open is refused.
 *
 * With "hold": after the events it prints "ready" and waits for a line on
 * stdin (tests/sealer.sh kills the sealer meanwhile), then calls
 * auditlog_record_sync once with action "after-loss": prints
 * "after-loss: <error>" and exits 0 when it failed, exits 1 when it claimed
 * the record durable.
 *
 * With "die" (tests/sealer_attacks.py): queued records wait up to 1 s to
 * share a write (async coalescing); after the events and a flush it queues
 * (after 100 ms) 20 more with action "unsynced", prints "dying", and kills itself
 * (SIGKILL) before they can be written: only those may be lost.
 *
 * sealer_writer PATH SOCKET exclusive: auditlog_open answers -EINVAL with
 * both a sealer socket and in-process sealing, and with neither (v2).
 *
 * sealer_writer registry VERIFY_KEY REGISTRY LOG...: the public verifier API
 * with auditlog_verifier_add_registry (a second call must be -EINVAL):
 * prints "missing-chain N truncated N integrity N" and exits 0, or 1 when a
 * call failed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <auditlog.h>

static int one(struct auditlog *log, const char *action, unsigned long long i, int sync)
{
	struct auditlog_field f[] = {
		{.key = "attempt", .kind = AUDITLOG_FIELD_INT, .u = i},
	};
	struct auditlog_event ev = {
		.outcome = AUDITLOG_OUTCOME_SUCCESS,
		.action = action,
		.action_len = strlen(action),
		.actor = "sealer-test",
		.actor_len = 11,
	};
	return sync ? auditlog_record_fields_sync(log, &ev, f, 1) : auditlog_record_fields(log, &ev, f, 1);
}

static int registry_api(int argc, char **argv)
{
	struct auditlog_verifier *v = NULL;
	struct auditlog_vsummary s;
	char key[4096];
	FILE *f = fopen(argv[2], "r");
	size_t kn = f ? fread(key, 1, sizeof(key), f) : 0;
	int r;

	if (f)
		fclose(f);
	if ((r = auditlog_verifier_new(&v)) < 0 || (r = auditlog_verifier_add_verify_key(v, key, kn)) < 0 ||
	    (r = auditlog_verifier_add_registry(v, argv[3])) < 0)
		goto out;
	if (auditlog_verifier_add_registry(v, argv[3]) != -EINVAL) {
		fprintf(stderr, "a second registry was not refused\n");
		auditlog_verifier_free(v);
		return 1;
	}
	for (int i = 4; i < argc && r == 0; i++)
		r = auditlog_verifier_add_path(v, argv[i]);
	if (r == 0)
		r = auditlog_verifier_run(v, &s, sizeof(s));
	if (r == 0)
		printf("missing-chain %llu truncated %llu integrity %llu\n",
		       (unsigned long long)s.findings[AUDITLOG_V_MISSING_CHAIN],
		       (unsigned long long)s.findings[AUDITLOG_V_TRUNCATED],
		       (unsigned long long)s.integrity_findings);
out:
	auditlog_verifier_free(v);
	if (r < 0)
		fprintf(stderr, "registry: %s\n", strerror(-r));
	return r < 0;
}

int main(int argc, char **argv)
{
	struct auditlog_config *cfg = NULL;
	struct auditlog *log = NULL;
	unsigned long long n, pause_ms;
	char line[16];
	int r, hold, die;

	if (argc >= 4 && strcmp(argv[1], "registry") == 0)
		return registry_api(argc, argv);
	if (argc == 4 && strcmp(argv[3], "exclusive") == 0) {
		int both, neither;
		auditlog_config_new(&cfg);
		auditlog_config_set_path(cfg, argv[1]);
		auditlog_config_set_format_version(cfg, 2);
		neither = auditlog_open(cfg, &log);
		auditlog_config_set_sealer_socket(cfg, argv[2]);
		auditlog_config_set_sealing(cfg, "state", "key");
		both = auditlog_open(cfg, &log);
		auditlog_config_free(cfg);
		if (neither != -EINVAL || both != -EINVAL) {
			fprintf(stderr, "exclusive: neither %d, both %d, want -EINVAL\n", neither, both);
			return 1;
		}
		return 0;
	}
	die = argc == 6 && strcmp(argv[5], "die") == 0;
	if (argc != 5 && !(argc == 6 && strcmp(argv[5], "hold") == 0) && !die) {
		fprintf(stderr, "usage: sealer_writer PATH SOCKET EVENTS PAUSE_MS [hold|die]\n");
		return 2;
	}
	hold = argc == 6 && !die;
	n = strtoull(argv[3], NULL, 10);
	pause_ms = strtoull(argv[4], NULL, 10);
	if ((r = auditlog_config_new(&cfg)) < 0 || (r = auditlog_config_set_path(cfg, argv[1])) < 0 ||
	    (r = auditlog_config_set_format_version(cfg, 2)) < 0 ||
	    (r = auditlog_config_set_sealer_socket(cfg, argv[2])) < 0 ||
	    (r = auditlog_config_set_checkpoint_interval(cfg, 30, 0)) < 0 ||
	    (die && (r = auditlog_config_set_async_coalesce_us(cfg, 1000000)) < 0) ||
	    (r = auditlog_open(cfg, &log)) < 0) {
		fprintf(stderr, "open: %s\n", strerror(-r));
		auditlog_config_free(cfg);
		return 1;
	}
	auditlog_config_free(cfg);
	for (unsigned long long i = 0; i < n; i++) {
		r = one(log, "write", i, i % 5 == 0);
		if (r < 0) {
			fprintf(stderr, "record %llu: %s\n", i, strerror(-r));
			auditlog_close(log);
			return 1;
		}
		if (i % 40 == 39) {
			struct timespec ts = {(time_t)(pause_ms / 1000), (long)(pause_ms % 1000) * 1000000};
			if ((r = auditlog_flush(log)) < 0) {
				fprintf(stderr, "flush: %s\n", strerror(-r));
				auditlog_close(log);
				return 1;
			}
			nanosleep(&ts, NULL);
		}
	}
	if (die) {
		if ((r = auditlog_flush(log)) < 0) {
			fprintf(stderr, "flush: %s\n", strerror(-r));
			return 1;
		}
		/* the worker settles after the flush (its bookkeeping of that
		 * waiter), so the next records start a fresh 1 s hold */
		nanosleep(&(struct timespec){0, 100000000}, NULL);
		for (int i = 0; i < 20; i++)
			if (one(log, "unsynced", n + (unsigned)i, 0) < 0)
				return 1;
		printf("dying\n");
		fflush(stdout);
		raise(SIGKILL);
		return 1;
	}
	if (hold) {
		if ((r = auditlog_flush(log)) < 0) {
			fprintf(stderr, "flush: %s\n", strerror(-r));
			return 1;
		}
		printf("ready\n");
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
		r = one(log, "after-loss", n, 1);
		if (r == 0) {
			fprintf(stderr, "after-loss: record_sync claimed durable with no sealer\n");
			return 1;
		}
		printf("after-loss: %s\n", strerror(-r));
		r = auditlog_close(log);
		printf("close: %s\n", r < 0 ? strerror(-r) : "ok");
		return 0;
	}
	r = auditlog_close(log);
	if (r < 0) {
		fprintf(stderr, "close: %s\n", strerror(-r));
		return 1;
	}
	return 0;
}
