/* engine: portcullisd, the verdict engine — the NFQUEUE loop, the
 * decision, held flows, DNS over TCP, the control socket. What other
 * modules use of it: the packet parser (the spec's model and the proofs
 * read it) and the control socket protocol (the CLI). */
#ifndef PC_ENGINE_H
#define PC_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"
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

struct pkt {
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
int pkt_replace_payload(const uint8_t *pkt, size_t len, const struct pkt *p,
			   const uint8_t *payload, size_t plen, uint8_t **out);

/* Build a complete IPv4/IPv6 + UDP packet from src:sport to dst:dport with
 * payload into buf; returns its length, or <0 if buf is too small. */
int pkt_build_udp(const struct pc_endpoint *src, const struct pc_endpoint *dst,
		     const uint8_t *payload, size_t len, uint8_t *buf, size_t buflen);

/* ======================================================================
 * Control socket: <run_dir>/engine.sock, SOCK_SEQPACKET. Typed, versioned,
 * length-checked messages (common/pc.h, "engine.sock"; common/engmsg.c): a
 * request is a header whose type is status, reload or metrics; the reply is
 * the matching typed reply or an error (code, message). The status reply
 * carries the policy hash and whether a check runs as typed fields, and the
 * status object as JSON text for `portcullis status` (version, pid,
 * uptime_s, policy, queue_path, queues[...], flows, held, log{...},
 * dnsguard{...}, limits, quotas, check); metrics, Prometheus text 0.0.4.
 * Anyone who can open the socket may ask for status; only uid 0 may reload
 * (SO_PEERCRED). See docs/engine.md.
 * ====================================================================== */



#endif
