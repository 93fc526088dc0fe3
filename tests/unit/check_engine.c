/* The engine's decisions without a kernel: crafted packets through
 * decide_packet() with a real policy and a real DNS guard. Default deny,
 * port/MAC identity, the DNS path, held TLS flows and their server name,
 * re-judging on reload, and the flow tables. */
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"
#include "rules/rules_int.h"
#include "tests/unit/agents.h"
#include "tests/unit/gateway.h"
#include "tests/unit/unit.h"
#include "tests/unit/wire.h"

static const char policy_yaml[] = AGENT1_HEAD ALLOW_SSH /* and: */
    "  - cidr: 198.51.100.22/32\n"
    "    ports: [5000]\n"
    "    proto: udp\n"
    "  - host: api.github.test\n"
    "    ports: [443, 80]\n" AGENT2_EMPTY;

static struct config cfg;
static struct policy *pol;
static struct dnsguard *dg;
static struct portmap pm = {.lock = PTHREAD_RWLOCK_INITIALIZER};
static struct held_table *held;
static struct dnstcp_table *dnstcp;
static struct decide_ctx ctx;
static struct decision d;
static uint8_t pkt[4096];
static size_t pkt_len;

static void setup(void)
{
	struct pc_err err = {0};
	struct nft_port *ports = calloc(2, sizeof(*ports));

	config_defaults(&cfg);
	ck_assert_int_eq(pc_addr_parse("198.51.100.53", &cfg.dns.resolvers[0]), 0);
	cfg.dns.n_resolvers = 1;
	/* the upstream hosts here are in the documentation ranges, declared
	 * routable as the lab does (dns.routable) */
	ck_assert_int_eq(pc_prefix_parse("198.51.100.0/24", &cfg.dns.routable[0]), 0);
	ck_assert_int_eq(pc_prefix_parse("203.0.113.0/24", &cfg.dns.routable[1]), 0);
	ck_assert_int_eq(pc_prefix_parse("192.0.2.0/24", &cfg.dns.routable[2]), 0);
	ck_assert_int_eq(pc_prefix_parse("2001:db8::/32", &cfg.dns.routable[3]), 0);
	cfg.dns.n_routable = 4;
	cfg.engine.sni_timeout_ms = 3000;
	pol = gw_policy(policy_yaml, &cfg);
	if (dnsguard_new(&cfg, &dg, &err) < 0)
		ck_abort_msg("dnsguard: %s", err.msg);
	ck_assert_ptr_nonnull(ports);
	pc_strlcpy(ports[0].name, "pcv1", PC_IFNAMSIZ);
	ports[0].ifindex = 4;
	pc_strlcpy(ports[1].name, "pcv2", PC_IFNAMSIZ);
	ports[1].ifindex = 5;
	portmap_set(&pm, ports, 2);
	ck_assert_int_eq(held_table_new(16, &held), 0);
	memset(&d, 0, sizeof(d));
	ck_assert_int_eq(dnstcp_table_new(4, &dnstcp), 0);
	ctx = (struct decide_ctx){&cfg, pol, dg, &pm, held, 1000000, false, dnstcp};
}

static void teardown(void)
{
	decision_clear(&d);
	held_table_free(held);
	dnstcp_table_free(dnstcp);
	portmap_set(&pm, NULL, 0);
	dnsguard_free(dg);
	policy_unref(pol);
}

/* The policy a reload brings in: agent-1 keeps only ssh, by address. */
#define V2_SSH_ONLY                                                                                \
	"sandbox: agent-1\n"                                                                       \
	"match: { source: 10.203.0.11/32, port: pcv1 }\n"                                          \
	"allow:\n" ALLOW_SSH

/* ---- packet builders --------------------------------------------------------- */

static void tcp_pkt(const char *src, uint16_t sp, const char *dst, uint16_t dp, uint8_t flags,
		    uint32_t seq, const void *data, size_t len)
{
	size_t ipl = strchr(src, ':') ? wire_ip6(pkt, IPPROTO_TCP, 20 + len, 64, src, dst)
				      : wire_ip4(pkt, IPPROTO_TCP, 20 + len, src, dst);

	wire_tcp(pkt + ipl, sp, dp, flags, seq, 0);
	if (len)
		memcpy(pkt + ipl + 20, data, len);
	pkt_len = ipl + 20 + len;
}

static void udp_pkt(const char *src, const char *dst, const void *data, size_t len)
{
	struct pc_endpoint s, t;
	int n;

	ck_assert_int_eq(pc_endpoint_parse(src, 0, &s), 0);
	ck_assert_int_eq(pc_endpoint_parse(dst, 0, &t), 0);
	n = pkt_build_udp(&s, &t, data, len, pkt, sizeof(pkt));
	ck_assert_int_gt(n, 0);
	pkt_len = (size_t)n;
}

/* A DNS query of type qtype, or (with addr) its answer holding one A or
 * AAAA record. */
static size_t dns_msg_type(uint8_t *b, uint16_t id, const char *name, const char *addr,
			   uint16_t qtype)
{
	size_t o = wire_dns_question(b, id, addr != NULL, addr ? 1 : 0, name, qtype);
	struct pc_addr a;

	if (addr) {
		ck_assert_int_eq(pc_addr_parse(addr, &a), 0);
		o += wire_dns_addr(b + o, &a);
	}
	return o;
}

/* A query for an A record, or with addr its answer. */
static size_t dns_msg(uint8_t *b, uint16_t id, const char *name, const char *addr)
{
	return dns_msg_type(b, id, name, addr, 1);
}

/* The same for AAAA. */
static size_t dns_msg6(uint8_t *b, uint16_t id, const char *name, const char *addr)
{
	return dns_msg_type(b, id, name, addr, 28);
}

/* Decide the current packet as coming in from port ifindex (prerouting). */
static enum verdict_kind judge_from(uint32_t port, uint8_t hook)
{
	struct pkt_in in = {.id = 1,
			    .mark = port,
			    .hook = hook,
			    .has_mac = true,
			    .mac = {2, 0, 0, 0xcb, 0, 0x0b},
			    .data = pkt,
			    .len = pkt_len};
	decide_packet(&ctx, &in, &d);
	/* as the queue thread does once the record is acknowledged */
	ck_assert_int_eq(decision_commit(dg, &d, ctx.now_ms), 0);
	return d.v;
}

static enum verdict_kind judge(void)
{
	return judge_from(4, NF_INET_PRE_ROUTING);
}

#define SYN 0x02
#define ACK 0x10
#define PSH 0x08
#define RST 0x04
#define FIN 0x01

/* ---- flows ------------------------------------------------------------------- */

