/* libFuzzer target: the other sandbox and upstream bytes the vault parses
 * itself — the TLS server_name extension, WebSocket frame headers, and the
 * tunnel's frame stream (ws_dir_feed) in both directions, cut in two: the
 * tunnel's buffers stay within their bound and are all given back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vault/vault_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int f_message(void *ctx, uint8_t op, uint8_t *p, size_t n)
{
	(void)ctx, (void)op;
	if (n > WS_MAX_MESSAGE || (n && !p))
		abort();
	return 0;
}

static int f_data(void *ctx, uint8_t op, const uint8_t *p, size_t n, bool end)
{
	(void)ctx, (void)op, (void)p, (void)end;
	if (n > WS_MAX_MESSAGE)
		abort();
	return 0;
}

static int f_control(void *ctx, uint8_t op, uint8_t *p, size_t n)
{
	(void)ctx, (void)p;
	if (n > 125 || op < 8)
		abort();
	return 0;
}

static const struct ws_ops f_ops = {f_message, f_data, f_control};

static void stream(const uint8_t *data, size_t size)
{
	uint8_t *b = malloc(size ? size : 1);
	size_t cut = size ? data[0] % (size + 1) : 0;
	char why[200];

	if (!b)
		return;
	for (int client = 0; client < 2; client++) {
		struct ws_mem mem = {0};
		struct ws_dir w;

		memcpy(b, data, size);
		ws_dir_init(&w, client, &mem);
		if (ws_dir_feed(&w, b, cut, &f_ops, NULL, why, sizeof(why)) == 0)
			ws_dir_feed(&w, b + cut, size - cut, &f_ops, NULL, why, sizeof(why));
		ws_dir_free(&w);
		if (mem.cur != 0 || mem.peak > WS_TUNNEL_MAX)
			abort();
	}
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char host[256];
	size_t off = 0;

	if (sni_parse(data, size, host, sizeof(host), NULL) == 0 && strlen(host) > 253)
		abort();
	for (int masked = 0; masked < 2; masked++) {
		off = 0;
		while (off < size) {
			struct ws_frame f;
			uint8_t hdr[10];
			int h = ws_frame_parse(data + off, size - off, masked, &f, NULL);

			if (h <= 0)
				break;
			if ((size_t)h > size - off || f.hdr_len != (size_t)h)
				abort();
			/* what the vault writes back parses back the same */
			if (!masked) {
				size_t hl = ws_frame_header(hdr, f.fin, f.opcode, f.len);
				struct ws_frame g;

				if (ws_frame_parse(hdr, hl, false, &g, NULL) != (int)hl ||
				    g.len != f.len)
					abort();
			}
			if (f.len > size - off - (size_t)h)
				break;
			off += (size_t)h + (size_t)f.len;
		}
	}
	stream(data, size);
	return 0;
}
