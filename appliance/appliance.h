/* appliance: portcullisd, the verdict engine — its nftables ruleset (built
 * with libnftnl, installed with libmnl), the packet parser for NFQUEUE
 * payloads, the engine's control socket protocol, and the `portcullis
 * status|reload` commands. docs/engine.md explains every rule and mark.
 *
 * What other modules use from here: the mark constants (checker, vault), the
 * ruleset builder and its canonical text (checker: compare the live kernel
 * table with what the engine installs), the control socket protocol (CLI),
 * and appliance_cli(). */
#ifndef PC_APPLIANCE_H
#define PC_APPLIANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"
#include "rules/rules.h"

/* ======================================================================
 * Marks. portcullis owns the top byte (PC_MARK_MASK) of the packet mark
 * and of the conntrack mark of sandbox traffic. Only two things ever set
 * those bits: the engine's NFQUEUE verdicts (packet mark) and the rules of
 * our own table that copy a verdict to the conntrack mark. The bridge table
 * overwrites the whole packet mark of every frame entering from a sandbox
 * port (PC_MARK_PORT_MASK = the port's ifindex, every other bit 0), so a
 * sandbox can never arrive carrying one of our bits.
 * ====================================================================== */

#define PC_MARK_MASK 0xff000000u
/* ct mark + verdict mark: the flow is allowed; later packets skip the queue. */
#define PC_MARK_ALLOW 0x80000000u
/* with ALLOW: the flow is redirected to the vault (nat prerouting). */
#define PC_MARK_VAULT 0x40000000u
/* ct mark + verdict mark: TCP flow on a host entry waiting for its TLS
 * ClientHello; every packet from the sandbox is queued until decided. */
#define PC_MARK_HELD 0x20000000u
/* verdict mark: let this one packet through (DNS message, held segment). */
#define PC_MARK_PASS 0x10000000u
/* verdict mark: refuse with a TCP RST / ICMP administratively prohibited. */
#define PC_MARK_REJECT 0x08000000u
/* SO_MARK of the engine's raw sockets that send synthesized DNS answers. */
#define PC_MARK_DNSREPLY 0x04000000u
/* stamped by the bridge table: ifindex of the sandbox port a frame came in. */
#define PC_MARK_PORT_MASK 0x00ffffffu

/* Names of our tables and chains (both tables are named PC_NFT_TABLE). */
#define PC_NFT_TABLE	   "portcullis"
#define PC_NFT_PRIO_INET   (-190) /* after conntrack (-200), before mangle (-150) */
#define PC_NFT_PRIO_RAW	   (-300) /* output notrack of our DNS answers */
#define PC_NFT_PRIO_NAT	   (-100) /* dstnat: vault redirect */
#define PC_NFT_PRIO_BRIDGE (-350) /* before every standard bridge priority */

/* ======================================================================
 * Packet parser (packet.c) — reads bytes a sandbox (or the internet) sent.
 * Fuzzed by tests/fuzz/fuzz_packet.c.
 * ====================================================================== */

enum pc_pkt_status {
	PC_PKT_OK = 0,
	PC_PKT_FRAGMENT,  /* any IPv4/IPv6 fragment (conntrack reassembles first) */
	PC_PKT_MALFORMED, /* truncated headers, bad lengths, bad version ... */
};

struct pc_pkt {
	uint8_t family; /* AF_INET / AF_INET6 */
	struct pc_addr src, dst;
	uint8_t proto; /* final L4 protocol after IPv6 extension headers */
	uint8_t hoplimit;
	uint16_t sport, dport; /* TCP/UDP, host order; 0 otherwise */
	uint8_t tcp_flags;     /* TH_SYN, TH_ACK ... */
	uint32_t tcp_seq;
	uint8_t icmp_type, icmp_code;
	bool truncated;		/* the capture ended before the IP length */
	size_t l3_len;		/* bytes of IP header(s) */
	size_t l4_off;		/* offset of the L4 header in the buffer */
	const uint8_t *payload; /* TCP/UDP payload inside the buffer (borrowed) */
	size_t payload_len;	/* bytes present (<= what the header claims) */
};

