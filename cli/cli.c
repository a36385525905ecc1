/* SPDX-License-Identifier: MIT */
/* --version, usage errors and numbers for every command (cli.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#ifndef AUDITLOG_PROJECT_VERSION
#error "AUDITLOG_PROJECT_VERSION comes from CMake's project(VERSION) (cli/CMakeLists.txt)"
#endif

const char cli_project_version[] = AUDITLOG_PROJECT_VERSION;

int cli_version(const char *prog)
{
	printf("%s (auditlog) %s\n", prog, cli_project_version);
	return 0;
}

int cli_usage_verror(const char *prog, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "; try '%s --help'\n", prog);
	return 2;
}

int cli_usage_error(const char *prog, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cli_usage_verror(prog, fmt, ap);
	va_end(ap);
	return 2;
}

/* The long option getopt_long() complained about: argv[optind - 1] is
 * "--name" or "--name=value", and (unless it was unknown) the option's val is
 * optopt. A short option in a cluster leaves argv[optind - 1] at an earlier
 * argument, hence the check against the table. */
static const struct option *long_option(const struct option *longopts, const char *arg, size_t len)
{
	const struct option *hit = NULL;

	for (const struct option *o = longopts; o && o->name; o++) {
		if (o->val != optopt || strncmp(o->name, arg, len) != 0)
			continue;
		if (o->name[len] == '\0')
			return o; /* exact */
		hit = o;  /* an abbreviation getopt_long took */
	}
	return hit;
}

int cli_bad_option(const char *prog, const char *optstring, const struct option *longopts, char **argv)
{
	const char *arg = optind > 0 ? argv[optind - 1] : NULL;
	bool is_long = arg && strncmp(arg, "--", 2) == 0 && arg[2];

	if (is_long) {
		const char *name = arg + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		const struct option *o = optopt ? long_option(longopts, name, len) : NULL;

		if (optopt == 0) { /* glibc: unknown or ambiguous */
			unsigned n = 0;
			for (const struct option *p = longopts; p && p->name; p++)
				n += strncmp(p->name, name, len) == 0;
			return cli_usage_error(prog, "%s option '--%.*s'", n > 1 ? "ambiguous" : "unknown",
					       (int)len, name);
		}
		if (o && eq && o->has_arg == no_argument)
			return cli_usage_error(prog, "option '--%s' takes no value", o->name);
		if (o)
			return cli_usage_error(prog, "option '--%s' needs a value", o->name);
	}
	if (optopt > 0 && optopt < 256 && optopt != ':') {
		const char *in = strchr(optstring, optopt);
		if (in && in[1] == ':')
			return cli_usage_error(prog, "option '-%c' needs a value", optopt);
		return cli_usage_error(prog, "unknown option '-%c'", optopt);
	}
	return cli_usage_error(prog, "bad option '%s'", arg ? arg : "?");
}

int cli_parse_udec(const char *s, size_t n, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;

	if (n == 0)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (d > max || v > (max - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*ret = v;
	return 0;
}

int cli_read_small(const char *path, size_t max, bool nofollow, uint8_t **ret, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0));
	struct stat st;
	uint8_t *buf;
	size_t n = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		int e = !S_ISREG(st.st_mode) ? -EINVAL : -EFBIG;
		close(fd);
		return e;
	}
	buf = malloc((size_t)st.st_size + 1);
	while (buf && n < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + n, (size_t)st.st_size - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	if (!buf || n != (size_t)st.st_size) {
		free(buf);
		return buf ? -EIO : -ENOMEM;
	}
	*ret = buf;
	*ret_len = n;
	return 0;
}

int cli_write_all(int fd, const void *p, size_t n, const volatile sig_atomic_t *stop)
{
	const uint8_t *b = p;

	while (n > 0) {
		if (stop && *stop)
			return -EINTR;
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			/* an O_NONBLOCK descriptor it was given (a pipe of the
			 * program reading it): wait until it takes more, looking
			 * at stop at least once a second */
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			(void)poll(&pf, 1, 1000);
			continue;
		}
		if (w < 0)
			return -errno;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int cli_each_line(const char *prog, char *const *paths, unsigned n, size_t max, cli_line_fn *fn, void *ctx)
{
	char *buf = NULL;
	size_t cap = 0;
	int ret = 0;

	for (unsigned i = 0; i < n && ret == 0; i++) {
		FILE *f = fopen(paths[i], "rbe");
		uint64_t line = 0, pos = 0;
		ssize_t k;

		if (!f) {
			fprintf(stderr, "%s: %s: %s\n", prog, paths[i], strerror(errno));
			ret = 2;
			break;
		}
		while (ret == 0 && (k = getline(&buf, &cap, f)) > 0) {
			uint64_t at = pos;
			line++;
			pos += (uint64_t)k;
			if (buf[k - 1] == '\n' && (size_t)k <= max)
				ret = fn(ctx, i, line, at, buf, (size_t)k - 1);
		}
		if (ret == 0 && ferror(f)) {
			fprintf(stderr, "%s: %s: %s\n", prog, paths[i], strerror(errno));
			ret = 2;
		}
		fclose(f);
	}
	free(buf);
	return ret;
}
