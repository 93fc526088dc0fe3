/* libFuzzer target: the other sandbox and upstream bytes the vault parses
 * itself — the TLS server_name extension and WebSocket frame headers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vault/vault_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
	return 0;
}
