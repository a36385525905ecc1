/* SPDX-License-Identifier: MIT */
/*
 * Verification engine (see verify.h). Uses the format layer of libauditlog
 * (al_parse, al_check_hash, al_emit): there is no second copy of the format.
 * jansson only tells a non-canonical JSON line from garbage.
 *
 * How a finding gets its one class: a record that chains from the one before
 * it (seq +1, hash recomputes) is verified. A record that does not is held
 * back for one record: the record after it says what happened (it chains
 * from the held record: that record was altered in place, or a gap precedes
 * it; it chains from the record before the held one: the held record was
 * inserted, or swapped with it). docs/format.md section 11 has the table.
 */
#define OPENSSL_SUPPRESS_DEPRECATED 1 /* SHA256_Init/Update/Final: see chain.c */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "checkpoint.h"
#include "recovery.h"
#include "seal.h"
#include "verify.h"

static const char *const class_names[AL_V__MAX] = {
	[AL_V_MODIFIED] = "modified",       [AL_V_INSERTED] = "inserted",
	[AL_V_DELETED] = "deleted",         [AL_V_DUPLICATED] = "duplicated",
	[AL_V_REORDERED] = "reordered",     [AL_V_NONCANONICAL] = "non-canonical",
	[AL_V_UNPARSEABLE] = "unparseable", [AL_V_VERSION] = "version",
	[AL_V_MISSING_FILE] = "missing-file", [AL_V_FORKED] = "forked",
	[AL_V_TRUNCATED] = "truncated",     [AL_V_RECOVERED] = "recovered",
	[AL_V_UNANCHORED] = "unanchored",   [AL_V_EXTRA_CHAIN] = "extra-chain",
	[AL_V_BAD_SEAL] = "bad-seal",       [AL_V_GAP] = "gap",
	[AL_V_UNSEALED] = "unsealed",       [AL_V_UNKNOWN_KEY] = "unknown-key",
	[AL_V_CLOCK] = "clock",             [AL_V_UNSIGNED_TAIL] = "unsigned-tail",
	[AL_V_BAD_CHECKPOINT] = "bad-checkpoint", [AL_V_MISSING_CHAIN] = "missing-chain",
	[AL_V_REWRITTEN] = "rewritten",     [AL_V_SHIPPER_DUPLICATE] = "shipper-duplicate",
	[AL_V_SAME_FILE] = "same-file",
};

static const uint8_t zero_hash[AL_HASH_LEN];

const char *al_vclass_name(enum al_vclass c)
{
	return c < AL_V__MAX ? class_names[c] : "?";
}

bool al_vclass_is_integrity(enum al_vclass c, bool strict)
{
	switch (c) {
	case AL_V_RECOVERED:
	case AL_V_GAP:
		return strict;
	case AL_V_CLOCK:
	case AL_V_UNSIGNED_TAIL:
	case AL_V_SHIPPER_DUPLICATE:
	case AL_V_SAME_FILE:
		return false; /* notices (docs/format.md 23) */
	default:
		return true;
	}
}

/* ---- files and their headers ---------------------------------------------- */

struct vfile {
	const char *path;
	const char *base;
	int fd;          /* opened once: the header and the walk see the same inode */
	uint64_t size;
	bool has_header; /* line 1 parses as a header */
	uint8_t hdr_version;
	bool hdr_ok;     /* ...and hashes from its own link (a chain's first: from zeros, seq 0) */
	char chain_id[33];
	bool has_prev;
	bool sealed_prev; /* reason io-error: the predecessor counts up to prev_size only */
	char file_id[33];
	bool has_sealed;  /* names a file sealed with nothing durable in it (sealed_*) */
	char sealed_name[1025], sealed_fid[33];
	bool sealed_branch; /* that file: never acknowledged, not walked, not a finding */
	bool torn_header; /* all it holds is a torn first header (recovered, not walked) */
	bool primary;    /* its chain's first file */
	bool side;       /* off the chain's own path (a second first file, a fork's other
			  * branch): walked for its own findings, counted nowhere */
	int fork_of;     /* it continues this file, which another file continues too; -1 */
	dev_t dev;       /* identity when listed: a descriptor is (re)opened by path */
	ino_t ino;
	bool has_vrange; /* seqs of the records accepted in it */
	uint64_t vfirst, vlast;
	bool relink;      /* an altered header whose prev_name names no input */
	char prev_name[1025];
	uint64_t prev_seq, prev_size;
	uint8_t prev_hash[AL_HASH_LEN];
	uint64_t first_seq; /* the header's seq */
	bool skip;       /* wholly before --from: not read */
	int chain;       /* index into chains */
	int next;        /* successor (index), -1 */
	int prevf;       /* predecessor (index), -1 */
	bool visited;
	uint64_t limit;  /* bytes to verify (a sealed file: up to prev_size of its successor) */
	bool has_end;    /* a trusted successor continues from end_seq */
	uint64_t end_seq;
	/* what the walk saw */
	uint64_t lines, walked, findings;
	uint64_t base_line, base_off; /* a stream's segment: lines and bytes before it (files: 0) */
	uint64_t counted; /* bytes reported to on_progress */
	bool partial;    /* ended inside a line (reported) */
	/* --follow */
	bool follow;     /* the chain's head: tailed */
	bool stopped;    /* the tail ended on a stop request */
	bool told_deleted; /* its deletion reported */
	struct vfile *more; /* files met while following (freed at the end) */
};

struct vctx {
	const struct al_vopts *o;
	struct al_vresult *res;
	bool sha_ni; /* al_sha256_ni_ok(), asked once: a v2 block's leaves two at a time */
	struct vfile *files;
	unsigned n, cap_files; /* cap_files: room for files taken in (take_in_renamed) */
	uint8_t *dec, *work, *line2;
	uint64_t total_bytes, done_bytes; /* progress */
	/* expect-head and from bookkeeping */
	const struct al_vanchor *anch; /* --expect-head: o->anchors, or `one` */
	unsigned nanch;
	struct al_vanchor one;
	uint8_t *anch_seen; /* [anchor * chain_cap + chain]: 0 not met, 1 another hash, 2 its hash */
	unsigned chain_cap;
	bool saw_from;
	bool past_from; /* a record at or after --from was seen */
	struct vfile *cur; /* the file being walked: its findings are counted */
	struct vfile *follow_next; /* --follow: the file that replaced the one tailed */
	struct vfile *more;        /* every file met while following */
	const char *follow_path;   /* the writer's active path */
	char follow_id[33];        /* --follow: the chain tailed ("": none told by a header) */
	int follow_chain;          /* ...its index into res->chain */
	char *names;               /* renamed paths, for the messages (a list: next at the start) */
	struct al_vpool *pool;     /* workers checking ahead (made for the first large file) */
	bool no_pool;              /* none to be made */
	unsigned *order;           /* files by chain, then first seq: the walk's order */
	unsigned *by_base, n_by_base; /* the first n_by_base files by base name (by_base_index) */
	struct al_vstream *stream; /* a stream's (find_bridge defers there), NULL for files */
	/* v2: one key walk per verification key (holds its seed: wiped); the
	 * earliest t0 of them as a timestamp (records from then on must be v2) */
	struct al_seal_walk *swalk;
	struct al_seal_kmac *skmac; /* and the MAC key of its last epoch */
	bool has_t0;
	char t0_ts[AL_TS_LEN];
	bool gate; /* --emit with keys: v2 lines wait for their proofs */
};

static bool stopped(const struct vctx *c)
{
	return c->o->stop && *c->o->stop;
}

static void report(struct vctx *c, enum al_vclass cls, const char *file, uint64_t line, uint64_t off,
		   bool has_seq, uint64_t seq, const char *fmt, ...) __attribute__((format(printf, 8, 9)));

static void report(struct vctx *c, enum al_vclass cls, const char *file, uint64_t line, uint64_t off,
		   bool has_seq, uint64_t seq, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	int len = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (len >= (int)sizeof(msg)) {
		/* cut: never inside a UTF-8 sequence (the callback gets whole
		 * characters; ill-formed bytes from the log stay as they are) */
		size_t n = sizeof(msg) - 1, i = 0, at = 0, sub = 0, k = 0;
		while (i < n) {
			at = i;
			k = al_utf8_seq((const uint8_t *)msg + i, n - i, &sub);
			i += k ? k : sub;
		}
		if (!k && at + sub == n)
			msg[at] = 0; /* a character the cut left incomplete */
	}
	c->res->findings[cls]++;
	if (c->cur)
		c->cur->findings++;
	if (c->o->on_finding) {
		struct al_finding f = {.cls = cls, .file = file, .line = line, .offset = off,
				       .seq = seq, .has_seq = has_seq, .msg = msg};
		c->o->on_finding(c->o->ctx, &f);
	}
}

/* f has been read or taken up to offset `to`. */
static void progress(struct vctx *c, struct vfile *f, uint64_t to)
{
	if (to <= f->counted)
		return;
	c->done_bytes += to - f->counted;
	f->counted = to;
	if (c->o->on_progress)
		c->o->on_progress(c->o->ctx, c->done_bytes, c->total_bytes);
}

/* Parse line 1 of an open file as a header: the chain, the link, and whether
 * the header hashes from its own link (a header that does not is not trusted
 * for linking, limits or --from). */
static void parse_head(struct vctx *c, struct vfile *f, const uint8_t *buf, size_t n)
{
	struct al_parsed p;
	size_t off;
	uint8_t h[AL_HASH_LEN];

	const uint8_t *nl = memchr(buf, '\n', n);
	if (!nl || al_parse(buf, (size_t)(nl - buf), c->dec, &p, &off) != AL_PERR_OK ||
	    p.rec.type != AL_T_HEADER)
		return; /* no valid header: the walk reports why */
	f->has_header = true;
	f->hdr_version = p.rec.version;
	f->first_seq = p.rec.f[AL_F_SEQ].u;
	memcpy(f->chain_id, p.rec.f[AL_F_CHAIN_ID].p, 32);
	f->chain_id[32] = 0;
	memcpy(f->file_id, p.rec.f[AL_F_FILE_ID].p, 32);
	f->file_id[32] = 0;
	if (p.rec.present & AL_BIT(AL_F_SEALED_NAME)) {
		f->has_sealed = true;
		snprintf(f->sealed_name, sizeof(f->sealed_name), "%.*s", (int)p.rec.f[AL_F_SEALED_NAME].n,
			 p.rec.f[AL_F_SEALED_NAME].p);
		memcpy(f->sealed_fid, p.rec.f[AL_F_SEALED_FILE_ID].p, 32);
		f->sealed_fid[32] = 0;
	}
	if (p.rec.present & AL_BIT(AL_F_PREV_NAME)) {
		f->has_prev = true;
		f->sealed_prev = p.rec.f[AL_F_REASON].n == 8 &&
				 memcmp(p.rec.f[AL_F_REASON].p, "io-error", 8) == 0;
		snprintf(f->prev_name, sizeof(f->prev_name), "%.*s", (int)p.rec.f[AL_F_PREV_NAME].n,
			 p.rec.f[AL_F_PREV_NAME].p);
		f->prev_seq = p.rec.f[AL_F_PREV_SEQ].u;
		f->prev_size = p.rec.f[AL_F_PREV_SIZE].u;
		(void)al_unhex(p.rec.f[AL_F_PREV_HASH].p, 64, f->prev_hash);
	}
	f->hdr_ok = al_check_hash(&p, buf, f->has_prev ? f->prev_hash : zero_hash, c->work, h) &&
		    (f->has_prev ? f->first_seq == f->prev_seq + 1 : f->first_seq == 0);
}

/* f's descriptor, opened when it is not: never through a symlink, never a
 * FIFO or device (O_NONBLOCK: opening one does not wait for a writer), and
 * the inode listed (a file replaced since is -ESTALE). Descriptors are
 * closed when the walk is done with a file (close_fd), so any number of
 * files verify in a bounded number of them. */
static int vfile_fd(struct vfile *f)
{
	struct stat st;
	int fd;

	if (f->fd >= 0)
		return f->fd;
	fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	int r = fstat(fd, &st) < 0 ? -errno : !S_ISREG(st.st_mode) ? -EINVAL :
		f->ino && (st.st_ino != f->ino || st.st_dev != f->dev) ? -ESTALE : 0;
	if (r < 0) {
		close(fd);
		return r;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->fd = fd;
	return fd;
}

static void close_fd(struct vfile *f)
{
	if (f && f->fd >= 0 && !f->follow) {
		close(f->fd);
		f->fd = -1;
	}
}

/* Open f, learn its size and parse its header; the descriptor is closed
 * again unless keep (a file being followed). */
static int read_head(struct vctx *c, struct vfile *f, bool keep)
{
	struct stat st;
	uint8_t buf[AL_LINE_MAX];
	ssize_t n;
	int fd = vfile_fd(f);

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return -errno;
	f->size = (uint64_t)st.st_size;
	n = pread(fd, buf, sizeof(buf), 0);
	if (n < 0)
		return -errno;
	parse_head(c, f, buf, (size_t)n);
	f->torn_header = !f->has_header && f->size < AL_LINE_MAX && (uint64_t)n == f->size &&
			 al_torn_first_header(buf, f->size);
	if (!keep) {
		close(f->fd);
		f->fd = -1;
	}
	return 0;
}

/* ---- walking one file -------------------------------------------------------- */

#define RING AL_VRING
/* The walk's read buffer: a line longer than this is checked in pieces of
 * this size (each one unparseable line); a stream does the same. */
#define WALK_BUF (1u << 20)

/* A record that did not chain, held until the next record says why. */
struct pend {
	bool on;
	size_t len;
	uint64_t lineno, off;
	uint8_t computed[AL_HASH_LEN]; /* its hash recomputed from the record before it */
	struct al_parsed p;            /* strings in dec */
	uint8_t line[AL_LINE_MAX];
	uint8_t dec[AL_LINE_MAX];
};

/* A walk's v2 state (docs/format.md 18-20). */
struct v2w {
	bool any;        /* a v2 record accepted */
	bool tree_ok;    /* range is the tree of tree_first .. the last record */
	uint64_t tree_first;
	struct al_merkle_range range;
	unsigned *wn, nwn, wcur; /* witnessed notes of the chain, by size; the next one */
	bool seal_known; /* the chain's previous seal is known (or that it has none) */
	bool have_seal;
	uint64_t seal_seq;
	uint32_t seal_epoch;
	char seal_kind[8];
	char seal_key[2 * AL_SEAL_KID_LEN]; /* its seal_key (hex): a change is a re-key (17.4) */
	/* records after the last seal / checkpoint: their count and the first one */
	uint64_t since_seal, us_line, us_off, us_seq;
	const char *us_file;
	char us_ts[AL_TS_LEN];
	uint64_t since_ckpt, ut_line, ut_off, ut_seq;
	const char *ut_file;
	bool ut_close, ut_mac; /* the first of them is a close seal with no finding; its MAC verified */
	/* --emit with keys: the verified lines waiting for their proofs */
	uint8_t *pend;
	size_t plen, pcap, sealed_to, signed_to, pend_before;
	size_t pend_since_seal; /* bytes of pend added after the last seal */
	/* where the chain stood right after its last seal (files only): a v2
	 * crash's damage starts there, and the complete records written after
	 * it were never acknowledged (docs/format.md 19.5), so a recovery record
	 * naming that place takes them back */
	struct {
		bool on;
		struct vfile *f;
		uint64_t end, lineno; /* offset just past the seal's line, its line */
		struct al_tailrec t;
		uint64_t records, events, res_records, since_ckpt, ut_line, ut_off, ut_seq;
		const char *ut_file;
		bool ut_close, ut_mac;
		bool tree_ok;
		struct al_merkle_range range; /* only range.n hashes copied */
	} snap;
};

struct walk {
	struct vctx *c;
	bool side; /* a file off the chain's path: findings only (ch is `scratch`) */
	struct al_vchain scratch;
	struct vfile *f;  /* the file being walked */
	struct vfile *pf; /* the file walked before it in this chain, NULL at a start */
	struct al_vchain *ch;
	/* the chain state: the next record must have seq `next` and hash from `prev` */
	uint8_t prev[AL_HASH_LEN];
	uint64_t next;
	bool have_next;
	char last_ts[AL_TS_LEN]; /* of the last verified record */
	bool have_ts;
	unsigned last_version;
	uint8_t last_type; /* the type of the record the chain goes on from */
	struct v2w v2;
	/* recent records, to tell a duplicate from an insertion */
	uint64_t ring_seq[RING];
	uint64_t ring_off[RING]; /* where the line is, to compare its bytes when needed */
	uint32_t ring_len[RING];
	struct vfile *ring_file[RING];
	uint8_t *ring_copy; /* a stream (no file to read back): RING lines of AL_LINE_MAX */
	unsigned ring_n;
	uint64_t cur_off; /* file offset of the line being checked */
	/* a damaged region waiting for a recovery record that names it */
	bool damage;
	uint64_t damage_off, damage_line, damage_lines, damage_seqs;
	SHA256_CTX damage_sha;  /* the damaged bytes so far */
	SHA256_CTX damage_nonl; /* the same without the last line's '\n' (the writer adds
				 * one when the damage does not end in one) */
	enum al_vclass damage_cls;
	char damage_msg[320];
	uint64_t absorbed; /* records the damage just reported held: their seqs are skipped next */
	/* crash damage that a recovery record further on repairs (find_bridge):
	 * the lines up to it are the damage, the record at bridge_at repairs it */
	bool bridge;
	uint64_t bridge_at, bridge_off, bridge_line, bridge_len;
	/* recovery records seen ahead (line offset, damage_offset), for the next
	 * damage; the file is known to hold no other before rscan_to */
	uint64_t rscan_to;
	unsigned rcn;
	uint64_t rc_off[64], rc_dmg[64];
	struct pend x;
	/* a record found ahead of its place (reported reordered): where it is
	 * missing later is no second finding */
	bool moved;
	uint64_t moved_seq, moved_line, moved_off, moved_e;
	const char *moved_file;
	uint8_t moved_hash[AL_HASH_LEN];
};

/* The record held as `moved` was not missing at its place: it was inserted. */
static void moved_inserted(struct walk *w)
{
	if (!w->moved)
		return;
	w->moved = false;
	report(w->c, AL_V_INSERTED, w->moved_file, w->moved_line, w->moved_off, true, w->moved_seq,
	       "a record that is not part of the chain (seq %" PRIu64 " expected; seq %" PRIu64
	       " is not missing at its place)", w->moved_e, w->moved_seq);
}

/* Recent records: seq and where their line is. Only a record whose seq
 * goes back needs the bytes of the earlier one: read back from the file
 * then (nothing is hashed or copied for the records that chain). A stream
 * cannot read back: its lines are copied (line NULL: a block the workers
 * took, never in a stream). */
static void remember(struct walk *w, uint64_t seq, const uint8_t *line, uint64_t off, size_t len)
{
	unsigned i = w->ring_n++ % RING;
	w->ring_seq[i] = seq;
	w->ring_off[i] = off;
	w->ring_len[i] = (uint32_t)len;
	w->ring_file[i] = w->f;
	if (w->ring_copy && line)
		memcpy(w->ring_copy + (size_t)i * AL_LINE_MAX, line, len);
}

/* 0 seq never seen, 1 seen with other content, 2 the same line again */
static int seen(const struct walk *w, uint64_t seq, const uint8_t *line, size_t len)
{
	unsigned n = w->ring_n < RING ? w->ring_n : RING;
	uint8_t old[AL_LINE_MAX];
	int r = 0;
	for (unsigned i = 0; i < n; i++) {
		if (w->ring_seq[i] != seq)
			continue;
		bool same = false;
		if (w->ring_len[i] == len && w->ring_copy) {
			same = memcmp(w->ring_copy + (size_t)i * AL_LINE_MAX, line, len) == 0;
		} else if (w->ring_len[i] == len) {
			struct vfile *rf = w->ring_file[i];
			int fd = vfile_fd(rf); /* an earlier file's is opened again */
			same = fd >= 0 && pread(fd, old, len, (off_t)w->ring_off[i]) == (ssize_t)len &&
			       memcmp(old, line, len) == 0;
			if (rf != w->f)
				close_fd(rf);
		}
		r = same ? 2 : r ? r : 1;
	}
	return r;
}

/* What a JSON object line says it is, from jansson's reading: " (seq N,
 * type "T", action "A")" with what it has (the action cut at 64 bytes), for
 * the finding's message. */
static void describe(json_t *j, char *out, size_t cap)
{
	json_t *seq = json_object_get(j, "seq"), *type = json_object_get(j, "type"),
	       *action = json_object_get(j, "action");
	const char *sep = " (";
	size_t n = 0;

	out[0] = 0;
	if (json_is_integer(seq)) {
		n += (size_t)snprintf(out + n, cap - n, "%sseq %" JSON_INTEGER_FORMAT, sep, json_integer_value(seq));
		sep = ", ";
	}
	if (json_is_string(type) && n < cap) {
		n += (size_t)snprintf(out + n, cap - n, "%stype \"%.16s\"", sep, json_string_value(type));
		sep = ", ";
	}
	if (json_is_string(action) && n < cap)
		n += (size_t)snprintf(out + n, cap - n, "%saction \"%.64s\"", sep, json_string_value(action));
	if (n && n < cap)
		snprintf(out + n, cap - n, ")");
}

/* Not a canonical line: JSON (jansson, duplicate keys refused) or not? The
 * fields a JSON object carries are described into `fields`. */
static enum al_vclass classify_unparsed(const uint8_t *line, size_t len, enum al_perr e, char *fields,
					size_t cap)
{
	json_error_t err;
	json_t *j;

	fields[0] = 0;
	if (e == AL_PERR_VERSION)
		return AL_V_VERSION;
	j = json_loadb((const char *)line, len,
		       JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL, &err);
	if (!j) /* a duplicated key is JSON all the same, just never canonical */
		return json_error_code(&err) == json_error_duplicate_key ? AL_V_NONCANONICAL
									 : AL_V_UNPARSEABLE;
	size_t end = (size_t)err.position; /* JSON allows whitespace after the object */
	while (end < len && (line[end] == ' ' || line[end] == '\t' || line[end] == '\r' || line[end] == '\n'))
		end++;
	bool obj = json_is_object(j) && end == len;
	if (obj)
		describe(j, fields, cap);
	json_decref(j);
	return obj ? AL_V_NONCANONICAL : AL_V_UNPARSEABLE;
}

static void v2_break(struct walk *w);

static void flush_damage(struct walk *w)
{
	if (!w->damage)
		return;
	w->damage = false;
	v2_break(w);
	if (w->c->o->has_from && !w->c->past_from) /* before the checkpoint: verified then */
		return;
	report(w->c, w->damage_cls, w->f->path, w->damage_line, w->damage_off, w->have_next,
	       w->have_next ? w->next : 0, "%s%s", w->damage_msg,
	       w->damage_lines > 1 ? " (and the lines after it, up to the next valid record)" : "");
	/* the records the damage held: one a line, more when a '\n' was lost */
	w->absorbed = w->damage_seqs;
}

static bool chains_from(struct walk *w, const struct al_parsed *p, const uint8_t *line,
			const uint8_t prev[AL_HASH_LEN])
{
	uint8_t h[AL_HASH_LEN];
	return al_check_hash(p, line, prev, w->c->work, h);
}

/* The chain goes on from record p (seq `seq`) with hash h. ref: p's timestamp
 * and version become the reference for the next records (not for a record
 * whose content is known to be altered). */
static void follow(struct walk *w, const struct al_parsed *p, const uint8_t h[AL_HASH_LEN], uint64_t seq,
		   bool ref)
{
	memcpy(w->prev, h, AL_HASH_LEN);
	w->next = seq + 1;
	w->have_next = true;
	w->last_type = p->rec.type;
	if (ref) {
		memcpy(w->last_ts, p->rec.f[AL_F_TIMESTAMP].p, AL_TS_LEN);
		w->have_ts = true;
		w->last_version = p->rec.version;
	}
}

static void vrange(struct vfile *f, uint64_t seq)
{
	if (!f->has_vrange) {
		f->has_vrange = true;
		f->vfirst = seq;
	}
	f->vlast = seq;
}

/* Record seq (hash h) of the walk's chain against every anchor. */
static void meet_anchors(struct walk *w, uint64_t seq, const uint8_t h[AL_HASH_LEN])
{
	struct vctx *c = w->c;
	unsigned ch = (unsigned)(w->ch - c->res->chain);

	for (unsigned k = 0; k < c->nanch; k++) {
		if (c->anch[k].seq != seq)
			continue;
		uint8_t *m = &c->anch_seen[(size_t)k * c->chain_cap + ch];
		*m = CRYPTO_memcmp(h, c->anch[k].hash, AL_HASH_LEN) == 0 ? 2 : 1;
	}
}

/* ---- v2: seals, the tree, checkpoints, witnesses (docs/format.md 19-23) ----- */


/* The id of the chain being walked (32 hex digits), NULL when none is known. */
static const char *walk_chain_id(const struct walk *w)
{
	if (w->ch->chain_id[0])
		return w->ch->chain_id;
	return w->f && w->f->chain_id[0] ? w->f->chain_id : NULL;
}

/* --emit with keys: verified v2 lines wait until the proofs the verifier has
 * cover them (a seal whose MAC verified with --verify-key, a checkpoint
 * whose signature verified with --pubkey). Lines up to `upto` go out. */
static void pend_release(struct walk *w, size_t upto)
{
	struct v2w *v = &w->v2;
	const uint8_t *p = v->pend, *end = v->pend + upto;

	while (p < end) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		w->c->o->on_record(w->c->o->ctx, p, (size_t)(nl - p));
		p = nl + 1;
	}
	memmove(v->pend, v->pend + upto, v->plen - upto);
	v->plen -= upto;
	v->sealed_to = v->sealed_to > upto ? v->sealed_to - upto : 0;
	v->signed_to = v->signed_to > upto ? v->signed_to - upto : 0;
}

