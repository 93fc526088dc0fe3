/* Learned addresses: (sandbox, address) -> names with expiry, bounded per
 * sandbox and in total with oldest-first eviction; and the questions the
 * engine asks of them (may this flow go there, is this SNI one of them).
 *
 * Locking. Every engine queue thread calls in here. State is split by
 * sandbox: each struct dg_sb has its own mutex guarding its address hash
 * table (keyed SipHash of the address, resized by doubling, so a lookup
 * costs the same with 10 or 100,000 entries), its learning-order list and
 * its outstanding queries. Threads working for different sandboxes never
 * contend; for one sandbox, each critical section is a hash probe and a few
 * pointer moves, and no policy function is called with the mutex held (the
 * names are copied out first). The directory of sandboxes is behind
 * g->dir, a rwlock taken shared by every call and exclusive only to add a
 * sandbox or prune: a dg_sb found under it cannot be freed meanwhile.
 *
 * The total cap spans sandboxes. It is enforced after the learning
 * sandbox's mutex is released: the victim is the sandbox whose oldest
 * binding is the oldest (read from its atomic oldest_ms), locked alone, so
 * no thread ever holds two sandbox mutexes. The total can exceed the cap
 * by at most one binding per concurrently learning thread, for the
 * duration of one call. */
#include "dnsguard/dnsguard_int.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define DG_ABUCKETS_MIN 64u

static uint64_t dg_addr_hash(const struct dnsguard *g, const struct pc_addr *a)
{
	uint8_t key[17];

	key[0] = a->family;
	memcpy(key + 1, a->a, 16);
	return dg_hash(g, key, a->family == AF_INET ? 5 : sizeof(key));
}

static struct dg_addr *dg_addr_find(const struct dg_sb *s, const struct pc_addr *a, uint64_t h)
{
	struct dg_addr *e;

	if (!s->abuckets)
		return NULL;
	for (e = s->abuckets[h & (s->nabuckets - 1)]; e; e = e->hnext)
		if (e->hash == h && pc_addr_eq(&e->addr, a))
			return e;
	return NULL;
}

/* Double the bucket array when the table is half full: short chains, since
 * each link is a likely cache miss in a large table. Failure to grow only
 * makes chains longer: not an error. */
static void dg_addr_grow(struct dg_sb *s)
{
	size_t n = s->nabuckets ? s->nabuckets * 2 : DG_ABUCKETS_MIN;
	struct dg_addr **nb;

	if (s->abuckets && s->naddrs * 2 <= s->nabuckets)
		return;
	nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	for (size_t i = 0; i < s->nabuckets; i++) {
		struct dg_addr *e = s->abuckets[i], *next;

		for (; e; e = next) {
			next = e->hnext;
			e->hnext = nb[e->hash & (n - 1)];
			nb[e->hash & (n - 1)] = e;
		}
	}
	free(s->abuckets);
	s->abuckets = nb;
	s->nabuckets = n;
}

static void dg_oldest_update(struct dg_sb *s)
{
	atomic_store_explicit(&s->oldest_ms, s->lru_head ? s->lru_head->learned_ms : UINT64_MAX,
			      memory_order_relaxed);
}

static void dg_lru_unlink(struct dg_sb *s, struct dg_bind *b)
{
	if (b->lprev)
		b->lprev->lnext = b->lnext;
	else
		s->lru_head = b->lnext;
	if (b->lnext)
		b->lnext->lprev = b->lprev;
	else
		s->lru_tail = b->lprev;
	b->lprev = b->lnext = NULL;
}

static void dg_lru_append(struct dg_sb *s, struct dg_bind *b)
{
	b->lprev = s->lru_tail;
	b->lnext = NULL;
	if (s->lru_tail)
		s->lru_tail->lnext = b;
	else
		s->lru_head = b;
	s->lru_tail = b;
}

/* Remove one binding, and its address when it was the last name. */
static void dg_bind_remove(struct dnsguard *g, struct dg_sb *s, struct dg_bind *b)
{
	struct dg_addr *e = b->addr;
	struct dg_bind **pp = &e->binds;

	while (*pp != b)
		pp = &(*pp)->anext;
	*pp = b->anext;
	e->nbinds--;
	dg_lru_unlink(s, b);
	free(b);
	s->nbinds--;
	atomic_fetch_sub_explicit(&g->learned, 1, memory_order_relaxed);
	if (!e->binds) {
		struct dg_addr **ep = &s->abuckets[e->hash & (s->nabuckets - 1)];

		while (*ep != e)
			ep = &(*ep)->hnext;
		*ep = e->hnext;
		free(e);
		s->naddrs--;
	}
}

/* Drop bindings whose grace has run out from the head of the learning
 * order. TTLs differ, so this is not every dead binding; the rest go when
 * their address is looked up or the caps push them out. A few per call
 * keeps the cost per call bounded. */
static void dg_reap(struct dnsguard *g, struct dg_sb *s, uint64_t now_ms)
{
	for (int i = 0; i < 4 && s->lru_head; i++) {
		struct dg_bind *b = s->lru_head;

		if (b->expires_ms + g->grace_ms > now_ms)
			break;
		dg_bind_remove(g, s, b);
	}
}

