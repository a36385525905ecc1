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
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

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

static int write_atomic(const char *dir, const char *name, const uint8_t *buf, size_t len)
{
	char tmp[4096], dst[4096];
	size_t off = 0;
	int fd, r = 0;

	if (snprintf(tmp, sizeof(tmp), "%s/.%s.tmp.%ld", dir, name, (long)getpid()) >= (int)sizeof(tmp) ||
	    snprintf(dst, sizeof(dst), "%s/%s", dir, name) >= (int)sizeof(dst))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
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

static int read_file(const char *path, uint8_t **ret, size_t *ret_len)
{
	struct stat st;
	uint8_t *buf;
	size_t off = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (16 << 20)) {
		close(fd);
		return -EINVAL;
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

static int mkdir_p(const char *dir)
{
	if (mkdir(dir, 0700) == 0 || errno == EEXIST)
		return 0;
	return -errno;
}

static CK_RV errno_rv(int r)
{
	return r == -ENOMEM ? CKR_HOST_MEMORY : r == -ENOSPC ? CKR_DEVICE_MEMORY : CKR_DEVICE_ERROR;
}

/* ---- AES-256-GCM with the master key or a PIN-derived key ------------------ */

static bool gcm(bool enc, const uint8_t key[32], const uint8_t nonce[12], const uint8_t *aad,
		size_t aad_len, const uint8_t *in, size_t len, uint8_t *out, uint8_t tag[16])
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int n, ok = 0;

	if (!c)
		return false;
	if (EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce, enc) != 1 ||
	    EVP_CipherUpdate(c, NULL, &n, aad, (int)aad_len) != 1 ||
	    (len && EVP_CipherUpdate(c, out, &n, in, (int)len) != 1))
		goto out;
	if (!enc && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, tag) != 1)
		goto out;
	if (EVP_CipherFinal_ex(c, out + len, &n) != 1)
		goto out;
	if (enc && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag) != 1)
		goto out;
	ok = 1;
out:
	EVP_CIPHER_CTX_free(c);
	return ok;
}

/* ---- PINs ------------------------------------------------------------------ */

static const char aad_mk[] = "softtoken master key v1";

static bool pin_keys(const struct tok_pin *rec, const uint8_t *pin, size_t len, uint8_t kek[32],
		     uint8_t check[32])
{
	uint8_t p[32];
	unsigned n = 32;
	bool ok = PKCS5_PBKDF2_HMAC((const char *)pin, (int)len, rec->salt, sizeof(rec->salt),
				    (int)rec->iterations, EVP_sha256(), sizeof(p), p) == 1 &&
		  HMAC(EVP_sha256(), p, sizeof(p), (const uint8_t *)"kek", 3, kek, &n) &&
		  HMAC(EVP_sha256(), p, sizeof(p), (const uint8_t *)"check", 5, check, &n);

	OPENSSL_cleanse(p, sizeof(p));
	return ok;
}

