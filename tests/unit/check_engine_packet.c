/* The engine's packet parser: every header it accepts, every malformation
 * it refuses, fragments, IPv6 extension headers, and the UDP builder and
 * payload rewrite whose checksums must verify. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "engine/engine_int.h"
#include "tests/unit/unit.h"
#include "tests/unit/wire.h"

START_TEST(ipv4_tcp_syn)
{
	uint8_t b[64];
	struct pkt p;
	size_t n = wire_ip4(b, IPPROTO_TCP, 20, "10.203.0.11", "198.51.100.22");

	n += wire_tcp(b + n, 40000, 22, 0x02, 1000, 0);
	ck_assert_int_eq(pkt_parse(b, n, &p), PKT_OK);
	ck_assert_int_eq(p.family, AF_INET);
	ck_assert_int_eq(p.proto, IPPROTO_TCP);
	ck_assert_int_eq(p.sport, 40000);
	ck_assert_int_eq(p.dport, 22);
	ck_assert_int_eq(p.tcp_flags, 0x02);
	ck_assert_uint_eq(p.tcp_seq, 1000);
	ck_assert_uint_eq(p.payload_len, 0);
	ck_assert_uint_eq(p.l3_len, 20);
	ck_assert(!p.truncated);
	ck_assert_int_eq(p.src.a[3], 11);
	ck_assert_int_eq(p.dst.a[0], 198);
}
END_TEST

START_TEST(ipv4_options_and_padding)
{
	uint8_t b[80];
	struct pkt p;
	size_t n;

	wire_ip4(b, IPPROTO_TCP, 24, "10.0.0.1", "10.0.0.2");
	b[0] = 0x46; /* one 4-byte option word */
	b[3] = 20 + 24;
	memset(b + 20, 1, 4);
	n = 24 + wire_tcp(b + 24, 1, 2, 0x02, 0, 0);
	/* Link-layer padding past the IP length is not payload. */
	memset(b + n, 0xee, 6);
	ck_assert_int_eq(pkt_parse(b, n + 6, &p), PKT_OK);
	ck_assert_uint_eq(p.l3_len, 24);
	ck_assert_uint_eq(p.payload_len, 0);
}
END_TEST

/* The intact SYN of ipv4_malformed with one byte broken. */
static const struct {
	const char *what;
	size_t at;
	uint8_t v;
} ipv4_broken[] = {
    {"ihl 4", 0, 0x44},
    {"ihl 15 = 60 bytes > 40", 0, 0x4f},
    {"version 5", 0, 0x55},
    {"total length 10, shorter than the header", 3, 10},
    {"reserved flag", 6, 0x80},
    {"TCP data offset 4", 32, 4 << 4},
    {"TCP data offset beyond the packet", 32, 15 << 4},
};

START_TEST(ipv4_malformed)
{
	uint8_t ok[64], b[64];
	struct pkt p;
	size_t n = wire_ip4(ok, IPPROTO_TCP, 20, "10.0.0.1", "10.0.0.2");

	n += wire_tcp(ok + n, 1, 2, 0x02, 0, 0);
	ck_assert_int_eq(pkt_parse(ok, n, &p), PKT_OK);
	ck_assert_int_eq(pkt_parse(ok, 0, &p), PKT_MALFORMED);
	ck_assert_int_eq(pkt_parse(ok, 19, &p), PKT_MALFORMED);
	ck_assert_int_eq(pkt_parse(ok, n - 1, &p), PKT_MALFORMED); /* TCP header cut */
	for (size_t i = 0; i < sizeof(ipv4_broken) / sizeof(ipv4_broken[0]); i++) {
		memcpy(b, ok, n);
		b[ipv4_broken[i].at] = ipv4_broken[i].v;
		ck_assert_msg(pkt_parse(b, n, &p) == PKT_MALFORMED, "%s: not refused",
			      ipv4_broken[i].what);
	}
}
END_TEST

START_TEST(ipv4_fragments)
{
	uint8_t b[64];
	struct pkt p;
	size_t n = wire_ip4(b, IPPROTO_UDP, 16, "10.0.0.1", "10.0.0.2");

	b[n + 4] = 0;
	b[n + 5] = 16;
	n += 16;
	b[6] = 0x20; /* MF: first fragment */
	ck_assert_int_eq(pkt_parse(b, n, &p), PKT_FRAGMENT);
	b[6] = 0;
	b[7] = 10; /* offset 80: a later fragment */
	ck_assert_int_eq(pkt_parse(b, n, &p), PKT_FRAGMENT);
	b[7] = 0;
	b[6] = 0x40; /* DF only: a whole packet */
	ck_assert_int_eq(pkt_parse(b, n, &p), PKT_OK);
}
END_TEST

