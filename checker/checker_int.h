/* checker internals shared by the checker's own files: the snapshot of the
 * kernel state (nftables, links, routes, tc, sysctls) and the path model.
 * Not an interface: other modules use checker/checker.h only. */
#ifndef PC_CHECKER_INT_H
#define PC_CHECKER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checker/checker.h"

struct nftnl_rule;

#define CK_NAMELEN 256 /* NFT_NAME_MAXLEN */
#define CK_KEYMAX  64  /* largest set key/data we keep */

/* ---- names of the obligations, the result as JSON (result.c) ------------ */

const char *checker_oblig_id(enum checker_oblig ob);	/* "table-identical" */
const char *checker_oblig_title(enum checker_oblig ob); /* one sentence */
/* The result as JSON: a malloc'd NUL-terminated string or NULL (no
 * memory). */
char *checker_result_json(const struct checker_result *r);

/* ---- growable arrays ----------------------------------------------------- */

/* Make room for one more element in *arr (of n elements, capacity *cap).
 * Returns a pointer to the new zeroed element or NULL (no memory). */
void *ck_grow(void *arrp, size_t *n, size_t *cap, size_t elsize);

struct config;
/* sha256 of the policy the engine enforces (its status); PC_EIO when no
 * engine answers. */
int ck_engine_policy_hash(const struct config *cfg, char *out, size_t len);

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
	bool written;	  /* a rule adds or updates elements (dynset) */
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
	/* scale (issue 20): sets[] positions sorted by (family, table, name),
	 * so that finding a set costs log(sets), not sets — a gateway of 1,000
	 * sandboxes has thousands. Valid while n_set_idx == n_sets (else the
	 * finds scan); built by ck_set_index. */
	size_t *set_idx;
	size_t n_set_idx;
};
/* Index rs's sets for ck_set_find (out of memory: none, the finds scan). */
void ck_set_index(struct ck_ruleset *rs);

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
/* ---- the vocabulary (vocab.c): every nftables expression, xt target and
 * xt match the checker knows, read by the screen (nft_screen.c), the path
 * walk (rule_eval.c) and pass-restricted (pass.c). A name not in it is
 * unproven wherever it may act: the closed world's dictionary. ---------- */

/* What a netlink attribute must be (the screen's schemas). */
enum ck_sk {
	CK_SK_U8 = 1,
	CK_SK_U16,
	CK_SK_U32,
	CK_SK_U64,
	CK_SK_STR,     /* NUL-terminated, at least the NUL */
	CK_SK_BIN,     /* any bytes (libnftnl copies exactly the payload length) */
	CK_SK_NEST,    /* nested attributes of the schema `nest` */
	CK_SK_LIST,    /* nested NFTA_LIST_ELEMs, each nested attributes of `nest` */
	CK_SK_DATA,    /* struct nft_data: NFTA_DATA_VALUE or NFTA_DATA_VERDICT */
	CK_SK_EXPR,    /* one expression: NFTA_EXPR_NAME and NFTA_EXPR_DATA */
	CK_SK_EXPRS,   /* nested NFTA_LIST_ELEMs, each one expression */
	CK_SK_DEVS,    /* nested NFTA_DEVICE_NAME strings only (libnftnl fails on others) */
	CK_SK_VERDICT, /* nested `nest` with a code, and a chain when it jumps */
};

struct ck_sschema;
struct ck_sattr {
	uint16_t type;
	uint8_t kind; /* enum ck_sk; 0 ends nothing, it is an empty schema */
	const struct ck_sschema *nest;
};

struct ck_sschema {
	const struct ck_sattr *a;
	size_t n;
	bool strict; /* an attribute type not listed is refused, not skipped */
};

#define CK_SCHEMA_(name, strict, ...)                                                              \
	static const struct ck_sattr name##_a[] = {__VA_ARGS__};                                   \
	static const struct ck_sschema name = {name##_a, sizeof(name##_a) / sizeof(name##_a[0]),   \
					       strict}
#define CK_SCHEMA(name, ...)	    CK_SCHEMA_(name, false, __VA_ARGS__)
#define CK_SCHEMA_STRICT(name, ...) CK_SCHEMA_(name, true, __VA_ARGS__)

