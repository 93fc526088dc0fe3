/* The one host-name grammar of portcullis: rule hosts, DNS query names,
 * TLS server names and HTTP Host headers are all checked here, so that a
 * name the policy accepts is a name every path accepts (docs/policy.md,
 * "Host names"). Sandbox bytes reach it: written for EVA (docs/prove.md)
 * with indices each checked against its own bound, and fuzzed. */
#include "common/pc.h"

static bool label_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

int pc_host_parse(const uint8_t *p, size_t start, size_t end, enum pc_host_form form,
		  struct pc_host *out, const char **why)
{
	struct pc_host h = {.port = 0};
	const char *bad = NULL;
	size_t lab = 0, labels = 0, o = 0, total;
	uint8_t prev = 0;
	bool digits = true;

	if (!p || !out || end < start)
		return PC_EINVAL;
	/* An HTTP Host: a name and an optional ":port"; an IP literal
	 * ("[v6]" or a dotted quad) is no host name. */
	if (form == PC_HOST_HTTP) {
		if (end > start && p[start] == '[') {
			bad = "it is an IP address literal, not a host name";
			goto fail;
		}
		/* One function, not a helper: EVA checks that every function
		 * reachable from a parser is reached, and no server name or
		 * query name reaches the port. */
		for (size_t i = start; i < end; i++) {
			uint32_t v = 0;

			if (p[i] != ':')
				continue;
			for (size_t k = i + 1; k < end && v <= 65535; k++) {
				if (p[k] < '0' || p[k] > '9' || k - i > 5) {
					v = 0;
					break;
				}
				v = v * 10 + (uint32_t)(p[k] - '0');
			}
			if (v == 0 || v > 65535) {
				bad = "its port is not a number from 1 to 65535";
				goto fail;
			}
			h.port = (uint16_t)v;
			end = i;
			break;
		}
	}
	total = end - start;
	if (total > 1 && p[end - 1] == '.') {
		/* RFC 6066 3: "without a trailing dot". Refused in a server
		 * name rather than dropped: a server may read "a.example." as
		 * another virtual host than "a.example", and the name judged
		 * must be the name the server reads. Elsewhere it is the
		 * absolute form of the same name. */
		if (form == PC_HOST_SNI) {
			bad = "it ends with a dot (a TLS server name carries none, RFC 6066)";
			goto fail;
		}
		end--;
		total--;
	}
	if (form == PC_HOST_POLICY && total >= 1 && p[start] == '*') {
		if (total == 1 || (total == 2 && p[start + 1] == '.')) {
			bad = "a lone '*' would allow every name";
			goto fail;
		}
		if (p[start + 1] == '.') {
			h.wildcard = true;
			start += 2;
		}
	}
	if (end == start) {
		bad = "it is empty";
		goto fail;
	}
	if (total > PC_HOST_MAX) {
		bad = "it is longer than 253 characters";
		goto fail;
	}
	/* i and o move together (o == i - start); each has its own bound,
	 * checked on its own (EVA does not relate them). */
	for (size_t i = start; i <= end; i++, o++) {
		uint8_t c = i < end ? p[i] : '.';

		if (o > PC_HOST_MAX) {
			bad = "it is longer than 253 characters"; /* not reached: total */
			goto fail;
		}

		if (c != '.') {
			if (!label_char(c)) {
				bad = c == '*' && form == PC_HOST_POLICY
					  ? "'*' is only allowed as the whole first label, "
					    "as in '*.example.com'"
					  : "it contains a character other than letters, digits, "
					    "'-', '_' and '.'";
				goto fail;
			}
			if (lab == 0 && c == '-') {
				bad = "a label starts or ends with '-'";
				goto fail;
			}
			if (++lab > 63) {
				bad = "it has a label longer than 63 characters";
				goto fail;
			}
			digits = digits && c >= '0' && c <= '9';
			h.name[o] = (char)((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
			prev = c;
			continue;
		}
		if (lab == 0) {
			bad = "it has an empty label (two dots in a row, or a leading dot)";
			goto fail;
		}
		if (prev == '-') {
			bad = "a label starts or ends with '-'";
			goto fail;
		}
		labels++;
		if (i == end)
			break;
		h.name[o] = '.';
		prev = c;
		lab = 0;
		digits = true;
	}
	/* The last label all digits: an IPv4 literal (RFC 6066 forbids
	 * those in a server name) or no DNS name any resolver would serve. */
	if (digits) {
		bad = "its last label is all digits (not a DNS name)";
		goto fail;
	}
	if (h.wildcard && labels < 2) {
		bad = "a wildcard must keep at least two labels after '*.' (a whole "
		      "top-level domain is too wide)";
		goto fail;
	}
	if (o > PC_HOST_MAX) {
		bad = "it is longer than 253 characters"; /* not reached: total */
		goto fail;
	}
	h.name[o] = '\0';
	h.len = o;
	*out = h;
	return 0;
fail:
	if (why)
		*why = bad;
	return PC_EPARSE;
}

int pc_host_parse_str(const char *s, enum pc_host_form form, struct pc_host *out, const char **why)
{
	size_t n = 0;

	if (!s)
		return PC_EINVAL;
	/* Measured with a bound: a longer string is refused as too long
	 * without being read to its end. */
	while (n < PC_HOST_MAX + 8 && s[n])
		n++;
	if (s[n]) {
		if (why)
			*why = "it is longer than 253 characters";
		return PC_EPARSE;
	}
	return pc_host_parse((const uint8_t *)s, 0, n, form, out, why);
}
