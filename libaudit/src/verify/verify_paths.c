/* SPDX-License-Identifier: MIT */
/* Input expansion shared by auditlog-verify and the token's open-time check. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "verify.h"

static int push(char ***list, unsigned *n, unsigned *cap, char *p)
{
	if (!p)
		return -ENOMEM;
	if (*n == *cap) {
		unsigned ncap = *cap ? *cap * 2 : 16;
		char **l = realloc(*list, ncap * sizeof(char *));
		if (!l) {
			free(p);
			return -ENOMEM;
		}
		*list = l;
		*cap = ncap;
	}
	(*list)[(*n)++] = p;
	return 0;
}

int al_verify_add_path(const char *path, char ***list, unsigned *n, unsigned *cap)
{
	struct stat st;
	struct dirent *e;
	DIR *d;
	int r = 0;

	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return push(list, n, cap, strdup(path));
	d = opendir(path);
	if (!d)
		return -errno;
	while (r == 0 && (e = readdir(d))) {
		char *p;
		struct stat fs;
		if (e->d_name[0] == '.')
			continue;
		if (asprintf(&p, "%.*s/%s", (int)al_dir_len(path), path, e->d_name) < 0)
			return closedir(d), -ENOMEM;
		/* regular files only: a symlink, a FIFO, a device or a socket in a
		 * log directory is not a log file (and a FIFO would block a read) */
		if (lstat(p, &fs) < 0 || !S_ISREG(fs.st_mode)) {
			free(p);
			continue;
		}
		r = push(list, n, cap, p);
	}
	closedir(d);
	return r;
}

int al_verify_note_dir(const char *path, char ***list, unsigned *n, unsigned *cap)
{
	struct stat st;

	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	return push(list, n, cap, strdup(path));
}

/* (verify.h) */
size_t al_rotated_name(const char *base, uint64_t *ret_seq)
{
	size_t len = strlen(base), i, dash;
	uint64_t seq = 0;

	for (dash = len; dash > 0 && base[dash - 1] != '-'; dash--)
		;
	/* ".YYYYMMDDTHHMMSS.NNNNNNNNNZ-" is 28 bytes before the seq, after >= 1 of the name */
	if (dash < 29 || dash == len || len - dash > 16 || base[dash - 28] != '.')
		return 0;
	for (i = dash; i < len; i++) {
		if (base[i] < '0' || base[i] > '9')
			return 0;
		seq = seq * 10 + (uint64_t)(base[i] - '0');
	}
	for (i = 0; i < 26; i++) {
		char ch = base[dash - 27 + i];
		bool ok = i == 8 ? ch == 'T' : i == 15 ? ch == '.' : i == 25 ? ch == 'Z' : (ch >= '0' && ch <= '9');
		if (!ok)
			return 0;
	}
	*ret_seq = seq;
	return dash - 28;
}
