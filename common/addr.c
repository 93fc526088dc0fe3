/* IPv4/IPv6 addresses, endpoints and prefixes as the policy and the
 * daemons write them. */
#include "common/pc.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

int pc_addr_parse(const char *s, struct pc_addr *out)
{
	struct pc_addr a = {0};

	if (!s)
		return PC_EINVAL;
	if (inet_pton(AF_INET, s, a.a) == 1)
		a.family = AF_INET;
	else if (inet_pton(AF_INET6, s, a.a) == 1)
		a.family = AF_INET6;
	else
		return PC_EINVAL;
	*out = a;
	return 0;
}

static int port_parse(const char *s, uint16_t *port)
{
	char *end;
	unsigned long v;

	if (!*s || *s == '-' || *s == '+')
		return PC_EINVAL;
	v = strtoul(s, &end, 10);
	if (*end || v == 0 || v > 65535)
		return PC_EINVAL;
	*port = (uint16_t)v;
	return 0;
}

int pc_endpoint_parse(const char *s, uint16_t default_port, struct pc_endpoint *out)
{
	char host[PC_ADDRSTRLEN + 1];
	const char *port = NULL, *colon;
	struct pc_endpoint e = {0};
	size_t n;

	if (!s)
		return PC_EINVAL;
	if (*s == '[') {
		const char *close = strchr(s, ']');

		if (!close)
			return PC_EINVAL;
		n = (size_t)(close - s - 1);
		if (close[1] == ':')
			port = close + 2;
		else if (close[1])
			return PC_EINVAL;
		s++;
	} else {
		colon = strchr(s, ':');
		if (colon && strchr(colon + 1, ':'))
			colon = NULL; /* bare IPv6 address, no port */
		n = colon ? (size_t)(colon - s) : strlen(s);
		if (colon)
			port = colon + 1;
	}
	if (n == 0 || n >= sizeof(host))
		return PC_EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	if (pc_addr_parse(host, &e.addr) < 0)
		return PC_EINVAL;
	if (port) {
		if (port_parse(port, &e.port) < 0)
			return PC_EINVAL;
	} else if (default_port) {
		e.port = default_port;
	} else {
		return PC_EINVAL;
	}
	*out = e;
	return 0;
}

size_t pc_addr_len(const struct pc_addr *a)
{
	return a->family == AF_INET ? 4 : a->family == AF_INET6 ? 16 : 0;
}

static int prefix_host_bits_clear(const struct pc_prefix *p)
{
	size_t nbytes = pc_addr_len(&p->addr);

	for (size_t bit = p->len; bit < nbytes * 8; bit++)
		if (p->addr.a[bit / 8] & (0x80 >> (bit % 8)))
			return 0;
	return 1;
}

int pc_prefix_parse(const char *s, struct pc_prefix *out)
{
	char host[PC_ADDRSTRLEN + 1];
	const char *slash;
	struct pc_prefix p = {0};
	size_t n;

	if (!s)
		return PC_EINVAL;
	slash = strchr(s, '/');
	n = slash ? (size_t)(slash - s) : strlen(s);
	if (n == 0 || n >= sizeof(host))
		return PC_EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	if (pc_addr_parse(host, &p.addr) < 0)
		return PC_EINVAL;
	p.len = (uint8_t)(pc_addr_len(&p.addr) * 8);
	if (slash) {
		char *end;
		unsigned long v;

		if (!slash[1] || slash[1] == '-' || slash[1] == '+')
			return PC_EINVAL;
		v = strtoul(slash + 1, &end, 10);
		if (*end || v > p.len)
			return PC_EINVAL;
		p.len = (uint8_t)v;
	}
	if (!prefix_host_bits_clear(&p))
		return PC_EINVAL;
	*out = p;
	return 0;
}

/* IPv4 is written by hand: glibc's inet_ntop goes through sprintf, which
 * was a few percent of the engine's time per DNS answer (every learned
 * address is written into its record) and of logd's per record. */
static void ipv4_str(const uint8_t a[4], char *buf)
{
	size_t o = 0;

	for (int i = 0; i < 4; i++) {
		unsigned v = a[i];

		if (v >= 100)
			buf[o++] = (char)('0' + v / 100);
		if (v >= 10)
			buf[o++] = (char)('0' + v / 10 % 10);
		buf[o++] = (char)('0' + v % 10);
		buf[o++] = i < 3 ? '.' : '\0';
	}
}

const char *pc_addr_str(const struct pc_addr *a, char *buf, size_t len)
{
	if (a->family == AF_INET && len >= INET_ADDRSTRLEN)
		ipv4_str(a->a, buf);
	else if (!a->family || !inet_ntop(a->family, a->a, buf, (socklen_t)len))
		snprintf(buf, len, "-");
	return buf;
}

const char *pc_endpoint_str(const struct pc_endpoint *e, char *buf, size_t len)
{
	char a[PC_ADDRSTRLEN];

	pc_addr_str(&e->addr, a, sizeof(a));
	if (e->addr.family == AF_INET6)
		snprintf(buf, len, "[%s]:%u", a, e->port);
	else
		snprintf(buf, len, "%s:%u", a, e->port);
	return buf;
}

int pc_addr_eq(const struct pc_addr *x, const struct pc_addr *y)
{
	return x->family == y->family && memcmp(x->a, y->a, pc_addr_len(x)) == 0;
}

static int bits_eq(const uint8_t *x, const uint8_t *y, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;

	if (memcmp(x, y, full))
		return 0;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));

		return (x[full] & mask) == (y[full] & mask);
	}
	return 1;
}

int pc_prefix_contains(const struct pc_prefix *p, const struct pc_addr *a)
{
	return p->addr.family == a->family && bits_eq(p->addr.a, a->a, p->len);
}

int pc_prefix_overlap(const struct pc_prefix *x, const struct pc_prefix *y)
{
	return x->addr.family == y->addr.family &&
	       bits_eq(x->addr.a, y->addr.a, x->len < y->len ? x->len : y->len);
}

int pc_mac_parse(const char *s, uint8_t mac[6])
{
	uint8_t m[6];

	if (!s || strlen(s) != 17)
		return PC_EINVAL;
	for (int i = 0; i < 6; i++) {
		int hi = pc_hex_digit(s[i * 3]), lo = pc_hex_digit(s[i * 3 + 1]);

		if (hi < 0 || lo < 0 || (i < 5 && s[i * 3 + 2] != ':'))
			return PC_EINVAL;
		m[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(mac, m, 6);
	return 0;
}
