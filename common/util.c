/* Small helpers: bounded string copy, hex digits, whole-file read and atomic
 * write, clocks and RFC 3339 time. */
#include "common/pc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

size_t pc_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);

	if (size) {
		size_t c = n < size - 1 ? n : size - 1;

		memcpy(dst, src, c);
		dst[c] = '\0';
	}
	return n;
}

const char *pc_name_of(const struct pc_name *t, size_t n, long v, const char *dflt)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].v == v)
			return t[i].name;
	return dflt;
}

int pc_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static const char *file_kind(mode_t m)
{
	return S_ISFIFO(m)   ? "a FIFO"
	       : S_ISSOCK(m) ? "a socket"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
	       : S_ISDIR(m)  ? "a directory"
			     : "not a regular file";
}

static int file_read(const char *path, size_t max, bool regular, char **buf, size_t *len,
		     struct pc_err *err)
{
	struct stat st;
	char *b = NULL;
	size_t n = 0, cap;
	int fd, rc = PC_EIO;

	fd = open(path, O_RDONLY | O_CLOEXEC | (regular ? O_NONBLOCK | O_NOCTTY : 0));
	if (fd < 0)
		return pc_err_errno(err, errno == ENOENT ? PC_ENOENT : PC_EIO, "%s", path);
	if (fstat(fd, &st) < 0) {
		pc_err_errno(err, PC_EIO, "%s", path);
		goto out;
	}
	if (regular && !S_ISREG(st.st_mode)) {
		rc = pc_err_set(err, PC_EINVAL, "%s is %s, not a regular file", path,
				file_kind(st.st_mode));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = pc_err_set(err, PC_EINVAL, "%s is a directory", path);
		goto out;
	}
	if (S_ISREG(st.st_mode) && (size_t)st.st_size > max) {
		rc = pc_err_set(err, PC_EINVAL, "%s is too large (%lld bytes, limit %zu)", path,
				(long long)st.st_size, max);
		goto out;
	}
	cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 4096;
	b = malloc(cap);
	if (!b) {
		rc = pc_err_set(err, PC_ENOMEM, "reading %s: out of memory", path);
		goto out;
	}
	for (;;) {
		ssize_t r;

		if (n + 1 >= cap) {
			char *nb;

			if (cap > max) {
				rc = pc_err_set(err, PC_EINVAL, "%s is too large (limit %zu)", path,
						max);
				goto out;
			}
			cap *= 2;
			nb = realloc(b, cap);
			if (!nb) {
				rc = pc_err_set(err, PC_ENOMEM, "reading %s: out of memory", path);
				goto out;
			}
			b = nb;
		}
		r = read(fd, b + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			pc_err_errno(err, PC_EIO, "reading %s", path);
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		rc = pc_err_set(err, PC_EINVAL, "%s is too large (limit %zu)", path, max);
		goto out;
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	b = NULL;
	rc = 0;
out:
	free(b);
	close(fd);
	return rc;
}

int pc_file_read(const char *path, size_t max, char **buf, size_t *len, struct pc_err *err)
{
	return file_read(path, max, false, buf, len, err);
}

int pc_file_read_regular(const char *path, size_t max, char **buf, size_t *len, struct pc_err *err)
{
	return file_read(path, max, true, buf, len, err);
}

int pc_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) { /* no progress and no error: never spin on it */
			errno = EIO;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int pc_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
			 struct pc_err *err)
{
	char tmp[PC_PATH_MAX + 16];
	int fd;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long)getpid()) >= sizeof(tmp))
		return pc_err_set(err, PC_EINVAL, "path too long: %s", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "creating %s", tmp);
	if (pc_write_all(fd, data, len) < 0)
		goto fail;
	if (fchmod(fd, mode) < 0 || fsync(fd) < 0)
		goto fail;
	if (close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	if (rename(tmp, path) < 0) {
		fd = -1;
		goto fail;
	}
	return 0;
fail:
	pc_err_errno(err, PC_EIO, "writing %s", path);
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return PC_EIO;
}

uint64_t pc_now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t pc_now_mono_ms(void)
{
	return pc_now_mono_ns() / 1000000ULL;
}

uint64_t pc_now_real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000ULL + (uint64_t)ts.tv_nsec / 1000000ULL;
}

const char *pc_time_rfc3339(uint64_t real_ms, char *buf, size_t len)
{
	time_t secs = (time_t)(real_ms / 1000);
	struct tm tm;

	if (!gmtime_r(&secs, &tm) ||
	    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900,
		     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     (unsigned)(real_ms % 1000)) < 0)
		snprintf(buf, len, "1970-01-01T00:00:00.000Z");
	return buf;
}
