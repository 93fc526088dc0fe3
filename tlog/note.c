/* C2SP signed notes with ed25519 (libsodium) and tlog checkpoints: key
 * strings in the golang.org/x/mod/sumdb/note format, signing, verifying,
 * and the checkpoint body (origin, size, root, our "time" extension). */
#include "tlog/tlog_int.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALG_ED25519 0x01

/* Lives in sodium_malloc memory: guarded, locked, wiped by sodium_free. */
struct note_signer {
	struct note_verifier pub;
	uint8_t sk[crypto_sign_SECRETKEYBYTES]; /* seed || public key */
};

static bool name_valid(const char *n)
{
	size_t len = strlen(n);

	if (len == 0 || len >= NOTE_NAME_MAX)
		return false;
	/* Names go on note lines and in JSON: printable ASCII without space,
	 * '+' (the key string separator), quote or backslash. */
	for (const char *p = n; *p; p++)
		if (*p <= 0x20 || *p >= 0x7f || *p == '+' || *p == '"' || *p == '\\')
			return false;
	return true;
}

size_t note_body_len(const char *note, size_t len)
{
	const char *split = NULL, *end = note + len;

	for (const char *p = note; (p = memmem(p, (size_t)(end - p), "\n\n", 2)); p++)
		split = p;
	return split ? (size_t)(split + 1 - note) : 0;
}

uint32_t note_key_id(const char *name, uint8_t alg, const uint8_t pk[32])
{
	crypto_hash_sha256_state st;
	uint8_t h[32];

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const uint8_t *)name, strlen(name));
	crypto_hash_sha256_update(&st, (const uint8_t *)"\n", 1);
	crypto_hash_sha256_update(&st, &alg, 1);
	crypto_hash_sha256_update(&st, pk, 32);
	crypto_hash_sha256_final(&st, h);
	return (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
}

static int sodium_ready(struct pc_err *err)
{
	if (sodium_init() < 0)
		return pc_err_set(err, PC_EIO, "libsodium failed to initialise");
	return 0;
}

static struct note_signer *signer_alloc(void)
{
	struct note_signer *s = sodium_malloc(sizeof(*s));

	if (s)
		memset(s, 0, sizeof(*s));
	return s;
}

void note_signer_free(struct note_signer *s)
{
	if (s)
		sodium_free(s);
}

const struct note_verifier *note_signer_verifier(const struct note_signer *s)
{
	return &s->pub;
}

static int signer_from_seed(const char *name, const uint8_t seed[32], struct note_signer **out,
			    struct pc_err *err)
{
	struct note_signer *s;

	if (!name_valid(name))
		return pc_err_set(err, PC_EINVAL,
				  "key name \"%s\" must be 1-%d printable characters without "
				  "spaces, '+', quotes or backslashes",
				  name, NOTE_NAME_MAX - 1);
	s = signer_alloc();
	if (!s)
		return pc_err_set(err, PC_ENOMEM, "no locked memory for the signing key");
	if (crypto_sign_seed_keypair(s->pub.pk, s->sk, seed) != 0) {
		note_signer_free(s);
		return pc_err_set(err, PC_EIO, "ed25519 key derivation failed");
	}
	pc_strlcpy(s->pub.name, name, sizeof(s->pub.name));
	s->pub.hash = note_key_id(name, ALG_ED25519, s->pub.pk);
	*out = s;
	return 0;
}

int note_signer_generate(const char *name, struct note_signer **out, struct pc_err *err)
{
	uint8_t seed[32];
	int rc;

	if (sodium_ready(err) < 0)
		return PC_EIO;
	randombytes_buf(seed, sizeof(seed));
	rc = signer_from_seed(name, seed, out, err);
	sodium_memzero(seed, sizeof(seed));
	return rc;
}

/* "name+hash8hex+base64(alg||key32)" into name/hash/key; the text ends at
 * end or at a newline. */
static int keystr_parse(const char *text, char *name, uint32_t *hash, uint8_t key[32],
			struct pc_err *err)
{
	const char *p1, *p2, *end = text + strcspn(text, "\n");
	uint8_t raw[33];
	size_t rawlen = 0, nlen;
	char hx[9], *ep;
	int rc = PC_EPARSE;

