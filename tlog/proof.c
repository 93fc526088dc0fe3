/* Inclusion proofs of one record against a signed checkpoint, as a small
 * text file an auditor can check without the log:
 *   portcullis-log-proof v1
 *   index <leaf index in its file's tree>
 *   record <the record's JSON line>
 *   hash <base64 sibling hash>          (leaf to root, one per line)
 *   checkpoint
 *   <the signed checkpoint note> */
#include "tlog/tlog_int.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "portcullis-log-proof v1\n"

int logproof_format(uint64_t index, const char *line, size_t len,
		    const uint8_t (*path)[MERKLE_HASH], size_t plen, const char *note, size_t nlen,
		    char **out, size_t *outlen, struct pc_err *err)
{
	size_t cap = sizeof(MAGIC) + 32 + 8 + len + plen * 52 + 12 + nlen + 1, o;
	char *b;
	int n;

	if (plen > MERKLE_PROOF_MAX || memchr(line, '\n', len))
		return pc_err_set(err, PC_EINVAL, "bad proof input");
	b = malloc(cap);
	if (!b)
		return pc_err_set(err, PC_ENOMEM, "proof: out of memory");
	n = snprintf(b, cap, MAGIC "index %llu\nrecord %.*s\n", (unsigned long long)index, (int)len,
		     line);
	o = (size_t)n;
	for (size_t i = 0; i < plen; i++) {
		memcpy(b + o, "hash ", 5);
		o += 5;
		sodium_bin2base64(b + o, cap - o, path[i], MERKLE_HASH, B64);
		o += strlen(b + o);
		b[o++] = '\n';
	}
	memcpy(b + o, "checkpoint\n", 11);
	o += 11;
	memcpy(b + o, note, nlen);
	o += nlen;
	b[o] = '\0';
	*out = b;
	*outlen = o;
	return 0;
}

/* The next line of text[*pos..len) without its newline; NULL at the end
 * or when the line is unterminated. */
static const char *next_line(const char *text, size_t len, size_t *pos, size_t *llen)
{
	const char *s = text + *pos, *eol;

	if (*pos >= len)
		return NULL;
	eol = memchr(s, '\n', len - *pos);
	if (!eol)
		return NULL;
	*llen = (size_t)(eol - s);
	*pos += *llen + 1;
	return s;
}

int logproof_verify(const char *text, size_t len, const struct note_verifier *key,
		    struct logproof_info *info, struct pc_err *err)
{
	uint8_t(*path)[MERKLE_HASH] = NULL;
	struct merkle_hasher *h = NULL;
	struct logv_record rec;
	struct checkpoint cp;
	size_t pos = 0, ll, plen = 0;
	const char *l;
	uint64_t index = 0;
	int rc = PC_EPARSE;

	if (len < sizeof(MAGIC) - 1 || memcmp(text, MAGIC, sizeof(MAGIC) - 1) != 0)
		return pc_err_set(err, PC_EPARSE, "not a portcullis log proof (v1)");
	pos = sizeof(MAGIC) - 1;
	path = malloc(MERKLE_PROOF_MAX * sizeof(*path));
	if (!path || merkle_hasher_new(&h, err) < 0) {
		rc = pc_err_set(err, PC_ENOMEM, "proof: out of memory");
		goto out;
	}
	l = next_line(text, len, &pos, &ll);
	if (!l || ll < 7 || ll > 26 || memcmp(l, "index ", 6) != 0) {
		pc_err_set(err, PC_EPARSE, "proof line 2: expected \"index N\"");
		goto out;
	}
	for (size_t i = 6; i < ll; i++) {
		if (l[i] < '0' || l[i] > '9' || index > (UINT64_MAX - 9) / 10 ||
		    (i == 6 && l[i] == '0' && ll > 7)) {
			pc_err_set(err, PC_EPARSE, "proof line 2: bad index");
			goto out;
		}
		index = index * 10 + (uint64_t)(l[i] - '0');
	}
	l = next_line(text, len, &pos, &ll);
	if (!l || ll < 7 || memcmp(l, "record ", 7) != 0) {
		pc_err_set(err, PC_EPARSE, "proof line 3: expected \"record {...}\"");
		goto out;
	}
	if ((rc = logv_record_parse(h, l + 7, ll - 7, &rec, err)) < 0) {
		pc_err_prefix(err, "proof's record: ");
		goto out;
	}
	rc = PC_EPARSE;
	for (;;) {
		size_t got = 0;

		l = next_line(text, len, &pos, &ll);
		if (!l) {
			pc_err_set(err, PC_EPARSE, "proof has no checkpoint");
			goto out;
		}
		if (ll == 10 && memcmp(l, "checkpoint", 10) == 0)
			break;
		if (ll != 5 + 44 || memcmp(l, "hash ", 5) != 0 || plen >= MERKLE_PROOF_MAX ||
		    pc_b64_decode(path[plen], MERKLE_HASH, l + 5, 44, &got) != 0 ||
		    got != MERKLE_HASH) {
			pc_err_set(err, PC_EPARSE, "proof: malformed hash line");
			goto out;
		}
		plen++;
	}
	rc = checkpoint_open(key, text + pos, len - pos, &cp, err);
	if (rc < 0) {
		pc_err_prefix(err, "proof's checkpoint: ");
		goto out;
	}
	rc = merkle_inclusion_verify(h, index, cp.size, rec.leaf,
				     (const uint8_t(*)[MERKLE_HASH])path, plen, cp.root);
	if (rc < 0) {
		if (rc == PC_ETAMPER)
			pc_err_set(err, PC_ETAMPER,
				   "the record (seq %llu) is not leaf %llu of the tree of %llu "
				   "records the checkpoint signs",
				   (unsigned long long)rec.seq, (unsigned long long)index,
				   (unsigned long long)cp.size);
		else
			pc_err_set(err, rc, "hashing failed");
		goto out;
	}
	if (info) {
		info->seq = rec.seq;
		info->index = index;
		info->cp = cp;
	}
	rc = 0;
out:
	merkle_hasher_free(h);
	free(path);
	return rc;
}
