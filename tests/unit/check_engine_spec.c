/* The exhaustive check of the engine against docs/spec.md: every packet of
 * the abstract space (family, source class, protocol and TCP flags,
 * destination class, port, payload) on a fresh flow state, and short
 * sequences (DNS query, answer, SYN, the server's SYN-ACK, ClientHello
 * split, resent, replaced, acknowledged; DNS over TCP; a reload), as real
 * IPv4/IPv6 packets through the real decide_packet with the real policy,
 * DNS guard and flow tables, against the model in spec/. Any verdict the
 * model forbids, or a missing or wrong record, fails and names its row. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/spec/scenario.h"
#include "tests/unit/unit.h"

#define S 0x02
#define A 0x10
#define F 0x01
#define R 0x04
#define P 0x08
#define U 0x20

/* ---- what went wrong, by row --------------------------------------------------- */

#define ROWS_MAX     64
#define EXAMPLES_MAX 3

struct row_report {
	char row[8];
	unsigned long n;
	char ex[EXAMPLES_MAX][1100];
	size_t n_ex;
};

static struct row_report rows[ROWS_MAX];
static size_t n_rows;
static const char *context = ""; /* the sequence being run */

static void report(void *arg, const char *row, const char *why)
{
	struct row_report *r = NULL;

	(void)arg;
	for (size_t i = 0; i < n_rows; i++)
		if (strcmp(rows[i].row, row) == 0)
			r = &rows[i];
	if (!r) {
		if (n_rows == ROWS_MAX)
			return;
		r = &rows[n_rows++];
		pc_strlcpy(r->row, row, sizeof(r->row));
	}
	r->n++;
	if (r->n_ex < EXAMPLES_MAX)
		snprintf(r->ex[r->n_ex++], sizeof(r->ex[0]), "[%s] %s", context, why);
}

static int row_cmp(const void *a, const void *b)
{
	const struct row_report *x = a, *y = b;

	if (x->row[0] != y->row[0])
		return x->row[0] - y->row[0];
	return atoi(x->row + 1) - atoi(y->row + 1);
}

/* How many packets each row decided, over every world. */
static struct {
	char row[8];
	unsigned long n;
} seen[64];
static size_t n_seen;

static void seen_merge(const struct sc *c)
{
	for (size_t i = 0; i < c->n_rows; i++) {
		size_t j;

		for (j = 0; j < n_seen && strcmp(seen[j].row, c->rows[i].row) != 0; j++)
			;
		if (j == n_seen) {
			if (n_seen == sizeof(seen) / sizeof(seen[0]))
				continue;
			pc_strlcpy(seen[n_seen++].row, c->rows[i].row, sizeof(seen[0].row));
		}
		seen[j].n += c->rows[i].n;
	}
}

static int seen_cmp(const void *a, const void *b)
{
	const char *x = a, *y = b;

	if (x[0] != y[0])
		return x[0] - y[0];
	return atoi(x + 1) - atoi(y + 1);
}

/* ---- single packets on a fresh flow state --------------------------------------- */

enum pl_kind {
	PL_NONE,
	PL_Q_OK,
	PL_Q_DENIED,
	PL_DNS_BAD,
	PL_CH_OK,
	PL_CH_DENIED,
	PL_PLAIN,
	PL_DATA,
	PL_N
};

static void payload(struct drv_pkt *p, enum pl_kind k, uint8_t *buf, uint16_t id, int fam)
{
	bool tcp = p->s.proto == IPPROTO_TCP;
	size_t n;

	switch (k) {
	case PL_NONE:
		return;
	case PL_Q_OK:
		sc_query(p, buf, id, "api.allowed.test", fam == 6 ? 28 : 1, tcp);
		return;
	case PL_Q_DENIED:
		sc_query(p, buf, id, "evil.test", fam == 6 ? 28 : 1, tcp);
		return;
	case PL_DNS_BAD:
		memcpy(buf, "\x12\x34\x01\x00\x00\x07\x00", 7);
		n = tcp ? drv_tcp_frame(buf, 7) : 7;
		sc_payload(p, SPEC_PL_DNS_BAD, buf, n);
		return;
	case PL_CH_OK:
		n = drv_client_hello(buf, "api.allowed.test");
		sc_stream(p, SPEC_ST_CH, "api.allowed.test", buf, n);
		return;
	case PL_CH_DENIED:
		n = drv_client_hello(buf, "evil.test");
		sc_stream(p, SPEC_ST_CH, "evil.test", buf, n);
		return;
	case PL_PLAIN:
		n = (size_t)sprintf((char *)buf, "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n");
		sc_stream(p, SPEC_ST_PLAIN, NULL, buf, n);
		return;
	case PL_DATA:
		memset(buf, 0x7f, 36);
		sc_payload(p, SPEC_PL_DATA, buf, 36);
		return;
	default:
		return;
	}
}

struct proto_case {
	uint8_t proto, flags, opt;
	uint16_t urp; /* the urgent pointer (URG in flags or not) */
	uint8_t form; /* enum drv_opt */
	bool mptcp;   /* the form carries MPTCP, or cannot be read to its end */
};

static const struct proto_case protos[] = {
    {IPPROTO_TCP, S, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, S | A, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, A, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, A, 36, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, P | A, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, F | A, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, F | A, 36, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, R, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, R | A, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, F, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, S | F, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, 0, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_UDP, 0, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_ICMP, 0, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_GRE, 0, 0, 0, DRV_OPT_NONE, false},
    /* urgent data (S7a, S22a): the flag with a pointer, the flag alone, a
     * pointer without the flag */
    {IPPROTO_TCP, S | U, 0, 1, DRV_OPT_NONE, false},
    {IPPROTO_TCP, P | A | U, 0, 1, DRV_OPT_NONE, false},
    {IPPROTO_TCP, A | U, 0, 0, DRV_OPT_NONE, false},
    {IPPROTO_TCP, A, 0, 3, DRV_OPT_NONE, false},
    /* MPTCP (S7b, S22b): each form that carries it or cannot be read to
     * its end, a decoy that only looks like it, and MPTCP where no SYN is
     * (a plain TCP server ignores it there) */
    {IPPROTO_TCP, S, 0, 0, DRV_OPT_MPC, true},
    {IPPROTO_TCP, S, 0, 0, DRV_OPT_LINUX, true},
    {IPPROTO_TCP, S, 0, 0, DRV_OPT_JOIN, true},
    {IPPROTO_TCP, S, 0, 0, DRV_OPT_BADLEN, true},
    {IPPROTO_TCP, S, 0, 0, DRV_OPT_LEN1, true},
    {IPPROTO_TCP, S, 0, 0, DRV_OPT_DECOY, false},
    {IPPROTO_TCP, S | A, 0, 0, DRV_OPT_MPC, true},
    {IPPROTO_TCP, P | A, 0, 0, DRV_OPT_LINUX, true},
};

