/* SPDX-License-Identifier: MIT */
/*
 * Many processes, one token (docs/token.md "Many processes, one token"):
 * real processes (tests/token_mp_helper, fork + exec, each dlopening the
 * module) driven command by command against one store, in the orders that
 * used to lose state: a PIN lockout bypassed by an older process, a PIN
 * change undone, a one-way attribute reverted, a destroyed key written back,
 * another process's objects unseen; guessers running at once; a guesser
 * killed during PBKDF2; PIN lengths out of range; the lockout on every PIN
 * path.
 *
 * argv[1] is the module, argv[2] the helper.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <p11-kit/pkcs11.h>

#include "tu.h"

static const char *module_path, *helper_path;
static char *dir, *conf, *token_dir;

#define SO_PIN "so-secret-1234"
#define USER_PIN "user-secret-5678"

struct proc {
	pid_t pid;
	FILE *in, *out;
};

static void write_conf(unsigned long iterations)
{
	FILE *fp = fopen(conf, "w");

	assert_non_null(fp);
	fprintf(fp, "token_dir = %s\npbkdf2_iterations = %lu\nslots = 1\nmax_pin_failures = 3\n",
		token_dir, iterations);
	fclose(fp);
}

static int setup(void **state)
{
	dir = tu_mkdtemp();
	conf = tu_path(dir, "softtoken.conf");
	token_dir = tu_path(dir, "tokens");
	write_conf(1000);
	setenv("SOFTTOKEN_CONF", conf, 1);
	return 0;
}

static int teardown(void **state)
{
	tu_rmtree(dir);
	free(dir);
	free(conf);
	free(token_dir);
	return 0;
}

static void spawn(struct proc *p)
{
	int in[2], out[2];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl(helper_path, helper_path, module_path, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	p->in = fdopen(in[1], "w");
	p->out = fdopen(out[0], "r");
	assert_non_null(p->in);
	assert_non_null(p->out);
}

static void send_cmd(struct proc *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(p->in, fmt, ap);
	va_end(ap);
	fputc('\n', p->in);
	fflush(p->in);
}

/* The answer to the oldest command not yet answered: its rv; the values
 * after it (when v is not NULL). */
static CK_RV reply(struct proc *p, unsigned long *v, int nv)
{
	char line[256], *end;
	unsigned long rv;

	assert_non_null(fgets(line, sizeof(line), p->out));
	rv = strtoul(line, &end, 10);
	for (int i = 0; i < nv; i++)
		v[i] = strtoul(end, &end, 0);
	return (CK_RV)rv;
}

#define CMD(p, v, nv, ...) (send_cmd((p), __VA_ARGS__), reply((p), (v), (nv)))

static void finish(struct proc *p)
{
	int st;

	send_cmd(p, "quit");
	assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	fclose(p->in);
	fclose(p->out);
}

static void start(struct proc *p)
{
	spawn(p);
	assert_int_equal(CMD(p, NULL, 0, "init"), CKR_OK);
	assert_int_equal(CMD(p, NULL, 0, "open"), CKR_OK);
}

/* A token with the SO and user PINs, made by a process that then exits. */
static void make_token(void)
{
	struct proc p;

	spawn(&p);
	assert_int_equal(CMD(&p, NULL, 0, "init"), CKR_OK);
	assert_int_equal(CMD(&p, NULL, 0, "inittoken %s mp", SO_PIN), CKR_OK);
	assert_int_equal(CMD(&p, NULL, 0, "open"), CKR_OK);
	assert_int_equal(CMD(&p, NULL, 0, "login so %s", SO_PIN), CKR_OK);
	assert_int_equal(CMD(&p, NULL, 0, "initpin %s", USER_PIN), CKR_OK);
	assert_int_equal(CMD(&p, NULL, 0, "fini"), CKR_OK);
	finish(&p);
}

static unsigned long flags_of(struct proc *p)
{
	unsigned long fl = 0;

	assert_int_equal(CMD(p, &fl, 1, "flags"), CKR_OK);
	return fl;
}

/* Issue 11, reproduction 1: A locks the PIN; B, started before, guesses
 * once more; a new process must find the PIN locked. */
