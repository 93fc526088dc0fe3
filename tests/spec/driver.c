/* The differential driver (spec/driver.h): real packets through an
 * emulation of the ruleset and the engine's decide_packet(), compared with
 * the model. The emulation is docs/spec.md's assumptions A2-A5 and
 * conntrack's view of TCP (nf_conntrack_tcp_loose on: an ACK without an
 * entry is picked up as new; SYN+ACK, FIN, RST without one are invalid). */
#include "engine/engine_int.h" /* first: netinet/in.h before linux/ headers */

#include "rules/rules_int.h"
#include "tests/spec/driver.h"
#include "tests/unit/wire.h"

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F_FIN 0x01
#define F_SYN 0x02
#define F_RST 0x04
#define F_PSH 0x08
#define F_ACK 0x10
#define F_URG 0x20

#define CT_MAX	   128
#define POLS_MAX   8
#define MARK_ALLOW 1
#define MARK_HELD  2

/* One conntrack entry of the emulation: a is the original sender. */
struct ct_ent {
	bool used;
	uint8_t proto;
	struct pc_addr a, b;
	uint16_t ap, bp;
	bool seen_reply;
	int mark;
	bool vault;
	bool has_meta;
	struct flow_meta meta;
	bool rec_allowed; /* the engine wrote the flow's allowed record */
};

struct drv {
	struct config cfg;
	struct policy *pols[POLS_MAX];
	size_t n_pols;
	struct dnsguard *dg;
	struct portmap pm;
	struct held_table *held;
	struct dnstcp_table *dnstcp;
	struct decide_ctx ctx;
	struct decision dec;
	struct spec_world w;
	struct ct_ent ct[CT_MAX];
	size_t held_cap, dnstcp_cap;
	unsigned last;
	uint8_t buf[17000];
};

/* ---- setup -------------------------------------------------------------------- */

static void must(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "spec driver: %s\n", what);
		abort();
	}
}

struct drv *drv_new(const char *yaml, bool dns_defer)
{
	struct drv *d = calloc(1, sizeof(*d));
	struct pc_err err = {0};
	struct nft_port *ports = calloc(2, sizeof(*ports));

	must(d && ports, "out of memory");
	pthread_rwlock_init(&d->pm.lock, NULL);
	config_defaults(&d->cfg);
	must(pc_addr_parse("198.51.100.53", &d->cfg.dns.resolvers[0]) == 0 &&
		 pc_addr_parse("2001:db8::53", &d->cfg.dns.resolvers[1]) == 0,
	     "resolvers");
	d->cfg.dns.n_resolvers = 2;
	d->cfg.engine.sni_timeout_ms = 3000;
	if (policy_load_buffer("spec.yaml", yaml, strlen(yaml), &d->cfg, &d->pols[0], &err) < 0) {
		fprintf(stderr, "spec driver: policy: %s\n", err.msg);
		abort();
	}
	d->n_pols = 1;
	must(dnsguard_new(&d->cfg, &d->dg, &err) == 0, "dnsguard");
	pc_strlcpy(ports[0].name, "pcv1", PC_IFNAMSIZ);
	ports[0].ifindex = DRV_PORT1;
	pc_strlcpy(ports[1].name, "pcv2", PC_IFNAMSIZ);
	ports[1].ifindex = DRV_PORT2;
	portmap_set(&d->pm, ports, 2);
	d->held_cap = 4096;
	d->dnstcp_cap = DNSTCP_STREAMS_MAX;
	must(held_table_new(d->held_cap, &d->held) == 0, "held table");
	must(dnstcp_table_new(d->dnstcp_cap, &d->dnstcp) == 0, "dnstcp table");
	d->ctx = (struct decide_ctx){&d->cfg, d->pols[0], d->dg,     &d->pm,
				     d->held, 1000000,	  dns_defer, d->dnstcp};
	spec_world_init(&d->w, &d->cfg, d->pols[0]);
	d->w.now_ms = d->ctx.now_ms;
	d->w.held_cap = d->held_cap;
	d->w.dns_defer = dns_defer;
	d->w.dnstcp_cap = d->dnstcp_cap;
	pc_addr_parse("10.203.0.1", &d->w.gateway[0]);
	pc_addr_parse("fd00:203::1", &d->w.gateway[1]);
	d->w.n_gateway = 2;
	pc_prefix_parse("10.203.0.0/24", &d->w.bridge[0]);
	pc_prefix_parse("fd00:203::/64", &d->w.bridge[1]);
	d->w.n_bridge = 2;
	return d;
}

