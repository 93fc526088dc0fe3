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
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define AUDIT_POLICIES_MAX 64
#define AUDIT_SHOW_MAX	   200 /* disagreements printed in full */
#define AUDIT_RECENT	   64
/* An answer's addresses are learned once its record is acknowledged
 * (docs/dnsguard.md), and a queue thread's records reach the log in the
 * order logd takes them: a connect judged on another thread in between is
 * refused, yet its record may follow the answer's. Refusals of addresses
 * an answer taught less than this before are such races, not lies (a
 * refusal is never a way out). */
#define AUDIT_COMMIT_MS 1000

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
	uint32_t ttl;	  /* portcullis.dns.ttl; 0: the record predates it */
	char code[48];	  /* event.code */
	bool from_vault;  /* portcullis.sender: the vault wrote it */
	bool started;	  /* the engine's policy-load at its start */
	char held[32];	  /* portcullis.held.bytes: what a refused held flow's bytes were */
	uint32_t held_ms; /* portcullis.held.ms: held that long (0: not recorded) */
	uint32_t quota;	  /* portcullis.quota: the share that was full (0: not recorded) */
	/* a log-segment record of a tail logd set aside at its start: the
	 * quarantine file (its base name) and the SHA-256 of its bytes */
	char qfile[256];
	char qsha[2 * crypto_hash_sha256_BYTES + 1];
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
	const char *path; /* the file being replayed (its directory holds its quarantine files) */
	bool in_tail;	  /* replaying a set-aside tail */
	uint64_t tail_lines, tails;
	struct unjudged un[AUDIT_UNJUDGED_KINDS];
	size_t n_un;
	uint64_t unjudged;
	/* the addresses the last answers taught, and when their records
	 * were written (refused connects racing them: recent_learned) */
	struct {
		char sandbox[POLICY_NAME_MAX];
		struct pc_addr addr;
		uint64_t time_ms;
	} recent[AUDIT_RECENT];
	size_t recent_next;
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

