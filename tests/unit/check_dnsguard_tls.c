/* tls_clienthello_sni unit tests: real ClientHellos made by OpenSSL clients
 * over memory BIOs (TLS 1.3 and 1.2, with and without SNI), fed whole, in
 * every prefix, re-framed over many records; and crafted ones for the
 * corner cases (duplicates, bad names, bad lengths, oversize, not TLS). */
#include "dnsguard/dnsguard.h"
#include "tests/unit/hostnames.h"
#include "tests/unit/unit.h"

#include <openssl/ssl.h>
#include <stdlib.h>
#include <string.h>

#define CAP 20000

/* The first flight of an OpenSSL client: one ClientHello record. */
static size_t real_ch(uint8_t *out, size_t cap, const char *sni, int maxver)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl;
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	int n;

	ck_assert_ptr_nonnull(ctx);
	if (maxver)
		ck_assert_int_eq(SSL_CTX_set_max_proto_version(ctx, maxver), 1);
	ssl = SSL_new(ctx);
	ck_assert_ptr_nonnull(ssl);
	SSL_set_bio(ssl, rb, wb);
	if (sni)
		ck_assert_int_eq(SSL_set_tlsext_host_name(ssl, sni), 1);
	SSL_set_connect_state(ssl);
	ck_assert_int_eq(SSL_do_handshake(ssl), -1);
	ck_assert_int_eq(SSL_get_error(ssl, -1), SSL_ERROR_WANT_READ);
	n = BIO_read(wb, out, (int)cap);
	ck_assert_int_gt(n, 5);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

/* Re-frame the handshake bytes of one record into records of chunk bytes. */
static size_t reframe(const uint8_t *in, size_t n, size_t chunk, uint8_t *out, size_t cap)
{
	size_t body = n - 5, o = 0;

	for (size_t off = 0; off < body; off += chunk) {
		size_t c = body - off < chunk ? body - off : chunk;

		ck_assert_uint_le(o + 5 + c, cap);
		memcpy(out + o, in, 3);
		out[o + 3] = (uint8_t)(c >> 8);
		out[o + 4] = (uint8_t)c;
		memcpy(out + o + 5, in + 5 + off, c);
		o += 5 + c;
	}
	return o;
}

/* A hand-made ClientHello with the given extensions block. */
static size_t crafted_ch(const uint8_t *ext, size_t ext_len, uint8_t *out)
{
	uint8_t body[4096];
	size_t b = 0, hs;

	body[b++] = 3;
	body[b++] = 3;
	memset(body + b, 0xab, 32); /* random */
	b += 32;
	body[b++] = 0; /* session id */
	body[b++] = 0;
	body[b++] = 2;
	body[b++] = 0x13;
	body[b++] = 0x01; /* one cipher suite */
	body[b++] = 1;
	body[b++] = 0; /* null compression */
	if (ext) {
		body[b++] = (uint8_t)(ext_len >> 8);
		body[b++] = (uint8_t)ext_len;
		memcpy(body + b, ext, ext_len);
		b += ext_len;
	}
	hs = b + 4;
	out[0] = 22;
	out[1] = 3;
	out[2] = 1;
	out[3] = (uint8_t)(hs >> 8);
	out[4] = (uint8_t)hs;
	out[5] = 1;
	out[6] = 0;
	out[7] = (uint8_t)(b >> 8);
	out[8] = (uint8_t)b;
	memcpy(out + 9, body, b);
	return 9 + b;
}

/* A server_name extension with one entry of type t naming name. */
static size_t sni_ext(uint8_t *e, uint8_t t, const char *name)
{
	size_t l = strlen(name);

	e[0] = 0;
	e[1] = 0;
	e[2] = (uint8_t)((l + 5) >> 8);
	e[3] = (uint8_t)(l + 5);
	e[4] = (uint8_t)((l + 3) >> 8);
	e[5] = (uint8_t)(l + 3);
	e[6] = t;
	e[7] = (uint8_t)(l >> 8);
	e[8] = (uint8_t)l;
	memcpy(e + 9, name, l);
	return 9 + l;
}