/* Fields of the packet or its conntrack entry an entry may write. */
#define CK_F_MARK     (1u << 0)	 /* the packet mark */
#define CK_F_CTMARK   (1u << 1)	 /* the conntrack mark */
#define CK_F_CTLABEL  (1u << 2)	 /* conntrack labels (the engine keeps nothing there) */
#define CK_F_PRIORITY (1u << 3)	 /* skb priority (tc classes) */
#define CK_F_NFTRACE  (1u << 4)	 /* the nftrace bit */
#define CK_F_PKTTYPE  (1u << 5)	 /* packet type (host, broadcast ...) */
#define CK_F_SECMARK  (1u << 6)	 /* packet or conntrack security mark */
#define CK_F_CT	      (1u << 7)	 /* other conntrack state: zone, helper, timeout, events, notrack */
#define CK_F_HEADER   (1u << 8)	 /* header bytes other than the destination (TTL, DSCP, options) */
#define CK_F_DEST     (1u << 9)	 /* the destination or source: NAT, redirect, tproxy */
#define CK_F_ROUTE    (1u << 10) /* where the packet goes: dup, fwd, TEE, broute, offload */
#define CK_F_SET      (1u << 11) /* the contents of a set */
#define CK_F_VERDICT  (1u << 12) /* ends the rule's chain (accept, drop, queue, steal) */

enum ck_vkind { CK_V_EXPR = 1, CK_V_TARGET, CK_V_MATCH };

/* How the walks treat an entry. OWN: each walk reads its attributes itself
 * (cmp, meta, nat, MARK ...). PURE: it writes nothing but its destination
 * register (and counters, sets it owns): a condition when `cond`, whose
 * value the walks do not track. NONE: not modelled: unproven where it may
 * act (and anywhere when it may write a mark). */
enum ck_vmodel { CK_VM_OWN = 1, CK_VM_PURE, CK_VM_NONE };

struct ck_vocab {
	const char *name;
	uint8_t kind;  /* enum ck_vkind */
	uint8_t model; /* enum ck_vmodel */
	bool cond;     /* may stop its rule (a condition, or a load that may fail) */
	/* registers it may write: the libnftnl attribute naming its destination
	 * register (0: none; NFT_REG_VERDICT through it is a verdict), the
	 * attribute holding how many bytes it writes there (0: dbytes) */
	uint16_t dreg, dlen;
	uint8_t dbytes;
	uint32_t writes;		 /* CK_F_*: what it may write besides registers */
	const struct ck_sschema *schema; /* expressions: the attributes the screen admits */
};

/* The entry of that kind and name (case-sensitive: xt "MARK" and ebtables
 * "mark" differ), or NULL: not known. */
const struct ck_vocab *ck_vocab_find(enum ck_vkind kind, const char *name);
/* The whole table (for the tests): *n entries. */
const struct ck_vocab *ck_vocab_table(size_t *n);
struct nftnl_expr;
/* The register expression x (of entry v) writes, and how many bytes: false
 * when it writes none. */
bool ck_vocab_dreg(const struct ck_vocab *v, const struct nftnl_expr *x, uint32_t *reg,
		   uint32_t *len);

/* Mark every set a rule writes (dynset: `add @set`, `update @set`): its
 * contents change with the traffic, so a lookup in it is never certain. */
void ck_nft_mark_written(struct ck_ruleset *rs);
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
	int link_nsid;	 /* that namespace's id here (-1 none): one id, one sandbox */
	int tun_owner;	 /* tap/tun: a process holding it (a VM), 0 none found */
	char name[16], kind[32], slave_kind[32];
	unsigned flags;
	uint8_t mac[6];
	/* bridge (kind "bridge"): IFLA_BR_NF_CALL_*, -1 when not reported */
	int br_nf_ipt, br_nf_ip6t, br_nf_arpt, br_vlan_filtering;
	/* bridge port (slave_kind "bridge"): -1 when not reported */
	bool brport;
	int isolated, learning, flood, bcast_flood, mcast_flood, hairpin, proxyarp, neigh_suppress,
	    locked, stp_state; /* stp_state: IFLA_BRPORT_STATE (BR_STATE_*) */
	/* XDP */
	uint8_t xdp_attached;
	uint32_t xdp_prog_id;
	/* tcx (bpf_link) programs found by BPF_PROG_QUERY, -1 unknown */
	int tcx_ingress, tcx_egress;
	/* IFLA_PROMISCUITY: how many holders asked for every frame (a macvlan
	 * on a device without unicast filtering, a capture), -1 not reported */
	int promisc;
};

