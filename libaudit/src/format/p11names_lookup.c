/* SPDX-License-Identifier: MIT */
#include "auditlog.h"
#include "p11names.h"

const char *al_p11_lookup(const struct al_p11name *tab, size_t n, uint64_t v)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (tab[mid].value == v)
			return tab[mid].name;
		if (tab[mid].value < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

AUDITLOG_API const char *auditlog_ckr_name(uint64_t rv)
{
	return al_p11_lookup(al_ckr_names, al_ckr_count, rv);
}

AUDITLOG_API const char *auditlog_ckm_name(uint64_t mechanism)
{
	return al_p11_lookup(al_ckm_names, al_ckm_count, mechanism);
}
