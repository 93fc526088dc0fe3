/* libFuzzer target: the check helper channel's decoders (engine/
 * checkmsg.c). Above all the root side: the helper, started as root with
 * capabilities the engine lacks, decodes the request and the expectation
 * the sandbox-facing engine writes; the engine decodes the helper's result.
 * A request or expectation that decodes must re-encode to the same bytes. */
#include "engine/engine_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct chk_expect_in in;
	uint8_t req[CHK_REQ_MAX], *again = NULL;
	struct chk_result res;
	char trigger[16];
	size_t len = 0;
	int n;

	if (chkmsg_request_decode(data, size, trigger, sizeof(trigger), NULL) == 0) {
		n = chkmsg_request_encode(trigger, req, sizeof(req), NULL);
		if (n < 0 || (size_t)n != size || memcmp(req, data, size) != 0)
			abort(); /* decode and encode disagree */
	}
	if (chkmsg_expect_decode(data, size, &in, NULL) == 0) {
		if (in.ex.n_listen > 4 || in.ex.n_policy_ports > CHK_EXPECT_PORTS ||
		    (in.ex.canon && strlen(in.ex.canon) != in.ex.canon_len))
			abort(); /* out of what the checker can take */
		for (size_t i = 0; i < in.ex.n_policy_ports; i++)
			if (!in.ex.policy_ports[i][0] ||
			    strlen(in.ex.policy_ports[i]) >= PC_IFNAMSIZ)
				abort();
		if (chkmsg_expect_encode(&in.ex, &again, &len, NULL) < 0 || len != size ||
		    memcmp(again, data, size) != 0)
			abort();
		free(again);
		chkmsg_expect_free(&in);
	}
	if (chkmsg_result_decode(data, size, &res, NULL) == 0) {
		const char *t = res.texts;

		if (res.shown > res.findings || (res.type == CHK_ERROR && !res.message))
			abort();
		for (uint32_t i = 0; i < res.shown; i++)
			t += strlen(t) + 1; /* each text NUL-terminated inside the buffer */
		if (t > res.texts + size)
			abort();
		chkmsg_result_free(&res);
	}
	return 0;
}
