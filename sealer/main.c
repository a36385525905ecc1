/* SPDX-License-Identifier: MIT */
/*
 * auditlog-sealer: one process holds a host's sealing state and checkpoint
 * signing key (DESIGN.md "Key custody") and answers writers over a UNIX
 * SOCK_SEQPACKET socket (docs/sealer.md). The key work is the in-process
 * provider's (libaudit/src/writer/seal_inproc.c): the same file rules, the
 * same durable advance; this file is the socket, the peer check and the
 * timer that advances the state every epoch whether or not anyone writes.
 * One thread, one poll loop; the registry of chains (registry.c) is a log
 * of its own, written with the library's writer (its worker thread). Exit 0
 * on SIGTERM/SIGINT (socket unlinked), 1 on a failure, 2 on usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "cli.h"
#include "note.h"
#include "registry.h"
#include "sealer.h"
#include "seal_wire.h"

#define PROG "auditlog-sealer"
#define MAX_CONN 256
#define MAX_ALLOW 64

static const char usage[] =
	"usage: auditlog-sealer --state FILE --signing-key FILE --socket PATH\n"
	"                       [--allow-uid UID]... [--allow-gid GID]... [--registry DIR]\n"
	"Hold a host's format v2 sealing state and checkpoint signing key and seal\n"
	"for writers that connect to PATH (docs/sealer.md).\n"
	"  --state FILE         the sealing state (auditlog-keygen; 0600, advanced here)\n"
	"  --signing-key FILE   the checkpoint signing key (0600)\n"
	"  --socket PATH        the UNIX socket to create (must not exist)\n"
	"  --allow-uid UID      accept peers with this uid (repeatable)\n"
	"  --allow-gid GID      accept peers with this primary gid (repeatable)\n"
	"  --registry DIR       the registry of chains sealed (default: registry beside --state)\n"
	"  --version            the version\n"
	"Without --allow-uid and --allow-gid only the sealer's own uid is accepted.\n";

struct conn {
	bool allowed;
	bool bound;       /* chain id known */
	char chain_id[32];
	struct ucred peer;
	bool registered; /* its segment's chain-open is in the registry */
	struct reg_segment seg;
	bool has_tail_key; /* CHECK_TAIL named the key of the log's last seal: */
	uint8_t tail_key[AL_SEAL_KID_LEN]; /* another than ours marks the open seal (17.4) */
};

static uid_t allow_uid[MAX_ALLOW];
static gid_t allow_gid[MAX_ALLOW];
static unsigned n_uid, n_gid;

static bool peer_allowed(const struct ucred *c)
{
	for (unsigned i = 0; i < n_uid; i++)
		if (c->uid == allow_uid[i])
			return true;
	for (unsigned i = 0; i < n_gid; i++)
		if (c->gid == allow_gid[i])
			return true;
	return false;
}


/*
 * The test clock (docs/sealer.md "The test clock"): with
 * AUDITLOG_SEALER_TEST_CLOCK=FILE in the environment the sealer's boot and
 * wall clocks read as the real ones plus the whole seconds written in FILE
 * (re-read at every reading; absent or empty: 0), through the library's
 * clock hooks, so a test moves epochs without sleeping. Production units
 * never set it; the sealer says on stderr that it runs on it.
 */
#define TEST_CLOCK_ENV "AUDITLOG_SEALER_TEST_CLOCK"
#define TEST_CLOCK_MAX_S (UINT64_C(1) << 32)

static uint64_t test_clock_offset(void *ctx)
{
	uint8_t *buf = NULL;
	size_t n = 0;
	uint64_t v = 0;

	if (cli_read_small(ctx, 32, true, &buf, &n) == 0) {
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
			n--;
		if (n > 0 && cli_parse_udec((const char *)buf, n, TEST_CLOCK_MAX_S, &v) < 0)
			v = 0; /* a half-written file reads as no offset, never as garbage */
	}
	free(buf);
	return v * UINT64_C(1000000000);
}

static struct al_clock_hooks test_clock; /* set once in main; the provider keeps a pointer */

static uint64_t test_clock_boot(void *ctx)
{
	return al_clock_boottime(NULL) + test_clock_offset(ctx);
}

static uint64_t test_clock_real(void *ctx)
{
	return al_clock_realtime(NULL) + test_clock_offset(ctx);
}

/* A chain id is 32 lowercase hex (docs/format.md 12). */
static bool chain_id_ok(const uint8_t *c)
{
	for (int i = 0; i < 32; i++)
		if (!((c[i] >= '0' && c[i] <= '9') || (c[i] >= 'a' && c[i] <= 'f')))
			return false;
	return true;
}

