/* The launcher's network plumbing over netlink (libmnl): the bridge and its
 * addresses, the sandbox's namespace and veth, port isolation, addresses and
 * routes inside, and the engine's port set (libnftnl). Every request
 * buffer starts zeroed: libmnl leaves attribute padding unwritten, and the
 * kernel must not be handed stale stack bytes. */
#include "nft/nft.h"
#include "cli/cli_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/rtnetlink.h>
#include <linux/net_namespace.h>
#include <linux/veth.h>
#include <dirent.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* MNL_SOCKET_BUFFER_SIZE is a run-time value (a VLA cannot be initialised). */
#define NL_REQ_BUF 8192

#include <libmnl/libmnl.h>
#include <libnftnl/set.h>

/* ---- one request, one answer ------------------------------------------- */

struct nl {
	struct mnl_socket *sock;
	uint32_t portid, seq;
};

static int nl_open(struct nl *n, int proto, struct pc_err *err)
{
	n->sock = mnl_socket_open2(proto, SOCK_CLOEXEC);
	if (!n->sock)
		return pc_err_errno(err, PC_EIO, "netlink socket");
	if (mnl_socket_bind(n->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		mnl_socket_close(n->sock);
		n->sock = NULL;
		return pc_err_errno(err, PC_EIO, "netlink bind");
	}
	n->portid = mnl_socket_get_portid(n->sock);
	n->seq = (uint32_t)pc_now_mono_ms();
	return 0;
}

static void nl_close(struct nl *n)
{
	if (n->sock)
		mnl_socket_close(n->sock);
	n->sock = NULL;
}

/* Send nlh and run cb over the answer until the ACK, DONE or an error
 * (errno set, PC_EIO with what in err). */
static int nl_talk(struct nl *n, struct nlmsghdr *nlh, mnl_cb_t cb, void *data, const char *what,
		   struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	ssize_t r;
	int rc;

	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = ++n->seq;
	if (mnl_socket_sendto(n->sock, nlh, nlh->nlmsg_len) < 0)
		return pc_err_errno(err, PC_EIO, "%s", what);
	for (;;) {
		r = mnl_socket_recvfrom(n->sock, buf, sizeof(buf));
		if (r <= 0)
			return pc_err_errno(err, PC_EIO, "%s", what);
		rc = mnl_cb_run(buf, (size_t)r, n->seq, n->portid, cb, data);
		if (rc == MNL_CB_STOP)
			return 0;
		if (rc < 0)
			return pc_err_errno(err, errno == ENOENT ? PC_ENOENT : PC_EIO, "%s", what);
	}
}

/* Send len bytes holding `want` requests (each with NLM_F_ACK) at once and
 * read their acknowledgements; the first error fails (errno set). */
static int nl_acks(struct nl *n, const void *msgs, size_t len, int want, const char *what,
		   struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	int got = 0;

	if (mnl_socket_sendto(n->sock, msgs, len) < 0)
		return pc_err_errno(err, PC_EIO, "%s", what);
	while (got < want) {
		ssize_t r = mnl_socket_recvfrom(n->sock, buf, sizeof(buf));
		int left = (int)r;

		if (r <= 0)
			return pc_err_errno(err, PC_EIO, "%s", what);
		for (const struct nlmsghdr *h = (const void *)buf; mnl_nlmsg_ok(h, left);
		     h = mnl_nlmsg_next(h, &left)) {
			const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);

			if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_pid != n->portid)
				continue;
			if (h->nlmsg_len < mnl_nlmsg_size(sizeof(*e))) {
				errno = EBADMSG;
				return pc_err_errno(err, PC_EIO, "%s", what);
			}
			if (e->error) {
				errno = -e->error;
				return pc_err_errno(err, PC_EIO, "%s", what);
			}
			got++;
		}
	}
	return 0;
}

static struct nlmsghdr *nl_link_msg(char *buf, uint16_t type, uint16_t flags, int ifindex)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifinfomsg *ifi;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
	return nlh;
}

/* ---- links ----------------------------------------------------------- */

struct link_info {
	char kind[16];
	uint32_t ifindex, master, link; /* link: IFLA_LINK (a veth's peer) */
	int32_t link_nsid;		/* IFLA_LINK_NETNSID, -1 none */
	bool found;
};

