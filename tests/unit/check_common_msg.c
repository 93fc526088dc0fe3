/* Unit tests of the typed local protocols: the shared framing (common/msg.c),
 * engine.sock's messages and client call (common/engmsg.c) and the check
 * helper channel (engine/checkmsg.c): round trips, and every malformed form
 * refused (short header, another protocol or version, a length past the
 * end, an unterminated or over-long string, an unknown type, trailing
 * bytes, values out of range). */
#include "engine/engine_int.h"
#include "unit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the framing ----------------------------------------------------------- */

START_TEST(framing_round_trip)
{
	uint8_t b[64];
	struct pc_msg_w w;
	struct pc_msg_r r;
	struct pc_err err;
	const char *s;
	size_t n;
	uint8_t t, v8;
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;
	int len;

	pc_msg_w_init(&w, b, sizeof(b));
	pc_msg_put_u8(&w, 0xab);
	pc_msg_put_u16(&w, 0xbeef);
	pc_msg_put_u32(&w, 0xdeadbeef);
	pc_msg_put_u64(&w, 0x0102030405060708ULL);
	pc_msg_put_str(&w, "abc", 3);
	pc_msg_put_str(&w, NULL, 0);
	len = pc_msg_finish(&w, 0x1234, 7, 9, sizeof(b));
	ck_assert_int_eq(len, 8 + 1 + 2 + 4 + 8 + 7 + 4);
	/* the header: version, type, protocol, length, big-endian */
	ck_assert_int_eq(b[0], 7);
	ck_assert_int_eq(b[1], 9);
	ck_assert_int_eq(b[2], 0x12);
	ck_assert_int_eq(b[3], 0x34);
	ck_assert_int_eq(pc_msg_get32(b + 4), (uint32_t)len);
	ck_assert_int_eq(pc_msg_open(&r, b, (size_t)len, 0x1234, 7, &t, &err), 0);
	ck_assert_int_eq(t, 9);
	ck_assert_int_eq(pc_msg_get_u8(&r, &v8, &err), 0);
	ck_assert_int_eq(pc_msg_get_u16(&r, &v16, &err), 0);
	ck_assert_int_eq(pc_msg_get_u32(&r, &v32, &err), 0);
	ck_assert_int_eq(pc_msg_get_u64(&r, &v64, &err), 0);
	ck_assert_int_eq(v8, 0xab);
	ck_assert_int_eq(v16, 0xbeef);
	ck_assert_uint_eq(v32, 0xdeadbeef);
	ck_assert(v64 == 0x0102030405060708ULL);
	ck_assert_int_eq(pc_msg_get_str(&r, 3, &s, &n, &err), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_mem_eq(s, "abc", 3);
	ck_assert_int_eq(pc_msg_get_str(&r, 0, &s, &n, &err), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert(!pc_msg_more(&r));
	ck_assert_int_eq(pc_msg_end(&r, &err), 0);
	/* past the end: every reader refuses, and nothing moves */
	ck_assert_int_eq(pc_msg_get_u8(&r, &v8, &err), PC_EPARSE);
	ck_assert_int_eq(pc_msg_get_u64(&r, &v64, &err), PC_EPARSE);
	ck_assert_int_eq(pc_msg_get_str(&r, 10, &s, &n, &err), PC_EPARSE);
	/* too small a buffer, or longer than the protocol's maximum */
	pc_msg_w_init(&w, b, 12);
	pc_msg_put_u64(&w, 1);
	ck_assert(w.overflow);
	ck_assert_int_eq(pc_msg_finish(&w, 1, 1, 1, 64), PC_EINVAL);
	pc_msg_w_init(&w, b, sizeof(b));
	pc_msg_put_u64(&w, 1);
	ck_assert_int_eq(pc_msg_finish(&w, 1, 1, 1, 15), PC_EINVAL);
	pc_msg_w_init(&w, b, 4);
	ck_assert(w.overflow);
}
END_TEST

START_TEST(framing_refuses_malformed)
{
	uint8_t b[64];
	struct pc_msg_w w;
	struct pc_msg_r r;
	struct pc_err err;
	const char *s;
	size_t n;
	uint8_t t;
	int len;

	pc_msg_w_init(&w, b, sizeof(b));
	pc_msg_put_str(&w, "hello", 5);
	len = pc_msg_finish(&w, 0x4543, 1, 1, sizeof(b));
	ck_assert_int_eq(len, 17);
	/* short header */
	for (size_t cut = 0; cut < PC_MSG_HDR_LEN; cut++)
		ck_assert_int_eq(pc_msg_open(&r, b, cut, 0x4543, 1, &t, &err), PC_EPARSE);
	/* the header's length against the bytes there */
	ck_assert_int_eq(pc_msg_open(&r, b, (size_t)len - 1, 0x4543, 1, &t, &err), PC_EPARSE);
	ck_assert_int_eq(pc_msg_open(&r, b, (size_t)len + 1, 0x4543, 1, &t, &err), PC_EPARSE);
	/* another protocol, another version */
	ck_assert_int_eq(pc_msg_open(&r, b, (size_t)len, 0, 1, &t, &err), PC_EPARSE);
	ck_assert_int_eq(pc_msg_open(&r, b, (size_t)len, 0x4543, 2, &t, &err), PC_EUNSUPP);
	ck_assert_ptr_nonnull(strstr(err.msg, "version 1, expected 2"));
	/* a string longer than allowed, one holding a NUL */
	ck_assert_int_eq(pc_msg_open(&r, b, (size_t)len, 0x4543, 1, &t, &err), 0);
	ck_assert_int_eq(pc_msg_get_str(&r, 4, &s, &n, &err), PC_EPARSE);
	b[14] = '\0';
	ck_assert_int_eq(pc_msg_get_str(&r, 10, &s, &n, &err), PC_EPARSE);
	b[14] = 'l';
	/* a string whose length runs past the end (unterminated) */
	pc_msg_put32(b + 8, 6);
	ck_assert_int_eq(pc_msg_get_str(&r, 10, &s, &n, &err), PC_EPARSE);
	ck_assert_ptr_nonnull(strstr(err.msg, "unterminated"));
	pc_msg_put32(b + 8, 0xffffffff);
	ck_assert_int_eq(pc_msg_get_str(&r, SIZE_MAX, &s, &n, &err), PC_EPARSE);
	/* bytes left after the last field */
	pc_msg_put32(b + 8, 4);
	ck_assert_int_eq(pc_msg_get_str(&r, 10, &s, &n, &err), 0);
	ck_assert_int_eq(pc_msg_end(&r, &err), PC_EPARSE);
}
END_TEST

/* ---- engine.sock --------------------------------------------------------- */

START_TEST(eng_requests)
{
	static const enum pc_eng_type types[] = {PC_ENG_STATUS, PC_ENG_RELOAD, PC_ENG_METRICS,
						 PC_ENG_RECHECK};
	uint8_t b[64];
	struct pc_err err;
	enum pc_eng_type t;

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		ck_assert_int_eq(pc_eng_request_encode(types[i], b, sizeof(b)), PC_MSG_HDR_LEN);
		ck_assert_int_eq(pc_eng_request_decode(b, PC_MSG_HDR_LEN, &t, &err), 0);
		ck_assert_int_eq(t, types[i]);
	}
	ck_assert_int_eq(pc_eng_request_encode(PC_ENG_ERROR, b, sizeof(b)), PC_EINVAL);
	ck_assert_int_eq(pc_eng_request_encode(PC_ENG_STATUS, b, 7), PC_EINVAL);
	/* the old protocol's word, a short header */
	ck_assert_int_eq(pc_eng_request_decode((const uint8_t *)"status", 6, &t, &err), PC_EPARSE);
	ck_assert_int_eq(pc_eng_request_decode((const uint8_t *)"status\n\0\0\0", 10, &t, &err),
			 PC_EPARSE);
	/* another version: PC_EUNSUPP, so the engine can say so */
	pc_eng_request_encode(PC_ENG_STATUS, b, sizeof(b));
	b[0] = PC_ENG_VERSION + 1;
	ck_assert_int_eq(pc_eng_request_decode(b, PC_MSG_HDR_LEN, &t, &err), PC_EUNSUPP);
	/* unknown types: 0, past recheck, a reply type */
	b[0] = PC_ENG_VERSION;
	for (unsigned bad = 0; bad < 256; bad++) {
		if (bad >= PC_ENG_STATUS && bad <= PC_ENG_RECHECK)
			continue;
		b[1] = (uint8_t)bad;
		ck_assert_int_eq(pc_eng_request_decode(b, PC_MSG_HDR_LEN, &t, &err), PC_EPARSE);
	}
	/* a body on a request that has none */
	b[1] = PC_ENG_STATUS;
	b[7] = PC_MSG_HDR_LEN + 1;
	b[8] = 0;
	ck_assert_int_eq(pc_eng_request_decode(b, PC_MSG_HDR_LEN + 1, &t, &err), PC_EPARSE);
}
END_TEST

static size_t reply_bytes(const struct pc_eng_reply *r, uint8_t **b)
{
	size_t len = 0;

	ck_assert_int_eq(pc_eng_reply_encode(r, b, &len, NULL), 0);
	return len;
}

START_TEST(eng_replies_round_trip)
{
	const char *json = "{\"ok\":true,\"policy\":\"sha256:ab\",\"check\":{\"running\":true}}";
	struct pc_eng_reply st = {.type = PC_ENG_STATUS_REPLY,
				  .policy = "sha256:ab",
				  .check_running = true,
				  .json = json},
			    rl = {.type = PC_ENG_RELOAD_REPLY, .policy = "sha256:cd"},
			    mt = {.type = PC_ENG_METRICS_REPLY, .text = "# HELP x y\nx 1\n"},
			    er = {.type = PC_ENG_ERROR,
				  .code = PC_EPERM,
				  .message = "permission denied: only root may reload the policy"},
			    d;
	uint8_t *b;
	size_t len;

	len = reply_bytes(&st, &b);
	ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, NULL), 0);
	ck_assert_int_eq(d.type, PC_ENG_STATUS_REPLY);
	ck_assert_str_eq(d.policy, "sha256:ab");
	ck_assert(d.check_running);
	ck_assert_str_eq(d.json, json);
	ck_assert_ptr_null(d.message);
	ck_assert_ptr_null(d.text);
	pc_eng_reply_free(&d);
	free(b);
	len = reply_bytes(&rl, &b);
	ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, NULL), 0);
	ck_assert_str_eq(d.policy, "sha256:cd");
	ck_assert_ptr_null(d.json);
	pc_eng_reply_free(&d);
	free(b);
	rl.type = PC_ENG_RECHECK_REPLY; /* the same body: the policy in force */
	len = reply_bytes(&rl, &b);
	ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, NULL), 0);
	ck_assert_int_eq(d.type, PC_ENG_RECHECK_REPLY);
	ck_assert_str_eq(d.policy, "sha256:cd");
	pc_eng_reply_free(&d);
	free(b);
	rl.type = PC_ENG_RELOAD_REPLY;
	len = reply_bytes(&mt, &b);
	ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, NULL), 0);
	ck_assert_str_eq(d.text, "# HELP x y\nx 1\n");
	pc_eng_reply_free(&d);
	free(b);
	len = reply_bytes(&er, &b);
	ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, NULL), 0);
	ck_assert_int_eq(d.type, PC_ENG_ERROR);
	ck_assert_int_eq(d.code, PC_EPERM);
	ck_assert_str_eq(d.message, er.message);
	pc_eng_reply_free(&d);
	free(b);
	/* what cannot be encoded */
	er.code = 0;
	ck_assert_int_eq(pc_eng_reply_encode(&er, &b, &len, NULL), PC_EINVAL);
	rl.type = PC_ENG_STATUS; /* a request type */
	ck_assert_int_eq(pc_eng_reply_encode(&rl, &b, &len, NULL), PC_EINVAL);
}
END_TEST

