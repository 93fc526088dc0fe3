/* Outstanding allowed queries, per sandbox: an answer is released only if
 * it matches one (resolver, sandbox address and port, transport, id, name,
 * type), and consumes it. Bounded (DG_PENDING_PER_SB, oldest forgotten: a
 * deferred record goes to the owed list) and expiring (DG_PENDING_MS).
 * Guarded by the sandbox's mutex (see learn.c). The deferred records a
 * sandbox owes are bounded by its share, at the query (dg_pending_add),
 * never by dropping one. */
#include "dnsguard/dnsguard_int.h"

#include <stdlib.h>
#include <string.h>

static uint64_t dg_pend_hash(const struct dnsguard *g, const struct dg_pend_key *k)
{
	/* id, port and resolver: what an off-path spoofer must guess. The
	 * name is compared on a hit, not hashed, to keep this cheap. */
	uint8_t key[4 + 17];

	key[0] = (uint8_t)(k->id >> 8);
	key[1] = (uint8_t)k->id;
	key[2] = (uint8_t)(k->port >> 8);
	key[3] = (uint8_t)k->port;
	key[4] = k->resolver.family;
	memcpy(key + 5, k->resolver.a, 16);
	return dg_hash(g, key, sizeof(key));
}

static bool dg_pend_eq(const struct dg_pend *p, const struct dg_pend_key *k, uint64_t h)
{
	return p->hash == h && p->id == k->id && p->port == k->port && p->qtype == k->qtype &&
	       p->proto == k->proto && pc_addr_eq(&p->resolver, &k->resolver) &&
	       pc_addr_eq(&p->client, &k->client) && strcmp(p->qname, k->qname) == 0;
}

static void dg_owed_fill(const struct dg_pend *p, struct dnsguard_owed *o, const char *why)
{
	memset(o, 0, sizeof(*o));
	pc_strlcpy(o->sandbox, p->sandbox, sizeof(o->sandbox));
	pc_strlcpy(o->rule, p->rule, sizeof(o->rule));
	pc_strlcpy(o->policy, p->policy, sizeof(o->policy));
	o->client.addr = p->client;
	o->client.port = p->port;
	o->resolver.addr = p->resolver;
	o->resolver.port = p->dport;
	o->proto = p->proto;
	o->qtype = p->qtype;
	pc_strlcpy(o->qname, p->qname, sizeof(o->qname));
	o->why = why;
	o->pledge = p->pledge;
	o->sb_gen = p->sb_gen;
}

/* A deferred query leaves without its answer: its record goes to the owed
 * list, and stays counted in its sandbox's share until it is in the log
 * (dnsguard_owed_done). Not bounded here: the shares bound it, at the
 * query, where refusing is still possible. */
static void dg_owe(struct dnsguard *g, struct dg_pend *p, const char *why)
{
	p->why = why;
	p->hnext = NULL;
	pthread_mutex_lock(&g->owed_mu);
	if (g->owed_tail)
		g->owed_tail->hnext = p;
	else
		g->owed_head = p;
	g->owed_tail = p;
	g->n_owed++;
	pthread_mutex_unlock(&g->owed_mu);
}

static uint32_t dg_owed_share(size_t n_sandboxes)
{
	size_t share = DG_OWED_MAX / (n_sandboxes ? n_sandboxes : 1);

	return share ? (uint32_t)share : 1;
}

/* Unlink p from s; with why and a deferred record, it moves to the owed
 * list, else it is freed. */
static void dg_pend_unlink(struct dnsguard *g, struct dg_sb *s, struct dg_pend *p, const char *why)
{
	struct dg_pend **pp = &s->pbuckets[p->hash & (DG_PENDING_PER_SB - 1)];

	while (*pp != p)
		pp = &(*pp)->hnext;
	*pp = p->hnext;
	if (p->qprev)
		p->qprev->qnext = p->qnext;
	else
		s->pq_head = p->qnext;
	if (p->qnext)
		p->qnext->qprev = p->qprev;
	else
		s->pq_tail = p->qprev;
	s->npend--;
	atomic_fetch_sub_explicit(&g->pending, 1, memory_order_relaxed);
	if (why && p->owed)
		dg_owe(g, p, why);
	else
		free(p);
}

