/* Strict HTTP/1.1 head parsing and chunked framing for the vault. Anything
 * two implementations could read two ways (CL+TE, duplicate lengths, folded
 * or bare-LF lines, odd names) is refused: the vault must never disagree with
 * the upstream about where a request ends. */
#include "vault/vault.h"

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

bool http_list_has(const char *v, size_t len, const char *token)
{
	size_t i = 0;

	while (i < len) {
		size_t s, e;

		while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < len && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > s && span_ieq(v + s, e - s, token))
			return true;
	}
	return false;
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

	hl->n = 0;
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

/* Parse header lines 1..n into hdr[]. */
static int head_fields(const char *buf, const struct head_lines *hl, struct http_header *hdr,
		       size_t *n_hdr, struct pc_err *err)
{
	for (size_t l = 1; l < hl->n; l++) {
		const char *p = buf + hl->start[l], *end = buf + hl->end[l];
		const char *colon = p;
		struct http_header *h = &hdr[l - 1];

		if (*p == ' ' || *p == '\t')
			return pc_err_set(err, PC_EPARSE, "obsolete line folding (obs-fold)");
		while (colon < end && *colon != ':') {
			if (!is_tchar((unsigned char)*colon))
				return pc_err_set(err, PC_EPARSE,
						  "invalid character in header name");
			colon++;
		}
		if (colon == end || colon == p)
			return pc_err_set(err, PC_EPARSE, "header line without a field name");
		h->name = p;
		h->name_len = (size_t)(colon - p);
		p = colon + 1;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		for (const char *q = p; q < end; q++)
			if (!is_vchar((unsigned char)*q))
				return pc_err_set(err, PC_EPARSE,
						  "invalid character in value of %.*s",
						  (int)h->name_len, h->name);
		h->value = p;
		h->value_len = (size_t)(end - p);
	}
	*n_hdr = hl->n - 1;
	return 0;
}

static int parse_length(const struct http_header *h, uint64_t *out, struct pc_err *err)
{
	uint64_t v = 0;

	if (h->value_len == 0 || h->value_len > 18)
		return pc_err_set(err, PC_EPARSE, "invalid Content-Length");
	for (size_t i = 0; i < h->value_len; i++) {
		if (h->value[i] < '0' || h->value[i] > '9')
			return pc_err_set(err, PC_EPARSE, "invalid Content-Length");
		v = v * 10 + (uint64_t)(h->value[i] - '0');
	}
	*out = v;
	return 0;
}

/* Framing headers common to requests and responses: exactly one
 * Content-Length, or exactly one "Transfer-Encoding: chunked", never both. */
static int head_framing(const struct http_header *hdr, size_t n, int minor, enum http_body *body,
			uint64_t *cl, struct pc_err *err)
{
	int icl = http_header_find(hdr, n, "content-length", 0);
	int ite = http_header_find(hdr, n, "transfer-encoding", 0);

	*body = HTTP_BODY_NONE;
	*cl = 0;
	if (icl >= 0 && ite >= 0)
		return pc_err_set(err, PC_EPARSE, "both Content-Length and Transfer-Encoding");
	if (icl >= 0) {
		if (http_header_find(hdr, n, "content-length", (size_t)icl + 1) >= 0)
			return pc_err_set(err, PC_EPARSE, "duplicate Content-Length");
		if (parse_length(&hdr[icl], cl, err) < 0)
			return PC_EPARSE;
		*body = HTTP_BODY_LENGTH;
	}
	if (ite >= 0) {
		if (minor == 0)
			return pc_err_set(err, PC_EPARSE,
					  "Transfer-Encoding in an HTTP/1.0 message");
		if (http_header_find(hdr, n, "transfer-encoding", (size_t)ite + 1) >= 0)
			return pc_err_set(err, PC_EPARSE, "duplicate Transfer-Encoding");
		if (!span_ieq(hdr[ite].value, hdr[ite].value_len, "chunked"))
			return pc_err_set(err, PC_EPARSE,
					  "Transfer-Encoding other than plain \"chunked\"");
		*body = HTTP_BODY_CHUNKED;
	}
	return 0;
}

static int parse_version(const char *p, size_t n, int *minor)
{
	if (n != 8 || memcmp(p, "HTTP/", 5) != 0 || !isdigit((unsigned char)p[5]) || p[6] != '.' ||
	    !isdigit((unsigned char)p[7]))
		return PC_EPARSE;
	if (p[5] != '1' || (p[7] != '0' && p[7] != '1'))
		return PC_EUNSUPP;
	*minor = p[7] - '0';
	return 0;
}

static int request_line(const char *p, const char *end, struct http_request *r, unsigned *status,
			struct pc_err *err)
{
	const char *sp1, *sp2;
	int rc;

