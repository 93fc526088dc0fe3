/* Unit tests for the ECS form of records (issue 18, point 7): every record
 * kind carries the required ECS fields with their types and no custom
 * top-level field; the JSON line and the syslog structured data carry the
 * same fields and values; every reason the sources give has an event.code;
 * a log written before the ECS names still verifies. */
#include "logd/logd_int.h"
#include "tests/unit/unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* One field as both forms should have it: name and value ("a" for a
 * string, "7" for a number; a list gives one entry per item). */
struct field {
	char key[64];
	char val[160];
	enum logjson_type t;
};
struct fields {
	struct field f[96];
	int n;
};

static void add(struct fields *fs, const char *k, size_t kl, const char *v, size_t vl,
		enum logjson_type t)
{
	struct field *f;

	ck_assert_int_lt(fs->n, 96);
	f = &fs->f[fs->n++];
	snprintf(f->key, sizeof(f->key), "%.*s", (int)kl, k);
	snprintf(f->val, sizeof(f->val), "%.*s", (int)vl, v);
	f->t = t;
}

/* JSON: strings without quotes (the test records hold no escapes), an
 * array as one entry per item. */
static int json_field(void *ctx, const char *k, size_t kl, enum logjson_type t, const char *v,
		      size_t vl)
{
	struct fields *fs = ctx;

	if (t == LOGJSON_STRING) {
		add(fs, k, kl, v + 1, vl - 2, t);
	} else if (t == LOGJSON_SCALAR) {
		add(fs, k, kl, v, vl, t);
	} else {
		const char *p = v + 1, *end = v + vl - 1;

		while (p < end) {
			const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));

			ck_assert_ptr_nonnull(q);
			add(fs, k, kl, p + 1, (size_t)(q - p - 1), t);
			p = q + 2; /* past ", */
		}
	}
	return 0;
}

static bool has(const struct fields *fs, const char *k, const char *v, int t);

/* The fields JSON has as arrays: in structured data one SD-PARAM each,
 * the items joined by commas. */
static bool is_list(const char *k, size_t kl)
{
	static const char *const lists[] = {"event.category", "event.type", "dns.resolved_ip",
					    "portcullis.secrets"};

	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		if (kl == strlen(lists[i]) && !strncmp(k, lists[i], kl))
			return true;
	return false;
}

/* Syslog: the SD-PARAMs of the one SD-ELEMENT (no escapes in the test
 * records); no PARAM-NAME twice (a parser that maps the element keeps one
 * of them); a list's items one entry each. */
static void sd_fields(const char *msg, struct fields *fs)
{
	const char *p = strchr(msg, '['), *end;

	ck_assert_ptr_nonnull(p);
	end = strstr(p, "\"] ");
	ck_assert_ptr_nonnull(end);
	p = strchr(p, ' ');
	while (p && p < end) {
		const char *eq = strchr(p, '='), *q;

		char v[160];
		size_t o = 0;

		ck_assert_ptr_nonnull(eq);
		for (q = eq + 2; *q && *q != '"'; q++) { /* RFC 5424 6.3.3 escapes */
			if (*q == '\\')
				q++;
			if (o + 1 < sizeof(v))
				v[o++] = *q;
		}
		{
			char k[64];

			snprintf(k, sizeof(k), "%.*s", (int)(eq - p - 1), p + 1);
			ck_assert_msg(!has(fs, k, NULL, -1), "%s twice in the structured data: %s",
				      k, msg);
		}
		if (is_list(p + 1, (size_t)(eq - p - 1))) {
			for (size_t i = 0, b = 0; i <= o; i++)
				if (i == o || v[i] == ',') {
					add(fs, p + 1, (size_t)(eq - p - 1), v + b, i - b,
					    LOGJSON_ARRAY);
					b = i + 1;
				}
		} else {
			add(fs, p + 1, (size_t)(eq - p - 1), v, o, LOGJSON_STRING);
		}
		p = q + 1;
	}
}

static bool has(const struct fields *fs, const char *k, const char *v, int t)
{
	for (int i = 0; i < fs->n; i++)
		if (!strcmp(fs->f[i].key, k) && (!v || !strcmp(fs->f[i].val, v)) &&
		    (t < 0 || (int)fs->f[i].t == t))
			return true;
	return false;
}

