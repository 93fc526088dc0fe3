/* The record as a JSON line with Elastic Common Schema field names: the
 * mapping of actions and verdicts to event.kind/category/type/outcome is
 * documented in docs/logd.md ("Record fields"). */
#include "logd/logd_int.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static const char *const action_names[LOGREC_ACTION_MAX] = {
    [LOGREC_CONNECT] = "connect",
    [LOGREC_DNS_QUERY] = "dns-query",
    [LOGREC_DNS_LEARN] = "dns-learn",
    [LOGREC_HTTP_REQUEST] = "http-request",
    [LOGREC_EXFIL] = "exfiltration",
    [LOGREC_CERT_ISSUE] = "cert-issue",
    [LOGREC_POLICY_LOAD] = "policy-load",
    [LOGREC_SANDBOX] = "sandbox",
    [LOGREC_CHECK] = "check",
    [LOGREC_SEGMENT] = "log-segment",
};

const char *logrec_action_name(enum logrec_action a)
{
	if (a < 1 || a >= LOGREC_ACTION_MAX)
		return "unknown";
	return action_names[a];
}

const char *logrec_verdict_name(enum logrec_verdict v)
{
	switch (v) {
	case LOGREC_ALLOWED:
		return "allowed";
	case LOGREC_REFUSED:
		return "refused";
	default:
		return "none";
	}
}

static const char *const sender_names[LOGREC_SENDER_MAX] = {
    [LOGREC_SENDER_ENGINE] = "engine",
    [LOGREC_SENDER_VAULT] = "vault",
    [LOGREC_SENDER_ROOT] = "root",
    [LOGREC_SENDER_LOGD] = "logd",
};

const char *logrec_sender_name(enum logrec_sender s)
{
	if (s <= LOGREC_SENDER_NONE || s >= LOGREC_SENDER_MAX)
		return NULL;
	return sender_names[s];
}

/* Which sender may write which action (docs/logd.md, "Who may write"):
 * each process writes what it decides, so a compromised one cannot put
 * words in another's mouth. The vault refuses connections itself (not
 * redirected, over its limit) and says so as connect records, but only
 * refusals: an allowed flow is the engine's word alone. Root may write
 * anything a client may (it can read the signing key: refusing it would
 * protect nothing); log-segment is logd's own. */
#define A(x) (1u << (x))
static const unsigned sender_actions[LOGREC_SENDER_MAX] = {
    [LOGREC_SENDER_ENGINE] = A(LOGREC_CONNECT) | A(LOGREC_DNS_QUERY) | A(LOGREC_DNS_LEARN) |
			     A(LOGREC_POLICY_LOAD) | A(LOGREC_CHECK),
    [LOGREC_SENDER_VAULT] = A(LOGREC_HTTP_REQUEST) | A(LOGREC_EXFIL) | A(LOGREC_CONNECT),
    [LOGREC_SENDER_ROOT] = ((A(LOGREC_ACTION_MAX) - 1) & ~A(0)) & ~A(LOGREC_SEGMENT),
    [LOGREC_SENDER_LOGD] = A(LOGREC_SEGMENT),
};
#undef A

bool logrec_sender_may(enum logrec_sender sender, const struct logrec *rec)
{
	if (sender <= LOGREC_SENDER_NONE || sender >= LOGREC_SENDER_MAX || !rec ||
	    rec->action < 1 || rec->action >= LOGREC_ACTION_MAX)
		return false;
	if (!(sender_actions[sender] & (1u << rec->action)))
		return false;
	if (sender == LOGREC_SENDER_VAULT && rec->action == LOGREC_CONNECT)
		return rec->verdict == LOGREC_REFUSED;
	return true;
}

/* ECS categorization per action: event.category (a JSON array body) and
 * the event.type entry that says what kind of thing happened; the verdict
 * adds "allowed"/"denied" where ECS allows it for that category. */
struct ecs_class {
	const char *category;
	const char *type;
	bool verdict_type; /* add "allowed"/"denied" to event.type */
	const char *protocol;
};

