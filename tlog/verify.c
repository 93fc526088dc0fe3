/* The log verifier: reads a log file line by line and checks the seq
 * order, the hash chain, each record's hash, the Merkle tree, and every
 * checkpoint's signature, size and root; names the first line that fails.
 * logd runs it on its own file at start; `portcullis log verify` on any
 * (both hand it the bytes: logd/tlog_files.c maps the file). */
#include "tlog/tlog_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* sysconf: how many threads hash a large buffer */

#define CP_PREFIX "{\"checkpoint\":\""

/* The two spellings of a record line, both verified: ECS names
 *   {"event.sequence":N,...,"portcullis.prev":"<64 hex>","event.hash":"<64 hex>"}
 * and, in logs written before them,
 *   {"seq":N,...,"prev":"<64 hex>","hash":"<64 hex>"}
 * A line keeps one spelling throughout: its bytes are its hash. */
struct rec_form {
	const char *prefix, *prev, *hash; /* {"seq":  ,"prev":"  ,"hash":" */
	size_t plen, prevlen, hashlen;
};
static const struct rec_form forms[] = {
    {"{\"" LOGREC_SEQ_KEY "\":", ",\"" LOGREC_PREV_KEY "\":\"", ",\"" LOGREC_HASH_KEY "\":\"",
     sizeof("{\"" LOGREC_SEQ_KEY "\":") - 1, sizeof(",\"" LOGREC_PREV_KEY "\":\"") - 1,
     sizeof(",\"" LOGREC_HASH_KEY "\":\"") - 1},
    {"{\"" LOGREC_OLD_SEQ_KEY "\":", ",\"" LOGREC_OLD_PREV_KEY "\":\"",
     ",\"" LOGREC_OLD_HASH_KEY "\":\"", sizeof("{\"" LOGREC_OLD_SEQ_KEY "\":") - 1,
     sizeof(",\"" LOGREC_OLD_PREV_KEY "\":\"") - 1, sizeof(",\"" LOGREC_OLD_HASH_KEY "\":\"") - 1},
};
/* ,"hash":"<64>"} and ,"prev":"<64>" before it */
#define TAIL_HASH_LEN(f) ((f)->hashlen + 64 + 2)
#define TAIL_LEN(f)	 (TAIL_HASH_LEN(f) + (f)->prevlen + 64 + 1)
#define LINE_MAX_LEN	 (TLOG_RECORD_JSON_MAX + sizeof(",\"" LOGREC_HASH_KEY "\":\"") - 1 + 64 + 2 + 1)

/* The spelling of a line that opens like a record (and is long enough to
 * close like one), else NULL. */
static const struct rec_form *rec_form(const char *line, size_t len)
{
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++)
		if (len >= forms[i].plen + TAIL_LEN(&forms[i]) &&
		    memcmp(line, forms[i].prefix, forms[i].plen) == 0)
			return &forms[i];
	return NULL;
}

struct logv {
	const struct note_verifier *key;
	struct merkle_hasher *h;
	struct logv_result r;
	struct checkpoint expect; /* an external checkpoint to meet, size 0: none */
	bool expect_met;
	char last_hex[2 * MERKLE_HASH]; /* of r.last_hash */
	logv_leaf_fn leaf_fn;
	void *leaf_ctx;
	const uint8_t *pre_leaf; /* this line's leaf hash, computed ahead (or NULL) */
};

int logv_new(const struct note_verifier *key, struct logv **out, struct pc_err *err)
{
	struct logv *v = calloc(1, sizeof(*v));

	if (!v)
		return pc_err_set(err, PC_ENOMEM, "verifier: out of memory");
	if (merkle_hasher_new(&v->h, err) < 0) {
		free(v);
		return PC_ENOMEM;
	}
	v->key = key;
	merkle_tree_init(&v->r.tree);
	*out = v;
	return 0;
}

void logv_free(struct logv *v)
{
	if (!v)
		return;
	merkle_hasher_free(v->h);
	free(v);
}

void logv_set_leaf_fn(struct logv *v, logv_leaf_fn fn, void *ctx)
{
	v->leaf_fn = fn;
	v->leaf_ctx = ctx;
}

