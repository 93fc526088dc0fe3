/* Unit tests for the vault's decision on a request head (inject.c): where a
 * placeholder may stand, how the bound header is rewritten, and that every
 * refusal names its reason without ever holding a value. */
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/rules_int.h"
#include "tests/unit/hostnames.h"
#include "tests/unit/unit.h"
#include "vault/vault_int.h"

#define PH_GH  "pcph_GITHUB_TOKEN_aaaaaaaaaaaaaaaaaaaaaaaaaa"
#define PH_PY  "pcph_PYPI_TOKEN_bbbbbbbbbbbbbbbbbbbbbbbbbb"
#define VAL_GH "ghp_REALVALUE0123456789"
#define VAL_PY "pypi-REALVALUE9876543210"

static const char policy_yaml[] = "sandbox: agent-1\n"
				  "match: { source: 10.203.0.11/32 }\n"
				  "allow:\n"
				  "  - host: api.github.test\n"
				  "    ports: [443]\n"
				  "  - host: pypi.test\n"
				  "    ports: [443]\n"
				  "  - host: www.github.test\n"
				  "    ports: [443]\n"
				  "secrets:\n"
				  "  - name: GITHUB_TOKEN\n"
				  "    host: api.github.test\n"
				  "  - name: PYPI_TOKEN\n"
				  "    host: pypi.test\n"
				  "    header: X-Api-Key\n"
				  "    format: \"key={secret};\"\n";

static struct vault_state *st;
static const struct policy_sandbox *sb;

static void add_secret(struct vault_store *s, const char *name, const char *ph, const char *val)
{
	struct vault_secret *x = &s->s[s->n++];

	pc_strlcpy(x->name, name, sizeof(x->name));
	pc_strlcpy(x->placeholder, ph, sizeof(x->placeholder));
	x->ph_len = strlen(ph);
	x->value_len = strlen(val);
	x->value = sodium_malloc(x->value_len);
	memcpy(x->value, val, x->value_len);
}

static void setup(void)
{
	struct policy *p;
	struct vault_store *store = calloc(1, sizeof(*store));
	struct pc_err e = {0};

	ck_assert_int_eq(
	    policy_load_buffer("t.yaml", policy_yaml, strlen(policy_yaml), NULL, &p, &e), 0);
	store->s = calloc(2, sizeof(*store->s));
	add_secret(store, "GITHUB_TOKEN", PH_GH, VAL_GH);
	add_secret(store, "PYPI_TOKEN", PH_PY, VAL_PY);
	ck_assert_int_eq(vault_state_make(p, store, &st, &e), 0);
	sb = policy_sandbox_by_name(p, "agent-1");
	ck_assert_ptr_nonnull(sb);
}

static void teardown(void)
{
	vault_state_unref(st);
}

/* Run a request through inject_request; out gets the head sent upstream. */
static void run(const char *sni, const char *reqs, struct inject_out *r, char *out)
{
	struct http_request req;
	struct pc_err e = {0};
	unsigned status;
	size_t cap = inject_out_cap(32768);
	uint8_t *buf = malloc(cap);

	ck_assert_msg(http_request_parse(reqs, strlen(reqs), 32768, &req, &status, &e) > 0, "%s",
		      e.msg);
	ck_assert_int_eq(inject_request(st, sb, sni, 443, reqs, &req, buf, cap, r), 0);
	memcpy(out, buf, r->head_len);
	out[r->head_len] = '\0';
	free(buf);
	/* a refusal never carries a value in its reason */
	ck_assert_ptr_null(strstr(r->reason, VAL_GH));
	ck_assert_ptr_null(strstr(r->reason, VAL_PY));
}

