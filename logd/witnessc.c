/* logd's witness client: a thread of its own (never in the writer's
 * acknowledgement path) that sends each durable checkpoint the writer
 * exports to the configured witness (C2SP tlog-witness) with a consistency
 * proof from the last one the witness cosigned, checks the cosignature and
 * keeps the cosigned checkpoint durably in <log>.witnessed. It holds the
 * right edge of the cosigned tree and the leaf hashes after it; after a
 * restart, a gap or a witness that knows another size, it reads them back
 * from the log file. */
#include "logd/logd_int.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define B64	       sodium_base64_VARIANT_ORIGINAL
#define IO_TIMEOUT_MS  3000
#define RETRY_MIN_MS   500
#define RETRY_MAX_MS   10000
#define SEND_GAP_MS    200 /* at most 5 exchanges a second; newer checkpoints replace waiting ones */
#define TAIL_MAX       (4u << 20) /* leaves held while the witness is away (128 MiB) */
#define LEAF_SEG_START 1u

struct qleaf {
	uint64_t seq;
	uint32_t flags;
	uint8_t h[MERKLE_HASH];
};

struct lvec {
	struct qleaf *v;
	size_t n, cap;
};

struct logwc {
	char address[256], file[PC_PATH_MAX], wfile[PC_PATH_MAX + 16];
	struct cosig_verifier wkey;
	struct note_verifier logkey;
	bool required;
	uint32_t max_lag_ms;
	struct logw_export next;

	/* the writer's thread only: what the current batch staged */
	struct lvec stg;
	char stg_note[CHECKPOINT_MAX];
	size_t stg_note_len;

	/* shared, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, overflow;
	struct lvec q;
	char note[CHECKPOINT_MAX]; /* the latest checkpoint not yet cosigned */
	size_t note_len;

	/* the thread's own */
	pthread_t th;
	bool started;
	struct merkle_hasher *h;
	bool known; /* edge + tail are the file's leaves from index 0 */
	uint64_t seg_first_seq;
	struct merkle_tree edge; /* the tree the witness cosigned (edge.size = its size) */
	uint8_t wit_root[MERKLE_HASH];
	/* the newest checkpoint the witness cosigned for us, as far as we
	 * know (<log>.witnessed, then each exchange); has_wit false: none */
	struct checkpoint wit;
	bool has_wit;
	uint8_t (*tail)[MERKLE_HASH];
	uint64_t n_tail, cap_tail;

	/* published for the gate and the metrics */
	_Atomic uint64_t pending_since_ms; /* monotonic; 0: everything handed over is cosigned */
	_Atomic uint64_t cosigned_size, cosigned_ms, failures, conflicts, reachable;
};

/* ---- the hooks (the writer's thread) ------------------------------------ */

static int lvec_push(struct lvec *l, const struct qleaf *x, size_t n)
{
	if (n == 0) /* a batch of checkpoints only: nothing to copy (x may be NULL) */
		return 0;
	if (l->n + n > l->cap) {
		size_t cap = l->cap ? l->cap : 1024;
		void *nv;

		while (cap < l->n + n)
			cap *= 2;
		if (!(nv = realloc(l->v, cap * sizeof(*l->v))))
			return PC_ENOMEM;
		l->v = nv;
		l->cap = cap;
	}
	memcpy(l->v + l->n, x, n * sizeof(*x));
	l->n += n;
	return 0;
}

static void hk_stage(void *ctx, const struct logrec *rec, uint64_t seq, uint64_t time_ms,
		     const uint8_t hash[MERKLE_HASH])
{
	struct logwc *c = ctx;
	struct qleaf x = {.seq = seq, .flags = rec->action == LOGREC_SEGMENT ? LEAF_SEG_START : 0};

	memcpy(x.h, hash, MERKLE_HASH);
	if (c->stg.n != SIZE_MAX && lvec_push(&c->stg, &x, 1) < 0)
		c->stg.n = SIZE_MAX; /* lost: the thread reads the file back */
	if (c->next.stage)
		c->next.stage(c->next.ctx, rec, seq, time_ms, hash);
}

static void hk_checkpoint(void *ctx, const char *note, size_t len)
{
	struct logwc *c = ctx;

	if (len < sizeof(c->stg_note)) {
		memcpy(c->stg_note, note, len);
		c->stg_note_len = len;
	}
	if (c->next.stage_checkpoint)
		c->next.stage_checkpoint(c->next.ctx, note, len);
}

