/* SPDX-License-Identifier: MIT */
/*
 * The verifying tail's state file (docs/siem.md 9): tail_state.h says what
 * it promises. The file, seven "name value" lines read with al_kv_line:
 *
 *   auditlog-verify-state 1
 *   chain_id <32 hex>
 *   header_hash <64 hex: the hash of the first record of the file>
 *   dev <decimal>
 *   ino <decimal>
 *   offset <decimal: the byte after the '\n' of the last emitted record>
 *   seq <decimal>
 *   hash <64 hex>
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "cli.h"
#include "keyfile.h"
#include "tail_state.h"
#include "verify.h"

#define STATE_MAGIC "auditlog-verify-state"
#define FIND_AGAIN_MS 1000     /* the state's file not found: listed again this long */
#define FIND_AGAIN_STEP_MS 100

struct tail_state {
	char *path, *base, *tmp; /* tmp: ".<base>.tmp" beside it */
	int dirfd;
	char *const *args;
	int nargs;
	char chain_id[33];
	/* the file of the last noted record: its header line and hash; fd -1
	 * until it is found among the inputs */
	bool have_file;
	uint8_t hdr[AL_LINE_MAX];
	size_t hdr_len;
	uint8_t hdr_hash[AL_HASH_LEN];
	int fd;
	uint64_t dev, ino;
	uint64_t off;   /* a confirmed end of a noted line in that file */
	uint64_t guess; /* the end of the last noted line if every line since off was noted */
	/* the last noted record */
	bool have_last, dirty;
	uint8_t last[AL_LINE_MAX];
	size_t last_len;
	uint64_t seq;
	uint8_t hash[AL_HASH_LEN];
	uint8_t dec[AL_LINE_MAX];
	uint8_t buf[1u << 16];
};

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return r;
}

