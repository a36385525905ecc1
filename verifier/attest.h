/* SPDX-License-Identifier: MIT */
/*
 * auditlog-verify --attest: check an attestation statement (docs/format.md
 * 27) with the verification keys, and compare it with the seals of the
 * chains given. Reports on stdout / stderr itself and returns the CLI's exit
 * status.
 */
#ifndef AUDITLOG_VERIFY_ATTEST_H
#define AUDITLOG_VERIFY_ATTEST_H

#include "keyfile.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct attest_opts {
	const struct al_vkey *vkeys; /* --verify-key, at least one */
	unsigned n_vkeys;
	bool has_nonce;              /* --attest-nonce */
	uint8_t nonce[32];
	uint64_t max_age;            /* --attest-max-age in ns; 0: none */
	bool quiet;
	void (*put)(FILE *out, const char *s); /* prints a name with its control bytes escaped */
};

/* 0: the statement verifies and no chain contradicts it (attest-lag notices
 * included), 1: a finding (27.4), 2: a file cannot be read. */
int attest_verify(const char *statement, char **paths, unsigned n, const struct attest_opts *o);

#endif