START_TEST(cidr_allowed_and_refused)
{
	tcp_pkt("10.203.0.11", 40000, "198.51.100.22", 22, SYN, 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_ALLOW);
	ck_assert(d.has_rec);
	ck_assert_int_eq(d.rec.action, LOGREC_CONNECT);
	ck_assert_int_eq(d.rec.verdict, LOGREC_ALLOWED);
	ck_assert_str_eq(d.rec.rule, "agent-1/allow[0]");
	ck_assert_str_eq(d.rec.sandbox, "agent-1");
	ck_assert_str_eq(d.rec.policy, policy_hash(pol));
	ck_assert(d.register_flow);
	ck_assert_str_eq(d.meta.port, "pcv1");
	ck_assert_int_eq(d.meta.via, FLOW_VIA_CIDR);
	tcp_pkt("10.203.0.11", 40001, "198.51.100.22", 80, SYN, 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_int_eq(d.rec.verdict, LOGREC_REFUSED);
	ck_assert(!d.register_flow);
	tcp_pkt("10.203.0.11", 40002, "203.0.113.99", 443, SYN, 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	udp_pkt("10.203.0.11:5555", "198.51.100.22:5000", "x", 1);
	ck_assert_int_eq(judge(), VK_ALLOW);
	udp_pkt("10.203.0.11:5555", "198.51.100.22:5001", "x", 1);
	ck_assert_int_eq(judge(), VK_REJECT);
}
END_TEST

START_TEST(identity_port_and_source)
{
	tcp_pkt("10.203.0.11", 40000, "198.51.100.22", 22, SYN, 1, NULL, 0);
	ck_assert_int_eq(judge_from(0, NF_INET_PRE_ROUTING), VK_DROP); /* no stamp */
	ck_assert_str_eq(d.rec.reason, "packet from an unknown bridge port");
	ck_assert_int_eq(judge_from(9, NF_INET_PRE_ROUTING), VK_DROP); /* unknown port */
	/* agent-1's address from agent-2's port: agent-1's rule names pcv1 */
	ck_assert_int_eq(judge_from(5, NF_INET_PRE_ROUTING), VK_REJECT);
	ck_assert_ptr_null(d.rec.sandbox);
	tcp_pkt("10.203.0.77", 40000, "198.51.100.22", 22, SYN, 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_ptr_nonnull(strstr(d.rec.reason, "not a sandbox"));
	/* IPv6 source of agent-1 */
	tcp_pkt("fd00:203::11", 40000, "2001:db8:22::22", 22, SYN, 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.sandbox, "agent-1");
}
END_TEST

START_TEST(only_connection_starts)
{
	tcp_pkt("10.203.0.11", 40000, "198.51.100.22", 22, ACK, 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	tcp_pkt("10.203.0.11", 40000, "198.51.100.22", 22, SYN | ACK, 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	tcp_pkt("10.203.0.11", 40000, "10.203.0.12", 22, SYN, 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason, "sandboxes may not reach each other");
	memset(pkt, 0, 28);
	pkt[0] = 0x45;
	pkt[3] = 28;
	pkt[9] = IPPROTO_ICMP;
	inet_pton(AF_INET, "10.203.0.11", pkt + 12);
	inet_pton(AF_INET, "203.0.113.10", pkt + 16);
	pkt[20] = 8;
	pkt_len = 28;
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason, "ICMP is never allowed");
	pkt[6] = 0x20; /* a fragment */
	ck_assert_int_eq(judge(), VK_DROP);
	ck_assert_str_eq(d.rec.reason, "IP fragment");
	pkt[0] = 0x75; /* garbage */
	ck_assert_int_eq(judge(), VK_DROP);
	ck_assert_str_eq(d.rec.reason, "malformed packet");
	ck_assert_int_eq(d.rec.verdict, LOGREC_REFUSED);
}
END_TEST

/* ---- DNS ---------------------------------------------------------------------- */

/* The sandbox's SYN from port to the resolver (its stream begins at
 * seq, docs/spec.md S12a), and its RST (the stream forgotten). */
static void dns_syn(const char *src, uint16_t port, uint32_t seq)
{
	size_t ipl = strchr(src, ':') ? 40 : 20;

	tcp_pkt(src, port, "198.51.100.53", 53, SYN, seq - 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_PASS);
	/* the resolver's SYN-ACK acknowledges it: data may flow */
	tcp_pkt("198.51.100.53", 53, src, port, SYN | ACK, 9000, NULL, 0);
	pkt[ipl + 8] = (uint8_t)(seq >> 24);
	pkt[ipl + 9] = (uint8_t)(seq >> 16);
	pkt[ipl + 10] = (uint8_t)(seq >> 8);
	pkt[ipl + 11] = (uint8_t)seq;
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_PASS);
}

static void dns_rst(const char *src, uint16_t port)
{
	tcp_pkt(src, port, "198.51.100.53", 53, RST, 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_PASS);
}

START_TEST(dns_queries)
{
	uint8_t m[512];
	size_t n = dns_msg(m, 0x1234, "api.github.test", NULL);

	udp_pkt("10.203.0.11:3333", "198.51.100.53:53", m, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert_int_eq(d.rec.action, LOGREC_DNS_QUERY);
	ck_assert_int_eq(d.rec.verdict, LOGREC_ALLOWED);
	ck_assert_str_eq(d.rec.dns_name, "api.github.test");
	n = dns_msg(m, 0x2222, "paste.evil.test", NULL);
	udp_pkt("10.203.0.11:3334", "198.51.100.53:53", m, n);
	ck_assert_int_eq(judge(), VK_DROP);
	ck_assert_int_eq(d.rec.verdict, LOGREC_REFUSED);
	ck_assert(d.send_reply);
	ck_assert_uint_ge(d.reply_len, 12);
	ck_assert_int_eq(d.reply[0], 0x22);	/* same id */
	ck_assert_int_eq(d.reply[3] & 0x0f, 5); /* REFUSED */
	ck_assert_int_eq(d.reply_from.port, 53);
	ck_assert_int_eq(d.reply_to.port, 3334);
	ck_assert_int_eq(d.reply_from.addr.a[3], 53);
	/* a resolver that is not the guard's */
	n = dns_msg(m, 0x3333, "api.github.test", NULL);
	udp_pkt("10.203.0.11:3335", "198.51.100.54:53", m, n);
	ck_assert_int_eq(judge(), VK_DROP);
	ck_assert(d.send_reply);
	ck_assert_int_eq(d.reply_from.addr.a[3], 54);
	/* over TCP: the handshake to the guard's resolver passes, elsewhere not */
	dns_syn("10.203.0.11", 4000, 2);
	tcp_pkt("10.203.0.11", 4000, "198.51.100.54", 53, SYN, 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	{
		uint8_t t[520];

		t[0] = (uint8_t)(n >> 8);
		t[1] = (uint8_t)n;
		memcpy(t + 2, m, n);
		tcp_pkt("10.203.0.11", 4000, "198.51.100.53", 53, ACK | PSH, 2, t, n + 2);
		ck_assert_int_eq(judge(), VK_PASS);
		/* kept from the SYN on: the same message sent again is released
		 * as judged; one at a sequence number inside it is not the
		 * resolver's next message (issue 30): reset */
		tcp_pkt("10.203.0.11", 4000, "198.51.100.53", 53, ACK | PSH, 2, t, n + 2);
		ck_assert_int_eq(judge(), VK_PASS);
		ck_assert(!d.has_rec);
		tcp_pkt("10.203.0.11", 4000, "198.51.100.53", 53, ACK | PSH, 4, t, n + 2);
		ck_assert_int_eq(judge(), VK_REJECT);
		ck_assert_str_eq(d.rec.reason,
				 "DNS over TCP: bytes overlap kept ones and differ from them");
		ck_assert_str_eq(metrics_reason_label(d.rec.reason), "dns_tcp_overlap");
		ck_assert_uint_eq(dnstcp_count(dnstcp), 0);
		/* another ISN on the connection (the resolver ignores that
		 * SYN, no SYN-ACK): its data is not judged, only dropped */
		tcp_pkt("10.203.0.11", 4005, "198.51.100.53", 53, SYN, 1, NULL, 0);
		ck_assert_int_eq(judge(), VK_PASS);
		tcp_pkt("10.203.0.11", 4005, "198.51.100.53", 53, ACK | PSH, 2, t, n + 2);
		ck_assert_int_eq(judge(), VK_DROP);
		ck_assert(!d.has_rec);
		dns_rst("10.203.0.11", 4005);
		/* data the guard saw no SYN for: reset */
		tcp_pkt("10.203.0.11", 4000, "198.51.100.53", 53, ACK | PSH, 2, t, n + 2);
		ck_assert_int_eq(judge(), VK_REJECT);
		ck_assert_str_eq(metrics_reason_label(d.rec.reason), "dns_tcp_no_stream");
		/* past a hole: dropped (sent again); after the FIN: reset */
		dns_syn("10.203.0.11", 4000, 2);
		tcp_pkt("10.203.0.11", 4000, "198.51.100.53", 53, ACK | PSH, 3, t, n + 2);
		ck_assert_int_eq(judge(), VK_DROP);
		tcp_pkt("10.203.0.11", 4000, "198.51.100.53", 53, ACK | FIN, 2, NULL, 0);
		ck_assert_int_eq(judge(), VK_PASS);
		tcp_pkt("10.203.0.11", 4000, "198.51.100.53", 53, ACK | PSH, 2, t, n + 2);
		ck_assert_int_eq(judge(), VK_REJECT);
		ck_assert_str_eq(metrics_reason_label(d.rec.reason), "dns_tcp_overlap");
		ck_assert_uint_eq(dnstcp_count(dnstcp), 0);
		dns_syn("10.203.0.11", 4001, 100);
		/* A message split across segments (on another connection, seq
		 * 100): its first part is held, the last part makes it whole and
		 * is released once it is judged, and the first part sent again
		 * is released as judged; then the stream is forgotten. */
		tcp_pkt("10.203.0.11", 4001, "198.51.100.53", 53, ACK | PSH, 100, t, 2);
		ck_assert_int_eq(judge(), VK_DROP);
		ck_assert_uint_eq(dnstcp_count(dnstcp), 1);
		tcp_pkt("10.203.0.11", 4001, "198.51.100.53", 53, ACK | PSH, 102, t + 2, n);
		ck_assert_int_eq(judge(), VK_PASS);
		ck_assert(d.has_rec);
		ck_assert_int_eq(d.rec.action, LOGREC_DNS_QUERY);
		ck_assert_int_eq(d.rec.verdict, LOGREC_ALLOWED);
		tcp_pkt("10.203.0.11", 4001, "198.51.100.53", 53, ACK | PSH, 100, t, 2);
		ck_assert_int_eq(judge(), VK_PASS);
		ck_assert(!d.has_rec);
		ck_assert_uint_eq(dnstcp_count(dnstcp), 1); /* until the connection ends */
		dns_rst("10.203.0.11", 4001);
		ck_assert_uint_eq(dnstcp_count(dnstcp), 0);
		/* sent again with other bytes than were judged: reset */
		dns_syn("10.203.0.11", 4002, 100);
		tcp_pkt("10.203.0.11", 4002, "198.51.100.53", 53, ACK | PSH, 100, t, 5);
		ck_assert_int_eq(judge(), VK_DROP);
		tcp_pkt("10.203.0.11", 4002, "198.51.100.53", 53, ACK | PSH, 105, t + 5, n - 3);
		ck_assert_int_eq(judge(), VK_PASS);
		t[3] ^= 1;
		tcp_pkt("10.203.0.11", 4002, "198.51.100.53", 53, ACK | PSH, 100, t, 5);
		ck_assert_int_eq(judge(), VK_REJECT);
		ck_assert_str_eq(d.rec.reason,
				 "DNS over TCP: bytes overlap kept ones and differ from them");
		ck_assert_uint_eq(dnstcp_count(dnstcp), 0);
		t[3] ^= 1;
		/* a refused query made whole: reset, nothing of it passed */
		n = dns_msg(m, 0x3334, "paste.evil.test", NULL);
		t[0] = (uint8_t)(n >> 8);
		t[1] = (uint8_t)n;
		memcpy(t + 2, m, n);
		dns_syn("10.203.0.11", 4003, 7);
		tcp_pkt("10.203.0.11", 4003, "198.51.100.53", 53, ACK | PSH, 7, t, 10);
		ck_assert_int_eq(judge(), VK_DROP);
		tcp_pkt("10.203.0.11", 4003, "198.51.100.53", 53, ACK | PSH, 17, t + 10, n - 8);
		ck_assert_int_eq(judge(), VK_REJECT);
		ck_assert_str_eq(d.rec.reason, "name not on the allow list");
		ck_assert_uint_eq(dnstcp_count(dnstcp), 0);
		/* a zero length: reset */
		t[0] = t[1] = 0;
		dns_syn("10.203.0.11", 4004, 7);
		tcp_pkt("10.203.0.11", 4004, "198.51.100.53", 53, ACK | PSH, 7, t, 1);
		ck_assert_int_eq(judge(), VK_DROP);
		tcp_pkt("10.203.0.11", 4004, "198.51.100.53", 53, ACK | PSH, 8, t + 1, 3);
		ck_assert_int_eq(judge(), VK_REJECT);
		/* the table is bounded and shared: of its 4 streams each of the
		 * two sandboxes is sure of 2, and may use more while there is
		 * room; agent-1 takes all 4, its fifth is refused over its
		 * quota (and counted as such), agent-2 still gets its own two:
		 * the places of agent-1's oldest, whose next segments then find
		 * no stream */
		for (uint16_t i = 0; i < 4; i++) {
			dns_syn("10.203.0.11", (uint16_t)(4010 + i), 7);
			tcp_pkt("10.203.0.11", (uint16_t)(4010 + i), "198.51.100.53", 53, ACK | PSH,
				7, t, 1);
			ck_assert_int_eq(judge(), VK_DROP);
			ck_assert_int_eq(d.quota, QUOTA_NONE);
		}
		tcp_pkt("10.203.0.11", 4020, "198.51.100.53", 53, SYN, 6, NULL, 0);
		ck_assert_int_eq(judge(), VK_REJECT);
		ck_assert_str_eq(d.rec.reason,
				 "DNS over TCP: the sandbox's quota of streams being put together "
				 "is used up (engine quota)");
		ck_assert_str_eq(d.rec.sandbox, "agent-1");
		ck_assert_int_eq(d.quota, QUOTA_DNSTCP);
		ck_assert_str_eq(metrics_reason_label(d.rec.reason), "dns_tcp_quota");
		for (uint16_t i = 0; i < 2; i++) {
			tcp_pkt("10.203.0.12", (uint16_t)(4010 + i), "198.51.100.53", 53, SYN, 6,
				NULL, 0);
			ck_assert_int_eq(judge(), VK_PASS);
			ck_assert_str_eq(d.given_up, "agent-1");
			ck_assert_int_eq(d.given_up_kind, QUOTA_DNSTCP_GIVEN_UP);
			dns_syn("10.203.0.12", (uint16_t)(4010 + i), 7);
			tcp_pkt("10.203.0.12", (uint16_t)(4010 + i), "198.51.100.53", 53, ACK | PSH,
				7, t, 1);
			ck_assert_int_eq(judge(), VK_DROP);
		}
		ck_assert_uint_eq(dnstcp_used(dnstcp, "agent-1"), 2);
		ck_assert_uint_eq(dnstcp_used(dnstcp, "agent-2"), 2);
		/* its stream went to agent-2 */
		tcp_pkt("10.203.0.11", 4010, "198.51.100.53", 53, ACK | PSH, 8, t + 1, 3);
		ck_assert_int_eq(judge(), VK_REJECT);
		ck_assert_ptr_nonnull(strstr(d.rec.reason, "no stream"));
		/* this one is still there: its query is whole, and judged */
		tcp_pkt("10.203.0.11", 4012, "198.51.100.53", 53, ACK | PSH, 8, t + 1, 3);
		ck_assert_int_eq(judge(), VK_REJECT);
		ck_assert_ptr_null(strstr(d.rec.reason, "no stream"));
		/* idle streams are forgotten, and their quota comes back */
		ctx.now_ms += DNSTCP_IDLE_MS + 1;
		dns_syn("10.203.0.11", 4020, 7);
		tcp_pkt("10.203.0.11", 4020, "198.51.100.53", 53, ACK | PSH, 7, t, 1);
		ck_assert_int_eq(judge(), VK_DROP);
		ck_assert_uint_eq(dnstcp_count(dnstcp), 1);
		ck_assert_uint_eq(dnstcp_used(dnstcp, "agent-1"), 1);
		ck_assert_uint_eq(dnstcp_used(dnstcp, "agent-2"), 0);
	}
}
END_TEST

/* A TCP segment with optlen bytes of TCP options (NOPs: a covert payload
 * needs no valid option) and, for IPv6 with dstopts > 0, a destination
 * options header of that many bytes (a multiple of 8, PadN filled) before
 * the TCP header. */
static void tcp_pkt_opts(const char *src, uint16_t sp, const char *dst, uint16_t dp, uint8_t flags,
			 size_t optlen, size_t dstopts, const void *data, size_t len)
{
	bool v6 = strchr(src, ':') != NULL;
	size_t ipl = v6 ? 40 : 20, th = 20 + optlen;
	uint8_t *t;

	ck_assert_uint_eq(optlen % 4, 0);
	ck_assert(optlen <= 40);
	ck_assert(v6 || dstopts == 0);
	ck_assert_uint_eq(dstopts % 8, 0);
	ck_assert(ipl + dstopts + th + len <= sizeof(pkt));
	memset(pkt, 0, ipl + dstopts + th);
	if (v6) {
		wire_ip6(pkt, dstopts ? IPPROTO_DSTOPTS : IPPROTO_TCP, dstopts + th + len, 64, src,
			 dst);
		if (dstopts) {
			uint8_t *o = pkt + 40;
			size_t left = dstopts - 2;

			o[0] = IPPROTO_TCP;
			o[1] = (uint8_t)(dstopts / 8 - 1);
			for (size_t at = 2; left > 0;) {
				size_t n = left - 2 > 255 ? 255 : left - 2;

				if (left - n - 2 == 1)
					n--; /* never leave a single byte: Pad1 would do, keep it
						simple */
				o[at] = 1;   /* PadN */
				o[at + 1] = (uint8_t)n;
				memset(o + at + 2, 'X', n);
				at += n + 2;
				left -= n + 2;
			}
		}
	} else {
		wire_ip4(pkt, IPPROTO_TCP, th + len, src, dst);
	}
	t = pkt + ipl + dstopts;
	wire_tcp(t, sp, dp, flags, 7, 0);
	t[12] = (uint8_t)((th / 4) << 4); /* the options' length too */
	memset(t + 20, 1 /* NOP */, optlen);
	if (len)
		memcpy(t + th, data, len);
	pkt_len = ipl + dstopts + th + len;
}

/* Port 53 passes only from a known sandbox to the guard's resolver, for
 * every flag set, with or without payload; everything else is refused with
 * a record, and no DNS-over-TCP stream is kept for it (issue 16, hole 1). */
START_TEST(dns_port53_only_sandbox_to_resolver)
{
	static const uint8_t flags[] = {
	    ACK, FIN | ACK, RST,  SYN | ACK, PSH | ACK,	      RST | ACK, SYN,
	    FIN, 0,	    0xff, PSH,	     FIN | PSH | ACK, SYN | FIN};
	uint8_t t[520], m[512];
	size_t n = dns_msg(m, 0x3535, "api.github.test", NULL);

	t[0] = (uint8_t)(n >> 8);
	t[1] = (uint8_t)n;
	memcpy(t + 2, m, n);
	for (size_t i = 0; i < sizeof(flags); i++) {
		const char *v4r = "not a sandbox (no rule matches its source, MAC and port)";
		const char *other = "DNS over TCP to a resolver that is not the guard's";

		/* to an address that is not a resolver: no payload, 36 bytes
		 * of options, then a partial and a whole message */
		for (int pl = 0; pl < 3; pl++) {
			size_t len = pl == 0 ? 0 : pl == 1 ? 3 : n + 2;

			tcp_pkt_opts("10.203.0.11", 4100, "198.51.100.5", 53, flags[i], 36, 0, t,
				     len);
			ck_assert_int_eq(judge(), VK_REJECT);
			ck_assert(d.has_rec);
			ck_assert_int_eq(d.rec.action, LOGREC_CONNECT);
			ck_assert_int_eq(d.rec.verdict, LOGREC_REFUSED);
			ck_assert_str_eq(d.rec.reason, other);
			ck_assert_str_eq(d.rec.sandbox, "agent-1");
			ck_assert_int_eq(d.rec.dst.port, 53);
			ck_assert_uint_eq(dnstcp_count(dnstcp), 0);
			/* IPv6, about 1 KiB in destination options */
			tcp_pkt_opts("fd00:203::11", 4100, "2001:db8:5::5", 53, flags[i], 36, 1024,
				     t, len);
			ck_assert_int_eq(judge(), VK_REJECT);
			ck_assert(d.has_rec);
			ck_assert_str_eq(d.rec.reason, other);
			ck_assert_uint_eq(dnstcp_count(dnstcp), 0);
			/* to the resolver from no sandbox: a source no rule has,
			 * and agent-1's address from another port */
			tcp_pkt_opts("10.203.0.77", 4100, "198.51.100.53", 53, flags[i], 36, 0, t,
				     len);
			ck_assert_int_eq(judge(), VK_REJECT);
			ck_assert(d.has_rec);
			ck_assert_int_eq(d.rec.verdict, LOGREC_REFUSED);
			ck_assert_str_eq(d.rec.reason, v4r);
			ck_assert_ptr_null(d.rec.sandbox);
			tcp_pkt_opts("10.203.0.11", 4100, "198.51.100.53", 53, flags[i], 36, 0, t,
				     len);
			ck_assert_int_eq(judge_from(5, NF_INET_PRE_ROUTING), VK_REJECT);
			ck_assert_str_eq(d.rec.reason, v4r);
			ck_assert_uint_eq(dnstcp_count(dnstcp), 0);
		}
		/* from the sandbox to its resolver, no payload: passes (a SYN
		 * included: the queries on the connection are judged) */
		tcp_pkt_opts("10.203.0.11", 4100, "198.51.100.53", 53, flags[i], 36, 0, NULL, 0);
		if (flags[i] & 0x20) {
			/* URG: the resolver's framing could part from the
			 * guard's (docs/spec.md S7a), whatever else it holds */
			ck_assert_int_eq(judge(), VK_REJECT);
			ck_assert(d.has_rec);
			ck_assert_int_eq(d.rec.action, LOGREC_DNS_QUERY);
			ck_assert_ptr_nonnull(strstr(d.rec.reason, "TCP urgent data"));
			continue;
		}
		ck_assert_int_eq(judge(), VK_PASS);
		ck_assert(!d.has_rec);
		/* a SYN began a stream: forgotten at the RST */
		tcp_pkt_opts("10.203.0.11", 4100, "198.51.100.53", 53, RST, 0, 0, NULL, 0);
		ck_assert_int_eq(judge(), VK_PASS);
		/* a SYN with data: the data would reach the resolver unjudged */
		if (flags[i] & SYN) {
			tcp_pkt_opts("10.203.0.11", 4100, "198.51.100.53", 53, flags[i], 36, 0, t,
				     n + 2);
			ck_assert_int_eq(judge(), VK_REJECT);
			ck_assert_str_eq(d.rec.reason,
					 "data in a SYN (TCP Fast Open) to a resolver");
		}
	}
	/* a whole allowed query to the resolver still passes, with options */
	dns_syn("10.203.0.11", 4101, 7); /* tcp_pkt_opts sends seq 7 */
	tcp_pkt_opts("10.203.0.11", 4101, "198.51.100.53", 53, PSH | ACK, 36, 0, t, n + 2);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert_int_eq(d.rec.verdict, LOGREC_ALLOWED);
	tcp_pkt_opts("fd00:203::11", 4101, "198.51.100.53", 53, PSH | ACK, 0, 1024, t, n + 2);
	ck_assert_int_eq(judge(), VK_REJECT); /* an IPv6 source to an IPv4 resolver: not one */
	/* UDP: never to another address, never from no sandbox, whatever it holds */
	{
		static const size_t lens[] = {0, 1, 11, 12};

		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			udp_pkt("10.203.0.11:3535", "198.51.100.5:53", m, lens[i]);
			ck_assert_int_eq(judge(), VK_DROP);
			ck_assert(d.has_rec);
			ck_assert_int_eq(d.rec.verdict, LOGREC_REFUSED);
			udp_pkt("10.203.0.77:3535", "198.51.100.53:53", m, lens[i]);
			ck_assert_int_eq(judge(), VK_DROP);
			ck_assert(d.has_rec);
		}
		udp_pkt("10.203.0.11:3535", "198.51.100.5:53", m, n);
		ck_assert_int_eq(judge(), VK_DROP);
		ck_assert_str_eq(d.rec.reason, "not to a configured resolver");
		udp_pkt("10.203.0.77:3535", "198.51.100.53:53", m, n);
		ck_assert_int_eq(judge(), VK_DROP);
		ck_assert_str_eq(d.rec.reason, "sender is not a sandbox");
		udp_pkt("[fd00:203::11]:3535", "[2001:db8:5::5]:53", m, n);
		ck_assert_int_eq(judge(), VK_DROP);
		ck_assert_str_eq(d.rec.reason, "not to a configured resolver");
	}
}
END_TEST

/* No record, no connection (docs/spec.md A9): a stream whose judged
 * message was refused after all (its record not acknowledged; the queue
 * thread's refuse_unlogged fails it) releases nothing more as judged
 * before, either way: the query sent again is reset, the answer sent
 * again dropped, neither recorded. */
START_TEST(dnstcp_failed_stream)
{
	uint8_t m[512], t[520], a[520];
	size_t n = dns_msg(m, 0x5151, "api.github.test", NULL), k;
	uint32_t base = 9001;

	t[0] = (uint8_t)(n >> 8);
	t[1] = (uint8_t)n;
	memcpy(t + 2, m, n);
	dns_syn("10.203.0.11", 4200, 2);
	tcp_pkt("10.203.0.11", 4200, "198.51.100.53", 53, ACK | PSH, 2, t, n + 2);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(d.has_rec && d.dnstcp_judged);
	tcp_pkt("10.203.0.11", 4200, "198.51.100.53", 53, ACK | PSH, 2, t, n + 2);
	ck_assert_int_eq(judge(), VK_PASS); /* released as judged before */
	ck_assert(!d.has_rec);
	/* the answer in two segments: the first held, the second judged */
	k = dns_msg(m, 0x5151, "api.github.test", "192.0.2.80");
	a[0] = (uint8_t)(k >> 8);
	a[1] = (uint8_t)k;
	memcpy(a + 2, m, k);
	tcp_pkt("198.51.100.53", 53, "10.203.0.11", 4200, ACK | PSH, base, a, 5);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_DROP);
	tcp_pkt("198.51.100.53", 53, "10.203.0.11", 4200, ACK | PSH, base + 5, a + 5, k - 3);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_PASS);
	ck_assert(d.has_rec && d.dnstcp_judged);
	/* its record not acknowledged: the answer's stream fails */
	dnstcp_fail(dnstcp, &d.dnstcp_key, ctx.now_ms);
	tcp_pkt("198.51.100.53", 53, "10.203.0.11", 4200, ACK | PSH, base, a, 5);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_DROP);
	ck_assert(!d.has_rec);
	/* the connection reset both ways: its streams (the sandbox's share) freed */
	tcp_pkt("198.51.100.53", 53, "10.203.0.11", 4200, RST, base, NULL, 0);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_PASS);
	dns_rst("10.203.0.11", 4200);
	ck_assert_uint_eq(dnstcp_count(dnstcp), 0);
	/* the query's record not acknowledged: the query's stream fails */
	n = dns_msg(m, 0x5252, "api.github.test", NULL);
	t[0] = (uint8_t)(n >> 8);
	t[1] = (uint8_t)n;
	memcpy(t + 2, m, n);
	dns_syn("10.203.0.11", 4201, 2);
	tcp_pkt("10.203.0.11", 4201, "198.51.100.53", 53, ACK | PSH, 2, t, n + 2);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(d.has_rec && d.dnstcp_judged);
	dnstcp_fail(dnstcp, &d.dnstcp_key, ctx.now_ms);
	tcp_pkt("10.203.0.11", 4201, "198.51.100.53", 53, ACK | PSH, 2, t, n + 2);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert(!d.has_rec);
	/* forgotten at the connection's end; a new one is judged afresh */
	dns_rst("10.203.0.11", 4201);
	dns_syn("10.203.0.11", 4201, 2);
	tcp_pkt("10.203.0.11", 4201, "198.51.100.53", 53, ACK | PSH, 2, t, n + 2);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(d.has_rec);
}
END_TEST

