/* logd internals: the record as a JSON line, the log writer (file, chain,
 * tree, sealing), the socket server, the syslog exporter, the witness
 * client, and the core's inputs read from files (keys, a log file, log
 * verify's anchors). The transparency-log core itself (Merkle tree, notes,
 * checkpoints, cosignatures, proofs, the verifier) is tlog/'s, without I/O.
 * Private to logd/ and its tests; other modules use logd.h only. */
#ifndef PC_LOGD_INT_H
#define PC_LOGD_INT_H

#include <stdatomic.h>
#include <sys/types.h>

#include "logd/logd.h"
#include "tlog/tlog.h"
#include "witness/witness.h"

/* ---- the record as a JSON line (ECS field names; docs/logd.md) ----------
 * logrec_json_format writes the record object without its hash member:
 *   {"event.sequence":N,"@timestamp":"...",...,"portcullis.prev":"<64 hex>"}
 * which is exactly the Merkle leaf's data. The line in the file appends
 * ,"event.hash":"<hex of the leaf hash>" before the closing brace (logs
 * written before ECS names say "seq", "prev", "hash": LOGREC_OLD_*).
 * extra (NULL for none) is inserted verbatim before the prev: further
 * members, each starting with a comma (logd's own log-segment records).
 * Returns the length written (no NUL counted) or <0 if buf is too small. */
#define LOGREC_JSON_MAX (6 * LOGWIRE_MAX + 2048) /* worst case: each byte a 6-byte escape */
/* The verifier must accept every line logd writes. */
_Static_assert(LOGREC_JSON_MAX <= TLOG_RECORD_JSON_MAX, "tlog's line limit is below logd's");
int logrec_json_format(const struct logrec *rec, uint64_t seq, uint64_t time_ms,
		       const uint8_t prev[32], const char *extra, char *buf, size_t len);
/* ---- ECS names and event codes (ad-ecs) --------------------------------- */
/* the ECS version the names follow (ecs.version of every record) */
#define LOGREC_ECS_VERSION "8.11.0"
enum logrec_field_kind { LOGF_STR, LOGF_NUM, LOGF_LIST /* comma separated */ };
/* s is NULL or "" for an absent field (the form leaves it out). */
typedef void (*logrec_field_fn)(void *ctx, const char *key, enum logrec_field_kind k, const char *s,
				uint64_t n);
/* The fields between @timestamp and message, the same for JSON and syslog. */
void logrec_fields(const struct logrec *rec, logrec_field_fn fn, void *ctx);
/* observer.hostname of every record from now on (logd sets it at start). */
void logrec_set_observer(const char *hostname);
/* ---- end ad-ecs ---------------------------------------------------------- */

/* RFC 3339 time of time_ms, to the millisecond, into out (24 characters
 * and a NUL): the date and time to the second formatted once a second per
 * thread (the JSON line and the syslog export, one per record each). */
void logrec_time_rfc3339(uint64_t time_ms, char out[25]);

/* The JSON string escape of s (without quotes) into buf; length or <0. */
int logrec_json_escape(const char *s, char *buf, size_t len);

/* The short DNS type name ("AAAA"; "TYPE<n>" when unnamed), in buf if needed. */
const char *logrec_dns_type_name(uint16_t t, char *buf, size_t len);

/* ---- the core's inputs from files (logd/tlog_files.c) --------------------
 * Key files: the private key (mode 0600) at path, the public key (0644)
 * at path.pub for auditors; a witness's public key. */
int note_key_load(const char *path, struct note_signer **out, struct pc_err *err);
int note_key_write(const char *path, const struct note_signer *s, struct pc_err *err);
int note_verifier_load(const char *path, struct note_verifier *out, struct pc_err *err);
int cosig_verifier_load(const char *path, struct cosig_verifier *out, struct pc_err *err);
/* logv_buffer over the file at path, mapped. */
int logv_file(struct logv *v, const char *path, unsigned flags, struct pc_err *err);

/* ---- display escaping (logd/escape.c; docs/logd.md "Display escaping") -- */

/* Does code point cp not print (and so must never reach a reader as it
 * is)? C0 controls, DEL, C1 controls, the bidi controls (U+061C, U+200E,
 * U+200F, U+202A-U+202E, U+2066-U+2069), U+2028 and U+2029. */
