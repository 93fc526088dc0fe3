/* The world of the spec checks (spec/scenario.h): policies, addresses by
 * class, the names each sandbox resolves, and packet makers. */
#include "tests/spec/scenario.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char sc_policy[] = "sandbox: agent-1\n"
			 "match: { source: [10.203.0.11/32, \"fd00:203::11/128\"], port: pcv1 }\n"
			 "allow:\n"
			 "  - host: api.allowed.test\n"
			 "    ports: [443, 80]\n"
			 "  - host: \"*.wild.test\"\n"
			 "    ports: [443]\n"
			 "  - host: dns.udp.test\n"
			 "    ports: [5353]\n"
			 "    proto: udp\n"
			 "  - host: vault.test\n"
			 "    ports: [443]\n"
			 "  - host: meta.test\n"
			 "    ports: [443, 80]\n"
			 "  - host: near.test\n"
			 "    ports: [443]\n"
			 "  - host: loop.test\n"
			 "    ports: [443]\n"
			 "  - host: gw.test\n"
			 "    ports: [443]\n"
			 "  - host: twin.test\n"
			 "    ports: [443]\n"
			 "  - cidr: 151.101.9.0/24\n"
			 "    ports: [22]\n"
			 "  - cidr: \"2a04:4e42:9::/48\"\n"
			 "    ports: [22]\n"
			 "  - cidr: 100.64.7.0/24\n"
			 "    ports: [8443]\n"
			 "  - cidr: \"fd00:64:7::/48\"\n"
			 "    ports: [8443]\n"
			 "secrets:\n"
			 "  - name: TOKEN\n"
			 "    host: vault.test\n"
			 "---\n"
			 "sandbox: agent-2\n"
			 "match: { source: [10.203.0.12/32, \"fd00:203::12/128\"], port: pcv2 }\n"
			 "allow:\n"
			 "  - host: api.allowed.test\n"
			 "    ports: [443]\n"
			 "  - host: other2.test\n"
			 "    ports: [443]\n";

/* agent-1 loses api.allowed.test, the wildcard and its cidr entries; the
 * UDP name and the secret stay. */
const char sc_policy2[] = "sandbox: agent-1\n"
			  "match: { source: [10.203.0.11/32, \"fd00:203::11/128\"], port: pcv1 }\n"
			  "allow:\n"
			  "  - host: dns.udp.test\n"
			  "    ports: [5353]\n"
			  "    proto: udp\n"
			  "  - host: vault.test\n"
			  "    ports: [443]\n"
			  "secrets:\n"
			  "  - name: TOKEN\n"
			  "    host: vault.test\n"
			  "---\n"
			  "sandbox: agent-2\n"
			  "match: { source: [10.203.0.12/32, \"fd00:203::12/128\"], port: pcv2 }\n"
			  "allow:\n"
			  "  - host: api.allowed.test\n"
			  "    ports: [443]\n"
			  "  - host: other2.test\n"
			  "    ports: [443]\n";

static void addr(const char *s, struct pc_addr *a)
{
	if (pc_addr_parse(s, a) < 0)
		abort();
}

void sc_src(int fam, enum sc_src s, struct pc_addr *a, uint32_t *stamp)
{
	static const char *const v4[] = {"10.203.0.11", "10.203.0.12", "10.203.0.12", "10.203.0.99",
					 "10.203.0.11"};
	static const char *const v6[] = {"fd00:203::11", "fd00:203::12", "fd00:203::12",
					 "fd00:203::99", "fd00:203::11"};

	addr(fam == 6 ? v6[s] : v4[s], a);
	*stamp = s == SC_SB2 ? DRV_PORT2 : s == SC_BADPORT ? DRV_PORT_UNKNOWN : DRV_PORT1;
}

