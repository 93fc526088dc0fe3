/* Moving one exchange's bytes: the request body upstream (scanned for
 * placeholders), the response back (real values scrubbed, re-framed when
 * scrubbing may change its length), and WebSocket tunnels after a 101. */
#include "vault/vault_int.h"

#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SMALL_BODY 65536 /* Content-Length bodies up to this are scrubbed whole */

static uint64_t idle_deadline(struct conn *c)
{
	return pc_now_mono_ms() + c->d->cfg.vault.idle_timeout_ms;
}

/* The deadline of one wait while the request is read and sent: the idle
 * timeout, cut to the whole request's (read_head set it). */
static uint64_t request_deadline(struct conn *c)
{
	uint64_t d = idle_deadline(c);

	return c->req_deadline && c->req_deadline < d ? c->req_deadline : d;
}

/* Did a timeout come from the whole request's deadline? */
static bool request_timed_out(struct conn *c)
{
	if (c->req_deadline && pc_now_mono_ms() >= c->req_deadline) {
		c->req_timed_out = true;
		c->why = "the request (head and body) was not completed within "
			 "vault.request_timeout_ms";
		return true;
	}
	return false;
}

/* Make sure client bytes are available; returns how many (0: EOF/error). */
static size_t client_avail(struct conn *c)
{
	int n;

	if (c->in_off < c->in_len)
		return c->in_len - c->in_off;
	c->in_off = c->in_len = 0;
	n = io_read(c->ssl, c->fd, c->in, c->in_cap, request_deadline(c));
	if (n <= 0) {
		if (n == PC_ETIMEOUT && request_timed_out(c))
			return 0;
		c->why = n == PC_ETIMEOUT ? "the client sent no more of the request within "
					    "vault.idle_timeout_ms"
					  : "the client closed the connection mid-request";
		return 0;
	}
	c->in_len = (size_t)n;
	return (size_t)n;
}

static size_t upstream_avail(struct conn *c, int *eof)
{
	int n;

	*eof = 0;
	if (c->uoff < c->ulen)
		return c->ulen - c->uoff;
	c->uoff = c->ulen = 0;
	n = io_read(c->ussl, c->ufd, c->ubuf, c->ucap, idle_deadline(c));
	if (n <= 0) {
		*eof = n == 0 ? 1 : -1;
		return 0;
	}
	c->ulen = (size_t)n;
	return (size_t)n;
}

static int to_upstream(void *ctx, const uint8_t *p, size_t n)
{
	struct conn *c = ctx;
	int rc = io_write(c->ussl, c->ufd, p, n, request_deadline(c));

	if (rc == PC_ETIMEOUT && request_timed_out(c))
		return rc;
	if (rc < 0)
		c->why = rc == PC_ETIMEOUT ? "upstream took no more of the request within "
					     "vault.idle_timeout_ms"
					   : "upstream closed the connection mid-request";
	return rc;
}

/* Request bodies up to this size are read and scanned whole before the
 * head goes upstream, so a placeholder in them means the upstream sees
 * nothing at all; larger ones are streamed, and a placeholder found midway
 * cuts the upstream connection before it is sent. */
#define BODY_HOLD (1024 * 1024)

struct body_out {
	struct conn *c;
	const uint8_t *head; /* the injected head: sent first */
	size_t head_len;
	bool head_sent;
	uint8_t *buf; /* body held back so far */
	size_t len, cap;
};

/* Send the head and whatever body was held back. */
static int body_release(struct body_out *b)
{
	int rc;

	if (!b->head_sent) {
		struct conn *c = b->c;

		b->head_sent = true;
		if (b->len && b->head == c->out && b->head_len + b->len <= c->out_cap) {
			/* a small body leaves with the head: one TLS record,
			 * one segment, one wake-up upstream */
			memcpy(c->out + b->head_len, b->buf, b->len);
			rc = to_upstream(c, c->out, b->head_len + b->len);
			sodium_memzero(c->out + b->head_len, b->len);
			b->len = 0;
			return rc;
		}
		if ((rc = to_upstream(c, b->head, b->head_len)) < 0)
			return rc;
	}
	rc = b->len ? to_upstream(b->c, b->buf, b->len) : 0;
	b->len = 0;
	return rc;
}

