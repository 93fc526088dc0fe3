/* Fail closed without nftables: the policy-routing rules that route bridge
 * traffic only when our ruleset marked it (nft/nft.h, NFT_ROUTE_*), and
 * the two watches that keep the guard in place — rtnetlink rule/route
 * events (the rules and the blackhole table re-added when deleted) and
 * nftables events (our tables reinstalled when another program changed
 * them). docs/engine.md, "Fail closed without nftables". */
#include "engine/engine_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/fib_rules.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

/* One rtnetlink message of the batch below. */
struct rt_msg {
	uint16_t type, flags;
	char buf[256];
};

/* A zeroed request with its header (no stale bytes to the kernel). */
static struct nlmsghdr *msg_start(struct rt_msg *m, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh;

	memset(m->buf, 0, sizeof(m->buf));
	nlh = mnl_nlmsg_put_header(m->buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	return nlh;
}

static void rule_msg(struct rt_msg *m, uint16_t type, uint16_t flags, uint8_t family,
		     const char *bridge, uint32_t prio, uint32_t mark, uint32_t table)
{
	struct nlmsghdr *nlh;
	struct fib_rule_hdr *h;

	nlh = msg_start(m, type, flags);
	h = mnl_nlmsg_put_extra_header(nlh, sizeof(*h));
	h->family = family;
	h->action = FR_ACT_TO_TBL;
	h->table = table < 256 ? (uint8_t)table : RT_TABLE_UNSPEC;
	mnl_attr_put_u32(nlh, FRA_PRIORITY, prio);
	mnl_attr_put_strz(nlh, FRA_IIFNAME, bridge);
	if (mark) {
		mnl_attr_put_u32(nlh, FRA_FWMARK, mark);
		mnl_attr_put_u32(nlh, FRA_FWMASK, mark);
	}
	mnl_attr_put_u32(nlh, FRA_TABLE, table);
}

static void route_msg(struct rt_msg *m, uint16_t type, uint16_t flags, uint8_t family)
{
	struct nlmsghdr *nlh;
	struct rtmsg *rt;

	nlh = msg_start(m, type, flags);
	rt = mnl_nlmsg_put_extra_header(nlh, sizeof(*rt));
	rt->rtm_family = family;
	rt->rtm_table = RT_TABLE_UNSPEC;
	rt->rtm_protocol = RTPROT_STATIC;
	rt->rtm_scope = RT_SCOPE_UNIVERSE;
	rt->rtm_type = RTN_BLACKHOLE;
	mnl_attr_put_u32(nlh, RTA_TABLE, NFT_ROUTE_TABLE);
}

/* The whole set, both families: the blackhole routes first (a rule
 * pointing at an empty table would fall through to the next rules), then
 * the catch-all rule, then the marked exceptions. */
static size_t build_msgs(struct rt_msg *m, bool add, const char *bridge)
{
	static const uint32_t marks[NFT_ROUTE_N_MARKS] = NFT_ROUTE_MARKS;
	static const uint8_t fams[2] = {AF_INET, AF_INET6};
	uint16_t fl = add ? NLM_F_CREATE | NLM_F_EXCL : 0;
	size_t n = 0;

	for (int f = 0; f < 2; f++) {
		route_msg(&m[n++], add ? RTM_NEWROUTE : RTM_DELROUTE, fl, fams[f]);
		rule_msg(&m[n++], add ? RTM_NEWRULE : RTM_DELRULE, fl, fams[f], bridge,
			 NFT_ROUTE_PRIO_DROP, 0, NFT_ROUTE_TABLE);
		for (uint32_t i = 0; i < NFT_ROUTE_N_MARKS; i++)
			rule_msg(&m[n++], add ? RTM_NEWRULE : RTM_DELRULE, fl, fams[f], bridge,
				 NFT_ROUTE_PRIO_MARK + i, marks[i], RT_TABLE_MAIN);
	}
	return n;
}
#define ROUTE_MSGS (2 * (2 + NFT_ROUTE_N_MARKS))

/* Send each message and read its ack; ignore (errno) is not an error (the
 * rule already there, or already gone). *done: messages that changed
 * something. */
static int rt_send(struct rt_msg *m, size_t n, int ignore, size_t *done, struct pc_err *err)
{
	struct mnl_socket *nl;
	char buf[MNL_SOCKET_BUFFER_SIZE];
	uint32_t seq = (uint32_t)pc_now_mono_ms(), portid;
	int rc;

	*done = 0;
	rc = rtnl_open(&nl, &portid, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		struct nlmsghdr *nlh = (struct nlmsghdr *)m[i].buf;
		ssize_t r;

		nlh->nlmsg_seq = ++seq;
		if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
			rc = pc_err_errno(err, PC_EIO, "rtnetlink send");
			goto out;
		}
		r = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (r < 0) {
			rc = pc_err_errno(err, PC_EIO, "rtnetlink ack");
			goto out;
		}
		if (mnl_cb_run(buf, (size_t)r, seq, portid, NULL, NULL) < 0) {
			if (errno == ignore)
				continue;
			bool rule =
			    nlh->nlmsg_type == RTM_NEWRULE || nlh->nlmsg_type == RTM_DELRULE;
			bool add =
			    nlh->nlmsg_type == RTM_NEWRULE || nlh->nlmsg_type == RTM_NEWROUTE;
			const struct rtmsg *rt =
			    mnl_nlmsg_get_payload(nlh); /* family first in both */

			rc = pc_err_errno(err, PC_EIO, "%s %s (IPv%c; blackhole table %u)",
					  add ? "adding" : "deleting",
					  rule ? "a routing rule for the bridge"
					       : "the blackhole route",
					  rt->rtm_family == AF_INET ? '4' : '6', NFT_ROUTE_TABLE);
			goto out;
		}
		(*done)++;
	}
out:
	mnl_socket_close(nl);
	return rc;
}

