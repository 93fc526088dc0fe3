/* Unit tests of issue 18's observability pieces (ad-guard): the merge of
 * the daemons' expositions (common/prom.c: process_* grouped, labelled),
 * process_* from /proc, and the HTTP /metrics request parser
 * (engine/httpmetrics.c: whole, partial, malformed, over the limit). */
#include "engine/engine_int.h"
#include "tests/unit/unit.h"

#include <stdlib.h>
#include <string.h>

static int parse(const char *s, struct httpm_req *r)
{
	return httpm_request_parse((const uint8_t *)s, strlen(s), r);
}

START_TEST(merge_groups_shared_families)
{
	char *t[3] = {strdup("# HELP a_x x.\n# TYPE a_x counter\na_x 1\n"
			     "# HELP process_open_fds Number of open file descriptors.\n"
			     "# TYPE process_open_fds gauge\nprocess_open_fds 7\n"),
		      NULL,
		      strdup("# HELP process_open_fds Number of open file descriptors.\n"
			     "# TYPE process_open_fds gauge\nprocess_open_fds 9\n"
			     "# HELP c_y y.\n# TYPE c_y gauge\nc_y{k=\"v\"} 2\n")};
	static const char *const lab[3] = {"daemon=\"engine\"", "daemon=\"vault\"",
					   "daemon=\"logd\""};
	char *m = pc_prom_merge(t, lab, 3);

	ck_assert_ptr_nonnull(m);
	ck_assert_str_eq(m, "# HELP a_x x.\n# TYPE a_x counter\na_x 1\n"
			    "# HELP process_open_fds Number of open file descriptors.\n"
			    "# TYPE process_open_fds gauge\n"
			    "process_open_fds{daemon=\"engine\"} 7\n"
			    "process_open_fds{daemon=\"logd\"} 9\n"
			    "# HELP c_y y.\n# TYPE c_y gauge\nc_y{k=\"v\"} 2\n");
	free(m);
	free(t[0]);
	free(t[2]);
}
END_TEST

START_TEST(merge_labels_labelled_samples)
{
	char *t[2] = {strdup("# HELP f h.\n# TYPE f gauge\nf{a=\"1\"} 1\n"),
		      strdup("# HELP f h.\n# TYPE f gauge\nf{a=\"2\"} 2\n")};
	static const char *const lab[2] = {"d=\"e\"", "d=\"v\""};
	char *m = pc_prom_merge(t, lab, 2);

	ck_assert_str_eq(
	    m, "# HELP f h.\n# TYPE f gauge\nf{d=\"e\",a=\"1\"} 1\nf{d=\"v\",a=\"2\"} 2\n");
	free(m);
	free(t[0]);
	free(t[1]);
}
END_TEST

START_TEST(process_families_present)
{
	struct pc_prom b = {0};
	char *t;

	pc_prom_process(&b);
	t = pc_prom_take(&b);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_nonnull(strstr(t, "\nprocess_cpu_seconds_total "));
	ck_assert_ptr_nonnull(strstr(t, "# TYPE process_cpu_seconds_total counter\n"));
	ck_assert_ptr_nonnull(strstr(t, "\nprocess_resident_memory_bytes "));
	ck_assert_ptr_nonnull(strstr(t, "\nprocess_open_fds "));
	ck_assert_ptr_nonnull(strstr(t, "\nprocess_start_time_seconds "));
	ck_assert_ptr_null(strstr(t, "process_resident_memory_bytes 0\n"));
	free(t);
}
END_TEST

START_TEST(http_request_parse_cases)
{
	struct httpm_req r;
	char big[HTTPM_REQ_MAX + 16];

	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &r), 34);
	ck_assert_str_eq(r.method, "GET");
	ck_assert_str_eq(r.target, "/metrics");
	ck_assert_int_gt(parse("HEAD /metrics?a=b HTTP/1.0\r\n\r\n", &r), 0);
	ck_assert_str_eq(r.target, "/metrics?a=b");
	/* not whole yet */
	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\r\nHost: x\r\n", &r), 0);
	ck_assert_int_eq(parse("", &r), 0);
	/* malformed */
	ck_assert_int_eq(parse("GET metrics HTTP/1.1\r\n\r\n", &r), PC_EPARSE);
	ck_assert_int_eq(parse("get /metrics HTTP/1.1\r\n\r\n", &r), PC_EPARSE);
	ck_assert_int_eq(parse("GET /metrics HTTP/2.0\r\n\r\n", &r), PC_EPARSE);
	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\r\nNoColon\r\n\r\n", &r), PC_EPARSE);
	ck_assert_int_eq(parse("GET /metrics HTTP/1.1\r\nA: b\nc\r\n\r\n", &r), PC_EPARSE);
	ck_assert_int_eq(parse("GET  /metrics HTTP/1.1\r\n\r\n", &r), PC_EPARSE);
	/* no end within the limit */
	memset(big, 'A', sizeof(big));
	ck_assert_int_eq(httpm_request_parse((const uint8_t *)big, sizeof(big), &r), PC_EPARSE);
}
END_TEST

PC_UNIT_SUITE("metrics_http", "core", 0, merge_groups_shared_families,
	      merge_labels_labelled_samples, process_families_present, http_request_parse_cases)