static int body_sink(void *ctx, const uint8_t *p, size_t n)
{
	struct body_out *b = ctx;
	int rc;

	if (!b->head_sent) {
		if (b->len + n <= BODY_HOLD) {
			if (b->len + n > b->cap) {
				size_t cap =
				    (b->len + n) * 2 < BODY_HOLD ? (b->len + n) * 2 : BODY_HOLD;
				uint8_t *nb = malloc(cap);

				if (!nb)
					return PC_ENOMEM;
				/* not realloc: the old copy is wiped, not left behind */
				if (b->buf) {
					memcpy(nb, b->buf, b->len);
					sodium_memzero(b->buf, b->cap);
					free(b->buf);
				}
				b->buf = nb;
				b->cap = cap;
			}
			memcpy(b->buf + b->len, p, n);
			b->len += n;
			return 0;
		}
		if ((rc = body_release(b)) < 0)
			return rc;
	}
	return to_upstream(b->c, p, n);
}

static int discard(void *ctx, const uint8_t *p, size_t n)
{
	(void)ctx, (void)p, (void)n;
	return 0;
}

/* Request body: every byte (framing included) passes the placeholder
 * scanner s on its way to the body sink; a chunked body's payload also
 * passes ds by itself, since a placeholder split across two chunks is whole
 * again once the upstream decodes them (tests/escape/vault.sh). The
 * payload passes the decoding scanner fs; a chunked body's bytes as sent
 * pass rfs too, for its chunk extensions and trailer fields, which an
 * application may read and decode as well. Returns 0, PC_EREFUSED (s->hit
 * set), PC_EPARSE (bad chunked framing) or another error. */
static int relay_body_scan(struct conn *c, const struct http_request *req, struct scrub *s,
			   struct scrub *ds, struct ph_stream *fs, struct ph_stream *rfs,
			   struct body_out *bo)
{
	uint64_t remaining = req->content_length;
	struct http_chunked ch;
	struct pc_err e;
	int rc;

	http_chunked_init(&ch);
	for (;;) {
		size_t avail = client_avail(c), take, off, dl;
		bool done;

		if (!avail)
			return PC_EIO;
		if (req->body == HTTP_BODY_LENGTH) {
			take = avail < remaining ? avail : (size_t)remaining;
			remaining -= take;
			done = !remaining;
			/* the payload percent-decoded and case-folded, as an
			 * application may read a form or a query string */
			if ((s->hit = ph_stream_feed(fs, (uint8_t *)c->in + c->in_off, take)) >= 0)
				return PC_EREFUSED;
		} else {
			rc = http_chunked_feed(&ch, c->in + c->in_off, avail, &take, &off, &dl, &e);
			if (rc < 0)
				return PC_EPARSE;
			done = rc == 1;
			if ((s->hit = ph_stream_feed(rfs, (uint8_t *)c->in + c->in_off, take)) >= 0)
				return PC_EREFUSED;
			if (dl && (s->hit = ph_stream_feed(fs, (uint8_t *)c->in + c->in_off + off,
							   dl)) >= 0)
				return PC_EREFUSED;
			if (dl && scrub_feed(ds, (uint8_t *)c->in + c->in_off + off, dl, discard,
					     NULL) == PC_EREFUSED) {
				s->hit = ds->hit;
				return PC_EREFUSED;
			}
		}
		if ((rc = scrub_feed(s, (uint8_t *)c->in + c->in_off, take, body_sink, bo)) < 0)
			return rc;
		c->in_off += take;
		if (done)
			break;
	}
	/* the end of the body is judged too: the decoded scanner still holds
	 * its last (longest placeholder - 1) bytes, which may end one */
	if (req->body == HTTP_BODY_CHUNKED && scrub_finish(ds, discard, NULL) == PC_EREFUSED) {
		s->hit = ds->hit;
		return PC_EREFUSED;
	}
	return scrub_finish(s, body_sink, bo);
}

