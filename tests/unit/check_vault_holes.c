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
					int a = http_request_parse_more(&sc, s, l, maxes[m], &r1,
									&st1, &e1);
					int b = http_request_parse(s, l, maxes[m], &r2, &st2, &e2);

					ck_assert_msg(a == b,
						      "'%s' max %zu at %zu: %d, one-shot %d", s,
						      maxes[m], l, a, b);
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
	const char *s =
	    "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nsecret-VALUE-0123456789: a\x01z\r\n\r\n";
	struct http_response r;
	struct pc_err e = {0};

	ck_assert_int_eq(http_response_parse(s, strlen(s), MAXH, false, &r, &e), PC_EPARSE);
	ck_assert_ptr_null(strstr(e.msg, "VALUE"));
	ck_assert_ptr_nonnull(strstr(e.msg, "field 2"));
}
END_TEST

/* ---- WebSocket: one tunnel, both directions, within 2 MiB ---------------------- */

struct wsrec {
	uint8_t *msg; /* what the message callback got */
	size_t mlen;
	size_t data, pieces; /* upstream bytes and calls */
	bool ended;
	unsigned controls;
};

static int rec_message(void *ctx, uint8_t op, uint8_t *p, size_t n)
{
	struct wsrec *r = ctx;

	(void)op;
	free(r->msg);
	r->msg = malloc(n ? n : 1);
	memcpy(r->msg, p, n);
	r->mlen = n;
	return 0;
}

static int rec_data(void *ctx, uint8_t op, const uint8_t *p, size_t n, bool end)
{
	struct wsrec *r = ctx;

	(void)op;
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(p[i], (uint8_t)((r->data + i) * 7));
	r->data += n;
	r->pieces++;
	r->ended |= end;
	return 0;
}

static int rec_control(void *ctx, uint8_t op, uint8_t *p, size_t n)
{
	(void)op, (void)p, (void)n;
	((struct wsrec *)ctx)->controls++;
	return 0;
}

static const struct ws_ops rec_ops = {rec_message, rec_data, rec_control};

/* Frames of a message of len bytes (payload byte i = i * 7) in fragments of
 * frag bytes, masked or not, with a ping between the first two. */
static uint8_t *ws_message(size_t len, size_t frag, bool masked, size_t *out_len)
{
	uint8_t *b = malloc(len + (len / frag + 2) * 14 + 16), mask[4] = {1, 2, 3, 4};
	size_t n = 0, off = 0;

	do {
		size_t k = len - off < frag ? len - off : frag;
		bool fin = off + k == len;

		n += ws_frame_header(b + n, fin, off ? 0 : 2, k);
		if (masked) {
			b[n - (k < 126 ? 1 : k < 65536 ? 3 : 9)] |= 0x80;
			memcpy(b + n, mask, 4);
			n += 4;
		}
		for (size_t i = 0; i < k; i++)
			b[n + i] = (uint8_t)((off + i) * 7) ^ (masked ? mask[i & 3] : 0);
		n += k;
		off += k;
		if (off == k && !fin) { /* a ping between fragments */
			n += ws_frame_header(b + n, true, 9, 0);
			if (masked) {
				b[n - 1] |= 0x80;
				memcpy(b + n, mask, 4);
				n += 4;
			}
		}
	} while (off < len);
	*out_len = n;
	return b;
}

/* A 1 MiB message each way at once, read in pieces of odd sizes: the
 * sandbox's arrives whole and unmasked, the upstream's in pieces, and the
 * tunnel's buffers (its fixed part counted as tunnel.c counts it) never
 * exceed 2 MiB. (The old tunnel buffered raw bytes, the message and the
 * sandbox's frames per direction, grown by realloc: 4-5 MiB.) */
