/* SPDX-License-Identifier: MIT */
/*
 * auditlog-witness: a witness for the checkpoints of v2 chains
 * (docs/format.md 20.6). `add` checks a checkpoint note against the host's
 * public key and against the last note held for its origin (equal size:
 * equal root; larger: a consistency bundle of 18.4 from the held tree to
 * the new one; smaller: refused), cosigns it as C2SP tlog-cosignature/v1
 * says, keeps it in a state file written atomically and prints it. `export`
 * writes the held note of an origin (or all) as a witness file (20.5).
 * `follow` (follow.c) is the service: the central copies verified as they
 * grow, each checkpoint that verifies and extends the held one cosigned.
 * Exit 0 done, 1 refused, 2 usage or an input / the state unreadable.
 */
#include "cli.h"
#include "format.h"
#include "keyfile.h"
#include "merkle.h"
#include "note.h"
#include "verify.h"
#include "witness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KEY_MAX 4096u
#define BUNDLE_MAX (1u << 20)
#define STATE_MAX (4u * AL_NOTE_MAX * 8u)

static const char usage[] =
	"usage: auditlog-witness --state DIR --key FILE (--pubkey HOSTKEY | --hosts DIR) add NOTE_FILE\n"
	"                        [--consistency BUNDLE]\n"
	"       auditlog-witness --state DIR --key FILE --hosts DIR [--once] follow FILE...\n"
	"       auditlog-witness --state DIR export [ORIGIN]\n"
	"\n"
	"add: check a checkpoint note (docs/format.md 20.2) with the host's public key\n"
	"(auditlog-keygen's pubkey) and against the note held for its origin, cosign it\n"
	"(C2SP tlog-cosignature/v1) with the witness's signing key, keep it and print it.\n"
	"A note larger than the held one needs --consistency, the bundle of\n"
	"`auditlog-verify --prove-consistency HELD:NEW`; a smaller one is refused.\n"
	"follow: the witness as a service: verify each FILE (the central copy of one\n"
	"host's chain, growing) as lines arrive, and cosign every checkpoint that verifies\n"
	"and extends the held one (docs/format.md 20.6); until SIGINT or SIGTERM, or with\n"
	"--once until the files end. A new chain of a registered host is taken on first use.\n"
	"export: the held note of ORIGIN, or every held note, as a witness file for\n"
	"auditlog-verify --witness.\n"
	"\n"
	"  --state DIR            the witness's state (one file per origin)\n"
	"  --key FILE             the witness's signing key (an auditlog-keygen signing-key;\n"
	"                         its host id is the cosignature's key name)\n"
	"  --pubkey HOSTKEY       the public key of the note's host\n"
	"  --hosts DIR            the registered hosts: their public keys, one file each;\n"
	"                         a note of another host is refused\n"
	"  --consistency BUNDLE   a consistency bundle (docs/format.md 18.4)\n"
	"  --once                 follow: read the files to their end, then stop\n"
	"  -h, --help             this text\n"
	"  --version              the version\n"
	"\n"
	"Exit status: 0 done, 1 refused (follow: a checkpoint refused), 2 usage or\n"
	"unreadable input.\n";

int refuse(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, PROG ": refused: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 1;
}

int io_error(const char *what, const char *path, int err)
{
	fprintf(stderr, PROG ": %s %s: %s\n", what, path, strerror(err));
	return 2;
}

/* ---- the held state (20.6) ---------------------------------------------- */

static bool hex_field(struct al_kv *b, const char *name, uint8_t *out, size_t n)
{
	const uint8_t *v;
	size_t vl;

	return al_kv_line(b, name, &v, &vl) && vl == 2 * n && al_unhex(v, vl, out) == 0;
}

static bool dec_field(struct al_kv *b, const char *name, uint64_t *ret)
{
	const uint8_t *v;
	size_t vl;

	return al_kv_line(b, name, &v, &vl) && vl > 0 && (vl == 1 || v[0] != '0') &&
	       cli_parse_udec((const char *)v, vl, AL_MERKLE_MAX_SIZE, ret) == 0;
}

