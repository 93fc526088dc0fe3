/* logd: the verdict record, its wire form between the guard processes and
 * portcullis-logd, the client library they use to hand records over, and
 * the walk over a record line the sandbox summary uses. portcullis-logd
 * alone writes the log; the file's form is logd's own (logd/logd_int.h),
 * the Merkle tree, signed notes and checkpoints, the verifier, proofs and
 * the verdict are the transparency-log core's (tlog/tlog.h).
 *
 * "No record, no connection": a client that cannot hand a record to logd
 * and get it acknowledged must refuse the action the record describes. */
#ifndef PC_LOGD_H
#define PC_LOGD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/pc.h"

/* What happened (ECS event.action). */
enum logrec_action {
	LOGREC_CONNECT = 1,  /* a new flow was judged ("connect") */
	LOGREC_DNS_QUERY,    /* a DNS query was judged ("dns-query") */
	LOGREC_DNS_LEARN,    /* addresses learned from an answer ("dns-learn") */
	LOGREC_HTTP_REQUEST, /* a request through the vault ("http-request") */
	LOGREC_EXFIL,	     /* a placeholder seen where it must not go ("exfiltration") */
	LOGREC_CERT_ISSUE,   /* a certificate was issued ("cert-issue") */
	LOGREC_POLICY_LOAD,  /* a policy was put in force or rejected ("policy-load") */
	LOGREC_SANDBOX,	     /* sandbox started/stopped ("sandbox") */
	LOGREC_CHECK,	     /* a containment check ran ("check") */
	LOGREC_SEGMENT,	     /* logd itself: a new log segment starts ("log-segment") */
	LOGREC_ACTION_MAX
};

/* The guard's decision. */
enum logrec_verdict {
	LOGREC_NONE = 0, /* not a decision (learned, issued, ...) */
	LOGREC_ALLOWED,
	LOGREC_REFUSED,
};

/* Who handed logd a record (portcullis.sender): set by logd from the
 * kernel's credentials of the message (SCM_CREDENTIALS), mapped to the
 * configured users; never on the wire, never taken from the client
 * (logrec_encode leaves it out, logrec_decode leaves it LOGREC_SENDER_NONE).
 * What each sender may write is logd's policy (docs/logd.md, "Who may
 * write"). */
enum logrec_sender {
	LOGREC_SENDER_NONE = 0, /* not known: the field is left out */
	LOGREC_SENDER_ENGINE,	/* engine.user: portcullisd and its DNS guard */
	LOGREC_SENDER_VAULT,	/* vault.user: portcullis-vault */
	LOGREC_SENDER_ROOT,	/* uid 0: the CLI, a daemon before its privilege drop */
	LOGREC_SENDER_LOGD,	/* logd itself (log-segment records) */
	LOGREC_SENDER_MAX
};

/* One record as a client fills it. Strings are borrowed for the duration of
 * logc_send() (which copies them); NULL or "" means absent. seq and
 * @timestamp are assigned by logd, never taken from the client. */
