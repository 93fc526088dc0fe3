/* Reading log lines back: a small reader for the flat JSON objects logd
 * writes, and the short human form `portcullis log show` prints:
 *   #4128 2026-12-01 14:02:13Z agent-1 refused CONNECT paste.example:443 (not on the allow list)
 * and the few fields of a record `portcullis top` counts (logrec_brief). */
#include "logd/logd_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t skip_ws(const char *s, size_t i, size_t n)
{
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i;
}

/* End of the JSON string starting at s[i] == '"': index after the closing
 * quote, or 0 if malformed. */
static size_t str_end(const char *s, size_t i, size_t n)
{
	for (i++; i < n; i++) {
		if (s[i] == '\\') {
			i++;
			continue;
		}
		if (s[i] == '"')
			return i + 1;
		if ((unsigned char)s[i] < 0x20)
			return 0;
	}
	return 0;
}

/* End of a scalar (number, true, false, null). */
static size_t scalar_end(const char *s, size_t i, size_t n)
{
	size_t start = i;

	while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ')
		i++;
	return i > start ? i : 0;
}

int logjson_each(const char *s, size_t n, logjson_fn fn, void *ctx)
{
	size_t i = skip_ws(s, 0, n);

	if (i >= n || s[i] != '{')
		return PC_EPARSE;
	i = skip_ws(s, i + 1, n);
	if (i < n && s[i] == '}')
		return skip_ws(s, i + 1, n) == n ? 0 : PC_EPARSE;
	for (;;) {
		size_t ks, ke, vs, ve;
		enum logjson_type t;

		if (i >= n || s[i] != '"' || !(ke = str_end(s, i, n)))
			return PC_EPARSE;
		ks = i;
		i = skip_ws(s, ke, n);
		if (i >= n || s[i] != ':')
			return PC_EPARSE;
		vs = i = skip_ws(s, i + 1, n);
		if (i >= n)
			return PC_EPARSE;
		if (s[i] == '"') {
			t = LOGJSON_STRING;
			ve = str_end(s, i, n);
		} else if (s[i] == '[') {
			t = LOGJSON_ARRAY;
			i = skip_ws(s, i + 1, n);
			ve = 0;
			if (i < n && s[i] == ']') {
				ve = i + 1;
			} else {
				while (i < n && s[i] == '"' && (i = str_end(s, i, n))) {
					i = skip_ws(s, i, n);
					if (i < n && s[i] == ']') {
						ve = i + 1;
						break;
					}
					if (i >= n || s[i] != ',')
						break;
					i = skip_ws(s, i + 1, n);
				}
			}
		} else {
			t = LOGJSON_SCALAR;
			ve = scalar_end(s, i, n);
		}
		if (!ve)
			return PC_EPARSE;
		if (fn && fn(ctx, s + ks + 1, ke - ks - 2, t, s + vs, ve - vs) < 0)
			return PC_EPARSE;
		i = skip_ws(s, ve, n);
		if (i < n && s[i] == ',') {
			i = skip_ws(s, i + 1, n);
			continue;
		}
		if (i < n && s[i] == '}')
			return skip_ws(s, i + 1, n) == n ? 0 : PC_EPARSE;
		return PC_EPARSE;
	}
}

/* The code point of the JSON escape at v[*i] == '\\' (v ends at end) as
 * UTF-8 into u; its length, *i past it. What is not a valid escape, or a
 * lone surrogate, is U+FFFD: shown, never passed on. */
/* Four hex digits (either case) at v[at..end): their value, or false. */
static bool hex4(const char *v, size_t at, size_t end, uint32_t *out)
{
	uint32_t x = 0;

	for (int k = 0; k < 4; k++) {
		int d = at + (size_t)k < end ? pc_hex_digit(v[at + (size_t)k]) : -1;
		if (d < 0)
			return false;
		x = x << 4 | (uint32_t)d;
	}
	*out = x;
	return true;
}