/* "<host>,<chain id>" (neither holds a comma): the state file of an origin */
int state_name(const uint8_t *origin, size_t olen, char *out, size_t cap)
{
	static const char mid[] = "/auditlog/";
	const uint8_t *m;

	if (olen < 1 + 10 + 32 || olen > AL_ORIGIN_MAX || olen >= cap)
		return -EINVAL;
	m = origin + olen - 32 - 10;
	if (memcmp(m, mid, 10) != 0 || !al_seal_host_ok(origin, (size_t)(m - origin)))
		return -EINVAL;
	for (size_t i = olen - 32; i < olen; i++)
		if (!((origin[i] >= '0' && origin[i] <= '9') || (origin[i] >= 'a' && origin[i] <= 'f')))
			return -EINVAL;
	memcpy(out, origin, (size_t)(m - origin));
	out[m - origin] = ',';
	memcpy(out + (m - origin) + 1, origin + olen - 32, 32);
	out[(m - origin) + 33] = 0;
	return 0;
}

/* 0 with *h (h->note NULL: nothing held yet), 2 unreadable, 1 malformed */
int state_load(int dfd, const char *name, const uint8_t *origin, size_t olen, struct held *h)
{
	uint8_t *buf = NULL, *note = NULL;
	size_t n = 0, vl, nl;
	const uint8_t *v;
	struct stat st;
	int fd, ret = 1;

	memset(h, 0, sizeof(*h));
	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : io_error("cannot open the state", name, errno);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)STATE_MAX ||
	    !(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return io_error("cannot read the state", name, EINVAL);
	}
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
		if (r <= 0) {
			close(fd);
			free(buf);
			return io_error("cannot read the state", name, r < 0 ? errno : EIO);
		}
		n += (size_t)r;
	}
	close(fd);
	struct al_kv b = {buf, n, 0};
	if (!al_kv_line(&b, "auditlog-witness-state", &v, &vl) || vl != 1 || v[0] != '1' ||
	    !al_kv_line(&b, "origin", &v, &vl) || vl != olen || memcmp(v, origin, olen) != 0 ||
	    !dec_field(&b, "size", &h->size) || h->size == 0 || !hex_field(&b, "root", h->root, AL_HASH_LEN) ||
	    !al_kv_line(&b, "note", &v, &vl) || vl == 0 || vl % 2 || b.i != b.n)
		goto bad;
	nl = vl / 2;
	if (!(note = malloc(nl)) || al_unhex(v, vl, note) < 0)
		goto bad;
	h->note = note;
	h->len = nl;
	free(buf);
	return 0;
bad:
	free(note);
	free(buf);
	fprintf(stderr, PROG ": the state file %s is not of docs/format.md 20.6\n", name);
	return ret;
}

/* write name atomically: a new file, fsync, rename over, fsync the directory */
int state_store(int dfd, const char *name, const uint8_t *origin, size_t olen, uint64_t size,
		       const uint8_t root[AL_HASH_LEN], const uint8_t *note, size_t len)
{
	char tmp[AL_ORIGIN_MAX + 16], rh[2 * AL_HASH_LEN];
	char *nh = malloc(2 * len);
	FILE *f = NULL;
	int fd, err = 0;

	if (!nh)
		return io_error("cannot write the state", name, ENOMEM);
	snprintf(tmp, sizeof(tmp), ".%s.new", name);
	(void)unlinkat(dfd, tmp, 0); /* a crashed add's leftover: never renamed, never read */
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		err = errno;
		if (fd >= 0)
			close(fd);
		free(nh);
		return io_error("cannot write the state", tmp, err);
	}
	al_hex(root, AL_HASH_LEN, rh);
	al_hex(note, len, nh);
	fprintf(f, "auditlog-witness-state 1\norigin %.*s\nsize %" PRIu64 "\nroot %.*s\nnote %.*s\n", (int)olen,
		(const char *)origin, size, (int)sizeof(rh), rh, (int)(2 * len), nh);
	free(nh);
	if (fflush(f) != 0 || fsync(fileno(f)) < 0)
		err = errno ? errno : EIO;
	if (fclose(f) != 0 && !err)
		err = errno ? errno : EIO;
	if (!err && renameat(dfd, tmp, dfd, name) < 0)
		err = errno;
	if (!err && fsync(dfd) < 0)
		err = errno;
	if (err) {
		(void)unlinkat(dfd, tmp, 0);
		return io_error("cannot write the state", name, err);
	}
	return 0;
}

/* ---- add -------------------------------------------------------------------- */

int read_key(const char *path, bool secret, struct al_ckey *k)
{
	uint8_t *buf = NULL;
	size_t n = 0;
	int r = cli_read_small(path, KEY_MAX, secret, &buf, &n);

	if (r < 0)
		return io_error("cannot read the key", path, -r);
	r = al_ckey_parse(buf, n, secret, k);
	OPENSSL_cleanse(buf, n);
	free(buf);
	if (r < 0) {
		fprintf(stderr, PROG ": %s is not an auditlog %s (docs/format.md 17.3)\n", path,
			secret ? "signing key" : "checkpoint public key");
		return 2;
	}
	return 0;
}

