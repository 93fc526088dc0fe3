/* The decision on one request head and the head sent upstream: TLS name,
 * Host and policy must agree; a placeholder may appear only in its secret's
 * header toward its bound host:port, and that header must be exactly the
 * secret's format with the placeholder in it; there it is replaced by the
 * real value; anywhere else, or in any other shape, the request is refused
 * as an exfiltration attempt. */
#include "vault/vault_int.h"

#include <netinet/in.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* headers the vault sets itself or that only concern one hop */
static const char *const hop_headers[] = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "upgrade",
    "accept-encoding",
    "content-length",
    "transfer-encoding",
    "http2-settings",
    "sec-websocket-extensions",
    "proxy-authorization",
    "expect", /* the vault answers 100-continue itself (relay.c) */
    NULL,
};

#define BASIC_MAX 3072 /* decoded Basic credentials the scratch holds */

/* The methods a request that carries a credential may use, exactly as
 * spelled (method names are case-sensitive, but a server may not treat
 * them so: "trace" is TRACE to some). TRACE, TRACK and CONNECT are not
 * among them, nor anything a server could take for them. */
static const char *const credential_methods[] = {
    "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", NULL,
};

/* Headers that make some servers and frameworks run another method than
 * the request line's: on a request with a credential they could turn an
 * allowed method into TRACE. */
static const char *const method_override_headers[] = {
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    NULL,
};

/* code: the refusal's event.code (docs/logd.md "Event codes"). */
__attribute__((format(printf, 5, 6))) static int
refuse(struct inject_out *r, unsigned status, bool exfil, const char *code, const char *fmt, ...)
{
	va_list ap;

	r->status = status;
	r->exfil = exfil;
	r->code = code;
	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
	return 0;
}

#define SCRATCH_LEN BASIC_MAX

size_t inject_out_cap(size_t max_head)
{
	/* the head, our own headers, per injected header the value in its
	 * format, and scratch */
	return max_head + 1024 + 4 * (VAULT_VALUE_MAX * 2 + 512) + SCRATCH_LEN;
}

void inject_out_clear(struct inject_out *res)
{
	scrub_keep_free(&res->derived);
	memset(res, 0, sizeof(*res));
}

int inject_keep_bound(const struct vault_state *st, const struct policy_sandbox *sb,
		      const char *sni, uint16_t port, struct scrub_keep *k)
{
	for (size_t i = 0; i < sb->n_secrets; i++) {
		const struct policy_secret *ps = &sb->secrets[i];
		const struct vault_secret *s = NULL;
		int rc;

		if (strcasecmp(ps->host, sni) != 0 || ps->port != port)
			continue;
		for (size_t j = 0; j < st->store->n && !s; j++)
			if (!strcmp(st->store->s[j].name, ps->name))
				s = &st->store->s[j];
		if (!s)
			continue;
		/* a copy: the value and its encodings stay scrubbed after a
		 * reload rotated it */
		if ((rc = scrub_keep_add_value(k, s->value, s->value_len,
					       (const uint8_t *)s->placeholder, s->ph_len)) < 0)
			return rc;
	}
	return 0;
}

static bool hdr_is(const struct http_header *h, const char *name)
{
	return strlen(name) == h->name_len && strncasecmp(h->name, name, h->name_len) == 0;
}

/* Host header == TLS server name (and port, if given, == original port).
 * The header is read by the grammar every other name is (common/
 * hostname.c): a trailing dot is the same name, case does not count.
 * *given_port: whether the header named a port. */
static bool host_matches(const struct http_header *h, const char *sni, uint16_t port,
			 bool *given_port)
{
	struct pc_host host;

	if (pc_host_parse((const uint8_t *)h->value, 0, h->value_len, PC_HOST_HTTP, &host, NULL) <
	    0)
		return false;
	if (host.port && host.port != port)
		return false;
	*given_port = host.port != 0;
	return strcmp(host.name, sni) == 0;
}

/* The Host sent upstream: the name the check approved, written the one
 * way (the server name: lower case, no trailing dot), and the port only
 * if the client gave one other than HTTPS's 443 (no leading zeros): the
 * upstream must not read a Host the vault did not judge. */
