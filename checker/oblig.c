/* checker: the obligations that are about interfaces rather than rules —
 * bridge membership, port isolation, tc/XDP programs, local addresses and
 * bridge netfilter — and ck_analyze, which runs every obligation. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/if_link.h>
#include <net/if.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <netinet/in.h>

#include "checker/checker_int.h"

#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000 /* linux/if.h's; glibc's net/if.h, which clashes with it, lacks it */
#endif

/* Is link l a sandbox port? Decided in docs/checker.md: a veth whose peer
 * lives in another network namespace, or a tap device, with no address
 * other than link-local and no route through it. Anything else on the
 * sandbox bridge is a way out. Returns NULL or why not. */
static const char *not_sandbox_port(const struct ck_state *st, const struct ck_link *l)
{
	static char why[160];

	if (strcmp(l->kind, "veth") != 0 && strcmp(l->kind, "tun") != 0) {
		snprintf(why, sizeof(why), "a %s device, not a sandbox veth or tap",
			 l->kind[0] ? l->kind : "physical");
		return why;
	}
	if (strcmp(l->kind, "veth") == 0 && l->link && ck_link_by_index(st, l->link) &&
	    !l->link_netns) {
		snprintf(why, sizeof(why), "a veth whose peer is in the gateway's own namespace");
		return why;
	}
	for (size_t i = 0; i < st->n_addrs; i++) {
		const struct ck_ifaddr *a = &st->addrs[i];

		if (a->ifindex == l->ifindex && a->scope != RT_SCOPE_LINK) {
			char as[64] = "?";

			inet_ntop(a->family, a->a, as, sizeof(as));
			snprintf(why, sizeof(why),
				 "it carries address %s/%u (an uplink or host interface)", as,
				 a->prefixlen);
			return why;
		}
	}
	for (size_t i = 0; i < st->n_routes; i++) {
		const struct ck_route *r = &st->routes[i];

		if (r->oif == l->ifindex && r->table == RT_TABLE_MAIN && r->family == AF_INET) {
			snprintf(why, sizeof(why), "routes point through it (an uplink)");
			return why;
		}
	}
	return NULL;
}

static bool port_in_policy(const struct ck_state *st, const char *name, const char *const *names,
			   size_t n)
{
	(void)st;
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

static bool ifindex_in_portset(const struct ck_state *st, const struct checker_expect *ex,
			       int ifindex)
{
	const struct ck_set *s = ck_set_find(&st->nft, 7 /* NFPROTO_BRIDGE */, ex->table,
					     "ports"); /* NFT_SET_PORTS, docs/engine.md */

	if (!s)
		return false;
	for (size_t i = 0; i < s->n_elems; i++)
		if (s->elems[i].klen == 4 && memcmp(s->elems[i].key, &ifindex, 4) == 0)
			return true;
	return false;
}

static void members_check(const struct ck_state *st, const struct checker_expect *ex,
			  const struct ck_link *br, struct checker_result *res)
{
	size_t nports = 0;

	for (size_t i = 0; i < st->n_links; i++) {
		const struct ck_link *l = &st->links[i];
		const char *why;

		if (l->master == br->ifindex) {
			nports++;
			why = not_sandbox_port(st, l);
			if (why)
				ck_find(res, CK_OB_MEMBERS, CHECKER_EXIT,
					"interface %s is a port of the sandbox bridge %s but not a "
					"sandbox port: %s",
					l->name, br->name, why);
			else
				ck_evid(res, CK_OB_MEMBERS, "port %s: %s, sandbox port", l->name,
					l->kind);
			continue;
		}
		if (l->link == br->ifindex && l->ifindex != br->ifindex && !l->link_netns &&
		    l->kind[0]) {
			ck_find(
			    res, CK_OB_MEMBERS, CHECKER_EXIT,
			    "interface %s (%s) is stacked on the sandbox bridge %s: frames reach "
			    "it without the bridge's guarded path",
			    l->name, l->kind, br->name);
			continue;
		}
		/* a sandbox port held by another bridge: named by the policy or in
		 * the engine's port set */
		if (l->master && l->master != br->ifindex &&
		    (port_in_policy(st, l->name, ex->policy_ports, ex->n_policy_ports) ||
		     ifindex_in_portset(st, ex, l->ifindex))) {
			char mn[32];

			ck_find(res, CK_OB_MEMBERS, CHECKER_EXIT,
				"sandbox port %s is enslaved to bridge %s, not to the sandbox "
				"bridge %s",
				l->name, ck_ifname(st, l->master, mn, sizeof(mn)), br->name);
		}
	}
	for (size_t i = 0; i < ex->n_policy_ports; i++) {
		const struct ck_link *l = ck_link_by_name(st, ex->policy_ports[i]);

		if (l && l->master != br->ifindex && !l->master)
			ck_evid(res, CK_OB_MEMBERS, "policy port %s exists but is on no bridge",
				l->name);
	}
	ck_evid(res, CK_OB_MEMBERS, "bridge %s (ifindex %d) has %zu port(s), VLAN filtering %d",
		br->name, br->ifindex, nports, br->br_vlan_filtering);
}

static void isolation_check(const struct ck_state *st, const struct ck_link *br,
			    struct checker_result *res)
{
	for (size_t i = 0; i < st->n_links; i++) {
		const struct ck_link *l = &st->links[i];

		if (l->master != br->ifindex)
			continue;
		if (l->isolated != 1)
			ck_find(res, CK_OB_ISOLATED, CHECKER_EXIT,
				"bridge port %s is not isolated: frames from the other ports reach "
				"it without the guard",
				l->name);
		else
			ck_evid(res, CK_OB_ISOLATED,
				"port %s: isolated on, learning %d, hairpin %d", l->name,
				l->learning, l->hairpin);
	}
}

static const char *tc_dir(uint32_t parent, char *buf, size_t len)
{
	if (parent == TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS))
		return "ingress";
	if (parent == TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS))
		return "egress";
	if (TC_H_MIN(parent))
		snprintf(buf, len, "egress class %x:%x", TC_H_MAJ(parent) >> 16, TC_H_MIN(parent));
	else
		snprintf(buf, len, "egress qdisc %x:", TC_H_MAJ(parent) >> 16);
	return buf;
}