START_TEST(eng_replies_refuse_malformed)
{
	struct pc_eng_reply st = {.type = PC_ENG_STATUS_REPLY,
				  .policy = "sha256:ab",
				  .check_running = false,
				  .json = "{\"ok\":true}"},
			    er = {.type = PC_ENG_ERROR,
				  .code = PC_EINVAL,
				  .message = "x.yaml:1:2: bad"},
			    d;
	struct pc_err err;
	uint8_t *b, *c;
	size_t len;

	len = reply_bytes(&st, &b);
	for (size_t cut = 0; cut < len; cut++) /* every truncation, header fixed up */
		if (cut >= PC_MSG_HDR_LEN) {
			pc_msg_put32(b + 4, (uint32_t)cut);
			ck_assert_int_eq(pc_eng_reply_decode(b, cut, &d, &err), PC_EPARSE);
		} else {
			ck_assert_int_eq(pc_eng_reply_decode(b, cut, &d, &err), PC_EPARSE);
		}
	pc_msg_put32(b + 4, (uint32_t)len);
	ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, &err), 0);
	pc_eng_reply_free(&d);
	/* the running flag is 0 or 1 */
	b[8 + 4 + 9] = 2;
	ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, &err), PC_EPARSE);
	b[8 + 4 + 9] = 0;
	/* a policy longer than a hash can be */
	pc_msg_put32(b + 8, PC_ENG_POLICY_MAX + 1);
	ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, &err), PC_EPARSE);
	pc_msg_put32(b + 8, 9);
	/* the JSON's length past the end (unterminated) */
	pc_msg_put32(b + 8 + 4 + 9 + 1, 12);
	ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, &err), PC_EPARSE);
	pc_msg_put32(b + 8 + 4 + 9 + 1, 11);
	/* unknown reply types, a request type, another version */
	for (unsigned t = 0; t < 256; t++) {
		if (t >= PC_ENG_ERROR && t <= PC_ENG_METRICS_REPLY)
			continue;
		b[1] = (uint8_t)t;
		ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, &err), PC_EPARSE);
	}
	b[1] = PC_ENG_STATUS_REPLY;
	b[0] = PC_ENG_VERSION + 1;
	ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, &err), PC_EUNSUPP);
	b[0] = PC_ENG_VERSION;
	/* a trailing byte */
	c = malloc(len + 1);
	memcpy(c, b, len);
	c[len] = 0;
	pc_msg_put32(c + 4, (uint32_t)len + 1);
	ck_assert_int_eq(pc_eng_reply_decode(c, len + 1, &d, &err), PC_EPARSE);
	free(c);
	free(b);
	/* an error without a code */
	len = reply_bytes(&er, &b);
	b[8] = b[9] = 0;
	ck_assert_int_eq(pc_eng_reply_decode(b, len, &d, &err), PC_EPARSE);
	free(b);
}
END_TEST

