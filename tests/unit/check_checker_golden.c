/* Golden bytes of every text portcullis hashes, signs or exports: the
 * policy hash of every rule file and configuration in the tree, the log
 * record's JSON (its bytes are the Merkle leaves), the wire form, the
 * RFC 5424 syslog lines, the canonical nftables text the checker compares
 * and the checker's result and certificate texts.
 * The expected bytes in tests/unit/golden/textout.txt were recorded on the
 * code before the text builders and JSON escapers were merged into
 * common/buf.c and common/json.c: a refactoring of how text is written
 * must not change one byte of it. The syslog lines were re-recorded once,
 * on purpose: display escaping (docs/logd.md) writes a code point that does
 * not print as \u{XXXX} where it wrote ?, and a backslash in MSG doubled;
 * and again (issue 36): a list is one SD-PARAM, its items joined by commas,
 * and a checkpoint's structured data says ecs.version, event.kind "state"
 * and event.action; record[0] (a connect with no verdict) says event.type
 * connection,end (flows that ended with their sandbox); the error for an
 * unquoted alias says to quote a wildcard (issue 36); the certificate's
 * rendering says how to audit the log it was recorded in (issue 35); the
 * nftables text has prerouting's bare-ACK rules of held flows (issue 34);
 * the nftables texts and digests (issue 34): the new-flow limit's rules count
 * what they drop in limsb4/limsb6, one group of rules per distinct limit;
 * and (issue 34, held flows) prerouting's PASS|TLS verdict rule and
 * forward's rules for the server's bare ACKs of flows judged as TLS.
 * PC_GOLDEN_WRITE=FILE writes the current bytes to FILE instead (to record
 * them; review the diff). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker/checker_int.h"
#include "logd/logd_int.h"
#include "nft/nft_int.h"
#include "rules/rules_int.h"
#include "tests/unit/unit.h"

#define GOLDEN "tests/unit/golden/textout.txt"

/* Every rule file and configuration git tracks (git ls-files '*.yaml'). */
static const char *const yaml_files[] = {
    "docs/examples/portcullis.yaml",
    "docs/examples/rules.d/agent-1.yaml",
    "packaging/conf/agent-1.yaml",
    "packaging/conf/portcullis.yaml",
    "tests/fuzz/corpus/config/errors.yaml",
    "tests/fuzz/corpus/config/limits.yaml",
    "tests/fuzz/corpus/config/routable.yaml",
    "tests/fuzz/corpus/config/small.yaml",
    "tests/fuzz/corpus/policy/alias.yaml",
    "tests/fuzz/corpus/policy/design-example.yaml",
    "tests/fuzz/corpus/policy/errors.yaml",
    "tests/fuzz/corpus/policy/limits.yaml",
    "tests/fuzz/corpus/policy/many.yaml",
};

/* Policies written here for what the files above lack: every character a
 * policy string may hold, in the fields the canonical form quotes. */
static const char *const inline_policies[] = {
    "sandbox: q\nmatch: { source: 10.203.0.10/32 }\nallow:\n  - host: api.example.com\n"
    "    ports: [443]\nsecrets:\n  - name: T\n    host: api.example.com\n"
    "    header: X-Key\n    format: 'a \"q\" \\b\\\\ ~!@#$%^&*()_+`-={}|[]:;<>?,./ {secret}'\n",
    "sandbox: a-b_c.d\nmatch: { mac: 02:00:5E:10:00:01 }\nallow:\n"
    "  - cidr: 2001:db8::/32\n    ports: [1-1024, 8080]\n    proto: any\n"
    "  - host: \"*.Example.ORG\"\n    ports: [53]\n    proto: udp\n",
    "sandbox: p\nmatch: { port: vmtap-1, source: [10.0.0.2/32, 10.0.0.1/32] }\nallow: []\n",
};

static FILE *out;

/* One golden line: key, TAB, the bytes with backslash and anything outside
 * printable ASCII written as \xHH, so each value is one line. */