static void hk_done(void *ctx, bool written)
{
	struct logwc *c = ctx;

	if (written) {
		pthread_mutex_lock(&c->mu);
		if (c->stg.n == SIZE_MAX || c->q.n + c->stg.n > TAIL_MAX ||
		    lvec_push(&c->q, c->stg.v, c->stg.n) < 0) {
			c->overflow = true; /* the thread reads the file back */
			c->q.n = 0;
		}
		if (c->stg_note_len) {
			memcpy(c->note, c->stg_note, c->stg_note_len);
			c->note_len = c->stg_note_len;
			if (!atomic_load(&c->pending_since_ms))
				atomic_store(&c->pending_since_ms, pc_now_mono_ms());
		}
		/* wake the thread for a checkpoint only: leaves wait for it */
		if (c->stg_note_len || c->overflow)
			pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
	c->stg.n = 0;
	c->stg_note_len = 0;
	if (c->next.done)
		c->next.done(c->next.ctx, written);
}

void logwc_hooks(struct logwc *c, const struct logw_export *next, struct logw_export *out)
{
	if (next)
		c->next = *next;
	else
		memset(&c->next, 0, sizeof(c->next));
	*out = (struct logw_export){
	    .stage = hk_stage, .stage_checkpoint = hk_checkpoint, .done = hk_done, .ctx = c};
}

bool logwc_gate(void *ctx)
{
	struct logwc *c = ctx;
	uint64_t since;

	if (!c || !c->required)
		return true;
	since = atomic_load(&c->pending_since_ms);
	return !since || pc_now_mono_ms() - since <= c->max_lag_ms;
}

/* ---- the leaves the thread holds ----------------------------------------- */

static int tail_push(struct logwc *c, const uint8_t h[MERKLE_HASH])
{
	if (c->n_tail == c->cap_tail) {
		uint64_t cap = c->cap_tail ? c->cap_tail * 2 : 4096;
		void *nt;

		if (c->n_tail >= TAIL_MAX || !(nt = realloc(c->tail, cap * MERKLE_HASH)))
			return PC_ENOMEM;
		c->tail = nt;
		c->cap_tail = cap;
	}
	memcpy(c->tail[c->n_tail++], h, MERKLE_HASH);
	return 0;
}

static void take_leaf(struct logwc *c, const struct qleaf *x)
{
	uint64_t have = c->edge.size + c->n_tail;

	if ((x->flags & LEAF_SEG_START) && !(c->known && x->seq == c->seg_first_seq)) {
		/* a new segment: a new tree from leaf 0 (not the one the start's
		 * exchange already read back, whose segment record the writer
		 * hands over only now) */
		c->seg_first_seq = x->seq;
		merkle_tree_init(&c->edge);
		c->n_tail = 0;
		c->known = true;
	}
	if (!c->known || x->seq < c->seg_first_seq)
		return;
	if (x->seq - c->seg_first_seq < have)
		return; /* already read back from the file */
	if (x->seq - c->seg_first_seq > have || tail_push(c, x->h) < 0)
		c->known = false; /* a gap: read the file back */
}

struct reread {
	struct logwc *c;
	uint64_t keep; /* the edge is the tree of this many leaves */
	uint64_t first_seq;
	int rc;
};

static int reread_leaf(void *ctx, uint64_t index, uint64_t seq, const uint8_t leaf[MERKLE_HASH],
		       const char *line, size_t len)
{
	struct reread *r = ctx;

	(void)line;
	(void)len;
	if (index == 0)
		r->first_seq = seq;
	if (index < r->keep)
		return merkle_tree_append(r->c->h, &r->c->edge, leaf);
	return tail_push(r->c, leaf);
}

/* The file's leaves: the edge at keep leaves (the witness's size) and the
 * rest as the tail. The writer appends meanwhile; what it adds after our
 * read comes through the queue (older leaves there are skipped). */
static int reread(struct logwc *c, uint64_t keep, struct pc_err *err)
{
	struct reread r = {.c = c, .keep = keep};
	struct logv *v = NULL;
	int rc;

	merkle_tree_init(&c->edge);
	c->n_tail = 0;
	c->known = false;
	if ((rc = logv_new(&c->logkey, &v, err)) < 0)
		return rc;
	logv_set_leaf_fn(v, reread_leaf, &r);
	rc = logv_file(v, c->file, LOGV_TORN_OK, err);
	if (rc == 0 && logv_result(v)->records < keep)
		rc = pc_err_set(err, PC_ETAMPER,
				"the witness cosigned %llu records but %s holds %llu: the log was "
				"cut back (rollback) or this is another log",
				(unsigned long long)keep, c->file,
				(unsigned long long)logv_result(v)->records);
	logv_free(v);
	if (rc < 0)
		return rc;
	c->seg_first_seq = r.first_seq;
	c->known = true;
	return 0;
}

/* ---- one exchange with the witness ---------------------------------------- */

static int tcp_connect(const char *hostport, struct pc_err *err)
{
	char host[256], *colon;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	int fd;

	pc_strlcpy(host, hostport, sizeof(host));
	if (!(colon = strrchr(host, ':')))
		return pc_err_set(err, PC_EINVAL, "%s is not host:port", hostport);
	*colon = '\0';
	if (host[0] == '[' && colon > host + 1 && colon[-1] == ']') {
		colon[-1] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0 || !res)
		return pc_err_set(err, PC_EIO, "witness %s: cannot resolve", hostport);
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) < 0 && errno != EINPROGRESS) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "witness %s: connect", hostport);
	return fd;
}

/* Wait for fd to be ready for ev before deadline: 0, or PC_EIO. */
static int wait_fd(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = ev};
		uint64_t now = pc_now_mono_ms();
		int r;

		if (now >= deadline)
			return PC_EIO;
		r = poll(&p, 1, (int)(deadline - now));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return PC_EIO;
	}
}