/* A one-shot engine.sock: answers the first request with fixed bytes, so
 * pc_engine_call meets real sockets and replies of other versions. */
struct fake_engine {
	int lfd;
	const uint8_t *reply;
	size_t len;
	uint8_t got[64];
	ssize_t got_len;
};

static void *fake_engine_main(void *arg)
{
	struct fake_engine *f = arg;
	int fd = accept(f->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	f->got_len = recv(fd, f->got, sizeof(f->got), 0);
	send(fd, f->reply, f->len, MSG_NOSIGNAL);
	close(fd);
	return NULL;
}

static int call_fake(const uint8_t *reply, size_t len, enum pc_eng_type req,
		     struct pc_eng_reply *out, struct pc_err *err)
{
	char dir[] = "/tmp/pc-engmsg-XXXXXX", path[PC_PATH_MAX + 32];
	struct fake_engine f = {.reply = reply, .len = len};
	pthread_t th;
	enum pc_eng_type t;
	int rc;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, PC_ENGINE_SOCK);
	f.lfd = pc_unix_listen(path, 0600, (uid_t)-1, (gid_t)-1, NULL);
	ck_assert_int_ge(f.lfd, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, fake_engine_main, &f), 0);
	rc = pc_engine_call(dir, req, 5000, out, err);
	pthread_join(th, NULL);
	/* what the client sent is a well-formed request of that type */
	ck_assert_int_eq(pc_eng_request_decode(f.got, (size_t)f.got_len, &t, NULL), 0);
	ck_assert_int_eq(t, req);
	close(f.lfd);
	unlink(path);
	rmdir(dir);
	return rc;
}

