/* Unit tests for consistency proofs (RFC 9162 2.1.4: known vectors, and
 * every (m, n) up to 64 against the RFC's recursive definition written
 * out here), cosignatures (C2SP tlog-cosignature), the witness's request
 * parsing and decisions (C2SP tlog-witness), its state across a restart,
 * and the prefix check behind log verify --against. */
#include "logd/logd_int.h"
#include "rules/rules.h"
#include "tests/unit/unit.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct merkle_hasher *H;

static void setup(void)
{
	ck_assert_int_eq(merkle_hasher_new(&H, NULL), 0);
}

static void teardown(void)
{
	merkle_hasher_free(H);
	H = NULL;
}

static void leaves_make(uint8_t (*leaves)[32], uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		char d[32];

		snprintf(d, sizeof(d), "leaf %llu", (unsigned long long)i);
		ck_assert_int_eq(merkle_leaf(H, d, strlen(d), NULL, 0, leaves[i]), 0);
	}
}

static void root_of(uint8_t (*leaves)[32], uint64_t n, uint8_t out[32])
{
	struct merkle_leaves l = {.h = H, .leaf = (const uint8_t(*)[32])leaves, .n = n};

	ck_assert_int_eq(merkle_leaves_root(&l, 0, n, out), 0);
}

/* RFC 9162 2.1.4.1 as written: SUBPROOF(m, D[lo:lo+n], b). */
static void subproof(uint8_t (*leaves)[32], uint64_t m, uint64_t lo, uint64_t n, bool b,
		     uint8_t (*out)[32], size_t *len)
{
	uint64_t k = 1;

	if (m == n) {
		if (!b)
			root_of(leaves + lo, n, out[(*len)++]);
		return;
	}
	while (k << 1 < n)
		k <<= 1;
	if (m <= k) {
		subproof(leaves, m, lo, k, b, out, len);
		root_of(leaves + lo + k, n - k, out[(*len)++]);
	} else {
		subproof(leaves, m - k, lo + k, n - k, false, out, len);
		root_of(leaves + lo, k, out[(*len)++]);
	}
}

START_TEST(consistency_every_pair_up_to_64)
{
	static uint8_t leaves[64][32];
	struct merkle_leaves l = {.h = H, .leaf = (const uint8_t(*)[32])leaves};

	leaves_make(leaves, 64);
	l.n = 64;
	for (uint64_t n = 1; n <= 64; n++) {
		uint8_t nroot[32];

		root_of(leaves, n, nroot);
		for (uint64_t m = 0; m <= n; m++) {
			uint8_t mroot[32], p[MERKLE_PROOF_MAX][32], ref[MERKLE_PROOF_MAX][32],
			    bad[32];
			size_t plen = 99, rlen = 0;

			if (m)
				root_of(leaves, m, mroot);
			else
				memset(mroot, 0, 32);
			ck_assert_int_eq(
			    merkle_consistency_proof(m, n, merkle_leaves_root, &l, p, &plen, NULL),
			    0);
			if (m && m < n)
				subproof(leaves, m, 0, n, true, ref, &rlen);
			ck_assert_uint_eq(plen, rlen);
			ck_assert(rlen == 0 || memcmp(p, ref, rlen * 32) == 0);
			ck_assert_int_eq(merkle_consistency_verify(H, m, n, mroot, nroot,
								   (const uint8_t(*)[32])p, plen),
					 0);
			if (m == 0)
				continue;
			/* another old root, new root, size, or any node changed: refused */
			memcpy(bad, mroot, 32);
			bad[0] ^= 1;
			ck_assert_int_eq(merkle_consistency_verify(H, m, n, bad, nroot,
								   (const uint8_t(*)[32])p, plen),
					 PC_ETAMPER);
			memcpy(bad, nroot, 32);
			bad[31] ^= 0x80;
			ck_assert_int_eq(merkle_consistency_verify(H, m, n, mroot, bad,
								   (const uint8_t(*)[32])p, plen),
					 PC_ETAMPER);
			for (size_t i = 0; i < plen; i++) {
				p[i][5] ^= 4;
				ck_assert_int_eq(merkle_consistency_verify(H, m, n, mroot, nroot,
									   (const uint8_t(*)[32])p,
									   plen),
						 PC_ETAMPER);
				p[i][5] ^= 4;
			}
			if (m < n) /* a proof cut short */
				ck_assert_int_eq(merkle_consistency_verify(H, m, n, mroot, nroot,
									   (const uint8_t(*)[32])p,
									   plen - 1),
						 PC_ETAMPER);
		}
	}
}
END_TEST

