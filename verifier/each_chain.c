/* SPDX-License-Identifier: MIT */
/* auditlog-verify --follow --each-chain (each_chain.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "each_chain.h"
#include "format.h"
#include "verify.h"

#define RESCAN_MS 1000
#define WRITE_MAX 4096 /* whole lines, at most this a write (docs/siem.md 9.3) */
#define HEAD_MAX 8192  /* a first line longer than any canonical one is no header */
#define KILL_AFTER_MS 10000 /* a tail not ended this long after SIGTERM is killed */

struct tail {
	char *name;
	pid_t pid;
	int fd; /* the read end of its standard output; -1 once at its end */
	char *buf;
	size_t len, cap;
	int status; /* its exit status, mapped to 0, 1 or 2 */
	bool state_left; /* it ended on its own with its state file there: removing
			  * that file is the operator's word to follow the name again */
	char chain[32];	  /* the chain_id of its active file's header when it started */
	bool has_chain;	  /* that header parsed */
};

struct run {
	const struct each_chain *ec;
	int dirfd;
	struct tail *t;
	size_t n, cap;
	char **skipped; /* names whose first line is not a header: said once */
	size_t nskipped;
	bool stopping, out_failed, killed;
	uint64_t stop_at;
	int worst;
};

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Why path is no directory to use (NULL: it is one; *st filled). */
static const char *not_dir(const char *path, struct stat *st)
{
	if (stat(path, st) < 0)
		return strerror(errno);
	return S_ISDIR(st->st_mode) ? NULL : "not a directory";
}

void pass_add(struct each_chain *ec, const char *opt, const char *arg)
{
	char **p = realloc(ec->pass, (ec->npass + 2) * sizeof(*p));

	if (!p) {
		ec->nomem = true;
		return;
	}
	ec->pass = p;
	ec->pass[ec->npass++] = (char *)opt;
	if (arg)
		ec->pass[ec->npass++] = (char *)arg;
}

int each_chain_check(struct each_chain *ec, bool given, const char *state_dir, bool follow, bool emit,
		     bool other, char *const *args, int nargs)
{
	struct stat ld, sd;
	const char *why = NULL;

	if (!given)
		why = "--state-dir goes with --each-chain (a tail of one chain: --state FILE)";
	else if (!follow)
		why = "--each-chain goes with --follow";
	else if (other)
		why = "--each-chain does not go with --state, --from, --expect-head, --registry, --json, "
		      "--one-chain, a proof option or --attest (each chain's tail is one --follow)";
	else if (state_dir && !emit)
		why = "--state-dir goes with --emit, as --state does";
	else if (nargs != 1 || strcmp(args[0], "-") == 0)
		why = "--each-chain wants one directory: the log directory whose chains to follow";
	else if (ec->nomem)
		why = "out of memory";
	if (why) {
		fprintf(stderr, "auditlog-verify: %s\n", why);
		return 2;
	}
	if ((why = not_dir(args[0], &ld))) {
		fprintf(stderr, "auditlog-verify: --each-chain ");
		ec->put(stderr, args[0]);
		fprintf(stderr, ": %s\n", why);
		return 2;
	}
	if (state_dir) {
		if ((why = not_dir(state_dir, &sd))) {
			fprintf(stderr, "auditlog-verify: --state-dir ");
			ec->put(stderr, state_dir);
			fprintf(stderr, ": %s\n", why);
			return 2;
		}
		if (sd.st_dev == ld.st_dev && sd.st_ino == ld.st_ino) {
			fprintf(stderr, "auditlog-verify: --state-dir must not be the log directory: a "
					"state file there would be listed as a log\n");
			return 2;
		}
	}
	ec->logdir = args[0];
	ec->state_dir = state_dir;
	return 0;
}

/* Under a writer's active name: not hidden, not of the rotated form
 * NAME.<time>-<seq>. */
static bool active_name(const char *name)
{
	uint64_t seq;

	return name[0] != '.' && al_rotated_name(name, &seq) == 0;
}

static bool known(const struct run *r, const char *name)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->t[i].name, name) == 0)
			return true;
	for (size_t i = 0; i < r->nskipped; i++)
		if (strcmp(r->skipped[i], name) == 0)
			return true;
	return false;
}

/* A regular file at name in the directory (never through a symbolic link,
 * never opening a FIFO): 1 when its first line is complete and a header, 0
 * when it is not complete yet (or the file is gone), -1 when it is complete
 * and not a header, or not a regular file, or cannot be opened (*err: the
 * errno; 0 otherwise). At 1, when that line is a canonical header, its
 * chain_id goes to chain (32 hex digits) and *has_chain is true. */
