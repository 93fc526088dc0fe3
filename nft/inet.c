/* table inet portcullis: the sandbox packet paths — verdict marks coming
 * back through NF_REPEAT, DNS and new flows to the queue, decided flows
 * through, the gateway closed, the vault redirect. docs/engine.md walks
 * through every rule. */
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

#define NF_NAT_RANGE_PROTO_SPECIFIED_ 0x2 /* linux/netfilter/nf_nat.h */
#define ND_RS			      133
#define ND_RA			      134
#define ND_NS			      135
#define ND_NA			      136

static void verdict_rule(struct bld *b, uint32_t bits, uint32_t ctbits)
{
	struct nr r;

	/* (the chain's first rule already let non-sandbox packets go) */
	rsb_rule_begin(b, &r);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, bits);
	if (ctbits)
		nm_ctmark_set(&r, ctbits);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
}

/* One-match accept rules, the commonest shape of this table. */
static void accept_ifname(struct bld *b, uint32_t key, uint32_t op, const char *name)
{
	struct nr r;

	rsb_rule_begin(b, &r);
	nm_ifname(&r, key, op, name);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
}

static void accept_bits(struct bld *b, bool ct, uint32_t mask, uint32_t value)
{
	struct nr r;

	rsb_rule_begin(b, &r);
	nm_bits(&r, ct, mask, NFT_CMP_EQ, value);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
}

/* Neighbour discovery the gateway must let through (types: ND_*). */
static void accept_nd(struct bld *b, const uint8_t *types, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct nr r;

		rsb_rule_begin(b, &r);
		nm_nd(&r, types[i]);
		nr_verdict(&r, NF_ACCEPT, NULL);
		rsb_rule_end(b, &r);
	}
}

/* Counted drop, the end of a rule. */
static void nr_drop(struct nr *r)
{
	nr_counter(r);
	nr_verdict(r, NF_DROP, NULL);
}

/* DNS to (to_resolver) or from a resolver of family v6, transport tcp. */
static void nm_resolver_dns(struct nr *r, int v6, int tcp, bool to_resolver)
{
	nm_addr_set(r, true, v6 ? AF_INET6 : AF_INET, !to_resolver,
		    v6 ? "resolvers6" : "resolvers4", false);
	nm_l4proto(r, NFT_CMP_EQ, tcp ? IPPROTO_TCP : IPPROTO_UDP);
	nm_th_port(r, to_resolver, 53);
}

static void queue_expr(struct bld *b, struct nr *r)
{
	uint16_t base = b->p->cfg->queue.base, cnt = b->p->cfg->queue.count;

	nr_expr(r, b->p->qpath == NFT_QUEUE_NATIVE ? nft_expr_queue_native(base, cnt)
						   : nft_expr_queue_compat(base, cnt));
}

/* How long a meter remembers a port that stopped opening flows (its bucket
 * is full again after 1/rate s per token anyway). */
#define LIMIT_IDLE_MS 60000

/* The packets a sandbox may queue on flows it already opened (segments of
 * DNS over TCP, of held flows), per token of its new-flow limit: a TLS
 * handshake held for its ClientHello or a DNS-over-TCP exchange takes a few
 * (ACK, one or two data segments, FIN), a flood takes them all. */
#define LIMIT_SEGMENTS_PER_FLOW 4u

/* Which packets spend a sandbox's tokens (docs/engine.md, "New-flow
 * limit"): everything it can make the engine read. */
enum limit_what {
	LIM_NEW,     /* new, invalid, untracked: whatever conntrack has no flow for */
	LIM_UDP_DNS, /* a UDP DNS query on an established 5-tuple */
	LIM_TCP_DNS, /* a segment of an established DNS-over-TCP connection */
	LIM_HELD,    /* a segment of a held flow */
	LIM_N
};

