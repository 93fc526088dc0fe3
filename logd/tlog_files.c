/* The transparency-log core's inputs read from files: a log's signing key
 * and the public keys (a log's, a witness's), and a log file mapped for
 * the verifier. tlog/ itself reads nothing (tlog/tlog.h); these are the
 * I/O its callers in logd/ and `portcullis log` share. */
#include "logd/logd_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- key files -------------------------------------------------------- */

int note_key_load(const char *path, struct note_signer **out, struct pc_err *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	rc = pc_file_read(path, 4096, &text, &len, err);
	if (rc < 0)
		return rc;
	rc = note_signer_parse(text, out, err);
	if (rc < 0)
		pc_err_prefix(err, "%s: ", path);
	sodium_memzero(text, len);
	free(text);
	return rc;
}

int note_key_write(const char *path, const struct note_signer *s, struct pc_err *err)
{
	char text[NOTE_NAME_MAX + 128], pub[PC_PATH_MAX + 8];
	int n, rc;

	if ((size_t)snprintf(pub, sizeof(pub), "%s.pub", path) >= sizeof(pub))
		return pc_err_set(err, PC_EINVAL, "key path too long: %s", path);
	n = note_signer_format(s, text, sizeof(text));
	if (n < 0)
		return pc_err_set(err, PC_EINVAL, "key does not fit");
	rc = pc_file_write_atomic(path, text, (size_t)n, 0600, err);
	sodium_memzero(text, sizeof(text));
	if (rc < 0)
		return rc;
	n = note_verifier_format(note_signer_verifier(s), text, sizeof(text));
	if (n < 0)
		return pc_err_set(err, PC_EINVAL, "key does not fit");
	return pc_file_write_atomic(pub, text, (size_t)n, 0644, err);
}

/* A log's key and a witness's key are read alike: the file (a public key,
 * at most 4 KiB) parsed by its own parser, an error prefixed with the
 * path. Exactly one of nv, cv. */
static int verifier_load(const char *path, struct note_verifier *nv, struct cosig_verifier *cv,
			 struct pc_err *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc = pc_file_read(path, 4096, &text, &len, err);

	if (rc < 0)
		return rc;
	rc = nv ? note_verifier_parse(text, nv, err) : cosig_verifier_parse(text, cv, err);
	if (rc < 0)
		pc_err_prefix(err, "%s: ", path);
	free(text);
	return rc;
}

int note_verifier_load(const char *path, struct note_verifier *out, struct pc_err *err)
{
	return verifier_load(path, out, NULL, err);
}

int cosig_verifier_load(const char *path, struct cosig_verifier *out, struct pc_err *err)
{
	return verifier_load(path, NULL, out, err);
}

int logv_file(struct logv *v, const char *path, unsigned flags, struct pc_err *err)
{
	struct stat st;
	void *map = NULL;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return pc_err_errno(err, errno == ENOENT ? PC_ENOENT : PC_EIO, "%s", path);
	if (fstat(fd, &st) < 0) {
		rc = pc_err_errno(err, PC_EIO, "%s", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = pc_err_set(err, PC_EINVAL, "%s is not a regular file", path);
		goto out;
	}
	if (st.st_size == 0) {
		rc = logv_buffer(v, "", 0, flags, err);
		goto out;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		map = NULL;
		rc = pc_err_errno(err, PC_EIO, "mapping %s", path);
		goto out;
	}
	madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
	rc = logv_buffer(v, map, (size_t)st.st_size, flags, err);
out:
	if (map)
		munmap(map, (size_t)st.st_size);
	close(fd);
	return rc;
}

/* log verify's anchors: the --against files and <log>.witnessed beside
 * the log, each read and opened with the log's key (tlog/anchor.c checks
 * the file against them). */
int logc_anchors_load(struct logc_anchors *a, const struct note_verifier *key, const char *log,
		      const char *const *against, size_t n, struct pc_err *err)
{
	char side[PC_PATH_MAX + 16];
	size_t total = n;
	int rc;

	memset(a, 0, sizeof(*a));
	snprintf(side, sizeof(side), "%s%s", log, LOGWC_SUFFIX);
	if (access(side, F_OK) == 0)
		total++;
	if (total > LOGC_ANCHORS_MAX)
		return pc_err_set(err, PC_EINVAL, "at most %d checkpoints to check against",
				  LOGC_ANCHORS_MAX);
	for (size_t i = 0; i < total; i++) {
		struct logc_anchor *x = &a->a[a->n];
		const char *path = i < n ? against[i] : side;
		char *text = NULL;
		size_t len = 0;

		pc_strlcpy(x->path, path, sizeof(x->path));
		x->witnessed = i >= n;
		if ((rc = pc_file_read(path, sizeof(x->note) - 1, &text, &len, err)) < 0)
			return rc;
		memcpy(x->note, text, len);
		x->note[len] = '\0';
		x->note_len = len;
		free(text);
		if ((rc = checkpoint_open(key, x->note, len, &a->cp[a->n], err)) < 0) {
			pc_err_prefix(err, "%s: ", path);
			return rc;
		}
		a->n++;
	}
	return 0;
}
