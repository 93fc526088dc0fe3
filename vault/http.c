/* Strict HTTP/1.1 head parsing and chunked framing for the vault. Anything
 * two implementations could read two ways (CL+TE, duplicate lengths, folded
 * or bare-LF lines, odd names) is refused: the vault must never disagree with
 * the upstream about where a request ends. */
#include "vault/vault_int.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

static bool is_tchar(unsigned char c)
{
	if (isalnum(c) && c < 0x80)
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-value octets: VCHAR, obs-text, SP, HTAB */
static bool is_vchar(unsigned char c)
{
	return (c >= 0x21 && c != 0x7f) || c == ' ' || c == '\t';
}

static bool span_ieq(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

int http_header_find(const struct http_header *hdr, size_t n, const char *name, size_t from)
{
	for (size_t i = from; i < n; i++)
		if (span_ieq(hdr[i].name, hdr[i].name_len, name))
			return (int)i;
	return -1;
}

/* The same comparisons on buf[s..e), the bounds of a header as head_fields
 * finds them. The parser itself works on these indices into the one buffer
 * rather than on the spans of struct http_header (a pointer and a length
 * each): every index is then below the end of the head by itself, which is
 * what lets Frama-C's EVA prove every read (docs/prove.md). */
static bool idx_ieq(const char *buf, size_t s, size_t e, const char *lit)
{
	size_t n = strlen(lit), k = 0;

	if (e - s != n)
		return false;
	for (size_t j = s; j < e && k < n; j++, k++)
		if (tolower((unsigned char)buf[j]) != tolower((unsigned char)lit[k]))
			return false;
	return true;
}

static bool idx_list_has(const char *buf, size_t s, size_t e, const char *token)
{
	size_t i = s;

	while (i < e) {
		size_t ts, te;

		while (i < e && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == ','))
			i++;
		ts = i;
		while (i < e && buf[i] != ',')
			i++;
		te = i;
		while (te > ts && (buf[te - 1] == ' ' || buf[te - 1] == '\t'))
			te--;
		if (te > ts && idx_ieq(buf, ts, te, token))
			return true;
	}
	return false;
}

/* What the framing and the request's semantics need of a header, found by
 * head_fields while its bounds are indices (above). */
enum head_kind { HK_OTHER, HK_HOST, HK_CL, HK_TE, HK_CONNECTION, HK_UPGRADE, HK_EXPECT };

struct head_fact {
	enum head_kind kind;
	bool cl_ok;	/* HK_CL: a valid Content-Length, in cl */
	bool chunked;	/* HK_TE: the value is exactly "chunked" */
	bool close;	/* HK_CONNECTION: lists "close" */
	bool upgrade;	/* HK_CONNECTION: lists "upgrade" */
	bool websocket; /* HK_UPGRADE: the value is exactly "websocket" */
	bool cont100;	/* HK_EXPECT: the value is exactly "100-continue" */
	uint64_t cl;
};

static int fact_find(const struct head_fact *f, size_t n, enum head_kind k, size_t from)
{
	for (size_t i = from; i < n && i < HTTP_MAX_HEADERS; i++)
		if (f[i].kind == k)
			return (int)i;
	return -1;
}

/* Split the head into CRLF-terminated lines. Returns the head length, 0 when
 * incomplete, or PC_EPARSE. lines[] gets the start of each line (the first is
 * the start line) and *n_lines their count, the empty last line excluded. */
struct head_lines {
	size_t start[HTTP_MAX_HEADERS + 1];
	size_t end[HTTP_MAX_HEADERS + 1]; /* offset of the line's CR */
	size_t n;
};

static int head_split(const char *buf, size_t len, size_t max_head, size_t skip,
		      struct head_lines *hl, unsigned *status, struct pc_err *err)
{
	size_t ls = skip;

	memset(hl, 0, sizeof(*hl)); /* head_fields reads start[l], end[l] for l < n */
	for (size_t i = skip; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];

		if (i >= max_head) {
			*status = 431;
			return pc_err_set(err, PC_EPARSE, "header section larger than %zu bytes",
					  max_head);
		}
		if (c == '\n') {
			*status = 400;
			return pc_err_set(err, PC_EPARSE, "bare LF in header section");
		}
		if (c != '\r') {
			if (i - ls >= HTTP_MAX_LINE) {
				*status = 400;
				return pc_err_set(err, PC_EPARSE,
						  "header line longer than %d bytes",
						  HTTP_MAX_LINE);
			}
			continue;
		}
		if (i + 1 >= len)
			return 0;
		if (buf[i + 1] != '\n') {
			*status = 400;
			return pc_err_set(err, PC_EPARSE, "bare CR in header section");
		}
		if (i == ls) /* the empty line: end of head */
			return hl->n ? (int)(i + 2)
				     : (*status = 400, pc_err_set(err, PC_EPARSE, "empty request"));
		if (hl->n > HTTP_MAX_HEADERS) {
			*status = 431;
			return pc_err_set(err, PC_EPARSE, "more than %d header fields",
					  HTTP_MAX_HEADERS);
		}
		hl->start[hl->n] = ls;
		hl->end[hl->n] = i;
		hl->n++;
		ls = i + 2;
		i++;
	}
	if (len >= max_head) {
		*status = 431;
		return pc_err_set(err, PC_EPARSE, "header section larger than %zu bytes", max_head);
	}
	return 0;
}

