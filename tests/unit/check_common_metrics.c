/* Unit tests of the metrics pieces: the engine's reason labels (bounded,
 * whatever the record's text), the Prometheus text helpers, and the control
 * socket thread the vault and logd serve them on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/engine_int.h"
#include "common/pc.h"
#include "unit.h"

START_TEST(reasons_map_to_fixed_labels)
{
	static const struct {
		const char *reason, *label;
	} cases[] = {
	    {"allowed address", "cidr"},
	    {"allowed host; secret-bound, through the vault", "vault"},
	    {"allowed host; TLS server name checked", "server_name"},
	    {"name allowed", "dns_name"},
	    {"not on the allow list", "not_allowed"},
	    {"no allowed name resolved to this address", "not_resolved"},
	    {"TLS server name evil.test is not a name this sandbox resolved to this address "
	     "and may use on this port",
	     "server_name"},
	    {"name not on the allow list", "dns_name_not_allowed"},
	    {"query type not permitted", "dns_type"},
	    {"ICMP is never allowed", "protocol"},
	    {"SCTP is never allowed", "protocol"},
	    {"packet from an unknown bridge port", "unknown_port"},
	    {"internal error: out of memory", "internal_error"},
	    {"something new a later version says", "other"},
	    {"", "other"},
	    {NULL, "other"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(strcmp(metrics_reason_label(cases[i].reason), cases[i].label) == 0,
			      "'%s' -> %s, expected %s",
			      cases[i].reason ? cases[i].reason : "(null)",
			      metrics_reason_label(cases[i].reason), cases[i].label);
	/* every label index fits the counters */
	ck_assert_int_lt(metrics_reason("ICMP is never allowed"), MET_REASONS);
	ck_assert_int_lt(metrics_reason("x"), MET_REASONS);
}
END_TEST

START_TEST(prom_text_and_label_escapes)
{
	struct pc_prom b = {0};
	char l[64], lab[128], *t;

	pc_prom_family(&b, "x_total", "counter", "Things.");
	snprintf(lab, sizeof(lab), "name=\"%s\"", pc_prom_label("a\"b\\c\nd", l, sizeof(l)));
	pc_prom_u64(&b, "x_total", lab, 18446744073709551615ULL);
	pc_prom_u64(&b, "x_total", NULL, 0);
	pc_prom_f64(&b, "x_total", "", 1.5);
	t = pc_prom_take(&b);
	ck_assert_ptr_nonnull(t);
	ck_assert_str_eq(t, "# HELP x_total Things.\n# TYPE x_total counter\n"
			    "x_total{name=\"a\\\"b\\\\c\\nd\"} 18446744073709551615\n"
			    "x_total 0\nx_total 1.500\n");
	free(t);
	t = pc_prom_take(&b); /* empty */
	ck_assert_str_eq(t, "");
	free(t);
	/* a label value longer than the buffer is cut, never overflowed */
	ck_assert_uint_lt(strlen(pc_prom_label("\"\"\"\"\"\"\"\"\"\"", l, 8)), 8);
}
END_TEST

START_TEST(prom_one_sample_family)
{
	struct pc_prom b = {0};
	char *t;

	pc_prom_one_u64(&b, "a_total", "counter", "As.", 7);
	pc_prom_one_f64(&b, "b_seconds", "gauge", "Bs.", 0.25);
	t = pc_prom_take(&b);
	ck_assert_ptr_nonnull(t);
	ck_assert_str_eq(t, "# HELP a_total As.\n# TYPE a_total counter\na_total 7\n"
			    "# HELP b_seconds Bs.\n# TYPE b_seconds gauge\nb_seconds 0.250\n");
	free(t);
}
END_TEST

static char *answer(void *ctx, const char *req)
{
	(*(int *)ctx)++;
	return strcmp(req, "metrics") == 0 ? strdup("# HELP m x\n") : NULL;
}

static char *ask(const char *path, const char *req)
{
	struct pc_err err = {0};
	char buf[256];
	int fd = pc_unix_connect(path, 0, &err);
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(send(fd, req, strlen(req), 0), 0);
	n = recv(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	return strdup(buf);
}

START_TEST(control_socket_thread_answers_one_request)
{
	char dir[] = "/tmp/ckctlXXXXXX", path[64], *r;
	struct pc_err err = {0};
	struct pc_ctl *c = NULL;
	int calls = 0, fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/x.sock", dir);
	fd = pc_unix_listen(path, 0600, (uid_t)-1, (gid_t)-1, &err);
	ck_assert_int_ge(fd, 0);
	/* root_only: the tests run as root; the file mode keeps others out */
	ck_assert_int_eq(pc_ctl_start(fd, getuid() == 0, answer, &calls, &c, &err), 0);
	r = ask(path, "metrics\n");
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r, "# HELP m x\n");
	free(r);
	r = ask(path, "other");
	ck_assert_ptr_null(r); /* no reply: the connection is closed */
	ck_assert_int_eq(calls, 2);
	pc_ctl_stop(c);
	unlink(path);
	rmdir(dir);
}
END_TEST

PC_UNIT_SUITE("metrics", "metrics", 0, reasons_map_to_fixed_labels, prom_text_and_label_escapes,
	      prom_one_sample_family, control_socket_thread_answers_one_request)