START_TEST(ipv4_udp_lengths)
{
	uint8_t b[64];
	struct pkt p;
	size_t n = wire_ip4(b, IPPROTO_UDP, 12, "10.0.0.1", "10.0.0.2");

	memset(b + n, 0, 12);
	b[n + 1] = 53;
	b[n + 3] = 53;
	b[n + 5] = 12;
	memcpy(b + n + 8, "abcd", 4);
	ck_assert_int_eq(pkt_parse(b, n + 12, &p), PKT_OK);
	ck_assert_uint_eq(p.payload_len, 4);
	ck_assert_mem_eq(p.payload, "abcd", 4);
	b[n + 5] = 7; /* UDP length < 8 */
	ck_assert_int_eq(pkt_parse(b, n + 12, &p), PKT_MALFORMED);
	b[n + 5] = 13; /* more than the IP packet holds */
	ck_assert_int_eq(pkt_parse(b, n + 12, &p), PKT_MALFORMED);
	/* A capture shorter than the IP length: parsed, marked truncated. */
	b[n + 5] = 12;
	b[3] = 20 + 100;
	ck_assert_int_eq(pkt_parse(b, n + 12, &p), PKT_OK);
	ck_assert(p.truncated);
}
END_TEST

START_TEST(truncated_capture)
{
	uint8_t b[64];
	struct pkt p;
	size_t n = wire_ip4(b, IPPROTO_UDP, 1008, "10.0.0.1", "10.0.0.2");

	memset(b + n, 0, 20);
	b[n + 4] = (uint8_t)(1008 >> 8);
	b[n + 5] = (uint8_t)1008;
	/* 28 of 1028 bytes captured: the header is whole, the payload not. */
	ck_assert_int_eq(pkt_parse(b, n + 20, &p), PKT_OK);
	ck_assert(p.truncated);
	ck_assert_uint_eq(p.payload_len, 12);
}
END_TEST

START_TEST(icmp_and_other_protocols)
{
	uint8_t b[64];
	struct pkt p;
	size_t n = wire_ip4(b, IPPROTO_ICMP, 8, "10.0.0.1", "10.0.0.2");

	memset(b + n, 0, 8);
	b[n] = 8; /* echo request */
	ck_assert_int_eq(pkt_parse(b, n + 8, &p), PKT_OK);
	ck_assert_int_eq(p.icmp_type, 8);
	ck_assert_int_eq(pkt_parse(b, n + 4, &p), PKT_MALFORMED);
	wire_ip4(b, IPPROTO_GRE, 4, "10.0.0.1", "10.0.0.2");
	ck_assert_int_eq(pkt_parse(b, 24, &p), PKT_OK);
	ck_assert_int_eq(p.proto, IPPROTO_GRE);
	ck_assert_int_eq(p.sport, 0);
}
END_TEST

START_TEST(ipv6_extension_headers)
{
	uint8_t b[160];
	struct pkt p;
	size_t n =
	    wire_ip6(b, IPPROTO_HOPOPTS, 8 + 16 + 8 + 20, 255, "fd00:203::11", "2001:db8:22::22");

	/* hop-by-hop (8) -> destination options (16) -> routing (8) -> TCP */
	memset(b + n, 0, 32);
	b[n] = IPPROTO_DSTOPTS;
	b[n + 1] = 0;
	b[n + 8] = IPPROTO_ROUTING;
	b[n + 9] = 1;
	b[n + 24] = IPPROTO_TCP;
	b[n + 25] = 0;
	n += 32;
	n += wire_tcp(b + n, 5555, 22, 0x02, 7, 0);
	ck_assert_int_eq(pkt_parse(b, n, &p), PKT_OK);
	ck_assert_int_eq(p.family, AF_INET6);
	ck_assert_int_eq(p.proto, IPPROTO_TCP);
	ck_assert_uint_eq(p.l3_len, 72);
	ck_assert_int_eq(p.dport, 22);
	ck_assert_int_eq(p.hoplimit, 255);
	/* hop-by-hop anywhere but first is malformed */
	b[40 + 8] = IPPROTO_HOPOPTS;
	ck_assert_int_eq(pkt_parse(b, n, &p), PKT_MALFORMED);
	b[40 + 8] = IPPROTO_ROUTING;
	/* an extension header longer than the packet */
	b[40 + 9] = 30;
	ck_assert_int_eq(pkt_parse(b, n, &p), PKT_MALFORMED);
}
END_TEST

