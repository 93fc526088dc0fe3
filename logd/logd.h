/* logd: the verdict record, its wire form between the guard processes and
 * portcullis-logd, the client library they use to hand records over, and the
 * log verifier. portcullis-logd alone writes the log.
 *
 * "No record, no connection": a client that cannot hand a record to logd
 * and get it acknowledged must refuse the action the record describes. */
#ifndef PC_LOGD_H
#define PC_LOGD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"

/* What happened (ECS event.action). */
enum logrec_action {
	LOGREC_CONNECT = 1,  /* a new flow was judged ("connect") */
	LOGREC_DNS_QUERY,    /* a DNS query was judged ("dns-query") */
	LOGREC_DNS_LEARN,    /* addresses learned from an answer ("dns-learn") */
	LOGREC_HTTP_REQUEST, /* a request through the vault ("http-request") */
	LOGREC_EXFIL,	     /* a placeholder seen where it must not go ("exfiltration") */
	LOGREC_CERT_ISSUE,   /* a certificate was issued ("cert-issue") */
	LOGREC_POLICY_LOAD,  /* a policy was put in force or rejected ("policy-load") */
	LOGREC_SANDBOX,	     /* sandbox started/stopped ("sandbox") */
	LOGREC_CHECK,	     /* a containment check ran ("check") */
	LOGREC_SEGMENT,	     /* logd itself: a new log segment starts ("log-segment") */
	LOGREC_ACTION_MAX
};

/* The guard's decision. */
enum logrec_verdict {
	LOGREC_NONE = 0, /* not a decision (learned, issued, ...) */
	LOGREC_ALLOWED,
	LOGREC_REFUSED,
};

/* One record as a client fills it. Strings are borrowed for the duration of
 * logc_send() (which copies them); NULL or "" means absent. seq and
 * @timestamp are assigned by logd, never taken from the client. */
struct logrec {
	enum logrec_action action;
	enum logrec_verdict verdict;
	const char *sandbox;
	const char *policy;	 /* "sha256:..." of the policy in force */
	const char *reason;	 /* event.reason: "not on the allow list" */
	const char *rule;	 /* rule.name: "agent-1/allow[0]" */
	struct pc_endpoint src;	 /* source.ip/port (family 0: absent) */
	struct pc_endpoint dst;	 /* destination.ip/port */
	uint8_t transport;	 /* IPPROTO_TCP/UDP/ICMP/...; 0 absent */
	const char *domain;	 /* destination.domain */
	const char *dns_name;	 /* dns.question.name */
	uint16_t dns_type;	 /* dns.question.type (RR type number) */
	const char *dns_answers; /* learned addresses, comma separated */
	const char *sni;	 /* tls.client.server_name */
	const char *http_method; /* http.request.method */
	const char *http_path;	 /* url.path (never the query string) */
	uint16_t http_status;	 /* http.response.status_code */
	const char *secrets;	 /* names injected, comma separated; never values */
	const char *message;	 /* free text for the human form (no secrets!) */
};

/* ---- wire form (SOCK_SEQPACKET, one record per message) ----------------
 * Defined in logd/wire.c; versioned, every length checked; a malformed
 * message is rejected by logd and counted, and ends that client's session.
 * A datagram carries one message, or a client's batch of record messages
 * back to back (one send and one wake-up of logd for the batch). The exact
 * layout is documented in docs/logd.md. */

#define LOGWIRE_VERSION	  1
#define LOGWIRE_MAX	  8192	/* largest record message */
#define LOGWIRE_DGRAM_MAX 16384 /* largest datagram: messages back to back */

/* Message types (byte 1 of the 8-byte header). */
enum logwire_type {
	LOGWIRE_RECORD = 1, /* client -> logd: one record */
	LOGWIRE_ACK = 2,    /* logd -> client: records written to the file */
};
#define LOGWIRE_HDR_LEN 8
#define LOGWIRE_ACK_LEN 20 /* header + u32 count + u64 seq */

/* Encode rec into buf; returns bytes written or <0 (too large / invalid).
 * Strings must be valid UTF-8 without NUL; the encoding is canonical (absent
 * and zero values are omitted), so decode(encode(r)) re-encodes identically. */
int logrec_encode(const struct logrec *rec, uint8_t *buf, size_t len, struct pc_err *err);

