/* Rule files to sandboxes: the schema of rules.d/NAME.yaml (docs/policy.md),
 * each value checked and normalized where it is read, each error at its
 * position. Checks across sandboxes come later (policy_check.c). */
#include "rules/rules_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

struct pparse {
	struct pbuild *b;
	struct yctx c;
	const char *file; /* in the file's arena */
	struct arena *a;  /* the file's */
	const struct rfile_defaults *def;
};

/* one line each: tests/integration/package_docs.sh reads these lists */
/* clang-format off */
static const char *const sandbox_keys[] = {"sandbox", "match", "allow", "secrets", "dns", "limits", NULL};
/* clang-format on */
static const char *const match_keys[] = {"source", "mac", "port", NULL};
static const char *const allow_keys[] = {"host", "cidr", "ports", "proto", NULL};
static const char *const secret_keys[] = {"name", "host", "port", "header", "format", NULL};
static const char *const dns_keys[] = {"qtypes", "refuse_with", NULL};
static const char *const limits_keys[] = {"new_flows_per_second", "new_flows_burst", NULL};

static struct loc loc_of(const struct pparse *pp, const struct ynode *n)
{
	return (struct loc){pp->file, n->line, n->col};
}

static int pp_nomem(struct pparse *pp)
{
	return diag_at(pp->b->d, PC_ENOMEM, pp->file, 0, 0, "out of memory");
}

/* ---- values --------------------------------------------------------------- */

