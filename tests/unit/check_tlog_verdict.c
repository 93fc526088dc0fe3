/* The verdict of log verify as the core decides it (tlog/verdict.c), on
 * verifier results made by hand: when a file is intact or only unsigned,
 * what it says was lost, what its witnessed checkpoint vouches for, and
 * when several files form one chain and where
 * it breaks. The CLI prints these; logd_tamper, logd_rotate and
 * logd_recover pin what it prints. */
#include "tests/unit/unit.h"
#include "tlog/tlog.h"

#include <string.h>

static struct logv_result result(uint64_t first, uint64_t last, bool cp, uint64_t unsealed)
{
	struct logv_result r = {0};

	r.records = last - first + 1;
	r.first_seq = first;
	r.last_seq = last;
	r.last_line = r.records;
	r.checkpoints = cp;
	r.has_cp = cp;
	r.last_cp.size = r.records - unsealed;
	r.last_cp.time_ms = 1795960933123ull;
	r.last_cp_line = r.records - unsealed + 1;
	r.unsealed = unsealed;
	r.unsealed_line = unsealed ? r.last_cp_line + 1 : 0;
	return r;
}

START_TEST(a_file_without_a_checkpoint_is_unsigned_and_refused_unless_allowed)
{
	struct logv_result r = result(1, 10, false, 0);
	struct tlog_file_facts f = {.sidecar_missing = true};
	struct tlog_file_verdict v;

	ck_assert_int_eq(tlog_verdict_file(&r, &f, &v, NULL), 0);
	ck_assert_int_eq(v.result, TLOG_UNSIGNED);
	ck_assert(!v.accepted);
	ck_assert_ptr_null(v.signed_by);
	ck_assert(v.sidecar_missing);
	f.allow_unsigned = true;
	ck_assert_int_eq(tlog_verdict_file(&r, &f, &v, NULL), 0);
	ck_assert_int_eq(v.result, TLOG_UNSIGNED);
	ck_assert(v.accepted);
	ck_assert(!v.witnessed_missing); /* nothing signed: nothing to witness */
}
END_TEST

START_TEST(a_checkpoint_held_outside_the_file_signs_it)
{
	struct logv_result r = result(1, 10, false, 0);
	struct checkpoint ext = {.size = 10, .time_ms = 5};
	struct tlog_file_facts f = {.ext = &ext};
	struct tlog_file_verdict v;

	ck_assert_int_eq(tlog_verdict_file(&r, &f, &v, NULL), 0);
	ck_assert_int_eq(v.result, TLOG_INTACT);
	ck_assert(v.accepted && v.has_checkpoint && v.checkpoint_covers_all);
	ck_assert_uint_eq(v.checkpoint_records, 10);
	/* an empty checkpoint vouches for nothing */
	ext.size = 0;
	ck_assert_int_eq(tlog_verdict_file(&r, &f, &v, NULL), 0);
	ck_assert_int_eq(v.result, TLOG_UNSIGNED);
	ck_assert(!v.checkpoint_covers_all);
}
END_TEST

START_TEST(the_unsealed_tail_and_a_missing_witnessed_checkpoint_are_said)
{
	struct logv_result r = result(101, 130, true, 5);
	struct cosig_verifier wkey = {.name = "w"};
	struct tlog_file_facts f = {.wkey = &wkey};
	struct tlog_file_verdict v;

	ck_assert_int_eq(tlog_verdict_file(&r, &f, &v, NULL), 0);
	ck_assert_int_eq(v.result, TLOG_INTACT);
	ck_assert(v.sealed);
	ck_assert_uint_eq(v.sealed_records, 25);
	ck_assert_uint_eq(v.unsealed, 5);
	ck_assert_uint_eq(v.unsealed_first_seq, 126);
	ck_assert(v.witnessed_missing);
	ck_assert_int_eq(v.witnessed, TLOG_WITNESSED_NONE);
	f = (struct tlog_file_facts){0}; /* no witness configured: nothing to miss */
	ck_assert_int_eq(tlog_verdict_file(&r, &f, &v, NULL), 0);
	ck_assert(!v.witnessed_missing);
}
END_TEST

/* One witnessed checkpoint of size size, as the CLI attaches it (the
 * verifier fed it no leaf: it is still pending). */
static void witnessed_anchor(struct logc_anchors *a, uint64_t size)
{
	memset(a, 0, sizeof(*a));
	a->n = 1;
	a->a[0].witnessed = true;
	strcpy(a->a[0].path, "verdicts.jsonl.witnessed");
	a->cp[0].size = size;
	a->p = (struct logc_prefix){.want = a->cp, .state = a->st, .n = 1};
}