START_TEST(bearer_injected)
{
	struct inject_out r;
	char out[8192];

	run("api.github.test",
	    "GET /x HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Bearer " PH_GH
	    "\r\nAccept-Encoding: gzip\r\nConnection: keep-alive\r\n\r\n",
	    &r, out);
	ck_assert_int_eq(r.status, 0);
	ck_assert_str_eq(r.secrets, "GITHUB_TOKEN");
	ck_assert_ptr_nonnull(strstr(out, "\r\nAuthorization: Bearer " VAL_GH "\r\n"));
	ck_assert_ptr_null(strstr(out, PH_GH));
	ck_assert_ptr_null(strstr(out, "gzip"));
	ck_assert_ptr_nonnull(strstr(out, "Accept-Encoding: identity"));
	ck_assert_ptr_null(strstr(out, "Connection"));
	inject_out_clear(&r);
}
END_TEST

START_TEST(format_and_header_of_policy)
{
	struct inject_out r;
	char out[8192];

	/* the header's name in any case; its value exactly the format */
	run("pypi.test",
	    "GET / HTTP/1.1\r\nHost: pypi.test:443\r\nx-api-key: key=" PH_PY ";\r\n\r\n", &r, out);
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_nonnull(strstr(out, "\r\nX-Api-Key: key=" VAL_PY ";\r\n"));
	ck_assert_ptr_null(strstr(out, "x-api-key"));
	inject_out_clear(&r);
}
END_TEST

/* The request must be refused with status and a reason matching why. */
static void refused(const char *sni, const char *reqs, unsigned status, bool exfil, const char *why)
{
	struct inject_out r;
	char out[8192];

	run(sni, reqs, &r, out);
	ck_assert_msg(r.status == status, "status %u, want %u (%s)", r.status, status, r.reason);
	ck_assert_int_eq(r.exfil, exfil);
	ck_assert_msg(strstr(r.reason, why), "reason '%s' lacks '%s'", r.reason, why);
	/* the code is decided with the refusal, a documented one of its own */
	ck_assert_msg(r.code && logrec_code_index(r.code) >= 0 && strncmp(r.code, "vault_", 6) == 0,
		      "refusal '%s' has event.code %s", r.reason, r.code ? r.code : "(none)");
	ck_assert_int_eq(r.head_len, 0);
	inject_out_clear(&r);
}

START_TEST(refusals)
{
	refused("pypi.test",
		"GET / HTTP/1.1\r\nHost: pypi.test\r\nAuthorization: Bearer " PH_GH "\r\n\r\n", 403,
		true, "bound to api.github.test:443, not pypi.test:443");
	refused("www.github.test",
		"GET / HTTP/1.1\r\nHost: www.github.test\r\nAuthorization: Bearer " PH_GH
		"\r\n\r\n",
		403, true, "not www.github.test");
	refused("api.github.test", "GET /?a=" PH_GH " HTTP/1.1\r\nHost: api.github.test\r\n\r\n",
		403, true, "in the request URL");
	{
		struct inject_out r;
		char out[8192];

		run("api.github.test",
		    "GET /?a=" PH_GH " HTTP/1.1\r\nHost: api.github.test\r\n\r\n", &r, out);
		ck_assert_str_eq(r.code, "vault_placeholder_in_url");
		inject_out_clear(&r);
	}
	refused("api.github.test",
		"GET / HTTP/1.1\r\nHost: api.github.test\r\nX-Other: " PH_GH "\r\n\r\n", 403, true,
		"outside its header Authorization");
	refused("api.github.test",
		"GET / HTTP/1.1\r\nHost: api.github.test\r\n" PH_GH ": x\r\n\r\n", 403, true,
		"outside its header");
	refused("api.github.test", "GET / HTTP/1.1\r\nHost: pypi.test\r\n\r\n", 421, false,
		"does not match the TLS server name");
	refused("api.github.test", "GET / HTTP/1.1\r\nHost: api.github.test:8443\r\n\r\n", 421,
		false, "does not match");
	refused("paste.evil.test", "GET / HTTP/1.1\r\nHost: paste.evil.test\r\n\r\n", 403, false,
		"not on the allow list");
	refused("api.github.test", "TRACE / HTTP/1.1\r\nHost: api.github.test\r\n\r\n", 405, true,
		"TRACE");
	refused("api.github.test",
		"GET / HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: " PH_GH " " PH_PY
		"\r\n\r\n",
		403, true, "PYPI_TOKEN");
}
END_TEST

