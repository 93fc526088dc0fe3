/* vault: portcullis-vault — TLS interception that swaps placeholders for real
 * credentials only toward the host a secret is bound to — and the
 * `portcullis secrets` / `portcullis ca` commands. docs/vault.md is the
 * admin's reference; this header is the module's interface.
 *
 * Pieces, each in its own file: the strict HTTP/1.1 parser (http.c), the
 * streaming secret scrubber (scrub.c), the sealed store (store.c), the CA and
 * leaf certificates (ca.c), the SNI reader (sni.c), request checking and
 * injection (inject.c), the log queue (logq.c), upstream TLS (upstream.c),
 * one client connection (conn.c, relay.c), and the daemon (main.c). */
#ifndef PC_VAULT_H
#define PC_VAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/pc.h"

/* `portcullis secrets ...` and `portcullis ca ...`: argv[0] is "secrets" or
 * "ca". Returns a PC_EXIT_* code; prints its own errors. */
int vault_cli(int argc, char **argv, const char *config);

/* The vault's control socket, <run_dir>/vault.sock (SOCK_SEQPACKET, root
 * only): the request "metrics" gets the vault's metrics in Prometheus text
 * format (docs/operations.md, "Metrics"). */
#define PC_VAULT_CTL_SOCK "vault.sock"

/* ======================================================================
 * HTTP/1.1 message heads (http.c) — strict: anything ambiguous is refused,
 * because the vault and the upstream must never disagree on where a request
 * ends (request smuggling).
 * ====================================================================== */

#define HTTP_MAX_HEADERS 100
#define HTTP_MAX_LINE	 8192 /* request line, one header line, one chunk line */

/* A header as it appears in the head; pointers borrow the parsed buffer.
 * value has optional whitespace trimmed on both sides. */
struct http_header {
	const char *name;
	size_t name_len;
	const char *value;
	size_t value_len;
};

enum http_body {
	HTTP_BODY_NONE = 0, /* no body */
	HTTP_BODY_LENGTH,   /* Content-Length bytes */
	HTTP_BODY_CHUNKED,  /* Transfer-Encoding: chunked */
	HTTP_BODY_CLOSE,    /* responses only: until the upstream closes */
};

struct http_request {
	char method[24];
	const char *target; /* request-target, borrowed */
	size_t target_len;
	int minor; /* HTTP/1.<minor>: 0 or 1 */
	struct http_header hdr[HTTP_MAX_HEADERS];
	size_t n_hdr;
	size_t head_len; /* bytes of the head, final CRLF CRLF included */
	enum http_body body;
	uint64_t content_length;
	int host;	 /* index of the Host header in hdr, -1 if none */
	bool keep_alive; /* the connection may carry another request */
	bool expect_continue;
	bool upgrade; /* Connection: upgrade + Upgrade: websocket */
};

struct http_response {
	int minor;
	unsigned status;
	struct http_header hdr[HTTP_MAX_HEADERS];
	size_t n_hdr;
	size_t head_len;
	enum http_body body;
	uint64_t content_length;
	bool keep_alive;
};

/* Parse a request head at the start of buf[0..len). Returns the head length
 * (> 0) and fills *req; PC_EAGAIN when the head is not complete yet (and
 * nothing is wrong so far); PC_EPARSE when the request must be refused:
 * *status is the answer to give (400, 431, 501, 505) and err says why in
 * words fit for the X-Portcullis-Error header. max_head bounds the head. */
int http_request_parse(const char *buf, size_t len, size_t max_head, struct http_request *req,
		       unsigned *status, struct pc_err *err);

/* Parse a response head; for_head: the request was HEAD (no body follows).
 * Returns as http_request_parse (no status). */
int http_response_parse(const char *buf, size_t len, size_t max_head, bool for_head,
			struct http_response *resp, struct pc_err *err);

/* The response head for the sandbox, without its final CRLF: the status
 * line and the headers of r (parsed from buf), written "Name: value";
 * without keep_framing the framing and connection headers are left out (the
 * vault sets its own). out needs http_response_head_max(r) bytes. Returns
 * the length, 0 on a bad argument. */
size_t http_response_head_max(const struct http_response *r);
size_t http_response_head_rebuild(const char *buf, const struct http_response *r, bool keep_framing,
				  char *out, size_t cap);

