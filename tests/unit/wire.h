/* Hand-made wire bytes the engine parses, shared by the engine's unit tests,
 * the spec driver and the held-flow fuzz target so that all of them feed it
 * the same messages: IPv4, IPv6 and TCP headers, a DNS query or answer
 * with A/AAAA records, and the smallest TLS ClientHello the held-flow
 * parser accepts (common/wire.c builds them; here are the forms that take
 * addresses as text). Plain C (no Check): fuzz targets and tests/spec/ include
 * it too. */
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
	struct pc_addr s = {.family = AF_INET}, d = {.family = AF_INET};

	memcpy(s.a, src, 4);
	memcpy(d.a, dst, 4);
	return pc_wire_ip(b, proto, l4len, 64, &s, &d);
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
	struct pc_addr s = {.family = AF_INET6}, d = {.family = AF_INET6};

	inet_pton(AF_INET6, src, s.a);
	inet_pton(AF_INET6, dst, d.a);
	return pc_wire_ip(b, nh, plen, hl, &s, &d);
}

/* The TCP, DNS and ClientHello builders are common/wire.c's, which
 * `policy test` uses too: wire_tcp, wire_name, wire_dns_question,
 * wire_dns_addr and wire_client_hello name them here. */
#define wire_tcp	  pc_wire_tcp
#define wire_name	  pc_wire_name
#define wire_dns_question pc_wire_dns_question
#define wire_dns_addr	  pc_wire_dns_addr
#define wire_client_hello pc_wire_client_hello

#endif