/* Attribute tables by type, bounded: the running kernel may know more
 * attribute types than the headers we were built with. */
#define ATTR_CB(fn, max)                                                                           \
	static int fn(const struct nlattr *a, void *data)                                          \
	{                                                                                          \
		const struct nlattr **tb = data;                                                   \
		if (mnl_attr_type_valid(a, max) > 0)                                               \
			tb[mnl_attr_get_type(a)] = a;                                              \
		return MNL_CB_OK;                                                                  \
	}
ATTR_CB(link_attr_cb, IFLA_MAX)
ATTR_CB(info_attr_cb, IFLA_INFO_MAX)
ATTR_CB(addr_attr_cb, IFA_MAX)

static int link_info_cb(const struct nlmsghdr *nlh, void *data)
{
	struct link_info *li = data;
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *tb[IFLA_MAX + 1] = {0}, *ti[IFLA_INFO_MAX + 1] = {0};

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_attr_parse(nlh, sizeof(*ifi), link_attr_cb, tb) < 0)
		return MNL_CB_OK;
	li->found = true;
	li->ifindex = (uint32_t)ifi->ifi_index;
	li->link_nsid = -1;
	if (tb[IFLA_LINK] && mnl_attr_validate(tb[IFLA_LINK], MNL_TYPE_U32) == 0)
		li->link = mnl_attr_get_u32(tb[IFLA_LINK]);
	if (tb[IFLA_LINK_NETNSID] && mnl_attr_validate(tb[IFLA_LINK_NETNSID], MNL_TYPE_U32) == 0)
		li->link_nsid = (int32_t)mnl_attr_get_u32(tb[IFLA_LINK_NETNSID]);
	if (tb[IFLA_MASTER] && mnl_attr_validate(tb[IFLA_MASTER], MNL_TYPE_U32) == 0)
		li->master = mnl_attr_get_u32(tb[IFLA_MASTER]);
	if (tb[IFLA_LINKINFO] && mnl_attr_parse_nested(tb[IFLA_LINKINFO], info_attr_cb, ti) >= 0 &&
	    ti[IFLA_INFO_KIND] && mnl_attr_validate(ti[IFLA_INFO_KIND], MNL_TYPE_STRING) == 0)
		pc_strlcpy(li->kind, mnl_attr_get_str(ti[IFLA_INFO_KIND]), sizeof(li->kind));
	return MNL_CB_OK;
}

static int link_get(struct nl *n, const char *name, struct link_info *li, struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	struct nlmsghdr *nlh = nl_link_msg(buf, RTM_GETLINK, 0, 0);
	int rc;

	memset(li, 0, sizeof(*li));
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	rc = nl_talk(n, nlh, link_info_cb, li, "reading the link", err);
	/* the kernel answers ENODEV for a name that does not exist */
	if (rc < 0 && (errno == ENODEV || errno == ENOENT))
		return pc_err_set(err, PC_ENOENT, "%s does not exist", name);
	return rc;
}

struct addr_dump {
	uint32_t ifindex;
	struct pc_prefix v4, v6;
};

static int addr_cb(const struct nlmsghdr *nlh, void *data)
{
	struct addr_dump *d = data;
	const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *tb[IFA_MAX + 1] = {0}, *a;
	struct pc_prefix *p;

	if (nlh->nlmsg_type != RTM_NEWADDR || ifa->ifa_index != d->ifindex ||
	    ifa->ifa_scope != RT_SCOPE_UNIVERSE ||
	    mnl_attr_parse(nlh, sizeof(*ifa), addr_attr_cb, tb) < 0)
		return MNL_CB_OK;
	a = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
	p = ifa->ifa_family == AF_INET ? &d->v4 : ifa->ifa_family == AF_INET6 ? &d->v6 : NULL;
	if (!a || !p || p->addr.family) /* the first address of each family */
		return MNL_CB_OK;
	if (mnl_attr_get_payload_len(a) != (ifa->ifa_family == AF_INET ? 4u : 16u))
		return MNL_CB_OK;
	p->addr.family = ifa->ifa_family;
	memcpy(p->addr.a, mnl_attr_get_payload(a), mnl_attr_get_payload_len(a));
	p->len = ifa->ifa_prefixlen;
	return MNL_CB_OK;
}

