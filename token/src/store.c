/* SPDX-License-Identifier: MIT */
/*
 * The persistent store of one token (docs/token.md "Storage"):
 *
 *   <token_dir>/slot<N>/token.json        label, serial, the two PIN records
 *   <token_dir>/slot<N>/objects/<uuid>.obj one token object each
 *
 * A PIN record holds a random salt, the PBKDF2-HMAC-SHA256 iteration count,
 * a check value and the token master key wrapped (AES-256-GCM) under a key
 * derived from the PIN; SO and user each wrap the same master key, so SO's
 * C_InitPIN re-wraps it for a new user PIN. An object file is a list of
 * attributes; an object that is private or holds key material is encrypted
 * under the master key (only a login unlocks it). Every write is atomic:
 * temporary file, fsync, rename, directory fsync. A file that does not parse
 * is reported (CKR_GENERAL_ERROR with a message), never skipped.
 *
 * Many processes share one store (docs/token.md "Many processes, one
 * token"). <token_dir>/slot<N>/store.lock is both the lock (an exclusive OFD
 * lock on the whole file, taken for every read-modify-write) and a journal:
 * a generation number bumped by every change, and the name of what changed
 * (an object's uuid, or token.json) for each of the last TOK_JOURNAL
 * generations. A process that saw generation g reloads only what the
 * journal names after g; one that fell further behind rescans the store. A
 * C_InitToken starts a new epoch: every process drops its login and objects.
 *
 * A directory of mode exactly 02770 is shared by its group (docs/token.md "A
 * token shared by a group"): what the store creates there is 0660 / 02770
 * (fchmod, whatever the umask), and a file of another user is used only in
 * that group and mode 0660. Any other directory is private, as before.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <assert.h>
#include <endian.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "core.h"

static const char obj_magic[8] = { 'S', 'T', 'O', 'K', 'O', 'B', 'J', '1' };
#define OBJ_ENCRYPTED 1u

/* ---- atomic files --------------------------------------------------------- */

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

mode_t tok_store_file_mode(const struct tok_share *share)
{
	return share && share->shared ? 0660 : 0600;
}

/* Give a file we just created its mode whatever the umask (a shared
 * directory's files are 0660). */
static int set_mode(int fd, const struct tok_share *share)
{
	return share && share->shared && fchmod(fd, tok_store_file_mode(share)) < 0 ? -errno : 0;
}

const char *tok_store_file_refusal(const struct stat *st, const struct tok_share *share, char *buf,
				   size_t buflen)
{
	if (!S_ISREG(st->st_mode))
		return "not a regular file";
	if (st->st_nlink != 1)
		return "more than one hard link";
	if (st->st_mode & S_IWOTH)
		return "world-writable";
	if (!share || !share->shared)
		return NULL; /* private: only root or we can have put it there */
	if (st->st_gid != share->gid) {
		snprintf(buf, buflen, "of group %u, not the shared directory's group %u",
			 (unsigned)st->st_gid, (unsigned)share->gid);
		return buf;
	}
	if (st->st_uid != geteuid() && st->st_uid != 0 && (st->st_mode & 07777) != 0660) {
		snprintf(buf, buflen, "owned by uid %u with mode %04o: another user's file must be 0660",
			 (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777));
		return buf;
	}
	return NULL;
}

/* The temporary file's name is predictable (.<name>.tmp.<pid>), so it is
 * created with O_EXCL|O_NOFOLLOW: a symlink or a hard link planted there is
 * never followed or truncated. What is found there is removed only when it
 * is a plain file of ours with one link (a temporary left by a crash of an
 * earlier process with our pid); anything else refuses the write. */
static int open_tmp(const char *tmp, const struct tok_share *share)
{
	struct stat st;
	mode_t mode = tok_store_file_mode(share);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);

	if (fd < 0 && errno == EEXIST) {
		if (lstat(tmp, &st) < 0)
			return -errno;
		if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != geteuid()) {
			tok_msg("%s exists and is not a stale temporary file of ours: refused", tmp);
			return -EEXIST;
		}
		if (unlink(tmp) < 0)
			return -errno;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	}
	if (fd < 0)
		return -errno;
	if (set_mode(fd, share) < 0) {
		int r = -errno;
		close(fd);
		unlink(tmp);
		return r;
	}
	return fd;
}

static int write_atomic(const char *dir, const struct tok_share *share, const char *name, const uint8_t *buf,
			size_t len)
{
	char tmp[4096], dst[4096];
	size_t off = 0;
	int fd, r = 0;

	if (snprintf(tmp, sizeof(tmp), "%s/.%s.tmp.%ld", dir, name, (long)getpid()) >= (int)sizeof(tmp) ||
	    snprintf(dst, sizeof(dst), "%s/%s", dir, name) >= (int)sizeof(dst))
		return -ENAMETOOLONG;
	fd = open_tmp(tmp, share);
	if (fd < 0)
		return fd;
	while (off < len) {
		ssize_t n = write(fd, buf + off, len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto fail;
		}
		off += (size_t)n;
	}
	if (fsync(fd) < 0) {
		r = -errno;
		goto fail;
	}
	if (close(fd) < 0) {
		fd = -1;
		r = -errno;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, dst) < 0) {
		r = -errno;
		goto fail;
	}
	return fsync_dir(dir);
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return r;
}

/* Store files are read with O_NOFOLLOW (a symlink answers -ELOOP) and must be
 * regular files with one link, at most TOK_STORE_MAX_FILE bytes (-EINVAL
 * otherwise), and fit their directory's sharing (-EPERM, the reason in why). */