static const char *mirred_what(int ea)
{
	static const struct pc_name names[] = {{TCA_EGRESS_REDIR, "egress redirect"},
					       {TCA_EGRESS_MIRROR, "egress mirror"},
					       {TCA_INGRESS_REDIR, "ingress redirect"},
					       {TCA_INGRESS_MIRROR, "ingress mirror"}};

	return PC_NAME_OF(names, ea, "unknown action");
}

static void tcxdp_link(const struct ck_state *st, const struct checker_expect *ex,
		       const struct ck_link *l, const char *role, struct checker_result *res)
{
	static const char *harmless_acts[] = {"gact", "police", "csum", NULL};
	static const char *classifiers[] = {"u32", "flower", "matchall", "basic", NULL};
	size_t nf = 0;
	char d[32], dev[32];
	const char *dir;

	if (l->xdp_attached)
		ck_find(res, CK_OB_TCXDP, CHECKER_DOUBT,
			"XDP program id %u on %s %s: an eBPF program can redirect (XDP_REDIRECT, "
			"XDP_TX) and cannot be classified",
			l->xdp_prog_id, role, l->name);
	if (l->tcx_ingress > 0 || l->tcx_egress > 0)
		ck_find(res, CK_OB_TCXDP, CHECKER_DOUBT,
			"tcx BPF program(s) on %s %s (%d ingress, %d egress): cannot be classified",
			role, l->name, l->tcx_ingress, l->tcx_egress);
	if (l->tcx_ingress < 0)
		ck_find(res, CK_OB_TCXDP, CHECKER_DOUBT,
			"tcx programs on %s %s could not be queried (bpf() refused)", role,
			l->name);
	for (size_t i = 0; i < st->n_filters; i++) {
		const struct ck_tcfilter *f = &st->filters[i];
		bool known = false;

		if (f->ifindex != l->ifindex)
			continue;
		nf++;
		dir = tc_dir(f->parent, d, sizeof(d));
		if (strcmp(f->kind, "bpf") == 0) {
			/* its actions are read below all the same: what a
			 * program matches is unknown, what its actions do is not */
			ck_find(
			    res, CK_OB_TCXDP, CHECKER_DOUBT,
			    "tc filter on %s %s %s: bpf program id %u%s%s%s cannot be classified",
			    role, l->name, dir, f->bpf_id, f->bpf_name[0] ? " (" : "", f->bpf_name,
			    f->bpf_name[0] ? ")" : "");
		} else {
			for (int k = 0; classifiers[k]; k++)
				known |= strcmp(f->kind, classifiers[k]) == 0;
			if (!known) {
				ck_find(res, CK_OB_TCXDP, CHECKER_DOUBT,
					"tc filter on %s %s %s: classifier '%s' not modelled", role,
					l->name, dir, f->kind);
				continue;
			}
		}
		if (f->acts_trunc)
			ck_find(res, CK_OB_TCXDP, CHECKER_DOUBT,
				"tc filter on %s %s %s: more than %d actions", role, l->name, dir,
				CK_TC_ACTS);
		for (size_t k = 0; k < f->n_acts; k++) {
			const struct ck_tcact *a = &f->acts[k];
			bool harmless = false;

			if (strcmp(a->kind, "mirred") == 0) {
				ck_find(res, CK_OB_TCXDP, CHECKER_EXIT,
					"tc filter on %s %s %s: mirred %s dev %s", role, l->name,
					dir, mirred_what(a->mirred_eaction),
					ck_ifname(st, a->mirred_ifindex, dev, sizeof(dev)));
				continue;
			}
			if (strcmp(a->kind, "skbedit") == 0) {
				if (a->has_ptype && a->ptype == 0 /* PACKET_HOST */)
					ck_find(res, CK_OB_TCXDP, CHECKER_EXIT,
						"tc filter on %s %s %s: skbedit ptype host: frames "
						"to a "
						"link-local group address are handed to the IP "
						"stack as "
						"addressed to it, and forwarded",
						role, l->name, dir);
				if (a->has_mark && (a->mark & a->mark_mask & ex->mark_mask))
					ck_find(
					    res, CK_OB_TCXDP, CHECKER_EXIT,
					    "tc filter on %s %s %s: skbedit sets the engine's mark "
					    "bits (mark 0x%x)",
					    role, l->name, dir, a->mark);
				continue;
			}
			for (int h = 0; harmless_acts[h]; h++)
				harmless |= strcmp(a->kind, harmless_acts[h]) == 0;
			if (!harmless)
				ck_find(res, CK_OB_TCXDP, CHECKER_DOUBT,
					"tc filter on %s %s %s: action '%s' not modelled", role,
					l->name, dir, a->kind);
		}
	}
	ck_evid(res, CK_OB_TCXDP, "%s %s: XDP %s, %zu tc filter(s), tcx %d/%d", role, l->name,
		l->xdp_attached ? "ATTACHED" : "none", nf, l->tcx_ingress, l->tcx_egress);
}