static void test_lockout_across_processes(void **state)
{
	struct proc a, b, c;

	make_token();
	start(&b); /* the older process */
	start(&a);
	assert_int_equal(CMD(&a, NULL, 0, "login u wrong-pin-1"), CKR_PIN_INCORRECT);
	assert_int_equal(CMD(&a, NULL, 0, "login u wrong-pin-2"), CKR_PIN_INCORRECT);
	assert_int_equal(CMD(&a, NULL, 0, "login u wrong-pin-3"), CKR_PIN_LOCKED);
	assert_true(flags_of(&b) & CKF_USER_PIN_LOCKED); /* B sees A's count */
	assert_int_equal(CMD(&b, NULL, 0, "login u wrong-pin-4"), CKR_PIN_LOCKED);
	assert_int_equal(CMD(&b, NULL, 0, "login u %s", USER_PIN), CKR_PIN_LOCKED);
	start(&c);
	assert_true(flags_of(&c) & CKF_USER_PIN_LOCKED);
	assert_int_equal(CMD(&c, NULL, 0, "login u %s", USER_PIN), CKR_PIN_LOCKED);
	finish(&a);
	finish(&b);
	finish(&c);
}

/* Four processes guess at once: together they get max_pin_failures - 1
 * "incorrect" answers, every other guess finds the PIN locked. */
static void test_concurrent_guessers(void **state)
{
	enum { N = 4, GUESSES = 3 };
	struct proc p[N];
	int incorrect = 0, locked = 0;

	make_token();
	for (int i = 0; i < N; i++)
		start(&p[i]);
	for (int g = 0; g < GUESSES; g++)
		for (int i = 0; i < N; i++)
			send_cmd(&p[i], "login u wrong-%d-%d", i, g);
	for (int g = 0; g < GUESSES; g++) {
		for (int i = 0; i < N; i++) {
			CK_RV rv = reply(&p[i], NULL, 0);
			if (rv == CKR_PIN_INCORRECT)
				incorrect++;
			else if (rv == CKR_PIN_LOCKED)
				locked++;
			else
				fail_msg("login answered 0x%lx", (unsigned long)rv);
		}
	}
	assert_int_equal(incorrect, 2);
	assert_int_equal(locked, N * GUESSES - 2);
	assert_int_equal(CMD(&p[0], NULL, 0, "login u %s", USER_PIN), CKR_PIN_LOCKED);
	for (int i = 0; i < N; i++)
		finish(&p[i]);
}

/* A token initialised by another process after our C_Initialize: usable
 * here without a restart; re-initialised there, our login ends. */
static void test_init_seen(void **state)
{
	struct proc a, b;
	unsigned long v[2];

	spawn(&a);
	assert_int_equal(CMD(&a, NULL, 0, "init"), CKR_OK);
	make_token();
	assert_int_equal(CMD(&a, NULL, 0, "open"), CKR_OK);
	assert_int_equal(CMD(&a, NULL, 0, "login u %s", USER_PIN), CKR_OK);
	assert_int_equal(CMD(&a, v, 1, "gen k-before"), CKR_OK);
	start(&b);
	assert_int_equal(CMD(&b, NULL, 0, "fini"), CKR_OK);
	assert_int_equal(CMD(&b, NULL, 0, "init"), CKR_OK);
	assert_int_equal(CMD(&b, NULL, 0, "inittoken %s fresh", SO_PIN), CKR_OK);
	/* A's key is gone and A is logged out (its master key is not the
	 * new token's). */
	assert_int_equal(CMD(&a, NULL, 0, "getbool %lu extractable", v[0]), CKR_OBJECT_HANDLE_INVALID);
	assert_int_equal(CMD(&a, NULL, 0, "logout"), CKR_USER_NOT_LOGGED_IN);
	assert_int_equal(CMD(&a, v, 2, "find k-before"), CKR_OK);
	assert_int_equal(v[0], 0);
	finish(&a);
	finish(&b);
}

/* Reproduction 2: A changes the user PIN; B, started before, sees one wrong
 * PIN; the old PIN must not work again. */
static void test_pin_change_survives(void **state)
{
	struct proc a, b, c;

	make_token();
	start(&b);
	start(&a);
	assert_int_equal(CMD(&a, NULL, 0, "login u %s", USER_PIN), CKR_OK);
	assert_int_equal(CMD(&a, NULL, 0, "setpin %s new-user-pin-99", USER_PIN), CKR_OK);
	assert_int_equal(CMD(&a, NULL, 0, "logout"), CKR_OK);
	assert_int_equal(CMD(&b, NULL, 0, "login u wrong-pin"), CKR_PIN_INCORRECT);
	start(&c); /* the second failure of max_pin_failures = 3 */
	assert_int_equal(CMD(&c, NULL, 0, "login u %s", USER_PIN), CKR_PIN_INCORRECT);
	assert_int_equal(CMD(&c, NULL, 0, "login u new-user-pin-99"), CKR_OK);
	assert_int_equal(CMD(&b, NULL, 0, "login u new-user-pin-99"), CKR_OK);
	finish(&a);
	finish(&b);
	finish(&c);
}