/* A prefix, with a reason when it is not one. */
static int prefix_parse(const char *s, struct pc_prefix *out, char *why, size_t wlen)
{
	char host[PC_ADDRSTRLEN + 1], net[PC_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	struct pc_prefix p;

	if (pc_prefix_parse(s, out) == 0)
		return 0;
	if (n == 0 || n >= sizeof(host)) {
		snprintf(why, wlen, "it is not an IP address");
		return PC_EINVAL;
	}
	memcpy(host, s, n);
	host[n] = '\0';
	if (pc_addr_parse(host, &p.addr) < 0) {
		snprintf(why, wlen, "'%.48s' is not an IP address", host);
		return PC_EINVAL;
	}
	if (pc_prefix_parse(host, &p) == 0 && slash) {
		char *end;
		unsigned long len = strtoul(slash + 1, &end, 10);
		unsigned max = (unsigned)pc_addr_len(&p.addr) * 8;

		if (slash[1] < '0' || slash[1] > '9' || *end || len > max) {
			snprintf(why, wlen, "the prefix length must be a number from 0 to %u", max);
			return PC_EINVAL;
		}
		for (unsigned bit = (unsigned)len; bit < max; bit++)
			p.addr.a[bit / 8] &= (uint8_t) ~(0x80 >> (bit % 8));
		snprintf(why, wlen,
			 "address bits are set after the first %lu (the network is %s/%lu)", len,
			 pc_addr_str(&p.addr, net, sizeof(net)), len);
		return PC_EINVAL;
	}
	snprintf(why, wlen, "it is not an address/length");
	return PC_EINVAL;
}

static int get_prefix(struct pparse *pp, const struct ynode *n, const char *what,
		      struct pc_prefix *out)
{
	char why[160];
	const char *s;

	if (yget_str(&pp->c, n, what, &s))
		return PC_EPARSE;
	if (prefix_parse(s, out, why, sizeof(why)) == 0)
		return 0;
	return yerr(&pp->c, n,
		    "%s: invalid prefix '%.48s': %s; expected a network like "
		    "'10.0.0.0/24' or '2001:db8::/64', or one address",
		    what, s, why);
}

static int portrange_cmp(const void *x, const void *y)
{
	const struct policy_portrange *a = x, *b = y;

	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return (a->hi > b->hi) - (a->hi < b->hi);
}

static int get_port_item(struct pparse *pp, const struct ynode *n, struct policy_portrange *r)
{
	static const char expect[] =
	    "expected a port from 1 to 65535 or a range like \"8000-8080\"";
	unsigned long v[2] = {0, 0};
	const char *s;
	char *end, why[96];
	int k = 0;

	if (n->type != YN_SCALAR || ynode_is_null(n))
		return yerr_type(&pp->c, n, "ports",
				 "a port from 1 to 65535 or a range "
				 "like \"8000-8080\"");
	s = n->str;
	if (rules_nondecimal(s, why, sizeof(why)))
		return yerr(&pp->c, n,
			    "ports: %s; expected ports written in decimal, like 443, or a "
			    "range like \"8000-8080\"",
			    why);
	for (;;) {
		if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
			goto bad;
		v[k] = strtoul(s, &end, 10);
		if (end - s > 5 || v[k] > 65535)
			goto range;
		if (v[k] == 0)
			return yerr(&pp->c, n, "ports: port 0 is not a port; %s", expect);
		if (*end == '\0')
			break;
		if (*end != '-' || k == 1)
			goto bad;
		s = end + 1;
		k = 1;
	}
	if (k == 0)
		v[1] = v[0];
	if (v[0] > v[1])
		return yerr(&pp->c, n,
			    "ports: invalid range '%.32s': the first port is above the last; "
			    "expected lo-hi with lo <= hi",
			    n->str);
	r->lo = (uint16_t)v[0];
	r->hi = (uint16_t)v[1];
	return 0;
range:
	return yerr(&pp->c, n, "ports: '%.32s' is out of range; %s", n->str, expect);
bad:
	return yerr(&pp->c, n, "ports: invalid port '%.32s'; %s", n->str, expect);
}

/* Ports as a sorted list of disjoint ranges: [443, 80, 81] and
 * ["80-81", 443] are the same set, and compile to the same thing. */
static int get_ports(struct pparse *pp, const struct ynode *n, struct policy_allow *a)
{
	struct policy_portrange *r;
	size_t m = 0;
	int rc = 0;

	if (n->type != YN_SEQ)
		return yerr_type(&pp->c, n, "ports",
				 "a list of ports like [443] or [\"8000-8080\"]");
	if (n->n == 0)
		return yerr(&pp->c, n, "ports: the list is empty; expected at least one port");
	r = arena_calloc(pp->a, n->n, sizeof(*r));
	if (!r)
		return pp_nomem(pp);
	for (size_t i = 0; i < n->n; i++)
		if (get_port_item(pp, n->kids[i], &r[i]))
			rc = PC_EPARSE;
	if (rc)
		return rc;
	qsort(r, n->n, sizeof(*r), portrange_cmp);
	for (size_t i = 0; i < n->n; i++) {
		if (m && (unsigned)r[i].lo <= (unsigned)r[m - 1].hi + 1) {
			if (r[i].hi > r[m - 1].hi)
				r[m - 1].hi = r[i].hi;
		} else {
			r[m++] = r[i];
		}
	}
	a->ports = r;
	a->n_ports = m;
	return 0;
}

static int get_host(struct pparse *pp, const struct ynode *n, const char *what, char *out,
		    bool *wild)
{
	struct pc_err e;
	const char *s;

	if (yget_str(&pp->c, n, what, &s))
		return PC_EPARSE;
	if (policy_host_normalize(s, out, POLICY_HOST_MAX, wild, &e) < 0)
		return yerr(&pp->c, n, "%s: %s", what, e.msg);
	return 0;
}

static int get_qtypes(struct pparse *pp, const struct ynode *n, uint32_t *out)
{
	uint32_t bits = 0;
	int rc = 0;

	if (n->type != YN_SEQ)
		return yerr_type(&pp->c, n, "dns.qtypes", "a list of DNS types like [A, AAAA]");
	for (size_t i = 0; i < n->n; i++) {
		const char *s, *sug;
		uint32_t bit;

		if (yget_str(&pp->c, n->kids[i], "dns.qtypes", &s)) {
			rc = PC_EPARSE;
		} else if (rules_qtype_from_name(s, &bit) == 0) {
			bits |= bit;
		} else {
			sug = rules_suggest(s, rules_qtype_all, 11);
			rc = yerr(&pp->c, n->kids[i],
				  "dns.qtypes: unknown DNS type '%.32s'%s%s%s; expected one of A, "
				  "AAAA, CNAME, HTTPS, SVCB, TXT, MX, SRV, PTR, NS, CAA",
				  s, sug ? " (did you mean '" : "", sug ? sug : "",
				  sug ? "'?)" : "");
		}
	}
	if (!rc)
		*out = bits;
	return rc;
}

static bool name_valid(const char *s, bool secret)
{
	size_t len = strlen(s);

	if (len == 0 || len >= POLICY_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];
		bool up = ch >= 'A' && ch <= 'Z', low = ch >= 'a' && ch <= 'z';
		bool dig = ch >= '0' && ch <= '9';

		if (secret ? !(up || (i && (dig || ch == '_')))
			   : !(up || low || dig || (i && (ch == '-' || ch == '_' || ch == '.'))))
			return false;
	}
	return true;
}

