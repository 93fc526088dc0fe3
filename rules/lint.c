/* The warnings of `portcullis policy lint`: what is valid but almost
 * certainly not what the admin meant — a wildcard under a public suffix,
 * an allow-all prefix, a way to DNS around the guard, a special-purpose
 * range, an entry that can never match, a secret on a port the vault
 * cannot serve, a rule file the loader ignores, a dangerous setting. Each is reported with the
 * file:line:col of what it is about; none changes the policy. docs/policy.md lists them. */
#include "rules/rules_int.h"

#include <dirent.h>
#include <ifaddrs.h>
#include <libpsl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <strings.h>

#define PSL_DAT "/usr/share/publicsuffix/public_suffix_list.dat"

static void warn(struct lint_ctx *l, const char *file, unsigned line, unsigned col, const char *fmt,
		 ...) __attribute__((format(printf, 5, 6)));
static void warn(struct lint_ctx *l, const char *file, unsigned line, unsigned col, const char *fmt,
		 ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	l->warnings++;
	if (l->warn)
		l->warn(l->arg, file ? file : "?", line ? line : 1, col ? col : 1, msg);
}

/* ---- the Public Suffix List ----------------------------------------------- */

/* Debian's publicsuffix package (libpsl reads the same file); the builtin
 * or newest copy libpsl knows when it is absent. */
static const psl_ctx_t *psl_get(struct lint_ctx *l)
{
	if (!l->psl_tried) {
		l->psl_tried = true;
		l->psl = psl_load_file(l->psl_file ? l->psl_file : PSL_DAT);
		if (!l->psl && !l->psl_file)
			l->psl = psl_latest(NULL);
	}
	return l->psl;
}

/* The list's rules indexed by each name above them: for "s3.amazonaws.com",
 * "amazonaws.com" and "com" count one rule below them. libpsl answers "is
 * this a suffix" but cannot list them, so the file is read here, once: a
 * policy of many wildcards costs one hash lookup each. */
struct psl_above {
	char *name;  /* lower case; NULL: empty slot */
	char *first; /* the first rule under it, as written ("*.compute.amazonaws.com") */
	size_t count;
};

static uint32_t name_hash(const char *s)
{
	uint32_t h = PC_FNV1A_INIT;

	for (; *s; s++)
		h = pc_fnv1a_step(h, (unsigned char)(*s | 0x20));
	return h;
}

static struct psl_above *above_slot(struct lint_ctx *l, const char *name)
{
	size_t mask = l->n_above_slots - 1, i = name_hash(name) & mask;

	while (l->above[i].name && strcasecmp(l->above[i].name, name) != 0)
		i = (i + 1) & mask;
	return &l->above[i];
}

static void above_add(struct lint_ctx *l, const char *name, const char *rule)
{
	struct psl_above *a;

	if (l->n_above * 2 >= l->n_above_slots)
		return; /* full: later names go uncounted (the list is far smaller) */
	a = above_slot(l, name);
	if (!a->name) {
		a->name = strdup(name);
		a->first = strdup(rule);
		if (!a->name || !a->first) {
			free(a->name);
			free(a->first);
			a->name = a->first = NULL;
			return;
		}
		l->n_above++;
	}
	a->count++;
}

static void above_load(struct lint_ctx *l)
{
	const char *path = l->psl_file ? l->psl_file : PSL_DAT;
	char line[512];
	FILE *f;

	if (l->above_tried)
		return;
	l->above_tried = true;
	l->n_above_slots = 1u << 16;
	l->above = calloc(l->n_above_slots, sizeof(*l->above));
	f = l->above ? fopen(path, "re") : NULL;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *s = line, *rule;

		if (s[0] == '/' || s[0] == '\n' || s[0] == ' ')
			continue;
		s[strcspn(s, " \t\r\n")] = '\0';
		rule = s;
		if (*s == '!')
			s++;
		if (s[0] == '*' && s[1] == '.')
			s += 2;
		for (char *dot = strchr(s, '.'); dot; dot = strchr(dot + 1, '.'))
			above_add(l, dot + 1, rule);
	}
	fclose(f);
}

