/* The packet parser: IPv4, IPv6 with extension headers, TCP, UDP, ICMP and
 * ICMPv6 as NFQUEUE hands them over. Every byte here may come from a hostile
 * sandbox; every length is checked before it is used. Also the UDP builder
 * for the DNS answers the engine synthesizes. */
#include "engine/engine_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define IPV6_MAX_EXTHDRS 8

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* TCP options, buf[i, stop), read the way a receiver reads them (Linux's
 * tcp_parse_options): true when they name MPTCP (kind 30: MP_CAPABLE,
 * MP_JOIN), or when they do not read to their end — a length under 2 or
 * past the header — where another stack may have read an MPTCP option the
 * walk cannot. End of list (kind 0) ends them: what follows is no option
 * to anyone. A 30 inside another option's value (a timestamp) is not one.
 * Bounds as in l4_parse: each read is below stop, and stop below the
 * captured end (tests/prove). */
static bool tcp_opts_mptcp(const uint8_t *buf, size_t i, size_t stop)
{
	while (i < stop) {
		size_t len;

		if (buf[i] == 0)
			return false;
		if (buf[i] == 1) {
			i++;
			continue;
		}
		if (i + 1 >= stop)
			return true;
		len = buf[i + 1];
		if (len < 2 || i + len > stop)
			return true;
		if (buf[i] == 30)
			return true;
		i += len;
	}
	return false;
}

/* L4 headers: fills ports, flags and payload. end is the end of the IP
 * payload as far as it was captured, off <= end.
 *
 * Every bound is written "off + n > end" rather than "end - off < n": the
 * same test (offsets stay far below SIZE_MAX), but one that bounds off by
 * itself, which lets Frama-C's EVA prove the reads for every length
 * without relating off and end (tests/prove, docs/prove.md). */
static int l4_parse(const uint8_t *buf, size_t off, size_t end, struct pkt *p)
{
	size_t avail = end - off;
	const uint8_t *h;

	p->l4_off = off;
	switch (p->proto) {
	case IPPROTO_TCP: {
		size_t doff, hend;

		if (off + 20 > end)
			return PKT_MALFORMED;
		h = buf + off;
		doff = (size_t)(h[12] >> 4) * 4;
		hend = off + doff; /* a variable: the test below bounds it */
		if (doff < 20 || hend > end)
			return PKT_MALFORMED;
		p->sport = rd16(h);
		p->dport = rd16(h + 2);
		p->tcp_seq = rd32(h + 4);
		p->tcp_flags = h[13];
		p->tcp_urp = rd16(h + 18);
		/* only a SYN negotiates MPTCP: no walk on the other segments */
		p->tcp_syn_mptcp = (h[13] & TH_SYN) && tcp_opts_mptcp(buf, off + 20, hend);
		p->payload = h + doff;
		p->payload_len = avail - doff;
		return PKT_OK;
	}
	case IPPROTO_UDP: {
		size_t ulen;

		if (off + 8 > end)
			return PKT_MALFORMED;
		h = buf + off;
		ulen = rd16(h + 4);
		if (ulen < 8)
			return PKT_MALFORMED;
		if (off + ulen > end) {
			if (!p->truncated)
				return PKT_MALFORMED; /* claims more than the IP packet holds */
			ulen = avail;
		}
		p->sport = rd16(h);
		p->dport = rd16(h + 2);
		p->payload = h + 8;
		p->payload_len = ulen - 8;
		return PKT_OK;
	}
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (off + 8 > end)
			return PKT_MALFORMED;
		h = buf + off;
		p->icmp_type = h[0];
		p->icmp_code = h[1];
		p->payload = h + 8;
		p->payload_len = avail - 8;
		return PKT_OK;
	default:
		/* Other protocols are judged (and refused) on addresses alone. */
		p->payload = buf + off;
		p->payload_len = avail;
		return PKT_OK;
	}
}

static int ipv4_parse(const uint8_t *buf, size_t len, struct pkt *p)
{
	size_t ihl, tot;
	uint16_t frag;

	if (len < 20)
		return PKT_MALFORMED;
	ihl = (size_t)(buf[0] & 0x0f) * 4;
	tot = rd16(buf + 2);
	if (ihl < 20 || ihl > len || tot < ihl)
		return PKT_MALFORMED;
	if (tot > len)
		p->truncated = true; /* copy range shorter than the packet */
	else
		len = tot; /* ignore link-layer padding */
	frag = rd16(buf + 6);
	if (frag & 0x8000)
		return PKT_MALFORMED; /* reserved bit */
	if (frag & 0x3fff)
		return PKT_FRAGMENT; /* MF set or offset != 0 */
	p->family = AF_INET;
	p->src.family = p->dst.family = AF_INET;
	memcpy(p->src.a, buf + 12, 4);
	memcpy(p->dst.a, buf + 16, 4);
	p->hoplimit = buf[8];
	p->proto = buf[9];
	p->l3_len = ihl;
	return l4_parse(buf, ihl, len, p);
}

