/* Unit tests for common/: addresses, prefixes, endpoints, the error
 * convention and the small helpers everything else builds on. */
#include <arpa/inet.h>
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/pc.h"
#include "tests/unit/hostnames.h"
#include "tests/unit/unit.h"

START_TEST(addr_parse_v4_v6)
{
	struct pc_addr a;
	char buf[PC_ADDRSTRLEN];

	ck_assert_int_eq(pc_addr_parse("192.0.2.1", &a), 0);
	ck_assert_int_eq(a.family, AF_INET);
	ck_assert_str_eq(pc_addr_str(&a, buf, sizeof(buf)), "192.0.2.1");
	ck_assert_int_eq(pc_addr_parse("2001:DB8::1", &a), 0);
	ck_assert_int_eq(a.family, AF_INET6);
	ck_assert_str_eq(pc_addr_str(&a, buf, sizeof(buf)), "2001:db8::1");
	ck_assert_int_eq(pc_addr_parse("192.0.2.256", &a), PC_EINVAL);
	ck_assert_int_eq(pc_addr_parse("", &a), PC_EINVAL);
	ck_assert_int_eq(pc_addr_parse(NULL, &a), PC_EINVAL);
}
END_TEST

/* pc_addr_str writes IPv4 itself: every octet width, and inet_ntop's
 * answer for all of them; a buffer too short gets "-", never a cut. */
START_TEST(addr_str_v4_every_octet)
{
	struct pc_addr a = {.family = AF_INET};
	char buf[PC_ADDRSTRLEN], want[INET_ADDRSTRLEN], small[INET_ADDRSTRLEN - 1];

	for (unsigned v = 0; v < 256; v++) {
		a.a[0] = (uint8_t)v;
		a.a[1] = (uint8_t)(255 - v);
		a.a[2] = (uint8_t)(v * 7);
		a.a[3] = (uint8_t)(v / 3);
		ck_assert_ptr_nonnull(inet_ntop(AF_INET, a.a, want, sizeof(want)));
		ck_assert_str_eq(pc_addr_str(&a, buf, sizeof(buf)), want);
	}
	memset(a.a, 255, 4);
	ck_assert_str_eq(pc_addr_str(&a, buf, sizeof(buf)), "255.255.255.255");
	ck_assert_str_eq(pc_addr_str(&a, small, sizeof(small)), "-");
	a.family = 0;
	ck_assert_str_eq(pc_addr_str(&a, buf, sizeof(buf)), "-");
}
END_TEST

START_TEST(endpoint_parse_forms)
{
	struct pc_endpoint e;
	char buf[64];

	ck_assert_int_eq(pc_endpoint_parse("10.0.0.1:53", 0, &e), 0);
	ck_assert_int_eq(e.port, 53);
	ck_assert_int_eq(pc_endpoint_parse("[2001:db8::1]:8443", 0, &e), 0);
	ck_assert_str_eq(pc_endpoint_str(&e, buf, sizeof(buf)), "[2001:db8::1]:8443");
	ck_assert_int_eq(pc_endpoint_parse("2001:db8::1", 53, &e), 0);
	ck_assert_int_eq(e.port, 53);
	ck_assert_int_eq(pc_endpoint_parse("10.0.0.1", 0, &e), PC_EINVAL);
	ck_assert_int_eq(pc_endpoint_parse("10.0.0.1:0", 0, &e), PC_EINVAL);
	ck_assert_int_eq(pc_endpoint_parse("10.0.0.1:65536", 0, &e), PC_EINVAL);
	ck_assert_int_eq(pc_endpoint_parse("10.0.0.1:-5", 0, &e), PC_EINVAL);
	ck_assert_int_eq(pc_endpoint_parse("[2001:db8::1]x", 0, &e), PC_EINVAL);
	ck_assert_int_eq(pc_endpoint_parse("[2001:db8::1", 0, &e), PC_EINVAL);
}
END_TEST

