/* `portcullis log audit [FILE...] [--policies DIR] [--from SEQ] [--json]`:
 * the log verified first (as `log verify`), then every verdict in it
 * replayed, in order, through the spec's model (spec/) under the policy
 * each record names. The model is asked, never the engine: an engine that
 * logged a decision the spec does not allow is caught even when logd
 * signed the record honestly. What the audit can and cannot prove is in
 * docs/logd.md, "Audit". */
#include "cli/cli_int.h"
#include "spec/spec.h"

#include <dirent.h>
#include <getopt.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define AUDIT_POLICIES_MAX 64
#define AUDIT_SHOW_MAX	   200 /* disagreements printed in full */

/* One record line, the fields a replay reads (pointers into scratch). */
struct arec {
	uint64_t seq;
	uint64_t time_ms;
	char action[24];
	int verdict; /* enum logrec_verdict */
	char sandbox[POLICY_NAME_MAX];
	char policy[80];
	char reason[512];
	struct pc_endpoint src, dst;
	uint8_t proto;
	char qname[POLICY_HOST_MAX];
	uint16_t qtype;
	struct pc_addr answers[SPEC_ANSWER_MAX];
	size_t n_answers, answers_over;
	char sni[POLICY_HOST_MAX];
	char secrets[512];
	uint32_t ttl; /* portcullis.dns.ttl; 0: the record predates it */
	bool has_seq;
};

struct apol {
	char hash[80];
	struct policy *pol; /* NULL: not found (why says) */
	char why[1200];
};

/* What could not be judged, by kind: counted and named, never confirmed. */
#define AUDIT_UNJUDGED_KINDS 16
struct unjudged {
	char what[1400];
	uint64_t n, first_seq;
};

struct audit {
	struct config cfg;
	const char *policies;
	uint64_t from;
	bool json;
	struct spec_world *w;
	struct apol pols[AUDIT_POLICIES_MAX];
	size_t n_pols;
	const struct policy *cur;
	uint64_t records, verdicts, confirmed, disagreements, not_verdicts;
	struct unjudged un[AUDIT_UNJUDGED_KINDS];
	size_t n_un;
	uint64_t unjudged;
	struct pc_buf dis; /* the disagreements, as text or JSON array items */
	struct pc_json dj;
};

/* ---- reading a record line ---------------------------------------------- */

/* A JSON string's contents without quotes into out, escapes undone (the
 * fields read here are names and addresses: \uXXXX above ASCII is kept as
 * '?', which no name or address the model compares contains). */
static void jstr(const char *v, size_t n, char *out, size_t outlen)
{
	size_t o = 0;

	if (n >= 2 && v[0] == '"') {
		v++;
		n -= 2;
	}
	for (size_t i = 0; i < n && o + 1 < outlen; i++) {
		char c = v[i];

		if (c == '\\' && i + 1 < n) {
			c = v[++i];
			if (c == 'n')
				c = '\n';
			else if (c == 't')
				c = '\t';
			else if (c == 'r')
				c = '\r';
			else if (c == 'u' && i + 4 < n) {
				unsigned cp = 0;

				for (int k = 1; k <= 4; k++) {
					char h = v[i + k];

					cp = cp * 16 + (unsigned)(h >= 'a'   ? h - 'a' + 10
								  : h >= 'A' ? h - 'A' + 10
									     : h - '0');
				}
				i += 4;
				c = cp < 0x80 ? (char)cp : '?';
			}
		}
		out[o++] = c;
	}
	out[o] = '\0';
}

static uint64_t jnum(const char *v, size_t n)
{
	uint64_t x = 0;

	if (n && v[0] == '"') {
		v++;
		n = n >= 2 ? n - 2 : 0;
	}
	for (size_t i = 0; i < n && v[i] >= '0' && v[i] <= '9'; i++)
		x = x * 10 + (uint64_t)(v[i] - '0');
	return x;
}

