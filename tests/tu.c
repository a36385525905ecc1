/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <openssl/sha.h>

#include <stdatomic.h>
#include <time.h>
#include "tu.h"
#include "verify.h"
#include "internal.h"
#include "keyfile.h"
#include "note.h"
#include "sealkey.h"
#include "sealer.h"

unsigned long tu_test_scale(void)
{
	const char *s = getenv("AUDITLOG_TEST_SCALE");
	unsigned long n = s ? strtoul(s, NULL, 10) : 1;

	return n ? n : 1;
}

char *tu_mkdtemp(void)
{
	const char *base = getenv("TMPDIR");
	char *t;

	if (!base || !*base)
		base = "/var/tmp";
	if (asprintf(&t, "%s/auditlog-test.XXXXXX", base) < 0)
		return NULL;
	if (!mkdtemp(t)) {
		free(t);
		return NULL;
	}
	return t;
}

void tu_rmtree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *p = tu_path(dir, e->d_name);
		struct stat st;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			tu_rmtree(p);
		else
			unlink(p);
		free(p);
	}
	closedir(d);
	rmdir(dir);
}

char *tu_path(const char *dir, const char *name)
{
	char *p;
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		abort();
	return p;
}

char *tu_stderr_of(const char *dir, void (*fn)(void *ctx), void *ctx)
{
	char *path = tu_path(dir, "stderr.txt");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), saved = dup(2);
	size_t len;
	char *out;

	assert_true(fd >= 0 && saved >= 0);
	fflush(stderr);
	assert_true(dup2(fd, 2) == 2);
	fn(ctx);
	fflush(stderr);
	assert_true(dup2(saved, 2) == 2);
	close(saved);
	close(fd);
	out = (char *)tu_read_file(path, &len); /* NUL-terminated */
	assert_non_null(out);
	unlink(path);
	free(path);
	return out;
}

uint64_t tu_file_size(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		fail_msg("stat %s: %s", path, strerror(errno));
	return (uint64_t)st.st_size;
}

size_t tu_resident_pages(const char *path, uint64_t off, uint64_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0 && off % (uint64_t)pg == 0);
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
	assert_true(m != MAP_FAILED);
	size_t n = (len + (uint64_t)pg - 1) / (uint64_t)pg, res = 0;
	unsigned char *v = malloc(n);
	assert_non_null(v);
	assert_int_equal(mincore(m, len, v), 0);
	for (size_t i = 0; i < n; i++)
		res += v[i] & 1;
	free(v);
	munmap(m, len);
	close(fd);
	return res;
}

bool tu_on_tmpfs(const char *path)
{
	struct statfs sf;

	assert_int_equal(statfs(path, &sf), 0);
	if (sf.f_type != TMPFS_MAGIC)
		return false;
	print_message("on tmpfs: the page cache's residency is not checked\n");
	return true;
}

uint8_t *tu_read_file(const char *path, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *buf;
	size_t done = 0;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return NULL;
	}
	while (done < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + done, (size_t)st.st_size - done);
		if (r <= 0)
			break;
		done += (size_t)r;
	}
	close(fd);
	buf[done] = 0;
	*ret_len = done;
	return buf;
}

