/* Internal to engine/: the pieces of portcullisd that its files share
 * (netlink helpers, flow tables, the decision, the engine). Nothing outside
 * engine/, its unit tests and the spec driver (tests/spec/) includes this. */
#ifndef PC_ENGINE_INT_H
#define PC_ENGINE_INT_H

#include <netinet/in.h> /* before any linux/ header (libc-compat) */
#include <pthread.h>
#include <stdatomic.h>

#include "checker/checker.h"
#include "dnsguard/dnsguard.h"
#include "engine/engine.h"
#include "logd/logd.h"
#include "nft/nft.h"

/* ======================================================================
 * Packet parser (packet.c) — reads bytes a sandbox (or the internet) sent.
 * Fuzzed by tests/fuzz/fuzz_packet.c.
 * ====================================================================== */

enum pkt_status {
	PKT_OK = 0,
	PKT_FRAGMENT,  /* any IPv4/IPv6 fragment (conntrack reassembles first) */
	PKT_MALFORMED, /* truncated headers, bad lengths, bad version ... */
};

/* TCP flags of pkt.tcp_flags (RFC 9293) */
#define TH_FIN 0x01
#define TH_SYN 0x02
#define TH_RST 0x04
#define TH_ACK 0x10
#define TH_URG 0x20

struct pkt {
	uint8_t family; /* AF_INET / AF_INET6 */
	struct pc_addr src, dst;
	uint8_t proto; /* final L4 protocol after IPv6 extension headers */
	uint8_t hoplimit;
	uint16_t sport, dport; /* TCP/UDP, host order; 0 otherwise */
	uint8_t tcp_flags;     /* TH_SYN, TH_ACK ... */
	uint32_t tcp_seq;
	uint16_t tcp_urp;   /* the urgent pointer, whatever TH_URG says */
	bool tcp_syn_mptcp; /* a SYN whose options name MPTCP, or do not read to their end */
	uint8_t icmp_type, icmp_code;
	bool truncated;		/* the capture ended before the IP length */
	size_t l3_len;		/* bytes of IP header(s) */
	size_t l4_off;		/* offset of the L4 header in the buffer */
	const uint8_t *payload; /* TCP/UDP payload inside the buffer (borrowed) */
	size_t payload_len;	/* bytes present (<= what the header claims) */
};

/* Parse an IP packet as NFQUEUE delivers it (network header first). Returns
 * a PKT_* status; *out is filled only for PKT_OK. Never reads past
 * buf + len. */
int pkt_parse(const uint8_t *buf, size_t len, struct pkt *out);

/* The TCP/UDP checksum of l4 (header with a zeroed checksum field, and
 * data) between src and dst, pseudo-header included. */
uint16_t pkt_l4_csum(const struct pc_addr *src, const struct pc_addr *dst, uint8_t proto,
		     const uint8_t *l4, size_t l4_len);

/* A copy of the TCP/UDP packet pkt (parsed as p) whose payload is replaced
 * by one of the same length, with its checksum recomputed. *out is
 * malloc'ed; returns its length or <0. */
int pkt_replace_payload(const uint8_t *pkt, size_t len, const struct pkt *p, const uint8_t *payload,
			size_t plen, uint8_t **out);

/* Build a complete IPv4/IPv6 + UDP packet from src:sport to dst:dport with
 * payload into buf; returns its length, or <0 if buf is too small. */
int pkt_build_udp(const struct pc_endpoint *src, const struct pc_endpoint *dst,
		  const uint8_t *payload, size_t len, uint8_t *buf, size_t buflen);

/* ---- links.c: the sandbox bridge and its ports (rtnetlink) -------------- */

struct mnl_socket;
/* An rtnetlink socket, bound: 0 and *out, *portid; or <0 (err). */
int rtnl_open(struct mnl_socket **out, uint32_t *portid, struct pc_err *err);

/* Current ports of bridge (may be none; a missing bridge is not an error:
 * *n = 0, *br_ifindex = 0); the bridge's ifi_flags in *br_flags unless
 * NULL. *ports is malloc'ed, caller frees. */
int links_bridge_ports(const char *bridge, struct nft_port **ports, size_t *n, uint32_t *br_ifindex,
		       unsigned *br_flags, struct pc_err *err);
/* The gateway's own addresses (each as a host prefix) and the subnets of
 * the bridge's addresses and of cfg's sandbox pools: what no DNS answer
 * may teach (dnsguard_local_set). *out is malloc'ed, caller frees. */
int links_local_prefixes(const struct config *cfg, struct dnsguard_local **out, size_t *n,
			 struct pc_err *err);
/* A non-blocking rtnetlink socket subscribed to link and address events
 * (fd, or <0). */
int links_monitor_open(struct pc_err *err);
/* Read every pending event; 1 if any link or address changed, 0 if none,
 * <0 error. */
int links_monitor_drain(int fd);
/* The same, handing each event message to fn (NULL: events were lost,
 * ENOBUFS); for fds of either monitor. *lost (if not NULL) counts the
 * overflows met. */
struct nlmsghdr;
typedef void links_event_fn(const struct nlmsghdr *nlh, void *ctx);
int links_monitor_read(int fd, links_event_fn *fn, void *ctx, uint64_t *lost);
/* The receive buffer of an event socket, past rmem_max while privileged;
 * the monitors' size: 1,000 ports' events, brought up at once, fit. */
#define LINKS_MONITOR_RCVBUF (64 << 20)
void links_monitor_rcvbuf(int fd, int bytes);

/* ---- routing.c: fail closed without nftables (docs/engine.md) ----------- */

/* Add whatever is missing of the routing rules of bridge traffic and the
 * blackhole table (nft/nft.h NFT_ROUTE_*), both families; *added: how many
 * rules/routes were missing (0 when all were there). */
int routing_ensure(const char *bridge, size_t *added, struct pc_err *err);
/* Delete them (engine.remove_table_on_exit); missing ones are fine. */
int routing_remove(const char *bridge, struct pc_err *err);
/* Non-blocking rtnetlink socket subscribed to rule and route events of
 * both families (fd, or <0); drained with links_monitor_drain. */
int routing_monitor_open(struct pc_err *err);
/* Non-blocking nfnetlink socket subscribed to nf_tables events (fd). */
int nftwatch_open(struct pc_err *err);
struct nftwatch {
	bool touched; /* the batch being read touched a table named NFT_TABLE */
	char who[64]; /* the last foreign committer: "nft (pid 123)" */
	/* ad-ops (issue 18): a batch by another process that touched other
	 * tables only (a foreign rule may open a way out: check again);
	 * set by nftwatch_drain, cleared by the caller */
	bool other;
	char other_who[64];
};
/* Read every pending event: 1 when a batch committed by another process
 * touched our tables (or events were lost), 0 when not, <0 error; sets
 * w->other when another process changed other tables. The engine's own
 * batches (any thread of this process) are not changes. */
