/* The ruleset portcullisd installs: table inet portcullis (sandbox packet
 * paths, queue, verdict marks, vault redirect) and table bridge portcullis
 * (port stamp, anti-spoofing, no bridging between sandbox ports). Built as
 * libnftnl objects without a kernel; docs/engine.md explains each rule. */
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

#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

struct nft_ruleset {
	struct nft_obj *o;
	size_t n, cap;
};

static void obj_free(struct nft_obj *o)
{
	switch (o->kind) {
	case NFT_TABLE_OBJ:
		nftnl_table_free(o->u.table);
		break;
	case NFT_CHAIN_OBJ:
		nftnl_chain_free(o->u.chain);
		break;
	case NFT_SET_OBJ:
		nftnl_set_free(o->u.set);
		break;
	case NFT_RULE_OBJ:
		nftnl_rule_free(o->u.rule);
		break;
	}
}

void nft_ruleset_free(struct nft_ruleset *rs)
{
	if (!rs)
		return;
	for (size_t i = 0; i < rs->n; i++)
		obj_free(&rs->o[i]);
	free(rs->o);
	free(rs);
}

size_t nft_ruleset_count(const struct nft_ruleset *rs)
{
	return rs->n;
}

const struct nft_obj *nft_ruleset_at(const struct nft_ruleset *rs, size_t i)
{
	return i < rs->n ? &rs->o[i] : NULL;
}

/* Takes ownership of obj (freed here on failure). */
void rsb_push(struct bld *b, enum nft_kind kind, void *obj)
{
	struct nft_obj o = {.kind = kind, .family = b->fam};

	o.u.table = obj; /* every member is a pointer: same storage */
	if (!obj) {
		b->err = b->err ? b->err : PC_ENOMEM;
		return;
	}
	if (b->err) {
		obj_free(&o);
		return;
	}
	if (kind == NFT_SET_OBJ) /* the kernel wants a batch-unique id */
		nftnl_set_set_u32(o.u.set, NFTNL_SET_ID, (uint32_t)++b->set_ids);
	if (b->rs->n == b->rs->cap) {
		size_t cap = b->rs->cap ? b->rs->cap * 2 : 64;
		struct nft_obj *n = realloc(b->rs->o, cap * sizeof(*n));

		if (!n) {
			obj_free(&o);
			b->err = PC_ENOMEM;
			return;
		}
		b->rs->o = n;
		b->rs->cap = cap;
	}
	b->rs->o[b->rs->n++] = o;
}

void rsb_table(struct bld *b)
{
	struct nftnl_table *t = nftnl_table_alloc();

	if (t) {
		nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, b->fam);
		if (nftnl_table_set_str(t, NFTNL_TABLE_NAME, NFT_TABLE) < 0) {
			nftnl_table_free(t);
			t = NULL;
		}
	}
	rsb_push(b, NFT_TABLE_OBJ, t);
}

/* hook < 0: a regular chain. Rules added after this go to it. */
void rsb_chain(struct bld *b, const char *name, const char *type, int hook, int prio,
	       uint32_t policy)
{
	struct nftnl_chain *c = nftnl_chain_alloc();

	b->chain = name;
	if (c) {
		nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, b->fam);
		if (nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NFT_TABLE) < 0 ||
		    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name) < 0 ||
		    (hook >= 0 && nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type) < 0)) {
			nftnl_chain_free(c);
			c = NULL;
		} else if (hook >= 0) {
			nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, (uint32_t)hook);
			nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
			nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, policy);
		}
	}
	rsb_push(b, NFT_CHAIN_OBJ, c);
}

void rsb_rule_begin(struct bld *b, struct nr *r)
{
	if (nr_init(r, b->fam, NFT_TABLE, b->chain) < 0) {
		r->r = NULL;
		r->err = PC_ENOMEM;
	}
	if (b->err && !r->err)
		r->err = b->err;
}

void rsb_rule_end(struct bld *b, struct nr *r)
{
	int err = 0;
	struct nftnl_rule *rule;

	if (!r->r) {
		b->err = b->err ? b->err : PC_ENOMEM;
		return;
	}
	rule = nr_finish(r, &err);
	if (!rule) {
		b->err = b->err ? b->err : err;
		return;
	}
	rsb_push(b, NFT_RULE_OBJ, rule);
}

/* ---- matchers (shared with nft/inet.c and nft/bridge.c)
 * -------------------------------------------------------------- */

void nm_ifname(struct nr *r, uint32_t key, uint32_t op, const char *name)
{
	nr_meta(r, key);
	nr_cmp_ifname(r, op, name);
}