static int sni_of(const uint8_t *d, size_t n, char *sni)
{
	size_t need = 0;

	return tls_clienthello_sni(d, n, sni, POLICY_HOST_MAX, &need);
}

START_TEST(real_clienthello_tls13_and_tls12)
{
	static uint8_t ch[CAP];
	char sni[POLICY_HOST_MAX];
	size_t n = real_ch(ch, sizeof(ch), "Api.GitHub.com", 0);

	ck_assert_int_eq(sni_of(ch, n, sni), 1);
	ck_assert_str_eq(sni, "api.github.com");
	n = real_ch(ch, sizeof(ch), "files.example", TLS1_2_VERSION);
	ck_assert_int_eq(sni_of(ch, n, sni), 1);
	ck_assert_str_eq(sni, "files.example");
	/* bytes after the ClientHello (early data, say) do not matter */
	memset(ch + n, 0x17, 40);
	ck_assert_int_eq(sni_of(ch, n + 40, sni), 1);
}
END_TEST

START_TEST(real_clienthello_without_sni)
{
	static uint8_t ch[CAP];
	char sni[POLICY_HOST_MAX] = "unchanged";
	size_t n = real_ch(ch, sizeof(ch), NULL, 0);

	ck_assert_int_eq(sni_of(ch, n, sni), 0);
	ck_assert_str_eq(sni, "unchanged");
}
END_TEST

START_TEST(every_prefix_asks_for_more)
{
	static uint8_t ch[CAP];
	char sni[POLICY_HOST_MAX];
	size_t n = real_ch(ch, sizeof(ch), "api.github.com", 0), need, len = 0;
	int steps = 0, rc;

	for (size_t cut = 0; cut < n; cut++) {
		need = 0;
		ck_assert_int_eq(tls_clienthello_sni(ch, cut, sni, sizeof(sni), &need), PC_EAGAIN);
		ck_assert_uint_gt(need, cut);
		ck_assert_uint_le(need, n);
	}
	/* the engine's loop: wait for need bytes, ask again */
	while ((rc = tls_clienthello_sni(ch, len, sni, sizeof(sni), &need)) == PC_EAGAIN) {
		ck_assert_int_lt(++steps, 4);
		len = need;
	}
	ck_assert_int_eq(rc, 1);
	ck_assert_uint_eq(len, n);
}
END_TEST

START_TEST(clienthello_over_many_records)
{
	static uint8_t ch[CAP], re[CAP];
	char sni[POLICY_HOST_MAX];
	size_t n = real_ch(ch, sizeof(ch), "raw.githubusercontent.com", 0), m, need;
	size_t chunks[] = {1, 3, 50, 200};

	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		m = reframe(ch, n, chunks[c], re, sizeof(re));
		ck_assert_int_eq(sni_of(re, m, sni), 1);
		ck_assert_str_eq(sni, "raw.githubusercontent.com");
		for (size_t cut = 0; cut < m; cut += 7) {
			ck_assert_int_eq(tls_clienthello_sni(re, cut, sni, sizeof(sni), &need),
					 PC_EAGAIN);
			ck_assert_uint_gt(need, cut);
			ck_assert_uint_le(need, m);
		}
	}
}
END_TEST