/* Header lookup by name (case-insensitive); index or -1. */
int http_header_find(const struct http_header *hdr, size_t n, const char *name, size_t from);

/* Chunked body decoder. It never copies: feed() reports how many input bytes
 * it consumed and which span of them (if any) is payload. */
struct http_chunked {
	int state;
	uint64_t remaining; /* payload bytes left in the current chunk */
	size_t line_len;    /* bytes of the current size/trailer line */
	size_t trailer_bytes;
	bool line_cr; /* the current line's last byte was CR */
	bool ext;     /* inside a chunk extension */
	bool digits;  /* the size line has at least one digit */
};
void http_chunked_init(struct http_chunked *c);
/* Returns 1 when the body (with its trailers) is complete, 0 when more
 * input is needed, PC_EPARSE on a framing error. *consumed input bytes were
 * used; in[*data_off, *data_off + *data_len) is payload (data_len may be 0).
 * Call again with the rest of the input until it returns 1 or consumes it. */
int http_chunked_feed(struct http_chunked *c, const char *in, size_t len, size_t *consumed,
		      size_t *data_off, size_t *data_len, struct pc_err *err);

/* ======================================================================
 * Streaming scrubber (scrub.c): replaces every occurrence of any needle by
 * its replacement in a byte stream cut at arbitrary points, holding back at
 * most (longest needle - 1) bytes. Needles that are refusals (repl == NULL)
 * stop the stream instead: used to find placeholders in request bodies.
 * ====================================================================== */

struct scrub_pat {
	const uint8_t *needle; /* borrowed for the scrubber's life */
	size_t nlen;	       /* >= 1 */
	const uint8_t *repl;   /* NULL: a match is a refusal */
	size_t rlen;
};

/* Called with output bytes; returns 0 or <0 to stop (returned by feed). */
typedef int (*scrub_out_fn)(void *ctx, const uint8_t *p, size_t n);

struct scrub {
	const struct scrub_pat *pats; /* borrowed */
	size_t n_pats;
	size_t maxlen;
	uint8_t *buf; /* held-back tail + current input; wiped on free */
	size_t len, cap;
	size_t hits;
	int hit; /* index of the refusing pattern that matched, or -1 */
};

int scrub_init(struct scrub *s, const struct scrub_pat *pats, size_t n, struct pc_err *err);
/* Returns 0, PC_EREFUSED when a refusal needle matched (s->hit says which;
 * bytes before it were output, nothing after), PC_ENOMEM, or the out fn's
 * error. */
int scrub_feed(struct scrub *s, const uint8_t *in, size_t len, scrub_out_fn out, void *ctx);
/* End of stream: outputs the held-back tail. */
int scrub_finish(struct scrub *s, scrub_out_fn out, void *ctx);
void scrub_free(struct scrub *s);

/* One-shot: scrub in[0..len) into a new malloc'ed buffer (caller frees,
 * wiping it if it may hold a secret). */
int scrub_buffer(const struct scrub_pat *pats, size_t n, const uint8_t *in, size_t len,
		 uint8_t **out, size_t *out_len, struct pc_err *err);

/* ======================================================================
 * Sealed store (store.c) in the vault.secrets directory:
 *   secret.key          32-byte secretbox key, 0400, owner vault.user
 *   <NAME>.sealed       "PCV1" nonce secretbox(placeholder "\n" value), 0400 vault.user
 *   <NAME>.placeholder  the placeholder and "\n", 0644: what the launcher reads
 * ====================================================================== */

#define VAULT_NAME_MAX	64
#define VAULT_PH_RANDOM 26 /* base32 characters after the name: 130 bits */
#define VAULT_PH_MAX	(5 + VAULT_NAME_MAX + 1 + VAULT_PH_RANDOM + 1)
#define VAULT_VALUE_MIN 8 /* shorter values would make scrubbing ambiguous */
#define VAULT_VALUE_MAX 4096

struct vault_secret {
	char name[VAULT_NAME_MAX];
	char placeholder[VAULT_PH_MAX];
	size_t ph_len;
	uint8_t *value; /* sodium_malloc'ed (mlocked, guarded); wiped by free */
	size_t value_len;
};

/* Every secret of the store, unsealed (the daemon). */
struct vault_store {
	struct vault_secret *s;
	size_t n;
};

