/* SPDX-License-Identifier: MIT */
/*
 * The module core: configuration, slots and tokens, sessions, the persistent
 * store and the audit trail. PKCS#11 forces one module-global state; it is
 * the one struct tok_module below (STYLE.md habit 9).
 */
#ifndef TOK_CORE_H
#define TOK_CORE_H

#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <auditlog.h>

#include "token.h"

#define TOK_MAX_SLOTS 64
#define TOK_MIN_PIN 4
#define TOK_MAX_PIN 255
#define TOK_HASH 32

/* ---- configuration (config.c) --------------------------------------------- */
enum tok_sync { TOK_SYNC_SENSITIVE, TOK_SYNC_ALL, TOK_SYNC_NONE };
enum tok_verify { TOK_VERIFY_TAIL, TOK_VERIFY_FULL };

struct tok_config {
	char *path;      /* the file read, for messages */
	char *token_dir;
	char *audit_dir; /* default: <token_dir>/audit */
	bool audit_enabled;
	enum tok_sync audit_sync;
	bool audit_fail_closed;
	enum tok_verify audit_verify;
	unsigned audit_format_version;
	uint64_t audit_queue_capacity;
	uint64_t audit_rotate_bytes;
	uint64_t audit_rotate_age_s;
	uint64_t audit_enospc_deadline_ms;
	uint64_t audit_async_coalesce_us; /* libauditlog's async_coalesce_us */
	bool audit_drop_behind_set;       /* audit_drop_behind_bytes given; else */
	uint64_t audit_drop_behind_bytes; /* libauditlog's default stands */
	char *audit_worker_cpus;          /* libauditlog's worker_cpus, or NULL (owned) */
	uint64_t pbkdf2_iterations;
	uint64_t max_pin_failures;
	uint64_t slots;
	enum auditlog_backend audit_backend; /* audit_backend */
	bool audit_queue_eagain;             /* audit_queue_full = fail: AUDITLOG_FULL_EAGAIN */
	uint64_t rsa_min_bits;               /* 1024..4096: generation, import, private-key use */
	bool keygen_ahead;                   /* one EC key pair per curve made ahead (keyahead.c) */
	/* format v2, in-process sealing: both required with audit_format_version = 2 */
	char *audit_seal_state;  /* audit_seal_state: the sealing state file */
	char *audit_signing_key; /* audit_signing_key: the checkpoint signing key file */
	/* format v2 through auditlog-sealer: exclusive with the two above */
	char *audit_sealer_socket; /* audit_sealer_socket: the sealer's UNIX socket */
	bool audit_checkpoint_set; /* audit_checkpoint_records or _ms given */
	uint64_t audit_checkpoint_records, audit_checkpoint_ms;
};

#define TOK_DEFAULT_CONF "/etc/softtoken/softtoken.conf"

/* Read the file SOFTTOKEN_CONF names (TOK_DEFAULT_CONF otherwise). On error,
 * writes one line naming the file, the line and the problem into err and
 * returns CKR_ARGUMENTS_BAD (a bad value) or CKR_GENERAL_ERROR (unreadable). */
CK_RV tok_config_load(struct tok_config *cfg, char *err, size_t errlen);
void tok_config_free(struct tok_config *cfg);

/* ---- PIN records and the token master key (store.c) ------------------------ */
struct tok_pin {
	bool set;
	uint64_t iterations;
	uint8_t salt[16];
	uint8_t check[TOK_HASH]; /* HMAC(PBKDF2(pin), "check"): compared in constant time */
	uint8_t nonce[12];
	uint8_t wrapped_mk[32 + 16]; /* AES-256-GCM(KEK = HMAC(PBKDF2(pin), "kek"), mk) + tag */
	uint64_t failures;           /* consecutive failed logins */
};

enum tok_login { TOK_PUBLIC, TOK_USER, TOK_SO };

/* How a directory of the store or the trail is held (docs/token.md "A token
 * shared by a group"): private (owner root or us; what we create is 0600 /
 * 0700), or shared by the group gid (mode exactly 02770; what we create is
 * 0660 / 02770, and files of other users of that group are accepted in mode
 * 0660 only). */
struct tok_share {
	bool shared;
	gid_t gid;
};

struct tok_session;