START_TEST(not_tls_rejected_at_once)
{
	static const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	const uint8_t ssh[] = "SSH-2.0-OpenSSH_9.2";
	const uint8_t alert[] = {21, 3, 3, 0, 2, 2, 40};
	const uint8_t v2[] = {0x80, 0x2e, 0x01, 0x03, 0x01};
	const uint8_t tls_start[] = {22, 3, 1};
	char sni[POLICY_HOST_MAX];
	size_t need = 0;

	ck_assert_int_eq(sni_of((const uint8_t *)http, 1, sni), PC_EPARSE);
	ck_assert_int_eq(sni_of((const uint8_t *)http, sizeof(http) - 1, sni), PC_EPARSE);
	ck_assert_int_eq(sni_of(ssh, sizeof(ssh) - 1, sni), PC_EPARSE);
	ck_assert_int_eq(sni_of(alert, sizeof(alert), sni), PC_EPARSE);
	ck_assert_int_eq(sni_of(v2, sizeof(v2), sni), PC_EPARSE);
	ck_assert_int_eq(tls_clienthello_sni(tls_start, 3, sni, sizeof(sni), &need), PC_EAGAIN);
	ck_assert_uint_eq(need, 5);
	ck_assert_int_eq(tls_clienthello_sni(NULL, 0, sni, sizeof(sni), &need), PC_EAGAIN);
	ck_assert_uint_eq(need, 5);
}
END_TEST

START_TEST(crafted_names)
{
	uint8_t e[600], ch[1024];
	char sni[POLICY_HOST_MAX], name[300];
	size_t el;

	el = sni_ext(e, 0, "WWW.Example.ORG");
	ck_assert_int_eq(sni_of(ch, crafted_ch(e, el, ch), sni), 1);
	ck_assert_str_eq(sni, "www.example.org");
	/* RFC 6066: no trailing dot; the vault refuses it too */
	static const char *const bad[] = {
	    "a..b",	   ".a", "a b",	 "WWW.Example.ORG.", "-a.example", "a-.example",
	    "a.example..", "",	 "a\nb", "ex\xc3\xa9.com"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		el = sni_ext(e, 0, bad[i]);
		ck_assert_msg(sni_of(ch, crafted_ch(e, el, ch), sni) == PC_EPARSE, "%s", bad[i]);
	}
	el = sni_ext(e, 0, "a");
	e[8] = 0; /* a NUL inside: length 0 name */
	ck_assert_int_eq(sni_of(ch, crafted_ch(e, el, ch), sni), PC_EPARSE);
	memset(name, 'a', 63); /* longest label */
	strcpy(name + 63, ".example");
	el = sni_ext(e, 0, name);
	ck_assert_int_eq(sni_of(ch, crafted_ch(e, el, ch), sni), 1);
	name[63] = 'a'; /* 64 */
	el = sni_ext(e, 0, name);
	ck_assert_int_eq(sni_of(ch, crafted_ch(e, el, ch), sni), PC_EPARSE);
	for (int i = 0; i < 254; i++) /* 254 characters: too long */
		name[i] = (i % 2) ? '.' : 'a';
	name[253] = 'a';
	name[254] = '\0';
	el = sni_ext(e, 0, name);
	ck_assert_int_eq(sni_of(ch, crafted_ch(e, el, ch), sni), PC_EPARSE);
	name[253] = '\0'; /* 253: fine */
	el = sni_ext(e, 0, name);
	ck_assert_int_eq(sni_of(ch, crafted_ch(e, el, ch), sni), 1);
	/* a name type other than host_name only: no SNI */
	el = sni_ext(e, 7, "opaque");
	ck_assert_int_eq(sni_of(ch, crafted_ch(e, el, ch), sni), 0);
	/* no extensions at all: TLS without SNI */
	ck_assert_int_eq(sni_of(ch, crafted_ch(NULL, 0, ch), sni), 0);
	/* the caller's buffer too small */
	el = sni_ext(e, 0, "api.github.com");
	ck_assert_int_eq(tls_clienthello_sni(ch, crafted_ch(e, el, ch), sni, 5, NULL), PC_EINVAL);
}
END_TEST

/* The shared table in a ClientHello's server_name: the engine's held-flow
 * path takes what the policy and the vault take, and only that. */
