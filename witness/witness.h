/* witness: a C2SP tlog-witness, a program of its own that runs on another
 * host than the log (portcullis-logd --witness, dispatched from
 * logd/main.c so one package installs both). It cosigns a log's
 * checkpoint only when the log's signature verifies and a consistency
 * proof shows it extends what it cosigned before; the checking is the
 * core's (tlog/tlog.h), the state (one file per log) and the HTTP server
 * are its own. logd's client of it is logd's (logd/witnessc.c).
 * docs/logd.md "Witness and consistency proofs". */
#ifndef PC_WITNESS_H
#define PC_WITNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"
#include "tlog/tlog.h"

/* The witness (witness/witness.c, portcullis-logd --witness): C2SP
 * tlog-witness POST /add-checkpoint. */
#define WITNESS_BODY_MAX 16384
#define WITNESS_LOGS_MAX 16
struct witness_req {
	uint64_t old;
	uint8_t proof[MERKLE_PROOF_MAX][MERKLE_HASH];
	size_t proof_len;
	const char *note; /* inside the body */
	size_t note_len;
};
/* "old N\n" <base64 hash lines> "\n" <checkpoint note>. */
int witness_req_parse(const char *body, size_t len, struct witness_req *out, struct pc_err *err);
/* An HTTP/1.x request head in buf[0, len): PC_EAGAIN until it is complete;
 * then *head_len, and *body_len from Content-Length (required, at most
 * WITNESS_BODY_MAX); *add is true for POST /add-checkpoint. */
int witness_http_head(const char *buf, size_t len, size_t *head_len, size_t *body_len, bool *add,
		      struct pc_err *err);
struct witness;
/* dir: where each log's latest cosigned checkpoint is kept (NULL: in
 * memory only, for tests and fuzzing); keys and signer borrowed. */
int witness_new(const struct note_signer *signer, const struct note_verifier *logs, size_t n_logs,
		const char *dir, struct witness **out, struct pc_err *err);
void witness_free(struct witness *w);
/* One request body: the HTTP status, and the reply body in resp (NUL
 * terminated; the signature line on 200, "<size>\n" on 409, else why). */
int witness_add_checkpoint(struct witness *w, const char *body, size_t len, uint64_t now_s,
			   char *resp, size_t resplen);
/* One accepted connection: one request, its reply (the caller closes fd). */
void witness_serve_fd(struct witness *w, int fd);
/* Serve TCP on listen_fd until SIGTERM/SIGINT (blocked by the caller). */
int witness_serve(struct witness *w, int listen_fd, struct pc_err *err);
/* portcullis-logd --witness ARGS. */
int witness_main(int argc, char **argv);

#endif