static void dg_evict_oldest(struct dnsguard *g, struct dg_sb *s)
{
	if (!s->lru_head)
		return;
	dg_bind_remove(g, s, s->lru_head);
	DG_INC(g, evicted);
}

/* Bring the total back under the cap: evict the globally oldest binding,
 * found by each sandbox's oldest_ms (O(sandboxes), never O(entries)).
 * g->dir held shared, no sandbox mutex held. */
static void dg_enforce_total(struct dnsguard *g)
{
	for (int round = 0; round < 64; round++) {
		struct dg_sb *victim = NULL;
		uint64_t best = UINT64_MAX;

		if (atomic_load_explicit(&g->learned, memory_order_relaxed) <= g->cap_total)
			return;
		for (size_t i = 0; i < DG_SB_BUCKETS; i++)
			for (struct dg_sb *s = g->sbs[i]; s; s = s->next) {
				uint64_t o =
				    atomic_load_explicit(&s->oldest_ms, memory_order_relaxed);
				if (o < best) {
					best = o;
					victim = s;
				}
			}
		if (!victim)
			return;
		pthread_mutex_lock(&victim->mu);
		dg_evict_oldest(g, victim);
		dg_oldest_update(victim);
		pthread_mutex_unlock(&victim->mu);
	}
}

int dg_learn(struct dnsguard *g, struct dg_sb *s, const struct pc_addr *addr, const char *name,
	     uint64_t expires_ms, uint64_t now_ms)
{
	uint64_t h = dg_addr_hash(g, addr);
	size_t nlen = strlen(name);
	struct dg_addr *e;
	struct dg_bind *b;
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	dg_reap(g, s, now_ms);
	e = dg_addr_find(s, addr, h);
	if (e) {
		for (b = e->binds; b; b = b->anext)
			if (strcmp(b->name, name) == 0)
				break;
		if (b) { /* learned again: refresh, and it is now the newest */
			if (expires_ms > b->expires_ms)
				b->expires_ms = expires_ms;
			b->learned_ms = now_ms;
			dg_lru_unlink(s, b);
			dg_lru_append(s, b);
			goto out;
		}
		if (e->nbinds >= DG_NAMES_PER_ADDR) { /* keep lookups bounded */
			struct dg_bind *old = e->binds;

			for (b = e->binds; b; b = b->anext)
				if (b->learned_ms < old->learned_ms)
					old = b;
			dg_bind_remove(g, s, old); /* e keeps its other names */
			DG_INC(g, evicted);
		}
	}
	if (!e) {
		dg_addr_grow(s);
		if (!s->abuckets) {
			rc = PC_ENOMEM;
			goto out;
		}
		e = calloc(1, sizeof(*e));
		if (!e) {
			rc = PC_ENOMEM;
			goto out;
		}
		e->hash = h;
		e->addr = *addr;
		e->hnext = s->abuckets[h & (s->nabuckets - 1)];
		s->abuckets[h & (s->nabuckets - 1)] = e;
		s->naddrs++;
	}
	b = calloc(1, sizeof(*b) + nlen + 1);
	if (!b) {
		if (!e->binds) { /* do not leave an empty address behind */
			struct dg_addr **ep = &s->abuckets[h & (s->nabuckets - 1)];

			while (*ep != e)
				ep = &(*ep)->hnext;
			*ep = e->hnext;
			free(e);
			s->naddrs--;
		}
		rc = PC_ENOMEM;
		goto out;
	}
	memcpy(b->name, name, nlen + 1);
	b->addr = e;
	b->learned_ms = now_ms;
	b->expires_ms = expires_ms;
	b->anext = e->binds;
	e->binds = b;
	e->nbinds++;
	dg_lru_append(s, b);
	s->nbinds++;
	atomic_fetch_add_explicit(&g->learned, 1, memory_order_relaxed);
	while (s->nbinds > g->cap_sb)
		dg_evict_oldest(g, s);
out:
	dg_oldest_update(s);
	pthread_mutex_unlock(&s->mu);
	if (rc == 0)
		dg_enforce_total(g);
	return rc;
}

void dg_learn_clear(struct dnsguard *g, struct dg_sb *s)
{
	while (s->lru_head)
		dg_bind_remove(g, s, s->lru_head);
	free(s->abuckets);
	s->abuckets = NULL;
	s->nabuckets = 0;
	dg_oldest_update(s);
}

/* The live names of (sandbox, dst), most recently learned first, copied out
 * so that policy lookups run without the mutex. Dead bindings met on the
 * way are removed. Returns how many were copied. */