static const uint16_t dports[] = {53, 443, 80, 22, 5353, 8443};

static void singles(struct sc *c, int fam)
{
	static uint8_t buf[4096];

	for (int s = 0; s < SC_NSRC; s++) {
		for (int d = 0; d < SC_NDST; d++) {
			struct pc_addr dst;

			sc_dst(fam, (enum sc_dst)d, &dst);
			for (size_t pi = 0; pi < sizeof(protos) / sizeof(protos[0]); pi++) {
				struct proto_case pc = protos[pi];
				bool l4 = pc.proto == IPPROTO_TCP || pc.proto == IPPROTO_UDP;

				if (pc.proto == IPPROTO_ICMP && fam == 6)
					pc.proto = IPPROTO_ICMPV6;
				for (size_t di = 0;
				     di < (l4 ? sizeof(dports) / sizeof(dports[0]) : 1); di++) {
					for (int k = 0; k < (l4 ? PL_N : 1); k++) {
						struct drv_pkt p =
						    sc_out(fam, (enum sc_src)s, &dst, pc.proto,
							   c->next_port++, l4 ? dports[di] : 0);

						if (c->next_port < 20000)
							c->next_port = 20000;
						sc_tcp(&p, pc.flags, 1000, pc.flags & A ? 7000 : 0);
						p.tcp_opt_len = pc.opt;
						p.s.urp = pc.urp;
						p.opt_form = pc.form;
						p.s.mptcp = pc.mptcp;
						payload(&p, (enum pl_kind)k, buf, c->next_id++,
							fam);
						drv_reset_flows(c->d);
						sc_step(c, &p);
					}
				}
			}
		}
	}
	drv_reset_flows(c->d);
}

/* ---- sequences ------------------------------------------------------------------ */

#define STEP(p)                                                                                    \
	do {                                                                                       \
		if (!sc_step(c, &(p)))                                                             \
			goto done;                                                                 \
	} while (0)

enum held_variant {
	HV_CH_OK,	     /* ClientHello, server ACK, data: allowed */
	HV_CH_DENIED,	     /* another name on the shared address */
	HV_INSERT_1BYTE,     /* hole 2: 1 byte "not TLS" the server never gets, then CH denied */
	HV_RESEND_OTHER,     /* CH allowed, then CH denied at the same sequence number */
	HV_RESEND_AFTER_ACK, /* CH allowed and acknowledged, then CH denied resent */
	HV_SPLIT,	     /* CH in two segments, then acknowledged */
	HV_SPLIT_TAMPER,     /* first part resent with other bytes */
	HV_GAP,		     /* second part first: a gap */
	HV_SYN_OTHER_ISN,    /* a SYN with another ISN */
	HV_SYN_SAME_ISN,     /* a retransmitted SYN */
	HV_TIMEOUT,	     /* no ClientHello in time */
	HV_ACK_TIMEOUT,	     /* CH allowed, no server ACK in time */
	HV_PARTIAL_ACK,	     /* the server acknowledges part of it first */
	HV_NOSNI,
	HV_TLSBAD,
	HV_PLAIN,	/* not TLS: allowed on the learned name once acknowledged */
	HV_RST,		/* the sandbox resets, then sends data */
	HV_FASTOPEN,	/* data in the SYN */
	HV_MORE_DATA,	/* CH allowed, more data before the server's ACK */
	HV_RESEND_SAME, /* first part of a split CH sent again, same bytes */
	HV_SYNACK,	/* a SYN+ACK from the sandbox on its held flow */
	HV_OTHER_PORT,	/* the flow's address and ports from another sandbox's port */
	HV_RST_DATA,	/* a RST carrying bytes */
	HV_FIN_PAST,	/* a FIN, then bytes past it */
	HV_ALERT_FIRST, /* a TLS alert record before the ClientHello */
	/* issue 30: urgent data (H2a) */
	HV_URG_BYTE,	 /* 1 byte "X" sent urgent (the server takes it out), then CH denied */
	HV_URG_ACK,	 /* a bare ACK moving the urgent pointer ahead, then "X" and CH denied */
	HV_URG_PTR,	 /* an urgent pointer without URG on the ClientHello */
	HV_URG_RETRANS,	 /* CH allowed, sent again with URG before the server's ACK */
	HV_URG_PROMOTED, /* CH allowed and acknowledged, then urgent data: the fast path */
	/* issue 30: what the server's first bytes say (H13a) */
	HV_BARE_ACK,	/* CH allowed, a bare ACK of it (not promoted), then the ServerHello */
	HV_HRR,		/* CH allowed, answered by a HelloRetryRequest, then CH denied */
	HV_HELLO_SHORT, /* the first 20 bytes of the ServerHello only: not promoted */
	/* issue 34: a client reusing its port (H6a) */
	HV_PROMOTED_NEW_ISN, /* promoted, reset, conntrack closed it: a SYN with another ISN */
	HV_PROMOTED_RESUME,  /* the same, then the first connection's bytes */
	/* MPTCP in a SYN sent again (H5a) */
	HV_MPTCP_RESEND,   /* the held SYN sent again with MP_CAPABLE, then CH allowed */
	HV_MPTCP_PROMOTED, /* promoted, then the SYN again with MP_CAPABLE */
	/* Encrypted Client Hello: the outer name allowed (H11) */
	HV_ECH,	     /* encrypted_client_hello (0xfe0d) */
	HV_ESNI,     /* its predecessor, encrypted_server_name (0xffce) */
	HV_ECH_NEAR, /* 0xfe0e, next to ECH's codepoints: no ECH, allowed */
	HV_N
};

static const char *const hv_names[HV_N] = {
    "ch-ok",
    "ch-denied",
    "insert-1byte",
    "resend-other",
    "resend-after-ack",
    "split",
    "split-tamper",
    "gap",
    "syn-other-isn",
    "syn-same-isn",
    "timeout",
    "ack-timeout",
    "partial-ack",
    "no-sni",
    "tls-bad",
    "not-tls",
    "rst",
    "fast-open",
    "more-data",
    "resend-same",
    "syn-ack",
    "other-port",
    "rst-data",
    "fin-past",
    "alert-first",
    "urg-byte",
    "urg-ack",
    "urg-ptr",
    "urg-retrans",
    "urg-promoted",
    "bare-ack",
    "hrr",
    "hello-short",
    "promoted-new-isn",
    "promoted-resume",
    "mptcp-resend",
    "mptcp-promoted",
};

