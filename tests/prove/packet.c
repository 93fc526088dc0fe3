/* EVA driver for engine/packet.c: pkt_parse on len unknown bytes, for
 * every len up to the largest packet NFQUEUE hands the engine (queue.c
 * COPY_RANGE, 16384 + 256). */
#include "tests/prove/prove.h"

#include "engine/engine_int.h"

int main(void)
{
	size_t len = prove_len();
	const uint8_t *buf;
	struct pkt p;
	int rc;

#ifdef PROVE_EXACT
	//@ split len;
#endif
	buf = prove_buf(len);
	rc = pkt_parse(buf, len, &p);
	//@ assert rc == PKT_OK || rc == PKT_FRAGMENT || rc == PKT_MALFORMED;
	rc = pkt_parse(NULL, len, &p);
	//@ assert rc == PKT_MALFORMED;
	return 0;
}
