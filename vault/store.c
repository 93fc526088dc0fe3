/* The sealed secret store: libsodium secretbox under a key only the vault
 * user can read; one sealed file and one public placeholder file per secret.
 * Values live only in sodium_malloc'ed (mlocked, guard-paged) memory. */
#include "vault/vault_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEAL_MAGIC "PCV1"
#define SEALED_MAX (VAULT_PH_MAX + VAULT_VALUE_MAX + 128)

bool store_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n >= VAULT_NAME_MAX || name[0] < 'A' || name[0] > 'Z')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'A' && name[i] <= 'Z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '_'))
			return false;
	return true;
}

static int store_path(char *out, const char *dir, const char *name, const char *suffix,
		      struct pc_err *err)
{
	if ((size_t)snprintf(out, PC_PATH_MAX, "%s/%s%s", dir, name, suffix) >= PC_PATH_MAX)
		return pc_err_set(err, PC_EINVAL, "path too long under %s", dir);
	return 0;
}

int store_seal(const uint8_t key[32], const uint8_t *pt, size_t len, uint8_t **out, size_t *out_len,
	       struct pc_err *err)
{
	size_t n = 4 + crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + len;
	uint8_t *b = malloc(n);

	if (!b)
		return pc_err_set(err, PC_ENOMEM, "sealing: out of memory");
	memcpy(b, SEAL_MAGIC, 4);
	randombytes_buf(b + 4, crypto_secretbox_NONCEBYTES);
	crypto_secretbox_easy(b + 4 + crypto_secretbox_NONCEBYTES, pt, len, b + 4, key);
	*out = b;
	*out_len = n;
	return 0;
}

int store_unseal(const uint8_t key[32], const uint8_t *in, size_t len, uint8_t **pt, size_t *pt_len,
		 struct pc_err *err)
{
	size_t hdr = 4 + crypto_secretbox_NONCEBYTES;
	uint8_t *b;

	if (len < hdr + crypto_secretbox_MACBYTES + 1 || memcmp(in, SEAL_MAGIC, 4) != 0)
		return pc_err_set(err, PC_ETAMPER, "not a sealed secret");
	b = sodium_malloc(len - hdr - crypto_secretbox_MACBYTES);
	if (!b)
		return pc_err_set(err, PC_ENOMEM, "unsealing: out of memory");
	if (crypto_secretbox_open_easy(b, in + hdr, len - hdr, in + 4, key) != 0) {
		sodium_free(b);
		return pc_err_set(err, PC_ETAMPER, "sealed secret does not authenticate");
	}
	*pt = b;
	*pt_len = len - hdr - crypto_secretbox_MACBYTES;
	return 0;
}

/* Read the 32-byte key into key (locked memory owned by the caller). */
static int key_read(const char *dir, uint8_t *key, struct pc_err *err)
{
	char path[PC_PATH_MAX];
	uint8_t extra;
	ssize_t r;
	int fd, rc = 0;

	if (store_path(path, dir, "secret", ".key", err) < 0)
		return PC_EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return pc_err_errno(err, errno == ENOENT ? PC_ENOENT : PC_EPERM, "%s", path);
	r = read(fd, key, 32);
	if (r != 32 || read(fd, &extra, 1) != 0)
		rc = pc_err_set(err, PC_ETAMPER, "%s: not a 32-byte key", path);
	close(fd);
	return rc;
}

static int key_create(const char *dir, uid_t uid, gid_t gid, struct pc_err *err)
{
	char path[PC_PATH_MAX];
	uint8_t *key;
	int fd, rc = 0;

	if (store_path(path, dir, "secret", ".key", err) < 0)
		return PC_EINVAL;
	key = sodium_malloc(32);
	if (!key)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	crypto_secretbox_keygen(key);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0400);
	if (fd < 0) {
		rc = errno == EEXIST ? 0 : pc_err_errno(err, PC_EIO, "creating %s", path);
		goto out;
	}
	if (write(fd, key, 32) != 32 || fsync(fd) < 0)
		rc = pc_err_errno(err, PC_EIO, "writing %s", path);
	else if (geteuid() == 0 && fchown(fd, uid, gid) < 0)
		rc = pc_err_errno(err, PC_EIO, "chown %s", path);
	close(fd);
	if (rc < 0)
		unlink(path);
