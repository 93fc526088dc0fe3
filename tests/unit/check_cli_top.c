/* `portcullis top`'s counting (cli/top_agg.c) and its reading of the
 * daemons' health (cli/top_health.c): rates over the sliding window, the
 * bounded tables under a hostile stream, the Space-Saving guarantee, and
 * the frame. */
#include "cli/cli_int.h"
#include "unit.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NOW_MS 1796000000500ull /* 2026-11-30, half a second into a second */

static struct top_agg A;

static void rec(struct top_agg *a, const char *sb, bool allowed, const char *target, uint64_t t_ms)
{
	struct logrec_brief r;

	memset(&r, 0, sizeof(r));
	r.seq = a->records + 1;
	r.time_ms = t_ms;
	r.action = LOGREC_CONNECT;
	r.verdict = allowed ? LOGREC_ALLOWED : LOGREC_REFUSED;
	snprintf(r.sandbox, sizeof(r.sandbox), "%s", sb);
	snprintf(r.verb, sizeof(r.verb), "CONNECT");
	snprintf(r.target, sizeof(r.target), "%s", target);
	top_agg_add(a, &r, NOW_MS);
}

static const struct top_sandbox *find(const struct top_agg *a, const char *name)
{
	for (size_t i = 0; i < a->n_sb; i++)
		if (strcmp(a->sb[i].name, name) == 0)
			return &a->sb[i];
	return NULL;
}

START_TEST(rates_over_the_window)
{
	const struct top_sandbox *s;
	double al, rf;

	top_agg_init(&A);
	/* 19 allowed and 38 refused inside the window (9.5 s of it) */
	for (int i = 0; i < 19; i++) {
		rec(&A, "agent-1", true, "api.github.test:443", NOW_MS - 500 - (uint64_t)i * 400);
		rec(&A, "agent-1", false, "203.0.113.12:443", NOW_MS - 100 - (uint64_t)i * 400);
		rec(&A, "agent-1", false, "203.0.113.12:443", NOW_MS - 200 - (uint64_t)i * 400);
	}
	/* older than the window: totals only */
	for (int i = 0; i < 100; i++)
		rec(&A, "agent-1", false, "old.test:443", NOW_MS - 60000);
	ck_assert_ptr_nonnull(s = find(&A, "agent-1"));
	top_sandbox_rates(s, NOW_MS, &al, &rf);
	ck_assert_double_eq_tol(al, 19 / 9.5, 1e-9);
	ck_assert_double_eq_tol(rf, 38 / 9.5, 1e-9);
	ck_assert_uint_eq(s->allowed, 19);
	ck_assert_uint_eq(s->refused, 138);
	/* ten seconds later nothing is in the window any more */
	top_sandbox_rates(s, NOW_MS + 10000, &al, &rf);
	ck_assert_double_eq(al, 0);
	ck_assert_double_eq(rf, 0);
}
END_TEST

START_TEST(a_record_from_the_future_counts_now)
{
	const struct top_sandbox *s;
	double al, rf;

	top_agg_init(&A);
	rec(&A, "agent-1", true, "x:1", NOW_MS + 3600000); /* an hour ahead */
	rec(&A, "agent-1", true, "x:1", 0);		   /* no time */
	s = find(&A, "agent-1");
	top_sandbox_rates(s, NOW_MS, &al, &rf);
	ck_assert_double_eq_tol(al, 2 / 9.5, 1e-9);
	/* and it does not stay in the window for an hour */
	top_sandbox_rates(s, NOW_MS + 11000, &al, &rf);
	ck_assert_double_eq(al, 0);
}
END_TEST

START_TEST(sandbox_table_is_bounded)
{
	const struct top_sandbox *rows[TOP_SANDBOXES_MAX + 1];
	char name[32];
	size_t n;

	top_agg_init(&A);
	for (int i = 0; i < 1000; i++) {
		snprintf(name, sizeof(name), "sb-%d", i);
		rec(&A, name, false, "x:1", NOW_MS - 100);
	}
	ck_assert_uint_eq(A.n_sb, TOP_SANDBOXES_MAX);
	ck_assert_uint_eq(A.others.refused, 1000 - TOP_SANDBOXES_MAX);
	n = top_agg_sandboxes(&A, TOP_SORT_TOTAL, NOW_MS, rows, TOP_SANDBOXES_MAX + 1);
	ck_assert_uint_eq(n, TOP_SANDBOXES_MAX + 1);
	ck_assert_ptr_eq(rows[0], &A.others); /* the most refusals: first */
	/* a sandbox seen after the others have gone quiet takes an idle row,
	 * and the idle row's counts are kept in the others' row */
	{
		struct logrec_brief r;
		uint64_t later = NOW_MS + 20000;

		memset(&r, 0, sizeof(r));
		r.verdict = LOGREC_ALLOWED;
		r.time_ms = later;
		snprintf(r.sandbox, sizeof(r.sandbox), "late");
		top_agg_add(&A, &r, later);
		ck_assert_ptr_nonnull(find(&A, "late"));
		ck_assert_uint_eq(A.n_sb, TOP_SANDBOXES_MAX);
		ck_assert_uint_eq(A.others.refused, 1000 - TOP_SANDBOXES_MAX + 1);
	}
}
END_TEST

