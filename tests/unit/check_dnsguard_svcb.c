/* dnsguard unit tests for HTTPS/SVCB answers: the ech parameter is stripped
 * in place (same length, so TCP answers keep their framing), address hints
 * are learned only for the allowed name's chain, and bad parameter lists
 * drop the answer. Also: concurrent use from several threads. */
#include "dnsguard/dnsguard_int.h"
#include "rules/rules_int.h"
#include "tests/unit/dnsmsg.h"
#include "tests/unit/allow.h"
#include "tests/unit/unit.h"

#include <ldns/ldns.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define T0 5000000u
#define ECH                                                                                        \
	"ech=AEX+DQBBpQAgACDEbTPDr7zgN6ReSmn4cPJI4ZMPt+"                                           \
	"5vZhAeJwa0ZfvrBQAEAAEAAQASY2xvdWRmbGFyZS1lY2guY29tAAA="

static struct config cfg;
static struct dnsguard *g;
static struct policy_portrange p443[] = {{443, 443}};
static struct policy_allow allows[] = {
    UA_NAME(HOST, "api.github.com", p443, TCP, "t/allow[0]"),
    UA_NAME(WILDCARD, "example.org", p443, TCP, "t/allow[1]"),
};
static struct policy_sandbox sb = UA_SANDBOX("t", allows, 2, REFUSED);
static struct dns_flow qf, af;

static void setup(void)
{
	struct pc_err err;

	config_defaults(&cfg);
	cfg.dns.resolvers[0] = dm_addr("198.51.100.53");
	cfg.dns.n_resolvers = 1;
	dm_routable_testnets(&cfg);
	qf = dm_flow("10.203.0.10", 33333, "198.51.100.53", 53, IPPROTO_TCP);
	af = dm_reversed(&qf);
	ck_assert_int_eq(dnsguard_new(&cfg, &g, &err), 0);
}

static void teardown(void)
{
	dnsguard_free(g);
}

/* Ask (id, name, HTTPS) and build its answer with rrs in the answer
 * section and extra in the additional section. */
static size_t https_answer(uint8_t *m, size_t cap, uint16_t id, const char *name,
			   const char *const *rrs, const char *const *extra)
{
	struct dnsguard_query_res qr;
	uint8_t q[512];
	size_t n = dm_wire(dm_query(id, name, LDNS_RR_TYPE_HTTPS, LDNS_RR_CLASS_IN), q, sizeof(q));
	ldns_pkt *p;

	ck_assert_int_eq(dnsguard_query(g, &sb, &qf, q, n, T0, &qr), 0);
	ck_assert_int_eq(qr.verdict, DNSG_ALLOW);
	p = dm_query(id, name, LDNS_RR_TYPE_HTTPS, LDNS_RR_CLASS_IN);
	ldns_pkt_set_qr(p, true);
	for (const char *const *r = rrs; r && *r; r++)
		dm_push(p, LDNS_SECTION_ANSWER, *r);
	for (const char *const *r = extra; r && *r; r++)
		dm_push(p, LDNS_SECTION_ADDITIONAL, *r);
	return dm_wire(p, m, cap);
}

/* The guard's verdict on the answer m (n bytes), details in ar. */
static enum dnsguard_verdict answer(const uint8_t *m, size_t n, struct dnsguard_answer_res *ar)
{
	ck_assert_int_eq(dnsguard_answer(g, &sb, &af, m, n, T0, ar), 0);
	return ar->verdict;
}

/* The rdata of every HTTPS record of a message, as text. */
static void https_texts(const uint8_t *m, size_t n, char *out, size_t outlen)
{
	ldns_pkt *p;
	size_t o = 0;

	ck_assert_int_eq(ldns_wire2pkt(&p, m, n), LDNS_STATUS_OK);
	out[0] = '\0';
	for (int s = 0; s < 2; s++) {
		ldns_rr_list *l = s ? ldns_pkt_additional(p) : ldns_pkt_answer(p);

		for (size_t i = 0; i < ldns_rr_list_rr_count(l); i++) {
			ldns_rr *rr = ldns_rr_list_rr(l, i);
			char *t;

			if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_HTTPS)
				continue;
			t = ldns_rdf2str(ldns_rr_rdf(rr, 2));
			o += (size_t)snprintf(out + o, outlen - o, "%s|", t);
			free(t);
		}
	}
	ldns_pkt_free(p);
}

