/* SPDX-License-Identifier: MIT */
/*
 * The holder's side of auditlog-keygen's files: the library's own readers
 * (al_sstate_parse, al_vkey_parse, al_ckey_parse: what the writer, the
 * sealer and the verifier load) accept the four files under DIR, and the
 * state's epoch schedule (al_seal_schedule, docs/format.md 17.2) puts it, in
 * this boot (rule 1: its boot id), at the epoch the wall clock gives, with
 * no clock record.
 * Usage: keygen_load DIR. Exit 0, or 1 saying what does not hold.
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "keyfile.h"
#include "note.h"
#include "sealkey.h"
#include "tu.h"

static int fails;

static void bad(const char *what)
{
	fprintf(stderr, "keygen_load: %s\n", what);
	fails++;
}

static uint8_t *load(const char *dir, const char *name, size_t *n)
{
	char *p = tu_path(dir, name);
	uint8_t *b = tu_read_file(p, n);

	if (!b)
		fprintf(stderr, "keygen_load: cannot read %s\n", p);
	free(p);
	return b;
}

static uint64_t now_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	struct al_vkey vk;
	struct al_sstate ss;
	struct al_seal_state c0;
	struct al_ckey pk, sk;
	uint8_t *b[4] = {0}, pub[AL_ED25519_PUB_LEN], boot_id[16];
	size_t n[4];
	const char *names[4] = {"verify-key", "sealing-state", "pubkey", "signing-key"};

	if (argc != 2) {
		fprintf(stderr, "usage: keygen_load DIR\n");
		return 2;
	}
	for (int i = 0; i < 4; i++)
		if (!(b[i] = load(argv[1], names[i], &n[i])))
			return 1;
	if (al_vkey_parse(b[0], n[0], &vk) < 0 || al_sstate_parse(b[1], n[1], &ss) < 0 ||
	    al_ckey_parse(b[2], n[2], false, &pk) < 0 || al_ckey_parse(b[3], n[3], true, &sk) < 0) {
		bad("the library's readers refuse a file");
		return 1;
	}
	if (vk.p.host_len != ss.p.host_len || memcmp(vk.p.host, ss.p.host, vk.p.host_len) ||
	    memcmp(vk.p.key_id, ss.p.key_id, AL_SEAL_KID_LEN) || vk.p.t0 != ss.p.t0 ||
	    vk.p.delta != ss.p.delta)
		bad("the state's parameters are not the verification key's");
	bool same = al_seal_state_init(&c0, vk.seed, 0) == 0 && c0.n == ss.st.n && ss.st.epoch == 0;
	for (unsigned i = 0; same && i < c0.n; i++)
		same = c0.node[i].depth == ss.st.node[i].depth && c0.node[i].index == ss.st.node[i].index &&
		       CRYPTO_memcmp(c0.node[i].seed, ss.st.node[i].seed, AL_SEAL_SEED_LEN) == 0;
	if (!same)
		bad("the state is not C(0) of the verification key's seed");
	if (al_ed25519_public(sk.key, pub) < 0 || memcmp(pub, pk.key, sizeof(pub)))
		bad("the public key is not the signing key's");

	/* this boot, now: the epoch the wall clock says, and no clock record */
	char bid_text[64], hx[32];
	size_t k = 0;
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t bn = fd >= 0 ? read(fd, bid_text, sizeof(bid_text)) : -1;
	if (fd >= 0)
		close(fd);
	for (ssize_t i = 0; i < bn && k < 32; i++)
		if (bid_text[i] != '-' && bid_text[i] != '\n')
			hx[k++] = bid_text[i];
	if (k != 32 || al_unhex((const uint8_t *)hx, 32, boot_id) < 0) {
		bad("cannot read this boot's id");
		return 1;
	}
	if (memcmp(boot_id, ss.boot_id, 16) != 0)
		bad("the state's boot-id is not this boot's: its holder would start by rule 2 (a reboot)");
	struct al_seal_clock clk = {.t0 = ss.p.t0, .delta = ss.p.delta, .max_jump = ss.max_jump,
				    .epoch = ss.st.epoch, .boot_start = ss.boot_start};
	struct al_seal_sched s;
	memcpy(clk.boot_id, ss.boot_id, 16);
	uint64_t bt = now_ns(CLOCK_BOOTTIME), W = now_ns(CLOCK_REALTIME);
	int r = al_seal_schedule(&clk, boot_id, bt, W, &s);
	if (r < 0) {
		fprintf(stderr, "keygen_load: al_seal_schedule: %s\n", strerror(-r));
		fails++;
	} else {
		uint64_t w = (W - ss.p.t0) / ss.p.delta;
		if (s.clock)
			bad("the schedule would write a clock record at once");
		if (s.epoch + 1 < w || s.epoch > w + 1) {
			fprintf(stderr, "keygen_load: the schedule says epoch %" PRIu32 ", the wall clock %" PRIu64 "\n",
				s.epoch, w);
			fails++;
		}
	}
	al_seal_state_wipe(&ss.st);
	al_seal_state_wipe(&c0);
	OPENSSL_cleanse(&vk, sizeof(vk));
	OPENSSL_cleanse(&sk, sizeof(sk));
	for (int i = 0; i < 4; i++) {
		OPENSSL_cleanse(b[i], n[i]);
		free(b[i]);
	}
	return fails ? 1 : 0;
}