bool logesc_nonprinting(uint32_t cp);

/* How an escape is written: */
enum logesc_form {
	LOGESC_TEXT,	  /* \\ for a backslash, \u{XXXX} for a code point that
			   * does not print, \x{XX} for a byte that is not
			   * UTF-8 (log show, syslog's MSG) */
	LOGESC_SD,	  /* LOGESC_TEXT, and \" and \] (an RFC 5424 SD-PARAM) */
	LOGESC_JSON,	  /* inside a JSON string: \" \\ \n \t \r, \uxxxx,
			   * \ufffd for a byte that is not UTF-8 (syslog's
			   * JSON MSG; as common/json.c for ASCII) */
	LOGESC_JSON_LINE, /* a whole JSON line (log show --json): only the
			   * code points that do not print (\uxxxx) and bytes
			   * that are not UTF-8 (\ufffd) */
};

/* Append s[0..n) to o, every code point that does not print escaped, each
 * piece whole: a fixed buffer that fills keeps no half escape. */
void logesc_put(struct pc_buf *o, const char *s, size_t n, enum logesc_form f);

/* ---- reading lines back (logd/show.c) ----------------------------------- */

/* The short human form of a record line into out; length or <0. */
int logrec_human(const char *line, size_t len, char *out, size_t outlen);

/* ---- log show's filters and reader (logd/show_follow.c; ad-cli) --------- */

enum { LOGSHOW_ALLOWED = 1, LOGSHOW_REFUSED };
struct logshow_filter {
	const char *sandbox; /* NULL: any */
	const char *action;  /* event.action ("connect", "dns-query", ...); NULL: any */
	int outcome;	     /* 0 any, LOGSHOW_ALLOWED, LOGSHOW_REFUSED */
	char since[40];	     /* "" or an RFC 3339 UTC time: records at or after it */
};
/* --since ARG (a duration back from now_ms: 30s 10m 2h 7d, or a UTC time)
 * into f->since; PC_EINVAL. */
int logshow_filter_since(struct logshow_filter *f, const char *arg, uint64_t now_ms,
			 struct pc_err *err);
bool logshow_filter_active(const struct logshow_filter *f);
/* Does this line match? With a filter, only records can (no checkpoint). */
bool logshow_match(const struct logshow_filter *f, const char *line, size_t len);
/* Each line of path to line_fn (without its newline); follow: then each
 * line appended, across rotations, until SIGINT/SIGTERM. 0 or PC_EIO. */
int logshow_read(const char *path, bool follow,
		 void (*line_fn)(void *arg, const char *line, size_t len), void *arg,
		 struct pc_err *err);

/* When the file is forced to disk (docs/logd.md, "Durability").
 * Acknowledgements are always sent after write(2) returned, so a record
 * acknowledged survives logd being killed in either mode; the modes differ
 * on a crash of the machine itself. */
enum logd_fsync {
	LOGD_FSYNC_CHECKPOINT = 0, /* fdatasync with a checkpoint, at most once per
				      checkpoint interval (default) */
	LOGD_FSYNC_BATCH,	   /* fdatasync every batch before acknowledging it */
};

/* What the writer needs to know. Strings are borrowed for logw_open's call. */
struct logw_conf {
	const char *file;      /* the log file */
	uint32_t cp_records;   /* seal every this many records ... */
	uint32_t cp_ms;	       /* ... or this many ms after the first unsealed one */
	uint64_t rotate_bytes; /* rotate when the file reaches this size; 0 never */
	enum logd_fsync fsync;
	uid_t owner; /* owner of files logd creates ((uid_t)-1: leave) */
	gid_t group;
	/* earlier public keys (log.key.pub.<hash>, kept by keygen --force):
	 * with --new-segment, a file one of them verifies is set aside as
	 * sound (a key rotation), not as broken */
	const struct note_verifier *old_keys;
	size_t n_old_keys;
	/* -- lx-writer: anchors (issue 21) --
	 * Paths of signed checkpoint notes (this key's signature; others,
	 * such as a witness's cosignature, are ignored) that the file must be
	 * consistent with at start, besides the sidecar: a file shorter than
	 * one of them, or that disagrees with its root, is refused. A missing
	 * path is skipped (nothing anchored yet); one that does not verify is
	 * refused. */
	const char *const *anchors;
	size_t n_anchors;
};