static int read_file(const char *path, const struct tok_share *share, uint8_t **ret, size_t *ret_len,
		     char *why, size_t whylen)
{
	struct stat st;
	const char *no;
	uint8_t *buf;
	size_t off = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    st.st_size > TOK_STORE_MAX_FILE) {
		close(fd);
		return -EINVAL;
	}
	no = tok_store_file_refusal(&st, share, why, whylen);
	if (no) {
		if (no != why)
			snprintf(why, whylen, "%s", no);
		close(fd);
		return -EPERM;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (off < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			free(buf);
			close(fd);
			return n < 0 ? -errno : -EIO;
		}
		off += (size_t)n;
	}
	close(fd);
	*ret = buf;
	*ret_len = off;
	return 0;
}

static const char *read_err(int r, const char *why)
{
	return r == -ELOOP ? "a symlink: refused" :
	       r == -EINVAL ? "not a regular file with one link, or too large: refused" :
	       r == -EPERM ? why : strerror(-r);
}

/* Is the directory holding path shared (mode 02770)? */
static void parent_share(const char *path, struct tok_share *ret)
{
	char parent[4096];
	const char *slash = strrchr(path, '/');
	struct stat st;
	size_t n = slash ? (size_t)(slash - path) : 0;

	*ret = (struct tok_share){ 0 };
	if (!slash || n >= sizeof(parent))
		return;
	memcpy(parent, path, n ? n : 1);
	parent[n ? n : 1] = '\0';
	if (stat(parent, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 02770)
		*ret = (struct tok_share){ .shared = true, .gid = st.st_gid };
}

int tok_store_mkdir(const char *dir)
{
	struct tok_share ps;
	int fd, r = 0;

	if (mkdir(dir, 0700) < 0)
		return errno == EEXIST ? 0 : -errno;
	parent_share(dir, &ps);
	if (!ps.shared)
		return 0;
	/* Inside a shared directory: shared too (the setgid bit gave it the
	 * group; the mode is set here, not left to the umask). */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 02770) < 0)
		r = -errno;
	close(fd);
	return r;
}

CK_RV tok_store_check_dir(const char *path, const char *what, bool nofollow, const struct tok_share *parent,
			  struct tok_share *ret_share, char *err, size_t errlen)
{
	struct stat st;
	bool shared;

	if ((nofollow ? lstat(path, &st) : stat(path, &st)) < 0) {
		snprintf(err, errlen, "cannot stat %s %s: %s", what, path, strerror(errno));
		return CKR_GENERAL_ERROR;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s %s is not a directory%s: refused", what, path,
			 S_ISLNK(st.st_mode) ? " (a symlink)" : "");
		return CKR_GENERAL_ERROR;
	}
	if (st.st_mode & S_IWOTH) {
		snprintf(err, errlen,
			 "%s %s is world-writable (mode %04o): refused; use 0700, or a group (softtoken) "
			 "and mode 2770 for shared use",
			 what, path, (unsigned)(st.st_mode & 07777));
		return CKR_GENERAL_ERROR;
	}
	/* Shared: setgid, the group may do what the owner does, others
	 * nothing. Any owner (the group is the trust boundary), but inside a
	 * shared directory only of that directory's group. */
	shared = (st.st_mode & 07777) == 02770;
	if (shared && parent && parent->shared && st.st_gid != parent->gid) {
		snprintf(err, errlen, "%s %s is of group %u, not its parent's group %u: refused", what, path,
			 (unsigned)st.st_gid, (unsigned)parent->gid);
		return CKR_GENERAL_ERROR;
	}
	if (!shared && st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "%s %s belongs to uid %u, neither root nor us: refused (a directory shared by a "
			 "group must be mode 2770)",
			 what, path, (unsigned)st.st_uid);
		return CKR_GENERAL_ERROR;
	}
	if (ret_share)
		*ret_share = (struct tok_share){ .shared = shared, .gid = shared ? st.st_gid : 0 };
	return CKR_OK;
}

static CK_RV errno_rv(int r)
{
	return r == -ENOMEM ? CKR_HOST_MEMORY : r == -ENOSPC ? CKR_DEVICE_MEMORY : CKR_DEVICE_ERROR;
}

/* ---- AES-256-GCM with the master key or a PIN-derived key ------------------
 * tok_store_gcm, tok_store_pbkdf2, tok_store_hmac: the engine's private
 * library context (keys.c), so an application's default context, its
 * providers or properties cannot divert or break the store. */
/* ---- PINs ------------------------------------------------------------------ */

static const char aad_mk[] = "softtoken master key v1";

static bool pin_keys(const struct tok_pin *rec, const uint8_t *pin, size_t len, uint8_t kek[32],
		     uint8_t check[32])
{
	uint8_t p[32];
	bool ok;

	/* The PKCS#11 entry points bound the length (TOK_MIN_PIN..TOK_MAX_PIN)
	 * first; never let a CK_ULONG become OpenSSL's int (or its strlen). */
	if (len < TOK_MIN_PIN || len > TOK_MAX_PIN)
		return false;
	ok = tok_store_pbkdf2(pin, len, rec->salt, sizeof(rec->salt), rec->iterations, p) &&
	     tok_store_hmac(p, "kek", kek) && tok_store_hmac(p, "check", check);

	OPENSSL_cleanse(p, sizeof(p));
	return ok;
}

CK_RV tok_pin_make(struct tok_pin *rec, const uint8_t *pin, size_t len, const uint8_t mk[32],
		   uint64_t iterations)
{
	struct tok_pin r = { .set = true, .iterations = iterations };
	uint8_t kek[32];
	CK_RV rv = CKR_DEVICE_ERROR;

	if (len < TOK_MIN_PIN || len > TOK_MAX_PIN)
		return CKR_PIN_LEN_RANGE;
	if (tok_random(r.salt, sizeof(r.salt)) != CKR_OK || tok_random(r.nonce, sizeof(r.nonce)) != CKR_OK)
		return CKR_DEVICE_ERROR;
	if (!pin_keys(&r, pin, len, kek, r.check))
		goto out;
	if (!tok_store_gcm(true, kek, r.nonce, (const uint8_t *)aad_mk, sizeof(aad_mk) - 1, mk, 32,
		 r.wrapped_mk, r.wrapped_mk + 32))
		goto out;
	*rec = r;
	rv = CKR_OK;
out:
	OPENSSL_cleanse(kek, sizeof(kek));
	return rv;
}

