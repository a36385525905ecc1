/* SPDX-License-Identifier: MIT */
/*
 * The verification engine (issue 3): walks log files written by
 * libauditlog, groups them into chains by chain_id, orders each chain by its
 * headers' links, and reports every problem with file, line, byte offset and
 * seq. Streams each file (constant memory in the log's size, except the
 * bounded look-ahead a damaged region needs). Used by auditlog-verify, the
 * token and the tests; auditlog_verifier_* (verify_api.c) is its public face.
 */
#ifndef AUDITLOG_VERIFY_H
#define AUDITLOG_VERIFY_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "format.h"
#include "keyfile.h"

/* docs/format.md section 11 has the decision table. */
enum al_vclass {
	AL_V_MODIFIED,     /* a record's hash does not follow from its predecessor */
	AL_V_INSERTED,     /* a record that cannot belong where it is (a second record
			    * with a seq already seen, a header inside a file) */
	AL_V_DELETED,      /* seq gap: records missing */
	AL_V_DUPLICATED,   /* a record seen before, again */
	AL_V_REORDERED,    /* seq or timestamp goes backwards */
	AL_V_NONCANONICAL, /* valid JSON, not the canonical line */
	AL_V_UNPARSEABLE,  /* not a JSON object line at all */
	AL_V_VERSION,      /* unknown version, a version decrease, or below --min-version */
	AL_V_MISSING_FILE, /* a file the chain needs is not among the inputs */
	AL_V_FORKED,       /* two files continue the same record */
	AL_V_TRUNCATED,    /* a file or the chain ends before what something names */
	AL_V_RECOVERED,    /* crash damage named by a recovery record (informational) */
	AL_V_UNANCHORED,   /* anchors were given, but none is bound to this chain */
	AL_V_EXTRA_CHAIN,  /* --one-chain: the inputs hold another chain */
	/* v2 (docs/format.md 23) */
	AL_V_BAD_SEAL,       /* a seal's MAC, epoch, chain id or open link is wrong */
	AL_V_GAP,            /* seals more than one epoch apart (not integrity unless strict) */
	AL_V_UNSEALED,       /* complete records after a chain's last seal */
	AL_V_UNKNOWN_KEY,    /* a seal names a key id the verifier was not given */
	AL_V_CLOCK,          /* a timestamp far outside its seal's epoch (a notice) */
	AL_V_UNSIGNED_TAIL,  /* records after the last checkpoint (a count, a notice) */
	AL_V_BAD_CHECKPOINT, /* a checkpoint or tree record that is not the chain's */
	AL_V_MISSING_CHAIN,  /* a witnessed chain absent from the inputs */
	AL_V_REWRITTEN,      /* a witnessed checkpoint the chain no longer holds */
	AL_V_SHIPPER_DUPLICATE, /* --dedup: a verified record's line again (a notice) */
	AL_V_SAME_FILE,      /* one input file under two names, read once (a notice) */
	AL_V__MAX
};

const char *al_vclass_name(enum al_vclass c);
/* Exit-code weight: true when the class is an integrity finding (exit 1). */
bool al_vclass_is_integrity(enum al_vclass c, bool strict);

struct al_finding {
	enum al_vclass cls;
	const char *file;  /* path as given */
	uint64_t line;     /* 1-based, 0 when not about one line */
	uint64_t offset;   /* byte offset in the file */
	uint64_t seq;
	bool has_seq;
	const char *msg;   /* what exactly, in words */
};

/* --expect-head [CHAIN_ID:]SEQ:HASH: a head exported elsewhere. One bound to
 * a chain id checks that chain; one without is bound to the one chain there
 * is, else to the chain that holds it (docs/format.md 11). */
struct al_vanchor {
	bool has_chain;
	char chain_id[33]; /* 32 lowercase hex digits, NUL-terminated (has_chain) */
	uint64_t seq;
	uint8_t hash[AL_HASH_LEN];
};

/* A witnessed checkpoint (docs/format.md 20.5): one signed note of a
 * witness file, with what its text says. */
struct al_vwnote {
	const char *src;   /* the witness file's name, for findings */
	unsigned index;    /* 1-based: the note's place in it */
	uint8_t origin[AL_ORIGIN_MAX];
	size_t olen;
	uint8_t host[AL_SEAL_HOST_MAX];
	size_t host_len;
	char chain_id[33];
	uint64_t size;
	uint8_t root[AL_HASH_LEN];
	uint8_t *note; /* its bytes (owned by the list) */
	size_t len;
	/* the walk's */
	bool met, skipped;
	/* with witness keys (al_vopts.wkeys): 1 + the index of the key whose
	 * cosignature verified (0: none), and its time (seconds) */
	unsigned cosigned_by;
	uint64_t cosig_time;
};

