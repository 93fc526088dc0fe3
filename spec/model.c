/* The executable model of docs/spec.md. Each function is one table of the
 * spec and cites its rows; the order of the tests is the order of the rows
 * (the first that holds decides). Small and slow on purpose: linear scans
 * of fixed arrays, no cleverness, nothing shared with engine/decide.c. */
#include "spec/spec.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "logd/logd.h"

#define F_FIN 0x01
#define F_SYN 0x02
#define F_RST 0x04
#define F_ACK 0x10
#define F_URG 0x20

/* A SYN whose options may carry MPTCP (docs/spec.md S7b, S22b, H5a). */
static bool syn_mptcp(const struct spec_pkt *p)
{
	return p->proto == IPPROTO_TCP && (p->tcp_flags & F_SYN) && p->mptcp;
}

/* Urgent data: URG, or an urgent pointer without it (docs/spec.md S7a). */
static bool urgent(const struct spec_pkt *p)
{
	return p->proto == IPPROTO_TCP && ((p->tcp_flags & F_URG) || p->urp != 0);
}

/* ---- reason classes (docs/spec.md, "Verdicts and records") ------------------ */

static const struct {
	const char *name;
	const char *words[3];
} reasons[SPEC_R_MAX] = {
    [SPEC_R_ANY] = {"any", {NULL}},
    [SPEC_R_UNKNOWN_PORT] = {"UNKNOWN_PORT", {"bridge port"}},
    [SPEC_R_MALFORMED] = {"MALFORMED", {"malformed", "fragment"}},
    [SPEC_R_NOT_SANDBOX] = {"NOT_SANDBOX", {"not a sandbox"}},
    [SPEC_R_NOT_RESOLVER] = {"NOT_RESOLVER", {"resolver"}},
    [SPEC_R_DNS_MALFORMED] = {"DNS_MALFORMED", {"malformed", "response"}},
    [SPEC_R_NO_CONN] = {"NO_CONN", {"no connection"}},
    [SPEC_R_PROTO] = {"PROTO", {"never allowed"}},
    [SPEC_R_SANDBOXES] = {"SANDBOXES", {"each other"}},
    [SPEC_R_CIDR] = {"CIDR", {"allowed address"}},
    [SPEC_R_HOST] = {"HOST", {"allowed host"}},
    [SPEC_R_SNI] = {"SNI", {"server name"}},
    [SPEC_R_NO_SNI] = {"NO_SNI", {"without a server name"}},
    [SPEC_R_TLS_BAD] = {"TLS_BAD", {"malformed TLS", "larger than", "Encrypted Client Hello"}},
    [SPEC_R_NOT_TLS] = {"NOT_TLS", {"not TLS"}},
    [SPEC_R_TAMPER] = {"TAMPER", {"differ", "ISN", "sequence"}},
    [SPEC_R_TIMEOUT] = {"TIMEOUT", {"sni_timeout_ms"}},
    [SPEC_R_QUOTA] = {"QUOTA", {"quota"}},
    [SPEC_R_SPECIAL] = {"SPECIAL", {"special"}},
    [SPEC_R_RELOAD] = {"RELOAD", {"cut by reload"}},
    [SPEC_R_FASTOPEN] = {"FASTOPEN", {"Fast Open"}},
    [SPEC_R_URGENT] = {"URGENT", {"urgent"}},
    [SPEC_R_OVERLAP] = {"OVERLAP", {"bytes overlap"}},
    [SPEC_R_NO_STREAM] = {"NO_STREAM", {"no stream"}},
    [SPEC_R_MPTCP] = {"MPTCP", {"MPTCP"}},
};

bool spec_reason_is(enum spec_reason c, const char *reason)
{
	if (c == SPEC_R_ANY)
		return true;
	if (!reason)
		return false;
	for (size_t i = 0; i < 3 && reasons[c].words[i]; i++)
		if (strstr(reason, reasons[c].words[i]))
			return true;
	return false;
}

const char *spec_reason_name(enum spec_reason c)
{
	return c < SPEC_R_MAX ? reasons[c].name : "?";
}

const char *spec_out_str(unsigned may, char *buf, size_t n)
{
	static const char *const names[] = {"FAST",  "RDROP", "DROP",	"PASS",	  "ALLOW",
					    "VAULT", "HOLD",  "REJECT", "REFUSED"};
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(may & (1u << i)))
			continue;
		o += (size_t)snprintf(buf + o, o < n ? n - o : 0, "%s%s", o ? "|" : "", names[i]);
		if (o >= n)
			break;
	}
	return buf;
}

/* ---- special-purpose addresses (docs/spec.md, "Words") --------------------- */

static const char *const special_prefixes[] = {
    "0.0.0.0/8",       "10.0.0.0/8",	 "100.64.0.0/10", "127.0.0.0/8",    "169.254.0.0/16",
    "172.16.0.0/12",   "192.0.0.0/24",	 "192.0.2.0/24",  "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4",	  "240.0.0.0/4",    "::/128",
    "::1/128",	       "64:ff9b:1::/48", "100::/64",	  "2001:2::/48",    "2001:db8::/32",
    "2001:10::/28",    "2001:20::/28",	 "3fff::/20",	  "fc00::/7",	    "fe80::/10",
    "ff00::/8",
};

static bool in_prefix_str(const char *s, const struct pc_addr *a)
{
	struct pc_prefix p;

	if (pc_prefix_parse(s, &p) < 0)
		abort(); /* the table above is wrong */
	return pc_prefix_contains(&p, a);
}

/* The table parsed once: the audit asks it for every learned address. */
static bool in_special_table(const struct pc_addr *a)
{
	static struct pc_prefix parsed[sizeof(special_prefixes) / sizeof(special_prefixes[0])];
	static bool done;

	if (!done) {
		for (size_t i = 0; i < sizeof(parsed) / sizeof(parsed[0]); i++)
			if (pc_prefix_parse(special_prefixes[i], &parsed[i]) < 0)
				abort(); /* the table above is wrong */
		done = true;
	}
	for (size_t i = 0; i < sizeof(parsed) / sizeof(parsed[0]); i++)
		if (pc_prefix_contains(&parsed[i], a))
			return true;
	return false;
}

/* Is a special-purpose address (docs/spec.md, "Words")? */
static bool spec_routable(const struct spec_world *w, const struct pc_addr *a)
{
	for (size_t i = 0; w->cfg && i < w->cfg->dns.n_routable; i++)
		if (pc_prefix_contains(&w->cfg->dns.routable[i], a))
			return true;
	return false;
}

static bool spec_addr_special(const struct spec_world *w, const struct pc_addr *a)
{
	if (in_special_table(a) && !spec_routable(w, a))
		return true;
	/* an IPv4 address mapped into IPv6, or NAT64's well-known prefix
	 * (which delivers to it), is that IPv4 address, even where the
	 * prefix itself is declared routable */
	if (a->family == AF_INET6 &&
	    (in_prefix_str("::ffff:0:0/96", a) || in_prefix_str("64:ff9b::/96", a))) {
		struct pc_addr v4 = {.family = AF_INET};

		memcpy(v4.a, a->a + 12, 4);
		return spec_addr_special(w, &v4);
	}
	for (size_t i = 0; i < w->n_gateway; i++)
		if (pc_addr_eq(&w->gateway[i], a))
			return true;
	for (size_t i = 0; i < w->n_bridge; i++)
		if (pc_prefix_contains(&w->bridge[i], a))
			return true;
	return false;
}

/* ---- the world -------------------------------------------------------------- */

void spec_world_init(struct spec_world *w, const struct config *cfg, const struct policy *pol)
{
	memset(w, 0, sizeof(*w));
	w->cfg = cfg;
	w->pol = pol;
}

static void flow_forget(struct spec_flow *f)
{
	free(f->kept);
	memset(f, 0, sizeof(*f));
}

void spec_world_forget_flows(struct spec_world *w)
{
	for (size_t i = 0; i < SPEC_FLOWS_MAX; i++)
		if (w->flows[i].used) /* the audit forgets after every record */
			flow_forget(&w->flows[i]);
	w->n_streams = 0;
}

/* A sandbox's share of a table of cap entries (S14, S23). */
static size_t quota_share(const struct spec_world *w, size_t cap)
{
	size_t n = policy_sandbox_count(w->pol), q = n ? cap / n : cap;

	return q ? q : 1;
}