/* The bound header is injected only when it is exactly the secret's
 * format with the placeholder for {secret}, sent once: anything the
 * sandbox puts around the placeholder, a base64 wrapper, a second copy of
 * the header (its own credential beside the placeholder) is refused as
 * exfiltration, and nothing goes upstream (issue 33, finding 3). */
START_TEST(only_the_exact_format_is_injected)
{
	static const char *const gh[] = {
	    "Authorization: Bearer " PH_GH " x",      /* after */
	    "Authorization: Bearer x" PH_GH,	      /* before */
	    "Authorization: xBearer " PH_GH,	      /* before the scheme */
	    "Authorization: Bearer  " PH_GH,	      /* a second space */
	    "Authorization: token " PH_GH,	      /* another scheme */
	    "Authorization: bearer " PH_GH,	      /* the scheme in another case */
	    "Authorization: " PH_GH,		      /* no scheme */
	    "Authorization: Bearer " PH_GH " " PH_GH, /* two placeholders */
	    "Authorization: Bearer " PH_GH "," PH_GH,
	    "Authorization: Bearer mine\r\nAUTHORIZATION: Bearer " PH_GH,      /* beside its own */
	    "Authorization: Bearer " PH_GH "\r\nAuthorization: Bearer " PH_GH, /* twice */
	    "Authorization: Bearer " PH_GH "\r\nAuthorization: Bearer mine",
	};
	static const char *const py[] = {
	    "X-Api-Key: key=" PH_PY,
	    "X-Api-Key: key=" PH_PY ";;",
	    "X-Api-Key: " PH_PY,
	    "X-Api-Key: junk key=" PH_PY ";",
	};
	/* the placeholder wrapped in Basic credentials, as user or password
	 * or alone; Basic is only what a format says */
	static const char *const basic[] = {"user:" PH_GH, PH_GH ":x", PH_GH};

	for (size_t i = 0; i < sizeof(gh) / sizeof(gh[0]); i++) {
		char req[1024];
		struct inject_out r;
		char out[8192];

		snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: api.github.test\r\n%s\r\n\r\n",
			 gh[i]);
		run("api.github.test", req, &r, out);
		ck_assert_msg(r.status == 403 && r.exfil, "%zu: %u %s", i, r.status, r.reason);
		ck_assert_str_eq(r.code, "vault_placeholder_not_format");
		ck_assert_ptr_nonnull(strstr(r.reason, "exactly as \"Bearer {secret}\""));
		ck_assert_int_eq(r.head_len, 0);
		inject_out_clear(&r);
	}
	for (size_t i = 0; i < sizeof(py) / sizeof(py[0]); i++) {
		char req[1024];
		struct inject_out r;
		char out[8192];

		snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: pypi.test\r\n%s\r\n\r\n",
			 py[i]);
		run("pypi.test", req, &r, out);
		ck_assert_msg(r.status == 403, "%zu: %u %s", i, r.status, r.reason);
		ck_assert_str_eq(r.code, "vault_placeholder_not_format");
		inject_out_clear(&r);
	}
	for (size_t i = 0; i < sizeof(basic) / sizeof(basic[0]); i++) {
		char b64[256], req[1024];
		struct inject_out r;
		char out[8192];

		sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)basic[i],
				  strlen(basic[i]), sodium_base64_VARIANT_ORIGINAL);
		snprintf(
		    req, sizeof(req),
		    "GET / HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Basic %s\r\n\r\n",
		    b64);
		run("api.github.test", req, &r, out);
		ck_assert_msg(r.status == 403, "basic %zu: %u %s", i, r.status, r.reason);
		ck_assert_str_eq(r.code, "vault_placeholder_not_format");
		inject_out_clear(&r);
	}
}
END_TEST

