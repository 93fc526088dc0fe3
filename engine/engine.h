/* engine: portcullisd, the verdict engine — the NFQUEUE loop, the
 * decision, held flows, DNS over TCP, the control socket. Only cli/, above
 * it, calls into it (policy test); its outside face is the control socket, whose
 * messages live in common/ (common/pc.h, common/engmsg.c) because the
 * checker, below the engine, is a client too. This header says what that
 * socket serves, and declares the one function cli/ calls: the "would this
 * be allowed?" of `portcullis policy test`; everything else, the packet
 * parser too, is in engine/engine_int.h. */
#ifndef PC_ENGINE_H
#define PC_ENGINE_H

/* ======================================================================
 * Control socket: <run_dir>/engine.sock, SOCK_SEQPACKET. Typed, versioned,
 * length-checked messages (common/pc.h, "engine.sock"; common/engmsg.c): a
 * request is a header whose type is status, reload or metrics; the reply is
 * the matching typed reply or an error (code, message). The status reply
 * carries the policy hash and whether a check runs as typed fields, and the
 * status object as JSON text for `portcullis status` (version, pid,
 * uptime_s, policy, queue_path, queues[...], flows, held, log{...},
 * dnsguard{...}, limits, quotas, check); metrics, Prometheus text 0.0.4.
 * Anyone who can open the socket may ask for status; only uid 0 may reload
 * (SO_PEERCRED). See docs/engine.md.
 * ====================================================================== */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"
#include "rules/rules.h"

/* ======================================================================
 * "Would this be allowed?" (engine/whatif.c; `portcullis policy test`,
 * in cli/, is its one caller): the packets of one connection or DNS query
 * of a sandbox judged by the engine's own decide_packet(), not a copy of
 * it, over a fresh DNS guard. Nothing is sent.
 * ====================================================================== */

struct whatif_req {
	const char *sandbox; /* its name in the policy */
	const char *target;  /* a host name (resolved through the guard first) or an address */
	uint16_t port;	     /* 53: the DNS query for target itself */
	uint8_t proto;	     /* IPPROTO_TCP or IPPROTO_UDP */
	const char *address; /* the address the answer for a host name gives (NULL: a public one) */
};

#define WHATIF_STEPS 6
/* One packet judged: what it was and the engine's decision on it. */
struct whatif_step {
	char what[320];
	bool allowed;  /* it passes (or is held) */
	bool held;     /* held until its ClientHello */
	bool vault;    /* allowed, through the vault (a secret is bound to its host) */
	bool recorded; /* the decision wrote a log record: rule and reason are its */
	char rule[96];
	char reason[640];
};

struct whatif_res {
	bool allowed; /* the last step passes and is not merely held */
	bool vault;
	char rule[96];	  /* the last step's record: the rule that allowed it */
	char reason[640]; /* ...or why it was refused */
	size_t n_steps;
	struct whatif_step steps[WHATIF_STEPS];
};

/* Judge req under cfg and pol. 0 and *out; PC_ENOENT (no such sandbox),
 * PC_EINVAL (a request no packet can carry), PC_ENOMEM. */
int engine_whatif(const struct config *cfg, const struct policy *pol, const struct whatif_req *req,
		  struct whatif_res *out, struct pc_err *err);

#endif