/* How many rules of the list lie strictly under suffix, and the first. */
static size_t psl_below(struct lint_ctx *l, const char *suffix, char *first, size_t len)
{
	struct psl_above *a;

	above_load(l);
	if (!l->n_above)
		return 0;
	a = above_slot(l, suffix);
	if (!a->name)
		return 0;
	pc_strlcpy(first, a->first, len);
	return a->count;
}

/* *.X where X is a public suffix (anyone can register a name under it), or
 * where public suffixes lie under X (anyone can get a name under those). */
static void warn_wildcard(struct lint_ctx *l, const struct policy_sandbox *sb,
			  const struct policy_allow *a)
{
	const psl_ctx_t *psl = psl_get(l);
	char first[256];
	size_t n;

	if (!psl) {
		if (!l->psl_said) {
			l->psl_said = true;
			warn(l, a->file, a->vline, a->vcol,
			     "the Public Suffix List could not be read (%s, or libpsl's own): "
			     "wildcards under public suffixes are not checked",
			     l->psl_file ? l->psl_file : PSL_DAT);
		}
		return;
	}
	if (psl_is_public_suffix2(psl, a->host, PSL_TYPE_ANY)) {
		warn(l, a->file, a->vline, a->vcol,
		     "host '*.%s' of sandbox '%s' allows every name under %s, a public suffix "
		     "(Public Suffix List): anyone can register a name there, so this opens a way "
		     "out to servers you do not control; allow the exact names instead (like "
		     "'name.%s')",
		     a->host, sb->name, a->host, a->host);
		return;
	}
	n = psl_below(l, a->host, first, sizeof(first));
	if (n)
		warn(l, a->file, a->vline, a->vcol,
		     "host '*.%s' of sandbox '%s' covers %zu public suffix%s under %s (such as "
		     "%s; Public Suffix List): names under %s belong to whoever registers "
		     "them, so this opens a way out to servers you do not control; allow the "
		     "exact names instead",
		     a->host, sb->name, n, n == 1 ? "" : "es", a->host, first,
		     n == 1 ? "it" : "them");
}

/* ---- ports --------------------------------------------------------------- */

static bool ports_have(const struct policy_allow *a, uint16_t port)
{
	for (size_t i = 0; i < a->n_ports; i++)
		if (a->ports[i].lo <= port && port <= a->ports[i].hi)
			return true;
	return false;
}

static bool ports_only(const struct policy_allow *a, uint16_t port)
{
	return a->n_ports == 1 && a->ports[0].lo == port && a->ports[0].hi == port;
}

static bool ports_all(const struct policy_allow *a)
{
	return a->n_ports == 1 && a->ports[0].lo == 1 && a->ports[0].hi == 65535;
}

static const char *ports_str(const struct policy_allow *a, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	if (ports_all(a))
		return "every port";
	for (size_t i = 0; i < a->n_ports && off < len; i++) {
		int n =
		    a->ports[i].lo == a->ports[i].hi
			? snprintf(buf + off, len - off, "%s%u", i ? ", " : "port ", a->ports[i].lo)
			: snprintf(buf + off, len - off, "%s%u-%u", i ? ", " : "ports ",
				   a->ports[i].lo, a->ports[i].hi);
		if (n < 0)
			break;
		off += (size_t)n;
	}
	return buf;
}

/* ---- DNS around the guard ------------------------------------------------- */

/* Public resolvers that answer DNS over HTTPS (443) or TLS (853): a sandbox
 * allowed to reach one resolves, and tunnels, outside the DNS guard. */
static const char *const doh_hosts[] = {"dns.google",
					"dns.google.com",
					"8888.google",
					"cloudflare-dns.com",
					"one.one.one.one",
					"1dot1dot1dot1.cloudflare-dns.com",
					"mozilla.cloudflare-dns.com",
					"security.cloudflare-dns.com",
					"family.cloudflare-dns.com",
					"dns.quad9.net",
					"dns9.quad9.net",
					"dns10.quad9.net",
					"dns11.quad9.net",
					"doh.opendns.com",
					"dns.opendns.com",
					"doh.familyshield.opendns.com",
					"dns.nextdns.io",
					"doh.cleanbrowsing.org",
					"dns.adguard.com",
					"dns.adguard-dns.com",
					"doh.mullvad.net",
					"dns.mullvad.net",
					"doh.dns.sb",
					"dns.alidns.com",
					"doh.pub",
					"ordns.he.net",
					"dns.controld.com",
					"freedns.controld.com",
					NULL};

