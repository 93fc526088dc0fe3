/* The log writer: turns records into chained, hashed JSON lines, keeps the
 * Merkle tree, seals it with signed checkpoints, writes in batches with
 * rollback on failure, and starts new segments (new file, rotation,
 * operator request). The file format is in docs/logd.md. */
#include "logd/logd_int.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HASH_MEMBER ",\"" LOGREC_HASH_KEY "\":\""
#define LINE_TAIL   (sizeof(HASH_MEMBER) - 1 + 64 + 3) /* ,"event.hash":"<64 hex>"}\n */

/* Everything a failed batch must restore. */
struct wstate {
	uint64_t next_seq;
	uint8_t last_hash[MERKLE_HASH];
	struct merkle_tree tree;
	uint64_t since_cp;	    /* records not yet sealed */
	uint64_t unsealed_since_ms; /* monotonic time of the first of them */
	uint64_t last_cp_time;	    /* wall time of the last checkpoint */
	uint64_t size;		    /* file size */
};

struct logw {
	struct logw_conf conf;
	char path[PC_PATH_MAX];
	char sidecar[PC_PATH_MAX + 16];
	const struct note_signer *signer;
	struct merkle_hasher *h;
	int fd;
	struct wstate st, snap;
	bool in_batch, batch_cp, broken;
	bool reopening;		      /* a rotation is under way: its own commits do not rotate */
	struct pc_buf out;	      /* the batch's lines (the server commits past 4 MiB) */
	char cp_note[CHECKPOINT_MAX]; /* the last checkpoint, for the sidecar and links */
	size_t cp_len;
	char pending_note[CHECKPOINT_MAX]; /* the batch's checkpoint ... */
	size_t pending_len;
	char sealed_note[CHECKPOINT_MAX]; /* ... and the last one in the file */
	size_t sealed_len;
	uint64_t sidecar_ms; /* monotonic time the sidecar was last re-signed */
	uint64_t first_seq;  /* of the current file's first record */
	/* the checkpoints' origin: "<key>/<first_seq>" for a segment begun
	 * here; a file resumed keeps the one it has (tlog/origin.c) */
	char origin[NOTE_NAME_MAX];
	/* the checkpoint of the origin before it that this segment continues,
	 * named in each of its checkpoints (has_prev false: none) */
	struct checkpoint prev;
	uint64_t synced_ms;    /* monotonic time of the last fdatasync ... */
	uint64_t synced_bytes; /* ... and the file size it made durable */
	uint64_t released;     /* the page cache is released up to here */
	struct logw_export exp;
	char notice[1024];
	/* the newest checkpoint written but not yet exported: it leaves once
	 * the file is synced up to export_upto (export_durable) */
	char export_note[CHECKPOINT_MAX];
	size_t export_len;
	uint64_t export_upto;
	bool force_sync;       /* this commit syncs whatever the policy (segment starts) */
	bool bump_time;	       /* the next checkpoint is strictly newer than the last */
	bool no_sidecar;       /* writing a new segment under its temporary name */
	uint64_t last_time_ms; /* the time of the last record appended */
	uint64_t rotate_failures, rotate_retry_ms;
	const char *crash_at;		/* PORTCULLIS_LOGD_CRASH_AT: fault injection, tests only */
	char tmp_path[PC_PATH_MAX + 8]; /* <file>.new: a segment being begun */
	/* Segment records logw_open wrote before an exporter was attached
	 * (the first start's seq 1 among them): logw_set_export hands them
	 * over, so a collector sees every record the file has. */
	struct logw_unexported {
		uint64_t seq, time_ms;
		uint8_t hash[MERKLE_HASH];
		char reason[512], message[300];
	} unexported[4];
	size_t n_unexported;
};

/* Fault injection (docs/logd.md, "Rotation"): with PORTCULLIS_LOGD_CRASH_AT
 * set to a step's name, the process kills itself (SIGKILL: no cleanup, as
 * a crash would) on reaching that step, so tests can restart logd from
 * every intermediate state. Unset, it does nothing. */
static void crash_point(const struct logw *w, const char *step)
{
	if (w->crash_at && strcmp(w->crash_at, step) == 0)
		raise(SIGKILL);
}

/* A rename is only durable once its directory is synced. */
static int dir_sync(const struct logw *w)
{
	char dir[PC_PATH_MAX];
	int dfd, rc;

	pc_strlcpy(dir, w->path, sizeof(dir));
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	rc = fsync(dfd);
	close(dfd);
	return rc;
}