/* ---- sections ------------------------------------------------------------- */

static int parse_match(struct pparse *pp, struct sbb *s, const struct ynode *m)
{
	const struct ynode *src = ymap_get(m, "source"), *mac = ymap_get(m, "mac");
	const struct ynode *port = ymap_get(m, "port");
	struct policy_match *pm = &s->sb.match;
	int rc = 0;

	if (m->type != YN_MAP)
		return yerr_type(&pp->c, m, "match",
				 "a mapping with source, mac and/or port (which packets are this "
				 "sandbox's)");
	s->match = loc_of(pp, m);
	if (ymap_check_keys(&pp->c, m, match_keys, "match"))
		rc = PC_EPARSE;
	if (!src && !mac && !port)
		return yerr(&pp->c, m,
			    "match: no selector; expected at least one of source, mac, "
			    "port");
	if (src) {
		const struct ynode *const *items = (const struct ynode *const *)src->kids;
		size_t cnt = src->n;

		if (src->type == YN_SCALAR && !ynode_is_null(src)) {
			items = &src;
			cnt = 1;
		} else if (src->type != YN_SEQ) {
			return yerr_type(&pp->c, src, "match.source",
					 "a prefix like '10.0.0.10/32' or a list of them");
		} else if (cnt == 0) {
			return yerr(&pp->c, src,
				    "match.source: the list is empty; expected at "
				    "least one prefix");
		}
		pm->sources = arena_calloc(pp->a, cnt, sizeof(*pm->sources));
		s->src = arena_calloc(pp->a, cnt, sizeof(*s->src));
		if (!pm->sources || !s->src)
			return pp_nomem(pp);
		for (size_t i = 0; i < cnt; i++) {
			if (get_prefix(pp, items[i], "match.source", &pm->sources[i]))
				rc = PC_EPARSE;
			s->src[i] = loc_of(pp, items[i]);
		}
		pm->n_sources = cnt;
	}
	if (mac) {
		const char *str;

		if (yget_str(&pp->c, mac, "match.mac", &str)) {
			rc = PC_EPARSE;
		} else if (pc_mac_parse(str, pm->mac) < 0) {
			rc = yerr(&pp->c, mac,
				  "match.mac: invalid MAC address '%.32s'; expected six hex bytes "
				  "like 02:00:5e:10:00:01",
				  str);
		} else if (pm->mac[0] & 1) {
			rc = yerr(&pp->c, mac,
				  "match.mac: '%.32s' is a multicast address, never a sender; "
				  "expected the sandbox's own (unicast) MAC",
				  str);
		} else {
			pm->has_mac = true;
		}
	}
	if (port) {
		const char *str;

		if (yget_str(&pp->c, port, "match.port", &str))
			rc = PC_EPARSE;
		else if (!rules_ifname_valid(str))
			rc = yerr(&pp->c, port,
				  "match.port: invalid interface name '%.32s'; expected the bridge "
				  "port's name (1-15 characters without '/', ':' or spaces)",
				  str);
		else
			pc_strlcpy(pm->port, str, sizeof(pm->port));
	}
	return rc;
}

static int parse_allow(struct pparse *pp, struct sbb *s, const struct ynode *n, size_t idx,
		       struct policy_allow *a)
{
	const struct ynode *host = ymap_get(n, "host"), *cidr = ymap_get(n, "cidr");
	const struct ynode *ports = ymap_get(n, "ports"), *proto = ymap_get(n, "proto");
	int rc = 0;