static void emit(const char *key, const void *data, size_t len)
{
	const unsigned char *p = data;

	fprintf(out, "%s\t", key);
	for (size_t i = 0; i < len; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
			fputc(p[i], out);
		else
			fprintf(out, "\\x%02x", p[i]);
	}
	fputc('\n', out);
}

static void emit_str(const char *key, const char *s)
{
	emit(key, s ? s : "(null)", strlen(s ? s : "(null)"));
}

static void emit_int(const char *key, long v)
{
	char b[32];

	snprintf(b, sizeof(b), "%ld", v);
	emit_str(key, b);
}

static void policy_result(const char *key, int rc, struct policy *p, const struct pc_err *err)
{
	char k[300];

	if (rc != 0) {
		snprintf(k, sizeof(k), "%s.error", key);
		emit_str(k, err->msg);
		return;
	}
	snprintf(k, sizeof(k), "%s.hash", key);
	emit_str(k, policy_hash(p));
	snprintf(k, sizeof(k), "%s.canon", key);
	{
		size_t n = 0;
		const char *c = policy_canonical(p, &n);

		emit(k, c, n);
	}
	policy_unref(p);
}

static void policies(void)
{
	char key[300];

	for (size_t i = 0; i < sizeof(yaml_files) / sizeof(yaml_files[0]); i++) {
		struct config cfg;
		struct policy *p = NULL;
		struct pc_err err = {0};
		int rc;

		/* as a rule file on the built-in defaults */
		snprintf(key, sizeof(key), "policy %s", yaml_files[i]);
		rc = policy_load_files(&yaml_files[i], 1, NULL, &p, &err);
		policy_result(key, rc, p, &err);
		/* as a configuration: the example rules on its defaults */
		memset(&err, 0, sizeof(err));
		if (config_load(yaml_files[i], &cfg, &err) == 0) {
			const char *rules = "docs/examples/rules.d/agent-1.yaml";

			p = NULL;
			snprintf(key, sizeof(key), "config %s", yaml_files[i]);
			rc = policy_load_files(&rules, 1, &cfg, &p, &err);
			policy_result(key, rc, p, &err);
		}
	}
	for (size_t i = 0; i < sizeof(inline_policies) / sizeof(inline_policies[0]); i++) {
		struct policy *p = NULL;
		struct pc_err err = {0};
		int rc = policy_load_buffer("inline.yaml", inline_policies[i],
					    strlen(inline_policies[i]), NULL, &p, &err);

		snprintf(key, sizeof(key), "policy inline[%zu]", i);
		policy_result(key, rc, p, &err);
	}
}

/* Records covering every field, every escape and every action. */
static void rec_fill(struct logrec *r, int i)
{
	static const char all_bytes[] = "\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f"
					"\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d"
					"\x1e\x1f !\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~\x7f"
					"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";

	memset(r, 0, sizeof(*r));
	r->action = (enum logrec_action)(1 + i % (LOGREC_ACTION_MAX - 1));
	r->verdict = (enum logrec_verdict)(i % 3);
	r->sandbox = "agent-1";
	r->policy = "sha256:4be1f00d";
	r->reason = i % 2 ? "not on the allow list" : "quote \" backslash \\ ]";
	r->rule = i % 4 ? "agent-1/allow[2]" : NULL;
	if (i % 3 != 2) {
		r->src.addr.family = AF_INET;
		inet_pton(AF_INET, "10.203.0.11", r->src.addr.a);
		r->src.port = (uint16_t)(40001 + i);
		r->dst.addr.family = AF_INET6;
		inet_pton(AF_INET6, "2001:db8::12", r->dst.addr.a);
		r->dst.port = 443;
	}
	r->transport = (uint8_t[]){0, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMPV6, 132, 99}[i % 6];
	r->domain = i % 2 ? "paste.example" : NULL;
	r->dns_name = i % 3 == 1 ? "api.github.test" : NULL;
	r->dns_type = (uint16_t[]){0, 1, 28, 65, 4711}[i % 5];
	r->dns_answers = i % 2 ? "2001:db8::10,,203.0.113.10," : NULL;
	r->sni = i % 4 == 3 ? "sni.example" : NULL;
	r->http_method = i % 5 == 4 ? "POST" : NULL;
	r->http_path = i % 5 == 4 ? "/a\"b\\c\x7f" : NULL;
	r->http_status = i % 5 == 4 ? 403 : 0;
	r->secrets = i % 2 ? "GITHUB_TOKEN,\"odd\\" : NULL;
	r->message = i % 2 ? all_bytes : "plain text";
	/* every sender, and none (the member left out); logd's own for
	 * log-segment records whatever is set */
	r->sender = (enum logrec_sender)(i % LOGREC_SENDER_MAX);
}

