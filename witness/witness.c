/* The witness (portcullis-logd --witness): a C2SP tlog-witness on another host. It keeps,
 * per log, the latest checkpoint it cosigned (durably, before answering),
 * and cosigns a new one only when the log's signature verifies and a
 * consistency proof shows it extends that one; it never cosigns two trees
 * of one log that disagree (docs/logd.md "Witness and consistency proofs").
 * Everything it parses comes from the network: tests/fuzz/fuzz_witness.c. */
#include "witness/witness.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX      4096
#define IO_TIMEOUT_MS 5000
/* A state file: a checkpoint and the log's signature line, with room. */
#define WITNESS_STATE_MAX (CHECKPOINT_MAX * 2)

/* A log segment's origin "<key>/<seg>" (tlog/origin.c) and what was
 * cosigned for it: each origin is its own append-only log. */
struct witness_origin {
	uint64_t seg;
	struct checkpoint cp;
};
#define WITNESS_ORIGINS_MAX 4096 /* in memory; with a state dir, older ones are read back */

struct witness_log {
	struct note_verifier key;
	struct checkpoint cp; /* the bare key name's origin; size 0: nothing cosigned yet */
	struct witness_origin *seg;
	size_t n_seg;
	/* The newest origin cosigned for this key (its seg; 0 the bare name)
	 * and whether there is one: only it may grow, and a new origin must
	 * name its checkpoint as its previous one (one history per key). */
	uint64_t head;
	bool has_head;
};

struct witness {
	const struct note_signer *signer;
	struct witness_log logs[WITNESS_LOGS_MAX];
	size_t n_logs;
	char dir[PC_PATH_MAX]; /* "" in memory only */
	struct merkle_hasher *h;
};

/* ---- the request ------------------------------------------------------- */

int witness_req_parse(const char *body, size_t len, struct witness_req *out, struct pc_err *err)
{
	const char *p = body, *end = body + len, *eol;
	struct witness_req r;

	r.proof_len = 0;
	eol = memchr(p, '\n', len);
	if (!eol || (size_t)(eol - p) < 5 || memcmp(p, "old ", 4) != 0 ||
	    pc_dec_u64(p + 4, (size_t)(eol - p - 4), &r.old) < 0)
		return pc_err_set(err, PC_EPARSE, "the body must start with \"old <size>\"");
	for (p = eol + 1;; p = eol + 1) {
		size_t hl = 0;

		if (p >= end || !(eol = memchr(p, '\n', (size_t)(end - p))))
			return pc_err_set(err, PC_EPARSE, "no blank line before the checkpoint");
		if (eol == p)
			break;
		if (r.proof_len == MERKLE_PROOF_MAX)
			return pc_err_set(err, PC_EPARSE, "more than %d proof lines",
					  MERKLE_PROOF_MAX);
		if (eol - p != 44 ||
		    pc_b64_decode(r.proof[r.proof_len], MERKLE_HASH, p, 44, &hl) != 0 ||
		    hl != MERKLE_HASH)
			return pc_err_set(err, PC_EPARSE, "a proof line is not a base64 hash");
		r.proof_len++;
	}
	r.note = eol + 1;
	r.note_len = (size_t)(end - r.note);
	if (r.note_len == 0)
		return pc_err_set(err, PC_EPARSE, "no checkpoint");
	*out = r;
	return 0;
}

static bool hdr_is(const char *p, size_t n, const char *name)
{
	size_t l = strlen(name);

	return n > l && p[l] == ':' && strncasecmp(p, name, l) == 0;
}

int witness_http_head(const char *buf, size_t len, size_t *head_len, size_t *body_len, bool *add,
		      struct pc_err *err)
{
	const char *end = memmem(buf, len, "\r\n\r\n", 4), *p, *eol;
	uint64_t cl = 0;
	bool have_cl = false, is_add;