/* Parse an IP packet as NFQUEUE delivers it (network header first). Returns
 * a PC_PKT_* status; *out is filled only for PC_PKT_OK. Never reads past
 * buf + len. */
int pc_pkt_parse(const uint8_t *buf, size_t len, struct pc_pkt *out);

/* The TCP/UDP checksum of l4 (header with a zeroed checksum field, and
 * data) between src and dst, pseudo-header included. */
uint16_t pc_pkt_l4_csum(const struct pc_addr *src, const struct pc_addr *dst, uint8_t proto,
			const uint8_t *l4, size_t l4_len);

/* A copy of the TCP/UDP packet pkt (parsed as p) whose payload is replaced
 * by one of the same length, with its checksum recomputed. *out is
 * malloc'ed; returns its length or <0. */
int pc_pkt_replace_payload(const uint8_t *pkt, size_t len, const struct pc_pkt *p,
			   const uint8_t *payload, size_t plen, uint8_t **out);

/* Build a complete IPv4/IPv6 + UDP packet from src:sport to dst:dport with
 * payload into buf; returns its length, or <0 if buf is too small. */
int pc_pkt_build_udp(const struct pc_endpoint *src, const struct pc_endpoint *dst,
		     const uint8_t *payload, size_t len, uint8_t *buf, size_t buflen);

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
enum pc_queue_path {
	PC_QUEUE_NATIVE = 1, /* nft `queue` expression (CONFIG_NFT_QUEUE) */
	PC_QUEUE_COMPAT = 2, /* xtables NFQUEUE target v3 through nft_compat */
};
const char *pc_queue_path_name(enum pc_queue_path p); /* "native" / "compat" */

/* The queue-rule encoders: queues [num, num + total). Neither ever sets
 * bypass (fail-open) nor CPU fanout (the kernel's flow hash keeps every
 * packet of a flow, both directions, on one queue thread). Caller owns the
 * result (nftnl_expr_free, or hand it to nftnl_rule_add_expr). NULL on
 * allocation failure. */
struct nftnl_expr *pc_nft_expr_queue_native(uint16_t num, uint16_t total);
struct nftnl_expr *pc_nft_expr_queue_compat(uint16_t num, uint16_t total);

/* A port of the sandbox bridge, as found in the kernel. */
struct pc_bridge_port {
	char name[PC_IFNAMSIZ];
	uint32_t ifindex; /* must be <= PC_MARK_PORT_MASK to be stamped */
};

struct pc_ruleset_params {
	const struct pc_config *cfg;	    /* bridge, queue, dns.resolvers, vault.listen */
	const struct policy *policy;	    /* anti-spoofing sets and bindings */
	const struct pc_bridge_port *ports; /* current ports of cfg->bridge */
	size_t n_ports;
	enum pc_queue_path qpath;
};

/* One object of the ruleset, in the order the batch creates them. */
enum pc_nft_kind { PC_NFT_TABLE_OBJ = 1, PC_NFT_CHAIN_OBJ, PC_NFT_SET_OBJ, PC_NFT_RULE_OBJ };
struct pc_nft_obj {
	enum pc_nft_kind kind;
	uint16_t family; /* NFPROTO_INET or NFPROTO_BRIDGE */
	union {
		struct nftnl_table *table;
		struct nftnl_chain *chain;
		struct nftnl_set *set; /* with its elements */
		struct nftnl_rule *rule;
	} u;
};

struct pc_ruleset; /* opaque; owns its nftnl objects */

/* Build exactly what the engine installs for these parameters. */
int pc_ruleset_build(const struct pc_ruleset_params *p, struct pc_ruleset **out,
		     struct pc_err *err);
void pc_ruleset_free(struct pc_ruleset *rs);
size_t pc_ruleset_count(const struct pc_ruleset *rs);
/* Borrowed; lives as rs. */
const struct pc_nft_obj *pc_ruleset_at(const struct pc_ruleset *rs, size_t i);

