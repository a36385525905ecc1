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
#include <sys/mman.h>
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
	if (al_nlink(l, &st) > 1) {
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
	/* A file system that reports no link count for a file just opened by
	 * its name (0, as some FUSE ones do) would have every batch fail as
	 * written into a deleted file (writer.c, file_check()). When the name
	 * still leads to this file, that check is off for it; when not, the file
	 * was deleted meanwhile. */
	l->nlink_known = al_nlink(l, &st) != 0;
	if (!l->nlink_known) {
		struct stat by_name;
		if (fstatat(l->dirfd, l->base, &by_name, AT_SYMLINK_NOFOLLOW) < 0 ||
		    by_name.st_dev != st.st_dev || by_name.st_ino != st.st_ino) {
			r = -ENOENT;
			goto err;
		}
	}
	l->fd = fd;
	l->dropped_upto = 0; /* a file of its own: its cache from its start (writer.c) */
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
 * The tail window open reads back (docs/format.md 7): mapped populated, and
 * from 2 MiB up aligned to 2 MiB and offered transparent huge pages
 * (MADV_HUGEPAGE: honoured when the system's transparent_hugepage setting
 * is "madvise" or "always", ignored otherwise). On the virtual machine we
 * measure on, the first access to each 4 KiB page costs microseconds however
 * it is made (a shadow page-table exit), by pread's copy and again by the
 * scan: a 2 MiB window read into fresh 4 KiB pages and scanned took 4.9 ms,
 * in one 2 MiB page 0.3 ms (docs/benchmarks.md, "Opening a log: 2 MiB pages
 * for the tail window"; the queue's slots stay in 4 KiB pages, see there).
 * Where no huge page is free the kernel gives 4 KiB pages, as before;
 * whether it first compacts memory to find one is the system's choice
 * (transparent_hugepage/defrag: its default, "madvise", may, which costs
 * this open, never a record).
 */
/* AddressSanitizer checks a heap buffer's bounds, not a mapping's */
#if defined(__SANITIZE_ADDRESS__)
#define WINDOW_ON_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WINDOW_ON_HEAP 1
#endif
#endif

#ifdef WINDOW_ON_HEAP
static uint8_t *window_map(size_t len)
{
	return calloc(1, len);
}

static void window_unmap(uint8_t *p, size_t len)
{
	(void)len;
	free(p);
}
#else
#define HUGE_SIZE ((size_t)2 << 20)

static size_t window_len(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (len + pg - 1) & ~(pg - 1);
}

static uint8_t *window_map(size_t len)
{
	size_t n = window_len(len), pg = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *raw, *p;

	if (n < HUGE_SIZE) {
		p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
			 -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	raw = mmap(NULL, n + HUGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	p = (uint8_t *)(((uintptr_t)raw + HUGE_SIZE - 1) & ~(uintptr_t)(HUGE_SIZE - 1));
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	if (raw + HUGE_SIZE > p)
		munmap(p + n, (size_t)(raw + HUGE_SIZE - p));
	(void)madvise(p, n, MADV_HUGEPAGE); /* EINVAL without THP: 4 KiB pages */
	/* populated as MAP_POPULATE would (its failures ignored as that
	 * flag's are: a page then faults when touched); a kernel before 5.14
	 * lacks MADV_POPULATE_WRITE: touched here instead */
	if (madvise(p, n, MADV_POPULATE_WRITE) < 0 && errno == EINVAL)
		for (size_t i = 0; i < n; i += pg)
			((volatile uint8_t *)p)[i] = 0;
	return p;
}

static void window_unmap(uint8_t *p, size_t len)
{
	if (p)
		munmap(p, window_len(len));
}
#endif

/* A record damage may start right after (docs/format.md 7, 19.5): any v0/v1
 * record; in v2 only a seal (the end of a committed batch) or a header (a
 * file's first line: its first batch lost its seal to a crash). */
static bool is_safe(const struct al_parsed *p)
{
	return p->rec.version < AL_V2 || p->rec.type == AL_T_SEAL || p->rec.type == AL_T_HEADER;
}

/* What the tail scan found: the last record damage may start after (the
 * chain continues from it), and the v2 tree and seals up to it. */
struct scan {
	struct head h;
	uint8_t type;
	uint64_t end;            /* file offset just past it */
	uint64_t tree_end;       /* just past the last tree/checkpoint record before it (0: none) */
	struct v2pos v2;
};

/*
 * Walk the tail window forward (docs/format.md 7). On return *out describes
 * the last trusted record damage may start after, *ret_good_end is just past
 * it. v2 (19.5): complete lines after the last seal were never
 * acknowledged; they are damage like a torn line.
 */
static int scan_tail(struct auditlog *l, const uint8_t *buf, size_t win, uint64_t start,
		     const struct v2pos *init, struct scan *out, uint64_t *ret_good_end,
		     bool *ret_unterminated)
{
	struct al_parsed p;
	size_t err_off, pos = 0;
	bool have = false, have_safe = false, damaged = false;
	uint64_t anchor_off = 0, tree_end = 0;
	struct head h = {0};
	/* cur: after h; out: at the last safe record */
	struct v2pos *cur = malloc(sizeof(*cur));

	if (!cur)
		return -ENOMEM;
	memset(cur, 0, sizeof(*cur));
	if (start > 0) {
		const uint8_t *nl = memchr(buf, '\n', win);
		if (!nl) {
			free(cur);
			return -EBADMSG;
		}
		pos = (size_t)(nl - buf) + 1;
	}
	while (pos < win) {
		const uint8_t *line = buf + pos;
		const uint8_t *nl = memchr(line, '\n', win - pos);
		if (!nl)
			break;
		size_t len = (size_t)(nl - line);
		bool ok = al_parse(line, len, l->dec, &p, &err_off) == AL_PERR_OK;
		const struct al_parsed *acc = &p;
		struct al_parsed r;

		if (ok && !have) {
			/* anchor: the first complete line of the window */
			head_from(&h, &p);
			have = true;
			anchor_off = start + pos;
			if (init && start + pos == 0) {
				/* the file's header, continuing the tree and seals
				 * of the file before it */
				al_v2pos_copy(cur, init);
				al_v2_scan_note(cur, &p, AL_V2);
			} else {
				al_v2_scan_note(cur, &p, -1);
			}
		} else if (ok && chains(&h, &p, line, l->work)) {
			int pv = h.version;
			head_from(&h, &p);
			al_v2_scan_note(cur, &p, pv);
		} else if (ok && p.rec.type == AL_T_RECOVERY &&
			   p.rec.f[AL_F_DAMAGE_OFFSET].u <= anchor_off &&
			   p.rec.f[AL_F_DAMAGE_OFFSET].u + p.rec.f[AL_F_DAMAGE_LENGTH].u <=
				   start + pos) {
			/* an earlier repair whose damage covers everything we anchored
			 * on: those lines were orphans; trust the repair instead */
			head_from(&h, &p);
			memset(cur, 0, sizeof(*cur));
			al_v2_scan_note(cur, &p, -1);
			have_safe = false;
			tree_end = 0;
		} else {
			/* damage right after the last safe record: bridged only by a
			 * recovery record that repairs it (recovery.c: the rule the
			 * verifier applies too) */
			bool bridged = false;
			if (have_safe) {
				struct al_recovery_mem wm = {.buf = buf, .start = start, .n = win};
				struct al_recovery_io io = al_recovery_mem_io(&wm);
				struct al_tailrec t = {.seq = out->h.seq, .version = out->h.version,
						       .type = out->type};
				memcpy(t.hash, out->h.hash, AL_HASH_LEN);
				memcpy(t.ts, out->h.ts_str, AL_TS_LEN);
				size_t q = pos;
				while (q < win && !bridged) {
					const uint8_t *l2 = buf + q;
					const uint8_t *nl2 = memchr(l2, '\n', win - q);
					if (!nl2)
						break;
					size_t len2 = (size_t)(nl2 - l2);
					if (out->end >= start && al_maybe_recovery(l2, len2) &&
					    al_parse(l2, len2, l->dec, &r, &err_off) == AL_PERR_OK &&
					    al_recovery_repairs(&r, l2, start + q, out->end, &t, &io,
								l->work)) {
						head_from(&h, &r);
						al_v2pos_copy(cur, &out->v2);
						tree_end = out->tree_end;
						al_v2_scan_note(cur, &r, out->h.version);
						nl = nl2;
						acc = &r;
						bridged = true;
					}
					q = (size_t)(nl2 - buf) + 1;
				}
			}
			if (!bridged) {
				damaged = true;
				break;
			}
		}
		pos = (size_t)(nl - buf) + 1;
		if (acc->rec.version >= AL_V2 &&
		    (acc->rec.type == AL_T_TREE || acc->rec.type == AL_T_CHECKPOINT))
			tree_end = start + pos;
		if (is_safe(acc)) {
			out->h = h;
			out->type = acc->rec.type;
			out->end = start + pos;
			out->tree_end = tree_end;
			al_v2pos_copy(&out->v2, cur);
			have_safe = true;
		}
	}
	/* A last line that lacks only its '\n' (the crash fell between its bytes
	 * and the newline) is a whole record that chains on: keep it, and let
	 * the caller end it, rather than call a valid record damage (v2: only
	 * a seal, which seals what it follows). */
	*ret_unterminated = false;
	if (have && !damaged && pos < win &&
	    al_parse(buf + pos, win - pos, l->dec, &p, &err_off) == AL_PERR_OK &&
	    chains(&h, &p, buf + pos, l->work) && is_safe(&p)) {
		int pv = h.version;
		head_from(&h, &p);
		al_v2_scan_note(cur, &p, pv);
		out->h = h;
		out->type = p.rec.type;
		out->end = start + win;
		out->tree_end = tree_end;
		al_v2pos_copy(&out->v2, cur);
		have_safe = true;
		*ret_unterminated = true;
	}
	free(cur);
	if (!have || !have_safe)
		return -EBADMSG;
	*ret_good_end = out->end;
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

/* Repair tail damage in place: an optional '\n' and a recovery record,
 * appended to out at *len (the open batch). */
static int format_recovery(struct auditlog *l, const uint8_t *damage, uint64_t good_end,
			   uint64_t size, uint8_t *out, size_t *len)
{
	struct al_record rec = {.type = AL_T_RECOVERY};
	uint8_t md[AL_HASH_LEN];
	char mdhex[64];
	uint64_t dl = size - good_end;
	long n;

	SHA256(damage, dl, md);
	al_hex(md, AL_HASH_LEN, mdhex);
	rec.present = AL_BIT(AL_F_LAST_SEQ) | AL_BIT(AL_F_DAMAGE_OFFSET) |
		      AL_BIT(AL_F_DAMAGE_LENGTH) | AL_BIT(AL_F_DAMAGE_SHA256);
	rec.f[AL_F_LAST_SEQ].u = l->tail.seq;
	rec.f[AL_F_DAMAGE_OFFSET].u = good_end;
	rec.f[AL_F_DAMAGE_LENGTH].u = dl;
	rec.f[AL_F_DAMAGE_SHA256].p = (const uint8_t *)mdhex;
	rec.f[AL_F_DAMAGE_SHA256].n = 64;

	if (damage[dl - 1] != '\n')
		out[(*len)++] = '\n';
	n = al_chain_append(l, &rec, al_wall_ns(l), out + *len);
	if (n < 0)
		return (int)n;
	*len += (size_t)n;
	atomic_fetch_add(&l->st.recoveries, 1);
	return 0;
}

/*
 * The batch auditlog_open() writes synchronously at off (docs/format.md 19.2,
 * decision 3 of issue 12): what buf already holds (a header, or a repair),
 * then in v2 a tree record (when the tree has a leaf) and the `open` seal,
 * which names the chain's previous seal. Returns the bytes written.
 */
static long open_batch(struct auditlog *l, uint8_t *buf, size_t len, uint64_t off)
{
	int r;

	if (l->sealer) {
		bool moved, had_tree = l->v2.tree_state == V2T_ON;
		unsigned k;
		r = al_v2_epoch(l, &moved);
		if (r < 0)
			return r;
		l->fmt_epoch = l->ep.epoch;
		/* a tree record needs a leaf before it: a v1 chain's first v2
		 * record is the open seal, so its tree record comes next batch */
		r = al_v2_batch_tail(l, buf, &len, off, K_OPEN,
				     had_tree || l->v2.tree_state == V2T_ON, false, false, &k);
		if (r < 0)
			return r;
		l->tree_due = !had_tree; /* the tree began in this batch, after its tree slot */
		l->ckpt_seq = l->tail.seq;
		l->ckpt_boot = l->ep.boot_now;
	}
	if (len == 0)
		return 0;
	r = al_write_sync(l, buf, len, off);
	if (r < 0)
		return r;
	if (l->sealer)
		al_v2pos_copy(&l->v2_durable, &l->v2);
	return (long)len;
}

static void name_rotated(struct auditlog *l, char *out, size_t cap)
{
	char ts[AL_TS_LEN];
	al_format_ts(al_wall_ns(l), ts);
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
	l->file_created_ns = al_wall_ns(l);
	return 0;
}

static int untrusted(struct auditlog *l, char *why, size_t cap)
{
	uint64_t now = al_wall_ns(l);
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

	uint8_t *buf = l->batches[0].buf; /* no batch is in use before the worker starts */

	al_random_id(l->chain_id);
	memset(&l->tail, 0, sizeof(l->tail));
	l->tail.empty = true;
	memset(&l->v2, 0, sizeof(l->v2)); /* a new chain: its tree starts at its header */
	l->tree_rec_end = 0;
	l->header_reason = reason;
	l->need_header = true;
	n = al_format_header(l, buf);
	if (n < 0)
		return (int)n;
	n = open_batch(l, buf, (size_t)n, 0);
	if (n < 0)
		return (int)n;
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

/*
 * The v2 state (tree, last seal) at the end of the file a header names
 * (prev_name, through prev_size: its durable head prev_seq), from that file's
 * bounded tail: for a file whose first batch a crash cut before its seal.
 */
/* What a file's header says of the file before it, copied out of the
 * header's parse (whose strings point into l->dec, which scan_tail reuses). */
struct prev_link {
	char name[NAME_MAX + 1];
	uint8_t hash[AL_HASH_LEN];
	uint64_t size, seq;
};

static int prev_link_get(const struct al_parsed *hp, struct prev_link *ret)
{
	const struct al_record *h = &hp->rec;

	if (h->f[AL_F_PREV_NAME].n >= sizeof(ret->name) ||
	    al_unhex(h->f[AL_F_PREV_HASH].p, 64, ret->hash) < 0 || h->f[AL_F_PREV_SIZE].u == 0)
		return -EBADMSG;
	memcpy(ret->name, h->f[AL_F_PREV_NAME].p, h->f[AL_F_PREV_NAME].n);
	ret->name[h->f[AL_F_PREV_NAME].n] = '\0';
	if (strchr(ret->name, '/'))
		return -EBADMSG;
	ret->size = h->f[AL_F_PREV_SIZE].u;
	ret->seq = h->f[AL_F_PREV_SEQ].u;
	return 0;
}

static int prev_file_v2(struct auditlog *l, const struct prev_link *pl, struct v2pos *ret)
{
	const char *name = pl->name;
	const uint8_t *want = pl->hash;
	uint64_t psize = pl->size, bound = auditlog__tail_bound(&l->cfg);
	uint8_t *buf = NULL;
	struct scan *sc = NULL;
	uint64_t good_end;
	bool unterminated;
	int fd = -1, r;

	size_t win = psize < bound ? (size_t)psize : (size_t)bound;
	fd = openat(l->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -EBADMSG; /* the chain cannot be continued in O(1): the operator decides */
	buf = window_map(win);
	sc = malloc(sizeof(*sc));
	r = buf && sc ? 0 : -ENOMEM;
	for (size_t done = 0; r == 0 && done < win;) {
		ssize_t k = pread(fd, buf + done, win - done, (off_t)(psize - win + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			r = k < 0 ? -errno : -EBADMSG;
		else
			done += (size_t)k;
	}
	if (r == 0)
		r = scan_tail(l, buf, win, psize - win, NULL, sc, &good_end, &unterminated);
	if (r == 0 && (good_end != psize || unterminated || sc->h.seq != pl->seq ||
		       CRYPTO_memcmp(sc->h.hash, want, AL_HASH_LEN) != 0 ||
		       sc->v2.tree_state == V2T_UNKNOWN))
		r = -EBADMSG;
	if (r == 0)
		al_v2pos_copy(ret, &sc->v2);
	close(fd);
	window_unmap(buf, win);
	free(sc);
	return r;
}

int al_file_open(struct auditlog *l)
{
	struct v2pos *init_buf = NULL;  /* v2: the previous file's tree and seals */
	const struct v2pos *init = NULL;
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
	l->file_created_ns = al_wall_ns(l);
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
	/* the window, where read_first_header() reads a line first */
	size_t buf_len = win > AL_LINE_MAX ? win : AL_LINE_MAX;
	buf = window_map(buf_len);
	struct scan *sc = malloc(sizeof(*sc));
	if (!buf || !sc) {
		window_unmap(buf, buf_len);
		free(sc);
		return -ENOMEM;
	}

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
	/* (hp's strings point into l->dec, which scan_tail reuses: what is
	 * needed of them later is copied now) */
	bool links = hp.rec.present & AL_BIT(AL_F_PREV_NAME);
	struct prev_link link;
	int link_r = links ? prev_link_get(&hp, &link) : -EBADMSG;

	bool unterminated;
	for (;;) {
		r = al_read_hooked(l, buf, win, size - win);
		if (r < 0)
			goto out;
		r = scan_tail(l, buf, win, size - win, init, sc, &good_end, &unterminated);
		if (r < 0)
			goto out;
		l->tail = sc->h;
		if (l->tail.version > l->cfg.version) {
			r = -EPROTO;
			goto out;
		}
		if (!l->sealer || sc->h.version < AL_V2 ||
		    (sc->v2.tree_state != V2T_UNKNOWN && (sc->v2.has_seal || !links)))
			break; /* (a chain's first file may hold no seal yet) */
		if (!init && win == size && hp.rec.version == AL_V2 && links) {
			/* a file whose first batch lost its seal to a crash: the
			 * tree and the last seal are the previous file's */
			init = init_buf = malloc(sizeof(*init_buf));
			if (!init_buf) {
				r = -ENOMEM;
				goto out;
			}
			r = link_r < 0 ? link_r : prev_file_v2(l, &link, init_buf);
			if (r < 0)
				goto out;
			continue;
		}
		/* v2: no tree record in the window (written by a writer with a
		 * larger max_batch_bytes?): read back at most one more batch */
		uint64_t more = bound + l->cfg.max_batch_bytes;
		if (win >= size || win >= more) {
			r = -EBADMSG; /* the tree cannot be continued in O(1) */
			goto out;
		}
		win = size < more ? (size_t)size : (size_t)more;
		uint8_t *nb = window_map(win); /* read whole again above */
		if (!nb) {
			r = -ENOMEM;
			goto out;
		}
		window_unmap(buf, buf_len);
		buf = nb;
		buf_len = win;
	}
	if (l->sealer) {
		al_v2pos_copy(&l->v2, &sc->v2);
		al_v2pos_copy(&l->v2_durable, &sc->v2);
		l->tree_rec_end = sc->tree_end;
		/* a sealing state replaced by an older copy (17.2 rule 5) */
		if (l->v2.has_seal &&
		    (r = l->sealer->ops->check_tail(l->sealer, l->v2.seal_key, l->v2.seal_epoch)) < 0)
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
	uint8_t *ob = l->batches[0].buf; /* no batch is in use before the worker starts */
	size_t olen = 0;
	if (good_end < size) {
		r = format_recovery(l, buf + (good_end - (size - win)), good_end, size, ob, &olen);
		if (r < 0)
			goto out;
	} else if (unterminated) {
		ob[olen++] = '\n';
	}
	long n = open_batch(l, ob, olen, size);
	if (n < 0) {
		r = (int)n;
		goto out;
	}
	l->file_off = size + (uint64_t)n;
	if (n > 0) {
		l->durable = l->tail;
		l->durable_size = l->file_off;
	}
	r = 0;
out:
	window_unmap(buf, buf_len);
	free(sc);
	free(init_buf);
	return r;
}