static void rec_of_kind(struct logrec *r, enum logrec_action a, enum logrec_verdict v)
{
	memset(r, 0, sizeof(*r));
	r->action = a;
	r->verdict = v;
	r->sender = LOGREC_SENDER_ROOT;
	r->sandbox = "agent-1";
	r->policy = "sha256:4be1f00d";
	r->reason = v == LOGREC_REFUSED ? "not on the allow list" : "allowed host";
	r->rule = "agent-1/allow[0]";
	r->src.addr.family = AF_INET;
	inet_pton(AF_INET, "10.203.0.11", r->src.addr.a);
	r->src.port = 40001;
	r->dst.addr.family = AF_INET6;
	inet_pton(AF_INET6, "2001:db8::12", r->dst.addr.a);
	r->dst.port = 443;
	r->transport = IPPROTO_TCP;
	r->domain = "paste.example";
	r->dns_name = "api.github.test";
	r->dns_type = 28;
	r->dns_answers = "2001:db8::10,203.0.113.10";
	r->sni = "paste.example";
	r->http_method = "POST";
	r->http_path = "/upload";
	r->http_status = 403;
	r->secrets = "GITHUB_TOKEN,NPM_TOKEN";
	r->message = "plain text";
}

/* The field sets ECS defines that records use; anything else is ours and
 * goes under portcullis.* (log.* is ECS's, for the log a document came
 * from: not for our chain). */
static bool ecs_or_ours(const char *k)
{
	static const char *const sets[] = {"ecs.",	   "event.",   "observer.", "source.",
					   "destination.", "network.", "dns.",	    "tls.",
					   "http.",	   "url.",     "rule.",	    "portcullis."};

	if (!strcmp(k, "@timestamp") || !strcmp(k, "message"))
		return true;
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
		if (!strncmp(k, sets[i], strlen(sets[i])))
			return true;
	return false;
}