/* Parse a witness file (concatenated C2SP signed notes whose text is a
 * tlog checkpoint with an origin <host>/auditlog/<chain id>) and append its
 * notes to *list. 0, -EINVAL (not that format), -ENOMEM. */
int al_witness_parse(const uint8_t *buf, size_t n, const char *src, struct al_vwnote **list, unsigned *count);
void al_witness_free(struct al_vwnote *list, unsigned count);

struct al_vpool;

struct al_vopts {
	unsigned min_version;
	/* v2 (docs/format.md 19-23): verification keys (seals, one per key id),
	 * checkpoint public keys (one per host) and witnessed checkpoints. */
	const struct al_vkey *vkeys;
	unsigned n_vkeys;
	const struct al_ckey *pubkeys;
	unsigned n_pubkeys;
	struct al_vwnote *witness; /* the walk marks them (met, skipped) */
	unsigned n_witness;
	/* witness public keys (docs/format.md 20.6): with any given, a note is
	 * compared only when one of them cosigned it (cosignature/v1) */
	const struct al_ckey *wkeys;
	unsigned n_wkeys;
	/* --from SEQ:HASH: a record verified before (a daily job's checkpoint).
	 * Files wholly before it are not read; records before it are not
	 * checked; the record itself must carry this hash. */
	bool has_from;
	uint64_t from_seq;
	uint8_t from_hash[AL_HASH_LEN];
	bool has_expect_head; /* one anchor without a chain id (when n_anchors is 0) */
	uint64_t expect_seq;
	uint8_t expect_hash[AL_HASH_LEN];
	const struct al_vanchor *anchors; /* with anchors given, a chain without one is unanchored */
	unsigned n_anchors;
	bool one_chain; /* more than one chain among the inputs is a finding */
	/* The directories whose every file is among the inputs (listed by
	 * al_verify_add_path): a file in one that the writer renamed after the
	 * listing, named as a predecessor, is taken in (take_in_renamed). */
	char *const *dirs;
	unsigned n_dirs;
	/* --dedup (a central copy a shipper may repeat lines in): a line
	 * byte-identical to one of the last AL_VRING records seen is
	 * shipper-duplicate (a notice), not duplicated */
	bool dedup;
	void (*on_finding)(void *ctx, const struct al_finding *f);
	/* Each line that verified, in chain order, without its '\n' (--emit): a
	 * record that chains from the one before it; never a line with a finding. */
	void (*on_record)(void *ctx, const uint8_t *line, size_t len);
	/* --follow: after the inputs, keep verifying the chain's head file as
	 * it grows, and go on into the file that replaces it at its path on
	 * rotation (its header must link to it). A partial last line is waited
	 * for. Polls every poll_ms (default 100) until *stop becomes non-zero
	 * (a signal handler sets it). on_wait (may be NULL) runs before each
	 * sleep: flush there. It tails one chain (follow_pick in verify.c):
	 * files of two chains under active names are -EXDEV; with follow_chain
	 * (a resumed tail's chain id), another chain at the active name, or
	 * none of follow_chain among the inputs, is -EIDRM. Either way nothing
	 * is reported, and res->chain names the chains in the way. -EAGAIN: no
	 * chain to tail yet, no input with a trusted header (a rotation raced
	 * the listing: its new file, header not yet written, was left out);
	 * nothing is reported: list the inputs again. -ELOOP: every file of the
	 * chain tailed has a successor (links that loop; findings may have been
	 * reported). */
	bool follow;
	const char *follow_chain;
	unsigned poll_ms;
	const volatile sig_atomic_t *stop;
	void (*on_wait)(void *ctx);
	/* Bytes read so far of `total` (the inputs' sizes at the start), after
	 * each read (at most every 1 MiB); may be NULL. For a progress bar. */
	void (*on_progress)(void *ctx, uint64_t done, uint64_t total);
	void *ctx;
	/* Worker threads that check large files ahead of the walk (verify_par.c):
	 * 0 one per CPU this process may run on, 1 none (the walk alone). The
	 * findings and the records passed to on_record are the same either way.
	 * Not used with follow. */
	unsigned threads;
	/* Their block size in bytes (0: 4 MiB); a file is checked in parallel
	 * when it holds at least two. Tests set small ones. */
	uint64_t block;
	/* Or workers the caller keeps across calls (al_vpool_new; started and
	 * stopped here, never freed), standing for threads and block: a test
	 * verifying thousands of small inputs would otherwise make and join a
	 * pool in each call. With on_record set it must keep the blocks'
	 * bytes (al_vpool_new's keep). */
	struct al_vpool *pool;
};

