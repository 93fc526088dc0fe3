/* dnsguard fails closed when memory runs out: with the data size limited
 * (RLIMIT_DATA), queries and answers keep coming until allocations fail;
 * every answer that was released must have been learned, and none that
 * failed may have taught anything. Skipped under AddressSanitizer, whose
 * shadow memory does not live with a data limit. */
#include "dnsguard/dnsguard_int.h"
#include "rules/rules_int.h"
#include "tests/unit/dnsmsg.h"
#include "tests/unit/allow.h"
#include "tests/unit/unit.h"

#include <ldns/ldns.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#if defined(__SANITIZE_ADDRESS__)
#define PC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PC_ASAN 1
#endif
#endif

#define N_MAX 100000

/* Built before the limit is set: the test itself must not need memory. */
static uint8_t qbuf[N_MAX][128], abuf[N_MAX][128];
static size_t qlen[N_MAX], alen[N_MAX];
static uint8_t ans_ok[N_MAX]; /* 1 released, 2 dropped, 0 not asked */

static long vm_data_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmData: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static size_t mkmsg(uint8_t *m, size_t cap, uint16_t id, const char *name, const char *rr)
{
	ldns_pkt *p = dm_query(id, name, LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);

	if (rr) {
		ldns_pkt_set_qr(p, true);
		dm_push(p, LDNS_SECTION_ANSWER, rr);
	}
	return dm_wire(p, m, cap);
}

/* Ordinary unicast (11/8): 10/8 would be special-purpose and never learned. */
static struct pc_addr addr_of(unsigned i)
{
	struct pc_addr a = {.family = AF_INET,
			    .a = {11, (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i}};
	return a;
}

START_TEST(out_of_memory_fails_closed)
{
	static struct policy_portrange p443[] = {{443, 443}};
	static struct policy_allow al[] = {UA_NAME(WILDCARD, "example.org", p443, TCP, "")};
	struct policy_sandbox sb = {
	    .name = "oom", .allow = al, .n_allow = 1, .dns_qtypes = QT_DEFAULT};
	struct config cfg;
	struct dnsguard *g;
	struct pc_err err;
	struct dns_flow qf = {0}, af;
	struct rlimit old, lim;
	unsigned i, fails = 0, released = 0, last = 0;
	bool violated = false;

#ifdef PC_ASAN
	return; /* see the file comment */
#endif
	config_defaults(&cfg);
	ck_assert_int_eq(pc_addr_parse("198.51.100.53", &cfg.dns.resolvers[0]), 0);
	cfg.dns.n_resolvers = 1;
	dm_routable_testnets(&cfg);
	cfg.dns.learned_per_sandbox = 10000000;
	cfg.dns.learned_total = 10000000;
	ck_assert_int_eq(dnsguard_new(&cfg, &g, &err), 0);
	qf = dm_flow("10.203.0.10", 40000, "198.51.100.53", 53, IPPROTO_UDP);
	af = dm_reversed(&qf);

	for (i = 0; i < N_MAX; i++) {
		struct pc_addr a = addr_of(i);
		char name[64], rr[128], ip[20];

		snprintf(name, sizeof(name), "h%u.example.org.", i);
		pc_addr_str(&a, ip, sizeof(ip));
		snprintf(rr, sizeof(rr), "%s 300 IN A %s", name, ip);
		qlen[i] = mkmsg(qbuf[i], sizeof(qbuf[i]), (uint16_t)i, name, NULL);
		alen[i] = mkmsg(abuf[i], sizeof(abuf[i]), (uint16_t)i, name, rr);
	}
	ck_assert_int_eq(getrlimit(RLIMIT_DATA, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)(vm_data_kb() + 2048) * 1024;
	ck_assert_int_eq(setrlimit(RLIMIT_DATA, &lim), 0);
	for (i = 0; i < N_MAX && fails < 200; i++) {
		struct dnsguard_query_res qr;
		struct dnsguard_answer_res ar;
		int rc;

		rc = dnsguard_query(g, &sb, &qf, qbuf[i], qlen[i], 1000, &qr);
		if (rc < 0 && qr.verdict != DNSG_DROP) {
			violated = true;
			break;
		}
		if (qr.verdict != DNSG_ALLOW) {
			fails++;
			continue;
		}
		rc = dnsguard_answer(g, &sb, &af, abuf[i], alen[i], 1000, &ar);
		ans_ok[i] = ar.verdict == DNSG_ALLOW ? 1 : 2;
		if (rc < 0 && ar.verdict != DNSG_DROP) {
			violated = true;
			break;
		}
		if (ar.verdict == DNSG_ALLOW)
			released++;
		else
			fails++;
		free(ar.rewritten);
	}
	last = i;
	ck_assert_int_eq(setrlimit(RLIMIT_DATA, &old), 0);

	ck_assert(!violated);
	ck_assert_uint_gt(fails, 0); /* memory did run out */
	ck_assert_uint_gt(released, 0);
	for (i = 0; i < last; i++) {
		struct pc_addr a = addr_of(i);
		struct dnsguard_flow_res fr;

		if (!ans_ok[i])
			continue;
		ck_assert_int_eq(dnsguard_flow(g, &sb, &a, IPPROTO_TCP, 443, false, 2000, &fr), 0);
		ck_assert_msg(fr.allowed == (ans_ok[i] == 1), "answer %u: released %d, flow %d", i,
			      ans_ok[i] == 1, fr.allowed);
	}
	dnsguard_free(g);
}
END_TEST

PC_UNIT_SUITE("dnsguard_oom", "oom", 120, out_of_memory_fails_closed)
