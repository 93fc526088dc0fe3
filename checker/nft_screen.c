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

/* What an attribute must be. */
enum sk {
	SK_U8 = 1,
	SK_U16,
	SK_U32,
	SK_U64,
	SK_STR,	    /* NUL-terminated, at least the NUL */
	SK_BIN,	    /* any bytes (libnftnl copies exactly the payload length) */
	SK_NEST,    /* nested attributes of the schema `nest` */
	SK_LIST,    /* nested NFTA_LIST_ELEMs, each nested attributes of `nest` */
	SK_DATA,    /* struct nft_data: NFTA_DATA_VALUE or NFTA_DATA_VERDICT */
	SK_EXPR,    /* one expression: NFTA_EXPR_NAME and NFTA_EXPR_DATA */
	SK_EXPRS,   /* nested NFTA_LIST_ELEMs, each one expression */
	SK_DEVS,    /* nested NFTA_DEVICE_NAME strings only (libnftnl fails on others) */
	SK_VERDICT, /* nested `nest` with a code, and a chain when it jumps */
};

struct sattr {
	uint16_t type;
	uint8_t kind;
	const struct sschema *nest;
};

struct sschema {
	const struct sattr *a;
	size_t n;
	bool strict; /* an attribute type not listed is refused, not skipped */
};

#define SCHEMA_(name, strict, ...)                                                                 \
	static const struct sattr name##_a[] = {__VA_ARGS__};                                      \
	static const struct sschema name = {name##_a, sizeof(name##_a) / sizeof(name##_a[0]),      \
					    strict}
#define SCHEMA(name, ...)	 SCHEMA_(name, false, __VA_ARGS__)
#define SCHEMA_STRICT(name, ...) SCHEMA_(name, true, __VA_ARGS__)

/* Deepest nesting of expressions: a rule's expression may hold expressions
 * (dynset), those none (the kernel refuses more). */
#define EXPR_DEPTH_MAX 2
/* The kernel concatenates at most NFT_REG32_COUNT fields; libnftnl keeps
 * them in an array of that size. */
#define CONCAT_FIELDS_MAX 16

/* ---- the schemas ---------------------------------------------------------- */

SCHEMA(s_verdict, {NFTA_VERDICT_CODE, SK_U32, NULL}, {NFTA_VERDICT_CHAIN, SK_STR, NULL},
       {NFTA_VERDICT_CHAIN_ID, SK_U32, NULL});
SCHEMA(s_data, {NFTA_DATA_VALUE, SK_BIN, NULL}, {NFTA_DATA_VERDICT, SK_VERDICT, &s_verdict});

SCHEMA(s_table, {NFTA_TABLE_NAME, SK_STR, NULL}, {NFTA_TABLE_FLAGS, SK_U32, NULL},
       {NFTA_TABLE_USE, SK_U32, NULL}, {NFTA_TABLE_HANDLE, SK_U64, NULL},
       {NFTA_TABLE_USERDATA, SK_BIN, NULL}, {NFTA_TABLE_OWNER, SK_U32, NULL});

SCHEMA(s_hook, {NFTA_HOOK_HOOKNUM, SK_U32, NULL}, {NFTA_HOOK_PRIORITY, SK_U32, NULL},
       {NFTA_HOOK_DEV, SK_STR, NULL}, {NFTA_HOOK_DEVS, SK_DEVS, NULL});
SCHEMA(s_counters, {NFTA_COUNTER_BYTES, SK_U64, NULL}, {NFTA_COUNTER_PACKETS, SK_U64, NULL});
SCHEMA(s_chain, {NFTA_CHAIN_TABLE, SK_STR, NULL}, {NFTA_CHAIN_HANDLE, SK_U64, NULL},
       {NFTA_CHAIN_NAME, SK_STR, NULL}, {NFTA_CHAIN_HOOK, SK_NEST, &s_hook},
       {NFTA_CHAIN_POLICY, SK_U32, NULL}, {NFTA_CHAIN_USE, SK_U32, NULL},
       {NFTA_CHAIN_TYPE, SK_STR, NULL}, {NFTA_CHAIN_COUNTERS, SK_NEST, &s_counters},
       {NFTA_CHAIN_FLAGS, SK_U32, NULL}, {NFTA_CHAIN_ID, SK_U32, NULL},
       {NFTA_CHAIN_USERDATA, SK_BIN, NULL});

