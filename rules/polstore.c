/* The policy store: every policy a daemon puts in force, kept under its
 * hash so that a log record's policy hash can be turned back into the
 * policy it names (docs/policy.md, "Policies kept by hash"). Nothing here
 * trusts a file for its name: what is read is hashed again. */
#include "rules/rules_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Far above any policy's canonical form (rules' own limits keep it to a
 * few MiB); a bound so that a huge file dropped in the store cannot make a
 * reader allocate without limit. */
#define POLSTORE_MAX_BYTES (64u << 20)

int polstore_dir(const struct config *cfg, char *out, size_t len, struct pc_err *err)
{
	int n = snprintf(out, len, "%s/%s", cfg->state_dir, POLSTORE_DIRNAME);

	if (n < 0 || (size_t)n >= len)
		return pc_err_set(err, PC_EINVAL, "policy store path too long: %s/%s",
				  cfg->state_dir, POLSTORE_DIRNAME);
	return 0;
}

int polstore_name(const char *hash, char out[POLSTORE_NAME_LEN + 1], struct pc_err *err)
{
	const char *hex = hash;
	char name[POLSTORE_NAME_LEN + 1] = "sha256:";

	if (strncmp(hash, "sha256:", 7) == 0)
		hex += 7;
	if (strlen(hex) != 64)
		goto bad;
	for (size_t i = 0; i < 64; i++) {
		char c = hex[i];

		if (c >= 'A' && c <= 'F')
			c = (char)(c - 'A' + 'a');
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			goto bad;
		name[7 + i] = c;
	}
	name[POLSTORE_NAME_LEN] = '\0';
	memcpy(out, name, sizeof(name));
	return 0;
bad:
	return pc_err_set(err, PC_EINVAL, "'%s' is not a policy hash (sha256:<64 hex digits>)",
			  hash);
}

static void hash_of(const char *text, size_t len, char out[POLSTORE_NAME_LEN + 1])
{
	unsigned char h[crypto_hash_sha256_BYTES];
	char hex[2 * crypto_hash_sha256_BYTES + 1];

	crypto_hash_sha256(h, (const unsigned char *)text, len);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(out, POLSTORE_NAME_LEN + 1, "sha256:%s", hex);
}

static int open_dir(const char *dir, struct pc_err *err)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (dfd >= 0)
		return dfd;
	if (errno == ENOENT)
		return pc_err_set(err, PC_ENOENT, "policy store %s does not exist", dir);
	if (errno == ELOOP || errno == ENOTDIR)
		return pc_err_set(err, PC_EREFUSED,
				  "policy store %s is not a directory (a symbolic link or a file)",
				  dir);
	return pc_err_errno(err, PC_EIO, "opening the policy store %s", dir);
}

/* Read dir/name, which must be a regular file whose SHA-256 is its name.
 * O_NONBLOCK: a FIFO planted under the name must not hang the daemon.
 * same (may be NULL): text known to hash to name; a file of the same bytes
 * hashes to it too, so equal bytes stand for the hash, which at 1,000
 * sandboxes (megabytes) cost a reload more than the comparison. */