START_TEST(eng_call_meets_other_versions)
{
	struct pc_eng_reply st = {.type = PC_ENG_STATUS_REPLY, .policy = "sha256:ab", .json = "{}"},
			    d;
	struct pc_err err;
	uint8_t *b;
	size_t len = reply_bytes(&st, &b);

	ck_assert_int_eq(call_fake(b, len, PC_ENG_STATUS, &d, &err), 0);
	ck_assert_str_eq(d.policy, "sha256:ab");
	pc_eng_reply_free(&d);
	/* a status reply to a reload is not an answer */
	ck_assert_int_eq(call_fake(b, len, PC_ENG_RELOAD, &d, &err), PC_EPARSE);
	/* an engine of another release */
	b[0] = PC_ENG_VERSION + 1;
	ck_assert_int_eq(call_fake(b, len, PC_ENG_STATUS, &d, &err), PC_EUNSUPP);
	ck_assert_msg(strstr(err.msg, "different releases"), "%s", err.msg);
	free(b);
	/* the old text protocol's answer */
	ck_assert_int_eq(call_fake((const uint8_t *)"{\"ok\":false,\"error\":\"unknown\"}", 30,
				   PC_ENG_STATUS, &d, &err),
			 PC_EUNSUPP);
	ck_assert_msg(strstr(err.msg, "old text protocol"), "%s", err.msg);
	/* garbage */
	ck_assert_int_eq(
	    call_fake((const uint8_t *)"\x01\x81\x45\x43\0\0\0\xff", 8, PC_ENG_STATUS, &d, &err),
	    PC_EPARSE);
}
END_TEST

