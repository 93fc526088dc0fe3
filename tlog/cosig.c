/* C2SP tlog-cosignature v1: the witness's key in its public text form, the
 * signature line a witness adds to a checkpoint, and its verification. */
#include "tlog/tlog_int.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALG_COSIG 0x04

void cosig_verifier_from(const struct note_signer *s, struct cosig_verifier *out)
{
	const struct note_verifier *v = note_signer_verifier(s);

	pc_strlcpy(out->name, v->name, sizeof(out->name));
	memcpy(out->pk, v->pk, 32);
	out->hash = note_key_id(v->name, ALG_COSIG, v->pk);
}

int cosig_verifier_parse(const char *text, struct cosig_verifier *out, struct pc_err *err)
{
	const char *end = text + strcspn(text, "\n"), *p1, *p2;
	struct cosig_verifier v;
	uint8_t raw[34];
	size_t rawlen = 0, nlen;
	char hx[9];

	if (*end == '\n' && end[1] != '\0')
		goto bad;
	p1 = memchr(text, '+', (size_t)(end - text));
	p2 = p1 ? memchr(p1 + 1, '+', (size_t)(end - p1 - 1)) : NULL;
	if (!p2 || p2 - p1 - 1 != 8)
		goto bad;
	nlen = (size_t)(p1 - text);
	if (nlen == 0 || nlen >= sizeof(v.name))
		goto bad;
	memcpy(v.name, text, nlen);
	v.name[nlen] = '\0';
	memcpy(hx, p1 + 1, 8);
	hx[8] = '\0';
	if (strspn(hx, "0123456789abcdef") != 8)
		goto bad;
	v.hash = (uint32_t)strtoul(hx, NULL, 16);
	if (pc_b64_decode(raw, sizeof(raw), p2 + 1, (size_t)(end - p2 - 1), &rawlen) != 0 ||
	    rawlen != 33 || raw[0] != ALG_COSIG)
		return pc_err_set(err, PC_EPARSE,
				  "not a cosignature/v1 key (name+id+base64 of 0x04 and an "
				  "ed25519 key)");
	memcpy(v.pk, raw + 1, 32);
	if (note_key_id(v.name, ALG_COSIG, v.pk) != v.hash)
		return pc_err_set(err, PC_EPARSE, "witness key's id does not match its key");
	*out = v;
	return 0;
bad:
	return pc_err_set(err, PC_EPARSE, "not a witness key (expected name+id+base64)");
}

int cosig_verifier_format(const struct cosig_verifier *v, char *buf, size_t len)
{
	uint8_t raw[33];
	char b64[64];
	int n;

	raw[0] = ALG_COSIG;
	memcpy(raw + 1, v->pk, 32);
	sodium_bin2base64(b64, sizeof(b64), raw, sizeof(raw), B64);
	n = snprintf(buf, len, "%s+%08x+%s\n", v->name, v->hash, b64);
	return n < 0 || (size_t)n >= len ? PC_EINVAL : n;
}

/* "cosignature/v1\ntime T\n" || body */
static int cosig_message(const char *body, size_t blen, uint64_t t, char **out, size_t *olen)
{
	char head[64];
	int n = snprintf(head, sizeof(head), "cosignature/v1\ntime %llu\n", (unsigned long long)t);
	char *m = malloc((size_t)n + blen);

	if (!m)
		return PC_ENOMEM;
	memcpy(m, head, (size_t)n);
	memcpy(m + n, body, blen);
	*out = m;
	*olen = (size_t)n + blen;
	return 0;
}

int cosig_sign(const struct note_signer *s, const char *body, size_t blen, uint64_t t, char *line,
	       size_t len, struct pc_err *err)
{
	struct cosig_verifier v;
	uint8_t sig[4 + 8 + 64];
	char b64[sodium_base64_ENCODED_LEN(sizeof(sig), B64)], *msg;
	size_t mlen;
	int n;

	if (cosig_message(body, blen, t, &msg, &mlen) < 0)
		return pc_err_set(err, PC_ENOMEM, "cosignature: out of memory");
	cosig_verifier_from(s, &v);
	for (int i = 0; i < 4; i++)
		sig[i] = (uint8_t)(v.hash >> (24 - 8 * i));
	for (int i = 0; i < 8; i++)
		sig[4 + i] = (uint8_t)(t >> (56 - 8 * i));
	note_signer_sign_raw(s, msg, mlen, sig + 12);
	free(msg);
	sodium_bin2base64(b64, sizeof(b64), sig, sizeof(sig), B64);
	n = snprintf(line, len, EMDASH " %s %s\n", v.name, b64);
	if (n < 0 || (size_t)n >= len)
		return pc_err_set(err, PC_EINVAL, "cosignature line does not fit");
	return n;
}

int cosig_verify(const struct cosig_verifier *v, const char *note, size_t len, uint64_t *t,
		 struct pc_err *err)
{
	const char *split, *p, *end = note + len;
	size_t nlen = strlen(v->name), blen;

	if (len == 0 || note[len - 1] != '\n')
		return pc_err_set(err, PC_EPARSE, "note does not end with a newline");
	if (!(blen = note_body_len(note, len)))
		return pc_err_set(err, PC_EPARSE, "note has no signature block");
	split = note + blen - 1;
	for (p = split + 2; p < end;) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		uint8_t sig[4 + 8 + 64 + 1];
		size_t siglen = 0, mlen;
		uint64_t ts = 0;
		uint32_t id;
		char *msg;
		int ok;

		if (!eol)
			break;
		if ((size_t)(eol - p) < sizeof(EMDASH) + nlen + 1 ||
		    memcmp(p, EMDASH " ", sizeof(EMDASH)) != 0 ||
		    memcmp(p + sizeof(EMDASH), v->name, nlen) != 0 ||
		    p[sizeof(EMDASH) + nlen] != ' ') {
			p = eol + 1;
			continue;
		}
		p += sizeof(EMDASH) + nlen + 1;
		if (pc_b64_decode(sig, sizeof(sig), p, (size_t)(eol - p), &siglen) != 0 ||
		    siglen < 4) {
			p = eol + 1;
			continue;
		}
		id = (uint32_t)sig[0] << 24 | (uint32_t)sig[1] << 16 | (uint32_t)sig[2] << 8 |
		     sig[3];
		if (id != v->hash) { /* the same name, another key or kind */
			p = eol + 1;
			continue;
		}
		if (siglen != sizeof(sig) - 1)
			return pc_err_set(err, PC_ETAMPER, "cosignature by %s is malformed",
					  v->name);
		for (int i = 0; i < 8; i++)
			ts = ts << 8 | sig[4 + i];
		if (cosig_message(note, (size_t)(split + 1 - note), ts, &msg, &mlen) < 0)
			return pc_err_set(err, PC_ENOMEM, "out of memory");
		ok = crypto_sign_verify_detached(sig + 12, (const uint8_t *)msg, mlen, v->pk) == 0;
		free(msg);
		if (!ok)
			return pc_err_set(err, PC_ETAMPER, "cosignature by %s+%08x does not verify",
					  v->name, v->hash);
		*t = ts;
		return 0;
	}
	return pc_err_set(err, PC_ENOENT, "no cosignature by %s+%08x", v->name, v->hash);
}
