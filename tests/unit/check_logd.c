/* Unit tests for logd/ (the core's own: check_tlog_core.c): the record's
 * JSON line, the wire form's round trip and its refusals, and the client/daemon
 * framing over a real socket with a real writer. */
#include "logd/logd_int.h"
#include "tests/unit/unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static struct merkle_hasher *H;

static void setup(void)
{
	ck_assert_int_eq(merkle_hasher_new(&H, NULL), 0);
}

static void teardown(void)
{
	merkle_hasher_free(H);
	H = NULL;
}

static void rec_fill(struct logrec *r)
{
	memset(r, 0, sizeof(*r));
	r->action = LOGREC_CONNECT;
	r->verdict = LOGREC_REFUSED;
	r->sandbox = "agent-1";
	r->policy = "sha256:4be1";
	r->reason = "not on the allow list";
	r->src.addr.family = AF_INET;
	inet_pton(AF_INET, "10.203.0.11", r->src.addr.a);
	r->src.port = 40001;
	r->dst.addr.family = AF_INET6;
	inet_pton(AF_INET6, "2001:db8::12", r->dst.addr.a);
	r->dst.port = 443;
	r->transport = IPPROTO_TCP;
	r->domain = "paste.example";
	r->message = "quote \" backslash \\ newline \n tab \t bell \a é";
}

