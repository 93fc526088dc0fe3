/* portcullis.dns.ttl (issue 35): an answer's record says how long the
 * guard keeps what it learned, so that `portcullis log audit` can tell a
 * connect to an expired address from an allowed one. It crosses the wire
 * (tag 24, four bytes, never zero), reaches the JSON line as a number under
 * portcullis.*, and a record without it encodes as before (old senders,
 * the golden bytes). */
#include "logd/logd_int.h"
#include "tests/unit/unit.h"

#include <netinet/in.h>
#include <string.h>

static void learn_rec(struct logrec *r, uint32_t ttl)
{
	memset(r, 0, sizeof(*r));
	r->action = LOGREC_DNS_LEARN;
	r->sandbox = "agent-1";
	r->reason = "answer released, addresses learned";
	r->transport = IPPROTO_UDP;
	r->dns_name = "api.example";
	r->dns_type = 1;
	r->dns_answers = "203.0.113.10";
	r->dns_ttl = ttl;
}

START_TEST(ttl_crosses_the_wire_and_reaches_the_line)
{
	struct logrec r;
	struct logrec_decoded d;
	struct pc_err err = {0};
	uint8_t buf[LOGWIRE_MAX], prev[32] = {0};
	static char line[LOGREC_JSON_MAX];
	int n;

	learn_rec(&r, 300);
	n = logrec_encode(&r, buf, sizeof(buf), &err);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(logrec_decode(buf, (size_t)n, &d, &err), 0);
	ck_assert_uint_eq(d.rec.dns_ttl, 300);
	ck_assert_int_gt(logrec_json_format(&d.rec, 7, 0, prev, NULL, line, sizeof(line)), 0);
	ck_assert_ptr_nonnull(strstr(line, ",\"portcullis.dns.ttl\":300,"));
	logrec_decoded_free(&d);
}
END_TEST

START_TEST(no_ttl_no_field_and_the_bytes_of_before)
{
	struct logrec r;
	struct pc_err err = {0};
	uint8_t a[LOGWIRE_MAX], b[LOGWIRE_MAX], prev[32] = {0};
	static char line[LOGREC_JSON_MAX];
	int n, m;

	learn_rec(&r, 0);
	n = logrec_encode(&r, a, sizeof(a), &err);
	ck_assert_int_gt(n, 0);
	ck_assert_int_gt(logrec_json_format(&r, 7, 0, prev, NULL, line, sizeof(line)), 0);
	ck_assert_ptr_null(strstr(line, "dns.ttl"));
	/* the field is the last one: with it, the same bytes and one more field: tag, length, 4
	 * bytes */
	learn_rec(&r, 60);
	m = logrec_encode(&r, b, sizeof(b), &err);
	ck_assert_int_eq(m, n + 7);
	ck_assert_mem_eq(a + 8, b + 8, (size_t)n - 8);
}
END_TEST

START_TEST(zero_ttl_on_the_wire_is_refused)
{
	struct logrec r;
	struct logrec_decoded d;
	struct pc_err err = {0};
	uint8_t buf[LOGWIRE_MAX];
	int n;

	learn_rec(&r, 1);
	n = logrec_encode(&r, buf, sizeof(buf), &err);
	ck_assert_int_gt(n, 0);
	memset(buf + n - 4, 0, 4); /* the value of the last field */
	ck_assert_int_lt(logrec_decode(buf, (size_t)n, &d, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "is zero"));
}
END_TEST

PC_UNIT_SUITE("logd_dnsttl", "dnsttl", 0, ttl_crosses_the_wire_and_reaches_the_line,
	      no_ttl_no_field_and_the_bytes_of_before, zero_ttl_on_the_wire_is_refused)