static int relay_body(struct conn *c, const struct http_request *req, struct scrub *s,
		      const struct vault_store *store, struct body_out *bo)
{
	struct ph_stream fs, rfs;
	struct scrub ds;
	int rc;

	if (req->body == HTTP_BODY_NONE)
		return 0;
	if ((rc = scrub_init(&ds, s->pats, s->n_pats, NULL)) < 0)
		return rc;
	ph_stream_init(&fs, store);
	ph_stream_init(&rfs, store);
	rc = relay_body_scan(c, req, s, &ds, &fs, &rfs, bo);
	ph_stream_wipe(&fs);
	ph_stream_wipe(&rfs);
	scrub_free(&ds);
	return rc;
}

/* Read until a response head is parsed at ubuf[uoff..]. */
static int read_response_head(struct conn *c, bool for_head, struct http_response *resp,
			      struct pc_err *err)
{
	size_t maxh = c->d->cfg.vault.max_header_bytes;

	for (;;) {
		int rc = http_response_parse(c->ubuf + c->uoff, c->ulen - c->uoff, maxh, for_head,
					     resp, err);
		int n;

		if (rc > 0)
			return 0;
		if (rc != PC_EAGAIN)
			return rc;
		if (c->uoff) {
			memmove(c->ubuf, c->ubuf + c->uoff, c->ulen - c->uoff);
			c->ulen -= c->uoff;
			c->uoff = 0;
		}
		if (c->ulen >= c->ucap)
			return pc_err_set(err, PC_EPARSE, "upstream response head too large");
		/* the upstream has to answer: poll first, no read that says EAGAIN */
		n = io_read_wait(c->ussl, c->ufd, c->ubuf + c->ulen, c->ucap - c->ulen,
				 idle_deadline(c));
		if (n == PC_ETIMEOUT)
			return pc_err_set(err, PC_ETIMEOUT,
					  "upstream sent no response within "
					  "vault.idle_timeout_ms (%u ms)",
					  (unsigned)c->d->cfg.vault.idle_timeout_ms);
		if (n <= 0)
			return pc_err_set(err, PC_EIO,
					  "upstream closed the connection without a "
					  "response");
		c->ulen += (size_t)n;
	}
}

/* The response head for the sandbox, without its final CRLF and framing:
 * status line and headers, hop-by-hop and framing headers dropped unless
 * the head passes unchanged (no body, 101). Scrubbed. */
static int response_head(struct conn *c, const struct http_response *r, bool keep_framing,
			 const struct scrub_pat *pats, size_t n_pats, uint8_t **out, size_t *len)
{
	size_t cap = http_response_head_max(r), n;
	char *hb = malloc(cap);
	struct pc_err e;
	int rc;

	if (!hb)
		return PC_ENOMEM;
	n = http_response_head_rebuild(c->ubuf + c->uoff, r, keep_framing, hb, cap);
	rc = n ? scrub_buffer(pats, n_pats, (uint8_t *)hb, n, out, len, &e) : PC_EINVAL;
	sodium_memzero(hb, cap);
	free(hb);
	return rc;
}

/* Response bodies that are streamed go out through this sink: chunked for
 * HTTP/1.1 clients, raw (and the connection closed) for HTTP/1.0 ones. */
struct sink {
	struct conn *c;
	bool chunked;
	size_t len;
	uint8_t buf[16 + CONN_IO_BUF + 2];
};

