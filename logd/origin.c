/* Checkpoint origins per log segment (issue 21): a segment's tree is signed
 * under "<key name>/<seq of its first record>", so each segment is its own
 * append-only log for a witness (C2SP); "<key name>" alone is the origin of
 * logs written before segments had their own (docs/logd.md "Checkpoints"). */
#include "logd/logd_int.h"

#include <stdio.h>
#include <string.h>

int checkpoint_origin_seg(const char *origin, const char *name, uint64_t *seg)
{
	size_t nl = strlen(name), dl;
	const char *d;
	uint64_t x = 0;

	if (strcmp(origin, name) == 0) {
		*seg = 0;
		return 0;
	}
	if (strncmp(origin, name, nl) != 0 || origin[nl] != '/')
		return PC_ETAMPER;
	d = origin + nl + 1;
	dl = strlen(d);
	/* decimal, no leading zero, not 0: one spelling per segment, so one
	 * segment cannot be two origins at the witness */
	if (dl == 0 || dl > 20 || d[0] == '0')
		return PC_ETAMPER;
	for (size_t i = 0; i < dl; i++) {
		if (d[i] < '0' || d[i] > '9' || x > (UINT64_MAX - (uint64_t)(d[i] - '0')) / 10)
			return PC_ETAMPER;
		x = x * 10 + (uint64_t)(d[i] - '0');
	}
	*seg = x;
	return 0;
}

int checkpoint_origin_make(const char *name, uint64_t seg, char *out, size_t len,
			   struct pc_err *err)
{
	int n = seg ? snprintf(out, len, "%s/%llu", name, (unsigned long long)seg)
		    : snprintf(out, len, "%s", name);

	if (n < 0 || (size_t)n >= len)
		return pc_err_set(err, PC_EINVAL,
				  "key name %s is too long for a segment's origin (at most %d "
				  "characters with /<seq>)",
				  name, NOTE_NAME_MAX - 22);
	return 0;
}

/* An anchor's segment against the file's: "<key>" (older logs) is the
 * earliest, then by first seq. */
static int anchor_cmp(const char *name, const char *anchor, const char *file, int *cmp)
{
	uint64_t sa, sf;

	if (checkpoint_origin_seg(anchor, name, &sa) < 0 ||
	    checkpoint_origin_seg(file, name, &sf) < 0)
		return PC_ETAMPER;
	*cmp = sa < sf ? -1 : sa > sf;
	return 0;
}

int logc_anchors_origin(struct logc_anchors *a, const struct note_verifier *key,
			const struct logv_result *r, char *note, size_t notelen, struct pc_err *err)
{
	size_t off = 0;

	note[0] = '\0';
	if (!r->has_cp) /* no origin in the file to compare with */
		return 0;
	for (size_t i = 0; i < a->n;) {
		const struct logc_anchor *x = &a->a[i];
		const char *what = x->witnessed ? "the witnessed checkpoint" : "the checkpoint";
		int cmp = 0, n;

		if (strcmp(a->cp[i].origin, r->last_cp.origin) == 0) {
			i++;
			continue;
		}
		if (anchor_cmp(key->name, a->cp[i].origin, r->last_cp.origin, &cmp) < 0)
			return pc_err_set(err, PC_ETAMPER, "%s %s has origin %s", what, x->path,
					  a->cp[i].origin);
		if (cmp > 0 || !x->witnessed)
			/* The witness has seen a later segment than this file: the
			 * file is an earlier one put back in the log's place. And
			 * a checkpoint named with --against is meant for this
			 * file: one of another segment is a mistake or a swap. */
			return pc_err_set(
			    err, PC_ETAMPER,
			    "%s %s is of origin %s but this file's checkpoints are of %s%s", what,
			    x->path, a->cp[i].origin, r->last_cp.origin,
			    cmp > 0 ? ": a later segment was cosigned, so this file is an "
				      "earlier one in the log's place (a rollback)"
				    : ": another segment's");
		/* an earlier segment's: the witness has not cosigned this one
		 * yet (just after a rotation); nothing to compare */
		n = snprintf(note + off, notelen - off,
			     "  not compared with %s %s: it is of an earlier segment (origin %s); "
			     "the witness has not cosigned this one (%s) yet\n",
			     what, x->path, a->cp[i].origin, r->last_cp.origin);
		if (n > 0 && (size_t)n < notelen - off)
			off += (size_t)n;
		memmove(&a->a[i], &a->a[i + 1], (a->n - i - 1) * sizeof(a->a[0]));
		memmove(&a->cp[i], &a->cp[i + 1], (a->n - i - 1) * sizeof(a->cp[0]));
		memmove(&a->st[i], &a->st[i + 1], (a->n - i - 1) * sizeof(a->st[0]));
		a->n--;
		a->p.n = a->n;
	}
	return 0;
}
