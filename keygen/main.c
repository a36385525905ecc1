/* SPDX-License-Identifier: MIT */
/*
 * auditlog-keygen: make one host's format v2 keys (docs/format.md 16, 17):
 * the sealing state and the checkpoint signing key (the holder's: the writer
 * in its in-process mode, or auditlog-sealer), the checkpoint public key
 * (anyone's) and the verification key (the auditor's, kept off the host).
 * Exit 0 written, 1 could not write (nothing is left behind), 2 usage.
 * See auditlog-keygen --help, auditlog-keygen(1) and docs/keys.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "cli.h"
#include "format.h"
#include "keyfile.h"
#include "note.h"
#include "sealkey.h"
#include "sealer.h"

#define PROG "auditlog-keygen"
#define NS UINT64_C(1000000000)
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

static const char usage[] =
	"usage: auditlog-keygen [options] --dir DIR\n"
	"       auditlog-keygen [options] --state FILE --signing-key FILE --pubkey FILE --verify-key FILE|-\n"
	"       auditlog-keygen --note-key CHAIN_ID --pubkey FILE\n"
	"       auditlog-keygen --attest --state FILE [--nonce HEX] [--out FILE|-]\n"
	"       auditlog-keygen --rekey --state FILE --verify-key FILE|- [--host ID] [--delta S]\n"
	"\n"
	"Make one host's format v2 keys (docs/format.md 16 and 17): the sealing state and\n"
	"the checkpoint signing key (the writer's in-process mode, or auditlog-sealer), the\n"
	"checkpoint public key (anyone's) and the verification key (the auditor's: it forges\n"
	"every seal of the host, so it goes off the host). Files are never overwritten.\n"
	"\n"
	"  --host ID              the host id, [a-z0-9][a-z0-9.-]{0,62} (default: this\n"
	"                         machine's hostname in lower case, when it is one)\n"
	"  --delta SECONDS        the epoch length, > 0, up to 9 fraction digits (default 10;\n"
	"                         1 for demos); fixed for the key's life\n"
	"  --max-jump EPOCHS      the epochs one reboot may skip, 1 to 4294967295 (default:\n"
	"                         the epochs in 366 days, 3162240 at --delta 10)\n"
	"  --t0 NS                the start of epoch 0, ns since 1970 (default: now); not in\n"
	"                         the future and not before this boot began\n"
	"  --dir DIR              write the four files under DIR as sealing-state, signing-key,\n"
	"                         pubkey and verify-key (an option below names one elsewhere);\n"
	"                         DIR is made (0700) when it does not exist\n"
	"  --state FILE           the sealing state (0600)\n"
	"  --signing-key FILE     the checkpoint signing key (0600)\n"
	"  --pubkey FILE          the checkpoint public key (0644)\n"
	"  --verify-key FILE|-    the verification key (0600); - writes it to standard output\n"
	"                         (the summary then goes to standard error)\n"
	"  --note-key CHAIN_ID    print the C2SP note verifier key of one chain (its 32-hex\n"
	"                         chain id) from the public key given by --pubkey, and exit\n"
	"  --attest               print an attestation statement of the sealing state given by\n"
	"                         --state (docs/format.md 27): its epoch, now, under a MAC of\n"
	"                         that epoch's key; the state is read under its lock, never\n"
	"                         written. Run as the state's holder's user\n"
	"  --rekey                replace the sealing state given by --state with one of a new\n"
	"                         key (docs/format.md 17.4), atomically, under its lock; the new\n"
	"                         verification key goes to --verify-key. The host stays the\n"
	"                         state's (--host when the state is lost or corrupt)\n"
	"  --nonce HEX            with --attest: the auditor's challenge, 64 hex digits\n"
	"  --out FILE|-           with --attest: where the statement goes (created, never\n"
	"                         overwritten; default -, standard output)\n"
	"  -h, --help             this text\n"
	"  --version              the version\n"
	"\n"
	"Exit status: 0 written, 1 could not write (nothing is left behind), 2 usage.\n";

/* The four files, in the order they are created and written. */
enum { F_STATE, F_SIGN, F_PUB, F_VKEY, F_N };

struct out_file {
	const char *opt;  /* its option */
	const char *name; /* its name under --dir */
	const char *role; /* who keeps it, for the summary */
	mode_t mode;
	char *path; /* "-": standard output (the verification key only) */
	bool path_alloc;
	char buf[4096]; /* the formatted file: cleansed */
	size_t len;
	int fd;
	bool created;
	dev_t dev; /* what was created, so only that is ever removed */
	ino_t ino;
};

/* s on one line as typed, but what is not printable ASCII as \xNN. */
static void put_arg(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p >= 0x20 && *p < 0x7f && *p != '\\')
			fputc(*p, f);
		else
			fprintf(f, "\\x%02x", *p);
	}
}

/* Say on one line why the value of an option is refused; exit status 2. */
static int refuse(const char *opt, const char *val, const char *why)
{
	fprintf(stderr, PROG ": %s \"", opt);
	put_arg(stderr, val);
	fprintf(stderr, "\": %s\n", why);
	return 2;
}

/* SECONDS: digits, optionally '.' and 1-9 digits, as ns > 0 that fit a u64.
 * 0, -EINVAL (not that form, or 0) or -ERANGE. */
static int parse_delta(const char *s, uint64_t *ret)
{
	const char *dot = strchr(s, '.');
	size_t ni = dot ? (size_t)(dot - s) : strlen(s), nf = dot ? strlen(dot + 1) : 0;
	uint64_t sec, frac = 0;
	int r;

	if (dot && (nf == 0 || nf > 9))
		return -EINVAL;
	if ((r = cli_parse_udec(s, ni, UINT64_MAX / NS, &sec)) < 0)
		return r;
	if (dot && (r = cli_parse_udec(dot + 1, nf, 999999999, &frac)) < 0)
		return r;
	for (size_t i = nf; i < 9; i++)
		frac *= 10;
	if (sec * NS > UINT64_MAX - frac)
		return -ERANGE;
	if (sec * NS + frac == 0)
		return -EINVAL;
	*ret = sec * NS + frac;
	return 0;
}

