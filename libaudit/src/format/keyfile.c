/* SPDX-License-Identifier: MIT */
/* v2 key files: verification key, sealing state, checkpoint keys
 * (docs/format.md 17). */

#include <openssl/crypto.h>

#include "keyfile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

bool al_seal_host_ok(const uint8_t *h, size_t n)
{
	if (!h || n == 0 || n > AL_SEAL_HOST_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		bool alnum = (h[i] >= 'a' && h[i] <= 'z') || (h[i] >= '0' && h[i] <= '9');
		if (!alnum && (i == 0 || (h[i] != '.' && h[i] != '-')))
			return false;
	}
	return true;
}

bool al_kv_line(struct al_kv *c, const char *name, const uint8_t **v, size_t *vn)
{
	size_t l = strlen(name);
	const uint8_t *nl;

	if (c->n - c->i < l + 2 || memcmp(c->p + c->i, name, l) != 0 || c->p[c->i + l] != ' ')
		return false;
	*v = c->p + c->i + l + 1;
	nl = memchr(*v, '\n', c->n - (c->i + l + 1));
	if (!nl || nl == *v)
		return false;
	*vn = (size_t)(nl - *v);
	c->i = (size_t)(nl - c->p) + 1;
	return true;
}

static bool literal(struct al_kv *c, const char *s)
{
	size_t l = strlen(s);

	if (c->n - c->i < l || memcmp(c->p + c->i, s, l) != 0)
		return false;
	c->i += l;
	return true;
}

