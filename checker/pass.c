/* checker: the pass-restricted obligation — a packet the engine released
 * (verdict mark PASS) from the sandbox bridge, on a flow the engine neither
 * allowed nor holds, is accepted by our forward and input chains only
 * toward a configured resolver's port 53 (udp or tcp). Our chains are
 * walked for that class of packets with the conditions that bound it
 * tracked: what the class fixes (input interface, family, our mark bits,
 * the flow's ct mark bits) is decided, a rule is outside the class when it
 * needs the destination in a set of resolvers (or equal to one), the
 * protocol udp or tcp and the destination port 53, and everything else may
 * or may not match. docs/checker.md, "pass-restricted". */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>

#include "checker/checker_int.h"

enum { M_NO = 0, M_MAYBE = 1, M_YES = 2 };

/* what a register holds, as far as this class of packets goes */
enum { P_UNK = 0, P_CONST, P_MARK, P_CTMARK, P_DADDR, P_L4PROTO, P_DPORT, P_THBYTE0, P_HOPLIMIT };

struct pval {
	int kind;
	uint32_t len;
	uint8_t d[16];	     /* P_CONST */
	uint32_t mask, xor_; /* P_MARK, P_CTMARK: (mark & mask) ^ xor_ */
};

#define PSLOT 16

struct pwalk {
	const struct ck_state *st;
	const struct checker_expect *ex;
	struct checker_result *res;
	const struct ck_link *br;
	int l3;		/* NFPROTO_IPV4 or NFPROTO_IPV6 */
	uint32_t hook;	/* NF_INET_FORWARD or NF_INET_LOCAL_IN */
	bool bad;	/* an accept (or a doubt) was reported */
	char stop[700]; /* the rule that drops every packet of the class */
};

/* one rule, for the class */
struct prule {
	struct pval slot[PSLOT];
	int match;
	bool to_resolver, dns_proto, port53; /* together: outside the class */
	bool icmp6, nd, hop255;		     /* on-link neighbour discovery */
};

static int slot_of(uint32_t reg)
{
	if (reg >= NFT_REG_1 && reg <= NFT_REG_4)
		return (int)(reg - NFT_REG_1) * 4;
	if (reg >= NFT_REG32_00 && reg <= NFT_REG32_15)
		return (int)(reg - NFT_REG32_00);
	return -1;
}

static struct pval reg_get(const struct prule *r, uint32_t reg)
{
	struct pval unk = {0};
	int s = slot_of(reg);

	return s < 0 ? unk : r->slot[s];
}

static void reg_set(struct prule *r, uint32_t reg, const struct pval *v)
{
	int s = slot_of(reg);
	uint32_t words = v->len ? (v->len + 3) / 4 : 1;

	if (s < 0)
		return;
	for (uint32_t i = 0; i < words && s + (int)i < PSLOT; i++)
		memset(&r->slot[s + (int)i], 0, sizeof(r->slot[0]));
	r->slot[s] = *v;
}

static void maybe(struct prule *r)
{
	if (r->match == M_YES)
		r->match = M_MAYBE;
}

static bool is_resolver(const struct checker_expect *ex, int l3, const uint8_t *a)
{
	int af = l3 == NFPROTO_IPV6 ? AF_INET6 : AF_INET;

	for (size_t i = 0; i < ex->n_resolvers; i++)
		if (ex->resolvers[i].family == af &&
		    memcmp(ex->resolvers[i].a, a, af == AF_INET ? 4 : 16) == 0)
			return true;
	return false;
}