/* ---- every interface is a way in (issue 23) --------------------------------
 *
 * A sandbox's frames reach whatever IP stack they are delivered to: the
 * bridge's (guarded by our chains) or a port's own, a device stacked on a
 * port, a sandbox's second NIC. The sandbox-facing devices are: the ports
 * of the sandbox bridge; ports named by the policy or in the engine's port
 * set; veths whose peer lives in a namespace that holds a sandbox port's
 * peer (one namespace id, one sandbox); veths and taps on no bridge that
 * reach another namespace's frames to an IP stack here (an address, or
 * IPv6 forwarding) without being an uplink (no gateway or default route
 * through them); and every device stacked on one of those (IFLA_LINK).
 * Each must be a port of the sandbox bridge, forwarding, isolated, without
 * an address or a stacked device. */

static bool is_uplink(const struct ck_state *st, const struct checker_expect *ex,
		      const struct ck_link *l)
{
	for (size_t i = 0; i < ex->n_uplinks; i++)
		if (strcmp(ex->uplinks[i], l->name) == 0)
			return true;
	for (size_t i = 0; i < st->n_routes; i++) {
		const struct ck_route *r = &st->routes[i];

		if (r->oif == l->ifindex && r->type == RTN_UNICAST &&
		    (r->has_gw || r->dst_len == 0))
			return true;
	}
	return false;
}

static const char *global_addr(const struct ck_state *st, int ifindex, char *buf, size_t len)
{
	for (size_t i = 0; i < st->n_addrs; i++) {
		const struct ck_ifaddr *a = &st->addrs[i];
		char as[64] = "?";

		if (a->ifindex != ifindex || a->scope == RT_SCOPE_LINK)
			continue;
		inet_ntop(a->family, a->a, as, sizeof(as));
		snprintf(buf, len, "%s/%u", as, a->prefixlen);
		return buf;
	}
	return NULL;
}

static int sysctl_int(const struct ck_state *st, const char *fam, const char *ifn, const char *key)
{
	char k[128];
	const char *v;

	snprintf(k, sizeof(k), "net.%s.conf.%s.%s", fam, ifn, key);
	v = ck_sysctl_get(st, k);
	return v && v[0] ? atoi(v) : -1;
}

