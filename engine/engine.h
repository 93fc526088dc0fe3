/* engine: portcullisd, the verdict engine — the NFQUEUE loop, the
 * decision, held flows, DNS over TCP, the control socket. What other
 * modules use of it: the control socket protocol (the CLI). The rest,
 * the packet parser too, is in engine/engine_int.h. */
#ifndef PC_ENGINE_H
#define PC_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"
#include "nft/nft.h"

/* ======================================================================
 * Control socket: <run_dir>/engine.sock, SOCK_SEQPACKET. A request is one
 * message holding one word: "status", "reload" or "metrics" (a trailing
 * newline is ignored). The reply to "metrics" is Prometheus text (format
 * 0.0.4); to the others one message holding one JSON object:
 *   {"ok":true, ...}  or  {"ok":false,"error":"<text>"}
 * status: version, pid, uptime_s, policy, queue_path, queues[{num, queued,
 *   accepted, refused, dropped, kernel_dropped, user_dropped}], flows, held,
 *   log{sent, failed}, dnsguard{...}.
 * reload: {"ok":true,"policy":"sha256:..."} or the file:line:col error.
 * Anyone who can open the socket may ask for status; only uid 0 may reload
 * (SO_PEERCRED). See docs/engine.md.
 * ====================================================================== */

#endif
