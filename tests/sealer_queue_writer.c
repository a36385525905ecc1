/* SPDX-License-Identifier: MIT */
/*
 * sealer_queue_writer PATH SOCKET MODE: a v2 writer sealing through a real
 * auditlog-sealer, driven by tests/sealer_queue.sh over stdin/stdout (the
 * public API only). It writes 20 events (every 4th synchronous), flushes,
 * prints "ready" and waits for a line on stdin (the script kills the sealer).
 *
 *   queue   AUDITLOG_SEALER_QUEUE. 30 auditlog_record calls must succeed;
 *           once the stats say the sealer is away, auditlog_record_sync must
 *           answer -EAGAIN at once. Prints "away", waits for a line (the
 *           script restarts the sealer), then retries a record_sync until it
 *           succeeds (10 s at most), flushes and closes: 0 failed events,
 *           at least one reconnect, 51 events in the log.
 *   queue-ckpt  as queue, with a signed checkpoint in every batch: the batch
 *           that meets the lost sealer fails at its checkpoint's signature,
 *           the first request the new connection makes (a signature names
 *           the chain its connection is bound to: the reconnection binds it).
 *   queue-close  AUDITLOG_SEALER_QUEUE, and the log is closed while the
 *           sealer is away: 30 queued records, close answers -ENOTCONN (the
 *           script checks that none of them is written).
 *   queue-stale  as queue, but the sealer that comes back has another key:
 *           the reconnection is refused and the log fails closed: record_sync
 *           answers -ESTALE, close too; none of the queued records is written.
 *   closed  the default AUDITLOG_SEALER_FAIL_CLOSED: after the loss a
 *           record_sync fails (not -EAGAIN), prints "away", waits for a line
 *           (the sealer is back) and a further record_sync still fails: no
 *           reconnect; 20 events in the log.
 *   fork    (the sealer stays up) forks: in the child record, record_sync,
 *           flush and close answer -ECHILD within 5 s (alarm); the parent
 *           then writes 10 more synchronous events and closes: 30 events.
 *
 * Prints "stats: requests R errors E reconnects C failed F" before it closes.
 * Exit 0 when everything was as described, 1 otherwise (with the reason on
 * stderr).
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <auditlog.h>

static int one(struct auditlog *log, const char *action, unsigned long long i, int sync)
{
	struct auditlog_event ev = {
		.outcome = AUDITLOG_OUTCOME_SUCCESS,
		.action = action,
		.action_len = strlen(action),
		.actor = "sealer-queue-test",
		.actor_len = 17,
		.slot = i,
	};
	return sync ? auditlog_record_sync(log, &ev) : auditlog_record(log, &ev);
}

static void nap_ms(unsigned ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

static int wait_line(void)
{
	char line[16];
	return fgets(line, sizeof(line), stdin) ? 0 : -1;
}

static struct auditlog_stats stats(struct auditlog *log)
{
	struct auditlog_stats s;
	auditlog_get_stats(log, &s, sizeof(s));
	return s;
}

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); return 1; } while (0)

static int print_stats(struct auditlog *log)
{
	struct auditlog_stats s = stats(log);
	printf("stats: requests %llu errors %llu reconnects %llu failed %llu wait_ns %llu\n",
	       (unsigned long long)s.sealer_requests, (unsigned long long)s.sealer_errors,
	       (unsigned long long)s.sealer_reconnects, (unsigned long long)s.events_failed,
	       (unsigned long long)s.sealer_wait_ns);
	fflush(stdout);
	return 0;
}

/* Until the stats say the sealer is away (the worker found out): 5 s at most. */
static int until_away(struct auditlog *log)
{
	for (int i = 0; i < 500; i++) {
		if (stats(log).sealer_away)
			return 0;
		nap_ms(10);
	}
	return -1;
}

