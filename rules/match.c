/* The questions the engine, DNS guard and vault ask of a compiled policy,
 * per packet or query: which sandbox sent this, may it reach that name or
 * address on this port, which secret is bound there. Costs depend on the
 * length of the name or address, not on the number of entries. */
#include "rules/rules_int.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Whether allow entry a permits proto/port. */
static bool policy_allow_port(const struct policy_allow *a, uint8_t proto, uint16_t port)
{
	unsigned bit = proto == IPPROTO_TCP   ? POLICY_PROTO_TCP
		       : proto == IPPROTO_UDP ? POLICY_PROTO_UDP
					      : 0;
	size_t lo = 0, hi = a->n_ports;

	if (!(a->proto & bit))
		return false;
	/* Ranges are sorted and disjoint (policy_parse.c). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (port < a->ports[mid].lo)
			hi = mid;
		else if (port > a->ports[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

bool policy_allow_name_match(const struct policy_allow *a, const char *name)
{
	char n[POLICY_HOST_MAX];
	size_t nl, sl;

	if (!a || !rules_query_normalize(name, n, sizeof(n)))
		return false;
	if (a->kind == POLICY_ALLOW_HOST)
		return strcmp(n, a->host) == 0;
	if (a->kind != POLICY_ALLOW_WILDCARD)
		return false;
	nl = strlen(n);
	sl = strlen(a->host);
	/* One label or more before the suffix: "x.example.com" for
	 * "*.example.com", never "example.com" itself. */
	return nl > sl + 1 && n[nl - sl - 1] == '.' && strcmp(n + nl - sl, a->host) == 0;
}

/* The best (first in file order) entry seen so far. */
struct best {
	const struct policy_sandbox *sb;
	uint8_t proto;
	uint16_t port;
	bool any_port; /* policy_name_allowed: ports do not matter */
	uint32_t idx;  /* UINT32_MAX: none */
};

/* policy_allow_port, from the packed copy when there is one. */
static bool best_port_ok(const struct best *b, uint32_t v)
{
	const struct policy_index *ix = b->sb->index;
	unsigned bit;

	if (!ix || !ix->fast[v].one)
		return policy_allow_port(&b->sb->allow[v], b->proto, b->port);
	bit = b->proto == IPPROTO_TCP	? POLICY_PROTO_TCP
	      : b->proto == IPPROTO_UDP ? POLICY_PROTO_UDP
					: 0;
	return (ix->fast[v].proto & bit) && b->port >= ix->fast[v].lo && b->port <= ix->fast[v].hi;
}

static void best_offer(struct best *b, uint32_t v)
{
	if (v < b->idx && (b->any_port || best_port_ok(b, v)))
		b->idx = v;
}

static void best_list(struct best *b, const uint32_t *v, uint32_t n)
{
	/* Values of one key ascend: the first that fits is the best of them. */
	for (uint32_t k = 0; v && k < n && v[k] < b->idx; k++) {
		best_offer(b, v[k]);
		if (b->idx == v[k])
			return;
	}
}

static bool best_result(const struct best *b, const struct policy_allow **rule)
{
	if (b->idx == UINT32_MAX)
		return false;
	if (rule)
		*rule = &b->sb->allow[b->idx];
	return true;
}

static bool cidr_visit(uint32_t v, void *arg)
{
	best_offer(arg, v);
	return false; /* a longer prefix may still hold an earlier entry */
}

static bool cidr_best(struct best *b, const struct pc_addr *dst, const struct policy_allow **rule)
{
	const struct policy_sandbox *sb = b->sb;

	if (!sb || !dst || (dst->family != AF_INET && dst->family != AF_INET6))
		return false;
	if (!sb->index) {
		for (size_t i = 0; i < sb->n_allow && b->idx == UINT32_MAX; i++)
			if (sb->allow[i].kind == POLICY_ALLOW_CIDR &&
			    pc_prefix_contains(&sb->allow[i].cidr, dst))
				best_offer(b, (uint32_t)i);
		return best_result(b, rule);
	}
	ptrie_walk(dst->family == AF_INET ? &sb->index->cidr4 : &sb->index->cidr6, dst->a,
		   cidr_visit, b);
	return best_result(b, rule);
}

bool policy_cidr_covers(const struct policy_sandbox *sb, const struct pc_addr *dst,
			const struct policy_allow **rule)
{
	struct best b = {sb, 0, 0, true, UINT32_MAX};

	return cidr_best(&b, dst, rule);
}