/* The resolver's direction of a DNS-over-TCP connection is kept from its
 * SYN-ACK, but not its whole history: answers the sandbox acknowledged (and
 * the guard judged and released) are let go, so a connection may carry
 * more than DNSTCP_BUF_MAX bytes of answers. Without the acknowledgements
 * the same exchange would fill the stream and be refused. */
START_TEST(dnstcp_answers_let_go_once_acknowledged)
{
	uint8_t m[512], t[520];
	uint32_t qseq = 2, aseq = 9001;
	size_t total = 0, n;
	uint16_t id = 0x1000;

	dns_syn("10.203.0.11", 4300, 2);
	while (total <= DNSTCP_BUF_MAX + 1000) {
		n = dns_msg(m, id, "api.github.test", NULL);
		t[0] = (uint8_t)(n >> 8);
		t[1] = (uint8_t)n;
		memcpy(t + 2, m, n);
		tcp_pkt("10.203.0.11", 4300, "198.51.100.53", 53, ACK | PSH, qseq, t, n + 2);
		ck_assert_int_eq(judge(), VK_PASS);
		qseq += (uint32_t)n + 2;
		n = dns_msg(m, id, "api.github.test", "192.0.2.80");
		t[0] = (uint8_t)(n >> 8);
		t[1] = (uint8_t)n;
		memcpy(t + 2, m, n);
		tcp_pkt("198.51.100.53", 53, "10.203.0.11", 4300, ACK | PSH, aseq, t, n + 2);
		ck_assert_msg(judge_from(0, NF_INET_FORWARD) == VK_PASS, "answer at %zu refused",
			      total);
		aseq += (uint32_t)n + 2;
		total += n + 2;
		/* the sandbox acknowledges it */
		tcp_pkt("10.203.0.11", 4300, "198.51.100.53", 53, ACK, qseq, NULL, 0);
		pkt[28] = (uint8_t)(aseq >> 24);
		pkt[29] = (uint8_t)(aseq >> 16);
		pkt[30] = (uint8_t)(aseq >> 8);
		pkt[31] = (uint8_t)aseq;
		ck_assert_int_eq(judge(), VK_PASS);
		id++;
	}
	ck_assert_uint_gt(total, DNSTCP_BUF_MAX);
	/* answers acknowledged are let go: one sent again is dropped, and
	 * the next is still judged where the sandbox reads it */
	tcp_pkt("198.51.100.53", 53, "10.203.0.11", 4300, ACK | PSH, 9001, t, n + 2);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_DROP);
	dns_rst("10.203.0.11", 4300);
	ck_assert_uint_eq(dnstcp_count(dnstcp), 0);
}
END_TEST