struct tok_token {
	CK_SLOT_ID id;
	char *dir; /* <token_dir>/slot<N> */
	struct tok_share share;    /* of dir (tok_store_open) */
	struct tok_share objshare; /* of dir/objects, once obj_checked */
	bool obj_checked;          /* under mu */
	pthread_mutex_t mu; /* guards the fields below up to the objects */
	bool initialized;
	char label[32];  /* blank padded, as in CK_TOKEN_INFO */
	char serial[16];
	struct tok_pin so, user;
	atomic_int login; /* enum tok_login; written under mu, read anywhere */
	uint8_t mk[32]; /* valid while logged in (user or SO) */
	unsigned sessions, rw_sessions;

	/* The store as this process last saw it (store.c): the lock file,
	 * held with an OFD lock for every read-modify-write (under mu), and
	 * the generation and epoch of its journal. */
	int lock_fd;
	const uint8_t *lock_map;       /* its header, mapped read-only */
	bool store_locked;             /* under mu */
	atomic_uint_fast64_t seen_gen; /* written under the lock, read by tok_store_sync */
	uint64_t seen_epoch;

	/* Objects: token objects (loaded from the store; private ones only
	 * while the user is logged in) and session objects. Slot i holds the
	 * object whose handle's low 24 bits are i + 1. */
	pthread_rwlock_t olock;
	struct tok_object **objs;
	size_t nobjs; /* slots used (some NULL) */
	size_t cap;
	size_t free_lo; /* no empty slot below this index: creation stays O(1)
			 * however many objects a session holds */
};

/* ---- sessions ------------------------------------------------------------- */
enum tok_opslot { TOK_SLOT_ENCRYPT, TOK_SLOT_DECRYPT, TOK_SLOT_SIGN, TOK_SLOT_VERIFY,
		  TOK_SLOT_DIGEST, TOK_SLOT__MAX };

struct tok_active {
	struct tok_op *op;
	CK_MECHANISM_TYPE mech;
	bool multipart; /* an Update was called: single-part calls refused */
	char *key_label; /* copies for the audit record at the end */
	size_t key_label_len;
	uint8_t *key_id;
	size_t key_id_len;
};

/* End an operation: free its state (crypto.c). */
void tok_active_end(struct tok_active *a);

struct tok_session {
	CK_SESSION_HANDLE handle;
	atomic_uint refs;
	struct tok_token *tok;
	CK_FLAGS flags;
	pthread_mutex_t mu; /* one call at a time on this session's state */
	struct tok_active act[TOK_SLOT__MAX];
	struct tok_op *digest_spare; /* the last digest that succeeded, for the next C_DigestInit */
	bool find_active;
	CK_OBJECT_HANDLE *found;
	size_t nfound, found_pos;
	bool closed;
};

struct tok_module {
	pthread_mutex_t mu; /* serialises C_Initialize/C_Finalize */
	pthread_rwlock_t slock; /* guards sessions[] */
	bool initialized;
	struct tok_config cfg;
	struct tok_share token_share, audit_share; /* of token_dir, audit_dir */
	struct tok_token *tokens;
	size_t ntokens;

	struct tok_session **sessions;
	size_t nsessions, session_cap;
	uint64_t session_gen;
	atomic_uint_fast64_t object_gen;

	struct auditlog *log;
	char *log_path;
	atomic_bool audit_failed; /* fail-closed tripped: audited calls answer CKR_DEVICE_ERROR */
	atomic_uint_fast64_t audit_errors;
	/* The log file as we opened it, reopened by name after a rotation: the
	 * one a shared audit_dir makes 0660, and whose link count names a
	 * deleted trail in the message (audit.c). */
	pthread_mutex_t audit_mu; /* guards audit_fd and audit_rotations */
	int audit_fd;
	uint64_t audit_rotations;
	atomic_int_fast64_t audit_checked_ms; /* last look for a rotation, queued records */
	/* Privilege-reducing calls (C_Logout, C_CloseSession,
	 * C_CloseAllSessions, C_Finalize) that succeeded without a record after
	 * fail-closed; named by the next trail's C_Initialize record. Survives
	 * C_Finalize (not by a new process). */
	atomic_uint_fast64_t unrecorded;
};

extern struct tok_module tok_g;

/* ---- audit (audit.c) ------------------------------------------------------
 * One record per audited call, written where the call ends.
 */
enum tok_audit_kind { TOK_AUD_SENSITIVE, TOK_AUD_CRYPTO };