static void dg_pend_remove(struct dnsguard *g, struct dg_sb *s, struct dg_pend *p)
{
	dg_pend_unlink(g, s, p, NULL);
}

static void dg_pend_append(struct dg_sb *s, struct dg_pend *p)
{
	p->qprev = s->pq_tail;
	p->qnext = NULL;
	if (s->pq_tail)
		s->pq_tail->qnext = p;
	else
		s->pq_head = p;
	s->pq_tail = p;
}

/* Every query lives DG_PENDING_MS, so insertion order is expiry order. */
static void dg_pend_expire(struct dnsguard *g, struct dg_sb *s, uint64_t now_ms)
{
	while (s->pq_head && s->pq_head->expires_ms <= now_ms)
		dg_pend_unlink(g, s, s->pq_head, "no answer within 10 s");
}

static struct dg_pend *dg_pend_find(struct dg_sb *s, const struct dg_pend_key *k, uint64_t h)
{
	struct dg_pend *p;

	if (!s->pbuckets)
		return NULL;
	for (p = s->pbuckets[h & (DG_PENDING_PER_SB - 1)]; p; p = p->hnext)
		if (dg_pend_eq(p, k, h))
			return p;
	return NULL;
}

int dg_pending_add(struct dnsguard *g, struct dg_sb *s, const struct dg_pend_key *k,
		   uint64_t now_ms, const char *rule, const char *policy, size_t n_sandboxes,
		   uint64_t *deferred)
{
	uint64_t h = dg_pend_hash(g, k);
	size_t nlen = strlen(k->qname);
	struct dg_pend *p;
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	dg_pend_expire(g, s, now_ms);
	if (!s->pbuckets) {
		s->pbuckets = calloc(DG_PENDING_PER_SB, sizeof(*s->pbuckets));
		if (!s->pbuckets) {
			rc = PC_ENOMEM;
			goto out;
		}
	}
	p = dg_pend_find(s, k, h);
	if (p) { /* a retransmission: its answers may come more than once */
		if (p->count < DG_PENDING_DUPS)
			p->count++;
		p->expires_ms = now_ms + DG_PENDING_MS;
		if (s->pq_tail != p) {
			if (p->qprev)
				p->qprev->qnext = p->qnext;
			else
				s->pq_head = p->qnext;
			p->qnext->qprev = p->qprev;
			dg_pend_append(s, p);
		}
		goto out;
	}
	if (policy && s->n_owed >= dg_owed_share(n_sandboxes)) {
		/* Its record could not be kept: the query does not leave. */
		rc = PC_EREFUSED;
		goto out;
	}
	if (s->npend >= DG_PENDING_PER_SB) {
		dg_pend_unlink(g, s, s->pq_head, "forgotten unanswered (too many outstanding)");
		DG_INC(g, pending_evicted);
	}
	p = calloc(1, sizeof(*p) + nlen + 1);
	if (!p) {
		rc = PC_ENOMEM;
		goto out;
	}
	p->hash = h;
	p->expires_ms = now_ms + DG_PENDING_MS;
	p->resolver = k->resolver;
	p->client = k->client;
	p->port = k->port;
	p->id = k->id;
	p->qtype = k->qtype;
	p->proto = k->proto;
	p->count = 1;
	p->dport = k->dport;
	memcpy(p->qname, k->qname, nlen + 1);
	pc_strlcpy(p->sandbox, s->name, sizeof(p->sandbox));
	if (policy) {
		p->owed = true;
		p->sb_gen = s->gen;
		s->n_owed++;
		pc_strlcpy(p->rule, rule ? rule : "", sizeof(p->rule));
		pc_strlcpy(p->policy, policy, sizeof(p->policy));
		p->pledge = atomic_fetch_add_explicit(&g->pledge, 1, memory_order_relaxed) + 1;
		*deferred = p->pledge;
	}
	p->hnext = s->pbuckets[h & (DG_PENDING_PER_SB - 1)];
	s->pbuckets[h & (DG_PENDING_PER_SB - 1)] = p;
	dg_pend_append(s, p);
	s->npend++;
	atomic_fetch_add_explicit(&g->pending, 1, memory_order_relaxed);
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

bool dg_pending_take(struct dnsguard *g, struct dg_sb *s, const struct dg_pend_key *k,
		     uint64_t now_ms, struct dnsguard_owed *owed_out, bool *owed)
{
	uint64_t h = dg_pend_hash(g, k);
	struct dg_pend *p;
	bool found = false;

	pthread_mutex_lock(&s->mu);
	dg_pend_expire(g, s, now_ms);
	p = dg_pend_find(s, k, h);
	if (p) {
		found = true;
		if (p->owed) { /* the first answer carries the query's record */
			dg_owed_fill(p, owed_out, "answered");
			*owed = true;
			p->owed = false;
			s->n_owed--; /* its record goes with the answer's */
		}
		if (--p->count == 0)
			dg_pend_remove(g, s, p);
	}
	pthread_mutex_unlock(&s->mu);
	return found;
}

void dg_pending_clear(struct dnsguard *g, struct dg_sb *s, bool owe, const char *why)
{
	while (s->pq_head)
		dg_pend_unlink(g, s, s->pq_head, owe ? why : NULL);
	free(s->pbuckets);
	s->pbuckets = NULL;
}

size_t dnsguard_owed_peek(struct dnsguard *g, uint64_t now_ms, bool all, struct dnsguard_owed *out,
			  size_t max)
{
	size_t n = 0;

	if (!g || !out || max == 0)
		return 0;
	/* Expiry is otherwise lazy (on the sandbox's next query or answer). */
	pthread_rwlock_rdlock(&g->dir);
	for (size_t i = 0; i < DG_SB_BUCKETS; i++)
		for (struct dg_sb *s = g->sbs[i]; s; s = s->next) {
			pthread_mutex_lock(&s->mu);
			if (all) {
				for (struct dg_pend *p = s->pq_head, *nx; p; p = nx) {
					nx = p->qnext;
					if (p->owed)
						dg_pend_unlink(g, s, p, "engine stopping");
				}
			} else {
				dg_pend_expire(g, s, now_ms);
			}
			pthread_mutex_unlock(&s->mu);
		}
	pthread_rwlock_unlock(&g->dir);
	pthread_mutex_lock(&g->owed_mu);
	for (struct dg_pend *p = g->owed_head; p && n < max; p = p->hnext)
		dg_owed_fill(p, &out[n++], p->why);
	pthread_mutex_unlock(&g->owed_mu);
	return n;
}

void dnsguard_owed_done(struct dnsguard *g, size_t n)
{
	struct dg_pend *done = NULL, **tail = &done;

	if (!g)
		return;
	pthread_mutex_lock(&g->owed_mu);
	for (; n && g->owed_head; n--) {
		struct dg_pend *p = g->owed_head;

		g->owed_head = p->hnext;
		if (!g->owed_head)
			g->owed_tail = NULL;
		g->n_owed--;
		p->hnext = NULL;
		*tail = p;
		tail = &p->hnext;
	}
	pthread_mutex_unlock(&g->owed_mu);
	/* Their sandbox may take as many new deferred queries (lock order:
	 * dir, a dg_sb.mu; owed_mu is not held). A sandbox a reload removed
	 * has no state any more, or a namesake's of another gen. */
	while (done) {
		struct dg_pend *p = done;
		bool enomem;
		struct dg_sb *s = dg_sb_get(g, p->sandbox, false, &enomem);

		done = p->hnext;
		if (s) {
			pthread_mutex_lock(&s->mu);
			if (s->gen == p->sb_gen && s->n_owed > 0)
				s->n_owed--;
			pthread_mutex_unlock(&s->mu);
			pthread_rwlock_unlock(&g->dir);
		}
		free(p);
	}
}

/* One more copy into the array of dnsguard_owed_all (its lock held). */
static bool owed_push(struct dnsguard_owed **a, size_t *n, size_t *cap, const struct dg_pend *p)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct dnsguard_owed *na = realloc(*a, nc * sizeof(**a));

		if (!na)
			return false;
		*a = na;
		*cap = nc;
	}
	dg_owed_fill(p, &(*a)[(*n)++], p->why);
	return true;
}