/* What the operator should hear about at start; several notes are joined. */
static void notice_add(struct logw *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notice_add(struct logw *w, const char *fmt, ...)
{
	size_t n = strlen(w->notice);
	va_list ap;

	if (n && n + 2 < sizeof(w->notice)) {
		memcpy(w->notice + n, "; ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(w->notice + n, sizeof(w->notice) - n, fmt, ap);
	va_end(ap);
}

/* Room for more bytes at out.p + out.len, written in place (a record is
 * formatted straight into the batch). */
static int buf_reserve(struct logw *w, size_t more, struct pc_err *err)
{
	if (pc_buf_reserve(&w->out, more) < 0)
		return pc_err_set(err, PC_ENOMEM, "log buffer: out of memory");
	return 0;
}

static void batch_begin(struct logw *w)
{
	if (w->in_batch)
		return;
	w->snap = w->st;
	w->in_batch = true;
	w->batch_cp = false;
	pc_buf_reset(&w->out);
}

/* Replace path with data: temp file, fdatasync, rename. The sidecar only
 * copies what the log holds, but a rename that reaches the disk before the
 * data (a crash, a file system gone read-only) leaves a sidecar that is not
 * a checkpoint, and `portcullis log verify` rightly refuses that. */
static int sidecar_write_do(struct logw *w, const char *data, size_t len, struct pc_err *err);

/* A failure, whoever the caller, is counted for the metrics and said with
 * the file and the reason (logd_sidecar_failed, logd/health.c). */
static int sidecar_write(struct logw *w, const char *data, size_t len, struct pc_err *err)
{
	struct pc_err e = {0};
	int rc = sidecar_write_do(w, data, len, &e);

	if (rc < 0) {
		logd_sidecar_failed(w->sidecar, 0, &e);
		if (err)
			*err = e;
	}
	return rc;
}

static int sidecar_write_do(struct logw *w, const char *data, size_t len, struct pc_err *err)
{
	char tmp[sizeof(w->sidecar) + 8];
	int fd, rc = PC_EIO;

	snprintf(tmp, sizeof(tmp), "%s.tmp", w->sidecar);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "writing %s", tmp);
	if (w->conf.owner != (uid_t)-1 && fchown(fd, w->conf.owner, w->conf.group) < 0) {
		pc_err_errno(err, PC_EIO, "chown %s", tmp);
		goto out;
	}
	if (write(fd, data, len) != (ssize_t)len || fdatasync(fd) < 0) {
		pc_err_errno(err, PC_EIO, "writing %s", tmp);
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		pc_err_errno(err, PC_EIO, "writing %s", tmp);
		goto out;
	}
	fd = -1;
	if (rename(tmp, w->sidecar) < 0) {
		pc_err_errno(err, PC_EIO, "renaming %s", tmp);
		goto out;
	}
	if (dir_sync(w) < 0) {
		pc_err_errno(err, PC_EIO, "syncing the directory of %s", w->sidecar);
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		unlink(tmp);
	return rc;
}

/* Sign a checkpoint of the current tree into w->cp_note. */
static int sign_current(struct logw *w, struct pc_err *err)
{
	struct checkpoint cp;
	uint64_t now = pc_now_real_ms();
	int n;

	memset(&cp, 0, sizeof(cp));
	pc_strlcpy(cp.origin, w->origin[0] ? w->origin : note_signer_verifier(w->signer)->name,
		   sizeof(cp.origin));
	cp.size = w->st.tree.size;
	if (w->prev.has_prev) {
		cp.has_prev = true;
		cp.prev_seg = w->prev.prev_seg;
		cp.prev_size = w->prev.prev_size;
		memcpy(cp.prev_root, w->prev.prev_root, MERKLE_HASH);
	}
	/* Never older than the last one, whatever the wall clock did: the
	 * verifier reads a checkpoint going back in time as a replay. */
	cp.time_ms = now > w->st.last_cp_time ? now : w->st.last_cp_time;
	/* A segment's first checkpoint is strictly newer than anything before
	 * it: the time tells which segment an older checkpoint (a stale
	 * sidecar, an anchor) belongs to (resume). */
	if (w->bump_time && cp.time_ms <= w->st.last_cp_time && w->st.last_cp_time)
		cp.time_ms = w->st.last_cp_time + 1;
	if (merkle_tree_root(w->h, &w->st.tree, cp.root) < 0)
		return pc_err_set(err, PC_EIO, "hashing failed");
	n = checkpoint_sign(w->signer, &cp, w->cp_note, sizeof(w->cp_note), err);
	if (n < 0)
		return n;
	w->cp_len = (size_t)n;
	w->st.last_cp_time = cp.time_ms;
	return 0;
}

/* Append a checkpoint line sealing every record so far to the batch. The
 * note is printable ASCII (names are checked, note.c), UTF-8 and newlines:
 * the JSON escaper writes only the newlines as \n. */
static int append_checkpoint(struct logw *w, struct pc_err *err)
{
	batch_begin(w);
	if (sign_current(w, err) < 0)
		return PC_EIO;
	pc_buf_puts(&w->out, "{\"checkpoint\":\"");
	pc_json_escape(&w->out, w->cp_note, w->cp_len);
	pc_buf_puts(&w->out, "\"}\n");
	if (w->out.err)
		return pc_err_set(err, PC_ENOMEM, "log buffer: out of memory");
	w->st.since_cp = 0;
	w->batch_cp = true;
	memcpy(w->pending_note, w->cp_note, w->cp_len + 1);
	w->pending_len = w->cp_len;
	/* not exported here: only once it is on disk (logw_commit) */
	return 0;
}

static int append_line(struct logw *w, const struct logrec *rec, const char *extra,
		       uint64_t *seq_out, struct pc_err *err)
{
	uint8_t leaf[MERKLE_HASH];
	uint64_t now = pc_now_real_ms();
	char *o;
	int n;

	if (w->st.next_seq > LOGSEQ_MAX)
		return pc_err_set(err, PC_EREFUSED,
				  "seq %llu would pass the largest seq %llu: refusing to write "
				  "(docs/logd.md, \"File format\")",
				  (unsigned long long)w->st.next_seq,
				  (unsigned long long)LOGSEQ_MAX);
	batch_begin(w);
	if (buf_reserve(w, LOGREC_JSON_MAX + LINE_TAIL + (extra ? strlen(extra) : 0), err) < 0)
		return PC_ENOMEM;
	o = w->out.p + w->out.len;
	n = logrec_json_format(rec, w->st.next_seq, now, w->st.last_hash, extra, o,
			       w->out.cap - w->out.len - LINE_TAIL);
	if (n < 0)
		return pc_err_set(err, PC_EINVAL, "record does not format");
	if (merkle_leaf(w->h, o, (size_t)n, NULL, 0, leaf) < 0)
		return pc_err_set(err, PC_EIO, "hashing failed");
	/* the closing brace gives way to the hash member */
	memcpy(o + n - 1, HASH_MEMBER, sizeof(HASH_MEMBER) - 1);
	merkle_hex(leaf, o + n - 1 + sizeof(HASH_MEMBER) - 1);
	memcpy(o + n - 1 + sizeof(HASH_MEMBER) - 1 + 64, "\"}\n", 3);
	if (merkle_tree_append(w->h, &w->st.tree, leaf) < 0)
		return pc_err_set(err, PC_EIO, "hashing failed");
	w->out.len += (size_t)n - 1 + LINE_TAIL;
	if (w->exp.stage)
		w->exp.stage(w->exp.ctx, rec, w->st.next_seq, now, leaf);
	w->last_time_ms = now;
	if (seq_out)
		*seq_out = w->st.next_seq;
	memcpy(w->st.last_hash, leaf, MERKLE_HASH);
	w->st.next_seq++;
	if (w->st.since_cp++ == 0)
		w->st.unsealed_since_ms = pc_now_mono_ms();
	if (w->st.since_cp >= w->conf.cp_records)
		return append_checkpoint(w, err);
	return 0;
}

int logw_append(struct logw *w, const struct logrec *rec, uint64_t *seq, struct pc_err *err)
{
	if (w->broken)
		return pc_err_set(err, PC_EIO, "the log file is in an unknown state");
	return append_line(w, rec, NULL, seq, err);
}

static void batch_abort(struct logw *w)
{
	w->st = w->snap;
	w->in_batch = false;
	pc_buf_reset(&w->out);
	if (w->exp.done)
		w->exp.done(w->exp.ctx, false);
}

static void rotate_if_due(struct logw *w);

/* A checkpoint leaves the machine only once the file holding it is on disk:
 * a collector must never hold a checkpoint that a power failure can take
 * back, or the next start would sign another tree of the same size (a
 * split view, seq numbers given twice). Of the checkpoints one sync makes
 * durable the newest goes: it covers the others, which are in the file.
 * Stages only; the caller's done() releases it. */
static void export_stage_durable(struct logw *w)
{
	if (!w->export_len || w->synced_bytes < w->export_upto)
		return;
	if (w->exp.stage_checkpoint)
		w->exp.stage_checkpoint(w->exp.ctx, w->export_note, w->export_len);
	w->export_len = 0;
}

/* The same outside a batch (after a sync of its own). */
static void export_durable(struct logw *w)
{
	if (w->in_batch || !w->export_len || w->synced_bytes < w->export_upto)
		return;
	export_stage_durable(w);
	if (w->exp.done)
		w->exp.done(w->exp.ctx, true);
}

/* Once durable, the log's pages leave the page cache (they are clean: no
 * byte is lost, nothing is less durable). The log is written once and read
 * again only by a start's verification, `log verify` and a witness client
 * catching up, so cached it only pushes out what the machine reads; and the
 * next batches are copied into pages just freed instead of pages never
 * used, which on a virtual machine the host must first back (bench/logd:
 * that copy was half of logd's CPU per record at a million records,
 * bench/report-notes.md "logd"). A page that holds the durable end is
 * kept: the next lines go into it. */
static void cache_release(struct logw *w)
{
	uint64_t upto = w->synced_bytes & ~(uint64_t)4095;

	if (w->synced_bytes < w->released) /* a new file since */
		w->released = 0;
	if (upto <= w->released)
		return;
	(void)posix_fadvise(w->fd, (off_t)w->released, (off_t)(upto - w->released),
			    POSIX_FADV_DONTNEED);
	w->released = upto;
}

static int synced_now(struct logw *w, struct pc_err *err)
{
	if (w->synced_bytes == w->st.size)
		return 0;
	if (fdatasync(w->fd) < 0)
		return pc_err_errno(err, PC_EIO, "syncing %s", w->path);
	w->synced_ms = pc_now_mono_ms();
	w->synced_bytes = w->st.size;
	cache_release(w);
	return 0;
}

int logw_commit(struct logw *w, struct pc_err *err)
{
	uint64_t now;
	bool sync;

	if (!w->in_batch)
		return 0;
	if (w->broken) {
		batch_abort(w);
		return pc_err_set(err, PC_EIO, "the log file is in an unknown state");
	}
	/* Checkpoint policy: sync with a checkpoint, at most once an interval
	 * (under load checkpoints come far more often than a disk can sync). */
	now = pc_now_mono_ms();
	sync = w->conf.fsync == LOGD_FSYNC_BATCH || w->force_sync ||
	       (w->batch_cp && now - w->synced_ms >= w->conf.cp_ms);
	w->force_sync = false;
	if (pc_write_all(w->fd, w->out.p, w->out.len) < 0 || (sync && fdatasync(w->fd) < 0)) {
		int werr = errno, terr = 0;

		/* Take back whatever part of the batch got in, so the file
		 * stays a sequence of whole lines. On a file system that went
		 * read-only under us (a disk error) that cannot be done: an
		 * ext4 error with errors=remount-ro fails the write in flight
		 * with EROFS, or with EIO when it aborted the journal first,
		 * and the rollback then meets the read-only file system
		 * (tests/faults/logd_readonly.sh has seen both). */
		if (werr != EROFS && ftruncate(w->fd, (off_t)w->snap.size) < 0)
			terr = errno ? errno : EIO;
		if (werr == EROFS || terr == EROFS) {
			/* Nothing more can be written, and holding the file
			 * would keep the admin from repairing it. Stop; a
			 * start once it is read-write verifies the file. */
			pc_err_set(err, PC_EIO,
				   "writing %s: %s: the log's file system went read-only; logd "
				   "stops and every record is refused until it is read-write "
				   "again and logd is started",
				   w->path, strerror(werr));
			w->broken = true;
			batch_abort(w);
			return PC_EIO;
		}
		if (terr) {
			/* neither written nor taken back: the admin reads that
			 * logd stops and why, not just the first error */
			pc_err_set(err, PC_EIO,
				   "writing %s: %s, and taking the batch back failed too: %s: the "
				   "file may end in part of a line; logd stops and every record is "
				   "refused until it starts again (a start cuts the torn line)",
				   w->path, strerror(werr), strerror(terr));
			w->broken = true;
		} else {
			errno = werr;
			pc_err_errno(err, PC_EIO, "writing %s", w->path);
		}
		batch_abort(w);
		return PC_EIO;
	}
	w->st.size += w->out.len;
	if (sync) {
		w->synced_ms = now;
		w->synced_bytes = w->st.size;
		cache_release(w);
	}
	w->in_batch = false;
	pc_buf_reset(&w->out);
	if (w->batch_cp) {
		memcpy(w->export_note, w->pending_note, w->pending_len + 1);
		w->export_len = w->pending_len;
		w->export_upto = w->st.size;
	}
	export_stage_durable(w);
	if (w->exp.done)
		w->exp.done(w->exp.ctx, true);
	if (w->batch_cp) {
		struct pc_err e;

		memcpy(w->sealed_note, w->pending_note, w->pending_len + 1);
		w->sealed_len = w->pending_len;
		/* The sidecar only ever names what is on disk: after a power
		 * failure it must not claim records the file lost (that would
		 * read as truncation). A stale sidecar only weakens the
		 * truncation check; the checkpoint itself is in the file. */
		if (!w->no_sidecar && w->synced_bytes == w->st.size &&
		    sidecar_write(w, w->sealed_note, w->sealed_len, &e) == 0)
			w->sidecar_ms = pc_now_mono_ms();
	}
	/* The batch is in the file: whatever the rotation does, it stands
	 * and is acknowledged. */
	rotate_if_due(w);
	return 0;
}

size_t logw_pending(const struct logw *w)
{
	return w->in_batch ? w->out.len : 0;
}

bool logw_broken(const struct logw *w)
{
	return w->broken;
}

uint64_t logw_next_seq(const struct logw *w)
{
	return w->st.next_seq;
}

void logw_stats(const struct logw *w, struct logw_stats *out)
{
	out->next_seq = w->st.next_seq;
	out->tree_size = w->st.tree.size;
	out->unsealed = w->st.since_cp;
	out->file_bytes = w->st.size;
	out->last_cp_ms = w->st.last_cp_time;
	out->rotate_failures = w->rotate_failures;
}

const char *logw_sealed_note(const struct logw *w, size_t *len)
{
	*len = w->sealed_len;
	return w->sealed_note;
}

const char *logw_notice(const struct logw *w)
{
	return w->notice;
}

void logw_set_export(struct logw *w, const struct logw_export *exp)
{
	if (exp)
		w->exp = *exp;
	else
		memset(&w->exp, 0, sizeof(w->exp));
	if (!w->exp.stage || !w->n_unexported)
		return;
	/* committed and synced by segment_record: they may leave now, with
	 * the checkpoint that sealed them */
	for (size_t i = 0; i < w->n_unexported; i++) {
		struct logrec rec = {.action = LOGREC_SEGMENT,
				     .reason = w->unexported[i].reason,
				     .message = w->unexported[i].message};

		w->exp.stage(w->exp.ctx, &rec, w->unexported[i].seq, w->unexported[i].time_ms,
			     w->unexported[i].hash);
	}
	w->n_unexported = 0;
	if (w->exp.stage_checkpoint && w->sealed_len && w->synced_bytes == w->st.size)
		w->exp.stage_checkpoint(w->exp.ctx, w->sealed_note, w->sealed_len);
	if (w->exp.done)
		w->exp.done(w->exp.ctx, true);
}

uint64_t logw_next_tick_ms(const struct logw *w)
{
	if (w->st.since_cp)
		return w->st.unsealed_since_ms + w->conf.cp_ms;
	return w->sidecar_ms + w->conf.cp_ms;
}

int logw_tick(struct logw *w, struct pc_err *err)
{
	uint64_t now = pc_now_mono_ms();

	if (w->st.since_cp) {
		if (now < w->st.unsealed_since_ms + w->conf.cp_ms)
			return 0;
		if (append_checkpoint(w, err) < 0) {
			batch_abort(w);
			return PC_EIO;
		}
		return logw_commit(w, err);
	}
	if (now < w->sidecar_ms + w->conf.cp_ms)
		return 0;
	/* Idle: re-sign the same tree with a fresh time, in the sidecar only,
	 * so a reader can tell the log is live and nothing was cut off. */
	w->sidecar_ms = now;
	if (synced_now(w, err) < 0)
		return PC_EIO;
	export_durable(w);
	if (sign_current(w, err) < 0)
		return PC_EIO;
	return sidecar_write(w, w->cp_note, w->cp_len, err);
}

/* The members a log-segment record adds: the previous file and its last
 * checkpoint (the link verification follows across files), the key, and
 * more (set-aside records: what was set aside, already JSON). */
static int segment_extra(struct logw *w, const char *prev_file, const char *prev_note,
			 const char *more, char *out, size_t len)
{
	char key[NOTE_NAME_MAX + 80], enote[2 * CHECKPOINT_MAX], efile[2 * PC_PATH_MAX];
	int n, kl;

	kl = note_verifier_format(note_signer_verifier(w->signer), key, sizeof(key));
	if (kl < 1)
		return PC_EINVAL;
	key[kl - 1] = '\0'; /* no newline */
	n = snprintf(out, len, ",\"portcullis.log.key\":\"%s\"", key);
	if (prev_file && *prev_file && logrec_json_escape(prev_file, efile, sizeof(efile)) >= 0)
		n += snprintf(out + n, len - (size_t)n, ",\"portcullis.log.previous.file\":\"%s\"",
			      efile);
	if (prev_note && *prev_note && logrec_json_escape(prev_note, enote, sizeof(enote)) >= 0)
		n += snprintf(out + n, len - (size_t)n,
			      ",\"portcullis.log.previous.checkpoint\":\"%s\"", enote);
	if (more && (size_t)n < len)
		n += snprintf(out + n, len - (size_t)n, "%s", more);
	return (size_t)n < len ? 0 : PC_EINVAL;
}

#define SEG_EXTRA_MAX (NOTE_NAME_MAX + 4 * CHECKPOINT_MAX + 6 * PC_PATH_MAX + 600)

/* The new segment continues the origin of prev_note (a checkpoint of this
 * key: the old file's last, or the anchor a recovery names): its
 * checkpoints say so, and a witness that holds that origin accepts the new
 * one only then. Without such a note (a log begun over nothing that
 * verifies) the segment continues nothing, and a witness that holds an
 * origin of this key refuses it. */
static void segment_prev(struct logw *w, const char *prev_note)
{
	struct checkpoint pc;
	uint64_t seg;

	memset(&w->prev, 0, sizeof(w->prev));
	if (!prev_note || !*prev_note ||
	    checkpoint_open(note_signer_verifier(w->signer), prev_note, strlen(prev_note), &pc,
			    NULL) < 0 ||
	    checkpoint_origin_seg(pc.origin, note_signer_verifier(w->signer)->name, &seg) < 0)
		return;
	w->prev.has_prev = true;
	w->prev.prev_seg = seg;
	w->prev.prev_size = pc.size;
	memcpy(w->prev.prev_root, pc.root, MERKLE_HASH);
}

/* A log-segment record and a checkpoint sealing it, committed and synced.
 * new_tree: the record begins a new file (tree restarts; seq and the hash
 * chain continue); else it goes on in the same tree (a set-aside record). */
static int segment_record(struct logw *w, bool new_tree, const char *reason, const char *prev_file,
			  const char *prev_note, const char *more, struct pc_err *err)
{
	struct logrec rec = {.action = LOGREC_SEGMENT, .reason = reason};
	char *extra = malloc(SEG_EXTRA_MAX);
	char msg[300];
	int rc = PC_EIO;

	if (!extra)
		return pc_err_set(err, PC_ENOMEM, "segment record: out of memory");
	if (segment_extra(w, prev_file, prev_note, more, extra, SEG_EXTRA_MAX) < 0) {
		rc = pc_err_set(err, PC_EINVAL, "segment record does not fit");
		goto out;
	}
	snprintf(msg, sizeof(msg), "%s: %s", new_tree ? "new log segment" : "records set aside",
		 reason);
	rec.message = msg;
	if (new_tree) {
		/* a new tree is a new origin: the witness sees each segment as
		 * its own append-only log, which starts at size 0 */
		if (checkpoint_origin_make(note_signer_verifier(w->signer)->name, w->st.next_seq,
					   w->origin, sizeof(w->origin), err) < 0) {
			rc = PC_EINVAL;
			goto out;
		}
		merkle_tree_init(&w->st.tree);
		w->st.since_cp = 0;
		w->first_seq = w->st.next_seq;
		w->bump_time = true;
		segment_prev(w, prev_note);
	}
	if (append_line(w, &rec, extra, NULL, err) < 0 || append_checkpoint(w, err) < 0) {
		w->bump_time = false;
		batch_abort(w);
		goto out;
	}
	w->bump_time = false;
	w->force_sync = true;
	rc = logw_commit(w, err);
	/* (a rotation stages its own once the segment is the log) */
	if (rc == 0 && !w->exp.stage && !w->no_sidecar &&
	    w->n_unexported < sizeof(w->unexported) / sizeof(w->unexported[0])) {
		struct logw_unexported *u = &w->unexported[w->n_unexported++];

		u->seq = w->st.next_seq - 1;
		u->time_ms = w->last_time_ms;
		memcpy(u->hash, w->st.last_hash, MERKLE_HASH);
		pc_strlcpy(u->reason, reason ? reason : "", sizeof(u->reason));
		pc_strlcpy(u->message, msg, sizeof(u->message));
	}
out:
	free(extra);
	return rc;
}

static int segment_start(struct logw *w, const char *reason, const char *prev_file,
			 const char *prev_note, const char *more, struct pc_err *err)
{
	return segment_record(w, true, reason, prev_file, prev_note, more, err);
}

/* Create path (it must not exist) for writing, owned by the log user. */
static int create_owned(struct logw *w, const char *path, struct pc_err *err)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);

	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "creating %s", path);
	if (w->conf.owner != (uid_t)-1 && fchown(fd, w->conf.owner, w->conf.group) < 0) {
		pc_err_errno(err, PC_EIO, "chown %s", path);
		close(fd);
		unlink(path);
		return PC_EIO;
	}
	return fd;
}

