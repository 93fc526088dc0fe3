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

/* Facility and SD-ID, set once from the configuration before the export
 * starts (log.syslog.facility, log.syslog.enterprise_number). */
static int facility = LOGX_FACILITY;
static char sd_id[32] = LOGX_SD_ID;

void logx_set_identity(int fac, uint32_t pen)
{
	facility = fac;
	snprintf(sd_id, sizeof(sd_id), "portcullis@%u", pen);
}

int logx_facility(void)
{
	return facility;
}

const char *logx_sd_id(void)
{
	return sd_id;
}

static void o_header(struct pc_buf *o, int sev, uint64_t time_ms, const char *host, long pid,
		     const char *msgid)
{
	char ts[32], b[600];

	snprintf(b, sizeof(b), "<%d>1 %s %s portcullis-logd %ld %s [%s", facility * 8 + sev,
		 pc_time_rfc3339(time_ms, ts, sizeof(ts)), host, pid, msgid, sd_id);
	pc_buf_puts(o, b);
}

/* A record field as SD-PARAMs: a list as the same name repeated, once
 * per item (RFC 5424 6.3.3 allows it), as JSON has an array. */
static void o_field(void *ctx, const char *key, enum logrec_field_kind k, const char *s, uint64_t n)
{
	struct pc_buf *o = ctx;
	char b[256];

	if (k == LOGF_NUM) {
		o_uparam(o, key, n);
		return;
	}
	if (k == LOGF_STR || !s) {
		o_param(o, key, s);
		return;
	}
	while (*s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);

		if (len && len < sizeof(b)) {
			memcpy(b, s, len);
			b[len] = '\0';
			o_param(o, key, b);
		}
		s += len + (end ? 1 : 0);
	}
}

int logx_format_record(const struct logrec *r, uint64_t seq, uint64_t time_ms,
		       const uint8_t hash[MERKLE_HASH], const char *host, long pid, char *buf,
		       size_t len)
{
	struct pc_buf o;
	char hx[2 * MERKLE_HASH + 1], a[PC_ADDRSTRLEN], port[8] = "", text[1200];
	const char *verdict = r->verdict == LOGREC_ALLOWED   ? "allowed"
			      : r->verdict == LOGREC_REFUSED ? "refused"
							     : "";
	/* the destination: its name, else its address (IP-only records) */
	const char *target = r->domain		  ? r->domain
			     : r->dns_name	  ? r->dns_name
			     : r->sni		  ? r->sni
			     : r->dst.addr.family ? pc_addr_str(&r->dst.addr, a, sizeof(a))
						  : NULL;
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
	/* the record's fields, as in the JSON line (logrec_fields): the
	 * chain's own (event.sequence, event.hash) first */
	o_uparam(&o, LOGREC_SEQ_KEY, seq);
	o_param(&o, LOGREC_HASH_KEY, hx);
	logrec_fields(r, o_field, &o);
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
	o_param(&o, "portcullis.checkpoint.origin", cp.origin);
	o_uparam(&o, "portcullis.checkpoint.size", cp.size);
	o_param(&o, "portcullis.checkpoint.root", root);
	pc_buf_put(&o, "] ", 2);
	/* MSG: the signed note, newlines written as \n, so a copy can be
	 * checked with the public key after turning them back */
	for (size_t i = 0; i < nlen; i++)
		pc_buf_put(&o, note[i] == '\n' ? "\\n" : note + i, note[i] == '\n' ? 2 : 1);
	if (o.err || o.len + 1 >= len)
		return PC_EINVAL;
	return (int)o.len;
}
