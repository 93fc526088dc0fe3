/* checker: the vocabulary, one table of every nftables expression, xt
 * target and xt match the checker knows: its netlink schema (what the
 * screen admits), whether it is a condition, which register it may write
 * and which fields of the packet or its conntrack entry. The screen
 * (nft_screen.c), the path walk (rule_eval.c) and pass-restricted (pass.c)
 * all read it, so that they cannot disagree on what an expression does; a
 * name not here is unproven. tests/unit/check_checker_vocab.c checks that
 * every expression libnftnl knows is here. docs/checker.md, "Vocabulary". */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <libnftnl/expr.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_tables_compat.h>

#include "checker/checker_int.h"

/* ---- expression data, one schema per expression libnftnl knows ----------- */

CK_SCHEMA(x_bitwise, {NFTA_BITWISE_SREG, CK_SK_U32, NULL}, {NFTA_BITWISE_DREG, CK_SK_U32, NULL},
	  {NFTA_BITWISE_LEN, CK_SK_U32, NULL}, {NFTA_BITWISE_MASK, CK_SK_DATA, NULL},
	  {NFTA_BITWISE_XOR, CK_SK_DATA, NULL}, {NFTA_BITWISE_OP, CK_SK_U32, NULL},
	  {NFTA_BITWISE_DATA, CK_SK_DATA, NULL});
CK_SCHEMA(x_byteorder, {NFTA_BYTEORDER_SREG, CK_SK_U32, NULL},
	  {NFTA_BYTEORDER_DREG, CK_SK_U32, NULL}, {NFTA_BYTEORDER_OP, CK_SK_U32, NULL},
	  {NFTA_BYTEORDER_LEN, CK_SK_U32, NULL}, {NFTA_BYTEORDER_SIZE, CK_SK_U32, NULL});
CK_SCHEMA(x_cmp, {NFTA_CMP_SREG, CK_SK_U32, NULL}, {NFTA_CMP_OP, CK_SK_U32, NULL},
	  {NFTA_CMP_DATA, CK_SK_DATA, NULL});
CK_SCHEMA(x_connlimit, {NFTA_CONNLIMIT_COUNT, CK_SK_U32, NULL},
	  {NFTA_CONNLIMIT_FLAGS, CK_SK_U32, NULL});
CK_SCHEMA(x_counter, {NFTA_COUNTER_BYTES, CK_SK_U64, NULL},
	  {NFTA_COUNTER_PACKETS, CK_SK_U64, NULL});
CK_SCHEMA(x_ct, {NFTA_CT_DREG, CK_SK_U32, NULL}, {NFTA_CT_KEY, CK_SK_U32, NULL},
	  {NFTA_CT_DIRECTION, CK_SK_U8, NULL}, {NFTA_CT_SREG, CK_SK_U32, NULL});
CK_SCHEMA(x_dup, {NFTA_DUP_SREG_ADDR, CK_SK_U32, NULL}, {NFTA_DUP_SREG_DEV, CK_SK_U32, NULL});
CK_SCHEMA(x_dynset, {NFTA_DYNSET_SET_NAME, CK_SK_STR, NULL}, {NFTA_DYNSET_SET_ID, CK_SK_U32, NULL},
	  {NFTA_DYNSET_OP, CK_SK_U32, NULL}, {NFTA_DYNSET_SREG_KEY, CK_SK_U32, NULL},
	  {NFTA_DYNSET_SREG_DATA, CK_SK_U32, NULL}, {NFTA_DYNSET_TIMEOUT, CK_SK_U64, NULL},
	  {NFTA_DYNSET_EXPR, CK_SK_EXPR, NULL}, {NFTA_DYNSET_FLAGS, CK_SK_U32, NULL},
	  {NFTA_DYNSET_EXPRESSIONS, CK_SK_EXPRS, NULL});
