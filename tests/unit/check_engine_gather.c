/* The queue thread's hold before a read (engine/queue.c,
 * queue_gather_hold_us): only under load, never for a lone packet, never
 * when a full batch says more are queued. */
#include "engine/engine_int.h"
#include "tests/unit/unit.h"

START_TEST(lone_packet_no_hold)
{
	/* a SYN on a quiet guard is read at once: its latency is untouched */
	ck_assert_uint_eq(queue_gather_hold_us(0), 0);
	ck_assert_uint_eq(queue_gather_hold_us(1), 0);
}
END_TEST

START_TEST(busy_queue_holds_bounded)
{
	/* two or more packets in one read: the next read waits, bounded */
	for (size_t n = 2; n < 64; n++) {
		ck_assert_uint_gt(queue_gather_hold_us(n), 0);
		ck_assert_uint_le(queue_gather_hold_us(n), 200);
	}
}
END_TEST

START_TEST(full_batch_reads_on)
{
	/* a full batch: more are queued, holding would only add latency */
	ck_assert_uint_eq(queue_gather_hold_us(64), 0);
	ck_assert_uint_eq(queue_gather_hold_us(1000), 0);
}
END_TEST

PC_UNIT_SUITE("engine_gather", "hold", 0, lone_packet_no_hold, busy_queue_holds_bounded,
	      full_batch_reads_on)
