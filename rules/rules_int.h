/* rules/ internals shared by its files: the arena, the YAML tree that keeps
 * every node's position, the error collector, schema helpers, host and
 * qtype names, and the lookup indexes. Not an interface: only rules/ and its
 * unit tests include this file. */
#ifndef PC_RULES_INT_H
#define PC_RULES_INT_H

#include <stdarg.h>
#include <stdatomic.h>

#include "rules/rules.h"

/* Input bounds: a file larger than this, or nested deeper, or with more
 * nodes, is refused before it can cost much memory or time. */
#define RULES_FILE_MAX	 (16u << 20) /* rule file bytes */
#define RULES_CONFIG_MAX (1u << 20)  /* portcullis.yaml bytes */
#define YDOC_MAX_DEPTH	 32
#define YDOC_MAX_NODES	 (1u << 20) /* per file */
#define RULES_MAX_FILES	 4096	    /* rule files in one directory */
#define DIAG_MAX	 100	    /* errors reported before giving up */

/* ---- loading: the configuration and policies (config.c, policy_compile.c) ---- */

/* Fill cfg with the defaults above (paths under the default directories). */
void config_defaults(struct config *cfg);

/* Tools that show every error of an input (policy lint) pass a reporter:
 * it is called once per error, in input order, with the error (borrowed for
 * the call). err still receives the first error. */
typedef void (*pc_err_report_fn)(const struct pc_err *e, void *arg);

/* As config_load, reporting every error to report (may be NULL). */
int config_load_report(const char *path, struct config *cfg, struct pc_err *err,
		       pc_err_report_fn report, void *arg);
/* As config_load, from memory; name is used in errors and as the base
 * of relative paths (fuzzing, tests). */
int config_load_buffer(const char *name, const char *buf, size_t len, struct config *cfg,
		       struct pc_err *err);

/* policy_load_dir's work on the given files (rules.h). */
int policy_load_files(const char *const *paths, size_t n, const struct config *cfg,
		      struct policy **out, struct pc_err *err);
/* As policy_load_files, from an in-memory buffer (fuzzing, tests). */
int policy_load_buffer(const char *name, const char *buf, size_t len, const struct config *cfg,
		       struct policy **out, struct pc_err *err);
/* As policy_load_dir / policy_load_files, reporting every error (not only
 * the first) to report (may be NULL); out may be NULL to only check. */
int policy_load_dir_report(const char *dir, const struct config *cfg, struct policy **out,
			   struct pc_err *err, pc_err_report_fn report, void *arg);
int policy_load_files_report(const char *const *paths, size_t n, const struct config *cfg,
			     struct policy **out, struct pc_err *err, pc_err_report_fn report,
			     void *arg);

/* ---- the compiled policy's canonical form and names (canon.c, match.c) ---- */

/* The canonical serialization the hash is computed over (borrowed). */
const char *policy_canonical(const struct policy *p, size_t *len);
/* Does pattern entry a match name? (exported for tests and the checker) */
bool policy_allow_name_match(const struct policy_allow *a, const char *name);

/* ---- arena: many small allocations freed together ----------------------- */

struct arena_chunk;
struct arena {
	struct arena_chunk *head;
};
/* Zeroed, suitably aligned memory; NULL when out of memory. */
void *arena_alloc(struct arena *a, size_t size);
void *arena_calloc(struct arena *a, size_t n, size_t size);
char *arena_strndup(struct arena *a, const char *s, size_t n);
char *arena_strdup(struct arena *a, const char *s);
void arena_free(struct arena *a);

/* ---- diagnostics: the first error goes to err, every error to report ---- */

struct diag {
	struct pc_err *err;
	pc_err_report_fn report;
	void *arg;
	size_t count;
	int first_code; /* code of the first error */
	bool gave_up;	/* DIAG_MAX reached: callers stop early */
};
void diag_init(struct diag *d, struct pc_err *err, pc_err_report_fn report, void *arg);
/* Record an error at file:line:col (line 0: no position). Returns code. */
int diag_at(struct diag *d, int code, const char *file, unsigned line, unsigned col,
	    const char *fmt, ...) __attribute__((format(printf, 6, 7)));