/* The DNS-over-TCP stream of the packet's connection (either direction). */
static size_t stream_find(const struct spec_world *w, const struct spec_pkt *p)
{
	for (size_t i = 0; i < w->n_streams; i++)
		if (w->streams[i].proto == p->proto &&
		    ((pc_addr_eq(&w->streams[i].a, &p->src) && w->streams[i].ap == p->sport &&
		      pc_addr_eq(&w->streams[i].b, &p->dst) && w->streams[i].bp == p->dport)))
			return i;
	return w->n_streams;
}

/* The connection whose answers p carries (the resolver's direction of a
 * stream kept from the sandbox's SYN). */
static size_t stream_find_answer(const struct spec_world *w, const struct spec_pkt *p)
{
	for (size_t i = 0; i < w->n_streams; i++)
		if (w->streams[i].syn && w->streams[i].proto == p->proto &&
		    pc_addr_eq(&w->streams[i].a, &p->dst) && w->streams[i].ap == p->dport &&
		    pc_addr_eq(&w->streams[i].b, &p->src) && w->streams[i].bp == p->sport)
			return i;
	return w->n_streams;
}

static void stream_drop(struct spec_world *w, size_t i)
{
	if (i >= w->n_streams)
		return;
	memmove(&w->streams[i], &w->streams[i + 1], sizeof(w->streams[0]) * (w->n_streams - i - 1));
	w->n_streams--;
}

static size_t streams_of(const struct spec_world *w, const char *sandbox)
{
	size_t n = 0;

	for (size_t i = 0; i < w->n_streams; i++)
		n += strcmp(w->streams[i].sandbox, sandbox) == 0;
	return n;
}

void spec_world_free(struct spec_world *w)
{
	spec_world_forget_flows(w);
}

static bool is_resolver(const struct spec_world *w, const struct pc_addr *a)
{
	for (size_t i = 0; i < w->cfg->dns.n_resolvers; i++)
		if (pc_addr_eq(&w->cfg->dns.resolvers[i], a))
			return true;
	return false;
}

static bool in_any_sandbox(const struct spec_world *w, const struct pc_addr *a)
{
	for (size_t i = 0; i < policy_sandbox_count(w->pol); i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(w->pol, i);

		for (size_t j = 0; j < sb->match.n_sources; j++)
			if (pc_prefix_contains(&sb->match.sources[j], a))
				return true;
	}
	return false;
}

static bool cidr_contains(const struct policy_sandbox *sb, const struct pc_addr *a)
{
	for (size_t i = 0; i < sb->n_allow; i++)
		if (sb->allow[i].kind == POLICY_ALLOW_CIDR &&
		    pc_prefix_contains(&sb->allow[i].cidr, a))
			return true;
	return false;
}

static struct spec_flow *flow_find(struct spec_world *w, const struct spec_pkt *p, bool *reply)
{
	for (size_t i = 0; i < SPEC_FLOWS_MAX; i++) {
		struct spec_flow *f = &w->flows[i];

		if (!f->used || f->proto != p->proto)
			continue;
		if (pc_addr_eq(&f->sbaddr, &p->src) && f->sbport == p->sport &&
		    pc_addr_eq(&f->peer, &p->dst) && f->peerport == p->dport) {
			*reply = false;
			return f;
		}
		if (pc_addr_eq(&f->sbaddr, &p->dst) && f->sbport == p->dport &&
		    pc_addr_eq(&f->peer, &p->src) && f->peerport == p->sport) {
			*reply = true;
			return f;
		}
	}
	return NULL;
}

static struct spec_flow *flow_new(struct spec_world *w, const struct spec_pkt *p,
				  const struct policy_sandbox *sb, enum spec_flow_state st)
{
	for (size_t i = 0; i < SPEC_FLOWS_MAX; i++) {
		struct spec_flow *f = &w->flows[i];

		if (f->used)
			continue;
		f->used = true;
		f->proto = p->proto;
		f->sbaddr = p->src;
		f->sbport = p->sport;
		f->peer = p->dst;
		f->peerport = p->dport;
		f->st = st;
		f->born = ++w->flows_born;
		pc_strlcpy(f->sandbox, sb->name, sizeof(f->sandbox));
		return f;
	}
	abort(); /* the driver keeps sequences shorter than this */
}

/* pc_addr_eq without its calls: the learned table is scanned whole for
 * every flow the audit replays. */
static inline bool addr_same(const struct pc_addr *x, const struct pc_addr *y)
{
	uint64_t a0, a1, b0, b1;
	uint32_t p, q;

	if (x->family != y->family)
		return false;
	if (x->family == AF_INET) {
		memcpy(&p, x->a, 4);
		memcpy(&q, y->a, 4);
		return p == q;
	}
	memcpy(&a0, x->a, 8);
	memcpy(&a1, x->a + 8, 8);
	memcpy(&b0, y->a, 8);
	memcpy(&b1, y->a + 8, 8);
	return a0 == b0 && a1 == b1;
}

/* Learned: the names this sandbox learned for a, newest first, unexpired
 * (grace: or expired less than dns.grace ago, for flows that exist). */
static uint32_t addr_key(const struct pc_addr *a)
{
	uint32_t k = a->family, x;

	for (size_t i = 0; i < (a->family == AF_INET ? 4u : 16u); i += 4) {
		memcpy(&x, a->a + i, 4);
		k = (k ^ x) * 16777619u;
	}
	return k;
}

static size_t learned_names(const struct spec_world *w, const char *sandbox,
			    const struct pc_addr *a, bool grace, const char **names, size_t max)
{
	uint64_t g = grace ? (uint64_t)w->cfg->dns.grace * 1000 : 0;
	uint32_t key = addr_key(a);
	size_t n = 0;

	for (size_t i = w->n_learned; i-- > 0 && n < max;) {
		const struct spec_learned *l = &w->learned[w->learned_order[i]];

		if (w->learned_key[w->learned_order[i]] == key && addr_same(&l->addr, a) &&
		    l->expires_ms + g > w->now_ms && strcmp(l->sandbox, sandbox) == 0)
			names[n++] = l->name;
	}
	return n;
}

/* Host-allowed (S, A, proto, port): the first learned name allowed there. */
static const char *host_allowed(const struct spec_world *w, const struct policy_sandbox *sb,
				const struct pc_addr *a, uint8_t proto, uint16_t port, bool grace)
{
	const char *names[32];
	size_t n = learned_names(w, sb->name, a, grace, names, 32);

	for (size_t i = 0; i < n; i++)
		if (policy_host_allows(sb, names[i], proto, port, NULL))
			return names[i];
	return NULL;
}

/* The SNI check: one of the names learned for a (grace: the flow exists). */
static bool sni_allowed(const struct spec_world *w, const struct policy_sandbox *sb,
			const struct pc_addr *a, uint16_t port, const char *sni)
{
	const char *names[32];
	size_t n = learned_names(w, sb->name, a, true, names, 32);

	for (size_t i = 0; i < n; i++)
		if (strcasecmp(names[i], sni) == 0 &&
		    policy_host_allows(sb, sni, IPPROTO_TCP, port, NULL))
			return true;
	return false;
}

/* ---- verdict helpers -------------------------------------------------------- */

static void say(struct spec_verdict *v, const char *row, unsigned may)
{
	memset(v, 0, sizeof(*v));
	v->row = row;
	v->may = may;
}

static void must_rec(struct spec_verdict *v, unsigned actions, int outcome, enum spec_reason r)
{
	v->rec = SPEC_REC_MUST;
	v->actions = actions;
	v->outcome = outcome;
	v->reason = r;
}

#define CONNECT	 SPEC_ACT(LOGREC_CONNECT)
#define DNSQUERY SPEC_ACT(LOGREC_DNS_QUERY)
#define DNSLEARN SPEC_ACT(LOGREC_DNS_LEARN)

/* What S12 allows of a stream the model does not put together: a message
 * in parts, or more than it keeps (the guard may pass, drop or reset it,
 * and may record a refused query). */
static void say_s12(struct spec_verdict *v)
{
	say(v, "S12", SPEC_V_DROP | SPEC_V_REJECT | SPEC_V_PASS);
	v->rec = SPEC_REC_MAY;
	v->actions = DNSQUERY;
	v->outcome = LOGREC_REFUSED;
}

