/* libFuzzer target: the vault's HTTP/1.1 request and response head parsers,
 * the incremental request parse (which must decide as the one-shot parse
 * does, wherever the input is cut), the chunked decoder fed in two pieces,
 * and the scrubber, whose streamed output must equal its one-shot output
 * however the input is cut, and whose output with a kept set's index must
 * equal its output without. */
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vault/vault_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct sink {
	uint8_t *p;
	size_t len;
};

static int sink_out(void *ctx, const uint8_t *p, size_t n)
{
	struct sink *s = ctx;
	uint8_t *b = realloc(s->p, s->len + n + 1);

	if (!b)
		return PC_ENOMEM;
	memcpy(b + s->len, p, n);
	s->p = b;
	s->len += n;
	return 0;
}

static void chunked(const char *in, size_t len, size_t cut)
{
	struct http_chunked c;
	size_t pos = 0;

	http_chunked_init(&c);
	while (pos < len) {
		size_t end = pos < cut && cut <= len ? cut : len, cons, off, dl;
		int rc = http_chunked_feed(&c, in + pos, end - pos, &cons, &off, &dl, NULL);

		if (rc < 0 || cons == 0)
			break;
		if (off + dl > end - pos || cons > end - pos)
			abort(); /* spans must lie inside the input */
		pos += cons;
		if (rc == 1)
			break;
	}
}

static void scrub(const uint8_t *in, size_t len, size_t cut)
{
	static const struct scrub_pat pats[] = {
	    {(const uint8_t *)"secret", 6, (const uint8_t *)"pcph_X_aaaa", 11, false, false, NULL,
	     NULL, 0},
	    {(const uint8_t *)"cre", 3, (const uint8_t *)"", 0, false, false, NULL, NULL, 0},
	    {(const uint8_t *)"ssss", 4, (const uint8_t *)"s", 1, false, false, NULL, NULL, 0},
	    /* escaped forms: matched character by character, and by an anchor */
	    {(const uint8_t *)"a/b\"c\\d%e&f g+", 15, (const uint8_t *)"PH", 2, true, false, NULL,
	     NULL, 0},
	    {(const uint8_t *)"=/Abcd1234&", 11, (const uint8_t *)"", 0, true, false, NULL, NULL,
	     0},
	    /* a base64 pattern: line breaks between its characters, two anchors */
	    {(const uint8_t *)"QWxh/ZGRp+bjpvcGVu", 18, (const uint8_t *)"PB", 2, true, true, NULL,
	     NULL, 0},
	};
	struct sink a = {0}, b = {0};
	struct scrub s;
	uint8_t *one;
	size_t ol;

	if (scrub_buffer(pats, sizeof(pats) / sizeof(pats[0]), in, len, &one, &ol, NULL) < 0)
		return;
	scrub_init(&s, pats, sizeof(pats) / sizeof(pats[0]), NULL);
	if (scrub_feed(&s, in, cut, sink_out, &a) == 0 &&
	    scrub_feed(&s, in + cut, len - cut, sink_out, &a) == 0 &&
	    scrub_finish(&s, sink_out, &a) == 0) {
		if (a.len != ol || (ol && memcmp(a.p, one, ol) != 0))
			abort(); /* streaming must not depend on where reads end */
	}
	scrub_free(&s);
	free(a.p);
	free(b.p);
	free(one);
}

/* The same bytes scrubbed, streamed in two pieces, for a kept set of
 * values with its index (one pass per chunk) and for its patterns
 * without the index (one memmem per pattern): the same result, hits and
 * output. The set is made once: made per input, the locked memory would
 * dominate the run. */