long dnsguard_owed_all(struct dnsguard *g, struct dnsguard_owed **out)
{
	struct dnsguard_owed *a = NULL;
	size_t n = 0, cap = 0;
	bool ok = true;

	*out = NULL;
	pthread_rwlock_rdlock(&g->dir);
	for (size_t i = 0; i < DG_SB_BUCKETS && ok; i++)
		for (struct dg_sb *s = g->sbs[i]; s && ok; s = s->next) {
			pthread_mutex_lock(&s->mu);
			for (struct dg_pend *p = s->pq_head; p && ok; p = p->qnext)
				if (p->owed)
					ok = owed_push(&a, &n, &cap, p);
			pthread_mutex_unlock(&s->mu);
		}
	pthread_rwlock_unlock(&g->dir);
	pthread_mutex_lock(&g->owed_mu);
	for (struct dg_pend *p = g->owed_head; p && ok; p = p->hnext)
		ok = owed_push(&a, &n, &cap, p);
	pthread_mutex_unlock(&g->owed_mu);
	if (!ok) {
		free(a);
		return PC_ENOMEM;
	}
	*out = a;
	return (long)n;
}

int dnsguard_owed_again(struct dnsguard *g, const struct dnsguard_owed *o, const char *why)
{
	size_t nlen = strlen(o->qname);
	struct dg_pend *p = calloc(1, sizeof(*p) + nlen + 1);
	struct dg_sb *s;
	bool enomem;

	if (!p)
		return PC_ENOMEM;
	p->resolver = o->resolver.addr;
	p->dport = o->resolver.port;
	p->client = o->client.addr;
	p->port = o->client.port;
	p->proto = o->proto;
	p->qtype = o->qtype;
	p->owed = true;
	p->pledge = o->pledge;
	p->sb_gen = o->sb_gen;
	pc_strlcpy(p->sandbox, o->sandbox, sizeof(p->sandbox));
	pc_strlcpy(p->rule, o->rule, sizeof(p->rule));
	pc_strlcpy(p->policy, o->policy, sizeof(p->policy));
	memcpy(p->qname, o->qname, nlen + 1);
	/* counted again where the answer took it out (dg_pending_take), as
	 * dnsguard_owed_done will count it out (lock order: dir, a dg_sb.mu,
	 * then owed_mu, not held together here) */
	s = dg_sb_get(g, p->sandbox, false, &enomem);
	if (s) {
		pthread_mutex_lock(&s->mu);
		if (s->gen == p->sb_gen)
			s->n_owed++;
		pthread_mutex_unlock(&s->mu);
		pthread_rwlock_unlock(&g->dir);
	}
	dg_owe(g, p, why);
	return 0;
}

size_t dnsguard_owed_take(struct dnsguard *g, uint64_t now_ms, bool all, struct dnsguard_owed *out,
			  size_t max)
{
	size_t n = dnsguard_owed_peek(g, now_ms, all, out, max);

	dnsguard_owed_done(g, n);
	return n;
}
