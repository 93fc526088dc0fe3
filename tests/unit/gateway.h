/* The gateway the ruleset, checker and engine unit tests run under: the
 * bridge pcbr0 with a resolver of each family, and a policy loaded from
 * YAML against it. A fixture that does not load fails the test that
 * uses it, with the loader's message. */
#ifndef PC_TEST_GATEWAY_H
#define PC_TEST_GATEWAY_H

#include "rules/rules_int.h"
#include "tests/unit/unit.h"

#include <string.h>

/* The shipped defaults, bridge pcbr0, resolvers 198.51.100.53 and
 * 2001:db8:53::53. */
static inline void gw_config(struct config *cfg)
{
	config_defaults(cfg);
	pc_strlcpy(cfg->bridge, "pcbr0", sizeof(cfg->bridge));
	ck_assert_int_eq(pc_addr_parse("198.51.100.53", &cfg->dns.resolvers[0]), 0);
	ck_assert_int_eq(pc_addr_parse("2001:db8:53::53", &cfg->dns.resolvers[1]), 0);
	cfg->dns.n_resolvers = 2;
}

/* yaml as the policy file t.yaml under cfg. */
static inline struct policy *gw_policy(const char *yaml, const struct config *cfg)
{
	struct pc_err err = {0};
	struct policy *p = NULL;

	if (policy_load_buffer("t.yaml", yaml, strlen(yaml), cfg, &p, &err) < 0)
		ck_abort_msg("policy: %s", err.msg);
	return p;
}

#endif
