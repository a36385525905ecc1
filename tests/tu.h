/* SPDX-License-Identifier: MIT */
/* Test utilities: temporary directories and an independent walk of a log. */
#ifndef AUDITLOG_TU_H
#define AUDITLOG_TU_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>

#include "auditlog.h"
#include "format.h"

/* mkdtemp under $TMPDIR or /var/tmp (a real disk: fdatasync must mean something). */
char *tu_mkdtemp(void);
/* AUDITLOG_TEST_SCALE (the sanitizer test presets, CMakePresets.json): how
 * many times less work a long test does there; 1 when unset. */
unsigned long tu_test_scale(void);
/* rm -r of a directory made by tu_mkdtemp. */
void tu_rmtree(const char *dir);
/* Whole file into memory (NUL-terminated); NULL on error. */
uint8_t *tu_read_file(const char *path, size_t *ret_len);
char *tu_path(const char *dir, const char *name); /* malloc'ed dir/name */
/* What fn(ctx) writes to stderr (a PKCS#11 module's messages), NUL-ended,
 * malloc'ed; the file it goes through is made in dir and removed. fn must
 * not assert: cmocka reports on stderr. */
char *tu_stderr_of(const char *dir, void (*fn)(void *ctx), void *ctx);
uint64_t tu_file_size(const char *path);
/* How many pages of [off, off + len) of the file at path the page cache holds
 * (mincore); off a multiple of the page size. */
size_t tu_resident_pages(const char *path, uint64_t off, uint64_t len);
/* Is path on tmpfs, whose shmem pages are never dropped from the page cache
 * (tu_resident_pages then proves nothing)? Says so when it is. */
bool tu_on_tmpfs(const char *path);

/* What tu_walk found in one file. */
struct tu_walk {
	uint64_t records, events, headers, recoveries;
	uint64_t first_seq, last_seq;
	uint8_t last_hash[AL_HASH_LEN];
	uint8_t first_prev[AL_HASH_LEN]; /* chain input of the first record */
	char chain_id[33];
	char reason[32];
	char prev_name[256];
	uint64_t prev_seq, prev_size;
	uint64_t size;
	char error[256];                 /* empty when the file is intact */
};

/* Walk one file: every line parses canonically, seq +1, every hash
 * recomputes, timestamps never decrease, versions never decrease, damage only
 * where a recovery record names its exact range and hash. The header's
 * prev_hash (or zeros) starts the chain. Calls on_event(ctx, parsed) for each
 * event (may be NULL). Returns 0 when intact, -1 with w->error set. */
int tu_walk_file(const char *path, struct tu_walk *w,
		 void (*on_event)(void *ctx, const struct al_parsed *p), void *ctx);

/* Walk a chain backwards from dir/active through the headers' prev_name
 * links: every file verifies (a predecessor only up to the prev_size its
 * successor names), the links' seq and hash match, one chain_id. Fails the
 * test otherwise. Returns the number of files. */
unsigned tu_walk_chain(const char *dir, const char *active,
		       void (*on_event)(void *ctx, const struct al_parsed *p), void *ctx);
unsigned tu_count_files(const char *dir); /* entries not starting with '.' */
/* /proc/self/task/TID/NAME into buf, NUL-terminated (a /proc file's size is 0,
 * so tu_read_file does not fit), "comm" without its newline; false when it
 * cannot be read (the thread ended meanwhile). */
bool tu_task_file(const char *tid, const char *name, char *buf, size_t cap);
/* How many threads of this process are named comm (their /proc comm); *ret_all:
 * each may run on exactly the CPUs of the list want, as the kernel prints its
 * Cpus_allowed_list ("1", "0-3"). */
unsigned tu_threads_on(const char *comm, const char *want, bool *ret_all);
/* The TID of this process's thread named comm (the first found), or 0. */
unsigned tu_thread_named(const char *comm);

/* An event with the shape of the token's records. */
struct auditlog_event tu_event(const char *action, uint64_t session);

/* Counting events by id: tests put "<prefix><n>" in each event's detail;
 * tu_count_ids (an on_event callback) counts how often each n < size appears. */
