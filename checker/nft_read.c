/* checker: read the whole nftables ruleset of this network namespace over
 * netlink (libmnl + libnftnl) — tables, chains, rules, sets with their
 * elements, objects — as one consistent generation. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/gen.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include "checker/checker_int.h"

const char *ck_family_name(uint32_t family)
{
	switch (family) {
	case NFPROTO_INET:
		return "inet";
	case NFPROTO_IPV4:
		return "ip";
	case NFPROTO_IPV6:
		return "ip6";
	case NFPROTO_BRIDGE:
		return "bridge";
	case NFPROTO_NETDEV:
		return "netdev";
	case NFPROTO_ARP:
		return "arp";
	default:
		return "unknown";
	}
}

const char *ck_hook_name(uint32_t family, uint32_t hook)
{
	static const char *inet[] = {"prerouting", "input",	  "forward",
				     "output",	   "postrouting", "ingress"};
	static const char *br[] = {"prerouting", "input", "forward", "output", "postrouting"};
	static const char *arp[] = {"input", "output", "forward"};

	switch (family) {
	case NFPROTO_NETDEV:
		return hook == 0 ? "ingress" : hook == 1 ? "egress" : "?";
	case NFPROTO_BRIDGE:
		return hook < 5 ? br[hook] : "?";
	case NFPROTO_ARP:
		return hook < 3 ? arp[hook] : "?";
	default:
		return hook < 6 ? inet[hook] : "?";
	}
}

const struct ck_chain *ck_chain_find(const struct ck_ruleset *rs, uint32_t family,
				     const char *table, const char *name)
{
	for (size_t i = 0; i < rs->n_chains; i++) {
		const struct ck_chain *c = &rs->chains[i];

		if (c->family == family && strcmp(c->table, table) == 0 &&
		    strcmp(c->name, name) == 0)
			return c;
	}
	return NULL;
}

static int set_key_cmp(uint32_t family, const char *table, const char *name, const struct ck_set *b)
{
	int c;

	if (family != b->family)
		return family < b->family ? -1 : 1;
	c = strcmp(table, b->table);
	return c ? c : strcmp(name, b->name);
}

/* Equal keys in sets[] order: the first of them is what a scan finds. */
static int set_sort_cmp(const void *a, const void *b, void *arg)
{
	const struct ck_ruleset *rs = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	const struct ck_set *sx = &rs->sets[x];
	int c = set_key_cmp(sx->family, sx->table, sx->name, &rs->sets[y]);

	return c ? c : (x < y ? -1 : x > y);
}

void ck_set_index(struct ck_ruleset *rs)
{
	size_t *ix;

	free(rs->set_idx);
	rs->set_idx = NULL;
	rs->n_set_idx = 0;
	if (!rs->n_sets)
		return;
	ix = malloc(rs->n_sets * sizeof(*ix));
	if (!ix)
		return;
	for (size_t i = 0; i < rs->n_sets; i++)
		ix[i] = i;
	qsort_r(ix, rs->n_sets, sizeof(*ix), set_sort_cmp, rs);
	rs->set_idx = ix;
	rs->n_set_idx = rs->n_sets;
}

/* The position in set_idx of the first set with this key (n_set_idx:
 * none); SIZE_MAX when there is no valid index. */