CK_RV tok_pin_make(struct tok_pin *rec, const uint8_t *pin, size_t len, const uint8_t mk[32],
		   uint64_t iterations)
{
	struct tok_pin r = { .set = true, .iterations = iterations };
	uint8_t kek[32];
	CK_RV rv = CKR_DEVICE_ERROR;

	if (RAND_bytes(r.salt, sizeof(r.salt)) != 1 || RAND_bytes(r.nonce, sizeof(r.nonce)) != 1)
		return CKR_DEVICE_ERROR;
	if (!pin_keys(&r, pin, len, kek, r.check))
		goto out;
	if (!gcm(true, kek, r.nonce, (const uint8_t *)aad_mk, sizeof(aad_mk) - 1, mk, 32,
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
	if (!pin_keys(rec, pin, len, kek, check))
		return CKR_DEVICE_ERROR;
	if (CRYPTO_memcmp(check, rec->check, sizeof(check)) != 0)
		goto out;
	memcpy(tag, rec->wrapped_mk + 32, 16);
	/* The check matched: a tag failure now means the record is corrupt. */
	if (!gcm(false, kek, rec->nonce, (const uint8_t *)aad_mk, sizeof(aad_mk) - 1,
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

CK_RV tok_store_save_token(const struct tok_token *t)
{
	json_t *j = json_pack("{si,s:s%,s:s%}", "format", 1, "label", t->label, sizeof(t->label),
			      "serial", t->serial, sizeof(t->serial));
	char *s = NULL;
	int r;

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
	r = write_atomic(t->dir, "token.json", (const uint8_t *)s, strlen(s));
	free(s);
	if (r < 0) {
		tok_msg("cannot write %s/token.json: %s", t->dir, strerror(-r));
		return errno_rv(r);
	}
	return CKR_OK;
}

CK_RV tok_store_load_token(struct tok_token *t)
{
	char path[4096 + 512];
	json_error_t e;
	json_t *j;
	const char *label, *serial;
	int r;

	r = mkdir_p(t->dir);
	if (r < 0) {
		tok_msg("cannot create %s: %s", t->dir, strerror(-r));
		return CKR_GENERAL_ERROR;
	}
	snprintf(path, sizeof(path), "%s/token.json", t->dir);
	j = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
	if (!j) {
		if (access(path, F_OK) < 0 && errno == ENOENT)
			return CKR_OK; /* not initialised */
		tok_msg("corrupt token file %s: line %d: %s", path, e.line, e.text);
		return CKR_GENERAL_ERROR;
	}
	label = json_string_value(json_object_get(j, "label"));
	serial = json_string_value(json_object_get(j, "serial"));
	if (json_integer_value(json_object_get(j, "format")) != 1 || !label ||
	    strlen(label) != sizeof(t->label) || !serial || strlen(serial) != sizeof(t->serial) ||
	    !json_pin(json_object_get(j, "so"), &t->so) || !t->so.set ||
	    !json_pin(json_object_get(j, "user"), &t->user)) {
		tok_msg("corrupt token file %s: a field is missing or malformed", path);
		json_decref(j);
		return CKR_GENERAL_ERROR;
	}
	memcpy(t->label, label, sizeof(t->label));
	memcpy(t->serial, serial, sizeof(t->serial));
	t->initialized = true;
	json_decref(j);
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

	if (RAND_bytes(mk, sizeof(mk)) != 1)
		return CKR_DEVICE_ERROR;
	rv = tok_pin_make(&so, so_pin, so_len, mk, tok_g.cfg.pbkdf2_iterations);
	OPENSSL_cleanse(mk, sizeof(mk));
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
		if (RAND_bytes(sb, sizeof(sb)) != 1)
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

CK_RV tok_store_save_object(struct tok_token *t, struct tok_object *o)
{
	char objdir[4096], name[64];
	size_t len = 0, hdr = sizeof(obj_magic) + 4 + 32, off;
	uint8_t *plain = NULL, *file = NULL;
	bool enc = tok_obj_sealed(o);
	CK_RV rv = CKR_HOST_MEMORY;
	int r;

	snprintf(objdir, sizeof(objdir), "%s/objects", t->dir);
	r = mkdir_p(objdir);
	if (r < 0) {
		tok_msg("cannot create %s: %s", objdir, strerror(-r));
		return errno_rv(r);
	}
	pthread_mutex_lock(&o->mu);
	for (size_t i = 0; i < o->attrs.n; i++)
		len += 12 + o->attrs.a[i].len;
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
		if (RAND_bytes(nonce, 12) != 1 ||
		    !gcm(true, t->mk, nonce, file, hdr, plain, len, file + hdr + 12, file + hdr + 12 + len)) {
			rv = CKR_DEVICE_ERROR;
			goto out;
		}
		off = hdr + 12 + len + 16;
	} else {
		memcpy(file + hdr, plain, len);
		off = hdr + len;
	}
	snprintf(name, sizeof(name), "%s.obj", o->uuid);
	r = write_atomic(objdir, name, file, off);
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

static CK_RV load_one(struct tok_token *t, const char *objdir, const char *name, bool private_ones)
{
	char path[4096 + 512];
	uint8_t *buf = NULL, *plain = NULL;
	size_t len = 0, hdr = sizeof(obj_magic) + 4 + 32, plen;
	struct tok_attrs attrs = { 0 };
	struct tok_object *o = NULL;
	uint32_t flags;
	CK_RV rv = CKR_GENERAL_ERROR;
	int r;

	snprintf(path, sizeof(path), "%s/%s", objdir, name);
	r = read_file(path, &buf, &len);
	if (r < 0) {
		tok_msg("cannot read %s: %s", path, strerror(-r));
		return errno_rv(r);
	}
	if (len < hdr || memcmp(buf, obj_magic, sizeof(obj_magic)) != 0 ||
	    memcmp(buf + 12, name, 32) != 0)
		goto corrupt;
	flags = (uint32_t)get_le(buf + 8, 4);
	if (flags & ~OBJ_ENCRYPTED)
		goto corrupt;
	if (!(flags & OBJ_ENCRYPTED) == private_ones) {
		rv = CKR_OK; /* loaded in the other pass */
		goto out;
	}
	if (flags & OBJ_ENCRYPTED) {
		if (len < hdr + 12 + 16)
			goto corrupt;
		plen = len - hdr - 12 - 16;
		plain = malloc(plen ? plen : 1);
		if (!plain) {
			rv = CKR_HOST_MEMORY;
			goto out;
		}
		if (!gcm(false, t->mk, buf + hdr, buf, hdr, buf + hdr + 12, plen, plain,
			 buf + len - 16))
			goto corrupt;
		rv = parse_attrs(plain, plen, &attrs);
		OPENSSL_cleanse(plain, plen);
	} else {
		rv = parse_attrs(buf + hdr, len - hdr, &attrs);
	}
	if (rv != CKR_OK)
		goto corrupt;
	rv = tok_obj_publish(t, &attrs, CK_INVALID_HANDLE, &o);
	if (rv != CKR_OK)
		goto out;
	memcpy(o->uuid, name, 32);
	o->uuid[32] = '\0';
	tok_obj_put(o);
	goto out;
corrupt:
	tok_msg("corrupt object file %s", path);
	rv = CKR_GENERAL_ERROR;
out:
	tok_attrs_free(&attrs);
	free(plain);
	free(buf);
	return rv;
}

CK_RV tok_store_load_objects(struct tok_token *t, bool private_ones)
{
	char objdir[4096];
	struct dirent *de;
	CK_RV rv = CKR_OK;
	DIR *d;

	snprintf(objdir, sizeof(objdir), "%s/objects", t->dir);
	d = opendir(objdir);
	if (!d)
		return errno == ENOENT ? CKR_OK : CKR_DEVICE_ERROR;
	while ((de = readdir(d))) {
		size_t n = strlen(de->d_name);
		if (de->d_name[0] == '.')
			continue; /* ., .. and temporaries of an interrupted write */
		if (n != 36 || strcmp(de->d_name + 32, ".obj") != 0) {
			tok_msg("unexpected file %s/%s in the token store", objdir, de->d_name);
			rv = CKR_GENERAL_ERROR;
			break;
		}
		rv = load_one(t, objdir, de->d_name, private_ones);
		if (rv != CKR_OK)
			break;
	}
	closedir(d);
	return rv;
}
