/* checker: read links (bridge and bridge-port attributes, master relations,
 * XDP), addresses, routes and policy rules of both families over rtnetlink
 * with libmnl. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <linux/fib_rules.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "checker/checker_int.h"

const struct ck_link *ck_link_by_name(const struct ck_state *st, const char *name)
{
	for (size_t i = 0; name && i < st->n_links; i++)
		if (strcmp(st->links[i].name, name) == 0)
			return &st->links[i];
	return NULL;
}

const struct ck_link *ck_link_by_index(const struct ck_state *st, int ifindex)
{
	for (size_t i = 0; i < st->n_links; i++)
		if (st->links[i].ifindex == ifindex)
			return &st->links[i];
	return NULL;
}

const char *ck_ifname(const struct ck_state *st, int ifindex, char *buf, size_t len)
{
	const struct ck_link *l = ck_link_by_index(st, ifindex);

	if (l)
		pc_strlcpy(buf, l->name, len);
	else
		snprintf(buf, len, "ifindex %d", ifindex);
	return buf;
}

/* Attribute a into lval / the char array dst when it is well-formed (a
 * malformed one leaves the field as it was). */
#define ATTR_U32(a, lval)                                                                          \
	do {                                                                                       \
		if (mnl_attr_validate((a), MNL_TYPE_U32) == 0)                                     \
			(lval) = mnl_attr_get_u32(a);                                              \
	} while (0)
#define ATTR_STR(a, dst)                                                                           \
	do {                                                                                       \
		if (mnl_attr_validate((a), MNL_TYPE_STRING) == 0)                                  \
			pc_strlcpy((dst), mnl_attr_get_str(a), sizeof(dst));                       \
	} while (0)

static int u8attr(const struct nlattr *a)
{
	return mnl_attr_validate(a, MNL_TYPE_U8) == 0 ? mnl_attr_get_u8(a) : -1;
}

static void parse_brport(struct ck_link *l, const struct nlattr *nest)
{
	const struct nlattr *a;

	l->brport = true;
	mnl_attr_for_each_nested(a, nest)
	{
		switch (mnl_attr_get_type(a)) {
		case IFLA_BRPORT_ISOLATED:
			l->isolated = u8attr(a);
			break;
		case IFLA_BRPORT_LEARNING:
			l->learning = u8attr(a);
			break;
		case IFLA_BRPORT_UNICAST_FLOOD:
			l->flood = u8attr(a);
			break;
		case IFLA_BRPORT_BCAST_FLOOD:
			l->bcast_flood = u8attr(a);
			break;
		case IFLA_BRPORT_MCAST_FLOOD:
			l->mcast_flood = u8attr(a);
			break;
		case IFLA_BRPORT_MODE:
			l->hairpin = u8attr(a);
			break;
		case IFLA_BRPORT_PROXYARP:
			l->proxyarp = u8attr(a);
			break;
		case IFLA_BRPORT_NEIGH_SUPPRESS:
			l->neigh_suppress = u8attr(a);
			break;
		case IFLA_BRPORT_LOCKED:
			l->locked = u8attr(a);
			break;
		case IFLA_BRPORT_STATE:
			l->stp_state = u8attr(a);
			break;
		}
	}
}

static void parse_bridge(struct ck_link *l, const struct nlattr *nest)
{
	const struct nlattr *a;

	mnl_attr_for_each_nested(a, nest)
	{
		switch (mnl_attr_get_type(a)) {
		case IFLA_BR_NF_CALL_IPTABLES:
			l->br_nf_ipt = u8attr(a);
			break;
		case IFLA_BR_NF_CALL_IP6TABLES:
			l->br_nf_ip6t = u8attr(a);
			break;
		case IFLA_BR_NF_CALL_ARPTABLES:
			l->br_nf_arpt = u8attr(a);
			break;
		case IFLA_BR_VLAN_FILTERING:
			l->br_vlan_filtering = u8attr(a);
			break;
		}
	}
}

static void parse_linkinfo(struct ck_link *l, const struct nlattr *nest)
{
	const struct nlattr *a, *data = NULL, *sdata = NULL;

	mnl_attr_for_each_nested(a, nest)
	{
		switch (mnl_attr_get_type(a)) {
		case IFLA_INFO_KIND:
			ATTR_STR(a, l->kind);
			break;
		case IFLA_INFO_SLAVE_KIND:
			ATTR_STR(a, l->slave_kind);
			break;
		case IFLA_INFO_DATA:
			data = a;
			break;
		case IFLA_INFO_SLAVE_DATA:
			sdata = a;
			break;
		}
	}
	if (data && strcmp(l->kind, "bridge") == 0 && mnl_attr_validate(data, MNL_TYPE_NESTED) == 0)
		parse_bridge(l, data);
	if (sdata && strcmp(l->slave_kind, "bridge") == 0 &&
	    mnl_attr_validate(sdata, MNL_TYPE_NESTED) == 0)
		parse_brport(l, sdata);
}