/* POST body; the status and the reply body (NUL terminated) into resp. */
static int post(struct logwc *c, const char *body, size_t blen, int *status, char *resp,
		size_t rlen, struct pc_err *err)
{
	char head[512], *rb, *p;
	uint64_t deadline = pc_now_mono_ms() + IO_TIMEOUT_MS;
	size_t have = 0, off = 0, hl;
	int fd, n, rc = PC_EIO, soerr = 0;
	socklen_t sl = sizeof(soerr);

	if ((fd = tcp_connect(c->address, err)) < 0)
		return fd;
	if (wait_fd(fd, POLLOUT, deadline) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
		errno = soerr ? soerr : ETIMEDOUT;
		pc_err_errno(err, PC_EIO, "witness %s: connect", c->address);
		goto out;
	}
	n = snprintf(head, sizeof(head),
		     "POST /add-checkpoint HTTP/1.1\r\nHost: %s\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n",
		     c->address, blen);
	hl = (size_t)n;
	while (off < hl + blen) {
		const char *src = off < hl ? head + off : body + (off - hl);
		size_t left = off < hl ? hl - off : hl + blen - off;
		ssize_t w = send(fd, src, left, MSG_NOSIGNAL);

		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(fd, POLLOUT, deadline) < 0)
				goto timeout;
			continue;
		}
		if (w < 0) {
			pc_err_errno(err, PC_EIO, "witness %s: send", c->address);
			goto out;
		}
		off += (size_t)w;
	}
	for (;;) {
		ssize_t r;

		if (have + 1 >= rlen) {
			pc_err_set(err, PC_EPARSE, "witness %s: reply too long", c->address);
			goto out;
		}
		r = recv(fd, resp + have, rlen - 1 - have, 0);
		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(fd, POLLIN, deadline) < 0)
				goto timeout;
			continue;
		}
		if (r < 0) {
			pc_err_errno(err, PC_EIO, "witness %s: recv", c->address);
			goto out;
		}
		if (r == 0)
			break;
		have += (size_t)r;
	}
	resp[have] = '\0';
	rb = strstr(resp, "\r\n\r\n");
	if (strncmp(resp, "HTTP/1.", 7) != 0 || have < 12 || !rb ||
	    sscanf(resp + 9, "%3d", status) != 1) {
		pc_err_set(err, PC_EPARSE, "witness %s: not an HTTP reply", c->address);
		goto out;
	}
	rb += 4;
	memmove(resp, rb, strlen(rb) + 1);
	for (p = resp; *p; p++) /* no control bytes into our log lines (UTF-8 stays) */
		if (((unsigned char)*p < 0x20 && *p != '\n') || *p == 0x7f)
			*p = '?';
	rc = 0;
	goto out;
timeout:
	pc_err_set(err, PC_EIO, "witness %s: no answer within %d ms", c->address, IO_TIMEOUT_MS);
out:
	close(fd);
	return rc;
}

static int write_durable(const char *path, const char *text, size_t len, struct pc_err *err)
{
	char dir[PC_PATH_MAX], *slash;
	int rc = pc_file_write_atomic(path, text, len, 0644, err), dfd;

	if (rc < 0)
		return rc;
	pc_strlcpy(dir, path, sizeof(dir));
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		pc_strlcpy(dir, ".", sizeof(dir));
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		rc = pc_err_errno(err, PC_EIO, "syncing %s", dir);
		if (dfd >= 0)
			close(dfd);
		return rc;
	}
	close(dfd);
	return 0;
}

/* CONFLICT: the witness holds exactly what we sent from and still refuses:
 * the log does not extend what it cosigned (docs/logd.md "One history per
 * key"). */
enum outcome { OK, RETRY, RESYNC, CONFLICT };

/* note, then the first line of resp that is a cosignature of it by the
 * configured witness that verifies, into full (*flen bytes). */
static int keep_cosig(struct logwc *c, const char *note, size_t nlen, const char *resp, char *full,
		      size_t fsize, size_t *flen, struct pc_err *err)
{
	const char *p = resp, *eol;
	uint64_t ts;

	memcpy(full, note, nlen);
	for (; *p; p = eol + 1) {
		size_t ll;

		if (!(eol = strchr(p, '\n')))
			break; /* a cosignature line ends with a newline */
		ll = (size_t)(eol - p) + 1;
		if (nlen + ll >= fsize)
			continue;
		memcpy(full + nlen, p, ll);
		if (cosig_verify(&c->wkey, full, nlen + ll, &ts, NULL) == 0) {
			*flen = nlen + ll;
			return 0;
		}
	}
	return pc_err_set(err, PC_ETAMPER, "no cosignature by %s+%08x in it that verifies",
			  c->wkey.name, c->wkey.hash);
}