static size_t set_lower(const struct ck_ruleset *rs, uint32_t family, const char *table,
			const char *name)
{
	size_t lo = 0, hi;

	if (!rs->set_idx || rs->n_set_idx != rs->n_sets)
		return SIZE_MAX;
	hi = rs->n_set_idx;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (set_key_cmp(family, table, name, &rs->sets[rs->set_idx[mid]]) <= 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Call fn for every set with this key, in sets[] order. */
static void set_each(struct ck_ruleset *rs, uint32_t family, const char *table, const char *name,
		     void (*fn)(struct ck_set *s, void *arg), void *arg)
{
	size_t lo = set_lower(rs, family, table, name);

	if (lo == SIZE_MAX) {
		for (size_t i = 0; i < rs->n_sets; i++)
			if (set_key_cmp(family, table, name, &rs->sets[i]) == 0)
				fn(&rs->sets[i], arg);
		return;
	}
	for (; lo < rs->n_set_idx &&
	       set_key_cmp(family, table, name, &rs->sets[rs->set_idx[lo]]) == 0;
	     lo++)
		fn(&rs->sets[rs->set_idx[lo]], arg);
}

static void set_mark_written(struct ck_set *s, void *arg)
{
	(void)arg;
	s->written = true;
}

const struct ck_set *ck_set_find(const struct ck_ruleset *rs, uint32_t family, const char *table,
				 const char *name)
{
	size_t lo = set_lower(rs, family, table, name);

	if (lo != SIZE_MAX)
		return lo < rs->n_set_idx &&
			       set_key_cmp(family, table, name, &rs->sets[rs->set_idx[lo]]) == 0
			   ? &rs->sets[rs->set_idx[lo]]
			   : NULL;
	for (size_t i = 0; i < rs->n_sets; i++) {
		const struct ck_set *s = &rs->sets[i];

		if (s->family == family && strcmp(s->table, table) == 0 &&
		    strcmp(s->name, name) == 0)
			return s;
	}
	return NULL;
}

void ck_ruleset_free(struct ck_ruleset *rs)
{
	if (!rs)
		return;
	for (size_t i = 0; i < rs->n_tables; i++)
		if (rs->tables[i].nt)
			nftnl_table_free(rs->tables[i].nt);
	for (size_t i = 0; i < rs->n_chains; i++) {
		if (rs->chains[i].nc)
			nftnl_chain_free(rs->chains[i].nc);
		for (size_t j = 0; j < rs->chains[i].n_rules; j++)
			nftnl_rule_free(rs->chains[i].rules[j].r);
		free(rs->chains[i].rules);
		free(rs->chains[i].devs);
	}
	for (size_t i = 0; i < rs->n_sets; i++) {
		free(rs->sets[i].elems);
		if (rs->sets[i].ns)
			nftnl_set_free(rs->sets[i].ns);
	}
	free(rs->tables);
	free(rs->chains);
	free(rs->sets);
	free(rs->set_idx);
	free(rs->objs);
	free(rs->bad);
	memset(rs, 0, sizeof(*rs));
}

static void copy_str(char *dst, size_t n, const char *src)
{
	pc_strlcpy(dst, src ? src : "", n);
}

static int parse_table(struct ck_ruleset *rs, const struct nlmsghdr *nlh)
{
	struct nftnl_table *t = nftnl_table_alloc();
	struct ck_table *ct;
	int rc = PC_ENOMEM;

	if (!t)
		return PC_ENOMEM;
	if (nftnl_table_nlmsg_parse(nlh, t) < 0) {
		rc = PC_EPARSE;
		goto out;
	}
	ct = ck_grow(&rs->tables, &rs->n_tables, &rs->cap_tables, sizeof(*ct));
	if (!ct)
		goto out;
	ct->family = nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY);
	copy_str(ct->name, sizeof(ct->name), nftnl_table_get_str(t, NFTNL_TABLE_NAME));
	ct->flags = nftnl_table_get_u32(t, NFTNL_TABLE_FLAGS);
	ct->handle = nftnl_table_get_u64(t, NFTNL_TABLE_HANDLE);
	ct->nt = t;
	t = NULL;
	rc = 0;
out:
	if (t)
		nftnl_table_free(t);
	return rc;
}

static int parse_chain(struct ck_ruleset *rs, const struct nlmsghdr *nlh)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct ck_chain *cc;
	int rc = PC_ENOMEM;

	if (!c)
		return PC_ENOMEM;
	if (nftnl_chain_nlmsg_parse(nlh, c) < 0) {
		rc = PC_EPARSE;
		goto out;
	}
	cc = ck_grow(&rs->chains, &rs->n_chains, &rs->cap_chains, sizeof(*cc));
	if (!cc)
		goto out;
	cc->family = nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY);
	copy_str(cc->table, sizeof(cc->table), nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE));
	copy_str(cc->name, sizeof(cc->name), nftnl_chain_get_str(c, NFTNL_CHAIN_NAME));
	cc->handle = nftnl_chain_get_u64(c, NFTNL_CHAIN_HANDLE);
	cc->flags = nftnl_chain_get_u32(c, NFTNL_CHAIN_FLAGS);
	if (nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM)) {
		cc->base = true;
		cc->hook = nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM);
		cc->prio = nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO);
		/* A base chain without a policy attribute accepts (kernel default). */
		cc->policy = nftnl_chain_is_set(c, NFTNL_CHAIN_POLICY)
				 ? nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY)
				 : NF_ACCEPT;
		copy_str(cc->type, sizeof(cc->type), nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE));
	}
	if (nftnl_chain_is_set(c, NFTNL_CHAIN_DEV)) {
		cc->devs = calloc(1, sizeof(*cc->devs));
		if (!cc->devs)
			goto out;
		copy_str(cc->devs[0], 16, nftnl_chain_get_str(c, NFTNL_CHAIN_DEV));
		cc->n_devs = 1;
	} else if (nftnl_chain_is_set(c, NFTNL_CHAIN_DEVICES)) {
		const char *const *devs = nftnl_chain_get_array(c, NFTNL_CHAIN_DEVICES);
		size_t n = 0;

		while (devs && devs[n])
			n++;
		cc->devs = calloc(n ? n : 1, sizeof(*cc->devs));
		if (!cc->devs)
			goto out;
		for (size_t i = 0; i < n; i++)
			copy_str(cc->devs[i], 16, devs[i]);
		cc->n_devs = n;
	}
	cc->nc = c;
	c = NULL;
	rc = 0;