static const char *const doh_addrs[] = {"8.8.8.8",
					"8.8.4.4",
					"1.1.1.1",
					"1.0.0.1",
					"1.1.1.2",
					"1.0.0.2",
					"1.1.1.3",
					"1.0.0.3",
					"9.9.9.9",
					"149.112.112.112",
					"9.9.9.10",
					"9.9.9.11",
					"208.67.222.222",
					"208.67.220.220",
					"94.140.14.14",
					"94.140.15.15",
					"185.228.168.9",
					"76.76.2.0",
					"45.90.28.0",
					"2001:4860:4860::8888",
					"2001:4860:4860::8844",
					"2606:4700:4700::1111",
					"2606:4700:4700::1001",
					"2620:fe::fe",
					"2620:fe::9",
					"2620:119:35::35",
					"2620:119:53::53",
					NULL};

static void warn_dns_bypass(struct lint_ctx *l, const struct policy_sandbox *sb,
			    const struct policy_allow *a)
{
	bool p443 = ports_have(a, 443), p853 = ports_have(a, 853);
	char what[PC_ADDRSTRLEN + 8];

	if (!p443 && !p853)
		return;
	what[0] = '\0';
	if (a->kind == POLICY_ALLOW_CIDR && a->cidr.len > 0) { /* all: its own warning */
		for (size_t i = 0; doh_addrs[i] && !what[0]; i++) {
			struct pc_addr ad;

			if (pc_addr_parse(doh_addrs[i], &ad) == 0 &&
			    pc_prefix_contains(&a->cidr, &ad))
				pc_strlcpy(what, doh_addrs[i], sizeof(what));
		}
	} else {
		for (size_t i = 0; doh_hosts[i] && !what[0]; i++)
			if (policy_allow_name_match(a, doh_hosts[i]))
				pc_strlcpy(what, doh_hosts[i], sizeof(what));
	}
	if (what[0]) {
		warn(l, a->file, a->vline, a->vcol,
		     "allow entry %s opens %s, a public DNS resolver, on port %u (DNS over %s): "
		     "sandbox '%s' can resolve names, and tunnel data, around the DNS guard; "
		     "sandboxes resolve through dns.resolvers",
		     a->rule, what, p443 ? 443 : 853, p443 ? "HTTPS" : "TLS", sb->name);
		return;
	}
	if (p853)
		warn(l, a->file, a->vline, a->vcol,
		     "allow entry %s opens port 853 (DNS over TLS): a resolver there answers "
		     "sandbox '%s' outside the DNS guard, and carries tunnelled data; sandboxes "
		     "resolve through dns.resolvers",
		     a->rule, sb->name);
}

/* ---- addresses ------------------------------------------------------------ */

static bool lint_routable(const struct config *cfg, const struct pc_prefix *p)
{
	for (size_t i = 0; cfg && i < cfg->dns.n_routable; i++)
		if (cfg->dns.routable[i].len <= p->len &&
		    pc_prefix_contains(&cfg->dns.routable[i], &p->addr))
			return true;
	return false;
}

static void warn_special_one(struct lint_ctx *l, const struct policy_sandbox *sb,
			     const struct policy_allow *a, const struct pc_special *e)
{
	char c[PC_ADDRSTRLEN];

	pc_addr_str(&a->cidr.addr, c, sizeof(c));
	warn(l, a->file, a->vline, a->vcol,
	     "cidr %s/%u of sandbox '%s' opens %s, %s (%s), a special-purpose range: this "
	     "sandbox may reach it, and DNS answers in it are learned for its names; expected "
	     "only addresses you mean it to reach",
	     c, a->cidr.len, sb->name, e->text, e->name, e->rfc);
}