START_TEST(ipv6_fragment_header)
{
	uint8_t b[128];
	struct pkt p;
	size_t n = wire_ip6(b, IPPROTO_FRAGMENT, 8 + 20, 255, "fd00::1", "fd00::2");

	memset(b + n, 0, 8);
	b[n] = IPPROTO_TCP;
	n += 8;
	n += wire_tcp(b + n, 1, 2, 0x02, 0, 0);
	/* atomic fragment (offset 0, M 0): a whole packet */
	ck_assert_int_eq(pkt_parse(b, n, &p), PKT_OK);
	ck_assert_int_eq(p.proto, IPPROTO_TCP);
	b[43] = 1; /* M */
	ck_assert_int_eq(pkt_parse(b, n, &p), PKT_FRAGMENT);
	b[43] = 0;
	b[42] = 1; /* offset 32 */
	ck_assert_int_eq(pkt_parse(b, n, &p), PKT_FRAGMENT);
}
END_TEST

START_TEST(ipv6_limits)
{
	uint8_t b[400];
	struct pkt p;
	size_t n = wire_ip6(b, IPPROTO_DSTOPTS, 8 * 12, 255, "fd00::1", "fd00::2");

	/* a chain of 12 destination-option headers: more than we follow */
	memset(b + n, 0, 8 * 12);
	for (int i = 0; i < 12; i++)
		b[n + 8 * i] = IPPROTO_DSTOPTS;
	ck_assert_int_eq(pkt_parse(b, n + 96, &p), PKT_MALFORMED);
	wire_ip6(b, IPPROTO_TCP, 0, 255, "fd00::1", "fd00::2"); /* payload length 0 (jumbo) */
	ck_assert_int_eq(pkt_parse(b, 60, &p), PKT_MALFORMED);
	ck_assert_int_eq(pkt_parse(b, 39, &p), PKT_MALFORMED);
	wire_ip6(b, IPPROTO_ICMPV6, 8, 255, "fe80::1", "ff02::1:ff00:1");
	memset(b + 40, 0, 8);
	b[40] = 135;
	ck_assert_int_eq(pkt_parse(b, 48, &p), PKT_OK);
	ck_assert_int_eq(p.icmp_type, 135);
}
END_TEST

static bool csum_ok(const struct pkt *p, const uint8_t *pkt, size_t len)
{
	uint8_t tmp[2048];
	size_t l4 = len - p->l4_off;
	size_t off = p->proto == IPPROTO_TCP ? 16 : 6;
	uint16_t want = (uint16_t)(pkt[p->l4_off + off] << 8 | pkt[p->l4_off + off + 1]);

	memcpy(tmp, pkt + p->l4_off, l4);
	tmp[off] = tmp[off + 1] = 0;
	return pkt_l4_csum(&p->src, &p->dst, p->proto, tmp, l4) == want;
}

START_TEST(udp_build_roundtrip)
{
	struct pc_endpoint s, d;
	uint8_t buf[256], *rw = NULL;
	struct pkt p;
	int n, m;

	for (int v6 = 0; v6 < 2; v6++) {
		ck_assert_int_eq(
		    pc_endpoint_parse(v6 ? "[2001:db8:53::53]:53" : "198.51.100.53:53", 0, &s), 0);
		ck_assert_int_eq(
		    pc_endpoint_parse(v6 ? "[fd00:203::11]:4242" : "10.203.0.11:4242", 0, &d), 0);
		n = pkt_build_udp(&s, &d, (const uint8_t *)"hello dns", 9, buf, sizeof(buf));
		ck_assert_int_eq(n, (v6 ? 40 : 20) + 8 + 9);
		ck_assert_int_eq(pkt_parse(buf, (size_t)n, &p), PKT_OK);
		ck_assert_int_eq(p.sport, 53);
		ck_assert_int_eq(p.dport, 4242);
		ck_assert_mem_eq(p.payload, "hello dns", 9);
		ck_assert(pc_addr_eq(&p.src, &s.addr));
		ck_assert(csum_ok(&p, buf, (size_t)n));
		m = pkt_replace_payload(buf, (size_t)n, &p, (const uint8_t *)"HELLO DNS", 9, &rw);
		ck_assert_int_eq(m, n);
		ck_assert_int_eq(pkt_parse(rw, (size_t)m, &p), PKT_OK);
		ck_assert_mem_eq(p.payload, "HELLO DNS", 9);
		ck_assert(csum_ok(&p, rw, (size_t)m));
		/* a different length is refused: framing must not change */
		{
			uint8_t *other = NULL;

			ck_assert_int_lt(
			    pkt_replace_payload(rw, (size_t)m, &p, (const uint8_t *)"x", 1, &other),
			    0);
			ck_assert_ptr_null(other);
		}
		free(rw);
		rw = NULL;
	}
	ck_assert_int_lt(pkt_build_udp(&s, &d, buf, 300, buf, 64), 0); /* too small */
}
END_TEST