out:
	if (c)
		nftnl_chain_free(c);
	return rc;
}

/* NFTA_RULE_* of a message libnftnl refused, to name the rule anyway. */
static void bad_rule_names(const struct nlmsghdr *nlh, struct ck_badrule *b)
{
	const struct nfgenmsg *nfg = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;

	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*nfg))
		return;
	b->family = nfg->nfgen_family;
	mnl_attr_for_each(a, nlh, sizeof(*nfg))
	{
		switch (mnl_attr_get_type(a)) {
		case NFTA_RULE_TABLE:
			if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
				copy_str(b->table, sizeof(b->table), mnl_attr_get_str(a));
			break;
		case NFTA_RULE_CHAIN:
			if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
				copy_str(b->chain, sizeof(b->chain), mnl_attr_get_str(a));
			break;
		case NFTA_RULE_HANDLE:
			if (mnl_attr_validate(a, MNL_TYPE_U64) == 0)
				b->handle = be64toh(mnl_attr_get_u64(a));
			break;
		}
	}
}

/* Keep a note of a rule that could not be parsed: the analysis reports
 * it as unproven. */
static int bad_rule(struct ck_ruleset *rs, const struct nlmsghdr *nlh)
{
	struct ck_badrule *b = ck_grow(&rs->bad, &rs->n_bad, &rs->cap_bad, sizeof(*b));

	if (!b)
		return PC_ENOMEM;
	bad_rule_names(nlh, b);
	return 0;
}

static int parse_rule(struct ck_ruleset *rs, const struct nlmsghdr *nlh)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct ck_chain *owner = NULL;
	struct ck_rule *cr;
	const char *table, *chain;
	uint32_t fam;

	if (!r)
		return PC_ENOMEM;
	if (nftnl_rule_nlmsg_parse(nlh, r) < 0) {
		nftnl_rule_free(r);
		return bad_rule(rs, nlh);
	}
	fam = nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY);
	table = nftnl_rule_get_str(r, NFTNL_RULE_TABLE);
	chain = nftnl_rule_get_str(r, NFTNL_RULE_CHAIN);
	for (size_t i = 0; table && chain && i < rs->n_chains; i++) {
		struct ck_chain *c = &rs->chains[i];

		if (c->family == fam && strcmp(c->table, table) == 0 &&
		    strcmp(c->name, chain) == 0) {
			owner = c;
			break;
		}
	}
	if (!owner) {
		rs->n_orphans++;
		nftnl_rule_free(r);
		return 0;
	}
	cr = ck_grow(&owner->rules, &owner->n_rules, &owner->cap_rules, sizeof(*cr));
	if (!cr) {
		nftnl_rule_free(r);
		return PC_ENOMEM;
	}
	cr->r = r;
	cr->handle = nftnl_rule_get_u64(r, NFTNL_RULE_HANDLE);
	rs->n_rules++;
	return 0;
}