/* Why l is sandbox-facing (NULL: it is not as far as the model knows). */
static const char *facing_why(const struct ck_state *st, const struct checker_expect *ex,
			      const struct ck_link *br, const struct ck_link *l, const bool *facing,
			      char *why, size_t len)
{
	char a[80];

	if (l == br || (l->flags & IFF_LOOPBACK))
		return NULL;
	if (l->master == br->ifindex) {
		snprintf(why, len, "a port of %s", br->name);
		return why;
	}
	if (port_in_policy(st, l->name, ex->policy_ports, ex->n_policy_ports)) {
		snprintf(why, len, "named by the policy (match: port)");
		return why;
	}
	if (ifindex_in_portset(st, ex, l->ifindex)) {
		snprintf(why, len, "in the engine's port set");
		return why;
	}
	if (l->link && !l->link_netns && l->link != l->ifindex) {
		const struct ck_link *low = ck_link_by_index(st, l->link);

		if (low && facing[low - st->links] && strcmp(l->kind, "veth") != 0) {
			snprintf(why, len, "a %s device stacked on sandbox-facing %s",
				 l->kind[0] ? l->kind : "?", low->name);
			return why;
		}
	}
	if (strcmp(l->kind, "veth") == 0 && l->link_netns && l->link_nsid >= 0) {
		for (size_t i = 0; i < st->n_links; i++) {
			const struct ck_link *o = &st->links[i];

			if (o != l && o->master == br->ifindex && o->link_netns &&
			    o->link_nsid == l->link_nsid) {
				snprintf(why, len,
					 "its peer is in the namespace of sandbox port %s's peer "
					 "(a second NIC of that sandbox)",
					 o->name);
				return why;
			}
		}
	}
	if (strcmp(l->kind, "tun") == 0 && l->tun_owner > 0) {
		for (size_t i = 0; i < st->n_links; i++) {
			const struct ck_link *o = &st->links[i];

			if (o != l && facing[i] && strcmp(o->kind, "tun") == 0 &&
			    o->tun_owner == l->tun_owner) {
				snprintf(
				    why, len,
				    "a tap of the VM (pid %d) whose tap %s is sandbox-facing (a "
				    "second NIC of that sandbox)",
				    l->tun_owner, o->name);
				return why;
			}
		}
	}
	/* a veth toward the namespace an uplink leads to is upstream-facing */
	if (strcmp(l->kind, "veth") == 0 && l->link_netns && l->link_nsid >= 0)
		for (size_t i = 0; i < st->n_links; i++) {
			const struct ck_link *o = &st->links[i];

			if (o != l && o->link_netns && o->link_nsid == l->link_nsid &&
			    is_uplink(st, ex, o))
				return NULL;
		}
	if (!l->master &&
	    ((strcmp(l->kind, "veth") == 0 && l->link_netns) || strcmp(l->kind, "tun") == 0) &&
	    !is_uplink(st, ex, l)) {
		const char *ga = global_addr(st, l->ifindex, a, sizeof(a));
		int v6off = sysctl_int(st, "ipv6", l->name, "disable_ipv6");
		int v6fwd = sysctl_int(st, "ipv6", l->name, "forwarding");

		if (ga) {
			snprintf(why, len,
				 "a %s to another namespace on no bridge, with address %s and no "
				 "gateway route through it (not an uplink)",
				 l->kind, ga);
			return why;
		}
		if (v6off == 0 && v6fwd > 0 && (l->flags & IFF_UP)) {
			snprintf(why, len,
				 "a %s to another namespace on no bridge that forwards IPv6 (not "
				 "an uplink)",
				 l->kind);
			return why;
		}
	}
	return NULL;
}

/* Devices of other namespaces stacked on the bridge or a sandbox-facing
 * device (issue 31): what a Docker macvlan network with parent pcbr0 does.
 * The bridge's promiscuity is the signal left when a namespace could not
 * be read: a macvlan on a device without unicast filtering (a bridge) makes
 * it promiscuous, and so does a capture; each is a finding of its own, so
 * a promiscuous bridge with neither found is refused as unexplained. */
static void elsewhere_check(const struct ck_state *st, const struct ck_link *br, const bool *facing,
			    struct checker_result *res)
{
	bool explained = false;

	for (size_t i = 0; i < st->n_xdevs; i++) {
		const struct ck_xdev *x = &st->xdevs[i];
		const struct ck_link *low = ck_link_by_index(st, x->link);

		if (!low || (low != br && !facing[low - st->links]))
			continue;
		explained |= low == br;
		ck_find(res, CK_OB_MEMBERS, CHECKER_EXIT,
			"interface %s (%s) in another network namespace (%s) is stacked on %s %s: "
			"it is %s's receive handler there, so a sandbox's frames reach that "
			"namespace's IP stack without the guarded path",
			x->name, x->kind, x->where,
			low == br ? "the sandbox bridge" : "sandbox-facing", low->name, low->name);
	}
	for (size_t i = 0; i < st->n_links; i++) {
		const struct ck_link *u = &st->links[i];

		explained |= u->link == br->ifindex && u != br && !u->link_netns && u->kind[0];
	}
	for (size_t i = 0; i < st->n_pkts; i++)
		explained |= st->pkts[i].proto && st->pkts[i].ifindex == br->ifindex;
	ck_evid(res, CK_OB_MEMBERS,
		"other network namespaces: %d read, %d not entered%s%s; %zu device(s) there "
		"stacked on this namespace's; %s promiscuity %d",
		st->netns_read, st->netns_unreadable, st->netns_unreadable ? ", e.g. " : "",
		st->netns_unreadable_eg, st->n_xdevs, br->name, br->promisc);
	if (br->promisc > 0 && !explained)
		ck_find(res, CK_OB_MEMBERS, CHECKER_DOUBT,
			"the sandbox bridge %s is promiscuous (promiscuity %d) and no device "
			"stacked on it or capture explains it%s%s%s: a device in a namespace not "
			"read may be its receive handler",
			br->name, br->promisc,
			st->netns_unreadable ? " (namespaces not entered: " : "",
			st->netns_unreadable_eg, st->netns_unreadable ? ")" : "");
}