static void refuse(struct spec_verdict *v, const char *row, unsigned may, unsigned actions,
		   enum spec_reason r)
{
	say(v, row, may);
	must_rec(v, actions, LOGREC_REFUSED, r);
}

/* ---- port 53 from a sandbox: S4-S14 ----------------------------------------- */

static bool query_allowed(const struct policy_sandbox *sb, const struct spec_pkt *p)
{
	return (rules_qtype_bit(p->qtype) & sb->dns_qtypes) &&
	       policy_name_allowed(sb, p->qname, NULL);
}

static void pending_add(struct spec_world *w, const struct policy_sandbox *sb,
			const struct spec_pkt *p)
{
	struct spec_pending *q;

	if (w->n_pending == SPEC_PENDING_MAX) { /* forget the oldest, as a bound would */
		memmove(w->pending, w->pending + 1, sizeof(w->pending[0]) * (SPEC_PENDING_MAX - 1));
		w->n_pending--;
	}
	q = &w->pending[w->n_pending++];
	memset(q, 0, sizeof(*q));
	pc_strlcpy(q->sandbox, sb->name, sizeof(q->sandbox));
	q->client = p->src;
	q->cport = p->sport;
	q->resolver = p->dst;
	q->proto = p->proto;
	q->id = p->dns_id;
	q->qtype = p->qtype;
	pc_strlcpy(q->qname, p->qname, sizeof(q->qname));
	q->expires_ms = w->now_ms + 10000;
	q->owed = w->dns_defer;
}

/* A query judged by the guard (S8-S10); tcp: a refusal resets. */
static void dns_message(struct spec_world *w, const struct policy_sandbox *sb,
			const struct spec_pkt *p, struct spec_verdict *v)
{
	bool tcp = p->proto == IPPROTO_TCP;

	if (p->pl == SPEC_PL_DNS_SHAPE) {
		refuse(v, "S9", tcp ? SPEC_V_REJECT : SPEC_V_REFUSED, DNSQUERY, SPEC_R_ANY);
		return;
	}
	if (p->pl != SPEC_PL_DNS_QUERY) {
		refuse(v, "S10", SPEC_V_DROP | (tcp ? SPEC_V_REJECT : 0), DNSQUERY,
		       SPEC_R_DNS_MALFORMED);
		return;
	}
	if (!query_allowed(sb, p)) {
		refuse(v, "S9", tcp ? SPEC_V_REJECT : SPEC_V_REFUSED, DNSQUERY, SPEC_R_ANY);
		return;
	}
	say(v, "S8", SPEC_V_PASS);
	if (w->dns_defer) /* recorded with its answer, or when it gets none */
		v->rec = SPEC_REC_NONE;
	else
		must_rec(v, DNSQUERY, LOGREC_ALLOWED, SPEC_R_ANY);
	pending_add(w, sb, p);
}

/* S12a: a data segment of the sandbox's connection to a resolver, placed
 * in its stream at its sequence number (the receiver keeps the bytes it
 * got first, and frames the stream, not the segments). */
static void dnstcp_ordered(struct spec_world *w, const struct policy_sandbox *sb,
			   const struct spec_pkt *p, struct spec_verdict *v)
{
	size_t i = stream_find(w, p), o, same;
	int64_t off;

	if (i == w->n_streams || !w->streams[i].syn) {
		/* a whole message judged alone says nothing of where the
		 * resolver's framing is */
		refuse(v, "S12a", SPEC_V_REJECT, DNSQUERY, SPEC_R_NO_STREAM);
		return;
	}
	if (!w->streams[i].confirmed) {
		/* the resolver has not acknowledged this ISN: it may be in
		 * the connection from another one (it ignores such a SYN) */
		say(v, "S12a", SPEC_V_DROP);
		return;
	}
	off = (int32_t)(p->seq - w->streams[i].base);
	if (w->streams[i].fin && off + (int64_t)p->len > (int64_t)w->streams[i].fin_at) {
		refuse(v, "S12a", SPEC_V_REJECT, DNSQUERY, SPEC_R_OVERLAP); /* data past the FIN */
		stream_drop(w, i);
		return;
	}
	if (off < 0 || (size_t)off > w->streams[i].len) {
		say(v, "S12a", SPEC_V_DROP); /* before the stream, or past a hole: sent again */
		return;
	}
	if (w->streams[i].lost) {
		say_s12(v);
		return;
	}
	o = (size_t)off;
	same = w->streams[i].len - o < p->len ? w->streams[i].len - o : p->len;
	if (same && memcmp(w->streams[i].kept + o, p->data, same) != 0) {
		refuse(v, "S12a", SPEC_V_REJECT, DNSQUERY, SPEC_R_OVERLAP);
		stream_drop(w, i);
		return;
	}
	if (same == p->len) {
		/* sent again, the same bytes */
		say(v, "S12a", w->streams[i].clean ? SPEC_V_PASS : SPEC_V_PASS | SPEC_V_DROP);
		return;
	}
	if (w->streams[i].len + p->len - same > SPEC_STREAM_KEEP) {
		/* more than the model keeps (a fuzzed sequence): it says
		 * no more of this stream than S12 does of incomplete ones */
		w->streams[i].lost = true;
		w->streams[i].clean = false;
	}
	if (w->streams[i].lost) {
		say_s12(v);
		return;
	}
	memcpy(w->streams[i].kept + w->streams[i].len, p->data + same, p->len - same);
	w->streams[i].len += p->len - same;
	if (w->streams[i].clean && same && p->msg_at == same && p->pl == SPEC_PL_DNS_QUERY &&
	    p->len - same >= 2 &&
	    ((size_t)p->data[same] << 8 | p->data[same + 1]) + 2 == p->len - same) {
		/* the stream's tail sent again, then one whole message that
		 * starts where the judged ones end: in order from the
		 * stream's start, judged as if it came alone (two whole
		 * messages, the second starting inside the first) */
		dns_message(w, sb, p, v);
		if (!(v->may & SPEC_V_PASS))
			stream_drop(w, stream_find(w, p));
		return;
	}
	if (!w->streams[i].clean || same || !p->tcp_framed) {
		/* put together before it is judged (S12); the model does not
		 * parse what the parts make */
		w->streams[i].clean = false;
		say_s12(v);
		return;
	}
	if (p->len >= 2 && p->data[0] == 0 && p->data[1] == 0) {
		refuse(v, "S13", SPEC_V_REJECT, DNSQUERY, SPEC_R_ANY);
		stream_drop(w, i);
		return;
	}
	dns_message(w, sb, p, v);
	if (!(v->may & SPEC_V_PASS))
		stream_drop(w, stream_find(w, p)); /* refused or malformed */
	return;
}

/* S14, S14a: the streams' table is full. A sandbox at or over its share is
 * refused; one under it takes the place of the oldest stream of the
 * sandbox holding the most (over its share), which is forgotten: true. */
static bool stream_room(struct spec_world *w, const struct policy_sandbox *sb,
			struct spec_verdict *v)
{
	size_t share = quota_share(w, w->dnstcp_cap), most = 0;

	if (streams_of(w, sb->name) >= share) {
		refuse(v, "S14", SPEC_V_REJECT, DNSQUERY, SPEC_R_QUOTA);
		return false;
	}
	for (size_t i = 0; i < w->n_streams; i++)
		if (streams_of(w, w->streams[i].sandbox) > most)
			most = streams_of(w, w->streams[i].sandbox);
	for (size_t i = 0; most > share && i < w->n_streams; i++)
		if (streams_of(w, w->streams[i].sandbox) == most) {
			stream_drop(w, i); /* the oldest: the array is in order */
			return true;
		}
	refuse(v, "S14", SPEC_V_REJECT, DNSQUERY, SPEC_R_ANY); /* the table is full */
	return false;
}

