/* The WebSocket tunnel after a 101. Frames are parsed as they are read
 * (ws.c, struct ws_dir; RFC 6455 5.4 lets an intermediary change
 * fragmentation): a sandbox message is collected whole, unmasked and
 * searched for placeholders before it goes upstream as one frame (masked
 * anew); an upstream message is scrubbed as it streams and goes to the
 * sandbox in fragments. One tunnel holds at most WS_TUNNEL_MAX bytes of
 * buffers (a sandbox message of up to 1 MiB, the upstream scrubber and one
 * frame buffer), and every buffer that held plaintext is wiped before it
 * is freed. */
#include "vault/vault_int.h"

#include <openssl/ssl.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRAG_MAX 16384 /* an upstream message goes to the sandbox in frames of this */

struct tunnel {
	struct conn *c;
	const struct vault_state *st;
	const struct scrub_pat *pats;
	size_t n_pats;
	struct scrub us; /* the upstream direction's scrubber, reused per message */
	uint8_t *frag;	 /* 10 header bytes + FRAG_MAX: the next frame to the sandbox */
	size_t flen;	 /* payload bytes in frag */
	bool started;	 /* the message in progress has sent its first frame */
	bool exfil;	 /* a placeholder was found: the refusal is an exfiltration */
	/* every sandbox payload, decoded and folded, as one stream: a
	 * placeholder split across two messages is found in the second */
	struct ph_stream fs;
	uint8_t op; /* its opcode */
	char why[600];
};

static uint64_t deadline(struct conn *c)
{
	return pc_now_mono_ms() + c->d->cfg.vault.idle_timeout_ms;
}

/* Refuse a sandbox payload that holds a placeholder, or whose bytes and
 * the tail of the connection's earlier messages do, percent-decoded or in
 * any case (phscan.c). A control frame (ping, pong, close) is judged on
 * its own and kept out of the message stream: the upstream application
 * reads messages only, so a ping between two halves of a placeholder must
 * not hide the placeholder they make together. */
static int scan(struct tunnel *t, uint8_t op, const uint8_t *p, size_t n)
{
	int k = -1;

	for (size_t i = 0; i < t->st->store->n && k < 0; i++)
		if (memmem(p, n, t->st->store->s[i].placeholder, t->st->store->s[i].ph_len))
			k = (int)i;
	if (k < 0)
		k = op & 0x8 ? ph_find_folded(t->st->store, p, n) : ph_stream_feed(&t->fs, p, n);
	if (k < 0)
		return 0;
	snprintf(t->why, sizeof(t->why), "placeholder of %s in a WebSocket message",
		 t->st->store->s[k].name);
	t->exfil = true;
	return PC_EREFUSED;
}

/* A sandbox message or control frame, checked, to the upstream as one
 * frame, masked with a fresh key (a client's frames must be masked). */
static int to_upstream(struct tunnel *t, uint8_t op, uint8_t *p, size_t n)
{
	uint8_t hdr[14], mask[4];
	size_t hl;
	int rc;

	if ((rc = scan(t, op, p, n)) < 0)
		return rc;
	randombytes_buf(mask, sizeof(mask));
	hl = ws_frame_header(hdr, true, op, n);
	hdr[1] |= 0x80;
	memcpy(hdr + hl, mask, 4);
	ws_unmask(p, n, mask); /* XOR: masks */
	rc = io_write(t->c->ussl, t->c->ufd, hdr, hl + 4, deadline(t->c));
	if (rc == 0 && n)
		rc = io_write(t->c->ussl, t->c->ufd, p, n, deadline(t->c));
	return rc;
}

static int client_message(void *ctx, uint8_t op, uint8_t *p, size_t n)
{
	return to_upstream(ctx, op, p, n);
}

/* Send frag as a frame of the message in progress. */
static int frag_flush(struct tunnel *t, bool fin)
{
	uint8_t hdr[10];
	size_t hl = ws_frame_header(hdr, fin, t->started ? 0 : t->op, t->flen);
	int rc;

	memcpy(t->frag + 10 - hl, hdr, hl);
	rc = io_write(t->c->ssl, t->c->fd, t->frag + 10 - hl, hl + t->flen, deadline(t->c));
	sodium_memzero(t->frag, 10 + t->flen);
	t->flen = 0;
	t->started = true;
	return rc;
}

static int frag_out(void *ctx, const uint8_t *p, size_t n)
{
	struct tunnel *t = ctx;

	while (n) {
		size_t k = FRAG_MAX - t->flen < n ? FRAG_MAX - t->flen : n;
		int rc;

		memcpy(t->frag + 10 + t->flen, p, k);
		t->flen += k;
		p += k;
		n -= k;
		if (t->flen == FRAG_MAX && (rc = frag_flush(t, false)) < 0)
			return rc;
	}
	return 0;
}

/* Upstream message bytes as they come: scrubbed on their way out. */
static int upstream_data(void *ctx, uint8_t op, const uint8_t *p, size_t n, bool end)
{
	struct tunnel *t = ctx;
	int rc;

	if (!t->started && !t->flen)
		t->op = op;
	if (n && (rc = scrub_feed(&t->us, p, n, frag_out, t)) < 0)
		return rc;
	if (!end)
		return 0;
	if ((rc = scrub_finish(&t->us, frag_out, t)) < 0 || (rc = frag_flush(t, true)) < 0)
		return rc;
	t->started = false;
	return 0;
}