int diag_vat(struct diag *d, int code, const char *file, unsigned line, unsigned col,
	     const char *fmt, va_list ap) __attribute__((format(printf, 6, 0)));
/* Record an error already described in e. */
int diag_add(struct diag *d, const struct pc_err *e);
/* The code a failed load returns: PC_EPARSE unless a read or memory error
 * came first. */
int diag_code(const struct diag *d);

/* ---- YAML documents with positions -------------------------------------- */

enum ynode_type { YN_SCALAR, YN_SEQ, YN_MAP };

struct ynode {
	enum ynode_type type;
	bool quoted;	    /* scalar written quoted or as a block: a string */
	unsigned line, col; /* 1-based position of the node's first character */
	const char *str;    /* scalar value, NUL-terminated (no NUL inside) */
	size_t len;
	struct ynode **kids; /* SEQ: items; MAP: key0, value0, key1, value1, ... */
	size_t n;	     /* SEQ: items; MAP: pairs */
};

struct ydoc {
	struct ynode *root; /* a null scalar for an empty document */
	unsigned line, col;
};

struct yfile {
	struct arena arena;
	const char *name; /* in arena */
	struct ydoc *docs;
	size_t n_docs;
};

/* Parse every document of buf. Syntax errors, aliases, tags, duplicate
 * keys, non-scalar keys and the bounds above are reported to d with their
 * position; *out is written only on success. */
int yfile_parse(const char *name, const char *buf, size_t len, struct yfile **out, struct diag *d);
void yfile_free(struct yfile *f);

static inline const struct ynode *ymap_key(const struct ynode *m, size_t i)
{
	return m->kids[2 * i];
}
static inline const struct ynode *ymap_val(const struct ynode *m, size_t i)
{
	return m->kids[2 * i + 1];
}
const struct ynode *ymap_get(const struct ynode *m, const char *key);
bool ynode_is_null(const struct ynode *n);
/* "a mapping", "a list", "a string ('x')", "a number (4)", "nothing (null)". */
const char *ynode_describe(const struct ynode *n, char *buf, size_t len);

/* ---- schema helpers: errors located at a node --------------------------- */

