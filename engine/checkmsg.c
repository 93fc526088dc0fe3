/* The check helper channel's messages (the framing of common/msg.c): the
 * request and the expectation the engine sends its root-started helper, and
 * the result coming back. The helper holds capabilities the engine lacks
 * while the engine handles sandbox packets, so the helper decodes the
 * engine's bytes as hostile: every length and value is checked, and
 * anything malformed is refused whole. docs/engine.md, "Containment check". */
#include "engine/engine_int.h"

#include <stdlib.h>
#include <string.h>

#define CHK_TRIGGER_MAX 15 /* engine_check's trigger[16] */
#define CHK_TABLE_MAX	63 /* checker_expect's table[64] */

static int finish(struct pc_msg_w *w, enum chk_type type, size_t max, struct pc_err *err)
{
	int n = pc_msg_finish(w, CHK_PROTO, CHK_VERSION, (uint8_t)type, max);

	if (n < 0)
		return pc_err_set(err, PC_EINVAL, "check message of type %d does not fit %zu bytes",
				  (int)type, max);
	return n;
}

/* The header of a message of type want; a message of another version is
 * as malformed as any other here (both ends are the same binary). */
static int open_as(struct pc_msg_r *r, const uint8_t *buf, size_t len, size_t max,
		   enum chk_type want, struct pc_err *err)
{
	uint8_t t;

	if (len > max)
		return pc_err_set(err, PC_EPARSE, "check message of %zu bytes, at most %zu", len,
				  max);
	if (pc_msg_open(r, buf, len, CHK_PROTO, CHK_VERSION, &t, err) < 0)
		return PC_EPARSE;
	if (t != want)
		return pc_err_set(err, PC_EPARSE, "check message type %u, expected %d", t,
				  (int)want);
	return 0;
}

/* ---- the request: the trigger -------------------------------------------- */

static bool trigger_ok(const char *s, size_t n)
{
	if (n == 0 || n > CHK_TRIGGER_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 'a' || s[i] > 'z')
			return false;
	return true;
}

int chkmsg_request_encode(const char *trigger, uint8_t *buf, size_t len, struct pc_err *err)
{
	struct pc_msg_w w;

	if (!trigger || !trigger_ok(trigger, strlen(trigger)))
		return pc_err_set(err, PC_EINVAL, "check trigger is not a short lower-case word");
	pc_msg_w_init(&w, buf, len);
	pc_msg_put_str(&w, trigger, strlen(trigger));
	return finish(&w, CHK_REQUEST, CHK_REQ_MAX, err);
}

int chkmsg_request_decode(const uint8_t *buf, size_t len, char *trigger, size_t tlen,
			  struct pc_err *err)
{
	struct pc_msg_r r;
	const char *s;
	size_t n;

	if (open_as(&r, buf, len, CHK_REQ_MAX, CHK_REQUEST, err) < 0 ||
	    pc_msg_get_str(&r, CHK_TRIGGER_MAX, &s, &n, err) < 0 || pc_msg_end(&r, err) < 0)
		return PC_EPARSE;
	if (!trigger_ok(s, n))
		return pc_err_set(err, PC_EPARSE, "check trigger is not a short lower-case word");
	if (n >= tlen)
		return pc_err_set(err, PC_EINVAL, "check trigger: buffer too small");
	memcpy(trigger, s, n);
	trigger[n] = '\0';
	return 0;
}

/* ---- the expectation: what the engine's loaded policy makes ---------------
 * str table, u32 mark_mask, u32 mark_decided, u16 queue_lo, u16 queue_hi,
 * u8 n_listen then that many u16 ports, u8 br_nf_call (0, 1, 0xff: either),
 * u16 n_ports then that many strings (match.port names), u8 n_uplinks then
 * that many strings (the configuration's uplinks), str canon (empty: none).
 * Sent in a sealed memfd: it may be large. */