static bool flow_ok(const char *dst, uint64_t now)
{
	struct pc_addr a = dm_addr(dst);
	struct dnsguard_flow_res r;

	ck_assert_int_eq(dnsguard_flow(g, &sb, &a, IPPROTO_TCP, 443, false, now, &r), 0);
	return r.allowed;
}

START_TEST(https_ech_stripped_same_length_hints_learned)
{
	static const char *const rrs[] = {
	    "api.github.com. 300 IN HTTPS 1 . alpn=h2 ipv4hint=192.0.2.1,192.0.2.2 " ECH
	    " ipv6hint=2001:db8::1",
	    NULL};
	struct dnsguard_answer_res ar;
	struct dnsguard_stats st;
	uint8_t m[2048];
	char txt[1024];
	size_t n = https_answer(m, sizeof(m), 1, "api.github.com.", rrs, NULL);

	ck_assert_int_eq(answer(m, n, &ar), DNSG_ALLOW);
	ck_assert_ptr_nonnull(ar.rewritten);
	ck_assert_uint_eq(ar.rewritten_len, n);
	https_texts(ar.rewritten, ar.rewritten_len, txt, sizeof(txt));
	ck_assert_ptr_null(strstr(txt, "ech="));
	ck_assert_ptr_nonnull(
	    strstr(txt, "alpn=h2 ipv4hint=192.0.2.1,192.0.2.2 ipv6hint=2001:db8::1 key65534="));
	/* the original message is untouched */
	https_texts(m, n, txt, sizeof(txt));
	ck_assert_ptr_nonnull(strstr(txt, "ech="));
	free(ar.rewritten);
	ck_assert_uint_eq(ar.n_learned, 3);
	ck_assert(flow_ok("192.0.2.1", T0));
	ck_assert(flow_ok("192.0.2.2", T0));
	ck_assert(flow_ok("2001:db8::1", T0));
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.ech_stripped, 1);
}
END_TEST

START_TEST(https_mandatory_ech_removed_from_list)
{
	static const char *const rrs[] = {
	    "a.example.org. 300 IN HTTPS 1 . mandatory=alpn,ech alpn=h2 " ECH,
	    "a.example.org. 300 IN HTTPS 2 . mandatory=ech " ECH " port=8443", NULL};
	struct dnsguard_answer_res ar;
	uint8_t m[2048];
	char txt[1024];
	size_t n = https_answer(m, sizeof(m), 2, "a.example.org.", rrs, NULL);

	ck_assert_int_eq(answer(m, n, &ar), DNSG_ALLOW);
	ck_assert_ptr_nonnull(ar.rewritten);
	https_texts(ar.rewritten, ar.rewritten_len, txt, sizeof(txt));
	ck_assert_ptr_null(strstr(txt, "ech"));
	ck_assert_ptr_nonnull(strstr(txt, "mandatory=alpn alpn=h2 key65534="));
	ck_assert_ptr_nonnull(strstr(txt, "|port=8443 key65534="));
	free(ar.rewritten);
}
END_TEST