/* ---- the check helper channel -------------------------------------------- */

START_TEST(chk_request)
{
	uint8_t b[CHK_REQ_MAX];
	char trig[16];
	struct pc_err err;
	int n;

	n = chkmsg_request_encode("reload", b, sizeof(b), NULL);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(chkmsg_request_decode(b, (size_t)n, trig, sizeof(trig), &err), 0);
	ck_assert_str_eq(trig, "reload");
	for (int cut = 0; cut < n; cut++)
		ck_assert_int_lt(chkmsg_request_decode(b, (size_t)cut, trig, sizeof(trig), &err),
				 0);
	ck_assert_int_eq(chkmsg_request_encode("Reload", b, sizeof(b), NULL), PC_EINVAL);
	ck_assert_int_eq(chkmsg_request_encode("", b, sizeof(b), NULL), PC_EINVAL);
	ck_assert_int_eq(chkmsg_request_encode("averyveryverylongword", b, sizeof(b), NULL),
			 PC_EINVAL);
	n = chkmsg_request_encode("ports", b, sizeof(b), NULL);
	b[12] = '\n'; /* not a word */
	ck_assert_int_eq(chkmsg_request_decode(b, (size_t)n, trig, sizeof(trig), &err), PC_EPARSE);
	b[12] = 'p';
	b[1] = CHK_RESULT; /* another type */
	ck_assert_int_eq(chkmsg_request_decode(b, (size_t)n, trig, sizeof(trig), &err), PC_EPARSE);
	b[1] = CHK_REQUEST;
	b[0] = CHK_VERSION + 1; /* another version: as malformed as anything */
	ck_assert_int_eq(chkmsg_request_decode(b, (size_t)n, trig, sizeof(trig), &err), PC_EPARSE);
	b[0] = CHK_VERSION;
	b[2] = 0; /* logd's protocol id */
	b[3] = 0;
	ck_assert_int_eq(chkmsg_request_decode(b, (size_t)n, trig, sizeof(trig), &err), PC_EPARSE);
}
END_TEST

static void expect_fill(struct checker_expect *ex)
{
	static const char *const ports[] = {"vmtap0", "vmtap1"};
	static const char canon[] = "table inet portcullis {\n}\n";

	memset(ex, 0, sizeof(*ex));
	pc_strlcpy(ex->table, "portcullis", sizeof(ex->table));
	ex->mark_mask = 0xff000000;
	ex->mark_decided = 0x80000000;
	ex->queue_lo = 100;
	ex->queue_hi = 103;
	ex->listen_ports[0] = 8443;
	ex->listen_ports[1] = 8080;
	ex->n_listen = 2;
	ex->br_nf_call = -1;
	ex->policy_ports = ports;
	ex->n_policy_ports = 2;
	pc_strlcpy(ex->uplinks[0], "eth0", sizeof(ex->uplinks[0]));
	pc_strlcpy(ex->uplinks[1], "mgmt0", sizeof(ex->uplinks[1]));
	ex->n_uplinks = 2;
	ex->canon = canon;
	ex->canon_len = sizeof(canon) - 1;
}

