/* Per-sandbox quotas of the queue threads' tables (held flows, DNS-over-TCP
 * streams), so that one sandbox cannot fill a table the others need, and the
 * engine-wide count of the refusals they caused, per sandbox, for status and
 * metrics (docs/engine.md, "Per-sandbox quotas"). */
#include "engine/engine_int.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- keyed hash of values a sandbox chooses -------------------------------- */

int hkey_new(uint8_t key[HKEY_BYTES])
{
	/* sodium_init is idempotent; needed before randombytes_buf */
	if (sodium_init() < 0)
		return PC_EIO;
	randombytes_buf(key, HKEY_BYTES);
	return 0;
}

uint64_t hkey_hash(const uint8_t key[HKEY_BYTES], const void *data, size_t len)
{
	unsigned char h[crypto_shorthash_BYTES];
	uint64_t v;

	_Static_assert(HKEY_BYTES == crypto_shorthash_KEYBYTES, "SipHash key size");
	crypto_shorthash(h, data, len, key);
	memcpy(&v, h, sizeof(v));
	return v;
}

/* ---- per-sandbox counts of one table ---------------------------------------- */

#define QUOTA_BUCKETS 64

struct quota_ent {
	char sandbox[POLICY_NAME_MAX];
	size_t n;
	void *list[2]; /* the table's own: its entries of this sandbox, in order */
	struct quota_ent *next;
};

struct quota_map {
	uint8_t hkey[HKEY_BYTES];
	struct quota_ent *b[QUOTA_BUCKETS];
};

int quota_map_new(struct quota_map **out)
{
	struct quota_map *q = calloc(1, sizeof(*q));

	if (!q)
		return PC_ENOMEM;
	if (hkey_new(q->hkey) < 0) {
		free(q);
		return PC_EIO;
	}
	*out = q;
	return 0;
}

void quota_map_free(struct quota_map *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < QUOTA_BUCKETS; i++) {
		struct quota_ent *e = q->b[i], *n;

		for (; e; e = n) {
			n = e->next;
			free(e);
		}
	}
	free(q);
}

static struct quota_ent **quota_slot(struct quota_map *q, const char *sandbox)
{
	struct quota_ent **pp =
	    &q->b[hkey_hash(q->hkey, sandbox, strlen(sandbox)) & (QUOTA_BUCKETS - 1)];

	while (*pp && strcmp((*pp)->sandbox, sandbox) != 0)
		pp = &(*pp)->next;
	return pp;
}

size_t quota_share(size_t capacity, size_t n_sandboxes)
{
	size_t s = capacity / (n_sandboxes ? n_sandboxes : 1);

	return s ? s : 1;
}

int quota_take(struct quota_map *q, const char *sandbox, size_t limit)
{
	struct quota_ent **pp = quota_slot(q, sandbox), *e = *pp;

	if (e && e->n >= limit)
		return PC_EREFUSED;
	if (!e) {
		if (limit == 0)
			return PC_EREFUSED;
		e = calloc(1, sizeof(*e));
		if (!e)
			return PC_ENOMEM;
		pc_strlcpy(e->sandbox, sandbox, sizeof(e->sandbox));
		*pp = e;
	}
	e->n++;
	return 0;
}

void quota_give(struct quota_map *q, const char *sandbox)
{
	struct quota_ent **pp = quota_slot(q, sandbox), *e = *pp;

	if (!e)
		return;
	if (--e->n == 0) {
		*pp = e->next;
		free(e);
	}
}

size_t quota_used(struct quota_map *q, const char *sandbox)
{
	struct quota_ent *e = *quota_slot(q, sandbox);

	return e ? e->n : 0;
}

void **quota_list(struct quota_map *q, const char *sandbox)
{
	struct quota_ent *e = *quota_slot(q, sandbox);

	return e ? e->list : NULL;
}

size_t quota_most(struct quota_map *q, size_t over, void (*fn)(void *arg, void **list), void *arg)
{
	size_t most = 0;

	/* one entry per sandbox holding any: a walk as long as the policy */
	for (size_t i = 0; i < QUOTA_BUCKETS; i++)
		for (struct quota_ent *e = q->b[i]; e; e = e->next)
			if (e->n > most)
				most = e->n;
	if (most <= over)
		return 0;
	for (size_t i = 0; fn && i < QUOTA_BUCKETS; i++)
		for (struct quota_ent *e = q->b[i]; e; e = e->next)
			if (e->n == most)
				fn(arg, e->list);
	return most;
}

/* ---- refusals per sandbox, engine-wide -------------------------------------- */

void quota_stats_init(struct quota_stats *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
}

void quota_stats_free(struct quota_stats *s)
{
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
	pthread_mutex_destroy(&s->mu);
}

