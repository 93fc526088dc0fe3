/* Unit tests for tlog/, the transparency-log core, through its public
 * header alone (no logd): the Merkle tree against a naive RFC 6962 MTH,
 * inclusion proofs, signed-note keys and checkpoints, and the checkpoint
 * time's parse. (Moved from check_logd.c with the core.) */
#include "tests/unit/unit.h"
#include "tlog/tlog.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
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

/* RFC 6962 2.1 MTH, written the way the RFC says it. */
static void mth(uint8_t (*leaves)[32], uint64_t n, uint8_t out[32])
{
	uint64_t k = 1;
	uint8_t l[32], r[32];

	if (n == 1) {
		memcpy(out, leaves[0], 32);
		return;
	}
	while (k << 1 < n)
		k <<= 1;
	mth(leaves, k, l);
	mth(leaves + k, n - k, r);
	ck_assert_int_eq(merkle_node(H, l, r, out), 0);
}

static void leaves_make(uint8_t (*leaves)[32], uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		char d[32];

		snprintf(d, sizeof(d), "leaf %llu", (unsigned long long)i);
		ck_assert_int_eq(merkle_leaf(H, d, strlen(d), NULL, 0, leaves[i]), 0);
	}
}

START_TEST(tree_root_matches_rfc6962_mth)
{
	uint8_t leaves[70][32], a[32], b[32];
	struct merkle_tree t;
	char hx[65];

	merkle_tree_init(&t);
	ck_assert_int_eq(merkle_tree_root(H, &t, a), 0);
	merkle_hex(a, hx);
	/* MTH({}) = SHA-256("") */
	ck_assert_str_eq(hx, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	leaves_make(leaves, 70);
	for (uint64_t n = 1; n <= 70; n++) {
		ck_assert_int_eq(merkle_tree_append(H, &t, leaves[n - 1]), 0);
		ck_assert_int_eq(merkle_tree_root(H, &t, a), 0);
		mth(leaves, n, b);
		ck_assert_msg(memcmp(a, b, 32) == 0, "root differs at size %llu",
			      (unsigned long long)n);
	}
}
END_TEST

START_TEST(tree_leaf_and_node_prefixes)
{
	uint8_t a[32], b[32];
	char hx[65];

	/* leaf = SHA-256(0x00 || ""), the RFC 6962 empty-leaf value */
	ck_assert_int_eq(merkle_leaf(H, "", 0, NULL, 0, a), 0);
	merkle_hex(a, hx);
	ck_assert_str_eq(hx, "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d");
	/* a leaf in two pieces hashes like the whole */
	ck_assert_int_eq(merkle_leaf(H, "ab", 2, "c", 1, a), 0);
	ck_assert_int_eq(merkle_leaf(H, "abc", 3, NULL, 0, b), 0);
	ck_assert_mem_eq(a, b, 32);
	ck_assert_int_eq(merkle_hex_parse(hx, b), 0);
	ck_assert_int_eq(merkle_hex_parse("6E34", b), PC_EPARSE);
}
END_TEST

START_TEST(inclusion_proofs_verify_and_detect_changes)
{
	uint8_t leaves[33][32], root[32], proof[64][32];
	size_t plen;

	leaves_make(leaves, 33);
	for (uint64_t n = 1; n <= 33; n++) {
		mth(leaves, n, root);
		for (uint64_t i = 0; i < n; i++) {
			ck_assert_int_eq(merkle_inclusion_proof(H, (const uint8_t(*)[32])leaves, n,
								i, proof, &plen, NULL),
					 0);
			ck_assert_int_eq(merkle_inclusion_verify(H, i, n, leaves[i],
								 (const uint8_t(*)[32])proof, plen,
								 root),
					 0);
			/* another leaf, another index, a changed path: refused */
			ck_assert_int_eq(merkle_inclusion_verify(H, i, n, leaves[(i + 1) % 33],
								 (const uint8_t(*)[32])proof, plen,
								 root),
					 PC_ETAMPER);
			if (n > 1)
				ck_assert_int_eq(merkle_inclusion_verify(
						     H, (i + 1) % n, n, leaves[i],
						     (const uint8_t(*)[32])proof, plen, root),
						 PC_ETAMPER);
			if (plen) {
				proof[plen - 1][0] ^= 1;
				ck_assert_int_eq(merkle_inclusion_verify(
						     H, i, n, leaves[i],
						     (const uint8_t(*)[32])proof, plen, root),
						 PC_ETAMPER);
			}
		}
	}
	ck_assert_int_eq(
	    merkle_inclusion_proof(H, (const uint8_t(*)[32])leaves, 5, 5, proof, &plen, NULL),
	    PC_EINVAL);
}
END_TEST

START_TEST(keys_round_trip_in_note_format)
{
	struct note_signer *s = NULL, *s2 = NULL;
	struct note_verifier v;
	char priv[256], pub[256];
	int n;

	ck_assert_int_eq(note_signer_generate("gw1.example/portcullis-log", &s, NULL), 0);
	n = note_signer_format(s, priv, sizeof(priv));
	ck_assert_int_gt(n, 0);
	ck_assert(strncmp(priv, "PRIVATE+KEY+gw1.example/portcullis-log+", 39) == 0);
	ck_assert_int_eq(note_signer_parse(priv, &s2, NULL), 0);
	ck_assert_mem_eq(note_signer_verifier(s)->pk, note_signer_verifier(s2)->pk, 32);
	n = note_verifier_format(note_signer_verifier(s), pub, sizeof(pub));
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(note_verifier_parse(pub, &v, NULL), 0);
	ck_assert_str_eq(v.name, "gw1.example/portcullis-log");
	ck_assert_uint_eq(v.hash, note_signer_verifier(s)->hash);
	/* a wrong hash, a name with '+', a non-ed25519 key: refused */
	pub[strlen("gw1.example/portcullis-log+")] ^= 1;
	ck_assert_int_lt(note_verifier_parse(pub, &v, NULL), 0);
	{
		struct note_signer *bad = NULL;

		ck_assert_int_lt(note_signer_generate("a+b", &bad, NULL), 0);
		ck_assert_ptr_null(bad);
	}
	ck_assert_int_lt(note_verifier_parse(
			     "x+00000000+AgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", &v, NULL),
			 0);
	note_signer_free(s);
	note_signer_free(s2);
}
END_TEST

START_TEST(checkpoint_is_a_signed_note)
{
	struct note_signer *s = NULL, *other = NULL;
	struct checkpoint c = {.size = 4128, .time_ms = 1764424933123ULL}, got;
	char note[CHECKPOINT_MAX], body[256];
	struct pc_err err;
	size_t blen;
	int n;

	ck_assert_int_eq(note_signer_generate("gw1/portcullis-log", &s, NULL), 0);
	ck_assert_int_eq(note_signer_generate("gw1/portcullis-log", &other, NULL), 0);
	pc_strlcpy(c.origin, "gw1/portcullis-log", sizeof(c.origin));
	memset(c.root, 0xab, 32);
	n = checkpoint_sign(s, &c, note, sizeof(note), NULL);
	ck_assert_int_gt(n, 0);
	/* C2SP tlog-checkpoint: origin, size, base64 root, extension, blank, signature */
	snprintf(body, sizeof(body),
		 "gw1/portcullis-log\n4128\nq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=\n"
		 "time 2025-11-29T14:02:13.123Z\n\n\xe2\x80\x94 gw1/portcullis-log ");
	ck_assert(strncmp(note, body, strlen(body)) == 0);
	ck_assert_int_eq(note[n - 1], '\n');
	ck_assert_int_eq(checkpoint_open(note_signer_verifier(s), note, (size_t)n, &got, NULL), 0);
	ck_assert_uint_eq(got.size, 4128);
	ck_assert_uint_eq(got.time_ms, c.time_ms);
	ck_assert_mem_eq(got.root, c.root, 32);
	/* another key of the same name: not ours */
	ck_assert_int_eq(checkpoint_open(note_signer_verifier(other), note, (size_t)n, &got, &err),
			 PC_ETAMPER);
	/* any change to the body breaks the signature */
	note[20] = '9';
	ck_assert_int_eq(checkpoint_open(note_signer_verifier(s), note, (size_t)n, &got, &err),
			 PC_ETAMPER);
	ck_assert_int_eq(note_verify(note_signer_verifier(s), "x\n", 2, &blen, NULL), PC_EPARSE);
	ck_assert_int_eq(checkpoint_body_parse("o\n01\nq6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="
					       "\ntime 2025-11-29T14:02:13.123Z\n",
					       78, &got, NULL),
			 PC_EPARSE); /* leading zero in the size */
	note_signer_free(s);
	note_signer_free(other);
}
END_TEST

/* A checkpoint's time is a slice of its line, not a C string: parsed
 * right up to an unreadable page, nothing past its 24 bytes is read (the
 * parser once handed it to sscanf, which measures the whole string first;
 * fuzz_logverify found it). */
START_TEST(time_parse_reads_only_its_slice)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m =
	    mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	const char *t = "2026-11-29T14:02:13.123Z";
	char *s;
	uint64_t ms = 0;

	ck_assert_ptr_ne(m, MAP_FAILED);
	ck_assert_int_eq(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
	s = m + pg - 24;
	memcpy(s, t, 24);
	ck_assert_int_eq(logd_time_parse(s, 24, &ms), 0);
	ck_assert_uint_eq(ms, 1795960933123ull);
	s[23] = 'X';
	ck_assert_int_eq(logd_time_parse(s, 24, &ms), PC_EPARSE);
	munmap(m, (size_t)pg * 2);
}
END_TEST

static Suite *tlog_suite(void)
{
	Suite *s = suite_create("tlog");
	TCase *t = tcase_create("core");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	PC_UNIT_TESTS(t, tree_root_matches_rfc6962_mth, tree_leaf_and_node_prefixes,
		      inclusion_proofs_verify_and_detect_changes, keys_round_trip_in_note_format,
		      checkpoint_is_a_signed_note, time_parse_reads_only_its_slice);
	suite_add_tcase(s, t);
	return s;
}

PC_UNIT_MAIN(tlog_suite)