START_TEST(chk_expect_round_trip)
{
	struct checker_expect ex;
	struct chk_expect_in *in = calloc(1, sizeof(*in));
	struct pc_err err;
	uint8_t *b;
	size_t len;

	expect_fill(&ex);
	ck_assert_int_eq(chkmsg_expect_encode(&ex, &b, &len, NULL), 0);
	ck_assert_int_eq(chkmsg_expect_decode(b, len, in, &err), 0);
	ck_assert_str_eq(in->ex.table, "portcullis");
	ck_assert_uint_eq(in->ex.mark_mask, 0xff000000);
	ck_assert_uint_eq(in->ex.mark_decided, 0x80000000);
	ck_assert_int_eq(in->ex.queue_lo, 100);
	ck_assert_int_eq(in->ex.queue_hi, 103);
	ck_assert_uint_eq(in->ex.n_listen, 2);
	ck_assert_int_eq(in->ex.listen_ports[1], 8080);
	ck_assert_int_eq(in->ex.br_nf_call, -1);
	ck_assert_uint_eq(in->ex.n_policy_ports, 2);
	ck_assert_str_eq(in->ex.policy_ports[1], "vmtap1");
	ck_assert_uint_eq(in->ex.n_uplinks, 2);
	ck_assert_str_eq(in->ex.uplinks[1], "mgmt0");
	ck_assert_str_eq(in->ex.canon, ex.canon); /* NUL-terminated for the checker */
	ck_assert_uint_eq(in->ex.canon_len, ex.canon_len);
	chkmsg_expect_free(in);
	free(b);
	/* no canon and no ports */
	ex.canon = NULL;
	ex.n_policy_ports = 0;
	ex.br_nf_call = 1;
	ck_assert_int_eq(chkmsg_expect_encode(&ex, &b, &len, NULL), 0);
	ck_assert_int_eq(chkmsg_expect_decode(b, len, in, &err), 0);
	ck_assert_ptr_null(in->ex.canon);
	ck_assert_int_eq(in->ex.br_nf_call, 1);
	chkmsg_expect_free(in);
	free(b);
	/* out of the channel's bounds: refused at the engine already */
	ex.n_listen = 5;
	ck_assert_int_eq(chkmsg_expect_encode(&ex, &b, &len, NULL), PC_EINVAL);
	ex.n_listen = 1;
	ex.br_nf_call = 2;
	ck_assert_int_eq(chkmsg_expect_encode(&ex, &b, &len, NULL), PC_EINVAL);
	free(in);
}
END_TEST

/* The expectation's layout in a test's own words, so each field can be
 * broken on its own: table "pc", masks, queues, n_listen, brnf, ports. */
/* the uplinks expect_raw writes (a test changes them for the malformed ones) */
static uint8_t raw_n_up = 1;
static const char *raw_up = "up0";

static size_t expect_raw(uint8_t *b, size_t cap, uint8_t n_listen, uint8_t brnf, uint16_t n_ports,
			 const char *port, const char *canon, size_t canon_len)
{
	struct pc_msg_w w;

	pc_msg_w_init(&w, b, cap);
	pc_msg_put_str(&w, "pc", 2);
	pc_msg_put_u32(&w, 0xff);
	pc_msg_put_u32(&w, 0x80);
	pc_msg_put_u16(&w, 1);
	pc_msg_put_u16(&w, 2);
	pc_msg_put_u8(&w, n_listen);
	for (uint8_t i = 0; i < n_listen; i++)
		pc_msg_put_u16(&w, 80);
	pc_msg_put_u8(&w, brnf);
	pc_msg_put_u16(&w, n_ports);
	for (uint16_t i = 0; i < n_ports; i++)
		pc_msg_put_str(&w, port, strlen(port));
	pc_msg_put_u8(&w, raw_n_up);
	for (uint8_t i = 0; i < raw_n_up; i++)
		pc_msg_put_str(&w, raw_up, strlen(raw_up));
	pc_msg_put_str(&w, canon, canon_len);
	return (size_t)pc_msg_finish(&w, CHK_PROTO, CHK_VERSION, CHK_EXPECT, cap);
}

