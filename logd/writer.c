/* The log writer: turns records into chained, hashed JSON lines, keeps the
 * Merkle tree, seals it with signed checkpoints, writes in batches with
 * rollback on failure, and starts new segments (new file, rotation,
 * operator request). The file format is in docs/logd.md. */
#include "logd/logd_int.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LINE_TAIL 76 /* ,"hash":"<64 hex>"}\n */

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
	uint64_t sidecar_ms;   /* monotonic time the sidecar was last re-signed */
	uint64_t first_seq;    /* of the current file's first record */
	uint64_t synced_ms;    /* monotonic time of the last fdatasync ... */
	uint64_t synced_bytes; /* ... and the file size it made durable */
	struct logw_export exp;
	char notice[512];
};

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
	pc_strlcpy(cp.origin, note_signer_verifier(w->signer)->name, sizeof(cp.origin));
	cp.size = w->st.tree.size;
	/* Never older than the last one, whatever the wall clock did: the
	 * verifier reads a checkpoint going back in time as a replay. */
	cp.time_ms = now > w->st.last_cp_time ? now : w->st.last_cp_time;
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
	if (w->exp.stage_checkpoint)
		w->exp.stage_checkpoint(w->exp.ctx, w->cp_note, w->cp_len);
	return 0;
}

static int append_line(struct logw *w, const struct logrec *rec, const char *extra,
		       uint64_t *seq_out, struct pc_err *err)
{
	uint8_t leaf[MERKLE_HASH];
	uint64_t now = pc_now_real_ms();
	char *o;
	int n;

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
	memcpy(o + n - 1, ",\"hash\":\"", 9);
	merkle_hex(leaf, o + n - 1 + 9);
	memcpy(o + n - 1 + 9 + 64, "\"}\n", 3);
	if (merkle_tree_append(w->h, &w->st.tree, leaf) < 0)
		return pc_err_set(err, PC_EIO, "hashing failed");
	w->out.len += (size_t)n - 1 + LINE_TAIL;
	if (w->exp.stage)
		w->exp.stage(w->exp.ctx, rec, w->st.next_seq, now, leaf);
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

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int rotate_if_due(struct logw *w, struct pc_err *err);

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
	sync = w->conf.fsync == LOGD_FSYNC_BATCH ||
	       (w->batch_cp && now - w->synced_ms >= w->conf.cp_ms);
	if (write_all(w->fd, w->out.p, w->out.len) < 0 || (sync && fdatasync(w->fd) < 0)) {
		if (errno == EROFS) {
			/* The file system went read-only under us (a disk
			 * error): nothing more can be written, and holding the
			 * file would keep the admin from repairing it. Stop;
			 * a start once it is read-write verifies the file. */
			pc_err_set(err, PC_EIO,
				   "writing %s: Read-only file system: the log's file system went "
				   "read-only; logd stops and every record is refused until it is "
				   "read-write again and logd is started",
				   w->path);
			w->broken = true;
			batch_abort(w);
			return PC_EIO;
		}
		pc_err_errno(err, PC_EIO, "writing %s", w->path);
		/* Take back whatever part of the batch got in, so the file
		 * stays a sequence of whole lines. */
		if (ftruncate(w->fd, (off_t)w->snap.size) < 0)
			w->broken = true;
		batch_abort(w);
		return PC_EIO;
	}
	w->st.size += w->out.len;
	if (sync) {
		w->synced_ms = now;
		w->synced_bytes = w->st.size;
	}
	w->in_batch = false;
	pc_buf_reset(&w->out);
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
		if (w->synced_bytes == w->st.size &&
		    sidecar_write(w, w->sealed_note, w->sealed_len, &e) == 0)
			w->sidecar_ms = pc_now_mono_ms();
	}
	return rotate_if_due(w, err);
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
	if (w->synced_bytes != w->st.size) {
		if (fdatasync(w->fd) < 0)
			return pc_err_errno(err, PC_EIO, "syncing %s", w->path);
		w->synced_ms = now;
		w->synced_bytes = w->st.size;
	}
	if (sign_current(w, err) < 0)
		return PC_EIO;
	return sidecar_write(w, w->cp_note, w->cp_len, err);
}

/* The members a log-segment record adds: the previous file and its last
 * checkpoint (the link verification follows across files), and the key. */
