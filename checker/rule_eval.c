/* checker: abstract interpretation of one nftables rule for a packet from a
 * sandbox port. Conditions it can decide from the path context (input
 * interface, family) are decided; every other condition may or may not
 * match (over-approximation). Effects are classified: harmless, a way out,
 * or not modelled. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/xt_HMARK.h>
#include <linux/netfilter/xt_NFQUEUE.h>
#include <linux/netfilter/xt_TPROXY.h>
#include <linux/netfilter/xt_connmark.h>
#include <linux/netfilter/xt_mark.h>
#include <linux/netfilter/xt_set.h>
#include <linux/netfilter_bridge/ebt_mark_t.h>

#include "checker/checker_int.h"

/* V_BITS: a value of which only the bits in mask may be set (an xt target's
 * mark, bounded by the model: HMARK's range, a shifted CONNMARK copy). */
enum { V_UNK = 0, V_CONST, V_META, V_CT, V_PAYLOAD, V_BITS };

struct aval {
	int kind;
	uint32_t key;  /* meta/ct key; payload base */
	uint32_t off;  /* payload offset */
	uint32_t len;  /* bytes */
	uint8_t d[16]; /* constant */
	bool bitwise;  /* (x & mask) ^ xor applied to a mark */
	uint32_t mask, xor_;
};

#define NSLOT 16

struct reval {
	struct ck_walk *w;
	const struct ck_chain *chain;
	const struct ck_rule *rule;
	struct aval slot[NSLOT];
	int match;	 /* CK_NO / CK_MAYBE / CK_YES */
	bool guard;	 /* a condition tested our "decided" mark bit as set */
	bool nd, hop255; /* ICMPv6 ND type, hop limit 255 (on-link only) */
	int state;	 /* state after effects so far */
	bool done;	 /* a terminal verdict was produced */
	int writing;	 /* V_META or V_CT: which mark mark_write is writing */
	struct ck_rule_out *out;
};

static int reg_slot(uint32_t reg)
{
	if (reg >= NFT_REG_1 && reg <= NFT_REG_4)
		return (int)(reg - NFT_REG_1) * 4;
	if (reg >= NFT_REG32_00 && reg <= NFT_REG32_15)
		return (int)(reg - NFT_REG32_00);
	return -1;
}

static struct aval *reg_get(struct reval *e, uint32_t reg)
{
	static struct aval unk;
	int s = reg_slot(reg);

	memset(&unk, 0, sizeof(unk));
	return s < 0 ? &unk : &e->slot[s];
}

static void reg_set(struct reval *e, uint32_t reg, const struct aval *v)
{
	int s = reg_slot(reg);
	uint32_t words;

	if (s < 0)
		return;
	words = v->len ? (v->len + 3) / 4 : 1;
	for (uint32_t i = 0; i < words && s + (int)i < NSLOT; i++)
		memset(&e->slot[s + (int)i], 0, sizeof(e->slot[0]));
	e->slot[s] = *v;
}

void ck_rule_where(const struct ck_chain *c, const struct ck_rule *r, char *buf, size_t len)
{
	if (r)
		snprintf(buf, len, "table %s %s chain %s rule handle %llu",
			 ck_family_name(c->family), c->table, c->name,
			 (unsigned long long)r->handle);
	else
		snprintf(buf, len, "table %s %s chain %s", ck_family_name(c->family), c->table,
			 c->name);
}

static void where(struct reval *e, char *buf, size_t len)
{
	ck_rule_where(e->chain, e->rule, buf, len);
}

/* Concrete value of a meta key at this point of the path, or false. */
static bool meta_value(const struct ck_walk *w, uint32_t key, uint8_t d[16], uint32_t *len)
{
	const struct ck_link *iif = w->ctx.iif;

	memset(d, 0, 16);
	switch (key) {
	case NFT_META_IIFNAME:
		if (!iif)
			return false;
		memcpy(d, iif->name, strnlen(iif->name, 16));
		*len = 16;
		return true;
	case NFT_META_IIF:
		if (!iif)
			return false;
		memcpy(d, &iif->ifindex, 4);
		*len = 4;
		return true;
	case NFT_META_IIFKIND:
		if (!iif)
			return false;
		memcpy(d, iif->kind, strnlen(iif->kind, 16));
		*len = 16;
		return true;
	case NFT_META_BRI_IIFNAME:
		if (w->ctx.fam != NFPROTO_BRIDGE || !w->ctx.br)
			return false;
		memcpy(d, w->ctx.br->name, strnlen(w->ctx.br->name, 16));
		*len = 16;
		return true;
	case NFT_META_NFPROTO:
		d[0] = (uint8_t)(w->ctx.fam == NFPROTO_INET ? (uint32_t)w->ctx.l3 : w->ctx.fam);
		*len = 1;
		return true;
	case NFT_META_PROTOCOL: {
		uint16_t p = htons(w->ctx.l3 == NFPROTO_IPV6 ? 0x86dd : 0x0800);

		memcpy(d, &p, 2);
		*len = 2;
		return true;
	}
	default:
		return false;
	}
}

static bool is_mark(const struct aval *v)
{
	return (v->kind == V_META && v->key == NFT_META_MARK) ||
	       (v->kind == V_CT && v->key == NFT_CT_MARK);
}

static int st_now(const struct reval *e);

static void set_nomatch(struct reval *e)
{
	e->match = CK_NO;
}

static void maybe(struct reval *e)
{
	if (e->match == CK_YES)
		e->match = CK_MAYBE;
}