struct yctx {
	struct diag *d;
	const char *file;
};
int yerr(struct yctx *c, const struct ynode *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "<what>: expected <expected>, found <description of n>" */
int yerr_type(struct yctx *c, const struct ynode *n, const char *what, const char *expected);
/* Report every key of map m that is not in known (NULL-terminated), with a
 * did-you-mean; where names the mapping ("an allow entry"). Returns the
 * number of unknown keys. */
size_t ymap_check_keys(struct yctx *c, const struct ynode *m, const char *const *known,
		       const char *where);
/* Report one unknown key. */
void yerr_unknown_key(struct yctx *c, const struct ynode *key, const char *const *known,
		      size_t n_known, const char *where);
/* The closest candidate within a small edit distance, or NULL. */
const char *rules_suggest(const char *word, const char *const *cands, size_t n);

/* Scalar conversions; each reports its own error (what = the key). */
int yget_uint(struct yctx *c, const struct ynode *n, const char *what, uint64_t min, uint64_t max,
	      uint64_t *out);
int yget_bool(struct yctx *c, const struct ynode *n, const char *what, bool *out);
/* Any non-null scalar as a string (plain numbers included). */
int yget_str(struct yctx *c, const struct ynode *n, const char *what, const char **out);

/* ---- names ---------------------------------------------------------------- */

/* DNS types by name ("AAAA" -> QT_AAAA), case-insensitive. */
int rules_qtype_from_name(const char *name, uint32_t *bit);
/* Names of the bits set, in bit order, for canonical forms and messages. */
size_t rules_qtype_names(uint32_t bits, const char **names, size_t max);
extern const char *const rules_qtype_all[]; /* NULL-terminated, bit order */

/* A query name as a sandbox sends it (qname, SNI): lower-cased, one
 * trailing dot dropped, validated as a host name. false if invalid. */
bool rules_query_normalize(const char *in, char *out, size_t outlen);
/* Interface name as Linux accepts it (dev_valid_name). */
bool rules_ifname_valid(const char *s);

/* ---- lookup indexes ------------------------------------------------------- */

/* An immutable hash map from string keys to lists of uint32 values. The
 * layout saves cache misses on large policies: a probe compares the hash
 * stored in the slot before touching the group, and a key with one value
 * keeps it in the group. */
struct strmap_group {
	const char *key;
	size_t len;
	uint32_t first, count; /* into vals */
	uint32_t val0;	       /* vals[first], kept here too */
};
struct strmap_slot {
	uint32_t hash;
	uint32_t group; /* group index + 1, 0 = empty */
};
struct strmap {
	struct strmap_group *groups;
	size_t n_groups;
	struct strmap_slot *slots;
	size_t mask;
	uint32_t *vals;
};
struct strmap_pair {
	const char *key; /* borrowed until strmap_build returns; copied */
	uint32_t val;
};
/* Values for key (length len, hash h from strmap_hash), or NULL. */
const uint32_t *strmap_find(const struct strmap *m, const char *key, size_t len, uint32_t h,
			    uint32_t *count);
/* Hash of s[0..len), computed from the right so that the hash of every
 * suffix of a name falls out of one pass: pc_fnv1a_step from
 * PC_FNV1A_INIT over s[len-1] down to s[0], which match.c's host_lookup
 * repeats byte by byte and must keep in step with. */
uint32_t strmap_hash(const char *s, size_t len);

/* A binary trie of prefixes (one family) to lists of uint32 values. */
struct ptrie_node {
	uint32_t child[2]; /* node index, 0 = none (node 0 is the root) */
	uint32_t first, count;
};
struct ptrie {
	struct ptrie_node *nodes;
	size_t n_nodes;
	uint32_t *vals;
	unsigned bits; /* 32 or 128 */
};
struct ptrie_pair {
	struct pc_prefix pfx;
	uint32_t val;
};
/* Call visit for every value whose prefix contains addr, shortest prefix
 * first, values of one prefix in ascending order; stop when visit returns
 * true. */
void ptrie_walk(const struct ptrie *t, const uint8_t *addr, bool (*visit)(uint32_t val, void *arg),
		void *arg);

/* ---- the compiled policy -------------------------------------------------- */

/* What a lookup needs of an allow entry to check proto and port, packed
 * so that checking does not pull the whole entry into the cache. */
struct allow_fast {
	uint16_t lo, hi; /* the only range, when n == 1 */
	uint8_t proto;	 /* enum policy_proto bits */
	uint8_t one;	 /* 1: exactly one range, in lo..hi */
};

/* Per-sandbox lookup structures (policy_sandbox.index). */
struct policy_index {
	struct allow_fast *fast; /* per allow entry */
	struct strmap exact;	 /* host -> allow indices */
	struct strmap wild;	 /* wildcard suffix -> allow indices */
	struct ptrie cidr4, cidr6;
	struct strmap secret_host; /* secret host -> secret indices */
};

struct rfile;

struct policy {
	atomic_uint refs;
	struct arena arena; /* everything below lives here, but for what files owns */
	/* the rule files it was built from, in load order, one reference each:
	 * each sandbox's arrays, strings and lookups live in its file's arena */
	struct rfile **files;
	size_t n_files;
	struct policy_sandbox *sb; /* sorted by name (strcmp) */
	size_t n_sb;
	struct ptrie src4, src6; /* match.source -> sandbox index */
	struct strmap by_mac;	 /* sandboxes with mac and no source */
	struct strmap by_port;	 /* sandboxes with only a port */
	char *canonical;
	size_t canonical_len;
	char hash[7 + 64 + 1];
};

/* ---- building a policy ---------------------------------------------------- */

struct loc {
	const char *file;
	unsigned line, col;
};

/* A sandbox as parsed, with the positions the cross-file checks cite. */
struct sbb {
	struct policy_sandbox sb; /* arrays and strings in its file's arena */
	struct arena *a;	  /* that arena */
	struct loc name, match;
	struct loc *src;		 /* per match.source */
	struct loc *sec_name, *sec_host; /* per secret */
	bool bad;	   /* had an error: left out of the checks that need it whole */
	bool name_ok;	   /* its name parsed: still checked for duplicates */
	bool reused;	   /* from the previous policy's file: its own checks passed there */
	const char *canon; /* its canonical form, in a, once the checks passed */
	size_t canon_len;
};

/* What a rule file's parse depends on besides its bytes: the config's
 * defaults that sandboxes without their own key take. */
struct rfile_defaults {
	uint32_t qtypes, rate, burst;
	enum dns_refuse refuse;
};

/* One rule file as parsed (docs/policy.md, "Reload"). Shared, by
 * reference, by every policy built from the same path, bytes and defaults;
 * nothing in it changes once the first policy built from it is sealed. */
struct rfile {
	atomic_uint refs;
	struct arena arena; /* everything below and its sandboxes' data */
	const char *path;
	const char *bytes; /* the file as read: reuse needs them byte for byte */
	size_t len;
	struct rfile_defaults def;
	struct sbb *sbs; /* after the per-sandbox checks; set when sealed */
	size_t n_sbs;
};
void rfile_unref(struct rfile *f);

struct pbuild_file {
	struct rfile *rf; /* one reference */
	size_t first, n;  /* its sandboxes in pbuild.v */
	bool fresh;	  /* parsed in this build (else reused) */
};

struct pbuild {
	struct policy *p;
	struct diag *d;
	struct rfile_defaults def; /* the config's, or the built-in ones */
	struct sbb *v;		   /* in load order (files sorted, then file order) */
	size_t n, cap;
	struct pbuild_file *files;
	size_t n_files, cap_files;
	const struct policy *prev; /* whose files may be reused (NULL: none) */
	size_t prev_at;		   /* where the walk through prev's files is */
};

/* Parse one rule file's bytes, appending its sandboxes to b. Errors go to
 * b->d; returns <0 only when it could not go on (memory). */
int pbuild_file(struct pbuild *b, const char *name, const char *buf, size_t len);
/* The parse of the previous policy's file of this name, when its bytes and
 * defaults are these: its sandboxes appended to b. True when reused. */
bool pbuild_reuse(struct pbuild *b, const char *name, const char *buf, size_t len);
/* Cross-sandbox checks (duplicates, overlaps, secret bindings). */
void pbuild_check(struct pbuild *b);

/* Build one sandbox's lookup structures (sb->index) in a. */
int policy_sandbox_index(struct policy_sandbox *sb, struct arena *a);
/* Build the policy-wide ones (sandbox selection) of a filled-in policy. */
int policy_index_build(struct policy *p);
/* Canonical form and hash of a compiled policy. */
int policy_canon_sandbox(struct sbb *s);
/* Of a filled-in policy whose sandboxes' forms are frag, in p->sb's order. */
int policy_canon_build(struct policy *p, struct sbb *const *frag);

/* ---- the effective configuration (ad-ops, issue 18) ---------------------- */
/* One key of portcullis.yaml as the daemons see it: its value after the
 * defaults, the paths derived from run_dir/state_dir and the file, and
 * where that value came from. */
enum config_origin { CONFIG_DEFAULT, CONFIG_DERIVED, CONFIG_FROM_FILE };
struct config_entry {
	const char *key; /* "log.key" (static) */
	char *text;	 /* the value as shown: "pcbr0", "100", "true", "[A, AAAA]"; "" unset */
	char *json;	 /* the same as a JSON value (null: unset) */
	enum config_origin origin;
	const char *from; /* CONFIG_DERIVED: the key it follows ("state_dir"; static) */
	unsigned line;	  /* CONFIG_FROM_FILE: the line of its value */
};
/* Load path as config_load does (errors through report, as
 * config_load_report) and describe every key, in the schema's order:
 * *out (config_entries_free) and *n; *cfg (may be NULL) the configuration
 * itself. */
int config_describe(const char *path, struct config *cfg, struct config_entry **out, size_t *n,
		    struct pc_err *err, pc_err_report_fn report, void *arg);
void config_entries_free(struct config_entry *e, size_t n);
/* ---- end ad-ops ----------------------------------------------------------- */
/* ---- lint.c: the warnings of `policy lint` (ad-cli, issue 18) ------------ */

#define LINT_BRIDGE_MAX 16
struct psl_above;

struct lint_ctx {
	const struct config *cfg; /* NULL: rule files alone, built-in defaults */
	const char *psl_file;	  /* NULL: /usr/share/publicsuffix/public_suffix_list.dat */
	/* each warning: file:line:col and the message (no "warning:" prefix) */
	void (*warn)(void *arg, const char *file, unsigned line, unsigned col, const char *msg);
	void *arg;
	size_t warnings;
	/* private */
	const void *psl; /* psl_ctx_t, loaded on first use */
	bool psl_tried, psl_said, bridge_read, above_tried;
	struct psl_above *above; /* the list's names above its rules (lint.c) */
	size_t n_above, n_above_slots;
	struct pc_prefix bridge[LINT_BRIDGE_MAX]; /* the bridge's addresses on this box */
	size_t n_bridge;
};
/* Warnings about a compiled policy (its entries and secrets). */
void lint_policy(struct lint_ctx *l, const struct policy *p);
/* Files of a rules directory the loader ignores though they look like rule
 * files (x.YAML). */
void lint_rules_dir(struct lint_ctx *l, const char *dir);
/* Settings that are valid but dangerous (what a daemon would refuse at
 * start is config_start_check's, an error). */
void lint_config(struct lint_ctx *l, const struct config *cfg);
/* Where key a.b (b may be NULL) is written in the configuration file at
 * path: its value's position, else 1:1 (a default). startcheck.c. */
void config_key_pos(const char *path, const char *a, const char *b, unsigned *line, unsigned *col);
/* The same for the key path keys (NULL-terminated) and, idx >= 0, item idx
 * of the list there. */
void config_item_pos(const char *path, const char *const *keys, long idx, unsigned *line,
		     unsigned *col);
void lint_ctx_free(struct lint_ctx *l);
/* A number written in another base (0x1BB, 0o17, 0b1): true, with why
 * saying so (and its decimal value); the schema takes decimal only. */
bool rules_nondecimal(const char *s, char *why, size_t len);

/* ---- the policy store (polstore.c) ---- */

#define POLSTORE_DIRNAME  "policies"
#define POLSTORE_NAME_LEN 71 /* "sha256:" and 64 hex digits */

/* "<state_dir>/policies" into out (len bytes). */
int polstore_dir(const struct config *cfg, char *out, size_t len, struct pc_err *err);
/* hash ("sha256:<hex>" or the 64 hex digits alone, either case) as the
 * file name the store uses; PC_EINVAL for anything else. */
int polstore_name(const char *hash, char out[POLSTORE_NAME_LEN + 1], struct pc_err *err);
/* Store text under the hash of its bytes in dir (as polstore_put_cfg);
 * hash_out (may be NULL) gets that hash. */
int polstore_put_text(const char *dir, const char *text, size_t len, char *hash_out,
		      size_t hash_len, struct pc_err *err);
int polstore_put(const char *dir, const struct policy *p, struct pc_err *err);
/* The stored policy named hash, after checking that its bytes hash to that
 * name: *text (malloc'd, NUL-terminated, the caller frees) and *len.
 * PC_EINVAL a malformed hash, PC_ENOENT none stored, PC_EREFUSED not a
 * regular file (a symbolic link, a FIFO, a directory) or a store that is
 * not a directory, PC_ETAMPER bytes that do not match the name, PC_EIO. */
int polstore_get(const char *dir, const char *hash, char **text, size_t *len, struct pc_err *err);

#endif