struct tok_audit {
	const char *action;
	CK_RV rv;
	enum tok_audit_kind kind;
	struct tok_session *s;  /* may be NULL */
	const struct tok_token *tok; /* slot, when no session */
	CK_MECHANISM_TYPE mech;
	bool has_mech;
	const char *key_label;
	size_t key_label_len;
	const uint8_t *key_id;
	size_t key_id_len;
	/* A call on two keys (docs/token.md): the first key (derive: base, wrap:
	 * wrapping, unwrap: unwrapping key). With it set, tok_audit_obj names it
	 * in key_label/key_id and its object (derived, wrapped, new key) in
	 * key2_label/key2_id. The caller holds a reference until the record is
	 * written. */
	struct tok_object *first;
	const char *key2_label;
	size_t key2_label_len;
	const uint8_t *key2_id;
	size_t key2_id_len;
	const char *detail;
	const char *actor; /* NULL: from the token's login state */
	bool handed_out;   /* a secret left the token: outcome success whatever rv */
};

/* Open the audit log (the per-process naming rule in docs/token.md). */
CK_RV tok_audit_open(char *err, size_t errlen);
CK_RV tok_audit_close(void);
/* Gate for every audited call: CKR_DEVICE_ERROR once fail-closed tripped. */
CK_RV tok_audit_gate(void);
/* A privilege-reducing call after fail-closed: it succeeds without a record;
 * true when that is the case (counted), false when the trail is writable. */
bool tok_audit_unrecorded(void);
/* Write the record; returns CKR_OK, or CKR_DEVICE_ERROR when the trail could
 * not take it and the module fails closed (the caller then undoes what it can
 * and answers CKR_DEVICE_ERROR). */
CK_RV tok_audit_write(const struct tok_audit *a);
/* Same, with the label and id of an object (taken under its lock), and of
 * a->first before it when set (see struct tok_audit). */
CK_RV tok_audit_obj(struct tok_audit *a, struct tok_object *o);

/* ---- store (store.c) ------------------------------------------------------
 * Many processes share a store (docs/token.md "Many processes, one token").
 * Every read-modify-write runs between tok_store_lock and tok_store_unlock,
 * with t->mu held: the lock is an OFD lock on <slot dir>/store.lock, and
 * taking it first brings t up to date (token.json, the objects the journal
 * names; a re-initialised token logs out and drops its objects). The
 * functions that write (save/init/delete) require the lock.
 */
#define TOK_STORE_MAX_FILE (16 << 20) /* the largest store file read (and so written) */

/* At C_Initialize: create the slot directory and the lock file, check them.
 * The first tok_store_lock loads the token. CKR_GENERAL_ERROR with err set. */
CK_RV tok_store_open(struct tok_token *t, char *err, size_t errlen);
void tok_store_close(struct tok_token *t);
CK_RV tok_store_lock(struct tok_token *t);   /* t->mu held; CKR_OK: locked and in sync */
void tok_store_unlock(struct tok_token *t);
/* Without any lock held: one load of the journal's generation; when another
 * process changed the store, takes t->mu and the lock and syncs. */
CK_RV tok_store_sync(struct tok_token *t);
/* Directories of the store and the trail: a directory, not world-writable
 * (nofollow: not a symlink either), and either private (owned by root or us)
 * or shared (mode 02770, any owner; inside a shared parent, of the parent's
 * group). ret_share (may be NULL) receives which, on success. */
CK_RV tok_store_check_dir(const char *path, const char *what, bool nofollow, const struct tok_share *parent,
			  struct tok_share *ret_share, char *err, size_t errlen);
/* mkdir(path) when missing: 02770 (fchmod, whatever the umask) when its
 * parent directory is shared, else 0700. 0 or -errno. */
int tok_store_mkdir(const char *path);
/* May a file of a directory held as share be used (read, locked, appended)?
 * A regular file, one link, not world-writable; in a shared directory of
 * share's group, and of mode 0660 when another user owns it. NULL or a
 * reason ("a symlink"... "of group 0, not the directory's 1001"). */
const char *tok_store_file_refusal(const struct stat *st, const struct tok_share *share, char *buf,
				   size_t buflen);
/* The mode new files of a directory held as share get (0660 or 0600). */
mode_t tok_store_file_mode(const struct tok_share *share);
CK_RV tok_store_save_token(struct tok_token *t);           /* atomic */
CK_RV tok_store_init_token(struct tok_token *t, const uint8_t *so_pin, size_t so_len,
			   const char label[32]);          /* wipes objects and user PIN */
/* Verify a PIN against rec: CKR_OK (and mk unwrapped into ret_mk when not
 * NULL) or CKR_PIN_INCORRECT. */
