/* The verdict of `portcullis log verify`: what "intact" means for one file
 * the verifier read through, and for several files of one log, one chain.
 * Only the decision: the CLI reads the files and prints what is decided
 * here (docs/logd.md "Verifying"), and fuzz_logverify runs it. */
#include "tlog/tlog_int.h"

#include <stdlib.h>
#include <string.h>

int tlog_verdict_file(const struct logv_result *r, const struct tlog_file_facts *f,
		      struct tlog_file_verdict *out, struct pc_err *err)
{
	const struct checkpoint *ext = f->ext;
	struct tlog_file_verdict v = {0};
	bool witnessed = false;
	int rc;

	/* Signed: a checkpoint in the file, or one held elsewhere that the
	 * file met (the verifier fails when it does not). Without either,
	 * the chain proves nothing: anyone can compute hashes. */
	v.result = r->has_cp || (ext && ext->size > 0) ? TLOG_INTACT : TLOG_UNSIGNED;
	v.accepted = v.result == TLOG_INTACT || f->allow_unsigned;
	v.records = r->records;
	v.first_seq = r->records ? r->first_seq : 0;
	v.last_seq = r->records ? r->last_seq : 0;
	v.checkpoints = r->checkpoints;
	v.sealed = r->has_cp;
	if (r->has_cp) {
		v.sealed_line = r->last_cp_line;
		v.sealed_records = r->last_cp.size;
		v.sealed_time_ms = r->last_cp.time_ms;
	}
	v.unsealed = r->unsealed;
	if (r->unsealed) {
		v.unsealed_line = r->unsealed_line;
		v.unsealed_first_seq = r->last_seq - r->unsealed + 1;
	}
	if (ext) {
		v.has_checkpoint = true;
		v.checkpoint_records = ext->size;
		v.checkpoint_time_ms = ext->time_ms;
		v.checkpoint_covers_all = ext->size == r->records;
	}
	v.sidecar_missing = f->sidecar_missing;
	memcpy(v.first_prev, r->first_prev, MERKLE_HASH);
	memcpy(v.last_hash, r->last_hash, MERKLE_HASH);
	if (v.result == TLOG_UNSIGNED) { /* nothing signed to hold it to */
		*out = v;
		return 0;
	}
	v.signed_by = f->key;
	/* What a witness (or anyone holding a checkpoint) has seen cannot be
	 * taken back: the file must pass through every anchor. */
	if (f->anchors && f->key &&
	    (rc = logc_anchors_report(f->anchors, f->key, f->wkey, r->records, NULL, err)) < 0)
		return rc;
	for (size_t i = 0; f->anchors && i < f->anchors->n; i++)
		witnessed |= f->anchors->a[i].witnessed;
	v.witnessed = !witnessed ? TLOG_WITNESSED_NONE
		      : f->wkey	 ? TLOG_WITNESSED_COSIGNED
				 : TLOG_WITNESSED_UNCHECKED;
	/* a witness configured that has cosigned none of this file cannot
	 * vouch against a cut-back (issue 21: say only what it knows) */
	v.witnessed_missing = f->wkey && !witnessed;
	*out = v;
	return 0;
}

static int link_cmp(const void *a, const void *b)
{
	const struct tlog_link *x = a, *y = b;

	return x->first_seq < y->first_seq ? -1 : x->first_seq > y->first_seq;
}

int tlog_verdict_chain(struct tlog_link *l, size_t n, struct tlog_chain_verdict *out)
{
	struct tlog_chain_verdict v = {.files = n};

	qsort(l, n, sizeof(*l), link_cmp);
	for (size_t i = 1; i < n; i++) {
		if (l[i].first_seq == l[i - 1].last_seq + 1 &&
		    memcmp(l[i].first_prev, l[i - 1].last_hash, MERKLE_HASH) == 0)
			continue;
		v.broken = true;
		v.at = i;
		v.missing_between = l[i].first_seq != l[i - 1].last_seq + 1;
		*out = v;
		return PC_ETAMPER;
	}
	v.first_seq = l[0].first_seq;
	v.last_seq = l[n - 1].last_seq;
	/* The oldest file links to a record before it: the segments before
	 * it were not given (deleted by rotation, or removed), and the chain
	 * proves nothing about them. */
	v.from_start = true;
	for (size_t i = 0; i < MERKLE_HASH; i++)
		if (l[0].first_prev[i]) {
			v.from_start = false;
			break;
		}
	*out = v;
	return 0;
}
