/* SPDX-License-Identifier: MIT */
/*
 * The token's audit trail (docs/token.md "Audit"). One record per audited
 * call, written where the call ends, success or failure, with the CKR value.
 *
 * Chain naming: each process that loads the module writes its own chain in
 * audit_dir, in the first of softtoken-0.log, softtoken-1.log, ... whose lock
 * it can take and that it may open (EACCES: the next name). A process that
 * exits releases its file; the next process to take it continues that
 * file's chain. auditlog-verify checks the whole directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

#define TOK_MAX_CHAINS 256

/* The token's batches: a record or a few (one operation every ~10-100 µs
 * against one fdatasync). libauditlog's 3 MiB default serves a writer whose
 * queue fills; here it would only triple what every process's C_Initialize
 * reads back at open (2 x this + 8 KiB, docs/format.md 7). docs/token.md. */
#define TOK_AUDIT_BATCH_BYTES (1u << 20)

/* Before libauditlog opens a chain file (0600, its contract): a file that is
 * there must fit the directory (tok_store_file_refusal: -EPERM, err set);
 * one we may not open answers -EACCES (the caller takes the next name); in a
 * shared audit_dir a missing one is created 0660 first, so that the verifier
 * and a later process of another user of the group can read and continue
 * it. */
static int chain_prepare(const char *path, char *err, size_t errlen)
{
	const struct tok_share *sh = &tok_g.audit_share;
	char why[160];
	const char *no;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), r = 0;

	if (fd < 0 && errno == ENOENT && sh->shared) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0660);
		if (fd >= 0 && fchmod(fd, 0660) < 0) {
			r = -errno;
			close(fd);
			return r;
		}
		if (fd < 0 && errno == EEXIST)
			fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	}
	if (fd < 0)
		return errno == ENOENT ? 0 : errno == EACCES ? -EACCES : 0; /* else libauditlog says */
	if (fstat(fd, &st) < 0) {
		r = -errno;
	} else if ((no = tok_store_file_refusal(&st, sh, why, sizeof(why))) != NULL) {
		snprintf(err, errlen, "audit chain %s is %s: refused", path, no);
		r = -EPERM;
	}
	close(fd);
	return r;
}

/* In a shared audit_dir, the active file (ours: just opened, or made by
 * libauditlog's rotation as 0600) becomes 0660. Caller holds audit_mu or
 * runs before any record. */
static void share_active(void)
{
	struct stat st;

	if (tok_g.audit_share.shared && tok_g.audit_fd >= 0 && fstat(tok_g.audit_fd, &st) == 0 &&
	    st.st_uid == geteuid() && (st.st_mode & 07777) != 0660)
		(void)fchmod(tok_g.audit_fd, 0660);
}

/* After rotations, in a shared audit_dir: our chain's rotated files
 * (<name>.<UTC time>-<seq>) that are still 0600 (made active by a rotation
 * and rotated away again before a check saw them) become 0660 too. One
 * directory scan per check that saw a rotation (rare). */
static void share_rotated(void)
{
	const char *base = strrchr(tok_g.log_path, '/');
	size_t bl;
	struct dirent *de;
	DIR *d;

	if (!tok_g.audit_share.shared || !base)
		return;
	base++;
	bl = strlen(base);
	d = opendir(tok_g.cfg.audit_dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		struct stat st;
		int fd;
		if (strncmp(de->d_name, base, bl) != 0 || de->d_name[bl] != '.')
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid() || (st.st_mode & 07777) == 0660)
			continue;
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd >= 0) {
			if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
			    st.st_nlink == 1 && !(st.st_mode & S_IWOTH))
				(void)fchmod(fd, 0660);
			close(fd);
		}
	}
	closedir(d);
}

/* Format v2 in-process (docs/token.md "Format v2"): before any chain is
 * tried, each key file the library will refuse is named with the reason,
 * so that the refusal reads as the file's and not as a chain's (and an
 * unreadable key is not taken for a chain of another user's: -EACCES would
 * walk every name). libauditlog still makes the same checks and is the one
 * that enforces them (auditlog_config_set_sealing). */
