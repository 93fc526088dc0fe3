/* engine.sock's messages (typed, versioned, length-checked; the framing of
 * common/msg.c) and the client call the CLI and the checker make. The
 * engine serves them in engine/control.c; docs/engine.md has the layout. */
#include "common/pc.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ENG_REQ_MAX 64 /* a request is a header: anything longer is not one */

int pc_eng_request_encode(enum pc_eng_type type, uint8_t *buf, size_t len)
{
	struct pc_msg_w w;

	if (type < PC_ENG_STATUS || type > PC_ENG_RECHECK)
		return PC_EINVAL;
	pc_msg_w_init(&w, buf, len);
	return pc_msg_finish(&w, PC_ENG_PROTO, PC_ENG_VERSION, (uint8_t)type, ENG_REQ_MAX);
}

int pc_eng_request_decode(const uint8_t *buf, size_t len, enum pc_eng_type *type,
			  struct pc_err *err)
{
	struct pc_msg_r r;
	uint8_t t;
	int rc = pc_msg_open(&r, buf, len, PC_ENG_PROTO, PC_ENG_VERSION, &t, err);

	if (rc < 0)
		return rc;
	if (t < PC_ENG_STATUS || t > PC_ENG_RECHECK)
		return pc_err_set(err, PC_EPARSE,
				  "unknown request type %u (status, reload, metrics, recheck)", t);
	if (pc_msg_end(&r, err) < 0)
		return PC_EPARSE;
	*type = (enum pc_eng_type)t;
	return 0;
}

static size_t slen(const char *s)
{
	return s ? strlen(s) : 0;
}

int pc_eng_reply_encode(const struct pc_eng_reply *r, uint8_t **buf, size_t *len,
			struct pc_err *err)
{
	size_t cap = PC_MSG_HDR_LEN + 16 + 4 * 2 + slen(r->message) + slen(r->policy) +
		     slen(r->json) + slen(r->text);
	struct pc_msg_w w;
	uint8_t *b;
	int n;

	if (r->type == PC_ENG_ERROR && (r->code >= 0 || r->code < -UINT16_MAX))
		return pc_err_set(err, PC_EINVAL, "an error reply needs a PC_E* code");
	if (slen(r->policy) > PC_ENG_POLICY_MAX || slen(r->message) > PC_ENG_MESSAGE_MAX)
		return pc_err_set(err, PC_EINVAL, "reply field too long");
	b = malloc(cap);
	if (!b)
		return pc_err_set(err, PC_ENOMEM, "engine reply: out of memory");
	pc_msg_w_init(&w, b, cap);
	switch (r->type) {
	case PC_ENG_ERROR:
		pc_msg_put_u16(&w, (uint16_t)-r->code);
		pc_msg_put_str(&w, r->message, slen(r->message));
		break;
	case PC_ENG_STATUS_REPLY:
		pc_msg_put_str(&w, r->policy, slen(r->policy));
		pc_msg_put_u8(&w, r->check_running);
		pc_msg_put_str(&w, r->json, slen(r->json));
		break;
	case PC_ENG_RELOAD_REPLY:
	case PC_ENG_RECHECK_REPLY:
		pc_msg_put_str(&w, r->policy, slen(r->policy));
		break;
	case PC_ENG_METRICS_REPLY:
		pc_msg_put_str(&w, r->text, slen(r->text));
		break;
	default:
		free(b);
		return pc_err_set(err, PC_EINVAL, "reply type %d is not defined", (int)r->type);
	}
	n = pc_msg_finish(&w, PC_ENG_PROTO, PC_ENG_VERSION, (uint8_t)r->type, PC_ENG_MAX);
	if (n < 0) {
		free(b);
		return pc_err_set(err, PC_EINVAL, "engine reply longer than %u bytes", PC_ENG_MAX);
	}
	*buf = b;
	*len = (size_t)n;
	return 0;
}

/* The next string into the decoded reply's own buffer (*soff advances). */
static int get_str(struct pc_msg_r *r, size_t max, char *strings, size_t *soff, const char **out,
		   struct pc_err *err)
{
	const char *s;
	size_t n;

	if (pc_msg_get_str(r, max, &s, &n, err) < 0)
		return PC_EPARSE;
	memcpy(strings + *soff, s, n);
	strings[*soff + n] = '\0';
	*out = strings + *soff;
	*soff += n + 1;
	return 0;
}

int pc_eng_reply_decode(const uint8_t *buf, size_t len, struct pc_eng_reply *out,
			struct pc_err *err)
{
	struct pc_eng_reply d;
	struct pc_msg_r r;
	size_t soff = 0;
	uint16_t code;
	uint8_t t, running;
	int rc;

