/* The routing half of paths-guarded: bridge traffic is routed only when
 * our ruleset marked it (nft/nft.h NFT_ROUTE_*), so that without the
 * ruleset it is blackholed, not forwarded. Proven from the kernel's rules
 * and the blackhole table, read here over rtnetlink (the rule dump keeps
 * what the snapshot's does not: the invert flag, goto targets, l3mdev). */
#include "checker/checker_int.h"
#include "nft/nft.h"

#include <netinet/in.h> /* before the linux/ headers (libc-compat) */
#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>

struct rrule {
	uint8_t action, src_len, dst_len, tos;
	uint32_t flags, prio, table, mark, mask, uid_lo, uid_hi;
	bool has_mark, has_uid, l3mdev;
	bool suppress; /* suppress_prefixlength/ifgroup: a result may be passed over */
	bool narrow;   /* ip proto, ports, tunnel id, or a selector this file does not know */
	char iif[16], oif[16];
};

static void rule_parse(const struct nlmsghdr *nlh, struct rrule *r)
{
	const struct fib_rule_hdr *h = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;

	memset(r, 0, sizeof(*r));
	r->action = h->action;
	r->flags = h->flags;
	r->table = h->table;
	r->src_len = h->src_len;
	r->dst_len = h->dst_len;
	r->tos = h->tos;
	mnl_attr_for_each(a, nlh, sizeof(*h))
	{
		bool u32 = mnl_attr_validate(a, MNL_TYPE_U32) == 0;
		bool str = mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0;

		switch (mnl_attr_get_type(a)) {
		case FRA_PRIORITY:
			r->prio = u32 ? mnl_attr_get_u32(a) : r->prio;
			break;
		case FRA_TABLE:
			r->table = u32 ? mnl_attr_get_u32(a) : r->table;
			break;
		case FRA_FWMARK:
			r->mark = u32 ? mnl_attr_get_u32(a) : 0;
			r->has_mark = true;
			break;
		case FRA_FWMASK:
			r->mask = u32 ? mnl_attr_get_u32(a) : 0;
			break;
		case FRA_IIFNAME:
			if (str)
				pc_strlcpy(r->iif, mnl_attr_get_str(a), sizeof(r->iif));
			break;
		case FRA_OIFNAME:
			if (str)
				pc_strlcpy(r->oif, mnl_attr_get_str(a), sizeof(r->oif));
			break;
		case FRA_L3MDEV:
			r->l3mdev = true;
			break;
		case FRA_UID_RANGE:
			if (mnl_attr_get_payload_len(a) == sizeof(struct fib_rule_uid_range)) {
				struct fib_rule_uid_range u;

				memcpy(&u, mnl_attr_get_payload(a), sizeof(u));
				r->uid_lo = u.start;
				r->uid_hi = u.end;
				r->has_uid = true;
			} else {
				r->narrow = true;
			}
			break;
		case FRA_SUPPRESS_PREFIXLEN:
		case FRA_SUPPRESS_IFGROUP:
			/* -1 is "not set" */
			r->suppress = r->suppress || !u32 || mnl_attr_get_u32(a) != UINT32_MAX;
			break;
		case FRA_SRC:
		case FRA_DST:	   /* src_len/dst_len say whether they select */
		case FRA_PROTOCOL: /* who added the rule, not a selector */
		case FRA_GOTO:
		case FRA_FLOW:
		case FRA_PAD:
			break;
		default:
			/* ip proto, ports, tunnel id, DSCP...: narrow a rule */
			r->narrow = true;
			break;
		}
	}
	if (r->has_mark && !r->mask)
		r->mask = r->mark ? 0xffffffffu : 0;
}

static const char *action_name(uint8_t a)
{
	static const struct pc_name names[] = {{FR_ACT_TO_TBL, "lookup"},
					       {FR_ACT_GOTO, "goto"},
					       {FR_ACT_NOP, "nop"},
					       {FR_ACT_BLACKHOLE, "blackhole"},
					       {FR_ACT_UNREACHABLE, "unreachable"},
					       {FR_ACT_PROHIBIT, "prohibit"}};

	return PC_NAME_OF(names, a, "unknown action");
}

