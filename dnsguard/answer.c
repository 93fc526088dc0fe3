/* Judging one answer from a resolver: it must answer an outstanding allowed
 * query; its addresses at the end of the question's CNAME chain (and the
 * address hints of HTTPS/SVCB records there) are learned for the sandbox
 * before it is released; "ech" parameters are stripped. */
#include "dnsguard/dnsguard_int.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* State of the walk over the answer's records. */
struct dg_awalk {
	const uint8_t *msg;
	size_t len;
	const ldns_rdf *end; /* last name of the CNAME chain */
	uint32_t chain_ttl;
	uint8_t *copy; /* rewritten message, made on the first ech */
	bool ech;
	struct dg_svcb_hints hints;
	uint32_t hints_ttl;
};

static int dg_awalk_rr(void *arg, const struct dg_wire_rr *w)
{
	struct dg_awalk *a = arg;
	ldns_rdf *target = NULL;
	size_t p = w->rdata + 2, plen;
	bool has_ech, at_end;
	int rc;

	if (w->section == LDNS_SECTION_QUESTION ||
	    (w->type != LDNS_RR_TYPE_SVCB && w->type != LDNS_RR_TYPE_HTTPS))
		return 0;
	/* RDATA: priority, target name, then the parameters to its end. */
	if (w->rdata + 2 > w->end ||
	    ldns_wire2dname(&target, a->msg, w->end, &p) != LDNS_STATUS_OK || p > w->end) {
		ldns_rdf_deep_free(target);
		return PC_EPARSE;
	}
	ldns_rdf_deep_free(target);
	plen = w->end - p;
	at_end = w->section == LDNS_SECTION_ANSWER &&
		 ldns_rr_get_class(w->rr) == LDNS_RR_CLASS_IN &&
		 ldns_dname_compare(ldns_rr_owner(w->rr), a->end) == 0;
	rc = dg_svcb_params_scan(a->msg + p, plen, &has_ech, at_end ? &a->hints : NULL);
	if (rc)
		return rc;
	if (at_end && ldns_rr_ttl(w->rr) < a->hints_ttl)
		a->hints_ttl = ldns_rr_ttl(w->rr);
	if (!has_ech)
		return 0;
	if (!a->copy) {
		a->copy = malloc(a->len);
		if (!a->copy)
			return PC_ENOMEM;
		memcpy(a->copy, a->msg, a->len);
	}
	a->ech = true;
	return dg_svcb_params_strip_ech(a->copy + p, plen);
}

static bool dg_awalk_want(uint16_t type, ldns_pkt_section section)
{
	return section != LDNS_SECTION_QUESTION &&
	       (type == LDNS_RR_TYPE_SVCB || type == LDNS_RR_TYPE_HTTPS);
}

/* Follow CNAMEs from the question's name through the answer section. Sets
 * *end to the last name and *ttl to the smallest TTL on the way; a reason
 * when the chain is unusable. */
static const char *dg_chain(ldns_pkt *pkt, const ldns_rdf *qname, const ldns_rdf **end,
			    uint32_t *ttl)
{
	const ldns_rdf *seen[DG_CHAIN_MAX + 1];
	ldns_rr_list *an = ldns_pkt_answer(pkt);
	size_t n_an = an ? ldns_rr_list_rr_count(an) : 0, nseen = 1;
	const ldns_rdf *cur = qname;

	seen[0] = qname;
	*ttl = UINT32_MAX;
	for (;;) {
		const ldns_rr *hit = NULL;
		const ldns_rdf *target;

		for (size_t i = 0; i < n_an; i++) {
			const ldns_rr *rr = ldns_rr_list_rr(an, i);

			if (ldns_rr_get_type(rr) != LDNS_RR_TYPE_CNAME ||
			    ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN ||
			    ldns_dname_compare(ldns_rr_owner(rr), cur) != 0)
				continue;
			if (hit)
				return "several CNAMEs for one name";
			hit = rr;
		}
		if (!hit)
			break;
		if (nseen > DG_CHAIN_MAX)
			return "CNAME chain too long";
		target = ldns_rr_rd_count(hit) == 1 ? ldns_rr_rdf(hit, 0) : NULL;
		if (!target || ldns_rdf_get_type(target) != LDNS_RDF_TYPE_DNAME)
			return "malformed CNAME";
		for (size_t i = 0; i < nseen; i++)
			if (ldns_dname_compare(seen[i], target) == 0)
				return "CNAME loop";
		if (ldns_rr_ttl(hit) < *ttl)
			*ttl = ldns_rr_ttl(hit);
		seen[nseen++] = target;
		cur = target;
	}
	*end = cur;
	return NULL;
}