static void pend_progress(struct walk *w)
{
	const struct al_vopts *o = w->c->o;
	struct v2w *v = &w->v2;
	size_t upto = v->plen;

	if (o->n_vkeys && v->sealed_to < upto)
		upto = v->sealed_to;
	if (o->n_pubkeys && v->signed_to < upto)
		upto = v->signed_to;
	if (upto)
		pend_release(w, upto);
}

/* A proof failed: what waits is never passed on. */
static void pend_drop(struct walk *w)
{
	struct v2w *v = &w->v2;
	v->plen = v->sealed_to = v->signed_to = v->pend_since_seal = 0;
}

static void pend_add(struct walk *w, const uint8_t *line, size_t len)
{
	struct v2w *v = &w->v2;

	if (v->plen + len + 1 > v->pcap) {
		size_t cap = v->pcap ? v->pcap : 65536;
		while (cap < v->plen + len + 1)
			cap *= 2;
		uint8_t *p = realloc(v->pend, cap);
		if (!p) { /* nothing is passed on that was not proven: drop it */
			pend_drop(w);
			return;
		}
		v->pend = p;
		v->pcap = cap;
	}
	memcpy(v->pend + v->plen, line, len);
	v->pend[v->plen + len] = '\n';
	v->plen += len + 1;
	v->pend_since_seal += len + 1;
}

/* The walk's v2 state is no longer known (damage, a record with a finding):
 * the tree and the seal sequence resynchronise from the next tree or
 * checkpoint record and the next seal. */
static void v2_break(struct walk *w)
{
	w->v2.tree_ok = false;
	w->v2.seal_known = false;
}

static int cmp_wsize(const void *a, const void *b, void *arg)
{
	const struct al_vwnote *n = arg;
	uint64_t x = n[*(const unsigned *)a].size, y = n[*(const unsigned *)b].size;
	return x < y ? -1 : x > y;
}

/* The witnessed notes of this walk's chain, by size (once, when its tree is
 * first known). */
static void witness_collect(struct walk *w)
{
	const struct al_vopts *o = w->c->o;
	const char *id = walk_chain_id(w);
	struct v2w *v = &w->v2;

	if (v->wn || !o->n_witness || !id)
		return;
	v->wn = malloc(o->n_witness * sizeof(*v->wn));
	if (!v->wn)
		return;
	for (unsigned i = 0; i < o->n_witness; i++)
		if (!o->witness[i].skipped && strcmp(o->witness[i].chain_id, id) == 0)
			v->wn[v->nwn++] = i;
	qsort_r(v->wn, v->nwn, sizeof(*v->wn), cmp_wsize, o->witness);
}

/* The tree now holds range.size leaves: the witnessed notes of that size
 * must have its root; those of smaller sizes were passed while the tree was
 * not known (after damage: not compared). */
static void witness_meet(struct walk *w, const char *path, uint64_t lineno, uint64_t off, uint64_t seq)
{
	struct v2w *v = &w->v2;
	struct al_vwnote *wl = w->c->o->witness;

	while (v->wcur < v->nwn && wl[v->wn[v->wcur]].size <= v->range.size) {
		struct al_vwnote *n = &wl[v->wn[v->wcur++]];
		uint8_t root[AL_HASH_LEN];
		if (n->met || n->skipped)
			continue;
		if (n->size < v->range.size || al_merkle_range_root(&v->range, root) < 0) {
			n->skipped = true;
			continue;
		}
		n->met = true;
		if (CRYPTO_memcmp(root, n->root, AL_HASH_LEN) != 0)
			report(w->c, AL_V_REWRITTEN, path, lineno, off, true, seq,
			       "%s (note %u) witnessed chain %s at size %" PRIu64 " with another root than the "
			       "chain's tree of that size (records %" PRIu64 "..%" PRIu64 "): they were rewritten",
			       n->src, n->index, n->chain_id, n->size, v->tree_first, seq);
	}
}

/* A checkpoint's members without its note: the tree record's members. */
static size_t tree_part(const struct al_v2_member *m, size_t n, struct al_v2_member *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (m[i].tag != AL_TAG_NOTE)
			out[k++] = m[i];
	return k;
}

static const struct al_v2_member *member(const struct al_v2_member *m, size_t n, uint8_t tag)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].tag == tag)
			return &m[i];
	return NULL;
}

/* Is the checkpoint's note signed, for tree t, by one of the public keys?
 * 0 yes, -ENOKEY no key of its chain's host, -EBADMSG no. */
static int checkpoint_signed(struct walk *w, const struct al_v2_member *m, size_t n,
			     const struct al_v2_tree_state *t, const char *id)
{
	const struct al_vopts *o = w->c->o;
	int r = -ENOKEY;

	for (unsigned k = 0; k < o->n_pubkeys; k++) {
		uint8_t origin[AL_ORIGIN_MAX];
		long ol = al_checkpoint_origin(o->pubkeys[k].host, o->pubkeys[k].host_len, (const uint8_t *)id,
					       origin);
		if (ol < 0)
			continue;
		if (al_v2_checkpoint_check(m, n, t, origin, (size_t)ol, o->pubkeys[k].key) == 0)
			return 0;
		r = -EBADMSG;
	}
	return r;
}

/* A tree or checkpoint record at seq (the chain state before it: w->prev). */
static void v2_tree_record(struct walk *w, const struct al_parsed *p, const struct al_v2_member *m, size_t n,
			   uint64_t seq, uint64_t lineno, uint64_t off, bool clean)
{
	struct vctx *c = w->c;
	struct v2w *v = &w->v2;
	const char *path = w->f->path, *id = walk_chain_id(w);
	bool ckpt = p->rec.type == AL_T_CHECKPOINT;
	struct al_v2_member tm[AL_V2_MEMBERS_MAX];
	size_t tn = tree_part(m, n, tm);
	struct al_v2_tree_state t = {0};
	const char *what = ckpt ? "checkpoint" : "tree record";

	if (!v->tree_ok) {
		/* not known here (the walk started inside the chain, or after
		 * damage): this record's own tree, if it is one, is taken up */
		const struct al_v2_member *sz = member(m, n, AL_TAG_SIZE), *fs = member(m, n, AL_TAG_FIRST_SEQ),
					  *rg = member(m, n, AL_TAG_RANGE);
		uint8_t hashes[AL_MERKLE_RANGE_MAX][AL_HASH_LEN];
		if (!clean || !sz || !fs || !rg || fs->u > seq || sz->u != seq - fs->u || rg->n / 64 > AL_MERKLE_RANGE_MAX ||
		    al_unhex(rg->p, rg->n, hashes[0]) != 0 ||
		    al_merkle_range_set(&v->range, sz->u, hashes[0], rg->n / 64) != 0)
			return;
		v->tree_ok = true;
		v->tree_first = fs->u;
		witness_collect(w);
		while (v->wcur < v->nwn && c->o->witness[v->wn[v->wcur]].size < v->range.size)
			c->o->witness[v->wn[v->wcur++]].skipped = true;
	}
	t.first_seq = v->tree_first;
	t.size = seq - v->tree_first;
	memcpy(t.head, w->prev, AL_HASH_LEN);
	if (t.size == 0 || al_merkle_range_root(&v->range, t.root) < 0) {
		if (clean)
			report(c, AL_V_BAD_CHECKPOINT, path, lineno, off, true, seq,
			       "a %s at the tree's first leaf (it covers no record)", what);
		pend_drop(w);
		return;
	}
	if (!clean)
		return;
	int r = al_v2_tree_check(tm, tn, &t);
	if (r != 0) {
		report(c, AL_V_BAD_CHECKPOINT, path, lineno, off, true, seq,
		       "a %s whose size, first seq or range are not the chain's (the tree of records %" PRIu64
		       "..%" PRIu64 ": size %" PRIu64 ")", what, t.first_seq, seq - 1, t.size);
		pend_drop(w);
		return;
	}
	if (!ckpt || !c->o->n_pubkeys)
		return;
	r = id ? checkpoint_signed(w, m, n, &t, id) : -ENOKEY;
	if (r == 0) {
		c->res->checkpoints_checked++;
		v->signed_to = v->pend_before; /* the records before it (not itself) */
		return;
	}
	report(c, AL_V_BAD_CHECKPOINT, path, lineno, off, true, seq, "%s",
	       r == -ENOKEY ? "a checkpoint, and no public key of its chain's host was given (its origin names "
			      "another host)"
			    : "a checkpoint whose note is not signed by the public key, or is not exactly the "
			      "chain's tree (origin, size, root, seq, head, first-seq)");
	pend_drop(w);
}

/* The verification key a seal names, or NULL. */
static int seal_key_of(const struct vctx *c, const struct al_v2_member *kid)
{
	char hex[2 * AL_SEAL_KID_LEN];
	for (unsigned k = 0; k < c->o->n_vkeys; k++) {
		al_hex(c->o->vkeys[k].p.key_id, AL_SEAL_KID_LEN, hex);
		if (kid && kid->n == sizeof(hex) && memcmp(kid->p, hex, sizeof(hex)) == 0)
			return (int)k;
	}
	return -1;
}

/* A seal record (docs/format.md 19.3, 19.4). */
static void v2_seal(struct walk *w, const struct al_parsed *p, const struct al_v2_member *m, size_t n, uint64_t seq,
		    uint64_t lineno, uint64_t off, bool clean)
{
	struct vctx *c = w->c;
	struct v2w *v = &w->v2;
	const char *path = w->f->path, *id = walk_chain_id(w);
	const struct al_v2_member *kind = member(m, n, AL_TAG_KIND), *ep = member(m, n, AL_TAG_EPOCH),
				  *kid = member(m, n, AL_TAG_SEAL_KEY), *cid = member(m, n, AL_TAG_CHAIN_ID),
				  *ps = member(m, n, AL_TAG_PREV_SEAL), *pk = member(m, n, AL_TAG_PREV_KIND),
				  *pkey = member(m, n, AL_TAG_PREV_KEY);
	const uint8_t *ts = p->rec.f[AL_F_TIMESTAMP].p;
	uint32_t epoch = ep ? (uint32_t)ep->u : 0;
	bool is_open = kind && kind->n == 4 && memcmp(kind->p, "open", 4) == 0, bad = false;
	char kname[8] = "";

	if (kind && kind->n < sizeof(kname))
		memcpy(kname, kind->p, kind->n);
	c->res->seals++;
	w->ch->seals++;
	if (!clean || !kind || !ep || !kid || !cid)
		goto take; /* reported already: the sequence goes on from it, unchecked */
	if (id && (cid->n != 32 || memcmp(cid->p, id, 32) != 0)) {
		report(c, AL_V_BAD_SEAL, path, lineno, off, true, seq,
		       "a seal of chain %.32s in chain %s (spliced from another chain?)", (const char *)cid->p, id);
		bad = true;
	} else if (c->o->n_vkeys) {
		int k = seal_key_of(c, kid);
		if (k < 0 && pkey) {
			report(c, AL_V_UNKNOWN_KEY, path, lineno, off, true, seq,
			       "the chain is re-keyed here, from key %.16s to key %.16s, and no verification key "
			       "of %.16s was given: give the new verification key (the auditor's, out of band); "
			       "the seals from here on are not checked", (const char *)pkey->p,
			       (const char *)kid->p, (const char *)kid->p);
			bad = true;
		} else if (k < 0) {
			report(c, AL_V_UNKNOWN_KEY, path, lineno, off, true, seq,
			       "a seal by key %.16s, which is not a verification key given (its MAC is not checked)",
			       (const char *)kid->p);
			bad = true;
		} else {
			uint32_t got = 0;
			int r = al_v2_seal_check_cached(&c->swalk[k], &c->skmac[k], c->o->vkeys[k].p.key_id, cid->p,
							w->prev, seq, (const char *)ts, m, n, &got);
			if (r != 0) {
				report(c, AL_V_BAD_SEAL, path, lineno, off, true, seq,
				       "the seal's MAC does not verify with key %.16s (epoch %" PRIu32
				       "): the records it covers or the seal were altered, or it was made without the "
				       "key of its epoch", (const char *)kid->p, epoch);
				bad = true;
			} else {
				const struct al_vkey *vk = &c->o->vkeys[k];
				c->res->seals_checked++;
				v->ut_mac = v->ut_close && v->ut_seq == seq;
				/* clock: the records this seal covers against its epoch's window */
				uint64_t lo = vk->p.t0 + (uint64_t)epoch * vk->p.delta, hi = lo + 2 * vk->p.delta;
				lo = lo >= vk->p.delta ? lo - vk->p.delta : 0;
				uint64_t first = v->since_seal ? al_ts_ns(v->us_ts) : al_ts_ns(ts), last = al_ts_ns(ts);
				if (first < lo || last > hi)
					report(c, AL_V_CLOCK, first < lo ? v->us_file : path, first < lo ? v->us_line : lineno,
					       first < lo ? v->us_off : off, true, first < lo ? v->us_seq : seq,
					       "a timestamp more than one epoch outside the epoch of its seal (epoch %" PRIu32
					       " at line %" PRIu64 ")", epoch, lineno);
			}
		}
	}
	bool rekey = false;
	if (!bad && v->seal_known && v->have_seal) {
		/* the key changes only at an open seal whose prev_key names the
		 * previous seal's key (docs/format.md 17.4, 19.4) */
		bool same = kid->n == sizeof(v->seal_key) && memcmp(kid->p, v->seal_key, sizeof(v->seal_key)) == 0;
		if (!same && !(is_open && pkey && pkey->n == sizeof(v->seal_key) &&
			       memcmp(pkey->p, v->seal_key, sizeof(v->seal_key)) == 0)) {
			report(c, AL_V_BAD_SEAL, path, lineno, off, true, seq,
			       "a seal under key %.16s after one under key %.16s (seq %" PRIu64 ") %s: a chain changes "
			       "key only at an open seal that names the previous key (a re-key, docs/format.md 17.4)",
			       (const char *)kid->p, v->seal_key, v->seal_seq,
			       pkey ? "whose prev_key names another key" : "without the re-key mark (prev_key)");
			bad = true;
		} else if (same && pkey) {
			report(c, AL_V_BAD_SEAL, path, lineno, off, true, seq,
			       "a re-key mark (prev_key %.16s) on a seal under the same key as the seal before it "
			       "(seq %" PRIu64 ")", (const char *)pkey->p, v->seal_seq);
			bad = true;
		}
		rekey = !same;
	}
	if (!bad && v->seal_known && rekey) {
		/* two keys' epochs are not comparable: their times are, with both keys */
		char ohex[2 * AL_SEAL_KID_LEN];
		const struct al_vkey *ok = NULL, *nk = NULL;
		for (unsigned k = 0; k < c->o->n_vkeys; k++) {
			al_hex(c->o->vkeys[k].p.key_id, AL_SEAL_KID_LEN, ohex);
			if (memcmp(ohex, v->seal_key, sizeof(ohex)) == 0)
				ok = &c->o->vkeys[k];
			if (memcmp(ohex, kid->p, sizeof(ohex)) == 0)
				nk = &c->o->vkeys[k];
		}
		if (!ps || ps->u != v->seal_seq || !pk || pk->n != strlen(v->seal_kind) ||
		    memcmp(pk->p, v->seal_kind, pk->n) != 0) {
			report(c, AL_V_BAD_SEAL, path, lineno, off, true, seq,
			       "an open seal that does not name the chain's previous seal (seq %" PRIu64 ", %s)",
			       v->seal_seq, v->seal_kind);
			bad = true;
		} else if (ok && nk && (ok->p.host_len != nk->p.host_len ||
					memcmp(ok->p.host, nk->p.host, ok->p.host_len) != 0)) {
			report(c, AL_V_BAD_SEAL, path, lineno, off, true, seq,
			       "a re-key from key %.16s of host %.*s to key %.16s of another host, %.*s: a re-key "
			       "keeps the host (docs/format.md 17.4)", v->seal_key, (int)ok->p.host_len,
			       (const char *)ok->p.host, (const char *)kid->p, (int)nk->p.host_len,
			       (const char *)nk->p.host);
			bad = true;
		} else if (ok && nk && strcmp(v->seal_kind, "close") != 0) {
			typedef unsigned __int128 u128;
			u128 old_end = (u128)ok->p.t0 + ((u128)v->seal_epoch + 1) * ok->p.delta;
			u128 new_start = (u128)nk->p.t0 + (u128)epoch * nk->p.delta;
			uint64_t slack = ok->p.delta > nk->p.delta ? ok->p.delta : nk->p.delta;
			if (new_start > old_end + slack)
				report(c, AL_V_GAP, path, lineno, off, true, seq,
				       "a re-key after a %s seal (seq %" PRIu64 ", key %.16s epoch %" PRIu32 "): %" PRIu64
				       " s without a seal between the old key's last epoch and the new key's first (a "
				       "writer that stopped, e.g. on a lost sealing state, or an unclean restart)",
				       v->seal_kind, v->seal_seq, v->seal_key, v->seal_epoch,
				       (uint64_t)((new_start - old_end) / 1000000000u));
		}
	} else if (!bad && v->seal_known) {
		if (v->have_seal && epoch < v->seal_epoch) {
			report(c, AL_V_BAD_SEAL, path, lineno, off, true, seq,
			       "the seal's epoch %" PRIu32 " is below the epoch %" PRIu32 " of the seal before it (seq %"
			       PRIu64 ")", epoch, v->seal_epoch, v->seal_seq);
			bad = true;
		} else if (is_open && v->have_seal &&
			   (!ps || ps->u != v->seal_seq || !pk || pk->n != strlen(v->seal_kind) ||
			    memcmp(pk->p, v->seal_kind, pk->n) != 0)) {
			report(c, AL_V_BAD_SEAL, path, lineno, off, true, seq,
			       "an open seal that does not name the chain's previous seal (seq %" PRIu64 ", %s)",
			       v->seal_seq, v->seal_kind);
			bad = true;
		} else if (is_open && !v->have_seal && ps) {
			report(c, AL_V_BAD_SEAL, path, lineno, off, true, seq,
			       "an open seal that names a previous seal (seq %" PRIu64 "), but the chain has none",
			       ps->u);
			bad = true;
		} else if (v->have_seal && epoch > v->seal_epoch + 1u && strcmp(v->seal_kind, "close") != 0) {
			report(c, AL_V_GAP, path, lineno, off, true, seq,
			       "%s seal of epoch %" PRIu32 " after a %s seal of epoch %" PRIu32 " (seq %" PRIu64 "): "
			       "%s", is_open ? "an open" : "a", epoch, v->seal_kind, v->seal_epoch, v->seal_seq,
			       is_open ? "an unclean restart (a crash, or the tail cut at a seal)"
				    : "epochs without a seal while the log was open");
		}
	}
	if (bad && v->ut_seq == seq)
		v->ut_close = false; /* (its finding says what it is) */
	if (bad)
		pend_drop(w);
	else if (c->o->n_vkeys)
		v->sealed_to = v->plen;
take:
	v->have_seal = true;
	v->seal_known = clean && !bad;
	v->seal_seq = seq;
	v->seal_epoch = epoch;
	snprintf(v->seal_kind, sizeof(v->seal_kind), "%s", kname);
	if (kid && kid->n == sizeof(v->seal_key))
		memcpy(v->seal_key, kid->p, sizeof(v->seal_key));
	else
		memset(v->seal_key, 0, sizeof(v->seal_key));
	v->since_seal = 0;
}