/* Send note (a checkpoint for cp.size records). */
static enum outcome send_one(struct logwc *c, const char *note, size_t nlen,
			     const struct checkpoint *cp)
{
	uint8_t proof[MERKLE_PROOF_MAX][MERKLE_HASH];
	char body[WITNESS_BODY_MAX], resp[2048], full[CHECKPOINT_MAX + COSIG_LINE_MAX];
	struct merkle_edge me = {.h = c->h, .edge = c->edge, .tail = c->tail, .n_tail = c->n_tail};
	uint64_t m = c->edge.size;
	size_t plen = 0, off, flen = 0;
	struct pc_err err;
	int status = 0;

	if (cp->size < m) {
		atomic_fetch_add(&c->conflicts, 1);
		pc_log(PC_LOG_ERR,
		       "witness: this log's checkpoint covers %llu records but the witness "
		       "cosigned %llu: the log was cut back or restarted under the same origin",
		       (unsigned long long)cp->size, (unsigned long long)m);
		return RETRY;
	}
	if (merkle_consistency_proof(m, cp->size, merkle_edge_root, &me, proof, &plen, &err) < 0) {
		pc_log(PC_LOG_ERR, "witness: consistency proof %llu -> %llu: %s",
		       (unsigned long long)m, (unsigned long long)cp->size, err.msg);
		return RESYNC;
	}
	off = (size_t)snprintf(body, sizeof(body), "old %llu\n", (unsigned long long)m);
	for (size_t i = 0; i < plen; i++) {
		sodium_bin2base64(body + off, sizeof(body) - off, proof[i], MERKLE_HASH, B64);
		off += 44;
		body[off++] = '\n';
	}
	body[off++] = '\n';
	memcpy(body + off, note, nlen);
	off += nlen;
	if (post(c, body, off, &status, resp, sizeof(resp), &err) < 0) {
		if (atomic_exchange(&c->reachable, 0) || !atomic_load(&c->failures))
			pc_log(PC_LOG_WARN, "%s; %s", err.msg,
			       c->required ? "records are refused once nothing was cosigned for "
					     "log.witness.max_lag_ms (log.witness.required)"
					   : "logd keeps acknowledging records without it "
					     "(log.witness.required: false)");
		atomic_fetch_add(&c->failures, 1);
		return RETRY;
	}
	if (!atomic_exchange(&c->reachable, 1))
		pc_log(PC_LOG_NOTICE, "witness %s reachable", c->address);
	if (status == 409) {
		/* "<size>\n", as the witness writes it (witness.c): a body
		 * spelled otherwise ("-1", blanks, a sign) is no answer */
		size_t rl = strlen(resp);
		uint64_t ws;

		if (rl < 2 || resp[rl - 1] != '\n' || pc_dec_u64(resp, rl - 1, &ws) < 0) {
			atomic_fetch_add(&c->failures, 1);
			pc_log(PC_LOG_ERR,
			       "witness %s answered 409 without its size (a body of %zu bytes "
			       "that is not a decimal and a newline)",
			       c->address, rl);
			return RETRY;
		}
		atomic_fetch_add(&c->conflicts, 1);
		if (ws == m && ws == cp->size)
			pc_log(PC_LOG_ERR,
			       "witness %s refuses: it cosigned another tree of %llu records "
			       "(split view)",
			       c->address, (unsigned long long)ws);
		else
			pc_log(PC_LOG_WARN,
			       "witness %s has cosigned %llu records (we thought %llu)%s",
			       c->address, (unsigned long long)ws, (unsigned long long)m,
			       ws > cp->size ? ": more than this log holds: the log was cut back "
					       "(rollback) or this is a split view"
					     : "; proving from there");
		if (ws <= cp->size && ws != m) {
			struct pc_err e;

			if (reread(c, ws, &e) < 0) {
				pc_log(PC_LOG_ERR, "witness: %s", e.msg);
				return RETRY;
			}
			return RESYNC;
		}
		if (ws == m || ws > cp->size) {
			pc_log(
			    PC_LOG_ERR,
			    "witness %s refuses the checkpoint of %s for %llu records: this log "
			    "does not extend the newest checkpoint it cosigned for this key (an "
			    "origin superseded by a newer one, or one that does not continue it)",
			    c->address, cp->origin, (unsigned long long)cp->size);
			return CONFLICT;
		}
		return RETRY;
	}
	if (status != 200) {
		size_t rl = strlen(resp);

		while (rl && resp[rl - 1] == '\n') /* one log line */
			resp[--rl] = '\0';
		for (char *q = resp; *q; q++)
			if (*q == '\n')
				*q = ' ';
		atomic_fetch_add(&c->failures, 1);
		if (status == 422 || status == 403)
			atomic_fetch_add(&c->conflicts, 1);
		pc_log(PC_LOG_ERR,
		       "witness %s refused the checkpoint for %llu records: HTTP %d: %s%s",
		       c->address, (unsigned long long)cp->size, status, resp,
		       status == 422 ? " (not consistent with what it cosigned: a split view or "
				       "a rollback)"
				     : "");
		return RETRY;
	}
	/* Of the reply, only a cosignature line that verifies with the
	 * witness's key goes after our note: anything else (a hostile
	 * witness, or anyone on its plain-HTTP path) would make
	 * <log>.witnessed a note that no longer parses, and logd refuses to
	 * start over an anchor it cannot read (issue 32). */
	if (keep_cosig(c, note, nlen, resp, full, sizeof(full), &flen, &err) < 0) {
		atomic_fetch_add(&c->failures, 1);
		pc_log(PC_LOG_ERR, "witness %s: its reply: %s", c->address, err.msg);
		return RETRY;
	}
	if (write_durable(c->wfile, full, flen, &err) < 0) {
		atomic_fetch_add(&c->failures, 1);
		pc_log(PC_LOG_ERR, "witness: keeping the cosigned checkpoint: %s", err.msg);
		return RETRY;
	}
	/* the edge moves to the cosigned size */
	for (uint64_t i = 0; i < cp->size - m; i++)
		merkle_tree_append(c->h, &c->edge, c->tail[i]);
	if (c->n_tail > cp->size - m) /* (tail may be NULL when empty) */
		memmove(c->tail, c->tail + (cp->size - m),
			(c->n_tail - (cp->size - m)) * MERKLE_HASH);
	c->n_tail -= cp->size - m;
	memcpy(c->wit_root, cp->root, MERKLE_HASH);
	c->wit = *cp;
	c->has_wit = true;
	atomic_store(&c->cosigned_size, cp->size);
	atomic_store(&c->cosigned_ms, pc_now_real_ms());
	return OK;
}

/* ---- one history per key: the previous origin first ---------------------- */

struct prevfile {
	struct logwc *c;
	uint64_t keep;
	int rc;
};

static int prev_leaf(void *ctx, uint64_t index, uint64_t seq, const uint8_t leaf[MERKLE_HASH],
		     const char *line, size_t len)
{
	struct prevfile *p = ctx;

	(void)seq;
	(void)line;
	(void)len;
	if (index < p->keep)
		return merkle_tree_append(p->c->h, &p->c->edge, leaf);
	return tail_push(p->c, leaf);
}

