/* The queue thread's hold before a read (engine/queue.c,
 * queue_gather_hold_us): only under load, never for a lone packet, never
 * when a full batch says more are queued, and only for as long as a held
 * read gathers enough packets to pay for the latency it adds. */
#include "engine/engine_int.h"
#include "tests/unit/unit.h"

START_TEST(lone_packet_no_hold)
{
	struct qgather g = {0};

	/* a SYN on a quiet guard is read at once: its latency is untouched */
	ck_assert_uint_eq(queue_gather_hold_us(&g, 0, 1000), 0);
	ck_assert_uint_eq(queue_gather_hold_us(&g, 1, 1000), 0);
}
END_TEST

START_TEST(busy_queue_holds_bounded)
{
	/* two or more packets in one read: the next read waits, bounded,
	 * and goes on waiting while the held reads come back large */
	for (size_t n = 2; n < 64; n++) {
		struct qgather g = {0};

		ck_assert_uint_gt(queue_gather_hold_us(&g, n, 1000), 0);
		ck_assert_uint_le(queue_gather_hold_us(&g, n, 1000), 200);
		queue_gather_note(&g, 40, 1000);
		ck_assert_uint_gt(queue_gather_hold_us(&g, n, 1001), 0);
	}
}
END_TEST

START_TEST(full_batch_reads_on)
{
	struct qgather g = {0};

	/* a full batch: more are queued, holding would only add latency */
	ck_assert_uint_eq(queue_gather_hold_us(&g, 64, 1000), 0);
	ck_assert_uint_eq(queue_gather_hold_us(&g, 1000, 1000), 0);
}
END_TEST

START_TEST(hold_that_gathers_little_stops)
{
	struct qgather g = {0};

	/* 16 handshakes in flight: a held read gathers 12, each flow's next
	 * packet waiting on the verdict of its last; holding stops ... */
	ck_assert_uint_gt(queue_gather_hold_us(&g, 12, 1000), 0);
	queue_gather_note(&g, 12, 1000);
	for (uint64_t t = 1000; t < 1100; t++)
		ck_assert_uint_eq(queue_gather_hold_us(&g, 12, t), 0);
	/* ... unheld reads do not count as held ones ... */
	queue_gather_note(&g, 60, 1099);
	ck_assert_uint_eq(queue_gather_hold_us(&g, 12, 1099), 0);
	/* ... it is tried again later for 16 held reads, whatever they
	 * gather, then judged: 12 each, so it stops again ... */
	for (int i = 0; i < 16; i++) {
		ck_assert_uint_gt(queue_gather_hold_us(&g, 12, 1100), 0);
		queue_gather_note(&g, 12, 1100);
	}
	ck_assert_uint_eq(queue_gather_hold_us(&g, 12, 1101), 0);
	/* ... and next time the load is larger: the holding goes on ... */
	for (int i = 0; i < 16; i++) {
		ck_assert_uint_gt(queue_gather_hold_us(&g, 12, 1201), 0);
		queue_gather_note(&g, i < 2 ? 5 : 40, 1201);
	}
	for (int i = 0; i < 20; i++) {
		ck_assert_uint_gt(queue_gather_hold_us(&g, 12, 1202), 0);
		queue_gather_note(&g, 40, 1202);
	}
	/* ... a few small reads among large ones do not stop it ... */
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_gt(queue_gather_hold_us(&g, 12, 1202), 0);
		queue_gather_note(&g, 4, 1202);
	}
	ck_assert_uint_gt(queue_gather_hold_us(&g, 12, 1202), 0);
	/* ... nor do held reads that find nothing keep it going */
	for (int i = 0; i < 16; i++) {
		queue_gather_note(&g, 0, 1202);
		(void)queue_gather_hold_us(&g, 12, 1202);
	}
	queue_gather_note(&g, 0, 1202);
	ck_assert_uint_eq(queue_gather_hold_us(&g, 12, 1203), 0);
}
END_TEST

PC_UNIT_SUITE("engine_gather", "hold", 0, lone_packet_no_hold, busy_queue_holds_bounded,
	      full_batch_reads_on, hold_that_gathers_little_stops)