/* Packet sockets, the decision of docs/checker.md ("Packet sockets"): one
 * that receives on the bridge or a sandbox-facing device reads a sandbox's
 * frames before the guard, and every packet socket can send: what its
 * program does with them (a capture, or a relay out of the uplink) is
 * outside the model, so the proof stops there. Relays (dhcrelay,
 * udpbroadcastrelay, L2 bridging daemons) bind the devices they serve;
 * a socket bound to none (tcpdump -i any, a host-wide monitor) is listed
 * in the evidence and covered by the certificate's assumption that no
 * program on the gateway relays what it captures. */
static void packet_check(const struct ck_state *st, const struct ck_link *br, const bool *facing,
			 struct checker_result *res)
{
	size_t seen = 0;

	for (size_t i = 0; i < st->n_pkts; i++) {
		const struct ck_pkt *k = &st->pkts[i];
		const struct ck_link *l = k->ifindex ? ck_link_by_index(st, k->ifindex) : NULL;
		char who[80], on[64];

		if (!k->proto)
			continue;
		seen++;
		if (k->ifindex && (!l || (l != br && !facing[l - st->links])))
			continue;
		if (k->pid > 0)
			snprintf(who, sizeof(who), "%s (pid %d)", k->comm[0] ? k->comm : "?",
				 k->pid);
		else
			snprintf(who, sizeof(who), "a process not found");
		if (!l) {
			ck_evid(res, CK_OB_MODEL,
				"packet socket (inode %lu, protocol 0x%04x) held by %s receives on "
				"every interface (bound to none): a capture, assumed to relay "
				"nothing",
				k->inode, k->proto, who);
			continue;
		}
		snprintf(on, sizeof(on), "%s %s", l == br ? "the sandbox bridge" : "sandbox-facing",
			 l->name);
		ck_find(res, CK_OB_MODEL, CHECKER_DOUBT,
			"packet socket (inode %lu, protocol 0x%04x) held by %s receives on %s: a "
			"program reading a sandbox's frames can send them anywhere, and what it "
			"does is not modelled",
			k->inode, k->proto, who, on);
	}
	ck_evid(res, CK_OB_MODEL, "%zu packet socket(s) receiving in this namespace", seen);
}

