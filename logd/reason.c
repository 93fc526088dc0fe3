/* event.code: the stable code of every reason a record can give (the
 * reasons themselves are prose and may be reworded). One table, used by
 * the record writer and by the engine's metrics; docs/logd.md ("Event
 * codes") lists it, and check_logd_ecs checks the two agree. */
#include "logd/logd.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* The codes, each once; index = logrec_reason_index(). The last two are
 * not in the prefix table: "protocol" ("<protocol> is never allowed") and
 * "other" (a reason no prefix knows: a bug the unit check catches). */
static const char *const codes[LOGREC_REASON_CODES] = {
    "cidr",
    "vault",
    "server_name",
    "host_not_tls",
    "host",
    "dns_name",
    "resolved_name",
    "not_a_sandbox",
    "unknown_port",
    "sandbox_to_sandbox",
    "not_allowed",
    "not_resolved",
    "port_not_allowed",
    "no_connection",
    "tcp_fast_open",
    "held_quota",
    "held_full",
    "held_mismatch",
    "held_unacknowledged",
    "held_inconsistent",
    "tls_timeout",
    "tls_no_server_name",
    "tls_malformed",
    "dns_name_not_allowed",
    "dns_type",
    "dns_resolver",
    "dns_not_host_name",
    "dns_tcp_quota",
    "dns_malformed",
    "fragment",
    "malformed",
    "internal_error",
    "dns_answer_dropped",
    "dns_answer_not_from_resolver",
    "dns_answer_malformed",
    "dns_answer_unasked",
    "dns_answer_released",
    "cut_by_reload",
    "policy_loaded",
    "policy_rejected",
    "guard_reinstalled",
    "guard_not_reinstalled",
    "containment_proven",
    "containment_not_proven",
    "containment_check_failed",
    /* the vault's refusals, each its own (issue 18): set by the vault
     * where it refuses, never derived from its prose */
    "vault_not_redirected",
    "vault_connection_limit",
    "vault_no_worker",
    "vault_not_allowed",
    "vault_certificate_failed",
    "vault_bad_request",
    "vault_head_too_large",
    "vault_request_timeout",
    "vault_sandbox_gone",
    "vault_upstream_failed",
    "vault_placeholder_in_url",
    "vault_placeholder_in_body",
    "vault_placeholder_in_websocket",
    "vault_placeholder_wrong_header",
    "vault_placeholder_not_format",
    "vault_secret_not_bound",
    "vault_secret_wrong_host",
    "vault_two_secrets",
    "vault_method_reflects",
    "vault_method_not_allowed",
    "vault_method_override",
    "vault_host_mismatch",
    "vault_inject_too_large",
    "vault_websocket_malformed",
    "new_flow_limit",	 /* flood (issue 20) */
    "tcp_urgent",	 /* issue 30: urgent data on a stream judged by its bytes */
    "dns_tcp_overlap",	 /* issue 30: overlapping bytes that differ, data after FIN */
    "dns_tcp_no_stream", /* issue 30: DNS over TCP the guard did not see open */
    /* issue 36: a sandbox left the policy; not a refusal */
    "sandbox_flows_ended",
    "dns_owed_quota", /* issue 30: the sandbox owes its share of deferred records */
    "tcp_mptcp",      /* MPTCP in a SYN of a stream judged by its bytes */
    "tls_ech",	      /* a ClientHello with Encrypted Client Hello (or ESNI) */
    "protocol",
    "other",
};

/* Reason by its start (decide.c, dnsguard, vault): first match wins, so
 * a longer prefix goes before a shorter one it begins with. */
