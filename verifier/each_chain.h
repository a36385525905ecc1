/* SPDX-License-Identifier: MIT */
/*
 * auditlog-verify --follow --each-chain LOGDIR: one verifying tail for each
 * writer's chain in a directory (the token's audit_dir holds one chain per
 * process that had the module loaded at once), and one more for each chain
 * that appears later. Each tail is this program again (--follow, the
 * options passed on, the chain's files named one by one, --state
 * STATE_DIR/NAME.state), so every rule of the one-chain tail holds for each;
 * this process reads their standard outputs and writes whole lines of them
 * to its own (docs/auditlog-verify.md, docs/siem.md 9).
 */
#ifndef AUDITLOG_VERIFY_EACH_CHAIN_H
#define AUDITLOG_VERIFY_EACH_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct each_chain {
	const char *self;      /* argv[0], for the tails' argv[0] */
	bool nomem;            /* pass_add could not grow pass */
	void (*put)(FILE *out, const char *s); /* prints a name with its control bytes escaped */
	const char *logdir;    /* the directory given */
	const char *state_dir; /* NULL: no --state for the tails */
	char **pass;           /* options passed on to every tail, as argv words */
	size_t npass;
};

/* Record an option (and its argument, or NULL) for every tail. A failure
 * to grow the list is remembered and refused by each_chain_check. */
void pass_add(struct each_chain *ec, const char *opt, const char *arg);

/* The command line's checks for --each-chain and --state-dir (given says
 * which; follow and emit: --follow, --emit; other: an option that does not go
 * with them), the operands. Fills ec's logdir and state_dir. 0, or 2 after
 * one line on stderr. */
int each_chain_check(struct each_chain *ec, bool given, const char *state_dir, bool follow, bool emit,
		     bool other, char *const *args, int nargs);

/* Run until SIGINT or SIGTERM (installed here), then stop every tail and
 * return the worst of their exit statuses (0, 1 or 2); 2 at once when the
 * directory cannot be read. */
int each_chain_run(const struct each_chain *ec);

#endif