static int header_first(int dirfd, const char *name, int *err, char chain[32], bool *has_chain)
{
	static const char head[] = "{\"@timestamp\":\"", type[] = ",\"type\":\"";
	char buf[HEAD_MAX];
	struct stat st;
	ssize_t got = 0, k;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

	*err = 0;
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		*err = errno == ELOOP ? 0 : errno;
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	while ((size_t)got < sizeof(buf) && (k = read(fd, buf + got, sizeof(buf) - (size_t)got)) > 0)
		got += k;
	close(fd);
	char *nl = memchr(buf, '\n', (size_t)got);
	if (!nl)
		return (size_t)got < sizeof(buf) ? 0 : -1;
	size_t n = (size_t)(nl - buf);
	if (n < sizeof(head) - 1 || memcmp(buf, head, sizeof(head) - 1) != 0)
		return -1;
	/* the fixed members' order (docs/format.md 2.1): the type is the first
	 * "type" member, after @timestamp, seq and v */
	const char *ty = memmem(buf, n, type, sizeof(type) - 1);
	if (!ty || (size_t)(buf + n - ty) <= sizeof(type) - 1 + 7 ||
	    memcmp(ty + sizeof(type) - 1, "header\"", 7) != 0)
		return -1;
	struct al_parsed p;
	size_t err_off;
	uint8_t *dec = malloc(n ? n : 1);
	*has_chain = dec && al_parse((const uint8_t *)buf, n, dec, &p, &err_off) == AL_PERR_OK &&
		     p.rec.type == AL_T_HEADER && p.rec.f[AL_F_CHAIN_ID].n == 32;
	if (*has_chain)
		memcpy(chain, p.rec.f[AL_F_CHAIN_ID].p, 32);
	free(dec);
	return 1;
}

static char *join(const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
	char *p = malloc(la + lb + lc + 1);

	if (p) {
		memcpy(p, a, la);
		memcpy(p + la, b, lb);
		memcpy(p + la + lb, c, lc + 1);
	}
	return p;
}

/* STATE_DIR/NAME.state (malloc'd), or NULL: out of memory. */
static char *state_path(const struct each_chain *ec, const char *name)
{
	const char *ss = ec->state_dir[strlen(ec->state_dir) - 1] == '/' ? "" : "/";
	char *p;

	return asprintf(&p, "%s%s%s.state", ec->state_dir, ss, name) < 0 ? NULL : p;
}

/* Start a tail for the chain under the active name: the file and its rotated
 * ones, named one by one (the tail finds the files of later rotations in
 * their directory itself). chain: the chain_id of the active file's header
 * (when has_chain), kept with the tail. */
