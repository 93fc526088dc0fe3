/* Unit tests for vault/phscan.c (issue 33, finding 5): a placeholder
 * percent-encoded (any character, either hex case) or in another case is
 * found, fed whole or cut at every position (an escape cut too); an exact
 * placeholder is left to the exact scans by ph_find_altered, an altered
 * copy beside it is not; near misses are not found. */
#include <stdio.h>
#include <string.h>

#include "tests/unit/unit.h"
#include "vault/vault_int.h"

#define PH "pcph_GITHUB_TOKEN_abcdefghijklmnopqrstuvwxyz"

static struct vault_secret sec[2] = {
    {.name = "GITHUB_TOKEN", .placeholder = PH},
    {.name = "WS", .placeholder = "pcph_WS_234567abcdefghijklmnopqrst"}};
static struct vault_store store = {.s = sec, .n = 2};
static struct ph_prefix pp;

static void init(void)
{
	sec[0].ph_len = strlen(sec[0].placeholder);
	sec[1].ph_len = strlen(sec[1].placeholder);
	ph_prefix_get(&store, &pp);
	ck_assert_uint_eq(pp.exact, 5); /* "pcph_" */
	ck_assert_uint_eq(pp.folded, 5);
}

/* PH with every step-th character percent-encoded (upper-case hex or not). */
static void encode(char *out, size_t step, bool upper)
{
	const char *p = PH;
	size_t o = 0;

	for (size_t i = 0; p[i]; i++)
		if (i % step == 0)
			o += (size_t)sprintf(out + o, upper ? "%%%02X" : "%%%02x", p[i]);
		else
			out[o++] = p[i];
	out[o] = '\0';
}

/* Found whole and cut in two at every position. */
static void found_every_cut(const char *s, int want)
{
	size_t n = strlen(s);
	struct ph_stream ps;

	ck_assert_int_eq(ph_find_folded(&store, (const uint8_t *)s, n), want);
	for (size_t cut = 0; cut <= n; cut++) {
		int a, b;

		ph_stream_init(&ps, &store);
		a = ph_stream_feed(&ps, (const uint8_t *)s, cut);
		b = ph_stream_feed(&ps, (const uint8_t *)s + cut, n - cut);
		ck_assert_msg((a >= 0 ? a : b) == want, "%s cut at %zu: %d %d", s, cut, a, b);
		ph_stream_wipe(&ps);
	}
}

START_TEST(forms_found_at_every_cut)
{
	char b[512], e[256];

	init();
	for (size_t step = 1; step <= 4; step++)
		for (int up = 0; up < 2; up++) {
			encode(e, step, up);
			snprintf(b, sizeof(b), "q=x%sy", e);
			found_every_cut(b, 0);
		}
	found_every_cut("x PCPH_GITHUB_TOKEN_ABCDEFGHIJKLMNOPQRSTUVWXYZ y", 0);
	found_every_cut("PcPh_github_token_abcdefghijklmnopqrstuvwxyz", 0);
	found_every_cut("%50%43PH_WS_234567ABCDEFGHIJKLMNOPQRST", 1);
	found_every_cut(PH, 0);
}
END_TEST

START_TEST(near_misses_not_found)
{
	init();
	/* one random character off, a double encoding, an escape broken */
	ck_assert_int_eq(
	    ph_find_folded(&store, (const uint8_t *)"pcph_GITHUB_TOKEN_abcdefghijklmnopqrstuvwxyy",
			   44),
	    -1);
	ck_assert_int_eq(
	    ph_find_folded(&store, (const uint8_t *)"%2570cph_WS_234567abcdefghijklmnopqrst", 38),
	    -1);
	ck_assert_int_eq(
	    ph_find_folded(&store, (const uint8_t *)"%7Gcph_WS_234567abcdefghijklmnopqrst", 36),
	    -1);
}
END_TEST

START_TEST(altered_beside_exact)
{
	const char *exact = "Bearer " PH;
	const char *both = "Bearer " PH " PCPH_GITHUB_TOKEN_abcdefghijklmnopqrstuvwxyz";

	init();
	ck_assert_int_eq(ph_find_altered(&store, &pp, (const uint8_t *)exact, strlen(exact)), -1);
	ck_assert_int_eq(ph_find_altered(&store, &pp, (const uint8_t *)both, strlen(both)), 0);
}
END_TEST

/* ph_find_altered reads most headers once and answers -1 without the
 * folded search (phscan.c, may_alter): wherever no exact placeholder is,
 * its answer is the folded search's, for the case-changed forms (no '%'
 * to send them the long way), the escaped ones, near misses and ordinary
 * header values. */
START_TEST(altered_agrees_with_folded)
{
	char e[256];
	const char *s[] = {
	    "x PCPH_GITHUB_TOKEN_ABCDEFGHIJKLMNOPQRSTUVWXYZ y",
	    "PcPh_github_token_abcdefghijklmnopqrstuvwxyz",
	    "pcph_ws_234567ABCDEFGHIJKLMNOPQRST",
	    "%50%43PH_WS_234567ABCDEFGHIJKLMNOPQRST",
	    "pcph_GITHUB_TOKEN_abcdefghijklmnopqrstuvwxyy",
	    "%7Gcph_WS_234567abcdefghijklmnopqrst",
	    "application/json; charset=utf-8",
	    "PCPH_",
	    "x pCpH",
	    "pcpH_WS",
	    "",
	    e,
	};

	init();
	encode(e, 3, true);
	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
		size_t n = strlen(s[i]);

		ck_assert_msg(ph_find_altered(&store, &pp, (const uint8_t *)s[i], n) ==
				  (n ? ph_find_folded(&store, (const uint8_t *)s[i], n) : -1),
			      "%s", s[i]);
	}
	ck_assert_int_eq(ph_find_altered(&store, &pp, (const uint8_t *)s[0], strlen(s[0])), 0);
	ck_assert_int_eq(ph_find_altered(&store, &pp, (const uint8_t *)s[2], strlen(s[2])), 1);
	ck_assert_int_eq(ph_find_altered(&store, &pp, (const uint8_t *)e, strlen(e)), 0);
}
END_TEST

PC_UNIT_SUITE("vault_phscan", "phscan", 30, forms_found_at_every_cut, near_misses_not_found,
	      altered_beside_exact, altered_agrees_with_folded)