/* Values the class fixes: the input interface (the bridge) and family. */
static bool meta_const(const struct pwalk *w, uint32_t key, struct pval *v)
{
	memset(v, 0, sizeof(*v));
	v->kind = P_CONST;
	switch (key) {
	case NFT_META_IIFNAME:
		memcpy(v->d, w->br->name, strnlen(w->br->name, 16));
		v->len = 16;
		return true;
	case NFT_META_IIF:
		memcpy(v->d, &w->br->ifindex, 4);
		v->len = 4;
		return true;
	case NFT_META_IIFKIND:
		memcpy(v->d, w->br->kind, strnlen(w->br->kind, 16));
		v->len = 16;
		return true;
	case NFT_META_NFPROTO:
		v->d[0] = (uint8_t)w->l3;
		v->len = 1;
		return true;
	case NFT_META_PROTOCOL: {
		uint16_t p = htons(w->l3 == NFPROTO_IPV6 ? 0x86dd : 0x0800);

		memcpy(v->d, &p, 2);
		v->len = 2;
		return true;
	}
	default:
		return false;
	}
}

/* A mark test: which bits of (mark & mask) ^ xor_ the class fixes, and
 * their value. The packet mark's bits in mark_mask are the PASS verdict;
 * the ct mark's ct_exempt bits are clear (the flow neither allowed nor
 * held); every other bit is unknown. */
static int mark_cmp(const struct pwalk *w, const struct pval *v, uint32_t op, uint32_t data)
{
	uint32_t kb = v->kind == P_MARK ? w->ex->mark_mask : w->ex->ct_exempt;
	uint32_t kv = v->kind == P_MARK ? w->ex->mark_pass : 0;
	uint32_t known = ~v->mask | (v->mask & kb);
	uint32_t val = ((kv & v->mask) ^ v->xor_) & known;
	bool differ = (data & known) != val;

	if (op == NFT_CMP_EQ)
		return differ ? M_NO : known == 0xffffffffu ? M_YES : M_MAYBE;
	if (op == NFT_CMP_NEQ)
		return differ ? M_YES : known == 0xffffffffu ? M_NO : M_MAYBE;
	return M_MAYBE;
}

static void narrow(struct prule *r, int m)
{
	if (m == M_NO)
		r->match = M_NO;
	else if (m == M_MAYBE)
		maybe(r);
}

static void eval_cmp(const struct pwalk *w, struct prule *r, struct nftnl_expr *x)
{
	struct pval v = reg_get(r, nftnl_expr_get_u32(x, NFTNL_EXPR_CMP_SREG));
	uint32_t op = nftnl_expr_get_u32(x, NFTNL_EXPR_CMP_OP), dlen = 0;
	const uint8_t *data = nftnl_expr_get(x, NFTNL_EXPR_CMP_DATA, &dlen);

	if (!data) {
		maybe(r);
		return;
	}
	switch (v.kind) {
	case P_MARK:
	case P_CTMARK:
		if (dlen == 4) {
			uint32_t d;

			memcpy(&d, data, 4);
			narrow(r, mark_cmp(w, &v, op, d));
			return;
		}
		break;
	case P_CONST:
		if ((op == NFT_CMP_EQ || op == NFT_CMP_NEQ) && dlen <= 16 && dlen <= v.len) {
			bool eq = memcmp(v.d, data, dlen) == 0;

			if ((op == NFT_CMP_EQ) != eq)
				r->match = M_NO;
			return;
		}
		break;
	case P_DADDR:
		if (op == NFT_CMP_EQ && dlen == v.len && is_resolver(w->ex, w->l3, data))
			r->to_resolver = true;
		break;
	case P_L4PROTO:
		if (op == NFT_CMP_EQ && dlen == 1) {
			r->dns_proto |= data[0] == 6 || data[0] == 17;
			r->icmp6 |= data[0] == 58;
		}
		break;
	case P_DPORT:
		if (op == NFT_CMP_EQ && dlen == 2 && data[0] == 0 && data[1] == 53)
			r->port53 = true;
		break;
	case P_THBYTE0:
		if (op == NFT_CMP_EQ && dlen == 1 && data[0] >= 133 && data[0] <= 137)
			r->nd = true;
		break;
	case P_HOPLIMIT:
		if (op == NFT_CMP_EQ && dlen == 1 && data[0] == 255)
			r->hop255 = true;
		break;
	default:
		break;
	}
	maybe(r);
}

