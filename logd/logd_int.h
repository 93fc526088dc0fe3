/* portcullis-logd internals: the log writer (file, chain, tree, sealing),
 * the socket server, and the syslog exporter. Private to logd/ and its
 * tests; other modules use logd.h only. */
#ifndef PC_LOGD_DAEMON_H
#define PC_LOGD_DAEMON_H

#include <stdatomic.h>
#include <sys/types.h>

#include "logd/logd.h"

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
};
void logw_stats(const struct logw *w, struct logw_stats *out);
/* What logw_open repaired or decided that the operator should hear about
 * ("" if nothing); borrowed. */
const char *logw_notice(const struct logw *w);

/* exp is copied; NULL detaches. */
void logw_set_export(struct logw *w, const struct logw_export *exp);

/* Seal what is unsealed and close; NULL is a no-op. 0 or <0 (the writer is
 * freed either way). */
int logw_close(struct logw *w, struct pc_err *err);

/* ---- the socket server ------------------------------------------------ */

struct logd_server_conf {
	uid_t allowed_uids[8]; /* SO_PEERCRED uids allowed to connect */
	size_t n_allowed;
	unsigned max_clients;
	/* called on SIGHUP after the log file was reopened (may be NULL):
	 * main re-reads the syslog settings */
	void (*on_hup)(void *ctx);
	void *hup_ctx;
	struct logd_live *live; /* published after each round (may be NULL) */
};

struct logd_stats {
	uint64_t records;   /* acknowledged */
	uint64_t malformed; /* messages rejected (session ended) */
	uint64_t refused;   /* connections refused by SO_PEERCRED */
	uint64_t write_errors;
};

/* What the server thread publishes after each round for the control
 * thread's metrics (logd/metrics.c); plain atomics, no lock. */
struct logd_live {
	_Atomic uint64_t records, malformed, refused, write_errors, clients;
	_Atomic uint64_t next_seq, tree_size, unsealed, file_bytes, last_cp_ms;
	_Atomic uint64_t start_ms; /* wall time logd started serving */
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

/* SD-ID of our structured data (32473: the enterprise number RFC 5612
 * reserves for examples), and the syslog facility (local0). */
#define LOGX_SD_ID    "portcullis@32473"
#define LOGX_FACILITY 16

/* One record / checkpoint as an RFC 5424 message (logd/syslog_fmt.c). */
int logx_format_record(const struct logrec *r, uint64_t seq, uint64_t time_ms,
		       const uint8_t hash[MERKLE_HASH], const char *host, long pid, char *buf,
		       size_t len);
int logx_format_checkpoint(const char *note, size_t nlen, const char *host, long pid, char *buf,
			   size_t len);

/* ---- daemon setup (logd/setup.c) ---------------------------------------- */

struct pc_config;

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
/* Allow user's uid on the socket (a missing user is logged, not fatal). */
void logd_allow_user(struct logd_server_conf *sc, const char *user);
/* The exporter's settings from the configuration (strings borrowed from cfg). */
void logd_xconf(const struct pc_config *cfg, struct logx_conf *xc);

/* SIGHUP: re-read the syslog settings; if they changed, a new exporter
 * takes over (the old one gets a second to send what it holds). Runs on
 * the server's thread, which is the only one that touches x and w. */
struct logd_hup {
	const char *config;
	struct pc_config *cfg;
	struct logx **x;
	struct logw *w;
};

void logd_on_hup(void *ctx);

#endif
