/* Per-rule hit counters (issue 18, point 10): how many flows and DNS
 * queries each allow entry of the policy in force let through, by the
 * entry's stable name ("agent-1/allow[2]", the records' rule.name). One
 * table per policy, counted lock-free by the queue threads; a reload
 * starts a new table from 0 (docs/engine.md, "Per-rule hits"). */
#include "engine/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rulehits {
	atomic_uint refs;
	struct policy *pol; /* a reference: the names below live in it */
	size_t n;
	const struct policy_allow **rules; /* policy order (sandboxes, then entries) */
	size_t *sorted;			   /* indexes of rules by name, for lookups */
	_Atomic uint64_t *hits;		   /* by index in rules */
};

static const struct rulehits *sort_ctx;

static int by_name(const void *a, const void *b)
{
	return strcmp(sort_ctx->rules[*(const size_t *)a]->rule,
		      sort_ctx->rules[*(const size_t *)b]->rule);
}

int rulehits_new(struct policy *pol, struct rulehits **out)
{
	struct rulehits *h = calloc(1, sizeof(*h));
	size_t n = 0, k = 0;
	int rc = PC_ENOMEM;

	if (!h)
		return PC_ENOMEM;
	for (size_t i = 0; pol && i < policy_sandbox_count(pol); i++)
		n += policy_sandbox_at(pol, i)->n_allow;
	h->rules = calloc(n ? n : 1, sizeof(*h->rules));
	h->sorted = calloc(n ? n : 1, sizeof(*h->sorted));
	h->hits = calloc(n ? n : 1, sizeof(*h->hits));
	if (!h->rules || !h->sorted || !h->hits)
		goto out;
	for (size_t i = 0; pol && i < policy_sandbox_count(pol); i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(pol, i);

		for (size_t j = 0; j < sb->n_allow; j++) {
			h->rules[k] = &sb->allow[j];
			h->sorted[k] = k;
			k++;
		}
	}
	h->n = n;
	/* (the control thread alone builds tables: a static context is safe) */
	sort_ctx = h;
	qsort(h->sorted, n, sizeof(*h->sorted), by_name);
	sort_ctx = NULL;
	h->pol = policy_ref(pol);
	atomic_init(&h->refs, 1);
	*out = h;
	h = NULL;
	rc = 0;
out:
	if (h) {
		free(h->rules);
		free(h->sorted);
		free(h->hits);
		free(h);
	}
	return rc;
}

struct rulehits *rulehits_ref(struct rulehits *h)
{
	if (h)
		atomic_fetch_add(&h->refs, 1);
	return h;
}

void rulehits_unref(struct rulehits *h)
{
	if (!h || atomic_fetch_sub(&h->refs, 1) != 1)
		return;
	policy_unref(h->pol);
	free(h->rules);
	free(h->sorted);
	free((void *)h->hits);
	free(h);
}

void rulehits_count(struct rulehits *h, const struct decision *d)
{
	size_t lo = 0, hi;

	/* a final verdict that let it through, by a rule of the policy */
	if (!h || !d->rec.rule || d->rec.verdict != LOGREC_ALLOWED || d->v == VK_DROP ||
	    d->v == VK_REJECT)
		return;
	if (d->rec.action != LOGREC_CONNECT && d->rec.action != LOGREC_DNS_QUERY)
		return;
	hi = h->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(d->rec.rule, h->rules[h->sorted[mid]]->rule);

		if (c == 0) {
			atomic_fetch_add(&h->hits[h->sorted[mid]], 1);
			return;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	/* not this table's policy (a decision made just before a reload): not counted */
}

/* Only the entries that matched: a gateway of 1,000 sandboxes has 50,000
 * entries, most of them idle, and the status reply must stay one message
 * of engine.sock (PC_ENG_MAX; `portcullis metrics` has every entry). */
int rulehits_status_json(struct rulehits *h, char **buf, size_t *len)
{
	int rc = pc_buf_appendf(buf, len, ",\"rules\":[");
	bool first = true;

	for (size_t i = 0; rc == 0 && h && i < h->n; i++) {
		const struct policy_allow *r = h->rules[i];

		if (atomic_load(&h->hits[i]) == 0)
			continue;
		rc = pc_buf_appendf(buf, len, "%s{\"rule\":", first ? "" : ",");
		first = false;
		rc = rc ? rc : pc_buf_append_json(buf, len, r->rule);
		rc = rc ? rc : pc_buf_appendf(buf, len, ",\"file\":");
		rc = rc ? rc : pc_buf_append_json(buf, len, r->file ? r->file : "");
		rc = rc ? rc
			: pc_buf_appendf(buf, len, ",\"line\":%u,\"hits\":%llu}", r->line,
					 (unsigned long long)atomic_load(&h->hits[i]));
	}
	return rc ? rc : pc_buf_appendf(buf, len, "]");
}

void rulehits_metrics(struct pc_prom *b, struct rulehits *h)
{
	pc_prom_family(b, "portcullis_engine_rule_hits_total", "counter",
		       "Flows and DNS queries each allow entry of the policy in force let "
		       "through, by its name (sandbox/allow[index], as in the records' "
		       "rule.name); every entry is listed, and a reload starts again from 0.");
	for (size_t i = 0; h && i < h->n; i++) {
		char l[160], v[128];

		snprintf(l, sizeof(l), "rule=\"%s\"",
			 pc_prom_label(h->rules[i]->rule, v, sizeof(v)));
		pc_prom_u64(b, "portcullis_engine_rule_hits_total", l, atomic_load(&h->hits[i]));
	}
}