/* A set every element of which is a resolver of this family (an empty one
 * included): only then does "daddr @set" keep a rule out of the class. */
static bool set_of_resolvers(const struct pwalk *w, const struct ck_set *s, uint32_t alen)
{
	/* only a constant set bounds the class: one with timeouts or that a
	 * rule writes holds other addresses tomorrow */
	if (!s || !s->elems_read || s->elems_trunc || s->written ||
	    (s->flags & (NFT_SET_INTERVAL | NFT_SET_MAP | NFT_SET_TIMEOUT | NFT_SET_EVAL)) ||
	    s->key_len != alen)
		return false;
	for (size_t i = 0; i < s->n_elems; i++)
		if (s->elems[i].klen != alen || !is_resolver(w->ex, w->l3, s->elems[i].key))
			return false;
	return true;
}

static void doubt(struct pwalk *w, const struct ck_chain *c, const struct ck_rule *rl,
		  const char *what)
{
	char loc[600];

	ck_rule_where(c, rl, loc, sizeof(loc));
	ck_find(w->res, CK_OB_PASS, CHECKER_DOUBT, "%s: %s (packets the engine released)", loc,
		what);
	w->bad = true;
}

enum { V_NONE = 0, V_ACCEPT, V_DROP, V_JUMP, V_GOTO, V_RETURN, V_OTHER };

/* Evaluate a rule's conditions for the class; *verdict and *target: what it
 * does when it matches. */
static void rule_conds(struct pwalk *w, const struct ck_chain *c, const struct ck_rule *rl,
		       struct prule *r, int *verdict, const char **target)
{
	struct nftnl_expr_iter *it = nftnl_expr_iter_create(rl->r);
	struct nftnl_expr *x;