/* n records, from line `lineno` (at off, seq), join the run since the last
 * checkpoint (close: the first is a close seal), and the run since the last
 * seal (ts: the first's timestamp): the first of a run is what its finding
 * names (v2_end). v2_record() adds records one at a time, take_v2() a block
 * at once. */
static void v2_unckpt(struct walk *w, uint64_t n, bool close, uint64_t lineno, uint64_t off,
		      uint64_t seq)
{
	struct v2w *v = &w->v2;

	if (!v->since_ckpt) {
		v->ut_file = w->f->path;
		v->ut_line = lineno;
		v->ut_off = off;
		v->ut_seq = seq;
		v->ut_close = close;
		v->ut_mac = false;
	}
	v->since_ckpt += n;
}

static void v2_unsealed(struct walk *w, uint64_t n, uint64_t lineno, uint64_t off, uint64_t seq,
			const void *ts)
{
	struct v2w *v = &w->v2;

	if (!v->since_seal) {
		v->us_file = w->f->path;
		v->us_line = lineno;
		v->us_off = off;
		v->us_seq = seq;
		memcpy(v->us_ts, ts, AL_TS_LEN);
	}
	v->since_seal += n;
}

/* Every v2 record the walk accepts into the chain (before the chain state
 * moves on to it: w->prev is the record before). h: the hash it carries. */
static void v2_record(struct walk *w, const struct al_parsed *p, const uint8_t h[AL_HASH_LEN], uint64_t seq,
		      uint64_t lineno, uint64_t off, bool clean)
{
	struct v2w *v = &w->v2;
	struct al_v2_member m[AL_V2_MEMBERS_MAX];
	size_t n = 0;
	uint8_t type = p->rec.type;

	if (!v->any) {
		/* the chain's first v2 record: leaf 0 of its tree, when the walk
		 * knows it is (the chain seen from seq 0, or right after v0/v1).
		 * A v2 line with a finding does not make a chain v2 (a bit flip
		 * of a v1 line's "v"). */
		if (!clean)
			return;
		v->any = true;
		bool start = seq == 0 || (w->have_ts && w->last_version < AL_V2);
		v->tree_ok = v->seal_known = clean && start;
		v->tree_first = seq;
		al_merkle_range_init(&v->range);
		if (v->tree_ok)
			witness_collect(w);
	}
	if (!clean)
		v2_break(w);
	if (type == AL_T_SEAL || type == AL_T_TREE || type == AL_T_CHECKPOINT)
		n = al_v2_record_members(&p->rec, m);
	if (type == AL_T_TREE || type == AL_T_CHECKPOINT)
		v2_tree_record(w, p, m, n, seq, lineno, off, clean);
	if (type == AL_T_CHECKPOINT) {
		w->c->res->checkpoints++;
		w->ch->checkpoints++;
		v->since_ckpt = 0;
	} else {
		const struct al_v2_member *kind = type == AL_T_SEAL ? member(m, n, AL_TAG_KIND) : NULL;
		v2_unckpt(w, 1, clean && kind && kind->n == 5 && memcmp(kind->p, "close", 5) == 0,
			  lineno, off, seq);
	}
	if (type == AL_T_SEAL)
		v2_seal(w, p, m, n, seq, lineno, off, clean);
	else
		v2_unsealed(w, 1, lineno, off, seq, p->rec.f[AL_F_TIMESTAMP].p);
	if (v->tree_ok) {
		if (al_merkle_range_append(&v->range, h) < 0)
			v->tree_ok = false;
		else if (v->nwn)
			witness_meet(w, w->f->path, lineno, off, seq);
		if (v->range.size > w->ch->tree_size)
			w->ch->tree_size = v->range.size;
	}
	pend_progress(w);
}

/* The walk of a chain ends: complete records after its last seal, and after
 * its last checkpoint (with a public key). follow_stop: a live log's lines
 * after the last seal are pending, not a finding. */
static void v2_end(struct walk *w)
{
	struct vctx *c = w->c;
	struct v2w *v = &w->v2;
	bool live = w->f && w->f->stopped;

	if (v->any && v->since_seal && !live)
		report(c, AL_V_UNSEALED, v->us_file, v->us_line, v->us_off, true, v->us_seq,
		       "%" PRIu64 " complete record(s) after the chain's last seal (seq %" PRIu64 "..%" PRIu64
		       "): never sealed (a crash's unacknowledged lines, or lines appended)", v->since_seal,
		       v->us_seq, v->us_seq + v->since_seal - 1);
	if (v->any && c->o->n_pubkeys && v->since_ckpt == 1 && v->ut_close)
		/* a clean close: the close seal follows the last checkpoint
		 * (docs/format.md 19.2); it is unsigned, counted as such */
		report(c, AL_V_UNSIGNED_TAIL, v->ut_file, v->ut_line, v->ut_off, true, v->ut_seq,
		       "1 record after the chain's last checkpoint: the close seal (seq %" PRIu64 "), not covered "
		       "by a signature; %s", v->ut_seq, v->ut_mac ? "its MAC verified with the verification key" :
		       "covered by its MAC, which only a verification key checks (--verify-key)");
	else if (v->any && c->o->n_pubkeys && v->since_ckpt)
		report(c, AL_V_UNSIGNED_TAIL, v->ut_file, v->ut_line, v->ut_off, true, v->ut_seq,
		       "%" PRIu64 " record(s) after the chain's last checkpoint (seq %" PRIu64 " on): not covered "
		       "by a signature", v->since_ckpt, v->ut_seq);
	if (v->any && c->o->n_pubkeys && v->since_ckpt) {
		c->res->unsigned_tail += v->since_ckpt;
		w->ch->unsigned_tail += v->since_ckpt;
	}
	for (size_t i = 0; i < v->plen; i++) /* (pend is NULL while nothing waits) */
		c->res->pending += v->pend[i] == '\n';
	free(v->pend);
	free(v->wn);
	memset(v, 0, sizeof(*v));
}

/* The lowest version a record must have: --min-version, and 2 for a record
 * dated at or after a verification key's t0. *by_key: the key's rule. */
static unsigned min_version_of(const struct vctx *c, const struct al_parsed *p, bool *by_key)
{
	*by_key = c->has_t0 && c->o->min_version < AL_V2 &&
		  memcmp(p->rec.f[AL_F_TIMESTAMP].p, c->t0_ts, AL_TS_LEN) >= 0;
	return *by_key ? AL_V2 : c->o->min_version;
}

/* May crash damage start here, after the record the chain is at, for
 * find_bridge (and a stream's hold)? Not while a finding is still being
 * settled, nor before --from's record. */
static bool bridge_may(const struct walk *w)
{
	return w->have_next && w->next && !w->x.on && !w->damage && !w->moved && !w->bridge &&
	       !(w->c->o->has_from && !w->c->past_from);
}

static void stream_hold(struct al_vstream *s, uint64_t d, uint64_t lineno);

/* After a seal the walk accepted: where a v2 crash's damage may start. A
 * stream instead holds the lines after the seal (stream_hold). */
static void v2_snapshot(struct walk *w, const struct al_parsed *p, const uint8_t h[AL_HASH_LEN],
			uint64_t end, uint64_t lineno)
{
	struct v2w *v = &w->v2;

	v->pend_since_seal = 0;
	if (w->c->stream) {
		/* a stream cannot read back what it accepted: it holds the lines
		 * after this one unchecked until it knows what they are */
		if (bridge_may(w))
			stream_hold(w->c->stream, end, lineno + 1);
		return;
	}
	v->snap.on = true;
	v->snap.f = w->f;
	v->snap.end = end;
	v->snap.lineno = lineno;
	v->snap.t.seq = p->rec.f[AL_F_SEQ].u;
	memcpy(v->snap.t.hash, h, AL_HASH_LEN);
	memcpy(v->snap.t.ts, p->rec.f[AL_F_TIMESTAMP].p, AL_TS_LEN);
	v->snap.t.version = p->rec.version;
	v->snap.t.type = p->rec.type;
	v->snap.records = w->ch->records;
	v->snap.events = w->ch->events;
	v->snap.res_records = w->c->res->records;
	v->snap.since_ckpt = v->since_ckpt;
	v->snap.ut_file = v->ut_file;
	v->snap.ut_line = v->ut_line;
	v->snap.ut_off = v->ut_off;
	v->snap.ut_seq = v->ut_seq;
	v->snap.ut_close = v->ut_close;
	v->snap.ut_mac = v->ut_mac;
	v->snap.tree_ok = v->tree_ok;
	if (v->tree_ok) {
		v->snap.range.size = v->range.size;
		v->snap.range.n = v->range.n;
		memcpy(v->snap.range.h, v->range.h, (size_t)v->range.n * AL_HASH_LEN);
	}
}

static bool file_sha(void *ctx, uint64_t off, uint64_t len, uint8_t out[AL_HASH_LEN]);
static int file_byte(void *ctx, uint64_t off);
static void v2_restore(struct walk *w);
static void accept(struct walk *w, const struct al_parsed *p, const uint8_t h[AL_HASH_LEN],
		   const uint8_t *line, size_t len, uint64_t seq, uint64_t off, uint64_t lineno, bool clean,
		   bool ref);

/* A recovery record whose damage starts right after the chain's last seal,
 * while the walk has accepted complete records after that seal: those were
 * never acknowledged, and the writer's open counted them into the damage
 * (docs/format.md 19.5). When the record repairs exactly that (recovery.c's
 * rule, from the seal), the walk goes back to the seal and on from the
 * record; true then. A line that passed --emit without keys cannot be taken
 * back (only gated lines wait). */
static bool v2_rollback(struct walk *w, const struct al_parsed *p, const uint8_t *line, size_t len,
			uint64_t lineno, uint64_t off)
{
	struct vctx *c = w->c;
	struct v2w *v = &w->v2;
	uint64_t seq = p->rec.f[AL_F_SEQ].u;

	if (!v->snap.on || w->side || v->snap.f != w->f || !w->have_next || seq >= w->next ||
	    seq != v->snap.t.seq + 1 || p->rec.f[AL_F_DAMAGE_OFFSET].u != v->snap.end || w->f->fd < 0 ||
	    (c->gate && v->pend_since_seal > v->plen))
		return false;
	struct al_recovery_io io = {.sha = file_sha, .byte = file_byte, .ctx = w->f};
	if (!al_recovery_repairs(p, line, off, v->snap.end, &v->snap.t, &io, c->work))
		return false;
	uint64_t taken = w->next - seq;
	v2_restore(w);
	report(c, AL_V_RECOVERED, w->f->path, v->snap.lineno + 1, v->snap.end, true, seq,
	       "crash damage of %" PRIu64 " bytes repaired by the writer (recovery record at line %" PRIu64
	       "); it holds %" PRIu64 " complete record(s) after the last seal, never acknowledged",
	       p->rec.f[AL_F_DAMAGE_LENGTH].u, lineno, taken);
	accept(w, p, p->hash, line, len, seq, off, lineno, true, true);
	return true;
}

/* The walk goes back to where it stood after the chain's last seal (its
 * counts, tree, lines waiting for --emit): what it accepted since was part
 * of crash damage (v2_rollback, find_bridge). The chain state proper moves
 * on from the recovery record that repairs it. */
static void v2_restore(struct walk *w)
{
	struct vctx *c = w->c;
	struct v2w *v = &w->v2;

	w->ch->records = v->snap.records;
	w->ch->events = v->snap.events;
	c->res->records = v->snap.res_records;
	v->since_seal = 0;
	v->since_ckpt = v->snap.since_ckpt;
	v->ut_file = v->snap.ut_file;
	v->ut_line = v->snap.ut_line;
	v->ut_off = v->snap.ut_off;
	v->ut_seq = v->snap.ut_seq;
	v->ut_close = v->snap.ut_close;
	v->ut_mac = v->snap.ut_mac;
	v->tree_ok = v->snap.tree_ok;
	if (v->tree_ok) {
		v->range.size = v->snap.range.size;
		v->range.n = v->snap.range.n;
		memcpy(v->range.h, v->snap.range.h, (size_t)v->range.n * AL_HASH_LEN);
	}
	if (c->gate) {
		v->plen -= v->pend_since_seal;
		if (v->sealed_to > v->plen)
			v->sealed_to = v->plen;
		if (v->signed_to > v->plen)
			v->signed_to = v->plen;
	}
	v->pend_since_seal = 0;
	w->damage = false;
	w->x.on = false;
}

static void accept(struct walk *w, const struct al_parsed *p, const uint8_t h[AL_HASH_LEN],
		   const uint8_t *line, size_t len, uint64_t seq, uint64_t off, uint64_t lineno, bool clean,
		   bool ref)
{
	bool v2 = p->rec.version >= AL_V2 && !w->side;

	w->v2.pend_before = w->v2.plen;
	if (clean && w->c->o->on_record && !w->side) {
		if (v2 && w->c->gate)
			pend_add(w, line, len);
		else
			w->c->o->on_record(w->c->o->ctx, line, len);
	}
	if (v2)
		v2_record(w, p, h, seq, lineno, off, clean);
	else if (!clean && !w->side)
		v2_break(w); /* (a v1 line in a v2 chain: a downgrade) */
	w->absorbed = 0;
	if (w->moved && seq >= w->moved_seq)
		moved_inserted(w);
	follow(w, p, h, seq, ref);
	remember(w, p->rec.f[AL_F_SEQ].u, line, off, len);
	struct al_vchain *ch = w->ch;
	if (!ch->records) {
		ch->first_seq = seq;
		memcpy(ch->first_ts, p->rec.f[AL_F_TIMESTAMP].p, AL_TS_LEN);
		ch->min_version = ch->max_version = p->rec.version;
	}
	ch->records++;
	ch->events += p->rec.type == AL_T_EVENT;
	ch->last_seq = seq;
	memcpy(ch->head_hash, h, AL_HASH_LEN);
	memcpy(ch->last_ts, p->rec.f[AL_F_TIMESTAMP].p, AL_TS_LEN);
	if (p->rec.version < ch->min_version)
		ch->min_version = p->rec.version;
	if (p->rec.version > ch->max_version)
		ch->max_version = p->rec.version;
	if (clean)
		vrange(w->f, seq);
	if (w->side)
		return;
	w->c->res->records++;
	meet_anchors(w, seq, h);
	if (v2 && clean && al_recovery_may_follow(p->rec.version, p->rec.type))
		v2_snapshot(w, p, h, off + len + 1, lineno); /* a seal, or a v2 file's header */
}

/* Does [a, b] hold the seq of an anchor other than the first (the one the
 * workers look out for)? */
static bool anchor_within(const struct vctx *c, uint64_t a, uint64_t b)
{
	for (unsigned k = 1; k < c->nanch; k++)
		if (c->anch[k].seq >= a && c->anch[k].seq <= b)
			return true;
	return false;
}

/* May the walk take a block of v2 events (the workers stop a block at any
 * other v2 record: seals, trees and checkpoints go through check_line)? As
 * v2_record would for each: the chain already v2, no --emit line waiting
 * for a proof, and no witnessed tree size met inside the block (witness_meet
 * names the record that completes it). */
static bool can_take_v2(const struct walk *w, const struct al_vblock *b)
{
	const struct v2w *v = &w->v2;
	if (!b->hashes || b->min_version < AL_V2 || (!w->side && !v->any) || w->c->gate)
		return false;
	return w->side || !v->tree_ok || v->wcur >= v->nwn ||
	       w->c->o->witness[v->wn[v->wcur]].size > v->range.size + b->lines;
}

/* Can the walk take block b in one step, as if each of its lines went
 * through check_line? Only from a settled state that ends at b's context
 * record, and when no line of b can be a finding here. */
static bool can_take(const struct walk *w, const struct al_vblock *b)
{
	const struct al_vopts *o = w->c->o;
	return b->lines && b->has_ctx && !w->x.on && !w->damage && !w->moved && !w->bridge && w->have_next &&
	       w->next == b->ctx_seq + 1 && memcmp(w->prev, b->ctx_hash, AL_HASH_LEN) == 0 &&
	       (!w->have_ts || (b->first_version >= w->last_version &&
				memcmp(b->first_ts, w->last_ts, AL_TS_LEN) >= 0)) &&
	       !(o->has_from && !w->c->past_from) && !(w->f->has_end && b->last_seq > w->f->end_seq) &&
	       !anchor_within(w->c, b->first_seq, b->last_seq) &&
	       /* with a verification key, v1 records after its t0 are findings */
	       (b->max_version < AL_V2 ? !(w->c->has_t0 && memcmp(b->last_ts, w->c->t0_ts, AL_TS_LEN) >= 0)
				       : can_take_v2(w, b));
}

/* v2_record() for every line of a block of v2 events (can_take_v2), the
 * first at line `lineno`. */
static void take_v2(struct walk *w, const struct al_vblock *b, uint64_t lineno)
{
	struct v2w *v = &w->v2;

	v2_unckpt(w, b->lines, false, lineno, b->start, b->first_seq);
	v2_unsealed(w, b->lines, lineno, b->start, b->first_seq, b->first_ts);
	if (!v->tree_ok)
		return;
	if (al_merkle_range_append_n(&v->range, (const uint8_t (*)[AL_HASH_LEN])b->hashes, b->lines,
				     w->c->sha_ni) < 0)
		v->tree_ok = false;
	else if (v->range.size > w->ch->tree_size)
		w->ch->tree_size = v->range.size;
}

/* accept() for every line of block b, the first at line `lineno`. */
static void take_block(struct walk *w, const struct al_vblock *b, uint64_t lineno)
{
	struct vctx *c = w->c;
	struct al_vchain *ch = w->ch;

	w->absorbed = 0;
	memcpy(w->prev, b->last_hash, AL_HASH_LEN);
	w->next = b->last_seq + 1;
	memcpy(w->last_ts, b->last_ts, AL_TS_LEN);
	w->have_ts = true;
	w->last_version = b->last_version;
	for (uint64_t i = b->lines > RING ? b->lines - RING : 0; i < b->lines; i++) {
		unsigned k = (unsigned)(i % RING);
		remember(w, b->ring_seq[k], NULL, b->ring_off[k], b->ring_len[k]);
	}
	if (!ch->records) {
		ch->first_seq = b->first_seq;
		memcpy(ch->first_ts, b->first_ts, AL_TS_LEN);
		ch->min_version = ch->max_version = b->first_version;
	}
	ch->records += b->lines;
	ch->events += b->events;
	ch->last_seq = b->last_seq;
	memcpy(ch->head_hash, b->last_hash, AL_HASH_LEN);
	memcpy(ch->last_ts, b->last_ts, AL_TS_LEN);
	if (b->min_version < ch->min_version)
		ch->min_version = b->min_version;
	if (b->max_version > ch->max_version)
		ch->max_version = b->max_version;
	vrange(w->f, b->first_seq);
	vrange(w->f, b->last_seq);
	if (w->side)
		return;
	if (b->min_version >= AL_V2)
		take_v2(w, b, lineno);
	c->res->records += b->lines;
	c->res->taken += b->lines;
	if (b->has_expect)
		meet_anchors(w, c->anch[0].seq, b->expect_hash);
}

/* Would record p hash as stored if its seq were `seq`, from w->prev? (Its
 * seq alone was altered.) */
static bool chains_with_seq(struct walk *w, const struct al_parsed *p, uint64_t seq)
{
	struct al_record r = p->rec;
	struct al_emit_out eo;
	r.f[AL_F_SEQ].u = seq;
	r.plain = 0;
	return al_emit(&r, w->prev, w->c->line2, w->c->work, &eo) > 0 &&
	       CRYPTO_memcmp(eo.hash, p->hash, AL_HASH_LEN) == 0;
}

/* The held record stays where it is; the chain goes on from `carried` (its
 * own hash, or the one recomputed when its hash member was what changed). */
