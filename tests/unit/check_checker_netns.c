/* Unit tests of what the checker reads beyond its own namespace's links
 * (issue 31): devices of other namespaces stacked on the sandbox bridge or
 * a sandbox-facing device, the bridge's promiscuity when nothing explains
 * it, and packet sockets on the sandbox side. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>

#include "checker/checker_int.h"
#include "tests/unit/nftexpr.h"
#include "tests/unit/unit.h"

static struct ck_state st;
static struct checker_expect ex;

/* pcbr0 (3) with port pcv1 (4), uplink up0 (2) with a default route */
static void base(void)
{
	struct ck_link *p, *up;
	struct ck_route *r;

	memset(&st, 0, sizeof(st));
	memset(&ex, 0, sizeof(ex));
	strcpy(ex.table, "portcullis");
	ex.mark_mask = 0xff000000u;
	ex.br_nf_call = -1;
	p = nx_bridge_links(&st);
	p->link_netns = true;
	p->link_nsid = 7;
	p->isolated = 1;
	p->stp_state = 3;
	up = ck_grow(&st.links, &st.n_links, &st.cap_links, sizeof(*up));
	up->ifindex = 2;
	up->link_nsid = -1;
	strcpy(up->name, "up0");
	strcpy(up->kind, "veth");
	up->link_netns = true;
	up->link_nsid = 9;
	r = ck_grow(&st.routes, &st.n_routes, &st.cap_routes, sizeof(*r));
	r->family = AF_INET;
	r->type = RTN_UNICAST;
	r->table = RT_TABLE_MAIN;
	r->oif = 2;
	r->has_gw = true;
}

static struct checker_result *analyze(void)
{
	struct checker_result *r = calloc(1, sizeof(*r));
	struct pc_err err = {0};

	ck_assert_int_eq(ck_analyze(&st, &ex, "pcbr0", r, &err), 0);
	return r;
}

static bool has(const struct checker_result *r, const char *needle)
{
	for (size_t i = 0; i < r->n_findings; i++)
		if (strstr(r->findings[i].text, needle))
			return true;
	return false;
}

/* The finding that names needle is of kind k (unproven, an exit). */
static bool has_kind(const struct checker_result *r, const char *needle, enum checker_kind k)
{
	for (size_t i = 0; i < r->n_findings; i++)
		if (strstr(r->findings[i].text, needle))
			return r->findings[i].kind == k;
	return false;
}

static bool evidence_has(const struct checker_result *r, const char *needle)
{
	for (size_t i = 0; i < r->ob[CK_OB_MODEL].n; i++)
		if (strstr(r->ob[CK_OB_MODEL].lines[i], needle))
			return true;
	return false;
}

static void done(struct checker_result *r)
{
	checker_result_free(r);
	ck_state_free(&st);
}

/* One walker record: a namespace whose one link is NAME of KIND with
 * IFLA_LINK link and IFLA_LINK_NETNSID linkns; the record says that
 * namespace calls ours nsid. */
static size_t record(uint8_t *out, const char *where, int32_t nsid, const char *name,
		     const char *kind, uint32_t link, int32_t linkns)
{
	struct ck_nsrec h = {.nsid = nsid};
	uint8_t *m = out + sizeof(h);
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(m);
	struct ifinfomsg *ifi;
	struct nlattr *info;

	nlh->nlmsg_type = RTM_NEWLINK;
	nlh->nlmsg_flags = NLM_F_MULTI;
	ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = 3; /* the same number as our bridge: ifindexes are per namespace */
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	mnl_attr_put_u32(nlh, IFLA_LINK, link);
	mnl_attr_put_u32(nlh, IFLA_LINK_NETNSID, (uint32_t)linkns);
	info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, kind);
	mnl_attr_nest_end(nlh, info);
	h.len = nlh->nlmsg_len;
	pc_strlcpy(h.where, where, sizeof(h.where));
	memcpy(out, &h, sizeof(h));
	return sizeof(h) + h.len;
}

/* A macvlan on pcbr0 in another namespace is named; one on the uplink,
 * a sandbox's own veth (its IFLA_LINK is the port) and a device whose
 * link is in a third namespace are not. */
