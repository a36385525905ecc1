/* SPDX-License-Identifier: MIT */
/*
 * The producer's half of a v2 event (DESIGN.md "Chain step (v2)"): the
 * calling thread decodes the event's strings (docs/format.md 3), names its
 * PKCS#11 numbers, checks and sorts its caller-defined fields (14) and
 * computes the body digest D_n (13), all before a queue slot is reserved;
 * then it packs the decoded values and D_n into the slot. The worker unpacks
 * them (al_v2_slot_record) and only adds the two-block chain step and the
 * line (al_emit_digest): it never builds or hashes a v2 body. D_n covers
 * neither seq nor @timestamp, which only the worker assigns.
 *
 * The slot's bytes (inline, or on its heap when longer), in this order:
 *   D_n (32) | the strings S_ACTION..S_DETAIL, decoded (len[]) | the rv and
 *   mechanism names (v2.rv_len, v2.mech_len) | v2.ncaller caller fields,
 *   sorted, each u8 key length, u8 kind (0 str, 1 int), key, then le64 value
 *   or le16 length and the decoded bytes (v2.caller_len bytes in all).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "log.h"
#include "format_v2.h"
#include "p11names.h"

_Static_assert(AL_CALLER_MAX <= UINT8_MAX && AL_CALLER_KEY_MAX <= UINT8_MAX &&
		       AL_CALLER_STR_CAP <= UINT16_MAX &&
		       AL_CALLER_MAX * (4 + AL_CALLER_KEY_MAX + AL_CALLER_STR_CAP) <= UINT16_MAX,
	       "caller fields fit the slot's lengths");
_Static_assert(AUDITLOG_FIELDS_MAX == AL_CALLER_MAX, "the API's limit is the format's");
/* The worker's hot reads stay where v0/v1's are: the slot's first two cache
 * lines hold its fixed fields, the v2 lengths (a union with v1's numbers)
 * and D_n, the first bytes of an inline slot. */
_Static_assert(offsetof(struct slot, inl) + AL_HASH_LEN <= 128, "D_n in the second cache line");

/* The caller's fields (any order) checked as far as the format layer cannot
 * (a key, its kind, NUL-terminated key length, integer range, no duplicate
 * even among empty strings) and decoded; the rest of section 14 (key
 * pattern and reserved names, caps, the 2048-byte total) is checked by
 * al_v2_record_digest on the sorted, non-empty set. */
static int take_fields(const struct auditlog_field *in, size_t n, struct al_v2_prep *p)
{
	struct al_v2_field all[AL_CALLER_MAX];

	p->ncaller = 0;
	if (n > AL_CALLER_MAX || (n && !in))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		const struct auditlog_field *f = &in[i];
		struct al_v2_field *o = &all[i];
		size_t kl;

		if (!f->key || (kl = strnlen(f->key, AL_CALLER_KEY_MAX + 1)) > AL_CALLER_KEY_MAX)
			return -EINVAL;
		o->key = (const uint8_t *)f->key;
		o->key_len = kl;
		if (f->kind == AUDITLOG_FIELD_INT) {
			if (f->u > AL_INT_MAX)
				return -EINVAL;
			o->is_int = true;
			o->u = f->u;
			o->p = NULL;
			o->n = 0;
		} else if (f->kind == AUDITLOG_FIELD_STR) {
			if (!f->str && f->str_len)
				return -EINVAL;
			o->is_int = false;
			o->u = 0;
			o->p = p->cdec[i];
			o->n = al_v2_caller_decode((const uint8_t *)f->str, f->str_len, p->cdec[i]);
			/* omitted from the line, but its key must still be one */
			if (o->n == 0 && !al_v2_caller_key_ok(o->key, o->key_len))
				return -EINVAL;
		} else {
			return -EINVAL;
		}
	}
	al_v2_caller_sort(all, n);
	for (size_t i = 0; i < n; i++) {
		if (i && al_v2_caller_key_cmp(all[i - 1].key, all[i - 1].key_len, all[i].key,
					      all[i].key_len) == 0)
			return -EINVAL; /* a duplicate is refused, not merged (14.1) */
		if (all[i].is_int || all[i].n)
			p->caller[p->ncaller++] = all[i];
	}
	return 0;
}

