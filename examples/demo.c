/* SPDX-License-Identifier: MIT */
/*
 * auditlog-demo: record events from several threads, some synchronous, then
 * print throughput, the backend in use and the chain head.
 *
 *   auditlog-demo [-p PATH] [-t THREADS] [-n EVENTS_PER_THREAD] [-s SYNC_EVERY]
 *
 * Defaults: a fresh log in a new temporary directory, 4 threads, 50,000
 * events each, every 1000th event synchronous.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <auditlog.h>

struct worker {
	struct auditlog *log;
	unsigned id;
	unsigned long n, sync_every;
	int err;
	unsigned long syncs;
};

static const char *const actions[] = {"C_Sign", "C_Encrypt", "C_Decrypt", "C_Verify"};
static const uint64_t mechs[] = {0x1041 /* CKM_ECDSA */, 0x1087 /* CKM_AES_GCM */,
				 0x1087, 0x40 /* CKM_SHA256_RSA_PKCS */};

static void *run(void *arg)
{
	struct worker *w = arg;
	static const char label[] = "payments-signing-key";
	uint8_t id[4] = {0x01, 0xa2, 0, 0};

	for (unsigned long i = 0; i < w->n; i++) {
		unsigned k = (unsigned)(i % 4);
		struct auditlog_event ev = {
			.flags = AUDITLOG_EV_RV | AUDITLOG_EV_MECHANISM | AUDITLOG_EV_SLOT |
				 AUDITLOG_EV_SESSION,
			.outcome = AUDITLOG_OUTCOME_SUCCESS,
			.rv = 0,
			.mechanism = mechs[k],
			.slot = 0,
			.session = w->id + 1,
			.action = actions[k],
			.action_len = strlen(actions[k]),
			.key_label = label,
			.key_label_len = sizeof(label) - 1,
			.key_id = id,
			.key_id_len = 2,
			.actor = "user",
			.actor_len = 4,
		};
		int r;
		if (w->sync_every && i % w->sync_every == 0) {
			r = auditlog_record_sync(w->log, &ev);
			w->syncs++;
		} else {
			r = auditlog_record(w->log, &ev);
		}
		if (r < 0) {
			w->err = r;
			return NULL;
		}
	}
	return NULL;
}

static unsigned long parse_ul(const char *s, const char *what)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || end == s) {
		fprintf(stderr, "auditlog-demo: bad %s: %s\n", what, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	unsigned long threads = 4, n = 50000, sync_every = 1000;
	char tmpl[] = "/var/tmp/auditlog-demo.XXXXXX";
	char pathbuf[256];
	int opt, r;

	while ((opt = getopt(argc, argv, "p:t:n:s:h")) != -1) {
		switch (opt) {
		case 'p': path = optarg; break;
		case 't': threads = parse_ul(optarg, "thread count"); break;
		case 'n': n = parse_ul(optarg, "event count"); break;
		case 's': sync_every = parse_ul(optarg, "sync interval"); break;
		default:
			fprintf(stderr, "usage: auditlog-demo [-p PATH] [-t THREADS] [-n EVENTS] [-s SYNC_EVERY]\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (threads == 0 || threads > 256) {
		fprintf(stderr, "auditlog-demo: threads must be 1..256\n");
		return 2;
	}
	if (!path) {
		if (!mkdtemp(tmpl)) {
			perror("auditlog-demo: mkdtemp");
			return 1;
		}
		snprintf(pathbuf, sizeof(pathbuf), "%s/audit.log", tmpl);
		path = pathbuf;
	}

	struct auditlog_config *cfg;
	struct auditlog *log;
	if ((r = auditlog_config_new(&cfg)) < 0 || (r = auditlog_config_set_path(cfg, path)) < 0) {
		fprintf(stderr, "auditlog-demo: config: %s\n", strerror(-r));
		return 1;
	}
	r = auditlog_open(cfg, &log);
	auditlog_config_free(cfg);
	if (r < 0) {
		fprintf(stderr, "auditlog-demo: cannot open %s: %s\n", path, strerror(-r));
		return 1;
	}

	struct worker *w = calloc(threads, sizeof(*w));
	pthread_t *tid = calloc(threads, sizeof(*tid));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0; i < threads; i++) {
		w[i] = (struct worker){.log = log, .id = i, .n = n, .sync_every = sync_every};
		pthread_create(&tid[i], NULL, run, &w[i]);
	}
	int failed = 0;
	unsigned long syncs = 0;
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(tid[i], NULL);
		syncs += w[i].syncs;
		if (w[i].err) {
			fprintf(stderr, "auditlog-demo: thread %u: %s\n", i, strerror(-w[i].err));
			failed = 1;
		}
	}
	r = auditlog_flush(log);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (r < 0) {
		fprintf(stderr, "auditlog-demo: flush: %s\n", strerror(-r));
		failed = 1;
	}

	struct auditlog_stats st;
	auditlog_get_stats(log, &st, sizeof(st));
	r = auditlog_close(log);
	if (r < 0) {
		fprintf(stderr, "auditlog-demo: close: %s\n", strerror(-r));
		failed = 1;
	}
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	char head[65];
	for (int i = 0; i < 32; i++)
		snprintf(head + 2 * i, 3, "%02x", st.head_hash[i]);
	printf("log:         %s\n", path);
	printf("backend:     %s\n", auditlog_backend_name((enum auditlog_backend)st.backend));
	printf("events:      %" PRIu64 " written (%lu synchronous) by %lu threads, %" PRIu64 " failed\n",
	       st.events_written, syncs, threads, st.events_failed);
	printf("throughput:  %.0f events/s durable (%.3f s, flush included)\n",
	       (double)st.events_written / secs, secs);
	printf("batches:     %" PRIu64 " (largest %" PRIu64 " records), %" PRIu64 " fdatasyncs, %.1f MB\n",
	       st.batches, st.largest_batch, st.fsyncs, (double)st.bytes_written / 1e6);
	printf("line size:   %.0f bytes on average\n",
	       st.records_written ? (double)st.bytes_written / (double)st.records_written : 0.0);
	printf("chain head:  seq %" PRIu64 " hash %s\n", st.head_seq, head);
	free(w);
	free(tid);
	return failed;
}