	if (!end) {
		if (len >= HEAD_MAX)
			return pc_err_set(err, PC_EPARSE, "request head longer than %d bytes",
					  HEAD_MAX);
		return PC_EAGAIN;
	}
	if ((size_t)(end - buf) + 4 > HEAD_MAX)
		return pc_err_set(err, PC_EPARSE, "request head longer than %d bytes", HEAD_MAX);
	eol = memmem(buf, (size_t)(end + 2 - buf), "\r\n", 2);
	{
		static const char a[] = "POST /add-checkpoint HTTP/1.";
		size_t l = (size_t)(eol - buf);

		is_add = l == sizeof(a) && memcmp(buf, a, sizeof(a) - 1) == 0 &&
			 (buf[l - 1] == '0' || buf[l - 1] == '1');
		if (!is_add && (l < 5 || memchr(buf, '\0', l)))
			return pc_err_set(err, PC_EPARSE, "not an HTTP request");
	}
	for (p = eol + 2; p < end + 2; p = eol + 2) {
		size_t n;

		eol = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
		n = (size_t)(eol - p);
		if (hdr_is(p, n, "Content-Length")) {
			const char *v = p + 15, *ve = p + n;

			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			if (have_cl || pc_dec_u64(v, (size_t)(ve - v), &cl) < 0)
				return pc_err_set(err, PC_EPARSE, "bad Content-Length");
			have_cl = true;
		} else if (hdr_is(p, n, "Transfer-Encoding")) {
			return pc_err_set(err, PC_EPARSE, "Transfer-Encoding is not supported");
		}
	}
	if (is_add && !have_cl)
		return pc_err_set(err, PC_EPARSE, "no Content-Length");
	if (cl > WITNESS_BODY_MAX)
		return pc_err_set(err, PC_EPARSE, "body longer than %d bytes", WITNESS_BODY_MAX);
	*head_len = (size_t)(end - buf) + 4;
	*body_len = (size_t)cl;
	*add = is_add;
	return 0;
}

/* ---- state ------------------------------------------------------------- */

static void state_path(const struct witness *w, const struct witness_log *l, uint64_t seg,
		       char *buf, size_t len)
{
	if (seg)
		snprintf(buf, len, "%s/log-%08x-%llu.checkpoint", w->dir, l->key.hash,
			 (unsigned long long)seg);
	else
		snprintf(buf, len, "%s/log-%08x.checkpoint", w->dir, l->key.hash);
}

/* The state file of one origin into *cp (size 0 if there is none); a
 * state it cannot read, or of another origin, is an error: never start
 * an origin from zero again. */
static int state_read(const struct witness *w, const struct witness_log *l, uint64_t seg,
		      struct checkpoint *cp, struct pc_err *err)
{
	char path[PC_PATH_MAX + 48], *text = NULL;
	size_t len = 0;
	uint64_t s = 0;
	int rc;

	memset(cp, 0, sizeof(*cp));
	if (!w->dir[0])
		return 0;
	state_path(w, l, seg, path, sizeof(path));
	rc = pc_file_read(path, WITNESS_STATE_MAX, &text, &len, err);
	if (rc == PC_ENOENT)
		return 0;
	if (rc == 0) {
		rc = checkpoint_open(&l->key, text, len, cp, err);
		free(text);
		if (rc == 0 && (checkpoint_origin_seg(cp->origin, l->key.name, &s) < 0 || s != seg))
			rc = pc_err_set(err, PC_ETAMPER, "holds a checkpoint of origin %s",
					cp->origin);
	}
	if (rc < 0)
		pc_err_prefix(err, "%s: ", path);
	return rc;
}

/* What was cosigned for one origin of l (seg 0: the bare name). */
static int origin_state(struct witness *w, struct witness_log *l, uint64_t seg,
			struct checkpoint **out, struct pc_err *err)
{
	struct witness_origin *o;
	int rc;

	if (!seg) {
		*out = &l->cp;
		return 0;
	}
	for (size_t i = 0; i < l->n_seg; i++)
		if (l->seg[i].seg == seg) {
			*out = &l->seg[i].cp;
			return 0;
		}
	if (!l->seg && !(l->seg = calloc(WITNESS_ORIGINS_MAX, sizeof(*l->seg))))
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	if (l->n_seg == WITNESS_ORIGINS_MAX) {
		/* the oldest goes from memory; its state file keeps it */
		if (!w->dir[0])
			return pc_err_set(err, PC_ENOMEM,
					  "more than %d segments of one log without --state",
					  WITNESS_ORIGINS_MAX);
		memmove(l->seg, l->seg + 1, (l->n_seg - 1) * sizeof(*l->seg));
		l->n_seg--;
	}
	o = &l->seg[l->n_seg];
	if ((rc = state_read(w, l, seg, &o->cp, err)) < 0)
		return rc;
	o->seg = seg;
	l->n_seg++;
	*out = &o->cp;
	return 0;
}