/* Reproduction 3: one-way attributes, destroyed keys, new keys. */
static void test_objects_across_processes(void **state)
{
	struct proc a, b, c;
	unsigned long ka, v[2], hb;

	make_token();
	start(&a);
	start(&b);
	assert_int_equal(CMD(&a, NULL, 0, "login u %s", USER_PIN), CKR_OK);
	assert_int_equal(CMD(&b, NULL, 0, "login u %s", USER_PIN), CKR_OK);

	/* B sees a key A made after B's login. */
	assert_int_equal(CMD(&a, &ka, 1, "gen k1"), CKR_OK);
	assert_int_equal(CMD(&b, v, 2, "find k1"), CKR_OK);
	assert_int_equal(v[0], 1);
	hb = v[1];

	/* A makes it non-extractable; B's label change must not revert that. */
	assert_int_equal(CMD(&a, NULL, 0, "setbool %lu extractable 0", ka), CKR_OK);
	assert_int_equal(CMD(&b, NULL, 0, "setlabel %lu k1-renamed", hb), CKR_OK);
	assert_int_equal(CMD(&b, v, 1, "getbool %lu extractable", hb), CKR_OK);
	assert_int_equal(v[0], 0);
	assert_int_equal(CMD(&b, NULL, 0, "setbool %lu extractable 1", hb), CKR_ATTRIBUTE_READ_ONLY);
	start(&c);
	assert_int_equal(CMD(&c, NULL, 0, "login u %s", USER_PIN), CKR_OK);
	assert_int_equal(CMD(&c, v, 2, "find k1-renamed"), CKR_OK);
	assert_int_equal(v[0], 1);
	assert_int_equal(CMD(&c, v, 1, "getbool %lu extractable", v[1]), CKR_OK);
	assert_int_equal(v[0], 0);
	/* A sees B's label (its handle stays). */
	assert_int_equal(CMD(&a, v, 2, "find k1-renamed"), CKR_OK);
	assert_int_equal(v[0], 1);
	assert_int_equal(v[1], ka);

	/* A destroys a key B holds a handle to: B cannot write it back. */
	assert_int_equal(CMD(&a, &ka, 1, "gen k2"), CKR_OK);
	assert_int_equal(CMD(&b, v, 2, "find k2"), CKR_OK);
	assert_int_equal(v[0], 1);
	hb = v[1];
	assert_int_equal(CMD(&a, NULL, 0, "destroy %lu", ka), CKR_OK);
	assert_int_equal(CMD(&b, NULL, 0, "setlabel %lu back-again", hb), CKR_OBJECT_HANDLE_INVALID);
	assert_int_equal(CMD(&b, v, 1, "getbool %lu extractable", hb), CKR_OBJECT_HANDLE_INVALID);
	assert_int_equal(CMD(&b, NULL, 0, "destroy %lu", hb), CKR_OBJECT_HANDLE_INVALID);
	assert_int_equal(CMD(&c, v, 2, "find back-again"), CKR_OK);
	assert_int_equal(v[0], 0);
	assert_int_equal(CMD(&c, v, 2, "find k2"), CKR_OK);
	assert_int_equal(v[0], 0);
	finish(&a);
	finish(&b);
	finish(&c);
}

/* The user PIN's failure count, read from token.json as it is on disk. */
static long disk_failures(void)
{
	char *path = tu_path(token_dir, "slot0/token.json");
	json_t *j = json_load_file(path, 0, NULL);
	long n = -1;

	free(path);
	if (!j)
		return -1;
	if (json_is_integer(json_object_get(json_object_get(j, "user"), "failures")))
		n = (long)json_integer_value(json_object_get(json_object_get(j, "user"), "failures"));
	json_decref(j);
	return n;
}

/* A guesser killed during PBKDF2 has paid: the failure is on disk before
 * the check runs (a PIN record of 4,000,000 iterations: about a second). */
static void test_guesser_killed_during_pbkdf2(void **state)
{
	struct proc p, q;
	struct pollfd pf;
	struct timespec t0, now;
	int st;

	make_token();
	write_conf(4000000);
	start(&p);
	assert_int_equal(CMD(&p, NULL, 0, "login so %s", SO_PIN), CKR_OK);
	assert_int_equal(CMD(&p, NULL, 0, "initpin %s", USER_PIN), CKR_OK); /* the slow record */
	assert_int_equal(CMD(&p, NULL, 0, "logout"), CKR_OK);
	assert_int_equal(disk_failures(), 0);
	send_cmd(&p, "login u wrong-pin");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (disk_failures() == 1)
			break;
		pf = (struct pollfd){ .fd = fileno(p.out), .events = POLLIN };
		if (poll(&pf, 1, 1) == 1)
			fail_msg("the login answered before its failure was on disk");
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > 30)
			fail_msg("no failure on disk after 30 s");
	}
	/* Still in PBKDF2 (about a second of it): no answer for a while yet.
	 * Killed now, it has paid. */
	pf = (struct pollfd){ .fd = fileno(p.out), .events = POLLIN };
	assert_int_equal(poll(&pf, 1, 200), 0);
	kill(p.pid, SIGKILL);
	assert_int_equal(waitpid(p.pid, &st, 0), p.pid);
	fclose(p.in);
	fclose(p.out);
	start(&q);
	assert_true(flags_of(&q) & CKF_USER_PIN_COUNT_LOW);
	finish(&q);
	assert_int_equal(disk_failures(), 1);
}

