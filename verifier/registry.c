/* SPDX-License-Identifier: MIT */
/* auditlog-verify --registry DIR: registry.h. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "registry.h"

/* What the comparison proves and what not: docs/format.md 26.3, in short. */
static const char registry_note[] =
	"every chain the sealer registered must be among the inputs and reach its registered close; "
	"a segment still open is checked only to its first seal, a lost writer's shorter tail is a gap, "
	"and the registry's own last epoch is its honest window (docs/format.md 26.3)";

int registry_check(const char *dir, const struct al_vopts *o, struct al_vresult *res, struct al_vregistry *g)
{
	int r = al_registry_load(dir, o, g);

	if (r < 0) {
		fprintf(stderr, "auditlog-verify: --registry %s: %s\n", dir,
			r == -ENOENT ? "no registry file there" : strerror(-r));
		return 2;
	}
	al_registry_compare(g, o, res);
	return 0;
}

void registry_print(FILE *out, const struct al_vregistry *g, bool have_vkey)
{
	fprintf(out, "registry: %u segment(s) of %u chain(s) in %" PRIu64 " verified record(s), seals %s\n",
		g->n, al_registry_chains(g), g->records,
		have_vkey ? "verified" : "not checked (no --verify-key: anyone could have written it)");
	fprintf(out, "registry note: %s\n", registry_note);
}

void registry_json(json_t *j, const struct al_vregistry *g, bool have_vkey)
{
	json_object_set_new(j, "registry",
			    json_pack("{s:i,s:i,s:I,s:b,s:s}", "segments", (int)g->n, "chains",
				      (int)al_registry_chains(g), "records", (json_int_t)g->records,
				      "seals_checked", have_vkey, "note", registry_note));
}