/* A control frame from the upstream: scrubbed, and still a control frame. */
static int upstream_control(void *ctx, uint8_t op, uint8_t *p, size_t n)
{
	struct tunnel *t = ctx;
	uint8_t *out = NULL, hdr[10];
	size_t ol = 0, hl;
	int rc;

	if ((rc = scrub_buffer(t->pats, t->n_pats, p, n, &out, &ol, NULL)) < 0)
		return rc;
	if (ol > 125)
		ol = 125;
	hl = ws_frame_header(hdr, true, op, ol);
	rc = io_write(t->c->ssl, t->c->fd, hdr, hl, deadline(t->c));
	if (rc == 0 && ol)
		rc = io_write(t->c->ssl, t->c->fd, out, ol, deadline(t->c));
	sodium_memzero(out, ol);
	free(out);
	return rc;
}

static const struct ws_ops client_ops = {.message = client_message, .control = client_message};
static const struct ws_ops upstream_ops = {.data = upstream_data, .control = upstream_control};

enum conn_next tunnel_run(struct conn *c, const struct vault_state *st,
			  const struct scrub_pat *pats, size_t n_pats)
{
	struct tunnel *t = calloc(1, sizeof(*t));
	struct ws_mem mem = {0};
	struct ws_dir cw, uw;
	int rc = 0;

	ws_dir_init(&cw, true, &mem);
	ws_dir_init(&uw, false, &mem);
	if (!t || !(t->frag = malloc(10 + FRAG_MAX)) ||
	    scrub_init(&t->us, pats, n_pats, NULL) < 0) {
		rc = PC_ENOMEM;
		goto out;
	}
	/* the fixed part of the tunnel's bound: this, the frame buffer, and
	 * the scrubber's window (16 KiB of input and the held-back tail) */
	mem.cur = mem.peak = sizeof(*t) + 10 + FRAG_MAX + 16384 + 64 + t->us.maxlen;
	t->c = c;
	t->st = st;
	ph_stream_init(&t->fs, st->store);
	t->pats = pats;
	t->n_pats = n_pats;
	if (c->in_off < c->in_len)
		rc = ws_dir_feed(&cw, (uint8_t *)c->in + c->in_off, c->in_len - c->in_off,
				 &client_ops, t, t->why, sizeof(t->why));
	c->in_off = c->in_len = 0;
	if (rc == 0 && c->uoff < c->ulen)
		rc = ws_dir_feed(&uw, (uint8_t *)c->ubuf + c->uoff, c->ulen - c->uoff,
				 &upstream_ops, t, t->why, sizeof(t->why));
	c->uoff = c->ulen = 0;
	while (rc == 0) {
		struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN},
				      {.fd = c->ufd, .events = POLLIN}};
		int n;

		/* has_pending: decrypted bytes or read-ahead ones not yet
		 * decrypted (both contexts read ahead) */
		if (!SSL_has_pending(c->ssl) && !SSL_has_pending(c->ussl) && vloop_in_co()) {
			const int fds[2] = {c->fd, c->ufd};
			const short evs[2] = {POLLIN, POLLIN};
			short rev[2];

			if (vloop_waitn(fds, evs, rev, 2,
					pc_now_mono_ms() + c->d->cfg.vault.idle_timeout_ms) < 0)
				break;
			p[0].revents = rev[0];
			p[1].revents = rev[1];
		} else if (!SSL_has_pending(c->ssl) && !SSL_has_pending(c->ussl)) {
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
			rc = ws_dir_feed(&cw, (uint8_t *)c->in, (size_t)n, &client_ops, t, t->why,
					 sizeof(t->why));
			sodium_memzero(c->in, (size_t)n);
		}
		if (rc == 0 && p[1].revents) {
			n = io_read(c->ussl, c->ufd, c->ubuf, c->ucap, deadline(c));
			if (n <= 0)
				break;
			rc = ws_dir_feed(&uw, (uint8_t *)c->ubuf, (size_t)n, &upstream_ops, t,
					 t->why, sizeof(t->why));
			sodium_memzero(c->ubuf, (size_t)n);
		}
	}
	if (rc == PC_EREFUSED && t->exfil) {
		pc_log(PC_LOG_WARN, "exfiltration attempt refused: sandbox %s, %s: %s", c->sandbox,
		       c->sni, t->why);
		conn_log_refused(c, LOGREC_EXFIL, "vault_placeholder_in_websocket", t->why, 0);
	} else if (rc < 0 && t && t->why[0]) {
		conn_log_refused(c, LOGREC_HTTP_REQUEST, "vault_websocket_malformed", t->why, 0);
	}
out:
	ws_dir_free(&cw);
	ws_dir_free(&uw);
	if (t) {
		scrub_free(&t->us);
		if (t->frag) {
			sodium_memzero(t->frag, 10 + FRAG_MAX);
			free(t->frag);
		}
		sodium_memzero(t, sizeof(*t));
		free(t);
	}
	return CONN_CLOSE;
}