static int read_verified(int dfd, const char *dir, const char *name, const char *same,
			 size_t same_len, char **text, size_t *len, struct pc_err *err)
{
	struct stat st;
	char *buf = NULL, got[POLSTORE_NAME_LEN + 1];
	size_t off = 0;
	int fd, rc;

	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return pc_err_set(err, PC_ENOENT, "no policy %s in the store %s", name,
					  dir);
		if (errno == ELOOP || errno == ENXIO)
			return pc_err_set(err, PC_EREFUSED,
					  "stored policy %s/%s is not a regular file", dir, name);
		return pc_err_errno(err, PC_EIO, "opening %s/%s", dir, name);
	}
	if (fstat(fd, &st) < 0) {
		rc = pc_err_errno(err, PC_EIO, "%s/%s", dir, name);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = pc_err_set(err, PC_EREFUSED, "stored policy %s/%s is not a regular file", dir,
				name);
		goto out;
	}
	if ((uint64_t)st.st_size > POLSTORE_MAX_BYTES) {
		rc =
		    pc_err_set(err, PC_ETAMPER,
			       "stored policy %s/%s does not match its name (tampered: %lld bytes)",
			       dir, name, (long long)st.st_size);
		goto out;
	}
	/* the size read is what counts, not st_size: the file may change */
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		rc = pc_err_set(err, PC_ENOMEM, "out of memory");
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf + off, (size_t)st.st_size + 1 - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = pc_err_errno(err, PC_EIO, "reading %s/%s", dir, name);
			goto out;
		}
		if (n == 0)
			break;
		off += (size_t)n;
		if (off > (size_t)st.st_size) {
			rc = pc_err_set(err, PC_ETAMPER,
					"stored policy %s/%s changed while it was read", dir, name);
			goto out;
		}
	}
	if (same && off == same_len && memcmp(buf, same, off) == 0)
		got[0] = '\0'; /* the same bytes: the same hash */
	else
		hash_of(buf, off, got);
	if (got[0] && strcmp(got, name) != 0) {
		rc =
		    pc_err_set(err, PC_ETAMPER,
			       "stored policy %s/%s does not match its name (tampered: its content "
			       "hashes to %s)",
			       dir, name, got);
		goto out;
	}
	buf[off] = '\0';
	*text = buf;
	*len = off;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

int polstore_get(const char *dir, const char *hash, char **text, size_t *len, struct pc_err *err)
{
	char name[POLSTORE_NAME_LEN + 1];
	int dfd, rc;

	if ((rc = polstore_name(hash, name, err)) < 0)
		return rc;
	if ((dfd = open_dir(dir, err)) < 0)
		return dfd;
	rc = read_verified(dfd, dir, name, NULL, 0, text, len, err);
	close(dfd);
	return rc;
}

/* The file under the name is there: it must be the same text (which
 * hashes to name). */
static int check_existing(int dfd, const char *dir, const char *name, const char *same,
			  size_t same_len, struct pc_err *err)
{
	char *text = NULL;
	size_t len;
	int rc = read_verified(dfd, dir, name, same, same_len, &text, &len, err);

	free(text);
	return rc;
}

/* text under name, which is its SHA-256 (the caller's word: computed here
 * from text, or by canon.c from the same bytes). */
static int put_named(const char *dir, const char *text, size_t len, const char *name,
		     struct pc_err *err)
{
	char tmp[64] = "";
	static unsigned counter;
	int dfd, fd = -1, rc;
	bool linked = false;

	if ((dfd = open_dir(dir, err)) < 0)
		return dfd;
	rc = check_existing(dfd, dir, name, text, len, err);
	if (rc != PC_ENOENT)
		goto out;
	/* Written under a name of its own, then linked: link() never replaces
	 * a file, so two writers (engine and vault) cannot clobber each other
	 * and a reader never sees a partial policy. */
	snprintf(tmp, sizeof(tmp), ".tmp-%ld-%u-%08x", (long)getpid(),
		 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED), randombytes_random());
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0) {
		rc = pc_err_errno(err, PC_EIO, "creating a file in the policy store %s", dir);
		tmp[0] = '\0';
		goto out;
	}
	/* the daemons' umask (0027) would hide it from auditors */
	if (fchmod(fd, 0444) < 0 || pc_write_all(fd, text, len) < 0 || fsync(fd) < 0) {
		rc = pc_err_errno(err, PC_EIO, "writing %s/%s", dir, tmp);
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		rc = pc_err_errno(err, PC_EIO, "writing %s/%s", dir, tmp);
		goto out;
	}
	fd = -1;
	if (linkat(dfd, tmp, dfd, name, 0) == 0) {
		linked = true;
	} else if (errno == EEXIST) {
		/* another writer was first: its file is checked as any other */
		if ((rc = check_existing(dfd, dir, name, text, len, err)) < 0)
			goto out;
	} else {
		rc = pc_err_errno(err, PC_EIO, "storing %s/%s", dir, name);
		goto out;
	}
	if (unlinkat(dfd, tmp, 0) < 0) {
		rc = pc_err_errno(err, PC_EIO, "removing %s/%s", dir, tmp);
		tmp[0] = '\0';
		goto out;
	}
	tmp[0] = '\0';
	if (linked && fsync(dfd) < 0) {
		rc = pc_err_errno(err, PC_EIO, "syncing the policy store %s", dir);
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0 && tmp[0])
		unlinkat(dfd, tmp, 0);
	close(dfd);
	return rc;
}