/* Does the file at path begin with seq (its first line's)? */
static bool first_seq_is(const char *path, uint64_t seq)
{
	char line[128];
	FILE *f = fopen(path, "re");
	size_t n, pl;
	uint64_t x = 0;

	if (!f)
		return false;
	n = fread(line, 1, sizeof(line) - 1, f);
	fclose(f);
	line[n] = '\0';
	if (!(pl = logrec_seq_prefix(line, n)))
		return false;
	for (const char *q = line + pl; *q >= '0' && *q <= '9' && x < UINT64_MAX / 10 - 10; q++)
		x = x * 10 + (uint64_t)(*q - '0');
	return x == seq;
}

/* The witness holds the origin that cp's segment continues, but not up to
 * the checkpoint cp names as its previous one (the witness was away when
 * the segment ended, or logd stopped before it caught up): it refuses the
 * new origin until it has that one. Find the previous segment beside the
 * log (a verified file whose last checkpoint is the one named), send that
 * checkpoint with its consistency proof, and start the new origin at 0.
 * Returns OK when there is nothing to catch up or it was done. */
static enum outcome catch_up(struct logwc *c, const struct checkpoint *cp)
{
	char dir[PC_PATH_MAX], full[2 * PC_PATH_MAX + 2], note[CHECKPOINT_MAX];
	const char *slash = strrchr(c->file, '/'), *base = slash ? slash + 1 : c->file;
	size_t bl = strlen(base), nlen = 0;
	uint64_t wseg = 0;
	enum outcome o = RETRY;
	struct dirent *de;
	struct checkpoint fin;
	DIR *d;

	if (!cp->has_prev || !c->has_wit || strcmp(cp->origin, c->wit.origin) == 0 ||
	    checkpoint_origin_seg(c->wit.origin, c->logkey.name, &wseg) < 0 ||
	    wseg != cp->prev_seg || c->wit.size >= cp->prev_size)
		return OK;
	if (slash)
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - c->file), c->file);
	else
		pc_strlcpy(dir, ".", sizeof(dir));
	if (!(d = opendir(dir)))
		goto missing;
	while ((de = readdir(d))) {
		const char *n = de->d_name;
		struct prevfile p = {.c = c, .keep = c->wit.size};
		struct logv *v = NULL;
		const struct logv_result *r;

		if (strncmp(n, base, bl) != 0 || n[bl] != '.' || strstr(n + bl, "quarantine") ||
		    strstr(n + bl, ".witnessed") || strstr(n + bl, ".checkpoint") ||
		    strcmp(n + bl, ".new") == 0)
			continue;
		snprintf(full, sizeof(full), "%s/%s", dir, n);
		if (wseg && !first_seq_is(full, wseg))
			continue;
		merkle_tree_init(&c->edge);
		c->n_tail = 0;
		if (logv_new(&c->logkey, &v, NULL) < 0)
			break;
		logv_set_leaf_fn(v, prev_leaf, &p);
		if (logv_file(v, full, LOGV_TORN_OK, NULL) == 0 && (r = logv_result(v))->has_cp &&
		    strcmp(r->last_cp.origin, c->wit.origin) == 0 &&
		    r->last_cp.size == cp->prev_size &&
		    memcmp(r->last_cp.root, cp->prev_root, MERKLE_HASH) == 0 &&
		    r->records >= cp->prev_size) {
			fin = r->last_cp;
			memcpy(note, r->last_cp_note, r->last_cp_len);
			nlen = r->last_cp_len;
			c->n_tail = cp->prev_size - c->wit.size; /* its records only */
		}
		logv_free(v);
		if (nlen)
			break;
	}
	closedir(d);
	if (!nlen)
		goto missing;
	pc_log(PC_LOG_NOTICE,
	       "witness %s: cosigned %s up to %llu records; sending its last checkpoint (%llu, "
	       "from %s) before the segment that continues it",
	       c->address, c->wit.origin, (unsigned long long)c->wit.size,
	       (unsigned long long)fin.size, full);
	o = send_one(c, note, nlen, &fin);
	if (o == RESYNC)
		o = send_one(c, note, nlen, &fin);
	/* the new origin starts from 0, from the current file */
	merkle_tree_init(&c->edge);
	c->n_tail = 0;
	c->known = false;
	return o;
missing:
	merkle_tree_init(&c->edge);
	c->n_tail = 0;
	c->known = false;
	pc_log(PC_LOG_ERR,
	       "witness %s: cosigned %s up to %llu records, and this segment continues it at "
	       "%llu, but no file beside %s holds that segment to prove it: put the segment "
	       "back (uncompressed) beside the log (docs/operations.md, \"Witness\")",
	       c->address, c->wit.origin, (unsigned long long)c->wit.size,
	       (unsigned long long)cp->prev_size, c->file);
	return RETRY;
}

/* Send note (the newest checkpoint) after what must go before it. */
static enum outcome send_current(struct logwc *c, const char *note, size_t nlen,
				 const struct checkpoint *cp, struct pc_err *err)
{
	enum outcome o;

	if (c->has_wit && strcmp(cp->origin, c->wit.origin) != 0 && c->edge.size) {
		/* another origin than the witness holds: it starts at 0 */
		merkle_tree_init(&c->edge);
		c->n_tail = 0;
		c->known = false;
	}
	if ((o = catch_up(c, cp)) != OK)
		return o;
	if ((!c->known || cp->size > c->edge.size + c->n_tail) &&
	    reread(c, c->edge.size, err) < 0) {
		pc_log(PC_LOG_ERR, "witness: reading %s back: %s", c->file, err->msg);
		atomic_fetch_add(&c->failures, 1);
		return RETRY;
	}
	o = send_one(c, note, nlen, cp);
	if (o == RESYNC)
		o = send_one(c, note, nlen, cp);
	return o;
}