/* The first global address of each family on ifindex. */
static int addrs_of(struct nl *n, uint32_t ifindex, struct addr_dump *d, struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifaddrmsg *ifa;

	memset(d, 0, sizeof(*d));
	d->ifindex = ifindex;
	nlh->nlmsg_type = RTM_GETADDR;
	nlh->nlmsg_flags = NLM_F_DUMP;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_UNSPEC;
	return nl_talk(n, nlh, addr_cb, d, "reading addresses", err);
}

/* name's link (and, with d, its addresses) in one rtnetlink session;
 * bridge_only: a link that is not a bridge is refused before its addresses
 * are read. */
static int link_query(const char *name, bool bridge_only, struct link_info *li, struct addr_dump *d,
		      struct pc_err *err)
{
	struct nl n = {0};
	int rc;

	if ((rc = nl_open(&n, NETLINK_ROUTE, err)) < 0)
		return rc;
	if ((rc = link_get(&n, name, li, err)) < 0)
		goto out;
	if (bridge_only && strcmp(li->kind, "bridge") != 0) {
		rc = pc_err_set(err, PC_EINVAL, "%s is a%s%s link, not a bridge", name,
				li->kind[0] ? " " : "n ordinary", li->kind);
		goto out;
	}
	if (d)
		rc = addrs_of(&n, li->ifindex, d, err);
out:
	nl_close(&n);
	return rc;
}

int sbnet_link_kind(const char *name, char *kind, size_t len, uint32_t *ifindex, uint32_t *master,
		    struct pc_err *err)
{
	struct link_info li;
	int rc = link_query(name, false, &li, NULL, err);

	if (rc < 0)
		return rc;
	pc_strlcpy(kind, li.kind, len);
	*ifindex = li.ifindex;
	*master = li.master;
	return 0;
}

int sbnet_link_addrs(const char *name, struct pc_prefix *v4, struct pc_prefix *v6,
		     struct pc_err *err)
{
	struct link_info li;
	struct addr_dump d;
	int rc = link_query(name, false, &li, &d, err);

	if (rc == 0) {
		*v4 = d.v4;
		*v6 = d.v6;
	}
	return rc;
}

int sbnet_bridge_get(const char *name, struct sb_bridge *out, struct pc_err *err)
{
	struct link_info li;
	struct addr_dump d;
	int rc = link_query(name, true, &li, &d, err);

	if (rc < 0)
		return rc;
	out->ifindex = li.ifindex;
	out->net4 = d.v4;
	out->net6 = d.v6;
	return rc;
}

/* ---- the namespace and the veth ---------------------------------------- */

static int link_set_up(struct nl *n, uint32_t ifindex, struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	struct nlmsghdr *nlh = nl_link_msg(buf, RTM_NEWLINK, 0, (int)ifindex);
	struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);

	ifi->ifi_flags = IFF_UP;
	ifi->ifi_change = IFF_UP;
	return nl_talk(n, nlh, NULL, NULL, "setting the link up", err);
}

int sbnet_netns_new(int *fd, struct pc_err *err)
{
	struct nl n = {0};
	int orig, nsfd = -1, rc = 0;

	orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (orig < 0)
		return pc_err_errno(err, PC_EIO, "opening our network namespace");
	if (unshare(CLONE_NEWNET) < 0) {
		close(orig);
		return pc_err_errno(err, PC_EIO, "creating a network namespace");
	}
	nsfd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (nsfd < 0)
		rc = pc_err_errno(err, PC_EIO, "opening the new network namespace");
	/* lo inside: a netlink socket belongs to the namespace it was made in */
	if (!rc && (rc = nl_open(&n, NETLINK_ROUTE, err)) == 0) {
		rc = link_set_up(&n, 1, err);
		nl_close(&n);
	}
	/* back home whatever happened: the launcher must never stay inside */
	if (setns(orig, CLONE_NEWNET) < 0) {
		close(orig);
		if (nsfd >= 0)
			close(nsfd);
		return pc_err_errno(err, PC_EIO, "returning to the gateway's network namespace");
	}
	close(orig);
	if (rc < 0) {
		if (nsfd >= 0)
			close(nsfd);
		return rc;
	}
	*fd = nsfd;
	return 0;
}

