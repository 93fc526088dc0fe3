/* tlog: the transparency-log core, pure functions over buffers: the
 * RFC 6962/9162 Merkle tree, inclusion and consistency proofs, C2SP signed
 * notes, checkpoints and cosignatures, the record line's hashing and the
 * verifier of a log's lines, and the verdict of what "intact" means
 * (docs/logd.md). No I/O (no file, socket or clock is read here: the
 * callers hand every byte and every time in) and no daemon state, so an
 * auditor reads it without logd's threads and files: logd, the witness
 * and `portcullis log` are its callers. */
#ifndef PC_TLOG_H
#define PC_TLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pc.h"

/* ---- the record line's names (ECS; docs/logd.md) ------------------------
 * The verifier reads these members of a record line; logd writes them
 * (logd/record.c). Logs written before ECS names say "seq", "prev",
 * "hash". */
#define LOGREC_SEQ_KEY	    "event.sequence"
#define LOGREC_PREV_KEY	    "portcullis.prev"
#define LOGREC_HASH_KEY	    "event.hash"
#define LOGREC_OLD_SEQ_KEY  "seq"
#define LOGREC_OLD_PREV_KEY "prev"
#define LOGREC_OLD_HASH_KEY "hash"
/* The longest record line a verifier accepts, before its hash member:
 * logd's largest record (LOGWIRE_MAX, logd/logd.h) with each byte a 6-byte
 * escape, and room (logd_int.h checks that LOGREC_JSON_MAX fits). */
#define TLOG_RECORD_JSON_MAX (6 * 8192 + 2048)
/* Length of the "{"<seq key>": that opens a record line, in either
 * spelling (new or old), 0 if the line does not open like a record. */
size_t logrec_seq_prefix(const char *line, size_t len);

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
#define CHECKPOINT_MAX 640 /* a signed checkpoint note, with room (and a previous line) */
/* The largest seq logd gives and the verifier accepts: far beyond any
 * real log, and far enough below 2^64 that seq + 1 never wraps (issue 32:
 * a line claiming seq 2^64 - 107 made seqs run ..., 0, 1, 2). */
#define LOGSEQ_MAX (UINT64_C(1) << 63)

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

struct checkpoint {
	char origin[NOTE_NAME_MAX];
	uint64_t size;
	uint8_t root[MERKLE_HASH];
	uint64_t time_ms; /* wall clock, ms since the epoch */
	/* "previous <seg> <size> <root>": the checkpoint of the origin before
	 * this one (seg 0: the key's bare name) that this origin continues;
	 * what the witness holds a new origin to (docs/logd.md "One history
	 * per key"). has_prev false: the key's first origin. */
	bool has_prev;
	uint64_t prev_seg, prev_size;
	uint8_t prev_root[MERKLE_HASH];
};
/* The checkpoint body (origin, size, root, time lines); its length or <0.
 * (Exposed for the golden-bytes test.) */
int checkpoint_body_format(const struct checkpoint *c, char *buf, size_t len);
int checkpoint_body_parse(const char *body, size_t len, struct checkpoint *out, struct pc_err *err);
/* The signed checkpoint note; returns its length. */
int checkpoint_sign(const struct note_signer *s, const struct checkpoint *c, char *out,
		    size_t outlen, struct pc_err *err);
/* Verify and parse a checkpoint note signed by v, whose origin must be v's
 * name or one of its segments' ("<name>/<seq>", tlog/origin.c). PC_ETAMPER / PC_EPARSE as
 * note_verify. */
int checkpoint_open(const struct note_verifier *v, const char *note, size_t len,
		    struct checkpoint *out, struct pc_err *err);

/* Parse "2026-11-29T14:02:13.123Z" (exactly that form) to ms since the epoch. */
int logd_time_parse(const char *s, size_t len, uint64_t *ms);

/* ---- the verifier (tlog/verify.c; file format in docs/logd.md) ----------
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
/* A whole buffer (logd/tlog_files.c: a file, mapped), then logv_finish. */
int logv_buffer(struct logv *v, const char *buf, size_t len, unsigned flags, struct pc_err *err);
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

/* ---- inclusion proofs (tlog/proof.c; text form in docs/logd.md) --------- */

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

/* ---- consistency proofs (tlog/consistency.c; docs/logd.md "Witness and
 * consistency proofs") ---------------------------------------------------- */

/* The root of the subtree of leaves [lo, hi) from some source. */
typedef int (*merkle_range_fn)(void *ctx, uint64_t lo, uint64_t hi, uint8_t out[MERKLE_HASH]);
/* RFC 9162 2.1.4.1 PROOF(m, D[n]) into proof (room for MERKLE_PROOF_MAX);
 * empty when m is 0 or n. */
int merkle_consistency_proof(uint64_t m, uint64_t n, merkle_range_fn root, void *ctx,
			     uint8_t (*proof)[MERKLE_HASH], size_t *proof_len, struct pc_err *err);
/* RFC 9162 2.1.4.2: 0 when proof shows the tree of m leaves with mroot is
 * a prefix of the tree of n with nroot (m == n: the same root, m == 0:
 * anything, both with an empty proof); PC_ETAMPER otherwise. */