CK_SCHEMA(x_exthdr, {NFTA_EXTHDR_DREG, CK_SK_U32, NULL}, {NFTA_EXTHDR_TYPE, CK_SK_U8, NULL},
	  {NFTA_EXTHDR_OFFSET, CK_SK_U32, NULL}, {NFTA_EXTHDR_LEN, CK_SK_U32, NULL},
	  {NFTA_EXTHDR_FLAGS, CK_SK_U32, NULL}, {NFTA_EXTHDR_OP, CK_SK_U32, NULL},
	  {NFTA_EXTHDR_SREG, CK_SK_U32, NULL});
CK_SCHEMA(x_fib, {NFTA_FIB_DREG, CK_SK_U32, NULL}, {NFTA_FIB_RESULT, CK_SK_U32, NULL},
	  {NFTA_FIB_FLAGS, CK_SK_U32, NULL});
CK_SCHEMA(x_flow, {NFTA_FLOW_TABLE_NAME, CK_SK_STR, NULL});
CK_SCHEMA(x_fwd, {NFTA_FWD_SREG_DEV, CK_SK_U32, NULL}, {NFTA_FWD_SREG_ADDR, CK_SK_U32, NULL},
	  {NFTA_FWD_NFPROTO, CK_SK_U32, NULL});
CK_SCHEMA(x_hash, {NFTA_HASH_SREG, CK_SK_U32, NULL}, {NFTA_HASH_DREG, CK_SK_U32, NULL},
	  {NFTA_HASH_LEN, CK_SK_U32, NULL}, {NFTA_HASH_MODULUS, CK_SK_U32, NULL},
	  {NFTA_HASH_SEED, CK_SK_U32, NULL}, {NFTA_HASH_OFFSET, CK_SK_U32, NULL},
	  {NFTA_HASH_TYPE, CK_SK_U32, NULL}, {NFTA_HASH_SET_NAME, CK_SK_STR, NULL},
	  {NFTA_HASH_SET_ID, CK_SK_U32, NULL});
CK_SCHEMA(x_immediate, {NFTA_IMMEDIATE_DREG, CK_SK_U32, NULL},
	  {NFTA_IMMEDIATE_DATA, CK_SK_DATA, NULL});
CK_SCHEMA(x_last, {NFTA_LAST_SET, CK_SK_U32, NULL}, {NFTA_LAST_MSECS, CK_SK_U64, NULL});
CK_SCHEMA(x_limit, {NFTA_LIMIT_RATE, CK_SK_U64, NULL}, {NFTA_LIMIT_UNIT, CK_SK_U64, NULL},
	  {NFTA_LIMIT_BURST, CK_SK_U32, NULL}, {NFTA_LIMIT_TYPE, CK_SK_U32, NULL},
	  {NFTA_LIMIT_FLAGS, CK_SK_U32, NULL});
CK_SCHEMA(x_log, {NFTA_LOG_GROUP, CK_SK_U16, NULL}, {NFTA_LOG_PREFIX, CK_SK_STR, NULL},
	  {NFTA_LOG_SNAPLEN, CK_SK_U32, NULL}, {NFTA_LOG_QTHRESHOLD, CK_SK_U16, NULL},
	  {NFTA_LOG_LEVEL, CK_SK_U32, NULL}, {NFTA_LOG_FLAGS, CK_SK_U32, NULL});
CK_SCHEMA(x_lookup, {NFTA_LOOKUP_SET, CK_SK_STR, NULL}, {NFTA_LOOKUP_SREG, CK_SK_U32, NULL},
	  {NFTA_LOOKUP_DREG, CK_SK_U32, NULL}, {NFTA_LOOKUP_SET_ID, CK_SK_U32, NULL},
	  {NFTA_LOOKUP_FLAGS, CK_SK_U32, NULL});
CK_SCHEMA(x_masq, {NFTA_MASQ_FLAGS, CK_SK_U32, NULL}, {NFTA_MASQ_REG_PROTO_MIN, CK_SK_U32, NULL},
	  {NFTA_MASQ_REG_PROTO_MAX, CK_SK_U32, NULL});