/* A decoded record owns copies of its strings (freed by logrec_decoded_free). */
struct logrec_decoded {
	struct logrec rec;
	char *strings; /* one allocation backing every string of rec */
};
int logrec_decode(const uint8_t *buf, size_t len, struct logrec_decoded *out, struct pc_err *err);
void logrec_decoded_free(struct logrec_decoded *d);
/* As logrec_decode without allocating: the strings of *out point into
 * strbuf (at least len bytes; valid while strbuf is). logd's per-record path. */
int logrec_decode_into(const uint8_t *buf, size_t len, struct logrec *out, char *strbuf,
		       size_t strbuf_len, struct pc_err *err);

/* The length of the first message of a datagram (its header's byte count,
 * checked against len and LOGWIRE_MAX): where the next one starts. */
int logwire_next(const uint8_t *buf, size_t len, size_t *msg_len, struct pc_err *err);

/* The acknowledgement: count records of this connection, in the order sent,
 * are in the file; seq is the sequence number of the last of them. */
int logwire_ack_encode(uint32_t count, uint64_t seq, uint8_t *buf, size_t len);
int logwire_ack_decode(const uint8_t *buf, size_t len, uint32_t *count, uint64_t *seq,
		       struct pc_err *err);

/* ---- the record as a JSON line (ECS field names; docs/logd.md) ----------
 * logrec_json_format writes the record object without its "hash" member:
 *   {"seq":N,"@timestamp":"...",...,"prev":"<64 hex>"}
 * which is exactly the Merkle leaf's data. The line in the file appends
 * ,"hash":"<hex of the leaf hash>" before the closing brace.
 * extra (NULL for none) is inserted verbatim before "prev": further
 * members, each starting with a comma (logd's own log-segment records).
 * Returns the length written (no NUL counted) or <0 if buf is too small. */
#define LOGREC_JSON_MAX (6 * LOGWIRE_MAX + 2048) /* worst case: each byte a 6-byte escape */
int logrec_json_format(const struct logrec *rec, uint64_t seq, uint64_t time_ms,
		       const uint8_t prev[32], const char *extra, char *buf, size_t len);
/* The JSON string escape of s (without quotes) into buf; length or <0. */
int logrec_json_escape(const char *s, char *buf, size_t len);

/* The short DNS type name ("AAAA"; "TYPE<n>" when unnamed), in buf if needed. */
const char *logrec_dns_type_name(uint16_t t, char *buf, size_t len);

/* ---- Merkle tree (RFC 6962 / RFC 9162 hashing, SHA-256) -----------------
 * leaf hash = H(0x00 || leaf data), node hash = H(0x01 || left || right). */

#define MERKLE_HASH	 32
#define MERKLE_PROOF_MAX 64

/* A SHA-256 context; one per thread (not thread-safe). */
struct merkle_hasher;
int merkle_hasher_new(struct merkle_hasher **out, struct pc_err *err);
void merkle_hasher_free(struct merkle_hasher *h);

/* Leaf hash of the data a||b (b may be NULL with blen 0). 0 or PC_EIO. */
int merkle_leaf(struct merkle_hasher *h, const void *a, size_t alen, const void *b, size_t blen,
		uint8_t out[MERKLE_HASH]);
/* Node hash; out may alias l or r. */
int merkle_node(struct merkle_hasher *h, const uint8_t l[MERKLE_HASH], const uint8_t r[MERKLE_HASH],
		uint8_t out[MERKLE_HASH]);

/* An append-only tree kept as its right edge: the roots of its perfect
 * subtrees, largest first (one per set bit of size). Plain data: copy it
 * to snapshot, compare sizes to order. */
struct merkle_tree {
	uint64_t size;
	uint8_t nodes[64][MERKLE_HASH];
};
void merkle_tree_init(struct merkle_tree *t);
int merkle_tree_append(struct merkle_hasher *h, struct merkle_tree *t,
		       const uint8_t leaf[MERKLE_HASH]);
/* MTH of the tree (RFC 6962 2.1); the empty tree's root is SHA-256(""). */
int merkle_tree_root(struct merkle_hasher *h, const struct merkle_tree *t,
		     uint8_t out[MERKLE_HASH]);

