/* libFuzzer target for the whole DNS guard path: a query from a sandbox is
 * judged, and if allowed the rest of the input is taken as the resolver's
 * answer (its id set to the query's so that the fuzzer gets past the
 * matching); what was learned is then asked about as the engine would.
 * Input: [flags][query length, 2 bytes][query][answer]. flags bit 0: TCP;
 * bits 1-2: sender (agent-1, agent-2, no sandbox, agent-1); bit 3: to an
 * address that is not a resolver; bits 4-7: seconds before the answer.
 * The policy is a small fixed one, loaded with policy_load_buffer. */
#include "dnsguard/dnsguard_int.h"
#include "rules/rules_int.h"

#include <ldns/ldns.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char policy_yaml[] =
    "- sandbox: agent-1\n"
    "  match: { source: 10.203.0.10/32 }\n"
    "  allow:\n"
    "    - host: api.github.com\n"
    "      ports: [443]\n"
    "    - host: \"*.githubusercontent.com\"\n"
    "      ports: [443]\n"
    "    - host: pypi.org\n"
    "      ports: [443, 80]\n"
    "  secrets:\n"
    "    - name: GITHUB_TOKEN\n"
    "      host: api.github.com\n"
    "- sandbox: agent-2\n"
    "  match: { source: 10.203.0.11/32 }\n"
    "  allow:\n"
    "    - host: pypi.org\n"
    "      ports: [443]\n"
    "  dns: { qtypes: [A, AAAA, TXT, HTTPS], refuse_with: nxdomain }\n";

/* Built once for the whole run (libFuzzer calls in from one thread). */
static struct config cfg;
static struct policy *pol;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct pc_err err;

	(void)argc;
	(void)argv;
	config_defaults(&cfg);
	if (pc_addr_parse("198.51.100.53", &cfg.dns.resolvers[0]) != 0)
		abort();
	cfg.dns.n_resolvers = 1;
	cfg.dns.learned_per_sandbox = 64;
	cfg.dns.learned_total = 96;
	if (policy_load_buffer("fuzz.yaml", policy_yaml, sizeof(policy_yaml) - 1, &cfg, &pol,
			       &err) != 0)
		abort();
	return 0;
}

static void check_reply(const struct dnsguard_query_res *r, const uint8_t *q)
{
	ldns_pkt *p = NULL;

	if (r->reply_len < 12 || r->reply_len > DNSG_REPLY_MAX ||
	    ldns_wire2pkt(&p, r->reply, r->reply_len) != LDNS_STATUS_OK)
		abort();
	if (!ldns_pkt_qr(p) || memcmp(r->reply, q, 2) != 0)
		abort();
	ldns_pkt_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct policy_sandbox *sb;
	struct dnsguard_query_res qr;
	struct dnsguard_answer_res ar;
	struct dns_flow qf = {0}, af;
	struct dnsguard *g;
	struct pc_err err;
	uint8_t flags, *ans = NULL;
	bool deferred = false;
	size_t qlen, alen;
	uint64_t now = 1000000;

	if (size < 3)
		return 0;
	flags = data[0];
	qlen = (size_t)data[1] << 8 | data[2];
	if (qlen > size - 3)
		qlen = size - 3;
	alen = size - 3 - qlen;
	switch ((flags >> 1) & 3) {
	case 1:
		sb = policy_sandbox_by_name(pol, "agent-2");
		break;
	case 2:
		sb = NULL;
		break;
	default:
		sb = policy_sandbox_by_name(pol, "agent-1");
	}
	qf.proto = (flags & 1) ? IPPROTO_TCP : IPPROTO_UDP;
	pc_addr_parse("10.203.0.10", &qf.src.addr);
	qf.src.port = 40000;
	pc_addr_parse((flags & 8) ? "192.0.2.99" : "198.51.100.53", &qf.dst.addr);
	qf.dst.port = 53;
	af.src = qf.dst;
	af.dst = qf.src;
	af.proto = qf.proto;

	if (dnsguard_new(&cfg, &g, &err) != 0)
		abort();
	/* the low bit of the length also chooses a deferred record */
	if (dnsguard_query_defer(g, sb, &qf, data + 3, qlen, now, (data[2] & 1) ? "sha256:x" : NULL,
				 1, &qr, &deferred) != 0 &&
	    qr.verdict != DNSG_DROP)
		abort(); /* an internal failure must fail closed */
	if (deferred && qr.verdict != DNSG_ALLOW)
		abort();
	if (qr.verdict == DNSG_REFUSE)
		check_reply(&qr, data + 3);
	/* The name shown in the log is printable ASCII without spaces, and
	 * only when there is no host name. */
	if (strnlen(qr.qname_shown, sizeof(qr.qname_shown)) >= sizeof(qr.qname_shown) ||
	    (qr.qname_shown[0] && qr.qname[0]))
		abort();
	for (const char *c = qr.qname_shown; *c; c++)
		if (*c <= ' ' || *c >= 0x7f)
			abort();
	if (qr.verdict != DNSG_REFUSE && qr.reply_len != 0)
		abort();
	if (qr.verdict == DNSG_ALLOW && alen >= 2) {
		ans = malloc(alen);
		if (!ans)
			goto out;
		memcpy(ans, data + 3 + qlen, alen);
		memcpy(ans, data + 3, 2); /* the query's id */
		now += (uint64_t)(flags >> 4) * 1000;
		if (dnsguard_answer(g, sb, &af, ans, alen, now, &ar) != 0 &&
		    ar.verdict != DNSG_DROP)
			abort();
		if (ar.rewritten) {
			ldns_pkt *p = NULL;

			if (ar.verdict != DNSG_ALLOW || ar.rewritten_len != alen ||
			    ldns_wire2pkt(&p, ar.rewritten, ar.rewritten_len) != LDNS_STATUS_OK)
				abort();
			ldns_pkt_free(p);
			free(ar.rewritten);
		}
		if (ar.verdict == DNSG_DROP && ar.n_learned)
			abort();
		if (ar.query_owed && (!deferred || strcmp(ar.query.policy, "sha256:x") != 0))
			abort(); /* only a deferred query's record is owed, once */
		if (ar.query_owed)
			deferred = false;
		for (size_t i = 0; i < ar.n_learned; i++) {
			struct dnsguard_flow_res fr;
			char names[512];

			dnsguard_flow(g, sb, &ar.learned[i], IPPROTO_TCP, 443, false, now, &fr);
			if (!fr.allowed && sb &&
			    policy_host_allows(sb, ar.qname, IPPROTO_TCP, 443, NULL))
				abort(); /* just learned for an allowed name */
			dnsguard_flow(g, sb, &ar.learned[i], IPPROTO_UDP, 80, true, now + 90000,
				      &fr);
			dnsguard_sni_allowed(g, sb, &ar.learned[i], IPPROTO_TCP, 443, ar.qname, now,
					     NULL);
			dnsguard_names(g, sb ? sb->name : "x", &ar.learned[i], now, names,
				       sizeof(names));
		}
		/* the same answer again matches nothing */
		if (dnsguard_answer(g, sb, &af, ans, alen, now, &ar) == 0 &&
		    ar.verdict == DNSG_ALLOW)
			abort();
		free(ar.rewritten);
	}
	{
		struct dnsguard_owed o[2];

		if (dnsguard_owed_take(g, now, true, o, 2) != (deferred ? 1u : 0u))
			abort(); /* an unanswered deferred query is owed its record */
	}
	dnsguard_prune(g, pol);
out:
	free(ans);
	dnsguard_free(g);
	return 0;
}