START_TEST(record_json_uses_ecs_names)
{
	struct logrec r;
	uint8_t prev[32] = {0};
	char buf[LOGREC_JSON_MAX], human[512];
	int n;

	rec_fill(&r);
	n = logrec_json_format(&r, 4128, 1764424933123ULL, prev, NULL, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_msg(strstr(buf, "{\"event.sequence\":4128,\"@timestamp\":\"2025-11-29T14:02:13."
				  "123Z\"") == buf,
		      "%s", buf);
	ck_assert(strstr(buf, "\"event.type\":[\"connection\",\"denied\"]"));
	ck_assert(strstr(buf, "\"event.category\":[\"network\"]"));
	ck_assert(strstr(
	    buf, "\"event.action\":\"connect\",\"event.outcome\":\"failure\","
		 "\"event.reason\":\"not on the allow list\",\"event.code\":\"not_allowed\""));
	ck_assert(strstr(buf, "\"destination.ip\":\"2001:db8::12\",\"destination.port\":443"));
	ck_assert(strstr(buf, "\"network.transport\":\"tcp\""));
	ck_assert(strstr(buf, "quote \\\" backslash \\\\ newline \\n tab \\t bell \\u0007 é"));
	ck_assert(strstr(buf,
			 ",\"portcullis.prev\":"
			 "\"0000000000000000000000000000000000000000000000000000000000000000\"}"));
	ck_assert_int_eq(logjson_each(buf, (size_t)n, NULL, NULL), 0);
	ck_assert_int_gt(logrec_human(buf, (size_t)n, human, sizeof(human)), 0);
	ck_assert_str_eq(human, "#4128 2025-11-29 14:02:13Z agent-1 refused CONNECT "
				"paste.example:443 (not on the allow list)");
	/* a learned answer: no verdict -> no outcome, addresses as an array */
	memset(&r, 0, sizeof(r));
	r.action = LOGREC_DNS_LEARN;
	r.dns_name = "api.github.test";
	r.dns_type = 28;
	r.dns_answers = "2001:db8::10,203.0.113.10";
	n = logrec_json_format(&r, 7, 0, prev, NULL, buf, sizeof(buf));
	buf[n] = '\0';
	ck_assert(!strstr(buf, "event.outcome"));
	ck_assert(strstr(buf, "\"dns.question.type\":\"AAAA\""));
	ck_assert(strstr(buf, "\"dns.resolved_ip\":[\"2001:db8::10\",\"203.0.113.10\"]"));
	ck_assert(strstr(buf, "\"dns.response_code\":\"NOERROR\""));
	ck_assert_int_lt(logrec_json_format(&r, 7, 0, prev, NULL, buf, 40), 0);
}
END_TEST

START_TEST(wire_round_trip_is_canonical)
{
	struct logrec r;
	struct logrec_decoded d;
	uint8_t a[LOGWIRE_MAX], b[LOGWIRE_MAX];
	int na, nb;

	rec_fill(&r);
	r.dns_type = 1;
	r.http_status = 403;
	r.secrets = "GITHUB_TOKEN";
	na = logrec_encode(&r, a, sizeof(a), NULL);
	ck_assert_int_gt(na, LOGWIRE_HDR_LEN);
	ck_assert_int_eq(a[0], LOGWIRE_VERSION);
	ck_assert_int_eq(logrec_decode(a, (size_t)na, &d, NULL), 0);
	ck_assert_str_eq(d.rec.sandbox, "agent-1");
	ck_assert_str_eq(d.rec.message, r.message);
	ck_assert_int_eq(d.rec.dst.port, 443);
	ck_assert(pc_addr_eq(&d.rec.dst.addr, &r.dst.addr));
	ck_assert_int_eq(d.rec.http_status, 403);
	ck_assert_ptr_null(d.rec.rule);
	nb = logrec_encode(&d.rec, b, sizeof(b), NULL);
	ck_assert_int_eq(na, nb);
	ck_assert_mem_eq(a, b, (size_t)na);
	logrec_decoded_free(&d);
	/* a pledge's id and a redeem's, all 64 bits of them; not both */
	for (int k = 0; k < 2; k++) {
		rec_fill(&r);
		*(k ? &r.redeems : &r.pledge) = 0x8000000100000002ULL;
		na = logrec_encode(&r, a, sizeof(a), NULL);
		ck_assert_int_gt(na, 0);
		ck_assert_int_eq(logrec_decode(a, (size_t)na, &d, NULL), 0);
		ck_assert_uint_eq(k ? d.rec.redeems : d.rec.pledge, 0x8000000100000002ULL);
		ck_assert_uint_eq(k ? d.rec.pledge : d.rec.redeems, 0);
		nb = logrec_encode(&d.rec, b, sizeof(b), NULL);
		ck_assert_int_eq(na, nb);
		ck_assert_mem_eq(a, b, (size_t)na);
		logrec_decoded_free(&d);
	}
	r.pledge = 1;
	ck_assert_int_eq(logrec_encode(&r, a, sizeof(a), NULL), PC_EINVAL);
	/* ... nor on the wire: a pledge's field (28), then a redeem's (29);
	 * and no id is zero (absent is written by leaving it out) */
	for (int k = 0; k < 2; k++) {
		static const uint8_t redeems[] = {29, 0, 8, 0, 0, 0, 0, 0, 0, 0, 2};
		static const uint8_t zero[] = {28, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0};

		rec_fill(&r);
		r.message = NULL; /* the message field (21) ends the record */
		r.pledge = k ? 0 : 1;
		na = logrec_encode(&r, a, sizeof(a), NULL);
		ck_assert_int_gt(na, 0);
		memcpy(a + na, k ? zero : redeems, sizeof(redeems));
		na += (int)sizeof(redeems);
		pc_msg_put32(a + 4, (uint32_t)na);
		ck_assert_int_eq(logrec_decode(a, (size_t)na, &d, NULL), PC_EPARSE);
	}
}
END_TEST

/* The wire bytes themselves, written out by hand from docs/logd.md: the
 * framing is shared with the engine's protocols (common/msg.c), and a change
 * there must not move a single byte of what logd's clients send. */
START_TEST(wire_golden_bytes)
{
	static const uint8_t rec_bytes[] = {
	    0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x70,	       /* v1 RECORD 112 */
	    0x01, 0x00, 0x01, 0x01, 0x02, 0x00, 0x01, 0x02,	       /* action, verdict */
	    0x03, 0x00, 0x07, 'a',  'g',  'e',	'n',  't',  '-',  '1', /* sandbox */
	    0x04, 0x00, 0x0b, 's',  'h',  'a',	'2',  '5',  '6',  ':',	'4',  'b',
	    'e',  '1',	0x05, 0x00, 0x02, 'n',	'o',				    /* reason */
	    0x07, 0x00, 0x04, 0x0a, 0xcb, 0x00, 0x0b, 0x08, 0x00, 0x02, 0x9c, 0x41, /* src */
	    0x09, 0x00, 0x10, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00,
	    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12, 0x0a, 0x00, 0x02, 0x01, 0xbb, /* dst */
	    0x0b, 0x00, 0x01, 0x06,						    /* transport */
	    0x0c, 0x00, 0x09, 'p',  '.',  'e',	'x',  'a',  'm',  'p',	'l',  'e',  /* domain */
	    0x0e, 0x00, 0x02, 0x00, 0x1c, 0x13, 0x00, 0x02, 0x01, 0x93, /* dns type, status */
	    0x15, 0x00, 0x02, 0xc3, 0xa9,				/* message */
	};
	static const uint8_t ack_bytes[] = {0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00,
					    0x14, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00,
					    0x01, 0x00, 0x00, 0x00, 0x00, 0x05};
	struct logrec r;
	struct logrec_decoded d;
	uint8_t a[LOGWIRE_MAX];
	uint32_t cnt;
	uint64_t seq;
	int n;

	memset(&r, 0, sizeof(r));
	r.action = LOGREC_CONNECT;
	r.verdict = LOGREC_REFUSED;
	r.sandbox = "agent-1";
	r.policy = "sha256:4be1";
	r.reason = "no";
	r.src.addr.family = AF_INET;
	inet_pton(AF_INET, "10.203.0.11", r.src.addr.a);
	r.src.port = 40001;
	r.dst.addr.family = AF_INET6;
	inet_pton(AF_INET6, "2001:db8::12", r.dst.addr.a);
	r.dst.port = 443;
	r.transport = IPPROTO_TCP;
	r.domain = "p.example";
	r.dns_type = 28;
	r.http_status = 403;
	r.message = "\xc3\xa9";
	n = logrec_encode(&r, a, sizeof(a), NULL);
	ck_assert_int_eq(n, (int)sizeof(rec_bytes));
	ck_assert_mem_eq(a, rec_bytes, sizeof(rec_bytes));
	ck_assert_int_eq(logrec_decode(rec_bytes, sizeof(rec_bytes), &d, NULL), 0);
	ck_assert_str_eq(d.rec.domain, "p.example");
	ck_assert_int_eq(d.rec.http_status, 403);
	logrec_decoded_free(&d);
	ck_assert_int_eq(logwire_ack_encode(3, 1ULL << 40 | 5, a, sizeof(a)), LOGWIRE_ACK_LEN);
	ck_assert_mem_eq(a, ack_bytes, sizeof(ack_bytes));
	ck_assert_int_eq(logwire_ack_decode(ack_bytes, sizeof(ack_bytes), &cnt, &seq, NULL), 0);
	ck_assert_uint_eq(cnt, 3);
	ck_assert_uint_eq(seq, 1ULL << 40 | 5);
}
END_TEST

START_TEST(wire_refuses_malformed_messages)
{
	struct logrec r;
	struct logrec_decoded d;
	uint8_t a[LOGWIRE_MAX + 16];
	char big[LOGWIRE_MAX + 1];
	struct pc_err err;
	uint32_t cnt;
	uint64_t seq;
	int n;

	rec_fill(&r);
	n = logrec_encode(&r, a, sizeof(a), NULL);
	for (int cut = 0; cut < n; cut++) /* every truncation */
		ck_assert_int_eq(logrec_decode(a, (size_t)cut, &d, &err), PC_EPARSE);
	a[0] = 2;
	ck_assert_int_eq(logrec_decode(a, (size_t)n, &d, &err), PC_EPARSE);
	a[0] = LOGWIRE_VERSION;
	a[1] = LOGWIRE_ACK;
	ck_assert_int_eq(logrec_decode(a, (size_t)n, &d, &err), PC_EPARSE);
	a[1] = LOGWIRE_RECORD;
	a[n] = 0; /* a trailing byte the header does not count */
	ck_assert_int_eq(logrec_decode(a, (size_t)n + 1, &d, &err), PC_EPARSE);
	{ /* splitting a datagram: the header's count, never past the bytes */
		size_t len = 0;

		ck_assert_int_eq(logwire_next(a, (size_t)n + 1, &len, &err), 0);
		ck_assert_uint_eq(len, (size_t)n);
		ck_assert_int_eq(logwire_next(a, (size_t)n - 1, &len, &err), PC_EPARSE);
		ck_assert_int_eq(logwire_next(a, LOGWIRE_HDR_LEN - 1, &len, &err), PC_EPARSE);
		a[4] = a[5] = a[6] = 0;
		a[7] = LOGWIRE_HDR_LEN - 1; /* says less than its own header */
		ck_assert_int_eq(logwire_next(a, (size_t)n, &len, &err), PC_EPARSE);
		n = logrec_encode(&r, a, sizeof(a), NULL);
	}
	/* invalid UTF-8 is refused at both ends */
	r.sandbox = "bad\xff";
	ck_assert_int_eq(logrec_encode(&r, a, sizeof(a), &err), PC_EINVAL);
	r.sandbox = "overlong\xc0\xaf";
	ck_assert_int_eq(logrec_encode(&r, a, sizeof(a), &err), PC_EINVAL);
	/* too big for one message */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	rec_fill(&r);
	r.message = big;
	ck_assert_int_eq(logrec_encode(&r, a, sizeof(a), &err), PC_EINVAL);
	/* a port without an address, an undefined action */
	rec_fill(&r);
	r.src.addr.family = 0;
	ck_assert_int_eq(logrec_encode(&r, a, sizeof(a), &err), PC_EINVAL);
	rec_fill(&r);
	r.action = LOGREC_ACTION_MAX;
	ck_assert_int_eq(logrec_encode(&r, a, sizeof(a), &err), PC_EINVAL);
	/* acknowledgements */
	ck_assert_int_eq(logwire_ack_encode(3, 1ULL << 40, a, sizeof(a)), LOGWIRE_ACK_LEN);
	ck_assert_int_eq(logwire_ack_decode(a, LOGWIRE_ACK_LEN, &cnt, &seq, NULL), 0);
	ck_assert_uint_eq(cnt, 3);
	ck_assert_uint_eq(seq, 1ULL << 40);
	ck_assert_int_eq(logwire_ack_decode(a, LOGWIRE_ACK_LEN - 1, &cnt, &seq, NULL), PC_EPARSE);
	ck_assert_int_eq(logwire_ack_encode(0, 1, a, sizeof(a)), LOGWIRE_ACK_LEN);
	ck_assert_int_eq(logwire_ack_decode(a, LOGWIRE_ACK_LEN, &cnt, &seq, NULL), PC_EPARSE);
}
END_TEST

/* ---- a log file in a temporary directory, signed by a fresh key --------- */

struct tmplog {
	char dir[64], file[96]; /* file: dir/log.jsonl */
	struct note_signer *key;
};

static void tmplog_make(struct tmplog *t)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/check_logd.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
	snprintf(t->file, sizeof(t->file), "%s/log.jsonl", t->dir);
	ck_assert_int_eq(note_signer_generate("test/portcullis-log", &t->key, NULL), 0);
}