static void eval_cmp(struct reval *e, struct nftnl_expr *x)
{
	const struct aval *v = reg_get(e, nftnl_expr_get_u32(x, NFTNL_EXPR_CMP_SREG));
	uint32_t op = nftnl_expr_get_u32(x, NFTNL_EXPR_CMP_OP), dlen = 0;
	const uint8_t *data = nftnl_expr_get(x, NFTNL_EXPR_CMP_DATA, &dlen);
	const struct checker_expect *ex = e->w->ex;
	int eq;

	if (!data)
		return;
	if (is_mark(v) && dlen == 4 && ex->mark_decided) {
		uint32_t val, m = v->bitwise ? v->mask : 0xffffffffu;
		uint32_t d = ex->mark_decided;

		memcpy(&val, data, 4);
		if (v->bitwise)
			val ^= v->xor_ & m;
		/* "mark & M == V" with a decision bit in V (and M), or "mark & D
		 * != 0" with M only decision bits: the engine decided this flow. */
		if ((op == NFT_CMP_EQ && (val & m & d) != 0) ||
		    (op == NFT_CMP_NEQ && (m & d) != 0 && (m & ~d) == 0 && val == 0))
			e->guard = true;
		maybe(e);
		return;
	}
	if (v->kind == V_PAYLOAD && op == NFT_CMP_EQ && dlen == 1 && v->len == 1) {
		if (v->key == NFT_PAYLOAD_TRANSPORT_HEADER && v->off == 0 && data[0] >= 133 &&
		    data[0] <= 137)
			e->nd = true;
		if (v->key == NFT_PAYLOAD_NETWORK_HEADER && v->off == 7 && data[0] == 255 &&
		    e->w->ctx.l3 == NFPROTO_IPV6)
			e->hop255 = true;
	}
	if (v->kind != V_CONST || (op != NFT_CMP_EQ && op != NFT_CMP_NEQ) || dlen > 16 ||
	    dlen > v->len) {
		maybe(e); /* may or may not match */
		return;
	}
	eq = memcmp(v->d, data, dlen) == 0;
	if ((op == NFT_CMP_EQ) != eq)
		set_nomatch(e);
}

static bool set_elem_match(const struct ck_set *s, const struct aval *v, bool *known)
{
	*known = false;
	/* only a constant set decides a lookup: elements with timeouts expire,
	 * a dynamic set or one a rule writes (dynset) changes with traffic */
	if (!s || !s->elems_read || s->elems_trunc || v->kind != V_CONST || s->written ||
	    (s->flags & (NFT_SET_TIMEOUT | NFT_SET_EVAL)) ||
	    (s->flags & (NFT_SET_INTERVAL | NFT_SET_CONCAT)) || s->key_len > v->len ||
	    s->key_len == 0)
		return false;
	*known = true;
	for (size_t i = 0; i < s->n_elems; i++)
		if (s->elems[i].klen == s->key_len &&
		    memcmp(s->elems[i].key, v->d, s->key_len) == 0)
			return true;
	return false;
}

static const struct ck_set *rule_set(struct reval *e, const char *name)
{
	return name ? ck_set_find(&e->w->st->nft, e->chain->family, e->chain->table, name) : NULL;
}

static void eval_vmap(struct reval *e, const struct ck_set *s, int eq_known, bool member);

static void eval_lookup(struct reval *e, struct nftnl_expr *x)
{
	const struct aval *v = reg_get(e, nftnl_expr_get_u32(x, NFTNL_EXPR_LOOKUP_SREG));
	const char *name = nftnl_expr_get_str(x, NFTNL_EXPR_LOOKUP_SET);
	const struct ck_set *s = rule_set(e, name);
	bool inv = nftnl_expr_get_u32(x, NFTNL_EXPR_LOOKUP_FLAGS) & NFT_LOOKUP_F_INV;
	bool known = false, member = set_elem_match(s, v, &known);

	if (nftnl_expr_is_set(x, NFTNL_EXPR_LOOKUP_DREG)) {
		uint32_t dreg = nftnl_expr_get_u32(x, NFTNL_EXPR_LOOKUP_DREG);
		struct aval unk = {0};

		if (dreg == NFT_REG_VERDICT) {
			eval_vmap(e, s, known, member);
			return;
		}
		unk.len = s ? s->data_len : 16;
		reg_set(e, dreg, &unk);
		if (known && !member)
			set_nomatch(e); /* a map lookup that misses breaks the rule */
		else if (!known)
			maybe(e);
		return;
	}
	if (known && member == inv)
		set_nomatch(e);
	else if (!known)
		maybe(e);
}

static void eval_bitwise(struct reval *e, struct nftnl_expr *x)
{
	const struct aval *src = reg_get(e, nftnl_expr_get_u32(x, NFTNL_EXPR_BITWISE_SREG));
	uint32_t dreg = nftnl_expr_get_u32(x, NFTNL_EXPR_BITWISE_DREG);
	uint32_t len = nftnl_expr_get_u32(x, NFTNL_EXPR_BITWISE_LEN), mlen = 0, xlen = 0;
	const uint8_t *mask = nftnl_expr_get(x, NFTNL_EXPR_BITWISE_MASK, &mlen);
	const uint8_t *xr = nftnl_expr_get(x, NFTNL_EXPR_BITWISE_XOR, &xlen);
	uint32_t op = nftnl_expr_get_u32(x, NFTNL_EXPR_BITWISE_OP);
	struct aval r = {0};

	r.len = len;
	if (op == NFT_BITWISE_BOOL && mask && xr && mlen == 4 && xlen == 4 && len == 4 &&
	    is_mark(src)) {
		uint32_t m, xo;

		memcpy(&m, mask, 4);
		memcpy(&xo, xr, 4);
		r = *src;
		if (r.bitwise) {
			/* ((v & m1) ^ x1) & m2 ^ x2 = (v & m1 & m2) ^ ((x1 & m2) ^ x2) */
			r.xor_ = (r.xor_ & m) ^ xo;
			r.mask &= m;
		} else {
			r.bitwise = true;
			r.mask = m;
			r.xor_ = xo;
		}
	} else if (op == NFT_BITWISE_BOOL && src->kind == V_CONST && mask && xr && mlen == len &&
		   xlen == len && len <= 16 && src->len >= len) {
		r.kind = V_CONST;
		for (uint32_t i = 0; i < len; i++)
			r.d[i] = (uint8_t)((src->d[i] & mask[i]) ^ xr[i]);
	}
	reg_set(e, dreg, &r);
}

