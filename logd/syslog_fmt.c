/* RFC 5424 formatting of what logd exports: a record (ECS fields and its
 * hash as structured data, the short human form as MSG) or a checkpoint. */
#include "logd/logd_int.h"

#include <stdio.h>
#include <string.h>

/* An SD-PARAM: name="value" with ", \ and ] escaped (RFC 5424 6.3.3) and
 * control characters replaced, so no receiver splits the message. */
static void o_param(struct pc_buf *o, const char *name, const char *v)
{
	if (!v || !*v)
		return;
	pc_buf_put(o, " ", 1);
	pc_buf_puts(o, name);
	pc_buf_put(o, "=\"", 2);
	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;

		if (c == '"' || c == '\\' || c == ']')
			pc_buf_put(o, "\\", 1);
		pc_buf_put(o, (unsigned char)c < 0x20 || c == 0x7f ? "?" : v, 1);
	}
	pc_buf_put(o, "\"", 1);
}

static void o_uparam(struct pc_buf *o, const char *name, uint64_t v)
{
	char b[24];

	if (!v)
		return;
	snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
	o_param(o, name, b);
}

static void o_header(struct pc_buf *o, int sev, uint64_t time_ms, const char *host, long pid,
		     const char *msgid)
{
	char ts[32], b[600];

	snprintf(b, sizeof(b), "<%d>1 %s %s portcullis-logd %ld %s [" LOGX_SD_ID,
		 LOGX_FACILITY * 8 + sev, pc_time_rfc3339(time_ms, ts, sizeof(ts)), host, pid,
		 msgid);
	pc_buf_puts(o, b);
}

int logx_format_record(const struct logrec *r, uint64_t seq, uint64_t time_ms,
		       const uint8_t hash[MERKLE_HASH], const char *host, long pid, char *buf,
		       size_t len)
{
	struct pc_buf o;
	char hx[2 * MERKLE_HASH + 1], a[PC_ADDRSTRLEN], t[16], port[8] = "", text[1200];
	const char *verdict = r->verdict == LOGREC_ALLOWED   ? "allowed"
			      : r->verdict == LOGREC_REFUSED ? "refused"
							     : "";
	const char *target = r->domain ? r->domain : r->dns_name ? r->dns_name : r->sni;
	int sev = r->action == LOGREC_EXFIL	 ? 1
		  : r->verdict == LOGREC_REFUSED ? 4
		  : r->action == LOGREC_SEGMENT	 ? 5
						 : 6;

	if (len < 64)
		return PC_EINVAL;
	/* one byte short of len: a message that fills buf is refused as
	 * possibly truncated, as a receiver would see it */
	pc_buf_init_fixed(&o, buf, len - 1, 0);
	merkle_hex(hash, hx);
	o_header(&o, sev, time_ms, host, pid, logrec_action_name(r->action));
	o_uparam(&o, "seq", seq);
	o_param(&o, "hash", hx);
	o_param(&o, "event.action", logrec_action_name(r->action));
	if (r->verdict != LOGREC_NONE)
		o_param(&o, "event.outcome", r->verdict == LOGREC_ALLOWED ? "success" : "failure");
	o_param(&o, "event.reason", r->reason);
	o_param(&o, "sandbox", r->sandbox);
	o_param(&o, "policy", r->policy);
	o_param(&o, "rule.name", r->rule);
	if (r->src.addr.family) {
		o_param(&o, "source.ip", pc_addr_str(&r->src.addr, a, sizeof(a)));
		o_uparam(&o, "source.port", r->src.port);
	}
	if (r->dst.addr.family) {
		o_param(&o, "destination.ip", pc_addr_str(&r->dst.addr, a, sizeof(a)));
		o_uparam(&o, "destination.port", r->dst.port);
	}
	o_param(&o, "destination.domain", r->domain);
	o_uparam(&o, "network.iana_number", r->transport);
	o_param(&o, "dns.question.name", r->dns_name);
	if (r->dns_type)
		o_param(&o, "dns.question.type", logrec_dns_type_name(r->dns_type, t, sizeof(t)));
	o_param(&o, "dns.resolved_ip", r->dns_answers);
	o_param(&o, "tls.client.server_name", r->sni);
	o_param(&o, "http.request.method", r->http_method);
	o_param(&o, "url.path", r->http_path);
	o_uparam(&o, "http.response.status_code", r->http_status);
	o_param(&o, "secrets", r->secrets);
	pc_buf_put(&o, "] ", 2);
	/* MSG: the short human form */
	if (r->dst.port && target)
		snprintf(port, sizeof(port), ":%u", r->dst.port);
	snprintf(text, sizeof(text), "#%llu %s%s%s%s%s%s%s%s%s", (unsigned long long)seq, verdict,
		 *verdict ? " " : "", logrec_action_name(r->action), target ? " " : "",
		 target ? target : "", port, r->reason ? " (" : "", r->reason ? r->reason : "",
		 r->reason ? ")" : "");
	for (char *p = text; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	pc_buf_puts(&o, text);
	if (r->message && *r->message) {
		pc_buf_put(&o, ": ", 2);
		for (const char *p = r->message; *p; p++)
			pc_buf_put(&o, (unsigned char)*p < 0x20 || *p == 0x7f ? "?" : p, 1);
	}
	if (o.err || o.len + 1 >= len)
		return PC_EINVAL; /* truncated: refuse rather than send half a message */
	return (int)o.len;
}

int logx_format_checkpoint(const char *note, size_t nlen, const char *host, long pid, char *buf,
			   size_t len)
{
	struct pc_buf o;
	struct checkpoint cp;
	const char *blank = memmem(note, nlen, "\n\n", 2);
	char root[2 * MERKLE_HASH + 1], body[CHECKPOINT_MAX];

	if (!blank || checkpoint_body_parse(note, (size_t)(blank - note) + 1, &cp, NULL) < 0 ||
	    nlen >= sizeof(body) || len < 64)
		return PC_EINVAL;
	pc_buf_init_fixed(&o, buf, len - 1, 0);
	merkle_hex(cp.root, root);
	o_header(&o, 6, cp.time_ms, host, pid, "checkpoint");
	o_param(&o, "log.origin", cp.origin);
	o_uparam(&o, "log.tree_size", cp.size);
	o_param(&o, "log.root_hex", root);
	pc_buf_put(&o, "] ", 2);
	/* MSG: the signed note, newlines written as \n, so a copy can be
	 * checked with the public key after turning them back */
	for (size_t i = 0; i < nlen; i++)
		pc_buf_put(&o, note[i] == '\n' ? "\\n" : note + i, note[i] == '\n' ? 2 : 1);
	if (o.err || o.len + 1 >= len)
		return PC_EINVAL;
	return (int)o.len;
}