CK_SCHEMA(x_match, {NFTA_MATCH_NAME, CK_SK_STR, NULL}, {NFTA_MATCH_REV, CK_SK_U32, NULL},
	  {NFTA_MATCH_INFO, CK_SK_BIN, NULL});
CK_SCHEMA(x_meta, {NFTA_META_DREG, CK_SK_U32, NULL}, {NFTA_META_KEY, CK_SK_U32, NULL},
	  {NFTA_META_SREG, CK_SK_U32, NULL});
CK_SCHEMA(x_nat, {NFTA_NAT_TYPE, CK_SK_U32, NULL}, {NFTA_NAT_FAMILY, CK_SK_U32, NULL},
	  {NFTA_NAT_REG_ADDR_MIN, CK_SK_U32, NULL}, {NFTA_NAT_REG_ADDR_MAX, CK_SK_U32, NULL},
	  {NFTA_NAT_REG_PROTO_MIN, CK_SK_U32, NULL}, {NFTA_NAT_REG_PROTO_MAX, CK_SK_U32, NULL},
	  {NFTA_NAT_FLAGS, CK_SK_U32, NULL});
CK_SCHEMA(x_none, {0, 0, NULL});
CK_SCHEMA(x_numgen, {NFTA_NG_DREG, CK_SK_U32, NULL}, {NFTA_NG_MODULUS, CK_SK_U32, NULL},
	  {NFTA_NG_TYPE, CK_SK_U32, NULL}, {NFTA_NG_OFFSET, CK_SK_U32, NULL},
	  {NFTA_NG_SET_NAME, CK_SK_STR, NULL}, {NFTA_NG_SET_ID, CK_SK_U32, NULL});
CK_SCHEMA(x_objref, {NFTA_OBJREF_IMM_TYPE, CK_SK_U32, NULL},
	  {NFTA_OBJREF_IMM_NAME, CK_SK_STR, NULL}, {NFTA_OBJREF_SET_SREG, CK_SK_U32, NULL},
	  {NFTA_OBJREF_SET_NAME, CK_SK_STR, NULL}, {NFTA_OBJREF_SET_ID, CK_SK_U32, NULL});
CK_SCHEMA(x_osf, {NFTA_OSF_DREG, CK_SK_U32, NULL}, {NFTA_OSF_TTL, CK_SK_U8, NULL},
	  {NFTA_OSF_FLAGS, CK_SK_U32, NULL});
CK_SCHEMA(x_payload, {NFTA_PAYLOAD_DREG, CK_SK_U32, NULL}, {NFTA_PAYLOAD_BASE, CK_SK_U32, NULL},
	  {NFTA_PAYLOAD_OFFSET, CK_SK_U32, NULL}, {NFTA_PAYLOAD_LEN, CK_SK_U32, NULL},
	  {NFTA_PAYLOAD_SREG, CK_SK_U32, NULL}, {NFTA_PAYLOAD_CSUM_TYPE, CK_SK_U32, NULL},
	  {NFTA_PAYLOAD_CSUM_OFFSET, CK_SK_U32, NULL}, {NFTA_PAYLOAD_CSUM_FLAGS, CK_SK_U32, NULL});
CK_SCHEMA(x_queue, {NFTA_QUEUE_NUM, CK_SK_U16, NULL}, {NFTA_QUEUE_TOTAL, CK_SK_U16, NULL},
	  {NFTA_QUEUE_FLAGS, CK_SK_U16, NULL}, {NFTA_QUEUE_SREG_QNUM, CK_SK_U32, NULL});
CK_SCHEMA(x_quota, {NFTA_QUOTA_BYTES, CK_SK_U64, NULL}, {NFTA_QUOTA_FLAGS, CK_SK_U32, NULL},
	  {NFTA_QUOTA_CONSUMED, CK_SK_U64, NULL});
CK_SCHEMA(x_range, {NFTA_RANGE_SREG, CK_SK_U32, NULL}, {NFTA_RANGE_OP, CK_SK_U32, NULL},
	  {NFTA_RANGE_FROM_DATA, CK_SK_DATA, NULL}, {NFTA_RANGE_TO_DATA, CK_SK_DATA, NULL});
