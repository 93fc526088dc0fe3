/* Hand-made wire bytes the engine parses, shared by the engine's unit tests,
 * the spec driver and the held-flow fuzz target so that all of them feed it
 * the same messages: a DNS query or answer with A/AAAA records, and the
 * smallest TLS ClientHello the held-flow parser accepts. Plain C (no
 * Check): fuzz targets and spec/ include it too. */
#ifndef PC_TEST_WIRE_H
#define PC_TEST_WIRE_H

#include "common/pc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

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