static void settle_in_place(struct walk *w, const uint8_t carried[AL_HASH_LEN])
{
	struct pend *x = &w->x;
	struct vctx *c = w->c;
	const char *path = w->f->path;
	uint64_t e = w->next, seq = x->p.rec.f[AL_F_SEQ].u;
	bool hash_member = CRYPTO_memcmp(carried, x->p.hash, AL_HASH_LEN) != 0;
	bool seq_altered = seq != e && chains_with_seq(w, &x->p, e);
	bool ref = false, by_key;

	x->on = false;
	if (x->p.rec.version < w->last_version)
		report(c, AL_V_VERSION, path, x->lineno, x->off, true, seq,
		       "format version decreases from %u to %u (a downgraded line)", w->last_version,
		       x->p.rec.version);
	else if (x->p.rec.version < min_version_of(c, &x->p, &by_key))
		report(c, AL_V_VERSION, path, x->lineno, x->off, true, seq, by_key ?
		       "format version %u, dated after the verification key's t0: records from then on must be v2" :
		       "format version %u is below --min-version %u", x->p.rec.version, c->o->min_version);
	else if (seq == e || seq_altered)
		report(c, AL_V_MODIFIED, path, x->lineno, x->off, true, e, "%s",
		       hash_member ? "its hash member was altered (the record hashes as the next one expects)" :
		       seq_altered ? "its seq was altered (the record hashes with the seq expected here)" :
				     "hash does not follow from the previous record");
	else if (seq < e) /* (not held: handled before) */
		report(c, AL_V_REORDERED, path, x->lineno, x->off, true, seq, "seq goes back");
	else if (w->f->has_end && seq > w->f->end_seq)
		report(c, AL_V_INSERTED, path, x->lineno, x->off, true, seq,
		       "seq %" PRIu64 " is beyond seq %" PRIu64 ", where the next file continues", seq,
		       w->f->end_seq);
	else if (w->moved && w->moved_seq == e && seq == e + 1 && chains_from(w, &x->p, x->line, w->moved_hash)) {
		/* the gap is the record seen ahead of its place: it was moved */
		w->moved = false;
		report(c, AL_V_REORDERED, w->moved_file, w->moved_line, w->moved_off, true, w->moved_seq,
		       "record %" PRIu64 " is ahead of its place (seq %" PRIu64 " expected; it is missing at "
		       "line %" PRIu64 ")", w->moved_seq, w->moved_e, x->lineno);
		accept(w, &x->p, carried, x->line, x->len, seq, x->off, x->lineno, true, true);
		return;
	} else {
		if (e)
			report(c, AL_V_DELETED, path, x->lineno, x->off, true, seq,
			       "seq jumps from %" PRIu64 " to %" PRIu64 ": %" PRIu64 " record(s) missing", e - 1,
			       seq, seq - e);
		else
			report(c, AL_V_DELETED, path, x->lineno, x->off, true, seq,
			       "the chain starts at seq %" PRIu64 ": %" PRIu64 " record(s) missing", seq, seq);
		ref = true; /* an intact record after a gap */
	}
	accept(w, &x->p, carried, x->line, x->len, seq_altered ? e : seq, x->off, x->lineno, false, ref);
}

static void settle_inserted(struct walk *w)
{
	struct pend *x = &w->x;
	uint64_t seq = x->p.rec.f[AL_F_SEQ].u;
	x->on = false;
	if (seq > w->next && seq - w->next < RING) {
		/* a record of the chain ahead of its place, or a forged one: which,
		 * shows when the walk gets there (reordered if it is missing there) */
		moved_inserted(w);
		w->moved = true;
		w->moved_seq = seq;
		w->moved_e = w->next;
		w->moved_file = w->f->path;
		w->moved_line = x->lineno;
		w->moved_off = x->off;
		memcpy(w->moved_hash, x->p.hash, AL_HASH_LEN);
		remember(w, seq, x->line, x->off, x->len);
		return;
	}
	report(w->c, AL_V_INSERTED, w->f->path, x->lineno, x->off, true, seq,
	       "a record that is not part of the chain: the next record follows the one before it");
	remember(w, x->p.rec.f[AL_F_SEQ].u, x->line, x->off, x->len);
}

/* No record follows the held one in this file: `hint` (the link in the next
 * file's header, or NULL) says what the chain continues from. */
static void settle_end(struct walk *w, const uint8_t *hint)
{
	struct pend *x = &w->x;
	if (!x->on)
		return;
	if (hint && CRYPTO_memcmp(hint, w->prev, AL_HASH_LEN) == 0 &&
	    CRYPTO_memcmp(hint, x->p.hash, AL_HASH_LEN) != 0)
		settle_inserted(w);
	else if (hint && CRYPTO_memcmp(hint, x->computed, AL_HASH_LEN) == 0)
		settle_in_place(w, x->computed);
	else
		settle_in_place(w, x->p.hash);
}

static void hold(struct walk *w, const struct al_parsed *p, const uint8_t *line, size_t len,
		 uint64_t lineno, uint64_t off)
{
	struct pend *x = &w->x;
	size_t eoff;
	memcpy(x->line, line, len);
	x->len = len;
	(void)al_parse(x->line, len, x->dec, &x->p, &eoff); /* parsed before: cannot fail */
	(void)al_check_hash(&x->p, x->line, w->prev, w->c->work, x->computed);
	x->lineno = lineno;
	x->off = off;
	x->on = true;
}

static bool find_bridge(struct walk *w, uint64_t lineno, uint64_t d, bool unparsed);

/* A record that parsed, nothing held before it. after_damage: damaged
 * lines were reported right before it. */
static void process(struct walk *w, const struct al_parsed *p, const uint8_t *line, size_t len,
		    uint64_t lineno, uint64_t off, bool after_damage)
{
	struct vctx *c = w->c;
	const char *path = w->f->path;
	uint64_t seq = p->rec.f[AL_F_SEQ].u;

	/* with dedup, a shipper's byte-identical repeat of a recent record is
	 * skipped whatever its type: a rotated file re-read from its start
	 * repeats its header too */
	if (c->o->dedup && w->have_next && seq < w->next && seen(w, seq, line, len) == 2) {
		report(c, AL_V_SHIPPER_DUPLICATE, path, lineno, off, true, seq,
		       "record seq %" PRIu64 " again, byte for byte (a shipper's repeat, skipped)", seq);
		return;
	}
	if (lineno > w->f->base_line + 1 && p->rec.type == AL_T_HEADER) {
		if (c->stream && w->have_next && seq < w->next) /* `cat audit.log*`: the active file first */
			report(c, AL_V_INSERTED, path, lineno, off, true, seq,
			       "a header in the middle of the stream, of a file that comes earlier in the "
			       "chain (seq %" PRIu64 " after %" PRIu64 "): are the files out of order? A rotated "
			       "set goes oldest first (cat NAME.*-* NAME)", seq, w->next - 1);
		else
			report(c, AL_V_INSERTED, path, lineno, off, true, seq, "a header in the middle of a file");
		remember(w, seq, line, off, len);
		return;
	}
	if (lineno == w->f->base_line + 1 && p->rec.type != AL_T_HEADER && !w->have_next) {
		report(c, AL_V_DELETED, path, lineno, off, true, seq, "the file does not start with its header");
		accept(w, p, p->hash, line, len, seq, w->cur_off, lineno, false, true);
		return;
	}
	if (!w->have_next) {
		/* no anchor: a file without a header that starts a walk, or damage
		 * where the chain would start. The record anchors what follows. */
		accept(w, p, p->hash, line, len, seq, w->cur_off, lineno, false, true);
		return;
	}
	uint64_t e = w->next;
	bool ok = chains_from(w, p, line, w->prev);
	if (!(seq == e && ok) && !after_damage && find_bridge(w, lineno, off, false))
		return; /* crash damage: repaired further on */
	if (seq == e && ok) {
		bool clean = false, by_key;
		if (p->rec.type == AL_T_RECOVERY && !after_damage)
			report(c, AL_V_INSERTED, path, lineno, off, true, seq,
			       "a recovery record, but no damaged bytes precede it (a forged crash repair?)");
		else if (w->f->has_end && seq > w->f->end_seq)
			report(c, AL_V_INSERTED, path, lineno, off, true, seq,
			       "seq %" PRIu64 " is beyond seq %" PRIu64 ", where the next file continues", seq,
			       w->f->end_seq);
		else if (w->have_ts && p->rec.version < w->last_version)
			report(c, AL_V_VERSION, path, lineno, off, true, seq,
			       "format version decreases from %u to %u", w->last_version, p->rec.version);
		else if (p->rec.version < min_version_of(c, p, &by_key))
			report(c, AL_V_VERSION, path, lineno, off, true, seq, by_key ?
			       "format version %u, dated after the verification key's t0: records from then on must "
			       "be v2" : "format version %u is below --min-version %u", p->rec.version,
			       c->o->min_version);
		else if (p->rec.type == AL_T_RECOVERY && after_damage &&
			 !al_recovery_may_follow((uint8_t)w->last_version, w->last_type))
			report(c, AL_V_INSERTED, path, lineno, off, true, seq,
			       "a v2 recovery record whose damage does not start right after a seal or the "
			       "file's header (docs/format.md 19.5: a committed batch ends with a seal)");
		else if (w->have_ts && memcmp(p->rec.f[AL_F_TIMESTAMP].p, w->last_ts, AL_TS_LEN) < 0)
			report(c, AL_V_REORDERED, path, lineno, off, true, seq, "timestamp goes back");
		else
			clean = true;
		accept(w, p, p->hash, line, len, seq, w->cur_off, lineno, clean, true);
		return;
	}
	if (seq < e && chains_with_seq(w, p, e)) { /* record e, its seq altered */
		report(c, AL_V_MODIFIED, path, lineno, off, true, e,
		       "its seq was altered (the record hashes with the seq expected here)");
		accept(w, p, p->hash, line, len, e, w->cur_off, lineno, false, false);
		return;
	}
	if (seq < e) {
		int s = seen(w, seq, line, len); /* (2 with dedup: skipped above) */
		if (s == 2)
			report(c, AL_V_DUPLICATED, path, lineno, off, true, seq, "record seq %" PRIu64 " appears again",
			       seq);
		else if (s == 1)
			report(c, AL_V_INSERTED, path, lineno, off, true, seq,
			       "a second, different record with seq %" PRIu64, seq);
		else
			report(c, AL_V_REORDERED, path, lineno, off, true, seq,
			       "seq goes back from %" PRIu64 " to %" PRIu64, e - 1, seq);
		/* the chain state stays where it was: the next record should follow it */
		return;
	}
	if (seq > e && seq - e <= w->absorbed) {
		/* the lines just reported as damaged held these seqs: no second finding */
		accept(w, p, p->hash, line, len, seq, w->cur_off, lineno, false, true);
		return;
	}
	hold(w, p, line, len, lineno, off); /* the next record tells what this one is */
}

/* A record follows a held one. Returns true when it was dealt with here. */
static bool settle_with(struct walk *w, const struct al_parsed *r, const uint8_t *line, size_t len,
			uint64_t lineno, uint64_t off)
{
	struct pend *x = &w->x;
	uint64_t e = w->next, rseq = r->rec.f[AL_F_SEQ].u, xseq = x->p.rec.f[AL_F_SEQ].u;

	if (chains_from(w, r, line, x->p.hash)) {
		settle_in_place(w, x->p.hash);
		return false;
	}
	if (CRYPTO_memcmp(x->computed, x->p.hash, AL_HASH_LEN) != 0 && chains_from(w, r, line, x->computed)) {
		settle_in_place(w, x->computed);
		return false;
	}
	if (rseq == e && !(lineno > w->f->base_line + 1 && r->rec.type == AL_T_HEADER) &&
	    chains_from(w, r, line, w->prev)) {
		if (xseq == e + 1 && chains_from(w, &x->p, x->line, r->hash)) {
			/* two records swapped: one finding, at the first of the two */
			uint64_t xd = x->off;
			x->on = false;
			report(w->c, AL_V_REORDERED, w->f->path, x->lineno, x->off, true, xseq,
			       "records %" PRIu64 " and %" PRIu64 " are swapped (seq %" PRIu64 " follows at line %" PRIu64
			       ")", e, xseq, e, lineno);
			process(w, r, line, len, lineno, off, false);
			accept(w, &x->p, x->p.hash, x->line, x->len, xseq, xd, x->lineno, false, true);
			return true;
		}
		settle_inserted(w);
		return false;
	}
	settle_in_place(w, x->p.hash); /* nothing better to go on */
	return false;
}

/* ---- crash damage a recovery record repairs (recovery.c's rule) ---------------- */

static bool file_sha(void *ctx, uint64_t off, uint64_t len, uint8_t out[AL_HASH_LEN])
{
	struct vfile *f = ctx;
	uint8_t buf[65536];
	SHA256_CTX sc;

	SHA256_Init(&sc);
	while (len) {
		size_t n = len < sizeof(buf) ? (size_t)len : sizeof(buf);
		if (al_pread_full(f->fd, buf, n, off) != (ssize_t)n)
			return false;
		SHA256_Update(&sc, buf, n);
		off += n;
		len -= n;
	}
	SHA256_Final(out, &sc);
	return true;
}

static int file_byte(void *ctx, uint64_t off)
{
	struct vfile *f = ctx;
	uint8_t b;
	return pread(f->fd, &b, 1, (off_t)off) == 1 ? b : -1;
}

/* Does the recovery record whose line is at `at` repair damage at d? */
static bool bridge_check(struct walk *w, uint64_t at, uint64_t d, const struct al_tailrec *from,
			 uint64_t *ret_len)
{
	struct vctx *c = w->c;
	uint8_t line[AL_LINE_MAX];
	struct al_parsed p;
	size_t eoff;
	ssize_t n = al_pread_full(w->f->fd, line, sizeof(line), at);
	uint8_t *nl = n > 0 ? memchr(line, '\n', (size_t)n) : NULL;
	struct al_tailrec t = {.seq = w->next - 1, .version = (uint8_t)w->last_version,
			       .type = (uint8_t)w->last_type};
	struct al_recovery_io io = {.sha = file_sha, .byte = file_byte, .ctx = w->f};

	if (!nl || al_parse(line, (size_t)(nl - line), c->line2, &p, &eoff) != AL_PERR_OK)
		return false;
	memcpy(t.hash, w->prev, AL_HASH_LEN);
	if (w->have_ts)
		memcpy(t.ts, w->last_ts, AL_TS_LEN);
	else
		memset(t.ts, '0', AL_TS_LEN);
	if (from)
		t = *from;
	if (!al_recovery_repairs(&p, line, at, d, &t, &io, c->work))
		return false;
	*ret_len = p.rec.f[AL_F_DAMAGE_LENGTH].u;
	return true;
}

/* The line at offset d (line lineno) breaks the chain right after a record
 * that verified: is it crash damage that a recovery record further on
 * repairs? The writer repairs at most AL_RECOVERY_MAX bytes, so that is how
 * far the file is searched (once: the recovery records met on the way are
 * kept for the next damage). A stream cannot look ahead: the line starts a
 * wait there (stream_defer). */
static bool stream_defer(struct al_vstream *s, uint64_t lineno, uint64_t d);

static bool find_bridge(struct walk *w, uint64_t lineno, uint64_t d, bool unparsed)
{
	struct vfile *f = w->f;
	uint64_t end, found = 0, dl = 0;

	if (!bridge_may(w))
		return false;
	/* A stream: honest crash damage starts with an unparseable line (NULs
	 * run into the next line), and in v2 right after a seal or a header; a
	 * stream holds the lines after those until it knows what they are
	 * (stream_hold), so damage after any other v2 record cannot be
	 * repaired and is not waited for. */
	if (w->c->stream)
		return unparsed && al_recovery_may_follow((uint8_t)w->last_version, w->last_type) &&
		       stream_defer(w->c->stream, lineno, d);
	if (f->fd < 0)
		return false;
	/* v2: honest damage starts right after the last seal, and the complete
	 * records accepted after it are part of it (docs/format.md 19.5) */
	const struct al_tailrec *from = NULL;
	uint64_t at_line = lineno;
	if (w->last_version >= AL_V2 && !al_recovery_may_follow((uint8_t)w->last_version, w->last_type)) {
		struct v2w *v = &w->v2;
		if (!v->snap.on || v->snap.f != f || v->snap.end >= d || w->side ||
		    (w->c->gate && v->pend_since_seal > v->plen))
			return false;
		from = &v->snap.t;
		d = v->snap.end;
		at_line = v->snap.lineno + 1;
	}
	end = f->limit - d > AL_RECOVERY_MAX + AL_LINE_MAX ? d + AL_RECOVERY_MAX + AL_LINE_MAX : f->limit;
	/* what was seen ahead before */
	unsigned keep = 0;
	for (unsigned i = 0; i < w->rcn; i++) {
		if (w->rc_off[i] <= d || w->rc_dmg[i] < d)
			continue; /* behind us, or about damage before this one */
		if (!found && w->rc_dmg[i] == d && bridge_check(w, w->rc_off[i], d, from, &dl))
			found = w->rc_off[i];
		w->rc_off[keep] = w->rc_off[i];
		w->rc_dmg[keep++] = w->rc_dmg[i];
	}
	w->rcn = keep;
	/* then the part of the file not searched yet */
	uint64_t pos = w->rscan_to > d ? w->rscan_to : d;
	uint8_t *buf = found || pos >= end ? NULL : malloc(WALK_BUF);
	bool caching = true;
	while (buf && !found && pos < end) {
		size_t want = end - pos < WALK_BUF ? (size_t)(end - pos) : WALK_BUF;
		ssize_t n = al_pread_full(f->fd, buf, want, pos);
		if (n <= 0)
			break;
		size_t i = 0, lim = (size_t)n;
		/* a line starts at pos (d is a line's start; the loop keeps it so) */
		while (i < lim && !found) {
			uint8_t *nl = memchr(buf + i, '\n', lim - i);
			if (!nl && pos + lim < end && i > 0)
				break; /* read it again from its start */
			size_t len = nl ? (size_t)(nl - (buf + i)) : lim - i;
			struct al_parsed p;
			size_t eoff;
			if (nl && al_maybe_recovery(buf + i, len) &&
			    al_parse(buf + i, len, w->c->line2, &p, &eoff) == AL_PERR_OK &&
			    p.rec.type == AL_T_RECOVERY) {
				uint64_t at = pos + i, dm = p.rec.f[AL_F_DAMAGE_OFFSET].u;
				if (dm == d && bridge_check(w, at, d, from, &dl))
					found = at;
				else if (dm > d && caching && w->rcn < 64) {
					w->rc_off[w->rcn] = at;
					w->rc_dmg[w->rcn++] = dm;
				} else if (dm > d) {
					caching = false; /* the cache does not cover the rest */
				}
			}
			i += len + (nl ? 1 : 0);
			if (caching)
				w->rscan_to = pos + i;
		}
		if (i == 0)
			break;
		pos += i;
	}
	free(buf);
	if (!found)
		return false;
	if (from)
		v2_restore(w);
	w->bridge = true;
	w->bridge_at = found;
	w->bridge_off = d;
	w->bridge_line = at_line;
	w->bridge_len = dl;
	return true;
}

/* How many whole records a damaged line holds after its start: lines run
 * together by a lost '\n' (each piece from a record's start to the next
 * one's parses). A damaged line stands for one record, plus these; a count
 * of "seq": strings would let a line of garbage hide as many deletions. */
static uint64_t joined_records(struct vctx *c, const uint8_t *line, size_t len)
{
	static const char start[] = "{\"@timestamp\":\"";
	const size_t sl = sizeof(start) - 1;
	const uint8_t *q = len > 1 ? memmem(line + 1, len - 1, start, sl) : NULL;
	uint64_t k = 0;

	while (q) {
		size_t rest = len - (size_t)(q - line);
		const uint8_t *nx = rest > 1 ? memmem(q + 1, rest - 1, start, sl) : NULL;
		size_t n = nx ? (size_t)(nx - q) : rest, eoff;
		struct al_parsed p;
		if (n + 1 <= AL_LINE_MAX && al_parse(q, n, c->line2, &p, &eoff) == AL_PERR_OK)
			k++;
		q = nx;
	}
	return k;
}

static void check_line(struct walk *w, const uint8_t *line, size_t len, uint64_t lineno, uint64_t off)
{
	struct vctx *c = w->c;
	const char *path = w->f->path;
	struct al_parsed p;
	size_t eoff;
	enum al_perr e = len + 1 > AL_LINE_MAX ? AL_PERR_TOO_LONG : al_parse(line, len, c->dec, &p, &eoff);

	if (w->bridge) {
		if (off < w->bridge_at)
			return; /* a line of the damage the record at bridge_at repairs */
		w->bridge = false;
		w->cur_off = off;
		report(c, AL_V_RECOVERED, path, w->bridge_line, w->bridge_off, true, p.rec.f[AL_F_SEQ].u,
		       "crash damage of %" PRIu64 " bytes repaired by the writer (recovery record at line %" PRIu64
		       ")", w->bridge_len, lineno);
		accept(w, &p, p.hash, line, len, p.rec.f[AL_F_SEQ].u, off, lineno, true, true);
		return;
	}
	if (e != AL_PERR_OK) {
		if (find_bridge(w, lineno, off, true))
			return;
		settle_end(w, NULL);
		if (!w->damage) {
			w->damage = true;
			w->damage_off = off;
			w->damage_line = lineno;
			w->damage_lines = 0;
			w->damage_seqs = 0;
			SHA256_Init(&w->damage_sha);
			char fields[160] = "";
			w->damage_cls = e == AL_PERR_TOO_LONG ? AL_V_UNPARSEABLE :
					classify_unparsed(line, len, e, fields, sizeof(fields));
			/* NUL bytes in a line are a hole: what a writer wrote past
			 * when a batch was lost in a crash, or the file was truncated
			 * under it (docs/durability.md). The first run is named. */
			const uint8_t *z = memchr(line, 0, len);
			size_t nul = 0;
			while (z && z + nul < line + len && !z[nul])
				nul++;
			if (z)
				snprintf(w->damage_msg, sizeof(w->damage_msg),
					 "a hole of %zu NUL byte(s) at byte %zu of the line (data lost in a "
					 "crash, or the file truncated and written on past the cut)",
					 nul, (size_t)(z - line));
			else
				snprintf(w->damage_msg, sizeof(w->damage_msg), "%s at byte %zu of the line%s",
					 e == AL_PERR_VERSION ? "unknown format version" :
					 e == AL_PERR_TOO_LONG ? "line longer than 8192 bytes" :
					 w->damage_cls == AL_V_NONCANONICAL ? "JSON, but not the canonical line" :
									     "not a record",
					 e == AL_PERR_TOO_LONG ? (size_t)AL_LINE_MAX : eoff, fields);
		}
		w->damage_lines++;
		w->damage_seqs += 1 + joined_records(c, line, len);
		SHA256_Update(&w->damage_sha, line, len);
		w->damage_nonl = w->damage_sha;
		SHA256_Update(&w->damage_sha, "\n", 1);
		return;
	}
	uint64_t seq = p.rec.f[AL_F_SEQ].u;
	w->cur_off = off;
	if (c->o->has_from && !c->past_from) {
		if (seq < c->o->from_seq) { /* verified before: only keep the state */
			w->damage = false;
			w->x.on = false;
			follow(w, &p, p.hash, seq, true);
			return;
		}
		c->past_from = true;
		if (seq == c->o->from_seq) {
			bool same = CRYPTO_memcmp(p.hash, c->o->from_hash, AL_HASH_LEN) == 0;
			c->saw_from = true;
			if (!same)
				report(c, AL_V_MODIFIED, path, lineno, off, true, seq,
				       "the checkpoint's record has another hash than --from says");
			w->damage = false;
			w->x.on = false;
			/* go on from the trusted hash (on a mismatch, from the line's own, so
			 * that one wrong checkpoint is one finding) */
			accept(w, &p, same ? c->o->from_hash : p.hash, line, len, seq, w->cur_off, lineno, same, true);
			return;
		}
	}

	if (p.rec.type == AL_T_RECOVERY && v2_rollback(w, &p, line, len, lineno, off))
		return;
	bool after_damage = false;
	if (w->damage) {
		if (p.rec.type == AL_T_RECOVERY && p.rec.f[AL_F_DAMAGE_OFFSET].u + w->f->base_off == w->damage_off &&
		    w->have_next && p.rec.f[AL_F_LAST_SEQ].u + 1 == w->next && seq == w->next &&
		    chains_from(w, &p, line, w->prev)) {
			uint8_t md[AL_HASH_LEN], want[AL_HASH_LEN];
			uint64_t dl = p.rec.f[AL_F_DAMAGE_LENGTH].u, span = off - w->damage_off;
			bool len_ok = dl == span || dl + 1 == span;
			SHA256_Final(md, dl == span ? &w->damage_sha : &w->damage_nonl);
			(void)al_unhex(p.rec.f[AL_F_DAMAGE_SHA256].p, 64, want);
			bool sha_ok = CRYPTO_memcmp(md, want, AL_HASH_LEN) == 0;
			bool v2_ok = al_recovery_may_follow((uint8_t)w->last_version, w->last_type);
			if (len_ok && sha_ok && v2_ok) {
				w->damage = false;
				report(c, AL_V_RECOVERED, path, w->damage_line, w->damage_off, true, seq,
				       "crash damage of %" PRIu64 " bytes repaired by the writer (recovery record "
				       "at line %" PRIu64 ")", dl, lineno);
				accept(w, &p, p.hash, line, len, seq, w->cur_off, lineno, true, true);
				return;
			}
		}
		flush_damage(w);
		after_damage = true;
	}
	if (w->x.on && settle_with(w, &p, line, len, lineno, off))
		return;
	process(w, &p, line, len, lineno, off, after_damage);
}