static int parse_set(struct ck_ruleset *rs, const struct nlmsghdr *nlh)
{
	struct nftnl_set *s = nftnl_set_alloc();
	struct ck_set *cs;
	int rc = PC_ENOMEM;

	if (!s)
		return PC_ENOMEM;
	if (nftnl_set_nlmsg_parse(nlh, s) < 0) {
		rc = PC_EPARSE;
		goto out;
	}
	cs = ck_grow(&rs->sets, &rs->n_sets, &rs->cap_sets, sizeof(*cs));
	if (!cs)
		goto out;
	cs->family = nftnl_set_get_u32(s, NFTNL_SET_FAMILY);
	copy_str(cs->table, sizeof(cs->table), nftnl_set_get_str(s, NFTNL_SET_TABLE));
	copy_str(cs->name, sizeof(cs->name), nftnl_set_get_str(s, NFTNL_SET_NAME));
	cs->flags = nftnl_set_get_u32(s, NFTNL_SET_FLAGS);
	cs->key_type = nftnl_set_get_u32(s, NFTNL_SET_KEY_TYPE);
	cs->key_len = nftnl_set_get_u32(s, NFTNL_SET_KEY_LEN);
	cs->data_type = nftnl_set_get_u32(s, NFTNL_SET_DATA_TYPE);
	cs->data_len = nftnl_set_get_u32(s, NFTNL_SET_DATA_LEN);
	cs->obj_type = nftnl_set_get_u32(s, NFTNL_SET_OBJ_TYPE);
	cs->handle = nftnl_set_get_u64(s, NFTNL_SET_HANDLE);
	cs->ns = s;
	s = NULL;
	rc = 0;
out:
	if (s)
		nftnl_set_free(s);
	return rc;
}

static void copy_blob(uint8_t *dst, uint32_t *dlen, const void *src, uint32_t len, bool *trunc)
{
	if (!src)
		return;
	if (len > CK_KEYMAX) {
		*trunc = true;
		len = CK_KEYMAX;
	}
	memcpy(dst, src, len);
	*dlen = len;
}

static int parse_setelems(struct ck_ruleset *rs, const struct nlmsghdr *nlh)
{
	const struct nfgenmsg *nfg = mnl_nlmsg_get_payload(nlh);
	struct nftnl_set *s = nftnl_set_alloc();
	struct nftnl_set_elems_iter *it = NULL;
	struct nftnl_set_elem *e;
	struct ck_set *cs = NULL;
	const char *table, *name;
	int rc = PC_ENOMEM;

	if (!s)
		return PC_ENOMEM;
	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*nfg) ||
	    nftnl_set_elems_nlmsg_parse(nlh, s) < 0) {
		rc = PC_EPARSE;
		goto out;
	}
	table = nftnl_set_get_str(s, NFTNL_SET_TABLE);
	name = nftnl_set_get_str(s, NFTNL_SET_NAME);
	if (table && name)
		cs = (struct ck_set *)ck_set_find(rs, nfg->nfgen_family, table, name);
	if (!cs) {
		rc = 0; /* elements of a set not in the dump: nothing refers to them */
		goto out;
	}
	cs->elems_read = true;
	/* the kept libnftnl object gets the elements too (identity text) */
	if (cs->ns && nftnl_set_elems_nlmsg_parse(nlh, cs->ns) < 0) {
		rc = PC_EPARSE;
		goto out;
	}
	it = nftnl_set_elems_iter_create(s);
	if (!it)
		goto out;
	for (e = nftnl_set_elems_iter_cur(it); e; e = nftnl_set_elems_iter_next(it)) {
		struct ck_elem *ce = ck_grow(&cs->elems, &cs->n_elems, &cs->cap_elems, sizeof(*ce));
		uint32_t len = 0;
		const void *d;

		if (!ce)
			goto out;
		d = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);
		copy_blob(ce->key, &ce->klen, d, len, &cs->elems_trunc);
		if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END)) {
			d = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &len);
			copy_blob(ce->kend, &ce->kelen, d, len, &cs->elems_trunc);
		}
		if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_DATA)) {
			d = nftnl_set_elem_get(e, NFTNL_SET_ELEM_DATA, &len);
			copy_blob(ce->data, &ce->dlen, d, len, &cs->elems_trunc);
		}
		if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_VERDICT)) {
			ce->has_verdict = true;
			ce->verdict = (int32_t)nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_VERDICT);
		}
		if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_CHAIN))
			copy_str(ce->chain, sizeof(ce->chain),
				 nftnl_set_elem_get_str(e, NFTNL_SET_ELEM_CHAIN));
		if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS))
			ce->flags = nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS);
	}
	rc = 0;