out:
	sodium_free(key);
	return rc;
}

static int dir_ensure(const char *dir, gid_t gid, struct pc_err *err)
{
	struct stat st;

	if (mkdir(dir, 0750) == 0) {
		if (geteuid() == 0 && chown(dir, 0, gid) < 0)
			return pc_err_errno(err, PC_EIO, "chown %s", dir);
		return 0;
	}
	if (errno != EEXIST)
		return pc_err_errno(err, PC_EIO, "creating %s", dir);
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return pc_err_set(err, PC_EINVAL, "%s is not a directory", dir);
	return 0;
}

static void placeholder_make(const char *name, char *ph)
{
	static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";
	uint8_t r[VAULT_PH_RANDOM];
	size_t n = (size_t)snprintf(ph, VAULT_PH_MAX, "pcph_%s_", name);

	randombytes_buf(r, sizeof(r));
	for (size_t i = 0; i < VAULT_PH_RANDOM; i++)
		ph[n + i] = b32[r[i] & 31];
	ph[n + VAULT_PH_RANDOM] = '\0';
}

/* Is ph the form "pcph_<name>_<random>" for this name? */
static bool placeholder_valid(const char *name, const char *ph, size_t len)
{
	size_t nl = strlen(name);

	if (len != 5 + nl + 1 + VAULT_PH_RANDOM || memcmp(ph, "pcph_", 5) != 0 ||
	    memcmp(ph + 5, name, nl) != 0 || ph[5 + nl] != '_')
		return false;
	for (size_t i = 6 + nl; i < len; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyz234567", ph[i]) || !ph[i])
			return false;
	return true;
}

int store_placeholder_read(const char *dir, const char *name, char *ph, struct pc_err *err)
{
	char path[PC_PATH_MAX], *buf = NULL;
	size_t len;
	int rc;

	if (!store_name_valid(name))
		return pc_err_set(err, PC_EINVAL, "invalid secret name");
	if (store_path(path, dir, name, ".placeholder", err) < 0)
		return PC_EINVAL;
	rc = pc_file_read_regular(path, VAULT_PH_MAX + 1, &buf, &len, err);
	if (rc < 0)
		return rc;
	if (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (!placeholder_valid(name, buf, len)) {
		free(buf);
		return pc_err_set(err, PC_ETAMPER, "%s: not a placeholder for %s", path, name);
	}
	memcpy(ph, buf, len + 1);
	free(buf);
	return 0;
}

static int value_check(const uint8_t *v, size_t len, struct pc_err *err)
{
	if (len < VAULT_VALUE_MIN || len > VAULT_VALUE_MAX)
		return pc_err_set(err, PC_EINVAL, "a secret value must be %d to %d bytes",
				  VAULT_VALUE_MIN, VAULT_VALUE_MAX);
	for (size_t i = 0; i < len; i++)
		if (v[i] < 0x20 || v[i] > 0x7e)
			return pc_err_set(err, PC_EINVAL,
					  "a secret value must be printable ASCII (it goes into "
					  "an HTTP header)");
	if (v[0] == ' ' || v[len - 1] == ' ')
		return pc_err_set(err, PC_EINVAL,
				  "a secret value must not start or end with a space");
	if (memmem(v, len, "pcph_", 5))
		return pc_err_set(err, PC_EINVAL, "a secret value must not contain \"pcph_\"");
	return 0;
}

int store_secret_set(const char *dir, const char *name, const uint8_t *value, size_t len, uid_t uid,
		     gid_t gid, bool keep_placeholder, char *ph, struct pc_err *err)
{
	char path[PC_PATH_MAX], newph[VAULT_PH_MAX];
	uint8_t *key = NULL, *pt = NULL, *sealed = NULL;
	size_t phl, sl = 0;
	int rc;

	if (!store_name_valid(name))
		return pc_err_set(err, PC_EINVAL, "invalid secret name (want [A-Z][A-Z0-9_]*)");
	if ((rc = value_check(value, len, err)) < 0)
		return rc;
	if ((rc = dir_ensure(dir, gid, err)) < 0 || (rc = key_create(dir, uid, gid, err)) < 0)
		return rc;
	if (!keep_placeholder || store_placeholder_read(dir, name, newph, NULL) < 0)
		placeholder_make(name, newph);
	phl = strlen(newph);
	key = sodium_malloc(32);
	pt = sodium_malloc(phl + 1 + len);
	if (!key || !pt) {
		rc = pc_err_set(err, PC_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = key_read(dir, key, err)) < 0)
		goto out;
	memcpy(pt, newph, phl);
	pt[phl] = '\n';
	memcpy(pt + phl + 1, value, len);
	if ((rc = store_seal(key, pt, phl + 1 + len, &sealed, &sl, err)) < 0)
		goto out;
	if ((rc = store_path(path, dir, name, ".sealed", err)) < 0 ||
	    (rc = pc_file_write_atomic(path, sealed, sl, 0400, err)) < 0)
		goto out;
	if (geteuid() == 0 && chown(path, uid, gid) < 0) {
		rc = pc_err_errno(err, PC_EIO, "chown %s", path);
		goto out;
	}
	newph[phl] = '\n';
	if ((rc = store_path(path, dir, name, ".placeholder", err)) < 0 ||
	    (rc = pc_file_write_atomic(path, newph, phl + 1, 0644, err)) < 0)
		goto out;
	newph[phl] = '\0';
	memcpy(ph, newph, phl + 1);
	rc = 0;
out:
	sodium_free(key);
	sodium_free(pt);
	free(sealed);
	return rc;
}

int store_secret_rm(const char *dir, const char *name, struct pc_err *err)
{
	char path[PC_PATH_MAX];
	int rc = 0;

	if (!store_name_valid(name))
		return pc_err_set(err, PC_EINVAL, "invalid secret name");
	if (store_path(path, dir, name, ".sealed", err) < 0)
		return PC_EINVAL;
	if (unlink(path) < 0)
		rc = pc_err_errno(err, errno == ENOENT ? PC_ENOENT : PC_EIO, "%s", path);
	if (store_path(path, dir, name, ".placeholder", err) < 0)
		return PC_EINVAL;
	if (unlink(path) < 0 && errno != ENOENT && rc == 0)
		rc = pc_err_errno(err, PC_EIO, "%s", path);
	return rc;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

int store_names(const char *dir, char (**names)[VAULT_NAME_MAX], size_t *n, struct pc_err *err)
{
	char(*v)[VAULT_NAME_MAX] = NULL;
	size_t cnt = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d) {
		if (errno == ENOENT) {
			*names = NULL;
			*n = 0;
			return 0;
		}
		return pc_err_errno(err, PC_EIO, "%s", dir);
	}
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char name[VAULT_NAME_MAX];

		if (l <= 7 || l - 7 >= VAULT_NAME_MAX || strcmp(de->d_name + l - 7, ".sealed"))
			continue;
		memcpy(name, de->d_name, l - 7);
		name[l - 7] = '\0';
		if (!store_name_valid(name))
			continue;
		if (cnt == cap) {
			void *nv = realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*v));

			if (!nv) {
				free(v);
				closedir(d);
				return pc_err_set(err, PC_ENOMEM, "out of memory");
			}
			v = nv;
		}
		memcpy(v[cnt++], name, sizeof(name));
	}
	closedir(d);
	if (cnt)
		qsort(v, cnt, sizeof(*v), name_cmp);
	*names = v;
	*n = cnt;
	return 0;
}