void logv_expect(struct logv *v, const struct checkpoint *cp)
{
	v->expect = *cp;
	v->expect_met = false;
}

const struct logv_result *logv_result(const struct logv *v)
{
	return &v->r;
}

static int bad(struct logv *v, int code, struct pc_err *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bad(struct logv *v, int code, struct pc_err *err, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	v->r.bad_line = v->r.lines;
	return pc_err_set(err, code, "line %llu: %s", (unsigned long long)v->r.lines, msg);
}

static int check_expect(struct logv *v, struct pc_err *err)
{
	uint8_t root[MERKLE_HASH];

	if (!v->expect.size || v->expect_met || v->r.tree.size != v->expect.size)
		return 0;
	if (merkle_tree_root(v->h, &v->r.tree, root) < 0)
		return bad(v, PC_EIO, err, "hashing failed");
	v->expect_met = true;
	if (memcmp(root, v->expect.root, MERKLE_HASH) != 0) {
		if (v->r.has_cp)
			return bad(v, PC_ETAMPER, err,
				   "the records do not match the latest checkpoint for %llu "
				   "records: a record between line %llu (the last checkpoint) and "
				   "here was changed",
				   (unsigned long long)v->expect.size,
				   (unsigned long long)v->r.last_cp_line);
		return bad(v, PC_ETAMPER, err,
			   "the records do not match the latest checkpoint for %llu records: a "
			   "record up to here was changed",
			   (unsigned long long)v->expect.size);
	}
	return 0;
}

/* Is this record line a log-segment record? */
static bool logv_record_is_segment(const char *line, size_t len)
{
	return memmem(line, len, "\"event.action\":\"log-segment\"", 28) != NULL;
}

static int record_parse(struct merkle_hasher *h, const char *line, size_t len,
			const uint8_t *pre_leaf, struct logv_record *out, struct pc_err *err)
{
	const struct rec_form *f = rec_form(line, len);
	const char *p, *comma, *tail;
	struct logv_record r;

	if (!f)
		return pc_err_set(err, PC_ETAMPER, "not a record line");
	p = line + f->plen;
	comma = memchr(p, ',', len - (size_t)(p - line));
	if (!comma || pc_dec_u64(p, (size_t)(comma - p), &r.seq) < 0)
		return pc_err_set(err, PC_ETAMPER, "record has no valid seq");
	tail = line + len - TAIL_LEN(f);
	if (memcmp(tail, f->prev, f->prevlen) != 0 || tail[f->prevlen + 64] != '"' ||
	    memcmp(tail + f->prevlen + 64 + 1, f->hash, f->hashlen) != 0 ||
	    memcmp(line + len - 2, "\"}", 2) != 0)
		return pc_err_set(err, PC_ETAMPER,
				  "record (seq %llu) does not end with prev and hash",
				  (unsigned long long)r.seq);
	/* leaf data: the line without its ,"hash":"..." member */
	if (pre_leaf)
		memcpy(r.leaf, pre_leaf, MERKLE_HASH);
	else if (merkle_leaf(h, line, len - TAIL_HASH_LEN(f), "}", 1, r.leaf) < 0)
		return pc_err_set(err, PC_EIO, "hashing failed");
	/* compared as text: a hash has one spelling (lower-case hex) */
	merkle_hex(r.leaf, r.leaf_hex);
	if (memcmp(r.leaf_hex, line + len - 66, 2 * MERKLE_HASH) != 0) {
		return pc_err_set(err, PC_ETAMPER,
				  "record seq %llu was edited: its contents hash to %.16s..., the "
				  "line says %.16s...",
				  (unsigned long long)r.seq, r.leaf_hex, line + len - 66);
	}
	r.prev_hex = tail + f->prevlen;
	*out = r;
	return 0;
}

int logv_record_parse(struct merkle_hasher *h, const char *line, size_t len,
		      struct logv_record *out, struct pc_err *err)
{
	return record_parse(h, line, len, NULL, out, err);
}

static int line_record(struct logv *v, const char *line, size_t len, struct pc_err *err)
{
	struct logv_result *r = &v->r;
	struct logv_record rec;
	struct pc_err e;
	int rc;

	rc = record_parse(v->h, line, len, v->pre_leaf, &rec, &e);
	if (rc < 0)
		return bad(v, rc, err, "%s", e.msg);
	if (rec.seq == 0 || rec.seq > LOGSEQ_MAX)
		return bad(
		    v, PC_ETAMPER, err,
		    "seq %llu is out of range (1 to %llu): logd never gives it; the line was "
		    "forged",
		    (unsigned long long)rec.seq, (unsigned long long)LOGSEQ_MAX);
	if (r->records == 0) {
		if (!logv_record_is_segment(line, len))
			return bad(v, PC_ETAMPER, err,
				   "the first record (seq %llu) is not a log-segment record: "
				   "records were deleted from the start of the file",
				   (unsigned long long)rec.seq);
		if (merkle_hex_parse(rec.prev_hex, r->first_prev) < 0)
			return bad(v, PC_ETAMPER, err, "prev of seq %llu is not a hash",
				   (unsigned long long)rec.seq);
		r->first_seq = rec.seq;
	} else {
		/* seq goes up by one; only a log-segment record may skip ahead:
		 * logd's own record of lines it set aside, whose seqs are not
		 * given again (docs/logd.md, "Recovery") */
		if (rec.seq != r->last_seq + 1 &&
		    !(rec.seq > r->last_seq + 1 && logv_record_is_segment(line, len)))
			return bad(v, PC_ETAMPER, err, "seq %llu follows seq %llu: a record was %s",
				   (unsigned long long)rec.seq, (unsigned long long)r->last_seq,
				   rec.seq > r->last_seq + 1 ? "deleted (or records reordered)"
							     : "inserted, repeated or reordered");
		/* as text: the hex of the last hash is at hand */
		if (memcmp(rec.prev_hex, v->last_hex, 2 * MERKLE_HASH) != 0)
			return bad(
			    v, PC_ETAMPER, err,
			    "prev of seq %llu is not the hash of seq %llu on line %llu: that "
			    "record was edited, or one was put in between",
			    (unsigned long long)rec.seq, (unsigned long long)r->last_seq,
			    (unsigned long long)r->last_line);
	}
	if (merkle_tree_append(v->h, &r->tree, rec.leaf) < 0)
		return bad(v, PC_EIO, err, "hashing failed");
	if (v->leaf_fn && v->leaf_fn(v->leaf_ctx, r->records, rec.seq, rec.leaf, line, len) < 0)
		return bad(v, PC_ENOMEM, err, "out of memory");
	memcpy(r->last_hash, rec.leaf, MERKLE_HASH);
	memcpy(v->last_hex, rec.leaf_hex, 2 * MERKLE_HASH);
	r->last_seq = rec.seq;
	r->last_line = r->lines;
	if (r->unsealed == 0)
		r->unsealed_line = r->lines;
	r->records++;
	r->unsealed++;
	return check_expect(v, err);
}

/* The JSON string of a checkpoint line holds the note with each newline
 * written as \n; nothing else may be escaped (the note has no quote,
 * backslash or control character). */
static int cp_unescape(const char *s, size_t n, char *out, size_t outlen, size_t *olen)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '\\') {
			if (i + 1 >= n || s[i + 1] != 'n')
				return PC_EPARSE;
			c = '\n';
			i++;
		} else if (c == '"' || (unsigned char)c < 0x20) {
			return PC_EPARSE;
		}
		if (o + 1 >= outlen)
			return PC_EPARSE;
		out[o++] = c;
	}
	out[o] = '\0';
	*olen = o;
	return 0;
}