	if (*end == '\n' && end[1] != '\0')
		return pc_err_set(err, PC_EPARSE, "key has more than one line");
	/* the name has no '+'; the base64 key may */
	p1 = memchr(text, '+', (size_t)(end - text));
	if (!p1)
		goto bad;
	p2 = memchr(p1 + 1, '+', (size_t)(end - p1 - 1));
	if (!p2)
		goto bad;
	nlen = (size_t)(p1 - text);
	if (nlen == 0 || nlen >= NOTE_NAME_MAX || p2 - p1 - 1 != 8)
		goto bad;
	memcpy(name, text, nlen);
	name[nlen] = '\0';
	if (!name_valid(name))
		goto bad;
	memcpy(hx, p1 + 1, 8);
	hx[8] = '\0';
	errno = 0;
	*hash = (uint32_t)strtoul(hx, &ep, 16);
	if (*ep || errno || strspn(hx, "0123456789abcdef") != 8)
		goto bad;
	if (pc_b64_decode(raw, sizeof(raw), p2 + 1, (size_t)(end - p2 - 1), &rawlen) != 0 ||
	    rawlen != 33)
		goto bad;
	if (raw[0] != ALG_ED25519) {
		rc = pc_err_set(err, PC_EUNSUPP, "key algorithm %u is not ed25519", raw[0]);
		goto out;
	}
	memcpy(key, raw + 1, 32);
	rc = 0;
	goto out;
bad:
	pc_err_set(err, PC_EPARSE, "not a signed-note key (expected name+hash+base64)");
out:
	sodium_memzero(raw, sizeof(raw));
	return rc;
}

int note_signer_parse(const char *text, struct note_signer **out, struct pc_err *err)
{
	static const char pfx[] = "PRIVATE+KEY+";
	char name[NOTE_NAME_MAX];
	uint8_t seed[32];
	uint32_t hash;
	struct note_signer *s = NULL;
	int rc;

	if (sodium_ready(err) < 0)
		return PC_EIO;
	if (strncmp(text, pfx, sizeof(pfx) - 1) != 0)
		return pc_err_set(err, PC_EPARSE, "not a private key (expected PRIVATE+KEY+...)");
	rc = keystr_parse(text + sizeof(pfx) - 1, name, &hash, seed, err);
	if (rc == 0)
		rc = signer_from_seed(name, seed, &s, err);
	sodium_memzero(seed, sizeof(seed));
	if (rc < 0)
		return rc;
	if (s->pub.hash != hash) {
		note_signer_free(s);
		return pc_err_set(err, PC_EPARSE, "private key's hash does not match its key");
	}
	*out = s;
	return 0;
}

static int keystr_format(const char *prefix, const char *name, uint32_t hash, const uint8_t key[32],
			 char *buf, size_t len)
{
	uint8_t raw[33];
	char b64[64];
	int n;

	raw[0] = ALG_ED25519;
	memcpy(raw + 1, key, 32);
	sodium_bin2base64(b64, sizeof(b64), raw, sizeof(raw), B64);
	n = snprintf(buf, len, "%s%s+%08x+%s\n", prefix, name, hash, b64);
	sodium_memzero(raw, sizeof(raw));
	sodium_memzero(b64, sizeof(b64));
	if (n < 0 || (size_t)n >= len)
		return PC_EINVAL;
	return n;
}

int note_signer_format(const struct note_signer *s, char *buf, size_t len)
{
	/* libsodium's secret key is seed || public key: the seed is the key */
	return keystr_format("PRIVATE+KEY+", s->pub.name, s->pub.hash, s->sk, buf, len);
}

int note_verifier_parse(const char *text, struct note_verifier *out, struct pc_err *err)
{
	struct note_verifier v;

	if (keystr_parse(text, v.name, &v.hash, v.pk, err) < 0)
		return PC_EPARSE;
	if (note_key_id(v.name, ALG_ED25519, v.pk) != v.hash)
		return pc_err_set(err, PC_EPARSE, "verifier key's hash does not match its key");
	*out = v;
	return 0;
}

