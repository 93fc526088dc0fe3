/* libFuzzer target: the log verifier's parsers — log lines (records and
 * checkpoints), signed notes, checkpoint bodies, inclusion proofs, the JSON
 * reader behind `log show`, and the verdict `log verify` prints (what
 * "intact" means, of one file and of the chain of its halves as two
 * files). The input is read as a log file, as a proof, and as a checkpoint note, against one fixed
 * public key (the seeds in corpus/logverify/ were signed with its private half, which is not kept).
 */
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
	/* as a log file, tolerating and not tolerating a torn end; what
	 * verifies gets its verdict, as log verify decides it */
	for (unsigned flags = 0; flags <= LOGV_TORN_OK; flags += LOGV_TORN_OK) {
		if (logv_new(&key, &v, NULL) < 0)
			return 0;
		if (logv_buffer(v, text, size, flags, NULL) == 0) {
			const struct logv_result *r = logv_result(v);
			static const struct cosig_verifier wkey = {.name = "fuzz/witness"};
			struct tlog_file_facts f = {.key = &key,
						    .ext = r->has_cp ? &r->last_cp : NULL,
						    .sidecar_missing = !r->has_cp,
						    .allow_unsigned = flags != 0,
						    .wkey = flags ? &wkey : NULL};
			struct tlog_file_verdict fv;

			if (tlog_verdict_file(r, &f, &fv, NULL) < 0)
				abort(); /* no anchors: nothing to fail against */
			if (fv.result == TLOG_UNSIGNED && r->has_cp)
				abort(); /* a checkpoint in the file signs it */
			if (fv.result == TLOG_INTACT && !fv.accepted)
				abort();
		}
		logv_free(v);
	}
	/* its two halves (at a newline) as two files of one log: the chain */
	{
		const char *mid = size ? memchr(text + size / 2, '\n', size - size / 2) : NULL;
		struct tlog_link l[2] = {{0}};
		struct tlog_chain_verdict cv;
		size_t k = 0;

		for (int half = 0; mid && half < 2; half++) {
			const char *b = half ? mid + 1 : text;
			size_t n =
			    half ? size - (size_t)(mid + 1 - text) : (size_t)(mid + 1 - text);

			if (logv_new(&key, &v, NULL) < 0)
				return 0;
			if (logv_buffer(v, b, n, 0, NULL) == 0) {
				const struct logv_result *r = logv_result(v);

				l[k] = (struct tlog_link){.first_seq = r->first_seq,
							  .last_seq = r->last_seq,
							  .id = (size_t)half};
				memcpy(l[k].first_prev, r->first_prev, MERKLE_HASH);
				memcpy(l[k].last_hash, r->last_hash, MERKLE_HASH);
				k++;
			}
			logv_free(v);
		}
		if (k && tlog_verdict_chain(l, k, &cv) == 0 &&
		    (cv.files != k || cv.first_seq > cv.last_seq))
			abort();
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
