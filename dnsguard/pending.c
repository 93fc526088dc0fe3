/* Outstanding allowed queries, per sandbox: an answer is released only if
 * it matches one (resolver, sandbox address and port, transport, id, name,
 * type), and consumes it. Bounded (DG_PENDING_PER_SB, oldest dropped) and
 * expiring (DG_PENDING_MS). Guarded by the sandbox's mutex (see learn.c). */
#include "dnsguard/internal.h"

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

static void dg_pend_remove(struct dnsguard *g, struct dg_sb *s, struct dg_pend *p)
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
	free(p);
	s->npend--;
	atomic_fetch_sub_explicit(&g->pending, 1, memory_order_relaxed);
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
		dg_pend_remove(g, s, s->pq_head);
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
		   uint64_t now_ms)
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
	if (s->npend >= DG_PENDING_PER_SB) {
		dg_pend_remove(g, s, s->pq_head);
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
	memcpy(p->qname, k->qname, nlen + 1);
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
		     uint64_t now_ms)
{
	uint64_t h = dg_pend_hash(g, k);
	struct dg_pend *p;
	bool found = false;

	pthread_mutex_lock(&s->mu);
	dg_pend_expire(g, s, now_ms);
	p = dg_pend_find(s, k, h);
	if (p) {
		found = true;
		if (--p->count == 0)
			dg_pend_remove(g, s, p);
	}
	pthread_mutex_unlock(&s->mu);
	return found;
}

void dg_pending_clear(struct dnsguard *g, struct dg_sb *s)
{
	while (s->pq_head)
		dg_pend_remove(g, s, s->pq_head);
	free(s->pbuckets);
	s->pbuckets = NULL;
}