static void parse_xdp(struct ck_link *l, const struct nlattr *nest)
{
	const struct nlattr *a;

	mnl_attr_for_each_nested(a, nest)
	{
		switch (mnl_attr_get_type(a)) {
		case IFLA_XDP_ATTACHED:
			if (mnl_attr_validate(a, MNL_TYPE_U8) == 0)
				l->xdp_attached = mnl_attr_get_u8(a);
			break;
		case IFLA_XDP_PROG_ID:
		case IFLA_XDP_DRV_PROG_ID:
		case IFLA_XDP_SKB_PROG_ID:
		case IFLA_XDP_HW_PROG_ID:
			if (mnl_attr_validate(a, MNL_TYPE_U32) == 0 && !l->xdp_prog_id)
				l->xdp_prog_id = mnl_attr_get_u32(a);
			break;
		}
	}
}

static int parse_link(struct ck_state *st, const struct nlmsghdr *nlh)
{
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;
	struct ck_link *l;

	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*ifi))
		return PC_EPARSE;
	l = ck_grow(&st->links, &st->n_links, &st->cap_links, sizeof(*l));
	if (!l)
		return PC_ENOMEM;
	l->ifindex = ifi->ifi_index;
	l->flags = ifi->ifi_flags;
	l->br_nf_ipt = l->br_nf_ip6t = l->br_nf_arpt = l->br_vlan_filtering = -1;
	l->isolated = l->learning = l->flood = l->bcast_flood = l->mcast_flood = -1;
	l->hairpin = l->proxyarp = l->neigh_suppress = l->locked = l->stp_state = -1;
	l->link_nsid = -1;
	l->tcx_ingress = l->tcx_egress = -1;
	l->promisc = -1;
	mnl_attr_for_each(a, nlh, sizeof(*ifi))
	{
		switch (mnl_attr_get_type(a)) {
		case IFLA_IFNAME:
			ATTR_STR(a, l->name);
			break;
		case IFLA_MASTER:
			ATTR_U32(a, l->master);
			break;
		case IFLA_LINK:
			ATTR_U32(a, l->link);
			break;
		case IFLA_PROMISCUITY:
			ATTR_U32(a, l->promisc);
			break;
		case IFLA_LINK_NETNSID:
			l->link_netns = true;
			ATTR_U32(a, l->link_nsid);
			break;
		case IFLA_ADDRESS:
			if (mnl_attr_get_payload_len(a) == 6)
				memcpy(l->mac, mnl_attr_get_payload(a), 6);
			break;
		case IFLA_LINKINFO:
			if (mnl_attr_validate(a, MNL_TYPE_NESTED) == 0)
				parse_linkinfo(l, a);
			break;
		case IFLA_PROTINFO:
			/* AF_BRIDGE dumps carry the port flags here */
			if ((nlh->nlmsg_flags & NLM_F_MULTI) && ifi->ifi_family == AF_BRIDGE &&
			    mnl_attr_validate(a, MNL_TYPE_NESTED) == 0)
				parse_brport(l, a);
			break;
		case IFLA_XDP:
			if (mnl_attr_validate(a, MNL_TYPE_NESTED) == 0)
				parse_xdp(l, a);
			break;
		}
	}
	return 0;
}

static int parse_addr(struct ck_state *st, const struct nlmsghdr *nlh)
{
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;
	struct ck_ifaddr *x;

	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*ifa))
		return PC_EPARSE;
	x = ck_grow(&st->addrs, &st->n_addrs, &st->cap_addrs, sizeof(*x));
	if (!x)
		return PC_ENOMEM;
	x->ifindex = (int)ifa->ifa_index;
	x->family = ifa->ifa_family;
	x->prefixlen = ifa->ifa_prefixlen;
	x->scope = ifa->ifa_scope;
	x->flags = ifa->ifa_flags;
	mnl_attr_for_each(a, nlh, sizeof(*ifa))
	{
		uint16_t t = mnl_attr_get_type(a);
		size_t alen = mnl_attr_get_payload_len(a);

		if ((t == IFA_LOCAL || (t == IFA_ADDRESS && x->family == AF_INET6)) &&
		    (alen == 4 || alen == 16))
			memcpy(x->a, mnl_attr_get_payload(a), alen);
		else if (t == IFA_ADDRESS && x->family == AF_INET && alen == 4 && !x->a[0] &&
			 !x->a[1])
			memcpy(x->a, mnl_attr_get_payload(a), 4);
		else if (t == IFA_FLAGS && mnl_attr_validate(a, MNL_TYPE_U32) == 0)
			x->flags = mnl_attr_get_u32(a);
	}
	return 0;
}

