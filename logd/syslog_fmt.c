/* RFC 5424 formatting of what logd exports: a record (ECS fields and its
 * hash as structured data, the short human form as MSG; without an
 * enterprise number, no structured data and the fields as a JSON MSG) or a
 * checkpoint. */
#include "logd/logd_int.h"

#include <stdio.h>
#include <string.h>

/* An SD-PARAM: name="value" with ", \ and ] escaped (RFC 5424 6.3.3) and
 * every code point that does not print escaped as log show does
 * (logesc_put), so no receiver splits the message and no terminal that
 * shows it obeys it. vcap (0: none) cuts a longer value at a character
 * boundary and ends it in "..." (an oversize record, logx_format_export). */
static void o_param_cap(struct pc_buf *o, const char *name, const char *v, size_t vcap)
{
	size_t n;
	bool cut = false;

	if (!v || !*v)
		return;
	n = strlen(v);
	if (vcap && n > vcap) {
		n = vcap;
		while (n > 0 && ((unsigned char)v[n] & 0xc0) == 0x80)
			n--;
		cut = true;
	}
	pc_buf_put(o, " ", 1);
	pc_buf_puts(o, name);
	pc_buf_put(o, "=\"", 2);
	logesc_put(o, v, n, LOGESC_SD);
	if (cut)
		pc_buf_put(o, "...", 3);
	pc_buf_put(o, "\"", 1);
}

static void o_param(struct pc_buf *o, const char *name, const char *v)
{
	o_param_cap(o, name, v, 0);
}

static void o_uparam(struct pc_buf *o, const char *name, uint64_t v)
{
	if (!v)
		return;
	pc_buf_put(o, " ", 1);
	pc_buf_puts(o, name);
	pc_buf_put(o, "=\"", 2);
	pc_buf_u64(o, v);
	pc_buf_put(o, "\"", 1);
}

/* Facility and SD-ID, set once from the configuration before the export
 * starts (log.syslog.facility, log.syslog.enterprise_number). "": no
 * enterprise number, so no SD-ID of ours (RFC 5424 6.3.2 allows an SD-ID
 * without "@" only for IANA's own, and 32473 is RFC 5612's number for
 * documentation): the structured data is "-" and MSG the fields as JSON. */
static int facility = LOGX_FACILITY;
static char sd_id[32] = "";

void logx_set_identity(int fac, uint32_t pen)
{
	facility = fac;
	if (pen)
		snprintf(sd_id, sizeof(sd_id), "portcullis@%u", pen);
	else
		sd_id[0] = '\0';
}

int logx_facility(void)
{
	return facility;
}

const char *logx_sd_id(void)
{
	return sd_id;
}

/* A record field as an SD-PARAM, its value cut at vcap (0: none). A list
 * is one SD-PARAM, its items joined by commas ("connection,allowed"): a
 * name repeated in one SD-ELEMENT is legal RFC 5424 (6.3.3), but parsers
 * that make a map of the element (rsyslog's mmpstrucdata, most SIEMs)
 * keep one of the values; no item holds a comma (the wire's lists are
 * comma-separated too), and the JSON body keeps the array. */
struct fieldctx {
	struct pc_buf *o;
	size_t vcap;
};

/* One per exported record: put piece by piece, the time from a per-second
 * cache (no snprintf: formatting is most of what export costs logd). */
static void o_header(struct pc_buf *o, int sev, uint64_t time_ms, const char *host, long pid,
		     const char *msgid)
{
	char ts[25];

	logrec_time_rfc3339(time_ms, ts);
	pc_buf_put(o, "<", 1);
	pc_buf_u64(o, (uint64_t)(facility * 8 + sev));
	pc_buf_put(o, ">1 ", 3);
	pc_buf_put(o, ts, 24);
	pc_buf_put(o, " ", 1);
	pc_buf_puts(o, host);
	pc_buf_puts(o, " portcullis-logd ");
	pc_buf_u64(o, (uint64_t)pid); /* getpid()'s: positive */
	pc_buf_put(o, " ", 1);
	pc_buf_puts(o, msgid);
	pc_buf_put(o, " ", 1);
	pc_buf_puts(o, sd_id[0] ? "[" : "-");
	pc_buf_puts(o, sd_id);
}

