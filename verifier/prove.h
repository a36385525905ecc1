/* SPDX-License-Identifier: MIT */
/*
 * auditlog-verify --prove, --prove-consistency and --check-proof: evidence
 * bundles (docs/format.md 18.4) written from a v2 log's files and checked
 * offline, without the log. Each returns the CLI's exit status and reports on
 * stdout / stderr itself.
 */
#ifndef AUDITLOG_VERIFY_PROVE_H
#define AUDITLOG_VERIFY_PROVE_H

#include "keyfile.h"
#include "verify.h"

#include <stdint.h>

/* The inclusion bundle of record `seq` (0, 1: cannot be proved from these
 * files, 2: an input or the output cannot be read or written). out NULL or
 * "-": stdout; a file is created (never overwritten). A witnessed note (w,
 * nw: --witness) of the same origin, size and root is written in place of
 * the log's, so that its cosignature lines travel with the bundle. */
int prove_inclusion(char **paths, unsigned n, uint64_t seq, const char *out, const struct al_vwnote *w,
		    unsigned nw);

/* The consistency bundle between the checkpoints of sizes m and sz. */
int prove_consistency(char **paths, unsigned n, uint64_t m, uint64_t sz, const char *out,
		      const struct al_vwnote *w, unsigned nw);

/* Check a bundle of either kind with the public keys (the note's host's) and,
 * when n_wkeys, the witnesses' (each note must carry a cosignature of one of
 * them that verifies, said on stdout): 0 valid, 1 invalid (the part that
 * fails is named on stderr), 2 unreadable. */
int check_proof(const char *bundle, const struct al_ckey *keys, unsigned nkeys, const struct al_ckey *wkeys,
		unsigned n_wkeys);

#endif
