/* WebSocket frames (RFC 6455 5.2) as the vault sees them after a 101: the
 * sandbox's frames are unmasked to look for placeholders, the upstream's
 * are rewritten with real values scrubbed. Both directions' bytes are
 * untrusted, so the header parser is strict and fuzzed. */
#include "vault/vault_int.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ws_frame_parse(const uint8_t *b, size_t len, bool want_masked, struct ws_frame *f,
		   struct pc_err *err)
{
	struct ws_frame r = {0};
	size_t h = 2;
	uint64_t n;

	if (len < 2)
		return 0;
	r.fin = b[0] & 0x80;
	r.rsv = (uint8_t)((b[0] >> 4) & 7);
	r.opcode = b[0] & 0x0f;
	r.masked = b[1] & 0x80;
	n = b[1] & 0x7f;
	if (r.rsv)
		return pc_err_set(err, PC_EPARSE,
				  "WebSocket frame with RSV bits (extensions are "
				  "not negotiated through the vault)");
	if ((r.opcode > 2 && r.opcode < 8) || r.opcode > 10)
		return pc_err_set(err, PC_EPARSE, "WebSocket frame with a reserved opcode");
	if (r.masked != want_masked)
		return pc_err_set(err, PC_EPARSE,
				  want_masked ? "unmasked WebSocket frame from the client"
					      : "masked WebSocket frame from the server");
	if (n == 126) {
		if (len < 4)
			return 0;
		n = (uint64_t)b[2] << 8 | b[3];
		if (n < 126)
			return pc_err_set(err, PC_EPARSE, "WebSocket length not minimally encoded");
		h = 4;
	} else if (n == 127) {
		if (len < 10)
			return 0;
		n = 0;
		for (int i = 0; i < 8; i++)
			n = n << 8 | b[2 + i];
		if (n >> 63 || n < 65536)
			return pc_err_set(err, PC_EPARSE, "WebSocket length invalid");
		h = 10;
	}
	if (r.opcode >= 8 && (n > 125 || !r.fin))
		return pc_err_set(err, PC_EPARSE, "WebSocket control frame too long or fragmented");
	if (r.masked) {
		if (len < h + 4)
			return 0;
		memcpy(r.mask, b + h, 4);
		h += 4;
	}
	r.len = n;
	r.hdr_len = h;
	*f = r;
	return (int)h;
}

size_t ws_frame_header(uint8_t *out, bool fin, uint8_t opcode, uint64_t len)
{
	out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
	if (len < 126) {
		out[1] = (uint8_t)len;
		return 2;
	}
	if (len < 65536) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		return 4;
	}
	out[1] = 127;
	for (int i = 0; i < 8; i++)
		out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
	return 10;
}

void ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4])
{
	for (size_t i = 0; i < n; i++)
		p[i] ^= mask[i & 3];
}

/* ---- one direction of a tunnel, as a stream ------------------------------------ */

void ws_dir_init(struct ws_dir *w, bool from_client, struct ws_mem *mem)
{
	memset(w, 0, sizeof(*w));
	w->from_client = from_client;
	w->mem = mem;
}

void ws_dir_free(struct ws_dir *w)
{
	if (w->msg) {
		sodium_memzero(w->msg, w->mcap);
		free(w->msg);
		w->mem->cur -= w->mcap;
	}
	sodium_memzero(w->hdr, sizeof(w->hdr));
	sodium_memzero(w->ctl, sizeof(w->ctl));
	w->msg = NULL;
	w->mlen = w->mcap = 0;
}

/* Room for n more message bytes: grown by copying and wiping (never
 * realloc, which may leave the old copy behind), within the tunnel's
 * bound, old and new buffer counted while both exist. */
static int msg_room(struct ws_dir *w, size_t n, char *why, size_t whylen)
{
	size_t need = w->mlen + n, cap;
	uint8_t *nb;

	if (need <= w->mcap)
		return 0;
	cap = w->mcap ? w->mcap * 2 : 4096;
	if (cap < need)
		cap = need;
	if (cap > WS_MAX_MESSAGE)
		cap = WS_MAX_MESSAGE;
	if (w->mem->cur + cap > WS_TUNNEL_MAX) {
		snprintf(why, whylen, "WebSocket tunnel over its memory bound (%d bytes)",
			 WS_TUNNEL_MAX);
		return PC_EREFUSED;
	}
	if (!(nb = malloc(cap)))
		return PC_ENOMEM;
	w->mem->cur += cap;
	if (w->mem->cur > w->mem->peak)
		w->mem->peak = w->mem->cur;
	if (w->msg) {
		memcpy(nb, w->msg, w->mlen);
		sodium_memzero(w->msg, w->mcap);
		free(w->msg);
		w->mem->cur -= w->mcap;
	}
	w->msg = nb;
	w->mcap = cap;
	return 0;
}

