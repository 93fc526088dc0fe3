/* The lookup structures behind the matchers: a static hash map from names
 * to entry lists, and a binary trie of prefixes. Both are built once per
 * policy and only read afterwards, so lookups take no lock. */
#include "rules/rules_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* ---- strmap ---------------------------------------------------------------- */

uint32_t strmap_hash(const char *s, size_t len)
{
	uint32_t h = PC_FNV1A_INIT;

	while (len--)
		h = pc_fnv1a_step(h, (unsigned char)s[len]);
	return h;
}

static int strmap_pair_cmp(const void *x, const void *y)
{
	const struct strmap_pair *a = x, *b = y;
	int c = strcmp(a->key, b->key);

	return c ? c : (a->val > b->val) - (a->val < b->val);
}

/* Build from pairs (reordered in place); values of a key keep ascending
 * order. Everything is allocated in a. */
static int strmap_build(struct strmap *m, struct strmap_pair *pairs, size_t n, struct arena *a)
{
	size_t ng = 0, slots = 8;

	memset(m, 0, sizeof(*m));
	if (n == 0)
		return 0;
	if (n > UINT32_MAX / 4)
		return PC_EINVAL;
	qsort(pairs, n, sizeof(*pairs), strmap_pair_cmp);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || strcmp(pairs[i].key, pairs[i - 1].key))
			ng++;
	while (slots < ng * 2) /* load <= 1/2 keeps probe runs short */
		slots *= 2;
	m->groups = arena_calloc(a, ng, sizeof(*m->groups));
	m->vals = arena_calloc(a, n, sizeof(*m->vals));
	m->slots = arena_calloc(a, slots, sizeof(*m->slots));
	if (!m->groups || !m->vals || !m->slots)
		return PC_ENOMEM;
	m->mask = slots - 1;
	for (size_t i = 0, g = 0; i < n; i++) {
		struct strmap_group *gr;

		m->vals[i] = pairs[i].val;
		if (i && strcmp(pairs[i].key, pairs[i - 1].key) == 0) {
			m->groups[g - 1].count++;
			continue;
		}
		gr = &m->groups[g++];
		gr->len = strlen(pairs[i].key);
		gr->key = arena_strndup(a, pairs[i].key, gr->len);
		if (!gr->key)
			return PC_ENOMEM;
		gr->first = (uint32_t)i;
		gr->count = 1;
		gr->val0 = pairs[i].val;
	}
	m->n_groups = ng;
	for (size_t g = 0; g < ng; g++) {
		uint32_t h = strmap_hash(m->groups[g].key, m->groups[g].len);
		size_t s = h & m->mask;

		while (m->slots[s].group)
			s = (s + 1) & m->mask;
		m->slots[s] = (struct strmap_slot){h, (uint32_t)g + 1};
	}
	return 0;
}

const uint32_t *strmap_find(const struct strmap *m, const char *key, size_t len, uint32_t h,
			    uint32_t *count)
{
	if (!m->slots)
		return NULL;
	for (size_t s = h & m->mask; m->slots[s].group; s = (s + 1) & m->mask) {
		const struct strmap_group *g;

		if (m->slots[s].hash != h)
			continue;
		g = &m->groups[m->slots[s].group - 1];
		if (g->len == len && memcmp(g->key, key, len) == 0) {
			*count = g->count;
			return g->count == 1 ? &g->val0 : &m->vals[g->first];
		}
	}
	return NULL;
}

/* ---- ptrie ------------------------------------------------------------------- */

static int ptrie_pair_cmp(const void *x, const void *y)
{
	const struct ptrie_pair *a = x, *b = y;
	int c = memcmp(a->pfx.addr.a, b->pfx.addr.a, 16);

	if (c)
		return c;
	if (a->pfx.len != b->pfx.len)
		return a->pfx.len < b->pfx.len ? -1 : 1;
	return (a->val > b->val) - (a->val < b->val);
}