static void set_str(struct al_record *r, int f, const void *s, size_t n)
{
	if (!s || !n)
		return;
	r->present |= AL_BIT(f);
	r->f[f].p = s;
	r->f[f].n = n;
}

static void set_p11(struct al_record *r, int f, const struct al_p11name *tab, size_t n, uint64_t v,
		    char buf[AL_P11_UNNAMED_LEN])
{
	const char *name = al_p11_lookup(tab, n, v);

	if (name)
		set_str(r, f, name, strlen(name));
	else
		set_str(r, f, buf, al_p11_unnamed(buf, v));
}

int al_v2_prepare(const struct auditlog_event *ev, const struct auditlog_field *fields, size_t n,
		  struct al_v2_prep *p)
{
	struct al_record *r = &p->rec;
	uint8_t body[AL_BODY_MAX];
	size_t len;
	long bn;
	int err;

	err = take_fields(fields, n, p);
	if (err < 0)
		return err;
	r->version = AL_V2;
	r->type = AL_T_EVENT;
	r->present = 0;
	r->plain = 0;
	set_str(r, AL_F_ACTION, ev->action, ev->action_len);
	set_str(r, AL_F_OUTCOME, al_outcome_word[ev->outcome], al_outcome_len[ev->outcome]);
	if (ev->flags & AUDITLOG_EV_RV)
		set_p11(r, AL_F_RV, al_ckr_names, al_ckr_count, ev->rv, p->rvbuf);
	if (ev->flags & AUDITLOG_EV_SLOT) {
		r->present |= AL_BIT(AL_F_SLOT);
		r->f[AL_F_SLOT].u = ev->slot;
	}
	if (ev->flags & AUDITLOG_EV_SESSION) {
		r->present |= AL_BIT(AL_F_SESSION);
		r->f[AL_F_SESSION].u = ev->session;
	}
	if (ev->flags & AUDITLOG_EV_MECHANISM)
		set_p11(r, AL_F_MECHANISM, al_ckm_names, al_ckm_count, ev->mechanism, p->mechbuf);
	set_str(r, AL_F_KEY_LABEL, ev->key_label, ev->key_label_len);
	set_str(r, AL_F_KEY_ID, ev->key_id, ev->key_id_len);
	set_str(r, AL_F_ACTOR, ev->actor, ev->actor_len);
	set_str(r, AL_F_DETAIL, ev->detail, ev->detail_len);
	if (ev->flags & AUDITLOG_EV_KEY2) { /* else the members may not exist (auditlog.h) */
		set_str(r, AL_F_KEY2_LABEL, ev->key2_label, ev->key2_label_len);
		set_str(r, AL_F_KEY2_ID, ev->key2_id, ev->key2_id_len);
	}
	r->caller = p->caller;
	r->ncaller = p->ncaller;
	/* in place: the decoded strings that differ from the caller's land in dec */
	err = al_record_decode(r, r, p->dec, sizeof(p->dec));
	if (err < 0)
		return err;
	bn = al_v2_record_digest(r, body, p->digest);
	if (bn < 0)
		return (int)bn;

	len = AL_HASH_LEN;
	for (int i = 0; i < S__MAX; i++)
		if (r->present & AL_BIT(al_slot_field[i]))
			len += r->f[al_slot_field[i]].n;
	if (r->present & AL_BIT(AL_F_RV))
		len += r->f[AL_F_RV].n;
	if (r->present & AL_BIT(AL_F_MECHANISM))
		len += r->f[AL_F_MECHANISM].n;
	p->caller_len = 0;
	for (size_t i = 0; i < p->ncaller; i++)
		p->caller_len += 2 + p->caller[i].key_len + (p->caller[i].is_int ? 8 : 2 + p->caller[i].n);
	p->data_len = len + p->caller_len;
	return 0;
}

static uint8_t *put_str(uint8_t *d, const struct al_record *r, int f, size_t *ret_len)
{
	if (!(r->present & AL_BIT(f))) {
		*ret_len = 0;
		return d;
	}
	memcpy(d, r->f[f].p, r->f[f].n);
	*ret_len = r->f[f].n;
	return d + r->f[f].n;
}