/* The sandboxes' new-flow limits (docs/engine.md, "New-flow limit"), one
 * group of rules per distinct limit (a class: rate and burst), not per
 * sandbox (issue 34: 4,000 rules at 1,000 sandboxes walked by every queued
 * packet). For each class and each family its sandboxes' sources have:
 * whatever conntrack has no flow for (new, invalid, untracked) or a UDP
 * DNS query on an established 5-tuple is counted in the meter lim<c>; the
 * later segments of DNS-over-TCP and held flows in the meter seg<c>, at
 * LIMIT_SEGMENTS_PER_FLOW times the rate. One bucket per sandbox port (the
 * stamp: a flooding port never spends another's tokens, whatever source it
 * forges). Over the limit: the packet is counted for its sandbox (by the
 * element of limsb<f> its source is in: each element belongs to one
 * sandbox and counts what the lookup finds), counted, dropped. Every
 * packet from a sandbox that reaches the queue has passed one of these
 * (the queue rules follow). */
struct limclass {
	uint32_t rate, burst;
	const struct pc_prefix **pfx;
	size_t n;
};

struct limits {
	struct limclass *c;
	size_t nc;
	/* every sandbox's sources with the sandbox's index, for limsb4/6 */
	const struct pc_prefix **pfx;
	uint32_t *owner;
	size_t n;
};

static void limits_free(struct limits *l)
{
	for (size_t i = 0; i < l->nc; i++)
		free(l->c[i].pfx);
	free(l->c);
	free(l->pfx);
	free(l->owner);
}

static int limits_group(const struct policy *pol, struct limits *l)
{
	size_t nsb = policy_sandbox_count(pol), total = 0;

	memset(l, 0, sizeof(*l));
	for (size_t i = 0; i < nsb; i++)
		total += policy_sandbox_at(pol, i)->match.n_sources;
	l->c = calloc(nsb ? nsb : 1, sizeof(*l->c));
	l->pfx = calloc(total ? total : 1, sizeof(*l->pfx));
	l->owner = calloc(total ? total : 1, sizeof(*l->owner));
	if (!l->c || !l->pfx || !l->owner)
		return PC_ENOMEM;
	for (size_t i = 0; i < nsb; i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(pol, i);
		struct limclass *c = NULL;
		const struct pc_prefix **np;

		if (!sb->match.n_sources)
			continue; /* sends only from another sandbox's sources (layer 2): its rule
				   */
		for (size_t k = 0; k < l->nc && !c; k++)
			if (l->c[k].rate == sb->new_flows_per_second &&
			    l->c[k].burst == sb->new_flows_burst)
				c = &l->c[k];
		if (!c) {
			c = &l->c[l->nc++];
			c->rate = sb->new_flows_per_second;
			c->burst = sb->new_flows_burst;
		}
		np = realloc(c->pfx, (c->n + sb->match.n_sources) * sizeof(*np));
		if (!np)
			return PC_ENOMEM;
		c->pfx = np;
		for (size_t k = 0; k < sb->match.n_sources; k++) {
			c->pfx[c->n++] = &sb->match.sources[k];
			l->pfx[l->n] = &sb->match.sources[k];
			l->owner[l->n++] = (uint32_t)i;
		}
	}
	return 0;
}

