/* Judging one DNS query from a sandbox, and the REFUSED/NXDOMAIN reply
 * synthesized for a refused one. Parsing and building are ldns's. */
#include "dnsguard/dnsguard_int.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

/* What the walk over a query's records found. */
struct dg_qscan {
	unsigned n_opt, n_other_additional;
	bool opt_not_root;
};

static int dg_qscan_rr(void *arg, const struct dg_wire_rr *w)
{
	struct dg_qscan *q = arg;

	if (w->section != LDNS_SECTION_ADDITIONAL)
		return 0;
	if (w->type == LDNS_RR_TYPE_OPT) {
		const ldns_rdf *owner = ldns_rr_owner(w->rr);

		q->n_opt++;
		if (!owner || ldns_dname_label_count(owner) != 0)
			q->opt_not_root = true;
	} else {
		q->n_other_additional++;
	}
	return 0;
}

static bool dg_qscan_want(uint16_t type, ldns_pkt_section section)
{
	(void)type;
	return section == LDNS_SECTION_ADDITIONAL;
}

/* EDNS options a stub resolver legitimately sends. Anything else (client
 * subnet, unknown codes) could carry data past the guard; refused. */
static const char *dg_edns_check(ldns_pkt *q)
{
	ldns_edns_option_list *l;

	if (ldns_pkt_edns_version(q) != 0)
		return "EDNS version is not 0";
	l = ldns_pkt_edns_get_option_list(q); /* owned by q */
	if (!l) {
		if (ldns_pkt_edns_data(q) && ldns_rdf_size(ldns_pkt_edns_data(q)) > 0)
			return "malformed EDNS options";
		return NULL;
	}
	for (size_t i = 0; i < ldns_edns_option_list_get_count(l); i++) {
		ldns_edns_option *o = ldns_edns_option_list_get_option(l, i);
		const uint8_t *d = ldns_edns_get_data(o);
		size_t n = ldns_edns_get_size(o);

		switch (ldns_edns_get_code(o)) {
		case LDNS_EDNS_COOKIE: /* client cookie 8, or 8 + server 8..32 */
			if (n != 8 && (n < 16 || n > 40))
				return "malformed EDNS cookie";
			break;
		case LDNS_EDNS_PADDING: /* RFC 7830: zeros, nothing else */
			for (size_t k = 0; k < n; k++)
				if (d[k] != 0)
					return "EDNS padding is not zero";
			break;
		case LDNS_EDNS_NSID:
		case LDNS_EDNS_KEEPALIVE:
			if (n != 0)
				return "EDNS option carries data";
			break;
		default:
			return "EDNS option not permitted";
		}
	}
	return NULL;
}

/* Build the reply to a refused query: same id, opcode and RD, the first
 * question echoed, RA set (the guard stands for a recursive resolver), and,
 * when the query spoke EDNS, an Extended DNS Error saying why. */
static int dg_reply_build(ldns_pkt *q, enum dns_refuse how, bool prohibited, const char *why,
			  struct dnsguard_query_res *res)
{
	ldns_pkt *r = ldns_pkt_new();
	ldns_rr_list *qs = q ? ldns_pkt_question(q) : NULL;
	uint8_t *wire = NULL;
	size_t wlen = 0;
	int rc = PC_ENOMEM;

