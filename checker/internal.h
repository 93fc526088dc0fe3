/* checker internals shared by the checker's own files: the snapshot of the
 * kernel state (nftables, links, routes, tc, sysctls) and the path model.
 * Not an interface: other modules use checker/checker.h only. */
#ifndef PC_CHECKER_INTERNAL_H
#define PC_CHECKER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checker/checker.h"

struct nftnl_rule;

#define CK_NAMELEN 256 /* NFT_NAME_MAXLEN */
#define CK_KEYMAX  64  /* largest set key/data we keep */

/* ---- growable arrays ----------------------------------------------------- */

/* Make room for one more element in *arr (of n elements, capacity *cap).
 * Returns a pointer to the new zeroed element or NULL (no memory). */
void *ck_grow(void *arrp, size_t *n, size_t *cap, size_t elsize);

struct pc_config;
/* sha256 of the policy the engine enforces (its status); PC_EIO when no
 * engine answers. */
int ck_engine_policy_hash(const struct pc_config *cfg, char *out, size_t len);

/* mnl_nlmsg_ok, and a length that fits in what is left: libmnl compares
 * nlmsg_len as an int, so a huge length passes its check. */
#define ck_nlmsg_ok(nlh, n) (mnl_nlmsg_ok((nlh), (n)) && (nlh)->nlmsg_len <= (unsigned)(n))

/* Text (reports, canonical forms, JSON) is written with common/pc.h's
 * struct pc_buf and pc_json_*. */

/* ---- nftables ----------------------------------------------------------- */

struct nftnl_table;
struct nftnl_chain;
struct nftnl_set;

struct ck_table {
	struct nftnl_table *nt; /* owned: the parsed object (identity check) */
	uint32_t family;
	char name[CK_NAMELEN];
	uint32_t flags;
	uint64_t handle;
};

struct ck_elem {
	uint8_t key[CK_KEYMAX], kend[CK_KEYMAX], data[CK_KEYMAX];
	uint32_t klen, kelen, dlen;
	uint32_t flags;
	bool has_verdict;
	int32_t verdict;
	char chain[CK_NAMELEN];
};

struct ck_set {
	struct nftnl_set *ns; /* owned, with its elements */
	uint32_t family;
	char table[CK_NAMELEN], name[CK_NAMELEN];
	uint32_t flags, key_type, key_len, data_type, data_len, obj_type;
	uint64_t handle;
	struct ck_elem *elems;
	size_t n_elems, cap_elems;
	bool elems_read;  /* element dump succeeded */
	bool elems_trunc; /* an element was larger than we keep */
};

struct ck_rule {
	struct nftnl_rule *r; /* owned */
	uint64_t handle;
};

struct ck_chain {
	struct nftnl_chain *nc; /* owned */
	uint32_t family;
	char table[CK_NAMELEN], name[CK_NAMELEN], type[16];
	bool base;
	uint32_t hook, policy, flags;
	int32_t prio;
	char (*devs)[16];
	size_t n_devs;
	uint64_t handle;
	struct ck_rule *rules;
	size_t n_rules, cap_rules;
};

struct ck_obj {
	uint32_t family, type;
	char table[CK_NAMELEN], name[CK_NAMELEN];
};

/* A rule the kernel sent that libnftnl could not parse (an expression it
 * does not know): always "unproven". */
struct ck_badrule {
	uint32_t family;
	char table[CK_NAMELEN], chain[CK_NAMELEN];
	uint64_t handle;
};

struct ck_ruleset {
	struct ck_table *tables;
	size_t n_tables, cap_tables;
	struct ck_chain *chains;
	size_t n_chains, cap_chains;
	struct ck_set *sets;
	size_t n_sets, cap_sets;
	struct ck_obj *objs;
	size_t n_objs, cap_objs;
	struct ck_badrule *bad;
	size_t n_bad, cap_bad;
	size_t n_rules;	  /* rules attached to chains */
	size_t n_orphans; /* rules whose chain was not in the dump */
};

void ck_ruleset_free(struct ck_ruleset *rs);
/* Parse a buffer of netlink messages (NFT_MSG_NEW{TABLE,CHAIN,RULE,SET,
 * SETELEM,OBJ}, as a dump returns them) into rs. Messages of other types are
 * skipped; a malformed buffer is an error (PC_EPARSE), except a rule, which
 * is kept as a bad rule (unproven) when it cannot be parsed. Safe on any
 * bytes: every message is screened before libnftnl sees it. Used by the
 * live reader and the fuzzer. */