static int file_open_new(struct logw *w, struct pc_err *err)
{
	int fd = create_owned(w, w->path, err);

	if (fd < 0)
		return fd;
	/* The new name must survive a crash as well as the data. */
	if (dir_sync(w) < 0) {
		pc_err_errno(err, PC_EIO, "syncing the directory of %s", w->path);
		close(fd);
		unlink(w->path);
		return PC_EIO;
	}
	w->fd = fd;
	w->st.size = 0;
	/* the first checkpoint syncs, so the sidecar moves to this file */
	w->synced_ms = w->synced_bytes = 0;
	return 0;
}

/* path.<UTC time>-<tag>[.N]: where a closed file goes; tag is the seq of
 * its first record (or "broken", "quarantine"), so names sort by time and
 * say where in the sequence the file begins. */
static int aside_name(const char *path, const char *tag, char *out, size_t len)
{
	char ts[32];
	uint64_t now = pc_now_real_ms();
	struct stat st;

	pc_time_rfc3339(now, ts, sizeof(ts));
	/* 2026-11-29T14:02:13.123Z -> 20261129T140213Z */
	char compact[20] = {ts[0],  ts[1],  ts[2],  ts[3],  ts[5],  ts[6],  ts[8], ts[9], 'T',
			    ts[11], ts[12], ts[14], ts[15], ts[17], ts[18], 'Z',   '\0'};
	for (int i = 0; i < 100; i++) {
		int n = i ? snprintf(out, len, "%s.%s-%s.%d", path, compact, tag, i)
			  : snprintf(out, len, "%s.%s-%s", path, compact, tag);

		if (n < 0 || (size_t)n >= len)
			return PC_EINVAL;
		if (lstat(out, &st) < 0 && errno == ENOENT)
			return 0;
	}
	return PC_EEXIST;
}