struct logrec {
	enum logrec_action action;
	enum logrec_verdict verdict;
	const char *sandbox;
	const char *policy;	 /* "sha256:..." of the policy in force */
	const char *reason;	 /* event.reason: "not on the allow list" */
	const char *rule;	 /* rule.name: "agent-1/allow[0]" */
	struct pc_endpoint src;	 /* source.ip/port (family 0: absent) */
	struct pc_endpoint dst;	 /* destination.ip/port */
	uint8_t transport;	 /* IPPROTO_TCP/UDP/ICMP/...; 0 absent */
	const char *domain;	 /* destination.domain */
	const char *dns_name;	 /* dns.question.name */
	uint16_t dns_type;	 /* dns.question.type (RR type number) */
	const char *dns_answers; /* learned addresses, comma separated */
	const char *sni;	 /* tls.client.server_name */
	const char *http_method; /* http.request.method */
	const char *http_path;	 /* url.path (never the query string) */
	uint16_t http_status;	 /* http.response.status_code */
	const char *secrets;	 /* names injected, comma separated; never values */
	const char *message;	 /* free text for the human form (no secrets!) */
	/* event.code, set where the sender decides (one of logd/reason.c's
	 * codes; logd refuses another); NULL: logd derives it from reason,
	 * as for the clients that predate it */
	const char *code;
	const char *dns_rcode; /* dns.response_code the guard answered ("REFUSED") */
	/* portcullis.dns.ttl: how long (s) the guard keeps what it learned
	 * from this answer (the longest of its addresses, clamped to
	 * dns.ttl_min..dns.ttl_max); 0 absent. What `log audit` needs to
	 * know when a learned address expired (docs/logd.md, "Audit"). */
	uint32_t dns_ttl;
	/* A refused held flow (docs/spec.md H1-H13, S23): what the guard saw
	 * of its bytes, as one of logrec_held_names ("client-hello" naming
	 * sni, "not-tls", "timeout", ...; portcullis.held.bytes), and how
	 * long it had been held (portcullis.held.ms, from its SYN). A quota
	 * refusal (S14, S23): the share of the table that was full
	 * (portcullis.quota). What `log audit` judges them by; 0/NULL absent. */
	const char *held_bytes;
	uint32_t held_ms;
	uint32_t quota;
	/* Pledges (docs/logd.md, "Pledges"): a deferred DNS query's record,
	 * handed over before the query leaves (logc_pledge) with pledge its
	 * id, is held by logd, not written, and written only if every session
	 * of its engine process ends before a record with redeems naming that
	 * id arrives. Never in the file; 0 absent; not both in one record. */
	uint64_t pledge, redeems;
	/* set by logd only (above) */
	enum logrec_sender sender;
};

/* ---- wire form (SOCK_SEQPACKET, one record per message) ----------------
 * Defined in logd/wire.c; versioned, every length checked; a malformed
 * message is rejected by logd and counted, and ends that client's session.
 * A datagram carries one message, or a client's batch of record messages
 * back to back (one send and one wake-up of logd for the batch). The exact
 * layout is documented in docs/logd.md. */

#define LOGWIRE_VERSION	  1
#define LOGWIRE_MAX	  8192	/* largest record message */
#define LOGWIRE_DGRAM_MAX 16384 /* largest datagram: messages back to back */

/* Message types (byte 1 of the 8-byte header). */
enum logwire_type {
	LOGWIRE_RECORD = 1, /* client -> logd: one record */
	LOGWIRE_ACK = 2,    /* logd -> client: records written to the file */
	LOGWIRE_RING = 3,   /* client -> logd: its record ring (a memfd attached) */
	LOGWIRE_BELL = 4,   /* either way, header only: look at the ring */
};
#define LOGWIRE_HDR_LEN PC_MSG_HDR_LEN /* the framing shared by the local protocols */
#define LOGWIRE_ACK_LEN 20	       /* header + u32 count + u64 seq */

/* Encode rec into buf; returns bytes written or <0 (too large / invalid).
 * Strings must be valid UTF-8 without NUL; the encoding is canonical (absent
 * and zero values are omitted), so decode(encode(r)) re-encodes identically. */
int logrec_encode(const struct logrec *rec, uint8_t *buf, size_t len, struct pc_err *err);

/* A decoded record owns copies of its strings (freed by logrec_decoded_free). */
struct logrec_decoded {
	struct logrec rec;
	char *strings; /* one allocation backing every string of rec */
};
int logrec_decode(const uint8_t *buf, size_t len, struct logrec_decoded *out, struct pc_err *err);
void logrec_decoded_free(struct logrec_decoded *d);
/* As logrec_decode without allocating: the strings of *out point into
 * strbuf (at least len bytes; valid while strbuf is). logd's per-record path. */
int logrec_decode_into(const uint8_t *buf, size_t len, struct logrec *out, char *strbuf,
		       size_t strbuf_len, struct pc_err *err);

/* The length of the first message of a datagram (its header's byte count,
 * checked against len and LOGWIRE_MAX): where the next one starts. */
int logwire_next(const uint8_t *buf, size_t len, size_t *msg_len, struct pc_err *err);

/* The acknowledgement: count records of this connection, in the order sent,
 * are in the file; seq is the sequence number of the last of them. */