/* The witness client's source of nodes: the old tree's right edge and the
 * leaves after it give the same proofs as all the leaves. */
START_TEST(consistency_from_the_edge_and_tail)
{
	static uint8_t leaves[70][32];
	struct merkle_leaves l = {.h = H, .leaf = (const uint8_t(*)[32])leaves, .n = 70};

	leaves_make(leaves, 70);
	for (uint64_t m = 0; m <= 70; m++) {
		struct merkle_edge e = {.h = H};

		merkle_tree_init(&e.edge);
		for (uint64_t i = 0; i < m; i++)
			ck_assert_int_eq(merkle_tree_append(H, &e.edge, leaves[i]), 0);
		e.tail = (const uint8_t(*)[32])leaves + m;
		for (uint64_t n = m; n <= 70; n++) {
			uint8_t a[MERKLE_PROOF_MAX][32], b[MERKLE_PROOF_MAX][32];
			size_t al, bl;

			e.n_tail = n - m;
			ck_assert_int_eq(
			    merkle_consistency_proof(m, n, merkle_leaves_root, &l, a, &al, NULL),
			    0);
			ck_assert_int_eq(
			    merkle_consistency_proof(m, n, merkle_edge_root, &e, b, &bl, NULL), 0);
			ck_assert_uint_eq(al, bl);
			ck_assert(al == 0 || memcmp(a, b, al * 32) == 0);
		}
	}
}
END_TEST

static void unhex(const char *s, uint8_t out[32])
{
	ck_assert_int_eq(merkle_hex_parse(s, out), 0);
}

/* The RFC 6962 test tree of 8 leaves (certificate-transparency's
 * reference vectors): roots and consistency proofs. */
