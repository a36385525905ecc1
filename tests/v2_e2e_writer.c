/* SPDX-License-Identifier: MIT */
/*
 * v2_e2e_writer PATH STATE SIGNING_KEY EVENTS ROTATE_BYTES PAUSE_MS [crash | threads=N]
 *
 * One life of a real v2 writer for tests/v2_e2e.py (the public API only, the
 * real clocks): opens PATH with format version 2, the sealing state and the
 * signing key auditlog-keygen made, a checkpoint every 40 records, rotation
 * at ROTATE_BYTES (0: none). Writes EVENTS login events with caller fields
 * (user.name, source.ip, attempt), every 7th synchronous; after every 25th it
 * flushes and sleeps PAUSE_MS (longer than Δ: the writer's idle seals and
 * epoch-split batches). Then closes (a checkpoint and a `close` seal).
 *
 * With "crash": never closes; writes async events in a loop, flushing every
 * 100 and printing "flushed N" on stdout after the first few flushes, until
 * it is killed (tests/v2_e2e.py sends SIGKILL mid-batch).
 *
 * With "threads=N" (tests/siem_rsyslog.sh): N threads share the log, each
 * writing EVENTS events as above (its flush and pause every 25 its own).
 * Exit 0, or 1 with a message; 2 for usage.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <auditlog.h>

static unsigned long long num(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end) {
		fprintf(stderr, "v2_e2e_writer: not a number: %s\n", s);
		exit(2);
	}
	return v;
}

static int one(struct auditlog *log, unsigned long long i, int sync)
{
	static const char *users[] = {"alice", "bob", "carol"};
	const char *user = users[i % 3];
	char ip[32];
	int iplen = snprintf(ip, sizeof(ip), "192.0.2.%llu", i % 250);
	struct auditlog_field f[] = {
		{.key = "user.name", .kind = AUDITLOG_FIELD_STR, .str = user, .str_len = strlen(user)},
		{.key = "source.ip", .kind = AUDITLOG_FIELD_STR, .str = ip, .str_len = (size_t)iplen},
		{.key = "attempt", .kind = AUDITLOG_FIELD_INT, .u = i},
	};
	struct auditlog_event ev = {
		.outcome = i % 5 ? AUDITLOG_OUTCOME_SUCCESS : AUDITLOG_OUTCOME_FAILURE,
		.action = "login",
		.action_len = 5,
		.actor = "sshd",
		.actor_len = 4,
	};
	return sync ? auditlog_record_fields_sync(log, &ev, f, 3) : auditlog_record_fields(log, &ev, f, 3);
}

struct thr {
	struct auditlog *log;
	unsigned long long n, pause_ms, base;
	int r;
};

/* one writer thread of threads=N: events base, base + 1, ... */
static void *thread_main(void *arg)
{
	struct thr *t = arg;

	for (unsigned long long i = 0; i < t->n; i++) {
		if ((t->r = one(t->log, t->base + i, i % 7 == 0)) < 0)
			return NULL;
		if (i % 25 == 24) {
			struct timespec ts = {(time_t)(t->pause_ms / 1000), (long)(t->pause_ms % 1000) * 1000000};
			if ((t->r = auditlog_flush(t->log)) < 0)
				return NULL;
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static int threaded(struct auditlog *log, unsigned nt, unsigned long long n, unsigned long long pause_ms)
{
	pthread_t th[64];
	struct thr t[64];
	unsigned k;
	int r = 0;

	for (k = 0; k < nt; k++) {
		t[k] = (struct thr){log, n, pause_ms, (unsigned long long)k * n, 0};
		if (pthread_create(&th[k], NULL, thread_main, &t[k]) != 0) {
			fprintf(stderr, "v2_e2e_writer: cannot start thread %u\n", k);
			r = -EAGAIN;
			break;
		}
	}
	while (k-- > 0) {
		pthread_join(th[k], NULL);
		if (t[k].r < 0 && r == 0)
			r = t[k].r;
	}
	return r;
}

int main(int argc, char **argv)
{
	struct auditlog_config *cfg = NULL;
	struct auditlog *log = NULL;
	int r, crash;

	unsigned nthreads = 0;
	if (argc == 8 && strncmp(argv[7], "threads=", 8) == 0) {
		unsigned long long t = num(argv[7] + 8);
		if (t < 1 || t > 64) {
			fprintf(stderr, "v2_e2e_writer: threads=1..64\n");
			return 2;
		}
		nthreads = (unsigned)t;
	} else if (argc != 7 && !(argc == 8 && strcmp(argv[7], "crash") == 0)) {
		fprintf(stderr, "usage: v2_e2e_writer PATH STATE SIGNING_KEY EVENTS ROTATE_BYTES PAUSE_MS [crash | threads=N]\n");
		return 2;
	}
	crash = argc == 8 && !nthreads;
	unsigned long long n = num(argv[4]), rotate = num(argv[5]), pause_ms = num(argv[6]);
	if ((r = auditlog_config_new(&cfg)) < 0 || (r = auditlog_config_set_path(cfg, argv[1])) < 0 ||
	    (r = auditlog_config_set_format_version(cfg, 2)) < 0 ||
	    (r = auditlog_config_set_sealing(cfg, argv[2], argv[3])) < 0 ||
	    (r = auditlog_config_set_checkpoint_interval(cfg, 40, 0)) < 0 ||
	    (r = auditlog_config_set_rotate_bytes(cfg, rotate)) < 0 || (r = auditlog_open(cfg, &log)) < 0) {
		fprintf(stderr, "v2_e2e_writer: %s: open: %s\n", argv[1], strerror(-r));
		auditlog_config_free(cfg);
		return 1;
	}
	auditlog_config_free(cfg);
	if (nthreads) {
		r = threaded(log, nthreads, n, pause_ms);
		if (r < 0)
			fprintf(stderr, "v2_e2e_writer: a thread: %s\n", strerror(-r));
		int c = auditlog_close(log);
		if (c < 0)
			fprintf(stderr, "v2_e2e_writer: close: %s\n", strerror(-c));
		return r < 0 || c < 0 ? 1 : 0;
	}
	for (unsigned long long i = 0; crash || i < n; i++) {
		r = one(log, i, !crash && i % 7 == 0);
		if (r < 0) {
			fprintf(stderr, "v2_e2e_writer: record %llu: %s\n", i, strerror(-r));
			auditlog_close(log);
			return 1;
		}
		if (crash && i % 100 == 99) {
			if ((r = auditlog_flush(log)) < 0) {
				fprintf(stderr, "v2_e2e_writer: flush: %s\n", strerror(-r));
				return 1;
			}
			if (i < 1000) {
				printf("flushed %llu\n", i + 1);
				fflush(stdout);
			}
		}
		if (!crash && i % 25 == 24) {
			struct timespec ts = {(time_t)(pause_ms / 1000), (long)(pause_ms % 1000) * 1000000};
			if ((r = auditlog_flush(log)) < 0) {
				fprintf(stderr, "v2_e2e_writer: flush: %s\n", strerror(-r));
				auditlog_close(log);
				return 1;
			}
			nanosleep(&ts, NULL);
		}
	}
	r = auditlog_close(log);
	if (r < 0) {
		fprintf(stderr, "v2_e2e_writer: close: %s\n", strerror(-r));
		return 1;
	}
	return 0;
}
