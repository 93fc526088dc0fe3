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

/* The bindings of one kind (ports or MACs) as set elements: the ruleset's
 * shape does not depend on how many there are (issue 34). For each family
 * (4: IPv4 and ARP, 6: IPv6), <k>_pair<f> holds "who . address range" for
 * every binding, <k>_src<f> every bound address, <k>_dup<f> the addresses
 * bound to two different ports (or MACs), and <k>_who the bound ports (or
 * MACs). */
struct bindset {
	bool is_mac;
	struct nft_bind_range *r;
	size_t n;
};

static const char *bs_kind(const struct bindset *bs)
{
	return bs->is_mac ? "m" : "p";
}

static void bs_name(char *buf, size_t len, const struct bindset *bs, const char *what, int f)
{
	if (f)
		snprintf(buf, len, "%s_%s%d", bs_kind(bs), what, f);
	else
		snprintf(buf, len, "%s_%s", bs_kind(bs), what);
}

static uint32_t bs_wholen(const struct bindset *bs)
{
	return bs->is_mac ? 6 : PC_IFNAMSIZ;
}

static int bindset_fill(struct bindset *bs, const struct binding *bd, size_t nbd, bool is_mac)
{
	size_t n = 0;

	memset(bs, 0, sizeof(*bs));
	bs->is_mac = is_mac;
	for (size_t i = 0; i < nbd; i++)
		if (bd[i].is_mac == is_mac)
			n += bd[i].n;
	if (!n)
		return 0;
	bs->r = calloc(n, sizeof(*bs->r));
	if (!bs->r)
		return PC_ENOMEM;
	for (size_t i = 0; i < nbd; i++) {
		if (bd[i].is_mac != is_mac)
			continue;
		for (size_t k = 0; k < bd[i].n; k++) {
			struct nft_bind_range *x = &bs->r[bs->n++];

			if (is_mac)
				memcpy(x->who, bd[i].mac, 6);
			else
				memcpy(x->who, bd[i].port, strnlen(bd[i].port, PC_IFNAMSIZ));
			x->pfx = *bd[i].pfx[k];
		}
	}
	return 0;
}

struct dup_item {
	const struct nft_bind_range *r;
	uint8_t lo[16], hi[16];
};

static int dup_cmp(const void *a, const void *b)
{
	return memcmp(((const struct dup_item *)a)->lo, ((const struct dup_item *)b)->lo, 16);
}

/* The addresses of family af bound to two different whos: prefixes nest or
 * are disjoint, so where two of different whos overlap, the longer one is
 * the overlap. Sorted by first address, each range meets only the ranges
 * that start inside it. */
static struct nftnl_set *bindset_dups(const struct bindset *bs, const char *name, uint8_t af)
{
	size_t alen = af == AF_INET ? 4 : 16, n = 0, nd = 0, cap = bs->n + 1;
	struct dup_item *it = calloc(cap, sizeof(*it));
	const struct pc_prefix **dup = calloc(cap, sizeof(*dup));
	struct nftnl_set *s = NULL;

	if (!it || !dup)
		goto out;
	for (size_t i = 0; i < bs->n; i++) {
		const struct pc_prefix *p = &bs->r[i].pfx;

		if (p->addr.family != af)
			continue;
		it[n].r = &bs->r[i];
		memcpy(it[n].lo, p->addr.a, alen);
		memcpy(it[n].hi, p->addr.a, alen);
		for (size_t bit = p->len; bit < alen * 8; bit++) {
			it[n].lo[bit / 8] &= (uint8_t) ~(0x80 >> (bit % 8));
			it[n].hi[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
		}
		n++;
	}
	if (n)
		qsort(it, n, sizeof(*it), dup_cmp);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = i + 1; j < n && memcmp(it[j].lo, it[i].hi, alen) <= 0; j++) {
			if (memcmp(it[i].r->who, it[j].r->who, sizeof(it[i].r->who)) == 0)
				continue;
			if (nd == cap) {
				const struct pc_prefix **nx =
				    realloc(dup, (cap *= 2) * sizeof(*nx));

				if (!nx)
					goto out;
				dup = nx;
			}
			dup[nd++] =
			    it[j].r->pfx.len >= it[i].r->pfx.len ? &it[j].r->pfx : &it[i].r->pfx;
		}
	}
	s = nftset_prefixes(NFPROTO_BRIDGE, name, af, dup, nd);