START_TEST(refused_destinations_space_saving)
{
	const struct top_dest *d[10];
	char name[64];
	uint64_t truth = 0;
	size_t n;

	top_agg_init(&A);
	/* a DNS tunnel: 20,000 distinct names, and among them one destination
	 * refused 1,500 times (more than records / TOP_DEST_MAX: it must be
	 * kept, whatever the order) */
	for (int i = 0; i < 20000; i++) {
		snprintf(name, sizeof(name), "x%05d.paste.evil.test A", i);
		rec(&A, "agent-1", false, name, NOW_MS);
		if (i % 13 == 0 && truth < 1500) {
			rec(&A, "agent-2", false, "203.0.113.12:443", NOW_MS);
			truth++;
		}
	}
	ck_assert_uint_eq(truth, 1500);
	ck_assert_uint_eq(A.n_dest, TOP_DEST_MAX);
	n = top_agg_dests(&A, d, 10);
	ck_assert_uint_eq(n, 10);
	ck_assert_str_eq(d[0]->key, "CONNECT 203.0.113.12:443");
	ck_assert_str_eq(d[0]->sandbox, "agent-2");
	/* count overestimates by at most error */
	ck_assert_uint_ge(d[0]->count, truth);
	ck_assert_uint_le(d[0]->count - d[0]->error, truth);
	for (size_t i = 1; i < n; i++)
		ck_assert_uint_ge(d[i - 1]->count, d[i]->count);
}
END_TEST

START_TEST(a_long_destination_is_cut)
{
	char big[400];
	const struct top_dest *d[1];

	top_agg_init(&A);
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	rec(&A, "agent-1", false, big, NOW_MS);
	ck_assert_uint_eq(top_agg_dests(&A, d, 1), 1);
	ck_assert_uint_eq(strlen(d[0]->key), TOP_DEST_KEY - 1);
}
END_TEST

START_TEST(lines_through_the_log_reader)
{
	static const char *lines[] = {
	    "{\"seq\":1,\"@timestamp\":\"2026-11-30T00:53:20.100Z\",\"event.type\":[\"connection\","
	    "\"denied\"],\"event.action\":\"connect\",\"event.outcome\":\"failure\",\"sandbox\":"
	    "\"agent-1\",\"destination.ip\":\"203.0.113.12\",\"destination.port\":443}",
	    /* the product fields' namespace (issue 18) reads the same */
	    "{\"seq\":2,\"@timestamp\":\"2026-11-30T00:53:20.200Z\",\"event.type\":[\"protocol\","
	    "\"denied\"],\"event.action\":\"dns-query\",\"portcullis.sandbox\":\"agent-1\","
	    "\"dns.question.name\":\"x.evil.test\",\"dns.question.type\":\"A\"}",
	    "{\"seq\":3,\"@timestamp\":\"2026-11-30T00:53:20.300Z\",\"event.type\":[\"connection\","
	    "\"allowed\"],\"event.action\":\"connect\",\"sandbox\":\"agent-1\"}",
	    "{\"seq\":4,\"@timestamp\":\"2026-11-30T00:53:20.300Z\",\"event.type\":[\"info\"],"
	    "\"event.action\":\"dns-learn\",\"sandbox\":\"agent-1\"}",
	    "{\"checkpoint\":\"x\"}",
	    "not json",
	};
	const struct top_dest *d[4];
	const struct top_sandbox *s;

	top_agg_init(&A);
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
		top_agg_line(&A, lines[i], strlen(lines[i]), NOW_MS);
	ck_assert_uint_eq(A.lines, 6);
	ck_assert_uint_eq(A.records, 4);
	ck_assert_uint_eq(A.verdicts, 3);
	ck_assert_uint_eq(A.not_understood, 1);
	ck_assert_uint_eq(A.last_seq, 4);
	ck_assert_ptr_nonnull(s = find(&A, "agent-1"));
	ck_assert_uint_eq(s->refused, 2);
	ck_assert_uint_eq(s->allowed, 1);
	ck_assert_uint_eq(top_agg_dests(&A, d, 4), 2);
	ck_assert_uint_eq(A.first_ms, 1796000000100ull);
}
END_TEST