/* ---- the JSON MSG (no enterprise number): the same fields and names as
 * the structured data would carry, values cut at vcap (0: none) ---------- */
static void j_strcap(struct pc_buf *o, const char *key, const char *v, size_t vcap)
{
	size_t n;

	if (!v || !*v)
		return;
	n = strlen(v);
	pc_buf_puts(o, ",\"");
	pc_buf_puts(o, key);
	pc_buf_puts(o, "\":\"");
	if (vcap && n > vcap) {
		n = vcap;
		while (n > 0 && ((unsigned char)v[n] & 0xc0) == 0x80)
			n--;
		logesc_put(o, v, n, LOGESC_JSON);
		pc_buf_puts(o, "...");
	} else {
		logesc_put(o, v, n, LOGESC_JSON);
	}
	pc_buf_put(o, "\"", 1);
}

static void j_u64(struct pc_buf *o, const char *key, uint64_t v)
{
	pc_buf_puts(o, ",\"");
	pc_buf_puts(o, key);
	pc_buf_puts(o, "\":");
	pc_buf_u64(o, v);
}

static void j_field(void *ctx, const char *key, enum logrec_field_kind k, const char *s, uint64_t n)
{
	const struct fieldctx *f = ctx;
	bool first = true;

	if (k == LOGF_NUM) {
		j_u64(f->o, key, n);
		return;
	}
	if (k == LOGF_STR) {
		j_strcap(f->o, key, s, f->vcap);
		return;
	}
	if (!s || !*s)
		return;
	pc_buf_puts(f->o, ",\"");
	pc_buf_puts(f->o, key);
	pc_buf_puts(f->o, "\":[");
	while (*s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);

		if (len) {
			size_t c = f->vcap && len > f->vcap ? f->vcap : len;

			while (c < len && c > 0 && ((unsigned char)s[c] & 0xc0) == 0x80)
				c--;
			pc_buf_puts(f->o, first ? "\"" : ",\"");
			logesc_put(f->o, s, c, LOGESC_JSON);
			pc_buf_puts(f->o, c < len ? "...\"" : "\"");
			first = false;
		}
		s += len + (end ? 1 : 0);
	}
	pc_buf_put(f->o, "]", 1);
}

static void o_field(void *ctx, const char *key, enum logrec_field_kind k, const char *s, uint64_t n)
{
	const struct fieldctx *f = ctx;

	if (k == LOGF_NUM) {
		o_uparam(f->o, key, n);
		return;
	}
	/* a list's text is already its items joined by commas; empty items
	 * (never written) would show as ",," and are left as they are */
	o_param_cap(f->o, key, s, f->vcap);
}

/* The record into o: header, structured data (values cut at vcap, 0 for
 * none; truncated="full" after hash when full > 0), then MSG, which starts
 * at *msg_at. */
