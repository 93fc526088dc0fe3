/* Unit tests for the scrubber's one pass (issue 34, point 3): a kept set's
 * index (scrub_keep_index) finds every pattern's anchors in one pass per
 * chunk instead of one memmem per pattern. Proved here: on random buffers
 * with values, their base64 forms, escaped and line-wrapped copies and
 * near misses planted around the scrubber's 16 KiB chunk boundaries and
 * the feeds' cuts, the indexed scrubber gives byte for byte the output,
 * result and hit count of the same patterns searched one memmem per
 * pattern (the patterns copied without their index and anchors: the code
 * path of every scrubber before the index); with letters-and-digits
 * values in a buffer without escapes, both equal a naive memmem-per-pattern
 * replacement written here. The index is really used (attached, two sets
 * in a row as relay.c copies them), and lives in locked memory. */
#include <ctype.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/unit.h"
#include "vault/vault_int.h"

struct out {
	uint8_t *p;
	size_t len, cap;
};

static int collect(void *ctx, const uint8_t *p, size_t n)
{
	struct out *o = ctx;

	if (o->len + n > o->cap) {
		o->cap = (o->len + n) * 2 + 64;
		o->p = realloc(o->p, o->cap);
		ck_assert_ptr_nonnull(o->p);
	}
	memcpy(o->p + o->len, p, n);
	o->len += n;
	return 0;
}

static uint32_t rnd_state = 12345;

static uint32_t rnd(void)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return rnd_state >> 8;
}

/* Scrub b[0..n) with pats, fed in pieces cut at random (and at cut, when
 * not 0): the result, the output and the hit count. */
static int run(const struct scrub_pat *pats, size_t np, const uint8_t *b, size_t n, size_t cut,
	       struct out *o, size_t *hits, size_t *n_ix)
{
	struct scrub s;
	size_t at = 0;
	int rc = 0;

	ck_assert_int_eq(scrub_init(&s, pats, np, NULL), 0);
	*n_ix = s.n_ix;
	while (at < n && rc == 0) {
		size_t take = cut && at < cut ? cut - at : 1 + rnd() % 20000;

		take = take < n - at ? take : n - at;
		rc = scrub_feed(&s, b + at, take, collect, o);
		at += take;
	}
	if (rc == 0)
		rc = scrub_finish(&s, collect, o);
	*hits = s.hits;
	scrub_free(&s);
	return rc;
}

/* The patterns as every scrubber searched them before the index. */
static struct scrub_pat *plain_copy(const struct scrub_pat *pats, size_t n)
{
	struct scrub_pat *c = calloc(n + 1, sizeof(*c));

	ck_assert_ptr_nonnull(c);
	for (size_t i = 0; i < n; i++) {
		c[i] = pats[i];
		c[i].meta = NULL;
		c[i].ix = NULL;
		c[i].ixi = 0;
	}
	return c;
}

/* Plant s at b[at..] (cut short at the end). */
static void plant(uint8_t *b, size_t n, size_t at, const char *s, size_t l)
{
	if (at >= n)
		return;
	memcpy(b + at, s, l < n - at ? l : n - at);
}

static const char *const vals[] = {
    "aws/Secret+Key=0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ/+=the-end",
    "ghp_TOKENvalue1234",
    "p&ss\"w/rd<x>y'z%20q", /* short runs: searched byte by byte */
    "xk7Qm2pLw9Zt",
};

/* An escaped copy of v: every character that is not a letter or digit in
 * one of the forms the scrubber knows, picked at random. */
static size_t escape(const char *v, char *o)
{
	size_t l = 0;

	for (size_t i = 0; v[i]; i++) {
		unsigned char c = (unsigned char)v[i];

		if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			o[l++] = (char)c;
			continue;
		}
		switch (rnd() % 4) {
		case 0:
			l += (size_t)sprintf(o + l, "%%%02X", c);
			break;
		case 1:
			l += (size_t)sprintf(o + l, "\\u%04x", c);
			break;
		case 2:
			l += (size_t)sprintf(o + l, "&#%u;", c);
			break;
		default:
			o[l++] = (char)c;
		}
	}
	o[l] = '\0';
	return l;
}