int nftwatch_drain(int fd, struct nftwatch *w);

/* The port map the queue threads read: ifindex -> name. Copy-on-write: the
 * control thread builds a new one and swaps it under the lock. */
struct portmap {
	pthread_rwlock_t lock;
	struct nft_port *ports;
	size_t n;
};
/* Name of the port with this ifindex into name; false if unknown. */
bool portmap_name(struct portmap *pm, uint32_t ifindex, char name[PC_IFNAMSIZ]);
/* Replace the contents (takes ownership of ports). */
void portmap_set(struct portmap *pm, struct nft_port *ports, size_t n);

/* ---- conntrack.c: ctnetlink over libmnl ---------------------------------- */

struct ct_tuple {
	uint8_t family, proto;
	struct pc_addr src, dst;
	uint16_t sport, dport; /* host order */
	uint32_t mark, id;
};
/* Call visit for every conntrack entry whose mark & mask == value & mask. */
int ct_dump_marked(uint32_t value, uint32_t mask, int (*visit)(const struct ct_tuple *t, void *arg),
		   void *arg, struct pc_err *err);
/* Delete the entry with this original tuple (and id). ENOENT is success. */
int ct_delete(const struct ct_tuple *t, struct pc_err *err);

/* ---- dnsreply.c: raw sockets for synthesized DNS answers ------------------ */
struct dnsreply {
	int fd4, fd6;
};
/* Open both raw sockets with SO_MARK = NFT_MARK_DNSREPLY (needs root). */
int dnsreply_open(struct dnsreply *d, struct pc_err *err);
void dnsreply_close(struct dnsreply *d);
/* Send msg from `from` (the address the query went to) to `to`. */
int dnsreply_send(struct dnsreply *d, const struct pc_endpoint *from, const struct pc_endpoint *to,
		  const uint8_t *msg, size_t len, struct pc_err *err);

/* ---- quota.c: keyed hashes, per-sandbox table quotas ------------------------ */

/* Tables keyed by values a sandbox chooses (addresses, ports) hash them with
 * SipHash (libsodium's crypto_shorthash) under a random key made when the
 * table is: a sandbox cannot aim its flows at one hash chain. */
#define HKEY_BYTES 16
int hkey_new(uint8_t key[HKEY_BYTES]); /* 0 or PC_EIO (libsodium) */
uint64_t hkey_hash(const uint8_t key[HKEY_BYTES], const void *data, size_t len);

/* How many entries of one table each sandbox holds (the table's own
 * locking). Each sandbox is sure of quota_share(capacity, sandboxes of the
 * policy in force): the shares together never exceed the table, so no
 * sandbox can take another's (docs/engine.md, "Per-sandbox quotas"). */
struct quota_map;
int quota_map_new(struct quota_map **out);
void quota_map_free(struct quota_map *q);
size_t quota_share(size_t capacity, size_t n_sandboxes); /* >= 1 */
/* One more entry for sandbox: 0; PC_EREFUSED when it holds limit
 * already; PC_ENOMEM. */
int quota_take(struct quota_map *q, const char *sandbox, size_t limit);
void quota_give(struct quota_map *q, const char *sandbox);
size_t quota_used(struct quota_map *q, const char *sandbox);
/* Two pointers kept with sandbox's count for the table's own use (the ends
 * of a list of its entries); NULL when it holds none. They go with the
 * count's last entry (quota_give), so the table empties them first. */
void **quota_list(struct quota_map *q, const char *sandbox);
/* The most entries any sandbox holds, when more than over (else 0, and fn
 * is not called); fn (or NULL) is called with the list of each sandbox
 * holding that many. */
size_t quota_most(struct quota_map *q, size_t over, void (*fn)(void *arg, void **list), void *arg);

/* Refusals over a quota, per sandbox, engine-wide (mutex inside). */
enum quota_kind {
	QUOTA_NONE = 0,
	QUOTA_HELD,
	QUOTA_DNSTCP,
	QUOTA_HELD_GIVEN_UP,  /* a held flow of it forgotten for another's share */
	QUOTA_DNSTCP_GIVEN_UP /* a stream of it, the same */
};
struct quota_count {
	char sandbox[POLICY_NAME_MAX];
	uint64_t held_refused, dnstcp_refused;
	uint64_t held_given_up, dnstcp_given_up;
};
struct quota_stats {
	pthread_mutex_t mu;
	struct quota_count *v;
	size_t n, cap;
};
void quota_stats_init(struct quota_stats *s);
void quota_stats_free(struct quota_stats *s);
void quota_stats_count(struct quota_stats *s, const char *sandbox, enum quota_kind kind);
/* false (and *out untouched) when sandbox was never refused */
bool quota_stats_get(struct quota_stats *s, const char *sandbox, struct quota_count *out);
/* Append ,"quotas":{...} for pol's sandboxes (status). */
int quota_status_json(struct quota_stats *s, const struct policy *pol, size_t held_cap,
		      size_t dnstcp_cap, char **buf, size_t *len);
struct pc_prom;
/* portcullis_engine_quota_refused_total{sandbox,table} */
void quota_metrics(struct pc_prom *b, struct quota_stats *s, const struct policy *pol);

/* ---- flows.c -------------------------------------------------------------- */

/* A flow as conntrack knows it: the original direction. */
struct flow_key {
	uint8_t family, proto;
	uint16_t sport, dport;
	uint8_t src[16], dst[16];
};
void flow_key_from_pkt(struct flow_key *k, const struct pkt *p);
void flow_key_from_ct(struct flow_key *k, const struct ct_tuple *t);

/* Why an allowed flow was allowed: what a reload needs to judge it again. */
enum flow_via { FLOW_VIA_CIDR = 1, FLOW_VIA_HOST, FLOW_VIA_SNI };
struct flow_meta {
	char sandbox[POLICY_NAME_MAX];
	bool has_mac;
	uint8_t mac[6];
	char port[PC_IFNAMSIZ];
	enum flow_via via;
	bool vault;
	char name[POLICY_HOST_MAX]; /* learned name or SNI (HOST/SNI) */
};

/* Registry of allowed flows, shared by the queue threads (mutex inside).
 * Bounded: when full the oldest entry is forgotten (a reload then judges
 * that flow on its addresses alone). */
struct flow_registry;
int flow_registry_new(size_t max, struct flow_registry **out);
void flow_registry_free(struct flow_registry *r);
int flow_registry_put(struct flow_registry *r, const struct flow_key *k, const struct flow_meta *m);
bool flow_registry_get(struct flow_registry *r, const struct flow_key *k, struct flow_meta *m);
void flow_registry_del(struct flow_registry *r, const struct flow_key *k);
size_t flow_registry_count(struct flow_registry *r);
/* Mark every entry unseen; flow_registry_seen marks one; sweep drops the
 * unseen (flows whose conntrack entry is gone). */