/* Toward a sandbox, only a resolver's port-53 replies are ever released. */
START_TEST(dns_answer_only_from_resolver)
{
	/* a segment without payload from a resolver's port 53: released */
	tcp_pkt("198.51.100.53", 53, "10.203.0.11", 4100, ACK, 9, NULL, 0);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_PASS);
	/* from another address, or another port of the resolver: dropped, recorded */
	tcp_pkt("198.51.100.5", 53, "10.203.0.11", 4100, ACK, 9, NULL, 0);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_DROP);
	ck_assert(d.has_rec);
	ck_assert_int_eq(d.rec.action, LOGREC_DNS_LEARN);
	ck_assert_str_eq(d.rec.reason, "not from a configured resolver");
	tcp_pkt("198.51.100.53", 5353, "10.203.0.11", 4100, ACK, 9, NULL, 0);
	ck_assert_int_eq(judge_from(0, NF_INET_LOCAL_OUT), VK_DROP);
	ck_assert_str_eq(d.rec.reason, "not from a configured resolver");
	tcp_pkt_opts("198.51.100.5", 53, "10.203.0.11", 4100, PSH | ACK, 36, 0, "\x00\x01x", 3);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_DROP);
	ck_assert_uint_eq(dnstcp_count(dnstcp), 0);
}
END_TEST

/* Resolve name for agent-1 through the guard (query, then answer). */
static void resolve(const char *name, const char *addr, uint16_t id, const char *sport)
{
	uint8_t m[512];
	char src[64], dst[64];
	size_t n = dns_msg(m, id, name, NULL);

	snprintf(src, sizeof(src), "10.203.0.11:%s", sport);
	udp_pkt(src, "198.51.100.53:53", m, n);
	ck_assert_int_eq(judge(), VK_PASS);
	n = dns_msg(m, id, name, addr);
	snprintf(dst, sizeof(dst), "10.203.0.11:%s", sport);
	udp_pkt("198.51.100.53:53", dst, m, n);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_PASS);
}

START_TEST(dns_answers)
{
	uint8_t m[512];
	size_t n;

	resolve("api.github.test", "203.0.113.10", 0x4444, "6000");
	ck_assert(d.has_rec);
	ck_assert_int_eq(d.rec.action, LOGREC_DNS_LEARN);
	ck_assert_str_eq(d.rec.dns_answers, "203.0.113.10");
	ck_assert_str_eq(d.rec.sandbox, "agent-1");
	/* unsolicited: no query is waiting for it */
	n = dns_msg(m, 0x5555, "api.github.test", "203.0.113.12");
	udp_pkt("198.51.100.53:53", "10.203.0.11:6001", m, n);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_DROP);
	ck_assert_int_eq(d.rec.verdict, LOGREC_REFUSED);
	/* to an address no sandbox has */
	udp_pkt("198.51.100.53:53", "10.203.0.99:6001", m, n);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_DROP);
}
END_TEST

/* One record per query: with the thread's log healthy (dns_defer), an
 * allowed query's verdict record is written with its answer, carrying the
 * addresses; nothing is learned before that record is acknowledged; a
 * query that gets no answer is owed its record. */
