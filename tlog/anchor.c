/* log verify's anchors: checkpoints held outside the file (--against, and
 * the witnessed checkpoint <log>.witnessed next to it) that the file's tree
 * must pass through, and the cosignatures they carry. A file cut back
 * below one, or holding another tree at its size (a split view), is
 * refused: what a witness has seen cannot be taken back. The checks only:
 * logd/tlog_files.c reads the anchors' files. */
#include "tlog/tlog_int.h"

#include <stdio.h>
#include <string.h>

static int anchor_leaf(void *ctx, uint64_t index, uint64_t seq, const uint8_t leaf[MERKLE_HASH],
		       const char *line, size_t len)
{
	struct logc_anchors *a = ctx;

	(void)seq;
	(void)line;
	(void)len;
	return logc_prefix_leaf(&a->p, index, leaf);
}

void logc_anchors_attach(struct logc_anchors *a, struct merkle_hasher *h, struct logv *v)
{
	a->p = (struct logc_prefix){.h = h, .want = a->cp, .state = a->st, .n = a->n};
	memset(a->st, 0, sizeof(a->st));
	merkle_tree_init(&a->p.tree);
	if (a->n)
		logv_set_leaf_fn(v, anchor_leaf, a);
}

/* The signature lines that are not the log's: "name+id" of each. */
static void cosigners(const struct logc_anchor *x, const struct note_verifier *key,
		      const struct cosig_verifier *wkey, char *buf, size_t len)
{
	const char *p = strstr(x->note, "\n\n"), *end = x->note + x->note_len;
	size_t off = 0;

	buf[0] = '\0';
	if (!p)
		return;
	for (p += 2; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *name = p + 4, *sp;
		uint64_t t;
		char ts[32];
		int n;

		if (!eol || eol - p < 6)
			break;
		sp = memchr(name, ' ', (size_t)(eol - name));
		if (sp && !((size_t)(sp - name) == strlen(key->name) &&
			    memcmp(name, key->name, (size_t)(sp - name)) == 0)) {
			if (wkey && (size_t)(sp - name) == strlen(wkey->name) &&
			    memcmp(name, wkey->name, (size_t)(sp - name)) == 0 &&
			    cosig_verify(wkey, x->note, x->note_len, &t, NULL) == 0)
				n = snprintf(buf + off, len - off,
					     "%s%.*s+%08x (cosignature verified, %s)",
					     off ? ", " : "", (int)(sp - name), name, wkey->hash,
					     pc_time_rfc3339(t * 1000, ts, sizeof(ts)));
			else
				n = snprintf(
				    buf + off, len - off, "%s%.*s (cosignature not checked%s)",
				    off ? ", " : "", (int)(sp - name), name,
				    wkey ? ": not the configured witness's, or it does not "
					   "verify"
					 : ": no witness key, see --witness-key");
			if (n < 0 || (size_t)n >= len - off)
				break;
			off += (size_t)n;
		}
		p = eol + 1;
	}
}

int logc_anchors_report(struct logc_anchors *a, const struct note_verifier *key,
			const struct cosig_verifier *wkey, uint64_t records, struct pc_buf *print,
			struct pc_err *err)
{
	int rc = 0;

	logc_prefix_finish(&a->p);
	for (size_t i = 0; i < a->n; i++) {
		const struct logc_anchor *x = &a->a[i];
		const char *what = x->witnessed ? "the witnessed checkpoint" : "the checkpoint";
		char who[512];

		cosigners(x, key, wkey, who, sizeof(who));
		if (a->st[i] == LOGC_PREFIX_SHORT) {
			rc = pc_err_set(err, PC_ETAMPER,
					"the file holds %llu records but %s %s covers %llu%s%s: "
					"records were cut off (a rollback or a cut-back)",
					(unsigned long long)records, what, x->path,
					(unsigned long long)a->cp[i].size,
					who[0] ? ", cosigned by " : "", who);
			break;
		}
		if (a->st[i] == LOGC_PREFIX_SPLIT) {
			rc = pc_err_set(
			    err, PC_ETAMPER,
			    "the file's first %llu records are not the tree %s %s signs%s%s: "
			    "records were changed, or this is a split view (two logs "
			    "for one origin)",
			    (unsigned long long)a->cp[i].size, what, x->path,
			    who[0] ? ", cosigned by " : "", who);
			break;
		}
		if (x->witnessed && wkey) {
			/* issue 32: a .witnessed file is anyone's to write who can
			 * write the log's directory; only the witness's
			 * cosignature makes it the witness's word */
			struct pc_err cerr;
			uint64_t t;

			if (cosig_verify(wkey, x->note, x->note_len, &t, &cerr) < 0) {
				rc = pc_err_set(
				    err, PC_ETAMPER,
				    "%s %s carries no cosignature by the witness %s+%08x "
				    "that verifies (%s): it is not the witness's: "
				    "replaced or forged",
				    what, x->path, wkey->name, wkey->hash, cerr.msg);
				break;
			}
		}
		if (!print)
			continue;
		if (x->witnessed && !wkey)
			/* without the witness's key nothing shows the witness saw
			 * this checkpoint: say so, never "consistent with" it */
			pc_buf_printf(
			    print,
			    "  witnessed checkpoint %s unchecked: no witness key (give "
			    "--witness-key or log.witness.key), so its cosignature cannot be "
			    "verified; the file passes through its %llu records, which only the "
			    "log's own key vouches for\n",
			    x->path, (unsigned long long)a->cp[i].size);
		else
			pc_buf_printf(print, "  consistent with %s %s: %llu records%s%s\n", what,
				      x->path, (unsigned long long)a->cp[i].size,
				      who[0] ? ", cosigned by " : "", who);
	}
	return rc;
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