static int sink_flush(struct sink *k)
{
	char pre[16];
	int pl;

	if (!k->len)
		return 0;
	if (!k->chunked) {
		int rc = io_write(k->c->ssl, k->c->fd, k->buf + 16, k->len, idle_deadline(k->c));

		k->len = 0;
		return rc;
	}
	pl = snprintf(pre, sizeof(pre), "%zx\r\n", k->len);
	memcpy(k->buf + 16 - pl, pre, (size_t)pl);
	memcpy(k->buf + 16 + k->len, "\r\n", 2);
	pl = io_write(k->c->ssl, k->c->fd, k->buf + 16 - pl, (size_t)pl + k->len + 2,
		      idle_deadline(k->c));
	sodium_memzero(k->buf, sizeof(k->buf));
	k->len = 0;
	return pl;
}

static int sink_out(void *ctx, const uint8_t *p, size_t n)
{
	struct sink *k = ctx;

	while (n) {
		size_t room = CONN_IO_BUF - k->len, t = n < room ? n : room;
		int rc;

		memcpy(k->buf + 16 + k->len, p, t);
		k->len += t;
		p += t;
		n -= t;
		if (k->len == CONN_IO_BUF && (rc = sink_flush(k)) < 0)
			return rc;
	}
	return 0;
}

/* Stream the upstream body through the scrubber into the sink. */
static int stream_body(struct conn *c, const struct http_response *r, struct scrub *s,
		       struct sink *k)
{
	uint64_t remaining = r->content_length;
	struct http_chunked ch;
	struct pc_err e;
	int rc, eof;

	http_chunked_init(&ch);
	for (;;) {
		size_t avail = upstream_avail(c, &eof), take, off = 0, dl;
		bool done = false;

		if (!avail) {
			if (r->body == HTTP_BODY_CLOSE && eof == 1)
				break;
			return PC_EIO; /* truncated: the sandbox must not see a whole body */
		}
		if (r->body == HTTP_BODY_CHUNKED) {
			rc = http_chunked_feed(&ch, c->ubuf + c->uoff, avail, &take, &off, &dl, &e);
			if (rc < 0)
				return PC_EPARSE;
			done = rc == 1;
		} else if (r->body == HTTP_BODY_LENGTH) {
			take = dl = avail > remaining ? (size_t)remaining : avail;
			remaining -= take;
			done = !remaining;
		} else {
			take = dl = avail;
		}
		if (dl &&
		    (rc = scrub_feed(s, (uint8_t *)c->ubuf + c->uoff + off, dl, sink_out, k)) < 0)
			return rc;
		c->uoff += take;
		if (done)
			break;
	}
	if ((rc = scrub_finish(s, sink_out, k)) < 0 || (rc = sink_flush(k)) < 0)
		return rc;
	if (k->chunked)
		return io_write(c->ssl, c->fd, "0\r\n\r\n", 5, idle_deadline(c));
	return 0;
}

/* Read a whole small body and scrub it at once: it keeps an exact
 * Content-Length. */
static int small_body(struct conn *c, const struct http_response *r, const struct scrub_pat *pats,
		      size_t n_pats, uint8_t **out, size_t *out_len)
{
	size_t got = 0, need = (size_t)r->content_length;
	uint8_t *b = malloc(need ? need : 1);
	struct pc_err e;
	int eof, rc;

	if (!b)
		return PC_ENOMEM;
	while (got < need) {
		size_t avail = upstream_avail(c, &eof), t;

		if (!avail) {
			sodium_memzero(b, need);
			free(b);
			return PC_EIO;
		}
		t = avail < need - got ? avail : need - got;
		memcpy(b + got, c->ubuf + c->uoff, t);
		got += t;
		c->uoff += t;
	}
	rc = scrub_buffer(pats, n_pats, b, need, out, out_len, &e);
	sodium_memzero(b, need);
	free(b);
	return rc;
}

/* Send the response whose head is parsed at ubuf[uoff..] and its body.
 * 0 with *next (what the client connection is fit for after it), or <0
 * when the response broke midway. */