	if (!r)
		return PC_ENOMEM;
	ldns_pkt_set_id(r, ldns_pkt_id(q));
	ldns_pkt_set_qr(r, true);
	ldns_pkt_set_opcode(r, ldns_pkt_get_opcode(q));
	ldns_pkt_set_rd(r, ldns_pkt_rd(q));
	ldns_pkt_set_ra(r, true);
	ldns_pkt_set_rcode(r,
			   how == DNS_REFUSE_NXDOMAIN ? LDNS_RCODE_NXDOMAIN : LDNS_RCODE_REFUSED);
	res->rcode = how == DNS_REFUSE_NXDOMAIN ? "NXDOMAIN" : "REFUSED";
	if (qs && ldns_rr_list_rr_count(qs) > 0) {
		ldns_rr *c = ldns_rr_clone(ldns_rr_list_rr(qs, 0));

		if (!c || !ldns_pkt_push_rr(r, LDNS_SECTION_QUESTION, c)) {
			ldns_rr_free(c);
			goto out;
		}
	}
	if (ldns_pkt_edns(q)) {
		char text[128];
		uint8_t ede[2 + sizeof(text)];
		size_t tl = (size_t)snprintf(text, sizeof(text), "portcullis: %s", why);
		ldns_edns_option_list *l = ldns_edns_option_list_new();
		ldns_edns_option *o;

		if (tl >= sizeof(text))
			tl = sizeof(text) - 1;
		ede[0] = 0;
		ede[1] = prohibited ? LDNS_EDE_PROHIBITED : LDNS_EDE_BLOCKED;
		memcpy(ede + 2, text, tl);
		o = ldns_edns_new_from_data(LDNS_EDNS_EDE, 2 + tl, ede);
		if (!l || !o || !ldns_edns_option_list_push(l, o)) {
			ldns_edns_deep_free(o);
			ldns_edns_option_list_deep_free(l);
			goto out;
		}
		ldns_pkt_set_edns_udp_size(r, DNSG_REPLY_MAX);
		ldns_pkt_set_edns_option_list(r, l);
	}
	if (ldns_pkt2wire(&wire, r, &wlen) != LDNS_STATUS_OK)
		goto out;
	if (wlen > DNSG_REPLY_MAX) {
		rc = PC_EINVAL;
		goto out;
	}
	memcpy(res->reply, wire, wlen);
	res->reply_len = wlen;
	rc = 0;
out:
	free(wire);
	ldns_pkt_free(r);
	return rc;
}

/* Why this query is refused, or NULL to allow it; res->code: the refusal's
 * event.code, set with each reason. *prohibited: the sender or transport
 * is wrong rather than the question. */
static const char *dg_query_judge(const struct dnsguard *g, const struct policy_sandbox *sb,
				  const struct dns_flow *f, ldns_pkt *q, size_t len,
				  const struct dg_qscan *scan, struct dnsguard_query_res *res,
				  bool *prohibited)
{
	const ldns_rr *qrr;
	const char *why;

	*prohibited = true;
	res->code = "not_a_sandbox";
	if (!sb)
		return "sender is not a sandbox";
	res->code = "dns_malformed";
	if (f->proto != IPPROTO_UDP && f->proto != IPPROTO_TCP)
		return "not over UDP or TCP";
	if (f->dst.port != 53 || !dg_is_resolver(g, &f->dst.addr))
		return res->code = "dns_resolver", "not to a configured resolver";
	*prohibited = false;
	if (ldns_pkt_get_opcode(q) != LDNS_PACKET_QUERY)
		return "opcode is not QUERY";
	if (ldns_pkt_qdcount(q) != 1)
		return "not exactly one question";
	if (ldns_pkt_ancount(q) || ldns_pkt_nscount(q))
		return "answer or authority records in a query";
	if (scan->n_opt > 1)
		return "more than one OPT record";
	if (scan->n_other_additional)
		return "additional records in a query";
	if (scan->opt_not_root)
		return "OPT record not owned by the root";
	if (scan->n_opt && (why = dg_edns_check(q)) != NULL)
		return why;
	if (len > DG_QUERY_MAX)
		return "oversized query";
	qrr = ldns_rr_list_rr(ldns_pkt_question(q), 0);
	if (ldns_rr_get_class(qrr) != LDNS_RR_CLASS_IN)
		return "class is not IN";
	if (res->qname[0] == '\0')
		return res->code = "dns_not_host_name", "name is not a host name";
	if (!(rules_qtype_bit(res->qtype) & sb->dns_qtypes))
		return res->code = "dns_type", "query type not permitted";
	if (!policy_name_allowed(sb, res->qname, &res->rule))
		return res->code = "dns_name_not_allowed", "name not on the allow list";
	return NULL;
}

int dnsguard_query(struct dnsguard *g, const struct policy_sandbox *sb, const struct dns_flow *f,
		   const uint8_t *msg, size_t len, uint64_t now_ms, struct dnsguard_query_res *res)
{
	return dnsguard_query_defer(g, sb, f, msg, len, now_ms, NULL, 0, res, NULL);
}