START_TEST(crafted_hostname_table)
{
	uint8_t e[600], ch[1024];
	char sni[POLICY_HOST_MAX];

	for (size_t i = 0; i < N_HOSTNAME_CASES; i++) {
		const struct hostname_case *c = &hostname_cases[i];
		size_t el = sni_ext(e, 0, c->in);
		int rc = sni_of(ch, crafted_ch(e, el, ch), sni);

		if (c->sni) {
			ck_assert_msg(rc == 1, "'%s': %d", c->in, rc);
			ck_assert_str_eq(sni, c->sni);
		} else {
			ck_assert_msg(rc == PC_EPARSE, "'%s': %d", c->in, rc);
		}
	}
}
END_TEST

START_TEST(crafted_structure_errors)
{
	uint8_t e[600], ch[1024], x[1024];
	char sni[POLICY_HOST_MAX];
	size_t el, n;

	/* two server_name extensions */
	el = sni_ext(e, 0, "a.example");
	el += sni_ext(e + el, 0, "b.example");
	ck_assert_int_eq(sni_of(ch, crafted_ch(e, el, ch), sni), PC_EPARSE);
	/* one extension, two host_name entries */
	el = sni_ext(e, 0, "a.example");
	memcpy(e + el,
	       "\0\0\x09"
	       "b.example",
	       12);
	e[3] = (uint8_t)(e[3] + 12);
	e[5] = (uint8_t)(e[5] + 12);
	ck_assert_int_eq(sni_of(ch, crafted_ch(e, el + 12, ch), sni), PC_EPARSE);
	/* lengths that disagree, one at a time */
	el = sni_ext(e, 0, "a.example");
	n = crafted_ch(e, el, ch);
	ck_assert_int_eq(sni_of(ch, n, sni), 1);
	/* record length, handshake length, session id, cipher suites,
	 * compression, extensions, the extension, its list, the name */
	const size_t spots[] = {4, 8, 43, 45, 48, 51, 55, 57, 60};
	for (size_t i = 0; i < sizeof(spots) / sizeof(spots[0]); i++) {
		memcpy(x, ch, n);
		x[spots[i]] ^= 0x01;
		ck_assert_msg(sni_of(x, n, sni) != 1, "spot %zu", spots[i]);
	}
	/* a server hello, not a client hello */
	memcpy(x, ch, n);
	x[5] = 2;
	ck_assert_int_eq(sni_of(x, n, sni), PC_EPARSE);
	/* an empty record */
	memcpy(x, ch, 5);
	x[3] = x[4] = 0;
	ck_assert_int_eq(sni_of(x, 5, sni), PC_EPARSE);
}
END_TEST

START_TEST(oversize_is_refused_not_awaited)
{
	uint8_t hdr[9] = {22, 3, 1, 0x40, 0x00, 1, 0, 0x3f, 0xfc};
	uint8_t big[9] = {22, 3, 1, 0x00, 0x04, 1, 0x01, 0x00, 0x00};
	char sni[POLICY_HOST_MAX];
	size_t need = 0;

	/* a 16 KiB record: more than the 16 KiB we hold, with its header */
	ck_assert_int_eq(tls_clienthello_sni(hdr, sizeof(hdr), sni, sizeof(sni), &need), PC_EPARSE);
	hdr[3] = 0x3f;
	hdr[4] = 0xfb; /* 16379 + 5 = 16384: just fits */
	ck_assert_int_eq(tls_clienthello_sni(hdr, sizeof(hdr), sni, sizeof(sni), &need), PC_EAGAIN);
	ck_assert_uint_eq(need, 16384);
	/* a handshake message of 64 KiB announced in a small record */
	ck_assert_int_eq(tls_clienthello_sni(big, sizeof(big), sni, sizeof(sni), &need), PC_EPARSE);
}
END_TEST