static uint32_t dg_ttl_clamp(const struct dnsguard *g, uint32_t ttl)
{
	return ttl < g->ttl_min ? g->ttl_min : ttl > g->ttl_max ? g->ttl_max : ttl;
}

/* Add an address (from an A/AAAA rdf or a hint) to res->learned with its
 * TTL; duplicates are kept once with the smaller TTL. */
static void dg_collect(struct dnsguard_answer_res *res, uint32_t *ttls, const struct pc_addr *a,
		       uint32_t ttl)
{
	for (size_t i = 0; i < res->n_learned; i++)
		if (pc_addr_eq(&res->learned[i], a)) {
			if (ttl < ttls[i])
				ttls[i] = ttl;
			return;
		}
	if (res->n_learned < DNSG_LEARN_MAX) {
		ttls[res->n_learned] = ttl;
		res->learned[res->n_learned++] = *a;
	}
}

static void dg_collect_rrs(const struct dnsguard *g, ldns_pkt *pkt, const ldns_rdf *end,
			   uint32_t chain_ttl, struct dnsguard_answer_res *res, uint32_t *ttls)
{
	ldns_rr_list *an = ldns_pkt_answer(pkt);
	size_t n_an = an ? ldns_rr_list_rr_count(an) : 0;

	for (size_t i = 0; i < n_an; i++) {
		const ldns_rr *rr = ldns_rr_list_rr(an, i);
		ldns_rr_type t = ldns_rr_get_type(rr);
		const ldns_rdf *d = ldns_rr_rd_count(rr) == 1 ? ldns_rr_rdf(rr, 0) : NULL;
		struct pc_addr a = {0};
		uint32_t ttl = ldns_rr_ttl(rr);

		if ((t != LDNS_RR_TYPE_A && t != LDNS_RR_TYPE_AAAA) || !d ||
		    ldns_rr_get_class(rr) != LDNS_RR_CLASS_IN ||
		    ldns_dname_compare(ldns_rr_owner(rr), end) != 0)
			continue;
		if (t == LDNS_RR_TYPE_A && ldns_rdf_get_type(d) == LDNS_RDF_TYPE_A &&
		    ldns_rdf_size(d) == 4) {
			a.family = AF_INET;
			memcpy(a.a, ldns_rdf_data(d), 4);
		} else if (t == LDNS_RR_TYPE_AAAA && ldns_rdf_get_type(d) == LDNS_RDF_TYPE_AAAA &&
			   ldns_rdf_size(d) == 16) {
			a.family = AF_INET6;
			memcpy(a.a, ldns_rdf_data(d), 16);
		} else {
			continue;
		}
		dg_collect(res, ttls, &a, dg_ttl_clamp(g, ttl < chain_ttl ? ttl : chain_ttl));
	}
}

static bool dg_routable(const struct dnsguard *g, const struct pc_addr *a)
{
	for (size_t i = 0; i < g->n_routable; i++)
		if (pc_prefix_contains(&g->routable[i], a))
			return true;
	return false;
}

/* Whether a is the gateway's, its sandboxes', or special-purpose and not
 * declared routable; why says which. An IPv6 address that delivers to an
 * embedded IPv4 one (mapped, NAT64) and is itself routable here is judged
 * by that IPv4 address too: declaring 64:ff9b::/96 routable must not open
 * 169.254.169.254 through it. g->local_lock held (read). */
static bool dg_special(const struct dnsguard *g, const struct pc_addr *a, bool embedded, char *why,
		       size_t len)
{
	const struct pc_special *e;
	struct pc_addr v4;
	const char *how, *local = NULL;
	char inner[96], as[PC_ADDRSTRLEN];

	for (size_t i = 0; i < g->n_local && !local; i++)
		if (pc_prefix_contains(&g->local[i].prefix, a))
			local = g->local[i].what;
	e = pc_special_find(a);
	if (e && dg_routable(g, a))
		e = NULL;
	/* Both when both hold: "the sandbox bridge's subnet, and private-use
	 * (RFC 1918), special-purpose". */
	if (e) {
		snprintf(why, len, "%s%s%s (%s), special-purpose", local ? local : "",
			 local ? ", and " : "", e->name, e->rfc);
		return true;
	}
	if (local) {
		snprintf(why, len, "%s", local);
		return true;
	}
	how = embedded ? pc_addr_v4_embedded(a, &v4) : NULL;
	if (how && dg_special(g, &v4, false, inner, sizeof(inner))) {
		snprintf(why, len, "%s %s: %s", how, pc_addr_str(&v4, as, sizeof(as)), inner);
		return true;
	}
	return false;
}