void flow_registry_unsee_all(struct flow_registry *r);
void flow_registry_seen(struct flow_registry *r, const struct flow_key *k);
void flow_registry_sweep(struct flow_registry *r);
/* The keyed hash a table files k under (for tests: keyed per table). */
uint64_t flow_registry_key_hash(const struct flow_registry *r, const struct flow_key *k);

/* Held TCP flows (host entries waiting for the ClientHello). One table per
 * queue thread: the kernel's flow hash sends every packet of a flow to the
 * same queue, so no locking. */
#define HELD_BUF_MAX 16384
struct held_flow {
	struct flow_key key;
	struct flow_meta meta;
	uint64_t deadline_ms;
	uint32_t next_seq; /* next byte expected from the sandbox */
	bool seq_known;
	size_t len;
	uint8_t *buf; /* the sandbox's bytes from isn + 1 on: what was (or is being) judged */
	struct held_flow *next;
	/* Insertion (docs/engine.md, "Held flows"): a decision rests only on
	 * bytes the server will get. buf[0, len) is fixed once passed: every
	 * later segment over it must carry the same bytes. Once judged
	 * allowed, the flow is promoted only when the server acknowledges
	 * isn + 1 + len (its replies are queued until then). */
	uint32_t isn;	      /* the first SYN's sequence number (another one: spec H6, H6a) */
	uint32_t snd_max;     /* past the last sequence number the sandbox sent (data, FIN) */
	size_t cap;	      /* bytes allocated in buf (grows to HELD_BUF_MAX) */
	bool judged;	      /* buf[0, len) judged allowed: waiting for the server's ACK */
	bool failed;	      /* refused and recorded: every later packet is refused */
	bool srv_known;	      /* a SYN-ACK acknowledging isn was seen */
	uint32_t srv_isn;     /* its sequence number */
	uint32_t srv_nxt;     /* past the server's bytes seen in order */
	uint64_t promoted_ms; /* != 0: promoted then (ct mark ALLOW on its way) */
	char policy[DNSG_POLICY_MAX]; /* the policy it was promoted under */
	char sni[POLICY_HOST_MAX];    /* the server name judged ("" when not TLS) */
	bool fin_seen;		      /* a FIN passed, at isn + 1 + fin_at */
	uint32_t fin_at;
	/* TLS (sni set): the server's first bytes, in order, were seen and
	 * are no HelloRetryRequest; promotion waits for them (H13a). */
	bool srv_first;
	bool grace; /* counted as promoted (held_promoted), no longer as waiting */
	struct held_flow *gnext, *gprev; /* promoted entries, oldest first */
	/* counted as waiting: its sandbox's entries, oldest first (the one a
	 * sandbox under its share may take the place of: held_add) */
	struct held_flow *snext, *sprev;
	uint64_t added;	      /* the table's count of entries made, when it was */
	uint64_t promo_batch; /* the queue thread's batch that promoted it */
	uint64_t sent_ms;     /* != 0: that batch's verdicts were sent then */
};
/* How long a promoted entry stays to catch packets queued before the
 * conntrack mark took effect (a batch and its log flush: milliseconds).
 * It was 2 s; each promoted entry then held a place for 2 s, so a sandbox
 * could promote at most its share per 2 s (1,024 TLS flows/s: issue 34). */
#define HELD_GRACE_MS 500
/* A promoted entry goes earlier, at the first read that began this long
 * after its promoting verdict was sent and found the NFQUEUE socket empty
 * (held_drained; docs/engine.md, "Held flows": why 50 ms). */
#define HELD_DRAIN_MIN_MS 50
struct held_table;
int held_table_new(size_t max, struct held_table **out);
void held_table_free(struct held_table *t);
struct held_flow *held_get(struct held_table *t, const struct flow_key *k);
/* The held flows one sandbox is sure of in t, its share (what a quota
 * refusal records: portcullis.quota). */
size_t held_share(const struct held_table *t, size_t n_sandboxes);
/* New entry of sandbox (its meta.sandbox): 0 and *out. A sandbox may use
 * any room the table has; it is sure of quota_share(max, n_sandboxes) of
 * it. When the table is full, a sandbox under its share takes the place of
 * the oldest waiting entry of the sandbox holding the most (over its
 * share), which is forgotten: its next packet is refused as of no
 * connection, and given_up (POLICY_NAME_MAX bytes, or NULL) names its
 * sandbox ("" when none was). PC_EREFUSED: the table is full and the
 * sandbox holds its share; PC_EAGAIN: full, and no sandbox is over its
 * share (more sandboxes than entries); PC_ENOMEM. The caller refuses the
 * flow on any error. */
int held_add(struct held_table *t, const struct flow_key *k, const char *sandbox,
	     size_t n_sandboxes, struct held_flow **out, char *given_up);
/* Was k among the last HELD_GIVEN_RING flows given up (held_add)? Only a
 * refusal's wording depends on it: a flow with no entry is refused
 * either way. */
#define HELD_GIVEN_RING 64
bool held_given_up(const struct held_table *t, const struct flow_key *k);
/* Entries sandbox holds now; the table's size. */
size_t held_used(struct held_table *t, const char *sandbox);
size_t held_capacity(const struct held_table *t);
uint64_t held_key_hash(const struct held_table *t, const struct flow_key *k);
void held_del(struct held_table *t, struct held_flow *f);
/* f was promoted (f->promoted_ms set): for its grace (HELD_GRACE_MS) it
 * counts against its sandbox's share of promoted entries (of twice the
 * table's size) instead of its share of entries waiting for a ClientHello,
 * so that a sandbox opening TLS flows quickly does not fill its waiting
 * share with flows already decided; promoted entries past their grace are
 * forgotten first, oldest first. 0; on PC_EREFUSED (that share is full) it
 * stays counted as waiting. */
int held_promoted(struct held_table *t, struct held_flow *f, size_t n_sandboxes);
/* The queue thread decides batch seq now (seq grows by one per batch): an
 * entry promoted meanwhile is promoted by it. */
void held_batch_begin(struct held_table *t, uint64_t seq);
/* The verdicts of batches up to seq were sent at now_ms: the promotions
 * they carry set the ct mark ALLOW then. */
void held_verdicts_sent(struct held_table *t, uint64_t seq, uint64_t now_ms);
/* A read that began at start_ms found the NFQUEUE socket empty: every
 * packet queued before then was read (and decided). A promoted entry
 * whose verdict was sent at least HELD_DRAIN_MIN_MS before start_ms is no
 * longer needed: no packet that saw the flow unpromoted is left to come.
 * Forgets those, oldest first; returns how many. */
size_t held_drained(struct held_table *t, uint64_t start_ms);
/* Forget entries well past their deadline; returns how many. */
size_t held_expire(struct held_table *t, uint64_t now_ms);
size_t held_count(const struct held_table *t);

