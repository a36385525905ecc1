/* SPDX-License-Identifier: MIT */
/*
 * auditlog-verify --registry DIR: the sealer's registry of chains
 * (docs/format.md 26), verified and compared with the chains of the inputs
 * by the engine (libaudit/src/verify/verify_registry.c); this is the CLI's
 * part: when to run it and how to say what it proves.
 */
#ifndef AUDITLOG_VERIFY_REGISTRY_CLI_H
#define AUDITLOG_VERIFY_REGISTRY_CLI_H

#include <stdio.h>

#include <jansson.h>

#include "verify.h"

/* After the inputs' run (res): verify the registry at dir with o's keys and
 * callbacks and compare; findings go through o->on_finding and into res.
 * 0, or 2 (the CLI's exit status) when it cannot be read (said on stderr). */
int registry_check(const char *dir, const struct al_vopts *o, struct al_vresult *res, struct al_vregistry *g);

/* The summary: one line and what it does and does not prove (human), or a
 * "registry" member (json). */
void registry_print(FILE *out, const struct al_vregistry *g, bool have_vkey);
void registry_json(json_t *j, const struct al_vregistry *g, bool have_vkey);

#endif