static void tmplog_remove(struct tmplog *t)
{
	char cmd[96];

	note_signer_free(t->key);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", t->dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* ---- client and daemon over a real socket ------------------------------- */

struct served {
	struct tmplog log;
	char sock[96];
	struct logw *w;
	int lfd;
	pthread_t th;
	struct logd_stats st;
	int rc;
};

static void *serve_thread(void *arg)
{
	struct served *s = arg;
	struct logd_server_conf sc = {.allowed_uids = {getuid()}, .n_allowed = 1};

	s->rc = logd_serve(s->lfd, s->w, &sc, &s->st, NULL);
	return NULL;
}

static void serve_start(struct served *s)
{
	struct logw_conf wc = {
	    .cp_records = 5, .cp_ms = 100000, .owner = (uid_t)-1, .group = (gid_t)-1};
	sigset_t set;

	memset(s, 0, sizeof(*s));
	tmplog_make(&s->log);
	snprintf(s->sock, sizeof(s->sock), "%s/logd.sock", s->log.dir);
	wc.file = s->log.file;
	ck_assert_int_eq(logw_open(&wc, s->log.key, NULL, &s->w, NULL), 0);
	s->lfd = pc_unix_listen(s->sock, 0600, (uid_t)-1, (gid_t)-1, NULL);
	ck_assert_int_ge(s->lfd, 0);
	/* the server reads SIGTERM from a signalfd: block it everywhere */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	ck_assert_int_eq(pthread_create(&s->th, NULL, serve_thread, s), 0);
}

/* Stop the server; what it acknowledged must be in a file that verifies. */
static void serve_stop(struct served *s)
{
	struct logv *v;
	struct pc_err err;

	kill(getpid(), SIGTERM);
	pthread_join(s->th, NULL);
	ck_assert_int_eq(s->rc, 0);
	ck_assert_int_eq(logw_close(s->w, NULL), 0);
	close(s->lfd);
	ck_assert_int_eq(logv_new(note_signer_verifier(s->log.key), &v, NULL), 0);
	ck_assert_msg(logv_file(v, s->log.file, 0, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(logv_result(v)->records, s->st.records + 1);
	ck_assert_uint_eq(logv_result(v)->unsealed, 0);
	logv_free(v);
	tmplog_remove(&s->log);
}

START_TEST(client_and_daemon_frame_and_acknowledge)
{
	struct served s;
	struct logc *lc;
	struct logrec r;
	struct pc_err err;

	serve_start(&s);
	ck_assert_int_eq(logc_open(s.sock, &lc, NULL), 0);
	rec_fill(&r);
	for (int i = 0; i < 12; i++)
		ck_assert_int_eq(logc_send(lc, &r, &err), 0);
	ck_assert_msg(logc_flush(lc, 5000, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(logc_last_seq(lc), 13); /* seq 1 is the log-segment record */
	ck_assert_int_eq(logc_send_sync(lc, &r, 5000, &err), 0);
	ck_assert_uint_eq(logc_last_seq(lc), 14);
	logc_close(lc);
	serve_stop(&s);
	ck_assert_uint_eq(s.st.records, 13);
	ck_assert_uint_eq(s.st.malformed, 0);
}
END_TEST

START_TEST(client_batches_records_into_datagrams)
{
	enum { N = 300, BAD = 150 };
	const struct logrec *recs[N];
	struct served s;
	struct logc *lc;
	struct logrec r, bad;
	bool sent[N];
	uint8_t one[LOGWIRE_MAX];
	struct pc_err err;

	serve_start(&s);
	ck_assert_int_eq(logc_open(s.sock, &lc, NULL), 0);
	rec_fill(&r);
	rec_fill(&bad);
	bad.reason = "not UTF-8 \xff"; /* does not encode: refused alone */
	for (int i = 0; i < N; i++)
		recs[i] = i == BAD ? &bad : &r;
	/* more than one datagram's worth */
	ck_assert_int_gt(logrec_encode(&r, one, sizeof(one), NULL) * N, LOGWIRE_DGRAM_MAX * 2);
	ck_assert_uint_eq(logc_send_batch(lc, recs, N, sent, &err), N - 1);
	for (int i = 0; i < N; i++)
		ck_assert_msg(sent[i] == (i != BAD), "record %d", i);
	ck_assert_msg(logc_flush(lc, 5000, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(logc_last_seq(lc), N); /* seq 1 is the log-segment record */
	logc_close(lc);
	serve_stop(&s);
	ck_assert_uint_eq(s.st.records, N - 1);
	ck_assert_uint_eq(s.st.malformed, 0);
}
END_TEST

START_TEST(daemon_keeps_what_precedes_a_bad_message_in_a_datagram)
{
	struct served s;
	struct logrec r;
	uint8_t dg[2 * LOGWIRE_MAX];
	char c;
	int n, fd;

	serve_start(&s);
	rec_fill(&r);
	n = logrec_encode(&r, dg, sizeof(dg), NULL);
	ck_assert_int_gt(n, 0);
	memcpy(dg + n, dg, 5); /* a second message cut inside its header */
	fd = pc_unix_connect(s.sock, 0, NULL);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(send(fd, dg, (size_t)n + 5, 0), n + 5);
	ck_assert_int_eq(recv(fd, &c, 1, 0), 0); /* logd ended the session */
	close(fd);
	serve_stop(&s);
	ck_assert_uint_eq(s.st.records, 1);
	ck_assert_uint_eq(s.st.malformed, 1);
}
END_TEST

START_TEST(client_fails_closed_without_logd)
{
	struct logc *lc;
	struct logrec r;
	struct pc_err err;

	rec_fill(&r);
	/* logd absent: open works (lazy), send says no */
	ck_assert_int_eq(logc_open("/nonexistent/logd.sock", &lc, NULL), 0);
	ck_assert_int_lt(logc_send(lc, &r, &err), 0);
	ck_assert_int_eq(logc_flush(lc, 10, &err), 0); /* nothing was handed over */
	logc_close(lc);
}
END_TEST

/* logc_flush waits before it reads (issue 20): with no time left it must
 * still count the acknowledgements already queued, not time out. logd
 * stops after acknowledging (the send left the record in its socket
 * before the SIGTERM, and a round reads clients before signals), so the
 * acknowledgement is queued, then the end of the session. */
START_TEST(client_flush_zero_counts_queued_acks)
{
	struct served s;
	struct logc *lc;
	struct logrec r;
	struct pc_err err;

	uint64_t seq1;

	serve_start(&s);
	ck_assert_int_eq(logc_open(s.sock, &lc, NULL), 0);
	rec_fill(&r);
	/* the first one makes sure logd has accepted the connection */
	ck_assert_int_eq(logc_send(lc, &r, &err), 0);
	ck_assert_msg(logc_flush(lc, 5000, &err) == 0, "%s", err.msg);
	seq1 = logc_last_seq(lc);
	ck_assert_int_eq(logc_send(lc, &r, &err), 0);
	serve_stop(&s);
	ck_assert_uint_eq(s.st.records, 2);
	ck_assert_msg(logc_flush(lc, 0, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(logc_last_seq(lc), seq1 + 1);
	logc_close(lc);
}
END_TEST

START_TEST(client_flush_fails_when_logd_goes_away)
{
	struct served s;
	struct logc *lc;
	struct logrec r;
	struct pc_err err;
	int fds[2];

	/* a peer that reads nothing and never acknowledges */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, fds), 0);
	serve_start(&s);
	ck_assert_int_eq(logc_open(s.sock, &lc, NULL), 0);
	rec_fill(&r);
	ck_assert_int_eq(logc_send(lc, &r, &err), 0);
	ck_assert_int_eq(logc_flush(lc, 5000, &err), 0);
	serve_stop(&s); /* logd is gone; the socket file too */
	/* the old connection is dead: the send (or at the latest the
	 * flush) fails, never reports success */
	if (logc_send(lc, &r, &err) == 0)
		ck_assert_int_lt(logc_flush(lc, 200, &err), 0);
	logc_close(lc);
	close(fds[0]);
	close(fds[1]);
}
END_TEST

/* The control thread sends nothing for long stretches: logc_keepalive
 * notices logd's end without a send, connects again, and counts the
 * connections (a new count: a new session, whose logd holds none of the
 * old one's pledges); without logd it fails and counts nothing. */
START_TEST(client_keepalive_counts_new_sessions)
{
	char dir[] = "/tmp/check_logd_ka.XXXXXX", sock[64], cmd[80];
	struct logc *lc;
	struct pc_err err;
	uint64_t conns = 0;
	int lfd, cfd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/logd.sock", dir);
	lfd = pc_unix_listen(sock, 0600, (uid_t)-1, (gid_t)-1, NULL);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(logc_open(sock, &lc, NULL), 0);
	cfd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(cfd, 0);
	ck_assert_int_eq(logc_keepalive(lc, &conns, &err), 0);
	ck_assert_uint_eq(conns, 1);
	ck_assert_int_eq(logc_keepalive(lc, &conns, &err), 0);
	ck_assert_uint_eq(conns, 1); /* the same session: nothing new */
	close(cfd);		     /* logd ends */
	ck_assert_int_eq(logc_keepalive(lc, &conns, &err), 0);
	ck_assert_uint_eq(conns, 2);
	cfd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(cfd, 0);
	close(cfd);
	close(lfd);
	unlink(sock); /* logd down */
	ck_assert_int_lt(logc_keepalive(lc, &conns, &err), 0);
	logc_close(lc);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(writer_resumes_and_refuses_a_tampered_file)
{
	char cmd[160];
	struct logw_conf wc = {
	    .cp_records = 3, .cp_ms = 100000, .owner = (uid_t)-1, .group = (gid_t)-1};
	struct tmplog t;
	struct logw *w;
	struct logrec r;
	struct pc_err err;
	uint64_t seq;
	FILE *f;

	tmplog_make(&t);
	wc.file = t.file;
	ck_assert_int_eq(logw_open(&wc, t.key, NULL, &w, NULL), 0);
	rec_fill(&r);
	for (int i = 0; i < 7; i++)
		ck_assert_int_eq(logw_append(w, &r, &seq, NULL), 0);
	ck_assert_int_eq(logw_commit(w, NULL), 0);
	ck_assert_uint_eq(seq, 8);
	ck_assert_int_eq(logw_close(w, NULL), 0);
	/* resume: seq continues */
	ck_assert_int_eq(logw_open(&wc, t.key, NULL, &w, &err), 0);
	ck_assert_uint_eq(logw_next_seq(w), 9);
	ck_assert_int_eq(logw_close(w, NULL), 0);
	/* a torn last line (logd killed mid-write) is cut, not refused */
	f = fopen(t.file, "a");
	fputs("{\"seq\":9,\"@times", f);
	fclose(f);
	ck_assert_int_eq(logw_open(&wc, t.key, NULL, &w, &err), 0);
	ck_assert(strstr(logw_notice(w), "incomplete line"));
	ck_assert_int_eq(logw_close(w, NULL), 0);
	/* an edited record: refused, naming the line */
	snprintf(cmd, sizeof(cmd), "sed -i '3s/agent-1/agent-2/' %s", t.file);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(logw_open(&wc, t.key, NULL, &w, &err), PC_ETAMPER);
	ck_assert_msg(strstr(err.msg, "line 3: record seq 2 was edited"), "%s", err.msg);
	/* --new-segment: set aside, start again, seq continues */
	ck_assert_int_eq(logw_open(&wc, t.key, "operator: test", &w, &err), 0);
	ck_assert(strstr(logw_notice(w), "moved"));
	ck_assert_uint_eq(logw_next_seq(w), 10); /* 9: its log-segment record */
	ck_assert_int_eq(logw_close(w, NULL), 0);
	tmplog_remove(&t);
}
END_TEST

/* Issue 32: a line appended with a seq near 2^64 was set aside, and seq
 * went on after it, wrapping to 0 120 records later. A set-aside line
 * moves seq on by one (what a genuine line of the tail needs), never to
 * what it claims; and the verifier refuses a seq past LOGSEQ_MAX. */
START_TEST(writer_seq_is_not_taken_from_a_forged_line)
{
	struct logw_conf wc = {
	    .cp_records = 3, .cp_ms = 100000, .owner = (uid_t)-1, .group = (gid_t)-1};
	char line[256];
	struct tmplog t;
	struct logw *w;
	struct logrec r;
	struct logv *v;
	struct pc_err err;
	uint64_t seq;
	FILE *f;
	int n;

	tmplog_make(&t);
	wc.file = t.file;
	ck_assert_int_eq(logw_open(&wc, t.key, NULL, &w, NULL), 0);
	rec_fill(&r);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(logw_append(w, &r, &seq, NULL), 0);
	ck_assert_int_eq(logw_close(w, NULL), 0);
	ck_assert_uint_eq(seq, 6);
	f = fopen(t.file, "a");
	fputs("{\"event.sequence\":18446744073709551509,\"@timestamp\":\"x\"}\n", f);
	fclose(f);
	ck_assert_int_eq(logw_open(&wc, t.key, NULL, &w, &err), 0);
	ck_assert(strstr(logw_notice(w), "set aside"));
	/* 7: the record saying so (a seq past LOGSEQ_MAX counts for nothing) */
	ck_assert_uint_eq(logw_next_seq(w), 8);
	ck_assert_int_eq(logw_close(w, NULL), 0);
	/* a claim in range moves seq by one line's worth, not to the claim */
	f = fopen(t.file, "a");
	fputs("{\"event.sequence\":4611686018427387904,\"@timestamp\":\"x\"}\n", f);
	fclose(f);
	ck_assert_int_eq(logw_open(&wc, t.key, NULL, &w, &err), 0);
	/* 8: the line set aside; 9: the record saying so */
	ck_assert_uint_eq(logw_next_seq(w), 10);
	ck_assert_int_eq(logw_close(w, NULL), 0);
	/* the verifier: a seq past LOGSEQ_MAX is out of range, whatever the
	 * hash (the range is checked before the chain) */
	ck_assert_int_eq(logv_new(note_signer_verifier(t.key), &v, NULL), 0);
	n = snprintf(line, sizeof(line), "{\"event.sequence\":%llu,\"portcullis.prev\":\"%064d\"}",
		     (unsigned long long)(UINT64_C(1) << 63) + 1, 0);
	ck_assert_int_gt(n, 0);
	{
		uint8_t leaf[MERKLE_HASH];
		char hex[65], full[300];

		ck_assert_int_eq(merkle_leaf(H, line, (size_t)n, NULL, 0, leaf), 0);
		merkle_hex(leaf, hex);
		hex[64] = '\0';
		snprintf(full, sizeof(full), "%.*s,\"event.hash\":\"%s\"}\n", n - 1, line, hex);
		ck_assert_int_eq(logv_buffer(v, full, strlen(full), 0, &err), PC_ETAMPER);
		ck_assert_msg(strstr(err.msg, "out of range"), "%s", err.msg);
	}
	logv_free(v);
	tmplog_remove(&t);
}
END_TEST

/* A rotation's own sealing commit must not start a second rotation (which
 * would set aside a file holding nothing but its segment record). */
START_TEST(writer_rotation_does_not_nest)
{
	char cmd[160], path[128];
	struct logw_conf wc = {.cp_records = 1000,
			       .cp_ms = 100000,
			       .rotate_bytes = 3000,
			       .owner = (uid_t)-1,
			       .group = (gid_t)-1};
	struct tmplog t;
	struct logw *w;
	struct logrec r;
	FILE *ls;
	int files = 0;

	tmplog_make(&t);
	wc.file = t.file;
	ck_assert_int_eq(logw_open(&wc, t.key, NULL, &w, NULL), 0);
	rec_fill(&r);
	for (int b = 0; b < 10; b++) {
		for (int i = 0; i < 7; i++)
			ck_assert_int_eq(logw_append(w, &r, NULL, NULL), 0);
		ck_assert_int_eq(logw_commit(w, NULL), 0);
	}
	ck_assert_int_eq(logw_close(w, NULL), 0);
	snprintf(cmd, sizeof(cmd), "ls %s/log.jsonl.*-*", t.dir);
	ls = popen(cmd, "r");
	while (fgets(path, sizeof(path), ls)) {
		struct logv *v;
		struct pc_err err;

		path[strcspn(path, "\n")] = '\0';
		ck_assert_int_eq(logv_new(note_signer_verifier(t.key), &v, NULL), 0);
		ck_assert_msg(logv_file(v, path, 0, &err) == 0, "%s: %s", path, err.msg);
		ck_assert_msg(logv_result(v)->records > 1, "%s holds only its segment record",
			      path);
		logv_free(v);
		files++;
	}
	pclose(ls);
	ck_assert_int_ge(files, 3);
	tmplog_remove(&t);
}
END_TEST

/* Files over 8 MB are hashed on several threads: same verdicts, same
 * line numbers as the sequential path. */
START_TEST(verifier_large_file_in_parallel)
{
	char cmd[256], want[64];
	struct logw_conf wc = {
	    .cp_records = 1000, .cp_ms = 100000, .owner = (uid_t)-1, .group = (gid_t)-1};
	struct tmplog t;
	struct logw *w;
	struct logrec r;
	struct logv *v;
	struct pc_err err;
	FILE *f;

	tmplog_make(&t);
	wc.file = t.file;
	ck_assert_int_eq(logw_open(&wc, t.key, NULL, &w, NULL), 0);
	rec_fill(&r);
	for (int i = 0; i < 30000; i++) {
		ck_assert_int_eq(logw_append(w, &r, NULL, NULL), 0);
		if (i % 500 == 499)
			ck_assert_int_eq(logw_commit(w, NULL), 0);
	}
	ck_assert_int_eq(logw_close(w, NULL), 0);
	ck_assert_int_eq(logv_new(note_signer_verifier(t.key), &v, NULL), 0);
	ck_assert_msg(logv_file(v, t.file, 0, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(logv_result(v)->records, 30001);
	ck_assert_uint_eq(logv_result(v)->checkpoints, 31);
	logv_free(v);
	/* seq 25000 is on line 25000 + 25 (one checkpoint line per 1000
	 * records, and one after the segment record) */
	snprintf(cmd, sizeof(cmd), "sed -i '25025s/agent-1/agent-2/' %s", t.file);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(logv_new(note_signer_verifier(t.key), &v, NULL), 0);
	ck_assert_int_eq(logv_file(v, t.file, 0, &err), PC_ETAMPER);
	snprintf(want, sizeof(want), "line 25025: record seq 25000 was edited");
	ck_assert_msg(strstr(err.msg, want), "%s", err.msg);
	logv_free(v);
	snprintf(cmd, sizeof(cmd), "sed -i '25025s/agent-2/agent-1/' %s", t.file);
	ck_assert_int_eq(system(cmd), 0);
	f = fopen(t.file, "a");
	fputs("{\"seq\":30002,\"@tim", f);
	fclose(f);
	ck_assert_int_eq(logv_new(note_signer_verifier(t.key), &v, NULL), 0);
	ck_assert_msg(logv_file(v, t.file, LOGV_TORN_OK, &err) == 0, "%s", err.msg);
	ck_assert(logv_result(v)->torn);
	ck_assert_uint_eq(logv_result(v)->torn_bytes, 18);
	ck_assert_uint_eq(logv_result(v)->records, 30001);
	logv_free(v);
	tmplog_remove(&t);
}
END_TEST

static Suite *logd_suite(void)
{
	Suite *s = suite_create("logd");
	TCase *t = tcase_create("core");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 30);
	PC_UNIT_TESTS(
	    t, record_json_uses_ecs_names, wire_round_trip_is_canonical, wire_golden_bytes,
	    wire_refuses_malformed_messages, client_and_daemon_frame_and_acknowledge,
	    client_batches_records_into_datagrams,
	    daemon_keeps_what_precedes_a_bad_message_in_a_datagram,
	    client_fails_closed_without_logd, client_keepalive_counts_new_sessions,
	    client_flush_zero_counts_queued_acks, client_flush_fails_when_logd_goes_away,
	    writer_resumes_and_refuses_a_tampered_file, writer_seq_is_not_taken_from_a_forged_line,
	    writer_rotation_does_not_nest, verifier_large_file_in_parallel);
	suite_add_tcase(s, t);
	return s;
}

PC_UNIT_MAIN(logd_suite)
