/* Daemon logging to stderr with sd-daemon "<N>" level prefixes, so journald
 * keeps levels; on a terminal the prefix is left out (an admin running a
 * daemon in the foreground reads words, not "<5>"). */
#include "common/pc.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Written once by pc_log_init before any thread starts; read-only after. */
static const char *log_prog = "portcullis";
static enum pc_loglevel log_max = PC_LOG_INFO;
static bool log_tty;

void pc_log_init(const char *prog, enum pc_loglevel max)
{
	log_prog = prog;
	log_max = max;
	log_tty = isatty(STDERR_FILENO) == 1;
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
	if (log_tty)
		n = snprintf(line, sizeof(line), "%s: ", log_prog);
	else
		n = snprintf(line, sizeof(line), "<%d>%s: ", (int)lvl, log_prog);
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