	*status = 400;
	sp1 = memchr(p, ' ', (size_t)(end - p));
	if (!sp1 || sp1 == p || (size_t)(sp1 - p) >= sizeof(r->method))
		return pc_err_set(err, PC_EPARSE, "malformed request line");
	for (const char *q = p; q < sp1; q++)
		if (!is_tchar((unsigned char)*q))
			return pc_err_set(err, PC_EPARSE, "invalid character in method");
	memcpy(r->method, p, (size_t)(sp1 - p));
	r->method[sp1 - p] = '\0';
	sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
	if (!sp2 || sp2 == sp1 + 1)
		return pc_err_set(err, PC_EPARSE, "malformed request line");
	for (const char *q = sp1 + 1; q < sp2; q++)
		if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
			return pc_err_set(err, PC_EPARSE, "invalid character in request target");
	r->target = sp1 + 1;
	r->target_len = (size_t)(sp2 - sp1 - 1);
	rc = parse_version(sp2 + 1, (size_t)(end - sp2 - 1), &r->minor);
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
	if (r->target[0] != '/' &&
	    !(r->target_len == 1 && r->target[0] == '*' && strcmp(r->method, "OPTIONS") == 0))
		return pc_err_set(err, PC_EPARSE, "request target must be origin-form (/path)");
	return 0;
}

/* Semantics of the request's headers: Host, framing, Connection, Expect,
 * Upgrade. */
static int request_headers(struct http_request *r, unsigned *status, struct pc_err *err)
{
	int i;

	*status = 400;
	r->host = http_header_find(r->hdr, r->n_hdr, "host", 0);
	if (r->host < 0)
		return pc_err_set(err, PC_EPARSE, "missing Host header");
	if (http_header_find(r->hdr, r->n_hdr, "host", (size_t)r->host + 1) >= 0)
		return pc_err_set(err, PC_EPARSE, "duplicate Host header");
	if (head_framing(r->hdr, r->n_hdr, r->minor, &r->body, &r->content_length, err) < 0)
		return PC_EPARSE;
	if (r->body == HTTP_BODY_LENGTH && r->content_length == 0)
		r->body = HTTP_BODY_NONE;
	r->keep_alive = r->minor == 1;
	for (i = -1;
	     (i = http_header_find(r->hdr, r->n_hdr, "connection", (size_t)(i + 1))) >= 0;) {
		if (http_list_has(r->hdr[i].value, r->hdr[i].value_len, "close"))
			r->keep_alive = false;
		if (http_list_has(r->hdr[i].value, r->hdr[i].value_len, "upgrade"))
			r->upgrade = true;
	}
	i = http_header_find(r->hdr, r->n_hdr, "upgrade", 0);
	if (i >= 0) {
		if (http_header_find(r->hdr, r->n_hdr, "upgrade", (size_t)i + 1) >= 0 ||
		    !span_ieq(r->hdr[i].value, r->hdr[i].value_len, "websocket")) {
			*status = 501;
			return pc_err_set(err, PC_EPARSE, "only Upgrade: websocket is supported");
		}
	} else {
		r->upgrade = false;
	}
	if (r->upgrade && r->minor == 0)
		return pc_err_set(err, PC_EPARSE, "Upgrade in an HTTP/1.0 request");
	i = http_header_find(r->hdr, r->n_hdr, "expect", 0);
	if (i >= 0) {
		if (http_header_find(r->hdr, r->n_hdr, "expect", (size_t)i + 1) >= 0 ||
		    !span_ieq(r->hdr[i].value, r->hdr[i].value_len, "100-continue")) {
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
	if (request_line(buf + hl.start[0], buf + hl.end[0], &r, status, err) < 0)
		return PC_EPARSE;
	*status = 400;
	if (head_fields(buf, &hl, r.hdr, &r.n_hdr, err) < 0)
		return PC_EPARSE;
	if (request_headers(&r, status, err) < 0)
		return PC_EPARSE;
	r.head_len = (size_t)head;
	*req = r;
	return head;
}

int http_response_parse(const char *buf, size_t len, size_t max_head, bool for_head,
			struct http_response *resp, struct pc_err *err)
{
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
	if (end - p < 12 || parse_version(p, 8, &r.minor) < 0 || p[8] != ' ' ||
	    !isdigit((unsigned char)p[9]) || !isdigit((unsigned char)p[10]) ||
	    !isdigit((unsigned char)p[11]) || (end - p > 12 && p[12] != ' '))
		return pc_err_set(err, PC_EPARSE, "malformed status line from upstream");
	for (const char *q = p + 12; q < end; q++)
		if (!is_vchar((unsigned char)*q))
			return pc_err_set(err, PC_EPARSE, "malformed status line from upstream");
	r.status = (unsigned)((p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0'));
	if (r.status < 100)
		return pc_err_set(err, PC_EPARSE, "invalid status code from upstream");
	if (head_fields(buf, &hl, r.hdr, &r.n_hdr, err) < 0)
		return PC_EPARSE;
	if (head_framing(r.hdr, r.n_hdr, r.minor, &r.body, &r.content_length, err) < 0)
		return PC_EPARSE;
	if (for_head || r.status < 200 || r.status == 204 || r.status == 304)
		r.body = HTTP_BODY_NONE;
	else if (r.body == HTTP_BODY_NONE &&
		 http_header_find(r.hdr, r.n_hdr, "content-length", 0) < 0)
		r.body = HTTP_BODY_CLOSE;
	r.keep_alive = r.minor == 1 && r.body != HTTP_BODY_CLOSE;
	for (i = -1; (i = http_header_find(r.hdr, r.n_hdr, "connection", (size_t)(i + 1))) >= 0;)
		if (http_list_has(r.hdr[i].value, r.hdr[i].value_len, "close"))
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
