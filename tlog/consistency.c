/* RFC 9162 section 2.1.4 consistency proofs: that the tree of m leaves is a
 * prefix of the tree of n leaves. Generation over any source of subtree
 * roots (all the leaves, or the right edge of the older tree and the
 * leaves after it), verification, and a check that a file's tree passes
 * through a given checkpoint (log verify --against). */
#include "tlog/tlog_int.h"

#include <stdlib.h>
#include <string.h>

static uint64_t pow2_below(uint64_t n) /* largest power of 2 < n, n >= 2 */
{
	uint64_t k = 1;

	while (k << 1 < n)
		k <<= 1;
	return k;
}

/* RFC 9162 2.1.4.1 SUBPROOF(m, D[n], true), unrolled: each step down
 * appends one node (the sibling subtree); the recursion puts the inner
 * proof first, so the nodes collected top down are emitted bottom up. */
int merkle_consistency_proof(uint64_t m, uint64_t n, merkle_range_fn root, void *ctx,
			     uint8_t (*proof)[MERKLE_HASH], size_t *proof_len, struct pc_err *err)
{
	uint64_t lo = 0, hi = n, ml = m;
	uint64_t outer[MERKLE_PROOF_MAX][2];
	size_t no = 0, len = 0;
	bool b = true;

	if (m > n)
		return pc_err_set(err, PC_EINVAL, "no consistency proof from %llu to %llu leaves",
				  (unsigned long long)m, (unsigned long long)n);
	if (m == 0 || m == n) { /* nothing to prove */
		*proof_len = 0;
		return 0;
	}
	while (ml != hi - lo) {
		uint64_t k = pow2_below(hi - lo);

		if (no + 1 >= MERKLE_PROOF_MAX)
			return pc_err_set(err, PC_EINVAL, "proof too long");
		if (ml <= k) {
			outer[no][0] = lo + k;
			outer[no++][1] = hi;
			hi = lo + k;
		} else {
			outer[no][0] = lo;
			outer[no++][1] = lo + k;
			lo += k;
			ml -= k;
			b = false;
		}
	}
	if (!b) {
		if (root(ctx, lo, hi, proof[len]) < 0)
			goto fail;
		len++;
	}
	while (no--) {
		if (root(ctx, outer[no][0], outer[no][1], proof[len]) < 0)
			goto fail;
		len++;
	}
	*proof_len = len;
	return 0;
fail:
	return pc_err_set(err, PC_EIO, "hashing failed");
}

/* RFC 9162 2.1.4.2, step by step. */
int merkle_consistency_verify(struct merkle_hasher *h, uint64_t m, uint64_t n,
			      const uint8_t mroot[MERKLE_HASH], const uint8_t nroot[MERKLE_HASH],
			      const uint8_t (*proof)[MERKLE_HASH], size_t len)
{
	uint8_t fr[MERKLE_HASH], sr[MERKLE_HASH];
	uint64_t fn, sn;
	size_t i = 0;

	if (m > n)
		return PC_ETAMPER;
	if (m == n) /* the same tree: the same root, nothing in between */
		return len == 0 && memcmp(mroot, nroot, MERKLE_HASH) == 0 ? 0 : PC_ETAMPER;
	if (m == 0) /* everything extends the empty tree */
		return len == 0 ? 0 : PC_ETAMPER;
	if (len == 0)
		return PC_ETAMPER;
	/* step 2: a first tree that is a perfect subtree is its own first node */
	if ((m & (m - 1)) == 0) {
		memcpy(fr, mroot, MERKLE_HASH);
	} else {
		memcpy(fr, proof[0], MERKLE_HASH);
		i = 1;
	}
	memcpy(sr, fr, MERKLE_HASH);
	fn = m - 1;
	sn = n - 1;
	while (fn & 1) {
		fn >>= 1;
		sn >>= 1;
	}
	for (; i < len; i++) {
		if (sn == 0)
			return PC_ETAMPER;
		if ((fn & 1) || fn == sn) {
			if (merkle_node(h, proof[i], fr, fr) < 0 ||
			    merkle_node(h, proof[i], sr, sr) < 0)
				return PC_EIO;
			if (!(fn & 1))
				while (!(fn & 1) && fn != 0) {
					fn >>= 1;
					sn >>= 1;
				}
		} else if (merkle_node(h, sr, proof[i], sr) < 0) {
			return PC_EIO;
		}
		fn >>= 1;
		sn >>= 1;
	}
	if (sn != 0 || memcmp(fr, mroot, MERKLE_HASH) != 0 || memcmp(sr, nroot, MERKLE_HASH) != 0)
		return PC_ETAMPER;
	return 0;
}

int merkle_leaves_root(void *ctx, uint64_t lo, uint64_t hi, uint8_t out[MERKLE_HASH])
{
	struct merkle_leaves *l = ctx;
	struct merkle_tree t;

	if (hi > l->n || lo > hi)
		return PC_EINVAL;
	merkle_tree_init(&t);
	for (uint64_t i = lo; i < hi; i++)
		if (merkle_tree_append(l->h, &t, l->leaf[i]) < 0)
			return PC_EIO;
	return merkle_tree_root(l->h, &t, out);
}

/* The perfect subtrees of edge->size (its nodes, largest first) are the
 * only ranges below it a proof from that size asks for (RFC 9162's
 * SUBPROOF takes [0, k) only when the old size passes k, i.e. along the
 * old size's bits); everything at or after it comes from the tail. */
int merkle_edge_root(void *ctx, uint64_t lo, uint64_t hi, uint8_t out[MERKLE_HASH])
{
	struct merkle_edge *e = ctx;
	uint64_t off = 0;
	unsigned i = 0;

	if (lo >= e->edge.size) {
		struct merkle_leaves l = {.h = e->h, .leaf = e->tail, .n = e->n_tail};

		return merkle_leaves_root(&l, lo - e->edge.size, hi - e->edge.size, out);
	}
	for (int bit = 63; bit >= 0; bit--) {
		uint64_t sz = 1ull << bit;

		if (!(e->edge.size & sz))
			continue;
		if (off == lo && off + sz == hi) {
			memcpy(out, e->edge.nodes[i], MERKLE_HASH);
			return 0;
		}
		off += sz;
		i++;
	}
	return PC_EINVAL;
}

/* ---- a file's tree must pass through given checkpoints ------------------ */

int logc_prefix_leaf(struct logc_prefix *p, uint64_t index, const uint8_t leaf[MERKLE_HASH])
{
	uint8_t root[MERKLE_HASH];

	if (index != p->tree.size) /* leaves come in order, once */
		return PC_EINVAL;
	if (merkle_tree_append(p->h, &p->tree, leaf) < 0)
		return PC_EIO;
	for (size_t i = 0; i < p->n; i++) {
		if (p->want[i].size != p->tree.size)
			continue;
		if (merkle_tree_root(p->h, &p->tree, root) < 0)
			return PC_EIO;
		p->state[i] = memcmp(root, p->want[i].root, MERKLE_HASH) == 0 ? LOGC_PREFIX_MET
									      : LOGC_PREFIX_SPLIT;
	}
	return 0;
}

void logc_prefix_finish(struct logc_prefix *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->state[i] == LOGC_PREFIX_PENDING)
			p->state[i] = p->want[i].size == 0 ? LOGC_PREFIX_MET : LOGC_PREFIX_SHORT;
}
