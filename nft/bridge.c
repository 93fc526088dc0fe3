/* table bridge portcullis: the layer-2 half — stamp each sandbox frame with
 * its input port, drop any source address (IPv4, IPv6, ARP) the policy does
 * not give that port/MAC, and never bridge a frame between sandbox ports. */
#include "nft/nft_int.h"

#include <netinet/in.h> /* before the linux/ headers (libc-compat) */
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter_bridge.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <libnftnl/expr.h>

#define ETH_P_IP_   0x0800
#define ETH_P_IPV6_ 0x86dd
#define ETH_P_ARP_  0x0806

/* Addresses bound to one bridge port or one MAC by the policy's match. */
struct binding {
	bool is_mac;
	char port[PC_IFNAMSIZ];
	uint8_t mac[6];
	const struct pc_prefix **pfx;
	size_t n;
};

static void bindings_free(struct binding *bd, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(bd[i].pfx);
	free(bd);
}

static int binding_add(struct binding **bd, size_t *n, bool is_mac, const char *port,
		       const uint8_t *mac, const struct policy_sandbox *sb)
{
	struct binding *x = NULL;
	const struct pc_prefix **np;

	for (size_t i = 0; i < *n && !x; i++)
		if ((*bd)[i].is_mac == is_mac &&
		    (is_mac ? memcmp((*bd)[i].mac, mac, 6) == 0 : strcmp((*bd)[i].port, port) == 0))
			x = &(*bd)[i];
	if (!x) {
		struct binding *nb = realloc(*bd, (*n + 1) * sizeof(*nb));

		if (!nb)
			return PC_ENOMEM;
		*bd = nb;
		x = &nb[(*n)++];
		memset(x, 0, sizeof(*x));
		x->is_mac = is_mac;
		if (is_mac)
			memcpy(x->mac, mac, 6);
		else
			pc_strlcpy(x->port, port, sizeof(x->port));
	}
	np = realloc(x->pfx, (x->n + sb->match.n_sources) * sizeof(*np));
	if (!np)
		return PC_ENOMEM;
	x->pfx = np;
	for (size_t i = 0; i < sb->match.n_sources; i++)
		x->pfx[x->n++] = &sb->match.sources[i];
	return 0;
}

static void nm_ether_saddr(struct nr *r, uint32_t op, const uint8_t *mac)
{
	nr_payload(r, NFT_PAYLOAD_LL_HEADER, 6, 6);
	nr_cmp(r, op, mac, 6);
}

/* Match frames sent from the binding's MAC or arriving on its port. */
static void nm_from_binding(struct nr *r, const struct binding *bd, uint32_t op)
{
	if (bd->is_mac)
		nm_ether_saddr(r, op, bd->mac);
	else
		nm_ifname(r, NFT_META_IIFNAME, op, bd->port);
}

/* ip6 saddr is neither link-local nor unspecified (those only serve ND). */
static void nm_ip6_not_ll(struct nr *r)
{
	static const uint8_t mask[2] = {0xff, 0xc0}, zero2[2] = {0, 0}, ll[2] = {0xfe, 0x80};
	static const uint8_t unspec[16];

	nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 8, 2);
	nr_bitwise(r, 2, mask, zero2);
	nr_cmp(r, NFT_CMP_NEQ, ll, 2);
	nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 8, 16);
	nr_cmp(r, NFT_CMP_NEQ, unspec, 16);
}

/* The source (0: IPv4, 1: IPv6, 2: ARP sender) address is [not] in set.
 * "Not in" exempts what neighbour discovery and ARP probes use. */
static void nm_src_in(struct nr *r, int kind, const char *set, bool inv)
{
	static const uint8_t any4[4];

	switch (kind) {
	case 0:
		nm_addr_set(r, false, AF_INET, true, set, inv);
		break;
	case 1:
		nm_addr_set(r, false, AF_INET6, true, set, inv);
		if (inv)
			nm_ip6_not_ll(r);
		break;
	default:
		nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 14, 4);
		nr_lookup(r, set, inv);
		if (inv) /* the lookup leaves the address in the register */
			nr_cmp(r, NFT_CMP_NEQ, any4, 4); /* 0.0.0.0: ARP probes (RFC 5227) */
		break;
	}
}