	if (n->type != YN_MAP)
		return yerr_type(&pp->c, n, "allow entry",
				 "a mapping like {host: api.example.com, ports: [443]}");
	a->file = pp->file;
	a->line = n->line;
	a->proto = POLICY_PROTO_TCP;
	snprintf(a->rule, sizeof(a->rule), "%s/allow[%zu]", s->sb.name, idx);
	if (ymap_check_keys(&pp->c, n, allow_keys, "an allow entry"))
		rc = PC_EPARSE;
	if (host && cidr) {
		/* Point at whichever of the two keys comes second. */
		const struct ynode *second = NULL;

		for (size_t i = 0; i < n->n && !second; i++)
			if (ymap_val(n, i) == host || ymap_val(n, i) == cidr)
				for (size_t j = i + 1; j < n->n && !second; j++)
					if (ymap_val(n, j) == host || ymap_val(n, j) == cidr)
						second = ymap_key(n, j);
		return yerr(&pp->c, second ? second : n,
			    "an allow entry has host or cidr, not both; expected one entry "
			    "for each");
	}
	if (!host && !cidr)
		return yerr(&pp->c, n,
			    "allow entry: no destination; expected 'host' (a name) or "
			    "'cidr' (a network)");
	a->vline = (host ? host : cidr)->line;
	a->vcol = (host ? host : cidr)->col;
	if (host) {
		bool wild = false;

		if (get_host(pp, host, "host", a->host, &wild))
			rc = PC_EPARSE;
		a->kind = wild ? POLICY_ALLOW_WILDCARD : POLICY_ALLOW_HOST;
	} else {
		a->kind = POLICY_ALLOW_CIDR;
		if (get_prefix(pp, cidr, "cidr", &a->cidr))
			rc = PC_EPARSE;
	}
	if (!ports)
		rc = yerr(&pp->c, n,
			  "allow entry: no 'ports'; expected a list of the ports it "
			  "allows, like [443]");
	else if (get_ports(pp, ports, a))
		rc = PC_EPARSE;
	if (proto) {
		const char *str;

		if (yget_str(&pp->c, proto, "proto", &str))
			rc = PC_EPARSE;
		else if (strcmp(str, "tcp") == 0)
			a->proto = POLICY_PROTO_TCP;
		else if (strcmp(str, "udp") == 0)
			a->proto = POLICY_PROTO_UDP;
		else if (strcmp(str, "any") == 0)
			a->proto = POLICY_PROTO_ANY;
		else
			rc = yerr(&pp->c, proto, "proto: expected tcp, udp or any, found '%.32s'",
				  str);
	}
	return rc;
}

static bool header_valid(const char *s)
{
	static const char *const framing[] = {"host", "content-length", "transfer-encoding",
					      "connection"};
	size_t len = strlen(s);

	if (len == 0 || len >= 64)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || strchr("!#$%&'*+-.^_`|~", s[i])))
			return false;
	/* Headers that route or frame a request are the vault's to check,
	 * never a secret's to carry. */
	for (size_t i = 0; i < sizeof(framing) / sizeof(framing[0]); i++)
		if (strcasecmp(s, framing[i]) == 0)
			return false;
	return true;
}

