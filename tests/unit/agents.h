/* Policy text the engine and ruleset tests (check_engine, check_nft,
 * check_checker_pass) and the packet fuzz target share: the sandbox
 * agent-1 on port pcv1 with an address of each family, its ssh entry, and
 * agent-2 allowed nothing.
 * Plain strings, no Check: fuzz targets include it too. */
#ifndef PC_TEST_AGENTS_H
#define PC_TEST_AGENTS_H

/* agent-1's head, up to its allow list */
#define AGENT1_HEAD                                                                                \
	"sandbox: agent-1\n"                                                                       \
	"match: { source: [10.203.0.11/32, \"fd00:203::11/128\"], port: pcv1 }\n"                  \
	"allow:\n"

/* an allow entry: ssh to one documentation host */
#define ALLOW_SSH                                                                                  \
	"  - cidr: 198.51.100.22/32\n"                                                             \
	"    ports: [22]\n"

/* a second document: agent-2, by address, allowed nothing */
#define AGENT2_EMPTY                                                                               \
	"---\n"                                                                                    \
	"sandbox: agent-2\n"                                                                       \
	"match: { source: 10.203.0.12/32 }\n"                                                      \
	"allow: []\n"

#endif