/* ns as seconds, without trailing fraction zeros: "10", "0.5". */
static void fmt_seconds(uint64_t ns, char out[32])
{
	int n = snprintf(out, 32, "%" PRIu64 ".%09" PRIu64, ns / NS, ns % NS);
	while (n > 0 && out[n - 1] == '0')
		out[--n] = 0;
	if (n > 0 && out[n - 1] == '.')
		out[--n] = 0;
}

/* The running kernel's boot id: the 36-character UUID of BOOT_ID_PATH, its
 * 32 hex digits as 16 bytes. 0, or -errno / -EINVAL (not a UUID). */
static int read_boot_id(uint8_t out[16])
{
	char b[64], hx[32];
	ssize_t n;
	size_t k = 0;
	int fd = open(BOOT_ID_PATH, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	do
		n = read(fd, b, sizeof(b));
	while (n < 0 && errno == EINTR);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	if (n != 37 || b[36] != '\n')
		return -EINVAL;
	for (size_t i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		bool hex = (b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f');
		if (dash ? b[i] != '-' : !hex)
			return -EINVAL;
		if (!dash)
			hx[k++] = b[i];
	}
	return al_unhex((const uint8_t *)hx, 32, out);
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) < 0 || ts.tv_sec < 0)
		return 0;
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static volatile sig_atomic_t interrupted; /* the signal that asks the run to stop */

static void on_stop(int sig)
{
	interrupted = sig;
}

/* Close and remove every file this run created, and only those: a path
 * that no longer names the file created is left alone. */
static void remove_created(struct out_file *f)
{
	for (unsigned i = 0; i < F_N; i++) {
		struct stat st;
		if (f[i].fd >= 0)
			close(f[i].fd);
		f[i].fd = -1;
		if (!f[i].created)
			continue;
		if (lstat(f[i].path, &st) == 0 && st.st_dev == f[i].dev && st.st_ino == f[i].ino &&
		    unlink(f[i].path) < 0)
			fprintf(stderr, PROG ": could not remove %s: %s\n", f[i].path, strerror(errno));
		f[i].created = false;
	}
}

/* The directory a path is in, into dir (PATH_MAX). */
static void parent_dir(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(dir, cap, ".");
	else if (slash == path)
		snprintf(dir, cap, "/");
	else
		snprintf(dir, cap, "%.*s", (int)(slash - path), path);
}

/* fsync each directory that got a file, once. 0, or 1 after saying why. */
static int sync_dirs(const struct out_file *f)
{
	dev_t done_dev[F_N];
	ino_t done_ino[F_N];
	unsigned n_done = 0;

	for (unsigned i = 0; i < F_N; i++) {
		char dir[4096];
		struct stat st;
		bool seen = false;
		int fd;

		if (!f[i].created)
			continue;
		parent_dir(f[i].path, dir, sizeof(dir));
		if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0) {
			fprintf(stderr, PROG ": cannot open the directory %s: %s\n", dir, strerror(errno));
			if (fd >= 0)
				close(fd);
			return 1;
		}
		for (unsigned k = 0; k < n_done; k++)
			seen |= done_dev[k] == st.st_dev && done_ino[k] == st.st_ino;
		if (!seen && fsync(fd) < 0) {
			fprintf(stderr, PROG ": fsync of the directory %s: %s\n", dir, strerror(errno));
			close(fd);
			return 1;
		}
		close(fd);
		done_dev[n_done] = st.st_dev;
		done_ino[n_done++] = st.st_ino;
	}
	return 0;
}

/* Create every file (O_EXCL: an existing one is never touched), then write
 * and fsync each, then the verification key to standard output if asked,
 * then fsync the directories. Any failure removes what this run created.
 * 0, or 1 after saying why. */
static int write_files(struct out_file *f)
{
	for (unsigned i = 0; i < F_N; i++) {
		struct stat st;
		if (!strcmp(f[i].path, "-"))
			continue;
		f[i].fd = open(f[i].path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, f[i].mode);
		if (f[i].fd < 0) {
			int e = errno;
			if (e == EEXIST)
				fprintf(stderr, PROG ": %s exists: a key file is never overwritten (%s); nothing was "
						"written\n", f[i].path, f[i].opt);
			else
				fprintf(stderr, PROG ": cannot create %s (%s): %s; nothing was written\n", f[i].path,
					f[i].opt, strerror(e));
			remove_created(f);
			return 1;
		}
		if (fstat(f[i].fd, &st) < 0) {
			fprintf(stderr, PROG ": %s: %s; nothing was written\n", f[i].path, strerror(errno));
			close(f[i].fd);
			f[i].fd = -1;
			remove_created(f);
			return 1;
		}
		f[i].created = true;
		f[i].dev = st.st_dev;
		f[i].ino = st.st_ino;
	}
	for (unsigned i = 0; i < F_N; i++) {
		int r;
		if (f[i].fd < 0)
			continue;
		if (interrupted)
			goto stopped;
		/* exactly the mode, whatever the umask */
		if ((r = fchmod(f[i].fd, f[i].mode)) < 0 ||
		    (r = cli_write_all(f[i].fd, f[i].buf, f[i].len, &interrupted)) < 0 ||
		    (r = fsync(f[i].fd)) < 0) {
			fprintf(stderr, PROG ": cannot write %s: %s; nothing was left behind\n", f[i].path,
				strerror(r == -1 ? errno : -r));
			remove_created(f);
			return 1;
		}
	}
	if (!strcmp(f[F_VKEY].path, "-")) {
		int r = cli_write_all(STDOUT_FILENO, f[F_VKEY].buf, f[F_VKEY].len, &interrupted);
		if (r < 0) {
			fprintf(stderr, PROG ": cannot write the verification key to standard output: %s; "
					"nothing was left behind\n", strerror(-r));
			remove_created(f);
			return 1;
		}
	}
	if (interrupted)
		goto stopped;
	if (sync_dirs(f)) {
		fprintf(stderr, PROG ": nothing was left behind\n");
		remove_created(f);
		return 1;
	}
	if (interrupted)
		goto stopped;
	for (unsigned i = 0; i < F_N; i++) {
		if (f[i].fd >= 0 && close(f[i].fd) < 0) {
			f[i].fd = -1;
			fprintf(stderr, PROG ": closing %s: %s; nothing was left behind\n", f[i].path,
				strerror(errno));
			remove_created(f);
			return 1;
		}
		f[i].fd = -1;
	}
	return 0;
stopped:
	fprintf(stderr, PROG ": interrupted (%s); nothing was left behind\n", strsignal(interrupted));
	remove_created(f);
	return 1;
}