START_TEST(https_hints_only_for_the_allowed_chain)
{
	static const char *const rrs[] = {"api.github.com. 300 IN CNAME svc.example.net.",
					  "svc.example.net. 300 IN HTTPS 1 . ipv4hint=192.0.2.10",
					  "evil.example. 300 IN HTTPS 1 . ipv4hint=192.0.2.11 " ECH,
					  NULL};
	static const char *const extra[] = {
	    "other.example. 300 IN HTTPS 1 . ipv4hint=192.0.2.12 " ECH, NULL};
	struct dnsguard_answer_res ar;
	uint8_t m[2048];
	char txt[1024];
	size_t n = https_answer(m, sizeof(m), 3, "api.github.com.", rrs, extra);

	ck_assert_int_eq(answer(m, n, &ar), DNSG_ALLOW);
	ck_assert_uint_eq(ar.n_learned, 1);
	ck_assert(flow_ok("192.0.2.10", T0));
	ck_assert(!flow_ok("192.0.2.11", T0));
	ck_assert(!flow_ok("192.0.2.12", T0));
	/* ech is stripped wherever it is, learned or not */
	ck_assert_ptr_nonnull(ar.rewritten);
	https_texts(ar.rewritten, ar.rewritten_len, txt, sizeof(txt));
	ck_assert_ptr_null(strstr(txt, "ech="));
	free(ar.rewritten);
}
END_TEST

START_TEST(https_without_ech_unchanged)
{
	static const char *const rrs[] = {"api.github.com. 60 IN HTTPS 1 . alpn=h2,h3", NULL};
	struct dnsguard_answer_res ar;
	uint8_t m[2048];
	size_t n = https_answer(m, sizeof(m), 4, "api.github.com.", rrs, NULL);

	ck_assert_int_eq(answer(m, n, &ar), DNSG_ALLOW);
	ck_assert_ptr_null(ar.rewritten);
	ck_assert_uint_eq(ar.n_learned, 0);
}
END_TEST

START_TEST(https_bad_params_drop_the_answer)
{
	static const char *const rrs[] = {
	    "api.github.com. 60 IN HTTPS 1 . alpn=h2 ipv4hint=192.0.2.5", NULL};
	static const char *const pad[] = {"api.github.com. 60 IN HTTPS 1 . " ECH " key65534=x",
					  NULL};
	struct dnsguard_answer_res ar;
	uint8_t m[2048], bad[2048];
	size_t n = https_answer(m, sizeof(m), 5, "api.github.com.", rrs, NULL);
	size_t at = n - 8; /* the ipv4hint key: 2 key, 2 length, 4 address */

	ck_assert_uint_eq(m[at], 0);
	ck_assert_uint_eq(m[at + 1], 4);
	/* keys out of order: alpn (1) after ipv4hint (4) */
	memcpy(bad, m, n);
	bad[at + 1] = 0;
	ck_assert_int_eq(answer(bad, n, &ar), DNSG_DROP);
	/* a value running past the record */
	memcpy(bad, m, n);
	bad[at + 3] = 5;
	ck_assert_int_eq(answer(bad, n, &ar), DNSG_DROP);
	ck_assert(!flow_ok("192.0.2.5", T0));
	/* the intact answer still matches its query */
	ck_assert_int_eq(answer(m, n, &ar), DNSG_ALLOW);
	ck_assert(flow_ok("192.0.2.5", T0));
	/* ech cannot be replaced when the padding key is taken: dropped */
	n = https_answer(m, sizeof(m), 6, "api.github.com.", pad, NULL);
	ck_assert_int_eq(answer(m, n, &ar), DNSG_DROP);
	ck_assert_ptr_null(ar.rewritten);
}
END_TEST

/* ---- threads ------------------------------------------------------------- */

#define TH_N	4
#define TH_ITER 400

struct th_arg {
	int idx;
	struct policy_sandbox sb;
	unsigned released, refused;
};