static int child(struct auditlog *log)
{
	struct auditlog_event ev = {.outcome = AUDITLOG_OUTCOME_SUCCESS, .action = "child",
				    .action_len = 5};
	int a, b, c, d;

	alarm(5); /* a child that reaches the parent's worker waits forever */
	a = auditlog_record(log, &ev);
	b = auditlog_record_sync(log, &ev);
	c = auditlog_flush(log);
	d = auditlog_close(log);
	if (a != -ECHILD || b != -ECHILD || c != -ECHILD || d != -ECHILD) {
		fprintf(stderr, "child: record %d record_sync %d flush %d close %d, want -ECHILD\n",
			a, b, c, d);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct auditlog_config *cfg = NULL;
	struct auditlog *log = NULL;
	const char *mode;
	int r;

	if (argc != 4) {
		fprintf(stderr, "usage: sealer_queue_writer PATH SOCKET queue|queue-ckpt|queue-close|queue-stale|closed|fork\n");
		return 2;
	}
	mode = argv[3];
	bool queue = strncmp(mode, "queue", 5) == 0;
	if ((r = auditlog_config_new(&cfg)) < 0 || (r = auditlog_config_set_path(cfg, argv[1])) < 0 ||
	    (r = auditlog_config_set_format_version(cfg, 2)) < 0 ||
	    (r = auditlog_config_set_sealer_socket(cfg, argv[2])) < 0 ||
	    (queue && (r = auditlog_config_set_sealer_policy(cfg, AUDITLOG_SEALER_QUEUE)) < 0) ||
	    (strcmp(mode, "queue-ckpt") == 0 && (r = auditlog_config_set_checkpoint_interval(cfg, 1, 0)) < 0) ||
	    (r = auditlog_open(cfg, &log)) < 0) {
		fprintf(stderr, "open: %s\n", strerror(-r));
		auditlog_config_free(cfg);
		return 1;
	}
	if (auditlog_config_set_sealer_policy(cfg, 2) != -EINVAL)
		FAIL("set_sealer_policy accepted 2");
	auditlog_config_free(cfg);
	for (unsigned i = 0; i < 20; i++)
		if ((r = one(log, "before", i, i % 4 == 0)) < 0)
			FAIL("before %u: %s", i, strerror(-r));
	if ((r = auditlog_flush(log)) < 0)
		FAIL("flush: %s", strerror(-r));

	if (strcmp(mode, "fork") == 0) {
		pid_t pid = fork();
		int st;
		if (pid < 0)
			FAIL("fork: %s", strerror(errno));
		if (pid == 0)
			_exit(child(log));
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			FAIL("the child's calls did not all answer -ECHILD (status %#x)", st);
		for (unsigned i = 0; i < 10; i++)
			if ((r = one(log, "after-fork", i, 1)) < 0)
				FAIL("parent after the fork: %s", strerror(-r));
		print_stats(log);
		if ((r = auditlog_close(log)) < 0)
			FAIL("close: %s", strerror(-r));
		return 0;
	}

	printf("ready\n");
	fflush(stdout);
	if (wait_line() < 0)
		FAIL("no go");
	if (strcmp(mode, "closed") == 0) {
		r = one(log, "after-loss", 0, 1);
		if (r == 0 || r == -EAGAIN)
			FAIL("fail-closed: record_sync after the loss answered %d", r);
		printf("away\n");
		fflush(stdout);
		if (wait_line() < 0)
			FAIL("no back");
		nap_ms(300);
		r = one(log, "after-back", 0, 1);
		if (r == 0)
			FAIL("fail-closed: record_sync succeeded after the sealer came back");
		if (stats(log).sealer_reconnects)
			FAIL("fail-closed: reconnected");
		print_stats(log);
		r = auditlog_close(log);
		printf("close: %s\n", r < 0 ? strerror(-r) : "ok");
		return 0;
	}
	/* queue and queue-close: the records queue while the sealer is away */
	for (unsigned i = 0; i < 30; i++)
		if ((r = one(log, "queued", i, 0)) < 0)
			FAIL("queued %u: %s", i, strerror(-r));
	if (until_away(log) < 0)
		FAIL("the stats never said the sealer is away");
	if ((r = one(log, "refused", 0, 1)) != -EAGAIN)
		FAIL("record_sync while away answered %d, want -EAGAIN", r);
	if ((r = auditlog_flush(log)) != -EAGAIN)
		FAIL("flush while away answered %d, want -EAGAIN", r);
	if (strcmp(mode, "queue-stale") == 0) {
		printf("away\n");
		fflush(stdout);
		if (wait_line() < 0)
			FAIL("no back");
		for (int i = 0; (r = one(log, "after-back", 0, 1)) == -EAGAIN; i++) {
			if (i > 1000)
				FAIL("still away 10 s after the other sealer came up");
			nap_ms(10);
		}
		if (r != -ESTALE)
			FAIL("record_sync after another key's sealer came up answered %d, want -ESTALE", r);
		r = auditlog_close(log);
		printf("close: %s\n", strerror(-r));
		return r == -ESTALE ? 0 : 1;
	}
	if (strcmp(mode, "queue-close") == 0) {
		r = auditlog_close(log); /* the handle is gone: no stats after it */
		if (r != -ENOTCONN)
			FAIL("close while away answered %d, want -ENOTCONN", r);
		printf("close: %s\n", strerror(-r));
		return 0;
	}
	printf("away\n");
	fflush(stdout);
	if (wait_line() < 0)
		FAIL("no back");
	for (int i = 0;; i++) {
		r = one(log, "after-back", 0, 1);
		if (r != -EAGAIN)
			break;
		if (i > 1000)
			FAIL("still away 10 s after the sealer came back");
		nap_ms(10);
	}
	if (r < 0)
		FAIL("record_sync after the sealer came back: %s", strerror(-r));
	struct auditlog_stats s = stats(log);
	if (s.sealer_reconnects < 1 || s.events_failed || s.sealer_away)
		FAIL("after the return: reconnects %llu, failed %llu, away %llu",
		     (unsigned long long)s.sealer_reconnects, (unsigned long long)s.events_failed,
		     (unsigned long long)s.sealer_away);
	print_stats(log);
	if ((r = auditlog_close(log)) < 0)
		FAIL("close: %s", strerror(-r));
	return 0;
}