static int seal(struct logw *w, struct pc_err *err)
{
	if (w->st.since_cp == 0 && w->sealed_len)
		return 0;
	if (append_checkpoint(w, err) < 0) {
		batch_abort(w);
		return PC_EIO;
	}
	return logw_commit(w, err);
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* Rotation, in an order a crash at any step survives (docs/logd.md,
 * "Rotation"; each step has a crash point for the tests):
 *   rotate-sealed        the old file sealed and synced, the sidecar names it
 *   rotate-new-created   <file>.new created
 *   rotate-new-written   the new segment's record and checkpoint in it, synced
 *   rotate-old-aside     the old file renamed aside (size rotation), dir synced
 *   rotate-new-in-place  <file>.new renamed to the log's name, dir synced
 *   rotate-sidecar       the sidecar names the new segment
 * Until rotate-new-in-place the old file is the log (a start removes a
 * stale <file>.new, or renames a complete one into place when the log's
 * name is free); a failure at any step before it undoes what was done and
 * leaves logd writing to the old file. */
static int reopen(struct logw *w, const char *reason, bool rename_aside, struct pc_err *err)
{
	char aside[PC_PATH_MAX + 64], prev_file[PC_PATH_MAX + 64];
	struct stat cur, onpath;
	struct logw *save = NULL;
	struct pc_buf out;
	int oldfd = w->fd, nfd = -1, rc = PC_EIO;
	bool aside_done = false, keep_tmp = false;

	if (w->broken)
		return pc_err_set(err, PC_EIO, "the log file is in an unknown state");
	if (seal(w, err) < 0 || synced_now(w, err) < 0)
		return PC_EIO;
	export_durable(w);
	if (sidecar_write(w, w->sealed_note, w->sealed_len, NULL) == 0)
		w->sidecar_ms = pc_now_mono_ms();
	crash_point(w, "rotate-sealed");
	if (fstat(oldfd, &cur) < 0)
		return pc_err_errno(err, PC_EIO, "stat %s", w->path);
	pc_strlcpy(prev_file, w->path, sizeof(prev_file));
	if (rename_aside) {
		char tag[24];

		snprintf(tag, sizeof(tag), "%llu", (unsigned long long)w->first_seq);
		if (aside_name(w->path, tag, aside, sizeof(aside)) < 0)
			return pc_err_set(err, PC_EEXIST, "no free name to move %s aside", w->path);
		pc_strlcpy(prev_file, aside, sizeof(prev_file));
	} else if (stat(w->path, &onpath) == 0) {
		if (onpath.st_ino == cur.st_ino && onpath.st_dev == cur.st_dev)
			return 0; /* not rotated: keep appending to the same segment */
		if (onpath.st_size != 0)
			return pc_err_set(err, PC_EEXIST,
					  "%s was replaced by a non-empty file that is not ours; "
					  "still writing to the old one",
					  w->path);
		/* logrotate's "create": an empty file, replaced below */
	}
	save = malloc(sizeof(*w));
	if (!save)
		return pc_err_set(err, PC_ENOMEM, "rotation: out of memory");
	memcpy(save, w, sizeof(*w));
	unlink(w->tmp_path);
	nfd = create_owned(w, w->tmp_path, err);
	if (nfd < 0)
		goto fail;
	crash_point(w, "rotate-new-created");
	w->fd = nfd;
	w->st.size = 0;
	w->synced_ms = w->synced_bytes = 0;
	/* Nothing of the new segment leaves the machine, and the sidecar does
	 * not move, before it is the log. */
	w->no_sidecar = true;
	memset(&w->exp, 0, sizeof(w->exp));
	rc = segment_start(w, reason, base_name(prev_file), save->sealed_note, NULL, err);
	w->no_sidecar = false;
	w->exp = save->exp;
	if (rc < 0)
		goto fail;
	rc = PC_EIO;
	crash_point(w, "rotate-new-written");
	if (rename_aside) {
		if (rename(w->path, aside) < 0) {
			pc_err_errno(err, PC_EIO, "moving %s to %s", w->path, aside);
			goto fail;
		}
		aside_done = true;
		if (dir_sync(w) < 0) {
			pc_err_errno(err, PC_EIO, "syncing the directory of %s", w->path);
			goto fail;
		}
		crash_point(w, "rotate-old-aside");
	}
	if (rename(w->tmp_path, w->path) < 0) {
		pc_err_errno(err, PC_EIO, "renaming %s to %s", w->tmp_path, w->path);
		goto fail;
	}
	if (dir_sync(w) < 0)
		/* the rename is done; a crash may still undo it, and a start
		 * handles either state */
		pc_log(PC_LOG_WARN, "syncing the directory of %s: %s", w->path, strerror(errno));
	crash_point(w, "rotate-new-in-place");
	close(oldfd);
	free(save);
	/* Now the new segment is the log: the sidecar and the collectors hear
	 * of it. */
	if (sidecar_write(w, w->sealed_note, w->sealed_len, NULL) == 0)
		w->sidecar_ms = pc_now_mono_ms();
	if (w->exp.stage) {
		struct logrec rec = {.action = LOGREC_SEGMENT, .reason = reason};
		char msg[300];

		snprintf(msg, sizeof(msg), "new log segment: %s", reason);
		rec.message = msg;
		w->exp.stage(w->exp.ctx, &rec, w->first_seq, w->last_time_ms, w->st.last_hash);
	}
	memcpy(w->export_note, w->sealed_note, w->sealed_len + 1);
	w->export_len = w->sealed_len;
	w->export_upto = w->st.size;
	export_stage_durable(w);
	if (w->exp.done)
		w->exp.done(w->exp.ctx, true);
	crash_point(w, "rotate-sidecar");
	return 0;
fail:
	if (nfd >= 0)
		close(nfd);
	if (aside_done && rename(aside, w->path) < 0) {
		/* The log's name is free and the old file aside: keep the new
		 * segment, complete, for the next start to put in place. */
		keep_tmp = true;
	}
	if (!keep_tmp)
		unlink(w->tmp_path);
	dir_sync(w);
	out = w->out;
	memcpy(w, save, sizeof(*w));
	w->out = out;
	pc_buf_reset(&w->out);
	if (keep_tmp)
		w->broken = true;
	free(save);
	return rc;
}

int logw_reopen(struct logw *w, const char *reason, bool rename_aside, struct pc_err *err)
{
	bool was = w->reopening;
	int rc;

	w->reopening = true;
	rc = reopen(w, reason, rename_aside, err);
	w->reopening = was;
	return rc;
}

/* After the batch that brought the file to rotate_bytes. A failure is
 * logged, counted and retried a second later; the file stays the log. */
static void rotate_if_due(struct logw *w)
{
	uint64_t now;
	struct pc_err e;

	/* not from the commits a reopen makes itself */
	if (w->reopening || !w->conf.rotate_bytes || w->st.size < w->conf.rotate_bytes)
		return;
	now = pc_now_mono_ms();
	if (now < w->rotate_retry_ms)
		return;
	if (logw_reopen(w, "rotation: the file reached log.rotate_bytes", true, &e) == 0)
		return;
	w->rotate_failures++;
	w->rotate_retry_ms = now + 1000;
	pc_log(PC_LOG_WARN,
	       "rotating %s failed (the records written stand and are acknowledged; retried in "
	       "a second): %s",
	       w->path, e.msg);
}

/* ---- start: what the file holds, and what vouches for it --------------- */

/* A signed checkpoint held outside the file: the sidecar, an anchor. */
struct anchor {
	struct checkpoint cp;
	char note[CHECKPOINT_MAX];
	char src[PC_PATH_MAX + 16];
};

/* 1 read, 0 absent, <0 not a checkpoint signed by this log's key. */
static int anchor_read(struct logw *w, const char *path, struct anchor *a, struct pc_err *err)
{
	char *text = NULL;
	size_t len = 0;
	struct pc_err e;
	int rc;

	memset(a, 0, sizeof(*a));
	if (pc_file_read(path, 16 * CHECKPOINT_MAX, &text, &len, &e) < 0)
		return e.code == PC_ENOENT ? 0 : pc_err_set(err, PC_EIO, "%s", e.msg);
	rc = checkpoint_open(note_signer_verifier(w->signer), text, len, &a->cp, &e);
	if (rc == 0 && len < sizeof(a->note))
		memcpy(a->note, text, len + 1); /* pc_file_read ends it with a NUL */
	free(text);
	if (rc < 0)
		return pc_err_set(err, PC_ETAMPER, "%s is not a checkpoint signed by %s: %s", path,
				  note_signer_verifier(w->signer)->name, e.msg);
	pc_strlcpy(a->src, path, sizeof(a->src));
	return 1;
}

/* The sidecar and the configured anchors, into a (room for 1 + n_anchors);
 * their count, or <0 for an anchor that is not one (fail closed: it was
 * configured to protect the log). A broken sidecar is only noted: it sits
 * beside the log and guards nothing an attacker could not delete. */
static int anchors_load(struct logw *w, struct anchor *a, struct pc_err *err)
{
	struct pc_err e;
	int n = 0, rc;

	rc = anchor_read(w, w->sidecar, &a[n], &e);
	if (rc > 0)
		n++;
	else if (rc < 0)
		notice_add(w, "ignoring %s: %s", w->sidecar, e.msg);
	for (size_t i = 0; i < w->conf.n_anchors; i++) {
		rc = anchor_read(w, w->conf.anchors[i], &a[n], err);
		if (rc < 0)
			return rc;
		n += rc;
	}
	return n;
}

/* The time of the file's first checkpoint (every segment has one right
 * after its first record); false if it has none that verifies. */
static bool first_cp_time(struct logw *w, uint64_t *out)
{
	static const char pfx[] = "{\"checkpoint\":\"";
	char *buf = malloc(LOGREC_JSON_MAX + SEG_EXTRA_MAX + 2 * CHECKPOINT_MAX);
	size_t cap = LOGREC_JSON_MAX + SEG_EXTRA_MAX + 2 * CHECKPOINT_MAX;
	char note[CHECKPOINT_MAX];
	struct checkpoint cp;
	bool found = false;
	ssize_t n;
	int fd;

	if (!buf)
		return false;
	fd = open(w->path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? pread(fd, buf, cap, 0) : -1;
	if (fd >= 0)
		close(fd);
	for (const char *p = buf, *end = buf + (n > 0 ? n : 0); p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t nl;

		if (!eol)
			break;
		if ((size_t)(eol - p) > sizeof(pfx) && memcmp(p, pfx, sizeof(pfx) - 1) == 0) {
			if (logv_checkpoint_unescape(p, (size_t)(eol - p), note, sizeof(note),
						     &nl) == 0 &&
			    checkpoint_open(note_signer_verifier(w->signer), note, nl, &cp, NULL) ==
				0) {
				*out = cp.time_ms;
				found = true;
			}
			break;
		}
		p = eol + 1;
	}
	free(buf);
	return found;
}

/* The highest seq any line of buf claims; at least floor. */
static uint64_t max_seq_buf(const char *p, const char *end, uint64_t floor)
{
	uint64_t best = floor;

	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		uint64_t x = 0;

		if (!eol)
			eol = end;
		size_t pl = logrec_seq_prefix(p, (size_t)(eol - p));

		if (pl && (size_t)(eol - p) > pl) {
			for (const char *q = p + pl;
			     q < eol && *q >= '0' && *q <= '9' && x < UINT64_MAX / 10 - 10; q++)
				x = x * 10 + (uint64_t)(*q - '0');
			/* a seq logd never gives is a forgery: it must not
			 * carry the next seq past the end */
			if (x > best && x <= LOGSEQ_MAX)
				best = x;
		}
		p = eol + 1;
	}
	return best;
}

/* The number of lines in buf (a last one without its newline counts). */
static uint64_t lines_buf(const char *p, const char *end)
{
	uint64_t n = 0;

	for (; p < end; n++) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));

		p = eol ? eol + 1 : end;
	}
	return n;
}

