/* checker: DSSE envelopes (pre-authentication encoding, ed25519 signature
 * with libsodium, base64) and the appliance key files, in forms that
 * `openssl pkeyutl -verify -rawin` reads without our tools. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>
#include <sodium.h>

#include "checker/checker_int.h"
#include "rules/rules.h"

/* DER prefixes of an ed25519 SubjectPublicKeyInfo and PKCS#8 private key
 * (RFC 8410): the 32 key bytes follow. */
static const uint8_t spki_prefix[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
					0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
static const uint8_t pkcs8_prefix[16] = {0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06,
					 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20};

uint8_t *dsse_pae(const char *type, const uint8_t *body, size_t blen, size_t *len)
{
	char head[256];
	int hl = snprintf(head, sizeof(head), "DSSEv1 %zu %s %zu ", strlen(type), type, blen);
	uint8_t *p;

	if (hl < 0 || (size_t)hl >= sizeof(head))
		return NULL;
	p = malloc((size_t)hl + blen + 1);
	if (!p)
		return NULL;
	memcpy(p, head, (size_t)hl);
	if (blen)
		memcpy(p + hl, body, blen);
	*len = (size_t)hl + blen;
	return p;
}

/* keyid: hex sha256 of the raw public key. */
static void cert_keyid(const uint8_t pk[32], char out[65])
{
	unsigned char md[32];
	unsigned int ml = 0;

	if (!EVP_Digest(pk, 32, md, &ml, EVP_sha256(), NULL))
		memset(md, 0, sizeof(md));
	for (int i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
}

static char *b64(const uint8_t *d, size_t len)
{
	size_t n = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
	char *s = malloc(n);

	if (s)
		sodium_bin2base64(s, n, d, len, sodium_base64_VARIANT_ORIGINAL);
	return s;
}

static int unb64(const char *s, uint8_t **out, size_t *outlen)
{
	size_t cap = strlen(s) / 4 * 3 + 3, n = 0;
	uint8_t *d = malloc(cap ? cap : 1);

	if (!d)
		return PC_ENOMEM;
	if (pc_b64_decode(d, cap, s, strlen(s), &n) != 0) {
		free(d);
		return PC_EPARSE;
	}
	*out = d;
	*outlen = n;
	return 0;
}

void cert_env_free(struct cert_env *e)
{
	if (!e)
		return;
	free(e->payload_type);
	free(e->payload);
	jv_free(e->statement);
	memset(e, 0, sizeof(*e));
}

int cert_env_parse(const char *buf, size_t len, struct cert_env *out, struct pc_err *err)
{
	struct jv *env = jv_parse(buf, len);
	const struct jv *sigs, *s0;
	struct cert_env e;
	uint8_t *sig = NULL;
	size_t siglen = 0;
	int rc = PC_EPARSE;

	memset(&e, 0, sizeof(e));
	if (!env || env->type != JV_OBJECT) {
		pc_err_set(err, PC_EPARSE, "not a JSON object (malformed certificate)");
		goto out;
	}
	if (!jv_str(jv_get(env, "payloadType")) || !jv_str(jv_get(env, "payload"))) {
		pc_err_set(err, PC_EPARSE, "envelope lacks payloadType or payload");
		goto out;
	}
	sigs = jv_get(env, "signatures");
	if (!sigs || sigs->type != JV_ARRAY || sigs->n != 1 ||
	    !jv_str(jv_get(s0 = sigs->items[0], "sig"))) {
		pc_err_set(err, PC_EPARSE, "envelope must hold exactly one signature");
		goto out;
	}
	e.payload_type = strdup(jv_str(jv_get(env, "payloadType")));
	if (!e.payload_type || unb64(jv_str(jv_get(env, "payload")), &e.payload, &e.payload_len)) {
		pc_err_set(err, PC_EPARSE, "payload is not base64");
		goto out;
	}
	if (unb64(jv_str(jv_get(s0, "sig")), &sig, &siglen) || siglen != 64) {
		pc_err_set(err, PC_EPARSE, "signature is not 64 bytes of base64");
		goto out;
	}
	memcpy(e.sig, sig, 64);
	pc_strlcpy(e.keyid, jv_str(jv_get(s0, "keyid")) ? jv_str(jv_get(s0, "keyid")) : "",
		   sizeof(e.keyid));
	e.statement = jv_parse((const char *)e.payload, e.payload_len);
	if (!e.statement || e.statement->type != JV_OBJECT) {
		pc_err_set(err, PC_EPARSE, "payload is not a JSON statement");
		goto out;
	}
	*out = e;
	memset(&e, 0, sizeof(e));
	rc = 0;
out:
	free(sig);
	cert_env_free(&e);
	jv_free(env);
	return rc;
}

int cert_env_verify(const struct cert_env *e, const uint8_t pk[32], struct pc_err *err)
{
	size_t plen = 0;
	uint8_t *pae = dsse_pae(e->payload_type, e->payload, e->payload_len, &plen);
	char kid[65];
	int ok;

	if (!pae)
		return pc_err_set(err, PC_ENOMEM, "PAE");
	ok = crypto_sign_verify_detached(e->sig, pae, plen, pk) == 0;
	free(pae);
	if (!ok)
		return pc_err_set(
		    err, PC_ETAMPER,
		    "signature does not verify with this key (tampered, or another key)");
	cert_keyid(pk, kid);
	if (e->keyid[0] && strcmp(e->keyid, kid) != 0)
		return pc_err_set(err, PC_ETAMPER, "keyid %s is not this key (%s)", e->keyid, kid);
	if (strcmp(e->payload_type, CERT_PAYLOAD_TYPE) != 0)
		return pc_err_set(err, PC_ETAMPER, "payloadType is not %s", CERT_PAYLOAD_TYPE);
	return 0;
}

int cert_env_sign(const char *payload, size_t len, const uint8_t sk[64], const uint8_t pk[32],
		  char **out, struct pc_err *err)
{
	size_t plen = 0;
	uint8_t *pae = dsse_pae(CERT_PAYLOAD_TYPE, (const uint8_t *)payload, len, &plen);
	uint8_t sig[64];
	char kid[65], *p64 = NULL, *s64 = NULL, *env;
	struct pc_buf b = {0};
	int rc = PC_ENOMEM;

	if (!pae)
		return pc_err_set(err, PC_ENOMEM, "PAE");
	crypto_sign_detached(sig, NULL, pae, plen, sk);
	free(pae);
	cert_keyid(pk, kid);
	p64 = b64((const uint8_t *)payload, len);
	s64 = b64(sig, sizeof(sig));
	if (!p64 || !s64)
		goto out;
	pc_buf_printf(&b, "{\"payloadType\":\"%s\",\"payload\":\"", CERT_PAYLOAD_TYPE);
	pc_buf_put(&b, p64, strlen(p64));
	pc_buf_printf(&b, "\",\"signatures\":[{\"keyid\":\"%s\",\"sig\":\"%s\"}]}\n", kid, s64);
	env = pc_buf_take(&b, NULL);
	if (!env)
		goto out;
	*out = env;
	rc = 0;
out:
	free(p64);
	free(s64);
	pc_buf_free(&b);
	return rc ? pc_err_set(err, rc, "signing: out of memory") : 0;
}

/* ---- key files ------------------------------------------------------------ */

int cert_key_paths(const struct config *cfg, char *key, char *pub, size_t len)
{
	if ((size_t)snprintf(key, len, "%s/appliance.key", cfg->state_dir) >= len ||
	    (size_t)snprintf(pub, len, "%s/appliance.pub", cfg->state_dir) >= len)
		return PC_EINVAL;
	return 0;
}

static int pem_read(const char *path, const char *label, const uint8_t *prefix, size_t plen,
		    uint8_t key[32], struct pc_err *err)
{
	char *buf = NULL, *b, *e, begin[64], end[64];
	uint8_t *der = NULL;
	size_t len = 0, dlen = 0;
	int rc;

	rc = pc_file_read(path, 4096, &buf, &len, err);
	if (rc < 0)
		return rc;
	snprintf(begin, sizeof(begin), "-----BEGIN %s-----", label);
	snprintf(end, sizeof(end), "-----END %s-----", label);
	b = strstr(buf, begin);
	e = b ? strstr(b, end) : NULL;
	rc = pc_err_set(err, PC_EPARSE, "%s: not a PEM %s", path, label);
	if (b && e) {
		char *p = b + strlen(begin), *w = p;

		*e = 0;
		for (; *p; p++) /* drop line breaks */
			if (*p != '\n' && *p != '\r')
				*w++ = *p;
		*w = 0;
		if (unb64(b + strlen(begin), &der, &dlen) == 0 && dlen == plen + 32 &&
		    memcmp(der, prefix, plen) == 0) {
			memcpy(key, der + plen, 32);
			rc = 0;
		}
	}
	if (der)
		sodium_memzero(der, dlen);
	free(der);
	sodium_memzero(buf, len);
	free(buf);
	return rc;
}

static int pem_write(const char *path, const char *label, const uint8_t *prefix, size_t plen,
		     const uint8_t key[32], mode_t mode, struct pc_err *err)
{
	uint8_t der[48];
	char *s, pem[256];
	int n, rc;

	memcpy(der, prefix, plen);
	memcpy(der + plen, key, 32);
	s = b64(der, plen + 32);
	sodium_memzero(der, sizeof(der));
	if (!s)
		return pc_err_set(err, PC_ENOMEM, "key encoding");
	n = snprintf(pem, sizeof(pem), "-----BEGIN %s-----\n%s\n-----END %s-----\n", label, s,
		     label);
	sodium_memzero(s, strlen(s));
	free(s);
	rc = pc_file_write_atomic(path, pem, (size_t)n, mode, err);
	sodium_memzero(pem, sizeof(pem));
	return rc;
}

int cert_pub_load(const char *pub, uint8_t pk[32], struct pc_err *err)
{
	return pem_read(pub, "PUBLIC KEY", spki_prefix, sizeof(spki_prefix), pk, err);
}

int cert_key_load_or_create(const char *key, const char *pub, bool create, uint8_t sk[64],
			    uint8_t pk[32], struct pc_err *err)
{
	uint8_t seed[32];
	struct stat sb;
	int rc;

	if (sodium_init() < 0)
		return pc_err_set(err, PC_EIO, "libsodium failed to initialise");
	if (stat(key, &sb) == 0) {
		rc = pem_read(key, "PRIVATE KEY", pkcs8_prefix, sizeof(pkcs8_prefix), seed, err);
		if (rc < 0)
			return rc;
		crypto_sign_seed_keypair(pk, sk, seed);
		sodium_memzero(seed, sizeof(seed));
		if (stat(pub, &sb) != 0)
			return pem_write(pub, "PUBLIC KEY", spki_prefix, sizeof(spki_prefix), pk,
					 0644, err);
		return 0;
	}
	if (!create)
		return pc_err_errno(err, PC_ENOENT, "%s", key);
	randombytes_buf(seed, sizeof(seed));
	crypto_sign_seed_keypair(pk, sk, seed);
	rc = pem_write(key, "PRIVATE KEY", pkcs8_prefix, sizeof(pkcs8_prefix), seed, 0600, err);
	sodium_memzero(seed, sizeof(seed));
	if (rc == 0)
		rc = pem_write(pub, "PUBLIC KEY", spki_prefix, sizeof(spki_prefix), pk, 0644, err);
	return rc;
}