void drv_free(struct drv *d)
{
	if (!d)
		return;
	decision_clear(&d->dec);
	held_table_free(d->held);
	dnstcp_table_free(d->dnstcp);
	portmap_set(&d->pm, NULL, 0);
	dnsguard_free(d->dg);
	spec_world_free(&d->w);
	for (size_t i = 0; i < d->n_pols; i++)
		policy_unref(d->pols[i]);
	free(d);
}

void drv_reset_flows(struct drv *d)
{
	held_table_free(d->held);
	dnstcp_table_free(d->dnstcp);
	must(held_table_new(d->held_cap, &d->held) == 0, "held table");
	must(dnstcp_table_new(d->dnstcp_cap, &d->dnstcp) == 0, "dnstcp table");
	d->ctx.held = d->held;
	d->ctx.dnstcp = d->dnstcp;
	drv_ct_forget(d);
	spec_world_forget_flows(&d->w);
}

void drv_ct_forget(struct drv *d)
{
	memset(d->ct, 0, sizeof(d->ct));
}

void drv_set_capacity(struct drv *d, size_t held, size_t dnstcp)
{
	d->held_cap = d->w.held_cap = held;
	d->dnstcp_cap = d->w.dnstcp_cap = dnstcp;
	drv_reset_flows(d);
}

void drv_advance(struct drv *d, uint64_t ms)
{
	d->ctx.now_ms += ms;
	d->w.now_ms = d->ctx.now_ms;
}

bool drv_describes(struct drv *d, const struct drv_pkt *p)
{
	return spec_describes(&d->w, &p->s);
}

unsigned drv_last(const struct drv *d)
{
	return d->last;
}

/* ---- payloads ----------------------------------------------------------------- */

size_t drv_dns_query(uint8_t *b, uint16_t id, const char *name, uint16_t qtype)
{
	return wire_dns_question(b, id, false, 0, name, qtype);
}

size_t drv_dns_answer(uint8_t *b, uint16_t id, const char *name, uint16_t qtype,
		      const struct pc_addr *addrs, size_t n)
{
	size_t o = wire_dns_question(b, id, true, (uint16_t)n, name, qtype);

	for (size_t i = 0; i < n; i++)
		o += wire_dns_addr(b + o, &addrs[i]);
	return o;
}

size_t drv_client_hello(uint8_t *b, const char *sni)
{
	return wire_client_hello(b, sni);
}

size_t drv_client_hello_ext(uint8_t *b, const char *sni, uint16_t type, size_t len)
{
	size_t n = drv_client_hello(b, sni);
	/* record, handshake and extension-block lengths grow by the extension */
	size_t rec = ((size_t)b[3] << 8 | b[4]) + 4 + len,
	       hs = ((size_t)b[7] << 8 | b[8]) + 4 + len,
	       ext = ((size_t)b[50] << 8 | b[51]) + 4 + len;

	b[3] = (uint8_t)(rec >> 8);
	b[4] = (uint8_t)rec;
	b[7] = (uint8_t)(hs >> 8);
	b[8] = (uint8_t)hs;
	b[50] = (uint8_t)(ext >> 8);
	b[51] = (uint8_t)ext;
	b[n++] = (uint8_t)(type >> 8);
	b[n++] = (uint8_t)type;
	b[n++] = (uint8_t)(len >> 8);
	b[n++] = (uint8_t)len;
	memset(b + n, 0x5a, len);
	return n + len;
}