/* What the witness keeps of a note it verified (body: blen bytes): the
 * body, the blank line and the first signature line of the log's key
 * that verifies, into keep (WITNESS_STATE_MAX). The state is read back
 * with that bound, so it is written with it: a note with more lines
 * (other signatures, padding) must not become a state the witness
 * cannot read after a restart (issue 32). */
static int state_text(const struct witness_log *l, const char *note, size_t len, size_t blen,
		      char *keep, size_t *klen)
{
	const char *p = note + blen + 1, *end = note + len, *eol;
	size_t body_len;

	if (blen + 1 > WITNESS_STATE_MAX)
		return PC_EINVAL;
	memcpy(keep, note, blen + 1);
	for (; p < end && (eol = memchr(p, '\n', (size_t)(end - p))); p = eol + 1) {
		size_t ll = (size_t)(eol - p) + 1;

		if (blen + 1 + ll > WITNESS_STATE_MAX)
			continue;
		memcpy(keep + blen + 1, p, ll);
		if (note_verify(&l->key, keep, blen + 1 + ll, &body_len, NULL) == 0) {
			*klen = blen + 1 + ll;
			return 0;
		}
	}
	return PC_EINVAL;
}

/* The file, then the directory, synced: a cosignature is only sent once
 * the state that forbids the conflicting one survives a power cut. */
static int state_write(const char *dir, const char *path, const char *text, size_t len,
		       struct pc_err *err)
{
	int rc = pc_file_write_atomic(path, text, len, 0600, err), dfd;

