/* libFuzzer target: the vault's decision on a request head and the head it
 * sends upstream (vault/inject.c, spec V2-V4), judged by an oracle that
 * reads the raw bytes the sandbox sent, not the parsed head the code reads:
 * - a value goes upstream only for a secret bound to the request's TLS name
 *   and port, and only in the bound header, written as its format, where
 *   the sandbox sent exactly that format with the placeholder in it (V3);
 * - a forwarded head held no other placeholder: none exact, none
 *   percent-decoded once or in another case, none inside "Basic <base64>"
 *   as a strict decoder of either alphabet reads it (padded or not, at
 *   any length, blanks inside), anywhere in the sandbox's bytes, request
 *   line included (V4);
 * - a refused request leaves no value in the out buffer and no head;
 * - no reason holds a value the sandbox did not send itself.
 * Input: [selector][request head]. selector bits 0-1: the TLS server name
 * (the GitHub API, PyPI, a host with no secret); bit 2: the original port
 * (443 or 8443). The policy and store are a small fixed pair. */
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rules/rules_int.h"
#include "vault/vault_int.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char policy_yaml[] = "sandbox: agent-1\n"
				  "match: { source: 10.203.0.11/32 }\n"
				  "allow:\n"
				  "  - host: api.github.test\n"
				  "    ports: [443, 8443]\n"
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

/* the sandbox's own two, and one it lacks (a worker knows it by placeholder;
 * a value here too, so that the oracle would see one leak) */
static const struct {
	const char *name, *ph, *value, *header, *format, *host;
	uint16_t port;
} secrets[] = {
    {"GITHUB_TOKEN", "pcph_GITHUB_TOKEN_aaaaaaaaaaaaaaaaaaaaaaaaaa", "ghp_REALVALUE0123456789",
     "authorization", "Bearer {secret}", "api.github.test", 443},
    {"PYPI_TOKEN", "pcph_PYPI_TOKEN_bbbbbbbbbbbbbbbbbbbbbbbbbb", "pypi-REALVALUE9876543210",
     "x-api-key", "key={secret};", "pypi.test", 443},
    {"OTHER", "pcph_OTHER_cccccccccccccccccccccccccc", "other-REALVALUE55555", NULL, NULL, NULL, 0},
};
#define N_SECRETS (sizeof(secrets) / sizeof(secrets[0]))

static const char *const snis[] = {"api.github.test", "pypi.test", "www.github.test",
				   "api.github.test"};

static struct vault_state *st;
static const struct policy_sandbox *sb;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct vault_store *store = calloc(1, sizeof(*store));
	struct policy *p;
	struct pc_err e = {0};

	(void)argc;
	(void)argv;
	if (sodium_init() < 0 || !store ||
	    policy_load_buffer("fuzz.yaml", policy_yaml, sizeof(policy_yaml) - 1, NULL, &p, &e))
		abort();
	if (!(store->s = calloc(N_SECRETS, sizeof(*store->s))))
		abort();
	for (size_t k = 0; k < N_SECRETS; k++) {
		struct vault_secret *x = &store->s[store->n++];

		pc_strlcpy(x->name, secrets[k].name, sizeof(x->name));
		pc_strlcpy(x->placeholder, secrets[k].ph, sizeof(x->placeholder));
		x->ph_len = strlen(secrets[k].ph);
		x->value_len = strlen(secrets[k].value);
		if (!(x->value = sodium_malloc(x->value_len)))
			abort();
		memcpy(x->value, secrets[k].value, x->value_len);
	}
	if (vault_state_make(p, store, &st, &e) || !(sb = policy_sandbox_by_name(p, "agent-1")))
		abort();
	return 0;
}

static size_t count(const uint8_t *b, size_t n, const char *needle)
{
	size_t nl = strlen(needle), c = 0;
	const uint8_t *p = b;

	while ((p = memmem(p, n - (size_t)(p - b), needle, nl))) {
		c++;
		p++;
	}
	return c;
}

static uint8_t lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c;
}

/* Placeholder ph in b[0..n) percent-decoded once and folded to lower case,
 * exact copies included: how many. Written apart from phscan.c's stream. */
static size_t count_altered(const uint8_t *b, size_t n, const char *ph)
{
	uint8_t *d = malloc(n + 1), want[VAULT_PH_MAX];
	size_t o = 0, c, pl = strlen(ph);

	if (!d)
		abort();
	for (size_t i = 0; i < n; i++) {
		int h1 = -1, h2 = -1;

		if (b[i] == '%' && i + 2 < n) {
			h1 = pc_hex_digit((char)b[i + 1]);
			h2 = pc_hex_digit((char)b[i + 2]);
		}
		if (h1 >= 0 && h2 >= 0) {
			d[o++] = lower((uint8_t)(h1 * 16 + h2));
			i += 2;
		} else {
			d[o++] = lower(b[i]);
		}
	}
	for (size_t i = 0; i < pl; i++)
		want[i] = lower((uint8_t)ph[i]);
	c = 0;
	for (size_t i = 0; i + pl <= o; i++)
		c += memcmp(d + i, want, pl) == 0;
	free(d);
	return c;
}

/* Credentials c[0..n) decoded by libsodium's strict decoders, each
 * alphabet with its padding and without, blanks ignored, the whole and
 * each run between '=': does any decoding hold a placeholder? The vault
 * decodes more leniently than any of these (inject.c, b64_lenient); what
 * they see, it must see. */