size_t drv_tls_bad(uint8_t *b)
{
	size_t n = drv_client_hello(b, "api.allowed.test");

	b[5] = 2; /* ServerHello where a ClientHello must be */
	return n;
}

size_t drv_tcp_frame(uint8_t *b, size_t n)
{
	memmove(b + 2, b, n);
	b[0] = (uint8_t)(n >> 8);
	b[1] = (uint8_t)n;
	return n + 2;
}

/* ---- packet bytes --------------------------------------------------------------- */

static size_t ip_head(uint8_t *b, const struct spec_pkt *s, uint8_t proto, size_t l4len, size_t ext)
{
	if (s->src.family == AF_INET6) {
		memset(b, 0, 40 + ext);
		b[0] = 0x60;
		b[4] = (uint8_t)((l4len + ext) >> 8);
		b[5] = (uint8_t)(l4len + ext);
		b[6] = ext ? 60 : proto; /* destination options first */
		b[7] = 64;
		memcpy(b + 8, s->src.a, 16);
		memcpy(b + 24, s->dst.a, 16);
		if (ext) { /* one PadN option over the whole header: bytes that ride along */
			b[40] = proto;
			b[41] = (uint8_t)(ext / 8 - 1);
			b[42] = 1;
			b[43] = (uint8_t)(ext - 4 > 255 ? 255 : ext - 4);
			for (size_t o = 44 + b[43]; o + 2 <= 40 + ext; o += 2 + b[o + 1]) {
				size_t left = 40 + ext - o - 2;

				b[o] = 1;
				b[o + 1] = (uint8_t)(left > 255 ? 255 : left);
			}
		}
		return 40 + ext;
	}
	return wire_ip4_raw(b, proto, l4len, s->src.a, s->dst.a);
}

/* The option bytes of each form (each a multiple of 4 long). */
static const struct {
	uint8_t len, b[24];
} opt_forms[DRV_OPT_N] = {
    [DRV_OPT_MPC] = {4, {30, 4, 0x01, 0x01}},
    [DRV_OPT_LINUX] = {24, {2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0,  0, 0,	1,
			    0, 0, 0,	0,    1, 3, 3, 7,  30, 4, 0x01, 0x01}},
    [DRV_OPT_JOIN] = {12, {30, 12, 0x11, 0, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 7}},
    [DRV_OPT_BADLEN] = {8, {2, 4, 0x05, 0xb4, 8, 12, 0, 0}},
    [DRV_OPT_LEN1] = {4, {1, 1, 5, 1}},
    [DRV_OPT_DECOY] = {16, {8, 10, 30, 4, 0x01, 0x01, 30, 4, 0x01, 0x01, 0, 30, 4, 0x01, 0x01, 0}},
};

/* The form p's options take (see struct drv_pkt). */
static enum drv_opt opt_form(const struct drv_pkt *p)
{
	if (p->s.proto != IPPROTO_TCP)
		return DRV_OPT_NONE;
	if (p->s.mptcp)
		return p->opt_form > DRV_OPT_NONE && p->opt_form < DRV_OPT_DECOY
			   ? (enum drv_opt)p->opt_form
			   : DRV_OPT_MPC;
	return p->opt_form == DRV_OPT_DECOY ? DRV_OPT_DECOY : DRV_OPT_NONE;
}