START_TEST(ws_tunnel_within_its_bound)
{
	size_t fixed = 10 + 16384 + 16384 + 64 + 200, cl, ul;
	struct ws_mem mem = {fixed, fixed};
	struct ws_dir cw, uw;
	struct wsrec rc = {0}, ru = {0};
	uint8_t *cb = ws_message(WS_MAX_MESSAGE, 1000, true, &cl);
	uint8_t *ub = ws_message(WS_MAX_MESSAGE, 70000, false, &ul);
	char why[200] = "";
	size_t co = 0, uo = 0, step = 1;

	ws_dir_init(&cw, true, &mem);
	ws_dir_init(&uw, false, &mem);
	while (co < cl || uo < ul) {
		size_t a = cl - co < step ? cl - co : step, b = ul - uo < step ? ul - uo : step;

		ck_assert_int_eq(ws_dir_feed(&cw, cb + co, a, &rec_ops, &rc, why, sizeof(why)), 0);
		ck_assert_int_eq(ws_dir_feed(&uw, ub + uo, b, &rec_ops, &ru, why, sizeof(why)), 0);
		co += a;
		uo += b;
		step = step * 3 % 16381 + 1;
	}
	ck_assert_int_eq(rc.mlen, WS_MAX_MESSAGE);
	for (size_t i = 0; i < rc.mlen; i++)
		ck_assert_int_eq(rc.msg[i], (uint8_t)(i * 7));
	ck_assert_int_eq(ru.data, WS_MAX_MESSAGE);
	ck_assert(ru.ended);
	ck_assert_int_eq(rc.controls + ru.controls, 2);
	ck_assert_msg(mem.peak <= WS_TUNNEL_MAX, "peak %zu", mem.peak);
	ws_dir_free(&cw);
	ws_dir_free(&uw);
	ck_assert_int_eq(mem.cur, fixed);
	free(cb);
	free(ub);
	free(rc.msg);
}
END_TEST

/* One byte more than 1 MiB, or endless empty fragments, end the tunnel. */
START_TEST(ws_tunnel_refuses_beyond)
{
	struct ws_mem mem = {0};
	struct ws_dir w;
	struct wsrec r = {0};
	char why[200] = "";
	size_t l;
	uint8_t *b = ws_message(WS_MAX_MESSAGE + 1, 4096, true, &l);
	uint8_t empty[6] = {0x00, 0x80, 0, 0, 0, 0}, first[6] = {0x02, 0x80, 0, 0, 0, 0};
	int rc;

	ws_dir_init(&w, true, &mem);
	ck_assert_int_eq(ws_dir_feed(&w, b, l, &rec_ops, &r, why, sizeof(why)), PC_EPARSE);
	ck_assert_ptr_nonnull(strstr(why, "larger than"));
	ws_dir_free(&w);
	ws_dir_init(&w, true, &mem);
	ck_assert_int_eq(ws_dir_feed(&w, first, 6, &rec_ops, &r, why, sizeof(why)), 0);
	for (int i = 0; i < WS_MAX_FRAGMENTS + 1; i++) {
		uint8_t e[6];

		memcpy(e, empty, 6);
		rc = ws_dir_feed(&w, e, 6, &rec_ops, &r, why, sizeof(why));
		if (rc < 0)
			break;
	}
	ck_assert_int_eq(rc, PC_EPARSE);
	ws_dir_free(&w);
	ck_assert_int_eq(mem.cur, 0);
	free(b);
	free(r.msg);
}
END_TEST

/* A locked chunk given back is kept for the next connection: wiped first,
 * so nothing of one connection's secrets waits there; and a chunk of
 * another size is not handed out for it. */
START_TEST(secmem_kept_chunks_are_wiped)
{
	static const size_t size = 3 * 4096 + 48;
	uint8_t *a = secmem_alloc(size), *b, *c;

	ck_assert_ptr_nonnull(a);
	memset(a, 'S', size);
	secmem_free(a, size);
	c = secmem_alloc(size - 16);
	ck_assert_ptr_nonnull(c);
	ck_assert_ptr_ne(c, a);
	b = secmem_alloc(size);
	ck_assert_ptr_eq(b, a); /* the kept one */
	for (size_t i = 0; i < size; i++)
		ck_assert_int_eq(b[i], 0);
	secmem_free(b, size);
	secmem_free(c, size - 16);
	secmem_free(NULL, size);
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
		      response_error_holds_no_upstream_bytes, ws_tunnel_within_its_bound,
		      ws_tunnel_refuses_beyond, secmem_kept_chunks_are_wiped);
	suite_add_tcase(s, t);
	return s;
}

PC_UNIT_MAIN(holes_suite)
