/* libFuzzer target: DNS-over-TCP reassembly (engine/dnstcp.c) — a run of
 * segments at chosen sequence numbers, some sent again with other bytes,
 * messages "judged" (some rewritten), and the invariants the engine relies
 * on: only judged bytes are ever released, never more than the bound kept.
 * Input: records of [seq offset (2, BE)] [length (1)] [flags (1)] bytes. */
#include "engine/engine_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dnstcp_table *t = NULL;
	struct dnstcp_stream *s;
	struct flow_key k;
	const uint32_t base = 0xfffff000u; /* sequence numbers wrap inside the run */
	size_t i = 0;

	memset(&k, 0, sizeof(k));
	if (dnstcp_table_new(2, &t) < 0)
		return 0;
	if (dnstcp_add(t, &k, base, 1, "sb", 1, &s, NULL) < 0)
		goto out;
	while (i + 4 <= size) {
		uint32_t seq = base + ((uint32_t)data[i] << 8 | data[i + 1]) - 64;
		size_t n = data[i + 2];
		uint8_t flags = data[i + 3];
		const uint8_t *seg = data + i + 4, *msg, *bytes;
		size_t mlen;
		int rc;

		i += 4;
		if (n > size - i)
			n = size - i;
		i += n;
		rc = dnstcp_add_bytes(s, seq, seg, n, 1);
		if (rc == PC_ETAMPER || rc == PC_EREFUSED || rc == PC_ENOMEM)
			break; /* the engine resets the connection */
		if (s->len > DNSTCP_BUF_MAX || s->judged > s->len || s->delivered > s->judged)
			abort();
		rc = dnstcp_next_msg(s, &msg, &mlen);
		if (rc < 0)
			break;
		if (rc == 1) {
			uint8_t *rw = NULL;

			if (mlen == 0 || msg + mlen > s->buf + s->len)
				abort();
			if (flags & 1)
				break; /* refused: reset */
			if (flags & 2) {
				rw = malloc(mlen);
				if (!rw)
					break;
				for (size_t j = 0; j < mlen; j++)
					rw[j] = msg[j] ^ 0x5a;
			}
			rc = dnstcp_judged(s, rw);
			free(rw);
			if (rc < 0)
				break;
		}
		if (dnstcp_releasable(s, seq, n, &bytes)) {
			size_t off = (size_t)(int32_t)(seq - s->base);
			const uint8_t *from = s->rw ? s->rw : s->buf;

			if (off + n > s->judged || bytes != (from ? from + off : NULL))
				abort(); /* only judged bytes leave */
			if (!s->rw && n && memcmp(bytes, seg, n) != 0)
				abort(); /* and they are the bytes that were judged */
		}
		if (dnstcp_done(s) && s->len != s->judged)
			abort();
	}
out:
	dnstcp_table_free(t);
	return 0;
}