SCHEMA(s_compat, {NFTA_RULE_COMPAT_PROTO, SK_U32, NULL}, {NFTA_RULE_COMPAT_FLAGS, SK_U32, NULL});
SCHEMA(s_rule, {NFTA_RULE_TABLE, SK_STR, NULL}, {NFTA_RULE_CHAIN, SK_STR, NULL},
       {NFTA_RULE_HANDLE, SK_U64, NULL}, {NFTA_RULE_EXPRESSIONS, SK_EXPRS, NULL},
       {NFTA_RULE_COMPAT, SK_NEST, &s_compat}, {NFTA_RULE_POSITION, SK_U64, NULL},
       {NFTA_RULE_USERDATA, SK_BIN, NULL}, {NFTA_RULE_ID, SK_U32, NULL},
       {NFTA_RULE_POSITION_ID, SK_U32, NULL}, {NFTA_RULE_CHAIN_ID, SK_U32, NULL});

SCHEMA(s_field, {NFTA_SET_FIELD_LEN, SK_U32, NULL});
SCHEMA(s_desc, {NFTA_SET_DESC_SIZE, SK_U32, NULL}, {NFTA_SET_DESC_CONCAT, SK_LIST, &s_field});
SCHEMA(s_set, {NFTA_SET_TABLE, SK_STR, NULL}, {NFTA_SET_NAME, SK_STR, NULL},
       {NFTA_SET_FLAGS, SK_U32, NULL}, {NFTA_SET_KEY_TYPE, SK_U32, NULL},
       {NFTA_SET_KEY_LEN, SK_U32, NULL}, {NFTA_SET_DATA_TYPE, SK_U32, NULL},
       {NFTA_SET_DATA_LEN, SK_U32, NULL}, {NFTA_SET_POLICY, SK_U32, NULL},
       {NFTA_SET_DESC, SK_NEST, &s_desc}, {NFTA_SET_ID, SK_U32, NULL},
       {NFTA_SET_TIMEOUT, SK_U64, NULL}, {NFTA_SET_GC_INTERVAL, SK_U32, NULL},
       {NFTA_SET_USERDATA, SK_BIN, NULL}, {NFTA_SET_OBJ_TYPE, SK_U32, NULL},
       {NFTA_SET_HANDLE, SK_U64, NULL}, {NFTA_SET_EXPR, SK_EXPR, NULL},
       {NFTA_SET_EXPRESSIONS, SK_EXPRS, NULL});

/* Strict: libnftnl 1.2.4 lets through element attribute types up to
 * NFTA_SET_MAX into an array sized for NFTA_SET_ELEM_MAX (a stack overflow). */
SCHEMA_STRICT(s_elem, {NFTA_SET_ELEM_KEY, SK_DATA, NULL}, {NFTA_SET_ELEM_DATA, SK_DATA, NULL},
	      {NFTA_SET_ELEM_FLAGS, SK_U32, NULL}, {NFTA_SET_ELEM_TIMEOUT, SK_U64, NULL},
	      {NFTA_SET_ELEM_EXPIRATION, SK_U64, NULL}, {NFTA_SET_ELEM_USERDATA, SK_BIN, NULL},
	      {NFTA_SET_ELEM_EXPR, SK_EXPR, NULL}, {NFTA_SET_ELEM_OBJREF, SK_STR, NULL},
	      {NFTA_SET_ELEM_KEY_END, SK_DATA, NULL}, {NFTA_SET_ELEM_EXPRESSIONS, SK_EXPRS, NULL},
	      {NFTA_SET_ELEM_PAD, SK_BIN, NULL});
SCHEMA(s_elems, {NFTA_SET_ELEM_LIST_TABLE, SK_STR, NULL}, {NFTA_SET_ELEM_LIST_SET, SK_STR, NULL},
       {NFTA_SET_ELEM_LIST_ELEMENTS, SK_LIST, &s_elem}, {NFTA_SET_ELEM_LIST_SET_ID, SK_U32, NULL});

SCHEMA(s_obj, {NFTA_OBJ_TABLE, SK_STR, NULL}, {NFTA_OBJ_NAME, SK_STR, NULL},
       {NFTA_OBJ_TYPE, SK_U32, NULL}, {NFTA_OBJ_USE, SK_U32, NULL}, {NFTA_OBJ_HANDLE, SK_U64, NULL},
       {NFTA_OBJ_USERDATA, SK_BIN, NULL});