START_TEST(tcp_payload_rewrite_checksum)
{
	uint8_t b[128], *rw = NULL;
	struct pkt p;
	size_t n = wire_ip4(b, IPPROTO_TCP, 24, "198.51.100.53", "10.203.0.11");

	n += wire_tcp(b + n, 53, 5000, 0x18, 99, 0);
	memcpy(b + n, "\x00\x02zz", 4);
	n += 4;
	ck_assert_int_eq(pkt_parse(b, n, &p), PKT_OK);
	ck_assert_int_eq(pkt_replace_payload(b, n, &p, (const uint8_t *)"\x00\x02yy", 4, &rw),
			 (int)n);
	ck_assert_int_eq(pkt_parse(rw, n, &p), PKT_OK);
	ck_assert(csum_ok(&p, rw, n));
	free(rw);
}
END_TEST

/* TCP options read as a receiver reads them (docs/spec.md S7b, S22b, H5a):
 * MPTCP wherever an option begins, options that cannot be read to their
 * end; not a 30 inside a value, nor after end of list. */
START_TEST(tcp_options_mptcp)
{
	static const struct {
		uint8_t len, o[40];
		bool mptcp;
	} cases[] = {
	    {0, {0}, false},
	    {4, {1, 1, 1, 1}, false},
	    {4, {30, 4, 0x01, 0x01}, true},			   /* MP_CAPABLE */
	    {12, {30, 12, 0x11, 0, 1, 2, 3, 4, 5, 6, 7, 8}, true}, /* MP_JOIN */
	    {24,
	     {2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7, 30, 4, 1, 1},
	     true},
	    {12, {1, 1, 8, 10, 30, 4, 1, 1, 30, 4, 1, 1}, false}, /* 30s in a timestamp */
	    {8, {0, 30, 4, 1, 1, 0, 0, 0}, false},		  /* after end of list */
	    {8, {2, 4, 5, 0xb4, 8, 12, 0, 0}, true},		  /* length past the header */
	    {4, {1, 1, 5, 1}, true},				  /* length 1 */
	    {4, {1, 1, 5, 0}, true},				  /* length 0 */
	    {4, {1, 1, 1, 5}, true},				  /* no room for a length */
	    {40, {30, 40}, true},				  /* the whole area */
	    {40, {8, 40}, false},				  /* another, the whole area */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t b[128];
		struct pkt p;
		size_t n =
		    wire_ip4(b, IPPROTO_TCP, 20 + cases[i].len, "10.203.0.11", "198.51.100.22");
		size_t t = n;

		n += wire_tcp(b + n, 40000, 443, 0x02, 1000, 0);
		b[t + 12] = (uint8_t)(((20 + cases[i].len) / 4) << 4);
		memcpy(b + n, cases[i].o, cases[i].len);
		n += cases[i].len;
		ck_assert_int_eq(pkt_parse(b, n, &p), PKT_OK);
		ck_assert_msg(p.tcp_syn_mptcp == cases[i].mptcp, "case %zu: %d", i,
			      (int)p.tcp_syn_mptcp);
		b[t + 13] = 0x10; /* the same options on an ACK: MPTCP is not negotiated there */
		ck_assert_int_eq(pkt_parse(b, n, &p), PKT_OK);
		ck_assert(!p.tcp_syn_mptcp);
		ck_assert_uint_eq(p.payload_len, 0);
	}
}
END_TEST

PC_UNIT_SUITE("packet", "parse", 0, ipv4_tcp_syn, ipv4_options_and_padding, ipv4_malformed,
	      ipv4_fragments, ipv4_udp_lengths, truncated_capture, icmp_and_other_protocols,
	      ipv6_extension_headers, ipv6_fragment_header, ipv6_limits, udp_build_roundtrip,
	      tcp_payload_rewrite_checksum, tcp_options_mptcp)
