/* The decision: one queued packet in, one verdict (and at most one log
 * record) out. Default deny; every internal failure refuses. What reaches
 * here is fixed by the ruleset: new flows and every DNS message from the
 * sandboxes, every packet of held flows (their servers' TCP replies too,
 * in forward, until promotion), and resolver answers toward them. */
#include "engine/engine_int.h"

#include <linux/netfilter.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Urgent data (docs/spec.md, S7a, S22a, S42a, H2a). A stream the guard
 * judges by its bytes — a held flow until its promotion, DNS over TCP for
 * its whole life — must reach the receiver's application as the guard read
 * it. With URG (or a non-zero urgent pointer, which some stacks read even
 * without the flag) the receiver's TCP may take a byte out of the stream
 * (Linux without SO_OOBINLINE), keep it (with it), or point at another
 * byte (RFC 793 and RFC 1122 disagree on where the pointer points, and
 * stacks follow either): the bytes judged are then not the bytes served.
 * No client needs urgent data there, so the segment is refused rather
 * than rewritten (clearing the flag would still leave the sender's
 * stream and the guard's to disagree about what was sent). */
static bool tcp_urgent(const struct pkt *p)
{
	return p->proto == IPPROTO_TCP && ((p->tcp_flags & TH_URG) || p->tcp_urp != 0);
}

/* MPTCP (docs/spec.md S7b, S22b, H5a; pkt.tcp_syn_mptcp, set by packet.c).
 * A SYN with MP_CAPABLE makes an MPTCP server's application read the data
 * stream its MPTCP layer assembles by the data sequence numbers of DSS
 * options — not the TCP stream the guard judges: bytes sent after the
 * judged ones can be mapped before them (H12 rests on "the server cannot
 * deliver them before the approved ones"), and DNS messages framed by the
 * guard need not be the resolver's. MPTCP is negotiated in the SYN alone:
 * without it the server's socket is plain TCP and ignores the option
 * later. So on a stream judged by its bytes a SYN whose options may carry
 * it (or cannot be read to their end) is refused; the client can connect
 * again with plain TCP. Flows judged at their SYN (a cidr entry, the
 * vault's) keep MPTCP: nothing in their bytes is judged. */

const char *decision_sandbox(const struct decision *d)
{
	return d->rec.sandbox ? d->rec.sandbox : "";
}

void decision_clear(struct decision *d)
{
	free(d->new_pkt);
	d->new_pkt = NULL;
	d->new_pkt_len = 0;
	d->v = VK_DROP;
	d->has_rec = false;
	d->pledged = false;
	d->send_reply = false;
	d->register_flow = false;
	d->quota = QUOTA_NONE;
	d->given_up[0] = '\0';
	d->given_up_kind = QUOTA_NONE;
	d->learn = false;
	d->promote = false;
	d->held_judged = false;
	d->held_tls = false;
	d->dnstcp_judged = false;
	d->ans.query_owed = false; /* read when its record fails (queue.c) */
	memset(&d->rec, 0, sizeof(d->rec));
	d->kept_len = 0;
	d->answers[0] = d->reason[0] = '\0';
}

/* The same, from sandbox index *from on; *from moves past the one found
 * (sources may overlap between sandboxes told apart by MAC or port).
 * Through the policy's trie of sources: a new flow's "is the destination a
 * sandbox?" costs the same among 1,000 sandboxes as among one. */
static const struct policy_sandbox *sandbox_by_addr_from(const struct policy *p,
							 const struct pc_addr *a, size_t *from)
{
	return policy_sandbox_by_addr_from(p, a, from);
}

/* The sandbox whose sources contain addr (any match field beyond the
 * address is ignored: layer 2 already binds addresses to ports/MACs). */
static const struct policy_sandbox *sandbox_by_addr(const struct policy *p, const struct pc_addr *a)
{
	size_t from = 0;

	return sandbox_by_addr_from(p, a, &from);
}

/* ---- records --------------------------------------------------------------- */

/* A copy of s in the decision, for a record field whose string lives
 * where a later packet of the batch may change or free it (struct
 * decision, "Where the record's strings live"). */
static const char *rec_keep(struct decision *d, const char *s)
{
	size_t room = sizeof(d->kept) - d->kept_len, n = strlen(s);
	char *out = d->kept + d->kept_len;

	if (room == 0)
		return NULL; /* cannot happen: kept is sized for the most a decision keeps */
	if (n >= room)
		n = room - 1;
	memcpy(out, s, n);
	out[n] = '\0';
	d->kept_len += n + 1;
	return out;
}

static void rec_base(struct decision *d, const struct decide_ctx *c, enum logrec_action action,
		     enum logrec_verdict v, const struct pkt *p, const struct policy_sandbox *sb,
		     const struct policy_allow *rule)
{
	struct logrec *r = &d->rec;

	d->has_rec = true;
	memset(r, 0, sizeof(*r));
	r->action = action;
	r->verdict = v;
	r->policy = policy_hash(c->policy);
	if (sb)
		r->sandbox = sb->name; /* the policy's, like its hash */
	if (rule)
		r->rule = rule->rule;
	if (p) {
		r->src.addr = p->src;
		r->src.port = p->sport;
		r->dst.addr = p->dst;
		r->dst.port = p->dport;
		r->transport = p->proto;
	}
}

static void set_reason(struct decision *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_reason(struct decision *d, const char *fmt, ...)
{
	va_list ap;

	if (fmt[0] == '%' && fmt[1] == 's' && fmt[2] == '\0') { /* most calls: no formatting */
		va_start(ap, fmt);
		pc_strlcpy(d->reason, va_arg(ap, const char *), sizeof(d->reason));
		va_end(ap);
		d->rec.reason = d->reason;
		return;
	}

	va_start(ap, fmt);
	vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
	va_end(ap);
	d->rec.reason = d->reason;
}

/* A refused flow (REJECT: RST or ICMP administratively prohibited). */
static void refuse(struct decision *d, const struct decide_ctx *c, const struct pkt *p,
		   const struct policy_sandbox *sb, enum verdict_kind v, const char *reason)
{
	d->v = v;
	rec_base(d, c, LOGREC_CONNECT, LOGREC_REFUSED, p, sb, NULL);
	set_reason(d, "%s", reason);
}

static void allow(struct decision *d, const struct decide_ctx *c, const struct pkt *p,
		  const struct policy_sandbox *sb, const struct policy_allow *rule,
		  enum verdict_kind v, enum flow_via via, const char *name, const char *reason,
		  const struct policy_src *src)
{
	d->v = v;
	rec_base(d, c, LOGREC_CONNECT, LOGREC_ALLOWED, p, sb, rule);
	set_reason(d, "%s", reason);
	if (name && *name)
		d->rec.domain = rec_keep(d, name);
	if (v == VK_ALLOW || v == VK_ALLOW_VAULT) {
		d->register_flow = true;
		flow_key_from_pkt(&d->key, p);
		memset(&d->meta, 0, sizeof(d->meta));
		pc_strlcpy(d->meta.sandbox, sb->name, sizeof(d->meta.sandbox));
		d->meta.has_mac = src->has_mac;
		memcpy(d->meta.mac, src->mac, 6);
		pc_strlcpy(d->meta.port, src->port, sizeof(d->meta.port));
		d->meta.via = via;
		d->meta.vault = v == VK_ALLOW_VAULT;
		if (name)
			pc_strlcpy(d->meta.name, name, sizeof(d->meta.name));
	}
}

/* ---- DNS ------------------------------------------------------------------- */

static bool is_resolver(const struct config *cfg, const struct pc_addr *a)
{
	for (size_t i = 0; i < cfg->dns.n_resolvers; i++)
		if (pc_addr_eq(&cfg->dns.resolvers[i], a))
			return true;
	return false;
}

/* A stream of another sandbox gave its place up to this segment's: counted
 * once the verdict is final (queue.c). */
static void stream_given_up(struct decision *d, const struct dnstcp_fate *f)
{
	if (!f->given_up[0])
		return;
	pc_strlcpy(d->given_up, f->given_up, sizeof(d->given_up));
	d->given_up_kind = QUOTA_DNSTCP_GIVEN_UP;
}

/* What the stream made of a segment that decided nothing new: the
 * verdict, and the packet as rewritten when it is released so. */
static void dns_tcp_fate(struct decision *d, const struct dnstcp_fate *f)
{
	d->v = f->pass ? VK_PASS : VK_DROP;
	free(d->new_pkt);
	d->new_pkt = f->new_pkt;
	d->new_pkt_len = f->new_pkt_len;
}

/* After the message st made whole was allowed: release the segment as
 * judged, or drop it until it is sent again. false: refuse. */
static bool dns_tcp_allowed(const struct decide_ctx *c, const struct dnstcp_seg *seg,
			    struct decision *d, struct dnstcp_stream *st, const uint8_t *rewritten)
{
	struct dnstcp_fate f = {0};

	/* read first: the release may forget a stream it completed */
	d->dnstcp_key = st->key;
	if (dnstcp_allowed(c->dnstcp, st, seg, rewritten, &f) < 0)
		return false;
	d->dnstcp_judged = true;
	dns_tcp_fate(d, &f);
	return true;
}

static void dns_query(const struct decide_ctx *c, const struct pkt_in *in, const struct pkt *p,
		      const struct policy_sandbox *sb, struct decision *d)
{
	struct dnsguard_query_res res;
	struct dns_flow f = {.proto = p->proto};
	const uint8_t *msg = p->payload;
	size_t len = p->payload_len;
	bool deferred = false;
	struct dnstcp_stream *st = NULL;
	struct dnstcp_seg seg = {in->data, in->len, p};
	/* the only port-53 traffic that may pass (docs/dnsguard.md) */
	bool to_guard = sb && is_resolver(c->cfg, &p->dst);
	int rc;

	f.src.addr = p->src;
	f.src.port = p->sport;
	f.dst.addr = p->dst;
	f.dst.port = p->dport;
	if (p->proto == IPPROTO_TCP) {
		/* Whatever its flags, a segment goes on only from a known
		 * sandbox to the guard's resolver: a segment without payload
		 * is not judged, yet its options, IPv6 extension headers and
		 * flags carry bytes to wherever it goes. Refused (and
		 * recorded) before any stream is kept for it. */
		if (!to_guard) {
			dnstcp_forget(c->dnstcp, p, c->now_ms); /* one kept from before a reload */
			refuse(d, c, p, sb, VK_REJECT,
			       sb ? "DNS over TCP to a resolver that is not the guard's"
				  : "not a sandbox (no rule matches its source, MAC and port)");
			return;
		}
		if (tcp_urgent(p)) {
			/* the resolver's framing would no longer be the guard's */
			dnstcp_forget(c->dnstcp, p, c->now_ms);
			refuse(d, c, p, sb, VK_REJECT,
			       "TCP urgent data on DNS over TCP: the resolver would not read "
			       "the messages the guard judged");
			d->rec.action = LOGREC_DNS_QUERY;
			return;
		}
		if (p->tcp_syn_mptcp) {
			/* the resolver would frame another stream than the guard */
			dnstcp_forget(c->dnstcp, p, c->now_ms);
			refuse(d, c, p, sb, VK_REJECT,
			       "MPTCP in a SYN to a resolver: the resolver would read the stream "
			       "by data sequence numbers the guard does not follow");
			d->rec.action = LOGREC_DNS_QUERY;
			return;
		}
		if ((p->tcp_flags & TH_SYN) && p->payload_len) {
			/* its bytes would reach the resolver unjudged */
			refuse(d, c, p, sb, VK_REJECT,
			       "data in a SYN (TCP Fast Open) to a resolver");
			d->rec.action = LOGREC_DNS_QUERY;
			return;
		}
		if ((p->tcp_flags & (TH_SYN | TH_ACK)) == TH_SYN) {
			/* Its bytes are placed in order from here on: the
			 * resolver frames the stream, not the segments. */
			struct dnstcp_fate open = {0};

			rc = dnstcp_open(c->dnstcp, p, sb->name, policy_sandbox_count(c->policy),
					 c->now_ms, &open);
			stream_given_up(d, &open);
			if (rc < 0) {
				refuse(d, c, p, sb, VK_REJECT, open.why);
				d->rec.action = LOGREC_DNS_QUERY;
				if (open.over_quota) {
					d->quota = QUOTA_DNSTCP;
					d->rec.quota = (uint32_t)quota_share(
					    DNSTCP_STREAMS_MAX, policy_sandbox_count(c->policy));
				}
				return;
			}
			d->v = VK_PASS;
			return;
		}
		/* what the sandbox says it has of the answers */
		dnstcp_acked(c->dnstcp, p, in->data, c->now_ms);
		if (p->payload_len == 0) {
			if (p->tcp_flags & TH_RST)
				dnstcp_forget(c->dnstcp, p, c->now_ms);
			else if (p->tcp_flags & TH_FIN)
				dnstcp_fin(c->dnstcp, p, c->now_ms); /* no byte may follow */
			d->v = VK_PASS; /* handshake, ACK, FIN, RST: no message */
			return;
		}
		struct dnstcp_fate fate = {0};

		rc = dnstcp_take(c->dnstcp, &seg, sb ? sb->name : NULL,
				 policy_sandbox_count(c->policy), true, c->now_ms, &st, &msg, &len,
				 &fate);
		stream_given_up(d, &fate);
		if (rc < 0) {
			refuse(d, c, p, sb, VK_REJECT, fate.why);
			d->rec.action = LOGREC_DNS_QUERY;
			if (fate.over_quota) {
				d->quota = QUOTA_DNSTCP;
				d->rec.quota = (uint32_t)quota_share(
				    DNSTCP_STREAMS_MAX, policy_sandbox_count(c->policy));
			}
			return;
		}
		if (rc == 0 && fate.failed) {
			/* recorded, or refused for want of a record, when it failed */
			d->v = VK_REJECT;
			return;
		}
		if (rc == 0) {
			dns_tcp_fate(d, &fate); /* released as judged before, or held */
			return;
		}
	}
	if (p->truncated) {
		refuse(d, c, p, sb, VK_DROP, "DNS message larger than the engine reads");
		d->rec.action = LOGREC_DNS_QUERY;
		return;
	}
	rc = dnsguard_query_defer(c->dg, sb, &f, msg, len, c->now_ms,
				  c->dns_defer ? policy_hash(c->policy) : NULL,
				  policy_sandbox_count(c->policy), &res, &deferred);
	if (rc == 0 && res.verdict == DNSG_ALLOW && !to_guard) {
		/* the DNS guard checks this too; never pass it if it did not */
		res.verdict = DNSG_DROP;
		res.reason = "DNS guard error";
		res.code = "internal_error";
		deferred = false;
	}
	if (rc == 0 && res.verdict == DNSG_ALLOW && deferred) {
		d->v = VK_PASS; /* its record comes with its answer */
		if (st && !dns_tcp_allowed(c, &seg, d, st, NULL)) {
			d->v = VK_REJECT; /* out of memory (the query is owed its record) */
			return;
		}
		/* ... and is pledged before the query leaves: the record the
		 * owed one would be (decision_owed_rec), which logd writes if
		 * the engine dies first */
		rec_base(d, c, LOGREC_DNS_QUERY, LOGREC_ALLOWED, p, sb, res.rule);
		d->has_rec = false;
		d->pledged = true;
		d->rec.reason = "name allowed";
		d->rec.dns_name = rec_keep(d, res.qname);
		d->rec.dns_type = res.qtype;
		d->rec.pledge = res.pledge;
		return;
	}
	rec_base(d, c, LOGREC_DNS_QUERY, LOGREC_REFUSED, p, sb, res.rule);
	set_reason(d, "%s", res.reason ? res.reason : "DNS guard error");
	d->rec.code = res.reason ? res.code : "internal_error"; /* decided with the reason */
	/* A name that is not a host name (a tunnelling attempt, typically)
	 * is recorded too, in its escaped form. */
	if (res.qname[0] || res.qname_shown[0])
		d->rec.dns_name = rec_keep(d, res.qname[0] ? res.qname : res.qname_shown);
	d->rec.dns_type = res.qtype; /* 0 (not shown) when unparsable */
	if (rc < 0) {
		d->v = VK_DROP; /* internal failure: fail closed */
		if (st)
			dnstcp_del(c->dnstcp, st);
		return;
	}
	switch (res.verdict) {
	case DNSG_ALLOW:
		d->v = VK_PASS;
		d->rec.verdict = LOGREC_ALLOWED;
		if (st && !dns_tcp_allowed(c, &seg, d, st, NULL)) {
			d->v = VK_REJECT;
			d->rec.verdict = LOGREC_REFUSED;
			set_reason(d, "%s", "out of memory");
			d->rec.code = "internal_error";
		}
		break;
	case DNSG_REFUSE:
		if (p->proto == IPPROTO_TCP) {
			d->v = VK_REJECT; /* reset the connection */
			if (st)
				dnstcp_del(c->dnstcp, st);
			break;
		}
		d->v = VK_DROP;
		if (res.reply_len > 0 && res.reply_len <= sizeof(d->reply)) {
			d->send_reply = true;
			d->rec.dns_rcode = res.rcode; /* what the guard answers */
			memcpy(d->reply, res.reply, res.reply_len);
			d->reply_len = res.reply_len;
			d->reply_from = f.dst;
			d->reply_to = f.src;
		}
		break;
	default:
		d->v = VK_DROP;
		if (st)
			dnstcp_del(c->dnstcp, st); /* malformed: its resends are judged afresh */
		break;
	}
}

/* The released answer with dnsguard's same-length rewrite of msg. */
static int rewrite_answer(const struct pkt_in *in, const struct pkt *p, const uint8_t *msg,
			  const uint8_t *nmsg, size_t nlen, struct decision *d)
{
	size_t mlen = p->payload_len - (size_t)(msg - p->payload);
	uint8_t *payload;
	int n;

	if (nlen != mlen)
		return PC_EINVAL;
	payload = malloc(p->payload_len);
	if (!payload)
		return PC_ENOMEM;
	memcpy(payload, p->payload, p->payload_len);
	memcpy(payload + (msg - p->payload), nmsg, nlen);
	n = pkt_replace_payload(in->data, in->len, p, payload, p->payload_len, &d->new_pkt);
	free(payload);
	if (n < 0)
		return n;
	d->new_pkt_len = (size_t)n;
	return 0;
}

void decision_owed_rec(const struct dnsguard_owed *o, struct logrec *r)
{
	memset(r, 0, sizeof(*r));
	r->action = LOGREC_DNS_QUERY;
	r->verdict = LOGREC_ALLOWED;
	r->reason = "name allowed";
	r->sandbox = o->sandbox[0] ? o->sandbox : NULL;
	r->rule = o->rule[0] ? o->rule : NULL;
	r->policy = o->policy[0] ? o->policy : NULL;
	r->src.addr = o->client.addr;
	r->src.port = o->client.port;
	r->dst.addr = o->resolver.addr;
	r->dst.port = o->resolver.port;
	r->transport = o->proto;
	r->dns_name = o->qname[0] ? o->qname : NULL;
	r->dns_type = o->qtype;
	r->redeems = o->pledge; /* it takes the place of its pledge */
}

/* Say in the record which of the answer's addresses were not learned and
 * why ("169.254.169.254 not learned: link-local (RFC 3927),
 * special-purpose"): whole items only, then how many more. */
static void reason_unlearned(struct decision *d, const struct dnsguard_answer_res *res)
{
	size_t used = strlen(d->reason), shown = 0;

	for (size_t i = 0; i < res->n_unlearned && i < DNSG_UNLEARNED_SHOWN; i++) {
		char a[PC_ADDRSTRLEN], item[PC_ADDRSTRLEN + 160];
		int n = snprintf(item, sizeof(item), "; %s not learned: %s",
				 pc_addr_str(&res->unlearned[i].addr, a, sizeof(a)),
				 res->unlearned[i].why);

		if (n < 0 || used + (size_t)n + 32 >= sizeof(d->reason))
			break;
		memcpy(d->reason + used, item, (size_t)n + 1);
		used += (size_t)n;
		shown++;
	}
	if (shown < res->n_unlearned)
		snprintf(d->reason + used, sizeof(d->reason) - used, "; %zu more not learned",
			 res->n_unlearned - shown);
	d->rec.reason = d->reason;
}

/* The answer's record is its query's verdict record when that was deferred
 * (one record per query), else a dns-learn record; either carries what the
 * answer teaches, which decision_commit learns once the record is in. */
static void dns_answer(const struct decide_ctx *c, const struct pkt_in *in, const struct pkt *p,
		       struct decision *d)
{
	const struct policy_sandbox *sb;
	struct dnsguard_answer_res *res = &d->ans;
	struct dns_flow f = {.proto = p->proto};
	const uint8_t *msg = p->payload;
	size_t len = p->payload_len, off = 0, from = 0;
	struct dnstcp_stream *st = NULL;
	struct dnstcp_seg seg = {in->data, in->len, p};
	int rc;

	if (p->proto != IPPROTO_UDP && p->proto != IPPROTO_TCP)
		return; /* VK_DROP */
	sb = sandbox_by_addr_from(c->policy, &p->dst, &from);
	if (!is_resolver(c->cfg, &p->src) || p->sport != 53) {
		/* The ruleset queues only resolvers' port-53 replies here:
		 * anything else is not an answer, and nothing unjudged goes
		 * toward a sandbox. */
		rec_base(d, c, LOGREC_DNS_LEARN, LOGREC_REFUSED, p, sb, NULL);
		set_reason(d, "%s", "not from a configured resolver");
		return; /* VK_DROP */
	}
	if (tcp_urgent(p)) {
		/* the sandbox's framing would no longer be the guard's */
		dnstcp_forget(c->dnstcp, p, c->now_ms);
		rec_base(d, c, LOGREC_DNS_LEARN, LOGREC_REFUSED, p, sb, NULL);
		set_reason(d, "%s",
			   "TCP urgent data on DNS over TCP: the sandbox would not read the "
			   "answers the guard judged");
		return; /* VK_DROP */
	}
	if (p->proto == IPPROTO_TCP && p->payload_len == 0) {
		if (p->tcp_flags & TH_RST)
			dnstcp_forget(c->dnstcp, p, c->now_ms);
		else if (sb && (p->tcp_flags & (TH_SYN | TH_ACK)) == (TH_SYN | TH_ACK))
			dnstcp_synack(c->dnstcp, p, in->data, c->now_ms);
		else if (sb && (p->tcp_flags & TH_FIN))
			dnstcp_fin(c->dnstcp, p, c->now_ms); /* no answer byte may follow */
		d->v = sb ? VK_PASS : VK_DROP; /* SYN-ACK, ACK, FIN of a DNS connection */
		return;
	}
	f.src.addr = p->src;
	f.src.port = p->sport;
	f.dst.addr = p->dst;
	f.dst.port = p->dport;
	rec_base(d, c, LOGREC_DNS_LEARN, LOGREC_REFUSED, p, sb, NULL);
	if (p->proto == IPPROTO_TCP) {
		if (!sb) {
			set_reason(d, "%s", "receiver is not a sandbox");
			return;
		}
		struct dnstcp_fate fate = {0};

		/* placed in the connection's answer stream, kept from its SYN
		 * (docs/engine.md, "DNS over TCP") */
		rc = dnstcp_take(c->dnstcp, &seg, sb->name, policy_sandbox_count(c->policy), true,
				 c->now_ms, &st, &msg, &len, &fate);
		stream_given_up(d, &fate);
		if (rc < 0) {
			set_reason(d, "%s", fate.why);
			if (fate.over_quota) {
				d->quota = QUOTA_DNSTCP;
				d->rec.quota = (uint32_t)quota_share(
				    DNSTCP_STREAMS_MAX, policy_sandbox_count(c->policy));
			}
			return;
		}
		if (rc == 0) {
			dns_tcp_fate(d, &fate);
			d->has_rec = false; /* released as judged, or held: no new decision */
			return;
		}
	}
	if (p->truncated) {
		set_reason(d, "DNS answer larger than the engine reads");
		return;
	}
	/* Sources may overlap between sandboxes told apart by MAC or port
	 * (rules.h): the answer belongs to the one whose query it answers. */
	for (;;) {
		rc = dnsguard_answer_judge(c->dg, sb, &f, msg, len, c->now_ms, res);
		if (rc < 0 || res->verdict == DNSG_ALLOW || !sb || res->query_owed)
			break;
		{
			const struct policy_sandbox *next =
			    sandbox_by_addr_from(c->policy, &p->dst, &from);

			if (!next)
				break;
			free(res->rewritten);
			res->rewritten = NULL;
			sb = next;
		}
	}
	/* res is the decision's own (d->ans): the record may point into it */
	if (sb)
		d->rec.sandbox = sb->name;
	set_reason(d, "%s", res->reason ? res->reason : "DNS guard error");
	if (res->qname[0]) {
		d->rec.dns_name = res->qname;
		d->rec.dns_type = res->qtype;
	}
	if (res->query_owed) {
		bool released = rc == 0 && res->verdict == DNSG_ALLOW;

		decision_owed_rec(&res->query, &d->rec);
		if (released)
			set_reason(d, "%s", "name allowed");
		else
			set_reason(d, "name allowed; its answer dropped: %s",
				   res->reason ? res->reason : "DNS guard error");
	}
	if (rc < 0 || res->verdict != DNSG_ALLOW) {
		if (st)
			dnstcp_del(c->dnstcp, st); /* its resends are judged afresh */
		goto out;			   /* dropped, and said so */
	}
	if (st) {
		/* released when the segment lies inside the judged bytes, else
		 * held until sent again; the rewrite goes into the stream */
		if (!dns_tcp_allowed(c, &seg, d, st, res->rewritten)) {
			set_reason(d, "%s", "out of memory");
			goto out;
		}
		if (d->v == VK_DROP) {
			d->learn = res->n_learned > 0; /* learned once its record is in */
			goto record;
		}
	} else if (res->rewritten) {
		/* same length (dnsguard.h): replaced in place, TCP framing kept */
		if (rewrite_answer(in, p, msg, res->rewritten, res->rewritten_len, d) < 0) {
			if (res->query_owed)
				set_reason(d, "%s",
					   "name allowed; its answer dropped: DNS answer needs "
					   "rewriting and cannot be");
			else
				set_reason(d, "DNS answer needs rewriting and cannot be");
			goto out;
		}
	}
	d->v = VK_PASS;
	d->learn = res->n_learned > 0;
record:
	if (!res->query_owed)
		d->rec.verdict = LOGREC_NONE;
	for (size_t i = 0; i < res->n_learned && i < DNSG_LEARN_MAX; i++) {
		char a[PC_ADDRSTRLEN];
		const char *as = pc_addr_str(&res->learned[i], a, sizeof(a));
		size_t al = strlen(as);

		if (off + (i ? 1 : 0) + al >= sizeof(d->answers))
			break;
		if (i)
			d->answers[off++] = ',';
		memcpy(d->answers + off, as, al + 1);
		off += al;
	}
	if (res->n_unlearned)
		reason_unlearned(d, res);
	if (res->n_learned) {
		d->rec.dns_answers = d->answers;
		/* when what it taught expires: a replay of the log needs it */
		for (size_t i = 0; i < res->n_learned && i < DNSG_LEARN_MAX; i++)
			if (res->ttls[i] > d->rec.dns_ttl)
				d->rec.dns_ttl = res->ttls[i];
	} else if (!res->query_owed && !res->n_unlearned)
		d->has_rec = false; /* released, nothing learned: no decision to record */
out:
	free(res->rewritten);
	res->rewritten = NULL;
}

int decision_commit(struct dnsguard *dg, struct decision *d, uint64_t now_ms)
{
	/* d->v may be VK_DROP: the last segment of a TCP answer held until it
	 * is sent again. A decision whose record logd did not take has
	 * learn cleared (refused: nothing learned). */
	if (!d->learn)
		return 0;
	d->learn = false;
	return dnsguard_learn_commit(dg, decision_sandbox(d), &d->ans, now_ms);
}

/* ---- held TCP flows: waiting for the ClientHello --------------------------- */

/* A judgement may rest only on bytes the server gets (docs/engine.md, "Held
 * flows"): a segment the gateway lets through may still never arrive (TTL
 * or hop limit 1, a bad checksum, PAWS, outside the window, ...), and the
 * sandbox may then send other bytes at the same sequence numbers. So the
 * bytes from isn + 1 on are kept once let through, every later segment
 * over them must carry the same ones, and an allowed flow is promoted to
 * the fast path only once the server has acknowledged all of them. */

static uint32_t rd32_be(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* The flow in its original direction (sandbox to server), for records and
 * the registry when a reply decides. */
static void held_view(const struct held_flow *hf, struct pkt *op)
{
	memset(op, 0, sizeof(*op));
	op->family = hf->key.family;
	op->proto = hf->key.proto;
	op->sport = hf->key.sport;
	op->dport = hf->key.dport;
	op->src.family = op->dst.family = hf->key.family;
	memcpy(op->src.a, hf->key.src, 16);
	memcpy(op->dst.a, hf->key.dst, 16);
}

/* What `log audit` judges a held flow's refusal by (docs/logd.md,
 * "Audit"): the class of what its bytes were, as the spec's H rows name
 * it, and how long it had been held. Taken from the refusal's own reason
 * (each is a constant of this file) so that every caller of held_fail
 * records it; a reason missing here leaves the class out, and the audit
 * then says the record is not judged rather than confirming it. */
static void held_facts(struct decision *d, const struct decide_ctx *c, const struct held_flow *hf,
		       const char *reason)
{
	static const struct {
		const char *prefix, *cls;
	} classes[] = {
	    {"TLS ClientHello without a server name", "client-hello-no-name"},
	    {"malformed TLS ClientHello", "tls-malformed"},
	    {"TLS ClientHello could not be checked", "tls-malformed"},
	    {"TLS ClientHello with Encrypted Client Hello", "tls-malformed"},
	    {"TLS ClientHello larger than", "too-large"},
	    {"held flow no longer matches its sandbox", "sandbox-changed"},
	    {"held flow: the server did not acknowledge", "timeout"},
	    {"no TLS ClientHello within", "timeout"},
	    {"TCP urgent data", "urgent"},
	    {"MPTCP in a SYN", "mptcp"},
	    {"held flow: a SYN with another sequence number", "another-isn"},
	    {"held flow: data before the server accepted", "before-accept"},
	    {"held flow: data before the connection's first byte", "before-start"},
	    {"held flow: data past its FIN", "fin"},
	    {"held flow: a FIN inside", "fin"},
	    {"held flow: bytes sent again differ", "bytes-differ"},
	    {"held flow: the server asked for a second ClientHello", "hello-retry"},
	};
	uint64_t since = hf->deadline_ms - c->cfg->engine.sni_timeout_ms;

	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		if (strncmp(reason, classes[i].prefix, strlen(classes[i].prefix)) == 0)
			d->rec.held_bytes = classes[i].cls;
	/* at least 1: 0 is "absent" on the wire */
	d->rec.held_ms = c->now_ms > since ? (uint32_t)(c->now_ms - since) : 1;
}

/* Refuse the held flow, once: the record is written now, the entry stays
 * (failed) so that every later packet of it is refused without another
 * record and a new SYN on the same addresses cannot start it afresh with
 * another sequence number while the server may still hold the first. */
static void held_fail(struct decision *d, const struct decide_ctx *c,
		      const struct policy_sandbox *sb, struct held_flow *hf, enum verdict_kind v,
		      const char *reason)
{
	struct pkt op;

	held_view(hf, &op);
	refuse(d, c, &op, sb, v, reason);
	if (hf->meta.name[0])
		d->rec.domain = rec_keep(d, hf->meta.name);
	if (hf->sni[0])
		d->rec.sni = rec_keep(d, hf->sni);
	held_facts(d, c, hf, reason);
	hf->failed = true;
}

static void held_fail_sni(struct decision *d, const struct decide_ctx *c,
			  const struct policy_sandbox *sb, struct held_flow *hf,
			  enum verdict_kind v)
{
	held_fail(d, c, sb, hf, v, "");
	d->rec.held_bytes = "client-hello";
	set_reason(d,
		   "TLS server name %s is not a name this sandbox resolved to this address and "
		   "may use on this port",
		   hf->sni);
}

/* The held entry of k; a promoted one only while its conntrack mark may
 * not act yet, and under the policy it was promoted under (a packet then
 * comes from a flow a reload may have cut): else it is forgotten and the
 * packet dropped (*gone) — sent again, it takes the fast path or is judged
 * as a segment of no allowed connection. */
static struct held_flow *held_find(const struct decide_ctx *c, const struct flow_key *k, bool *gone)
{
	struct held_flow *hf = held_get(c->held, k);

	*gone = false;
	if (hf && hf->promoted_ms &&
	    (c->now_ms > hf->promoted_ms + HELD_GRACE_MS ||
	     strcmp(hf->policy, policy_hash(c->policy)) != 0)) {
		held_del(c->held, hf);
		*gone = true;
		return NULL;
	}
	return hf;
}

/* A segment with data or FIN passes: how far the sandbox sent, where its
 * stream ends. */
static void held_sent(struct held_flow *hf, const struct pkt *p)
{
	uint32_t end = p->tcp_seq + (uint32_t)p->payload_len + ((p->tcp_flags & TH_FIN) ? 1 : 0);

	if ((int32_t)(end - hf->snd_max) > 0)
		hf->snd_max = end;
	if ((p->tcp_flags & TH_FIN) && !hf->fin_seen) {
		hf->fin_seen = true;
		hf->fin_at = p->tcp_seq + (uint32_t)p->payload_len - (hf->isn + 1);
	}
}

/* Append the in-order bytes to buf (which grows to HELD_BUF_MAX). */
static int held_keep(struct held_flow *hf, const uint8_t *data, size_t n)
{
	if (hf->len + n > HELD_BUF_MAX)
		return PC_EREFUSED;
	if (hf->len + n > hf->cap) {
		size_t cap = hf->cap ? hf->cap : 2048;
		uint8_t *nb;

		while (cap < hf->len + n)
			cap *= 2;
		if (cap > HELD_BUF_MAX)
			cap = HELD_BUF_MAX;
		nb = realloc(hf->buf, cap);
		if (!nb)
			return PC_ENOMEM;
		hf->buf = nb;
		hf->cap = cap;
	}
	memcpy(hf->buf + hf->len, data, n);
	hf->len += n;
	hf->next_seq = hf->isn + 1 + (uint32_t)hf->len;
	return 0;
}

/* Why the held flow's host, reached without a server name to check (not
 * TLS), is no longer allowed on this port under the policy in force — a
 * reload since the SYN may have taken it away (docs/engine.md) — or NULL
 * while it is. The reason is static. */
static const char *held_host_refused(const struct decide_ctx *c, const struct policy_sandbox *sb,
				     const struct pc_addr *dst, uint16_t dport)
{
	struct dnsguard_flow_res fr;

	memset(&fr, 0, sizeof(fr));
	if (dnsguard_flow(c->dg, sb, dst, IPPROTO_TCP, dport, true, c->now_ms, &fr) < 0 ||
	    !fr.allowed)
		return fr.reason ? fr.reason : "the held flow's host is no longer allowed";
	return NULL;
}

/* The sandbox side of a held flow as its SYN matched it. */
static void held_src(const struct held_flow *hf, const struct pkt *op, struct policy_src *ps)
{
	memset(ps, 0, sizeof(*ps));
	ps->addr = op->src;
	ps->has_mac = hf->meta.has_mac;
	memcpy(ps->mac, hf->meta.mac, 6);
	pc_strlcpy(ps->port, hf->meta.port, sizeof(ps->port));
}

/* The allowed record of a held flow, for its judged bytes (the verdict of
 * the segment that completed them: PASS). Written before those bytes go
 * on, like every allowed flow's: no record, no bytes to the server. */
static void held_allowed(const struct decide_ctx *c, const struct pkt *p,
			 const struct policy_sandbox *sb, const struct held_flow *hf,
			 const struct policy_allow *rule, struct decision *d)
{
	struct policy_src ps;
	struct pkt op;

	held_view(hf, &op);
	held_src(hf, &op, &ps);
	if (hf->sni[0]) {
		allow(d, c, &op, sb, rule, VK_PASS, FLOW_VIA_SNI, hf->sni,
		      "allowed host; TLS server name checked", &ps);
		d->rec.sni = rec_keep(d, hf->sni);
		d->held_tls = true;
	} else {
		allow(d, c, &op, sb, NULL, VK_PASS, FLOW_VIA_HOST, hf->meta.name,
		      "allowed host (not TLS: no server name to check)", &ps);
	}
	d->rec.domain = rec_keep(d, hf->meta.name);
	d->held_judged = true;
	flow_key_from_pkt(&d->key, p);
}

/* Judge the kept bytes once a segment added to them. Allowed: recorded,
 * the segment passes and the flow waits for the server's acknowledgement;
 * refused: reset now, recorded. */
static void held_judge(const struct decide_ctx *c, const struct pkt *p,
		       const struct policy_sandbox *sb, struct held_flow *hf, struct decision *d)
{
	char sni[POLICY_HOST_MAX];
	const struct policy_allow *rule = NULL;
	const char *why;
	size_t need = 0;
	int rc = tls_clienthello_sni(hf->buf, hf->len, sni, sizeof(sni), &need);

	switch (rc) {
	case PC_EAGAIN:
		d->v = VK_PASS; /* to the address learned for an allowed name; reset if wrong */
		return;
	case 1:
		pc_strlcpy(hf->sni, sni, sizeof(hf->sni));
		if (!dnsguard_sni_allowed(c->dg, sb, &p->dst, IPPROTO_TCP, p->dport, sni, c->now_ms,
					  &rule)) {
			held_fail_sni(d, c, sb, hf, VK_REJECT);
			return;
		}
		break;
	case 0:
		held_fail(d, c, sb, hf, VK_REJECT, "TLS ClientHello without a server name");
		return;
	case PC_EREFUSED:
		/* Encrypted Client Hello: the server name checked is the outer
		 * one, and the client-facing server may decrypt and serve the
		 * inner one. The DNS guard strips ech from answers, but a
		 * sandbox can bring its own configuration; browsers send GREASE
		 * ECH, which looks the same (docs/dnsguard.md). */
		held_fail(d, c, sb, hf, VK_REJECT,
			  "TLS ClientHello with Encrypted Client Hello: the server may serve the "
			  "encrypted inner name, which the guard cannot read");
		return;
	case PC_EPARSE:
		/* A handshake record (0x16) or an SSLv2-style hello (high bit)
		 * our parser refuses may still be one a server accepts: refused,
		 * or a parser difference would let another name through. So is
		 * any other TLS record (0x14-0x18): a server may skip it before
		 * the ClientHello (Go's crypto/tls drops warning alerts), and the
		 * ClientHello after it would never be judged. */
		if ((hf->buf[0] >= 0x14 && hf->buf[0] <= 0x18) || (hf->buf[0] & 0x80)) {
			held_fail(d, c, sb, hf, VK_REJECT, "malformed TLS ClientHello");
			return;
		}
		/* Not TLS at all: nothing names the server; the address must
		 * still be learned for a name allowed on this port by the
		 * policy in force — a reload since the SYN may have taken the
		 * host away (docs/engine.md). */
		why = held_host_refused(c, sb, &p->dst, p->dport);
		if (why) {
			held_fail(d, c, sb, hf, VK_REJECT, why);
			d->rec.held_bytes = "not-tls";
			return;
		}
		break;
	default:
		held_fail(d, c, sb, hf, VK_REJECT, "TLS ClientHello could not be checked");
		return;
	}
	hf->judged = true; /* promoted when the server acknowledges it */
	held_allowed(c, p, sb, hf, rule, d);
}

/* A segment from the sandbox on a held flow. */
static void held_segment(const struct decide_ctx *c, const struct pkt *p,
			 const struct policy_sandbox *sb, struct held_flow *hf, struct decision *d)
{
	const uint8_t *data = p->payload;
	size_t n = p->payload_len, m;
	bool fin = (p->tcp_flags & TH_FIN) != 0;
	int32_t rel;
	int rc;

	if (hf->failed) {
		d->v = VK_REJECT; /* recorded when it failed */
		return;
	}
	if (!sb || strcmp(sb->name, hf->meta.sandbox) != 0) {
		held_fail(d, c, sb, hf, VK_REJECT, "held flow no longer matches its sandbox");
		return;
	}
	if (!hf->promoted_ms && c->now_ms > hf->deadline_ms) {
		held_fail(d, c, sb, hf, VK_REJECT,
			  hf->judged ? "held flow: the server did not acknowledge the judged bytes "
				       "within engine.sni_timeout_ms"
				     : "no TLS ClientHello within engine.sni_timeout_ms");
		return;
	}
	if (!hf->promoted_ms && tcp_urgent(p)) {
		/* Even without bytes (a bare ACK moving the pointer ahead): the
		 * server may take a judged byte out of the stream, or one of
		 * those judged next. */
		held_fail(d, c, sb, hf, VK_REJECT,
			  "TCP urgent data on a held flow: the server would not read the bytes "
			  "the guard judges");
		return;
	}
	if (p->tcp_flags & TH_SYN) {
		if ((p->tcp_flags & TH_ACK) || n) {
			d->v = VK_DROP;
			return;
		}
		if (!hf->promoted_ms && p->tcp_syn_mptcp) {
			/* the first went without: this one may reach the server */
			held_fail(d, c, sb, hf, VK_REJECT,
				  "MPTCP in a SYN of a held flow: the server would read the stream "
				  "by data sequence numbers the guard does not follow");
			return;
		}
		/* A retransmitted SYN keeps its sequence number. Another one
		 * may make conntrack and the server start over from it while
		 * the judged bytes sit at the first: refused. */
		if (p->tcp_seq != hf->isn) {
			held_fail(d, c, sb, hf, VK_REJECT,
				  "held flow: a SYN with another sequence number than the first");
			return;
		}
		d->v = VK_PASS;
		return;
	}
	if (p->tcp_flags & TH_RST) {
		/* The entry stays: a SYN after it must reuse the first ISN. A
		 * RST carrying bytes is no client's: they would pass unjudged. */
		d->v = n ? VK_DROP : VK_PASS;
		return;
	}
	if (n == 0 && !fin) {
		d->v = VK_PASS; /* ACK, window update: no sequence space */
		return;
	}
	if (!hf->srv_known) {
		/* No SYN-ACK acknowledged our ISN: the server may hold another
		 * connection on these addresses, in another sequence space. */
		held_fail(d, c, sb, hf, VK_REJECT,
			  "held flow: data before the server accepted the connection");
		return;
	}
	rel = (int32_t)(p->tcp_seq - (hf->isn + 1));
	if (rel < 0) {
		held_fail(d, c, sb, hf, VK_REJECT,
			  "held flow: data before the connection's first byte");
		return;
	}
	/* The stream ends at its FIN: nothing may be judged where the server
	 * has the FIN instead of bytes. */
	if (hf->fin_seen &&
	    ((uint32_t)rel + n > hf->fin_at || (fin && (uint32_t)rel + n != hf->fin_at))) {
		held_fail(d, c, sb, hf, VK_REJECT, "held flow: data past its FIN");
		return;
	}

	if ((size_t)rel < hf->len) {
		m = hf->len - (size_t)rel < n ? hf->len - (size_t)rel : n;
		if (memcmp(hf->buf + rel, data, m) != 0) {
			held_fail(d, c, sb, hf, VK_REJECT,
				  "held flow: bytes sent again differ from the ones judged");
			return;
		}
		data += m;
		n -= m;
		rel += (int32_t)m;
		if (fin && n == 0 && (size_t)rel < hf->len) {
			held_fail(d, c, sb, hf, VK_REJECT,
				  "held flow: a FIN inside the judged bytes");
			return;
		}
	}
	if (n == 0 || hf->judged || hf->promoted_ms) {
		/* the same bytes again, or bytes past the judged ones: the
		 * server cannot deliver them before those */
		held_sent(hf, p);
		d->v = VK_PASS;
		return;
	}
	if ((size_t)rel > hf->len) {
		d->v = VK_DROP; /* a gap: the sender retransmits in order */
		return;
	}
	rc = held_keep(hf, data, n);
	if (rc < 0) {
		held_fail(d, c, sb, hf, VK_REJECT,
			  rc == PC_EREFUSED ? "TLS ClientHello larger than 16 KiB"
					    : "out of memory");
		return;
	}
	held_sent(hf, p);
	held_judge(c, p, sb, hf, d);
}

/* The judged flow's server acknowledged every judged byte: judge it again
 * under the policy in force (a reload may have come since) and promote it
 * (its allowed record was written when its bytes were judged). */
static void held_promote(const struct decide_ctx *c, struct held_flow *hf, struct decision *d)
{
	const struct policy_sandbox *sb;
	const struct policy_allow *rule = NULL;
	struct policy_src ps;
	struct pkt op;

	held_view(hf, &op);
	held_src(hf, &op, &ps);
	sb = policy_sandbox_match(c->policy, &ps);
	if (!sb || strcmp(sb->name, hf->meta.sandbox) != 0) {
		held_fail(d, c, sb, hf, VK_DROP, "held flow no longer matches its sandbox");
		return;
	}
	if (hf->sni[0]) {
		if (!dnsguard_sni_allowed(c->dg, sb, &op.dst, IPPROTO_TCP, op.dport, hf->sni,
					  c->now_ms, &rule)) {
			held_fail_sni(d, c, sb, hf, VK_DROP);
			d->rec.held_bytes = "no-longer-allowed";
			return;
		}
		allow(d, c, &op, sb, rule, VK_ALLOW, FLOW_VIA_SNI, hf->sni,
		      "allowed host; TLS server name checked", &ps);
		d->rec.sni = rec_keep(d, hf->sni);
	} else {
		const char *why = held_host_refused(c, sb, &op.dst, op.dport);

		if (why) {
			held_fail(d, c, sb, hf, VK_DROP, why);
			d->rec.held_bytes = "no-longer-allowed";
			return;
		}
		allow(d, c, &op, sb, NULL, VK_ALLOW, FLOW_VIA_HOST, hf->meta.name,
		      "allowed host (not TLS: no server name to check)", &ps);
	}
	/* Its allowed record went with the judged bytes (held_allowed): the
	 * promotion only registers the flow for reloads, unrecorded. */
	d->has_rec = false;
	d->promote = true;
	hf->promoted_ms = c->now_ms ? c->now_ms : 1;
	pc_strlcpy(hf->policy, policy_hash(c->policy), sizeof(hf->policy));
	/* No longer waiting: its grace must not take the place of a flow that
	 * is (full share of promoted entries: it stays counted as waiting). */
	(void)held_promoted(c->held, hf, policy_sandbox_count(c->policy));
}

/* What the server's first bytes on a TLS flow say (H13a): a HelloRetryRequest
 * (a ServerHello whose random is RFC 8446's fixed value) has the client send
 * a second ClientHello. Promoted on the first one's acknowledgement, the
 * flow would carry the second on the fast path, unjudged, and the server
 * reads its server name again (OpenSSL runs its server-name callback on
 * each: the virtual host is chosen anew). */
enum tls_first { TLS_FIRST_UNKNOWN, TLS_FIRST_OK, TLS_FIRST_HRR };

static enum tls_first tls_first_flight(const uint8_t *b, size_t n)
{
	static const uint8_t hrr[32] = {0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
					0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
					0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
					0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c};

	/* record header 5, handshake header 4, legacy_version 2, random 32 */
	if (n >= 1 && b[0] != 0x16)
		return TLS_FIRST_OK;
	if (n >= 6 && b[5] != 0x02)
		return TLS_FIRST_OK;
	if (n < 43)
		return TLS_FIRST_UNKNOWN; /* never promoted on it: H2's timeout */
	return memcmp(b + 11, hrr, sizeof(hrr)) == 0 ? TLS_FIRST_HRR : TLS_FIRST_OK;
}

/* A reply (forward hook, conntrack's reply direction, from the server's
 * side: the ruleset queues nothing else here but DNS answers) of a held
 * flow. Released; the one whose acknowledgement covers every judged byte
 * promotes the flow. */
static void held_reply(const struct decide_ctx *c, const struct pkt_in *in, const struct pkt *p,
		       struct decision *d)
{
	struct flow_key k;
	struct held_flow *hf;
	uint32_t ack = rd32_be(in->data + p->l4_off + 8), rel, nxt, judged_end;
	size_t n = p->payload_len + ((p->tcp_flags & TH_FIN) ? 1 : 0);
	bool gone, in_order;

	/* the key of the original direction */
	memset(&k, 0, sizeof(k));
	k.family = p->family;
	k.proto = p->proto;
	k.sport = p->dport;
	k.dport = p->sport;
	memcpy(k.src, p->dst.a, 16);
	memcpy(k.dst, p->src.a, 16);
	d->v = VK_DROP;
	hf = held_find(c, &k, &gone);
	if (!hf || hf->failed)
		return;
	if (hf->promoted_ms) {
		d->v = VK_PASS; /* queued before its conntrack mark acted */
		return;
	}
	if (c->now_ms > hf->deadline_ms) {
		held_fail(d, c, NULL, hf, VK_DROP,
			  hf->judged ? "held flow: the server did not acknowledge the judged bytes "
				       "within engine.sni_timeout_ms"
				     : "no TLS ClientHello within engine.sni_timeout_ms");
		if (d->rec.sandbox == NULL)
			d->rec.sandbox = rec_keep(d, hf->meta.sandbox);
		return;
	}
	if (p->tcp_flags & TH_RST) {
		d->v = VK_PASS;
		return;
	}
	if (p->tcp_flags & TH_SYN) {
		/* The first SYN-ACK for our ISN fixes the server's; another
		 * one is not the server this flow's bytes went to. */
		if (!(p->tcp_flags & TH_ACK) || ack != hf->isn + 1)
			return;
		if (!hf->srv_known) {
			hf->srv_known = true;
			hf->srv_isn = p->tcp_seq;
			hf->srv_nxt = p->tcp_seq + 1;
		} else if (p->tcp_seq != hf->srv_isn) {
			return;
		}
		d->v = VK_PASS;
		return;
	}
	if (!hf->srv_known)
		return; /* no connection in the server's name yet */
	/* In the server's sequence space, as far as it came in order: an
	 * acknowledgement counts only from a segment inside it (a blind
	 * forger would have to guess it). */
	rel = p->tcp_seq - (hf->srv_isn + 1);
	nxt = hf->srv_nxt - (hf->srv_isn + 1);
	in_order = (int32_t)rel >= 0 && rel <= nxt;
	if (in_order && rel + n > nxt)
		hf->srv_nxt = hf->srv_isn + 1 + rel + (uint32_t)n;
	judged_end = hf->isn + 1 + (uint32_t)hf->len;
	if (hf->judged && hf->sni[0] && !hf->srv_first && in_order && rel == 0 && p->payload_len) {
		switch (tls_first_flight(p->payload, p->payload_len)) {
		case TLS_FIRST_HRR:
			held_fail(d, c, NULL, hf, VK_DROP,
				  "held flow: the server asked for a second ClientHello (TLS "
				  "HelloRetryRequest), which the guard would not judge");
			if (d->rec.sandbox == NULL)
				d->rec.sandbox = rec_keep(d, hf->meta.sandbox);
			return;
		case TLS_FIRST_OK:
			hf->srv_first = true;
			break;
		default:
			break;
		}
	}
	d->v = VK_PASS;
	if (hf->judged && in_order && (p->tcp_flags & TH_ACK) && (int32_t)(ack - judged_end) >= 0 &&
	    (int32_t)(ack - hf->snd_max) <= 0 && (!hf->sni[0] || hf->srv_first))
		held_promote(c, hf, d);
}

/* ---- new flows ---------------------------------------------------------------- */

static const char *proto_name(uint8_t proto)
{
	static const struct pc_name names[] = {{IPPROTO_ICMP, "ICMP"},
					       {IPPROTO_ICMPV6, "ICMPv6"},
					       {IPPROTO_SCTP, "SCTP"},
					       {IPPROTO_GRE, "GRE"},
					       {IPPROTO_ESP, "ESP"}};

	return PC_NAME_OF(names, proto, "this IP protocol");
}

static void new_flow(const struct decide_ctx *c, const struct pkt *p,
		     const struct policy_sandbox *sb, const struct policy_src *src,
		     struct decision *d)
{
	const struct policy_allow *rule = NULL;
	struct dnsguard_flow_res fr;
	char why[128];

	if (p->proto == IPPROTO_TCP) {
		if ((p->tcp_flags & (TH_SYN | TH_ACK | TH_RST | TH_FIN)) != TH_SYN) {
			struct flow_key k;

			flow_key_from_pkt(&k, p);
			refuse(d, c, p, sb, VK_REJECT,
			       c->held && held_given_up(c->held, &k)
				   ? "TCP segment of no connection the guard allowed: its held "
				     "flow gave its place to a sandbox under its share (engine "
				     "quota)"
				   : "TCP segment of no connection the guard allowed");
			return;
		}
	} else if (p->proto != IPPROTO_UDP) {
		snprintf(why, sizeof(why), "%s is never allowed", proto_name(p->proto));
		refuse(d, c, p, sb, VK_REJECT, why);
		return;
	}
	if (sandbox_by_addr(c->policy, &p->dst)) {
		refuse(d, c, p, sb, VK_REJECT, "sandboxes may not reach each other");
		return;
	}
	if (policy_cidr_allows(sb, &p->dst, p->proto, p->dport, &rule)) {
		allow(d, c, p, sb, rule, VK_ALLOW, FLOW_VIA_CIDR, NULL, "allowed address", src);
		return;
	}
	memset(&fr, 0, sizeof(fr));
	if (dnsguard_flow(c->dg, sb, &p->dst, p->proto, p->dport, false, c->now_ms, &fr) < 0) {
		refuse(d, c, p, sb, VK_REJECT, "DNS guard error");
		return;
	}
	if (!fr.allowed) {
		refuse(d, c, p, sb, VK_REJECT, fr.reason ? fr.reason : "not on the allow list");
		return;
	}
	if (p->proto == IPPROTO_TCP && fr.vault) {
		allow(d, c, p, sb, fr.rule, VK_ALLOW_VAULT, FLOW_VIA_HOST, fr.name,
		      "allowed host; secret-bound, through the vault", src);
		return;
	}
	if (p->proto == IPPROTO_TCP) {
		struct flow_key k;
		struct held_flow *hf;
		int rc;

		if (p->payload_len) {
			refuse(d, c, p, sb, VK_REJECT,
			       "data in a SYN (TCP Fast Open) to a named host");
			return;
		}
		if (tcp_urgent(p)) {
			/* the flow would be held: judged by its bytes */
			refuse(d, c, p, sb, VK_REJECT,
			       "TCP urgent data on a held flow: the server would not read the "
			       "bytes the guard judges");
			return;
		}
		if (p->tcp_syn_mptcp) {
			/* the flow would be held: judged by its bytes */
			refuse(d, c, p, sb, VK_REJECT,
			       "MPTCP in a SYN to a named host: the server would read the stream "
			       "by data sequence numbers the guard does not follow");
			return;
		}
		flow_key_from_pkt(&k, p);
		/* Each sandbox may hold its share of the table only. */
		rc = held_add(c->held, &k, sb->name, policy_sandbox_count(c->policy), &hf,
			      d->given_up);
		if (d->given_up[0])
			d->given_up_kind = QUOTA_HELD_GIVEN_UP;
		if (rc == PC_EREFUSED) {
			refuse(d, c, p, sb, VK_REJECT,
			       "too many connections of this sandbox waiting for a ClientHello "
			       "(engine quota)");
			d->quota = QUOTA_HELD;
			d->rec.quota =
			    (uint32_t)held_share(c->held, policy_sandbox_count(c->policy));
			return;
		}
		if (rc < 0) {
			refuse(d, c, p, sb, VK_REJECT,
			       "too many connections waiting for a ClientHello");
			return;
		}
		hf->meta.via = FLOW_VIA_HOST;
		pc_strlcpy(hf->meta.sandbox, sb->name, sizeof(hf->meta.sandbox));
		pc_strlcpy(hf->meta.name, fr.name, sizeof(hf->meta.name));
		hf->meta.has_mac = src->has_mac;
		memcpy(hf->meta.mac, src->mac, 6);
		pc_strlcpy(hf->meta.port, src->port, sizeof(hf->meta.port));
		hf->deadline_ms = c->now_ms + c->cfg->engine.sni_timeout_ms;
		hf->isn = p->tcp_seq;
		hf->next_seq = hf->snd_max = p->tcp_seq + 1;
		hf->seq_known = true;
		d->v = VK_HELD; /* recorded when the ClientHello decides */
		return;
	}
	allow(d, c, p, sb, fr.rule, VK_ALLOW, FLOW_VIA_HOST, fr.name, "allowed host", src);
}

static void from_sandbox(const struct decide_ctx *c, const struct pkt_in *in, const struct pkt *p,
			 struct decision *d)
{
	const struct policy_sandbox *sb;
	struct policy_src src;
	struct flow_key k;
	struct held_flow *hf;

	memset(&src, 0, sizeof(src));
	src.addr = p->src;
	if (in->has_mac) {
		src.has_mac = true;
		memcpy(src.mac, in->mac, 6);
	}
	/* The bridge table stamped the input port; a port we do not know (or
	 * no stamp) is refused before anything else. */
	if (!portmap_name(c->ports, in->mark & NFT_MARK_PORT_MASK, src.port)) {
		refuse(d, c, p, NULL, VK_DROP, "packet from an unknown bridge port");
		return;
	}
	sb = policy_sandbox_match(c->policy, &src);
	if ((p->proto == IPPROTO_UDP || p->proto == IPPROTO_TCP) && p->dport == 53) {
		dns_query(c, in, p, sb, d);
		return;
	}
	if (p->proto == IPPROTO_TCP) {
		bool gone;

		flow_key_from_pkt(&k, p);
		hf = held_find(c, &k, &gone);
		if (gone) {
			d->v = VK_DROP; /* sent again: the fast path, or refused */
			return;
		}
		/* A SYN with another ISN on a promoted entry starts a new flow:
		 * the server acknowledged every judged byte, so none waits at
		 * the first ISN, and the SYN reached the queue only because
		 * conntrack closed the promoted connection and opened a new one
		 * (the promoted one's packets carry ALLOW). Judged afresh, like
		 * any new flow, in its own sequence space (docs/engine.md, "Held
		 * flows"). A retransmitted first SYN still passes. */
		if (hf && hf->promoted_ms && !hf->failed &&
		    (p->tcp_flags & (TH_SYN | TH_ACK | TH_RST | TH_FIN)) == TH_SYN &&
		    !p->payload_len && p->tcp_seq != hf->isn) {
			held_del(c->held, hf);
			hf = NULL;
		}
		if (hf) {
			held_segment(c, p, sb, hf, d);
			return;
		}
	}
	if (!sb) {
		refuse(d, c, p, NULL, VK_REJECT,
		       "not a sandbox (no rule matches its source, MAC and port)");
		return;
	}
	new_flow(c, p, sb, &src, d);
}

void decide_packet(const struct decide_ctx *c, const struct pkt_in *in, struct decision *d)
{
	struct pkt p;
	int st;

	decision_clear(d);
	st = pkt_parse(in->data, in->len, &p);
	if (st != PKT_OK) {
		d->v = VK_DROP;
		rec_base(d, c, LOGREC_CONNECT, LOGREC_REFUSED, NULL, NULL, NULL);
		set_reason(d, "%s", st == PKT_FRAGMENT ? "IP fragment" : "malformed packet");
		return;
	}
	switch (in->hook) {
	case NF_INET_PRE_ROUTING:
		from_sandbox(c, in, &p, d);
		break;
	case NF_INET_FORWARD:
		/* a held flow's reply (never port 53: those are DNS flows) */
		if (p.proto == IPPROTO_TCP && p.sport != 53) {
			held_reply(c, in, &p, d);
			break;
		}
		dns_answer(c, in, &p, d);
		break;
	case NF_INET_LOCAL_OUT:
		dns_answer(c, in, &p, d);
		break;
	default:
		d->v = VK_DROP;
		break;
	}
	/* Only prerouting has the rules that act on these marks, but for the
	 * forward chain's promotion rule (ALLOW on a held flow's reply). */
	if (in->hook != NF_INET_PRE_ROUTING && d->v != VK_PASS &&
	    !(in->hook == NF_INET_FORWARD && d->promote && d->v == VK_ALLOW))
		d->v = VK_DROP;
}

bool decide_rejudge(const struct decide_ctx *c, const struct flow_key *k, const struct flow_meta *m,
		    bool vault, const char **reason)
{
	const struct policy_sandbox *sb;
	struct dnsguard_flow_res fr;
	struct pc_addr src = {.family = k->family}, dst = {.family = k->family};

	memcpy(src.a, k->src, 16);
	memcpy(dst.a, k->dst, 16);
	if (m) {
		struct policy_src ps;

		memset(&ps, 0, sizeof(ps));
		ps.addr = src;
		ps.has_mac = m->has_mac;
		memcpy(ps.mac, m->mac, 6);
		pc_strlcpy(ps.port, m->port, sizeof(ps.port));
		sb = policy_sandbox_match(c->policy, &ps);
		if (!sb || strcmp(sb->name, m->sandbox) != 0) {
			*reason = "cut by reload: its sandbox's rule no longer matches it";
			return false;
		}
	} else {
		sb = sandbox_by_addr(c->policy, &src);
		if (!sb) {
			*reason = "cut by reload: no sandbox has its source address any more";
			return false;
		}
	}
	if (sandbox_by_addr(c->policy, &dst)) {
		*reason = "cut by reload: sandboxes may not reach each other";
		return false;
	}
	if ((!m || m->via == FLOW_VIA_CIDR) && !vault &&
	    policy_cidr_allows(sb, &dst, k->proto, k->dport, NULL))
		return true;
	if (m && m->via == FLOW_VIA_CIDR) {
		*reason = "cut by reload: its address is no longer allowed";
		return false;
	}
	if (m && m->via == FLOW_VIA_SNI) {
		if (!vault && dnsguard_sni_allowed(c->dg, sb, &dst, k->proto, k->dport, m->name,
						   c->now_ms, NULL))
			return true;
		*reason = "cut by reload: its server name is no longer allowed";
		return false;
	}
	memset(&fr, 0, sizeof(fr));
	if (dnsguard_flow(c->dg, sb, &dst, k->proto, k->dport, true, c->now_ms, &fr) < 0 ||
	    !fr.allowed) {
		*reason = "cut by reload: its host is no longer allowed";
		return false;
	}
	if (k->proto == IPPROTO_TCP && fr.vault != vault) {
		*reason = "cut by reload: the secret binding of its host changed";
		return false;
	}
	return true;
}
