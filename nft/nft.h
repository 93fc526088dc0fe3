/* nft: the nftables ruleset portcullisd installs — built with libnftnl
 * without a kernel (so that tests and the checker can compare it with the
 * live state), installed with libmnl — the marks it and the engine share,
 * and its canonical text. docs/engine.md explains every rule and mark.
 *
 * Below the checker and the engine: the checker's model of the guard is
 * this ruleset, so whoever edits it edits what the checker proves. */
#ifndef PC_NFT_H
#define PC_NFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"
#include "rules/rules.h"

/* ======================================================================
 * Marks. portcullis owns the top byte (NFT_MARK_MASK) of the packet mark
 * and of the conntrack mark of sandbox traffic. Only two things ever set
 * those bits: the engine's NFQUEUE verdicts (packet mark) and the rules of
 * our own table that copy a verdict to the conntrack mark. The bridge table
 * overwrites the whole packet mark of every frame entering from a sandbox
 * port (NFT_MARK_PORT_MASK = the port's ifindex, every other bit 0), so a
 * sandbox can never arrive carrying one of our bits.
 * ====================================================================== */

#define NFT_MARK_MASK 0xff000000u
/* ct mark + verdict mark: the flow is allowed; later packets skip the queue. */
#define NFT_MARK_ALLOW 0x80000000u
/* with ALLOW: the flow is redirected to the vault (nat prerouting). */
#define NFT_MARK_VAULT 0x40000000u
/* ct mark + verdict mark: TCP flow on a host entry waiting for its TLS
 * ClientHello; every packet from the sandbox is queued until decided. */
#define NFT_MARK_HELD 0x20000000u
/* verdict mark: let this one packet through (DNS message, held segment). */
#define NFT_MARK_PASS 0x10000000u
/* verdict mark: refuse with a TCP RST / ICMP administratively prohibited. */
#define NFT_MARK_REJECT 0x08000000u
/* with HELD, ct mark: the held flow's ClientHello was judged allowed; with
 * PASS, verdict mark: the segment that completed it (prerouting puts the
 * bit on the ct mark). The server's bare ACKs of such a flow pass forward
 * without the queue: a TLS flow is never promoted on one (docs/engine.md,
 * "Held flows: what is queued"). */
#define NFT_MARK_TLS 0x02000000u
/* SO_MARK of the engine's raw sockets that send synthesized DNS answers. */
#define NFT_MARK_DNSREPLY 0x04000000u
/* stamped by the bridge table: ifindex of the sandbox port a frame came in. */
#define NFT_MARK_PORT_MASK 0x00ffffffu

/* ======================================================================
 * Routing rules (engine/routing.c installs them, the checker proves them):
 * a packet arriving on the sandbox bridge is routed by the main table only
 * when our ruleset marked it (one rule per bit below), every other one by
 * NFT_ROUTE_TABLE, which holds only blackhole default routes. So a flushed
 * or replaced ruleset blackholes sandbox traffic instead of forwarding it.
 * The priorities come after the local-table rule (0): traffic to the
 * gateway itself is the input chain's business.
 * ====================================================================== */
#define NFT_ROUTE_TABLE	    0x7063u /* 28771, "pc" */
#define NFT_ROUTE_PRIO_MARK 1000u   /* + i for NFT_ROUTE_MARKS[i]: lookup main */
#define NFT_ROUTE_PRIO_DROP 1010u   /* everything else from the bridge */
#define NFT_ROUTE_N_MARKS   3
/* The packet mark bits that let bridge traffic be routed: ALLOW (decided
 * flows: the verdict, or set by the fast path from the ct mark), PASS (one
 * released packet), HELD (the SYN of a held flow). */
/* clang-format off */
#define NFT_ROUTE_MARKS {NFT_MARK_ALLOW, NFT_MARK_PASS, NFT_MARK_HELD}
/* clang-format on */

/* Names of our tables and chains (both tables are named NFT_TABLE). */
#define NFT_TABLE "portcullis"

/* ======================================================================
 * nftables ruleset (nft_*.c): what the engine installs, built without a
 * kernel so that tests and the checker can compare it with the live state.
 * ====================================================================== */

struct nftnl_expr;
struct nftnl_rule;
struct nftnl_chain;
struct nftnl_set;
struct nftnl_table;

/* How rules hand packets to NFQUEUE on this kernel. */
enum nft_queue_path {
	NFT_QUEUE_NATIVE = 1, /* nft `queue` expression (CONFIG_NFT_QUEUE) */
	NFT_QUEUE_COMPAT = 2, /* xtables NFQUEUE target v3 through nft_compat */
};
const char *nft_queue_path_name(enum nft_queue_path p); /* "native" / "compat" */

/* A port of the sandbox bridge, as found in the kernel. */
struct nft_port {
	char name[PC_IFNAMSIZ];
	uint32_t ifindex; /* must be <= NFT_MARK_PORT_MASK to be stamped */
};

