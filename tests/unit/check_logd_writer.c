/* Unit tests for the log writer's recovery and durability (issue 21):
 * checkpoints reach the exporter only once synced, the unsealed tail is set
 * aside at open, an emptied log is refused, a failed rotation does not fail
 * the commit whose records it follows; the segment record a start writes
 * (seq 1 of a new log) reaches the exporter attached after it (issue 36). */
#include "logd/logd_int.h"
#include "tests/unit/unit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct wlog {
	char dir[64], file[96], side[128];
	struct note_signer *key;
	struct logw_conf wc;
};

static void wlog_make(struct wlog *t, uint32_t cp_records)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->dir, sizeof(t->dir), "/tmp/check_logd_writer.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
	snprintf(t->file, sizeof(t->file), "%s/log.jsonl", t->dir);
	snprintf(t->side, sizeof(t->side), "%s.checkpoint", t->file);
	ck_assert_int_eq(note_signer_generate("test/portcullis-log", &t->key, NULL), 0);
	t->wc.file = t->file;
	t->wc.cp_records = cp_records;
	t->wc.cp_ms = 1000000; /* no checkpoint, and no sync, by time */
	t->wc.owner = (uid_t)-1;
	t->wc.group = (gid_t)-1;
}

static void wlog_remove(struct wlog *t)
{
	char cmd[96];

	note_signer_free(t->key);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", t->dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void append_n(struct logw *w, int n)
{
	struct logrec r = {.action = LOGREC_CONNECT, .verdict = LOGREC_REFUSED, .sandbox = "a-1"};

	for (int i = 0; i < n; i++)
		ck_assert_int_eq(logw_append(w, &r, NULL, NULL), 0);
	ck_assert_int_eq(logw_commit(w, NULL), 0);
}

/* what the exporter was handed */
static struct {
	int cps, recs, dones;
	uint64_t last_size, first_seq, first_time;
	enum logrec_action first_action;
	uint8_t first_hash[MERKLE_HASH];
} X;

static void x_stage(void *ctx, const struct logrec *rec, uint64_t seq, uint64_t time_ms,
		    const uint8_t hash[MERKLE_HASH])
{
	(void)ctx;
	if (!X.recs++) {
		X.first_seq = seq;
		X.first_time = time_ms;
		X.first_action = rec->action;
		memcpy(X.first_hash, hash, MERKLE_HASH);
	}
}

static void x_stage_cp(void *ctx, const char *note, size_t len)
{
	const char *nl = memchr(note, '\n', len);

	(void)ctx;
	X.cps++;
	X.last_size = nl ? strtoull(nl + 1, NULL, 10) : 0;
}

static void x_done(void *ctx, bool written)
{
	(void)ctx;
	X.dones += written;
}

/* A power cut takes back what was not synced: a checkpoint the collector
 * holds must never be among it. */
START_TEST(checkpoints_are_exported_only_once_synced)
{
	struct logw_export exp = {x_stage, x_stage_cp, x_done, NULL};
	struct wlog t;
	struct logw *w;

	wlog_make(&t, 5);
	ck_assert_int_eq(logw_open(&t.wc, t.key, NULL, &w, NULL), 0);
	logw_set_export(w, &exp);
	memset(&X, 0, sizeof(X)); /* (the start's segment record and its checkpoint) */
	append_n(w, 5);		  /* a checkpoint of 6 records, written, not synced */
	ck_assert_msg(X.cps == 0, "checkpoint of %llu records exported before it was synced",
		      (unsigned long long)X.last_size);
	ck_assert_int_eq(logw_close(w, NULL), 0); /* syncs */
	ck_assert_int_eq(X.cps, 1);
	ck_assert_uint_eq(X.last_size, 6);
	wlog_remove(&t);
}
END_TEST

/* logd attaches the exporter after logw_open, which writes seq 1 of a new
 * log (the log-segment record) and syncs it: that record, with its hash as
 * the file has it, and the checkpoint sealing it are handed over then, once
 * (a SIEM must see every seq). */
START_TEST(the_segment_record_of_the_start_is_exported)
{
	struct logw_export exp = {x_stage, x_stage_cp, x_done, NULL};
	char cmd[300], line[4096], hx[2 * MERKLE_HASH + 1];
	struct wlog t;
	struct logw *w;
	FILE *f;

	wlog_make(&t, 5);
	ck_assert_int_eq(logw_open(&t.wc, t.key, NULL, &w, NULL), 0);
	memset(&X, 0, sizeof(X));
	logw_set_export(w, &exp);
	ck_assert_int_eq(X.recs, 1);
	ck_assert_uint_eq(X.first_seq, 1);
	ck_assert_int_eq(X.first_action, LOGREC_SEGMENT);
	ck_assert_int_eq(X.cps, 1);
	ck_assert_uint_eq(X.last_size, 1);
	ck_assert_int_eq(X.dones, 1);
	merkle_hex(X.first_hash, hx);
	snprintf(cmd, sizeof(cmd), "head -1 %s", t.file);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	pclose(f);
	ck_assert_msg(strstr(line, hx), "hash %s is not seq 1's: %s", hx, line);
	/* once: a second exporter (a SIGHUP) gets only what comes next */
	memset(&X, 0, sizeof(X));
	logw_set_export(w, &exp);
	ck_assert_int_eq(X.recs + X.cps, 0);
	append_n(w, 1);
	ck_assert_int_eq(X.recs, 1);
	ck_assert_uint_eq(X.first_seq, 2);
	ck_assert_int_eq(logw_close(w, NULL), 0);
	wlog_remove(&t);
}
END_TEST

/* Records after the last checkpoint (a kill, or appended by anyone who can
 * write the file) are set aside, and a record of the log says so. */
START_TEST(unsealed_tail_is_set_aside_at_open)
{
	char cmd[300], last[4096];
	struct wlog t;
	struct logw *w;
	struct logv *v;
	struct pc_err err;
	FILE *f;

	wlog_make(&t, 5);
	ck_assert_int_eq(logw_open(&t.wc, t.key, NULL, &w, NULL), 0);
	append_n(w, 7); /* seq 2-8; checkpoint after seq 6 */
	ck_assert_int_eq(logw_close(w, NULL), 0);
	/* as a kill leaves it: no final checkpoint, the sidecar older */
	snprintf(cmd, sizeof(cmd), "sed -i '$d' %s && rm %s", t.file, t.side);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(logw_open(&t.wc, t.key, NULL, &w, &err), 0);
	ck_assert_msg(strstr(logw_notice(w), "set aside at start: 2 lines"), "%s", logw_notice(w));
	ck_assert_uint_eq(logw_next_seq(w), 10); /* 9: the set-aside record */
	ck_assert_int_eq(logw_close(w, NULL), 0);
	snprintf(cmd, sizeof(cmd), "grep -h '\"portcullis.quarantine.seq\":\"7-8\"' %s", t.file);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(fgets(last, sizeof(last), f));
	pclose(f);
	ck_assert(strncmp(last, "{\"event.sequence\":9,", 20) == 0);
	snprintf(cmd, sizeof(cmd), "test $(cat %s/log.jsonl.*-quarantine | wc -l) = 2", t.dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(logv_new(note_signer_verifier(t.key), &v, NULL), 0);
	ck_assert_msg(logv_file(v, t.file, 0, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(logv_result(v)->unsealed, 0);
	logv_free(v);
	wlog_remove(&t);
}
END_TEST

START_TEST(an_emptied_log_is_refused)
{
	struct wlog t;
	struct logw *w;
	struct pc_err err;

	wlog_make(&t, 5);
	ck_assert_int_eq(logw_open(&t.wc, t.key, NULL, &w, NULL), 0);
	append_n(w, 7);
	ck_assert_int_eq(logw_close(w, NULL), 0);
	ck_assert_int_eq(truncate(t.file, 0), 0);
	ck_assert_int_eq(logw_open(&t.wc, t.key, NULL, &w, &err), PC_ETAMPER);
	ck_assert_msg(strstr(err.msg, "is empty, but") && strstr(err.msg, "covers 8 records") &&
			  strstr(err.msg, "--new-segment"),
		      "%s", err.msg);
	/* a configured anchor counts as the sidecar does */
	{
		char anchor[160];
		const char *const anchors[] = {anchor};

		snprintf(anchor, sizeof(anchor), "%s/anchor", t.dir);
		ck_assert_int_eq(rename(t.side, anchor), 0);
		t.wc.anchors = anchors;
		t.wc.n_anchors = 1;
		ck_assert_int_eq(logw_open(&t.wc, t.key, NULL, &w, &err), PC_ETAMPER);
		ck_assert_msg(strstr(err.msg, "anchor (signed"), "%s", err.msg);
	}
	wlog_remove(&t);
}
END_TEST

/* The batch is in the file: a rotation failing after it does not fail it. */
START_TEST(a_failed_rotation_does_not_fail_the_commit)
{
	char blocker[160];
	struct logw_stats st;
	struct wlog t;
	struct logw *w;
	FILE *f;

	wlog_make(&t, 1000);
	t.wc.rotate_bytes = 2000;
	ck_assert_int_eq(logw_open(&t.wc, t.key, NULL, &w, NULL), 0);
	/* <file>.new cannot be made: a directory that is not empty */
	snprintf(blocker, sizeof(blocker), "%s.new", t.file);
	ck_assert_int_eq(mkdir(blocker, 0700), 0);
	snprintf(blocker, sizeof(blocker), "%s.new/x", t.file);
	f = fopen(blocker, "w");
	fclose(f);
	append_n(w, 20);
	logw_stats(w, &st);
	ck_assert_uint_ge(st.rotate_failures, 1);
	ck_assert_uint_eq(logw_next_seq(w), 22);
	ck_assert(!logw_broken(w));
	ck_assert_int_eq(logw_close(w, NULL), 0);
	wlog_remove(&t);
}
END_TEST

/* Whether the checkpoint lines' signatures hold a '/': the one character a
 * byte from 0x80 read as, before base64 was read strictly. */
static bool signature_has_slash(const char *buf, size_t len)
{
	for (const char *p = buf, *end = buf + len, *eol; p < end; p = eol + 1) {
		const char *sp;

		eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			break;
		if (strncmp(p, "{\"checkpoint\":", 14) != 0)
			continue;
		for (sp = eol; sp > p && *sp != ' '; sp--)
			;
		if (memchr(sp, '/', (size_t)(eol - sp)))
			return true;
	}
	return false;
}

/* Each byte of buf changed three ways (its low bit, its case bit, its high
 * bit), one copy at a time: verifies must say no to every copy. */
static void each_flip_fails(char *buf, size_t len,
			    bool (*verifies)(const void *key, const char *buf, size_t len),
			    const void *key, const char *what)
{
	static const uint8_t flips[] = {0x01, 0x20, 0x80};

	for (size_t i = 0; i < len; i++) {
		for (size_t f = 0; f < sizeof(flips); f++) {
			bool ok;

			buf[i] = (char)(buf[i] ^ flips[f]);
			ok = verifies(key, buf, len);
			buf[i] = (char)(buf[i] ^ flips[f]);
			ck_assert_msg(!ok, "%s byte %zu ('%c') xor 0x%02x still verifies", what, i,
				      buf[i], flips[f]);
		}
	}
}

static bool log_verifies(const void *key, const char *buf, size_t len)
{
	struct logv *v;
	int rc;

	ck_assert_int_eq(logv_new(key, &v, NULL), 0);
	rc = logv_buffer(v, buf, len, 0, NULL);
	logv_free(v);
	return rc == 0;
}

static bool proof_verifies(const void *key, const char *text, size_t len)
{
	return logproof_verify(text, len, key, NULL, NULL) == 0;
}

/* The leaves of a verified file, and one record line to prove. */
struct leaves {
	uint8_t (*h)[MERKLE_HASH];
	uint64_t n;
	char line[4096];
	size_t len;
};

static int leaf_keep(void *ctx, uint64_t index, uint64_t seq, const uint8_t leaf[MERKLE_HASH],
		     const char *line, size_t len)
{
	struct leaves *l = ctx;

	(void)seq;
	l->h = realloc(l->h, (index + 1) * sizeof(*l->h));
	ck_assert_ptr_nonnull(l->h);
	memcpy(l->h[index], leaf, MERKLE_HASH);
	l->n = index + 1;
	if (index == 2) {
		ck_assert_uint_lt(len, sizeof(l->line));
		memcpy(l->line, line, len);
		l->len = len;
	}
	return 0;
}

/* The inclusion proof of a record of the file: each byte of its text
 * changed the same three ways makes it fail. */
static void flip_proof(const struct note_verifier *key, const char *buf, size_t len)
{
	uint8_t path[MERKLE_PROOF_MAX][MERKLE_HASH];
	const struct logv_result *r;
	struct merkle_hasher *h;
	struct leaves l = {0};
	struct logv *v;
	size_t plen = 0, tlen = 0;
	char *text = NULL;

	ck_assert_int_eq(logv_new(key, &v, NULL), 0);
	logv_set_leaf_fn(v, leaf_keep, &l);
	ck_assert_int_eq(logv_buffer(v, buf, len, 0, NULL), 0);
	r = logv_result(v);
	ck_assert_uint_eq(l.n, r->last_cp.size);
	ck_assert_int_eq(merkle_hasher_new(&h, NULL), 0);
	ck_assert_int_eq(merkle_inclusion_proof(h, (const uint8_t(*)[MERKLE_HASH])l.h, l.n, 2, path,
						&plen, NULL),
			 0);
	merkle_hasher_free(h);
	ck_assert_int_eq(logproof_format(2, l.line, l.len, (const uint8_t(*)[MERKLE_HASH])path,
					 plen, r->last_cp_note, r->last_cp_len, &text, &tlen, NULL),
			 0);
	ck_assert_int_eq(logproof_verify(text, tlen, key, NULL, NULL), 0);
	each_flip_fails(text, tlen, proof_verifies, key, "proof");
	free(text);
	free(l.h);
	logv_free(v);
}

/* Every byte of a log logd wrote is bound: a record's by the hashes, a
 * checkpoint line's by its signature and by having one spelling. Each
 * byte changed in three ways (its low bit, its case bit, its high bit)
 * makes the verifier fail. Before base64 was read strictly, a '/' of a
 * signature with its high bit set verified. */
START_TEST(every_byte_of_a_written_log_is_bound)
{
	const struct note_verifier *key;
	struct wlog t;
	struct logw *w;
	struct logv *v;
	struct pc_err err;
	char *buf = NULL;
	size_t len = 0;
	int rounds = 0;

	wlog_make(&t, 4);
	key = note_signer_verifier(t.key);
	ck_assert_int_eq(logw_open(&t.wc, t.key, NULL, &w, NULL), 0);
	do { /* checkpoints until one's signature holds a '/' (each: 3 in 4) */
		append_n(w, 4);
		free(buf);
		ck_assert_int_eq(pc_file_read(t.file, 1 << 20, &buf, &len, NULL), 0);
	} while (!signature_has_slash(buf, len) && ++rounds < 40);
	ck_assert_int_eq(logw_close(w, NULL), 0);
	free(buf);
	ck_assert_int_eq(pc_file_read(t.file, 1 << 20, &buf, &len, NULL), 0);
	ck_assert(signature_has_slash(buf, len));
	ck_assert_int_eq(logv_new(key, &v, NULL), 0);
	ck_assert_msg(logv_buffer(v, buf, len, 0, &err) == 0, "%s", err.msg);
	logv_free(v);
	each_flip_fails(buf, len, log_verifies, key, "log");
	flip_proof(key, buf, len);
	free(buf);
	wlog_remove(&t);
}
END_TEST

static Suite *writer_suite(void)
{
	Suite *s = suite_create("logd_writer");
	TCase *t = tcase_create("recovery");

	tcase_set_timeout(t, 30);
	PC_UNIT_TESTS(t, checkpoints_are_exported_only_once_synced,
		      the_segment_record_of_the_start_is_exported,
		      unsealed_tail_is_set_aside_at_open, an_emptied_log_is_refused,
		      a_failed_rotation_does_not_fail_the_commit,
		      every_byte_of_a_written_log_is_bound);
	suite_add_tcase(s, t);
	return s;
}

PC_UNIT_MAIN(writer_suite)