	if (rc < 0)
		return rc;
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

/* The newest origin of l with a state: the highest seg among the state
 * files (seqs, and so segs, only grow), else the bare name if it has one. */
static int head_scan(struct witness *w, struct witness_log *l, struct pc_err *err)
{
	char pre[32];
	struct dirent *de;
	size_t pl;
	DIR *d;

	l->has_head = l->cp.size > 0;
	l->head = 0;
	if (!w->dir[0])
		return 0;
	if (!(d = opendir(w->dir)))
		return pc_err_errno(err, PC_EIO, "opening %s", w->dir);
	pl = (size_t)snprintf(pre, sizeof(pre), "log-%08x-", l->key.hash);
	while ((de = readdir(d))) {
		const char *n = de->d_name, *dot;
		uint64_t seg = 0;

		if (strncmp(n, pre, pl) != 0 || !(dot = strchr(n + pl, '.')) ||
		    strcmp(dot, ".checkpoint") != 0 || dot == n + pl || n[pl] == '0')
			continue;
		for (const char *q = n + pl; q < dot && seg < UINT64_MAX / 10 - 10; q++)
			seg = *q >= '0' && *q <= '9' ? seg * 10 + (uint64_t)(*q - '0') : 0;
		if (seg && (!l->has_head || seg > l->head)) {
			l->head = seg;
			l->has_head = true;
		}
	}
	closedir(d);
	return 0;
}

int witness_new(const struct note_signer *signer, const struct note_verifier *logs, size_t n_logs,
		const char *dir, struct witness **out, struct pc_err *err)
{
	struct witness *w;
	int rc;

	if (n_logs == 0 || n_logs > WITNESS_LOGS_MAX)
		return pc_err_set(err, PC_EINVAL, "a witness serves 1-%d logs", WITNESS_LOGS_MAX);
	if (!(w = calloc(1, sizeof(*w))))
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	w->signer = signer;
	if ((rc = merkle_hasher_new(&w->h, err)) < 0)
		goto fail;
	if (dir)
		pc_strlcpy(w->dir, dir, sizeof(w->dir));
	for (size_t i = 0; i < n_logs; i++) {
		struct witness_log *l = &w->logs[w->n_logs++];

		l->key = logs[i];
		/* the bare name's state now; each segment's when it is asked for */
		if ((rc = state_read(w, l, 0, &l->cp, err)) < 0 || (rc = head_scan(w, l, err)) < 0)
			goto fail;
	}
	*out = w;
	return 0;
fail:
	witness_free(w);
	return rc;
}

void witness_free(struct witness *w)
{
	if (!w)
		return;
	merkle_hasher_free(w->h);
	for (size_t i = 0; i < w->n_logs; i++)
		free(w->logs[i].seg);
	free(w);
}

/* ---- POST /add-checkpoint ---------------------------------------------- */

/* One history per key: an origin other than the newest one cosigned for
 * l (seg: cp's) is refused (409) unless it is a new origin whose
 * checkpoint names, as its previous one, exactly the newest checkpoint
 * cosigned for the head. So an origin once superseded never grows (a
 * segment put back after the next one began), and an origin that does
 * not continue the history (a log begun again over lost files) is never
 * cosigned; 200 otherwise. */
static int head_check(struct witness *w, struct witness_log *l, uint64_t seg,
		      const struct checkpoint *cp)
{
	struct checkpoint *hst = NULL;
	struct pc_err err;

	if (seg < l->head) {
		pc_log(PC_LOG_WARN,
		       "%s: refused: a newer origin of this key (%s/%llu) has been cosigned since: "
		       "this one was superseded and may not grow",
		       cp->origin, l->key.name, (unsigned long long)l->head);
		return 409;
	}
	if (origin_state(w, l, l->head, &hst, &err) < 0) {
		pc_log(PC_LOG_ERR, "%s: %s", cp->origin, err.msg);
		return 500;
	}
	if (!cp->has_prev || cp->prev_seg != l->head || cp->prev_size != hst->size ||
	    memcmp(cp->prev_root, hst->root, MERKLE_HASH) != 0) {
		pc_log(PC_LOG_WARN,
		       "%s: refused: a new origin must continue the newest one cosigned for this "
		       "key, %s (%llu records), and this one %s",
		       cp->origin, hst->origin, (unsigned long long)hst->size,
		       !cp->has_prev ? "names no previous checkpoint (a log begun again)"
				     : "names another previous checkpoint");
		return 409;
	}
	return 200;
}

int witness_add_checkpoint(struct witness *w, const char *body, size_t len, uint64_t now_s,
			   char *resp, size_t resplen)
{
	struct witness_req r;
	struct witness_log *l = NULL;
	struct checkpoint cp, *st = NULL;
	struct pc_err err;
	size_t olen, blen;
	uint64_t seg = 0;
	int n;

	if (witness_req_parse(body, len, &r, &err) < 0) {
		snprintf(resp, resplen, "%s\n", err.msg);
		return 400;
	}
	{ /* the body is not NUL-terminated: bounded search */
		const char *nl = memchr(r.note, '\n', r.note_len);

		olen = nl ? (size_t)(nl - r.note) : r.note_len;
	}
	if (olen == r.note_len) {
		snprintf(resp, resplen, "the checkpoint has no origin line\n");
		return 400;
	}
	/* the key whose name is the origin, else one whose name and a "/"
	 * begin it (a segment's origin; checkpoint_open checks the rest) */
	for (size_t i = 0; i < w->n_logs; i++)
		if (strlen(w->logs[i].key.name) == olen &&
		    memcmp(w->logs[i].key.name, r.note, olen) == 0)
			l = &w->logs[i];
	for (size_t i = 0; i < w->n_logs && !l; i++) {
		size_t kl = strlen(w->logs[i].key.name);

		if (kl < olen && r.note[kl] == '/' && memcmp(w->logs[i].key.name, r.note, kl) == 0)
			l = &w->logs[i];
	}
	if (!l) {
		snprintf(resp, resplen, "unknown log\n");
		return 404;
	}
	if (checkpoint_open(&l->key, r.note, r.note_len, &cp, &err) < 0) {
		snprintf(resp, resplen, "%s\n", err.msg);
		return err.code == PC_EPARSE ? 400 : 403;
	}
	if (checkpoint_origin_seg(cp.origin, l->key.name, &seg) < 0 ||
	    origin_state(w, l, seg, &st, &err) < 0) {
		pc_log(PC_LOG_ERR, "%s: %s", cp.origin, err.msg);
		snprintf(resp, resplen, "the witness could not read its state\n");
		return 500;
	}
	if (r.old > cp.size) {
		snprintf(resp, resplen, "old size %llu is larger than the checkpoint's %llu\n",
			 (unsigned long long)r.old, (unsigned long long)cp.size);
		return 400;
	}
	if (r.old != st->size) {
		snprintf(resp, resplen, "%llu\n", (unsigned long long)st->size);
		return 409;
	}
	if (l->has_head && seg != l->head) {
		int status = head_check(w, l, seg, &cp);

		if (status != 200) {
			snprintf(resp, resplen, "%llu\n", (unsigned long long)st->size);
			return status;
		}
	}
	if (cp.size == st->size && st->size && memcmp(cp.root, st->root, MERKLE_HASH) != 0) {
		/* two trees of one size: a split view; keep the evidence */
		pc_log(PC_LOG_WARN,
		       "%s: split view: a checkpoint for %llu records with another root than the "
		       "one cosigned; refused",
		       cp.origin, (unsigned long long)cp.size);
		snprintf(resp, resplen, "%llu\n", (unsigned long long)st->size);
		return 409;
	}
	if (merkle_consistency_verify(w->h, r.old, cp.size, st->root, cp.root,
				      (const uint8_t(*)[MERKLE_HASH])r.proof, r.proof_len) < 0) {
		pc_log(PC_LOG_WARN,
		       "%s: the checkpoint for %llu records is not consistent with the one for "
		       "%llu it cosigned; refused",
		       cp.origin, (unsigned long long)cp.size, (unsigned long long)st->size);
		snprintf(resp, resplen, "the consistency proof does not verify\n");
		return 422;
	}
	if (note_verify(&l->key, r.note, r.note_len, &blen, &err) < 0) {
		snprintf(resp, resplen, "%s\n", err.msg);
		return 403;
	}
	if (cp.size > st->size || !st->size) {
		if (w->dir[0]) {
			char path[PC_PATH_MAX + 48], keep[WITNESS_STATE_MAX];
			size_t klen;

			/* only what was verified: the body and the log's own
			 * signature, never other lines a client added */
			if (state_text(l, r.note, r.note_len, blen, keep, &klen) < 0) {
				snprintf(resp, resplen,
					 "the checkpoint and its log signature are longer than %d "
					 "bytes\n",
					 WITNESS_STATE_MAX);
				return 400;
			}
			state_path(w, l, seg, path, sizeof(path));
			if (state_write(w->dir, path, keep, klen, &err) < 0) {
				pc_log(PC_LOG_ERR, "%s", err.msg);
				snprintf(resp, resplen, "the witness could not keep its state\n");
				return 500;
			}
		}
		*st = cp;
		if (!l->has_head || seg > l->head) {
			l->head = seg;
			l->has_head = true;
		}
	}
	n = cosig_sign(w->signer, r.note, blen, now_s, resp, resplen, &err);
	if (n < 0) {
		snprintf(resp, resplen, "%s\n", err.msg);
		return 500;
	}
	pc_log(PC_LOG_DEBUG, "%s: cosigned %llu records", cp.origin, (unsigned long long)cp.size);
	return 200;
}

/* ---- the server ---------------------------------------------------------- */

static const char *reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 409:
		return "Conflict";
	case 422:
		return "Unprocessable Entity";
	default:
		return "Internal Server Error";
	}
}

