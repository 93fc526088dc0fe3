/* `portcullis log show`'s line (logrec_human, logd/show.c) names the date,
 * the time and the sandbox of each record: a log spans days (logrotate
 * keeps weeks), so a time alone was ambiguous, and without the sandbox a
 * reader of a gateway of many sandboxes could not tell whose verdict a
 * line was without --json. */
#include "logd/logd_int.h"
#include "unit.h"

#include <string.h>

static const char *human(const char *line)
{
	static char out[2048];

	ck_assert_int_gt(logrec_human(line, strlen(line), out, sizeof(out)), 0);
	return out;
}

START_TEST(date_time_and_sandbox)
{
	ck_assert_str_eq(
	    human("{\"@timestamp\":\"2026-12-01T14:02:13.123Z\",\"event.sequence\":4128,"
		  "\"event.action\":\"connect\",\"event.type\":[\"connection\",\"denied\"],"
		  "\"event.reason\":\"not on the allow list\",\"portcullis.sandbox\":\"agent-1\","
		  "\"destination.domain\":\"paste.example\",\"destination.port\":443}"),
	    "#4128 2026-12-01 14:02:13Z agent-1 refused CONNECT paste.example:443 (not on the "
	    "allow list)");
	/* a log of earlier releases: "sandbox", "seq" */
	ck_assert_str_eq(human("{\"seq\":7,\"@timestamp\":\"2025-01-31T23:59:59.999Z\","
			       "\"event.action\":\"dns-query\",\"event.type\":[\"allowed\"],"
			       "\"sandbox\":\"agent-2\",\"dns.question.name\":\"api.test\","
			       "\"dns.question.type\":\"A\"}"),
			 "#7 2025-01-31 23:59:59Z agent-2 allowed DNS api.test A");
}
END_TEST

/* A record of no sandbox (the log's own) keeps its columns: "-". */
START_TEST(no_sandbox_is_a_dash)
{
	ck_assert_str_eq(
	    human("{\"@timestamp\":\"2026-12-01T00:00:00.000Z\",\"event.sequence\":1,"
		  "\"event.action\":\"log-segment\",\"message\":\"segment 3 begins\"}"),
	    "#1 2026-12-01 00:00:00Z - LOG-SEGMENT segment 3 begins");
}
END_TEST

/* A timestamp of another shape is not cut into a wrong date. */
START_TEST(odd_timestamp_shows_question_marks)
{
	ck_assert_str_eq(human("{\"@timestamp\":\"yesterday\",\"event.sequence\":2,"
			       "\"event.action\":\"connect\",\"event.type\":[\"allowed\"],"
			       "\"portcullis.sandbox\":\"a\",\"destination.ip\":\"192.0.2.1\","
			       "\"destination.port\":80}"),
			 "#2 \?\?\?\?-\?\?-\?\? \?\?:\?\?:\?\?Z a allowed CONNECT 192.0.2.1:80");
}
END_TEST

PC_UNIT_SUITE("logd_show", "human", 0, date_time_and_sandbox, no_sandbox_is_a_dash,
	      odd_timestamp_shows_question_marks)
