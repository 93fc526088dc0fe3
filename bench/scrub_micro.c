/* bench/scrub_micro: CPU per response of the response scrubber alone, for
 * issue 34 point 3 (bench/report-notes.md): the patterns a keep-alive
 * request of bench/vault scrubs with (three values of the state, one
 * value a connection keeps: value and base64 forms), a response head and
 * a body of N bytes (default 400), each scrubbed at once (scrub_buffer) as
 * relay.c does. CPU time of the process, so the machine's load changes
 * it little. Build (in a tree, after make all):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -I. -o build/bench/scrub_micro bench/scrub_micro.c \
 *     build/libvault.a build/liblogd.a build/librules.a build/libcommon.a \
 *     $(pkg-config --libs libsodium openssl yaml-0.1) -lpthread
 * (-DNO_INDEX: without scrub_keep_index, as before it existed). */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vault/vault_int.h"

static double cpu(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* as relay.c scrubs a response's head and a small body: scrub_buffer */
static void scrub_one(const struct scrub_pat *p, size_t n, const uint8_t *b, size_t len,
		      size_t *tot)
{
	uint8_t *o = NULL;
	size_t ol = 0;

	if (scrub_buffer(p, n, b, len, &o, &ol, NULL) < 0)
		exit(1);
	*tot += ol;
	free(o);
}

int main(int argc, char **argv)
{
	static const char *const vals[] = {"ghp_bench0123456789abcdefghijABCDEFGHIJ",
					   "sk-live-0123456789abcdef0123456789",
					   "xoxb-1234-5678-abcdefghijklmnop"};
	static const char head[] =
	    "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: "
	    "text/plain\r\nContent-Length: 400\r\nConnection: keep-alive\r\n\r\n";
	static const char text[] = "{\"auth\": \"Bearer pcph_GH_abc\", \"path\": \"/echo\"}\n";
	struct scrub_keep forms = {.unbounded = true}, keep = {0};
	size_t nb = argc > 1 ? (size_t)atoi(argv[1]) : 400, n, tot = 0;
	struct scrub_pat *p;
	uint8_t *body;
	int iters = 200000;
	double t0;

	if (sodium_init() < 0)
		return 1;
	for (size_t i = 0; i < 3; i++)
		if (scrub_keep_add_value(&forms, (const uint8_t *)vals[i], strlen(vals[i]),
					 (const uint8_t *)"pcph_X_aaaa", 11) < 0)
			return 1;
	if (scrub_keep_add_value(&keep, (const uint8_t *)vals[0], strlen(vals[0]),
				 (const uint8_t *)"pcph_X_aaaa", 11) < 0)
		return 1;
#ifndef NO_INDEX
	if (scrub_keep_index(&forms) < 0 || scrub_keep_index(&keep) < 0)
		return 1;
#endif
	n = forms.n + keep.n;
	p = calloc(n, sizeof(*p));
	body = malloc(nb + 1);
	if (!p || !body)
		return 1;
	memcpy(p, forms.pats, forms.n * sizeof(*p));
	memcpy(p + forms.n, keep.pats, keep.n * sizeof(*p));
	for (size_t i = 0; i < nb; i++)
		body[i] = (uint8_t)text[i % (sizeof(text) - 1)];
	t0 = cpu();
	for (int it = 0; it < iters; it++) {
		scrub_one(p, n, (const uint8_t *)head, sizeof(head) - 1, &tot);
		scrub_one(p, n, body, nb, &tot);
	}
	printf("%zu patterns, body %zu bytes: %.2f us CPU per response (head and body)\n", n, nb,
	       (cpu() - t0) / iters * 1e6);
	free(p);
	free(body);
	scrub_keep_free(&forms);
	scrub_keep_free(&keep);
	return 0;
}
