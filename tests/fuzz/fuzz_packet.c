/* libFuzzer target: packets as NFQUEUE delivers them, from a sandbox or a
 * resolver, through the engine's parser and the whole decision (DNS
 * framing, held-flow reassembly, payload rewrite) with a real policy.
 * Input: one control byte (bit 0: forward hook instead of prerouting; bits
 * 1-2: input port; bit 3: DNS records deferred), then the IP packet. */
#include "engine/engine_int.h" /* first: netinet/in.h before linux/ headers */

#include "rules/rules_int.h"
#include "tests/unit/agents.h"

#include <linux/netfilter.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char policy_yaml[] = AGENT1_HEAD ALLOW_SSH /* and: */
    "  - host: api.github.test\n"
    "    ports: [443, 80]\n"
    "  - host: \"*.example.test\"\n"
    "    ports: [443]\n" AGENT2_EMPTY;

/* Built once: the policy and DNS guard a running engine would have. */
static struct config cfg;
static struct policy *pol;
static struct dnsguard *dg;
static struct portmap pm = {.lock = PTHREAD_RWLOCK_INITIALIZER};

static int init(void)
{
	struct nft_port *ports;
	struct pc_err err = {0};

	config_defaults(&cfg);
	pc_addr_parse("198.51.100.53", &cfg.dns.resolvers[0]);
	cfg.dns.n_resolvers = 1;
	if (policy_load_buffer("fuzz.yaml", policy_yaml, strlen(policy_yaml), &cfg, &pol, &err) <
		0 ||
	    dnsguard_new(&cfg, &dg, &err) < 0)
		abort();
	ports = calloc(2, sizeof(*ports));
	if (!ports)
		abort();
	strcpy(ports[0].name, "pcv1");
	ports[0].ifindex = 4;
	strcpy(ports[1].name, "pcv2");
	ports[1].ifindex = 5;
	portmap_set(&pm, ports, 2);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready = -1;
	static struct decision d;
	struct held_table *held = NULL;
	struct pkt p;
	struct pkt_in in;
	struct decide_ctx c;
	uint8_t *copy;

	if (ready < 0)
		ready = init();
	if (size < 1)
		return 0;
	/* An exact-size copy so ASan sees any read past the packet. */
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy || held_table_new(8, &held) < 0) {
		free(copy);
		return 0;
	}
	memcpy(copy, data + 1, size - 1);
	if (pkt_parse(copy, size - 1, &p) == PKT_OK && (p.proto == 6 || p.proto == 17) &&
	    !p.truncated) {
		uint8_t *rw = NULL;

		if (pkt_replace_payload(copy, size - 1, &p, p.payload, p.payload_len, &rw) >= 0)
			free(rw);
	}
	memset(&in, 0, sizeof(in));
	in.id = 1;
	in.hook = (data[0] & 1) ? NF_INET_FORWARD : NF_INET_PRE_ROUTING;
	in.mark = (uint32_t)(3 + ((data[0] >> 1) & 3)); /* 3 (unknown), 4, 5, 6 */
	in.has_mac = true;
	in.data = copy;
	in.len = size - 1;
	c = (struct decide_ctx){&cfg, pol, dg, &pm, held, 1000000, (data[0] & 8) != 0, NULL};
	if (dnstcp_table_new(4, &c.dnstcp) < 0)
		c.dnstcp = NULL;
	/* Twice: the second sees the state (held flow, pending query) the
	 * first left, as the next segment of the same flow would. */
	for (int i = 0; i < 2; i++) {
		decide_packet(&c, &in, &d);
		decision_commit(dg, &d, c.now_ms);
		decision_clear(&d);
	}
	held_table_free(held);
	dnstcp_table_free(c.dnstcp);
	free(copy);
	return 0;
}