START_TEST(a_witnessed_checkpoint_is_unchecked_without_the_key_and_forged_without_a_cosignature)
{
	struct logv_result r = result(1, 30, true, 0);
	struct note_verifier key = {.name = "log"};
	struct cosig_verifier wkey = {.name = "w"};
	static struct logc_anchors anc;
	struct tlog_file_facts f = {.key = &key, .anchors = &anc};
	struct tlog_file_verdict v;
	struct pc_err err;

	witnessed_anchor(&anc, 0);
	ck_assert_int_eq(tlog_verdict_file(&r, &f, &v, &err), 0);
	ck_assert_int_eq(v.witnessed, TLOG_WITNESSED_UNCHECKED);
	ck_assert_ptr_eq(v.signed_by, &key);
	ck_assert(!v.witnessed_missing);
	/* with the witness's key, a note that carries no cosignature of it
	 * is not the witness's (issue 32, finding 5) */
	witnessed_anchor(&anc, 0);
	f.wkey = &wkey;
	ck_assert_int_eq(tlog_verdict_file(&r, &f, &v, &err), PC_ETAMPER);
	ck_assert_ptr_nonnull(strstr(err.msg, "carries no cosignature by the witness"));
}
END_TEST

START_TEST(a_file_shorter_than_its_witnessed_checkpoint_was_cut_back)
{
	struct logv_result r = result(1, 30, true, 0);
	struct note_verifier key = {.name = "log"};
	static struct logc_anchors anc;
	struct tlog_file_facts f = {.key = &key, .anchors = &anc};
	struct tlog_file_verdict v;
	struct pc_err err;

	witnessed_anchor(&anc, 40);
	ck_assert_int_eq(tlog_verdict_file(&r, &f, &v, &err), PC_ETAMPER);
	ck_assert_ptr_nonnull(strstr(err.msg, "records were cut off"));
}
END_TEST

static struct tlog_link link_(uint64_t first, uint64_t last, uint8_t prev, uint8_t hash, size_t id)
{
	struct tlog_link l = {.first_seq = first, .last_seq = last, .id = id};

	memset(l.first_prev, prev, MERKLE_HASH);
	memset(l.last_hash, hash, MERKLE_HASH);
	return l;
}

START_TEST(files_in_any_order_form_one_chain_from_the_start)
{
	struct tlog_link l[3] = {link_(21, 30, 2, 3, 2), link_(1, 10, 0, 1, 0),
				 link_(11, 20, 1, 2, 1)};
	struct tlog_chain_verdict cv;

	ck_assert_int_eq(tlog_verdict_chain(l, 3, &cv), 0);
	ck_assert(!cv.broken && cv.from_start);
	ck_assert_uint_eq(cv.files, 3);
	ck_assert_uint_eq(cv.first_seq, 1);
	ck_assert_uint_eq(cv.last_seq, 30);
	ck_assert_uint_eq(l[0].id, 0);
	ck_assert_uint_eq(l[2].id, 2);
}
END_TEST

START_TEST(a_chain_without_its_oldest_segments_is_not_from_the_start)
{
	struct tlog_link l[2] = {link_(11, 20, 1, 2, 0), link_(21, 30, 2, 3, 1)};
	struct tlog_chain_verdict cv;

	ck_assert_int_eq(tlog_verdict_chain(l, 2, &cv), 0);
	ck_assert(!cv.from_start);
}
END_TEST

START_TEST(a_missing_file_and_a_relinked_file_break_the_chain_where_they_are)
{
	struct tlog_link gap[3] = {link_(1, 10, 0, 1, 0), link_(11, 20, 1, 2, 1),
				   link_(31, 40, 3, 4, 2)};
	struct tlog_link fork[2] = {link_(1, 10, 0, 1, 0), link_(11, 20, 9, 2, 1)};
	struct tlog_chain_verdict cv;

	ck_assert_int_eq(tlog_verdict_chain(gap, 3, &cv), PC_ETAMPER);
	ck_assert(cv.broken && cv.missing_between);
	ck_assert_uint_eq(cv.at, 2);
	/* the seqs follow but the first record links elsewhere: a fork */
	ck_assert_int_eq(tlog_verdict_chain(fork, 2, &cv), PC_ETAMPER);
	ck_assert(cv.broken && !cv.missing_between);
	ck_assert_uint_eq(cv.at, 1);
}
END_TEST

static Suite *tlog_verdict_suite(void)
{
	Suite *s = suite_create("tlog_verdict");
	TCase *t = tcase_create("verdict");

	PC_UNIT_TESTS(
	    t, a_file_without_a_checkpoint_is_unsigned_and_refused_unless_allowed,
	    a_checkpoint_held_outside_the_file_signs_it,
	    the_unsealed_tail_and_a_missing_witnessed_checkpoint_are_said,
	    a_witnessed_checkpoint_is_unchecked_without_the_key_and_forged_without_a_cosignature,
	    a_file_shorter_than_its_witnessed_checkpoint_was_cut_back,
	    files_in_any_order_form_one_chain_from_the_start,
	    a_chain_without_its_oldest_segments_is_not_from_the_start,
	    a_missing_file_and_a_relinked_file_break_the_chain_where_they_are);
	suite_add_tcase(s, t);
	return s;
}

PC_UNIT_MAIN(tlog_verdict_suite)
