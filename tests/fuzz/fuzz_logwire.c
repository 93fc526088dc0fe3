/* libFuzzer target: logd's wire decoder — every datagram a client sends,
 * split into its messages as logd splits it, and each message alone.
 * A message that decodes must re-encode to the same bytes (the encoding is
 * canonical), and must format as a JSON line, a human line and a syslog
 * message without trouble. */
#include "logd/logd_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char json[LOGREC_JSON_MAX], human[4096], msg[16384];
	static const uint8_t zero[MERKLE_HASH];
	uint8_t again[LOGWIRE_MAX];
	struct logrec_decoded d;
	uint32_t count;
	uint64_t seq;
	int n;

	(void)logwire_ack_decode(data, size, &count, &seq, NULL);
	/* the record ring's registration and bell (docs/logd.md "The record ring") */
	(void)logwire_ring_decode(data, size, NULL);
	(void)logwire_bell_decode(data, size, NULL);
	(void)logwire_type(data, size);
	/* a datagram of messages back to back, split as logd splits it */
	for (size_t off = 0, len; off < size; off += len) {
		if (logwire_next(data + off, size - off, &len, NULL) < 0)
			break;
		if (len < LOGWIRE_HDR_LEN || len > size - off)
			abort(); /* a split past the bytes, or one that stalls */
		if (logrec_decode(data + off, len, &d, NULL) == 0)
			logrec_decoded_free(&d);
	}
	if (logrec_decode(data, size, &d, NULL) < 0)
		return 0;
	n = logrec_encode(&d.rec, again, sizeof(again), NULL);
	if (n < 0 || (size_t)n != size || memcmp(again, data, size) != 0)
		abort(); /* decode and encode disagree */
	n = logrec_json_format(&d.rec, 4128, 1764424933123ULL, zero, NULL, json, sizeof(json));
	if (n < 0)
		abort(); /* every decodable record must fit LOGREC_JSON_MAX */
	if (logjson_each(json, (size_t)n, NULL, NULL) < 0)
		abort(); /* what logd writes must read back */
	(void)logrec_human(json, (size_t)n, human, sizeof(human));
	(void)logx_format_record(&d.rec, 4128, 1764424933123ULL, zero, "gw", 1, msg, sizeof(msg));
	{
		static char xm[LOGX_MSG_MAX + 1];
		int xn = logx_format_export(&d.rec, 4128, 1764424933123ULL, zero, "gw", 1, xm,
					    sizeof(xm));

		if (xn <= 0 || xn > LOGX_MSG_MAX || strlen(xm) != (size_t)xn)
			abort(); /* every record is exported, whole or cut, never dropped */
	}
	logrec_decoded_free(&d);
	return 0;
}
