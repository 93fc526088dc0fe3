/* SVCB/HTTPS SvcParams (RFC 9460): check their form, read the address
 * hints, and remove the "ech" parameter in place. ldns 1.8.3 parses the
 * record into (priority, target, params) but offers no accessor for single
 * parameters, so the key/length/value list is read here, every length
 * checked against its bounds.
 *
 * Why in place and the same length: the engine releases answers from the
 * resolver as they are; a TCP answer whose length changed would break the
 * stream's sequence numbers. So ech is not cut out but replaced: the
 * remaining parameters are moved up, and the freed bytes become one
 * private-use parameter (key65534, zero-filled), which clients ignore. A
 * "mandatory" list naming ech loses that entry (or goes, if it was alone). */
#include "dnsguard/dnsguard_int.h"

#include <string.h>
#include <sys/socket.h>

#define SVC_MANDATORY 0
#define SVC_IPV4HINT  4
#define SVC_ECH	      5
#define SVC_IPV6HINT  6
#define SVC_PAD_KEY   65534 /* RFC 9460: 65280-65534 are for private use */

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

int dg_svcb_params_scan(const uint8_t *p, size_t len, bool *has_ech, struct dg_svcb_hints *hints)
{
	size_t i = 0;
	int last = -1;

	*has_ech = false;
	while (i < len) {
		uint16_t key, vlen;

		if (len - i < 4)
			return PC_EPARSE;
		key = rd16(p + i);
		vlen = rd16(p + i + 2);
		i += 4;
		if (vlen > len - i || (int)key <= last)
			return PC_EPARSE; /* overrun, or keys not strictly increasing */
		last = key;
		if (key == SVC_ECH)
			*has_ech = true;
		if ((key == SVC_IPV4HINT && (vlen == 0 || vlen % 4)) ||
		    (key == SVC_IPV6HINT && (vlen == 0 || vlen % 16)) ||
		    (key == SVC_MANDATORY && (vlen == 0 || vlen % 2)))
			return PC_EPARSE;
		if (hints && (key == SVC_IPV4HINT || key == SVC_IPV6HINT)) {
			size_t al = key == SVC_IPV4HINT ? 4 : 16;

			for (size_t o = 0; o < vlen && hints->n < DG_HINTS_MAX; o += al) {
				struct pc_addr *a = &hints->a[hints->n++];

				memset(a, 0, sizeof(*a));
				a->family = key == SVC_IPV4HINT ? AF_INET : AF_INET6;
				memcpy(a->a, p + i + o, al);
			}
		}
		i += vlen;
	}
	return 0;
}

int dg_svcb_params_strip_ech(uint8_t *p, size_t len)
{
	size_t i = 0, o = 0, pad;
	bool has_ech;
	uint16_t last = 0;

	if (dg_svcb_params_scan(p, len, &has_ech, NULL) != 0)
		return PC_EPARSE;
	if (!has_ech)
		return 0;
	/* Compact in place: what is written at o never passes what is still
	 * to be read at i, since parameters are only removed or shortened. */
	while (i < len) {
		uint16_t key = rd16(p + i), vlen = rd16(p + i + 2);
		size_t v = i + 4;

		i += 4 + (size_t)vlen;
		if (key == SVC_ECH)
			continue;
		if (key == SVC_MANDATORY) {
			size_t n = 0;

			for (size_t k = 0; k < vlen; k += 2)
				if (rd16(p + v + k) != SVC_ECH) {
					memmove(p + o + 4 + n, p + v + k, 2);
					n += 2;
				}
			if (n == 0) /* listed only ech: the list goes */
				continue;
			wr16(p + o, SVC_MANDATORY);
			wr16(p + o + 2, (uint16_t)n);
			o += 4 + n;
			last = key;
			continue;
		}
		memmove(p + o + 4, p + v, vlen);
		wr16(p + o, key);
		wr16(p + o + 2, vlen);
		o += 4 + (size_t)vlen;
		last = key;
	}
	/* ech took at least 4 bytes, so there is room for the padding key;
	 * it must sort last, which a record already using it would prevent. */
	if (o + 4 > len || last >= SVC_PAD_KEY)
		return PC_EPARSE;
	pad = len - o - 4;
	wr16(p + o, SVC_PAD_KEY);
	wr16(p + o + 2, (uint16_t)pad);
	memset(p + o + 4, 0, pad);
	return 0;
}