static void rule_text(const struct rrule *r, char *buf, size_t len)
{
	char sel[96] = "";
	size_t n = 0;

	/* the selectors that narrow a rule, so that the finding names the rule
	 * as `ip rule` shows it */
	if (r->tos)
		n += (size_t)snprintf(sel + n, sizeof(sel) - n, " tos 0x%x", r->tos);
	if (r->has_uid && n < sizeof(sel))
		n += (size_t)snprintf(sel + n, sizeof(sel) - n, " uidrange %u-%u", r->uid_lo,
				      r->uid_hi);
	if (r->suppress && n < sizeof(sel))
		n += (size_t)snprintf(sel + n, sizeof(sel) - n, " suppress");
	if (r->narrow && n < sizeof(sel))
		snprintf(sel + n, sizeof(sel) - n, " (more selectors)");
	snprintf(buf, len, "%u: %s%s%s%s%s fwmark 0x%x/0x%x%s %s %u", r->prio,
		 r->flags & FIB_RULE_INVERT ? "not " : "", r->iif[0] ? "iif " : "from all", r->iif,
		 r->oif[0] ? " oif " : "", r->oif, r->mark, r->mask, sel, action_name(r->action),
		 r->table);
}

/* Our found-all rule: everything else from the bridge to the blackhole
 * table, exactly as the engine adds it. A selector (a tos, a uid range, a
 * port, a suppressed prefix length) would let the rest of the bridge's
 * traffic fall through to the rules after it (main). */
static bool is_catch(const struct rrule *r, const char *br)
{
	return r->prio == NFT_ROUTE_PRIO_DROP && strcmp(r->iif, br) == 0 && !r->oif[0] &&
	       !r->mask && r->action == FR_ACT_TO_TBL && r->table == NFT_ROUTE_TABLE &&
	       !r->src_len && !r->dst_len && !(r->flags & FIB_RULE_INVERT) && !r->l3mdev &&
	       !r->tos && !r->has_uid && !r->suppress && !r->narrow;
}

/* One of our marked-traffic rules (index into NFT_ROUTE_MARKS), or -1. */
static int mark_rule(const struct rrule *r, const char *br)
{
	static const uint32_t marks[NFT_ROUTE_N_MARKS] = NFT_ROUTE_MARKS;

	for (int i = 0; i < NFT_ROUTE_N_MARKS; i++)
		if (r->prio == NFT_ROUTE_PRIO_MARK + (uint32_t)i && strcmp(r->iif, br) == 0 &&
		    !r->oif[0] && r->mark == marks[i] && r->mask == marks[i] &&
		    r->action == FR_ACT_TO_TBL && r->table == RT_TABLE_MAIN && !r->src_len &&
		    !r->dst_len && !(r->flags & FIB_RULE_INVERT) && !r->l3mdev)
			return i;
	return -1;
}

/* Can a rule before our found-all match bridge traffic and send it
 * elsewhere? Rules that only drop, or never match an input route lookup
 * from the bridge, cannot. The selectors the sandbox chooses (addresses,
 * tos, protocol, ports) or another program may write (the mark) only
 * narrow a rule, so they do not save it; a uid range does when it leaves
 * out uid 0, the uid of every forwarded packet's lookup. Where it leads is
 * the caller's to judge (the table it reaches). */
static bool may_match(const struct rrule *r, const char *br)
{
	bool inv = (r->flags & FIB_RULE_INVERT) != 0;

	if (r->action == FR_ACT_BLACKHOLE || r->action == FR_ACT_UNREACHABLE ||
	    r->action == FR_ACT_PROHIBIT || r->action == FR_ACT_NOP)
		return false;
	if (inv)
		return true;
	if (r->iif[0] && strcmp(r->iif, br) != 0)
		return false;
	if (r->oif[0]) /* an input route lookup has no output interface */
		return false;
	if (r->has_uid && r->uid_lo > 0)
		return false;
	return true;
}

static const char *route_type(uint8_t t)
{
	static const struct pc_name names[] = {{RTN_UNICAST, "unicast"},
					       {RTN_LOCAL, "local"},
					       {RTN_BROADCAST, "broadcast"},
					       {RTN_MULTICAST, "multicast"},
					       {RTN_ANYCAST, "anycast"},
					       {RTN_THROW, "throw"},
					       {RTN_NAT, "nat"},
					       {RTN_BLACKHOLE, "blackhole"},
					       {RTN_UNREACHABLE, "unreachable"},
					       {RTN_PROHIBIT, "prohibit"}};

	return PC_NAME_OF(names, t, "unknown");
}

static bool route_drops(const struct ck_route *rt)
{
	return rt->type == RTN_BLACKHOLE || rt->type == RTN_UNREACHABLE || rt->type == RTN_PROHIBIT;
}