out:
	free(it);
	free(dup);
	return s;
}

static void bindset_sets(struct bld *b, const struct bindset *bs)
{
	const struct pc_prefix **pfx;
	char name[32];

	if (!bs->n)
		return;
	pfx = calloc(bs->n, sizeof(*pfx));
	if (!pfx) {
		b->err = b->err ? b->err : PC_ENOMEM;
		return;
	}
	for (size_t i = 0; i < bs->n; i++)
		pfx[i] = &bs->r[i].pfx;
	bs_name(name, sizeof(name), bs, "who", 0);
	rsb_push(b, NFT_SET_OBJ, nftset_bind_whos(name, bs_wholen(bs), bs->r, bs->n));
	for (int v6 = 0; v6 < 2; v6++) {
		uint8_t af = v6 ? AF_INET6 : AF_INET;
		int f = v6 ? 6 : 4;

		bs_name(name, sizeof(name), bs, "src", f);
		rsb_push(b, NFT_SET_OBJ, nftset_prefixes(NFPROTO_BRIDGE, name, af, pfx, bs->n));
		bs_name(name, sizeof(name), bs, "dup", f);
		rsb_push(b, NFT_SET_OBJ, bindset_dups(bs, name, af));
		bs_name(name, sizeof(name), bs, "pair", f);
		rsb_push(b, NFT_SET_OBJ, nftset_bind_pairs(name, af, bs_wholen(bs), bs->r, bs->n));
	}
	if (bs->is_mac) {
		bs_name(name, sizeof(name), bs, "sha", 0);
		rsb_push(b, NFT_SET_OBJ, nftset_mac_pairs(name, bs->r, bs->n));
	}
	free(pfx);
}

/* Where an address sits in a frame: payload base, offset, length. */
struct field {
	uint32_t base, off, len;
};

/* The frame's who (input port or source MAC; out: output port or
 * destination MAC) is [not] in <k>_who. */
static void nm_who_in(struct nr *r, const struct bindset *bs, bool out, bool inv)
{
	char name[32];

	bs_name(name, sizeof(name), bs, "who", 0);
	if (bs->is_mac)
		nr_payload(r, NFT_PAYLOAD_LL_HEADER, out ? 0 : 6, 6);
	else
		nr_meta(r, out ? NFT_META_OIFNAME : NFT_META_IIFNAME);
	nr_lookup(r, name, inv);
}

/* "who . address" is not one of the bound pairs: the fields load into
 * consecutive 32-bit registers, who first. Named as the kernel dumps them
 * (a 32-bit register at the start of a 128-bit one by the latter: reg 1
 * for reg32 0, reg 2 for reg32 4), so that the texts compare. */
static void nm_pair_not_in(struct nr *r, const struct bindset *bs, bool out, struct field a, int f)
{
	char name[32];

	bs_name(name, sizeof(name), bs, "pair", f);
	if (bs->is_mac) {
		nr_payload_to(r, NFT_REG_1, NFT_PAYLOAD_LL_HEADER, out ? 0 : 6, 6);
		nr_payload_to(r, NFT_REG32_02, a.base, a.off, a.len);
	} else {
		nr_meta_to(r, NFT_REG_1, out ? NFT_META_OIFNAME : NFT_META_IIFNAME);
		nr_payload_to(r, NFT_REG_2, a.base, a.off, a.len);
	}
	nr_lookup_from(r, NFT_REG_1, name, true);
}