static void fmt_record(struct pc_buf *o, const struct logrec *r, uint64_t seq, uint64_t time_ms,
		       const uint8_t hash[MERKLE_HASH], const char *host, long pid, size_t vcap,
		       size_t full, size_t *msg_at)
{
	char hx[2 * MERKLE_HASH + 1], a[PC_ADDRSTRLEN], port[8] = "", text[1200];
	struct fieldctx fc = {o, vcap};
	struct pc_buf t;
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

	merkle_hex(hash, hx);
	o_header(o, sev, time_ms, host, pid, logrec_action_name(r->action));
	if (!sd_id[0]) {
		/* no enterprise number: every field in a JSON MSG, as the JSON
		 * line names them (the Elastic pipeline parses either) */
		char ts[25];

		pc_buf_put(o, " ", 1);
		*msg_at = o->len;
		pc_buf_puts(o, "{\"" LOGREC_SEQ_KEY "\":");
		pc_buf_u64(o, seq);
		logrec_time_rfc3339(time_ms, ts);
		j_strcap(o, "@timestamp", ts, 0);
		j_strcap(o, LOGREC_HASH_KEY, hx, 0);
		if (full)
			j_u64(o, "truncated", full);
		logrec_fields(r, j_field, &fc);
		j_strcap(o, "message", r->message, vcap);
		pc_buf_put(o, "}", 1);
		return;
	}
	/* the record's fields, as in the JSON line (logrec_fields): the
	 * chain's own (event.sequence, event.hash) first, then how long the
	 * whole message was when it is sent cut */
	o_uparam(o, LOGREC_SEQ_KEY, seq);
	o_param(o, LOGREC_HASH_KEY, hx);
	o_uparam(o, "truncated", full);
	logrec_fields(r, o_field, &fc);
	pc_buf_put(o, "] ", 2);
	*msg_at = o->len;
	/* MSG: the short human form (its first part at most sizeof(text)),
	 * what a record's strings bring escaped as log show does */
	if (r->dst.port && target)
		snprintf(port, sizeof(port), ":%u", r->dst.port);
	text[0] = '\0';
	pc_buf_init_fixed(&t, text, sizeof(text), 0);
	pc_buf_putc(&t, '#');
	pc_buf_u64(&t, seq);
	pc_buf_put(&t, " ", 1);
	pc_buf_puts(&t, verdict);
	pc_buf_puts(&t, *verdict ? " " : "");
	pc_buf_puts(&t, logrec_action_name(r->action));
	if (target) {
		pc_buf_put(&t, " ", 1);
		logesc_put(&t, target, strlen(target), LOGESC_TEXT);
	}
	pc_buf_puts(&t, port);
	if (r->reason) {
		pc_buf_put(&t, " (", 2);
		logesc_put(&t, r->reason, strlen(r->reason), LOGESC_TEXT);
		pc_buf_put(&t, ")", 1);
	}
	pc_buf_put(o, text, t.len);
	if (r->message && *r->message) {
		pc_buf_put(o, ": ", 2);
		logesc_put(o, r->message, strlen(r->message), LOGESC_TEXT);
	}
}

int logx_format_record(const struct logrec *r, uint64_t seq, uint64_t time_ms,
		       const uint8_t hash[MERKLE_HASH], const char *host, long pid, char *buf,
		       size_t len)
{
	struct pc_buf o;
	size_t msg_at;

	if (len < 64)
		return PC_EINVAL;
	/* one byte short of len: a message that fills buf is refused as
	 * possibly truncated, as a receiver would see it */
	pc_buf_init_fixed(&o, buf, len - 1, 0);
	fmt_record(&o, r, seq, time_ms, hash, host, pid, 0, 0, &msg_at);
	if (o.err || o.len + 1 >= len)
		return PC_EINVAL; /* truncated: refuse rather than send half a message */
	return (int)o.len;
}

#define TRUNC_MARK " [truncated]"