static int bad(struct tu_walk *w, uint64_t off, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(w->error, sizeof(w->error), "offset %llu: ", (unsigned long long)off);
	va_start(ap, fmt);
	vsnprintf(w->error + n, sizeof(w->error) - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* Where damage may start (docs/format.md 7, 19.5): after any v0/v1 record;
 * in v2 only after a seal or a file's header. */
static bool tu_safe(const struct al_record *r)
{
	return r->version < 2 || r->type == 4 /* seal */ || r->type == AL_T_HEADER;
}

struct tu_walk_at {
	struct tu_walk w;
	uint8_t prev[AL_HASH_LEN];
	char last_ts[AL_TS_LEN];
	uint8_t last_v;
	size_t pos; /* just past the record */
};

int tu_walk_file(const char *path, struct tu_walk *w,
		 void (*on_event)(void *ctx, const struct al_parsed *p), void *ctx)
{
	size_t len, pos = 0, err_off;
	uint8_t *buf = tu_read_file(path, &len);
	uint8_t *dec = malloc(AL_LINE_MAX), *work = malloc(AL_HASH_LEN + AL_BODY_MAX);
	uint8_t *dec2 = malloc(AL_LINE_MAX);
	uint8_t prev[AL_HASH_LEN], got[AL_HASH_LEN];
	char last_ts[AL_TS_LEN];
	uint8_t last_v = 0;
	int r = -1;
	/* the state at the last safe record, and the v2 events after it, which
	 * count only once a seal covers them */
	struct tu_walk_at *safe = calloc(1, sizeof(*safe));
	size_t *pend = NULL, npend = 0, cpend = 0;
	bool have_safe = false;

	memset(w, 0, sizeof(*w));
	if (!buf || !safe) {
		snprintf(w->error, sizeof(w->error), "cannot read %s", path);
		goto out;
	}
	w->size = len;
	while (pos < len) {
		uint8_t *nl = memchr(buf + pos, '\n', len - pos);
		struct al_parsed p;
		if (!nl) {
			bad(w, pos, "incomplete last line");
			goto out;
		}
		size_t n = (size_t)(nl - (buf + pos));
		enum al_perr e = al_parse(buf + pos, n, dec, &p, &err_off);
		const struct al_record *rec = &p.rec;
		uint64_t seq = rec->f[AL_F_SEQ].u;
		const char *why = NULL;
		if (e != AL_PERR_OK) {
			why = "line does not parse";
		} else if (w->records > 0) {
			if (rec->type == AL_T_HEADER)
				why = "header in the middle of a file";
			else if (seq != w->last_seq + 1)
				why = "seq does not follow";
			else if (memcmp(rec->f[AL_F_TIMESTAMP].p, last_ts, AL_TS_LEN) < 0)
				why = "timestamp decreases";
			else if (rec->version < last_v)
				why = "version decreases";
			else if (!al_check_hash(&p, buf + pos, prev, work, got))
				why = "hash mismatch";
		}
		if (why && have_safe) {
			/* damage right after the last safe record: must be named by
			 * a later recovery record */
			size_t d = safe->pos, q = pos;
			bool ok = false;
			while (q < len && !ok) {
				uint8_t *nl2 = memchr(buf + q, '\n', len - q);
				if (!nl2)
					break;
				struct al_parsed rp;
				if (al_parse(buf + q, (size_t)(nl2 - (buf + q)), dec, &rp, &err_off) ==
					    AL_PERR_OK &&
				    rp.rec.type == AL_T_RECOVERY &&
				    rp.rec.f[AL_F_DAMAGE_OFFSET].u == d &&
				    rp.rec.f[AL_F_LAST_SEQ].u == safe->w.last_seq) {
					uint64_t dl = rp.rec.f[AL_F_DAMAGE_LENGTH].u;
					uint8_t md[32], want[32];
					size_t rec_off = (size_t)(d + dl);
					if (rec_off < q && buf[rec_off] == '\n' && buf[rec_off - 1] != '\n')
						rec_off++;
					if (rec_off == q && al_unhex(rp.rec.f[AL_F_DAMAGE_SHA256].p, 64, want) == 0) {
						SHA256(buf + d, dl, md);
						ok = memcmp(md, want, 32) == 0;
					}
					if (ok)
						break;
				}
				q = (size_t)(nl2 - buf) + 1;
			}
			if (!ok) {
				if (e != AL_PERR_OK)
					bad(w, pos, "line does not parse (reason %d at +%zu) and no recovery record names it",
					    (int)e, err_off);
				else
					bad(w, pos, "%s at seq %llu and no recovery record names it", why,
					    (unsigned long long)seq);
				goto out;
			}
			/* back to the safe record; the unsealed events are damage */
			*w = safe->w;
			memcpy(prev, safe->prev, AL_HASH_LEN);
			memcpy(last_ts, safe->last_ts, AL_TS_LEN);
			last_v = safe->last_v;
			npend = 0;
			pos = q;
			continue;
		}
		if (why) {
			bad(w, pos, "%s", why);
			goto out;
		}
		if (w->records == 0) {
			if (rec->type != AL_T_HEADER) {
				bad(w, pos, "first record is not a header");
				goto out;
			}
			memset(prev, 0, sizeof(prev));
			if (rec->present & AL_BIT(AL_F_PREV_HASH)) {
				al_unhex(rec->f[AL_F_PREV_HASH].p, 64, prev);
				if (seq != rec->f[AL_F_PREV_SEQ].u + 1) {
					bad(w, pos, "header seq %llu does not follow prev_seq", (unsigned long long)seq);
					goto out;
				}
				snprintf(w->prev_name, sizeof(w->prev_name), "%.*s",
					 (int)rec->f[AL_F_PREV_NAME].n, rec->f[AL_F_PREV_NAME].p);
				w->prev_seq = rec->f[AL_F_PREV_SEQ].u;
				w->prev_size = rec->f[AL_F_PREV_SIZE].u;
			} else if (seq != 0) {
				bad(w, pos, "chain start with seq %llu", (unsigned long long)seq);
				goto out;
			}
			memcpy(w->first_prev, prev, 32);
			memcpy(w->chain_id, rec->f[AL_F_CHAIN_ID].p, 32);
			snprintf(w->reason, sizeof(w->reason), "%.*s", (int)rec->f[AL_F_REASON].n,
				 rec->f[AL_F_REASON].p);
			w->first_seq = seq;
			if (!al_check_hash(&p, buf + pos, prev, work, got)) {
				bad(w, pos, "hash mismatch at seq %llu", (unsigned long long)seq);
				goto out;
			}
		}
		memcpy(prev, got, 32);
		memcpy(last_ts, rec->f[AL_F_TIMESTAMP].p, AL_TS_LEN);
		last_v = rec->version;
		w->records++;
		w->last_seq = seq;
		memcpy(w->last_hash, got, 32);
		if (rec->type == AL_T_EVENT) {
			if (npend == cpend) {
				cpend = cpend ? 2 * cpend : 64;
				pend = realloc(pend, cpend * sizeof(*pend));
				assert_non_null(pend);
			}
			pend[npend++] = pos;
		} else if (rec->type == AL_T_HEADER) {
			w->headers++;
		} else if (rec->type == AL_T_RECOVERY) {
			w->recoveries++;
		}
		pos += n + 1;
		if (tu_safe(rec)) {
			/* what it follows is committed: count its events */
			for (size_t i = 0; i < npend; i++) {
				uint8_t *l0 = buf + pend[i], *e0 = memchr(l0, '\n', len - pend[i]);
				struct al_parsed ep;
				assert_int_equal(al_parse(l0, (size_t)(e0 - l0), dec2, &ep, &err_off), AL_PERR_OK);
				w->events++;
				if (on_event)
					on_event(ctx, &ep);
			}
			npend = 0;
			safe->w = *w;
			memcpy(safe->prev, prev, AL_HASH_LEN);
			memcpy(safe->last_ts, last_ts, AL_TS_LEN);
			safe->last_v = last_v;
			safe->pos = pos;
			have_safe = true;
		}
	}
	if (npend) {
		bad(w, pos, "%zu event(s) after the last seal", npend);
		goto out;
	}
	r = 0;
out:
	free(buf);
	free(dec);
	free(dec2);
	free(work);
	free(safe);
	free(pend);
	return r;
}

struct auditlog_event tu_event(const char *action, uint64_t session)
{
	static const char label[] = "payments-signing-key";
	static const uint8_t id[2] = {0x01, 0xa2};
	return (struct auditlog_event){
		.flags = AUDITLOG_EV_RV | AUDITLOG_EV_MECHANISM | AUDITLOG_EV_SLOT | AUDITLOG_EV_SESSION,
		.outcome = AUDITLOG_OUTCOME_SUCCESS,
		.rv = 0,
		.mechanism = 0x1041,
		.slot = 0,
		.session = session,
		.action = action,
		.action_len = strlen(action),
		.key_label = label,
		.key_label_len = sizeof(label) - 1,
		.key_id = id,
		.key_id_len = sizeof(id),
		.actor = "user",
		.actor_len = 4,
	};
}

/* AUDITLOG_TEST_V2=1: every tu_config() writes v2, sealed with one set of
 * keys made at first use (real clocks, 10 s epochs) in a directory of its
 * own, removed at exit by the process that made it. */
static struct {
	char *dir;
	pid_t owner;
	struct tu_v2keys k;
} tu_v2env;

static void tu_v2env_cleanup(void)
{
	if (!tu_v2env.dir)
		return;
	if (getpid() == tu_v2env.owner) /* a forked child leaves the keys to its parent */
		tu_rmtree(tu_v2env.dir);
	free(tu_v2env.dir);
	tu_v2_keys_free(&tu_v2env.k);
	tu_v2env.dir = NULL;
}

bool tu_v2_mode(void)
{
	const char *e = getenv("AUDITLOG_TEST_V2");
	return e && strcmp(e, "1") == 0;
}

static void tu_v2env_make(void)
{
	if (!tu_v2env.dir) {
		struct timespec w, b;
		uint8_t id[16];

		assert_int_equal(al_clock_boot_id(NULL, id), 0);
		clock_gettime(CLOCK_REALTIME, &w);
		clock_gettime(CLOCK_BOOTTIME, &b);
		tu_v2env.dir = tu_mkdtemp();
		tu_v2env.owner = getpid();
		tu_v2_keys(tu_v2env.dir, "test-host",
			   (uint64_t)w.tv_sec * 1000000000u + (uint64_t)w.tv_nsec,
			   UINT64_C(10000000000), 0, id,
			   (uint64_t)b.tv_sec * 1000000000u + (uint64_t)b.tv_nsec, &tu_v2env.k);
		atexit(tu_v2env_cleanup);
	}
}

void tu_v2_config_shared(struct auditlog_config *cfg)
{
	tu_v2env_make();
	tu_v2_config(cfg, &tu_v2env.k, NULL);
}

struct auditlog_config *tu_config(const char *path)
{
	struct auditlog_config *cfg = NULL;
	if (auditlog_config_new(&cfg) < 0 || auditlog_config_set_path(cfg, path) < 0)
		abort();
	if (tu_v2_mode())
		tu_v2_config_shared(cfg);
	/* AUDITLOG_TEST_LANES=N: the suite again with the queue in N lanes (1: one ring) */
	const char *lanes = getenv("AUDITLOG_TEST_LANES");
	if (lanes && *lanes && auditlog_config_set_queue_lanes(cfg, (unsigned)atoi(lanes)) < 0)
		abort();
	return cfg;
}

void tu_filter(void)
{
	const char *f = getenv("TEST_FILTER");
	if (f && *f)
		cmocka_set_test_filter(f);
	/* in the parent, before any test forks a writer: a child that made
	 * the keys itself and was then SIGKILLed (test_crash) left their
	 * directory behind in $TMPDIR, one per killed writer */
	if (tu_v2_mode())
		tu_v2env_make();
}

bool tu_stats_wait(struct auditlog *log, bool (*until)(const struct auditlog_stats *st, void *ctx),
		   void *ctx, unsigned timeout_ms)
{
	for (unsigned i = 0; i <= timeout_ms * 10u; i++) {
		struct auditlog_stats st;
		assert_int_equal(auditlog_get_stats(log, &st, sizeof(st)), 0);
		if (until(&st, ctx))
			return true;
		usleep(100);
	}
	return false;
}

bool tu_all_written(const struct auditlog_stats *st, void *ctx)
{
	(void)ctx;
	return st->events_written == st->events_enqueued;
}

unsigned tu_count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

unsigned tu_walk_chain(const char *dir, const char *active,
		       void (*on_event)(void *ctx, const struct al_parsed *p), void *ctx)
{
	char *cur = tu_path(dir, active);
	unsigned files = 0;
	uint64_t limit = UINT64_MAX, expect_seq = 0;
	bool have_expect = false;
	uint8_t expect_hash[32];
	char chain_id[33] = "";

	for (;;) {
		char *walkpath = cur, *tmp = NULL;
		if (limit != UINT64_MAX) {
			/* a sealed or rotated file counts only up to the prev_size its
			 * successor names */
			size_t len;
			uint8_t *buf = tu_read_file(cur, &len);
			if (!buf)
				fail_msg("%s: missing", cur);
			assert_true(limit <= len);
			tmp = tu_path(dir, ".cut.tmp");
			FILE *out = fopen(tmp, "w");
			assert_non_null(out);
			assert_int_equal(fwrite(buf, 1, limit, out), limit);
			fclose(out);
			free(buf);
			walkpath = tmp;
		}
		struct tu_walk w;
		if (tu_walk_file(walkpath, &w, on_event, ctx))
			fail_msg("%s: %s", cur, w.error);
		if (have_expect) {
			assert_int_equal(w.last_seq, expect_seq);
			assert_memory_equal(w.last_hash, expect_hash, 32);
		}
		if (chain_id[0])
			assert_string_equal(w.chain_id, chain_id);
		memcpy(chain_id, w.chain_id, sizeof(chain_id));
		files++;
		if (tmp) {
			unlink(tmp);
			free(tmp);
		}
		free(cur);
		if (!w.prev_name[0]) {
			assert_true(!strcmp(w.reason, "new") || !strcmp(w.reason, "untrusted-tail"));
			break;
		}
		assert_true(!strcmp(w.reason, "rotate") || !strcmp(w.reason, "io-error"));
		expect_seq = w.prev_seq;
		memcpy(expect_hash, w.first_prev, 32);
		have_expect = true;
		limit = w.prev_size;
		cur = tu_path(dir, w.prev_name);
	}
	return files;
}

struct tu_ids tu_ids_new(const char *prefix, unsigned size)
{
	struct tu_ids ids = {.prefix = prefix, .size = size, .count = calloc(size + 1, sizeof(unsigned))};
	if (!ids.count)
		abort();
	return ids;
}

void tu_ids_free(struct tu_ids *ids)
{
	free(ids->count);
	ids->count = NULL;
}

void tu_count_ids(void *ctx, const struct al_parsed *p)
{
	struct tu_ids *ids = ctx;
	size_t pl = strlen(ids->prefix);
	const struct al_val *d = &p->rec.f[AL_F_DETAIL];
	unsigned long v = 0;

	if (!(p->rec.present & AL_BIT(AL_F_DETAIL)) || d->n <= pl || d->n > pl + 10 ||
	    memcmp(d->p, ids->prefix, pl) != 0)
		return;
	for (size_t i = pl; i < d->n; i++) {
		if (d->p[i] < '0' || d->p[i] > '9')
			return;
		v = v * 10 + (unsigned long)(d->p[i] - '0');
	}
	if (v < ids->size)
		ids->count[v]++;
}

void tu_write_log(const char *path, unsigned version, unsigned n, uint64_t rotate, unsigned action_mod,
		  unsigned detail_every)
{
	struct auditlog_config *cfg = tu_config(path);
	struct auditlog *log;

	assert_int_equal(auditlog_config_set_format_version(cfg, version), 0);
	assert_int_equal(auditlog_config_set_max_batch_bytes(cfg, 16u << 10), 0);
	assert_int_equal(auditlog_config_set_rotate_bytes(cfg, rotate), 0);
	assert_int_equal(auditlog_open(cfg, &log), 0);
	auditlog_config_free(cfg);
	for (unsigned i = 0; i < n; i++) {
		struct auditlog_event ev = tu_event(i % action_mod ? "C_Sign" : "C_Encrypt", i);
		if (detail_every && i % detail_every == 0) {
			ev.detail = "rotated key \"old\"\tby ops";
			ev.detail_len = strlen(ev.detail);
		}
		assert_int_equal(auditlog_record(log, &ev), 0);
	}
	assert_int_equal(auditlog_close(log), 0);
}

struct tu_vctx {
	unsigned bad, recovered;
};

static void tu_on_finding(void *ctx, const struct al_finding *f)
{
	struct tu_vctx *v = ctx;
	if (f->cls == AL_V_RECOVERED) {
		v->recovered++;
		return;
	}
	v->bad++;
	print_message("  finding: %s %s:%llu off %llu seq %llu: %s\n", al_vclass_name(f->cls), f->file,
		      (unsigned long long)f->line, (unsigned long long)f->offset, (unsigned long long)f->seq,
		      f->msg);
}

unsigned tu_verify_dir(const char *dir)
{
	struct tu_vctx v = {0};
	struct al_vopts o = {.on_finding = tu_on_finding, .ctx = &v, .threads = 1};
	struct al_vresult res;
	char **paths = NULL;
	unsigned n = 0, cap = 0;

	assert_int_equal(al_verify_add_path(dir, &paths, &n, &cap), 0);
	assert_int_equal(al_verify_files(paths, n, &o, &res), 0);
	for (unsigned i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	al_vresult_free(&res);
	if (v.bad)
		fail_msg("%s: %u finding(s) from the verification engine", dir, v.bad);
	return v.recovered;
}

unsigned tu_verify_stream(const char *path)
{
	struct tu_vctx v = {0};
	struct al_vopts o = {.on_finding = tu_on_finding, .ctx = &v};
	struct al_vresult res;
	struct al_vstream *st;
	size_t len;
	uint8_t *buf = tu_read_file(path, &len);

	assert_non_null(buf);
	assert_int_equal(al_vstream_new(path, &o, &res, &st), 0);
	for (size_t k = 0, piece = 1; k < len; k += piece, piece = 1 + (piece * 389 + 7) % 8191)
		assert_int_equal(al_vstream_feed(st, buf + k, len - k < piece ? len - k : piece), 0);
	assert_int_equal(al_vstream_end(st), 0);
	al_vresult_free(&res);
	free(buf);
	if (v.bad)
		fail_msg("%s as a stream: %u finding(s) from the verification engine", path, v.bad);
	return v.recovered;
}

json_t *tu_json_file_env(const char *var)
{
	const char *p = getenv(var);
	json_error_t err;
	json_t *j;

	if (!p || !*p) {
		fprintf(stderr, "%s is not set: run through ctest\n", var);
		return NULL;
	}
	j = json_load_file(p, 0, &err);
	if (!j)
		fprintf(stderr, "%s: %s (line %d)\n", p, err.text, err.line);
	return j;
}

/* ---- v2 ------------------------------------------------------------------ */

static uint64_t tu_clk_real(void *ctx)
{
	struct tu_clock *c = ctx;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + atomic_load(&c->wall_offset));
}

static uint64_t tu_clk_boot(void *ctx)
{
	struct tu_clock *c = ctx;
	return atomic_fetch_add(&c->boot, atomic_load(&c->boot_step));
}

static void tu_clk_id(void *ctx, uint8_t out[16])
{
	memcpy(out, ((struct tu_clock *)ctx)->boot_id, 16);
}

void tu_clock_hooks(struct tu_clock *c, struct al_clock_hooks *ret)
{
	*ret = (struct al_clock_hooks){.ctx = c, .realtime = tu_clk_real, .boottime = tu_clk_boot,
				       .boot_id = tu_clk_id};
}

static void tu_put(const char *path, const char *buf, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, n), (ssize_t)n);
	assert_int_equal(fchmod(fd, 0600), 0);
	close(fd);
}