/* Expression data, one schema per expression libnftnl knows. */
SCHEMA(x_bitwise, {NFTA_BITWISE_SREG, SK_U32, NULL}, {NFTA_BITWISE_DREG, SK_U32, NULL},
       {NFTA_BITWISE_LEN, SK_U32, NULL}, {NFTA_BITWISE_MASK, SK_DATA, NULL},
       {NFTA_BITWISE_XOR, SK_DATA, NULL}, {NFTA_BITWISE_OP, SK_U32, NULL},
       {NFTA_BITWISE_DATA, SK_DATA, NULL});
SCHEMA(x_byteorder, {NFTA_BYTEORDER_SREG, SK_U32, NULL}, {NFTA_BYTEORDER_DREG, SK_U32, NULL},
       {NFTA_BYTEORDER_OP, SK_U32, NULL}, {NFTA_BYTEORDER_LEN, SK_U32, NULL},
       {NFTA_BYTEORDER_SIZE, SK_U32, NULL});
SCHEMA(x_cmp, {NFTA_CMP_SREG, SK_U32, NULL}, {NFTA_CMP_OP, SK_U32, NULL},
       {NFTA_CMP_DATA, SK_DATA, NULL});
SCHEMA(x_connlimit, {NFTA_CONNLIMIT_COUNT, SK_U32, NULL}, {NFTA_CONNLIMIT_FLAGS, SK_U32, NULL});
SCHEMA(x_counter, {NFTA_COUNTER_BYTES, SK_U64, NULL}, {NFTA_COUNTER_PACKETS, SK_U64, NULL});
SCHEMA(x_ct, {NFTA_CT_DREG, SK_U32, NULL}, {NFTA_CT_KEY, SK_U32, NULL},
       {NFTA_CT_DIRECTION, SK_U8, NULL}, {NFTA_CT_SREG, SK_U32, NULL});
SCHEMA(x_dup, {NFTA_DUP_SREG_ADDR, SK_U32, NULL}, {NFTA_DUP_SREG_DEV, SK_U32, NULL});
SCHEMA(x_dynset, {NFTA_DYNSET_SET_NAME, SK_STR, NULL}, {NFTA_DYNSET_SET_ID, SK_U32, NULL},
       {NFTA_DYNSET_OP, SK_U32, NULL}, {NFTA_DYNSET_SREG_KEY, SK_U32, NULL},
       {NFTA_DYNSET_SREG_DATA, SK_U32, NULL}, {NFTA_DYNSET_TIMEOUT, SK_U64, NULL},
       {NFTA_DYNSET_EXPR, SK_EXPR, NULL}, {NFTA_DYNSET_FLAGS, SK_U32, NULL},
       {NFTA_DYNSET_EXPRESSIONS, SK_EXPRS, NULL});
SCHEMA(x_exthdr, {NFTA_EXTHDR_DREG, SK_U32, NULL}, {NFTA_EXTHDR_TYPE, SK_U8, NULL},
       {NFTA_EXTHDR_OFFSET, SK_U32, NULL}, {NFTA_EXTHDR_LEN, SK_U32, NULL},
       {NFTA_EXTHDR_FLAGS, SK_U32, NULL}, {NFTA_EXTHDR_OP, SK_U32, NULL},
       {NFTA_EXTHDR_SREG, SK_U32, NULL});
SCHEMA(x_fib, {NFTA_FIB_DREG, SK_U32, NULL}, {NFTA_FIB_RESULT, SK_U32, NULL},
       {NFTA_FIB_FLAGS, SK_U32, NULL});
SCHEMA(x_flow, {NFTA_FLOW_TABLE_NAME, SK_STR, NULL});
SCHEMA(x_fwd, {NFTA_FWD_SREG_DEV, SK_U32, NULL}, {NFTA_FWD_SREG_ADDR, SK_U32, NULL},
       {NFTA_FWD_NFPROTO, SK_U32, NULL});