/* decimal, no sign, no leading zero, <= UINT64_MAX */
static bool dec(const uint8_t *v, size_t n, uint64_t *out)
{
	uint64_t x = 0;

	if (n == 0 || n > 20 || (n > 1 && v[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned d;
		if (v[i] < '0' || v[i] > '9')
			return false;
		d = (unsigned)(v[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	*out = x;
	return true;
}

static bool lhex(const uint8_t *v, size_t n, uint8_t *out, size_t len)
{
	if (n != 2 * len)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
			return false;
	return al_unhex(v, n, out) == 0;
}

static bool dec_line(struct al_kv *c, const char *name, uint64_t *out)
{
	const uint8_t *v;
	size_t n;

	return al_kv_line(c, name, &v, &n) && dec(v, n, out);
}

static bool hex_line(struct al_kv *c, const char *name, uint8_t *out, size_t len)
{
	const uint8_t *v;
	size_t n;

	return al_kv_line(c, name, &v, &n) && lhex(v, n, out, len);
}

static bool host_line(struct al_kv *c, uint8_t *host, size_t *hlen)
{
	const uint8_t *v;
	size_t n;

	if (!al_kv_line(c, "host", &v, &n) || !al_seal_host_ok(v, n))
		return false;
	memcpy(host, v, n);
	*hlen = n;
	return true;
}

/* scheme, host, key-id, t0, delta */
static bool params(struct al_kv *c, struct al_seal_params *p)
{
	return literal(c, "scheme hmac-sha256-tree32\n") && host_line(c, p->host, &p->host_len) &&
	       hex_line(c, "key-id", p->key_id, AL_SEAL_KID_LEN) && dec_line(c, "t0", &p->t0) &&
	       dec_line(c, "delta", &p->delta) && p->delta > 0;
}

int al_vkey_parse(const uint8_t *buf, size_t n, struct al_vkey *ret)
{
	struct al_kv c = { buf, n, 0 };
	struct al_vkey k;
	uint8_t kid[AL_SEAL_KID_LEN];
	int r = -EINVAL;

	memset(&k, 0, sizeof(k));
	if (!buf || !literal(&c, "auditlog-verification-key 2\n") || !params(&c, &k.p) ||
	    !hex_line(&c, "seed", k.seed, sizeof(k.seed)) || c.i != n)
		goto out;
	r = al_seal_key_id(k.seed, k.p.host, k.p.host_len, k.p.t0, k.p.delta, kid);
	if (r == 0 && CRYPTO_memcmp(kid, k.p.key_id, sizeof(kid)) != 0)
		r = -EBADMSG;
	if (r == 0)
		*ret = k;
out:
	OPENSSL_cleanse(&k, sizeof(k));
	return r;
}

static long params_format(const struct al_seal_params *p, char *out, size_t cap)
{
	char kid[2 * AL_SEAL_KID_LEN + 1];
	int n;

	if (!al_seal_host_ok(p->host, p->host_len) || p->delta == 0)
		return -EINVAL;
	al_hex(p->key_id, AL_SEAL_KID_LEN, kid);
	kid[sizeof(kid) - 1] = 0;
	n = snprintf(out, cap, "scheme hmac-sha256-tree32\nhost %.*s\nkey-id %s\nt0 %" PRIu64
		     "\ndelta %" PRIu64 "\n", (int)p->host_len, (const char *)p->host, kid, p->t0,
		     p->delta);
	return n < 0 || (size_t)n >= cap ? -E2BIG : n;
}

long al_vkey_format(const struct al_vkey *k, char *out, size_t cap)
{
	static const char head[] = "auditlog-verification-key 2\n";
	size_t o = sizeof(head) - 1;
	long n;

	if (cap < o)
		return -E2BIG;
	memcpy(out, head, o);
	n = params_format(&k->p, out + o, cap - o);
	if (n < 0)
		return n;
	o += (size_t)n;
	if (cap - o < 5 + 64 + 2)
		return -E2BIG;
	memcpy(out + o, "seed ", 5);
	al_hex(k->seed, AL_SEAL_SEED_LEN, out + o + 5);
	out[o + 69] = '\n';
	out[o + 70] = 0;
	return (long)(o + 70);
}

/* The (depth, index) of C(e)'s k-th node, in file order; false past the end. */
static bool cover(uint32_t e, unsigned k, uint8_t *depth, uint32_t *index)
{
	if (k == 0) {
		*depth = AL_SEAL_DEPTH;
		*index = e;
		return true;
	}
	for (unsigned d = AL_SEAL_DEPTH; d >= 1; d--) {
		if ((((uint64_t)e >> (AL_SEAL_DEPTH - d)) & 1) == 0 && --k == 0) {
			*depth = (uint8_t)d;
			*index = (uint32_t)(((uint64_t)e >> (AL_SEAL_DEPTH - d)) + 1);
			return true;
		}
	}
	return false;
}

int al_sstate_parse(const uint8_t *buf, size_t n, struct al_sstate *ret)
{
	struct al_kv c = { buf, n, 0 };
	struct al_sstate s;
	uint64_t epoch;
	int r = -EINVAL;

	memset(&s, 0, sizeof(s));
	if (!buf || !literal(&c, "auditlog-sealing-state 2\n") || !params(&c, &s.p) ||
	    !dec_line(&c, "max-jump", &s.max_jump) || s.max_jump == 0 ||
	    !dec_line(&c, "epoch", &epoch) || epoch > UINT32_MAX ||
	    !hex_line(&c, "boot-id", s.boot_id, sizeof(s.boot_id)) ||
	    !dec_line(&c, "boot-start", &s.boot_start))
		goto out;
	s.st.epoch = (uint32_t)epoch;
	for (unsigned k = 0;; k++) {
		uint8_t d;
		uint32_t idx;
		const uint8_t *v;
		size_t vn;
		char want[32];
		int wl;

		if (!cover(s.st.epoch, k, &d, &idx))
			break;
		/* "node <depth> <index> <hex>": the position fixes depth and index */
		wl = snprintf(want, sizeof(want), "%u %" PRIu32 " ", d, idx);
		if (!al_kv_line(&c, "node", &v, &vn) || vn != (size_t)wl + 64 ||
		    memcmp(v, want, (size_t)wl) != 0 ||
		    !lhex(v + wl, 64, s.st.node[k].seed, AL_SEAL_SEED_LEN))
			goto out;
		s.st.node[k].depth = d;
		s.st.node[k].index = idx;
		s.st.n = k + 1;
	}
	if (c.i != n)
		goto out;
	*ret = s;
	r = 0;
out:
	OPENSSL_cleanse(&s, sizeof(s));
	return r;
}

long al_sstate_format(const struct al_sstate *s, char *out, size_t cap)
{
	static const char head[] = "auditlog-sealing-state 2\n";
	char bid[33];
	size_t o = sizeof(head) - 1;
	long n;
	int w;

	if (cap < o)
		return -E2BIG;
	memcpy(out, head, o);
	n = params_format(&s->p, out + o, cap - o);
	if (n < 0)
		return n;
	o += (size_t)n;
	al_hex(s->boot_id, sizeof(s->boot_id), bid);
	bid[32] = 0;
	w = snprintf(out + o, cap - o, "max-jump %" PRIu64 "\nepoch %" PRIu32 "\nboot-id %s\nboot-start %" PRIu64 "\n",
		     s->max_jump, s->st.epoch, bid, s->boot_start);
	if (w < 0 || (size_t)w >= cap - o)
		return -E2BIG;
	o += (size_t)w;
	for (unsigned k = 0; k < s->st.n; k++) {
		char hx[65];
		uint8_t d;
		uint32_t idx;
		if (!cover(s->st.epoch, k, &d, &idx) || d != s->st.node[k].depth ||
		    idx != s->st.node[k].index)
			return -EINVAL;
		al_hex(s->st.node[k].seed, AL_SEAL_SEED_LEN, hx);
		hx[64] = 0;
		w = snprintf(out + o, cap - o, "node %u %" PRIu32 " %s\n", d, idx, hx);
		OPENSSL_cleanse(hx, sizeof(hx));
		if (w < 0 || (size_t)w >= cap - o)
			return -E2BIG;
		o += (size_t)w;
	}
	{
		uint8_t d;
		uint32_t idx;
		if (cover(s->st.epoch, s->st.n, &d, &idx))
			return -EINVAL; /* fewer nodes than C(epoch) holds */
	}
	return (long)o;
}

int al_ckey_parse(const uint8_t *buf, size_t n, bool is_secret, struct al_ckey *ret)
{
	struct al_kv c = { buf, n, 0 };
	struct al_ckey k;
	int r = -EINVAL;

	memset(&k, 0, sizeof(k));
	if (buf &&
	    literal(&c, is_secret ? "auditlog-signing-key 2\n" : "auditlog-checkpoint-key 2\n") &&
	    host_line(&c, k.host, &k.host_len) &&
	    hex_line(&c, is_secret ? "ed25519-seed" : "ed25519", k.key, sizeof(k.key)) && c.i == n) {
		*ret = k;
		r = 0;
	}
	OPENSSL_cleanse(&k, sizeof(k));
	return r;
}

long al_ckey_format(const struct al_ckey *k, bool is_secret, char *out, size_t cap)
{
	char hx[65];
	int n;

	if (!al_seal_host_ok(k->host, k->host_len))
		return -EINVAL;
	al_hex(k->key, sizeof(k->key), hx);
	hx[64] = 0;
	n = snprintf(out, cap, "%s\nhost %.*s\n%s %s\n",
		     is_secret ? "auditlog-signing-key 2" : "auditlog-checkpoint-key 2",
		     (int)k->host_len, (const char *)k->host, is_secret ? "ed25519-seed" : "ed25519",
		     hx);
	OPENSSL_cleanse(hx, sizeof(hx));
	return n < 0 || (size_t)n >= cap ? -E2BIG : n;
}

/* ---- attestation statements (27) ---------------------------------------- */

int al_attest_parse(const uint8_t *buf, size_t n, struct al_attest *ret, size_t *ret_tlen)
{
	struct al_kv c = { buf, n, 0 };
	struct al_attest a;
	uint64_t epoch;
	const uint8_t *v;
	size_t vn, tlen;

	memset(&a, 0, sizeof(a));
	if (!buf || !literal(&c, "auditlog-attestation 2\n") || !params(&c, &a.p) ||
	    !dec_line(&c, "epoch", &epoch) || epoch > UINT32_MAX || !dec_line(&c, "wall", &a.wall) ||
	    !hex_line(&c, "boot-id", a.boot_id, sizeof(a.boot_id)) ||
	    !dec_line(&c, "boot-time", &a.boot_time) || !al_kv_line(&c, "nonce", &v, &vn))
		return -EINVAL;
	if (vn == 1 && v[0] == '-')
		a.has_nonce = false;
	else if (lhex(v, vn, a.nonce, sizeof(a.nonce)))
		a.has_nonce = true;
	else
		return -EINVAL;
	tlen = c.i;
	if (!hex_line(&c, "mac", a.mac, sizeof(a.mac)) || c.i != n)
		return -EINVAL;
	a.epoch = (uint32_t)epoch;
	*ret = a;
	if (ret_tlen)
		*ret_tlen = tlen;
	return 0;
}

long al_attest_format(const struct al_attest *a, const uint8_t K[AL_SEAL_SEED_LEN], char *out,
		      size_t cap)
{
	static const char head[] = "auditlog-attestation 2\n";
	char bid[33], nonce[65], mac[65];
	uint8_t m[AL_HASH_LEN];
	size_t o = sizeof(head) - 1;
	long n;
	int w, r;

	if (cap < o)
		return -E2BIG;
	memcpy(out, head, o);
	n = params_format(&a->p, out + o, cap - o);
	if (n < 0)
		return n;
	o += (size_t)n;
	al_hex(a->boot_id, sizeof(a->boot_id), bid);
	bid[32] = 0;
	if (a->has_nonce)
		al_hex(a->nonce, sizeof(a->nonce), nonce);
	else
		nonce[0] = '-', nonce[1] = 0;
	nonce[a->has_nonce ? 64 : 1] = 0;
	w = snprintf(out + o, cap - o, "epoch %" PRIu32 "\nwall %" PRIu64 "\nboot-id %s\nboot-time %" PRIu64
		     "\nnonce %s\n", a->epoch, a->wall, bid, a->boot_time, nonce);
	if (w < 0 || (size_t)w >= cap - o)
		return -E2BIG;
	o += (size_t)w;
	if ((r = al_attest_mac(K, (const uint8_t *)out, o, m)) < 0)
		return r;
	al_hex(m, sizeof(m), mac);
	mac[64] = 0;
	w = snprintf(out + o, cap - o, "mac %s\n", mac);
	if (w < 0 || (size_t)w >= cap - o)
		return -E2BIG;
	return (long)(o + (size_t)w);
}

int al_attest_check(const struct al_attest *a, const uint8_t *buf, size_t n, const struct al_vkey *vk)
{
	uint8_t K[AL_SEAL_SEED_LEN], m[AL_HASH_LEN];
	size_t tlen = n - (4 + 2 * AL_HASH_LEN + 1); /* the text before "mac <64 hex>\n" */
	int r;

	if (memcmp(a->p.key_id, vk->p.key_id, AL_SEAL_KID_LEN) != 0)
		return -ENOKEY;
	if (a->p.host_len != vk->p.host_len || memcmp(a->p.host, vk->p.host, a->p.host_len) != 0 ||
	    a->p.t0 != vk->p.t0 || a->p.delta != vk->p.delta || n < 4 + 2 * AL_HASH_LEN + 1)
		return -EINVAL;
	r = al_seal_node(vk->seed, AL_SEAL_DEPTH, a->epoch, K);
	if (r == 0)
		r = al_attest_mac(K, buf, tlen, m);
	if (r == 0 && CRYPTO_memcmp(m, a->mac, sizeof(m)) != 0)
		r = -EBADMSG;
	OPENSSL_cleanse(K, sizeof(K));
	OPENSSL_cleanse(m, sizeof(m));
	return r;
}
