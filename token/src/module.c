/* SPDX-License-Identifier: MIT */
/*
 * The module: C_Initialize/C_Finalize, the function list and interface,
 * slots and tokens, sessions, login and PINs. Objects are in object.c, the
 * cryptographic calls in crypto.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "core.h"
#include "verify.h"

#define TOK_API __attribute__((visibility("default")))

static bool atfork_registered; /* guarded by tok_g.mu */

struct tok_module tok_g = {
	.mu = PTHREAD_MUTEX_INITIALIZER,
	.slock = PTHREAD_RWLOCK_INITIALIZER,
	.audit_mu = PTHREAD_MUTEX_INITIALIZER,
	.audit_fd = -1,
};

void tok_msg(const char *fmt, ...)
{
	va_list ap;

	/* A PKCS#11 module has no other channel for "which line of which
	 * file": a CKR_* says only that something failed. */
	va_start(ap, fmt);
	fputs("softtoken: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static bool initialized(void)
{
	return __atomic_load_n(&tok_g.initialized, __ATOMIC_ACQUIRE);
}

#define NEED_INIT()                                    \
	do {                                           \
		if (!initialized())                    \
			return CKR_CRYPTOKI_NOT_INITIALIZED; \
	} while (0)

enum tok_login tok_login_state(struct tok_token *t)
{
	return (enum tok_login)atomic_load(&t->login);
}

static struct tok_token *token_of(CK_SLOT_ID id)
{
	return id < tok_g.ntokens ? &tok_g.tokens[id] : NULL;
}

/* ---- sessions ------------------------------------------------------------- */

CK_RV tok_session_get(CK_SESSION_HANDLE h, struct tok_session **ret)
{
	size_t i = (size_t)(h & 0xffff);
	struct tok_session *s = NULL;

	if (!initialized())
		return CKR_CRYPTOKI_NOT_INITIALIZED;
	pthread_rwlock_rdlock(&tok_g.slock);
	if (i >= 1 && i <= tok_g.nsessions && tok_g.sessions[i - 1] &&
	    tok_g.sessions[i - 1]->handle == h) {
		s = tok_g.sessions[i - 1];
		atomic_fetch_add(&s->refs, 1);
	}
	pthread_rwlock_unlock(&tok_g.slock);
	if (!s)
		return CKR_SESSION_HANDLE_INVALID;
	*ret = s;
	return CKR_OK;
}

void tok_session_put(struct tok_session *s)
{
	if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	for (int k = 0; k < TOK_SLOT__MAX; k++)
		tok_active_end(&s->act[k]);
	tok_op_free(s->digest_spare);
	free(s->found);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

bool tok_session_rw(const struct tok_session *s)
{
	return s->flags & CKF_RW_SESSION;
}

CK_RV tok_session_enter(CK_SESSION_HANDLE h, struct tok_session **ret)
{
	CK_RV rv = tok_session_get(h, ret);

	if (rv == CKR_OK && (rv = tok_audit_gate()) != CKR_OK)
		tok_session_put(*ret);
	return rv;
}

void tok_logout_locked(struct tok_token *t)
{
	if (tok_login_state(t) == TOK_USER)
		tok_obj_drop_private(t);
	atomic_store(&t->login, TOK_PUBLIC);
	OPENSSL_cleanse(t->mk, sizeof(t->mk));
}

/* Take s out of the table; the caller holds t->mu. */
static void session_close_locked(struct tok_session *s)
{
	struct tok_token *t = s->tok;
	size_t i = (size_t)(s->handle & 0xffff);

	pthread_rwlock_wrlock(&tok_g.slock);
	tok_g.sessions[i - 1] = NULL;
	pthread_rwlock_unlock(&tok_g.slock);
	s->closed = true;
	t->sessions--;
	if (tok_session_rw(s))
		t->rw_sessions--;
	tok_obj_drop_session(t, s->handle);
	if (t->sessions == 0)
		tok_logout_locked(t); /* the login ends with the application's last session */
	tok_session_put(s);  /* the table's reference */
}

/* ---- C_Initialize / C_Finalize -------------------------------------------- */

static void free_tokens(void)
{
	for (size_t i = 0; i < tok_g.ntokens; i++) {
		struct tok_token *t = &tok_g.tokens[i];
		tok_obj_drop_all(t);
		tok_store_close(t);
		free(t->objs);
		free(t->dir);
		OPENSSL_cleanse(t->mk, sizeof(t->mk));
		pthread_mutex_destroy(&t->mu);
		pthread_rwlock_destroy(&t->olock);
	}
	free(tok_g.tokens);
	tok_g.tokens = NULL;
	tok_g.ntokens = 0;
	free(tok_g.sessions);
	tok_g.sessions = NULL;
	tok_g.nsessions = tok_g.session_cap = 0;
}

/* A child forked after C_Initialize starts uninitialised (PKCS#11 asks it
 * to call C_Initialize): the parent's audit writer thread does not exist in
 * it, so the inherited log, sessions and objects are abandoned (not freed:
 * their locks may have been held at the fork), and its own C_Initialize
 * opens its own chain (the parent holds the lock of the one it writes). */
static void tok_atfork_child(void)
{
	tok_crypto_atfork_child(); /* the keys made ahead are the parent's */
	if (!tok_g.initialized)
		return;
	tok_g = (struct tok_module){
		.mu = PTHREAD_MUTEX_INITIALIZER,
		.slock = PTHREAD_RWLOCK_INITIALIZER,
		.audit_mu = PTHREAD_MUTEX_INITIALIZER,
		.audit_fd = -1,
	};
}

static CK_RV check_init_args(CK_VOID_PTR p)
{
	CK_C_INITIALIZE_ARGS *a = p;
	int fns;

	if (!a)
		return CKR_OK;
	if (a->pReserved)
		return CKR_ARGUMENTS_BAD;
	fns = !!a->CreateMutex + !!a->DestroyMutex + !!a->LockMutex + !!a->UnlockMutex;
	if (fns != 0 && fns != 4)
		return CKR_ARGUMENTS_BAD;
	/* We lock with the OS's primitives; an application's own mutexes are
	 * accepted only alongside CKF_OS_LOCKING_OK. */
	if (fns == 4 && !(a->flags & CKF_OS_LOCKING_OK))
		return CKR_CANT_LOCK;
	/* CKF_LIBRARY_CANT_CREATE_OS_THREADS is accepted, and the audit writer
	 * thread still starts: GnuTLS passes the flag to every module it loads
	 * (p11tool, certtool, gnutls-cli), and without the thread there is no
	 * trail (docs/token.md "Clients"). */
	return CKR_OK;
}

static CK_RV verify_audit_dir(char *err, size_t errlen)
{
	/* audit_verify = full: the whole directory through the verifier's
	 * engine, before the first record of this process is written. */
	struct al_vopts o = { 0 };
	struct al_vresult res = { 0 };
	char **paths = NULL;
	unsigned n = 0, cap = 0;
	CK_RV rv = CKR_OK;
	int r = al_verify_add_path(tok_g.cfg.audit_dir, &paths, &n, &cap);

	if (r == -ENOENT)
		return CKR_OK; /* no trail yet: tok_audit_open creates audit_dir */
	if (r < 0) {
		snprintf(err, errlen, "cannot list %s: %s", tok_g.cfg.audit_dir, strerror(-r));
		return CKR_GENERAL_ERROR;
	}
	if (n) {
		/* every file of audit_dir: one rotated by another process while it
		 * was listed is taken in (the engine's take_in_renamed) */
		char *dirs[1] = {tok_g.cfg.audit_dir};
		o.dirs = dirs;
		o.n_dirs = 1;
		r = al_verify_files(paths, n, &o, &res);
		if (r < 0) {
			snprintf(err, errlen, "cannot verify %s: %s: %s", tok_g.cfg.audit_dir,
				 res.err_path ? res.err_path : "an input", strerror(-r));
			rv = CKR_GENERAL_ERROR;
		} else {
			for (int c = 0; c < AL_V__MAX; c++) {
				if (res.findings[c] && al_vclass_is_integrity(c, false)) {
					tok_msg("the audit trail in %s does not verify (%s): run auditlog-verify %s",
						tok_g.cfg.audit_dir, al_vclass_name(c), tok_g.cfg.audit_dir);
					if (tok_g.cfg.audit_fail_closed)
						atomic_store(&tok_g.audit_failed, true);
					break;
				}
			}
		}
		al_vresult_free(&res);
	}
	for (unsigned i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return rv;
}

CK_RV C_Initialize(CK_VOID_PTR pInitArgs)
{
	char err[512] = "";
	CK_RV rv = check_init_args(pInitArgs);

	if (rv != CKR_OK)
		return rv;
	pthread_mutex_lock(&tok_g.mu);
	if (tok_g.initialized) {
		pthread_mutex_unlock(&tok_g.mu);
		return CKR_CRYPTOKI_ALREADY_INITIALIZED;
	}
	atomic_store(&tok_g.audit_failed, false);
	atomic_store(&tok_g.audit_errors, 0);
	rv = tok_config_load(&tok_g.cfg, err, sizeof(err));
	if (rv != CKR_OK)
		goto fail_msg;
	rv = tok_crypto_init();
	if (rv != CKR_OK) {
		snprintf(err, sizeof(err), "OpenSSL could not provide an algorithm the token needs");
		goto fail_cfg;
	}
	tok_crypto_set_rsa_min_bits((unsigned)tok_g.cfg.rsa_min_bits);
	tok_crypto_set_keygen_ahead(tok_g.cfg.keygen_ahead);
	{
		int r = tok_store_mkdir(tok_g.cfg.token_dir);
		if (r < 0) {
			snprintf(err, sizeof(err), "cannot create token_dir %s: %s", tok_g.cfg.token_dir,
				 strerror(-r));
			rv = CKR_GENERAL_ERROR;
			goto fail_crypto;
		}
	}
	/* DESIGN.md "Deployment and key custody". */
	rv = tok_store_check_dir(tok_g.cfg.token_dir, "token_dir", false, NULL, &tok_g.token_share, err,
				 sizeof(err));
	if (rv != CKR_OK)
		goto fail_crypto;
	tok_g.tokens = calloc(tok_g.cfg.slots, sizeof(*tok_g.tokens));
	if (!tok_g.tokens) {
		rv = CKR_HOST_MEMORY;
		goto fail_crypto;
	}
	for (size_t i = 0; i < tok_g.cfg.slots; i++) {
		struct tok_token *t = &tok_g.tokens[i];
		t->id = i;
		t->lock_fd = -1;
		pthread_mutex_init(&t->mu, NULL);
		pthread_rwlock_init(&t->olock, NULL);
		tok_g.ntokens = i + 1;
		if (asprintf(&t->dir, "%s/slot%zu", tok_g.cfg.token_dir, i) < 0) {
			t->dir = NULL;
			rv = CKR_HOST_MEMORY;
			goto fail_tokens;
		}
		rv = tok_store_open(t, err, sizeof(err));
		if (rv != CKR_OK)
			goto fail_tokens;
		/* The first sync loads token.json and the public objects. */
		pthread_mutex_lock(&t->mu);
		rv = tok_store_lock(t);
		if (rv == CKR_OK)
			tok_store_unlock(t);
		pthread_mutex_unlock(&t->mu);
		if (rv != CKR_OK)
			goto fail_tokens; /* tok_msg said which file */
	}
	if (tok_g.cfg.audit_enabled && tok_g.cfg.audit_verify == TOK_VERIFY_FULL) {
		rv = verify_audit_dir(err, sizeof(err));
		if (rv != CKR_OK)
			goto fail_tokens;
	}
	rv = tok_audit_open(err, sizeof(err));
	if (rv != CKR_OK)
		goto fail_tokens;
	if (err[0])
		tok_msg("%s", err); /* failed closed at open: said, and the module runs */
	if (!atfork_registered) {
		if (pthread_atfork(NULL, NULL, tok_atfork_child) == 0)
			atfork_registered = true;
	}
	__atomic_store_n(&tok_g.initialized, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&tok_g.mu);
	{
		/* The first record of a writable trail names what an earlier
		 * fail-closed trail of this process could not record, and a
		 * weakened RSA floor is named where every auditor sees it. */
		uint64_t n = atomic_load(&tok_g.unrecorded);
		char detail[160] = "";
		size_t k = 0;
		if (tok_g.cfg.rsa_min_bits < 2048)
			k += (size_t)snprintf(detail, sizeof(detail), "rsa_min_bits=%llu",
					      (unsigned long long)tok_g.cfg.rsa_min_bits);
		bool counted = n && tok_audit_gate() == CKR_OK;
		if (counted)
			snprintf(detail + k, sizeof(detail) - k, "%sunrecorded_after_fail_closed=%llu",
				 k ? "; " : "", (unsigned long long)n);
		if (tok_audit_write(&(struct tok_audit){ .action = "C_Initialize", .rv = CKR_OK,
							 .kind = TOK_AUD_SENSITIVE, .actor = "public",
							 .detail = detail[0] ? detail : NULL }) == CKR_OK &&
		    counted && tok_g.log)
			atomic_fetch_sub(&tok_g.unrecorded, n);
	}
	return CKR_OK;

fail_tokens:
	free_tokens();
fail_crypto:
	tok_crypto_fini();
fail_cfg:
	tok_config_free(&tok_g.cfg);
fail_msg:
	if (err[0])
		tok_msg("%s", err);
	pthread_mutex_unlock(&tok_g.mu);
	return rv;
}

static void close_all_sessions(struct tok_token *only)
{
	for (size_t i = 0; i < tok_g.ntokens; i++) {
		struct tok_token *t = &tok_g.tokens[i];
		if (only && only != t)
			continue;
		pthread_mutex_lock(&t->mu);
		for (size_t k = 0;; k++) {
			struct tok_session *s = NULL;
			bool more;
			pthread_rwlock_rdlock(&tok_g.slock);
			more = k < tok_g.nsessions;
			if (more)
				s = tok_g.sessions[k];
			pthread_rwlock_unlock(&tok_g.slock);
			if (!more)
				break;
			if (s && s->tok == t)
				session_close_locked(s);
		}
		pthread_mutex_unlock(&t->mu);
	}
}

static CK_RV finalize(bool from_destructor)
{
	CK_RV rv;
	bool unrecorded;

	pthread_mutex_lock(&tok_g.mu);
	if (!tok_g.initialized) {
		pthread_mutex_unlock(&tok_g.mu);
		return CKR_CRYPTOKI_NOT_INITIALIZED;
	}
	close_all_sessions(NULL);
	/* After fail-closed: succeeds, without a record, counted. */
	unrecorded = tok_audit_unrecorded();
	if (!unrecorded)
		(void)tok_audit_write(&(struct tok_audit){
			.action = "C_Finalize", .rv = CKR_OK, .kind = TOK_AUD_SENSITIVE, .actor = "public",
			.detail = from_destructor ? "process exit without C_Finalize" : NULL });
	__atomic_store_n(&tok_g.initialized, false, __ATOMIC_RELEASE);
	rv = tok_audit_close();
	if (unrecorded)
		rv = CKR_OK; /* the trail's failure was answered when it happened */
	free_tokens();
	tok_crypto_fini();
	tok_config_free(&tok_g.cfg);
	pthread_mutex_unlock(&tok_g.mu);
	return rv;
}

CK_RV C_Finalize(CK_VOID_PTR pReserved)
{
	if (pReserved)
		return CKR_ARGUMENTS_BAD;
	return finalize(false);
}

/* An application that exits without C_Finalize still gets its queued
 * records written (DESIGN.md). */
__attribute__((destructor)) static void tok_exit(void)
{
	if (initialized())
		(void)finalize(true);
}

/* ---- information ---------------------------------------------------------- */

CK_RV C_GetInfo(CK_INFO_PTR p)
{
	NEED_INIT();
	if (!p)
		return CKR_ARGUMENTS_BAD;
	memset(p, 0, sizeof(*p));
	p->cryptokiVersion.major = 2;
	p->cryptokiVersion.minor = 40;
	tok_pad(p->manufacturerID, sizeof(p->manufacturerID), "auditlog");
	tok_pad(p->libraryDescription, sizeof(p->libraryDescription), "softtoken (audited)");
	p->libraryVersion.major = 0;
	p->libraryVersion.minor = 1;
	return CKR_OK;
}

CK_RV C_GetSlotList(CK_BBOOL tokenPresent, CK_SLOT_ID_PTR pSlotList, CK_ULONG_PTR pulCount)
{
	NEED_INIT();
	if (!pulCount)
		return CKR_ARGUMENTS_BAD;
	/* Every slot always holds a token (perhaps not initialised). */
	if (pSlotList) {
		if (*pulCount < tok_g.ntokens) {
			*pulCount = tok_g.ntokens;
			return CKR_BUFFER_TOO_SMALL;
		}
		for (size_t i = 0; i < tok_g.ntokens; i++)
			pSlotList[i] = i;
	}
	*pulCount = tok_g.ntokens;
	return CKR_OK;
}

CK_RV C_GetSlotInfo(CK_SLOT_ID id, CK_SLOT_INFO_PTR p)
{
	char desc[64];

	NEED_INIT();
	if (!token_of(id))
		return CKR_SLOT_ID_INVALID;
	if (!p)
		return CKR_ARGUMENTS_BAD;
	memset(p, 0, sizeof(*p));
	snprintf(desc, sizeof(desc), "softtoken slot %lu", (unsigned long)id);
	tok_pad(p->slotDescription, sizeof(p->slotDescription), desc);
	tok_pad(p->manufacturerID, sizeof(p->manufacturerID), "auditlog");
	p->flags = CKF_TOKEN_PRESENT;
	p->hardwareVersion.major = 0;
	p->firmwareVersion.major = 0;
	p->firmwareVersion.minor = 1;
	return CKR_OK;
}

CK_RV C_GetTokenInfo(CK_SLOT_ID id, CK_TOKEN_INFO_PTR p)
{
	struct tok_token *t = NULL;
	uint64_t maxf;

	NEED_INIT();
	t = token_of(id);
	if (!t)
		return CKR_SLOT_ID_INVALID;
	if (!p)
		return CKR_ARGUMENTS_BAD;
	maxf = tok_g.cfg.max_pin_failures;
	/* Flags as the store has them now (another process's failures). */
	if (tok_store_sync(t) != CKR_OK)
		return CKR_DEVICE_ERROR;
	memset(p, 0, sizeof(*p));
	pthread_mutex_lock(&t->mu);
	memcpy(p->label, t->initialized ? t->label : "                                ", 32);
	tok_pad(p->manufacturerID, sizeof(p->manufacturerID), "auditlog");
	tok_pad(p->model, sizeof(p->model), "softtoken");
	memcpy(p->serialNumber, t->initialized ? t->serial : "0000000000000000", 16);
	p->flags = CKF_RNG | CKF_LOGIN_REQUIRED;
	if (t->initialized)
		p->flags |= CKF_TOKEN_INITIALIZED;
	if (t->user.set)
		p->flags |= CKF_USER_PIN_INITIALIZED;
	if (t->user.failures >= maxf)
		p->flags |= CKF_USER_PIN_LOCKED;
	else if (t->user.failures + 1 == maxf)
		p->flags |= CKF_USER_PIN_FINAL_TRY;
	else if (t->user.failures)
		p->flags |= CKF_USER_PIN_COUNT_LOW;
	if (t->so.failures >= maxf)
		p->flags |= CKF_SO_PIN_LOCKED;
	else if (t->so.failures + 1 == maxf)
		p->flags |= CKF_SO_PIN_FINAL_TRY;
	else if (t->so.failures)
		p->flags |= CKF_SO_PIN_COUNT_LOW;
	p->ulMaxSessionCount = CK_EFFECTIVELY_INFINITE;
	p->ulSessionCount = t->sessions;
	p->ulMaxRwSessionCount = CK_EFFECTIVELY_INFINITE;
	p->ulRwSessionCount = t->rw_sessions;
	pthread_mutex_unlock(&t->mu);
	p->ulMaxPinLen = TOK_MAX_PIN;
	p->ulMinPinLen = TOK_MIN_PIN;
	p->ulTotalPublicMemory = CK_UNAVAILABLE_INFORMATION;
	p->ulFreePublicMemory = CK_UNAVAILABLE_INFORMATION;
	p->ulTotalPrivateMemory = CK_UNAVAILABLE_INFORMATION;
	p->ulFreePrivateMemory = CK_UNAVAILABLE_INFORMATION;
	p->hardwareVersion.major = 0;
	p->firmwareVersion.minor = 1;
	memcpy(p->utcTime, "0000000000000000", 16); /* no clock flag: not used */
	return CKR_OK;
}

CK_RV C_GetMechanismList(CK_SLOT_ID id, CK_MECHANISM_TYPE_PTR p, CK_ULONG_PTR pulCount)
{
	size_t n;
	const struct tok_mech_info *m;

	NEED_INIT();
	if (!token_of(id))
		return CKR_SLOT_ID_INVALID;
	if (!pulCount)
		return CKR_ARGUMENTS_BAD;
	m = tok_mech_table(&n);
	if (p) {
		if (*pulCount < n) {
			*pulCount = n;
			return CKR_BUFFER_TOO_SMALL;
		}
		for (size_t i = 0; i < n; i++)
			p[i] = m[i].type;
	}
	*pulCount = n;
	return CKR_OK;
}

CK_RV C_GetMechanismInfo(CK_SLOT_ID id, CK_MECHANISM_TYPE type, CK_MECHANISM_INFO_PTR p)
{
	size_t n;
	const struct tok_mech_info *m;

	NEED_INIT();
	if (!token_of(id))
		return CKR_SLOT_ID_INVALID;
	if (!p)
		return CKR_ARGUMENTS_BAD;
	m = tok_mech_table(&n);
	for (size_t i = 0; i < n; i++) {
		if (m[i].type == type) {
			*p = m[i].info;
			return CKR_OK;
		}
	}
	return CKR_MECHANISM_INVALID;
}

/* ---- token and PINs ------------------------------------------------------- */

/* ulMinPinLen..ulMaxPinLen, as C_GetTokenInfo reports them: checked before
 * anything else, so an out-of-range length costs no PBKDF2 and no failure. */
static CK_RV pin_len_ok(CK_UTF8CHAR_PTR pin, CK_ULONG len)
{
	if (!pin)
		return CKR_ARGUMENTS_BAD;
	if (len < TOK_MIN_PIN || len > TOK_MAX_PIN)
		return CKR_PIN_LEN_RANGE;
	return CKR_OK;
}

/* Check a PIN against the SO's or the user's record, counting as DESIGN.md
 * says: under the store's lock and on the record as the store has it now,
 * a locked PIN is refused, else the failure count is raised and made
 * durable BEFORE the PIN is checked (a guesser that dies after learning
 * "wrong", or during PBKDF2, has paid); the lock is not held during PBKDF2.
 * A right PIN resets the count. t->mu held, the store lock not.
 * CKR_OK: the store lock is held (the caller unlocks) and ret_mk (when not
 * NULL) holds the master key. Otherwise the lock is not held. */
static CK_RV pin_verify(struct tok_token *t, bool so, const uint8_t *pin, CK_ULONG len,
			uint8_t ret_mk[32])
{
	struct tok_pin *p = so ? &t->so : &t->user, snap;
	uint8_t mk[32];
	CK_RV rv = tok_store_lock(t);

	if (rv != CKR_OK)
		return rv;
	if (!t->initialized)
		rv = CKR_TOKEN_NOT_RECOGNIZED;
	else if (!p->set)
		rv = CKR_USER_PIN_NOT_INITIALIZED;
	else if (p->failures >= tok_g.cfg.max_pin_failures)
		rv = CKR_PIN_LOCKED;
	if (rv != CKR_OK) {
		tok_store_unlock(t);
		return rv;
	}
	p->failures++;
	rv = tok_store_save_token(t);
	if (rv != CKR_OK) {
		p->failures--;
		tok_store_unlock(t);
		return CKR_DEVICE_ERROR; /* not counted: not checked either */
	}
	snap = *p;
	tok_store_unlock(t);

	rv = tok_pin_check(&snap, pin, len, mk);

	if (rv == CKR_OK) {
		rv = tok_store_lock(t);
		/* The record we checked must still be the token's: a PIN changed
		 * meanwhile by another process is not this PIN any more. */
		if (rv == CKR_OK && (!p->set || CRYPTO_memcmp(p->check, snap.check, sizeof(p->check)) ||
				     memcmp(p->salt, snap.salt, sizeof(p->salt)))) {
			tok_store_unlock(t);
			rv = CKR_PIN_INCORRECT;
		} else if (rv == CKR_OK) {
			p->failures = 0;
			rv = tok_store_save_token(t);
			if (rv != CKR_OK) {
				tok_store_unlock(t);
				rv = CKR_DEVICE_ERROR;
			}
		}
	}
	if (rv == CKR_PIN_INCORRECT && snap.failures >= tok_g.cfg.max_pin_failures)
		rv = CKR_PIN_LOCKED;
	if (rv == CKR_OK && ret_mk)
		memcpy(ret_mk, mk, sizeof(mk));
	OPENSSL_cleanse(mk, sizeof(mk));
	OPENSSL_cleanse(&snap, sizeof(snap));
	return rv;
}

CK_RV C_InitToken(CK_SLOT_ID id, CK_UTF8CHAR_PTR pPin, CK_ULONG ulPinLen, CK_UTF8CHAR_PTR pLabel)
{
	struct tok_token *t;
	char label[32];
	size_t label_len = 0;
	CK_RV rv, arv;
	bool locked = false;

	NEED_INIT();
	t = token_of(id);
	if (!t)
		return CKR_SLOT_ID_INVALID;
	rv = tok_audit_gate();
	if (rv != CKR_OK)
		return rv;
	pthread_mutex_lock(&t->mu);
	rv = pin_len_ok(pPin, ulPinLen);
	if (rv == CKR_OK && !pLabel)
		rv = CKR_ARGUMENTS_BAD;
	if (rv != CKR_OK)
		goto out;
	memcpy(label, pLabel, 32);
	if (t->sessions) {
		rv = CKR_SESSION_EXISTS;
		goto out;
	}
	rv = tok_store_lock(t);
	if (rv != CKR_OK)
		goto out;
	if (t->initialized) {
		/* The SO PIN by the counting rule (lockout included). */
		tok_store_unlock(t);
		rv = pin_verify(t, true, pPin, ulPinLen, NULL);
		if (rv != CKR_OK)
			goto out;
	}
	locked = true;
	tok_obj_drop_all(t);
	rv = tok_store_init_token(t, pPin, ulPinLen, label);
	if (rv == CKR_OK)
		for (label_len = sizeof(label); label_len && label[label_len - 1] == ' '; label_len--)
			;
out:
	arv = tok_audit_write(&(struct tok_audit){ .action = "C_InitToken", .rv = rv,
						   .kind = TOK_AUD_SENSITIVE, .tok = t, .actor = "so",
						   .key_label = label, .key_label_len = label_len });
	if (locked)
		tok_store_unlock(t);
	pthread_mutex_unlock(&t->mu);
	return arv != CKR_OK ? arv : rv;
}

CK_RV C_InitPIN(CK_SESSION_HANDLE h, CK_UTF8CHAR_PTR pPin, CK_ULONG ulPinLen)
{
	struct tok_session *s;
	struct tok_token *t;
	struct tok_pin old, rec;
	CK_RV rv = tok_session_enter(h, &s), arv;
	bool locked = false;

	if (rv != CKR_OK)
		return rv;
	t = s->tok;
	pthread_mutex_lock(&t->mu);
	if (tok_login_state(t) != TOK_SO)
		rv = CKR_USER_NOT_LOGGED_IN;
	else if (!tok_session_rw(s))
		rv = CKR_SESSION_READ_ONLY;
	else
		rv = pin_len_ok(pPin, ulPinLen);
	/* PBKDF2 outside the store's lock; the master key is the SO's. */
	if (rv == CKR_OK)
		rv = tok_pin_make(&rec, pPin, ulPinLen, t->mk, tok_g.cfg.pbkdf2_iterations);
	if (rv == CKR_OK) {
		rv = tok_store_lock(t);
		locked = rv == CKR_OK;
	}
	/* Re-initialised by another process meanwhile: the sync logged us out. */
	if (rv == CKR_OK && tok_login_state(t) != TOK_SO)
		rv = CKR_USER_NOT_LOGGED_IN;
	old = t->user;
	if (rv == CKR_OK) {
		t->user = rec;
		rv = tok_store_save_token(t);
		if (rv != CKR_OK)
			t->user = old;
	}
	arv = tok_audit_write(&(struct tok_audit){ .action = "C_InitPIN", .rv = rv,
						   .kind = TOK_AUD_SENSITIVE, .s = s });
	if (arv != CKR_OK && rv == CKR_OK) {
		/* Not audited: undo (still under the lock: nothing came between). */
		t->user = old;
		(void)tok_store_save_token(t);
		rv = arv;
	}
	if (locked)
		tok_store_unlock(t);
	OPENSSL_cleanse(&rec, sizeof(rec));
	OPENSSL_cleanse(&old, sizeof(old));
	pthread_mutex_unlock(&t->mu);
	tok_session_put(s);
	return rv;
}

CK_RV C_SetPIN(CK_SESSION_HANDLE h, CK_UTF8CHAR_PTR pOldPin, CK_ULONG ulOldLen,
		      CK_UTF8CHAR_PTR pNewPin, CK_ULONG ulNewLen)
{
	struct tok_session *s;
	struct tok_token *t;
	struct tok_pin *p, old;
	uint8_t mk[32];
	bool so, locked = false;
	CK_RV rv = tok_session_enter(h, &s), arv;

	if (rv != CKR_OK)
		return rv;
	t = s->tok;
	pthread_mutex_lock(&t->mu);
	/* The SO changes the SO PIN; anyone else the user PIN. */
	so = tok_login_state(t) == TOK_SO;
	p = so ? &t->so : &t->user;
	if (!tok_session_rw(s))
		rv = CKR_SESSION_READ_ONLY;
	else if ((rv = pin_len_ok(pOldPin, ulOldLen)) == CKR_OK)
		rv = pin_len_ok(pNewPin, ulNewLen);
	if (rv == CKR_OK) {
		rv = pin_verify(t, so, pOldPin, ulOldLen, mk);
		locked = rv == CKR_OK;
	}
	old = *p;
	if (rv == CKR_OK) {
		rv = tok_pin_make(p, pNewPin, ulNewLen, mk, tok_g.cfg.pbkdf2_iterations);
		OPENSSL_cleanse(mk, sizeof(mk));
		if (rv == CKR_OK)
			rv = tok_store_save_token(t);
		if (rv != CKR_OK)
			*p = old;
	}
	arv = tok_audit_write(&(struct tok_audit){ .action = "C_SetPIN", .rv = rv,
						   .kind = TOK_AUD_SENSITIVE, .s = s,
						   .detail = so ? "so" : "user" });
	if (arv != CKR_OK && rv == CKR_OK) {
		*p = old;
		(void)tok_store_save_token(t);
		rv = arv;
	}
	if (locked)
		tok_store_unlock(t);
	OPENSSL_cleanse(&old, sizeof(old));
	pthread_mutex_unlock(&t->mu);
	tok_session_put(s);
	return rv;
}

/* ---- sessions ------------------------------------------------------------- */

CK_RV C_OpenSession(CK_SLOT_ID id, CK_FLAGS flags, CK_VOID_PTR app, CK_NOTIFY notify,
			   CK_SESSION_HANDLE_PTR phSession)
{
	struct tok_token *t;
	struct tok_session *s = NULL;
	CK_RV rv, arv;
	size_t i;

	NEED_INIT();
	t = token_of(id);
	if (!t)
		return CKR_SLOT_ID_INVALID;
	if (!phSession)
		return CKR_ARGUMENTS_BAD;
	if (!(flags & CKF_SERIAL_SESSION))
		return CKR_SESSION_PARALLEL_NOT_SUPPORTED;
	rv = tok_audit_gate();
	if (rv == CKR_OK)
		rv = tok_store_sync(t); /* initialised by another process meanwhile? */
	if (rv != CKR_OK)
		return rv;
	pthread_mutex_lock(&t->mu);
	if (!t->initialized) {
		rv = CKR_TOKEN_NOT_RECOGNIZED;
		goto out;
	}
	if (!(flags & CKF_RW_SESSION) && tok_login_state(t) == TOK_SO) {
		rv = CKR_SESSION_READ_WRITE_SO_EXISTS;
		goto out;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		rv = CKR_HOST_MEMORY;
		goto out;
	}
	pthread_mutex_init(&s->mu, NULL);
	atomic_init(&s->refs, 1);
	s->tok = t;
	s->flags = flags & (CKF_SERIAL_SESSION | CKF_RW_SESSION);
	pthread_rwlock_wrlock(&tok_g.slock);
	for (i = 0; i < tok_g.nsessions; i++)
		if (!tok_g.sessions[i])
			break;
	if (i == tok_g.nsessions) {
		if (i == 0xffff) {
			rv = CKR_SESSION_COUNT;
		} else if (tok_g.nsessions == tok_g.session_cap) {
			size_t cap = tok_g.session_cap ? tok_g.session_cap * 2 : 64;
			struct tok_session **n = realloc(tok_g.sessions, cap * sizeof(*n));
			if (n) {
				tok_g.sessions = n;
				tok_g.session_cap = cap;
			} else {
				rv = CKR_HOST_MEMORY;
			}
		}
		if (rv == CKR_OK)
			tok_g.nsessions++;
	}
	if (rv == CKR_OK) {
		/* Handles are never reused while the module is loaded: the
		 * generation above the index changes at every open. */
		s->handle = (CK_SESSION_HANDLE)(++tok_g.session_gen << 16 | (i + 1));
		tok_g.sessions[i] = s;
	}
	pthread_rwlock_unlock(&tok_g.slock);
	if (rv != CKR_OK) {
		pthread_mutex_destroy(&s->mu);
		free(s);
		s = NULL;
		goto out;
	}
	t->sessions++;
	if (flags & CKF_RW_SESSION)
		t->rw_sessions++;
out:
	arv = tok_audit_write(&(struct tok_audit){ .action = "C_OpenSession", .rv = rv,
						   .kind = TOK_AUD_CRYPTO, .tok = t, .s = s,
						   .detail = (flags & CKF_RW_SESSION) ? "rw" : "ro" });
	if (arv != CKR_OK && s) {
		session_close_locked(s);
		rv = arv;
	} else if (rv == CKR_OK) {
		*phSession = s->handle;
	}
	pthread_mutex_unlock(&t->mu);
	return rv;
}

CK_RV C_CloseSession(CK_SESSION_HANDLE h)
{
	struct tok_session *s;
	struct tok_token *t;
	CK_RV rv = tok_session_get(h, &s);

	if (rv != CKR_OK)
		return rv;
	t = s->tok;
	pthread_mutex_lock(&t->mu);
	if (!s->closed) {
		/* Only reduces privilege: after fail-closed it succeeds,
		 * unrecorded and counted (DESIGN.md). */
		if (!tok_audit_unrecorded())
			rv = tok_audit_write(&(struct tok_audit){ .action = "C_CloseSession", .rv = CKR_OK,
								  .kind = TOK_AUD_CRYPTO, .s = s });
		session_close_locked(s);
	} else {
		rv = CKR_SESSION_HANDLE_INVALID;
	}
	pthread_mutex_unlock(&t->mu);
	tok_session_put(s);
	return rv;
}

CK_RV C_CloseAllSessions(CK_SLOT_ID id)
{
	struct tok_token *t;
	CK_RV rv;

	NEED_INIT();
	t = token_of(id);
	if (!t)
		return CKR_SLOT_ID_INVALID;
	/* Only reduces privilege: after fail-closed it succeeds, unrecorded
	 * and counted (DESIGN.md). */
	rv = tok_audit_unrecorded() ? CKR_OK
				    : tok_audit_write(&(struct tok_audit){ .action = "C_CloseAllSessions",
									   .rv = CKR_OK, .kind = TOK_AUD_CRYPTO,
									   .tok = t });
	close_all_sessions(t);
	return rv;
}

CK_RV C_GetSessionInfo(CK_SESSION_HANDLE h, CK_SESSION_INFO_PTR p)
{
	struct tok_session *s;
	CK_RV rv = tok_session_get(h, &s);

	if (rv != CKR_OK)
		return rv;
	if (!p) {
		tok_session_put(s);
		return CKR_ARGUMENTS_BAD;
	}
	memset(p, 0, sizeof(*p));
	p->slotID = s->tok->id;
	p->flags = s->flags;
	switch (tok_login_state(s->tok)) {
	case TOK_SO:
		p->state = CKS_RW_SO_FUNCTIONS;
		break;
	case TOK_USER:
		p->state = tok_session_rw(s) ? CKS_RW_USER_FUNCTIONS : CKS_RO_USER_FUNCTIONS;
		break;
	default:
		p->state = tok_session_rw(s) ? CKS_RW_PUBLIC_SESSION : CKS_RO_PUBLIC_SESSION;
	}
	tok_session_put(s);
	return CKR_OK;
}

CK_RV C_Login(CK_SESSION_HANDLE h, CK_USER_TYPE type, CK_UTF8CHAR_PTR pPin, CK_ULONG ulPinLen)
{
	struct tok_session *s;
	struct tok_token *t;
	enum tok_login want = type == CKU_SO ? TOK_SO : TOK_USER;
	enum tok_login now;
	CK_RV rv = tok_session_get(h, &s), arv;
	bool was_ro = false;

	if (rv != CKR_OK)
		return rv;
	t = s->tok;
	pthread_mutex_lock(&t->mu);
	now = tok_login_state(t);
	if (type != CKU_SO && type != CKU_USER && type != CKU_CONTEXT_SPECIFIC) {
		rv = CKR_USER_TYPE_INVALID;
		goto out;
	}
	if (type == CKU_CONTEXT_SPECIFIC) {
		/* No key of this token has CKA_ALWAYS_AUTHENTICATE. */
		rv = CKR_OPERATION_NOT_INITIALIZED;
		goto out;
	}
	if (!pPin) {
		rv = CKR_ARGUMENTS_BAD;
		goto out;
	}
	if (now == want) {
		rv = CKR_USER_ALREADY_LOGGED_IN;
		goto out;
	}
	if (now != TOK_PUBLIC) {
		rv = CKR_USER_ANOTHER_ALREADY_LOGGED_IN;
		goto out;
	}
	if (want == TOK_SO) {
		was_ro = t->rw_sessions != t->sessions;
		if (was_ro) {
			rv = CKR_SESSION_READ_ONLY_EXISTS;
			goto out;
		}
	}
	rv = pin_len_ok(pPin, ulPinLen);
	if (rv != CKR_OK)
		goto out;
	rv = pin_verify(t, want == TOK_SO, pPin, ulPinLen, t->mk);
	if (rv != CKR_OK)
		goto out;
	atomic_store(&t->login, want);
	if (want == TOK_USER) {
		rv = tok_store_load_objects(t); /* the sealed ones are readable now */
		if (rv != CKR_OK)
			tok_logout_locked(t);
	}
	tok_store_unlock(t);
out:
	arv = tok_audit_write(&(struct tok_audit){ .action = "C_Login", .rv = rv,
						   .kind = TOK_AUD_SENSITIVE, .s = s,
						   .actor = want == TOK_SO ? "so" : "user" });
	if (arv != CKR_OK && rv == CKR_OK) {
		tok_logout_locked(t);
		rv = arv;
	}
	if (rv != CKR_OK && tok_login_state(t) == want && now != want)
		tok_logout_locked(t);
	pthread_mutex_unlock(&t->mu);
	tok_session_put(s);
	return rv;
}

CK_RV C_Logout(CK_SESSION_HANDLE h)
{
	struct tok_session *s;
	struct tok_token *t;
	CK_RV rv = tok_session_get(h, &s);

	if (rv != CKR_OK)
		return rv;
	t = s->tok;
	pthread_mutex_lock(&t->mu);
	if (tok_login_state(t) != TOK_PUBLIC && tok_audit_unrecorded()) {
		/* Only reduces privilege: after fail-closed it succeeds,
		 * unrecorded and counted (DESIGN.md). */
		tok_logout_locked(t);
	} else if (tok_audit_gate() != CKR_OK) {
		rv = CKR_DEVICE_ERROR; /* not logged in: nothing to reduce */
	} else if (tok_login_state(t) == TOK_PUBLIC) {
		rv = CKR_USER_NOT_LOGGED_IN;
		(void)tok_audit_write(&(struct tok_audit){ .action = "C_Logout", .rv = rv,
							   .kind = TOK_AUD_SENSITIVE, .s = s });
	} else {
		/* Recorded before the state changes, with the actor logging out. */
		rv = tok_audit_write(&(struct tok_audit){ .action = "C_Logout", .rv = CKR_OK,
							  .kind = TOK_AUD_SENSITIVE, .s = s });
		tok_logout_locked(t);
	}
	pthread_mutex_unlock(&t->mu);
	tok_session_put(s);
	return rv;
}

/* ---- functions outside the token's scope ------------------------------------
 * Answered as the standard allows for a token that does not offer them; none
 * is advertised by a mechanism or a flag (docs/token.md). */

CK_RV C_GetFunctionStatus(CK_SESSION_HANDLE h)
{
	struct tok_session *s;
	CK_RV rv = tok_session_get(h, &s);

	if (rv != CKR_OK)
		return rv;
	tok_session_put(s);
	return CKR_FUNCTION_NOT_PARALLEL;
}

CK_RV C_CancelFunction(CK_SESSION_HANDLE h)
{
	return C_GetFunctionStatus(h);
}

CK_RV C_WaitForSlotEvent(CK_FLAGS flags, CK_SLOT_ID_PTR pSlot, CK_VOID_PTR pReserved)
{
	NEED_INIT();
	return CKR_FUNCTION_NOT_SUPPORTED; /* no removable tokens: no slot events */
}

CK_RV C_GetOperationState(CK_SESSION_HANDLE h, CK_BYTE_PTR p, CK_ULONG_PTR n)
{
	NEED_INIT();
	return CKR_FUNCTION_NOT_SUPPORTED;
}

CK_RV C_SetOperationState(CK_SESSION_HANDLE h, CK_BYTE_PTR p, CK_ULONG n,
				 CK_OBJECT_HANDLE ek, CK_OBJECT_HANDLE ak)
{
	NEED_INIT();
	return CKR_FUNCTION_NOT_SUPPORTED;
}

#define TOK_FN(name) .name = name

static CK_FUNCTION_LIST function_list = {
	.version = { 2, 40 },
	TOK_FN(C_Initialize), TOK_FN(C_Finalize), TOK_FN(C_GetInfo),
	.C_GetFunctionList = C_GetFunctionList,
	TOK_FN(C_GetSlotList), TOK_FN(C_GetSlotInfo), TOK_FN(C_GetTokenInfo),
	TOK_FN(C_GetMechanismList), TOK_FN(C_GetMechanismInfo), TOK_FN(C_InitToken),
	TOK_FN(C_InitPIN), TOK_FN(C_SetPIN), TOK_FN(C_OpenSession), TOK_FN(C_CloseSession),
	TOK_FN(C_CloseAllSessions), TOK_FN(C_GetSessionInfo), TOK_FN(C_GetOperationState),
	TOK_FN(C_SetOperationState), TOK_FN(C_Login), TOK_FN(C_Logout),
	TOK_FN(C_CreateObject), TOK_FN(C_CopyObject), TOK_FN(C_DestroyObject),
	TOK_FN(C_GetObjectSize), TOK_FN(C_GetAttributeValue), TOK_FN(C_SetAttributeValue),
	TOK_FN(C_FindObjectsInit), TOK_FN(C_FindObjects), TOK_FN(C_FindObjectsFinal),
	TOK_FN(C_EncryptInit), TOK_FN(C_Encrypt), TOK_FN(C_EncryptUpdate), TOK_FN(C_EncryptFinal),
	TOK_FN(C_DecryptInit), TOK_FN(C_Decrypt), TOK_FN(C_DecryptUpdate), TOK_FN(C_DecryptFinal),
	TOK_FN(C_DigestInit), TOK_FN(C_Digest), TOK_FN(C_DigestUpdate), TOK_FN(C_DigestKey),
	TOK_FN(C_DigestFinal), TOK_FN(C_SignInit), TOK_FN(C_Sign), TOK_FN(C_SignUpdate),
	TOK_FN(C_SignFinal), TOK_FN(C_SignRecoverInit), TOK_FN(C_SignRecover),
	TOK_FN(C_VerifyInit), TOK_FN(C_Verify), TOK_FN(C_VerifyUpdate), TOK_FN(C_VerifyFinal),
	TOK_FN(C_VerifyRecoverInit), TOK_FN(C_VerifyRecover), TOK_FN(C_DigestEncryptUpdate),
	TOK_FN(C_DecryptDigestUpdate), TOK_FN(C_SignEncryptUpdate), TOK_FN(C_DecryptVerifyUpdate),
	TOK_FN(C_GenerateKey), TOK_FN(C_GenerateKeyPair), TOK_FN(C_WrapKey), TOK_FN(C_UnwrapKey),
	TOK_FN(C_DeriveKey), TOK_FN(C_SeedRandom), TOK_FN(C_GenerateRandom),
	TOK_FN(C_GetFunctionStatus), TOK_FN(C_CancelFunction), TOK_FN(C_WaitForSlotEvent),
};

TOK_API CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR ppFunctionList)
{
	if (!ppFunctionList)
		return CKR_ARGUMENTS_BAD;
	*ppFunctionList = &function_list;
	return CKR_OK;
}

/* PKCS#11 3.0's interface discovery. p11-kit 0.24's header is v2.40, so the
 * CK_INTERFACE type is declared here as the 3.0 standard defines it. The one
 * interface, "PKCS 11", carries the v2.40 function list above (its version
 * field says so), which 3.0 applications accept. */
struct tok_ck_interface {
	CK_UTF8CHAR *pInterfaceName;
	CK_VOID_PTR pFunctionList;
	CK_FLAGS flags;
};

static struct tok_ck_interface interfaces[] = {
	{ (CK_UTF8CHAR *)"PKCS 11", &function_list, 0 },
};

TOK_API CK_RV C_GetInterfaceList(struct tok_ck_interface *pInterfacesList, CK_ULONG_PTR pulCount);
TOK_API CK_RV C_GetInterfaceList(struct tok_ck_interface *pInterfacesList, CK_ULONG_PTR pulCount)
{
	const CK_ULONG n = sizeof(interfaces) / sizeof(interfaces[0]);

	if (!pulCount)
		return CKR_ARGUMENTS_BAD;
	if (pInterfacesList) {
		if (*pulCount < n) {
			*pulCount = n;
			return CKR_BUFFER_TOO_SMALL;
		}
		memcpy(pInterfacesList, interfaces, sizeof(interfaces));
	}
	*pulCount = n;
	return CKR_OK;
}