START_TEST(prefix_parse_contains_overlap)
{
	struct pc_prefix p, q;
	struct pc_addr a;

	ck_assert_int_eq(pc_prefix_parse("198.51.100.0/24", &p), 0);
	ck_assert_int_eq(p.len, 24);
	pc_addr_parse("198.51.100.77", &a);
	ck_assert(pc_prefix_contains(&p, &a));
	pc_addr_parse("198.51.101.1", &a);
	ck_assert(!pc_prefix_contains(&p, &a));
	pc_addr_parse("2001:db8::1", &a);
	ck_assert(!pc_prefix_contains(&p, &a)); /* other family never matches */
	/* host bits set below the length: ambiguous intent, refused */
	ck_assert_int_eq(pc_prefix_parse("198.51.100.1/24", &p), PC_EINVAL);
	ck_assert_int_eq(pc_prefix_parse("10.0.0.0/33", &p), PC_EINVAL);
	ck_assert_int_eq(pc_prefix_parse("10.0.0.0/", &p), PC_EINVAL);
	ck_assert_int_eq(pc_prefix_parse("10.0.0.1", &p), 0);
	ck_assert_int_eq(p.len, 32);
	ck_assert_int_eq(pc_prefix_parse("2001:db8::/33", &p), 0);
	ck_assert_int_eq(pc_prefix_parse("2001:db8:4000::/34", &q), 0);
	ck_assert(pc_prefix_overlap(&p, &q));
	ck_assert_int_eq(pc_prefix_parse("2001:db8:8000::/33", &q), 0);
	ck_assert(!pc_prefix_overlap(&p, &q));
	ck_assert_int_eq(pc_prefix_parse("0.0.0.0/0", &p), 0);
	pc_addr_parse("203.0.113.9", &a);
	ck_assert(pc_prefix_contains(&p, &a));
}
END_TEST

START_TEST(mac_parse)
{
	uint8_t m[6] = {0};

	ck_assert_int_eq(pc_mac_parse("02:00:00:cb:00:0B", m), 0);
	ck_assert_int_eq(m[0], 2);
	ck_assert_int_eq(m[5], 0x0b);
	ck_assert_int_eq(pc_mac_parse("02:00:00:cb:00", m), PC_EINVAL);
	ck_assert_int_eq(pc_mac_parse("02-00-00-cb-00-0b", m), PC_EINVAL);
	ck_assert_int_eq(pc_mac_parse("02:00:00:cb:00:0g", m), PC_EINVAL);
	ck_assert_int_eq(pc_mac_parse(" 2:00:00:cb:00:0b", m), PC_EINVAL);
}
END_TEST

START_TEST(err_formatting)
{
	struct pc_err e;
	char buf[1024];

	ck_assert_int_eq(
	    pc_err_set_at(&e, PC_EPARSE, "rules.d/a.yaml", 3, 7, "unknown key %s", "alow"),
	    PC_EPARSE);
	ck_assert_str_eq(pc_err_str(&e, buf, sizeof(buf)), "rules.d/a.yaml:3:7: unknown key alow");
	pc_err_prefix(&e, "loading policy: ");
	ck_assert_str_eq(e.msg, "loading policy: unknown key alow");
	errno = ENOENT;
	pc_err_errno(&e, PC_EIO, "open %s", "/x");
	ck_assert_str_eq(pc_err_str(&e, buf, sizeof(buf)), "open /x: No such file or directory");
	/* a NULL err is allowed and the code still comes back */
	ck_assert_int_eq(pc_err_set(NULL, PC_ENOMEM, "x"), PC_ENOMEM);
}
END_TEST

START_TEST(strlcpy_truncates)
{
	char b[4];

	ck_assert_uint_eq(pc_strlcpy(b, "abcdef", sizeof(b)), 6);
	ck_assert_str_eq(b, "abc");
}
END_TEST

START_TEST(hex_digit_values)
{
	static const char digits[] = "0123456789abcdefABCDEF";

	for (int i = 0; digits[i]; i++)
		ck_assert_int_eq(pc_hex_digit(digits[i]), i < 16 ? i : i - 6);
	/* the neighbours of each range, and bytes that are not ASCII */
	ck_assert_int_eq(pc_hex_digit('/'), -1);
	ck_assert_int_eq(pc_hex_digit(':'), -1);
	ck_assert_int_eq(pc_hex_digit('`'), -1);
	ck_assert_int_eq(pc_hex_digit('g'), -1);
	ck_assert_int_eq(pc_hex_digit('@'), -1);
	ck_assert_int_eq(pc_hex_digit('G'), -1);
	ck_assert_int_eq(pc_hex_digit('\0'), -1);
	ck_assert_int_eq(pc_hex_digit((char)0xe6), -1);
}
END_TEST

/* One text per byte string: libsodium 1.0.18 alone reads a byte from 0x80
 * as '/', padding where it is optional, nothing else amiss. */