START_TEST(chk_expect_refuses_malformed)
{
	static uint8_t b[1 << 17]; /* room for CHK_EXPECT_PORTS + 1 port names */
	struct chk_expect_in *in = calloc(1, sizeof(*in));
	struct checker_expect ex;
	struct pc_err err;
	uint8_t *e;
	size_t len;

	ck_assert_int_eq(chkmsg_expect_decode(
			     b, expect_raw(b, sizeof(b), 4, 0xff, 64, "vmtap0", "x", 1), in, &err),
			 0);
	chkmsg_expect_free(in);
	/* too many listeners or ports, a bridge-nf value not 0/1/either */
	ck_assert_int_eq(
	    chkmsg_expect_decode(b, expect_raw(b, sizeof(b), 5, 0, 0, "", "", 0), in, &err),
	    PC_EPARSE);
	ck_assert_int_eq(
	    chkmsg_expect_decode(b, expect_raw(b, sizeof(b), 0, 2, 0, "", "", 0), in, &err),
	    PC_EPARSE);
	ck_assert_int_eq(
	    chkmsg_expect_decode(
		b, expect_raw(b, sizeof(b), 0, 0, CHK_EXPECT_PORTS + 1, "vmtap0", "", 0), in, &err),
	    PC_EPARSE);
	/* an empty port name, one longer than an interface name can be */
	ck_assert_int_eq(
	    chkmsg_expect_decode(b, expect_raw(b, sizeof(b), 0, 0, 1, "", "", 0), in, &err),
	    PC_EPARSE);
	ck_assert_int_eq(
	    chkmsg_expect_decode(b, expect_raw(b, sizeof(b), 0, 0, 1, "sixteen-letters!", "", 0),
				 in, &err),
	    PC_EPARSE);
	/* more uplinks than a configuration may have, an empty uplink name */
	raw_n_up = RULES_MAX_UPLINKS + 1;
	ck_assert_int_eq(
	    chkmsg_expect_decode(b, expect_raw(b, sizeof(b), 0, 0, 0, "", "", 0), in, &err),
	    PC_EPARSE);
	raw_n_up = 1;
	raw_up = "";
	ck_assert_int_eq(
	    chkmsg_expect_decode(b, expect_raw(b, sizeof(b), 0, 0, 0, "", "", 0), in, &err),
	    PC_EPARSE);
	raw_up = "up0";
	/* a canon holding a NUL (the checker reads it as a C string) */
	ck_assert_int_eq(
	    chkmsg_expect_decode(b, expect_raw(b, sizeof(b), 0, 0, 0, "", "a\0b", 3), in, &err),
	    PC_EPARSE);
	/* every truncation of a real one, with its header saying so */
	expect_fill(&ex);
	ck_assert_int_eq(chkmsg_expect_encode(&ex, &e, &len, NULL), 0);
	for (size_t cut = PC_MSG_HDR_LEN; cut < len; cut++) {
		pc_msg_put32(e + 4, (uint32_t)cut);
		ck_assert_int_eq(chkmsg_expect_decode(e, cut, in, &err), PC_EPARSE);
	}
	/* queues the wrong way round */
	pc_msg_put32(e + 4, (uint32_t)len);
	pc_msg_put16(e + 8 + 4 + 10 + 8, 200);
	ck_assert_int_eq(chkmsg_expect_decode(e, len, in, &err), PC_EPARSE);
	free(e);
	free(in);
}
END_TEST

START_TEST(chk_result_round_trip)
{
	struct checker_finding f[3] = {
	    {.kind = CHECKER_EXIT, .text = "second exit: a route\nvia eth1"},
	    {.kind = CHECKER_DOUBT, .text = "unproven: a tc filter"},
	    {.kind = CHECKER_EXIT, .text = NULL},
	};
	struct checker_result *res = calloc(1, sizeof(*res));
	uint8_t *b = malloc(CHK_RESULT_MAX), small[80];
	struct chk_result d;
	struct pc_err err;
	int n;

	res->status = CHECKER_EXIT_FOUND;
	res->time_ms = 1764424933123ULL;
	res->findings = f;
	res->n_findings = 3;
	n = chkmsg_result_encode(res, b, CHK_RESULT_MAX, NULL);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(chkmsg_result_decode(b, (size_t)n, &d, &err), 0);
	ck_assert_int_eq(d.type, CHK_RESULT);
	ck_assert_int_eq(d.status, CHECKER_EXIT_FOUND);
	ck_assert(d.time_ms == 1764424933123ULL);
	ck_assert_uint_eq(d.findings, 3);
	ck_assert_uint_eq(d.shown, 3);
	ck_assert_str_eq(d.texts, "second exit: a route via eth1"); /* one line in the journal */
	ck_assert_str_eq(d.texts + strlen(d.texts) + 1, "unproven: a tc filter");
	chkmsg_result_free(&d);
	/* findings that do not fit are counted, not sent */
	n = chkmsg_result_encode(res, small, sizeof(small), NULL);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(chkmsg_result_decode(small, (size_t)n, &d, &err), 0);
	ck_assert_uint_eq(d.findings, 3);
	ck_assert_uint_eq(d.shown, 1);
	chkmsg_result_free(&d);
	/* proven */
	res->status = CHECKER_PROVEN;
	res->n_findings = 0;
	n = chkmsg_result_encode(res, b, CHK_RESULT_MAX, NULL);
	ck_assert_int_eq(chkmsg_result_decode(b, (size_t)n, &d, &err), 0);
	ck_assert_int_eq(d.status, CHECKER_PROVEN);
	ck_assert_uint_eq(d.shown, 0);
	chkmsg_result_free(&d);
	/* could not run */
	n = chkmsg_error_encode("reading nftables: permission denied", b, CHK_RESULT_MAX, NULL);
	ck_assert_int_eq(chkmsg_result_decode(b, (size_t)n, &d, &err), 0);
	ck_assert_int_eq(d.type, CHK_ERROR);
	ck_assert_str_eq(d.message, "reading nftables: permission denied");
	chkmsg_result_free(&d);
	free(res);
	free(b);
}
END_TEST