/* A request with header "Basic b64" toward sni: refused as exfiltration,
 * with code. */
static void basic_refused(const char *sni, const char *header, const char *b64, const char *code,
			  const char *what)
{
	size_t n = strlen(b64) + 256;
	char *req = malloc(n);
	struct inject_out r;
	static char out[32768]; /* a head forwarded by mistake fits */

	ck_assert_ptr_nonnull(req);
	snprintf(req, n, "GET / HTTP/1.1\r\nHost: %s\r\n%s: Basic %s\r\n\r\n", sni, header, b64);
	run(sni, req, &r, out);
	ck_assert_msg(r.status == 403 && r.exfil, "%s: %u %s", what, r.status, r.reason);
	ck_assert_str_eq(r.code, code);
	ck_assert_int_eq(r.head_len, 0);
	inject_out_clear(&r);
	free(req);
}

/* Basic credentials are what a server decodes them into (spec V4): the
 * placeholder inside them without the padding, in another case, in the
 * URL-safe alphabet, beside what a lenient decoder skips or counts, or past
 * the scratch the vault decodes into, is refused as it is padded and as
 * written. */
START_TEST(basic_unpadded_or_altered_refused)
{
	static const struct {
		const char *creds, *header, *sni, *code;
		int variant;
	} c[] = {
	    {"user:" PH_GH, "Authorization", "api.github.test", "vault_placeholder_not_format",
	     sodium_base64_VARIANT_ORIGINAL_NO_PADDING},
	    {PH_GH ":x", "Authorization", "api.github.test", "vault_placeholder_not_format",
	     sodium_base64_VARIANT_ORIGINAL_NO_PADDING},
	    {PH_GH, "Authorization", "api.github.test", "vault_placeholder_not_format",
	     sodium_base64_VARIANT_ORIGINAL_NO_PADDING},
	    {"user:PCPH_GITHUB_TOKEN_AAAAAAAAAAAAAAAAAAAAAAAAAA", "Authorization",
	     "api.github.test", "vault_placeholder_wrong_header", sodium_base64_VARIANT_ORIGINAL},
	    {"user:Pcph_GITHUB_TOKEN_aaaaaaaaaaaaaaaaaaaaaaaaaa", "Authorization",
	     "api.github.test", "vault_placeholder_wrong_header",
	     sodium_base64_VARIANT_ORIGINAL_NO_PADDING},
	    {"pcph_github_token_aaaaaaaaaaaaaaaaaaaaaaaaaa:", "X-Forward-Auth", "www.github.test",
	     "vault_placeholder_wrong_header", sodium_base64_VARIANT_ORIGINAL},
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		char b64[256];

		sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)c[i].creds,
				  strlen(c[i].creds), c[i].variant);
		basic_refused(c[i].sni, c[i].header, b64, c[i].code, c[i].creds);
	}
	/* as lenient decoders read them: the URL-safe alphabet, blanks
	 * inside, a stray byte skipped, a byte from 0x80 taking a place (as
	 * libsodium 1.0.18 reads it), a '=' ending a run the rest starts
	 * afresh */
	for (int how = 0; how < 5; how++) {
		static const char creds[] = "\xff\xfe"
					    "0123456789abcdef:" PH_GH;
		static const char *const what[] = {"URL-safe", "blanks", "a stray byte",
						   "a byte from 0x80", "a padded run before"};
		char b64[256], odd[512];
		size_t o = 0;

		sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)creds, sizeof(creds) - 1,
				  sodium_base64_VARIANT_ORIGINAL);
		if (how == 4)
			o = (size_t)snprintf(odd, sizeof(odd), "YWI=");
		for (size_t i = 0; b64[i]; i++) {
			char ch = b64[i];

			if (how == 0)
				ch = ch == '+' ? '-' : ch == '/' ? '_' : ch;
			if (how == 1 && i % 10 == 9)
				odd[o++] = ' ';
			if (how == 2 && i == 4)
				odd[o++] = '!';
			if (how == 3 && i == 4)
				ch = (char)0xd7;
			odd[o++] = ch;
		}
		odd[o] = '\0';
		ck_assert(how != 0 || strpbrk(odd, "-_"));
		basic_refused("api.github.test", "Authorization", odd,
			      "vault_placeholder_not_format", what[how]);
	}
	/* at any length: credentials longer than the scratch, the placeholder
	 * at their end, with and without the padding (6001 bytes: one '=') */
	for (int pad = 0; pad < 2; pad++) {
		size_t cl = 6001,
		       bl = sodium_base64_ENCODED_LEN(cl, sodium_base64_VARIANT_ORIGINAL);
		char *creds = malloc(cl + 1), *b64 = malloc(bl);

		ck_assert(creds && b64);
		memset(creds, 'a', cl);
		memcpy(creds + cl - strlen(PH_GH), PH_GH, strlen(PH_GH));
		creds[1] = ':';
		sodium_bin2base64(b64, bl, (const unsigned char *)creds, cl,
				  pad ? sodium_base64_VARIANT_ORIGINAL
				      : sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
		basic_refused("api.github.test", "Authorization", b64,
			      "vault_placeholder_not_format", pad ? "long, padded" : "long");
		free(creds);
		free(b64);
	}
}
END_TEST

