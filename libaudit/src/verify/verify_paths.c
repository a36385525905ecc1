/* SPDX-License-Identifier: MIT */
/* Input expansion shared by auditlog-verify and the token's open-time check. */
#include <dirent.h>
#include <errno.h>
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
