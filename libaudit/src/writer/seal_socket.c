/* SPDX-License-Identifier: MIT */
/*
 * The socket seal provider (sealer.h): auditlog-sealer holds the sealing
 * state and the signing key; this process sends what a seal or a checkpoint
 * covers and gets the MAC or the signed note back (docs/sealer.md). It holds
 * no key material at all.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "sealer.h"
#include "seal_wire.h"

#define ANSWER_WAIT_MS 5000

struct sock {
	struct al_sealer base;
	const struct al_clock_hooks *clock;
	int fd;
	pid_t pid;               /* the process that connected (fork: sealer.h) */
	int dead;                /* 0, or the -errno every call answers */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	bool have_now;
	struct al_sealer_now now; /* the sealer's last answer to NOW */
	bool bound;               /* chain_id: the chain this writer's seals named */
	uint8_t chain_id[32];
	uint8_t buf[AL_SW_MAX];
};

static const char *const kind_word[4] = {"batch", "idle", "open", "close"};

static int kind_code(const char *k)
{
	for (int i = 0; k && i < 4; i++)
		if (strcmp(k, kind_word[i]) == 0)
			return i;
	return -1;
}

/* One request, one answer: the answer's status (>= 0) and body in p->buf,
 * its length in *ret_n. A broken connection is final. */
static int call(struct sock *p, unsigned op, const uint8_t *body, size_t n, size_t *ret_n)
{
	struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
	ssize_t k;
	int r;

	if (p->dead)
		return p->dead;
	if (getpid() != p->pid)
		return -ECHILD; /* a forked child: the parent's connection is not ours */
	if (AL_SW_HDR + n > sizeof(p->buf))
		return -E2BIG;
	al_sw_hdr(p->buf, op, 0);
	if (n)
		memmove(p->buf + AL_SW_HDR, body, n);
	do
		k = send(p->fd, p->buf, AL_SW_HDR + n, MSG_NOSIGNAL);
	while (k < 0 && errno == EINTR);
	OPENSSL_cleanse(p->buf, sizeof(p->buf));
	if (k != (ssize_t)(AL_SW_HDR + n)) {
		p->dead = -ENOTCONN;
		return p->dead;
	}
	do
		r = poll(&pfd, 1, ANSWER_WAIT_MS);
	while (r < 0 && errno == EINTR);
	if (r == 0) {
		p->dead = -ETIMEDOUT;
		return p->dead;
	}
	do
		k = recv(p->fd, p->buf, sizeof(p->buf), MSG_TRUNC);
	while (k < 0 && errno == EINTR);
	if (k <= 0) {
		p->dead = -ENOTCONN;
		return p->dead;
	}
	if ((size_t)k < AL_SW_HDR || (size_t)k > sizeof(p->buf) ||
	    al_sw_le16(p->buf) != AL_SW_VERSION || al_sw_le16(p->buf + 2) != op) {
		p->dead = -EPROTO;
		return p->dead;
	}
	r = (int32_t)al_sw_le32(p->buf + 4);
	if (r < 0)
		return r;
	*ret_n = (size_t)k - AL_SW_HDR;
	return 0;
}

static int ask_now(struct sock *p)
{
	const uint8_t *a = p->buf + AL_SW_HDR;
	size_t n = 0;
	int r = call(p, AL_SW_NOW, NULL, 0, &n);

	if (r < 0)
		return r;
	if (n != AL_SW_NOW_ANS)
		return p->dead = -EPROTO;
	p->now.epoch = al_sw_le32(a);
	p->now.clock = al_sw_le32(a + 4) & AL_SW_NOW_CLOCK;
	p->now.boot_now = al_sw_le64(a + 8);
	p->now.boot_start = al_sw_le64(a + 16);
	p->now.boot_end = al_sw_le64(a + 24);
	p->now.wall = al_sw_le64(a + 32);
	p->now.expected = al_sw_le64(a + 40);
	p->have_now = true;
	return 0;
}

/* The sealer's epoch, asked once per epoch: in between, its answer moved
 * along the boot clock (expected grows with it, docs/format.md 17.2 rule 3). */