static void limit_rules(struct bld *b, size_t ci, const struct limclass *c)
{
	char meter[24], seg[24], src[32];
	struct nr r;

	snprintf(meter, sizeof(meter), "lim%zu", ci);
	snprintf(seg, sizeof(seg), "seg%zu", ci);
	rsb_push(b, NFT_SET_OBJ, nftset_meter(NFPROTO_INET, meter));
	rsb_push(b, NFT_SET_OBJ, nftset_meter(NFPROTO_INET, seg));
	for (int v6 = 0; v6 < 2; v6++) {
		uint8_t af = v6 ? AF_INET6 : AF_INET;
		bool any = false;

		for (size_t k = 0; k < c->n; k++)
			any = any || c->pfx[k]->addr.family == af;
		if (!any)
			continue;
		snprintf(src, sizeof(src), "lim%zu_src%c", ci, v6 ? '6' : '4');
		rsb_push(b, NFT_SET_OBJ, nftset_prefixes(NFPROTO_INET, src, af, c->pfx, c->n));
		for (int w = 0; w < LIM_N; w++) {
			uint32_t est = NF_CT_STATE_BIT(IP_CT_ESTABLISHED);
			uint32_t k = w >= LIM_TCP_DNS ? LIMIT_SEGMENTS_PER_FLOW : 1;

			rsb_rule_begin(b, &r);
			nm_addr_set(&r, true, af, true, src, false);
			switch (w) {
			case LIM_NEW:
				nm_ct_state(&r, NF_CT_STATE_BIT(IP_CT_NEW) |
						    NF_CT_STATE_INVALID_BIT |
						    NF_CT_STATE_UNTRACKED_BIT);
				break;
			case LIM_UDP_DNS:
			case LIM_TCP_DNS:
				nm_l4proto(&r, NFT_CMP_EQ,
					   w == LIM_UDP_DNS ? IPPROTO_UDP : IPPROTO_TCP);
				nm_th_port(&r, true, 53);
				nm_ct_state(&r, w == LIM_UDP_DNS
						    ? est
						    : est | NF_CT_STATE_BIT(IP_CT_RELATED));
				break;
			default:
				nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_HELD, NFT_CMP_EQ,
					NFT_MARK_HELD);
				nm_ct_state(&r, est | NF_CT_STATE_BIT(IP_CT_RELATED));
				break;
			}
			nr_meta(&r, NFT_META_MARK);
			nr_bitwise_u32(&r, NFT_MARK_PORT_MASK, 0);
			nr_limit_meter(&r, w >= LIM_TCP_DNS ? seg : meter, LIMIT_IDLE_MS,
				       (uint64_t)c->rate * k, c->burst * k);
			/* over the limit: counted for the sandbox of the source
			 * (the set holds every source of a limit's rules: the
			 * lookup finds it; were it not to, the packet would go
			 * on to the queue, never to an accept) */
			nm_addr_set(&r, false, af, true, v6 ? NFT_SET_LIMSB6 : NFT_SET_LIMSB4,
				    false);
			nr_drop(&r);
			rsb_rule_end(b, &r);
		}
	}
}

static void limits_all(struct bld *b)
{
	struct limits l;

	if (limits_group(b->p->policy, &l) < 0) {
		b->err = b->err ? b->err : PC_ENOMEM;
		limits_free(&l);
		return;
	}
	rsb_push(b, NFT_SET_OBJ, nftset_owned(NFT_SET_LIMSB4, AF_INET, l.pfx, l.owner, l.n));
	rsb_push(b, NFT_SET_OBJ, nftset_owned(NFT_SET_LIMSB6, AF_INET6, l.pfx, l.owner, l.n));
	for (size_t i = 0; i < l.nc; i++)
		limit_rules(b, i, &l.c[i]);
	limits_free(&l);
}

/* A bare ACK of a held flow, matched exactly so that nothing else can take
 * the ways past the queue below: no IP options or IPv6 extension headers,
 * a TCP header of th bytes (20, or 32: the timestamp option every Linux
 * stack sends), total length that header and nothing more, flags ACK alone
 * (no SYN, FIN, RST, PSH, URG, ECN, reserved bits), urgent pointer 0 (H2a:
 * a pointer moved without URG is queued and refused). */
static const uint8_t bare_ack_thlens[] = {20, 32};

static void nm_bare_ack(struct nr *r, bool v6, uint8_t th)
{
	nr_meta(r, NFT_META_NFPROTO);
	nr_cmp_u8(r, NFT_CMP_EQ, v6 ? NFPROTO_IPV6 : NFPROTO_IPV4);
	if (v6) {
		/* next header TCP: no extension header */
		nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 6, 1);
		nr_cmp_u8(r, NFT_CMP_EQ, IPPROTO_TCP);
		nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 4, 2);
		nr_cmp_be16(r, NFT_CMP_EQ, th);
	} else {
		/* version 4, header 20 bytes: no options */
		nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 0, 1);
		nr_cmp_u8(r, NFT_CMP_EQ, 0x45);
		nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 9, 1);
		nr_cmp_u8(r, NFT_CMP_EQ, IPPROTO_TCP);
		nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 2, 2);
		nr_cmp_be16(r, NFT_CMP_EQ, (uint16_t)(20 + th));
	}
	/* data offset, reserved bits 0, flags ACK alone */
	nr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 12, 2);
	nr_cmp_be16(r, NFT_CMP_EQ, (uint16_t)((th / 4) << 12 | 0x10));
	nr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 18, 2);
	nr_cmp_be16(r, NFT_CMP_EQ, 0);
}

