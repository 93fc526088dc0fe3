/* libFuzzer target: the log verifier's parsers — log lines (records and
 * checkpoints), signed notes, checkpoint bodies, inclusion proofs, the JSON
 * reader behind `log show`. The input is read as a log file, as a proof,
 * and as a checkpoint note, against one fixed public key (the seeds in
 * corpus/logverify/ were signed with its private half, which is not kept). */
#include "logd/logd_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char pub[] =
    "fuzz/portcullis-log+3aa8d1a9+AT6Zbojz05cKgRPBevvH11BtK8g+/qt6u59R1AREoptl";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct note_verifier key;
	static bool have_key;
	const char *text = (const char *)data;
	struct logproof_info info;
	struct checkpoint cp;
	struct logv *v;
	size_t blen;

	if (!have_key) {
		if (note_verifier_parse(pub, &key, NULL) < 0)
			abort();
		have_key = true;
	}
	/* as a log file, tolerating and not tolerating a torn end */
	for (unsigned flags = 0; flags <= LOGV_TORN_OK; flags += LOGV_TORN_OK) {
		if (logv_new(&key, &v, NULL) < 0)
			return 0;
		(void)logv_buffer(v, text, size, flags, NULL);
		logv_free(v);
	}
	/* each line as `log show` reads it */
	for (size_t off = 0; off < size;) {
		const char *eol = memchr(text + off, '\n', size - off);
		size_t len = eol ? (size_t)(eol - text - off) : size - off;
		char out[2048], note[CHECKPOINT_MAX];
		size_t nlen;

		(void)logrec_human(text + off, len, out, sizeof(out));
		/* and through every filter of `log show` (show_follow.c) */
		{
			static const struct logshow_filter f = {"a", "connect", LOGSHOW_REFUSED,
								"2026-12-01T00:00:00.000Z"};

			(void)logshow_match(&f, text + off, len);
		}
		(void)logv_checkpoint_unescape(text + off, len, note, sizeof(note), &nlen);
		off += len + 1;
	}
	(void)logproof_verify(text, size, &key, &info, NULL);
	(void)checkpoint_open(&key, text, size, &cp, NULL);
	(void)note_verify(&key, text, size, &blen, NULL);
	(void)checkpoint_body_parse(text, size, &cp, NULL);
	/* as a key file (a C string) */
	{
		char *z = malloc(size + 1);
		struct note_verifier other;
		struct note_signer *s = NULL;

		if (!z)
			return 0;
		memcpy(z, data, size);
		z[size] = '\0';
		(void)note_verifier_parse(z, &other, NULL);
		if (note_signer_parse(z, &s, NULL) == 0)
			note_signer_free(s);
		free(z);
	}
	return 0;
}