static int so_now(struct al_sealer *s, struct al_sealer_now *ret)
{
	struct sock *p = (struct sock *)s;
	uint64_t b = al_clock_boottime(p->clock), w;
	int64_t d;
	int r;

	if (p->dead)
		return p->dead;
	if (!p->have_now || b >= p->now.boot_end || b < p->now.boot_now) {
		r = ask_now(p);
		if (r < 0)
			return r;
		b = al_clock_boottime(p->clock);
		if (b < p->now.boot_now)
			b = p->now.boot_now;
	}
	w = al_clock_realtime(p->clock);
	*ret = p->now;
	ret->expected = p->now.expected + (b - p->now.boot_now);
	ret->boot_now = b;
	ret->wall = w;
	d = (int64_t)(w - ret->expected);
	ret->clock = (uint64_t)(d < 0 ? -d : d) > s->delta;
	return 0;
}

static int so_seal(struct al_sealer *s, struct al_v2_seal *seal, const uint8_t prev[AL_HASH_LEN],
		   uint64_t seq, const char ts[AL_TS_LEN])
{
	struct sock *p = (struct sock *)s;
	uint8_t q[AL_SW_SEAL_REQ] = {0}, *o = q;
	const uint8_t *a = p->buf + AL_SW_HDR;
	int kind = kind_code(seal->kind), pk = seal->has_prev ? kind_code(seal->prev_kind) : 0;
	size_t n = 0;
	int r;

	if (kind < 0 || pk < 0)
		return -EINVAL;
	*o++ = (uint8_t)kind;
	*o++ = seal->has_prev;
	*o++ = (uint8_t)pk;
	*o++ = 0;
	o = al_put_le32(o, seal->epoch);
	o = al_put_le64(o, seq);
	o = al_put_le64(o, seal->has_prev ? seal->prev_seal : 0);
	memcpy(o, seal->chain_id, 32);
	o += 32;
	memcpy(o, prev, AL_HASH_LEN);
	o += AL_HASH_LEN;
	memcpy(o, ts, AL_TS_LEN);
	r = call(p, AL_SW_SEAL, q, sizeof(q), &n);
	if (r < 0)
		return r;
	if (n != AL_SW_SEAL_ANS || al_sw_le32(a) < seal->epoch ||
	    memcmp(a + 4, s->key_id, AL_SEAL_KID_LEN) != 0)
		return p->dead = -EPROTO;
	seal->epoch = al_sw_le32(a);
	memcpy(seal->key_id, a + 4, AL_SEAL_KID_LEN);
	memcpy(seal->mac, a + 4 + AL_SEAL_KID_LEN, AL_HASH_LEN);
	seal->has_mac = true;
	memcpy(p->chain_id, seal->chain_id, 32); /* the connection is bound to it now */
	p->bound = true;
	if (seal->epoch > p->now.epoch)
		p->have_now = false; /* the sealer moved on: ask at the next now() */
	OPENSSL_cleanse(p->buf, sizeof(p->buf));
	return 0;
}

static long so_sign(struct al_sealer *s, const uint8_t *name, size_t nlen, const uint8_t *text,
		    size_t tlen, uint8_t *out, size_t cap)
{
	struct sock *p = (struct sock *)s;
	uint8_t q[AL_SW_SIGN_REQ_MAX], *o = q;
	size_t n = 0;
	int r;

	if (nlen == 0 || nlen > AL_SW_SIGN_NAME_MAX || tlen > AL_NOTE_MAX)
		return -EINVAL;
	o = al_sw_put16(o, (uint16_t)nlen);
	o = al_sw_put16(o, (uint16_t)tlen);
	memcpy(o, name, nlen);
	memcpy(o + nlen, text, tlen);
	r = call(p, AL_SW_SIGN, q, 4 + nlen + tlen, &n);
	if (r < 0)
		return r;
	if (n > cap)
		return -E2BIG;
	memcpy(out, p->buf + AL_SW_HDR, n);
	return (long)n;
}

