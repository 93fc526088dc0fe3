/* `portcullis log verify FILE` without --key on a machine without the
 * gateway's configuration (an auditor's workstation with a copy of the
 * log): the error says to give --key, not that
 * /etc/portcullis/portcullis.yaml is missing. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logd/logd.h"
#include "tests/unit/unit.h"

/* logd_cli's exit status, and what it wrote on fd (1 or 2) in out. */
static int run(char **argv, int argc, const char *config, int fd, char *out, size_t len)
{
	char path[] = "/tmp/pc-verifykey-XXXXXX";
	int tmp = mkstemp(path), saved = dup(fd), saved2 = dup(2), rc,
	    null = open("/dev/null", O_WRONLY);
	ssize_t n;

	ck_assert_int_ge(tmp, 0);
	fflush(stdout);
	fflush(stderr);
	dup2(null, 2); /* the other stream: not the test's output */
	dup2(tmp, fd);
	rc = logd_cli(argc, argv, config);
	fflush(stdout);
	fflush(stderr);
	dup2(saved, fd);
	dup2(saved2, 2);
	close(saved);
	close(saved2);
	close(null);
	n = pread(tmp, out, len - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	close(tmp);
	unlink(path);
	return rc;
}

START_TEST(without_configuration_says_give_key)
{
	char *argv[] = {"log", "verify", "/tmp/pc-verifykey-copy.jsonl", NULL};
	char out[2048];
	int rc = run(argv, 3, "/nonexistent/etc/portcullis/portcullis.yaml", 2, out, sizeof(out));

	ck_assert_int_eq(rc, 3);
	ck_assert_msg(strstr(out,
			     "portcullis: log: no public key to check the log with: give --key "
			     "PUB") != NULL,
		      "%s", out);
	ck_assert_msg(strstr(out, "/nonexistent/etc/portcullis/portcullis.yaml does not exist"),
		      "%s", out);
}
END_TEST

START_TEST(without_configuration_json_says_give_key)
{
	char *argv[] = {"log", "verify", "/tmp/pc-verifykey-copy.jsonl", "--json", NULL};
	char out[4096];
	int rc = run(argv, 4, "/nonexistent/portcullis.yaml", 1, out, sizeof(out));

	ck_assert_int_eq(rc, 3);
	ck_assert_msg(strstr(out, "\"ok\":false") && strstr(out, "give --key PUB"), "%s", out);
}
END_TEST

PC_UNIT_SUITE("logd_verifykey", "key", 0, without_configuration_says_give_key,
	      without_configuration_json_says_give_key)
