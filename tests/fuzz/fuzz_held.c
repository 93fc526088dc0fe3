/* libFuzzer target: one held TCP flow (a host entry on an address the
 * sandbox resolved) driven by a sequence of segments from both sides — the
 * sandbox's in prerouting, the server's in forward — with fuzzed flags,
 * sequence and acknowledgement numbers, payloads (raw, or slices of an
 * allowed and a disallowed ClientHello) and clock steps. Besides memory
 * safety it checks the insertion property of docs/engine.md ("Held
 * flows"): when the flow is promoted, every byte the engine ever let
 * through inside the judged range equals the judged byte, and promotion
 * happens only on a reply in forward.
 * Input: steps of 8 bytes (+ payload): dir/kind/clock, flags, seq (int16,
 * relative to the side's ISN), ack (int16, relative to the other side's),
 * payload length, slice offset (x4), 2 spare; raw payload bytes follow. */
#include "engine/engine_int.h" /* first: netinet/in.h before linux/ headers */

#include "rules/rules_int.h"
#include "tests/unit/wire.h"

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char policy_yaml[] = "sandbox: agent-1\n"
				  "match: { source: 10.203.0.11/32, port: pcv1 }\n"
				  "allow:\n"
				  "  - host: api.github.test\n"
				  "    ports: [443]\n";

#define ISN_C 1000u
#define ISN_S 70000u
#define STEPS 48

static struct config cfg;
static struct policy *pol;
static struct dnsguard *dg;
static struct portmap pm = {.lock = PTHREAD_RWLOCK_INITIALIZER};
static uint8_t ch_good[512], ch_evil[512];
static size_t n_good, n_evil;

static void judge(struct decide_ctx *c, const uint8_t *pkt, size_t len, uint8_t hook,
		  struct decision *d)
{
	struct pkt_in in = {.id = 1,
			    .mark = hook == NF_INET_PRE_ROUTING ? 4 : 0,
			    .hook = hook,
			    .has_mac = true,
			    .data = pkt,
			    .len = len};

	decide_packet(c, &in, d);
	decision_commit(dg, d, c->now_ms);
}

/* Learn api.github.test -> 203.0.113.10 through the guard, as a sandbox
 * resolving it would. */
static void learn(void)
{
	static const uint8_t q[] = {0x12, 0x34, 0x01, 0x00, 0,	 1,   0,   0,	0,   0,	  0,
				    0,	  3,	'a',  'p',  'i', 6,   'g', 'i', 't', 'h', 'u',
				    'b',  4,	't',  'e',  's', 't', 0,   0,	1,   0,	  1};
	uint8_t a[sizeof(q) + 16], pkt[256];
	struct pc_endpoint cl, rs;
	struct held_table *held = NULL;
	struct decide_ctx c;
	struct decision d;
	int n;

	memset(&d, 0, sizeof(d));
	if (held_table_new(1, &held) < 0)
		abort();
	c = (struct decide_ctx){&cfg, pol, dg, &pm, held, 1000000, false, NULL};
	pc_endpoint_parse("10.203.0.11:5353", 0, &cl);
	pc_endpoint_parse("198.51.100.53:53", 0, &rs);
	n = pkt_build_udp(&cl, &rs, q, sizeof(q), pkt, sizeof(pkt));
	judge(&c, pkt, (size_t)n, NF_INET_PRE_ROUTING, &d);
	decision_clear(&d);
	memcpy(a, q, sizeof(q));
	a[2] = 0x81;
	a[3] = 0x80;
	a[7] = 1;
	memcpy(a + sizeof(q), "\xc0\x0c\x00\x01\x00\x01\x00\x01\x00\x00\x00\x04\xcb\x00\x71\x0a",
	       16);
	n = pkt_build_udp(&rs, &cl, a, sizeof(a), pkt, sizeof(pkt));
	judge(&c, pkt, (size_t)n, NF_INET_FORWARD, &d);
	if (d.v != VK_PASS)
		abort(); /* the fixture itself is wrong */
	decision_clear(&d);
	held_table_free(held);
}

static int init(void)
{
	struct nft_port *ports;
	struct pc_err err = {0};

	config_defaults(&cfg);
	pc_addr_parse("198.51.100.53", &cfg.dns.resolvers[0]);
	cfg.dns.n_resolvers = 1;
	cfg.engine.sni_timeout_ms = 3000;
	if (policy_load_buffer("fuzz.yaml", policy_yaml, strlen(policy_yaml), &cfg, &pol, &err) <
		0 ||
	    dnsguard_new(&cfg, &dg, &err) < 0)
		abort();
	ports = calloc(1, sizeof(*ports));
	if (!ports)
		abort();
	strcpy(ports[0].name, "pcv1");
	ports[0].ifindex = 4;
	portmap_set(&pm, ports, 1);
	learn();
	n_good = wire_client_hello(ch_good, "api.github.test");
	n_evil = wire_client_hello(ch_evil, "paste.evil.test");
	return 0;
}