static size_t build(struct drv *d, const struct drv_pkt *p)
{
	const struct spec_pkt *s = &p->s;
	uint8_t *b = d->buf;
	size_t ipl, l4len;
	uint16_t c;

	if (s->proto == IPPROTO_UDP) {
		struct pc_endpoint src = {s->src, s->sport}, dst = {s->dst, s->dport};
		int n = pkt_build_udp(&src, &dst, s->data, s->len, b, sizeof(d->buf));

		must(n > 0, "udp packet");
		return (size_t)n;
	}
	if (s->proto == IPPROTO_TCP) {
		enum drv_opt form = opt_form(p);
		size_t ol = form ? opt_forms[form].len : p->tcp_opt_len;
		size_t hl = 20 + ol;
		uint8_t *t;

		l4len = hl + s->len;
		ipl =
		    ip_head(b, s, IPPROTO_TCP, l4len, s->src.family == AF_INET6 ? p->v6_dstopt : 0);
		t = b + ipl;
		memset(t, 0, hl);
		t[0] = (uint8_t)(s->sport >> 8);
		t[1] = (uint8_t)s->sport;
		t[2] = (uint8_t)(s->dport >> 8);
		t[3] = (uint8_t)s->dport;
		for (int i = 0; i < 4; i++) {
			t[4 + i] = (uint8_t)(s->seq >> (24 - 8 * i));
			t[8 + i] = (uint8_t)(s->ack >> (24 - 8 * i));
		}
		t[12] = (uint8_t)((hl / 4) << 4);
		t[13] = s->tcp_flags;
		t[14] = 0xfa;
		t[18] = (uint8_t)(s->urp >> 8);
		t[19] = (uint8_t)s->urp;
		if (form)
			memcpy(t + 20, opt_forms[form].b, ol);
		else
			memset(t + 20, 1, ol); /* NOP options */
		if (s->len)
			memcpy(t + hl, s->data, s->len);
		c = pkt_l4_csum(&s->src, &s->dst, IPPROTO_TCP, t, l4len);
		t[16] = (uint8_t)(c >> 8);
		t[17] = (uint8_t)c;
		return ipl + l4len;
	}
	if (s->proto == IPPROTO_ICMP || s->proto == IPPROTO_ICMPV6) {
		uint8_t *t;

		l4len = 8 + s->len;
		ipl = ip_head(b, s, s->proto, l4len, 0);
		t = b + ipl;
		memset(t, 0, 8);
		t[0] = s->proto == IPPROTO_ICMP ? 8 : 128; /* echo request */
		if (s->len)
			memcpy(t + 8, s->data, s->len);
		return ipl + l4len;
	}
	l4len = 8;
	ipl = ip_head(b, s, s->proto, l4len, 0);
	memset(b + ipl, 0, 8);
	return ipl + l4len;
}

/* ---- the conntrack and ruleset emulation ---------------------------------------- */

static struct ct_ent *ct_find(struct drv *d, const struct spec_pkt *s, bool *reply)
{
	for (size_t i = 0; i < CT_MAX; i++) {
		struct ct_ent *e = &d->ct[i];

		if (!e->used || e->proto != s->proto)
			continue;
		if (pc_addr_eq(&e->a, &s->src) && pc_addr_eq(&e->b, &s->dst) && e->ap == s->sport &&
		    e->bp == s->dport) {
			*reply = false;
			return e;
		}
		if (pc_addr_eq(&e->b, &s->src) && pc_addr_eq(&e->a, &s->dst) && e->bp == s->sport &&
		    e->ap == s->dport) {
			*reply = true;
			return e;
		}
	}
	return NULL;
}

static struct ct_ent *ct_add(struct drv *d, const struct spec_pkt *s)
{
	for (size_t i = 0; i < CT_MAX; i++) {
		struct ct_ent *e = &d->ct[i];

		if (e->used)
			continue;
		memset(e, 0, sizeof(*e));
		e->used = true;
		e->proto = s->proto;
		e->a = s->src;
		e->b = s->dst;
		e->ap = s->sport;
		e->bp = s->dport;
		return e;
	}
	must(false, "conntrack emulation full: sequence too long");
	return NULL;
}

