/* The facts `portcullis log audit` judges a refused held flow and a quota
 * refusal by (issue 35; docs/logd.md, "Audit"): what the held flow's
 * bytes were (portcullis.held.bytes, tag 25: one of logd's held-flow
 * classes, any other word refused), how long it had been held
 * (portcullis.held.ms, tag 26) and the share that was full
 * (portcullis.quota, tag 27; both never zero). They cross the wire, reach
 * the JSON line, and a record without them encodes as before. */
#include "logd/logd_int.h"
#include "tests/unit/unit.h"

#include <netinet/in.h>
#include <string.h>

static void held_rec(struct logrec *r, const char *cls, uint32_t ms, uint32_t quota)
{
	memset(r, 0, sizeof(*r));
	r->action = LOGREC_CONNECT;
	r->verdict = LOGREC_REFUSED;
	r->sandbox = "agent-1";
	r->reason = "no TLS ClientHello within engine.sni_timeout_ms";
	r->transport = IPPROTO_TCP;
	r->held_bytes = cls;
	r->held_ms = ms;
	r->quota = quota;
}

START_TEST(held_facts_cross_the_wire_and_reach_the_line)
{
	struct logrec r;
	struct logrec_decoded d;
	struct pc_err err = {0};
	uint8_t buf[LOGWIRE_MAX], prev[32] = {0};
	static char line[LOGREC_JSON_MAX];
	int n;

	held_rec(&r, "timeout", 3012, 8);
	n = logrec_encode(&r, buf, sizeof(buf), &err);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(logrec_decode(buf, (size_t)n, &d, &err), 0);
	ck_assert_str_eq(d.rec.held_bytes, "timeout");
	ck_assert_uint_eq(d.rec.held_ms, 3012);
	ck_assert_uint_eq(d.rec.quota, 8);
	ck_assert_int_gt(logrec_json_format(&d.rec, 7, 0, prev, NULL, line, sizeof(line)), 0);
	ck_assert_ptr_nonnull(strstr(line, ",\"portcullis.held.bytes\":\"timeout\","));
	ck_assert_ptr_nonnull(strstr(line, ",\"portcullis.held.ms\":3012,"));
	ck_assert_ptr_nonnull(strstr(line, ",\"portcullis.quota\":8,"));
	logrec_decoded_free(&d);
}
END_TEST

START_TEST(without_them_the_bytes_of_before)
{
	struct logrec r;
	struct pc_err err = {0};
	uint8_t a[LOGWIRE_MAX], prev[32] = {0};
	static char line[LOGREC_JSON_MAX];

	held_rec(&r, NULL, 0, 0);
	ck_assert_int_gt(logrec_encode(&r, a, sizeof(a), &err), 0);
	ck_assert_int_gt(logrec_json_format(&r, 7, 0, prev, NULL, line, sizeof(line)), 0);
	ck_assert_ptr_null(strstr(line, "portcullis.held"));
	ck_assert_ptr_null(strstr(line, "portcullis.quota"));
}
END_TEST

START_TEST(an_unknown_class_is_refused)
{
	struct logrec r;
	struct logrec_decoded d;
	struct pc_err err = {0};
	uint8_t buf[LOGWIRE_MAX];
	int n;

	for (int i = 0; i < LOGREC_HELD_CLASSES; i++)
		ck_assert_int_eq(logrec_held_index(logrec_held_names[i]), i);
	held_rec(&r, "timeoux", 1, 0);
	n = logrec_encode(&r, buf, sizeof(buf), &err);
	ck_assert_int_gt(n, 0);
	ck_assert_int_lt(logrec_decode(buf, (size_t)n, &d, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "held-flow class"));
}
END_TEST

PC_UNIT_SUITE("logd_heldfacts", "heldfacts", 0, held_facts_cross_the_wire_and_reach_the_line,
	      without_them_the_bytes_of_before, an_unknown_class_is_refused)