SCHEMA(x_hash, {NFTA_HASH_SREG, SK_U32, NULL}, {NFTA_HASH_DREG, SK_U32, NULL},
       {NFTA_HASH_LEN, SK_U32, NULL}, {NFTA_HASH_MODULUS, SK_U32, NULL},
       {NFTA_HASH_SEED, SK_U32, NULL}, {NFTA_HASH_OFFSET, SK_U32, NULL},
       {NFTA_HASH_TYPE, SK_U32, NULL}, {NFTA_HASH_SET_NAME, SK_STR, NULL},
       {NFTA_HASH_SET_ID, SK_U32, NULL});
SCHEMA(x_immediate, {NFTA_IMMEDIATE_DREG, SK_U32, NULL}, {NFTA_IMMEDIATE_DATA, SK_DATA, NULL});
SCHEMA(x_last, {NFTA_LAST_SET, SK_U32, NULL}, {NFTA_LAST_MSECS, SK_U64, NULL});
SCHEMA(x_limit, {NFTA_LIMIT_RATE, SK_U64, NULL}, {NFTA_LIMIT_UNIT, SK_U64, NULL},
       {NFTA_LIMIT_BURST, SK_U32, NULL}, {NFTA_LIMIT_TYPE, SK_U32, NULL},
       {NFTA_LIMIT_FLAGS, SK_U32, NULL});
SCHEMA(x_log, {NFTA_LOG_GROUP, SK_U16, NULL}, {NFTA_LOG_PREFIX, SK_STR, NULL},
       {NFTA_LOG_SNAPLEN, SK_U32, NULL}, {NFTA_LOG_QTHRESHOLD, SK_U16, NULL},
       {NFTA_LOG_LEVEL, SK_U32, NULL}, {NFTA_LOG_FLAGS, SK_U32, NULL});
SCHEMA(x_lookup, {NFTA_LOOKUP_SET, SK_STR, NULL}, {NFTA_LOOKUP_SREG, SK_U32, NULL},
       {NFTA_LOOKUP_DREG, SK_U32, NULL}, {NFTA_LOOKUP_SET_ID, SK_U32, NULL},
       {NFTA_LOOKUP_FLAGS, SK_U32, NULL});
SCHEMA(x_masq, {NFTA_MASQ_FLAGS, SK_U32, NULL}, {NFTA_MASQ_REG_PROTO_MIN, SK_U32, NULL},
       {NFTA_MASQ_REG_PROTO_MAX, SK_U32, NULL});
SCHEMA(x_match, {NFTA_MATCH_NAME, SK_STR, NULL}, {NFTA_MATCH_REV, SK_U32, NULL},
       {NFTA_MATCH_INFO, SK_BIN, NULL});
SCHEMA(x_meta, {NFTA_META_DREG, SK_U32, NULL}, {NFTA_META_KEY, SK_U32, NULL},
       {NFTA_META_SREG, SK_U32, NULL});
SCHEMA(x_nat, {NFTA_NAT_TYPE, SK_U32, NULL}, {NFTA_NAT_FAMILY, SK_U32, NULL},
       {NFTA_NAT_REG_ADDR_MIN, SK_U32, NULL}, {NFTA_NAT_REG_ADDR_MAX, SK_U32, NULL},
       {NFTA_NAT_REG_PROTO_MIN, SK_U32, NULL}, {NFTA_NAT_REG_PROTO_MAX, SK_U32, NULL},
       {NFTA_NAT_FLAGS, SK_U32, NULL});
SCHEMA(x_none, {0, 0, NULL});
SCHEMA(x_numgen, {NFTA_NG_DREG, SK_U32, NULL}, {NFTA_NG_MODULUS, SK_U32, NULL},
       {NFTA_NG_TYPE, SK_U32, NULL}, {NFTA_NG_OFFSET, SK_U32, NULL},
       {NFTA_NG_SET_NAME, SK_STR, NULL}, {NFTA_NG_SET_ID, SK_U32, NULL});
SCHEMA(x_objref, {NFTA_OBJREF_IMM_TYPE, SK_U32, NULL}, {NFTA_OBJREF_IMM_NAME, SK_STR, NULL},
       {NFTA_OBJREF_SET_SREG, SK_U32, NULL}, {NFTA_OBJREF_SET_NAME, SK_STR, NULL},
       {NFTA_OBJREF_SET_ID, SK_U32, NULL});
