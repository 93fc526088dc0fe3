/* EVA driver for appliance/packet.c: pc_pkt_parse on len unknown bytes, for
 * every len up to the largest packet NFQUEUE hands the engine (queue.c
 * COPY_RANGE, 16384 + 256). */
#include "tests/prove/prove.h"

#include "appliance/appliance.h"

int main(void)
{
	size_t len = prove_len();
	const uint8_t *buf;
	struct pc_pkt p;
	int rc;

#ifdef PROVE_EXACT
	//@ split len;
#endif
	buf = prove_buf(len);
	rc = pc_pkt_parse(buf, len, &p);
	//@ assert rc == PC_PKT_OK || rc == PC_PKT_FRAGMENT || rc == PC_PKT_MALFORMED;
	rc = pc_pkt_parse(NULL, len, &p);
	//@ assert rc == PC_PKT_MALFORMED;
	return 0;
}
