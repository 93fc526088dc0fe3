/* The sandbox bridge's ports, read over rtnetlink, and the link-event
 * socket that tells the engine when they change; plus the port map the
 * queue threads use to name the port a packet came in on. */
#include "engine/engine_int.h"

#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

struct link_dump {
	const char *bridge;
	uint32_t br_ifindex;
	unsigned br_flags;
	struct nft_port *all; /* every link with a master */
	uint32_t *master;
	size_t n, cap;
	int err;
};

static int link_attr_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	int type = mnl_attr_get_type(a);

	if (mnl_attr_type_valid(a, IFLA_MAX) < 0)
		return MNL_CB_OK;
	tb[type] = a;
	return MNL_CB_OK;
}

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct link_dump *d = data;
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *tb[IFLA_MAX + 1];
	const char *name;

	memset(tb, 0, sizeof(tb));
	if (mnl_attr_parse(nlh, sizeof(*ifi), link_attr_cb, tb) < 0 || !tb[IFLA_IFNAME])
		return MNL_CB_OK;
	if (mnl_attr_validate(tb[IFLA_IFNAME], MNL_TYPE_NUL_STRING) < 0)
		return MNL_CB_OK;
	name = mnl_attr_get_str(tb[IFLA_IFNAME]);
	if (strcmp(name, d->bridge) == 0) {
		d->br_ifindex = (uint32_t)ifi->ifi_index;
		d->br_flags = ifi->ifi_flags;
	}
	if (tb[IFLA_MASTER] && mnl_attr_validate(tb[IFLA_MASTER], MNL_TYPE_U32) == 0) {
		if (d->n == d->cap) {
			size_t cap = d->cap ? d->cap * 2 : 16;
			struct nft_port *np = realloc(d->all, cap * sizeof(*np));
			uint32_t *nm = np ? realloc(d->master, cap * sizeof(*nm)) : NULL;

			if (np)
				d->all = np;
			if (!nm) {
				d->err = PC_ENOMEM;
				return MNL_CB_ERROR;
			}
			d->master = nm;
			d->cap = cap;
		}
		pc_strlcpy(d->all[d->n].name, name, sizeof(d->all[d->n].name));
		d->all[d->n].ifindex = (uint32_t)ifi->ifi_index;
		d->master[d->n++] = mnl_attr_get_u32(tb[IFLA_MASTER]);
	}
	return MNL_CB_OK;
}

int rtnl_open(struct mnl_socket **out, uint32_t *portid, struct pc_err *err)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);

	if (!nl)
		return pc_err_errno(err, PC_EIO, "rtnetlink socket");
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		int rc = pc_err_errno(err, PC_EIO, "rtnetlink bind");

		mnl_socket_close(nl);
		return rc;
	}
	*portid = mnl_socket_get_portid(nl);
	*out = nl;
	return 0;
}

int links_bridge_ports(const char *bridge, struct nft_port **ports, size_t *n, uint32_t *br_ifindex,
		       unsigned *br_flags, struct pc_err *err)
{
	char buf[8192] = {
	    0}; /* no stale bytes to the kernel (a fixed size: a VLA cannot be initialised) */
	struct mnl_socket *nl;
	struct nlmsghdr *nlh;
	struct rtgenmsg *rt;
	struct link_dump d = {.bridge = bridge};
	struct nft_port *out = NULL;
	size_t k = 0;
	uint32_t seq = (uint32_t)pc_now_mono_ms(), portid;
	int rc = 0;
	ssize_t r;

	rc = rtnl_open(&nl, &portid, err);
	if (rc < 0)
		return rc;
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_GETLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = seq;
	rt = mnl_nlmsg_put_extra_header(nlh, sizeof(*rt));
	rt->rtgen_family = AF_PACKET;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		rc = pc_err_errno(err, PC_EIO, "RTM_GETLINK");
		goto out;
	}
	while ((r = mnl_socket_recvfrom(nl, buf, sizeof(buf))) > 0) {
		int cb = mnl_cb_run(buf, (size_t)r, seq, portid, link_cb, &d);

		if (cb == MNL_CB_STOP)
			break;
		if (cb < 0) {
			rc = d.err ? pc_err_set(err, d.err, "link dump: out of memory")
				   : pc_err_errno(err, PC_EIO, "link dump");
			goto out;
		}
	}
	if (r < 0) {
		rc = pc_err_errno(err, PC_EIO, "link dump");
		goto out;
	}
	if (d.br_ifindex) {
		out = calloc(d.n ? d.n : 1, sizeof(*out));
		if (!out) {
			rc = pc_err_set(err, PC_ENOMEM, "link dump: out of memory");
			goto out;
		}
		for (size_t i = 0; i < d.n; i++)
			if (d.master[i] == d.br_ifindex)
				out[k++] = d.all[i];
	}
	*ports = out;
	*n = k;
	*br_ifindex = d.br_ifindex;
	if (br_flags)
		*br_flags = d.br_flags;
