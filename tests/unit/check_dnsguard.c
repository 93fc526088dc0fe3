/* dnsguard unit tests: query verdicts and synthesized refusals, answers
 * matched to outstanding queries, CNAME chains, learning with TTL clamps,
 * expiry and grace, caps and eviction, and ech stripping. Every message is
 * a real DNS message built with ldns, and replies are parsed back. */
#include "dnsguard/dnsguard.h"
#include "dnsguard/dnsguard_int.h" /* dg_hash: the tables' keyed hash */
#include "rules/rules_int.h"
#include "tests/unit/dnsmsg.h"
#include "tests/unit/hostnames.h"
#include "tests/unit/allow.h"
#include "tests/unit/unit.h"

#include <ldns/ldns.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

#define T0 1000000u /* an arbitrary monotonic start, ms */

static struct config cfg;
static struct dnsguard *g;

static struct policy_portrange p443[] = {{443, 443}};
static struct policy_portrange p80_443[] = {{80, 80}, {443, 443}};
static struct policy_allow allows[] = {
    UA_NAME(HOST, "api.github.com", p443, TCP, "agent-1/allow[0]"),
    UA_NAME(WILDCARD, "githubusercontent.com", p443, TCP, "agent-1/allow[1]"),
    UA_NAME(HOST, "pypi.org", p443, TCP, "agent-1/allow[2]"),
    UA_NAME(HOST, "files.example", p80_443, ANY, "agent-1/allow[3]"),
};
static struct policy_secret secrets[] = {
    {.name = "GITHUB_TOKEN", .host = "api.github.com", .port = 443},
};
static struct policy_sandbox sb1 = {
    .name = "agent-1",
    .allow = allows,
    .n_allow = 4,
    .secrets = secrets,
    .n_secrets = 1,
    .dns_qtypes = QT_DEFAULT,
    .dns_refuse = DNS_REFUSE_REFUSED,
};
/* the same sandbox after a reload that dropped pypi.org */
static struct policy_sandbox sb1_reloaded = UA_SANDBOX("agent-1", allows, 2, REFUSED);
static struct policy_sandbox sb2 = UA_SANDBOX("agent-2", allows, 4, NXDOMAIN);

static struct dns_flow qf; /* sandbox 10.203.0.10:40000 -> resolver:53 */

static void guard_new(void)
{
	struct pc_err err;

	ck_assert_int_eq(dnsguard_new(&cfg, &g, &err), 0);
}

static void setup(void)
{
	config_defaults(&cfg);
	cfg.dns.resolvers[0] = dm_addr("198.51.100.53");
	cfg.dns.resolvers[1] = dm_addr("2001:db8::53");
	cfg.dns.n_resolvers = 2;
	dm_routable_testnets(&cfg);
	cfg.dns.ttl_min = 30;
	cfg.dns.ttl_max = 3600;
	cfg.dns.grace = 60;
	qf = dm_flow("10.203.0.10", 40000, "198.51.100.53", 53, IPPROTO_UDP);
	guard_new();
}

static void teardown(void)
{
	dnsguard_free(g);
	g = NULL;
}

/* ---- message builders ---------------------------------------------------- */

/* An answer to (id, qname, qtype) carrying rrs (NULL-terminated). */
static size_t mkanswer(uint8_t *buf, size_t cap, uint16_t id, const char *qname, ldns_rr_type t,
		       const char *const *rrs)
{
	ldns_pkt *p = dm_query(id, qname, t, LDNS_RR_CLASS_IN);

	ldns_pkt_set_qr(p, true);
	ldns_pkt_set_ra(p, true);
	for (; rrs && *rrs; rrs++)
		dm_push(p, LDNS_SECTION_ANSWER, *rrs);
	return dm_wire(p, buf, cap);
}

static enum dnsguard_verdict ask_at(const struct policy_sandbox *sb, const struct dns_flow *f,
				    uint16_t id, const char *name, ldns_rr_type t, uint64_t now,
				    struct dnsguard_query_res *r)
{
	uint8_t m[512];
	size_t n = dm_wire(dm_query(id, name, t, LDNS_RR_CLASS_IN), m, sizeof(m));

	ck_assert_int_eq(dnsguard_query(g, sb, f, m, n, now, r), 0);
	return r->verdict;
}

static enum dnsguard_verdict ask(const struct policy_sandbox *sb, const struct dns_flow *f,
				 uint16_t id, const char *name, ldns_rr_type t,
				 struct dnsguard_query_res *r)
{
	return ask_at(sb, f, id, name, t, T0, r);
}

/* Query and answer; returns the answer's verdict. */
static enum dnsguard_verdict resolve(const struct policy_sandbox *sb, uint16_t id, const char *name,
				     ldns_rr_type t, const char *const *rrs, uint64_t now,
				     struct dnsguard_answer_res *ar)
{
	struct dnsguard_query_res qr;
	struct dns_flow af = dm_reversed(&qf);
	uint8_t m[4096];
	size_t n;

	ck_assert_int_eq(ask_at(sb, &qf, id, name, t, now, &qr), DNSG_ALLOW);
	n = mkanswer(m, sizeof(m), id, name, t, rrs);
	ck_assert_int_eq(dnsguard_answer(g, sb, &af, m, n, now, ar), 0);
	return ar->verdict;
}

static bool flow_ok(const struct policy_sandbox *sb, const char *dst, uint16_t port, bool existing,
		    uint64_t now, struct dnsguard_flow_res *r)
{
	struct pc_addr a = dm_addr(dst);
	struct dnsguard_flow_res tmp;

	if (!r)
		r = &tmp;
	ck_assert_int_eq(dnsguard_flow(g, sb, &a, IPPROTO_TCP, port, existing, now, r), 0);
	return r->allowed;
}

/* Parse a synthesized reply back and check it answers the query. */
static ldns_pkt *reply_check(const struct dnsguard_query_res *r, uint16_t id, ldns_pkt_rcode rc)
{
	ldns_pkt *p = NULL;

	ck_assert_int_eq(r->verdict, DNSG_REFUSE);
	ck_assert_uint_gt(r->reply_len, 0);
	ck_assert_uint_le(r->reply_len, DNSG_REPLY_MAX);
	ck_assert_int_eq(ldns_wire2pkt(&p, r->reply, r->reply_len), LDNS_STATUS_OK);
	ck_assert_uint_eq(ldns_pkt_id(p), id);
	ck_assert(ldns_pkt_qr(p));
	ck_assert(ldns_pkt_ra(p));
	ck_assert_int_eq(ldns_pkt_get_rcode(p), rc);
	ck_assert_uint_eq(ldns_pkt_ancount(p), 0);
	return p;
}

/* ---- queries ---------------------------------------------------------------- */

START_TEST(query_allowed_exact_name)
{
	struct dnsguard_query_res r;
	struct dnsguard_stats st;

	ck_assert_int_eq(ask(&sb1, &qf, 7, "api.github.com.", LDNS_RR_TYPE_A, &r), DNSG_ALLOW);
	ck_assert_str_eq(r.qname, "api.github.com");
	ck_assert_uint_eq(r.qtype, LDNS_RR_TYPE_A);
	ck_assert_ptr_eq(r.rule, &allows[0]);
	ck_assert_uint_eq(r.reply_len, 0);
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.queries_allowed, 1);
	ck_assert_uint_eq(st.pending_queries, 1);
}
END_TEST

/* The shared table as a query's name, its labels put on the wire as
 * they are written (no escapes: the bytes a sandbox sends); names that
 * have no wire form (an empty label, a label over 63) are skipped. The
 * query's name is the table's PC_HOST_NAME column or "" ("name is not a
 * host name"). */
