/* RFC 6962 / RFC 9162 Merkle tree hashing: leaf and node hashes, the
 * append-only tree kept as its right edge, roots, inclusion proofs. */
#include "tlog/tlog_int.h"

#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

/* SHA-256 from OpenSSL, which uses the CPU's SHA extensions: verifying a
 * million records a second needs them (libsodium's portable SHA-256 is
 * about 2.5x slower here; see docs/logd.md). The SHA256_* calls rather
 * than EVP: EVP allocates and wipes a context for every digest, a third of
 * the cost of hashing one short record. They are deprecated in OpenSSL 3
 * but present, and this file is the only user. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

struct merkle_hasher {
	SHA256_CTX c;
};

int merkle_hasher_new(struct merkle_hasher **out, struct pc_err *err)
{
	struct merkle_hasher *h = calloc(1, sizeof(*h));

	if (!h)
		return pc_err_set(err, PC_ENOMEM, "hasher: out of memory");
	*out = h;
	return 0;
}

void merkle_hasher_free(struct merkle_hasher *h)
{
	free(h);
}

static int hash3(struct merkle_hasher *h, uint8_t prefix, const void *a, size_t alen, const void *b,
		 size_t blen, uint8_t out[MERKLE_HASH])
{
	if (SHA256_Init(&h->c) != 1 || SHA256_Update(&h->c, &prefix, 1) != 1 ||
	    (alen && SHA256_Update(&h->c, a, alen) != 1) ||
	    (blen && SHA256_Update(&h->c, b, blen) != 1) || SHA256_Final(out, &h->c) != 1)
		return PC_EIO;
	return 0;
}

int merkle_leaf(struct merkle_hasher *h, const void *a, size_t alen, const void *b, size_t blen,
		uint8_t out[MERKLE_HASH])
{
	return hash3(h, 0x00, a, alen, b, blen, out);
}

int merkle_node(struct merkle_hasher *h, const uint8_t l[MERKLE_HASH], const uint8_t r[MERKLE_HASH],
		uint8_t out[MERKLE_HASH])
{
	uint8_t tmp[MERKLE_HASH];

	/* out may alias l or r */
	if (hash3(h, 0x01, l, MERKLE_HASH, r, MERKLE_HASH, tmp) < 0)
		return PC_EIO;
	memcpy(out, tmp, MERKLE_HASH);
	return 0;
}

void merkle_tree_init(struct merkle_tree *t)
{
	memset(t, 0, sizeof(*t));
}

/* nodes[] holds the roots of the perfect subtrees that make up the tree,
 * one per set bit of size, largest (leftmost) first. Appending a leaf
 * merges as many times as size has trailing one bits. */
int merkle_tree_append(struct merkle_hasher *h, struct merkle_tree *t,
		       const uint8_t leaf[MERKLE_HASH])
{
	unsigned n = (unsigned)__builtin_popcountll(t->size);

	if (t->size == UINT64_MAX)
		return PC_EINVAL;
	memcpy(t->nodes[n], leaf, MERKLE_HASH);
	n++;
	for (uint64_t s = t->size; s & 1; s >>= 1) {
		if (merkle_node(h, t->nodes[n - 2], t->nodes[n - 1], t->nodes[n - 2]) < 0)
			return PC_EIO;
		n--;
	}
	t->size++;
	return 0;
}

int merkle_tree_root(struct merkle_hasher *h, const struct merkle_tree *t, uint8_t out[MERKLE_HASH])
{
	unsigned n = (unsigned)__builtin_popcountll(t->size);
	uint8_t r[MERKLE_HASH];

	if (n == 0) /* MTH({}) = SHA-256 of the empty string */
		return SHA256((const unsigned char *)"", 0, out) ? 0 : PC_EIO;
	memcpy(r, t->nodes[n - 1], MERKLE_HASH);
	for (unsigned i = n - 1; i-- > 0;)
		if (merkle_node(h, t->nodes[i], r, r) < 0)
			return PC_EIO;
	memcpy(out, r, MERKLE_HASH);
	return 0;
}

/* MTH of leaves[lo, hi). */
static int range_root(struct merkle_hasher *h, const uint8_t (*leaves)[MERKLE_HASH], uint64_t lo,
		      uint64_t hi, uint8_t out[MERKLE_HASH])
{
	struct merkle_tree t;

	merkle_tree_init(&t);
	for (uint64_t i = lo; i < hi; i++)
		if (merkle_tree_append(h, &t, leaves[i]) < 0)
			return PC_EIO;
	return merkle_tree_root(h, &t, out);
}

