/* WebSocket frames (RFC 6455 5.2) as the vault sees them after a 101: the
 * sandbox's frames are unmasked to look for placeholders, the upstream's
 * are rewritten with real values scrubbed. Both directions' bytes are
 * untrusted, so the header parser is strict and fuzzed. */
#include "vault/vault_int.h"

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
