/* `portcullis log show`'s filters (--sandbox, --action, --outcome,
 * --since) and its reader: the file's lines in order, and with --follow
 * the lines appended after, across logd's and logrotate's rotations (the
 * path then names a new file, read from its start), until a signal. The
 * reader is a struct logtail that never waits, so `portcullis top` follows
 * the log with the same code between two screen updates. */
#include "logd/logd_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FOLLOW_POLL_MS 200
#define LINE_MAX_BYTES (1u << 20) /* longer than any record logd writes */

int logshow_filter_since(struct logshow_filter *f, const char *arg, uint64_t now_ms,
			 struct pc_err *err)
{
	static const struct {
		char unit;
		uint64_t ms;
	} units[] = {{'s', 1000}, {'m', 60000}, {'h', 3600000}, {'d', 86400000}};
	char *end;
	unsigned long long n;
	struct tm tm;
	const char *rest;

	/* a duration back from now: 30s, 10m, 2h, 7d */
	errno = 0;
	n = strtoull(arg, &end, 10);
	if (end != arg && !errno && end[0] && !end[1]) {
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			if (end[0] != units[i].unit)
				continue;
			if (n > now_ms / units[i].ms)
				n = now_ms / units[i].ms;
			pc_time_rfc3339(now_ms - n * units[i].ms, f->since, sizeof(f->since));
			return 0;
		}
	}
	/* a UTC time: 2026-12-01, 2026-12-01T14:00, 2026-12-01T14:00:05Z */
	memset(&tm, 0, sizeof(tm));
	rest = strptime(arg, "%Y-%m-%d", &tm);
	if (rest && (*rest == 'T' || *rest == ' ')) {
		const char *r2 = strptime(rest + 1, "%H:%M:%S", &tm);

		rest = r2 ? r2 : strptime(rest + 1, "%H:%M", &tm);
	}
	if (rest && *rest == 'Z')
		rest++;
	if (!rest || *rest) {
		return pc_err_set(
		    err, PC_EINVAL,
		    "--since: '%s' is neither a duration (30s, 10m, 2h, 7d) nor a UTC "
		    "time (2026-12-01 or 2026-12-01T14:00:00Z)",
		    arg);
	}
	pc_time_rfc3339((uint64_t)timegm(&tm) * 1000, f->since, sizeof(f->since));
	return 0;
}

bool logshow_filter_active(const struct logshow_filter *f)
{
	return f->sandbox || f->action || f->outcome || f->since[0];
}

struct fmatch {
	const struct logshow_filter *f;
	bool sandbox_ok, action_ok, outcome_ok, since_ok, is_record;
};

static bool str_is(const char *v, size_t vl, const char *want)
{
	size_t n = strlen(want);

	return vl == n + 2 && v[0] == '"' && memcmp(v + 1, want, n) == 0;
}

static int match_field(void *ctx, const char *k, size_t kl, enum logjson_type t, const char *v,
		       size_t vl)
{
	struct fmatch *m = ctx;
	const struct logshow_filter *f = m->f;

	if (LOGJSON_KEY_IS(k, kl, "event.action")) {
		m->is_record = true;
		m->action_ok = !f->action || str_is(v, vl, f->action);
	} else if (f->sandbox && (LOGJSON_KEY_IS(k, kl, "sandbox") ||
				  LOGJSON_KEY_IS(k, kl, "portcullis.sandbox"))) {
		m->sandbox_ok = str_is(v, vl, f->sandbox);
	} else if (f->outcome && LOGJSON_KEY_IS(k, kl, "event.outcome")) {
		m->outcome_ok =
		    str_is(v, vl, f->outcome == LOGSHOW_ALLOWED ? "success" : "failure");
	} else if (f->outcome && t == LOGJSON_ARRAY && LOGJSON_KEY_IS(k, kl, "event.type")) {
		const char *w = f->outcome == LOGSHOW_ALLOWED ? "\"allowed\"" : "\"denied\"";

		if (memmem(v, vl, w, strlen(w)))
			m->outcome_ok = true;
	} else if (f->since[0] && t == LOGJSON_STRING && LOGJSON_KEY_IS(k, kl, "@timestamp")) {
		size_t n = strlen(f->since);

		/* the same RFC 3339 form, UTC, milliseconds: compared as text */
		m->since_ok = vl >= n + 2 && memcmp(v + 1, f->since, n) >= 0;
	}
	return 0;
}

bool logshow_match(const struct logshow_filter *f, const char *line, size_t len)
{
	struct fmatch m = {
	    .f = f, .sandbox_ok = !f->sandbox, .outcome_ok = !f->outcome, .since_ok = !f->since[0]};

	if (!logshow_filter_active(f))
		return true;
	if (logjson_each(line, len, match_field, &m) < 0 || !m.is_record)
		return false; /* checkpoints and what is not a record: not asked for */
	return m.sandbox_ok && m.action_ok && m.outcome_ok && m.since_ok;
}