struct al_vchain {
	char chain_id[33];
	unsigned files;
	uint64_t records, events;
	uint64_t first_seq, last_seq;
	uint8_t head_hash[AL_HASH_LEN];
	char first_ts[AL_TS_LEN + 1], last_ts[AL_TS_LEN + 1];
	unsigned min_version, max_version;
	/* v2: seals and checkpoints met (their MACs / signatures checked when
	 * the keys were given), records after the last checkpoint, the tree */
	uint64_t seals, checkpoints, unsigned_tail;
	uint64_t tree_size;
};

struct al_vresult {
	unsigned files, chains;
	uint64_t records, bytes;
	uint64_t findings[AL_V__MAX];
	uint64_t taken; /* records the workers checked (the rest: the walk itself) */
	/* v2: seals and checkpoints met; of them, MACs and signatures checked */
	uint64_t seals, checkpoints, seals_checked, checkpoints_checked, unsigned_tail, pending;
	struct al_vchain *chain; /* chains[] in the order found; freed by al_vresult_free */
	char *err_path; /* -errno: the input that could not be read, when one was (freed too) */
};

/* Verify the given files (already expanded from directories). Returns 0 when
 * it ran (findings are in *res and went to on_finding), or -errno when it
 * could not read an input (res then says how far it got). */
int al_verify_files(char *const *paths, unsigned n, const struct al_vopts *o, struct al_vresult *res);
void al_vresult_free(struct al_vresult *res);

/* ---- parallel checking (verify_par.c) ---------------------------------------- */

#define AL_VRING 64           /* recent records the walk keeps (to tell a duplicate) */
#define AL_VBLOCK (4u << 20) /* the workers' default block */

/* What a worker found in one block: the clean prefix of its lines (start to
 * end), each chaining from the one before it, the first from the context
 * line (the line before start). */
struct al_vblock {
	uint64_t k;
	uint64_t start, end; /* file offsets; lines == 0: nothing to take */
	uint64_t lines, events;
	bool has_ctx;
	uint64_t ctx_seq;
	uint8_t ctx_hash[AL_HASH_LEN];
	uint64_t first_seq, last_seq;
	char first_ts[AL_TS_LEN], last_ts[AL_TS_LEN];
	unsigned first_version, last_version, min_version, max_version;
	uint8_t last_hash[AL_HASH_LEN];
	bool has_expect; /* the record with the expected head's seq is here */
	uint8_t expect_hash[AL_HASH_LEN];
	/* the bytes the worker checked, [data_off, data_off + data_len) of the
	 * file (kept pools only: valid until al_vpool_next) */
	const uint8_t *data;
	uint64_t data_off;
	size_t data_len;
	/* the last min(lines, AL_VRING) records: line i at [i % AL_VRING] */
	uint64_t ring_seq[AL_VRING], ring_off[AL_VRING];
	uint32_t ring_len[AL_VRING];
	/* a block of v2 records (events only: min_version >= AL_V2): line i's
	 * hash at hashes + i * AL_HASH_LEN, the leaves the walk appends to the
	 * chain's tree (valid until al_vpool_next); NULL otherwise */
	const uint8_t *hashes;
};

/* Read [off, off + n) fully: short only at the end of the file; -1 (errno)
 * on an error. */
ssize_t al_pread_full(int fd, uint8_t *buf, size_t n, uint64_t off);

struct al_vpool;
unsigned al_vpool_cpus(void);
/* keep: each result keeps the bytes its worker checked (al_vblock.data), so
 * that the walk passes on exactly those (--emit), not a second read. */
int al_vpool_new(unsigned threads, uint64_t block, bool keep, struct al_vpool **ret);
void al_vpool_free(struct al_vpool *pl);
uint64_t al_vpool_block(const struct al_vpool *pl);
/* Check file fd up to limit, block by block, ahead of the walk. */
void al_vpool_start(struct al_vpool *pl, int fd, uint64_t limit, unsigned min_version, bool has_expect,
		    uint64_t expect_seq);