static int parse_secret(struct pparse *pp, struct sbb *s, const struct ynode *n, size_t i)
{
	struct policy_secret *sec = &s->sb.secrets[i];
	const struct ynode *name = ymap_get(n, "name"), *host = ymap_get(n, "host");
	const struct ynode *port = ymap_get(n, "port"), *header = ymap_get(n, "header");
	const struct ynode *format = ymap_get(n, "format");
	const char *str;
	int rc = 0;

	if (n->type != YN_MAP)
		return yerr_type(&pp->c, n, "secret",
				 "a mapping like {name: GITHUB_TOKEN, host: api.github.com}");
	s->sec_name[i] = s->sec_host[i] = loc_of(pp, n);
	sec->port = 443;
	pc_strlcpy(sec->header, "Authorization", sizeof(sec->header));
	pc_strlcpy(sec->format, "Bearer {secret}", sizeof(sec->format));
	if (ymap_check_keys(&pp->c, n, secret_keys, "a secret"))
		rc = PC_EPARSE;
	if (!name) {
		rc = yerr(&pp->c, n,
			  "secret: no 'name'; expected the secret's name, like "
			  "GITHUB_TOKEN");
	} else if (yget_str(&pp->c, name, "name", &str)) {
		rc = PC_EPARSE;
	} else if (!name_valid(str, true)) {
		rc = yerr(&pp->c, name,
			  "name: invalid secret name '%.64s'; expected upper-case letters, digits "
			  "and '_', starting with a letter (like GITHUB_TOKEN), at most 63",
			  str);
	} else {
		pc_strlcpy(sec->name, str, sizeof(sec->name));
		s->sec_name[i] = loc_of(pp, name);
	}
	if (!host) {
		rc = yerr(&pp->c, n, "secret: no 'host'; expected the one host it may be sent to");
	} else {
		bool wild = false;

		if (get_host(pp, host, "host", sec->host, &wild))
			rc = PC_EPARSE;
		else if (wild)
			rc =
			    yerr(&pp->c, host,
				 "host: a secret is bound to one exact host, not '%.64s'; expected "
				 "a name without '*'",
				 host->str);
		s->sec_host[i] = loc_of(pp, host);
	}
	sec->line = port ? port->line : n->line;
	sec->col = port ? port->col : n->col;
	if (port) {
		uint64_t v;

		if (yget_uint(&pp->c, port, "port", 1, 65535, &v))
			rc = PC_EPARSE;
		else
			sec->port = (uint16_t)v;
	}
	if (header) {
		if (yget_str(&pp->c, header, "header", &str))
			rc = PC_EPARSE;
		else if (!header_valid(str))
			rc = yerr(
			    &pp->c, header,
			    "header: invalid header name '%.64s'; expected an HTTP header name "
			    "like Authorization (not Host, Content-Length, Transfer-Encoding or "
			    "Connection)",
			    str);
		else
			pc_strlcpy(sec->header, str, sizeof(sec->header));
	}
	if (format) {
		const char *at, *bad = NULL;

		if (yget_str(&pp->c, format, "format", &str))
			return PC_EPARSE;
		for (const char *c = str; *c && !bad; c++)
			if (*c < 0x20 || *c >= 0x7f)
				bad = c;
		at = strstr(str, "{secret}");
		/* each failure its own words: a CR/LF read as "too long" sent the
		 * admin counting characters instead of removing a line break */
		if (bad && (*bad == '\r' || *bad == '\n'))
			rc =
			    yerr(&pp->c, format,
				 "format: contains a line break (%s at character %zu), which would "
				 "end the header and start another; expected one line, like "
				 "\"Bearer {secret}\"",
				 *bad == '\r' ? "CR" : "LF", (size_t)(bad - str) + 1);
		else if (bad)
			rc = yerr(&pp->c, format,
				  "format: contains byte 0x%02X at character %zu, not printable "
				  "ASCII; expected printable ASCII (it becomes a header value)",
				  (unsigned char)*bad, (size_t)(bad - str) + 1);
		else if (strlen(str) >= sizeof(sec->format))
			rc = yerr(&pp->c, format,
				  "format: too long (%zu characters); expected at most %zu (it "
				  "becomes a header value)",
				  strlen(str), sizeof(sec->format) - 1);
		else if (!at || strstr(at + 1, "{secret}"))
			rc = yerr(&pp->c, format,
				  "format: '%.64s' must contain {secret} exactly once; expected "
				  "something like \"Bearer {secret}\"",
				  str);
		else
			pc_strlcpy(sec->format, str, sizeof(sec->format));
	}
	return rc;
}