SCHEMA(x_osf, {NFTA_OSF_DREG, SK_U32, NULL}, {NFTA_OSF_TTL, SK_U8, NULL},
       {NFTA_OSF_FLAGS, SK_U32, NULL});
SCHEMA(x_payload, {NFTA_PAYLOAD_DREG, SK_U32, NULL}, {NFTA_PAYLOAD_BASE, SK_U32, NULL},
       {NFTA_PAYLOAD_OFFSET, SK_U32, NULL}, {NFTA_PAYLOAD_LEN, SK_U32, NULL},
       {NFTA_PAYLOAD_SREG, SK_U32, NULL}, {NFTA_PAYLOAD_CSUM_TYPE, SK_U32, NULL},
       {NFTA_PAYLOAD_CSUM_OFFSET, SK_U32, NULL}, {NFTA_PAYLOAD_CSUM_FLAGS, SK_U32, NULL});
SCHEMA(x_queue, {NFTA_QUEUE_NUM, SK_U16, NULL}, {NFTA_QUEUE_TOTAL, SK_U16, NULL},
       {NFTA_QUEUE_FLAGS, SK_U16, NULL}, {NFTA_QUEUE_SREG_QNUM, SK_U32, NULL});
SCHEMA(x_quota, {NFTA_QUOTA_BYTES, SK_U64, NULL}, {NFTA_QUOTA_FLAGS, SK_U32, NULL},
       {NFTA_QUOTA_CONSUMED, SK_U64, NULL});
SCHEMA(x_range, {NFTA_RANGE_SREG, SK_U32, NULL}, {NFTA_RANGE_OP, SK_U32, NULL},
       {NFTA_RANGE_FROM_DATA, SK_DATA, NULL}, {NFTA_RANGE_TO_DATA, SK_DATA, NULL});
SCHEMA(x_redir, {NFTA_REDIR_REG_PROTO_MIN, SK_U32, NULL}, {NFTA_REDIR_REG_PROTO_MAX, SK_U32, NULL},
       {NFTA_REDIR_FLAGS, SK_U32, NULL});
SCHEMA(x_reject, {NFTA_REJECT_TYPE, SK_U32, NULL}, {NFTA_REJECT_ICMP_CODE, SK_U8, NULL});
SCHEMA(x_rt, {NFTA_RT_DREG, SK_U32, NULL}, {NFTA_RT_KEY, SK_U32, NULL});
SCHEMA(x_socket, {NFTA_SOCKET_KEY, SK_U32, NULL}, {NFTA_SOCKET_DREG, SK_U32, NULL},
       {NFTA_SOCKET_LEVEL, SK_U32, NULL});
SCHEMA(x_synproxy, {NFTA_SYNPROXY_MSS, SK_U16, NULL}, {NFTA_SYNPROXY_WSCALE, SK_U8, NULL},
       {NFTA_SYNPROXY_FLAGS, SK_U32, NULL});
SCHEMA(x_target, {NFTA_TARGET_NAME, SK_STR, NULL}, {NFTA_TARGET_REV, SK_U32, NULL},
       {NFTA_TARGET_INFO, SK_BIN, NULL});
SCHEMA(x_tproxy, {NFTA_TPROXY_FAMILY, SK_U32, NULL}, {NFTA_TPROXY_REG_ADDR, SK_U32, NULL},
       {NFTA_TPROXY_REG_PORT, SK_U32, NULL});
SCHEMA(x_tunnel, {NFTA_TUNNEL_KEY, SK_U32, NULL}, {NFTA_TUNNEL_DREG, SK_U32, NULL},
       {NFTA_TUNNEL_MODE, SK_U32, NULL});
SCHEMA(x_xfrm, {NFTA_XFRM_DREG, SK_U32, NULL}, {NFTA_XFRM_KEY, SK_U32, NULL},
       {NFTA_XFRM_DIR, SK_U8, NULL}, {NFTA_XFRM_SPNUM, SK_U32, NULL});

/* Sorted by name (bsearch). An expression not here is not handed to
 * libnftnl: its rule is reported as not understood (unproven). */
