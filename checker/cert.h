/* checker: the certificate — an in-toto Statement v1 in a DSSE envelope
 * signed with the appliance's ed25519 key — its JSON reader, signing,
 * verification and readable renderings. Private to checker/ (and its tests
 * and fuzz target); the format is documented in docs/checker.md. */
#ifndef PC_CHECKER_CERT_H
#define PC_CHECKER_CERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"

struct pc_config;

/* ---- JSON (json.c) ------------------------------------------------------- */

enum { JV_NULL, JV_TRUE, JV_FALSE, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT };
struct jv {
	int type;
	char *s; /* string (decoded) or number text */
	size_t slen;
	struct jv **items; /* array items / object values */
	char **keys;	   /* object keys */
	size_t n;
};
/* Parse a whole buffer (strict: one value, nothing after it, no duplicate
 * keys, depth <= 32). NULL when malformed. Caller frees with jv_free. */
struct jv *jv_parse(const char *buf, size_t len);
void jv_free(struct jv *v);
const struct jv *jv_get(const struct jv *obj, const char *key); /* borrowed */
const char *jv_str(const struct jv *v);				/* NULL unless a string */

/* ---- DSSE and keys (dsse.c) ------------------------------------------------ */

#define CERT_PAYLOAD_TYPE "application/vnd.in-toto+json"

/* PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body.
 * Returns a malloc'd buffer (*len bytes) or NULL. */
uint8_t *dsse_pae(const char *type, const uint8_t *body, size_t blen, size_t *len);

/* A parsed envelope: the payload decoded, and the first signature. */
struct cert_env {
	char *payload_type;
	uint8_t *payload;
	size_t payload_len;
	char keyid[128];
	uint8_t sig[64];
	struct jv *statement; /* the payload parsed as JSON */
};
/* Parse an envelope (and its statement). PC_EPARSE with a reason. */
int cert_env_parse(const char *buf, size_t len, struct cert_env *out, struct pc_err *err);
void cert_env_free(struct cert_env *e);
/* Verify e's signature over the PAE with the raw ed25519 public key. */
int cert_env_verify(const struct cert_env *e, const uint8_t pk[32], struct pc_err *err);
/* Sign payload, returning the envelope JSON (malloc'd, NUL-terminated). */
int cert_env_sign(const char *payload, size_t len, const uint8_t sk[64], const uint8_t pk[32],
		  char **out, struct pc_err *err);

/* The appliance key: <state_dir>/appliance.key (PKCS#8 PEM, 0600) and
 * <state_dir>/appliance.pub (SubjectPublicKeyInfo PEM, what openssl reads).
 * Created by `portcullis cert keygen` or on first issuance. */
int cert_key_paths(const struct pc_config *cfg, char *key, char *pub, size_t len);
int cert_key_load_or_create(const char *key, const char *pub, bool create, uint8_t sk[64],
			    uint8_t pk[32], struct pc_err *err);
int cert_pub_load(const char *pub, uint8_t pk[32], struct pc_err *err);
/* keyid: hex sha256 of the raw public key. */
void cert_keyid(const uint8_t pk[32], char out[65]);

/* ---- CLI pieces (cert.c) ---------------------------------------------------- */

int cert_cli_issue(int argc, char **argv, const struct pc_config *cfg);
int cert_cli_key(int argc, char **argv, const struct pc_config *cfg);
int cert_cli_sub(int argc, char **argv, const char *config); /* verify, render */

/* Render a verified statement: md or html (malloc'd) or NULL. */
char *cert_render(const struct jv *statement, bool html);

#endif