START_TEST(dns_one_record_per_query)
{
	uint8_t m[512];
	struct dnsguard_owed owed[4];
	struct pkt_in in = {.id = 1, .hook = NF_INET_FORWARD, .data = pkt};
	uint8_t pw[LOGWIRE_MAX], ow[LOGWIRE_MAX];
	struct logrec r;
	uint64_t pledge;
	size_t n;
	int np, no;

	ctx.dns_defer = true;
	n = dns_msg(m, 0x7777, "api.github.test", NULL);
	udp_pkt("10.203.0.11:6100", "198.51.100.53:53", m, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(!d.has_rec); /* deferred to the answer */
	ck_assert(d.pledged);  /* ... and pledged before it leaves */
	ck_assert_uint_ne(d.rec.pledge, 0);
	pledge = d.rec.pledge;
	n = dns_msg(m, 0x7777, "api.github.test", "203.0.113.10");
	udp_pkt("198.51.100.53:53", "10.203.0.11:6100", m, n);
	in.len = pkt_len;
	decide_packet(&ctx, &in, &d); /* judged, record not yet acknowledged */
	ck_assert_int_eq(d.v, VK_PASS);
	ck_assert(d.has_rec);
	ck_assert_int_eq(d.rec.action, LOGREC_DNS_QUERY);
	ck_assert_int_eq(d.rec.verdict, LOGREC_ALLOWED);
	ck_assert_str_eq(d.rec.reason, "name allowed");
	ck_assert_str_eq(d.rec.dns_name, "api.github.test");
	ck_assert_str_eq(d.rec.dns_answers, "203.0.113.10");
	ck_assert_str_eq(d.rec.sandbox, "agent-1");
	ck_assert_str_eq(d.rec.rule, "agent-1/allow[2]");
	ck_assert_ptr_nonnull(d.rec.policy);
	ck_assert_int_eq(d.rec.src.port, 6100); /* the query's direction */
	ck_assert_int_eq(d.rec.dst.port, 53);
	ck_assert_uint_eq(d.rec.redeems, pledge); /* it takes the pledge's place */
	ck_assert(!d.pledged);
	{
		struct pc_addr a;
		struct dnsguard_flow_res fr;

		ck_assert_int_eq(pc_addr_parse("203.0.113.10", &a), 0);
		memset(&fr, 0, sizeof(fr));
		dnsguard_flow(dg, policy_sandbox_by_name(pol, "agent-1"), &a, IPPROTO_TCP, 443,
			      false, ctx.now_ms, &fr);
		ck_assert(!fr.allowed); /* not before its record is in */
		ck_assert_int_eq(decision_commit(dg, &d, ctx.now_ms), 0);
		dnsguard_flow(dg, policy_sandbox_by_name(pol, "agent-1"), &a, IPPROTO_TCP, 443,
			      false, ctx.now_ms, &fr);
		ck_assert(fr.allowed);
	}
	/* a retransmission while outstanding is logged at once */
	n = dns_msg(m, 0x7778, "api.github.test", NULL);
	udp_pkt("10.203.0.11:6101", "198.51.100.53:53", m, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(!d.has_rec);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(d.has_rec);
	ck_assert_int_eq(d.rec.action, LOGREC_DNS_QUERY);
	/* the unanswered one is owed after 10 s */
	ck_assert_uint_eq(dnsguard_owed_take(dg, ctx.now_ms + 1000, false, owed, 4), 0);
	ck_assert_uint_eq(dnsguard_owed_take(dg, ctx.now_ms + 10001, false, owed, 4), 1);
	ck_assert_str_eq(owed[0].qname, "api.github.test");
	ck_assert_str_eq(owed[0].sandbox, "agent-1");
	ck_assert_str_eq(owed[0].why, "no answer within 10 s");
	ck_assert_int_eq(owed[0].client.port, 6101);
	/* with all, outstanding deferred queries too (the engine stops) */
	n = dns_msg(m, 0x7779, "api.github.test", NULL);
	udp_pkt("10.203.0.11:6102", "198.51.100.53:53", m, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(!d.has_rec);
	ck_assert(d.pledged);
	ck_assert_uint_ne(d.rec.pledge, pledge); /* one id per query */
	pledge = d.rec.pledge;
	d.rec.pledge = 0;
	np = logrec_encode(&d.rec, pw, sizeof(pw), NULL);
	ck_assert_int_gt(np, 0);
	ck_assert_uint_eq(dnsguard_owed_take(dg, ctx.now_ms, true, owed, 4), 1);
	ck_assert_str_eq(owed[0].why, "engine stopping");
	/* the pledge is the very record the owed one is, but for its message
	 * (logd's, when it writes a pledge) */
	decision_owed_rec(&owed[0], &r);
	ck_assert_uint_eq(r.redeems, pledge);
	r.redeems = 0;
	no = logrec_encode(&r, ow, sizeof(ow), NULL);
	ck_assert_int_eq(np, no);
	ck_assert_mem_eq(pw, ow, (size_t)np);
	/* the log unhealthy: no deferral */
	ctx.dns_defer = false;
	n = dns_msg(m, 0x777a, "api.github.test", NULL);
	udp_pkt("10.203.0.11:6103", "198.51.100.53:53", m, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(d.has_rec);
}
END_TEST

/* ---- held TLS flows ---------------------------------------------------------- */

/* A reply from the server (forward hook) with its acknowledgement number. */
static enum verdict_kind reply(const char *srv, uint16_t sp, const char *cli, uint16_t cp,
			       uint8_t flags, uint32_t seq, uint32_t ack, const void *data,
			       size_t len)
{
	size_t ipl = strchr(srv, ':') ? 40 : 20;

	tcp_pkt(srv, sp, cli, cp, flags, seq, data, len);
	pkt[ipl + 8] = (uint8_t)(ack >> 24);
	pkt[ipl + 9] = (uint8_t)(ack >> 16);
	pkt[ipl + 10] = (uint8_t)(ack >> 8);
	pkt[ipl + 11] = (uint8_t)ack;
	return judge_from(0, NF_INET_FORWARD);
}

/* SYN (held), the server's SYN-ACK (seq 7000), the handshake's ACK. */
static void handshake(const char *cli, uint16_t cp, const char *srv, uint16_t sp, uint32_t isn)
{
	tcp_pkt(cli, cp, srv, sp, SYN, isn, NULL, 0);
	ck_assert_int_eq(judge(), VK_HELD);
	ck_assert(!d.has_rec); /* recorded when the flow is decided */
	ck_assert_int_eq(reply(srv, sp, cli, cp, SYN | ACK, 7000, isn + 1, NULL, 0), VK_PASS);
	ck_assert(!d.has_rec);
	tcp_pkt(cli, cp, srv, sp, ACK, isn + 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_PASS);
}

START_TEST(held_flow_sni)
{
	uint8_t ch[512];
	size_t n;

	tcp_pkt("10.203.0.11", 41000, "203.0.113.10", 443, SYN, 100, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT); /* never resolved: not allowed */
	resolve("api.github.test", "203.0.113.10", 0x6666, "6002");
	handshake("10.203.0.11", 41000, "203.0.113.10", 443, 100);
	ck_assert_uint_eq(held_count(held), 1);
	tcp_pkt("10.203.0.11", 41000, "203.0.113.10", 443, SYN, 100, NULL, 0);
	ck_assert_int_eq(judge(), VK_PASS); /* a retransmitted SYN */
	n = wire_client_hello(ch, "api.github.test");
	tcp_pkt("10.203.0.11", 41000, "203.0.113.10", 443, ACK | PSH, 101, ch, n);
	/* allowed: recorded before its bytes go on (no record, no bytes to
	 * the server), in the flow's own direction; promoted when the server
	 * has them */
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(d.has_rec && d.held_judged);
	/* judged as TLS: the verdict marks the conntrack (NFT_MARK_TLS) so
	 * that the server's bare ACKs pass without the queue (H13a: never
	 * promoted on one) */
	ck_assert(d.held_tls);
	ck_assert_int_eq(d.rec.verdict, LOGREC_ALLOWED);
	ck_assert_str_eq(d.rec.sni, "api.github.test");
	ck_assert_str_eq(d.rec.domain, "api.github.test");
	ck_assert_uint_eq(d.rec.src.port, 41000);
	ck_assert_uint_eq(d.rec.dst.port, 443);
	ck_assert(!d.register_flow);
	ck_assert_uint_eq(held_count(held), 1);
	/* the server's acknowledgement of every judged byte promotes it,
	 * unrecorded: its one allowed record is written */
	ck_assert_int_eq(
	    reply("203.0.113.10", 443, "10.203.0.11", 41000, ACK, 7001, 101 + (uint32_t)n, "SH", 2),
	    VK_ALLOW);
	ck_assert(d.promote);
	ck_assert(!d.has_rec);
	ck_assert(d.register_flow);
	ck_assert_uint_eq(d.key.sport, 41000);
	ck_assert_int_eq(d.meta.via, FLOW_VIA_SNI);
	ck_assert_str_eq(d.meta.port, "pcv1");
	/* packets queued before the conntrack mark acted: released, no record */
	ck_assert_int_eq(
	    reply("203.0.113.10", 443, "10.203.0.11", 41000, ACK, 7003, 101 + (uint32_t)n, "x", 1),
	    VK_PASS);
	ck_assert(!d.has_rec);
	tcp_pkt("10.203.0.11", 41000, "203.0.113.10", 443, ACK | PSH, 101 + (uint32_t)n, "app", 3);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(!d.has_rec);
	/* then the entry goes: the conntrack mark carries the flow */
	ctx.now_ms += HELD_GRACE_MS + 1;
	ck_assert_int_eq(
	    reply("203.0.113.10", 443, "10.203.0.11", 41000, ACK, 7004, 101 + (uint32_t)n, "y", 1),
	    VK_DROP);
	ck_assert_uint_eq(held_count(held), 0);

	/* another name on the same address */
	handshake("10.203.0.11", 41001, "203.0.113.10", 443, 500);
	n = wire_client_hello(ch, "paste.evil.test");
	tcp_pkt("10.203.0.11", 41001, "203.0.113.10", 443, ACK | PSH, 501, ch, n);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_ptr_nonnull(strstr(d.rec.reason, "paste.evil.test"));
	/* refused once, recorded once */
	tcp_pkt("10.203.0.11", 41001, "203.0.113.10", 443, ACK | PSH, 501, ch, n);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert(!d.has_rec);

	/* a ClientHello in two segments: the first passes, the second decides */
	handshake("10.203.0.11", 41002, "203.0.113.10", 443, 900);
	n = wire_client_hello(ch, "api.github.test");
	tcp_pkt("10.203.0.11", 41002, "203.0.113.10", 443, ACK | PSH, 901, ch, 20);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(!d.held_tls); /* not judged yet: the server's ACKs still queued */
	tcp_pkt("10.203.0.11", 41002, "203.0.113.10", 443, ACK | PSH, 901 + 40, ch + 40, n - 40);
	ck_assert_int_eq(judge(), VK_DROP); /* a gap: wait for the retransmission */
	tcp_pkt("10.203.0.11", 41002, "203.0.113.10", 443, ACK | PSH, 901 + 20, ch + 20, n - 20);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(d.held_tls);
	ck_assert_int_eq(
	    reply("203.0.113.10", 443, "10.203.0.11", 41002, ACK, 7001, 901 + (uint32_t)n, "SH", 2),
	    VK_ALLOW);
}
END_TEST

/* Insertion (issue 16): a decision rests only on bytes the server gets. */
START_TEST(held_insertion)
{
	uint8_t ch[512], evil[512];
	size_t n = wire_client_hello(ch, "api.github.test"),
	       ne = wire_client_hello(evil, "paste.evil.test");

	resolve("api.github.test", "203.0.113.10", 0x6700, "6020");
	/* a one-byte non-TLS segment (which TTL 1 would stop after the
	 * judgement), then another name's ClientHello at the same place */
	handshake("10.203.0.11", 43000, "203.0.113.10", 443, 1000);
	tcp_pkt("10.203.0.11", 43000, "203.0.113.10", 443, ACK | PSH, 1001, "X", 1);
	ck_assert_int_eq(judge(), VK_PASS);    /* not TLS, host allowed on 443: not promoted yet */
	ck_assert(d.has_rec && d.held_judged); /* recorded before the byte goes on */
	ck_assert_str_eq(d.rec.reason, "allowed host (not TLS: no server name to check)");
	/* promoted on a bare acknowledgement: the server's ACKs stay queued */
	ck_assert(!d.held_tls);
	tcp_pkt("10.203.0.11", 43000, "203.0.113.10", 443, ACK | PSH, 1001, evil, ne);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_int_eq(d.rec.verdict, LOGREC_REFUSED);
	ck_assert_str_eq(d.rec.reason, "held flow: bytes sent again differ from the ones judged");
	ck_assert_uint_eq(d.rec.src.port, 43000);
	/* nothing of it goes on, and a new SYN cannot start it over */
	tcp_pkt("10.203.0.11", 43000, "203.0.113.10", 443, ACK | PSH, 1002, evil + 1, ne - 1);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert(!d.has_rec);
	tcp_pkt("10.203.0.11", 43000, "203.0.113.10", 443, SYN, 5555, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_int_eq(reply("203.0.113.10", 443, "10.203.0.11", 43000, ACK, 7001, 1002, NULL, 0),
			 VK_DROP); /* its server's acknowledgement promotes nothing */

	/* an allowed ClientHello (that TTL 1 would stop), then another name's */
	handshake("10.203.0.11", 43001, "203.0.113.10", 443, 2000);
	tcp_pkt("10.203.0.11", 43001, "203.0.113.10", 443, ACK | PSH, 2001, ch, n);
	ck_assert_int_eq(judge(), VK_PASS);
	tcp_pkt("10.203.0.11", 43001, "203.0.113.10", 443, ACK | PSH, 2001, evil, ne);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason, "held flow: bytes sent again differ from the ones judged");
	ck_assert_str_eq(d.rec.sni, "api.github.test");

	/* resent with other bytes while the ClientHello is being put together;
	 * sent again unchanged, partly or whole, it passes */
	handshake("10.203.0.11", 43002, "203.0.113.10", 443, 3000);
	tcp_pkt("10.203.0.11", 43002, "203.0.113.10", 443, ACK | PSH, 3001, ch, 30);
	ck_assert_int_eq(judge(), VK_PASS);
	tcp_pkt("10.203.0.11", 43002, "203.0.113.10", 443, ACK | PSH, 3001 + 10, ch + 10, 20);
	ck_assert_int_eq(judge(), VK_PASS);
	memcpy(evil, ch, 30);
	evil[25] ^= 1; /* one bit of the random */
	tcp_pkt("10.203.0.11", 43002, "203.0.113.10", 443, ACK | PSH, 3001 + 10, evil + 10, 20);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason, "held flow: bytes sent again differ from the ones judged");

	ne = wire_client_hello(evil, "paste.evil.test");
	/* a second SYN with another sequence number */
	handshake("10.203.0.11", 43003, "203.0.113.10", 443, 4000);
	tcp_pkt("10.203.0.11", 43003, "203.0.113.10", 443, SYN, 9000, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason,
			 "held flow: a SYN with another sequence number than the first");
	tcp_pkt("10.203.0.11", 43003, "203.0.113.10", 443, ACK | PSH, 9001, evil, ne);
	ck_assert_int_eq(judge(), VK_REJECT);

	/* data before any SYN-ACK for our sequence number */
	tcp_pkt("10.203.0.11", 43004, "203.0.113.10", 443, SYN, 100, NULL, 0);
	ck_assert_int_eq(judge(), VK_HELD);
	ck_assert_int_eq(
	    reply("203.0.113.10", 443, "10.203.0.11", 43004, SYN | ACK, 7000, 77, NULL, 0),
	    VK_DROP); /* not an answer to our SYN */
	tcp_pkt("10.203.0.11", 43004, "203.0.113.10", 443, ACK | PSH, 101, ch, n);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason, "held flow: data before the server accepted the connection");

	/* a FIN where judged bytes are */
	handshake("10.203.0.11", 43005, "203.0.113.10", 443, 100);
	tcp_pkt("10.203.0.11", 43005, "203.0.113.10", 443, ACK | PSH, 101, "GET /\r\n", 7);
	ck_assert_int_eq(judge(), VK_PASS);
	tcp_pkt("10.203.0.11", 43005, "203.0.113.10", 443, ACK | 0x01, 101, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason, "held flow: a FIN inside the judged bytes");

	/* nothing past the FIN: the server has the FIN there, not bytes */
	handshake("10.203.0.11", 43006, "203.0.113.10", 443, 100);
	tcp_pkt("10.203.0.11", 43006, "203.0.113.10", 443, ACK | PSH, 101, ch, 20);
	ck_assert_int_eq(judge(), VK_PASS);
	tcp_pkt("10.203.0.11", 43006, "203.0.113.10", 443, ACK | 0x01, 121, NULL, 0);
	ck_assert_int_eq(judge(), VK_PASS);
	tcp_pkt("10.203.0.11", 43006, "203.0.113.10", 443, ACK | 0x01, 121, NULL, 0);
	ck_assert_int_eq(judge(), VK_PASS); /* the same FIN again */
	tcp_pkt("10.203.0.11", 43006, "203.0.113.10", 443, ACK | PSH, 121, ch + 20, n - 20);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason, "held flow: data past its FIN");
}
END_TEST

/* Promotion: only a reply of the server whose acknowledgement covers every
 * judged byte, from inside the server's own sequence space. */
START_TEST(held_promotion)
{
	uint8_t ch[512];
	size_t n = wire_client_hello(ch, "api.github.test");
	uint32_t end = 101 + (uint32_t)n;
	static const uint8_t evil_bytes[] = {0x16, 3, 1, 0};

	resolve("api.github.test", "203.0.113.10", 0x6800, "6030");
	handshake("10.203.0.11", 44000, "203.0.113.10", 443, 100);
	/* before the judgement, an acknowledgement promotes nothing */
	ck_assert_int_eq(reply("203.0.113.10", 443, "10.203.0.11", 44000, ACK, 7001, 101, NULL, 0),
			 VK_PASS);
	tcp_pkt("10.203.0.11", 44000, "203.0.113.10", 443, ACK | PSH, 101, ch, n);
	ck_assert_int_eq(judge(), VK_PASS);
	/* bytes past the judged ones pass; the judged ones again, unchanged, too */
	tcp_pkt("10.203.0.11", 44000, "203.0.113.10", 443, ACK | PSH, end, "more", 4);
	ck_assert_int_eq(judge(), VK_PASS);
	tcp_pkt("10.203.0.11", 44000, "203.0.113.10", 443, ACK | PSH, 101, ch, n);
	ck_assert_int_eq(judge(), VK_PASS);
	/* a RST carrying bytes (found by fuzz_held): they would pass unjudged */
	tcp_pkt("10.203.0.11", 44000, "203.0.113.10", 443, 0x04 | ACK, 101, evil_bytes, 4);
	ck_assert_int_eq(judge(), VK_DROP);
	/* short of the judged bytes */
	ck_assert_int_eq(
	    reply("203.0.113.10", 443, "10.203.0.11", 44000, ACK, 7001, end - 1, NULL, 0), VK_PASS);
	ck_assert(!d.promote && !d.has_rec);
	/* from the sandbox's side, whatever its acknowledgement number says:
	 * prerouting, and forward in the sandbox's direction */
	tcp_pkt("10.203.0.11", 44000, "203.0.113.10", 443, ACK, end, NULL, 0);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(!d.promote && !d.has_rec);
	tcp_pkt("10.203.0.11", 44000, "203.0.113.10", 443, ACK, end, NULL, 0);
	pkt[28] = (uint8_t)(end >> 24);
	pkt[29] = (uint8_t)(end >> 16);
	pkt[30] = (uint8_t)(end >> 8);
	pkt[31] = (uint8_t)end;
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_DROP);
	ck_assert(!d.promote && !d.has_rec);
	/* outside the server's sequence space: a blind forgery */
	ck_assert_int_eq(reply("203.0.113.10", 443, "10.203.0.11", 44000, ACK, 90000, end, NULL, 0),
			 VK_PASS);
	ck_assert(!d.promote && !d.has_rec);
	/* acknowledging more than the sandbox ever sent */
	ck_assert_int_eq(
	    reply("203.0.113.10", 443, "10.203.0.11", 44000, ACK, 7001, end + 100, NULL, 0),
	    VK_PASS);
	ck_assert(!d.promote && !d.has_rec);
	/* the server's, without bytes: a TLS flow waits for its first ones
	 * (a HelloRetryRequest would bring a second ClientHello, H13a) */
	ck_assert_int_eq(reply("203.0.113.10", 443, "10.203.0.11", 44000, ACK, 7001, end, NULL, 0),
			 VK_PASS);
	ck_assert(!d.promote && !d.has_rec);
	/* the server's with its first bytes: promoted */
	ck_assert_int_eq(reply("203.0.113.10", 443, "10.203.0.11", 44000, ACK, 7001, end, "SH", 2),
			 VK_ALLOW);
	ck_assert(d.promote && !d.has_rec); /* recorded with its judged bytes */

	/* judged, never acknowledged: reset at the deadline, recorded (after
	 * its allowed record: what happened, in order) */
	handshake("10.203.0.11", 44001, "203.0.113.10", 443, 100);
	tcp_pkt("10.203.0.11", 44001, "203.0.113.10", 443, ACK | PSH, 101, ch, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ctx.now_ms += cfg.engine.sni_timeout_ms + 1;
	tcp_pkt("10.203.0.11", 44001, "203.0.113.10", 443, ACK | PSH, end, "more", 4);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason, "held flow: the server did not acknowledge the judged bytes "
				       "within engine.sni_timeout_ms");
	ck_assert_int_eq(reply("203.0.113.10", 443, "10.203.0.11", 44001, ACK, 7001, end, NULL, 0),
			 VK_DROP);
	ck_assert(!d.has_rec);
}
END_TEST