static bool parse_length(const char *buf, size_t s, size_t e, uint64_t *out)
{
	uint64_t v = 0;

	if (e - s == 0 || e - s > 18)
		return false;
	for (size_t i = s; i < e; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(buf[i] - '0');
	}
	*out = v;
	return true;
}

/* Parse header lines 1..n into hdr[], and what the framing needs into f[]. */
static int head_fields(const char *buf, const struct head_lines *hl, struct http_header *hdr,
		       struct head_fact *f, size_t *n_hdr, struct pc_err *err)
{
	size_t l;

	/* l <= HTTP_MAX_HEADERS: head_split allows no more lines; EVA cannot
	 * tell, so the loop says it too. */
	for (l = 1; l < hl->n && l <= HTTP_MAX_HEADERS; l++) {
		size_t s = hl->start[l], e = hl->end[l], c = s, v;
		struct http_header *h = &hdr[l - 1];
		struct head_fact *hf = &f[l - 1];

		if (s >= e) /* not reached: an empty line ends the head */
			return pc_err_set(err, PC_EPARSE, "header line without a field name");
		if (buf[s] == ' ' || buf[s] == '\t')
			return pc_err_set(err, PC_EPARSE, "obsolete line folding (obs-fold)");
		while (c < e && buf[c] != ':') {
			if (!is_tchar((unsigned char)buf[c]))
				return pc_err_set(err, PC_EPARSE,
						  "invalid character in header name");
			c++;
		}
		if (c >= e || c == s) /* c >= e: c == e, written so that it bounds c */
			return pc_err_set(err, PC_EPARSE, "header line without a field name");
		h->name = buf + s;
		h->name_len = c - s;
		v = c + 1;
		while (v < e && (buf[v] == ' ' || buf[v] == '\t'))
			v++;
		while (e > v && (buf[e - 1] == ' ' || buf[e - 1] == '\t'))
			e--;
		for (size_t q = v; q < e; q++)
			if (!is_vchar((unsigned char)buf[q]))
				/* by position, never by name: the bytes are the
				 * peer's (an upstream's header name may be a
				 * reflected value), and this text reaches the
				 * sandbox and the log unscrubbed */
				return pc_err_set(
				    err, PC_EPARSE,
				    "invalid character in the value of header field %zu", l);
		h->value = buf + v;
		h->value_len = e - v;
		memset(hf, 0, sizeof(*hf));
		if (idx_ieq(buf, s, c, "host")) {
			hf->kind = HK_HOST;
		} else if (idx_ieq(buf, s, c, "content-length")) {
			hf->kind = HK_CL;
			hf->cl_ok = parse_length(buf, v, e, &hf->cl);
		} else if (idx_ieq(buf, s, c, "transfer-encoding")) {
			hf->kind = HK_TE;
			hf->chunked = idx_ieq(buf, v, e, "chunked");
		} else if (idx_ieq(buf, s, c, "connection")) {
			hf->kind = HK_CONNECTION;
			hf->close = idx_list_has(buf, v, e, "close");
			hf->upgrade = idx_list_has(buf, v, e, "upgrade");
		} else if (idx_ieq(buf, s, c, "upgrade")) {
			hf->kind = HK_UPGRADE;
			hf->websocket = idx_ieq(buf, v, e, "websocket");
		} else if (idx_ieq(buf, s, c, "expect")) {
			hf->kind = HK_EXPECT;
			hf->cont100 = idx_ieq(buf, v, e, "100-continue");
		}
	}
	*n_hdr = l - 1;
	return 0;
}