/* ---- dnstcp.c: DNS over TCP, one message at a time --------------------------
 * Each direction of a port-53 TCP connection whose message spans segments
 * gets a stream: its bytes from the message's first one, in order. While a
 * message is incomplete its segments are dropped (and kept here): the
 * sender sends them again, and once the whole message was judged every
 * segment inside the judged bytes (and the same as them) is released — as
 * rewritten when the judge changed the message. One table per queue thread
 * (the kernel's symmetric flow hash keeps a connection on one queue). */
#define DNSTCP_MSG_MAX	   (65535 + 2)
#define DNSTCP_BUF_MAX	   (4 * DNSTCP_MSG_MAX) /* bytes kept for one stream */
#define DNSTCP_STREAMS_MAX 256u			/* streams per queue thread */
#define DNSTCP_IDLE_MS	   10000u		/* a stream idle this long is forgotten */
struct dnstcp_stream {
	struct flow_key key;
	uint32_t base; /* sequence number of buf[0] */
	uint8_t *buf;  /* the bytes sent from base on, in order */
	uint8_t *rw;   /* the judged bytes as released, when a judge changed them */
	size_t len, cap;
	size_t judged;		       /* buf[0, judged): whole messages, judged and allowed */
	size_t delivered;	       /* released in order up to here */
	size_t ahead_start, ahead_end; /* one released range past delivered */
	size_t fin_at;		       /* the sender's FIN is at buf[fin_at] (fin) */
	bool syn;		       /* kept from the SYN on, for the connection's life */
	bool confirmed;		       /* the resolver's SYN-ACK acknowledged base */
	bool fin;
	/* a message of it was judged and its record not acknowledged (or its
	 * verdict otherwise refused): every later data segment is refused,
	 * none released as judged before (docs/engine.md, "DNS over TCP") */
	bool failed;
	uint64_t last_ms;
	char sandbox[POLICY_NAME_MAX]; /* whose quota it counts against */
	struct dnstcp_stream *next;    /* every stream (expiry) */
	struct dnstcp_stream *hnext;   /* hash chain */
	/* A connection kept from the SYN holds both directions: rev is the
	 * resolver's (its answers, framed from the resolver's ISN + 1 on, set
	 * by its SYN-ACK), owned by the sandbox's stream, which alone is in
	 * the table and counts against the quota; owner is its way back. */
	struct dnstcp_stream *rev, *owner;
};
struct dnstcp_table;
int dnstcp_table_new(size_t max, struct dnstcp_table **out);
void dnstcp_table_free(struct dnstcp_table *t);
size_t dnstcp_count(const struct dnstcp_table *t);
size_t dnstcp_capacity(const struct dnstcp_table *t);
/* Streams sandbox holds now. */
size_t dnstcp_used(struct dnstcp_table *t, const char *sandbox);
uint64_t dnstcp_key_hash(const struct dnstcp_table *t, const struct flow_key *k);
/* The stream of k (idle ones forgotten first), or NULL. */
struct dnstcp_stream *dnstcp_get(struct dnstcp_table *t, const struct flow_key *k, uint64_t now_ms);
/* A new stream of sandbox whose first byte is seq: 0 and *out. As held
 * flows (held_add): any room the table has may be used, each sandbox is
 * sure of quota_share(max, n_sandboxes); when the table is full a sandbox
 * under its share takes the place of the oldest stream of the sandbox
 * holding the most (given_up, POLICY_NAME_MAX bytes or NULL, names it;
 * "" when none), one at or over it gets PC_EREFUSED; PC_EAGAIN: full and
 * no sandbox over its share; PC_ENOMEM; PC_EINVAL: no table. */
int dnstcp_add(struct dnstcp_table *t, const struct flow_key *k, uint32_t seq, uint64_t now_ms,
	       const char *sandbox, size_t n_sandboxes, struct dnstcp_stream **out, char *given_up);
void dnstcp_del(struct dnstcp_table *t, struct dnstcp_stream *s);
/* p (with its raw packet data), from a sandbox, acknowledges the answers
 * of its connection kept from the SYN: those judged and released before
 * its ACK are let go, so that the answer stream keeps what is in flight,
 * not the connection's whole history. */
void dnstcp_acked(struct dnstcp_table *t, const struct pkt *p, const uint8_t *data,
		  uint64_t now_ms);
/* Add a segment's bytes. 0 (a gap adds nothing); PC_EINVAL: before the
 * stream; PC_ETAMPER: bytes sent again differ from those kept;
 * PC_EREFUSED: over DNSTCP_BUF_MAX; PC_ENOMEM. */
int dnstcp_add_bytes(struct dnstcp_stream *s, uint32_t seq, const uint8_t *data, size_t n,
		     uint64_t now_ms);
/* 1 and the next whole unjudged message (borrowed until the next add);
 * 0 when it is not whole yet; PC_EPARSE for a zero length. */
int dnstcp_next_msg(const struct dnstcp_stream *s, const uint8_t **msg, size_t *len);
/* That message was allowed; rewritten (same length, or NULL) is what
 * is released instead. 0 or PC_ENOMEM. */
int dnstcp_judged(struct dnstcp_stream *s, const uint8_t *rewritten);
/* Is the segment [seq, seq+n) inside the judged bytes? Then *bytes are
 * what to release for it. */
bool dnstcp_releasable(struct dnstcp_stream *s, uint32_t seq, size_t n, const uint8_t **bytes);
/* Everything kept was judged and released in order: forget the stream. */
bool dnstcp_done(const struct dnstcp_stream *s);

/* What the decision uses (decide.c judges the messages; the plumbing that
 * puts them together and releases their segments is here): one segment of
 * a port-53 TCP connection, and what becomes of it. */
struct dnstcp_seg {
	const uint8_t *data; /* the whole IP packet (a rewrite copies it) */
	size_t len;
	const struct pkt *p; /* data parsed */
};
struct dnstcp_fate {
	bool pass;	  /* release the segment; else drop it (held, or sent again) */
	uint8_t *new_pkt; /* released as rewritten: the whole packet, malloc'ed */
	size_t new_pkt_len;
	const char *why; /* refused: why (static text) */
	bool over_quota; /* refused: the sandbox holds its share of the streams */
	bool failed;	 /* the stream failed: refuse the segment (no record) */
	/* a stream of this sandbox was given up for the new one (dnstcp_add) */
	char given_up[POLICY_NAME_MAX];
};
/* The DNS message the segment makes whole (t NULL: it must hold exactly
 * one). 1 with *msg and *len to judge (*st: its stream; NULL when the
 * segment held exactly that message); 0 when decided here (f->pass:
 * released as judged before, or dropped while the message is incomplete:
 * the sender sends it again); <0 with f->why: refuse the connection (the
 * stream is forgotten). sandbox NULL: not a sandbox, no stream is kept.
 * from_syn (the sandbox's queries, t not NULL): the segment must belong
 * to a stream dnstcp_open began, and is placed in it at its sequence
 * number even when it holds one whole message: bytes overlapping kept
 * ones must be the same, bytes past a FIN are refused, and a segment
 * past a hole is dropped (sent again). f starts zeroed. */