START_TEST(macvlan_on_bridge_elsewhere_is_an_exit)
{
	static uint8_t buf[8192];
	struct pc_err err = {0};
	struct checker_result *r;
	size_t n = 0;

	base();
	n += record(buf + n, "/run/netns/docker-a", 0, "ckm0", "macvlan", 3, 0);
	n += record(buf + n, "/run/netns/docker-b", 0, "ckm1", "macvlan", 2, 0);
	n += record(buf + n, "/run/netns/sb1", 0, "eth0", "veth", 4, 0);
	n += record(buf + n, "/run/netns/other", 1, "ckm2", "macvlan", 3, 0);
	ck_assert_int_eq(ck_netns_parse(&st, buf, n, &err), 0);
	ck_assert_int_eq(st.netns_read, 4);
	ck_assert_uint_eq(st.n_xdevs, 2);
	r = analyze();
	ck_assert(has(r, "interface ckm0 (macvlan) in another network namespace "
			 "(/run/netns/docker-a) is stacked on the sandbox bridge pcbr0"));
	ck_assert(!has(r, "ckm1"));
	ck_assert(!has(r, "eth0"));
	ck_assert(!has(r, "ckm2"));
	ck_assert(!has(r, "promiscuous"));
	ck_assert(has_kind(r, "ckm0", CHECKER_EXIT));
	done(r);

	/* a truncated stream is refused, not half read */
	base();
	n = record(buf, "/run/netns/x", 0, "ckm0", "macvlan", 3, 0);
	ck_assert_int_eq(ck_netns_parse(&st, buf, n - 1, &err), PC_EPARSE);
	ck_state_free(&st);
}
END_TEST

/* The bridge promiscuous and nothing found that explains it: unproven,
 * naming a namespace that could not be entered. */
START_TEST(unexplained_promiscuity_is_unproven)
{
	struct checker_result *r;

	base();
	st.links[0].promisc = 1;
	st.netns_unreadable = 2;
	strcpy(st.netns_unreadable_eg, "/proc/42/ns/net (Permission denied)");
	r = analyze();
	ck_assert(has(r, "the sandbox bridge pcbr0 is promiscuous (promiscuity 1)"));
	ck_assert(has(r, "/proc/42/ns/net (Permission denied)"));
	ck_assert(has_kind(r, "is promiscuous", CHECKER_DOUBT));
	done(r);

	base();
	r = analyze();
	ck_assert(!has(r, "promiscuous"));
	done(r);
}
END_TEST

/* /proc/net/packet: sockets that receive on the bridge or a port are named
 * with their holder; on the uplink, or of protocol 0 (receiving nothing),
 * they are not; bound to none, they are evidence. */
START_TEST(packet_sockets_on_the_sandbox_side_are_named)
{
	static const char text[] =
	    "sk       RefCnt Type Proto  Iface R Rmem   User   Inode\n"
	    "0000000000000001 3      3    0003   4     1 0      0      1001\n"
	    "0000000000000002 3      3    0800   2     1 0      0      1002\n"
	    "0000000000000003 3      3    0000   3     1 0      0      1003\n"
	    "0000000000000004 3      2    0003   0     1 0      0      1004\n"
	    "0000000000000005 3      3    88cc   3     1 0      0      1005\n";
	struct checker_result *r;

	base();
	ck_packet_parse(&st, text);
	ck_assert_uint_eq(st.n_pkts, 5);
	st.pkts[0].pid = 77;
	strcpy(st.pkts[0].comm, "tcpdump");
	r = analyze();
	ck_assert(has(r, "packet socket (inode 1001, protocol 0x0003) held by tcpdump (pid 77) "
			 "receives on sandbox-facing pcv1"));
	ck_assert(has(r, "inode 1005, protocol 0x88cc) held by a process not found receives on "
			 "the sandbox bridge pcbr0"));
	ck_assert(!has(r, "inode 1002"));
	ck_assert(!has(r, "inode 1003"));
	ck_assert(has_kind(r, "inode 1001", CHECKER_DOUBT));
	/* bound to none (tcpdump -i any): evidence, under the certificate's
	 * assumption */
	ck_assert(!has(r, "inode 1004"));
	ck_assert(evidence_has(r, "inode 1004, protocol 0x0003) held by a process not found "
				  "receives on every interface"));
	done(r);
}
END_TEST

/* A list of packet sockets that could not be read whole is unproven: the
 * capture the check is for may be among those not seen. */
START_TEST(packet_sockets_unreadable_is_unproven)
{
	struct checker_result *r;

	base();
	snprintf(st.pkt_unreadable, sizeof(st.pkt_unreadable),
		 "/proc/net/packet could not be read (I/O error)");
	r = analyze();
	ck_assert(has_kind(r,
			   "packet sockets could not be listed whole: /proc/net/packet could "
			   "not be read",
			   CHECKER_DOUBT));
	done(r);

	base();
	r = analyze();
	ck_assert(!has(r, "packet sockets could not"));
	done(r);
}
END_TEST

PC_UNIT_SUITE("checker_netns", "netns", 0, macvlan_on_bridge_elsewhere_is_an_exit,
	      unexplained_promiscuity_is_unproven, packet_sockets_on_the_sandbox_side_are_named,
	      packet_sockets_unreadable_is_unproven)