static void host_emit(struct pc_buf *w, const char *sni, uint16_t port, bool given_port)
{
	pc_buf_puts(w, "Host: ");
	pc_buf_puts(w, sni);
	if (given_port && port != 443)
		pc_buf_printf(w, ":%u", (unsigned)port);
	pc_buf_puts(w, "\r\n");
}

static bool name_in(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return true;
	return false;
}

/* Basic credentials as a server decodes them (a placeholder may be
 * anywhere in them). Only to find one: nothing the sandbox encodes is
 * injected. */
struct basic {
	uint8_t *p; /* the decoded bytes: the scratch, or a buffer of their own;
		     * NULL: the header is not Basic */
	size_t cap;
	size_t len;
	bool own;
};

/* Decode h, "Basic" and blanks then the credentials, into the scratch
 * (BASIC_MAX) when they fit, else into a buffer of their own: as every
 * reading of http_basic_read (vault/http.c) reads them, one after the
 * other with a NUL between (no placeholder holds one), or once when they
 * all read alike. 0, or PC_ENOMEM (b holds nothing to wipe). */
static int basic_decode(const struct http_header *h, uint8_t *scratch, struct basic *b)
{
	size_t v = 5, n, each, readings;
	const char *c;

	*b = (struct basic){.p = NULL};
	if (h->value_len < 6 || strncasecmp(h->value, "basic", 5) != 0 ||
	    (h->value[5] != ' ' && h->value[5] != '\t'))
		return 0;
	while (v < h->value_len && (h->value[v] == ' ' || h->value[v] == '\t'))
		v++;
	c = h->value + v;
	n = h->value_len - v;
	readings = http_basic_plain(c, n) ? 1 : HTTP_BASIC_READINGS;
	each = n / 4 * 3 + 3;
	b->cap = readings * each;
	if (b->cap <= BASIC_MAX) {
		b->p = scratch;
		b->cap = BASIC_MAX;
	} else if ((b->p = malloc(b->cap))) {
		b->own = true;
	} else {
		return PC_ENOMEM;
	}
	for (size_t r = 0; r < readings; r++) {
		if (r)
			b->p[b->len++] = '\0';
		b->len += http_basic_read(c, n, (unsigned)r, b->p + b->len, each - 1);
	}
	return 0;
}

/* The sandbox's own credentials may be in there: wiped after each header. */
static void basic_wipe(struct basic *b)
{
	if (b->p)
		sodium_memzero(b->p, b->cap);
	if (b->own)
		free(b->p);
	b->p = NULL;
	b->own = false;
}

/* Per header: which secret (index into the store) it carries, if any. */
struct mark {
	int secret; /* -1 none */
};

/* Is the header value exactly format with its {secret} (there is one:
 * rules/ checks) spelled as the placeholder? Anything else around the
 * placeholder would be bytes the sandbox chose next to the value. */
static bool format_is(const char *format, const struct http_header *h, const char *ph,
		      size_t ph_len)
{
	const char *t = strstr(format, "{secret}");
	size_t pre, suf;

	if (!t)
		return false;
	pre = (size_t)(t - format);
	suf = strlen(t + 8);
	return h->value_len == pre + ph_len + suf && memcmp(h->value, format, pre) == 0 &&
	       memcmp(h->value + pre, ph, ph_len) == 0 &&
	       memcmp(h->value + pre + ph_len, t + 8, suf) == 0;
}

/* Judge placeholders of secret s found in header h (or the URL when h is
 * NULL). Returns 1 when the header is to be injected, 0 after a refusal. */