/* cidr entries that open special-purpose ranges (not an error: an internal
 * service may be meant; but a metadata service or the gateway rarely is).
 * One warning per entry and block: the most specific block holding the
 * whole entry, else each outermost block inside it. Ranges the
 * configuration declares routable (dns.routable) are ordinary. */
static void warn_special(struct lint_ctx *l, const struct policy_sandbox *sb,
			 const struct policy_allow *a)
{
	const struct pc_special *holds = NULL;
	size_t n = pc_special_count();

	for (size_t j = 0; j < n; j++) {
		const struct pc_special *e = pc_special_at(j);

		if (e->prefix.len <= a->cidr.len && pc_prefix_contains(&e->prefix, &a->cidr.addr) &&
		    (!holds || e->prefix.len > holds->prefix.len))
			holds = e;
	}
	if (holds) {
		if (!lint_routable(l->cfg, &a->cidr))
			warn_special_one(l, sb, a, holds);
		return;
	}
	for (size_t j = 0; j < n; j++) {
		const struct pc_special *e = pc_special_at(j);
		bool outer = true;

		if (e->prefix.len <= a->cidr.len ||
		    !pc_prefix_contains(&a->cidr, &e->prefix.addr) ||
		    lint_routable(l->cfg, &e->prefix))
			continue;
		for (size_t m = 0; m < n && outer; m++) {
			const struct pc_special *o = pc_special_at(m);

			if (m != j && o->prefix.len > a->cidr.len &&
			    o->prefix.len < e->prefix.len &&
			    pc_prefix_contains(&o->prefix, &e->prefix.addr))
				outer = false;
		}
		if (outer)
			warn_special_one(l, sb, a, e);
	}
}

static bool inside(const struct pc_prefix *p, const char *block)
{
	struct pc_prefix b;

	return pc_prefix_parse(block, &b) == 0 && b.len <= p->len &&
	       pc_prefix_contains(&b, &p->addr);
}

/* The bridge's own addresses and subnets, read from the running box (the
 * gateway lint is run on); none when the bridge does not exist here. */
static void bridge_addrs(struct lint_ctx *l)
{
	struct ifaddrs *ifa = NULL;

	if (l->bridge_read || !l->cfg)
		return;
	l->bridge_read = true;
	if (getifaddrs(&ifa) < 0)
		return;
	for (struct ifaddrs *i = ifa; i && l->n_bridge < LINT_BRIDGE_MAX; i = i->ifa_next) {
		char a[PC_ADDRSTRLEN], m[PC_ADDRSTRLEN];
		struct pc_addr mask;
		struct pc_prefix *p = &l->bridge[l->n_bridge];
		int fam, bits = 0;

		if (!i->ifa_addr || strcmp(i->ifa_name, l->cfg->bridge) != 0)
			continue;
		fam = i->ifa_addr->sa_family;
		if ((fam != AF_INET && fam != AF_INET6) ||
		    getnameinfo(i->ifa_addr,
				fam == AF_INET ? sizeof(struct sockaddr_in)
					       : sizeof(struct sockaddr_in6),
				a, sizeof(a), NULL, 0, NI_NUMERICHOST) != 0 ||
		    !i->ifa_netmask ||
		    getnameinfo(i->ifa_netmask,
				fam == AF_INET ? sizeof(struct sockaddr_in)
					       : sizeof(struct sockaddr_in6),
				m, sizeof(m), NULL, 0, NI_NUMERICHOST) != 0)
			continue;
		a[strcspn(a, "%")] = '\0'; /* fe80::1%pcbr0 */
		if (pc_addr_parse(a, &p->addr) < 0 || pc_addr_parse(m, &mask) < 0)
			continue;
		for (size_t k = 0; k < (fam == AF_INET ? 4u : 16u); k++)
			bits += __builtin_popcount(mask.a[k]);
		p->len = (uint8_t)bits;
		l->n_bridge++;
	}
	freeifaddrs(ifa);
}

/* A cidr entry (or part of one) no packet can ever match. true when the
 * whole entry never matches (no other address warning is useful then). */