CK_RV tok_pin_check(const struct tok_pin *rec, const uint8_t *pin, size_t len, uint8_t ret_mk[32])
{
	uint8_t kek[32], check[32], mk[32], tag[16];
	CK_RV rv = CKR_PIN_INCORRECT;

	if (!rec->set)
		return CKR_USER_PIN_NOT_INITIALIZED;
	if (len < TOK_MIN_PIN || len > TOK_MAX_PIN)
		return CKR_PIN_LEN_RANGE;
	if (!pin_keys(rec, pin, len, kek, check))
		return CKR_DEVICE_ERROR;
	if (CRYPTO_memcmp(check, rec->check, sizeof(check)) != 0)
		goto out;
	memcpy(tag, rec->wrapped_mk + 32, 16);
	/* The check matched: a tag failure now means the record is corrupt. */
	if (!tok_store_gcm(false, kek, rec->nonce, (const uint8_t *)aad_mk, sizeof(aad_mk) - 1,
		 rec->wrapped_mk, 32, mk, tag)) {
		rv = CKR_GENERAL_ERROR;
		goto out;
	}
	if (ret_mk)
		memcpy(ret_mk, mk, 32);
	rv = CKR_OK;
out:
	OPENSSL_cleanse(kek, sizeof(kek));
	OPENSSL_cleanse(check, sizeof(check));
	OPENSSL_cleanse(mk, sizeof(mk));
	return rv;
}

/* ---- token.json -------------------------------------------------------------- */

static json_t *hex_json(const uint8_t *b, size_t n)
{
	char s[2 * 64 + 1];
	static const char hx[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		s[2 * i] = hx[b[i] >> 4];
		s[2 * i + 1] = hx[b[i] & 15];
	}
	s[2 * n] = '\0';
	return json_string(s);
}

static bool json_hex(json_t *o, const char *k, uint8_t *b, size_t n)
{
	const char *s = json_string_value(json_object_get(o, k));

	if (!s || strlen(s) != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return false;
		b[i] = (uint8_t)v;
	}
	return true;
}

static json_t *pin_json(const struct tok_pin *p)
{
	return json_pack("{sI,so,so,so,so,sI}", "iterations", (json_int_t)p->iterations,
			 "salt", hex_json(p->salt, sizeof(p->salt)),
			 "check", hex_json(p->check, sizeof(p->check)),
			 "nonce", hex_json(p->nonce, sizeof(p->nonce)),
			 "wrapped_mk", hex_json(p->wrapped_mk, sizeof(p->wrapped_mk)),
			 "failures", (json_int_t)p->failures);
}

static bool json_pin(json_t *o, struct tok_pin *p)
{
	json_int_t it, fl;

	*p = (struct tok_pin){ 0 };
	if (!o)
		return true; /* not set */
	if (!json_is_object(o) || !json_is_integer(json_object_get(o, "iterations")) ||
	    !json_is_integer(json_object_get(o, "failures")))
		return false;
	it = json_integer_value(json_object_get(o, "iterations"));
	fl = json_integer_value(json_object_get(o, "failures"));
	if (it < 1 || it > 100000000 || fl < 0)
		return false;
	p->iterations = (uint64_t)it;
	p->failures = (uint64_t)fl;
	p->set = json_hex(o, "salt", p->salt, sizeof(p->salt)) &&
		 json_hex(o, "check", p->check, sizeof(p->check)) &&
		 json_hex(o, "nonce", p->nonce, sizeof(p->nonce)) &&
		 json_hex(o, "wrapped_mk", p->wrapped_mk, sizeof(p->wrapped_mk));
	return p->set;
}

/* token.json's fields, parsed from its bytes: the one parser that both the
 * load and the write's read-back check use. */
struct token_file {
	char label[32], serial[16];
	struct tok_pin so, user;
};

static bool parse_token(const uint8_t *buf, size_t len, struct token_file *tf, char *why, size_t whylen)
{
	json_error_t e;
	json_t *j = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, &e);
	const char *serial, *label;
	bool ok;

	if (!j) {
		snprintf(why, whylen, "line %d: %s", e.line, e.text);
		return false;
	}
	serial = json_string_value(json_object_get(j, "serial"));
	/* The label is its 32 bytes in hex: CK_TOKEN_INFO's field, whatever
	 * bytes the application passed (NULs, invalid UTF-8) round-trip. */
	label = json_string_value(json_object_get(j, "label")); /* before label_hex */
	if (label && strlen(label) == sizeof(tf->label) && !json_object_get(j, "label_hex"))
		memcpy(tf->label, label, sizeof(tf->label));
	else if (!json_hex(j, "label_hex", (uint8_t *)tf->label, sizeof(tf->label)))
		serial = NULL;
	ok = json_integer_value(json_object_get(j, "format")) == 1 && serial &&
	     strlen(serial) == sizeof(tf->serial) && json_pin(json_object_get(j, "so"), &tf->so) &&
	     tf->so.set && json_pin(json_object_get(j, "user"), &tf->user);
	if (ok)
		memcpy(tf->serial, serial, sizeof(tf->serial));
	else
		snprintf(why, whylen, "a field is missing or malformed");
	json_decref(j);
	return ok;
}

