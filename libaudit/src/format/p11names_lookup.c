/* SPDX-License-Identifier: MIT */
#include "auditlog.h"
#include "p11names.h"

/* Without a branch on the comparisons (a conditional move each step): the
 * producers name every event's rv and mechanism, and the values they see
 * alternate too much for the branch predictor (2.9 % of the v1 worker's
 * time before the producers took it over, perf 2026-12-03). Each step's load
 * waits for the one before (~9 steps, ~15 ns): the tables' first value,
 * CKR_OK, is looked at before searching. */
const struct al_p11name *al_p11_find(const struct al_p11name *tab, size_t n, uint64_t v)
{
	const struct al_p11name *e = tab;

	if (n == 0)
		return NULL;
	if (tab[0].value == v) /* CKR_OK, most records' rv: no search */
		return tab;
	while (n > 1) {
		size_t half = n / 2;
		e = e[half].value <= v ? e + half : e;
		n -= half;
	}
	return e->value == v ? e : NULL;
}

const char *al_p11_lookup(const struct al_p11name *tab, size_t n, uint64_t v)
{
	const struct al_p11name *e = al_p11_find(tab, n, v);

	return e ? e->name : NULL;
}

AUDITLOG_API const char *auditlog_ckr_name(uint64_t rv)
{
	return al_p11_lookup(al_ckr_names, al_ckr_count, rv);
}

AUDITLOG_API const char *auditlog_ckm_name(uint64_t mechanism)
{
	return al_p11_lookup(al_ckm_names, al_ckm_count, mechanism);
}