bool policy_cidr_allows(const struct policy_sandbox *sb, const struct pc_addr *dst, uint8_t proto,
			uint16_t port, const struct policy_allow **rule)
{
	struct best b = {sb, proto, port, false, UINT32_MAX};

	if (!sb || !dst || (dst->family != AF_INET && dst->family != AF_INET6))
		return false;
	if (!sb->index) {
		for (size_t i = 0; i < sb->n_allow && b.idx == UINT32_MAX; i++)
			if (sb->allow[i].kind == POLICY_ALLOW_CIDR &&
			    pc_prefix_contains(&sb->allow[i].cidr, dst))
				best_offer(&b, (uint32_t)i);
		return best_result(&b, rule);
	}
	ptrie_walk(dst->family == AF_INET ? &sb->index->cidr4 : &sb->index->cidr6, dst->a,
		   cidr_visit, &b);
	return best_result(&b, rule);
}

static bool host_lookup(struct best *b, const char *name, const struct policy_allow **rule)
{
	const struct policy_index *ix = b->sb->index;
	char n[POLICY_HOST_MAX];
	uint32_t h = PC_FNV1A_INIT, cnt = 0;
	const uint32_t *v;
	size_t len;

	if (!rules_query_normalize(name, n, sizeof(n)))
		return false;
	if (!ix) {
		for (size_t i = 0; i < b->sb->n_allow && b->idx == UINT32_MAX; i++)
			if (policy_allow_name_match(&b->sb->allow[i], n))
				best_offer(b, (uint32_t)i);
		return best_result(b, rule);
	}
	len = strlen(n);
	/* One right-to-left pass hashes every suffix; a suffix that starts
	 * after a dot may be a wildcard's. */
	for (size_t i = len; i-- > 0;) {
		h = pc_fnv1a_step(h, (unsigned char)n[i]);
		if (i > 0 && n[i - 1] == '.') {
			v = strmap_find(&ix->wild, n + i, len - i, h, &cnt);
			best_list(b, v, cnt);
		}
	}
	v = strmap_find(&ix->exact, n, len, h, &cnt);
	best_list(b, v, cnt);
	return best_result(b, rule);
}

bool policy_host_allows(const struct policy_sandbox *sb, const char *name, uint8_t proto,
			uint16_t port, const struct policy_allow **rule)
{
	struct best b = {sb, proto, port, false, UINT32_MAX};

	return sb && name && host_lookup(&b, name, rule);
}

bool policy_name_allowed(const struct policy_sandbox *sb, const char *name,
			 const struct policy_allow **rule)
{
	struct best b = {sb, 0, 0, true, UINT32_MAX};

	return sb && name && host_lookup(&b, name, rule);
}

const struct policy_secret *policy_secret_for(const struct policy_sandbox *sb, const char *host,
					      uint16_t port)
{
	char n[POLICY_HOST_MAX];
	const uint32_t *v;
	uint32_t cnt = 0;

	if (!sb || !rules_query_normalize(host, n, sizeof(n)))
		return NULL;
	if (!sb->index) {
		for (size_t i = 0; i < sb->n_secrets; i++)
			if (sb->secrets[i].port == port && strcmp(sb->secrets[i].host, n) == 0)
				return &sb->secrets[i];
		return NULL;
	}
	v = strmap_find(&sb->index->secret_host, n, strlen(n), strmap_hash(n, strlen(n)), &cnt);
	for (uint32_t k = 0; v && k < cnt; k++)
		if (sb->secrets[v[k]].port == port)
			return &sb->secrets[v[k]];
	return NULL;
}

static int secret_name_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct policy_secret *)elem)->name);
}

const struct policy_secret *policy_secret_by_name(const struct policy_sandbox *sb, const char *name)
{
	if (!sb || !name || !sb->n_secrets)
		return NULL; /* bsearch on a NULL array is undefined even for zero elements */
	if (sb->index)	     /* compiled secrets are sorted by name */
		return bsearch(name, sb->secrets, sb->n_secrets, sizeof(*sb->secrets),
			       secret_name_cmp);
	for (size_t i = 0; i < sb->n_secrets; i++)
		if (strcmp(sb->secrets[i].name, name) == 0)
			return &sb->secrets[i];
	return NULL;
}

/* ---- sandbox selection ---------------------------------------------------------- */

/* Whether a sandbox's selector matches src (every given field). */
static bool policy_match_src(const struct policy_match *m, const struct policy_src *src)
{
	bool any = false;

	if (m->n_sources) {
		size_t i;

		for (i = 0; i < m->n_sources; i++)
			if (pc_prefix_contains(&m->sources[i], &src->addr))
				break;
		if (i == m->n_sources)
			return false;
		any = true;
	}
	if (m->has_mac) {
		if (!src->has_mac || memcmp(m->mac, src->mac, 6) != 0)
			return false;
		any = true;
	}
	if (m->port[0]) {
		if (strncmp(m->port, src->port, sizeof(m->port)) != 0)
			return false;
		any = true;
	}
	return any; /* an empty selector matches nothing: fail closed */
}