static bool pin_same(const struct tok_pin *a, const struct tok_pin *b)
{
	return a->set == b->set && a->iterations == b->iterations && a->failures == b->failures &&
	       !memcmp(a->salt, b->salt, sizeof(a->salt)) && !memcmp(a->check, b->check, sizeof(a->check)) &&
	       !memcmp(a->nonce, b->nonce, sizeof(a->nonce)) &&
	       !memcmp(a->wrapped_mk, b->wrapped_mk, sizeof(a->wrapped_mk));
}

static CK_RV announce(struct tok_token *t, const char *uuid, bool new_epoch);

CK_RV tok_store_save_token(struct tok_token *t)
{
	json_t *j = json_pack("{si,s:o,s:s%}", "format", 1, "label_hex",
			      hex_json((const uint8_t *)t->label, sizeof(t->label)), "serial", t->serial,
			      sizeof(t->serial));
	struct token_file back = { 0 };
	char why[256];
	char *s = NULL;
	CK_RV rv;
	int r;

	assert(t->store_locked);
	if (!j)
		return CKR_HOST_MEMORY;
	if (t->so.set)
		json_object_set_new(j, "so", pin_json(&t->so));
	if (t->user.set)
		json_object_set_new(j, "user", pin_json(&t->user));
	s = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(j);
	if (!s)
		return CKR_HOST_MEMORY;
	/* Never write what cannot be read back. */
	if (!parse_token((const uint8_t *)s, strlen(s), &back, why, sizeof(why)) ||
	    memcmp(back.label, t->label, sizeof(t->label)) || memcmp(back.serial, t->serial, sizeof(t->serial)) ||
	    !pin_same(&back.so, &t->so) || !pin_same(&back.user, &t->user)) {
		tok_msg("%s/token.json would not read back as written: not written", t->dir);
		free(s);
		return CKR_GENERAL_ERROR;
	}
	rv = announce(t, NULL, false);
	if (rv == CKR_OK) {
		r = write_atomic(t->dir, &t->share, "token.json", (const uint8_t *)s, strlen(s));
		if (r < 0) {
			tok_msg("cannot write %s/token.json: %s", t->dir, strerror(-r));
			rv = errno_rv(r);
		}
	}
	OPENSSL_cleanse(&back, sizeof(back));
	free(s);
	return rv;
}

/* Read token.json into t; a missing file is a token not initialised. */
static CK_RV load_token(struct tok_token *t)
{
	char path[4096 + 512], why[256];
	struct token_file tf = { 0 };
	uint8_t *buf = NULL;
	size_t len = 0;
	int r;

	snprintf(path, sizeof(path), "%s/token.json", t->dir);
	r = read_file(path, &t->share, &buf, &len, why, sizeof(why));
	if (r == -ENOENT) {
		t->initialized = false;
		t->so = t->user = (struct tok_pin){ 0 };
		return CKR_OK;
	}
	if (r < 0) {
		tok_msg("cannot read token file %s: %s", path, read_err(r, why));
		return r == -ENOMEM ? CKR_HOST_MEMORY : CKR_GENERAL_ERROR;
	}
	if (!parse_token(buf, len, &tf, why, sizeof(why))) {
		tok_msg("corrupt token file %s: %s", path, why);
		free(buf);
		return CKR_GENERAL_ERROR;
	}
	free(buf);
	memcpy(t->label, tf.label, sizeof(t->label));
	memcpy(t->serial, tf.serial, sizeof(t->serial));
	t->so = tf.so;
	t->user = tf.user;
	t->initialized = true;
	OPENSSL_cleanse(&tf, sizeof(tf));
	return CKR_OK;
}

static int rm_objects(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int r = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' && (!de->d_name[1] || de->d_name[1] == '.'))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT)
			r = -errno;
	}
	closedir(d);
	return r;
}

CK_RV tok_store_init_token(struct tok_token *t, const uint8_t *so_pin, size_t so_len,
			   const char label[32])
{
	uint8_t mk[32];
	char objdir[4096];
	struct tok_pin so;
	CK_RV rv;
	int r;

	assert(t->store_locked);
	if (tok_random(mk, sizeof(mk)) != CKR_OK)
		return CKR_DEVICE_ERROR;
	rv = tok_pin_make(&so, so_pin, so_len, mk, tok_g.cfg.pbkdf2_iterations);
	OPENSSL_cleanse(mk, sizeof(mk));
	if (rv != CKR_OK)
		return rv;
	/* A new epoch first: every other process drops its login (its master
	 * key is no longer the token's) and its objects. */
	rv = announce(t, NULL, true);
	if (rv != CKR_OK)
		return rv;
	snprintf(objdir, sizeof(objdir), "%s/objects", t->dir);
	r = rm_objects(objdir);
	if (r < 0) {
		tok_msg("cannot clear %s: %s", objdir, strerror(-r));
		return errno_rv(r);
	}
	t->so = so;
	t->user = (struct tok_pin){ 0 };
	memcpy(t->label, label, sizeof(t->label));
	if (!t->initialized) {
		uint8_t sb[8];
		static const char hx[] = "0123456789abcdef";
		if (tok_random(sb, sizeof(sb)) != CKR_OK)
			return CKR_DEVICE_ERROR;
		for (size_t i = 0; i < sizeof(sb); i++) {
			t->serial[2 * i] = hx[sb[i] >> 4];
			t->serial[2 * i + 1] = hx[sb[i] & 15];
		}
	}
	rv = tok_store_save_token(t);
	if (rv == CKR_OK)
		t->initialized = true;
	return rv;
}

/* ---- objects ----------------------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The object directory's checks (as tok_store_open's), once it exists: it
 * may appear after C_Initialize, made by this or another process. */
