/* The appliance CA (`portcullis ca init`) and the leaf certificates the vault
 * mints from it per TLS server name: ECDSA P-256, short-lived, cached. */
#include "vault/vault_int.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct leaf {
	char host[256];
	X509 *cert;
	EVP_PKEY *key;
	uint64_t minted_ms; /* monotonic */
};

struct vault_ca {
	/* the CA's own (ca_load: the CA process and -t), or NULL in the
	 * daemon, whose leaves signer signs (ca_client_new) */
	X509 *cert;
	EVP_PKEY *key;
	struct casign *signer;
	/* Connection threads share the cache; the mutex guards leaves[] and n. */
	pthread_mutex_t lock;
	struct leaf leaves[VAULT_LEAF_CACHE];
	size_t n;
};

static int ossl_err(struct pc_err *err, int code, const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();

	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	return pc_err_set(err, code, "%s: %s", what, e ? buf : "failed");
}

static int serial_set(X509 *x)
{
	unsigned char r[16];
	BIGNUM *bn;
	int ok;

	if (RAND_bytes(r, sizeof(r)) != 1)
		return 0;
	r[0] &= 0x7f; /* positive */
	bn = BN_bin2bn(r, sizeof(r), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
	BN_free(bn);
	return ok;
}

static int ext_add(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *e;
	int ok;

	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!e)
		return 0;
	ok = X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
	return ok;
}

/* A certificate for subject_cn signed by (issuer, ikey); issuer NULL makes
 * it self-signed with key. */
static X509 *cert_make(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *ikey, long valid_from,
		       long valid_secs, bool is_ca, const char *host)
{
	X509 *x = X509_new();
	X509_NAME *name = NULL;
	char san[300];

	if (!x || !X509_set_version(x, 2) || !serial_set(x) ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), valid_from) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), valid_secs) || !X509_set_pubkey(x, key))
		goto fail;
	name = X509_NAME_new();
	if (!name ||
	    !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
					-1, 0) ||
	    !X509_set_subject_name(x, name) ||
	    !X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name))
		goto fail;
	if (is_ca) {
		if (!ext_add(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
		    !ext_add(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") ||
		    !ext_add(x, x, NID_subject_key_identifier, "hash"))
			goto fail;
	} else {
		snprintf(san, sizeof(san), "DNS:%s", host);
		if (!ext_add(x, issuer, NID_basic_constraints, "critical,CA:FALSE") ||
		    !ext_add(x, issuer, NID_key_usage, "critical,digitalSignature") ||
		    !ext_add(x, issuer, NID_ext_key_usage, "serverAuth") ||
		    !ext_add(x, issuer, NID_subject_alt_name, san) ||
		    !ext_add(x, issuer, NID_authority_key_identifier, "keyid:always"))
			goto fail;
	}
	if (!X509_sign(x, issuer ? ikey : key, EVP_sha256()))
		goto fail;
	X509_NAME_free(name);
	return x;
fail:
	X509_NAME_free(name);
	X509_free(x);
	return NULL;
}

static int pem_write(const char *path, mode_t mode, uid_t uid, gid_t gid, X509 *cert, EVP_PKEY *key,
		     struct pc_err *err)
{
	char tmp[PC_PATH_MAX + 8];
	FILE *f;
	int fd, ok;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "creating %s", tmp);
	if (geteuid() == 0 && fchown(fd, uid, gid) < 0) {
		close(fd);
		unlink(tmp);
		return pc_err_errno(err, PC_EIO, "chown %s", tmp);
	}
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		return pc_err_errno(err, PC_EIO, "%s", tmp);
	}
	ok = cert ? PEM_write_X509(f, cert)
		  : PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
	ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
	if (fclose(f) != 0)
		ok = 0;
	if (!ok || rename(tmp, path) < 0) {
		unlink(tmp);
		return pc_err_errno(err, PC_EIO, "writing %s", path);
	}
	return 0;
}

int ca_init(const char *dir, uid_t uid, gid_t gid, bool force, struct pc_err *err)
{
	char kpath[PC_PATH_MAX], cpath[PC_PATH_MAX], host[64] = "gateway";
	char cn[160];
	EVP_PKEY *key = NULL;
	X509 *cert = NULL;
	int rc;

	if ((size_t)snprintf(kpath, sizeof(kpath), "%s/ca.key", dir) >= sizeof(kpath) ||
	    (size_t)snprintf(cpath, sizeof(cpath), "%s/ca.pem", dir) >= sizeof(cpath))
		return pc_err_set(err, PC_EINVAL, "path too long: %s", dir);
	if (!force && (access(kpath, F_OK) == 0 || access(cpath, F_OK) == 0))
		return pc_err_set(err, PC_EEXIST, "%s already has a CA (use --force to replace it)",
				  dir);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return pc_err_errno(err, PC_EIO, "creating %s", dir);
	gethostname(host, sizeof(host) - 1);
	snprintf(cn, sizeof(cn), "portcullis appliance CA (%s)", host);
	key = EVP_EC_gen("P-256");
	if (!key) {
		rc = ossl_err(err, PC_EIO, "generating the CA key");
		goto out;
	}
	/* ten years: the CA is what sandboxes trust; rotating it is `ca init --force` */
	cert = cert_make(key, cn, NULL, NULL, -3600, 10L * 366 * 86400, true, NULL);
	if (!cert) {
		rc = ossl_err(err, PC_EIO, "making the CA certificate");
		goto out;
	}
	if ((rc = pem_write(kpath, 0400, uid, gid, NULL, key, err)) < 0 ||
	    (rc = pem_write(cpath, 0644, 0, 0, cert, NULL, err)) < 0)
		goto out;
	rc = 0;
out:
	EVP_PKEY_free(key);
	X509_free(cert);
	return rc;
}