/* ulPinLen out of ulMinPinLen..ulMaxPinLen: refused first, not counted, and
 * never read as strlen (0xFFFFFFFF) or truncated (2^32 + 13 -> 13). */
static void test_pin_length_bounds(void **state)
{
	struct proc p;
	unsigned long long wrap = (1ull << 32) + strlen(USER_PIN);

	make_token();
	start(&p);
	assert_int_equal(CMD(&p, NULL, 0, "login u %s 0xFFFFFFFF", USER_PIN), CKR_PIN_LEN_RANGE);
	if (sizeof(CK_ULONG) > 4)
		assert_int_equal(CMD(&p, NULL, 0, "login u %s %llu", USER_PIN, wrap), CKR_PIN_LEN_RANGE);
	assert_int_equal(CMD(&p, NULL, 0, "login u %s 3", USER_PIN), CKR_PIN_LEN_RANGE);
	assert_int_equal(CMD(&p, NULL, 0, "login u %s 256", USER_PIN), CKR_PIN_LEN_RANGE);
	assert_int_equal(CMD(&p, NULL, 0, "login so %s 0xFFFFFFFF", SO_PIN), CKR_PIN_LEN_RANGE);
	assert_false(flags_of(&p) & (CKF_USER_PIN_COUNT_LOW | CKF_SO_PIN_COUNT_LOW));
	assert_int_equal(disk_failures(), 0);
	assert_int_equal(CMD(&p, NULL, 0, "login u %s", USER_PIN), CKR_OK);
	assert_int_equal(CMD(&p, NULL, 0, "setpin %s other-pin-1 0xFFFFFFFF", USER_PIN), CKR_PIN_LEN_RANGE);
	if (sizeof(CK_ULONG) > 4)
		assert_int_equal(CMD(&p, NULL, 0, "setpin %s other-pin-1 %llu", USER_PIN, wrap),
				 CKR_PIN_LEN_RANGE);
	assert_int_equal(disk_failures(), 0);
	assert_int_equal(CMD(&p, NULL, 0, "logout"), CKR_OK);
	assert_int_equal(CMD(&p, NULL, 0, "login u %s", USER_PIN), CKR_OK); /* unchanged */
	finish(&p);
}

/* The lockout holds on every PIN path: the SO login, C_InitToken's SO PIN,
 * and C_SetPIN's old PIN, each with the right PIN once locked. */
static void test_lockout_every_path(void **state)
{
	struct proc p;

	make_token();
	start(&p);
	for (int i = 0; i < 3; i++)
		(void)CMD(&p, NULL, 0, "login so wrong-so-%d", i);
	assert_true(flags_of(&p) & CKF_SO_PIN_LOCKED);
	assert_int_equal(CMD(&p, NULL, 0, "login so %s", SO_PIN), CKR_PIN_LOCKED);
	assert_int_equal(CMD(&p, NULL, 0, "fini"), CKR_OK);
	assert_int_equal(CMD(&p, NULL, 0, "init"), CKR_OK);
	assert_int_equal(CMD(&p, NULL, 0, "inittoken %s again", SO_PIN), CKR_PIN_LOCKED);
	assert_int_equal(CMD(&p, NULL, 0, "open"), CKR_OK);
	/* The user: logged in, then locked by another process's guesses. */
	assert_int_equal(CMD(&p, NULL, 0, "login u %s", USER_PIN), CKR_OK);
	{
		struct proc g;
		start(&g);
		for (int i = 0; i < 3; i++)
			(void)CMD(&g, NULL, 0, "login u wrong-u-%d", i);
		finish(&g);
	}
	assert_int_equal(CMD(&p, NULL, 0, "setpin %s other-pin-2", USER_PIN), CKR_PIN_LOCKED);
	finish(&p);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lockout_across_processes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_guessers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_init_seen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_change_survives, setup, teardown),
		cmocka_unit_test_setup_teardown(test_objects_across_processes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guesser_killed_during_pbkdf2, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pin_length_bounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lockout_every_path, setup, teardown),
	};

	if (argc != 3) {
		fprintf(stderr, "usage: test_token_mp MODULE HELPER\n");
		return 2;
	}
	module_path = argv[1];
	helper_path = argv[2];
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