/* the consistency proof of a bundle (18.4) from size m to size sz of origin */
static int bundle_proof(const char *path, const uint8_t *origin, size_t olen, uint64_t m, uint64_t sz,
			uint8_t (*proof)[AL_HASH_LEN], size_t *np)
{
	uint8_t *buf = NULL;
	size_t n = 0, vl;
	const uint8_t *v;
	uint64_t s1, s2;
	int r = cli_read_small(path, BUNDLE_MAX, false, &buf, &n), ret = 1;

	if (r < 0)
		return io_error("cannot read the bundle", path, -r);
	struct al_kv b = {buf, n, 0};
	if (!al_kv_line(&b, "auditlog-consistency-proof", &v, &vl) || vl != 1 || v[0] != '1' ||
	    !al_kv_line(&b, "origin", &v, &vl) || vl != olen || memcmp(v, origin, olen) != 0 ||
	    !dec_field(&b, "size1", &s1) || !dec_field(&b, "size2", &s2)) {
		ret = refuse("%s: not a consistency bundle of this origin (docs/format.md 18.4)", path);
		goto out;
	}
	if (s1 != m || s2 != sz) {
		ret = refuse("%s: not a proof from the held tree size to the note's", path);
		goto out;
	}
	*np = 0;
	while (b.n - b.i > 6 && memcmp(b.p + b.i, "proof ", 6) == 0) {
		if (*np == AL_MERKLE_PROOF_MAX || !hex_field(&b, "proof", proof[*np], AL_HASH_LEN)) {
			ret = refuse("%s: a proof line is not 64 lowercase hex digits (or too many)", path);
			goto out;
		}
		(*np)++;
	}
	ret = 0; /* the notes after it are the host's: the witness trusts its own and the new one */
out:
	free(buf);
	return ret;
}

/* ---- the registered hosts ------------------------------------------------ */

int hosts_load(const char *dir, struct hosts *h)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4096];
	int ret = 0;

	h->k = NULL;
	h->n = 0;
	if (!d)
		return io_error("cannot open --hosts", dir, errno);
	while ((e = readdir(d))) {
		struct al_ckey k, *nk;
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path) ||
		    lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if ((ret = read_key(path, false, &k)))
			break;
		if (hosts_find(h, k.host, k.host_len)) {
			fprintf(stderr, PROG ": %s: a second key of host %.*s in --hosts\n", path, (int)k.host_len,
				(const char *)k.host);
			ret = 2;
			break;
		}
		if (!(nk = realloc(h->k, (h->n + 1) * sizeof(*nk)))) {
			ret = io_error("cannot read --hosts", dir, ENOMEM);
			break;
		}
		nk[h->n++] = k;
		h->k = nk;
	}
	closedir(d);
	if (ret) {
		free(h->k);
		h->k = NULL;
		h->n = 0;
	}
	return ret;
}

const struct al_ckey *hosts_find(const struct hosts *h, const uint8_t *host, size_t len)
{
	for (unsigned i = 0; i < h->n; i++)
		if (h->k[i].host_len == len && memcmp(h->k[i].host, host, len) == 0)
			return &h->k[i];
	return NULL;
}

int cosign_store(int dfd, const char *name, const struct al_ckey *wk, const struct al_vwnote *w,
		 const uint8_t *note, size_t len, size_t tlen, uint8_t **ret_out, size_t *ret_len)
{
	/* the note as received (the log's signature line and any others), then ours */
	size_t cap = len + 4 + wk->host_len + 1 + AL_COSIG_B64_LEN + 1;
	uint8_t *out = malloc(cap);
	long cl;
	int ret;

	if (!out)
		return io_error("cannot cosign", name, ENOMEM);
	memcpy(out, note, len);
	if ((cl = al_cosig_line(wk->key, wk->host, wk->host_len, (uint64_t)time(NULL), note, tlen, out + len,
				cap - len)) < 0) {
		free(out);
		return io_error("cannot cosign", name, (int)-cl);
	}
	if ((ret = state_store(dfd, name, w->origin, w->olen, w->size, w->root, out, len + (size_t)cl))) {
		free(out);
		return ret;
	}
	*ret_out = out;
	*ret_len = len + (size_t)cl;
	return 0;
}

/* ---- add -------------------------------------------------------------------- */

