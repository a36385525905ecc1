/* SPDX-License-Identifier: MIT */
/*
 * Rotation by size and by age: the chain runs on across files, every header
 * names its predecessor (name, last seq, hash, size), names follow the
 * documented pattern and are never reused, reopening a rotated log goes on.
 */
#include <dirent.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "tu.h"

static struct auditlog *open_rot(const char *path, uint64_t bytes, uint64_t age_s)
{
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, 16u << 10), 0);
	assert_int_equal(auditlog_config_set_rotate_bytes(cfg, bytes), 0);
	assert_int_equal(auditlog_config_set_rotate_age_s(cfg, age_s), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	return log;
}

static void write_range(struct auditlog *log, unsigned from, unsigned to)
{
	char detail[32];
	for (unsigned i = from; i < to; i++) {
		struct auditlog_event ev = tu_event("C_Sign", i);
		ev.detail = detail;
		ev.detail_len = (size_t)snprintf(detail, sizeof(detail), "ev-%u", i);
		assert_int_equal(i % 100 == 0 ? auditlog_record_sync(log, &ev) : auditlog_record(log, &ev), 0);
	}
}

static void check_names(const char *dir, unsigned expect_files)
{
	regex_t re;
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0, rotated = 0;

	assert_int_equal(regcomp(&re, "^audit\\.log\\.[0-9]{8}T[0-9]{6}\\.[0-9]{9}Z-[0-9]+$",
				 REG_EXTENDED | REG_NOSUB), 0);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		n++;
		if (strcmp(e->d_name, "audit.log") == 0)
			continue;
		if (regexec(&re, e->d_name, 0, NULL, 0) != 0)
			fail_msg("unexpected file name %s", e->d_name);
		rotated++;
	}
	closedir(d);
	regfree(&re);
	assert_int_equal(n, expect_files);
	assert_int_equal(rotated, expect_files - 1);
}

static void check_all_once(const char *dir, unsigned n, unsigned expect_files)
{
	struct tu_ids f = tu_ids_new("ev-", n);
	assert_int_equal(tu_walk_chain(dir, "audit.log", tu_count_ids, &f), expect_files);
	for (unsigned i = 0; i < n; i++)
		if (f.count[i] != 1)
			fail_msg("ev-%u appears %u times", i, f.count[i]);
	tu_ids_free(&f);
}

static void test_rotate_by_size(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct auditlog_stats st;

	struct auditlog *log = open_rot(path, 64u << 10, 0);
	write_range(log, 0, 3000);
	assert_int_equal(auditlog_flush(log), 0);
	auditlog_get_stats(log, &st, sizeof(st));
	assert_int_equal(auditlog_close(log), 0);
	assert_true(st.rotations >= 10);
	check_names(dir, (unsigned)st.rotations + 1);
	check_all_once(dir, 3000, (unsigned)st.rotations + 1);

	/* reopen the rotated log and keep going: same chain, more files */
	uint64_t before = st.rotations;
	log = open_rot(path, 64u << 10, 0);
	write_range(log, 3000, 4000);
	assert_int_equal(auditlog_flush(log), 0);
	auditlog_get_stats(log, &st, sizeof(st));
	assert_int_equal(auditlog_close(log), 0);
	unsigned files = (unsigned)(before + st.rotations + 1);
	check_names(dir, files);
	check_all_once(dir, 4000, files);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

/* The active file vanished (deleted, or a crash between rotation's rename and
 * create): a new chain starts, and its header says what it found. */
static void test_active_file_missing(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct tu_walk w;

	struct auditlog *log = open_rot(path, 64u << 10, 0);
	write_range(log, 0, 1000);
	assert_int_equal(auditlog_close(log), 0);
	assert_int_equal(unlink(path), 0);
	log = open_rot(path, 64u << 10, 0);
	write_range(log, 0, 10);
	assert_int_equal(auditlog_close(log), 0);
	if (tu_walk_file(path, &w, NULL, NULL))
		fail_msg("%s", w.error);
	assert_string_equal(w.reason, "new");
	size_t len;
	char *buf = (char *)tu_read_file(path, &len);
	assert_non_null(strstr(buf, "the active file was missing while rotated files of this log exist"));
	assert_non_null(strstr(buf, "(newest: audit.log."));
	free(buf);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

static void test_rotate_by_age(void **state)
{
	char *dir = tu_mkdtemp(), *path = tu_path(dir, "audit.log");
	struct auditlog_stats st;

	struct auditlog *log = open_rot(path, 0, 1);
	write_range(log, 0, 10);
	assert_int_equal(auditlog_flush(log), 0);
	usleep(1100 * 1000);
	write_range(log, 10, 20);
	assert_int_equal(auditlog_flush(log), 0);
	usleep(1100 * 1000);
	write_range(log, 20, 30);
	assert_int_equal(auditlog_flush(log), 0);
	auditlog_get_stats(log, &st, sizeof(st));
	assert_int_equal(auditlog_close(log), 0);
	assert_int_equal(st.rotations, 2);
	check_names(dir, 3);
	check_all_once(dir, 30, 3);
	free(path);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rotate_by_size),
		cmocka_unit_test(test_rotate_by_age),
		cmocka_unit_test(test_active_file_missing),
	};
	tu_filter();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