CK_SCHEMA(x_redir, {NFTA_REDIR_REG_PROTO_MIN, CK_SK_U32, NULL},
	  {NFTA_REDIR_REG_PROTO_MAX, CK_SK_U32, NULL}, {NFTA_REDIR_FLAGS, CK_SK_U32, NULL});
CK_SCHEMA(x_reject, {NFTA_REJECT_TYPE, CK_SK_U32, NULL}, {NFTA_REJECT_ICMP_CODE, CK_SK_U8, NULL});
CK_SCHEMA(x_rt, {NFTA_RT_DREG, CK_SK_U32, NULL}, {NFTA_RT_KEY, CK_SK_U32, NULL});
CK_SCHEMA(x_socket, {NFTA_SOCKET_KEY, CK_SK_U32, NULL}, {NFTA_SOCKET_DREG, CK_SK_U32, NULL},
	  {NFTA_SOCKET_LEVEL, CK_SK_U32, NULL});
CK_SCHEMA(x_synproxy, {NFTA_SYNPROXY_MSS, CK_SK_U16, NULL}, {NFTA_SYNPROXY_WSCALE, CK_SK_U8, NULL},
	  {NFTA_SYNPROXY_FLAGS, CK_SK_U32, NULL});
CK_SCHEMA(x_target, {NFTA_TARGET_NAME, CK_SK_STR, NULL}, {NFTA_TARGET_REV, CK_SK_U32, NULL},
	  {NFTA_TARGET_INFO, CK_SK_BIN, NULL});
CK_SCHEMA(x_tproxy, {NFTA_TPROXY_FAMILY, CK_SK_U32, NULL}, {NFTA_TPROXY_REG_ADDR, CK_SK_U32, NULL},
	  {NFTA_TPROXY_REG_PORT, CK_SK_U32, NULL});
CK_SCHEMA(x_tunnel, {NFTA_TUNNEL_KEY, CK_SK_U32, NULL}, {NFTA_TUNNEL_DREG, CK_SK_U32, NULL},
	  {NFTA_TUNNEL_MODE, CK_SK_U32, NULL});
CK_SCHEMA(x_xfrm, {NFTA_XFRM_DREG, CK_SK_U32, NULL}, {NFTA_XFRM_KEY, CK_SK_U32, NULL},
	  {NFTA_XFRM_DIR, CK_SK_U8, NULL}, {NFTA_XFRM_SPNUM, CK_SK_U32, NULL});

/* Each table sorted by name in byte order (bsearch; the unit test checks). */

