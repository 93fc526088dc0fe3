/* A promoted held entry goes at the first read that found the NFQUEUE
 * socket empty after its promoting verdict was sent (and HELD_DRAIN_MIN_MS),
 * not only at HELD_GRACE_MS: while it stayed 500 ms, a sandbox opening TLS
 * flows quickly filled its share of promoted entries and its new flows were
 * refused "(engine quota)" (bench/report-notes.md, issue 34). */
#include <errno.h>
#include <string.h>

#include "engine/engine_int.h"
#include "tests/unit/unit.h"

static struct held_flow *promote(struct held_table *t, uint16_t port, uint64_t batch,
				 uint64_t now_ms)
{
	struct flow_key k;
	struct held_flow *f = NULL;

	memset(&k, 0, sizeof(k));
	k.sport = port;
	ck_assert_int_eq(held_add(t, &k, "a", 2, &f, NULL), 0);
	f->deadline_ms = now_ms + 10000;
	held_batch_begin(t, batch);
	f->promoted_ms = now_ms;
	ck_assert_int_eq(held_promoted(t, f, 2), 0);
	return f;
}

static bool present(struct held_table *t, uint16_t port)
{
	struct flow_key k;

	memset(&k, 0, sizeof(k));
	k.sport = port;
	return held_get(t, &k) != NULL;
}

/* Not before its verdict is sent (the ct mark is not set: the flow's
 * packets still come to the queue), not by a read begun within
 * HELD_DRAIN_MIN_MS of the sending, and a later batch's promotion waits
 * for its own verdict. */
START_TEST(goes_only_after_its_verdict_and_a_drained_read)
{
	struct held_table *t = NULL;

	ck_assert_int_eq(held_table_new(8, &t), 0);
	promote(t, 1, 1, 1000);
	promote(t, 2, 2, 1001); /* a batch read while batch 1 awaits logd */
	ck_assert_uint_eq(held_drained(t, 1400), 0);
	ck_assert(present(t, 1));
	held_verdicts_sent(t, 1, 1010);
	ck_assert_uint_eq(held_drained(t, 1010 + HELD_DRAIN_MIN_MS - 1), 0);
	ck_assert(present(t, 1));
	ck_assert_uint_eq(held_drained(t, 1010 + HELD_DRAIN_MIN_MS), 1);
	ck_assert(!present(t, 1)); /* a later segment is judged afresh: refused */
	ck_assert(present(t, 2));  /* batch 2's verdict is not sent yet */
	held_verdicts_sent(t, 2, 1100);
	ck_assert_uint_eq(held_drained(t, 1100 + HELD_DRAIN_MIN_MS), 1);
	ck_assert_uint_eq(held_count(t), 0);
	held_table_free(t);
}
END_TEST

/* The bench's pattern: a sandbox promoting many times its share of
 * promoted entries within HELD_GRACE_MS keeps getting new held entries,
 * as the queue drains between batches. With the entries kept 500 ms its
 * promotions overflowed into the waiting share and held_add refused. */
START_TEST(fast_promotions_do_not_fill_the_share)
{
	struct held_table *t = NULL;
	uint64_t now = 1000;

	/* 2 sandboxes: shares of 4 waiting and 8 promoted entries; one
	 * promotion per HELD_DRAIN_MIN_MS / 4, 40 per HELD_GRACE_MS */
	ck_assert_int_eq(held_table_new(8, &t), 0);
	for (uint16_t i = 1; i <= 200; i++, now += HELD_DRAIN_MIN_MS / 4) {
		promote(t, i, i, now); /* fails (held_add refused) on the old rule */
		held_verdicts_sent(t, i, now);
		held_drained(t, now);
	}
	ck_assert_uint_le(held_count(t), 5);
	ck_assert_uint_le(held_used(t, "a"), 4);
	held_table_free(t);
}
END_TEST

/* Entries deleted before their verdict went (a new SYN, a policy change)
 * do not stop the later ones from being stamped and drained. */
START_TEST(deleted_before_sending)
{
	struct held_table *t = NULL;
	struct held_flow *a, *b;

	ck_assert_int_eq(held_table_new(8, &t), 0);
	a = promote(t, 1, 1, 1000);
	b = promote(t, 2, 1, 1000);
	held_del(t, a);
	held_verdicts_sent(t, 1, 1000);
	ck_assert_uint_eq(b->sent_ms, 1000);
	ck_assert_uint_eq(held_drained(t, 1000 + HELD_DRAIN_MIN_MS), 1);
	ck_assert_uint_eq(held_count(t), 0);
	held_table_free(t);
}
END_TEST

/* Only a read that ended at an empty queue drains; a short read counts
 * once the next read reports no overflow (the queue thread's note_read). */
START_TEST(read_kinds)
{
	ck_assert_int_eq(queue_read_kind(-1, EAGAIN), QREAD_EMPTY);
	ck_assert_int_eq(queue_read_kind(-1, EWOULDBLOCK), QREAD_EMPTY);
	ck_assert_int_eq(queue_read_kind(1, 0), QREAD_SHORT);
	ck_assert_int_eq(queue_read_kind(63, 0), QREAD_SHORT);
	ck_assert_int_eq(queue_read_kind(64, 0), QREAD_FULL);
	ck_assert_int_eq(queue_read_kind(-1, ENOBUFS), QREAD_OVERFLOW);
	ck_assert_int_eq(queue_read_kind(-1, EINTR), QREAD_NOTHING);
	ck_assert_int_eq(queue_read_kind(-1, EBADF), QREAD_NOTHING);
}
END_TEST

PC_UNIT_SUITE("engine_grace", "drained", 0, goes_only_after_its_verdict_and_a_drained_read,
	      fast_promotions_do_not_fill_the_share, deleted_before_sending, read_kinds)