static void facing_check(const struct ck_state *st, const struct checker_expect *ex,
			 const struct ck_link *br, struct checker_result *res)
{
	bool *facing = calloc(st->n_links ? st->n_links : 1, sizeof(*facing));
	char(*why)[200] = calloc(st->n_links ? st->n_links : 1, sizeof(*why));
	bool changed = true;
	int all_sr = sysctl_int(st, "ipv4", "all", "accept_source_route");

	if (!facing || !why) {
		ck_find(res, CK_OB_MEMBERS, CHECKER_DOUBT, "out of memory classifying interfaces");
		goto out;
	}
	/* to a fixed point: stacked devices and second NICs follow the ports */
	for (int pass = 0; changed && pass < 8; pass++) {
		changed = false;
		for (size_t i = 0; i < st->n_links; i++)
			if (!facing[i] &&
			    facing_why(st, ex, br, &st->links[i], facing, why[i], sizeof(why[i]))) {
				facing[i] = true;
				changed = true;
			}
	}
	for (size_t i = 0; i < st->n_links; i++) {
		const struct ck_link *l = &st->links[i];
		char mn[32], a[80];
		int sr, ra;

		/* the bridge's own sysctls matter as much as a port's */
		if (l == br || facing[i]) {
			sr = sysctl_int(st, "ipv4", l->name, "accept_source_route");
			if (all_sr > 0 && sr > 0)
				ck_find(res, CK_OB_MEMBERS, CHECKER_EXIT,
					"interface %s accepts IPv4 source routes "
					"(net.ipv4.conf.all and .%s.accept_source_route on): an "
					"LSRR/SSRR "
					"option re-routes a judged flow to another address",
					l->name, l->name);
			/* Labelled frames are forwarded by the label table: no
			 * inet hook, no policy rule sees them, so neither half
			 * of the proof covers them (and the routing half is all
			 * that is left once the ruleset is gone). */
			if (sysctl_int(st, "mpls", l->name, "input") > 0)
				ck_find(res, CK_OB_MEMBERS, CHECKER_EXIT,
					"interface %s takes MPLS (net.mpls.conf.%s.input on): "
					"labelled frames are forwarded by the label table, which "
					"neither the guard's chains nor its policy rules see",
					l->name, l->name);
			ra = sysctl_int(st, "ipv6", l->name, "accept_ra");
			if (ra >= 2 && sysctl_int(st, "ipv6", l->name, "disable_ipv6") == 0)
				ck_find(
				    res, CK_OB_MEMBERS, CHECKER_EXIT,
				    "interface %s accepts router advertisements while forwarding "
				    "(accept_ra=%d): a sandbox can install the gateway's routes",
				    l->name, ra);
		}
		if (!facing[i])
			continue;
		if (l->master != br->ifindex) {
			const char *ga = global_addr(st, l->ifindex, a, sizeof(a));

			ck_find(
			    res, CK_OB_MEMBERS, CHECKER_EXIT,
			    "sandbox-facing interface %s (%s) is not a port of the sandbox bridge "
			    "%s: it is %s%s%s%s, so a sandbox's frames reach an IP stack other "
			    "than %s's",
			    l->name, why[i], br->name, l->master ? "on bridge " : "on no bridge",
			    l->master ? ck_ifname(st, l->master, mn, sizeof(mn)) : "",
			    ga ? " with address " : "", ga ? ga : "", br->name);
			tcxdp_link(st, ex, l, "sandbox-facing device", res);
			continue;
		}
		/* A port whose device is down (the engine's cut-off, or an admin's)
		 * receives nothing at all, link-local frames included: state
		 * disabled is then no way out (docs/engine.md, "Cut off until
		 * proven"). Nor does one up without a carrier: a veth whose peer
		 * is down, a tap no process holds — what a port being set up,
		 * or brought back after a cut-off, is for a moment. */
		if (l->stp_state == 0 /* BR_STATE_DISABLED */ && !(l->flags & IFF_UP))
			ck_evid(res, CK_OB_MEMBERS, "port %s: down (receives nothing)", l->name);
		else if (l->stp_state == 0 && !(l->flags & IFF_LOWER_UP))
			ck_evid(res, CK_OB_MEMBERS, "port %s: no carrier (receives nothing)",
				l->name);
		else if (l->stp_state != 3 /* BR_STATE_FORWARDING */)
			ck_find(res, CK_OB_MEMBERS, l->stp_state < 0 ? CHECKER_DOUBT : CHECKER_EXIT,
				"bridge port %s is not in forwarding state (STP state %d): its "
				"frames do not take the bridge's guarded path",
				l->name, l->stp_state);
		for (size_t k = 0; k < st->n_links; k++) {
			const struct ck_link *u = &st->links[k];

			if (u->link == l->ifindex && !u->link_netns && u != l &&
			    strcmp(u->kind, "veth") != 0)
				ck_find(res, CK_OB_MEMBERS, CHECKER_EXIT,
					"interface %s (%s) is stacked on sandbox port %s: frames "
					"for it (a VLAN tag, its MAC) are taken before the bridge",
					u->name, u->kind[0] ? u->kind : "?", l->name);
		}
		ck_evid(res, CK_OB_MEMBERS,
			"port %s: STP state %d, locked %d, neigh_suppress %d, hairpin %d; "
			"ipv4 forwarding %d rp_filter %d proxy_arp %d accept_source_route %d; "
			"ipv6 disable %d forwarding %d accept_ra %d",
			l->name, l->stp_state, l->locked, l->neigh_suppress, l->hairpin,
			sysctl_int(st, "ipv4", l->name, "forwarding"),
			sysctl_int(st, "ipv4", l->name, "rp_filter"),
			sysctl_int(st, "ipv4", l->name, "proxy_arp"),
			sysctl_int(st, "ipv4", l->name, "accept_source_route"),
			sysctl_int(st, "ipv6", l->name, "disable_ipv6"),
			sysctl_int(st, "ipv6", l->name, "forwarding"),
			sysctl_int(st, "ipv6", l->name, "accept_ra"));
	}
	elsewhere_check(st, br, facing, res);
	packet_check(st, br, facing, res);
	/* tc and XDP where marks can be set on sandbox flows: the uplinks
	 * (their ingress sees the answers, and a mark saved to conntrack
	 * there marks the whole flow) */
	for (size_t i = 0; i < st->n_links; i++)
		if (!facing[i] && &st->links[i] != br && is_uplink(st, ex, &st->links[i]))
			tcxdp_link(st, ex, &st->links[i], "uplink", res);
out:
	free(facing);
	free(why);
}

/* Who holds the engine's queues: a program bound to one of them while the
 * engine is down (or beside it) judges sandbox packets. */
