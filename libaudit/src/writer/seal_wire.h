/* SPDX-License-Identifier: MIT */
/*
 * The sealer protocol (docs/sealer.md, normative): message layout shared by
 * the writer's socket provider (seal_socket.c) and auditlog-sealer
 * (sealer/main.c). One request or answer per SOCK_SEQPACKET message; every
 * integer is fixed-width little-endian.
 */
#ifndef AUDITLOG_SEAL_WIRE_H
#define AUDITLOG_SEAL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "note.h"
#include "sealkey.h"

#define AL_SW_VERSION 1u
#define AL_SW_HDR 8u   /* u16 version, u16 op, i32 status (answers) / u32 0 (requests) */
#define AL_SW_MAX 2048u /* no message is longer */

enum al_sw_op {
	AL_SW_HELLO = 1,
	AL_SW_NOW = 2,
	AL_SW_SEAL = 3,
	AL_SW_SIGN = 4,
	AL_SW_CHECK_TAIL = 5,
};

/* Body lengths (exact; SIGN's are bounds). */
#define AL_SW_HELLO_REQ (32u + AL_SEAL_KID_LEN)                              /* 40 */
#define AL_SW_HELLO_ANS (AL_SEAL_KID_LEN + 8u + 8u + 1u + AL_SEAL_HOST_MAX)  /* 88 */
#define AL_SW_NOW_REQ 0u
#define AL_SW_NOW_ANS (4u + 4u + 5u * 8u)                                    /* 48 */
#define AL_SW_SEAL_REQ (4u + 4u + 8u + 8u + 32u + AL_HASH_LEN + AL_TS_LEN + 2u) /* 120 */
#define AL_SW_SEAL_ANS (4u + AL_SEAL_KID_LEN + AL_HASH_LEN)                  /* 44 */
#define AL_SW_SIGN_NAME_MAX 255u
#define AL_SW_SIGN_REQ_MAX (4u + AL_SW_SIGN_NAME_MAX + AL_NOTE_MAX)
#define AL_SW_CHECK_REQ (AL_SEAL_KID_LEN + 4u)                               /* 12 */

/* NOW's flags */
#define AL_SW_NOW_CLOCK 1u

static inline uint16_t al_sw_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t al_sw_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t al_sw_le64(const uint8_t *p)
{
	return (uint64_t)al_sw_le32(p) | (uint64_t)al_sw_le32(p + 4) << 32;
}

static inline uint8_t *al_sw_put16(uint8_t *o, uint16_t v)
{
	o[0] = (uint8_t)v;
	o[1] = (uint8_t)(v >> 8);
	return o + 2;
}

/* A message header: version, op, and status (0 in requests). */
static inline void al_sw_hdr(uint8_t *o, unsigned op, int32_t status)
{
	o = al_sw_put16(o, AL_SW_VERSION);
	o = al_sw_put16(o, (uint16_t)op);
	al_put_le32(o, (uint32_t)status);
}

#endif
