/* libFuzzer target: rule file bytes -> compiled policy. Any input must
 * either be refused with an error or compile into a policy whose lookups
 * work and whose hash is reproducible. */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rules/rules_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void exercise(const struct policy *p)
{
	static const char *const names[] = {"api.github.com",	"x.githubusercontent.com",
					    "a.b.example.com.", "EXAMPLE.COM",
					    "localhost",	""};
	struct policy_src src = {0};

	for (size_t i = 0; i < policy_sandbox_count(p); i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(p, i);
		const struct policy_allow *r;

		if (policy_sandbox_by_name(p, sb->name) != sb)
			abort();
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			policy_host_allows(sb, names[k], IPPROTO_TCP, 443, &r);
			policy_name_allowed(sb, names[k], &r);
			policy_secret_for(sb, names[k], 443);
		}
		for (size_t k = 0; k < sb->n_allow; k++) {
			const struct policy_allow *a = &sb->allow[k];

			/* Each entry must allow what it names, on its first port. */
			if (a->kind == POLICY_ALLOW_CIDR) {
				if (a->proto & POLICY_PROTO_TCP &&
				    !policy_cidr_allows(sb, &a->cidr.addr, IPPROTO_TCP,
							a->ports[0].lo, &r))
					abort();
			} else if (a->kind == POLICY_ALLOW_HOST) {
				if (!policy_name_allowed(sb, a->host, &r))
					abort();
			}
		}
		for (size_t k = 0; k < sb->n_secrets; k++)
			if (policy_secret_by_name(sb, sb->secrets[k].name) != &sb->secrets[k] ||
			    !policy_host_allows(sb, sb->secrets[k].host, IPPROTO_TCP,
						sb->secrets[k].port, NULL))
				abort();
		if (sb->match.n_sources) {
			src.addr = sb->match.sources[0].addr;
			src.has_mac = sb->match.has_mac;
			memcpy(src.mac, sb->match.mac, 6);
			memcpy(src.port, sb->match.port, sizeof(src.port));
			if (policy_sandbox_match(p, &src) != sb)
				abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct policy *p = NULL, *q = NULL;
	struct pc_err err;

	if (policy_load_buffer("fuzz.yaml", (const char *)data, size, NULL, &p, &err) != 0) {
		if (p || !err.msg[0])
			abort(); /* a failure must say why and yield nothing */
		return 0;
	}
	exercise(p);
	/* The same bytes must give the same hash. */
	if (policy_load_buffer("again.yaml", (const char *)data, size, NULL, &q, &err) != 0 ||
	    strcmp(policy_hash(p), policy_hash(q)) != 0)
		abort();
	policy_unref(q);
	policy_unref(p);
	return 0;
}
