/* nftables expressions as libnftnl objects: a small rule assembler used by
 * the ruleset builder, and the two queue-rule encoders (native `queue`
 * expression, xtables NFQUEUE v3 target through nft_compat). */
#include "nft/nft_int.h"

#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/xt_NFQUEUE.h>
#include <linux/netfilter/x_tables.h> /* XT_ALIGN */
#include <stdio.h>		      /* libnftnl headers use FILE */
#include <stdlib.h>
#include <string.h>

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>

int nr_init(struct nr *b, uint16_t family, const char *table, const char *chain)
{
	memset(b, 0, sizeof(*b));
	b->r = nftnl_rule_alloc();
	if (!b->r)
		return PC_ENOMEM;
	nftnl_rule_set_u32(b->r, NFTNL_RULE_FAMILY, family);
	if (nftnl_rule_set_str(b->r, NFTNL_RULE_TABLE, table) < 0 ||
	    nftnl_rule_set_str(b->r, NFTNL_RULE_CHAIN, chain) < 0) {
		nftnl_rule_free(b->r);
		b->r = NULL;
		return PC_ENOMEM;
	}
	return 0;
}

static struct nftnl_expr *nr_new(struct nr *b, const char *name)
{
	struct nftnl_expr *e;

	if (b->err)
		return NULL;
	e = nftnl_expr_alloc(name);
	if (!e)
		b->err = PC_ENOMEM;
	return e;
}

static void nr_push(struct nr *b, struct nftnl_expr *e)
{
	if (e)
		nftnl_rule_add_expr(b->r, e);
}

/* An expression whose attributes are all u32 (most of this assembler's):
 * NR_U32S(b, "meta", {KEY, key}, {DREG, NFT_REG_1}). */
struct nr_attr {
	uint16_t type;
	uint32_t v;
};

static void nr_u32s(struct nr *b, const char *name, const struct nr_attr *a, size_t n)
{
	struct nftnl_expr *e = nr_new(b, name);

	if (!e)
		return;
	for (size_t i = 0; i < n; i++)
		nftnl_expr_set_u32(e, a[i].type, a[i].v);
	nr_push(b, e);
}
#define NR_U32S(b, name, ...)                                                                      \
	nr_u32s((b), (name), (const struct nr_attr[]){__VA_ARGS__},                                \
		sizeof((const struct nr_attr[]){__VA_ARGS__}) / sizeof(struct nr_attr))

void nr_meta(struct nr *b, uint32_t key)
{
	NR_U32S(b, "meta", {NFTNL_EXPR_META_KEY, key}, {NFTNL_EXPR_META_DREG, NFT_REG_1});
}

void nr_meta_set(struct nr *b, uint32_t key)
{
	NR_U32S(b, "meta", {NFTNL_EXPR_META_KEY, key}, {NFTNL_EXPR_META_SREG, NFT_REG_1});
}

void nr_cmp(struct nr *b, uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *e = nr_new(b, "cmp");

	if (!e)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	nr_push(b, e);
}

void nr_cmp_u32(struct nr *b, uint32_t op, uint32_t host_value)
{
	nr_cmp(b, op, &host_value, sizeof(host_value)); /* registers hold host order */
}

void nr_cmp_u8(struct nr *b, uint32_t op, uint8_t v)
{
	nr_cmp(b, op, &v, 1);
}

void nr_cmp_be16(struct nr *b, uint32_t op, uint16_t host_value)
{
	uint8_t v[2] = {(uint8_t)(host_value >> 8), (uint8_t)host_value};

	nr_cmp(b, op, v, 2);
}

void nr_cmp_ifname(struct nr *b, uint32_t op, const char *name)
{
	char buf[PC_IFNAMSIZ];

	/* The kernel compares the whole 16-byte, NUL-padded name. */
	memset(buf, 0, sizeof(buf));
	pc_strlcpy(buf, name, sizeof(buf));
	nr_cmp(b, op, buf, sizeof(buf));
}