static int spawn(struct run *r, const char *name, const char chain[32], bool has_chain)
{
	const struct each_chain *ec = r->ec;
	size_t nlen = strlen(name), nfiles = 0, capf = 8;
	char **files = malloc(capf * sizeof(*files)), **argv = NULL, *state = NULL;
	const char *sep = ec->logdir[0] && ec->logdir[strlen(ec->logdir) - 1] == '/' ? "" : "/";
	int pfd[2] = {-1, -1}, ret = -ENOMEM;
	DIR *d = NULL;

	if (!files || !(files[nfiles++] = join(ec->logdir, sep, name)))
		goto out;
	int dfd = dup(r->dirfd);
	if (dfd < 0 || !(d = fdopendir(dfd))) {
		if (dfd >= 0)
			close(dfd);
		ret = -errno;
		goto out;
	}
	rewinddir(d);
	for (struct dirent *e; (e = readdir(d));) {
		uint64_t seq;
		struct stat st;
		if (al_rotated_name(e->d_name, &seq) != nlen || strncmp(e->d_name, name, nlen) != 0 ||
		    fstatat(r->dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (nfiles == capf) {
			char **f = realloc(files, 2 * capf * sizeof(*files));
			if (!f)
				goto out;
			files = f;
			capf *= 2;
		}
		if (!(files[nfiles++] = join(ec->logdir, sep, e->d_name)))
			goto out;
	}
	if (ec->state_dir && !(state = state_path(ec, name)))
		goto out;
	/* self, --follow, the options, --state FILE, --, the files, NULL */
	argv = calloc(2 + ec->npass + 2 + 1 + nfiles + 1, sizeof(*argv));
	if (!argv)
		goto out;
	size_t a = 0;
	argv[a++] = (char *)ec->self;
	argv[a++] = (char *)"--follow";
	for (size_t i = 0; i < ec->npass; i++)
		argv[a++] = ec->pass[i];
	if (state) {
		argv[a++] = (char *)"--state";
		argv[a++] = state;
	}
	argv[a++] = (char *)"--";
	for (size_t i = 0; i < nfiles; i++)
		argv[a++] = files[i];
	if (r->n == r->cap) {
		size_t nc = r->cap ? 2 * r->cap : 8;
		struct tail *t = realloc(r->t, nc * sizeof(*t));
		if (!t)
			goto out;
		r->t = t;
		r->cap = nc;
	}
	char *tname = strdup(name);
	if (!tname)
		goto out;
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		ret = -errno;
		free(tname);
		goto out;
	}
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		ret = -errno;
		free(tname);
		goto out;
	}
	if (pid == 0) {
		/* the tail is the one-chain tail as if run by hand: signals as
		 * they were before this process changed them */
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		sigemptyset(&dfl.sa_mask);
		sigaction(SIGINT, &dfl, NULL);
		sigaction(SIGTERM, &dfl, NULL);
		sigaction(SIGPIPE, &dfl, NULL);
		if (dup2(pfd[1], STDOUT_FILENO) < 0)
			_exit(2);
		execv("/proc/self/exe", argv);
		execvp(ec->self, argv);
		fprintf(stderr, "auditlog-verify: --each-chain: cannot run the tail: %s\n", strerror(errno));
		_exit(2);
	}
	close(pfd[1]);
	pfd[1] = -1;
	(void)fcntl(pfd[0], F_SETFL, fcntl(pfd[0], F_GETFL) | O_NONBLOCK);
	r->t[r->n] = (struct tail){.name = tname, .pid = pid, .fd = pfd[0], .has_chain = has_chain};
	memcpy(r->t[r->n++].chain, chain, sizeof(r->t->chain));
	pfd[0] = -1;
	ret = 0;
out:
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	if (d)
		closedir(d);
	for (size_t i = 0; files && i < nfiles; i++)
		free(files[i]);
	free(files);
	free(argv);
	free(state);
	return ret;
}

/* Is there a file at path (a symbolic link counts, not followed)? 1, 0, or
 * -1: cannot say. */
static int there(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 ? 1 : errno == ENOENT ? 0 : -1;
}

/* Is a tail that ended on its own to be followed again (said on stderr)?
 * With its state file left (it refused that file, or its writer began a new
 * chain, docs/siem.md 9.1): once that file is gone, the operator's word that
 * the old chain was verified. Without one: once the active file's header
 * names another chain than when the tail started, the writer's new chain
 * (docs/siem.md 9.2), as a supervisor restarting a one-chain tail without
 * --state would follow it. A rotation keeps the chain_id: a tail that failed
 * while its writer went on with the same chain is not started again, every
 * second or at each rotation (which would pass the chain on again whole). */
static bool follow_again(struct run *r, struct tail *t)
{
	if (t->state_left) {
		char *sp = state_path(r->ec, t->name);
		int gone = sp && there(sp) == 0;
		free(sp);
		if (gone) {
			fprintf(stderr, "auditlog-verify: --each-chain: the state file of ");
			r->ec->put(stderr, t->name);
			fprintf(stderr, " was removed: its chain is followed again from its start\n");
		}
		return gone;
	}
	char chain[32] = {0};
	bool has_chain = false;
	int err;
	bool other = header_first(r->dirfd, t->name, &err, chain, &has_chain) > 0 && has_chain &&
		     (!t->has_chain || memcmp(chain, t->chain, sizeof(chain)) != 0);
	if (other) {
		fprintf(stderr, "auditlog-verify: --each-chain: a new chain began under ");
		r->ec->put(stderr, t->name);
		fprintf(stderr, ": it is followed from its start\n");
	}
	return other;
}

/* Forget the tails that ended and are to be followed again: the listing that
 * follows starts a tail for the chain under each name from that chain's
 * start. */
static void forget_ended(struct run *r)
{
	for (size_t i = 0; i < r->n;) {
		struct tail *t = &r->t[i];
		if (t->fd >= 0 || !follow_again(r, t)) {
			i++;
			continue;
		}
		free(t->name);
		free(t->buf);
		memmove(t, t + 1, (r->n - i - 1) * sizeof(*t));
		r->n--;
	}
}