/* May value v, written to a mark, set one of our bits? */
static bool mark_may_set_ours(const struct reval *e, const struct aval *v)
{
	uint32_t ours = e->w->ex->mark_mask;

	if (v->kind == V_BITS)
		return (v->mask & ours) != 0;
	if (v->kind == V_CONST && v->len >= 4) {
		uint32_t val;

		memcpy(&val, v->d, 4);
		return (val & ours) != 0;
	}
	if (is_mark(v)) {
		/* a copy of the mark into itself keeps our bits as trustworthy as
		 * they were; a copy of the other mark (meta mark set ct mark,
		 * CONNMARK restore; ct mark set meta mark, CONNMARK save) carries
		 * a decision from one to the other: a held flow's packets would
		 * match the engine's accept of decided marks, unjudged (issue 23).
		 * Only a mask that clears our bits makes it harmless. */
		bool same = (v->kind == V_META) == (e->writing == V_META);

		if (v->bitwise && (v->mask & ours) == 0)
			return (v->xor_ & ours) != 0;
		return !same || (v->bitwise && (v->xor_ & ours) != 0);
	}
	return true;
}

static void mark_write(struct reval *e, const char *what, const struct aval *v)
{
	char loc[700];

	if (!mark_may_set_ours(e, v))
		return;
	where(e, loc, sizeof(loc));
	if (!e->w->ours) {
		ck_find(e->w->res, CK_OB_ORDER, CHECKER_EXIT,
			"%s: %s set may set the engine's mark bits (0x%08x): flows would pass as "
			"already decided",
			loc, what, e->w->ex->mark_mask);
	} else if (e->state == CK_UNDECIDED && !e->guard) {
		ck_find(e->w->res, CK_OB_PATHS, CHECKER_EXIT,
			"%s: %s set marks a flow as decided without an engine verdict", loc, what);
	}
}