static void *th_run(void *p)
{
	struct th_arg *a = p;
	struct dns_flow q = qf, r;

	q.proto = IPPROTO_UDP;
	q.src.port = (uint16_t)(20000 + a->idx);
	r = dm_reversed(&q);
	for (int i = 0; i < TH_ITER; i++) {
		struct dnsguard_query_res qr;
		struct dnsguard_answer_res ar;
		struct dnsguard_flow_res fr;
		char name[64], rr[128], names[512];
		struct pc_addr dst = {.family = AF_INET, .a = {192, 0, (uint8_t)a->idx, 0}};
		uint8_t m[512];
		size_t n;
		ldns_pkt *pk;
		ldns_rr *x;

		dst.a[3] = (uint8_t)i;
		snprintf(name, sizeof(name), "h%d.example.org.", i % 50);
		snprintf(rr, sizeof(rr), "%s 300 IN A 192.0.%d.%d", name, a->idx, i % 256);
		n = dm_wire(dm_query((uint16_t)i, name, LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN), m,
			    sizeof(m));
		ck_assert_int_eq(dnsguard_query(g, &a->sb, &q, m, n, T0 + (uint64_t)i, &qr), 0);
		ck_assert_int_eq(qr.verdict, DNSG_ALLOW);
		pk = dm_query((uint16_t)i, name, LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
		ldns_pkt_set_qr(pk, true);
		ck_assert_int_eq(ldns_rr_new_frm_str(&x, rr, 0, NULL, NULL), LDNS_STATUS_OK);
		ldns_pkt_push_rr(pk, LDNS_SECTION_ANSWER, x);
		n = dm_wire(pk, m, sizeof(m));
		ck_assert_int_eq(dnsguard_answer(g, &a->sb, &r, m, n, T0 + (uint64_t)i, &ar), 0);
		a->released += ar.verdict == DNSG_ALLOW;
		ck_assert_int_eq(
		    dnsguard_flow(g, &a->sb, &dst, IPPROTO_TCP, 443, false, T0 + (uint64_t)i, &fr),
		    0);
		(void)dnsguard_sni_allowed(g, &a->sb, &dst, IPPROTO_TCP, 443, name,
					   T0 + (uint64_t)i, NULL);
		(void)dnsguard_names(g, a->sb.name, &dst, T0 + (uint64_t)i, names, sizeof(names));
		n = dm_wire(
		    dm_query((uint16_t)i, "evil.example.", LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN), m,
		    sizeof(m));
		ck_assert_int_eq(dnsguard_query(g, &a->sb, &q, m, n, T0, &qr), 0);
		a->refused += qr.verdict == DNSG_REFUSE;
	}
	return NULL;
}

START_TEST(threads_share_one_guard)
{
	struct th_arg args[TH_N];
	pthread_t th[TH_N];
	struct dnsguard_stats st;
	struct pc_err err;

	dnsguard_free(g);
	cfg.dns.learned_per_sandbox = 300;
	cfg.dns.learned_total = 700;
	ck_assert_int_eq(dnsguard_new(&cfg, &g, &err), 0);
	for (int i = 0; i < TH_N; i++) {
		memset(&args[i], 0, sizeof(args[i]));
		args[i].idx = i;
		args[i].sb = sb;
		/* two threads share a sandbox, the others have their own */
		snprintf(args[i].sb.name, sizeof(args[i].sb.name), "sb%d", i < 2 ? 0 : i);
		ck_assert_int_eq(pthread_create(&th[i], NULL, th_run, &args[i]), 0);
	}
	for (int i = 0; i < TH_N; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_uint_eq(args[i].released, TH_ITER);
		ck_assert_uint_eq(args[i].refused, TH_ITER);
	}
	dnsguard_stats(g, &st);
	ck_assert_uint_eq(st.queries_allowed, TH_N * TH_ITER);
	ck_assert_uint_eq(st.answers_released, TH_N * TH_ITER);
	ck_assert_uint_le(st.learned_entries, 700);
	ck_assert_uint_gt(st.learned_evicted, 0);
	ck_assert_uint_eq(st.pending_queries, 0);
}
END_TEST

static Suite *svcb_suite(void)
{
	Suite *s = suite_create("dnsguard_svcb");
	TCase *h = tcase_create("https"), *t = tcase_create("threads");

	tcase_add_checked_fixture(h, setup, teardown);
	PC_UNIT_TESTS(h, https_ech_stripped_same_length_hints_learned,
		      https_mandatory_ech_removed_from_list, https_hints_only_for_the_allowed_chain,
		      https_without_ech_unchanged, https_bad_params_drop_the_answer);
	suite_add_tcase(s, h);
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 120);
	tcase_add_test(t, threads_share_one_guard);
	suite_add_tcase(s, t);
	return s;
}

PC_UNIT_MAIN(svcb_suite)