void sc_dst(int fam, enum sc_dst d, struct pc_addr *a)
{
	static const char *const v4[SC_NDST] = {
	    "198.51.100.53", "10.203.0.1",   "151.101.6.60", "151.101.1.10",	"151.101.5.50",
	    "151.101.3.30",  "151.101.4.40", "151.101.9.9",  "169.254.169.254", "100.64.7.7",
	    "127.0.0.1",     "10.203.0.12",  "151.101.2.20"};
	static const char *const v6[SC_NDST] = {
	    "2001:db8::53",	      "fd00:203::1",   "2a04:4e42::60", "2a04:4e42::10",
	    "2a04:4e42::50",	      "2a04:4e42::30", "2a04:4e42::40", "2a04:4e42:9::9",
	    "::ffff:169.254.169.254", "fd00:64:7::7",  "::1",		"fd00:203::12",
	    "2a04:4e42::20"};

	addr(fam == 6 ? v6[d] : v4[d], a);
}

const char *sc_src_name(enum sc_src s)
{
	static const char *const n[] = {"agent-1", "agent-2", "spoofed", "unknown", "unknown-port"};

	return s < SC_NSRC ? n[s] : "?";
}

const char *sc_dst_name(enum sc_dst d)
{
	static const char *const n[] = {
	    "resolver", "gateway",	 "never-learned", "shared",   "agent-2's",
	    "udp-only", "vault",	 "cidr",	  "metadata", "special-in-cidr",
	    "loopback", "other-sandbox", "wildcard"};

	return d < SC_NDST ? n[d] : "?";
}

void sc_init(struct sc *c, const char *yaml, bool dns_defer, sc_report_fn report, void *arg)
{
	memset(c, 0, sizeof(*c));
	c->d = drv_new(yaml, dns_defer);
	c->report = report;
	c->arg = arg;
	c->next_id = 0x1000;
	c->next_port = 20000;
	c->trace = getenv("SPEC_TRACE") != NULL;
}

void sc_fini(struct sc *c)
{
	drv_free(c->d);
	c->d = NULL;
}

bool sc_step(struct sc *c, struct drv_pkt *p)
{
	const char *row = "?";
	char why[1024];
	int rc;
	size_t i;

	c->packets++;
	rc = drv_step(c->d, p, &row, why, sizeof(why));
	if (c->trace) {
		char ps[400], g[64];

		fprintf(stderr, "spec: %-4s %-8s %s\n", row,
			spec_out_str(drv_last(c->d), g, sizeof(g)), drv_pkt_str(p, ps, sizeof(ps)));
	}
	for (i = 0; i < c->n_rows && strcmp(c->rows[i].row, row) != 0; i++)
		;
	if (i == c->n_rows && i < sizeof(c->rows) / sizeof(c->rows[0])) {
		pc_strlcpy(c->rows[i].row, row, sizeof(c->rows[i].row));
		c->n_rows++;
	}
	if (i < c->n_rows)
		c->rows[i].n++;
	if (rc == 0)
		return true;
	c->bad++;
	if (c->report)
		c->report(c->arg, row, why);
	return false;
}

struct drv_pkt sc_out(int fam, enum sc_src s, const struct pc_addr *dst, uint8_t proto,
		      uint16_t sport, uint16_t dport)
{
	struct drv_pkt p;

	memset(&p, 0, sizeof(p));
	p.s.dir = SPEC_OUT;
	sc_src(fam, s, &p.s.src, &p.stamp);
	p.s.dst = *dst;
	p.s.proto = proto;
	p.s.sport = sport;
	p.s.dport = dport;
	return p;
}

struct drv_pkt sc_in(const struct pc_addr *src, uint16_t sport, const struct pc_addr *dst,
		     uint16_t dport, uint8_t proto)
{
	struct drv_pkt p;

	memset(&p, 0, sizeof(p));
	p.s.dir = SPEC_IN;
	p.s.src = *src;
	p.s.dst = *dst;
	p.s.proto = proto;
	p.s.sport = sport;
	p.s.dport = dport;
	return p;
}

void sc_tcp(struct drv_pkt *p, uint8_t flags, uint32_t seq, uint32_t ack)
{
	p->s.tcp_flags = flags;
	p->s.seq = seq;
	p->s.ack = ack;
}

void sc_payload(struct drv_pkt *p, enum spec_payload pl, const uint8_t *data, size_t len)
{
	p->s.pl = pl;
	p->s.data = data;
	p->s.len = len;
}

void sc_stream(struct drv_pkt *p, enum spec_stream st, const char *sni, const uint8_t *data,
	       size_t len)
{
	sc_payload(p, SPEC_PL_STREAM, data, len);
	p->s.stream = st;
	if (sni)
		pc_strlcpy(p->s.stream_sni, sni, sizeof(p->s.stream_sni));
}

