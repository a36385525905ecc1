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
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <p11-kit/pkcs11.h>

#include "tu.h"

static const char *module_path, *helper_path, *verifier_path;
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

/* Become uid (with gid as the only group) in a child; 0 on success. */
static int become(uid_t uid, gid_t gid)
{
	return setgroups(1, &gid) == 0 && setgid(gid) == 0 && setuid(uid) == 0 ? 0 : -1;
}

/* The helpers run as another user, so that a failed test can end them
 * before their user is deleted (userdel refuses a user with processes). */
static pid_t as_user[64];
static unsigned nas_user;

/* A helper process, as uid/gid when uid is not 0. */
static void spawn_as(struct proc *p, uid_t uid, gid_t gid)
{
	int in[2], out[2];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		if (uid && become(uid, gid) < 0)
			_exit(126);
		execl(helper_path, helper_path, module_path, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	if (uid && nas_user < sizeof(as_user) / sizeof(as_user[0]))
		as_user[nas_user++] = p->pid;
	p->in = fdopen(in[1], "w");
	p->out = fdopen(out[0], "r");
	assert_non_null(p->in);
	assert_non_null(p->out);
}

static void spawn(struct proc *p)
{
	spawn_as(p, 0, 0);
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

/* ---- a token shared by a group (docs/token.md "A token shared by a group") --
 * Run as root (test_token_group): two users made for the test in a group of
 * their own, each running helper processes (fork + setuid) against one token
 * whose token_dir is root:<group> 2770, with the umask 077 that would make
 * every file private if the token left modes to it. */
static char grp_name[32], user_a[32], user_b[32];
static uid_t uid_a, uid_b;
static gid_t gid_s;
static char *gdir, *saved_module, *saved_helper, *saved_verifier;

static int run_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_cmd(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Can uid reach (search) dir? */
static bool reachable(const char *d, uid_t uid, gid_t gid)
{
	int st;
	pid_t pid = fork();

	if (pid == 0)
		_exit(become(uid, gid) == 0 && access(d, X_OK) == 0 ? 0 : 1);
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static char *copy_exe(const char *src, const char *d)
{
	const char *base = strrchr(src, '/');
	char *dst = tu_path(d, base ? base + 1 : src);
	size_t n = 0;
	uint8_t *b = tu_read_file(src, &n);
	int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);

	assert_non_null(b);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, n), (ssize_t)n);
	assert_int_equal(fchmod(fd, 0755), 0);
	close(fd);
	free(b);
	return dst;
}

static int setup_group(void **state)
{
	struct passwd *pw;
	struct group *gr;
	char *lib, *tdir;
	unsigned id = (unsigned)getpid() % 100000;

	(void)state;
	snprintf(grp_name, sizeof(grp_name), "sttg%u", id);
	snprintf(user_a, sizeof(user_a), "sttua%u", id);
	snprintf(user_b, sizeof(user_b), "sttub%u", id);
	if (run_cmd("groupadd %s", grp_name) != 0 ||
	    run_cmd("useradd -M -N -g %s -s /usr/sbin/nologin -d /nonexistent %s", grp_name, user_a) != 0 ||
	    run_cmd("useradd -M -N -g %s -s /usr/sbin/nologin -d /nonexistent %s", grp_name, user_b) != 0)
		return -1;
	gr = getgrnam(grp_name);
	if (!gr)
		return -1;
	gid_s = gr->gr_gid;
	pw = getpwnam(user_a);
	if (!pw)
		return -1;
	uid_a = pw->pw_uid;
	pw = getpwnam(user_b);
	if (!pw)
		return -1;
	uid_b = pw->pw_uid;
	/* A directory both users can reach: under TMPDIR when they can (a
	 * package build's TMPDIR may lie in a 0700 directory), else /var/tmp. */
	gdir = tu_mkdtemp();
	chmod(gdir, 0711);
	if (!reachable(gdir, uid_a, gid_s)) {
		tu_rmtree(gdir);
		free(gdir);
		gdir = strdup("/var/tmp/test_token_group.XXXXXX");
		if (!gdir || !mkdtemp(gdir))
			return -1;
		chmod(gdir, 0711);
	}
	/* Nor may the users be able to reach the build tree: copies. */
	lib = tu_path(gdir, "lib");
	if (mkdir(lib, 0755) < 0)
		return -1;
	saved_module = (char *)module_path;
	saved_helper = (char *)helper_path;
	saved_verifier = (char *)verifier_path;
	module_path = copy_exe(saved_module, lib);
	helper_path = copy_exe(saved_helper, lib);
	verifier_path = copy_exe(saved_verifier, lib); /* run as the users too */
	free(lib);
	conf = tu_path(gdir, "softtoken.conf");
	token_dir = tu_path(gdir, "tokens");
	write_conf(1000);
	chmod(conf, 0644);
	setenv("SOFTTOKEN_CONF", conf, 1);
	/* The deployment of docs/token.md: groupadd, then chgrp + chmod 2770. */
	tdir = token_dir;
	if (mkdir(tdir, 0700) < 0 || chown(tdir, 0, gid_s) < 0 || chmod(tdir, 02770) < 0)
		return -1;
	return 0;
}

static int teardown_group(void **state)
{
	(void)state;
	/* Helpers a failed assertion left running (finish() reaped the rest:
	 * waitpid then answers ECHILD). Only our own children. */
	for (unsigned i = 0; i < nas_user; i++)
		if (waitpid(as_user[i], NULL, WNOHANG) == 0) {
			kill(as_user[i], SIGKILL);
			(void)waitpid(as_user[i], NULL, 0);
		}
	nas_user = 0;
	if (gdir)
		tu_rmtree(gdir);
	free(gdir);
	gdir = NULL;
	free((char *)module_path);
	free((char *)helper_path);
	free((char *)verifier_path);
	module_path = saved_module;
	helper_path = saved_helper;
	verifier_path = saved_verifier;
	free(conf);
	free(token_dir);
	conf = token_dir = NULL;
	(void)run_cmd("userdel %s 2>/dev/null", user_a);
	(void)run_cmd("userdel %s 2>/dev/null", user_b);
	(void)run_cmd("groupdel %s 2>/dev/null", grp_name);
	return 0;
}

static void start_as(struct proc *p, uid_t uid)
{
	spawn_as(p, uid, gid_s);
	assert_int_equal(CMD(p, NULL, 0, "init"), CKR_OK);
	assert_int_equal(CMD(p, NULL, 0, "open"), CKR_OK);
}

static void assert_mode(const char *d, const char *name, unsigned mode, uid_t owner)
{
	char *path = tu_path(d, name);
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	if ((st.st_mode & 07777) != mode || st.st_gid != gid_s || (owner && st.st_uid != owner))
		fail_msg("%s: mode %04o uid %u gid %u, want %04o gid %u uid %u", path,
			 (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid, mode,
			 (unsigned)gid_s, (unsigned)owner);
	free(path);
}

struct actions {
	unsigned login, login_ok, gen_ok, inittoken, initpin, use_ok;
};

static void count_action(void *ctx, const struct al_parsed *p)
{
	struct actions *a = ctx;
	const struct al_val *v = &p->rec.f[AL_F_ACTION], *o = &p->rec.f[AL_F_OUTCOME];
	bool ok = o->n == 7 && !memcmp(o->p, "success", 7);

#define IS(s) (v->n == strlen(s) && !memcmp(v->p, s, v->n))
	if (IS("C_Login")) {
		a->login++;
		a->login_ok += ok;
	}
	a->gen_ok += IS("C_GenerateKey") && ok;
	a->inittoken += IS("C_InitToken");
	a->initpin += IS("C_InitPIN");
	a->use_ok += IS("C_Encrypt") && ok;
#undef IS
}

/* auditlog-verify, run as uid: its exit code. */
static int verify_as(uid_t uid, const char *d)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY);
		if (nul >= 0)
			dup2(nul, 1);
		if (become(uid, gid_s) < 0)
			_exit(126);
		execl(verifier_path, verifier_path, d, (char *)NULL);
		_exit(127);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_group_shared(void **state)
{
	struct proc a, b, c;
	unsigned long ha = 0, hb = 0, v[2] = { 0 };
	char *slot = tu_path(token_dir, "slot0"), *audit = tu_path(token_dir, "audit");
	char *objs = tu_path(slot, "objects");
	struct actions act = { 0 };
	mode_t old_umask = umask(077);
	DIR *d;
	struct dirent *de;
	unsigned nobj = 0, nchain = 0;

	(void)state;
	/* User A makes the token and a key; user B, running at the same
	 * time, logs in, finds A's key and uses it, and makes one of its own
	 * that A sees. */
	spawn_as(&a, uid_a, gid_s);
	assert_int_equal(CMD(&a, NULL, 0, "init"), CKR_OK);
	assert_int_equal(CMD(&a, NULL, 0, "inittoken %s shared", SO_PIN), CKR_OK);
	assert_int_equal(CMD(&a, NULL, 0, "open"), CKR_OK);
	assert_int_equal(CMD(&a, NULL, 0, "login so %s", SO_PIN), CKR_OK);
	assert_int_equal(CMD(&a, NULL, 0, "initpin %s", USER_PIN), CKR_OK);
	assert_int_equal(CMD(&a, NULL, 0, "logout"), CKR_OK);
	assert_int_equal(CMD(&a, NULL, 0, "login u %s", USER_PIN), CKR_OK);
	assert_int_equal(CMD(&a, &ha, 1, "gen from-a"), CKR_OK);
	start_as(&b, uid_b);
	assert_int_equal(CMD(&b, NULL, 0, "login u %s", USER_PIN), CKR_OK);
	assert_int_equal(CMD(&b, v, 2, "find from-a"), CKR_OK);
	assert_int_equal(v[0], 1);
	assert_int_equal(CMD(&b, NULL, 0, "use %lu", v[1]), CKR_OK);
	assert_int_equal(CMD(&b, &hb, 1, "gen from-b"), CKR_OK);
	assert_int_equal(CMD(&a, v, 2, "find from-b"), CKR_OK);
	assert_int_equal(v[0], 1);
	assert_int_equal(CMD(&a, NULL, 0, "use %lu", v[1]), CKR_OK);
	assert_int_equal(CMD(&a, NULL, 0, "use %lu", ha), CKR_OK);
	/* The PIN lockout (max_pin_failures = 3) counts the guesses of both. */
	assert_int_equal(CMD(&a, NULL, 0, "logout"), CKR_OK);
	assert_int_equal(CMD(&b, NULL, 0, "logout"), CKR_OK);
	assert_int_equal(CMD(&b, NULL, 0, "login u wrong-pin-1"), CKR_PIN_INCORRECT);
	assert_int_equal(CMD(&a, NULL, 0, "login u wrong-pin-2"), CKR_PIN_INCORRECT);
	assert_int_equal(CMD(&b, NULL, 0, "login u wrong-pin-3"), CKR_PIN_LOCKED); /* the third */
	assert_true(flags_of(&a) & CKF_USER_PIN_LOCKED);
	assert_int_equal(CMD(&a, NULL, 0, "login u %s", USER_PIN), CKR_PIN_LOCKED);
	assert_int_equal(CMD(&b, NULL, 0, "login u %s", USER_PIN), CKR_PIN_LOCKED);
	assert_int_equal(CMD(&a, NULL, 0, "fini"), CKR_OK);
	assert_int_equal(CMD(&b, NULL, 0, "fini"), CKR_OK);
	finish(&a);
	finish(&b);

	/* What they left: the group's, 2770 and 0660, whatever the umask. */
	assert_mode(token_dir, "slot0", 02770, uid_a);
	assert_mode(slot, "token.json", 0660, 0);
	assert_mode(slot, "store.lock", 0660, uid_a);
	assert_mode(slot, "objects", 02770, 0);
	assert_mode(token_dir, "audit", 02770, uid_a);
	d = opendir(objs);
	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			assert_mode(objs, de->d_name, 0660, 0);
			nobj++;
		}
	closedir(d);
	assert_int_equal(nobj, 2);
	/* One chain per process, each of its own user; every record of both
	 * there, and the verifier, run as a member of the group, reads all. */
	assert_mode(audit, "softtoken-0.log", 0660, uid_a);
	assert_mode(audit, "softtoken-1.log", 0660, uid_b);
	d = opendir(audit);
	assert_non_null(d);
	while ((de = readdir(d))) {
		struct tu_walk w;
		char *path;
		if (de->d_name[0] == '.')
			continue;
		path = tu_path(audit, de->d_name);
		if (tu_walk_file(path, &w, count_action, &act) != 0)
			fail_msg("%s: %s", path, w.error);
		free(path);
		nchain++;
	}
	closedir(d);
	assert_int_equal(nchain, 2);
	assert_int_equal(act.inittoken, 1);
	assert_int_equal(act.initpin, 1);
	assert_int_equal(act.gen_ok, 2);
	assert_int_equal(act.use_ok, 3);
	assert_int_equal(act.login, 8);
	assert_int_equal(act.login_ok, 3);
	assert_int_equal(verify_as(uid_b, audit), 0);
	assert_int_equal(verify_as(uid_a, audit), 0);

	/* A chain file another user left that we may not write (EACCES): the
	 * next name, as for one locked by a running process. */
	{
		char *c0 = tu_path(audit, "softtoken-0.log");
		uint64_t size0 = tu_file_size(c0);
		assert_int_equal(chmod(c0, 0600), 0);
		spawn_as(&c, uid_b, gid_s);
		assert_int_equal(CMD(&c, NULL, 0, "init"), CKR_OK);
		assert_int_equal(CMD(&c, NULL, 0, "fini"), CKR_OK);
		finish(&c);
		assert_int_equal(tu_file_size(c0), size0);
		assert_int_equal(chmod(c0, 0660), 0);
		free(c0);
	}

	/* Shared is not open: another user's file of another group, of
	 * another mode, or world-writable is refused (C_Initialize reads
	 * token.json). */
	{
		char *tj = tu_path(slot, "token.json");
		struct stat st;
		assert_int_equal(stat(tj, &st), 0);
		/* A foreign group; world-readable, so only the token's check
		 * stops B, not the kernel. */
		assert_int_equal(chown(tj, uid_a, 0), 0);
		assert_int_equal(chmod(tj, 0664), 0);
		spawn_as(&c, uid_b, gid_s);
		assert_int_equal(CMD(&c, NULL, 0, "init"), CKR_GENERAL_ERROR);
		finish(&c);
		assert_int_equal(chown(tj, uid_a, gid_s), 0);
		assert_int_equal(chmod(tj, 0640), 0); /* another user's, not 0660 */
		spawn_as(&c, uid_b, gid_s);
		assert_int_equal(CMD(&c, NULL, 0, "init"), CKR_GENERAL_ERROR);
		finish(&c);
		assert_int_equal(chmod(tj, 0666), 0); /* world-writable: for its owner too */
		spawn_as(&c, uid_a, gid_s);
		assert_int_equal(CMD(&c, NULL, 0, "init"), CKR_GENERAL_ERROR);
		finish(&c);
		assert_int_equal(chmod(tj, 0660), 0);
		/* A second link, and a symlink in its place: refused. */
		{
			char *ln = tu_path(slot, "token.json.link"), *real = tu_path(slot, "token.json.real");
			assert_int_equal(link(tj, ln), 0);
			spawn_as(&c, uid_b, gid_s);
			assert_int_equal(CMD(&c, NULL, 0, "init"), CKR_GENERAL_ERROR);
			finish(&c);
			assert_int_equal(unlink(ln), 0);
			assert_int_equal(rename(tj, real), 0);
			assert_int_equal(symlink("token.json.real", tj), 0);
			assert_int_equal(lchown(tj, uid_a, gid_s), 0);
			spawn_as(&c, uid_b, gid_s);
			assert_int_equal(CMD(&c, NULL, 0, "init"), CKR_GENERAL_ERROR);
			finish(&c);
			assert_int_equal(unlink(tj), 0);
			assert_int_equal(rename(real, tj), 0);
			free(ln);
			free(real);
		}
		spawn_as(&c, uid_b, gid_s);
		assert_int_equal(CMD(&c, NULL, 0, "init"), CKR_OK);
		assert_int_equal(CMD(&c, NULL, 0, "fini"), CKR_OK);
		finish(&c);
		free(tj);
	}
	/* A shared directory of another group inside the shared slot
	 * directory: refused. */
	assert_int_equal(chown(objs, uid_a, 0), 0);
	assert_int_equal(chmod(objs, 02770), 0);
	spawn_as(&c, uid_a, gid_s);
	assert_int_equal(CMD(&c, NULL, 0, "init"), CKR_GENERAL_ERROR);
	finish(&c);
	assert_int_equal(chown(objs, uid_a, gid_s), 0);
	assert_int_equal(chmod(objs, 02770), 0);
	/* A world-writable chain file: refused, not written. */
	{
		char *c1 = tu_path(audit, "softtoken-0.log"); /* the first name tried */
		uint64_t size1 = tu_file_size(c1);
		assert_int_equal(chmod(c1, 0666), 0);
		spawn_as(&c, uid_b, gid_s);
		assert_int_equal(CMD(&c, NULL, 0, "init"), CKR_GENERAL_ERROR);
		finish(&c);
		assert_int_equal(tu_file_size(c1), size1);
		assert_int_equal(chmod(c1, 0660), 0);
		free(c1);
	}
	/* Rotation: libauditlog makes the new active file 0600; the token
	 * makes it the group's (0660) at its next check of the trail. */
	{
		FILE *fp = fopen(conf, "a");
		unsigned n0 = 0, n = 0;
		assert_non_null(fp);
		fprintf(fp, "audit_rotate_bytes = 4096\n");
		fclose(fp);
		n0 = tu_count_files(audit);
		start_as(&c, uid_a);
		for (int i = 0; i < 20; i++) /* ~5 KiB of durable records */
			assert_int_equal(CMD(&c, NULL, 0, "login u %s", USER_PIN), CKR_PIN_LOCKED);
		/* ~25 KiB of queued records (C_OpenSession) at once: several
		 * rotations between two checks of the trail. */
		for (int i = 0; i < 100; i++)
			send_cmd(&c, "open");
		for (int i = 0; i < 100; i++)
			assert_int_equal(reply(&c, NULL, 0), CKR_OK);
		assert_int_equal(CMD(&c, NULL, 0, "fini"), CKR_OK);
		finish(&c);
		d = opendir(audit);
		assert_non_null(d);
		while ((de = readdir(d)))
			if (de->d_name[0] != '.') {
				assert_mode(audit, de->d_name, 0660, 0);
				n++;
			}
		closedir(d);
		assert_true(n > n0); /* it did rotate */
		assert_int_equal(verify_as(uid_b, audit), 0);
		write_conf(1000);
	}
	/* A slot directory not 2770 is held private: another user's is refused. */
	assert_int_equal(chmod(slot, 0770), 0);
	spawn_as(&c, uid_b, gid_s);
	assert_int_equal(CMD(&c, NULL, 0, "init"), CKR_GENERAL_ERROR);
	finish(&c);
	assert_int_equal(chmod(slot, 02770), 0);
	umask(old_umask);
	free(slot);
	free(audit);
	free(objs);
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

	const struct CMUnitTest group_tests[] = {
		cmocka_unit_test_setup_teardown(test_group_shared, setup_group, teardown_group),
	};

	if (argc != 3 && !(argc == 5 && !strcmp(argv[3], "--group"))) {
		fprintf(stderr, "usage: test_token_mp MODULE HELPER [--group VERIFIER]\n");
		return 2;
	}
	module_path = argv[1];
	helper_path = argv[2];
	signal(SIGPIPE, SIG_IGN);
	if (argc == 5) {
		/* Two users and a group are made for the test: root only. */
		if (geteuid() != 0) {
			fprintf(stderr, "test_token_group: needs root (it creates two users and a group "
					"with useradd/groupadd and runs processes as them): skipped\n");
			return 77;
		}
		verifier_path = argv[4];
		return cmocka_run_group_tests(group_tests, NULL, NULL);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