START_TEST(client_credentials_without_placeholder)
{
	struct inject_out r;
	char out[8192];

	/* without a placeholder the client's own header passes untouched */
	run("api.github.test",
	    "GET / HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Bearer mine\r\n\r\n", &r,
	    out);
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_nonnull(strstr(out, "Authorization: Bearer mine"));
	ck_assert_str_eq(r.secrets, "");
	inject_out_clear(&r);
}
END_TEST

/* Range and If-Range are not forwarded with an injected credential (a
 * reflection in pieces would match no pattern); without one they pass. */
START_TEST(range_dropped_with_a_credential)
{
	struct inject_out r;
	char out[8192];

	run("api.github.test",
	    "GET / HTTP/1.1\r\nHost: api.github.test\r\nRange: bytes=0-9\r\nIf-Range: \"x\"\r\n"
	    "Authorization: Bearer " PH_GH "\r\n\r\n",
	    &r, out);
	ck_assert_int_eq(r.status, 0);
	ck_assert_ptr_null(strstr(out, "Range"));
	ck_assert_ptr_null(strstr(out, "bytes=0-9"));
	inject_out_clear(&r);
	run("api.github.test",
	    "GET / HTTP/1.1\r\nHost: api.github.test\r\nRange: bytes=0-9\r\n\r\n", &r, out);
	ck_assert_ptr_nonnull(strstr(out, "Range: bytes=0-9"));
	inject_out_clear(&r);
}
END_TEST

/* Does text hold 4 consecutive bytes of VAL_GH, as it is or in any base64
 * run in it (JSON's \/ undone, decoded at every offset)? */
static bool leaks_value(const char *text)
{
	const char *val = VAL_GH;
	char plain[4096];
	size_t n = 0;

	if (strstr(text, "ghp_"))
		return true;
	for (const char *p = text; *p && n < sizeof(plain) - 1; p++) {
		if (p[0] == '\\' && p[1] == '/')
			p++;
		plain[n++] = *p;
	}
	plain[n] = '\0';
	for (size_t off = 0; off < n; off++)
		for (size_t shift = 0; shift < 4; shift++) {
			unsigned char dec[4096];
			size_t
			    dl = 0,
			    run = strspn(
				plain + off,
				"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");

			if (run <= shift + 4)
				continue;
			run = (run - shift) / 4 * 4;
			if (sodium_base642bin(dec, sizeof(dec), plain + off + shift, run, NULL, &dl,
					      NULL, sodium_base64_VARIANT_ORIGINAL_NO_PADDING) != 0)
				continue;
			for (size_t i = 0; i + 4 <= strlen(val); i++)
				if (dl >= 4 && memmem(dec, dl, &val[i], 4))
					return true;
		}
	return false;
}