/* Is name a valid secret name ([A-Z][A-Z0-9_]*, < VAULT_NAME_MAX)? */
bool store_name_valid(const char *name);
/* Create the key if missing (owner uid/gid, 0400) and seal value under
 * name, making a new placeholder (or keeping the existing one when
 * keep_placeholder and the secret exists: rotation). The placeholder is
 * written to ph (VAULT_PH_MAX bytes) on success. value is borrowed. */
int store_secret_set(const char *dir, const char *name, const uint8_t *value, size_t len, uid_t uid,
		     gid_t gid, bool keep_placeholder, char *ph, struct pc_err *err);
int store_secret_rm(const char *dir, const char *name, struct pc_err *err);
/* The placeholder of name, from its .placeholder file (no key needed). */
int store_placeholder_read(const char *dir, const char *name, char *ph, struct pc_err *err);
/* Names in the store, sorted; *names is one malloc'ed array of
 * VAULT_NAME_MAX-byte entries (caller frees). */
int store_names(const char *dir, char (**names)[VAULT_NAME_MAX], size_t *n, struct pc_err *err);
/* Unseal every secret (needs the key). A file that does not authenticate,
 * or whose placeholder does not carry its name, fails the whole load. */
int store_load(const char *dir, struct vault_store **out, struct pc_err *err);
void store_free(struct vault_store *st);
/* Seal/unseal one blob with a key (exposed for the unit tests). */
int store_seal(const uint8_t key[32], const uint8_t *pt, size_t len, uint8_t **out, size_t *out_len,
	       struct pc_err *err);
int store_unseal(const uint8_t key[32], const uint8_t *in, size_t len, uint8_t **pt, size_t *pt_len,
		 struct pc_err *err); /* *pt is sodium_malloc'ed */

/* ======================================================================
 * Certificate authority (ca.c): <ca_dir>/ca.key (0400 vault.user) and
 * <ca_dir>/ca.pem (0644, what sandboxes trust). Leaves are ECDSA P-256,
 * valid VAULT_LEAF_HOURS, cached per host name up to VAULT_LEAF_CACHE.
 * ====================================================================== */

#define VAULT_LEAF_HOURS 24
#define VAULT_LEAF_CACHE 1024

struct vault_ca; /* thread-safe after ca_load */

int ca_init(const char *dir, uid_t uid, gid_t gid, bool force, struct pc_err *err);
int ca_load(const char *dir, struct vault_ca **out, struct pc_err *err);
void ca_free(struct vault_ca *ca);
/* A leaf for host (already validated), from the cache or minted. *cert and
 * *key are new references the caller frees (X509_free, EVP_PKEY_free);
 * declared as void to keep OpenSSL out of this header. */
int ca_leaf_get(struct vault_ca *ca, const char *host, void **cert, void **key, struct pc_err *err);

/* ======================================================================
 * SNI (sni.c): the server_name of a ClientHello extension body.
 * ====================================================================== */

/* Parse the server_name extension data (RFC 6066) and write the host name,
 * lower-cased, into host (hostlen >= 254). Only one host_name entry is
 * accepted, and it must be a valid DNS name. */
int sni_parse(const uint8_t *ext, size_t len, char *host, size_t hostlen, struct pc_err *err);

/* ======================================================================
 * WebSocket frames (ws.c), for the tunnel after a 101.
 * ====================================================================== */

#define WS_MAX_FRAME (1024 * 1024) /* larger frames end the tunnel */

struct ws_frame {
	bool fin, masked;
	uint8_t rsv, opcode;
	uint8_t mask[4];
	uint64_t len;	/* payload length */
	size_t hdr_len; /* header bytes, mask key included */
};

/* Parse a frame header at b[0..len): header length (> 0), 0 when more bytes
 * are needed, PC_EPARSE on a frame the vault refuses (RSV bits, reserved
 * opcodes, masking that does not match want_masked, bad lengths). */
int ws_frame_parse(const uint8_t *b, size_t len, bool want_masked, struct ws_frame *f,
		   struct pc_err *err);
/* Write an unmasked frame header (out >= 10 bytes); returns its length. */
size_t ws_frame_header(uint8_t *out, bool fin, uint8_t opcode, uint64_t len);
/* XOR p with the mask key (payload offset 0). */
void ws_unmask(uint8_t *p, size_t n, const uint8_t mask[4]);

#endif