static int cmd_add(const char *dir, const char *keyf, const char *pubf, const char *hostsdir, const char *notef,
		   const char *consf)
{
	struct al_ckey wk, hk;
	struct hosts hs = {0};
	struct al_vwnote *w = NULL;
	unsigned nw = 0;
	uint8_t *note = NULL, *out = NULL;
	size_t len = 0, tlen = 0, olen = 0;
	struct held h = {0};
	char name[AL_ORIGIN_MAX + 2];
	int dfd = -1, ret, r;

	if ((ret = read_key(keyf, true, &wk)) || (pubf && (ret = read_key(pubf, false, &hk))) ||
	    (hostsdir && (ret = hosts_load(hostsdir, &hs))))
		goto out;
	if ((r = cli_read_small(notef, AL_NOTE_MAX * 8, false, &note, &len)) < 0) {
		ret = io_error("cannot read the note", notef, -r);
		goto out;
	}
	ret = 1;
	if (al_witness_parse(note, len, notef, &w, &nw) < 0 || nw != 1) {
		ret = refuse("%s: not one checkpoint note (docs/format.md 20.2)", notef);
		goto out;
	}
	if (hostsdir) {
		const struct al_ckey *k = hosts_find(&hs, w->host, w->host_len);
		if (!k) {
			ret = refuse("%s: host %.*s is not registered (no key of it in --hosts)", notef,
				     (int)w->host_len, (const char *)w->host);
			goto out;
		}
		hk = *k;
	} else if (w->host_len != hk.host_len || memcmp(w->host, hk.host, hk.host_len) != 0) {
		ret = refuse("%s: its origin's host is not the --pubkey's", notef);
		goto out;
	}
	if (al_note_verify(hk.key, w->origin, w->olen, note, len, &tlen) != 0) {
		ret = refuse("%s: no valid signature of the host's key", notef);
		goto out;
	}
	if (state_name(w->origin, w->olen, name, sizeof(name)) < 0) {
		ret = refuse("%s: an origin that is not <host>/auditlog/<chain id>", notef);
		goto out;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		ret = io_error("cannot open --state", dir, errno);
		goto out;
	}
	if (flock(dfd, LOCK_EX) < 0) { /* one add at a time per state */
		ret = io_error("cannot lock --state", dir, errno);
		goto out;
	}
	if ((ret = state_load(dfd, name, w->origin, w->olen, &h)))
		goto out;
	ret = 1;
	if (h.note && w->size < h.size) {
		fprintf(stderr, PROG ": refused: %s: tree size %" PRIu64 " is below the held %" PRIu64
				" (moving backwards)\n", notef, w->size, h.size);
		goto out;
	}
	if (h.note && w->size == h.size) {
		if (CRYPTO_memcmp(w->root, h.root, AL_HASH_LEN) != 0) {
			ret = refuse("%s: inconsistent: the held note of this size has another root", notef);
			goto out;
		}
		fwrite(h.note, 1, h.len, stdout); /* already cosigned */
		ret = 0;
		goto out;
	}
	if (h.note) {
		uint8_t proof[AL_MERKLE_PROOF_MAX][AL_HASH_LEN];
		size_t np = 0;

		if (!consf) {
			fprintf(stderr, PROG ": refused: %s: tree size %" PRIu64 " after the held %" PRIu64
					" needs --consistency\n", notef, w->size, h.size);
			goto out;
		}
		if ((ret = bundle_proof(consf, w->origin, w->olen, h.size, w->size, proof, &np)))
			goto out;
		ret = 1;
		if (al_merkle_verify_consistency(h.size, w->size, h.root, w->root,
						 (const uint8_t(*)[AL_HASH_LEN])proof, np) != 0) {
			ret = refuse("%s: inconsistent: the proof does not lead from the held root to the note's", notef);
			goto out;
		}
	}
	if ((ret = cosign_store(dfd, name, &wk, w, note, len, tlen, &out, &olen)))
		goto out;
	fwrite(out, 1, olen, stdout);
	ret = fflush(stdout) == 0 ? 0 : 2;
out:
	if (dfd >= 0)
		close(dfd);
	OPENSSL_cleanse(&wk, sizeof(wk));
	free(hs.k);
	al_witness_free(w, nw);
	free(h.note);
	free(note);
	free(out);
	return ret;
}