int merkle_consistency_verify(struct merkle_hasher *h, uint64_t m, uint64_t n,
			      const uint8_t mroot[MERKLE_HASH], const uint8_t nroot[MERKLE_HASH],
			      const uint8_t (*proof)[MERKLE_HASH], size_t len);
/* Sources of subtree roots: every leaf ... */
struct merkle_leaves {
	struct merkle_hasher *h;
	const uint8_t (*leaf)[MERKLE_HASH];
	uint64_t n;
};
int merkle_leaves_root(void *ctx, uint64_t lo, uint64_t hi, uint8_t out[MERKLE_HASH]);
/* ... or the right edge of the older tree and the leaves after it: enough
 * for any proof from edge.size (what logd's witness client keeps). */
struct merkle_edge {
	struct merkle_hasher *h;
	struct merkle_tree edge;
	const uint8_t (*tail)[MERKLE_HASH];
	uint64_t n_tail;
};
int merkle_edge_root(void *ctx, uint64_t lo, uint64_t hi, uint8_t out[MERKLE_HASH]);

/* A file's tree must pass through checkpoints held elsewhere (log verify
 * --against, the witnessed checkpoint): feed each leaf in order, then
 * finish; each want[i] ends MET, SPLIT (another root at that size: a split
 * view or an edit) or SHORT (the file ends before it: cut back). */
enum logc_prefix_state {
	LOGC_PREFIX_PENDING,
	LOGC_PREFIX_MET,
	LOGC_PREFIX_SPLIT,
	LOGC_PREFIX_SHORT
};
struct logc_prefix {
	struct merkle_hasher *h;
	struct merkle_tree tree;
	const struct checkpoint *want;
	enum logc_prefix_state *state;
	size_t n;
};
int logc_prefix_leaf(struct logc_prefix *p, uint64_t index, const uint8_t leaf[MERKLE_HASH]);
void logc_prefix_finish(struct logc_prefix *p);

#define COSIG_LINE_MAX (NOTE_NAME_MAX + 128)
/* C2SP tlog-cosignature v1 (tlog/cosig.c): a witness signs
 *   "cosignature/v1\ntime <unix seconds>\n" <checkpoint note text>
 * and the signature line is "— <name> base64(key id (4) || time (8, BE)
 * || ed25519 signature (64))", key id = SHA-256(name "\n" 0x04 pk)[:4].
 * The witness's public key: "<name>+<key id hex>+base64(0x04 || pk)". */
struct cosig_verifier {
	char name[NOTE_NAME_MAX];
	uint32_t hash;
	uint8_t pk[32];
};
void cosig_verifier_from(const struct note_signer *s, struct cosig_verifier *out);
int cosig_verifier_parse(const char *text, struct cosig_verifier *out, struct pc_err *err);
int cosig_verifier_format(const struct cosig_verifier *v, char *buf, size_t len);
/* The signature line for the note text body (its lines up to the blank
 * line) at time t (seconds); its length or <0. */
int cosig_sign(const struct note_signer *s, const char *body, size_t blen, uint64_t t, char *line,
	       size_t len, struct pc_err *err);
/* Find v's cosignature in note and check it: 0 and *t; PC_ENOENT when
 * there is none, PC_ETAMPER when it does not verify, PC_EPARSE. */
int cosig_verify(const struct cosig_verifier *v, const char *note, size_t len, uint64_t *t,
		 struct pc_err *err);
/* Raw ed25519 signature by a note key (tlog/note.c). */
void note_signer_sign_raw(const struct note_signer *s, const void *msg, size_t len,
			  uint8_t sig[64]);

/* ---- lx-origin: one origin per log segment (tlog/origin.c) -------------
 * A checkpoint's origin is the key's name (logs from before segments had
 * their own) or "<name>/<seq>", seq the segment's first record's. */
/* 0 and *seg (0 for the bare name) if origin is one of name's; else PC_ETAMPER. */
int checkpoint_origin_seg(const char *origin, const char *name, uint64_t *seg);
/* "<name>/<seg>" (seg 0: the bare name) into out. */
int checkpoint_origin_make(const char *name, uint64_t seg, char *out, size_t len,
			   struct pc_err *err);
/* ---- end lx-origin ---- */

/* log verify's anchors (tlog/anchor.c): --against files and <log>.witnessed,
 * each a checkpoint signed by the log's key (read by the caller); attach
 * before logv_buffer, report after it (one line per anchor met appended to
 * print, unless NULL;
 * PC_ETAMPER and why for the first one cut off or split). */