#define P(s) s, sizeof(s) - 1
static const struct {
	const char *prefix;
	size_t len; /* strlen(prefix): the table is read for every record */
	const char *code;
} prefixes[] = {
    /* allowed */
    {P("name allowed; its answer dropped"), "dns_answer_dropped"},
    {P("allowed address"), "cidr"},
    {P("allowed host; secret-bound"), "vault"},
    {P("allowed host; TLS server name checked"), "server_name"},
    {P("allowed host (not TLS"), "host_not_tls"},
    {P("allowed host"), "host"},
    {P("name allowed"), "dns_name"},
    {P("resolved name allowed"), "resolved_name"},
    /* refused: who is asking */
    {P("not a sandbox"), "not_a_sandbox"},
    {P("sender is not a sandbox"), "not_a_sandbox"},
    {P("packet from an unknown bridge port"), "unknown_port"},
    {P("sandboxes may not reach each other"), "sandbox_to_sandbox"},
    /* refused: where to */
    {P("not on the allow list"), "not_allowed"},
    {P("no allowed name resolved to this address"), "not_resolved"},
    {P("names resolved to this address are not allowed on this port"), "port_not_allowed"},
    {P("TCP segment of no connection"), "no_connection"},
    {P("data in a SYN"), "tcp_fast_open"},
    {P("TCP urgent data"), "tcp_urgent"},
    {P("MPTCP in a SYN"), "tcp_mptcp"},
    {P("too many connections of this sandbox waiting"), "held_quota"},
    {P("too many connections waiting"), "held_full"},
    {P("held flow no longer matches"), "held_mismatch"},
    {P("held flow: the server did not acknowledge"), "held_unacknowledged"},
    {P("held flow: "), "held_inconsistent"},
    {P("the held flow's host is no longer allowed"), "held_mismatch"},
    /* refused: TLS server name */
    {P("no TLS ClientHello within"), "tls_timeout"},
    {P("TLS server name "), "server_name"},
    {P("TLS ClientHello without a server name"), "tls_no_server_name"},
    {P("malformed TLS ClientHello"), "tls_malformed"},
    {P("TLS ClientHello with Encrypted Client Hello"), "tls_ech"},
    {P("TLS ClientHello"), "tls_malformed"},
    /* refused: DNS */
    {P("name not on the allow list"), "dns_name_not_allowed"},
    {P("query type not permitted"), "dns_type"},
    {P("not to a configured resolver"), "dns_resolver"},
    {P("DNS over TCP to a resolver"), "dns_resolver"},
    {P("name is not a host name"), "dns_not_host_name"},
    {P("DNS over TCP: the sandbox's quota"), "dns_tcp_quota"},
    {P("DNS over TCP: bytes overlap"), "dns_tcp_overlap"},
    {P("DNS over TCP: no stream"), "dns_tcp_no_stream"},
    {P("DNS: the sandbox's share of queries awaiting"), "dns_owed_quota"},
    {P("DNS over TCP"), "dns_malformed"},
    {P("DNS message larger"), "dns_malformed"},
    {P("malformed query"), "dns_malformed"},
    {P("a response, not a query"), "dns_malformed"},
    /* refused: the packet itself, the guard itself */
    {P("IP fragment"), "fragment"},
    {P("malformed packet"), "malformed"},
    {P("DNS guard error"), "internal_error"},
    {P("internal error"), "internal_error"},
    {P("out of memory"), "internal_error"},
    /* DNS answers (the guard drops what it cannot vouch for) */
    {P("receiver is not a sandbox"), "not_a_sandbox"},
    {P("not from a configured resolver"), "dns_answer_not_from_resolver"},
    {P("malformed answer"), "dns_answer_malformed"},
    {P("not a response to one question"), "dns_answer_malformed"},
    {P("DNS answer "), "dns_answer_malformed"},
    {P("cannot strip ech"), "dns_answer_malformed"},
    {P("question is not one an allowed query asked"), "dns_answer_unasked"},
    {P("matches no outstanding query"), "dns_answer_unasked"},
    {P("answered without a request"), "dns_answer_unasked"},
    {P("answer released"), "dns_answer_released"},
    /* flows the engine ends, and the engine's own records */
    {P("cut by reload"), "cut_by_reload"},
    {P("sandbox left the policy"), "sandbox_flows_ended"},
    {P("policy in force"), "policy_loaded"},
    {P("policy rejected"), "policy_rejected"},
    {P("guard reinstalled"), "guard_reinstalled"},
    {P("guard changed by another program"), "guard_not_reinstalled"},
    {P("containment proven"), "containment_proven"},
    {P("containment not proven"), "containment_not_proven"},
    {P("containment check could not run"), "containment_check_failed"},
    {P("over the sandbox's new-flow limit"), "new_flow_limit"},
};
#undef P

/* Every record logd takes carries a code, looked up twice (the decoder
 * checks it is one of these, the writer turns it back into text): a scan
 * of the table was 5-20 % of the time to format a record. An open-
 * addressing table of the codes' FNV-1a hashes, built once. */
#define CODE_SLOTS 256 /* a power of two, over three times the codes */
_Static_assert(LOGREC_REASON_CODES * 3 < CODE_SLOTS && LOGREC_REASON_CODES < 255,
	       "the code table stays sparse and its indices fit a byte");