/* The shortest buffer fmt accepts (its truncation edge must not move). */
#define MIN_LEN(call)                                                                              \
	({                                                                                         \
		size_t lo_ = 0;                                                                    \
		while (lo_ < 5000) {                                                               \
			size_t len = lo_;                                                          \
			if ((call) >= 0)                                                           \
				break;                                                             \
			lo_++;                                                                     \
		}                                                                                  \
		(long)lo_;                                                                         \
	})

static void records(void)
{
	static const uint8_t prev[32] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3};
	static const uint8_t hash[MERKLE_HASH] = {0x4b, 0xe1, 0xf0, 0x0d, 0xff};

	for (int i = 0; i < 24; i++) {
		struct logrec r;
		char buf[LOGREC_JSON_MAX], key[64];
		uint8_t wire[LOGWIRE_MAX];
		const char *extra = i % 4 == 1 ? ",\"cert\":\"x\"" : NULL;
		uint64_t t = 1764424933123ULL + (uint64_t)i * 999;
		int n;

		rec_fill(&r, i);
		n = logrec_json_format(&r, 4128 + (uint64_t)i * 1000003, t, prev, extra, buf,
				       sizeof(buf));
		snprintf(key, sizeof(key), "record[%d].json", i);
		ck_assert_int_gt(n, 0);
		emit(key, buf, (size_t)n);
		snprintf(key, sizeof(key), "record[%d].json.minlen", i);
		emit_int(key, MIN_LEN(logrec_json_format(&r, 4128 + (uint64_t)i * 1000003, t, prev,
							 extra, buf, len)));
		n = logx_format_record(&r, 4128 + (uint64_t)i, t, hash, "gw1.example", 4242, buf,
				       sizeof(buf));
		snprintf(key, sizeof(key), "record[%d].syslog", i);
		ck_assert_int_gt(n, 0);
		emit(key, buf, (size_t)n);
		snprintf(key, sizeof(key), "record[%d].syslog.minlen", i);
		emit_int(key, MIN_LEN(logx_format_record(&r, 4128 + (uint64_t)i, t, hash,
							 "gw1.example", 4242, buf, len)));
		n = logrec_encode(&r, wire, sizeof(wire), NULL);
		snprintf(key, sizeof(key), "record[%d].wire", i);
		ck_assert_int_gt(n, 0);
		emit(key, wire, (size_t)n);
		snprintf(key, sizeof(key), "record[%d].wire.minlen", i);
		emit_int(key, MIN_LEN(logrec_encode(&r, wire, len, NULL)));
		snprintf(key, sizeof(key), "record[%d].escape", i);
		n = logrec_json_escape(r.message, buf, sizeof(buf));
		ck_assert_int_ge(n, 0);
		emit(key, buf, (size_t)n);
		snprintf(key, sizeof(key), "record[%d].escape.minlen", i);
		emit_int(key, MIN_LEN(logrec_json_escape(r.message, buf, len)));
	}
}

