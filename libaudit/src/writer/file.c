/* SPDX-License-Identifier: MIT */
/*
 * Log files: open and lock, O(1) tail recovery, and switching to a new file
 * (rotation, failover after an I/O error, untrusted tail). docs/format.md 6-7.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "log.h"
#include "recovery.h"

uint64_t al_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void al_random_id(uint8_t out[16])
{
	size_t got = 0;
	while (got < 16) {
		ssize_t r = getrandom(out + got, 16 - got, 0);
		if (r > 0)
			got += (size_t)r;
		/* EINTR: retry; getrandom never fails otherwise once the pool is up */
	}
}

int al_read_hooked(struct auditlog *l, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	if (l->cfg.has_hooks && l->cfg.hooks.before_read)
		l->cfg.hooks.before_read(l->cfg.hooks.ctx, l->fd, off, len);
	while (done < len) {
		ssize_t r = pread(l->fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO; /* the file shrank under us */
		done += (size_t)r;
	}
	return 0;
}

/* pwrite + fdatasync through the hooks; used at open and when switching files. */
int al_write_sync(struct auditlog *l, const void *buf, size_t len, uint64_t off)
{
	const struct al_io_hooks *h = l->cfg.has_hooks ? &l->cfg.hooks : NULL;
	size_t done = 0;
	int r;

	while (done < len) {
		size_t n = len - done;
		long res;
		if (h && h->before_write && (r = h->before_write(h->ctx, l->fd, off + done, &n)) < 0)
			res = r;
		else {
			ssize_t w = pwrite(l->fd, (const uint8_t *)buf + done, n, (off_t)(off + done));
			res = w < 0 ? -errno : w;
		}
		if (h && h->after_write)
			h->after_write(h->ctx, l->fd, off + done, n, res);
		if (res == -EINTR)
			continue;
		if (res < 0)
			return (int)res;
		if (res == 0)
			return -EIO;
		if ((size_t)res < len - done)
			atomic_fetch_add(&l->st.short_writes, 1);
		done += (size_t)res;
	}
	if (h && h->skip_fsync)
		return 0;
	if (h && h->before_fsync && (r = h->before_fsync(h->ctx, l->fd, off, len)) < 0)
		;
	else
		r = fdatasync(l->fd) < 0 ? -errno : 0;
	if (h && h->after_fsync)
		h->after_fsync(h->ctx, l->fd, off, len, r);
	if (r == 0)
		atomic_fetch_add(&l->st.fsyncs, 1);
	return r;
}

static int lock_fd(int fd)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	if (fcntl(fd, F_OFD_SETLK, &fl) < 0)
		return errno == EAGAIN || errno == EACCES ? -EBUSY : -errno;
	return 0;
}

/* Open (or create, with excl) the active file under the directory fd, check
 * it is a lone regular file, and lock it. */
static int open_locked(struct auditlog *l, bool excl, struct stat *ret_st)
{
	int flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (excl ? O_EXCL : 0);
	int fd = openat(l->dirfd, l->base, flags, 0600);
	struct stat st;
	int r;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto err;
	}
	if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		goto err;
	}
	if (st.st_nlink > 1) {
		r = -EMLINK;
		goto err;
	}
	r = lock_fd(fd);
	if (r < 0)
		goto err;
	/* The lock is taken: re-read the size (a previous holder may have written). */
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto err;
	}
	l->fd = fd;
	*ret_st = st;
	return 0;
err:
	close(fd);
	return r;
}

static bool chains(const struct head *h, const struct al_parsed *p, const uint8_t *line,
		   uint8_t *work)
{
	uint8_t out[AL_HASH_LEN];
	int cmp;

	if (p->rec.f[AL_F_SEQ].u != h->seq + 1 || p->rec.version < h->version)
		return false;
	cmp = memcmp(p->rec.f[AL_F_TIMESTAMP].p, h->ts_str, AL_TS_LEN);
	if (cmp < 0)
		return false;
	return al_check_hash(p, line, h->hash, work, out);
}