/* An upstream that puts the value into Basic credentials of its own
 * making, with every user part length (every alignment of the value in
 * the encoding), reflected plain and as JSON escapes '/': the bound
 * secret's value-only cores the connection keeps leave no 4 bytes of the
 * value in the reflection. */
START_TEST(basic_reflection_scrubbed_whatever_the_user_part)
{
	static const char *const users[] = {"", "u", "uu", "uuu", "\xff\xff", "?>?", "a?b", "??~~"};
	struct scrub_keep keep = {0};

	ck_assert_int_eq(inject_keep_bound(st, sb, "api.github.test", 443, &keep), 0);
	for (size_t u = 0; u < sizeof(users) / sizeof(users[0]); u++)
		for (int json = 0; json < 2; json++) {
			char cred[128], val64[256], refl[1024];
			uint8_t *res;
			size_t rl, k = 0;
			struct pc_err e = {0};

			snprintf(cred, sizeof(cred), "%s:%s", users[u], VAL_GH);
			sodium_bin2base64(val64, sizeof(val64), (unsigned char *)cred, strlen(cred),
					  sodium_base64_VARIANT_ORIGINAL);
			k = snprintf(refl, sizeof(refl), "{\"auth\":\"Basic ");
			for (const char *p = val64; *p; p++) {
				if (json && *p == '/')
					refl[k++] = '\\';
				refl[k++] = *p;
			}
			snprintf(refl + k, sizeof(refl) - k, "\"}");
			ck_assert_int_eq(scrub_buffer(keep.pats, keep.n, (uint8_t *)refl,
						      strlen(refl), &res, &rl, &e),
					 0);
			res = realloc(res, rl + 1);
			res[rl] = '\0';
			ck_assert_msg(!leaks_value((char *)res), "user '%s' json %d: %s", users[u],
				      json, (char *)res);
			ck_assert_msg(leaks_value(refl), "the check itself finds %s", refl);
			free(res);
		}
	scrub_keep_free(&keep);
}
END_TEST

/* The shared table in a Host header, against the server name the table
 * says it is (port 443): anything else is a mismatch (421). */