/* Move the addresses no answer may teach from res->learned to
 * res->unlearned, unless a cidr entry of sb covers them: the operator
 * opened that address to this sandbox explicitly. */
static void dg_unlearn_special(struct dnsguard *g, const struct policy_sandbox *sb,
			       struct dnsguard_answer_res *res, uint32_t *ttls)
{
	size_t k = 0;

	pthread_rwlock_rdlock(&g->local_lock);
	for (size_t i = 0; i < res->n_learned; i++) {
		char why[sizeof(res->unlearned[0].why)];

		if (policy_cidr_covers(sb, &res->learned[i], NULL) ||
		    !dg_special(g, &res->learned[i], true, why, sizeof(why))) {
			res->learned[k] = res->learned[i];
			ttls[k++] = ttls[i];
			continue;
		}
		if (res->n_unlearned < DNSG_UNLEARNED_SHOWN) {
			res->unlearned[res->n_unlearned].addr = res->learned[i];
			pc_strlcpy(res->unlearned[res->n_unlearned].why, why,
				   sizeof(res->unlearned[0].why));
		}
		res->n_unlearned++;
	}
	pthread_rwlock_unlock(&g->local_lock);
	res->n_learned = k;
}

int dnsguard_answer(struct dnsguard *g, const struct policy_sandbox *sb, const struct dns_flow *f,
		    const uint8_t *msg, size_t len, uint64_t now_ms,
		    struct dnsguard_answer_res *res)
{
	int rc = dnsguard_answer_judge(g, sb, f, msg, len, now_ms, res);

	if (rc == 0 && res->verdict == DNSG_ALLOW &&
	    dnsguard_learn_commit(g, sb->name, res, now_ms) != 0) {
		res->verdict = DNSG_DROP;
		res->reason = "internal error: out of memory";
		res->n_learned = 0;
		free(res->rewritten);
		res->rewritten = NULL;
		DG_INC(g, a_dropped);
		return PC_ENOMEM;
	}
	return rc;
}

int dnsguard_learn_commit(struct dnsguard *g, const char *sb_name,
			  const struct dnsguard_answer_res *res, uint64_t now_ms)
{
	struct dg_sb *s;
	bool enomem;
	int rc = 0;

	if (!g || !sb_name || !res)
		return PC_EINVAL;
	if (res->n_learned == 0)
		return 0;
	s = dg_sb_get(g, sb_name, true, &enomem);
	if (!s)
		return PC_ENOMEM;
	for (size_t i = 0; i < res->n_learned && i < DNSG_LEARN_MAX && rc == 0; i++)
		rc = dg_learn(g, s, &res->learned[i], res->qname,
			      now_ms + (uint64_t)res->ttls[i] * 1000u, now_ms);
	pthread_rwlock_unlock(&g->dir);
	return rc ? PC_ENOMEM : 0;
}

int dnsguard_answer_judge(struct dnsguard *g, const struct policy_sandbox *sb,
			  const struct dns_flow *f, const uint8_t *msg, size_t len, uint64_t now_ms,
			  struct dnsguard_answer_res *res)
{
	struct dg_awalk aw = {.msg = msg, .len = len, .hints_ttl = UINT32_MAX};
	uint32_t *ttls;
	const ldns_rr *qrr;
	ldns_pkt *pkt = NULL;
	struct dg_sb *s = NULL;
	bool enomem;
	int rc = 0;