/* A held flow's bare ACKs from the sandbox go on without the queue
 * (docs/engine.md, "Held flows: what is queued"): the engine passes them
 * anyway (H7), since they put no byte in the server's stream. The packet
 * takes PASS with its stamp kept, as the engine's verdict would: forward
 * rule 7 and the routing rule for PASS carry it. */
static void held_bare_ack_rules(struct bld *b)
{
	for (int v6 = 0; v6 < 2; v6++) {
		for (size_t i = 0; i < sizeof(bare_ack_thlens); i++) {
			struct nr r;

			rsb_rule_begin(b, &r);
			nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_HELD, NFT_CMP_EQ,
				NFT_MARK_HELD);
			nm_bare_ack(&r, v6, bare_ack_thlens[i]);
			nr_meta(&r, NFT_META_MARK);
			nr_bitwise_u32(&r, NFT_MARK_PORT_MASK, NFT_MARK_PASS);
			nr_meta_set(&r, NFT_META_MARK);
			nr_counter(&r);
			nr_verdict(&r, NF_ACCEPT, NULL);
			rsb_rule_end(b, &r);
		}
	}
}

/* The server's bare ACKs of a held flow whose ClientHello was judged allowed
 * (ct mark TLS) go on toward the sandbox without the queue: a TLS flow is
 * promoted only with or after the server's first bytes (H13a), never on a
 * bare acknowledgement, and such a segment moves nothing the engine keeps of
 * the server's sequence space. A flow judged "not TLS" has no TLS bit: it is
 * promoted on the acknowledgement, which must still be queued. The same
 * exact shape as the sandbox's (nm_bare_ack); anything else is queued. */
static void held_reply_bare_ack_rules(struct bld *b)
{
	for (int v6 = 0; v6 < 2; v6++) {
		for (size_t i = 0; i < sizeof(bare_ack_thlens); i++) {
			struct nr r;

			rsb_rule_begin(b, &r);
			nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, 0);
			nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_HELD | NFT_MARK_TLS, NFT_CMP_EQ,
				NFT_MARK_HELD | NFT_MARK_TLS);
			nm_ct_reply(&r);
			nm_bare_ack(&r, v6, bare_ack_thlens[i]);
			nr_counter(&r);
			nr_verdict(&r, NF_ACCEPT, NULL);
			rsb_rule_end(b, &r);
		}
	}
}