int dnstcp_take(struct dnstcp_table *t, const struct dnstcp_seg *seg, const char *sandbox,
		size_t n_sandboxes, bool from_syn, uint64_t now_ms, struct dnstcp_stream **st,
		const uint8_t **msg, size_t *len, struct dnstcp_fate *f);
/* The message st made whole was allowed (rewritten: what to release
 * instead, same length, or NULL): f says whether the segment is released
 * (it lies inside the judged bytes) or dropped until sent again. 0, or
 * PC_ENOMEM: refuse (the stream is forgotten). */
int dnstcp_allowed(struct dnstcp_table *t, struct dnstcp_stream *st, const struct dnstcp_seg *seg,
		   const uint8_t *rewritten, struct dnstcp_fate *f);
/* The sandbox's SYN p opens its connection's stream: every byte it sends
 * is placed at its sequence number from ISN+1 on (a stream kept before
 * for the same key is forgotten). 0, or <0 with f->why (f->over_quota):
 * refuse the SYN. */
int dnstcp_open(struct dnstcp_table *t, const struct pkt *p, const char *sandbox,
		size_t n_sandboxes, uint64_t now_ms, struct dnstcp_fate *f);
/* p (in the IP packet data) is a resolver's SYN-ACK: the stream of the
 * sandbox's SYN it acknowledges (ISN+1) may carry data from now on. */
void dnstcp_synack(struct dnstcp_table *t, const struct pkt *p, const uint8_t *data,
		   uint64_t now_ms);
/* p carries a FIN: no byte may follow it in its stream. */
void dnstcp_fin(struct dnstcp_table *t, const struct pkt *p, uint64_t now_ms);
/* k's stream, if one is kept, fails: a message it judged was refused after
 * all (its record not acknowledged); dnstcp_take refuses its segments. */
void dnstcp_fail(struct dnstcp_table *t, const struct flow_key *k, uint64_t now_ms);
/* Forget p's stream, if one is kept (a RST, or a connection refused). */
void dnstcp_forget(struct dnstcp_table *t, const struct pkt *p, uint64_t now_ms);

/* ---- decide.c: one packet, one verdict ------------------------------------ */

enum verdict_kind {
	VK_DROP = 1, /* NF_DROP, silently */
	VK_PASS,     /* this packet only */
	VK_ALLOW,    /* flow allowed (ct mark) */
	VK_ALLOW_VAULT,
	VK_HELD,   /* flow held until its ClientHello */
	VK_REJECT, /* RST / ICMP admin-prohibited */
};

/* What the queue thread knows about a packet besides its bytes. */
struct pkt_in {
	uint32_t id;
	uint32_t mark;
	uint8_t hook; /* NF_INET_* */
	bool has_mac;
	uint8_t mac[6];
	const uint8_t *data;
	size_t len;
};

/* The outcome, with at most one log record.
 *
 * Where the record's strings live: rec is built in place, each string
 * field pointing at storage that lasts until the decision is cleared (the
 * record is sent, committed and counted after the whole batch is decided)
 * — a literal; the policy the batch holds a reference to (sandbox and rule
 * names, the policy hash); the decision's own answer result (ans: the
 * question's name, a deferred query's record); the reason and answers
 * composed here; or, for a string that lives where a later packet of the
 * batch may change or free it (a held flow's names, a name parsed on the
 * stack), kept[] by rec_keep() in decide.c. So a new field is one
 * assignment where it is set: no buffer per field, and a record rebuilt
 * from a deferred query (dns_answer) has no pointer to fix up. */
struct decision {
	enum verdict_kind v;
	bool has_rec;
	/* without a record of its own: rec is a deferred DNS query's record,
	 * to be handed to logd as a pledge (rec.pledge its id) before the
	 * query is released (docs/logd.md, "Pledges") */
	bool pledged;
	struct logrec rec;
	char answers[512];
	char reason[640]; /* room for an answer's unlearned addresses and why */
	/* rec_keep's store: the most a decision keeps is a held flow's
	 * server name and host name (one of them twice) and its sandbox */
	char kept[4 * POLICY_HOST_MAX];
	size_t kept_len;
	/* refused UDP query: the synthesized answer to send back */
	bool send_reply;
	struct pc_endpoint reply_from, reply_to;
	uint8_t reply[DNSG_REPLY_MAX];
	size_t reply_len;
	/* released DNS answer with a new payload (whole IP packet), malloc'ed */
	uint8_t *new_pkt;
	size_t new_pkt_len;
	/* released DNS answer whose addresses are learned once its record is
	 * acknowledged (decision_commit), and the policy its query was
	 * judged under (a deferred query record) */
	bool learn;
	struct dnsguard_answer_res ans;
	/* refused because its sandbox holds its share of a table: counted
	 * per sandbox (quota_stats) */
	enum quota_kind quota;
	/* a held flow (given_up_kind QUOTA_HELD_GIVEN_UP) or DNS-over-TCP
	 * stream (QUOTA_DNSTCP_GIVEN_UP) of this sandbox was given up for
	 * this decision's room (held_add, dnstcp_add): counted per sandbox
	 * (quota_stats) */
	char given_up[POLICY_NAME_MAX];
	enum quota_kind given_up_kind;
	/* a held flow promoted by its server's acknowledgement (forward hook:
	 * the verdict ALLOW is the reply's; refused, it is only dropped) */
	bool promote;
	/* bytes of a held flow judged allowed (key: the flow): their record
	 * goes with them; if logd does not take it, the flow fails */
	bool held_judged;
	/* with VK_PASS: those bytes were an allowed ClientHello; the verdict
	 * marks the flow's conntrack as judged TLS (NFT_MARK_TLS), so that the
	 * ruleset passes the server's bare ACKs of it without the queue */
	bool held_tls;
	/* a DNS-over-TCP message of the stream dnstcp_key was judged allowed:
	 * if its verdict is refused after all (its record, a deferred one's
	 * window), the stream fails, as a held flow does */
	bool dnstcp_judged;
	struct flow_key dnstcp_key;
	/* allowed flow to remember for reloads */
	bool register_flow;
	struct flow_key key;
	struct flow_meta meta;
};

/* Everything a decision reads. All borrowed for the call. */
struct decide_ctx {
	const struct config *cfg;
	const struct policy *policy;
	struct dnsguard *dg;
	struct portmap *ports;
	struct held_table *held;
	uint64_t now_ms;
	/* The queue thread's last records were acknowledged: an allowed DNS
	 * query's record may be deferred to its answer (docs/dnsguard.md). */
	bool dns_defer;
	/* The queue thread's DNS-over-TCP streams (NULL: a message must be
	 * whole in one segment). */
	struct dnstcp_table *dnstcp;
};