/* The exporter's hooks: each record and checkpoint of a batch is staged
 * as it is formatted; done() says whether the batch reached the file (only
 * then may it leave the machine: the file is always written first). */
struct logw_export {
	void (*stage)(void *ctx, const struct logrec *rec, uint64_t seq, uint64_t time_ms,
		      const uint8_t hash[MERKLE_HASH]);
	void (*stage_checkpoint)(void *ctx, const char *note, size_t len);
	void (*done)(void *ctx, bool written);
	void *ctx;
};

struct logw;

/* Open (or create) the log file and make it ready to append: an existing
 * file is verified in full with the signer's public key and the tree, seq
 * and chain continue from it; a file that does not verify is refused with
 * the bad line named, unless new_segment (a reason) is given — then the
 * file is moved aside and a new one starts with a log-segment record saying
 * why. signer is borrowed for the writer's life. */
int logw_open(const struct logw_conf *conf, const struct note_signer *signer,
	      const char *new_segment, struct logw **out, struct pc_err *err);

/* Buffer one record: assigns its seq and time (out: *seq). Nothing reaches
 * the file before logw_commit. */
int logw_append(struct logw *w, const struct logrec *rec, uint64_t *seq, struct pc_err *err);

/* Write every buffered record (and any checkpoint due) with one write(2),
 * then fsync per policy. On failure the file and the writer's state are
 * rolled back to before the batch and nothing of it may be acknowledged;
 * if even the rollback failed, logw_broken() is true and the process must
 * exit (the next start repairs the torn tail). */
int logw_commit(struct logw *w, struct pc_err *err);
bool logw_broken(const struct logw *w);
/* Bytes buffered for the next commit. */
size_t logw_pending(const struct logw *w);

/* Timer work: seal unsealed records whose interval ran out, rewrite the
 * latest checkpoint (re-signed with a fresh time) when idle. Call when
 * logw_next_tick_ms() is reached. */
int logw_tick(struct logw *w, struct pc_err *err);
/* Monotonic ms of the next logw_tick due. */
uint64_t logw_next_tick_ms(const struct logw *w);

/* Seal, close the current file (already renamed by logrotate, or renamed
 * here when rename_aside) and start a new one whose first record links to
 * the old file's last checkpoint. reason goes into that record. */
int logw_reopen(struct logw *w, const char *reason, bool rename_aside, struct pc_err *err);

/* The seq the next record will get. */
uint64_t logw_next_seq(const struct logw *w);
/* The writer's state after its last commit, for the metrics. */
struct logw_stats {
	uint64_t next_seq, tree_size, unsealed, file_bytes;
	uint64_t last_cp_ms; /* wall time of the last signed checkpoint, 0 if none */
	/* -- lx-writer -- rotations that failed (retried; the records of the
	 * batch that triggered them were written and acknowledged) */
	uint64_t rotate_failures;
};
void logw_stats(const struct logw *w, struct logw_stats *out);
/* What logw_open repaired or decided that the operator should hear about
 * ("" if nothing); borrowed. */
const char *logw_notice(const struct logw *w);
/* The newest checkpoint in the file (NUL-terminated; "" if none), its length in *len. */
const char *logw_sealed_note(const struct logw *w, size_t *len);

/* exp is copied; NULL detaches. */
void logw_set_export(struct logw *w, const struct logw_export *exp);

/* Seal what is unsealed and close; NULL is a no-op. 0 or <0 (the writer is
 * freed either way). */
int logw_close(struct logw *w, struct pc_err *err);

/* ---- the socket server ------------------------------------------------ */

struct logd_server_conf {
	uid_t allowed_uids[8]; /* SO_PEERCRED uids allowed to connect */
	size_t n_allowed;
	/* the sender each allowed uid is (portcullis.sender), by index;
	 * LOGREC_SENDER_NONE: ROOT for uid 0, else its records are refused */
	enum logrec_sender senders[8];
	unsigned max_clients;
	/* called on SIGHUP after the log file was reopened (may be NULL):
	 * main re-reads the syslog settings */
	void (*on_hup)(void *ctx);
	void *hup_ctx;
	struct logd_live *live; /* published after each round (may be NULL) */
	/* while gate(gate_ctx) is false, records are refused, not written
	 * (log.witness.required with no recent cosignature); NULL: open */
	bool (*gate)(void *ctx);
	void *gate_ctx;
};

