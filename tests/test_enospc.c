/* SPDX-License-Identifier: MIT */
/*
 * A real full disk: a 512 KiB tmpfs mounted in a private mount namespace
 * (root only; exit 77 without it). With a deadline of 0 the log fails closed
 * with -ENOSPC at once; with a deadline it retries until space comes back.
 * Either way nothing acknowledged is lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "tu.h"

static char *mnt;

static int setup(void **state)
{
	mnt = tu_mkdtemp();
	if (!mnt)
		return -1;
	if (mount("auditlog-enospc", mnt, "tmpfs", 0, "size=512k,mode=0700") < 0) {
		print_error("mount tmpfs: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
	free(mnt);
	return 0;
}

static struct auditlog *open_on(const char *path, uint64_t deadline_ms, enum auditlog_backend be)
{
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;
	/* every batch through the ring on io_uring: the kernel's short writes
	 * and ENOSPC reach the completion path this way */
	struct al_io_hooks h = {.force_ring = true};
	assert_int_equal(auditlog__config_set_io_hooks(cfg, &h), 0);
	assert_int_equal(auditlog_config_set_enospc_deadline_ms(cfg, deadline_ms), 0);
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, 16u << 10), 0);
	assert_int_equal(auditlog_config_set_backend(cfg, be), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	return log;
}

static void fail_closed(enum auditlog_backend be)
{
	char *dir = tu_path(mnt, be == AUDITLOG_BACKEND_PWRITE ? "fc-pwrite" : "fc-uring");
	assert_int_equal(mkdir(dir, 0700), 0);
	char *path = tu_path(dir, "audit.log");
	struct auditlog *log = open_on(path, 0, be);
	unsigned n = 20000, acked = 0, i;
	uint8_t *ok = calloc(n, 1);
	char detail[32];
	int r = 0;

	for (i = 0; i < n; i++) {
		struct auditlog_event ev = tu_event("C_Sign", i);
		ev.detail = detail;
		ev.detail_len = (size_t)snprintf(detail, sizeof(detail), "ev-%u", i);
		r = auditlog_record_sync(log, &ev);
		if (r < 0)
			break;
		ok[i] = 1;
		acked++;
	}
	assert_int_equal(r, -ENOSPC);
	assert_true(acked > 100); /* the disk really took some */
	struct auditlog_event ev = tu_event("C_Sign", 0);
	assert_int_equal(auditlog_record(log, &ev), -ENOSPC); /* closed for good */
	struct auditlog_stats st;
	auditlog_get_stats(log, &st, sizeof(st));
	assert_int_equal(st.error, -ENOSPC);
	assert_true(st.enospc_retries >= 1);
	assert_int_equal(auditlog_close(log), -ENOSPC);

	/* every acknowledged event is there; the file verifies up to its durable end */
	struct tu_ids f = tu_ids_new("ev-", n);
	struct tu_walk w;
	size_t len;
	uint8_t *buf = tu_read_file(path, &len);
	/* the failed batch may have left a partial line: look at complete lines */
	while (len && buf[len - 1] != '\n')
		len--;
	char *cdir = tu_mkdtemp(); /* on the real disk: the tmpfs is full */
	char *cut = tu_path(cdir, "cut.log");
	FILE *out = fopen(cut, "w");
	assert_non_null(out);
	assert_int_equal(fwrite(buf, 1, len, out), len);
	assert_int_equal(fclose(out), 0);
	if (tu_walk_file(cut, &w, tu_count_ids, &f))
		fail_msg("%s", w.error);
	for (i = 0; i < n; i++)
		if (ok[i] && !f.count[i])
			fail_msg("acknowledged ev-%u missing", i);
	free(cut);
	tu_rmtree(cdir);
	free(cdir);
	free(buf);
	tu_ids_free(&f);
	free(ok);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void test_fail_closed(void **state)
{
	fail_closed(AUDITLOG_BACKEND_IO_URING);
	fail_closed(AUDITLOG_BACKEND_PWRITE);
}

struct freer {
	struct auditlog *log;
	const char *filler;
	int freed;
};

static void *free_space_later(void *arg)
{
	struct freer *fr = arg;
	struct auditlog_stats st;
	for (unsigned i = 0; i < 3000; i++) {
		auditlog_get_stats(fr->log, &st, sizeof(st));
		if (st.enospc_retries >= 2) {
			fr->freed = unlink(fr->filler) == 0;
			return NULL;
		}
		usleep(1000);
	}
	return NULL;
}

static void test_retry_until_space(void **state)
{
	char *dir = tu_path(mnt, "retry");
	assert_int_equal(mkdir(dir, 0700), 0);
	char *path = tu_path(dir, "audit.log");
	char *filler = tu_path(mnt, "filler");
	struct auditlog *log = open_on(path, 20000, AUDITLOG_BACKEND_IO_URING);
	unsigned n = 800; /* ~260 KiB: fits once the filler is gone */
	char detail[32];

	/* leave a few KiB free */
	int fd = open(filler, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	static char block[4096];
	while (write(fd, block, sizeof(block)) == (ssize_t)sizeof(block))
		;
	close(fd);
	struct freer fr = {.log = log, .filler = filler};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, free_space_later, &fr), 0);
	for (unsigned i = 0; i < n; i++) {
		struct auditlog_event ev = tu_event("C_Sign", i);
		ev.detail = detail;
		ev.detail_len = (size_t)snprintf(detail, sizeof(detail), "ev-%u", i);
		int r = i % 10 ? auditlog_record(log, &ev) : auditlog_record_sync(log, &ev);
		if (r < 0)
			fail_msg("ev-%u: %s", i, strerror(-r));
	}
	pthread_join(t, NULL);
	assert_true(fr.freed);
	struct auditlog_stats st;
	assert_int_equal(auditlog_flush(log), 0);
	auditlog_get_stats(log, &st, sizeof(st));
	assert_true(st.enospc_retries >= 2);
	assert_int_equal(st.error, 0);
	assert_int_equal(auditlog_close(log), 0);
	struct tu_ids f = tu_ids_new("ev-", n);
	struct tu_walk w;
	if (tu_walk_file(path, &w, tu_count_ids, &f))
		fail_msg("%s", w.error);
	for (unsigned i = 0; i < n; i++)
		if (f.count[i] != 1)
			fail_msg("ev-%u written %u times", i, f.count[i]);
	tu_ids_free(&f);
	free(filler);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_enospc: SKIP: needs root to mount a small tmpfs\n");
		return 77;
	}
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		fprintf(stderr, "test_enospc: SKIP: cannot make a private mount namespace: %s\n",
			strerror(errno));
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fail_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retry_until_space, setup, teardown),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