static bool warn_never_cidr(struct lint_ctx *l, const struct policy *p,
			    const struct policy_sandbox *sb, const struct policy_allow *a)
{
	char c[PC_ADDRSTRLEN + 4];
	const char *why = NULL;

	pc_addr_str(&a->cidr.addr, c, sizeof(c));
	if (inside(&a->cidr, "127.0.0.0/8") || inside(&a->cidr, "::1/128"))
		why = "a loopback address: a packet to it never leaves the sandbox's own host";
	else if (inside(&a->cidr, "0.0.0.0/8") && a->cidr.len > 0)
		why = "'this network' (0.0.0.0/8): no packet is ever sent to it";
	else if (inside(&a->cidr, "::ffff:0:0/96") && a->cidr.len > 0)
		why = "an IPv4-mapped IPv6 prefix: IPv4 traffic travels as IPv4 packets, which an "
		      "IPv6 prefix never matches; write the IPv4 prefix instead";
	if (!why) {
		bridge_addrs(l);
		for (size_t i = 0; i < l->n_bridge && !why; i++) {
			struct pc_prefix own = l->bridge[i];

			own.len = own.addr.family == AF_INET ? 32 : 128;
			if (a->cidr.len >= own.len && pc_prefix_contains(&own, &a->cidr.addr))
				why = "the gateway's own address on the sandbox bridge: the guard "
				      "drops sandbox traffic to the gateway itself";
		}
	}
	for (size_t i = 0; !why && i < policy_sandbox_count(p); i++) {
		const struct policy_sandbox *o = policy_sandbox_at(p, i);

		for (size_t j = 0; j < o->match.n_sources && !why; j++)
			if (o->match.sources[j].len <= a->cidr.len &&
			    pc_prefix_contains(&o->match.sources[j], &a->cidr.addr))
				why = o == sb
					  ? "this sandbox's own source: sandboxes may not reach "
					    "each other (or themselves through the gateway)"
					  : "another sandbox's source: sandboxes may not reach "
					    "each other";
	}
	if (!why)
		return false;
	warn(l, a->file, a->vline, a->vcol, "cidr %s/%u of sandbox '%s' can never match: it is %s",
	     c, a->cidr.len, sb->name, why);
	return true;
}

/* ---- one entry, one sandbox, the policy ----------------------------------- */

static void lint_entry(struct lint_ctx *l, const struct policy *p, const struct policy_sandbox *sb,
		       const struct policy_allow *a)
{
	char pb[128];

	/* Every port-53 packet goes to the DNS guard, which passes only queries
	 * to dns.resolvers: no allow entry ever sees one. */
	if (ports_only(a, 53)) {
		warn(l, a->file, a->vline, a->vcol,
		     "allow entry %s of sandbox '%s' can never match: port 53 is DNS, which the "
		     "DNS guard judges by name (queries to dns.resolvers only), never by allow "
		     "entry",
		     a->rule, sb->name);
		return;
	}
	if (a->kind == POLICY_ALLOW_WILDCARD)
		warn_wildcard(l, sb, a);
	if (a->kind == POLICY_ALLOW_CIDR) {
		if (a->cidr.len == 0) {
			warn(
			    l, a->file, a->vline, a->vcol,
			    "cidr %s of sandbox '%s' allows every %s address (%s): its names no "
			    "longer limit where it goes, and anything it is told to reach, it may; "
			    "expected the networks it needs",
			    a->cidr.addr.family == AF_INET ? "0.0.0.0/0" : "::/0", sb->name,
			    a->cidr.addr.family == AF_INET ? "IPv4" : "IPv6",
			    ports_str(a, pb, sizeof(pb)));
			return; /* what else it opens (resolvers, 853) is in this one */
		}
		if (!warn_never_cidr(l, p, sb, a))
			warn_special(l, sb, a);
	}
	warn_dns_bypass(l, sb, a);
}

/* Ports a secret's host rarely speaks TLS on: the vault meets the sandbox
 * as a TLS server there, so a plain-text client never gets its request
 * through (and a plain-text server never gets the secret). */
static bool port_cleartext(uint16_t port)
{
	static const uint16_t plain[] = {21,   23,   25,   80,	 110,  143,  389,  587,
					 3000, 5000, 8000, 8008, 8080, 8081, 8888, 9000};

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		if (plain[i] == port)
			return true;
	return false;
}