/* ---- reading, and following ------------------------------------------------- */

static volatile sig_atomic_t follow_stop;

static void on_signal(int sig)
{
	(void)sig;
	follow_stop = 1;
}

static bool same_file(int fd, const char *path, off_t pos)
{
	struct stat a, b;

	if (fstat(fd, &a) < 0 || stat(path, &b) < 0)
		return true; /* the path is gone for now: keep reading what we have */
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino && b.st_size >= pos;
}

/* The reader both `log show` and `portcullis top` (cli/top.c) use: each
 * call hands over the whole lines there are now and never waits, so a
 * caller with a screen to draw polls it. */
struct logtail {
	char *path;
	char *buf; /* LINE_MAX_BYTES: a partial line waits here for its end */
	size_t have;
	off_t pos;
	int fd;
	bool skip_first; /* started inside the file: its first line is partial */
};

int logtail_open(const char *path, uint64_t back, struct logtail **out, struct pc_err *err)
{
	struct logtail *t = calloc(1, sizeof(*t));
	struct stat st;
	int rc = 0;

	if (t)
		t->fd = -1;
	if (!t || !(t->buf = malloc(LINE_MAX_BYTES)) || !(t->path = strdup(path))) {
		rc = pc_err_set(err, PC_ENOMEM, "out of memory");
		goto out;
	}
	t->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (t->fd < 0) {
		rc = pc_err_errno(err, PC_EIO, "%s", path);
		goto out;
	}
	if (back && fstat(t->fd, &st) == 0 && (uint64_t)st.st_size > back) {
		/* from the line that starts after this point */
		t->pos = st.st_size - (off_t)back - 1;
		if (lseek(t->fd, t->pos, SEEK_SET) < 0) {
			rc = pc_err_errno(err, PC_EIO, "%s", path);
			goto out;
		}
		t->skip_first = true;
	}
out:
	if (rc < 0) {
		if (t && t->fd >= 0)
			close(t->fd);
		if (t) {
			free(t->buf);
			free(t->path);
		}
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void logtail_close(struct logtail *t)
{
	if (!t)
		return;
	close(t->fd);
	free(t->buf);
	free(t->path);
	free(t);
}

/* One line to line_fn, unless it is the partial line a start inside the
 * file cut. */
static void tail_line(struct logtail *t, const char *line, size_t len,
		      void (*line_fn)(void *arg, const char *line, size_t len), void *arg)
{
	if (t->skip_first) {
		t->skip_first = false;
		return;
	}
	line_fn(arg, line, len);
}

int logtail_read(struct logtail *t, bool final,
		 void (*line_fn)(void *arg, const char *line, size_t len), void *arg,
		 struct pc_err *err)
{
	for (;;) {
		ssize_t n = read(t->fd, t->buf + t->have, LINE_MAX_BYTES - t->have);
		size_t start = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return pc_err_errno(err, PC_EIO, "%s", t->path);
		if (n == 0) {
			if (final) {
				if (t->have)
					tail_line(t, t->buf, t->have, line_fn, arg);
				t->have = 0;
				return 0;
			}
			if (!same_file(t->fd, t->path, t->pos)) {
				/* rotated (or truncated): the path's new file, from its start */
				int nfd = open(t->path, O_RDONLY | O_CLOEXEC);

				if (nfd >= 0) {
					close(t->fd);
					t->fd = nfd;
					t->pos = 0;
					t->have = 0;
					t->skip_first = false;
					continue;
				}
			}
			return 0;
		}
		t->pos += n;
		t->have += (size_t)n;
		for (size_t i = 0; i < t->have; i++) {
			if (t->buf[i] != '\n')
				continue;
			tail_line(t, t->buf + start, i - start, line_fn, arg);
			start = i + 1;
		}
		if (start == 0 && t->have == LINE_MAX_BYTES) {
			/* no record is this long: shown as not understood */
			tail_line(t, t->buf, t->have, line_fn, arg);
			t->have = 0;
			continue;
		}
		memmove(t->buf, t->buf + start, t->have - start);
		t->have -= start;
	}
}

int logshow_read(const char *path, bool follow,
		 void (*line_fn)(void *arg, const char *line, size_t len), void *arg,
		 struct pc_err *err)
{
	struct logtail *t;
	int rc;

	if ((rc = logtail_open(path, 0, &t, err)) < 0)
		return rc;
	if (follow) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGPIPE, &sa, NULL);
	}
	while (!follow_stop) {
		struct timespec ts = {0, FOLLOW_POLL_MS * 1000000L};

		if ((rc = logtail_read(t, !follow, line_fn, arg, err)) < 0 || !follow)
			break;
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	logtail_close(t);
	return rc;
}