static int relay_response(struct conn *c, const struct http_request *req,
			  const struct http_response *r, const struct scrub_pat *pats,
			  size_t n_pats, enum conn_next *next)
{
	bool client_keep = req->keep_alive && r->status != 101;
	bool small = r->body == HTTP_BODY_LENGTH && r->content_length <= SMALL_BODY;
	bool keep_framing = r->body == HTTP_BODY_NONE || r->status == 101;
	uint8_t *head = NULL, *body = NULL, *msg = NULL;
	size_t hl = 0, bl = 0, ml;
	char framing[96];
	int rc;

	if (!keep_framing && !small && req->minor == 0)
		client_keep = false; /* an HTTP/1.0 client gets a close-delimited body */
	rc = response_head(c, r, keep_framing, pats, n_pats, &head, &hl);
	if (rc < 0)
		return rc;
	c->uoff += r->head_len;
	if (small && (rc = small_body(c, r, pats, n_pats, &body, &bl)) < 0)
		goto out;
	if (keep_framing)
		snprintf(framing, sizeof(framing), "%s",
			 !client_keep && r->status != 101 &&
				 http_header_find(r->hdr, r->n_hdr, "connection", 0) < 0
			     ? "Connection: close\r\n\r\n"
			     : "\r\n");
	else if (small)
		snprintf(framing, sizeof(framing), "Content-Length: %zu\r\n%s\r\n", bl,
			 client_keep ? "" : "Connection: close\r\n");
	else if (req->minor == 1)
		snprintf(framing, sizeof(framing), "Transfer-Encoding: chunked\r\n%s\r\n",
			 client_keep ? "" : "Connection: close\r\n");
	else
		snprintf(framing, sizeof(framing), "Connection: close\r\n\r\n");
	ml = hl + strlen(framing) + bl;
	msg = malloc(ml);
	if (!msg) {
		rc = PC_ENOMEM;
		goto out;
	}
	memcpy(msg, head, hl);
	memcpy(msg + hl, framing, strlen(framing));
	if (bl)
		memcpy(msg + hl + strlen(framing), body, bl);
	/* one write: head and small body leave in one TLS record */
	if ((rc = io_write(c->ssl, c->fd, msg, ml, idle_deadline(c))) < 0)
		goto out;
	if (!keep_framing && !small) {
		struct sink *k = calloc(1, sizeof(*k));
		struct scrub s;

		if (!k) {
			rc = PC_ENOMEM;
			goto out;
		}
		k->c = c;
		k->chunked = req->minor == 1;
		/* a scrubber that cannot scan must not pass the body on */
		rc = scrub_init(&s, pats, n_pats, NULL);
		if (rc == 0)
			rc = stream_body(c, r, &s, k);
		scrub_free(&s);
		sodium_memzero(k, sizeof(*k)); /* a close-delimited body's last bytes */
		free(k);
		if (rc < 0)
			goto out;
	}
	*next = client_keep ? CONN_KEEP : CONN_CLOSE;
	rc = 0;
out:
	if (head)
		sodium_memzero(head, hl);
	if (body)
		sodium_memzero(body, bl);
	if (msg)
		sodium_memzero(msg, ml);
	free(head);
	free(body);
	free(msg);
	return rc;
}

void relay_conn_free(struct conn *c)
{
	scrub_keep_free(&c->keep);
	vault_state_unref(c->keep_st);
	c->keep_st = NULL;
}

/* Add what this exchange injected to what the connection keeps scrubbing,
 * and, once per state, the patterns of the secrets bound to its host:port:
 * a reflection on a later request (or of a second secret) is then caught
 * as well. Before anything goes upstream: a request whose reflection could
 * not be scrubbed is not sent. */