void tu_v2_state_write(const struct tu_v2keys *k, uint32_t epoch, const uint8_t boot_id[16],
		       uint64_t boot_start)
{
	struct al_sstate ss = {0};
	char buf[8192];
	long n;

	ss.p.host_len = strlen(k->host);
	memcpy(ss.p.host, k->host, ss.p.host_len);
	memcpy(ss.p.key_id, k->key_id, 8);
	ss.p.t0 = k->t0;
	ss.p.delta = k->delta;
	ss.max_jump = 1000;
	memcpy(ss.boot_id, boot_id, 16);
	ss.boot_start = boot_start;
	assert_int_equal(al_seal_state_init(&ss.st, k->S, epoch), 0);
	n = al_sstate_format(&ss, buf, sizeof(buf));
	assert_true(n > 0);
	/* a new file renamed over: the writer may hold the old one open */
	char *tmp = NULL;
	assert_true(asprintf(&tmp, "%s.tu", k->state_path) > 0);
	tu_put(tmp, buf, (size_t)n);
	assert_int_equal(rename(tmp, k->state_path), 0);
	free(tmp);
}

void tu_v2_keys(const char *dir, const char *host, uint64_t t0, uint64_t delta, uint32_t epoch,
		const uint8_t boot_id[16], uint64_t boot_start, struct tu_v2keys *k)
{
	struct al_vkey vk = {0};
	struct al_ckey ck = {0};
	char buf[8192];
	long n;

	memset(k, 0, sizeof(*k));
	assert_true(strlen(host) < sizeof(k->host));
	snprintf(k->host, sizeof(k->host), "%s", host);
	k->t0 = t0;
	k->delta = delta;
	assert_int_equal(getentropy(k->S, sizeof(k->S)), 0);
	assert_int_equal(getentropy(k->sign_seed, sizeof(k->sign_seed)), 0);
	assert_int_equal(al_ed25519_public(k->sign_seed, k->pub), 0);
	assert_int_equal(al_seal_key_id(k->S, (const uint8_t *)host, strlen(host), t0, delta, k->key_id),
			 0);
	k->state_path = tu_path(dir, "sealing-state");
	k->sign_path = tu_path(dir, "signing-key");
	k->pub_path = tu_path(dir, "checkpoint-key");
	k->vkey_path = tu_path(dir, "verification-key");

	vk.p.host_len = strlen(host);
	memcpy(vk.p.host, host, vk.p.host_len);
	memcpy(vk.p.key_id, k->key_id, 8);
	vk.p.t0 = t0;
	vk.p.delta = delta;
	memcpy(vk.seed, k->S, 32);
	n = al_vkey_format(&vk, buf, sizeof(buf));
	assert_true(n > 0);
	tu_put(k->vkey_path, buf, (size_t)n);

	ck.host_len = strlen(host);
	memcpy(ck.host, host, ck.host_len);
	memcpy(ck.key, k->sign_seed, 32);
	n = al_ckey_format(&ck, true, buf, sizeof(buf));
	assert_true(n > 0);
	tu_put(k->sign_path, buf, (size_t)n);
	memcpy(ck.key, k->pub, 32);
	n = al_ckey_format(&ck, false, buf, sizeof(buf));
	assert_true(n > 0);
	tu_put(k->pub_path, buf, (size_t)n);

	tu_v2_state_write(k, epoch, boot_id, boot_start);
}