static void held_seq(struct sc *c, int fam, enum sc_src src, enum sc_dst dc, uint16_t dport,
		     enum held_variant v)
{
	static uint8_t ok[600], bad[600], x[600], plain[64], hello[49], hrr[49];
	static const uint8_t hrr_random[32] = {0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
					       0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
					       0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
					       0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c};
	struct pc_addr dst, me;
	uint32_t stamp, isn = 1000, srv = 5000, d1 = isn + 1;
	uint16_t sport = c->next_port++;
	size_t nok = drv_client_hello(ok, "api.allowed.test");
	size_t nbad = drv_client_hello(bad, "evil.test");
	size_t nplain = (size_t)sprintf((char *)plain, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
	struct drv_pkt p;
	char ctx[128];

	snprintf(ctx, sizeof(ctx), "held v%d %s>%s:%u %s", fam, sc_src_name(src), sc_dst_name(dc),
		 dport, hv_names[v]);
	context = ctx;
	sc_dst(fam, dc, &dst);
	sc_src(fam, src, &me, &stamp);

#define OUT(flags, seq, ack)                                                                       \
	do {                                                                                       \
		p = sc_out(fam, src, &dst, IPPROTO_TCP, sport, dport);                             \
		sc_tcp(&p, (flags), (seq), (ack));                                                 \
	} while (0)
#define IN(flags, seq, ack)                                                                        \
	do {                                                                                       \
		p = sc_in(&dst, dport, &me, sport, IPPROTO_TCP);                                   \
		sc_tcp(&p, (flags), (seq), (ack));                                                 \
	} while (0)

/* The sandbox's bytes at seq, a packet each step: a stream segment (a
 * ClientHello, or what stands in its place), application data, and the
 * server's acknowledgement up to ack. */
#define SEND(seq, kind, name, b, n)                                                                \
	do {                                                                                       \
		OUT(P | A, (seq), srv + 1);                                                        \
		sc_stream(&p, (kind), (name), (b), (n));                                           \
		STEP(p);                                                                           \
	} while (0)
#define DATA(seq)                                                                                  \
	do {                                                                                       \
		OUT(P | A, (seq), srv + 1);                                                        \
		sc_payload(&p, SPEC_PL_DATA, plain, nplain);                                       \
		STEP(p);                                                                           \
	} while (0)
/* The server's first flight (a ServerHello, or what it says) acknowledging
 * up to ack; BARE: an acknowledgement without bytes. */
#define ACKED_WITH(ack, b, n)                                                                      \
	do {                                                                                       \
		IN(P | A, srv + 1, (ack));                                                         \
		sc_payload(&p, SPEC_PL_DATA, (b), (n));                                            \
		STEP(p);                                                                           \
	} while (0)
#define ACKED(ack) ACKED_WITH((ack), hello, sizeof(hello))
#define BARE(ack)                                                                                  \
	do {                                                                                       \
		IN(A, srv + 1, (ack));                                                             \
		STEP(p);                                                                           \
	} while (0)

	/* record and handshake headers, version, random, session id, suite,
	 * compression, no extensions */
	memcpy(hello, "\x16\x03\x03\x00\x2c\x02\x00\x00\x28\x03\x03", 11);
	memset(hello + 11, 0x5a, 32);
	memcpy(hello + 43, "\x00\x13\x01\x00\x00\x00", 6);
	memcpy(hrr, hello, sizeof(hello));
	memcpy(hrr + 11, hrr_random, sizeof(hrr_random));

	OUT(S, isn, 0);
	if (v == HV_FASTOPEN)
		sc_stream(&p, SPEC_ST_CH, "api.allowed.test", ok, nok);
	STEP(p);
	if (drv_last(c->d) != (1u << 6) /* HOLD */)
		goto done;
	IN(S | A, srv, d1);
	STEP(p);
	OUT(A, d1, srv + 1);
	STEP(p);
	switch (v) {
	case HV_CH_OK:
	case HV_RESEND_AFTER_ACK:
	case HV_MORE_DATA:
	case HV_ACK_TIMEOUT:
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		if (v == HV_ACK_TIMEOUT) {
			drv_advance(c->d, 3001);
			OUT(A, d1 + (uint32_t)nok, srv + 1);
			STEP(p);
			break;
		}
		if (v == HV_MORE_DATA)
			DATA(d1 + (uint32_t)nok);
		ACKED(d1 + (uint32_t)nok);
		if (v == HV_RESEND_AFTER_ACK)
			SEND(d1, SPEC_ST_CH, "evil.test", bad, nbad);
		DATA(d1 + (uint32_t)nok);
		DATA(d1 + (uint32_t)(nok + nplain));
		break;
	case HV_CH_DENIED:
		SEND(d1, SPEC_ST_CH, "evil.test", bad, nbad);
		SEND(d1, SPEC_ST_CH, "evil.test", bad, nbad);
		break;
	case HV_INSERT_1BYTE:
		SEND(d1, SPEC_ST_PLAIN, NULL, (const uint8_t *)"X", 1);
		SEND(d1, SPEC_ST_CH, "evil.test", bad, nbad);
		break;
	case HV_RESEND_OTHER:
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		SEND(d1, SPEC_ST_CH, "evil.test", bad, nbad);
		break;
	case HV_SPLIT:
	case HV_SPLIT_TAMPER:
	case HV_GAP:
		if (v == HV_GAP)
			SEND(d1 + 20, SPEC_ST_CH, "api.allowed.test", ok + 20, nok - 20);
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, 20);
		if (v == HV_SPLIT_TAMPER) {
			memcpy(x, ok, 20);
			x[19] ^= 0x55;
			SEND(d1, SPEC_ST_CH, "api.allowed.test", x, 20);
		}
		SEND(d1 + 20, SPEC_ST_CH, "api.allowed.test", ok + 20, nok - 20);
		ACKED(d1 + (uint32_t)nok);
		DATA(d1 + (uint32_t)nok);
		break;
	case HV_SYN_OTHER_ISN:
	case HV_SYN_SAME_ISN:
		OUT(S, v == HV_SYN_SAME_ISN ? isn : isn + 77777, 0);
		STEP(p);
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		break;
	case HV_TIMEOUT:
		drv_advance(c->d, 3001);
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		break;
	case HV_BARE_ACK:
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		BARE(d1 + (uint32_t)nok);
		DATA(d1 + (uint32_t)nok);
		ACKED(d1 + (uint32_t)nok);
		DATA(d1 + (uint32_t)(nok + nplain));
		break;
	case HV_HRR:
		/* the second ClientHello would ride the fast path unjudged,
		 * and the server reads its name again */
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		ACKED_WITH(d1 + (uint32_t)nok, hrr, sizeof(hrr));
		SEND(d1 + (uint32_t)nok, SPEC_ST_CH, "evil.test", bad, nbad);
		break;
	case HV_HELLO_SHORT:
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		ACKED_WITH(d1 + (uint32_t)nok, hello, 20);
		DATA(d1 + (uint32_t)nok);
		break;
	case HV_PARTIAL_ACK:
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		ACKED(d1 + 10);
		OUT(A, d1 + (uint32_t)nok, srv + 1);
		STEP(p);
		ACKED(d1 + (uint32_t)nok);
		DATA(d1 + (uint32_t)nok);
		break;
	case HV_NOSNI:
		nok = drv_client_hello(x, NULL);
		SEND(d1, SPEC_ST_NOSNI, NULL, x, nok);
		break;
	case HV_TLSBAD:
		nok = drv_tls_bad(x);
		SEND(d1, SPEC_ST_TLSBAD, NULL, x, nok);
		break;
	case HV_PLAIN:
		SEND(d1, SPEC_ST_PLAIN, NULL, plain, nplain);
		ACKED(d1 + (uint32_t)nplain);
		DATA(d1 + (uint32_t)nplain);
		break;
	case HV_RESEND_SAME:
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, 20);
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, 20);
		SEND(d1 + 10, SPEC_ST_CH, "api.allowed.test", ok + 10, nok - 10);
		break;
	case HV_SYNACK:
		OUT(S | A, isn, srv + 1);
		STEP(p);
		break;
	case HV_OTHER_PORT:
		OUT(P | A, d1, srv + 1);
		p.stamp = DRV_PORT2;
		sc_stream(&p, SPEC_ST_CH, "api.allowed.test", ok, nok);
		STEP(p);
		break;
	case HV_RST_DATA:
		OUT(R | A, d1, srv + 1);
		sc_stream(&p, SPEC_ST_CH, "evil.test", bad, nbad);
		STEP(p);
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		break;
	case HV_FIN_PAST:
		OUT(F | A, d1, srv + 1);
		STEP(p);
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		break;
	case HV_ALERT_FIRST:
		memcpy(x, "\x15\x03\x03\x00\x02\x01\x00", 7); /* warning alert */
		memcpy(x + 7, ok, nok);
		SEND(d1, SPEC_ST_TLSBAD, NULL, x, 7 + nok);
		break;
	case HV_RST:
		OUT(R, d1, 0);
		STEP(p);
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		break;
	case HV_URG_BYTE:
		/* the attack: "X" judged "not TLS", taken out of the
		 * stream by the server's TCP, which then reads the ClientHello */
		OUT(P | A | U, d1, srv + 1);
		p.s.urp = 1;
		sc_stream(&p, SPEC_ST_PLAIN, NULL, (const uint8_t *)"X", 1);
		STEP(p);
		ACKED(d1 + 1);
		SEND(d1 + 1, SPEC_ST_CH, "evil.test", bad, nbad);
		break;
	case HV_URG_ACK:
		OUT(A | U, d1, srv + 1);
		p.s.urp = 1;
		STEP(p);
		x[0] = 'X';
		memcpy(x + 1, bad, nbad);
		SEND(d1, SPEC_ST_PLAIN, NULL, x, 1 + nbad);
		ACKED(d1 + 1 + (uint32_t)nbad);
		break;
	case HV_URG_PTR:
		OUT(P | A, d1, srv + 1);
		p.s.urp = 1;
		sc_stream(&p, SPEC_ST_CH, "api.allowed.test", ok, nok);
		STEP(p);
		ACKED(d1 + (uint32_t)nok);
		break;
	case HV_URG_RETRANS:
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		OUT(P | A | U, d1, srv + 1);
		p.s.urp = 1;
		sc_stream(&p, SPEC_ST_CH, "api.allowed.test", ok, nok);
		STEP(p);
		ACKED(d1 + (uint32_t)nok);
		break;
	case HV_PROMOTED_NEW_ISN:
	case HV_PROMOTED_RESUME:
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		ACKED(d1 + (uint32_t)nok);
		OUT(R | A, d1 + (uint32_t)nok, srv + 1);
		STEP(p);
		drv_ct_forget(c->d);
		OUT(S, isn + 77777, 0);
		STEP(p);
		/* a ClientHello the destination's entry does not allow
		 * failed the first flow: no promotion, the SYN is refused (H0) */
		if (drv_last(c->d) != (1u << 6) /* HOLD */)
			break;
		if (v == HV_PROMOTED_RESUME) {
			/* the first connection's sequence space, before and
			 * after the new flow's SYN-ACK */
			DATA(d1 + (uint32_t)nok);
			IN(S | A, srv + 9000, isn + 77778);
			STEP(p);
			DATA(d1 + (uint32_t)nok);
			SEND(d1, SPEC_ST_CH, "evil.test", bad, nbad);
		} else {
			IN(S | A, srv + 9000, isn + 77778);
			STEP(p);
			OUT(A, isn + 77778, srv + 9001);
			STEP(p);
			OUT(P | A, isn + 77778, srv + 9001);
			sc_stream(&p, SPEC_ST_CH, "api.allowed.test", ok, nok);
			STEP(p);
		}
		break;
	case HV_ECH:
	case HV_ESNI:
	case HV_ECH_NEAR:
		nok = drv_client_hello_ext(x, "api.allowed.test",
					   v == HV_ECH	  ? 0xfe0d
					   : v == HV_ESNI ? 0xffce
							  : 0xfe0e,
					   40);
		SEND(d1, v == HV_ECH_NEAR ? SPEC_ST_CH : SPEC_ST_TLSBAD,
		     v == HV_ECH_NEAR ? "api.allowed.test" : NULL, x, nok);
		ACKED(d1 + (uint32_t)nok);
		break;
	case HV_MPTCP_RESEND:
		OUT(S, isn, 0);
		p.s.mptcp = true;
		p.opt_form = DRV_OPT_LINUX;
		STEP(p);
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		ACKED(d1 + (uint32_t)nok);
		break;
	case HV_MPTCP_PROMOTED:
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		ACKED(d1 + (uint32_t)nok);
		OUT(S, isn, 0);
		p.s.mptcp = true;
		STEP(p);
		DATA(d1 + (uint32_t)nok);
		break;
	case HV_URG_PROMOTED:
		SEND(d1, SPEC_ST_CH, "api.allowed.test", ok, nok);
		ACKED(d1 + (uint32_t)nok);
		OUT(P | A | U, d1 + (uint32_t)nok, srv + 1);
		p.s.urp = 1;
		sc_payload(&p, SPEC_PL_DATA, plain, nplain);
		STEP(p);
		break;
	default:
		break;
	}
