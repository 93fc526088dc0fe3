/* "Would this be allowed?" (`portcullis policy test`): the packets a
 * sandbox would send for one connection or DNS query — the query for the
 * name, the resolver's answer, the SYN or first datagram, the server's
 * SYN-ACK and the ClientHello — built as bytes and judged one after the
 * other by decide_packet(), the engine's own decision, over a fresh DNS
 * guard and flow tables. Nothing is sent and no kernel state is read: the
 * answer is what the policy says for a sandbox that resolves through the
 * guard, as the engine would give it on a freshly started box. */
#include "engine/engine_int.h" /* first: netinet/in.h before linux/ headers */

#include "engine/engine.h"

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WI_PORT_IFINDEX 1 /* the sandbox's bridge port, as its mark */
#define WI_SPORT	40000
#define WI_ISN		1000u
#define WI_SRV_ISN	5000u
#define WI_DNS_ID	0x5a17
#define WI_NOW_MS	1000000

struct wi {
	const struct config *cfg;
	struct decide_ctx ctx;
	struct dnsguard *dg;
	struct portmap pm;
	struct held_table *held;
	struct decision d;
	struct policy_src src; /* the sandbox as the engine sees it */
	uint8_t buf[2048];
};

/* ---- bytes ------------------------------------------------------------------- */

/* An IP+TCP segment with payload into w->buf; its length. */
static size_t tcp_seg(struct wi *w, const struct pc_endpoint *s, const struct pc_endpoint *d,
		      uint8_t flags, uint32_t seq, uint32_t ack, const uint8_t *data, size_t n)
{
	size_t o = pc_wire_ip(w->buf, IPPROTO_TCP, 20 + n, 64, &s->addr, &d->addr);
	uint8_t *t = w->buf + o;
	uint16_t sum;

	pc_wire_tcp(t, s->port, d->port, flags, seq, ack);
	t[14] = 0xff; /* window */
	t[15] = 0xff;
	if (n)
		memcpy(t + 20, data, n);
	sum = pkt_l4_csum(&s->addr, &d->addr, IPPROTO_TCP, t, 20 + n);
	t[16] = (uint8_t)(sum >> 8);
	t[17] = (uint8_t)sum;
	return o + 20 + n;
}

/* A query for name (type qtype), or with an the answer giving addr; 0 if
 * no DNS name can carry it. */
static size_t dns_msg(uint8_t *b, const char *name, uint16_t qtype, const struct pc_addr *an)
{
	size_t o = pc_wire_dns_question(b, WI_DNS_ID, an != NULL, an ? 1 : 0, name, qtype);

	if (!o || !an)
		return o;
	return o + pc_wire_dns_addr(b + o, an);
}

/* ---- judging ------------------------------------------------------------------ */

/* One packet through decide_packet(), as a queue thread hands it over:
 * from the sandbox (prerouting, stamped with its port) or toward it
 * (forward). Learns what an allowed answer teaches, as the queue thread
 * does once logd took the record. */
static void judge(struct wi *w, size_t len, bool from_sandbox)
{
	struct pkt_in in = {.id = 1,
			    .mark = from_sandbox ? WI_PORT_IFINDEX : 0,
			    .hook = from_sandbox ? NF_INET_PRE_ROUTING : NF_INET_FORWARD,
			    .has_mac = from_sandbox && w->src.has_mac,
			    .data = w->buf,
			    .len = len};

	memcpy(in.mac, w->src.mac, 6);
	decide_packet(&w->ctx, &in, &w->d);
	if (decision_commit(w->dg, &w->d, w->ctx.now_ms) < 0)
		w->d.v = VK_DROP;
}

static bool passes(const struct decision *d)
{
	return d->v == VK_PASS || d->v == VK_ALLOW || d->v == VK_ALLOW_VAULT || d->v == VK_HELD;
}

/* Record one step: what was judged, and the decision on it. */
static struct whatif_step *step(struct whatif_res *r, const struct decision *d, const char *fmt,
				...) __attribute__((format(printf, 3, 4)));