static CK_RV objdir_checked(struct tok_token *t)
{
	char objdir[4096 + 16], err[512];

	if (t->obj_checked)
		return CKR_OK;
	snprintf(objdir, sizeof(objdir), "%s/objects", t->dir);
	if (access(objdir, F_OK) < 0)
		return CKR_OK; /* none yet: nothing to read */
	if (tok_store_check_dir(objdir, "object directory", true, &t->share, &t->objshare, err, sizeof(err)) !=
	    CKR_OK) {
		tok_msg("%s", err);
		return CKR_GENERAL_ERROR;
	}
	t->obj_checked = true;
	return CKR_OK;
}

CK_RV tok_store_save_object(struct tok_token *t, struct tok_object *o)
{
	char objdir[4096], name[64];
	size_t len = 0, hdr = sizeof(obj_magic) + 4 + 32, off;
	uint8_t *plain = NULL, *file = NULL;
	bool enc = tok_obj_sealed(o);
	CK_RV rv = CKR_HOST_MEMORY;
	int r;

	assert(t->store_locked);
	snprintf(objdir, sizeof(objdir), "%s/objects", t->dir);
	r = tok_store_mkdir(objdir);
	if (r < 0) {
		tok_msg("cannot create %s: %s", objdir, strerror(-r));
		return errno_rv(r);
	}
	rv = objdir_checked(t);
	if (rv != CKR_OK)
		return rv;
	rv = CKR_HOST_MEMORY;
	pthread_mutex_lock(&o->mu);
	for (size_t i = 0; i < o->attrs.n; i++) {
		/* Never write what cannot be read back: a value over the
		 * format's 32-bit length or a file over the read bound. */
		if (o->attrs.a[i].len > TOK_STORE_MAX_FILE || len > TOK_STORE_MAX_FILE) {
			pthread_mutex_unlock(&o->mu);
			return CKR_DEVICE_MEMORY;
		}
		len += 12 + o->attrs.a[i].len;
	}
	if (hdr + 12 + len + 16 > TOK_STORE_MAX_FILE) {
		pthread_mutex_unlock(&o->mu);
		return CKR_DEVICE_MEMORY;
	}
	plain = malloc(len ? len : 1);
	if (!plain) {
		pthread_mutex_unlock(&o->mu);
		return CKR_HOST_MEMORY;
	}
	off = 0;
	for (size_t i = 0; i < o->attrs.n; i++) {
		put_u64(plain + off, o->attrs.a[i].type);
		put_u32(plain + off + 8, (uint32_t)o->attrs.a[i].len);
		if (o->attrs.a[i].len)
			memcpy(plain + off + 12, o->attrs.a[i].value, o->attrs.a[i].len);
		off += 12 + o->attrs.a[i].len;
	}
	pthread_mutex_unlock(&o->mu);

	file = malloc(hdr + 12 + len + 16);
	if (!file)
		goto out;
	memcpy(file, obj_magic, sizeof(obj_magic));
	put_u32(file + 8, enc ? OBJ_ENCRYPTED : 0);
	memcpy(file + 12, o->uuid, 32);
	if (enc) {
		uint8_t *nonce = file + hdr;
		if (tok_random(nonce, 12) != CKR_OK ||
		    !tok_store_gcm(true, t->mk, nonce, file, hdr, plain, len, file + hdr + 12, file + hdr + 12 + len)) {
			rv = CKR_DEVICE_ERROR;
			goto out;
		}
		off = hdr + 12 + len + 16;
	} else {
		memcpy(file + hdr, plain, len);
		off = hdr + len;
	}
	rv = announce(t, o->uuid, false);
	if (rv != CKR_OK)
		goto out;
	snprintf(name, sizeof(name), "%s.obj", o->uuid);
	r = write_atomic(objdir, &t->objshare, name, file, off);
	if (r < 0) {
		tok_msg("cannot write %s/%s: %s", objdir, name, strerror(-r));
		rv = errno_rv(r);
		goto out;
	}
	rv = CKR_OK;
out:
	if (plain)
		OPENSSL_cleanse(plain, len);
	free(plain);
	if (file)
		OPENSSL_cleanse(file, hdr + len);
	free(file);
	return rv;
}

CK_RV tok_store_delete_object(struct tok_token *t, const struct tok_object *o)
{
	char path[4096 + 512], objdir[4096];
	CK_RV rv;

	assert(t->store_locked);
	rv = announce(t, o->uuid, false);
	if (rv != CKR_OK)
		return rv;
	snprintf(objdir, sizeof(objdir), "%s/objects", t->dir);
	snprintf(path, sizeof(path), "%s/%s.obj", objdir, o->uuid);
	if (unlink(path) < 0 && errno != ENOENT) {
		tok_msg("cannot delete %s: %s", path, strerror(errno));
		return CKR_DEVICE_ERROR;
	}
	return fsync_dir(objdir) < 0 ? CKR_DEVICE_ERROR : CKR_OK;
}

static CK_RV parse_attrs(const uint8_t *p, size_t len, struct tok_attrs *a)
{
	size_t off = 0;

	while (off < len) {
		uint64_t type;
		uint32_t n;
		if (len - off < 12)
			return CKR_GENERAL_ERROR;
		type = get_le(p + off, 8);
		n = (uint32_t)get_le(p + off + 8, 4);
		if (len - off - 12 < n || tok_attrs_get(a, type))
			return CKR_GENERAL_ERROR;
		if (tok_attrs_set(a, type, p + off + 12, n) != CKR_OK)
			return CKR_HOST_MEMORY;
		off += 12 + n;
	}
	return CKR_OK;
}

/* Bring the object stored as <uuid>.obj into t's table as the file now is:
 * published when new, its attributes replaced when known (its handle stays),
 * unpublished when the file is gone. Sealed files are read only while the
 * user is logged in (they need the master key). */