int polstore_put_text(const char *dir, const char *text, size_t len, char *hash_out,
		      size_t hash_len, struct pc_err *err)
{
	char name[POLSTORE_NAME_LEN + 1];
	int rc;

	if (sodium_init() < 0)
		return pc_err_set(err, PC_EIO, "libsodium did not initialise");
	hash_of(text, len, name);
	rc = put_named(dir, text, len, name, err);
	if (rc == 0 && hash_out)
		pc_strlcpy(hash_out, name, hash_len);
	return rc;
}

int polstore_put(const char *dir, const struct policy *p, struct pc_err *err)
{
	size_t len;
	const char *text = policy_canonical(p, &len);
	char name[POLSTORE_NAME_LEN + 1];
	int rc;

	/* The policy's hash is the SHA-256 of these very bytes (canon.c hashed
	 * the buffer it kept): hashing megabytes again cost each reload at
	 * 1,000 sandboxes ~10 ms and proved nothing more. The name is still
	 * checked for form, and every reader verifies the content. */
	if ((rc = polstore_name(policy_hash(p), name, err)) < 0)
		return rc;
	return put_named(dir, text, len, name, err);
}

int polstore_prepare(const struct config *cfg, struct pc_err *err)
{
	char dir[PC_PATH_MAX + 16];
	uid_t uid = 0, vuid;
	gid_t gid = 0, egid, vgid;
	struct stat st;
	int rc, dfd;

	if ((rc = polstore_dir(cfg, dir, sizeof(dir), err)) < 0)
		return rc;
	if (mkdir(dir, 0700) == 0) {
		/* owner the engine's user, group the vault user's: both write
		 * here after their drop (privdrop keeps no supplementary
		 * group); a user this machine lacks leaves root's */
		if (pc_user_lookup(cfg->engine.user, &uid, &egid, NULL) == 0)
			gid = egid;
		if (pc_user_lookup(cfg->vault.user, &vuid, &vgid, NULL) == 0)
			gid = vgid;
		if ((dfd = open_dir(dir, err)) < 0)
			return dfd;
		if (fchown(dfd, uid, gid) < 0 || fchmod(dfd, 01775) < 0) {
			rc = pc_err_errno(err, PC_EIO, "setting the owner of the policy store %s",
					  dir);
			close(dfd);
			return rc;
		}
		close(dfd);
		return 0;
	}
	if (errno != EEXIST)
		return pc_err_errno(err, PC_EIO, "creating the policy store %s", dir);
	if (lstat(dir, &st) < 0)
		return pc_err_errno(err, PC_EIO, "policy store %s", dir);
	if (!S_ISDIR(st.st_mode))
		return pc_err_set(err, PC_EREFUSED,
				  "policy store %s is not a directory (a symbolic link or a file)",
				  dir);
	return 0;
}

int polstore_put_cfg(const struct config *cfg, const struct policy *p, struct pc_err *err)
{
	char dir[PC_PATH_MAX + 16];
	int rc;

	if ((rc = polstore_dir(cfg, dir, sizeof(dir), err)) < 0)
		return rc;
	if ((rc = polstore_put(dir, p, err)) < 0)
		pc_err_prefix(err, "storing the policy: ");
	return rc;
}