/* Inclusion proof of leaf index in the tree of the n leaf hashes, leaf to
 * root order, into proof (room for MERKLE_PROOF_MAX); *proof_len set. */
int merkle_inclusion_proof(struct merkle_hasher *h, const uint8_t (*leaves)[MERKLE_HASH],
			   uint64_t n, uint64_t index, uint8_t (*proof)[MERKLE_HASH],
			   size_t *proof_len, struct pc_err *err);
/* 0 when proof shows leaf at index in the tree of size with root;
 * PC_ETAMPER when it does not. */
int merkle_inclusion_verify(struct merkle_hasher *h, uint64_t index, uint64_t size,
			    const uint8_t leaf[MERKLE_HASH], const uint8_t (*proof)[MERKLE_HASH],
			    size_t proof_len, const uint8_t root[MERKLE_HASH]);

/* Lower-case hex of a hash (65 bytes with NUL), and its parse (exactly 64
 * lower-case hex digits at s; what follows is not looked at). */
void merkle_hex(const uint8_t h[MERKLE_HASH], char out[2 * MERKLE_HASH + 1]);
int merkle_hex_parse(const char *s, uint8_t out[MERKLE_HASH]);

/* ---- signed notes and checkpoints (C2SP signed-note, tlog-checkpoint) ---
 * Keys use the golang.org/x/mod/sumdb/note text forms, so standard tools
 * read them: private "PRIVATE+KEY+<name>+<hash>+<base64>", public
 * "<name>+<hash>+<base64>" (ed25519, hash = first 4 bytes of
 * SHA-256(name "\n" 0x01 pubkey)). A checkpoint body is
 *   <origin>\n<tree size>\n<base64 root>\ntime <RFC 3339 UTC ms>\n
 * with origin = the key's name, followed by a blank line and
 * "— <name> <base64(hash || signature)>". */

#define NOTE_NAME_MAX  128
#define CHECKPOINT_MAX 512 /* a signed checkpoint note, with room */

struct note_verifier {
	char name[NOTE_NAME_MAX];
	uint32_t hash;
	uint8_t pk[32];
};
/* A signing key; opaque, kept in locked memory that is wiped on free. */
struct note_signer;

int note_signer_generate(const char *name, struct note_signer **out, struct pc_err *err);
int note_signer_parse(const char *text, struct note_signer **out, struct pc_err *err);
/* The private key string (secret: the caller wipes buf). Length or <0. */
int note_signer_format(const struct note_signer *s, char *buf, size_t len);
void note_signer_free(struct note_signer *s);
/* The public half (borrowed from s). */
const struct note_verifier *note_signer_verifier(const struct note_signer *s);
int note_verifier_parse(const char *text, struct note_verifier *out, struct pc_err *err);
int note_verifier_format(const struct note_verifier *v, char *buf, size_t len);

/* Verify that note carries a valid signature by v: 0 and *body_len (the
 * signed text, up to and including its last \n before the blank line);
 * PC_ETAMPER if v's signature is missing or wrong; PC_EPARSE if malformed.
 * Signatures by other keys (witnesses) are ignored. */
int note_verify(const struct note_verifier *v, const char *note, size_t len, size_t *body_len,
		struct pc_err *err);

/* Key files: the private key (mode 0600) at path, the public key (0644)
 * at path.pub for auditors. */
int note_key_load(const char *path, struct note_signer **out, struct pc_err *err);
int note_key_write(const char *path, const struct note_signer *s, struct pc_err *err);
int note_verifier_load(const char *path, struct note_verifier *out, struct pc_err *err);

struct checkpoint {
	char origin[NOTE_NAME_MAX];
	uint64_t size;
	uint8_t root[MERKLE_HASH];
	uint64_t time_ms; /* wall clock, ms since the epoch */
};
int checkpoint_body_parse(const char *body, size_t len, struct checkpoint *out, struct pc_err *err);
/* The signed checkpoint note; returns its length. */
int checkpoint_sign(const struct note_signer *s, const struct checkpoint *c, char *out,
		    size_t outlen, struct pc_err *err);
/* Verify and parse a checkpoint note signed by v, whose origin must be v's
 * name. PC_ETAMPER / PC_EPARSE as note_verify. */