int dnsguard_query_defer(struct dnsguard *g, const struct policy_sandbox *sb,
			 const struct dns_flow *f, const uint8_t *msg, size_t len, uint64_t now_ms,
			 const char *policy, size_t n_sandboxes, struct dnsguard_query_res *res,
			 bool *deferred)
{
	struct dg_qscan scan = {0};
	uint64_t dfr = 0;
	ldns_pkt *q = NULL;
	const char *why;
	bool prohibited;
	int rc = 0;

	if (deferred)
		*deferred = false;
	if (!res)
		return PC_EINVAL;
	memset(res, 0, offsetof(struct dnsguard_query_res, reply));
	res->reply_len = 0;
	res->verdict = DNSG_DROP;
	res->reason = "malformed query";
	res->code = "dns_malformed";
	if (!g || !f) {
		res->reason = "internal error: no guard";
		res->code = "internal_error";
		return PC_EINVAL;
	}
	if (!msg || len < LDNS_HEADER_SIZE || len > 65535 || dg_wire2pkt(&q, msg, len) != 0 ||
	    dg_wire_walk_sel(msg, len, dg_qscan_want, dg_qscan_rr, &scan) != 0) {
		DG_INC(g, q_malformed);
		goto out;
	}
	if (ldns_pkt_qr(q)) {
		/* Answering a response could start a loop between two
		 * responders; a sandbox has no business sending one. */
		res->reason = "a response, not a query";
		DG_INC(g, q_malformed);
		goto out;
	}
	if (ldns_pkt_qdcount(q) >= 1) {
		const ldns_rr *qrr = ldns_rr_list_rr(ldns_pkt_question(q), 0);

		res->qtype = (uint16_t)ldns_rr_get_type(qrr);
		if (dg_dname_str(ldns_rr_owner(qrr), res->qname, sizeof(res->qname)) != 0) {
			res->qname[0] = '\0';
			dg_dname_shown(ldns_rr_owner(qrr), res->qname_shown,
				       sizeof(res->qname_shown));
		}
	}
	why = dg_query_judge(g, sb, f, q, len, &scan, res, &prohibited);
	if (why) {
		res->rule = NULL;
		rc = dg_reply_build(q, sb ? sb->dns_refuse : DNS_REFUSE_REFUSED, prohibited, why,
				    res);
		if (rc == 0) {
			res->verdict = DNSG_REFUSE;
			res->reason = why;
			DG_INC(g, q_refused);
		} else {
			res->reason = "internal error: cannot build the refusal";
			res->code = "internal_error";
			DG_INC(g, q_refused);
		}
		goto out;
	}
	{
		struct dg_pend_key k = {
		    .resolver = f->dst.addr,
		    .client = f->src.addr,
		    .port = f->src.port,
		    .id = ldns_pkt_id(q),
		    .qtype = res->qtype,
		    .dport = f->dst.port,
		    .proto = f->proto,
		    .qname = res->qname,
		};
		bool enomem;
		struct dg_sb *s = dg_sb_get(g, sb->name, true, &enomem);

		if (!s) {
			res->reason = "internal error: out of memory";
			res->code = "internal_error";
			rc = PC_ENOMEM;
			goto out;
		}
		rc = dg_pending_add(g, s, &k, now_ms, res->rule ? res->rule->rule : NULL,
				    deferred && policy ? policy : NULL, n_sandboxes, &dfr);
		pthread_rwlock_unlock(&g->dir);
		if (rc == PC_EREFUSED) {
			/* REFUSED, not NXDOMAIN: the name may exist, and a
			 * stub must not cache its absence. */
			res->rule = NULL;
			res->code = "dns_owed_quota";
			rc = dg_reply_build(q, DNS_REFUSE_REFUSED, false, DNSG_OWED_REASON, res);
			if (rc == 0) {
				res->verdict = DNSG_REFUSE;
				res->reason = DNSG_OWED_REASON;
			} else {
				res->reason = "internal error: cannot build the refusal";
				res->code = "internal_error";
			}
			DG_INC(g, q_refused);
			DG_INC(g, owed_refused);
			goto out;
		}
		if (rc != 0) {
			res->reason = "internal error: out of memory";
			res->code = "internal_error";
			goto out;
		}
	}
	res->verdict = DNSG_ALLOW;
	res->reason = "name allowed";
	res->code = "dns_name";
	DG_INC(g, q_allowed);
	if (deferred)
		*deferred = dfr != 0;
	res->pledge = dfr;
out:
	ldns_pkt_free(q);
	return rc;
}
