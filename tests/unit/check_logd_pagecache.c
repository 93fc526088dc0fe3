/* The writer releases the page cache of what it made durable (logd/writer.c,
 * cache_release): after synced commits the file's pages are no longer
 * resident, except the one the next lines go into, and nothing of the log
 * is lost by it (it verifies, every record there). Why: bench/report-notes.md
 * "logd" — half of logd's CPU per record at a million records was the copy
 * into page-cache pages never used before. */
#include "logd/logd_int.h"
#include "tests/unit/unit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Pages of the file at path resident in the page cache (mincore of a
 * mapping of it), and the pages it has. */
static size_t resident(const char *path, size_t *pages)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct stat st;
	unsigned char *vec;
	size_t n, in = 0;
	void *map;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	n = ((size_t)st.st_size + (size_t)pg - 1) / (size_t)pg;
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	vec = calloc(n, 1);
	ck_assert_ptr_nonnull(vec);
	ck_assert_int_eq(mincore(map, (size_t)st.st_size, vec), 0);
	for (size_t i = 0; i < n; i++)
		in += vec[i] & 1;
	free(vec);
	munmap(map, (size_t)st.st_size);
	close(fd);
	*pages = n;
	return in;
}

/* Whether this file system drops clean pages on request at all (tmpfs
 * does not: its pages are the file). */
static bool fs_drops(const char *dir)
{
	char path[128], buf[65536];
	size_t pages, in;
	int fd;

	snprintf(path, sizeof(path), "%s/probe", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	ck_assert_int_eq(fdatasync(fd), 0);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	in = resident(path, &pages);
	unlink(path);
	return in < pages;
}

START_TEST(synced_pages_leave_the_page_cache)
{
	struct logrec r = {.action = LOGREC_CONNECT,
			   .verdict = LOGREC_REFUSED,
			   .sandbox = "agent-1",
			   .reason = "not on the allow list",
			   .domain = "host.example"};
	char dir[64], file[96];
	struct note_signer *key;
	struct logw_conf wc = {.cp_records = 100,
			       .cp_ms = 1000000,
			       .fsync = LOGD_FSYNC_BATCH, /* every commit synced */
			       .owner = (uid_t)-1,
			       .group = (gid_t)-1};
	struct logw *w;
	struct logv *v;
	size_t pages, in;
	char cmd[96];

	snprintf(dir, sizeof(dir), "/tmp/check_logd_pagecache.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/log.jsonl", dir);
	if (!fs_drops(dir)) {
		fprintf(stderr, "# %s keeps clean pages (tmpfs?): nothing to check\n", dir);
		goto out;
	}
	ck_assert_int_eq(note_signer_generate("test/portcullis-log", &key, NULL), 0);
	wc.file = file;
	ck_assert_int_eq(logw_open(&wc, key, NULL, &w, NULL), 0);
	for (int b = 0; b < 50; b++) {
		for (int i = 0; i < 64; i++)
			ck_assert_int_eq(logw_append(w, &r, NULL, NULL), 0);
		ck_assert_int_eq(logw_commit(w, NULL), 0);
	}
	in = resident(file, &pages);
	ck_assert_msg(pages > 100, "a log of %zu pages is too small to tell", pages);
	ck_assert_msg(in <= 1, "%zu of the %zu pages of the synced log still in the page cache", in,
		      pages);
	ck_assert_int_eq(logw_close(w, NULL), 0);

	/* nothing lost: the log verifies, every record in it */
	ck_assert_int_eq(logv_new(note_signer_verifier(key), &v, NULL), 0);
	ck_assert_int_eq(logv_file(v, file, 0, NULL), 0);
	ck_assert_uint_eq(logv_result(v)->records, 1 + 50 * 64);
	logv_free(v);
	note_signer_free(key);
out:
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

PC_UNIT_SUITE("logd_pagecache", "release", 30, synced_pages_leave_the_page_cache)