out:
	free(d.all);
	free(d.master);
	mnl_socket_close(nl);
	return rc;
}

static int local_add(struct dnsguard_local **v, size_t *n, size_t *cap, const struct pc_prefix *p,
		     const char *what)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].prefix.len == p->len && pc_addr_eq(&(*v)[i].prefix.addr, &p->addr))
			return 0;
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct dnsguard_local *nv = realloc(*v, nc * sizeof(*nv));

		if (!nv)
			return PC_ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[*n].prefix = *p;
	(*v)[(*n)++].what = what;
	return 0;
}

/* The prefix length of a netmask sockaddr (its leading one bits). */
static uint8_t mask_len(const struct sockaddr *m, size_t bytes)
{
	const uint8_t *b =
	    m->sa_family == AF_INET
		? (const uint8_t *)&((const struct sockaddr_in *)(const void *)m)->sin_addr
		: (const uint8_t *)&((const struct sockaddr_in6 *)(const void *)m)->sin6_addr;
	uint8_t len = 0;

	for (size_t i = 0; i < bytes && b[i] == 0xff; i++)
		len += 8;
	if (len < bytes * 8)
		for (uint8_t x = b[len / 8]; x & 0x80; x = (uint8_t)(x << 1))
			len++;
	return len;
}

int links_local_prefixes(const struct config *cfg, struct dnsguard_local **out, size_t *n,
			 struct pc_err *err)
{
	static const char gw[] = "an address of the gateway";
	static const char net[] = "the sandbox bridge's subnet";
	static const char pool[] = "the sandbox address pool";
	struct ifaddrs *ifa = NULL;
	struct dnsguard_local *v = NULL;
	size_t k = 0, cap = 0;
	int rc = 0;