static struct whatif_step *step(struct whatif_res *r, const struct decision *d, const char *fmt,
				...)
{
	struct whatif_step *s = &r->steps[r->n_steps < WHATIF_STEPS ? r->n_steps++ : 0];
	va_list ap;

	memset(s, 0, sizeof(*s));
	va_start(ap, fmt);
	vsnprintf(s->what, sizeof(s->what), fmt, ap);
	va_end(ap);
	s->allowed = passes(d);
	s->held = d->v == VK_HELD;
	s->vault = d->v == VK_ALLOW_VAULT;
	if (d->has_rec) {
		s->recorded = true;
		pc_strlcpy(s->rule, d->rec.rule ? d->rec.rule : "", sizeof(s->rule));
		pc_strlcpy(s->reason, d->rec.reason ? d->rec.reason : "", sizeof(s->reason));
	}
	return s;
}

static void outcome(struct whatif_res *r, const struct whatif_step *s)
{
	r->allowed = s->allowed && !s->held;
	r->vault = s->vault;
	pc_strlcpy(r->rule, s->rule, sizeof(r->rule));
	pc_strlcpy(r->reason, s->reason, sizeof(r->reason));
}

/* The sandbox's address of family fam: its first source of that family,
 * else one no sandbox claims by address (it is matched by MAC or port). */
static void src_addr(const struct policy_sandbox *sb, int fam, struct pc_addr *out)
{
	for (size_t i = 0; i < sb->match.n_sources; i++) {
		const struct pc_prefix *p = &sb->match.sources[i];

		if (p->addr.family == fam) {
			*out = p->addr;
			if (p->len < (fam == AF_INET ? 32 : 128))
				out->a[fam == AF_INET ? 3 : 15] |= 1; /* a host, not the network */
			return;
		}
	}
	pc_addr_parse(fam == AF_INET ? "10.255.255.254" : "fd00::fffe", out);
}

static int fam_of_sandbox(const struct policy_sandbox *sb, const struct config *cfg)
{
	bool v4 = false, v6 = false, r4 = false;

	for (size_t i = 0; i < sb->match.n_sources; i++) {
		v4 |= sb->match.sources[i].addr.family == AF_INET;
		v6 |= sb->match.sources[i].addr.family == AF_INET6;
	}
	for (size_t i = 0; i < cfg->dns.n_resolvers; i++)
		r4 |= cfg->dns.resolvers[i].family == AF_INET;
	if (v6 && !v4)
		return AF_INET6;
	if (!v4 && !r4 && cfg->dns.n_resolvers)
		return AF_INET6;
	return AF_INET;
}

/* The DNS query for host and, allowed, the resolver's answer giving
 * answer_addr. true when the sandbox ends up holding the address. */
static bool resolve(struct wi *w, const char *host, int fam, const struct pc_addr *answer_addr,
		    struct whatif_res *r)
{
	struct pc_endpoint s = {.port = WI_SPORT}, rv = {.port = 53};
	uint8_t msg[600];
	uint16_t qtype = fam == AF_INET6 ? 28 : 1;
	char rs[PC_ADDRSTRLEN];
	size_t n;
	int len;

