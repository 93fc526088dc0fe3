/* Special-purpose addresses: the IANA IPv4 and IPv6 Special-Purpose Address
 * Registries (RFC 6890, RFC 8190 and the RFCs that added entries since),
 * plus multicast and the deprecated blocks that are not in those registries
 * but are never an internet host either. An allowed name whose answer lands
 * in one of these is a DNS rebinding attempt (a cloud metadata service, the
 * gateway, the internal network), so the DNS guard does not learn such
 * addresses and `policy lint` warns about cidr rules that open them. This
 * is the one table both use; docs/dnsguard.md lists it. */
#include "common/pc.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#define V4(a, b, c, d, l, text, name, rfc)                                                         \
	{                                                                                          \
		{{AF_INET, {a, b, c, d}}, l}, text, name, rfc                                      \
	}
/* An IPv6 prefix from its first four 16-bit groups and one more (the rest
 * of every registry prefix is zero, except ::1 and the anycast /128s,
 * whose last group is given as g7). */
#define V6(g0, g1, g2, g3, g7, l, text, name, rfc)                                                 \
	{                                                                                          \
		{{AF_INET6,                                                                        \
		  {(g0) >> 8, (g0)&0xff, (g1) >> 8, (g1)&0xff, (g2) >> 8, (g2)&0xff, (g3) >> 8,    \
		   (g3)&0xff, 0, 0, 0, 0, 0, 0, (g7) >> 8, (g7)&0xff}},                            \
		 l},                                                                               \
		    text, name, rfc                                                                \
	}

/* The registries as published by IANA (IPv4: last updated 2025; IPv6: last
 * updated 2025-10-09), every entry, including those IANA marks globally
 * reachable (AS112, AMT, the anycast /32s and /128s, ORCHIDv2, NAT64):
 * none of them is an ordinary server a sandbox needs by name, and an
 * operator whose network routes one says so in dns.routable. The more
 * specific entries inside 192.0.0.0/24 and 2001::/23 are listed too, so
 * that the log names the precise one. */