/* "2026-11-29T14:02:13.123Z" as ms since the epoch; 0 when not that form. */
static int digits(const char *s, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static uint64_t time_ms_of(const char *s)
{
	/* days from 1970-01-01 to the first of each month (civil calendar) */
	int y = digits(s, 4), mo = digits(s + 5, 2), d = digits(s + 8, 2), h = digits(s + 11, 2),
	    mi = digits(s + 14, 2), se = digits(s + 17, 2), ms = digits(s + 20, 3);
	int64_t days;

	if (strlen(s) != 24 || s[4] != '-' || s[10] != 'T' || s[19] != '.' || s[23] != 'Z' ||
	    y < 1970 || mo < 1 || mo > 12 || d < 1 || h < 0 || mi < 0 || se < 0 || ms < 0)
		return 0;
	/* Howard Hinnant's days_from_civil */
	y -= mo <= 2;
	{
		int64_t era = y / 400, yoe = y - era * 400;
		int64_t doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
		int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

		days = era * 146097 + doe - 719468;
	}
	return ((uint64_t)days * 86400 + (uint64_t)(h * 3600 + mi * 60 + se)) * 1000 + (uint64_t)ms;
}

static const struct {
	const char *name;
	uint16_t t;
} qtypes[] = {{"A", 1},	    {"NS", 2},	   {"CNAME", 5},   {"SOA", 6},	 {"PTR", 12},
	      {"MX", 15},   {"TXT", 16},   {"AAAA", 28},   {"SRV", 33},	 {"NAPTR", 35},
	      {"DS", 43},   {"RRSIG", 46}, {"DNSKEY", 48}, {"SVCB", 64}, {"HTTPS", 65},
	      {"ANY", 255}, {"CAA", 257}};

static uint16_t qtype_of(const char *s)
{
	if (strncmp(s, "TYPE", 4) == 0 && s[4])
		return (uint16_t)strtoul(s + 4, NULL, 10);
	for (size_t i = 0; i < sizeof(qtypes) / sizeof(qtypes[0]); i++)
		if (strcmp(s, qtypes[i].name) == 0)
			return qtypes[i].t;
	return 0;
}

static uint8_t proto_of(const char *s)
{
	if (strcmp(s, "tcp") == 0)
		return IPPROTO_TCP;
	if (strcmp(s, "udp") == 0)
		return IPPROTO_UDP;
	if (strcmp(s, "icmp") == 0)
		return IPPROTO_ICMP;
	if (strcmp(s, "ipv6-icmp") == 0)
		return IPPROTO_ICMPV6;
	return (uint8_t)strtoul(s, NULL, 10);
}

static bool key_is(const char *k, size_t kl, const char *name)
{
	return strlen(name) == kl && memcmp(k, name, kl) == 0;
}

static int field(void *ctx, const char *k, size_t kl, enum logjson_type t, const char *v, size_t vl)
{
	struct arec *r = ctx;
	char tmp[512];

	if (key_is(k, kl, "event.sequence") || key_is(k, kl, "seq")) {
		r->seq = jnum(v, vl);
		r->has_seq = true;
	} else if (key_is(k, kl, "@timestamp")) {
		jstr(v, vl, tmp, sizeof(tmp));
		r->time_ms = time_ms_of(tmp);
	} else if (key_is(k, kl, "event.action")) {
		jstr(v, vl, r->action, sizeof(r->action));
	} else if (key_is(k, kl, "event.outcome")) {
		jstr(v, vl, tmp, sizeof(tmp));
		r->verdict = strcmp(tmp, "success") == 0   ? LOGREC_ALLOWED
			     : strcmp(tmp, "failure") == 0 ? LOGREC_REFUSED
							   : LOGREC_NONE;
	} else if (key_is(k, kl, "event.reason")) {
		jstr(v, vl, r->reason, sizeof(r->reason));
	} else if (key_is(k, kl, "portcullis.sandbox") || key_is(k, kl, "sandbox")) {
		jstr(v, vl, r->sandbox, sizeof(r->sandbox));
	} else if (key_is(k, kl, "portcullis.policy") || key_is(k, kl, "policy")) {
		jstr(v, vl, r->policy, sizeof(r->policy));
	} else if (key_is(k, kl, "source.ip")) {
		jstr(v, vl, tmp, sizeof(tmp));
		pc_addr_parse(tmp, &r->src.addr);
	} else if (key_is(k, kl, "source.port")) {
		r->src.port = (uint16_t)jnum(v, vl);
	} else if (key_is(k, kl, "destination.ip")) {
		jstr(v, vl, tmp, sizeof(tmp));
		pc_addr_parse(tmp, &r->dst.addr);
	} else if (key_is(k, kl, "destination.port")) {
		r->dst.port = (uint16_t)jnum(v, vl);
	} else if (key_is(k, kl, "network.transport")) {
		jstr(v, vl, tmp, sizeof(tmp));
		r->proto = proto_of(tmp);
	} else if (key_is(k, kl, "dns.question.name")) {
		jstr(v, vl, r->qname, sizeof(r->qname));
	} else if (key_is(k, kl, "dns.question.type")) {
		jstr(v, vl, tmp, sizeof(tmp));
		r->qtype = qtype_of(tmp);
	} else if (key_is(k, kl, "portcullis.dns.ttl")) {
		r->ttl = (uint32_t)jnum(v, vl);
	} else if (key_is(k, kl, "tls.client.server_name")) {
		jstr(v, vl, r->sni, sizeof(r->sni));
	} else if ((key_is(k, kl, "portcullis.secrets") || key_is(k, kl, "secrets")) &&
		   t == LOGJSON_ARRAY) {
		/* ["A","B"] as "A,B": secret names hold no quote or comma */
		size_t o = 0;

		for (size_t i = 0; i < vl && o + 1 < sizeof(r->secrets); i++)
			if (v[i] != '[' && v[i] != ']' && v[i] != '"')
				r->secrets[o++] = v[i];
		r->secrets[o] = '\0';
	} else if (key_is(k, kl, "dns.resolved_ip") && t == LOGJSON_ARRAY) {
		/* ["a","b"]: addresses hold no quote or comma */
		const char *p = v, *end = v + vl;

		while (p < end) {
			const char *q = memchr(p, '"', (size_t)(end - p)), *e;

			if (!q)
				break;
			e = memchr(q + 1, '"', (size_t)(end - q - 1));
			if (!e)
				break;
			if ((size_t)(e - q - 1) < sizeof(tmp)) {
				memcpy(tmp, q + 1, (size_t)(e - q - 1));
				tmp[e - q - 1] = '\0';
				if (r->n_answers < SPEC_ANSWER_MAX &&
				    pc_addr_parse(tmp, &r->answers[r->n_answers]) == 0)
					r->n_answers++;
				else
					r->answers_over++;
			}
			p = e + 1;
		}
	}
	return 0;
}

/* ---- the policies, by hash ----------------------------------------------- */

/* The policy store's canonical form (docs/policy.md, "Policies kept by
 * hash": compact JSON, {"portcullis_policy":1,"sandboxes":[{...},...]})
 * as rule files: each sandbox object is a YAML flow mapping, with its
 * "name" key spelled "sandbox". The policy compiled from them must hash
 * to the name it is stored under (checked by the caller), so a converter
 * that got something wrong is refused, never believed. */
static int canon_to_rules(const char *c, size_t n, struct pc_buf *o)
{
	const char *p = memmem(c, n, "\"sandboxes\":[", 13), *end = c + n;
	int depth = 0, docs = 0;
	bool str = false, key_next = false;

	if (!p)
		return -1;
	for (p += 13; p < end; p++) {
		if (str) {
			pc_buf_putc(o, *p);
			if (*p == '\\' && p + 1 < end)
				pc_buf_putc(o, *++p);
			else if (*p == '"')
				str = false;
			continue;
		}
		if (depth == 0 && *p == ']')
			break;
		if (depth == 0 && *p == ',')
			continue;
		if (*p == '{' || *p == '[') {
			if (depth == 0 && docs++)
				pc_buf_puts(o, "\n---\n");
			depth++;
			key_next = *p == '{';
		} else if (*p == '}' || *p == ']') {
			depth--;
			if (depth == 0)
				pc_buf_putc(o, *p);
			if (depth == 0)
				continue;
		} else if (*p == ',') {
			key_next = depth == 1;
		} else if (*p == '"') {
			if (depth == 1 && key_next && (size_t)(end - p) > 7 &&
			    memcmp(p, "\"name\":", 7) == 0) {
				pc_buf_puts(o, "\"sandbox\"");
				p += 5;
				key_next = false;
				continue;
			}
			key_next = false;
			str = true;
		}
		pc_buf_putc(o, *p);
	}
	pc_buf_putc(o, '\n');
	return docs > 0 && !o->err ? 0 : -1;
}

/* DIR/sha256:<64 hex>: the stored policy, compiled (through a private
 * temporary rules directory: the compiler reads rule files) and checked
 * against its name; loaded once. */
static const struct policy *policy_for(struct audit *a, const char *hash, const char **why)
{
	struct apol *p;
	struct pc_err err = {0};
	char path[PC_PATH_MAX + 80], tmpl[] = "/tmp/portcullis-audit.XXXXXX", rf[64];
	const char *hex = strncmp(hash, "sha256:", 7) == 0 ? hash + 7 : NULL;
	char *text = NULL;
	size_t len = 0;
	struct pc_buf y;
	FILE *f;

	for (size_t i = 0; i < a->n_pols; i++)
		if (strcmp(a->pols[i].hash, hash) == 0) {
			*why = a->pols[i].why;
			return a->pols[i].pol;
		}
	if (a->n_pols == AUDIT_POLICIES_MAX) {
		*why = "more policies than the audit keeps at once";
		return NULL;
	}
	p = &a->pols[a->n_pols++];
	memset(p, 0, sizeof(*p));
	pc_strlcpy(p->hash, hash, sizeof(p->hash));
	*why = p->why;
	if (!hash[0]) {
		snprintf(p->why, sizeof(p->why), "the record names no policy");
		return NULL;
	}
	if (!hex || strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64) {
		snprintf(p->why, sizeof(p->why), "%s is not a policy hash", hash);
		return NULL;
	}
	snprintf(path, sizeof(path), "%s/%s", a->policies, hash);
	if (pc_file_read(path, (size_t)1 << 26, &text, &len, &err) < 0) {
		snprintf(p->why, sizeof(p->why), "policy %s is not in the store: %s", hash,
			 err.msg);
		return NULL;
	}
	pc_buf_init(&y, 0, 0);
	if (canon_to_rules(text, len, &y) < 0 || !mkdtemp(tmpl)) {
		snprintf(p->why, sizeof(p->why), "%s is not a stored policy's canonical form",
			 path);
		goto out;
	}
	snprintf(rf, sizeof(rf), "%s/policy.yaml", tmpl);
	f = fopen(rf, "w");
	if (!f || fwrite(y.p, 1, y.len, f) != y.len || fclose(f) != 0) {
		snprintf(p->why, sizeof(p->why), "a temporary rules file could not be written");
		goto clean;
	}
	if (policy_load_dir(tmpl, &a->cfg, &p->pol, &err) < 0) {
		snprintf(p->why, sizeof(p->why), "%s: %s", path, err.msg);
		p->pol = NULL;
		goto clean;
	}
	if (strcmp(policy_hash(p->pol), hash) != 0) {
		snprintf(p->why, sizeof(p->why), "%s holds policy %s, not the one its name says",
			 path, policy_hash(p->pol));
		policy_unref(p->pol);
		p->pol = NULL;
	}
clean:
	unlink(rf);
	rmdir(tmpl);
out:
	pc_buf_free(&y);
	free(text);
	return p->pol;
}

/* ---- judging ---------------------------------------------------------------- */

static void not_judged(struct audit *a, const struct arec *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void not_judged(struct audit *a, const struct arec *r, const char *fmt, ...)
{
	char what[1400];
	va_list ap;
	size_t i;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	a->unjudged++;
	for (i = 0; i < a->n_un; i++)
		if (strcmp(a->un[i].what, what) == 0)
			break;
	if (i == a->n_un) {
		if (a->n_un == AUDIT_UNJUDGED_KINDS)
			i = AUDIT_UNJUDGED_KINDS - 1; /* the last kind takes the rest */
		else {
			pc_strlcpy(a->un[a->n_un].what, what, sizeof(a->un[0].what));
			a->un[a->n_un++].first_seq = r->seq;
		}
	}
	a->un[i].n++;
}

/* What the model allows, as a person reads it: "REJECT; connect refused
 * (class SANDBOXES)". */
static void allows_str(const struct spec_verdict *v, char *buf, size_t n)
{
	char outs[96];
	unsigned act = v->actions;
	const char *an = act & SPEC_ACT(LOGREC_CONNECT)	    ? "connect"
			 : act & SPEC_ACT(LOGREC_DNS_QUERY) ? "dns-query"
			 : act & SPEC_ACT(LOGREC_DNS_LEARN) ? "dns-learn"
							    : "a record";

	spec_out_str(v->may, outs, sizeof(outs));
	if (v->rec == SPEC_REC_NONE)
		snprintf(buf, n, "%s; no record", outs);
	else
		snprintf(buf, n, "%s; %s %s%s%s%s", outs, an,
			 v->outcome_either		? "allowed or refused"
			 : v->outcome == LOGREC_ALLOWED ? "allowed"
			 : v->outcome == LOGREC_REFUSED ? "refused"
							: "(no outcome)",
			 v->reason != SPEC_R_ANY ? " (class " : "",
			 v->reason != SPEC_R_ANY ? spec_reason_name(v->reason) : "",
			 v->reason != SPEC_R_ANY ? ")" : "");
}

static void disagree(struct audit *a, const struct arec *r, const char *line, size_t len,
		     const char *row, const char *allows)
{
	a->disagreements++;
	if (a->disagreements > AUDIT_SHOW_MAX)
		return;
	if (a->json) {
		pc_json_obj(&a->dj);
		pc_json_ku64(&a->dj, "seq", r->seq);
		pc_json_kstr(&a->dj, "row", row);
		pc_json_kstr(&a->dj, "allows", allows);
		pc_json_key(&a->dj, "record");
		pc_buf_put(a->dj.b, line, len); /* a record line is one JSON object */
		a->dj.after_key = false;
		pc_json_obj_end(&a->dj);
		return;
	}
	pc_buf_printf(&a->dis, "disagreement: seq %llu, spec row %s: the spec allows %s\n",
		      (unsigned long long)r->seq, row, allows);
	pc_buf_puts(&a->dis, "  record: ");
	pc_buf_put(&a->dis, line, len);
	pc_buf_puts(&a->dis, "\n");
}

/* Does the record agree with what the model says of its packet? */
static bool record_fits(const struct spec_verdict *v, const struct arec *r, int action)
{
	if (v->rec == SPEC_REC_NONE)
		return false;
	if (!(v->actions & SPEC_ACT(action)))
		return false;
	if (!v->outcome_either && v->outcome != r->verdict)
		return false;
	if (v->reason != SPEC_R_ANY && !spec_reason_is(v->reason, r->reason) &&
	    !(v->reason2 != SPEC_R_ANY && spec_reason_is(v->reason2, r->reason)))
		return false;
	return true;
}

static void sender_of(const struct audit *a, const struct arec *r, struct spec_pkt *p)
{
	const struct policy_sandbox *sb =
	    r->sandbox[0] ? policy_sandbox_by_name(a->cur, r->sandbox) : NULL;

	p->dir = SPEC_OUT;
	p->port_known = true;
	p->from.addr = r->src.addr;
	/* the record names the sandbox, not the frame's MAC and port: its
	 * rule's selectors are taken as met; the source address is checked */
	if (sb) {
		p->from.has_mac = sb->match.has_mac;
		memcpy(p->from.mac, sb->match.mac, 6);
		pc_strlcpy(p->from.port, sb->match.port, sizeof(p->from.port));
	}
	p->src = r->src.addr;
	p->dst = r->dst.addr;
	p->sport = r->src.port;
	p->dport = r->dst.port;
	p->proto = r->proto;
}

#define ISN 1000u
#define SRV 5000u

/* A held flow's outcome (S24, then H11): the record's own facts (the
 * server name, or not TLS) stand for the first message's bytes. */
static void judge_held(struct audit *a, const struct arec *r, const struct spec_pkt *syn,
		       struct spec_verdict *v, bool *judged)
{
	static const uint8_t plain[] = "GET / HTTP/1.1\r\n\r\n";
	uint8_t hello[1024];
	struct spec_pkt sa = {0}, d = *syn;
	struct spec_verdict sv;

	*judged = false;
	if (r->sni[0]) {
		size_t n = pc_wire_client_hello(hello, r->sni);

		d.pl = SPEC_PL_STREAM;
		d.stream = SPEC_ST_CH;
		pc_strlcpy(d.stream_sni, r->sni, sizeof(d.stream_sni));
		d.data = hello;
		d.len = n;
		d.stream_all = hello;
		d.stream_all_len = n;
	} else if (spec_reason_is(SPEC_R_NOT_TLS, r->reason) &&
		   !spec_reason_is(SPEC_R_NO_SNI, r->reason)) {
		d.pl = SPEC_PL_STREAM;
		d.stream = SPEC_ST_PLAIN;
		d.data = plain;
		d.len = sizeof(plain) - 1;
		d.stream_all = plain;
		d.stream_all_len = d.len;
	} else {
		return;
	}
	sa.dir = SPEC_IN;
	sa.proto = IPPROTO_TCP;
	sa.src = syn->dst;
	sa.sport = syn->dport;
	sa.dst = syn->src;
	sa.dport = syn->sport;
	sa.tcp_flags = 0x12; /* SYN|ACK */
	sa.seq = SRV;
	sa.ack = ISN + 1;
	sa.ct = SPEC_CT_EST;
	spec_judge(a->w, &sa, &sv);
	d.tcp_flags = 0x18; /* PSH|ACK */
	d.seq = ISN + 1;
	d.ack = SRV + 1;
	d.ct = SPEC_CT_EST;
	spec_judge(a->w, &d, v);
	*judged = true;
}

static void judge_connect(struct audit *a, const struct arec *r, const char *line, size_t len)
{
	struct spec_pkt p = {0};
	struct spec_verdict v = {0};
	char allows[256];

	static const uint8_t one = 'x';

	sender_of(a, r, &p);
	p.ct = SPEC_CT_NEW;
	if (p.proto == IPPROTO_TCP) {
		p.tcp_flags = 0x02; /* SYN */
		p.seq = ISN;
	}
	/* A connect record states no flags class and no bridge port: a
	 * refusal's reason class stands for the packet it names (docs/logd.md,
	 * "Audit"); that refusal is then judged as that packet's. */
	if (r->verdict == LOGREC_REFUSED) {
		if (spec_reason_is(SPEC_R_MALFORMED, r->reason)) {
			not_judged(a, r,
				   "connect refused as malformed (S3): the model judges "
				   "well-formed packets only");
			return;
		}
		if (spec_reason_is(SPEC_R_UNKNOWN_PORT, r->reason))
			p.port_known = false;
		else if (p.proto == IPPROTO_TCP && spec_reason_is(SPEC_R_NO_CONN, r->reason))
			p.tcp_flags = 0x10; /* ACK: not a bare SYN */
		else if (p.proto == IPPROTO_TCP && spec_reason_is(SPEC_R_FASTOPEN, r->reason)) {
			p.pl = SPEC_PL_DATA;
			p.data = &one;
			p.len = 1;
		} else if (p.proto == IPPROTO_TCP && spec_reason_is(SPEC_R_URGENT, r->reason)) {
			p.tcp_flags |= 0x20; /* URG */
			p.urp = 1;
		}
	}
	if ((p.proto == IPPROTO_TCP || p.proto == IPPROTO_UDP) && !p.dst.family) {
		not_judged(a, r, "connect without a destination address");
		return;
	}
	spec_judge(a->w, &p, &v);
	if (v.may & SPEC_V_HOLD) {
		const char *row = v.row;
		bool judged;

		judge_held(a, r, &p, &v, &judged);
		if (!judged) {
			if (r->verdict == LOGREC_REFUSED)
				not_judged(
				    a, r,
				    "connect refused on a held flow's bytes (%s): the record "
				    "does not carry the bytes",
				    r->reason[0] ? r->reason : "no reason");
			else {
				snprintf(allows, sizeof(allows),
					 "HOLD, then an allowed connect only for an allowed server "
					 "name or a stream that is not TLS (H11)");
				disagree(a, r, line, len, row, allows);
			}
			spec_world_forget_flows(a->w);
			return;
		}
	}
	if (record_fits(&v, r, LOGREC_CONNECT))
		a->confirmed++;
	else {
		allows_str(&v, allows, sizeof(allows));
		disagree(a, r, line, len, v.row ? v.row : "?", allows);
	}
	/* each record is its own flow: the model keeps none across records */
	spec_world_forget_flows(a->w);
}

static void answer_pkt(const struct audit *a, const struct arec *r, struct spec_pkt *p,
		       bool query_record)
{
	memset(p, 0, sizeof(*p));
	p->dir = SPEC_IN;
	p->proto = r->proto;
	/* a query's record (deferred to its answer) is from the client, a
	 * dns-learn record from the resolver */
	p->src = query_record ? r->dst.addr : r->src.addr;
	p->sport = query_record ? r->dst.port : r->src.port;
	p->dst = query_record ? r->src.addr : r->dst.addr;
	p->dport = query_record ? r->src.port : r->dst.port;
	p->ct = SPEC_CT_EST;
	p->pl = SPEC_PL_DNS_ANSWER;
	p->tcp_framed = r->proto == IPPROTO_TCP;
	p->qtype = r->qtype;
	pc_strlcpy(p->qname, r->qname, sizeof(p->qname));
	memcpy(p->answer, r->answers, sizeof(p->answer));
	p->n_answer = r->n_answers;
	/* what the guard kept it for; a record from before portcullis.dns.ttl
	 * carries none: the longest the guard keeps (an audit never refuses
	 * what a shorter TTL would have) */
	p->answer_ttl = r->ttl ? r->ttl : a->cfg.dns.ttl_max;
}

static void judge_query(struct audit *a, const struct arec *r, const char *line, size_t len)
{
	struct spec_pkt p = {0};
	struct spec_verdict v = {0};
	char allows[256];

	if (r->proto != IPPROTO_UDP) {
		not_judged(a, r, "dns-query over TCP: the record does not carry the stream");
		return;
	}
	sender_of(a, r, &p);
	p.ct = SPEC_CT_NEW;
	if (r->qname[0] && r->qtype) {
		p.pl = SPEC_PL_DNS_QUERY;
		p.qtype = r->qtype;
		pc_strlcpy(p.qname, r->qname, sizeof(p.qname));
	} else {
		p.pl = SPEC_PL_DNS_BAD;
	}
	spec_judge(a->w, &p, &v);
	if (record_fits(&v, r, LOGREC_DNS_QUERY))
		a->confirmed++;
	else {
		allows_str(&v, allows, sizeof(allows));
		disagree(a, r, line, len, v.row ? v.row : "?", allows);
		return;
	}
	if (r->verdict == LOGREC_ALLOWED && (r->n_answers || r->answers_over)) {
		/* deferred to its answer: what the answer taught is learned */
		struct spec_pkt ans;
		struct spec_verdict av;

		answer_pkt(a, r, &ans, true);
		spec_judge(a->w, &ans, &av);
	}
}

static void judge_learn(struct audit *a, const struct arec *r, const char *line, size_t len)
{
	struct spec_pkt p;
	struct spec_verdict v = {0};
	char allows[256];

	if (r->proto != IPPROTO_UDP) {
		not_judged(a, r, "dns-learn over TCP: the record does not carry the stream");
		return;
	}
	answer_pkt(a, r, &p, false);
	spec_judge(a->w, &p, &v);
	if (record_fits(&v, r, LOGREC_DNS_LEARN))
		a->confirmed++;
	else {
		allows_str(&v, allows, sizeof(allows));
		disagree(a, r, line, len, v.row ? v.row : "?", allows);
	}
	if (r->answers_over)
		not_judged(a, r, "dns-learn naming more than %d addresses (the rest not learned)",
			   SPEC_ANSWER_MAX);
}

/* An allowed request through the vault: V1, V3 and V4 on what its record
 * states (the sandbox, server name, original destination, secrets). */
static void judge_vault(struct audit *a, const struct arec *r, const char *line, size_t len)
{
	struct spec_vreq q = {.sandbox = r->sandbox,
			      .src = r->src.addr,
			      .dst = r->dst.addr,
			      .port = r->dst.port,
			      .sni = r->sni,
			      .secrets = r->secrets};
	char why[512], allows[700];
	const char *row = spec_vault_refuses(a->w, &q, why, sizeof(why));

	if (!row) {
		a->confirmed++;
		return;
	}
	snprintf(allows, sizeof(allows), "the request refused, not sent upstream (%s)", why);
	disagree(a, r, line, len, row, allows);
}

static void judge(struct audit *a, const char *line, size_t len)
{
	struct arec r;
	const char *why;
	const struct policy *pol;
	bool verdict_kind;

	memset(&r, 0, sizeof(r));
	if (logjson_each(line, len, field, &r) < 0 || !r.has_seq)
		return; /* a checkpoint line */
	a->records++;
	verdict_kind = strcmp(r.action, "connect") == 0 || strcmp(r.action, "dns-query") == 0 ||
		       strcmp(r.action, "dns-learn") == 0 ||
		       strcmp(r.action, "http-request") == 0 ||
		       strcmp(r.action, "exfiltration") == 0;
	if (!verdict_kind || (strcmp(r.action, "dns-learn") != 0 && r.verdict == LOGREC_NONE)) {
		a->not_verdicts++;
		return;
	}
	if (r.time_ms)
		a->w->now_ms = r.time_ms;
	/* before --from: replayed for what it teaches, not judged */
	if (r.seq < a->from) {
		if (strcmp(r.action, "dns-learn") == 0 || strcmp(r.action, "dns-query") == 0) {
			pol = policy_for(a, r.policy, &why);
			if (pol) {
				struct spec_pkt p;
				struct spec_verdict v;

				if (pol != a->cur)
					spec_world_reload(a->w, pol);
				a->cur = pol;
				if (strcmp(r.action, "dns-query") == 0) {
					memset(&p, 0, sizeof(p));
					sender_of(a, &r, &p);
					p.ct = SPEC_CT_NEW;
					p.pl = SPEC_PL_DNS_QUERY;
					p.qtype = r.qtype;
					pc_strlcpy(p.qname, r.qname, sizeof(p.qname));
					if (r.proto == IPPROTO_UDP)
						spec_judge(a->w, &p, &v);
				}
				if (r.n_answers && r.proto == IPPROTO_UDP) {
					answer_pkt(a, &r, &p, strcmp(r.action, "dns-query") == 0);
					spec_judge(a->w, &p, &v);
				}
			}
		}
		return;
	}
	a->verdicts++;
	if (strcmp(r.action, "exfiltration") == 0 ||
	    (strcmp(r.action, "http-request") == 0 && r.verdict != LOGREC_ALLOWED)) {
		not_judged(a, &r,
			   "%s refused: the vault refuses on a request's bytes (V2, V4-V6), which "
			   "the record does not carry",
			   r.action);
		return;
	}
	pol = policy_for(a, r.policy, &why);
	if (!pol) {
		not_judged(a, &r, "%s", why);
		return;
	}
	if (pol != a->cur)
		spec_world_reload(a->w, pol);
	a->cur = pol;
	if (strcmp(r.action, "http-request") == 0)
		judge_vault(a, &r, line, len);
	else if (strcmp(r.action, "connect") == 0)
		judge_connect(a, &r, line, len);
	else if (strcmp(r.action, "dns-query") == 0)
		judge_query(a, &r, line, len);
	else
		judge_learn(a, &r, line, len);
}

/* ---- the files, in seq order ---------------------------------------------- */

struct afile {
	const char *path;
	char *buf;
	size_t len;
	uint64_t first_seq;
};

static int afile_cmp(const void *x, const void *y)
{
	const struct afile *a = x, *b = y;

	return a->first_seq < b->first_seq ? -1 : a->first_seq > b->first_seq;
}

static void replay(struct audit *a, const struct afile *f)
{
	const char *p = f->buf, *end = f->buf + f->len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (n > 2 && p[0] == '{' && p[1] == '"' && p[2] != 'c') /* not a checkpoint */
			judge(a, p, n);
		p += n + 1;
	}
}

static void report_text(const struct audit *a)
{
	printf("audit: %llu records, %llu verdicts checked against the spec's model: %llu "
	       "confirmed, %llu disagreements, %llu not judged\n",
	       (unsigned long long)a->records, (unsigned long long)a->verdicts,
	       (unsigned long long)a->confirmed, (unsigned long long)a->disagreements,
	       (unsigned long long)a->unjudged);
	if (a->dis.len)
		fwrite(a->dis.p, 1, a->dis.len, stdout);
	if (a->disagreements > AUDIT_SHOW_MAX)
		printf("(%llu more disagreements not shown)\n",
		       (unsigned long long)(a->disagreements - AUDIT_SHOW_MAX));
	for (size_t i = 0; i < a->n_un; i++)
		printf("not judged: %llu record(s), first seq %llu: %s\n",
		       (unsigned long long)a->un[i].n, (unsigned long long)a->un[i].first_seq,
		       a->un[i].what);
}

static void report_json(struct audit *a, int vrc, const char *vtext, size_t vlen)
{
	struct pc_buf b;
	struct pc_json j;

	pc_buf_init(&b, 0, 0);
	pc_json_init(&j, &b);
	pc_json_obj(&j);
	pc_json_key(&j, "verified");
	pc_json_bool(&j, vrc == PC_EXIT_OK);
	pc_json_key(&j, "verify");
	pc_json_strn(&j, vtext ? vtext : "", vtext ? vlen : 0);
	pc_json_ku64(&j, "records", a->records);
	pc_json_ku64(&j, "verdicts", a->verdicts);
	pc_json_ku64(&j, "confirmed", a->confirmed);
	pc_json_ku64(&j, "disagreement_count", a->disagreements);
	pc_json_ku64(&j, "not_judged_count", a->unjudged);
	pc_json_key(&j, "disagreements");
	pc_json_arr(&j);
	if (a->dis.len > 1) { /* the items, after the '[' that opened them */
		j.more |= 1u << j.depth;
		pc_buf_put(&b, a->dis.p + 1, a->dis.len - 1);
	}
	pc_json_arr_end(&j);
	pc_json_key(&j, "not_judged");
	pc_json_arr(&j);
	for (size_t i = 0; i < a->n_un; i++) {
		pc_json_obj(&j);
		pc_json_kstr(&j, "what", a->un[i].what);
		pc_json_ku64(&j, "count", a->un[i].n);
		pc_json_ku64(&j, "first_seq", a->un[i].first_seq);
		pc_json_obj_end(&j);
	}
	pc_json_arr_end(&j);
	pc_json_obj_end(&j);
	if (!b.err)
		printf("%s\n", b.p);
	pc_buf_free(&b);
}

int cli_log_audit(int argc, char **argv, const char *config)
{
	static const struct option lo[] = {{"policies", required_argument, NULL, 'P'},
					   {"from", required_argument, NULL, 'F'},
					   {"json", no_argument, NULL, 'j'},
					   {NULL, 0, NULL, 0}};
	struct audit *a = calloc(1, sizeof(*a));
	struct afile *files = NULL;
	char **vargv = NULL, *vtext = NULL, pdir[PC_PATH_MAX + 16], eb[512];
	size_t vlen = 0, nf = 0;
	struct pc_err err = {0};
	FILE *vout = NULL;
	int opt, rc = PC_EXIT_ERROR, vrc, first;

	if (!a)
		return PC_EXIT_ERROR;
	/* argv[0] "log", argv[1] "audit": options from argv[2] on */
	argc--;
	argv++;
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (opt == 'P') {
			a->policies = optarg;
		} else if (opt == 'F') {
			char *end;

			a->from = strtoull(optarg, &end, 10);
			if (!optarg[0] || *end) {
				pc_cli_error("log audit", "--from: expected a seq, found '%s'",
					     optarg);
				rc = PC_EXIT_USAGE;
				goto out;
			}
		} else if (opt == 'j') {
			a->json = true;
		} else {
			rc = PC_EXIT_USAGE;
			goto out;
		}
	}
	if (config_load(config, &a->cfg, &err) < 0) {
		pc_cli_error("log audit", "%s", pc_err_str(&err, eb, sizeof(eb)));
		goto out;
	}
	if (!a->policies) {
		snprintf(pdir, sizeof(pdir), "%s/policies", a->cfg.state_dir);
		a->policies = pdir;
	}
	/* 1. the log is what logd signed (else nothing it says counts) */
	first = optind; /* the verifier's getopt moves optind */
	nf = (size_t)(argc - first);
	vargv = calloc(nf + 2, sizeof(*vargv));
	files = calloc(nf ? nf : 1, sizeof(*files));
	if (!vargv || !files)
		goto out;
	vargv[0] = "verify";
	for (size_t i = 0; i < nf; i++)
		vargv[i + 1] = argv[first + (int)i];
	vout = a->json ? open_memstream(&vtext, &vlen) : stdout;
	if (!vout)
		goto out;
	vrc = logd_verify_files(vout, (int)nf + 1, vargv, config);
	if (a->json) {
		fclose(vout);
		vout = NULL;
	}
	if (vrc != PC_EXIT_OK) {
		pc_cli_error("log audit", "the log does not verify: nothing in it is audited");
		if (a->json)
			report_json(a, vrc, vtext, vlen);
		rc = vrc;
		goto out;
	}
	/* 2. the replay, every file in seq order */
	if (nf == 0) {
		files[0].path = a->cfg.log.file;
		nf = 1;
	} else {
		for (size_t i = 0; i < nf; i++)
			files[i].path = argv[first + (int)i];
	}
	for (size_t i = 0; i < nf; i++) {
		struct arec r;
		const char *nl;
		size_t fl = strlen(files[i].path);

		/* the sidecars a glob of the log takes in are not segments */
		if ((fl > 11 && strcmp(files[i].path + fl - 11, ".checkpoint") == 0) ||
		    strstr(files[i].path, "-quarantine")) {
			files[i].first_seq = UINT64_MAX;
			continue;
		}
		if (pc_file_read(files[i].path, (size_t)1 << 34, &files[i].buf, &files[i].len,
				 &err) < 0) {
			pc_cli_error("log audit", "%s", pc_err_str(&err, eb, sizeof(eb)));
			goto out;
		}
		memset(&r, 0, sizeof(r));
		nl = memchr(files[i].buf, '\n', files[i].len);
		if (logjson_each(files[i].buf, nl ? (size_t)(nl - files[i].buf) : files[i].len,
				 field, &r) == 0)
			files[i].first_seq = r.seq;
	}
	qsort(files, nf, sizeof(*files), afile_cmp);
	a->w = calloc(1, sizeof(*a->w));
	if (!a->w)
		goto out;
	spec_world_init(a->w, &a->cfg, NULL);
	pc_buf_init(&a->dis, 0, 0);
	pc_json_init(&a->dj, &a->dis);
	if (a->json)
		pc_json_arr(&a->dj); /* so that its items are separated */
	for (size_t i = 0; i < nf; i++)
		if (files[i].buf)
			replay(a, &files[i]);
	if (a->json)
		report_json(a, PC_EXIT_OK, vtext, vlen);
	else
		report_text(a);
	rc = a->disagreements || a->unjudged ? PC_EXIT_FAIL : PC_EXIT_OK;
	pc_buf_free(&a->dis);
	spec_world_free(a->w);
out:
	if (a->json && vout)
		fclose(vout);
	free(vtext);
	for (size_t i = 0; files && i < nf; i++)
		free(files[i].buf);
	free(files);
	free(vargv);
	for (size_t i = 0; i < a->n_pols; i++)
		policy_unref(a->pols[i].pol);
	free(a->w);
	free(a);
	return rc;
}