/* Judge one packet. Never fails: internal errors become refusals. */
void decide_packet(const struct decide_ctx *c, const struct pkt_in *in, struct decision *d);
/* Free what a decision allocated (new_pkt) and reset it. */
void decision_clear(struct decision *d);
/* The sandbox the decision's record names, "" if none (quota counts,
 * what an answer teaches). */
const char *decision_sandbox(const struct decision *d);
/* After the decision's record was acknowledged and before its verdict:
 * learn what a released DNS answer teaches. 0, or <0 (refuse it). */
int decision_commit(struct dnsguard *dg, struct decision *d, uint64_t now_ms);
/* The verdict record of a deferred DNS query (struct dnsguard_owed). */
void decision_owed_rec(const struct dnsguard_owed *o, struct logrec *r);

/* Would this allowed flow still be allowed under c->policy? m is what the
 * registry remembers of it (NULL: forgotten, judged on addresses); vault is
 * the VAULT bit of its conntrack mark. false: *reason says why not. */
bool decide_rejudge(const struct decide_ctx *c, const struct flow_key *k, const struct flow_meta *m,
		    bool vault, const char **reason);

/* ---- the engine (engine.c, queue.c, control.c) ------------------------------ */

/* Labels of the verdict counters by reason: the event.codes (logd/reason.c)
 * and "unrecorded". */
#define MET_REASONS (LOGREC_REASON_CODES + 1)

struct qstats {
	_Atomic uint64_t queued, accepted, refused, dropped, log_sent, log_failed, enobufs;
	/* [connect, dns-query][allowed, refused][reason label] */
	_Atomic uint64_t verdicts[2][2][MET_REASONS];
};

struct engine;
struct qbufs;

struct qthread {
	struct engine *e;
	uint16_t num;
	pthread_t tid;
	bool started;
	struct mnl_socket *nl;
	unsigned portid;
	struct logc *lc;	     /* this thread's own logd connection */
	bool log_ok;		     /* its last records were acknowledged */
	uint64_t ring_gen;	     /* logd_gen when its connection was last seen alive */
	struct held_table *held;     /* this thread's held flows */
	struct dnstcp_table *dnstcp; /* this thread's DNS-over-TCP streams */
	struct qstats st;
	_Atomic size_t held_n; /* for status */
	/* batches decided, and given their verdicts (refused or not): a
	 * reload waits until those begun before it are done */
	_Atomic uint64_t begun, done;
	struct qbufs *bufs; /* queue.c's receive/verdict buffers */
	uint8_t *rx;
	struct decision *dec; /* one per packet of a batch */
	struct pkt_in *pin;
};

/* httpmetrics.c (ad-guard, issue 18 point 10): the optional HTTP /metrics
 * listener, served non-blocking from the control thread's loop. */
#define HTTPM_REQ_MAX 4096 /* a request head, bytes */
#define HTTPM_CLIENTS 4
#define HTTPM_POLLFDS (1 + HTTPM_CLIENTS)
struct httpm_req {
	char method[16];
	char target[256];
};
/* Parse a request head (peer bytes; fuzzed): its length (> 0) and *out
 * when whole and well formed; 0 when more bytes are needed; PC_EPARSE
 * when malformed or longer than HTTPM_REQ_MAX. */
int httpm_request_parse(const uint8_t *buf, size_t len, struct httpm_req *out);
struct httpm_client {
	int fd; /* -1: free */
	uint64_t deadline;
	uint8_t in[HTTPM_REQ_MAX];
	size_t in_len;
	char *out; /* the answer being sent (malloc'ed), NULL while reading */
	size_t out_len, out_off;
};
struct httpm {
	int fd; /* listening socket, -1: off */
	char where[80];
	uint64_t requests;
	struct httpm_client c[HTTPM_CLIENTS];
};

/* checkrun.c: the containment check the engine runs after each change of
 * its tables, in a helper process forked before the privilege drop (it
 * needs more than CAP_NET_ADMIN). Touched by the control thread only. */
#define CHECKRUN_ERROR 3 /* a result: the check could not run */
struct engine_check {
	int fd; /* to the helper; -1: none */
	pid_t pid;
	bool busy;  /* a request is out */
	bool again; /* the tables changed while it ran: check once more */
	uint64_t started_ms;
	char trigger[16], next_trigger[16], done_trigger[16];
	/* the last result */
	int result; /* CHECKER_* (checker.h) or CHECKRUN_ERROR; -1: none yet */
	uint64_t time_ms, runs;
	size_t findings;
	char first[512];
	uint64_t cut_seq; /* ad-guard: e->cut.seq when the running check was asked for */
};

/* ad-guard (issue 18): cutoff.c, the sandboxes cut off (their bridge ports
 * down) from another program's nftables change until a check requested
 * after it proves containment (docs/engine.md, "Cut off until proven").
 * Control thread only. */
struct engine_cutoff {
	bool active;
	uint64_t seq; /* changes seen: only a check asked for after the last lifts it */
	uint64_t since_ms, since_mono; /* when it began (real, monotonic) */
	uint64_t count, failures;      /* cut-offs begun; ports that could not be taken down */
	uint64_t overflows;	       /* rtnetlink event sockets that lost events (ENOBUFS) */
	char why[160];		       /* the change that began (or last renewed) it */
	struct nft_port *downed;       /* the ports it took down: brought up again at the end */
	size_t n_downed, cap;
	unsigned br_flags;   /* the bridge's ifi_flags, as last seen (a dump found it first) */
	uint64_t br_lift_ms; /* until then (monotonic), a lifted cut-off's carrier event may come */
	bool confirming;     /* a check lost containment: the next one decides the cut */
	bool armed;	     /* a check proved since the engine started (cutoff_on_loss) */
};

struct engine {
	struct config cfg;
	enum nft_queue_path qpath;
	pthread_mutex_t pol_lock; /* guards policy (the pointer, not the object) */
	struct policy *policy;
	struct dnsguard *dg;
	struct dnsreply dnsr;
	struct flow_registry *flows;
	struct portmap ports;
	uint32_t br_ifindex;
	struct qthread *q;
	size_t nq;
	atomic_bool stop;
	uint64_t start_ms;
	int ctl_fd, sig_fd, link_fd;
	int route_fd, nft_fd; /* routing rule/route events; nf_tables events */
	struct nftwatch nftw;
	int nfq_proc_fd;	/* /proc/net/netfilter/nfnetlink_queue */
	struct logc *ctl_lc;	/* the control thread's own log client */
	uint64_t pledged_conns; /* its connection the owed records were pledged on */
	/* a new logd session seen by the control thread (engine_dns_repledge),
	 * counted before it pledges what is owed again: a queue thread whose
	 * ring is older checks that ring is alive before it pledges in it */
	_Atomic uint64_t logd_gen;
	struct quota_stats quota; /* refusals over the tables' per-sandbox quotas */
	bool verbose;		  /* log every verdict (debug) */
	struct engine_check chk;
	/* ad-ops (issue 18): the guard put back, and foreign nftables
	 * changes checked (control thread only; metrics.c) */
	struct engine_guard_stats {
		uint64_t tables_ok, tables_failed, routing_ok, routing_failed, other;
	} guard;
	struct engine_cutoff cut; /* ad-guard (issue 18) */
	struct rulehits *hits;	  /* ad-guard: the policy's rule hits (under pol_lock, as policy) */
	struct httpm httpm;	  /* ad-guard: HTTP /metrics (control thread only) */
	/* flood (issue 20): the new-flow limit's drops already in the log,
	 * per sandbox of the tables in force (limitlog.c; control thread) */
	struct engine_limitlog {
		uint64_t *logged; /* NULL before the first install */
		size_t n;
		uint64_t since_ms; /* when logged was last brought up to date */
	} limlog;
};