/* Framing headers common to requests and responses: exactly one
 * Content-Length, or exactly one "Transfer-Encoding: chunked", never both. */
static int head_framing(const struct head_fact *f, size_t n, int minor, enum http_body *body,
			uint64_t *cl, struct pc_err *err)
{
	int icl = fact_find(f, n, HK_CL, 0);
	int ite = fact_find(f, n, HK_TE, 0);

	*body = HTTP_BODY_NONE;
	*cl = 0;
	if (icl >= 0 && ite >= 0)
		return pc_err_set(err, PC_EPARSE, "both Content-Length and Transfer-Encoding");
	if (icl >= 0) {
		if (fact_find(f, n, HK_CL, (size_t)icl + 1) >= 0)
			return pc_err_set(err, PC_EPARSE, "duplicate Content-Length");
		if (!f[icl].cl_ok)
			return pc_err_set(err, PC_EPARSE, "invalid Content-Length");
		*cl = f[icl].cl;
		*body = HTTP_BODY_LENGTH;
	}
	if (ite >= 0) {
		if (minor == 0)
			return pc_err_set(err, PC_EPARSE,
					  "Transfer-Encoding in an HTTP/1.0 message");
		if (fact_find(f, n, HK_TE, (size_t)ite + 1) >= 0)
			return pc_err_set(err, PC_EPARSE, "duplicate Transfer-Encoding");
		if (!f[ite].chunked)
			return pc_err_set(err, PC_EPARSE,
					  "Transfer-Encoding other than plain \"chunked\"");
		*body = HTTP_BODY_CHUNKED;
	}
	return 0;
}

/* "HTTP/1.x" at buf[s..s + 8); the caller has checked those 8 bytes are
 * there. */
static int parse_version(const char *buf, size_t s, int *minor)
{
	const char *p = buf + s;

	if (memcmp(p, "HTTP/", 5) != 0 || !isdigit((unsigned char)p[5]) || p[6] != '.' ||
	    !isdigit((unsigned char)p[7]))
		return PC_EPARSE;
	if (p[5] != '1' || (p[7] != '0' && p[7] != '1'))
		return PC_EUNSUPP;
	*minor = p[7] - '0';
	return 0;
}

/* The request line, buf[s..e). */
static int request_line(const char *buf, size_t s, size_t e, struct http_request *r,
			unsigned *status, struct pc_err *err)
{
	size_t sp1, sp2, o = 0;
	int rc;

	*status = 400;
	if (s >= e) /* not reached: head_split ends the head at an empty line */
		return pc_err_set(err, PC_EPARSE, "malformed request line");
	for (sp1 = s; sp1 < e && buf[sp1] != ' '; sp1++)
		;
	if (sp1 >= e || sp1 == s || sp1 - s >= sizeof(r->method)) /* >=: bounds sp1 */
		return pc_err_set(err, PC_EPARSE, "malformed request line");
	for (size_t q = s; q < sp1; q++)
		if (!is_tchar((unsigned char)buf[q]))
			return pc_err_set(err, PC_EPARSE, "invalid character in method");
	/* o and q move together; each has its own bound (EVA) */
	for (size_t q = s; q < sp1 && o < sizeof(r->method) - 1; q++)
		r->method[o++] = buf[q];
	r->method[o] = '\0';
	for (sp2 = sp1 + 1; sp2 < e && buf[sp2] != ' '; sp2++)
		;
	if (sp2 >= e || sp2 == sp1 + 1)
		return pc_err_set(err, PC_EPARSE, "malformed request line");
	for (size_t q = sp1 + 1; q < sp2; q++)
		if ((unsigned char)buf[q] <= 0x20 || (unsigned char)buf[q] >= 0x7f)
			return pc_err_set(err, PC_EPARSE, "invalid character in request target");
	r->target = buf + sp1 + 1;
	r->target_len = sp2 - sp1 - 1;
	rc = sp2 + 1 + 8 == e ? parse_version(buf, sp2 + 1, &r->minor) : PC_EPARSE;
	if (rc == PC_EUNSUPP) {
		*status = 505;
		return pc_err_set(err, PC_EPARSE, "HTTP version not supported");
	}
	if (rc < 0)
		return pc_err_set(err, PC_EPARSE, "malformed request line");
	if (strcmp(r->method, "CONNECT") == 0) {
		*status = 405;
		return pc_err_set(err, PC_EPARSE, "CONNECT is not supported");
	}
	if (buf[sp1 + 1] != '/' &&
	    !(sp2 - sp1 - 1 == 1 && buf[sp1 + 1] == '*' && strcmp(r->method, "OPTIONS") == 0))
		return pc_err_set(err, PC_EPARSE, "request target must be origin-form (/path)");
	return 0;
}

