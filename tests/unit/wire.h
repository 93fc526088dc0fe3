/* Hand-made wire bytes the engine parses, shared by the engine's unit tests,
 * the spec driver and the held-flow fuzz target so that all of them feed it
 * the same messages: IPv4, IPv6 and TCP headers, a DNS query or answer
 * with A/AAAA records, and the smallest TLS ClientHello the held-flow
 * parser accepts. Plain C (no
 * Check): fuzz targets and spec/ include it too. */
#ifndef PC_TEST_WIRE_H
#define PC_TEST_WIRE_H

#include "common/pc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

/* An IPv4 header (20 bytes, no options, TTL 64, checksum left 0) before an
 * l4len-byte proto payload, addresses as 4 bytes each. */
static inline size_t wire_ip4_raw(uint8_t *b, uint8_t proto, size_t l4len, const uint8_t *src,
				  const uint8_t *dst)
{
	memset(b, 0, 20);
	b[0] = 0x45;
	b[2] = (uint8_t)((20 + l4len) >> 8);
	b[3] = (uint8_t)(20 + l4len);
	b[8] = 64;
	b[9] = proto;
	memcpy(b + 12, src, 4);
	memcpy(b + 16, dst, 4);
	return 20;
}

/* The same with the addresses written "10.0.0.1". */
static inline size_t wire_ip4(uint8_t *b, uint8_t proto, size_t l4len, const char *src,
			      const char *dst)
{
	uint8_t s[4] = {0}, d[4] = {0};

	inet_pton(AF_INET, src, s);
	inet_pton(AF_INET, dst, d);
	return wire_ip4_raw(b, proto, l4len, s, d);
}

/* An IPv6 header (40 bytes, hop limit hl) before plen bytes of next
 * header nh. */
static inline size_t wire_ip6(uint8_t *b, uint8_t nh, size_t plen, uint8_t hl, const char *src,
			      const char *dst)
{
	memset(b, 0, 40);
	b[0] = 0x60;
	b[4] = (uint8_t)(plen >> 8);
	b[5] = (uint8_t)plen;
	b[6] = nh;
	b[7] = hl;
	inet_pton(AF_INET6, src, b + 8);
	inet_pton(AF_INET6, dst, b + 24);
	return 40;
}

/* A TCP header (20 bytes, no options, window and checksum 0). */
static inline size_t wire_tcp(uint8_t *b, uint16_t sp, uint16_t dp, uint8_t flags, uint32_t seq,
			      uint32_t ack)
{
	memset(b, 0, 20);
	b[0] = (uint8_t)(sp >> 8);
	b[1] = (uint8_t)sp;
	b[2] = (uint8_t)(dp >> 8);
	b[3] = (uint8_t)dp;
	for (int i = 0; i < 4; i++) {
		b[4 + i] = (uint8_t)(seq >> (24 - 8 * i));
		b[8 + i] = (uint8_t)(ack >> (24 - 8 * i));
	}
	b[12] = 5 << 4;
	b[13] = flags;
	return 20;
}

/* name in DNS labels, no compression; returns its length */
static inline size_t wire_name(uint8_t *b, const char *name)
{
	size_t o = 0;

	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		b[o++] = (uint8_t)l;
		memcpy(b + o, name, l);
		o += l;
		name += l + (dot ? 1 : 0);
	}
	b[o++] = 0;
	return o;
}

/* A DNS header and one question (class IN): a query, or with answer set
 * the head of a response announcing an records that the caller appends. */
static inline size_t wire_dns_question(uint8_t *b, uint16_t id, bool answer, uint16_t an,
				       const char *name, uint16_t qtype)
{
	size_t o = 12;

	memset(b, 0, 12);
	b[0] = (uint8_t)(id >> 8);
	b[1] = (uint8_t)id;
	b[2] = answer ? 0x81 : 0x01; /* QR for answers, RD */
	b[3] = answer ? 0x80 : 0x00; /* RA */
	b[5] = 1;
	b[7] = (uint8_t)an;
	o += wire_name(b + o, name);
	b[o++] = (uint8_t)(qtype >> 8);
	b[o++] = (uint8_t)qtype;
	b[o++] = 0;
	b[o++] = 1;
	return o;
}

/* An A or AAAA record (by a's family) for the question's name, TTL 300. */
static inline size_t wire_dns_addr(uint8_t *b, const struct pc_addr *a)
{
	size_t o = 0, al = a->family == AF_INET6 ? 16 : 4;
	uint16_t t = al == 16 ? 28 : 1;

	b[o++] = 0xc0; /* the name at offset 12 */
	b[o++] = 0x0c;
	b[o++] = (uint8_t)(t >> 8);
	b[o++] = (uint8_t)t;
	memcpy(b + o, "\x00\x01\x00\x00\x01\x2c\x00", 7);
	o += 7;
	b[o++] = (uint8_t)al;
	memcpy(b + o, a->a, al);
	return o + al;
}

/* A ClientHello record naming sni (NULL: no server_name extension) into b,
 * which must hold 60 bytes more than the name; returns its length. */
static inline size_t wire_client_hello(uint8_t *b, const char *sni)
{
	size_t n = sni ? strlen(sni) : 0, o = 0, ext = sni ? 9 + n : 0;
	size_t body = 2 + 32 + 1 + 4 + 2 + 2 + ext;

	b[o++] = 0x16; /* handshake record, TLS 1.0 framing */
	b[o++] = 3;
	b[o++] = 1;
	b[o++] = (uint8_t)((body + 4) >> 8);
	b[o++] = (uint8_t)(body + 4);
	b[o++] = 1; /* ClientHello */
	b[o++] = 0;
	b[o++] = (uint8_t)(body >> 8);
	b[o++] = (uint8_t)body;
	b[o++] = 3;
	b[o++] = 3;
	memset(b + o, 0x42, 32);
	o += 32;
	b[o++] = 0;			      /* session id */
	memcpy(b + o, "\x00\x02\x13\x01", 4); /* one cipher suite */
	o += 4;
	memcpy(b + o, "\x01\x00", 2); /* null compression */
	o += 2;
	b[o++] = (uint8_t)(ext >> 8);
	b[o++] = (uint8_t)ext;
	if (!sni)
		return o;
	b[o++] = 0; /* server_name */
	b[o++] = 0;
	b[o++] = (uint8_t)((n + 5) >> 8);
	b[o++] = (uint8_t)(n + 5);
	b[o++] = (uint8_t)((n + 3) >> 8);
	b[o++] = (uint8_t)(n + 3);
	b[o++] = 0; /* host_name */
	b[o++] = (uint8_t)(n >> 8);
	b[o++] = (uint8_t)n;
	memcpy(b + o, sni, n);
	return o + n;
}

#endif