/* Canonical text: one line per table/chain/set, one line per set element
 * (sorted by key) and per rule with every expression (nftnl's own rendering,
 * plus the xt target info in hex). Handles, ids, positions, counter values
 * and user data are left out, so the text of a live table dumped from the
 * kernel equals the text of the built one when they are the same. The
 * *_text functions append to b; they return 0 or b's error (PC_ENOMEM). */
int pc_ruleset_text(const struct pc_ruleset *rs, char **out, size_t *outlen);
/* "sha256:<hex>" of pc_ruleset_text into buf (>= 72 bytes). */
int pc_ruleset_digest(const struct pc_ruleset *rs, char *buf, size_t len);
int pc_nft_table_text(const struct nftnl_table *t, struct pc_buf *b);
int pc_nft_chain_text(const struct nftnl_chain *c, struct pc_buf *b);
int pc_nft_set_text(const struct nftnl_set *s, struct pc_buf *b);
int pc_nft_rule_text(const struct nftnl_rule *r, struct pc_buf *b);

/* ---- kernel side (nft_apply.c); need CAP_NET_ADMIN in the netns ------- */

/* Does the kernel accept the native queue expression? Tried in a batch
 * that is never committed (no BATCH_END: the kernel validates and aborts),
 * so nothing changes. If not, the compat target is tried the same way;
 * if neither is accepted, PC_EUNSUPP. */
int pc_nft_probe_queue(enum pc_queue_path *out, struct pc_err *err);
/* Replace both of our tables atomically (one batch: add, delete, create).
 * Other tables are never touched. On error nothing changed. */
int pc_nft_apply(const struct pc_ruleset *rs, struct pc_err *err);
/* Replace only the elements of the bridge table's port set (one batch). */
int pc_nft_ports_update(const struct pc_bridge_port *ports, size_t n, struct pc_err *err);
/* Delete both of our tables (engine.remove_table_on_exit). Missing tables
 * are not an error. */
int pc_nft_remove(struct pc_err *err);

/* ======================================================================
 * Control socket: <run_dir>/engine.sock, SOCK_SEQPACKET. A request is one
 * message holding one word: "status", "reload" or "metrics" (a trailing
 * newline is ignored). The reply to "metrics" is Prometheus text (format
 * 0.0.4); to the others one message holding one JSON object:
 *   {"ok":true, ...}  or  {"ok":false,"error":"<text>"}
 * status: version, pid, uptime_s, policy, queue_path, queues[{num, queued,
 *   accepted, refused, dropped, kernel_dropped, user_dropped}], flows, held,
 *   log{sent, failed}, dnsguard{...}.
 * reload: {"ok":true,"policy":"sha256:..."} or the file:line:col error.
 * Anyone who can open the socket may ask for status; only uid 0 may reload
 * (SO_PEERCRED). See docs/engine.md.
 * ====================================================================== */

#define PC_ENGINE_SOCK	    "engine.sock"
#define PC_ENGINE_REPLY_MAX 16384

/* Send one request and receive the reply (NUL-terminated, caller frees).
 * Used by the CLI and the tests. */
int pc_engine_request(const char *run_dir, const char *req, int timeout_ms, char **reply,
		      struct pc_err *err);

/* `portcullis [-c FILE] status [--json]`, `portcullis [-c FILE] reload` and
 * `portcullis [-c FILE] metrics` (the metrics of the engine, the vault and
 * logd from their control sockets, Prometheus text format). argv[0] is the
 * subcommand name. Returns a PC_EXIT_* code. */
int appliance_cli(int argc, char **argv, const char *config);

/* `portcullis [-c FILE] sandbox run|attach ...` (sandbox*.c, docs/sandbox.md):
 * argv[0] is "sandbox". Returns the command's exit status, or a PC_EXIT_*
 * code when the sandbox could not be set up (usage 2, refused 1, error 3). */
int sandbox_cli(int argc, char **argv, const char *config);

#endif