static void port53(struct spec_world *w, const struct policy_sandbox *sb, const struct spec_pkt *p,
		   struct spec_verdict *v)
{
	if (p->proto == IPPROTO_UDP) {
		if (!sb) {
			refuse(v, "S4", SPEC_V_DROP | SPEC_V_REFUSED, DNSQUERY, SPEC_R_NOT_SANDBOX);
			v->reason2 = SPEC_R_DNS_MALFORMED;
			return;
		}
		if (!is_resolver(w, &p->dst)) {
			/* no answer can be made for what is not a query */
			refuse(v, "S6",
			       p->pl == SPEC_PL_DNS_QUERY ? SPEC_V_REFUSED
							  : SPEC_V_DROP | SPEC_V_REFUSED,
			       DNSQUERY, SPEC_R_NOT_RESOLVER);
			if (p->pl != SPEC_PL_DNS_QUERY)
				v->reason2 = SPEC_R_DNS_MALFORMED;
			return;
		}
		dns_message(w, sb, p, v);
		return;
	}
	/* TCP */
	if (!sb) {
		refuse(v, "S5", SPEC_V_REJECT, CONNECT | DNSQUERY, SPEC_R_NOT_SANDBOX);
		return;
	}
	if (!is_resolver(w, &p->dst)) {
		refuse(v, "S7", SPEC_V_REJECT, CONNECT | DNSQUERY, SPEC_R_NOT_RESOLVER);
		return;
	}
	if (urgent(p)) {
		/* the resolver's framing would part from the guard's */
		refuse(v, "S7a", SPEC_V_REJECT, CONNECT | DNSQUERY, SPEC_R_URGENT);
		stream_drop(w, stream_find(w, p));
		return;
	}
	if (syn_mptcp(p)) {
		/* the resolver would read by data sequence numbers */
		refuse(v, "S7b", SPEC_V_REJECT, CONNECT | DNSQUERY, SPEC_R_MPTCP);
		stream_drop(w, stream_find(w, p));
		return;
	}
	if (p->len == 0 && (p->tcp_flags & (F_SYN | F_ACK | F_RST)) == F_SYN) {
		/* the connection's stream begins at ISN+1 (S12a) */
		size_t i = stream_find(w, p);
		bool taken = false;

		if (i < w->n_streams && w->streams[i].syn && w->streams[i].base == p->seq + 1) {
			say(v, "S11", SPEC_V_PASS); /* the same SYN again */
			return;
		}
		stream_drop(w, i);
		if (w->dnstcp_cap && w->n_streams >= w->dnstcp_cap) {
			if (!stream_room(w, sb, v))
				return;
			taken = true;
		}
		if (w->n_streams == SPEC_FLOWS_MAX)
			abort(); /* the driver keeps sequences shorter than this */
		i = w->n_streams++;
		memset(&w->streams[i], 0, sizeof(w->streams[i]));
		pc_strlcpy(w->streams[i].sandbox, sb->name, POLICY_NAME_MAX);
		w->streams[i].proto = p->proto;
		w->streams[i].a = p->src;
		w->streams[i].ap = p->sport;
		w->streams[i].b = p->dst;
		w->streams[i].bp = p->dport;
		w->streams[i].syn = w->streams[i].clean = true;
		w->streams[i].ans_clean = true;
		w->streams[i].base = p->seq + 1;
		say(v, taken ? "S14a" : "S11", SPEC_V_PASS);
		return;
	}
	if (p->len == 0) {
		size_t i = stream_find(w, p);

		say(v, "S11", SPEC_V_PASS);
		if (p->tcp_flags & F_RST) { /* a RST forgets the stream */
			stream_drop(w, i);
		} else if ((p->tcp_flags & F_FIN) && i < w->n_streams && w->streams[i].syn) {
			int64_t at = (int32_t)(p->seq - w->streams[i].base);

			at = at < 0 ? 0 : at;
			if (!w->streams[i].fin || (size_t)at < w->streams[i].fin_at)
				w->streams[i].fin_at = (size_t)at;
			w->streams[i].fin = true;
		}
		return;
	}
	if (p->tcp_flags & F_SYN) {
		/* data in a SYN (Fast Open) reaches the resolver before any
		 * message boundary can be judged */
		refuse(v, "S12", SPEC_V_REJECT, CONNECT | DNSQUERY, SPEC_R_ANY);
		return;
	}
	dnstcp_ordered(w, sb, p, v);
}

/* ---- held flows: H1-H13 ----------------------------------------------------- */

/* The judged bytes make a whole first message: 1 approved, 0 incomplete,
 * -1 refused (*row, *r). */
static int held_classify(const struct spec_world *w, const struct policy_sandbox *sb,
			 struct spec_flow *f, const struct spec_pkt *p, enum spec_reason *r)
{
	size_t need;

	if ((f->kept[0] >= 0x14 && f->kept[0] <= 0x18 && f->kept[0] != 0x16) ||
	    (f->kept[0] & 0x80)) {
		/* another TLS record first (a server may skip it, then take a
		 * ClientHello no one judged), or an SSLv2-style hello */
		*r = SPEC_R_ANY;
		return -1;
	}
	if (f->kept[0] != 0x16) {
		/* not TLS: its address must still be host-allowed on this port */
		const char *name = host_allowed(w, sb, &f->peer, IPPROTO_TCP, f->peerport, true);

		if (!name) {
			*r = SPEC_R_ANY;
			return -1;
		}
		f->via = SPEC_VIA_HOST;
		pc_strlcpy(f->name, name, sizeof(f->name));
		*r = SPEC_R_NOT_TLS;
		return 1;
	}
	if (f->kept_len < 5)
		return 0;
	need = 5 + ((size_t)f->kept[3] << 8 | f->kept[4]);
	if (need > SPEC_KEEP_MAX) {
		*r = SPEC_R_TLS_BAD;
		return -1;
	}
	if (f->kept_len < need)
		return 0;
	switch (p->stream) {
	case SPEC_ST_CH:
		if (!sni_allowed(w, sb, &f->peer, f->peerport, p->stream_sni)) {
			*r = SPEC_R_SNI;
			return -1;
		}
		f->via = SPEC_VIA_SNI;
		pc_strlcpy(f->name, p->stream_sni, sizeof(f->name));
		*r = SPEC_R_SNI;
		return 1;
	case SPEC_ST_NOSNI:
		*r = SPEC_R_NO_SNI;
		return -1;
	default:
		*r = SPEC_R_TLS_BAD;
		return -1;
	}
}

/* A refusal of a held flow: recorded once; the flow stays, refused (H0). */
static void held_fail(struct spec_flow *f, struct spec_verdict *v, const char *row, unsigned may,
		      enum spec_reason r)
{
	refuse(v, row, may, CONNECT, r);
	f->st = SPEC_F_FAILED;
}

static void held_sent(struct spec_flow *f, const struct spec_pkt *p)
{
	uint32_t end = p->seq + (uint32_t)p->len + ((p->tcp_flags & F_FIN) ? 1 : 0);

	if ((int32_t)(end - f->snd_max) > 0)
		f->snd_max = end;
	if ((p->tcp_flags & F_FIN) && !f->fin_seen) {
		f->fin_seen = true;
		f->fin_at = p->seq + (uint32_t)p->len - (f->isn + 1);
	}
}