/* The same for a whole file, and its number of lines into *lines. */
static uint64_t max_seq_lines(const char *path, uint64_t floor, uint64_t *lines)
{
	uint64_t best = floor;
	struct stat st;
	char *map;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*lines = 0;
	if (fd < 0)
		return best;
	if (fstat(fd, &st) < 0 || st.st_size == 0) {
		close(fd);
		return best;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return best;
	best = max_seq_buf(map, map + st.st_size, floor);
	*lines = lines_buf(map, map + st.st_size);
	munmap(map, (size_t)st.st_size);
	return best;
}

struct sealed_seq {
	uint64_t index; /* the last record a checkpoint covers ... */
	uint64_t seq;	/* ... and its seq */
};

static int sealed_leaf(void *ctx, uint64_t index, uint64_t seq, const uint8_t leaf[MERKLE_HASH],
		       const char *line, size_t len)
{
	struct sealed_seq *ss = ctx;

	(void)leaf;
	(void)line;
	(void)len;
	if (index == ss->index)
		ss->seq = seq;
	return 0;
}

/* The seq of the last record a checkpoint of this key covers in path, if
 * the file verifies (else floor): lines nothing vouches for, which anyone
 * who can write the directory can plant, never move seq on (issue 32). */
static uint64_t sealed_max_seq(struct logw *w, const char *path, uint64_t floor)
{
	struct sealed_seq ss = {0};
	struct logv *v = NULL;
	uint64_t n = 0;

	if (logv_new(note_signer_verifier(w->signer), &v, NULL) < 0)
		return floor;
	if (logv_file(v, path, LOGV_TORN_OK, NULL) == 0 && logv_result(v)->has_cp)
		n = logv_result(v)->last_cp.size;
	logv_free(v);
	if (!n || logv_new(note_signer_verifier(w->signer), &v, NULL) < 0)
		return floor;
	ss.index = n - 1;
	logv_set_leaf_fn(v, sealed_leaf, &ss);
	if (logv_file(v, path, LOGV_TORN_OK, NULL) < 0)
		ss.seq = 0;
	logv_free(v);
	return ss.seq > floor ? ss.seq : floor;
}

/* The highest sealed seq in the files beside the log that verify (<file>.*:
 * earlier segments): a log begun again never gives a seq that a verified
 * segment holds. */
static uint64_t max_seq_beside(struct logw *w)
{
	char dir[PC_PATH_MAX], full[2 * PC_PATH_MAX + 2];
	const char *base = base_name(w->path);
	size_t bl = strlen(base);
	uint64_t best = 0;
	struct dirent *de;
	DIR *d;

	pc_strlcpy(dir, w->path, sizeof(dir));
	d = opendir(dirname(dir));
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, base, bl) != 0 || de->d_name[bl] != '.')
			continue;
		snprintf(full, sizeof(full), "%s/%s", dir, de->d_name);
		best = sealed_max_seq(w, full, best);
	}
	closedir(d);
	return best;
}