static void checkpoints(void)
{
	struct checkpoint c = {.size = 123456789, .time_ms = 1764424933123ULL};
	char body[512], note[1024], buf[2048];
	int n;

	snprintf(c.origin, sizeof(c.origin), "gw1.example/portcullis-log");
	for (int i = 0; i < MERKLE_HASH; i++)
		c.root[i] = (uint8_t)(i * 7);
	n = checkpoint_body_format(&c, body, sizeof(body));
	ck_assert_int_gt(n, 0);
	/* the signature line is not read by the formatter */
	snprintf(note, sizeof(note), "%s\n\xe2\x80\x94 gw1.example/portcullis-log AAAA\\x\n", body);
	n = logx_format_checkpoint(note, strlen(note), "gw1.example", 4242, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	emit("checkpoint.syslog", buf, (size_t)n);
	{
		size_t nl = strlen(note);

		emit_int("checkpoint.syslog.minlen",
			 MIN_LEN(logx_format_checkpoint(note, nl, "gw1.example", 4242, buf, len)));
	}
}

/* The canonical text of the ruleset the engine installs (what the checker
 * compares with the kernel's) and its digest, for both queue paths. */
static void nft_texts(void)
{
	static const struct nft_port ports[] = {{"pcv1", 4}, {"pcv2", 5}};
	const char *rules = "packaging/conf/agent-1.yaml";
	struct config cfg;
	struct policy *pol = NULL;
	struct pc_err err = {0};

	ck_assert_msg(config_load("packaging/conf/portcullis.yaml", &cfg, &err) == 0, "%s",
		      err.msg);
	ck_assert_msg(policy_load_files(&rules, 1, &cfg, &pol, &err) == 0, "%s", err.msg);
	for (int q = NFT_QUEUE_NATIVE; q <= NFT_QUEUE_COMPAT; q++) {
		struct nft_ruleset_params p = {&cfg, pol, ports, 2, (enum nft_queue_path)q};
		struct nft_ruleset *rs = NULL;
		char *t = NULL, d[80], key[64];
		size_t len = 0;

		ck_assert_msg(nft_ruleset_build(&p, &rs, &err) == 0, "%s", err.msg);
		ck_assert_int_eq(nft_ruleset_text(rs, &t, &len), 0);
		snprintf(key, sizeof(key), "nft.%s.text", nft_queue_path_name(p.qpath));
		emit(key, t, len);
		free(t);
		ck_assert_int_eq(nft_ruleset_digest(rs, d, sizeof(d)), 0);
		snprintf(key, sizeof(key), "nft.%s.digest", nft_queue_path_name(p.qpath));
		emit_str(key, d);
		nft_ruleset_free(rs);
	}
	policy_unref(pol);
}

static void checker_texts(void)
{
	struct checker_result *rp = calloc(1, sizeof(*rp)), r0 = {0};
	char *s;

	ck_assert_ptr_nonnull(rp);
	*rp = r0;
#define r (*rp)

	r.status = CHECKER_UNPROVEN;
	snprintf(r.bridge, sizeof(r.bridge), "br-sbx");
	r.time_ms = 1764424933123ULL;
	snprintf(r.ruleset_digest, sizeof(r.ruleset_digest), "sha256:00aa");
	snprintf(r.table_digest, sizeof(r.table_digest), "sha256:11bb");
	snprintf(r.snapshot_digest, sizeof(r.snapshot_digest), "sha256:22cc");
	ck_find(&r, CK_OB_TCXDP, CHECKER_EXIT, "tc filter on port vm\"tap3\\ ingress: %s",
		"redirect \x01\x1f\x7f \xc3\xa9 <b>&amp;</b> `*_[]|#");
	ck_find(&r, CK_OB_MODEL, CHECKER_DOUBT, "comment \"a\nb\tc\rd\"");
	ck_evid(&r, CK_OB_TABLE, "table inet portcullis: %d rules", 42);
	ck_evid(&r, CK_OB_PATHS, "path: %s", "br-sbx -> \"queue 0\" \\ done");
	s = checker_result_json(&r);
	ck_assert_ptr_nonnull(s);
	emit_str("checker.json", s);
	free(s);
	s = checker_result_text(&r, true);
	ck_assert_ptr_nonnull(s);
	emit_str("checker.text.verbose", s);
	free(s);
	s = checker_result_text(&r, false);
	ck_assert_ptr_nonnull(s);
	emit_str("checker.text", s);
	free(s);
	r.status = CHECKER_PROVEN;
	s = checker_result_text(&r, false);
	emit_str("checker.text.proven", s);
	free(s);
#undef r
	checker_result_free(rp);
}

static void certificate(void)
{
	static const char stmt[] =
	    "{\"_type\":\"https://in-toto.io/Statement/v1\",\"subject\":[{\"name\":\"policy\","
	    "\"digest\":{\"sha256\":\"4be1\"}}],\"predicateType\":"
	    "\"https://portcullis.dev/containment/v1\",\"predicate\":{\"sandbox\":\"agent<1>\","
	    "\"bridge\":\"br-sbx\",\"issued\":\"2025-11-29T14:02:13.123Z\",\"policy\":"
	    "\"sha256:4be1\",\"spec\":\"sha256:abcd\",\"result\":\"proven\",\"our_tables\":"
	    "\"sha256:11bb\",\"log_seq\":77,\"approved_destinations\":[{\"host\":\"*.ex_am*ple\","
	    "\"ports\":\"443,8000-8080\",\"proto\":\"tcp\",\"rule\":\"agent-1/allow[0]\"}],"
	    "\"secret_bindings\":[{\"name\":\"T&K\",\"host\":\"api.example\",\"port\":443,"
	    "\"header\":\"Authorization\"}],\"obligations\":[{\"id\":\"table-identical\","
	    "\"title\":\"t\",\"result\":\"proven\",\"evidence\":[\"a \\\"b\\\" `c` \\t "
	    "\\u0001\"]}],"
	    "\"assumptions\":[\"x | y\"],\"not_covered\":[\"# z\"]}}";
	uint8_t seed[32] = {7}, pk[32], sk[64];
	struct jv *v = jv_parse(stmt, strlen(stmt));
	char *s, *env = NULL;

	ck_assert_ptr_nonnull(v);
	s = cert_render(v, false);
	ck_assert_ptr_nonnull(s);
	emit_str("cert.markdown", s);
	free(s);
	s = cert_render(v, true);
	ck_assert_ptr_nonnull(s);
	emit_str("cert.html", s);
	free(s);
	jv_free(v);
	ck_assert_int_ge(sodium_init(), 0);
	crypto_sign_seed_keypair(pk, sk, seed);
	ck_assert_int_eq(cert_env_sign(stmt, strlen(stmt), sk, pk, &env, NULL), 0);
	emit_str("cert.envelope", env);
	free(env);
}

START_TEST(text_outputs_match_the_recorded_bytes)
{
	char *got = NULL, *want = NULL;
	size_t glen = 0, wlen = 0;
	const char *write = getenv("PC_GOLDEN_WRITE");
	struct pc_err err;

	out = open_memstream(&got, &glen);
	ck_assert_ptr_nonnull(out);
	policies();
	/* the structured-data form, pinned with a configured enterprise
	 * number (the default has none: check_logd_ecs) */
	logx_set_identity(LOGX_FACILITY, 32473);
	records();
	checkpoints();
	logx_set_identity(LOGX_FACILITY, 0);
	nft_texts();
	checker_texts();
	certificate();
	fclose(out);
	if (write && *write) {
		ck_assert_int_eq(pc_file_write_atomic(write, got, glen, 0644, &err), 0);
		free(got);
		return;
	}
	ck_assert_msg(pc_file_read(GOLDEN, 16 << 20, &want, &wlen, &err) == 0, "%s", err.msg);
	/* report the first line that differs, by its key */
	for (const char *g = got, *w = want; *g || *w;) {
		const char *ge = strchr(g, '\n'), *we = strchr(w, '\n');
		size_t gl = ge ? (size_t)(ge - g) : strlen(g),
		       wl = we ? (size_t)(we - w) : strlen(w);

		if (gl != wl || memcmp(g, w, gl) != 0) {
			size_t at = 0, key = strcspn(w, "\t\n");

			while (at < gl && at < wl && g[at] == w[at])
				at++;
			at = at > 40 ? at - 40 : 0;
			ck_abort_msg("%.*s differs:\n got: ...%.120s\nwant: ...%.120s", (int)key, w,
				     g + at, w + at);
		}
		g += gl + (ge ? 1 : 0);
		w += wl + (we ? 1 : 0);
	}
	free(got);
	free(want);
}
END_TEST

PC_UNIT_SUITE("golden", "bytes", 60, text_outputs_match_the_recorded_bytes)