out:
	if (it)
		nftnl_set_elems_iter_destroy(it);
	nftnl_set_free(s);
	return rc;
}

/* Objects are read with libmnl alone: the model needs only their names
 * and type, and libnftnl's object parsers need not see sandbox-shaped
 * bytes at all. The message was screened (ck_nft_screen). */
static int parse_obj(struct ck_ruleset *rs, const struct nlmsghdr *nlh)
{
	const struct nfgenmsg *nfg = mnl_nlmsg_get_payload(nlh);
	struct ck_obj *co = ck_grow(&rs->objs, &rs->n_objs, &rs->cap_objs, sizeof(*co));
	const struct nlattr *a;

	if (!co)
		return PC_ENOMEM;
	co->family = nfg->nfgen_family;
	mnl_attr_for_each(a, nlh, sizeof(*nfg))
	{
		switch (mnl_attr_get_type(a)) {
		case NFTA_OBJ_TABLE:
			copy_str(co->table, sizeof(co->table), mnl_attr_get_str(a));
			break;
		case NFTA_OBJ_NAME:
			copy_str(co->name, sizeof(co->name), mnl_attr_get_str(a));
			break;
		case NFTA_OBJ_TYPE:
			co->type = ntohl(mnl_attr_get_u32(a));
			break;
		}
	}
	return 0;
}

/* One nftables message. Nothing reaches libnftnl unscreened: a rule the
 * screen does not pass is kept as a rule we could not read (unproven); any
 * other message that fails it fails the dump. */
static int parse_msg(struct ck_ruleset *rs, const struct nlmsghdr *nlh)
{
	uint16_t type = NFNL_MSG_TYPE(nlh->nlmsg_type);

	switch (type) {
	case NFT_MSG_NEWTABLE:
	case NFT_MSG_NEWCHAIN:
	case NFT_MSG_NEWRULE:
	case NFT_MSG_NEWSET:
	case NFT_MSG_NEWSETELEM:
	case NFT_MSG_NEWOBJ:
		break;
	default:
		return 0;
	}
	if (ck_nft_screen(nlh) < 0)
		return type == NFT_MSG_NEWRULE ? bad_rule(rs, nlh) : PC_EPARSE;
	switch (type) {
	case NFT_MSG_NEWTABLE:
		return parse_table(rs, nlh);
	case NFT_MSG_NEWCHAIN:
		return parse_chain(rs, nlh);
	case NFT_MSG_NEWRULE:
		return parse_rule(rs, nlh);
	case NFT_MSG_NEWSET:
		return parse_set(rs, nlh);
	case NFT_MSG_NEWSETELEM:
		return parse_setelems(rs, nlh);
	default:
		return parse_obj(rs, nlh);
	}
}

int ck_nft_parse(struct ck_ruleset *rs, const void *buf, size_t len, struct pc_err *err)
{
	const struct nlmsghdr *nlh = buf;
	int n = (int)(len > INT32_MAX ? INT32_MAX : len);

	for (; ck_nlmsg_ok(nlh, n); nlh = mnl_nlmsg_next(nlh, &n)) {
		int rc;

		if (nlh->nlmsg_type == NLMSG_DONE || nlh->nlmsg_type == NLMSG_NOOP)
			continue;
		if (nlh->nlmsg_type == NLMSG_ERROR)
			return pc_err_set(err, PC_EIO,
					  "nftables dump: error message from the kernel");
		if (NFNL_SUBSYS_ID(nlh->nlmsg_type) != NFNL_SUBSYS_NFTABLES)
			continue;
		rc = parse_msg(rs, nlh);
		if (rc == PC_ENOMEM)
			return pc_err_set(err, rc, "nftables dump: out of memory");
		if (rc < 0)
			return pc_err_set(err, PC_EPARSE,
					  "nftables dump: malformed message (type %u)",
					  NFNL_MSG_TYPE(nlh->nlmsg_type));
	}
	if (n != 0)
		return pc_err_set(err, PC_EPARSE, "nftables dump: trailing %d bytes", n);
	return 0;
}