START_TEST(consistency_known_vectors)
{
	static const struct {
		const char *d;
		size_t len;
	} in[8] = {{"", 0},
		   {"\x00", 1},
		   {"\x10", 1},
		   {"\x20\x21", 2},
		   {"\x30\x31", 2},
		   {"\x40\x41\x42\x43", 4},
		   {"\x50\x51\x52\x53\x54\x55\x56\x57", 8},
		   {"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f", 16}};
	static const struct {
		uint64_t m, n;
		size_t len;
		const char *p[3];
	} v[] = {
	    {1,
	     8,
	     3,
	     {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
	      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
	      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
	    {6,
	     8,
	     3,
	     {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
	      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
	      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
	    {2,
	     5,
	     2,
	     {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
	      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"}},
	};
	uint8_t leaves[8][32], r8[32], want[32];
	struct merkle_leaves l = {.h = H, .leaf = (const uint8_t(*)[32])leaves, .n = 8};

	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(merkle_leaf(H, in[i].d, in[i].len, NULL, 0, leaves[i]), 0);
	root_of(leaves, 8, r8);
	unhex("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328", want);
	ck_assert_mem_eq(r8, want, 32);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint8_t p[MERKLE_PROOF_MAX][32], mr[32], nr[32];
		size_t len;

		ck_assert_int_eq(
		    merkle_consistency_proof(v[i].m, v[i].n, merkle_leaves_root, &l, p, &len, NULL),
		    0);
		ck_assert_uint_eq(len, v[i].len);
		for (size_t j = 0; j < len; j++) {
			unhex(v[i].p[j], want);
			ck_assert_mem_eq(p[j], want, 32);
		}
		root_of(leaves, v[i].m, mr);
		root_of(leaves, v[i].n, nr);
		ck_assert_int_eq(merkle_consistency_verify(H, v[i].m, v[i].n, mr, nr,
							   (const uint8_t(*)[32])p, len),
				 0);
	}
}
END_TEST

/* ---- cosignatures and the witness ---------------------------------------- */

static struct note_signer *LOGK, *WITK;

static void keys(void)
{
	if (!LOGK) {
		ck_assert_int_eq(note_signer_generate("gw1/portcullis-log", &LOGK, NULL), 0);
		ck_assert_int_eq(note_signer_generate("lab/witness", &WITK, NULL), 0);
	}
}

/* The origin cp_note signs under; NULL: the key's name. */
static const char *CP_ORIGIN;
/* The previous checkpoint cp_note names (has_prev false: none). */
static struct checkpoint CP_PREV;

/* CP_PREV := the checkpoint of seg's origin for the first n of leaves. */
static void prev_set(uint64_t seg, uint8_t (*leaves)[32], uint64_t n)
{
	memset(&CP_PREV, 0, sizeof(CP_PREV));
	CP_PREV.has_prev = true;
	CP_PREV.prev_seg = seg;
	CP_PREV.prev_size = n;
	root_of(leaves, n, CP_PREV.prev_root);
}

/* A signed checkpoint of the first n leaves into note. */
static size_t cp_note(uint8_t (*leaves)[32], uint64_t n, char *note, size_t len)
{
	struct checkpoint cp = {.size = n, .time_ms = 1764000000000ull + n};
	int r;

	pc_strlcpy(cp.origin, CP_ORIGIN ? CP_ORIGIN : note_signer_verifier(LOGK)->name,
		   sizeof(cp.origin));
	root_of(leaves, n, cp.root);
	cp.has_prev = CP_PREV.has_prev;
	cp.prev_seg = CP_PREV.prev_seg;
	cp.prev_size = CP_PREV.prev_size;
	memcpy(cp.prev_root, CP_PREV.prev_root, 32);
	r = checkpoint_sign(LOGK, &cp, note, len, NULL);
	ck_assert_int_gt(r, 0);
	return (size_t)r;
}

/* The tlog-witness body: old, the proof from it, the note. */
static size_t wbody(uint8_t (*leaves)[32], uint64_t old, uint64_t n, char *body, size_t len)
{
	struct merkle_leaves l = {.h = H, .leaf = (const uint8_t(*)[32])leaves, .n = n};
	uint8_t p[MERKLE_PROOF_MAX][32];
	size_t plen, off;

	ck_assert_int_eq(merkle_consistency_proof(old, n, merkle_leaves_root, &l, p, &plen, NULL),
			 0);
	off = (size_t)snprintf(body, len, "old %llu\n", (unsigned long long)old);
	for (size_t i = 0; i < plen; i++) {
		sodium_bin2base64(body + off, len - off, p[i], 32, sodium_base64_VARIANT_ORIGINAL);
		off += 44;
		body[off++] = '\n';
	}
	body[off++] = '\n';
	return off + cp_note(leaves, n, body + off, len - off);
}

START_TEST(cosignature_signs_the_checkpoint_text)
{
	uint8_t leaves[5][32];
	char note[CHECKPOINT_MAX + COSIG_LINE_MAX], line[COSIG_LINE_MAX], text[256];
	struct cosig_verifier v, v2;
	size_t n, blen;
	uint64_t t = 0;
	int ll;

	keys();
	leaves_make(leaves, 5);
	n = cp_note(leaves, 5, note, CHECKPOINT_MAX);
	ck_assert_int_eq(note_verify(note_signer_verifier(LOGK), note, n, &blen, NULL), 0);
	ll = cosig_sign(WITK, note, blen, 1764000123, line, sizeof(line), NULL);
	ck_assert_int_gt(ll, 0);
	ck_assert(strncmp(line, "\xe2\x80\x94 lab/witness ", 16) == 0);
	memcpy(note + n, line, (size_t)ll);
	cosig_verifier_from(WITK, &v);
	ck_assert_int_eq(cosig_verify(&v, note, n + (size_t)ll, &t, NULL), 0);
	ck_assert_uint_eq(t, 1764000123);
	/* the log's signature still verifies with the cosignature after it */
	ck_assert_int_eq(note_verify(note_signer_verifier(LOGK), note, n + (size_t)ll, &blen, NULL),
			 0);
	/* key text round trip; the id is over type 0x04, not the note key's */
	ck_assert_int_gt(cosig_verifier_format(&v, text, sizeof(text)), 0);
	ck_assert_int_eq(cosig_verifier_parse(text, &v2, NULL), 0);
	ck_assert_str_eq(v.name, v2.name);
	ck_assert_uint_eq(v.hash, v2.hash);
	ck_assert_mem_eq(v.pk, v2.pk, 32);
	ck_assert_uint_ne(v.hash, note_signer_verifier(WITK)->hash);
	/* another checkpoint body under the same line: refused */
	note[strlen("gw1/portcullis-log\n")] = '6';
	ck_assert_int_eq(cosig_verify(&v, note, n + (size_t)ll, &t, NULL), PC_ETAMPER);
	/* no cosignature by this witness at all */
	ck_assert_int_eq(cosig_verify(&v, note, n, &t, NULL), PC_ENOENT);
}
END_TEST

START_TEST(witness_cosigns_only_what_extends_its_state)
{
	static uint8_t leaves[40][32], other[40][32];
	char body[WITNESS_BODY_MAX], resp[1024], dir[] = "/tmp/pc-witness.XXXXXX";
	struct note_verifier lv;
	struct cosig_verifier wv;
	struct witness *w;
	size_t n;
	uint64_t t;

	keys();
	leaves_make(leaves, 40);
	memcpy(other, leaves, sizeof(other));
	other[20][0] ^= 1; /* a different history from leaf 20 on */
	lv = *note_signer_verifier(LOGK);
	cosig_verifier_from(WITK, &wv);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(witness_new(WITK, &lv, 1, dir, &w, NULL), 0);

	n = wbody(leaves, 0, 10, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 1, resp, sizeof(resp)), 200);
	{ /* the reply is a cosignature of exactly that note */
		char full[1024];
		size_t hl = (size_t)(strstr(body, "\n\n") + 2 - body);

		memcpy(full, body + hl, n - hl);
		memcpy(full + n - hl, resp, strlen(resp));
		ck_assert_int_eq(cosig_verify(&wv, full, n - hl + strlen(resp), &t, NULL), 0);
		ck_assert_uint_eq(t, 1);
	}
	n = wbody(leaves, 10, 25, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 2, resp, sizeof(resp)), 200);
	/* the same tree again (a fresh time): cosigned */
	n = wbody(leaves, 25, 25, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 3, resp, sizeof(resp)), 200);
	/* a stale old size: 409 with the size it knows */
	n = wbody(leaves, 10, 30, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 4, resp, sizeof(resp)), 409);
	ck_assert_str_eq(resp, "25\n");
	/* a split view: another tree of 25 */
	n = wbody(other, 25, 25, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 5, resp, sizeof(resp)), 409);
	ck_assert_str_eq(resp, "25\n");
	/* a longer tree that does not extend its state: the proof fails */
	n = wbody(other, 25, 30, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 6, resp, sizeof(resp)), 422);
	/* old larger than the checkpoint */
	n = wbody(leaves, 0, 20, body, sizeof(body));
	memcpy(body, "old 30", 6);
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 7, resp, sizeof(resp)), 400);
	/* not signed by the log's key */
	n = wbody(leaves, 25, 30, body, sizeof(body));
	body[n - 10] = body[n - 10] == 'A' ? 'B' : 'A';
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 8, resp, sizeof(resp)), 403);
	witness_free(w);

	/* a restarted witness keeps its state */
	ck_assert_int_eq(witness_new(WITK, &lv, 1, dir, &w, NULL), 0);
	n = wbody(leaves, 0, 30, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 9, resp, sizeof(resp)), 409);
	ck_assert_str_eq(resp, "25\n");
	n = wbody(leaves, 25, 30, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 10, resp, sizeof(resp)), 200);
	witness_free(w);
	{
		char path[128];

		snprintf(path, sizeof(path), "%s/log-%08x.checkpoint", dir, lv.hash);
		unlink(path);
		rmdir(dir);
	}
}
END_TEST

