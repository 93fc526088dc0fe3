/* Unit tests for the vault's answers to issue 22's holes: the request head
 * parsed incrementally (linear however it is cut, and deciding exactly as
 * the one-shot parse does), parse errors that never echo the peer's bytes,
 * and the WebSocket tunnel's memory bound. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/unit.h"
#include "vault/vault_int.h"

#define MAXH 32768

/* A head of almost max bytes: 99 fields of ~320 bytes. */
static char *big_head(size_t *len)
{
	char *b = malloc(MAXH);
	size_t n = (size_t)snprintf(b, MAXH, "GET /x HTTP/1.1\r\nHost: api.github.test\r\n");

	for (int i = 0; i < 98; i++) {
		n += (size_t)snprintf(b + n, MAXH - n, "X-Field-%02d: ", i);
		memset(b + n, 'a' + i % 26, 310);
		n += 310;
		memcpy(b + n, "\r\n", 2);
		n += 2;
	}
	memcpy(b + n, "\r\n", 2);
	*len = n + 2;
	ck_assert_int_lt(*len, MAXH);
	ck_assert_int_gt(*len, 31 * 1024);
	return b;
}

/* Sent one byte per TLS record, a ~32 KiB head costs one full parse and one
 * look at each byte (the old loop parsed from the start after each record:
 * 32,000 parses, quadratic in the head's size). */
START_TEST(head_one_byte_at_a_time_is_linear)
{
	size_t len;
	char *b = big_head(&len);
	struct http_scan sc;
	struct http_request r;
	struct pc_err e = {0};
	unsigned st;
	int rc = PC_EAGAIN;

	http_scan_init(&sc);
	for (size_t l = 1; l <= len; l++) {
		rc = http_request_parse_more(&sc, b, l, MAXH, &r, &st, &e);
		if (l < len)
			ck_assert_int_eq(rc, PC_EAGAIN);
	}
	ck_assert_int_eq(rc, (int)len);
	ck_assert_int_eq(r.n_hdr, 99);
	ck_assert_int_eq(sc.parses, 1);
	/* each byte once, the CR of each line's end at most twice */
	ck_assert_msg(sc.scanned <= len + 100, "scanned %zu bytes of a %zu-byte head", sc.scanned,
		      len);
	free(b);
}
END_TEST

/* Cut anywhere, the incremental parse decides at the same byte, with the
 * same result and status, as the one-shot parse of the same bytes. */
START_TEST(head_incremental_decides_as_one_shot)
{
	static const char *const reqs[] = {
	    "GET / HTTP/1.1\r\nHost: h\r\n\r\n",
	    "\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\nGET",
	    "\r\n\r",
	    "GET / HTTP/1.1\r\nHost: h\nX: 1\r\n\r\n",
	    "GET / HTTP/1.1\r\nHost: h\rX: 1\r\n\r\n",
	    "GET / HTTP/1.1\r\nHost: h\r\n  folded\r\n\r\n",
	    "GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n",
	    "GET / HTTP/2.0\r\nHost: h\r\n\r\n",
	    "\r\n\r\n\r\n\r\n\r\n\r\n",
	    "\r\n",
	    "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
	};
	static const size_t maxes[] = {MAXH, 40, 20, 7};

	for (size_t q = 0; q < sizeof(reqs) / sizeof(reqs[0]); q++)
		for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++)
			for (size_t step = 1; step <= 3; step++) {
				const char *s = reqs[q];
				size_t n = strlen(s);
				struct http_scan sc;

				http_scan_init(&sc);
				for (size_t l = 0; l <= n;) {
					struct http_request r1, r2;
					struct pc_err e1 = {0}, e2 = {0};
					unsigned st1 = 0, st2 = 0;
					int a = http_request_parse_more(&sc, s, l, maxes[m], &r1, &st1,
									&e1);
					int b = http_request_parse(s, l, maxes[m], &r2, &st2, &e2);

					ck_assert_msg(a == b, "'%s' max %zu at %zu: %d, one-shot %d",
						      s, maxes[m], l, a, b);
					if (a == PC_EPARSE) {
						ck_assert_uint_eq(st1, st2);
						ck_assert_str_eq(e1.msg, e2.msg);
					}
					if (a != PC_EAGAIN)
						break;
					if (l == n)
						break;
					l = l + step > n ? n : l + step;
				}
			}
}
END_TEST

/* An upstream header name may be a reflected value: the reason of a
 * refused response head (a 502 the sandbox reads, a log record) names the
 * field by position only. */
START_TEST(response_error_holds_no_upstream_bytes)
{
	const char *s = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nsecret-VALUE-0123456789: a\x01z\r\n\r\n";
	struct http_response r;
	struct pc_err e = {0};

	ck_assert_int_eq(http_response_parse(s, strlen(s), MAXH, false, &r, &e), PC_EPARSE);
	ck_assert_ptr_null(strstr(e.msg, "VALUE"));
	ck_assert_ptr_nonnull(strstr(e.msg, "field 2"));
}
END_TEST

static Suite *holes_suite(void)
{
	Suite *s = suite_create("vault_holes");
	TCase *t = tcase_create("holes");

	if (sodium_init() < 0)
		abort();
	tcase_set_timeout(t, 60);
	PC_UNIT_TESTS(t, head_one_byte_at_a_time_is_linear, head_incremental_decides_as_one_shot,
		      response_error_holds_no_upstream_bytes);
	suite_add_tcase(s, t);
	return s;
}

PC_UNIT_MAIN(holes_suite)