struct tu_ids {
	const char *prefix;
	unsigned size;
	unsigned *count;
};
struct tu_ids tu_ids_new(const char *prefix, unsigned size);
void tu_ids_free(struct tu_ids *ids);
void tu_count_ids(void *ctx, const struct al_parsed *p);

/* Poll the log's stats every 100 µs until until(st, ctx) holds: true, or
 * false after timeout_ms (the caller says what did not happen). */
bool tu_stats_wait(struct auditlog *log, bool (*until)(const struct auditlog_stats *st, void *ctx),
		   void *ctx, unsigned timeout_ms);
/* A tu_stats_wait() condition: every record accepted is durable. */
bool tu_all_written(const struct auditlog_stats *st, void *ctx);

/* Honour $TEST_FILTER (a cmocka test-name pattern) to run one test; with
 * AUDITLOG_TEST_V2=1, make the shared v2 keys now, in the test's main
 * process, so that its forked writers share them. */
void tu_filter(void);

/* Write n events into the log at path with format version `version`, 16 KiB
 * batches and rotation at `rotate` bytes: event i is C_Sign, or C_Encrypt
 * when i % action_mod == 0; every detail_every-th (when not 0) carries a
 * detail that needs escaping. Fails the test on any error. */
void tu_write_log(const char *path, unsigned version, unsigned n, uint64_t rotate, unsigned action_mod,
		  unsigned detail_every);

/* Verify every file of dir with the verification engine (one worker):
 * fails the test, listing the findings, on any integrity finding other than
 * `recovered`. Returns the number of recovered findings. */
unsigned tu_verify_dir(const char *dir);
/* The same for one file fed to the engine as a stream, in pieces of 1 byte
 * to 8 KiB. */
unsigned tu_verify_stream(const char *path);

/* The JSON file the environment variable var names (ctest sets it: the
 * known-answer vectors); NULL, having said why on stderr, when it is unset or
 * cannot be read. */
json_t *tu_json_file_env(const char *var);

/* ---- v2 (docs/format.md Part II) -------------------------------------- */

/* A test clock for auditlog__config_set_clock (internal.h): the boot clock
 * the test sets (ns; every read adds boot_step), the real wall clock plus
 * wall_offset, and a boot id. */
struct tu_clock {
	_Atomic uint64_t boot;
	_Atomic uint64_t boot_step;
	_Atomic int64_t wall_offset;
	uint8_t boot_id[16];
};
struct al_clock_hooks;
void tu_clock_hooks(struct tu_clock *c, struct al_clock_hooks *ret);

/* A host's v2 keys made with the format layer in dir: the sealing state at
 * `epoch` (boot id and boot start as given), the checkpoint key pair, the
 * verification key. Paths are malloc'ed; tu_v2_keys_free frees them. */
struct tu_v2keys {
	char *state_path, *sign_path, *pub_path, *vkey_path;
	uint8_t S[32];
	uint8_t key_id[8];
	char host[64];
	uint64_t t0, delta;
	uint8_t sign_seed[32], pub[32];
};
void tu_v2_keys(const char *dir, const char *host, uint64_t t0, uint64_t delta, uint32_t epoch,
		const uint8_t boot_id[16], uint64_t boot_start, struct tu_v2keys *ret);
/* Rewrite the sealing state file at epoch (the same key), e.g. an older copy. */
void tu_v2_state_write(const struct tu_v2keys *k, uint32_t epoch, const uint8_t boot_id[16],
		       uint64_t boot_start);
void tu_v2_keys_free(struct tu_v2keys *k);
/* Format version 2 with k's state and signing key (and the clock, when not NULL). */
void tu_v2_config(struct auditlog_config *cfg, const struct tu_v2keys *k, struct tu_clock *clock);

/* A fresh config for a log at path. With AUDITLOG_TEST_V2=1 in the
 * environment (tu_v2_mode), format version 2 with sealing keys made once per
 * process, so that existing scenarios run with v2 too. */
struct auditlog_config *tu_config(const char *path);
bool tu_v2_mode(void);
/* Format version 2 with the keys tu_config makes once per process (a real
 * sealing state at the wall clock's epoch, delta 10 s). */
void tu_v2_config_shared(struct auditlog_config *cfg);
#endif