int sbnet_veth_add(const char *port, int netns_fd, const uint8_t mac[6], struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	struct nl n = {0};
	struct nlmsghdr *nlh;
	struct nlattr *linkinfo, *data, *peer;
	struct ifinfomsg *pifi;
	int rc;

	if ((rc = nl_open(&n, NETLINK_ROUTE, err)) < 0)
		return rc;
	nlh = nl_link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, port);
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	/* the peer's attributes follow its own ifinfomsg inside the nest */
	pifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*pifi));
	pifi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, SB_PEER_IFNAME);
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)netns_fd);
	mnl_attr_put(nlh, IFLA_ADDRESS, 6, mac);
	mnl_attr_nest_end(nlh, peer);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, linkinfo);
	rc = nl_talk(&n, nlh, NULL, NULL, "creating the veth pair", err);
	if (rc < 0 && errno == EEXIST)
		rc = pc_err_set(err, PC_EEXIST, "a link named %s exists already", port);
	nl_close(&n);
	return rc;
}

int sbnet_port_attach(const char *port, uint32_t br_ifindex, bool *enslaved, struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	struct nl n = {0};
	struct link_info li;
	struct nlmsghdr *nlh;
	struct nlattr *linkinfo, *data;
	struct mnl_nlmsg_batch *b;
	bool did = false;
	int rc;

	if ((rc = nl_open(&n, NETLINK_ROUTE, err)) < 0)
		return rc;
	if ((rc = link_get(&n, port, &li, err)) < 0)
		goto out;
	if (li.master && li.master != br_ifindex) {
		rc = pc_err_set(err, PC_EEXIST,
				"port %s belongs to another bridge or device (ifindex %u)", port,
				li.master);
		goto out;
	}
	/* Enslaving and isolating are two requests (a port can be isolated only
	 * once it is a port); they go in one message buffer, so the kernel runs
	 * them back to back, and whoever watches link events (the engine's own
	 * check) next sees the port isolated. It stays down until then. */
	b = mnl_nlmsg_batch_start(buf, sizeof(buf));
	if (!li.master) {
		nlh = nl_link_msg(mnl_nlmsg_batch_current(b), RTM_NEWLINK,
				  NLM_F_REQUEST | NLM_F_ACK, (int)li.ifindex);
		nlh->nlmsg_seq = ++n.seq;
		mnl_attr_put_u32(nlh, IFLA_MASTER, br_ifindex);
		mnl_nlmsg_batch_next(b);
		did = true;
	}
	/* isolated: the port can talk to the bridge (the gateway) only, never
	 * to another port — the first layer; the bridge table is the second */
	nlh = nl_link_msg(mnl_nlmsg_batch_current(b), RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK,
			  (int)li.ifindex);
	nlh->nlmsg_seq = ++n.seq;
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_SLAVE_KIND, "bridge");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_SLAVE_DATA);
	mnl_attr_put_u8(nlh, IFLA_BRPORT_ISOLATED, 1);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, linkinfo);
	mnl_nlmsg_batch_next(b);
	rc = nl_acks(&n, mnl_nlmsg_batch_head(b), mnl_nlmsg_batch_size(b), did ? 2 : 1,
		     "adding the port to the bridge, isolated", err);
	mnl_nlmsg_batch_stop(b);
	if (rc < 0)
		goto out;
	rc = link_set_up(&n, li.ifindex, err);
out:
	nl_close(&n);
	if (rc == 0)
		*enslaved = did;
	return rc;
}

int sbnet_port_release(const char *port, struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	struct nl n = {0};
	struct link_info li;
	struct nlmsghdr *nlh;
	int rc;

	if ((rc = nl_open(&n, NETLINK_ROUTE, err)) < 0)
		return rc;
	rc = link_get(&n, port, &li, err);
	if (rc == PC_ENOENT) {
		rc = 0; /* the VM took its tap with it */
	} else if (rc == 0) {
		nlh = nl_link_msg(buf, RTM_NEWLINK, 0, (int)li.ifindex);
		mnl_attr_put_u32(nlh, IFLA_MASTER, 0);
		rc = nl_talk(&n, nlh, NULL, NULL, "taking the port off the bridge", err);
	}
	nl_close(&n);
	return rc;
}