static int segment_extra(struct logw *w, const char *prev_file, const char *prev_note, char *out,
			 size_t len)
{
	char key[NOTE_NAME_MAX + 80], enote[2 * CHECKPOINT_MAX], efile[2 * PC_PATH_MAX];
	int n, kl;

	kl = note_verifier_format(note_signer_verifier(w->signer), key, sizeof(key));
	if (kl < 1)
		return PC_EINVAL;
	key[kl - 1] = '\0'; /* no newline */
	n = snprintf(out, len, ",\"log.key\":\"%s\"", key);
	if (prev_file && *prev_file && logrec_json_escape(prev_file, efile, sizeof(efile)) >= 0)
		n += snprintf(out + n, len - (size_t)n, ",\"log.previous.file\":\"%s\"", efile);
	if (prev_note && *prev_note && logrec_json_escape(prev_note, enote, sizeof(enote)) >= 0)
		n += snprintf(out + n, len - (size_t)n, ",\"log.previous.checkpoint\":\"%s\"",
			      enote);
	return (size_t)n < len ? 0 : PC_EINVAL;
}

/* Start a new segment in the (new, empty) file open on w->fd: the tree
 * restarts, seq and the hash chain continue. */
static int segment_start(struct logw *w, const char *reason, const char *prev_file,
			 const char *prev_note, struct pc_err *err)
{
	struct logrec rec = {.action = LOGREC_SEGMENT, .reason = reason};
	char extra[NOTE_NAME_MAX + 4 * CHECKPOINT_MAX + 2 * PC_PATH_MAX + 200];
	char msg[300];

	if (segment_extra(w, prev_file, prev_note, extra, sizeof(extra)) < 0)
		return pc_err_set(err, PC_EINVAL, "segment record does not fit");
	snprintf(msg, sizeof(msg), "new log segment: %s", reason);
	rec.message = msg;
	merkle_tree_init(&w->st.tree);
	w->st.since_cp = 0;
	w->first_seq = w->st.next_seq;
	if (append_line(w, &rec, extra, NULL, err) < 0 || append_checkpoint(w, err) < 0) {
		batch_abort(w);
		return PC_EIO;
	}
	return logw_commit(w, err);
}

static int file_open_new(struct logw *w, struct pc_err *err)
{
	char dir[PC_PATH_MAX];
	int fd, dfd;

	fd = open(w->path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "creating %s", w->path);
	if (w->conf.owner != (uid_t)-1 && fchown(fd, w->conf.owner, w->conf.group) < 0) {
		pc_err_errno(err, PC_EIO, "chown %s", w->path);
		close(fd);
		unlink(w->path);
		return PC_EIO;
	}
	/* The new name must survive a crash as well as the data. */
	pc_strlcpy(dir, w->path, sizeof(dir));
	dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	w->fd = fd;
	w->st.size = 0;
	/* the first checkpoint syncs, so the sidecar moves to this file */
	w->synced_ms = w->synced_bytes = 0;
	return 0;
}

/* path.<UTC time>-<tag>[.N]: where a closed file goes; tag is the seq of
 * its first record (or "broken"), so names sort by time and say where in
 * the sequence the file begins. */
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