/* Semantics of the request's headers: Host, framing, Connection, Expect,
 * Upgrade. */
static int request_headers(struct http_request *r, const struct head_fact *f, unsigned *status,
			   struct pc_err *err)
{
	int i;

	*status = 400;
	r->host = fact_find(f, r->n_hdr, HK_HOST, 0);
	if (r->host < 0)
		return pc_err_set(err, PC_EPARSE, "missing Host header");
	if (fact_find(f, r->n_hdr, HK_HOST, (size_t)r->host + 1) >= 0)
		return pc_err_set(err, PC_EPARSE, "duplicate Host header");
	if (head_framing(f, r->n_hdr, r->minor, &r->body, &r->content_length, err) < 0)
		return PC_EPARSE;
	if (r->body == HTTP_BODY_LENGTH && r->content_length == 0)
		r->body = HTTP_BODY_NONE;
	r->keep_alive = r->minor == 1;
	for (i = -1; (i = fact_find(f, r->n_hdr, HK_CONNECTION, (size_t)(i + 1))) >= 0;) {
		if (f[i].close)
			r->keep_alive = false;
		if (f[i].upgrade)
			r->upgrade = true;
	}
	i = fact_find(f, r->n_hdr, HK_UPGRADE, 0);
	if (i >= 0) {
		if (fact_find(f, r->n_hdr, HK_UPGRADE, (size_t)i + 1) >= 0 || !f[i].websocket) {
			*status = 501;
			return pc_err_set(err, PC_EPARSE, "only Upgrade: websocket is supported");
		}
	} else {
		r->upgrade = false;
	}
	if (r->upgrade && r->minor == 0)
		return pc_err_set(err, PC_EPARSE, "Upgrade in an HTTP/1.0 request");
	i = fact_find(f, r->n_hdr, HK_EXPECT, 0);
	if (i >= 0) {
		if (fact_find(f, r->n_hdr, HK_EXPECT, (size_t)i + 1) >= 0 || !f[i].cont100) {
			*status = 417;
			return pc_err_set(err, PC_EPARSE, "unsupported Expect header");
		}
		r->expect_continue = r->minor == 1;
	}
	return 0;
}

int http_request_parse(const char *buf, size_t len, size_t max_head, struct http_request *req,
		       unsigned *status, struct pc_err *err)
{
	struct head_fact f[HTTP_MAX_HEADERS] = {0}; /* EVA: read below n only */
	struct head_lines hl;
	struct http_request r;
	size_t skip = 0;
	int head;

	*status = 400;
	/* RFC 9112 2.2: ignore empty lines before the request line. */
	while (skip + 1 < len && buf[skip] == '\r' && buf[skip + 1] == '\n' && skip < max_head)
		skip += 2;
	if (skip == len || (skip + 1 == len && buf[skip] == '\r'))
		return PC_EAGAIN;
	head = head_split(buf, len, max_head, skip, &hl, status, err);
	if (head <= 0)
		return head == 0 ? PC_EAGAIN : PC_EPARSE;
	memset(&r, 0, sizeof(r));
	if (request_line(buf, hl.start[0], hl.end[0], &r, status, err) < 0)
		return PC_EPARSE;
	*status = 400;
	if (head_fields(buf, &hl, r.hdr, f, &r.n_hdr, err) < 0)
		return PC_EPARSE;
	if (request_headers(&r, f, status, err) < 0)
		return PC_EPARSE;
	r.head_len = (size_t)head;
	*req = r;
	return head;
}