int sbnet_link_del(const char *name, struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	struct nl n = {0};
	struct nlmsghdr *nlh;
	int rc;

	if ((rc = nl_open(&n, NETLINK_ROUTE, err)) < 0)
		return rc;
	nlh = nl_link_msg(buf, RTM_DELLINK, 0, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	rc = nl_talk(&n, nlh, NULL, NULL, "deleting the link", err);
	if (rc < 0 && (errno == ENODEV || errno == ENOENT))
		rc = 0;
	nl_close(&n);
	return rc;
}

/* ---- inside the sandbox ------------------------------------------------- */

static int addr_add(struct nl *n, uint32_t ifindex, const struct pc_addr *a, uint8_t plen,
		    struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifaddrmsg *ifa;
	size_t alen = pc_addr_len(a);

	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = a->family;
	ifa->ifa_prefixlen = plen;
	/* no duplicate address detection: the launcher chose a free address,
	 * and a tentative address would delay the command's first packets */
	ifa->ifa_flags = a->family == AF_INET6 ? IFA_F_NODAD : 0;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = ifindex;
	mnl_attr_put(nlh, IFA_LOCAL, alen, a->a);
	mnl_attr_put(nlh, IFA_ADDRESS, alen, a->a);
	return nl_talk(n, nlh, NULL, NULL, "adding the sandbox's address", err);
}

static int route_default(struct nl *n, uint32_t ifindex, const struct pc_addr *gw,
			 struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtmsg *rtm;

	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = gw->family;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put(nlh, RTA_GATEWAY, pc_addr_len(gw), gw->a);
	mnl_attr_put_u32(nlh, RTA_OIF, ifindex);
	return nl_talk(n, nlh, NULL, NULL, "adding the default route via the gateway", err);
}

int sbnet_sandbox_config(int netns_fd, const struct pc_addr *a4, uint8_t p4,
			 const struct pc_addr *gw4, const struct pc_addr *a6, uint8_t p6,
			 const struct pc_addr *gw6, struct pc_err *err)
{
	struct nl n = {0};
	struct link_info li;
	int orig, rc;

	orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (orig < 0)
		return pc_err_errno(err, PC_EIO, "opening our network namespace");
	if (setns(netns_fd, CLONE_NEWNET) < 0) {
		close(orig);
		return pc_err_errno(err, PC_EIO, "entering the sandbox's namespace");
	}
	rc = nl_open(&n, NETLINK_ROUTE, err);
	if (setns(orig, CLONE_NEWNET) < 0) {
		/* cannot happen short of a kernel failure; never carry on in the
		 * wrong namespace */
		close(orig);
		nl_close(&n);
		return pc_err_errno(err, PC_EIO, "returning to the gateway's network namespace");
	}
	close(orig);
	if (rc < 0)
		return rc;
	if ((rc = link_get(&n, SB_PEER_IFNAME, &li, err)) < 0)
		goto out;
	if ((rc = link_set_up(&n, li.ifindex, err)) < 0)
		goto out;
	if (a4->family && ((rc = addr_add(&n, li.ifindex, a4, p4, err)) < 0 ||
			   (rc = route_default(&n, li.ifindex, gw4, err)) < 0))
		goto out;
	if (a6->family && ((rc = addr_add(&n, li.ifindex, a6, p6, err)) < 0 ||
			   (rc = route_default(&n, li.ifindex, gw6, err)) < 0))
		goto out;
out:
	nl_close(&n);
	return rc;
}

/* ---- what a sandbox's namespace holds --------------------------------- */

/* A netlink socket of the namespace netns_fd: a socket belongs to the
 * namespace it was made in, so the launcher enters it only for socket()
 * and is back at once (it must never run anything else inside). */
static int nl_open_in(struct nl *n, int netns_fd, struct pc_err *err)
{
	int orig = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC), rc;

	if (orig < 0)
		return pc_err_errno(err, PC_EIO, "opening our network namespace");
	if (setns(netns_fd, CLONE_NEWNET) < 0) {
		close(orig);
		return pc_err_errno(err, PC_EIO, "entering the sandbox's namespace");
	}
	rc = nl_open(n, NETLINK_ROUTE, err);
	if (setns(orig, CLONE_NEWNET) < 0) {
		close(orig);
		nl_close(n);
		return pc_err_errno(err, PC_EIO, "returning to the gateway's network namespace");
	}
	close(orig);
	return rc;
}

