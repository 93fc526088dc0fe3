/* Unit tests for common/log.c's stderr convention, the same for every
 * daemon: "<N>" priority prefixes only when stderr is the journal
 * ($JOURNAL_STREAM names stderr's device and inode), plain "prog: text"
 * on a file, a pipe or a terminal. logd and the vault once printed "<3>"
 * on a redirected stderr. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/pc.h"
#include "tests/unit/unit.h"

/* What one pc_log line looks like with stderr on a fresh file and
 * JOURNAL_STREAM as env says: NULL (unset), or a format given the file's
 * own device and inode ("%ju:%ju" names that very file). */
static void logged(const char *env, char *out, size_t len)
{
	char path[] = "/tmp/pc-log-XXXXXX", val[64];
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	struct stat st;
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	fflush(stderr);
	ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
	if (!env)
		unsetenv("JOURNAL_STREAM");
	else {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		snprintf(val, sizeof(val), env, (uintmax_t)st.st_dev, (uintmax_t)st.st_ino);
#pragma GCC diagnostic pop
		setenv("JOURNAL_STREAM", val, 1);
	}
	pc_log_init("pc-test", PC_LOG_INFO);
	pc_log(PC_LOG_ERR, "disk on fire");
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	unsetenv("JOURNAL_STREAM");
	n = pread(fd, out, len - 1, 0);
	ck_assert_int_ge(n, 0);
	out[n] = '\0';
	close(fd);
	unlink(path);
}

START_TEST(plain_on_a_file)
{
	char out[256];

	logged(NULL, out, sizeof(out));
	ck_assert_str_eq(out, "pc-test: disk on fire\n");
}
END_TEST

START_TEST(prefix_when_stderr_is_the_journal)
{
	char out[256];

	logged("%ju:%ju", out, sizeof(out));
	ck_assert_str_eq(out, "<3>pc-test: disk on fire\n");
}
END_TEST

/* The variable is inherited: a child of a unit whose stderr was
 * redirected still has it, naming another stream. */
START_TEST(plain_when_journal_stream_names_another_stream)
{
	char out[256];

	logged("1:2", out, sizeof(out));
	ck_assert_str_eq(out, "pc-test: disk on fire\n");
	logged("", out, sizeof(out));
	ck_assert_str_eq(out, "pc-test: disk on fire\n");
	logged("garbage", out, sizeof(out));
	ck_assert_str_eq(out, "pc-test: disk on fire\n");
}
END_TEST

/* Only the exact "DEV:INODE" of stderr counts. */
START_TEST(plain_when_journal_stream_is_malformed)
{
	static const char *const bad[] = {"%ju:%juX", "%ju:", ":%ju", "%ju %ju", "x%ju:%ju"};
	char out[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		logged(bad[i], out, sizeof(out));
		ck_assert_str_eq(out, "pc-test: disk on fire\n");
	}
}
END_TEST

PC_UNIT_SUITE("common_log", "stderr", 0, plain_on_a_file, prefix_when_stderr_is_the_journal,
	      plain_when_journal_stream_names_another_stream,
	      plain_when_journal_stream_is_malformed)
