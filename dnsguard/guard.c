/* The guard object: configuration copied at start, the directory of
 * per-sandbox state, statistics and pruning after a policy reload. */
#include "dnsguard/dnsguard_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

uint64_t dg_hash(const struct dnsguard *g, const void *data, size_t len)
{
	unsigned char h[crypto_shorthash_BYTES];
	uint64_t v;

	crypto_shorthash(h, data, len, g->hkey);
	memcpy(&v, h, sizeof(v));
	return v;
}

bool dg_is_resolver(const struct dnsguard *g, const struct pc_addr *a)
{
	for (size_t i = 0; i < g->n_resolvers; i++)
		if (pc_addr_eq(&g->resolvers[i], a))
			return true;
	return false;
}

int dnsguard_new(const struct config *cfg, struct dnsguard **out, struct pc_err *err)
{
	struct dnsguard *g;

	if (!cfg || !out)
		return pc_err_set(err, PC_EINVAL, "dnsguard_new: no configuration");
	if (cfg->dns.n_resolvers > RULES_MAX_RESOLVERS)
		return pc_err_set(err, PC_EINVAL, "dns.resolvers: more than %d",
				  RULES_MAX_RESOLVERS);
	if (cfg->dns.ttl_min > cfg->dns.ttl_max)
		return pc_err_set(err, PC_EINVAL, "dns.ttl_min (%u) is above dns.ttl_max (%u)",
				  cfg->dns.ttl_min, cfg->dns.ttl_max);
	if (cfg->dns.learned_per_sandbox == 0 || cfg->dns.learned_total == 0)
		return pc_err_set(
		    err, PC_EINVAL,
		    "dns.max_learned_per_sandbox and dns.max_learned_total must be > 0");
	if (sodium_init() < 0)
		return pc_err_set(err, PC_EIO, "libsodium failed to initialize");
	g = calloc(1, sizeof(*g));
	if (!g)
		return pc_err_set(err, PC_ENOMEM, "dnsguard: out of memory");
	if (pthread_rwlock_init(&g->dir, NULL) != 0) {
		free(g);
		return pc_err_set(err, PC_ENOMEM, "dnsguard: cannot create a lock");
	}
	if (pthread_mutex_init(&g->owed_mu, NULL) != 0) {
		pthread_rwlock_destroy(&g->dir);
		free(g);
		return pc_err_set(err, PC_ENOMEM, "dnsguard: cannot create a lock");
	}
	if (pthread_rwlock_init(&g->local_lock, NULL) != 0) {
		pthread_mutex_destroy(&g->owed_mu);
		pthread_rwlock_destroy(&g->dir);
		free(g);
		return pc_err_set(err, PC_ENOMEM, "dnsguard: cannot create a lock");
	}
	memcpy(g->resolvers, cfg->dns.resolvers, cfg->dns.n_resolvers * sizeof(g->resolvers[0]));
	g->n_resolvers = cfg->dns.n_resolvers;
	g->ttl_min = cfg->dns.ttl_min;
	g->ttl_max = cfg->dns.ttl_max;
	g->grace_ms = (uint64_t)cfg->dns.grace * 1000u;
	g->cap_sb = cfg->dns.learned_per_sandbox;
	g->cap_total = cfg->dns.learned_total;
	g->n_routable = cfg->dns.n_routable <= RULES_MAX_ROUTABLE ? cfg->dns.n_routable : 0;
	memcpy(g->routable, cfg->dns.routable, g->n_routable * sizeof(g->routable[0]));
	randombytes_buf(g->hkey, sizeof(g->hkey));
	*out = g;
	return 0;
}

/* owe: its deferred query records go to the owed list (pruned by a
 * reload), rather than with it (the guard is being freed). */
static void dg_sb_free(struct dnsguard *g, struct dg_sb *s, bool owe)
{
	dg_learn_clear(g, s);
	dg_pending_clear(g, s, owe, "sandbox removed by a reload");
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void dnsguard_free(struct dnsguard *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < DG_SB_BUCKETS; i++) {
		struct dg_sb *s = g->sbs[i], *n;

		for (; s; s = n) {
			n = s->next;
			dg_sb_free(g, s, false);
		}
	}
	while (g->owed_head) {
		struct dg_pend *p = g->owed_head;

		g->owed_head = p->hnext;
		free(p);
	}
	pthread_mutex_destroy(&g->owed_mu);
	pthread_rwlock_destroy(&g->dir);
	pthread_rwlock_destroy(&g->local_lock);
	free(g->local);
	free(g);
}

