/* SPDX-License-Identifier: MIT */
#ifndef AUDITLOG_P11NAMES_H
#define AUDITLOG_P11NAMES_H

#include "symbols.h"
#include <stddef.h>
#include <stdint.h>

struct al_p11name {
	uint32_t value; /* every named CKR_ and CKM_ value fits (the generator checks) */
	uint32_t len;   /* strlen(name): the producers render it without measuring */
	const char *name;
};

/* Sorted by value; one name per value. */
extern const struct al_p11name al_ckr_names[];
extern const size_t al_ckr_count;
extern const struct al_p11name al_ckm_names[];
extern const size_t al_ckm_count;

/* Binary search; NULL when unnamed. */
const struct al_p11name *al_p11_find(const struct al_p11name *tab, size_t n, uint64_t v);
const char *al_p11_lookup(const struct al_p11name *tab, size_t n, uint64_t v);
#endif