int checkpoint_open(const struct note_verifier *v, const char *note, size_t len,
		    struct checkpoint *out, struct pc_err *err);

/* Parse "2026-11-29T14:02:13.123Z" (exactly that form) to ms since the epoch. */
int logd_time_parse(const char *s, size_t len, uint64_t *ms);

/* ---- the verifier (logd/verify.c; file format in docs/logd.md) ----------
 * Lines are records  {"seq":N,...,"prev":"<hex>","hash":"<hex>"}  or
 * checkpoints  {"checkpoint":"<signed note, newlines as \\n>"}.  A file is
 * one segment: its first record is a log-segment record, seqs follow each
 * other, each prev is the previous record's hash, each hash is the leaf
 * hash of the line without its hash member, and each checkpoint is signed
 * by the key and covers exactly the records before it. */

struct logv_result {
	uint64_t lines;	  /* lines read */
	uint64_t records; /* records (= tree size) */
	uint64_t first_seq, last_seq;
	uint64_t last_line;		 /* line of the last record */
	uint8_t first_prev[MERKLE_HASH]; /* prev of the first record: links to the file before */
	uint8_t last_hash[MERKLE_HASH];
	struct merkle_tree tree;
	uint64_t checkpoints;
	bool has_cp;
	struct checkpoint last_cp;	   /* the last checkpoint line ... */
	uint64_t last_cp_line;		   /* ... where it is ... */
	char last_cp_note[CHECKPOINT_MAX]; /* ... and its note text */
	size_t last_cp_len;
	uint64_t unsealed;	/* records after the last checkpoint */
	uint64_t unsealed_line; /* line of the first of them */
	uint64_t valid_bytes;	/* bytes up to the end of the last complete line */
	bool torn;		/* the file ends in an incomplete line (LOGV_TORN_OK) */
	uint64_t torn_bytes;
	uint64_t bad_line; /* the line that failed, 0 if none */
};

#define LOGV_TORN_OK 1u /* an incomplete last line is reported, not an error */

/* Called for each verified record with its leaf index (0-based in the
 * file) and hash; the line is borrowed for the call. <0 aborts. */
typedef int (*logv_leaf_fn)(void *ctx, uint64_t index, uint64_t seq,
			    const uint8_t leaf[MERKLE_HASH], const char *line, size_t len);

struct logv;
/* key is borrowed for the verifier's life; without one, checkpoints fail. */
int logv_new(const struct note_verifier *key, struct logv **out, struct pc_err *err);
void logv_free(struct logv *v);
void logv_set_leaf_fn(struct logv *v, logv_leaf_fn fn, void *ctx);
/* Also require the file to reach cp's size with cp's root (an external or
 * sidecar checkpoint, already verified by the caller). */
void logv_expect(struct logv *v, const struct checkpoint *cp);
/* A whole buffer / file (mmap), then logv_finish. */
int logv_buffer(struct logv *v, const char *buf, size_t len, unsigned flags, struct pc_err *err);
int logv_file(struct logv *v, const char *path, unsigned flags, struct pc_err *err);
const struct logv_result *logv_result(const struct logv *v);
/* The note inside a checkpoint line; 0 or PC_EPARSE. */
int logv_checkpoint_unescape(const char *line, size_t len, char *note, size_t notelen,
			     size_t *outlen);

/* One record line taken apart: seq, where its prev is, and the leaf hash
 * computed from its contents (which the hash it claims equals, or the call
 * fails). */
struct logv_record {
	uint64_t seq;
	const char *prev_hex; /* the 64 hex digits of prev, inside the line */
	uint8_t leaf[MERKLE_HASH];
	char leaf_hex[2 * MERKLE_HASH + 1];
};
int logv_record_parse(struct merkle_hasher *h, const char *line, size_t len,
		      struct logv_record *out, struct pc_err *err);

/* ---- reading lines back (logd/show.c) ----------------------------------- */

enum logjson_type { LOGJSON_STRING, LOGJSON_ARRAY, LOGJSON_SCALAR };
/* key: raw (escaped) name without quotes; val: raw JSON text of the value
 * (strings with their quotes). <0 stops the walk. */
typedef int (*logjson_fn)(void *ctx, const char *key, size_t klen, enum logjson_type t,
			  const char *val, size_t vlen);