struct nft_ruleset_params {
	const struct config *cfg;     /* bridge, queue, dns.resolvers, vault.listen */
	const struct policy *policy;  /* anti-spoofing sets and bindings */
	const struct nft_port *ports; /* current ports of cfg->bridge */
	size_t n_ports;
	enum nft_queue_path qpath;
};

/* One object of the ruleset, in the order the batch creates them. */
enum nft_kind { NFT_TABLE_OBJ = 1, NFT_CHAIN_OBJ, NFT_SET_OBJ, NFT_RULE_OBJ };
struct nft_obj {
	enum nft_kind kind;
	uint16_t family; /* NFPROTO_INET or NFPROTO_BRIDGE */
	union {
		struct nftnl_table *table;
		struct nftnl_chain *chain;
		struct nftnl_set *set; /* with its elements */
		struct nftnl_rule *rule;
	} u;
};

struct nft_ruleset; /* opaque; owns its nftnl objects */

/* Build exactly what the engine installs for these parameters. */
int nft_ruleset_build(const struct nft_ruleset_params *p, struct nft_ruleset **out,
		      struct pc_err *err);
void nft_ruleset_free(struct nft_ruleset *rs);
size_t nft_ruleset_count(const struct nft_ruleset *rs);
/* Borrowed; lives as rs. */
const struct nft_obj *nft_ruleset_at(const struct nft_ruleset *rs, size_t i);

/* Canonical text: one line per table/chain/set, one line per set element
 * (sorted by key) and per rule with every expression (nftnl's own rendering,
 * plus the xt target info in hex). Handles, ids, positions, counter values
 * and user data are left out, so the text of a live table dumped from the
 * kernel equals the text of the built one when they are the same. The
 * *_text functions append to b; they return 0 or b's error (PC_ENOMEM). */
/* "sha256:<hex>" of the whole ruleset's text into buf (>= 72 bytes). */
int nft_ruleset_digest(const struct nft_ruleset *rs, char *buf, size_t len);
int nft_table_text(const struct nftnl_table *t, struct pc_buf *b);
int nft_chain_text(const struct nftnl_chain *c, struct pc_buf *b);
int nft_set_text(const struct nftnl_set *s, struct pc_buf *b);
int nft_rule_text(const struct nftnl_rule *r, struct pc_buf *b);

/* ---- kernel side (nft/apply.c); need CAP_NET_ADMIN in the netns ------- */

/* Does the kernel accept the native queue expression? Tried in a batch
 * that is never committed (no BATCH_END: the kernel validates and aborts),
 * so nothing changes. If not, the compat target is tried the same way;
 * if neither is accepted, PC_EUNSUPP. */
int nft_probe_queue(enum nft_queue_path *out, struct pc_err *err);
/* Replace both of our tables atomically (one batch: add, delete, create).
 * Other tables are never touched. On error nothing changed. */
int nft_apply(const struct nft_ruleset *rs, struct pc_err *err);
/* Replace only the elements of the bridge table's port set (one batch). */
int nft_ports_update(const struct nft_port *ports, size_t n, struct pc_err *err);
/* Delete both of our tables (engine.remove_table_on_exit). Missing tables
 * are not an error. */
int nft_remove(struct pc_err *err);

/* ---- what the new-flow limit rules dropped (counters.c) ------------------ */

/* Append ,"limits":[{sandbox, new_flows_per_second, new_flows_burst,
 * dropped}...] for pol's sandboxes (dropped null if the dump failed). */
int limits_status_json(const struct policy *pol, char **buf, size_t *len);
struct pc_prom;
/* The family portcullis_engine_new_flow_limit_dropped_total{sandbox} (none
 * if the dump failed). */
void limits_metrics(struct pc_prom *b, const struct policy *pol);
/* flood (issue 20): drops[k] = the packets of sandbox k of pol the limit
 * rules (both meters) dropped since the tables were installed, k < n: the
 * counters of the elements of limsb4/limsb6 that belong to sandbox k
 * (nft_prefix_owner); drops is written only on success. 0 or <0 (err). */
int nft_limit_drops(const struct policy *pol, uint64_t *drops, size_t n, struct pc_err *err);
/* The sandbox of pol whose source prefix holding a is the longest (of two
 * equal ones, the first): the owner of a's element of limsb4/6. -1: none. */
long nft_prefix_owner(const struct policy *pol, const struct pc_addr *a);

/* The inet table's sets of the sandboxes' sources, cut into pieces that
 * each belong to one sandbox, each counting what its limit dropped. */
#define NFT_SET_LIMSB4 "limsb4"
#define NFT_SET_LIMSB6 "limsb6"

/* The bridge table's port set, rebuilt on link changes. */
#define NFT_SET_PORTS "ports"

#endif
