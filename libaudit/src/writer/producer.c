/* SPDX-License-Identifier: MIT */
/*
 * The producer's half of an event (DESIGN.md "Chain step (v2)", and the
 * same split for v0 and v1, issue 15): the calling thread decodes the
 * event's strings (docs/format.md 3), names its PKCS#11 numbers and renders
 * the members as the line carries them (al_emit_members), all before a
 * queue slot is reserved, so that an error queues nothing. v2 also checks
 * and sorts the caller-defined fields (14) and computes the body digest D_n
 * (13); v1 also encodes the members' part of its body (5), which covers
 * neither seq nor @timestamp. The slot's bytes (inline, or on its heap when
 * longer) are, in v2, D_n (32) then the members (len[0] bytes); in v0 and
 * v1 the members (len[0]) then v1's body part (len[1]). The worker only adds
 * @timestamp, seq, the chain step and the hash (al_emit_framed,
 * al_emit_framed_v01): it never decodes a string nor walks the members.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "log.h"
#include "format_v2.h"
#include "p11names.h"

_Static_assert(AL_BODY_MAX <= UINT16_MAX, "the members' and the body's lengths fit the slot's len[]");
_Static_assert(AUDITLOG_FIELDS_MAX == AL_CALLER_MAX, "the API's limit is the format's");
/* The worker's hot reads: the slot's first two cache lines hold its fixed
 * fields and D_n, the first bytes of an inline slot; the members follow. */
_Static_assert(offsetof(struct slot, inl) + AL_HASH_LEN <= 128, "D_n in the second cache line");

/* The caller's fields (any order) checked as far as the format layer cannot
 * (a key, its kind, NUL-terminated key length, integer range, no duplicate
 * even among empty strings) and decoded; the rest of section 14 (key
 * pattern and reserved names, caps, the 2048-byte total) is checked by
 * al_v2_record_digest on the sorted, non-empty set. */
static int take_fields(const struct auditlog_field *in, size_t n, struct al_prep *p)
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
	const struct al_p11name *e = al_p11_find(tab, n, v);

	if (e)
		set_str(r, f, e->name, e->len);
	else
		set_str(r, f, buf, al_p11_unnamed(buf, v));
}

int al_prepare(uint8_t version, const struct auditlog_event *ev, const struct auditlog_field *fields,
	       size_t n, struct al_prep *p)
{
	struct al_record *r = &p->rec;
	uint8_t d[AL_HASH_LEN];
	long bn, mn;
	int err;

	if (version == AL_V2) {
		err = take_fields(fields, n, p);
		if (err < 0)
			return err;
	} else {
		if (n)
			return -EINVAL; /* caller fields are v2's */
		p->ncaller = 0;
	}
	r->version = version;
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
	if (version != AL_V2) {
		mn = al_emit_members(r, p->buf, p->buf + AL_PREP_BODY, &p->body_len);
		if (mn < 0)
			return (int)mn;
		p->data_len = (size_t)mn;
		return 0;
	}
	bn = al_v2_record_digest(r, p->buf, d); /* B_n in buf, then D_n and the members */
	if (bn < 0)
		return (int)bn;
	memcpy(p->buf, d, AL_HASH_LEN);
	mn = al_emit_members(r, p->buf + AL_HASH_LEN, NULL, NULL);
	if (mn < 0)
		return (int)mn;
	p->data_len = AL_HASH_LEN + (size_t)mn;
	p->body_len = 0;
	return 0;
}