/* Under s->mu: the entry of sandbox, created (NULL: out of memory). */
static struct quota_count *stats_find(struct quota_stats *s, const char *sandbox, bool create)
{
	struct quota_count *v;

	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i].sandbox, sandbox) == 0)
			return &s->v[i];
	if (!create)
		return NULL;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;

		v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		s->v = v;
		s->cap = cap;
	}
	v = &s->v[s->n++];
	memset(v, 0, sizeof(*v));
	pc_strlcpy(v->sandbox, sandbox, sizeof(v->sandbox));
	return v;
}

void quota_stats_count(struct quota_stats *s, const char *sandbox, enum quota_kind kind)
{
	struct quota_count *c;

	if (kind == QUOTA_NONE)
		return;
	pthread_mutex_lock(&s->mu);
	/* Names come from the policy (a sandbox cannot invent one), so the
	 * list is as long as the sandboxes ever refused. */
	c = stats_find(s, sandbox ? sandbox : "", true);
	if (c) {
		if (kind == QUOTA_HELD)
			c->held_refused++;
		else if (kind == QUOTA_DNSTCP)
			c->dnstcp_refused++;
		else if (kind == QUOTA_HELD_GIVEN_UP)
			c->held_given_up++;
		else
			c->dnstcp_given_up++;
	}
	pthread_mutex_unlock(&s->mu);
}

bool quota_stats_get(struct quota_stats *s, const char *sandbox, struct quota_count *out)
{
	struct quota_count *c;

	pthread_mutex_lock(&s->mu);
	c = stats_find(s, sandbox, false);
	if (c)
		*out = *c;
	pthread_mutex_unlock(&s->mu);
	return c != NULL;
}

int quota_status_json(struct quota_stats *s, const struct policy *pol, size_t held_cap,
		      size_t dnstcp_cap, char **buf, size_t *len)
{
	size_t n = pol ? policy_sandbox_count(pol) : 0;
	int rc = pc_buf_appendf(buf, len,
				",\"quotas\":{\"held_flows_per_queue\":%zu,"
				"\"dns_tcp_streams_per_queue\":%zu,\"sandboxes\":[",
				held_cap, dnstcp_cap);

	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(pol, i);
		struct quota_count c = {0};

		quota_stats_get(s, sb->name, &c);
		/* sandbox names are [A-Za-z0-9._-]: nothing to escape */
		rc = pc_buf_appendf(
		    buf, len,
		    "%s{\"sandbox\":\"%s\",\"held_flows_share\":%zu,"
		    "\"dns_tcp_streams_share\":%zu,\"held_flows_refused\":%llu,"
		    "\"held_flows_given_up\":%llu,\"dns_tcp_streams_refused\":%llu,"
		    "\"dns_tcp_streams_given_up\":%llu}",
		    i ? "," : "", sb->name, quota_share(held_cap, n), quota_share(dnstcp_cap, n),
		    (unsigned long long)c.held_refused, (unsigned long long)c.held_given_up,
		    (unsigned long long)c.dnstcp_refused, (unsigned long long)c.dnstcp_given_up);
	}
	return rc ? rc : pc_buf_appendf(buf, len, "]}");
}

/* One family, a sample per sandbox and table: the refusals, or (given_up)
 * the entries given up. */
static void quota_family(struct pc_prom *b, const char *name, const char *help,
			 struct quota_stats *s, const struct policy *pol, bool given_up)
{
	size_t n = pol ? policy_sandbox_count(pol) : 0;

	pc_prom_family(b, name, "counter", help);
	for (size_t i = 0; i < n; i++) {
		const char *sb = policy_sandbox_at(pol, i)->name;
		struct quota_count c = {0};
		char l[POLICY_NAME_MAX + 40];

		quota_stats_get(s, sb, &c);
		snprintf(l, sizeof(l), "sandbox=\"%s\",table=\"held_flows\"", sb);
		pc_prom_u64(b, name, l, given_up ? c.held_given_up : c.held_refused);
		snprintf(l, sizeof(l), "sandbox=\"%s\",table=\"dns_tcp_streams\"", sb);
		pc_prom_u64(b, name, l, given_up ? c.dnstcp_given_up : c.dnstcp_refused);
	}
}

void quota_metrics(struct pc_prom *b, struct quota_stats *s, const struct policy *pol)
{
	quota_family(b, "portcullis_engine_quota_refused_total",
		     "Held flows and DNS-over-TCP streams of a sandbox refused because the "
		     "table was full and it had its share of a queue thread's table, by sandbox "
		     "and table.",
		     s, pol, false);
	quota_family(b, "portcullis_engine_quota_given_up_total",
		     "Held flows and DNS-over-TCP streams of a sandbox over its share of a queue "
		     "thread's table, given up (refused at their next packet) so that a sandbox "
		     "under its share could have one, by sandbox and table.",
		     s, pol, true);
}