	/* Every address of every interface of this namespace: the gateway is
	 * never an upstream host; the bridge's subnets are the sandboxes. */
	if (getifaddrs(&ifa) < 0)
		return pc_err_errno(err, PC_EIO, "getifaddrs");
	for (const struct ifaddrs *i = ifa; i && rc == 0; i = i->ifa_next) {
		struct pc_prefix p = {0};
		size_t bytes;

		if (!i->ifa_addr ||
		    (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		bytes = i->ifa_addr->sa_family == AF_INET ? 4 : 16;
		p.addr.family = (uint8_t)i->ifa_addr->sa_family;
		memcpy(p.addr.a,
		       bytes == 4
			   ? (const void *)&((const struct sockaddr_in *)(const void *)i->ifa_addr)
				 ->sin_addr
			   : (const void *)&((const struct sockaddr_in6 *)(const void *)i->ifa_addr)
				 ->sin6_addr,
		       bytes);
		p.len = (uint8_t)(bytes * 8);
		rc = local_add(&v, &k, &cap, &p, gw);
		if (rc || strcmp(i->ifa_name, cfg->bridge) != 0 || !i->ifa_netmask ||
		    i->ifa_netmask->sa_family != i->ifa_addr->sa_family)
			continue;
		p.len = mask_len(i->ifa_netmask, bytes);
		for (size_t b = p.len; b < bytes * 8; b++) /* the network, host bits cleared */
			p.addr.a[b / 8] &= (uint8_t) ~(0x80u >> (b % 8));
		rc = local_add(&v, &k, &cap, &p, net);
	}
	if (rc == 0 && cfg->sandbox.pool4.addr.family)
		rc = local_add(&v, &k, &cap, &cfg->sandbox.pool4, pool);
	if (rc == 0 && cfg->sandbox.pool6.addr.family)
		rc = local_add(&v, &k, &cap, &cfg->sandbox.pool6, pool);
	freeifaddrs(ifa);
	if (rc) {
		free(v);
		return pc_err_set(err, rc, "local addresses: out of memory");
	}
	*out = v;
	*n = k;
	return 0;
}

void links_monitor_rcvbuf(int fd, int bytes)
{
	/* FORCE passes net.core.rmem_max, which a busy gateway's default
	 * (208 KiB) would cap; the engine keeps CAP_NET_ADMIN, which it needs.
	 * Unprivileged (tests of the library): the ordinary, capped, one. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

int links_monitor_open(struct pc_err *err)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC | SOCK_NONBLOCK);
	int fd;

	if (!nl)
		return pc_err_errno(err, PC_EIO, "rtnetlink socket");
	/* Address events too: the DNS guard's set of the gateway's own
	 * addresses follows them (engine_local_refresh). And tc: the engine
	 * sets no qdisc, filter or action, so each one added is another
	 * program's, and a mirred on a port's ingress is a way out past
	 * every chain (engine/cutoff.c, tc_event). */
	if (mnl_socket_bind(nl, RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_TC,
			    MNL_SOCKET_AUTOPID) < 0) {
		mnl_socket_close(nl);
		return pc_err_errno(err, PC_EIO, "rtnetlink bind (link events)");
	}
	/* 1,000 ports created or brought up at once send several events each
	 * (link, address, carrier): the default buffer lost them (ENOBUFS),
	 * and every loss costs a cut-off and a check (issue 34, point 2). */
	links_monitor_rcvbuf(mnl_socket_get_fd(nl), LINKS_MONITOR_RCVBUF);
	/* Keep only the fd: events are read raw, the payload does not matter
	 * (any link event triggers a fresh dump). */
	fd = dup(mnl_socket_get_fd(nl));
	mnl_socket_close(nl);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "dup");
	return fd;
}

int links_monitor_read(int fd, links_event_fn *fn, void *ctx, uint64_t *lost)
{
	char buf[8192];
	int any = 0;
	ssize_t r;

	while ((r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) != 0) {
		if (r < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == ENOBUFS) { /* events lost: assume a change */
				any = 1;
				if (lost)
					(*lost)++;
				if (fn)
					fn(NULL, ctx);
				continue;
			}
			if (errno == EINTR)
				continue;
			return PC_EIO;
		}
		any = 1;
		if (fn) {
			const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
			int n = (int)r;

			for (; mnl_nlmsg_ok(nlh, n); nlh = mnl_nlmsg_next(nlh, &n))
				fn(nlh, ctx);
		}
	}
	return any;
}

int links_monitor_drain(int fd)
{
	return links_monitor_read(fd, NULL, NULL, NULL);
}

bool portmap_name(struct portmap *pm, uint32_t ifindex, char name[PC_IFNAMSIZ])
{
	bool found = false;

	pthread_rwlock_rdlock(&pm->lock);
	for (size_t i = 0; i < pm->n && !found; i++) {
		if (pm->ports[i].ifindex == ifindex) {
			memcpy(name, pm->ports[i].name, PC_IFNAMSIZ);
			found = true;
		}
	}
	pthread_rwlock_unlock(&pm->lock);
	return found;
}

void portmap_set(struct portmap *pm, struct nft_port *ports, size_t n)
{
	struct nft_port *old;

	pthread_rwlock_wrlock(&pm->lock);
	old = pm->ports;
	pm->ports = ports;
	pm->n = n;
	pthread_rwlock_unlock(&pm->lock);
	free(old);
}