	memset(&d, 0, sizeof(d));
	rc = pc_msg_open(&r, buf, len, PC_ENG_PROTO, PC_ENG_VERSION, &t, err);
	if (rc < 0)
		return rc;
	if (len > PC_ENG_MAX)
		return pc_err_set(err, PC_EPARSE, "reply of %zu bytes, at most %u", len,
				  PC_ENG_MAX);
	/* every string costs its 4-byte length, which pays for its NUL */
	d.strings = malloc(len);
	if (!d.strings)
		return pc_err_set(err, PC_ENOMEM, "engine reply: out of memory");
	rc = PC_EPARSE;
	switch (t) {
	case PC_ENG_ERROR:
		if (pc_msg_get_u16(&r, &code, err) < 0 ||
		    get_str(&r, PC_ENG_MESSAGE_MAX, d.strings, &soff, &d.message, err) < 0)
			goto fail;
		if (code == 0) {
			pc_err_set(err, PC_EPARSE, "error reply without an error code");
			goto fail;
		}
		d.code = -(int)code;
		break;
	case PC_ENG_STATUS_REPLY:
		if (get_str(&r, PC_ENG_POLICY_MAX, d.strings, &soff, &d.policy, err) < 0 ||
		    pc_msg_get_u8(&r, &running, err) < 0 ||
		    get_str(&r, PC_ENG_MAX, d.strings, &soff, &d.json, err) < 0)
			goto fail;
		if (running > 1) {
			pc_err_set(err, PC_EPARSE, "check running flag %u is not 0 or 1", running);
			goto fail;
		}
		d.check_running = running;
		break;
	case PC_ENG_RELOAD_REPLY:
	case PC_ENG_RECHECK_REPLY:
		if (get_str(&r, PC_ENG_POLICY_MAX, d.strings, &soff, &d.policy, err) < 0)
			goto fail;
		break;
	case PC_ENG_METRICS_REPLY:
		if (get_str(&r, PC_ENG_MAX, d.strings, &soff, &d.text, err) < 0)
			goto fail;
		break;
	default:
		pc_err_set(err, PC_EPARSE, "unknown reply type %u", t);
		goto fail;
	}
	if (pc_msg_end(&r, err) < 0)
		goto fail;
	d.type = (enum pc_eng_type)t;
	*out = d;
	return 0;
fail:
	free(d.strings);
	return rc;
}

void pc_eng_reply_free(struct pc_eng_reply *r)
{
	if (!r)
		return;
	free(r->strings);
	r->strings = NULL;
}

/* The reply that answers req. */
static enum pc_eng_type answer_type(enum pc_eng_type req)
{
	return (enum pc_eng_type)(req | PC_ENG_ERROR);
}

int pc_engine_call(const char *run_dir, enum pc_eng_type req, int timeout_ms,
		   struct pc_eng_reply *out, struct pc_err *err)
{
	char path[PC_PATH_MAX + 32];
	uint8_t q[PC_MSG_HDR_LEN], *buf = NULL;
	struct pc_eng_reply d;
	struct pollfd p;
	ssize_t n;
	int fd, rc, qlen;

	qlen = pc_eng_request_encode(req, q, sizeof(q));
	if (qlen < 0)
		return pc_err_set(err, PC_EINVAL, "engine request %d is not defined", (int)req);
	snprintf(path, sizeof(path), "%s/%s", run_dir, PC_ENGINE_SOCK);
	fd = pc_unix_connect(path, 0, err);
	if (fd < 0)
		return fd;
	if (send(fd, q, (size_t)qlen, MSG_NOSIGNAL) < 0) {
		rc = pc_err_errno(err, PC_EIO, "sending to the engine");
		goto out;
	}
	p.fd = fd;
	p.events = POLLIN;
	n = poll(&p, 1, timeout_ms);
	if (n <= 0) {
		rc = n == 0 ? pc_err_set(err, PC_ETIMEOUT, "the engine did not answer in %d ms",
					 timeout_ms)
			    : pc_err_errno(err, PC_EIO, "waiting for the engine");
		goto out;
	}
	buf = malloc(PC_ENG_MAX);
	if (!buf) {
		rc = pc_err_set(err, PC_ENOMEM, "out of memory");
		goto out;
	}
	/* MSG_TRUNC: the record's real length, so a cut reply is seen as one */
	n = recv(fd, buf, PC_ENG_MAX, MSG_TRUNC);
	if (n <= 0) {
		rc = n == 0 ? pc_err_set(err, PC_EIO, "the engine closed the connection")
			    : pc_err_errno(err, PC_EIO, "reading the engine's reply");
		goto out;
	}
	if ((size_t)n > PC_ENG_MAX) {
		rc = pc_err_set(err, PC_EPARSE, "the engine's reply of %zd bytes is too long", n);
		goto out;
	}
	if (buf[0] == '{') {
		rc = pc_err_set(err, PC_EUNSUPP,
				"the engine answered in its old text protocol: portcullis and "
				"portcullisd are from different releases");
		goto out;
	}
	rc = pc_eng_reply_decode(buf, (size_t)n, &d, err);
	if (rc == PC_EUNSUPP) {
		pc_err_set(err, rc,
			   "the engine speaks engine.sock protocol version %u, this program %u: "
			   "portcullis and portcullisd are from different releases",
			   buf[0], PC_ENG_VERSION);
		goto out;
	}
	if (rc < 0) {
		pc_err_prefix(err, "malformed reply from the engine: ");
		goto out;
	}
	if (d.type != PC_ENG_ERROR && d.type != answer_type(req)) {
		pc_eng_reply_free(&d);
		rc = pc_err_set(err, PC_EPARSE, "the engine answered type 0x%02x to request %d",
				d.type, (int)req);
		goto out;
	}
	*out = d;
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}