int ca_load(const char *dir, struct vault_ca **out, struct pc_err *err)
{
	char path[PC_PATH_MAX];
	struct vault_ca *ca;
	FILE *f;
	int rc = PC_EIO;

	ca = calloc(1, sizeof(*ca));
	if (!ca)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	pthread_mutex_init(&ca->lock, NULL);
	snprintf(path, sizeof(path), "%s/ca.pem", dir);
	if (!(f = fopen(path, "re"))) {
		rc = pc_err_errno(err, PC_ENOENT, "%s (run `portcullis ca init`)", path);
		goto fail;
	}
	ca->cert = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	snprintf(path, sizeof(path), "%s/ca.key", dir);
	if (!(f = fopen(path, "re"))) {
		rc = pc_err_errno(err, PC_EPERM, "%s", path);
		goto fail;
	}
	ca->key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (!ca->cert || !ca->key) {
		rc = ossl_err(err, PC_EPARSE, "reading the CA certificate or key");
		goto fail;
	}
	if (X509_check_private_key(ca->cert, ca->key) != 1) {
		rc = ossl_err(err, PC_ETAMPER, "CA key does not match the CA certificate");
		goto fail;
	}
	*out = ca;
	return 0;
fail:
	ca_free(ca);
	return rc;
}

int ca_client_new(struct casign *signer, struct vault_ca **out, struct pc_err *err)
{
	struct vault_ca *ca = calloc(1, sizeof(*ca));

	if (!ca)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	pthread_mutex_init(&ca->lock, NULL);
	ca->signer = signer;
	*out = ca;
	return 0;
}

void *ca_leaf_sign(struct vault_ca *ca, const char *host, void *pub)
{
	if (!ca->cert || !ca->key)
		return NULL;
	return cert_make(pub, host, ca->cert, ca->key, -3600, (long)VAULT_LEAF_HOURS * 3600, false,
			 host);
}

void ca_free(struct vault_ca *ca)
{
	if (!ca)
		return;
	for (size_t i = 0; i < ca->n; i++) {
		X509_free(ca->leaves[i].cert);
		EVP_PKEY_free(ca->leaves[i].key);
	}
	X509_free(ca->cert);
	EVP_PKEY_free(ca->key);
	pthread_mutex_destroy(&ca->lock);
	free(ca);
}

/* Leaves are reminted after this much of their validity has passed, so a
 * handed-out leaf always has hours left. */
#define LEAF_REFRESH_MS ((uint64_t)(VAULT_LEAF_HOURS - 2) * 3600 * 1000)

int ca_leaf_get(struct vault_ca *ca, const char *host, uint16_t port, void **cert, void **key,
		struct pc_err *err)
{
	uint64_t now = pc_now_mono_ms();
	struct leaf *slot = NULL;
	EVP_PKEY *k;
	X509 *x;

	pthread_mutex_lock(&ca->lock);
	for (size_t i = 0; i < ca->n; i++) {
		struct leaf *l = &ca->leaves[i];

		if (strcmp(l->host, host) == 0 && now - l->minted_ms < LEAF_REFRESH_MS) {
			X509_up_ref(l->cert);
			EVP_PKEY_up_ref(l->key);
			*cert = l->cert;
			*key = l->key;
			pthread_mutex_unlock(&ca->lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&ca->lock);

	/* Mint outside the lock: signing must not serialise handshakes. Two
	 * threads may mint for the same host at once; both leaves are valid. */
	k = EVP_EC_gen("P-256");
	if (!k)
		return ossl_err(err, PC_EIO, "making a leaf key");
	if (ca->signer) {
		void *v = NULL;
		int rc = casign_sign(ca->signer, host, port, k, &v, err);

		if (rc < 0) {
			EVP_PKEY_free(k);
			return rc;
		}
		x = v;
	} else {
		x = ca_leaf_sign(ca, host, k);
	}
	if (!x) {
		EVP_PKEY_free(k);
		return ossl_err(err, PC_EIO, "minting a leaf certificate");
	}

	pthread_mutex_lock(&ca->lock);
	for (size_t i = 0; i < ca->n && !slot; i++)
		if (strcmp(ca->leaves[i].host, host) == 0)
			slot = &ca->leaves[i];
	if (!slot && ca->n < VAULT_LEAF_CACHE)
		slot = &ca->leaves[ca->n++];
	if (!slot) { /* full: evict the oldest */
		slot = &ca->leaves[0];
		for (size_t i = 1; i < ca->n; i++)
			if (ca->leaves[i].minted_ms < slot->minted_ms)
				slot = &ca->leaves[i];
	}
	if (slot->cert) {
		X509_free(slot->cert);
		EVP_PKEY_free(slot->key);
	}
	pc_strlcpy(slot->host, host, sizeof(slot->host));
	slot->cert = x;
	slot->key = k;
	slot->minted_ms = now;
	X509_up_ref(x);
	EVP_PKEY_up_ref(k);
	pthread_mutex_unlock(&ca->lock);
	*cert = x;
	*key = k;
	return 0;
}