/* Payload bytes p[0..n) of the current frame (unmasked already). */
static int payload(struct ws_dir *w, uint8_t *p, size_t n, bool end, const struct ws_ops *ops,
		   void *ctx, char *why, size_t whylen)
{
	int rc;

	if (w->f.opcode >= 8) {
		memcpy(w->ctl + w->clen, p, n);
		w->clen += n;
		if (!end)
			return 0;
		rc = ops->control(ctx, w->f.opcode, w->ctl, w->clen);
		sodium_memzero(w->ctl, w->clen);
		w->clen = 0;
		return rc;
	}
	if (!w->from_client) /* streamed: scrubbed and sent as it comes */
		return ops->data(ctx, w->op, p, n, end && w->f.fin);
	if ((rc = msg_room(w, n, why, whylen)) < 0)
		return rc;
	if (n) { /* an empty frame before any data: msg is still NULL */
		memcpy(w->msg + w->mlen, p, n);
		w->mlen += n;
	}
	if (!(end && w->f.fin))
		return 0;
	rc = ops->message(ctx, w->op, w->msg, w->mlen);
	sodium_memzero(w->msg, w->mlen);
	w->mlen = 0;
	return rc;
}

/* A frame header is complete in w->hdr: check it against the message in
 * progress. */
static int frame_start(struct ws_dir *w, char *why, size_t whylen)
{
	struct ws_frame *f = &w->f;

	if (f->opcode >= 8) {
		w->clen = 0;
	} else {
		if ((f->opcode == 0) != (w->op != 0)) {
			snprintf(why, whylen, "WebSocket fragments out of order");
			return PC_EPARSE;
		}
		if (f->opcode) {
			w->op = f->opcode;
			w->total = 0;
			w->frames = 0;
		}
		/* empty fragments must not make a message's frames endless */
		if (f->len > WS_MAX_MESSAGE || w->total + f->len > WS_MAX_MESSAGE ||
		    ++w->frames > WS_MAX_FRAGMENTS) {
			snprintf(why, whylen,
				 "WebSocket message larger than %d bytes or in more than %d "
				 "fragments",
				 WS_MAX_MESSAGE, WS_MAX_FRAGMENTS);
			return PC_EPARSE;
		}
		w->total += f->len;
	}
	w->left = f->len;
	w->moff = 0;
	w->in_payload = true;
	return 0;
}

int ws_dir_feed(struct ws_dir *w, uint8_t *b, size_t n, const struct ws_ops *ops, void *ctx,
		char *why, size_t whylen)
{
	while (n) {
		int rc;

		if (!w->in_payload) {
			struct pc_err e;
			int h;

			w->hdr[w->hlen++] = *b++;
			n--;
			h = ws_frame_parse(w->hdr, w->hlen, w->from_client, &w->f, &e);
			if (h < 0) {
				snprintf(why, whylen, "%s", e.msg);
				return PC_EPARSE;
			}
			if (h == 0)
				continue; /* at most 14 header bytes: it decides by then */
			w->hlen = 0;
			if ((rc = frame_start(w, why, whylen)) < 0)
				return rc;
			if (w->left)
				continue;
			/* an empty frame ends here */
			rc = payload(w, b, 0, true, ops, ctx, why, whylen);
		} else {
			size_t t = n < w->left ? n : (size_t)w->left;

			if (w->f.masked)
				for (size_t i = 0; i < t; i++)
					b[i] ^= w->f.mask[(w->moff + i) & 3];
			w->moff += t;
			w->left -= t;
			rc = payload(w, b, t, !w->left, ops, ctx, why, whylen);
			b += t;
			n -= t;
		}
		if (!w->left) {
			w->in_payload = false;
			if (w->f.opcode < 8 && w->f.fin)
				w->op = 0;
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}
