/* Allow entries and sandboxes the dnsguard and rules unit tests build by
 * hand (struct policy_allow, struct policy_sandbox: rules/rules.h), one
 * line each: the same
 * fields a loaded policy fills in, with n_ports taken from the port array
 * so that the two cannot disagree. */
#ifndef PC_TEST_ALLOW_H
#define PC_TEST_ALLOW_H

#include "rules/rules.h"

#define UA_NPORTS(ports) (sizeof(ports) / sizeof((ports)[0]))

/* kind HOST or WILDCARD; proto TCP, UDP or ANY; host and rule string
 * literals (they fill char arrays) */
#define UA_NAME(kind_, host_, ports_, proto_, rule_)                                               \
	{                                                                                          \
		.kind = POLICY_ALLOW_##kind_, .host = host_, .ports = (ports_),                    \
		.n_ports = UA_NPORTS(ports_), .proto = POLICY_PROTO_##proto_, .rule = rule_        \
	}

/* the prefix last: a braced initializer, or {{0}, 0} for one set at run time */
#define UA_CIDR(ports_, proto_, rule_, ...)                                                        \
	{                                                                                          \
		.kind = POLICY_ALLOW_CIDR, .cidr = __VA_ARGS__, .ports = (ports_),                 \
		.n_ports = UA_NPORTS(ports_), .proto = POLICY_PROTO_##proto_, .rule = rule_        \
	}

/* A hand-built sandbox of the first n entries of allow, the default query
 * types and refusal refuse (REFUSED or NXDOMAIN), no secrets. */
#define UA_SANDBOX(name_, allow_, n_, refuse_)                                                     \
	{                                                                                          \
		.name = name_, .allow = (allow_), .n_allow = (n_), .dns_qtypes = QT_DEFAULT,       \
		.dns_refuse = DNS_REFUSE_##refuse_                                                 \
	}

#endif