START_TEST(random_bytes_never_crash)
{
	static uint8_t buf[CAP];
	char sni[POLICY_HOST_MAX];
	size_t need;
	unsigned seed = 12345;

	for (int i = 0; i < 20000; i++) {
		size_t n = (size_t)(rand_r(&seed) % 600);
		int rc;

		for (size_t k = 0; k < n; k++)
			buf[k] = (uint8_t)rand_r(&seed);
		if (n >= 3 && (i & 1)) {
			buf[0] = 22;
			buf[1] = 3;
			buf[2] = 1;
		}
		need = 0;
		rc = tls_clienthello_sni(buf, n, sni, sizeof(sni), &need);
		ck_assert(rc == PC_EPARSE || rc == PC_EAGAIN || rc == 0 || rc == 1);
		if (rc == PC_EAGAIN)
			ck_assert(need > n && need <= 16384);
	}
}
END_TEST

/* Encrypted Client Hello and ESNI, in any place among the extensions,
 * before or after server_name, with or without it: refused (the server
 * may serve an inner name); the codepoints around them are not. */
START_TEST(encrypted_client_hello_refused)
{
	static const struct {
		uint16_t type;
		int rc;
	} cases[] = {
	    {0xfe0d, PC_EREFUSED}, {0xfe08, PC_EREFUSED}, {0xfe0a, PC_EREFUSED},
	    {0xff02, PC_EREFUSED}, {0xffce, PC_EREFUSED}, {0xfd00, PC_EREFUSED},
	    {0xfe07, 1},	   {0xfe0e, 1},		  {0xffcd, 1},
	    {0x0a0a, 1}, /* GREASE (RFC 8701) */
	};
	uint8_t e[600], ch[1024];
	char sni[POLICY_HOST_MAX];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int before = 0; before < 3; before++) {
			size_t el = 0;

			if (before == 1)
				el = sni_ext(e, 0, "a.example");
			e[el++] = (uint8_t)(cases[i].type >> 8);
			e[el++] = (uint8_t)cases[i].type;
			e[el++] = 0;
			e[el++] = 8;
			memset(e + el, 0x5a, 8);
			el += 8;
			if (before == 0)
				el += sni_ext(e + el, 0, "a.example");
			ck_assert_msg(sni_of(ch, crafted_ch(e, el, ch), sni) ==
					  (before == 2 && cases[i].rc == 1 ? 0 : cases[i].rc),
				      "type %04x, place %d", cases[i].type, before);
		}
	}
	/* a real ClientHello, the extension appended: refused too */
	{
		size_t n = real_ch(ch, sizeof(ch), "a.example", 0);
		size_t add = 4 + 8, rec = ((size_t)ch[3] << 8 | ch[4]) + add,
		       hs = ((size_t)ch[7] << 8 | ch[8]) + add, off = 5 + 4 + 2 + 32, el;

		off += 1 + ch[off];				 /* session id */
		off += 2 + ((size_t)ch[off] << 8 | ch[off + 1]); /* cipher suites */
		off += 1 + ch[off];				 /* compression */
		el = ((size_t)ch[off] << 8 | ch[off + 1]) + add;
		ch[3] = (uint8_t)(rec >> 8);
		ch[4] = (uint8_t)rec;
		ch[7] = (uint8_t)(hs >> 8);
		ch[8] = (uint8_t)hs;
		ch[off] = (uint8_t)(el >> 8);
		ch[off + 1] = (uint8_t)el;
		memcpy(ch + n, "\xfe\x0d\x00\x08ZZZZZZZZ", add);
		ck_assert_int_eq(sni_of(ch, n + add, sni), PC_EREFUSED);
		ck_assert_int_eq(sni_of(ch, n, sni), PC_EAGAIN); /* cut short: more is awaited */
	}
}
END_TEST

PC_UNIT_SUITE("dnsguard_tls", "clienthello", 0, real_clienthello_tls13_and_tls12,
	      real_clienthello_without_sni, every_prefix_asks_for_more,
	      clienthello_over_many_records, not_tls_rejected_at_once, crafted_names,
	      crafted_hostname_table, crafted_structure_errors, oversize_is_refused_not_awaited,
	      random_bytes_never_crash, encrypted_client_hello_refused)