/* Can a route, found by an input lookup, forward the packet? Local,
 * broadcast and anycast routes deliver to the gateway itself (the input
 * chain's business), drops and throws (on to the next rule) do not
 * forward. A multicast route does not either, as long as its destination
 * is multicast space: IPv6 forwards a non-multicast destination that a
 * "multicast" route covers (ip6_rt_init_dst), IPv4 treats it as a martian;
 * the whole space is the safe side. Everything else may (unicast, nat, a
 * type this file does not know). */
bool checker_route_forwards(uint8_t family, uint8_t type, const uint8_t *dst, uint8_t dst_len)
{
	switch (type) {
	case RTN_LOCAL:
	case RTN_BROADCAST:
	case RTN_ANYCAST:
	case RTN_THROW:
	case RTN_BLACKHOLE:
	case RTN_UNREACHABLE:
	case RTN_PROHIBIT:
		return false;
	case RTN_MULTICAST:
		return family == AF_INET6 ? !(dst_len >= 8 && dst[0] == 0xff)
					  : !(dst_len >= 4 && (dst[0] & 0xf0) == 0xe0);
	default:
		return true;
	}
}

static bool route_forwards(const struct ck_route *rt)
{
	return checker_route_forwards(rt->family, rt->type, rt->dst, rt->dst_len);
}

static void route_text(const struct ck_route *rt, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN], s[INET6_ADDRSTRLEN], g[INET6_ADDRSTRLEN];
	char from[80] = "", via[80] = "", tos[16] = "";

	if (rt->src_len)
		snprintf(from, sizeof(from), " from %s/%u",
			 inet_ntop(rt->family, rt->src, s, sizeof(s)) ? s : "?", rt->src_len);
	if (rt->has_gw)
		snprintf(via, sizeof(via), " via %s",
			 inet_ntop(rt->family, rt->gw, g, sizeof(g)) ? g : "?");
	if (rt->tos)
		snprintf(tos, sizeof(tos), " tos 0x%x", rt->tos);
	snprintf(buf, len, "%s route to %s/%u%s%s%s", route_type(rt->type),
		 inet_ntop(rt->family, rt->dst, a, sizeof(a)) ? a : "?", rt->dst_len, from, via,
		 tos);
}

/* A rule before ours that reaches table `table`: read in full. Each route
 * that may forward is a way out for bridge traffic our ruleset did not
 * mark. Returns how many. */
static size_t table_ways_out(const struct ck_state *st, uint8_t fam, uint32_t table,
			     const char *rule, const char *br, struct checker_result *res)
{
	const char *v = fam == AF_INET ? "IPv4" : "IPv6";
	char t[200];
	size_t n = 0;

	for (size_t i = 0; i < st->n_routes; i++) {
		const struct ck_route *rt = &st->routes[i];

		if (rt->family != fam || rt->table != table || !route_forwards(rt))
			continue;
		route_text(rt, t, sizeof(t));
		ck_find(res, CK_OB_PATHS, CHECKER_EXIT,
			"%s routing rule %s comes before the blackhole rule of bridge %s and "
			"reaches table %u, which holds a %s: bridge traffic our ruleset did not "
			"mark may be routed by it",
			v, rule, br, table, t);
		n++;
	}
	if (!n)
		ck_evid(res, CK_OB_PATHS,
			"%s: table %u, reached by rule %s before ours, holds no route that "
			"forwards (local, broadcast, anycast, multicast, drops, throws only)",
			v, table, rule);
	return n;
}