struct inv_ctx {
	struct sbnet_inv *inv;
	uint32_t want_ifindex;
	const char *want_name;
	char names[64][IFNAMSIZ]; /* ifindex -> name, for the routes */
	uint32_t idx[64];
	size_t n;
};

static void cat(char *dst, size_t len, const char *sep, const char *what)
{
	size_t l = strlen(dst);

	if (l + 1 < len)
		snprintf(dst + l, len - l, "%s%s", l ? sep : "", what);
}

static int inv_link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct inv_ctx *c = data;
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *tb[IFLA_MAX + 1] = {0}, *ti[IFLA_INFO_MAX + 1] = {0};
	char name[IFNAMSIZ] = "?", kind[24] = "", item[64];

	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_attr_parse(nlh, sizeof(*ifi), link_attr_cb, tb) < 0)
		return MNL_CB_OK;
	if (tb[IFLA_IFNAME] && mnl_attr_validate(tb[IFLA_IFNAME], MNL_TYPE_STRING) == 0)
		pc_strlcpy(name, mnl_attr_get_str(tb[IFLA_IFNAME]), sizeof(name));
	if (tb[IFLA_LINKINFO] && mnl_attr_parse_nested(tb[IFLA_LINKINFO], info_attr_cb, ti) >= 0 &&
	    ti[IFLA_INFO_KIND] && mnl_attr_validate(ti[IFLA_INFO_KIND], MNL_TYPE_STRING) == 0)
		pc_strlcpy(kind, mnl_attr_get_str(ti[IFLA_INFO_KIND]), sizeof(kind));
	if (c->n < 64) {
		pc_strlcpy(c->names[c->n], name, IFNAMSIZ);
		c->idx[c->n++] = (uint32_t)ifi->ifi_index;
	}
	cat(c->inv->links, sizeof(c->inv->links), ", ", name);
	c->inv->n_links++;
	if (ifi->ifi_flags & IFF_LOOPBACK)
		return MNL_CB_OK;
	if ((c->want_ifindex && (uint32_t)ifi->ifi_index == c->want_ifindex) ||
	    (c->want_name && strcmp(name, c->want_name) == 0)) {
		c->inv->found = true;
		return MNL_CB_OK;
	}
	snprintf(item, sizeof(item), "%s (%s)", name, kind[0] ? kind : "a device of no kind");
	cat(c->inv->extra, sizeof(c->inv->extra), ", ", item);
	c->inv->n_extra++;
	return MNL_CB_OK;
}

static const char *inv_ifname(const struct inv_ctx *c, uint32_t ifindex)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->idx[i] == ifindex)
			return c->names[i];
	return "?";
}