void tu_v2_keys_free(struct tu_v2keys *k)
{
	free(k->state_path);
	free(k->sign_path);
	free(k->pub_path);
	free(k->vkey_path);
	memset(k, 0, sizeof(*k));
}

void tu_v2_config(struct auditlog_config *cfg, const struct tu_v2keys *k, struct tu_clock *clock)
{
	assert_int_equal(auditlog_config_set_format_version(cfg, 2), 0);
	assert_int_equal(auditlog_config_set_sealing(cfg, k->state_path, k->sign_path), 0);
	if (clock) {
		struct al_clock_hooks h;
		tu_clock_hooks(clock, &h);
		assert_int_equal(auditlog__config_set_clock(cfg, &h), 0);
	}
}

bool tu_task_file(const char *tid, const char *name, char *buf, size_t cap)
{
	char p[320];
	FILE *f;
	size_t len;

	snprintf(p, sizeof(p), "/proc/self/task/%s/%s", tid, name);
	if (!(f = fopen(p, "r")))
		return false; /* the thread ended meanwhile */
	len = fread(buf, 1, cap - 1, f);
	fclose(f);
	buf[len] = 0;
	if (strcmp(name, "comm") == 0) /* one line */
		buf[strcspn(buf, "\n")] = 0;
	return true;
}