static void nfq_check(const struct ck_state *st, const struct checker_expect *ex,
		      struct checker_result *res)
{
	for (size_t i = 0; i < st->n_nfq; i++) {
		const struct ck_nfq *q = &st->nfq[i];
		char comm[64] = "?";

		if (q->queue < ex->queue_lo || q->queue > ex->queue_hi)
			continue;
		if (q->pid > 0) {
			char p[64], *buf = NULL;
			size_t len = 0;

			snprintf(p, sizeof(p), "/proc/%d/comm", q->pid);
			if (pc_file_read(p, 64, &buf, &len, NULL) == 0) {
				pc_strlcpy(comm, buf, sizeof(comm));
				comm[strcspn(comm, "\n")] = 0;
				free(buf);
			}
		}
		if (st->engine_pid > 0 && q->pid == st->engine_pid) {
			ck_evid(res, CK_OB_QUEUE, "queue %u is bound by the engine (pid %d)",
				q->queue, q->pid);
			continue;
		}
		if (st->engine_pid > 0 && !st->engine_fds_read && st->engine_is_caller) {
			/* the engine's own helper (privileges dropped) cannot list
			 * its parent's sockets; the engine binds every one of its
			 * queues at start and dies if it cannot, and a queue number
			 * takes one socket only: while it runs, they are its own */
			ck_evid(
			    res, CK_OB_QUEUE,
			    "queue %u is bound (netlink port %u) while the engine (pid %d, which "
			    "runs this check) holds its queues",
			    q->queue, q->portid, st->engine_pid);
			continue;
		}
		if (st->engine_pid > 0 && !st->engine_fds_read)
			ck_find(res, CK_OB_QUEUE, CHECKER_DOUBT,
				"queue %u is bound by netlink port %u, and the engine's (pid %d) "
				"sockets cannot be listed to tell whether it is the engine's",
				q->queue, q->portid, st->engine_pid);
		else
			ck_find(
			    res, CK_OB_QUEUE, CHECKER_EXIT,
			    "queue %u is bound by %s (pid %d, netlink port %u)%s: another program "
			    "judges sandbox packets",
			    q->queue, q->pid > 0 ? comm : "a process not found", q->pid, q->portid,
			    st->engine_pid > 0 ? ", not the engine" : " while no engine runs");
	}
}

/* ---- tunnels that take packets from anyone --------------------------------
 *
 * A tunnel device without authentication decapsulates whatever reaches its
 * port or protocol on a local address, whoever sent it, and the inner
 * packet comes out of the tunnel device: routed from there by the main
 * table, not from the bridge by the blackhole table. While the guard's
 * chains stand, a sandbox cannot reach the gateway's own addresses but for
 * DNS and the vault (A5); once they are gone, which the routing half of the
 * proof claims to survive, every local address takes its packets (weak host
 * model), and the routing half no longer holds. WireGuard, vti and xfrm
 * interfaces decapsulate only what their keys authenticate. */
bool ck_open_tunnel(const char *kind)
{
	static const char *const open_kinds[] = {
	    "vxlan", "geneve", "bareudp", "gtp",       "gre",	    "gretap", "erspan", "ipip",
	    "sit",   "ip6tnl", "ip6gre",  "ip6gretap", "ip6erspan", "l2tp",   "amt",	NULL};

	for (int k = 0; open_kinds[k]; k++)
		if (strcmp(kind, open_kinds[k]) == 0)
			return true;
	return false;
}

static void tunnel_check(const struct ck_state *st, struct checker_result *res)
{
	for (size_t i = 0; i < st->n_links; i++) {
		const struct ck_link *l = &st->links[i];
		int f4, f6;

		if (!ck_open_tunnel(l->kind) || !(l->flags & IFF_UP))
			continue;
		f4 = sysctl_int(st, "ipv4", l->name, "forwarding");
		f6 = sysctl_int(st, "ipv6", l->name, "forwarding");
		if (l->master || f4 > 0 || f6 > 0)
			ck_find(res, CK_OB_PATHS, CHECKER_EXIT,
				"interface %s (%s) decapsulates what anyone sends to a local "
				"address, and %s: once the guard's chains are gone a sandbox's "
				"tunnelled packet comes out of %s, routed by the main table, not "
				"the blackhole table",
				l->name, l->kind,
				l->master ? "is enslaved to another device" : "forwards", l->name);
		else
			ck_evid(res, CK_OB_PATHS,
				"tunnel %s (%s): up, forwards nothing (ipv4 forwarding %d, "
				"ipv6 forwarding %d)",
				l->name, l->kind, f4, f6);
	}
	/* moved into another namespace, it still takes what reaches ours and
	 * hands it to that namespace's IP stack, whose forwarding is not read */
	for (size_t i = 0; i < st->n_xdevs; i++)
		if (ck_open_tunnel(st->xdevs[i].kind))
			ck_find(res, CK_OB_PATHS, CHECKER_EXIT,
				"interface %s (%s) in another network namespace (%s) "
				"decapsulates what anyone sends to this namespace's local "
				"addresses, into that namespace's IP stack",
				st->xdevs[i].name, st->xdevs[i].kind, st->xdevs[i].where);
}

static void local_check(const struct ck_state *st, const struct ck_link *br,
			struct checker_result *res)
{
	int seen4 = 0, seen6 = 0;

