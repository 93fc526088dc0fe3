/* The record as a JSON line with Elastic Common Schema field names: the
 * mapping of actions and verdicts to event.kind/category/type/outcome is
 * documented in docs/logd.md ("Record fields"). */
#include "logd/logd_int.h"

#include <netinet/in.h>
#include <stdatomic.h>
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
	/* pledges are the engine's deferred DNS query records, and only the
	 * engine redeems them (docs/logd.md, "Pledges") */
	if ((rec->pledge || rec->redeems) && sender != LOGREC_SENDER_ENGINE)
		return false;
	if (rec->pledge)
		return rec->action == LOGREC_DNS_QUERY && rec->verdict == LOGREC_ALLOWED;
	if (sender == LOGREC_SENDER_VAULT && rec->action == LOGREC_CONNECT)
		return rec->verdict == LOGREC_REFUSED;
	return true;
}

/* ECS categorization per action: event.category and
 * the event.type entry that says what kind of thing happened (comma
 * lists); the verdict
 * adds "allowed"/"denied" where ECS allows it for that category. */
struct ecs_class {
	const char *category;
	const char *type;
	bool verdict_type; /* add "allowed"/"denied" to event.type */
	const char *protocol;
};

static const struct ecs_class ecs_classes[LOGREC_ACTION_MAX] = {
    [LOGREC_CONNECT] = {"network", "connection", true, NULL},
    [LOGREC_DNS_QUERY] = {"network", "protocol", true, "dns"},
    [LOGREC_DNS_LEARN] = {"network", "protocol,info", false, "dns"},
    [LOGREC_HTTP_REQUEST] = {"network,web", "access", true, "http"},
    [LOGREC_EXFIL] = {"intrusion_detection,network", NULL, true, "http"},
    [LOGREC_CERT_ISSUE] = {"configuration", "creation", false, NULL},
    [LOGREC_POLICY_LOAD] = {"configuration", "change", false, NULL},
    [LOGREC_SANDBOX] = {"host", "change", false, NULL},
    [LOGREC_CHECK] = {"configuration", "info", false, NULL},
    [LOGREC_SEGMENT] = {"file", "creation", false, NULL},
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

/* Thread-local so that threads each keep their own (nothing is shared). */
void logrec_time_rfc3339(uint64_t time_ms, char out[25])
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

/* A value of logd's own making (a time, a hash in hex): nothing in it
 * is escaped, so it is not scanned for what would be. */
static void j_plain(struct pc_buf *j, const char *key, const char *v, size_t n)
{
	j_key(j, key);
	pc_buf_putc(j, '"');
	pc_buf_put(j, v, n);
	pc_buf_putc(j, '"');
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

/* Who observes (set once by logd, before its threads), and how often it
 * was set: the class heads cached before belong to the old name. */
static char observer_host[256];
static _Atomic unsigned observer_gen = 1;

void logrec_set_observer(const char *hostname)
{
	pc_strlcpy(observer_host, hostname ? hostname : "", sizeof(observer_host));
	atomic_fetch_add_explicit(&observer_gen, 1, memory_order_relaxed);
}

/* The fields a record's class alone decides (its action, verdict and
 * sender, and the observer): the same bytes in every record of the class,
 * which the JSON line takes from a cache (class_head). The first of
 * logrec_fields' two parts. */
static void fields_class(const struct logrec *rec, logrec_field_fn fn, void *ctx)
{
	const struct ecs_class *c = &ecs_classes[rec->action];
	char type[64];

	fn(ctx, "ecs.version", LOGF_STR, LOGREC_ECS_VERSION, 0);
	fn(ctx, "observer.hostname", LOGF_STR, observer_host, 0);
	fn(ctx, "observer.product", LOGF_STR, "portcullis", 0);
	fn(ctx, "observer.vendor", LOGF_STR, "portcullis", 0);
	fn(ctx, "observer.type", LOGF_STR, "firewall", 0);
	/* set by logd, as seq and time: who handed the record over */
	fn(ctx, "portcullis.sender", LOGF_STR,
	   rec->action == LOGREC_SEGMENT ? "logd" : logrec_sender_name(rec->sender), 0);
	fn(ctx, "event.kind", LOGF_STR, rec->action == LOGREC_EXFIL ? "alert" : "event", 0);
	fn(ctx, "event.category", LOGF_LIST, c->category, 0);
	/* the class's type, then the verdict's ("connection,allowed");
	 * "info" when there is neither. Not snprintf: this runs for every
	 * record, and the pieces are constants (the buffer cannot be short). */
	if (rec->action == LOGREC_CONNECT && rec->verdict == LOGREC_NONE) {
		/* a connect record that is no decision: flows that ended (a
		 * sandbox that left the policy, docs/logd.md "Event codes") */
		fn(ctx, "event.type", LOGF_LIST, "connection,end", 0);
	} else if (c->verdict_type && rec->verdict != LOGREC_NONE) {
		const char *v = rec->verdict == LOGREC_ALLOWED ? "allowed" : "denied";

		if (c->type) {
			struct pc_buf t;

			pc_buf_init_fixed(&t, type, sizeof(type), 0);
			pc_buf_puts(&t, c->type);
			pc_buf_putc(&t, ',');
			pc_buf_puts(&t, v);
			v = type;
		}
		fn(ctx, "event.type", LOGF_LIST, v, 0);
	} else {
		fn(ctx, "event.type", LOGF_LIST, c->type ? c->type : "info", 0);
	}
	fn(ctx, "event.action", LOGF_STR, logrec_action_name(rec->action), 0);
	if (rec->verdict != LOGREC_NONE)
		fn(ctx, "event.outcome", LOGF_STR,
		   rec->verdict == LOGREC_ALLOWED ? "success" : "failure", 0);
}

/* The fields of the record itself: logrec_fields' second part. */
static void fields_record(const struct logrec *rec, logrec_field_fn fn, void *ctx)
{
	const struct ecs_class *c = &ecs_classes[rec->action];
	char tmp[16], iana[4], a[PC_ADDRSTRLEN];
	const char *code = logrec_reason_code_at(logrec_event_code_index(rec));

	fn(ctx, "event.reason", LOGF_STR, rec->reason, 0);
	if ((rec->reason && *rec->reason) || (rec->code && *rec->code))
		fn(ctx, "event.code", LOGF_STR, code, 0);
	fn(ctx, "portcullis.sandbox", LOGF_STR, rec->sandbox, 0);
	fn(ctx, "portcullis.policy", LOGF_STR, rec->policy, 0);
	fn(ctx, "rule.name", LOGF_STR, rec->rule, 0);
	if (rec->src.addr.family) {
		fn(ctx, "source.ip", LOGF_STR, pc_addr_str(&rec->src.addr, a, sizeof(a)), 0);
		if (rec->src.port)
			fn(ctx, "source.port", LOGF_NUM, NULL, rec->src.port);
	}
	if (rec->dst.addr.family) {
		fn(ctx, "destination.ip", LOGF_STR, pc_addr_str(&rec->dst.addr, a, sizeof(a)), 0);
		if (rec->dst.port)
			fn(ctx, "destination.port", LOGF_NUM, NULL, rec->dst.port);
	}
	fn(ctx, "destination.domain", LOGF_STR, rec->domain, 0);
	if (rec->transport) {
		struct pc_buf ib;

		pc_buf_init_fixed(&ib, iana, sizeof(iana), 0);
		pc_buf_u64(&ib, rec->transport); /* ECS: a keyword */
		fn(ctx, "network.transport", LOGF_STR,
		   transport_name(rec->transport, tmp, sizeof(tmp)), 0);
		fn(ctx, "network.iana_number", LOGF_STR, iana, 0);
	}
	/* from the sandboxes, through the guard, to the outside: the
	 * perimeter's point of view (ECS network.direction) */
	if (rec->action == LOGREC_CONNECT || rec->action == LOGREC_DNS_QUERY ||
	    rec->action == LOGREC_HTTP_REQUEST || rec->action == LOGREC_EXFIL)
		fn(ctx, "network.direction", LOGF_STR, "outbound", 0);
	fn(ctx, "network.protocol", LOGF_STR, c->protocol, 0);
	fn(ctx, "dns.question.name", LOGF_STR, rec->dns_name, 0);
	if (rec->dns_type)
		fn(ctx, "dns.question.type", LOGF_STR,
		   logrec_dns_type_name(rec->dns_type, tmp, sizeof(tmp)), 0);
	fn(ctx, "dns.resolved_ip", LOGF_LIST, rec->dns_answers, 0);
	if (rec->dns_ttl)
		fn(ctx, "portcullis.dns.ttl", LOGF_NUM, NULL, rec->dns_ttl);
	fn(ctx, "portcullis.held.bytes", LOGF_STR, rec->held_bytes, 0);
	if (rec->held_ms)
		fn(ctx, "portcullis.held.ms", LOGF_NUM, NULL, rec->held_ms);
	if (rec->quota)
		fn(ctx, "portcullis.quota", LOGF_NUM, NULL, rec->quota);
	/* learned from answers the guard takes only from NOERROR responses */
	if (rec->action == LOGREC_DNS_LEARN)
		fn(ctx, "dns.response_code", LOGF_STR, "NOERROR", 0);
	else
		fn(ctx, "dns.response_code", LOGF_STR, rec->dns_rcode,
		   0); /* what the guard answered */
	fn(ctx, "tls.client.server_name", LOGF_STR, rec->sni, 0);
	fn(ctx, "http.request.method", LOGF_STR, rec->http_method, 0);
	fn(ctx, "url.path", LOGF_STR, rec->http_path, 0);
	if (rec->http_status)
		fn(ctx, "http.response.status_code", LOGF_NUM, NULL, rec->http_status);
	fn(ctx, "portcullis.secrets", LOGF_LIST, rec->secrets, 0);
}

/* Every field of a record between @timestamp and message, in order, for
 * both forms: the JSON line (record.c) and the syslog structured data
 * (syslog_fmt.c), so the two cannot carry different fields. */
void logrec_fields(const struct logrec *rec, logrec_field_fn fn, void *ctx)
{
	fields_class(rec, fn, ctx);
	fields_record(rec, fn, ctx);
}

static void j_field(void *ctx, const char *key, enum logrec_field_kind k, const char *s, uint64_t n)
{
	struct pc_buf *j = ctx;

	if (k == LOGF_NUM)
		j_num(j, key, n);
	else if (k == LOGF_LIST)
		j_list(j, key, s);
	else
		j_str(j, key, s);
}

/* The JSON of a class's fields (fields_class), made once per thread and
 * class: a third of every line's bytes, and of the time to format it. A
 * thread sees a few classes (a queue thread's connect and dns-query
 * records, allowed and refused), so a few slots, reused in turn. */
#define HEAD_SLOTS 8
/* room for the fields with any name gethostname gives (at most
 * HOST_NAME_MAX, 64 bytes, each escaped to six at worst): a name set by
 * hand past that is formatted in place, every time */
#define HEAD_MAX 1024

struct class_head {
	unsigned key, gen; /* gen 0: empty (observer_gen starts at 1) */
	size_t len;
	char text[HEAD_MAX];
};

/* NULL when the class's head does not fit a slot (a long observer name):
 * the caller formats the fields itself. */
static const struct class_head *class_head(const struct logrec *rec)
{
	static _Thread_local struct class_head heads[HEAD_SLOTS];
	static _Thread_local unsigned next;
	unsigned gen = atomic_load_explicit(&observer_gen, memory_order_relaxed);
	unsigned key;
	struct class_head *h;
	struct pc_buf b;

	if ((unsigned)rec->verdict > LOGREC_REFUSED || (unsigned)rec->sender >= LOGREC_SENDER_MAX)
		return NULL;
	key = (unsigned)rec->action << 8 | (unsigned)rec->verdict << 4 | (unsigned)rec->sender;
	for (unsigned i = 0; i < HEAD_SLOTS; i++)
		if (heads[i].key == key && heads[i].gen == gen)
			return &heads[i];
	h = &heads[next++ % HEAD_SLOTS];
	h->gen = 0;
	pc_buf_init_fixed(&b, h->text, sizeof(h->text), 0);
	fields_class(rec, j_field, &b);
	if (b.err)
		return NULL;
	h->key = key;
	h->len = b.len;
	h->gen = gen;
	return h;
}

int logrec_json_format(const struct logrec *rec, uint64_t seq, uint64_t time_ms,
		       const uint8_t prev[32], const char *extra, char *buf, size_t len)
{
	const struct class_head *head;
	struct pc_buf j;
	char ts[32], ph[65];

	if (!rec || rec->action < 1 || rec->action >= LOGREC_ACTION_MAX)
		return PC_EINVAL;
	pc_buf_init_fixed(&j, buf, len, 0);
	pc_buf_puts(&j, "{\"" LOGREC_SEQ_KEY "\":");
	pc_buf_u64(&j, seq);
	logrec_time_rfc3339(time_ms, ts);
	j_plain(&j, "@timestamp", ts, 24);
	if ((head = class_head(rec)))
		pc_buf_put(&j, head->text, head->len);
	else
		fields_class(rec, j_field, &j);
	fields_record(rec, j_field, &j);
	j_str(&j, "message", rec->message);
	if (extra)
		pc_buf_puts(&j, extra);
	merkle_hex(prev, ph);
	j_plain(&j, LOGREC_PREV_KEY, ph, 64);
	pc_buf_put(&j, "}", 1);
	if (j.err)
		return PC_EINVAL;
	return (int)j.len;
}