static void scrub_indexed(const uint8_t *in, size_t len, size_t cut)
{
	static struct scrub_keep k = {.unbounded = true};
	static struct scrub_pat *plain;
	static const char *const vals[] = {
	    "ghp_SECRETvalue0123", "a/b+c=d&e\"f%g",
	    "QWxhZGRpbjpvcGVuIHNlc2FtZQ/ab+cd=ef_gh-ij0123456789long"};
	struct sink a = {0}, b = {0};
	struct scrub s1, s2;
	int r1, r2;

	if (!plain) {
		if (sodium_init() < 0)
			abort();
		for (size_t i = 0; i < 3; i++)
			if (scrub_keep_add_value(&k, (const uint8_t *)vals[i], strlen(vals[i]),
						 (const uint8_t *)"PH", 2) < 0)
				abort();
		if (scrub_keep_index(&k) < 0 || !(plain = calloc(k.n, sizeof(*plain))))
			abort();
		for (size_t i = 0; i < k.n; i++) {
			plain[i] = k.pats[i];
			plain[i].meta = NULL;
			plain[i].ix = NULL;
		}
	}
	scrub_init(&s1, k.pats, k.n, NULL);
	scrub_init(&s2, plain, k.n, NULL);
	if (s1.n_ix != 1)
		abort(); /* the index is what is fuzzed */
	r1 = scrub_feed(&s1, in, cut, sink_out, &a);
	r2 = scrub_feed(&s2, in, cut, sink_out, &b);
	if (r1 == 0)
		r1 = scrub_feed(&s1, in + cut, len - cut, sink_out, &a);
	if (r2 == 0)
		r2 = scrub_feed(&s2, in + cut, len - cut, sink_out, &b);
	if (r1 == 0)
		r1 = scrub_finish(&s1, sink_out, &a);
	if (r2 == 0)
		r2 = scrub_finish(&s2, sink_out, &b);
	if (r1 != r2 || s1.hits != s2.hits || a.len != b.len || (a.len && memcmp(a.p, b.p, a.len)))
		abort();
	scrub_free(&s1);
	scrub_free(&s2);
	free(a.p);
	free(b.p);
}

/* Fed in steps of step bytes, the incremental parse must give, at every
 * length, what the one-shot parse of those bytes gives. */
static void incremental(const char *in, size_t size, size_t step)
{
	struct http_scan sc;

	http_scan_init(&sc);
	for (size_t l = 0;; l = l + step > size ? size : l + step) {
		struct http_request r1, r2;
		unsigned s1 = 0, s2 = 0;
		int a = http_request_parse_more(&sc, in, l, 4096, &r1, &s1, NULL);
		int b = http_request_parse(in, l, 4096, &r2, &s2, NULL);

		if (a != b || (a == PC_EPARSE && s1 != s2) || (a > 0 && r1.n_hdr != r2.n_hdr))
			abort();
		if (a != PC_EAGAIN || l == size)
			break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	struct http_request req;
	struct http_response resp;
	unsigned status;
	size_t cut = size ? data[0] % (size + 1) : 0;
	int n;

	n = http_request_parse(in, size, 4096, &req, &status, NULL);
	if (n > 0) {
		if ((size_t)n > size || req.host < 0 || req.n_hdr > HTTP_MAX_HEADERS)
			abort();
		for (size_t i = 0; i < req.n_hdr; i++)
			if (req.hdr[i].value + req.hdr[i].value_len > in + n)
				abort();
		if (req.body == HTTP_BODY_CHUNKED)
			chunked(in + n, size - (size_t)n, cut > (size_t)n ? cut - (size_t)n : 0);
	} else if (n != PC_EAGAIN && (status < 400 || status > 505)) {
		abort();
	}
	n = http_response_parse(in, size, 4096, cut & 1, &resp, NULL);
	if (n > 0 && (size_t)n > size)
		abort();
	if (n > 0) {
		/* exactly the promised room: ASan catches any overrun */
		size_t cap = http_response_head_max(&resp);
		char *out = malloc(cap);

		if (out && !http_response_head_rebuild(in, &resp, cut & 2, out, cap))
			abort();
		free(out);
	}
	chunked(in, size, cut);
	scrub(data, size, cut);
	scrub_indexed(data, size, cut);
	if (size <= 2048) /* each step also parses whole: quadratic */
		incremental(in, size, 1 + cut % 7);
	return 0;
}