static void reply(int fd, int status, const char *body)
{
	char buf[1024 + COSIG_LINE_MAX];
	int n = snprintf(buf, sizeof(buf),
			 "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n%s",
			 status, reason(status),
			 status == 409 ? "text/x.tlog.size" : "text/plain; charset=utf-8",
			 strlen(body), body);

	if (n > 0 && (size_t)n < sizeof(buf) && send(fd, buf, (size_t)n, MSG_NOSIGNAL) < 0)
		pc_log(PC_LOG_DEBUG, "reply: %s", strerror(errno));
}

/* One request per connection, each within IO_TIMEOUT_MS of its accept. The
 * witness serves up to WITNESS_CONNS connections at once from one poll
 * loop: a client that connects and says nothing (or trickles) holds only
 * its own slot until its deadline, never the other logs' cosignatures —
 * with log.witness.required set, a stalled witness stops every gateway
 * that uses it. */
#define WITNESS_CONNS 64
/* ... and at most this many of them from one source address, so that one
 * source cannot take every slot (issue 32). */
#define WITNESS_CONNS_PER_SOURCE 8

struct wconn {
	int fd; /* -1: a free slot */
	uint64_t deadline;
	size_t have, head, blen;
	bool add;
	int rc;	   /* witness_http_head's: PC_EAGAIN until the head is whole */
	char *buf; /* HEAD_MAX + WITNESS_BODY_MAX */
	struct sockaddr_storage src;
	socklen_t src_len;
};