static int inv_route_cb(const struct nlmsghdr *nlh, void *data)
{
	struct inv_ctx *c = data;
	const struct rtmsg *rt = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;
	struct pc_addr dst = {0}, gw = {0};
	uint32_t oif = 0, table = rt->rtm_table;
	char ds[64] = "default", gs[64], item[200];

	if (nlh->nlmsg_type != RTM_NEWROUTE)
		return MNL_CB_OK;
	mnl_attr_for_each(a, nlh, sizeof(*rt))
	{
		size_t alen = mnl_attr_get_payload_len(a);
		uint16_t t = mnl_attr_get_type(a);

		if ((t == RTA_DST || t == RTA_GATEWAY) && (alen == 4 || alen == 16)) {
			struct pc_addr *p = t == RTA_DST ? &dst : &gw;

			p->family = alen == 4 ? AF_INET : AF_INET6;
			memcpy(p->a, mnl_attr_get_payload(a), alen);
		} else if (t == RTA_OIF && mnl_attr_validate(a, MNL_TYPE_U32) == 0) {
			oif = mnl_attr_get_u32(a);
		} else if (t == RTA_TABLE && mnl_attr_validate(a, MNL_TYPE_U32) == 0) {
			table = mnl_attr_get_u32(a);
		}
	}
	/* the local table and IPv6 multicast/link-local are the kernel's own */
	if (table == RT_TABLE_LOCAL || rt->rtm_type == RTN_MULTICAST ||
	    (rt->rtm_family == AF_INET6 && dst.family && dst.a[0] == 0xfe && dst.a[1] == 0x80))
		return MNL_CB_OK;
	if (dst.family) {
		pc_addr_str(&dst, ds, sizeof(ds));
		snprintf(ds + strlen(ds), sizeof(ds) - strlen(ds), "/%u", rt->rtm_dst_len);
	}
	snprintf(item, sizeof(item), "%s%s%s dev %s%s", ds, gw.family ? " via " : "",
		 gw.family ? pc_addr_str(&gw, gs, sizeof(gs)) : "", inv_ifname(c, oif),
		 table != RT_TABLE_MAIN ? " (another table)" : "");
	cat(c->inv->routes, sizeof(c->inv->routes), "; ", item);
	return MNL_CB_OK;
}

int sbnet_netns_inventory(int netns_fd, uint32_t want_ifindex, const char *want_name,
			  struct sbnet_inv *inv, struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	struct inv_ctx *c = calloc(1, sizeof(*c));
	struct nl n = {0};
	struct nlmsghdr *nlh;
	struct rtmsg *rt;
	struct sbnet_inv out = {0};
	int rc;

	if (!c)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	c->inv = &out;
	c->want_ifindex = want_ifindex;
	c->want_name = want_name;
	if ((rc = nl_open_in(&n, netns_fd, err)) < 0)
		goto out;
	nlh = nl_link_msg(buf, RTM_GETLINK, NLM_F_DUMP, 0);
	if ((rc = nl_talk(&n, nlh, inv_link_cb, c, "reading the sandbox's links", err)) < 0)
		goto out;
	memset(buf, 0, sizeof(buf));
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_GETROUTE;
	nlh->nlmsg_flags = NLM_F_DUMP;
	rt = mnl_nlmsg_put_extra_header(nlh, sizeof(*rt));
	rt->rtm_family = AF_UNSPEC;
	if ((rc = nl_talk(&n, nlh, inv_route_cb, c, "reading the sandbox's routes", err)) < 0)
		goto out;
	*inv = out;
out:
	nl_close(&n);
	free(c);
	return rc;
}

/* The id the gateway's namespace gives the namespace of fd (RTM_GETNSID),
 * -1 none. */
static int32_t nsid_of(struct nl *n, int fd)
{
	char buf[NL_REQ_BUF] = {0};
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtgenmsg *g;
	int32_t id = -1;
	ssize_t r;

	nlh->nlmsg_type = RTM_GETNSID;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	nlh->nlmsg_seq = ++n->seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->rtgen_family = AF_UNSPEC;
	mnl_attr_put_u32(nlh, NETNSA_FD, (uint32_t)fd);
	if (mnl_socket_sendto(n->sock, nlh, nlh->nlmsg_len) < 0)
		return -1;
	r = mnl_socket_recvfrom(n->sock, buf, sizeof(buf));
	if (r > 0 && mnl_nlmsg_ok((struct nlmsghdr *)buf, (int)r) &&
	    ((struct nlmsghdr *)buf)->nlmsg_type == RTM_NEWNSID) {
		const struct nlattr *a;

		mnl_attr_for_each(a, (struct nlmsghdr *)buf, sizeof(struct rtgenmsg))
		{
			if (mnl_attr_get_type(a) == NETNSA_NSID &&
			    mnl_attr_validate(a, MNL_TYPE_U32) == 0)
				id = (int32_t)mnl_attr_get_u32(a);
		}
	}
	return id;
}

