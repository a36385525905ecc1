/* SPDX-License-Identifier: MIT */
/* Crash recovery's one rule: see recovery.h. */
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "recovery.h"
#include "format_v2.h"


static bool mem_sha(void *ctx, uint64_t off, uint64_t len, uint8_t out[AL_HASH_LEN])
{
	const struct al_recovery_mem *m = ctx;
	if (off < m->start || off - m->start > m->n || len > m->n - (off - m->start))
		return false;
	SHA256(m->buf + (off - m->start), (size_t)len, out);
	return true;
}

static int mem_byte(void *ctx, uint64_t off)
{
	const struct al_recovery_mem *m = ctx;
	return off >= m->start && off - m->start < m->n ? m->buf[off - m->start] : -1;
}

struct al_recovery_io al_recovery_mem_io(const struct al_recovery_mem *m)
{
	return (struct al_recovery_io){.sha = mem_sha, .byte = mem_byte, .ctx = (void *)m};
}

bool al_maybe_recovery(const uint8_t *line, size_t len)
{
	static const char t[] = ",\"type\":\"recovery\",";
	/* the type is the fourth member: after @timestamp, seq (<= 16 digits) and v */
	return memmem(line, len < 96 ? len : 96, t, sizeof(t) - 1) != NULL;
}

bool al_recovery_repairs(const struct al_parsed *p, const uint8_t *line, uint64_t line_off,
			 uint64_t damage_off, const struct al_tailrec *t, const struct al_recovery_io *io,
			 uint8_t *work)
{
	const struct al_record *r = &p->rec;
	uint8_t md[AL_HASH_LEN], want[AL_HASH_LEN], h[AL_HASH_LEN];

	if (r->type != AL_T_RECOVERY || r->f[AL_F_SEQ].u != t->seq + 1 || r->f[AL_F_LAST_SEQ].u != t->seq ||
	    r->f[AL_F_DAMAGE_OFFSET].u != damage_off)
		return false;
	if (!al_recovery_may_follow(t->version, t->type))
		return false;
	uint64_t dl = r->f[AL_F_DAMAGE_LENGTH].u;
	if (dl < 1 || dl > AL_RECOVERY_MAX)
		return false;
	/* the recovery line right after the damage, or after the '\n' added to it */
	int last = io->byte(io->ctx, damage_off + dl - 1);
	if (line_off == damage_off + dl) {
		if (last != '\n')
			return false;
	} else if (line_off == damage_off + dl + 1) {
		if (last == '\n' || last < 0 || io->byte(io->ctx, damage_off + dl) != '\n')
			return false;
	} else {
		return false;
	}
	if (r->version < t->version || memcmp(r->f[AL_F_TIMESTAMP].p, t->ts, AL_TS_LEN) < 0)
		return false;
	if (!al_check_hash(p, line, t->hash, work, h))
		return false;
	if (al_unhex(r->f[AL_F_DAMAGE_SHA256].p, 64, want) < 0 || !io->sha(io->ctx, damage_off, dl, md))
		return false;
	return CRYPTO_memcmp(md, want, AL_HASH_LEN) == 0;
}

/* True when the file is what a crash leaves while its first header is being
 * written: shorter than a line, no complete line, and only NULs or the start
 * of a header. Anything else (a foreign file) is never blessed. */
bool al_torn_first_header(const uint8_t *buf, uint64_t size)
{
	static const char start[] = "{\"@timestamp\":\"";
	size_t n = (size_t)size;
	bool nul = true;

	if (size >= AL_LINE_MAX || memchr(buf, '\n', n))
		return false;
	for (size_t i = 0; i < n && nul; i++)
		nul = buf[i] == 0;
	if (nul)
		return true;
	if (n < sizeof(start) - 1)
		return memcmp(buf, start, n) == 0;
	if (memcmp(buf, start, sizeof(start) - 1) != 0)
		return false;
	/* once the type is there, it must be (the start of) a header */
	const uint8_t *t = memmem(buf, n, "\"type\":\"", 8);
	if (!t)
		return n < 80;
	size_t rest = n - (size_t)(t + 8 - buf);
	return memcmp(t + 8, "header\"", rest < 7 ? rest : 7) == 0;
}
