/* Packets built as bytes: the IP, TCP, DNS and TLS ClientHello a sandbox
 * would send, for `portcullis policy test` (engine/whatif.c), which judges
 * them with the engine's own decision, and for the unit tests, the spec
 * driver and fuzz seeds, which feed the engine the same messages. One
 * builder, so that what policy test asks is what the tests check. */
#include "common/pc.h"

#include <string.h>
#include <sys/socket.h>

size_t pc_wire_ip(uint8_t *b, uint8_t proto, size_t l4len, uint8_t hop, const struct pc_addr *s,
		  const struct pc_addr *d)
{
	if (s->family == AF_INET) {
		memset(b, 0, 20);
		b[0] = 0x45;
		b[2] = (uint8_t)((20 + l4len) >> 8);
		b[3] = (uint8_t)(20 + l4len);
		b[8] = hop;
		b[9] = proto;
		memcpy(b + 12, s->a, 4);
		memcpy(b + 16, d->a, 4);
		return 20;
	}
	memset(b, 0, 40);
	b[0] = 0x60;
	b[4] = (uint8_t)(l4len >> 8);
	b[5] = (uint8_t)l4len;
	b[6] = proto;
	b[7] = hop;
	memcpy(b + 8, s->a, 16);
	memcpy(b + 24, d->a, 16);
	return 40;
}

size_t pc_wire_tcp(uint8_t *b, uint16_t sp, uint16_t dp, uint8_t flags, uint32_t seq, uint32_t ack)
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

size_t pc_wire_name(uint8_t *b, const char *name)
{
	size_t o = 0;

	if (strlen(name) > 253)
		return 0;
	while (*name) {
		const char *dot = strchr(name, '.');
		size_t l = dot ? (size_t)(dot - name) : strlen(name);

		if (l == 0 || l > 63)
			return 0;
		b[o++] = (uint8_t)l;
		memcpy(b + o, name, l);
		o += l;
		name += l + (dot ? 1 : 0);
	}
	b[o++] = 0;
	return o;
}

size_t pc_wire_dns_question(uint8_t *b, uint16_t id, bool answer, uint16_t an, const char *name,
			    uint16_t qtype)
{
	size_t o = 12, n;

	memset(b, 0, 12);
	b[0] = (uint8_t)(id >> 8);
	b[1] = (uint8_t)id;
	b[2] = answer ? 0x81 : 0x01; /* QR for answers, RD */
	b[3] = answer ? 0x80 : 0x00; /* RA */
	b[5] = 1;
	b[6] = (uint8_t)(an >> 8);
	b[7] = (uint8_t)an;
	n = pc_wire_name(b + o, name);
	if (!n)
		return 0;
	o += n;
	b[o++] = (uint8_t)(qtype >> 8);
	b[o++] = (uint8_t)qtype;
	b[o++] = 0;
	b[o++] = 1;
	return o;
}

size_t pc_wire_dns_addr(uint8_t *b, const struct pc_addr *a)
{
	size_t o = 0, al = a->family == AF_INET6 ? 16 : 4;
	uint16_t t = al == 16 ? 28 : 1;

	b[o++] = 0xc0; /* the name at offset 12: the question's */
	b[o++] = 0x0c;
	b[o++] = (uint8_t)(t >> 8);
	b[o++] = (uint8_t)t;
	memcpy(b + o, "\x00\x01\x00\x00\x01\x2c\x00", 7); /* IN, TTL 300 */
	o += 7;
	b[o++] = (uint8_t)al;
	memcpy(b + o, a->a, al);
	return o + al;
}

size_t pc_wire_client_hello(uint8_t *b, const char *sni)
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