static void exitf(struct reval *e, enum checker_oblig ob, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void doubtf(struct reval *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void markdoubtf(struct reval *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void exitf(struct reval *e, enum checker_oblig ob, const char *fmt, ...)
{
	char loc[700], msg[300];
	va_list ap;

	if (e->w->marks_only)
		return;
	where(e, loc, sizeof(loc));
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ob == CK_OB_ORDER && e->w->after_ours)
		ob = CK_OB_PATHS;
	ck_find(e->w->res, ob, CHECKER_EXIT, "%s: %s", loc, msg);
}

static void vdoubt(struct reval *e, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void vdoubt(struct reval *e, const char *fmt, va_list ap)
{
	char loc[700], msg[300];

	where(e, loc, sizeof(loc));
	vsnprintf(msg, sizeof(msg), fmt, ap);
	ck_find(e->w->res, CK_OB_MODEL, CHECKER_DOUBT, "%s: %s", loc, msg);
}

static void doubtf(struct reval *e, const char *fmt, ...)
{
	va_list ap;

	if (e->w->marks_only)
		return;
	va_start(ap, fmt);
	vdoubt(e, fmt, ap);
	va_end(ap);
}

/* Something not modelled that may write a mark: unproven wherever it is,
 * on the sandbox path or not (the scan of every chain reports it too): a
 * conntrack entry marked by anyone lets its flow skip the queue (issue 31). */
static void markdoubtf(struct reval *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdoubt(e, fmt, ap);
	va_end(ap);
}

static void terminal(struct reval *e, int bits)
{
	e->out->bits |= bits;
	e->done = true;
}

static int st_now(const struct reval *e)
{
	return e->guard ? CK_DECIDED : e->state;
}

static void accept_here(struct reval *e, const char *why)
{
	int st = st_now(e);

	if (st == CK_UNDECIDED && e->w->ours && e->nd && e->hop255 && strcmp(why, "accept") == 0)
		st = CK_LINKLOCAL;
	if (st == CK_UNDECIDED && e->w->ours)
		ck_walk_note_accept(e->w, e->chain, e->rule, why);
	terminal(e, CK_O_ACC(st));
}

static void queue_to(struct reval *e, uint32_t num, uint32_t total, bool bypass, bool num_known)
{
	const struct checker_expect *ex = e->w->ex;
	char what[96];
	bool ourq =
	    num_known && num >= ex->queue_lo && num + (total ? total - 1 : 0) <= ex->queue_hi;

	if (!num_known)
		snprintf(what, sizeof(what), "(from a register)");
	else if (total > 1)
		snprintf(what, sizeof(what), "%u-%u", num, num + total - 1);
	else
		snprintf(what, sizeof(what), "%u", num);
	if (bypass)
		exitf(e, CK_OB_QUEUE,
		      "queue %s with bypass: packets pass unjudged when no engine listens", what);
	if (!ourq) {
		exitf(e, CK_OB_QUEUE,
		      "queue %s is not the engine's queue: another program judges "
		      "sandbox packets",
		      what);
		terminal(e, CK_O_ACC(st_now(e)) | CK_O_DROP);
		return;
	}
	if (!e->w->ours) {
		doubtf(e, "queue %s to the engine's queue from a table not ours", what);
		terminal(e, CK_O_ACC(st_now(e)) | CK_O_DROP);
		return;
	}
	e->w->queued = true;
	{
		char loc[700];

		where(e, loc, sizeof(loc));
		if (!e->w->marks_only)
			ck_evid(e->w->res, CK_OB_QUEUE,
				"%s: queue %s, no bypass (engine queues %u-%u)", loc, what,
				ex->queue_lo, ex->queue_hi);
	}
	/* The engine accepts (and marks) or drops: either way, decided. */
	terminal(e, CK_O_ACC_D | CK_O_DROP);
}

static void verdict(struct reval *e, int32_t code, const char *chain)
{
	switch (code) {
	case NF_ACCEPT:
		accept_here(e, "accept");
		return;
	case NF_DROP:
		terminal(e, CK_O_DROP);
		return;
	case NFT_CONTINUE:
		return;
	case NFT_BREAK:
		e->match = CK_NO;
		return;
	case NFT_RETURN:
		terminal(e, CK_O_RET(st_now(e)));
		return;
	case NFT_JUMP:
	case NFT_GOTO: {
		const struct ck_chain *t =
		    chain ? ck_chain_find(&e->w->st->nft, e->chain->family, e->chain->table, chain)
			  : NULL;
		int st = st_now(e), bits;

		if (e->w->marks_only) {
			terminal(e,
				 CK_O_ACC(st_now(e))); /* the scan visits every chain on its own */
			return;
		}
		if (!t) {
			doubtf(e, "jump to chain '%s' which the dump did not contain", chain);
			terminal(e, CK_O_ACC(st_now(e)));
			return;
		}
		bits = ck_walk_chain(e->w, t, st);
		if (code == NFT_JUMP) {
			/* a return from the callee continues after this rule */
			e->out->cont |= (bits & CK_O_RET_ANY) >> 4;
			e->out->bits |= bits & ~CK_O_RET_ANY;
			e->done = true;
		} else {
			terminal(e, bits);
		}
		return;
	}
	default:
		if ((code & NF_VERDICT_MASK) == NF_QUEUE) {
			queue_to(e, (uint32_t)code >> NF_VERDICT_QBITS, 1,
				 (code & NF_VERDICT_FLAG_QUEUE_BYPASS) != 0, true);
			return;
		}
		{
			char c[16];

			snprintf(c, sizeof(c), "%d", code);
			doubtf(e, "verdict %s not modelled", c);
			terminal(e, CK_O_ACC(st_now(e)));
		}
	}
}

static void eval_vmap(struct reval *e, const struct ck_set *s, int known, bool member)
{
	if (!s || !s->elems_read || s->elems_trunc) {
		doubtf(e, "verdict map '%s' could not be read", s ? s->name : "?");
		terminal(e, CK_O_ACC(st_now(e)) | CK_O_DROP);
		return;
	}
	if (known && !member) {
		e->match = CK_NO;
		return;
	}
	/* Every element's verdict is possible (over-approximation even when
	 * the key is known); a miss is the rule not matching. */
	for (size_t i = 0; i < s->n_elems; i++) {
		struct reval sub = *e;

		if (!s->elems[i].has_verdict || s->elems[i].verdict == NFT_CONTINUE) {
			doubtf(e, "verdict map '%s' element without a final verdict", s->name);
			terminal(e, CK_O_ACC(st_now(e)));
			continue;
		}
		sub.done = false;
		verdict(&sub, s->elems[i].verdict, s->elems[i].chain);
	}
	e->done = true;
	if (!(known && member) && e->match == CK_YES)
		e->match = CK_MAYBE;
}

static void eval_meta(struct reval *e, struct nftnl_expr *x)
{
	uint32_t key = nftnl_expr_get_u32(x, NFTNL_EXPR_META_KEY);
	struct aval v = {0};
	char k[16];

	if (nftnl_expr_is_set(x, NFTNL_EXPR_META_DREG)) {
		if (meta_value(e->w, key, v.d, &v.len)) {
			v.kind = V_CONST;
		} else {
			v.kind = V_META;
			v.key = key;
			v.len = 16;
			maybe(e); /* the load may break (no such device) */
		}
		reg_set(e, nftnl_expr_get_u32(x, NFTNL_EXPR_META_DREG), &v);
		return;
	}
	/* meta set */
	snprintf(k, sizeof(k), "%u", key);
	switch (key) {
	case NFT_META_MARK:
		e->writing = V_META;
		mark_write(e, "meta mark", reg_get(e, nftnl_expr_get_u32(x, NFTNL_EXPR_META_SREG)));
		return;
	case NFT_META_PKTTYPE: {
		const struct aval *pv = reg_get(e, nftnl_expr_get_u32(x, NFTNL_EXPR_META_SREG));

		/* PACKET_HOST on a frame to a link-local group address hands it to
		 * the port's own IP stack, which forwards it (issue 23); other
		 * types only stop delivery */
		if (pv->kind != V_CONST || pv->d[0] == 0 /* PACKET_HOST */)
			exitf(e, CK_OB_ORDER,
			      "meta pkttype set host: a frame to a link-local group address is "
			      "handed to the IP stack as addressed to it, and forwarded");
		return;
	}
	case NFT_META_PRIORITY:
	case NFT_META_NFTRACE:
	case NFT_META_SECMARK:
		return; /* no effect on where the packet goes */
	case 36:	/* NFT_META_BRI_BROUTE (headers older than the kernel lack it) */
		exitf(e, CK_OB_ORDER,
		      "meta broute set: frames are routed from the port itself, not the bridge");
		return;
	default:
		doubtf(e, "meta set of key %s not modelled", k);
		return;
	}
}

static void eval_ct(struct reval *e, struct nftnl_expr *x)
{
	uint32_t key = nftnl_expr_get_u32(x, NFTNL_EXPR_CT_KEY);
	struct aval v = {0};
	char k[16];

	if (nftnl_expr_is_set(x, NFTNL_EXPR_CT_DREG)) {
		v.kind = V_CT;
		v.key = key;
		v.len = key == NFT_CT_MARK ? 4 : 16;
		maybe(e);
		reg_set(e, nftnl_expr_get_u32(x, NFTNL_EXPR_CT_DREG), &v);
		return;
	}
	snprintf(k, sizeof(k), "%u", key);
	switch (key) {
	case NFT_CT_MARK:
		e->writing = V_CT;
		mark_write(e, "ct mark", reg_get(e, nftnl_expr_get_u32(x, NFTNL_EXPR_CT_SREG)));
		return;
	case NFT_CT_LABELS:
	case NFT_CT_ZONE:
	case NFT_CT_EVENTMASK:
	case NFT_CT_SECMARK:
		return;
	default:
		doubtf(e, "ct set of key %s not modelled", k);
		return;
	}
}

static void addr_str(const struct aval *v, uint32_t family, char *buf, size_t len)
{
	if (v->kind != V_CONST) {
		snprintf(buf, len, "an address from a register");
		return;
	}
	if (!inet_ntop(family == NFPROTO_IPV6 ? AF_INET6 : AF_INET, v->d, buf, (socklen_t)len))
		snprintf(buf, len, "?");
}

static bool port_const(const struct aval *v, uint16_t *port)
{
	uint16_t p;

	if (v->kind != V_CONST || v->len < 2)
		return false;
	memcpy(&p, v->d, 2);
	*port = ntohs(p);
	return true;
}

static bool our_listener(const struct checker_expect *ex, uint16_t port)
{
	for (size_t i = 0; i < ex->n_listen; i++)
		if (ex->listen_ports[i] == port)
			return true;
	return false;
}

/* dnat/redirect/tproxy: the destination changes. */
static void dest_change(struct reval *e, const char *what, const struct aval *addr,
			uint32_t nfamily, const struct aval *portv, bool terminal_accept)
{
	char a[64] = "", msg[200];
	uint16_t port = 0;
	bool pk = portv && port_const(portv, &port);

	if (addr)
		addr_str(addr, nfamily, a, sizeof(a));
	if (e->w->ours && pk && our_listener(e->w->ex, port) && (!addr || strcmp(what, "dnat"))) {
		/* our own redirect to our listener: the listener is the guard */
		if (terminal_accept)
			terminal(e, CK_O_ACC_D);
		return;
	}
	snprintf(msg, sizeof(msg), "%s%s%s%s%s", what, a[0] ? " to " : "", a,
		 pk ? (a[0] ? ":" : " to port ") : "", "");
	if (pk)
		snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "%u", port);
	if (e->w->ours)
		exitf(e, CK_OB_PATHS, "%s: not one of our listeners", msg);
	else
		exitf(e, CK_OB_ORDER,
		      e->w->after_ours ? "%s changes the destination after our decision"
				       : "%s changes the destination before our decision",
		      msg);
	if (terminal_accept)
		accept_here(e, what);
}

static void eval_nat(struct reval *e, struct nftnl_expr *x)
{
	uint32_t type = nftnl_expr_get_u32(x, NFTNL_EXPR_NAT_TYPE);
	uint32_t fam = nftnl_expr_get_u32(x, NFTNL_EXPR_NAT_FAMILY);
	const struct aval *addr = NULL, *port = NULL;

	if (type != NFT_NAT_DNAT) {
		accept_here(e, "snat"); /* source rewriting ends the chain like accept */
		return;
	}
	if (nftnl_expr_is_set(x, NFTNL_EXPR_NAT_REG_ADDR_MIN))
		addr = reg_get(e, nftnl_expr_get_u32(x, NFTNL_EXPR_NAT_REG_ADDR_MIN));
	if (nftnl_expr_is_set(x, NFTNL_EXPR_NAT_REG_PROTO_MIN))
		port = reg_get(e, nftnl_expr_get_u32(x, NFTNL_EXPR_NAT_REG_PROTO_MIN));
	dest_change(e, "dnat", addr, fam, port, true);
}

static void eval_payload_set(struct reval *e, struct nftnl_expr *x)
{
	uint32_t base = nftnl_expr_get_u32(x, NFTNL_EXPR_PAYLOAD_BASE);
	uint32_t off = nftnl_expr_get_u32(x, NFTNL_EXPR_PAYLOAD_OFFSET);
	uint32_t len = nftnl_expr_get_u32(x, NFTNL_EXPR_PAYLOAD_LEN);
	bool dst = false;

	/* Overlaps with a destination field (addresses, ports, MAC). */
	if (base == NFT_PAYLOAD_LL_HEADER)
		dst = off < 6;
	else if (base == NFT_PAYLOAD_NETWORK_HEADER)
		dst = (off < 20 && off + len > 16) || (off < 40 && off + len > 24);
	else if (base == NFT_PAYLOAD_TRANSPORT_HEADER)
		dst = off < 4 && off + len > 2;
	else
		dst = true;
	if (dst)
		exitf(e, CK_OB_ORDER, "payload write may rewrite the destination");
}

/* Every bit a value in [lo, hi] may have set (no wrap: hi >= lo). */
static uint32_t range_bits(uint64_t lo, uint64_t hi)
{
	uint64_t diff = lo ^ hi;
	int k = 63;

	if (hi > 0xffffffffu)
		return 0xffffffffu; /* the sum wraps: anything */
	if (!diff)
		return (uint32_t)lo;
	while (!(diff >> k))
		k--;
	/* below the highest bit where they differ, every pattern occurs */
	return (uint32_t)(lo | hi | ((2ull << k) - 1));
}

static uint32_t shifted(uint32_t x, uint8_t dir, uint8_t bits)
{
	if (bits >= 32)
		return 0xffffffffu; /* the kernel refuses it; take the worst */
	return dir == D_SHIFT_RIGHT ? x >> bits : x << bits;
}

/* CONNMARK: set (ct = (ct & ~ctmask) ^ ctmark), save (packet mark into the
 * ct mark through nfmask and ctmask), restore (the reverse); revision 2
 * shifts the result (set) or the copied bits (save, restore). */
static void eval_connmark(struct reval *e, uint32_t rev, const uint8_t *info, uint32_t ilen)
{
	static const char *mode_name[] = {"--set-xmark", "--save-mark", "--restore-mark"};
	struct xt_connmark_tginfo2 m;
	char what[160];

	memset(&m, 0, sizeof(m));
	if (rev == 1 && ilen >= sizeof(struct xt_connmark_tginfo1)) {
		struct xt_connmark_tginfo1 m1;

		memcpy(&m1, info, sizeof(m1));
		m.ctmark = m1.ctmark;
		m.ctmask = m1.ctmask;
		m.nfmask = m1.nfmask;
		m.mode = m1.mode;
	} else if (rev == 2 && ilen >= sizeof(m)) {
		memcpy(&m, info, sizeof(m));
	} else {
		markdoubtf(e, "xt CONNMARK target revision %u not modelled", rev);
		return;
	}
	if (m.mode > XT_CONNMARK_RESTORE) {
		markdoubtf(e, "xt CONNMARK mode %u not modelled", m.mode);
		return;
	}
	if (m.shift_bits) {
		/* a shift moves bits from one position to another: what lands on
		 * the engine's bits came from bits anyone may set (a MARK of a low
		 * bit before a save shifted by 31 is ALLOW, issue 31) */
		struct aval v = {.kind = V_BITS, .len = 4};

		if (m.mode == XT_CONNMARK_SET)
			v.mask = shifted(~m.ctmask | m.ctmark, m.shift_dir, m.shift_bits);
		else if (m.mode == XT_CONNMARK_SAVE)
			v.mask = shifted(m.nfmask, m.shift_dir, m.shift_bits) & m.ctmask;
		else
			v.mask = shifted(m.ctmask, m.shift_dir, m.shift_bits) & m.nfmask;
		snprintf(what, sizeof(what), "xt CONNMARK %s --%s-shift-mark %u (bits 0x%08x)",
			 mode_name[m.mode], m.shift_dir == D_SHIFT_RIGHT ? "right" : "left",
			 m.shift_bits, v.mask);
		e->writing = m.mode == XT_CONNMARK_RESTORE ? V_META : V_CT;
		mark_write(e, what, &v);
		return;
	}
	if (m.mode == XT_CONNMARK_SET) {
		struct aval v = {.kind = V_CONST, .len = 4};

		memcpy(v.d, &m.ctmark, 4);
		e->writing = V_CT;
		mark_write(e, "xt CONNMARK", &v);
	} else {
		/* a copy from one mark to the other, through the masks */
		struct aval v = {.kind = m.mode == XT_CONNMARK_SAVE ? V_META : V_CT,
				 .key = m.mode == XT_CONNMARK_SAVE ? NFT_META_MARK : NFT_CT_MARK,
				 .len = 4,
				 .bitwise = true,
				 .mask = m.ctmask & m.nfmask};

		e->writing = m.mode == XT_CONNMARK_SAVE ? V_CT : V_META;
		mark_write(e,
			   m.mode == XT_CONNMARK_SAVE ? "xt CONNMARK --save-mark"
						      : "xt CONNMARK --restore-mark",
			   &v);
	}
}

/* The targets that write a mark with a value the model bounds (MARK,
 * CONNMARK, HMARK, TPROXY's mark, ebtables mark, SET --map-mark): true when
 * name was one of them (handled). */
static bool eval_mark_target(struct reval *e, const char *name, uint32_t rev, const uint8_t *info,
			     uint32_t ilen)
{
	char what[160];

	if (strcmp(name, "MARK") == 0) {
		struct xt_mark_tginfo2 m;
		struct aval v = {.kind = V_CONST, .len = 4};

		if (rev != 2 || ilen < sizeof(m)) {
			markdoubtf(e, "xt MARK target revision %u not modelled", rev);
			return true;
		}
		memcpy(&m, info, sizeof(m));
		memcpy(v.d, &m.mark, 4);
		e->writing = V_META;
		mark_write(e, "xt MARK", &v);
		return true;
	}
	if (strcmp(name, "CONNMARK") == 0) {
		eval_connmark(e, rev, info, ilen);
		return true;
	}
	if (strcmp(name, "HMARK") == 0) {
		/* mark = hash scaled to [0, mod) + offset: every bit of that range */
		struct xt_hmark_info h;
		struct aval v = {.kind = V_BITS, .len = 4};

		if (rev > 1 || ilen < sizeof(h)) {
			markdoubtf(e, "xt HMARK target revision %u not modelled", rev);
			return true;
		}
		memcpy(&h, info, sizeof(h));
		v.mask =
		    range_bits(h.hoffset, (uint64_t)h.hoffset + (h.hmodulus ? h.hmodulus - 1 : 0));
		snprintf(what, sizeof(what), "xt HMARK --hmark-offset 0x%x --hmark-mod %u",
			 h.hoffset, h.hmodulus);
		e->writing = V_META;
		mark_write(e, what, &v);
		return true;
	}
	if (strcmp(name, "mark") == 0) {
		/* ebtables: set, or and xor may set the value's bits; and clears */
		struct ebt_mark_t_info m;
		struct aval v = {.kind = V_CONST, .len = 4};
		uint32_t mark;
		int verdict;

		if (rev != 0 || ilen < sizeof(m)) {
			markdoubtf(e, "ebtables mark target revision %u not modelled", rev);
			return true;
		}
		memcpy(&m, info, sizeof(m));
		mark = (uint32_t)m.mark;
		memcpy(v.d, &mark, 4);
		e->writing = V_META;
		if ((m.target & ~0xf) != (int)MARK_AND_VALUE)
			mark_write(e, "ebtables mark", &v);
		/* its verdict: EBT_ACCEPT -1, DROP -2, CONTINUE -3, RETURN -4 */
		verdict = m.target | ~0xf;
		if (verdict == -1)
			accept_here(e, "accept");
		else if (verdict == -2)
			terminal(e, CK_O_DROP);
		else if (verdict == -4)
			terminal(e, CK_O_RET(st_now(e)));
		return true;
	}
	if (strcmp(name, "SET") == 0) {
		/* --map-set ... --map-mark copies a mark out of an ipset element */
		struct xt_set_info_target_v3 t;
		struct aval unk = {0};

		if (rev < 3)
			return true; /* adds to and deletes from ipsets only */
		if (rev > 3 || ilen < sizeof(t)) {
			markdoubtf(e, "xt SET target revision %u not modelled", rev);
			return true;
		}
		memcpy(&t, info, sizeof(t));
		e->writing = V_META;
		if (t.map_set.index != IPSET_INVALID_ID && (t.flags & IPSET_FLAG_MAP_SKBMARK))
			mark_write(e, "xt SET --map-mark", &unk);
		return true;
	}
	return false;
}

static void eval_target(struct reval *e, struct nftnl_expr *x)
{
	const char *name = nftnl_expr_get_str(x, NFTNL_EXPR_TG_NAME);
	uint32_t rev = nftnl_expr_get_u32(x, NFTNL_EXPR_TG_REV), ilen = 0;
	const uint8_t *info = nftnl_expr_get(x, NFTNL_EXPR_TG_INFO, &ilen);
	const struct ck_vocab *v = name ? ck_vocab_find(CK_V_TARGET, name) : NULL;

	if (!name || !info) {
		markdoubtf(e, "xt target without name or data");
		return;
	}
	if (!v) {
		/* it may write anything, a mark included */
		markdoubtf(e, "xt target '%s' not modelled", name);
		return;
	}
	if (v->model == CK_VM_PURE)
		return; /* no effect on where the packet goes, nor on a mark */
	if (v->model == CK_VM_NONE) {
		if (v->writes & (CK_F_MARK | CK_F_CTMARK))
			markdoubtf(e, "xt target '%s' not modelled", name);
		else
			doubtf(e, "xt target '%s' not modelled", name);
		return;
	}
	if (eval_mark_target(e, name, rev, info, ilen))
		return;
	if (strcmp(name, "NFQUEUE") == 0) {
		uint16_t f[3] = {0, 0, 0};

		if ((rev == 0 && ilen >= 2) || (rev == 1 && ilen >= 4) ||
		    (rev >= 2 && ilen >= 6 && rev <= 3)) {
			memcpy(f, info, rev == 0 ? 2 : rev == 1 ? 4 : 6);
			queue_to(e, f[0], rev ? f[1] : 1, rev >= 2 && (f[2] & NFQ_FLAG_BYPASS),
				 true);
		} else {
			doubtf(e, "xt NFQUEUE target revision not modelled");
			terminal(e, CK_O_ACC(st_now(e)));
		}
		return;
	}
	if (strcmp(name, "REJECT") == 0) {
		terminal(e, CK_O_DROP);
		return;
	}
	if (strcmp(name, "CT") == 0) {
		/* xt_ct_target_info(_v1): flags, zone, ct_events, exp_events, then
		 * helper[16] in every revision. A helper makes the kernel expect
		 * related connections that inherit the master's marks: the
		 * engine's allow reaches flows it never saw (issue 23). */
		struct {
			uint16_t flags, zone;
			uint32_t ct_events, exp_events;
			char helper[16];
		} ct;

		if (rev > 2 || ilen < sizeof(ct)) {
			doubtf(e, "xt CT target revision %u not modelled", rev);
			return;
		}
		memcpy(&ct, info, sizeof(ct));
		ct.helper[15] = 0;
		if (ct.helper[0])
			exitf(e, CK_OB_ORDER,
			      "xt CT target attaches conntrack helper '%s': the connections it "
			      "expects inherit the master flow's marks and pass as decided",
			      ct.helper);
		return; /* notrack, zones, events: the flow is still judged */
	}
	if (strcmp(name, "SNAT") == 0 || strcmp(name, "MASQUERADE") == 0) {
		accept_here(e, name);
		return;
	}
	if (strcmp(name, "TPROXY") == 0) {
		/* both revisions start with mark_mask, mark_value: mark =
		 * (mark & ~mask) ^ value */
		struct xt_tproxy_target_info t;
		struct aval mv = {.kind = V_CONST, .len = 4};

		if (rev > 1 || ilen < sizeof(t)) {
			markdoubtf(e, "xt TPROXY target revision %u not modelled", rev);
			return;
		}
		memcpy(&t, info, sizeof(t));
		memcpy(mv.d, &t.mark_value, 4);
		e->writing = V_META;
		mark_write(e, "xt TPROXY --tproxy-mark", &mv);
	}
	if (strcmp(name, "DNAT") == 0 || strcmp(name, "REDIRECT") == 0 ||
	    strcmp(name, "NETMAP") == 0 || strcmp(name, "TPROXY") == 0) {
		exitf(e, e->w->ours ? CK_OB_PATHS : CK_OB_ORDER,
		      "xt %s target changes the destination", name);
		if (strcmp(name, "TPROXY") != 0)
			accept_here(e, name);
		return;
	}
	if (strcmp(name, "TEE") == 0) {
		exitf(e, CK_OB_ORDER, "xt TEE target duplicates packets to another host");
		return;
	}
	/* a target the vocabulary says this file models, and it does not */
	markdoubtf(e, "xt target '%s' not modelled", name);
}

static void eval_objref(struct reval *e, struct nftnl_expr *x)
{
	uint32_t t;
	char k[16];

	if (!nftnl_expr_is_set(x, NFTNL_EXPR_OBJREF_IMM_TYPE)) {
		doubtf(e, "object reference through a map not modelled");
		return;
	}
	t = nftnl_expr_get_u32(x, NFTNL_EXPR_OBJREF_IMM_TYPE);
	switch (t) {
	case NFT_OBJECT_COUNTER:
	case NFT_OBJECT_QUOTA:
	case NFT_OBJECT_LIMIT:
	case NFT_OBJECT_CT_TIMEOUT:
	case NFT_OBJECT_SECMARK:
		return;
	default:
		snprintf(k, sizeof(k), "%u", t);
		doubtf(e, "object reference of type %s not modelled", k);
	}
}

static void eval_expr(struct reval *e, struct nftnl_expr *x)
{
	const char *n = nftnl_expr_get_str(x, NFTNL_EXPR_NAME);

	if (!n) {
		doubtf(e, "expression without a name");
		return;
	}
	if (strcmp(n, "cmp") == 0) {
		eval_cmp(e, x);
	} else if (strcmp(n, "immediate") == 0) {
		uint32_t dreg = nftnl_expr_get_u32(x, NFTNL_EXPR_IMM_DREG);

		if (dreg == NFT_REG_VERDICT) {
			verdict(e, (int32_t)nftnl_expr_get_u32(x, NFTNL_EXPR_IMM_VERDICT),
				nftnl_expr_get_str(x, NFTNL_EXPR_IMM_CHAIN));
		} else {
			struct aval v = {.kind = V_CONST};
			uint32_t len = 0;
			const void *d = nftnl_expr_get(x, NFTNL_EXPR_IMM_DATA, &len);

			if (d && len <= 16) {
				memcpy(v.d, d, len);
				v.len = len;
			} else {
				v.kind = V_UNK;
			}
			reg_set(e, dreg, &v);
		}
	} else if (strcmp(n, "meta") == 0) {
		eval_meta(e, x);
	} else if (strcmp(n, "ct") == 0) {
		eval_ct(e, x);
	} else if (strcmp(n, "payload") == 0) {
		if (nftnl_expr_is_set(x, NFTNL_EXPR_PAYLOAD_SREG)) {
			eval_payload_set(e, x);
		} else {
			struct aval v = {.kind = V_PAYLOAD,
					 .key = nftnl_expr_get_u32(x, NFTNL_EXPR_PAYLOAD_BASE),
					 .off = nftnl_expr_get_u32(x, NFTNL_EXPR_PAYLOAD_OFFSET),
					 .len = nftnl_expr_get_u32(x, NFTNL_EXPR_PAYLOAD_LEN)};

			maybe(e);
			reg_set(e, nftnl_expr_get_u32(x, NFTNL_EXPR_PAYLOAD_DREG), &v);
		}
	} else if (strcmp(n, "bitwise") == 0) {
		eval_bitwise(e, x);
	} else if (strcmp(n, "lookup") == 0) {
		eval_lookup(e, x);
	} else if (strcmp(n, "match") == 0) {
		const char *mn = nftnl_expr_get_str(x, NFTNL_EXPR_MT_NAME);

		/* a match is a condition (over-approximated), but only one the
		 * vocabulary knows: another may write anything */
		if (!mn || !ck_vocab_find(CK_V_MATCH, mn))
			markdoubtf(e, "xt match '%s' not modelled", mn ? mn : "?");
		maybe(e);
	} else if (strcmp(n, "target") == 0) {
		eval_target(e, x);
	} else if (strcmp(n, "queue") == 0) {
		bool num_known = !nftnl_expr_is_set(x, NFTNL_EXPR_QUEUE_SREG_QNUM);
		uint16_t flags = nftnl_expr_get_u16(x, NFTNL_EXPR_QUEUE_FLAGS);

		queue_to(e, nftnl_expr_get_u16(x, NFTNL_EXPR_QUEUE_NUM),
			 nftnl_expr_get_u16(x, NFTNL_EXPR_QUEUE_TOTAL),
			 flags & NFT_QUEUE_FLAG_BYPASS, num_known);
	} else if (strcmp(n, "reject") == 0) {
		terminal(e, CK_O_DROP);
	} else if (strcmp(n, "nat") == 0) {
		eval_nat(e, x);
	} else if (strcmp(n, "masq") == 0) {
		accept_here(e, "masquerade");
	} else if (strcmp(n, "redir") == 0) {
		const struct aval *p =
		    nftnl_expr_is_set(x, NFTNL_EXPR_REDIR_REG_PROTO_MIN)
			? reg_get(e, nftnl_expr_get_u32(x, NFTNL_EXPR_REDIR_REG_PROTO_MIN))
			: NULL;

		dest_change(e, "redirect", NULL, 0, p, true);
	} else if (strcmp(n, "tproxy") == 0) {
		const struct aval *p =
		    nftnl_expr_is_set(x, NFTNL_EXPR_TPROXY_REG_PORT)
			? reg_get(e, nftnl_expr_get_u32(x, NFTNL_EXPR_TPROXY_REG_PORT))
			: NULL;

		dest_change(e, "tproxy", NULL, 0, p, false);
	} else if (strcmp(n, "dup") == 0) {
		exitf(e, CK_OB_ORDER, "dup sends a copy of sandbox packets to another destination");
	} else if (strcmp(n, "fwd") == 0) {
		exitf(e, CK_OB_ORDER, "fwd sends sandbox packets out of another interface");
		terminal(e, CK_O_STOLEN);
	} else if (strcmp(n, "objref") == 0) {
		eval_objref(e, x);
	} else {
		const struct ck_vocab *v = ck_vocab_find(CK_V_EXPR, n);
		uint32_t reg, len;

		if (v && v->model == CK_VM_PURE) {
			/* a condition or load whose value we do not track (its
			 * register is unknown), or counting and logging, which never
			 * stop a rule */
			struct aval unk = {0};

			if (v->cond)
				maybe(e);
			if (ck_vocab_dreg(v, x, &reg, &len)) {
				unk.len = len;
				reg_set(e, reg, &unk);
			}
			return;
		}
		if (!v || (v->writes & (CK_F_MARK | CK_F_CTMARK)))
			markdoubtf(e, "expression '%s' not modelled", n);
		else
			doubtf(e, "expression '%s' not modelled", n);
		/* what it does is unknown: it may end the chain either way */
		terminal(e, CK_O_ACC(st_now(e)) | CK_O_DROP | CK_O_STOLEN);
	}
}

void ck_rule_eval(struct ck_walk *w, const struct ck_chain *c, const struct ck_rule *r, int state,
		  struct ck_rule_out *out)
{
	struct reval e;
	struct nftnl_expr_iter *it;
	struct nftnl_expr *x;

	memset(&e, 0, sizeof(e));
	memset(out, 0, sizeof(*out));
	e.w = w;
	e.chain = c;
	e.rule = r;
	e.match = CK_YES;
	e.state = state;
	e.out = out;
	it = nftnl_expr_iter_create(r->r);
	if (!it) {
		ck_find(w->res, CK_OB_MODEL, CHECKER_DOUBT, "out of memory while reading a rule");
		out->bits = CK_O_ACC_U;
		return;
	}
	for (x = nftnl_expr_iter_next(it); x && !e.done && e.match != CK_NO;
	     x = nftnl_expr_iter_next(it))
		eval_expr(&e, x);
	nftnl_expr_iter_destroy(it);
	if (e.match == CK_NO) {
		out->bits = 0;
		out->cont = 1 << state;
		return;
	}
	if (!e.done)
		out->cont |= 1 << st_now(&e);
	if (e.match == CK_MAYBE)
		out->cont |= 1 << state;
}