/* (meta|ct) mark & mask <op> value */
void nm_bits(struct nr *r, bool ct, uint32_t mask, uint32_t op, uint32_t value)
{
	if (ct)
		nr_ct(r, NFT_CT_MARK);
	else
		nr_meta(r, NFT_META_MARK);
	nr_bitwise_u32(r, mask, 0);
	nr_cmp_u32(r, op, value);
}

/* ct mark = (ct mark & ~NFT_MARK_MASK) | bits: other owners' bits survive. */
void nm_ctmark_set(struct nr *r, uint32_t bits)
{
	nr_ct(r, NFT_CT_MARK);
	nr_bitwise_u32(r, ~NFT_MARK_MASK, bits);
	nr_ct_set(r, NFT_CT_MARK);
}

static void nm_nfproto(struct nr *r, uint8_t nfproto)
{
	nr_meta(r, NFT_META_NFPROTO);
	nr_cmp_u8(r, NFT_CMP_EQ, nfproto);
}

void nm_l4proto(struct nr *r, uint32_t op, uint8_t proto)
{
	nr_meta(r, NFT_META_L4PROTO);
	nr_cmp_u8(r, op, proto);
}

void nm_th_port(struct nr *r, bool dst, uint16_t port)
{
	nr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, dst ? 2 : 0, 2);
	nr_cmp_be16(r, NFT_CMP_EQ, port);
}

void nm_ct_state(struct nr *r, uint32_t bits)
{
	nr_ct(r, NFT_CT_STATE);
	nr_bitwise_u32(r, bits, 0);
	nr_cmp_u32(r, NFT_CMP_NEQ, 0);
}

void nm_ct_reply(struct nr *r)
{
	nr_ct(r, NFT_CT_DIRECTION);
	nr_cmp_u8(r, NFT_CMP_EQ, 1 /* IP_CT_DIR_REPLY */);
}

/* ICMPv6 neighbour discovery of type t, only as sent on-link (RFC 4861). */
void nm_nd(struct nr *r, uint8_t type)
{
	nm_nfproto(r, NFPROTO_IPV6);
	nm_l4proto(r, NFT_CMP_EQ, IPPROTO_ICMPV6);
	nr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1);
	nr_cmp_u8(r, NFT_CMP_EQ, type);
	nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 7, 1);
	nr_cmp_u8(r, NFT_CMP_EQ, 255);
}

/* ip/ip6 saddr|daddr in (or not in) a named set; inet needs the nfproto. */
void nm_addr_set(struct nr *r, bool inet, uint8_t af, bool src, const char *set, bool inv)
{
	if (inet)
		nm_nfproto(r, af == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6);
	if (af == AF_INET)
		nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, src ? 12 : 16, 4);
	else
		nr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, src ? 8 : 24, 16);
	nr_lookup(r, set, inv);
}

void rsb_drop_rule(struct bld *b)
{
	struct nr r;

	rsb_rule_begin(b, &r);
	nr_counter(&r);
	nr_verdict(&r, NF_DROP, NULL);
	rsb_rule_end(b, &r);
}

int nft_ruleset_build(const struct nft_ruleset_params *p, struct nft_ruleset **out,
		      struct pc_err *err)
{
	struct bld b = {.p = p};

	if (!p || !p->cfg || !p->policy ||
	    (p->qpath != NFT_QUEUE_NATIVE && p->qpath != NFT_QUEUE_COMPAT))
		return pc_err_set(err, PC_EINVAL,
				  "ruleset: missing configuration, policy or queue path");
	if (!p->cfg->bridge[0])
		return pc_err_set(err, PC_EINVAL, "ruleset: no bridge configured");
	if (p->cfg->queue.count == 0 || (uint32_t)p->cfg->queue.base + p->cfg->queue.count > 65536)
		return pc_err_set(err, PC_EINVAL, "ruleset: bad queue range %u+%u",
				  p->cfg->queue.base, p->cfg->queue.count);
	b.rs = calloc(1, sizeof(*b.rs));
	if (!b.rs)
		return pc_err_set(err, PC_ENOMEM, "ruleset: out of memory");
	nft_inet_table(&b);
	nft_bridge_table(&b);
	if (b.err) {
		nft_ruleset_free(b.rs);
		return pc_err_set(err, b.err, "ruleset: building the nftables objects failed (%s)",
				  pc_strerror(b.err));
	}
	*out = b.rs;
	return 0;
}