static int parse_dns(struct pparse *pp, struct sbb *s, const struct ynode *n)
{
	const struct ynode *q = ymap_get(n, "qtypes"), *r = ymap_get(n, "refuse_with");
	int rc = 0;

	if (n->type != YN_MAP)
		return yerr_type(&pp->c, n, "dns", "a mapping with qtypes and/or refuse_with");
	if (ymap_check_keys(&pp->c, n, dns_keys, "dns"))
		rc = PC_EPARSE;
	if (q && get_qtypes(pp, q, &s->sb.dns_qtypes))
		rc = PC_EPARSE;
	if (r) {
		const char *str;

		if (yget_str(&pp->c, r, "dns.refuse_with", &str))
			rc = PC_EPARSE;
		else if (strcmp(str, "refused") == 0)
			s->sb.dns_refuse = DNS_REFUSE_REFUSED;
		else if (strcmp(str, "nxdomain") == 0)
			s->sb.dns_refuse = DNS_REFUSE_NXDOMAIN;
		else
			rc = yerr(&pp->c, r,
				  "dns.refuse_with: expected refused or nxdomain, found '%.32s'",
				  str);
	}
	return rc;
}

/* limits: {new_flows_per_second, new_flows_burst}: the sandbox's own
 * new-flow limit (docs/policy.md); a key not given keeps the config's. */
static int parse_limits(struct pparse *pp, struct sbb *s, const struct ynode *n)
{
	static const struct {
		const char *key;
		uint32_t max;
	} k[] = {{"new_flows_per_second", RULES_LIMIT_RATE_MAX},
		 {"new_flows_burst", RULES_LIMIT_BURST_MAX}};
	uint32_t *dst[] = {&s->sb.new_flows_per_second, &s->sb.new_flows_burst};
	int rc = 0;

	if (n->type != YN_MAP)
		return yerr_type(&pp->c, n, "limits",
				 "a mapping with new_flows_per_second and/or new_flows_burst");
	if (ymap_check_keys(&pp->c, n, limits_keys, "limits"))
		rc = PC_EPARSE;
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		const struct ynode *v = ymap_get(n, k[i].key);
		char what[48];
		uint64_t x;

		if (!v)
			continue;
		snprintf(what, sizeof(what), "limits.%s", k[i].key);
		if (yget_uint(&pp->c, v, what, 1, k[i].max, &x))
			rc = PC_EPARSE;
		else
			*dst[i] = (uint32_t)x;
	}
	return rc;
}

/* Room for one more element in the array arrp points to (n used of *cap);
 * false: out of memory. The pointer is moved with memcpy, not through a
 * void ** (another type's object). */
static bool room_for_one(void *arrp, size_t n, size_t *cap, size_t elsize)
{
	void *arr, *v;
	size_t ncap;

	if (n < *cap)
		return true;
	ncap = *cap ? *cap * 2 : 16;
	memcpy(&arr, arrp, sizeof(arr));
	v = realloc(arr, ncap * elsize);
	if (!v)
		return false;
	memcpy(arrp, &v, sizeof(v));
	*cap = ncap;
	return true;
}

static struct sbb *pbuild_push(struct pbuild *b)
{
	if (!room_for_one(&b->v, b->n, &b->cap, sizeof(*b->v)))
		return NULL;
	memset(&b->v[b->n], 0, sizeof(b->v[0]));
	return &b->v[b->n++];
}