static CK_RV refresh_one(struct tok_token *t, const char *uuid)
{
	char path[4096 + 512], why[160] = "";
	uint8_t *buf = NULL, *plain = NULL;
	size_t len = 0, hdr = sizeof(obj_magic) + 4 + 32, plen;
	struct tok_attrs attrs = { 0 };
	struct tok_object *o = NULL, *cur = tok_obj_by_uuid(t, uuid);
	CK_ULONG cls = CKO_DATA;
	uint32_t flags;
	CK_RV rv = CKR_GENERAL_ERROR;
	int r;

	snprintf(path, sizeof(path), "%s/objects/%.32s.obj", t->dir, uuid);
	rv = objdir_checked(t);
	if (rv != CKR_OK)
		goto out;
	rv = CKR_GENERAL_ERROR;
	r = read_file(path, &t->objshare, &buf, &len, why, sizeof(why));
	if (r == -ENOENT) {
		if (cur)
			tok_obj_unpublish(t, cur); /* destroyed by another process */
		rv = CKR_OK;
		goto out;
	}
	if (r < 0) {
		tok_msg("cannot read %s: %s", path, read_err(r, why));
		rv = r == -ENOMEM ? CKR_HOST_MEMORY : CKR_GENERAL_ERROR;
		goto out;
	}
	if (len < hdr || memcmp(buf, obj_magic, sizeof(obj_magic)) != 0 ||
	    memcmp(buf + 12, uuid, 32) != 0)
		goto corrupt;
	flags = (uint32_t)get_le(buf + 8, 4);
	if (flags & ~OBJ_ENCRYPTED)
		goto corrupt;
	if (flags & OBJ_ENCRYPTED) {
		if (tok_login_state(t) != TOK_USER) {
			rv = CKR_OK; /* read at the user's login */
			if (cur)
				tok_obj_unpublish(t, cur);
			goto out;
		}
		if (len < hdr + 12 + 16)
			goto corrupt;
		plen = len - hdr - 12 - 16;
		plain = malloc(plen ? plen : 1);
		if (!plain) {
			rv = CKR_HOST_MEMORY;
			goto out;
		}
		if (!tok_store_gcm(false, t->mk, buf + hdr, buf, hdr, buf + hdr + 12, plen, plain,
			 buf + len - 16))
			goto corrupt;
		rv = parse_attrs(plain, plen, &attrs);
		OPENSSL_cleanse(plain, plen);
	} else {
		rv = parse_attrs(buf + hdr, len - hdr, &attrs);
		/* Key material and private objects are only ever written sealed:
		 * a plaintext file of those kinds was planted. */
		if (rv == CKR_OK && ((tok_attrs_ulong(&attrs, CKA_CLASS, &cls) &&
				      (cls == CKO_SECRET_KEY || cls == CKO_PRIVATE_KEY)) ||
				     tok_attrs_bool(&attrs, CKA_PRIVATE, false))) {
			tok_msg("object file %s holds a secret or private key or a private object "
				"without encryption (not written by this token): refused", path);
			rv = CKR_GENERAL_ERROR;
			goto out;
		}
	}
	if (rv != CKR_OK)
		goto corrupt;
	if (!tok_attrs_bool(&attrs, CKA_TOKEN, false))
		goto corrupt;
	if (cur && tok_obj_same_kind(cur, &attrs)) {
		tok_obj_replace_attrs(cur, &attrs);
		rv = CKR_OK;
		goto out;
	}
	if (cur)
		tok_obj_unpublish(t, cur);
	rv = tok_obj_publish(t, &attrs, CK_INVALID_HANDLE, &o);
	if (rv != CKR_OK)
		goto out;
	memcpy(o->uuid, uuid, 32);
	o->uuid[32] = '\0';
	tok_obj_put(o);
	goto out;
corrupt:
	tok_msg("corrupt object file %s", path);
	rv = CKR_GENERAL_ERROR;
out:
	tok_obj_put(cur);
	tok_attrs_free(&attrs);
	free(plain);
	free(buf);
	return rv;
}

static bool uuid_name(const char *name)
{
	size_t n = strlen(name);

	if (n != 36 || strcmp(name + 32, ".obj") != 0)
		return false;
	for (size_t i = 0; i < 32; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	return true;
}

/* Every file of the store into t's table; with prune, token objects whose
 * file is gone leave it. */
static CK_RV scan_objects(struct tok_token *t, bool prune)
{
	char objdir[4096];
	struct dirent *de;
	char (*names)[33] = NULL;
	size_t n = 0, cap = 0;
	CK_RV rv = CKR_OK;
	DIR *d;

	snprintf(objdir, sizeof(objdir), "%s/objects", t->dir);
	d = opendir(objdir);
	if (!d) {
		if (errno != ENOENT)
			return CKR_DEVICE_ERROR;
	} else {
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue; /* ., .. and temporaries of an interrupted write */
			if (!uuid_name(de->d_name)) {
				tok_msg("unexpected file %s/%s in the token store", objdir, de->d_name);
				rv = CKR_GENERAL_ERROR;
				break;
			}
			if (prune && n == cap) {
				void *p = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*names));
				if (!p) {
					rv = CKR_HOST_MEMORY;
					break;
				}
				names = p;
			}
			if (prune)
				memcpy(names[n++], de->d_name, 33);
			rv = refresh_one(t, de->d_name);
			if (rv != CKR_OK)
				break;
		}
		closedir(d);
	}
	if (rv == CKR_OK && prune)
		tok_obj_prune(t, names, n);
	free(names);
	return rv;
}

CK_RV tok_store_load_objects(struct tok_token *t)
{
	assert(t->store_locked);
	return scan_objects(t, false);
}