int logv_checkpoint_unescape(const char *line, size_t len, char *note, size_t notelen,
			     size_t *outlen)
{
	size_t pl = sizeof(CP_PREFIX) - 1;

	if (len < pl + 2 || memcmp(line, CP_PREFIX, pl) != 0 ||
	    memcmp(line + len - 2, "\"}", 2) != 0)
		return PC_EPARSE;
	return cp_unescape(line + pl, len - pl - 2, note, notelen, outlen);
}

static int line_checkpoint(struct logv *v, const char *line, size_t len, struct pc_err *err)
{
	struct logv_result *r = &v->r;
	char note[CHECKPOINT_MAX];
	uint8_t root[MERKLE_HASH];
	struct checkpoint cp;
	struct pc_err e;
	size_t nlen;
	int rc;

	if (logv_checkpoint_unescape(line, len, note, sizeof(note), &nlen) < 0)
		return bad(v, PC_ETAMPER, err, "malformed checkpoint line");
	if (!v->key)
		return bad(v, PC_EINVAL, err, "no key to check the checkpoint with");
	rc = checkpoint_open(v->key, note, nlen, &cp, &e);
	if (rc < 0)
		return bad(v, PC_ETAMPER, err,
			   "checkpoint does not verify with key %s+%08x: %s (forged checkpoint, "
			   "or the wrong key)",
			   v->key->name, v->key->hash, e.msg);
	{ /* logd signs a checkpoint line once, with the log's key, and writes
	   * nothing else under it: a second line there (a stranger's signature,
	   * ours again) is bytes no signature covers */
		size_t blen = note_body_len(note, nlen);

		if (memchr(note + blen + 1, '\n', nlen - blen - 1) != note + nlen - 1)
			return bad(v, PC_ETAMPER, err,
				   "checkpoint carries more than the log's one signature line: "
				   "lines were added to it");
	}
	{ /* one origin per file: the bare key name (older logs) or this
	   * segment's, named by its first record's seq (tlog/origin.c) */
		uint64_t seg = 0;

		if (checkpoint_origin_seg(cp.origin, v->key->name, &seg) < 0 ||
		    (seg && seg != r->first_seq))
			return bad(v, PC_ETAMPER, err,
				   "checkpoint origin %s is not this segment's (its first record "
				   "is seq %llu): a checkpoint of another segment",
				   cp.origin, (unsigned long long)r->first_seq);
		if (r->has_cp && strcmp(cp.origin, r->last_cp.origin) != 0)
			return bad(v, PC_ETAMPER, err,
				   "checkpoint origin %s is not the origin %s of the one on line "
				   "%llu: one file, one origin",
				   cp.origin, r->last_cp.origin,
				   (unsigned long long)r->last_cp_line);
	}
	if (cp.size != r->records)
		return bad(v, PC_ETAMPER, err,
			   "checkpoint covers %llu records but %llu precede it: %s",
			   (unsigned long long)cp.size, (unsigned long long)r->records,
			   cp.size > r->records ? "records before it were deleted"
						: "records were inserted, or the checkpoint was "
						  "copied from earlier (replayed)");
	if (merkle_tree_root(v->h, &r->tree, root) < 0)
		return bad(v, PC_EIO, err, "hashing failed");
	if (memcmp(root, cp.root, MERKLE_HASH) != 0) {
		if (r->has_cp)
			return bad(v, PC_ETAMPER, err,
				   "checkpoint root does not match the records: a record between "
				   "line %llu (the previous checkpoint) and here was changed",
				   (unsigned long long)r->last_cp_line);
		return bad(v, PC_ETAMPER, err,
			   "checkpoint root does not match the records: a record before this "
			   "line was changed");
	}
	if (r->has_cp && cp.time_ms < r->last_cp.time_ms)
		return bad(v, PC_ETAMPER, err,
			   "checkpoint is older than the one on line %llu (replayed)",
			   (unsigned long long)r->last_cp_line);
	r->last_cp = cp;
	r->last_cp_line = r->lines;
	memcpy(r->last_cp_note, note, nlen + 1);
	r->last_cp_len = nlen;
	r->has_cp = true;
	r->checkpoints++;
	r->unsealed = 0;
	r->unsealed_line = 0;
	return 0;
}