/* The offset just past line `line` (1-based) of the file; 0 for line 0. */
static int line_end(const char *path, uint64_t line, uint64_t *off, struct pc_err *err)
{
	struct stat st;
	const char *p, *end;
	char *map;
	int fd;

	*off = 0;
	if (!line)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
		if (fd >= 0)
			close(fd);
		return pc_err_errno(err, PC_EIO, "reading %s", path);
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return pc_err_errno(err, PC_EIO, "reading %s", path);
	for (p = map, end = map + st.st_size; p < end && line; line--) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));

		if (!eol)
			break;
		p = eol + 1;
	}
	*off = (uint64_t)(p - map);
	munmap(map, (size_t)st.st_size);
	return line ? pc_err_set(err, PC_EIO, "%s changed while it was read", path) : 0;
}

/* Is there a checkpoint line after line `line`? Then a failure there is in
 * what a signature covers, not in the unsealed tail. */
static bool cp_after(const char *path, uint64_t line)
{
	uint64_t off;
	struct stat st;
	bool found = false;
	char *map;
	int fd;

	if (line_end(path, line, &off, NULL) < 0)
		return true; /* cannot tell: treat as sealed (refuse) */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_size <= off) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return true;
	found = memmem(map + off, (size_t)st.st_size - off, "\n{\"checkpoint\":", 15) != NULL;
	munmap(map, (size_t)st.st_size);
	return found;
}

/* What was set aside. */
struct quarantine {
	char name[PC_PATH_MAX + 64];
	uint64_t bytes, lines, first_seq, max_seq;
	char sha[2 * crypto_hash_sha256_BYTES + 1];
};

/* Move the bytes of the log from off to its end into a quarantine file
 * (<file>.<UTC time>-quarantine, synced, its name synced), then cut the log
 * back to off (synced). A crash between the two leaves the tail in the log:
 * the next start sets it aside again. */
static int set_aside(struct logw *w, uint64_t off, struct quarantine *q, struct pc_err *err)
{
	uint8_t h[crypto_hash_sha256_BYTES];
	struct stat st;
	char *map = MAP_FAILED;
	int fd, qfd = -1, rc = PC_EIO;

	memset(q, 0, sizeof(*q));
	fd = open(w->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0) {
		pc_err_errno(err, PC_EIO, "opening %s", w->path);
		goto out;
	}
	if ((uint64_t)st.st_size <= off) {
		rc = 0;
		goto out;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		pc_err_errno(err, PC_EIO, "reading %s", w->path);
		goto out;
	}
	q->bytes = (uint64_t)st.st_size - off;
	for (const char *p = map + off, *end = map + st.st_size; p < end; q->lines++) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));

		if (!q->first_seq && logrec_seq_prefix(p, (size_t)(end - p)))
			q->first_seq = max_seq_buf(p, eol ? eol : end, 0);
		p = eol ? eol + 1 : end;
	}
	q->max_seq = max_seq_buf(map + off, map + st.st_size, 0);
	crypto_hash_sha256(h, (const unsigned char *)map + off, q->bytes);
	sodium_bin2hex(q->sha, sizeof(q->sha), h, sizeof(h));
	if (aside_name(w->path, "quarantine", q->name, sizeof(q->name)) < 0) {
		pc_err_set(err, PC_EEXIST, "no free name to set the tail of %s aside", w->path);
		goto out;
	}
	qfd = create_owned(w, q->name, err);
	if (qfd < 0)
		goto out;
	if (pc_write_all(qfd, map + off, q->bytes) < 0 || fdatasync(qfd) < 0) {
		pc_err_errno(err, PC_EIO, "writing %s", q->name);
		unlink(q->name);
		goto out;
	}
	if (dir_sync(w) < 0) {
		pc_err_errno(err, PC_EIO, "syncing the directory of %s", q->name);
		goto out;
	}
	crash_point(w, "setaside-copied");
	if (ftruncate(fd, (off_t)off) < 0 || fdatasync(fd) < 0) {
		pc_err_errno(err, PC_EIO, "cutting %s back to its last checkpoint", w->path);
		goto out;
	}
	rc = 0;
out:
	if (map != MAP_FAILED)
		munmap(map, (size_t)st.st_size);
	if (qfd >= 0)
		close(qfd);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The set-aside record's own members and its reason. */
static void quarantine_describe(const struct quarantine *q, uint64_t vouched, char *more,
				size_t mlen, char *why, size_t wlen)
{
	char ename[2 * PC_PATH_MAX];
	const char *bn = base_name(q->name);

	if (logrec_json_escape(bn, ename, sizeof(ename)) < 0)
		ename[0] = '\0';
	snprintf(
	    more, mlen,
	    ",\"portcullis.quarantine.file\":\"%s\",\"portcullis.quarantine.bytes\":%llu,"
	    "\"portcullis.quarantine.sha256\":\"%s\",\"portcullis.quarantine.seq\":\"%llu-%llu\"",
	    ename, (unsigned long long)q->bytes, q->sha, (unsigned long long)q->first_seq,
	    (unsigned long long)q->max_seq);
	snprintf(why, wlen,
		 "set aside at start: %llu lines (%llu bytes, sha256 %s, seq %llu-%llu) after "
		 "the %llu records the last checkpoint signed by this key covers were not "
		 "covered by a signature, so logd cannot vouch that it wrote them; moved to %.200s",
		 (unsigned long long)q->lines, (unsigned long long)q->bytes, q->sha,
		 (unsigned long long)q->first_seq, (unsigned long long)q->max_seq,
		 (unsigned long long)vouched, bn);
}