START_TEST(query_hostname_table)
{
	for (size_t i = 0; i < N_HOSTNAME_CASES; i++) {
		const struct hostname_case *c = &hostname_cases[i];
		struct dnsguard_query_res r;
		uint8_t m[600] = {0, 9, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
		size_t n = 12, len = strlen(c->in), start = 0;
		bool wire = len > 0 && strcmp(c->in, ".") != 0;

		for (size_t k = 0; wire && k <= len; k++) {
			if (k < len && c->in[k] != '.')
				continue;
			if (k == len && k == start)
				break; /* the trailing dot: the root label below */
			if (k == start || k - start > 63) {
				wire = false;
				break;
			}
			m[n++] = (uint8_t)(k - start);
			memcpy(m + n, c->in + start, k - start);
			n += k - start;
			start = k + 1;
		}
		if (!wire || n > 12 + 255)
			continue;
		m[n++] = 0;
		m[n++] = 0;
		m[n++] = 1; /* A */
		m[n++] = 0;
		m[n++] = 1; /* IN */
		ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
		ck_assert_str_eq(r.qname, c->name ? c->name : "");
		if (!c->name)
			ck_assert_str_eq(r.reason, "name is not a host name");
	}
}
END_TEST

START_TEST(query_name_case_insensitive)
{
	struct dnsguard_query_res r;

	ck_assert_int_eq(ask(&sb1, &qf, 7, "API.GitHub.COM.", LDNS_RR_TYPE_AAAA, &r), DNSG_ALLOW);
	ck_assert_str_eq(r.qname, "api.github.com");
}
END_TEST

START_TEST(query_wildcard_needs_a_label)
{
	struct dnsguard_query_res r;

	ck_assert_int_eq(ask(&sb1, &qf, 1, "raw.githubusercontent.com.", LDNS_RR_TYPE_A, &r),
			 DNSG_ALLOW);
	ck_assert_ptr_eq(r.rule, &allows[1]);
	ck_assert_int_eq(ask(&sb1, &qf, 2, "a.b.githubusercontent.com.", LDNS_RR_TYPE_A, &r),
			 DNSG_ALLOW);
	ck_assert_int_eq(ask(&sb1, &qf, 3, "githubusercontent.com.", LDNS_RR_TYPE_A, &r),
			 DNSG_REFUSE);
	ck_assert_int_eq(ask(&sb1, &qf, 4, "xgithubusercontent.com.", LDNS_RR_TYPE_A, &r),
			 DNSG_REFUSE);
}
END_TEST

START_TEST(query_denied_name_gets_refused_reply)
{
	struct dnsguard_query_res r;
	struct dnsguard_stats st;
	ldns_pkt *p;
	const ldns_rr *q;
	char *name;

	ck_assert_int_eq(ask(&sb1, &qf, 0x4242, "x7f3a.Paste.example.", LDNS_RR_TYPE_A, &r),
			 DNSG_REFUSE);
	ck_assert_str_eq(r.reason, "name not on the allow list");
	ck_assert_str_eq(r.qname, "x7f3a.paste.example");
	ck_assert_ptr_null(r.rule);
	p = reply_check(&r, 0x4242, LDNS_RCODE_REFUSED);
	ck_assert(ldns_pkt_rd(p));
	ck_assert_uint_eq(ldns_pkt_qdcount(p), 1);
	q = ldns_rr_list_rr(ldns_pkt_question(p), 0);
	name = ldns_rdf2str(ldns_rr_owner(q));
	ck_assert_str_eq(name, "x7f3a.Paste.example."); /* echoed as asked */
	ck_assert_int_eq(ldns_rr_get_type(q), LDNS_RR_TYPE_A);
	free(name);
	ck_assert(!ldns_pkt_edns(p)); /* no EDNS asked, none answered */
	ldns_pkt_free(p);
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.queries_refused, 1);
	ck_assert_uint_eq(st.pending_queries, 0);
}
END_TEST

START_TEST(query_nxdomain_when_configured)
{
	struct dnsguard_query_res r;
	ldns_pkt *p;

	ck_assert_int_eq(ask(&sb2, &qf, 99, "evil.example.", LDNS_RR_TYPE_A, &r), DNSG_REFUSE);
	p = reply_check(&r, 99, LDNS_RCODE_NXDOMAIN);
	ldns_pkt_free(p);
}
END_TEST