static int parse_sandbox(struct pparse *pp, const struct ynode *m)
{
	const struct ynode *name = ymap_get(m, "sandbox"), *match = ymap_get(m, "match");
	const struct ynode *allow = ymap_get(m, "allow"), *secrets = ymap_get(m, "secrets");
	const struct ynode *dns = ymap_get(m, "dns"), *limits = ymap_get(m, "limits");
	struct sbb *s;
	const char *str;
	int rc = 0;

	if (m->type != YN_MAP)
		return yerr_type(&pp->c, m, "sandbox",
				 "a mapping with sandbox, match, allow and secrets");
	s = pbuild_push(pp->b);
	if (!s)
		return pp_nomem(pp);
	s->a = pp->a;
	s->sb.file = pp->file;
	s->sb.line = m->line;
	s->sb.dns_qtypes = pp->def->qtypes;
	s->sb.dns_refuse = pp->def->refuse;
	s->sb.new_flows_per_second = pp->def->rate;
	s->sb.new_flows_burst = pp->def->burst;
	s->name = loc_of(pp, m);
	if (ymap_check_keys(&pp->c, m, sandbox_keys, "a sandbox"))
		rc = PC_EPARSE;
	if (!name) {
		rc = yerr(&pp->c, m,
			  "sandbox: no 'sandbox' key; expected the sandbox's name, "
			  "like 'sandbox: agent-1'");
		pc_strlcpy(s->sb.name, "?", sizeof(s->sb.name));
	} else if (yget_str(&pp->c, name, "sandbox", &str)) {
		rc = PC_EPARSE;
	} else if (!name_valid(str, false)) {
		rc =
		    yerr(&pp->c, name,
			 "sandbox: invalid name '%.64s'; expected at most 63 letters, digits, '.', "
			 "'_' or '-', starting with a letter or digit",
			 str);
	} else {
		pc_strlcpy(s->sb.name, str, sizeof(s->sb.name));
		s->name = loc_of(pp, name);
		s->name_ok = true;
		s->sb.line = name->line;
	}
	if (!match)
		rc = yerr(&pp->c, m,
			  "sandbox: no 'match'; expected a selector like 'match: "
			  "{source: 10.0.0.10/32}'");
	else if (parse_match(pp, s, match))
		rc = PC_EPARSE;
	if (allow && allow->type != YN_SEQ) {
		rc = yerr_type(&pp->c, allow, "allow", "a list of allow entries");
	} else if (allow && allow->n) {
		s->sb.allow = arena_calloc(pp->a, allow->n, sizeof(*s->sb.allow));
		if (!s->sb.allow)
			return pp_nomem(pp);
		s->sb.n_allow = allow->n;
		for (size_t i = 0; i < allow->n && !pp->b->d->gave_up; i++)
			if (parse_allow(pp, s, allow->kids[i], i, &s->sb.allow[i]))
				rc = PC_EPARSE;
	}
	if (secrets && secrets->type != YN_SEQ) {
		rc = yerr_type(&pp->c, secrets, "secrets", "a list of secrets");
	} else if (secrets && secrets->n) {
		size_t n = secrets->n;

		s->sb.secrets = arena_calloc(pp->a, n, sizeof(*s->sb.secrets));
		s->sec_name = arena_calloc(pp->a, n, sizeof(*s->sec_name));
		s->sec_host = arena_calloc(pp->a, n, sizeof(*s->sec_host));
		if (!s->sb.secrets || !s->sec_name || !s->sec_host)
			return pp_nomem(pp);
		s->sb.n_secrets = n;
		for (size_t i = 0; i < n && !pp->b->d->gave_up; i++)
			if (parse_secret(pp, s, secrets->kids[i], i))
				rc = PC_EPARSE;
	}
	if (dns && parse_dns(pp, s, dns))
		rc = PC_EPARSE;
	if (limits && parse_limits(pp, s, limits))
		rc = PC_EPARSE;
	s->bad = rc != 0;
	return rc;
}

void rfile_unref(struct rfile *f)
{
	if (f && atomic_fetch_sub(&f->refs, 1) == 1) {
		arena_free(&f->arena);
		free(f);
	}
}

/* A new file of the build, its sandboxes from b->n on. */
static struct rfile *pbuild_add_file(struct pbuild *b, struct rfile *rf, bool fresh)
{
	if (!room_for_one(&b->files, b->n_files, &b->cap_files, sizeof(*b->files)))
		return NULL;
	b->files[b->n_files++] = (struct pbuild_file){.rf = rf, .first = b->n, .fresh = fresh};
	return rf;
}

static bool rfile_same(const struct rfile *f, const char *buf, size_t len,
		       const struct rfile_defaults *def)
{
	return f->len == len && memcmp(f->bytes, buf, len) == 0 && f->def.qtypes == def->qtypes &&
	       f->def.refuse == def->refuse && f->def.rate == def->rate &&
	       f->def.burst == def->burst;
}