int note_verifier_format(const struct note_verifier *v, char *buf, size_t len)
{
	return keystr_format("", v->name, v->hash, v->pk, buf, len);
}

/* Sign body (non-empty lines, each ending in \n): writes the whole note
 * into out and returns its length. */
static int note_sign(const struct note_signer *s, const char *body, size_t body_len, char *out,
		     size_t outlen, struct pc_err *err)
{
	uint8_t sig[4 + crypto_sign_BYTES];
	char b64[sodium_base64_ENCODED_LEN(sizeof(sig), B64)];
	int n;

	if (body_len == 0 || body[body_len - 1] != '\n' || memmem(body, body_len, "\n\n", 2) ||
	    memchr(body, '\0', body_len))
		return pc_err_set(err, PC_EINVAL,
				  "note text must be non-empty lines ending in \\n");
	sig[0] = (uint8_t)(s->pub.hash >> 24);
	sig[1] = (uint8_t)(s->pub.hash >> 16);
	sig[2] = (uint8_t)(s->pub.hash >> 8);
	sig[3] = (uint8_t)s->pub.hash;
	crypto_sign_detached(sig + 4, NULL, (const uint8_t *)body, body_len, s->sk);
	sodium_bin2base64(b64, sizeof(b64), sig, sizeof(sig), B64);
	n = snprintf(out, outlen, "%.*s\n" EMDASH " %s %s\n", (int)body_len, body, s->pub.name,
		     b64);
	if (n < 0 || (size_t)n >= outlen)
		return pc_err_set(err, PC_EINVAL, "signed note does not fit in %zu bytes", outlen);
	return n;
}

int note_verify(const struct note_verifier *v, const char *note, size_t len, size_t *body_len,
		struct pc_err *err)
{
	const char *split, *p, *end = note + len;
	bool ours = false;
	size_t nlen = strlen(v->name), blen;

	if (len == 0 || note[len - 1] != '\n' || memchr(note, '\0', len))
		return pc_err_set(err, PC_EPARSE, "note does not end with a newline");
	if (!(blen = note_body_len(note, len)))
		return pc_err_set(err, PC_EPARSE, "note has no signature block");
	split = note + blen - 1;
	for (p = split + 2; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *sp;
		uint8_t sig[4 + crypto_sign_BYTES + 1];
		size_t siglen = 0;
		uint32_t hash;

		if (!eol || (size_t)(eol - p) < sizeof(EMDASH) ||
		    memcmp(p, EMDASH " ", sizeof(EMDASH)) != 0)
			return pc_err_set(err, PC_EPARSE, "malformed signature line in note");
		p += sizeof(EMDASH);
		sp = memchr(p, ' ', (size_t)(eol - p));
		if (!sp || sp == p)
			return pc_err_set(err, PC_EPARSE, "malformed signature line in note");
		if ((size_t)(sp - p) != nlen || memcmp(p, v->name, nlen) != 0) {
			p = eol + 1; /* someone else's signature (a witness): not ours to check */
			continue;
		}
		if (pc_b64_decode(sig, sizeof(sig), sp + 1, (size_t)(eol - sp - 1), &siglen) != 0 ||
		    siglen < 4)
			return pc_err_set(err, PC_EPARSE, "signature is not base64");
		hash = (uint32_t)sig[0] << 24 | (uint32_t)sig[1] << 16 | (uint32_t)sig[2] << 8 |
		       sig[3];
		if (hash == v->hash) {
			if (siglen != sizeof(sig) - 1 ||
			    crypto_sign_verify_detached(sig + 4, (const uint8_t *)note,
							(size_t)(split + 1 - note), v->pk) != 0)
				return pc_err_set(err, PC_ETAMPER,
						  "signature by %s+%08x does not verify", v->name,
						  v->hash);
			ours = true;
		}
		p = eol + 1;
	}
	if (!ours)
		return pc_err_set(err, PC_ETAMPER, "not signed by key %s+%08x", v->name, v->hash);
	*body_len = (size_t)(split + 1 - note);
	return 0;
}

/* ---- checkpoints ------------------------------------------------------ */