#undef OUT
#undef IN
#undef SEND
#undef DATA
#undef ACKED
done:
	drv_reset_flows(c->d);
}

/* DNS, then a connection to what it taught: query, answer (matching or
 * not), SYN, and on for a held flow. urg (TCP): 1 the query is sent
 * urgent (S7a), 2 the answer comes urgent (S42a). */
static void dns_seq_urg(struct sc *c, int fam, enum sc_src src, const char *name,
			const char *answer, bool match, bool tcp, int urg)
{
	static uint8_t q[600], a[600];
	struct pc_addr res, me, ad;
	uint32_t stamp;
	uint16_t id = c->next_id++, port = c->next_port++, qtype = fam == 6 ? 28 : 1;
	struct drv_pkt p;
	char ctx[160];

	snprintf(ctx, sizeof(ctx), "dns v%d %s %s %s -> %s%s", fam, tcp ? "tcp" : "udp",
		 sc_src_name(src), name, answer, match ? "" : " (unsolicited)");
	context = ctx;
	sc_dst(fam, SC_RESOLVER, &res);
	sc_src(fam, src, &me, &stamp);
	if (pc_addr_parse(answer, &ad) < 0)
		abort();
	if (tcp) {
		p = sc_out(fam, src, &res, IPPROTO_TCP, port, 53);
		sc_tcp(&p, S, 300, 0);
		STEP(p);
		p = sc_in(&res, 53, &me, port, IPPROTO_TCP);
		sc_tcp(&p, S | A, 900, 301);
		STEP(p);
		p = sc_out(fam, src, &res, IPPROTO_TCP, port, 53);
		sc_tcp(&p, A, 301, 901);
		STEP(p);
	}
	p = sc_out(fam, src, &res, tcp ? IPPROTO_TCP : IPPROTO_UDP, port, 53);
	sc_tcp(&p, tcp ? P | A | (urg == 1 ? U : 0) : 0, 301, 901);
	sc_query(&p, q, id, name, qtype, tcp);
	if (tcp && urg == 1)
		p.s.urp = 1;
	STEP(p);
	p = sc_in(&res, 53, &me, port, tcp ? IPPROTO_TCP : IPPROTO_UDP);
	sc_tcp(&p, tcp ? P | A | (urg == 2 ? U : 0) : 0, 901, 301 + (uint32_t)p.s.len);
	sc_answer(&p, a, match ? id : (uint16_t)(id ^ 0x5555), name, qtype, &ad, 1, tcp);
	if (tcp && urg == 2)
		p.s.urp = 1;
	STEP(p);
	if (tcp) {
		p = sc_out(fam, src, &res, IPPROTO_TCP, port, 53);
		sc_tcp(&p, F | A, 400, 1000);
		STEP(p);
	}
	for (int i = 0; i < 2; i++) {
		uint16_t dp = i ? 80 : 443;

		p = sc_out(fam, src, &ad, IPPROTO_TCP, c->next_port++, dp);
		sc_tcp(&p, S, 1, 0);
		STEP(p);
		drv_reset_flows(c->d);
	}
done:
	drv_reset_flows(c->d);
}