/* Take the writer's state from a file that verified (r). */
static int state_from(struct logw *w, const struct logv_result *r, struct pc_err *err)
{
	w->fd = open(w->path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	if (w->fd < 0)
		return pc_err_errno(err, PC_EIO, "opening %s", w->path);
	w->st.size = r->valid_bytes;
	w->first_seq = r->first_seq;
	w->st.next_seq = r->last_seq + 1;
	memcpy(w->st.last_hash, r->last_hash, MERKLE_HASH);
	w->st.tree = r->tree;
	w->st.since_cp = r->unsealed;
	w->st.unsealed_since_ms = pc_now_mono_ms();
	if (r->has_cp) {
		pc_strlcpy(w->origin, r->last_cp.origin, sizeof(w->origin));
		w->prev = r->last_cp; /* its previous line goes on in the next ones */
		w->st.last_cp_time = r->last_cp.time_ms;
		memcpy(w->sealed_note, r->last_cp_note, r->last_cp_len + 1);
		w->sealed_len = r->last_cp_len;
	}
	return 0;
}

#define RECOVERY                                                                                   \
	"restore the file from a backup; or, to go on with a new segment whose first record "      \
	"says what was lost, run portcullis-logd --new-segment REASON (docs/logd.md, "             \
	"\"Recovery\")"

/* The --new-segment path for a file that does not verify (or is refused):
 * set it aside as it is and begin a new segment that says why. */
static int new_segment_over_broken(struct logw *w, const char *new_segment, const char *complaint,
				   const struct logv_result *r, struct pc_err *err)
{
	const char *tag = "broken";
	char aside[PC_PATH_MAX + 64], why[900], first[24];
	struct logv *v2 = NULL;
	int rc;

	/* Signed by an earlier key (a key rotation)? Then it is a sound
	 * file that can only not be sealed any more. */
	for (size_t i = 0; i < w->conf.n_old_keys; i++) {
		logv_free(v2);
		v2 = NULL;
		if (logv_new(&w->conf.old_keys[i], &v2, err) < 0)
			return PC_ENOMEM;
		if (logv_file(v2, w->path, LOGV_TORN_OK, NULL) == 0 && logv_result(v2)->records) {
			r = logv_result(v2);
			snprintf(first, sizeof(first), "%llu", (unsigned long long)r->first_seq);
			tag = first;
			snprintf(why, sizeof(why),
				 "%.300s; the previous file is signed by the earlier key "
				 "%.130s+%08x",
				 new_segment, w->conf.old_keys[i].name, w->conf.old_keys[i].hash);
			break;
		}
	}
	if (tag != first)
		snprintf(why, sizeof(why), "%.300s; the previous file did not verify: %.500s",
			 new_segment, complaint);
	/* seq continues after the highest one in the file, so no seq is ever
	 * given twice; but lines nothing verifies move it on by at most as many
	 * as they are (what genuine records after the bad line need), never to
	 * a seq one of them claims (issue 32); the chain after what verified */
	{
		uint64_t base = r->records ? r->last_seq : 0, lines = 0,
			 claim = max_seq_lines(w->path, base, &lines);

		w->st.next_seq = (claim - base > lines ? base + lines : claim) + 1;
	}
	memcpy(w->st.last_hash, r->last_hash, MERKLE_HASH);
	if (aside_name(w->path, tag, aside, sizeof(aside)) < 0 || rename(w->path, aside) < 0) {
		rc = pc_err_errno(err, PC_EIO, "moving %s aside", w->path);
		goto out;
	}
	if ((rc = file_open_new(w, err)) < 0)
		goto out;
	notice_add(w, "moved %.200s to %.230s; new segment", w->path, aside);
	rc = segment_start(w, why, base_name(aside), r->has_cp ? r->last_cp_note : NULL, NULL, err);
out:
	logv_free(v2);
	return rc;
}

/* Continue an existing file. What a signed checkpoint of this key covers
 * (in the file, and consistent with the sidecar and the anchors) is
 * continued; what follows it, the unsealed tail, was not necessarily
 * written by logd (anyone who can write the file can append records that
 * chain), so it is set aside into a quarantine file and a record says so.
 * A file that a signature covers but does not verify, or that is shorter
 * than an anchor, is refused, unless the operator asked for a new segment. */
static int resume(struct logw *w, const char *new_segment, const struct anchor *anc, size_t nanc,
		  struct pc_err *err)
{
	const struct logv_result *r;
	const struct anchor *a = NULL;
	struct logv *v = NULL;
	struct quarantine q;
	struct pc_err ve;
	uint64_t t0 = 0, vouched, tail_off = 0, next_floor = 0;
	bool has_t0, aside = false;
	char more[3 * PC_PATH_MAX + 300], why[1200];
	int rc, vrc;

	/* An anchor speaks for this file if it is not older than the file's
	 * first checkpoint (segments begin strictly newer: an older one is
	 * of an earlier segment). The largest is checked. */
	has_t0 = first_cp_time(w, &t0);
	for (size_t i = 0; i < nanc; i++)
		if ((!has_t0 || anc[i].cp.time_ms >= t0) && (!a || anc[i].cp.size > a->cp.size))
			a = &anc[i];
	if (logv_new(note_signer_verifier(w->signer), &v, err) < 0)
		return PC_ENOMEM;
	rc = vrc = logv_file(v, w->path, LOGV_TORN_OK, &ve);
	r = logv_result(v);
	/* A failure followed by a checkpoint is in what a signature covers:
	 * refused. One in the unsealed tail is set aside below. */
	if (rc < 0 && (new_segment || !r->bad_line || cp_after(w->path, r->bad_line))) {
		if (new_segment) {
			rc = new_segment_over_broken(w, new_segment, ve.msg, r, err);
			goto out;
		}
		rc = pc_err_set(err, rc,
				"%s: %s; refusing to append to a log that does not verify "
				"(portcullis-logd --new-segment REASON sets it aside)",
				w->path, ve.msg);
		goto out;
	}
	vouched = r->has_cp ? r->last_cp.size : 0;
	if (a &&
	    (a->cp.size > vouched || (a->cp.size == vouched && vouched &&
				      memcmp(a->cp.root, r->last_cp.root, MERKLE_HASH) != 0))) {
		char ts[32];

		snprintf(
		    why, sizeof(why),
		    "%s: its checkpoints cover %llu records, but %s (signed %s) covers %llu%s: "
		    "the log was cut back, or replaced",
		    w->path, (unsigned long long)vouched, a->src,
		    pc_time_rfc3339(a->cp.time_ms, ts, sizeof(ts)), (unsigned long long)a->cp.size,
		    a->cp.size == vouched ? " with another root" : "");
		if (new_segment) {
			rc = new_segment_over_broken(w, new_segment, why, r, err);
			goto out;
		}
		rc = pc_err_set(err, PC_ETAMPER, "%s; refusing to start: " RECOVERY, why);
		goto out;
	}
	if (a && a->cp.size < vouched) {
		/* an older checkpoint of this file (a stale sidecar): the
		 * file's tree at its size must have its root */
		struct logv *v2 = NULL;
		uint64_t bad2;

		if (logv_new(note_signer_verifier(w->signer), &v2, err) < 0) {
			rc = PC_ENOMEM;
			goto out;
		}
		logv_expect(v2, &a->cp);
		rc = logv_file(v2, w->path, LOGV_TORN_OK, &ve);
		bad2 = logv_result(v2)->bad_line;
		logv_free(v2);
		/* the tail's own failure, if any, is the same line: only an
		 * earlier one (or one where there was none) is the anchor's */
		if (rc < 0 && (vrc == 0 || bad2 != r->bad_line)) {
			snprintf(why, sizeof(why), "%s: does not match %s: %s", w->path, a->src,
				 ve.msg);
			if (new_segment) {
				rc = new_segment_over_broken(w, new_segment, why, r, err);
				goto out;
			}
			rc = pc_err_set(err, PC_ETAMPER, "%s; refusing to start: " RECOVERY, why);
			goto out;
		}
	}
	if (r->has_cp && (rc = line_end(w->path, r->last_cp_line, &tail_off, err)) < 0)
		goto out;
	if (vrc < 0 || r->valid_bytes > tail_off) {
		/* whole lines after the last checkpoint: nothing vouches for
		 * them */
		if ((rc = set_aside(w, tail_off, &q, err)) < 0)
			goto out;
		aside = true;
		next_floor = q.max_seq;
		quarantine_describe(&q, vouched, more, sizeof(more), why, sizeof(why));
		notice_add(w, "%s", why);
	} else if (r->torn) {
		/* A line logd had not finished writing when it died: it was
		 * never acknowledged, so no one relies on it. */
		int fd = open(w->path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);

		if (fd < 0 || ftruncate(fd, (off_t)r->valid_bytes) < 0 || fdatasync(fd) < 0) {
			rc = pc_err_errno(err, PC_EIO, "cutting the torn last line of %s", w->path);
			if (fd >= 0)
				close(fd);
			goto out;
		}
		close(fd);
		notice_add(w,
			   "%.300s ended in an incomplete line of %llu bytes (logd died while "
			   "writing it; never acknowledged): removed",
			   w->path, (unsigned long long)r->torn_bytes);
	}
	if (aside && tail_off == 0) {
		/* nothing was vouched for: the log begins again, seq after
		 * every one claimed */
		unlink(w->path);
		w->st.next_seq = max_seq_beside(w);
		/* lines nothing vouches for may carry seq forward by as many
		 * as they are (what a genuine tail needs), never further */
		if (next_floor > w->st.next_seq + q.lines)
			next_floor = w->st.next_seq + q.lines;
		if (w->st.next_seq < next_floor)
			w->st.next_seq = next_floor;
		w->st.next_seq++;
		if ((rc = file_open_new(w, err)) < 0)
			goto out;
		rc = segment_start(w, why, NULL, NULL, more, err);
		goto out;
	}
	if (aside) {
		logv_free(v);
		v = NULL;
		if (logv_new(note_signer_verifier(w->signer), &v, err) < 0) {
			rc = PC_ENOMEM;
			goto out;
		}
		if ((rc = logv_file(v, w->path, 0, &ve)) < 0) {
			rc = pc_err_set(err, rc, "%s after setting its tail aside: %s", w->path,
					ve.msg);
			goto out;
		}
		r = logv_result(v);
	}
	if ((rc = state_from(w, r, err)) < 0)
		goto out;
	if (aside) {
		/* seq goes on after every seq the set-aside lines claim, so
		 * none is given twice (a collector may have seen them) */
		if (next_floor > w->st.next_seq - 1 + q.lines)
			next_floor = w->st.next_seq - 1 + q.lines;
		if (w->st.next_seq <= next_floor)
			w->st.next_seq = next_floor + 1;
		w->synced_ms = w->synced_bytes = 0;
		if ((rc = segment_record(w, false, why, NULL, NULL, more, err)) < 0)
			goto out;
	}
	if (new_segment) /* the file is fine: seal it, then set it aside */
		rc = logw_reopen(w, new_segment, true, err);
out:
	logv_free(v);
	return rc;
}

/* The log's name is free (or an empty file) and <file>.new holds a whole
 * new segment: a rotation was interrupted after the old file went aside.
 * Finish it. Otherwise a stale <file>.new is removed (it never was the log:
 * nothing of it was acknowledged or exported). */
static int finish_rotation(struct logw *w, struct pc_err *err)
{
	struct stat st, tst;
	struct logv *v = NULL;
	bool free_name, done = false;

	if (lstat(w->tmp_path, &tst) < 0)
		return 0;
	free_name = lstat(w->path, &st) < 0 || (S_ISREG(st.st_mode) && st.st_size == 0);
	if (free_name && logv_new(note_signer_verifier(w->signer), &v, err) == 0) {
		const struct logv_result *r;

		if (logv_file(v, w->tmp_path, 0, NULL) == 0 && (r = logv_result(v))->has_cp &&
		    r->unsealed == 0) {
			if (rename(w->tmp_path, w->path) < 0) {
				logv_free(v);
				return pc_err_errno(err, PC_EIO, "renaming %s to %s", w->tmp_path,
						    w->path);
			}
			done = true;
		}
		logv_free(v);
	}
	if (done)
		notice_add(w, "finished a rotation that was interrupted: %s is the new segment",
			   w->path);
	else if (unlink(w->tmp_path) == 0)
		notice_add(w, "removed %s: a rotation that did not finish (never the log)",
			   w->tmp_path);
	if (dir_sync(w) < 0)
		return pc_err_errno(err, PC_EIO, "syncing the directory of %s", w->path);
	return 0;
}

/* No file, or an empty one. A new log, unless a signed checkpoint of this
 * key says there was one: then the log was truncated or removed, and that
 * is refused (the operator decides, with --new-segment). */
static int begin(struct logw *w, const char *new_segment, const struct anchor *anc, size_t nanc,
		 bool exists, struct pc_err *err)
{
	const struct anchor *a = NULL;
	char why[900], ts[32];
	int rc;

	for (size_t i = 0; i < nanc; i++)
		if (anc[i].cp.size && (!a || anc[i].cp.size > a->cp.size))
			a = &anc[i];
	if (a && !new_segment)
		return pc_err_set(
		    err, PC_ETAMPER,
		    "%s is %s, but %s (signed %s) covers %llu records of it: the log "
		    "was truncated or removed; refusing to begin a new log over it: " RECOVERY,
		    w->path, exists ? "empty" : "missing", a->src,
		    pc_time_rfc3339(a->cp.time_ms, ts, sizeof(ts)), (unsigned long long)a->cp.size);
	if (a)
		snprintf(why, sizeof(why),
			 "%.300s; the log file was %s, but %.200s (signed %s) covered %llu records "
			 "of it",
			 new_segment, exists ? "empty" : "missing", base_name(a->src),
			 pc_time_rfc3339(a->cp.time_ms, ts, sizeof(ts)),
			 (unsigned long long)a->cp.size);
	else
		snprintf(why, sizeof(why), "%s", new_segment ? new_segment : "new log");
	if (exists)
		unlink(w->path); /* an empty file: nothing to keep */
	/* a log begun again gives no seq that a verified segment beside it or
	 * the signed checkpoint that showed the loss holds (its origin's
	 * first seq and size: seqs within a segment follow each other) */
	w->st.next_seq = max_seq_beside(w) + 1;
	if (a) {
		uint64_t seg = 0;

		if (checkpoint_origin_seg(a->cp.origin, note_signer_verifier(w->signer)->name,
					  &seg) == 0 &&
		    seg <= LOGSEQ_MAX && a->cp.size <= LOGSEQ_MAX - (seg ? seg : 1) &&
		    (seg ? seg : 1) + a->cp.size > w->st.next_seq)
			w->st.next_seq = (seg ? seg : 1) + a->cp.size;
	}
	if ((rc = file_open_new(w, err)) < 0)
		return rc;
	return segment_start(w, why, NULL, a ? a->note : NULL, NULL, err);
}

int logw_open(const struct logw_conf *conf, const struct note_signer *signer,
	      const char *new_segment, struct logw **out, struct pc_err *err)
{
	struct anchor *anc = NULL;
	struct logw *w;
	struct stat st;
	int rc, nanc;

	if (!conf || !conf->file || !signer || !out || !conf->cp_records || !conf->cp_ms)
		return pc_err_set(err, PC_EINVAL, "logw_open: missing configuration");
	w = calloc(1, sizeof(*w));
	if (!w)
		return pc_err_set(err, PC_ENOMEM, "log writer: out of memory");
	w->fd = -1;
	w->conf = *conf;
	w->conf.anchors = NULL; /* borrowed for this call only */
	w->conf.n_anchors = 0;
	w->signer = signer;
	w->crash_at = getenv("PORTCULLIS_LOGD_CRASH_AT");
	if (pc_strlcpy(w->path, conf->file, sizeof(w->path)) >= sizeof(w->path)) {
		rc = pc_err_set(err, PC_EINVAL, "log file path too long");
		goto fail;
	}
	w->conf.file = w->path;
	snprintf(w->sidecar, sizeof(w->sidecar), "%s.checkpoint", w->path);
	snprintf(w->tmp_path, sizeof(w->tmp_path), "%s.new", w->path);
	if ((rc = merkle_hasher_new(&w->h, err)) < 0)
		goto fail;
	w->st.next_seq = 1;
	w->sidecar_ms = pc_now_mono_ms();
	anc = calloc(1 + conf->n_anchors, sizeof(*anc));
	if (!anc) {
		rc = pc_err_set(err, PC_ENOMEM, "log writer: out of memory");
		goto fail;
	}
	if ((rc = finish_rotation(w, err)) < 0)
		goto fail;
	{
		struct logw_conf c = *conf;

		/* anchors_load reads conf.anchors (borrowed for this call) */
		w->conf.anchors = c.anchors;
		w->conf.n_anchors = c.n_anchors;
		nanc = anchors_load(w, anc, err);
		w->conf.anchors = NULL;
		w->conf.n_anchors = 0;
	}
	if (nanc < 0) {
		rc = nanc;
		goto fail;
	}
	if (lstat(w->path, &st) == 0 && st.st_size > 0)
		rc = resume(w, new_segment, anc, (size_t)nanc, err);
	else
		rc = begin(w, new_segment, anc, (size_t)nanc, lstat(w->path, &st) == 0, err);
	if (rc < 0)
		goto fail;
	free(anc);
	*out = w;
	return 0;
fail:
	free(anc);
	if (w->fd >= 0)
		close(w->fd);
	merkle_hasher_free(w->h);
	pc_buf_free(&w->out);
	free(w);
	return rc;
}

int logw_close(struct logw *w, struct pc_err *err)
{
	int rc = 0;

	if (!w)
		return 0;
	if (w->in_batch)
		rc = logw_commit(w, err);
	if (rc == 0 && !w->broken && w->fd >= 0) {
		rc = seal(w, err);
		if (rc == 0)
			rc = synced_now(w, err);
		if (rc == 0) {
			export_durable(w);
			if (w->sealed_len)
				sidecar_write(w, w->sealed_note, w->sealed_len, NULL);
		}
	}
	if (w->fd >= 0)
		close(w->fd);
	merkle_hasher_free(w->h);
	pc_buf_free(&w->out);
	free(w);
	return rc;
}
