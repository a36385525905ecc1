/* SPDX-License-Identifier: MIT */
/*
 * auditlog-verify --follow --emit --state FILE: where the verifying tail is
 * (docs/siem.md 9). After each batch of emitted lines the position of the
 * last one (the file by its header's hash, dev and inode; the offset after
 * the line; its seq and hash; the chain id) is written to FILE atomically;
 * a restart resumes after that record. The state names lines already in the
 * log, so a file that does not match it is refused, never read from zero.
 */
#ifndef AUDITLOG_VERIFY_TAIL_STATE_H
#define AUDITLOG_VERIFY_TAIL_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"

struct tail_state;

/* Open the state FILE at path for the inputs args[0..nargs) (files or
 * directories as given on the command line: listed again whenever a file
 * must be found). Returns 0 when FILE does not exist yet (a first run), 1
 * when it does and matches the log (tail_resume says where), or -errno
 * with a sentence in err: -EINVAL a state that is not of the format,
 * -ESTALE a state the log does not match (another chain, a record that is
 * not where it says), -ENOENT no input begins with the state's header,
 * -ELOOP FILE is a symbolic link, or the error of reading it. */
int tail_state_open(const char *path, char *const *args, int nargs, struct tail_state **ret, char *err,
		    size_t errlen);
void tail_state_free(struct tail_state *t);

/* After tail_state_open returned 1: the last record emitted before. */
void tail_resume(const struct tail_state *t, uint64_t *seq, uint8_t hash[AL_HASH_LEN], char chain_id[33]);

/* A line just emitted (p: its parse). 0, or -E2BIG for a line longer than
 * any canonical one (never a verified line). */
int tail_note(struct tail_state *t, const uint8_t *line, size_t len, const struct al_parsed *p);

/* Lines noted since the last tail_save? */
bool tail_dirty(const struct tail_state *t);

/* Write the position of the last noted line (when there is a new one):
 * temporary file, fsync, rename over FILE, fsync of its directory. The
 * caller flushed the emitted lines first. 0, or -errno with a sentence. */
int tail_save(struct tail_state *t, char *err, size_t errlen);

#endif