/* one origin's held note to stdout: 0, 1 none held, 2 */
static int export_one(int dfd, const char *origin)
{
	char name[AL_ORIGIN_MAX + 2];
	size_t olen = strlen(origin);
	struct held h = {0};
	int ret;

	if (state_name((const uint8_t *)origin, olen, name, sizeof(name)) < 0)
		return cli_usage_error(PROG, "export: '%s' is not an origin <host>/auditlog/<chain id>", origin);
	if ((ret = state_load(dfd, name, (const uint8_t *)origin, olen, &h)))
		return ret;
	if (!h.note)
		return refuse("no note held for %s", origin);
	fwrite(h.note, 1, h.len, stdout);
	free(h.note);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ORIGIN's held note, or (origin NULL) every held note, by state file name:
 * one witness file (20.5) */
static int cmd_export(const char *dir, const char *origin)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;
	char **names = NULL;
	size_t n = 0;

	if (dfd < 0)
		return io_error("cannot open --state", dir, errno);
	if (origin) {
		ret = export_one(dfd, origin);
	} else {
		int d2 = dup(dfd);
		DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
		struct dirent *e;

		if (!d) {
			if (d2 >= 0)
				close(d2);
			close(dfd);
			return io_error("cannot read --state", dir, errno);
		}
		while ((e = readdir(d))) {
			char *comma = strchr(e->d_name, ','), *o, **nn;
			if (e->d_name[0] == '.' || !comma)
				continue;
			/* "<host>,<chain id>" back to "<host>/auditlog/<chain id>" */
			if (!(o = malloc(strlen(e->d_name) + 10)) || !(nn = realloc(names, (n + 1) * sizeof(*nn)))) {
				free(o);
				ret = io_error("cannot read --state", dir, ENOMEM);
				break;
			}
			sprintf(o, "%.*s/auditlog/%s", (int)(comma - e->d_name), e->d_name, comma + 1);
			names = nn;
			names[n++] = o;
		}
		closedir(d);
		if (!ret && n == 0)
			ret = refuse("no note held in %s", dir);
		qsort(names, n, sizeof(*names), by_name);
		for (size_t i = 0; !ret && i < n; i++)
			ret = export_one(dfd, names[i]);
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
	}
	close(dfd);
	if (fflush(stdout) != 0 && !ret)
		ret = 2;
	return ret;
}

int main(int argc, char **argv)
{
	static const char optstring[] = "h";
	static const struct option longopts[] = {
		{"state", required_argument, NULL, 's'},     {"key", required_argument, NULL, 'k'},
		{"pubkey", required_argument, NULL, 'p'},    {"consistency", required_argument, NULL, 'c'},
		{"hosts", required_argument, NULL, 'H'},     {"once", no_argument, NULL, '1'},
		{"help", no_argument, NULL, 'h'},            {"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *dir = NULL, *key = NULL, *pub = NULL, *cons = NULL, *hosts = NULL;
	bool once = false;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		switch (c) {
		case 's': dir = optarg; break;
		case 'k': key = optarg; break;
		case 'p': pub = optarg; break;
		case 'c': cons = optarg; break;
		case 'H': hosts = optarg; break;
		case '1': once = true; break;
		case 'h': fputs(usage, stdout); return 0;
		case 'V': return cli_version(PROG);
		default: return cli_bad_option(PROG, optstring, longopts, argv);
		}
	}
	if (!dir)
		return cli_usage_error(PROG, "--state DIR is required");
	if (optind < argc && strcmp(argv[optind], "add") == 0) {
		if (argc - optind != 2)
			return cli_usage_error(PROG, "add takes one NOTE_FILE");
		if (!key || !pub == !hosts)
			return cli_usage_error(PROG, "add needs --key and one of --pubkey or --hosts");
		if (once)
			return cli_usage_error(PROG, "--once goes with follow");
		return cmd_add(dir, key, pub, hosts, argv[optind + 1], cons);
	}
	if (optind < argc && strcmp(argv[optind], "follow") == 0) {
		if (argc - optind < 2)
			return cli_usage_error(PROG, "follow takes one FILE or more (the central copies)");
		if (!key || !hosts || pub || cons)
			return cli_usage_error(PROG, "follow needs --key and --hosts (and takes no --pubkey, --consistency)");
		return cmd_follow(dir, key, hosts, argv + optind + 1, (unsigned)(argc - optind - 1), once);
	}
	if (optind < argc && strcmp(argv[optind], "export") == 0) {
		if (argc - optind > 2)
			return cli_usage_error(PROG, "export takes one ORIGIN, or none (every held note)");
		if (key || pub || cons || hosts || once)
			return cli_usage_error(PROG, "export takes only --state");
		return cmd_export(dir, argc - optind == 2 ? argv[optind + 1] : NULL);
	}
	return cli_usage_error(PROG, "a command is required: add, follow or export");
}