struct logd_stats {
	uint64_t records;   /* acknowledged */
	uint64_t malformed; /* messages rejected (session ended) */
	uint64_t refused;   /* connections refused by SO_PEERCRED */
	uint64_t write_errors;
	/* records refused by the sender policy (session ended) */
	uint64_t refused_records;
};

/* What the server thread publishes after each round for the control
 * thread's metrics (logd/metrics.c); plain atomics, no lock. */
struct logd_live {
	_Atomic uint64_t records, malformed, refused, write_errors, clients;
	_Atomic uint64_t next_seq, tree_size, unsealed, file_bytes, last_cp_ms;
	_Atomic uint64_t start_ms;	  /* wall time logd started serving */
	_Atomic uint64_t refused_records; /* the sender policy said no */
	_Atomic uint64_t rotate_failures; /* logw_stats.rotate_failures */
	_Atomic uint64_t pledges_held;	  /* docs/logd.md "Pledges" */
	_Atomic uint64_t pledges_written; /* ... written, not redeemed */
};
/* The reply to "metrics" on the control socket (pc_ctl_fn; ctx is the
 * struct logd_live the server publishes into). */
char *logd_metrics(void *ctx, const char *req);

/* Serve listen_fd until SIGTERM/SIGINT (or a fatal writer error). The
 * caller blocks SIGTERM, SIGINT and SIGHUP before calling (they are read
 * from a signalfd); SIGHUP reopens the log file (logrotate). Returns 0 on
 * a clean stop. stats (may be NULL) receives the counters. */
int logd_serve(int listen_fd, struct logw *w, const struct logd_server_conf *conf,
	       struct logd_stats *stats, struct pc_err *err);

/* ---- syslog export (logd/syslog.c) -------------------------------------- */

struct logx_conf {
	bool local;		/* to the local syslog socket ... */
	const char *local_path; /* ... at this path (/dev/log) */
	const char *remote;	/* "host:port" of a collector, or NULL/"" */
	bool tls;		/* RFC 5425, the collector's certificate verified */
	const char *ca;		/* CA bundle for it; NULL/"": the system's */
	uint32_t spool_records; /* per destination, while it is unreachable */
};

struct logx_stats {
	uint64_t sent, unsent, dropped;
};

struct logx;
/* Start one thread per destination (call after dropping privileges: the
 * threads must not exist when pc_privdrop runs). */
int logx_start(const struct logx_conf *c, struct logx **out, struct pc_err *err);
/* Check the settings (collector address, CA bundle) without starting. */
int logx_check(const struct logx_conf *c, struct pc_err *err);
/* The writer hooks that feed it (pass to logw_set_export). */
void logx_hooks(struct logx *x, struct logw_export *exp);
/* Give the threads up to flush_ms to send what is spooled, stop, free. */
void logx_stop(struct logx *x, int flush_ms, struct logx_stats *st);

/* ---- export off the packet path (lx-export: syslog.c, syslog_spool.c) ----
 * logx_retire: as logx_stop, without waiting: the threads get flush_ms to
 * send what they hold and free themselves (SIGHUP swaps exporters on the
 * server's thread, which must never wait on a collector). */
void logx_retire(struct logx *x, int flush_ms);

/* The longest message sent (bytes, without framing); a record whose syslog
 * form is longer goes cut to this size with a marker (logx_format_export). */
#define LOGX_MSG_MAX 16384
/* At most this many checkpoints wait per destination (docs/logd.md). */
#define LOGX_SPOOL_CPS 1024

/* The record as exported: its full form when it fits in LOGX_MSG_MAX,
 * else cut to fit: long structured-data values end in "...", the SD gains
 * truncated="<length of the full form>" after hash, MSG ends with
 * " [truncated]". buf holds at least LOGX_MSG_MAX + 1. Length or <0. */
int logx_format_export(const struct logrec *r, uint64_t seq, uint64_t time_ms,
		       const uint8_t hash[MERKLE_HASH], const char *host, long pid, char *buf,
		       size_t len);

/* One destination's spool (syslog_spool.c; the caller locks): records
 * (seq > 0) at most max_records and about max_bytes, the oldest giving way
 * when full; checkpoints (seq 0, with their segment epoch and tree size)
 * apart, at most max_cps, of which only one a later checkpoint of the same
 * tree covers gives way (then, if none, the oldest). Messages leave in the
 * order pushed. */