int chkmsg_expect_encode(const struct checker_expect *ex, uint8_t **buf, size_t *len,
			 struct pc_err *err)
{
	size_t cap =
	    PC_MSG_HDR_LEN + 64 + 4 + CHK_TABLE_MAX + 2 * 4 + (ex->canon ? ex->canon_len : 0);
	struct pc_msg_w w;
	uint8_t *b;
	int n;

	if (ex->n_listen > sizeof(ex->listen_ports) / sizeof(ex->listen_ports[0]) ||
	    ex->n_policy_ports > CHK_EXPECT_PORTS || ex->n_uplinks > RULES_MAX_UPLINKS ||
	    ex->br_nf_call < -1 || ex->br_nf_call > 1)
		return pc_err_set(err, PC_EINVAL, "the expectation is out of the channel's bounds");
	for (size_t i = 0; i < ex->n_policy_ports; i++)
		cap += 4 + strlen(ex->policy_ports[i]);
	cap += 1 + RULES_MAX_UPLINKS * (4 + PC_IFNAMSIZ);
	if (cap > CHK_EXPECT_MAX)
		return pc_err_set(err, PC_EINVAL, "the expectation exceeds %u bytes",
				  CHK_EXPECT_MAX);
	b = malloc(cap);
	if (!b)
		return pc_err_set(err, PC_ENOMEM, "the expectation: out of memory");
	pc_msg_w_init(&w, b, cap);
	pc_msg_put_str(&w, ex->table, strlen(ex->table));
	pc_msg_put_u32(&w, ex->mark_mask);
	pc_msg_put_u32(&w, ex->mark_decided);
	pc_msg_put_u16(&w, ex->queue_lo);
	pc_msg_put_u16(&w, ex->queue_hi);
	pc_msg_put_u8(&w, (uint8_t)ex->n_listen);
	for (size_t i = 0; i < ex->n_listen; i++)
		pc_msg_put_u16(&w, ex->listen_ports[i]);
	pc_msg_put_u8(&w, (uint8_t)ex->br_nf_call);
	pc_msg_put_u16(&w, (uint16_t)ex->n_policy_ports);
	for (size_t i = 0; i < ex->n_policy_ports; i++)
		pc_msg_put_str(&w, ex->policy_ports[i], strlen(ex->policy_ports[i]));
	pc_msg_put_u8(&w, (uint8_t)ex->n_uplinks);
	for (size_t i = 0; i < ex->n_uplinks; i++)
		pc_msg_put_str(&w, ex->uplinks[i], strnlen(ex->uplinks[i], PC_IFNAMSIZ));
	pc_msg_put_str(&w, ex->canon, ex->canon ? ex->canon_len : 0);
	n = finish(&w, CHK_EXPECT, CHK_EXPECT_MAX, err);
	if (n < 0) {
		free(b);
		return n;
	}
	*buf = b;
	*len = (size_t)n;
	return 0;
}

int chkmsg_expect_decode(const uint8_t *buf, size_t len, struct chk_expect_in *in,
			 struct pc_err *err)
{
	struct checker_expect *ex = &in->ex;
	struct pc_msg_r r;
	const char *canon;
	size_t canon_len;
	uint8_t n_listen, brnf, n_up;
	uint16_t n_ports;