int checkpoint_body_format(const struct checkpoint *c, char *buf, size_t len)
{
	char root[sodium_base64_ENCODED_LEN(MERKLE_HASH, B64)], ts[32];
	int n;

	sodium_bin2base64(root, sizeof(root), c->root, MERKLE_HASH, B64);
	n = snprintf(buf, len, "%s\n%llu\n%s\ntime %s\n", c->origin, (unsigned long long)c->size,
		     root, pc_time_rfc3339(c->time_ms, ts, sizeof(ts)));
	if (n < 0 || (size_t)n >= len)
		return PC_EINVAL;
	if (c->has_prev) {
		int m;

		sodium_bin2base64(root, sizeof(root), c->prev_root, MERKLE_HASH, B64);
		m = snprintf(buf + n, len - (size_t)n, "previous %llu %llu %s\n",
			     (unsigned long long)c->prev_seg, (unsigned long long)c->prev_size,
			     root);
		if (m < 0 || (size_t)m >= len - (size_t)n)
			return PC_EINVAL;
		n += m;
	}
	return n;
}

/* The value of n decimal digits (checked to be digits by the caller). */
static unsigned digits(const char *s, size_t n)
{
	unsigned v = 0;

	for (size_t i = 0; i < n; i++)
		v = v * 10 + (unsigned)(s[i] - '0');
	return v;
}

/* "2026-11-29T14:02:13.123Z" exactly (what pc_time_rfc3339 writes). */
int logd_time_parse(const char *s, size_t len, uint64_t *ms)
{
	struct tm tm;
	unsigned msec;
	time_t t;

	if (len != 24 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
	    s[16] != ':' || s[19] != '.' || s[23] != 'Z')
		return PC_EPARSE;
	for (size_t i = 0; i < 23; i++)
		if (i != 4 && i != 7 && i != 10 && i != 13 && i != 16 && i != 19 &&
		    (s[i] < '0' || s[i] > '9'))
			return PC_EPARSE;
	/* The digits are read where they stand: s is not NUL-terminated (it is
	 * a slice of a checkpoint line), so sscanf, which first measures the
	 * whole string, would read past it. */
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = (int)digits(s, 4);
	tm.tm_mon = (int)digits(s + 5, 2);
	tm.tm_mday = (int)digits(s + 8, 2);
	tm.tm_hour = (int)digits(s + 11, 2);
	tm.tm_min = (int)digits(s + 14, 2);
	tm.tm_sec = (int)digits(s + 17, 2);
	msec = digits(s + 20, 3);
	if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
	    tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
		return PC_EPARSE;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	t = timegm(&tm);
	if (t < 0)
		return PC_EPARSE;
	*ms = (uint64_t)t * 1000 + msec;
	return 0;
}

/* A decimal of a line, no leading zero: its length, or 0. */
static size_t dec_field(const char *p, const char *end, uint64_t *out)
{
	const char *q = p;
	uint64_t x = 0;

	for (; q < end && *q >= '0' && *q <= '9'; q++) {
		if (x > (UINT64_MAX - 9) / 10)
			return 0;
		x = x * 10 + (uint64_t)(*q - '0');
	}
	if (q == p || (*p == '0' && q - p > 1))
		return 0;
	*out = x;
	return (size_t)(q - p);
}

/* "<seg> <size> <root base64>" of a previous line. */
static int previous_parse(const char *p, size_t len, struct checkpoint *c)
{
	const char *end = p + len;
	size_t n, rootlen = 0;

	if (!(n = dec_field(p, end, &c->prev_seg)) || p + n >= end || p[n] != ' ')
		return PC_EPARSE;
	p += n + 1;
	if (!(n = dec_field(p, end, &c->prev_size)) || p + n >= end || p[n] != ' ')
		return PC_EPARSE;
	p += n + 1;
	if (end - p != 44 || pc_b64_decode(c->prev_root, MERKLE_HASH, p, 44, &rootlen) != 0 ||
	    rootlen != MERKLE_HASH)
		return PC_EPARSE;
	c->has_prev = true;
	return 0;
}

