/* vault internals shared by the daemon's files (not used outside vault/ and
 * its tests). Pieces, each in its own file: the strict HTTP/1.1 parser
 * (http.c), the streaming secret scrubber (scrub.c), the sealed store
 * (store.c), the CA and leaf certificates (ca.c), WebSocket frames (ws.c),
 * the served state (state.c), request checking and injection (inject.c),
 * the log queue (logq.c), upstream TLS (upstream.c), one client connection
 * (conn.c, relay.c, tunnel.c), and the daemon (daemon.c; main.c only reads
 * its options). */
#ifndef PC_VAULT_INT_H
#define PC_VAULT_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>

#include "logd/logd.h"
#include "rules/rules.h"
#include "vault/vault.h"

/* OpenSSL's handles, declared as OpenSSL declares them (openssl/types.h),
 * so that this header needs no OpenSSL header: the parsers' proofs
 * (tests/prove, Frama-C) read it with the C library alone. The files that
 * call OpenSSL include it themselves. */
typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

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

/* va-holes: the same, fed as the head arrives (one TLS record at a time):
 * each call looks only at the bytes after those the last call saw, and the
 * head is parsed in full once, when its end (or an error) is there, so the
 * cost is linear in the head's size however it is cut. buf must hold the
 * same bytes as before, plus more; init the scan for each head. */
struct http_scan {
	size_t pos;	/* bytes looked at */
	size_t ls;	/* start of the current line */
	size_t lines;	/* lines ended so far */
	bool in_head;	/* past the empty lines a request may start with */
	size_t parses;	/* full parses run (the unit test counts them) */
	size_t scanned; /* bytes looked at by the scan */
};
void http_scan_init(struct http_scan *sc);
int http_request_parse_more(struct http_scan *sc, const char *buf, size_t len, size_t max_head,
			    struct http_request *req, unsigned *status, struct pc_err *err);

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

/* Basic credentials (the part after "Basic" and its blanks) as decoders
 * read them, to find a placeholder inside: either base64 alphabet, padding
 * or none, blanks skipped. Anything else in them is read every way a
 * decoder may (reading % 2: a stray byte skipped or taking a character's
 * place; reading / 2: a '=' before the end ending a run, skipped, or
 * taking a place): HTTP_BASIC_READINGS readings, written to out (at most
 * cap bytes; n / 4 * 3 + 2 are enough) each. http_basic_plain: the
 * credentials hold nothing else, so that every reading reads alike. */
#define HTTP_BASIC_READINGS 6
size_t http_basic_read(const char *in, size_t n, unsigned reading, uint8_t *out, size_t cap);
bool http_basic_plain(const char *in, size_t n);

/* ======================================================================
 * Streaming scrubber (scrub.c): replaces every occurrence of any needle by
 * its replacement in a byte stream cut at arbitrary points, holding back at
 * most (longest needle - 1) bytes. Needles that are refusals (repl == NULL)
 * stop the stream instead: used to find placeholders in request bodies.
 * ====================================================================== */

