/* libFuzzer target: the witness's parsers of peer bytes — the HTTP request
 * head, the tlog-witness add-checkpoint body (old size, proof lines, the
 * checkpoint note) — and its decision, on a witness that has cosigned the
 * log's checkpoint for 5 records (so bodies with "old 5" reach the
 * consistency check). The seeds in corpus/witness/ were made by a log whose
 * public key is below (its private half is not kept); the witness's key is
 * a fuzzing-only key. */
#include "logd/logd_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char log_pub[] =
    "fuzz/witnessed-log+4dfaa94c+AaB3Pm6kD+kSc3VXZ2zflLY3e1SjRMcrFmCy3OS0XG+/";
static const char witness_key[] =
    "PRIVATE+KEY+fuzz/witness+22f4195e+AW8uJgE5oo/1m+JBgNksKzZfu36/ysWMYs+ZDoXGkqgb";
static const char prime[] =
    "old 0\n\nfuzz/witnessed-log\n5\nWxGt7L7t8abDJR7KE+j7JkbipfvXNgYyOTyRsXo57FA=\ntime "
    "2026-12-01T20:14:10.092Z\n\n\xe2\x80\x94 fuzz/witnessed-log "
    "TfqpTL0wF8++eI7d08zDuW1S9HXRQC01+5PTdC0ntYlllTwvaklwvlmAf4F7dVPm8EqnXuvj2LCvpn1fK3q2uhan+gM="
    "\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct note_verifier key;
	static struct note_signer *wk;
	const char *text = (const char *)data;
	char resp[1024 + COSIG_LINE_MAX];
	struct witness_req req;
	struct witness *w;
	size_t head, blen;
	bool add;

	if (!wk) {
		if (note_verifier_parse(log_pub, &key, NULL) < 0 ||
		    note_signer_parse(witness_key, &wk, NULL) < 0)
			abort();
	}
	/* the body parser alone, on the whole input */
	(void)witness_req_parse(text, size, &req, NULL);
	/* as a request: the head, then its body through the witness */
	if (witness_http_head(text, size, &head, &blen, &add, NULL) < 0 || !add ||
	    size - head < blen)
		return 0;
	if (witness_new(wk, &key, 1, NULL, &w, NULL) < 0)
		return 0;
	if (witness_add_checkpoint(w, prime, sizeof(prime) - 1, 1, resp, sizeof(resp)) != 200)
		abort(); /* the log's own checkpoint: always cosigned by a fresh witness */
	(void)witness_add_checkpoint(w, text + head, blen, 2, resp, sizeof(resp));
	if (strlen(resp) >= sizeof(resp))
		abort();
	witness_free(w);
	return 0;
}