int checkpoint_body_parse(const char *body, size_t len, struct checkpoint *out, struct pc_err *err)
{
	struct checkpoint c;
	const char *p = body, *end = body + len, *eol;
	size_t n, rootlen = 0;
	bool have_time = false;

	memset(&c, 0, sizeof(c));
	/* origin */
	eol = memchr(p, '\n', (size_t)(end - p));
	if (!eol || (n = (size_t)(eol - p)) == 0 || n >= sizeof(c.origin))
		return pc_err_set(err, PC_EPARSE, "checkpoint has no origin line");
	memcpy(c.origin, p, n);
	if (!name_valid(c.origin))
		return pc_err_set(err, PC_EPARSE, "checkpoint origin is not a valid name");
	p = eol + 1;
	/* size: decimal, no leading zeros */
	eol = memchr(p, '\n', (size_t)(end - p));
	if (!eol || eol == p || eol - p > 20 || (*p == '0' && eol - p > 1))
		return pc_err_set(err, PC_EPARSE, "checkpoint has no tree size line");
	for (const char *q = p; q < eol; q++) {
		if (*q < '0' || *q > '9' || c.size > (UINT64_MAX - 9) / 10)
			return pc_err_set(err, PC_EPARSE, "checkpoint tree size is not a number");
		c.size = c.size * 10 + (uint64_t)(*q - '0');
	}
	p = eol + 1;
	/* root hash, base64 */
	eol = memchr(p, '\n', (size_t)(end - p));
	if (!eol || pc_b64_decode(c.root, sizeof(c.root), p, (size_t)(eol - p), &rootlen) != 0 ||
	    rootlen != MERKLE_HASH || eol - p != 44)
		return pc_err_set(err, PC_EPARSE, "checkpoint root hash is not 32 bytes of base64");
	p = eol + 1;
	/* extension lines: ours is "time <RFC 3339>"; others are not ours */
	while (p < end) {
		eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol || eol == p)
			return pc_err_set(err, PC_EPARSE,
					  "checkpoint has an empty or unterminated line");
		if (eol - p > 5 && memcmp(p, "time ", 5) == 0) {
			if (have_time ||
			    logd_time_parse(p + 5, (size_t)(eol - p - 5), &c.time_ms) < 0)
				return pc_err_set(err, PC_EPARSE,
						  "checkpoint time line is malformed");
			have_time = true;
		} else if (eol - p > 9 && memcmp(p, "previous ", 9) == 0) {
			if (c.has_prev || previous_parse(p + 9, (size_t)(eol - p - 9), &c) < 0)
				return pc_err_set(err, PC_EPARSE,
						  "checkpoint previous line is malformed");
		}
		p = eol + 1;
	}
	if (!have_time)
		return pc_err_set(err, PC_EPARSE, "checkpoint has no time line");
	*out = c;
	return 0;
}

int checkpoint_sign(const struct note_signer *s, const struct checkpoint *c, char *out,
		    size_t outlen, struct pc_err *err)
{
	char body[NOTE_NAME_MAX + 256];
	int n = checkpoint_body_format(c, body, sizeof(body));

	if (n < 0)
		return pc_err_set(err, PC_EINVAL, "checkpoint does not fit");
	return note_sign(s, body, (size_t)n, out, outlen, err);
}

int checkpoint_open(const struct note_verifier *v, const char *note, size_t len,
		    struct checkpoint *out, struct pc_err *err)
{
	struct checkpoint c;
	size_t body_len;
	int rc;

	rc = note_verify(v, note, len, &body_len, err);
	if (rc < 0)
		return rc;
	if (checkpoint_body_parse(note, body_len, &c, err) < 0)
		return PC_EPARSE;
	{ /* the key's name, or one of its segments' (tlog/origin.c) */
		uint64_t seg;

		if (checkpoint_origin_seg(c.origin, v->name, &seg) < 0)
			return pc_err_set(err, PC_ETAMPER,
					  "checkpoint origin %s is not the key's log %s", c.origin,
					  v->name);
	}
	*out = c;
	return 0;
}

/* ---- raw signatures (cosignatures, tlog/cosig.c) ------------------------ */

void note_signer_sign_raw(const struct note_signer *s, const void *msg, size_t len, uint8_t sig[64])
{
	crypto_sign_detached(sig, NULL, msg, len, s->sk);
}