static int field(void *ctx, const char *k, size_t kl, enum logjson_type t, const char *v, size_t vl)
{
	struct arec *r = ctx;
	char tmp[512];

	if (LOGJSON_KEY_IS(k, kl, "event.sequence") || LOGJSON_KEY_IS(k, kl, "seq")) {
		r->seq = jnum(v, vl);
		r->has_seq = true;
	} else if (LOGJSON_KEY_IS(k, kl, "@timestamp")) {
		jstr(v, vl, tmp, sizeof(tmp));
		r->time_ms = time_ms_of(tmp);
	} else if (LOGJSON_KEY_IS(k, kl, "event.action")) {
		jstr(v, vl, r->action, sizeof(r->action));
	} else if (LOGJSON_KEY_IS(k, kl, "event.outcome")) {
		jstr(v, vl, tmp, sizeof(tmp));
		r->verdict = strcmp(tmp, "success") == 0   ? LOGREC_ALLOWED
			     : strcmp(tmp, "failure") == 0 ? LOGREC_REFUSED
							   : LOGREC_NONE;
	} else if (LOGJSON_KEY_IS(k, kl, "event.reason")) {
		jstr(v, vl, r->reason, sizeof(r->reason));
	} else if (LOGJSON_KEY_IS(k, kl, "portcullis.sandbox") ||
		   LOGJSON_KEY_IS(k, kl, "sandbox")) {
		jstr(v, vl, r->sandbox, sizeof(r->sandbox));
	} else if (LOGJSON_KEY_IS(k, kl, "portcullis.policy") || LOGJSON_KEY_IS(k, kl, "policy")) {
		jstr(v, vl, r->policy, sizeof(r->policy));
	} else if (LOGJSON_KEY_IS(k, kl, "source.ip")) {
		jstr(v, vl, tmp, sizeof(tmp));
		pc_addr_parse(tmp, &r->src.addr);
	} else if (LOGJSON_KEY_IS(k, kl, "source.port")) {
		r->src.port = (uint16_t)jnum(v, vl);
	} else if (LOGJSON_KEY_IS(k, kl, "destination.ip")) {
		jstr(v, vl, tmp, sizeof(tmp));
		pc_addr_parse(tmp, &r->dst.addr);
	} else if (LOGJSON_KEY_IS(k, kl, "destination.port")) {
		r->dst.port = (uint16_t)jnum(v, vl);
	} else if (LOGJSON_KEY_IS(k, kl, "network.transport")) {
		jstr(v, vl, tmp, sizeof(tmp));
		r->proto = proto_of(tmp);
	} else if (LOGJSON_KEY_IS(k, kl, "dns.question.name")) {
		jstr(v, vl, r->qname, sizeof(r->qname));
	} else if (LOGJSON_KEY_IS(k, kl, "dns.question.type")) {
		jstr(v, vl, tmp, sizeof(tmp));
		r->qtype = qtype_of(tmp);
	} else if (LOGJSON_KEY_IS(k, kl, "portcullis.dns.ttl")) {
		r->ttl = (uint32_t)jnum(v, vl);
	} else if (LOGJSON_KEY_IS(k, kl, "portcullis.sender")) {
		r->from_vault = vl == 7 && memcmp(v, "\"vault\"", 7) == 0;
	} else if (LOGJSON_KEY_IS(k, kl, "event.code")) {
		jstr(v, vl, r->code, sizeof(r->code));
	} else if (LOGJSON_KEY_IS(k, kl, "message")) {
		jstr(v, vl, tmp, sizeof(tmp));
		r->started = strcmp(tmp, "loaded at start") == 0;
	} else if (LOGJSON_KEY_IS(k, kl, "portcullis.held.bytes")) {
		jstr(v, vl, r->held, sizeof(r->held));
	} else if (LOGJSON_KEY_IS(k, kl, "portcullis.held.ms")) {
		r->held_ms = (uint32_t)jnum(v, vl);
	} else if (LOGJSON_KEY_IS(k, kl, "portcullis.quota")) {
		r->quota = (uint32_t)jnum(v, vl);
	} else if (LOGJSON_KEY_IS(k, kl, "portcullis.quarantine.file") ||
		   LOGJSON_KEY_IS(k, kl, "log.quarantine.file")) {
		jstr(v, vl, r->qfile, sizeof(r->qfile));
	} else if (LOGJSON_KEY_IS(k, kl, "portcullis.quarantine.sha256") ||
		   LOGJSON_KEY_IS(k, kl, "log.quarantine.sha256")) {
		jstr(v, vl, r->qsha, sizeof(r->qsha));
	} else if (LOGJSON_KEY_IS(k, kl, "tls.client.server_name")) {
		jstr(v, vl, r->sni, sizeof(r->sni));
	} else if ((LOGJSON_KEY_IS(k, kl, "portcullis.secrets") ||
		    LOGJSON_KEY_IS(k, kl, "secrets")) &&
		   t == LOGJSON_ARRAY) {
		/* ["A","B"] as "A,B": secret names hold no quote or comma */
		size_t o = 0;

		for (size_t i = 0; i < vl && o + 1 < sizeof(r->secrets); i++)
			if (v[i] != '[' && v[i] != ']' && v[i] != '"')
				r->secrets[o++] = v[i];
		r->secrets[o] = '\0';
	} else if (LOGJSON_KEY_IS(k, kl, "dns.resolved_ip") && t == LOGJSON_ARRAY) {
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

/* One packet of a replayed held flow: from the sandbox (out) or from the
 * server, its bytes described as the model reads them. */
static void step(struct audit *a, const struct spec_pkt *syn, bool out, uint8_t flags, uint32_t seq,
		 uint32_t ack, const uint8_t *data, size_t len, enum spec_stream st,
		 const char *sni, struct spec_verdict *v)
{
	struct spec_pkt p = *syn;

	if (!out) {
		p.dir = SPEC_IN;
		p.src = syn->dst;
		p.sport = syn->dport;
		p.dst = syn->src;
		p.dport = syn->sport;
	}
	p.tcp_flags = flags;
	p.seq = seq;
	p.ack = ack;
	p.ct = SPEC_CT_EST;
	p.pl = len ? SPEC_PL_STREAM : SPEC_PL_NONE;
	p.stream = st;
	if (sni)
		pc_strlcpy(p.stream_sni, sni, sizeof(p.stream_sni));
	p.data = data;
	p.len = len;
	p.stream_all = data;
	p.stream_all_len = len;
	memset(v, 0, sizeof(*v));
	spec_judge(a->w, &p, v);
}

#define ISN	 1000u
#define SRV	 5000u
#define F_ACK	 0x10
#define F_PSHACK 0x18

/* A held flow's outcome (S24, then H1-H13a): the record's own facts stand
 * for what its bytes were. An allowed record: a server name for a
 * ClientHello naming it (after the server's SYN-ACK), "not TLS" for plain
 * bytes (H11). A refused one: portcullis.held.bytes, the class the engine
 * saw, as the shortest sequence the spec's rows read that way, its last
 * packet portcullis.held.ms after the SYN (docs/logd.md, "Audit"). */
static void judge_held(struct audit *a, const struct arec *r, const struct spec_pkt *syn,
		       struct spec_verdict *v, bool *judged)
{
	static const uint8_t plain[] = "GET / HTTP/1.1\r\n\r\n";
	static const uint8_t part[] = {0x16, 0x03, 0x01}; /* a ClientHello's first bytes */
	static const uint8_t other[] = {0x17, 0x03, 0x01};
	static const uint8_t alert[] = {0x15, 0x03, 0x01, 0x00, 0x02, 0x01, 0x00};
	static const uint8_t big[] = {0x16, 0x03, 0x01, 0xff, 0xff};
	static const uint8_t nosni[] = {0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0x00, 0x00, 0x00};
	/* RFC 8446's HelloRetryRequest random, at byte 11 of a ServerHello */
	static const uint8_t hrr_random[32] = {0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
					       0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
					       0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
					       0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c};
	uint8_t hello[1024], srv[64] = {0x16, 0x03, 0x03, 0x00, 0x3b, 0x02};
	const char *k = r->held;
	uint64_t t_rec = a->w->now_ms;
	struct spec_verdict sv;
	size_t n = 0;
	bool tls = r->sni[0] != 0;

	*judged = false;
	if (r->verdict == LOGREC_ALLOWED) {
		if (!r->sni[0] && !(spec_reason_is(SPEC_R_NOT_TLS, r->reason) &&
				    !spec_reason_is(SPEC_R_NO_SNI, r->reason)))
			return;
		k = "approved";
	} else if (!k[0] || !r->held_ms || !r->time_ms || r->time_ms < r->held_ms) {
		return; /* a log from before portcullis.held.*: not judged */
	}
	if (tls)
		n = pc_wire_client_hello(hello, r->sni);
	*judged = true;
	/* every packet but the last at the SYN's time; the last at the record's */
	if (r->verdict == LOGREC_REFUSED)
		a->w->now_ms = t_rec - r->held_ms;
#define LAST() (a->w->now_ms = t_rec)
	if (strcmp(k, "timeout") == 0) {
		LAST();
		step(a, syn, true, F_ACK, ISN + 1, 0, NULL, 0, SPEC_ST_PLAIN, NULL, v);
		return;
	}
	if (strcmp(k, "urgent") == 0) {
		struct spec_pkt u = *syn;

		LAST();
		u.tcp_flags = F_ACK | 0x20;
		u.urp = 1;
		u.seq = ISN + 1;
		u.ct = SPEC_CT_EST;
		memset(v, 0, sizeof(*v));
		spec_judge(a->w, &u, v);
		return;
	}
	if (strcmp(k, "mptcp") == 0) {
		struct spec_pkt m = *syn;

		LAST();
		m.mptcp = true; /* the held SYN sent again with it (H5a) */
		step(a, &m, true, 0x02, ISN, 0, NULL, 0, SPEC_ST_PLAIN, NULL, v);
		return;
	}
	if (strcmp(k, "another-isn") == 0) {
		LAST();
		step(a, syn, true, 0x02, ISN + 7, 0, NULL, 0, SPEC_ST_PLAIN, NULL, v);
		return;
	}
	if (strcmp(k, "before-accept") == 0) {
		LAST();
		step(a, syn, true, F_PSHACK, ISN + 1, 0, part, sizeof(part), SPEC_ST_PLAIN, NULL,
		     v);
		return;
	}
	if (strcmp(k, "sandbox-changed") == 0) {
		struct spec_pkt o = *syn;

		memset(&o.from, 0, sizeof(o.from)); /* a sender no rule matches */
		LAST();
		step(a, &o, true, F_ACK, ISN + 1, 0, NULL, 0, SPEC_ST_PLAIN, NULL, v);
		return;
	}
	/* the server's SYN-ACK: the rest needs the connection */
	step(a, syn, false, 0x12, SRV, ISN + 1, NULL, 0, SPEC_ST_PLAIN, NULL, &sv);
	if (strcmp(k, "before-start") == 0) {
		LAST();
		step(a, syn, true, F_PSHACK, ISN, SRV + 1, part, sizeof(part), SPEC_ST_PLAIN, NULL,
		     v);
	} else if (strcmp(k, "bytes-differ") == 0) {
		step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, part, sizeof(part), SPEC_ST_PLAIN,
		     NULL, &sv);
		LAST();
		step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, other, sizeof(other), SPEC_ST_PLAIN,
		     NULL, v);
	} else if (strcmp(k, "fin") == 0) {
		step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, part, sizeof(part), SPEC_ST_PLAIN,
		     NULL, &sv);
		LAST();
		step(a, syn, true, 0x11, ISN + 2, SRV + 1, NULL, 0, SPEC_ST_PLAIN, NULL, v);
	} else if (strcmp(k, "tls-malformed") == 0) {
		LAST();
		step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, alert, sizeof(alert), SPEC_ST_PLAIN,
		     NULL, v);
	} else if (strcmp(k, "too-large") == 0) {
		LAST();
		step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, big, sizeof(big), SPEC_ST_PLAIN,
		     NULL, v);
	} else if (strcmp(k, "client-hello-no-name") == 0) {
		LAST();
		step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, nosni, sizeof(nosni), SPEC_ST_NOSNI,
		     NULL, v);
	} else if (strcmp(k, "client-hello") == 0 && tls) {
		LAST();
		step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, hello, n, SPEC_ST_CH, r->sni, v);
	} else if (strcmp(k, "not-tls") == 0) {
		LAST();
		step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, plain, sizeof(plain) - 1,
		     SPEC_ST_PLAIN, NULL, v);
	} else if (strcmp(k, "approved") == 0) {
		if (tls)
			step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, hello, n, SPEC_ST_CH, r->sni,
			     v);
		else
			step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, plain, sizeof(plain) - 1,
			     SPEC_ST_PLAIN, NULL, v);
	} else if ((strcmp(k, "hello-retry") == 0 && tls) || strcmp(k, "no-longer-allowed") == 0) {
		/* approved, then the server's first bytes: a HelloRetryRequest
		 * (H13a), or a ServerHello acknowledging every judged byte that
		 * promotes it when the policy in force still allows it (H13) */
		uint32_t end;

		if (tls)
			step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, hello, n, SPEC_ST_CH, r->sni,
			     &sv);
		else
			step(a, syn, true, F_PSHACK, ISN + 1, SRV + 1, plain, sizeof(plain) - 1,
			     SPEC_ST_PLAIN, NULL, &sv);
		end = ISN + 1 + (uint32_t)(tls ? n : sizeof(plain) - 1);
		if (strcmp(k, "hello-retry") == 0)
			memcpy(srv + 11, hrr_random, sizeof(hrr_random));
		LAST();
		step(a, syn, false, F_PSHACK, SRV + 1, end, srv, sizeof(srv), SPEC_ST_PLAIN, NULL,
		     v);
	} else {
		*judged = false;
	}
	LAST();
