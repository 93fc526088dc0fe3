/* Rules and links written by hand for the checker's unit tests
 * (check_checker, check_checker_pass): the libnftnl expressions the
 * engine's own ruleset uses, register 1 throughout, and the bridge with one
 * sandbox port that every checked state starts from. */
#ifndef PC_TEST_NFTEXPR_H
#define PC_TEST_NFTEXPR_H

#include "checker/checker_int.h"

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <linux/netfilter/nf_tables.h>
#include <stdbool.h>
#include <string.h>

/* meta or ct (kind) key into register 1 */
static inline void nx_load(struct nftnl_rule *r, const char *kind, uint32_t key)
{
	struct nftnl_expr *e = nftnl_expr_alloc(kind);

	if (strcmp(kind, "meta") == 0) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
	} else {
		nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, key);
		nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	}
	nftnl_rule_add_expr(r, e);
}

/* register 1 = the len bytes at d */
static inline void nx_imm(struct nftnl_rule *r, const void *d, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");

	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
	nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, d, len);
	nftnl_rule_add_expr(r, e);
}

static inline void nx_cmp(struct nftnl_rule *r, uint32_t op, const void *d, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("cmp");

	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, d, len);
	nftnl_rule_add_expr(r, e);
}

/* register 1 = register 1 & mask (4 bytes) */
static inline void nx_and(struct nftnl_rule *r, uint32_t mask)
{
	struct nftnl_expr *e = nftnl_expr_alloc("bitwise");
	uint32_t z = 0;

	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &mask, 4);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &z, 4);
	nftnl_rule_add_expr(r, e);
}

/* "(ct|meta) mark and mask == value" */
static inline void nx_mark(struct nftnl_rule *r, bool ct, uint32_t mask, uint32_t value)
{
	nx_load(r, ct ? "ct" : "meta", ct ? NFT_CT_MARK : NFT_META_MARK);
	nx_and(r, mask);
	nx_cmp(r, NFT_CMP_EQ, &value, 4);
}

static inline void nx_verdict(struct nftnl_rule *r, int v)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");

	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)v);
	nftnl_rule_add_expr(r, e);
}

/* The bridge pcbr0 (ifindex 3) and its port pcv1 (4) in st; returns the
 * port, for the caller to say more of it. */
static inline struct ck_link *nx_bridge_links(struct ck_state *st)
{
	struct ck_link *br, *p;

	br = ck_grow(&st->links, &st->n_links, &st->cap_links, sizeof(*br));
	br->ifindex = 3;
	strcpy(br->name, "pcbr0");
	strcpy(br->kind, "bridge");
	p = ck_grow(&st->links, &st->n_links, &st->cap_links, sizeof(*p));
	p->ifindex = 4;
	p->master = 3;
	strcpy(p->name, "pcv1");
	strcpy(p->kind, "veth");
	return p;
}

#endif