/* A random buffer of n bytes around the chunk boundaries, with planted
 * forms of the values (whole, escaped, base64 with line breaks, cut short
 * by one byte: near misses). */
static uint8_t *make_buf(size_t n, bool with_escapes)
{
	static const char alpha[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	static const char esc[] = "\\%&#;/+=\"'<>u\n\r x";
	uint8_t *b = malloc(n);

	ck_assert_ptr_nonnull(b);
	for (size_t i = 0; i < n; i++)
		b[i] = with_escapes && rnd() % 4 == 0 ? (uint8_t)esc[rnd() % (sizeof(esc) - 1)]
						      : (uint8_t)alpha[rnd() % (sizeof(alpha) - 1)];
	for (size_t k = 0; k < 24; k++) {
		/* without escapes: the letters-and-digits values only */
		const char *v = with_escapes ? vals[rnd() % 4] : vals[rnd() % 2 ? 1 : 3];
		char f[1024], b64[1024];
		size_t fl, bl;
		/* near a chunk boundary (16384 and its multiples, with the
		 * held-back tail before it) or anywhere */
		size_t at = rnd() % 2 ? (16384 * (1 + rnd() % 3) - rnd() % 200) : rnd() % n;

		switch (with_escapes ? rnd() % 4 : 2 + rnd() % 2) {
		case 0:
			fl = escape(v, f);
			break;
		case 1:
			sodium_bin2base64(b64, sizeof(b64), (const uint8_t *)v, strlen(v),
					  rnd() % 2 ? sodium_base64_VARIANT_ORIGINAL
						    : sodium_base64_VARIANT_URLSAFE);
			bl = strlen(b64);
			fl = 0;
			for (size_t i = 0; i < bl; i++) {
				if (i && i % 64 == 0)
					fl += (size_t)sprintf(f + fl, "%s",
							      rnd() % 2 ? "\\r\\n" : "\n");
				f[fl++] = b64[i];
			}
			f[fl] = '\0';
			break;
		case 2:
			fl = strlen(v) - 1; /* a near miss */
			memcpy(f, v, fl);
			break;
		default:
			fl = strlen(v);
			memcpy(f, v, fl);
		}
		plant(b, n, at < n ? at : n - 1, f, fl);
	}
	return b;
}

static void keep_values(struct scrub_keep *k, size_t first, size_t n)
{
	for (size_t i = first; i < first + n; i++) {
		char ph[32];

		snprintf(ph, sizeof(ph), "pcph_V%zu_aaaa", i);
		ck_assert_int_eq(scrub_keep_add_value(k, (const uint8_t *)vals[i], strlen(vals[i]),
						      (const uint8_t *)ph, strlen(ph)),
				 0);
	}
}

/* The indexed patterns and their plain copies on one buffer: the same. */
static void same(const struct scrub_pat *pats, size_t np, const uint8_t *b, size_t n, size_t cut,
		 size_t want_ix)
{
	struct scrub_pat *ref = plain_copy(pats, np);
	struct out o1 = {0}, o2 = {0};
	size_t h1, h2, ix1, ix2;
	uint32_t seed = rnd_state;
	int r1, r2;

	r1 = run(pats, np, b, n, cut, &o1, &h1, &ix1);
	rnd_state = seed; /* the same cuts */
	r2 = run(ref, np, b, n, cut, &o2, &h2, &ix2);
	ck_assert_uint_eq(ix1, want_ix);
	ck_assert_uint_eq(ix2, 0);
	ck_assert_int_eq(r1, r2);
	ck_assert_uint_eq(h1, h2);
	ck_assert_uint_eq(o1.len, o2.len);
	ck_assert(o1.len == 0 || memcmp(o1.p, o2.p, o1.len) == 0);
	free(o1.p);
	free(o2.p);
	free(ref);
}

START_TEST(indexed_equals_memmem_per_pattern)
{
	struct scrub_keep forms = {.unbounded = true}, keep = {0};
	struct scrub_pat *both;

	ck_assert_int_eq(sodium_init() >= 0, 1); /* each test runs in a process of its own */
	keep_values(&forms, 0, 4);		 /* 28 patterns: the cache beyond its inline room */
	keep_values(&keep, 1, 1);		 /* 7: inline */
	ck_assert_int_eq(scrub_keep_index(&forms), 0);
	ck_assert_int_eq(scrub_keep_index(&keep), 0);
	ck_assert_ptr_nonnull(forms.ix);
	/* as relay.c copies them: the state's forms, then the connection's */
	both = calloc(forms.n + keep.n, sizeof(*both));
	ck_assert_ptr_nonnull(both);
	memcpy(both, forms.pats, forms.n * sizeof(*both));
	memcpy(both + forms.n, keep.pats, keep.n * sizeof(*both));
	for (size_t round = 0; round < 60; round++) {
		size_t n = 100 + rnd() % 60000;
		uint8_t *b = make_buf(n, true);
		size_t cut = rnd() % 2 ? 0 : rnd() % n;

		same(forms.pats, forms.n, b, n, cut, 1);
		same(keep.pats, keep.n, b, n, cut, 1);
		same(both, forms.n + keep.n, b, n, cut, 2);
		free(b);
	}
	free(both);
	scrub_keep_free(&forms);
	scrub_keep_free(&keep);
}
END_TEST

/* A naive replacement: at each place, the patterns tried one by one with
 * memcmp, the longest match at the earliest place replaced; a held-back
 * tail is no concern of a whole buffer. */
static size_t naive(const struct scrub_pat *pats, size_t np, const uint8_t *b, size_t n, uint8_t *o)
{
	size_t ol = 0;

	for (size_t i = 0; i < n;) {
		size_t best = SIZE_MAX;

		for (size_t p = 0; p < np; p++)
			if (pats[p].nlen <= n - i &&
			    memcmp(b + i, pats[p].needle, pats[p].nlen) == 0 &&
			    (best == SIZE_MAX || pats[p].nlen > pats[best].nlen))
				best = p;
		if (best == SIZE_MAX) {
			o[ol++] = b[i++];
			continue;
		}
		memcpy(o + ol, pats[best].repl, pats[best].rlen);
		ol += pats[best].rlen;
		i += pats[best].nlen;
	}
	return ol;
}

START_TEST(plain_values_equal_naive_replacement)
{
	struct scrub_keep k = {0};

	ck_assert_int_eq(sodium_init() >= 0, 1);
	/* letters and digits only: a match is the value itself, no escape */
	ck_assert_int_eq(scrub_keep_add(&k, (const uint8_t *)vals[1], strlen(vals[1]),
					(const uint8_t *)"PH1", 3, false),
			 0);
	ck_assert_int_eq(scrub_keep_add(&k, (const uint8_t *)vals[3], strlen(vals[3]),
					(const uint8_t *)"PH3", 3, false),
			 0);
	ck_assert_int_eq(scrub_keep_index(&k), 0);
	for (size_t round = 0; round < 80; round++) {
		size_t n = 100 + rnd() % 60000;
		uint8_t *b = make_buf(n, false), *want = malloc(n);
		struct out o = {0};
		size_t hits, nix, wl;

		ck_assert_ptr_nonnull(want);
		wl = naive(k.pats, k.n, b, n, want);
		ck_assert_int_eq(run(k.pats, k.n, b, n, rnd() % n, &o, &hits, &nix), 0);
		ck_assert_uint_eq(nix, 1);
		ck_assert_uint_eq(o.len, wl);
		ck_assert(memcmp(o.p, want, wl) == 0);
		same(k.pats, k.n, b, n, 0, 1);
		free(o.p);
		free(want);
		free(b);
	}
	scrub_keep_free(&k);
}
END_TEST

START_TEST(index_rebuilt_when_the_set_grows)
{
	struct scrub_keep k = {0};
	const char *buf = "zz xk7Qm2pLw9Zt yy ghp_TOKENvalue1234 ww";
	struct out o = {0};
	size_t hits, nix;

	ck_assert_int_eq(sodium_init() >= 0, 1);
	keep_values(&k, 3, 1);
	ck_assert_int_eq(scrub_keep_index(&k), 0);
	keep_values(&k, 1, 1);
	/* not rebuilt yet: the old index still covers the patterns it was
	 * built for (a set only grows at its end), the new ones are searched
	 * one memmem each: both found */
	ck_assert_int_eq(run(k.pats, k.n, (const uint8_t *)buf, strlen(buf), 0, &o, &hits, &nix),
			 0);
	ck_assert_uint_eq(nix, 1);
	ck_assert_uint_eq(hits, 2);
	free(o.p);
	o = (struct out){0};
	ck_assert_int_eq(scrub_keep_index(&k), 0);
	ck_assert_int_eq(run(k.pats, k.n, (const uint8_t *)buf, strlen(buf), 0, &o, &hits, &nix),
			 0);
	ck_assert_uint_eq(nix, 1);
	ck_assert_uint_eq(hits, 2);
	ck_assert_uint_eq(o.len, strlen("zz pcph_V3_aaaa yy pcph_V1_aaaa ww"));
	ck_assert(memcmp(o.p, "zz pcph_V3_aaaa yy pcph_V1_aaaa ww", o.len) == 0);
	free(o.p);
	scrub_keep_free(&k);
}
END_TEST

/* The placeholder scanner's one pass (phscan.c: the common prefix found
 * once, each placeholder compared where it is) against a naive search:
 * every placeholder folded, one memmem each, the first in the store's
 * order; on random buffers with placeholders planted in either case and
 * cut short (near misses), fed whole and in two pieces. */
static int naive_folded(const struct vault_store *st, const uint8_t *b, size_t n)
{
	uint8_t *f = malloc(n + 1);
	int hit = -1;

	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < n; i++)
		f[i] = b[i] >= 'A' && b[i] <= 'Z' ? (uint8_t)(b[i] - 'A' + 'a') : b[i];
	for (size_t k = 0; k < st->n && hit < 0; k++) {
		uint8_t ph[VAULT_PH_MAX];

		for (size_t i = 0; i < st->s[k].ph_len; i++)
			ph[i] = (uint8_t)tolower((unsigned char)st->s[k].placeholder[i]);
		if (memmem(f, n, ph, st->s[k].ph_len))
			hit = (int)k;
	}
	free(f);
	return hit;
}