/* ---- the lock and its journal -------------------------------------------------
 * store.lock, little-endian (docs/token.md):
 *   0  8 magic "STOKLCK1"   8 8 generation   16 8 base   24 8 epoch
 *   32 + 32 * (g - base - 1): the uuid (or 32 '-' for token.json) that
 *   generation g changed, for base < g <= generation.
 */
static const char lock_magic[8] = { 'S', 'T', 'O', 'K', 'L', 'C', 'K', '1' };
#define LOCK_HDR 32
#define TOK_JOURNAL 256
#define LOCK_SIZE (LOCK_HDR + 32 * TOK_JOURNAL)
#define NEVER_SYNCED UINT64_MAX

struct lock_hdr {
	uint64_t gen, base, epoch;
};

static int full_pread(int fd, void *buf, size_t n, off_t off)
{
	ssize_t r;

	do
		r = pread(fd, buf, n, off);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : (size_t)r == n ? 0 : -EIO;
}

static int full_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	ssize_t r;

	do
		r = pwrite(fd, buf, n, off);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : (size_t)r == n ? 0 : -EIO;
}

static CK_RV read_hdr(struct tok_token *t, struct lock_hdr *h)
{
	uint8_t b[LOCK_HDR];

	if (full_pread(t->lock_fd, b, sizeof(b), 0) < 0 || memcmp(b, lock_magic, 8) != 0) {
		tok_msg("%s/store.lock is damaged: remove it while no process uses the token", t->dir);
		return CKR_DEVICE_ERROR;
	}
	h->gen = get_le(b + 8, 8);
	h->base = get_le(b + 16, 8);
	h->epoch = get_le(b + 24, 8);
	return CKR_OK;
}

static CK_RV write_hdr(struct tok_token *t, const struct lock_hdr *h)
{
	uint8_t b[LOCK_HDR];

	memcpy(b, lock_magic, 8);
	put_u64(b + 8, h->gen);
	put_u64(b + 16, h->base);
	put_u64(b + 24, h->epoch);
	if (full_pwrite(t->lock_fd, b, sizeof(b), 0) < 0) {
		tok_msg("cannot write %s/store.lock: %s", t->dir, strerror(errno));
		return CKR_DEVICE_ERROR;
	}
	return CKR_OK;
}

/* Say, before writing it, what this change touches (the lock is held and t
 * is in sync, so the header is the one we last saw). A process that crashes
 * between the two makes others reload a file that did not change: harmless. */
static CK_RV announce(struct tok_token *t, const char *uuid, bool new_epoch)
{
	struct lock_hdr h;
	uint8_t e[32];
	CK_RV rv = read_hdr(t, &h);

	if (rv != CKR_OK)
		return rv;
	h.gen++;
	if (new_epoch) {
		h.epoch++;
		h.base = h.gen; /* no entries: everyone rescans */
	} else {
		if (h.gen - h.base > TOK_JOURNAL)
			h.base = h.gen - 1;
		memset(e, '-', sizeof(e));
		if (uuid)
			memcpy(e, uuid, 32);
		if (full_pwrite(t->lock_fd, e, sizeof(e), LOCK_HDR + 32 * (off_t)(h.gen - h.base - 1)) < 0) {
			tok_msg("cannot write %s/store.lock: %s", t->dir, strerror(errno));
			return CKR_DEVICE_ERROR;
		}
	}
	rv = write_hdr(t, &h);
	if (rv == CKR_OK) {
		atomic_store(&t->seen_gen, h.gen);
		t->seen_epoch = h.epoch;
	}
	return rv;
}

CK_RV tok_store_open(struct tok_token *t, char *err, size_t errlen)
{
	char path[4096 + 512], objdir[4096 + 16];
	struct stat st;
	CK_RV rv;
	const char *no;
	char why[160];
	int r = tok_store_mkdir(t->dir);

	atomic_store(&t->seen_gen, NEVER_SYNCED);
	t->seen_epoch = NEVER_SYNCED;
	t->lock_fd = -1;
	t->lock_map = NULL;
	if (r < 0) {
		snprintf(err, errlen, "cannot create %s: %s", t->dir, strerror(-r));
		return CKR_GENERAL_ERROR;
	}
	t->obj_checked = false;
	rv = tok_store_check_dir(t->dir, "token directory", true, &tok_g.token_share, &t->share, err, errlen);
	snprintf(objdir, sizeof(objdir), "%s/objects", t->dir);
	if (rv == CKR_OK && access(objdir, F_OK) == 0) {
		rv = tok_store_check_dir(objdir, "object directory", true, &t->share, &t->objshare, err, errlen);
		t->obj_checked = rv == CKR_OK;
	}
	if (rv != CKR_OK)
		return rv;
	snprintf(path, sizeof(path), "%s/store.lock", t->dir);
	t->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, tok_store_file_mode(&t->share));
	if (t->lock_fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path,
			 errno == ELOOP ? "a symlink: refused" : strerror(errno));
		return CKR_GENERAL_ERROR;
	}
	if (fstat(t->lock_fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
		snprintf(err, errlen, "%s is not a regular file with one link: refused", path);
		goto fail;
	}
	/* Ours in a shared directory (just made, or left 0600 by a version
	 * before sharing): every member of the group must lock and write it. */
	if (t->share.shared && st.st_uid == geteuid() && (st.st_mode & 07777) != 0660) {
		if (fchmod(t->lock_fd, 0660) < 0 || fstat(t->lock_fd, &st) < 0) {
			snprintf(err, errlen, "cannot make %s mode 0660: %s", path, strerror(errno));
			goto fail;
		}
	}
	no = tok_store_file_refusal(&st, &t->share, why, sizeof(why));
	if (no) {
		snprintf(err, errlen, "%s is %s: refused", path, no);
		goto fail;
	}
	if (st.st_size < LOCK_SIZE) {
		/* A new lock file: made whole under the lock (so later writes
		 * never extend it), by whichever process comes first. */
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		static const uint8_t zero[LOCK_SIZE];
		if (fcntl(t->lock_fd, F_OFD_SETLKW, &fl) < 0) {
			snprintf(err, errlen, "cannot lock %s: %s", path, strerror(errno));
			goto fail;
		}
		if (fstat(t->lock_fd, &st) == 0 && st.st_size < LOCK_SIZE) {
			struct lock_hdr h = { 0 };
			if (full_pwrite(t->lock_fd, zero, sizeof(zero), 0) < 0 || write_hdr(t, &h) != CKR_OK ||
			    fsync(t->lock_fd) < 0) {
				snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
				fl.l_type = F_UNLCK;
				(void)fcntl(t->lock_fd, F_OFD_SETLK, &fl);
				goto fail;
			}
		}
		fl.l_type = F_UNLCK;
		(void)fcntl(t->lock_fd, F_OFD_SETLK, &fl);
	}
	/* The header, mapped read-only for tok_store_sync's check (a load, not
	 * a system call). The file is never shortened by the token. */
	t->lock_map = mmap(NULL, LOCK_HDR, PROT_READ, MAP_SHARED, t->lock_fd, 0);
	if (t->lock_map == MAP_FAILED) {
		t->lock_map = NULL;
		snprintf(err, errlen, "cannot map %s: %s", path, strerror(errno));
		goto fail;
	}
	return CKR_OK;
fail:
	close(t->lock_fd);
	t->lock_fd = -1;
	return CKR_GENERAL_ERROR;
}