static uint8_t code_slot[CODE_SLOTS]; /* index + 1; 0: empty */
static pthread_once_t code_once = PTHREAD_ONCE_INIT;

static uint32_t code_hash(const char *s)
{
	uint32_t h = PC_FNV1A_INIT;

	for (; *s; s++)
		h = pc_fnv1a_step(h, (unsigned char)*s);
	return h;
}

static void code_slots_fill(void)
{
	for (int i = 0; i < LOGREC_REASON_CODES; i++) {
		uint32_t h = code_hash(codes[i]);

		while (code_slot[h & (CODE_SLOTS - 1)])
			h++;
		code_slot[h & (CODE_SLOTS - 1)] = (uint8_t)(i + 1);
	}
}

int logrec_code_index(const char *code)
{
	uint32_t h;

	if (!code)
		return -1;
	pthread_once(&code_once, code_slots_fill);
	for (h = code_hash(code); code_slot[h & (CODE_SLOTS - 1)]; h++) {
		int i = code_slot[h & (CODE_SLOTS - 1)] - 1;

		if (strcmp(codes[i], code) == 0)
			return i;
	}
	return -1;
}

static int code_index(const char *code)
{
	int i = logrec_code_index(code);

	return i >= 0 ? i : LOGREC_REASON_CODES - 1;
}

/* The sender's own code when it gave one (where it decided); the prefix
 * table is the fallback, for clients that predate the field. */
int logrec_event_code_index(const struct logrec *rec)
{
	int i = rec->code && *rec->code ? logrec_code_index(rec->code) : -1;

	return i >= 0 ? i : logrec_reason_index(rec->reason);
}

/* What a held flow's bytes were when it was refused: the spec's rows
 * H1-H13a by what they look at, in words an auditor reads. */
const char *const logrec_held_names[LOGREC_HELD_CLASSES] = {
    "client-hello",	    /* a whole ClientHello naming tls.client.server_name (H11) */
    "client-hello-no-name", /* a whole ClientHello without server_name (H11) */
    "tls-malformed",	    /* another TLS record first, SSLv2, or a bad handshake (H11) */
    "too-large",	    /* more than 16 KiB before a whole ClientHello (H11) */
    "not-tls",		    /* not TLS, to an address no longer host-allowed (H11) */
    "urgent",		    /* URG or an urgent pointer (H2a) */
    "another-isn",	    /* a SYN with another ISN (H6) */
    "bytes-differ",	    /* bytes sent again that differ from the judged ones (H8) */
    "fin",		    /* a FIN inside the judged bytes, data past the FIN (H8) */
    "before-start",	    /* data before ISN + 1 (H9) */
    "before-accept",	    /* data before the server's SYN-ACK (H7) */
    "hello-retry",	    /* the server's HelloRetryRequest (H13a) */
    "timeout",		    /* not promoted within engine.sni_timeout_ms (H2) */
    "sandbox-changed",	    /* its sandbox no longer matches the sender (H1) */
    "no-longer-allowed",    /* judged again at the promotion, refused (H13) */
    "mptcp",		    /* a SYN sent again with MPTCP (H5a) */
};

int logrec_held_index(const char *name)
{
	for (int i = 0; name && i < LOGREC_HELD_CLASSES; i++)
		if (strcmp(logrec_held_names[i], name) == 0)
			return i;
	return -1;
}

bool logrec_dns_rcode_known(const char *rcode)
{
	static const char *const names[] = {"NOERROR",	"FORMERR", "SERVFAIL",
					    "NXDOMAIN", "NOTIMP",  "REFUSED"};

	for (size_t i = 0; rcode && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(names[i], rcode) == 0)
			return true;
	return false;
}

int logrec_reason_index(const char *reason)
{
	size_t n = strlen(reason ? reason : "");

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = prefixes[i].len;

		if (n >= pl && memcmp(reason, prefixes[i].prefix, pl) == 0)
			return code_index(prefixes[i].code);
	}
	if (n && strstr(reason, " is never allowed"))
		return LOGREC_REASON_CODES - 2;
	return LOGREC_REASON_CODES - 1;
}

const char *logrec_reason_code_at(int i)
{
	return i >= 0 && i < LOGREC_REASON_CODES ? codes[i] : "other";
}

const char *logrec_reason_code(const char *reason)
{
	return codes[logrec_reason_index(reason)];
}