int ck_nft_parse(struct ck_ruleset *rs, const void *buf, size_t len, struct pc_err *err);
/* Screen one nftables message (nft_screen.c) before libnftnl parses it:
 * every attribute libnftnl reads, nested ones and every expression's
 * included, has the type and size it expects (it exit()s otherwise) and
 * every string its NUL (it strdup()s them). ck_nft_parse calls it. */
enum {
	CK_SCREEN_OK = 0,
	CK_SCREEN_BAD = -1,	/* malformed: never hand it to libnftnl */
	CK_SCREEN_UNKNOWN = -2, /* well formed, but an expression the screen does not know */
};
struct nlmsghdr;
int ck_nft_screen(const struct nlmsghdr *nlh);
/* Dump the whole live ruleset of this network namespace. */
int ck_nft_read(struct ck_ruleset *rs, struct pc_err *err);

const struct ck_chain *ck_chain_find(const struct ck_ruleset *rs, uint32_t family,
				     const char *table, const char *name);
const struct ck_set *ck_set_find(const struct ck_ruleset *rs, uint32_t family, const char *table,
				 const char *name);
const char *ck_family_name(uint32_t family);
const char *ck_hook_name(uint32_t family, uint32_t hook);

/* Canonical text of a table (or of every table when table is NULL): chains
 * with hook/priority/policy/devices, rules as expressions with attributes,
 * sets with elements; no handles, counters or other kernel-owned values. */
void ck_nft_canon(const struct ck_ruleset *rs, uint32_t family, const char *table,
		  struct pc_buf *out);

/* ---- links, addresses, routes, tc, sysctls ------------------------------- */

struct ck_link {
	int ifindex, master, link;
	bool link_netns; /* IFLA_LINK_NETNSID: the peer lives in another namespace */
	char name[16], kind[32], slave_kind[32];
	unsigned flags;
	uint8_t mac[6];
	/* bridge (kind "bridge"): IFLA_BR_NF_CALL_*, -1 when not reported */
	int br_nf_ipt, br_nf_ip6t, br_nf_arpt, br_vlan_filtering;
	/* bridge port (slave_kind "bridge"): -1 when not reported */
	bool brport;
	int isolated, learning, flood, bcast_flood, mcast_flood, hairpin, proxyarp, neigh_suppress,
	    locked;
	/* XDP */
	uint8_t xdp_attached;
	uint32_t xdp_prog_id;
	/* tcx (bpf_link) programs found by BPF_PROG_QUERY, -1 unknown */
	int tcx_ingress, tcx_egress;
};

struct ck_ifaddr {
	int ifindex;
	uint8_t family, prefixlen, scope;
	uint32_t flags;
	uint8_t a[16];
};

struct ck_route {
	uint8_t family, dst_len, type, scope, protocol;
	uint32_t table, prio;
	uint8_t dst[16], gw[16];
	bool has_gw;
	int oif;
};

struct ck_iprule {
	uint8_t family, action, src_len, dst_len;
	uint32_t prio, table, fwmark, fwmask;
	char iif[16], oif[16];
	uint8_t src[16], dst[16];
};

#define CK_TC_ACTS 8
struct ck_tcact {
	char kind[16];
	int mirred_eaction, mirred_ifindex; /* mirred */
	bool has_mark;			    /* skbedit */
	uint32_t mark, mark_mask;
};

struct ck_tcfilter {
	int ifindex;
	uint32_t parent, prio, handle;
	uint16_t proto;
	char kind[16];
	struct ck_tcact acts[CK_TC_ACTS];
	size_t n_acts;
	bool acts_trunc;
	bool bpf_da;
	uint32_t bpf_id;
	char bpf_name[64];
};

struct ck_qdisc {
	int ifindex;
	uint32_t handle, parent;
	char kind[16];
};

struct ck_sysctl {
	char key[128];
	char val[32]; /* "" when the file does not exist */
};

struct ck_listener {
	uint8_t family, proto;
	uint8_t a[16];
	uint16_t port;
};