START_TEST(chk_result_refuses_malformed)
{
	struct checker_finding f = {.kind = CHECKER_EXIT, .text = "second exit: x"};
	struct checker_result res = {.status = CHECKER_EXIT_FOUND, .findings = &f, .n_findings = 1};
	uint8_t b[256];
	struct chk_result d;
	struct pc_err err;
	int n = chkmsg_result_encode(&res, b, sizeof(b), NULL);

	ck_assert_int_gt(n, 0);
	for (int cut = 0; cut < n; cut++) {
		if (cut >= PC_MSG_HDR_LEN)
			pc_msg_put32(b + 4, (uint32_t)cut);
		ck_assert_int_eq(chkmsg_result_decode(b, (size_t)cut, &d, &err), PC_EPARSE);
	}
	pc_msg_put32(b + 4, (uint32_t)n);
	/* a status that is not a checker's */
	b[8] = 3;
	ck_assert_int_eq(chkmsg_result_decode(b, (size_t)n, &d, &err), PC_EPARSE);
	b[8] = CHECKER_EXIT_FOUND;
	/* more shown than found */
	pc_msg_put32(b + 8 + 1 + 8, 0);
	ck_assert_int_eq(chkmsg_result_decode(b, (size_t)n, &d, &err), PC_EPARSE);
	pc_msg_put32(b + 8 + 1 + 8, 1);
	/* a finding kind that is neither exit nor doubt */
	b[8 + 1 + 8 + 4 + 4] = 0;
	ck_assert_int_eq(chkmsg_result_decode(b, (size_t)n, &d, &err), PC_EPARSE);
	b[8 + 1 + 8 + 4 + 4] = CHECKER_EXIT;
	/* its text's length past the end */
	pc_msg_put32(b + 8 + 1 + 8 + 4 + 4 + 1, 15);
	ck_assert_int_eq(chkmsg_result_decode(b, (size_t)n, &d, &err), PC_EPARSE);
	pc_msg_put32(b + 8 + 1 + 8 + 4 + 4 + 1, 14);
	ck_assert_int_eq(chkmsg_result_decode(b, (size_t)n, &d, &err), 0);
	chkmsg_result_free(&d);
	/* the request and the expectation are not results */
	for (unsigned t = 0; t < 256; t++) {
		if (t == CHK_RESULT || t == CHK_ERROR)
			continue;
		b[1] = (uint8_t)t;
		ck_assert_int_eq(chkmsg_result_decode(b, (size_t)n, &d, &err), PC_EPARSE);
	}
	b[1] = CHK_RESULT;
	b[0] = CHK_VERSION + 1;
	ck_assert_int_eq(chkmsg_result_decode(b, (size_t)n, &d, &err), PC_EPARSE);
}
END_TEST

static Suite *msg_suite(void)
{
	Suite *s = suite_create("msg");
	TCase *t = tcase_create("framing");

	PC_UNIT_TESTS(t, framing_round_trip, framing_refuses_malformed);
	suite_add_tcase(s, t);
	t = tcase_create("engine.sock");
	PC_UNIT_TESTS(t, eng_requests, eng_replies_round_trip, eng_replies_refuse_malformed,
		      eng_call_meets_other_versions);
	suite_add_tcase(s, t);
	t = tcase_create("check channel");
	PC_UNIT_TESTS(t, chk_request, chk_expect_round_trip, chk_expect_refuses_malformed,
		      chk_result_round_trip, chk_result_refuses_malformed);
	suite_add_tcase(s, t);
	return s;
}

PC_UNIT_MAIN(msg_suite)