/* Where source k of sandbox sb is written (the compiled policy keeps the
 * sandbox's line only): its rule file parsed again, else the sandbox. */
static void source_pos(const struct policy_sandbox *sb, size_t k, unsigned *line, unsigned *col)
{
	struct diag d;
	struct yfile *yf = NULL;
	char *buf = NULL;
	size_t len;

	*line = sb->line;
	*col = 1;
	diag_init(&d, NULL, NULL, NULL);
	if (!sb->file || pc_file_read_regular(sb->file, RULES_FILE_MAX, &buf, &len, NULL) < 0 ||
	    yfile_parse(sb->file, buf, len, &yf, &d) < 0)
		goto out;
	for (size_t i = 0; i < yf->n_docs; i++) {
		const struct ynode *r = yf->docs[i].root;
		size_t n = r->type == YN_SEQ ? r->n : 1;

		for (size_t j = 0; j < n; j++) {
			const struct ynode *m = r->type == YN_SEQ ? r->kids[j] : r;
			const struct ynode *nm = m->type == YN_MAP ? ymap_get(m, "sandbox") : NULL;
			const struct ynode *src;

			if (!nm || nm->type != YN_SCALAR || strcasecmp(nm->str, sb->name) != 0)
				continue;
			src = ymap_get(m, "match");
			src = src && src->type == YN_MAP ? ymap_get(src, "source") : NULL;
			if (src && src->type == YN_SEQ && k < src->n)
				src = src->kids[k];
			if (src) {
				*line = src->line;
				*col = src->col;
			}
			goto out;
		}
	}
out:
	yfile_free(yf);
	free(buf);
}

/* match.source that claims more than a sandbox: every address, or more
 * than the bridge's subnet, with no mac or port to narrow it (a VM that
 * turns on IPv6, or takes another address, gets this sandbox's allow
 * list); the gateway's own address; an address outside the bridge's
 * subnets (read from this box), which no sandbox on the bridge sends from. */