struct logx_spool;
struct logx_spool_loss {
	uint64_t dropped, dropped_first, dropped_last; /* records, and their seqs */
	uint64_t cps_superseded, cps_dropped;	       /* checkpoints */
};
int logx_spool_new(uint64_t max_records, size_t max_bytes, size_t max_cps, struct logx_spool **out);
void logx_spool_free(struct logx_spool *s);
void logx_spool_push(struct logx_spool *s, uint64_t seq, uint64_t epoch, uint64_t cp_size,
		     const void *msg, uint32_t len);
/* Length of the oldest message, -1 if none. */
int logx_spool_next_len(const struct logx_spool *s);
/* Move the oldest message into buf (its seq, 0 for a checkpoint); length
 * or PC_EINVAL when empty or it does not fit. */
int logx_spool_pop(struct logx_spool *s, void *buf, size_t size, uint64_t *seq);
uint64_t logx_spool_count(const struct logx_spool *s);
/* What was lost since the last call (then zeroed); true if anything. */
bool logx_spool_take_loss(struct logx_spool *s, struct logx_spool_loss *out);
/* ---- end lx-export ---- */

/* The syslog facility by default (local0). */
#define LOGX_FACILITY 16

/* ad-ecs: the configured facility and enterprise number of the SD-ID
 * (defaults: LOGX_FACILITY, 0); set before the export starts. pen 0: no
 * SD-ID of ours, no structured data, the fields as a JSON MSG (issue 18:
 * never the documentation PEN 32473 by default). */
void logx_set_identity(int facility, uint32_t pen);
int logx_facility(void);
/* "portcullis@<pen>", or "" without one. */
const char *logx_sd_id(void);
/* The notice of what a spool lost (a spool-overflow message), written at
 * time_ms by host/pid. Length or <0. */
int logx_format_overflow(const struct logx_spool_loss *loss, uint64_t time_ms, const char *host,
			 long pid, char *buf, size_t len);

/* One record / checkpoint as an RFC 5424 message (logd/syslog_fmt.c). */
int logx_format_record(const struct logrec *r, uint64_t seq, uint64_t time_ms,
		       const uint8_t hash[MERKLE_HASH], const char *host, long pid, char *buf,
		       size_t len);
int logx_format_checkpoint(const char *note, size_t nlen, const char *host, long pid, char *buf,
			   size_t len);

/* ---- daemon setup (logd/setup.c) ---------------------------------------- */

struct config;

/* mkdir of the directory file is in (last component only), owned by
 * uid:gid when created ((uid_t)-1: leave). */
int logd_dir_ensure(const char *file, mode_t mode, uid_t uid, gid_t gid, struct pc_err *err);
/* Load the signing key at path; when missing and create, generate it
 * (named logd_key_default_name) and write it with its .pub. */
int logd_key_open(const char *path, bool create, struct note_signer **out, struct pc_err *err);
/* "<hostname>/portcullis-log" */
void logd_key_default_name(char *buf, size_t len);
/* The public keys keygen --force kept (<key>.pub.<hash>), up to max. */
size_t logd_old_keys_load(const char *key, struct note_verifier *out, size_t max);
/* Allow user's uid on the socket as sender (a missing user is logged, not
 * fatal); PC_EINVAL when that uid is already another sender (logd could
 * not tell their records apart). */
int logd_allow_user(struct logd_server_conf *sc, const char *user, enum logrec_sender sender,
		    struct pc_err *err);
/* The exporter's settings from the configuration (strings borrowed from cfg). */
void logd_xconf(const struct config *cfg, struct logx_conf *xc);

/* SIGHUP: re-read the syslog settings; if they changed, a new exporter
 * takes over (the old one gets a second to send what it holds). Runs on
 * the server's thread, which is the only one that touches x and w. */
struct logd_hup {
	const char *config;
	struct config *cfg;
	struct logx **x;
	struct logw *w;
	struct logwc *wc; /* the witness client, chained before the exporter (or NULL) */
};

void logd_on_hup(void *ctx);

/* ---- the sender policy, start-up checks, sidecar failures ----------------
 * (logd/record.c, logd/setup.c, logd/health.c; docs/logd.md "Who may write") */