static const struct ck_vocab exprs[] = {
    {"bitwise", CK_V_EXPR, CK_VM_OWN, false, NFTNL_EXPR_BITWISE_DREG, NFTNL_EXPR_BITWISE_LEN, 16, 0,
     &x_bitwise},
    {"byteorder", CK_V_EXPR, CK_VM_PURE, true, NFTNL_EXPR_BYTEORDER_DREG, NFTNL_EXPR_BYTEORDER_LEN,
     16, 0, &x_byteorder},
    {"cmp", CK_V_EXPR, CK_VM_OWN, true, 0, 0, 0, 0, &x_cmp},
    {"connlimit", CK_V_EXPR, CK_VM_PURE, true, 0, 0, 0, 0, &x_connlimit},
    {"counter", CK_V_EXPR, CK_VM_PURE, false, 0, 0, 0, 0, &x_counter},
    {"ct", CK_V_EXPR, CK_VM_OWN, true, NFTNL_EXPR_CT_DREG, 0, 16,
     CK_F_CTMARK | CK_F_CTLABEL | CK_F_SECMARK | CK_F_CT, &x_ct},
    {"dup", CK_V_EXPR, CK_VM_OWN, false, 0, 0, 0, CK_F_ROUTE, &x_dup},
    {"dynset", CK_V_EXPR, CK_VM_PURE, true, 0, 0, 0, CK_F_SET, &x_dynset},
    {"exthdr", CK_V_EXPR, CK_VM_PURE, true, NFTNL_EXPR_EXTHDR_DREG, NFTNL_EXPR_EXTHDR_LEN, 16,
     CK_F_HEADER, &x_exthdr},
    {"fib", CK_V_EXPR, CK_VM_PURE, true, NFTNL_EXPR_FIB_DREG, 0, 16, 0, &x_fib},
    {"flow_offload", CK_V_EXPR, CK_VM_NONE, false, 0, 0, 0, CK_F_ROUTE, &x_flow},
    {"fwd", CK_V_EXPR, CK_VM_OWN, false, 0, 0, 0, CK_F_ROUTE | CK_F_VERDICT, &x_fwd},
    {"hash", CK_V_EXPR, CK_VM_PURE, true, NFTNL_EXPR_HASH_DREG, 0, 4, 0, &x_hash},
    {"immediate", CK_V_EXPR, CK_VM_OWN, false, NFTNL_EXPR_IMM_DREG, 0, 16, CK_F_VERDICT,
     &x_immediate},
    {"last", CK_V_EXPR, CK_VM_PURE, false, 0, 0, 0, 0, &x_last},
    {"limit", CK_V_EXPR, CK_VM_PURE, true, 0, 0, 0, 0, &x_limit},
    {"log", CK_V_EXPR, CK_VM_PURE, false, 0, 0, 0, 0, &x_log},
    {"lookup", CK_V_EXPR, CK_VM_OWN, true, NFTNL_EXPR_LOOKUP_DREG, 0, 16, CK_F_VERDICT, &x_lookup},
    {"masq", CK_V_EXPR, CK_VM_OWN, false, 0, 0, 0, CK_F_DEST | CK_F_VERDICT, &x_masq},
    {"match", CK_V_EXPR, CK_VM_OWN, true, 0, 0, 0, 0, &x_match},
    {"meta", CK_V_EXPR, CK_VM_OWN, true, NFTNL_EXPR_META_DREG, 0, 16,
     CK_F_MARK | CK_F_PRIORITY | CK_F_NFTRACE | CK_F_PKTTYPE | CK_F_SECMARK | CK_F_ROUTE, &x_meta},
    {"nat", CK_V_EXPR, CK_VM_OWN, false, 0, 0, 0, CK_F_DEST | CK_F_VERDICT, &x_nat},
    {"notrack", CK_V_EXPR, CK_VM_PURE, false, 0, 0, 0, CK_F_CT, &x_none},
    {"numgen", CK_V_EXPR, CK_VM_PURE, true, NFTNL_EXPR_NG_DREG, 0, 4, 0, &x_numgen},
    {"objref", CK_V_EXPR, CK_VM_OWN, false, 0, 0, 0, CK_F_CT | CK_F_SECMARK, &x_objref},
    {"osf", CK_V_EXPR, CK_VM_NONE, true, NFTNL_EXPR_OSF_DREG, 0, 16, 0, &x_osf},
    {"payload", CK_V_EXPR, CK_VM_OWN, true, NFTNL_EXPR_PAYLOAD_DREG, NFTNL_EXPR_PAYLOAD_LEN, 16,
     CK_F_HEADER | CK_F_DEST, &x_payload},
    {"queue", CK_V_EXPR, CK_VM_OWN, false, 0, 0, 0, CK_F_VERDICT, &x_queue},
    {"quota", CK_V_EXPR, CK_VM_PURE, true, 0, 0, 0, 0, &x_quota},
    {"range", CK_V_EXPR, CK_VM_PURE, true, 0, 0, 0, 0, &x_range},
    {"redir", CK_V_EXPR, CK_VM_OWN, false, 0, 0, 0, CK_F_DEST | CK_F_VERDICT, &x_redir},
    {"reject", CK_V_EXPR, CK_VM_OWN, false, 0, 0, 0, CK_F_VERDICT, &x_reject},
    {"rt", CK_V_EXPR, CK_VM_PURE, true, NFTNL_EXPR_RT_DREG, 0, 16, 0, &x_rt},
    {"socket", CK_V_EXPR, CK_VM_PURE, true, NFTNL_EXPR_SOCKET_DREG, 0, 16, 0, &x_socket},
    {"synproxy", CK_V_EXPR, CK_VM_NONE, false, 0, 0, 0, CK_F_HEADER | CK_F_VERDICT, &x_synproxy},
    {"target", CK_V_EXPR, CK_VM_OWN, false, 0, 0, 0, 0, &x_target},
    {"tproxy", CK_V_EXPR, CK_VM_OWN, false, 0, 0, 0, CK_F_DEST, &x_tproxy},
    {"tunnel", CK_V_EXPR, CK_VM_PURE, true, NFTNL_EXPR_TUNNEL_DREG, 0, 4, 0, &x_tunnel},
    {"xfrm", CK_V_EXPR, CK_VM_PURE, true, NFTNL_EXPR_XFRM_DREG, 0, 16, 0, &x_xfrm},
};

