/* libFuzzer target: engine.sock's decoders, both directions (common/
 * engmsg.c) — the engine decodes what any local user sends (the socket is
 * mode 0666), the CLI and the checker decode the engine's replies. A
 * message that decodes must re-encode to the same bytes (the encoding is
 * canonical), and a decoded reply's strings must be readable C strings. */
#include "common/pc.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pc_eng_reply d;
	enum pc_eng_type t;
	uint8_t req[PC_MSG_HDR_LEN], *again = NULL;
	size_t len = 0;
	int n;

	if (pc_eng_request_decode(data, size, &t, NULL) == 0) {
		n = pc_eng_request_encode(t, req, sizeof(req));
		if (n < 0 || (size_t)n != size || memcmp(req, data, size) != 0)
			abort(); /* decode and encode disagree */
	}
	if (pc_eng_reply_decode(data, size, &d, NULL) < 0)
		return 0;
	/* every string the reply's type carries is there, NUL-terminated */
	if ((d.type == PC_ENG_ERROR && (!d.message || d.code >= 0)) ||
	    (d.type == PC_ENG_STATUS_REPLY && (!d.policy || !d.json)) ||
	    ((d.type == PC_ENG_RELOAD_REPLY || d.type == PC_ENG_RECHECK_REPLY) && !d.policy) ||
	    (d.type == PC_ENG_METRICS_REPLY && !d.text))
		abort();
	(void)strlen(d.message ? d.message : d.policy ? d.policy : d.text);
	if (d.json)
		(void)strlen(d.json);
	if (pc_eng_reply_encode(&d, &again, &len, NULL) < 0 || len != size ||
	    memcmp(again, data, size) != 0)
		abort();
	free(again);
	pc_eng_reply_free(&d);
	return 0;
}