static int judge(const struct vault_secret *s, const struct policy_sandbox *sb, const char *sni,
		 uint16_t port, const struct http_header *h, bool in_name, struct inject_out *r)
{
	const struct policy_secret *ps = policy_secret_by_name(sb, s->name);
	int rc = 1;

	if (!h)
		rc = refuse(r, 403, true, "vault_placeholder_in_url",
			    "placeholder of %s in the request URL", s->name);
	else if (!ps)
		rc = refuse(r, 403, true, "vault_secret_not_bound",
			    "placeholder of %s, a secret not bound for sandbox %s", s->name,
			    sb->name);
	else if (strcasecmp(ps->host, sni) != 0 || ps->port != port)
		rc = refuse(r, 403, true, "vault_secret_wrong_host",
			    "placeholder of %s is bound to %s:%u, not %s:%u", s->name, ps->host,
			    ps->port, sni, port);
	else if (in_name || !hdr_is(h, ps->header))
		rc = refuse(r, 403, true, "vault_placeholder_wrong_header",
			    "placeholder of %s outside its header %s", s->name, ps->header);
	/* the refused secret's name (never its value) goes with the record:
	 * `log audit` checks V4's binding against the policy */
	if (rc == 0)
		pc_strlcpy(r->refused, s->name, sizeof(r->refused));
	return rc;
}

/* Write "Header: value\r\n" for secret s: its format with the value. */
static int emit_injected(struct pc_buf *w, const struct vault_secret *s,
			 const struct policy_secret *ps, struct inject_out *r)
{
	const char *f = ps->format, *t;

	pc_buf_put(w, ps->header, strlen(ps->header));
	pc_buf_puts(w, ": ");
	while ((t = strstr(f, "{secret}"))) {
		pc_buf_put(w, f, (size_t)(t - f));
		pc_buf_put(w, s->value, s->value_len);
		f = t + 8;
	}
	pc_buf_puts(w, f);
	pc_buf_puts(w, "\r\n");
	/* the value itself, for a reflection of the formatted header
	 * (borrowed: the caller holds the state) */
	if (scrub_keep_add(&r->derived, s->value, s->value_len, (const uint8_t *)s->placeholder,
			   s->ph_len, true) < 0)
		return -2;
	return 0;
}