	s.addr = w->src.addr;
	for (size_t i = 0; i < w->cfg->dns.n_resolvers && !rv.addr.family; i++)
		if (w->cfg->dns.resolvers[i].family == s.addr.family)
			rv.addr = w->cfg->dns.resolvers[i];
	if (!rv.addr.family) {
		/* none of its family: the query goes to a resolver the guard
		 * does not know, and is judged as such */
		pc_addr_parse(s.addr.family == AF_INET ? "192.0.2.53" : "2001:db8::53", &rv.addr);
	}
	n = dns_msg(msg, host, qtype, NULL);
	len = pkt_build_udp(&s, &rv, msg, n, w->buf, sizeof(w->buf));
	if (!n || len < 0) {
		struct whatif_step *st = &r->steps[r->n_steps++];

		memset(st, 0, sizeof(*st));
		snprintf(st->what, sizeof(st->what), "DNS query %s", host);
		pc_strlcpy(st->reason, "not a name a DNS query can carry", sizeof(st->reason));
		outcome(r, st);
		return false;
	}
	judge(w, (size_t)len, true);
	outcome(r, step(r, &w->d, "DNS query %s %s to %s:53/udp", fam == AF_INET6 ? "AAAA" : "A",
			host, pc_addr_str(&rv.addr, rs, sizeof(rs))));
	if (!r->allowed)
		return false;
	n = dns_msg(msg, host, qtype, answer_addr);
	len = pkt_build_udp(&rv, &s, msg, n, w->buf, sizeof(w->buf));
	if (len < 0)
		return false;
	judge(w, (size_t)len, false);
	outcome(r, step(r, &w->d, "its answer %s %s from the resolver",
			pc_addr_str(answer_addr, rs, sizeof(rs)), host));
	if (!r->allowed)
		return false;
	return true;
}

int engine_whatif(const struct config *cfg, const struct policy *pol, const struct whatif_req *q,
		  struct whatif_res *out, struct pc_err *err)
{
	const struct policy_sandbox *sb = policy_sandbox_by_name(pol, q->sandbox);
	struct whatif_res r;
	struct wi *w = NULL;
	struct nft_port *port = NULL;
	struct pc_addr dst;
	struct pc_endpoint s = {.port = WI_SPORT + 1}, d;
	char as[PC_ADDRSTRLEN], tgt[PC_ADDRSTRLEN + POLICY_HOST_MAX + 16];
	bool by_name;
	int fam, rc = 0;
	size_t len;

	if (!sb)
		return pc_err_set(err, PC_ENOENT, "no sandbox '%s' in the policy", q->sandbox);
	if (q->proto != IPPROTO_TCP && q->proto != IPPROTO_UDP)
		return pc_err_set(err, PC_EINVAL, "proto: expected tcp or udp");
	memset(&r, 0, sizeof(r));
	by_name = pc_addr_parse(q->target, &dst) < 0;
	w = calloc(1, sizeof(*w));
	port = calloc(1, sizeof(*port));
	if (!w || !port) {
		free(port);
		rc = pc_err_set(err, PC_ENOMEM, "out of memory");
		goto out;
	}
	pthread_rwlock_init(&w->pm.lock, NULL);
	w->cfg = cfg;
	/* the sandbox's own port, MAC and address, as its packets carry them */
	pc_strlcpy(port->name, sb->match.port[0] ? sb->match.port : "pcs-whatif",
		   sizeof(port->name));
	port->ifindex = WI_PORT_IFINDEX;
	portmap_set(&w->pm, port, 1);
	w->src.has_mac = true;
	if (sb->match.has_mac)
		memcpy(w->src.mac, sb->match.mac, 6);
	else
		memcpy(w->src.mac, "\x02\x00\x00\x00\x00\x01", 6);
	pc_strlcpy(w->src.port, port->name, sizeof(w->src.port));
	if ((rc = dnsguard_new(cfg, &w->dg, err)) < 0 || (rc = held_table_new(64, &w->held)) < 0) {
		if (rc == PC_ENOMEM)
			pc_err_set(err, rc, "out of memory");
		goto out;
	}
	w->ctx = (struct decide_ctx){cfg, pol, w->dg, &w->pm, w->held, WI_NOW_MS, false, NULL};