void nr_payload(struct nr *b, uint32_t base, uint32_t off, uint32_t len)
{
	nr_payload_to(b, NFT_REG_1, base, off, len);
}

void nr_payload_to(struct nr *b, uint32_t dreg, uint32_t base, uint32_t off, uint32_t len)
{
	NR_U32S(b, "payload", {NFTNL_EXPR_PAYLOAD_DREG, dreg}, {NFTNL_EXPR_PAYLOAD_BASE, base},
		{NFTNL_EXPR_PAYLOAD_OFFSET, off}, {NFTNL_EXPR_PAYLOAD_LEN, len});
}

void nr_meta_to(struct nr *b, uint32_t dreg, uint32_t key)
{
	NR_U32S(b, "meta", {NFTNL_EXPR_META_KEY, key}, {NFTNL_EXPR_META_DREG, dreg});
}

void nr_bitwise(struct nr *b, uint32_t len, const void *mask, const void * xor)
{
	struct nftnl_expr *e = nr_new(b, "bitwise");

	if (!e)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_OP, NFT_BITWISE_BOOL);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, xor, len);
	nr_push(b, e);
}

void nr_bitwise_u32(struct nr *b, uint32_t mask, uint32_t xor)
{
	nr_bitwise(b, sizeof(uint32_t), &mask, &xor);
}

void nr_ct(struct nr *b, uint32_t key)
{
	NR_U32S(b, "ct", {NFTNL_EXPR_CT_KEY, key}, {NFTNL_EXPR_CT_DREG, NFT_REG_1});
}

void nr_ct_set(struct nr *b, uint32_t key)
{
	NR_U32S(b, "ct", {NFTNL_EXPR_CT_KEY, key}, {NFTNL_EXPR_CT_SREG, NFT_REG_1});
}

void nr_lookup(struct nr *b, const char *set, bool inv)
{
	nr_lookup_from(b, NFT_REG_1, set, inv);
}

void nr_lookup_from(struct nr *b, uint32_t sreg, const char *set, bool inv)
{
	struct nftnl_expr *e = nr_new(b, "lookup");

	if (!e)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
	if (nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set) < 0)
		b->err = PC_ENOMEM;
	/* Always sent, 0 included: a kernel dump always has it, and the
	 * canonical texts must match byte for byte. */
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, inv ? NFT_LOOKUP_F_INV : 0);
	nr_push(b, e);
}

void nr_verdict(struct nr *b, int verdict, const char *chain)
{
	struct nftnl_expr *e = nr_new(b, "immediate");

	if (!e)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
	if (chain && nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain) < 0)
		b->err = PC_ENOMEM;
	nr_push(b, e);
}

void nr_imm_be16(struct nr *b, uint32_t reg, uint16_t host_value)
{
	struct nftnl_expr *e = nr_new(b, "immediate");
	uint8_t v[2] = {(uint8_t)(host_value >> 8), (uint8_t)host_value};

	if (!e)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, reg);
	nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, v, sizeof(v));
	nr_push(b, e);
}

void nr_reject(struct nr *b, uint32_t type, uint8_t code)
{
	struct nftnl_expr *e = nr_new(b, "reject");

	if (!e)
		return;
	nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, type);
	nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, code);
	nr_push(b, e);
}

void nr_fib_daddr_type(struct nr *b)
{
	NR_U32S(b, "fib", {NFTNL_EXPR_FIB_DREG, NFT_REG_1},
		{NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE},
		{NFTNL_EXPR_FIB_FLAGS, NFTA_FIB_F_DADDR});
}

void nr_counter(struct nr *b)
{
	nr_push(b, nr_new(b, "counter"));
}