static const struct ck_vocab targets[] = {
    {"AUDIT", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, 0, NULL},
    {"CHECKSUM", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_HEADER, NULL},
    {"CLASSIFY", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_PRIORITY, NULL},
    {"CONNMARK", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_MARK | CK_F_CTMARK, NULL},
    {"CONNSECMARK", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_SECMARK, NULL},
    {"CT", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_CT, NULL},
    {"DNAT", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_DEST | CK_F_VERDICT, NULL},
    {"DNPT", CK_V_TARGET, CK_VM_NONE, false, 0, 0, 0, CK_F_DEST, NULL},
    {"DSCP", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_HEADER, NULL},
    {"ECN", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_HEADER, NULL},
    {"ERROR", CK_V_TARGET, CK_VM_NONE, false, 0, 0, 0, CK_F_VERDICT, NULL},
    {"HL", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_HEADER, NULL},
    {"HMARK", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_MARK, NULL},
    {"IDLETIMER", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, 0, NULL},
    {"LED", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, 0, NULL},
    {"LOG", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, 0, NULL},
    {"MARK", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_MARK, NULL},
    {"MASQUERADE", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_DEST | CK_F_VERDICT, NULL},
    {"NETMAP", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_DEST | CK_F_VERDICT, NULL},
    {"NFLOG", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, 0, NULL},
    {"NFQUEUE", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_VERDICT, NULL},
    {"NOTRACK", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_CT, NULL},
    {"RATEEST", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, 0, NULL},
    {"REDIRECT", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_DEST | CK_F_VERDICT, NULL},
    {"REJECT", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_VERDICT, NULL},
    {"SECMARK", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_SECMARK, NULL},
    {"SET", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_SET | CK_F_MARK | CK_F_PRIORITY, NULL},
    {"SNAT", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_DEST | CK_F_VERDICT, NULL},
    {"SNPT", CK_V_TARGET, CK_VM_NONE, false, 0, 0, 0, CK_F_DEST, NULL},
    {"SYNPROXY", CK_V_TARGET, CK_VM_NONE, false, 0, 0, 0, CK_F_HEADER | CK_F_VERDICT, NULL},
    {"TCPMSS", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_HEADER, NULL},
    {"TCPOPTSTRIP", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_HEADER, NULL},
    {"TEE", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_ROUTE, NULL},
    {"TOS", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_HEADER, NULL},
    {"TPROXY", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_DEST | CK_F_MARK | CK_F_VERDICT, NULL},
    {"TRACE", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_NFTRACE, NULL},
    {"TTL", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, CK_F_HEADER, NULL},
    {"arpreply", CK_V_TARGET, CK_VM_NONE, false, 0, 0, 0, CK_F_VERDICT, NULL},
    {"dnat", CK_V_TARGET, CK_VM_NONE, false, 0, 0, 0, CK_F_DEST | CK_F_VERDICT, NULL},
    {"log", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, 0, NULL},
    {"mangle", CK_V_TARGET, CK_VM_NONE, false, 0, 0, 0, CK_F_HEADER | CK_F_DEST, NULL},
    {"mark", CK_V_TARGET, CK_VM_OWN, false, 0, 0, 0, CK_F_MARK, NULL},
    {"nflog", CK_V_TARGET, CK_VM_PURE, false, 0, 0, 0, 0, NULL},
    {"redirect", CK_V_TARGET, CK_VM_NONE, false, 0, 0, 0, CK_F_DEST | CK_F_VERDICT, NULL},
    {"snat", CK_V_TARGET, CK_VM_NONE, false, 0, 0, 0, CK_F_DEST | CK_F_VERDICT, NULL},
};