	if (!res)
		return PC_EINVAL;
	memset(res, 0, sizeof(*res));
	ttls = res->ttls;
	res->verdict = DNSG_DROP;
	res->reason = "malformed answer";
	if (!g || !f) {
		res->reason = "internal error: no guard";
		return PC_EINVAL;
	}
	if (!sb) {
		res->reason = "receiver is not a sandbox";
		goto drop;
	}
	if (f->src.port != 53 || !dg_is_resolver(g, &f->src.addr)) {
		res->reason = "not from a configured resolver";
		goto drop;
	}
	if (!msg || len < LDNS_HEADER_SIZE || len > 65535 || dg_wire2pkt(&pkt, msg, len) != 0)
		goto drop;
	if (!ldns_pkt_qr(pkt) || ldns_pkt_get_opcode(pkt) != LDNS_PACKET_QUERY ||
	    ldns_pkt_qdcount(pkt) != 1) {
		res->reason = "not a response to one question";
		goto drop;
	}
	qrr = ldns_rr_list_rr(ldns_pkt_question(pkt), 0);
	res->qtype = (uint16_t)ldns_rr_get_type(qrr);
	if (ldns_rr_get_class(qrr) != LDNS_RR_CLASS_IN ||
	    dg_dname_str(ldns_rr_owner(qrr), res->qname, sizeof(res->qname)) != 0) {
		res->qname[0] = '\0';
		res->reason = "question is not one an allowed query asked";
		goto drop;
	}
	if (ldns_pkt_get_rcode(pkt) == LDNS_RCODE_NOERROR) {
		const char *why = dg_chain(pkt, ldns_rr_owner(qrr), &aw.end, &aw.chain_ttl);

		if (why) {
			res->reason = why;
			goto drop;
		}
	} else {
		aw.end = ldns_rr_owner(qrr); /* nothing will be learned */
	}
	/* Every SVCB/HTTPS record anywhere is checked and loses ech. */
	rc = dg_wire_walk_sel(msg, len, dg_awalk_want, dg_awalk_rr, &aw);
	if (rc) {
		res->reason =
		    rc == PC_ENOMEM ? "internal error: out of memory" : "malformed answer records";
		goto drop;
	}

	s = dg_sb_get(g, sb->name, false, &enomem);
	{
		struct dg_pend_key k = {
		    .resolver = f->src.addr,
		    .client = f->dst.addr,
		    .port = f->dst.port,
		    .id = ldns_pkt_id(pkt),
		    .qtype = res->qtype,
		    .dport = f->src.port,
		    .proto = f->proto,
		    .qname = res->qname,
		};
		if (!s || !dg_pending_take(g, s, &k, now_ms, &res->query, &res->query_owed)) {
			res->reason = "matches no outstanding query";
			goto drop;
		}
	}

	/* What to learn (committed by the caller: dnsguard_learn_commit),
	 * and only while the name is still allowed (the policy may have been
	 * reloaded since the query). */
	if (ldns_pkt_get_rcode(pkt) == LDNS_RCODE_NOERROR &&
	    policy_name_allowed(sb, res->qname, NULL)) {
		dg_collect_rrs(g, pkt, aw.end, aw.chain_ttl, res, ttls);
		for (size_t i = 0; i < aw.hints.n; i++) {
			uint32_t t = aw.hints_ttl < aw.chain_ttl ? aw.hints_ttl : aw.chain_ttl;

			dg_collect(res, ttls, &aw.hints.a[i], dg_ttl_clamp(g, t));
		}
		dg_unlearn_special(g, sb, res, ttls);
		for (size_t i = 0; i < res->n_learned; i++)
			if (i == 0 || ttls[i] < res->ttl)
				res->ttl = ttls[i];
	}
	if (aw.ech) {
		ldns_pkt *check = NULL;

		/* the rewrite must still be a message ldns accepts */
		if (dg_wire2pkt(&check, aw.copy, len) != 0) {
			res->reason = "cannot strip ech";
			goto drop;
		}
		ldns_pkt_free(check);
		res->rewritten = aw.copy;
		res->rewritten_len = len;
		aw.copy = NULL;
		DG_INC(g, ech_stripped);
	}
	res->verdict = DNSG_ALLOW;
	if (res->n_unlearned)
		res->reason = res->n_learned ? "answer released, addresses learned but not its "
					       "special-purpose ones"
					     : "answer released, its special-purpose addresses not "
					       "learned";
	else
		res->reason =
		    res->n_learned ? "answer released, addresses learned" : "answer released";
	DG_INC(g, a_released);
	goto out;
drop:
	res->verdict = DNSG_DROP;
	res->n_learned = 0;
	res->n_unlearned = 0;
	DG_INC(g, a_dropped);
out:
	if (s)
		pthread_rwlock_unlock(&g->dir);
	free(aw.copy);
	ldns_pkt_free(pkt);
	return rc == PC_ENOMEM ? rc : 0;
}