static void dns_seq(struct sc *c, int fam, enum sc_src src, const char *name, const char *answer,
		    bool match, bool tcp)
{
	dns_seq_urg(c, fam, src, name, answer, match, tcp, 0);
}

/* Port 53 over TCP to something that is not a resolver (hole 1), and to
 * one: every flag set, with and without the 36 bytes of options. */
static void port53_seq(struct sc *c, int fam, enum sc_src src, enum sc_dst dc)
{
	static const uint8_t flags[] = {S, A, F | A, R, S | A, P | A, R | A, P | A | U, A | U};
	static uint8_t data[64];
	struct pc_addr dst;
	uint16_t port = c->next_port++;
	struct drv_pkt p;
	char ctx[128];

	snprintf(ctx, sizeof(ctx), "port53 v%d %s>%s", fam, sc_src_name(src), sc_dst_name(dc));
	context = ctx;
	sc_dst(fam, dc, &dst);
	memset(data, 0x41, sizeof(data));
	for (size_t i = 0; i < sizeof(flags); i++) {
		for (int opt = 0; opt < 3; opt++) {
			p = sc_out(fam, src, &dst, IPPROTO_TCP, port, 53);
			sc_tcp(&p, flags[i], 1000 + (uint32_t)i, 5000);
			p.tcp_opt_len = opt ? 36 : 0;
			p.v6_dstopt = opt == 2 ? 1024 : 0; /* about 1 KB per packet (IPv6) */
			if (flags[i] & P)
				sc_payload(&p, SPEC_PL_DATA, data, 36);
			if (flags[i] & U)
				p.s.urp = 1;
			STEP(p);
		}
	}
done:
	drv_reset_flows(c->d);
}

/* Learned names expire (TTL 300 s here): a new flow needs a live one; a
 * flow admitted at its SYN keeps its name through dns.grace (the SNI check
 * and the promotion a moment later). Its own world: time moves on. */
static void expiry_seq(int fam, unsigned long *packets, unsigned long *bad)
{
	static uint8_t q[600], a[600], ok[600];
	struct sc c0, *c = &c0;
	struct pc_addr res, me, ad;
	uint32_t stamp;
	size_t nok = drv_client_hello(ok, "api.allowed.test");
	uint16_t qt = fam == 6 ? 28 : 1;
	struct drv_pkt p;
	char ctx[64];

	snprintf(ctx, sizeof(ctx), "expiry v%d", fam);
	context = ctx;
	sc_init(c, sc_policy, false, report, NULL);
	sc_dst(fam, SC_RESOLVER, &res);
	sc_src(fam, SC_SB1, &me, &stamp);
	sc_dst(fam, SC_SHARED, &ad);
	p = sc_out(fam, SC_SB1, &res, IPPROTO_UDP, 5300, 53);
	sc_query(&p, q, 0x777, "api.allowed.test", qt, false);
	sc_step(c, &p);
	p = sc_in(&res, 53, &me, 5300, IPPROTO_UDP);
	sc_answer(&p, a, 0x777, "api.allowed.test", qt, &ad, 1, false);
	sc_step(c, &p);
	drv_advance(c->d, 299000); /* one second of the TTL left */
	p = sc_out(fam, SC_SB1, &ad, IPPROTO_TCP, 5301, 443);
	sc_tcp(&p, S, 1, 0);
	sc_step(c, &p);
	drv_advance(c->d, 2000); /* expired, within dns.grace */
	p = sc_in(&ad, 443, &me, 5301, IPPROTO_TCP);
	sc_tcp(&p, S | A, 70, 2);
	sc_step(c, &p);
	p = sc_out(fam, SC_SB1, &ad, IPPROTO_TCP, 5301, 443);
	sc_tcp(&p, P | A, 2, 71);
	sc_stream(&p, SPEC_ST_CH, "api.allowed.test", ok, nok);
	sc_step(c, &p);
	p = sc_in(&ad, 443, &me, 5301, IPPROTO_TCP);
	sc_tcp(&p, A, 71, 2 + (uint32_t)nok);
	sc_step(c, &p);
	/* a new flow needs a live binding */
	p = sc_out(fam, SC_SB1, &ad, IPPROTO_TCP, 5302, 443);
	sc_tcp(&p, S, 1, 0);
	sc_step(c, &p);
	drv_advance(c->d, 120000); /* past the grace too */
	p = sc_out(fam, SC_SB1, &ad, IPPROTO_TCP, 5303, 443);
	sc_tcp(&p, S, 1, 0);
	sc_step(c, &p);
	*packets += c->packets;
	*bad += c->bad;
	seen_merge(c);
	sc_fini(c);
}

/* The resolver's SYN-ACK (seq 900) to sandbox 1's SYN whose stream
 * begins at base. */