START_TEST(every_record_kind_has_the_ecs_fields_in_both_forms)
{
	static const uint8_t prev[32], hash[MERKLE_HASH] = {0x4b};
	static const enum logrec_verdict vs[] = {LOGREC_NONE, LOGREC_ALLOWED, LOGREC_REFUSED};

	logrec_set_observer("gw1.example");
	logx_set_identity(LOGX_FACILITY, 32473); /* a configured PEN: structured data */
	for (int a = 1; a < LOGREC_ACTION_MAX; a++)
		for (size_t vi = 0; vi < 3; vi++) {
			struct logrec r;
			struct fields js = {0}, sd = {0};
			char buf[LOGREC_JSON_MAX], msg[8192];
			int n, m;

			rec_of_kind(&r, (enum logrec_action)a, vs[vi]);
			n = logrec_json_format(&r, 4128, 1764424933123ULL, prev, NULL, buf,
					       sizeof(buf));
			ck_assert_int_gt(n, 0);
			ck_assert_int_eq(logjson_each(buf, (size_t)n, json_field, &js), 0);
			m = logx_format_record(&r, 4128, 1764424933123ULL, hash, "gw1.example", 1,
					       msg, sizeof(msg));
			ck_assert_int_gt(m, 0);
			msg[m] = '\0';
			sd_fields(msg, &sd);
			/* required ECS fields, typed */
			ck_assert(has(&js, "event.sequence", "4128", LOGJSON_SCALAR));
			ck_assert(
			    has(&js, "@timestamp", "2025-11-29T14:02:13.123Z", LOGJSON_STRING));
			ck_assert(has(&js, "ecs.version", NULL, LOGJSON_STRING));
			ck_assert(has(&js, "event.kind", NULL, LOGJSON_STRING));
			ck_assert(has(&js, "event.category", NULL, LOGJSON_ARRAY));
			ck_assert(has(&js, "event.type", NULL, LOGJSON_ARRAY));
			ck_assert(
			    has(&js, "event.action", logrec_action_name(r.action), LOGJSON_STRING));
			ck_assert(has(&js, "event.code", NULL, LOGJSON_STRING));
			ck_assert(has(&js, "observer.hostname", "gw1.example", LOGJSON_STRING));
			ck_assert(has(&js, "observer.product", "portcullis", LOGJSON_STRING));
			ck_assert(has(&js, "observer.vendor", NULL, LOGJSON_STRING));
			ck_assert(has(&js, "observer.type", NULL, LOGJSON_STRING));
			ck_assert(has(&js, "source.port", "40001", LOGJSON_SCALAR));
			ck_assert(has(&js, "destination.port", "443", LOGJSON_SCALAR));
			ck_assert(has(&js, "http.response.status_code", "403", LOGJSON_SCALAR));
			ck_assert(has(&js, "dns.resolved_ip", "203.0.113.10", LOGJSON_ARRAY));
			ck_assert(has(&js, "portcullis.secrets", "NPM_TOKEN", LOGJSON_ARRAY));
			ck_assert(has(&js, "network.transport", "tcp", LOGJSON_STRING));
			ck_assert(has(&js, "network.iana_number", "6", LOGJSON_STRING));
			ck_assert(has(&js, "portcullis.prev", NULL, LOGJSON_STRING));
			ck_assert_int_eq(has(&js, "event.outcome", NULL, -1),
					 vs[vi] != LOGREC_NONE);
			ck_assert_int_eq(has(&js, "network.direction", "outbound", -1),
					 a == LOGREC_CONNECT || a == LOGREC_DNS_QUERY ||
					     a == LOGREC_HTTP_REQUEST || a == LOGREC_EXFIL);
			ck_assert_int_eq(has(&js, "dns.response_code", "NOERROR", -1),
					 a == LOGREC_DNS_LEARN);
			for (int i = 0; i < js.n; i++)
				ck_assert_msg(ecs_or_ours(js.f[i].key),
					      "%s: custom top-level field", js.f[i].key);
			/* the same fields and values in syslog, but the ones the
			 * message has elsewhere: time in the header, message as
			 * MSG; and the chain: the hash instead of prev */
			ck_assert(has(&sd, "event.sequence", "4128", -1));
			ck_assert(has(&sd, "event.hash", NULL, -1));
			for (int i = 0; i < js.n; i++) {
				const struct field *f = &js.f[i];

				if (!strcmp(f->key, "@timestamp") || !strcmp(f->key, "message") ||
				    !strcmp(f->key, "portcullis.prev"))
					continue;
				ck_assert_msg(has(&sd, f->key, f->val, -1),
					      "%s=%s in JSON, not in syslog: %s", f->key, f->val,
					      msg);
			}
			for (int i = 0; i < sd.n; i++)
				ck_assert_msg(!strcmp(sd.f[i].key, "event.hash") ||
						  has(&js, sd.f[i].key, sd.f[i].val, -1),
					      "%s=%s in syslog, not in JSON", sd.f[i].key,
					      sd.f[i].val);
			/* the destination is in MSG, even without a name */
			r.domain = r.dns_name = r.sni = NULL;
			m = logx_format_record(&r, 4128, 1764424933123ULL, hash, "gw1.example", 1,
					       msg, sizeof(msg));
			ck_assert_int_gt(m, 0);
			msg[m] = '\0';
			ck_assert_msg(strstr(strstr(msg, "\"] "), " 2001:db8::12:443"), "%s", msg);
		}
	logx_set_identity(LOGX_FACILITY, 0);
	logrec_set_observer(NULL);
}
END_TEST

/* Every reason a literal in the engine's and the DNS guard's sources can
 * give has a code: a reason added without one fails here (the record would
 * say event.code "other"). */