/* Feed one line (without its newline). 0, or <0 with "line N: why" in err
 * (PC_ETAMPER for anything wrong with the log). */
static int logv_line(struct logv *v, const char *line, size_t len, struct pc_err *err)
{
	v->r.lines++;
	if (len > LINE_MAX_LEN)
		return bad(v, PC_ETAMPER, err, "line of %zu bytes is longer than any record", len);
	if (logrec_seq_prefix(line, len))
		return line_record(v, line, len, err);
	if (len >= sizeof(CP_PREFIX) - 1 && memcmp(line, CP_PREFIX, sizeof(CP_PREFIX) - 1) == 0)
		return line_checkpoint(v, line, len, err);
	return bad(v, PC_ETAMPER, err, "not a log record or checkpoint");
}

static int logv_finish(struct logv *v, struct pc_err *err)
{
	if (v->expect.size && !v->expect_met)
		return pc_err_set(err, PC_ETAMPER,
				  "the file ends at %llu records, but a checkpoint signed for it "
				  "covers %llu: records were cut off the end (truncated)",
				  (unsigned long long)v->r.records,
				  (unsigned long long)v->expect.size);
	return 0;
}

/* The end of the buffer: an incomplete last line is reported or, with
 * LOGV_TORN_OK, left for the caller to cut. */