static enum spec_ct ct_state(const struct ct_ent *e, bool reply, const struct spec_pkt *s)
{
	if (e)
		return reply || e->seen_reply ? SPEC_CT_EST : SPEC_CT_NEW;
	if (s->dir == SPEC_IN)
		return SPEC_CT_NEW;
	if (s->proto == IPPROTO_TCP) {
		uint8_t f = s->tcp_flags & (F_SYN | F_ACK | F_RST | F_FIN);

		return f == F_SYN || f == F_ACK ? SPEC_CT_NEW : SPEC_CT_INVALID;
	}
	return SPEC_CT_NEW;
}

static bool is_resolver(const struct drv *d, const struct pc_addr *a)
{
	for (size_t i = 0; i < d->cfg.dns.n_resolvers; i++)
		if (pc_addr_eq(&d->cfg.dns.resolvers[i], a))
			return true;
	return false;
}

/* Is the packet queued (A4), or decided by the ruleset (*out)? */
static bool queued(struct drv *d, const struct spec_pkt *s, const struct ct_ent *e, bool reply,
		   unsigned *out)
{
	bool dns = (s->proto == IPPROTO_UDP || s->proto == IPPROTO_TCP);

	if (s->dir == SPEC_OUT) {
		if (e && e->mark == MARK_ALLOW) {
			*out = SPEC_V_FAST;
			return false;
		}
		if (dns && s->dport == 53)
			return true;
		if (e && e->mark == MARK_HELD)
			return true;
		for (size_t i = 0; i < d->w.n_gateway; i++) {
			if (pc_addr_eq(&d->w.gateway[i], &s->dst)) {
				*out = SPEC_V_RDROP;
				return false;
			}
		}
		if (s->ct == SPEC_CT_NEW)
			return true;
		*out = SPEC_V_RDROP;
		return false;
	}
	if (e && reply && e->mark == MARK_ALLOW) {
		*out = SPEC_V_FAST;
		return false;
	}
	if (e && reply && e->mark == MARK_HELD)
		return true;
	if (e && reply && dns && s->sport == 53 && is_resolver(d, &s->src))
		return true;
	*out = SPEC_V_RDROP;
	return false;
}

static unsigned engine_out(const struct decision *dec)
{
	switch (dec->v) {
	case VK_DROP:
		return dec->send_reply ? SPEC_V_REFUSED : SPEC_V_DROP;
	case VK_PASS:
		return SPEC_V_PASS;
	case VK_ALLOW:
		return SPEC_V_ALLOW;
	case VK_ALLOW_VAULT:
		return SPEC_V_VAULT;
	case VK_HELD:
		return SPEC_V_HOLD;
	case VK_REJECT:
		return SPEC_V_REJECT;
	}
	return 0;
}

/* ---- reports --------------------------------------------------------------------- */

static const char *flags_str(uint8_t f, char *b)
{
	size_t o = 0;

	if (f & F_SYN)
		b[o++] = 'S';
	if (f & F_ACK)
		b[o++] = 'A';
	if (f & F_FIN)
		b[o++] = 'F';
	if (f & F_RST)
		b[o++] = 'R';
	if (f & F_PSH)
		b[o++] = 'P';
	if (f & F_URG)
		b[o++] = 'U';
	if (!o)
		b[o++] = '-';
	b[o] = '\0';
	return b;
}

static const char *pl_name(const struct spec_pkt *s)
{
	switch (s->pl) {
	case SPEC_PL_NONE:
		return "none";
	case SPEC_PL_DNS_QUERY:
		return "dns-query";
	case SPEC_PL_DNS_BAD:
		return "dns-malformed";
	case SPEC_PL_DNS_ANSWER:
		return "dns-answer";
	case SPEC_PL_STREAM:
		return s->stream == SPEC_ST_CH	     ? "clienthello"
		       : s->stream == SPEC_ST_NOSNI  ? "clienthello-nosni"
		       : s->stream == SPEC_ST_TLSBAD ? "tls-bad"
						     : "not-tls";
	case SPEC_PL_DATA:
		return "data";
	case SPEC_PL_DNS_SHAPE:
		return "dns-query-shape";
	}
	return "?";
}

