/* Names the policy holds: DNS host names and "*." wildcards as admins write
 * them and as sandboxes send them, DNS query types, interface names. */
#include "rules/rules_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int policy_host_normalize(const char *in, char *out, size_t outlen, bool *wildcard,
			  struct pc_err *err)
{
	struct pc_addr addr;
	struct pc_prefix pfx;
	struct pc_host h;
	const char *why = NULL;

	if (!in || !*in)
		return pc_err_set(err, PC_EINVAL,
				  "empty host name; expected a DNS name like 'api.example.com'");
	/* What an admin may have meant instead of a name, said as such; the
	 * grammar itself is common/hostname.c's, shared with every path that
	 * reads a name from a sandbox. */
	if (pc_addr_parse(in, &addr) == 0 || pc_prefix_parse(in, &pfx) == 0)
		return pc_err_set(err, PC_EINVAL,
				  "'%.64s' is an address, not a host name; use 'cidr: %.64s' for "
				  "addresses",
				  in, in);
	if (strstr(in, "://"))
		return pc_err_set(err, PC_EINVAL,
				  "invalid host '%.80s': it is a URL; expected only the host name "
				  "(like 'api.example.com')",
				  in);
	if (strchr(in, ':'))
		return pc_err_set(err, PC_EINVAL,
				  "invalid host '%.80s': it has a ':'; expected only the host name "
				  "(ports go in 'ports', addresses in 'cidr')",
				  in);
	if (strcmp(in, "*") == 0 || strcmp(in, "*.") == 0)
		return pc_err_set(err, PC_EINVAL,
				  "invalid host '%s': a lone '*' would allow every name; expected "
				  "'*.example.com'",
				  in);
	if (pc_host_parse_str(in, PC_HOST_POLICY, &h, &why) < 0)
		return pc_err_set(err, PC_EINVAL,
				  "invalid host '%.80s': %s; expected a DNS name like "
				  "'api.example.com' or '*.example.com'",
				  in, why ? why : "it is not a host name");
	if (strlen(h.name) >= outlen)
		return pc_err_set(err, PC_EINVAL, "host name too long for the buffer");
	memcpy(out, h.name, strlen(h.name) + 1);
	*wildcard = h.wildcard;
	return 0;
}

bool rules_query_normalize(const char *in, char *out, size_t outlen)
{
	struct pc_host h;

	if (!in || pc_host_parse_str(in, PC_HOST_NAME, &h, NULL) < 0 || strlen(h.name) >= outlen)
		return false;
	memcpy(out, h.name, strlen(h.name) + 1);
	return true;
}

bool rules_ifname_valid(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len >= PC_IFNAMSIZ || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] >= 0x7f || s[i] == '/' || s[i] == ':')
			return false;
	return true;
}

/* ---- DNS query types ---------------------------------------------------- */

static const struct {
	const char *name;
	uint16_t rrtype;
} qtypes[] = {
    {"A", 1},	{"AAAA", 28}, {"CNAME", 5}, {"HTTPS", 65}, {"SVCB", 64}, {"TXT", 16},
    {"MX", 15}, {"SRV", 33},  {"PTR", 12},  {"NS", 2},	   {"CAA", 257},
};
#define N_QTYPES (sizeof(qtypes) / sizeof(qtypes[0]))

const char *const rules_qtype_all[] = {"A",  "AAAA", "CNAME", "HTTPS", "SVCB", "TXT",
				       "MX", "SRV",  "PTR",   "NS",    "CAA",  NULL};

uint32_t rules_qtype_bit(uint16_t rrtype)
{
	for (size_t i = 0; i < N_QTYPES; i++)
		if (qtypes[i].rrtype == rrtype)
			return 1u << i;
	return 0;
}

int rules_qtype_from_name(const char *name, uint32_t *bit)
{
	for (size_t i = 0; i < N_QTYPES; i++) {
		if (strcasecmp(name, qtypes[i].name) == 0) {
			*bit = 1u << i;
			return 0;
		}
	}
	return PC_EINVAL;
}

size_t rules_qtype_names(uint32_t bits, const char **names, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < N_QTYPES && n < max; i++)
		if (bits & (1u << i))
			names[n++] = qtypes[i].name;
	return n;
}