/* Bind the connection to one chain: the first id it names; another later is refused. */
static int bind_chain(struct conn *c, const uint8_t *id)
{
	if (!chain_id_ok(id))
		return -EINVAL;
	if (c->bound)
		return memcmp(c->chain_id, id, 32) == 0 ? 0 : -EPERM;
	memcpy(c->chain_id, id, 32);
	c->bound = true;
	return 0;
}

static const char *const kind_word[4] = {"batch", "idle", "open", "close"};

/* A seal the sealer made for connection c: its segment's first is registered
 * (durably) before the MAC may leave; every one is remembered for the end
 * record (docs/format.md 26.1). */
static int registry_seal(struct registry *g, struct conn *c, const struct al_v2_seal *sl,
			 const uint8_t prev[AL_HASH_LEN], uint64_t seq, const char ts[AL_TS_LEN])
{
	uint8_t h[AL_HASH_LEN];
	int r = registry_seal_hash(sl, prev, seq, ts, h);

	if (r < 0)
		return r;
	if (!c->registered) {
		memcpy(c->seg.chain_id, c->chain_id, 32);
		c->seg.peer = c->peer;
		c->seg.first = seq;
		r = registry_chain_open(g, &c->seg);
		if (r < 0) {
			fprintf(stderr, PROG ": registering chain %.32s: %s\n", c->chain_id, strerror(-r));
			return r;
		}
		c->registered = true;
	}
	c->seg.last = seq;
	memcpy(c->seg.head, h, AL_HASH_LEN);
	c->seg.last_close = strcmp(sl->kind, "close") == 0;
	return 0;
}

/* The connection ends: chain-close or chain-lost for its segment. */
static void registry_end(struct registry *g, struct conn *c)
{
	int r;

	if (!c->registered)
		return;
	c->registered = false;
	r = registry_chain_end(g, &c->seg);
	if (r < 0)
		fprintf(stderr, PROG ": registering the end of chain %.32s: %s\n", c->chain_id, strerror(-r));
}