/* An ICMPv6 neighbour advertisement whose target address is [not] in set.
 * An advertisement claims its target for the sender's MAC, so the target is
 * bound like a source address: otherwise a sandbox could advertise another
 * sandbox's address and have the gateway send that one's traffic to it.
 * "Not in" exempts link-local targets (each port's own, unbound). */
static void nm_na_target_in(struct nr *r, const char *set, bool inv)
{
	static const uint8_t na = 136, mask[2] = {0xff, 0xc0}, zero2[2] = {0, 0},
			     ll[2] = {0xfe, 0x80};

	nm_l4proto(r, NFT_CMP_EQ, IPPROTO_ICMPV6);
	nr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1);
	nr_cmp(r, NFT_CMP_EQ, &na, 1);
	nr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 8, 16);
	nr_lookup(r, set, inv);
	if (inv) {
		nr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 8, 2);
		nr_bitwise(r, 2, mask, zero2);
		nr_cmp(r, NFT_CMP_NEQ, ll, 2);
	}
}

/* kind 0 = ipv4, 1 = ipv6, 2 = arp: one regular chain each. */
static void bridge_family_chain(struct bld *b, int kind, const struct binding *bd, size_t nbd)
{
	static const char *const names[] = {"ipv4", "ipv6", "arp"};
	const char *all = kind == 1 ? "src6" : "src4";
	char set[32];
	struct nr r;

	rsb_chain(b, names[kind], NULL, -1, 0, 0);
	if (kind == 2) {
		/* Ethernet/IPv4 ARP only: htype 1, ptype 0x0800, hlen 6, plen 4 */
		static const uint8_t eth_ip[6] = {0, 1, 8, 0, 6, 4};

		rsb_rule_begin(b, &r);
		nr_payload(&r, NFT_PAYLOAD_NETWORK_HEADER, 0, 6);
		nr_cmp(&r, NFT_CMP_NEQ, eth_ip, 6);
		nr_counter(&r);
		nr_verdict(&r, NF_DROP, NULL);
		rsb_rule_end(b, &r);
	}
	if (kind == 1) {
		/* link-local and unspecified sources: neighbour discovery only */
		static const uint8_t mask[2] = {0xff, 0xc0}, zero2[2] = {0, 0},
				     ll[2] = {0xfe, 0x80};
		static const uint8_t unspec[16];

		rsb_rule_begin(b, &r);
		nr_payload(&r, NFT_PAYLOAD_NETWORK_HEADER, 8, 2);
		nr_bitwise(&r, 2, mask, zero2);
		nr_cmp(&r, NFT_CMP_EQ, ll, 2);
		nm_l4proto(&r, NFT_CMP_NEQ, IPPROTO_ICMPV6);
		nr_counter(&r);
		nr_verdict(&r, NF_DROP, NULL);
		rsb_rule_end(b, &r);
		rsb_rule_begin(b, &r);
		nr_payload(&r, NFT_PAYLOAD_NETWORK_HEADER, 8, 16);
		nr_cmp(&r, NFT_CMP_EQ, unspec, 16);
		nm_l4proto(&r, NFT_CMP_NEQ, IPPROTO_ICMPV6);
		nr_counter(&r);
		nr_verdict(&r, NF_DROP, NULL);
		rsb_rule_end(b, &r);
	}
	/* a source no sandbox has */
	rsb_rule_begin(b, &r);
	nm_src_in(&r, kind, all, true);
	nr_counter(&r);
	nr_verdict(&r, NF_DROP, NULL);
	rsb_rule_end(b, &r);
	if (kind == 1) {
		/* an advertisement for an address no sandbox has */
		rsb_rule_begin(b, &r);
		nm_na_target_in(&r, all, true);
		nr_counter(&r);
		nr_verdict(&r, NF_DROP, NULL);
		rsb_rule_end(b, &r);
	}
	for (size_t i = 0; i < nbd; i++) {
		snprintf(set, sizeof(set), "%c%zu_%d", bd[i].is_mac ? 'm' : 'p', i,
			 kind == 1 ? 6 : 4);
		/* the port/MAC sends only from its sandbox's addresses ... */
		rsb_rule_begin(b, &r);
		nm_from_binding(&r, &bd[i], NFT_CMP_EQ);
		nm_src_in(&r, kind, set, true);
		nr_counter(&r);
		nr_verdict(&r, NF_DROP, NULL);
		rsb_rule_end(b, &r);
		/* ... and those addresses come only from that port/MAC */
		rsb_rule_begin(b, &r);
		nm_src_in(&r, kind, set, false);
		nm_from_binding(&r, &bd[i], NFT_CMP_NEQ);
		nr_counter(&r);
		nr_verdict(&r, NF_DROP, NULL);
		rsb_rule_end(b, &r);
		if (kind == 1) {
			/* the port/MAC advertises only its sandbox's addresses,
			 * and those only it advertises */
			rsb_rule_begin(b, &r);
			nm_from_binding(&r, &bd[i], NFT_CMP_EQ);
			nm_na_target_in(&r, set, true);
			nr_counter(&r);
			nr_verdict(&r, NF_DROP, NULL);
			rsb_rule_end(b, &r);
			rsb_rule_begin(b, &r);
			nm_na_target_in(&r, set, false);
			nm_from_binding(&r, &bd[i], NFT_CMP_NEQ);
			nr_counter(&r);
			nr_verdict(&r, NF_DROP, NULL);
			rsb_rule_end(b, &r);
		}
		if (kind == 2 && bd[i].is_mac) {
			/* ARP sender hardware address must be the frame's */
			rsb_rule_begin(b, &r);
			nm_ether_saddr(&r, NFT_CMP_EQ, bd[i].mac);
			nr_payload(&r, NFT_PAYLOAD_NETWORK_HEADER, 8, 6);
			nr_cmp(&r, NFT_CMP_NEQ, bd[i].mac, 6);
			nr_counter(&r);
			nr_verdict(&r, NF_DROP, NULL);
			rsb_rule_end(b, &r);
		}
	}
	rsb_rule_begin(b, &r);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
}