	memset(r, 0, sizeof(*r));
	r->match = M_YES;
	*verdict = V_NONE;
	*target = NULL;
	if (!it) {
		doubt(w, c, rl, "out of memory while reading the rule");
		*verdict = V_OTHER;
		return;
	}
	for (x = nftnl_expr_iter_next(it); x && r->match != M_NO && *verdict == V_NONE;
	     x = nftnl_expr_iter_next(it)) {
		const char *n = nftnl_expr_get_str(x, NFTNL_EXPR_NAME);
		struct pval v = {0};

		if (!n) {
			*verdict = V_OTHER;
		} else if (strcmp(n, "cmp") == 0) {
			eval_cmp(w, r, x);
		} else if (strcmp(n, "meta") == 0 && nftnl_expr_is_set(x, NFTNL_EXPR_META_DREG)) {
			uint32_t key = nftnl_expr_get_u32(x, NFTNL_EXPR_META_KEY);

			if (!meta_const(w, key, &v)) {
				memset(&v, 0, sizeof(v));
				v.len = 16;
				if (key == NFT_META_MARK) {
					v.kind = P_MARK;
					v.len = 4;
					v.mask = 0xffffffffu;
				} else if (key == NFT_META_L4PROTO) {
					v.kind = P_L4PROTO;
					v.len = 1;
				}
				maybe(r);
			}
			reg_set(r, nftnl_expr_get_u32(x, NFTNL_EXPR_META_DREG), &v);
		} else if (strcmp(n, "ct") == 0 && nftnl_expr_is_set(x, NFTNL_EXPR_CT_DREG)) {
			v.len = 16;
			if (nftnl_expr_get_u32(x, NFTNL_EXPR_CT_KEY) == NFT_CT_MARK) {
				v.kind = P_CTMARK;
				v.len = 4;
				v.mask = 0xffffffffu;
			}
			maybe(r);
			reg_set(r, nftnl_expr_get_u32(x, NFTNL_EXPR_CT_DREG), &v);
		} else if (strcmp(n, "payload") == 0 &&
			   !nftnl_expr_is_set(x, NFTNL_EXPR_PAYLOAD_SREG)) {
			uint32_t base = nftnl_expr_get_u32(x, NFTNL_EXPR_PAYLOAD_BASE);
			uint32_t off = nftnl_expr_get_u32(x, NFTNL_EXPR_PAYLOAD_OFFSET);
			uint32_t len = nftnl_expr_get_u32(x, NFTNL_EXPR_PAYLOAD_LEN);
			bool v6 = w->l3 == NFPROTO_IPV6;

			v.len = len;
			if (base == NFT_PAYLOAD_NETWORK_HEADER && off == (v6 ? 24u : 16u) &&
			    len == (v6 ? 16u : 4u))
				v.kind = P_DADDR;
			else if (base == NFT_PAYLOAD_NETWORK_HEADER && v6 && off == 7 && len == 1)
				v.kind = P_HOPLIMIT;
			else if (base == NFT_PAYLOAD_TRANSPORT_HEADER && off == 2 && len == 2)
				v.kind = P_DPORT;
			else if (base == NFT_PAYLOAD_TRANSPORT_HEADER && off == 0 && len == 1)
				v.kind = P_THBYTE0;
			maybe(r);
			reg_set(r, nftnl_expr_get_u32(x, NFTNL_EXPR_PAYLOAD_DREG), &v);
		} else if (strcmp(n, "bitwise") == 0) {
			struct pval s = reg_get(r, nftnl_expr_get_u32(x, NFTNL_EXPR_BITWISE_SREG));
			uint32_t mlen = 0, xlen = 0;
			const uint8_t *mask = nftnl_expr_get(x, NFTNL_EXPR_BITWISE_MASK, &mlen);
			const uint8_t *xr = nftnl_expr_get(x, NFTNL_EXPR_BITWISE_XOR, &xlen);

			v.len = nftnl_expr_get_u32(x, NFTNL_EXPR_BITWISE_LEN);
			if ((s.kind == P_MARK || s.kind == P_CTMARK) && mask && xr && mlen == 4 &&
			    xlen == 4 && v.len == 4 &&
			    nftnl_expr_get_u32(x, NFTNL_EXPR_BITWISE_OP) == NFT_BITWISE_BOOL) {
				uint32_t m, xo;

				memcpy(&m, mask, 4);
				memcpy(&xo, xr, 4);
				v = s;
				v.xor_ = (v.xor_ & m) ^ xo;
				v.mask &= m;
			}
			reg_set(r, nftnl_expr_get_u32(x, NFTNL_EXPR_BITWISE_DREG), &v);
		} else if (strcmp(n, "immediate") == 0) {
			uint32_t dreg = nftnl_expr_get_u32(x, NFTNL_EXPR_IMM_DREG);

			if (dreg == NFT_REG_VERDICT) {
				int32_t code =
				    (int32_t)nftnl_expr_get_u32(x, NFTNL_EXPR_IMM_VERDICT);

				*target = nftnl_expr_get_str(x, NFTNL_EXPR_IMM_CHAIN);
				*verdict = code == NF_ACCEPT	  ? V_ACCEPT
					   : code == NF_DROP	  ? V_DROP
					   : code == NFT_JUMP	  ? V_JUMP
					   : code == NFT_GOTO	  ? V_GOTO
					   : code == NFT_RETURN	  ? V_RETURN
					   : code == NFT_BREAK	  ? V_NONE
					   : code == NFT_CONTINUE ? V_NONE
								  : V_OTHER;
				if (code == NFT_BREAK)
					r->match = M_NO;
			} else {
				uint32_t len = 0;
				const void *d = nftnl_expr_get(x, NFTNL_EXPR_IMM_DATA, &len);

				if (d && len <= 16) {
					v.kind = P_CONST;
					memcpy(v.d, d, len);
					v.len = len;
				}
				reg_set(r, dreg, &v);
			}
		} else if (strcmp(n, "lookup") == 0) {
			struct pval s = reg_get(r, nftnl_expr_get_u32(x, NFTNL_EXPR_LOOKUP_SREG));
			const char *sn = nftnl_expr_get_str(x, NFTNL_EXPR_LOOKUP_SET);
			const struct ck_set *set =
			    sn ? ck_set_find(&w->st->nft, c->family, c->table, sn) : NULL;
			bool inv =
			    nftnl_expr_get_u32(x, NFTNL_EXPR_LOOKUP_FLAGS) & NFT_LOOKUP_F_INV;

			if (nftnl_expr_is_set(x, NFTNL_EXPR_LOOKUP_DREG)) {
				if (nftnl_expr_get_u32(x, NFTNL_EXPR_LOOKUP_DREG) ==
				    NFT_REG_VERDICT) {
					*verdict = V_OTHER; /* a verdict map */
				} else {
					struct pval unk = {.len = 16};

					reg_set(r, nftnl_expr_get_u32(x, NFTNL_EXPR_LOOKUP_DREG),
						&unk);
				}
			} else if (!inv && s.kind == P_DADDR && set_of_resolvers(w, set, s.len)) {
				if (set->n_elems == 0)
					r->match = M_NO;
				r->to_resolver = true;
			}
			maybe(r);
		} else if (strcmp(n, "reject") == 0) {
			*verdict = V_DROP;
		} else if (strcmp(n, "queue") == 0) {
			*verdict = V_OTHER;
		} else {
			const struct ck_vocab *vo = ck_vocab_find(CK_V_EXPR, n);
			const char *mn = strcmp(n, "match") == 0
					     ? nftnl_expr_get_str(x, NFTNL_EXPR_MT_NAME)
					     : NULL;
			uint32_t reg, len;

			if (mn && ck_vocab_find(CK_V_MATCH, mn)) {
				maybe(r); /* an xt match: a condition */
			} else if (!vo || vo->model != CK_VM_PURE) {
				/* a write (meta/ct/payload set), nat, dup, fwd, an xt
				 * target …: what it does to these packets is not
				 * modelled here */
				*verdict = V_OTHER;
			} else {
				struct pval unk = {0};

				if (vo->cond)
					maybe(r);
				/* a load into a register we do not track: that register
				 * only (the vocabulary's, as the path walk clears it) */
				if (ck_vocab_dreg(vo, x, &reg, &len)) {
					unk.len = len;
					reg_set(r, reg, &unk);
				}
			}
		}
	}
	nftnl_expr_iter_destroy(it);
	if (r->to_resolver && r->dns_proto && r->port53)
		r->match = M_NO; /* only DNS to a resolver: outside the class */
	if (w->hook == NF_INET_LOCAL_IN && w->l3 == NFPROTO_IPV6 && r->icmp6 && r->nd && r->hop255)
		r->match = M_NO; /* on-link neighbour discovery with the gateway itself */
}