START_TEST(every_reason_in_the_sources_has_an_event_code)
{
	FILE *f =
	    popen("grep -rhoE '(reason = |set_reason\\(d, (\"%s\", )?|why = |\\? |: )\"[^\"]+\"' "
		  "engine/decide.c engine/engine.c engine/checkrun.c engine/queue.c "
		  "engine/dnstcp.c engine/flows.c engine/limitlog.c dnsguard/*.c "
		  "| sed -E 's/^[^\"]*\"//; s/\"$//' | sort -u",
		  "r");
	char line[512];
	int n = 0, missing = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		/* only what reads as a reason: a sentence of words */
		if (!strchr(line, ' ') || strchr(line, '%') == line || strstr(line, "\\n"))
			continue;
		if (logrec_reason_index(line) == LOGREC_REASON_CODES - 1 &&
		    (strstr(line, "allowed") || strstr(line, "sandbox") || strstr(line, "DNS") ||
		     strstr(line, "resolver") || strstr(line, "reload") ||
		     strstr(line, "containment") || strstr(line, "guard") ||
		     strstr(line, "answer") || strstr(line, "query") || strstr(line, "policy"))) {
			fprintf(stderr, "no event.code for the reason \"%s\"\n", line);
			missing++;
		}
		n++;
	}
	pclose(f);
	ck_assert_int_gt(n, 20); /* the scan found the reasons at all */
	ck_assert_int_eq(missing, 0);
	/* the codes are unique and none but the last is "other" */
	for (int i = 0; i < LOGREC_REASON_CODES; i++)
		for (int j = i + 1; j < LOGREC_REASON_CODES; j++)
			ck_assert_str_ne(logrec_reason_code_at(i), logrec_reason_code_at(j));
	ck_assert_str_eq(logrec_reason_code_at(LOGREC_REASON_CODES - 1), "other");
	ck_assert_str_eq(logrec_reason_code("ICMP is never allowed"), "protocol");
	ck_assert_str_eq(logrec_reason_code("cut by reload: its host is no longer allowed"),
			 "cut_by_reload");
}
END_TEST

/* Every code is in the documented table of docs/logd.md ("Event codes"). */
START_TEST(every_event_code_is_documented)
{
	char *doc = NULL;
	size_t len;

	ck_assert_int_eq(pc_file_read("docs/logd.md", 1 << 20, &doc, &len, NULL), 0);
	for (int i = 0; i < LOGREC_REASON_CODES; i++) {
		char cell[80];

		snprintf(cell, sizeof(cell), "| `%s` |", logrec_reason_code_at(i));
		ck_assert_msg(strstr(doc, cell), "event.code %s is not in docs/logd.md",
			      logrec_reason_code_at(i));
	}
	free(doc);
}
END_TEST

/* A log written by the code before the ECS names (seq, prev, hash, sandbox
 * at the top level) verifies: signatures, chain and tree. */
START_TEST(a_log_written_before_the_ecs_names_verifies)
{
	struct note_verifier key;
	struct logv *v;
	struct pc_err err;
	char *text = NULL;
	size_t len;

	ck_assert_int_eq(note_verifier_load("tests/integration/logd_old/log.key.pub", &key, &err),
			 0);
	ck_assert_int_eq(logv_new(&key, &v, NULL), 0);
	ck_assert_msg(logv_file(v, "tests/integration/logd_old/verdicts.jsonl", 0, &err) == 0, "%s",
		      err.msg);
	ck_assert_uint_eq(logv_result(v)->records, 7);
	ck_assert_uint_eq(logv_result(v)->unsealed, 0);
	logv_free(v);
	/* it is the old spelling that is checked */
	ck_assert_int_eq(
	    pc_file_read("tests/integration/logd_old/verdicts.jsonl", 1 << 20, &text, &len, NULL),
	    0);
	ck_assert(strncmp(text, "{\"seq\":1,", 9) == 0);
	ck_assert_ptr_null(strstr(text, "event.sequence"));
	/* an edited old line is still caught */
	text[strstr(text, "\"seq\":2,") - text + 20] ^= 1;
	ck_assert_int_eq(logv_new(&key, &v, NULL), 0);
	ck_assert_int_lt(logv_buffer(v, text, len, 0, &err), 0);
	logv_free(v);
	/* an upgraded logd goes on in the same file with the new names: the
	 * chain runs from the last old line into the first new one */
	{
		struct merkle_hasher *h;
		struct logrec r;
		uint8_t prev[MERKLE_HASH], leaf[MERKLE_HASH];
		char *mixed = malloc(len + LOGREC_JSON_MAX + 128), hex[2 * MERKLE_HASH + 1];
		const char *last = text;
		int n;

		text[strstr(text, "\"seq\":2,") - text + 20] ^= 1; /* undo the edit */
		for (const char *p = text; (p = strstr(p, "\n{\"seq\":")); p++)
			last = p + 1;
		ck_assert_int_eq(merkle_hex_parse(strchr(last, '\n') - 66, prev), 0);
		rec_of_kind(&r, LOGREC_CONNECT, LOGREC_REFUSED);
		memcpy(mixed, text, len);
		n = logrec_json_format(&r, 8, 1764424933123ULL, prev, NULL, mixed + len,
				       LOGREC_JSON_MAX);
		ck_assert_int_gt(n, 0);
		ck_assert_int_eq(merkle_hasher_new(&h, NULL), 0);
		ck_assert_int_eq(merkle_leaf(h, mixed + len, (size_t)n, NULL, 0, leaf), 0);
		merkle_hasher_free(h);
		merkle_hex(leaf, hex);
		n += snprintf(mixed + len + n - 1, 128, ",\"event.hash\":\"%s\"}\n", hex) - 1;
		ck_assert_int_eq(logv_new(&key, &v, NULL), 0);
		ck_assert_msg(logv_buffer(v, mixed, len + (size_t)n, 0, &err) == 0, "%s", err.msg);
		ck_assert_uint_eq(logv_result(v)->records, 8);
		ck_assert_uint_eq(logv_result(v)->last_seq, 8);
		logv_free(v);
		free(mixed);
	}
	free(text);
}
END_TEST