static void conn_close(struct wconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* What arrived on c: read it, and once the request is whole answer it.
 * Returns true when c is done (answered, refused or gone). */
static bool conn_read(struct witness *w, struct wconn *c)
{
	char resp[1024 + COSIG_LINE_MAX];
	struct pc_err err;
	ssize_t r;
	int status;

	r = recv(c->fd, c->buf + c->have, HEAD_MAX + WITNESS_BODY_MAX - c->have, MSG_DONTWAIT);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return false;
	if (r <= 0)
		return true;
	c->have += (size_t)r;
	if (c->rc == PC_EAGAIN) {
		c->rc = witness_http_head(c->buf, c->have, &c->head, &c->blen, &c->add, &err);
		if (c->rc < 0 && c->rc != PC_EAGAIN) {
			reply(c->fd, 400, "malformed request\n");
			return true;
		}
	}
	if (c->rc != 0 || c->have < c->head + c->blen)
		return false;
	if (!c->add) {
		reply(c->fd, 404, "only POST /add-checkpoint\n");
		return true;
	}
	status = witness_add_checkpoint(w, c->buf + c->head, c->blen, (uint64_t)time(NULL), resp,
					sizeof(resp));
	reply(c->fd, status, resp);
	return true;
}

static int conn_open(struct wconn *c, int fd)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->rc = PC_EAGAIN;
	c->deadline = pc_now_mono_ms() + IO_TIMEOUT_MS;
	if (!(c->buf = malloc(HEAD_MAX + WITNESS_BODY_MAX))) {
		conn_close(c);
		return PC_ENOMEM;
	}
	return 0;
}

void witness_serve_fd(struct witness *w, int fd)
{
	struct wconn c;

	if (conn_open(&c, dup(fd)) < 0)
		return;
	for (;;) {
		struct pollfd pfd = {.fd = c.fd, .events = POLLIN};
		uint64_t now = pc_now_mono_ms();

		if (c.fd < 0 || now >= c.deadline || poll(&pfd, 1, (int)(c.deadline - now)) <= 0)
			break;
		if (conn_read(w, &c))
			break;
	}
	conn_close(&c);
}

/* The address alone (no port): one host is one source. An IPv6 host is
 * handed a whole /64 (RFC 7421) and picks any address in it, so a /64 is one
 * source; an IPv4 client of a dual-stack listener arrives as ::ffff:a.b.c.d
 * and is still one address, or every IPv4 client would share one cap. */
static bool same_source(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	const struct in6_addr *a6, *b6;

	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family != AF_INET6)
		return true; /* another family: one source */
	a6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
	b6 = &((const struct sockaddr_in6 *)b)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a6) || IN6_IS_ADDR_V4MAPPED(b6))
		return memcmp(a6, b6, sizeof(*a6)) == 0;
	return memcmp(a6, b6, 8) == 0;
}

static size_t source_count(const struct wconn *conns, const struct sockaddr_storage *sa,
			   socklen_t sl)
{
	size_t n = 0;

	for (size_t i = 0; sl && i < WITNESS_CONNS; i++)
		if (conns[i].fd >= 0 && conns[i].src_len && same_source(&conns[i].src, sa))
			n++;
	return n;
}

int witness_serve(struct witness *w, int lfd, struct pc_err *err)
{
	struct wconn conns[WITNESS_CONNS];
	struct pollfd p[2 + WITNESS_CONNS];
	size_t slot[WITNESS_CONNS];
	sigset_t set;
	int sfd, rc = 0;

	for (size_t i = 0; i < WITNESS_CONNS; i++) {
		memset(&conns[i], 0, sizeof(conns[i]));
		conns[i].fd = -1;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if ((sfd = signalfd(-1, &set, SFD_CLOEXEC)) < 0)
		return pc_err_errno(err, PC_EIO, "signalfd");
	for (;;) {
		uint64_t now = pc_now_mono_ms(), next = UINT64_MAX;
		size_t np = 2, free_slots = 0;
		int timeout;

		for (size_t i = 0; i < WITNESS_CONNS; i++) {
			if (conns[i].fd < 0) {
				free_slots++;
				continue;
			}
			if (now >= conns[i].deadline) { /* too slow: its slot back */
				conn_close(&conns[i]);
				free_slots++;
				continue;
			}
			if (conns[i].deadline < next)
				next = conns[i].deadline;
			slot[np - 2] = i;
			p[np++] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
		}
		/* all slots busy: new clients wait in the listen backlog */
		p[0] = (struct pollfd){.fd = free_slots ? lfd : -1, .events = POLLIN};
		p[1] = (struct pollfd){.fd = sfd, .events = POLLIN};
		timeout = next == UINT64_MAX ? -1 : (int)(next - now);
		if (poll(p, np, timeout) < 0) {
			if (errno == EINTR)
				continue;
			rc = pc_err_errno(err, PC_EIO, "poll");
			break;
		}
		if (p[1].revents)
			break;
		for (size_t k = 2; k < np; k++)
			if (p[k].revents && conn_read(w, &conns[slot[k - 2]]))
				conn_close(&conns[slot[k - 2]]);
		if (p[0].revents) {
			struct sockaddr_storage sa;
			socklen_t sl = sizeof(sa);
			int fd =
			    accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);

			if (fd >= 0 && source_count(conns, &sa, sl) >= WITNESS_CONNS_PER_SOURCE) {
				close(fd); /* its share is taken: the others keep theirs */
				fd = -1;
			}
			for (size_t i = 0; fd >= 0 && i < WITNESS_CONNS; i++)
				if (conns[i].fd < 0) {
					if (conn_open(&conns[i], fd) < 0)
						pc_log(PC_LOG_WARN,
						       "out of memory for a connection");
					else {
						conns[i].src = sa;
						conns[i].src_len = sl;
					}
					fd = -1;
				}
		}
	}
	for (size_t i = 0; i < WITNESS_CONNS; i++)
		conn_close(&conns[i]);
	close(sfd);
	return rc;
}