int dnsguard_local_set(struct dnsguard *g, const struct dnsguard_local *l, size_t n,
		       struct pc_err *err)
{
	struct dnsguard_local *nl = NULL, *old;

	if (!g || (n && !l))
		return pc_err_set(err, PC_EINVAL, "dnsguard_local_set: bad arguments");
	if (n) {
		nl = calloc(n, sizeof(*nl));
		if (!nl)
			return pc_err_set(err, PC_ENOMEM, "dnsguard: out of memory");
		memcpy(nl, l, n * sizeof(*nl));
	}
	pthread_rwlock_wrlock(&g->local_lock);
	old = g->local;
	g->local = nl;
	g->n_local = n;
	pthread_rwlock_unlock(&g->local_lock);
	free(old);
	return 0;
}

static size_t dg_sb_bucket(const struct dnsguard *g, const char *name)
{
	return dg_hash(g, name, strlen(name)) & (DG_SB_BUCKETS - 1);
}

/* With g->dir held shared: the state of sandbox name, or NULL. */
static struct dg_sb *dg_sb_find(struct dnsguard *g, const char *name)
{
	struct dg_sb *s = g->sbs[dg_sb_bucket(g, name)];

	while (s && strcmp(s->name, name) != 0)
		s = s->next;
	return s;
}

struct dg_sb *dg_sb_get(struct dnsguard *g, const char *name, bool create, bool *enomem)
{
	struct dg_sb *s;

	*enomem = false;
	if (strlen(name) >= POLICY_NAME_MAX)
		return NULL;
	pthread_rwlock_rdlock(&g->dir);
	s = dg_sb_find(g, name);
	if (s || !create) {
		if (!s)
			pthread_rwlock_unlock(&g->dir);
		return s;
	}
	pthread_rwlock_unlock(&g->dir);

	/* First sight of this sandbox: insert under the exclusive lock (again
	 * checking, another thread may have won), then go back to shared. */
	pthread_rwlock_wrlock(&g->dir);
	if (!dg_sb_find(g, name)) {
		size_t b = dg_sb_bucket(g, name);

		s = calloc(1, sizeof(*s));
		if (!s || pthread_mutex_init(&s->mu, NULL) != 0) {
			free(s);
			pthread_rwlock_unlock(&g->dir);
			*enomem = true;
			return NULL;
		}
		pc_strlcpy(s->name, name, sizeof(s->name));
		s->gen = atomic_fetch_add_explicit(&g->sb_gen, 1, memory_order_relaxed) + 1;
		atomic_store_explicit(&s->oldest_ms, UINT64_MAX, memory_order_relaxed);
		s->next = g->sbs[b];
		g->sbs[b] = s;
	}
	pthread_rwlock_unlock(&g->dir);
	pthread_rwlock_rdlock(&g->dir);
	s = dg_sb_find(g, name);
	if (!s) /* pruned in between: the caller treats it as no state */
		pthread_rwlock_unlock(&g->dir);
	return s;
}

void dnsguard_prune(struct dnsguard *g, const struct policy *p)
{
	if (!g)
		return;
	pthread_rwlock_wrlock(&g->dir);
	for (size_t i = 0; i < DG_SB_BUCKETS; i++) {
		struct dg_sb **pp = &g->sbs[i];

		while (*pp) {
			struct dg_sb *s = *pp;

			if (p && policy_sandbox_by_name(p, s->name)) {
				pp = &s->next;
				continue;
			}
			*pp = s->next;
			dg_sb_free(g, s, true);
		}
	}
	pthread_rwlock_unlock(&g->dir);
}

void dnsguard_stats(struct dnsguard *g, struct dnsguard_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof(*st));
	if (!g)
		return;
#define DG_LOAD(f) atomic_load_explicit(&g->f, memory_order_relaxed)
	st->queries_allowed = DG_LOAD(q_allowed);
	st->queries_refused = DG_LOAD(q_refused);
	st->queries_malformed = DG_LOAD(q_malformed);
	st->answers_released = DG_LOAD(a_released);
	st->answers_dropped = DG_LOAD(a_dropped);
	st->learned_entries = DG_LOAD(learned);
	st->learned_evicted = DG_LOAD(evicted);
	st->ech_stripped = DG_LOAD(ech_stripped);
	st->pending_queries = DG_LOAD(pending);
	st->pending_evicted = DG_LOAD(pending_evicted);
	st->owed_refused = DG_LOAD(owed_refused);
#undef DG_LOAD
}