static int ipv6_parse(const uint8_t *buf, size_t len, struct pkt *p)
{
	size_t plen, off = 40;
	uint8_t nh;

	if (len < 40)
		return PKT_MALFORMED;
	plen = rd16(buf + 4);
	if (plen == 0)
		return PKT_MALFORMED; /* jumbograms are not for sandboxes */
	if (40 + plen > len)
		p->truncated = true;
	else
		len = 40 + plen;
	nh = buf[6];
	for (int i = 0;; i++) {
		size_t hl;

		if (i > IPV6_MAX_EXTHDRS)
			return PKT_MALFORMED;
		switch (nh) {
		case IPPROTO_HOPOPTS:
			if (i != 0)
				return PKT_MALFORMED; /* only allowed first (RFC 8200) */
						      /* fall through */
		case IPPROTO_ROUTING:
		case IPPROTO_DSTOPTS:
			if (off + 8 > len)
				return PKT_MALFORMED;
			hl = ((size_t)buf[off + 1] + 1) * 8;
			break;
		case IPPROTO_FRAGMENT:
			if (off + 8 > len)
				return PKT_MALFORMED;
			/* Offset != 0 or M set: a fragment. An atomic fragment
			 * (both 0) carries a whole packet: keep parsing. */
			if (rd16(buf + off + 2) & 0xfff9)
				return PKT_FRAGMENT;
			hl = 8;
			break;
		case IPPROTO_AH:
			if (off + 8 > len)
				return PKT_MALFORMED;
			hl = ((size_t)buf[off + 1] + 2) * 4;
			break;
		default:
			goto done;
		}
		if (off + hl > len)
			return PKT_MALFORMED;
		nh = buf[off];
		off += hl;
	}
done:
	p->family = AF_INET6;
	p->src.family = p->dst.family = AF_INET6;
	memcpy(p->src.a, buf + 8, 16);
	memcpy(p->dst.a, buf + 24, 16);
	p->hoplimit = buf[7];
	p->proto = nh;
	p->l3_len = off;
	return l4_parse(buf, off, len, p);
}

int pkt_parse(const uint8_t *buf, size_t len, struct pkt *out)
{
	struct pkt p;
	int rc;

	memset(&p, 0, sizeof(p));
	if (!buf || len < 1)
		return PKT_MALFORMED;
	switch (buf[0] >> 4) {
	case 4:
		rc = ipv4_parse(buf, len, &p);
		break;
	case 6:
		rc = ipv6_parse(buf, len, &p);
		break;
	default:
		return PKT_MALFORMED;
	}
	if (rc == PKT_OK)
		*out = p;
	return rc;
}

/* ---- checksums and the UDP builder ---------------------------------------- */

static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint32_t csum_add(uint32_t sum, const uint8_t *p, size_t n)
{
	while (n > 1) {
		sum += rd16(p);
		p += 2;
		n -= 2;
	}
	if (n)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

uint16_t pkt_l4_csum(const struct pc_addr *src, const struct pc_addr *dst, uint8_t proto,
		     const uint8_t *l4, size_t l4_len)
{
	size_t alen = pc_addr_len(src);
	uint32_t sum = 0;
	uint16_t c;

	sum = csum_add(sum, src->a, alen);
	sum = csum_add(sum, dst->a, alen);
	sum += proto;
	sum += (uint32_t)(l4_len & 0xffff) + (uint32_t)(l4_len >> 16);
	sum = csum_add(sum, l4, l4_len);
	c = csum_fold(sum);
	return proto == IPPROTO_UDP && c == 0 ? 0xffff : c; /* UDP: 0 is "no checksum" */
}

int pkt_replace_payload(const uint8_t *pkt, size_t len, const struct pkt *p, const uint8_t *payload,
			size_t plen, uint8_t **out)
{
	size_t off = (size_t)(p->payload - pkt), csum_off, l4_len;
	uint8_t *n;
	uint16_t c;

	if (p->payload < pkt || off + plen > len || plen != p->payload_len || p->truncated ||
	    (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP))
		return PC_EINVAL;
	n = malloc(len);
	if (!n)
		return PC_ENOMEM;
	memcpy(n, pkt, len);
	memcpy(n + off, payload, plen);
	l4_len = off + plen - p->l4_off;
	csum_off = p->l4_off + (p->proto == IPPROTO_TCP ? 16 : 6);
	n[csum_off] = n[csum_off + 1] = 0;
	c = pkt_l4_csum(&p->src, &p->dst, p->proto, n + p->l4_off, l4_len);
	wr16(n + csum_off, c);
	*out = n;
	return (int)(off + plen);
}

int pkt_build_udp(const struct pc_endpoint *src, const struct pc_endpoint *dst,
		  const uint8_t *payload, size_t len, uint8_t *buf, size_t buflen)
{
	size_t ipl, total, ulen = 8 + len;
	uint8_t *u;

	if (src->addr.family != dst->addr.family || !pc_addr_len(&src->addr))
		return PC_EINVAL;
	ipl = src->addr.family == AF_INET ? 20 : 40;
	total = ipl + ulen;
	if (total > buflen || ulen > 0xffff)
		return PC_EINVAL;
	memset(buf, 0, ipl + 8);
	if (src->addr.family == AF_INET) {
		buf[0] = 0x45;
		wr16(buf + 2, (uint16_t)total);
		wr16(buf + 6, 0x4000); /* DF */
		buf[8] = 64;
		buf[9] = IPPROTO_UDP;
		memcpy(buf + 12, src->addr.a, 4);
		memcpy(buf + 16, dst->addr.a, 4);
		wr16(buf + 10, csum_fold(csum_add(0, buf, 20)));
	} else {
		buf[0] = 0x60;
		wr16(buf + 4, (uint16_t)ulen);
		buf[6] = IPPROTO_UDP;
		buf[7] = 64;
		memcpy(buf + 8, src->addr.a, 16);
		memcpy(buf + 24, dst->addr.a, 16);
	}
	u = buf + ipl;
	wr16(u, src->port);
	wr16(u + 2, dst->port);
	wr16(u + 4, (uint16_t)ulen);
	if (len)
		memcpy(u + 8, payload, len);
	wr16(u + 6, pkt_l4_csum(&src->addr, &dst->addr, IPPROTO_UDP, u, ulen));
	return (int)total;
}