/* Answer one request in q (n bytes) into a (AL_SW_MAX): the answer's length. */
static size_t answer(struct al_sealer *s, struct registry *g, struct conn *c, const uint8_t *q, size_t n,
		     uint8_t *a)
{
	unsigned op = n >= AL_SW_HDR ? al_sw_le16(q + 2) : 0;
	const uint8_t *b = q + AL_SW_HDR;
	uint8_t *o = a + AL_SW_HDR;
	size_t bn = n >= AL_SW_HDR ? n - AL_SW_HDR : 0, an = 0;
	int r = 0;

	if (n < AL_SW_HDR || al_sw_le16(q) != AL_SW_VERSION || al_sw_le32(q + 4) != 0) {
		r = -EPROTO;
		goto out;
	}
	if (!c->allowed) {
		r = -EACCES;
		goto out;
	}
	switch (op) {
	case AL_SW_HELLO: {
		static const uint8_t zero[AL_SEAL_KID_LEN + 32];
		if (bn != AL_SW_HELLO_REQ) {
			r = -EINVAL;
			break;
		}
		if (memcmp(b, zero, 32) != 0 && (r = bind_chain(c, b)) < 0)
			break;
		if (memcmp(b + 32, zero, AL_SEAL_KID_LEN) != 0 &&
		    CRYPTO_memcmp(b + 32, s->key_id, AL_SEAL_KID_LEN) != 0) {
			r = -ESTALE; /* not the key this writer's chain was sealed with */
			break;
		}
		memset(o, 0, AL_SW_HELLO_ANS);
		memcpy(o, s->key_id, AL_SEAL_KID_LEN);
		al_put_le64(o + 8, s->t0);
		al_put_le64(o + 16, s->delta);
		o[24] = (uint8_t)s->host_len;
		memcpy(o + 25, s->host, s->host_len);
		an = AL_SW_HELLO_ANS;
		break;
	}
	case AL_SW_NOW: {
		struct al_sealer_now nw;
		if (bn != AL_SW_NOW_REQ) {
			r = -EINVAL;
			break;
		}
		r = s->ops->now(s, &nw);
		if (r < 0)
			break;
		o = al_put_le32(o, nw.epoch);
		o = al_put_le32(o, nw.clock ? AL_SW_NOW_CLOCK : 0);
		o = al_put_le64(o, nw.boot_now);
		o = al_put_le64(o, nw.boot_start);
		o = al_put_le64(o, nw.boot_end);
		o = al_put_le64(o, nw.wall);
		al_put_le64(o, nw.expected);
		an = AL_SW_NOW_ANS;
		break;
	}
	case AL_SW_SEAL: {
		struct al_v2_seal sl = {0};
		struct al_sealer_now nw;
		char ts[AL_TS_LEN];
		if (bn != AL_SW_SEAL_REQ || b[0] > 3 || b[1] > 1 || b[2] > 3 || b[3] ||
		    b[118] || b[119]) {
			r = -EINVAL;
			break;
		}
		if (al_parse_ts(b + 88, AL_TS_LEN, NULL) < 0 || (b[1] && b[0] != 2)) {
			r = -EINVAL; /* prev_seal only on an open seal (docs/format.md 19.2) */
			break;
		}
		r = bind_chain(c, b + 24);
		if (r < 0)
			break;
		sl.kind = kind_word[b[0]];
		sl.has_prev = b[1];
		sl.prev_kind = kind_word[b[2]];
		sl.epoch = al_sw_le32(b + 4);
		sl.prev_seal = al_sw_le64(b + 16);
		memcpy(sl.chain_id, b + 24, 32);
		memcpy(ts, b + 88, AL_TS_LEN);
		/* always the current epoch's key: an earlier one is gone (or going) */
		r = s->ops->now(s, &nw);
		if (r < 0)
			break;
		if (sl.epoch > nw.epoch) {
			r = -EINVAL; /* a future epoch would move the state past every writer */
			break;
		}
		sl.epoch = nw.epoch;
		/* the re-key mark, as the writer puts it in the line: the tail's
		 * seal was under another key (docs/format.md 17.4) */
		if (sl.has_prev && c->has_tail_key && memcmp(c->tail_key, s->key_id, AL_SEAL_KID_LEN) != 0) {
			sl.has_prev_key = true;
			memcpy(sl.prev_key, c->tail_key, AL_SEAL_KID_LEN);
		}
		r = s->ops->seal(s, &sl, b + 56, al_sw_le64(b + 8), ts);
		if (r == 0)
			r = registry_seal(g, c, &sl, b + 56, al_sw_le64(b + 8), ts);
		if (r < 0) {
			OPENSSL_cleanse(sl.mac, sizeof(sl.mac));
			break;
		}
		o = al_put_le32(o, sl.epoch);
		memcpy(o, sl.key_id, AL_SEAL_KID_LEN);
		memcpy(o + AL_SEAL_KID_LEN, sl.mac, AL_HASH_LEN);
		OPENSSL_cleanse(sl.mac, sizeof(sl.mac));
		an = AL_SW_SEAL_ANS;
		break;
	}
	case AL_SW_SIGN: {
		uint8_t cid[32];
		uint8_t origin[AL_ORIGIN_MAX];
		size_t nl, tl;
		long on, k;
		if (bn < 4 || (nl = al_sw_le16(b)) == 0 || nl > AL_SW_SIGN_NAME_MAX ||
		    (tl = al_sw_le16(b + 2)) > AL_NOTE_MAX || bn != 4 + nl + tl) {
			r = -EINVAL;
			break;
		}
		/* only this connection's chain: the origin <host>/auditlog/<chain id> */
		if (!c->bound) {
			r = -EPERM;
			break;
		}
		memcpy(cid, c->chain_id, 32);
		on = al_checkpoint_origin(s->host, s->host_len, cid, origin);
		if (on < 0 || (size_t)on != nl || memcmp(origin, b + 4, nl) != 0 ||
		    tl < nl + 1 || memcmp(b + 4 + nl, origin, nl) != 0 || b[4 + nl + nl] != '\n') {
			r = -EPERM;
			break;
		}
		k = s->ops->sign(s, b + 4, nl, b + 4 + nl, tl, o, AL_SW_MAX - AL_SW_HDR);
		if (k < 0) {
			r = (int)k;
			break;
		}
		an = (size_t)k;
		break;
	}
	case AL_SW_CHECK_TAIL:
		if (bn != AL_SW_CHECK_REQ) {
			r = -EINVAL;
			break;
		}
		r = s->ops->check_tail(s, b, al_sw_le32(b + AL_SEAL_KID_LEN));
		if (r == 0) {
			memcpy(c->tail_key, b, AL_SEAL_KID_LEN);
			c->has_tail_key = true;
		}
		break;
	default:
		r = -EOPNOTSUPP;
	}
out:
	if (r < 0)
		an = 0;
	al_sw_hdr(a, op, r);
	return AL_SW_HDR + an;
}