/* RFC 6962 section 2.1.1 PATH(m, D[lo:hi]), iterated from the top: each
 * step adds the sibling subtree's root, and the list is reversed at the
 * end so it runs leaf to root. */
int merkle_inclusion_proof(struct merkle_hasher *h, const uint8_t (*leaves)[MERKLE_HASH],
			   uint64_t n, uint64_t index, uint8_t (*proof)[MERKLE_HASH],
			   size_t *proof_len, struct pc_err *err)
{
	uint64_t lo = 0, hi = n, m = index;
	size_t len = 0;

	if (index >= n)
		return pc_err_set(err, PC_EINVAL, "leaf %llu is not in a tree of %llu",
				  (unsigned long long)index, (unsigned long long)n);
	while (hi - lo > 1) {
		uint64_t k = 1;

		while (k << 1 < hi - lo)
			k <<= 1;
		if (len >= MERKLE_PROOF_MAX)
			return pc_err_set(err, PC_EINVAL, "proof too long");
		if (m < k) {
			if (range_root(h, leaves, lo + k, hi, proof[len]) < 0)
				goto fail;
			hi = lo + k;
		} else {
			if (range_root(h, leaves, lo, lo + k, proof[len]) < 0)
				goto fail;
			m -= k;
			lo += k;
		}
		len++;
	}
	for (size_t i = 0; i < len / 2; i++) {
		uint8_t t[MERKLE_HASH];

		memcpy(t, proof[i], MERKLE_HASH);
		memcpy(proof[i], proof[len - 1 - i], MERKLE_HASH);
		memcpy(proof[len - 1 - i], t, MERKLE_HASH);
	}
	*proof_len = len;
	return 0;
fail:
	return pc_err_set(err, PC_EIO, "hashing failed");
}

/* RFC 9162 section 2.1.3.2. */
int merkle_inclusion_verify(struct merkle_hasher *h, uint64_t index, uint64_t size,
			    const uint8_t leaf[MERKLE_HASH], const uint8_t (*proof)[MERKLE_HASH],
			    size_t proof_len, const uint8_t root[MERKLE_HASH])
{
	uint64_t fn = index, sn = size - 1;
	uint8_t r[MERKLE_HASH];

	if (size == 0 || index >= size)
		return PC_ETAMPER;
	memcpy(r, leaf, MERKLE_HASH);
	for (size_t i = 0; i < proof_len; i++) {
		if (sn == 0)
			return PC_ETAMPER;
		if ((fn & 1) || fn == sn) {
			if (merkle_node(h, proof[i], r, r) < 0)
				return PC_EIO;
			while (!(fn & 1) && fn != 0) {
				fn >>= 1;
				sn >>= 1;
			}
		} else if (merkle_node(h, r, proof[i], r) < 0) {
			return PC_EIO;
		}
		fn >>= 1;
		sn >>= 1;
	}
	if (sn != 0 || memcmp(r, root, MERKLE_HASH) != 0)
		return PC_ETAMPER;
	return 0;
}

void merkle_hex(const uint8_t h[MERKLE_HASH], char out[2 * MERKLE_HASH + 1])
{
	static const char hx[] = "0123456789abcdef";

	for (int i = 0; i < MERKLE_HASH; i++) {
		out[2 * i] = hx[h[i] >> 4];
		out[2 * i + 1] = hx[h[i] & 15];
	}
	out[2 * MERKLE_HASH] = '\0';
}

/* value + 1 of each lower-case hex digit; 0 for anything else (one
 * spelling per hash) */
static const uint8_t hexv[256] = {
    ['0'] = 1, ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,  ['6'] = 7,  ['7'] = 8,
    ['8'] = 9, ['9'] = 10, ['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

int merkle_hex_parse(const char *s, uint8_t out[MERKLE_HASH])
{
	uint8_t t[MERKLE_HASH];

	for (int i = 0; i < MERKLE_HASH; i++) {
		unsigned hi = hexv[(unsigned char)s[2 * i]], lo;

		if (!hi) /* also stops at a NUL before reading past it */
			return PC_EPARSE;
		lo = hexv[(unsigned char)s[2 * i + 1]];
		if (!lo)
			return PC_EPARSE;
		t[i] = (uint8_t)((hi - 1) << 4 | (lo - 1));
	}
	memcpy(out, t, MERKLE_HASH);
	return 0;
}