static void nm_field_in(struct nr *r, struct field a, const char *set, bool inv)
{
	nr_payload(r, a.base, a.off, a.len);
	nr_lookup(r, set, inv);
}

static void counted_drop(struct nr *r)
{
	nr_counter(r);
	nr_verdict(r, NF_DROP, NULL);
}

/* The exemptions of "not bound here" (kind 1: link-local and unspecified
 * IPv6 sources, neighbour discovery's; kind 2: ARP probes' 0.0.0.0;
 * kind 3: link-local NA targets). */
static void nm_exempt(struct nr *r, int kind)
{
	static const uint8_t any4[4], mask[2] = {0xff, 0xc0}, zero2[2] = {0, 0},
				      ll[2] = {0xfe, 0x80};

	if (kind == 1) {
		nm_ip6_not_ll(r);
	} else if (kind == 2) {
		nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 14, 4);
		nr_cmp(r, NFT_CMP_NEQ, any4, 4); /* 0.0.0.0: ARP probes (RFC 5227) */
	} else if (kind == 3) {
		nr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 8, 2);
		nr_bitwise(r, 2, mask, zero2);
		nr_cmp(r, NFT_CMP_NEQ, ll, 2);
	}
}

/* An ICMPv6 neighbour advertisement (its target: transport header + 8). */
static void nm_na(struct nr *r)
{
	static const uint8_t na = 136;

	nm_l4proto(r, NFT_CMP_EQ, IPPROTO_ICMPV6);
	nr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1);
	nr_cmp(r, NFT_CMP_EQ, &na, 1);
}

/* The bindings of one kind over one address field (kind 0: IPv4 source,
 * 1: IPv6 source, 2: ARP sender, 3: NA target): an address bound to two
 * different ports (or MACs) comes from none — each binding's "only from
 * there" excludes the other —; a bound port (or MAC) sends only its own
 * addresses; a bound address comes only from its port (or MAC). The same
 * drops as one pair of rules per binding, as lookups. */
static void bind_rules(struct bld *b, const struct bindset *bs, int kind)
{
	static const struct field fields[] = {{NFT_PAYLOAD_NETWORK_HEADER, 12, 4},
					      {NFT_PAYLOAD_NETWORK_HEADER, 8, 16},
					      {NFT_PAYLOAD_NETWORK_HEADER, 14, 4},
					      {NFT_PAYLOAD_TRANSPORT_HEADER, 8, 16}};
	struct field a = fields[kind];
	int f = kind == 1 || kind == 3 ? 6 : 4;
	char dup[32], src[32];
	struct nr r;

	if (!bs->n)
		return;
	bs_name(dup, sizeof(dup), bs, "dup", f);
	bs_name(src, sizeof(src), bs, "src", f);
	rsb_rule_begin(b, &r);
	if (kind == 3)
		nm_na(&r);
	nm_field_in(&r, a, dup, false);
	counted_drop(&r);
	rsb_rule_end(b, &r);
	/* the port/MAC sends only from its sandboxes' addresses ... */
	rsb_rule_begin(b, &r);
	if (kind == 3)
		nm_na(&r);
	nm_who_in(&r, bs, false, false);
	nm_pair_not_in(&r, bs, false, a, f);
	nm_exempt(&r, kind);
	counted_drop(&r);
	rsb_rule_end(b, &r);
	/* ... and those addresses come only from that port/MAC */
	rsb_rule_begin(b, &r);
	if (kind == 3)
		nm_na(&r);
	nm_field_in(&r, a, src, false);
	nm_pair_not_in(&r, bs, false, a, f);
	counted_drop(&r);
	rsb_rule_end(b, &r);
}