struct scrub_meta;
struct scrub_index;
struct scrub_pat {
	const uint8_t *needle; /* borrowed for the scrubber's life */
	size_t nlen;	       /* >= 1 */
	const uint8_t *repl;   /* NULL: a match is a refusal */
	size_t rlen;
	/* each character of the needle that is not a letter or digit also
	 * matches in every escaped form the vault knows (scrub.c, esc_form:
	 * JSON, percent-encoding, HTML entities), mixed as an encoder mixes
	 * them: how a secret value or encoding is searched for */
	bool esc;
	/* (with esc) a base64 pattern: a line break (LF, CRLF, or JSON's
	 * "\\n", "\\r\\n") may stand between two of its characters, as
	 * encoders wrap lines (scrub.c, lb_form) */
	bool lb;
	/* (kept patterns only) what the search needs of the needle, worked
	 * out once when it was kept: its anchors (runs of letters and
	 * digits) and longest match, in the kept set's locked memory (they
	 * say where a secret's letters and digits are); NULL: worked out at
	 * each search */
	const struct scrub_meta *meta;
	/* (kept patterns only) the index of the set this pattern is number
	 * ixi of (scrub_keep_index), or NULL */
	const struct scrub_index *ix;
	size_t ixi;
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
		 /* the kept sets' indexes whose patterns pats holds in a row (from
		  * pats[ixb[t]]): their anchors are found for all of them in one pass
		  * over the buffer, and each anchor's next place cached while the
		  * buffer stays the same (nx: per pattern and anchor, the offset a
		  * search is valid from and the place found, SIZE_MAX: none) */
#define SCRUB_IX_MAX 2
	const struct scrub_index *ix[SCRUB_IX_MAX];
	size_t ixb[SCRUB_IX_MAX], n_ix;
	size_t *nx;
	size_t nx_small[4 * 16];
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

/* Locked, guarded memory for secrets (secmem.c): sodium_malloc, and a
 * bounded cache of chunks given back (wiped at once) for the next request
 * of the same size. secmem_free takes the size secmem_alloc was given. */
void *secmem_alloc(size_t size);
void secmem_free(void *p, size_t size);

/* ---- va-holes: kept patterns (scrub.c) ------------------------------------------
 * A set of scrub patterns that grows: what one request, or one connection
 * over its whole life, injected (values and their encodings, matched in
 * their escaped forms). Copies live in locked memory, wiped when freed; a needle already
 * in the set is not added twice, so a keep-alive connection that repeats
 * its credentials does not grow it. Bounded: beyond the limits an add is
 * PC_EREFUSED (the caller refuses the request: it could not be scrubbed). */
#define SCRUB_KEEP_MAX_PATS  256
#define SCRUB_KEEP_MAX_BYTES (256 * 1024)

struct keep_chunk;
struct scrub_keep {
	struct scrub_pat *pats;
	size_t n, cap;
	struct keep_chunk *chunks;
	size_t bytes;
	bool unbounded;		/* the state's own set (every value of the store) */
	struct scrub_index *ix; /* scrub_keep_index's, locked; NULL: none */
};

/* Add needle -> repl; borrow: keep the pointers (they outlive the set)
 * instead of copying. 0 (also when the needle is there already),
 * PC_EREFUSED beyond the limits, PC_ENOMEM, PC_EINVAL. */
int scrub_keep_add(struct scrub_keep *k, const uint8_t *needle, size_t nlen, const uint8_t *repl,
		   size_t rlen, bool borrow);
/* Every form of a secret value the vault knows, each matched escaped too
 * (esc), replaced by repl (its placeholder): the value itself, and the
 * characters of its base64 and base64url encodings that hold value bits
 * only, in each of the three alignments it can have (a standalone
 * encoding, padded or not, or inside Basic credentials: whatever
 * surrounds it). */
int scrub_keep_add_value(struct scrub_keep *k, const uint8_t *value, size_t vlen,
			 const uint8_t *repl, size_t rlen);
/* Copy every pattern of src into dst (dst owns its copies). */
int scrub_keep_merge(struct scrub_keep *dst, const struct scrub_keep *src);
void scrub_keep_free(struct scrub_keep *k);
/* Build (again, if patterns were added since) the set's index: the first
 * two bytes of every pattern's anchors in a table, so that a scrubber
 * finds all of them in one pass per chunk instead of one memmem per
 * pattern. Built from secret values: locked memory, wiped when freed. Only
 * between requests: a rebuild frees the index that copies of the set's
 * patterns (a request's pattern array) point to. Without it (PC_ENOMEM) a
 * scrubber finds the same matches, one pattern at a time. */
int scrub_keep_index(struct scrub_keep *k);
/* ---- end va-holes ---------------------------------------------------------------- */

/* ======================================================================
 * Sealed store (store.c) in the vault.secrets directory:
 *   secret.key          32-byte secretbox key, 0400, owner vault.user
 *   <NAME>.sealed       "PCV1" nonce secretbox(placeholder "\n" value), 0400 vault.user
 *   <NAME>.placeholder  the placeholder and "\n", 0644: what the launcher reads
 * ====================================================================== */

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

/* ---- placeholders decoded and case-folded (phscan.c) -------------------------------
 * A stream scanner: what it was fed, percent-decoded (one level) and
 * folded to lower case, searched for every placeholder of the store folded
 * the same way; the tail it keeps carries a placeholder split across two
 * feeds (two reads of a body, two WebSocket messages). */
#define PH_BLOCK 4096
struct ph_stream {
	const struct vault_store *store; /* borrowed */
	size_t maxlen;			 /* the longest placeholder */
	uint8_t tail[VAULT_PH_MAX];	 /* the last (maxlen - 1) folded bytes */
	size_t tlen;
	int esc; /* 1: a '%' is pending, 2: '%' and h1 */
	uint8_t h1;
	/* what every placeholder starts with, folded ("pcph_"): found once
	 * per block, each placeholder compared only where it is, instead of
	 * one memmem per placeholder */
	uint8_t pre[VAULT_PH_MAX];
	size_t plen;
};
void ph_stream_init(struct ph_stream *ps, const struct vault_store *store);
/* The index of a secret whose placeholder the folded stream now holds, or -1. */
int ph_stream_feed(struct ph_stream *ps, const uint8_t *in, size_t n);
void ph_stream_wipe(struct ph_stream *ps);
/* The prefix every placeholder of the store shares ("pcph_"): its length
 * as written and without case, 0 when there is none. Worked out with the
 * state (vault_state_make), read for each header of every request. */
struct ph_prefix {
	size_t exact, folded;
};
void ph_prefix_get(const struct vault_store *store, struct ph_prefix *pp);
/* Can in[0..n) hold a placeholder of the store exactly? False only when
 * it does not hold their common prefix (pl bytes, ph_prefix_get's exact): one
 * memmem instead of one per placeholder where none is. */
bool ph_may_hold(const struct vault_store *store, size_t pl, const void *in, size_t n);
/* One-shot: the index of a secret whose placeholder in[0..n) holds folded, or -1. */
int ph_find_folded(const struct vault_store *store, const uint8_t *in, size_t n);
/* The same, with every exact placeholder blanked first: a decoded or
 * case-changed copy beside an exact one. -2: out of memory. */
int ph_find_altered(const struct vault_store *store, const struct ph_prefix *pp, const uint8_t *in,
		    size_t n);

/* Create the key if missing (owner uid/gid, 0400) and seal value under
 * name, making a new placeholder (or keeping the existing one when
 * keep_placeholder and the secret exists: rotation). The placeholder is
 * written to ph (VAULT_PH_MAX bytes) on success. value is borrowed. */
int store_secret_set(const char *dir, const char *name, const uint8_t *value, size_t len, uid_t uid,
		     gid_t gid, bool keep_placeholder, char *ph, struct pc_err *err);
int store_secret_rm(const char *dir, const char *name, struct pc_err *err);
/* Names in the store, sorted; *names is one malloc'ed array of
 * VAULT_NAME_MAX-byte entries (caller frees). */
int store_names(const char *dir, char (**names)[VAULT_NAME_MAX], size_t *n, struct pc_err *err);
/* Unseal every secret (needs the key). A file that does not authenticate,
 * or whose placeholder does not carry its name, fails the whole load. */
int store_load(const char *dir, struct vault_store **out, struct pc_err *err);
void store_free(struct vault_store *st);
/* As store_load, unsealing only the secrets keep(name, arg) keeps; of the
 * others only the placeholder is read (from NAME.placeholder; no value). */
int store_load_only(const char *dir, bool (*keep)(const char *name, void *arg), void *arg,
		    struct vault_store **out, struct pc_err *err);
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
/* A leaf for host (already validated) on port, from the cache or minted
 * (by the CA process for a ca_client_new handle: ca_load's is the CA's). *cert and
 * *key are new references the caller frees (X509_free, EVP_PKEY_free);
 * declared as void to keep OpenSSL out of this header. */
int ca_leaf_get(struct vault_ca *ca, const char *host, uint16_t port, void **cert, void **key,
		struct pc_err *err);

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

/* ---- va-holes: one direction of a tunnel as a stream (ws.c) ------------------
 * Bytes go in as they are read; frames are parsed in place (the payload
 * unmasked where it lies), so nothing but a sandbox message being collected
 * is buffered. The sandbox's direction collects each message whole
 * (ops->message, unmasked: it is searched for placeholders before any of it
 * goes upstream); the upstream's is passed on as it comes (ops->data, in
 * pieces, end on the message's last one), to be scrubbed in a stream.
 * Control frames (<= 125 bytes) go to ops->control whole. Memory: the
 * tunnel counts what it holds besides (its upstream scrubber's window and
 * frame buffer, tunnel.c) in one struct ws_mem, and the message buffers
 * are grown only while the count, the old and the new buffer both counted
 * while a buffer grows, stays within WS_TUNNEL_MAX (2 MiB). */
#define WS_MAX_MESSAGE	 (1024 * 1024)
#define WS_MAX_FRAGMENTS 4096
#define WS_TUNNEL_MAX	 (2 * 1024 * 1024)

struct ws_mem {
	size_t cur, peak; /* bytes of message buffers held (now, at most) */
};
struct ws_ops {
	int (*message)(void *ctx, uint8_t op, uint8_t *p, size_t n);
	int (*data)(void *ctx, uint8_t op, const uint8_t *p, size_t n, bool end);
	int (*control)(void *ctx, uint8_t op, uint8_t *p, size_t n);
};
struct ws_dir {
	bool from_client;
	struct ws_mem *mem;
	uint8_t hdr[14]; /* header bytes gathered so far */
	size_t hlen;
	struct ws_frame f; /* the frame whose payload comes */
	bool in_payload;
	uint64_t left, moff;
	uint8_t ctl[125]; /* a control frame's payload */
	size_t clen;
	uint8_t op; /* opcode of the data message in progress; 0: none */
	uint64_t total;
	unsigned frames;
	uint8_t *msg; /* sandbox direction: the message so far */
	size_t mlen, mcap;
};
void ws_dir_init(struct ws_dir *w, bool from_client, struct ws_mem *mem);
/* Feed b[0..n) (unmasked in place). 0, or <0 with why set (PC_EPARSE: a
 * frame the vault refuses; PC_EREFUSED: over the memory bound) or an ops
 * function's error. */

int ws_dir_feed(struct ws_dir *w, uint8_t *b, size_t n, const struct ws_ops *ops, void *ctx,
		char *why, size_t whylen);
void ws_dir_free(struct ws_dir *w);
/* ---- end va-holes ---------------------------------------------------------------- */

/* ---- log queue (logq.c) ---------------------------------------------------- */

struct logq;
struct vloop;
/* Start the log thread with a client for socket; timeout_ms bounds each
 * acknowledgement wait. */
int logq_start(const char *socket, int timeout_ms, struct logq **out, struct pc_err *err);
/* As logq_start, without a thread: the queue is served by loop (a worker's
 * event loop), as the loop's prep and an event on logd's socket; a
 * coroutine that waits for an acknowledgement parks until it came. Records
 * are sent once per round of the loop (every connection that had work in
 * that round shares one logd round trip). */
int logq_start_loop(const char *socket, int timeout_ms, struct vloop *loop, struct logq **out,
		    struct pc_err *err);
/* Queue a copy of rec. wait: block until logd acknowledged it (0) or did
 * not (<0: refuse the action). Without wait, returns once queued. */
int logq_record(struct logq *q, const struct logrec *rec, bool wait, struct pc_err *err);
/* As logq_record without wait, for a record that may ride along with the
 * next acknowledged batch (at most a few ms later): a response's status. */
int logq_record_lazy(struct logq *q, const struct logrec *rec, struct pc_err *err);
void logq_stop(struct logq *q);

/* ---- the state requests are served from (state.c) ---------------------------- */

/* Policy plus unsealed secrets; immutable once built, reference counted, and
 * swapped whole on SIGHUP. */
struct vault_state {
	struct policy *policy;
	struct vault_store *store;
	/* every form of every value (scrub_keep_add_value) -> its placeholder,
	 * for response scrubbing; a secret known by placeholder only has one
	 * pattern, the placeholder to itself */
	struct scrub_keep forms;
	/* every placeholder as a refusal pattern: what a request body's
	 * scanner looks for (relay.c); and their common prefix (inject.c).
	 * Worked out with the state, not per request. */
	struct scrub_pat *ph_pats;
	struct ph_prefix ph_pre;
	atomic_int refs;
};

int vault_state_load(const struct config *cfg, struct vault_state **out, struct pc_err *err);
/* The policy and the secret store the configuration names, read for a
 * state (errors prefixed "policy: " or "secrets: "); the caller owns both.
 * prev: the policy in force, whose unchanged files are not parsed again
 * (policy_load_dir_since), or NULL. */
int vault_state_inputs_load(const struct config *cfg, const struct policy *prev,
			    struct policy **policy, struct vault_store **store, struct pc_err *err);
/* As vault_state_load, from a policy and store the caller hands over (tests). */
int vault_state_make(struct policy *policy, struct vault_store *store, struct vault_state **out,
		     struct pc_err *err);
struct vault_state *vault_state_ref(struct vault_state *st);
void vault_state_unref(struct vault_state *st);

/* ---- request checking and injection (inject.c) ------------------------------ */

/* The verdict on one request head. status 0: forward out[0..head_len). */
struct inject_out {
	unsigned status;   /* else: refuse with this status */
	bool exfil;	   /* log the refusal as an exfiltration attempt */
	const char *code;  /* the refusal's event.code (static) */
	char reason[256];  /* X-Portcullis-Error; never holds a value */
	char secrets[512]; /* names injected, comma separated */
	/* refused (V4): the secret whose placeholder was refused, its name
	 * only ("" when none), for the record (`log audit`) */
	char refused[VAULT_NAME_MAX];
	size_t head_len;
	/* va-holes: what was injected, to scrub from every later response of
	 * the connection: the values (borrowed from the state);
	 * inject_out_clear forgets them. */
	struct scrub_keep derived;
};

/* Check req (parsed from buf) from sandbox sb on a TLS connection for sni,
 * original port port, and write the head to send upstream into out (cap
 * bytes, locked memory: it will hold real values). Returns 0 with
 * res->status set (0 = forward), or <0 on internal failure (refuse 500). */
int inject_request(const struct vault_state *st, const struct policy_sandbox *sb, const char *sni,
		   uint16_t port, const char *buf, const struct http_request *req, uint8_t *out,
		   size_t cap, struct inject_out *res);
void inject_out_clear(struct inject_out *res);
/* va-holes: add to k, for every secret of sb bound to sni:port, its value
 * and the part of its base64 encoding (in each alignment, and escaped)
 * that does not depend on what surrounds it where an upstream encodes it
 * with other bytes (Basic credentials of its own making). */
int inject_keep_bound(const struct vault_state *st, const struct policy_sandbox *sb,
		      const char *sni, uint16_t port, struct scrub_keep *k);
/* Bytes of out-buffer inject_request may need for a head of head_len. */
size_t inject_out_cap(size_t max_head);

/* ---- upstream TLS (upstream.c) ---------------------------------------------- */

/* A client context: TLS 1.2+, verification against trust (a CA bundle file,
 * or the system store when empty), ALPN http/1.1. */
int upstream_ctx_new(const char *trust, SSL_CTX **out, struct pc_err *err);
/* Connect to dst, handshake for host and verify its certificate and name
 * within timeout_ms. On failure err says why (for the 502 reason).
 * track(arg, fd) is called with the socket as soon as it exists (so that a
 * stopping daemon can shut it down mid-connect) and with -1 before it is
 * closed on failure. */
int upstream_connect_tracked(SSL_CTX *ctx, const char *scope, const struct pc_endpoint *dst,
			     const char *host, int timeout_ms, void (*track)(void *arg, int fd),
			     void *arg, int *fd, SSL **ssl, struct pc_err *err);

/* ---- I/O with deadlines (io.c) ---------------------------------------------- */

/* Non-blocking SSL I/O that waits with poll until deadline (monotonic ms).
 * io_read: >0 bytes, 0 clean EOF, <0 error or timeout (PC_ETIMEOUT). */
int io_read(SSL *ssl, int fd, void *buf, size_t len, uint64_t deadline);
/* As io_read, for when the peer must answer first (a response, the next
 * request): waits before the first read. */
int io_read_wait(SSL *ssl, int fd, void *buf, size_t len, uint64_t deadline);
int io_write(SSL *ssl, int fd, const void *buf, size_t len, uint64_t deadline);
int io_handshake(SSL *ssl, int fd, bool server, uint64_t deadline);

/* ---- a worker's event loop (vloop.c) ------------------------------------------
 * One thread, one epoll set, a coroutine per connection. The waits below
 * are for code running in a coroutine of the loop (vloop_in_co()); io.c
 * and upstream.c use them there and poll otherwise. Not thread-safe: one
 * loop, used by the thread that runs it. */
struct vloop;
struct vloop_co;
int vloop_new(struct vloop **out, struct pc_err *err);
/* Coroutines still parked are left as they are (their stacks too). */
void vloop_free(struct vloop *l);
/* Start fn(arg) as a coroutine with a stack of stack bytes (and a guard
 * page below it); it first runs at the next vloop_run_once. */
int vloop_spawn(struct vloop *l, size_t stack, void (*fn)(void *), void *arg, struct pc_err *err);
/* Coroutines not yet ended. */
size_t vloop_count(const struct vloop *l);
/* Run the ready coroutines, then prep (if set), then wait up to max_ms
 * (<0: no bound but the coroutines' and prep's deadlines) for events, and
 * dispatch them. */
void vloop_run_once(struct vloop *l, int max_ms);
/* prep(arg, &deadline) runs once per round after the coroutines: it may
 * lower *deadline (monotonic ms) to be called again by then. */
void vloop_set_prep(struct vloop *l, void (*prep)(void *arg, uint64_t *deadline), void *arg);
/* One-shot: call cb(arg, fd, revents) once fd is ready for ev (POLLIN,
 * POLLOUT); arming again replaces it. 0 or PC_E*. */
int vloop_arm(struct vloop *l, int fd, short ev, void (*cb)(void *arg, int fd, short rev),
	      void *arg);
void vloop_disarm(struct vloop *l, int fd);
/* A socket a coroutine waited on is about to be closed: forget its
 * registration (its number may come back as another socket). */
void vloop_forget(struct vloop *l, int fd);
bool vloop_in_co(void);
/* In a coroutine: wait until fd is ready for ev or deadline passes (0,
 * PC_ETIMEOUT, PC_EIO). vloop_waitn: any of n (at most 2) descriptors;
 * rev[i] (may be NULL) says which. The socket stays registered
 * (edge-triggered) for the coroutine until vloop_forget: a 0 may be an
 * edge that came before the operation that wanted it, which then wants it
 * again and waits again. */
int vloop_wait(int fd, short ev, uint64_t deadline);
int vloop_waitn(const int *fd, const short *ev, short *rev, int n, uint64_t deadline);
/* In a coroutine, after an I/O operation that did not wait: every few of
 * them, hand the thread to the other connections (fairness toward a peer
 * that always has bytes ready). Nothing outside a coroutine. */
void vloop_tick(void);
/* In a coroutine: sleep until vloop_wake or deadline (0, PC_ETIMEOUT). */
struct vloop_co *vloop_self(void);
int vloop_park(uint64_t deadline);
void vloop_wake(struct vloop_co *co);

/* ---- the daemon and its connections (daemon.c, conn.c, relay.c) ----------- */

struct vault_daemon {
	struct config cfg;
	struct vault_ca *ca;   /* the leaf cache; casign signs its leaves */
	struct casign *casign; /* the CA process (va-privsep) */
	size_t n_secrets;      /* in the store (the monitor holds none of them) */
	struct logq *logq;
	SSL_CTX *server_ctx;
	SSL_CTX *client_ctx;
	/* lock guards state and the per-sandbox connection counts: the accept
	 * loop, SIGHUP and every connection thread use them. */
	pthread_mutex_t lock;
	struct vault_state *state;
	struct sb_count {
		char name[POLICY_NAME_MAX];
		unsigned n;
	} * counts;
	size_t n_counts;
	unsigned conns; /* all connections */
	/* the connections, each a coroutine of loop (a worker's; NULL in the
	 * monitor): the loop frees a slot once its connection said it is done
	 * (a byte on reap_fd), and at SIGTERM shuts their sockets down and
	 * runs until they all ended before freeing what they use */
	struct vloop *loop;
	struct conn_slot *slots;
	int reap_fd; /* eventfd */
	struct vault_counters {
		/* counted where their records are made (conn_log, accept);
		 * read by the control thread (metrics.c) */
		_Atomic uint64_t conns_accepted, conns_refused;
		_Atomic uint64_t requests_allowed, requests_refused, exfil;
		_Atomic uint64_t injections, secrets_injected;
		_Atomic uint64_t log_failed;
		/* upstream TLS handshakes that succeeded: full, resumed */
		_Atomic uint64_t upstream_full, upstream_resumed;
		_Atomic uint64_t conns_open; /* a gauge */
		/* a worker's page only, written by the monitor: the
		 * connections of its sandbox still open in workers that
		 * retired (reload), which count against its quota too */
		_Atomic uint64_t others_open;
		/* a worker's page only, written by the worker: its resident
		 * memory, for the metrics when the monitor cannot read the
		 * worker's /proc (systemd's ProtectProc hides other uids) */
		_Atomic uint64_t rss_bytes;
	} n_own, *n; /* n: where this process counts (n_own, or a worker's shared page) */
	struct pc_ctl *ctl;
	int lfds[2]; /* the monitor's listeners (IPv4 or 6, and IPv6 for 0.0.0.0) */
	size_t n_lfds;
};

/* metrics.c: the reply to "metrics" on vault.sock (pc_ctl_fn; ctx is the
 * daemon). */
char *vault_metrics(void *ctx, const char *req);

struct vault_state *vault_daemon_state(struct vault_daemon *d); /* a reference */

/* daemon.c: the monitor (main.c parses the options, then comes here; the
 * worker's life is vault_worker_main). d is zeroed by the caller.
 * Setup: the configuration, the workers' user, and then with test_only what
 * -t checks (CA, state, TLS contexts) and nothing else; without, as root:
 * the CA process, the state, the listeners and vault.sock, the drop to
 * vault.user, the log queue and vault.sock's thread. 0 or a PC_E* code;
 * vault_daemon_end frees d whatever it returned. */
int vault_daemon_setup(struct vault_daemon *d, const char *config, bool test_only,
		       struct pc_err *err);
/* The accept loop, until SIGTERM or SIGINT (0) or the end of the CA process
 * (PC_EIO). sigs: the signals main blocked before any thread started, read
 * here through a signalfd (SIGHUP reloads, SIGCHLD reaps workers). */
int vault_daemon_serve(struct vault_daemon *d, const sigset_t *sigs);
/* Close the listeners and vault.sock, stop every worker (bounded), free d. */
void vault_daemon_end(struct vault_daemon *d);

/* ---- reload on request (ad-ops, issue 18: `portcullis reload`) ---------- */
/* daemon.c: load policy and secrets again and swap them in; the running
 * state stays on failure (err says why). */
int vault_daemon_reload(struct vault_daemon *d, struct pc_err *err);
/* ctl.c: vault.sock's requests (pc_ctl_fn; ctx is the daemon): "metrics",
 * and "reload", answered "ok policy HASH secrets N" or "refused: WHY"
 * (VAULT_CTL_RELOAD_* in vault.h). */
char *vault_ctl(void *ctx, const char *req);
/* ---- end ad-ops ----------------------------------------------------------- */

/* A connection thread as the daemon sees it: fd and ufd are the sockets
 * to shut down at SIGTERM (-1: none). Guarded by the daemon's lock; the
 * thread updates them before it closes a socket, so the daemon never shuts
 * down a number that was reused. */
struct conn_slot {
	int fd, ufd;
	bool done;
	struct conn_slot *next;
};
/* Set a slot's sockets (under the daemon's lock). */
void vault_daemon_conn_fds(struct vault_daemon *d, struct conn_slot *s, int fd, int ufd);

/* One accepted connection; conn_main owns it (and closes fd). */
struct conn_start {
	struct vault_daemon *d;
	struct conn_slot *slot;
	int fd;
	struct pc_endpoint src, orig;
	char sandbox[POLICY_NAME_MAX];
};
void conn_main(void *arg); /* a coroutine of the worker's loop */
/* Give back the per-sandbox slot conn_start took and say the thread is
 * done (its last call: the daemon then joins it). */
void vault_daemon_conn_release(struct vault_daemon *d, struct conn_slot *s, const char *sandbox);

/* One client connection (conn.c, relay.c). */
/* What a client connection is fit for after a request: a result of its
 * own, never mixed with the PC_E* codes (a function that can also fail
 * returns 0 or PC_E* and gives this through an out-parameter). */
enum conn_next {
	CONN_KEEP,  /* the connection may carry another request */
	CONN_CLOSE, /* close it */
};
#define CONN_IO_BUF   16384
#define CONN_OUT_BODY 4096 /* a body this small goes upstream with its head */

struct conn {
	struct vault_daemon *d;
	struct conn_slot *slot;
	int fd;
	SSL *ssl;
	int ufd; /* upstream: -1 / NULL until the first forwarded request */
	SSL *ussl;
	struct pc_endpoint src, orig;
	char sandbox[POLICY_NAME_MAX];
	char sni[256];
	char refusal[700]; /* why the handshake was refused */
	/* and its event.code (static) */
	const char *refusal_code;
	bool linger;	 /* an error was answered: drain before closing */
	const char *why; /* why relaying the current request failed (static text) */
	/* the current request's head and body must have arrived by this
	 * (vault.request_timeout_ms from its first byte): a body trickled
	 * just under the idle timeout would otherwise hold the thread and the
	 * upstream connection for ever */
	uint64_t req_deadline;
	bool req_timed_out;
	struct vault_state *st; /* the current request's (handle_request's reference) */
	/* the current request, for its log records */
	char method[24];
	char path[1024];
	/* client bytes: in[in_off..in_len) not consumed yet */
	char *in;
	size_t in_len, in_off, in_cap;
	/* upstream bytes: ubuf[uoff..ulen) */
	char *ubuf;
	size_t ulen, uoff, ucap;
	/* the head sent upstream (holds real values): locked, wiped after use;
	 * CONN_OUT_BODY more than the largest head, for a small body sent
	 * with it */
	uint8_t *out;
	size_t out_cap;
	/* va-holes: every encoding of every secret this connection injected
	 * (and of the secrets bound to its host:port), scrubbed from each of
	 * its responses for its whole life (relay.c); keep_st is the state
	 * the bound secrets' patterns were added for (a reference). */
	struct scrub_keep keep;
	struct vault_state *keep_st;
};
/* va-holes: free what relay.c keeps for the connection (conn_free). */
void relay_conn_free(struct conn *c);

int conn_server_ctx_new(SSL_CTX **out, struct pc_err *err);
void conn_log(struct conn *c, enum logrec_action action, enum logrec_verdict verdict,
	      const char *reason, unsigned status, const char *secrets, bool wait, int *acked);
/* A refusal's record, with the event.code (static, docs/logd.md "Event
 * codes") the caller decided it by. */
void conn_log_refused(struct conn *c, enum logrec_action action, const char *code,
		      const char *reason, unsigned status);
int conn_send_error(struct conn *c, unsigned status, const char *reason);
/* Answer status, log the refusal (code: its event.code); always CONN_CLOSE. */
enum conn_next conn_refuse(struct conn *c, unsigned status, bool exfil, const char *code,
			   const char *reason);
/* ... naming the secret whose placeholder was refused (V4), never a value */
enum conn_next conn_refuse_named(struct conn *c, unsigned status, bool exfil, const char *code,
				 const char *reason, const char *secret);
void conn_upstream_close(struct conn *c);
/* After a 101: relay WebSocket messages both ways (tunnel.c). Returns
 * CONN_CLOSE. */
enum conn_next tunnel_run(struct conn *c, const struct vault_state *st,
			  const struct scrub_pat *pats, size_t n_pats);
/* Forward the request (head in c->out) and its body, relay the response;
 * every failure is answered and logged here. */
enum conn_next relay_exchange(struct conn *c, struct vault_state *st,
			      const struct http_request *req, const struct inject_out *io);

/* ======================================================================
 * Privilege separation (va-privsep): the CA process (casign.c). It alone
 * reads ca.key; the daemon asks it to sign a leaf for a public key the
 * daemon made, and it signs only names some sandbox's policy allows, which
 * it checks against the policy it compiled itself. One message per
 * SOCK_SEQPACKET record, the common/msg.c framing:
 *   SIGN      u32 id | u16 port | str host | tlv 1: public key (DER SPKI)
 *   RELOAD    u32 id                      (reread the policy)
 *   CLIENT    u32 id | str sandbox        (+ a socket, SCM_RIGHTS: a worker's
 *                                          channel, whose SIGNs are checked
 *                                          against that sandbox's policy alone)
 *   CERT      u32 id | tlv 1: certificate (DER)
 *   REFUSED   u32 id | str reason
 *   RELOADED  u32 id | str policy hash
 *   OK        u32 id
 * Only the daemon's own channel may RELOAD or add CLIENTs; a worker's may
 * only SIGN.
 * ====================================================================== */

#define CASIGN_PROTO   0x4341 /* "CA" */
#define CASIGN_VERSION 1
#define CASIGN_MAX     8192 /* a message; a P-256 leaf is ~700 bytes of DER */
#define CASIGN_DER_MAX 4096
#define CASIGN_TEXT    640

enum casign_type {
	CASIGN_SIGN = 1, /* to the CA */
	CASIGN_RELOAD = 2,
	CASIGN_CLIENT = 3,
	CASIGN_CERT = 0x81, /* from the CA */
	CASIGN_REFUSED = 0x82,
	CASIGN_RELOADED = 0x83,
	CASIGN_OK = 0x84,
};

struct casign_msg {
	uint8_t type;
	uint32_t id;
	uint16_t port;		    /* SIGN */
	char host[PC_HOST_MAX + 1]; /* SIGN: a canonical PC_HOST_SNI name */
	const uint8_t *der;	    /* SIGN: public key, CERT: leaf; borrowed */
	size_t der_len;		    /* 1..CASIGN_DER_MAX */
	char text[CASIGN_TEXT];	    /* REFUSED: reason, RELOADED: policy hash */
};

/* The message's length written into buf, or PC_EINVAL. */
int casign_encode(const struct casign_msg *m, uint8_t *buf, size_t cap);
/* Decode one message. from_ca: only the CA's replies are accepted, else
 * only requests; anything else (another type, protocol or version, a
 * short or long field, bytes left over, a host that is not a canonical SNI
 * name) is PC_EPARSE or PC_EUNSUPP. *out borrows buf. Fuzzed:
 * tests/fuzz/fuzz_casign.c. */
int casign_decode(const uint8_t *buf, size_t len, bool from_ca, struct casign_msg *out,
		  struct pc_err *err);

struct casign; /* the daemon's handle on the CA process; thread-safe */

/* Fork the CA process (before any thread exists, while still root): it
 * reads <ca_dir>/ca.key and the policy, drops to vault.user and serves.
 * The daemon never reads ca.key. */
int casign_start(const struct config *cfg, struct casign **out, struct pc_err *err);
/* Ask for a leaf for host:port with public key pub (EVP_PKEY *); *cert is a
 * new X509 * (caller frees). Waits at most a few seconds; a CA process
 * that is gone, slow or answers out of turn is an error (fail closed). */
int casign_sign(struct casign *c, const char *host, uint16_t port, void *pub, void **cert,
		struct pc_err *err);
/* Make the CA process reread the policy (SIGHUP). */
int casign_reload(struct casign *c, struct pc_err *err);
/* Hand the CA process fd (one end of a socketpair; the caller keeps its
 * own copy to close) as the channel of sandbox's worker. */
int casign_client(struct casign *c, const char *sandbox, int fd, struct pc_err *err);
/* The socket, for the daemon to see the CA process end (POLLHUP). */
int casign_fd(const struct casign *c);
pid_t casign_pid(const struct casign *c);
void casign_stop(struct casign *c);
/* A handle on a CA process already serving fd (pid: waited for by
 * casign_stop; 0 for none). Takes fd. For the unit test. */
int casign_open(int fd, pid_t pid, struct casign **out, struct pc_err *err);
/* The CA side: serve fd until it closes. ca holds the key; policy is
 * owned (freed on return); cfg (may be NULL: no reload) says where the
 * rules are. Exposed for the unit test, which runs it in a child. */
int casign_serve(int fd, struct vault_ca *ca, const struct config *cfg, struct policy *policy);

/* ca.c, the daemon's side: a leaf cache whose leaves the CA process signs
 * (no CA key in this process). */
int ca_client_new(struct casign *signer, struct vault_ca **out, struct pc_err *err);
/* ca.c, the CA's side: a leaf certificate for host and public key pub
 * (EVP_PKEY *), signed by ca; an X509 * or NULL. */
void *ca_leaf_sign(struct vault_ca *ca, const char *host, void *pub);

/* ---- per-sandbox workers (worker.c, monitor.c, seccomp.c) ----------------
 * The monitor (the vault's first process, daemon.c) accepts, names the
 * sandbox by source address and hands the socket to that sandbox's worker
 * over a socketpair (SCM_RIGHTS), with one message:
 *   CONN  u8 family | 16 bytes address | u16 port   (source, then original
 *         destination)                               + the socket
 * A worker is portcullis-vault -W SANDBOX, exec'ed with these descriptors: */
#define WORKER_FD_CHAN	   3	  /* the monitor's channel */
#define WORKER_FD_CA	   4	  /* its own channel to the CA process */
#define WORKER_FD_COUNTERS 5	  /* a memfd: its struct vault_counters, shared */
#define WMSG_PROTO	   0x5657 /* "VW" */
#define WMSG_VERSION	   1
#define WMSG_CONN	   1
#define WMSG_MAX	   64

int wmsg_conn_encode(const struct pc_endpoint *src, const struct pc_endpoint *orig, uint8_t *buf,
		     size_t cap);
/* Fuzzed: tests/fuzz/fuzz_vworker.c. */
int wmsg_conn_decode(const uint8_t *buf, size_t len, struct pc_endpoint *src,
		     struct pc_endpoint *orig, struct pc_err *err);
/* The worker process's life; a PC_EXIT_* code. */
int vault_worker_main(const char *config, const char *sandbox);
/* The worker's seccomp filter: the system calls it needs, no file system. */
int vault_seccomp_worker(struct pc_err *err);

/* monitor.c: the monitor's table of workers. */
void monitor_init(const char *config);
/* Hand fd (accepted, sandbox identified) to sandbox's worker, starting one
 * if it has none; a refusal is logged and closes fd. */
void monitor_dispatch(struct vault_daemon *d, int fd, const struct pc_endpoint *src,
		      const struct pc_endpoint *orig, const char *sandbox);
/* SIGCHLD: forget the workers that ended (their counts are kept). */
void monitor_reap(void);
/* Reload: every worker finishes its connections and ends; new connections
 * get new workers (new policy and secrets). */
void monitor_retire_all(void);
/* SIGTERM: every worker ends its connections (bounded) and exits. */
void monitor_stop_all(void);
/* The counters of every worker, ended ones included, added to *sum. */
void monitor_counters(struct vault_counters *sum);
/* Per-worker rows (memory) for the metrics. */
void monitor_metrics(struct pc_prom *b);

/* conns.c: a process's connection threads (moved from main.c). */
void conn_spawn(struct vault_daemon *d, int fd, const struct pc_endpoint *src,
		const struct pc_endpoint *orig, const char *sandbox);
void accept_refuse(struct vault_daemon *d, int fd, const struct pc_endpoint *src,
		   const struct pc_endpoint *orig, const char *sandbox, const char *code,
		   const char *reason);
size_t conns_reap(struct vault_daemon *d);
size_t conns_wait(struct vault_daemon *d, unsigned ms);
/* SIGTERM: end every connection, bounded; false when threads are left. */
bool conns_stop(struct vault_daemon *d);
void daemon_free(struct vault_daemon *d);

/* ---- wuser.c: the workers' own user (vault.worker_user) ---------------
 * The monitor keeps vault_monitor_caps_permitted() (CAP_SETUID, CAP_SETGID)
 * in its permitted set only and vault_monitor_caps_effective() (CAP_KILL);
 * the child it forks hands the first two to the worker as ambient
 * capabilities (vault_worker_caps_child: system calls only, -1 on failure);
 * the worker, once it has loaded what it reads as the vault user, becomes
 * vault.worker_user with no capability (vault_worker_become), before any
 * thread or sandbox byte. */
uint64_t vault_monitor_caps_effective(void);
uint64_t vault_monitor_caps_permitted(void);
int vault_worker_caps_child(void);
int vault_worker_become(const struct config *cfg, struct pc_err *err);

#endif