/* The configured facility and enterprise number are what the messages
 * carry (log.syslog.facility, log.syslog.enterprise_number). */
START_TEST(syslog_identity_is_the_configured_one)
{
	static const uint8_t hash[MERKLE_HASH];
	struct logrec r;
	char msg[8192];
	int m;

	rec_of_kind(&r, LOGREC_CONNECT, LOGREC_ALLOWED);
	logx_set_identity(19, 99999); /* local3 */
	m = logx_format_record(&r, 1, 1764424933123ULL, hash, "gw", 1, msg, sizeof(msg));
	logx_set_identity(LOGX_FACILITY, 0);
	ck_assert_int_gt(m, 0);
	msg[m] = '\0';
	ck_assert_msg(!strncmp(msg, "<158>1 ", 7), "%s", msg); /* 19 * 8 + info */
	ck_assert_msg(strstr(msg, " [portcullis@99999 event.sequence=\"1\""), "%s", msg);
}
END_TEST

/* event.code is the one the sender decided (the vault's refusals have
 * their own; the prose would say "other"), and a refused DNS query says
 * which rcode the guard answered; both forms, and through the wire. */
START_TEST(the_senders_code_and_rcode_are_the_records)
{
	static const uint8_t prev[32], hash[MERKLE_HASH];
	struct logrec r = {.action = LOGREC_EXFIL,
			   .verdict = LOGREC_REFUSED,
			   .sandbox = "agent-1",
			   .reason = "placeholder of GITHUB_TOKEN in the request URL",
			   .code = "vault_placeholder_in_url"};
	struct logrec_decoded d;
	char buf[LOGREC_JSON_MAX], msg[8192];
	uint8_t wire[LOGWIRE_MAX];
	int n;

	n = logrec_json_format(&r, 7, 1764424933123ULL, prev, NULL, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_msg(strstr(buf, "\"event.code\":\"vault_placeholder_in_url\""), "%s", buf);
	logx_set_identity(LOGX_FACILITY, 99999); /* the structured-data form */
	n = logx_format_record(&r, 7, 1764424933123ULL, hash, "gw", 1, msg, sizeof(msg));
	ck_assert_int_gt(n, 0);
	msg[n] = '\0';
	ck_assert_msg(strstr(msg, "event.code=\"vault_placeholder_in_url\""), "%s", msg);
	/* a record without a code (an older client): derived from the reason */
	r.code = NULL;
	n = logrec_json_format(&r, 7, 1764424933123ULL, prev, NULL, buf, sizeof(buf));
	buf[n > 0 ? n : 0] = '\0';
	ck_assert_msg(strstr(buf, "\"event.code\":\"other\""), "%s", buf);

	r = (struct logrec){.action = LOGREC_DNS_QUERY,
			    .verdict = LOGREC_REFUSED,
			    .sandbox = "agent-1",
			    .reason = "query type not permitted",
			    .dns_name = "api.github.test",
			    .dns_type = 16,
			    .code = "dns_type",
			    .dns_rcode = "NXDOMAIN"};
	n = logrec_json_format(&r, 8, 1764424933123ULL, prev, NULL, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_msg(strstr(buf, "\"event.code\":\"dns_type\""), "%s", buf);
	ck_assert_msg(strstr(buf, "\"dns.response_code\":\"NXDOMAIN\""), "%s", buf);
	n = logx_format_record(&r, 8, 1764424933123ULL, hash, "gw", 1, msg, sizeof(msg));
	ck_assert_int_gt(n, 0);
	msg[n] = '\0';
	ck_assert_msg(strstr(msg, "dns.response_code=\"NXDOMAIN\""), "%s", msg);
	logx_set_identity(LOGX_FACILITY, 0);

	/* the wire keeps both; logd refuses a code or an rcode it does not know */
	n = logrec_encode(&r, wire, sizeof(wire), NULL);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(logrec_decode(wire, (size_t)n, &d, NULL), 0);
	ck_assert_str_eq(d.rec.code, "dns_type");
	ck_assert_str_eq(d.rec.dns_rcode, "NXDOMAIN");
	logrec_decoded_free(&d);
	r.code = "dns_typo";
	n = logrec_encode(&r, wire, sizeof(wire), NULL);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(logrec_decode(wire, (size_t)n, &d, NULL), PC_EPARSE);
	r.code = "dns_type";
	r.dns_rcode = "NOPE";
	n = logrec_encode(&r, wire, sizeof(wire), NULL);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(logrec_decode(wire, (size_t)n, &d, NULL), PC_EPARSE);
}
END_TEST

/* Every code the vault, the DNS guard and the engine set where they decide
 * is one of the table (a misspelt code would be refused by logd: the
 * action with it). The scan must find the vault's refusals. */
START_TEST(every_code_the_sources_set_is_known)
{
	FILE *f = popen("grep -hoE '(code = |refuse\\([^\"]*|conn_log_refused\\([^\"]*)"
			"\"[a-z_]+\"' vault/*.c dnsguard/*.c engine/*.c "
			"| sed -E 's/^[^\"]*\"//; s/\"$//' | sort -u",
			"r");
	char line[128];
	int n = 0, vault = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		ck_assert_msg(logrec_code_index(line) >= 0, "\"%s\" is no event.code", line);
		vault += strncmp(line, "vault_", 6) == 0;
		n++;
	}
	pclose(f);
	ck_assert_int_ge(vault, 18);
	ck_assert_int_gt(n, 25);
}
END_TEST

/* Without an enterprise number (the default) no message carries an SD-ID,
 * the documentation PEN least of all: the structured data is "-" and MSG
 * is a JSON object with the same fields and values as the JSON line (its
 * hash instead of prev); a checkpoint is the file's checkpoint line. */
START_TEST(syslog_without_a_pen_carries_the_fields_as_json)
{
	static const uint8_t prev[32], hash[MERKLE_HASH] = {0x4b};
	struct checkpoint c = {
	    .origin = "gw/portcullis-log", .size = 7, .time_ms = 1764424933123ULL};
	const struct logx_spool_loss loss = {
	    .dropped = 3, .dropped_first = 10, .dropped_last = 12, .cps_superseded = 1};
	char buf[LOGREC_JSON_MAX], msg[LOGX_MSG_MAX + 1], note[512], *body;
	int n, m;

	logx_set_identity(LOGX_FACILITY, 0);
	for (int a = 1; a < LOGREC_ACTION_MAX; a++) {
		struct logrec r;
		struct fields js = {0}, mj = {0};

		rec_of_kind(&r, (enum logrec_action)a, LOGREC_REFUSED);
		n = logrec_json_format(&r, 9, 1764424933123ULL, prev, NULL, buf, sizeof(buf));
		ck_assert_int_gt(n, 0);
		ck_assert_int_eq(logjson_each(buf, (size_t)n, json_field, &js), 0);
		m = logx_format_export(&r, 9, 1764424933123ULL, hash, "gw", 1, msg, sizeof(msg));
		ck_assert_int_gt(m, 0);
		msg[m] = '\0';
		ck_assert_msg(!strstr(msg, "32473") && !strstr(msg, "[portcullis"), "%s", msg);
		body = strstr(msg, " - {");
		ck_assert_msg(body, "no NILVALUE structured data and JSON MSG: %s", msg);
		body += 3;
		ck_assert_int_eq(logjson_each(body, strlen(body), json_field, &mj), 0);
		ck_assert(has(&mj, "event.hash", NULL, LOGJSON_STRING));
		for (int i = 0; i < js.n; i++)
			ck_assert_msg(!strcmp(js.f[i].key, "portcullis.prev") ||
					  has(&mj, js.f[i].key, js.f[i].val, js.f[i].t),
				      "%s=%s in the JSON line, not in the JSON MSG: %s",
				      js.f[i].key, js.f[i].val, body);
		for (int i = 0; i < mj.n; i++)
			ck_assert_msg(!strcmp(mj.f[i].key, "event.hash") ||
					  has(&js, mj.f[i].key, mj.f[i].val, mj.f[i].t),
				      "%s in the JSON MSG, not in the JSON line", mj.f[i].key);
	}
	n = checkpoint_body_format(&c, note, sizeof(note) - 64);
	ck_assert_int_gt(n, 0);
	snprintf(note + n, sizeof(note) - (size_t)n, "\n\xe2\x80\x94 gw/portcullis-log AAAA\n");
	m = logx_format_checkpoint(note, strlen(note), "gw", 1, msg, sizeof(msg));
	ck_assert_int_gt(m, 0);
	msg[m] = '\0';
	ck_assert_msg(strstr(msg, " checkpoint - {\"checkpoint\":\"gw/portcullis-log\\n7\\n"), "%s",
		      msg);
	{
		struct fields cj = {0};

		/* a SIEM files it by its time and as a state, not an event */
		body = strstr(msg, " - {") + 3;
		ck_assert_int_eq(logjson_each(body, strlen(body), json_field, &cj), 0);
		ck_assert_msg(has(&cj, "@timestamp", "2025-11-29T14:02:13.123Z", LOGJSON_STRING),
			      "%s", msg);
		ck_assert_msg(has(&cj, "event.kind", "state", LOGJSON_STRING), "%s", msg);
		ck_assert_msg(has(&cj, "ecs.version", LOGREC_ECS_VERSION, LOGJSON_STRING), "%s",
			      msg);
	}
	/* and with structured data */
	logx_set_identity(LOGX_FACILITY, 99999);
	m = logx_format_checkpoint(note, strlen(note), "gw", 1, msg, sizeof(msg));
	logx_set_identity(LOGX_FACILITY, 0);
	ck_assert_int_gt(m, 0);
	msg[m] = '\0';
	ck_assert_msg(strstr(msg, "<134>1 2025-11-29T14:02:13.123Z gw portcullis-logd 1 checkpoint "
				  "[portcullis@99999 ecs.version=\"" LOGREC_ECS_VERSION
				  "\" event.kind=\"state\""),
		      "%s", msg);
	/* a spool overflow: the exporter's notice, with its time and kind,
	 * and its counts as numbers under portcullis.spool */
	m = logx_format_overflow(&loss, 1764424933123ull, "gw", 1, msg, sizeof(msg));
	ck_assert_int_gt(m, 0);
	msg[m] = '\0';
	ck_assert_msg(
	    strstr(
		msg,
		"<132>1 2025-11-29T14:02:13.123Z gw portcullis-logd 1 spool-overflow - "
		"{\"@timestamp\":\"2025-11-29T14:02:13.123Z\",\"ecs.version\":\"" LOGREC_ECS_VERSION
		"\",\"event.kind\":\"event\",\"event.action\":\"log-spool-overflow\","
		"\"portcullis.spool.dropped\":3,\"portcullis.spool.first_seq\":10,"),
	    "%s", msg);
	/* with one: the SD-ID names it */
	logx_set_identity(LOGX_FACILITY, 99999);
	m = logx_format_overflow(&loss, 1764424933123ull, "gw", 1, msg, sizeof(msg));
	logx_set_identity(LOGX_FACILITY, 0);
	ck_assert_int_gt(m, 0);
	msg[m] = '\0';
	ck_assert_msg(strstr(msg,
			     " spool-overflow [portcullis@99999 ecs.version=\"" LOGREC_ECS_VERSION
			     "\" event.kind=\"event\" event.action=\"log-spool-overflow\" "
			     "portcullis.spool.dropped=\"3\""),
		      "%s", msg);
}
END_TEST

/* The JSON line takes a class's fields (action, verdict, sender, the
 * observer) from a per-thread cache: a cached head must never outlive the
 * observer it named, be taken for another class, or be cut when it does
 * not fit a slot. */
START_TEST(a_records_class_fields_are_its_own)
{
	static const uint8_t prev[32];
	char first[12][4096], line[4096], name[256];
	struct logrec r = {
	    .sandbox = "agent-1", .reason = "allowed by cidr 192.0.2.0/24", .code = "cidr"};
	int n, k = 0;

	logrec_set_observer("gw-a");
	r.action = LOGREC_CONNECT;
	r.verdict = LOGREC_ALLOWED;
	r.sender = LOGREC_SENDER_ENGINE;
	n = logrec_json_format(&r, 1, 1764424933123ull, prev, NULL, line, sizeof(line));
	ck_assert_int_gt(n, 0);
	line[n] = '\0';
	ck_assert_ptr_nonnull(strstr(line, "\"observer.hostname\":\"gw-a\""));
	/* a new observer: no line names the old one */
	logrec_set_observer("gw-b");
	n = logrec_json_format(&r, 2, 1764424933123ull, prev, NULL, line, sizeof(line));
	ck_assert_int_gt(n, 0);
	line[n] = '\0';
	ck_assert_msg(strstr(line, "\"observer.hostname\":\"gw-b\"") && !strstr(line, "gw-a"), "%s",
		      line);
	/* more classes than the cache has slots, twice round: the second
	 * pass (some heads cached, some made again) reads as the first */
	for (int pass = 0; pass < 2; pass++) {
		k = 0;
		for (int a = LOGREC_CONNECT; a <= LOGREC_HTTP_REQUEST; a++)
			for (int v = LOGREC_NONE; v <= LOGREC_REFUSED; v++, k++) {
				r.action = (enum logrec_action)a;
				r.verdict = (enum logrec_verdict)v;
				r.sender = k % 2 ? LOGREC_SENDER_ROOT : LOGREC_SENDER_ENGINE;
				n = logrec_json_format(&r, 3, 1764424933123ull, prev, NULL, line,
						       sizeof(line));
				ck_assert_int_gt(n, 0);
				line[n] = '\0';
				if (!pass)
					memcpy(first[k], line, (size_t)n + 1);
				else
					ck_assert_str_eq(line, first[k]);
			}
	}
	ck_assert_int_eq(k, 12);
	ck_assert_ptr_nonnull(strstr(first[1], "\"event.type\":[\"connection\",\"allowed\"]"));
	ck_assert_ptr_nonnull(strstr(first[5], "\"event.outcome\":\"failure\""));
	ck_assert_ptr_nonnull(strstr(first[4], "\"portcullis.sender\":\"engine\""));
	ck_assert_ptr_nonnull(strstr(first[5], "\"portcullis.sender\":\"root\""));
	/* an observer whose fields do not fit a slot (every byte escaped to
	 * six): formatted whole, the same each time */
	memset(name, 0x01, sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	logrec_set_observer(name);
	r.action = LOGREC_CONNECT;
	r.verdict = LOGREC_REFUSED;
	for (int i = 0; i < 2; i++) {
		n = logrec_json_format(&r, 4, 1764424933123ull, prev, NULL, line, sizeof(line));
		ck_assert_int_gt(n, 0);
		line[n] = '\0';
		if (!i)
			memcpy(first[0], line, (size_t)n + 1);
	}
	ck_assert_str_eq(line, first[0]);
	ck_assert_ptr_nonnull(strstr(line, "\"observer.hostname\":\"\\u0001\\u0001"));
	ck_assert_ptr_nonnull(strstr(line, "\\u0001\",\"observer.product\""));
	logrec_set_observer(NULL);
}
END_TEST

PC_UNIT_SUITE("logd_ecs", "ecs", 30, every_record_kind_has_the_ecs_fields_in_both_forms,
	      every_reason_in_the_sources_has_an_event_code, every_event_code_is_documented,
	      a_log_written_before_the_ecs_names_verifies, syslog_identity_is_the_configured_one,
	      the_senders_code_and_rcode_are_the_records, every_code_the_sources_set_is_known,
	      syslog_without_a_pen_carries_the_fields_as_json, a_records_class_fields_are_its_own)