static void held_out(struct spec_world *w, const struct policy_sandbox *sb, struct spec_flow *f,
		     const struct spec_pkt *p, struct spec_verdict *v)
{
	const uint8_t *data = p->data;
	size_t n = p->len, m;
	bool fin = (p->tcp_flags & F_FIN) != 0;
	enum spec_reason r = SPEC_R_ANY;
	int32_t off;
	int rc;

	if (f->st == SPEC_F_FAILED) {
		say(v, "H0", SPEC_V_REJECT);
		v->rec = SPEC_REC_MAY;
		v->actions = CONNECT;
		v->outcome = LOGREC_REFUSED;
		return;
	}
	if (!sb || strcmp(sb->name, f->sandbox) != 0) {
		held_fail(f, v, "H1", SPEC_V_REJECT, SPEC_R_ANY);
		return;
	}
	if (f->st == SPEC_F_ACKED) {
		/* promoted: ALLOW from now on, or released while the mark
		 * does not act yet (H13) */
		say(v, "H13", SPEC_V_ALLOW | SPEC_V_FAST | SPEC_V_PASS);
		return; /* its allowed record went with the judged bytes (H11) */
	}
	if (w->now_ms > f->deadline_ms) {
		held_fail(f, v, "H2", SPEC_V_REJECT, SPEC_R_TIMEOUT);
		return;
	}
	if (urgent(p)) {
		/* the server may read other bytes than the judged ones */
		held_fail(f, v, "H2a", SPEC_V_REJECT, SPEC_R_URGENT);
		return;
	}
	if (p->tcp_flags & F_SYN) {
		if ((p->tcp_flags & F_ACK) || n) {
			say(v, "H4", SPEC_V_DROP);
			return;
		}
		if (p->mptcp) {
			/* the first went without: this one may reach the server */
			held_fail(f, v, "H5a", SPEC_V_REJECT, SPEC_R_MPTCP);
			return;
		}
		if (p->seq == f->isn) {
			say(v, "H5", SPEC_V_PASS);
			return;
		}
		held_fail(f, v, "H6", SPEC_V_REJECT, SPEC_R_TAMPER);
		return;
	}
	if (p->tcp_flags & F_RST) {
		/* the flow stays: a SYN after it must carry the held ISN; a
		 * RST carrying bytes is no client's (they would pass unjudged) */
		say(v, "H3", n ? SPEC_V_DROP : SPEC_V_PASS);
		return;
	}
	if (n == 0 && !fin) {
		say(v, "H7", SPEC_V_PASS);
		return;
	}
	if (!f->srv_known) {
		/* the server may hold another connection on these addresses */
		held_fail(f, v, "H7", SPEC_V_REJECT, SPEC_R_ANY);
		return;
	}
	off = (int32_t)(p->seq - (f->isn + 1));
	if (off < 0) {
		held_fail(f, v, "H9", SPEC_V_REJECT, SPEC_R_ANY);
		return;
	}
	/* the stream ends at its FIN: nothing is judged where the server has
	 * the FIN instead of bytes */
	if (f->fin_seen &&
	    ((uint32_t)off + n > f->fin_at || (fin && (uint32_t)off + n != f->fin_at))) {
		held_fail(f, v, "H8", SPEC_V_REJECT, SPEC_R_ANY);
		return;
	}
	if ((size_t)off < f->kept_len) {
		m = f->kept_len - (size_t)off < n ? f->kept_len - (size_t)off : n;
		if (memcmp(f->kept + off, data, m) != 0) {
			held_fail(f, v, "H8", SPEC_V_REJECT, SPEC_R_TAMPER);
			return;
		}
		data += m;
		n -= m;
		off += (int32_t)m;
		if (fin && n == 0 && (size_t)off < f->kept_len) {
			held_fail(f, v, "H8", SPEC_V_REJECT, SPEC_R_ANY);
			return;
		}
	}
	if (n == 0 || f->st == SPEC_F_APPROVED) {
		/* the same bytes again, or bytes past the approved ones: the
		 * server cannot deliver them before those */
		say(v, n == 0 ? "H10" : "H12", SPEC_V_PASS);
		held_sent(f, p);
		return;
	}
	if ((size_t)off > f->kept_len) {
		say(v, "H9", SPEC_V_DROP); /* a gap: the sender sends it again in order */
		return;
	}
	if (f->kept_len + n > SPEC_KEEP_MAX) {
		held_fail(f, v, "H11", SPEC_V_REJECT, SPEC_R_TLS_BAD);
		return;
	}
	memcpy(f->kept + f->kept_len, data, n);
	f->kept_len += n;
	held_sent(f, p);
	rc = held_classify(w, sb, f, p, &r);
	if (rc == 0) {
		say(v, "H11", SPEC_V_PASS);
		return;
	}
	if (rc < 0) {
		held_fail(f, v, "H11", SPEC_V_REJECT, r);
		return;
	}
	say(v, "H11", SPEC_V_PASS);
	/* no record, no bytes to the server (A9): the approval is recorded
	 * before the judged bytes pass, not at the promotion */
	v->rec = SPEC_REC_MUST;
	v->actions = CONNECT;
	v->outcome = LOGREC_ALLOWED;
	v->reason = r;
	v->approval_owed_here = true;
	f->st = SPEC_F_APPROVED;
}

/* The approved flow, acknowledged: judged again under the policy in force. */
static bool held_still_allowed(const struct spec_world *w, const struct spec_flow *f)
{
	const struct policy_sandbox *sb = policy_sandbox_match(w->pol, &f->from);

	if (!sb || strcmp(sb->name, f->sandbox) != 0)
		return false;
	if (f->via == SPEC_VIA_SNI)
		return sni_allowed(w, sb, &f->peer, f->peerport, f->name);
	return host_allowed(w, sb, &f->peer, IPPROTO_TCP, f->peerport, true) != NULL;
}

static void held_in(struct spec_world *w, struct spec_flow *f, const struct spec_pkt *p,
		    struct spec_verdict *v)
{
	uint32_t rel, nxt, n = (uint32_t)p->len + ((p->tcp_flags & F_FIN) ? 1 : 0);
	uint32_t judged_end = f->isn + 1 + (uint32_t)f->kept_len;
	bool in_order;

	if (f->st == SPEC_F_FAILED) {
		say(v, "H0", SPEC_V_DROP);
		return;
	}
	if (f->st == SPEC_F_ACKED) {
		say(v, "H13", SPEC_V_PASS | SPEC_V_FAST);
		return;
	}
	if (w->now_ms > f->deadline_ms) {
		held_fail(f, v, "H2", SPEC_V_DROP, SPEC_R_TIMEOUT);
		return;
	}
	if (p->tcp_flags & F_RST) {
		say(v, "H13", SPEC_V_PASS);
		return;
	}
	if (p->tcp_flags & F_SYN) {
		/* the first SYN-ACK for the held ISN fixes the server's */
		say(v, "H13", SPEC_V_DROP);
		if (!(p->tcp_flags & F_ACK) || p->ack != f->isn + 1)
			return;
		if (!f->srv_known) {
			f->srv_known = true;
			f->srv_isn = p->seq;
			f->srv_nxt = p->seq + 1;
		} else if (p->seq != f->srv_isn) {
			return;
		}
		v->may = SPEC_V_PASS;
		return;
	}
	if (!f->srv_known) {
		say(v, "H13", SPEC_V_DROP);
		return;
	}
	/* an acknowledgement counts only from a reply inside the server's
	 * sequence space as it came in order, and only up to what was sent */
	rel = p->seq - (f->srv_isn + 1);
	nxt = f->srv_nxt - (f->srv_isn + 1);
	in_order = (int32_t)rel >= 0 && rel <= nxt;
	if (in_order && rel + n > nxt)
		f->srv_nxt = f->srv_isn + 1 + rel + n;
	if (f->st == SPEC_F_APPROVED && f->via == SPEC_VIA_SNI && !f->srv_first && in_order &&
	    rel == 0 && p->len) {
		/* H13a: a TLS record that is a ServerHello (handshake type 2)
		 * with RFC 8446's HelloRetryRequest random */
		static const uint8_t hrr[32] = {0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
						0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
						0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
						0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c};
		bool hello = p->data[0] == 0x16 && (p->len < 6 || p->data[5] == 0x02);

		if (hello && p->len >= 43 && memcmp(p->data + 11, hrr, sizeof(hrr)) == 0) {
			held_fail(f, v, "H13a", SPEC_V_DROP, SPEC_R_ANY);
			return;
		}
		f->srv_first = !hello || p->len >= 43; /* else: not promoted on it */
	}
	say(v, "H13", SPEC_V_PASS);
	if (f->st == SPEC_F_APPROVED && in_order && (p->tcp_flags & F_ACK) &&
	    (f->via != SPEC_VIA_SNI || f->srv_first) && (int32_t)(p->ack - judged_end) >= 0 &&
	    (int32_t)(p->ack - f->snd_max) <= 0) {
		if (!held_still_allowed(w, f)) {
			held_fail(f, v, "H13", SPEC_V_DROP, SPEC_R_ANY);
			return;
		}
		v->may = SPEC_V_PASS | SPEC_V_ALLOW; /* unrecorded: H11 recorded it */
		f->st = SPEC_F_ACKED;
		f->promoted_ms = w->now_ms ? w->now_ms : 1;
	}
}

/* ---- new flows: S16-S26 ----------------------------------------------------- */

/* A flow counted in the held table: surely (lo), or perhaps — refused
 * and promoted ones linger a while (hi). */
static bool held_surely(const struct spec_flow *h)
{
	return h->used && (h->st == SPEC_F_HELD || h->st == SPEC_F_APPROVED);
}

static bool held_perhaps(const struct spec_flow *h)
{
	return held_surely(h) || (h->used && (h->st == SPEC_F_ACKED || h->st == SPEC_F_FAILED));
}

/* The flows sandbox surely holds in the held table. */
static size_t held_of(const struct spec_world *w, const char *sandbox)
{
	size_t n = 0;

	for (size_t i = 0; i < SPEC_FLOWS_MAX; i++)
		n += held_surely(&w->flows[i]) && strcmp(w->flows[i].sandbox, sandbox) == 0;
	return n;
}

