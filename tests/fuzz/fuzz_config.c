/* libFuzzer target: portcullis.yaml bytes -> struct config. Any input
 * is either refused with an error (cfg untouched) or loads. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rules/rules_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config cfg, before;
	struct pc_err err;

	memset(&cfg, 0xa5, sizeof(cfg));
	before = cfg;
	if (config_load_buffer("fuzz/portcullis.yaml", (const char *)data, size, &cfg, &err) != 0) {
		if (memcmp(&cfg, &before, sizeof(cfg)) != 0 || !err.msg[0])
			abort();
		return 0;
	}
	/* What loaded must satisfy the cross-key rules the loader enforces. */
	if (cfg.queue.count == 0 || cfg.dns.ttl_min > cfg.dns.ttl_max ||
	    cfg.dns.n_resolvers > RULES_MAX_RESOLVERS ||
	    !memchr(cfg.rules_dir, 0, sizeof(cfg.rules_dir)))
		abort();
	return 0;
}
