/* Names the policy holds: DNS host names and "*." wildcards as admins write
 * them and as sandboxes send them, DNS query types, interface names. */
#include "rules/rules_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define HOST_NAME_MAX_LEN 253

static bool label_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
}

/* Check a lower-cased name without trailing dot; NULL when valid, else why
 * not. */
static const char *host_check(const char *s, size_t len, size_t *labels)
{
	size_t start = 0, n = 0;
	bool all_digits = true;

	if (len == 0)
		return "it is empty";
	if (len > HOST_NAME_MAX_LEN)
		return "it is longer than 253 characters";
	for (size_t i = 0; i <= len; i++) {
		if (i < len && s[i] != '.') {
			if (!label_char(s[i]))
				return s[i] == '*'
					   ? "'*' is only allowed as the whole first label, "
					     "as in '*.example.com'"
					   : "it contains a character other than letters, "
					     "digits, '-', '_' and '.'";
			all_digits = all_digits && s[i] >= '0' && s[i] <= '9';
			continue;
		}
		if (i == start)
			return "it has an empty label (two dots in a row, or a leading dot)";
		if (i - start > 63)
			return "it has a label longer than 63 characters";
		if (s[start] == '-' || s[i - 1] == '-')
			return "a label starts or ends with '-'";
		n++;
		if (i < len)
			all_digits = true;
		start = i + 1;
	}
	if (all_digits)
		return "its last label is all digits (not a DNS name)";
	*labels = n;
	return NULL;
}

int policy_host_normalize(const char *in, char *out, size_t outlen, bool *wildcard,
			  struct pc_err *err)
{
	char buf[HOST_NAME_MAX_LEN + 3];
	const char *why, *name;
	struct pc_addr addr;
	struct pc_prefix pfx;
	size_t len, labels = 0;
	bool wild = false;

	if (!in || !*in)
		return pc_err_set(err, PC_EINVAL,
				  "empty host name; expected a DNS name like 'api.example.com'");
	len = strlen(in);
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
	if (len > 1 && in[len - 1] == '.')
		len--; /* the absolute form "example.com." means the same name */
	if (len >= sizeof(buf))
		return pc_err_set(err, PC_EINVAL,
				  "invalid host '%.64s...': it is longer than 253 characters", in);
	for (size_t i = 0; i < len; i++)
		buf[i] = (in[i] >= 'A' && in[i] <= 'Z') ? (char)(in[i] + 32) : in[i];
	buf[len] = '\0';
	name = buf;
	if (strcmp(buf, "*") == 0 || strcmp(buf, "*.") == 0)
		return pc_err_set(err, PC_EINVAL,
				  "invalid host '%s': a lone '*' would allow every name; expected "
				  "'*.example.com'",
				  in);
	if (buf[0] == '*' && buf[1] == '.') {
		wild = true;
		name = buf + 2;
	}
	why = host_check(name, strlen(name), &labels);
	if (!why && wild && len > HOST_NAME_MAX_LEN)
		why = "it is longer than 253 characters";
	if (!why && wild && labels < 2)
		why = "a wildcard must keep at least two labels after '*.' (a whole "
		      "top-level domain is too wide)";
	if (why)
		return pc_err_set(err, PC_EINVAL,
				  "invalid host '%.80s': %s; expected a DNS name like "
				  "'api.example.com' or '*.example.com'",
				  in, why);
	if (strlen(name) >= outlen)
		return pc_err_set(err, PC_EINVAL, "host name too long for the buffer");
	memcpy(out, name, strlen(name) + 1);
	*wildcard = wild;
	return 0;
}

bool rules_query_normalize(const char *in, char *out, size_t outlen)
{
	size_t len, labels;

	if (!in)
		return false;
	len = strnlen(in, HOST_NAME_MAX_LEN + 2);
	if (len > 1 && in[len - 1] == '.')
		len--;
	if (len == 0 || len > HOST_NAME_MAX_LEN || len >= outlen)
		return false;
	for (size_t i = 0; i < len; i++)
		out[i] = (in[i] >= 'A' && in[i] <= 'Z') ? (char)(in[i] + 32) : in[i];
	out[len] = '\0';
	return host_check(out, len, &labels) == NULL;
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

uint32_t pc_qtype_bit(uint16_t rrtype)
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