START_TEST(placeholders_one_pass_equals_memmem_per_placeholder)
{
	static struct vault_secret sec[3] = {
	    {.placeholder = "pcph_GITHUB_TOKEN_abcdefghijklmnopqrstuvwxyz"},
	    {.placeholder = "pcph_GH_234567abcdefghijklmnopqrst"},
	    {.placeholder = "pcph_X_zzzzzzzzzzzzzzzzzzzzzzzzzz"}};
	struct vault_store st = {.s = sec, .n = 3};
	struct ph_prefix pp;

	for (size_t k = 0; k < 3; k++)
		sec[k].ph_len = strlen(sec[k].placeholder);
	ph_prefix_get(&st, &pp);
	ck_assert_uint_eq(pp.exact, 5); /* "pcph_" */
	for (size_t round = 0; round < 3000; round++) {
		size_t n = 1 + rnd() % 300, cut = rnd() % n;
		uint8_t *b = malloc(n);
		int want, got1, got2a, got2b;
		struct ph_stream ps;

		ck_assert_ptr_nonnull(b);
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t) "pcPC_hx%"[rnd() % 8];
		for (size_t j = rnd() % 3; j; j--) {
			const struct vault_secret *x = &sec[rnd() % 3];
			size_t at = rnd() % n, l = x->ph_len - rnd() % 2;
			bool exact = rnd() % 2;

			for (size_t i = 0; i < l && at + i < n; i++)
				b[at + i] =
				    (uint8_t)(!exact && rnd() % 2
						  ? toupper((unsigned char)x->placeholder[i])
						  : x->placeholder[i]);
		}
		/* no percent-escapes here: the naive search does not decode */
		for (size_t i = 0; i < n; i++)
			if (b[i] == '%')
				b[i] = '_';
		/* the exact scans' gate (inject.c): never false where a
		 * placeholder is */
		for (size_t k = 0; k < 3; k++)
			if (memmem(b, n, sec[k].placeholder, sec[k].ph_len))
				ck_assert(ph_may_hold(&st, pp.exact, b, n));
		want = naive_folded(&st, b, n);
		got1 = ph_find_folded(&st, b, n);
		ph_stream_init(&ps, &st);
		got2a = ph_stream_feed(&ps, b, cut);
		got2b = got2a >= 0 ? got2a : ph_stream_feed(&ps, b + cut, n - cut);
		ph_stream_wipe(&ps);
		ck_assert_int_eq(got1, want);
		/* fed in two, the first piece may end one placeholder before a
		 * lower-numbered one is complete: found, or the same */
		ck_assert_int_eq(got2b >= 0, want >= 0);
		if (got2a < 0)
			ck_assert(got2b == want || naive_folded(&st, b, cut + 0) < 0);
		free(b);
	}
}
END_TEST