static void *run(void *arg)
{
	struct logwc *c = arg;
	char note[CHECKPOINT_MAX];
	size_t nlen = 0;
	uint64_t not_before = 0, backoff = RETRY_MIN_MS;
	struct lvec mine = {0};

	for (;;) {
		struct checkpoint cp;
		bool overflow;
		enum outcome o;
		struct pc_err err;

		pthread_mutex_lock(&c->mu);
		for (;;) {
			uint64_t now = pc_now_mono_ms(), wait = 1000;
			struct timespec ts;

			if (c->stop || c->overflow || ((c->note_len || nlen) && now >= not_before))
				break;
			if ((c->note_len || nlen) && not_before - now < wait)
				wait = not_before - now;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += (time_t)(wait / 1000);
			ts.tv_nsec += (long)(wait % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&c->cv, &c->mu, &ts);
		}
		if (c->stop) {
			pthread_mutex_unlock(&c->mu);
			break;
		}
		{ /* swap the queue out: the writer's lock hold stays short */
			struct lvec t = c->q;

			c->q = mine;
			mine = t;
		}
		overflow = c->overflow;
		c->overflow = false;
		if (c->note_len) { /* the newest checkpoint replaces a waiting one */
			memcpy(note, c->note, c->note_len);
			nlen = c->note_len;
			c->note_len = 0;
		}
		pthread_mutex_unlock(&c->mu);

		if (overflow)
			c->known = false;
		for (size_t i = 0; i < mine.n; i++)
			take_leaf(c, &mine.v[i]);
		mine.n = 0;
		if (!nlen || pc_now_mono_ms() < not_before)
			continue;
		if (checkpoint_open(&c->logkey, note, nlen, &cp, &err) < 0) {
			pc_log(PC_LOG_ERR, "witness: our own checkpoint: %s", err.msg);
			nlen = 0;
			continue;
		}
		o = send_current(c, note, nlen, &cp, &err);
		if (o == OK) {
			pthread_mutex_lock(&c->mu);
			/* a newer checkpoint waits: the bound runs for it from now */
			atomic_store(&c->pending_since_ms, c->note_len ? pc_now_mono_ms() : 0);
			pthread_mutex_unlock(&c->mu);
			nlen = 0;
			backoff = RETRY_MIN_MS;
			not_before = pc_now_mono_ms() + SEND_GAP_MS;
		} else {
			not_before = pc_now_mono_ms() + backoff;
			backoff = backoff * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : backoff * 2;
		}
	}
	free(mine.v);
	return NULL;
}

/* ---- life ---------------------------------------------------------------- */

/* Is the witnessed checkpoint of another origin than the log's latest
 * (the sidecar): cosigned for an earlier segment, before a rotation? */
static bool witnessed_other_origin(const char *file, const struct note_verifier *key,
				   const char *origin)
{
	char side[PC_PATH_MAX + 16], *text = NULL;
	struct checkpoint sc;
	size_t len = 0;
	bool other = false;

	snprintf(side, sizeof(side), "%s.checkpoint", file);
	if (pc_file_read(side, CHECKPOINT_MAX - 1, &text, &len, NULL) == 0 &&
	    checkpoint_open(key, text, len, &sc, NULL) == 0)
		other = strcmp(sc.origin, origin) != 0;
	free(text);
	return other;
}

/* Before logd serves: the log's newest checkpoint to the witness, once. A
 * witness that answers that the log does not extend what it cosigned for
 * this key stops the start (fail closed: serving would write records the
 * witness will never cosign onto a history it refuses); one that does not
 * answer does not (the thread keeps trying, as for any outage). */
static int first_exchange(struct logwc *c, const struct logwc_conf *conf, struct pc_err *err)
{
	struct checkpoint cp;
	struct pc_err e;
	enum outcome o;

	if (checkpoint_open(&c->logkey, conf->start_note, conf->start_len, &cp, &e) < 0)
		return 0; /* the writer's own: the thread says what is wrong */
	o = send_current(c, conf->start_note, conf->start_len, &cp, &e);
	if (o == OK) {
		c->note_len = 0; /* cosigned: nothing waits */
		atomic_store(&c->pending_since_ms, 0);
		return 0;
	}
	if (o != CONFLICT)
		return 0;
	return pc_err_set(
	    err, PC_ETAMPER,
	    "witness %s refuses this log: the checkpoint of %s for %llu records does not extend "
	    "the newest checkpoint it cosigned for the key %s (%s); the log files were replaced "
	    "by older ones, or removed and begun again; refusing to start: put back the newest "
	    "segment (the one the witness cosigned and every file after it) from a backup; if it "
	    "is lost, start once with portcullis-logd --new-segment REASON over the witness's "
	    "checkpoint (docs/operations.md, \"Witness refuses the log\")",
	    c->address, cp.origin, (unsigned long long)cp.size, c->logkey.name,
	    c->has_wit ? c->wit.origin : "see the witness's log");
}

