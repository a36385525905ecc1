/* SPDX-License-Identifier: MIT */
/* Checkpoint and tree records, checked against the chain (docs/format.md 20). */

#include "checkpoint.h"

#include <errno.h>
#include <string.h>

static const struct al_v2_member *find(const struct al_v2_member *m, size_t n, uint8_t tag)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].tag == tag)
			return &m[i];
	return NULL;
}

static int tree_members(const struct al_v2_member *m, size_t n, const struct al_v2_tree_state *t)
{
	const struct al_v2_member *sz = find(m, n, AL_TAG_SIZE), *fs = find(m, n, AL_TAG_FIRST_SEQ),
				  *rg = find(m, n, AL_TAG_RANGE);
	uint8_t hashes[AL_MERKLE_RANGE_MAX][AL_HASH_LEN], root[AL_HASH_LEN];
	struct al_merkle_range r;

	if (sz->u != t->size || fs->u != t->first_seq)
		return -EBADMSG;
	/* the members' rules made range 64 hex digits per set bit of size */
	if (al_unhex(rg->p, rg->n, hashes[0]) != 0 ||
	    al_merkle_range_set(&r, sz->u, hashes[0], rg->n / 64) != 0 ||
	    al_merkle_range_root(&r, root) != 0)
		return -EINVAL;
	return memcmp(root, t->root, AL_HASH_LEN) == 0 ? 0 : -EBADMSG;
}

int al_v2_tree_check(const struct al_v2_member *m, size_t n, const struct al_v2_tree_state *t)
{
	if (al_v2_check_members(AL_T_TREE, m, n) != 0)
		return -EINVAL;
	return tree_members(m, n, t);
}

int al_v2_checkpoint_check(const struct al_v2_member *m, size_t n, const struct al_v2_tree_state *t,
			   const uint8_t *origin, size_t olen, const uint8_t pub[AL_ED25519_PUB_LEN])
{
	const struct al_v2_member *note;
	uint8_t text[AL_NOTE_MAX];
	size_t tl = 0;
	long want;
	int r;

	if (al_v2_check_members(AL_T_CHECKPOINT, m, n) != 0)
		return -EINVAL;
	r = tree_members(m, n, t);
	if (r)
		return r;
	if (t->size == 0)
		return -EBADMSG;
	want = al_checkpoint_text(origin, olen, t->size, t->root, t->first_seq + t->size - 1,
				  t->head, t->first_seq, text, sizeof(text));
	if (want < 0)
		return -EINVAL;
	note = find(m, n, AL_TAG_NOTE);
	r = al_note_verify(pub, origin, olen, note->p, note->n, &tl);
	if (r != 0)
		return -EBADMSG; /* malformed, failed, or not signed by this key */
	if (tl != (size_t)want || memcmp(note->p, text, tl) != 0)
		return -EBADMSG; /* signed, but not this chain's tree */
	return 0;
}
