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
	uint8_t action, src_len, dst_len;
	uint32_t flags, prio, table, mark, mask;
	bool has_mark, l3mdev, other; /* other: a selector this file does not read */
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
	r->other = h->tos != 0;
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
		case FRA_SRC:
		case FRA_DST:
		case FRA_PROTOCOL:
		case FRA_SUPPRESS_PREFIXLEN:
		case FRA_SUPPRESS_IFGROUP:
		case FRA_GOTO:
		case FRA_FLOW:
			break;
		default:
			/* uid range, ports, ip proto, DSCP...: only narrow a rule */
			r->other = true;
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
	snprintf(buf, len, "%u: %s%s%s%s%s fwmark 0x%x/0x%x %s %u", r->prio,
		 r->flags & FIB_RULE_INVERT ? "not " : "", r->iif[0] ? "iif " : "from all", r->iif,
		 r->oif[0] ? " oif " : "", r->oif, r->mark, r->mask, action_name(r->action),
		 r->table);
}

/* Our found-all rule: everything else from the bridge to the blackhole
 * table. */
static bool is_catch(const struct rrule *r, const char *br)
{
	return r->prio == NFT_ROUTE_PRIO_DROP && strcmp(r->iif, br) == 0 && !r->oif[0] &&
	       !r->mask && r->action == FR_ACT_TO_TBL && r->table == NFT_ROUTE_TABLE &&
	       !r->src_len && !r->dst_len && !(r->flags & FIB_RULE_INVERT) && !r->l3mdev;
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

/* Can a rule before our found-all send bridge traffic elsewhere? Rules
 * that only drop, never match an input route lookup from the bridge, or
 * look in the local table (the gateway's own addresses: the input chain's
 * business) cannot. Everything else may, whatever its other selectors
 * (they only narrow it). */
static bool may_shadow(const struct rrule *r, const char *br)
{
	bool inv = (r->flags & FIB_RULE_INVERT) != 0;

	if (r->action == FR_ACT_BLACKHOLE || r->action == FR_ACT_UNREACHABLE ||
	    r->action == FR_ACT_PROHIBIT || r->action == FR_ACT_NOP)
		return false;
	if (!inv && r->iif[0] && strcmp(r->iif, br) != 0)
		return false;
	if (!inv && r->oif[0]) /* an input route lookup has no output interface */
		return false;
	if (r->action == FR_ACT_TO_TBL && r->table == RT_TABLE_LOCAL && !r->l3mdev)
		return false;
	return true;
}

static const char *route_type(uint8_t t)
{
	static const struct pc_name names[] = {
	    {RTN_UNICAST, "unicast"},	  {RTN_LOCAL, "local"}, {RTN_BROADCAST, "broadcast"},
	    {RTN_MULTICAST, "multicast"}, {RTN_THROW, "throw"}, {RTN_NAT, "nat"}};

	return PC_NAME_OF(names, t, "non-drop");
}

static void family_check(const struct ck_state *st, const char *br, uint8_t fam,
			 const struct pc_buf *dump, struct checker_result *res)
{
	const char *v = fam == AF_INET ? "IPv4" : "IPv6";
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)dump->p;
	int n = (int)(dump->len > INT32_MAX ? INT32_MAX : dump->len);
	bool found = false, marks[NFT_ROUTE_N_MARKS] = {0};
	size_t shadow = 0, drops = 0, others = 0;
	char t[200], a[INET6_ADDRSTRLEN];

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
		if (!may_shadow(&r, br))
			continue;
		rule_text(&r, t, sizeof(t));
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
		if (rt->type == RTN_BLACKHOLE || rt->type == RTN_UNREACHABLE ||
		    rt->type == RTN_PROHIBIT) {
			drops += rt->dst_len == 0;
			continue;
		}
		others++;
		ck_find(res, CK_OB_PATHS, CHECKER_EXIT,
			"%s blackhole table %u holds a %s route to %s/%u: bridge traffic our "
			"ruleset did not mark may be routed by it",
			v, NFT_ROUTE_TABLE, route_type(rt->type),
			inet_ntop(fam, rt->dst, a, sizeof(a)) ? a : "?", rt->dst_len);
	}
	if (!drops)
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
			family_check(st, br, fams[f], &b, res);
		pc_buf_free(&b);
	}
}