static void free_list(char **paths, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

/* The first line of the file open at fd, when it is a header: its length
 * (without '\n'), its parse in *p; 0 when it is not one. */
static size_t read_header(struct tail_state *t, int fd, struct al_parsed *p)
{
	ssize_t n = al_pread_full(fd, t->buf, AL_LINE_MAX, 0);
	const uint8_t *nl;
	size_t err_off;

	if (n <= 0 || !(nl = memchr(t->buf, '\n', (size_t)n)))
		return 0;
	size_t len = (size_t)(nl - t->buf);
	if (al_parse(t->buf, len, t->dec, p, &err_off) != AL_PERR_OK || p->rec.type != AL_T_HEADER)
		return 0;
	return len;
}

/* Is the file at path the one whose header has hash h (pass 0: and at
 * dev/ino)? It then becomes t's file: 0; -ENOENT when it is not. */
static int try_file(struct tail_state *t, const char *path, const uint8_t h[AL_HASH_LEN], int pass,
		    uint64_t dev, uint64_t ino)
{
	struct stat st;
	struct al_parsed p;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (pass == 0 && ((uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino))) {
		close(fd);
		return -ENOENT;
	}
	size_t len = read_header(t, fd, &p);
	if (len == 0 || CRYPTO_memcmp(p.hash, h, AL_HASH_LEN) != 0) {
		close(fd);
		return -ENOENT;
	}
	if (t->fd >= 0)
		close(t->fd);
	t->fd = fd;
	t->dev = (uint64_t)st.st_dev;
	t->ino = (uint64_t)st.st_ino;
	memcpy(t->hdr, t->buf, len);
	t->hdr_len = len;
	memcpy(t->hdr_hash, h, AL_HASH_LEN);
	t->have_file = true;
	return 0;
}

/* Not among the inputs: a file named on the command line (DIR/NAME*, the
 * shell's glob) may have been renamed by the writer since the glob was
 * expanded. Look beside each input given as a file under a name not of the
 * rotated form (its active name NAME), among the regular files named
 * NAME.<anything>: the one at dev/ino first (pass 0), then by header. */
static int find_beside(struct tail_state *t, const uint8_t h[AL_HASH_LEN], bool hint, uint64_t dev, uint64_t ino)
{
	int r = -ENOENT;

	for (int pass = hint ? 0 : 1; r == -ENOENT && pass < 2; pass++) {
		for (int i = 0; r == -ENOENT && i < t->nargs; i++) {
			const char *arg = t->args[i], *sl = strrchr(arg, '/'), *base = sl ? sl + 1 : arg;
			size_t bl = strlen(base);
			struct stat st;
			uint64_t seq;
			if (!bl || lstat(arg, &st) < 0 || !S_ISREG(st.st_mode) || al_rotated_name(base, &seq))
				continue;
			char *dir = sl ? strndup(arg, (size_t)(sl - arg) + (sl == arg)) : strdup(".");
			DIR *d = dir ? opendir(dir) : NULL;
			struct dirent *e;
			while (d && r == -ENOENT && (e = readdir(d))) {
				char *path;
				if (strncmp(e->d_name, base, bl) != 0 || e->d_name[bl] != '.' ||
				    asprintf(&path, "%s/%s", dir, e->d_name) < 0)
					continue;
				r = try_file(t, path, h, pass, dev, ino);
				free(path);
			}
			if (d)
				closedir(d);
			free(dir);
		}
	}
	return r;
}

/* Find, among the inputs, the file whose header has hash h (the one at
 * dev/ino first, when given), else beside them (find_beside); it becomes
 * t's file. 0, -ENOENT, or -errno. */
static int find_file(struct tail_state *t, const uint8_t h[AL_HASH_LEN], bool hint, uint64_t dev, uint64_t ino)
{
	char **paths = NULL;
	unsigned n = 0, cap = 0;
	int r = 0;

	for (int i = 0; r == 0 && i < t->nargs; i++)
		r = al_verify_add_path(t->args[i], &paths, &n, &cap);
	if (r < 0) {
		free_list(paths, n);
		return r;
	}
	r = -ENOENT;
	for (int pass = hint ? 0 : 1; r == -ENOENT && pass < 2; pass++)
		for (unsigned i = 0; r == -ENOENT && i < n; i++)
			r = try_file(t, paths[i], h, pass, dev, ino);
	free_list(paths, n);
	if (r == -ENOENT)
		r = find_beside(t, h, hint, dev, ino);
	return r;
}

static bool hex_field(struct al_kv *c, const char *name, uint8_t *out, size_t n)
{
	const uint8_t *v;
	size_t vn;
	return al_kv_line(c, name, &v, &vn) && vn == 2 * n && al_unhex(v, vn, out) == 0;
}

static bool num_field(struct al_kv *c, const char *name, uint64_t max, uint64_t *out)
{
	const uint8_t *v;
	size_t vn;
	return al_kv_line(c, name, &v, &vn) && cli_parse_udec((const char *)v, vn, max, out) == 0;
}

/* The line that ends at off in t's file (its '\n' at off - 1) is record
 * seq with hash h: it becomes the last noted one. */
static bool record_at(struct tail_state *t, uint64_t off, uint64_t seq, const uint8_t h[AL_HASH_LEN])
{
	size_t want = off < AL_LINE_MAX + 1 ? (size_t)off : AL_LINE_MAX + 1, err_off;
	struct al_parsed p;

	if (off < t->hdr_len + 1 || al_pread_full(t->fd, t->buf, want, off - want) != (ssize_t)want ||
	    t->buf[want - 1] != '\n')
		return false;
	size_t s = want - 1;
	while (s > 0 && t->buf[s - 1] != '\n')
		s--;
	if (s == 0 && want == AL_LINE_MAX + 1 && off > want)
		return false; /* longer than any canonical line */
	size_t len = want - 1 - s;
	if (al_parse(t->buf + s, len, t->dec, &p, &err_off) != AL_PERR_OK || p.rec.f[AL_F_SEQ].u != seq ||
	    CRYPTO_memcmp(p.hash, h, AL_HASH_LEN) != 0)
		return false;
	memcpy(t->last, t->buf + s, len);
	t->last_len = len;
	t->seq = seq;
	memcpy(t->hash, h, AL_HASH_LEN);
	t->have_last = true;
	t->off = t->guess = off;
	return true;
}

static int load(struct tail_state *t, char *err, size_t errlen)
{
	uint8_t *buf = NULL, hh[AL_HASH_LEN], h[AL_HASH_LEN], cid[16];
	size_t n = 0;
	const uint8_t *v;
	size_t vn;
	uint64_t dev, ino, off, seq;
	int r = cli_read_small(t->path, 4096, true, &buf, &n);

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return fail(err, errlen, r, "cannot read it: %s", strerror(-r));
	struct al_kv c = {.p = buf, .n = n, .i = 0};
	bool ok = al_kv_line(&c, STATE_MAGIC, &v, &vn) && vn == 1 && v[0] == '1';
	const uint8_t *cidv = NULL;
	if (ok && al_kv_line(&c, "chain_id", &cidv, &vn))
		ok = vn == 32 && al_unhex(cidv, 32, cid) == 0;
	else
		ok = false;
	ok = ok && hex_field(&c, "header_hash", hh, AL_HASH_LEN) && num_field(&c, "dev", UINT64_MAX, &dev) &&
	     num_field(&c, "ino", UINT64_MAX, &ino) && num_field(&c, "offset", UINT64_MAX, &off) &&
	     num_field(&c, "seq", AL_INT_MAX, &seq) && hex_field(&c, "hash", h, AL_HASH_LEN) && c.i == c.n;
	if (ok) {
		memcpy(t->chain_id, cidv, 32);
		t->chain_id[32] = 0;
	}
	free(buf);
	if (!ok)
		return fail(err, errlen, -EINVAL, "not a state file of auditlog-verify (docs/siem.md 9)");

	char hex[2 * AL_HASH_LEN + 1] = {0};
	al_hex(hh, AL_HASH_LEN, hex);
	/* A directory listing that runs while the writer renames the state's
	 * file (a rotation) can miss it under both names: ext4 lists a
	 * directory in hash order, and the new name may land behind the
	 * listing's position while the old one is gone before it gets there.
	 * A file renamed once is in the next listing, so the inputs are listed
	 * again, for up to FIND_AGAIN_MS, before the state is refused. */
	for (unsigned waited = 0; (r = find_file(t, hh, true, dev, ino)) == -ENOENT && waited < FIND_AGAIN_MS;
	     waited += FIND_AGAIN_STEP_MS)
		nanosleep(&(struct timespec){.tv_nsec = FIND_AGAIN_STEP_MS * 1000000L}, NULL);
	if (r == -ENOENT)
		return fail(err, errlen, -ENOENT,
			    "no input file begins with the header it names (hash %s): the state is for another "
			    "log, or that file was deleted or is not among the inputs",
			    hex);
	if (r < 0)
		return fail(err, errlen, r, "cannot list the inputs: %s", strerror(-r));
	struct al_parsed p;
	size_t err_off;
	if (al_parse(t->hdr, t->hdr_len, t->dec, &p, &err_off) != AL_PERR_OK ||
	    p.rec.f[AL_F_CHAIN_ID].n != 32 || memcmp(p.rec.f[AL_F_CHAIN_ID].p, t->chain_id, 32) != 0)
		return fail(err, errlen, -ESTALE, "it names chain %s, the file of its header another", t->chain_id);
	if (!record_at(t, off, seq, h)) {
		al_hex(h, AL_HASH_LEN, hex);
		return fail(err, errlen, -ESTALE,
			    "the record it names (seq %" PRIu64 ", hash %s) is not the line that ends at offset %" PRIu64
			    " of the file of its header",
			    seq, hex, off);
	}
	t->dirty = false;
	return 1;
}

int tail_state_open(const char *path, char *const *args, int nargs, struct tail_state **ret, char *err,
		    size_t errlen)
{
	struct tail_state *t = calloc(1, sizeof(*t));
	const char *slash = strrchr(path, '/');
	char *dir = NULL;
	int r;

	if (!t)
		return fail(err, errlen, -ENOMEM, "%s", strerror(ENOMEM));
	t->fd = t->dirfd = -1;
	t->args = args;
	t->nargs = nargs;
	if (!(t->path = strdup(path)) || !(t->base = strdup(slash ? slash + 1 : path)) ||
	    asprintf(&t->tmp, ".%s.tmp", t->base) < 0 ||
	    !(dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup("."))) {
		t->tmp = NULL;
		r = fail(err, errlen, -ENOMEM, "%s", strerror(ENOMEM));
		goto out;
	}
	if (!t->base[0] || strcmp(t->base, ".") == 0 || strcmp(t->base, "..") == 0) {
		r = fail(err, errlen, -EINVAL, "wants a file name");
		goto out;
	}
	if ((t->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = fail(err, errlen, -errno, "cannot open its directory: %s", strerror(errno));
		goto out;
	}
	/* a state file the listing of a log directory would take for a log file */
	struct stat ds, as;
	if (t->base[0] != '.' && fstat(t->dirfd, &ds) == 0)
		for (int i = 0; i < nargs; i++)
			if (stat(args[i], &as) == 0 && S_ISDIR(as.st_mode) && as.st_dev == ds.st_dev &&
			    as.st_ino == ds.st_ino) {
				r = fail(err, errlen, -EINVAL,
					 "is in a log directory given as input: keep it elsewhere, or give it a "
					 "name that begins with '.' (such files are not read as logs)");
				goto out;
			}
	r = load(t, err, errlen);
out:
	free(dir);
	if (r < 0) {
		tail_state_free(t);
		return r;
	}
	*ret = t;
	return r;
}

void tail_state_free(struct tail_state *t)
{
	if (!t)
		return;
	if (t->fd >= 0)
		close(t->fd);
	if (t->dirfd >= 0)
		close(t->dirfd);
	free(t->path);
	free(t->base);
	free(t->tmp);
	free(t);
}

void tail_resume(const struct tail_state *t, uint64_t *seq, uint8_t hash[AL_HASH_LEN], char chain_id[33])
{
	*seq = t->seq;
	memcpy(hash, t->hash, AL_HASH_LEN);
	memcpy(chain_id, t->chain_id, 33);
}

int tail_note(struct tail_state *t, const uint8_t *line, size_t len, const struct al_parsed *p)
{
	if (len >= AL_LINE_MAX)
		return -E2BIG;
	if (p->rec.type == AL_T_HEADER) {
		/* a new file: found among the inputs when the state is saved */
		if (t->fd >= 0)
			close(t->fd);
		t->fd = -1;
		t->have_file = true;
		memcpy(t->hdr, line, len);
		t->hdr_len = len;
		memcpy(t->hdr_hash, p->hash, AL_HASH_LEN);
		if (p->rec.f[AL_F_CHAIN_ID].n == 32) {
			memcpy(t->chain_id, p->rec.f[AL_F_CHAIN_ID].p, 32);
			t->chain_id[32] = 0;
		}
		t->off = 0;
		t->guess = len + 1;
	} else {
		t->guess += len + 1;
	}
	memcpy(t->last, line, len);
	t->last_len = len;
	t->seq = p->rec.f[AL_F_SEQ].u;
	memcpy(t->hash, p->hash, AL_HASH_LEN);
	t->have_last = t->dirty = true;
	return 0;
}

bool tail_dirty(const struct tail_state *t)
{
	return t->dirty;
}

/* The end of the last noted line in t's file: where the count of noted
 * lines says when no line went unnoted since off (the common case), else
 * found by reading on from off. 0 or -ESTALE / -errno. */
static int locate_last(struct tail_state *t)
{
	size_t n = t->last_len + 1;

	if (t->guess >= n && al_pread_full(t->fd, t->buf, n, t->guess - n) == (ssize_t)n &&
	    memcmp(t->buf, t->last, t->last_len) == 0 && t->buf[t->last_len] == '\n') {
		t->off = t->guess;
		return 0;
	}
	/* lines the engine did not pass on (damage, a recovery's): read them */
	uint64_t pos = t->off;
	for (;;) {
		ssize_t got = al_pread_full(t->fd, t->buf, sizeof(t->buf), pos);
		if (got < 0)
			return -errno;
		if (got == 0)
			return -ESTALE;
		const uint8_t *p = t->buf, *end = t->buf + got, *nl;
		while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
			if ((size_t)(nl - p) == t->last_len && memcmp(p, t->last, t->last_len) == 0) {
				t->off = t->guess = pos + (uint64_t)(nl + 1 - t->buf);
				return 0;
			}
			p = nl + 1;
		}
		/* on from the start of the partial line (the whole buffer when it
		 * holds no '\n': a line longer than any record is not the one) */
		pos += p > t->buf ? (uint64_t)(p - t->buf) : (uint64_t)got;
	}
}

int tail_save(struct tail_state *t, char *err, size_t errlen)
{
	char text[512], hh[2 * AL_HASH_LEN + 1] = {0}, h[2 * AL_HASH_LEN + 1] = {0};
	int r, fd = -1;

	if (!t->dirty)
		return 0;
	if (!t->have_file)
		return fail(err, errlen, -EINVAL, "no header record met: the position has no file");
	if (t->fd < 0) {
		/* a rotation renames files while they are listed: a name read
		 * before a rename may be gone, the new one not yet seen */
		for (int i = 0; i < 20; i++) {
			uint8_t want[AL_HASH_LEN];
			memcpy(want, t->hdr_hash, AL_HASH_LEN);
			if ((r = find_file(t, want, false, 0, 0)) != -ENOENT)
				break;
			struct timespec ts = {0, 20 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
		if (r < 0)
			return fail(err, errlen, r, "the file of the last emitted record is not among the inputs: %s",
				    strerror(-r));
	}
	if ((r = locate_last(t)) < 0)
		return fail(err, errlen, r, "the last emitted record (seq %" PRIu64 ") is not in its file: %s", t->seq,
			    strerror(-r));
	al_hex(t->hdr_hash, AL_HASH_LEN, hh);
	al_hex(t->hash, AL_HASH_LEN, h);
	int len = snprintf(text, sizeof(text),
			   STATE_MAGIC " 1\nchain_id %s\nheader_hash %s\ndev %" PRIu64 "\nino %" PRIu64
				       "\noffset %" PRIu64 "\nseq %" PRIu64 "\nhash %s\n",
			   t->chain_id, hh, t->dev, t->ino, t->off, t->seq, h);
	fd = openat(t->dirfd, t->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(err, errlen, -errno, "cannot create %s: %s", t->tmp, strerror(errno));
	for (int done = 0; done < len;) {
		ssize_t w = write(fd, text + done, (size_t)(len - done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			r = -errno;
			goto err;
		}
		done += (int)w;
	}
	if (fsync(fd) < 0) {
		r = -errno;
		goto err;
	}
	r = close(fd);
	fd = -1;
	if (r < 0 || renameat(t->dirfd, t->tmp, t->dirfd, t->base) < 0 || fsync(t->dirfd) < 0) {
		r = -errno;
		goto err;
	}
	t->dirty = false;
	return 0;
err:
	if (fd >= 0)
		close(fd);
	(void)unlinkat(t->dirfd, t->tmp, 0);
	return fail(err, errlen, r, "cannot write it: %s", strerror(-r));
}