uint64_t al_ts_ns(const char ts[AL_TS_LEN])
{
	int64_t sec = 0;
	uint64_t frac = 0;

	(void)al_parse_ts((const uint8_t *)ts, AL_TS_LEN, &sec);
	for (int i = 20; i < 29; i++)
		frac = frac * 10 + (uint64_t)(ts[i] - '0');
	return (uint64_t)sec * 1000000000u + frac;
}

static void head_from(struct head *h, const struct al_parsed *p)
{
	h->seq = p->rec.f[AL_F_SEQ].u;
	memcpy(h->hash, p->hash, AL_HASH_LEN);
	memcpy(h->ts_str, p->rec.f[AL_F_TIMESTAMP].p, AL_TS_LEN);
	h->ts_ns = al_ts_ns(h->ts_str);
	h->version = p->rec.version;
	h->empty = false;
}

/*
 * Walk the tail window forward (docs/format.md 7). On return *ret_good_end is
 * the file offset just past the last trusted record (whose state is in *h).
 */
static int scan_tail(struct auditlog *l, const uint8_t *buf, size_t win, uint64_t start,
		     struct head *h, uint64_t *ret_good_end, bool *ret_unterminated)
{
	struct al_parsed p;
	size_t err_off, pos = 0;
	bool have = false, damaged = false;
	uint64_t good_end = 0, anchor_off = 0;

	if (start > 0) {
		const uint8_t *nl = memchr(buf, '\n', win);
		if (!nl)
			return -EBADMSG;
		pos = (size_t)(nl - buf) + 1;
	}
	while (pos < win) {
		const uint8_t *line = buf + pos;
		const uint8_t *nl = memchr(line, '\n', win - pos);
		if (!nl)
			break;
		size_t len = (size_t)(nl - line);
		bool ok = al_parse(line, len, l->dec, &p, &err_off) == AL_PERR_OK;

		if (ok && !have) {
			/* anchor: the first complete line of the window */
			head_from(h, &p);
			have = true;
			anchor_off = start + pos;
		} else if (ok && chains(h, &p, line, l->work)) {
			head_from(h, &p);
		} else if (ok && p.rec.type == AL_T_RECOVERY &&
			   p.rec.f[AL_F_DAMAGE_OFFSET].u <= anchor_off &&
			   p.rec.f[AL_F_DAMAGE_OFFSET].u + p.rec.f[AL_F_DAMAGE_LENGTH].u <=
				   start + pos) {
			/* an earlier repair whose damage covers everything we anchored
			 * on: those lines were orphans; trust the repair instead */
			head_from(h, &p);
		} else {
			/* damage at good_end: bridged only by a recovery record that
			 * repairs it (recovery.c: the rule the verifier applies too) */
			struct al_recovery_mem wm = {.buf = buf, .start = start, .n = win};
			struct al_recovery_io io = al_recovery_mem_io(&wm);
			struct al_tailrec t = {.seq = h->seq, .version = h->version};
			memcpy(t.hash, h->hash, AL_HASH_LEN);
			memcpy(t.ts, h->ts_str, AL_TS_LEN);
			size_t q = pos;
			bool bridged = false;
			while (q < win && !bridged) {
				const uint8_t *l2 = buf + q;
				const uint8_t *nl2 = memchr(l2, '\n', win - q);
				if (!nl2)
					break;
				size_t len2 = (size_t)(nl2 - l2);
				struct al_parsed r;
				if (good_end >= start && al_maybe_recovery(l2, len2) &&
				    al_parse(l2, len2, l->dec, &r, &err_off) == AL_PERR_OK &&
				    al_recovery_repairs(&r, l2, start + q, good_end, &t, &io, l->work)) {
					head_from(h, &r);
					nl = nl2;
					bridged = true;
				}
				q = (size_t)(nl2 - buf) + 1;
			}
			if (!bridged) {
				damaged = true;
				break;
			}
		}
		good_end = start + (size_t)(nl - buf) + 1;
		pos = (size_t)(nl - buf) + 1;
	}
	if (!have)
		return -EBADMSG;
	/* A last line that lacks only its '\n' (the crash fell between its bytes
	 * and the newline) is a whole record that chains on: keep it, and let
	 * the caller end it, rather than call a valid record damage. */
	*ret_unterminated = false;
	if (!damaged && pos < win &&
	    al_parse(buf + pos, win - pos, l->dec, &p, &err_off) == AL_PERR_OK &&
	    chains(h, &p, buf + pos, l->work)) {
		head_from(h, &p);
		good_end = start + win;
		*ret_unterminated = true;
	}
	*ret_good_end = good_end;
	return 0;
}