/* ---- live dump ------------------------------------------------------------ */

struct ck_nl {
	struct mnl_socket *nl;
	uint32_t portid, seq;
	char *rbuf;
};

/* Send nlh and collect every reply message into out; error on NLMSG_ERROR
 * (other than the ACK) or an interrupted dump (retry at the caller). */
static int nl_dump(struct ck_nl *s, struct nlmsghdr *nlh, struct pc_buf *out, bool *intr,
		   struct pc_err *err)
{
	uint32_t seq = nlh->nlmsg_seq;

	if (mnl_socket_sendto(s->nl, nlh, nlh->nlmsg_len) < 0)
		return pc_err_errno(err, PC_EIO, "netlink send");
	for (;;) {
		ssize_t got = mnl_socket_recvfrom(s->nl, s->rbuf, MNL_SOCKET_BUFFER_SIZE * 4);
		const struct nlmsghdr *m = (const struct nlmsghdr *)s->rbuf;
		int n = (int)got;

		if (got < 0)
			return pc_err_errno(err, PC_EIO, "netlink receive");
		for (; ck_nlmsg_ok(m, n); m = mnl_nlmsg_next(m, &n)) {
			if (m->nlmsg_seq != seq || m->nlmsg_pid != s->portid)
				continue;
			if (m->nlmsg_flags & NLM_F_DUMP_INTR)
				*intr = true;
			if (m->nlmsg_type == NLMSG_DONE)
				return out->err ? pc_err_set(err, PC_ENOMEM, "netlink dump") : 0;
			if (m->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = mnl_nlmsg_get_payload(m);

				if (m->nlmsg_len < NLMSG_HDRLEN + sizeof(*e))
					return pc_err_set(err, PC_EIO, "netlink: short error");
				if (e->error == 0)
					return 0;
				errno = -e->error;
				return pc_err_errno(err, PC_EIO, "netlink request");
			}
			pc_buf_put(out, m, m->nlmsg_len);
			if (!(m->nlmsg_flags & NLM_F_MULTI))
				return 0;
		}
	}
}

static int nft_gen(struct ck_nl *s, uint32_t *gen, struct pc_err *err)
{
	char buf[256];
	struct nlmsghdr *nlh =
	    nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETGEN, NFPROTO_UNSPEC, NLM_F_ACK, ++s->seq);
	struct pc_buf out = {0};
	bool intr = false;
	struct nftnl_gen *g = NULL;
	int rc;

	rc = nl_dump(s, nlh, &out, &intr, err);
	if (rc < 0)
		goto done;
	rc = pc_err_set(err, PC_EIO, "nftables: no generation id");
	if (out.len >= NLMSG_HDRLEN && (g = nftnl_gen_alloc()) &&
	    nftnl_gen_nlmsg_parse((struct nlmsghdr *)out.p, g) == 0) {
		*gen = nftnl_gen_get_u32(g, NFTNL_GEN_ID);
		rc = 0;
	}
done:
	nftnl_gen_free(g);
	pc_buf_free(&out);
	return rc;
}