#undef LAST
}

static void recent_add(struct audit *a, const struct arec *r)
{
	for (size_t i = 0; i < r->n_answers; i++) {
		size_t k = a->recent_next++ % AUDIT_RECENT;

		pc_strlcpy(a->recent[k].sandbox, r->sandbox, sizeof(a->recent[k].sandbox));
		a->recent[k].addr = r->answers[i];
		a->recent[k].time_ms = r->time_ms;
	}
}

/* Was the connect's address taught this sandbox by an answer whose record
 * came less than AUDIT_COMMIT_MS before it? */
static bool recent_learned(const struct audit *a, const struct arec *r)
{
	for (size_t i = 0; i < AUDIT_RECENT; i++)
		if (a->recent[i].time_ms && strcmp(a->recent[i].sandbox, r->sandbox) == 0 &&
		    pc_addr_eq(&a->recent[i].addr, &r->dst.addr) &&
		    r->time_ms >= a->recent[i].time_ms &&
		    r->time_ms - a->recent[i].time_ms < AUDIT_COMMIT_MS)
			return true;
	return false;
}

/* S3's record: the packet did not parse, or was a fragment (its event.code
 * says which; a record from before event.code, its reason's start). A held
 * flow's "malformed TLS ClientHello" is not one: that is its bytes'. */