void http_scan_init(struct http_scan *sc)
{
	memset(sc, 0, sizeof(*sc));
}

/* The full parse, once the scan saw something that decides: the end of
 * the head, or a byte head_split refuses. */
static int scan_decide(struct http_scan *sc, const char *buf, size_t len, size_t max_head,
		       struct http_request *req, unsigned *status, struct pc_err *err)
{
	sc->parses++;
	return http_request_parse(buf, len, max_head, req, status, err);
}

/* The scan mirrors http_request_parse's skipping of empty lines and
 * head_split's checks, byte by byte from where the last call stopped, and
 * leaves every decision to http_request_parse itself: it only says when
 * that parse can decide. */
int http_request_parse_more(struct http_scan *sc, const char *buf, size_t len, size_t max_head,
			    struct http_request *req, unsigned *status, struct pc_err *err)
{
	size_t i = sc->pos;

	*status = 400;
	if (!sc->in_head) {
		while (i + 1 < len && buf[i] == '\r' && buf[i + 1] == '\n' && i < max_head)
			i += 2;
		sc->scanned += i - sc->pos;
		if (i == len || (i + 1 == len && buf[i] == '\r')) {
			sc->pos = i;
			return PC_EAGAIN;
		}
		sc->in_head = true;
		sc->ls = i;
	}
	for (; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];

		sc->scanned++;
		if (i >= max_head || c == '\n')
			return scan_decide(sc, buf, len, max_head, req, status, err);
		if (c != '\r') {
			if (i - sc->ls >= HTTP_MAX_LINE)
				return scan_decide(sc, buf, len, max_head, req, status, err);
			continue;
		}
		if (i + 1 >= len) { /* CR LF may still come: look at the CR again */
			sc->pos = i;
			return PC_EAGAIN;
		}
		if (buf[i + 1] != '\n' || i == sc->ls || sc->lines > HTTP_MAX_HEADERS)
			return scan_decide(sc, buf, len, max_head, req, status, err);
		sc->lines++;
		sc->ls = i + 2;
		i++;
	}
	sc->pos = i;
	if (len >= max_head)
		return scan_decide(sc, buf, len, max_head, req, status, err);
	return PC_EAGAIN;
}

int http_response_parse(const char *buf, size_t len, size_t max_head, bool for_head,
			struct http_response *resp, struct pc_err *err)
{
	struct head_fact f[HTTP_MAX_HEADERS] = {0}; /* EVA: read below n only */
	struct head_lines hl;
	struct http_response r;
	const char *p, *end;
	unsigned status;
	int head, i;