static int read_first_header(struct auditlog *l, uint64_t size, struct al_parsed *p, uint8_t *buf)
{
	size_t n = size < AL_LINE_MAX ? (size_t)size : AL_LINE_MAX, err_off;
	int r = al_read_hooked(l, buf, n, 0);
	const uint8_t *nl;

	if (r < 0)
		return r;
	nl = memchr(buf, '\n', n);
	if (!nl || al_parse(buf, (size_t)(nl - buf), l->dec, p, &err_off) != AL_PERR_OK ||
	    p->rec.type != AL_T_HEADER)
		return -EBADMSG;
	return 0;
}

/* Repair tail damage in place: an optional '\n' and a recovery record. */
static int write_recovery(struct auditlog *l, const uint8_t *damage, uint64_t good_end,
			  uint64_t size)
{
	struct al_record rec = {.type = AL_T_RECOVERY};
	uint8_t md[AL_HASH_LEN];
	char mdhex[64];
	uint8_t *out = l->line;
	size_t pre = 0;
	uint64_t dl = size - good_end;
	long n;
	int r;

	SHA256(damage, dl, md);
	al_hex(md, AL_HASH_LEN, mdhex);
	rec.present = AL_BIT(AL_F_LAST_SEQ) | AL_BIT(AL_F_DAMAGE_OFFSET) |
		      AL_BIT(AL_F_DAMAGE_LENGTH) | AL_BIT(AL_F_DAMAGE_SHA256);
	rec.f[AL_F_LAST_SEQ].u = l->tail.seq;
	rec.f[AL_F_DAMAGE_OFFSET].u = good_end;
	rec.f[AL_F_DAMAGE_LENGTH].u = dl;
	rec.f[AL_F_DAMAGE_SHA256].p = (const uint8_t *)mdhex;
	rec.f[AL_F_DAMAGE_SHA256].n = 64;

	uint8_t buf[AL_LINE_MAX + 1];
	if (damage[dl - 1] != '\n')
		buf[pre++] = '\n';
	n = al_chain_append(l, &rec, al_now_ns(), out);
	if (n < 0)
		return (int)n;
	memcpy(buf + pre, out, (size_t)n);
	r = al_write_sync(l, buf, pre + (size_t)n, size);
	if (r < 0)
		return r;
	l->file_off = size + pre + (size_t)n;
	atomic_fetch_add(&l->st.recoveries, 1);
	return 0;
}

static void name_rotated(struct auditlog *l, char *out, size_t cap)
{
	char ts[AL_TS_LEN];
	al_format_ts(al_now_ns(), ts);
	/* 2026-11-30T10:48:14.123456789Z -> 20261130T104814.123456789Z */
	snprintf(out, cap, "%s.%.4s%.2s%.2sT%.2s%.2s%.2s.%.9sZ-%llu", l->base, ts, ts + 5, ts + 8,
		 ts + 11, ts + 14, ts + 17, ts + 20, (unsigned long long)l->file_first_seq);
}

/*
 * Rename the active file away and create a fresh one (docs/format.md 6). The
 * caller has no I/O in flight. reason: "rotate", "io-error", "untrusted-tail".
 */