static int nft_read_once(struct ck_nl *s, struct ck_ruleset *rs, bool *retry, struct pc_err *err)
{
	static const uint16_t kinds[] = {NFT_MSG_GETTABLE, NFT_MSG_GETCHAIN, NFT_MSG_GETSET,
					 NFT_MSG_GETOBJ, NFT_MSG_GETRULE};
	/* zeroed: libmnl 1.0.4 leaves an attribute's alignment padding
	 * unwritten, and the kernel must not be handed uninitialised bytes */
	char hdr[1024] = {0};
	struct pc_buf raw = {0};
	uint32_t gen0 = 0, gen1 = 0;
	bool intr = false;
	int rc;

	rc = nft_gen(s, &gen0, err);
	if (rc < 0)
		goto out;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(hdr, kinds[k], NFPROTO_UNSPEC,
							     NLM_F_DUMP | NLM_F_ACK, ++s->seq);

		raw.len = 0;
		rc = nl_dump(s, nlh, &raw, &intr, err);
		if (rc == 0)
			rc = ck_nft_parse(rs, raw.p, raw.len, err);
		if (rc < 0)
			goto out;
		if (kinds[k] == NFT_MSG_GETSET) {
			ck_set_index(rs); /* the sets are all here: their elements follow */
			/* elements of every set, one dump per set */
			for (size_t i = 0; i < rs->n_sets; i++) {
				struct nftnl_set *q = nftnl_set_alloc();

				if (!q) {
					rc = pc_err_set(err, PC_ENOMEM, "nftables: set elements");
					goto out;
				}
				nftnl_set_set_str(q, NFTNL_SET_TABLE, rs->sets[i].table);
				nftnl_set_set_str(q, NFTNL_SET_NAME, rs->sets[i].name);
				nlh = nftnl_nlmsg_build_hdr(hdr, NFT_MSG_GETSETELEM,
							    (uint16_t)rs->sets[i].family,
							    NLM_F_DUMP | NLM_F_ACK, ++s->seq);
				nftnl_set_elems_nlmsg_build_payload(nlh, q);
				nftnl_set_free(q);
				raw.len = 0;
				/* A set whose elements cannot be dumped stays
				 * elems_read == false: the model treats it as
				 * unreadable rather than empty. */
				if (nl_dump(s, nlh, &raw, &intr, NULL) == 0)
					(void)ck_nft_parse(rs, raw.p, raw.len, NULL);
			}
		}
	}
	rc = nft_gen(s, &gen1, err);
	if (rc < 0)
		goto out;
	*retry = intr || gen0 != gen1;
out:
	pc_buf_free(&raw);
	return rc;
}

void ck_nft_mark_written(struct ck_ruleset *rs)
{
	for (size_t i = 0; i < rs->n_chains; i++) {
		const struct ck_chain *c = &rs->chains[i];

		for (size_t j = 0; j < c->n_rules; j++) {
			struct nftnl_expr_iter *it = nftnl_expr_iter_create(c->rules[j].r);
			struct nftnl_expr *x;

			if (!it)
				continue;
			while ((x = nftnl_expr_iter_next(it))) {
				const char *n = nftnl_expr_get_str(x, NFTNL_EXPR_NAME);
				const char *set;

				if (!n || strcmp(n, "dynset") != 0 ||
				    !(set = nftnl_expr_get_str(x, NFTNL_EXPR_DYNSET_SET_NAME)))
					continue;
				set_each(rs, c->family, c->table, set, set_mark_written, NULL);
			}
			nftnl_expr_iter_destroy(it);
		}
	}
}

int ck_nft_read(struct ck_ruleset *out, struct pc_err *err)
{
	struct ck_nl s = {0};
	int rc = 0;

	s.rbuf = malloc(MNL_SOCKET_BUFFER_SIZE * 4);
	if (!s.rbuf)
		return pc_err_set(err, PC_ENOMEM, "nftables: buffer");
	s.nl = mnl_socket_open(NETLINK_NETFILTER);
	if (!s.nl || mnl_socket_bind(s.nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		rc = pc_err_errno(err, PC_EIO, "nftables: netlink socket");
		goto out;
	}
	s.portid = mnl_socket_get_portid(s.nl);
	s.seq = (uint32_t)time(NULL);
	/* The ruleset must be one generation: retry while it changes under us. */
	for (int tries = 0;; tries++) {
		struct ck_ruleset rs = {0};
		bool retry = false;

		rc = nft_read_once(&s, &rs, &retry, err);
		if (rc == 0 && !retry) {
			*out = rs;
			ck_nft_mark_written(out);
			break;
		}
		ck_ruleset_free(&rs);
		if (rc < 0)
			break;
		if (tries == 4) {
			rc = pc_err_set(err, PC_EAGAIN,
					"nftables: ruleset kept changing while it was read");
			break;
		}
	}
out:
	if (s.nl)
		mnl_socket_close(s.nl);
	free(s.rbuf);
	return rc;
}