static void inet_prerouting(struct bld *b)
{
	const char *br = b->p->cfg->bridge;
	static const uint8_t nd_in[] = {ND_RS, ND_NS, ND_NA};
	struct nr r;

	rsb_chain(b, "prerouting", "filter", NF_INET_PRE_ROUTING, NFT_PRIO_INET, NF_DROP);
	/* not from the sandbox bridge: not ours */
	accept_ifname(b, NFT_META_IIFNAME, NFT_CMP_NEQ, br);
	/* The fast path, first: a decided flow (our ct mark) from a port the
	 * bridge table stamped. Bulk data stops here. (The engine never
	 * allows a port-53 flow, so DNS is still judged message by message;
	 * an unstamped frame falls through to the drop below.) */
	rsb_rule_begin(b, &r);
	nm_bits(&r, false, NFT_MARK_PORT_MASK, NFT_CMP_NEQ, 0);
	nm_bits(&r, true, NFT_MARK_ALLOW, NFT_CMP_EQ, NFT_MARK_ALLOW);
	/* The packet carries the verdict too (stamp kept, ALLOW added): the
	 * routing rules (NFT_ROUTE_*) send bridge traffic on only with it, so
	 * without this table nothing from a sandbox is routed at all. */
	nr_meta(&r, NFT_META_MARK);
	nr_bitwise_u32(&r, NFT_MARK_PORT_MASK, NFT_MARK_ALLOW);
	nr_meta_set(&r, NFT_META_MARK);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
	/* a verdict coming back through NF_REPEAT (its mark: verdict bits only) */
	verdict_rule(b, NFT_MARK_PASS, 0);
	/* The segment that completed a held flow's allowed ClientHello: PASS,
	 * and the ct mark says the flow was judged as TLS (the forward chain
	 * lets the server's bare ACKs of it past the queue). Only on a held
	 * flow; elsewhere it is a combination we never produce (dropped below). */
	rsb_rule_begin(b, &r);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, NFT_MARK_PASS | NFT_MARK_TLS);
	nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_HELD, NFT_CMP_EQ, NFT_MARK_HELD);
	nm_ctmark_set(&r, NFT_MARK_HELD | NFT_MARK_TLS);
	nr_meta(&r, NFT_META_MARK);
	nr_bitwise_u32(&r, 0, NFT_MARK_PASS);
	nr_meta_set(&r, NFT_META_MARK);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
	verdict_rule(b, NFT_MARK_ALLOW, NFT_MARK_ALLOW);
	verdict_rule(b, NFT_MARK_ALLOW | NFT_MARK_VAULT, NFT_MARK_ALLOW | NFT_MARK_VAULT);
	verdict_rule(b, NFT_MARK_HELD, NFT_MARK_HELD);
	rsb_rule_begin(b, &r);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, NFT_MARK_REJECT);
	nm_l4proto(&r, NFT_CMP_EQ, IPPROTO_TCP);
	nr_reject(&r, NFT_REJECT_TCP_RST, 0);
	rsb_rule_end(b, &r);
	rsb_rule_begin(b, &r);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, NFT_MARK_REJECT);
	nr_reject(&r, NFT_REJECT_ICMPX_UNREACH, NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
	rsb_rule_end(b, &r);
	/* any other combination of our bits is nothing we produce */
	rsb_rule_begin(b, &r);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_NEQ, 0);
	nr_drop(&r);
	rsb_rule_end(b, &r);
	/* not stamped by the bridge table: not from a known sandbox port */
	rsb_rule_begin(b, &r);
	nm_bits(&r, false, NFT_MARK_PORT_MASK, NFT_CMP_EQ, 0);
	nr_drop(&r);
	rsb_rule_end(b, &r);
	/* the sandboxes' new-flow limits, before anything is queued */
	limits_all(b);
	/* every DNS message is judged, whatever the conntrack state */
	for (int tcp = 0; tcp < 2; tcp++) {
		rsb_rule_begin(b, &r);
		nm_l4proto(&r, NFT_CMP_EQ, tcp ? IPPROTO_TCP : IPPROTO_UDP);
		nm_th_port(&r, true, 53);
		queue_expr(b, &r);
		rsb_rule_end(b, &r);
	}
	held_bare_ack_rules(b);
	/* held flows: every other packet until the ClientHello decides */
	rsb_rule_begin(b, &r);
	nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_HELD, NFT_CMP_EQ, NFT_MARK_HELD);
	queue_expr(b, &r);
	rsb_rule_end(b, &r);
	accept_nd(b, nd_in, sizeof(nd_in));
	/* the gateway itself: only DNS (above) and the vault (after dnat) */
	rsb_rule_begin(b, &r);
	nr_fib_daddr_type(&r);
	nr_cmp_u32(&r, NFT_CMP_EQ, 2 /* RTN_LOCAL */);
	nr_drop(&r);
	rsb_rule_end(b, &r);
	rsb_rule_begin(b, &r);
	nm_ct_state(&r, NF_CT_STATE_BIT(IP_CT_NEW));
	queue_expr(b, &r);
	rsb_rule_end(b, &r);
	rsb_drop_rule(b);
}