/* --dir DIR that does not exist yet: made, 0700 (it will hold secrets), and
 * its parent fsync'ed so the new entry is as durable as the files in it.
 * *made says whether this run made it (a failure later removes it). 0, or 1
 * after saying why. */
static int make_dir(const char *dir, bool *made)
{
	struct stat st;

	*made = false;
	if (stat(dir, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return 0;
		fprintf(stderr, PROG ": %s (--dir) is not a directory; nothing was written\n", dir);
		return 1;
	}
	if (errno != ENOENT || mkdir(dir, 0700) < 0) {
		fprintf(stderr, PROG ": cannot make the directory %s (--dir): %s; nothing was written\n", dir,
			strerror(errno));
		return 1;
	}
	*made = true;
	char name[4096], parent[4096];
	size_t l = strlen(dir);
	while (l > 1 && dir[l - 1] == '/') /* "keys/": the parent of keys */
		l--;
	snprintf(name, sizeof(name), "%.*s", (int)l, dir);
	parent_dir(name, parent, sizeof(parent));
	int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int e = fd < 0 || fsync(fd) < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	if (e) {
		fprintf(stderr, PROG ": cannot fsync %s, the directory of %s: %s; nothing was left behind\n",
			parent, dir, strerror(e));
		rmdir(dir);
		*made = false;
	}
	return e ? 1 : 0;
}

/* "<origin>+<8 hex>+<b64(0x01 || pub)>" (docs/format.md 20.2), or with the
 * origin's key id as a placeholder when chain_id is NULL. */
static int note_key(const uint8_t *host, size_t hlen, const uint8_t *chain_id,
		    const uint8_t pub[AL_ED25519_PUB_LEN], char *out, size_t cap)
{
	uint8_t typed[1 + AL_ED25519_PUB_LEN], origin[AL_ORIGIN_MAX], kid[AL_NOTE_KID_LEN];
	unsigned char b64[64];
	char kh[2 * AL_NOTE_KID_LEN + 1];
	long olen;

	typed[0] = 0x01; /* Ed25519 */
	memcpy(typed + 1, pub, AL_ED25519_PUB_LEN);
	EVP_EncodeBlock(b64, typed, sizeof(typed));
	if (!chain_id) {
		snprintf(out, cap, "%.*s/auditlog/<chain-id>+<note-key-id>+%s", (int)hlen, (const char *)host,
			 (const char *)b64);
		return 0;
	}
	if ((olen = al_checkpoint_origin(host, hlen, chain_id, origin)) < 0 ||
	    al_note_key_id(origin, (size_t)olen, pub, kid) < 0)
		return -EINVAL;
	al_hex(kid, sizeof(kid), kh);
	kh[sizeof(kh) - 1] = 0;
	snprintf(out, cap, "%.*s+%s+%s", (int)olen, (const char *)origin, kh, (const char *)b64);
	return 0;
}

/* --note-key CHAIN_ID --pubkey FILE: one line on stdout. */
static int print_note_key(const char *chain, const char *path)
{
	struct al_ckey k;
	char buf[1024], line[256];
	ssize_t n;
	int fd;

	if (strlen(chain) != 32 || strspn(chain, "0123456789abcdef") != 32)
		return refuse("--note-key", chain, "wants a chain id: 32 lowercase hex digits");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, PROG ": cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	do
		n = read(fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	int e = errno;
	close(fd);
	if (n < 0) {
		fprintf(stderr, PROG ": cannot read %s: %s\n", path, strerror(e));
		return 1;
	}
	if (al_ckey_parse((const uint8_t *)buf, (size_t)n, false, &k) < 0) {
		fprintf(stderr, PROG ": %s is not a checkpoint public key (docs/format.md 17.3)\n", path);
		return 1;
	}
	if (note_key(k.host, k.host_len, (const uint8_t *)chain, k.key, line, sizeof(line)) < 0) {
		fprintf(stderr, PROG ": %s: cannot make the note key\n", path);
		return 1;
	}
	printf("%s\n", line);
	return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}

static void print_summary(FILE *o, const struct al_seal_params *p, uint64_t max_jump, uint32_t now_epoch,
			  const struct out_file *f, const uint8_t pub[AL_ED25519_PUB_LEN])
{
	char kid[2 * AL_SEAL_KID_LEN + 1], ts[AL_TS_LEN + 1], sec[32], nk[256];
	const char *h = (const char *)p->host;
	int hl = (int)p->host_len;

	al_hex(p->key_id, AL_SEAL_KID_LEN, kid);
	kid[sizeof(kid) - 1] = 0;
	al_format_ts(p->t0, ts);
	ts[AL_TS_LEN] = 0;
	fmt_seconds(p->delta, sec);
	note_key(p->host, p->host_len, NULL, pub, nk, sizeof(nk));
	fprintf(o, "host %.*s\n", hl, h);
	fprintf(o, "key-id %s\n", kid);
	fprintf(o, "t0 %" PRIu64 " (%s)\n", p->t0, ts);
	fprintf(o, "delta %" PRIu64 " (%s s)\n", p->delta, sec);
	fprintf(o, "max-jump %" PRIu64 " (epochs one reboot may skip)\n", max_jump);
	fprintf(o, "epoch 0 in the state; the epoch now is %" PRIu32 "\n", now_epoch);
	for (unsigned i = 0; i < F_N; i++)
		fprintf(o, "%s %s (%s)\n", f[i].name, strcmp(f[i].path, "-") ? f[i].path : "(standard output)",
			f[i].role);
	fprintf(o, "origin %.*s/auditlog/<chain-id>\n", hl, h);
	fprintf(o, "note-key %s\n", nk);
	fprintf(o, "  <chain-id> is each chain's chain_id (32 hex digits, in its headers): every chain has\n"
		   "  its own origin, and <note-key-id> = hex(SHA-256(origin || 0x0a || 0x01 || public\n"
		   "  key)[0:4]) (docs/format.md 20.2) differs with it. A chain's exact key:\n"
		   "  " PROG " --note-key CHAIN_ID --pubkey %s\n",
		strcmp(f[F_PUB].path, "-") ? f[F_PUB].path : "PUBKEY");
	fprintf(o, "The verification key forges every seal of this host: move it off the host, to the\n"
		   "auditor. A copy of the sealing state taken at epoch e (a backup, a snapshot) forges\n"
		   "every epoch >= e: keep its directory out of backups and snapshots.\n");
}

/* ---- --attest (docs/format.md 27) ------------------------------------------ */

/* An OFD lock on <state>.lock, the lock the state's holders take
 * exclusively to advance it (17.2 rule 5): shared (F_RDLCK), the state is not
 * being replaced while it is read; exclusive (F_WRLCK), no holder advances it
 * while --rekey replaces it. Returns the descriptor (closing it releases the lock) or
 * -errno. */
static int lock_state(const char *state, short type)
{
	char *lp = NULL;
	int fd;

	if (asprintf(&lp, "%s.lock", state) < 0)
		return -ENOMEM;
	fd = al_state_lock(AT_FDCWD, lp, type);
	free(lp);
	return fd;
}

static int attest(const char *state, const char *nonce_hex, const char *out)
{
	struct al_sstate ss;
	struct al_attest a;
	struct al_seal_sched now;
	uint8_t *buf = NULL;
	size_t n = 0;
	char text[AL_ATTEST_MAX];
	long tl = -EINVAL;
	int lfd, r, ret = 1;
	struct stat st;

	memset(&ss, 0, sizeof(ss));
	memset(&a, 0, sizeof(a));
	if (nonce_hex) {
		if (strlen(nonce_hex) != 64 || strspn(nonce_hex, "0123456789abcdef") != 64)
			return refuse("--nonce", nonce_hex, "wants the auditor's challenge: 64 lowercase hex digits");
		(void)al_unhex((const uint8_t *)nonce_hex, 64, a.nonce);
		a.has_nonce = true;
	}
	if (out && strcmp(out, "-") == 0)
		out = NULL;
	if (prctl(PR_SET_DUMPABLE, 0) < 0) {
		fprintf(stderr, PROG ": prctl(PR_SET_DUMPABLE): %s\n", strerror(errno));
		return 1;
	}
	if ((lfd = lock_state(state, F_RDLCK)) < 0) {
		fprintf(stderr, PROG ": cannot lock %s.lock: %s\n", state, strerror(-lfd));
		return 1;
	}
	r = cli_read_small(state, 8192, true, &buf, &n);
	if (r == 0 && (stat(state, &st) < 0 || (st.st_mode & 077)))
		r = -EPERM;
	if (r == 0 && (r = al_sstate_parse(buf, n, &ss)) < 0)
		fprintf(stderr, PROG ": %s is not a sealing state (docs/format.md 17.2): refused, nothing "
				"attested\n", state);
	else if (r < 0)
		fprintf(stderr, PROG ": cannot read the sealing state %s: %s\n", state,
			r == -EPERM ? "group or others may access it (it must be 0600)" : strerror(-r));
	/* the readings come after the state was read, under the lock */
	a.wall = clock_ns(CLOCK_REALTIME);
	a.boot_time = clock_ns(CLOCK_BOOTTIME);
	if (r == 0 && (r = read_boot_id(a.boot_id)) < 0)
		fprintf(stderr, PROG ": cannot read the boot id (" BOOT_ID_PATH "): %s\n", strerror(-r));
	close(lfd);
	if (buf) {
		OPENSSL_cleanse(buf, n);
		free(buf);
	}
	if (r < 0)
		goto done;
	a.p = ss.p;
	a.epoch = ss.st.epoch;
	tl = al_attest_format(&a, ss.st.node[0].seed, text, sizeof(text));
	if (tl < 0) {
		fprintf(stderr, PROG ": internal error making the statement: %s\n", strerror((int)-tl));
		goto done;
	}
	/* say so when no holder advanced the state: the statement will show it */
	struct al_seal_clock clk = {.t0 = ss.p.t0, .delta = ss.p.delta, .max_jump = ss.max_jump,
				    .epoch = ss.st.epoch, .boot_start = ss.boot_start};
	memcpy(clk.boot_id, ss.boot_id, 16);
	if (al_seal_schedule(&clk, a.boot_id, a.boot_time, a.wall, &now) == 0 && now.epoch > ss.st.epoch + 1)
		fprintf(stderr, PROG ": warning: the state is at epoch %" PRIu32 " but its schedule is at %" PRIu32
				": no holder advanced it (is the sealer running?); the auditor will see it behind\n",
			ss.st.epoch, now.epoch);
	if (out) {
		int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0) {
			fprintf(stderr, PROG ": cannot create %s: %s\n", out, strerror(errno));
			goto done;
		}
		if ((r = cli_write_all(fd, text, (size_t)tl, &interrupted)) < 0 || (r = fsync(fd)) < 0) {
			fprintf(stderr, PROG ": cannot write %s: %s\n", out, strerror(r == -1 ? errno : -r));
			close(fd);
			(void)unlink(out);
			goto done;
		}
		close(fd);
	} else if ((r = cli_write_all(STDOUT_FILENO, text, (size_t)tl, &interrupted)) < 0) {
		fprintf(stderr, PROG ": cannot write the statement: %s\n", strerror(-r));
		goto done;
	}
	ret = 0;
done:
	al_seal_state_wipe(&ss.st);
	OPENSSL_cleanse(&ss, sizeof(ss));
	return ret;
}

/* ---- --rekey (docs/format.md 17.4) ------------------------------------------ */

/* A new seal key for the host of the state at `state`: the new state replaces
 * the old one atomically, under the holders' lock; the new verification key
 * goes to vkey_path (created, never overwritten) or standard output ("-")
 * before the rename, so the state is never replaced by one whose
 * verification key was not delivered. The old state may be missing or
 * unreadable (lost or corrupt): then --host names the host. */
static int rekey(const char *state, const char *vkey_path, const char *host_arg, const char *delta_arg,
		 const char *jump_arg)
{
	struct al_sstate old, ss;
	struct al_vkey vk;
	uint8_t S[AL_SEAL_SEED_LEN], *buf = NULL;
	size_t n = 0;
	char sbuf[4096], vbuf[1024], tmp[8400], dir[4096], okid[2 * AL_SEAL_KID_LEN + 1] = "", nkid[2 * AL_SEAL_KID_LEN + 1];
	bool have_old = false, to_stdout = strcmp(vkey_path, "-") == 0, vkey_made = false, tmp_made = false;
	uint64_t delta = 10 * NS, max_jump, W, b;
	long sl = -EINVAL, vl = -EINVAL;
	int lfd = -1, fd = -1, dfd = -1, r, ret = 1;
	const char *why_old = NULL;

	memset(&old, 0, sizeof(old));
	memset(&ss, 0, sizeof(ss));
	memset(&vk, 0, sizeof(vk));
	if (prctl(PR_SET_DUMPABLE, 0) < 0) {
		fprintf(stderr, PROG ": prctl(PR_SET_DUMPABLE): %s\n", strerror(errno));
		return 1;
	}
	if (host_arg && !al_seal_host_ok((const uint8_t *)host_arg, strlen(host_arg)))
		return refuse("--host", host_arg, "wants a host id: 1-63 of a-z 0-9 . - starting with a letter or "
						  "digit (docs/format.md 16.1)");
	if (delta_arg && parse_delta(delta_arg, &delta) < 0)
		return refuse("--delta", delta_arg, "wants seconds above 0 (10, 1, 0.5)");
	if ((lfd = lock_state(state, F_WRLCK)) < 0) {
		fprintf(stderr, PROG ": cannot lock %s.lock: %s\n", state, strerror(-lfd));
		return 1;
	}
	/* the old state, if it can be read: its host and parameters */
	r = cli_read_small(state, 8192, true, &buf, &n);
	if (r == 0 && (r = al_sstate_parse(buf, n, &old)) == 0)
		have_old = true;
	else
		why_old = r == -ENOENT ? "missing" : r == -EINVAL ? "not a sealing state (corrupt)" : strerror(-r);
	if (buf) {
		OPENSSL_cleanse(buf, n);
		free(buf);
	}
	if (have_old) {
		al_hex(old.p.key_id, AL_SEAL_KID_LEN, okid);
		okid[sizeof(okid) - 1] = 0;
		if (host_arg && (strlen(host_arg) != old.p.host_len || memcmp(host_arg, old.p.host, old.p.host_len))) {
			fprintf(stderr, PROG ": --host %s is not the host of the state (%.*s): a re-key keeps the host "
					"id; nothing was written\n", host_arg, (int)old.p.host_len, (const char *)old.p.host);
			goto done;
		}
		if (!delta_arg)
			delta = old.p.delta;
	} else if (!host_arg) {
		fprintf(stderr, PROG ": the state %s is %s: give --host ID for the new key; nothing was written\n",
			state, why_old);
		goto done;
	}
	max_jump = have_old && !delta_arg ? old.max_jump : 366ull * 86400 * NS / delta;
	if (max_jump == 0)
		max_jump = 1;
	if (jump_arg && (cli_parse_udec(jump_arg, strlen(jump_arg), UINT32_MAX, &max_jump) < 0 || max_jump == 0)) {
		ret = refuse("--max-jump", jump_arg, "wants a number of epochs from 1 to 4294967295");
		goto done;
	}
	/* the new key: t0 now, epoch 0 now (as a first keygen) */
	W = clock_ns(CLOCK_REALTIME);
	b = clock_ns(CLOCK_BOOTTIME);
	if (RAND_priv_bytes(S, sizeof(S)) != 1) {
		fprintf(stderr, PROG ": no random bytes from OpenSSL (RAND_priv_bytes)\n");
		goto done;
	}
	if (have_old) {
		ss.p = old.p;
	} else {
		memcpy(ss.p.host, host_arg, strlen(host_arg));
		ss.p.host_len = strlen(host_arg);
	}
	ss.p.t0 = W;
	ss.p.delta = delta;
	ss.max_jump = max_jump;
	ss.boot_start = b;
	if ((r = read_boot_id(ss.boot_id)) < 0) {
		fprintf(stderr, PROG ": cannot read the boot id (" BOOT_ID_PATH "): %s\n", strerror(-r));
		goto done;
	}
	if ((r = al_seal_key_id(S, ss.p.host, ss.p.host_len, W, delta, ss.p.key_id)) < 0 ||
	    (r = al_seal_state_init(&ss.st, S, 0)) < 0)
		goto done;
	vk.p = ss.p;
	memcpy(vk.seed, S, sizeof(S));
	al_hex(ss.p.key_id, AL_SEAL_KID_LEN, nkid);
	nkid[sizeof(nkid) - 1] = 0;
	sl = al_sstate_format(&ss, sbuf, sizeof(sbuf));
	vl = al_vkey_format(&vk, vbuf, sizeof(vbuf));
	if (sl < 0 || vl < 0) {
		fprintf(stderr, PROG ": internal error formatting the keys\n");
		goto done;
	}
	/* 1. the new state, durable, beside the old one */
	parent_dir(state, dir, sizeof(dir));
	const char *base = strrchr(state, '/') ? strrchr(state, '/') + 1 : state;
	uint8_t rnd[8];
	char rh[17];
	if (getentropy(rnd, sizeof(rnd)) < 0)
		goto done;
	al_hex(rnd, sizeof(rnd), rh);
	rh[16] = 0;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.%s.rekey", dir, base, rh) >= sizeof(tmp)) {
		fprintf(stderr, PROG ": %s: name too long\n", state);
		goto done;
	}
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
		fprintf(stderr, PROG ": cannot create %s: %s; nothing was changed\n", tmp, strerror(errno));
		goto done;
	}
	tmp_made = true;
	if ((r = cli_write_all(fd, sbuf, (size_t)sl, &interrupted)) < 0 || (r = fdatasync(fd)) < 0 ||
	    (r = close(fd)) < 0) {
		fprintf(stderr, PROG ": cannot write %s: %s; nothing was changed\n", tmp, strerror(r == -1 ? errno : -r));
		fd = -1;
		goto done;
	}
	fd = -1;
	/* 2. the new verification key, delivered before the state is replaced */
	if (to_stdout) {
		if ((r = cli_write_all(STDOUT_FILENO, vbuf, (size_t)vl, &interrupted)) < 0) {
			fprintf(stderr, PROG ": cannot write the verification key: %s; nothing was changed\n",
				strerror(-r));
			goto done;
		}
	} else {
		if ((fd = open(vkey_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
			fprintf(stderr, PROG ": cannot create %s: %s (a key file is never overwritten); nothing was "
					"changed\n", vkey_path, strerror(errno));
			goto done;
		}
		vkey_made = true;
		if ((r = fchmod(fd, 0600)) < 0 || (r = cli_write_all(fd, vbuf, (size_t)vl, &interrupted)) < 0 ||
		    (r = fsync(fd)) < 0 || (r = close(fd)) < 0) {
			fprintf(stderr, PROG ": cannot write %s: %s; nothing was changed\n", vkey_path,
				strerror(r == -1 ? errno : -r));
			fd = -1;
			goto done;
		}
		fd = -1;
	}
	/* 3. the rename over the old state, and the directory */
	if (rename(tmp, state) < 0) {
		fprintf(stderr, PROG ": cannot rename %s over %s: %s; nothing was changed\n", tmp, state,
			strerror(errno));
		goto done;
	}
	tmp_made = false;
	vkey_made = false; /* it belongs to the new state now */
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fsync(dfd) < 0)
		fprintf(stderr, PROG ": warning: fsync of the directory %s: %s\n", dir, strerror(errno));
	fprintf(to_stdout ? stderr : stdout,
		"re-keyed host %.*s: new key id %s (t0 %" PRIu64 ", delta %" PRIu64 " ns), state %s\n"
		"old state: %s%s%s\n"
		"Give the new verification key to the auditor, who keeps the old one too. Writers and the\n"
		"sealer pick up the new state when they are started again; their next open seal names the\n"
		"old key (prev_key, docs/format.md 17.4).\n",
		(int)ss.p.host_len, (const char *)ss.p.host, nkid, W, delta, state,
		have_old ? "key id " : why_old, have_old ? okid : "", have_old ? ", replaced" : " (nothing erased)");
	ret = 0;
done:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	if (tmp_made)
		(void)unlink(tmp);
	if (vkey_made)
		(void)unlink(vkey_path);
	if (lfd >= 0)
		close(lfd);
	OPENSSL_cleanse(S, sizeof(S));
	OPENSSL_cleanse(sbuf, sizeof(sbuf));
	OPENSSL_cleanse(vbuf, sizeof(vbuf));
	al_seal_state_wipe(&old.st);
	al_seal_state_wipe(&ss.st);
	OPENSSL_cleanse(&old, sizeof(old));
	OPENSSL_cleanse(&ss, sizeof(ss));
	OPENSSL_cleanse(&vk, sizeof(vk));
	return ret;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{"host", required_argument, NULL, 'H'},
		{"delta", required_argument, NULL, 'd'},
		{"max-jump", required_argument, NULL, 'm'},
		{"t0", required_argument, NULL, 't'},
		{"dir", required_argument, NULL, 'D'},
		{"state", required_argument, NULL, 'S'},
		{"signing-key", required_argument, NULL, 'K'},
		{"pubkey", required_argument, NULL, 'P'},
		{"verify-key", required_argument, NULL, 'v'},
		{"note-key", required_argument, NULL, 'N'},
		{"attest", no_argument, NULL, 'A'},
		{"rekey", no_argument, NULL, 'R'},
		{"nonce", required_argument, NULL, 'n'},
		{"out", required_argument, NULL, 'o'},
		{NULL, 0, NULL, 0},
	};
	struct out_file f[F_N] = {
		[F_STATE] = {"--state", "sealing-state", "0600: the writer's in-process mode, or auditlog-sealer", 0600},
		[F_SIGN] = {"--signing-key", "signing-key", "0600: beside the sealing state", 0600},
		[F_PUB] = {"--pubkey", "pubkey", "0644: for anyone; auditlog-verify --pubkey", 0644},
		[F_VKEY] = {"--verify-key", "verify-key",
			    "0600: the auditor's, off this host; auditlog-verify --verify-key", 0600},
	};
	const char *host_arg = NULL, *dir = NULL, *delta_arg = NULL, *jump_arg = NULL, *t0_arg = NULL,
		   *note_chain = NULL, *nonce_arg = NULL, *out_arg = NULL;
	bool attest_mode = false, rekey_mode = false;
	char hostbuf[256];
	uint8_t S[AL_SEAL_SEED_LEN], edseed[AL_ED25519_SEED_LEN], pub[AL_ED25519_PUB_LEN], boot_id[16];
	struct al_vkey vk;
	struct al_sstate ss;
	struct al_ckey ck_pub, ck_sec;
	struct al_seal_params p;
	uint64_t t0, delta = 10 * NS, max_jump, W, b;
	int c, r, ret = 2;

	memset(&vk, 0, sizeof(vk));
	memset(&ss, 0, sizeof(ss));
	memset(&ck_pub, 0, sizeof(ck_pub));
	memset(&ck_sec, 0, sizeof(ck_sec));
	memset(&p, 0, sizeof(p));
	for (unsigned i = 0; i < F_N; i++)
		f[i].fd = -1;
	/* A closed 0, 1 or 2 gets /dev/null, so no key file is ever opened as
	 * one (and then written to as standard output); a closed standard
	 * output cannot take the verification key. */
	bool stdout_closed = fcntl(STDOUT_FILENO, F_GETFD) < 0;
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0)
			continue;
		int nul = open("/dev/null", O_RDWR); /* the lowest free descriptor: fd */
		if (nul != fd) {
			if (nul >= 0)
				close(nul);
			return 1;
		}
	}
	opterr = 0; /* a bad option gets one line: cli_bad_option */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'H': host_arg = optarg; break;
		case 'd': delta_arg = optarg; break;
		case 'm': jump_arg = optarg; break;
		case 't': t0_arg = optarg; break;
		case 'D': dir = optarg; break;
		case 'S': f[F_STATE].path = optarg; break;
		case 'K': f[F_SIGN].path = optarg; break;
		case 'P': f[F_PUB].path = optarg; break;
		case 'v': f[F_VKEY].path = optarg; break;
		case 'N': note_chain = optarg; break;
		case 'A': attest_mode = true; break;
		case 'R': rekey_mode = true; break;
		case 'n': nonce_arg = optarg; break;
		case 'o': out_arg = optarg; break;
		case 'h': fputs(usage, stdout); return 0;
		case 'V': return cli_version(PROG);
		default: return cli_bad_option(PROG, "h", opts, argv);
		}
	}
	if (optind < argc)
		return cli_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
	if (rekey_mode) {
		if (!f[F_STATE].path || !f[F_VKEY].path || attest_mode || note_chain || dir || t0_arg ||
		    f[F_SIGN].path || f[F_PUB].path || nonce_arg || out_arg)
			return cli_usage_error(PROG, "--rekey takes --state FILE and --verify-key FILE|-, and "
						     "--host, --delta, --max-jump, and nothing else");
		return rekey(f[F_STATE].path, f[F_VKEY].path, host_arg, delta_arg, jump_arg);
	}
	if (attest_mode) {
		if (!f[F_STATE].path || note_chain || host_arg || dir || delta_arg || jump_arg || t0_arg ||
		    f[F_SIGN].path || f[F_PUB].path || f[F_VKEY].path)
			return cli_usage_error(PROG, "--attest takes --state FILE, and --nonce HEX and --out FILE, "
						     "and nothing else");
		return attest(f[F_STATE].path, nonce_arg, out_arg);
	}
	if (nonce_arg || out_arg)
		return cli_usage_error(PROG, "--nonce and --out go with --attest");
	if (note_chain) {
		if (!f[F_PUB].path || host_arg || dir || delta_arg || jump_arg || t0_arg || f[F_STATE].path ||
		    f[F_SIGN].path || f[F_VKEY].path)
			return cli_usage_error(PROG, "--note-key takes --pubkey FILE and nothing else");
		return print_note_key(note_chain, f[F_PUB].path);
	}

	/* the parameters (docs/format.md 16.1) */
	if (host_arg) {
		if (!al_seal_host_ok((const uint8_t *)host_arg, strlen(host_arg)))
			return refuse("--host", host_arg,
				      "wants a host id: 1-63 of a-z 0-9 . - starting with a letter or digit "
				      "(docs/format.md 16.1)");
		snprintf(hostbuf, sizeof(hostbuf), "%s", host_arg);
	} else {
		if (gethostname(hostbuf, sizeof(hostbuf) - 1) < 0)
			return cli_usage_error(PROG, "cannot read the hostname (%s): give --host", strerror(errno));
		hostbuf[sizeof(hostbuf) - 1] = 0;
		for (char *q = hostbuf; *q; q++)
			if (*q >= 'A' && *q <= 'Z')
				*q = (char)(*q - 'A' + 'a');
		if (!al_seal_host_ok((const uint8_t *)hostbuf, strlen(hostbuf))) {
			fprintf(stderr, PROG ": the hostname \"");
			put_arg(stderr, hostbuf);
			fprintf(stderr, "\" in lower case is not a host id ([a-z0-9][a-z0-9.-]{0,62}, "
					"docs/format.md 16.1); give one with --host\n");
			return 2;
		}
	}
	if (delta_arg && parse_delta(delta_arg, &delta) < 0)
		return refuse("--delta", delta_arg,
			      "wants seconds above 0: decimal digits, optionally '.' and 1 to 9 more (10, 1, "
			      "0.5), at most 18446744073.709551615");
	max_jump = 366ull * 86400 * NS / delta;
	if (max_jump == 0)
		max_jump = 1;
	if (jump_arg && (cli_parse_udec(jump_arg, strlen(jump_arg), UINT32_MAX, &max_jump) < 0 || max_jump == 0))
		return refuse("--max-jump", jump_arg,
			      "wants a number of epochs from 1 to 4294967295, in decimal digits only");
	W = clock_ns(CLOCK_REALTIME);
	b = clock_ns(CLOCK_BOOTTIME);
	t0 = W;
	if (t0_arg && cli_parse_udec(t0_arg, strlen(t0_arg), UINT64_MAX, &t0) < 0)
		return refuse("--t0", t0_arg, "wants ns since 1970-01-01T00:00:00Z, in decimal digits only");
	if (t0 > W)
		return refuse("--t0", t0_arg ? t0_arg : "now",
			      "is in the future: the sealing state starts at epoch 0, which must have begun");
	if (W - t0 > b) {
		char why[200];
		snprintf(why, sizeof(why), "is before this boot began (%" PRIu64 " s ago): the state's "
			 "boot-start cannot express it (docs/format.md 17.2)", b / NS);
		return refuse("--t0", t0_arg ? t0_arg : "now", why);
	}

	/* the files */
	for (unsigned i = 0; i < F_N; i++) {
		if (!f[i].path && dir) {
			size_t n = strlen(dir) + strlen(f[i].name) + 2;
			if (!(f[i].path = malloc(n))) {
				fprintf(stderr, PROG ": %s\n", strerror(ENOMEM));
				ret = 1;
				goto out;
			}
			snprintf(f[i].path, n, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/",
				 f[i].name);
			f[i].path_alloc = true;
			f[i].opt = "--dir"; /* what the user gave, in the messages */
		}
		if (!f[i].path) {
			ret = cli_usage_error(PROG, "where does the %s go? give --dir DIR or %s FILE",
					      f[i].name, f[i].opt);
			goto out;
		}
		if (!f[i].path[0] || (i != F_VKEY && !strcmp(f[i].path, "-"))) {
			ret = refuse(f[i].opt, f[i].path, i != F_VKEY ? "wants a file name (only --verify-key "
									"can be -, standard output)"
								      : "wants a file name, or -");
			goto out;
		}
		for (unsigned k = 0; k < i; k++) {
			if (!strcmp(f[k].path, f[i].path)) {
				ret = cli_usage_error(PROG, "%s and %s name the same file", f[k].opt, f[i].opt);
				goto out;
			}
		}
	}

	if (stdout_closed && !strcmp(f[F_VKEY].path, "-")) {
		fprintf(stderr, PROG ": --verify-key -: standard output is closed\n");
		ret = 2;
		goto out;
	}

	/* the schedule (docs/format.md 17.2): epoch 0 began at t0, which was
	 * W - t0 ago on the boot clock too */
	struct al_seal_clock clk = {.t0 = t0, .delta = delta, .max_jump = max_jump, .epoch = 0,
				    .boot_start = b - (W - t0)};
	struct al_seal_sched now;
	if ((r = read_boot_id(clk.boot_id)) < 0) {
		fprintf(stderr, PROG ": cannot read the boot id (" BOOT_ID_PATH "): %s\n",
			r == -EINVAL ? "not a UUID" : strerror(-r));
		ret = 1;
		goto out;
	}
	memcpy(boot_id, clk.boot_id, sizeof(boot_id));
	if ((r = al_seal_schedule(&clk, boot_id, b, W, &now)) < 0) {
		ret = cli_usage_error(PROG, "with t0 %" PRIu64 " and delta %" PRIu64 " ns the key is %s", t0, delta,
				      r == -ERANGE ? "already exhausted (docs/format.md 17.2 rule 4)"
						   : "not usable");
		goto out;
	}

	/* the seeds: S (the tree's root) and the Ed25519 private key */
	if (prctl(PR_SET_DUMPABLE, 0) < 0) { /* no core dump holds them */
		fprintf(stderr, PROG ": prctl(PR_SET_DUMPABLE): %s\n", strerror(errno));
		ret = 1;
		goto out;
	}
	if (RAND_priv_bytes(S, sizeof(S)) != 1 || RAND_priv_bytes(edseed, sizeof(edseed)) != 1) {
		fprintf(stderr, PROG ": no random bytes from OpenSSL (RAND_priv_bytes)\n");
		ret = 1;
		goto out;
	}
	memcpy(p.host, hostbuf, strlen(hostbuf));
	p.host_len = strlen(hostbuf);
	p.t0 = t0;
	p.delta = delta;
	if ((r = al_seal_key_id(S, p.host, p.host_len, t0, delta, p.key_id)) < 0 ||
	    (r = al_ed25519_public(edseed, pub)) < 0)
		goto internal;
	vk.p = p;
	memcpy(vk.seed, S, sizeof(S));
	ss.p = p;
	ss.max_jump = max_jump;
	memcpy(ss.boot_id, boot_id, sizeof(boot_id));
	ss.boot_start = clk.boot_start;
	if ((r = al_seal_state_init(&ss.st, S, 0)) < 0)
		goto internal;
	memcpy(ck_pub.host, p.host, p.host_len);
	ck_pub.host_len = p.host_len;
	memcpy(ck_pub.key, pub, sizeof(pub));
	ck_sec = ck_pub;
	memcpy(ck_sec.key, edseed, sizeof(edseed));

	long n[F_N];
	n[F_STATE] = al_sstate_format(&ss, f[F_STATE].buf, sizeof(f[F_STATE].buf));
	n[F_SIGN] = al_ckey_format(&ck_sec, true, f[F_SIGN].buf, sizeof(f[F_SIGN].buf));
	n[F_PUB] = al_ckey_format(&ck_pub, false, f[F_PUB].buf, sizeof(f[F_PUB].buf));
	n[F_VKEY] = al_vkey_format(&vk, f[F_VKEY].buf, sizeof(f[F_VKEY].buf));
	for (unsigned i = 0; i < F_N; i++) {
		if ((r = (int)n[i]) < 0)
			goto internal;
		f[i].len = (size_t)n[i];
	}

	/* A closed stdout is an error to clean up after, not a death; so is a
	 * signal that would end the run (no SA_RESTART: a write blocked on a
	 * full pipe returns), so that no file outlives an interrupted run. */
	struct sigaction sa = {.sa_handler = on_stop};
	sigemptyset(&sa.sa_mask);
	signal(SIGPIPE, SIG_IGN);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	bool dir_made = false;
	if (dir && (ret = make_dir(dir, &dir_made)))
		goto out;
	if ((ret = write_files(f))) {
		if (dir_made)
			rmdir(dir); /* empty again: write_files removed what it made */
		goto out;
	}
	print_summary(strcmp(f[F_VKEY].path, "-") ? stdout : stderr, &p, max_jump, now.epoch, f, pub);
	ret = 0;
	if (fflush(stdout) != 0 || ferror(stdout)) /* the files are made: exit 0 says so */
		fprintf(stderr, PROG ": warning: the summary could not be written to standard output; the "
				"files are written\n");
	goto out;
internal:
	fprintf(stderr, PROG ": internal error formatting the keys: %s\n", strerror(-r));
	ret = 1;
out:
	OPENSSL_cleanse(S, sizeof(S));
	OPENSSL_cleanse(edseed, sizeof(edseed));
	al_seal_state_wipe(&ss.st);
	OPENSSL_cleanse(&ss, sizeof(ss));
	OPENSSL_cleanse(&vk, sizeof(vk));
	OPENSSL_cleanse(&ck_sec, sizeof(ck_sec));
	for (unsigned i = 0; i < F_N; i++) {
		OPENSSL_cleanse(f[i].buf, sizeof(f[i].buf));
		if (f[i].path_alloc)
			free(f[i].path);
	}
	return ret;
}