static int reopen(struct logw *w, const char *reason, bool rename_aside, struct pc_err *err)
{
	char aside[PC_PATH_MAX + 64], prev_note[CHECKPOINT_MAX], prev_file[PC_PATH_MAX + 64];
	struct stat cur, onpath;
	int oldfd = w->fd;

	if (w->broken)
		return pc_err_set(err, PC_EIO, "the log file is in an unknown state");
	if (seal(w, err) < 0)
		return PC_EIO;
	if (fstat(oldfd, &cur) < 0)
		return pc_err_errno(err, PC_EIO, "stat %s", w->path);
	pc_strlcpy(prev_file, w->path, sizeof(prev_file));
	if (rename_aside) {
		char tag[24];

		snprintf(tag, sizeof(tag), "%llu", (unsigned long long)w->first_seq);
		if (aside_name(w->path, tag, aside, sizeof(aside)) < 0)
			return pc_err_set(err, PC_EEXIST, "no free name to move %s aside", w->path);
		if (rename(w->path, aside) < 0)
			return pc_err_errno(err, PC_EIO, "moving %s to %s", w->path, aside);
		pc_strlcpy(prev_file, aside, sizeof(prev_file));
	} else if (stat(w->path, &onpath) == 0) {
		if (onpath.st_ino == cur.st_ino && onpath.st_dev == cur.st_dev)
			return 0; /* not rotated: keep appending to the same segment */
		if (onpath.st_size != 0)
			return pc_err_set(err, PC_EEXIST,
					  "%s was replaced by a non-empty file that is not ours; "
					  "still writing to the old one",
					  w->path);
		unlink(w->path); /* logrotate's "create": an empty file, ours to make */
	}
	memcpy(prev_note, w->sealed_note, w->sealed_len + 1);
	if (file_open_new(w, err) < 0) {
		w->fd = oldfd;
		return PC_EIO;
	}
	close(oldfd);
	{
		char *slash = strrchr(prev_file, '/');

		/* The old file is closed: without its segment record the new
		 * one is in no known state. Exit and let the next start sort
		 * it out (an empty file is simply begun again). */
		if (segment_start(w, reason, slash ? slash + 1 : prev_file, prev_note, err) < 0) {
			w->broken = true;
			return PC_EIO;
		}
	}
	return 0;
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

static int rotate_if_due(struct logw *w, struct pc_err *err)
{
	/* not from the commits a reopen makes itself */
	if (w->reopening || !w->conf.rotate_bytes || w->st.size < w->conf.rotate_bytes)
		return 0;
	return logw_reopen(w, "rotation: the file reached log.rotate_bytes", true, err);
}

/* Read the sidecar; a usable one is held to by the verification. */
static void sidecar_expect(struct logw *w, struct logv *v)
{
	struct checkpoint cp;
	char *text = NULL;
	size_t len = 0;

	if (pc_file_read(w->sidecar, CHECKPOINT_MAX, &text, &len, NULL) < 0)
		return;
	if (checkpoint_open(note_signer_verifier(w->signer), text, len, &cp, NULL) == 0)
		logv_expect(v, &cp);
	else
		snprintf(w->notice, sizeof(w->notice), "ignoring %s: not a valid checkpoint",
			 w->sidecar);
	free(text);
}

/* The highest seq any line of a (broken) file claims; at least floor. */
static uint64_t max_seq(const char *path, uint64_t floor)
{
	static const char pfx[] = "{\"seq\":";
	uint64_t best = floor;
	struct stat st;
	const char *p, *end;
	char *map;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

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
	for (p = map, end = map + st.st_size; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		uint64_t x = 0;

		if (!eol)
			eol = end;
		if ((size_t)(eol - p) > sizeof(pfx) && memcmp(p, pfx, sizeof(pfx) - 1) == 0) {
			for (const char *q = p + sizeof(pfx) - 1;
			     q < eol && *q >= '0' && *q <= '9' && x < UINT64_MAX / 10 - 10; q++)
				x = x * 10 + (uint64_t)(*q - '0');
			if (x > best)
				best = x;
		}
		p = eol + 1;
	}
	munmap(map, (size_t)st.st_size);
	return best;
}

/* Continue an existing file: verify it, take its state. A file that
 * does not verify is refused, unless the operator asked for a new segment:
 * then it goes aside as it is, and the new segment says why. */
static int resume(struct logw *w, const char *new_segment, struct pc_err *err)
{
	const struct logv_result *r;
	struct logv *v = NULL;
	char aside[PC_PATH_MAX + 64], why[900];
	struct pc_err ve;
	int rc;

	if (logv_new(note_signer_verifier(w->signer), &v, err) < 0)
		return PC_ENOMEM;
	sidecar_expect(w, v);
	rc = logv_file(v, w->path, LOGV_TORN_OK, &ve);
	r = logv_result(v);
	if (rc < 0 && !new_segment) {
		rc = pc_err_set(err, rc,
				"%s: %s; refusing to append to a log that does not verify "
				"(portcullis-logd --new-segment REASON sets it aside)",
				w->path, ve.msg);
		goto out;
	}
	if (rc < 0) {
		const char *tag = "broken";
		char first[24];

		/* Signed by an earlier key (a key rotation)? Then it is a
		 * sound file that can only not be sealed any more. */
		for (size_t i = 0; i < w->conf.n_old_keys; i++) {
			logv_free(v);
			if (logv_new(&w->conf.old_keys[i], &v, err) < 0)
				return PC_ENOMEM;
			if (logv_file(v, w->path, LOGV_TORN_OK, NULL) == 0 &&
			    logv_result(v)->records) {
				r = logv_result(v);
				snprintf(first, sizeof(first), "%llu",
					 (unsigned long long)r->first_seq);
				tag = first;
				snprintf(why, sizeof(why),
					 "%.300s; the previous file is signed by the earlier key "
					 "%.130s+%08x",
					 new_segment, w->conf.old_keys[i].name,
					 w->conf.old_keys[i].hash);
				break;
			}
		}
		if (tag != first) {
			r = logv_result(v);
			snprintf(why, sizeof(why),
				 "%.300s; the previous file did not verify: %.500s", new_segment,
				 ve.msg);
		}
		/* seq continues after the highest one in the file, so no seq
		 * is ever given twice; the chain after what verified */
		w->st.next_seq = max_seq(w->path, r->records ? r->last_seq : 0) + 1;
		memcpy(w->st.last_hash, r->last_hash, MERKLE_HASH);
		if (aside_name(w->path, tag, aside, sizeof(aside)) < 0 ||
		    rename(w->path, aside) < 0) {
			rc = pc_err_errno(err, PC_EIO, "moving %s aside", w->path);
			goto out;
		}
		if ((rc = file_open_new(w, err)) < 0)
			goto out;
		snprintf(w->notice, sizeof(w->notice), "moved %.200s to %.230s; new segment",
			 w->path, aside);
		{
			char *slash = strrchr(aside, '/');

			rc = segment_start(w, why, slash ? slash + 1 : aside,
					   r->has_cp ? r->last_cp_note : NULL, err);
		}
		goto out;
	}
	if (r->records == 0) {
		rc = pc_err_set(err, PC_ETAMPER, "%s has no records but is not empty", w->path);
		goto out;
	}
	w->fd = open(w->path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	if (w->fd < 0) {
		rc = pc_err_errno(err, PC_EIO, "opening %s", w->path);
		goto out;
	}
	if (r->torn) {
		/* A line logd had not finished writing when it died: it was
		 * never acknowledged, so no one relies on it. */
		if (ftruncate(w->fd, (off_t)r->valid_bytes) < 0) {
			rc = pc_err_errno(err, PC_EIO, "cutting the torn last line of %s", w->path);
			goto out;
		}
		snprintf(w->notice, sizeof(w->notice),
			 "%.300s ended in an incomplete line of %llu bytes (logd died while "
			 "writing it; never acknowledged): removed",
			 w->path, (unsigned long long)r->torn_bytes);
	}
	w->st.size = r->valid_bytes;
	w->first_seq = r->first_seq;
	w->st.next_seq = r->last_seq + 1;
	memcpy(w->st.last_hash, r->last_hash, MERKLE_HASH);
	w->st.tree = r->tree;
	w->st.since_cp = r->unsealed;
	w->st.unsealed_since_ms = pc_now_mono_ms();
	if (r->has_cp) {
		w->st.last_cp_time = r->last_cp.time_ms;
		memcpy(w->sealed_note, r->last_cp_note, r->last_cp_len + 1);
		w->sealed_len = r->last_cp_len;
	}
	rc = 0;
	if (new_segment) /* the file is fine: seal it, then set it aside */
		rc = logw_reopen(w, new_segment, true, err);
out:
	logv_free(v);
	return rc;
}

int logw_open(const struct logw_conf *conf, const struct note_signer *signer,
	      const char *new_segment, struct logw **out, struct pc_err *err)
{
	struct logw *w;
	struct stat st;
	int rc;

	if (!conf || !conf->file || !signer || !out || !conf->cp_records || !conf->cp_ms)
		return pc_err_set(err, PC_EINVAL, "logw_open: missing configuration");
	w = calloc(1, sizeof(*w));
	if (!w)
		return pc_err_set(err, PC_ENOMEM, "log writer: out of memory");
	w->fd = -1;
	w->conf = *conf;
	w->signer = signer;
	if (pc_strlcpy(w->path, conf->file, sizeof(w->path)) >= sizeof(w->path)) {
		rc = pc_err_set(err, PC_EINVAL, "log file path too long");
		goto fail;
	}
	w->conf.file = w->path;
	snprintf(w->sidecar, sizeof(w->sidecar), "%s.checkpoint", w->path);
	if ((rc = merkle_hasher_new(&w->h, err)) < 0)
		goto fail;
	w->st.next_seq = 1;
	w->sidecar_ms = pc_now_mono_ms();
	if (lstat(w->path, &st) == 0 && st.st_size > 0) {
		rc = resume(w, new_segment, err);
	} else {
		if (lstat(w->path, &st) == 0)
			unlink(w->path); /* an empty file: nothing to keep */
		rc = file_open_new(w, err);
		if (rc == 0)
			rc = segment_start(w, new_segment ? new_segment : "new log", NULL, NULL,
					   err);
	}
	if (rc < 0)
		goto fail;
	*out = w;
	return 0;
fail:
	if (w->fd >= 0)
		close(w->fd);
	merkle_hasher_free(w->h);
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
		if (rc == 0 && fdatasync(w->fd) < 0)
			rc = pc_err_errno(err, PC_EIO, "syncing %s", w->path);
		if (rc == 0 && w->sealed_len)
			sidecar_write(w, w->sealed_note, w->sealed_len, NULL);
	}
	if (w->fd >= 0)
		close(w->fd);
	merkle_hasher_free(w->h);
	pc_buf_free(&w->out);
	free(w);
	return rc;
}