START_TEST(host_header_hostname_table)
{
	for (size_t i = 0; i < N_HOSTNAME_CASES; i++) {
		const struct hostname_case *c = &hostname_cases[i];
		char reqs[600], sni[300] = "example.com", *colon;
		bool match = false;
		struct http_request req;
		struct inject_out r;
		struct pc_err e = {0};
		unsigned status;
		size_t cap = inject_out_cap(32768);
		uint8_t *buf;

		if (c->http) {
			pc_strlcpy(sni, c->http, sizeof(sni));
			colon = strchr(sni, ':');
			match = !colon || strcmp(colon, ":443") == 0;
			if (colon)
				*colon = '\0';
		}
		snprintf(reqs, sizeof(reqs), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", c->in);
		if (http_request_parse(reqs, strlen(reqs), 32768, &req, &status, &e) <= 0) {
			/* the head itself is refused first: never a match */
			ck_assert_msg(!c->http, "'%s': %s", c->in, e.msg);
			continue;
		}
		buf = malloc(cap);
		ck_assert_int_eq(inject_request(st, sb, sni, 443, reqs, &req, buf, cap, &r), 0);
		ck_assert_msg((r.status == 421) == !match, "'%s': %u %s", c->in, r.status,
			      r.reason);
		if (r.status == 0) {
			/* upstream reads only the name the check approved, one way */
			char want[320];

			snprintf(want, sizeof(want), "\r\nHost: %s\r\n", sni);
			ck_assert_msg(memmem(buf, r.head_len, want, strlen(want)), "'%s': %.*s",
				      c->in, (int)r.head_len, (char *)buf);
		}
		inject_out_clear(&r);
		free(buf);
	}
}
END_TEST

/* A request with a credential uses a standard method as spelled, and no
 * method override; TRACE, TRACK and CONNECT are refused in any case. The
 * Host goes upstream canonical: lower case, no trailing dot, the port
 * without leading zeros, left out when it is 443. */
START_TEST(methods_and_host_spellings)
{
	static const struct {
		const char *req;
		unsigned status;
		const char *code;
	} cases[] = {
	    {"trace / HTTP/1.1\r\nHost: api.github.test\r\n\r\n", 405, "vault_method_reflects"},
	    {"Track / HTTP/1.1\r\nHost: api.github.test\r\n\r\n", 405, "vault_method_reflects"},
	    {"connect / HTTP/1.1\r\nHost: api.github.test\r\n\r\n", 405,
	     "vault_method_not_allowed"},
	    {"get / HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Bearer " PH_GH "\r\n\r\n",
	     405, "vault_method_not_allowed"},
	    {"PROPFIND / HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Bearer " PH_GH
	     "\r\n\r\n",
	     405, "vault_method_not_allowed"},
	    {"GET / HTTP/1.1\r\nHost: api.github.test\r\nAuthorization: Bearer " PH_GH
	     "\r\nx-http-method-override: TRACE\r\n\r\n",
	     405, "vault_method_override"},
	    {"POST / HTTP/1.1\r\nHost: api.github.test\r\nX-HTTP-Method: PUT\r\nAuthorization: "
	     "Bearer " PH_GH "\r\n\r\n",
	     405, "vault_method_override"},
	    {"GET / HTTP/1.1\r\nHost: api.github.test\r\nX-Method-Override: GET\r\nAuthorization: "
	     "Bearer " PH_GH "\r\n\r\n",
	     405, "vault_method_override"},
	    /* without a credential: the client's business */
	    {"PROPFIND / HTTP/1.1\r\nHost: api.github.test\r\n\r\n", 0, NULL},
	    {"GET / HTTP/1.1\r\nHost: api.github.test\r\nX-HTTP-Method-Override: PUT\r\n\r\n", 0,
	     NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct inject_out r;
		char out[8192];

		run("api.github.test", cases[i].req, &r, out);
		ck_assert_msg(r.status == cases[i].status, "%zu: %u %s", i, r.status, r.reason);
		if (cases[i].code)
			ck_assert_str_eq(r.code, cases[i].code);
		inject_out_clear(&r);
	}
	{
		struct inject_out r;
		char out[8192];

		run("api.github.test",
		    "GET / HTTP/1.1\r\nHost: API.github.test.:0443\r\nAuthorization: Bearer " PH_GH
		    "\r\n\r\n",
		    &r, out);
		ck_assert_int_eq(r.status, 0);
		ck_assert_ptr_nonnull(strstr(out, "\r\nHost: api.github.test\r\n"));
		ck_assert_ptr_null(strstr(out, "API"));
		inject_out_clear(&r);
	}
}
END_TEST

static Suite *inject_suite(void)
{
	Suite *s = suite_create("vault_inject");
	TCase *t = tcase_create("inject");

	if (sodium_init() < 0)
		abort();
	tcase_add_checked_fixture(t, setup, teardown);
	PC_UNIT_TESTS(
	    t, bearer_injected, format_and_header_of_policy, only_the_exact_format_is_injected,
	    refusals, client_credentials_without_placeholder, host_header_hostname_table,
	    range_dropped_with_a_credential, basic_reflection_scrubbed_whatever_the_user_part,
	    methods_and_host_spellings, basic_unpadded_or_altered_refused);
	suite_add_tcase(s, t);
	return s;
}

PC_UNIT_MAIN(inject_suite)