int logwc_start(const struct logwc_conf *conf, struct logwc **out, struct pc_err *err)
{
	struct logwc *c = calloc(1, sizeof(*c));
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (!c)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	pc_strlcpy(c->address, conf->address, sizeof(c->address));
	pc_strlcpy(c->file, conf->file, sizeof(c->file));
	snprintf(c->wfile, sizeof(c->wfile), "%s%s", conf->file, LOGWC_SUFFIX);
	c->wkey = *conf->wkey;
	c->logkey = *conf->logkey;
	c->required = conf->required;
	c->max_lag_ms = conf->max_lag_ms;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	if ((rc = merkle_hasher_new(&c->h, err)) < 0)
		goto fail;
	/* where the witness stands: our last cosigned checkpoint */
	if (pc_file_read(c->wfile, CHECKPOINT_MAX + COSIG_LINE_MAX * 4, &text, &len, NULL) == 0) {
		struct checkpoint cp;

		if (checkpoint_open(&c->logkey, text, len, &cp, err) < 0) {
			pc_err_prefix(err, "%s: ", c->wfile);
			free(text);
			rc = PC_ETAMPER;
			goto fail;
		}
		free(text);
		c->wit = cp;
		c->has_wit = true;
		if (!witnessed_other_origin(c->file, &c->logkey, cp.origin)) {
			c->edge.size =
			    cp.size; /* nodes read back from the file before the first send */
			memcpy(c->wit_root, cp.root, MERKLE_HASH);
			atomic_store(&c->cosigned_size, cp.size);
		}
		/* else an earlier segment's: this one starts at 0 at the witness */
	}
	/* the latest checkpoint (the sidecar) goes first: after a restart the
	 * witness learns where the log stands before any new record, and a
	 * required witness can open the gate without one */
	{
		char side[PC_PATH_MAX + 16];

		snprintf(side, sizeof(side), "%s.checkpoint", c->file);
		text = NULL;
		if (pc_file_read(side, CHECKPOINT_MAX - 1, &text, &len, NULL) == 0) {
			memcpy(c->note, text, len);
			c->note_len = len;
		}
		free(text);
	}
	/* required: until the first cosignature, the bound runs from the start */
	if (c->required)
		atomic_store(&c->pending_since_ms, pc_now_mono_ms());
	if (conf->start_note && conf->start_len && (rc = first_exchange(c, conf, err)) < 0)
		goto fail;
	if (pthread_create(&c->th, NULL, run, c) != 0) {
		rc = pc_err_set(err, PC_EIO, "starting the witness thread failed");
		goto fail;
	}
	c->started = true;
	*out = c;
	return 0;
fail:
	logwc_stop(c);
	return rc;
}

void logwc_stop(struct logwc *c)
{
	if (!c)
		return;
	if (c->started) {
		pthread_mutex_lock(&c->mu);
		c->stop = true;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->th, NULL);
	}
	merkle_hasher_free(c->h);
	free(c->stg.v);
	free(c->q.v);
	free(c->tail);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}

void logwc_metrics(struct logwc *c, struct pc_prom *b)
{
	uint64_t ms;

	pc_prom_one_u64(b, "portcullis_logd_witness_configured", "gauge",
			"1 when log.witness.address is set.", c ? 1 : 0);
	if (!c)
		return;
	pc_prom_one_u64(b, "portcullis_logd_witness_reachable", "gauge",
			"1 when the last exchange with the witness got an answer.",
			atomic_load(&c->reachable));
	pc_prom_one_u64(b, "portcullis_logd_witness_cosigned_size", "gauge",
			"Records in the latest checkpoint the witness cosigned.",
			atomic_load(&c->cosigned_size));
	ms = atomic_load(&c->cosigned_ms);
	if (ms)
		pc_prom_one_f64(b, "portcullis_logd_witness_cosigned_timestamp_seconds", "gauge",
				"When the witness last cosigned a checkpoint (Unix time).",
				(double)ms / 1000.0);
	pc_prom_one_u64(b, "portcullis_logd_witness_failures_total", "counter",
			"Exchanges with the witness that failed (unreachable, refused, bad reply).",
			atomic_load(&c->failures));
	pc_prom_one_u64(b, "portcullis_logd_witness_conflicts_total", "counter",
			"Times the witness knew another tree (409/422): a rollback or split view.",
			atomic_load(&c->conflicts));
	pc_prom_one_u64(b, "portcullis_logd_witness_refusing", "gauge",
			"1 while records are refused for want of a cosignature "
			"(log.witness.required).",
			logwc_gate(c) ? 0 : 1);
}

/* What "status" says of the witness, read once: the text and the JSON
 * form (`log status --json`) are made from it, so they say the same. */
struct logwc_state {
	uint64_t cosigned_size, cosigned_ms, failures, conflicts;
	bool reachable, refusing, bad;
};

static void logwc_snap(struct logwc *c, struct logwc_state *s)
{
	s->cosigned_ms = atomic_load(&c->cosigned_ms);
	s->cosigned_size = atomic_load(&c->cosigned_size);
	s->failures = atomic_load(&c->failures);
	s->conflicts = atomic_load(&c->conflicts);
	s->reachable = atomic_load(&c->reachable);
	s->refusing = !logwc_gate(c);
	s->bad = !s->reachable || s->refusing || s->conflicts > 0;
}