static int seal_file_check(const char *key, const char *path, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY), r = 0;

	if (fd < 0) {
		r = -errno;
		if (r == -ELOOP)
			snprintf(err, errlen, "%s %s is a symbolic link: refused (name the file itself)", key, path);
		else if (r == -ENOENT)
			snprintf(err, errlen, "%s %s does not exist (auditlog-keygen makes it: docs/keys.md)", key,
				 path);
		else if (r == -EACCES)
			snprintf(err, errlen,
				 "%s %s is not readable by this process (uid %u): in-process sealing runs as the "
				 "keys' owner only",
				 key, path, (unsigned)geteuid());
		else
			snprintf(err, errlen, "cannot open %s %s: %s", key, path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot stat %s %s: %s", key, path, strerror(-r));
	} else if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		snprintf(err, errlen, "%s %s is not a regular file: refused", key, path);
	} else if (st.st_mode & 077) {
		r = -EPERM;
		snprintf(err, errlen, "%s %s has mode %04o, open to group or others: refused (chmod 600)", key,
			 path, (unsigned)(st.st_mode & 07777));
	}
	close(fd);
	return r;
}

/* Is the directory of the file at path the directory dir? */
static bool in_dir(const char *path, const char *dir)
{
	struct stat a, b;
	char *d = strdup(path);
	bool same;

	if (!d)
		return false;
	*strrchr(d, '/') = '\0'; /* an absolute path (config.c) */
	same = stat(d[0] ? d : "/", &a) == 0 && stat(dir, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
	free(d);
	return same;
}

static int seal_files_check(const struct tok_config *c, char *err, size_t errlen)
{
	const char *const keys[2][2] = { { "audit_seal_state", c->audit_seal_state },
					 { "audit_signing_key", c->audit_signing_key } };
	char *dir, *lock;
	int r = 0;

	for (int i = 0; i < 2 && r == 0; i++) {
		r = seal_file_check(keys[i][0], keys[i][1], err, errlen);
		/* Key files among the chains would be read as logs by every
		 * verification of audit_dir (and the state's advances leave
		 * files there); in token_dir, beside the store. */
		if (r == 0 && (in_dir(keys[i][1], c->audit_dir) || in_dir(keys[i][1], c->token_dir))) {
			snprintf(err, errlen, "%s %s is in %s: refused (keep the keys in a directory of their own)",
				 keys[i][0], keys[i][1], in_dir(keys[i][1], c->audit_dir) ? "audit_dir" : "token_dir");
			r = -EINVAL;
		}
	}
	if (r < 0)
		return r;
	/* Each epoch advance writes a new state file beside the old one and
	 * takes <state>.lock there (auditlog_config_set_sealing). */
	dir = strdup(c->audit_seal_state);
	if (!dir)
		return -ENOMEM;
	*strrchr(dir, '/') = '\0'; /* an absolute path (config.c) */
	if (faccessat(AT_FDCWD, dir[0] ? dir : "/", W_OK | X_OK, AT_EACCESS) < 0) {
		r = -errno;
		snprintf(err, errlen,
			 "the directory of audit_seal_state %s is not writable by this process (%s): every "
			 "epoch writes a new state file there",
			 c->audit_seal_state, strerror(-r));
	}
	free(dir);
	if (r < 0)
		return r;
	if (asprintf(&lock, "%s.lock", c->audit_seal_state) < 0)
		return -ENOMEM;
	if (faccessat(AT_FDCWD, lock, R_OK | W_OK, AT_EACCESS) < 0 && errno != ENOENT) {
		r = -errno;
		snprintf(err, errlen, "the sealing state's lock %s is not writable by this process (%s)", lock,
			 strerror(-r));
	}
	free(lock);
	return r;
}

CK_RV tok_audit_open(char *err, size_t errlen)
{
	struct tok_config *c = &tok_g.cfg;
	struct auditlog_config *ac = NULL;
	CK_RV rv = CKR_GENERAL_ERROR;
	unsigned denied = 0;
	bool sealer_refused = false;
	char *tried = NULL; /* the last chain file tried, for messages */
	int r = 0;

	tok_g.audit_fd = -1;
	if (!c->audit_enabled)
		return CKR_OK;
	r = tok_store_mkdir(c->audit_dir);
	if (r < 0) {
		snprintf(err, errlen, "cannot create audit_dir %s: %s", c->audit_dir, strerror(-r));
		return CKR_GENERAL_ERROR;
	}
	/* DESIGN.md "Deployment and key custody". */
	if (tok_store_check_dir(c->audit_dir, "audit_dir", false, NULL, &tok_g.audit_share, err, errlen) != CKR_OK)
		return CKR_GENERAL_ERROR;
	if (auditlog_config_new(&ac) < 0)
		return CKR_HOST_MEMORY;
	if (auditlog_config_set_format_version(ac, c->audit_format_version) < 0 ||
	    auditlog_config_set_queue_capacity(ac, c->audit_queue_capacity) < 0 ||
	    auditlog_config_set_rotate_bytes(ac, c->audit_rotate_bytes) < 0 ||
	    auditlog_config_set_rotate_age_s(ac, c->audit_rotate_age_s) < 0 ||
	    auditlog_config_set_enospc_deadline_ms(ac, c->audit_enospc_deadline_ms) < 0 ||
	    auditlog_config_set_backend(ac, c->audit_backend) < 0 ||
	    auditlog_config_set_full_policy(ac, c->audit_queue_eagain ? AUDITLOG_FULL_EAGAIN
								   : AUDITLOG_FULL_BLOCK) < 0 ||
	    auditlog_config_set_async_coalesce_us(ac, c->audit_async_coalesce_us) < 0 ||
	    auditlog_config_set_max_batch_bytes(ac, TOK_AUDIT_BATCH_BYTES) < 0 ||
	    (c->audit_drop_behind_set &&
	     auditlog_config_set_drop_behind_bytes(ac, c->audit_drop_behind_bytes) < 0) ||
	    (c->audit_worker_cpus && auditlog_config_set_worker_cpus(ac, c->audit_worker_cpus) < 0)) {
		snprintf(err, errlen, "%s: an audit setting is out of range", c->path);
		rv = CKR_ARGUMENTS_BAD;
		goto out;
	}
	if (c->audit_format_version == 2 && c->audit_sealer_socket) {
		/* the keys are the sealer's; a lost sealer fails the log closed */
		r = auditlog_config_set_sealer_socket(ac, c->audit_sealer_socket);
		if (r == 0 && c->audit_checkpoint_set)
			r = auditlog_config_set_checkpoint_interval(ac, c->audit_checkpoint_records,
								    c->audit_checkpoint_ms);
		if (r < 0) {
			snprintf(err, errlen, "%s: the sealer settings are refused: %s", c->path, strerror(-r));
			goto refused;
		}
	} else if (c->audit_format_version == 2) {
		r = seal_files_check(c, err, errlen);
		if (r == -ENOMEM) {
			rv = CKR_HOST_MEMORY;
			goto out;
		}
		if (r == 0)
			r = auditlog_config_set_sealing(ac, c->audit_seal_state, c->audit_signing_key);
		if (r == 0 && c->audit_checkpoint_set)
			r = auditlog_config_set_checkpoint_interval(ac, c->audit_checkpoint_records,
								    c->audit_checkpoint_ms);
		if (r < 0) {
			if (!err[0])
				snprintf(err, errlen, "%s: the sealing settings are refused: %s", c->path,
					 strerror(-r));
			goto refused;
		}
	}
	for (unsigned i = 0; i < TOK_MAX_CHAINS; i++) {
		char *path;
		if (asprintf(&path, "%s/softtoken-%u.log", c->audit_dir, i) < 0) {
			rv = CKR_HOST_MEMORY;
			goto out;
		}
		r = chain_prepare(path, err, errlen);
		if (r == 0)
			r = auditlog_config_set_path(ac, path);
		if (r == 0)
			r = auditlog_open(ac, &tok_g.log);
		if (r == 0) {
			tok_g.log_path = path;
			tok_g.audit_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			tok_g.audit_rotations = 0;
			share_active();
			rv = CKR_OK;
			goto out;
		}
		free(tried);
		tried = path;
		/* The sealer is asked before the file is opened: its refusal
		 * (-EACCES) is told from a file not ours by the file itself. */
		if (c->audit_sealer_socket && r == -EACCES && (access(path, W_OK) == 0 || errno == ENOENT)) {
			sealer_refused = true;
			break;
		}
		/* Locked by a running process, or not ours to write (a file
		 * another user left, EACCES): the next name. */
		if (r == -EACCES)
			denied++;
		if (r != -EBUSY && r != -EACCES)
			break;
	}
	if (r == -EPERM && err[0])
		; /* chain_prepare said why */
	else if (sealer_refused)
		snprintf(err, errlen,
			 "the sealer at %s refuses this process (uid %u, gid %u): start auditlog-sealer with "
			 "--allow-uid or --allow-gid for it",
			 c->audit_sealer_socket, (unsigned)geteuid(), (unsigned)getegid());
	else if (c->audit_sealer_socket &&
		 (r == -ENOENT || r == -ECONNREFUSED || r == -ENOTCONN || r == -ETIMEDOUT || r == -EPROTO))
		snprintf(err, errlen, "cannot reach the sealer at %s: %s (is auditlog-sealer running?)",
			 c->audit_sealer_socket, strerror(-r));
	else if (c->audit_sealer_socket && r == -ESTALE)
		snprintf(err, errlen,
			 "the sealer at %s holds a sealing state below the last seal in %s (an older copy, or "
			 "another key): refused",
			 c->audit_sealer_socket, tried ? tried : c->audit_dir);
	else if (c->audit_sealer_socket && r == -ERANGE)
		snprintf(err, errlen, "the sealing key of the sealer at %s is exhausted", c->audit_sealer_socket);
	else if (c->audit_worker_cpus && r == -EINVAL)
		/* libauditlog's -EINVAL for either: say which setting may be it */
		snprintf(err, errlen,
			 "cannot open the audit log %s: %s; audit_worker_cpus = %s fails so when none of "
			 "its CPUs is one this process may run on, or when the kernel cannot confine "
			 "io_uring's threads (IORING_REGISTER_IOWQ_AFF, Linux 5.14; audit_backend = pwrite "
			 "needs no such call)",
			 tried ? tried : c->audit_dir, strerror(-r), c->audit_worker_cpus);
	else if (c->audit_format_version == 2 && r == -ESTALE)
		snprintf(err, errlen,
			 "the sealing state %s is at an epoch below the last seal in %s (an older copy put in "
			 "its place?): refused",
			 c->audit_seal_state, tried ? tried : c->audit_dir);
	else if (c->audit_format_version == 2 && r == -ERANGE)
		snprintf(err, errlen, "the sealing key of %s is exhausted (its last epoch has passed)",
			 c->audit_seal_state);
	else if (c->audit_format_version == 2 && !c->audit_sealer_socket &&
		 (r == -EINVAL || r == -EFBIG || r == -EPERM || r == -ELOOP))
		snprintf(err, errlen,
			 "cannot open the audit log %s with the sealing state %s and the signing key %s: %s "
			 "(not both of auditlog-keygen's format and of one host, or a file refused)",
			 tried ? tried : c->audit_dir, c->audit_seal_state, c->audit_signing_key, strerror(-r));
	else if (r == -EBUSY || r == -EACCES)
		snprintf(err, errlen, "all %u audit chains in %s are in use (%u not writable by us)", TOK_MAX_CHAINS,
			 c->audit_dir, denied);
	else
		snprintf(err, errlen, "cannot open the audit log in %s: %s%s", c->audit_dir, strerror(-r),
			 r == -EBADMSG ? " (damage beyond the repair bound: run auditlog-verify)" : "");
refused:
	if (!c->audit_fail_closed) {
		/* Said, counted, and the module runs without a trail. */
		atomic_fetch_add(&tok_g.audit_errors, 1);
		rv = CKR_OK;
	} else if (r == -EBADMSG) {
		/* Tamper or damage found at open: the module runs, every
		 * audited call answers CKR_DEVICE_ERROR. */
		atomic_store(&tok_g.audit_failed, true);
		rv = CKR_OK;
	}
out:
	free(tried);
	auditlog_config_free(ac);
	return rv;
}

CK_RV tok_audit_close(void)
{
	int r = auditlog_close(tok_g.log);

	if (tok_g.audit_fd >= 0)
		close(tok_g.audit_fd);
	tok_g.audit_fd = -1;
	tok_g.log = NULL;
	free(tok_g.log_path);
	tok_g.log_path = NULL;
	return r < 0 ? CKR_DEVICE_ERROR : CKR_OK;
}

CK_RV tok_audit_gate(void)
{
	if (atomic_load_explicit(&tok_g.audit_failed, memory_order_relaxed))
		return CKR_DEVICE_ERROR;
	return CKR_OK;
}

bool tok_audit_unrecorded(void)
{
	if (tok_audit_gate() == CKR_OK)
		return false;
	atomic_fetch_add(&tok_g.unrecorded, 1);
	return true;
}

/* After a rotation the active file is another one, made 0600 by
 * libauditlog: reopened by name, and in a shared audit_dir made 0660 with
 * the rotated files that missed it (share_active, share_rotated). Only
 * with rotation configured; without, the file never changes and no stats
 * are read (a lock and ~40 counters, cold after a key generation's search).
 * A deleted trail is libauditlog's to find: the first batch written after
 * the deletion fails, and with it the log (-ENOENT). */
static void reshare_rotated(void)
{
	struct auditlog_stats st;

	if (!tok_g.cfg.audit_rotate_bytes && !tok_g.cfg.audit_rotate_age_s)
		return;
	pthread_mutex_lock(&tok_g.audit_mu);
	if (tok_g.audit_fd >= 0 && auditlog_get_stats(tok_g.log, &st, sizeof(st)) == 0 &&
	    st.rotations != tok_g.audit_rotations) {
		int fd = open(tok_g.log_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0) {
			close(tok_g.audit_fd);
			tok_g.audit_fd = fd;
			tok_g.audit_rotations = st.rotations;
			share_active();
			share_rotated();
		}
	}
	pthread_mutex_unlock(&tok_g.audit_mu);
}

/* Why the log failed, said at the first error, in the words of libauditlog's errors
 * (auditlog.h, docs/durability.md "When the disk fails"). -ENOENT from an
 * in-process sealing log may be its sealing state as well as its file: the
 * library alone knows which, and the token does not guess. */
static void trail_failed(int r)
{
	const char *path = tok_g.log_path;
	const char *then = tok_g.cfg.audit_fail_closed ? "failing closed"
						       : "audit_fail_closed is off: going on without a trail";

	if (r == -ENOENT && tok_g.cfg.audit_format_version == 2 && !tok_g.cfg.audit_sealer_socket)
		tok_msg("the audit log %s, or its sealing state %s, was deleted while the token ran: %s",
			path, tok_g.cfg.audit_seal_state, then);
	else if (r == -ENOENT)
		tok_msg("the audit log %s (or its directory) was deleted while the token ran: %s", path,
			then);
	else if (r == -ENODATA)
		tok_msg("the audit log %s was truncated while the token ran (logrotate's copytruncate? "
			"docs/siem.md): %s",
			path, then);
	else
		tok_msg("the audit log %s failed: %s: %s", path, strerror(-r), then);
}

static int64_t coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *actor_of(const struct tok_token *t)
{
	switch (t ? t->login : TOK_PUBLIC) {
	case TOK_USER:
		return "user";
	case TOK_SO:
		return "so";
	default:
		return "public";
	}
}

CK_RV tok_audit_write(const struct tok_audit *a)
{
	const struct tok_token *t = a->s ? a->s->tok : a->tok;
	struct auditlog_event ev = {
		.flags = AUDITLOG_EV_RV,
		.outcome = a->rv == CKR_OK || a->handed_out ? AUDITLOG_OUTCOME_SUCCESS
							    : AUDITLOG_OUTCOME_FAILURE,
		.rv = a->rv,
		.action = a->action,
		.action_len = strlen(a->action),
		.key_label = a->key_label,
		.key_label_len = a->key_label_len,
		.key_id = a->key_id,
		.key_id_len = a->key_id_len,
		.key2_label = a->key2_label,
		.key2_label_len = a->key2_label_len,
		.key2_id = a->key2_id,
		.key2_id_len = a->key2_id_len,
		.detail = a->detail,
		.detail_len = a->detail ? strlen(a->detail) : 0,
	};
	bool sync;
	int r;

	if (!tok_g.log) {
		/* Audit off, or the log could not open and we fail closed. */
		return tok_g.cfg.audit_enabled ? tok_audit_gate() : CKR_OK;
	}
	ev.actor = a->actor ? a->actor : actor_of(t);
	ev.actor_len = strlen(ev.actor);
	if (t) {
		ev.flags |= AUDITLOG_EV_SLOT;
		ev.slot = t->id;
	}
	if (a->s) {
		ev.flags |= AUDITLOG_EV_SESSION;
		ev.session = a->s->handle;
	}
	if (a->has_mech) {
		ev.flags |= AUDITLOG_EV_MECHANISM;
		ev.mechanism = a->mech;
	}
	if (a->key2_label_len || a->key2_id_len)
		ev.flags |= AUDITLOG_EV_KEY2;
	switch (tok_g.cfg.audit_sync) {
	case TOK_SYNC_ALL:
		sync = true;
		break;
	case TOK_SYNC_NONE:
		sync = false;
		break;
	default:
		sync = a->kind == TOK_AUD_SENSITIVE;
	}
	if (!sync) {
		/* Queued records: rotations looked for at most every 100 ms. */
		int64_t now = coarse_ms(), last = atomic_load(&tok_g.audit_checked_ms);
		if (now - last >= 100 && atomic_compare_exchange_strong(&tok_g.audit_checked_ms, &last, now))
			reshare_rotated();
		r = auditlog_record(tok_g.log, &ev);
	} else {
		r = auditlog_record_sync(tok_g.log, &ev);
		if (r == 0)
			reshare_rotated();
	}
	if (r == 0)
		return CKR_OK;
	if (atomic_fetch_add(&tok_g.audit_errors, 1) == 0)
		trail_failed(r);
	if (!tok_g.cfg.audit_fail_closed)
		return CKR_OK;
	atomic_store(&tok_g.audit_failed, true);
	return CKR_DEVICE_ERROR;
}

/* An object's CKA_LABEL and CKA_ID (at most 256 bytes each), under its lock. */
struct obj_names {
	char label[256];
	uint8_t id[256];
	size_t label_len, id_len;
};

static void obj_names(struct tok_object *o, struct obj_names *n)
{
	const struct tok_attr *l, *id;

	n->label_len = n->id_len = 0;
	if (!o)
		return;
	pthread_mutex_lock(&o->mu);
	l = tok_attrs_get(&o->attrs, CKA_LABEL);
	id = tok_attrs_get(&o->attrs, CKA_ID);
	n->label_len = l ? (l->len < sizeof(n->label) ? l->len : sizeof(n->label)) : 0;
	n->id_len = id ? (id->len < sizeof(n->id) ? id->len : sizeof(n->id)) : 0;
	if (n->label_len)
		memcpy(n->label, l->value, n->label_len);
	if (n->id_len)
		memcpy(n->id, id->value, n->id_len);
	pthread_mutex_unlock(&o->mu);
}

CK_RV tok_audit_obj(struct tok_audit *a, struct tok_object *o)
{
	struct obj_names k1, k2;
	CK_RV rv;

	if (!o && !a->first)
		return tok_audit_write(a);
	/* one lock at a time: the two may be one object */
	obj_names(a->first ? a->first : o, &k1);
	obj_names(a->first ? o : NULL, &k2);
	a->key_label = k1.label;
	a->key_label_len = k1.label_len;
	a->key_id = k1.id;
	a->key_id_len = k1.id_len;
	a->key2_label = k2.label;
	a->key2_label_len = k2.label_len;
	a->key2_id = k2.id;
	a->key2_id_len = k2.id_len;
	rv = tok_audit_write(a);
	a->key_label = a->key2_label = NULL;
	a->key_id = a->key2_id = NULL;
	a->key_label_len = a->key2_label_len = a->key_id_len = a->key2_id_len = 0;
	return rv;
}