/* Decimals with one spelling: what strtoull reads leniently ("-1" as
 * UINT64_MAX, blanks, a sign, leading zeros) is refused. */
START_TEST(dec_u64_takes_only_the_one_spelling)
{
	static const char *const bad[] = {"",
					  "-1",
					  " 1",
					  "1 ",
					  "+1",
					  "01",
					  "00",
					  "1a",
					  "0x1",
					  "18446744073709551616",
					  "99999999999999999999",
					  "000000000000000000001"};
	uint64_t v = 7;

	ck_assert_int_eq(pc_dec_u64("0", 1, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(pc_dec_u64("409", 3, &v), 0);
	ck_assert_uint_eq(v, 409);
	ck_assert_int_eq(pc_dec_u64("18446744073709551615", 20, &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX);
	ck_assert_int_eq(pc_dec_u64("12\n", 2, &v), 0); /* only the n given */
	ck_assert_uint_eq(v, 12);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 7;
		ck_assert_msg(pc_dec_u64(bad[i], strlen(bad[i]), &v) == PC_EPARSE, "took \"%s\"",
			      bad[i]);
		ck_assert_uint_eq(v, 7);
	}
}
END_TEST

START_TEST(b64_decode_takes_only_the_one_encoding)
{
	uint8_t out[200], bin[150];
	char enc[sodium_base64_ENCODED_LEN(sizeof(bin), sodium_base64_VARIANT_ORIGINAL)], bad[8];
	size_t n = 99;

	ck_assert_int_eq(pc_b64_decode(out, sizeof(out), "QUJD", 4, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_mem_eq(out, "ABC", 3);
	ck_assert_int_eq(pc_b64_decode(out, sizeof(out), "", 0, &n), 0);
	ck_assert_uint_eq(n, 0);
	/* every length around the 48-byte chunks the check encodes again */
	for (size_t len = 0; len <= sizeof(bin); len++) {
		randombytes_buf(bin, len);
		sodium_bin2base64(enc, sizeof(enc), bin, len, sodium_base64_VARIANT_ORIGINAL);
		ck_assert_int_eq(pc_b64_decode(out, sizeof(out), enc, strlen(enc), &n), 0);
		ck_assert_uint_eq(n, len);
		ck_assert_mem_eq(out, bin, len);
		if (len)
			ck_assert_int_eq(pc_b64_decode(out, len - 1, enc, strlen(enc), &n),
					 PC_EPARSE);
	}
	/* '/' at the end, then each byte in its place: only '/' itself reads */
	ck_assert_int_eq(pc_b64_decode(out, sizeof(out), "QUJ/", 4, &n), 0);
	for (int c = 1; c < 256; c++) {
		memcpy(bad, "QUJ/", 5);
		bad[3] = (char)c;
		if (c == '/' ||
		    strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+", c))
			continue;
		ck_assert_msg(pc_b64_decode(out, sizeof(out), bad, 4, &n) == PC_EPARSE,
			      "byte 0x%02x read as base64", c);
	}
	/* padding left out, bits past the end, blanks, URL-safe, too long */
	ck_assert_int_eq(pc_b64_decode(out, sizeof(out), "QUI", 3, &n), PC_EPARSE);
	ck_assert_int_eq(pc_b64_decode(out, sizeof(out), "QUJ=", 4, &n), PC_EPARSE);
	ck_assert_int_eq(pc_b64_decode(out, sizeof(out), "QU JD", 5, &n), PC_EPARSE);
	ck_assert_int_eq(pc_b64_decode(out, sizeof(out), "QUJD\n", 5, &n), PC_EPARSE);
	ck_assert_int_eq(pc_b64_decode(out, sizeof(out), "-_-_", 4, &n), PC_EPARSE);
	ck_assert_int_eq(pc_b64_decode(out, sizeof(out), "QUJD====", 8, &n), PC_EPARSE);
}
END_TEST

START_TEST(file_read_limits_and_atomic_write)
{
	char dir[] = "/tmp/pc-unit-XXXXXX", path[64], *buf = NULL;
	size_t len = 0;
	struct pc_err e;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	ck_assert_int_eq(pc_file_write_atomic(path, "hello", 5, 0600, &e), 0);
	ck_assert_int_eq(pc_file_read(path, 16, &buf, &len, &e), 0);
	ck_assert_uint_eq(len, 5);
	ck_assert_str_eq(buf, "hello");
	free(buf);
	buf = NULL;
	/* too large is an error, never a silent truncation */
	ck_assert_int_eq(pc_file_read(path, 4, &buf, &len, &e), PC_EINVAL);
	ck_assert_ptr_null(buf);
	ck_assert_int_eq(pc_file_read(dir, 16, &buf, &len, &e), PC_EINVAL);
	unlink(path);
	ck_assert_int_eq(pc_file_read(path, 16, &buf, &len, &e), PC_ENOENT);
	rmdir(dir);
}
END_TEST

START_TEST(unix_seqpacket_roundtrip_and_peercred)
{
	char dir[] = "/tmp/pc-unit-XXXXXX", path[64], msg[16];
	struct pc_err e;
	int l, c, a;
	uid_t uid;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	l = pc_unix_listen(path, 0600, (uid_t)-1, (gid_t)-1, &e);
	ck_assert_int_ge(l, 0);
	c = pc_unix_connect(path, 0, &e);
	ck_assert_int_ge(c, 0);
	a = accept(l, NULL, NULL);
	ck_assert_int_ge(a, 0);
	ck_assert_int_eq(pc_unix_peercred(a, NULL, &uid, NULL, &e), 0);
	ck_assert_uint_eq(uid, getuid());
	/* one record per message: two sends are two receives */
	ck_assert_int_eq(send(c, "one", 3, 0), 3);
	ck_assert_int_eq(send(c, "two!", 4, 0), 4);
	ck_assert_int_eq(recv(a, msg, sizeof(msg), 0), 3);
	ck_assert_int_eq(recv(a, msg, sizeof(msg), 0), 4);
	close(a);
	close(c);
	close(l);
	/* a stale socket is replaced, a live one or a regular file is not */
	l = pc_unix_listen(path, 0600, (uid_t)-1, (gid_t)-1, &e);
	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(pc_unix_listen(path, 0600, (uid_t)-1, (gid_t)-1, &e), PC_EEXIST);
	ck_assert_ptr_nonnull(strstr(e.msg, "another process is serving"));
	c = pc_unix_connect(path, 0, &e); /* ... and the first one still serves */
	ck_assert_int_ge(c, 0);
	a = accept(l, NULL, NULL);
	ck_assert_int_ge(a, 0);
	close(a);
	close(c);
	close(l);
	{ /* the socket was made under a temporary name: none is left behind */
		char tmp[sizeof(path) + 16];

		snprintf(tmp, sizeof(tmp), "%s.%ld", path, (long)getpid());
		ck_assert_int_ne(access(tmp, F_OK), 0);
	}
	unlink(path);
	ck_assert_int_eq(pc_file_write_atomic(path, "x", 1, 0600, &e), 0);
	ck_assert_int_eq(pc_unix_listen(path, 0600, (uid_t)-1, (gid_t)-1, &e), PC_EEXIST);
	unlink(path);
	ck_assert_int_eq(pc_unix_connect(path, 0, &e), PC_ENOENT);
	rmdir(dir);
}
END_TEST

START_TEST(rfc3339_time)
{
	char b[32];

	ck_assert_str_eq(pc_time_rfc3339(1796047333123ULL, b, sizeof(b)),
			 "2026-11-30T14:02:13.123Z");
}
END_TEST

/* The shared table, straight through the validator, every form. */
START_TEST(hostname_table_every_form)
{
	static const enum pc_host_form forms[] = {PC_HOST_NAME, PC_HOST_POLICY, PC_HOST_SNI,
						  PC_HOST_HTTP};

	for (size_t i = 0; i < N_HOSTNAME_CASES; i++) {
		const struct hostname_case *c = &hostname_cases[i];

		for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
			const char *want = hostname_want(c, forms[f]), *why = NULL;
			struct pc_host h = {.port = 7};
			char shown[300];
			int rc = pc_host_parse_str(c->in, forms[f], &h, &why);

			if (want) {
				ck_assert_msg(rc == 0, "'%s' form %zu: refused (%s)", c->in, f,
					      why);
				ck_assert_str_eq(hostname_shown(&h, shown, sizeof(shown)), want);
			} else {
				ck_assert_msg(rc == PC_EPARSE, "'%s' form %zu: accepted", c->in, f);
				ck_assert_ptr_nonnull(why);
				ck_assert_uint_eq(h.port, 7); /* untouched on failure */
			}
		}
	}
	/* the bytes between start and end only: no NUL needed, none read past */
	ck_assert_int_eq(pc_host_parse((const uint8_t *)"xa.example.comx", 1, 14, PC_HOST_SNI,
				       &(struct pc_host){0}, NULL),
			 0);
	ck_assert_int_eq(pc_host_parse(NULL, 0, 0, PC_HOST_NAME, &(struct pc_host){0}, NULL),
			 PC_EINVAL);
	ck_assert_int_eq(
	    pc_host_parse((const uint8_t *)"a", 1, 0, PC_HOST_NAME, &(struct pc_host){0}, NULL),
	    PC_EINVAL);
}
END_TEST

START_TEST(buf_grows_formats_and_takes)
{
	struct pc_buf b = {0};
	char big[3000];
	size_t len = 0;
	char *t;

	ck_assert_str_eq(pc_buf_str(&b), "");
	pc_buf_puts(&b, "a");
	pc_buf_putc(&b, 'b');
	pc_buf_put(&b, "c\0d", 3);
	ck_assert_uint_eq(b.len, 5);
	ck_assert_mem_eq(b.p, "abc\0d", 6); /* NUL after the text */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	pc_buf_printf(&b, "%s|%d", big, 42); /* longer than any first guess */
	ck_assert_uint_eq(b.len, 5 + sizeof(big) - 1 + 3);
	ck_assert_str_eq(b.p + 5 + sizeof(big) - 1, "|42");
	pc_buf_reset(&b);
	pc_buf_u64(&b, 0);
	pc_buf_putc(&b, ' ');
	pc_buf_u64(&b, UINT64_MAX);
	pc_buf_putc(&b, ' ');
	pc_buf_hex(&b, "\x00\xab\xff", 3);
	ck_assert_str_eq(pc_buf_str(&b), "0 18446744073709551615 00abff");
	t = pc_buf_take(&b, &len);
	ck_assert_str_eq(t, "0 18446744073709551615 00abff");
	ck_assert_uint_eq(len, strlen(t));
	ck_assert_ptr_null(b.p);
	free(t);
	/* an empty buffer is taken as "", not NULL */
	t = pc_buf_take(&b, NULL);
	ck_assert_str_eq(t, "");
	free(t);
	pc_buf_free(NULL);
}
END_TEST

START_TEST(buf_limit_is_sticky)
{
	struct pc_buf b;
	char mem[8];

	pc_buf_init(&b, 10, PC_BUF_SECRET);
	pc_buf_puts(&b, "0123456789"); /* exactly the limit */
	ck_assert_int_eq(b.err, 0);
	pc_buf_putc(&b, 'x');
	ck_assert_int_eq(b.err, PC_EINVAL);
	pc_buf_reset(&b); /* the error is not sticky across a reset */
	pc_buf_puts(&b, "ab");
	ck_assert_int_eq(b.err, 0);
	pc_buf_printf(&b, "%s", "0123456789");
	ck_assert_int_eq(b.err, PC_EINVAL);
	pc_buf_puts(&b, "c"); /* would fit, but the failure sticks */
	ck_assert_str_eq(pc_buf_str(&b), "ab");
	ck_assert_ptr_null(pc_buf_take(&b, NULL));
	ck_assert_ptr_null(b.p);

	/* fixed: never past the caller's memory, an exact fit is allowed */
	memset(mem, '#', sizeof(mem));
	pc_buf_init_fixed(&b, mem, 6, 0);
	pc_buf_puts(&b, "abc");
	ck_assert_str_eq(mem, "abc");
	pc_buf_puts(&b, "def");
	ck_assert_int_eq(b.err, 0);
	ck_assert_mem_eq(mem, "abcdef##", 8);
	pc_buf_putc(&b, 'g');
	ck_assert_int_eq(b.err, PC_EINVAL);
	ck_assert_mem_eq(mem, "abcdef##", 8);
	pc_buf_init_fixed(&b, mem, 6, 0);
	pc_buf_printf(&b, "%d", 123456);
	ck_assert_int_eq(b.err, PC_EINVAL);
	ck_assert_uint_eq(b.len, 0);
	ck_assert_mem_eq(mem + 6, "##", 2);
	ck_assert_ptr_null(pc_buf_take(&b, NULL)); /* not its memory to give */
	/* a secret buffer is wiped on reset, past the text too */
	memcpy(mem, "abcdef##", 8);
	pc_buf_init_fixed(&b, mem, 6, PC_BUF_SECRET);
	pc_buf_puts(&b, "xy");
	pc_buf_reset(&b);
	ck_assert_mem_eq(mem, "\0\0\0\0\0\0##", 8);
	memcpy(mem, "abcdef##", 8);
	pc_buf_init_fixed(&b, mem, 0, 0); /* holds nothing, writes nothing */
	pc_buf_put(&b, "", 0);
	ck_assert_int_eq(b.err, 0);
	pc_buf_putc(&b, 'x');
	ck_assert_int_eq(b.err, PC_EINVAL);
	ck_assert_mem_eq(mem, "abcdef##", 8);
}
END_TEST

START_TEST(json_escape_every_byte)
{
	struct pc_buf b = {0};
	char in[256], want[2048];
	size_t w = 0;

	for (int c = 0; c < 256; c++)
		in[c] = (char)(255 - c);
	pc_json_escape(&b, in, sizeof(in));
	for (int i = 0; i < 256; i++) {
		unsigned c = (unsigned)(255 - i);

		if (c == '"' || c == '\\')
			w += (size_t)sprintf(want + w, "\\%c", c);
		else if (c == '\n' || c == '\t' || c == '\r')
			w += (size_t)sprintf(want + w, "\\%c",
					     c == '\n'	 ? 'n'
					     : c == '\t' ? 't'
							 : 'r');
		else if (c < 0x20 || c == 0x7f)
			w += (size_t)sprintf(want + w, "\\u%04x", c);
		else
			want[w++] = (char)c;
	}
	ck_assert_uint_eq(b.len, w);
	ck_assert_mem_eq(b.p, want, w);
	pc_buf_reset(&b);
	pc_json_quote(&b, NULL);
	pc_json_quote(&b, "a\"b");
	ck_assert_str_eq(b.p, "\"\"\"a\\\"b\"");
	pc_buf_free(&b);
}
END_TEST

START_TEST(json_writer_places_commas)
{
	struct pc_buf b = {0};
	struct pc_json j;

	pc_json_init(&j, &b);
	pc_json_obj(&j);
	pc_json_key(&j, "a");
	pc_json_u64(&j, 1);
	pc_json_key(&j, "b\n");
	pc_json_arr(&j);
	pc_json_str(&j, "x");
	pc_json_i64(&j, -9223372036854775807LL - 1);
	pc_json_bool(&j, true);
	pc_json_null(&j);
	pc_json_obj(&j);
	pc_json_obj_end(&j);
	pc_json_arr(&j);
	pc_json_arr_end(&j);
	pc_json_strn(&j, "y\0z", 3);
	pc_json_arr_end(&j);
	pc_json_key(&j, "c");
	pc_json_raw(&j, "{\"d\":false}");
	pc_json_kstr(&j, "e", "f");
	pc_json_ku64(&j, "g", 7);
	pc_json_obj_end(&j);
	ck_assert_int_eq(b.err, 0);
	ck_assert_str_eq(b.p, "{\"a\":1,\"b\\n\":[\"x\",-9223372036854775808,true,null,{},[],"
			      "\"y\\u0000z\"],\"c\":{\"d\":false},\"e\":\"f\",\"g\":7}");
	pc_json_obj_end(&j); /* one end too many */
	ck_assert_int_eq(b.err, PC_EINVAL);
	pc_buf_reset(&b);
	pc_json_init(&j, &b);
	for (int i = 0; i < PC_JSON_DEPTH + 1; i++)
		pc_json_arr(&j);
	ck_assert_int_eq(b.err, PC_EINVAL);
	pc_buf_free(&b);
}
END_TEST

PC_UNIT_SUITE("common", "core", 0, addr_parse_v4_v6, addr_str_v4_every_octet, endpoint_parse_forms,
	      prefix_parse_contains_overlap, mac_parse, err_formatting, strlcpy_truncates,
	      hex_digit_values, b64_decode_takes_only_the_one_encoding,
	      dec_u64_takes_only_the_one_spelling, file_read_limits_and_atomic_write,
	      unix_seqpacket_roundtrip_and_peercred, rfc3339_time, hostname_table_every_form,
	      buf_grows_formats_and_takes, buf_limit_is_sticky, json_escape_every_byte,
	      json_writer_places_commas)