/* --follow: open `path` as the possible successor of f (whose inode is
 * `mine`): its first line complete, a header naming f's inode as prev_name
 * in the same directory. Returns 1 with *ret, 0 when it is not (yet), or
 * -errno. *other (may be NULL): it never will be, its trusted header begins
 * a chain or names another chain than f's (id). */
static int try_successor(struct vctx *c, struct vfile *f, const char *path, const struct stat *mine,
			 const char *id, bool *other, struct vfile **ret)
{
	struct vfile *nf = calloc(1, sizeof(*nf));
	uint8_t line[AL_LINE_MAX];
	struct stat st;
	int r;

	if (!nf)
		return -ENOMEM;
	nf->path = path;
	nf->next = nf->prevf = -1;
	nf->fd = -1;
	r = read_head(c, nf, true); /* (the inode checked is the one walked) */
	if (r == -ENOENT || r == -EINVAL || r == -ELOOP)
		r = 0; /* gone, or not a regular file (a FIFO, a symlink): not a successor */
	else if (!r && nf->has_prev) {
		const char *sl = strrchr(path, '/');
		int dl = sl ? (int)(sl - path) + 1 : 0;
		snprintf((char *)line, sizeof(line), "%.*s%s", dl, path, nf->prev_name);
		r = stat((char *)line, &st) == 0 && st.st_ino == mine->st_ino && st.st_dev == mine->st_dev;
	}
	if (!r && other)
		*other = nf->hdr_ok && (!nf->has_prev || strcmp(nf->chain_id, id) != 0);
	if (r <= 0) {
		if (nf->fd >= 0)
			close(nf->fd);
		free(nf);
		return r;
	}
	*ret = nf;
	return 1;
}

/* A path kept until the end (the list of them hangs off c->names). */
static const char *keep_path(struct vctx *c, const char *dir, int dl, const char *name)
{
	size_t len = (size_t)dl + strlen(name) + 1;
	char *p = malloc(sizeof(char *) + len);
	if (!p)
		return NULL;
	memcpy(p, &c->names, sizeof(char *));
	c->names = p;
	snprintf(p + sizeof(char *), len, "%.*s%s", dl, dir, name);
	return p + sizeof(char *);
}

/* (verify.h) */
size_t al_rotated_name(const char *base, uint64_t *ret_seq)
{
	size_t len = strlen(base), i, dash;
	uint64_t seq = 0;

	for (dash = len; dash > 0 && base[dash - 1] != '-'; dash--)
		;
	/* ".YYYYMMDDTHHMMSS.NNNNNNNNNZ-" is 28 bytes before the seq, after >= 1 of the name */
	if (dash < 29 || dash == len || len - dash > 16 || base[dash - 28] != '.')
		return 0;
	for (i = dash; i < len; i++) {
		if (base[i] < '0' || base[i] > '9')
			return 0;
		seq = seq * 10 + (uint64_t)(base[i] - '0');
	}
	for (i = 0; i < 26; i++) {
		char ch = base[dash - 27 + i];
		bool ok = i == 8 ? ch == 'T' : i == 15 ? ch == '.' : i == 25 ? ch == 'Z' : (ch >= '0' && ch <= '9');
		if (!ok)
			return 0;
	}
	*ret_seq = seq;
	return dash - 28;
}

/* --follow: the writer's active path for the chain's head file. When the
 * head is a rotated file (the listing raced a rotation), the active path is
 * its name without that suffix; the file there continues it. */
static const char *active_path(struct vctx *c, const char *path)
{
	const char *sl = strrchr(path, '/'), *base = sl ? sl + 1 : path;
	int dl = (int)(base - path);
	uint64_t seq;
	size_t n = al_rotated_name(base, &seq);
	char *name;
	const char *p;

	if (!n)
		return path;
	name = strndup(base, n);
	if (!name)
		return NULL;
	p = keep_path(c, path, dl, name);
	free(name);
	return p;
}

/* --follow, at the end of the tailed file f (all of it read): has it been
 * rotated, and which file continues it? The writer's active path first, else
 * a rotated file named <name>.<time>-<next_seq> (docs/format.md 6) whose
 * header links to f. Returns 1 (c->follow_next set), 0 to wait, 2 when the
 * chain does not go on at the active path (another chain began there: the
 * tail ends, reported), -errno. f deleted (its link count 0) is reported
 * once: what it holds is then in no file. */
static int successor(struct vctx *c, struct vfile *f, uint64_t next_seq)
{
	const char *act = c->follow_path, *id = c->res->chain[f->chain].chain_id;
	const char *sl = strrchr(act, '/');
	int dl = sl ? (int)(sl - act) + 1 : 0;
	struct stat mine, st;
	struct vfile *nf = NULL;
	bool other = false;
	int r;

	if (fstat(f->fd, &mine) < 0)
		return -errno;
	if (mine.st_nlink == 0 && !f->told_deleted) {
		f->told_deleted = true;
		report(c, AL_V_MISSING_FILE, f->path, 0, 0, false, 0,
		       "the file tailed was deleted (its link count is 0): what the tail read from it is in no "
		       "file now; a writer still writing to it fails closed at its next batch "
		       "(docs/durability.md)");
	}
	if (stat(act, &st) == 0 && st.st_ino == mine.st_ino && st.st_dev == mine.st_dev)
		return 0; /* still the active file */
	r = try_successor(c, f, act, &mine, id, &other, &nf);
	if (r == 0 && other) {
		report(c, AL_V_EXTRA_CHAIN, act, 1, 0, false, 0,
		       "a file that does not continue chain %s is at the writer's active name: another chain "
		       "began there (its header says why). The tail of chain %s ends; start it again to follow "
		       "the new chain",
		       id, id);
		return 2;
	}
	if (r == 0) { /* rotated more than once since: look for the rotated successor */
		char dir[4096];
		const char *abase = act + dl;
		size_t an = strlen(abase);
		snprintf(dir, sizeof(dir), "%.*s", dl ? dl : 1, dl ? act : ".");
		DIR *d = opendir(dir);
		struct dirent *e;
		while (d && r == 0 && (e = readdir(d))) {
			uint64_t seq;
			/* only <active name>.<UTC time>-<next seq>, the writer's name for it
			 * (and its header must link to f: try_successor) */
			if (al_rotated_name(e->d_name, &seq) != an || strncmp(e->d_name, abase, an) != 0 ||
			    seq != next_seq)
				continue;
			const char *p = keep_path(c, act, dl, e->d_name);
			r = p ? try_successor(c, f, p, &mine, id, NULL, &nf) : -ENOMEM;
		}
		if (d)
			closedir(d);
	}
	if (r <= 0)
		return r;
	/* name f by the name it was renamed to, in what is reported from now on */
	const char *fsl = strrchr(nf->path, '/');
	int fdl = fsl ? (int)(fsl - nf->path) + 1 : 0;
	const char *renamed = keep_path(c, nf->path, fdl, nf->prev_name);
	if (renamed) {
		f->path = renamed;
		f->base = renamed + fdl;
	}
	const char *nsl = strrchr(nf->path, '/');
	nf->base = nsl ? nsl + 1 : nf->path;
	nf->follow = true;
	nf->limit = UINT64_MAX;
	nf->chain = f->chain;
	nf->more = c->more;
	c->more = nf;
	c->follow_next = nf;
	c->res->files++;
	c->res->chain[f->chain].files++;
	return 1;
}

/* The workers for f (started on it), or NULL when the walk goes alone. */
static struct al_vpool *pool_for(struct vctx *c, const struct vfile *f)
{
	const struct al_vopts *o = c->o;
	uint64_t block = o->pool ? al_vpool_block(o->pool) : o->block ? o->block : AL_VBLOCK;

	if (c->no_pool || o->follow || f->limit / block < 2)
		return NULL;
	if (!c->pool)
		c->pool = o->pool; /* the caller's, if any: not freed here */
	if (!c->pool) {
		unsigned n = o->threads ? o->threads : al_vpool_cpus();
		/* no workers to be had: the walk does it all, with the same result */
		if (n < 2 || al_vpool_new(n, block, o->on_record != NULL, &c->pool) < 0) {
			c->no_pool = true;
			return NULL;
		}
	}
	al_vpool_start(c->pool, f->fd, f->limit, o->min_version, c->nanch > 0, c->nanch ? c->anch[0].seq : 0);
	return c->pool;
}

/* on_record for each line of a block the workers verified: from the bytes
 * they checked (a line changed in the file since is never passed on). */
static int emit_block(struct vctx *c, const struct al_vblock *b)
{
	if (!b->data || b->start < b->data_off || b->end - b->data_off > b->data_len)
		return -EIO; /* (a kept pool always has them) */
	const uint8_t *p = b->data + (b->start - b->data_off), *end = b->data + (b->end - b->data_off);
	while (p < end) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)(nl - p); /* every line of the block ends in one */
		c->o->on_record(c->o->ctx, p, len);
		p = nl + 1;
	}
	return 0;
}

/* Walk f up to f->limit bytes, a buffer at a time: lines are checked where
 * they lie; only a line cut by the buffer's end is moved to its start. A
 * block the workers verified is taken in one step when the walk's state
 * allows (can_take). */
