/* SPDX-License-Identifier: MIT */
/*
 * The in-process seal provider (sealer.h): the writing process holds the
 * sealing state (docs/format.md 17.2) and the checkpoint signing key (17.3).
 * For single-user deployments only (DESIGN.md "Key custody"): whoever
 * controls the process holds the current epoch's key.
 *
 * Key material lives in its own anonymous mapping: locked in RAM where the
 * limits allow (mlock), left out of core dumps (MADV_DONTDUMP), zeroed in a
 * forked child (MADV_WIPEONFORK), cleansed before it is unmapped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "sealer.h"
#include "seal.h"
#include "note.h"

#define KEYFILE_MAX 8192u /* a state file is at most ~3.5 KiB (33 node lines) */

/* ---- clocks ---------------------------------------------------------------- */

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t al_clock_realtime(const struct al_clock_hooks *h)
{
	return h && h->realtime ? h->realtime(h->ctx) : clock_ns(CLOCK_REALTIME);
}

uint64_t al_clock_boottime(const struct al_clock_hooks *h)
{
	return h && h->boottime ? h->boottime(h->ctx) : clock_ns(CLOCK_BOOTTIME);
}

int al_clock_boot_id(const struct al_clock_hooks *h, uint8_t out[16])
{
	char buf[64], hex[32];
	size_t k = 0;
	ssize_t n;
	int fd;

	if (h && h->boot_id) {
		h->boot_id(h->ctx, out);
		return 0;
	}
	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return -EIO;
	for (ssize_t i = 0; i < n && k < 32; i++)
		if (buf[i] != '-' && buf[i] != '\n')
			hex[k++] = buf[i];
	if (k != 32 || al_unhex((const uint8_t *)hex, 32, out) < 0)
		return -EIO;
	return 0;
}

/* ---- key memory -------------------------------------------------------------- */

/* Everything secret, in one mapping. */
struct secrets {
	struct al_sstate ss;          /* the state in memory: C(ss.st.epoch) */
	struct al_sstate tmp;         /* the file re-read under the lock */
	uint8_t kmac[AL_HASH_LEN];    /* Kmac(ss.st.epoch), when kmac_ok */
	bool kmac_ok;
	uint8_t sign_seed[AL_ED25519_SEED_LEN];
	char text[KEYFILE_MAX];       /* a key file's bytes, read or to write */
};

static struct secrets *secrets_new(void)
{
	size_t sz = (sizeof(struct secrets) + 4095u) & ~(size_t)4095u;
	void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	(void)mlock(p, sz);                   /* best effort: RLIMIT_MEMLOCK may refuse */
	(void)madvise(p, sz, MADV_DONTDUMP);
#ifdef MADV_WIPEONFORK
	(void)madvise(p, sz, MADV_WIPEONFORK); /* Linux >= 4.14 */
#endif
	return p;
}

static void secrets_free(struct secrets *s)
{
	size_t sz = (sizeof(struct secrets) + 4095u) & ~(size_t)4095u;

	if (!s)
		return;
	OPENSSL_cleanse(s, sz);
	(void)munlock(s, sz);
	munmap(s, sz);
}

/* ---- the provider ------------------------------------------------------------ */

struct inproc {
	struct al_sealer base;
	const struct al_clock_hooks *clock;
	int dirfd;
	char *name;                   /* basename of the state file */
	char *lock_name;              /* <name>.lock */
	struct al_seal_clock clk;     /* the schedule, rebased on this boot at open */
	struct secrets *sec;
	uint8_t sign_pub[AL_ED25519_PUB_LEN]; /* sec->sign_seed's public key (not secret) */
};

static const struct al_sealer_ops inproc_ops;

