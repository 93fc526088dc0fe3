/* The smallest TLS ClientHello the engine's held-flow parser accepts, shared
 * by the engine's unit tests, the spec driver and the held-flow fuzz target
 * so that all three feed it the same bytes. Plain C (no Check): fuzz
 * targets and spec/ include it too. */
#ifndef PC_TEST_TLSMSG_H
#define PC_TEST_TLSMSG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A ClientHello record naming sni (NULL: no server_name extension) into b,
 * which must hold 60 bytes more than the name; returns its length. */
static inline size_t tm_client_hello(uint8_t *b, const char *sni)
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