	for (size_t i = 0; i < st->n_addrs; i++) {
		const struct ck_ifaddr *a = &st->addrs[i];
		char as[64] = "?", ls[600] = "";
		size_t off = 0;
		int *seen = a->family == AF_INET ? &seen4 : &seen6;

		if (a->ifindex != br->ifindex || a->scope == RT_SCOPE_LINK)
			continue;
		inet_ntop(a->family, a->a, as, sizeof(as));
		if ((*seen)++ == 0) {
			ck_evid(res, CK_OB_LOCAL, "gateway address %s/%u on %s", as, a->prefixlen,
				br->name);
			continue;
		}
		for (size_t k = 0; k < st->n_listeners; k++) {
			const struct ck_listener *l = &st->listeners[k];
			static const uint8_t zero[16];
			char la[64] = "?";
			int n;

			if (l->family != a->family ||
			    (memcmp(l->a, a->a, a->family == AF_INET ? 4 : 16) != 0 &&
			     memcmp(l->a, zero, a->family == AF_INET ? 4 : 16) != 0))
				continue;
			inet_ntop(l->family, l->a, la, sizeof(la));
			n = snprintf(ls + off, sizeof(ls) - off, "%s%s %s%s%s:%u", off ? ", " : "",
				     l->proto == IPPROTO_TCP ? "tcp" : "udp",
				     l->family == AF_INET6 ? "[" : "", la,
				     l->family == AF_INET6 ? "]" : "", l->port);
			if (n > 0 && off + (size_t)n < sizeof(ls))
				off += (size_t)n;
		}
		ck_find(res, CK_OB_LOCAL, CHECKER_EXIT,
			"address %s/%u on bridge %s is not the gateway address: local delivery "
			"beyond our listeners (%s%s)",
			as, a->prefixlen, br->name, ls[0] ? "listening: " : "no listener now", ls);
	}
}

static void brnf_check(const struct ck_state *st, const struct checker_expect *ex,
		       const struct ck_link *br, struct checker_result *res)
{
	const char *g4 = ck_sysctl_get(st, "net.bridge.bridge-nf-call-iptables");
	const char *g6 = ck_sysctl_get(st, "net.bridge.bridge-nf-call-ip6tables");
	bool loaded = g4 && g4[0];
	int on4 = loaded && (strcmp(g4, "1") == 0 || br->br_nf_ipt == 1);
	int on6 = loaded && ((g6 && strcmp(g6, "1") == 0) || br->br_nf_ip6t == 1);

	ck_evid(res, CK_OB_BRNF,
		"bridge-nf-call-iptables=%s bridge-nf-call-ip6tables=%s (br_netfilter %s); %s "
		"nf_call_iptables=%d nf_call_ip6tables=%d; expected %s",
		loaded ? g4 : "-", g6 && g6[0] ? g6 : "-", loaded ? "active" : "not loaded",
		br->name, br->br_nf_ipt, br->br_nf_ip6t,
		ex->br_nf_call < 0 ? "either"
		: ex->br_nf_call   ? "on"
				   : "off");
	if (ex->br_nf_call < 0)
		return;
	if (on4 != ex->br_nf_call || on6 != ex->br_nf_call)
		ck_find(res, CK_OB_BRNF, CHECKER_DOUBT,
			"bridge netfilter is %s for IPv4 and %s for IPv6 on %s, but our ruleset "
			"expects it %s (bridged frames %s the inet hooks)",
			on4 ? "on" : "off", on6 ? "on" : "off", br->name,
			ex->br_nf_call ? "on" : "off",
			ex->br_nf_call ? "must pass" : "must not pass");
}

int ck_analyze(const struct ck_state *st, const struct checker_expect *ex, const char *br,
	       struct checker_result *res, struct pc_err *err)
{
	const struct ck_link *brl = ck_link_by_name(st, br);

	(void)err;
	if (!brl || strcmp(brl->kind, "bridge") != 0) {
		ck_find(res, CK_OB_MEMBERS, CHECKER_DOUBT,
			brl ? "%s is not a bridge" : "sandbox bridge %s does not exist", br);
		return 0;
	}
	members_check(st, ex, brl, res);
	facing_check(st, ex, brl, res);
	isolation_check(st, brl, res);
	nfq_check(st, ex, res);
	if (st->ebt[0])
		ck_find(
		    res, CK_OB_MODEL, CHECKER_DOUBT,
		    "ebtables-legacy tables have rules or policies other than ACCEPT (%s): legacy "
		    "bridge tables (a broute DROP routes frames from the port itself) are not "
		    "modelled",
		    st->ebt);
	if (st->ebt_unreadable[0])
		ck_find(res, CK_OB_MODEL, CHECKER_DOUBT,
			"ebtables-legacy tables could not be read: %s", st->ebt_unreadable);
	if (st->pkt_unreadable[0])
		ck_find(res, CK_OB_MODEL, CHECKER_DOUBT,
			"packet sockets could not be listed whole: %s; a capture on a "
			"sandbox-facing device may be among those not seen",
			st->pkt_unreadable);
	tcxdp_link(st, ex, brl, "bridge", res);
	for (size_t i = 0; i < st->n_links; i++)
		if (st->links[i].master == brl->ifindex)
			tcxdp_link(st, ex, &st->links[i], "port", res);
	local_check(st, brl, res);
	tunnel_check(st, res);
	brnf_check(st, ex, brl, res);
	ck_paths_check(st, ex, br, res);
	ck_pass_check(st, ex, br, res);
	ck_routing_check(st, br, res);
	return 0;
}