/* ---- portcullis-logd --witness ------------------------------------------- */

#define WUSAGE                                                                                     \
	"usage: portcullis-logd --witness --listen ADDR:PORT --key FILE --state DIR\n"             \
	"                       --log PUB [--log PUB]... [--name NAME] [-v]\n"                     \
	"  --listen    address and port to serve C2SP tlog-witness on (HTTP)\n"                    \
	"  --key       the witness's private key (created at the first start, with\n"              \
	"              FILE.pub: its cosignature/v1 public key for the logs' operators)\n"         \
	"  --state     directory of the latest cosigned checkpoint of each log\n"                  \
	"  --log       a log's public key (log.key.pub): the logs this witness serves\n"           \
	"  --name      the witness's key name at creation (default <hostname>/witness)\n"

static int listen_tcp(const char *hostport, struct pc_err *err)
{
	char host[256], *colon;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res = NULL;
	int fd = -1, one = 1;

	pc_strlcpy(host, hostport, sizeof(host));
	colon = strrchr(host, ':');
	if (!colon)
		return pc_err_set(err, PC_EINVAL, "--listen %s is not address:port", hostport);
	*colon = '\0';
	if (host[0] == '[' && colon[-1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	if (getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res) != 0 || !res)
		return pc_err_set(err, PC_EINVAL, "--listen %s: not an address", hostport);
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 64) < 0) {
		pc_err_errno(err, PC_EIO, "listening on %s", hostport);
		if (fd >= 0)
			close(fd);
		fd = PC_EIO;
	}
	freeaddrinfo(res);
	return fd;
}

/* The witness's own key files: its signing key (0600) and the logs' public
 * keys. Read here, not through logd (which is above the witness in the
 * module order): a file read, then the core's parser. */
static int key_load(const char *path, struct note_signer **out, struct pc_err *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc = pc_file_read(path, 4096, &text, &len, err);

	if (rc < 0)
		return rc;
	if ((rc = note_signer_parse(text, out, err)) < 0)
		pc_err_prefix(err, "%s: ", path);
	sodium_memzero(text, len);
	free(text);
	return rc;
}

static int key_write(const char *path, const struct note_signer *s, struct pc_err *err)
{
	char text[NOTE_NAME_MAX + 128];
	int n = note_signer_format(s, text, sizeof(text)), rc;

	if (n < 0)
		return pc_err_set(err, PC_EINVAL, "key does not fit");
	rc = pc_file_write_atomic(path, text, (size_t)n, 0600, err);
	sodium_memzero(text, sizeof(text));
	return rc;
}

static int log_key_load(const char *path, struct note_verifier *out, struct pc_err *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc = pc_file_read(path, 4096, &text, &len, err);

	if (rc < 0)
		return rc;
	if ((rc = note_verifier_parse(text, out, err)) < 0)
		pc_err_prefix(err, "%s: ", path);
	free(text);
	return rc;
}

static int witness_key(const char *path, const char *name, struct note_signer **out,
		       struct pc_err *err)
{
	struct cosig_verifier cv;
	char def[NOTE_NAME_MAX], host[64] = "localhost", pub[PC_PATH_MAX + 8], text[256];
	int rc = key_load(path, out, err), n;

