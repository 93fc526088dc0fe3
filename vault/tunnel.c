/* The WebSocket tunnel after a 101. Messages are collected whole (at most
 * WS_MAX_FRAME bytes; RFC 6455 5.4 lets an intermediary change
 * fragmentation): a sandbox message is unmasked and searched for
 * placeholders before its frames go upstream unchanged; an upstream message
 * has real values scrubbed and goes to the sandbox as one frame. */
#include "vault/vault_int.h"

#include <openssl/ssl.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wsdir {
	bool from_client;
	uint8_t *in; /* raw bytes not yet framed */
	size_t len, cap;
	uint8_t *msg; /* payload of the message being collected (unmasked) */
	size_t mlen;
	uint8_t *raw; /* client direction: its frames, as received */
	size_t rlen;
	uint8_t op; /* opcode of the message being collected; 0: none */
};

static int grow(uint8_t **p, size_t *cap, size_t need)
{
	uint8_t *n;

	if (need <= *cap)
		return 0;
	if (need > 2 * WS_MAX_FRAME + 64)
		return PC_EINVAL;
	n = realloc(*p, need * 2 > 2 * WS_MAX_FRAME + 64 ? 2 * WS_MAX_FRAME + 64 : need * 2);
	if (!n)
		return PC_ENOMEM;
	*cap = need * 2 > 2 * WS_MAX_FRAME + 64 ? 2 * WS_MAX_FRAME + 64 : need * 2;
	*p = n;
	return 0;
}

static int put(uint8_t **p, size_t *len, const uint8_t *src, size_t n)
{
	uint8_t *b = realloc(*p, *len + n + 1);

	if (!b)
		return PC_ENOMEM;
	memcpy(b + *len, src, n);
	*len += n;
	*p = b;
	return 0;
}

static uint64_t deadline(struct conn *c)
{
	return pc_now_mono_ms() + c->d->cfg.vault.idle_timeout_ms;
}

/* A whole message (or control frame) from the sandbox: refuse it if it
 * holds a placeholder, else forward its frames as they came. */
static int client_message(struct conn *c, const uint8_t *raw, size_t rawlen, const uint8_t *payload,
			  size_t n, const struct vault_state *st, char *why, size_t whylen)
{
	for (size_t i = 0; i < st->store->n; i++)
		if (memmem(payload, n, st->store->s[i].placeholder, st->store->s[i].ph_len)) {
			snprintf(why, whylen, "placeholder of %s in a WebSocket message",
				 st->store->s[i].name);
			return PC_EREFUSED;
		}
	return io_write(c->ussl, c->ufd, raw, rawlen, deadline(c));
}

/* A whole message from the upstream: scrub, send as one frame. */
static int upstream_message(struct conn *c, uint8_t op, const uint8_t *payload, size_t n,
			    const struct scrub_pat *pats, size_t n_pats)
{
	uint8_t *out = NULL, hdr[10];
	size_t ol = 0, hl;
	int rc;

	if ((rc = scrub_buffer(pats, n_pats, payload, n, &out, &ol, NULL)) < 0)
		return rc;
	if (op >= 8 && ol > 125)
		ol = 125; /* a control frame stays a control frame */
	hl = ws_frame_header(hdr, true, op, ol);
	rc = io_write(c->ssl, c->fd, hdr, hl, deadline(c));
	if (rc == 0 && ol)
		rc = io_write(c->ssl, c->fd, out, ol, deadline(c));
	sodium_memzero(out, ol);
	free(out);
	return rc;
}

/* Handle every complete frame in w->in. */
static int frames(struct conn *c, struct wsdir *w, const struct vault_state *st,
		  const struct scrub_pat *pats, size_t n_pats, char *why, size_t whylen)
{
	size_t off = 0;
	int rc = 0;

	for (;;) {
		struct ws_frame f;
		struct pc_err e;
		uint8_t *p;
		int h = ws_frame_parse(w->in + off, w->len - off, w->from_client, &f, &e);

		if (h < 0) {
			snprintf(why, whylen, "%s", e.msg);
			return PC_EPARSE;
		}
		if (h == 0)
			break;
		if (f.len > WS_MAX_FRAME || w->mlen + f.len > WS_MAX_FRAME) {
			snprintf(why, whylen, "WebSocket message larger than %d bytes",
				 WS_MAX_FRAME);
			return PC_EPARSE;
		}
		if (w->len - off < (size_t)h + f.len)
			break;
		/* empty fragments must not grow a message's frames without end */
		if (w->rlen + (size_t)h + f.len > 2 * WS_MAX_FRAME) {
			snprintf(why, whylen, "WebSocket message in too many fragments");
			return PC_EPARSE;
		}
		p = w->in + off + h;
		if (f.masked)
			ws_unmask(p, (size_t)f.len, f.mask);
		if (f.opcode >= 8) { /* control frames may come between fragments */
			if (w->from_client) {
				uint8_t tmp[125];

				/* scan a copy; the frame goes on as it came (masked) */
				memcpy(tmp, p, (size_t)f.len);
				ws_unmask(p, (size_t)f.len, f.mask);
				rc = client_message(c, w->in + off, (size_t)h + f.len, tmp,
						    (size_t)f.len, st, why, whylen);
			} else {
				rc = upstream_message(c, f.opcode, p, (size_t)f.len, pats, n_pats);
			}
		} else {
			if ((f.opcode == 0) != (w->op != 0)) {
				snprintf(why, whylen, "WebSocket fragments out of order");
				return PC_EPARSE;
			}
			if (f.opcode)
				w->op = f.opcode;
			if ((rc = put(&w->msg, &w->mlen, p, (size_t)f.len)) < 0)
				return rc;
			if (w->from_client) {
				ws_unmask(p, (size_t)f.len, f.mask); /* keep the frame as it came */
				if ((rc = put(&w->raw, &w->rlen, w->in + off, (size_t)h + f.len)) <
				    0)
					return rc;
			}
			if (f.fin) {
				rc = w->from_client ? client_message(c, w->raw, w->rlen, w->msg,
								     w->mlen, st, why, whylen)
						    : upstream_message(c, w->op, w->msg, w->mlen,
								       pats, n_pats);
				sodium_memzero(w->msg, w->mlen);
				w->mlen = w->rlen = 0;
				w->op = 0;
			}
		}
		off += (size_t)h + f.len;
		if (rc < 0)
			return rc;
	}
	memmove(w->in, w->in + off, w->len - off);
	w->len -= off;
	return 0;
}