int logx_format_export(const struct logrec *r, uint64_t seq, uint64_t time_ms,
		       const uint8_t hash[MERKLE_HASH], const char *host, long pid, char *buf,
		       size_t len)
{
	/* value caps tried in turn until the structured data leaves room for
	 * MSG; at the last, every value of the record together is a few KiB */
	static const size_t caps[] = {4096, 1024, 256, 64};
	const size_t mark = sizeof(TRUNC_MARK) - 1;
	struct pc_buf o;
	size_t msg_at, full, cut;
	int rc = PC_EINVAL;

	if (len < LOGX_MSG_MAX + 1)
		return PC_EINVAL;
	/* the usual case: it fits, no copy */
	pc_buf_init_fixed(&o, buf, len, 0);
	fmt_record(&o, r, seq, time_ms, hash, host, pid, 0, 0, &msg_at);
	if (!o.err && o.len <= LOGX_MSG_MAX)
		return (int)o.len;
	/* Oversize: never dropped (an alert must reach the SIEM), sent cut,
	 * saying so and how long it was; seq and hash find it in the file. */
	pc_buf_init(&o, 1u << 20, 0);
	fmt_record(&o, r, seq, time_ms, hash, host, pid, 0, 0, &msg_at);
	full = o.len;
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]) && !o.err; i++) {
		pc_buf_reset(&o);
		fmt_record(&o, r, seq, time_ms, hash, host, pid, caps[i], full, &msg_at);
		if (!sd_id[0]) {
			/* a JSON MSG is never cut: only its values ("truncated") */
			if (o.err || o.len > LOGX_MSG_MAX)
				continue;
			memcpy(buf, o.p, o.len);
			buf[o.len] = '\0';
			rc = (int)o.len;
			break;
		}
		if (o.err || msg_at + mark > LOGX_MSG_MAX)
			continue;
		cut = o.len + mark <= LOGX_MSG_MAX ? o.len : LOGX_MSG_MAX - mark;
		while (cut > msg_at && ((unsigned char)o.p[cut] & 0xc0) == 0x80 && cut < o.len)
			cut--;
		memcpy(buf, o.p, cut);
		memcpy(buf + cut, TRUNC_MARK, mark);
		buf[cut + mark] = '\0';
		rc = (int)(cut + mark);
		break;
	}
	pc_buf_free(&o);
	return rc;
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
	if (!sd_id[0]) {
		/* the line as the log file has it, which the pipeline knows,
		 * and what a SIEM files an event under: its time (the note's,
		 * as the header's) and its kind (a state of the log, not an
		 * event of the guard) */
		char ts[32];

		pc_buf_puts(&o, " {\"checkpoint\":\"");
		pc_json_escape(&o, note, nlen);
		pc_buf_puts(&o, "\"");
		j_strcap(&o, "@timestamp", pc_time_rfc3339(cp.time_ms, ts, sizeof(ts)), 0);
		j_strcap(&o, "ecs.version", LOGREC_ECS_VERSION, 0);
		j_strcap(&o, "event.kind", "state", 0);
		j_strcap(&o, "event.action", "log-checkpoint", 0);
		pc_buf_puts(&o, "}");
		if (o.err || o.len + 1 >= len)
			return PC_EINVAL;
		return (int)o.len;
	}
	o_param(&o, "ecs.version", LOGREC_ECS_VERSION);
	o_param(&o, "event.kind", "state");
	o_param(&o, "event.action", "log-checkpoint");
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

/* A notice of the exporter, not a record of the log: its time is when it
 * was written, its kind an event of the pipeline, and every count a number
 * under portcullis.spool so the index template types it. */
int logx_format_overflow(const struct logx_spool_loss *l, uint64_t time_ms, const char *host,
			 long pid, char *buf, size_t len)
{
	static const char what[] = " records were not exported while the collector was away; "
				   "the log file has them";
	const struct {
		const char *name;
		uint64_t v;
	} n[] = {{"portcullis.spool.dropped", l->dropped},
		 {"portcullis.spool.first_seq", l->dropped_first},
		 {"portcullis.spool.last_seq", l->dropped_last},
		 {"portcullis.spool.checkpoints_superseded", l->cps_superseded},
		 {"portcullis.spool.checkpoints_dropped", l->cps_dropped}};
	char ts[32], d[24];
	struct pc_buf o;

	if (len < 64)
		return PC_EINVAL;
	pc_buf_init_fixed(&o, buf, len - 1, 0);
	snprintf(d, sizeof(d), "%llu", (unsigned long long)l->dropped);
	o_header(&o, 4, time_ms, host, pid, "spool-overflow");
	if (!sd_id[0]) {
		pc_buf_puts(&o, " {\"@timestamp\":\"");
		pc_buf_puts(&o, pc_time_rfc3339(time_ms, ts, sizeof(ts)));
		pc_buf_puts(&o, "\"");
		j_strcap(&o, "ecs.version", LOGREC_ECS_VERSION, 0);
		j_strcap(&o, "event.kind", "event", 0);
		j_strcap(&o, "event.action", "log-spool-overflow", 0);
		for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++)
			pc_buf_printf(&o, ",\"%s\":%llu", n[i].name, (unsigned long long)n[i].v);
		pc_buf_puts(&o, ",\"message\":\"");
		pc_buf_puts(&o, d);
		pc_buf_puts(&o, what);
		pc_buf_puts(&o, "\"}");
	} else {
		o_param(&o, "ecs.version", LOGREC_ECS_VERSION);
		o_param(&o, "event.kind", "event");
		o_param(&o, "event.action", "log-spool-overflow");
		for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++)
			o_uparam(&o, n[i].name, n[i].v);
		pc_buf_puts(&o, "] ");
		pc_buf_puts(&o, d);
		pc_buf_puts(&o, what);
	}
	if (o.err || o.len + 1 >= len)
		return PC_EINVAL;
	return (int)o.len;
}