START_TEST(origin_names_a_segment)
{
	uint64_t seg = 99;

	ck_assert_int_eq(checkpoint_origin_seg("gw1/log", "gw1/log", &seg), 0);
	ck_assert_uint_eq(seg, 0);
	ck_assert_int_eq(checkpoint_origin_seg("gw1/log/1234", "gw1/log", &seg), 0);
	ck_assert_uint_eq(seg, 1234);
	ck_assert_int_eq(checkpoint_origin_seg("gw1/log/18446744073709551615", "gw1/log", &seg), 0);
	ck_assert_uint_eq(seg, UINT64_MAX);
	/* one spelling per segment; nothing but the key's name before it */
	ck_assert_int_eq(checkpoint_origin_seg("gw1/log/0", "gw1/log", &seg), PC_ETAMPER);
	ck_assert_int_eq(checkpoint_origin_seg("gw1/log/012", "gw1/log", &seg), PC_ETAMPER);
	ck_assert_int_eq(checkpoint_origin_seg("gw1/log/", "gw1/log", &seg), PC_ETAMPER);
	ck_assert_int_eq(checkpoint_origin_seg("gw1/log/1x", "gw1/log", &seg), PC_ETAMPER);
	ck_assert_int_eq(checkpoint_origin_seg("gw1/log/18446744073709551616", "gw1/log", &seg),
			 PC_ETAMPER);
	ck_assert_int_eq(checkpoint_origin_seg("gw1/logx/1", "gw1/log", &seg), PC_ETAMPER);
	ck_assert_int_eq(checkpoint_origin_seg("gw1/lo", "gw1/log", &seg), PC_ETAMPER);
	ck_assert_int_eq(checkpoint_origin_seg("other/1", "gw1/log", &seg), PC_ETAMPER);
	ck_assert_uint_eq(seg, UINT64_MAX); /* not written on failure */
}
END_TEST