const char *drv_pkt_str(const struct drv_pkt *p, char *buf, size_t n)
{
	const struct spec_pkt *s = &p->s;
	char a[PC_ADDRSTRLEN], b[PC_ADDRSTRLEN], f[8];
	const char *proto = s->proto == IPPROTO_TCP	 ? "TCP"
			    : s->proto == IPPROTO_UDP	 ? "UDP"
			    : s->proto == IPPROTO_ICMP	 ? "ICMP"
			    : s->proto == IPPROTO_ICMPV6 ? "ICMPv6"
							 : "IP";

	snprintf(
	    buf, n,
	    "%s %s %s %s:%u > %s:%u%s%s%s seq=%u ack=%u urp=%u len=%zu%s%s pl=%s%s%s%s stamp=%u",
	    s->dir == SPEC_OUT ? "out" : "in", s->src.family == AF_INET6 ? "v6" : "v4", proto,
	    pc_addr_str(&s->src, a, sizeof(a)), s->sport, pc_addr_str(&s->dst, b, sizeof(b)),
	    s->dport, s->proto == IPPROTO_TCP ? " [" : "",
	    s->proto == IPPROTO_TCP ? flags_str(s->tcp_flags, f) : "",
	    s->proto == IPPROTO_TCP ? "]" : "", s->seq, s->ack, s->urp, s->len,
	    p->tcp_opt_len				? " +options"
	    : p->v6_dstopt && s->src.family == AF_INET6 ? " +dstopts"
							: "",
	    opt_form(p) == DRV_OPT_DECOY ? " +decoy-options"
	    : opt_form(p)		 ? " +mptcp-options"
					 : "",
	    pl_name(s), s->qname[0] ? " " : "", s->qname, s->stream_sni[0] ? s->stream_sni : "",
	    p->stamp);
	return buf;
}

static const char *action_name(int a)
{
	switch (a) {
	case LOGREC_CONNECT:
		return "connect";
	case LOGREC_DNS_QUERY:
		return "dns-query";
	case LOGREC_DNS_LEARN:
		return "dns-learn";
	default:
		return "other";
	}
}

static const char *outcome_name(int o)
{
	return o == LOGREC_ALLOWED ? "allowed" : o == LOGREC_REFUSED ? "refused" : "none";
}

static void expect_str(const struct spec_verdict *v, char *buf, size_t n)
{
	char may[96], acts[64] = "", why[64];
	size_t o = 0;

	snprintf(why, sizeof(why), "%s%s%s", spec_reason_name(v->reason),
		 v->reason2 != SPEC_R_ANY ? "|" : "",
		 v->reason2 != SPEC_R_ANY ? spec_reason_name(v->reason2) : "");

	for (int a = LOGREC_CONNECT; a <= LOGREC_DNS_LEARN; a++)
		if (v->actions & SPEC_ACT(a))
			o += (size_t)snprintf(acts + o, sizeof(acts) - o, "%s%s", o ? "|" : "",
					      action_name(a));
	if (v->rec == SPEC_REC_NONE)
		snprintf(buf, n, "%s, no record", spec_out_str(v->may, may, sizeof(may)));
	else
		snprintf(buf, n, "%s, %s record %s/%s/%s", spec_out_str(v->may, may, sizeof(may)),
			 v->rec == SPEC_REC_MUST ? "a" : "maybe a", acts,
			 v->outcome_either ? "any" : outcome_name(v->outcome), why);
}

/* ---- one step ---------------------------------------------------------------------- */

