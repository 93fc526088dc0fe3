/* The table of host names every path that reads a name is tested against
 * (common/hostname.c's grammar, docs/policy.md "Host names"): a rule's
 * host (check_rules), a policy lookup and a DNS query's name (check_rules,
 * check_dnsguard), a TLS server name in the vault (check_vault) and in the
 * engine's ClientHello parser (check_dnsguard_tls), an HTTP Host header in
 * the vault (check_vault_inject), and the validator itself (check_common).
 * Each column is what that form makes of the input: the name it yields
 * (lower-cased, no trailing dot; a policy wildcard written "*.name", an
 * HTTP port ":port"), or NULL for a refusal. */
#ifndef PC_TEST_HOSTNAMES_H
#define PC_TEST_HOSTNAMES_H

#include "common/pc.h"

#include <stdio.h>

struct hostname_case {
	const char *in;
	const char *name;   /* PC_HOST_NAME: a DNS name, a policy lookup */
	const char *policy; /* PC_HOST_POLICY: a rule's host */
	const char *sni;    /* PC_HOST_SNI: a TLS server_name */
	const char *http;   /* PC_HOST_HTTP: a Host header */
};

#define L63 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
/* 3 x 64 + 58 + 3 = 253 characters */
#define N253 L63 "." L63 "." L63 ".cccccccccccccccccccccccccccccccccccccccccccccccccccccccccc.xy"

#define SAME(s)	    s, s, s, s
#define ALL_REFUSED NULL, NULL, NULL, NULL

static const struct hostname_case hostname_cases[] = {
    {"api.example.com", SAME("api.example.com")},
    {"API.Example.COM", SAME("api.example.com")},
    /* '_' in a label: the policy accepts it, so every path does */
    {"my_svc.example.com", SAME("my_svc.example.com")},
    {"_dmarc.example.com", SAME("_dmarc.example.com")},
    {"localhost", SAME("localhost")},
    /* a label of digits is fine, except the last (an IPv4 literal) */
    {"123.example.com", SAME("123.example.com")},
    {"10.0.0.1", ALL_REFUSED},
    {"a.123", ALL_REFUSED},
    /* IDN: A-labels are LDH and pass as written; raw UTF-8 does not */
    {"xn--bcher-kva.example", SAME("xn--bcher-kva.example")},
    {"b\xc3\xbc"
     "cher.example",
     ALL_REFUSED},
    {"a--b.example", SAME("a--b.example")},
    /* the absolute form: the same name, except in a server name */
    {"example.com.", "example.com", "example.com", NULL, "example.com"},
    {"Example.COM.", "example.com", "example.com", NULL, "example.com"},
    {"a.com..", ALL_REFUSED},
    {".", ALL_REFUSED},
    {"", ALL_REFUSED},
    {"a..b.com", ALL_REFUSED},
    {".a.com", ALL_REFUSED},
    {"-a.example.com", ALL_REFUSED},
    {"a-.example.com", ALL_REFUSED},
    {"a b.com", ALL_REFUSED},
    {"a\nb.com", ALL_REFUSED},
    {"a/b.com", ALL_REFUSED},
    /* wildcards: rules only, and never a whole top-level domain */
    {"*.example.com", NULL, "*.example.com", NULL, NULL},
    {"*.Example.com.", NULL, "*.example.com", NULL, NULL},
    {"*.com", ALL_REFUSED},
    {"*", ALL_REFUSED},
    {"*.", ALL_REFUSED},
    {"a.*.com", ALL_REFUSED},
    {"**.example.com", ALL_REFUSED},
    {"*a.example.com", ALL_REFUSED},
    /* ports: an HTTP Host only, 1..65535 */
    {"example.com:443", NULL, NULL, NULL, "example.com:443"},
    {"Example.com.:443", NULL, NULL, NULL, "example.com:443"},
    {"example.com:0443", NULL, NULL, NULL, "example.com:443"},
    {"example.com:8443", NULL, NULL, NULL, "example.com:8443"},
    {"example.com:", ALL_REFUSED},
    {"example.com:0", ALL_REFUSED},
    {"example.com:65536", ALL_REFUSED},
    {"example.com:44a", ALL_REFUSED},
    {"[2001:db8::1]:443", ALL_REFUSED},
    {"2001:db8::1", ALL_REFUSED},
    {"10.0.0.1:443", ALL_REFUSED},
    /* lengths: 63 a label, 253 a name */
    {L63 ".com", SAME(L63 ".com")},
    {L63 "a.com", ALL_REFUSED},
    {N253, SAME(N253)},
    {N253 ".", N253, N253, NULL, N253},
    {"f." N253, ALL_REFUSED},
};

#define N_HOSTNAME_CASES (sizeof(hostname_cases) / sizeof(hostname_cases[0]))

/* The column of c for form. */
static inline const char *hostname_want(const struct hostname_case *c, enum pc_host_form form)
{
	switch (form) {
	case PC_HOST_NAME:
		return c->name;
	case PC_HOST_POLICY:
		return c->policy;
	case PC_HOST_SNI:
		return c->sni;
	case PC_HOST_HTTP:
		return c->http;
	}
	return NULL;
}

/* A parsed name as the table writes it. */
static inline const char *hostname_shown(const struct pc_host *h, char *buf, size_t len)
{
	if (h->port)
		snprintf(buf, len, "%s%s:%u", h->wildcard ? "*." : "", h->name, h->port);
	else
		snprintf(buf, len, "%s%s", h->wildcard ? "*." : "", h->name);
	return buf;
}

#endif
