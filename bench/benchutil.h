/* SPDX-License-Identifier: MIT */
/* What auditlog-bench and p11-bench share (benchutil.c). */
#ifndef AUDITLOG_BENCHUTIL_H
#define AUDITLOG_BENCHUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The program's name in messages: each benchmark defines it. */
extern const char *const bench_prog;

/* A JSON writer: keys and values in order, commas placed for the caller. */
struct jw {
	FILE *f;
	bool first;
};

__attribute__((format(printf, 1, 2), noreturn)) void bad_arg(const char *fmt, ...);
uint64_t now_ns(void);
int cmp_u64(const void *a, const void *b);
uint64_t pct(const uint64_t *v, size_t n, double q);
void fmt_count(double v, char *out, size_t cap);
int read_small(const char *path, char *buf, size_t cap);
const char *magic_name(unsigned long m);
bool parse_u64(const char *s, bool suffixes, uint64_t *ret);
uint64_t arg_u64(const char *opt, const char *val, uint64_t lo, uint64_t hi, bool suffixes);
void jkey(struct jw *j, const char *k);
void jstr(struct jw *j, const char *k, const char *v);
void jfix(struct jw *j, const char *k, double v, int prec);
void ju64(struct jw *j, const char *k, uint64_t v);
void jbool(struct jw *j, const char *k, bool v);
void jopen(struct jw *j, const char *k, char c);
void jclose(struct jw *j, char c);

#endif