static int so_check_tail(struct al_sealer *s, const uint8_t key_id[AL_SEAL_KID_LEN], uint32_t epoch)
{
	struct sock *p = (struct sock *)s;
	uint8_t q[AL_SW_CHECK_REQ];
	size_t n = 0;

	memcpy(q, key_id, AL_SEAL_KID_LEN);
	al_put_le32(q + AL_SEAL_KID_LEN, epoch);
	return call(p, AL_SW_CHECK_TAIL, q, sizeof(q), &n);
}

static void so_free(struct al_sealer *s)
{
	struct sock *p = (struct sock *)s;

	if (p->fd >= 0)
		close(p->fd);
	OPENSSL_cleanse(p->buf, sizeof(p->buf));
	free(p);
}

/* A new connection and its HELLO (key_id: the one expected, or zeros: any):
 * on success p->fd is it and the HELLO's answer is in p->buf (*ret_n bytes).
 * A reconnection names the chain its seals named (docs/sealer.md,
 * "Binding"): the held batch may resume at its checkpoint's signature,
 * which an unbound connection refuses. */
static int connect_hello(struct sock *p, const uint8_t key_id[AL_SEAL_KID_LEN], size_t *ret_n)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	uint8_t q[AL_SW_HELLO_REQ] = {0}; /* chain id not known yet: zeros */
	int fd, r;

	if (p->bound)
		memcpy(q, p->chain_id, 32);
	if (key_id)
		memcpy(q + 32, key_id, AL_SEAL_KID_LEN);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	strcpy(sa.sun_path, p->path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (p->fd >= 0)
		close(p->fd);
	p->fd = fd;
	p->pid = getpid();
	p->dead = 0;
	p->have_now = false;
	r = call(p, AL_SW_HELLO, q, sizeof(q), ret_n);
	if (r == 0 && (*ret_n != AL_SW_HELLO_ANS || p->buf[AL_SW_HDR + 24] == 0 ||
		       p->buf[AL_SW_HDR + 24] > AL_SEAL_HOST_MAX ||
		       al_sw_le64(p->buf + AL_SW_HDR + 16) == 0))
		r = -EPROTO;
	if (r < 0)
		p->dead = r;
	return r;
}

static int so_reconnect(struct al_sealer *s)
{
	struct sock *p = (struct sock *)s;
	const uint8_t *a = p->buf + AL_SW_HDR;
	size_t n = 0;
	int r = connect_hello(p, s->key_id, &n);

	if (r < 0)
		return r;
	/* the same key, schedule and host, or the chain cannot go on with it */
	if (memcmp(a, s->key_id, AL_SEAL_KID_LEN) != 0 || al_sw_le64(a + 8) != s->t0 ||
	    al_sw_le64(a + 16) != s->delta || a[24] != s->host_len ||
	    memcmp(a + 25, s->host, s->host_len) != 0)
		r = p->dead = -ESTALE;
	OPENSSL_cleanse(p->buf, sizeof(p->buf));
	return r;
}

static const struct al_sealer_ops socket_ops = {
	.now = so_now,
	.seal = so_seal,
	.sign = so_sign,
	.check_tail = so_check_tail,
	.reconnect = so_reconnect,
	.free = so_free,
};

int al_sealer_socket_open(const char *path, const struct al_clock_hooks *clock,
			  struct al_sealer **ret)
{
	struct sock *p;
	const uint8_t *a;
	size_t n = 0;
	int r;

	if (!path || strlen(path) >= sizeof(p->path))
		return -ENAMETOOLONG;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->base.ops = &socket_ops;
	p->clock = clock;
	p->fd = -1;
	strcpy(p->path, path);
	r = connect_hello(p, NULL, &n);
	if (r < 0)
		goto err;
	a = p->buf + AL_SW_HDR;
	memcpy(p->base.key_id, a, AL_SEAL_KID_LEN);
	p->base.t0 = al_sw_le64(a + 8);
	p->base.delta = al_sw_le64(a + 16);
	p->base.host_len = a[24];
	memcpy(p->base.host, a + 25, p->base.host_len);
	OPENSSL_cleanse(p->buf, sizeof(p->buf));
	*ret = &p->base;
	return 0;
err:
	so_free(&p->base);
	return r;
}