static size_t tcp4(uint8_t *pkt, bool from_server, uint8_t flags, uint32_t seq, uint32_t ack,
		   const uint8_t *payload, size_t len)
{
	const char *sb = "10.203.0.11", *srv = "203.0.113.10";

	wire_ip4(pkt, IPPROTO_TCP, 20 + len, from_server ? srv : sb, from_server ? sb : srv);
	wire_tcp(pkt + 20, from_server ? 443 : 41000, from_server ? 41000 : 443, flags, seq, ack);
	if (len)
		memcpy(pkt + 40, payload, len);
	return 40 + len;
}

/* What the engine let through from the sandbox: the insertion check. */
struct passed {
	uint32_t seq;
	size_t len;
	uint8_t bytes[255];
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready = -1;
	static struct decision d;
	static struct passed passed[STEPS];
	static uint8_t pkt[40 + 255];
	struct held_table *held = NULL;
	struct decide_ctx c;
	size_t pos = 0, np = 0;
	struct flow_key k;

	if (ready < 0)
		ready = init();
	if (held_table_new(8, &held) < 0)
		return 0;
	c = (struct decide_ctx){&cfg, pol, dg, &pm, held, 1000000, false, NULL};
	/* the SYN: held */
	judge(&c, pkt, tcp4(pkt, false, 0x02, ISN_C, 0, NULL, 0), NF_INET_PRE_ROUTING, &d);
	decision_clear(&d);
	memset(&k, 0, sizeof(k));
	for (int step = 0; step < STEPS && size - pos >= 8; step++) {
		const uint8_t *s = data + pos;
		bool srv = s[0] & 1;
		uint32_t seq =
		    (srv ? ISN_S : ISN_C) + (uint32_t)(int32_t)(int16_t)(s[2] << 8 | s[3]);
		uint32_t ack =
		    (srv ? ISN_C : ISN_S) + (uint32_t)(int32_t)(int16_t)(s[4] << 8 | s[5]);
		size_t len = s[6], off = (size_t)s[7] * 4;
		const uint8_t *payload;
		struct held_flow *hf;
		size_t n;

		pos += 8;
		switch ((s[0] >> 1) & 3) {
		case 1:
			payload = off < n_good ? ch_good + off : ch_good;
			if (len > n_good - (size_t)(payload - ch_good))
				len = n_good - (size_t)(payload - ch_good);
			break;
		case 2:
			payload = off < n_evil ? ch_evil + off : ch_evil;
			if (len > n_evil - (size_t)(payload - ch_evil))
				len = n_evil - (size_t)(payload - ch_evil);
			break;
		default:
			if (len > size - pos)
				len = size - pos;
			payload = data + pos;
			pos += len;
			break;
		}
		switch ((s[0] >> 3) & 3) {
		case 1:
			c.now_ms += 1000;
			break;
		case 2:
			c.now_ms += HELD_GRACE_MS + 1;
			break;
		case 3:
			c.now_ms += cfg.engine.sni_timeout_ms + 1;
			break;
		}
		n = tcp4(pkt, srv, s[1], seq, ack, payload, len);
		judge(&c, pkt, n, srv ? NF_INET_FORWARD : NF_INET_PRE_ROUTING, &d);
		if (d.promote && (!srv || d.v != VK_ALLOW))
			abort(); /* promoted by a sandbox packet, or not an ALLOW */
		if (!srv && d.v == VK_HELD)
			np = 0; /* a new connection on the same addresses (its entry was gone) */
		if (!srv && d.v == VK_PASS && len && np < STEPS) {
			passed[np].seq = seq;
			passed[np].len = len;
			memcpy(passed[np].bytes, payload, len);
			np++;
		}
		if (srv && d.v == VK_ALLOW) {
			/* promoted: every byte let through inside the judged range is
			 * the judged one */
			if (k.family == 0) {
				k = d.key;
			}
			hf = held_get(held, &k);
			if (!hf || !hf->promoted_ms)
				abort();
			for (size_t i = 0; i < np; i++) {
				for (size_t j = 0; j < passed[i].len; j++) {
					uint32_t rel = passed[i].seq + (uint32_t)j - (ISN_C + 1);

					if (rel < hf->len && passed[i].bytes[j] != hf->buf[rel])
						abort();
				}
			}
		}
		decision_clear(&d);
	}
	held_table_free(held);
	return 0;
}