int routing_ensure(const char *bridge, size_t *added, struct pc_err *err)
{
	struct rt_msg m[ROUTE_MSGS];
	size_t n = build_msgs(m, true, bridge), done = 0;
	int rc = rt_send(m, n, EEXIST, &done, err);

	if (rc == 0)
		*added = done;
	return rc;
}

int routing_remove(const char *bridge, struct pc_err *err)
{
	struct rt_msg m[ROUTE_MSGS];
	size_t n = build_msgs(m, false, bridge), done = 0;
	int rc = 0, r;

	/* rules first: without them the table is harmless */
	for (size_t i = 0; i < n; i++) {
		if (((struct nlmsghdr *)m[i].buf)->nlmsg_type == RTM_DELROUTE)
			continue;
		r = rt_send(&m[i], 1, ENOENT, &done, err);
		rc = rc ? rc : r;
	}
	for (size_t i = 0; i < n; i++) {
		if (((struct nlmsghdr *)m[i].buf)->nlmsg_type != RTM_DELROUTE)
			continue;
		r = rt_send(&m[i], 1, ESRCH, &done, err);
		rc = rc ? rc : r;
	}
	return rc;
}

static int monitor_open(int bus, const unsigned *groups, size_t n, struct pc_err *err)
{
	struct mnl_socket *nl = mnl_socket_open2(bus, SOCK_CLOEXEC | SOCK_NONBLOCK);
	int fd, rcvbuf = LINKS_MONITOR_RCVBUF;

	if (!nl)
		return pc_err_errno(err, PC_EIO, "netlink socket");
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
		goto fail;
	for (size_t i = 0; i < n; i++)
		if (mnl_socket_setsockopt(nl, NETLINK_ADD_MEMBERSHIP, (void *)&groups[i],
					  sizeof(groups[i])) < 0)
			goto fail;
	/* (a lost event is read as a change: ENOBUFS below) The engine's own
	 * install sends an event per table, chain, set and rule: at 100
	 * sandboxes (thousands of objects) they overflowed 1 MiB, the loss
	 * read as a foreign change, the tables were installed again, and lost
	 * again — the sandboxes stayed cut off (issue 20). Room for 1,000
	 * sandboxes' install (memory is used only while events wait; the
	 * engine keeps CAP_NET_ADMIN, which SO_RCVBUFFORCE needs). The routing
	 * monitor had 1 MiB: the end of a cut-off, bringing 1,000 ports up,
	 * sends their link-local routes, which overflowed it; the loss began
	 * a cut-off, whose end overflowed it again (issue 34, point 2). */
	if (bus == NETLINK_NETFILTER)
		rcvbuf = 1 << 27;
	links_monitor_rcvbuf(mnl_socket_get_fd(nl), rcvbuf);
	fd = dup(mnl_socket_get_fd(nl));
	mnl_socket_close(nl);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "dup");
	return fd;