/* The next block in file order (waits for it), NULL after the last. */
const struct al_vblock *al_vpool_peek(struct al_vpool *pl);
void al_vpool_next(struct al_vpool *pl);
/* Done with the file: waits for the workers to put it down. */
void al_vpool_stop(struct al_vpool *pl);

/* A stream: the bytes of a log fed in order, in pieces of any size (a pipe,
 * a SIEM's copy), checked as it comes: one chain; a header that links to the
 * record before it (the next file of a rotated set, concatenated) starts a
 * new segment whose link is checked as a file's. Findings name the stream
 * `name`, with line numbers and offsets in the stream. Memory is constant
 * (recent lines are kept, not read back; a line is gathered up to 1 MiB, a
 * longer one checked in pieces as the file walk does). o and res must
 * outlive it; res is
 * filled as it goes, final after al_vstream_end, which frees the stream. */
struct al_vstream;
int al_vstream_new(const char *name, const struct al_vopts *o, struct al_vresult *res, struct al_vstream **ret);
int al_vstream_feed(struct al_vstream *s, const uint8_t *buf, size_t n);
int al_vstream_end(struct al_vstream *s);
/* Give up a stream without ending it (res keeps what it had). */
void al_vstream_free(struct al_vstream *s);

/* A directory's path without its trailing slashes ("/" becomes ""): its
 * files are listed as <that>/<name>, one spelling however the directory
 * was given ("logs", "logs/"), and al_vopts.dirs is compared so too. */
static inline size_t al_dir_len(const char *path)
{
	size_t l = strlen(path);

	while (l > 0 && path[l - 1] == '/')
		l--;
	return l;
}

/* Append PATH to *list (n used, cap allocated): a file as given, or a
 * directory's regular files (not dot files), in directory order. 0 or -errno. */
int al_verify_add_path(const char *path, char ***list, unsigned *n, unsigned *cap);

/* Append PATH to *list when it is a directory (for al_vopts.dirs: its every
 * file is among the inputs). 0 or -errno. */
int al_verify_note_dir(const char *path, char ***list, unsigned *n, unsigned *cap);
/* A rotated file's name, <name>.<YYYYmmddTHHMMSS.nnnnnnnnnZ>-<first seq>
 * (docs/format.md 6): the length of <name>, and the seq in *ret_seq; 0 when
 * base is not of that form. */
size_t al_rotated_name(const char *base, uint64_t *ret_seq);

/* ---- the sealer's registry of chains (verify_registry.c, docs/format.md 26) ---- */

enum al_vreg_end { AL_VREG_OPEN, AL_VREG_CLOSE, AL_VREG_LOST };

/* One segment the registry names: one sealer connection's life with a chain. */
struct al_vreg_seg {
	char chain_id[33];
	uint64_t first, last;      /* seqs of its first and (not OPEN) its last seal */
	uint8_t head[AL_HASH_LEN]; /* the last seal's chain hash (not OPEN) */
	enum al_vreg_end end;
	uint64_t pid, uid, gid;
	uint64_t at;               /* seq of its chain-open record in the registry */
};

struct al_vregistry {
	char *name;               /* the registry's path as given, for findings */
	struct al_vreg_seg *seg;
	unsigned n, cap;
	struct al_vresult res;    /* the registry's own verification */
	uint64_t records;         /* registry records used (verified, 26.1) */
	bool bad;                 /* a verified registry record that is not 26.1's */
};

/* Verify the registry at path (its files, or a directory of them) as one
 * chain with o's keys (vkeys, pubkeys; nothing else of o but on_finding and
 * ctx, which get its findings, named by its files), and collect the
 * segments its verified records name. 0 when it ran (findings in g->res),
 * or -errno when it could not be read (-ENOENT: no file there). */
int al_registry_load(const char *path, const struct al_vopts *o, struct al_vregistry *g);
/* Compare the chains of res (a run over the inputs) with the registry's
 * segments (26.2), reporting through o->on_finding and counting into res,
 * the registry's own findings added to res's. */
void al_registry_compare(const struct al_vregistry *g, const struct al_vopts *o, struct al_vresult *res);
/* Chains the registry names (distinct ids). */
unsigned al_registry_chains(const struct al_vregistry *g);
void al_registry_free(struct al_vregistry *g);

#endif