/* kind 0 = ipv4, 1 = ipv6, 2 = arp: one regular chain each. */
static void bridge_family_chain(struct bld *b, int kind, const struct bindset *bs)
{
	static const char *const names[] = {"ipv4", "ipv6", "arp"};
	const char *all = kind == 1 ? "src6" : "src4";
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
	for (int k = 0; k < 2; k++) {
		bind_rules(b, &bs[k], kind);
		/* the port/MAC advertises only its sandbox's addresses, and
		 * those only it advertises */
		if (kind == 1)
			bind_rules(b, &bs[k], 3);
	}
	if (kind == 2 && bs[1].n) {
		/* ARP sender hardware address must be the frame's */
		rsb_rule_begin(b, &r);
		nm_who_in(&r, &bs[1], false, false);
		nr_payload_to(&r, NFT_REG_1, NFT_PAYLOAD_LL_HEADER, 6, 6);
		nr_payload_to(&r, NFT_REG32_02, NFT_PAYLOAD_NETWORK_HEADER, 8, 6);
		nr_lookup_from(&r, NFT_REG_1, "m_sha", true);
		counted_drop(&r);
		rsb_rule_end(b, &r);
	}
	rsb_rule_begin(b, &r);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
}

static void bridge_sets(struct bld *b, const struct bindset *bs, const struct pc_prefix **all,
			size_t nall)
{
	rsb_push(b, NFT_SET_OBJ, nftset_ports(b->p->ports, b->p->n_ports));
	rsb_push(b, NFT_SET_OBJ, nftset_prefixes(NFPROTO_BRIDGE, "src4", AF_INET, all, nall));
	rsb_push(b, NFT_SET_OBJ, nftset_prefixes(NFPROTO_BRIDGE, "src6", AF_INET6, all, nall));
	for (int k = 0; k < 2; k++)
		bindset_sets(b, &bs[k]);
}

/* Frames the gateway sends toward a bound sandbox's address leave only
 * through that sandbox's port (or toward its MAC). A sandbox that sends from
 * another one's MAC moves that MAC to its own port in the bridge's
 * forwarding database; without this chain the gateway would then hand it
 * the other sandbox's traffic (tests/escape/l2.sh, MAC spoofing). An
 * address bound to two ports (or MACs) is sent to none. */
static void bridge_output_chain(struct bld *b, const struct bindset *bs)
{
	char set[32];
	struct nr r;

	rsb_chain(b, "output", "filter", NF_BR_LOCAL_OUT, NFT_PRIO_BRIDGE, NF_ACCEPT);
	for (int k = 0; k < 2; k++) {
		if (!bs[k].n)
			continue;
		for (int v6 = 0; v6 < 2; v6++) {
			struct field a = {NFT_PAYLOAD_NETWORK_HEADER, v6 ? 24u : 16u,
					  v6 ? 16u : 4u};
			int f = v6 ? 6 : 4;

			for (int w = 0; w < 2; w++) {
				rsb_rule_begin(b, &r);
				nr_payload(&r, NFT_PAYLOAD_LL_HEADER, 12, 2);
				nr_cmp_be16(&r, NFT_CMP_EQ, v6 ? ETH_P_IPV6_ : ETH_P_IP_);
				bs_name(set, sizeof(set), &bs[k], w ? "src" : "dup", f);
				nm_field_in(&r, a, set, false);
				if (w)
					nm_pair_not_in(&r, &bs[k], true, a, f);
				counted_drop(&r);
				rsb_rule_end(b, &r);
			}
		}
	}
}

void nft_bridge_table(struct bld *b)
{
	const struct policy *pol = b->p->policy;
	struct binding *bd = NULL;
	struct bindset bs[2] = {{0}};
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
	if (!b->err &&
	    (bindset_fill(&bs[0], bd, nbd, false) < 0 || bindset_fill(&bs[1], bd, nbd, true) < 0))
		b->err = PC_ENOMEM;
	rsb_table(b);
	bridge_sets(b, bs, all, nall);
	/* regular chains first: the prerouting chain jumps to them */
	for (int k = 0; k < 3; k++)
		bridge_family_chain(b, k, bs);

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
	bridge_output_chain(b, bs);
	bindings_free(bd, nbd);
	free(bs[0].r);
	free(bs[1].r);
	free(all);
}