int inject_request(const struct vault_state *st, const struct policy_sandbox *sb, const char *sni,
		   uint16_t port, const char *buf, const struct http_request *req, uint8_t *out,
		   size_t cap, struct inject_out *r)
{
	const struct vault_store *store = st->store;
	struct mark marks[HTTP_MAX_HEADERS];
	struct pc_buf w = {0};
	size_t scratch_len = SCRATCH_LEN;
	/* the tail of the (locked) out buffer is the scratch space for
	 * decoded Basic credentials (wiped after each header): no allocation
	 * per request */
	uint8_t *scratch = cap > scratch_len ? out + cap - scratch_len : NULL;
	bool injecting = false, given_port = false, may_target;
	const struct ph_prefix *pp = &st->ph_pre;
	int rc = 0;

	(void)buf;
	memset(r, 0, sizeof(*r));
	/* in any case: a server may read "trace" as TRACE */
	if (!strcasecmp(req->method, "TRACE") || !strcasecmp(req->method, "TRACK"))
		return refuse(r, 405, true, "vault_method_reflects",
			      "%s is refused: it reflects credentials", req->method);
	if (!strcasecmp(req->method, "CONNECT"))
		return refuse(r, 405, false, "vault_method_not_allowed",
			      "CONNECT is refused in any spelling");
	if (!host_matches(&req->hdr[req->host], sni, port, &given_port))
		return refuse(r, 421, false, "vault_host_mismatch",
			      "Host header does not match the TLS server name %s:%u", sni, port);
	if (!policy_host_allows(sb, sni, IPPROTO_TCP, port, NULL))
		return refuse(r, 403, false, "vault_not_allowed",
			      "%s:%u is not on the allow list of sandbox %s", sni, port, sb->name);
	if (!scratch)
		return PC_EINVAL;
	/* the head is written into out before the scratch, never past it;
	 * it holds credentials (refusals wipe it below) */
	pc_buf_init_fixed(&w, out, cap - scratch_len, PC_BUF_SECRET);

	for (size_t i = 0; i < req->n_hdr; i++)
		marks[i] = (struct mark){.secret = -1};
	may_target = ph_may_hold(store, pp->exact, req->target, req->target_len);
	for (size_t k = 0; k < store->n && may_target; k++)
		if (memmem(req->target, req->target_len, store->s[k].placeholder,
			   store->s[k].ph_len)) {
			judge(&store->s[k], sb, sni, port, NULL, false, r);
			goto out;
		}
	/* percent-encoded or case-changed: the upstream may decode the
	 * target before it reads it (phscan.c) */
	if ((rc = ph_find_altered(store, pp, (const uint8_t *)req->target, req->target_len)) !=
	    -1) {
		if (rc >= 0) {
			judge(&store->s[rc], sb, sni, port, NULL, false, r);
			rc = 0;
		} else {
			rc = PC_ENOMEM;
		}
		goto out;
	}
	rc = 0;
	for (size_t i = 0; i < req->n_hdr; i++) {
		const struct http_header *h = &req->hdr[i];
		/* Basic credentials are decoded once per header, into the
		 * scratch when they fit */
		struct basic bd;
		bool stop = false;
		int alt;

		if (basic_decode(h, scratch, &bd) < 0) {
			rc = PC_ENOMEM;
			goto out;
		}
		alt = ph_find_altered(store, pp, (const uint8_t *)h->name, h->name_len);
		if (alt == -1)
			alt = ph_find_altered(store, pp, (const uint8_t *)h->value, h->value_len);
		/* and what the server decodes Basic credentials into: an
		 * altered placeholder there is one too (spec V4) */
		if (alt == -1 && bd.len > 0)
			alt = ph_find_altered(store, pp, bd.p, bd.len);
		if (alt != -1) {
			/* nothing injects an altered placeholder: wherever it is,
			 * it is one the sandbox sends toward an application that
			 * may decode it */
			if (alt >= 0)
				refuse(r, 403, true, "vault_placeholder_wrong_header",
				       "placeholder of %s percent-encoded or in another case in a "
				       "%.*s header",
				       store->s[alt].name, (int)h->name_len, h->name);
			else
				rc = PC_ENOMEM;
			basic_wipe(&bd);
			goto out;
		}
		/* a placeholder is only where their common prefix is: most
		 * headers hold none, and are then read once, not once per
		 * secret */
		bool may_name = ph_may_hold(store, pp->exact, h->name, h->name_len);
		bool may_value = ph_may_hold(store, pp->exact, h->value, h->value_len);
		bool may_basic = bd.len > 0 && ph_may_hold(store, pp->exact, bd.p, bd.len);

		for (size_t k = 0; k < store->n && !stop && (may_name || may_value || may_basic);
		     k++) {
			const struct vault_secret *s = &store->s[k];
			bool in_name =
			    may_name && memmem(h->name, h->name_len, s->placeholder, s->ph_len);
			bool in_value =
			    may_value && memmem(h->value, h->value_len, s->placeholder, s->ph_len);
			bool in_basic =
			    may_basic && memmem(bd.p, bd.len, s->placeholder, s->ph_len);

			if (!in_name && !in_value && !in_basic)
				continue;
			if (!judge(s, sb, sni, port, h, in_name, r)) {
				stop = true;
			} else if (marks[i].secret >= 0 && marks[i].secret != (int)k) {
				refuse(r, 403, true, "vault_two_secrets",
				       "placeholders of two secrets in one %.*s header",
				       (int)h->name_len, h->name);
				stop = true;
			} else {
				marks[i] = (struct mark){.secret = (int)k};
			}
		}
		basic_wipe(&bd);
		if (stop)
			goto out;
	}

	/* the header must be the format exactly, and sent once: a scheme,
	 * bytes or a base64 wrapper around the placeholder, a second
	 * placeholder, or another copy of the header beside it would each
	 * put bytes the sandbox chose next to the value (issue 33, finding 3) */
	for (size_t i = 0; i < req->n_hdr; i++) {
		const struct http_header *h = &req->hdr[i];
		const struct vault_secret *s;
		const struct policy_secret *ps;
		size_t copies = 0;

		if (marks[i].secret < 0)
			continue;
		s = &store->s[marks[i].secret];
		ps = policy_secret_by_name(sb, s->name);
		for (size_t j = 0; j < req->n_hdr; j++)
			copies += req->hdr[j].name_len == h->name_len &&
				  strncasecmp(req->hdr[j].name, h->name, h->name_len) == 0;
		if (!format_is(ps->format, h, s->placeholder, s->ph_len) || copies != 1) {
			refuse(r, 403, true, "vault_placeholder_not_format",
			       "placeholder of %s: its %s header must be sent once, exactly as "
			       "\"%s\" with the placeholder for {secret}",
			       s->name, ps->header, ps->format);
			goto out;
		}
		injecting = true;
	}
	if (injecting && !name_in(credential_methods, req->method)) {
		refuse(r, 405, true, "vault_method_not_allowed",
		       "a request with a credential must use GET, HEAD, POST, PUT, DELETE, "
		       "OPTIONS or PATCH as spelled");
		goto out;
	}
	for (size_t i = 0; injecting && i < req->n_hdr; i++)
		for (const char *const *mo = method_override_headers; *mo; mo++)
			if (hdr_is(&req->hdr[i], *mo)) {
				refuse(r, 405, true, "vault_method_override",
				       "a method override header (%s) on a request with a "
				       "credential",
				       *mo);
				goto out;
			}
	/* request line and the headers that pass unchanged */
	pc_buf_puts(&w, req->method);
	pc_buf_puts(&w, " ");
	pc_buf_put(&w, req->target, req->target_len);
	pc_buf_puts(&w, " HTTP/1.1\r\n");
	for (size_t i = 0; i < req->n_hdr; i++) {
		const struct http_header *h = &req->hdr[i];
		bool skip = false;

		for (const char *const *hh = hop_headers; *hh && !skip; hh++)
			skip = hdr_is(h, *hh);
		/* a response in pieces would carry a reflected value in pieces,
		 * none of which the scrubber could recognise */
		if (injecting && (hdr_is(h, "range") || hdr_is(h, "if-range")))
			skip = true;
		/* a header some injected secret uses is never forwarded as sent */
		for (size_t j = 0; j < req->n_hdr && !skip; j++)
			skip = marks[j].secret >= 0 && req->hdr[j].name_len == h->name_len &&
			       strncasecmp(req->hdr[j].name, h->name, h->name_len) == 0;
		if (skip)
			continue;
		if ((int)i == req->host) {
			host_emit(&w, sni, port, given_port);
			continue;
		}
		pc_buf_put(&w, h->name, h->name_len);
		pc_buf_puts(&w, ": ");
		pc_buf_put(&w, h->value, h->value_len);
		pc_buf_puts(&w, "\r\n");
	}
	if (req->body == HTTP_BODY_LENGTH)
		pc_buf_printf(&w, "Content-Length: %llu\r\n",
			      (unsigned long long)req->content_length);
	else if (req->body == HTTP_BODY_CHUNKED)
		pc_buf_puts(&w, "Transfer-Encoding: chunked\r\n");
	if (req->upgrade)
		pc_buf_puts(&w, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
	/* scrubbing needs the plain body */
	pc_buf_puts(&w, "Accept-Encoding: identity\r\n");
	for (size_t i = 0; i < req->n_hdr; i++) {
		const struct vault_secret *s;

		/* each secret's header is sent once (checked above) */
		if (marks[i].secret < 0)
			continue;
		s = &store->s[marks[i].secret];
		if (emit_injected(&w, s, policy_secret_by_name(sb, s->name), r) < 0) {
			refuse(r, 431, false, "vault_inject_too_large",
			       "too many credential encodings to scrub on one request");
			goto out;
		}
		if (r->secrets[0])
			pc_strlcpy(r->secrets + strlen(r->secrets), ",",
				   sizeof(r->secrets) - strlen(r->secrets));
		pc_strlcpy(r->secrets + strlen(r->secrets), s->name,
			   sizeof(r->secrets) - strlen(r->secrets));
	}
	pc_buf_puts(&w, "\r\n");
	if (w.err) {
		refuse(r, 431, false, "vault_head_too_large",
		       "request head too large after injection");
		goto out;
	}
	r->head_len = w.len;
out:
	if (r->status) {
		/* a refused request's partial head may hold a value */
		sodium_memzero(out, w.len);
		scrub_keep_free(&r->derived);
		r->head_len = 0;
		r->secrets[0] = '\0';
	}
	return rc;
}