struct ck_state {
	struct ck_ruleset nft;
	struct ck_link *links;
	size_t n_links, cap_links;
	struct ck_ifaddr *addrs;
	size_t n_addrs, cap_addrs;
	struct ck_route *routes;
	size_t n_routes, cap_routes;
	struct ck_iprule *iprules;
	size_t n_iprules, cap_iprules;
	struct ck_qdisc *qdiscs;
	size_t n_qdiscs, cap_qdiscs;
	struct ck_tcfilter *filters;
	size_t n_filters, cap_filters;
	struct ck_sysctl *sysctls;
	size_t n_sysctls, cap_sysctls;
	struct ck_listener *listeners;
	size_t n_listeners, cap_listeners;
	char legacy[256]; /* iptables-legacy tables loaded ("ip:nat ip6:filter") */
	int nf_bpf_links; /* netfilter BPF links on the host, -1 unknown */
	bool listeners_read;
};

void ck_state_free(struct ck_state *st);
/* rtnetlink: links (with bridge/port attributes and XDP), addresses,
 * routes and policy rules of both families. */
int ck_rtnl_read(struct ck_state *st, struct pc_err *err);
/* One netlink dump on a fresh socket of bus (NETLINK_ROUTE, NETLINK_SOCK_DIAG):
 * req (caller's: type, family header, attributes) gets the dump flags and a
 * sequence number and is sent; every reply message of that dump is appended
 * to out. An error reply or an interrupted dump (PC_EAGAIN) fails; what
 * names the dump in errors ("rtnetlink"). */
int ck_nl_dump(int bus, const char *what, struct nlmsghdr *req, struct pc_buf *out,
	       struct pc_err *err);
/* One rtnetlink dump request (type, family header); the reply messages are
 * appended to out. */
int ck_rtnl_dump(uint16_t type, const void *hdr, size_t hdrlen, struct pc_buf *out,
		 struct pc_err *err);
/* Parse one rtnetlink RTM_NEWLINK message into st (also for the fuzzer). */
int ck_rtnl_parse(struct ck_state *st, const void *buf, size_t len, struct pc_err *err);
/* tc qdiscs and filters of ifindex (ingress, egress, root classes). */
int ck_tc_read(struct ck_state *st, int ifindex, struct pc_err *err);
/* Parse RTM_NEWQDISC/RTM_NEWTFILTER messages into st (also the fuzzer). */
int ck_tc_parse(struct ck_state *st, const void *buf, size_t len, struct pc_err *err);
/* tcx programs and netfilter BPF links (bpf() syscall queries). */
void ck_bpf_probe(struct ck_state *st);
/* sysctls that change paths, for the bridge br. */
int ck_sysctl_read(struct ck_state *st, const char *br, struct pc_err *err);
const char *ck_sysctl_get(const struct ck_state *st, const char *key);
/* Listening TCP and bound UDP sockets (sock_diag). */
int ck_listeners_read(struct ck_state *st, struct pc_err *err);
/* iptables-legacy tables of this namespace (/proc/net/ip_tables_names and co). */
void ck_legacy_read(struct ck_state *st);

const struct ck_link *ck_link_by_name(const struct ck_state *st, const char *name);
const struct ck_link *ck_link_by_index(const struct ck_state *st, int ifindex);
const char *ck_ifname(const struct ck_state *st, int ifindex, char *buf, size_t len);

/* Canonical snapshot of links, addresses, routes, rules, tc and sysctls
 * (what the certificate's second subject digests). */
void ck_state_canon(const struct ck_state *st, const char *br, struct pc_buf *out);

/* ---- analysis ------------------------------------------------------------ */

/* Run every obligation over st; fills res (findings, obligations). */
int ck_analyze(const struct ck_state *st, const struct checker_expect *ex, const char *br,
	       struct checker_result *res, struct pc_err *err);

/* Append a finding / an evidence line (used by the analysis files). */
void ck_find(struct checker_result *res, enum checker_oblig ob, enum checker_kind kind,
	     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void ck_evid(struct checker_result *res, enum checker_oblig ob, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The nftables path model (path.c). */
void ck_paths_check(const struct ck_state *st, const struct checker_expect *ex, const char *br,
		    struct checker_result *res);

/* The pass-restricted obligation (pass.c). */
void ck_pass_check(const struct ck_state *st, const struct checker_expect *ex, const char *br,
		   struct checker_result *res);

/* sha256 as "sha256:<hex>" into out (>= 72 bytes). */
void ck_sha256_str(const void *data, size_t len, char *out);
void ck_sha256_file(const char *path, char *out); /* "" when unreadable */

#endif