/* H6a: a SYN with another ISN on a promoted entry (a client reusing its
 * port once the first connection closed: conntrack opened a new one) is a
 * new flow, held and judged afresh with its own record; the first SYN sent
 * again still passes; a judged entry the server has not acknowledged yet
 * still refuses another ISN (H6). */
START_TEST(held_new_isn_after_promotion)
{
	uint8_t ch[512];
	size_t n = wire_client_hello(ch, "api.github.test");
	uint32_t end = 101 + (uint32_t)n;

	resolve("api.github.test", "203.0.113.10", 0x6800, "6030");
	handshake("10.203.0.11", 44100, "203.0.113.10", 443, 100);
	tcp_pkt("10.203.0.11", 44100, "203.0.113.10", 443, ACK | PSH, 101, ch, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(d.has_rec);
	ck_assert_int_eq(reply("203.0.113.10", 443, "10.203.0.11", 44100, ACK, 7001, end, "SH", 2),
			 VK_ALLOW);
	ck_assert(d.promote);
	tcp_pkt("10.203.0.11", 44100, "203.0.113.10", 443, SYN, 100, NULL, 0);
	ck_assert_int_eq(judge(), VK_PASS); /* the first SYN again */
	ck_assert(!d.has_rec);
	ctx.now_ms += 10; /* within the grace */
	handshake("10.203.0.11", 44100, "203.0.113.10", 443, 900000);
	tcp_pkt("10.203.0.11", 44100, "203.0.113.10", 443, ACK | PSH, 101, ch, n);
	ck_assert_int_eq(judge(), VK_REJECT); /* the first connection's bytes: not this one's */
	ck_assert_str_eq(d.rec.reason, "held flow: data before the connection's first byte");

	handshake("10.203.0.11", 44101, "203.0.113.10", 443, 100);
	tcp_pkt("10.203.0.11", 44101, "203.0.113.10", 443, ACK | PSH, 101, ch, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert_int_eq(reply("203.0.113.10", 443, "10.203.0.11", 44101, ACK, 7001, end, "SH", 2),
			 VK_ALLOW);
	ctx.now_ms += 10;
	handshake("10.203.0.11", 44101, "203.0.113.10", 443, 900000);
	tcp_pkt("10.203.0.11", 44101, "203.0.113.10", 443, ACK | PSH, 900001, ch, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert(d.has_rec && d.held_judged);
	ck_assert_int_eq(d.rec.verdict, LOGREC_ALLOWED);

	/* judged, not acknowledged yet: another ISN is refused */
	handshake("10.203.0.11", 44102, "203.0.113.10", 443, 100);
	tcp_pkt("10.203.0.11", 44102, "203.0.113.10", 443, ACK | PSH, 101, ch, n);
	ck_assert_int_eq(judge(), VK_PASS);
	tcp_pkt("10.203.0.11", 44102, "203.0.113.10", 443, SYN, 900000, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason,
			 "held flow: a SYN with another sequence number than the first");
}
END_TEST

/* A TLS flow's server answering with a HelloRetryRequest (H13a): the flow is
 * refused, recorded, and the second ClientHello never passes. The server's
 * first bytes cut short of the random decide nothing: not promoted. */
START_TEST(held_hello_retry)
{
	static const uint8_t hrr_random[32] = {0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
					       0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
					       0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
					       0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c};
	uint8_t ch[600], hello[49];
	size_t n = wire_client_hello(ch, "api.github.test");
	uint32_t end = 101 + (uint32_t)n;

	memcpy(hello, "\x16\x03\x03\x00\x2c\x02\x00\x00\x28\x03\x03", 11);
	memcpy(hello + 11, hrr_random, sizeof(hrr_random));
	memcpy(hello + 43, "\x00\x13\x01\x00\x00\x00", 6);
	resolve("api.github.test", "203.0.113.10", 0x6801, "6031");
	handshake("10.203.0.11", 44100, "203.0.113.10", 443, 100);
	tcp_pkt("10.203.0.11", 44100, "203.0.113.10", 443, ACK | PSH, 101, ch, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert_int_eq(
	    reply("203.0.113.10", 443, "10.203.0.11", 44100, ACK | PSH, 7001, end, hello, 20),
	    VK_PASS);
	ck_assert(!d.promote);
	ck_assert_int_eq(reply("203.0.113.10", 443, "10.203.0.11", 44100, ACK | PSH, 7001, end,
			       hello, sizeof(hello)),
			 VK_DROP);
	ck_assert(!d.promote && d.has_rec);
	ck_assert_int_eq(d.rec.verdict, LOGREC_REFUSED);
	ck_assert_str_eq(metrics_reason_label(d.rec.reason), "held_inconsistent");
	ck_assert_str_eq(d.rec.held_bytes, "hello-retry"); /* what log audit replays */
	ck_assert_uint_gt(d.rec.held_ms, 0);
	tcp_pkt("10.203.0.11", 44100, "203.0.113.10", 443, ACK | PSH, end, ch, n);
	ck_assert_int_eq(judge(), VK_REJECT); /* the second ClientHello */
	ck_assert(!d.has_rec);		      /* recorded once */
}
END_TEST

/* A reload between the judgement and the server's acknowledgement: the
 * promotion judges again under the policy in force. */
START_TEST(held_reload_before_promotion)
{
	static const char v2[] = V2_SSH_ONLY;
	struct policy *p2 = NULL;
	struct pc_err err = {0};
	uint8_t ch[512];
	size_t n = wire_client_hello(ch, "api.github.test");

	resolve("api.github.test", "203.0.113.10", 0x6900, "6040");
	handshake("10.203.0.11", 45000, "203.0.113.10", 443, 100);
	tcp_pkt("10.203.0.11", 45000, "203.0.113.10", 443, ACK | PSH, 101, ch, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert_int_eq(policy_load_buffer("v2.yaml", v2, strlen(v2), &cfg, &p2, &err), 0);
	ctx.policy = p2;
	ck_assert_int_eq(
	    reply("203.0.113.10", 443, "10.203.0.11", 45000, ACK, 7001, 101 + (uint32_t)n, "SH", 2),
	    VK_DROP);
	ck_assert_int_eq(d.rec.verdict, LOGREC_REFUSED);
	ck_assert(!d.register_flow);
	tcp_pkt("10.203.0.11", 45000, "203.0.113.10", 443, ACK, 101 + (uint32_t)n, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert(!d.has_rec);
	ctx.policy = pol;
	policy_unref(p2);
}
END_TEST

/* The same over IPv6. */
START_TEST(held_insertion_v6)
{
	uint8_t m[512], ch[512], evil[512];
	size_t n = wire_client_hello(ch, "api.github.test"),
	       ne = wire_client_hello(evil, "paste.evil.test");
	size_t q = dns_msg6(m, 0x6a00, "api.github.test", NULL);
	const char *c6 = "fd00:203::11", *s6 = "2001:db8:10::20";

	udp_pkt("10.203.0.11:6050", "198.51.100.53:53", m, q);
	ck_assert_int_eq(judge(), VK_PASS);
	q = dns_msg6(m, 0x6a00, "api.github.test", s6);
	udp_pkt("198.51.100.53:53", "10.203.0.11:6050", m, q);
	ck_assert_int_eq(judge_from(0, NF_INET_FORWARD), VK_PASS);
	handshake(c6, 46000, s6, 443, 100);
	tcp_pkt(c6, 46000, s6, 443, ACK | PSH, 101, "X", 1);
	ck_assert_int_eq(judge(), VK_PASS);
	tcp_pkt(c6, 46000, s6, 443, ACK | PSH, 101, evil, ne);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason, "held flow: bytes sent again differ from the ones judged");
	handshake(c6, 46001, s6, 443, 100);
	tcp_pkt(c6, 46001, s6, 443, ACK | PSH, 101, ch, n);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert_int_eq(reply(s6, 443, c6, 46001, ACK, 7001, 101 + (uint32_t)n, "SH", 2),
			 VK_ALLOW);
	ck_assert_str_eq(d.rec.sni, "api.github.test");
}
END_TEST

START_TEST(held_flow_timeout_and_plain)
{
	uint8_t ch[512];
	size_t n = wire_client_hello(ch, "api.github.test");

	resolve("api.github.test", "203.0.113.10", 0x7777, "6003");
	handshake("10.203.0.11", 42000, "203.0.113.10", 443, 1);
	ctx.now_ms += cfg.engine.sni_timeout_ms + 1;
	tcp_pkt("10.203.0.11", 42000, "203.0.113.10", 443, ACK | PSH, 2, ch, n);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_ptr_nonnull(strstr(d.rec.reason, "sni_timeout_ms"));
	/* log audit's facts: the class, and held longer than the timeout */
	ck_assert_str_eq(d.rec.held_bytes, "timeout");
	ck_assert_uint_eq(d.rec.held_ms, cfg.engine.sni_timeout_ms + 1);
	/* not TLS: allowed on the learned name (docs/engine.md) */
	resolve("api.github.test", "203.0.113.10", 0x7778, "6004");
	handshake("10.203.0.11", 42001, "203.0.113.10", 80, 1);
	tcp_pkt("10.203.0.11", 42001, "203.0.113.10", 80, ACK | PSH, 2, "GET / HTTP/1.0\r\n\r\n",
		18);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert_int_eq(reply("203.0.113.10", 80, "10.203.0.11", 42001, ACK, 7001, 20, NULL, 0),
			 VK_ALLOW);
	ck_assert_ptr_nonnull(strstr(d.rec.reason, "not TLS"));
	ck_assert_int_eq(d.meta.via, FLOW_VIA_HOST);
	/* a handshake record our parser refuses is not "not TLS" */
	resolve("api.github.test", "203.0.113.10", 0x7779, "6005");
	handshake("10.203.0.11", 42003, "203.0.113.10", 443, 1);
	ch[5] = 2; /* ServerHello where a ClientHello must be */
	tcp_pkt("10.203.0.11", 42003, "203.0.113.10", 443, ACK | PSH, 2, ch, n);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason, "malformed TLS ClientHello");
	/* nor is any other TLS record first: a warning alert a server may
	 * skip, with the ClientHello after it */
	resolve("api.github.test", "203.0.113.10", 0x777a, "6006");
	handshake("10.203.0.11", 42004, "203.0.113.10", 443, 1);
	tcp_pkt("10.203.0.11", 42004, "203.0.113.10", 443, ACK | PSH, 2,
		"\x15\x03\x01\x00\x02\x01\x5a", 7);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason, "malformed TLS ClientHello");
	ck_assert_str_eq(d.rec.held_bytes, "tls-malformed");
	/* data in the SYN to a named host */
	tcp_pkt("10.203.0.11", 42002, "203.0.113.10", 443, SYN, 1, "x", 1);
	ck_assert_int_eq(judge(), VK_REJECT);
}
END_TEST

/* A reload that takes the host away while its flow is held: plain data is
 * judged under the policy in force, never waved through on the name that
 * was learned before (make valgrind shows the same end to end). */
START_TEST(held_plain_after_reload)
{
	static const char v2[] = V2_SSH_ONLY;
	static const char get[] = "GET / HTTP/1.0\r\n\r\n";
	struct policy *p2 = NULL;
	struct pc_err err = {0};

	resolve("api.github.test", "203.0.113.10", 0x7790, "6010");
	handshake("10.203.0.11", 42100, "203.0.113.10", 80, 1);
	ck_assert_int_eq(policy_load_buffer("v2.yaml", v2, strlen(v2), &cfg, &p2, &err), 0);
	ctx.policy = p2;
	tcp_pkt("10.203.0.11", 42100, "203.0.113.10", 80, ACK | PSH, 2, get, strlen(get));
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_int_eq(d.rec.verdict, LOGREC_REFUSED);
	ctx.policy = pol;
	/* the same flow shape under the first policy is allowed: the refusal
	 * above is the reload's doing */
	resolve("api.github.test", "203.0.113.10", 0x7791, "6011");
	handshake("10.203.0.11", 42101, "203.0.113.10", 80, 1);
	tcp_pkt("10.203.0.11", 42101, "203.0.113.10", 80, ACK | PSH, 2, get, strlen(get));
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert_int_eq(reply("203.0.113.10", 80, "10.203.0.11", 42101, ACK, 7001,
			       2 + (uint32_t)strlen(get), NULL, 0),
			 VK_ALLOW);
	policy_unref(p2);
}
END_TEST

/* ---- reload ------------------------------------------------------------------- */

START_TEST(rejudge_after_reload)
{
	static const char v2[] = "sandbox: agent-1\n"
				 "match: { source: 10.203.0.11/32, port: pcv1 }\n"
				 "allow:\n"
				 "  - cidr: 198.51.100.22/32\n"
				 "    ports: [5000]\n"
				 "    proto: udp\n";
	struct policy *p2 = NULL;
	struct pc_err err = {0};
	struct decide_ctx c2 = ctx;
	struct flow_key k;
	struct flow_meta m;
	const char *why = NULL;

	tcp_pkt("10.203.0.11", 40000, "198.51.100.22", 22, SYN, 1, NULL, 0);
	ck_assert_int_eq(judge(), VK_ALLOW);
	k = d.key;
	m = d.meta;
	ck_assert(decide_rejudge(&ctx, &k, &m, false, &why));
	ck_assert(!decide_rejudge(&ctx, &k, &m, true, &why)); /* not a vault flow */
	ck_assert_int_eq(policy_load_buffer("v2.yaml", v2, strlen(v2), &cfg, &p2, &err), 0);
	c2.policy = p2;
	ck_assert(!decide_rejudge(&c2, &k, &m, false, &why));
	ck_assert_str_eq(why, "cut by reload: its address is no longer allowed");
	ck_assert(!decide_rejudge(&c2, &k, NULL, false, &why));
	pc_strlcpy(m.port, "pcv2", sizeof(m.port));
	ck_assert(!decide_rejudge(&ctx, &k, &m, false, &why));
	ck_assert_ptr_nonnull(strstr(why, "no longer matches"));
	policy_unref(p2);
}
END_TEST

/* ---- flow tables -------------------------------------------------------------- */

START_TEST(registry_bounded_and_swept)
{
	struct flow_registry *r = NULL;
	struct flow_key k[4];
	struct flow_meta m = {.sandbox = "agent-1"}, got;

	ck_assert_int_eq(flow_registry_new(3, &r), 0);
	for (int i = 0; i < 4; i++) {
		memset(&k[i], 0, sizeof(k[i]));
		k[i].family = AF_INET;
		k[i].proto = IPPROTO_TCP;
		k[i].sport = (uint16_t)(1000 + i);
		ck_assert_int_eq(flow_registry_put(r, &k[i], &m), 0);
	}
	ck_assert_uint_eq(flow_registry_count(r), 3);
	ck_assert(!flow_registry_get(r, &k[0], &got)); /* the oldest went */
	ck_assert(flow_registry_get(r, &k[3], &got));
	ck_assert_str_eq(got.sandbox, "agent-1");
	flow_registry_unsee_all(r);
	flow_registry_seen(r, &k[2]);
	flow_registry_sweep(r);
	ck_assert_uint_eq(flow_registry_count(r), 1);
	ck_assert(flow_registry_get(r, &k[2], &got));
	flow_registry_del(r, &k[2]);
	ck_assert_uint_eq(flow_registry_count(r), 0);
	flow_registry_free(r);
}
END_TEST

START_TEST(held_table_bounded)
{
	struct held_table *t = NULL;
	struct held_flow *f;
	struct flow_key k;

	ck_assert_int_eq(held_table_new(2, &t), 0);
	memset(&k, 0, sizeof(k));
	ck_assert_int_eq(held_add(t, &k, "a", 1, &f, NULL), 0);
	k.sport = 1;
	ck_assert_int_eq(held_add(t, &k, "a", 1, &f, NULL), 0);
	k.sport = 2;
	/* full, and a holds its share: the caller refuses */
	ck_assert_int_eq(held_add(t, &k, "a", 1, &f, NULL), PC_EREFUSED);

	k.sport = 1;
	held_get(t, &k)->deadline_ms = 10;
	ck_assert_uint_eq(held_expire(t, 100), 0); /* kept a while for a clear refusal */
	ck_assert_uint_eq(held_expire(t, 100000), 2);
	ck_assert_uint_eq(held_count(t), 0);
	held_table_free(t);
}
END_TEST

/* A sandbox over its share of the held table is refused with a reason
 * naming the quota, counted as such; the other sandboxes keep theirs. */
START_TEST(held_quota_in_decide)
{
	/* 16 entries, two sandboxes: 8 each for sure, and agent-2 holds
	 * none, so agent-1 may use all 16 */
	resolve("api.github.test", "203.0.113.10", 0x6677, "6009");
	for (uint16_t i = 0; i < 16; i++) {
		tcp_pkt("10.203.0.11", (uint16_t)(42000 + i), "203.0.113.10", 443, SYN, 100, NULL,
			0);
		ck_assert_int_eq(judge(), VK_HELD);
		ck_assert_int_eq(d.quota, QUOTA_NONE);
	}
	tcp_pkt("10.203.0.11", 42100, "203.0.113.10", 443, SYN, 100, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert(d.has_rec);
	ck_assert_str_eq(d.rec.sandbox, "agent-1");
	ck_assert_str_eq(d.rec.reason, "too many connections of this sandbox waiting for a "
				       "ClientHello (engine quota)");
	ck_assert_int_eq(d.quota, QUOTA_HELD);
	ck_assert_uint_eq(d.rec.quota, 8); /* the share that was full, for log audit */
	ck_assert_str_eq(metrics_reason_label(d.rec.reason), "held_quota");
	ck_assert_uint_eq(held_used(held, "agent-1"), 16);
	ck_assert_uint_eq(held_count(held), 16);
	/* the table full, a sandbox under its share takes the place of
	 * agent-1's oldest: that flow's next segment is refused, saying so */
	{
		struct flow_key k;
		struct held_flow *hf;
		char gone[POLICY_NAME_MAX];

		memset(&k, 0, sizeof(k));
		k.sport = 1;
		ck_assert_int_eq(held_add(held, &k, "agent-2", 2, &hf, gone), 0);
		ck_assert_str_eq(gone, "agent-1");
	}
	tcp_pkt("10.203.0.11", 42000, "203.0.113.10", 443, ACK, 101, NULL, 0);
	ck_assert_int_eq(judge(), VK_REJECT);
	ck_assert_str_eq(d.rec.reason,
			 "TCP segment of no connection the guard allowed: its held flow gave its "
			 "place to a sandbox under its share (engine quota)");
	ck_assert_str_eq(metrics_reason_label(d.rec.reason), "no_connection");
	ck_assert_uint_eq(held_used(held, "agent-1"), 15);
	/* A RST leaves the entry (it may be an insertion that never arrives:
	 * docs/engine.md, "Held flows"); an entry forgotten past its deadline
	 * gives its place back, and the next flow is held. */
	tcp_pkt("10.203.0.11", 42001, "203.0.113.10", 443, RST, 101, NULL, 0);
	ck_assert_int_eq(judge(), VK_PASS);
	ck_assert_uint_eq(held_used(held, "agent-1"), 15);
	ctx.now_ms += cfg.engine.sni_timeout_ms + 60001;
	ck_assert_uint_eq(held_expire(held, ctx.now_ms), 16);
	ck_assert_uint_eq(held_used(held, "agent-1"), 0);
	tcp_pkt("10.203.0.11", 42100, "203.0.113.10", 443, SYN, 100, NULL, 0);
	ck_assert_int_eq(judge(), VK_HELD);
}
END_TEST

/* Fill, drain (delete and expiry), fill again: nothing leaks from a
 * sandbox's count, and one sandbox's borrowing never eats another's share:
 * a holds the whole table, and b still gets a place (a's oldest). */
START_TEST(held_quota_fill_drain_fill)
{
	struct held_table *t = NULL;
	struct held_flow *f[8], *x;
	struct flow_key k;
	char gone[POLICY_NAME_MAX];

	ck_assert_int_eq(held_table_new(8, &t), 0);
	memset(&k, 0, sizeof(k));
	for (int round = 0; round < 3; round++) {
		for (uint16_t i = 0; i < 8; i++) {
			k.sport = (uint16_t)(100 + i);
			ck_assert_int_eq(held_add(t, &k, "a", 2, &f[i], gone), 0);
			ck_assert_str_eq(gone, "");
			ck_assert_str_eq(f[i]->meta.sandbox, "a");
			f[i]->deadline_ms = 10;
		}
		k.sport = 200;
		x = NULL;
		ck_assert_int_eq(held_add(t, &k, "a", 2, &x, NULL), PC_EREFUSED);
		ck_assert_ptr_null(x); /* out-param untouched on failure */
		k.sport = 300;
		ck_assert_int_eq(held_add(t, &k, "b", 2, &x, gone), 0); /* b's share is its own */
		ck_assert_str_eq(gone, "a");
		ck_assert_uint_eq(held_used(t, "a"), 7);
		ck_assert_uint_eq(held_used(t, "b"), 1);
		k.sport = 100; /* a's oldest gave its place up */
		ck_assert_ptr_null(held_get(t, &k));
		ck_assert(held_given_up(t, &k));
		k.sport = 101;
		ck_assert(!held_given_up(t, &k));
		/* lookups still find every other entry (keyed hash) */
		k.sport = 102;
		ck_assert_ptr_eq(held_get(t, &k), f[2]);
		if (round == 0) {
			for (int i = 1; i < 8; i++)
				held_del(t, f[i]);
			held_del(t, x);
		} else {
			x->deadline_ms = 10;
			ck_assert_uint_eq(held_expire(t, 100000), 8);
		}
		ck_assert_uint_eq(held_used(t, "a"), 0);
		ck_assert_uint_eq(held_used(t, "b"), 0);
		ck_assert_uint_eq(held_count(t), 0);
	}
	held_table_free(t);
}
END_TEST

/* Whose place a sandbox under its share takes when the table is full: the
 * oldest entry, not yet promoted, of the sandbox holding the most; never
 * one of a sandbox at or under its share. */
START_TEST(held_full_table_gives_the_most_held_up)
{
	struct held_table *t = NULL;
	struct held_flow *f[8], *x;
	struct flow_key k;
	char gone[POLICY_NAME_MAX];

	/* 8 entries, 3 sandboxes: 2 each for sure */
	ck_assert_int_eq(held_table_new(8, &t), 0);
	memset(&k, 0, sizeof(k));
	for (uint16_t i = 0; i < 8; i++) {
		k.sport = (uint16_t)(100 + i);
		/* a: 100, 101, 102, 104, 106; b: 103, 105, 107 */
		ck_assert_int_eq(held_add(t, &k, i < 3 || i % 2 == 0 ? "a" : "b", 3, &f[i], NULL),
				 0);
	}
	f[0]->promoted_ms = 5; /* promoted, still counted as waiting: kept */
	k.sport = 200;
	ck_assert_int_eq(held_add(t, &k, "c", 3, &x, gone), 0);
	ck_assert_str_eq(gone, "a"); /* a holds 5, b 3 */
	k.sport = 101;
	ck_assert_ptr_null(held_get(t, &k));
	k.sport = 100;
	ck_assert_ptr_eq(held_get(t, &k), f[0]);
	/* a 4, b 3, c 1 */
	k.sport = 201;
	ck_assert_int_eq(held_add(t, &k, "c", 3, &x, gone), 0);
	ck_assert_str_eq(gone, "a"); /* 102 */
	/* a 3, b 3, c 2: c holds its share, and a full table refuses it */
	k.sport = 202;
	ck_assert_int_eq(held_add(t, &k, "c", 3, &x, gone), PC_EREFUSED);
	/* a and b hold the most: the oldest of theirs goes (b's 103) */
	k.sport = 203;
	ck_assert_int_eq(held_add(t, &k, "d", 4, &x, gone), 0);
	ck_assert_str_eq(gone, "b");
	k.sport = 103;
	ck_assert_ptr_null(held_get(t, &k));
	ck_assert_uint_eq(held_used(t, "a"), 3);
	ck_assert_uint_eq(held_used(t, "b"), 2);
	ck_assert_uint_eq(held_used(t, "c"), 2);
	/* a's 3 are over its share; b, at its share, is never taken from */
	k.sport = 204;
	ck_assert_int_eq(held_add(t, &k, "d", 4, &x, gone), 0);
	ck_assert_str_eq(gone, "a"); /* 104: a's oldest not promoted */
	ck_assert_uint_eq(held_used(t, "a"), 2);
	/* everyone at its share: a fifth sandbox finds no place to take */
	k.sport = 205;
	ck_assert_int_eq(held_add(t, &k, "e", 4, &x, gone), PC_EAGAIN);
	ck_assert_str_eq(gone, "");
	ck_assert_uint_eq(held_count(t), 8);
	/* a sandbox over its share with nothing but promoted entries still
	 * gives one up: a place under the share is sure */
	held_table_free(t);
	ck_assert_int_eq(held_table_new(2, &t), 0);
	for (uint16_t i = 0; i < 2; i++) {
		k.sport = (uint16_t)(300 + i);
		ck_assert_int_eq(held_add(t, &k, "a", 2, &f[i], NULL), 0);
		f[i]->promoted_ms = 5;
	}
	k.sport = 400;
	ck_assert_int_eq(held_add(t, &k, "b", 2, &x, gone), 0);
	ck_assert_str_eq(gone, "a");
	k.sport = 300;
	ck_assert_ptr_null(held_get(t, &k));
	held_table_free(t);
}
END_TEST

/* A promoted entry stays HELD_GRACE_MS for packets queued before its ct
 * mark acted, but no longer counts as waiting for a ClientHello: a sandbox
 * opening TLS flows faster than its share per grace period was refused
 * "too many connections waiting" by its own decided flows (issue 34). Its
 * promoted entries have a share of their own (of twice the table), the
 * oldest forgotten first once past their grace; past that share they stay
 * counted as waiting, as before. */
START_TEST(held_promoted_frees_waiting_share)
{
	struct held_table *t = NULL;
	struct held_flow *f[13], *x;
	struct flow_key k;

	/* 2 sandboxes: shares of 4 waiting, 8 promoted */
	ck_assert_int_eq(held_table_new(8, &t), 0);
	memset(&k, 0, sizeof(k));
	for (uint16_t i = 0; i < 12; i++) {
		k.sport = (uint16_t)(100 + i);
		ck_assert_int_eq(held_add(t, &k, "a", 2, &f[i], NULL), 0);
		f[i]->deadline_ms = 10;
		if (i < 8) {
			f[i]->promoted_ms = 5;
			ck_assert_int_eq(held_promoted(t, f[i], 2), 0);
			ck_assert_int_eq(held_promoted(t, f[i], 2), 0); /* once only */
			ck_assert_uint_eq(held_used(t, "a"), 0);
		}
	}
	ck_assert_uint_eq(held_count(t), 12);
	ck_assert_uint_eq(held_used(t, "a"), 4);
	/* the table has room for more, lent (held_quota_fill_drain_fill) */
	k.sport = 200;
	ck_assert_int_eq(held_add(t, &k, "a", 2, &x, NULL), 0);
	held_del(t, x);
	/* within the grace, the promoted share is full: it stays waiting */
	f[8]->promoted_ms = 5 + HELD_GRACE_MS;
	ck_assert_int_eq(held_promoted(t, f[8], 2), PC_EREFUSED);
	ck_assert_uint_eq(held_used(t, "a"), 4);
	ck_assert_uint_eq(held_count(t), 12);
	/* past it, the promoted entries go, oldest first, and make room */
	f[9]->promoted_ms = 6 + HELD_GRACE_MS;
	ck_assert_int_eq(held_promoted(t, f[9], 2), 0);
	ck_assert_uint_eq(held_count(t), 4); /* f[8], f[10], f[11] waiting; f[9] */
	ck_assert_uint_eq(held_used(t, "a"), 3);
	k.sport = 101;
	ck_assert_ptr_null(held_get(t, &k));
	k.sport = 109;
	ck_assert_ptr_eq(held_get(t, &k), f[9]);
	k.sport = 200;
	ck_assert_int_eq(held_add(t, &k, "a", 2, &f[12], NULL), 0);
	/* a promoted entry deleted early leaves the list whole */
	f[10]->promoted_ms = 7 + HELD_GRACE_MS;
	ck_assert_int_eq(held_promoted(t, f[10], 2), 0);
	f[11]->promoted_ms = 8 + HELD_GRACE_MS;
	ck_assert_int_eq(held_promoted(t, f[11], 2), 0);
	held_del(t, f[10]);
	f[12]->promoted_ms = 9 + 2 * HELD_GRACE_MS;
	ck_assert_int_eq(held_promoted(t, f[12], 2), 0); /* forgets f[9] and f[11] */
	ck_assert_uint_eq(held_count(t), 2);		 /* f[8] (waiting) and f[12] */
	ck_assert_uint_eq(held_used(t, "a"), 1);
	ck_assert_uint_eq(held_expire(t, 100000), 2);
	ck_assert_uint_eq(held_count(t), 0);
	ck_assert_uint_eq(held_used(t, "a"), 0);
	held_table_free(t);
}
END_TEST

/* The streams' table lends room as the held flows' does: a fills it, b
 * takes the place of a's oldest, and nothing leaks through fill, drain
 * (delete and idle expiry) and fill again. */
START_TEST(dnstcp_quota_fill_drain_fill)
{
	struct dnstcp_table *t = NULL;
	struct dnstcp_stream *s[4], *x;
	struct flow_key k;
	char gone[POLICY_NAME_MAX];

	ck_assert_int_eq(dnstcp_table_new(4, &t), 0);
	memset(&k, 0, sizeof(k));
	for (int round = 0; round < 3; round++) {
		for (uint16_t i = 0; i < 4; i++) {
			k.sport = (uint16_t)(10 + i);
			ck_assert_int_eq(dnstcp_add(t, &k, 7, 1000, "a", 2, &s[i], gone), 0);
			ck_assert_str_eq(gone, "");
		}
		k.sport = 20;
		x = NULL;
		ck_assert_int_eq(dnstcp_add(t, &k, 7, 1000, "a", 2, &x, NULL), PC_EREFUSED);
		ck_assert_ptr_null(x);
		ck_assert_int_eq(dnstcp_add(t, &k, 7, 1000, "b", 2, &x, gone), 0);
		ck_assert_str_eq(gone, "a");
		k.sport = 10; /* a's oldest gave its place up */
		ck_assert_ptr_null(dnstcp_get(t, &k, 1000));
		k.sport = 11;
		ck_assert_ptr_eq(dnstcp_get(t, &k, 1000), s[1]);
		ck_assert_uint_eq(dnstcp_used(t, "a"), 3);
		ck_assert_uint_eq(dnstcp_used(t, "b"), 1);
		/* b under its share again takes a's next oldest */
		k.sport = 21;
		ck_assert_int_eq(dnstcp_add(t, &k, 7, 1000, "b", 2, &s[0], gone), 0);
		ck_assert_str_eq(gone, "a");
		k.sport = 11;
		ck_assert_ptr_null(dnstcp_get(t, &k, 1000));
		/* both at their share, the table full: b is refused */
		k.sport = 22;
		ck_assert_int_eq(dnstcp_add(t, &k, 7, 1000, "b", 2, &s[1], gone), PC_EREFUSED);
		if (round == 0) {
			dnstcp_del(t, s[0]);
			dnstcp_del(t, s[2]);
			dnstcp_del(t, s[3]);
			dnstcp_del(t, x);
		} else {
			k.sport = 99; /* a lookup forgets the idle ones */
			ck_assert_ptr_null(dnstcp_get(t, &k, 1000 + DNSTCP_IDLE_MS + 1));
		}
		ck_assert_uint_eq(dnstcp_count(t), 0);
		ck_assert_uint_eq(dnstcp_used(t, "a"), 0);
		ck_assert_uint_eq(dnstcp_used(t, "b"), 0);
	}
	dnstcp_table_free(t);
}
END_TEST

/* Tables keyed by what a sandbox chooses hash under their own random key:
 * the same flow lands in unrelated places in two tables. */
START_TEST(tables_hash_keyed)
{
	struct held_table *h1 = NULL, *h2 = NULL;
	struct dnstcp_table *d1 = NULL, *d2 = NULL;
	struct flow_registry *r1 = NULL, *r2 = NULL;
	struct flow_meta m, got;
	struct flow_key k;

	memset(&k, 0, sizeof(k));
	k.family = AF_INET;
	k.proto = IPPROTO_TCP;
	k.sport = 40000;
	k.dport = 443;
	k.src[0] = 10;
	k.dst[0] = 203;
	ck_assert_int_eq(held_table_new(16, &h1), 0);
	ck_assert_int_eq(held_table_new(16, &h2), 0);
	ck_assert_int_eq(dnstcp_table_new(4, &d1), 0);
	ck_assert_int_eq(dnstcp_table_new(4, &d2), 0);
	ck_assert_int_eq(flow_registry_new(16, &r1), 0);
	ck_assert_int_eq(flow_registry_new(16, &r2), 0);
	ck_assert(held_key_hash(h1, &k) != held_key_hash(h2, &k));
	ck_assert(dnstcp_key_hash(d1, &k) != dnstcp_key_hash(d2, &k));
	ck_assert(flow_registry_key_hash(r1, &k) != flow_registry_key_hash(r2, &k));
	/* the same table hashes the same key the same way */
	ck_assert(held_key_hash(h1, &k) == held_key_hash(h1, &k));
	memset(&m, 0, sizeof(m));
	pc_strlcpy(m.sandbox, "agent-1", sizeof(m.sandbox));
	ck_assert_int_eq(flow_registry_put(r1, &k, &m), 0);
	ck_assert(flow_registry_get(r1, &k, &got));
	ck_assert_str_eq(got.sandbox, "agent-1");
	ck_assert(!flow_registry_get(r2, &k, &got));
	held_table_free(h1);
	held_table_free(h2);
	dnstcp_table_free(d1);
	dnstcp_table_free(d2);
	flow_registry_free(r1);
	flow_registry_free(r2);
}
END_TEST

/* Refusals over a quota, per sandbox, as status and metrics show them. */
START_TEST(quota_refusals_counted)
{
	struct quota_stats s;
	struct quota_count c;
	struct pc_prom b = {0};
	char *j = NULL, *text;
	size_t l = 0;

	quota_stats_init(&s);
	ck_assert(!quota_stats_get(&s, "agent-1", &c));
	quota_stats_count(&s, "agent-1", QUOTA_HELD);
	quota_stats_count(&s, "agent-1", QUOTA_HELD);
	quota_stats_count(&s, "agent-1", QUOTA_DNSTCP);
	quota_stats_count(&s, "agent-2", QUOTA_NONE); /* not a quota refusal */
	ck_assert(quota_stats_get(&s, "agent-1", &c));
	ck_assert_uint_eq(c.held_refused, 2);
	ck_assert_uint_eq(c.dnstcp_refused, 1);
	ck_assert(!quota_stats_get(&s, "agent-2", &c));
	ck_assert_int_eq(quota_status_json(&s, pol, 4096, 256, &j, &l), 0);
	ck_assert_str_eq(j, ",\"quotas\":{\"held_flows_per_queue\":4096,"
			    "\"dns_tcp_streams_per_queue\":256,\"sandboxes\":["
			    "{\"sandbox\":\"agent-1\",\"held_flows_share\":2048,"
			    "\"dns_tcp_streams_share\":128,\"held_flows_refused\":2,"
			    "\"held_flows_given_up\":0,"
			    "\"dns_tcp_streams_refused\":1,\"dns_tcp_streams_given_up\":0},"
			    "{\"sandbox\":\"agent-2\",\"held_flows_share\":2048,"
			    "\"dns_tcp_streams_share\":128,\"held_flows_refused\":0,"
			    "\"held_flows_given_up\":0,"
			    "\"dns_tcp_streams_refused\":0,\"dns_tcp_streams_given_up\":0}]}");
	free(j);
	quota_metrics(&b, &s, pol);
	text = pc_prom_take(&b);
	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_nonnull(strstr(text,
				     "portcullis_engine_quota_refused_total{sandbox=\"agent-1\","
				     "table=\"held_flows\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(text,
				     "portcullis_engine_quota_refused_total{sandbox=\"agent-1\","
				     "table=\"dns_tcp_streams\"} 1\n"));
	ck_assert_ptr_nonnull(strstr(text,
				     "portcullis_engine_quota_refused_total{sandbox=\"agent-2\","
				     "table=\"held_flows\"} 0\n"));
	free(text);
	quota_stats_free(&s);
}
END_TEST

static Suite *engine_suite(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("decide"), *tabs = tcase_create("tables");

	tcase_add_checked_fixture(tc, setup, teardown);
	PC_UNIT_TESTS(
	    tc, cidr_allowed_and_refused, identity_port_and_source, only_connection_starts,
	    dns_queries, dns_answers, dns_port53_only_sandbox_to_resolver,
	    dns_answer_only_from_resolver, dns_one_record_per_query, dnstcp_failed_stream,
	    dnstcp_answers_let_go_once_acknowledged, held_flow_sni, held_flow_timeout_and_plain,
	    held_insertion, held_promotion, held_new_isn_after_promotion, held_hello_retry,
	    held_reload_before_promotion, held_insertion_v6, held_plain_after_reload,
	    rejudge_after_reload, held_quota_in_decide, quota_refusals_counted,
	    held_full_table_gives_the_most_held_up);
	PC_UNIT_TESTS(tabs, registry_bounded_and_swept, held_table_bounded,
		      held_quota_fill_drain_fill, held_promoted_frees_waiting_share,
		      dnstcp_quota_fill_drain_fill, tables_hash_keyed);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, tabs);
	return s;
}

PC_UNIT_MAIN(engine_suite)