	head = head_split(buf, len, max_head, 0, &hl, &status, err);
	if (head <= 0)
		return head == 0 ? PC_EAGAIN : PC_EPARSE;
	memset(&r, 0, sizeof(r));
	p = buf + hl.start[0];
	end = buf + hl.end[0];
	if (end - p < 12 || parse_version(buf, hl.start[0], &r.minor) < 0 || p[8] != ' ' ||
	    !isdigit((unsigned char)p[9]) || !isdigit((unsigned char)p[10]) ||
	    !isdigit((unsigned char)p[11]) || (end - p > 12 && p[12] != ' '))
		return pc_err_set(err, PC_EPARSE, "malformed status line from upstream");
	for (const char *q = p + 12; q < end; q++)
		if (!is_vchar((unsigned char)*q))
			return pc_err_set(err, PC_EPARSE, "malformed status line from upstream");
	r.status = (unsigned)((p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0'));
	if (r.status < 100)
		return pc_err_set(err, PC_EPARSE, "invalid status code from upstream");
	if (head_fields(buf, &hl, r.hdr, f, &r.n_hdr, err) < 0)
		return PC_EPARSE;
	if (head_framing(f, r.n_hdr, r.minor, &r.body, &r.content_length, err) < 0)
		return PC_EPARSE;
	if (for_head || r.status < 200 || r.status == 204 || r.status == 304)
		r.body = HTTP_BODY_NONE;
	else if (r.body == HTTP_BODY_NONE && fact_find(f, r.n_hdr, HK_CL, 0) < 0)
		r.body = HTTP_BODY_CLOSE;
	r.keep_alive = r.minor == 1 && r.body != HTTP_BODY_CLOSE;
	for (i = -1; (i = fact_find(f, r.n_hdr, HK_CONNECTION, (size_t)(i + 1))) >= 0;)
		if (f[i].close)
			r.keep_alive = false;
	r.head_len = (size_t)head;
	*resp = r;
	return head;
}

/* ---- chunked framing ------------------------------------------------------ */

enum {
	CH_SIZE,    /* hex digits, then ';ext' or CR */
	CH_SIZE_LF, /* after the size line's CR */
	CH_DATA,
	CH_DATA_CR, /* CRLF after chunk data */
	CH_DATA_LF,
	CH_TRAILER, /* start of a trailer line (or the final empty line) */
	CH_TR_NAME,
	CH_TR_VALUE,
	CH_TR_LF,
	CH_END_LF, /* after the final empty line's CR */
	CH_DONE,
};

void http_chunked_init(struct http_chunked *c)
{
	memset(c, 0, sizeof(*c));
	c->state = CH_SIZE;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (unsigned char)tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int http_chunked_feed(struct http_chunked *c, const char *in, size_t len, size_t *consumed,
		      size_t *data_off, size_t *data_len, struct pc_err *err)
{
	size_t i = 0;

	*data_off = *data_len = 0;
	while (i < len && c->state != CH_DONE) {
		unsigned char ch = (unsigned char)in[i];

		if (c->state == CH_DATA) {
			size_t n = len - i;

			if (n > c->remaining)
				n = (size_t)c->remaining;
			*data_off = i;
			*data_len = n;
			c->remaining -= n;
			if (!c->remaining)
				c->state = CH_DATA_CR;
			*consumed = i + n;
			return 0;
		}
		i++;
		if (c->state != CH_DATA_CR && c->state != CH_DATA_LF &&
		    ++c->line_len > HTTP_MAX_LINE)
			return pc_err_set(err, PC_EPARSE, "chunk line too long");
		switch (c->state) {
		case CH_SIZE:
			if (ch == '\r') {
				if (!c->digits)
					return pc_err_set(err, PC_EPARSE, "chunk size missing");
				c->state = CH_SIZE_LF;
			} else if (c->ext) {
				if (!is_vchar(ch))
					return pc_err_set(err, PC_EPARSE,
							  "invalid chunk extension");
			} else if (ch == ';' && c->digits) {
				c->ext = true;
			} else {
				int h = hexval(ch);

				if (h < 0)
					return pc_err_set(err, PC_EPARSE, "invalid chunk size");
				if (c->remaining >> 56)
					return pc_err_set(err, PC_EPARSE, "chunk size too large");
				c->remaining = c->remaining * 16 + (uint64_t)h;
				c->digits = true;
			}
			break;
		case CH_SIZE_LF:
			if (ch != '\n')
				return pc_err_set(err, PC_EPARSE, "bare CR in chunk size line");
			c->line_len = 0;
			c->ext = c->digits = false;
			c->state = c->remaining ? CH_DATA : CH_TRAILER;
			break;
		case CH_DATA_CR:
			if (ch != '\r')
				return pc_err_set(err, PC_EPARSE,
						  "chunk data not followed by CRLF");
			c->state = CH_DATA_LF;
			break;
		case CH_DATA_LF:
			if (ch != '\n')
				return pc_err_set(err, PC_EPARSE,
						  "chunk data not followed by CRLF");
			c->line_len = 0;
			c->state = CH_SIZE;
			break;
		case CH_TRAILER:
			if (ch == '\r') {
				c->state = CH_END_LF;
			} else if (is_tchar(ch)) {
				c->state = CH_TR_NAME;
			} else {
				return pc_err_set(err, PC_EPARSE, "invalid trailer line");
			}
			break;
		case CH_TR_NAME:
			if (ch == ':')
				c->state = CH_TR_VALUE;
			else if (!is_tchar(ch))
				return pc_err_set(err, PC_EPARSE, "invalid trailer field name");
			break;
		case CH_TR_VALUE:
			if (ch == '\r')
				c->state = CH_TR_LF;
			else if (!is_vchar(ch))
				return pc_err_set(err, PC_EPARSE, "invalid trailer field value");
			break;
		case CH_TR_LF:
			if (ch != '\n')
				return pc_err_set(err, PC_EPARSE, "bare CR in trailer");
			c->trailer_bytes += c->line_len;
			if (c->trailer_bytes > HTTP_MAX_LINE)
				return pc_err_set(err, PC_EPARSE, "trailers too large");
			c->line_len = 0;
			c->state = CH_TRAILER;
			break;
		case CH_END_LF:
			if (ch != '\n')
				return pc_err_set(err, PC_EPARSE, "bare CR after trailers");
			c->state = CH_DONE;
			break;
		}
	}
	*consumed = i;
	return c->state == CH_DONE ? 1 : 0;
}

size_t http_response_head_max(const struct http_response *r)
{
	/* a header written "name:value" gains the space after the colon */
	return r->head_len + 2 * r->n_hdr + 64;
}

size_t http_response_head_rebuild(const char *buf, const struct http_response *r, bool keep_framing,
				  char *out, size_t cap)
{
	const char *eol = memchr(buf, '\r', r->head_len);
	size_t n;

	if (!eol || cap < http_response_head_max(r))
		return 0;
	n = (size_t)(eol - buf) + 2;
	memcpy(out, buf, n);
	for (size_t i = 0; i < r->n_hdr; i++) {
		const struct http_header *h = &r->hdr[i];

		if (!keep_framing && (span_ieq(h->name, h->name_len, "content-length") ||
				      span_ieq(h->name, h->name_len, "transfer-encoding") ||
				      span_ieq(h->name, h->name_len, "connection") ||
				      span_ieq(h->name, h->name_len, "keep-alive")))
			continue;
		memcpy(out + n, h->name, h->name_len);
		n += h->name_len;
		memcpy(out + n, ": ", 2);
		n += 2;
		memcpy(out + n, h->value, h->value_len);
		n += h->value_len;
		memcpy(out + n, "\r\n", 2);
		n += 2;
	}
	return n;
}

/* ---- Basic credentials as decoders read them ------------------------------------
 * libsodium's decoder is strict (padding, spare bits zero, nothing stray),
 * and a placeholder it cannot see would still reach a server that can: a
 * reading of each kind a lenient decoder makes. A quantum's place (phase)
 * and the bits held (acc, below 64) are all the state, so that EVA bounds
 * both without relating them to the index. */
static int b64_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

size_t http_basic_read(const char *in, size_t n, unsigned reading, uint8_t *out, size_t cap)
{
	bool stray_slot = reading % 2;
	unsigned eq = reading / 2, phase = 0, acc = 0;
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		int v = b64_val(c);
		unsigned x, byte = 0;

		if (c == ' ' || c == '\t')
			continue;
		if (c == '=' && eq == 0) {
			phase = 0;
			acc = 0;
			continue;
		}
		if (v < 0 && (c == '=' ? eq == 1 : !stray_slot))
			continue;
		x = v < 0 ? 0 : (unsigned)v;
		switch (phase) {
		case 0:
			acc = x;
			break;
		case 1:
			byte = acc << 2 | x >> 4;
			acc = x & 0xf;
			break;
		case 2:
			byte = acc << 4 | x >> 2;
			acc = x & 0x3;
			break;
		default:
			byte = acc << 6 | x;
			acc = 0;
			break;
		}
		if (phase && o < cap) /* the second: never, with cap n / 4 * 3 + 2 */
			out[o++] = (uint8_t)(byte & 0xff);
		phase = (phase + 1) & 3;
	}
	return o;
}

bool http_basic_plain(const char *in, size_t n)
{
	size_t e = n;

	while (e > 0 && (in[e - 1] == '=' || in[e - 1] == ' ' || in[e - 1] == '\t'))
		e--;
	for (size_t i = 0; i < e; i++)
		if (b64_val((unsigned char)in[i]) < 0 && in[i] != ' ' && in[i] != '\t')
			return false;
	return true;
}