	if (rc != PC_ENOENT)
		return rc;
	if (!name) {
		gethostname(host, sizeof(host) - 1);
		snprintf(def, sizeof(def), "%s/witness", host);
		name = def;
	}
	if ((rc = note_signer_generate(name, out, err)) < 0 ||
	    (rc = key_write(path, *out, err)) < 0)
		goto fail;
	/* FILE.pub: the cosignature key, what the logs' operators configure */
	cosig_verifier_from(*out, &cv);
	n = cosig_verifier_format(&cv, text, sizeof(text));
	snprintf(pub, sizeof(pub), "%s.pub", path);
	if (n < 0 || (rc = pc_file_write_atomic(pub, text, (size_t)n, 0644, err)) < 0)
		goto fail;
	pc_log(PC_LOG_NOTICE, "created the witness key %s; its public key %s: %.*s", path, pub,
	       n - 1, text);
	return 0;
fail:
	note_signer_free(*out);
	*out = NULL;
	return rc < 0 ? rc : PC_EIO;
}

int witness_main(int argc, char **argv)
{
	static const struct option o[] = {{"witness", no_argument, NULL, 'W'},
					  {"listen", required_argument, NULL, 'l'},
					  {"key", required_argument, NULL, 'k'},
					  {"state", required_argument, NULL, 's'},
					  {"log", required_argument, NULL, 'L'},
					  {"name", required_argument, NULL, 'n'},
					  {NULL, 0, NULL, 0}};
	const char *listen_at = NULL, *keyp = NULL, *state = NULL, *name = NULL;
	struct note_verifier logs[WITNESS_LOGS_MAX];
	struct note_signer *key = NULL;
	struct witness *w = NULL;
	struct pc_err err = {0};
	size_t n_logs = 0;
	int opt, rc = 0, lfd = -1;
	enum pc_loglevel lvl = PC_LOG_INFO;
	sigset_t set;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "v", o, NULL)) != -1) {
		switch (opt) {
		case 'W':
			break;
		case 'l':
			listen_at = optarg;
			break;
		case 'k':
			keyp = optarg;
			break;
		case 's':
			state = optarg;
			break;
		case 'n':
			name = optarg;
			break;
		case 'v':
			lvl = PC_LOG_DEBUG;
			break;
		case 'L':
			if (n_logs == WITNESS_LOGS_MAX) {
				fprintf(stderr, "portcullis-logd: at most %d --log\n",
					WITNESS_LOGS_MAX);
				return PC_EXIT_USAGE;
			}
			if (log_key_load(optarg, &logs[n_logs], &err) < 0) {
				fprintf(stderr, "portcullis-logd: --log %s\n", err.msg);
				return PC_EXIT_ERROR;
			}
			n_logs++;
			break;
		default:
			fputs(WUSAGE, stderr);
			return PC_EXIT_USAGE;
		}
	}
	if (optind != argc || !listen_at || !keyp || !state || !n_logs) {
		fputs(WUSAGE, stderr);
		return PC_EXIT_USAGE;
	}
	pc_log_init("portcullis-logd[witness]", lvl);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (mkdir(state, 0700) < 0 && errno != EEXIST) {
		rc = pc_err_errno(&err, PC_EIO, "creating %s", state);
		goto out;
	}
	if ((rc = witness_key(keyp, name, &key, &err)) < 0 ||
	    (rc = witness_new(key, logs, n_logs, state, &w, &err)) < 0)
		goto out;
	if ((lfd = listen_tcp(listen_at, &err)) < 0) {
		rc = lfd;
		goto out;
	}
	for (size_t i = 0; i < w->n_logs; i++)
		pc_log(PC_LOG_NOTICE, "witnessing %s+%08x: %llu records cosigned so far",
		       w->logs[i].key.name, w->logs[i].key.hash,
		       (unsigned long long)w->logs[i].cp.size);
	pc_log(PC_LOG_NOTICE, "serving C2SP tlog-witness on %s as %s", listen_at,
	       note_signer_verifier(key)->name);
	pc_sd_notify("READY=1", NULL);
	rc = witness_serve(w, lfd, &err);
out:
	if (rc < 0)
		pc_log(PC_LOG_ERR, "%s", err.msg);
	if (lfd >= 0)
		close(lfd);
	witness_free(w);
	note_signer_free(key);
	return pc_daemon_exit(rc, false);
}