int al_file_switch(struct auditlog *l, const char *reason)
{
	char newname[NAME_MAX + 1];
	struct stat a, b;
	int r;

	name_rotated(l, newname, sizeof(newname));
	if (strlen(l->base) + 40 > NAME_MAX)
		return -ENAMETOOLONG;
	if (fstat(l->fd, &a) < 0)
		return -errno;
	if (renameat2(l->dirfd, l->base, l->dirfd, newname, RENAME_NOREPLACE) < 0)
		return -errno;
	if (fstatat(l->dirfd, newname, &b, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return -ESTALE; /* someone replaced our file under us */
	close(l->fd);
	l->fd = -1;
	r = open_locked(l, true, &a);
	if (r < 0)
		return r;
	if (fsync(l->dirfd) < 0)
		return -errno;

	snprintf(l->switched_name, sizeof(l->switched_name), "%s", newname);
	/* The next header links to the file holding the durable head. That is
	 * the file just renamed, unless nothing in it became durable (its first
	 * batch, with its header, failed): then the link stays where it was. */
	if (l->durable_size > 0 || !l->prev_name[0]) {
		snprintf(l->prev_name, sizeof(l->prev_name), "%s", newname);
		l->header_prev_size = l->durable_size;
	} else {
		/* the next header names the file sealed with nothing durable in it,
		 * so that a verifier can tell it from a decoy (docs/format.md 6) */
		snprintf(l->sealed_name, sizeof(l->sealed_name), "%s", newname);
		memcpy(l->sealed_id, l->file_id, sizeof(l->sealed_id));
	}
	l->header_reason = reason;
	l->header_prev = l->durable;
	l->need_header = true;
	l->file_off = 0;
	l->durable_size = 0;
	l->file_created_ns = al_now_ns();
	return 0;
}

static int untrusted(struct auditlog *l, char *why, size_t cap)
{
	uint64_t now = al_now_ns();
	uint64_t ts = al_ts_ns(l->tail.ts_str);
	uint64_t tol = l->cfg.future_tolerance_s * 1000000000u;

	if (ts > now && ts - now > tol) {
		snprintf(why, cap, "last record seq %llu has timestamp %.30s, in the future",
			 (unsigned long long)l->tail.seq, l->tail.ts_str);
		return 1;
	}
	if (l->tail.seq > AL_INT_MAX - (UINT64_C(1) << 32)) {
		snprintf(why, cap, "last record seq %llu is near the end of the seq range",
			 (unsigned long long)l->tail.seq);
		return 1;
	}
	return 0;
}

static int split_path(struct auditlog *l)
{
	const char *path = l->cfg.path;
	const char *slash = strrchr(path, '/');

	if (slash) {
		l->dir = strndup(path, (size_t)(slash - path) + (slash == path));
		l->base = strdup(slash + 1);
	} else {
		l->dir = strdup(".");
		l->base = strdup(path);
	}
	if (!l->dir || !l->base)
		return -ENOMEM;
	if (!*l->base || strcmp(l->base, ".") == 0 || strcmp(l->base, "..") == 0)
		return -EINVAL;
	return 0;
}

static int start_new_chain(struct auditlog *l, const char *reason)
{
	long n;
	int r;

	al_random_id(l->chain_id);
	memset(&l->tail, 0, sizeof(l->tail));
	l->tail.empty = true;
	l->header_reason = reason;
	l->need_header = true;
	n = al_format_header(l, l->line);
	if (n < 0)
		return (int)n;
	r = al_write_sync(l, l->line, (size_t)n, 0);
	if (r < 0)
		return r;
	if (fsync(l->dirfd) < 0)
		return -errno;
	l->file_off = (uint64_t)n;
	l->durable = l->tail;
	l->durable_size = l->file_off;
	return 0;
}

/* The newest rotated file of this log in its directory (names sort by their
 * UTC time), if any: a new chain started beside it says so. */
static bool newest_rotated(struct auditlog *l, char *out, size_t cap)
{
	int fd = openat(l->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	size_t bl = strlen(l->base);
	bool found = false;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	for (struct dirent *e; (e = readdir(d));) {
		const char *n = e->d_name;
		/* <base>.<YYYYmmddTHHMMSS.nnnnnnnnnZ>-<seq> */
		if (strncmp(n, l->base, bl) != 0 || n[bl] != '.' || strlen(n) < bl + 28 ||
		    n[bl + 9] != 'T' || n[bl + 26] != 'Z' || n[bl + 27] != '-')
			continue;
		if (!found || strcmp(n + bl, out + bl) > 0) {
			snprintf(out, cap, "%s", n);
			found = true;
		}
	}
	closedir(d);
	return found;
}

int al_file_open(struct auditlog *l)
{
	struct stat st;
	struct al_parsed hp;
	uint8_t *buf = NULL;
	uint64_t good_end = 0;
	int r;

	r = split_path(l);
	if (r < 0)
		return r;
	l->dirfd = open(l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->dirfd < 0)
		return -errno;
	r = open_locked(l, false, &st);
	if (r < 0)
		return r;
	l->file_created_ns = al_now_ns();
	if (st.st_size == 0) {
		char rot[NAME_MAX + 1];
		if (newest_rotated(l, rot, sizeof(rot)))
			snprintf(l->header_detail, sizeof(l->header_detail),
				 "the active file was missing while rotated files of this log exist "
				 "(newest: %s): it was deleted, or a crash fell between a rotation's "
				 "rename and create; this chain does not continue theirs",
				 rot);
		return start_new_chain(l, "new");
	}

	uint64_t size = (uint64_t)st.st_size;
	uint64_t bound = auditlog__tail_bound(&l->cfg);
	size_t win = size < bound ? (size_t)size : (size_t)bound;
	buf = malloc(win > AL_LINE_MAX ? win : AL_LINE_MAX);
	if (!buf)
		return -ENOMEM;

	r = read_first_header(l, size, &hp, buf);
	if (r == -EBADMSG && al_torn_first_header(buf, size)) {
		/* A crash while the file's first header was being written: nothing
		 * in it was ever acknowledged. Keep it aside, start afresh. */
		l->file_first_seq = 0;
		r = al_file_switch(l, "untrusted-tail");
		if (r < 0)
			goto out;
		snprintf(l->header_detail, sizeof(l->header_detail),
			 "the previous file held only a torn first header (%llu bytes); renamed to %s",
			 (unsigned long long)size, l->switched_name);
		r = start_new_chain(l, "untrusted-tail");
		atomic_fetch_add(&l->st.untrusted_restarts, 1);
		goto out;
	}
	if (r < 0)
		goto out;
	if (al_unhex(hp.rec.f[AL_F_CHAIN_ID].p, 32, l->chain_id) < 0 ||
	    al_unhex(hp.rec.f[AL_F_FILE_ID].p, 32, l->file_id) < 0) {
		r = -EBADMSG;
		goto out;
	}
	l->file_first_seq = hp.rec.f[AL_F_SEQ].u;
	l->file_created_ns = al_ts_ns((const char *)hp.rec.f[AL_F_TIMESTAMP].p);

	r = al_read_hooked(l, buf, win, size - win);
	if (r < 0)
		goto out;
	bool unterminated;
	r = scan_tail(l, buf, win, size - win, &l->tail, &good_end, &unterminated);
	if (r < 0)
		goto out;
	if (l->tail.version > l->cfg.version) {
		r = -EPROTO;
		goto out;
	}
	l->durable = l->tail;
	l->durable_size = good_end;
	l->file_off = size;

	char why[160];
	if (untrusted(l, why, sizeof(why))) {
		r = al_file_switch(l, "untrusted-tail");
		if (r < 0)
			goto out;
		snprintf(l->header_detail, sizeof(l->header_detail), "%s; old file renamed to %s", why,
			 l->switched_name);
		r = start_new_chain(l, "untrusted-tail");
		l->header_detail[0] = '\0';
		atomic_fetch_add(&l->st.untrusted_restarts, 1);
		goto out;
	}
	if (good_end < size) {
		r = write_recovery(l, buf + (good_end - (size - win)), good_end, size);
		if (r < 0)
			goto out;
		l->durable = l->tail;
		l->durable_size = l->file_off;
	} else if (unterminated) {
		r = al_write_sync(l, "\n", 1, size);
		if (r < 0)
			goto out;
		l->file_off = l->durable_size = size + 1;
	}
	r = 0;
out:
	free(buf);
	return r;
}