static const struct ecs_class ecs_classes[LOGREC_ACTION_MAX] = {
    [LOGREC_CONNECT] = {"\"network\"", "\"connection\"", true, NULL},
    [LOGREC_DNS_QUERY] = {"\"network\"", "\"protocol\"", true, "dns"},
    [LOGREC_DNS_LEARN] = {"\"network\"", "\"protocol\",\"info\"", false, "dns"},
    [LOGREC_HTTP_REQUEST] = {"\"network\",\"web\"", "\"access\"", true, "http"},
    [LOGREC_EXFIL] = {"\"intrusion_detection\",\"network\"", NULL, true, "http"},
    [LOGREC_CERT_ISSUE] = {"\"configuration\"", "\"creation\"", false, NULL},
    [LOGREC_POLICY_LOAD] = {"\"configuration\"", "\"change\"", false, NULL},
    [LOGREC_SANDBOX] = {"\"host\"", "\"change\"", false, NULL},
    [LOGREC_CHECK] = {"\"configuration\"", "\"info\"", false, NULL},
    [LOGREC_SEGMENT] = {"\"file\"", "\"creation\"", false, NULL},
};

/* IANA protocol keywords as ECS network.transport wants them (lower case). */
static const char *transport_name(uint8_t p, char *buf, size_t len)
{
	switch (p) {
	case IPPROTO_ICMP:
		return "icmp";
	case IPPROTO_IGMP:
		return "igmp";
	case IPPROTO_TCP:
		return "tcp";
	case IPPROTO_UDP:
		return "udp";
	case IPPROTO_IPV6:
		return "ipv6";
	case IPPROTO_GRE:
		return "gre";
	case IPPROTO_ESP:
		return "esp";
	case IPPROTO_AH:
		return "ah";
	case IPPROTO_ICMPV6:
		return "ipv6-icmp";
	case IPPROTO_SCTP:
		return "sctp";
	case IPPROTO_UDPLITE:
		return "udplite";
	default:
		snprintf(buf, len, "%u", p);
		return buf;
	}
}

const char *logrec_dns_type_name(uint16_t t, char *buf, size_t len)
{
	static const struct {
		uint16_t t;
		const char *n;
	} names[] = {{1, "A"},	   {2, "NS"},	  {5, "CNAME"},	  {6, "SOA"},	{12, "PTR"},
		     {15, "MX"},   {16, "TXT"},	  {28, "AAAA"},	  {33, "SRV"},	{35, "NAPTR"},
		     {43, "DS"},   {46, "RRSIG"}, {48, "DNSKEY"}, {64, "SVCB"}, {65, "HTTPS"},
		     {255, "ANY"}, {257, "CAA"}};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].t == t)
			return names[i].n;
	snprintf(buf, len, "TYPE%u", t); /* RFC 3597 */
	return buf;
}

/* RFC 3339 time of time_ms into out (25 bytes with NUL). The date and
 * time to the second are formatted once a second; thread-local so that
 * threads each keep their own (nothing is shared). */
static void time_fmt(uint64_t time_ms, char out[25])
{
	static _Thread_local uint64_t cached_sec = UINT64_MAX;
	static _Thread_local char cached[32];
	uint64_t sec = time_ms / 1000;
	unsigned ms = (unsigned)(time_ms % 1000);

	if (sec != cached_sec) {
		pc_time_rfc3339(sec * 1000, cached, sizeof(cached));
		cached_sec = sec;
	}
	memcpy(out, cached, 20); /* "2026-11-29T14:02:13." */
	out[20] = (char)('0' + ms / 100);
	out[21] = (char)('0' + ms / 10 % 10);
	out[22] = (char)('0' + ms % 10);
	out[23] = 'Z';
	out[24] = '\0';
}

/* The record is written into the caller's buffer (struct pc_buf over it):
 * a record that does not fit fails as a whole. */

static void j_key(struct pc_buf *j, const char *key)
{
	pc_buf_put(j, ",\"", 2);
	pc_buf_puts(j, key);
	pc_buf_put(j, "\":", 2);
}

static void j_str(struct pc_buf *j, const char *key, const char *v)
{
	if (!v || !*v)
		return;
	j_key(j, key);
	pc_json_quote(j, v);
}

static void j_num(struct pc_buf *j, const char *key, uint64_t v)
{
	j_key(j, key);
	pc_buf_u64(j, v);
}

/* A comma-separated list as a JSON array of strings (empty items dropped). */
static void j_list(struct pc_buf *j, const char *key, const char *v)
{
	bool first = true;

	if (!v || !*v)
		return;
	j_key(j, key);
	pc_buf_putc(j, '[');
	while (*v) {
		const char *end = strchr(v, ',');
		size_t n = end ? (size_t)(end - v) : strlen(v);

		if (n && n < LOGWIRE_MAX) {
			pc_buf_puts(j, first ? "\"" : ",\"");
			pc_json_escape(j, v, n);
			pc_buf_putc(j, '"');
			first = false;
		}
		v += n + (end ? 1 : 0);
	}
	pc_buf_putc(j, ']');
}

