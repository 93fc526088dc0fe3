/* The one error convention: a code plus a message with an optional input
 * location, filled by library code and rendered by whoever decides. */
#include "common/pc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Fills all of err: the code, the input location (none: file NULL) and the
 * message. */
__attribute__((format(printf, 6, 0))) static void err_vfill(struct pc_err *err, int code,
							    const char *file, unsigned line,
							    unsigned col, const char *fmt,
							    va_list ap)
{
	err->code = code;
	pc_strlcpy(err->file, file ? file : "", sizeof(err->file));
	err->line = line;
	err->col = col;
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
}

int pc_err_set(struct pc_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	va_start(ap, fmt);
	err_vfill(err, code, NULL, 0, 0, fmt, ap);
	va_end(ap);
	return code;
}

int pc_err_set_at(struct pc_err *err, int code, const char *file, unsigned line, unsigned col,
		  const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	va_start(ap, fmt);
	err_vfill(err, code, file, line, col, fmt, ap);
	va_end(ap);
	return code;
}

int pc_err_errno(struct pc_err *err, int code, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	size_t n;

	if (!err)
		return code;
	va_start(ap, fmt);
	err_vfill(err, code, NULL, 0, 0, fmt, ap);
	va_end(ap);
	n = strlen(err->msg);
	snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(saved));
	errno = saved;
	return code;
}

void pc_err_prefix(struct pc_err *err, const char *fmt, ...)
{
	char pre[256], old[sizeof(err->msg)];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof(pre), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* A long context may cut the tail of the message; the start matters more. */
	if (snprintf(err->msg, sizeof(err->msg), "%s%s", pre, old) < 0)
		err->msg[0] = '\0';
}

const char *pc_err_str(const struct pc_err *err, char *buf, size_t len)
{
	if (!err)
		snprintf(buf, len, "unknown error");
	else if (err->file[0] && err->line)
		snprintf(buf, len, "%s:%u:%u: %s", err->file, err->line, err->col, err->msg);
	else if (err->file[0])
		snprintf(buf, len, "%s: %s", err->file, err->msg);
	else
		snprintf(buf, len, "%s", err->msg[0] ? err->msg : pc_strerror(err->code));
	return buf;
}

const char *pc_strerror(int code)
{
	switch (code) {
	case PC_OK:
		return "success";
	case PC_EINVAL:
		return "invalid input";
	case PC_ENOMEM:
		return "out of memory";
	case PC_EIO:
		return "input/output error";
	case PC_EPARSE:
		return "parse error";
	case PC_EPERM:
		return "permission denied";
	case PC_ENOENT:
		return "not found";
	case PC_EEXIST:
		return "already exists";
	case PC_EAGAIN:
		return "try again";
	case PC_ETIMEOUT:
		return "timed out";
	case PC_EREFUSED:
		return "refused";
	case PC_EUNSUPP:
		return "not supported";
	case PC_ETAMPER:
		return "integrity check failed";
	}
	return "unknown error";
}

int pc_exit_for_check(int code)
{
	switch (code) {
	case PC_EPARSE:
	case PC_EINVAL:
	case PC_EREFUSED:
	case PC_ETAMPER:
		return PC_EXIT_FAIL;
	default:
		return PC_EXIT_ERROR;
	}
}

int pc_daemon_exit(int code, bool test)
{
	if (code == 0)
		return PC_EXIT_OK;
	return test ? pc_exit_for_check(code) : PC_EXIT_ERROR;
}