static bool decodings_hold_placeholder(const char *c, size_t n)
{
	static const int variants[] = {
	    sodium_base64_VARIANT_ORIGINAL, sodium_base64_VARIANT_ORIGINAL_NO_PADDING,
	    sodium_base64_VARIANT_URLSAFE, sodium_base64_VARIANT_URLSAFE_NO_PADDING};
	uint8_t *dec = malloc(n + 1);
	bool found = false;

	if (!dec)
		abort();
	for (size_t from = 0; from <= n && !found;) {
		const char *eq = memchr(c + from, '=', n - from);
		size_t to = eq ? (size_t)(eq - c) : n, dl;

		/* the whole first, then each run */
		for (int whole = from == 0; whole >= 0 && !found; whole--) {
			size_t len = whole ? n : to - from;

			for (size_t v = 0; v < 4 && !found; v++)
				if (sodium_base642bin(dec, n + 1, c + (whole ? 0 : from), len,
						      " \t", &dl, NULL, variants[v]) == 0)
					for (size_t k = 0; k < N_SECRETS && !found; k++)
						found = count_altered(dec, dl, secrets[k].ph) > 0;
		}
		from = to + 1;
		while (from < n && c[from] == '=')
			from++;
	}
	free(dec);
	return found;
}

/* The head's lines: each "name: value" line with a value that starts (after
 * blanks) with "Basic" and blanks, in any case: do its credentials hold a
 * placeholder as a server may decode them? */
static bool basic_holds_placeholder(const uint8_t *b, size_t n)
{
	for (size_t ls = 0; ls < n;) {
		const uint8_t *nl = memchr(b + ls, '\n', n - ls);
		size_t le = nl ? (size_t)(nl - b) : n, v;
		const uint8_t *colon = memchr(b + ls, ':', le - ls);

		if (colon) {
			v = (size_t)(colon - b) + 1;
			while (v < le && (b[v] == ' ' || b[v] == '\t'))
				v++;
			if (le - v > 5 && strncasecmp((const char *)b + v, "basic", 5) == 0 &&
			    (b[v + 5] == ' ' || b[v + 5] == '\t')) {
				size_t s = v + 5, e = le;

				while (s < e && (b[s] == ' ' || b[s] == '\t'))
					s++;
				while (e > s &&
				       (b[e - 1] == '\r' || b[e - 1] == ' ' || b[e - 1] == '\t'))
					e--;
				if (decodings_hold_placeholder((const char *)b + s, e - s))
					return true;
			}
		}
		ls = le + 1;
	}
	return false;
}

/* The line "Header: <format with ph>" the sandbox must have sent, name in
 * any case, for secret k to be injected: is it in b[0..n)? */
static bool sent_exact_format(const uint8_t *b, size_t n, size_t k)
{
	char want[512], *t;
	const char *f = secrets[k].format;
	size_t hl = strlen(secrets[k].header), wl;

	t = strstr(f, "{secret}");
	wl =
	    (size_t)snprintf(want, sizeof(want), "%.*s%s%s", (int)(t - f), f, secrets[k].ph, t + 8);
	for (size_t i = 0; i + hl + 1 + wl <= n; i++) {
		size_t v = i + hl + 1;

		if ((i == 0 || b[i - 1] == '\n') &&
		    strncasecmp((const char *)b + i, secrets[k].header, hl) == 0 &&
		    b[i + hl] == ':') {
			while (v < n && (b[v] == ' ' || b[v] == '\t'))
				v++;
			if (v + wl <= n && memcmp(b + v, want, wl) == 0)
				return true;
		}
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_request req;
	struct inject_out r;
	struct pc_err e = {0};
	const char *sni;
	uint16_t port;
	unsigned status;
	size_t cap = inject_out_cap(32768), hl;
	char *head;
	uint8_t *out;
	int n;

	if (size < 1)
		return 0;
	sni = snis[data[0] & 3];
	port = data[0] & 4 ? 8443 : 443;
	data++;
	size--;
	/* an exact-size copy: AddressSanitizer sees a read one byte past */
	if (!(head = malloc(size ? size : 1)))
		return 0;
	memcpy(head, data, size);
	n = http_request_parse(head, size, 32768, &req, &status, &e);
	if (n <= 0) {
		free(head);
		return 0;
	}
	hl = (size_t)n;
	if (!(out = malloc(cap)))
		abort();
	memset(out, 0, cap);
	if (inject_request(st, sb, sni, port, head, &req, out, cap, &r) < 0) {
		/* an internal failure: the caller refuses with 500 */
		inject_out_clear(&r);
		free(out);
		free(head);
		return 0;
	}
	for (size_t k = 0; k < N_SECRETS; k++) {
		size_t in_head = count((const uint8_t *)head, hl, secrets[k].value);
		size_t in_out = count(out, r.head_len, secrets[k].value);
		size_t sent = in_out > in_head ? in_out - in_head : 0;

		/* a value in the reason (one the sandbox sent itself, in a
		 * header name the reason names, is not the vault's to hide) */
		if (!in_head && strstr(r.reason, secrets[k].value))
			abort();
		/* past the head: the scratch and the rest, wiped */
		if (count(out + r.head_len, cap - r.head_len, secrets[k].value))
			abort();
		if (r.status) {
			if (r.head_len || r.secrets[0])
				abort();
			continue;
		}
		if (sent) {
			/* V3: bound here, sent exactly as the format, once */
			if (!secrets[k].host || strcasecmp(secrets[k].host, sni) ||
			    secrets[k].port != port || sent != 1 ||
			    !sent_exact_format((const uint8_t *)head, hl, k))
				abort();
		}
		/* V4: no other placeholder in any form anywhere in the head */
		if (count_altered((const uint8_t *)head, hl, secrets[k].ph) != (sent ? 1 : 0))
			abort();
	}
	if (!r.status && basic_holds_placeholder((const uint8_t *)head, hl))
		abort();
	inject_out_clear(&r);
	free(out);
	free(head);
	return 0;
}
