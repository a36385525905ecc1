/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

AUDITLOG_API int auditlog_config_new(struct auditlog_config **ret_cfg)
{
	struct auditlog_config *c;

	if (!ret_cfg)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->version = 1;
	c->queue_slots = 16384;
	c->queue_lanes = 0; /* one a CPU (x86): docs/benchmarks.md "Lanes, built" */
	c->full_policy = AUDITLOG_FULL_BLOCK;
	c->max_batch_bytes = 3u << 20; /* docs/benchmarks.md "Batches of 3 MiB" */
	c->drop_behind_bytes = AL_DROP_BEHIND_DEFAULT;
	c->backend = AUDITLOG_BACKEND_AUTO;
	c->future_tolerance_s = 600;
	c->ckpt_records = 100000;
	c->ckpt_ms = 1000;
	*ret_cfg = c;
	return 0;
}

AUDITLOG_API void auditlog_config_free(struct auditlog_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->path);
	free(cfg->seal_state_path);
	free(cfg->signing_key_path);
	free(cfg->sealer_socket);
	free(cfg);
}

AUDITLOG_API int auditlog_config_set_path(struct auditlog_config *cfg, const char *path)
{
	char *p;

	if (!cfg || !path || !*path || path[strlen(path) - 1] == '/')
		return -EINVAL;
	p = strdup(path);
	if (!p)
		return -ENOMEM;
	free(cfg->path);
	cfg->path = p;
	return 0;
}

AUDITLOG_API int auditlog_config_set_format_version(struct auditlog_config *cfg, unsigned version)
{
	if (!cfg || version > 2)
		return -EINVAL;
	cfg->version = version;
	return 0;
}

AUDITLOG_API int auditlog_config_set_queue_capacity(struct auditlog_config *cfg, size_t slots)
{
	size_t n = 64;

	if (!cfg || slots == 0 || slots > (1u << 24))
		return -EINVAL;
	while (n < slots)
		n <<= 1;
	cfg->queue_slots = n;
	return 0;
}

/* Lanes need the monotonic clock read after a locked instruction to come
 * after it, and the worker's read before its later loads (writer.c, cut()):
 * x86's LFENCE-ordered RDTSC, which Linux's vDSO uses. */
#if defined(__x86_64__) || defined(__i386__)
#define LANES_SUPPORTED 1
#else
#define LANES_SUPPORTED 0
#endif

AUDITLOG_API int auditlog_config_set_queue_lanes(struct auditlog_config *cfg, unsigned lanes)
{
	unsigned n = 1;

	if (!cfg || lanes > AL_LANES_MAX)
		return -EINVAL;
	if (lanes > 1 && !LANES_SUPPORTED)
		return -EOPNOTSUPP;
	if (lanes) {
		while (n < lanes)
			n <<= 1;
	}
	cfg->queue_lanes = lanes ? n : 0;
	return 0;
}

unsigned al_queue_lanes(const struct auditlog_config *c)
{
	unsigned n = c->queue_lanes;

	if (!LANES_SUPPORTED)
		return 1;
	if (n == 0) { /* one a CPU, a power of two */
		long cpus = sysconf(_SC_NPROCESSORS_CONF);
		n = 1;
		while (n < AL_LANES_MAX && (long)n < cpus)
			n <<= 1;
	}
	while (n > 1 && c->queue_slots / n < 64) /* each lane at least 64 slots */
		n >>= 1;
	return n;
}

AUDITLOG_API int auditlog_config_set_full_policy(struct auditlog_config *cfg,
						 enum auditlog_full_policy p)
{
	if (!cfg || (p != AUDITLOG_FULL_BLOCK && p != AUDITLOG_FULL_EAGAIN))
		return -EINVAL;
	cfg->full_policy = p;
	return 0;
}

AUDITLOG_API int auditlog_config_set_enospc_deadline_ms(struct auditlog_config *cfg, uint64_t ms)
{
	if (!cfg || ms > UINT64_C(1) << 40)
		return -EINVAL;
	cfg->enospc_deadline_ms = ms;
	return 0;
}

AUDITLOG_API int auditlog_config_set_rotate_bytes(struct auditlog_config *cfg, uint64_t bytes)
{
	if (!cfg || (bytes != 0 && bytes < 4096))
		return -EINVAL;
	cfg->rotate_bytes = bytes;
	return 0;
}

AUDITLOG_API int auditlog_config_set_rotate_age_s(struct auditlog_config *cfg, uint64_t seconds)
{
	if (!cfg || seconds > UINT64_C(1) << 32)
		return -EINVAL;
	cfg->rotate_age_s = seconds;
	return 0;
}

AUDITLOG_API int auditlog_config_set_max_batch_bytes(struct auditlog_config *cfg, size_t bytes)
{
	if (!cfg || bytes < (16u << 10) || bytes > (64u << 20))
		return -EINVAL;
	cfg->max_batch_bytes = bytes;
	return 0;
}

AUDITLOG_API int auditlog_config_set_worker_nice(struct auditlog_config *cfg, int nice)
{
	if (!cfg || nice < -20 || nice > 19)
		return -EINVAL;
	cfg->worker_nice = nice;
	cfg->has_worker_nice = true;
	return 0;
}

/* "0-3,8": CPU numbers and inclusive ranges, comma-separated, each below
 * CPU_SETSIZE (taskset -c's and systemd's CPUAffinity= list, strides aside). */