void al_v2_pack(const struct al_v2_prep *p, uint8_t *d, uint16_t len[S__MAX], struct slot_v2 *v2)
{
	const struct al_record *r = &p->rec;
	size_t n;
	uint8_t plain = 0;

	memcpy(d, p->digest, AL_HASH_LEN);
	d += AL_HASH_LEN;
	for (int i = 0; i < S__MAX; i++) {
		d = put_str(d, r, al_slot_field[i], &n);
		len[i] = (uint16_t)n;
		if (r->plain & AL_BIT(al_slot_field[i]))
			plain |= (uint8_t)(1u << i);
	}
	d = put_str(d, r, AL_F_RV, &n);
	v2->rv_len = (uint8_t)n;
	d = put_str(d, r, AL_F_MECHANISM, &n);
	v2->mech_len = (uint8_t)n;
	v2->plain = plain;
	v2->ncaller = (uint8_t)p->ncaller;
	v2->caller_len = (uint16_t)p->caller_len;
	for (size_t i = 0; i < p->ncaller; i++) {
		const struct al_v2_field *f = &p->caller[i];
		*d++ = (uint8_t)f->key_len;
		*d++ = f->is_int;
		memcpy(d, f->key, f->key_len);
		d += f->key_len;
		if (f->is_int) {
			d = al_put_le64(d, f->u);
		} else {
			*d++ = (uint8_t)f->n;
			*d++ = (uint8_t)(f->n >> 8);
			memcpy(d, f->p, f->n);
			d += f->n;
		}
	}
}

static const uint8_t *get_str(const uint8_t *d, struct al_record *r, int f, size_t n, bool plain)
{
	if (!n)
		return d;
	r->present |= AL_BIT(f);
	r->f[f].p = d;
	r->f[f].n = n;
	if (plain)
		r->plain |= AL_BIT(f);
	return d + n;
}

const uint8_t *al_v2_slot_record(const struct slot *s, struct al_record *r,
				 struct al_v2_field caller[AL_CALLER_MAX])
{
	const uint8_t *digest = s->heap ? s->heap : s->inl, *d = digest + AL_HASH_LEN;

	r->version = AL_V2;
	r->type = AL_T_EVENT;
	/* the outcome word, the PKCS#11 names and numbers are ASCII: never escaped */
	r->present = AL_BIT(AL_F_OUTCOME);
	r->plain = AL_BIT(AL_F_OUTCOME);
	r->f[AL_F_OUTCOME].p = (const uint8_t *)al_outcome_word[s->outcome];
	r->f[AL_F_OUTCOME].n = al_outcome_len[s->outcome];
	for (int i = 0; i < S__MAX; i++)
		d = get_str(d, r, al_slot_field[i], s->len[i], s->v2.plain & (1u << i));
	d = get_str(d, r, AL_F_RV, s->v2.rv_len, true);
	d = get_str(d, r, AL_F_MECHANISM, s->v2.mech_len, true);
	if (s->flags & AUDITLOG_EV_SLOT) {
		r->present |= AL_BIT(AL_F_SLOT);
		r->f[AL_F_SLOT].u = s->slot;
	}
	if (s->flags & AUDITLOG_EV_SESSION) {
		r->present |= AL_BIT(AL_F_SESSION);
		r->f[AL_F_SESSION].u = s->session;
	}
	for (unsigned i = 0; i < s->v2.ncaller; i++) {
		struct al_v2_field *f = &caller[i];
		f->key_len = *d++;
		f->is_int = *d++;
		f->key = d;
		d += f->key_len;
		if (f->is_int) {
			uint64_t u = 0;
			for (int b = 0; b < 8; b++)
				u |= (uint64_t)d[b] << (8 * b);
			f->u = u;
			f->p = NULL;
			f->n = 0;
			d += 8;
		} else {
			f->n = (size_t)d[0] | (size_t)d[1] << 8;
			f->p = d + 2;
			d += 2 + f->n;
		}
	}
	r->caller = caller;
	r->ncaller = s->v2.ncaller;
	return digest;
}