static int feed(struct conn *c, struct wsdir *w, const uint8_t *b, size_t n,
		const struct vault_state *st, const struct scrub_pat *pats, size_t n_pats,
		char *why, size_t whylen)
{
	int rc = grow(&w->in, &w->cap, w->len + n);

	if (rc < 0) {
		snprintf(why, whylen, "WebSocket message larger than %d bytes", WS_MAX_FRAME);
		return PC_EPARSE;
	}
	memcpy(w->in + w->len, b, n);
	w->len += n;
	return frames(c, w, st, pats, n_pats, why, whylen);
}

static void wsdir_free(struct wsdir *w)
{
	if (w->in)
		sodium_memzero(w->in, w->cap);
	if (w->msg)
		sodium_memzero(w->msg, w->mlen);
	free(w->in);
	free(w->msg);
	free(w->raw);
}

enum conn_next tunnel_run(struct conn *c, const struct vault_state *st,
			  const struct scrub_pat *pats, size_t n_pats)
{
	struct wsdir cw = {.from_client = true}, uw = {0};
	char why[600] = "";
	int rc = 0;

	if (c->in_off < c->in_len)
		rc = feed(c, &cw, (uint8_t *)c->in + c->in_off, c->in_len - c->in_off, st, pats,
			  n_pats, why, sizeof(why));
	c->in_off = c->in_len = 0;
	if (rc == 0 && c->uoff < c->ulen)
		rc = feed(c, &uw, (uint8_t *)c->ubuf + c->uoff, c->ulen - c->uoff, st, pats, n_pats,
			  why, sizeof(why));
	c->uoff = c->ulen = 0;
	while (rc == 0) {
		struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN},
				      {.fd = c->ufd, .events = POLLIN}};
		int n;

		/* has_pending: decrypted bytes or read-ahead ones not yet
		 * decrypted (both contexts read ahead) */
		if (!SSL_has_pending(c->ssl) && !SSL_has_pending(c->ussl)) {
			n = poll(p, 2, (int)c->d->cfg.vault.idle_timeout_ms);
			if (n <= 0)
				break;
		} else {
			p[0].revents = SSL_has_pending(c->ssl) ? POLLIN : 0;
			p[1].revents = SSL_has_pending(c->ussl) ? POLLIN : 0;
		}
		if (p[0].revents) {
			n = io_read(c->ssl, c->fd, c->in, c->in_cap, deadline(c));
			if (n <= 0)
				break;
			rc = feed(c, &cw, (uint8_t *)c->in, (size_t)n, st, pats, n_pats, why,
				  sizeof(why));
		}
		if (rc == 0 && p[1].revents) {
			n = io_read(c->ussl, c->ufd, c->ubuf, c->ucap, deadline(c));
			if (n <= 0)
				break;
			rc = feed(c, &uw, (uint8_t *)c->ubuf, (size_t)n, st, pats, n_pats, why,
				  sizeof(why));
		}
	}
	if (rc == PC_EREFUSED) {
		pc_log(PC_LOG_WARN, "exfiltration attempt refused: sandbox %s, %s: %s", c->sandbox,
		       c->sni, why);
		conn_log(c, LOGREC_EXFIL, LOGREC_REFUSED, why, 0, NULL, false, NULL);
	} else if (rc < 0 && why[0]) {
		conn_log(c, LOGREC_HTTP_REQUEST, LOGREC_REFUSED, why, 0, NULL, false, NULL);
	}
	wsdir_free(&cw);
	wsdir_free(&uw);
	return CONN_CLOSE;
}