static void sc_me_synack(struct sc *c, int fam, const struct pc_addr *res, uint16_t port,
			 uint32_t base)
{
	struct pc_addr me;
	uint32_t stamp;
	struct drv_pkt p;

	sc_src(fam, SC_SB1, &me, &stamp);
	p = sc_in(res, 53, &me, port, IPPROTO_TCP);
	sc_tcp(&p, S | A, 900, base);
	sc_step(c, &p);
}

/* S12a (issue 30): the sandbox's DNS-over-TCP stream from the SYN on.
 * A whole allowed query, then: 0 another whole one at a sequence number
 * inside it (the resolver would frame its tail as the next message:
 * REJECT); 1 the first sent again (PASS), then the next in order; 2 the
 * next past a hole (DROP), then in order; 3 a FIN, then the next (REJECT);
 * 4 data before the resolver's SYN-ACK (DROP), then as 0. Two whole
 * messages, the second starting inside the first, in the other orders and
 * shapes: 5 the second first (past a hole: DROP), then the first (PASS),
 * then the second again (REJECT); 6 one segment of the first's last 5
 * bytes, one changed, and the whole second (REJECT); 7 the same with the 5
 * bytes unchanged (the second message is put together, S12), then a third
 * inside the second (REJECT). */
#define OVERLAP_VARIANTS 8
static void overlap_seq(struct sc *c, int fam, int variant)
{
	static uint8_t qa[600], qb[600], qc[600], seg[1200];
	struct pc_addr res;
	uint16_t port = c->next_port++, qt = fam == 6 ? 28 : 1;
	uint32_t base = 5001;
	struct drv_pkt p, a;
	size_t la;
	char ctx[64];

	snprintf(ctx, sizeof(ctx), "dns overlap v%d variant %d", fam, variant);
	context = ctx;
	sc_dst(fam, SC_RESOLVER, &res);
	p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
	sc_tcp(&p, S, base - 1, 0);
	STEP(p);
	if (variant == 4) {
		/* no SYN-ACK yet: nothing is judged ahead of the resolver */
		a = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
		sc_tcp(&a, P | A, base, 1);
		sc_query(&a, qa, c->next_id++, "api.allowed.test", qt, true);
		STEP(a);
	}
	sc_me_synack(c, fam, &res, port, base);
	if (variant == 5) {
		/* the second before the first: past a hole, nothing to compare */
		p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
		sc_tcp(&p, P | A, base + 5, 1);
		sc_query(&p, qb, c->next_id, "api.allowed.test", qt, true);
		STEP(p);
	}
	a = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
	sc_tcp(&a, P | A, base, 1);
	sc_query(&a, qa, c->next_id++, "api.allowed.test", qt, true);
	la = a.s.len;
	STEP(a);
	p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
	if (variant == 6 || variant == 7) {
		size_t lb =
		    drv_tcp_frame(qb, drv_dns_query(qb, c->next_id++, "api.allowed.test", qt));

		memcpy(seg, qa + la - 5, 5);
		if (variant == 6)
			seg[4] ^= 0x20;
		memcpy(seg + 5, qb, lb);
		sc_tcp(&p, P | A, base + (uint32_t)la - 5, 1);
		sc_payload(&p, SPEC_PL_DATA, seg, 5 + lb);
		if (variant == 7) { /* the model judges the second message whole */
			p.s.pl = SPEC_PL_DNS_QUERY;
			p.s.msg_at = 5;
			p.s.dns_id = (uint16_t)(c->next_id - 1);
			p.s.qtype = qt;
			pc_strlcpy(p.s.qname, "api.allowed.test", sizeof(p.s.qname));
		}
		STEP(p);
		p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
		sc_tcp(&p, P | A, base + (uint32_t)(la + 7), 1);
		sc_query(&p, qc, c->next_id++, "api.allowed.test", qt, true);
		STEP(p);
		goto reset;
	}
	switch (variant) {
	default:
		sc_tcp(&p, P | A, base + 5, 1);
		break;
	case 1:
		STEP(a);
		sc_tcp(&p, P | A, base + (uint32_t)la, 1);
		break;
	case 2:
		sc_tcp(&p, P | A, base + (uint32_t)la + 3, 1);
		sc_query(&p, qb, c->next_id, "api.allowed.test", qt, true);
		STEP(p);
		p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
		sc_tcp(&p, P | A, base + (uint32_t)la, 1);
		break;
	case 3:
		sc_tcp(&p, F | A, base + (uint32_t)la, 1);
		STEP(p);
		p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
		sc_tcp(&p, P | A, base + (uint32_t)la, 1);
		break;
	}
	sc_query(&p, qb, c->next_id++, "api.allowed.test", qt, true);
	STEP(p);
reset:
	p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
	sc_tcp(&p, R, base + (uint32_t)la, 0);
	STEP(p);
done:
	drv_reset_flows(c->d);
}

/* S42b: the resolver's answers are framed from its ISN + 1 on, as the
 * sandbox's TCP frames them. Two allowed queries; then a segment holding
 * one whole answer to the second — naming an address nobody learned — at
 * a sequence number inside where the first answer goes: 0 after the first
 * answer's opening bytes, 1 with those never seen (lost, or dropped when
 * the guard could not keep them), 2 after the whole first answer, at the
 * next message's byte (judged, and taught: the control). Judged alone, 0 and 1 taught that address
 * (a segment cut from inside a record's data). Then the sandbox's SYN to it. */
#define SPLIT_VARIANTS 3
static void answer_split_seq(struct sc *c, int fam, int variant)
{
	static uint8_t q1[600], q2[600], a1[600], fk[600];
	struct pc_addr res, me, never;
	uint32_t stamp;
	uint16_t port = c->next_port++, qt = fam == 6 ? 28 : 1;
	uint16_t id1 = c->next_id++, id2 = c->next_id++;
	struct drv_pkt p;
	size_t l1, la, skip = 7;
	char ctx[64];

	snprintf(ctx, sizeof(ctx), "dns answer split v%d variant %d", fam, variant);
	context = ctx;
	sc_dst(fam, SC_RESOLVER, &res);
	sc_dst(fam, SC_NEVER, &never);
	sc_src(fam, SC_SB1, &me, &stamp);
	p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
	sc_tcp(&p, S, 300, 0);
	STEP(p);
	sc_me_synack(c, fam, &res, port, 301);
	p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
	sc_tcp(&p, P | A, 301, 901);
	sc_query(&p, q1, id1, "api.allowed.test", qt, true);
	l1 = p.s.len;
	STEP(p);
	p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, port, 53);
	sc_tcp(&p, P | A, 301 + (uint32_t)l1, 901);
	sc_query(&p, q2, id2, "x.wild.test", qt, true);
	STEP(p);
	/* the first answer, whose opening bytes come alone (variant 0) */
	p = sc_in(&res, 53, &me, port, IPPROTO_TCP);
	sc_tcp(&p, P | A, 901, 301);
	sc_answer(&p, a1, id1, "api.allowed.test", qt, &res, 1, true);
	la = p.s.len;
	if (variant == 0) {
		p.s.len = skip; /* not a whole message: put together */
		p.s.pl = SPEC_PL_DATA;
		STEP(p);
	} else if (variant == 2) {
		STEP(p); /* whole, in order: judged */
	}
	p = sc_in(&res, 53, &me, port, IPPROTO_TCP);
	sc_tcp(&p, P | A, 901 + (uint32_t)(variant == 2 ? la : skip), 301);
	sc_answer(&p, fk, id2, "x.wild.test", qt, &never, 1, true);
	STEP(p);
	p = sc_out(fam, SC_SB1, &never, IPPROTO_TCP, c->next_port++, 443);
	sc_tcp(&p, S, 1, 0);
	STEP(p);