/* S23: room in the held table for a new flow of sb, which is sure of its
 * share and may use any room left. A full table gives a sandbox under its
 * share the place of the oldest flow not yet promoted of the sandbox
 * holding the most (over its share): that flow is forgotten. true: held
 * (S24 goes on); false: the verdict is said here (refused, or either when
 * what the engine still counts is not known). */
static bool held_room(struct spec_world *w, const struct policy_sandbox *sb, struct spec_verdict *v,
		      bool *took)
{
	size_t lo = 0, hi = 0, all_lo = 0, all_hi = 0, share = quota_share(w, w->held_cap);
	size_t most = 0;
	struct spec_flow *victim = NULL;

	for (size_t i = 0; i < SPEC_FLOWS_MAX; i++) {
		const struct spec_flow *h = &w->flows[i];
		bool mine = h->used && strcmp(h->sandbox, sb->name) == 0;

		all_lo += held_surely(h);
		all_hi += held_perhaps(h);
		lo += mine && held_surely(h);
		hi += mine && held_perhaps(h);
	}
	if (all_hi < w->held_cap)
		return true; /* room, whoever holds it */
	if (all_lo >= w->held_cap && lo >= share) {
		refuse(v, "S23", SPEC_V_REJECT, CONNECT, SPEC_R_QUOTA);
		return false;
	}
	if (all_lo == all_hi && hi < share) {
		/* full, and every count known: the sandbox holding the most */
		for (size_t i = 0; i < SPEC_FLOWS_MAX; i++)
			if (held_surely(&w->flows[i]) && held_of(w, w->flows[i].sandbox) > most)
				most = held_of(w, w->flows[i].sandbox);
		for (size_t i = 0; most > share && i < SPEC_FLOWS_MAX; i++) {
			struct spec_flow *h = &w->flows[i];

			if (held_surely(h) && (!victim || h->born < victim->born) &&
			    held_of(w, h->sandbox) == most)
				victim = h;
		}
		if (victim) {
			flow_forget(victim);
			*took = true; /* S23a */
			return true;
		}
	}
	say(v, "S23", SPEC_V_HOLD | SPEC_V_REJECT);
	v->rec = SPEC_REC_MAY;
	v->actions = CONNECT;
	v->outcome = LOGREC_REFUSED;
	return false;
}

static void new_flow(struct spec_world *w, const struct policy_sandbox *sb,
		     const struct spec_pkt *p, struct spec_verdict *v)
{
	const char *name;
	struct spec_flow *f;
	bool took = false;

	if (!sb) {
		refuse(v, "S16", SPEC_V_REJECT, CONNECT, SPEC_R_NOT_SANDBOX);
		return;
	}
	if (p->proto == IPPROTO_TCP && (p->tcp_flags & (F_SYN | F_ACK | F_RST | F_FIN)) != F_SYN) {
		refuse(v, "S17", SPEC_V_REJECT, CONNECT, SPEC_R_NO_CONN);
		return;
	}
	if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP) {
		refuse(v, "S18", SPEC_V_REJECT, CONNECT, SPEC_R_PROTO);
		return;
	}
	if (in_any_sandbox(w, &p->dst)) {
		refuse(v, "S19", SPEC_V_REJECT, CONNECT, SPEC_R_SANDBOXES);
		return;
	}
	if (policy_cidr_allows(sb, &p->dst, p->proto, p->dport, NULL)) {
		say(v, "S20", SPEC_V_ALLOW);
		must_rec(v, CONNECT, LOGREC_ALLOWED, SPEC_R_CIDR);
		f = flow_new(w, p, sb, SPEC_F_ALLOWED);
		f->via = SPEC_VIA_CIDR;
		return;
	}
	name = host_allowed(w, sb, &p->dst, p->proto, p->dport, false);
	if (name && p->proto == IPPROTO_TCP) {
		/* the secret-bound name is preferred (docs/dnsguard.md) */
		const char *names[32];
		size_t n = learned_names(w, sb->name, &p->dst, false, names, 32);

		for (size_t i = 0; i < n; i++) {
			if (policy_host_allows(sb, names[i], IPPROTO_TCP, p->dport, NULL) &&
			    policy_secret_for(sb, names[i], p->dport)) {
				say(v, "S21", SPEC_V_VAULT);
				must_rec(v, CONNECT, LOGREC_ALLOWED, SPEC_R_HOST);
				f = flow_new(w, p, sb, SPEC_F_ALLOWED);
				f->via = SPEC_VIA_HOST;
				f->vault = true;
				pc_strlcpy(f->name, names[i], sizeof(f->name));
				return;
			}
		}
		if (p->len) {
			refuse(v, "S22", SPEC_V_REJECT, CONNECT, SPEC_R_FASTOPEN);
			return;
		}
		if (urgent(p)) {
			/* the flow would be held: judged by its bytes (H2a) */
			refuse(v, "S22a", SPEC_V_REJECT, CONNECT, SPEC_R_URGENT);
			return;
		}
		if (syn_mptcp(p)) {
			/* the flow would be held: judged by its bytes */
			refuse(v, "S22b", SPEC_V_REJECT, CONNECT, SPEC_R_MPTCP);
			return;
		}
		if (w->held_cap && !held_room(w, sb, v, &took)) {
			/* not sure which, or refused: not kept either way (the
			 * driver sends no more of it) */
			return;
		}
		say(v, took ? "S23a" : "S24", SPEC_V_HOLD);
		f = flow_new(w, p, sb, SPEC_F_HELD);
		f->via = SPEC_VIA_HOST;
		pc_strlcpy(f->name, name, sizeof(f->name));
		f->isn = p->seq;
		f->snd_max = p->seq + 1;
		f->from = p->from;
		f->deadline_ms = w->now_ms + w->cfg->engine.sni_timeout_ms;
		f->kept = malloc(SPEC_KEEP_MAX);
		if (!f->kept)
			abort();
		return;
	}
	if (name) {
		say(v, "S25", SPEC_V_ALLOW);
		must_rec(v, CONNECT, LOGREC_ALLOWED, SPEC_R_HOST);
		f = flow_new(w, p, sb, SPEC_F_ALLOWED);
		f->via = SPEC_VIA_HOST;
		pc_strlcpy(f->name, name, sizeof(f->name));
		return;
	}
	refuse(v, "S26", SPEC_V_REJECT, CONNECT, SPEC_R_ANY);
}

/* ---- from a sandbox --------------------------------------------------------- */

static bool to_gateway(const struct spec_world *w, const struct pc_addr *a)
{
	for (size_t i = 0; i < w->n_gateway; i++)
		if (pc_addr_eq(&w->gateway[i], a))
			return true;
	return false;
}