static void bridge_sets(struct bld *b, const struct binding *bd, size_t nbd,
			const struct pc_prefix **all, size_t nall)
{
	char name[32];

	rsb_push(b, NFT_SET_OBJ, nftset_ports(b->p->ports, b->p->n_ports));
	rsb_push(b, NFT_SET_OBJ, nftset_prefixes(NFPROTO_BRIDGE, "src4", AF_INET, all, nall));
	rsb_push(b, NFT_SET_OBJ, nftset_prefixes(NFPROTO_BRIDGE, "src6", AF_INET6, all, nall));
	for (size_t i = 0; i < nbd; i++) {
		for (int v6 = 0; v6 < 2; v6++) {
			snprintf(name, sizeof(name), "%c%zu_%d", bd[i].is_mac ? 'm' : 'p', i,
				 v6 ? 6 : 4);
			rsb_push(b, NFT_SET_OBJ,
				 nftset_prefixes(NFPROTO_BRIDGE, name, v6 ? AF_INET6 : AF_INET,
						 bd[i].pfx, bd[i].n));
		}
	}
}

/* Frames the gateway sends toward a bound sandbox's address leave only
 * through that sandbox's port (or toward its MAC). A sandbox that sends from
 * another one's MAC moves that MAC to its own port in the bridge's
 * forwarding database; without this chain the gateway would then hand it
 * the other sandbox's traffic (tests/escape/l2.sh, MAC spoofing). */