/* Start a tail for every active name not seen before whose first line is a
 * complete header; say once of each one whose first line is not. */
static void rescan(struct run *r)
{
	int dfd = dup(r->dirfd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	char **names = NULL;
	size_t n = 0, cap = 0;

	forget_ended(r);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		fprintf(stderr, "auditlog-verify: --each-chain: cannot list ");
		r->ec->put(stderr, r->ec->logdir);
		fprintf(stderr, ": %s\n", strerror(errno));
		return;
	}
	rewinddir(d);
	/* the names first, the files opened after: spawn() lists the directory too */
	for (struct dirent *e; (e = readdir(d));) {
		if (!active_name(e->d_name) || known(r, e->d_name))
			continue;
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 16;
			char **p = realloc(names, nc * sizeof(*p));
			if (!p)
				break;
			names = p;
			cap = nc;
		}
		if (!(names[n] = strdup(e->d_name)))
			break;
		n++;
	}
	closedir(d);
	for (size_t i = 0; i < n; i++) {
		int err;
		char chain[32] = {0};
		bool has_chain = false;
		int h = header_first(r->dirfd, names[i], &err, chain, &has_chain);
		if (h > 0) {
			int e = spawn(r, names[i], chain, has_chain);
			if (e < 0) {
				fprintf(stderr, "auditlog-verify: --each-chain: cannot start the tail of ");
				r->ec->put(stderr, names[i]);
				fprintf(stderr, ": %s\n", strerror(-e));
				if (r->worst < 2)
					r->worst = 2;
			}
		} else if (h < 0) {
			char **p = realloc(r->skipped, (r->nskipped + 1) * sizeof(*p));
			if (p) {
				r->skipped = p;
				r->skipped[r->nskipped++] = names[i];
				names[i] = NULL;
			}
			fprintf(stderr, "auditlog-verify: --each-chain: ");
			r->ec->put(stderr, r->ec->logdir);
			fprintf(stderr, "/");
			r->ec->put(stderr, p ? r->skipped[r->nskipped - 1] : names[i]);
			if (err)
				fprintf(stderr, " cannot be read (%s): not followed\n", strerror(err));
			else
				fprintf(stderr, " is not a log's first file (its first line is no header, or "
						"it is not a regular file): not followed\n");
		}
		free(names[i]);
	}
	free(names);
}

/* Pass on the tail's complete lines: at most WRITE_MAX bytes a write, a
 * longer line alone, so that a reader of a pipe never gets part of a line
 * from one write, as from the one-chain tail. */
static void forward(struct run *r, struct tail *t)
{
	size_t done = 0;

	while (!r->out_failed) {
		const char *start = t->buf + done;
		char *nl = memchr(start, '\n', t->len - done);
		if (!nl)
			break;
		size_t n = (size_t)(nl - start) + 1;
		/* more whole lines while they fit */
		while (n < WRITE_MAX) {
			char *more = memchr(start + n, '\n', t->len - done - n);
			if (!more || (size_t)(more - start) + 1 > WRITE_MAX)
				break;
			n = (size_t)(more - start) + 1;
		}
		int w = cli_write_all(STDOUT_FILENO, start, n, NULL);
		if (w < 0) {
			fprintf(stderr, "auditlog-verify: --each-chain: writing standard output: %s\n",
				strerror(-w));
			r->out_failed = true;
			break;
		}
		done += n;
	}
	memmove(t->buf, t->buf + done, t->len - done);
	t->len -= done;
}

static int exit_of(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st) <= 1 ? WEXITSTATUS(st) : 2;
	return 2;
}