void store_free(struct vault_store *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n; i++)
		sodium_free(st->s[i].value); /* sodium_free wipes */
	free(st->s);
	free(st);
}

static int secret_load(const char *dir, const uint8_t *key, const char *name,
		       struct vault_secret *s, struct pc_err *err)
{
	char path[PC_PATH_MAX], *sealed = NULL;
	uint8_t *pt = NULL, *nl;
	size_t sl, pl;
	int rc;

	if ((rc = store_path(path, dir, name, ".sealed", err)) < 0)
		return rc;
	if ((rc = pc_file_read_regular(path, SEALED_MAX, &sealed, &sl, err)) < 0)
		return rc;
	if ((rc = store_unseal(key, (uint8_t *)sealed, sl, &pt, &pl, err)) < 0) {
		pc_err_prefix(err, "%s: ", path);
		goto out;
	}
	nl = memchr(pt, '\n', pl);
	if (!nl || !placeholder_valid(name, (char *)pt, (size_t)(nl - pt)) ||
	    pl - (size_t)(nl - pt) - 1 < 1) {
		rc = pc_err_set(err, PC_ETAMPER, "%s: sealed content is not for %s", path, name);
		goto out;
	}
	memset(s, 0, sizeof(*s));
	pc_strlcpy(s->name, name, sizeof(s->name));
	s->ph_len = (size_t)(nl - pt);
	memcpy(s->placeholder, pt, s->ph_len);
	s->placeholder[s->ph_len] = '\0';
	s->value_len = pl - s->ph_len - 1;
	s->value = sodium_malloc(s->value_len);
	if (!s->value) {
		rc = pc_err_set(err, PC_ENOMEM, "out of memory");
		goto out;
	}
	memcpy(s->value, nl + 1, s->value_len);
	sodium_mprotect_readonly(s->value);
	rc = 0;
out:
	sodium_free(pt);
	free(sealed);
	return rc;
}