	memset(in, 0, sizeof(*in));
	if (open_as(&r, buf, len, CHK_EXPECT_MAX, CHK_EXPECT, err) < 0 ||
	    pc_msg_get_strcpy(&r, ex->table, sizeof(ex->table), err) < 0 ||
	    pc_msg_get_u32(&r, &ex->mark_mask, err) < 0 ||
	    pc_msg_get_u32(&r, &ex->mark_decided, err) < 0 ||
	    pc_msg_get_u16(&r, &ex->queue_lo, err) < 0 ||
	    pc_msg_get_u16(&r, &ex->queue_hi, err) < 0 || pc_msg_get_u8(&r, &n_listen, err) < 0)
		goto bad;
	if (!ex->table[0] || ex->queue_lo > ex->queue_hi ||
	    n_listen > sizeof(ex->listen_ports) / sizeof(ex->listen_ports[0])) {
		pc_err_set(err, PC_EPARSE, "expectation: empty table, queues %u-%u or %u listeners",
			   ex->queue_lo, ex->queue_hi, n_listen);
		goto bad;
	}
	for (size_t i = 0; i < n_listen; i++)
		if (pc_msg_get_u16(&r, &ex->listen_ports[i], err) < 0)
			goto bad;
	ex->n_listen = n_listen;
	if (pc_msg_get_u8(&r, &brnf, err) < 0 || pc_msg_get_u16(&r, &n_ports, err) < 0)
		goto bad;
	if ((brnf > 1 && brnf != 0xff) || n_ports > CHK_EXPECT_PORTS) {
		pc_err_set(err, PC_EPARSE, "expectation: bridge-nf %u or %u ports", brnf, n_ports);
		goto bad;
	}
	ex->br_nf_call = brnf == 0xff ? -1 : brnf;
	for (size_t i = 0; i < n_ports; i++) {
		if (pc_msg_get_strcpy(&r, in->names[i], sizeof(in->names[i]), err) < 0)
			goto bad;
		if (!in->names[i][0]) {
			pc_err_set(err, PC_EPARSE, "expectation: an empty port name");
			goto bad;
		}
		in->ports[i] = in->names[i];
	}
	ex->policy_ports = in->ports;
	ex->n_policy_ports = n_ports;
	if (pc_msg_get_u8(&r, &n_up, err) < 0)
		goto bad;
	if (n_up > RULES_MAX_UPLINKS) {
		pc_err_set(err, PC_EPARSE, "expectation: %u uplinks", n_up);
		goto bad;
	}
	for (size_t i = 0; i < n_up; i++) {
		if (pc_msg_get_strcpy(&r, ex->uplinks[i], sizeof(ex->uplinks[i]), err) < 0)
			goto bad;
		if (!ex->uplinks[i][0]) {
			pc_err_set(err, PC_EPARSE, "expectation: an empty uplink name");
			goto bad;
		}
	}
	ex->n_uplinks = n_up;
	if (pc_msg_get_str(&r, CHK_EXPECT_MAX, &canon, &canon_len, err) < 0 ||
	    pc_msg_end(&r, err) < 0)
		goto bad;
	if (canon_len) {
		/* the checker reads it as a C string: a copy with its NUL */
		in->canon = malloc(canon_len + 1);
		if (!in->canon) {
			memset(in, 0, sizeof(*in));
			return pc_err_set(err, PC_ENOMEM, "the expectation: out of memory");
		}
		memcpy(in->canon, canon, canon_len);
		in->canon[canon_len] = '\0';
		ex->canon = in->canon;
		ex->canon_len = canon_len;
	}
	return 0;
bad:
	memset(in, 0, sizeof(*in));
	return PC_EPARSE;
}

void chkmsg_expect_free(struct chk_expect_in *in)
{
	if (!in)
		return;
	free(in->canon);
	in->canon = NULL;
}

/* ---- the result ------------------------------------------------------------
 * RESULT: u8 status (CHECKER_*), u64 time_ms, u32 findings, u32 shown, then
 * shown times (u8 kind, str text): the findings that fit, in order.
 * ERROR: str why the check could not run. */

int chkmsg_result_encode(const struct checker_result *res, uint8_t *buf, size_t len,
			 struct pc_err *err)
{
	struct pc_msg_w w;
	size_t shown_at;
	uint32_t shown = 0;

