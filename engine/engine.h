/* engine: portcullisd, the verdict engine — the NFQUEUE loop, the
 * decision, held flows, DNS over TCP, the control socket. No other module
 * calls into it: its one outside face is the control socket, whose
 * messages live in common/ (common/pc.h, common/engmsg.c) because the
 * checker, below the engine, is a client too. This header says what that
 * socket serves; everything else, the packet parser too, is in
 * engine/engine_int.h. */
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

#endif
