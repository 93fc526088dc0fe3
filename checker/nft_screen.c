/* checker: screen every nftables netlink message with libmnl before libnftnl
 * sees it. libnftnl trusts what it is handed: it strdup()s string attributes
 * without looking for their NUL, and exit()s (abi_breakage) on a known
 * attribute of the wrong size. Each message is walked here against the
 * attribute types the kernel sends (and libnftnl reads), nested attributes
 * and expressions included; only a message that passes goes to libnftnl. */
#include <arpa/inet.h>
#include <stdbool.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables_compat.h>

#include "checker/checker_int.h"

/* The attribute kinds and schemas (enum ck_sk, CK_SCHEMA) are the
 * vocabulary's (checker_int.h): an expression's schema is read from its
 * entry in vocab.c, so the screen admits exactly the expressions the walks
 * classify. */
#define SCHEMA	      CK_SCHEMA
#define SCHEMA_STRICT CK_SCHEMA_STRICT

/* Deepest nesting of expressions: a rule's expression may hold expressions
 * (dynset), those none (the kernel refuses more). */
#define EXPR_DEPTH_MAX 2
/* The kernel concatenates at most NFT_REG32_COUNT fields; libnftnl keeps
 * them in an array of that size. */
#define CONCAT_FIELDS_MAX 16

/* ---- the schemas ---------------------------------------------------------- */

SCHEMA(s_verdict, {NFTA_VERDICT_CODE, CK_SK_U32, NULL}, {NFTA_VERDICT_CHAIN, CK_SK_STR, NULL},
       {NFTA_VERDICT_CHAIN_ID, CK_SK_U32, NULL});
SCHEMA(s_data, {NFTA_DATA_VALUE, CK_SK_BIN, NULL}, {NFTA_DATA_VERDICT, CK_SK_VERDICT, &s_verdict});

SCHEMA(s_table, {NFTA_TABLE_NAME, CK_SK_STR, NULL}, {NFTA_TABLE_FLAGS, CK_SK_U32, NULL},
       {NFTA_TABLE_USE, CK_SK_U32, NULL}, {NFTA_TABLE_HANDLE, CK_SK_U64, NULL},
       {NFTA_TABLE_USERDATA, CK_SK_BIN, NULL}, {NFTA_TABLE_OWNER, CK_SK_U32, NULL});

SCHEMA(s_hook, {NFTA_HOOK_HOOKNUM, CK_SK_U32, NULL}, {NFTA_HOOK_PRIORITY, CK_SK_U32, NULL},
       {NFTA_HOOK_DEV, CK_SK_STR, NULL}, {NFTA_HOOK_DEVS, CK_SK_DEVS, NULL});
SCHEMA(s_counters, {NFTA_COUNTER_BYTES, CK_SK_U64, NULL}, {NFTA_COUNTER_PACKETS, CK_SK_U64, NULL});
SCHEMA(s_chain, {NFTA_CHAIN_TABLE, CK_SK_STR, NULL}, {NFTA_CHAIN_HANDLE, CK_SK_U64, NULL},
       {NFTA_CHAIN_NAME, CK_SK_STR, NULL}, {NFTA_CHAIN_HOOK, CK_SK_NEST, &s_hook},
       {NFTA_CHAIN_POLICY, CK_SK_U32, NULL}, {NFTA_CHAIN_USE, CK_SK_U32, NULL},
       {NFTA_CHAIN_TYPE, CK_SK_STR, NULL}, {NFTA_CHAIN_COUNTERS, CK_SK_NEST, &s_counters},
       {NFTA_CHAIN_FLAGS, CK_SK_U32, NULL}, {NFTA_CHAIN_ID, CK_SK_U32, NULL},
       {NFTA_CHAIN_USERDATA, CK_SK_BIN, NULL});

SCHEMA(s_compat, {NFTA_RULE_COMPAT_PROTO, CK_SK_U32, NULL},
       {NFTA_RULE_COMPAT_FLAGS, CK_SK_U32, NULL});
SCHEMA(s_rule, {NFTA_RULE_TABLE, CK_SK_STR, NULL}, {NFTA_RULE_CHAIN, CK_SK_STR, NULL},
       {NFTA_RULE_HANDLE, CK_SK_U64, NULL}, {NFTA_RULE_EXPRESSIONS, CK_SK_EXPRS, NULL},
       {NFTA_RULE_COMPAT, CK_SK_NEST, &s_compat}, {NFTA_RULE_POSITION, CK_SK_U64, NULL},
       {NFTA_RULE_USERDATA, CK_SK_BIN, NULL}, {NFTA_RULE_ID, CK_SK_U32, NULL},
       {NFTA_RULE_POSITION_ID, CK_SK_U32, NULL}, {NFTA_RULE_CHAIN_ID, CK_SK_U32, NULL});