void nr_limit_meter(struct nr *b, const char *set, uint32_t timeout_ms, uint64_t rate,
		    uint32_t burst)
{
	struct nftnl_expr *e = nr_new(b, "dynset"), *l;

	if (!e)
		return;
	l = nr_new(b, "limit");
	if (!l) {
		nftnl_expr_free(e);
		return;
	}
	/* limit rate over <rate>/second burst <burst> packets: the rule goes
	 * on only when this element's bucket is empty. Every attribute is
	 * set (0 included) as the kernel dumps them, so texts compare. */
	nftnl_expr_set_u64(l, NFTNL_EXPR_LIMIT_RATE, rate);
	nftnl_expr_set_u64(l, NFTNL_EXPR_LIMIT_UNIT, 1);
	nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_BURST, burst);
	nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
	nftnl_expr_set_u32(l, NFTNL_EXPR_LIMIT_FLAGS, NFT_LIMIT_F_INV);
	nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_OP, NFT_DYNSET_OP_UPDATE);
	nftnl_expr_set_u64(e, NFTNL_EXPR_DYNSET_TIMEOUT, timeout_ms);
	if (nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME, set) < 0) {
		nftnl_expr_free(l);
		nftnl_expr_free(e);
		b->err = PC_ENOMEM;
		return;
	}
	nftnl_expr_set(e, NFTNL_EXPR_DYNSET_EXPR, l, 0); /* takes ownership */
	nr_push(b, e);
}

void nr_notrack(struct nr *b)
{
	nr_push(b, nr_new(b, "notrack"));
}

void nr_expr(struct nr *b, struct nftnl_expr *e)
{
	if (!e) {
		b->err = PC_ENOMEM;
		return;
	}
	if (b->err) {
		nftnl_expr_free(e);
		return;
	}
	nr_push(b, e);
}

struct nftnl_rule *nr_finish(struct nr *b, int *err)
{
	struct nftnl_rule *r = b->r;

	b->r = NULL;
	if (b->err) {
		nftnl_rule_free(r);
		*err = b->err;
		return NULL;
	}
	return r;
}

/* ---- the queue-rule encoders ------------------------------------------- */

struct nftnl_expr *nft_expr_queue_native(uint16_t num, uint16_t total)
{
	struct nftnl_expr *e = nftnl_expr_alloc("queue");

	if (!e)
		return NULL;
	nftnl_expr_set_u16(e, NFTNL_EXPR_QUEUE_NUM, num);
	nftnl_expr_set_u16(e, NFTNL_EXPR_QUEUE_TOTAL, total ? total : 1);
	/* No NFT_QUEUE_FLAG_BYPASS: with no listener the packet drops.
	 * No NFT_QUEUE_FLAG_CPU_FANOUT: flow hashing keeps a flow on one
	 * queue thread. The flags attribute is sent (0) so that a dump
	 * shows the decision explicitly. */
	nftnl_expr_set_u16(e, NFTNL_EXPR_QUEUE_FLAGS, 0);
	return e;
}

struct nftnl_expr *nft_expr_queue_compat(uint16_t num, uint16_t total)
{
	struct nftnl_expr *e = nftnl_expr_alloc("target");
	/* nft_compat wants the info padded to XT_ALIGN, as iptables-nft sends it. */
	size_t sz = XT_ALIGN(sizeof(struct xt_NFQ_info_v3));
	struct xt_NFQ_info_v3 *info;

	if (!e)
		return NULL;
	info = calloc(1, sz);
	if (!info) {
		nftnl_expr_free(e);
		return NULL;
	}
	info->queuenum = num;
	info->queues_total = total ? total : 1;
	info->flags = 0; /* never NFQ_FLAG_BYPASS; no NFQ_FLAG_CPU_FANOUT (see above) */
	if (nftnl_expr_set_str(e, NFTNL_EXPR_TG_NAME, "NFQUEUE") < 0) {
		free(info);
		nftnl_expr_free(e);
		return NULL;
	}
	nftnl_expr_set_u32(e, NFTNL_EXPR_TG_REV, 3);
	/* libnftnl takes ownership of info (freed with the expression). */
	nftnl_expr_set(e, NFTNL_EXPR_TG_INFO, info, (uint32_t)sz);
	return e;
}

const char *nft_queue_path_name(enum nft_queue_path p)
{
	return p == NFT_QUEUE_NATIVE ? "native" : p == NFT_QUEUE_COMPAT ? "compat" : "none";
}