static void j_endpoint(struct pc_buf *j, const char *ipkey, const char *portkey,
		       const struct pc_endpoint *e)
{
	char a[PC_ADDRSTRLEN];

	if (!e->addr.family)
		return;
	j_str(j, ipkey, pc_addr_str(&e->addr, a, sizeof(a)));
	if (e->port)
		j_num(j, portkey, e->port);
}

int logrec_json_escape(const char *s, char *buf, size_t len)
{
	struct pc_buf j;

	if (!len)
		return PC_EINVAL;
	pc_buf_init_fixed(&j, buf, len - 1, 0); /* and the NUL */
	pc_json_escape(&j, s, strlen(s));
	if (j.err)
		return PC_EINVAL;
	buf[j.len] = '\0';
	return (int)j.len;
}

int logrec_json_format(const struct logrec *rec, uint64_t seq, uint64_t time_ms,
		       const uint8_t prev[32], const char *extra, char *buf, size_t len)
{
	struct pc_buf j;
	const struct ecs_class *c;
	char ts[32], tmp[16], ph[65];

	if (!rec || rec->action < 1 || rec->action >= LOGREC_ACTION_MAX)
		return PC_EINVAL;
	c = &ecs_classes[rec->action];
	pc_buf_init_fixed(&j, buf, len, 0);
	pc_buf_puts(&j, "{\"seq\":");
	pc_buf_u64(&j, seq);
	time_fmt(time_ms, ts);
	j_str(&j, "@timestamp", ts);
	/* set by logd, as seq and time: who handed the record over */
	j_str(&j, "portcullis.sender",
	      rec->action == LOGREC_SEGMENT ? "logd" : logrec_sender_name(rec->sender));
	j_str(&j, "event.kind", rec->action == LOGREC_EXFIL ? "alert" : "event");
	pc_buf_puts(&j, ",\"event.category\":[");
	pc_buf_puts(&j, c->category);
	pc_buf_puts(&j, "],\"event.type\":[");
	if (c->type)
		pc_buf_puts(&j, c->type);
	if (c->verdict_type && rec->verdict != LOGREC_NONE) {
		if (c->type)
			pc_buf_put(&j, ",", 1);
		pc_buf_puts(&j, rec->verdict == LOGREC_ALLOWED ? "\"allowed\"" : "\"denied\"");
	} else if (!c->type) {
		pc_buf_puts(&j, "\"info\"");
	}
	pc_buf_put(&j, "]", 1);
	j_str(&j, "event.action", logrec_action_name(rec->action));
	if (rec->verdict != LOGREC_NONE)
		j_str(&j, "event.outcome", rec->verdict == LOGREC_ALLOWED ? "success" : "failure");
	j_str(&j, "event.reason", rec->reason);
	j_str(&j, "sandbox", rec->sandbox);
	j_str(&j, "policy", rec->policy);
	j_str(&j, "rule.name", rec->rule);
	j_endpoint(&j, "source.ip", "source.port", &rec->src);
	j_endpoint(&j, "destination.ip", "destination.port", &rec->dst);
	j_str(&j, "destination.domain", rec->domain);
	if (rec->transport)
		j_str(&j, "network.transport", transport_name(rec->transport, tmp, sizeof(tmp)));
	j_str(&j, "network.protocol", c->protocol);
	j_str(&j, "dns.question.name", rec->dns_name);
	if (rec->dns_type)
		j_str(&j, "dns.question.type",
		      logrec_dns_type_name(rec->dns_type, tmp, sizeof(tmp)));
	j_list(&j, "dns.resolved_ip", rec->dns_answers);
	j_str(&j, "tls.client.server_name", rec->sni);
	j_str(&j, "http.request.method", rec->http_method);
	j_str(&j, "url.path", rec->http_path);
	if (rec->http_status)
		j_num(&j, "http.response.status_code", rec->http_status);
	j_list(&j, "secrets", rec->secrets);
	j_str(&j, "message", rec->message);
	if (extra)
		pc_buf_puts(&j, extra);
	merkle_hex(prev, ph);
	j_str(&j, "prev", ph);
	pc_buf_put(&j, "}", 1);
	if (j.err)
		return PC_EINVAL;
	return (int)j.len;
}