static int parse_route(struct ck_state *st, const struct nlmsghdr *nlh)
{
	const struct rtmsg *rt = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;
	struct ck_route *r;

	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*rt))
		return PC_EPARSE;
	r = ck_grow(&st->routes, &st->n_routes, &st->cap_routes, sizeof(*r));
	if (!r)
		return PC_ENOMEM;
	r->family = rt->rtm_family;
	r->dst_len = rt->rtm_dst_len;
	r->type = rt->rtm_type;
	r->scope = rt->rtm_scope;
	r->protocol = rt->rtm_protocol;
	r->table = rt->rtm_table;
	r->tos = rt->rtm_tos;
	r->src_len = rt->rtm_src_len;
	mnl_attr_for_each(a, nlh, sizeof(*rt))
	{
		size_t alen = mnl_attr_get_payload_len(a);

		switch (mnl_attr_get_type(a)) {
		case RTA_DST:
			if (alen == 4 || alen == 16)
				memcpy(r->dst, mnl_attr_get_payload(a), alen);
			break;
		case RTA_SRC:
			if (alen == 4 || alen == 16)
				memcpy(r->src, mnl_attr_get_payload(a), alen);
			break;
		case RTA_GATEWAY:
			if (alen == 4 || alen == 16) {
				memcpy(r->gw, mnl_attr_get_payload(a), alen);
				r->has_gw = true;
			}
			break;
		case RTA_OIF:
			ATTR_U32(a, r->oif);
			break;
		case RTA_TABLE:
			ATTR_U32(a, r->table);
			break;
		case RTA_PRIORITY:
			ATTR_U32(a, r->prio);
			break;
		}
	}
	return 0;
}

static int parse_iprule(struct ck_state *st, const struct nlmsghdr *nlh)
{
	const struct fib_rule_hdr *h = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;
	struct ck_iprule *r;

	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*h))
		return PC_EPARSE;
	r = ck_grow(&st->iprules, &st->n_iprules, &st->cap_iprules, sizeof(*r));
	if (!r)
		return PC_ENOMEM;
	r->family = h->family;
	r->action = h->action;
	r->table = h->table;
	r->src_len = h->src_len;
	r->dst_len = h->dst_len;
	mnl_attr_for_each(a, nlh, sizeof(*h))
	{
		size_t alen = mnl_attr_get_payload_len(a);

		switch (mnl_attr_get_type(a)) {
		case FRA_PRIORITY:
			ATTR_U32(a, r->prio);
			break;
		case FRA_TABLE:
			ATTR_U32(a, r->table);
			break;
		case FRA_FWMARK:
			ATTR_U32(a, r->fwmark);
			break;
		case FRA_FWMASK:
			ATTR_U32(a, r->fwmask);
			break;
		case FRA_IIFNAME:
			ATTR_STR(a, r->iif);
			break;
		case FRA_OIFNAME:
			ATTR_STR(a, r->oif);
			break;
		case FRA_SRC:
			if (alen == 4 || alen == 16)
				memcpy(r->src, mnl_attr_get_payload(a), alen);
			break;
		case FRA_DST:
			if (alen == 4 || alen == 16)
				memcpy(r->dst, mnl_attr_get_payload(a), alen);
			break;
		}
	}
	return 0;
}

int ck_rtnl_parse(struct ck_state *st, const void *buf, size_t len, struct pc_err *err)
{
	const struct nlmsghdr *nlh = buf;
	int n = (int)(len > INT32_MAX ? INT32_MAX : len);

	for (; ck_nlmsg_ok(nlh, n); nlh = mnl_nlmsg_next(nlh, &n)) {
		int rc = 0;

		switch (nlh->nlmsg_type) {
		case RTM_NEWLINK:
			rc = parse_link(st, nlh);
			break;
		case RTM_NEWADDR:
			rc = parse_addr(st, nlh);
			break;
		case RTM_NEWROUTE:
			rc = parse_route(st, nlh);
			break;
		case RTM_NEWRULE:
			rc = parse_iprule(st, nlh);
			break;
		case NLMSG_ERROR:
			return pc_err_set(err, PC_EIO, "rtnetlink: error from the kernel");
		default:
			break;
		}
		if (rc < 0)
			return pc_err_set(err, rc, "rtnetlink: %s message (type %u)",
					  rc == PC_ENOMEM ? "no memory for a" : "malformed",
					  nlh->nlmsg_type);
	}
	return 0;
}

static int nl_dump_once(int bus, const char *what, struct nlmsghdr *req, struct pc_buf *out,
			struct pc_err *err)
{
	struct mnl_socket *nl = mnl_socket_open(bus);
	char *buf = malloc(MNL_SOCKET_BUFFER_SIZE * 4);
	uint32_t seq = (uint32_t)time(NULL), portid;
	int rc = 0;