static int relay_keep(struct conn *c, struct vault_state *st, const struct inject_out *io)
{
	int rc;

	if (c->keep_st != st) {
		const struct policy_sandbox *sb = policy_sandbox_by_name(st->policy, c->sandbox);

		if (sb && (rc = inject_keep_bound(st, sb, c->sni, c->orig.port, &c->keep)) < 0)
			return rc;
		vault_state_unref(c->keep_st);
		c->keep_st = vault_state_ref(st);
	}
	if ((rc = scrub_keep_merge(&c->keep, &io->derived)) < 0)
		return rc;
	/* rebuilt only when the set grew, before this request copies its
	 * patterns (a rebuild frees the index older copies point to: none is
	 * left, each request frees its own); without it, the same matches */
	(void)scrub_keep_index(&c->keep);
	return 0;
}

/* A response the vault will not pass on to a request that carried a
 * credential: a part of a body (a value reflected in pieces no pattern
 * matches: Range is not forwarded, so a 206 was not asked for), or a
 * compressed body (the scrubber reads plain bytes only; identity was
 * asked for). NULL when it may pass. The reason holds no upstream byte. */
static const char *relay_unscrubbable(const struct http_response *r, const struct inject_out *io)
{
	if (!io->secrets[0])
		return NULL;
	if (r->status == 206)
		return "upstream sent a partial response (206) to a request with a credential";
	for (int i = -1;
	     (i = http_header_find(r->hdr, r->n_hdr, "content-encoding", (size_t)(i + 1))) >= 0;) {
		const struct http_header *h = &r->hdr[i];

		if (r->body != HTTP_BODY_NONE &&
		    !(h->value_len == 8 && strncasecmp(h->value, "identity", 8) == 0))
			return "upstream sent an encoded (Content-Encoding) response to a request "
			       "with a credential: it cannot be scrubbed";
	}
	return NULL;
}