fail:
	pc_err_errno(err, PC_EIO, "netlink bind (%s events)",
		     bus == NETLINK_ROUTE ? "routing rule" : "nftables");
	mnl_socket_close(nl);
	return PC_EIO;
}

int routing_monitor_open(struct pc_err *err)
{
	static const unsigned g[] = {RTNLGRP_IPV4_RULE, RTNLGRP_IPV6_RULE, RTNLGRP_IPV4_ROUTE,
				     RTNLGRP_IPV6_ROUTE};

	return monitor_open(NETLINK_ROUTE, g, sizeof(g) / sizeof(g[0]), err);
}

int nftwatch_open(struct pc_err *err)
{
	static const unsigned g[] = {NFNLGRP_NFTABLES};

	return monitor_open(NETLINK_NETFILTER, g, 1, err);
}

/* Is pid a thread of this process? (NFTA_GEN_PROC_PID is the committing
 * task's id, which is a thread's for the engine's own batches.) */
static bool our_task(uint32_t pid)
{
	char path[64];
	struct stat sb;

	if (pid == (uint32_t)getpid())
		return true;
	snprintf(path, sizeof(path), "/proc/self/task/%u", pid);
	return stat(path, &sb) == 0;
}

/* The table name of an nf_tables event: attribute 1 of every object kind
 * (NFTA_TABLE_NAME, NFTA_CHAIN_TABLE, NFTA_RULE_TABLE, NFTA_SET_TABLE,
 * NFTA_SET_ELEM_LIST_TABLE, NFTA_OBJ_TABLE, NFTA_FLOWTABLE_TABLE). */
static bool event_is_ours(const struct nlmsghdr *nlh)
{
	const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;

	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*g))
		return false;
	if (g->nfgen_family != NFPROTO_INET && g->nfgen_family != NFPROTO_BRIDGE)
		return false;
	mnl_attr_for_each(a, nlh, sizeof(*g))
	{
		if (mnl_attr_get_type(a) != 1)
			continue;
		return mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0 &&
		       strcmp(mnl_attr_get_str(a), NFT_TABLE) == 0;
	}
	return false;
}

int nftwatch_drain(int fd, struct nftwatch *w)
{
	char buf[16384];
	ssize_t r;
	int changed = 0;

	for (;;) {
		const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
		int n;

		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0)
			break;
		if (r < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) { /* events lost: assume the worst */
				w->touched = false;
				pc_strlcpy(w->who, "unknown (events lost)", sizeof(w->who));
				changed = 1;
				continue;
			}
			return PC_EIO;
		}
		n = (int)r;
		for (; mnl_nlmsg_ok(nlh, n) && nlh->nlmsg_len <= (unsigned)n;
		     nlh = mnl_nlmsg_next(nlh, &n)) {
			uint16_t type = nlh->nlmsg_type;
			const struct nlattr *a;
			uint32_t pid = 0;
			const char *comm = "?";

			if ((type >> 8) != NFNL_SUBSYS_NFTABLES)
				continue;
			if ((type & 0xff) != NFT_MSG_NEWGEN) {
				w->touched = w->touched || event_is_ours(nlh);
				continue;
			}
			/* the end of one committed batch: whose? */
			if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(struct nfgenmsg))
				continue;
			mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
			{
				if (mnl_attr_get_type(a) == NFTA_GEN_PROC_PID &&
				    mnl_attr_validate(a, MNL_TYPE_U32) == 0)
					pid = ntohl(mnl_attr_get_u32(a));
				else if (mnl_attr_get_type(a) == NFTA_GEN_PROC_NAME &&
					 mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
					comm = mnl_attr_get_str(a);
			}
			if (w->touched && !our_task(pid)) {
				snprintf(w->who, sizeof(w->who), "%.32s (pid %u)", comm, pid);
				changed = 1;
			} else if (!w->touched && !our_task(pid)) {
				snprintf(w->other_who, sizeof(w->other_who), "%.32s (pid %u)", comm,
					 pid);
				w->other = true;
			}
			w->touched = false;
		}
	}
	return changed;
}