/* Current policy with a reference (caller unrefs). */
struct policy *engine_policy_get(struct engine *e);
/* ad-guard: the current policy's rule hit table with a reference
 * (rulehits_unref). */
struct rulehits *engine_hits_get(struct engine *e);

/* queue.c */
int queue_open(struct qthread *t, struct pc_err *err);
void *queue_thread_main(void *arg);
void queue_close(struct qthread *t);
/* The hold before a read (docs/engine.md, "The pipeline"): whether the
 * thread holds, and whether the read it is about to make follows a hold. */
struct qgather {
	bool held;	     /* the coming read follows a hold */
	bool primed;	     /* avgw holds a held read's size */
	unsigned avgw;	     /* packets per held read, moving average, times its weight */
	unsigned probe_left; /* held reads left before the average is judged */
	uint64_t probe_ms;   /* not holding: when holding is tried again */
};
/* How long the thread holds its next read (µs, 0: none) after a read of
 * last packets, at now_ms: under load, the packets of the hold are read as
 * one batch, for as long as a held read gathers enough to pay for it. */
unsigned queue_gather_hold_us(struct qgather *g, size_t last, uint64_t now_ms);
/* The read that followed: n packets (recvmmsg's n), at now_ms. */
void queue_gather_note(struct qgather *g, int n, uint64_t now_ms);
/* What a read of the NFQUEUE socket (recvmmsg's n, and errno when n < 0)
 * says of its queue, for held_drained: QREAD_EMPTY, it was empty when the
 * read ended; QREAD_SHORT, fewer than a full batch: empty, unless the read
 * stopped at an overflow, which the next read reports (QREAD_OVERFLOW);
 * QREAD_FULL or QREAD_NOTHING (interrupted, another error): nothing known. */
enum qread { QREAD_NOTHING, QREAD_EMPTY, QREAD_SHORT, QREAD_FULL, QREAD_OVERFLOW };
enum qread queue_read_kind(int n, int err);
/* Kernel counters of queue num from /proc/net/netfilter/nfnetlink_queue
 * (proc_fd: that file, opened while still root). */
int queue_kernel_stats(int proc_fd, uint16_t num, uint64_t *queue_dropped, uint64_t *user_dropped);

/* engine.c */
void engine_init(struct engine *e); /* zero state, fds -1, locks */
int engine_setup(struct engine *e, const char *config_path, struct pc_err *err);
int engine_start_threads(struct engine *e, struct pc_err *err);
void engine_shutdown(struct engine *e);
/* Recompile the policy and swap it in; on error the old one stays and err
 * says why (file:line:col). On success the caller asks for the check
 * (checkrun_request, trigger "reload") before the control loop serves
 * anything else: after its answer, which need not wait for the
 * expectation the check is given (at 1,000 sandboxes the ruleset built
 * again, ~15 ms). */
int engine_reload(struct engine *e, struct pc_err *err);
/* Rebuild the port set after link changes. */
int engine_ports_refresh(struct engine *e, bool force, struct pc_err *err);
/* Hand the DNS guard the gateway's addresses and sandbox subnets again
 * (links_local_prefixes); on failure the previous set stays. */
int engine_local_refresh(struct engine *e, struct pc_err *err);
/* What only the engine requires of the configuration (uplinks set, and
 * neither the bridge nor lo). */
int engine_config_valid(const struct config *cfg, struct pc_err *err);
/* Another program changed our tables (nftwatch): reinstall them, log,
 * check again. */
void engine_tables_restore(struct engine *e);
/* Another program changed other nftables tables (e->nftw.other): check
 * containment again at once (ad-ops, issue 18). */
void engine_nft_other_changed(struct engine *e);
/* A routing rule or route event: re-add whatever of ours is missing. */
void engine_routing_restore(struct engine *e);
/* Periodic: prune the flow registry against conntrack. */
void engine_housekeeping(struct engine *e);
/* Each round of the control thread: when its connection to logd is a new
 * one (logd restarted, and with it the pledges it held), pledge every
 * record still owed again (docs/logd.md, "Pledges"). */
void engine_dns_repledge(struct engine *e);

/* limitlog.c (flood, issue 20): tick: one refused connect record per
 * sandbox whose new-flow limit dropped packets since the last summary logd
 * acknowledged (housekeeping, and before the tables are replaced);
 * tables_new: the tables of pol were just installed, their counters start
 * at 0; free: at shutdown. */
void limitlog_tick(struct engine *e);
void limitlog_tables_new(struct engine *e, const struct policy *pol);
void limitlog_free(struct engine *e);

/* control.c: the main thread's loop (signals, control socket, links). */
int control_open(struct engine *e, struct pc_err *err);
int control_loop(struct engine *e);
/* The status JSON into a malloc'ed string. */
int control_status_json(struct engine *e, char **out);

/* checkrun.c. start: fork the helper (as root, before the drop; fatal on
 * failure). request: ask for a check after a change ("start", "reload",
 * "ports"); never waits. readable: the helper's socket (chk.fd) is
 * readable — log, record and keep the result. */
int checkrun_start(struct engine *e, struct pc_err *err);
void checkrun_stop(struct engine *e);
void checkrun_request(struct engine *e, const char *trigger);
/* The same for an event that changes nothing a running check is about (a
 * route, rule or link event while cut off): the running check is repeated
 * under its own trigger, else one with this trigger runs. */
void checkrun_repeat(struct engine *e, const char *trigger);
void checkrun_readable(struct engine *e);
const char *checkrun_result_name(int result); /* "proven", ..., "none" */
/* Append ,"check":{...} to the status JSON. 0 or PC_ENOMEM. */
int checkrun_status_json(const struct engine *e, char **buf, size_t *len);

/* cutoff.c (ad-guard, issue 18). begin: another program changed nftables
 * (why: what, for the journal): take every sandbox port down now, and
 * count this change, so only a check asked for after it may lift the cut.
 * enforce: while cut off, take down any port that is up again (a port
 * attached, or brought up by someone else). check_done: a check finished
 * with result; proven, and asked for after the last change: the ports it
 * took down come up again. on_loss: a check of a link event or of the
 * interval just found containment not proven, and one proved since the
 * engine started: confirmed by the next check, a change opened a way out:
 * cut off, as for a foreign change, and check again. shutdown: free; the ports stay down (fail
 * closed) unless engine.remove_table_on_exit. */