static unsigned addr_bit(const uint8_t *a, unsigned i)
{
	return (a[i / 8] >> (7 - i % 8)) & 1;
}

/* Build from pairs of one family (reordered in place). */
static int ptrie_build(struct ptrie *t, unsigned bits, struct ptrie_pair *pairs, size_t n,
		       struct arena *a)
{
	struct ptrie_node *nodes = NULL;
	size_t nn = 1, cap = 64;
	int rc = PC_ENOMEM;

	memset(t, 0, sizeof(*t));
	t->bits = bits;
	if (n == 0)
		return 0;
	if (n > UINT32_MAX / 256)
		return PC_EINVAL;
	qsort(pairs, n, sizeof(*pairs), ptrie_pair_cmp);
	t->vals = arena_calloc(a, n, sizeof(*t->vals));
	nodes = calloc(cap, sizeof(*nodes));
	if (!t->vals || !nodes)
		goto out;
	for (size_t i = 0; i < n; i++) {
		uint32_t cur = 0;

		for (unsigned d = 0; d < pairs[i].pfx.len && d < bits; d++) {
			unsigned bit = addr_bit(pairs[i].pfx.addr.a, d);

			if (!nodes[cur].child[bit]) {
				if (nn == cap) {
					struct ptrie_node *nb =
					    realloc(nodes, 2 * cap * sizeof(*nb));

					if (!nb)
						goto out;
					memset(nb + cap, 0, cap * sizeof(*nb));
					nodes = nb;
					cap *= 2;
				}
				nodes[cur].child[bit] = (uint32_t)nn++;
			}
			cur = nodes[cur].child[bit];
		}
		/* Equal prefixes are adjacent after the sort, so a node's
		 * values are one run of vals, in ascending order. */
		if (!nodes[cur].count)
			nodes[cur].first = (uint32_t)i;
		nodes[cur].count++;
		t->vals[i] = pairs[i].val;
	}
	t->nodes = arena_calloc(a, nn, sizeof(*t->nodes));
	if (!t->nodes)
		goto out;
	memcpy(t->nodes, nodes, nn * sizeof(*nodes));
	t->n_nodes = nn;
	rc = 0;
out:
	free(nodes);
	return rc;
}

void ptrie_walk(const struct ptrie *t, const uint8_t *addr, bool (*visit)(uint32_t val, void *arg),
		void *arg)
{
	uint32_t cur = 0;

	if (!t->n_nodes)
		return;
	for (unsigned d = 0;; d++) {
		const struct ptrie_node *nd = &t->nodes[cur];

		for (uint32_t k = 0; k < nd->count; k++)
			if (visit(t->vals[nd->first + k], arg))
				return;
		if (d >= t->bits || !nd->child[addr_bit(addr, d)])
			return;
		cur = nd->child[addr_bit(addr, d)];
	}
}

/* ---- the policy's indexes ------------------------------------------------------ */