/* The "previous" extension line: what a segment's checkpoints name as the
 * checkpoint of the origin they continue survives signing and opening,
 * and a malformed or repeated one is refused (the witness parses it from
 * the network); a checkpoint without one has none. */
START_TEST(checkpoint_previous_line)
{
	static uint8_t leaves[8][32];
	struct checkpoint cp = {.size = 3, .time_ms = 1764000000000ull}, got;
	char note[CHECKPOINT_MAX], body[512];
	const char *bad[] = {"previous 01 3 ", "previous 1 3", "previous 1  3 ", "previous x 3 ",
			     "previous 1 3 AAAA"};
	int n;

	keys();
	leaves_make(leaves, 8);
	pc_strlcpy(cp.origin, note_signer_verifier(LOGK)->name, sizeof(cp.origin));
	root_of(leaves, 3, cp.root);
	n = checkpoint_sign(LOGK, &cp, note, sizeof(note), NULL);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(checkpoint_open(note_signer_verifier(LOGK), note, (size_t)n, &got, NULL),
			 0);
	ck_assert(!got.has_prev);
	cp.has_prev = true;
	cp.prev_seg = 26;
	cp.prev_size = 7;
	root_of(leaves, 7, cp.prev_root);
	n = checkpoint_sign(LOGK, &cp, note, sizeof(note), NULL);
	ck_assert_int_gt(n, 0);
	ck_assert_ptr_nonnull(strstr(note, "\nprevious 26 7 "));
	ck_assert_int_eq(checkpoint_open(note_signer_verifier(LOGK), note, (size_t)n, &got, NULL),
			 0);
	ck_assert(got.has_prev);
	ck_assert_uint_eq(got.prev_seg, 26);
	ck_assert_uint_eq(got.prev_size, 7);
	ck_assert_mem_eq(got.prev_root, cp.prev_root, 32);
	n = checkpoint_body_format(&cp, body, sizeof(body));
	ck_assert_int_gt(n, 0);
	{ /* the same line twice */
		char twice[1024];
		const char *pl = strstr(body, "previous ");
		int m = snprintf(twice, sizeof(twice), "%s%s", body, pl);

		ck_assert_int_eq(checkpoint_body_parse(twice, (size_t)m, &got, NULL), PC_EPARSE);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char b[1024], root[64];
		const char *rl = strstr(body, "previous ");
		int m;

		sodium_bin2base64(root, sizeof(root), cp.prev_root, 32,
				  sodium_base64_VARIANT_ORIGINAL);
		m = snprintf(b, sizeof(b), "%.*s%s%s\n", (int)(rl - body), body, bad[i],
			     i == 4 ? "" : root);
		ck_assert_msg(checkpoint_body_parse(b, (size_t)m, &got, NULL) == PC_EPARSE, "%s",
			      bad[i]);
	}
}
END_TEST

/* Each segment's origin is a log of its own at the witness: it starts at
 * 0 and stays append-only, across a restart too; one history per key: a
 * new origin must name the newest checkpoint cosigned for the key as its
 * previous one, and an origin superseded by a newer one never grows
 * (issue 32, findings 3 and 4). */