static const struct pc_special pc_specials[] = {
    /* IPv4 Special-Purpose Address Registry */
    V4(0, 0, 0, 0, 8, "0.0.0.0/8", "\"this network\"", "RFC 791"),
    V4(0, 0, 0, 0, 32, "0.0.0.0/32", "\"this host on this network\"", "RFC 1122"),
    V4(10, 0, 0, 0, 8, "10.0.0.0/8", "private-use", "RFC 1918"),
    V4(100, 64, 0, 0, 10, "100.64.0.0/10", "shared address space, CGNAT", "RFC 6598"),
    V4(127, 0, 0, 0, 8, "127.0.0.0/8", "loopback", "RFC 1122"),
    V4(169, 254, 0, 0, 16, "169.254.0.0/16", "link-local", "RFC 3927"),
    V4(172, 16, 0, 0, 12, "172.16.0.0/12", "private-use", "RFC 1918"),
    V4(192, 0, 0, 0, 24, "192.0.0.0/24", "IETF protocol assignments", "RFC 6890"),
    V4(192, 0, 0, 0, 29, "192.0.0.0/29", "IPv4 service continuity prefix", "RFC 7335"),
    V4(192, 0, 0, 8, 32, "192.0.0.8/32", "IPv4 dummy address", "RFC 7600"),
    V4(192, 0, 0, 9, 32, "192.0.0.9/32", "Port Control Protocol anycast", "RFC 7723"),
    V4(192, 0, 0, 10, 32, "192.0.0.10/32", "TURN anycast", "RFC 8155"),
    V4(192, 0, 0, 170, 32, "192.0.0.170/32", "NAT64/DNS64 discovery", "RFC 8880"),
    V4(192, 0, 0, 171, 32, "192.0.0.171/32", "NAT64/DNS64 discovery", "RFC 8880"),
    V4(192, 0, 2, 0, 24, "192.0.2.0/24", "documentation, TEST-NET-1", "RFC 5737"),
    V4(192, 31, 196, 0, 24, "192.31.196.0/24", "AS112-v4", "RFC 7535"),
    V4(192, 52, 193, 0, 24, "192.52.193.0/24", "AMT", "RFC 7450"),
    V4(192, 88, 99, 0, 24, "192.88.99.0/24", "deprecated 6to4 relay anycast", "RFC 7526"),
    V4(192, 88, 99, 2, 32, "192.88.99.2/32", "6a44 relay anycast", "RFC 6751"),
    V4(192, 168, 0, 0, 16, "192.168.0.0/16", "private-use", "RFC 1918"),
    V4(192, 175, 48, 0, 24, "192.175.48.0/24", "direct delegation AS112 service", "RFC 7534"),
    V4(198, 18, 0, 0, 15, "198.18.0.0/15", "benchmarking", "RFC 2544"),
    V4(198, 51, 100, 0, 24, "198.51.100.0/24", "documentation, TEST-NET-2", "RFC 5737"),
    V4(203, 0, 113, 0, 24, "203.0.113.0/24", "documentation, TEST-NET-3", "RFC 5737"),
    V4(240, 0, 0, 0, 4, "240.0.0.0/4", "reserved", "RFC 1112"),
    V4(255, 255, 255, 255, 32, "255.255.255.255/32", "limited broadcast", "RFC 919"),
    /* Not in the registry: the multicast block (IPv4 Multicast Address
     * Space registry); a "host" there is a group, never a server. */
    V4(224, 0, 0, 0, 4, "224.0.0.0/4", "multicast", "RFC 5771"),

    /* IPv6 Special-Purpose Address Registry */
    V6(0, 0, 0, 0, 0, 128, "::/128", "unspecified", "RFC 4291"),
    V6(0, 0, 0, 0, 1, 128, "::1/128", "loopback", "RFC 4291"),
    /* ::ffff:0:0/96: the two middle groups are not covered by V6. */
    {{{AF_INET6, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0}}, 96},
     "::ffff:0:0/96",
     "IPv4-mapped",
     "RFC 4291"},
    V6(0x64, 0xff9b, 0, 0, 0, 96, "64:ff9b::/96", "IPv4-IPv6 translation, NAT64", "RFC 6052"),
    V6(0x64, 0xff9b, 1, 0, 0, 48, "64:ff9b:1::/48", "IPv4-IPv6 translation, local use", "RFC 8215"),
    V6(0x100, 0, 0, 0, 0, 64, "100::/64", "discard-only", "RFC 6666"),
    V6(0x100, 0, 0, 1, 0, 64, "100:0:0:1::/64", "dummy IPv6 prefix", "RFC 9780"),
    V6(0x2001, 0, 0, 0, 0, 23, "2001::/23", "IETF protocol assignments", "RFC 2928"),
    V6(0x2001, 0, 0, 0, 0, 32, "2001::/32", "Teredo", "RFC 4380"),
    V6(0x2001, 1, 0, 0, 1, 128, "2001:1::1/128", "Port Control Protocol anycast", "RFC 7723"),
    V6(0x2001, 1, 0, 0, 2, 128, "2001:1::2/128", "TURN anycast", "RFC 8155"),
    V6(0x2001, 1, 0, 0, 3, 128, "2001:1::3/128", "DNS-SD service registration anycast", "RFC 9665"),
    V6(0x2001, 2, 0, 0, 0, 48, "2001:2::/48", "benchmarking", "RFC 5180"),
    V6(0x2001, 3, 0, 0, 0, 32, "2001:3::/32", "AMT", "RFC 7450"),
    V6(0x2001, 4, 0x112, 0, 0, 48, "2001:4:112::/48", "AS112-v6", "RFC 7535"),
    V6(0x2001, 0x10, 0, 0, 0, 28, "2001:10::/28", "deprecated ORCHID", "RFC 4843"),
    V6(0x2001, 0x20, 0, 0, 0, 28, "2001:20::/28", "ORCHIDv2", "RFC 7343"),
    V6(0x2001, 0x30, 0, 0, 0, 28, "2001:30::/28", "drone remote ID entity tags", "RFC 9374"),
    V6(0x2001, 0xdb8, 0, 0, 0, 32, "2001:db8::/32", "documentation", "RFC 3849"),
    V6(0x2002, 0, 0, 0, 0, 16, "2002::/16", "6to4", "RFC 3056"),
    V6(0x2620, 0x4f, 0x8000, 0, 0, 48, "2620:4f:8000::/48", "direct delegation AS112 service",
       "RFC 7534"),
    V6(0x3fff, 0, 0, 0, 0, 20, "3fff::/20", "documentation", "RFC 9637"),
    V6(0x5f00, 0, 0, 0, 0, 16, "5f00::/16", "segment routing (SRv6) SIDs", "RFC 9602"),
    V6(0xfc00, 0, 0, 0, 0, 7, "fc00::/7", "unique-local", "RFC 4193"),
    V6(0xfe80, 0, 0, 0, 0, 10, "fe80::/10", "link-local", "RFC 4291"),
    /* Not in the registry (IPv6 Address Space registry): multicast, the
     * deprecated site-local block and IPv4-compatible addresses, which
     * some stacks still route into a tunnel. */
    V6(0xff00, 0, 0, 0, 0, 8, "ff00::/8", "multicast", "RFC 4291"),
    V6(0xfec0, 0, 0, 0, 0, 10, "fec0::/10", "deprecated site-local", "RFC 3879"),
    V6(0, 0, 0, 0, 0, 96, "::/96", "deprecated IPv4-compatible", "RFC 4291"),
};

size_t pc_special_count(void)
{
	return sizeof(pc_specials) / sizeof(pc_specials[0]);
}

const struct pc_special *pc_special_at(size_t i)
{
	return i < pc_special_count() ? &pc_specials[i] : NULL;
}

const struct pc_special *pc_special_find(const struct pc_addr *a)
{
	const struct pc_special *best = NULL;

	if (!a)
		return NULL;
	/* Linear: about 60 entries of one or two compares each, once per
	 * address of an answer; the most specific entry names the reason. */
	for (size_t i = 0; i < pc_special_count(); i++)
		if (pc_prefix_contains(&pc_specials[i].prefix, a) &&
		    (!best || pc_specials[i].prefix.len > best->prefix.len))
			best = &pc_specials[i];
	return best;
}

const char *pc_addr_v4_embedded(const struct pc_addr *a, struct pc_addr *v4)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
	const char *how = NULL;

	if (!a || a->family != AF_INET6)
		return NULL;
	if (memcmp(a->a, mapped, 12) == 0)
		how = "IPv4-mapped";
	else if (memcmp(a->a, nat64, 12) == 0)
		how = "NAT64";
	if (how && v4) {
		memset(v4, 0, sizeof(*v4));
		v4->family = AF_INET;
		memcpy(v4->a, a->a + 12, 4);
	}
	return how;
}