struct ck_ifaddr {
	int ifindex;
	uint8_t family, prefixlen, scope;
	uint32_t flags;
	uint8_t a[16];
};

struct ck_route {
	uint8_t family, dst_len, type, scope, protocol;
	uint8_t tos, src_len; /* selectors: IPv4 tos, IPv6 source prefix ("from") */
	uint32_t table, prio;
	uint8_t dst[16], gw[16], src[16];
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
	bool has_ptype; /* skbedit ptype: a frame's packet type rewritten */
	uint16_t ptype;
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
	/* classes of classful qdiscs: each has a filter block of its own */
	struct ck_qdisc *classes;
	size_t n_classes, cap_classes;
	struct ck_tcfilter *filters;
	size_t n_filters, cap_filters;
	struct ck_sysctl *sysctls;
	size_t n_sysctls, cap_sysctls;
	/* sysctls by key for ck_sysctl_get, when n_sysctl_ix == n_sysctls */
	const struct ck_sysctl **sysctl_ix;
	size_t n_sysctl_ix;
	struct ck_listener *listeners;
	size_t n_listeners, cap_listeners;
	char legacy[256]; /* iptables-legacy tables loaded ("ip:nat ip6:filter") */
	/* ebtables-legacy (getsockopt EBT_SO_GET_*): tables with rules or a
	 * policy other than ACCEPT ("broute: 1 rule(s), BROUTING policy DROP");
	 * ebt_unreadable: the kernel has them but they could not be read. */
	char ebt[256];
	char ebt_unreadable[128];
	/* /proc/net/netfilter/nfnetlink_queue: who is bound to which queue */
	struct ck_nfq {
		uint32_t queue, portid;
		unsigned long inode; /* of that netlink socket (/proc/net/netlink), 0 unknown */
		int pid;	     /* the process holding it, 0 not found */
	} * nfq;
	size_t n_nfq, cap_nfq;
	int engine_pid;	       /* the engine's process, 0 not found */
	bool engine_fds_read;  /* its fds could be listed */
	bool engine_is_caller; /* the check runs in the engine's own helper */
	int nf_bpf_links;      /* netfilter BPF links on the host, -1 unknown */
	bool listeners_read;
	/* Devices of other network namespaces whose lower device is in this
	 * one (IFLA_LINK with IFLA_LINK_NETNSID naming this namespace there):
	 * a macvlan on the bridge moved elsewhere stays its receive handler
	 * but leaves this namespace's dump (issue 31). veths are left out:
	 * their IFLA_LINK is the peer, a sandbox's own NIC. */
	struct ck_xdev {
		char name[16], kind[32];
		int link;	/* the lower device's ifindex in this namespace */
		char where[64]; /* "/run/netns/NAME" or "/proc/PID/ns/net" */
	} * xdevs;
	size_t n_xdevs, cap_xdevs;
	int netns_read;		      /* other namespaces whose links were read */
	int netns_unreadable;	      /* namespaces found but not entered (or -1: none walked) */
	char netns_unreadable_eg[96]; /* one of them, for the finding */
	/* /proc/net/packet of this namespace: packet sockets that receive
	 * (protocol not 0), with the interface they are bound to (0: every
	 * interface) and the process holding them */
	struct ck_pkt {
		int ifindex;
		unsigned proto;
		unsigned long inode;
		int pid; /* 0 not found */
		char comm[32];
	} * pkts;
	size_t n_pkts, cap_pkts;
	/* why the list of packet sockets may be incomplete ("" when whole) */
	char pkt_unreadable[128];
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
/* A tunnel kind that decapsulates what reaches its port or protocol on a
 * local address from anyone (no keys): vxlan, gre, ipip... (oblig.c). */
bool ck_open_tunnel(const char *kind);
/* tc qdiscs, classes and filters of every link in st (ingress, egress, each
 * qdisc's and each class's own). */
int ck_tc_read(struct ck_state *st, struct pc_err *err);
/* Parse RTM_NEWQDISC/RTM_NEWTCLASS/RTM_NEWTFILTER messages into st (also
 * the fuzzer). */
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
/* ebtables-legacy tables of this namespace (ck_state.ebt, ebt_unreadable). */
void ck_ebt_read(struct ck_state *st);
/* Queue bindings and, for each, the process holding the socket; engine_pid
 * (the engine's check helper passes its parent; 0: look for a process
 * named portcullisd in this namespace) is the one that must hold the
 * engine's queues. */
void ck_nfq_read(struct ck_state *st, int engine_pid);
/* For each tap/tun device, a process that holds it open (/proc/PID/fdinfo
 * "iff:"): the taps one VM holds are its NICs. Only looked up when there
 * are two or more tap devices. */
void ck_tun_owners(struct ck_state *st);
/* Walk every other network namespace of the host (/run/netns, and
 * /proc/PID/ns/net deduplicated by inode) in a forked child that enters
 * each one (this process never leaves its own) and dumps its links; keep
 * the devices stacked on a device of this namespace (ck_state.xdevs).
 * Namespaces that cannot be entered are counted (netns_unreadable).
 * PC_EIO when the walk itself fails (no fork, no pipe). */
int ck_netns_read(struct ck_state *st, struct pc_err *err);
/* One record of the walker's stream per namespace: this header, then len
 * bytes of its RTM_NEWLINK messages. */
struct ck_nsrec {
	int32_t status; /* 0 read, else the errno that stopped it */
	int32_t nsid;	/* the walking namespace's id there, -1 none */
	uint32_t len;
	char where[64];
};
/* Parse the walker's stream (ck_nsrec records) into st; also for tests. */
int ck_netns_parse(struct ck_state *st, const void *buf, size_t len, struct pc_err *err);
/* Packet sockets of this namespace (/proc/net/packet, three reads taken
 * together) and their holders; st->pkt_unreadable says why the list may be
 * incomplete. */
void ck_packet_read(struct ck_state *st);
/* Parse /proc/net/packet's text into st (no holders looked up). */
void ck_packet_parse(struct ck_state *st, const char *text);

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

/* ======================================================================
 * The certificate (cert.c, cert_render.c, dsse.c, json.c): an in-toto
 * Statement v1 in a DSSE envelope signed with the appliance's ed25519 key,
 * its JSON reader, signing, verification and renderings (docs/checker.md).
 * ====================================================================== */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"

struct config;

/* ---- JSON (json.c) ------------------------------------------------------- */

enum { JV_NULL, JV_TRUE, JV_FALSE, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT };
struct jv {
	int type;
	char *s; /* string (decoded) or number text */
	size_t slen;
	struct jv **items; /* array items / object values */
	char **keys;	   /* object keys */
	size_t n;
};
/* Parse a whole buffer (strict: one value, nothing after it, no duplicate
 * keys, depth <= 32). NULL when malformed. Caller frees with jv_free. */
struct jv *jv_parse(const char *buf, size_t len);
void jv_free(struct jv *v);
const struct jv *jv_get(const struct jv *obj, const char *key); /* borrowed */
const char *jv_str(const struct jv *v);				/* NULL unless a string */

/* ---- DSSE and keys (dsse.c) ------------------------------------------------ */

#define CERT_PAYLOAD_TYPE "application/vnd.in-toto+json"

/* PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body.
 * Returns a malloc'd buffer (*len bytes) or NULL. */
uint8_t *dsse_pae(const char *type, const uint8_t *body, size_t blen, size_t *len);

/* A parsed envelope: the payload decoded, and the first signature. */
struct cert_env {
	char *payload_type;
	uint8_t *payload;
	size_t payload_len;
	char keyid[128];
	uint8_t sig[64];
	struct jv *statement; /* the payload parsed as JSON */
};
/* Parse an envelope (and its statement). PC_EPARSE with a reason. */
int cert_env_parse(const char *buf, size_t len, struct cert_env *out, struct pc_err *err);
void cert_env_free(struct cert_env *e);
/* Verify e's signature over the PAE with the raw ed25519 public key. */
int cert_env_verify(const struct cert_env *e, const uint8_t pk[32], struct pc_err *err);
/* Sign payload, returning the envelope JSON (malloc'd, NUL-terminated). */
int cert_env_sign(const char *payload, size_t len, const uint8_t sk[64], const uint8_t pk[32],
		  char **out, struct pc_err *err);

/* The appliance key: <state_dir>/appliance.key (PKCS#8 PEM, 0600) and
 * <state_dir>/appliance.pub (SubjectPublicKeyInfo PEM, what openssl reads).
 * Created by `portcullis cert keygen` or on first issuance. */
int cert_key_paths(const struct config *cfg, char *key, char *pub, size_t len);
int cert_key_load_or_create(const char *key, const char *pub, bool create, uint8_t sk[64],
			    uint8_t pk[32], struct pc_err *err);
int cert_pub_load(const char *pub, uint8_t pk[32], struct pc_err *err);

/* ---- CLI pieces (cert.c) ---------------------------------------------------- */

int cert_cli_issue(int argc, char **argv, const struct config *cfg);
int cert_cli_key(int argc, char **argv, const struct config *cfg);
int cert_cli_sub(int argc, char **argv, const char *config); /* verify, render */

/* Render a verified statement: md or html (malloc'd) or NULL. */
char *cert_render(const struct jv *statement, bool html);

/* ======================================================================
 * The path model (path.c: hooks, chain order, the walk; rule_eval.c: one
 * rule).
 * ====================================================================== */

enum { CK_NO = 0, CK_MAYBE = 1, CK_YES = 2 };

/* Abstract packet state: has the engine (or our table) decided its flow?
 * LINKLOCAL: accepted by our table as on-link control traffic (ICMPv6
 * neighbour discovery with hop limit 255): fine to deliver locally, an exit
 * if forwarded. */
enum { CK_UNDECIDED = 0, CK_DECIDED = 1, CK_LINKLOCAL = 2, CK_NSTATES = 3 };

/* Outcomes of a chain or rule, as a bit set: accepted (the base chain
 * ends) or returned (to the caller) in a state, dropped, stolen. */
#define CK_O_ACC(s)  (1 << (s))
#define CK_O_RET(s)  (1 << (4 + (s)))
#define CK_O_ACC_ANY 0x0f
#define CK_O_RET_ANY 0xf0
#define CK_O_ACC_U   CK_O_ACC(CK_UNDECIDED)
#define CK_O_ACC_D   CK_O_ACC(CK_DECIDED)
#define CK_O_DROP    (1 << 8) /* dropped or rejected: final */
#define CK_O_STOLEN  (1 << 9) /* taken elsewhere (fwd): reported as an exit */

struct ck_ctx {
	int l3;	      /* NFPROTO_IPV4 or NFPROTO_IPV6 */
	uint32_t fam; /* hook family being walked: NETDEV, BRIDGE or INET */
	uint32_t hook;
	const struct ck_link *iif, *port, *br;
};

struct ck_walk {
	const struct ck_state *st;
	const struct checker_expect *ex;
	struct checker_result *res;
	struct ck_ctx ctx;
	bool ours;	 /* the chain being walked is in our table */
	bool after_ours; /* our prerouting guard has run on this path */
	bool queued;	 /* a queue rule of ours was reached */
	bool marks_only; /* global scan: report only writes to our mark bits */
	int depth;
	char why[1200]; /* how an undecided packet got past our table */
	/* Within one base chain's walk (the context is fixed) a regular chain
	 * reached again from the same state has the same outcome: memo[i *
	 * CK_NSTATES + state] holds it (-1: not yet), so jumps fanning out
	 * through many chains cost each chain once, not once per path to it.
	 * busy[i]: chain i is being walked (a jump back to it is a loop). */
	int *memo;
	bool *busy;
	size_t n_memo;
};

struct ck_rule_out {
	int bits; /* CK_O_* outcomes that end the chain */
	int cont; /* (1 << state) for each state that goes on to the next rule */
};

void ck_rule_eval(struct ck_walk *w, const struct ck_chain *c, const struct ck_rule *r, int state,
		  struct ck_rule_out *out);
/* Walk a chain (base or regular) from state; returns CK_O_* bits. */
int ck_walk_chain(struct ck_walk *w, const struct ck_chain *c, int state);
/* Remember how an undecided packet was accepted by our table. */
void ck_walk_note_accept(struct ck_walk *w, const struct ck_chain *c, const struct ck_rule *r,
			 const char *how);
void ck_rule_where(const struct ck_chain *c, const struct ck_rule *r, char *buf, size_t len);

/* ---- the routing rules of bridge traffic (routing.c) --------------------- */

/* paths-guarded, routing half: the rules that route bridge traffic only
 * when our ruleset marked it, nothing before them that may route it
 * otherwise, and the blackhole table (nft/nft.h NFT_ROUTE_*). */
void ck_routing_check(const struct ck_state *st, const char *br, struct checker_result *res);
/* One family of it over a dump of the kernel's rules (RTM_NEWRULE
 * messages, evaluation order) and st's routes (the unit tests' way in). */
void ck_routing_family(const struct ck_state *st, const char *br, uint8_t fam,
		       const struct pc_buf *dump, struct checker_result *res);

#endif