static int buffer_tail(struct logv *v, const char *p, const char *end, unsigned flags,
		       struct pc_err *err)
{
	if (p < end) {
		if (flags & LOGV_TORN_OK) {
			v->r.torn = true;
			v->r.torn_bytes = (uint64_t)(end - p);
		} else {
			v->r.lines++;
			return bad(v, PC_ETAMPER, err,
				   "the last line is incomplete (%zu bytes without a newline): "
				   "the file was cut mid-line",
				   (size_t)(end - p));
		}
	}
	return logv_finish(v, err);
}

/* ---- large files: leaf hashes computed ahead on the other cores ----------
 * Hashing is most of the work and independent per line; everything else
 * is a sequence. The buffer is cut into chunks at line ends; worker threads
 * (and the main thread, while it would wait) hash whole chunks, the main
 * thread checks them in order with the hashes at hand. */

#define PAR_CHUNK   (1u << 20)
#define PAR_MIN	    (8u << 20) /* smaller buffers: not worth a thread */
#define PAR_WORKERS 3

struct pchunk {
	const char *start, *end;
	uint8_t (*leaf)[MERKLE_HASH]; /* one per line; zeros for non-records */
	int state;		      /* 0 unclaimed, 1 being hashed, 2 done, -1 failed */
};

struct par {
	struct pchunk *c;
	size_t n, next;
	/* mu guards next, every state and stop; cv signals a state change */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
};

static int chunk_hash(struct merkle_hasher *h, struct pchunk *c)
{
	size_t lines = 0, i = 0;

	for (const char *p = c->start; p < c->end;
	     p = (const char *)memchr(p, '\n', (size_t)(c->end - p)) + 1)
		lines++;
	c->leaf = calloc(lines ? lines : 1, MERKLE_HASH);
	if (!c->leaf)
		return PC_ENOMEM;
	for (const char *p = c->start; p < c->end; i++) {
		const char *eol = memchr(p, '\n', (size_t)(c->end - p));
		size_t len = (size_t)(eol - p);

		const struct rec_form *f = len <= LINE_MAX_LEN ? rec_form(p, len) : NULL;

		if (f && merkle_leaf(h, p, len - TAIL_HASH_LEN(f), "}", 1, c->leaf[i]) < 0)
			return PC_EIO;
		p = eol + 1;
	}
	return 0;
}

/* Claim and hash the next unclaimed chunk; false when there is none.
 * Called with mu held; returns with it held. */
static bool par_work_one(struct par *p, struct merkle_hasher *h)
{
	size_t i;
	int rc;

	if (p->stop || p->next >= p->n)
		return false;
	i = p->next++;
	p->c[i].state = 1;
	pthread_mutex_unlock(&p->mu);
	rc = chunk_hash(h, &p->c[i]);
	pthread_mutex_lock(&p->mu);
	p->c[i].state = rc < 0 ? -1 : 2;
	pthread_cond_broadcast(&p->cv);
	return true;
}