void sc_query(struct drv_pkt *p, uint8_t *buf, uint16_t id, const char *name, uint16_t qtype,
	      bool tcp)
{
	size_t n = drv_dns_query(buf, id, name, qtype);

	if (tcp)
		n = drv_tcp_frame(buf, n);
	sc_payload(p, SPEC_PL_DNS_QUERY, buf, n);
	p->s.dns_id = id;
	p->s.qtype = qtype;
	pc_strlcpy(p->s.qname, name, sizeof(p->s.qname));
}

void sc_answer(struct drv_pkt *p, uint8_t *buf, uint16_t id, const char *name, uint16_t qtype,
	       const struct pc_addr *addrs, size_t n, bool tcp)
{
	size_t l = drv_dns_answer(buf, id, name, qtype, addrs, n);

	if (tcp)
		l = drv_tcp_frame(buf, l);
	sc_payload(p, SPEC_PL_DNS_ANSWER, buf, l);
	p->s.dns_id = id;
	p->s.qtype = qtype;
	pc_strlcpy(p->s.qname, name, sizeof(p->s.qname));
	for (size_t i = 0; i < n && i < SPEC_ANSWER_MAX; i++)
		p->s.answer[i] = addrs[i];
	p->s.n_answer = n < SPEC_ANSWER_MAX ? n : SPEC_ANSWER_MAX;
	p->s.answer_ttl = 300; /* drv_dns_answer's */
}

/* ---- the prelude: what each sandbox resolves ---------------------------------- */

struct name_plan {
	enum sc_src who;
	const char *name;
	const char *v4[2], *v6[2];
};

static const struct name_plan plan[] = {
    {SC_SB1, "api.allowed.test", {"151.101.1.10"}, {"2a04:4e42::10"}},
    {SC_SB1, "x.wild.test", {"151.101.2.20"}, {"2a04:4e42::20"}},
    {SC_SB1, "dns.udp.test", {"151.101.3.30"}, {"2a04:4e42::30"}},
    {SC_SB1, "vault.test", {"151.101.4.40"}, {"2a04:4e42::40"}},
    /* special-purpose answers: never learned (S40), but near.test's is
     * inside a cidr entry of agent-1 */
    {SC_SB1, "meta.test", {"169.254.169.254"}, {"::ffff:169.254.169.254", "fd00:ec2::254"}},
    {SC_SB1, "near.test", {"100.64.7.7"}, {"fd00:64:7::7"}},
    {SC_SB1, "loop.test", {"127.0.0.1", "224.0.0.1"}, {"::1", "fe80::1"}},
    {SC_SB1, "gw.test", {"10.203.0.1"}, {"fd00:203::1"}},
    {SC_SB1, "twin.test", {"10.203.0.12"}, {"fd00:203::12"}},
    {SC_SB2, "api.allowed.test", {"151.101.1.10"}, {"2a04:4e42::10"}},
    {SC_SB2, "other2.test", {"151.101.5.50"}, {"2a04:4e42::50"}},
};

void sc_prelude(struct sc *c, int fam)
{
	uint16_t qtype = fam == 6 ? 28 : 1;
	struct pc_addr res;

	sc_dst(fam, SC_RESOLVER, &res);
	for (size_t i = 0; i < sizeof(plan) / sizeof(plan[0]); i++) {
		static uint8_t q[512], a[512];
		const char *const *as = fam == 6 ? plan[i].v6 : plan[i].v4;
		struct pc_addr addrs[2];
		size_t n = 0;
		uint16_t id = c->next_id++, port = c->next_port++;
		struct drv_pkt p = sc_out(fam, plan[i].who, &res, IPPROTO_UDP, port, 53);

		sc_query(&p, q, id, plan[i].name, qtype, false);
		sc_step(c, &p);
		while (n < 2 && as[n]) {
			addr(as[n], &addrs[n]);
			n++;
		}
		p = sc_in(&res, 53, &p.s.src, port, IPPROTO_UDP);
		sc_answer(&p, a, id, plan[i].name, qtype, addrs, n, false);
		sc_step(c, &p);
	}
}