/* Bind and listen under a temporary name beside path, then rename it into
 * place (never over an existing file): a client that sees the path can
 * connect at once. */
static int listen_on(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, r = 0;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.%ld.tmp", path, (long)getpid()) >=
	    sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		goto out;
	}
	/* anyone may connect; SO_PEERCRED decides who is answered */
	if (chmod(sa.sun_path, 0666) < 0 || listen(fd, 64) < 0 ||
	    renameat2(AT_FDCWD, sa.sun_path, AT_FDCWD, path, RENAME_NOREPLACE) < 0) {
		r = -errno;
		unlink(sa.sun_path);
	}
out:
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"state", required_argument, NULL, 's'},
		{"signing-key", required_argument, NULL, 'k'},
		{"socket", required_argument, NULL, 'S'},
		{"allow-uid", required_argument, NULL, 'u'},
		{"allow-gid", required_argument, NULL, 'g'},
		{"registry", required_argument, NULL, 'R'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *state = NULL, *skey = NULL, *sock = NULL, *regdir = NULL;
	char *regdflt = NULL;
	struct registry *g = NULL;
	struct pollfd pfd[2 + MAX_CONN];
	struct conn conn[MAX_CONN];
	struct al_sealer *s = NULL;
	uint8_t *q = NULL, *a = NULL;
	unsigned nconn = 0;
	uint64_t v;
	sigset_t mask;
	int opt, r, lfd = -1, sfd = -1, rc = 1;
	bool stop = false;

	opterr = 0; /* a bad option gets one line: cli_bad_option */
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 's': state = optarg; break;
		case 'k': skey = optarg; break;
		case 'S': sock = optarg; break;
		case 'R': regdir = optarg; break;
		case 'u':
		case 'g':
			/* (uid_t)-1 is "no id" to the kernel */
			if (cli_parse_udec(optarg, strlen(optarg), UINT32_MAX - 1, &v) < 0)
				return cli_usage_error(PROG, "--allow-%s '%s' is not a number below 2^32-1",
						       opt == 'u' ? "uid" : "gid", optarg);
			if ((opt == 'u' ? n_uid : n_gid) >= MAX_ALLOW)
				return cli_usage_error(PROG, "more than %d --allow-%s", MAX_ALLOW,
						       opt == 'u' ? "uid" : "gid");
			if (opt == 'u')
				allow_uid[n_uid++] = (uid_t)v;
			else
				allow_gid[n_gid++] = (gid_t)v;
			break;
		case 'h': fputs(usage, stdout); return 0;
		case 'V': return cli_version(PROG);
		default: return cli_bad_option(PROG, "h", opts, argv);
		}
	}
	if (optind != argc)
		return cli_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
	if (!state || !skey || !sock)
		return cli_usage_error(PROG, "give --state FILE, --signing-key FILE and --socket PATH");
	if (n_uid == 0 && n_gid == 0)
		allow_uid[n_uid++] = getuid();
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no core, no ptrace by the same uid */

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	q = malloc(AL_SW_MAX + 1);
	a = malloc(AL_SW_MAX);
	if (sfd < 0 || !q || !a) {
		fprintf(stderr, PROG ": %s\n", strerror(errno));
		goto out;
	}
	if (getenv(TEST_CLOCK_ENV) && getenv(TEST_CLOCK_ENV)[0]) {
		test_clock = (struct al_clock_hooks){.ctx = getenv(TEST_CLOCK_ENV),
						     .realtime = test_clock_real, .boottime = test_clock_boot};
		fprintf(stderr, PROG ": " TEST_CLOCK_ENV ": the clocks run %" PRIu64
			" s ahead as %s says (a test hook, never in production)\n",
			test_clock_offset(test_clock.ctx) / 1000000000u, (char *)test_clock.ctx);
	}
	r = al_sealer_inproc_open(state, skey, test_clock.ctx ? &test_clock : NULL, &s);
	if (r < 0) {
		fprintf(stderr, PROG ": loading %s and %s: %s\n", state, skey, strerror(-r));
		goto out;
	}
	lfd = listen_on(sock);
	if (lfd < 0) {
		fprintf(stderr, PROG ": %s: %s\n", sock, strerror(-lfd));
		goto out;
	}
	/* after the socket: a second sealer on it is refused by "File exists" first */
	if (!regdir) { /* default: "registry" beside the state file */
		char *dup = strdup(state);
		if (!dup || asprintf(&regdflt, "%s/registry", dirname(dup)) < 0)
			regdflt = NULL;
		free(dup);
		if (!regdflt) {
			fprintf(stderr, PROG ": %s\n", strerror(ENOMEM));
			goto out_unlink;
		}
		regdir = regdflt;
	}
	r = registry_open(regdir, state, skey, test_clock.ctx ? &test_clock : NULL, &g);
	if (r < 0) {
		fprintf(stderr, PROG ": opening the registry in %s: %s\n", regdir, strerror(-r));
		goto out_unlink;
	}
	fprintf(stderr, PROG ": listening on %s\n", sock);

	while (!stop) {
		struct al_sealer_now nw;
		uint64_t wait_ns;
		int timeout;

		/* the timer: the state follows the schedule, writers or not */
		r = s->ops->now(s, &nw);
		if (r == 0)
			r = al_sealer_inproc_advance(s, nw.epoch);
		if (r < 0) {
			fprintf(stderr, PROG ": advancing the sealing state: %s\n", strerror(-r));
			goto out_unlink;
		}
		wait_ns = nw.boot_end > nw.boot_now ? nw.boot_end - nw.boot_now : 0;
		timeout = (int)(wait_ns / 1000000u + 1);
		if (test_clock.ctx && timeout > 10)
			timeout = 10; /* a moved test clock is seen within 10 ms */

		pfd[0] = (struct pollfd){.fd = sfd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = lfd, .events = POLLIN};
		r = poll(pfd, 2 + nconn, timeout);
		if (r < 0 && errno != EINTR) {
			fprintf(stderr, PROG ": poll: %s\n", strerror(errno));
			goto out_unlink;
		}
		if (r <= 0)
			continue;
		if (pfd[0].revents)
			stop = true;
		for (unsigned i = 0; i < nconn; i++) {
			ssize_t k;
			size_t an;
			bool drop = false;

			if (!pfd[2 + i].revents)
				continue;
			if (pfd[2 + i].revents & POLLIN) {
				k = recv(pfd[2 + i].fd, q, AL_SW_MAX + 1, MSG_DONTWAIT);
				if (k < 0 && (errno == EAGAIN || errno == EINTR))
					continue;
				if (k <= 0) {
					drop = true;
				} else {
					an = answer(s, g, &conn[i], q, k > AL_SW_MAX ? 0 : (size_t)k, a);
					if (send(pfd[2 + i].fd, a, an, MSG_NOSIGNAL | MSG_DONTWAIT) !=
					    (ssize_t)an)
						drop = true;
					OPENSSL_cleanse(q, AL_SW_MAX + 1);
					OPENSSL_cleanse(a, AL_SW_MAX);
					if (!conn[i].allowed)
						drop = true; /* told -EACCES once */
				}
			} else {
				drop = true;
			}
			if (drop) {
				registry_end(g, &conn[i]);
				close(pfd[2 + i].fd);
				nconn--;
				pfd[2 + i] = pfd[2 + nconn];
				conn[i] = conn[nconn];
				i--;
			}
		}
		if (pfd[1].revents & POLLIN) {
			for (;;) {
				int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
				socklen_t cl = sizeof(struct ucred);

				if (c < 0)
					break;
				if (nconn == MAX_CONN) {
					close(c);
					continue;
				}
				conn[nconn] = (struct conn){0};
				if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &conn[nconn].peer, &cl) < 0) {
					close(c);
					continue;
				}
				conn[nconn].allowed = peer_allowed(&conn[nconn].peer);
				if (!conn[nconn].allowed)
					fprintf(stderr, PROG ": refused pid %ld uid %lu gid %lu\n",
						(long)conn[nconn].peer.pid,
						(unsigned long)conn[nconn].peer.uid,
						(unsigned long)conn[nconn].peer.gid);
				pfd[2 + nconn] = (struct pollfd){.fd = c, .events = POLLIN};
				nconn++;
			}
		}
	}
	rc = 0;
out_unlink:
	unlink(sock);
out:
	for (unsigned i = 0; i < nconn; i++) {
		registry_end(g, &conn[i]); /* the sealer stops: those writers are lost */
		close(pfd[2 + i].fd);
	}
	r = registry_close(g);
	if (r < 0) {
		fprintf(stderr, PROG ": closing the registry: %s\n", strerror(-r));
		rc = 1;
	}
	free(regdflt);
	if (lfd >= 0)
		close(lfd);
	if (sfd >= 0)
		close(sfd);
	al_sealer_free(s);
	if (q)
		OPENSSL_cleanse(q, AL_SW_MAX + 1);
	if (a)
		OPENSSL_cleanse(a, AL_SW_MAX);
	free(q);
	free(a);
	return rc;
}