static void bridge_output_chain(struct bld *b, const struct binding *bd, size_t nbd)
{
	char set[32];
	struct nr r;

	rsb_chain(b, "output", "filter", NF_BR_LOCAL_OUT, NFT_PRIO_BRIDGE, NF_ACCEPT);
	for (size_t i = 0; i < nbd; i++) {
		for (int v6 = 0; v6 < 2; v6++) {
			snprintf(set, sizeof(set), "%c%zu_%d", bd[i].is_mac ? 'm' : 'p', i,
				 v6 ? 6 : 4);
			rsb_rule_begin(b, &r);
			nr_payload(&r, NFT_PAYLOAD_LL_HEADER, 12, 2);
			nr_cmp_be16(&r, NFT_CMP_EQ, v6 ? ETH_P_IPV6_ : ETH_P_IP_);
			nr_payload(&r, NFT_PAYLOAD_NETWORK_HEADER, v6 ? 24 : 16, v6 ? 16 : 4);
			nr_lookup(&r, set, false);
			if (bd[i].is_mac) {
				nr_payload(&r, NFT_PAYLOAD_LL_HEADER, 0, 6);
				nr_cmp(&r, NFT_CMP_NEQ, bd[i].mac, 6);
			} else {
				nm_ifname(&r, NFT_META_OIFNAME, NFT_CMP_NEQ, bd[i].port);
			}
			nr_counter(&r);
			nr_verdict(&r, NF_DROP, NULL);
			rsb_rule_end(b, &r);
		}
	}
}

void nft_bridge_table(struct bld *b)
{
	const struct policy *pol = b->p->policy;
	struct binding *bd = NULL;
	const struct pc_prefix **all = NULL;
	size_t nbd = 0, nall = 0, nsb = policy_sandbox_count(pol);
	static const uint16_t types[] = {ETH_P_IP_, ETH_P_IPV6_, ETH_P_ARP_};
	static const char *const chains[] = {"ipv4", "ipv6", "arp"};
	struct nr r;

	b->fam = NFPROTO_BRIDGE;
	for (size_t i = 0; i < nsb && !b->err; i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(pol, i);
		const struct pc_prefix **na =
		    realloc(all, (nall + sb->match.n_sources) * sizeof(*na));

		if (!na) {
			b->err = PC_ENOMEM;
			break;
		}
		all = na;
		for (size_t j = 0; j < sb->match.n_sources; j++)
			all[nall++] = &sb->match.sources[j];
		if (sb->match.port[0] &&
		    binding_add(&bd, &nbd, false, sb->match.port, NULL, sb) < 0)
			b->err = PC_ENOMEM;
		if (sb->match.has_mac && binding_add(&bd, &nbd, true, NULL, sb->match.mac, sb) < 0)
			b->err = PC_ENOMEM;
	}
	rsb_table(b);
	bridge_sets(b, bd, nbd, all, nall);
	/* regular chains first: the prerouting chain jumps to them */
	for (int k = 0; k < 3; k++)
		bridge_family_chain(b, k, bd, nbd);

	rsb_chain(b, "prerouting", "filter", NF_BR_PRE_ROUTING, NFT_PRIO_BRIDGE, NF_ACCEPT);
	rsb_rule_begin(b, &r);
	nr_meta(&r, NFT_META_IIF);
	nr_lookup(&r, NFT_SET_PORTS, true);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
	/* the stamp: input port ifindex, every other bit of the mark cleared */
	rsb_rule_begin(b, &r);
	nr_meta(&r, NFT_META_IIF);
	nr_bitwise_u32(&r, NFT_MARK_PORT_MASK, 0);
	nr_meta_set(&r, NFT_META_MARK);
	rsb_rule_end(b, &r);
	for (int k = 0; k < 3; k++) {
		rsb_rule_begin(b, &r);
		nr_payload(&r, NFT_PAYLOAD_LL_HEADER, 12, 2);
		nr_cmp_be16(&r, NFT_CMP_EQ, types[k]);
		nr_verdict(&r, NFT_JUMP, chains[k]);
		rsb_rule_end(b, &r);
	}
	rsb_drop_rule(b); /* VLAN tags, PPPoE, LLDP, anything else */

	rsb_chain(b, "forward", "filter", NF_BR_FORWARD, NFT_PRIO_BRIDGE, NF_ACCEPT);
	for (int oif = 0; oif < 2; oif++) {
		rsb_rule_begin(b, &r);
		nr_meta(&r, oif ? NFT_META_OIF : NFT_META_IIF);
		nr_lookup(&r, NFT_SET_PORTS, false);
		nr_counter(&r);
		nr_verdict(&r, NF_DROP, NULL);
		rsb_rule_end(b, &r);
	}
	bridge_output_chain(b, bd, nbd);
	bindings_free(bd, nbd);
	free(all);
}