/* Walk the members of one flat JSON object (values: strings, scalars,
 * arrays of strings — what logd writes). 0, or PC_EPARSE if malformed. */
int logjson_each(const char *s, size_t n, logjson_fn fn, void *ctx);
/* The short human form of a record line into out; length or <0. */
int logrec_human(const char *line, size_t len, char *out, size_t outlen);

/* ---- inclusion proofs (logd/proof.c; text form in docs/logd.md) --------- */

struct logproof_info {
	uint64_t seq, index;
	struct checkpoint cp;
};
/* The proof text for the record line at leaf index, with its audit path
 * and the checkpoint note it is proven against. *out is malloc'd. */
int logproof_format(uint64_t index, const char *line, size_t len,
		    const uint8_t (*path)[MERKLE_HASH], size_t plen, const char *note, size_t nlen,
		    char **out, size_t *outlen, struct pc_err *err);
/* Check a proof text without the log: the record's own hash, the
 * checkpoint's signature by key, and the path to its root. 0 valid;
 * PC_ETAMPER / PC_EPARSE with the reason in err. */
int logproof_verify(const char *text, size_t len, const struct note_verifier *key,
		    struct logproof_info *info, struct pc_err *err);

/* ---- client library (engine, DNS guard, vault, CLI) --------------------- */

struct logc; /* one connection; not shared between threads */

/* Open a client for the logd socket at path. The connection is made now if
 * possible and re-made on later sends if logd was down. Never fails because
 * logd is down (sends will); fails only on bad arguments or no memory. */
int logc_open(const char *path, struct logc **out, struct pc_err *err);
void logc_close(struct logc *lc);

/* Hand a record to logd; does not wait for it to be written. 0: queued on
 * the socket; then logc_flush() tells whether logd acknowledged it. <0: not
 * handed over — refuse the action. The only wait: when the socket's buffer
 * is full (about 250 records sent and not yet read by logd), up to
 * LOGC_SEND_WAIT_MS for logd to catch up, then PC_EAGAIN. A connection that
 * broke is re-made once (logd restarted); the records sent on the old one
 * make the next logc_flush() fail. */
#define LOGC_SEND_WAIT_MS 100
int logc_send(struct logc *lc, const struct logrec *rec, struct pc_err *err);
/* As logc_send for n records, packed into as few datagrams as fit
 * LOGWIRE_DGRAM_MAX. sent[i] tells whether recs[i] was handed over (a
 * record that does not encode, or a datagram the socket refused, is not;
 * after a refused datagram nothing more is tried). Returns how many were
 * handed over; err says why one was not. */
size_t logc_send_batch(struct logc *lc, const struct logrec *const *recs, size_t n, bool *sent,
		       struct pc_err *err);

/* Wait up to timeout_ms until logd has acknowledged (written to its file)
 * every record sent so far. 0: all acknowledged. <0: at least one was not;
 * the connection is reset and the caller refuses every action whose record
 * was sent since the last successful flush. */
int logc_flush(struct logc *lc, int timeout_ms, struct pc_err *err);

/* Sequence number logd gave the last acknowledged record (0 if none). */
uint64_t logc_last_seq(const struct logc *lc);

/* Send one record and wait for its acknowledgement (CLI, rare events). */
int logc_send_sync(struct logc *lc, const struct logrec *rec, int timeout_ms, struct pc_err *err);

/* ECS names for actions and verdicts ("connect", "allowed"). */
const char *logrec_action_name(enum logrec_action a);
const char *logrec_verdict_name(enum logrec_verdict v);

/* ---- control socket ------------------------------------------------------
 * <run_dir>/logd-control.sock (SOCK_SEQPACKET, root only): the request
 * "metrics" gets logd's metrics in Prometheus text format (records, rejected
 * messages, refused peers, write errors, the tree, the last checkpoint's
 * age; docs/operations.md, "Metrics"). Records never travel on it. */
#define LOGD_CTL_SOCK "logd-control.sock"

/* ---- the CLI ------------------------------------------------------------ */

/* `portcullis log verify|show|prove|keygen ...`: argv[0] is "log". Returns
 * a PC_EXIT_* code (docs/logd.md, portcullis(8)). */
int logd_cli(int argc, char **argv, const char *config);

#endif