START_TEST(witness_keeps_one_state_per_origin)
{
	static uint8_t leaves[40][32], other[40][32];
	char body[WITNESS_BODY_MAX], resp[1024], dir[] = "/tmp/pc-witness.XXXXXX", o26[160],
						 bad[160];
	struct note_verifier lv;
	struct witness *w;
	size_t n;

	keys();
	leaves_make(leaves, 40);
	memcpy(other, leaves, sizeof(other));
	other[0][0] ^= 1;
	lv = *note_signer_verifier(LOGK);
	snprintf(o26, sizeof(o26), "%s/26", lv.name);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(witness_new(WITK, &lv, 1, dir, &w, NULL), 0);
	CP_ORIGIN = NULL;
	n = wbody(leaves, 0, 25, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 1, resp, sizeof(resp)), 200);
	/* a new segment's origin: from 0, another tree; it must continue the
	 * bare name's 25 records */
	CP_ORIGIN = o26;
	n = wbody(other, 0, 10, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 2, resp, sizeof(resp)), 409);
	ck_assert_str_eq(resp, "0\n");
	prev_set(0, leaves, 24); /* an older checkpoint than the newest cosigned */
	n = wbody(other, 0, 10, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 2, resp, sizeof(resp)), 409);
	prev_set(0, other, 25); /* another tree */
	n = wbody(other, 0, 10, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 2, resp, sizeof(resp)), 409);
	prev_set(0, leaves, 25);
	n = wbody(other, 0, 10, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 2, resp, sizeof(resp)), 200);
	n = wbody(other, 10, 20, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 3, resp, sizeof(resp)), 200);
	/* once seen, append-only: from 0 again, or another tree, refused */
	n = wbody(other, 0, 30, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 4, resp, sizeof(resp)), 409);
	ck_assert_str_eq(resp, "20\n");
	n = wbody(leaves, 20, 30, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 5, resp, sizeof(resp)), 422);
	/* the bare name's origin is unchanged, and superseded: it never grows */
	CP_ORIGIN = NULL;
	memset(&CP_PREV, 0, sizeof(CP_PREV));
	n = wbody(leaves, 20, 30, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 6, resp, sizeof(resp)), 409);
	ck_assert_str_eq(resp, "25\n");
	n = wbody(leaves, 25, 30, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 6, resp, sizeof(resp)), 409);
	ck_assert_str_eq(resp, "25\n");
	n = wbody(leaves, 25, 25, body, sizeof(body)); /* even its own latest again */
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 6, resp, sizeof(resp)), 409);
	/* origins that are not one of the key's segments */
	snprintf(bad, sizeof(bad), "%s/026", lv.name);
	CP_ORIGIN = bad;
	n = wbody(leaves, 0, 5, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 7, resp, sizeof(resp)), 403);
	snprintf(bad, sizeof(bad), "%sx/26", lv.name);
	n = wbody(leaves, 0, 5, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 8, resp, sizeof(resp)), 404);
	witness_free(w);

	/* restarted: each origin's state is read back */
	ck_assert_int_eq(witness_new(WITK, &lv, 1, dir, &w, NULL), 0);
	CP_ORIGIN = o26;
	n = wbody(other, 0, 30, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 9, resp, sizeof(resp)), 409);
	ck_assert_str_eq(resp, "20\n");
	n = wbody(other, 20, 30, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 10, resp, sizeof(resp)), 200);
	CP_ORIGIN = NULL;
	n = wbody(leaves, 0, 30, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 11, resp, sizeof(resp)), 409);
	ck_assert_str_eq(resp, "25\n");
	n = wbody(leaves, 25, 30, body, sizeof(body)); /* the head (26) was read back */
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 11, resp, sizeof(resp)), 409);
	/* a log begun again (no previous checkpoint) is refused; the next
	 * segment, naming /26's newest, is cosigned, and /26 is done */
	snprintf(bad, sizeof(bad), "%s/40", lv.name);
	CP_ORIGIN = bad;
	n = wbody(leaves, 0, 5, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 12, resp, sizeof(resp)), 409);
	prev_set(26, other, 30);
	ck_assert_int_eq(witness_add_checkpoint(w, body, wbody(leaves, 0, 5, body, sizeof(body)),
						12, resp, sizeof(resp)),
			 200);
	CP_ORIGIN = o26;
	memset(&CP_PREV, 0, sizeof(CP_PREV));
	n = wbody(other, 30, 31, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 13, resp, sizeof(resp)), 409);
	ck_assert_str_eq(resp, "30\n");
	CP_ORIGIN = NULL;
	witness_free(w);
	{
		char path[160];

		snprintf(path, sizeof(path), "%s/log-%08x.checkpoint", dir, lv.hash);
		ck_assert_int_eq(unlink(path), 0);
		snprintf(path, sizeof(path), "%s/log-%08x-26.checkpoint", dir, lv.hash);
		ck_assert_int_eq(unlink(path), 0);
		snprintf(path, sizeof(path), "%s/log-%08x-40.checkpoint", dir, lv.hash);
		ck_assert_int_eq(unlink(path), 0);
		rmdir(dir);
	}

	/* without a state directory, in memory (the first origin seen needs
	 * no previous one: nothing came before it at this witness) */
	ck_assert_int_eq(witness_new(WITK, &lv, 1, NULL, &w, NULL), 0);
	memset(&CP_PREV, 0, sizeof(CP_PREV));
	CP_ORIGIN = o26;
	n = wbody(other, 0, 10, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 12, resp, sizeof(resp)), 200);
	n = wbody(other, 0, 20, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 13, resp, sizeof(resp)), 409);
	CP_ORIGIN = NULL;
	witness_free(w);
}
END_TEST