static int walk_file(struct vctx *c, struct vfile *f, struct walk *w)
{
	/* a file smaller than the buffer gets a buffer of its size (+1: a line
	 * is never judged longer than the buffer then, as with the full one):
	 * verifying many small files need not touch 1 MiB of fresh memory each */
	size_t cap = f->limit < WALK_BUF ? (size_t)f->limit + 1 : WALK_BUF, have = 0, pos = 0;
	uint8_t *buf = malloc(cap);
	uint64_t base = 0, lineno = 0; /* base: file offset of buf[0] */
	bool eof = false, draining = false;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	r = vfile_fd(f);
	if (r < 0) {
		free(buf);
		return r;
	}
	r = 0;
	w->f = f;
	c->cur = f;
	struct al_vpool *pool = pool_for(c, f);
	const struct al_vblock *blk = pool ? al_vpool_peek(pool) : NULL;
	for (;;) {
		while (blk && base + pos >= blk->start) {
			/* at (or past) the next block the workers checked */
			if (base + pos == blk->start && can_take(w, blk)) {
				if (c->o->on_record && !w->side && (r = emit_block(c, blk)) < 0)
					goto out;
				take_block(w, blk, lineno + 1);
				lineno += blk->lines;
				progress(c, f, blk->end);
				if (blk->end < base + have) {
					pos = (size_t)(blk->end - base);
				} else {
					base = blk->end;
					have = pos = 0;
				}
			}
			al_vpool_next(pool);
			blk = al_vpool_peek(pool);
		}
		uint8_t *nl = pos < have ? memchr(buf + pos, '\n', have - pos) : NULL;
		if (nl) {
			size_t len = (size_t)(nl - (buf + pos));
			check_line(w, buf + pos, len, ++lineno, base + pos);
			pos += len + 1;
			continue;
		}
		if (eof)
			break;
		/* keep the partial line, refill behind it */
		if (pos) {
			memmove(buf, buf + pos, have - pos);
			base += pos;
			have -= pos;
			pos = 0;
		}
		if (have == cap) { /* a line longer than the buffer: not a record */
			check_line(w, buf, AL_LINE_MAX, ++lineno, base);
			base += have;
			have = 0;
			continue;
		}
		uint64_t left = f->limit - base - have;
		size_t want = cap - have < left ? cap - have : (size_t)left;
		ssize_t n = want ? pread(f->fd, buf + have, want, (off_t)(base + have)) : 0;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		have += (size_t)n;
		progress(c, f, base + have);
		if (c->o->follow && stopped(c)) {
			f->stopped = true;
			eof = true;
			continue;
		}
		if (f->follow && n == 0) {
			/* rotated? (then all of it is written: read to its end once
			 * more, then go on in the file that continues it) */
			if (draining) {
				r = successor(c, f, w->x.on ? w->x.p.rec.f[AL_F_SEQ].u + 1 : w->next);
				if (r < 0)
					goto out;
				if (r == 2)
					f->follow = false; /* the chain ends here: so does the tail */
				if (r > 0) {
					eof = true;
					continue;
				}
			} else {
				struct stat a, b;
				if (fstat(f->fd, &a) == 0 &&
				    !(stat(c->follow_path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev)) {
					draining = true;
					continue;
				}
			}
			if (c->o->on_wait)
				c->o->on_wait(c->o->ctx);
			unsigned ms = c->o->poll_ms ? c->o->poll_ms : 100;
			struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
			nanosleep(&ts, NULL); /* a signal cuts it short: stop is checked next */
			continue;
		}
		eof = n == 0 || base + have >= f->limit;
	}
	r = 0;
	if (pos < have && f->stopped) { /* a partial last line of a live log: waited for */
		have = pos;
	} else if (pos < have) { /* a last line without its '\n' */
		settle_end(w, NULL);
		flush_damage(w);
		report(c, AL_V_TRUNCATED, f->path, lineno + 1, base + pos, w->have_next, w->have_next ? w->next : 0,
		       "the file ends inside a line (%zu bytes without a newline)", have - pos);
		f->partial = true;
	}
	flush_damage(w);
	f->lines = lineno;
	f->walked = base + have;
	if (f->follow)
		f->size = f->walked; /* it grew while followed */
	c->res->bytes += base + have;
out:
	if (pool)
		al_vpool_stop(pool);
	free(buf);
	return r;
}

/* Step from the file walked before (w->pf) into f: settle what the last file
 * left held, check the link f's header names, and set the chain state. */
static void enter_file(struct walk *w, struct vfile *f)
{
	struct vctx *c = w->c;
	struct vfile *pf = w->pf;
	bool trusted = f->has_header && f->hdr_ok;

	c->cur = pf;
	settle_end(w, trusted && f->has_prev ? f->prev_hash : NULL);
	if (pf && trusted && f->has_prev && w->have_next && w->next && !pf->partial) {
		uint64_t last = w->next - 1;
		if (w->absorbed) { /* pf ends in damage already reported: its last records unread */
			if (f->prev_seq > last + w->absorbed)
				report(c, AL_V_TRUNCATED, pf->path, pf->base_line + pf->lines + 1,
				       pf->base_off + pf->walked, true, w->next,
				       "the file ends before seq %" PRIu64 ", where %s continues it", f->prev_seq,
				       f->base);
		} else if (f->prev_seq > last)
			report(c, AL_V_TRUNCATED, pf->path, pf->base_line + pf->lines + 1, pf->base_off + pf->walked,
			       true, w->next,
			       "the file ends at seq %" PRIu64 " (byte %" PRIu64 "), but %s continues it from seq %"
			       PRIu64 " (byte %" PRIu64 ")", last, pf->walked, f->base, f->prev_seq, f->prev_size);
		else if (f->prev_seq < last) {
			/* (with findings in pf: its records beyond prev_seq were reported there) */
			if (!pf->findings)
				report(c, AL_V_INSERTED, f->path, f->base_line + 1, f->base_off, true, f->prev_seq + 1,
				       "continues %s from seq %" PRIu64 ", but that file goes on to seq %" PRIu64,
				       f->prev_name, f->prev_seq, last);
		} else if (CRYPTO_memcmp(f->prev_hash, w->prev, AL_HASH_LEN) != 0)
			report(c, AL_V_MODIFIED, f->path, f->base_line + 1, f->base_off, true, f->prev_seq + 1,
			       "its header names seq %" PRIu64 " of %s with another hash than that file ends with",
			       f->prev_seq, f->prev_name);
		else if (!f->sealed_prev && f->prev_size != pf->size && !pf->findings)
			report(c, AL_V_MODIFIED, pf->path, 0,
			       pf->base_off + (pf->size < f->prev_size ? pf->size : f->prev_size),
			       true, f->prev_seq, "the file is %" PRIu64 " bytes long, but %s recorded %" PRIu64
			       " when it continued it", pf->size, f->base, f->prev_size);
	}
	/* go on from the header's link, as the writer did (also when the file
	 * it names is missing); a chain's first file starts from zeros. An
	 * altered header is not trusted: the chain goes on from the last file. */
	if (trusted && f->has_prev) {
		memcpy(w->prev, f->prev_hash, AL_HASH_LEN);
		w->next = f->prev_seq + 1;
		w->have_next = true;
	} else if (trusted || (f->has_header && !f->has_prev && !w->have_next)) {
		memcpy(w->prev, zero_hash, AL_HASH_LEN);
		w->next = 0;
		w->have_next = true;
	}
	c->cur = f;
}

/* Walk the files linked from `first` on, as one chain; side: a file off
 * the chain's path, walked for its own findings, counted nowhere. */
static int walk_from(struct vctx *c, int first, bool side)
{
	struct walk *w = calloc(1, sizeof(*w));
	int r = 0;

	if (!w)
		return -ENOMEM;
	w->c = c;
	w->side = side;
	w->ch = side ? &w->scratch : &c->res->chain[c->files[first].chain];
	for (int cur = first; cur >= 0 && !c->files[cur].visited; cur = c->files[cur].next) {
		struct vfile *f = &c->files[cur];
		f->visited = true;
		f->side |= side;
		if (f->skip)
			continue; /* the next file starts from its header's link */
		enter_file(w, f);
		r = walk_file(c, f, w);
		if (r < 0)
			break;
		w->pf = f;
		while (r >= 0 && c->follow_next) { /* --follow: the file that replaced it */
			struct vfile *nf = c->follow_next, *done = w->pf;
			c->follow_next = NULL;
			enter_file(w, nf);
			done->follow = false; /* all of it read: its descriptor can go */
			close_fd(done);
			r = walk_file(c, nf, w);
			w->pf = nf;
		}
		if (r < 0)
			break;
		if (!f->follow)
			close_fd(f);
	}
	c->cur = w->pf;
	settle_end(w, NULL);
	moved_inserted(w);
	if (r >= 0)
		v2_end(w);
	free(w->v2.pend);
	free(w->v2.wn);
	c->cur = NULL;
	free(w);
	return r;
}

/* ---- chains ------------------------------------------------------------------- */

static int chain_of(struct al_vresult *res, const char *id)
{
	for (unsigned i = 0; i < res->chains; i++)
		if (strcmp(res->chain[i].chain_id, id) == 0)
			return (int)i;
	int k = (int)res->chains++;
	snprintf(res->chain[k].chain_id, sizeof(res->chain[0].chain_id), "%s", id);
	return k;
}

/* f ends where its successor g says (g's trusted header). */
static void set_end(struct vctx *c, struct vfile *f, const struct vfile *g)
{
	const struct al_vopts *o = c->o;

	f->has_end = f->skip = false;
	f->limit = f->size;
	if (!g->hdr_ok)
		return; /* an altered header says nothing about its predecessor */
	f->has_end = true;
	f->end_seq = g->prev_seq;
	if (o->has_from && g->prev_seq < o->from_seq)
		f->skip = true; /* every record of f is before the checkpoint */
	else if (g->sealed_prev && g->prev_size <= f->size)
		f->limit = g->prev_size; /* beyond it: a sealed file's unacknowledged tail */
}

static void link_files(struct vctx *c, unsigned i, unsigned found)
{
	struct vfile *g = &c->files[i], *f = &c->files[found];

	if (f->next >= 0) {
		g->fork_of = (int)found; /* which of the two is the chain's: resolve_forks */
		return;
	}
	f->next = (int)i;
	g->prevf = (int)found;
	set_end(c, f, g);
}

/* How many files the links lead through from file i (i included). */
static unsigned descent(const struct vctx *c, int i)
{
	unsigned k = 0;
	for (; i >= 0 && k <= c->n; i = c->files[i].next)
		k++;
	return k;
}

/* Two files continue one: the chain goes on in the one the links lead
 * further from (a copy of a rotated file has no successor; its original
 * does), else the longer; the other is a side branch, reported forked. */
static void resolve_forks(struct vctx *c)
{
	for (unsigned i = 0; i < c->n; i++) {
		struct vfile *g = &c->files[i];
		if (g->fork_of < 0)
			continue;
		struct vfile *f = &c->files[g->fork_of];
		int h = f->next;
		unsigned dg = descent(c, (int)i), dh = descent(c, h);
		if (dg > dh || (dg == dh && g->size > c->files[h].size)) {
			c->files[h].prevf = -1;
			c->files[h].fork_of = g->fork_of;
			f->next = (int)i;
			g->prevf = g->fork_of;
			g->fork_of = -1;
			set_end(c, f, g);
		}
	}
}

/* ---- the inputs by name ---------------------------------------------------- */

/* The links find a file by its name; a directory of rotated files is
 * thousands of them, so by a sorted index, not by a scan of all for each
 * (10,834 files: 1.8 s that way, 0.45 s in all now; docs/benchmarks.md). */
static int cmp_by_base(const void *a, const void *b, void *arg)
{
	const struct vctx *c = arg;
	unsigned i = *(const unsigned *)a, k = *(const unsigned *)b;
	int d = strcmp(c->files[i].base, c->files[k].base);
	return d ? d : (i > k) - (i < k);
}

/* c->by_base: the indices of the files there are now, by base name, then
 * by index. Made again whenever files were added or removed. 0 or -ENOMEM. */
static int by_base_index(struct vctx *c)
{
	unsigned *ix = realloc(c->by_base, (c->n ? c->n : 1) * sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	for (unsigned i = 0; i < c->n; i++)
		ix[i] = i;
	qsort_r(ix, c->n, sizeof(*ix), cmp_by_base, c);
	c->by_base = ix;
	c->n_by_base = c->n;
	return 0;
}

/* The indexed files named `base` are by_base[*lo..*hi), in input order. */
static void by_base_range(const struct vctx *c, const char *base, unsigned *lo, unsigned *hi)
{
	unsigned a = 0, b = c->n_by_base;
	while (a < b) { /* the first not before base */
		unsigned m = a + (b - a) / 2;
		if (strcmp(c->files[c->by_base[m]].base, base) < 0)
			a = m + 1;
		else
			b = m;
	}
	*lo = a;
	b = c->n_by_base;
	while (a < b) { /* the first after it */
		unsigned m = a + (b - a) / 2;
		if (strcmp(c->files[c->by_base[m]].base, base) <= 0)
			a = m + 1;
		else
			b = m;
	}
	*hi = a;
}

/* The file a trusted header names as sealed with nothing durable in it:
 * that name in the header's directory, with that file id (or no header). */
static void mark_sealed(struct vctx *c)
{
	for (unsigned i = 0; i < c->n; i++) {
		const struct vfile *g = &c->files[i];
		if (!g->hdr_ok || !g->has_sealed)
			continue;
		unsigned lo, hi;
		by_base_range(c, g->sealed_name, &lo, &hi);
		for (unsigned j = lo; j < hi; j++) {
			unsigned k = c->by_base[j];
			struct vfile *f = &c->files[k];
			if (k == i || (size_t)(f->base - f->path) != (size_t)(g->base - g->path) ||
			    strncmp(f->path, g->path, (size_t)(g->base - g->path)) != 0)
				continue;
			if (f->has_header && strcmp(f->file_id, g->sealed_fid) != 0)
				continue; /* another file under that name: not the sealed one */
			f->sealed_branch = true;
			f->visited = true;
			snprintf(f->chain_id, sizeof(f->chain_id), "%s", g->chain_id);
		}
	}
}

/* A file that starts a chain (no trusted link to a predecessor). */
static bool is_first_file(const struct vfile *f)
{
	return !(f->hdr_ok && f->has_prev);
}

/* Which first file of chain k is the chain's: the one the links lead
 * furthest from, then the longest, then the shortest name (the writer's
 * active name is the prefix of every other), then the first given. */
static bool better_first(const struct vctx *c, int a, int b)
{
	const struct vfile *fa = &c->files[a], *fb = &c->files[b];
	unsigned da = descent(c, a), db = descent(c, b);
	if (da != db)
		return da > db;
	if (fa->size != fb->size)
		return fa->size > fb->size;
	size_t la = strlen(fa->base), lb = strlen(fb->base);
	if (la != lb)
		return la < lb;
	return a < b;
}

/* A cursor over a file's records in order: for comparing two files. */
struct rcur {
	struct vctx *c;
	struct vfile *f;
	uint8_t *buf;
	size_t have, pos;
	uint64_t base, lineno;
	bool eof;
	/* the current record */
	bool on;
	uint64_t seq, line, off;
	const uint8_t *bytes; /* its line, until the next rcur_next */
	size_t len;
};

/* Advance to the next record that parses; false at the end (or an error). */
static bool rcur_next(struct rcur *k)
{
	struct al_parsed p;
	size_t eoff;

	for (;;) {
		uint8_t *nl = k->pos < k->have ? memchr(k->buf + k->pos, '\n', k->have - k->pos) : NULL;
		if (nl) {
			size_t len = (size_t)(nl - (k->buf + k->pos));
			uint64_t off = k->base + k->pos;
			const uint8_t *line = k->buf + k->pos;
			k->lineno++;
			k->pos += len + 1;
			if (len + 1 <= AL_LINE_MAX && al_parse(line, len, k->c->dec, &p, &eoff) == AL_PERR_OK) {
				k->on = true;
				k->seq = p.rec.f[AL_F_SEQ].u;
				k->line = k->lineno;
				k->off = off;
				k->bytes = line;
				k->len = len;
				return true;
			}
			continue;
		}
		if (k->eof)
			break;
		memmove(k->buf, k->buf + k->pos, k->have - k->pos);
		k->base += k->pos;
		k->have -= k->pos;
		k->pos = 0;
		if (k->have == WALK_BUF) { /* a line longer than any record */
			k->base += k->have;
			k->have = 0;
		}
		int fd = vfile_fd(k->f);
		ssize_t n = fd < 0 ? -1 : al_pread_full(fd, k->buf + k->have, WALK_BUF - k->have, k->base + k->have);
		if (n <= 0)
			k->eof = true;
		else
			k->have += (size_t)n;
	}
	k->on = false;
	return false;
}

/* Files a and b of one chain hold records of the same seqs: are they the
 * same records? Reported at b: forked at the first seq whose lines differ
 * (both places named), else duplicated when b is not already reported as a
 * side file (a second first file or a fork says so itself). */
static void compare_overlap(struct vctx *c, struct vfile *a, struct vfile *b)
{
	struct rcur x = {.c = c, .f = a}, y = {.c = c, .f = b};
	uint64_t lo = a->vfirst > b->vfirst ? a->vfirst : b->vfirst;
	uint64_t hi = a->vlast < b->vlast ? a->vlast : b->vlast, same = 0, first = 0, last = 0;
	bool differs = false;

	x.buf = malloc(WALK_BUF);
	y.buf = malloc(WALK_BUF);
	if (!x.buf || !y.buf)
		goto out;
	bool okx = rcur_next(&x), oky = rcur_next(&y);
	while (okx && oky && !differs) {
		if (x.seq < lo || x.seq < y.seq) {
			okx = rcur_next(&x);
		} else if (y.seq < lo || y.seq < x.seq) {
			oky = rcur_next(&y);
		} else if (x.seq > hi) {
			break;
		} else if (x.len != y.len || memcmp(x.bytes, y.bytes, x.len) != 0) {
			differs = true;
		} else {
			if (!same++)
				first = x.seq;
			last = x.seq;
			okx = rcur_next(&x);
			oky = rcur_next(&y);
		}
	}
	if (differs)
		report(c, AL_V_FORKED, b->path, y.line, y.off, true, y.seq,
		       "seq %" PRIu64 " is a different record here than in %s (line %" PRIu64 ", byte %" PRIu64
		       "): two histories of chain %s", y.seq, a->path, x.line, x.off, b->chain_id);
	else if (same && !b->side)
		report(c, AL_V_DUPLICATED, b->path, 1, 0, true, first,
		       "repeats seqs %" PRIu64 "..%" PRIu64 " of %s byte for byte", first, last, a->path);
out:
	close_fd(a);
	close_fd(b);
	free(x.buf);
	free(y.buf);
}

static int cmp_vfirst(const void *pa, const void *pb, void *arg)
{
	const struct vctx *c = arg;
	const struct vfile *a = &c->files[*(const unsigned *)pa], *b = &c->files[*(const unsigned *)pb];
	if (a->chain != b->chain)
		return a->chain < b->chain ? -1 : 1;
	if (a->vfirst != b->vfirst)
		return a->vfirst < b->vfirst ? -1 : 1;
	if (a->side != b->side)
		return a->side ? 1 : -1; /* the chain's own file is the reference */
	return *(const unsigned *)pa < *(const unsigned *)pb ? -1 : 1;
}

/* The same seq twice in one chain, wherever: files sorted by their first
 * seq; each is compared with the one before it that reaches furthest. */
static int overlaps(struct vctx *c)
{
	unsigned *ix = malloc((c->n ? c->n : 1) * sizeof(*ix)), m = 0;
	if (!ix)
		return -ENOMEM;
	for (unsigned i = 0; i < c->n; i++)
		if (c->files[i].has_vrange && !c->files[i].sealed_branch)
			ix[m++] = i;
	qsort_r(ix, m, sizeof(*ix), cmp_vfirst, c);
	int reach = -1;
	for (unsigned j = 0; j < m; j++) {
		struct vfile *f = &c->files[ix[j]];
		if (reach >= 0 && c->files[reach].chain != f->chain)
			reach = -1;
		if (reach >= 0 && c->files[reach].vlast >= f->vfirst)
			compare_overlap(c, &c->files[reach], f);
		if (reach < 0 || f->vlast > c->files[reach].vlast)
			reach = (int)ix[j];
	}
	free(ix);
	return 0;
}

/* The anchors (--expect-head) as one list, and room to record where they
 * were met: chain_cap chains. */
static int anchors_init(struct vctx *c, unsigned chain_cap)
{
	const struct al_vopts *o = c->o;

	if (o->n_anchors) {
		c->anch = o->anchors;
		c->nanch = o->n_anchors;
	} else if (o->has_expect_head) {
		c->one.seq = o->expect_seq;
		memcpy(c->one.hash, o->expect_hash, AL_HASH_LEN);
		c->anch = &c->one;
		c->nanch = 1;
	}
	c->chain_cap = chain_cap;
	if (c->nanch) {
		c->anch_seen = calloc((size_t)c->nanch * chain_cap, 1);
		if (!c->anch_seen)
			return -ENOMEM;
	}
	return 0;
}

/* The file where chain k's walk ended (its head), for findings about the
 * chain as a whole. */
static const char *chain_file(const struct vctx *c, unsigned k, const char *dflt)
{
	const struct vfile *best = NULL;
	for (unsigned i = 0; i < c->n; i++) {
		const struct vfile *f = &c->files[i];
		if (f->chain == (int)k && !f->side && !f->sealed_branch && f->has_vrange &&
		    (!best || f->vlast > best->vlast))
			best = f;
	}
	return best ? best->path : dflt;
}

/* The chain that holds the live file: the head (no successor, on its
 * chain's path) under the writer's active name, not a rotated one
 * (<name>.<UTC time>-<seq>); of several, the shortest name (the active name
 * is a prefix of a copy's: audit.log, audit.log~, audit.log.bak). -1: none. */
static int live_chain(const struct vctx *c)
{
	const struct vfile *best = NULL;
	for (unsigned i = 0; i < c->n; i++) {
		const struct vfile *f = &c->files[i];
		uint64_t seq;
		if (f->next >= 0 || f->side || f->sealed_branch || !f->has_vrange || f->chain < 0 ||
		    al_rotated_name(f->base, &seq))
			continue;
		if (!best || strlen(f->base) < strlen(best->base))
			best = f;
	}
	return best ? best->chain : -1;
}

/* After the walk: the checkpoint and the expected heads were met? Each
 * anchor is bound to a chain (its chain id; without one: the only chain,
 * else the chain of the live file, else the chain that holds it, else the
 * one that has its seq, else the longest); with anchors given, a chain
 * bound to none is unanchored. */
static void anchors(struct vctx *c, const char *last)
{
	const struct al_vopts *o = c->o;
	struct al_vresult *res = c->res;
	bool *bound = c->nanch ? calloc(res->chains ? res->chains : 1, sizeof(bool)) : NULL;

	if (o->has_from && !c->saw_from)
		report(c, AL_V_TRUNCATED, last, 0, 0, true, o->from_seq,
		       "no record with seq %" PRIu64 " (the --from checkpoint) among the inputs", o->from_seq);
	for (unsigned k = 0; k < c->nanch; k++) {
		const struct al_vanchor *a = &c->anch[k];
		const uint8_t *m = &c->anch_seen[(size_t)k * c->chain_cap];
		int ch = -1;
		if (a->has_chain) {
			for (unsigned i = 0; i < res->chains && ch < 0; i++)
				if (strcmp(res->chain[i].chain_id, a->chain_id) == 0)
					ch = (int)i;
			if (ch < 0) {
				report(c, AL_V_TRUNCATED, last, 0, 0, true, a->seq,
				       "no chain %s among the inputs (the chain its --expect-head names)",
				       a->chain_id);
				continue;
			}
		} else if (res->chains == 1) {
			ch = 0;
		} else if ((ch = live_chain(c)) < 0) {
			for (int want = 2; want > 0 && ch < 0; want--)
				for (unsigned i = 0; i < res->chains && ch < 0; i++)
					if (m[i] == want)
						ch = (int)i;
			if (ch < 0) { /* the longest (also: no chain at all, 0) */
				ch = 0;
				for (unsigned i = 1; i < res->chains; i++)
					if (res->chain[i].records > res->chain[ch].records)
						ch = (int)i;
			}
		}
		if (bound)
			bound[ch] = true;
		const char *where = chain_file(c, (unsigned)ch, last);
		if (!m[ch])
			report(c, AL_V_TRUNCATED, where, 0, 0, true, a->seq,
			       "no record with seq %" PRIu64 " in chain %s: the log ends before the expected head",
			       a->seq, res->chains ? res->chain[ch].chain_id : "");
		else if (m[ch] == 1)
			report(c, AL_V_MODIFIED, where, 0, 0, true, a->seq,
			       "the record with seq %" PRIu64 " in chain %s does not have the expected hash: the "
			       "chain was rewritten", a->seq, res->chain[ch].chain_id);
	}
	for (unsigned i = 0; bound && i < res->chains; i++)
		if (!bound[i] && res->chain[i].records)
			report(c, AL_V_UNANCHORED, chain_file(c, i, last), 0, 0, false, 0,
			       "chain %s (%" PRIu64 " records, seq %" PRIu64 "..%" PRIu64 ") has no --expect-head "
			       "anchor: a rewrite of it could not be told from the original",
			       res->chain[i].chain_id, res->chain[i].records, res->chain[i].first_seq,
			       res->chain[i].last_seq);
	free(bound);
	if (o->one_chain && res->chains > 1) {
		unsigned keep = 0; /* the longest stays; every other is the finding */
		for (unsigned i = 1; i < res->chains; i++)
			if (res->chain[i].records > res->chain[keep].records)
				keep = i;
		for (unsigned i = 0; i < res->chains; i++)
			if (i != keep && res->chain[i].records) /* (an empty one holds nothing) */
				report(c, AL_V_EXTRA_CHAIN, chain_file(c, i, last), 0, 0, false, 0,
				       "chain %s (%" PRIu64 " records) is a second chain among the inputs; "
				       "--one-chain allows only %s", res->chain[i].chain_id, res->chain[i].records,
				       res->chain[keep].chain_id);
	}
}

/* Which files make each chain's path: one first file per chain (the
 * others are side files, reported inserted at their line 1: a copy, a
 * decoy), the files whose predecessor is missing in seq order, and not the
 * other branch of a fork (reported forked). c->order: the walk's order. */
static int cmp_order(const void *pa, const void *pb, void *arg)
{
	const struct vctx *c = arg;
	unsigned ia = *(const unsigned *)pa, ib = *(const unsigned *)pb;
	const struct vfile *a = &c->files[ia], *b = &c->files[ib];
	if (a->chain != b->chain)
		return a->chain < b->chain ? -1 : 1;
	if (a->first_seq != b->first_seq)
		return a->first_seq < b->first_seq ? -1 : 1;
	return ia < ib ? -1 : ia > ib;
}

static int plan(struct vctx *c)
{
	struct al_vresult *res = c->res;
	int *first = malloc((res->chains ? res->chains : 1) * sizeof(int));

	c->order = malloc((c->n ? c->n : 1) * sizeof(*c->order));
	if (!first || !c->order) {
		free(first);
		return -ENOMEM;
	}
	for (unsigned k = 0; k < res->chains; k++)
		first[k] = -1;
	for (unsigned i = 0; i < c->n; i++) {
		struct vfile *f = &c->files[i];
		c->order[i] = i;
		if (f->visited) /* --follow: not of the chain tailed, told already */
			continue;
		if (f->prevf >= 0 || f->sealed_branch || f->fork_of >= 0 || !is_first_file(f) ||
		    (f->torn_header && f->next < 0))
			continue;
		if (first[f->chain] < 0 || better_first(c, (int)i, first[f->chain]))
			first[f->chain] = (int)i;
	}
	qsort_r(c->order, c->n, sizeof(*c->order), cmp_order, c);
	for (unsigned j = 0; j < c->n; j++) {
		unsigned i = c->order[j];
		struct vfile *f = &c->files[i];
		if (f->sealed_branch || f->visited)
			continue;
		if (f->torn_header && f->prevf < 0 && f->next < 0) {
			/* what a crash leaves while a chain's first header is written
			 * (docs/format.md 7): nothing in it was ever acknowledged */
			f->visited = true;
			report(c, AL_V_RECOVERED, f->path, 1, 0, false, 0,
			       "a torn first header (%" PRIu64 " bytes, no complete line): a crash while a "
			       "chain's first file was created; nothing in it was acknowledged", f->size);
			continue;
		}
		if (f->fork_of >= 0) {
			struct vfile *of = &c->files[f->fork_of];
			f->side = true;
			report(c, AL_V_FORKED, f->path, 1, 0, true, f->prev_seq + 1,
			       "continues %s, which %s continues too", of->path, c->files[of->next].path);
		} else if (f->prevf < 0 && is_first_file(f)) {
			if (first[f->chain] == (int)i) {
				f->primary = true;
				continue;
			}
			const struct vfile *p = &c->files[first[f->chain]];
			f->side = true;
			if (!res->chain[f->chain].chain_id[0]) /* files with no header, linked to nothing */
				report(c, AL_V_INSERTED, f->path, 1, 0, false, 0,
				       "a second file without a header that no chain links to (the first is %s): "
				       "a copy, a decoy or not a log file", p->path);
			else
				report(c, AL_V_INSERTED, f->path, 1, 0, f->has_header, f->first_seq,
				       "a second first file of chain %s (file id %s): the chain starts in %s (file id "
				       "%s); this one is a copy or a decoy", res->chain[f->chain].chain_id,
				       f->has_header ? f->file_id : "none", p->path, p->has_header ? p->file_id : "none");
		}
	}
	free(first);
	return 0;
}

/* ---- v2: before and after the walk ------------------------------------------ */

/* With witness keys given: a note is trusted as witnessed (compared) only
 * when one of them cosigned it and no cosignature line of theirs fails
 * (docs/format.md 20.6); otherwise bad-checkpoint, and it is not compared. */
static void witness_cosigned(struct vctx *c, struct al_vwnote *n)
{
	const struct al_vopts *o = c->o;

	n->cosigned_by = 0;
	for (unsigned k = 0; k < o->n_wkeys; k++) {
		const struct al_ckey *wk = &o->wkeys[k];
		uint64_t t = 0;
		int r = al_cosig_verify(wk->key, wk->host, wk->host_len, n->note, n->len, &t);
		if (r == -ENOKEY)
			continue;
		if (r < 0) {
			report(c, AL_V_BAD_CHECKPOINT, n->src, 0, 0, false, 0,
			       "note %u (chain %s, size %" PRIu64 ") carries a cosignature of witness %.*s that does "
			       "not verify (its time or the note changed): not compared", n->index, n->chain_id,
			       n->size, (int)wk->host_len, (const char *)wk->host);
			n->skipped = true;
			n->cosigned_by = 0;
			return;
		}
		if (!n->cosigned_by) {
			n->cosigned_by = k + 1;
			n->cosig_time = t;
		}
	}
	if (!n->cosigned_by) {
		report(c, AL_V_BAD_CHECKPOINT, n->src, 0, 0, false, 0,
		       "note %u (chain %s, size %" PRIu64 ") carries no cosignature of the witness key(s) given: "
		       "not trusted as witnessed, not compared", n->index, n->chain_id, n->size);
		n->skipped = true;
	}
}

/* Key walks, the earliest t0, --emit's gate; the witnessed notes'
 * signatures (with a public key of their host) and cosignatures (with
 * witness keys). */
static int v2_setup(struct vctx *c)
{
	const struct al_vopts *o = c->o;

	if (o->n_vkeys) {
		uint64_t t0 = UINT64_MAX;
		c->swalk = calloc(o->n_vkeys, sizeof(*c->swalk));
		c->skmac = calloc(o->n_vkeys, sizeof(*c->skmac));
		if (!c->swalk || !c->skmac)
			return -ENOMEM;
		for (unsigned k = 0; k < o->n_vkeys; k++) {
			al_seal_walk_init(&c->swalk[k], o->vkeys[k].seed);
			if (o->vkeys[k].p.t0 < t0)
				t0 = o->vkeys[k].p.t0;
		}
		c->has_t0 = true;
		al_format_ts(t0, c->t0_ts);
	}
	c->gate = o->on_record && (o->n_vkeys || o->n_pubkeys);
	for (unsigned i = 0; i < o->n_witness; i++) {
		struct al_vwnote *n = &o->witness[i];
		n->met = n->skipped = false;
		for (unsigned k = 0; k < o->n_pubkeys; k++) {
			const struct al_ckey *pk = &o->pubkeys[k];
			if (pk->host_len != n->host_len || memcmp(pk->host, n->host, n->host_len) != 0)
				continue;
			if (al_note_verify(pk->key, n->origin, n->olen, n->note, n->len, NULL) != 0) {
				report(c, AL_V_BAD_CHECKPOINT, n->src, 0, 0, false, 0,
				       "note %u (chain %s, size %" PRIu64 ") is not signed by the public key of host "
				       "%.*s: not compared", n->index, n->chain_id, n->size, (int)n->host_len,
				       (const char *)n->host);
				n->skipped = true;
			}
			break;
		}
		if (!n->skipped && o->n_wkeys)
			witness_cosigned(c, n);
	}
	return 0;
}

static void v2_done(struct vctx *c)
{
	for (unsigned k = 0; c->swalk && k < c->o->n_vkeys; k++)
		al_seal_walk_wipe(&c->swalk[k]);
	if (c->skmac)
		OPENSSL_cleanse(c->skmac, c->o->n_vkeys * sizeof(*c->skmac));
	free(c->swalk);
	free(c->skmac);
	c->swalk = NULL;
	c->skmac = NULL;
}

/* After the walk: witnessed notes the chains never reached. */
static void witness_end(struct vctx *c, const char *last)
{
	const struct al_vopts *o = c->o;
	struct al_vresult *res = c->res;

	for (unsigned i = 0; i < o->n_witness; i++) {
		const struct al_vwnote *n = &o->witness[i];
		int ch = -1;
		if (n->met || n->skipped)
			continue;
		for (unsigned k = 0; k < res->chains && ch < 0; k++)
			if (res->chain[k].records && strcmp(res->chain[k].chain_id, n->chain_id) == 0)
				ch = (int)k;
		if (ch < 0)
			report(c, AL_V_MISSING_CHAIN, n->src, 0, 0, false, 0,
			       "note %u witnessed chain %s (size %" PRIu64 "), which is not among the inputs",
			       n->index, n->chain_id, n->size);
		else if (n->size > res->chain[ch].tree_size)
			report(c, AL_V_TRUNCATED, chain_file(c, (unsigned)ch, last), 0, 0, false, 0,
			       "%s (note %u) witnessed chain %s at size %" PRIu64 ", but its tree holds %" PRIu64
			       " records: the log no longer holds what was witnessed", n->src, n->index, n->chain_id,
			       n->size, res->chain[ch].tree_size);
	}
}

/* Is the file at path in one of the directories the inputs hold whole? */
static bool in_listed_dir(const struct al_vopts *o, const struct vfile *f)
{
	size_t dl = (size_t)(f->base - f->path);

	for (unsigned k = 0; k < o->n_dirs; k++) {
		size_t l = al_dir_len(o->dirs[k]); /* "logs/": as listed */
		if (dl == l + 1 && strncmp(f->path, o->dirs[k], l) == 0 && f->path[l] == '/')
			return true;
	}
	return false;
}

/* Open input i (path) and read its header. */
static int add_input(struct vctx *c, unsigned i, const char *path, unsigned *kept)
{
	struct vfile *f = &c->files[i];
	const char *sl = strrchr(path, '/');
	uint64_t rs;

	f->fd = -1;
	f->path = path;
	f->base = sl ? sl + 1 : path;
	f->next = f->prevf = f->chain = f->fork_of = -1;
	/* a file under a name the writer renames (its active name, not a
	 * rotated one) stays open: a rotation while we run must not make
	 * the path name another file (at most 64 such descriptors) */
	bool active = !al_rotated_name(f->base, &rs) && *kept < 64;
	*kept += active;
	int r = read_head(c, f, active);
	if (r < 0)
		return r;
	f->limit = f->size;
	c->total_bytes += f->size;
	c->res->files++;
	return 0;
}

/* At most this many files are taken in by rotations that raced the listing. */
#define TAKE_IN_MAX 16

/* Where a renamed predecessor may be taken in: a directory the inputs hold
 * whole, and under --follow also the directory of a file named among the
 * first n0 inputs under an active name (not <name>.<time>-<seq>): a tail of
 * DIR/NAME*, whose glob was expanded before the writer renamed NAME. */
static bool take_in_dir(const struct vctx *c, const struct vfile *g, unsigned n0)
{
	size_t dl = (size_t)(g->base - g->path);
	uint64_t seq;

	if (in_listed_dir(c->o, g))
		return true;
	if (!c->o->follow)
		return false;
	for (unsigned i = 0; i < n0; i++) {
		const struct vfile *f = &c->files[i];
		if ((size_t)(f->base - f->path) == dl && strncmp(f->path, g->path, dl) == 0 &&
		    !al_rotated_name(f->base, &seq))
			return true;
	}
	return false;
}

/* A rotation while a directory the inputs hold whole was listed: the writer
 * renamed its active file after the listing, and its new file (opened under
 * the active name) names the renamed one as its predecessor, which is not
 * among the inputs but is beside it now (or readdir did not return a name
 * being renamed). Take that file in, as the listing would have a moment
 * later: a regular file under exactly the name the header gives, in the
 * same directory. Only where take_in_dir() says: outside --follow, a file
 * named alone keeps its predecessor missing from the inputs, as the caller
 * chose. */
static int take_in_renamed(struct vctx *c, unsigned *kept)
{
	unsigned n0 = c->n;
	int r = c->cap_files > n0 ? by_base_index(c) : 0; /* the inputs listed (those taken in: after them) */
	if (r < 0)
		return r;
	for (unsigned i = 0; i < c->n && c->n < c->cap_files; i++) {
		const struct vfile *g = &c->files[i];
		unsigned lo, hi;
		struct stat st;
		/* only a name a listing returns: no '/', no dot file */
		if (!g->hdr_ok || !g->has_prev || !take_in_dir(c, g, n0) || g->prev_name[0] == '.' ||
		    strchr(g->prev_name, '/'))
			continue;
		by_base_range(c, g->prev_name, &lo, &hi);
		bool found = lo < hi;
		for (unsigned k = c->n_by_base; k < c->n && !found; k++)
			found = strcmp(c->files[k].base, g->prev_name) == 0;
		if (found)
			continue;
		const char *p = keep_path(c, g->path, (int)(g->base - g->path), g->prev_name);
		if (!p)
			return -ENOMEM;
		if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		r = add_input(c, c->n, p, kept);
		if (r == -ENOENT)
			continue; /* renamed again since: a missing file after all */
		if (r < 0 && r != -ENOMEM)
			c->res->err_path = strdup(p);
		if (r < 0)
			return r;
		c->n++;
	}
	return 0;
}

/* An input read but not to be verified: its descriptor closed, its bytes
 * and itself no longer counted (the caller takes it out of c->files). */
static void forget_input(struct vctx *c, struct vfile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	c->total_bytes -= f->size;
	c->res->files--;
}

/* Forget the inputs marked in drop[] and move the others down over them,
 * in order (one pass: a file is ~2 KiB, and there may be thousands). */
static void drop_inputs(struct vctx *c, const bool *drop)
{
	unsigned m = 0;

	for (unsigned i = 0; i < c->n; i++) {
		if (drop[i]) {
			forget_input(c, &c->files[i]);
			continue;
		}
		if (m != i)
			c->files[m] = c->files[i];
		m++;
	}
	for (unsigned i = m; i < c->n; i++)
		c->files[i].fd = -1;
	c->n = m;
}

/* Is some input's header naming base as the file it continues? */
static bool named_as_prev(const struct vctx *c, const char *base)
{
	for (unsigned i = 0; i < c->n; i++)
		if (c->files[i].has_prev && strcmp(c->files[i].prev_name, base) == 0)
			return true;
	return false;
}

static int cmp_inode(const void *a, const void *b, void *arg)
{
	const struct vctx *c = arg;
	unsigned i = *(const unsigned *)a, k = *(const unsigned *)b;
	const struct vfile *f = &c->files[i], *g = &c->files[k];
	if (f->dev != g->dev)
		return f->dev < g->dev ? -1 : 1;
	if (f->ino != g->ino)
		return f->ino < g->ino ? -1 : 1;
	return (i > k) - (i < k);
}

/* One file reached under two names (a path given twice, a file given alone
 * and in its directory, a hard link) is read once: read twice, its records
 * would be a second first file or a fork of itself, "inserted" where
 * nothing was. The name kept is the one a successor's header uses (the
 * chain links by name), else the first given; another name than the one
 * kept is a same-file notice (docs/format.md 11); one name spelt twice
 * ("x", "./x", a directory and a file in it) is not worth one. Identity is
 * the inode each was opened at (vfile_fd). */
static int merge_same_files(struct vctx *c)
{
	unsigned n = c->n, *ix = malloc((n ? n : 1) * sizeof(*ix)), *first = malloc((n ? n : 1) * sizeof(*first));
	bool *drop = calloc(n ? n : 1, sizeof(*drop));
	if (!ix || !first || !drop) {
		free(ix);
		free(first);
		free(drop);
		return -ENOMEM;
	}
	/* first[i]: the first input at i's inode (i itself when none before) */
	for (unsigned i = 0; i < n; i++)
		ix[i] = i;
	qsort_r(ix, n, sizeof(*ix), cmp_inode, c);
	for (unsigned j = 0, k = 0; j < n; j++) {
		const struct vfile *f = &c->files[ix[j]], *g = &c->files[ix[k]];
		if (f->ino != g->ino || f->dev != g->dev)
			k = j;
		first[ix[j]] = ix[k];
	}
	for (unsigned i = 0; i < n; i++) {
		if (first[i] == i)
			continue;
		struct vfile *f = &c->files[i], *g = &c->files[first[i]]; /* (first[i] < i) */
		if (strcmp(g->base, f->base) != 0 && !named_as_prev(c, g->base) && named_as_prev(c, f->base)) {
			struct vfile t = *g; /* keep f's name, in g's place */
			*g = *f;
			*f = t;
		}
		if (strcmp(g->base, f->base) != 0) /* not "./x" and "x": two names */
			report(c, AL_V_SAME_FILE, f->path, 0, 0, false, 0,
			       "the same file as %s (one file under two names): read once", g->path);
		drop[i] = true;
	}
	drop_inputs(c, drop);
	free(drop);
	free(ix);
	free(first);
	return 0;
}

/* --follow: an input under a writer's active name whose first line is
 * not complete is a rotation's new file being created (it was listed
 * with its header, then replaced before it was opened). It is left out,
 * as the listing leaves such a file out (auditlog-verify): the follower
 * meets it as the successor of the file it tails. Kept, it would be a
 * torn first header and a second chain reported by an attempt that is
 * then made again. A torn file under a rotated name is no file being
 * created: it stays, and is reported. */
static int drop_being_created(struct vctx *c)
{
	bool *drop = calloc(c->n ? c->n : 1, sizeof(*drop));
	if (!drop)
		return -ENOMEM;
	for (unsigned i = 0; i < c->n; i++) {
		uint64_t seq;
		drop[i] = c->files[i].torn_header && !al_rotated_name(c->files[i].base, &seq);
	}
	drop_inputs(c, drop);
	free(drop);
	return 0;
}

/* --follow, several chains at names not of the rotated form: the writer's
 * is the one whose active path every other one extends (audit.log beside
 * audit.log.bak or audit.log~, all that DIR/NAME* matches). NULL when no
 * path is extended by all the others: two writers' logs (softtoken-0.log
 * and softtoken-1.log), which names cannot tell from a copy dropped beside. */
static const char *follow_owner(const struct vctx *c)
{
	const struct vfile *s = NULL;
	uint64_t seq;

	for (unsigned i = 0; i < c->n; i++) {
		const struct vfile *f = &c->files[i];
		if (f->hdr_ok && !al_rotated_name(f->base, &seq) && (!s || strlen(f->path) < strlen(s->path)))
			s = f;
	}
	if (!s)
		return NULL;
	size_t n = strlen(s->path);
	for (unsigned i = 0; i < c->n; i++) {
		const struct vfile *f = &c->files[i];
		if (f->hdr_ok && !al_rotated_name(f->base, &seq) && strcmp(f->chain_id, s->chain_id) != 0 &&
		    strncmp(f->path, s->path, n) != 0)
			return NULL;
	}
	return s->chain_id;
}

/* --follow tails one chain: the one whose trusted header a file under a
 * writer's active name holds, else the only one any trusted header names;
 * a resumed tail's (o->follow_chain) must be that one, or one of those at
 * an active name (the others are then told as for any other chain).
 * A file whose trusted header names another chain (a log copied beside it,
 * the old chain a writer's untrusted-tail restart renamed aside) is left
 * out, one extra-chain finding for each such chain: the tail verifies and
 * passes on the chain it follows and no other. Active names of two chains
 * (two writers' logs, or a copy under a name no writer rotates): -EXDEV,
 * before anything is reported. */
static int follow_pick(struct vctx *c)
{
	const char *want = c->o->follow_chain, *id = NULL, *only = NULL;
	bool two_active = false, two = false, want_active = false, want_any = false;

	for (unsigned i = 0; i < c->n; i++) {
		const struct vfile *f = &c->files[i];
		uint64_t seq;
		if (!f->hdr_ok)
			continue;
		bool mine = want && strcmp(f->chain_id, want) == 0;
		if (!only)
			only = f->chain_id;
		two |= strcmp(only, f->chain_id) != 0;
		want_any |= mine;
		if (al_rotated_name(f->base, &seq))
			continue;
		want_active |= mine;
		if (!id)
			id = f->chain_id;
		two_active |= strcmp(id, f->chain_id) != 0;
	}
	if (want_active) {
		id = want; /* a resumed tail at an active name: the others are told below */
	} else if (two_active && !want && (id = follow_owner(c))) {
		; /* the writer's, by its names: the others are told below */
	} else if (two_active || (!id && two)) {
		/* the chains in res->chain, for the caller's message */
		for (unsigned i = 0; i < c->n; i++) {
			uint64_t seq;
			if (c->files[i].hdr_ok && (!two_active || !al_rotated_name(c->files[i].base, &seq)))
				chain_of(c->res, c->files[i].chain_id);
		}
		return -EXDEV;
	} else if (want) {
		/* a resumed tail: its chain must be here, and no other at the
		 * active name (id, when set, is that other) */
		if (!want_any || id) {
			if (id)
				chain_of(c->res, id);
			return -EIDRM;
		}
		id = want;
	}
	if (!id)
		id = only;
	if (!id)
		return 0; /* no trusted header: the walk reports what there is */
	snprintf(c->follow_id, sizeof(c->follow_id), "%s", id);
	bool *told = calloc(c->n ? c->n : 1, sizeof(*told));
	if (!told)
		return -ENOMEM;
	for (unsigned i = 0; i < c->n; i++) {
		const struct vfile *f = &c->files[i];
		if (!f->hdr_ok || told[i] || strcmp(f->chain_id, c->follow_id) == 0)
			continue;
		unsigned k = 0;
		for (unsigned j = i; j < c->n; j++)
			if (c->files[j].hdr_ok && strcmp(c->files[j].chain_id, f->chain_id) == 0)
				told[j] = true, k++;
		report(c, AL_V_EXTRA_CHAIN, f->path, 0, 0, false, 0,
		       "chain %s (%u file(s) among the inputs, this one first) is not the chain --follow tails "
		       "(%s): not verified",
		       f->chain_id, k, c->follow_id);
	}
	drop_inputs(c, told);
	free(told);
	return 0;
}

int al_verify_files(char *const *paths, unsigned n, const struct al_vopts *o, struct al_vresult *res)
{
	struct vctx c = {.o = o, .res = res, .n = n, .sha_ni = al_sha256_ni_ok()};
	const char *last = n ? paths[n - 1] : ""; /* where a finding of no file is told */
	unsigned kept = 0;
	int r = 0;

	memset(res, 0, sizeof(*res));
	c.cap_files = n + (o->n_dirs || o->follow ? TAKE_IN_MAX : 0);
	c.files = calloc(c.cap_files ? c.cap_files : 1, sizeof(*c.files));
	c.dec = malloc(AL_LINE_MAX);
	c.line2 = malloc(AL_LINE_MAX);
	c.work = malloc(AL_HASH_LEN + AL_BODY_MAX);
	res->chain = calloc(c.cap_files ? c.cap_files : 1, sizeof(*res->chain));
	if (!c.files || !c.dec || !c.work || !c.line2 || !res->chain) {
		r = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < c.cap_files; i++)
		c.files[i].fd = -1;
	for (unsigned i = 0; i < n; i++) {
		r = add_input(&c, i, paths[i], &kept);
		if (r < 0 && r != -ENOMEM)
			res->err_path = strdup(paths[i]);
		if (r < 0)
			goto out;
	}
	if (o->follow && (r = drop_being_created(&c)) < 0)
		goto out;
	r = take_in_renamed(&c, &kept);
	if (r < 0)
		goto out;
	r = merge_same_files(&c);
	if (r < 0)
		goto out;
	if (o->follow && (r = follow_pick(&c)) < 0)
		goto out;
	n = c.n;
	r = by_base_index(&c);
	if (r < 0)
		goto out;
	mark_sealed(&c);
	/* links: the successor of a file is the file whose header names it as
	 * prev, in the same chain (an altered header or none: by name alone) */
	for (unsigned i = 0; i < n; i++) {
		struct vfile *g = &c.files[i];
		if (!g->has_prev || g->sealed_branch)
			continue;
		int found = -1;
		unsigned lo, hi;
		by_base_range(&c, g->prev_name, &lo, &hi);
		for (unsigned j = lo; j < hi; j++) {
			unsigned k = c.by_base[j];
			struct vfile *f = &c.files[k];
			if (k == i || f->sealed_branch)
				continue;
			if (f->hdr_ok && g->hdr_ok && strcmp(f->chain_id, g->chain_id) == 0)
				found = (int)k;
			else if (found < 0 && (!f->hdr_ok || !g->hdr_ok))
				found = (int)k;
		}
		if (found >= 0)
			link_files(&c, i, (unsigned)found);
		else if (g->hdr_ok && o->has_from && g->prev_seq < o->from_seq)
			; /* wholly before --from: not read if it were here (set_end), so
			   * its absence (retention behind a resumed tail) says nothing */
		else if (g->hdr_ok)
			report(&c, AL_V_MISSING_FILE, g->path, 1, 0, true, g->prev_seq + 1,
			       "continues %s (up to seq %" PRIu64 "), which is not among the inputs", g->prev_name,
			       g->prev_seq);
		else
			g->relink = true;
	}
	/* a file whose header is altered (its prev_name names nothing) or
	 * unreadable (but a trusted successor names it): its predecessor is the
	 * trusted file with no successor that starts last before it */
	for (unsigned i = 0; i < n; i++) {
		struct vfile *g = &c.files[i], *h = g->next >= 0 ? &c.files[g->next] : NULL;
		const char *id = NULL;
		uint64_t bound = 0;
		int best = -1;
		if (g->sealed_branch) {
			continue;
		} else if (g->relink) {
			id = g->chain_id;
			bound = g->first_seq;
		} else if (!g->has_header && g->prevf < 0 && h && h->hdr_ok) {
			id = h->chain_id;
			bound = h->prev_seq;
		} else {
			continue;
		}
		for (unsigned k = 0; k < n; k++) {
			struct vfile *f = &c.files[k];
			if (k != i && !f->sealed_branch && f->next < 0 && f->hdr_ok && f->first_seq < bound &&
			    (g->relink || strcmp(f->chain_id, id) == 0) &&
			    (best < 0 || f->first_seq > c.files[best].first_seq))
				best = (int)k;
		}
		if (best >= 0)
			link_files(&c, i, (unsigned)best);
	}
	resolve_forks(&c);
	/* chains: a trusted header names its own; an altered or missing header
	 * takes the chain of the files it is linked with (a sealed file: the
	 * chain of the header that names it) */
	for (unsigned i = 0; i < n; i++)
		if (c.files[i].hdr_ok || c.files[i].sealed_branch)
			c.files[i].chain = chain_of(res, c.files[i].chain_id);
	for (bool changed = true; changed;) {
		changed = false;
		for (unsigned i = 0; i < n; i++) {
			struct vfile *f = &c.files[i];
			if (f->chain >= 0)
				continue;
			if (f->next >= 0 && c.files[f->next].chain >= 0)
				f->chain = c.files[f->next].chain;
			else if (f->prevf >= 0 && c.files[f->prevf].chain >= 0)
				f->chain = c.files[f->prevf].chain;
			changed |= f->chain >= 0;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		struct vfile *f = &c.files[i];
		if (f->chain < 0)
			f->chain = chain_of(res, f->has_header ? f->chain_id : "");
		res->chain[f->chain].files++;
	}
	if (o->follow) {
		/* what no trusted header or link put in the chain tailed (a
		 * file with no header, an altered header of another chain) */
		c.follow_chain = c.follow_id[0] ? chain_of(res, c.follow_id) : 0;
		if (!c.follow_id[0] && res->chains != 1) {
			r = -EAGAIN; /* no trusted header: nothing to tail (nothing reported yet) */
			goto out;
		}
		for (unsigned i = 0; i < n; i++) {
			struct vfile *f = &c.files[i];
			if (f->chain == c.follow_chain || f->torn_header) /* (plan() tells a torn one) */
				continue;
			f->visited = true;
			report(&c, AL_V_EXTRA_CHAIN, f->path, 0, 0, false, 0,
			       "%s, and no link to the chain --follow tails (%s): not verified",
			       f->has_header ? "an altered header of another chain" : "no header",
			       res->chain[c.follow_chain].chain_id);
		}
	}
	r = anchors_init(&c, n ? n : 1);
	if (r < 0)
		goto out;
	r = plan(&c);
	if (r < 0)
		goto out;
	r = v2_setup(&c);
	if (r < 0)
		goto out;
	if (o->follow) { /* tail the head of the one chain: no successor, started last */
		int head = -1;
		for (unsigned i = 0; i < n; i++)
			if (c.files[i].chain == c.follow_chain && c.files[i].next < 0 && !c.files[i].side &&
			    !c.files[i].sealed_branch && (head < 0 || c.files[i].first_seq > c.files[head].first_seq))
				head = (int)i;
		if (head < 0) {
			r = -ELOOP; /* every file of the chain has a successor: its links loop */
			goto out;
		}
		c.files[head].follow = true;
		c.files[head].limit = UINT64_MAX;
		c.follow_path = active_path(&c, c.files[head].path);
		if (!c.follow_path) {
			r = -ENOMEM;
			goto out;
		}
	}
	/* walk each chain from its first file, then from each file whose
	 * predecessor is missing (in seq order), then whatever no start reached
	 * (a cycle of links); then the side files */
	for (int pass = 0; pass < 4; pass++) {
		for (unsigned j = 0; j < n; j++) {
			unsigned i = c.order[j];
			struct vfile *f = &c.files[i];
			bool start = f->prevf < 0 && !f->side;
			if (f->visited || (pass == 0 && !(start && f->primary)) || (pass == 1 && !start) ||
			    (pass == 2 && f->side) || (pass == 3 && !f->side))
				continue;
			r = walk_from(&c, (int)i, pass == 3);
			if (r < 0)
				goto out;
		}
	}
	r = overlaps(&c);
	if (r < 0)
		goto out;
	anchors(&c, last);
	witness_end(&c, last);
out:
	if (r < 0 && r != -ENOMEM && r != -EXDEV && r != -EIDRM && r != -EAGAIN && !res->err_path && c.cur)
		res->err_path = strdup(c.cur->path); /* the walk's file */
	v2_done(&c);
	for (unsigned i = 0; c.files && i < c.cap_files; i++)
		if (c.files[i].fd >= 0)
			close(c.files[i].fd);
	while (c.more) {
		struct vfile *nf = c.more;
		c.more = nf->more;
		if (nf->fd >= 0)
			close(nf->fd);
		free(nf);
	}
	while (c.names) {
		char *p = c.names;
		memcpy(&c.names, p, sizeof(char *));
		free(p);
	}
	if (c.pool != o->pool)
		al_vpool_free(c.pool);
	free(c.anch_seen);
	free(c.order);
	free(c.by_base);
	free(c.files);
	free(c.dec);
	free(c.line2);
	free(c.work);
	return r;
}

/* ---- a stream: the bytes of a log fed in order -------------------------------- */

struct al_vstream {
	struct vctx c;
	struct walk *w;
	char *name;
	struct vfile *f;      /* the segment being walked; NULL before the first line */
	uint64_t lineno, off; /* complete lines and their bytes so far */
	uint8_t *part;        /* a line not complete yet (part_cap + 1: room for its '\n') */
	size_t plen, part_cap; /* its bytes (at most WALK_BUF); grown as lines need */
	/* Crash damage: a stream cannot look ahead for the recovery record that
	 * repairs it (find_bridge), nor read back the lines it accepted, so its
	 * lines wait here (the stream's bytes from defer_d on), unchecked:
	 * - from an unparseable line right after a verified record (the wait
	 *   find_bridge asks for), until that record comes;
	 * - in v2, from right after each seal (or header) the walk accepts (a
	 *   hold: docs/format.md 19.5, the complete lines after the last seal
	 *   are part of a crash's damage), also until the next seal or header
	 *   line comes after lines that all look whole (wait_over);
	 * or until STREAM_DEFER bytes wait (defer_full), or the stream ends. Then they are
	 * checked: as the damage the record repairs (w->bridge), or one by one
	 * as they would have been at once. */
	bool defer_now;       /* find_bridge asked: this line starts the wait */
	bool hold_now;        /* a seal or header was accepted: a hold starts after it */
	bool deferring, holding, replaying;
	bool hold_damaged;    /* a line of the hold is not whole (looks_whole) */
	uint64_t defer_d, defer_line0, no_bridge_d;
	uint64_t hold_d, hold_line; /* where the hold starts: the next line */
	uint8_t *dbuf;        /* the waiting lines' bytes, '\n' included */
	size_t dlen, dcap;
	uint64_t *doff;       /* each one's stream offset */
	size_t dn, dncap;
};

/* The most a wait holds: its bytes and their index (beyond it the lines are
 * checked one by one, and damage a recovery record names is not told from
 * other findings: docs/auditlog-verify.md "Streams"). */
#define STREAM_DEFER (8u << 20)

void al_vstream_free(struct al_vstream *s)
{
	if (!s)
		return;
	while (s->c.more) {
		struct vfile *nf = s->c.more;
		s->c.more = nf->more;
		free(nf);
	}
	if (s->w) {
		free(s->w->ring_copy);
		free(s->w->v2.pend);
		free(s->w->v2.wn);
	}
	v2_done(&s->c);
	free(s->w);
	free(s->c.anch_seen);
	free(s->c.dec);
	free(s->c.line2);
	free(s->c.work);
	free(s->part);
	free(s->name);
	free(s->dbuf);
	free(s->doff);
	free(s);
}

int al_vstream_new(const char *name, const struct al_vopts *o, struct al_vresult *res, struct al_vstream **ret)
{
	struct al_vstream *s = calloc(1, sizeof(*s));

	memset(res, 0, sizeof(*res));
	if (!s)
		return -ENOMEM;
	s->c.o = o;
	s->c.res = res;
	s->c.dec = malloc(AL_LINE_MAX);
	s->c.line2 = malloc(AL_LINE_MAX);
	s->c.work = malloc(AL_HASH_LEN + AL_BODY_MAX);
	s->w = calloc(1, sizeof(*s->w));
	s->part_cap = AL_LINE_MAX;
	s->part = malloc(s->part_cap + 1);
	s->name = strdup(name);
	res->chain = calloc(1, sizeof(*res->chain)); /* one chain a stream */
	if (s->w)
		s->w->ring_copy = malloc((size_t)RING * AL_LINE_MAX);
	if (!s->c.dec || !s->c.line2 || !s->c.work || !s->w || !s->w->ring_copy || !s->part || !s->name ||
	    !res->chain) {
		al_vstream_free(s);
		al_vresult_free(res);
		return -ENOMEM;
	}
	s->w->c = &s->c;
	s->c.stream = s;
	s->w->ch = &res->chain[0];
	if (anchors_init(&s->c, 1) < 0 || v2_setup(&s->c) < 0) {
		al_vstream_free(s);
		al_vresult_free(res);
		return -ENOMEM;
	}
	*ret = s;
	return 0;
}

/* A segment of the stream: what a file is to al_verify_files. */
static struct vfile *segment(struct al_vstream *s, const struct vfile *head)
{
	struct vfile *f = malloc(sizeof(*f));
	if (!f)
		return NULL;
	*f = *head;
	f->path = f->base = s->name;
	f->fd = -1;
	f->next = f->prevf = -1;
	f->chain = 0;
	f->more = s->c.more;
	s->c.more = f;
	s->c.res->files++;
	s->c.res->chain[0].files++;
	return f;
}

/* One complete line (line[len] is its '\n'), or (piece) WALK_BUF bytes of a
 * longer one, checked as walk_file checks them: one unparseable line. */
static int stream_check(struct al_vstream *s, const uint8_t *line, size_t len, bool piece, uint64_t lineno,
			uint64_t off)
{
	static const char hdr[] = "\"type\":\"header\"";
	struct vctx *c = &s->c;
	struct walk *w = s->w;
	struct vfile head = {0};

	/* the stream's first line, or a trusted header of this chain that
	 * continues from the record before it or later (the next file of a
	 * rotated set, concatenated; later: a file is missing): a segment
	 * starts, and its link is checked as a file's header is. A header
	 * that links back is an inserted line, as in a file. */
	bool first = !s->f, start = first;
	char *id = c->res->chain[0].chain_id;
	if (!piece && (first || memmem(line, len < 160 ? len : 160, hdr, sizeof(hdr) - 1))) {
		parse_head(c, &head, line, len + 1);
		/* (a header that links a little back, to a recent record, is the
		 * next file's: records were appended to the one before it; one
		 * that links further back, or repeats a recent header, is a copy) */
		bool next_file = head.hdr_ok && head.has_prev && (!id[0] || strcmp(head.chain_id, id) == 0) &&
				 (!w->have_next || head.prev_seq + 1 >= w->next ||
				  (w->next - head.prev_seq - 1 < RING && seen(w, head.first_seq, line, len) != 2));
		/* an altered header right where the next record is due: the next
		 * file's, altered (its line 1, as among files) */
		bool altered_next = head.has_header && !head.hdr_ok && w->have_next &&
				    (head.first_seq == w->next || (head.has_prev && head.prev_seq + 1 == w->next));
		start = first || next_file || altered_next;
	}
	if (start) {
		struct vfile *f = segment(s, &head);
		if (!f)
			return -ENOMEM;
		if (first) {
			c->res->chains = 1;
		} else {
			s->f->lines = lineno - 1 - s->f->base_line;
			s->f->walked = s->f->size = off - s->f->base_off;
			c->cur = s->f;
			flush_damage(w);
		}
		if (head.hdr_ok && !id[0]) /* the chain is named by a trusted header */
			snprintf(id, sizeof(c->res->chain[0].chain_id), "%s", head.chain_id);
		f->base_line = lineno - 1;
		f->base_off = off;
		w->pf = s->f;
		w->f = s->f = f;
		enter_file(w, f);
	}
	check_line(w, line, piece ? AL_LINE_MAX : len, lineno, off);
	return 0;
}

/* find_bridge, in a stream: the line at d (line lineno) starts the wait. */
static bool stream_defer(struct al_vstream *s, uint64_t lineno, uint64_t d)
{
	if (d == s->no_bridge_d && s->replaying)
		return false; /* waited for it already: nothing came */
	s->defer_now = true;
	s->defer_d = d;
	s->defer_line0 = lineno;
	return true;
}

/* v2_snapshot, in a stream: a seal or a header was accepted; the lines from
 * d (line lineno) on are held. */
static void stream_hold(struct al_vstream *s, uint64_t d, uint64_t lineno)
{
	s->hold_now = true;
	s->hold_d = d;
	s->hold_line = lineno;
}

/* Might this line be a whole record, as far as a crash can tell? What a
 * crash leaves is not: a torn line (it lacks the end of its `hash` member:
 * those quotes are escaped in any string), NUL bytes, or a line run into the
 * start of the next one (a lost '\n'). Cheaper than parsing: this runs on
 * every line a stream holds. */
static bool looks_whole(const uint8_t *line, size_t len)
{
	static const char start[] = "{\"@timestamp\":\"", hash[] = ",\"hash\":\"";
	const size_t sl = sizeof(start) - 1, hl = sizeof(hash) - 1;

	if (len + 1 > AL_LINE_MAX || len < sl + hl + AL_HASH_LEN * 2 + 2 || memcmp(line, start, sl) != 0 ||
	    memcmp(line + len - 2, "\"}", 2) != 0 || memcmp(line + len - 2 - AL_HASH_LEN * 2 - hl, hash, hl) != 0 ||
	    memchr(line, 0, len))
		return false;
	for (const uint8_t *q = line + 1, *end = line + len; (q = memchr(q, '{', (size_t)(end - q))); q++)
		if ((size_t)(end - q) >= sl && memcmp(q, start, sl) == 0)
			return false;
	return true;
}

/* Has the wait reached its bound (its bytes and their index)? */
static bool defer_full(const struct al_vstream *s)
{
	return s->dlen + s->dn * sizeof(*s->doff) > STREAM_DEFER;
}

/* A line joins the wait. A wait is released once it passes STREAM_DEFER
 * (defer_full), and a waiting line is shorter than WALK_BUF, so the buffers
 * grow to at most STREAM_DEFER + WALK_BUF bytes and STREAM_DEFER / 8 + 1
 * offsets. */
static int defer_add(struct al_vstream *s, const uint8_t *line, size_t len, uint64_t off)
{
	const size_t max_buf = STREAM_DEFER + WALK_BUF + 1, max_n = STREAM_DEFER / sizeof(*s->doff) + 1;

	assert(s->dlen + len + 1 <= max_buf && s->dn < max_n);
	if (s->dlen + len + 1 > s->dcap) {
		size_t cap = s->dcap ? s->dcap : 65536;
		while (cap < s->dlen + len + 1)
			cap = cap * 2 < max_buf ? cap * 2 : max_buf;
		uint8_t *p = realloc(s->dbuf, cap);
		if (!p)
			return -ENOMEM;
		s->dbuf = p;
		s->dcap = cap;
	}
	if (s->dn == s->dncap) {
		size_t cap = s->dncap ? (s->dncap * 2 < max_n ? s->dncap * 2 : max_n) : 256;
		uint64_t *p = realloc(s->doff, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->doff = p;
		s->dncap = cap;
	}
	memcpy(s->dbuf + s->dlen, line, len);
	s->dbuf[s->dlen + len] = '\n';
	s->dlen += len + 1;
	s->doff[s->dn++] = off;
	return 0;
}

/* Is this waiting line the recovery record that repairs the damage the wait
 * is for (recovery.c's rule over the waiting bytes)? Then the walk knows the
 * span (w->bridge) and the wait can end. */
static bool defer_try(struct al_vstream *s, const uint8_t *line, size_t len, uint64_t off)
{
	struct walk *w = s->w;
	struct al_parsed p;
	size_t eoff;

	if (!al_maybe_recovery(line, len) || len + 1 > AL_LINE_MAX ||
	    al_parse(line, len, s->c.line2, &p, &eoff) != AL_PERR_OK)
		return false;
	/* (the walk is still at the record before the wait: nothing in it was
	 * checked. A recovery record names offsets in its file: the segment's.) */
	uint64_t base = w->f->base_off;
	struct al_tailrec t = {.seq = w->next - 1, .version = (uint8_t)w->last_version,
			       .type = (uint8_t)w->last_type};
	struct al_recovery_mem m = {.buf = s->dbuf, .start = s->defer_d - base, .n = s->dlen};
	struct al_recovery_io io = al_recovery_mem_io(&m);
	memcpy(t.hash, w->prev, AL_HASH_LEN);
	if (w->have_ts)
		memcpy(t.ts, w->last_ts, AL_TS_LEN);
	else
		memset(t.ts, '0', AL_TS_LEN);
	if (!al_recovery_repairs(&p, line, off - base, s->defer_d - base, &t, &io, s->c.work))
		return false;
	w->bridge = true;
	w->bridge_at = off;
	w->bridge_off = s->defer_d;
	w->bridge_line = s->defer_line0;
	w->bridge_len = p.rec.f[AL_F_DAMAGE_LENGTH].u;
	return true;
}

/* Does this waiting line end the wait: the recovery record that repairs the
 * damage (defer_try), or, in a hold, a seal or a header after lines that all
 * look whole (a new hold starts after it)? After a line that is not whole a
 * hold is crash damage (NULs, then a later batch's complete lines and their
 * seal), or other damage: it waits on for the recovery record, as the file
 * walk looks ahead from the seal. One look at the line's type (the fourth
 * member: within its first 96 bytes). */
static bool wait_over(struct al_vstream *s, const uint8_t *line, size_t len, uint64_t off)
{
	static const char type[] = ",\"type\":\"";
	const size_t tl = sizeof(type) - 1;
	const uint8_t *t = memmem(line, len < 96 ? len : 96, type, tl);
	size_t rest = t ? len - (size_t)(t + tl - line) : 0;

	if (t && rest > 9 && memcmp(t + tl, "recovery\"", 9) == 0)
		return defer_try(s, line, len, off);
	if (!s->holding || s->hold_damaged)
		return false;
	if (!looks_whole(line, len)) {
		s->hold_damaged = true;
		return false;
	}
	return t && ((rest > 5 && memcmp(t + tl, "seal\"", 5) == 0) ||
		     (rest > 7 && memcmp(t + tl, "header\"", 7) == 0));
}

/* Waiting line i: its bytes and length (without its '\n'). */
static const uint8_t *dline(const struct al_vstream *s, size_t i, size_t *ret_len)
{
	size_t at = (size_t)(s->doff[i] - s->defer_d);
	size_t end = i + 1 < s->dn ? (size_t)(s->doff[i + 1] - s->defer_d) : s->dlen;
	*ret_len = end - at - 1;
	return s->dbuf + at;
}

/* A wait starts: a hold after the line just checked (hold_now), or a wait
 * from it (defer_now: the caller adds it). Returns whether it was defer_now. */
static bool wait_start(struct al_vstream *s)
{
	bool from_this = s->defer_now;

	s->deferring = s->defer_now || s->hold_now;
	s->holding = !s->defer_now && s->hold_now;
	s->hold_damaged = false;
	if (s->holding) {
		s->defer_d = s->hold_d;
		s->defer_line0 = s->hold_line;
	}
	s->defer_now = s->hold_now = false;
	return from_this;
}

/* The wait is over: check the lines that waited (a repair found, or not:
 * no_bridge_d; a hold's seal or header came). One of them may start a new
 * wait: the lines from it (or, a hold, after it) on wait again, for the lines
 * still to come, unless what ends it is among them. */
static int defer_release(struct al_vstream *s)
{
	while (s->deferring) {
		size_t i = 0, len;
		s->deferring = s->holding = false;
		s->replaying = true;
		for (; i < s->dn; i++) {
			const uint8_t *line = dline(s, i, &len);
			int r = stream_check(s, line, len, false, s->defer_line0 + i, s->doff[i]);
			if (r < 0)
				return r;
			if (s->defer_now || s->hold_now)
				break;
		}
		s->replaying = false;
		if (i == s->dn) {
			s->dn = s->dlen = 0;
			break;
		}
		/* a new wait, from line i or after it (its defer_d and line are set) */
		uint64_t base = s->doff[0];
		size_t from = wait_start(s) ? i : i + 1;
		size_t at = from < s->dn ? (size_t)(s->doff[from] - base) : s->dlen;
		memmove(s->dbuf, s->dbuf + at, s->dlen - at);
		s->dlen -= at;
		memmove(s->doff, s->doff + from, (s->dn - from) * sizeof(*s->doff));
		s->dn -= from;
		bool over = false;
		for (size_t j = s->holding ? 0 : 1; j < s->dn && !over; j++) {
			const uint8_t *line = dline(s, j, &len);
			over = wait_over(s, line, len, s->doff[j]);
		}
		if (!over && !defer_full(s))
			return 0; /* it waits for what comes next */
		if (!over)
			s->no_bridge_d = s->defer_d;
	}
	return 0;
}

/* A line that waits: the repair? The end of a hold? Or has the wait lasted
 * long enough? */
static int defer_line(struct al_vstream *s, const uint8_t *line, size_t len, uint64_t off)
{
	int r = defer_add(s, line, len, off);

	if (r < 0)
		return r;
	if (wait_over(s, line, len, off))
		return defer_release(s);
	if (defer_full(s)) {
		s->no_bridge_d = s->defer_d;
		return defer_release(s);
	}
	return 0;
}

static int stream_line(struct al_vstream *s, const uint8_t *line, size_t len, bool piece)
{
	uint64_t lineno = ++s->lineno, off = s->off;
	int r;

	s->off += len + !piece;
	s->c.res->bytes += len + !piece;
	if (s->deferring && !piece)
		return defer_line(s, line, len, off);
	while (s->deferring) { /* a line longer than any record: no repair is waited for */
		s->no_bridge_d = s->defer_d;
		r = defer_release(s);
		if (r < 0)
			return r;
	}
	r = stream_check(s, line, len, piece, lineno, off);
	if (r < 0 || !wait_start(s))
		return r;
	return defer_add(s, line, len, off);
}

int al_vstream_feed(struct al_vstream *s, const uint8_t *buf, size_t n)
{
	while (n) {
		const uint8_t *nl = memchr(buf, '\n', n);
		size_t take = nl ? (size_t)(nl - buf) : n, k;
		int r = 0;
		if (nl && !s->plen && take < WALK_BUF) { /* a whole line: checked where it is */
			r = stream_line(s, buf, take, false);
			k = take + 1;
		} else { /* gathered, up to WALK_BUF bytes */
			k = take < WALK_BUF - s->plen ? take : WALK_BUF - s->plen;
			if (s->plen + k > s->part_cap) {
				size_t cap = s->part_cap;
				while (cap < s->plen + k)
					cap = cap * 2 < WALK_BUF ? cap * 2 : WALK_BUF;
				uint8_t *p = realloc(s->part, cap + 1);
				if (!p)
					return -ENOMEM;
				s->part = p;
				s->part_cap = cap;
			}
			memcpy(s->part + s->plen, buf, k);
			s->plen += k;
			if (s->plen == WALK_BUF) { /* as walk_file: a piece of a longer line */
				r = stream_line(s, s->part, s->plen, true);
				s->plen = 0;
			} else if (nl && k == take) {
				s->part[s->plen] = '\n';
				r = stream_line(s, s->part, s->plen, false);
				s->plen = 0;
				k++; /* the '\n' */
			}
		}
		if (r < 0)
			return r;
		buf += k;
		n -= k;
	}
	return 0;
}

int al_vstream_end(struct al_vstream *s)
{
	struct vctx *c = &s->c;
	struct walk *w = s->w;

	while (s->deferring) { /* the stream ended before a repair came */
		s->no_bridge_d = s->defer_d;
		int r = defer_release(s);
		if (r < 0) {
			al_vstream_free(s);
			return r;
		}
	}

	c->cur = s->f;
	if (!c->res->chain[0].chain_id[0] && c->more) { /* no trusted header: the first one's id */
		struct vfile *f = c->more;
		while (f->more)
			f = f->more;
		if (f->has_header)
			memcpy(c->res->chain[0].chain_id, f->chain_id, sizeof(f->chain_id));
	}
	if (s->plen) { /* the last line without its '\n' */
		settle_end(w, NULL);
		flush_damage(w);
		report(c, AL_V_TRUNCATED, s->name, s->lineno + 1, s->off, w->have_next, w->have_next ? w->next : 0,
		       "the stream ends inside a line (%zu bytes without a newline)", s->plen);
		c->res->bytes += s->plen;
	}
	flush_damage(w);
	settle_end(w, NULL);
	moved_inserted(w);
	v2_end(w);
	c->cur = NULL;
	anchors(c, s->name);
	witness_end(c, s->name);
	v2_done(c);
	al_vstream_free(s);
	return 0;
}

void al_vresult_free(struct al_vresult *res)
{
	if (!res)
		return;
	free(res->chain);
	res->chain = NULL;
	free(res->err_path);
	res->err_path = NULL;
}