void logwc_status(struct logwc *c, char *buf, size_t len, bool *bad)
{
	uint64_t now = pc_now_real_ms();
	struct logwc_state s;
	char age[48] = "";

	if (!c) {
		snprintf(
		    buf, len,
		    "witness: none (log.witness.address): checkpoints are anchored by the sidecar "
		    "and syslog only\n");
		*bad = false;
		return;
	}
	logwc_snap(c, &s);
	if (s.cosigned_ms)
		snprintf(
		    age, sizeof(age), " %llu s ago",
		    (unsigned long long)(now > s.cosigned_ms ? (now - s.cosigned_ms) / 1000 : 0));
	snprintf(buf, len,
		 "witness: %s (%s+%08x): %s; cosigned %llu records%s; %llu failures, %llu "
		 "conflicts; %s\n",
		 c->address, c->wkey.name, c->wkey.hash,
		 s.reachable ? "reachable" : "NOT reachable", (unsigned long long)s.cosigned_size,
		 s.cosigned_ms ? age : " (none yet)", (unsigned long long)s.failures,
		 (unsigned long long)s.conflicts,
		 s.refusing    ? "REFUSING records (log.witness.required, nothing cosigned for "
				 "log.witness.max_lag_ms)"
		 : c->required ? "required: records are refused if nothing is cosigned for "
				 "log.witness.max_lag_ms"
			       : "not required: logd keeps acknowledging records without it");
	*bad = s.bad;
}

/* The same as a JSON value: null without a witness (docs/logd.md). */
static void logwc_status_json(struct logwc *c, struct pc_json *j, bool *bad)
{
	uint64_t now = pc_now_real_ms();
	struct logwc_state s;
	char key[NOTE_NAME_MAX + 16], ts[32];

	*bad = false;
	if (!c) {
		pc_json_null(j);
		return;
	}
	logwc_snap(c, &s);
	snprintf(key, sizeof(key), "%s+%08x", c->wkey.name, c->wkey.hash);
	pc_json_obj(j);
	pc_json_kstr(j, "address", c->address);
	pc_json_kstr(j, "key", key);
	pc_json_key(j, "reachable");
	pc_json_bool(j, s.reachable);
	pc_json_ku64(j, "cosigned_records", s.cosigned_size);
	pc_json_key(j, "cosigned_time");
	if (s.cosigned_ms)
		pc_json_str(j, pc_time_rfc3339(s.cosigned_ms, ts, sizeof(ts)));
	else
		pc_json_null(j);
	pc_json_key(j, "cosigned_age_s");
	if (s.cosigned_ms)
		pc_json_u64(j, now > s.cosigned_ms ? (now - s.cosigned_ms) / 1000 : 0);
	else
		pc_json_null(j);
	pc_json_ku64(j, "failures", s.failures);
	pc_json_ku64(j, "conflicts", s.conflicts);
	pc_json_key(j, "required");
	pc_json_bool(j, c->required);
	pc_json_key(j, "refusing");
	pc_json_bool(j, s.refusing);
	pc_json_obj_end(j);
	*bad = s.bad;
}

/* "status-json": the reply to `log status --json`, "ok\n" or "warn\n" and
 * one JSON object with what "status" says in text. */
static char *status_json(struct logd_metrics_ctx *m)
{
	struct pc_buf b, w;
	struct pc_json j, jw;
	char *wtext, *out;
	bool bad;

	pc_buf_init(&w, 4096, 0);
	pc_json_init(&jw, &w);
	logwc_status_json(m->wc, &jw, &bad);
	if (!(wtext = pc_buf_take(&w, NULL)))
		return NULL;
	pc_buf_init(&b, 8192, 0);
	pc_buf_puts(&b, bad ? "warn\n" : "ok\n");
	pc_json_init(&j, &b);
	pc_json_obj(&j);
	pc_json_key(&j, "ok");
	pc_json_bool(&j, !bad);
	pc_json_key(&j, "log");
	pc_json_obj(&j);
	pc_json_ku64(&j, "tree_records", atomic_load(&m->live->tree_size));
	pc_json_ku64(&j, "next_seq", atomic_load(&m->live->next_seq));
	pc_json_ku64(&j, "unsealed", atomic_load(&m->live->unsealed));
	pc_json_obj_end(&j);
	pc_json_key(&j, "witness");
	pc_json_raw(&j, wtext);
	pc_json_obj_end(&j);
	pc_buf_puts(&b, "\n");
	free(wtext);
	out = pc_buf_take(&b, NULL);
	return out;
}

char *logd_metrics_all(void *ctx, const char *req)
{
	struct logd_metrics_ctx *m = ctx;
	char *a, *b, *all;
	struct pc_prom p = {0};
	size_t la, lb;

	if (!strcmp(req, "status")) {
		char w[1024], *out = malloc(2048);
		bool bad;

		if (!out)
			return NULL;
		logwc_status(m->wc, w, sizeof(w), &bad);
		snprintf(out, 2048,
			 "%s\nlog: %llu records in the current tree, next seq %llu, %llu "
			 "unsealed\n%s",
			 bad ? "warn" : "ok", (unsigned long long)atomic_load(&m->live->tree_size),
			 (unsigned long long)atomic_load(&m->live->next_seq),
			 (unsigned long long)atomic_load(&m->live->unsealed), w);
		return out;
	}
	if (!strcmp(req, "status-json"))
		return status_json(m);
	a = logd_metrics(m->live, req);
	if (!a || strcmp(req, "metrics") != 0)
		return a;
	logwc_metrics(m->wc, &p);
	if (!(b = pc_prom_take(&p)))
		return a;
	la = strlen(a);
	lb = strlen(b);
	all = realloc(a, la + lb + 1);
	if (all)
		memcpy(all + la, b, lb + 1);
	else
		all = a;
	free(b);
	return all;
}