/* The record the model asks for, against the engine's. NULL: it matches. */
static const char *rec_mismatch(const struct spec_verdict *v, bool has, const struct logrec *r)
{
	if (v->rec == SPEC_REC_NONE)
		return has ? "a record where the spec has none" : NULL;
	if (!has)
		return v->rec == SPEC_REC_MUST ? "no record" : NULL;
	if (!(v->actions & SPEC_ACT(r->action)))
		return "record of the wrong action";
	if (!v->outcome_either && (int)r->verdict != v->outcome)
		return "record of the wrong outcome";
	if (v->rec == SPEC_REC_MUST && !spec_reason_is(v->reason, r->reason) &&
	    !(v->reason2 != SPEC_R_ANY && spec_reason_is(v->reason2, r->reason)))
		return "record of the wrong reason class";
	return NULL;
}

int drv_step(struct drv *d, struct drv_pkt *p, const char **row, char *why, size_t whylen)
{
	struct spec_pkt *s = &p->s;
	struct spec_verdict v;
	struct ct_ent *e;
	bool reply = false, has_rec = false;
	unsigned got = 0;
	const char *bad = NULL;
	size_t len, streams_before = dnstcp_count(d->dnstcp);
	struct logrec rec;
	char ps[400], exp[256], gotr[256], g[64];

	/* what the sender is as the engine and the model know it */
	memset(&s->from, 0, sizeof(s->from));
	s->from.addr = s->src;
	s->from.has_mac = true;
	s->from.mac[0] = 2;
	s->from.mac[5] = (uint8_t)p->stamp;
	s->port_known = p->stamp == DRV_PORT1 || p->stamp == DRV_PORT2;
	if (s->port_known)
		pc_strlcpy(s->from.port, p->stamp == DRV_PORT1 ? "pcv1" : "pcv2",
			   sizeof(s->from.port));
	s->tcp_framed = s->proto == IPPROTO_TCP && s->len >= 2 &&
			((size_t)s->data[0] << 8 | s->data[1]) + 2 == s->len;
	len = build(d, p);
	e = ct_find(d, s, &reply);
	s->ct = ct_state(e, reply, s);

	spec_judge(&d->w, s, &v);
	*row = v.row;

	memset(&rec, 0, sizeof(rec));
	if (queued(d, s, e, reply, &got)) {
		struct pkt_in in = {.id = 1,
				    .mark = s->dir == SPEC_OUT ? p->stamp : 0,
				    .hook =
					s->dir == SPEC_OUT ? NF_INET_PRE_ROUTING : NF_INET_FORWARD,
				    .has_mac = true,
				    .mac = {2, 0, 0, 0, 0, (uint8_t)p->stamp},
				    .data = d->buf,
				    .len = len};

		decide_packet(&d->ctx, &in, &d->dec);
		/* as the queue thread does once logd acknowledged the record */
		if (decision_commit(d->dg, &d->dec, d->ctx.now_ms) < 0)
			d->dec.v = s->dir == SPEC_OUT ? VK_REJECT : VK_DROP;
		got = engine_out(&d->dec);
		has_rec = d->dec.has_rec;
		rec = d->dec.rec;
	}
	d->last = got;

	if (!(v.may & got))
		bad = "verdict";
	else
		bad = rec_mismatch(&v, has_rec, &rec);
	if (!bad && (v.row[0] == 'S' && (strcmp(v.row, "S5") == 0 || strcmp(v.row, "S7") == 0)) &&
	    dnstcp_count(d->dnstcp) > streams_before)
		bad = "a DNS-over-TCP stream kept for a packet that is not DNS to a resolver";

	/* the conntrack follows what was accepted */
	if (got & (SPEC_V_FAST | SPEC_V_PASS | SPEC_V_ALLOW | SPEC_V_VAULT | SPEC_V_HOLD)) {
		if (!e) {
			e = ct_add(d, s);
			reply = false;
		}
		if (reply)
			e->seen_reply = true;
		if (got & (SPEC_V_ALLOW | SPEC_V_VAULT)) {
			e->mark = MARK_ALLOW;
			e->vault = got == SPEC_V_VAULT;
			if (d->dec.register_flow) {
				e->has_meta = true;
				e->meta = d->dec.meta;
			}
		} else if (got == SPEC_V_HOLD) {
			e->mark = MARK_HELD;
		}
	}
	if (e && has_rec && rec.action == LOGREC_CONNECT && rec.verdict == LOGREC_ALLOWED) {
		if (e->rec_allowed && !bad)
			bad = "a second allowed record for one flow";
		e->rec_allowed = true;
	}
	if (!bad && e && (got & (SPEC_V_ALLOW | SPEC_V_VAULT)) && !e->rec_allowed)
		bad = "a flow allowed without its allowed record";
	/* A RST (the sandbox's, or the guard's REJECT) moves conntrack's entry
	 * to CLOSE: it stays, with its mark, for a while; the emulation keeps
	 * it for the rest of the sequence. */

	if (!bad)
		return 0;
	expect_str(&v, exp, sizeof(exp));
	if (has_rec)
		snprintf(gotr, sizeof(gotr), "%s, record %s/%s \"%s\"",
			 spec_out_str(got, g, sizeof(g)), action_name(rec.action),
			 outcome_name(rec.verdict), rec.reason ? rec.reason : "");
	else
		snprintf(gotr, sizeof(gotr), "%s, no record", spec_out_str(got, g, sizeof(g)));
	snprintf(why, whylen, "%s: %s\n      guard gave: %s\n      spec allows: %s", bad,
		 drv_pkt_str(p, ps, sizeof(ps)), gotr, exp);
	return 1;
}