int logwire_ack_encode(uint32_t count, uint64_t seq, uint8_t *buf, size_t len);
int logwire_ack_decode(const uint8_t *buf, size_t len, uint32_t *count, uint64_t *seq,
		       struct pc_err *err);

/* ---- reading lines back (logd/show.c) ----------------------------------- */

enum logjson_type { LOGJSON_STRING, LOGJSON_ARRAY, LOGJSON_SCALAR };
/* key: raw (escaped) name without quotes; val: raw JSON text of the value
 * (strings with their quotes). <0 stops the walk. */
typedef int (*logjson_fn)(void *ctx, const char *key, size_t klen, enum logjson_type t,
			  const char *val, size_t vlen);
/* Walk the members of one flat JSON object (values: strings, scalars,
 * arrays of strings — what logd writes). 0, or PC_EPARSE if malformed. */
int logjson_each(const char *s, size_t n, logjson_fn fn, void *ctx);
/* Is a member's key (key, klen as logjson_fn has them) the string literal
 * name? Its length first, a constant: a walker compares every key of every
 * record with its names in turn, and most differ in length ("" name only
 * compiles for a literal, whose sizeof is its length and NUL). */
#define LOGJSON_KEY_IS(key, klen, name)                                                            \
	((klen) == sizeof("" name) - 1 && memcmp((key), (name), sizeof(name) - 1) == 0)

/* ---- reading the log live (logd/show.c, logd/show_follow.c; ad-top) ----
 * What `portcullis top` (cli/top.c) reads through: the same reader and
 * the same follower as `log show`, so a change of the record's fields is
 * made in one place. */

/* The fields of one record line a live view counts. */
struct logrec_brief {
	uint64_t seq;
	uint64_t time_ms;	     /* @timestamp as Unix ms; 0 when absent or unreadable */
	enum logrec_action action;   /* 0: an action this reader does not know */
	enum logrec_verdict verdict; /* LOGREC_NONE: not a decision */
	char sandbox[64];	     /* "" when the record names none */
	char verb[32];		     /* as `log show` prints it: "CONNECT", "DNS", ... */
	char target[512];	     /* "paste.example:443", "x.paste.example A", ... */
};
/* 0, or PC_EPARSE when the line is not a record (a checkpoint, or not
 * understood). Strings are display text (no control characters). */
int logrec_brief(const char *line, size_t len, struct logrec_brief *out);

/* A follower of the log file: hands over the whole lines appended, across
 * rotations (the path then names a new file, read from its start). */
struct logtail;
/* Open path; back > 0: start at the first line that begins in its last
 * back bytes (0: at its start). PC_EIO (unreadable), PC_ENOMEM. */
int logtail_open(const char *path, uint64_t back, struct logtail **out, struct pc_err *err);
/* Each whole line there is now to line_fn (without its newline); never
 * waits. final: a last line without its newline too (reading a finished
 * file). 0 or PC_EIO. */
int logtail_read(struct logtail *t, bool final,
		 void (*line_fn)(void *arg, const char *line, size_t len), void *arg,
		 struct pc_err *err);
void logtail_close(struct logtail *t);

/* ---- client library (engine, DNS guard, vault, CLI) --------------------- */

struct logc; /* one connection; not shared between threads */

/* Open a client for the logd socket at path. The connection is made now if
 * possible and re-made on later sends if logd was down. Never fails because
 * logd is down (sends will); fails only on bad arguments or no memory. */
int logc_open(const char *path, struct logc **out, struct pc_err *err);
void logc_close(struct logc *lc);

/* Hand a record to logd; does not wait for it to be written. 0: queued on
 * the socket; then logc_flush() tells whether logd acknowledged it. <0: not
 * handed over — refuse the action. The only wait: when the socket's buffer
 * is full (about 250 records sent and not yet read by logd), up to
 * LOGC_SEND_WAIT_MS for logd to catch up, then PC_EAGAIN. A connection that
 * broke is re-made once (logd restarted); the records sent on the old one
 * make the next logc_flush() fail. */
#define LOGC_SEND_WAIT_MS 100
int logc_send(struct logc *lc, const struct logrec *rec, struct pc_err *err);
/* As logc_send for n records, packed into as few datagrams as fit
 * LOGWIRE_DGRAM_MAX. sent[i] tells whether recs[i] was handed over (a
 * record that does not encode, or a datagram the socket refused, is not;
 * after a refused datagram nothing more is tried). Returns how many were
 * handed over; err says why one was not. */