static void *par_worker(void *arg)
{
	struct par *p = arg;
	struct merkle_hasher *h;

	if (merkle_hasher_new(&h, NULL) < 0)
		return NULL; /* the main thread hashes what is left */
	pthread_mutex_lock(&p->mu);
	while (par_work_one(p, h))
		;
	pthread_mutex_unlock(&p->mu);
	merkle_hasher_free(h);
	return NULL;
}

static int buffer_par(struct logv *v, const char *buf, size_t len, unsigned flags,
		      struct pc_err *err)
{
	struct par p = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	const char *end = buf + len, *last = buf, *s;
	pthread_t th[PAR_WORKERS];
	size_t nth = 0, cap = len / PAR_CHUNK + 2;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int rc = 0;

	p.c = calloc(cap, sizeof(*p.c));
	if (!p.c)
		return pc_err_set(err, PC_ENOMEM, "verifier: out of memory");
	for (s = buf; s < end && p.n < cap;) {
		const char *cut = s + PAR_CHUNK < end ? s + PAR_CHUNK : end - 1;
		const char *nl = memchr(cut, '\n', (size_t)(end - cut));

		if (!nl) /* what follows the last newline is the torn tail */
			nl = memrchr(s, '\n', (size_t)(end - s));
		if (!nl)
			break;
		p.c[p.n].start = s;
		p.c[p.n++].end = nl + 1;
		s = last = nl + 1;
	}
	for (long i = 0; i < cpus - 1 && nth < PAR_WORKERS; i++)
		if (pthread_create(&th[nth], NULL, par_worker, &p) == 0)
			nth++;
	for (size_t i = 0; i < p.n && rc == 0; i++) {
		struct pchunk *c = &p.c[i];
		size_t li = 0;

		pthread_mutex_lock(&p.mu);
		while (c->state != 2 && c->state != -1)
			if (!par_work_one(&p, v->h)) /* nothing to take: wait */
				pthread_cond_wait(&p.cv, &p.mu);
		pthread_mutex_unlock(&p.mu);
		if (c->state < 0) {
			rc = pc_err_set(err, PC_ENOMEM, "verifier: hashing failed");
			break;
		}
		for (const char *q = c->start; q < c->end; li++) {
			const char *eol = memchr(q, '\n', (size_t)(c->end - q));

			v->pre_leaf = c->leaf[li];
			rc = logv_line(v, q, (size_t)(eol - q), err);
			v->pre_leaf = NULL;
			if (rc < 0)
				break;
			q = eol + 1;
			v->r.valid_bytes = (uint64_t)(q - buf);
		}
		free(c->leaf);
		c->leaf = NULL;
	}
	pthread_mutex_lock(&p.mu);
	p.stop = true;
	pthread_mutex_unlock(&p.mu);
	for (size_t i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	for (size_t i = 0; i < p.n; i++)
		free(p.c[i].leaf);
	free(p.c);
	if (rc < 0)
		return rc;
	return buffer_tail(v, last, end, flags, err);
}

int logv_buffer(struct logv *v, const char *buf, size_t len, unsigned flags, struct pc_err *err)
{
	const char *p = buf, *end = buf + len;
	int rc;

	if (len >= PAR_MIN && sysconf(_SC_NPROCESSORS_ONLN) > 1)
		return buffer_par(v, buf, len, flags, err);
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));

		if (!eol)
			break;
		rc = logv_line(v, p, (size_t)(eol - p), err);
		if (rc < 0)
			return rc;
		p = eol + 1;
		v->r.valid_bytes = (uint64_t)(p - buf);
	}
	return buffer_tail(v, p, end, flags, err);
}

size_t logrec_seq_prefix(const char *line, size_t len)
{
	static const char n[] = "{\"" LOGREC_SEQ_KEY "\":", o[] = "{\"" LOGREC_OLD_SEQ_KEY "\":";

	if (len >= sizeof(n) - 1 && memcmp(line, n, sizeof(n) - 1) == 0)
		return sizeof(n) - 1;
	if (len >= sizeof(o) - 1 && memcmp(line, o, sizeof(o) - 1) == 0)
		return sizeof(o) - 1;
	return 0;
}