static void from_sandbox(struct spec_world *w, const struct spec_pkt *p, struct spec_verdict *v)
{
	const struct policy_sandbox *sb;
	bool reply = false,
	     dns = (p->proto == IPPROTO_UDP || p->proto == IPPROTO_TCP) && p->dport == 53;
	struct spec_flow *f = flow_find(w, p, &reply);

	/* the ruleset (A2, A4, A5): a held flow's conntrack entry keeps its
	 * mark HELD, refused (FAILED) or not */
	if (f && f->st == SPEC_F_ALLOWED) {
		say(v, "S1", SPEC_V_FAST);
		return;
	}
	if (f && f->st == SPEC_F_ACKED && !p->port_known) {
		/* promoted: the fast path once the mark acts (A2, any stamped
		 * port); before that the engine drops what no port it knows sent */
		say(v, "H13", SPEC_V_FAST | SPEC_V_DROP);
		v->rec = SPEC_REC_MAY;
		v->actions = CONNECT;
		v->outcome = LOGREC_REFUSED;
		return;
	}
	if (f && f->st == SPEC_F_CUT) {
		/* conntrack's entry is gone. The first packet that reaches the
		 * engine's held-flow lookup may be dropped while it remembers
		 * the promotion (R1); after it, a packet of no flow. */
		if (to_gateway(w, &p->dst) || p->ct != SPEC_CT_NEW) {
			say(v, "S27", SPEC_V_RDROP);
			return;
		}
		if (!p->port_known) {
			refuse(v, "S2", SPEC_V_DROP, CONNECT, SPEC_R_UNKNOWN_PORT);
			return;
		}
		flow_forget(f);
		from_sandbox(w, p, v);
		v->row = "R1";
		v->may |= SPEC_V_DROP;
		v->rec = SPEC_REC_MAY;
		return;
	}
	if (!dns && !f) {
		if (to_gateway(w, &p->dst) || p->ct != SPEC_CT_NEW) {
			say(v, "S27", SPEC_V_RDROP);
			return;
		}
	}
	/* the engine */
	if (!p->port_known) {
		refuse(v, "S2", SPEC_V_DROP, CONNECT, SPEC_R_UNKNOWN_PORT);
		return;
	}
	if (p->malformed) {
		refuse(v, "S3", SPEC_V_DROP, CONNECT, SPEC_R_MALFORMED);
		return;
	}
	sb = policy_sandbox_match(w->pol, &p->from);
	if (dns) {
		port53(w, sb, p, v);
		return;
	}
	if (f && f->st == SPEC_F_ACKED && p->ct == SPEC_CT_NEW && p->len == 0 &&
	    (p->tcp_flags & (F_SYN | F_ACK | F_RST | F_FIN)) == F_SYN && p->seq != f->isn) {
		/* H6a: conntrack opened a new connection on a promoted flow's
		 * addresses; the server acknowledged every judged byte of the
		 * first, so the SYN is a new flow, judged afresh (S20-S24). The
		 * engine may have forgotten the promotion already: DROP (R1). */
		flow_forget(f);
		new_flow(w, sb, p, v);
		v->row = "H6a";
		v->may |= SPEC_V_DROP;
		v->rec = SPEC_REC_MAY;
		return;
	}
	if (f) {
		held_out(w, sb, f, p, v);
		return;
	}
	new_flow(w, sb, p, v);
}

/* ---- toward a sandbox: S40-S44 ---------------------------------------------- */

static const struct policy_sandbox *sandbox_of_addr(const struct spec_world *w,
						    const struct pc_addr *a, size_t k)
{
	for (size_t i = 0; i < policy_sandbox_count(w->pol); i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(w->pol, i);

		for (size_t j = 0; j < sb->match.n_sources; j++)
			if (pc_prefix_contains(&sb->match.sources[j], a) && k-- == 0)
				return sb;
	}
	return NULL;
}

static void learn(struct spec_world *w, const char *sandbox, const struct pc_addr *a,
		  const char *name, uint32_t ttl)
{
	uint32_t t = ttl < w->cfg->dns.ttl_min	 ? w->cfg->dns.ttl_min
		     : ttl > w->cfg->dns.ttl_max ? w->cfg->dns.ttl_max
						 : ttl;
	uint64_t expires = w->now_ms + (uint64_t)t * 1000;
	uint32_t key = addr_key(a);
	struct spec_learned *l;
	uint16_t slot;

	for (size_t i = 0; i < w->n_learned; i++) {
		slot = w->learned_order[i];
		l = &w->learned[slot];
		if (w->learned_key[slot] == key && addr_same(&l->addr, a) &&
		    strcmp(l->sandbox, sandbox) == 0 && strcasecmp(l->name, name) == 0) {
			/* learned again: the newest, later expiry */
			if (expires > l->expires_ms)
				l->expires_ms = expires;
			memmove(w->learned_order + i, w->learned_order + i + 1,
				sizeof(w->learned_order[0]) * (w->n_learned - i - 1));
			w->learned_order[w->n_learned - 1] = slot;
			return;
		}
	}
	if (w->n_learned == SPEC_LEARNED_MAX) { /* the oldest's slot is reused */
		slot = w->learned_order[0];
		memmove(w->learned_order, w->learned_order + 1,
			sizeof(w->learned_order[0]) * (SPEC_LEARNED_MAX - 1));
		w->n_learned--;
	} else {
		slot = (uint16_t)w->n_learned; /* slots fill in order until the first eviction */
	}
	w->learned_order[w->n_learned++] = slot;
	l = &w->learned[slot];
	pc_strlcpy(l->sandbox, sandbox, sizeof(l->sandbox));
	l->addr = *a;
	pc_strlcpy(l->name, name, sizeof(l->name));
	l->expires_ms = expires;
	w->learned_key[slot] = key;
}

/* S42b: a resolver's data segment of DNS over TCP is placed in its
 * connection's answer stream, from the resolver's ISN + 1 on: the sandbox
 * frames the stream, not the segments, so a segment holding one whole
 * message is judged as it is only where the next message begins. true:
 * that case (S40, S41 go on); false: the verdict is said here — every
 * other segment is put together before anything of it is judged, which
 * the model does not follow (it teaches the model nothing). */
static bool answer_placed(struct spec_world *w, const struct spec_pkt *p, struct spec_verdict *v)
{
	size_t i = stream_find_answer(w, p);
	int64_t off;

	if (i == w->n_streams) {
		refuse(v, "S42b", SPEC_V_DROP, DNSLEARN, SPEC_R_NO_STREAM);
		return false;
	}
	if (!w->streams[i].ans_known) {
		say(v, "S42b", SPEC_V_DROP); /* before the resolver's SYN-ACK */
		return false;
	}
	off = (int32_t)(p->seq - w->streams[i].ans_base);
	if (w->streams[i].ans_clean && off == (int64_t)w->streams[i].ans_next && p->tcp_framed)
		return true;
	if (!(w->streams[i].ans_clean && off >= 0 &&
	      (size_t)off + p->len <= w->streams[i].ans_next))
		w->streams[i].ans_clean = false; /* not a judged answer sent again */
	say(v, "S42b", SPEC_V_PASS | SPEC_V_DROP);
	v->rec = SPEC_REC_MAY;
	v->actions = DNSLEARN | DNSQUERY;
	v->outcome_either = true;
	return false;
}

static void answer(struct spec_world *w, const struct spec_pkt *p, struct spec_verdict *v)
{
	const struct policy_sandbox *sb = NULL;
	size_t learned = 0, special = 0, qi = 0;
	bool found = false, owed;

	if (urgent(p)) {
		/* the sandbox's framing would part from the guard's: the
		 * connection's streams are forgotten */
		refuse(v, "S42a", SPEC_V_DROP, DNSLEARN, SPEC_R_URGENT);
		stream_drop(w, stream_find_answer(w, p));
		return;
	}
	if (p->proto == IPPROTO_TCP && p->len == 0) {
		size_t i = stream_find_answer(w, p);

		say(v, "S42", sandbox_of_addr(w, &p->dst, 0) ? SPEC_V_PASS : SPEC_V_DROP);
		if (!sandbox_of_addr(w, &p->dst, 0) || i == w->n_streams)
			return;
		if (p->tcp_flags & F_RST) {
			stream_drop(w, i); /* the resolver ended the connection */
		} else if ((p->tcp_flags & (F_SYN | F_ACK)) == (F_SYN | F_ACK) &&
			   w->streams[i].base == p->ack) {
			/* the resolver took the sandbox's ISN (S12a), and its
			 * first SYN-ACK for it fixes where its answers begin */
			w->streams[i].confirmed = true;
			if (!w->streams[i].ans_known) {
				w->streams[i].ans_known = true;
				w->streams[i].ans_base = p->seq + 1;
			}
		} else if (p->tcp_flags & F_FIN) {
			w->streams[i].ans_clean = false; /* no answer byte may follow */
		}
		return;
	}
	if (p->proto == IPPROTO_TCP && !answer_placed(w, p, v))
		return;
	if (p->pl == SPEC_PL_DNS_ANSWER && (p->proto == IPPROTO_UDP || p->tcp_framed)) {
		for (size_t k = 0; !found && (sb = sandbox_of_addr(w, &p->dst, k)) != NULL; k++) {
			for (qi = 0; qi < w->n_pending; qi++) {
				const struct spec_pending *q = &w->pending[qi];

				if (strcmp(q->sandbox, sb->name) == 0 &&
				    pc_addr_eq(&q->client, &p->dst) && q->cport == p->dport &&
				    pc_addr_eq(&q->resolver, &p->src) && q->proto == p->proto &&
				    q->id == p->dns_id && q->qtype == p->qtype &&
				    q->expires_ms > w->now_ms &&
				    strcasecmp(q->qname, p->qname) == 0) {
					found = true;
					break;
				}
			}
		}
	}
	if (!found) {
		if (p->proto == IPPROTO_TCP && !p->tcp_framed && p->pl == SPEC_PL_DATA) {
			say(v, "S42", SPEC_V_DROP); /* kept until whole */
			return;
		}
		refuse(v, "S41", SPEC_V_DROP, DNSLEARN, SPEC_R_ANY);
		return;
	}
	owed = w->pending[qi].owed;
	if (p->proto == IPPROTO_TCP) /* judged: the next answer begins past it */
		w->streams[stream_find_answer(w, p)].ans_next += p->len;
	memmove(w->pending + qi, w->pending + qi + 1,
		sizeof(w->pending[0]) * (w->n_pending - qi - 1));
	w->n_pending--;
	for (size_t i = 0; i < p->n_answer; i++) {
		const struct pc_addr *a = &p->answer[i];

		if (a->family != (p->qtype == 28 ? AF_INET6 : AF_INET))
			continue;
		if (!policy_name_allowed(sb, p->qname, NULL))
			continue;
		if (spec_addr_special(w, a) && !cidr_contains(sb, a)) {
			special++;
			continue;
		}
		learn(w, sb->name, a, p->qname, p->answer_ttl);
		learned++;
	}
	say(v, "S40", SPEC_V_PASS);
	if (owed) { /* the query's own record, with what its answer taught */
		must_rec(v, DNSQUERY, LOGREC_ALLOWED, special ? SPEC_R_SPECIAL : SPEC_R_ANY);
		if (special)
			v->may |= SPEC_V_DROP;
	} else if (special) {
		v->may |= SPEC_V_DROP;
		must_rec(v, DNSLEARN | DNSQUERY, LOGREC_NONE, SPEC_R_SPECIAL);
		v->outcome_either = true;
	} else if (learned) {
		must_rec(v, DNSLEARN | DNSQUERY, LOGREC_NONE, SPEC_R_ANY);
		v->outcome_either = true; /* dns-learn: none; a deferred dns-query: allowed */
	}
}