static size_t json_unescape_one(const char *v, size_t *i, size_t end, char u[4])
{
	static const char simple[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
	uint32_t cp = 0xfffd;
	size_t at = *i + 1;

	if (at >= end) {
		*i = end;
		goto put;
	}
	*i = at + 1;
	for (const char *p = simple; *p; p += 2)
		if (v[at] == p[0]) {
			u[0] = p[1];
			return 1;
		}
	if (v[at] == 'u') {
		uint32_t hi, lo;

		if (!hex4(v, at + 1, end, &hi))
			goto put;
		*i = at + 5;
		cp = hi;
		if (hi >= 0xdc00 && hi <= 0xdfff) {
			cp = 0xfffd;
		} else if (hi >= 0xd800 && hi <= 0xdbff) {
			size_t j = *i;

			cp = 0xfffd;
			if (j + 2 <= end && v[j] == '\\' && v[j + 1] == 'u') {
				if (hex4(v, j + 2, end, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
					cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
					*i = j + 6;
				}
			}
		}
	}
put:
	if (cp < 0x80) {
		u[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		u[0] = (char)(0xc0 | cp >> 6);
		u[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		u[0] = (char)(0xe0 | cp >> 12);
		u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	u[0] = (char)(0xf0 | cp >> 18);
	u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	u[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* A JSON string (with its quotes) as display text, appended to o: its
 * escapes decoded, then every code point that does not print escaped as
 * everywhere a record is shown (logesc_put). */
static void str_put(struct pc_buf *o, const char *v, size_t vlen)
{
	size_t i = 1, end = vlen - 1;

	while (i < end) {
		size_t run = i;
		char u[4];

		while (i < end && v[i] != '\\')
			i++;
		logesc_put(o, v + run, i - run, LOGESC_TEXT);
		if (i < end)
			logesc_put(o, u, json_unescape_one(v, &i, end, u), LOGESC_TEXT);
	}
}

/* (A fixed buffer that fills is not terminated: one byte is kept for it.) */
static void str_text(const char *v, size_t vlen, char *out, size_t outlen)
{
	struct pc_buf o;

	pc_buf_init_fixed(&o, out, outlen - 1, 0);
	str_put(&o, v, vlen);
	out[o.len] = '\0';
}

/* A scalar as display text: logd writes digits, a file may hold anything. */
static void scalar_text(const char *v, size_t vlen, char *out, size_t outlen)
{
	struct pc_buf o;

	pc_buf_init_fixed(&o, out, outlen - 1, 0);
	logesc_put(&o, v, vlen, LOGESC_TEXT);
	out[o.len] = '\0';
}

struct human {
	char seq[24], ts[32], action[32], reason[256], domain[256], dip[64], dport[8];
	char transport[16], qname[256], qtype[16], answers[256], method[16], path[256];
	char status[8], message[256], sandbox[64], sni[256];
	bool allowed, denied;
};

static int human_field(void *ctx, const char *k, size_t kl, enum logjson_type t, const char *v,
		       size_t vl)
{
	struct human *h = ctx;
	static const struct {
		const char *key;
		size_t off, size;
	} map[] = {
#define M(k, f) {k, offsetof(struct human, f), sizeof(((struct human *)0)->f)}
	    M("@timestamp", ts),
	    M("event.action", action),
	    M("event.reason", reason),
	    M("destination.domain", domain),
	    M("destination.ip", dip),
	    M("network.transport", transport),
	    M("dns.question.name", qname),
	    M("dns.question.type", qtype),
	    M("http.request.method", method),
	    M("url.path", path),
	    M("message", message),
	    M("sandbox", sandbox), /* before ECS names */
	    M("portcullis.sandbox", sandbox),
	    M("tls.client.server_name", sni),
#undef M
	};

	if ((LOGJSON_KEY_IS(k, kl, "seq") || LOGJSON_KEY_IS(k, kl, "event.sequence")) &&
	    t == LOGJSON_SCALAR) {
		scalar_text(v, vl, h->seq, sizeof(h->seq));
		return 0;
	}
	if (t == LOGJSON_SCALAR) {
		char *dst = NULL;
		size_t len = 0;

		if (LOGJSON_KEY_IS(k, kl, "destination.port"))
			dst = h->dport, len = sizeof(h->dport);
		else if (LOGJSON_KEY_IS(k, kl, "http.response.status_code"))
			dst = h->status, len = sizeof(h->status);
		if (dst)
			scalar_text(v, vl, dst, len);
		return 0;
	}
	if (t == LOGJSON_ARRAY) {
		if (LOGJSON_KEY_IS(k, kl, "event.type")) {
			h->allowed = memmem(v, vl, "\"allowed\"", 9) != NULL;
			h->denied = memmem(v, vl, "\"denied\"", 8) != NULL;
		} else if (LOGJSON_KEY_IS(k, kl, "dns.resolved_ip")) {
			/* ["a","b"] -> a,b */
			struct pc_buf o;
			size_t e;

			pc_buf_init_fixed(&o, h->answers, sizeof(h->answers) - 1, 0);
			for (size_t i = 0; i < vl; i++)
				if (v[i] == '"' && (e = str_end(v, i, vl))) {
					if (o.len)
						pc_buf_putc(&o, ',');
					str_put(&o, v + i, e - i);
					i = e - 1;
				}
			h->answers[o.len] = '\0';
		}
		return 0;
	}
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strlen(map[i].key) == kl && !memcmp(map[i].key, k, kl)) {
			str_text(v, vl, (char *)h + map[i].off, map[i].size);
			break;
		}
	return 0;
}

/* The verb and the target of the human form: "CONNECT", "paste.example:443". */
static void human_target(const struct human *h, char *act, size_t actlen, char *target, size_t tlen)
{
	const char *host;
	bool v6, other_transport;
	size_t i;

	if (!strcmp(h->action, "dns-query"))
		pc_strlcpy(act, "DNS", actlen);
	else if (!strcmp(h->action, "http-request"))
		pc_strlcpy(act, "HTTP", actlen);
	else {
		for (i = 0; h->action[i] && i + 1 < actlen; i++)
			act[i] =
			    (char)(h->action[i] >= 'a' && h->action[i] <= 'z' ? h->action[i] - 32
									      : h->action[i]);
		act[i] = '\0';
	}
	host = h->domain[0] ? h->domain : h->sni[0] ? h->sni : h->dip;
	v6 = strchr(host, ':') != NULL;
	other_transport = h->transport[0] && strcmp(h->transport, "tcp") != 0;
	if (!strcmp(h->action, "connect"))
		snprintf(target, tlen, "%s%s%s%s%s%s%s", v6 ? "[" : "", host, v6 ? "]" : "",
			 h->dport[0] ? ":" : "", h->dport, other_transport ? "/" : "",
			 other_transport ? h->transport : "");
	else if (!strcmp(h->action, "dns-query")) /* with its answer's addresses, if any */
		snprintf(target, tlen, "%s %s%s%s", h->qname, h->qtype, h->answers[0] ? " -> " : "",
			 h->answers);
	else if (!strcmp(h->action, "dns-learn"))
		snprintf(target, tlen, "%s -> %s", h->qname, h->answers);
	else if (!strcmp(h->action, "http-request") || !strcmp(h->action, "exfiltration"))
		snprintf(target, tlen, "%s%s%s%s%s%s", h->method, h->method[0] ? " " : "", host,
			 h->path, h->status[0] ? " -> " : "", h->status);
	else
		snprintf(target, tlen, "%s", h->message[0] ? h->message : h->sandbox);
}

/* "YYYY-MM-DDTHH:MM:SS...": what the human form cuts the date and the
 * time from (anything else, a record of another writer, shows as ?). */
static bool ts_shaped(const char *ts)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd";

	for (size_t i = 0; i < sizeof(shape) - 1; i++)
		if (shape[i] == 'd' ? ts[i] < '0' || ts[i] > '9' : ts[i] != shape[i])
			return false;
	return true;
}

int logrec_human(const char *line, size_t len, char *out, size_t outlen)
{
	struct human h;
	char act[32], target[800], reason[300] = "";
	int n;

	memset(&h, 0, sizeof(h));
	if (logjson_each(line, len, human_field, &h) < 0 || !h.seq[0] || !h.action[0])
		return PC_EPARSE;
	human_target(&h, act, sizeof(act), target, sizeof(target));
	/* a segment's reason is its message already */
	if (h.reason[0] && strcmp(h.action, "log-segment") != 0)
		snprintf(reason, sizeof(reason), " (%s)", h.reason);
	/* the date too: a log spans days (logrotate keeps weeks), and a time
	 * alone is ambiguous across them; the sandbox, so that a line says
	 * whose verdict it is without --json */
	n = snprintf(out, outlen, "#%s %.10s %.8sZ %s %s%s%s%s%s", h.seq,
		     ts_shaped(h.ts) ? h.ts : "\?\?\?\?-\?\?-\?\?",
		     ts_shaped(h.ts) ? h.ts + 11 : "??:??:??", h.sandbox[0] ? h.sandbox : "-",
		     h.allowed	? "allowed "
		     : h.denied ? "refused "
				: "",
		     act, target[0] ? " " : "", target, reason);
	if (n < 0 || (size_t)n >= outlen)
		return PC_EINVAL;
	return n;
}

/* "2026-12-01T20:15:29.123Z" as Unix milliseconds; 0 when it is not that. */
static uint64_t ts_ms(const char *ts)
{
	struct tm tm;
	const char *rest;
	uint64_t ms = 0;

	memset(&tm, 0, sizeof(tm));
	rest = strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest)
		return 0;
	if (*rest == '.')
		for (int d = 0, mul = 100; d < 3 && rest[1] >= '0' && rest[1] <= '9';
		     d++, mul /= 10)
			ms += (uint64_t)(*++rest - '0') * (uint64_t)mul;
	time_t t = timegm(&tm);
	return t > 0 ? (uint64_t)t * 1000 + ms : 0;
}

int logrec_brief(const char *line, size_t len, struct logrec_brief *out)
{
	struct human h;
	struct logrec_brief b;

	memset(&h, 0, sizeof(h));
	memset(&b, 0, sizeof(b));
	if (logjson_each(line, len, human_field, &h) < 0 || !h.seq[0] || !h.action[0])
		return PC_EPARSE;
	b.seq = strtoull(h.seq, NULL, 10);
	b.time_ms = ts_ms(h.ts);
	for (int a = 1; a < LOGREC_ACTION_MAX; a++)
		if (!strcmp(h.action, logrec_action_name((enum logrec_action)a)))
			b.action = (enum logrec_action)a;
	b.verdict = h.allowed ? LOGREC_ALLOWED : h.denied ? LOGREC_REFUSED : LOGREC_NONE;
	pc_strlcpy(b.sandbox, h.sandbox, sizeof(b.sandbox));
	human_target(&h, b.verb, sizeof(b.verb), b.target, sizeof(b.target));
	*out = b;
	return 0;
}