/* PASS-marked DNS to the resolvers (input: local resolver; forward: from
 * the bridge iif), per family and transport. */
static void dns_pass_rules(struct bld *b, bool to_resolver, const char *iif)
{
	struct nr r;

	for (int v6 = 0; v6 < 2; v6++) {
		for (int tcp = 0; tcp < 2; tcp++) {
			rsb_rule_begin(b, &r);
			if (iif)
				nm_ifname(&r, NFT_META_IIFNAME, NFT_CMP_EQ, iif);
			nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, NFT_MARK_PASS);
			nm_resolver_dns(&r, v6, tcp, to_resolver);
			nr_verdict(&r, NF_ACCEPT, NULL);
			rsb_rule_end(b, &r);
		}
	}
}

/* Answers from the resolvers toward a sandbox: queued so the DNS guard
 * learns (and may drop) them before they are released. */
static void dns_answer_queue_rules(struct bld *b)
{
	struct nr r;

	for (int v6 = 0; v6 < 2; v6++) {
		for (int tcp = 0; tcp < 2; tcp++) {
			rsb_rule_begin(b, &r);
			nm_ct_state(&r, NF_CT_STATE_BIT(IP_CT_ESTABLISHED));
			nm_ct_reply(&r);
			nm_resolver_dns(&r, v6, tcp, false);
			queue_expr(b, &r);
			rsb_rule_end(b, &r);
		}
	}
}

/* Every way in is guarded, not only the bridge: whatever arrives on an
 * interface that is neither the sandbox bridge, a declared uplink nor lo
 * (a sandbox port taken off the bridge and given an address, a VLAN stacked
 * on one, a VM's second NIC) is dropped — first in the forward chain (never
 * forwarded) and in the input chain (the gateway's own services do not
 * answer it either). docs/engine.md, "Uplinks". */
static void way_in_rule(struct bld *b)
{
	struct nr r;

	rsb_rule_begin(b, &r);
	nm_ifname(&r, NFT_META_IIFNAME, NFT_CMP_NEQ, b->p->cfg->bridge);
	nm_ifname(&r, NFT_META_IIFNAME, NFT_CMP_NEQ, "lo");
	for (size_t k = 0; k < b->p->cfg->n_uplinks; k++)
		nm_ifname(&r, NFT_META_IIFNAME, NFT_CMP_NEQ, b->p->cfg->uplinks[k]);
	nr_drop(&r);
	rsb_rule_end(b, &r);
}

static void inet_input(struct bld *b)
{
	const char *br = b->p->cfg->bridge;
	static const uint8_t nd_in[] = {ND_RS, ND_NS, ND_NA};
	struct nr r;

	rsb_chain(b, "input", "filter", NF_INET_LOCAL_IN, NFT_PRIO_INET, NF_ACCEPT);
	way_in_rule(b);
	accept_ifname(b, NFT_META_IIFNAME, NFT_CMP_NEQ, br);
	/* flows the nat chain redirected to the vault */
	rsb_rule_begin(b, &r);
	nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_VAULT, NFT_CMP_EQ,
		NFT_MARK_ALLOW | NFT_MARK_VAULT);
	nr_ct(&r, NFT_CT_STATUS);
	nr_bitwise_u32(&r, IPS_DST_NAT, 0);
	nr_cmp_u32(&r, NFT_CMP_NEQ, 0);
	nm_l4proto(&r, NFT_CMP_EQ, IPPROTO_TCP);
	nm_th_port(&r, true, b->p->cfg->vault.listen.port);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
	dns_pass_rules(b, true, NULL);
	accept_nd(b, nd_in, sizeof(nd_in));
	rsb_drop_rule(b);
}

/* What the engine released (PASS) from the sandboxes may go only where the
 * engine releases anything: to a resolver's port 53, or on a held flow
 * (its segments before the ClientHello decides). Whatever else carries the
 * mark is dropped and counted, so a slip in the engine's DNS path cannot
 * open a channel to another address (defence in depth; the checker's
 * pass-restricted obligation proves it of the live table). */
