/* SPDX-License-Identifier: MIT */
/*
 * What every command shares (auditlog-verify, softtoken-util, the benchmarks):
 * --version, the one line a usage error gets, and how a number is read.
 */
#ifndef AUDITLOG_CLI_H
#define AUDITLOG_CLI_H

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The project version, CMake's project(VERSION): "0.1.0". */
extern const char cli_project_version[];

/* --version: "PROG (auditlog) VERSION" on stdout. Returns 0, the exit status. */
int cli_version(const char *prog);

/* A usage error: "PROG: <what>; try 'PROG --help'", one line on stderr.
 * Returns 2, the exit status of a usage error. */
__attribute__((format(printf, 2, 3))) int cli_usage_error(const char *prog, const char *fmt, ...);
__attribute__((format(printf, 2, 0))) int cli_usage_verror(const char *prog, const char *fmt, va_list ap);

/* After getopt_long() returned '?' or ':' with opterr = 0: says which option
 * and what is wrong with it (unknown, needs a value, takes no value) in one
 * line, through cli_usage_error(). optstring and longopts are those given to
 * getopt_long(). Returns 2. */
int cli_bad_option(const char *prog, const char *optstring, const struct option *longopts, char **argv);

/* A number as a person types it: decimal digits and nothing else (no sign,
 * space, base prefix or trailing junk; leading zeros are digits), at most
 * max. 0, or -EINVAL (not digits, or empty) or -ERANGE (above max); *ret is
 * written only on success. */
int cli_parse_udec(const char *s, size_t n, uint64_t max, uint64_t *ret);

/* The whole of a small regular file (a key, a witness file, a proof bundle):
 * at most max bytes, opened O_NONBLOCK (a FIFO never blocks), and with
 * nofollow O_NOFOLLOW (a key is never read through a symbolic link: -ELOOP). 0 with *ret (malloc'ed, one spare byte; the caller frees and, for
 * a key, cleanses it) and *ret_len, or -errno: -EINVAL not a regular file,
 * -EFBIG over max, -EIO a short read, -ENOMEM, or open's error. */
int cli_read_small(const char *path, size_t max, bool nofollow, uint8_t **ret, size_t *ret_len);

/* All n bytes to fd, one write after another, again after EINTR, and after
 * EAGAIN once fd takes more (an O_NONBLOCK descriptor: a pipe whose reader
 * set it so); with stop (a flag a signal handler sets), -EINTR as soon as
 * *stop is set, before each write. 0, or -errno. */
int cli_write_all(int fd, const void *p, size_t n, const volatile sig_atomic_t *stop);

/* Each complete line of the n files in turn, without its '\n', to fn: a last
 * line with no '\n' (a torn tail) and a line longer than max bytes with its
 * '\n' are passed over, but counted. fn gets the file's index, the line's
 * number (from 1) and its byte offset; it returns 0 to go on, anything else
 * to stop with that. A file that cannot be opened or read: "PROG: PATH:
 * reason" on stderr, and 2. Otherwise 0. */
typedef int cli_line_fn(void *ctx, unsigned file, uint64_t line, uint64_t pos, const char *s, size_t len);
int cli_each_line(const char *prog, char *const *paths, unsigned n, size_t max, cli_line_fn *fn, void *ctx);

#endif