struct sel {
	const struct policy *p;
	const struct policy_src *src;
	uint32_t found; /* UINT32_MAX: none */
};

static void sel_offer(struct sel *s, uint32_t i)
{
	if (i < s->found && policy_match_src(&s->p->sb[i].match, s->src))
		s->found = i;
}

static bool sel_visit(uint32_t v, void *arg)
{
	sel_offer(arg, v);
	return false;
}

struct bysrc {
	const struct policy *p;
	const struct pc_addr *a;
	uint32_t found; /* UINT32_MAX: none */
	bool many;
};

static bool bysrc_visit(uint32_t v, void *arg)
{
	struct bysrc *b = arg;
	const struct policy_match *m = &b->p->sb[v].match;
	size_t i;

	for (i = 0; i < m->n_sources && !pc_prefix_contains(&m->sources[i], b->a); i++) {
	}
	if (i == m->n_sources || v == b->found)
		return false;
	if (b->found != UINT32_MAX)
		b->many = true;
	b->found = v;
	return b->many;
}

const struct policy_sandbox *policy_sandbox_by_source(const struct policy *p,
						      const struct pc_addr *addr)
{
	struct bysrc b = {p, addr, UINT32_MAX, false};

	if (!p || !addr)
		return NULL;
	if (addr->family == AF_INET)
		ptrie_walk(&p->src4, addr->a, bysrc_visit, &b);
	else if (addr->family == AF_INET6)
		ptrie_walk(&p->src6, addr->a, bysrc_visit, &b);
	return b.found == UINT32_MAX || b.many ? NULL : &p->sb[b.found];
}

struct fromsrc {
	const struct policy *p;
	const struct pc_addr *a;
	size_t from;
	uint32_t found; /* UINT32_MAX: none */
};

static bool fromsrc_visit(uint32_t v, void *arg)
{
	struct fromsrc *f = arg;
	const struct policy_match *m = &f->p->sb[v].match;
	size_t i;

	if (v < f->from || v >= f->found)
		return false;
	for (i = 0; i < m->n_sources && !pc_prefix_contains(&m->sources[i], f->a); i++) {
	}
	if (i < m->n_sources)
		f->found = v;
	return false; /* a longer prefix may belong to an earlier sandbox */
}

const struct policy_sandbox *policy_sandbox_by_addr_from(const struct policy *p,
							 const struct pc_addr *addr, size_t *from)
{
	struct fromsrc f = {p, addr, 0, UINT32_MAX};

	if (!p || !addr || !from)
		return NULL;
	f.from = *from;
	if (addr->family == AF_INET)
		ptrie_walk(&p->src4, addr->a, fromsrc_visit, &f);
	else if (addr->family == AF_INET6)
		ptrie_walk(&p->src6, addr->a, fromsrc_visit, &f);
	if (f.found == UINT32_MAX) {
		*from = p->n_sb;
		return NULL;
	}
	*from = (size_t)f.found + 1;
	return &p->sb[f.found];
}

const struct policy_sandbox *policy_sandbox_match(const struct policy *p,
						  const struct policy_src *src)
{
	struct sel s = {p, src, UINT32_MAX};
	const uint32_t *v;
	uint32_t cnt = 0;

	if (!p || !src)
		return NULL;
	/* Selectors never overlap (policy_check.c), so at most one matches;
	 * taking the lowest index keeps the answer defined regardless. */
	if (src->addr.family == AF_INET)
		ptrie_walk(&p->src4, src->addr.a, sel_visit, &s);
	else if (src->addr.family == AF_INET6)
		ptrie_walk(&p->src6, src->addr.a, sel_visit, &s);
	if (src->has_mac) {
		char key[13];
		static const char hex[] = "0123456789abcdef";

		for (int i = 0; i < 6; i++) {
			key[2 * i] = hex[src->mac[i] >> 4];
			key[2 * i + 1] = hex[src->mac[i] & 15];
		}
		key[12] = '\0';
		v = strmap_find(&p->by_mac, key, 12, strmap_hash(key, 12), &cnt);
		for (uint32_t k = 0; v && k < cnt; k++)
			sel_offer(&s, v[k]);
	}
	if (src->port[0]) {
		size_t len = strnlen(src->port, sizeof(src->port));

		v = strmap_find(&p->by_port, src->port, len, strmap_hash(src->port, len), &cnt);
		for (uint32_t k = 0; v && k < cnt; k++)
			sel_offer(&s, v[k]);
	}
	return s.found == UINT32_MAX ? NULL : &p->sb[s.found];
}