static void forward_pass_rules(struct bld *b)
{
	const char *br = b->p->cfg->bridge;
	struct nr r;

	dns_pass_rules(b, true, br);
	rsb_rule_begin(b, &r);
	nm_ifname(&r, NFT_META_IIFNAME, NFT_CMP_EQ, br);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, NFT_MARK_PASS);
	nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_HELD, NFT_CMP_EQ, NFT_MARK_HELD);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
	rsb_rule_begin(b, &r);
	nm_ifname(&r, NFT_META_IIFNAME, NFT_CMP_EQ, br);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, NFT_MARK_PASS);
	nr_drop(&r);
	rsb_rule_end(b, &r);
}

/* Held flows' TCP replies (forward, toward the sandboxes; docs/engine.md,
 * "Held flows"): queued until the server has acknowledged the bytes the
 * decision rested on. The engine's verdict on the reply that does is ALLOW:
 * it promotes the flow here, in the reply direction; PASS releases one
 * reply; any other mark on a held reply is nothing we produce (and must
 * not be queued again). */
static void held_reply_rules(struct bld *b)
{
	struct nr r;

	rsb_rule_begin(b, &r);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, NFT_MARK_ALLOW);
	nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_HELD, NFT_CMP_EQ, NFT_MARK_HELD);
	nm_ct_reply(&r);
	nm_l4proto(&r, NFT_CMP_EQ, IPPROTO_TCP);
	nm_ctmark_set(&r, NFT_MARK_ALLOW);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
	rsb_rule_begin(b, &r);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, NFT_MARK_PASS);
	nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_HELD, NFT_CMP_EQ, NFT_MARK_HELD);
	nm_ct_reply(&r);
	nm_l4proto(&r, NFT_CMP_EQ, IPPROTO_TCP);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
	held_reply_bare_ack_rules(b);
	rsb_rule_begin(b, &r);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, 0);
	nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_HELD, NFT_CMP_EQ, NFT_MARK_HELD);
	nm_ct_reply(&r);
	nm_l4proto(&r, NFT_CMP_EQ, IPPROTO_TCP);
	queue_expr(b, &r);
	rsb_rule_end(b, &r);
	rsb_rule_begin(b, &r);
	nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_HELD, NFT_CMP_EQ, NFT_MARK_HELD);
	nm_ct_reply(&r);
	nm_l4proto(&r, NFT_CMP_EQ, IPPROTO_TCP);
	nr_drop(&r);
	rsb_rule_end(b, &r);
}

static void inet_forward(struct bld *b)
{
	const char *br = b->p->cfg->bridge;
	struct nr r;

	rsb_chain(b, "forward", "filter", NF_INET_FORWARD, NFT_PRIO_INET, NF_ACCEPT);
	way_in_rule(b);
	/* sandbox to sandbox through the gateway */
	rsb_rule_begin(b, &r);
	nm_ifname(&r, NFT_META_IIFNAME, NFT_CMP_EQ, br);
	nm_ifname(&r, NFT_META_OIFNAME, NFT_CMP_EQ, br);
	nr_drop(&r);
	rsb_rule_end(b, &r);
	/* decided flows, both directions (and ICMP errors related to them) */
	accept_bits(b, true, NFT_MARK_ALLOW, NFT_MARK_ALLOW);
	/* from the sandboxes otherwise: released packets only */
	forward_pass_rules(b);
	/* the SYN of a held flow (its later packets come back as PASS) */
	rsb_rule_begin(b, &r);
	nm_ifname(&r, NFT_META_IIFNAME, NFT_CMP_EQ, br);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, NFT_MARK_HELD);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
	rsb_rule_begin(b, &r);
	nm_ifname(&r, NFT_META_IIFNAME, NFT_CMP_EQ, br);
	nr_drop(&r);
	rsb_rule_end(b, &r);
	/* toward the sandboxes */
	accept_ifname(b, NFT_META_OIFNAME, NFT_CMP_NEQ, br);
	accept_bits(b, false, NFT_MARK_MASK, NFT_MARK_PASS);
	held_reply_rules(b);
	/* other replies of held flows: ICMP errors about them */
	rsb_rule_begin(b, &r);
	nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_HELD, NFT_CMP_EQ, NFT_MARK_HELD);
	nm_ct_reply(&r);
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
	dns_answer_queue_rules(b);
	rsb_drop_rule(b);
}