START_TEST(query_refusal_carries_extended_error)
{
	struct dnsguard_query_res r;
	ldns_pkt *q = dm_query(5, "evil.example.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN), *p;
	ldns_edns_option_list *l;
	uint8_t m[512];
	size_t n;

	ldns_pkt_set_edns_udp_size(q, 1232);
	n = dm_wire(q, m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	p = reply_check(&r, 5, LDNS_RCODE_REFUSED);
	l = ldns_pkt_edns_get_option_list(p);
	ck_assert_ptr_nonnull(l);
	ck_assert_uint_eq(ldns_edns_option_list_get_count(l), 1);
	ck_assert_int_eq(ldns_edns_get_code(ldns_edns_option_list_get_option(l, 0)), LDNS_EDNS_EDE);
	ck_assert_uint_eq(ldns_edns_get_data(ldns_edns_option_list_get_option(l, 0))[1],
			  LDNS_EDE_BLOCKED);
	ldns_pkt_free(p);
}
END_TEST

START_TEST(query_to_other_resolver_refused)
{
	struct dnsguard_query_res r;
	struct dns_flow f = qf;
	ldns_pkt *p;

	f.dst.addr = dm_addr("192.0.2.99");
	ck_assert_int_eq(ask(&sb1, &f, 1, "api.github.com.", LDNS_RR_TYPE_A, &r), DNSG_REFUSE);
	ck_assert_str_eq(r.reason, "not to a configured resolver");
	p = reply_check(&r, 1, LDNS_RCODE_REFUSED);
	ldns_pkt_free(p);
	f = qf;
	f.dst.port = 5353;
	ck_assert_int_eq(ask(&sb1, &f, 1, "api.github.com.", LDNS_RR_TYPE_A, &r), DNSG_REFUSE);
	f = qf;
	f.dst.addr = dm_addr("2001:db8::53"); /* the second configured one */
	ck_assert_int_eq(ask(&sb1, &f, 1, "api.github.com.", LDNS_RR_TYPE_A, &r), DNSG_ALLOW);
}
END_TEST

START_TEST(query_from_no_sandbox_refused)
{
	struct dnsguard_query_res r;
	ldns_pkt *p;

	ck_assert_int_eq(ask(NULL, &qf, 3, "api.github.com.", LDNS_RR_TYPE_A, &r), DNSG_REFUSE);
	ck_assert_str_eq(r.reason, "sender is not a sandbox");
	p = reply_check(&r, 3, LDNS_RCODE_REFUSED);
	ldns_pkt_free(p);
}
END_TEST

START_TEST(query_two_questions_refused)
{
	struct dnsguard_query_res r;
	ldns_pkt *q = dm_query(8, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN), *p;
	uint8_t m[512];
	size_t n;

	{
		ldns_rr *q2;

		ck_assert_int_eq(ldns_rr_new_question_frm_str(&q2, "pypi.org. IN A", NULL, NULL),
				 LDNS_STATUS_OK);
		ldns_pkt_push_rr(q, LDNS_SECTION_QUESTION, q2);
	}
	n = dm_wire(q, m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_str_eq(r.reason, "not exactly one question");
	p = reply_check(&r, 8, LDNS_RCODE_REFUSED);
	ck_assert_uint_eq(ldns_pkt_qdcount(p), 1);
	ldns_pkt_free(p);
}
END_TEST

START_TEST(query_txt_refused_by_default)
{
	struct dnsguard_query_res r;
	struct policy_sandbox txt = sb1;

	ck_assert_int_eq(ask(&sb1, &qf, 1, "api.github.com.", LDNS_RR_TYPE_TXT, &r), DNSG_REFUSE);
	ck_assert_str_eq(r.reason, "query type not permitted");
	/* the code and the rcode answered, decided where the guard refuses */
	ck_assert_str_eq(r.code, "dns_type");
	ck_assert_str_eq(r.rcode, "REFUSED");
	ck_assert_int_eq(ask(&sb1, &qf, 1, "api.github.com.", LDNS_RR_TYPE_ANY, &r), DNSG_REFUSE);
	ck_assert_int_eq(ask(&sb1, &qf, 1, "api.github.com.", LDNS_RR_TYPE_HTTPS, &r), DNSG_ALLOW);
	txt.dns_qtypes = QT_DEFAULT | QT_TXT;
	ck_assert_int_eq(ask(&txt, &qf, 2, "api.github.com.", LDNS_RR_TYPE_TXT, &r), DNSG_ALLOW);
}
END_TEST

START_TEST(query_class_chaos_refused)
{
	struct dnsguard_query_res r;
	uint8_t m[512];
	size_t n =
	    dm_wire(dm_query(1, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_CH), m, sizeof(m));

	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_int_eq(r.verdict, DNSG_REFUSE);
	ck_assert_str_eq(r.reason, "class is not IN");
}
END_TEST

START_TEST(query_with_qr_set_dropped)
{
	struct dnsguard_query_res r;
	struct dnsguard_stats st;
	ldns_pkt *q = dm_query(1, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
	uint8_t m[512];
	size_t n;

	ldns_pkt_set_qr(q, true);
	n = dm_wire(q, m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_int_eq(r.verdict, DNSG_DROP);
	ck_assert_uint_eq(r.reply_len, 0);
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.queries_malformed, 1);
}
END_TEST

START_TEST(query_other_opcode_refused)
{
	struct dnsguard_query_res r;
	ldns_pkt *q = dm_query(1, "api.github.com.", LDNS_RR_TYPE_SOA, LDNS_RR_CLASS_IN), *p;
	uint8_t m[512];
	size_t n;

	ldns_pkt_set_opcode(q, LDNS_PACKET_UPDATE);
	n = dm_wire(q, m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_str_eq(r.reason, "opcode is not QUERY");
	p = reply_check(&r, 1, LDNS_RCODE_REFUSED);
	ck_assert_int_eq(ldns_pkt_get_opcode(p), LDNS_PACKET_UPDATE);
	ldns_pkt_free(p);
}
END_TEST

START_TEST(query_records_in_query_refused)
{
	struct dnsguard_query_res r;
	ldns_pkt *q = dm_query(1, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
	uint8_t m[512];
	size_t n;

	dm_push(q, LDNS_SECTION_ANSWER, "api.github.com. 60 IN A 192.0.2.1");
	n = dm_wire(q, m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_str_eq(r.reason, "answer or authority records in a query");
	q = dm_query(1, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
	dm_push(q, LDNS_SECTION_ADDITIONAL, "x.example. 60 IN TXT \"data to smuggle\"");
	n = dm_wire(q, m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_str_eq(r.reason, "additional records in a query");
}
END_TEST

START_TEST(query_edns_tricks_refused)
{
	struct dnsguard_query_res r;
	ldns_pkt *q = dm_query(1, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
	ldns_edns_option_list *l;
	uint8_t m[1024], cookie[8] = {1, 2, 3, 4, 5, 6, 7, 8}, pad[600] = {0};
	size_t n;

	/* a cookie is what dig sends: fine */
	ldns_pkt_set_edns_udp_size(q, 1232);
	l = ldns_edns_option_list_new();
	ldns_edns_option_list_push(l, ldns_edns_new_from_data(LDNS_EDNS_COOKIE, 8, cookie));
	ldns_pkt_set_edns_option_list(q, l);
	n = dm_wire(q, m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_int_eq(r.verdict, DNSG_ALLOW);

	/* a second OPT record, appended by hand (ldns would merge them) */
	memcpy(m + n, m + n - 11 - 12, 11 + 12);
	m[11] = 2;
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n + 23, T0, &r), 0);
	ck_assert_int_eq(r.verdict, DNSG_REFUSE);
	ck_assert_str_eq(r.reason, "more than one OPT record");

	/* client subnet can carry data to authoritative servers */
	q = dm_query(1, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
	ldns_pkt_set_edns_udp_size(q, 1232);
	l = ldns_edns_option_list_new();
	ldns_edns_option_list_push(
	    l, ldns_edns_new_from_data(LDNS_EDNS_CLIENT_SUBNET, 8, "\0\1\x20\0\xc0\0\2\1"));
	ldns_pkt_set_edns_option_list(q, l);
	n = dm_wire(q, m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_str_eq(r.reason, "EDNS option not permitted");

	/* padding must be zeros, and a query not oversized */
	q = dm_query(1, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
	ldns_pkt_set_edns_udp_size(q, 1232);
	l = ldns_edns_option_list_new();
	pad[5] = 'x';
	ldns_edns_option_list_push(l, ldns_edns_new_from_data(LDNS_EDNS_PADDING, 16, pad));
	ldns_pkt_set_edns_option_list(q, l);
	n = dm_wire(q, m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_str_eq(r.reason, "EDNS padding is not zero");
	q = dm_query(1, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
	ldns_pkt_set_edns_udp_size(q, 1232);
	l = ldns_edns_option_list_new();
	pad[5] = 0;
	ldns_edns_option_list_push(l, ldns_edns_new_from_data(LDNS_EDNS_PADDING, 600, pad));
	ldns_pkt_set_edns_option_list(q, l);
	n = dm_wire(q, m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_str_eq(r.reason, "oversized query");

	/* EDNS version 1 */
	q = dm_query(1, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
	ldns_pkt_set_edns_udp_size(q, 1232);
	ldns_pkt_set_edns_version(q, 1);
	n = dm_wire(q, m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_str_eq(r.reason, "EDNS version is not 0");
}
END_TEST

START_TEST(query_malformed_dropped_and_counted)
{
	struct dnsguard_query_res r;
	struct dnsguard_stats st;
	uint8_t m[512], junk[40];
	size_t n =
	    dm_wire(dm_query(1, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN), m, sizeof(m));

	for (size_t cut = 0; cut < n; cut++) { /* every truncation */
		ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, cut, T0, &r), 0);
		ck_assert_int_eq(r.verdict, DNSG_DROP);
	}
	m[n] = 0; /* a trailing byte */
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n + 1, T0, &r), 0);
	ck_assert_int_eq(r.verdict, DNSG_DROP);
	memset(junk, 0xff, sizeof(junk));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, junk, sizeof(junk), T0, &r), 0);
	ck_assert_int_eq(r.verdict, DNSG_DROP);
	ck_assert_str_eq(r.qname, "");
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, NULL, 0, T0, &r), 0);
	ck_assert_int_eq(r.verdict, DNSG_DROP);
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.queries_malformed, n + 3);
	ck_assert_uint_eq(st.queries_allowed, 0);
}
END_TEST

START_TEST(query_odd_name_bytes_refused)
{
	struct dnsguard_query_res r;
	uint8_t m[512];
	size_t n =
	    dm_wire(dm_query(1, "ab.githubusercontent.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN), m,
		    sizeof(m));

	m[13] = '.'; /* "a.b" as one label: not what it looks like */
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_int_eq(r.verdict, DNSG_REFUSE);
	ck_assert_str_eq(r.reason, "name is not a host name");
	/* no host name, but the log still gets the name as sent, escaped */
	ck_assert_str_eq(r.qname, "");
	ck_assert_str_eq(r.qname_shown, "\\.b.githubusercontent.com");
	ck_assert_uint_eq(r.qtype, LDNS_RR_TYPE_A);
}
END_TEST

/* A tunnel's odd bytes reach the log only as printable \DDD escapes, cut at
 * 253 characters from the front (the domain it was sent to stays whole, no
 * escape is cut in two); a host name leaves qname_shown empty. */
START_TEST(query_odd_name_shown_escaped_for_the_log)
{
	struct dnsguard_query_res r;
	uint8_t m[512];
	size_t n = 12, len;
	static const char tail[] = "\\255.githubusercontent.com";

	memset(m, 0, sizeof(m));
	m[0] = 0x12;
	m[2] = 0x01; /* RD */
	m[5] = 1;    /* one question */
	for (int l = 0; l < 3; l++) {
		m[n++] = 60;
		memset(m + n, 0xff, 60);
		n += 60;
	}
	memcpy(m + n, "\021githubusercontent\003com", 22); /* 17, 3: octal lengths */
	n += 22;
	m[n++] = 0;
	m[n++] = 0; /* type A, class IN */
	m[n++] = 1;
	m[n++] = 0;
	m[n++] = 1;
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_int_eq(r.verdict, DNSG_REFUSE);
	ck_assert_str_eq(r.qname, "");
	len = strlen(r.qname_shown);
	ck_assert_uint_le(len, 253);
	ck_assert_uint_gt(len, 200);
	ck_assert_mem_eq(r.qname_shown, "...\\", 4);
	ck_assert_str_eq(r.qname_shown + len - strlen(tail), tail);
	for (size_t i = 0; i < len; i++)
		ck_assert(r.qname_shown[i] > ' ' && r.qname_shown[i] < 0x7f);

	n = dm_wire(dm_query(2, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN), m, sizeof(m));
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_str_eq(r.qname, "api.github.com");
	ck_assert_str_eq(r.qname_shown, "");
}
END_TEST

/* Append n TSIG records (owner root, no RDATA) to a message's additional
 * section. */
static size_t add_tsigs(uint8_t *m, size_t len, unsigned n)
{
	static const uint8_t tsig[] = {0, 0, 250, 0, 255, 0, 0, 0, 0, 0, 0};

	for (unsigned i = 0; i < n; i++) {
		memcpy(m + len, tsig, sizeof(tsig));
		len += sizeof(tsig);
	}
	m[11] = (uint8_t)(m[11] + n); /* ARCOUNT */
	return len;
}

/* ldns 1.8.3 keeps only the last TSIG record of a message and leaks the
 * others: such a message is malformed here and never reaches ldns_wire2pkt
 * (the sanitizer build's leak check is what shows it). One TSIG in a query
 * is an additional record like any other: refused. */
START_TEST(tsig_records_never_leak)
{
	static const char *const rrs[] = {"api.github.com. 300 IN A 192.0.2.10", NULL};
	struct dnsguard_query_res r;
	struct dnsguard_answer_res ar;
	struct dns_flow af = dm_reversed(&qf);
	struct dnsguard_stats st;
	uint8_t m[512];
	size_t n;

	n = dm_wire(dm_query(7, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN), m, sizeof(m));
	n = add_tsigs(m, n, 2);
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_int_eq(r.verdict, DNSG_DROP);
	ck_assert_str_eq(r.reason, "malformed query");
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.queries_malformed, 1);

	n = dm_wire(dm_query(7, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN), m, sizeof(m));
	n = add_tsigs(m, n, 1);
	ck_assert_int_eq(dnsguard_query(g, &sb1, &qf, m, n, T0, &r), 0);
	ck_assert_int_eq(r.verdict, DNSG_REFUSE);
	ck_assert_str_eq(r.reason, "additional records in a query");

	ck_assert_int_eq(ask(&sb1, &qf, 8, "api.github.com.", LDNS_RR_TYPE_A, &r), DNSG_ALLOW);
	n = mkanswer(m, sizeof(m), 8, "api.github.com.", LDNS_RR_TYPE_A, rrs);
	n = add_tsigs(m, n, 3);
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &af, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	ck_assert_uint_eq(ar.n_learned, 0);
}
END_TEST

/* ---- answers ------------------------------------------------------------------ */

START_TEST(answer_learns_and_flow_allowed)
{
	static const char *const rrs[] = {"api.github.com. 300 IN A 192.0.2.10", NULL};
	struct dnsguard_answer_res ar;
	struct dnsguard_flow_res fr;
	struct dnsguard_stats st;
	char buf[256];

	ck_assert(!flow_ok(&sb1, "192.0.2.10", 443, false, T0, &fr)); /* before: nothing */
	ck_assert_int_eq(resolve(&sb1, 11, "api.github.com.", LDNS_RR_TYPE_A, rrs, T0, &ar),
			 DNSG_ALLOW);
	ck_assert_uint_eq(ar.n_learned, 1);
	ck_assert_uint_eq(ar.ttl, 300);
	ck_assert_ptr_null(ar.rewritten);
	ck_assert(flow_ok(&sb1, "192.0.2.10", 443, false, T0 + 1, &fr));
	ck_assert_str_eq(fr.name, "api.github.com");
	ck_assert_ptr_eq(fr.rule, &allows[0]);
	ck_assert(fr.vault); /* GITHUB_TOKEN is bound to api.github.com:443 */
	ck_assert(!flow_ok(&sb1, "192.0.2.10", 80, false, T0 + 1, &fr));
	ck_assert_str_eq(fr.reason, "names resolved to this address are not allowed on this port");
	ck_assert(!flow_ok(&sb1, "192.0.2.11", 443, false, T0 + 1, NULL));
	ck_assert(!flow_ok(&sb2, "192.0.2.10", 443, false, T0 + 1, NULL)); /* other sandbox */
	ck_assert_uint_eq(dnsguard_names(g, "agent-1", &(struct pc_addr){0}, T0, buf, 10), 0);
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.answers_released, 1);
	ck_assert_uint_eq(st.learned_entries, 1);
	ck_assert_uint_eq(st.pending_queries, 0);
}
END_TEST

START_TEST(answer_unsolicited_or_mismatched_dropped)
{
	static const char *const rrs[] = {"pypi.org. 300 IN A 192.0.2.20", NULL};
	struct dnsguard_query_res qr;
	struct dnsguard_answer_res ar;
	struct dns_flow af = dm_reversed(&qf), bad;
	struct dnsguard_stats st;
	uint8_t m[512];
	size_t n;

	/* no query at all */
	n = mkanswer(m, sizeof(m), 21, "pypi.org.", LDNS_RR_TYPE_A, rrs);
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &af, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	ck_assert_str_eq(ar.reason, "matches no outstanding query");

	ck_assert_int_eq(ask(&sb1, &qf, 21, "pypi.org.", LDNS_RR_TYPE_A, &qr), DNSG_ALLOW);
	/* wrong id, name, type */
	n = mkanswer(m, sizeof(m), 22, "pypi.org.", LDNS_RR_TYPE_A, rrs);
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &af, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	n = mkanswer(m, sizeof(m), 21, "api.github.com.", LDNS_RR_TYPE_A, rrs);
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &af, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	n = mkanswer(m, sizeof(m), 21, "pypi.org.", LDNS_RR_TYPE_AAAA, rrs);
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &af, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	/* right message, wrong port / transport / resolver / sandbox */
	n = mkanswer(m, sizeof(m), 21, "pypi.org.", LDNS_RR_TYPE_A, rrs);
	bad = af;
	bad.dst.port = 40001;
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &bad, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	bad = af;
	bad.proto = IPPROTO_TCP;
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &bad, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	bad = af;
	bad.src.addr = dm_addr("2001:db8::53"); /* configured, but not the one asked */
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &bad, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	bad = af;
	bad.src.addr = dm_addr("192.0.2.66"); /* a spoofer's address */
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &bad, m, n, T0, &ar), 0);
	ck_assert_str_eq(ar.reason, "not from a configured resolver");
	ck_assert_int_eq(dnsguard_answer(g, &sb2, &af, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	ck_assert_int_eq(dnsguard_answer(g, NULL, &af, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	ck_assert(!flow_ok(&sb1, "192.0.2.20", 443, false, T0, NULL)); /* nothing learned */

	/* after 10 s the query is forgotten */
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &af, m, n, T0 + 10001, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	ck_assert(!flow_ok(&sb1, "192.0.2.20", 443, false, T0, NULL));

	/* a fresh query: its answer counts once, a replay is dropped */
	ck_assert_int_eq(ask(&sb1, &qf, 21, "pypi.org.", LDNS_RR_TYPE_A, &qr), DNSG_ALLOW);
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &af, m, n, T0 + 1, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_ALLOW);
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &af, m, n, T0 + 2, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	ck_assert(flow_ok(&sb1, "192.0.2.20", 443, false, T0 + 3, NULL));
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.answers_released, 1);
	ck_assert_uint_eq(st.answers_dropped, 12);
}
END_TEST

START_TEST(answer_from_sandbox_side_teaches_nothing)
{
	static const char *const rrs[] = {"pypi.org. 300 IN A 192.0.2.66", NULL};
	struct dnsguard_query_res qr;
	struct dnsguard_answer_res ar;
	struct dns_flow spoof = qf; /* the sandbox sends an "answer" itself */
	uint8_t m[512];
	size_t n = mkanswer(m, sizeof(m), 5, "pypi.org.", LDNS_RR_TYPE_A, rrs);

	ck_assert_int_eq(ask(&sb1, &qf, 5, "pypi.org.", LDNS_RR_TYPE_A, &qr), DNSG_ALLOW);
	ck_assert_int_eq(dnsguard_query(g, &sb1, &spoof, m, n, T0, &qr), 0);
	ck_assert_int_eq(qr.verdict, DNSG_DROP);
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &spoof, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	ck_assert(!flow_ok(&sb1, "192.0.2.66", 443, false, T0, NULL));
}
END_TEST

START_TEST(answer_cname_chain_learned_for_qname)
{
	static const char *const rrs[] = {
	    "api.github.com. 600 IN CNAME Edge.Fastly.example.",
	    "edge.fastly.example. 120 IN CNAME lb.cdn.example.",
	    "lb.cdn.example. 500 IN A 192.0.2.30",
	    "lb.cdn.example. 500 IN AAAA 2001:db8::30",
	    "evil.example. 500 IN A 192.0.2.31",	/* not on the chain */
	    "edge.fastly.example. 500 IN A 192.0.2.32", /* mid-chain, not its end */
	    NULL};
	struct dnsguard_answer_res ar;
	struct dnsguard_flow_res fr;

	ck_assert_int_eq(resolve(&sb1, 1, "api.github.com.", LDNS_RR_TYPE_A, rrs, T0, &ar),
			 DNSG_ALLOW);
	ck_assert_uint_eq(ar.n_learned, 2);
	ck_assert_uint_eq(ar.ttl, 120); /* the weakest link */
	ck_assert(flow_ok(&sb1, "192.0.2.30", 443, false, T0, &fr));
	ck_assert_str_eq(fr.name, "api.github.com");
	ck_assert(flow_ok(&sb1, "2001:db8::30", 443, false, T0, &fr));
	ck_assert(!flow_ok(&sb1, "192.0.2.31", 443, false, T0, NULL));
	ck_assert(!flow_ok(&sb1, "192.0.2.32", 443, false, T0, NULL));
	ck_assert(flow_ok(&sb1, "192.0.2.30", 443, false, T0 + 119000, NULL));
	ck_assert(!flow_ok(&sb1, "192.0.2.30", 443, false, T0 + 120000, NULL));
}
END_TEST

START_TEST(answer_cname_loop_and_long_chain_dropped)
{
	static const char *const loop[] = {
	    "pypi.org. 60 IN CNAME a.example.", "a.example. 60 IN CNAME b.example.",
	    "b.example. 60 IN CNAME A.example.", "a.example. 60 IN A 192.0.2.40", NULL};
	static const char *const selfloop[] = {"pypi.org. 60 IN CNAME pypi.org.", NULL};
	static const char *const forked[] = {"pypi.org. 60 IN CNAME a.example.",
					     "pypi.org. 60 IN CNAME b.example.",
					     "b.example. 60 IN A 192.0.2.41", NULL};
	static const char *const longc[] = {"pypi.org. 60 IN CNAME c1.example.",
					    "c1.example. 60 IN CNAME c2.example.",
					    "c2.example. 60 IN CNAME c3.example.",
					    "c3.example. 60 IN CNAME c4.example.",
					    "c4.example. 60 IN CNAME c5.example.",
					    "c5.example. 60 IN CNAME c6.example.",
					    "c6.example. 60 IN CNAME c7.example.",
					    "c7.example. 60 IN CNAME c8.example.",
					    "c8.example. 60 IN CNAME c9.example.",
					    "c9.example. 60 IN A 192.0.2.42",
					    NULL};
	static const char *const ok8[] = {
	    "pypi.org. 60 IN CNAME c1.example.",   "c1.example. 60 IN CNAME c2.example.",
	    "c2.example. 60 IN CNAME c3.example.", "c3.example. 60 IN CNAME c4.example.",
	    "c4.example. 60 IN CNAME c5.example.", "c5.example. 60 IN CNAME c6.example.",
	    "c6.example. 60 IN CNAME c7.example.", "c7.example. 60 IN CNAME c8.example.",
	    "c8.example. 60 IN A 192.0.2.43",	   NULL};
	struct dnsguard_answer_res ar;

	ck_assert_int_eq(resolve(&sb1, 1, "pypi.org.", LDNS_RR_TYPE_A, loop, T0, &ar), DNSG_DROP);
	ck_assert_str_eq(ar.reason, "CNAME loop");
	ck_assert_int_eq(resolve(&sb1, 2, "pypi.org.", LDNS_RR_TYPE_A, selfloop, T0, &ar),
			 DNSG_DROP);
	ck_assert_str_eq(ar.reason, "CNAME loop");
	ck_assert_int_eq(resolve(&sb1, 3, "pypi.org.", LDNS_RR_TYPE_A, forked, T0, &ar), DNSG_DROP);
	ck_assert_str_eq(ar.reason, "several CNAMEs for one name");
	ck_assert_int_eq(resolve(&sb1, 4, "pypi.org.", LDNS_RR_TYPE_A, longc, T0, &ar), DNSG_DROP);
	ck_assert_str_eq(ar.reason, "CNAME chain too long");
	ck_assert(!flow_ok(&sb1, "192.0.2.40", 443, false, T0, NULL));
	ck_assert(!flow_ok(&sb1, "192.0.2.41", 443, false, T0, NULL));
	ck_assert(!flow_ok(&sb1, "192.0.2.42", 443, false, T0, NULL));
	ck_assert_int_eq(resolve(&sb1, 5, "pypi.org.", LDNS_RR_TYPE_A, ok8, T0, &ar), DNSG_ALLOW);
	ck_assert(flow_ok(&sb1, "192.0.2.43", 443, false, T0, NULL));
}
END_TEST

START_TEST(answer_ttl_clamped_expiry_and_grace)
{
	static const char *const zero[] = {"pypi.org. 0 IN A 192.0.2.50", NULL};
	static const char *const huge[] = {"files.example. 604800 IN A 192.0.2.51", NULL};
	struct dnsguard_answer_res ar;

	ck_assert_int_eq(resolve(&sb1, 1, "pypi.org.", LDNS_RR_TYPE_A, zero, T0, &ar), DNSG_ALLOW);
	ck_assert_uint_eq(ar.ttl, 30);
	ck_assert(flow_ok(&sb1, "192.0.2.50", 443, false, T0 + 29999, NULL));
	ck_assert(!flow_ok(&sb1, "192.0.2.50", 443, false, T0 + 30000, NULL)); /* expired */
	ck_assert(flow_ok(&sb1, "192.0.2.50", 443, true, T0 + 30000, NULL));   /* grace */
	ck_assert(flow_ok(&sb1, "192.0.2.50", 443, true, T0 + 89999, NULL));
	ck_assert(!flow_ok(&sb1, "192.0.2.50", 443, true, T0 + 90000, NULL));
	ck_assert(!flow_ok(&sb1, "192.0.2.50", 443, true, T0 + 1000, NULL)); /* and it is gone */

	ck_assert_int_eq(resolve(&sb1, 2, "files.example.", LDNS_RR_TYPE_A, huge, T0, &ar),
			 DNSG_ALLOW);
	ck_assert_uint_eq(ar.ttl, 3600);
	ck_assert(flow_ok(&sb1, "192.0.2.51", 80, false, T0 + 3599999, NULL));
	ck_assert(!flow_ok(&sb1, "192.0.2.51", 80, false, T0 + 3600000, NULL));

	/* learned again: the later expiry wins */
	ck_assert_int_eq(resolve(&sb1, 3, "pypi.org.", LDNS_RR_TYPE_A, zero, T0 + 100000, &ar),
			 DNSG_ALLOW);
	ck_assert(flow_ok(&sb1, "192.0.2.50", 443, false, T0 + 129000, NULL));
}
END_TEST

START_TEST(answer_error_rcode_released_learns_nothing)
{
	struct dnsguard_query_res qr;
	struct dnsguard_answer_res ar;
	struct dns_flow af = dm_reversed(&qf);
	ldns_pkt *p = dm_query(9, "pypi.org.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
	uint8_t m[512];
	size_t n;

	ldns_pkt_set_qr(p, true);
	ldns_pkt_set_rcode(p, LDNS_RCODE_NXDOMAIN);
	dm_push(p, LDNS_SECTION_ANSWER, "pypi.org. 60 IN A 192.0.2.60");
	n = dm_wire(p, m, sizeof(m));
	ck_assert_int_eq(ask(&sb1, &qf, 9, "pypi.org.", LDNS_RR_TYPE_A, &qr), DNSG_ALLOW);
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &af, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_ALLOW);
	ck_assert_uint_eq(ar.n_learned, 0);
	ck_assert(!flow_ok(&sb1, "192.0.2.60", 443, false, T0, NULL));
}
END_TEST

START_TEST(answer_after_reload_learns_only_allowed)
{
	static const char *const rrs[] = {"pypi.org. 300 IN A 192.0.2.70", NULL};
	struct dnsguard_query_res qr;
	struct dnsguard_answer_res ar;
	struct dns_flow af = dm_reversed(&qf);
	uint8_t m[512];
	size_t n = mkanswer(m, sizeof(m), 4, "pypi.org.", LDNS_RR_TYPE_A, rrs);

	ck_assert_int_eq(ask(&sb1, &qf, 4, "pypi.org.", LDNS_RR_TYPE_A, &qr), DNSG_ALLOW);
	/* the policy was reloaded in between and no longer has pypi.org */
	ck_assert_int_eq(dnsguard_answer(g, &sb1_reloaded, &af, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_ALLOW);
	ck_assert_uint_eq(ar.n_learned, 0);
	ck_assert(!flow_ok(&sb1, "192.0.2.70", 443, false, T0, NULL));
}
END_TEST

START_TEST(answer_shared_address_names_and_sni)
{
	static const char *const a1[] = {"pypi.org. 300 IN A 192.0.2.80", NULL};
	static const char *const a2[] = {"x.githubusercontent.com. 300 IN A 192.0.2.80", NULL};
	struct dnsguard_answer_res ar;
	const struct policy_allow *rule = NULL;
	struct pc_addr dst = dm_addr("192.0.2.80"), other = dm_addr("192.0.2.81");
	char buf[256];

	ck_assert_int_eq(resolve(&sb1, 1, "pypi.org.", LDNS_RR_TYPE_A, a1, T0, &ar), DNSG_ALLOW);
	ck_assert_int_eq(
	    resolve(&sb1, 2, "X.githubusercontent.com.", LDNS_RR_TYPE_A, a2, T0 + 5, &ar),
	    DNSG_ALLOW);
	ck_assert_uint_eq(dnsguard_names(g, "agent-1", &dst, T0 + 10, buf, sizeof(buf)), 2);
	ck_assert_str_eq(buf, "x.githubusercontent.com,pypi.org");
	ck_assert_uint_eq(dnsguard_names(g, "agent-1", &dst, T0 + 10, buf, 20), 0); /* too small */
	ck_assert_str_eq(buf, "");
	ck_assert_uint_eq(dnsguard_names(g, "agent-1", &dst, T0 + 10, buf, 25), 1);
	ck_assert_str_eq(buf, "x.githubusercontent.com");
	ck_assert_uint_eq(dnsguard_names(g, "agent-1", &dst, T0 + 10, NULL, 0), 2);
	ck_assert_uint_eq(dnsguard_names(g, "agent-2", &dst, T0 + 10, buf, sizeof(buf)), 0);

	ck_assert(
	    dnsguard_sni_allowed(g, &sb1, &dst, IPPROTO_TCP, 443, "PyPI.org", T0 + 10, &rule));
	ck_assert_ptr_eq(rule, &allows[2]);
	ck_assert(dnsguard_sni_allowed(g, &sb1, &dst, IPPROTO_TCP, 443, "x.githubusercontent.com",
				       T0 + 10, NULL));
	/* a server name carries no trailing dot (RFC 6066): refused, as the
	 * vault refuses it (common/hostname.c) */
	ck_assert(!dnsguard_sni_allowed(g, &sb1, &dst, IPPROTO_TCP, 443, "x.githubusercontent.com.",
					T0 + 10, NULL));
	/* allowed name, but never resolved to this address: domain fronting */
	ck_assert(!dnsguard_sni_allowed(g, &sb1, &dst, IPPROTO_TCP, 443, "api.github.com", T0 + 10,
					NULL));
	ck_assert(
	    !dnsguard_sni_allowed(g, &sb1, &dst, IPPROTO_TCP, 443, "evil.example", T0 + 10, NULL));
	ck_assert(
	    !dnsguard_sni_allowed(g, &sb1, &other, IPPROTO_TCP, 443, "pypi.org", T0 + 10, NULL));
	ck_assert(!dnsguard_sni_allowed(g, &sb1, &dst, IPPROTO_TCP, 80, "pypi.org", T0 + 10, NULL));
	ck_assert(!dnsguard_sni_allowed(g, &sb1, &dst, IPPROTO_TCP, 443, "", T0 + 10, NULL));
	ck_assert(
	    !dnsguard_sni_allowed(g, &sb2, &dst, IPPROTO_TCP, 443, "pypi.org", T0 + 10, NULL));
	/* after reload without pypi.org, the learned name no longer counts */
	ck_assert(!dnsguard_sni_allowed(g, &sb1_reloaded, &dst, IPPROTO_TCP, 443, "pypi.org",
					T0 + 10, NULL));
	/* within grace, after expiry: the flow was admitted at its SYN */
	ck_assert(dnsguard_sni_allowed(g, &sb1, &dst, IPPROTO_TCP, 443, "pypi.org",
				       T0 + 300000 + 1000, NULL));
	ck_assert(
	    !dnsguard_sni_allowed(g, &sb1, &dst, IPPROTO_TCP, 443, "pypi.org", T0 + 360000, NULL));
}
END_TEST

START_TEST(learned_caps_evict_oldest_first)
{
	struct dnsguard_answer_res ar;
	struct dnsguard_stats st;
	char rr[80], ip[32];
	const char *rrs[2] = {rr, NULL};

	dnsguard_free(g);
	cfg.dns.learned_per_sandbox = 4;
	cfg.dns.learned_total = 6;
	guard_new();
	for (int i = 0; i < 6; i++) { /* agent-1 learns 6: the first 2 go */
		snprintf(rr, sizeof(rr), "pypi.org. 300 IN A 192.0.2.%d", 100 + i);
		ck_assert_int_eq(resolve(&sb1, (uint16_t)i, "pypi.org.", LDNS_RR_TYPE_A, rrs,
					 T0 + (uint64_t)i, &ar),
				 DNSG_ALLOW);
	}
	ck_assert(!flow_ok(&sb1, "192.0.2.100", 443, false, T0 + 10, NULL));
	ck_assert(!flow_ok(&sb1, "192.0.2.101", 443, false, T0 + 10, NULL));
	for (int i = 2; i < 6; i++) {
		snprintf(ip, sizeof(ip), "192.0.2.%d", 100 + i);
		ck_assert(flow_ok(&sb1, ip, 443, false, T0 + 10, NULL));
	}
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.learned_entries, 4);
	ck_assert_uint_eq(st.learned_evicted, 2);

	/* agent-2 learns 3 more: the total (6) evicts agent-1's oldest */
	for (int i = 0; i < 3; i++) {
		snprintf(rr, sizeof(rr), "pypi.org. 300 IN A 192.0.2.%d", 200 + i);
		ck_assert_int_eq(resolve(&sb2, (uint16_t)(50 + i), "pypi.org.", LDNS_RR_TYPE_A, rrs,
					 T0 + 20 + (uint64_t)i, &ar),
				 DNSG_ALLOW);
	}
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.learned_entries, 6);
	ck_assert_uint_eq(st.learned_evicted, 3);
	ck_assert(!flow_ok(&sb1, "192.0.2.102", 443, false, T0 + 30, NULL));
	ck_assert(flow_ok(&sb1, "192.0.2.103", 443, false, T0 + 30, NULL));
	ck_assert(flow_ok(&sb2, "192.0.2.200", 443, false, T0 + 30, NULL));

	dnsguard_prune(g, NULL); /* a policy with no sandboxes: forget all */
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.learned_entries, 0);
	ck_assert(!flow_ok(&sb2, "192.0.2.200", 443, false, T0 + 30, NULL));
}
END_TEST

START_TEST(learned_names_per_address_bounded)
{
	struct dnsguard_answer_res ar;
	struct pc_addr dst = dm_addr("192.0.2.90");
	char rr[96], q[64];
	const char *rrs[2] = {rr, NULL};

	for (int i = 0; i < 20; i++) {
		snprintf(q, sizeof(q), "h%d.githubusercontent.com.", i);
		snprintf(rr, sizeof(rr), "%s 300 IN A 192.0.2.90", q);
		ck_assert_int_eq(
		    resolve(&sb1, (uint16_t)i, q, LDNS_RR_TYPE_A, rrs, T0 + (uint64_t)i, &ar),
		    DNSG_ALLOW);
	}
	ck_assert_uint_eq(dnsguard_names(g, "agent-1", &dst, T0 + 30, NULL, 0), 16);
	ck_assert(!dnsguard_sni_allowed(g, &sb1, &dst, IPPROTO_TCP, 443, "h3.githubusercontent.com",
					T0 + 30, NULL));
	ck_assert(dnsguard_sni_allowed(g, &sb1, &dst, IPPROTO_TCP, 443, "h4.githubusercontent.com",
				       T0 + 30, NULL));
}
END_TEST

START_TEST(prune_keeps_only_sandboxes_of_the_policy)
{
	static const char yaml[] = "sandbox: agent-1\n"
				   "match: { source: 10.203.0.10/32 }\n"
				   "allow:\n"
				   "  - host: pypi.org\n"
				   "    ports: [443]\n";
	static const char *const rrs[] = {"pypi.org. 300 IN A 192.0.2.150", NULL};
	struct dnsguard_answer_res ar;
	struct dnsguard_stats st;
	struct policy *p = NULL;
	struct pc_err err;

	ck_assert_int_eq(policy_load_buffer("t.yaml", yaml, sizeof(yaml) - 1, &cfg, &p, &err), 0);
	ck_assert_int_eq(resolve(&sb1, 1, "pypi.org.", LDNS_RR_TYPE_A, rrs, T0, &ar), DNSG_ALLOW);
	ck_assert_int_eq(resolve(&sb2, 2, "pypi.org.", LDNS_RR_TYPE_A, rrs, T0, &ar), DNSG_ALLOW);
	dnsguard_prune(g, p);
	ck_assert(flow_ok(&sb1, "192.0.2.150", 443, false, T0, NULL));
	ck_assert(!flow_ok(&sb2, "192.0.2.150", 443, false, T0, NULL));
	/* the sandbox as the new policy compiled it (with its index) */
	ck_assert(
	    flow_ok(policy_sandbox_by_name(p, "agent-1"), "192.0.2.150", 443, false, T0, NULL));
	ck_assert(
	    !flow_ok(policy_sandbox_by_name(p, "agent-1"), "192.0.2.150", 80, false, T0, NULL));
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.learned_entries, 1);
	policy_unref(p);
}
END_TEST

START_TEST(bad_arguments_fail_closed)
{
	struct dnsguard_query_res qr;
	struct dnsguard_answer_res ar;
	struct dnsguard_flow_res fr;
	struct dnsguard *g2 = NULL;
	struct pc_addr a = dm_addr("192.0.2.1");
	struct pc_err err;
	uint8_t m[512];
	size_t n =
	    dm_wire(dm_query(1, "api.github.com.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN), m, sizeof(m));

	ck_assert_int_lt(dnsguard_query(NULL, &sb1, &qf, m, n, T0, &qr), 0);
	ck_assert_int_eq(qr.verdict, DNSG_DROP);
	ck_assert_int_lt(dnsguard_answer(NULL, &sb1, &qf, m, n, T0, &ar), 0);
	ck_assert_int_eq(ar.verdict, DNSG_DROP);
	ck_assert_int_eq(dnsguard_flow(NULL, &sb1, &a, IPPROTO_TCP, 443, false, T0, &fr), 0);
	ck_assert(!fr.allowed);
	ck_assert_int_eq(dnsguard_flow(g, NULL, &a, IPPROTO_TCP, 443, false, T0, &fr), 0);
	ck_assert(!fr.allowed);
	ck_assert(!dnsguard_sni_allowed(NULL, &sb1, &a, IPPROTO_TCP, 443, "pypi.org", T0, NULL));
	cfg.dns.ttl_min = 100;
	cfg.dns.ttl_max = 10;
	ck_assert_int_eq(dnsguard_new(&cfg, &g2, &err), PC_EINVAL);
	ck_assert_ptr_null(g2);
	cfg.dns.ttl_max = 1000;
	cfg.dns.learned_total = 0;
	ck_assert_int_eq(dnsguard_new(&cfg, &g2, &err), PC_EINVAL);
	ck_assert_ptr_null(g2);
	dnsguard_free(NULL);
}
END_TEST

/* The learned-address and pending-query tables hash what answers and
 * sandboxes choose (addresses, ids, ports) with SipHash under a key drawn
 * for each guard: another guard files the same bytes elsewhere. */
START_TEST(tables_hash_keyed)
{
	struct dnsguard *g2 = NULL;
	struct pc_err err;
	const uint8_t k[] = {4, 203, 0, 113, 10};

	ck_assert_int_eq(dnsguard_new(&cfg, &g2, &err), 0);
	ck_assert(dg_hash(g, k, sizeof(k)) != dg_hash(g2, k, sizeof(k)));
	ck_assert(dg_hash(g, k, sizeof(k)) == dg_hash(g, k, sizeof(k)));
	dnsguard_free(g2);
}
END_TEST

/* ---- deferred records: owed, never dropped ------------------------------ */

static enum dnsguard_verdict ask_defer(const struct policy_sandbox *sb, uint16_t id, uint64_t now,
				       struct dnsguard_query_res *r, bool *deferred)
{
	uint8_t m[512];
	size_t n =
	    dm_wire(dm_query(id, "api.github.com", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN), m, sizeof(m));

	/* as many sandboxes in the policy as give each a share of 4 */
	ck_assert_int_eq(
	    dnsguard_query_defer(g, sb, &qf, m, n, now, "sha256:p", DG_OWED_MAX / 4, r, deferred),
	    0);
	return r->verdict;
}

/* A sandbox owes at most its share of deferred records (DG_OWED_MAX over the
 * policy's sandboxes): past it a query is refused, with its own reason and a
 * REFUSED reply, and no record is dropped to make room (issue 30, item 4).
 * Another sandbox's share is its own; an answer, or records the log took
 * (dnsguard_owed_done), give the share back; records peeked but not done
 * (logd did not take them) stay owed and counted. */
START_TEST(owed_share_refuses_never_drops)
{
	static const char *const rrs[] = {"api.github.com. 300 IN A 203.0.113.10", NULL};
	struct dnsguard_query_res r;
	struct dnsguard_answer_res ar;
	struct dnsguard_owed o[16];
	struct dnsguard_stats st;
	struct dns_flow af = dm_reversed(&qf);
	uint8_t m[512];
	size_t n;
	bool d;

	for (uint16_t id = 1; id <= 4; id++) {
		ck_assert_int_eq(ask_defer(&sb1, id, T0, &r, &d), DNSG_ALLOW);
		ck_assert(d);
	}
	ck_assert_int_eq(ask_defer(&sb1, 5, T0, &r, &d), DNSG_REFUSE);
	ck_assert(!d);
	ck_assert_str_eq(r.reason, DNSG_OWED_REASON);
	ck_assert_str_eq(r.code, "dns_owed_quota");
	ldns_pkt_free(reply_check(&r, 5, LDNS_RCODE_REFUSED));
	/* sandbox 2 has a share of its own; refused past it with REFUSED
	 * although it answers refusals with NXDOMAIN: the name exists */
	for (uint16_t id = 1; id <= 4; id++)
		ck_assert_int_eq(ask_defer(&sb2, id, T0, &r, &d), DNSG_ALLOW);
	ck_assert_int_eq(ask_defer(&sb2, 5, T0, &r, &d), DNSG_REFUSE);
	ldns_pkt_free(reply_check(&r, 5, LDNS_RCODE_REFUSED));
	/* an answer carries its query's record: one more may be deferred */
	n = mkanswer(m, sizeof(m), 1, "api.github.com", LDNS_RR_TYPE_A, rrs);
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &af, m, n, T0, &ar), 0);
	ck_assert(ar.query_owed);
	ck_assert_int_eq(ask_defer(&sb1, 6, T0, &r, &d), DNSG_ALLOW);
	ck_assert_int_eq(ask_defer(&sb1, 7, T0, &r, &d), DNSG_REFUSE);
	/* unanswered, they move to the owed list: still owed, still counted */
	ck_assert_uint_eq(dnsguard_owed_peek(g, T0 + 10001, false, o, 16), 8);
	ck_assert_int_eq(ask_defer(&sb1, 7, T0 + 10001, &r, &d), DNSG_REFUSE);
	/* not taken by the log: the same eight again, none lost */
	ck_assert_uint_eq(dnsguard_owed_peek(g, T0 + 10001, false, o, 16), 8);
	ck_assert_str_eq(o[0].why, "no answer within 10 s");
	dnsguard_owed_done(g, 8);
	ck_assert_uint_eq(dnsguard_owed_peek(g, T0 + 10001, false, o, 16), 0);
	ck_assert_int_eq(ask_defer(&sb1, 7, T0 + 10001, &r, &d), DNSG_ALLOW);
	ck_assert(d);
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.owed_refused, 4);
}
END_TEST

/* An answer whose record logd did not take is dropped, but its query
 * left: the query's record is owed again (dnsguard_owed_again), on the
 * owed list with why and its pledge's id, and counted in its sandbox's
 * share again until it is in the log. */
START_TEST(owed_again_when_the_answers_record_is_not_taken)
{
	static const char *const rrs[] = {"api.github.com. 300 IN A 203.0.113.10", NULL};
	struct dnsguard_query_res r;
	struct dnsguard_answer_res ar;
	struct dnsguard_owed o[16];
	struct dns_flow af = dm_reversed(&qf);
	uint8_t m[512];
	uint64_t pledge;
	size_t n;
	bool d;

	for (uint16_t id = 1; id <= 4; id++)
		ck_assert_int_eq(ask_defer(&sb1, id, T0, &r, &d), DNSG_ALLOW);
	pledge = r.pledge; /* query 4's */
	ck_assert_uint_ne(pledge, 0);
	n = mkanswer(m, sizeof(m), 4, "api.github.com", LDNS_RR_TYPE_A, rrs);
	ck_assert_int_eq(dnsguard_answer(g, &sb1, &af, m, n, T0, &ar), 0);
	ck_assert(ar.query_owed);
	ck_assert_uint_eq(ar.query.pledge, pledge);
	/* the answer took it out of the share: one more may be deferred */
	ck_assert_int_eq(ask_defer(&sb1, 5, T0, &r, &d), DNSG_ALLOW);
	ck_assert_int_eq(ask_defer(&sb1, 6, T0, &r, &d), DNSG_REFUSE);
	ck_assert_int_eq(dnsguard_owed_again(g, &ar.query, "dropped"), 0);
	/* owed at once, and counted: a share of 4 holds five now */
	ck_assert_uint_eq(dnsguard_owed_peek(g, T0, false, o, 16), 1);
	ck_assert_str_eq(o[0].why, "dropped");
	ck_assert_str_eq(o[0].qname, "api.github.com");
	ck_assert_str_eq(o[0].sandbox, ar.query.sandbox);
	ck_assert_uint_eq(o[0].pledge, pledge);
	ck_assert_int_eq(o[0].client.port, ar.query.client.port);
	dnsguard_owed_done(g, 1);
	ck_assert_int_eq(ask_defer(&sb1, 6, T0, &r, &d), DNSG_REFUSE); /* still four */
	ck_assert_uint_eq(dnsguard_owed_peek(g, T0, true, o, 16), 4);
	dnsguard_owed_done(g, 4);
	ck_assert_int_eq(ask_defer(&sb1, 6, T0, &r, &d), DNSG_ALLOW);
}
END_TEST

/* A sandbox a reload removes leaves its owed records on the list; a
 * namesake added back later starts with a share of its own, and taking the
 * old records does not give the new one back what it never owed. */
START_TEST(owed_share_of_a_removed_sandbox)
{
	struct dnsguard_query_res r;
	struct dnsguard_owed o[16];
	bool d;

	for (uint16_t id = 1; id <= 4; id++)
		ck_assert_int_eq(ask_defer(&sb1, id, T0, &r, &d), DNSG_ALLOW);
	dnsguard_prune(g, NULL); /* a policy with no sandboxes */
	for (uint16_t id = 11; id <= 14; id++)
		ck_assert_int_eq(ask_defer(&sb1, id, T0, &r, &d), DNSG_ALLOW);
	ck_assert_uint_eq(dnsguard_owed_take(g, T0, false, o, 16), 4);
	ck_assert_str_eq(o[0].why, "sandbox removed by a reload");
	ck_assert_int_eq(ask_defer(&sb1, 15, T0, &r, &d), DNSG_REFUSE);
}
END_TEST

static Suite *dnsguard_suite(void)
{
	Suite *s = suite_create("dnsguard");
	TCase *q = tcase_create("queries"), *a = tcase_create("answers");

	tcase_add_checked_fixture(q, setup, teardown);
	PC_UNIT_TESTS(q, query_allowed_exact_name, tables_hash_keyed, query_name_case_insensitive,
		      query_hostname_table, query_wildcard_needs_a_label,
		      query_denied_name_gets_refused_reply, query_nxdomain_when_configured,
		      query_refusal_carries_extended_error, query_to_other_resolver_refused,
		      query_from_no_sandbox_refused, query_two_questions_refused,
		      query_txt_refused_by_default, query_class_chaos_refused,
		      query_with_qr_set_dropped, query_other_opcode_refused,
		      query_records_in_query_refused, query_edns_tricks_refused,
		      query_malformed_dropped_and_counted, query_odd_name_bytes_refused,
		      query_odd_name_shown_escaped_for_the_log, tsig_records_never_leak);
	suite_add_tcase(s, q);

	tcase_add_checked_fixture(a, setup, teardown);
	PC_UNIT_TESTS(
	    a, answer_learns_and_flow_allowed, answer_unsolicited_or_mismatched_dropped,
	    answer_from_sandbox_side_teaches_nothing, answer_cname_chain_learned_for_qname,
	    answer_cname_loop_and_long_chain_dropped, answer_ttl_clamped_expiry_and_grace,
	    answer_error_rcode_released_learns_nothing, answer_after_reload_learns_only_allowed,
	    answer_shared_address_names_and_sni, learned_caps_evict_oldest_first,
	    learned_names_per_address_bounded, prune_keeps_only_sandboxes_of_the_policy,
	    bad_arguments_fail_closed, owed_share_refuses_never_drops,
	    owed_share_of_a_removed_sandbox, owed_again_when_the_answers_record_is_not_taken);
	suite_add_tcase(s, a);
	return s;
}

PC_UNIT_MAIN(dnsguard_suite)