/* ---- reload ------------------------------------------------------------------------- */

int drv_reload(struct drv *d, const char *yaml,
	       void (*report)(void *arg, const char *row, const char *why), void *arg)
{
	struct pc_err err = {0};
	struct policy *np;
	int bad = 0;

	must(d->n_pols < POLS_MAX, "too many reloads");
	if (policy_load_buffer("spec2.yaml", yaml, strlen(yaml), &d->cfg, &np, &err) < 0) {
		fprintf(stderr, "spec driver: policy: %s\n", err.msg);
		abort();
	}
	d->pols[d->n_pols++] = np;
	d->ctx.policy = np;
	dnsguard_prune(d->dg, np);
	spec_world_reload(&d->w, np);
	for (size_t i = 0; i < CT_MAX; i++) {
		struct ct_ent *e = &d->ct[i];
		struct flow_key k;
		const char *reason = NULL;
		bool eng, mod;

		if (!e->used || e->mark != MARK_ALLOW)
			continue;
		memset(&k, 0, sizeof(k));
		k.family = e->a.family;
		k.proto = e->proto;
		k.sport = e->ap;
		k.dport = e->bp;
		memcpy(k.src, e->a.a, 16);
		memcpy(k.dst, e->b.a, 16);
		eng = decide_rejudge(&d->ctx, &k, e->has_meta ? &e->meta : NULL, e->vault, &reason);
		mod = spec_reload_keeps(&d->w, e->proto, &e->a, e->ap, &e->b, e->bp);
		if (eng != mod) {
			char a[PC_ADDRSTRLEN], b[PC_ADDRSTRLEN], why[300];

			snprintf(why, sizeof(why),
				 "reload: flow %s:%u > %s:%u proto %u: guard %s it, spec %s it",
				 pc_addr_str(&e->a, a, sizeof(a)), e->ap,
				 pc_addr_str(&e->b, b, sizeof(b)), e->bp, e->proto,
				 eng ? "keeps" : "cuts", mod ? "keeps" : "cuts");
			if (report)
				report(arg, "R1", why);
			bad++;
		}
		if (!eng)
			memset(e, 0, sizeof(*e)); /* the entry is deleted */
	}
	return bad;
}