void ck_routing_family(const struct ck_state *st, const char *br, uint8_t fam,
		       const struct pc_buf *dump, struct checker_result *res)
{
	const char *v = fam == AF_INET ? "IPv4" : "IPv6";
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)dump->p;
	int n = (int)(dump->len > INT32_MAX ? INT32_MAX : dump->len);
	bool found = false, marks[NFT_ROUTE_N_MARKS] = {0};
	size_t shadow = 0, drops = 0, others = 0, partial = 0;
	char t[200], first[200] = "";

	for (; dump->p && ck_nlmsg_ok(nlh, n); nlh = mnl_nlmsg_next(nlh, &n)) {
		const struct fib_rule_hdr *h = mnl_nlmsg_get_payload(nlh);
		struct rrule r;
		int m;

		if (nlh->nlmsg_type != RTM_NEWRULE || nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*h) ||
		    h->family != fam)
			continue;
		rule_parse(nlh, &r);
		if (is_catch(&r, br)) {
			found = true;
			break; /* evaluation order: nothing after it sees bridge traffic */
		}
		if ((m = mark_rule(&r, br)) >= 0) {
			marks[m] = true;
			continue;
		}
		if (!may_match(&r, br))
			continue;
		rule_text(&r, t, sizeof(t));
		/* The local table and ours are read in full: the kernel's rule 0
		 * reaches the local table for every packet, so what it holds
		 * decides (a unicast route put there is a way out); ours is
		 * judged below. Any other table may be given a route at any time
		 * without a rule changing: a rule that reaches it is a way out
		 * whatever it holds now. */
		if (r.action == FR_ACT_TO_TBL && !r.l3mdev &&
		    (r.table == RT_TABLE_LOCAL || r.table == NFT_ROUTE_TABLE)) {
			shadow += table_ways_out(st, fam, r.table, t, br, res);
			continue;
		}
		ck_find(res, CK_OB_PATHS, CHECKER_EXIT,
			"%s routing rule %s comes before the blackhole rule of bridge %s and may "
			"route its traffic without our ruleset's mark",
			v, t, br);
		shadow++;
	}
	if (!found) {
		ck_find(res, CK_OB_PATHS, CHECKER_EXIT,
			"%s routing rule %u (iif %s lookup %u) is missing: without our ruleset, "
			"bridge traffic would be forwarded instead of blackholed",
			v, NFT_ROUTE_PRIO_DROP, br, NFT_ROUTE_TABLE);
		return;
	}
	for (size_t i = 0; i < st->n_routes; i++) {
		const struct ck_route *rt = &st->routes[i];

		if (rt->family != fam || rt->table != NFT_ROUTE_TABLE)
			continue;
		if (route_drops(rt)) {
			/* only a default without a selector ends every lookup: one
			 * with a tos (IPv4) or a source prefix (IPv6) leaves the rest
			 * of the bridge's traffic to the rules after ours (main) */
			if (rt->dst_len == 0 && !rt->tos && !rt->src_len)
				drops++;
			else if (rt->dst_len == 0 && !partial++)
				route_text(rt, first, sizeof(first));
			continue;
		}
		others++;
		route_text(rt, t, sizeof(t));
		ck_find(res, CK_OB_PATHS, CHECKER_EXIT,
			"%s blackhole table %u holds a %s: bridge traffic our ruleset did not mark "
			"may be routed by it",
			v, NFT_ROUTE_TABLE, t);
	}
	if (!drops && partial)
		ck_find(res, CK_OB_PATHS, CHECKER_EXIT,
			"%s blackhole table %u has no unconditional blackhole default route: its "
			"%s matches only part of the bridge's traffic, the rest falls through to "
			"the next rules",
			v, NFT_ROUTE_TABLE, first);
	else if (!drops)
		ck_find(res, CK_OB_PATHS, CHECKER_EXIT,
			"%s blackhole table %u has no blackhole default route: bridge traffic our "
			"ruleset did not mark falls through to the next rules",
			v, NFT_ROUTE_TABLE);
	if (!shadow && !others && drops)
		ck_evid(res, CK_OB_PATHS,
			"%s: bridge %s routed by the main table only with a mark of our ruleset "
			"(rules %u-%u%s), otherwise by table %u (blackhole)",
			v, br, NFT_ROUTE_PRIO_MARK, NFT_ROUTE_PRIO_DROP,
			marks[0] && marks[1] && marks[2]
			    ? ""
			    : "; a marked-traffic rule is missing: allowed traffic is blackholed",
			NFT_ROUTE_TABLE);
}

void ck_routing_check(const struct ck_state *st, const char *br, struct checker_result *res)
{
	static const uint8_t fams[2] = {AF_INET, AF_INET6};

	for (int f = 0; f < 2; f++) {
		struct fib_rule_hdr h = {.family = fams[f]};
		struct pc_buf b = {0};
		struct pc_err err = {0};

		if (ck_rtnl_dump(RTM_GETRULE, &h, sizeof(h), &b, &err) < 0 || b.err)
			ck_find(res, CK_OB_PATHS, CHECKER_DOUBT,
				"%s routing rules could not be read: %s",
				fams[f] == AF_INET ? "IPv4" : "IPv6", err.msg);
		else
			ck_routing_family(st, br, fams[f], &b, res);
		pc_buf_free(&b);
	}
}
