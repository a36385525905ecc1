/* SPDX-License-Identifier: MIT */
/*
 * auditlog-witness's parts shared by its commands (main.c: add, export;
 * follow.c: follow): the held state of docs/format.md 20.6, the registered
 * hosts, the keys, the cosigning of a checked note.
 */
#ifndef AUDITLOG_WITNESS_H
#define AUDITLOG_WITNESS_H

#include "keyfile.h"
#include "note.h"
#include "verify.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROG "auditlog-witness"

/* the note held for an origin (note NULL: none yet) */
struct held {
	uint64_t size;
	uint8_t root[AL_HASH_LEN];
	uint8_t *note;
	size_t len;
};

/* "refused: ..." on stderr: 1 */
__attribute__((format(printf, 1, 2))) int refuse(const char *fmt, ...);
/* "<what> <path>: <strerror>" on stderr: 2 */
int io_error(const char *what, const char *path, int err);
/* an auditlog-keygen key file (secret: the signing key): 0, or 2 said */
int read_key(const char *path, bool secret, struct al_ckey *k);

/* the state file name of an origin: "<host>,<chain id>"; 0 or -EINVAL */
int state_name(const uint8_t *origin, size_t olen, char *out, size_t cap);
/* 0 with *h (h->note NULL: nothing held yet), 2 unreadable, 1 malformed */
int state_load(int dfd, const char *name, const uint8_t *origin, size_t olen, struct held *h);
/* the state of an origin written atomically: 0, or 2 said */
int state_store(int dfd, const char *name, const uint8_t *origin, size_t olen, uint64_t size,
		const uint8_t root[AL_HASH_LEN], const uint8_t *note, size_t len);

/* --hosts DIR: the registered hosts' public keys, one file each (regular,
 * not a dot file); two of one host id are an error. 0, or 2 said. */
struct hosts {
	struct al_ckey *k;
	unsigned n;
};
int hosts_load(const char *dir, struct hosts *h);
/* the key of a host id, or NULL: not registered */
const struct al_ckey *hosts_find(const struct hosts *h, const uint8_t *host, size_t len);

/* note (tlen: its text's length) with the witness's cosignature line
 * appended, stored as the origin's held note (file name) and returned in
 * *out (malloc'd): 0, or 2 said. The caller holds the state's lock. */
int cosign_store(int dfd, const char *name, const struct al_ckey *wk, const struct al_vwnote *w,
		 const uint8_t *note, size_t len, size_t tlen, uint8_t **out, size_t *out_len);

int cmd_follow(const char *dir, const char *keyf, const char *hostsdir, char *const *files, unsigned n,
	       bool once);

#endif