static void to_sandbox(struct spec_world *w, const struct spec_pkt *p, struct spec_verdict *v)
{
	bool reply = false;
	struct spec_flow *f = flow_find(w, p, &reply);

	if (f && reply && f->st == SPEC_F_CUT) {
		say(v, "S44", SPEC_V_RDROP); /* its conntrack entry is gone */
		return;
	}
	if (f && reply && f->st == SPEC_F_ALLOWED) {
		say(v, "S44", SPEC_V_FAST);
		return;
	}
	if (f && reply) {
		held_in(w, f, p, v);
		return;
	}
	if ((p->proto == IPPROTO_UDP || p->proto == IPPROTO_TCP) && p->sport == 53 &&
	    is_resolver(w, &p->src) && p->ct == SPEC_CT_EST) {
		answer(w, p, v);
		return;
	}
	say(v, "S44", SPEC_V_RDROP);
}

void spec_judge(struct spec_world *w, const struct spec_pkt *p, struct spec_verdict *v)
{
	if (p->dir == SPEC_OUT)
		from_sandbox(w, p, v);
	else
		to_sandbox(w, p, v);
}

bool spec_describes(struct spec_world *w, const struct spec_pkt *p)
{
	bool reply = false;
	struct spec_flow *f;
	int32_t off;
	size_t m, n = p->len;
	uint8_t first;

	if (p->dir != SPEC_OUT || p->proto != IPPROTO_TCP || n == 0 ||
	    (p->tcp_flags & (F_SYN | F_RST)))
		return true;
	f = flow_find(w, p, &reply);
	if (!f || reply || f->st != SPEC_F_HELD || !f->kept)
		return true;
	off = (int32_t)(p->seq - (f->isn + 1));
	if (off < 0 || (size_t)off > f->kept_len)
		return true; /* refused, or a gap: nothing is added */
	m = f->kept_len - (size_t)off < n ? f->kept_len - (size_t)off : n;
	if (memcmp(f->kept + off, p->data, m) != 0 || (size_t)off + n <= f->kept_len)
		return true; /* refused (H8), or nothing new (H10) */
	first = f->kept_len ? f->kept[0] : p->data[0];
	if (first != 0x16)
		return true; /* decided by its first byte */
	return p->stream_all && (size_t)off + n <= p->stream_all_len &&
	       memcmp(f->kept, p->stream_all, f->kept_len) == 0 &&
	       memcmp(p->data, p->stream_all + off, n) == 0;
}

/* ---- the vault's requests: V1, V3, V4 ----------------------------------------- */

const char *spec_vault_refuses(const struct spec_world *w, const struct spec_vreq *q, char *why,
			       size_t n)
{
	const struct policy_sandbox *sb =
	    q->sandbox ? policy_sandbox_by_name(w->pol, q->sandbox) : NULL;
	bool mine = false;

	for (size_t i = 0; sb && i < sb->match.n_sources; i++)
		mine |= pc_prefix_contains(&sb->match.sources[i], &q->src) != 0;
	if (!mine) {
		snprintf(why, n, "the source is not a sandbox of that name");
		return "V1";
	}
	if (!q->sni || !q->sni[0]) {
		snprintf(why, n, "no server name");
		return "V1";
	}
	if (!policy_host_allows(sb, q->sni, IPPROTO_TCP, q->port, NULL)) {
		snprintf(why, n, "%s is not allowed to this sandbox on port %u", q->sni, q->port);
		return "V1";
	}
	for (const char *p = q->secrets; p && *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char name[POLICY_NAME_MAX];
		const struct policy_secret *s;
		const char *names[32];
		size_t k;
		bool learned = false;

		if (len >= sizeof(name)) {
			snprintf(why, n, "a secret name longer than any");
			return "V4";
		}
		memcpy(name, p, len);
		name[len] = '\0';
		p = e ? e + 1 : p + len;
		s = policy_secret_by_name(sb, name);
		if (!s) {
			snprintf(why, n, "%s is not a secret of this sandbox", name);
			return "V4";
		}
		if (strcasecmp(s->host, q->sni) != 0 || s->port != q->port) {
			snprintf(why, n, "%s is bound to %s:%u, not %s:%u", name, s->host, s->port,
				 q->sni, q->port);
			return "V4";
		}
		/* the flow went to the vault because its destination was
		 * learned for the secret's host (S21) */
		k = learned_names(w, sb->name, &q->dst, true, names, 32);
		for (size_t i = 0; i < k; i++)
			learned |= strcasecmp(names[i], s->host) == 0;
		if (!learned) {
			snprintf(why, n, "the original destination was not learned for %s (S21)",
				 s->host);
			return "V3";
		}
	}
	return NULL;
}

/* ---- reload: R1 ------------------------------------------------------------- */

void spec_world_reload(struct spec_world *w, const struct policy *pol)
{
	w->pol = pol;
}

bool spec_reload_keeps(struct spec_world *w, uint8_t proto, const struct pc_addr *a, uint16_t ap,
		       const struct pc_addr *b, uint16_t bp)
{
	struct spec_pkt p = {.proto = proto, .src = *a, .sport = ap, .dst = *b, .dport = bp};
	const struct policy_sandbox *sb;
	bool reply, keep = false;
	struct spec_flow *f = flow_find(w, &p, &reply);

	if (!f || (f->st != SPEC_F_ALLOWED && f->st != SPEC_F_ACKED))
		return true;
	sb = policy_sandbox_by_name(w->pol, f->sandbox);
	if (sb && !in_any_sandbox(w, b)) {
		switch (f->via) {
		case SPEC_VIA_CIDR:
			keep = !f->vault && policy_cidr_allows(sb, b, proto, bp, NULL);
			break;
		case SPEC_VIA_SNI:
			keep = !f->vault && sni_allowed(w, sb, b, bp, f->name);
			break;
		case SPEC_VIA_HOST: {
			const char *name = host_allowed(w, sb, b, proto, bp, true);
			bool vault = false;

			if (name && proto == IPPROTO_TCP) {
				const char *names[32];
				size_t n = learned_names(w, sb->name, b, true, names, 32);

				for (size_t i = 0; i < n; i++)
					if (policy_host_allows(sb, names[i], proto, bp, NULL) &&
					    policy_secret_for(sb, names[i], bp))
						vault = true;
			}
			keep = name && vault == f->vault;
			break;
		}
		}
	}
	if (!keep && f->promoted_ms)
		f->st = SPEC_F_CUT; /* its next packet may be dropped silently (R1) */
	else if (!keep)
		flow_forget(f);
	return keep;
}