static void lint_sources(struct lint_ctx *l, const struct policy_sandbox *sb)
{
	bool narrowed = sb->match.has_mac || sb->match.port[0];

	bridge_addrs(l);
	for (size_t k = 0; k < sb->match.n_sources; k++) {
		const struct pc_prefix *s = &sb->match.sources[k];
		unsigned full = s->addr.family == AF_INET ? 32 : 128, line, col;
		const char *why = NULL;
		char t[PC_ADDRSTRLEN], sub[PC_ADDRSTRLEN + 4] = "", w[320];
		bool same_family = false, inside_one = false;

		pc_addr_str(&s->addr, t, sizeof(t));
		for (size_t i = 0; i < l->n_bridge; i++) {
			const struct pc_prefix *b = &l->bridge[i];

			if (b->addr.family != s->addr.family)
				continue;
			same_family = true;
			if (s->len == full && pc_addr_eq(&s->addr, &b->addr)) {
				why = "is the gateway's own address on the sandbox bridge: no "
				      "sandbox "
				      "sends from it";
				break;
			}
			if (b->len <= s->len && pc_prefix_contains(b, &s->addr))
				inside_one = true;
			else if (s->len < b->len && pc_prefix_contains(s, &b->addr) && !sub[0]) {
				char a[PC_ADDRSTRLEN];
				struct pc_prefix net = *b;

				/* the subnet itself, host bits cleared */
				for (unsigned bit = net.len; bit < full; bit++)
					net.addr.a[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
				pc_addr_str(&net.addr, a, sizeof(a));
				snprintf(sub, sizeof(sub), "%s/%u", a, net.len);
			}
		}
		if (!why && !narrowed && s->len == 0)
			why = "claims every address of its family with no mac or port: any VM on "
			      "the bridge that takes such an address (turns on IPv6, say) gets "
			      "this sandbox's allow list";
		if (!why && !narrowed && sub[0]) {
			snprintf(
			    w, sizeof(w),
			    "is wider than the bridge's subnet %s, with no mac or port: any VM "
			    "on the bridge gets this sandbox's allow list",
			    sub);
			why = w;
		}
		if (!why && same_family && !inside_one && s->len > 0 && !sub[0])
			why = "is outside the sandbox bridge's subnets: no sandbox on the bridge "
			      "sends from it, so this selector claims nothing (or what another "
			      "network's packets carry)";
		if (!why)
			continue;
		source_pos(sb, k, &line, &col);
		warn(l, sb->file, line, col,
		     "match.source %s/%u of sandbox '%s' %s; expected the sandbox's own "
		     "addresses (add mac or port to tie a wide prefix to its VM)",
		     t, s->len, sb->name, why);
	}
}

void lint_policy(struct lint_ctx *l, const struct policy *p)
{
	for (size_t i = 0; i < policy_sandbox_count(p); i++)
		lint_sources(l, policy_sandbox_at(p, i));
	for (size_t i = 0; i < policy_sandbox_count(p); i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(p, i);

		for (size_t k = 0; k < sb->n_allow; k++)
			lint_entry(l, p, sb, &sb->allow[k]);
		for (size_t k = 0; k < sb->n_secrets; k++) {
			const struct policy_secret *s = &sb->secrets[k];

			if (port_cleartext(s->port))
				warn(l, sb->file, s->line, s->col,
				     "secret '%s' of sandbox '%s' is bound to %s:%u, a port that "
				     "usually speaks plain text: the vault injects only into TLS "
				     "(it meets the sandbox as a TLS server), so a plain request "
				     "there fails; expected the host's TLS port (443)",
				     s->name, sb->name, s->host, s->port);
		}
	}
}

/* ---- the rules directory -------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix, bool fold)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n > m &&
	       (fold ? strcasecmp(s + n - m, suffix) == 0 : strcmp(s + n - m, suffix) == 0);
}

void lint_rules_dir(struct lint_ctx *l, const char *dir)
{
	struct dirent **names = NULL;
	int n = scandir(dir, &names, NULL, alphasort);

	for (int i = 0; i < n; i++) {
		const char *f = names[i]->d_name;
		char path[PC_PATH_MAX * 2];

		if (f[0] != '.' &&
		    ((ends_with(f, ".yaml", true) && !ends_with(f, ".yaml", false)) ||
		     (ends_with(f, ".yml", true) && !ends_with(f, ".yml", false)))) {
			snprintf(path, sizeof(path), "%s/%s", dir, f);
			warn(l, path, 1, 1,
			     "this file is ignored: rule files are named NAME.yaml, in lower "
			     "case; rename it to load it (or move it out of the rules directory)");
		}
		free(names[i]);
	}
	free(names);
}

/* ---- the configuration ---------------------------------------------------- */

static bool addr_unspecified(const struct pc_addr *a)
{
	for (size_t i = 0; i < (a->family == AF_INET ? 4u : 16u); i++)
		if (a->a[i])
			return false;
	return true;
}

/* The gateway's own address on the sandbox bridge (read from this box). */
static bool addr_gateway(struct lint_ctx *l, const struct pc_addr *a)
{
	bridge_addrs(l);
	for (size_t i = 0; i < l->n_bridge; i++)
		if (pc_addr_eq(&l->bridge[i].addr, a))
			return true;
	return false;
}

static void warn_at(struct lint_ctx *l, const struct config *cfg, const char *a, const char *b,
		    const char *c, long idx, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static void warn_at(struct lint_ctx *l, const struct config *cfg, const char *a, const char *b,
		    const char *c, long idx, const char *fmt, ...)
{
	const char *keys[] = {a, b, c, NULL};
	char msg[1024];
	unsigned line, col;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	config_item_pos(cfg->path, keys, idx, &line, &col);
	warn(l, cfg->path, line, col, "%s", msg);
}

/* Warnings about settings that are valid but dangerous. What would stop
 * a daemon from starting is not here: it is an error, config_start_check's
 * (startcheck.c), which `policy lint` and the daemons' -t share. */
void lint_config(struct lint_ctx *l, const struct config *cfg)
{
	static const char *const private[] = {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
					      "fc00::/7"};

	/* RFC 5612's documentation number: records would claim another
	 * organisation's SD-ID, which no collector can tell apart */
	if (cfg->log.syslog.pen == 32473)
		warn_at(l, cfg, "log", "syslog", "enterprise_number", -1,
			"log.syslog.enterprise_number: 32473 is RFC 5612's documentation "
			"number, never an organisation's: structured data under it cannot be "
			"told from anyone else's examples; expected your organisation's own "
			"private enterprise number (or none)");
	if (cfg->engine.metrics_listen[0]) {
		struct pc_endpoint ep;

		if (pc_endpoint_parse(cfg->engine.metrics_listen, 0, &ep) == 0 &&
		    addr_unspecified(&ep.addr))
			warn_at(l, cfg, "engine", "metrics_listen", NULL, -1,
				"engine.metrics_listen: '%s' serves the engine's metrics on every "
				"interface, the sandbox bridge and the uplinks included: its "
				"counters name sandboxes, rules and hosts; expected 127.0.0.1 or "
				"a management address",
				cfg->engine.metrics_listen);
	}
	{
		uid_t uid;
		gid_t gid;

		if (pc_user_lookup(cfg->sandbox.user, &uid, &gid, NULL) == 0 && uid == 0)
			warn_at(l, cfg, "sandbox", "user", NULL, -1,
				"sandbox.user: '%s' has uid 0: root in a sandbox's network "
				"namespace is root on the gateway (it can leave the namespace "
				"and the guard); expected an unprivileged user like nobody",
				cfg->sandbox.user);
	}
	for (size_t i = 0; i < cfg->dns.n_resolvers; i++) {
		const struct pc_addr *r = &cfg->dns.resolvers[i];
		char t[PC_ADDRSTRLEN];

		pc_addr_str(r, t, sizeof(t));
		if (addr_unspecified(r))
			warn_at(l, cfg, "dns", "resolvers", NULL, (long)i,
				"dns.resolvers: %s is the unspecified address, no resolver: "
				"queries to it go to whatever answers on this host; expected the "
				"upstream resolvers' addresses",
				t);
		else if (addr_gateway(l, r))
			warn_at(l, cfg, "dns", "resolvers", NULL, (long)i,
				"dns.resolvers: %s is the gateway's own address on the sandbox "
				"bridge: the guard drops sandbox traffic to the gateway itself, "
				"so no query to it is ever answered; expected the upstream "
				"resolvers' addresses",
				t);
	}
	for (size_t i = 0; i < cfg->dns.n_routable; i++) {
		const struct pc_prefix *p = &cfg->dns.routable[i];

		for (size_t k = 0; k < sizeof(private) / sizeof(private[0]); k++) {
			char t[PC_ADDRSTRLEN];

			if (!inside(p, private[k]))
				continue;
			pc_addr_str(&p->addr, t, sizeof(t));
			warn_at(l, cfg, "dns", "routable", NULL, (long)i,
				"dns.routable: %s/%u is a private range (%s): DNS answers in it "
				"are learned, so any name a sandbox may reach can be made to "
				"point into your internal network (DNS rebinding); expected only "
				"ranges this network routes like the internet",
				t, p->len, private[k]);
			break;
		}
	}
	/* lint runs on the gateway: an uplink that is not here is a typo
	 * (the ruleset would forward from nothing). Asked of the kernel, not
	 * /sys/class/net, which shows the network namespace sysfs was mounted
	 * in rather than the one lint runs in. */
	for (size_t i = 0; i < cfg->n_uplinks; i++) {
		if (if_nametoindex(cfg->uplinks[i]) == 0)
			warn_at(l, cfg, "uplinks", NULL, NULL, (long)i,
				"uplinks: '%s': no such interface on this box: nothing from it "
				"would be forwarded; expected the name of the interface toward "
				"the upstream network (ip link)",
				cfg->uplinks[i]);
	}
}

void lint_ctx_free(struct lint_ctx *l)
{
	for (size_t i = 0; l->above && i < l->n_above_slots; i++) {
		free(l->above[i].name);
		free(l->above[i].first);
	}
	free(l->above);
	l->above = NULL;
	if (l->psl)
		psl_free((psl_ctx_t *)l->psl);
	l->psl = NULL;
}