size_t logc_send_batch(struct logc *lc, const struct logrec *const *recs, size_t n, bool *sent,
		       struct pc_err *err);

/* Hand logd rec as a pledge (rec->pledge its id, an allowed dns-query
 * record; docs/logd.md, "Pledges"): logd holds it and writes it only if
 * every session of this process ends before a record with redeems naming
 * the id arrives. Not acknowledged and not counted (logc_sent_total), and
 * no bell rung for it: in a ring it is published and read with the next
 * records, or at the session's end. 0: published (in the ring, or sent);
 * <0: not handed over (the caller must not let the query leave). */
int logc_pledge(struct logc *lc, const struct logrec *rec, struct pc_err *err);
/* For a client that may send nothing for a while (the engine's control
 * thread): notice logd's end without sending (what was unacknowledged is
 * then lost, as a flush reports), connect again if not connected, and say
 * how many connections this client has made: a new count is a new
 * session, maybe a new logd, which holds nothing of the old one's state
 * (its pledges). 0, or <0 when logd cannot be reached now. */
int logc_keepalive(struct logc *lc, uint64_t *conns, struct pc_err *err);
/* Is the connection still logd's (no hang-up, no error), by a poll of its
 * socket that sends, reads and reconnects nothing? false when none. */
bool logc_alive(const struct logc *lc);
/* Wait up to timeout_ms until logd has acknowledged (written to its file)
 * every record sent so far. 0: all acknowledged. <0: at least one was not;
 * the connection is reset and the caller refuses every action whose record
 * was sent since the last successful flush. */
int logc_flush(struct logc *lc, int timeout_ms, struct pc_err *err);

/* logc_flush without waiting, for an event loop: reads the acknowledgements
 * already queued; *all: every record sent so far is acknowledged (else wait
 * until logc_fd is readable and call it again; the caller bounds the wait,
 * and at its end calls logc_flush(lc, 0, err)). <0 as logc_flush: a record
 * was not acknowledged. logc_fd: the connection's socket, -1 if none (it
 * changes when the connection is re-made, on a send). */
int logc_flush_nb(struct logc *lc, bool *all, struct pc_err *err);
int logc_fd(const struct logc *lc);

/* Sequence number logd gave the last acknowledged record (0 if none). */
uint64_t logc_last_seq(const struct logc *lc);

/* Records of this client travel through a shared-memory ring from the
 * next connection on (one made already is closed: call it before sending;
 * the ring is registered by the first send, as the sender is then, and
 * logd refuses one registered by root): one wake-up of logd and one
 * of the client serve a batch, and neither sleeps while the other is
 * busy (docs/logd.md "The record ring"). Same contract for logc_send,
 * logc_send_batch and logc_flush; a full ring waits as a full socket did.
 * The engine's queue threads use it. 0 or PC_E*. */
int logc_use_ring(struct logc *lc, struct pc_err *err);

/* Pipelined use (the engine's queue threads: docs/engine.md "The
 * pipeline"): records counted over the client's life, across connections,
 * so that a caller with several batches awaiting acknowledgement knows
 * which are covered (acknowledgements are cumulative). After a batch's
 * logc_send_batch, logc_sent_total is the count its records are covered
 * at. logc_acked_total: how many are acknowledged, without waiting; PC_EIO
 * when records were lost with a connection since the last call (reported
 * once; every record sent and not covered before is then lost: the caller
 * refuses them all). logc_wait_acked sleeps until the acknowledgements
 * reach want, fd (if >= 0) is readable (*fd_ready), or timeout_ms pass,
 * having told logd to ring; 0 or PC_EIO (the loss is then reported by
 * logc_acked_total). logc_abandon gives up on every record not
 * acknowledged (a timeout: the caller refuses them) and closes the
 * connection; the next send makes a new one. */
uint64_t logc_sent_total(const struct logc *lc);
int logc_acked_total(struct logc *lc, uint64_t *acked, struct pc_err *err);
int logc_wait_acked(struct logc *lc, uint64_t want, int fd, int timeout_ms, bool *fd_ready,
		    struct pc_err *err);