static size_t dg_names_copy(struct dnsguard *g, const char *sb_name, const struct pc_addr *dst,
			    uint64_t now_ms, bool with_grace, char (*names)[POLICY_HOST_MAX])
{
	struct dg_bind *order[DG_NAMES_PER_ADDR];
	struct dg_addr *e;
	struct dg_sb *s;
	bool enomem;
	size_t n = 0;

	if (!dst || (dst->family != AF_INET && dst->family != AF_INET6))
		return 0;
	s = dg_sb_get(g, sb_name, false, &enomem);
	if (!s)
		return 0;
	pthread_mutex_lock(&s->mu);
	e = dg_addr_find(s, dst, dg_addr_hash(g, dst));
	if (e) {
		struct dg_bind *b = e->binds, *next;

		for (; b; b = next) {
			next = b->anext;
			if (b->expires_ms + g->grace_ms <= now_ms) {
				bool last = e->nbinds == 1;

				dg_bind_remove(g, s, b);
				if (last)
					break; /* e is gone */
				continue;
			}
			if (!with_grace && b->expires_ms <= now_ms)
				continue;
			if (n < DG_NAMES_PER_ADDR)
				order[n++] = b;
		}
		/* newest first: a small insertion sort over <= 16 entries */
		for (size_t i = 1; i < n; i++)
			for (size_t j = i; j > 0 && order[j]->learned_ms > order[j - 1]->learned_ms;
			     j--) {
				struct dg_bind *t = order[j];

				order[j] = order[j - 1];
				order[j - 1] = t;
			}
		for (size_t i = 0; i < n; i++)
			pc_strlcpy(names[i], order[i]->name, POLICY_HOST_MAX);
	}
	dg_oldest_update(s);
	pthread_mutex_unlock(&s->mu);
	pthread_rwlock_unlock(&g->dir);
	return n;
}

int dnsguard_flow(struct dnsguard *g, const struct policy_sandbox *sb, const struct pc_addr *dst,
		  uint8_t proto, uint16_t port, bool existing, uint64_t now_ms,
		  struct dnsguard_flow_res *res)
{
	char names[DG_NAMES_PER_ADDR][POLICY_HOST_MAX];
	const struct policy_allow *rule = NULL;
	size_t n, pick = SIZE_MAX;
	bool vault = false;

	if (!res)
		return PC_EINVAL;
	memset(res, 0, sizeof(*res));
	if (!g || !sb || !dst) {
		res->reason = "sender is not a sandbox";
		return 0;
	}
	n = dg_names_copy(g, sb->name, dst, now_ms, existing, names);
	if (n == 0) {
		res->reason = "no allowed name resolved to this address";
		return 0;
	}
	/* Any learned name allowed on this port lets the flow through; a name
	 * bound to a secret wins, so that the flow goes to the vault, which
	 * then checks SNI, Host and destination itself. */
	for (size_t i = 0; i < n; i++) {
		const struct policy_allow *r = NULL;

		if (!policy_host_allows(sb, names[i], proto, port, &r))
			continue;
		if (pick == SIZE_MAX) {
			pick = i;
			rule = r;
		}
		if (proto == IPPROTO_TCP && policy_secret_for(sb, names[i], port)) {
			pick = i;
			rule = r;
			vault = true;
			break;
		}
	}
	if (pick == SIZE_MAX) {
		res->reason = "names resolved to this address are not allowed on this port";
		return 0;
	}
	res->allowed = true;
	res->vault = vault;
	res->rule = rule;
	pc_strlcpy(res->name, names[pick], sizeof(res->name));
	res->reason =
	    vault ? "resolved name bound to a secret: to the vault" : "resolved name allowed";
	return 0;
}

bool dnsguard_sni_allowed(struct dnsguard *g, const struct policy_sandbox *sb,
			  const struct pc_addr *dst, uint8_t proto, uint16_t port, const char *sni,
			  uint64_t now_ms, const struct policy_allow **rule)
{
	char names[DG_NAMES_PER_ADDR][POLICY_HOST_MAX];
	struct pc_host want;
	size_t n;

	/* The same grammar tls_clienthello_sni and the vault apply to a
	 * server name (common/hostname.c). */
	if (!g || !sb || !dst || !sni || pc_host_parse_str(sni, PC_HOST_SNI, &want, NULL) < 0)
		return false;
	/* The flow was admitted at its SYN; its ClientHello comes a moment
	 * later, so a binding that expired in between still counts (grace). */
	n = dg_names_copy(g, sb->name, dst, now_ms, true, names);
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], want.name) == 0)
			return policy_host_allows(sb, want.name, proto, port, rule);
	return false;
}

size_t dnsguard_names(struct dnsguard *g, const char *sb_name, const struct pc_addr *dst,
		      uint64_t now_ms, char *buf, size_t len)
{
	char names[DG_NAMES_PER_ADDR][POLICY_HOST_MAX];
	size_t n, used = 0, shown = 0;

	if (buf && len)
		buf[0] = '\0';
	if (!g || !sb_name)
		return 0;
	n = dg_names_copy(g, sb_name, dst, now_ms, true, names);
	if (!buf || !len)
		return n;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(names[i]) + (shown ? 1 : 0);

		if (used + l + 1 > len)
			break; /* whole names only */
		if (shown)
			buf[used++] = ',';
		memcpy(buf + used, names[i], strlen(names[i]) + 1);
		used += strlen(names[i]);
		shown++;
	}
	return shown;
}