SCHEMA(s_field, {NFTA_SET_FIELD_LEN, CK_SK_U32, NULL});
SCHEMA(s_desc, {NFTA_SET_DESC_SIZE, CK_SK_U32, NULL}, {NFTA_SET_DESC_CONCAT, CK_SK_LIST, &s_field});
SCHEMA(s_set, {NFTA_SET_TABLE, CK_SK_STR, NULL}, {NFTA_SET_NAME, CK_SK_STR, NULL},
       {NFTA_SET_FLAGS, CK_SK_U32, NULL}, {NFTA_SET_KEY_TYPE, CK_SK_U32, NULL},
       {NFTA_SET_KEY_LEN, CK_SK_U32, NULL}, {NFTA_SET_DATA_TYPE, CK_SK_U32, NULL},
       {NFTA_SET_DATA_LEN, CK_SK_U32, NULL}, {NFTA_SET_POLICY, CK_SK_U32, NULL},
       {NFTA_SET_DESC, CK_SK_NEST, &s_desc}, {NFTA_SET_ID, CK_SK_U32, NULL},
       {NFTA_SET_TIMEOUT, CK_SK_U64, NULL}, {NFTA_SET_GC_INTERVAL, CK_SK_U32, NULL},
       {NFTA_SET_USERDATA, CK_SK_BIN, NULL}, {NFTA_SET_OBJ_TYPE, CK_SK_U32, NULL},
       {NFTA_SET_HANDLE, CK_SK_U64, NULL}, {NFTA_SET_EXPR, CK_SK_EXPR, NULL},
       {NFTA_SET_EXPRESSIONS, CK_SK_EXPRS, NULL});

/* Strict: libnftnl 1.2.4 lets through element attribute types up to
 * NFTA_SET_MAX into an array sized for NFTA_SET_ELEM_MAX (a stack overflow). */
SCHEMA_STRICT(s_elem, {NFTA_SET_ELEM_KEY, CK_SK_DATA, NULL}, {NFTA_SET_ELEM_DATA, CK_SK_DATA, NULL},
	      {NFTA_SET_ELEM_FLAGS, CK_SK_U32, NULL}, {NFTA_SET_ELEM_TIMEOUT, CK_SK_U64, NULL},
	      {NFTA_SET_ELEM_EXPIRATION, CK_SK_U64, NULL},
	      {NFTA_SET_ELEM_USERDATA, CK_SK_BIN, NULL}, {NFTA_SET_ELEM_EXPR, CK_SK_EXPR, NULL},
	      {NFTA_SET_ELEM_OBJREF, CK_SK_STR, NULL}, {NFTA_SET_ELEM_KEY_END, CK_SK_DATA, NULL},
	      {NFTA_SET_ELEM_EXPRESSIONS, CK_SK_EXPRS, NULL}, {NFTA_SET_ELEM_PAD, CK_SK_BIN, NULL});
SCHEMA(s_elems, {NFTA_SET_ELEM_LIST_TABLE, CK_SK_STR, NULL},
       {NFTA_SET_ELEM_LIST_SET, CK_SK_STR, NULL},
       {NFTA_SET_ELEM_LIST_ELEMENTS, CK_SK_LIST, &s_elem},
       {NFTA_SET_ELEM_LIST_SET_ID, CK_SK_U32, NULL});

SCHEMA(s_obj, {NFTA_OBJ_TABLE, CK_SK_STR, NULL}, {NFTA_OBJ_NAME, CK_SK_STR, NULL},
       {NFTA_OBJ_TYPE, CK_SK_U32, NULL}, {NFTA_OBJ_USE, CK_SK_U32, NULL},
       {NFTA_OBJ_HANDLE, CK_SK_U64, NULL}, {NFTA_OBJ_USERDATA, CK_SK_BIN, NULL});

/* ---- the walk ------------------------------------------------------------- */

static int walk(const void *p, size_t len, const struct ck_sschema *s, int depth);
static int check_attr(const struct nlattr *a, enum ck_sk kind, const struct ck_sschema *nest,
		      int depth);

/* Walks one attribute stream [p, p + len). The stream must end exactly at
 * len: the kernel pads every attribute, so anything left over is damage. */
struct attr_iter {
	const char *p;
	size_t left;
	bool bad;
};

static void iter_init(struct attr_iter *it, const void *p, size_t len)
{
	it->p = p;
	it->left = len;
	it->bad = false;
}

static void iter_nested(struct attr_iter *it, const struct nlattr *a)
{
	iter_init(it, mnl_attr_get_payload(a), mnl_attr_get_payload_len(a));
}