/* Only the placeholder of a secret, from its public NAME.placeholder file:
 * what a worker knows of other sandboxes' secrets, so that their
 * placeholders are still refused as exfiltration rather than passed as
 * unknown strings. No value (value NULL, value_len 0). */
static int placeholder_load(const char *dir, const char *name, struct vault_secret *s,
			    struct pc_err *err)
{
	char path[PC_PATH_MAX], *txt = NULL;
	size_t len;
	int rc;

	if ((rc = store_path(path, dir, name, ".placeholder", err)) < 0 ||
	    (rc = pc_file_read(path, VAULT_PH_MAX + 1, &txt, &len, err)) < 0)
		return rc;
	if (len && txt[len - 1] == '\n')
		len--;
	if (!placeholder_valid(name, txt, len)) {
		free(txt);
		return pc_err_set(err, PC_ETAMPER, "%s is not a placeholder for %s", path, name);
	}
	memset(s, 0, sizeof(*s));
	pc_strlcpy(s->name, name, sizeof(s->name));
	memcpy(s->placeholder, txt, len);
	s->placeholder[len] = '\0';
	s->ph_len = len;
	free(txt);
	return 0;
}

int store_load(const char *dir, struct vault_store **out, struct pc_err *err)
{
	return store_load_only(dir, NULL, NULL, out, err);
}

int store_load_only(const char *dir, bool (*keep)(const char *name, void *arg), void *arg,
		    struct vault_store **out, struct pc_err *err)
{
	char(*names)[VAULT_NAME_MAX] = NULL;
	struct vault_store *st = NULL;
	uint8_t *key = NULL;
	size_t n = 0;
	int rc;

	if ((rc = store_names(dir, &names, &n, err)) < 0)
		return rc;
	st = calloc(1, sizeof(*st));
	if (!st || (n && !(st->s = calloc(n, sizeof(*st->s))))) {
		rc = pc_err_set(err, PC_ENOMEM, "out of memory");
		goto out;
	}
	if (n) {
		if (!(key = sodium_malloc(32))) {
			rc = pc_err_set(err, PC_ENOMEM, "out of memory");
			goto out;
		}
		if ((rc = key_read(dir, key, err)) < 0)
			goto out;
	}
	for (size_t i = 0; i < n; i++) {
		/* a worker unseals its own sandbox's secrets only: the others
		 * never exist in its memory in the clear */
		if (keep && !keep(names[i], arg))
			rc = placeholder_load(dir, names[i], &st->s[st->n], err);
		else
			rc = secret_load(dir, key, names[i], &st->s[st->n], err);
		if (rc < 0)
			goto out;
		st->n++;
	}
	*out = st;
	st = NULL;
	rc = 0;
out:
	sodium_free(key);
	free(names);
	store_free(st);
	return rc;
}
