/* libFuzzer target: the engine against the model of docs/spec.md
 * (spec/), differentially. The input picks the policy in force and a
 * short sequence of operations, each a few bytes that choose fields, so
 * most inputs are meaningful: DNS resolutions (matching or not, special
 * addresses, over UDP or TCP), packets of up to four flows per class of
 * source and destination (flags, sequence numbers at the edges of the
 * judged bytes, slices of a ClientHello for an allowed or a refused name,
 * plain data), the server's ACKs, time passing, a reload. Real packets go
 * through decide_packet with a real policy, DNS guard and flow tables;
 * any disagreement with the model aborts with its spec row. */
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/spec/scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define OPS_MAX 40

/* FUZZ_SPEC_IGNORE="S7,H11": rows whose disagreements are printed but do
 * not abort, to look past known ones on an unfixed engine (the states of
 * engine and model then part: what follows is noise). CI never sets it. */
static bool ignored(const char *row)
{
	const char *l = getenv("FUZZ_SPEC_IGNORE");
	size_t n = strlen(row);

	for (const char *p = l; p && (p = strstr(p, row)) != NULL; p += n)
		if ((p == l || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

static bool diverged; /* an ignored disagreement: the rest is noise */

static void report(void *arg, const char *row, const char *why)
{
	(void)arg;
	fprintf(stderr, "fuzz_spec: disagreement at spec row %s: %s\n", row, why);
	if (!ignored(row))
		abort();
	diverged = true;
}

/* The streams a held flow may carry, whole; slices of them are sent. */
static uint8_t streams[4][600];
static size_t stream_len[4];
static const enum spec_stream stream_kind[4] = {SPEC_ST_CH, SPEC_ST_CH, SPEC_ST_PLAIN,
						SPEC_ST_NOSNI};
static const char *const stream_sni[4] = {"api.allowed.test", "evil.test", NULL, NULL};

static void streams_init(void)
{
	if (stream_len[0])
		return;
	stream_len[0] = drv_client_hello(streams[0], "api.allowed.test");
	stream_len[1] = drv_client_hello(streams[1], "evil.test");
	stream_len[2] = (size_t)sprintf((char *)streams[2], "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
	stream_len[3] = drv_client_hello(streams[3], NULL);
}

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint8_t take(struct rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static const char *const names[] = {"api.allowed.test", "evil.test",   "x.wild.test",
				    "meta.test",	"near.test",   "loop.test",
				    "vault.test",	"other2.test", "dns.udp.test"};
static const char *const answers4[] = {"151.101.1.10", "151.101.2.20", "169.254.169.254",
				       "100.64.7.7",   "127.0.0.1",    "10.203.0.1",
				       "151.101.4.40", "192.168.1.1",  "151.101.3.30"};
static const char *const answers6[] = {"2a04:4e42::10", "2a04:4e42::20", "::ffff:169.254.169.254",
				       "fd00:64:7::7",	"::1",		 "fd00:203::1",
				       "2a04:4e42::40", "fe80::1",	 "2a04:4e42::30"};
static const uint16_t dports[] = {443, 80, 53, 22, 5353, 8443};

static void op_dns(struct sc *c, int fam, struct rd *r)
{
	static uint8_t q[600], a[600];
	uint8_t b1 = take(r), b2 = take(r), b3 = take(r);
	enum sc_src src = (b1 & 1) ? SC_SB2 : SC_SB1;
	const char *name = names[b2 % 9];
	struct pc_addr res, me, ad[2];
	uint32_t stamp;
	uint16_t id = c->next_id++, port = c->next_port++, qtype = fam == 6 ? 28 : 1;
	bool tcp = b1 & 2, match = !(b1 & 4);
	size_t n = 1 + ((b1 >> 3) & 1);
	struct drv_pkt p;

	sc_dst(fam, SC_RESOLVER, &res);
	sc_src(fam, src, &me, &stamp);
	pc_addr_parse((fam == 6 ? answers6 : answers4)[b3 % 9], &ad[0]);
	pc_addr_parse((fam == 6 ? answers6 : answers4)[(b3 / 9) % 9], &ad[1]);
	p = sc_out(fam, src, &res, tcp ? IPPROTO_TCP : IPPROTO_UDP, port, 53);
	sc_tcp(&p, tcp ? 0x18 : 0, 301, 901);
	sc_query(&p, q, id, name, qtype, tcp);
	if (!sc_step(c, &p) || drv_last(c->d) != (1u << 3) /* PASS */)
		return;
	p = sc_in(&res, 53, &me, port, tcp ? IPPROTO_TCP : IPPROTO_UDP);
	sc_tcp(&p, tcp ? 0x18 : 0, 901, 301 + (uint32_t)p.s.len);
	sc_answer(&p, a, match ? id : (uint16_t)(id ^ 0x5555), name, qtype, ad, n, tcp);
	sc_step(c, &p);
}

/* A packet of one of the flows: 4 source ports per (source, destination). */
static void op_flow(struct sc *c, int fam, struct rd *r, bool in)
{
	uint8_t b1 = take(r), b2 = take(r), b3 = take(r), b4 = take(r), b5 = take(r), b6 = take(r);
	enum sc_src src = (enum sc_src)(b1 % SC_NSRC);
	enum sc_dst dc = (enum sc_dst)(b2 % SC_NDST);
	uint16_t sport = (uint16_t)(40000 + (b1 >> 4) % 4), dport = dports[b3 % 6];
	uint8_t proto = (b3 >> 3) % 4 == 3 ? IPPROTO_UDP : IPPROTO_TCP;
	uint8_t flags = b4 & 0x3f; /* URG too (docs/spec.md S7a, S22a, S42a, H2a) */
	uint16_t urp = (b4 & 0x40) ? (uint16_t)(1 + b6 % 4) : 0;
	struct pc_addr dst, me;
	uint32_t stamp, isn = 1000, off;
	int s = b5 % 4;
	size_t len = stream_len[s], from, n;
	struct drv_pkt p;

	sc_dst(fam, dc, &dst);
	if (in) {
		/* the server: its ISN is 5000; it may send data (10 bytes) */
		static const uint32_t acks[] = {0, 1, 10, 20};
		static const uint32_t seqs[] = {5000, 5001, 5011, 5100};
		static const uint8_t srv[10] = "0123456789";

		sc_src(fam, src, &me, &stamp);
		p = sc_in(&dst, dport, &me, sport, proto);
		off = (b6 & 4) ? (uint32_t)stream_len[b6 % 4] : acks[b6 % 4];
		sc_tcp(&p, flags | 0x10, seqs[(b5 >> 1) % 4], isn + 1 + off);
		p.s.urp = urp;
		if (b5 & 1)
			sc_payload(&p, SPEC_PL_DATA, srv, sizeof(srv));
		sc_step(c, &p);
		return;
	}
	p = sc_out(fam, src, &dst, proto, sport, dport);
	/* where the segment starts in the stream, and how much it carries */
	switch (b6 % 8) {
	case 0:
		from = 0;
		n = len;
		break;
	case 1:
		from = 0;
		n = 1 + b6 % 30;
		break;
	case 2:
		from = 20;
		n = len - 20;
		break;
	case 3:
		from = 0;
		n = 20;
		break;
	case 4:
		from = len;
		n = 10;
		break;
	case 5:
		from = 0;
		n = 0;
		break;
	case 6:
		from = b6 % len;
		n = len - from;
		break;
	default:
		from = 1;
		n = 5;
		break;
	}
	if (from + n > len)
		n = from < len ? len - from : 0;
	if (from >= len && n == 0 && (b6 % 8) == 4) {
		static uint8_t more[16];

		memset(more, 0x61, sizeof(more));
		sc_payload(&p, SPEC_PL_DATA, more, 10);
	} else if (n) {
		sc_stream(&p, stream_kind[s], stream_sni[s], streams[s] + from, n);
		p.s.stream_all = streams[s];
		p.s.stream_all_len = len;
	}
	off = (flags & 0x02) && (b5 & 0x80) ? 77777 : 0; /* a SYN with another ISN */
	sc_tcp(&p, flags, (flags & 0x02) ? isn + off : isn + 1 + (uint32_t)from, 5001);
	p.s.urp = urp;
	if (b5 & 0x40)
		p.tcp_opt_len = 36;
	if (b5 & 0x20)
		p.v6_dstopt = 512; /* IPv6 only: options that ride along */
	/* MPTCP in the options, or options that cannot be read to their end,
	 * or a decoy that only looks like it (S7b, S22b, H5a) */
	if ((b2 >> 5) == 7) { /* one packet in 8: held flows must still start */
		p.opt_form = (uint8_t)(1 + b6 % (DRV_OPT_N - 1));
		p.s.mptcp = p.opt_form != DRV_OPT_DECOY;
	}
	if (!drv_describes(c->d, &p))
		return; /* two ClientHellos mixed: only the real parser knows */
	sc_step(c, &p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = {data, size};
	struct sc c;
	uint8_t head = take(&r);
	int fam = head & 1 ? 6 : 4;
	bool reloaded = false;

	streams_init();
	sc_init(&c, sc_policy, head & 4, report, NULL);
	sc_prelude(&c, fam);
	diverged = false;
	for (int op = 0; op < OPS_MAX && r.n && !diverged; op++) {
		uint8_t k = take(&r);

		switch (k % 8) {
		case 0:
		case 1:
		case 2:
			op_flow(&c, fam, &r, false);
			break;
		case 3:
			op_flow(&c, fam, &r, true);
			break;
		case 4:
			op_dns(&c, fam, &r);
			break;
		case 5:
			drv_advance(c.d, (uint64_t)take(&r) * 50);
			break;
		case 6:
			if (!reloaded && (head & 2)) {
				reloaded = true;
				drv_reload(c.d, sc_policy2, report, NULL);
			}
			break;
		default:
			drv_reset_flows(c.d);
			break;
		}
	}
	sc_fini(&c);
	return 0;
}