static int parse_cpu_list(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	if (!*s)
		return -EINVAL;
	for (;;) {
		unsigned long lo, hi;
		char *end;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		lo = strtoul(s, &end, 10);
		hi = lo;
		if (*end == '-') {
			s = end + 1;
			if (*s < '0' || *s > '9')
				return -EINVAL;
			hi = strtoul(s, &end, 10);
		}
		if (hi >= CPU_SETSIZE || lo > hi)
			return -EINVAL;
		for (unsigned long c = lo; c <= hi; c++)
			CPU_SET(c, set);
		if (!*end)
			return 0;
		if (*end != ',')
			return -EINVAL;
		s = end + 1;
	}
}

AUDITLOG_API int auditlog_config_set_worker_cpus(struct auditlog_config *cfg, const char *cpus)
{
	cpu_set_t set;

	if (!cfg)
		return -EINVAL;
	if (!cpus) {
		cfg->has_worker_cpus = false;
		return 0;
	}
	if (parse_cpu_list(cpus, &set) < 0)
		return -EINVAL;
	cfg->worker_cpus = set;
	cfg->has_worker_cpus = true;
	return 0;
}

AUDITLOG_API int auditlog_config_set_drop_behind_bytes(struct auditlog_config *cfg, uint64_t bytes)
{
	if (!cfg || (bytes != 0 && bytes < AUDITLOG_DROP_BEHIND_MIN))
		return -EINVAL;
	cfg->drop_behind_bytes = bytes;
	return 0;
}

AUDITLOG_API int auditlog_config_set_backend(struct auditlog_config *cfg, enum auditlog_backend b)
{
	if (!cfg || (b != AUDITLOG_BACKEND_AUTO && b != AUDITLOG_BACKEND_IO_URING &&
		     b != AUDITLOG_BACKEND_PWRITE))
		return -EINVAL;
	cfg->backend = b;
	return 0;
}

AUDITLOG_API int auditlog_config_set_future_tolerance_s(struct auditlog_config *cfg, uint64_t seconds)
{
	if (!cfg || seconds > UINT64_C(1) << 32)
		return -EINVAL;
	cfg->future_tolerance_s = seconds;
	return 0;
}

AUDITLOG_API int auditlog_config_set_async_coalesce_us(struct auditlog_config *cfg, uint64_t us)
{
	if (!cfg || us > AUDITLOG_ASYNC_COALESCE_MAX_US)
		return -EINVAL;
	cfg->async_coalesce_us = us;
	return 0;
}

AUDITLOG_API int auditlog_config_set_sealing(struct auditlog_config *cfg, const char *state_path,
					    const char *signing_key_path)
{
	char *s, *k;

	if (!cfg || !state_path || !*state_path || !signing_key_path || !*signing_key_path)
		return -EINVAL;
	s = strdup(state_path);
	k = strdup(signing_key_path);
	if (!s || !k) {
		free(s);
		free(k);
		return -ENOMEM;
	}
	free(cfg->seal_state_path);
	free(cfg->signing_key_path);
	cfg->seal_state_path = s;
	cfg->signing_key_path = k;
	return 0;
}

AUDITLOG_API int auditlog_config_set_sealer_socket(struct auditlog_config *cfg, const char *path)
{
	char *s;

	if (!cfg || !path || !*path)
		return -EINVAL;
	s = strdup(path);
	if (!s)
		return -ENOMEM;
	free(cfg->sealer_socket);
	cfg->sealer_socket = s;
	return 0;
}

AUDITLOG_API int auditlog_config_set_sealer_policy(struct auditlog_config *cfg, unsigned policy)
{
	if (!cfg || (policy != AUDITLOG_SEALER_FAIL_CLOSED && policy != AUDITLOG_SEALER_QUEUE))
		return -EINVAL;
	cfg->sealer_policy = policy;
	return 0;
}

AUDITLOG_API int auditlog_config_set_checkpoint_interval(struct auditlog_config *cfg,
							 uint64_t records, uint64_t ms)
{
	if (!cfg || (records == 0 && ms == 0) || records > AL_INT_MAX ||
	    ms > UINT64_C(1) << 32)
		return -EINVAL;
	cfg->ckpt_records = records;
	cfg->ckpt_ms = ms;
	return 0;
}

int auditlog__config_set_io_hooks(struct auditlog_config *cfg, const struct al_io_hooks *h)
{
	if (!cfg)
		return -EINVAL;
	if (h) {
		cfg->hooks = *h;
		cfg->has_hooks = true;
	} else {
		memset(&cfg->hooks, 0, sizeof(cfg->hooks));
		cfg->has_hooks = false;
	}
	return 0;
}

int auditlog__config_set_clock(struct auditlog_config *cfg, const struct al_clock_hooks *h)
{
	if (!cfg)
		return -EINVAL;
	if (h) {
		cfg->clock = *h;
		cfg->has_clock = true;
	} else {
		memset(&cfg->clock, 0, sizeof(cfg->clock));
		cfg->has_clock = false;
	}
	return 0;
}

uint64_t auditlog__tail_bound(const struct auditlog_config *cfg)
{
	return (uint64_t)AL_INFLIGHT * cfg->max_batch_bytes + 8192u;
}

AUDITLOG_API const char *auditlog_backend_name(enum auditlog_backend b)
{
	switch (b) {
	case AUDITLOG_BACKEND_IO_URING:
		return "io_uring";
	case AUDITLOG_BACKEND_PWRITE:
		return "pwrite";
	default:
		return "auto";
	}
}