#define LOGC_ANCHORS_MAX 8
struct logc_anchor {
	char path[PC_PATH_MAX];
	bool witnessed; /* <log>.witnessed, found next to the log */
	char note[CHECKPOINT_MAX + 4 * COSIG_LINE_MAX];
	size_t note_len;
};
struct logc_anchors {
	struct logc_anchor a[LOGC_ANCHORS_MAX];
	struct checkpoint cp[LOGC_ANCHORS_MAX];
	enum logc_prefix_state st[LOGC_ANCHORS_MAX];
	size_t n;
	struct logc_prefix p;
};
void logc_anchors_attach(struct logc_anchors *a, struct merkle_hasher *h, struct logv *v);
int logc_anchors_report(struct logc_anchors *a, const struct note_verifier *key,
			const struct cosig_verifier *wkey, uint64_t records, struct pc_buf *print,
			struct pc_err *err);
/* log verify: anchors (the witnessed checkpoint, --against) of another
 * origin than the file's checkpoints. An earlier segment's witnessed
 * checkpoint is dropped (not comparable) and named in note; a later
 * segment's, or an --against of another origin: PC_ETAMPER. After
 * logv_buffer, before logc_anchors_report. */
int logc_anchors_origin(struct logc_anchors *a, const struct note_verifier *key,
			const struct logv_result *r, char *note, size_t notelen,
			struct pc_err *err);

/* ---- the verdict: what "intact" means (tlog/verdict.c; docs/logd.md
 * "Verifying") ------------------------------------------------------------
 * Decided here, from what the verifier found, so that `portcullis log
 * verify` only prints it (text or --json) and the fuzz target runs the
 * same decision. The caller reads the files; nothing here does. */

/* One file the verifier read through (logv_buffer returned 0). */
enum tlog_result {
	TLOG_INTACT,   /* a signature vouches for it: a checkpoint in the file,
			* or one held elsewhere that the file met */
	TLOG_UNSIGNED, /* no checkpoint: a hash chain, which anyone can compute */
};
struct tlog_file_verdict {
	enum tlog_result result;
	bool accepted; /* intact, or unsigned and the caller allows that */
	/* the key whose signature vouches for it (the facts' key, borrowed);
	 * NULL when unsigned */
	const struct note_verifier *signed_by;
	uint64_t records, first_seq, last_seq, checkpoints;
	/* the last checkpoint in the file (sealed false: none) */
	bool sealed;
	uint64_t sealed_line, sealed_records, sealed_time_ms;
	/* what no signature covers yet: records after that checkpoint */
	uint64_t unsealed, unsealed_line, unsealed_first_seq;
	/* a checkpoint held outside the file (the sidecar, --checkpoint) */
	bool has_checkpoint, checkpoint_covers_all;
	uint64_t checkpoint_records, checkpoint_time_ms;
	/* the witnessed checkpoint: none, present but unchecked (no witness
	 * key), or cosigned by the witness (its cosignature verified) */
	enum { TLOG_WITNESSED_NONE, TLOG_WITNESSED_UNCHECKED, TLOG_WITNESSED_COSIGNED } witnessed;
	/* what could be lost unseen: without a checkpoint held outside the
	 * file, records cut off after its last checkpoint; with a witness
	 * configured and no witnessed checkpoint, a cut-back to one */
	bool sidecar_missing, witnessed_missing;
	/* how it links to the files before and after it */
	uint8_t first_prev[MERKLE_HASH], last_hash[MERKLE_HASH];
};
/* What the caller found beside the file. */
struct tlog_file_facts {
	const struct note_verifier *key;   /* the log's */
	const struct checkpoint *ext;	   /* held outside the file, verified (NULL: none) */
	bool sidecar_missing;		   /* no sidecar, no --checkpoint */
	bool allow_unsigned;		   /* --allow-unsigned */
	const struct cosig_verifier *wkey; /* the witness's, given or configured (NULL: none) */
	/* --against and <log>.witnessed, attached to the verifier before it
	 * ran and their origins settled (logc_anchors_origin); NULL: none */
	struct logc_anchors *anchors;
};
/* 0 and *out; PC_ETAMPER (out not written) when a signed file does not
 * hold what an anchor says it held (cut back, or another tree: a split
 * view), or its witnessed checkpoint carries no cosignature by wkey that
 * verifies; err says which and why. */
int tlog_verdict_file(const struct logv_result *r, const struct tlog_file_facts *f,
		      struct tlog_file_verdict *out, struct pc_err *err);

/* Several files (segments) of one log: in seq order, each continues the
 * one before (its first record's seq and prev are the last one's seq + 1
 * and hash). */
struct tlog_link {
	uint64_t first_seq, last_seq;
	uint8_t first_prev[MERKLE_HASH], last_hash[MERKLE_HASH];
	size_t id; /* the caller's, carried through the sort */
};
struct tlog_chain_verdict {
	size_t files;
	uint64_t first_seq, last_seq;
	bool from_start; /* the oldest file's first record starts the log (prev 0) */
	/* where it breaks (broken false: nowhere): links[at] does not continue
	 * links[at - 1], the sorted order's */
	bool broken, missing_between; /* a seq gap (a file missing), else the prev does not link */
	size_t at;
};
/* Sorts links by first seq (in place) and judges them: 0 unbroken;
 * PC_ETAMPER broken (out says where). n >= 1. */
int tlog_verdict_chain(struct tlog_link *links, size_t n, struct tlog_chain_verdict *out);

#endif
