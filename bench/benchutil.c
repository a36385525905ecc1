/* SPDX-License-Identifier: MIT */
/* What auditlog-bench and p11-bench share: argument parsing, timing,
 * percentiles, number formatting, the JSON writer, file system names. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "cli.h"

__attribute__((format(printf, 1, 2), noreturn)) void bad_arg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_usage_verror(bench_prog, fmt, ap);
	va_end(ap);
	exit(2);
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile (q in 0..1) of a sorted array. */
uint64_t pct(const uint64_t *v, size_t n, double q)
{
	double x = q * (double)n;
	size_t k = (size_t)x;

	if (n == 0)
		return 0;
	if ((double)k < x)
		k++;
	if (k == 0)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

void fmt_count(double v, char *out, size_t cap)
{
	char tmp[32];
	int n, j = 0, lead;

	if (!isfinite(v) || v < 0) {
		snprintf(out, cap, "-");
		return;
	}
	n = snprintf(tmp, sizeof(tmp), "%.0f", v);
	lead = n % 3 ? n % 3 : 3;
	for (int i = 0; i < n && (size_t)j + 2 < cap; i++) {
		if (i && (i - lead) % 3 == 0)
			out[j++] = ',';
		out[j++] = tmp[i];
	}
	out[j] = '\0';
}

/* Read a small text file whole (NUL-terminated, trailing newline cut). */
int read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, cap - 1);
	while (n < 0 && errno == EINTR);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return (int)n;
}

const char *magic_name(unsigned long m)
{
	switch (m) {
	case EXT4_SUPER_MAGIC: return "ext2/3/4";
	case XFS_SUPER_MAGIC: return "xfs";
	case BTRFS_SUPER_MAGIC: return "btrfs";
	case TMPFS_MAGIC: return "tmpfs";
	case RAMFS_MAGIC: return "ramfs";
	case OVERLAYFS_SUPER_MAGIC: return "overlay";
	case NFS_SUPER_MAGIC: return "nfs";
	case F2FS_SUPER_MAGIC: return "f2fs";
	case 0x2fc12fc1: return "zfs";
	case 0x65735546: return "fuse";
	default: return "unknown";
	}
}

/* Decimal, no sign; with `suffixes`, an optional K, M or G (powers of 1024). */
bool parse_u64(const char *s, bool suffixes, uint64_t *ret)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return false;
	if (suffixes && *end) {
		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: return false;
		}
		end++;
		if (*end == 'i' && end[1] == 'B')
			end += 2;
		else if (*end == 'B')
			end++;
	}
	if (*end)
		return false;
	if (shift && v > (UINT64_MAX >> shift))
		return false;
	*ret = (uint64_t)v << shift;
	return true;
}

uint64_t arg_u64(const char *opt, const char *val, uint64_t lo, uint64_t hi, bool suffixes)
{
	uint64_t v;

	if (!parse_u64(val, suffixes, &v))
		bad_arg("%s: not a non-negative integer: '%s'", opt, val);
	if (v < lo || v > hi)
		bad_arg("%s: %" PRIu64 " is out of range %" PRIu64 "..%" PRIu64, opt, v, lo, hi);
	return v;
}

/* k NULL: an array's element, as jopen's */
void jkey(struct jw *j, const char *k)
{
	if (!j->first)
		fputc(',', j->f);
	if (k)
		fprintf(j->f, "\"%s\":", k);
	j->first = false;
}

void jstr(struct jw *j, const char *k, const char *v)
{
	jkey(j, k);
	fputc('"', j->f);
	for (const unsigned char *s = (const unsigned char *)v; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(j->f, "\\%c", *s);
		else if (*s < 0x20)
			fprintf(j->f, "\\u%04x", *s);
		else
			fputc(*s, j->f);
	}
	fputc('"', j->f);
}

void jfix(struct jw *j, const char *k, double v, int prec)
{
	jkey(j, k);
	if (isfinite(v))
		fprintf(j->f, "%.*f", prec, v);
	else
		fputs("null", j->f);
}

void ju64(struct jw *j, const char *k, uint64_t v)
{
	jkey(j, k);
	fprintf(j->f, "%" PRIu64, v);
}

void jbool(struct jw *j, const char *k, bool v)
{
	jkey(j, k);
	fputs(v ? "true" : "false", j->f);
}

void jopen(struct jw *j, const char *k, char c)
{
	if (k)
		jkey(j, k);
	else if (!j->first)
		fputc(',', j->f);
	fputc(c, j->f);
	j->first = true;
}

void jclose(struct jw *j, char c)
{
	fputc(c, j->f);
	j->first = false;
}
