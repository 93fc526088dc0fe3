/* The policy store (rules/polstore.c): a policy is kept under the hash of
 * its canonical text, written whole or not at all, and nothing found in the
 * store is trusted for its name (docs/policy.md, "Policies kept by hash"). */
#include "rules/rules_int.h"
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char TEXT[] = "{\"portcullis_policy\":1,\"sandboxes\":[]}";
static const char OTHER[] = "{\"portcullis_policy\":1,\"sandboxes\":[{}]}";

static char dir[64];

static void mkstore(void)
{
	strcpy(dir, "/tmp/pc-polstore-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_ge(sodium_init(), 0);
}

static void rmstore(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void hash_of(const char *t, char out[POLSTORE_NAME_LEN + 1])
{
	unsigned char h[crypto_hash_sha256_BYTES];
	char hex[65];

	crypto_hash_sha256(h, (const unsigned char *)t, strlen(t));
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(out, POLSTORE_NAME_LEN + 1, "sha256:%s", hex);
}

static void path_of(const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", dir, name);
}

static size_t entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void write_file(const char *path, const char *t)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs(t, f);
	ck_assert_int_eq(fclose(f), 0);
}

START_TEST(test_put_stores_canonical_text_under_its_hash)
{
	char h[POLSTORE_NAME_LEN + 1], got[80], p[256], *text = NULL;
	struct stat st;
	struct pc_err e = {0};
	size_t len;

	mkstore();
	umask(0027); /* the daemons' */
	hash_of(TEXT, h);
	ck_assert_int_eq(polstore_put_text(dir, TEXT, strlen(TEXT), got, sizeof(got), &e), 0);
	ck_assert_str_eq(got, h);
	path_of(h, p, sizeof(p));
	ck_assert_int_eq(lstat(p, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0444);
	ck_assert_int_eq(st.st_size, (off_t)strlen(TEXT));
	ck_assert_uint_eq(entries(), 1); /* no temporary file left */
	ck_assert_int_eq(polstore_get(dir, h, &text, &len, &e), 0);
	ck_assert_uint_eq(len, strlen(TEXT));
	ck_assert_str_eq(text, TEXT);
	free(text);
	rmstore();
}
END_TEST

START_TEST(test_put_again_verifies_and_keeps_one_file)
{
	char h[POLSTORE_NAME_LEN + 1];
	struct pc_err e = {0};

	mkstore();
	hash_of(TEXT, h);
	ck_assert_int_eq(polstore_put_text(dir, TEXT, strlen(TEXT), NULL, 0, &e), 0);
	ck_assert_int_eq(polstore_put_text(dir, TEXT, strlen(TEXT), NULL, 0, &e), 0);
	ck_assert_int_eq(polstore_put_text(dir, OTHER, strlen(OTHER), NULL, 0, &e), 0);
	ck_assert_uint_eq(entries(), 2);
	rmstore();
}
END_TEST

/* A file already under the name with other bytes is refused, not
 * replaced and not trusted: by the writer (a reload is then refused) and
 * by the reader. */
START_TEST(test_tampered_file_refused_by_put_and_get)
{
	char h[POLSTORE_NAME_LEN + 1], p[256], *text = NULL, buf[128];
	struct pc_err e = {0};
	size_t len;
	FILE *f;

	mkstore();
	hash_of(TEXT, h);
	path_of(h, p, sizeof(p));
	write_file(p, OTHER);
	ck_assert_int_eq(polstore_put_text(dir, TEXT, strlen(TEXT), NULL, 0, &e), PC_ETAMPER);
	ck_assert_ptr_nonnull(strstr(e.msg, "does not match its name"));
	ck_assert_ptr_nonnull(strstr(e.msg, h));
	f = fopen(p, "r");
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	ck_assert_str_eq(buf, OTHER);
	ck_assert_uint_eq(entries(), 1);
	memset(&e, 0, sizeof(e));
	ck_assert_int_eq(polstore_get(dir, h, &text, &len, &e), PC_ETAMPER);
	ck_assert_ptr_null(text);
	/* one byte appended is tampering too */
	write_file(p, TEXT);
	f = fopen(p, "a");
	fputc('\n', f);
	fclose(f);
	ck_assert_int_eq(polstore_get(dir, h, &text, &len, &e), PC_ETAMPER);
	rmstore();
}
END_TEST

START_TEST(test_symlink_fifo_directory_refused)
{
	char h[POLSTORE_NAME_LEN + 1], p[256], target[256], *text = NULL;
	struct pc_err e = {0};
	struct stat st;
	size_t len;

	mkstore();
	hash_of(TEXT, h);
	path_of(h, p, sizeof(p));
	/* a link to a file with the right bytes is still not a stored policy */
	path_of("elsewhere", target, sizeof(target));
	write_file(target, TEXT);
	ck_assert_int_eq(symlink(target, p), 0);
	ck_assert_int_eq(polstore_put_text(dir, TEXT, strlen(TEXT), NULL, 0, &e), PC_EREFUSED);
	ck_assert_ptr_nonnull(strstr(e.msg, "not a regular file"));
	ck_assert_int_eq(polstore_get(dir, h, &text, &len, &e), PC_EREFUSED);
	ck_assert_int_eq(lstat(p, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(unlink(p), 0);
	/* a FIFO must not hang the daemon (nobody writes to it) */
	ck_assert_int_eq(mkfifo(p, 0600), 0);
	ck_assert_int_eq(polstore_put_text(dir, TEXT, strlen(TEXT), NULL, 0, &e), PC_EREFUSED);
	ck_assert_int_eq(polstore_get(dir, h, &text, &len, &e), PC_EREFUSED);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(mkdir(p, 0700), 0);
	ck_assert_int_eq(polstore_put_text(dir, TEXT, strlen(TEXT), NULL, 0, &e), PC_EREFUSED);
	ck_assert_int_eq(polstore_get(dir, h, &text, &len, &e), PC_EREFUSED);
	ck_assert_int_eq(rmdir(p), 0);
	ck_assert_uint_eq(entries(), 1); /* "elsewhere"; no temporary file */
	rmstore();
}
END_TEST

START_TEST(test_store_dir_missing_or_symlink)
{
	char p[256], link[256];
	struct pc_err e = {0};
	char *text = NULL;
	size_t len;

	mkstore();
	path_of("none", p, sizeof(p));
	ck_assert_int_eq(polstore_put_text(p, TEXT, strlen(TEXT), NULL, 0, &e), PC_ENOENT);
	path_of("real", p, sizeof(p));
	path_of("link", link, sizeof(link));
	ck_assert_int_eq(mkdir(p, 0755), 0);
	ck_assert_int_eq(symlink(p, link), 0);
	ck_assert_int_eq(polstore_put_text(link, TEXT, strlen(TEXT), NULL, 0, &e), PC_EREFUSED);
	ck_assert_int_eq(polstore_get(link,
				      "sha256:"
				      "00000000000000000000000000000000"
				      "00000000000000000000000000000000",
				      &text, &len, &e),
			 PC_EREFUSED);
	rmstore();
}
END_TEST

START_TEST(test_name_forms)
{
	char n[POLSTORE_NAME_LEN + 1], h[POLSTORE_NAME_LEN + 1], up[80];
	struct pc_err e = {0};
	char *text = NULL;
	size_t len;

	mkstore();
	hash_of(TEXT, h);
	ck_assert_int_eq(polstore_name(h, n, &e), 0);
	ck_assert_str_eq(n, h);
	ck_assert_int_eq(polstore_name(h + 7, n, &e), 0); /* bare digits */
	ck_assert_str_eq(n, h);
	snprintf(up, sizeof(up), "sha256:%s", h + 7);
	for (char *c = up + 7; *c; c++)
		if (*c >= 'a' && *c <= 'f')
			*c = (char)(*c - 'a' + 'A');
	ck_assert_int_eq(polstore_name(up, n, &e), 0);
	ck_assert_str_eq(n, h);
	ck_assert_int_eq(polstore_name("sha256:abc", n, &e), PC_EINVAL);
	ck_assert_int_eq(polstore_name("", n, &e), PC_EINVAL);
	snprintf(up, sizeof(up), "sha256:%.63s/", h + 7);
	ck_assert_int_eq(polstore_name(up, n, &e), PC_EINVAL);
	ck_assert_int_eq(polstore_name("../../etc/passwd", n, &e), PC_EINVAL);
	/* get: through the same check; a well-formed name not stored */
	ck_assert_int_eq(polstore_get(dir, "x/../y", &text, &len, &e), PC_EINVAL);
	ck_assert_int_eq(polstore_get(dir, h, &text, &len, &e), PC_ENOENT);
	rmstore();
}
END_TEST

START_TEST(test_prepare_creates_and_refuses_a_link)
{
	struct config cfg;
	struct pc_err e = {0};
	char p[PC_PATH_MAX + 16], link[256];
	struct stat st;

	mkstore();
	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", dir);
	strcpy(cfg.engine.user, "pc-no-such-user-1");
	strcpy(cfg.vault.user, "pc-no-such-user-2");
	ck_assert_int_eq(polstore_prepare(&cfg, &e), 0);
	ck_assert_int_eq(polstore_dir(&cfg, p, sizeof(p), &e), 0);
	ck_assert_int_eq(lstat(p, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 01775);
	ck_assert_int_eq(polstore_prepare(&cfg, &e), 0); /* there: kept */
	ck_assert_int_eq(rmdir(p), 0);
	path_of("target", link, sizeof(link));
	ck_assert_int_eq(mkdir(link, 0755), 0);
	ck_assert_int_eq(symlink(link, p), 0);
	ck_assert_int_eq(polstore_prepare(&cfg, &e), PC_EREFUSED);
	rmstore();
}
END_TEST

/* What a daemon stores is its compiled policy's canonical form, under the
 * hash its records cite. */
START_TEST(test_put_cfg_stores_a_compiled_policy)
{
	struct config cfg;
	struct policy *pol = NULL;
	struct pc_err e = {0};
	char rules[256], file[300], store[PC_PATH_MAX + 16], *text = NULL;
	const char *canon;
	size_t len, clen;

	mkstore();
	path_of("rules.d", rules, sizeof(rules));
	ck_assert_int_eq(mkdir(rules, 0755), 0);
	snprintf(file, sizeof(file), "%s/a.yaml", rules);
	write_file(file, "sandbox: agent-1\nmatch: { source: 10.203.0.10/32 }\n"
			 "allow:\n  - host: api.example.com\n    ports: [443]\n");
	ck_assert_msg(policy_load_dir(rules, NULL, &pol, &e) == 0, "%s", e.msg);
	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", dir);
	strcpy(cfg.engine.user, "pc-no-such-user-1");
	strcpy(cfg.vault.user, "pc-no-such-user-2");
	/* no store directory yet: refused, not created behind prepare's back */
	ck_assert_int_eq(polstore_put_cfg(&cfg, pol, &e), PC_ENOENT);
	ck_assert_int_eq(polstore_prepare(&cfg, &e), 0);
	ck_assert_msg(polstore_put_cfg(&cfg, pol, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(polstore_dir(&cfg, store, sizeof(store), &e), 0);
	ck_assert_int_eq(polstore_get(store, policy_hash(pol), &text, &len, &e), 0);
	canon = policy_canonical(pol, &clen);
	ck_assert_uint_eq(len, clen);
	ck_assert_mem_eq(text, canon, len);
	free(text);
	policy_unref(pol);
	rmstore();
}
END_TEST

PC_UNIT_SUITE("rules_polstore", "polstore", 0, test_put_stores_canonical_text_under_its_hash,
	      test_put_again_verifies_and_keeps_one_file, test_tampered_file_refused_by_put_and_get,
	      test_symlink_fifo_directory_refused, test_store_dir_missing_or_symlink,
	      test_name_forms, test_prepare_creates_and_refuses_a_link,
	      test_put_cfg_stores_a_compiled_policy)