void logc_abandon(struct logc *lc);

/* An event loop's wait for acknowledgements (the vault's workers), with or
 * without a ring. Before the loop sleeps with records unacknowledged,
 * logc_loop_arm tells logd to ring (as logc_wait_acked does) and gives the
 * descriptors to watch for reading: fds[0] the connection (acknowledgements
 * on the socket; with a ring, its end), fds[1] logd's bell (-1 without a
 * ring). *covered: nothing needs watching, for what logd acknowledged
 * already reaches want or a lost connection waits to be reported (the
 * caller asks logc_acked_total, which reports the loss first). Once
 * either is readable, logc_loop_woken(lc, fd) takes what woke the loop (a
 * ring's flag is then down: arm again to wait on); logc_acked_total then
 * says how far logd got. 0, or <0 when the connection is lost
 * (logc_acked_total reports the loss). */
int logc_loop_arm(struct logc *lc, uint64_t want, int fds[2], bool *covered, struct pc_err *err);
int logc_loop_woken(struct logc *lc, int fd, struct pc_err *err);
/* The descriptors logc_loop_arm gives, as they are now (-1: none): to stop
 * watching them. A connection made again has new ones. */
void logc_loop_fds(const struct logc *lc, int fds[2]);

/* Send one record and wait for its acknowledgement (CLI, rare events). */
int logc_send_sync(struct logc *lc, const struct logrec *rec, int timeout_ms, struct pc_err *err);

/* ECS names for actions and verdicts ("connect", "allowed"). */
const char *logrec_action_name(enum logrec_action a);
const char *logrec_verdict_name(enum logrec_verdict v);
/* event.code of a reason (logd/reason.c; docs/logd.md "Event codes"):
 * an index 0..LOGREC_REASON_CODES-1 and its code; "other" (the last) when
 * no code is known. Stable: SIEM rules and metrics labels use them. */
#define LOGREC_REASON_CODES 79
int logrec_reason_index(const char *reason);
const char *logrec_reason_code_at(int i);
const char *logrec_reason_code(const char *reason);
/* The index of code in the table, or -1 when it is none of them. */
int logrec_code_index(const char *code);
/* The event.code a record carries: its own (rec->code), else the one of
 * its reason; as an index (metrics) and as text (the record). */
int logrec_event_code_index(const struct logrec *rec);
/* portcullis.held.bytes: what a refused held flow's bytes were, the
 * class the engine saw (docs/logd.md, "Audit"); the index of name in
 * the table, or -1 when it is none of them. */
#define LOGREC_HELD_CLASSES 16
extern const char *const logrec_held_names[LOGREC_HELD_CLASSES];
int logrec_held_index(const char *name);
/* A DNS response code's name logd accepts for dns.response_code. */
bool logrec_dns_rcode_known(const char *rcode);
/* "engine", "vault", "root", "logd"; NULL for LOGREC_SENDER_NONE. */
const char *logrec_sender_name(enum logrec_sender s);

/* ---- control socket ------------------------------------------------------
 * <run_dir>/logd-control.sock (SOCK_SEQPACKET, root only): the request
 * "metrics" gets logd's metrics in Prometheus text format (records, rejected
 * messages, refused peers, write errors, the tree, the last checkpoint's
 * age; docs/operations.md, "Metrics"). Records never travel on it. */
#define LOGD_CTL_SOCK "logd-control.sock"

/* ---- the CLI ------------------------------------------------------------ */

/* `portcullis log verify|show|prove|keygen ...`: argv[0] is "log". Returns
 * a PC_EXIT_* code (docs/logd.md, portcullis(8)). */
int logd_cli(int argc, char **argv, const char *config);

/* `log verify FILE...` as the CLI runs it (the configuration's key, its
 * witness key and witnessed checkpoint, every file's chain and
 * checkpoints), its text written to out: what `portcullis log audit`
 * (cli/audit.c) runs before it replays a log. argv[0] is ignored, the
 * rest are the files (none: the configured log). Returns a PC_EXIT_* code
 * as `log verify` does. */
int logd_verify_files(FILE *out, int argc, char **argv, const char *config);

#endif