/* Every match is a condition; some keep state of their own. */
static const struct ck_vocab matches[] = {
    {"802_3", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"addrtype", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"ah", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"among", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"arp", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"bpf", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"cgroup", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"cluster", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"comment", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"connbytes", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"connlabel", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, CK_F_CTLABEL, NULL},
    {"connlimit", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"connmark", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"conntrack", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"cpu", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"dccp", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"devgroup", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"dscp", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"dst", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"ecn", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"esp", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"eui64", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"frag", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"hashlimit", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, CK_F_SET, NULL},
    {"hbh", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"helper", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"hl", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"icmp", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"icmp6", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"ip", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"ip6", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"ipcomp", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"iprange", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"ipv6header", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"ipvs", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"l2tp", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"length", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"limit", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"mac", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"mark", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"mark_m", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"mh", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"multiport", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"nfacct", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"osf", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"owner", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"physdev", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"pkttype", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"policy", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"quota", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"rateest", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"realm", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"recent", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, CK_F_SET, NULL},
    {"rpfilter", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"rt", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"sctp", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"set", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"socket", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"srh", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"state", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"statistic", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"stp", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"string", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"tcp", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"tcpmss", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"time", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"tos", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"ttl", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"u32", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"udp", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"udplite", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
    {"vlan", CK_V_MATCH, CK_VM_PURE, true, 0, 0, 0, 0, NULL},
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The three tables one after the other, for ck_vocab_table. */
static struct ck_vocab all[N(exprs) + N(targets) + N(matches)];

const struct ck_vocab *ck_vocab_find(enum ck_vkind kind, const char *name)
{
	const struct ck_vocab *t = kind == CK_V_EXPR	 ? exprs
				   : kind == CK_V_TARGET ? targets
				   : kind == CK_V_MATCH	 ? matches
							 : NULL;
	size_t lo = 0, hi = kind == CK_V_EXPR	  ? N(exprs)
			    : kind == CK_V_TARGET ? N(targets)
			    : kind == CK_V_MATCH  ? N(matches)
						  : 0;

	if (!t || !name)
		return NULL;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(name, t[mid].name);

		if (c == 0)
			return &t[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const struct ck_vocab *ck_vocab_table(size_t *n)
{
	memcpy(all, exprs, sizeof(exprs));
	memcpy(all + N(exprs), targets, sizeof(targets));
	memcpy(all + N(exprs) + N(targets), matches, sizeof(matches));
	*n = N(all);
	return all;
}

bool ck_vocab_dreg(const struct ck_vocab *v, const struct nftnl_expr *x, uint32_t *reg,
		   uint32_t *len)
{
	uint32_t l;

	if (!v || !v->dreg || !nftnl_expr_is_set(x, v->dreg))
		return false;
	l = v->dlen && nftnl_expr_is_set(x, v->dlen) ? nftnl_expr_get_u32(x, v->dlen) : v->dbytes;
	/* a length the kernel would refuse is taken as the widest write */
	*len = l == 0 || l > NFT_REG32_COUNT * 4 ? 16 : l;
	*reg = nftnl_expr_get_u32(x, v->dreg);
	return true;
}