	if (!nl || !buf || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		rc = pc_err_errno(err, PC_EIO, "%s socket", what);
		goto out;
	}
	portid = mnl_socket_get_portid(nl);
	req->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req->nlmsg_seq = seq;
	if (mnl_socket_sendto(nl, req, req->nlmsg_len) < 0) {
		rc = pc_err_errno(err, PC_EIO, "%s send", what);
		goto out;
	}
	for (;;) {
		ssize_t got = mnl_socket_recvfrom(nl, buf, MNL_SOCKET_BUFFER_SIZE * 4);
		const struct nlmsghdr *m = (const struct nlmsghdr *)buf;
		int n = (int)got;

		if (got < 0) {
			rc = pc_err_errno(err, PC_EIO, "%s receive", what);
			goto out;
		}
		for (; ck_nlmsg_ok(m, n); m = mnl_nlmsg_next(m, &n)) {
			if (m->nlmsg_seq != seq || m->nlmsg_pid != portid)
				continue;
			if (m->nlmsg_flags & NLM_F_DUMP_INTR) {
				rc = pc_err_set(err, PC_EAGAIN, "%s dump interrupted", what);
				goto out;
			}
			if (m->nlmsg_type == NLMSG_DONE)
				goto out;
			if (m->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = mnl_nlmsg_get_payload(m);

				errno = m->nlmsg_len >= NLMSG_HDRLEN + sizeof(*e) ? -e->error : EIO;
				rc = pc_err_errno(err, PC_EIO, "%s dump %u", what, req->nlmsg_type);
				goto out;
			}
			pc_buf_put(out, m, m->nlmsg_len);
		}
	}
out:
	if (rc == 0 && out->err)
		rc = pc_err_set(err, PC_ENOMEM, "%s dump", what);
	if (nl)
		mnl_socket_close(nl);
	free(buf);
	return rc;
}

/* The kernel flags a dump that changed while it was read (a link or route
 * added meanwhile); what was read may miss an object, so it is read again.
 * A state that keeps changing stays unproven (the caller's error). */
int ck_nl_dump(int bus, const char *what, struct nlmsghdr *req, struct pc_buf *out,
	       struct pc_err *err)
{
	size_t start = out->len;
	int rc = PC_EAGAIN, tries;

	for (tries = 0; tries < 8 && rc == PC_EAGAIN; tries++) {
		out->len = start;
		rc = nl_dump_once(bus, what, req, out, err);
	}
	return rc;
}

int ck_rtnl_dump(uint16_t type, const void *hdr, size_t hdrlen, struct pc_buf *out,
		 struct pc_err *err)
{
	union {
		struct nlmsghdr h; /* aligns the request */
		char b[256];
	} q;
	struct nlmsghdr *nlh;

	if (hdrlen > 128)
		return pc_err_set(err, PC_EINVAL, "rtnetlink dump %u: family header too long",
				  type);
	nlh = mnl_nlmsg_put_header(q.b);
	nlh->nlmsg_type = type;
	memcpy(mnl_nlmsg_put_extra_header(nlh, hdrlen), hdr, hdrlen);
	if (type == RTM_GETLINK) {
		uint32_t mask = RTEXT_FILTER_VF | RTEXT_FILTER_SKIP_STATS;

		mnl_attr_put_u32(nlh, IFLA_EXT_MASK, mask);
	}
	return ck_nl_dump(NETLINK_ROUTE, "rtnetlink", nlh, out, err);
}

int ck_rtnl_read(struct ck_state *st, struct pc_err *err)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
	struct ifaddrmsg ifa = {.ifa_family = AF_UNSPEC};
	struct rtmsg rt4 = {.rtm_family = AF_INET}, rt6 = {.rtm_family = AF_INET6};
	struct fib_rule_hdr fr4 = {.family = AF_INET}, fr6 = {.family = AF_INET6};
	const struct {
		uint16_t type;
		const void *hdr;
		size_t len;
	} q[] = {{RTM_GETLINK, &ifi, sizeof(ifi)},  {RTM_GETADDR, &ifa, sizeof(ifa)},
		 {RTM_GETROUTE, &rt4, sizeof(rt4)}, {RTM_GETROUTE, &rt6, sizeof(rt6)},
		 {RTM_GETRULE, &fr4, sizeof(fr4)},  {RTM_GETRULE, &fr6, sizeof(fr6)}};
	int rc = 0;

	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]) && rc == 0; i++) {
		struct pc_buf b = {0};

		rc = ck_rtnl_dump(q[i].type, q[i].hdr, q[i].len, &b, err);
		if (rc == 0)
			rc = ck_rtnl_parse(st, b.p, b.len, err);
		pc_buf_free(&b);
	}
	return rc;
}