/* The next attribute, or NULL at the end (it->bad: the stream is broken). */
static const struct nlattr *iter_next(struct attr_iter *it)
{
	const struct nlattr *a = (const struct nlattr *)it->p;
	size_t step;

	if (it->left == 0)
		return NULL;
	if (!mnl_attr_ok(a, it->left > INT32_MAX ? INT32_MAX : (int)it->left)) {
		it->bad = true;
		it->left = 0;
		return NULL;
	}
	step = MNL_ALIGN(a->nla_len);
	if (step >= it->left) {
		it->left = 0;
	} else {
		it->left -= step;
		it->p += step;
	}
	return a;
}

static int walk_nested(const struct nlattr *a, const struct ck_sschema *s, int depth)
{
	return walk(mnl_attr_get_payload(a), mnl_attr_get_payload_len(a), s, depth);
}

static int check_expr(const struct nlattr *a, int depth)
{
	const struct nlattr *x, *name = NULL, *data = NULL;
	const struct ck_sschema *ds;
	const struct ck_vocab *v;
	struct attr_iter it;

	if (depth > EXPR_DEPTH_MAX || mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
		return CK_SCREEN_BAD;
	iter_nested(&it, a);
	while ((x = iter_next(&it))) {
		switch (mnl_attr_get_type(x)) {
		case NFTA_EXPR_NAME:
			if (name || mnl_attr_validate(x, MNL_TYPE_NUL_STRING) < 0)
				return CK_SCREEN_BAD;
			name = x;
			break;
		case NFTA_EXPR_DATA:
			if (data || mnl_attr_validate(x, MNL_TYPE_NESTED) < 0)
				return CK_SCREEN_BAD;
			data = x;
			break;
		default:
			break;
		}
	}
	if (it.bad || !name)
		return CK_SCREEN_BAD;
	v = ck_vocab_find(CK_V_EXPR, mnl_attr_get_str(name));
	if (!v || !v->schema)
		return CK_SCREEN_UNKNOWN;
	ds = v->schema;
	return data ? walk_nested(data, ds, depth) : 0;
}

/* Nested NFTA_LIST_ELEMs (at most max; 0: no limit), each checked as kind. */
static int check_list(const struct nlattr *a, enum ck_sk kind, const struct ck_sschema *nest,
		      int depth, size_t max)
{
	const struct nlattr *x;
	struct attr_iter it;
	size_t n = 0;
	int worst = 0;

	if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
		return CK_SCREEN_BAD;
	iter_nested(&it, a);
	while ((x = iter_next(&it))) {
		int rc;

		if (mnl_attr_get_type(x) != NFTA_LIST_ELEM || (max && ++n > max))
			return CK_SCREEN_BAD;
		rc = check_attr(x, kind, nest, depth);
		if (rc == CK_SCREEN_BAD)
			return rc;
		if (rc < 0)
			worst = rc;
	}
	return it.bad ? CK_SCREEN_BAD : worst;
}

/* struct nft_data; a value never longer than the largest register
 * (NFT_DATA_VALUE_MAXLEN: what libnftnl has room for). */
static int check_data(const struct nlattr *a, int depth)
{
	const struct nlattr *x;
	struct attr_iter it;

	if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
		return CK_SCREEN_BAD;
	iter_nested(&it, a);
	while ((x = iter_next(&it)))
		if (mnl_attr_get_type(x) == NFTA_DATA_VALUE &&
		    mnl_attr_get_payload_len(x) > NFT_DATA_VALUE_MAXLEN)
			return CK_SCREEN_BAD;
	return it.bad ? CK_SCREEN_BAD : walk_nested(a, &s_data, depth);
}

/* A verdict has its code, and a jump or goto its chain: libnftnl strdup()s
 * the chain of a jump without looking whether there is one. */
static int check_verdict(const struct nlattr *a, int depth)
{
	const struct nlattr *x, *code = NULL, *chain = NULL;
	struct attr_iter it;
	int rc;

	if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
		return CK_SCREEN_BAD;
	rc = walk_nested(a, &s_verdict, depth);
	if (rc < 0)
		return rc;
	iter_nested(&it, a);
	while ((x = iter_next(&it))) {
		if (mnl_attr_get_type(x) == NFTA_VERDICT_CODE)
			code = x;
		else if (mnl_attr_get_type(x) == NFTA_VERDICT_CHAIN)
			chain = x;
	}
	if (!code)
		return CK_SCREEN_BAD;
	switch ((int32_t)ntohl(mnl_attr_get_u32(code))) {
	case NFT_JUMP:
	case NFT_GOTO:
		return chain ? 0 : CK_SCREEN_BAD;
	default:
		return 0;
	}
}

static int check_devs(const struct nlattr *a)
{
	const struct nlattr *x;
	struct attr_iter it;

	if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
		return CK_SCREEN_BAD;
	iter_nested(&it, a);
	while ((x = iter_next(&it)))
		if (mnl_attr_get_type(x) != NFTA_DEVICE_NAME ||
		    mnl_attr_validate(x, MNL_TYPE_NUL_STRING) < 0)
			return CK_SCREEN_BAD;
	return it.bad ? CK_SCREEN_BAD : 0;
}

static int check_attr(const struct nlattr *a, enum ck_sk kind, const struct ck_sschema *nest,
		      int depth)
{
	static const enum mnl_attr_data_type mt[] = {
	    [CK_SK_U8] = MNL_TYPE_U8,	       [CK_SK_U16] = MNL_TYPE_U16,
	    [CK_SK_U32] = MNL_TYPE_U32,	       [CK_SK_U64] = MNL_TYPE_U64,
	    [CK_SK_STR] = MNL_TYPE_NUL_STRING, [CK_SK_BIN] = MNL_TYPE_BINARY,
	};

	switch (kind) {
	case CK_SK_U8:
	case CK_SK_U16:
	case CK_SK_U32:
	case CK_SK_U64:
	case CK_SK_STR:
	case CK_SK_BIN:
		return mnl_attr_validate(a, mt[kind]) < 0 ? CK_SCREEN_BAD : 0;
	case CK_SK_NEST:
		if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
			return CK_SCREEN_BAD;
		return walk_nested(a, nest, depth);
	case CK_SK_LIST:
		return check_list(a, CK_SK_NEST, nest, depth,
				  nest == &s_field ? CONCAT_FIELDS_MAX : 0);
	case CK_SK_DATA:
		return check_data(a, depth);
	case CK_SK_EXPR:
		return check_expr(a, depth + 1);
	case CK_SK_EXPRS:
		return check_list(a, CK_SK_EXPR, NULL, depth, 0);
	case CK_SK_DEVS:
		return check_devs(a);
	case CK_SK_VERDICT:
		return check_verdict(a, depth);
	}
	return CK_SCREEN_BAD;
}

/* Attributes a schema does not name are skipped, as libnftnl skips them
 * (types newer than it knows). The worst result wins: BAD over UNKNOWN. */
static int walk(const void *p, size_t len, const struct ck_sschema *s, int depth)
{
	const struct nlattr *a;
	struct attr_iter it;
	uint64_t seen = 0;
	int worst = 0;

	iter_init(&it, p, len);
	while ((a = iter_next(&it))) {
		uint16_t t = mnl_attr_get_type(a);
		bool known = false;

		for (size_t i = 0; i < s->n; i++) {
			int rc;

			if (s->a[i].kind == 0 || s->a[i].type != t)
				continue;
			/* the kernel sends each attribute once; libnftnl would
			 * take the last and may leak what the first allocated */
			if (seen & (1ULL << i))
				return CK_SCREEN_BAD;
			seen |= 1ULL << i;
			known = true;
			rc = check_attr(a, (enum ck_sk)s->a[i].kind, s->a[i].nest, depth);
			if (rc == CK_SCREEN_BAD)
				return rc;
			if (rc < 0)
				worst = rc;
			break;
		}
		if (!known && s->strict)
			return CK_SCREEN_BAD;
	}
	return it.bad ? CK_SCREEN_BAD : worst;
}

int ck_nft_screen(const struct nlmsghdr *nlh)
{
	const struct ck_sschema *s;
	size_t off = NLMSG_HDRLEN + MNL_ALIGN(sizeof(struct nfgenmsg));

	if (nlh->nlmsg_len < off)
		return CK_SCREEN_BAD;
	if (NFNL_SUBSYS_ID(nlh->nlmsg_type) != NFNL_SUBSYS_NFTABLES)
		return CK_SCREEN_BAD;
	switch (NFNL_MSG_TYPE(nlh->nlmsg_type)) {
	case NFT_MSG_NEWTABLE:
		s = &s_table;
		break;
	case NFT_MSG_NEWCHAIN:
		s = &s_chain;
		break;
	case NFT_MSG_NEWRULE:
		s = &s_rule;
		break;
	case NFT_MSG_NEWSET:
		s = &s_set;
		break;
	case NFT_MSG_NEWSETELEM:
		s = &s_elems;
		break;
	case NFT_MSG_NEWOBJ:
		s = &s_obj;
		break;
	default:
		return CK_SCREEN_BAD;
	}
	return walk((const char *)nlh + off, nlh->nlmsg_len - off, s, 0);
}