START_TEST(engine_status_and_logd_metrics)
{
	static const char status[] =
	    "{\"ok\":true,\"version\":\"0.1.0\",\"pid\":7,\"uptime_s\":3725,\"policy\":"
	    "\"sha256:abcd\",\"queue_path\":\"x\",\"queues\":[{\"num\":100,\"queued\":10,"
	    "\"accepted\":1,\"refused\":2,\"kernel_dropped\":3,\"user_dropped\":4,\"enobufs\":5},"
	    "{\"num\":101,\"queued\":20,\"accepted\":1,\"refused\":2,\"kernel_dropped\":30,"
	    "\"user_dropped\":40,\"enobufs\":50}],\"flows\":6,\"held\":2,\"log\":{\"sent\":99,"
	    "\"failed\":1},\"dnsguard\":{\"queries_allowed\":1},\"limits\":[{\"sandbox\":\"a\"}],"
	    "\"check\":{\"result\":\"proven\",\"runs\":2,\"running\":false,\"findings\":0,"
	    "\"first\":\"x\\\"y\"}}";
	static const char metrics[] = "# HELP portcullis_logd_records_total R.\n"
				      "# TYPE portcullis_logd_records_total counter\n"
				      "portcullis_logd_records_total 1234\n"
				      "portcullis_logd_write_errors_total 2\n"
				      "portcullis_logd_unsealed_records 7\n"
				      "portcullis_logd_clients 3\n"
				      "portcullis_logd_last_checkpoint_age_seconds 1.500\n";
	struct top_health h;

	memset(&h, 0, sizeof(h));
	ck_assert_int_eq(top_health_engine(status, strlen(status), &h), 0);
	ck_assert(h.engine_up);
	ck_assert_str_eq(h.policy, "sha256:abcd");
	ck_assert_str_eq(h.check, "proven");
	ck_assert_uint_eq(h.uptime_s, 3725);
	ck_assert_uint_eq(h.queued, 30);
	ck_assert_uint_eq(h.kernel_dropped, 33);
	ck_assert_uint_eq(h.user_dropped, 44);
	ck_assert_uint_eq(h.enobufs, 55);
	ck_assert_uint_eq(h.flows, 6);
	ck_assert_uint_eq(h.held, 2);
	ck_assert_uint_eq(h.log_sent, 99);
	ck_assert_uint_eq(h.log_failed, 1);
	ck_assert_int_eq(top_health_logd(metrics, strlen(metrics), &h), 0);
	ck_assert(h.logd_up);
	ck_assert_uint_eq(h.logd_records, 1234);
	ck_assert_uint_eq(h.logd_write_errors, 2);
	ck_assert_uint_eq(h.logd_unsealed, 7);
	ck_assert_uint_eq(h.logd_clients, 3);
	ck_assert_double_eq_tol(h.logd_checkpoint_age, 1.5, 1e-9);

	/* what is not the status is refused, nested past the depth limit too */
	memset(&h, 0, sizeof(h));
	ck_assert_int_lt(top_health_engine("{\"a\":", 5, &h), 0);
	ck_assert_int_lt(top_health_engine("[1]", 3, &h), 0);
	ck_assert_int_lt(top_health_engine("{\"a\":[[[[[[[[[[1]]]]]]]]]]}", 26, &h), 0);
	ck_assert_int_lt(top_health_engine("{\"a\":1} x", 9, &h), 0);
	ck_assert(!h.engine_up);
	ck_assert_int_lt(top_health_logd("", 0, &h), 0);
}
END_TEST

START_TEST(frame_text)
{
	struct top_health h, prev;
	struct pc_buf b;
	const char *p;

	top_agg_init(&A);
	for (int i = 0; i < 5; i++)
		rec(&A, "agent-1", false, "203.0.113.12:443", NOW_MS - 1000);
	rec(&A, "agent-1", true, "api.github.test:443", NOW_MS - 1000);
	memset(&h, 0, sizeof(h));
	h.engine_up = h.logd_up = true;
	snprintf(h.check, sizeof(h.check), "proven");
	h.kernel_dropped = 30;
	h.at_ms = 3000;
	h.logd_checkpoint_age = 2;
	prev = h;
	prev.kernel_dropped = 10;
	prev.at_ms = 1000;
	pc_buf_init(&b, 0, 0);
	top_render(&b, &A, &h, &prev, TOP_SORT_TOTAL, NOW_MS, 100, 40);
	p = pc_buf_str(&b);
	ck_assert_ptr_nonnull(strstr(p, "check proven"));
	ck_assert_ptr_nonnull(strstr(p, "\nagent-1 "));
	ck_assert_ptr_nonnull(strstr(p, "      5  CONNECT 203.0.113.12:443"));
	ck_assert_ptr_nonnull(strstr(p, "kernel drops 30 (10.0/s)"));
	ck_assert_ptr_nonnull(strstr(p, "checkpoint 2.0 s ago"));
	/* no line wider than the screen */
	for (const char *l = p; *l; l += strcspn(l, "\n") + 1)
		ck_assert_uint_le(strcspn(l, "\n"), 100);
	pc_buf_free(&b);

	/* a daemon that did not answer is said, with its reason */
	h.engine_up = false;
	snprintf(h.engine_error, sizeof(h.engine_error), "connection refused");
	top_render(&b, &A, &h, NULL, TOP_SORT_NAME, NOW_MS, 0, 0);
	ck_assert_ptr_nonnull(strstr(pc_buf_str(&b), "engine: not answering: connection refused"));
	pc_buf_free(&b);
}
END_TEST

PC_UNIT_SUITE("top", "top", 30, rates_over_the_window, a_record_from_the_future_counts_now,
	      sandbox_table_is_bounded, refused_destinations_space_saving,
	      a_long_destination_is_cut, lines_through_the_log_reader,
	      engine_status_and_logd_metrics, frame_text)