static const struct {
	const char *name;
	const struct sschema *data;
} exprs[] = {
    {"bitwise", &x_bitwise},
    {"byteorder", &x_byteorder},
    {"cmp", &x_cmp},
    {"connlimit", &x_connlimit},
    {"counter", &x_counter},
    {"ct", &x_ct},
    {"dup", &x_dup},
    {"dynset", &x_dynset},
    {"exthdr", &x_exthdr},
    {"fib", &x_fib},
    {"flow_offload", &x_flow},
    {"fwd", &x_fwd},
    {"hash", &x_hash},
    {"immediate", &x_immediate},
    {"last", &x_last},
    {"limit", &x_limit},
    {"log", &x_log},
    {"lookup", &x_lookup},
    {"masq", &x_masq},
    {"match", &x_match},
    {"meta", &x_meta},
    {"nat", &x_nat},
    {"notrack", &x_none},
    {"numgen", &x_numgen},
    {"objref", &x_objref},
    {"osf", &x_osf},
    {"payload", &x_payload},
    {"queue", &x_queue},
    {"quota", &x_quota},
    {"range", &x_range},
    {"redir", &x_redir},
    {"reject", &x_reject},
    {"rt", &x_rt},
    {"socket", &x_socket},
    {"synproxy", &x_synproxy},
    {"target", &x_target},
    {"tproxy", &x_tproxy},
    {"tunnel", &x_tunnel},
    {"xfrm", &x_xfrm},
};

static const struct sschema *expr_schema(const char *name)
{
	size_t lo = 0, hi = sizeof(exprs) / sizeof(exprs[0]);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(name, exprs[mid].name);

		if (c == 0)
			return exprs[mid].data;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* ---- the walk ------------------------------------------------------------- */

static int walk(const void *p, size_t len, const struct sschema *s, int depth);
static int check_attr(const struct nlattr *a, enum sk kind, const struct sschema *nest, int depth);

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

static int walk_nested(const struct nlattr *a, const struct sschema *s, int depth)
{
	return walk(mnl_attr_get_payload(a), mnl_attr_get_payload_len(a), s, depth);
}

static int check_expr(const struct nlattr *a, int depth)
{
	const struct nlattr *x, *name = NULL, *data = NULL;
	const struct sschema *ds;
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
	ds = expr_schema(mnl_attr_get_str(name));
	if (!ds)
		return CK_SCREEN_UNKNOWN;
	return data ? walk_nested(data, ds, depth) : 0;
}

/* Nested NFTA_LIST_ELEMs (at most max; 0: no limit), each checked as kind. */
static int check_list(const struct nlattr *a, enum sk kind, const struct sschema *nest, int depth,
		      size_t max)
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

static int check_attr(const struct nlattr *a, enum sk kind, const struct sschema *nest, int depth)
{
	static const enum mnl_attr_data_type mt[] = {
	    [SK_U8] = MNL_TYPE_U8,   [SK_U16] = MNL_TYPE_U16,	     [SK_U32] = MNL_TYPE_U32,
	    [SK_U64] = MNL_TYPE_U64, [SK_STR] = MNL_TYPE_NUL_STRING, [SK_BIN] = MNL_TYPE_BINARY,
	};

	switch (kind) {
	case SK_U8:
	case SK_U16:
	case SK_U32:
	case SK_U64:
	case SK_STR:
	case SK_BIN:
		return mnl_attr_validate(a, mt[kind]) < 0 ? CK_SCREEN_BAD : 0;
	case SK_NEST:
		if (mnl_attr_validate(a, MNL_TYPE_NESTED) < 0)
			return CK_SCREEN_BAD;
		return walk_nested(a, nest, depth);
	case SK_LIST:
		return check_list(a, SK_NEST, nest, depth,
				  nest == &s_field ? CONCAT_FIELDS_MAX : 0);
	case SK_DATA:
		return check_data(a, depth);
	case SK_EXPR:
		return check_expr(a, depth + 1);
	case SK_EXPRS:
		return check_list(a, SK_EXPR, NULL, depth, 0);
	case SK_DEVS:
		return check_devs(a);
	case SK_VERDICT:
		return check_verdict(a, depth);
	}
	return CK_SCREEN_BAD;
}

/* Attributes a schema does not name are skipped, as libnftnl skips them
 * (types newer than it knows). The worst result wins: BAD over UNKNOWN. */
static int walk(const void *p, size_t len, const struct sschema *s, int depth)
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
			rc = check_attr(a, (enum sk)s->a[i].kind, s->a[i].nest, depth);
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
	const struct sschema *s;
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