	fam = by_name ? fam_of_sandbox(sb, cfg) : dst.family;
	src_addr(sb, fam, &w->src.addr);
	if (by_name) {
		struct pc_addr ans;

		if (q->address) {
			if (pc_addr_parse(q->address, &ans) < 0 || ans.family != fam) {
				rc = pc_err_set(err, PC_EINVAL,
						"--address: expected an IPv%d address (the family "
						"the sandbox resolves)",
						fam == AF_INET ? 4 : 6);
				goto out;
			}
		} else {
			/* an ordinary address: special-purpose ones are never learned */
			pc_addr_parse(fam == AF_INET ? "93.184.215.14"
						     : "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
				      &ans);
		}
		if (!resolve(w, q->target, fam, &ans, &r))
			goto done;
		if (q->port == 53) {
			/* the question was the query itself: its verdict and rule */
			outcome(&r, &r.steps[0]);
			goto done;
		}
		dst = ans;
	} else if (q->port == 53) {
		/* DNS to an address: a query (for the root) to it */
		struct pc_endpoint rv = {.port = 53};
		uint8_t msg[64];
		size_t n = dns_msg(msg, "", 1, NULL);
		int l;

		rv.addr = dst;
		s.addr = w->src.addr;
		s.port = WI_SPORT;
		l = pkt_build_udp(&s, &rv, msg, n, w->buf, sizeof(w->buf));
		if (q->proto == IPPROTO_TCP)
			l = (int)tcp_seg(w, &s, &rv, 0x02, WI_ISN, 0, NULL, 0);
		if (l < 0) {
			rc = pc_err_set(err, PC_EINVAL, "packet too large");
			goto out;
		}
		judge(w, (size_t)l, true);
		outcome(&r, step(&r, &w->d, "DNS %s to %s:53/%s",
				 q->proto == IPPROTO_TCP ? "connection" : "query",
				 pc_addr_str(&dst, as, sizeof(as)),
				 q->proto == IPPROTO_TCP ? "tcp" : "udp"));
		goto done;
	}

	/* The flow itself. */
	s.addr = w->src.addr;
	d.addr = dst;
	d.port = q->port;
	pc_addr_str(&dst, as, sizeof(as));
	snprintf(tgt, sizeof(tgt), "%s port %u%s%s%s", as, q->port, by_name ? " (" : "",
		 by_name ? q->target : "", by_name ? ")" : "");
	if (q->proto == IPPROTO_UDP) {
		static const uint8_t probe[] = "portcullis policy test";
		int l = pkt_build_udp(&s, &d, probe, sizeof(probe) - 1, w->buf, sizeof(w->buf));

		if (l < 0) {
			rc = pc_err_set(err, PC_EINVAL, "packet too large");
			goto out;
		}
		judge(w, (size_t)l, true);
		outcome(&r, step(&r, &w->d, "UDP to %s", tgt));
		goto done;
	}
	len = tcp_seg(w, &s, &d, 0x02, WI_ISN, 0, NULL, 0);
	judge(w, len, true);
	outcome(&r, step(&r, &w->d, "TCP SYN to %s", tgt));
	if (w->d.v != VK_HELD)
		goto done;
	/* Held until its ClientHello: the server accepts, the sandbox sends
	 * one naming the host (or, for an address, nothing better than it). */
	len = tcp_seg(w, &d, &s, 0x12, WI_SRV_ISN, WI_ISN + 1, NULL, 0);
	judge(w, len, false);
	if (!passes(&w->d)) {
		outcome(&r, step(&r, &w->d, "the server's SYN-ACK"));
		goto done;
	}
	{
		uint8_t hello[600];
		size_t n = pc_wire_client_hello(hello, by_name ? q->target : as);

		len = tcp_seg(w, &s, &d, 0x18, WI_ISN + 1, WI_SRV_ISN + 1, hello, n);
		judge(w, len, true);
		outcome(&r, step(&r, &w->d, "TLS ClientHello naming %s", by_name ? q->target : as));
	}
done:
	*out = r;
out:
	if (w) {
		decision_clear(&w->d);
		held_table_free(w->held);
		portmap_set(&w->pm, NULL, 0);
		dnsguard_free(w->dg);
		pthread_rwlock_destroy(&w->pm.lock);
		free(w);
	}
	return rc;
}