enum conn_next relay_exchange(struct conn *c, struct vault_state *st,
			      const struct http_request *req, const struct inject_out *io)
{
	size_t n_vals = st->store->n, n_forms = st->forms.n, n_pats;
	struct scrub_pat *pats = NULL;
	struct http_response resp;
	struct pc_err e = {0};
	struct body_out bo = {.c = c, .head = c->out, .head_len = io->head_len};
	struct scrub bs;
	enum conn_next next = CONN_CLOSE;
	const char *bad;
	int rc, interim = 0; /* rc: 0 or a PC_E* code */

	if ((rc = relay_keep(c, st, io)) < 0) {
		const char *why = rc == PC_EREFUSED ? "too many distinct credentials on one "
						      "connection to scrub: open a new connection"
						    : "internal error (out of memory)";

		conn_log(c, LOGREC_HTTP_REQUEST, LOGREC_NONE, why, rc == PC_EREFUSED ? 431 : 500,
			 io->secrets, false, NULL);
		conn_send_error(c, rc == PC_EREFUSED ? 431 : 500, why);
		goto out;
	}
	n_pats = n_forms + c->keep.n;
	pats = calloc(n_pats + 1, sizeof(*pats));
	if (!pats) {
		conn_send_error(c, 500, "internal error (out of memory)");
		goto out;
	}
	if (n_forms)
		memcpy(pats, st->forms.pats, n_forms * sizeof(*pats));
	if (c->keep.n)
		memcpy(pats + n_forms, c->keep.pats, c->keep.n * sizeof(*pats));
	c->in_off = req->head_len;
	c->why = NULL;
	/* the checks passed: the vault itself invites the body (Expect is not
	 * forwarded), so that it can scan the body before sending anything */
	if (req->expect_continue && req->body != HTTP_BODY_NONE &&
	    io_write(c->ssl, c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25, idle_deadline(c)) < 0)
		goto out;
	if ((rc = scrub_init(&bs, st->ph_pats, n_vals, &e)) < 0) {
		/* not reached (every placeholder has a length); a body that
		 * cannot be scanned is not forwarded */
		conn_log(c, LOGREC_HTTP_REQUEST, LOGREC_NONE, e.msg, 500, io->secrets, false, NULL);
		conn_send_error(c, 500, "internal error (request body scanner)");
		goto out;
	}
	rc = relay_body(c, req, &bs, st->store, &bo);
	if (rc == 0)
		rc = body_release(&bo);
	if (rc == PC_EREFUSED) {
		char reason[160];

		snprintf(reason, sizeof(reason), "placeholder of %s in the request body",
			 st->store->s[bs.hit].name);
		/* a streamed body was cut: drop the upstream connection so the
		 * request never completes */
		if (bo.head_sent)
			conn_upstream_close(c);
		conn_refuse(c, 403, true, "vault_placeholder_in_body", reason);
	} else if (rc < 0) {
		const char *why = rc == PC_EPARSE ? "malformed chunked body"
				  : c->why	  ? c->why
						  : "request not completed";

		conn_upstream_close(c);
		if (c->req_timed_out) {
			conn_log_refused(c, LOGREC_HTTP_REQUEST, "vault_request_timeout", why, 408);
			conn_send_error(c, 408, why);
		} else {
			conn_log(c, LOGREC_HTTP_REQUEST, LOGREC_NONE, why,
				 rc == PC_EPARSE ? 400 : 502, io->secrets, false, NULL);
			conn_send_error(c, rc == PC_EPARSE ? 400 : 502, why);
		}
	}
	scrub_free(&bs);
	if (bo.buf)
		sodium_memzero(bo.buf, bo.cap);
	free(bo.buf);
	if (rc < 0)
		goto out;
	for (;;) {
		if (read_response_head(c, !strcmp(req->method, "HEAD"), &resp, &e) < 0) {
			conn_log(c, LOGREC_HTTP_REQUEST, LOGREC_NONE, e.msg, 502, io->secrets,
				 false, NULL);
			conn_send_error(c, 502, e.msg);
			conn_upstream_close(c);
			next = CONN_CLOSE;
			goto out;
		}
		if (resp.status >= 200 || resp.status == 101)
			break;
		if (++interim > 16) {
			conn_send_error(c, 502, "upstream sent too many interim (1xx) responses");
			conn_upstream_close(c);
			next = CONN_CLOSE;
			goto out;
		}
		/* interim responses (1xx) pass to HTTP/1.1 clients, unframed */
		if (req->minor == 0) {
			c->uoff += resp.head_len;
		} else if (relay_response(c, req, &resp, pats, n_pats, &next) < 0) {
			next = CONN_CLOSE;
			goto out;
		}
	}
	if (resp.status == 101 && !req->upgrade) {
		conn_send_error(c, 502, "upstream switched protocols unasked");
		conn_upstream_close(c);
		next = CONN_CLOSE;
		goto out;
	}
	if ((bad = relay_unscrubbable(&resp, io))) {
		pc_log(PC_LOG_WARN, "sandbox %s: %s: %s", c->sandbox, c->sni, bad);
		conn_log(c, LOGREC_HTTP_REQUEST, LOGREC_NONE, bad, 502, io->secrets, false, NULL);
		conn_send_error(c, 502, bad);
		conn_upstream_close(c);
		next = CONN_CLOSE;
		goto out;
	}
	rc = relay_response(c, req, &resp, pats, n_pats, &next);
	conn_log(c, LOGREC_HTTP_REQUEST, LOGREC_NONE, "response", resp.status, io->secrets, false,
		 NULL);
	if (rc == 0 && resp.status == 101) {
		next = tunnel_run(c, st, pats, n_pats);
		conn_upstream_close(c);
		goto out;
	}
	if (rc < 0 || !resp.keep_alive || c->uoff != c->ulen)
		conn_upstream_close(c);
	if (rc < 0)
		next = CONN_CLOSE;
out:
	/* keep pipelined client bytes for the next request */
	if (next == CONN_KEEP && c->in_off) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	free(pats);
	return next;
}