bool pbuild_reuse(struct pbuild *b, const char *name, const char *buf, size_t len)
{
	const struct policy *prev = b->prev;
	struct rfile *rf;

	if (!prev)
		return false;
	/* Both loads walk their files in name order: one pass over prev's. */
	while (b->prev_at < prev->n_files && strcmp(prev->files[b->prev_at]->path, name) < 0)
		b->prev_at++;
	if (b->prev_at == prev->n_files || strcmp(prev->files[b->prev_at]->path, name) != 0)
		return false;
	rf = prev->files[b->prev_at];
	if (!rfile_same(rf, buf, len, &b->def))
		return false;
	if (!pbuild_add_file(b, rf, false))
		return false; /* out of memory: parsing it afresh will say so */
	atomic_fetch_add(&rf->refs, 1);
	for (size_t i = 0; i < rf->n_sbs; i++) {
		struct sbb *s = pbuild_push(b);

		if (!s) {
			/* undo: the file is parsed afresh, and fails there */
			b->n = b->files[b->n_files - 1].first;
			rfile_unref(rf);
			b->n_files--;
			return false;
		}
		*s = rf->sbs[i];
		s->reused = true;
	}
	b->files[b->n_files - 1].n = rf->n_sbs;
	return true;
}

/* The bytes of one file into pp's arena, its sandboxes appended to the build. */
static int pbuild_file_parse(struct pparse *pp, const char *name, const char *buf, size_t len)
{
	struct pbuild *b = pp->b;
	struct yfile *yf = NULL;
	int rc = yfile_parse(name, buf, len, &yf, b->d);

	if (rc)
		return rc == PC_ENOMEM ? rc : 0;
	size_t blank = 0;
	while (blank < len && memchr(" \t\r\n", buf[blank], 4))
		blank++;
	if (blank == len) {
		/* Most often a file truncated by a write in progress: refusing it
		 * keeps the running policy (tests/faults/policy_files.sh). A file
		 * of comments is a deliberate "no sandbox here" and loads. */
		yfile_free(yf);
		rc = diag_at(b->d, PC_EINVAL, pp->file, 1, 1,
			     "the rule file is empty; expected a sandbox or a list of them "
			     "(to have none here, say so in a comment or remove the file)");
		return rc == PC_ENOMEM ? rc : 0;
	}
	for (size_t d = 0; d < yf->n_docs && !b->d->gave_up; d++) {
		const struct ynode *root = yf->docs[d].root;

		if (ynode_is_null(root))
			continue; /* an empty document, or a file of comments */
		if (root->type == YN_SEQ) {
			for (size_t i = 0; i < root->n && !b->d->gave_up; i++)
				if (parse_sandbox(pp, root->kids[i]) == PC_ENOMEM)
					goto nomem;
		} else if (root->type == YN_MAP) {
			if (parse_sandbox(pp, root) == PC_ENOMEM)
				goto nomem;
		} else {
			yerr_type(&pp->c, root, "rule file",
				  "a sandbox (a mapping with sandbox, match, allow) or a list of "
				  "them");
		}
	}
	yfile_free(yf);
	return 0;
nomem:
	yfile_free(yf);
	return PC_ENOMEM;
}

int pbuild_file(struct pbuild *b, const char *name, const char *buf, size_t len)
{
	struct pparse pp = {.b = b};
	struct rfile *rf;
	int rc;

	if (len > RULES_FILE_MAX)
		return diag_at(b->d, PC_EINVAL, name, 0, 0, "too large (%zu bytes, limit %u)", len,
			       RULES_FILE_MAX);
	rf = calloc(1, sizeof(*rf));
	if (!rf)
		return diag_at(b->d, PC_ENOMEM, name, 0, 0, "out of memory");
	atomic_init(&rf->refs, 1);
	rf->def = b->def;
	rf->path = arena_strdup(&rf->arena, name);
	rf->bytes = arena_strndup(&rf->arena, buf, len);
	rf->len = len;
	if (!rf->path || !rf->bytes || !pbuild_add_file(b, rf, true)) {
		rfile_unref(rf);
		return diag_at(b->d, PC_ENOMEM, name, 0, 0, "out of memory");
	}
	pp.a = &rf->arena;
	pp.def = &rf->def;
	pp.file = rf->path;
	pp.c = (struct yctx){.d = b->d, .file = pp.file};
	rc = pbuild_file_parse(&pp, name, buf, len);
	b->files[b->n_files - 1].n = b->n - b->files[b->n_files - 1].first;
	return rc;
}