CK_RV tok_pin_check(const struct tok_pin *rec, const uint8_t *pin, size_t len, uint8_t ret_mk[32]);
/* Fill rec for pin, wrapping mk. */
CK_RV tok_pin_make(struct tok_pin *rec, const uint8_t *pin, size_t len, const uint8_t mk[32],
		   uint64_t iterations);
/* Every object file into t's table (at login: the sealed ones become
 * readable). */
CK_RV tok_store_load_objects(struct tok_token *t);
CK_RV tok_store_save_object(struct tok_token *t, struct tok_object *o);
CK_RV tok_store_delete_object(struct tok_token *t, const struct tok_object *o);

/* ---- objects (object.c) --------------------------------------------------- */
/* Take a reference to the object behind h, visible to s (private objects need
 * a login). CKR_OBJECT_HANDLE_INVALID otherwise. */
CK_RV tok_obj_get(struct tok_session *s, CK_OBJECT_HANDLE h, struct tok_object **ret);
void tok_obj_put(struct tok_object *o);
/* Make an object from complete attributes and publish it in t (handle set). */
CK_RV tok_obj_publish(struct tok_token *t, struct tok_attrs *attrs, CK_SESSION_HANDLE owner,
		      struct tok_object **ret);
void tok_obj_unpublish(struct tok_token *t, struct tok_object *o);
/* Drop objects at logout (private token objects) / session close (its
 * session objects) / last session close (all session objects). */
void tok_obj_drop_private(struct tok_token *t);
void tok_obj_drop_session(struct tok_token *t, CK_SESSION_HANDLE owner);
void tok_obj_drop_all(struct tok_token *t);
void tok_obj_drop_token_objects(struct tok_token *t);
/* The token object stored as uuid (a reference), NULL when none. */
struct tok_object *tok_obj_by_uuid(struct tok_token *t, const char *uuid);
/* Would attrs make an object of o's class, privacy and kind? */
bool tok_obj_same_kind(const struct tok_object *o, const struct tok_attrs *attrs);
/* Replace o's attributes by attrs (taken) under o->mu. */
void tok_obj_replace_attrs(struct tok_object *o, struct tok_attrs *attrs);
/* Unpublish every token object whose uuid is not among names[0..n). */
void tok_obj_prune(struct tok_token *t, const char (*names)[33], size_t n);
/* Stored encrypted, loaded only at login: private objects and key material. */
bool tok_obj_sealed(const struct tok_object *o);
/* Publish attrs as a new object of s's token (taking them) and persist it
 * when it is a token object; on failure it is gone again. *ret receives a
 * reference. */
CK_RV tok_obj_add(struct tok_session *s, struct tok_attrs *attrs, struct tok_object **ret);
/* Undo tok_obj_add (its record could not be written): the store file and the
 * handle are gone, the caller's reference is dropped. NULL is a no-op. */
void tok_obj_discard(struct tok_token *t, struct tok_object *o);
/* tok_obj_add, then write the audit record a (its rv is set here); an object
 * whose record fails is discarded. ret_o, when not NULL, receives a reference. */
CK_RV tok_obj_create(struct tok_session *s, struct tok_attrs *attrs, struct tok_audit *a,
		     CK_OBJECT_HANDLE *ret_h, struct tok_object **ret_o);
/* Defaults and checks for a new object from a caller's template (create,
 * generate, unwrap): class, key type, CKA_TOKEN etc. */
CK_RV tok_obj_complete(struct tok_session *s, struct tok_attrs *a, CK_OBJECT_CLASS cls,
		       CK_KEY_TYPE kt, bool local);
/* C_* object calls live in object.c, the crypto ones in crypto.c. */

/* ---- sessions (module.c) -------------------------------------------------- */
CK_RV tok_session_get(CK_SESSION_HANDLE h, struct tok_session **ret);
void tok_session_put(struct tok_session *s);
/* An audited call's entry: tok_session_get, then tok_audit_gate (the
 * session is put again when the gate is shut). */
CK_RV tok_session_enter(CK_SESSION_HANDLE h, struct tok_session **ret);
bool tok_session_rw(const struct tok_session *s);
enum tok_login tok_login_state(struct tok_token *t);
/* End the login (t->mu held): private objects dropped, master key wiped. */
void tok_logout_locked(struct tok_token *t);

/* Fixed-width text fields of the PKCS#11 info structs. */
void tok_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void tok_pad(unsigned char *dst, size_t n, const char *src);

#endif