/* May sender write rec (its action and verdict)? The table is in
 * docs/logd.md. */
bool logrec_sender_may(enum logrec_sender sender, const struct logrec *rec);

/* What a received message's control data says of its sender. Every
 * descriptor it carried (SCM_RIGHTS) is closed first, whatever the
 * answer: logd takes none. */
enum logd_cred {
	LOGD_CRED_UID,	/* *uid: the kernel's credentials of the message */
	LOGD_CRED_NONE, /* the kernel attached none when it was sent (pid 0
			 * with the overflow uid and gid: queued before the
			 * socket asked for them); the connection's own
			 * credentials stand for the sender */
	LOGD_CRED_BAD,	/* refuse the message (*why): descriptors attached,
			 * control data truncated (MSG_CTRUNC: the
			 * credentials may be among what was cut), no
			 * credentials at all, or anything else */
};
struct msghdr;
enum logd_cred logd_msg_cred(struct msghdr *mh, uid_t *uid, const char **why);
/* As logd_msg_cred, but a message with one SCM_RIGHTS of one or
 * LOGRING_FDS descriptors keeps them in fd[] (the rest -1) instead of
 * being refused for them: only a ring registration may carry them (the
 * memfd, or the memfd and its two bells), which the caller decides once
 * the message is parsed (and closes them otherwise). */
#define LOGRING_FDS 3
enum logd_cred logd_msg_cred_fd(struct msghdr *mh, uid_t *uid, const char **why,
				int fd[LOGRING_FDS]);

/* ---- the record ring (logd/client.c, logd/server.c; docs/logd.md
 * "The record ring") --------------------------------------------------------
 * A memfd the client creates, seals against shrinking and growing, and
 * passes once with a LOGWIRE_RING message; records are wire-form messages
 * back to back in a byte ring of LOGRING_DATA bytes after a header page.
 * Each index has one writer; the other side only reads it and bounds it. */
#define LOGRING_DATA	(512u << 10) /* a batch of 64 records of LOGWIRE_MAX fits */
#define LOGRING_HDR	4096u
#define LOGRING_SIZE	(LOGRING_HDR + LOGRING_DATA)
#define LOGRING_REG_LEN (LOGWIRE_HDR_LEN + 4) /* header + u32 LOGRING_DATA */
/* The ring's registration (the memfd rides with it) and the bell; the
 * type byte of a message already framed (logwire_next), -1 if none. */
int logwire_ring_encode(uint8_t *buf, size_t len);
int logwire_ring_decode(const uint8_t *buf, size_t len, struct pc_err *err);
int logwire_bell_encode(uint8_t *buf, size_t len);
int logwire_bell_decode(const uint8_t *buf, size_t len, struct pc_err *err);
int logwire_type(const uint8_t *buf, size_t len);
struct logring_hdr {
	/* the client's: bytes of whole records published (a record is
	 * written first, then this moves past it) */
	_Alignas(64) _Atomic uint64_t prod;
	/* the client's: 1 while it sleeps until logd rings the bell */
	_Atomic uint32_t prod_waiting;
	/* logd's: bytes copied out of the ring (space the client may reuse) */
	_Alignas(64) _Atomic uint64_t cons;
	/* logd's: seq of the last record acknowledged, then their count:
	 * the records of this ring in the file (written before acked) */
	_Atomic uint64_t ack_seq;
	_Atomic uint64_t acked;
	/* logd's: 1 while it sleeps until a bell comes on the socket */
	_Atomic uint32_t cons_waiting;
};

/* ---- pledges (logd/pledge.c; docs/logd.md "Pledges") ----------------------
 * Records logd holds, keyed by the sender's pid and the pledge's id, and
 * writes only if that process's sessions all end before a record redeems
 * them. PLEDGES_MAX: the engine owes at most DG_OWED_MAX records (65536),
 * each pledged once; a pledge's record is at most about 650 bytes (its
 * name 253), so PLEDGE_BYTES_MAX holds them all, and bounds what a
 * compromised engine's records of up to LOGWIRE_MAX bytes can take. */
#define PLEDGES_MAX	 65536u
#define PLEDGE_BYTES_MAX (48u << 20)
#define PLEDGE_MARKS_MAX 16384u
struct pledges;
struct pledge;
int pledges_new(struct pledges **out, struct pc_err *err);
void pledges_free(struct pledges *p);
/* Hold the record message rec (a pledge of pid, its id), copied. A mark
 * of its redeem already there: both are done, nothing held. 0, or
 * PC_ENOMEM: not held (the caller writes it). */
