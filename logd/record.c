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

/* Decimal digits of v into b (at least 21 bytes); returns the length.
 * (snprintf was a tenth of logd's time per record.) */
static size_t u64_dec(uint64_t v, char *b)
{
	char t[20];
	size_t n = 0;

	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (size_t i = 0; i < n; i++)
		b[i] = t[n - 1 - i];
	return n;
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

struct jbuf {
	char *p;
	size_t len, off;
	bool overflow;
};

static void j_raw(struct jbuf *j, const char *s, size_t n)
{
	if (j->overflow || j->len - j->off < n) {
		j->overflow = true;
		return;
	}
	memcpy(j->p + j->off, s, n);
	j->off += n;
}

static void j_lit(struct jbuf *j, const char *s)
{
	j_raw(j, s, strlen(s));
}

/* Bytes a JSON string must escape: control characters, quote, backslash
 * (and DEL, kept out of terminals). */
static const bool esc_tab[256] = {
    [0x00] = 1, [0x01] = 1, [0x02] = 1, [0x03] = 1, [0x04] = 1, [0x05] = 1, [0x06] = 1,
    [0x07] = 1, [0x08] = 1, [0x09] = 1, [0x0a] = 1, [0x0b] = 1, [0x0c] = 1, [0x0d] = 1,
    [0x0e] = 1, [0x0f] = 1, [0x10] = 1, [0x11] = 1, [0x12] = 1, [0x13] = 1, [0x14] = 1,
    [0x15] = 1, [0x16] = 1, [0x17] = 1, [0x18] = 1, [0x19] = 1, [0x1a] = 1, [0x1b] = 1,
    [0x1c] = 1, [0x1d] = 1, [0x1e] = 1, [0x1f] = 1, ['"'] = 1,	[0x5c] = 1, [0x7f] = 1,
};

static bool needs_esc(unsigned char c)
{
	return esc_tab[c];
}

/* A JSON string body: quote, backslash and control characters escaped.
 * Input is valid UTF-8 (the wire decoder guarantees it). */
static void j_esc(struct jbuf *j, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	for (;;) {
		const char *run = s;
		unsigned char c;
		char e[6];
		size_t n = 2;

		/* NUL is in the table: one test per byte ends the run */
		while (!needs_esc((unsigned char)*s))
			s++;
		j_raw(j, run, (size_t)(s - run));
		c = (unsigned char)*s;
		if (!c)
			return;
		s++;
		e[0] = '\\';
		switch (c) {
		case '"':
			e[1] = '"';
			break;
		case '\\':
			e[1] = '\\';
			break;
		case '\n':
			e[1] = 'n';
			break;
		case '\t':
			e[1] = 't';
			break;
		case '\r':
			e[1] = 'r';
			break;
		default:
			e[1] = 'u';
			e[2] = '0';
			e[3] = '0';
			e[4] = hex[c >> 4];
			e[5] = hex[c & 15];
			n = 6;
		}
		j_raw(j, e, n);
	}
}

static void j_str(struct jbuf *j, const char *key, const char *v)
{
	if (!v || !*v)
		return;
	j_lit(j, ",\"");
	j_lit(j, key);
	j_lit(j, "\":\"");
	j_esc(j, v);
	j_raw(j, "\"", 1);
}

static void j_num(struct jbuf *j, const char *key, uint64_t v)
{
	char b[64]; /* ,"http.response.status_code":<20 digits> */
	j_raw(j, ",\"", 2);
	j_lit(j, key);
	j_raw(j, "\":", 2);
	j_raw(j, b, u64_dec(v, b));
}

/* A comma-separated list as a JSON array of strings (empty items dropped). */
static void j_list(struct jbuf *j, const char *key, const char *v)
{
	bool first = true;

	if (!v || !*v)
		return;
	j_lit(j, ",\"");
	j_lit(j, key);
	j_lit(j, "\":[");
	while (*v) {
		const char *end = strchr(v, ',');
		size_t n = end ? (size_t)(end - v) : strlen(v);
		char item[LOGWIRE_MAX];

		if (n && n < sizeof(item)) {
			memcpy(item, v, n);
			item[n] = '\0';
			j_lit(j, first ? "\"" : ",\"");
			j_esc(j, item);
			j_raw(j, "\"", 1);
			first = false;
		}
		v += n + (end ? 1 : 0);
	}
	j_raw(j, "]", 1);
}

static void j_endpoint(struct jbuf *j, const char *ipkey, const char *portkey,
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
	struct jbuf j = {.p = buf, .len = len ? len - 1 : 0};

	if (!len)
		return PC_EINVAL;
	j_esc(&j, s);
	if (j.overflow)
		return PC_EINVAL;
	buf[j.off] = '\0';
	return (int)j.off;
}

int logrec_json_format(const struct logrec *rec, uint64_t seq, uint64_t time_ms,
		       const uint8_t prev[32], const char *extra, char *buf, size_t len)
{
	struct jbuf j = {.p = buf, .len = len};
	const struct ecs_class *c;
	char ts[32], tmp[16], ph[65], num[32];

	if (!rec || rec->action < 1 || rec->action >= LOGREC_ACTION_MAX)
		return PC_EINVAL;
	c = &ecs_classes[rec->action];
	j_lit(&j, "{\"seq\":");
	j_raw(&j, num, u64_dec(seq, num));
	time_fmt(time_ms, ts);
	j_str(&j, "@timestamp", ts);
	j_str(&j, "event.kind", rec->action == LOGREC_EXFIL ? "alert" : "event");
	j_lit(&j, ",\"event.category\":[");
	j_lit(&j, c->category);
	j_lit(&j, "],\"event.type\":[");
	if (c->type)
		j_lit(&j, c->type);
	if (c->verdict_type && rec->verdict != LOGREC_NONE) {
		if (c->type)
			j_raw(&j, ",", 1);
		j_lit(&j, rec->verdict == LOGREC_ALLOWED ? "\"allowed\"" : "\"denied\"");
	} else if (!c->type) {
		j_lit(&j, "\"info\"");
	}
	j_raw(&j, "]", 1);
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
		j_lit(&j, extra);
	merkle_hex(prev, ph);
	j_str(&j, "prev", ph);
	j_raw(&j, "}", 1);
	if (j.overflow)
		return PC_EINVAL;
	return (int)j.off;
}