void tok_store_close(struct tok_token *t)
{
	if (t->lock_map)
		munmap((void *)t->lock_map, LOCK_HDR);
	t->lock_map = NULL;
	if (t->lock_fd >= 0)
		close(t->lock_fd);
	t->lock_fd = -1;
}

/* Under the lock: make t what the store now is. */
static CK_RV sync_locked(struct tok_token *t)
{
	struct lock_hdr h;
	uint64_t seen = atomic_load(&t->seen_gen);
	CK_RV rv = read_hdr(t, &h);
	bool full;

	if (rv != CKR_OK || (h.gen == seen && h.epoch == t->seen_epoch))
		return rv;
	if (h.epoch != t->seen_epoch) {
		/* Re-initialised (or our first look): nothing we hold is the
		 * token's any more. */
		if (t->seen_epoch != NEVER_SYNCED)
			tok_logout_locked(t);
		tok_obj_drop_token_objects(t);
		full = true;
	} else {
		full = seen == NEVER_SYNCED || seen < h.base || seen > h.gen;
	}
	if (full) {
		rv = load_token(t);
		if (rv == CKR_OK && t->initialized)
			rv = scan_objects(t, true);
	} else {
		bool token = false;
		for (uint64_t g = seen + 1; rv == CKR_OK && g <= h.gen; g++) {
			uint8_t e[33];
			if (full_pread(t->lock_fd, e, 32, LOCK_HDR + 32 * (off_t)(g - h.base - 1)) < 0) {
				rv = CKR_DEVICE_ERROR;
				break;
			}
			e[32] = '\0';
			if (e[0] == '-')
				token = true;
			else {
				char name[37];
				memcpy(name, e, 32);
				memcpy(name + 32, ".obj", 5);
				if (!uuid_name(name)) {
					tok_msg("%s/store.lock is damaged: remove it while no process uses the token",
						t->dir);
					rv = CKR_DEVICE_ERROR;
				} else {
					rv = refresh_one(t, name);
				}
			}
		}
		if (rv == CKR_OK && token)
			rv = load_token(t);
	}
	if (rv == CKR_OK) {
		atomic_store(&t->seen_gen, h.gen);
		t->seen_epoch = h.epoch;
	}
	return rv;
}

CK_RV tok_store_lock(struct tok_token *t)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	CK_RV rv;

	while (fcntl(t->lock_fd, F_OFD_SETLKW, &fl) < 0) {
		if (errno != EINTR) {
			tok_msg("cannot lock %s/store.lock: %s", t->dir, strerror(errno));
			return CKR_DEVICE_ERROR;
		}
	}
	t->store_locked = true;
	/* A lock file removed while we hold it would let a new process lock
	 * another one: no exclusion left. Refuse rather than write. */
	{
		struct stat st;
		if (fstat(t->lock_fd, &st) < 0 || st.st_nlink == 0) {
			tok_msg("%s/store.lock was removed while the token ran: restart every process "
				"that uses it", t->dir);
			tok_store_unlock(t);
			return CKR_DEVICE_ERROR;
		}
	}
	rv = sync_locked(t);
	if (rv != CKR_OK)
		tok_store_unlock(t);
	return rv;
}

void tok_store_unlock(struct tok_token *t)
{
	struct flock fl = { .l_type = F_UNLCK, .l_whence = SEEK_SET };

	t->store_locked = false;
	(void)fcntl(t->lock_fd, F_OFD_SETLK, &fl);
}

CK_RV tok_store_sync(struct tok_token *t)
{
	CK_RV rv;

	/* The fast path: one load of the generation from the mapped header. A
	 * value torn by a concurrent write differs from what we saw, or is the
	 * value before it: either way no change is missed that the lock would
	 * have shown us at that instant. */
	if (t->lock_map &&
	    le64toh(__atomic_load_n((const uint64_t *)(t->lock_map + 8), __ATOMIC_ACQUIRE)) ==
		    atomic_load(&t->seen_gen))
		return CKR_OK;
	pthread_mutex_lock(&t->mu);
	rv = tok_store_lock(t);
	if (rv == CKR_OK)
		tok_store_unlock(t);
	pthread_mutex_unlock(&t->mu);
	return rv;
}