/* Try one namespace file: *fd when the gateway calls it nsid. */
static bool peer_try(struct nl *n, const char *path, int32_t nsid, int *fd)
{
	int f = open(path, O_RDONLY | O_CLOEXEC);

	if (f < 0)
		return false;
	if (nsid_of(n, f) == nsid) {
		*fd = f;
		return true;
	}
	close(f);
	return false;
}

int sbnet_peer_netns(const char *port, int *fd, uint32_t *peer_ifindex, char *where, size_t len,
		     struct pc_err *err)
{
	static const char *const dirs[] = {"/run/netns", "/run/docker/netns", "/proc"};
	struct link_info li;
	struct nl n = {0};
	int rc, f = -1;

	if ((rc = nl_open(&n, NETLINK_ROUTE, err)) < 0)
		return rc;
	if ((rc = link_get(&n, port, &li, err)) < 0)
		goto out;
	if (strcmp(li.kind, "tun") == 0) {
		rc = pc_err_set(err, PC_ENOENT,
				"%s is a tap: a VM's inside is not visible from the "
				"gateway",
				port);
		goto out;
	}
	if (strcmp(li.kind, "veth") != 0 || li.link_nsid < 0) {
		rc = pc_err_set(err, PC_ENOENT, "%s is not a veth to another namespace", port);
		goto out;
	}
	for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]) && f < 0; d++) {
		DIR *dp = opendir(dirs[d]);
		struct dirent *e;

		while (dp && f < 0 && (e = readdir(dp))) {
			char p[300];
			bool proc = d == 2;

			if (e->d_name[0] == '.' || (proc && atoi(e->d_name) <= 0))
				continue;
			snprintf(p, sizeof(p), proc ? "%s/%s/ns/net" : "%s/%s", dirs[d], e->d_name);
			if (peer_try(&n, p, li.link_nsid, &f))
				pc_strlcpy(where, p, len);
		}
		if (dp)
			closedir(dp);
	}
	if (f < 0) {
		rc = pc_err_set(err, PC_ENOENT,
				"no process holds the namespace of %s's peer and it is not in "
				"/run/netns",
				port);
		goto out;
	}
	*fd = f;
	*peer_ifindex = li.link;
out:
	nl_close(&n);
	return rc;
}

/* ---- the engine's port set ------------------------------------------- */

static int set_elems_cb(const struct nlmsghdr *nlh, void *data)
{
	return nftnl_set_elems_nlmsg_parse(nlh, data) < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

int sbnet_port_in_set(uint32_t ifindex, bool *in, struct pc_err *err)
{
	char buf[NL_REQ_BUF] = {0};
	struct nl n = {0};
	struct nftnl_set *set;
	struct nftnl_set_elems_iter *it = NULL;
	struct nftnl_set_elem *e;
	struct nlmsghdr *nlh;
	bool found = false;
	int rc;

	set = nftnl_set_alloc();
	if (!set)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	if ((rc = nl_open(&n, NETLINK_NETFILTER, err)) < 0)
		goto out;
	nftnl_set_set_str(set, NFTNL_SET_TABLE, NFT_TABLE);
	nftnl_set_set_str(set, NFTNL_SET_NAME, NFT_SET_PORTS);
	nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_BRIDGE, NLM_F_DUMP, 0);
	nftnl_set_elems_nlmsg_build_payload(nlh, set);
	rc = nl_talk(&n, nlh, set_elems_cb, set, "reading the engine's port set", err);
	if (rc < 0) {
		if (rc == PC_ENOENT)
			pc_err_set(err, PC_ENOENT,
				   "the engine's table bridge portcullis (set ports) is missing");
		goto out;
	}
	it = nftnl_set_elems_iter_create(set);
	if (!it) {
		rc = pc_err_set(err, PC_ENOMEM, "out of memory");
		goto out;
	}
	while ((e = nftnl_set_elems_iter_next(it))) {
		uint32_t len = 0, v;
		const void *k = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);

		/* iface_index keys are host-endian (docs/engine.md) */
		if (k && len == sizeof(v)) {
			memcpy(&v, k, sizeof(v));
			if (v == ifindex)
				found = true;
		}
	}
	*in = found;
out:
	nftnl_set_elems_iter_destroy(it);
	nftnl_set_free(set);
	nl_close(&n);
	return rc;
}