done:
	drv_reset_flows(c->d);
}

/* Quotas (S14, S23): tables of 8 held flows and 4 DNS-over-TCP streams,
 * so a share of 4 and 2 per sandbox: agent-1 takes every place of both
 * (room is lent), and agent-2 must still get its own — the places of
 * agent-1's two oldest flows and streams, whose next segments are then of
 * no connection, or of no stream. */
static void quota_seq(struct sc *c, int fam)
{
	static uint8_t part[40];
	struct pc_addr shared, res;
	struct drv_pkt p;
	char ctx[64];
	int i;

	snprintf(ctx, sizeof(ctx), "quota v%d", fam);
	context = ctx;
	drv_set_capacity(c->d, 8, 4);
	sc_dst(fam, SC_SHARED, &shared);
	sc_dst(fam, SC_RESOLVER, &res);
	memset(part, 0x7f, sizeof(part)); /* a length prefix far beyond the segment */
	for (i = 0; i < 10; i++) {
		p = sc_out(fam, i < 8 ? SC_SB1 : SC_SB2, &shared, IPPROTO_TCP,
			   (uint16_t)(31000 + i), 443);
		sc_tcp(&p, S, 1, 0);
		sc_step(c, &p);
	}
	/* agent-1 holds its share of a full table: refused */
	p = sc_out(fam, SC_SB1, &shared, IPPROTO_TCP, 31010, 443);
	sc_tcp(&p, S, 1, 0);
	sc_step(c, &p);
	for (i = 0; i < 3; i++) { /* 31000 and 31001 gave their places up */
		p = sc_out(fam, SC_SB1, &shared, IPPROTO_TCP, (uint16_t)(31000 + i), 443);
		sc_tcp(&p, A, 2, 0);
		sc_step(c, &p);
	}
	for (i = 0; i < 6; i++) {
		p = sc_out(fam, i < 4 ? SC_SB1 : SC_SB2, &res, IPPROTO_TCP, (uint16_t)(32000 + i),
			   53);
		sc_tcp(&p, S, 0, 0); /* the stream is taken at the SYN (S12a) */
		sc_step(c, &p);
		sc_me_synack(c, fam, &res, (uint16_t)(32000 + i), 1);
		p = sc_out(fam, i < 4 ? SC_SB1 : SC_SB2, &res, IPPROTO_TCP, (uint16_t)(32000 + i),
			   53);
		sc_tcp(&p, P | A, 1, 1);
		sc_payload(&p, SPEC_PL_DATA, part, sizeof(part));
		sc_step(c, &p);
	}
	/* agent-1 holds its share of a full table: refused */
	p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, 32010, 53);
	sc_tcp(&p, S, 0, 0);
	sc_step(c, &p);
	for (i = 0; i < 3; i++) { /* 32000 and 32001 gave their streams up */
		p = sc_out(fam, SC_SB1, &res, IPPROTO_TCP, (uint16_t)(32000 + i), 53);
		sc_tcp(&p, P | A, 1 + sizeof(part), 1);
		sc_payload(&p, SPEC_PL_DATA, part, sizeof(part));
		sc_step(c, &p);
	}
	drv_set_capacity(c->d, 4096, 256);
}

/* agent-1's SYN (seq 10) to dst, and the server's SYN-ACK (seq 70) back:
 * the openings of the flows a reload then judges again. */
static void reload_syn(struct sc *c, int fam, const struct pc_addr *dst, uint16_t sport,
		       uint16_t dport)
{
	struct drv_pkt p = sc_out(fam, SC_SB1, dst, IPPROTO_TCP, sport, dport);

	sc_tcp(&p, S, 10, 0);
	sc_step(c, &p);
}

static void reload_synack(struct sc *c, const struct pc_addr *dst, uint16_t dport,
			  const struct pc_addr *me, uint16_t sport)
{
	struct drv_pkt p = sc_in(dst, dport, me, sport, IPPROTO_TCP);

	sc_tcp(&p, S | A, 70, 11);
	sc_step(c, &p);
}

/* Flows of every kind, then a reload that takes some away (R1, R2). */
static void reload_seq(int fam, unsigned long *packets, unsigned long *bad)
{
	static uint8_t ok[600], wild[600], data[32];
	struct sc c0, *c = &c0;
	struct pc_addr dst[5], me;
	uint32_t stamp;
	size_t nok, nw;
	struct drv_pkt p;
	char ctx[64];
	int i;

	sc_init(c, sc_policy, false, report, NULL);
	snprintf(ctx, sizeof(ctx), "reload v%d prelude", fam);
	context = ctx;
	sc_prelude(c, fam);
	snprintf(ctx, sizeof(ctx), "reload v%d", fam);
	sc_src(fam, SC_SB1, &me, &stamp);
	sc_dst(fam, SC_CIDR, &dst[0]);
	sc_dst(fam, SC_UDPH, &dst[1]);
	sc_dst(fam, SC_SHARED, &dst[2]);
	sc_dst(fam, SC_VAULT, &dst[3]);
	sc_dst(fam, SC_WILD, &dst[4]);
	nok = drv_client_hello(ok, "api.allowed.test");
	nw = drv_client_hello(wild, "x.wild.test");
	memset(data, 0x61, sizeof(data));

	reload_syn(c, fam, &dst[0], 30000, 22);
	p = sc_out(fam, SC_SB1, &dst[1], IPPROTO_UDP, 30001, 5353);
	sc_payload(&p, SPEC_PL_DATA, data, 8);
	sc_step(c, &p);
	reload_syn(c, fam, &dst[2], 30002, 443);
	reload_synack(c, &dst[2], 443, &me, 30002);
	p = sc_out(fam, SC_SB1, &dst[2], IPPROTO_TCP, 30002, 443);
	sc_tcp(&p, P | A, 11, 71);
	sc_stream(&p, SPEC_ST_CH, "api.allowed.test", ok, nok);
	sc_step(c, &p);
	p = sc_in(&dst[2], 443, &me, 30002, IPPROTO_TCP);
	sc_tcp(&p, A, 71, 11 + (uint32_t)nok);
	sc_step(c, &p);
	p = sc_out(fam, SC_SB1, &dst[2], IPPROTO_TCP, 30002, 443);
	sc_tcp(&p, A, 11 + (uint32_t)nok, 71);
	sc_step(c, &p);
	reload_syn(c, fam, &dst[3], 30003, 443);
	reload_syn(c, fam, &dst[4], 30004, 443);
	reload_synack(c, &dst[4], 443, &me, 30004);

	c->bad += (unsigned long)drv_reload(c->d, sc_policy2, report, NULL);

	/* after the reload: the held flow's ClientHello under the new policy,
	 * and a packet on each flow */
	p = sc_out(fam, SC_SB1, &dst[4], IPPROTO_TCP, 30004, 443);
	sc_tcp(&p, P | A, 11, 71);
	sc_stream(&p, SPEC_ST_CH, "x.wild.test", wild, nw);
	sc_step(c, &p);
	for (i = 0; i < 4; i++) {
		p = sc_out(fam, SC_SB1, &dst[i], i == 1 ? IPPROTO_UDP : IPPROTO_TCP, 30000 + i,
			   i == 0   ? 22
			   : i == 1 ? 5353
				    : 443);
		sc_tcp(&p, P | A, 2000, 71);
		sc_payload(&p, SPEC_PL_DATA, data, 8);
		sc_step(c, &p);
	}
	*packets += c->packets;
	*bad += c->bad;
	seen_merge(c);
	sc_fini(c);
}