/* Each thread named comm: fn(tid, ctx). The count. */
static unsigned each_thread(const char *comm, void (*fn)(const char *tid, void *ctx), void *ctx)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;
	char buf[64];

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && tu_task_file(e->d_name, "comm", buf, sizeof(buf)) &&
		    strcmp(buf, comm) == 0) {
			n++;
			if (fn)
				fn(e->d_name, ctx);
		}
	closedir(d);
	return n;
}

struct cpus_check {
	const char *want;
	bool all;
};

static void check_cpus(const char *tid, void *ctx)
{
	struct cpus_check *c = ctx;
	char buf[4096];
	const char *l;
	size_t n = strlen(c->want);

	if (!tu_task_file(tid, "status", buf, sizeof(buf)) || !(l = strstr(buf, "\nCpus_allowed_list:"))) {
		c->all = false;
		return;
	}
	l += strlen("\nCpus_allowed_list:");
	l += strspn(l, " \t");
	if (strncmp(l, c->want, n) != 0 || l[n] != '\n')
		c->all = false;
}

unsigned tu_threads_on(const char *comm, const char *want, bool *ret_all)
{
	struct cpus_check c = {want, true};
	unsigned n = each_thread(comm, check_cpus, &c);

	*ret_all = c.all;
	return n;
}

static void keep_tid(const char *tid, void *ctx)
{
	unsigned *t = ctx;
	if (!*t)
		*t = (unsigned)strtoul(tid, NULL, 10);
}

unsigned tu_thread_named(const char *comm)
{
	unsigned t = 0;
	each_thread(comm, keep_tid, &t);
	return t;
}