/* Read a key file: regular, not a symlink, no group/other bits, bounded. */
static int read_keyfile(int dirfd, const char *path, char *buf, size_t cap, size_t *ret_n)
{
	struct stat st;
	size_t n = 0;
	int fd, r = 0;

	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return errno == ELOOP ? -ELOOP : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		goto out;
	}
	if (st.st_mode & 077) {
		r = -EPERM;
		goto out;
	}
	if ((uint64_t)st.st_size >= cap) {
		r = -EFBIG;
		goto out;
	}
	while (n < cap) {
		ssize_t k = read(fd, buf + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			goto out;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	if (n >= cap)
		r = -EFBIG;
	else
		*ret_n = n;
out:
	close(fd);
	return r;
}

int al_state_lock(int dirfd, const char *lock_path, short type)
{
	struct flock fl = {.l_type = type, .l_whence = SEEK_SET};
	int fd = type == F_RDLCK ? openat(dirfd, lock_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;

	if (type != F_RDLCK || (fd < 0 && errno == ENOENT)) /* (none yet: made as a holder would) */
		fd = openat(dirfd, lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	while (fcntl(fd, F_OFD_SETLKW, &fl) < 0) {
		if (errno != EINTR) {
			int r = -errno;
			close(fd);
			return r;
		}
	}
	return fd; /* closing it releases the lock */
}

/* Write the in-memory state, advanced to e, as the new state file (rule 5):
 * a new file (O_CREAT|O_EXCL, 0600), fdatasync, rename over, fsync the dir. */
static int persist(struct inproc *p, const struct al_sstate *s)
{
	char tmpname[NAME_MAX + 1];
	uint8_t rnd[8];
	char rhex[16];
	long n;
	int fd, r = 0;

	n = al_sstate_format(s, p->sec->text, sizeof(p->sec->text));
	if (n < 0)
		return (int)n;
	if (getentropy(rnd, sizeof(rnd)) < 0)
		return -errno;
	al_hex(rnd, sizeof(rnd), rhex);
	if ((size_t)snprintf(tmpname, sizeof(tmpname), ".%.200s.%.16s.tmp", p->name, rhex) >=
	    sizeof(tmpname))
		return -ENAMETOOLONG;
	fd = openat(p->dirfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	for (size_t done = 0; done < (size_t)n;) {
		ssize_t w = write(fd, p->sec->text + done, (size_t)n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			r = w < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)w;
	}
	if (r == 0 && fdatasync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(p->dirfd, tmpname, p->dirfd, p->name) < 0)
		r = -errno;
	if (r < 0)
		(void)unlinkat(p->dirfd, tmpname, 0);
	else if (fsync(p->dirfd) < 0)
		r = -errno;
out:
	OPENSSL_cleanse(p->sec->text, sizeof(p->sec->text));
	return r;
}

static bool same_key(const struct al_sstate *a, const struct al_sstate *b)
{
	return a->p.host_len == b->p.host_len && memcmp(a->p.host, b->p.host, a->p.host_len) == 0 &&
	       memcmp(a->p.key_id, b->p.key_id, AL_SEAL_KID_LEN) == 0 && a->p.t0 == b->p.t0 &&
	       a->p.delta == b->p.delta;
}

/* Move the in-memory state to epoch e (> its epoch), durably first: under
 * the lock, re-read the file; write e unless the file already holds e or
 * later (never a lower epoch); then advance in memory and cleanse. */
static int advance(struct inproc *p, uint32_t e)
{
	struct secrets *k = p->sec;
	size_t n = 0;
	int lfd, r;

	if (e < p->clk.epoch)
		return -ESTALE; /* before this boot's schedule began: never asked by the writer */
	lfd = al_state_lock(p->dirfd, p->lock_name, F_WRLCK);
	if (lfd < 0)
		return lfd;
	r = read_keyfile(p->dirfd, p->name, k->text, sizeof(k->text), &n);
	if (r == 0)
		r = al_sstate_parse((const uint8_t *)k->text, n, &k->tmp);
	OPENSSL_cleanse(k->text, sizeof(k->text));
	if (r == 0 && !same_key(&k->tmp, &k->ss))
		r = -ESTALE; /* another key was put in its place */
	if (r == 0 && k->tmp.st.epoch < e) {
		/* the state for e: our covering set advanced, this boot's clock */
		k->tmp = k->ss;
		r = al_seal_state_advance(&k->tmp.st, e);
		if (r == 0) {
			memcpy(k->tmp.boot_id, p->clk.boot_id, 16);
			k->tmp.boot_start = p->clk.boot_start + (uint64_t)(e - p->clk.epoch) * p->clk.delta;
			r = persist(p, &k->tmp);
		}
	}
	al_seal_state_wipe(&k->tmp.st);
	close(lfd);
	if (r < 0)
		return r;
	r = al_seal_state_advance(&k->ss.st, e); /* cleanses every seed it no longer needs */
	if (r < 0)
		return r;
	OPENSSL_cleanse(k->kmac, sizeof(k->kmac));
	k->kmac_ok = false;
	return 0;
}

int al_sealer_inproc_advance(struct al_sealer *s, uint32_t epoch)
{
	struct inproc *p = (struct inproc *)s;

	if (s->ops != &inproc_ops)
		return -EINVAL;
	return epoch > p->sec->ss.st.epoch ? advance(p, epoch) : 0;
}

static int ip_now(struct al_sealer *s, struct al_sealer_now *ret)
{
	struct inproc *p = (struct inproc *)s;
	struct al_seal_sched sc;
	uint64_t b = al_clock_boottime(p->clock), w = al_clock_realtime(p->clock);
	int r = al_seal_schedule(&p->clk, p->clk.boot_id, b, w, &sc);

	if (r < 0)
		return r;
	ret->epoch = sc.epoch;
	ret->boot_now = b;
	ret->boot_start = sc.boot_start;
	ret->boot_end = sc.boot_start + p->clk.delta;
	ret->wall = w;
	ret->expected = sc.expected;
	ret->clock = sc.clock;
	return 0;
}

static int ip_seal(struct al_sealer *s, struct al_v2_seal *seal, const uint8_t prev[AL_HASH_LEN],
		   uint64_t seq, const char ts[AL_TS_LEN])
{
	struct inproc *p = (struct inproc *)s;
	struct secrets *k = p->sec;
	int r;

	if (seal->epoch < k->ss.st.epoch)
		return -ESTALE; /* that epoch's key is gone */
	if (seal->epoch > k->ss.st.epoch) {
		r = advance(p, seal->epoch);
		if (r < 0)
			return r;
	}
	if (!k->kmac_ok) {
		r = al_seal_mac_key(k->ss.st.node[0].seed, k->kmac);
		if (r < 0)
			return r;
		k->kmac_ok = true;
	}
	memcpy(seal->key_id, s->key_id, AL_SEAL_KID_LEN);
	return al_v2_seal_sign(seal, k->kmac, prev, seq, ts);
}

static long ip_sign(struct al_sealer *s, const uint8_t *name, size_t nlen, const uint8_t *text,
		    size_t tlen, uint8_t *out, size_t cap)
{
	struct inproc *p = (struct inproc *)s;
	return al_note_sign(p->sec->sign_seed, p->sign_pub, name, nlen, text, tlen, out, cap);
}

static int ip_check_tail(struct al_sealer *s, const uint8_t key_id[AL_SEAL_KID_LEN], uint32_t epoch)
{
	struct inproc *p = (struct inproc *)s;

	if (memcmp(key_id, s->key_id, AL_SEAL_KID_LEN) != 0)
		return 0; /* another key's seal: its epochs are not ours to compare */
	/* the state as it stands now: the file's epoch at load, or later once
	 * advanced (auditlog-sealer checks tails long after it loaded) */
	return p->sec->ss.st.epoch < epoch ? -ESTALE : 0;
}

static void ip_free(struct al_sealer *s)
{
	struct inproc *p = (struct inproc *)s;

	if (p->dirfd >= 0)
		close(p->dirfd);
	free(p->name);
	free(p->lock_name);
	secrets_free(p->sec);
	free(p);
}

static const struct al_sealer_ops inproc_ops = {
	.now = ip_now,
	.seal = ip_seal,
	.sign = ip_sign,
	.check_tail = ip_check_tail,
	.free = ip_free,
};

static int split_dir(const char *path, char **ret_dir, char **ret_base)
{
	const char *slash = strrchr(path, '/');

	*ret_dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
	*ret_base = strdup(slash ? slash + 1 : path);
	if (!*ret_dir || !*ret_base)
		return -ENOMEM;
	if (!**ret_base || strcmp(*ret_base, ".") == 0 || strcmp(*ret_base, "..") == 0)
		return -EINVAL;
	return 0;
}

int al_sealer_inproc_open(const char *state_path, const char *signing_key_path,
			  const struct al_clock_hooks *clock, struct al_sealer **ret)
{
	struct inproc *p = calloc(1, sizeof(*p));
	struct al_ckey ck;
	struct al_seal_sched sc;
	uint8_t boot[16];
	char *dir = NULL;
	size_t n = 0;
	int r;

	if (!p)
		return -ENOMEM;
	p->base.ops = &inproc_ops;
	p->clock = clock;
	p->dirfd = -1;
	p->sec = secrets_new();
	if (!p->sec) {
		r = -ENOMEM;
		goto err;
	}
	r = split_dir(state_path, &dir, &p->name);
	if (r < 0)
		goto err;
	if (asprintf(&p->lock_name, "%s.lock", p->name) < 0) {
		p->lock_name = NULL;
		r = -ENOMEM;
		goto err;
	}
	p->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->dirfd < 0) {
		r = -errno;
		goto err;
	}

	/* the signing key */
	r = read_keyfile(AT_FDCWD, signing_key_path, p->sec->text, sizeof(p->sec->text), &n);
	if (r == 0)
		r = al_ckey_parse((const uint8_t *)p->sec->text, n, true, &ck);
	OPENSSL_cleanse(p->sec->text, sizeof(p->sec->text));
	if (r < 0)
		goto err;
	memcpy(p->sec->sign_seed, ck.key, sizeof(ck.key));
	OPENSSL_cleanse(ck.key, sizeof(ck.key));
	/* Ed25519 works here (a FIPS-only OpenSSL configuration may lack it),
	 * and OpenSSL's one-time set-up (its configuration file, the provider:
	 * ~1.5 ms) is paid by the opener, not by the worker at the first
	 * checkpoint, in front of whatever batch that is */
	r = al_ed25519_public(p->sec->sign_seed, p->sign_pub);
	if (r < 0)
		goto err;

	/* the sealing state */
	r = read_keyfile(p->dirfd, p->name, p->sec->text, sizeof(p->sec->text), &n);
	if (r == 0)
		r = al_sstate_parse((const uint8_t *)p->sec->text, n, &p->sec->ss);
	OPENSSL_cleanse(p->sec->text, sizeof(p->sec->text));
	if (r < 0)
		goto err;
	if (ck.host_len != p->sec->ss.p.host_len ||
	    memcmp(ck.host, p->sec->ss.p.host, ck.host_len) != 0) {
		r = -EINVAL;
		goto err;
	}
	memcpy(p->base.host, p->sec->ss.p.host, p->sec->ss.p.host_len);
	p->base.host_len = p->sec->ss.p.host_len;
	memcpy(p->base.key_id, p->sec->ss.p.key_id, AL_SEAL_KID_LEN);
	p->base.t0 = p->sec->ss.p.t0;
	p->base.delta = p->sec->ss.p.delta;

	/* the schedule (rules 1-4), rebased on this boot: later readings follow
	 * rule 1 from the epoch it gives now */
	r = al_clock_boot_id(clock, boot);
	if (r < 0)
		goto err;
	p->clk = (struct al_seal_clock){.t0 = p->base.t0, .delta = p->base.delta,
					.max_jump = p->sec->ss.max_jump,
					.epoch = p->sec->ss.st.epoch,
					.boot_start = p->sec->ss.boot_start};
	memcpy(p->clk.boot_id, p->sec->ss.boot_id, 16);
	r = al_seal_schedule(&p->clk, boot, al_clock_boottime(clock), al_clock_realtime(clock), &sc);
	if (r < 0)
		goto err;
	p->clk.epoch = sc.epoch;
	p->clk.boot_start = sc.boot_start;
	memcpy(p->clk.boot_id, boot, 16);
	free(dir);
	*ret = &p->base;
	return 0;
err:
	free(dir);
	ip_free(&p->base);
	return r;
}