START_TEST(engine_against_model)
{
	unsigned long packets = 0, bad = 0, singles_n = 0, seqs = 0;
	char buf[64];

	n_rows = n_seen = 0;
	for (int fam = 4; fam <= 6; fam += 2) {
		struct sc c;
		unsigned long before;

		sc_init(&c, sc_policy, false, report, NULL);
		snprintf(buf, sizeof(buf), "prelude v%d", fam);
		context = buf;
		sc_prelude(&c, fam);
		snprintf(buf, sizeof(buf), "single v%d", fam);
		context = buf;
		before = c.packets;
		singles(&c, fam);
		singles_n += c.packets - before;
		for (int s = SC_SB1; s <= SC_SB2; s++) {
			static const enum sc_dst dsts[] = {SC_SHARED, SC_WILD, SC_OTHER2, SC_VAULT,
							   SC_NEAR};
			static const uint16_t ports[] = {443, 80};

			for (size_t di = 0; di < sizeof(dsts) / sizeof(dsts[0]); di++)
				for (size_t pi = 0; pi < 2; pi++)
					for (int v = 0; v < HV_N; v++, seqs++)
						held_seq(&c, fam, (enum sc_src)s, dsts[di],
							 ports[pi], (enum held_variant)v);
		}
		for (int tcp = 0; tcp < 2; tcp++) {
			static const struct {
				const char *name, *v4, *v6;
			} names[] = {
			    {"api.allowed.test", "151.101.1.11", "2a04:4e42::11"},
			    {"evil.test", "151.101.1.12", "2a04:4e42::12"},
			    {"y.wild.test", "151.101.2.21", "2a04:4e42::21"},
			    {"meta.test", "169.254.169.254", "fe80::a9fe:a9fe"},
			    {"near.test", "100.64.7.8", "fd00:64:7::8"},
			    {"loop.test", "127.0.0.2", "::1"},
			    {"gw.test", "10.203.0.1", "fd00:203::1"},
			    {"api.allowed.test", "192.168.1.1", "fc00::1"},
			};

			for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
				for (int m = 0; m < 2; m++, seqs++)
					dns_seq(&c, fam, SC_SB1, names[i].name,
						fam == 6 ? names[i].v6 : names[i].v4, m == 0, tcp);
		}
		/* urgent data on DNS over TCP, each way (S7a, S42a) */
		for (int urg = 1; urg <= 2; urg++, seqs++)
			dns_seq_urg(&c, fam, SC_SB1, "api.allowed.test",
				    fam == 6 ? "2a04:4e42::11" : "151.101.1.11", true, true, urg);
		for (int s = 0; s < SC_NSRC; s++)
			for (int d = 0; d < SC_NDST; d++, seqs++)
				port53_seq(&c, fam, (enum sc_src)s, (enum sc_dst)d);
		for (int v = 0; v < OVERLAP_VARIANTS; v++, seqs++)
			overlap_seq(&c, fam, v);
		quota_seq(&c, fam);
		for (int v = 0; v < SPLIT_VARIANTS; v++, seqs++)
			answer_split_seq(&c, fam, v);
		seqs++;
		packets += c.packets;
		bad += c.bad;
		seen_merge(&c);
		sc_fini(&c);
		reload_seq(fam, &packets, &bad);
		expiry_seq(fam, &packets, &bad);
		seqs += 2;
	}

	/* allowed queries' records deferred to their answers (a healthy log) */
	for (int fam = 4; fam <= 6; fam += 2) {
		struct sc c;

		sc_init(&c, sc_policy, true, report, NULL);
		snprintf(buf, sizeof(buf), "deferred v%d", fam);
		context = buf;
		sc_prelude(&c, fam);
		for (int tcp = 0; tcp < 2; tcp++) {
			for (int m = 0; m < 2; m++, seqs++) {
				dns_seq(&c, fam, SC_SB1, "api.allowed.test",
					fam == 6 ? "2a04:4e42::11" : "151.101.1.11", m == 0, tcp);
				dns_seq(&c, fam, SC_SB1, "meta.test",
					fam == 6 ? "fe80::a9fe:a9fe" : "169.254.169.254", m == 0,
					tcp);
			}
		}
		packets += c.packets;
		bad += c.bad;
		seen_merge(&c);
		sc_fini(&c);
	}

	qsort(rows, n_rows, sizeof(rows[0]), row_cmp);
	fprintf(stderr,
		"check_engine_spec: %lu packets checked (%lu single-packet cases, %lu sequences), "
		"%lu disagreements with docs/spec.md\n",
		packets, singles_n, seqs, bad);
	qsort(seen, n_seen, sizeof(seen[0]), seen_cmp);
	fprintf(stderr, "  packets decided per spec row:");
	for (size_t i = 0; i < n_seen; i++)
		fprintf(stderr, " %s=%lu", seen[i].row, seen[i].n);
	fprintf(stderr, "\n");
	for (size_t i = 0; i < n_rows; i++) {
		fprintf(stderr, "  row %s: %lu disagreements, e.g.\n", rows[i].row, rows[i].n);
		for (size_t j = 0; j < rows[i].n_ex; j++)
			fprintf(stderr, "    %s\n", rows[i].ex[j]);
	}
	ck_assert_msg(bad == 0, "%lu disagreements between the engine and docs/spec.md", bad);
}
END_TEST

PC_UNIT_SUITE("spec", "exhaustive", 120, engine_against_model)