void cutoff_begin(struct engine *e, const char *why);
void cutoff_enforce(struct engine *e);
void cutoff_check_done(struct engine *e, int result);
void cutoff_on_loss(struct engine *e);
void cutoff_shutdown(struct engine *e);
/* What a read of the link or the routing monitor's pending events means
 * (issue 31). change: anything but the engine's own doing (its rules and
 * blackhole routes as it adds them, the ports the cut-off took down going
 * down); foreign: a routing change that may open a way out once the
 * ruleset is gone (a rule at or before the engine's found-all rule, a
 * route added to the blackhole table, a forwarding one to table local);
 * rules: another program's rule or blackhole-table route removed; what:
 * the first foreign (else changed) object, for the journal. */
struct cutoff_events {
	struct engine *e;
	bool routing; /* read from the routing monitor (else the link one) */
	bool change, foreign, rules;
	bool links; /* a link stacked on the bridge or a port, or the bridge itself, changed */
	bool lost;  /* ENOBUFS: events lost, the state read again whole */
	char what[200];
};
/* Read fd's pending events into ev (zeroed first); links_monitor_read's
 * return. act: foreign begins a cut-off (and a check); while cut off, any
 * change counts as one (only a check asked for after it may lift the cut)
 * and is checked again; otherwise rules, events lost, or a link stacked
 * on the bridge or a port ask for a check (status follows the facts; a
 * way out found then cuts off: cutoff_on_loss). */
int cutoff_events_read(struct engine *e, int fd, struct cutoff_events *ev);
void cutoff_events_act(struct engine *e, const struct cutoff_events *ev);
/* ,"cutoff":{...} for status; the cut-off's metrics. */
int cutoff_status_json(const struct engine *e, char **buf, size_t *len);
void cutoff_metrics(struct pc_prom *b, const struct engine *e);

/* rulehits.c (ad-guard, issue 18 point 10): per-rule hit counters, one
 * table per policy (it holds a reference to it). new: a table of 0s for
 * every allow entry of pol; count (queue threads, lock-free): the
 * decision's final verdict let a flow or DNS query through by rule
 * d->rec.rule; status_json appends ,"rules":[...] (the entries with a
 * hit: the reply stays small with thousands of entries); metrics the family
 * portcullis_engine_rule_hits_total{rule}. h may be NULL (nothing). */
struct rulehits;
int rulehits_new(struct policy *pol, struct rulehits **out);
struct rulehits *rulehits_ref(struct rulehits *h);
void rulehits_unref(struct rulehits *h);
void rulehits_count(struct rulehits *h, const struct decision *d);
int rulehits_status_json(struct rulehits *h, char **buf, size_t *len);
void rulehits_metrics(struct pc_prom *b, struct rulehits *h);

/* httpmetrics.c. open: bind the listener the configuration asks for (none
 * by default; as root, before the drop); close. pollfds: fill
 * HTTPM_POLLFDS entries of p (the listener, then the clients); handle:
 * after poll, with the same entries; waiting: a client is connected. */
struct pollfd;
int httpm_open(struct engine *e, struct pc_err *err);
void httpm_close(struct engine *e);
size_t httpm_pollfds(struct engine *e, struct pollfd *p);
void httpm_handle(struct engine *e, const struct pollfd *p, uint64_t now);
bool httpm_waiting(const struct engine *e);

/* checkmsg.c: the check helper channel (typed, versioned, length-checked;
 * the framing of common/msg.c). engine -> helper: CHK_REQUEST (the
 * trigger) with a sealed memfd holding a CHK_EXPECT message; helper ->
 * engine: CHK_RESULT or CHK_ERROR. The helper decodes the engine's bytes as
 * hostile (the engine handles sandbox packets). docs/engine.md. */
#define CHK_PROTO	 0x434b /* "CK" */
#define CHK_VERSION	 1
#define CHK_REQ_MAX	 64
#define CHK_RESULT_MAX	 65536 /* findings beyond this are counted, not sent */
#define CHK_EXPECT_MAX	 (256u << 20)
#define CHK_EXPECT_PORTS 8192 /* every policy port: 1,000s of sandboxes (issue 20) */
#define CHK_TEXT_MAX	 4096 /* an error's text */
enum chk_type { CHK_REQUEST = 1, CHK_EXPECT = 2, CHK_RESULT = 3, CHK_ERROR = 4 };
int chkmsg_request_encode(const char *trigger, uint8_t *buf, size_t len, struct pc_err *err);
int chkmsg_request_decode(const uint8_t *buf, size_t len, char *trigger, size_t tlen,
			  struct pc_err *err);
/* The decoded expectation: ex borrows names, ports and canon (a malloc'ed
 * NUL-terminated copy, freed by chkmsg_expect_free). */
struct chk_expect_in {
	struct checker_expect ex;
	char names[CHK_EXPECT_PORTS][PC_IFNAMSIZ];
	const char *ports[CHK_EXPECT_PORTS];
	char *canon;
};
/* Into a malloc'ed *buf of *len bytes. */
int chkmsg_expect_encode(const struct checker_expect *ex, uint8_t **buf, size_t *len,
			 struct pc_err *err);
int chkmsg_expect_decode(const uint8_t *buf, size_t len, struct chk_expect_in *in,
			 struct pc_err *err);
void chkmsg_expect_free(struct chk_expect_in *in);
/* A result or an error; the encoders return the length written into buf. */
struct chk_result {
	enum chk_type type; /* CHK_RESULT or CHK_ERROR */
	int status;	    /* RESULT: CHECKER_* */
	uint64_t time_ms;
	uint32_t findings;   /* how many the check found */
	uint32_t shown;	     /* how many of their texts follow in texts */
	const char *message; /* ERROR: why the check could not run */
	char *texts;	     /* shown NUL-terminated texts back to back (malloc'ed) */
};
int chkmsg_result_encode(const struct checker_result *res, uint8_t *buf, size_t len,
			 struct pc_err *err);
int chkmsg_error_encode(const char *why, uint8_t *buf, size_t len, struct pc_err *err);
int chkmsg_result_decode(const uint8_t *buf, size_t len, struct chk_result *out,
			 struct pc_err *err);
void chkmsg_result_free(struct chk_result *r);

/* metrics.c: the Prometheus text of `metrics` on engine.sock (malloc'ed;
 * 0 or PC_ENOMEM); counting one decision's verdict (queue threads); the
 * label a record's reason counts under. */
int engine_metrics_text(struct engine *e, char **out);
void metrics_count_verdict(struct qthread *t, const struct decision *d);
int metrics_reason(const char *reason);
const char *metrics_reason_label(const char *reason);

#endif
