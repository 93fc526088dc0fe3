/* Daemon logging to stderr, one convention for every daemon: sd-daemon
 * "<N>" level prefixes only when stderr is the journal, so journald keeps
 * levels; anywhere else (a terminal, a file, a pipe to a test or to
 * another logger) plain text, which a "<5>" would only clutter. */
#include "common/pc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Written once by pc_log_init before any thread starts; read-only after. */
static const char *log_prog = "portcullis";
static enum pc_loglevel log_max = PC_LOG_INFO;
static bool log_journal;

/* systemd sets JOURNAL_STREAM to "DEV:INODE" of the stream it connected
 * stderr to; the variable is inherited, so it counts only while stderr is
 * still that stream (a child whose stderr was redirected is not). */
bool pc_log_stderr_is_journal(void)
{
	const char *v = getenv("JOURNAL_STREAM");
	uintmax_t dev, ino;
	struct stat st;
	char *end;

	if (!v || !*v || fstat(STDERR_FILENO, &st) < 0)
		return false;
	dev = strtoumax(v, &end, 10);
	if (end == v || *end != ':')
		return false;
	v = end + 1;
	ino = strtoumax(v, &end, 10);
	if (end == v || *end != '\0')
		return false;
	return dev == (uintmax_t)st.st_dev && ino == (uintmax_t)st.st_ino;
}

void pc_log_init(const char *prog, enum pc_loglevel max)
{
	log_prog = prog;
	log_max = max;
	log_journal = pc_log_stderr_is_journal();
}

static void pc_vlog(enum pc_loglevel lvl, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void pc_vlog(enum pc_loglevel lvl, const char *fmt, va_list ap)
{
	char line[1024];
	size_t len;
	int n;

	if (lvl > log_max)
		return;
	if (log_journal)
		n = snprintf(line, sizeof(line), "<%d>%s: ", (int)lvl, log_prog);
	else
		n = snprintf(line, sizeof(line), "%s: ", log_prog);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	len = strlen(line);
	if (len == sizeof(line) - 1)
		len--; /* a truncated line still ends in a newline */
	line[len++] = '\n';
	line[len] = '\0';
	/* One fputs per line keeps lines from different threads whole. */
	fputs(line, stderr);
}

void pc_log(enum pc_loglevel lvl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	pc_vlog(lvl, fmt, ap);
	va_end(ap);
}

void pc_cli_error(const char *what, const char *fmt, ...)
{
	char why[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	fprintf(stderr, "portcullis: %s: %s\n", what, why);
}