int policy_sandbox_index(struct policy_sandbox *sb, struct arena *a)
{
	struct policy_index *ix = arena_alloc(a, sizeof(*ix));
	size_t n = sb->n_allow, ne = 0, nw = 0, n4 = 0, n6 = 0;
	struct strmap_pair *ex = calloc(n + 1, sizeof(*ex)), *wi = calloc(n + 1, sizeof(*wi));
	struct strmap_pair *se = calloc(sb->n_secrets + 1, sizeof(*se));
	struct ptrie_pair *c4 = calloc(n + 1, sizeof(*c4)), *c6 = calloc(n + 1, sizeof(*c6));
	int rc = PC_ENOMEM;

	if (!ix || !ex || !wi || !se || !c4 || !c6)
		goto out;
	ix->fast = arena_calloc(a, n ? n : 1, sizeof(*ix->fast));
	if (!ix->fast)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct policy_allow *al = &sb->allow[i];

		ix->fast[i].proto = (uint8_t)al->proto;
		if (al->n_ports == 1) {
			ix->fast[i].one = 1;
			ix->fast[i].lo = al->ports[0].lo;
			ix->fast[i].hi = al->ports[0].hi;
		}

		if (al->kind == POLICY_ALLOW_HOST)
			ex[ne++] = (struct strmap_pair){al->host, (uint32_t)i};
		else if (al->kind == POLICY_ALLOW_WILDCARD)
			wi[nw++] = (struct strmap_pair){al->host, (uint32_t)i};
		else if (al->cidr.addr.family == AF_INET)
			c4[n4++] = (struct ptrie_pair){al->cidr, (uint32_t)i};
		else
			c6[n6++] = (struct ptrie_pair){al->cidr, (uint32_t)i};
	}
	for (size_t i = 0; i < sb->n_secrets; i++)
		se[i] = (struct strmap_pair){sb->secrets[i].host, (uint32_t)i};
	if ((rc = strmap_build(&ix->exact, ex, ne, a)) ||
	    (rc = strmap_build(&ix->wild, wi, nw, a)) ||
	    (rc = strmap_build(&ix->secret_host, se, sb->n_secrets, a)) ||
	    (rc = ptrie_build(&ix->cidr4, 32, c4, n4, a)) ||
	    (rc = ptrie_build(&ix->cidr6, 128, c6, n6, a)))
		goto out;
	sb->index = ix;
out:
	free(ex);
	free(wi);
	free(se);
	free(c4);
	free(c6);
	return rc;
}

int policy_index_build(struct policy *p)
{
	size_t n4 = 0, n6 = 0, nm = 0, np = 0, total = 0;
	struct ptrie_pair *s4, *s6;
	struct strmap_pair *mac, *port;
	char(*mackeys)[13];
	int rc = PC_ENOMEM;

	for (size_t i = 0; i < p->n_sb; i++)
		total += p->sb[i].match.n_sources;
	s4 = calloc(total + 1, sizeof(*s4));
	s6 = calloc(total + 1, sizeof(*s6));
	mac = calloc(p->n_sb + 1, sizeof(*mac));
	port = calloc(p->n_sb + 1, sizeof(*port));
	mackeys = calloc(p->n_sb + 1, sizeof(*mackeys));
	if (!s4 || !s6 || !mac || !port || !mackeys)
		goto out;
	for (size_t i = 0; i < p->n_sb; i++) {
		const struct policy_match *m = &p->sb[i].match;

		for (size_t j = 0; j < m->n_sources; j++) {
			if (m->sources[j].addr.family == AF_INET)
				s4[n4++] = (struct ptrie_pair){m->sources[j], (uint32_t)i};
			else
				s6[n6++] = (struct ptrie_pair){m->sources[j], (uint32_t)i};
		}
		/* Without a source, a sandbox is found by its mac, else its port. */
		if (m->n_sources)
			continue;
		if (m->has_mac) {
			snprintf(mackeys[nm], sizeof(mackeys[nm]), "%02x%02x%02x%02x%02x%02x",
				 m->mac[0], m->mac[1], m->mac[2], m->mac[3], m->mac[4], m->mac[5]);
			mac[nm] = (struct strmap_pair){mackeys[nm], (uint32_t)i};
			nm++;
		} else if (m->port[0]) {
			port[np++] = (struct strmap_pair){m->port, (uint32_t)i};
		}
	}
	if ((rc = ptrie_build(&p->src4, 32, s4, n4, &p->arena)) ||
	    (rc = ptrie_build(&p->src6, 128, s6, n6, &p->arena)) ||
	    (rc = strmap_build(&p->by_mac, mac, nm, &p->arena)) ||
	    (rc = strmap_build(&p->by_port, port, np, &p->arena)))
		goto out;
out:
	free(s4);
	free(s6);
	free(mac);
	free(port);
	free(mackeys);
	return rc;
}