int pledges_hold(struct pledges *p, pid_t pid, uint64_t id, const uint8_t *rec, size_t len);
/* Past PLEDGES_MAX or PLEDGE_BYTES_MAX: the oldest pledge, taken out, for
 * the caller to write and free(); NULL once within both. */
struct pledge *pledges_over(struct pledges *p);
/* A record of pid redeems id: forget the pledge (true), or mark the id
 * for the pledge still to come (false). */
bool pledges_redeem(struct pledges *p, pid_t pid, uint64_t id);
/* Every session of pid ended: each pledge it still has, oldest first, to
 * write(), then forgotten with its marks; returns how many. */
size_t pledges_take(struct pledges *p, pid_t pid,
		    void (*write)(void *ctx, const uint8_t *rec, size_t len), void *ctx);
size_t pledges_held(const struct pledges *p);
/* The record message of a pledge pledges_hold handed back. */
const uint8_t *pledge_rec(const struct pledge *e, size_t *len);

/* Can user (uid uid) create and remove a file in the directory of file? A
 * real probe: a child drops to the user as pc_privdrop does for the daemon
 * and creates and removes one; uid (uid_t)-1: this process, as it is
 * (user only names it). 0; PC_ENOENT when the directory does not exist
 * yet; PC_EPERM with the directory, the user and the error in err. */
int logd_dir_writable_as(const char *file, const char *user, uid_t uid, struct pc_err *err);

/* A checkpoint sidecar could not be written (writer.c calls it): counted
 * for the metrics and said in the journal with the file and the reason.
 * err may be NULL (errnum then says why). */
void logd_sidecar_failed(const char *sidecar, int errnum, const struct pc_err *err);
/* Sidecar writes that failed since start. */
uint64_t logd_sidecar_errors(void);

/* log verify's anchors (struct logc_anchors, tlog/tlog.h): the --against
 * files and <log>.witnessed, each read and opened with key
 * (logd/tlog_files.c). */
int logc_anchors_load(struct logc_anchors *a, const struct note_verifier *key, const char *log,
		      const char *const *against, size_t n, struct pc_err *err);
/* logd's witness client (logd/witnessc.c): a thread of its own that sends
 * each durable checkpoint the writer exports, with its consistency proof,
 * and keeps the latest cosigned one in <file>.witnessed. */
struct logwc_conf {
	const char *address; /* "host:port" of the witness */
	const struct cosig_verifier *wkey;
	const struct note_verifier *logkey;
	const char *file; /* the log file */
	bool required;
	uint32_t max_lag_ms; /* required: refuse records when nothing was cosigned for this long */
	/* the log's newest checkpoint (logw_sealed_note), sent before logd
	 * serves: a witness that holds a history this log does not extend
	 * makes logwc_start fail (PC_ETAMPER). NULL: none. */
	const char *start_note;
	size_t start_len;
};
struct logwc;
int logwc_start(const struct logwc_conf *c, struct logwc **out, struct pc_err *err);
/* Hooks that feed the client and then next (copied; may be NULL). */
void logwc_hooks(struct logwc *c, const struct logw_export *next, struct logw_export *out);
/* true while records may be acknowledged (always, unless required). */
bool logwc_gate(void *ctx);
/* The witness's metrics (reachable, cosigned size and age, failures,
 * conflicts, refusing) into b; c may be NULL (no witness configured). */
struct pc_prom;
void logwc_metrics(struct logwc *c, struct pc_prom *b);
/* One line on the witness for "status" (c may be NULL); *bad set when it
 * is configured and unreachable, in conflict or refusing records. */
void logwc_status(struct logwc *c, char *buf, size_t len, bool *bad);
/* The control socket's "metrics": logd_metrics, then the witness's (ctx);
 * "status": a few lines for `portcullis log status`, the first word "ok"
 * or "warn". */
struct logd_metrics_ctx {
	struct logd_live *live;
	struct logwc *wc;
};
char *logd_metrics_all(void *ctx, const char *req);
void logwc_stop(struct logwc *c);
/* <file>.witnessed */
#define LOGWC_SUFFIX ".witnessed"

#endif