/* Read what the tail wrote; at its end, its exit status. */
static void drain(struct run *r, struct tail *t)
{
	for (;;) {
		if (t->cap - t->len < 4096) {
			size_t nc = t->cap ? 2 * t->cap : 65536;
			char *b = realloc(t->buf, nc);
			if (!b) {
				fprintf(stderr, "auditlog-verify: --each-chain: out of memory\n");
				r->out_failed = true;
				return;
			}
			t->buf = b;
			t->cap = nc;
		}
		ssize_t k = read(t->fd, t->buf + t->len, t->cap - t->len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			break; /* EAGAIN: all of it for now */
		if (k == 0) {
			int st = 0;
			close(t->fd);
			t->fd = -1;
			while (waitpid(t->pid, &st, 0) < 0 && errno == EINTR)
				;
			t->status = exit_of(st);
			if (t->status > r->worst)
				r->worst = t->status;
			forward(r, t);
			if (t->len) {
				fprintf(stderr, "auditlog-verify: --each-chain: the tail of ");
				r->ec->put(stderr, t->name);
				fprintf(stderr, " ended in the middle of a line (%zu bytes not passed on)\n",
					t->len);
			}
			/* while stopping, a tail that ends 0 is what was asked */
			if (!r->stopping || t->status) {
				char *sp = !r->stopping && r->ec->state_dir ? state_path(r->ec, t->name) : NULL;
				t->state_left = sp && there(sp) == 1;
				fprintf(stderr, "auditlog-verify: --each-chain: the tail of ");
				r->ec->put(stderr, t->name);
				fprintf(stderr, " ended (exit %d)", t->status);
				if (t->state_left) {
					fprintf(stderr, "; the other chains' tails go on, and this name is "
							"followed again once its state file is removed: ");
					r->ec->put(stderr, sp);
					fprintf(stderr, " (docs/siem.md 9.1)\n");
				} else
					fprintf(stderr, "%s\n", r->stopping ? "" : "; the other chains' tails go "
							"on, and this name is followed again when a new chain begins under it");
				free(sp);
			}
			return;
		}
		t->len += (size_t)k;
		forward(r, t);
		if (r->out_failed)
			return;
	}
}

int each_chain_run(const struct each_chain *ec)
{
	struct run r = {.ec = ec};
	struct sigaction sa = {.sa_handler = on_stop}, ign = {.sa_handler = SIG_IGN};
	uint64_t next_scan = 0;

	r.dirfd = open(ec->logdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r.dirfd < 0) {
		fprintf(stderr, "auditlog-verify: --each-chain: ");
		ec->put(stderr, ec->logdir);
		fprintf(stderr, ": %s\n", strerror(errno));
		return 2;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: the poll wakes */
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&ign.sa_mask);
	sigaction(SIGPIPE, &ign, NULL); /* a closed output is an error to report */
	for (;;) {
		if ((stop_requested || r.out_failed) && !r.stopping) {
			r.stopping = true;
			r.stop_at = now_ms();
			for (size_t i = 0; i < r.n; i++)
				if (r.t[i].fd >= 0)
					kill(r.t[i].pid, SIGTERM);
		}
		if (r.stopping && !r.killed && now_ms() - r.stop_at > KILL_AFTER_MS) {
			r.killed = true;
			for (size_t i = 0; i < r.n; i++)
				if (r.t[i].fd >= 0) {
					fprintf(stderr, "auditlog-verify: --each-chain: the tail of ");
					ec->put(stderr, r.t[i].name);
					fprintf(stderr, " did not end %d s after SIGTERM: killed\n",
						KILL_AFTER_MS / 1000);
					kill(r.t[i].pid, SIGKILL);
				}
		}
		size_t live = 0;
		for (size_t i = 0; i < r.n; i++)
			live += r.t[i].fd >= 0;
		if (r.stopping && !live)
			break;
		uint64_t now = now_ms();
		if (!r.stopping && now >= next_scan) {
			rescan(&r);
			next_scan = now_ms() + RESCAN_MS;
			now = now_ms();
		}
		struct pollfd *pf = calloc(r.n ? r.n : 1, sizeof(*pf));
		size_t *at = calloc(r.n ? r.n : 1, sizeof(*at));
		if (!pf || !at) {
			free(pf);
			free(at);
			fprintf(stderr, "auditlog-verify: --each-chain: out of memory\n");
			r.out_failed = true;
			continue;
		}
		size_t np = 0;
		for (size_t i = 0; i < r.n; i++)
			if (r.t[i].fd >= 0) {
				pf[np] = (struct pollfd){.fd = r.t[i].fd, .events = POLLIN};
				at[np++] = i;
			}
		int timeout = r.stopping ? 1000 : (int)(next_scan > now ? next_scan - now : 0);
		int k = poll(pf, np, timeout);
		for (size_t j = 0; k > 0 && j < np; j++)
			if (pf[j].revents)
				drain(&r, &r.t[at[j]]);
		free(pf);
		free(at);
	}
	if (r.out_failed && r.worst < 2)
		r.worst = 2;
	int worst = r.worst;
	for (size_t i = 0; i < r.n; i++) {
		free(r.t[i].name);
		free(r.t[i].buf);
	}
	free(r.t);
	for (size_t i = 0; i < r.nskipped; i++)
		free(r.skipped[i]);
	free(r.skipped);
	close(r.dirfd);
	return worst;
}