/* Walk chain c for the class. Returns true when some packets of it may go
 * on past c (off its end, or by return); false when every one of them was
 * dropped in it. */
static bool walk(struct pwalk *w, const struct ck_chain *c, int depth)
{
	bool back = false;

	if (depth > 16) {
		doubt(w, c, NULL, "jumps nested deeper than 16");
		return true;
	}
	for (size_t i = 0; i < c->n_rules; i++) {
		const struct ck_rule *rl = &c->rules[i];
		struct prule r;
		const char *target;
		int verdict;
		char loc[600];

		rule_conds(w, c, rl, &r, &verdict, &target);
		if (r.match == M_NO)
			continue;
		switch (verdict) {
		case V_NONE:
			break;
		case V_ACCEPT:
			ck_rule_where(c, rl, loc, sizeof(loc));
			ck_find(w->res, CK_OB_PASS, CHECKER_EXIT,
				"%s: accepts %s packets the engine released (mark PASS) from %s "
				"toward an address other than a resolver's port 53 (on a flow the "
				"engine neither allowed nor holds)",
				loc, w->l3 == NFPROTO_IPV6 ? "IPv6" : "IPv4", w->br->name);
			w->bad = true;
			if (r.match == M_YES)
				return back;
			break;
		case V_DROP:
			if (r.match == M_YES) {
				if (!w->stop[0])
					ck_rule_where(c, rl, w->stop, sizeof(w->stop));
				return back;
			}
			break;
		case V_JUMP:
		case V_GOTO: {
			const struct ck_chain *t =
			    target ? ck_chain_find(&w->st->nft, c->family, c->table, target) : NULL;
			char saved[sizeof(w->stop)];
			bool on;

			if (!t) {
				doubt(w, c, rl, "jump to a chain the dump did not contain");
				return true;
			}
			pc_strlcpy(saved, w->stop, sizeof(saved));
			on = walk(w, t, depth + 1);
			if (verdict == V_GOTO)
				back = back || on; /* its end is this chain's end */
			if (r.match == M_YES && (verdict == V_GOTO || !on))
				return back;
			/* not every packet went there: a drop in it is not the one */
			pc_strlcpy(w->stop, saved, sizeof(w->stop));
			break;
		}
		case V_RETURN:
			back = true;
			if (r.match == M_YES)
				return true;
			break;
		default:
			doubt(w, c, rl, "a verdict, map, queue or write not modelled");
			return true;
		}
	}
	return true;
}

