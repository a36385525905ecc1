/* SPDX-License-Identifier: MIT */
/*
 * follow_writer PATH EVENTS ROTATE_BYTES [DETAIL_BYTES]: a live writer for
 * tests/cli_follow.sh. Writes EVENTS events to PATH, rotating every
 * ROTATE_BYTES, in bursts of 50 with a 4 ms pause after each (so that a
 * follower sees the log grow and rotate), every 500th record synchronous.
 * DETAIL_BYTES (at most 3600) pads each event's detail to that length: long
 * lines. Exit 0, or 1 with a message.
 */
#include <errno.h>
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
		fprintf(stderr, "follow_writer: not a number: %s\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	struct auditlog_config *cfg = NULL;
	struct auditlog *log = NULL;
	int r;

	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: follow_writer PATH EVENTS ROTATE_BYTES [DETAIL_BYTES]\n");
		return 2;
	}
	unsigned long long n = num(argv[2]), rotate = num(argv[3]), pad = argc == 5 ? num(argv[4]) : 0;
	if (pad > 3600) {
		fprintf(stderr, "follow_writer: DETAIL_BYTES is at most 3600\n");
		return 2;
	}
	if ((r = auditlog_config_new(&cfg)) < 0 || (r = auditlog_config_set_path(cfg, argv[1])) < 0 ||
	    (r = auditlog_config_set_rotate_bytes(cfg, rotate)) < 0 || (r = auditlog_open(cfg, &log)) < 0) {
		fprintf(stderr, "follow_writer: %s: %s\n", argv[1], strerror(-r));
		auditlog_config_free(cfg);
		return 1;
	}
	auditlog_config_free(cfg);
	for (unsigned long long i = 0; i < n; i++) {
		char detail[3601];
		int len = snprintf(detail, sizeof(detail), "follow test event %llu", i);
		if ((unsigned long long)len < pad) {
			memset(detail + len, '.', pad - (size_t)len);
			len = (int)pad;
		}
		struct auditlog_event ev = {
			.flags = AUDITLOG_EV_RV | AUDITLOG_EV_SESSION,
			.outcome = AUDITLOG_OUTCOME_SUCCESS,
			.session = i % 7,
			.action = "C_Sign",
			.action_len = 6,
			.actor = "user",
			.actor_len = 4,
			.detail = detail,
			.detail_len = (size_t)len,
		};
		r = i % 500 == 0 ? auditlog_record_sync(log, &ev) : auditlog_record(log, &ev);
		if (r < 0) {
			fprintf(stderr, "follow_writer: record %llu: %s\n", i, strerror(-r));
			auditlog_close(log);
			return 1;
		}
		if (i % 50 == 49) {
			struct timespec ts = {0, 4000000};
			(void)auditlog_flush(log);
			nanosleep(&ts, NULL);
		}
	}
	r = auditlog_close(log);
	if (r < 0) {
		fprintf(stderr, "follow_writer: close: %s\n", strerror(-r));
		return 1;
	}
	return 0;
}