#define HEAD(str) witness_http_head(str, sizeof(str) - 1, &hl, &bl, &add, NULL)

START_TEST(witness_request_parsing)
{
	struct witness_req r;
	size_t hl, bl;
	bool add;
	static const char ok[] = "POST /add-checkpoint HTTP/1.1\r\nHost: w\r\ncontent-length:  12 "
				 "\r\n\r\nbody";

	ck_assert_int_eq(witness_http_head(ok, sizeof(ok) - 1, &hl, &bl, &add, NULL), 0);
	ck_assert_uint_eq(hl, sizeof(ok) - 5);
	ck_assert_uint_eq(bl, 12);
	ck_assert(add);
	ck_assert_int_eq(witness_http_head(ok, 20, &hl, &bl, &add, NULL), PC_EAGAIN);
	ck_assert_int_eq(HEAD("POST /add-checkpoint HTTP/1.1\r\n\r\n"), PC_EPARSE); /* no length */
	ck_assert_int_eq(HEAD("POST /add-checkpoint HTTP/1.1\r\nContent-Length: 1\r\n"
			      "Content-Length: 1\r\n\r\n"),
			 PC_EPARSE);
	ck_assert_int_eq(HEAD("POST /add-checkpoint HTTP/1.1\r\nContent-Length: 99999\r\n\r\n"),
			 PC_EPARSE);
	ck_assert_int_eq(HEAD("POST /add-checkpoint HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"),
			 PC_EPARSE);
	ck_assert_int_eq(
	    HEAD("POST /add-checkpoint HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), PC_EPARSE);
	ck_assert_int_eq(HEAD("GET / HTTP/1.1\r\n\r\n"), 0);
	ck_assert(!add);

	ck_assert_int_eq(witness_req_parse("old 0\n\nx\n", 9, &r, NULL), 0);
	ck_assert_uint_eq(r.old, 0);
	ck_assert_uint_eq(r.proof_len, 0);
	ck_assert_uint_eq(r.note_len, 2);
	ck_assert_int_eq(witness_req_parse("old 01\n\nx\n", 10, &r, NULL), PC_EPARSE);
	ck_assert_int_eq(witness_req_parse("old 18446744073709551616\n\nx", 28, &r, NULL),
			 PC_EPARSE);
	ck_assert_int_eq(witness_req_parse("old 3\nAAAA\n\nx", 14, &r, NULL), PC_EPARSE);
	ck_assert_int_eq(witness_req_parse("old 3\n", 6, &r, NULL), PC_EPARSE);
	ck_assert_int_eq(witness_req_parse("old 3\n\n", 7, &r, NULL), PC_EPARSE);
}
END_TEST

START_TEST(prefix_check_names_cut_back_and_split)
{
	static uint8_t leaves[30][32];
	struct checkpoint want[3] = {{.size = 10}, {.size = 20}, {.size = 40}};
	enum logc_prefix_state st[3] = {0};
	struct logc_prefix p = {.h = H, .want = want, .state = st, .n = 3};

	leaves_make(leaves, 30);
	root_of(leaves, 10, want[0].root);
	root_of(leaves, 20, want[1].root);
	want[1].root[0] ^= 1; /* another tree of 20: a split view */
	merkle_tree_init(&p.tree);
	for (uint64_t i = 0; i < 30; i++)
		ck_assert_int_eq(logc_prefix_leaf(&p, i, leaves[i]), 0);
	logc_prefix_finish(&p);
	ck_assert_int_eq(st[0], LOGC_PREFIX_MET);
	ck_assert_int_eq(st[1], LOGC_PREFIX_SPLIT);
	ck_assert_int_eq(st[2], LOGC_PREFIX_SHORT);
}
END_TEST

/* log.witness.* are read with the rest of the configuration, and an
 * address without a key (whose cosignatures could not be checked), or
 * required without an address, is refused with the key named. */
static int cfg_try(const char *text, struct config *cfg, struct pc_err *err)
{
	char path[] = "/tmp/pc-witness-cfg.XXXXXX";
	int fd = mkstemp(path), rc;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	rc = config_load(path, cfg, err);
	unlink(path);
	return rc;
}

START_TEST(config_reads_the_witness_keys)
{
	static struct config cfg;
	struct pc_err err;

	ck_assert_int_eq(cfg_try("log:\n  witness:\n    address: \"w.example:7380\"\n    key: "
				 "/etc/portcullis/witness.pub\n    required: true\n    "
				 "max_lag_ms: 2500\n",
				 &cfg, &err),
			 0);
	ck_assert_str_eq(cfg.log.witness.address, "w.example:7380");
	ck_assert_str_eq(cfg.log.witness.key, "/etc/portcullis/witness.pub");
	ck_assert(cfg.log.witness.required);
	ck_assert_uint_eq(cfg.log.witness.max_lag_ms, 2500);
	ck_assert_int_eq(cfg_try("log:\n  file: /tmp/x\n", &cfg, &err), 0);
	ck_assert_str_eq(cfg.log.witness.address, "");
	ck_assert(!cfg.log.witness.required);
	ck_assert_uint_eq(cfg.log.witness.max_lag_ms, 10000);
	ck_assert_int_lt(cfg_try("log:\n  witness:\n    address: \"w.example:7380\"\n", &cfg, &err),
			 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "log.witness.key"));
	ck_assert_int_lt(cfg_try("log:\n  witness:\n    required: true\n", &cfg, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "log.witness.address"));
	ck_assert_int_lt(cfg_try("log:\n  witness:\n    max_lag_ms: 5\n", &cfg, &err), 0);
}
END_TEST

/* issue 32: a client's note with extra signature lines was kept as sent,
 * but read back with a 1 KiB bound: after a restart the witness refused
 * to start (the bare name's state) or answered 500. It keeps only the
 * body and the log's signature, bounded when written. */
START_TEST(witness_state_keeps_only_what_it_verified)
{
	static uint8_t leaves[20][32];
	char body[WITNESS_BODY_MAX], resp[1024], dir[] = "/tmp/pc-witness.XXXXXX", path[256],
						 *text = NULL;
	struct note_verifier lv;
	struct witness *w;
	struct checkpoint cp;
	size_t n, len = 0, nl;

	keys();
	leaves_make(leaves, 20);
	lv = *note_signer_verifier(LOGK);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(witness_new(WITK, &lv, 1, dir, &w, NULL), 0);
	CP_ORIGIN = NULL;
	n = wbody(leaves, 0, 10, body, sizeof(body));
	nl = n;
	/* 30 well-formed signature lines of someone else: 3 KiB */
	for (int i = 0; i < 30; i++) {
		n += (size_t)snprintf(body + n, sizeof(body) - n, "\xe2\x80\x94 other/signer%02d ",
				      i);
		memset(body + n, 'A', 96);
		n += 96;
		body[n++] = '\n';
	}
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 1, resp, sizeof(resp)), 200);
	witness_free(w);
	snprintf(path, sizeof(path), "%s/log-%08x.checkpoint", dir, lv.hash);
	ck_assert_int_eq(pc_file_read(path, 1 << 16, &text, &len, NULL), 0);
	ck_assert_uint_le(len, CHECKPOINT_MAX * 2);
	ck_assert_ptr_null(strstr(text, "other/signer"));
	ck_assert_int_eq(checkpoint_open(&lv, text, len, &cp, NULL), 0);
	ck_assert_uint_eq(cp.size, 10);
	/* the note as logd signed it: body, blank line, the log's line */
	ck_assert_uint_eq(len, nl - (size_t)(strstr(body, "\n\n") + 2 - body));
	free(text);
	/* a restart reads it back, and the log goes on from there */
	ck_assert_int_eq(witness_new(WITK, &lv, 1, dir, &w, NULL), 0);
	n = wbody(leaves, 10, 20, body, sizeof(body));
	ck_assert_int_eq(witness_add_checkpoint(w, body, n, 2, resp, sizeof(resp)), 200);
	witness_free(w);
}
END_TEST

static Suite *witness_suite(void)
{
	Suite *s = suite_create("witness");
	TCase *t = tcase_create("core");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	PC_UNIT_TESTS(t, consistency_every_pair_up_to_64, consistency_from_the_edge_and_tail,
		      consistency_known_vectors, cosignature_signs_the_checkpoint_text,
		      witness_cosigns_only_what_extends_its_state, origin_names_a_segment,
		      witness_keeps_one_state_per_origin, checkpoint_previous_line,
		      witness_request_parsing, prefix_check_names_cut_back_and_split,
		      config_reads_the_witness_keys, witness_state_keeps_only_what_it_verified);
	suite_add_tcase(s, t);
	return s;
}

PC_UNIT_MAIN(witness_suite)