void ck_pass_check(const struct ck_state *st, const struct checker_expect *ex, const char *br,
		   struct checker_result *res)
{
	static const uint32_t hooks[] = {NF_INET_FORWARD, NF_INET_LOCAL_IN};
	struct pwalk w;

	memset(&w, 0, sizeof(w));
	w.st = st;
	w.ex = ex;
	w.res = res;
	w.br = ck_link_by_name(st, br);
	if (!w.br)
		return; /* reported by the membership obligation */
	if (!ex->mark_pass) {
		ck_find(res, CK_OB_PASS, CHECKER_DOUBT,
			"the engine's PASS mark is not known: where released packets may go was "
			"not checked");
		return;
	}
	for (size_t h = 0; h < sizeof(hooks) / sizeof(hooks[0]); h++) {
		for (int l3 = 0; l3 < 2; l3++) {
			const char *hn = hooks[h] == NF_INET_FORWARD ? "forward" : "input";
			const struct ck_chain *base = NULL;
			size_t nbase = 0;

			w.hook = hooks[h];
			w.l3 = l3 ? NFPROTO_IPV6 : NFPROTO_IPV4;
			w.bad = false;
			w.stop[0] = 0;
			for (size_t i = 0; i < st->nft.n_chains; i++) {
				const struct ck_chain *c = &st->nft.chains[i];

				if (c->base && c->family == NFPROTO_INET && c->hook == w.hook &&
				    strcmp(c->table, ex->table) == 0) {
					base = c;
					nbase++;
				}
			}
			if (nbase != 1) {
				ck_find(res, CK_OB_PASS, nbase ? CHECKER_DOUBT : CHECKER_EXIT,
					"table inet %s has %zu base chains at the %s hook (one "
					"expected): where released packets may go is not bounded",
					ex->table, nbase, hn);
				continue;
			}
			if (walk(&w, base, 0) && base->policy != NF_DROP) {
				char loc[600];

				ck_rule_where(base, NULL, loc, sizeof(loc));
				ck_find(res, CK_OB_PASS, CHECKER_EXIT,
					"%s: policy accept takes %s packets the engine released "
					"(mark PASS) from %s toward any address",
					loc, l3 ? "IPv6" : "IPv4", br);
				w.bad = true;
			}
			if (!w.bad)
				ck_evid(
				    res, CK_OB_PASS,
				    "%s, %s hook: a packet the engine released (mark PASS) "
				    "from %s on a flow it neither allowed nor holds is accepted "
				    "only toward a resolver's port 53 (udp/tcp)%s; the rest is "
				    "dropped by %s",
				    l3 ? "IPv6" : "IPv4", hn, br,
				    hooks[h] == NF_INET_LOCAL_IN && l3
					? " or as on-link neighbour discovery"
					: "",
				    w.stop[0] ? w.stop : "the chain's policy");
		}
	}
}