static void inet_output(struct bld *b)
{
	const char *br = b->p->cfg->bridge;
	static const uint8_t nd_out[] = {ND_RA, ND_NS, ND_NA};
	struct nr r;

	/* Our synthesized DNS answers create no conntrack entry. */
	rsb_chain(b, "output_raw", "filter", NF_INET_LOCAL_OUT, NFT_PRIO_RAW, NF_ACCEPT);
	rsb_rule_begin(b, &r);
	nm_bits(&r, false, NFT_MARK_MASK, NFT_CMP_EQ, NFT_MARK_DNSREPLY);
	nr_notrack(&r);
	rsb_rule_end(b, &r);

	rsb_chain(b, "output", "filter", NF_INET_LOCAL_OUT, NFT_PRIO_INET, NF_ACCEPT);
	accept_ifname(b, NFT_META_OIFNAME, NFT_CMP_NEQ, br);
	accept_bits(b, false, NFT_MARK_MASK, NFT_MARK_DNSREPLY);
	accept_bits(b, false, NFT_MARK_MASK, NFT_MARK_PASS);
	/* replies of allowed flows served by the gateway (the vault) */
	accept_bits(b, true, NFT_MARK_ALLOW, NFT_MARK_ALLOW);
	/* RSTs and ICMP errors about a sandbox's packets (our refusals) */
	rsb_rule_begin(b, &r);
	nm_ct_state(&r, NF_CT_STATE_BIT(IP_CT_RELATED));
	nr_verdict(&r, NF_ACCEPT, NULL);
	rsb_rule_end(b, &r);
	accept_nd(b, nd_out, sizeof(nd_out));
	dns_answer_queue_rules(b); /* a local resolver's answers */
	rsb_drop_rule(b);
}

static void inet_nat(struct bld *b)
{
	struct nr r;
	struct nftnl_expr *e;

	rsb_chain(b, "nat_prerouting", "nat", NF_INET_PRE_ROUTING, NFT_PRIO_NAT, NF_ACCEPT);
	rsb_rule_begin(b, &r);
	nm_ifname(&r, NFT_META_IIFNAME, NFT_CMP_EQ, b->p->cfg->bridge);
	nm_bits(&r, true, NFT_MARK_ALLOW | NFT_MARK_VAULT, NFT_CMP_EQ,
		NFT_MARK_ALLOW | NFT_MARK_VAULT);
	nm_l4proto(&r, NFT_CMP_EQ, IPPROTO_TCP);
	nr_imm_be16(&r, NFT_REG_1, b->p->cfg->vault.listen.port);
	e = nftnl_expr_alloc("redir");
	if (e) {
		/* proto_max = proto_min, as the kernel reports it back */
		nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MAX, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED_);
	}
	nr_expr(&r, e);
	rsb_rule_end(b, &r);
}

void nft_inet_table(struct bld *b)
{
	const struct config *cfg = b->p->cfg;

	b->fam = NFPROTO_INET;
	rsb_table(b);
	rsb_push(b, NFT_SET_OBJ,
		 nftset_addrs(NFPROTO_INET, "resolvers4", AF_INET, cfg->dns.resolvers,
			      cfg->dns.n_resolvers));
	rsb_push(b, NFT_SET_OBJ,
		 nftset_addrs(NFPROTO_INET, "resolvers6", AF_INET6, cfg->dns.resolvers,
			      cfg->dns.n_resolvers));
	inet_prerouting(b);
	inet_input(b);
	inet_forward(b);
	inet_output(b);
	inet_nat(b);
}