	pc_msg_w_init(&w, buf, len);
	pc_msg_put_u8(&w, (uint8_t)res->status);
	pc_msg_put_u64(&w, res->time_ms);
	pc_msg_put_u32(&w, (uint32_t)res->n_findings);
	shown_at = w.off;
	pc_msg_put_u32(&w, 0);
	for (size_t i = 0; i < res->n_findings && !w.overflow; i++) {
		const struct checker_finding *f = &res->findings[i];
		const char *t = f->text ? f->text : "";
		size_t at = w.off, n = strlen(t);

		pc_msg_put_u8(&w, (uint8_t)f->kind);
		pc_msg_put_str(&w, t, n);
		if (w.overflow || w.off > CHK_RESULT_MAX) {
			/* the count says how many there were */
			w.off = at;
			w.overflow = false;
			break;
		}
		/* one line each in the journal */
		for (size_t k = at + 5; k < w.off; k++)
			if (w.p[k] == '\n' || w.p[k] == '\r')
				w.p[k] = ' ';
		shown++;
	}
	if (!w.overflow)
		pc_msg_put32(w.p + shown_at, shown);
	return finish(&w, CHK_RESULT, CHK_RESULT_MAX, err);
}

int chkmsg_error_encode(const char *why, uint8_t *buf, size_t len, struct pc_err *err)
{
	struct pc_msg_w w;
	size_t n = strlen(why);

	pc_msg_w_init(&w, buf, len);
	pc_msg_put_str(&w, why, n < CHK_TEXT_MAX ? n : CHK_TEXT_MAX);
	return finish(&w, CHK_ERROR, CHK_RESULT_MAX, err);
}

int chkmsg_result_decode(const uint8_t *buf, size_t len, struct chk_result *out, struct pc_err *err)
{
	struct chk_result d;
	struct pc_msg_r r;
	const char *s;
	size_t n, soff = 0;
	uint8_t t, status;

	memset(&d, 0, sizeof(d));
	if (len > CHK_RESULT_MAX)
		return pc_err_set(err, PC_EPARSE, "check result of %zu bytes, at most %d", len,
				  CHK_RESULT_MAX);
	if (pc_msg_open(&r, buf, len, CHK_PROTO, CHK_VERSION, &t, err) < 0)
		return PC_EPARSE;
	if (t != CHK_RESULT && t != CHK_ERROR)
		return pc_err_set(err, PC_EPARSE, "check message type %u is not a result", t);
	/* every string costs its 4-byte length, which pays for its NUL */
	d.texts = malloc(len);
	if (!d.texts)
		return pc_err_set(err, PC_ENOMEM, "check result: out of memory");
	d.type = (enum chk_type)t;
	if (t == CHK_ERROR) {
		if (pc_msg_get_str(&r, CHK_TEXT_MAX, &s, &n, err) < 0)
			goto bad;
		memcpy(d.texts, s, n);
		d.texts[n] = '\0';
		d.message = d.texts;
		goto end;
	}
	if (pc_msg_get_u8(&r, &status, err) < 0 || pc_msg_get_u64(&r, &d.time_ms, err) < 0 ||
	    pc_msg_get_u32(&r, &d.findings, err) < 0 || pc_msg_get_u32(&r, &d.shown, err) < 0)
		goto bad;
	if (status > CHECKER_UNPROVEN || d.shown > d.findings) {
		pc_err_set(err, PC_EPARSE, "check result: status %u with %u findings (%u shown)",
			   status, d.findings, d.shown);
		goto bad;
	}
	d.status = status;
	for (uint32_t i = 0; i < d.shown; i++) {
		uint8_t kind;

		if (pc_msg_get_u8(&r, &kind, err) < 0 ||
		    pc_msg_get_str(&r, CHK_RESULT_MAX, &s, &n, err) < 0)
			goto bad;
		if (kind != CHECKER_EXIT && kind != CHECKER_DOUBT) {
			pc_err_set(err, PC_EPARSE, "check result: finding kind %u", kind);
			goto bad;
		}
		memcpy(d.texts + soff, s, n);
		d.texts[soff + n] = '\0';
		soff += n + 1;
	}
end:
	if (pc_msg_end(&r, err) < 0)
		goto bad;
	*out = d;
	return 0;
bad:
	free(d.texts);
	return PC_EPARSE;
}

void chkmsg_result_free(struct chk_result *r)
{
	if (!r)
		return;
	free(r->texts);
	r->texts = NULL;
}