/* scrub_buffer reads a buffer of one chunk or less in one run to its end
 * (a response's head), where a stream is fed and finished: the same
 * output and outcome as the stream cut anywhere, with the indexes and
 * without. */
START_TEST(one_run_equals_feed_and_finish)
{
	struct scrub_keep forms = {.unbounded = true}, keep = {0};
	struct scrub_pat *both, *ref;
	size_t np;

	ck_assert_int_eq(sodium_init() >= 0, 1);
	keep_values(&forms, 0, 4);
	keep_values(&keep, 1, 1);
	ck_assert_int_eq(scrub_keep_index(&forms), 0);
	ck_assert_int_eq(scrub_keep_index(&keep), 0);
	np = forms.n + keep.n;
	both = calloc(np, sizeof(*both));
	ck_assert_ptr_nonnull(both);
	memcpy(both, forms.pats, forms.n * sizeof(*both));
	memcpy(both + forms.n, keep.pats, keep.n * sizeof(*both));
	ref = plain_copy(both, np);
	for (size_t round = 0; round < 200; round++) {
		size_t n = 1 + rnd() % (round % 2 ? 400 : 16384);
		uint8_t *b = make_buf(n, true), *ob = NULL;
		const struct scrub_pat *p = round % 3 ? both : ref;
		struct out o = {0};
		size_t h, ix, ol = 0;
		int r = run(p, np, b, n, rnd() % n, &o, &h, &ix);
		int rb = scrub_buffer(p, np, b, n, &ob, &ol, NULL);

		ck_assert_int_eq(r < 0, rb < 0);
		if (r == 0) {
			ck_assert_uint_eq(ol, o.len);
			ck_assert(ol == 0 || memcmp(ob, o.p, ol) == 0);
		}
		free(ob);
		free(o.p);
		free(b);
	}
	free(ref);
	free(both);
	scrub_keep_free(&forms);
	scrub_keep_free(&keep);
}
END_TEST

PC_UNIT_SUITE("vault_scan", "scan", 120, indexed_equals_memmem_per_pattern,
	      plain_values_equal_naive_replacement, index_rebuilt_when_the_set_grows,
	      placeholders_one_pass_equals_memmem_per_placeholder, one_run_equals_feed_and_finish)