static bool malformed_packet(const struct arec *r)
{
	if (r->code[0])
		return strcmp(r->code, "malformed") == 0 || strcmp(r->code, "fragment") == 0;
	return strncmp(r->reason, "malformed packet", 16) == 0 ||
	       strncmp(r->reason, "IP fragment", 11) == 0;
}

static void judge_connect(struct audit *a, const struct arec *r, const char *line, size_t len)
{
	struct spec_pkt p = {0};
	struct spec_verdict v = {0};
	char allows[256];
	uint64_t t_rec = a->w->now_ms;

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
	/* a packet that did not parse is one whatever the record's outcome
	 * says (S3: only a refusal fits it) */
	p.malformed = malformed_packet(r);
	if (r->verdict == LOGREC_REFUSED && !p.malformed) {
		if (spec_reason_is(SPEC_R_UNKNOWN_PORT, r->reason))
			p.port_known = false;
		else if (p.proto == IPPROTO_TCP && spec_reason_is(SPEC_R_NO_CONN, r->reason))
			p.tcp_flags = 0x10; /* ACK: not a bare SYN */
		else if (p.proto == IPPROTO_TCP && spec_reason_is(SPEC_R_FASTOPEN, r->reason)) {
			p.pl = SPEC_PL_DATA;
			p.data = &one;
			p.len = 1;
		} else if (p.proto == IPPROTO_TCP && !r->held[0] &&
			   spec_reason_is(SPEC_R_URGENT, r->reason)) {
			p.tcp_flags |= 0x20; /* URG */
			p.urp = 1;
		} else if (p.proto == IPPROTO_TCP && !r->held[0] &&
			   spec_reason_is(SPEC_R_MPTCP, r->reason)) {
			p.mptcp = true; /* S22b */
		}
		/* a held flow's refusal: its SYN held_ms before the record */
		if (r->held[0] && r->held_ms && r->time_ms >= r->held_ms)
			a->w->now_ms = r->time_ms - r->held_ms;
	}
	if ((p.proto == IPPROTO_TCP || p.proto == IPPROTO_UDP) && !p.dst.family) {
		not_judged(a, r, "connect without a destination address");
		return;
	}
	spec_judge(a->w, &p, &v);
	a->w->now_ms = t_rec;
	if (v.may & SPEC_V_HOLD) {
		const char *row = v.row;
		bool judged;

		if (r->verdict == LOGREC_REFUSED && !r->held[0] &&
		    (strcmp(r->code, "held_quota") == 0 || strcmp(r->code, "held_full") == 0)) {
			/* S23: the SYN the spec would hold, refused because this
			 * sandbox holds its share of the queue thread's table
			 * (the share the record names) or the table is full; the
			 * model keeps no table of the engine's size, the record's
			 * quota is the fact */
			if (strcmp(r->code, "held_quota") == 0 && !r->quota)
				not_judged(
				    a, r,
				    "held-flow quota refusal without portcullis.quota (a log "
				    "from before it)");
			else
				a->confirmed++;
			spec_world_forget_flows(a->w);
			return;
		}
		judge_held(a, r, &p, &v, &judged);
		if (!judged) {
			if (r->verdict == LOGREC_REFUSED)
				not_judged(a, r,
					   "connect refused on a held flow's bytes without "
					   "portcullis.held.bytes and .ms (%s)",
					   r->code[0]	  ? r->code
					   : r->reason[0] ? r->reason
							  : "no reason");
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
	else if (r->verdict == LOGREC_REFUSED &&
		 (v.may & (SPEC_V_ALLOW | SPEC_V_VAULT | SPEC_V_HOLD)) && recent_learned(a, r))
		a->confirmed++; /* refused before the answer's addresses were learned */
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
	if (p->proto == IPPROTO_TCP) {
		/* a whole framed answer (S42b) at the first byte of the
		 * resolver's direction: the record stands for its bytes */
		static const uint8_t framed[14] = {0x00, 0x0c};

		p->tcp_flags = 0x18;
		p->seq = SRV + 1;
		p->ack = ISN + 1;
		p->data = framed;
		p->len = sizeof(framed);
	}
}

/* A TCP segment without payload from (src, sport) to (dst, dport). */
static void bare_seg(struct spec_pkt *x, enum spec_dir dir, const struct pc_addr *src,
		     uint16_t sport, const struct pc_addr *dst, uint16_t dport, uint8_t flags,
		     uint32_t seq, uint32_t ack, enum spec_ct ct)
{
	x->dir = dir;
	x->proto = IPPROTO_TCP;
	x->src = *src;
	x->sport = sport;
	x->dst = *dst;
	x->dport = dport;
	x->tcp_flags = flags;
	x->seq = seq;
	x->ack = ack;
	x->ct = ct;
}

/* The connection a DNS-over-TCP answer (p, from the resolver) comes on:
 * the sandbox's SYN (ISN) and the resolver's SYN-ACK (SRV), which make its
 * answer stream begin at SRV + 1 (S42b). judge_query_tcp does the same for
 * a query whose record is deferred to its answer. */
static void answer_connection(struct audit *a, const struct arec *r, const struct spec_pkt *p)
{
	const struct policy_sandbox *sb =
	    r->sandbox[0] ? policy_sandbox_by_name(a->cur, r->sandbox) : NULL;
	struct spec_pkt s = {0}, sa = {0};
	struct spec_verdict v;

	bare_seg(&s, SPEC_OUT, &p->dst, p->dport, &p->src, p->sport, 0x02, ISN, 0, SPEC_CT_NEW);
	s.port_known = true;
	s.from.addr = p->dst;
	if (sb) {
		s.from.has_mac = sb->match.has_mac;
		memcpy(s.from.mac, sb->match.mac, 6);
		pc_strlcpy(s.from.port, sb->match.port, sizeof(s.from.port));
	}
	spec_judge(a->w, &s, &v);
	bare_seg(&sa, SPEC_IN, &p->src, p->sport, &p->dst, p->dport, 0x12, SRV, ISN + 1,
		 SPEC_CT_EST);
	spec_judge(a->w, &sa, &v);
}

/* The query's message as the record describes it: a well-formed query
 * (its name and type), one whose shape the guard refuses (S9: a refusal of
 * event.code dns_malformed whose reason is none of DNS_MALFORMED's words,
 * e.g. "not exactly one question"; docs/dnsguard.md), or a message that
 * does not parse (S10). */
static enum spec_payload query_payload(const struct arec *r)
{
	if (r->verdict == LOGREC_REFUSED && strcmp(r->code, "dns_malformed") == 0)
		return spec_reason_is(SPEC_R_DNS_MALFORMED, r->reason) ? SPEC_PL_DNS_BAD
								       : SPEC_PL_DNS_SHAPE;
	return r->qname[0] && r->qtype ? SPEC_PL_DNS_QUERY : SPEC_PL_DNS_BAD;
}

/* DNS over TCP (S11-S14, S7a, S12a): the record is one judged message of a
 * stream, or a refusal its event.code names. The model is given the
 * shortest stream that makes it: the SYN (S12a: the stream from ISN + 1),
 * the resolver's SYN-ACK, then the message whole at the stream's next
 * byte; or the segments each refusal names. */
static void judge_query_tcp(struct audit *a, const struct arec *r, struct spec_pkt *p,
			    struct spec_verdict *v, bool *fact)
{
	static const uint8_t part[] = {0x00, 0x20, 0x12}, other[] = {0x00, 0x20, 0x34};
	static const uint8_t zero[] = {0x00, 0x00};
	uint8_t msg[14] = {0x00, 0x0c};
	struct spec_pkt s = *p, sa = {0};
	struct spec_verdict sv;
	const char *c = r->code;

	*fact = false;
	s.tcp_flags = 0x02;
	s.seq = ISN;
	s.pl = SPEC_PL_NONE;
	/* refusals of the segment whatever its stream: the SYN stands */
	if (strcmp(c, "tcp_urgent") == 0) {
		s.tcp_flags |= 0x20;
		s.urp = 1;
	} else if (strcmp(c, "tcp_mptcp") == 0) {
		s.mptcp = true;
	} else if (strcmp(c, "tcp_fast_open") == 0) {
		s.pl = SPEC_PL_DATA;
		s.data = part;
		s.len = sizeof(part);
	} else if (strcmp(c, "dns_tcp_no_stream") == 0) {
		s.tcp_flags = F_PSHACK;
		s.seq = ISN + 1;
		s.pl = SPEC_PL_DATA;
		s.data = part;
		s.len = sizeof(part);
	}
	spec_judge(a->w, &s, v);
	if (s.tcp_flags & 0x20 || s.len || s.mptcp || !(v->may & SPEC_V_PASS))
		return; /* the SYN decided (S5, S7, S7a, S7b, S12, S12a) */
	if (strcmp(c, "dns_tcp_quota") == 0) {
		/* S14: the stream the spec would keep, refused because the
		 * sandbox holds its share of the queue thread's streams (the
		 * share the record names); the model keeps no table of the
		 * engine's size: the record's quota is the fact */
		*fact = r->quota != 0;
		return;
	}
	bare_seg(&sa, SPEC_IN, &s.dst, s.dport, &s.src, s.sport, 0x12, SRV, ISN + 1, SPEC_CT_EST);
	spec_judge(a->w, &sa, &sv);
	s.tcp_flags = F_PSHACK;
	s.seq = ISN + 1;
	s.ack = SRV + 1;
	s.ct = SPEC_CT_EST;
	if (strcmp(c, "dns_tcp_overlap") == 0) {
		/* bytes placed, then other bytes over them (S12a) */
		s.pl = SPEC_PL_DATA;
		s.data = part;
		s.len = sizeof(part);
		spec_judge(a->w, &s, &sv);
		s.data = other;
		spec_judge(a->w, &s, v);
		return;
	}
	s.tcp_framed = true;
	s.pl = query_payload(r);
	if (s.pl == SPEC_PL_DNS_BAD && strcmp(c, "dns_malformed") == 0 &&
	    !spec_reason_is(SPEC_R_DNS_MALFORMED, r->reason)) {
		/* S13: a zero-length message, bytes sent again that differ */
		s.data = zero;
		s.len = sizeof(zero);
	} else {
		s.data = msg;
		s.len = sizeof(msg);
	}
	s.qtype = r->qtype;
	pc_strlcpy(s.qname, r->qname, sizeof(s.qname));
	spec_judge(a->w, &s, v);
}

static void judge_query(struct audit *a, const struct arec *r, const char *line, size_t len)
{
	struct spec_pkt p = {0};
	struct spec_verdict v = {0};
	char allows[256];
	bool fact = false;
	size_t pending = a->w->n_pending;

	sender_of(a, r, &p);
	p.ct = SPEC_CT_NEW;
	p.pl = query_payload(r);
	p.qtype = r->qtype;
	pc_strlcpy(p.qname, r->qname, sizeof(p.qname));
	if (r->proto == IPPROTO_TCP)
		judge_query_tcp(a, r, &p, &v, &fact);
	else
		spec_judge(a->w, &p, &v);
	if (r->verdict == LOGREC_REFUSED && strcmp(r->code, "dns_owed_quota") == 0 &&
	    (v.may & SPEC_V_PASS) && v.row && strcmp(v.row, "S8") == 0)
		fact = true; /* S8a: a query S8 would pass, refused while the sandbox owes
				its share of deferred records (the model keeps none) */
	if (fact || record_fits(&v, r, LOGREC_DNS_QUERY))
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
		recent_add(a, r);
	}
	/* a refused query leaves nothing outstanding (S8a: the model
	 * passed it); over TCP, the next record is another stream */
	if (r->verdict == LOGREC_REFUSED && a->w->n_pending == pending + 1)
		a->w->n_pending--;
	spec_world_forget_flows(a->w);
}

static void judge_learn(struct audit *a, const struct arec *r, const char *line, size_t len)
{
	struct spec_pkt p;
	struct spec_verdict v = {0};
	char allows[256];

	answer_pkt(a, r, &p, false);
	recent_add(a, r);
	/* a refusal for want of a stream stands on the segment alone */
	if (r->proto == IPPROTO_TCP && strcmp(r->code, "dns_tcp_no_stream") != 0)
		answer_connection(a, r, &p);
	if (r->proto == IPPROTO_TCP && strcmp(r->code, "tcp_urgent") == 0) {
		p.tcp_flags |= 0x20; /* S42a */
		p.urp = 1;
	}
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
	spec_world_forget_flows(a->w);
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

/* The vault's refusals by the check that refused (event.code, set where
 * the vault decides): the spec's row it applies, or docs/vault.md's
 * bounds (sizes, timeouts, limits, a parser's refusal), which refuse under
 * any policy. NULL: not one of the vault's refusals. */
static const char *vault_row(const char *code)
{
	static const struct {
		const char *prefix, *row;
	} rows[] = {
	    {"vault_not_redirected", "V1"},
	    {"vault_not_allowed", "V1"},
	    {"tls_malformed", "V1"},
	    {"tls_no_server_name", "V1"},
	    {"vault_host_mismatch", "V2"},
	    {"vault_placeholder_", "V4"},
	    {"vault_secret_", "V4"},
	    {"vault_two_secrets", "V4"},
	    {"vault_method_", "V4"},
	    {"vault_request_timeout", "V6"},
	    {"vault_certificate_failed", "bounds"},
	    {"vault_connection_limit", "bounds"},
	    {"vault_no_worker", "bounds"},
	    {"vault_bad_request", "bounds"},
	    {"vault_head_too_large", "bounds"},
	    {"vault_sandbox_gone", "bounds"},
	    {"vault_upstream_failed", "bounds"},
	    {"vault_inject_too_large", "bounds"},
	    {"vault_websocket_malformed", "bounds"},
	    {"internal_error", "bounds"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (strncmp(code, rows[i].prefix, strlen(rows[i].prefix)) == 0)
			return rows[i].row;
	return NULL;
}

/* A refusal of the vault (connect, http-request, exfiltration): the check
 * that refused is the record's fact (event.code, with the server name and
 * port it names). Each of V1, V2, V4, V6 and the bounds requires or allows
 * a refusal given its fact; V1's "not on the allow list" is checked
 * against the policy the record names (an allowed name refused is a
 * disagreement). An allowed record that carries a refusal's code states
 * that a check refused it: a disagreement. */
static void judge_vault_refusal(struct audit *a, const struct arec *r, const char *line, size_t len,
				const struct policy *pol)
{
	const char *row = vault_row(r->code);
	char allows[1400];

	if (!row) {
		not_judged(a, r, "%s refused by the vault without a check's event.code (%s)",
			   r->action, r->code[0] ? r->code : "none");
		return;
	}
	if (r->verdict == LOGREC_ALLOWED || strcmp(r->action, "exfiltration") == 0) {
		if (r->verdict != LOGREC_REFUSED) {
			snprintf(allows, sizeof(allows),
				 "the request refused (its record's own check: %s)", r->code);
			disagree(a, r, line, len, row, allows);
			return;
		}
	}
	if ((strcmp(r->code, "vault_secret_not_bound") == 0 ||
	     strcmp(r->code, "vault_secret_wrong_host") == 0) &&
	    r->secrets[0] && !strchr(r->secrets, ',')) {
		/* V4's binding, the record's secret against the policy: one
		 * this sandbox has, bound to the request's server name and
		 * port, is no placeholder "bound elsewhere" */
		const struct policy_sandbox *sb =
		    pol && r->sandbox[0] ? policy_sandbox_by_name(pol, r->sandbox) : NULL;
		const struct policy_secret *ps = sb ? policy_secret_by_name(sb, r->secrets) : NULL;

		if (!pol) {
			not_judged(a, r, "%s refusal: its policy is not in the store", r->code);
			return;
		}
		if (ps && (strcmp(r->code, "vault_secret_not_bound") == 0 ||
			   (strcasecmp(ps->host, r->sni) == 0 && ps->port == r->dst.port))) {
			snprintf(allows, sizeof(allows),
				 "the request judged by V3 (%s is a secret of %s bound to %s:%u), "
				 "not refused as %s",
				 r->secrets, r->sandbox, ps->host, ps->port, r->code);
			disagree(a, r, line, len, "V4", allows);
			return;
		}
	}
	if (strcmp(r->code, "vault_not_allowed") == 0) {
		const struct policy_sandbox *sb =
		    pol && r->sandbox[0] ? policy_sandbox_by_name(pol, r->sandbox) : NULL;

		if (!pol) {
			not_judged(a, r,
				   "vault_not_allowed refusal: its policy is not in the store");
			return;
		}
		if (sb && r->sni[0] &&
		    policy_host_allows(sb, r->sni, IPPROTO_TCP, r->dst.port, NULL)) {
			snprintf(allows, sizeof(allows),
				 "%s:%u allowed to %s: the handshake goes on (V1)", r->sni,
				 r->dst.port, r->sandbox);
			disagree(a, r, line, len, "V1", allows);
			return;
		}
	}
	a->confirmed++;
}

static void judge(struct audit *a, const char *line, size_t len);

/* Judge each record line of buf in order (checkpoint lines are skipped):
 * a segment of the log, or a tail logd set aside. */
static void replay_lines(struct audit *a, const char *buf, size_t len)
{
	for (const char *p = buf, *end = buf + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (n > 2 && p[0] == '{' && p[1] == '"' && p[2] != 'c') /* not a checkpoint */
			judge(a, p, n);
		p += n + 1;
	}
}

/* logd set an unsealed tail aside at its start (docs/logd.md, "Recovery"):
 * records it had acknowledged, which the engine acted on (its start, the
 * answers it learned from) and still knows, but which no signature
 * covers. Their file is replayed here, where the record naming it stands,
 * for what it teaches the model and never as verdicts to confirm — only
 * when its bytes are the ones the sealed record names (the SHA-256). A
 * file missing or altered is a gap: said, and the audit fails. */
static void replay_tail(struct audit *a, const struct arec *r)
{
	const char *slash = a->path ? strrchr(a->path, '/') : NULL;
	const char *base = strrchr(r->qfile, '/');
	uint64_t from = a->from, records = a->records, nv = a->not_verdicts;
	uint8_t h[crypto_hash_sha256_BYTES];
	char path[PC_PATH_MAX + 300], hex[sizeof(r->qsha)];
	struct pc_err err = {0};
	char *buf = NULL;
	size_t len = 0;

	base = base ? base + 1 : r->qfile;
	snprintf(path, sizeof(path), "%.*s%s", slash ? (int)(slash - a->path + 1) : 0,
		 a->path ? a->path : "", base);
	if (pc_file_read(path, (size_t)1 << 34, &buf, &len, &err) < 0) {
		not_judged(a, r, "the tail logd set aside at its start could not be replayed: %s",
			   err.msg);
		return;
	}
	crypto_hash_sha256(h, (const unsigned char *)buf, len);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	if (strcmp(hex, r->qsha) != 0) {
		not_judged(a, r,
			   "the tail logd set aside at its start is not the one it sealed: %s has "
			   "sha256 %s, the log says %s",
			   path, hex, r->qsha);
		free(buf);
		return;
	}
	a->in_tail = true;
	a->from = UINT64_MAX; /* taught, not judged (judge's --from path) */
	replay_lines(a, buf, len);
	a->from = from;
	a->in_tail = false;
	a->tail_lines += a->records - records;
	a->tails++;
	a->records = records;
	a->not_verdicts = nv;
	free(buf);
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
	/* The engine started (again): what it had learned, its held flows and
	 * its DNS-over-TCP streams died with the old process, so the model's
	 * do too; a name learned before the restart allows nothing after it
	 * (docs/logd.md, "Audit"). */
	if (strcmp(r.action, "policy-load") == 0 && r.started && r.verdict == LOGREC_ALLOWED &&
	    !r.from_vault) {
		spec_world_free(a->w);
		spec_world_init(a->w, &a->cfg, a->cur);
	}
	if (strcmp(r.action, "log-segment") == 0 && r.qfile[0] && !a->in_tail)
		replay_tail(a, &r);
	verdict_kind = strcmp(r.action, "connect") == 0 || strcmp(r.action, "dns-query") == 0 ||
		       strcmp(r.action, "dns-learn") == 0 ||
		       strcmp(r.action, "http-request") == 0 ||
		       strcmp(r.action, "exfiltration") == 0;
	/* the new-flow limit's summary of what the kernel dropped before the
	 * queue (A3: no record per packet; limitlog.c counts them): no
	 * packet's verdict, no addresses to judge */
	if (!verdict_kind || (strcmp(r.action, "dns-learn") != 0 && r.verdict == LOGREC_NONE) ||
	    strcmp(r.code, "new_flow_limit") == 0) {
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
					else if (r.proto == IPPROTO_TCP) {
						bool fact;

						judge_query_tcp(a, &r, &p, &v, &fact);
						spec_world_forget_flows(a->w);
					}
				}
				if (r.n_answers) {
					answer_pkt(a, &r, &p, strcmp(r.action, "dns-query") == 0);
					if (r.proto == IPPROTO_TCP)
						answer_connection(a, &r, &p);
					spec_judge(a->w, &p, &v);
					spec_world_forget_flows(a->w);
				}
			}
		}
		return;
	}
	a->verdicts++;
	pol = policy_for(a, r.policy, &why);
	if (strcmp(r.action, "exfiltration") == 0 ||
	    (strcmp(r.action, "http-request") == 0 &&
	     (r.verdict != LOGREC_ALLOWED || vault_row(r.code))) ||
	    (strcmp(r.action, "connect") == 0 && r.from_vault)) {
		judge_vault_refusal(a, &r, line, len, pol);
		return;
	}
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
	a->path = f->path;
	replay_lines(a, f->buf, f->len);
}

static void report_text(const struct audit *a)
{
	printf("audit: %llu records, %llu verdicts checked against the spec's model: %llu "
	       "confirmed, %llu disagreements, %llu not judged\n",
	       (unsigned long long)a->records, (unsigned long long)a->verdicts,
	       (unsigned long long)a->confirmed, (unsigned long long)a->disagreements,
	       (unsigned long long)a->unjudged);
	if (a->tails)
		printf("replayed for what they taught, not judged: %llu record(s) of %llu tail(s) "
		       "logd set aside at its start (docs/logd.md, \"Audit\")\n",
		       (unsigned long long)a->tail_lines, (unsigned long long)a->tails);
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
	pc_json_ku64(&j, "set_aside_replayed", a->tail_lines);
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
