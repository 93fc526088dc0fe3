/* One sandbox connection, a coroutine of its worker's event loop: the TLS handshake with a leaf
 * minted for the checked server name, then each request in turn — parse,
 * check and inject, log (acknowledged before anything goes upstream),
 * forward, relay the scrubbed response. */
#include "vault/vault_int.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* SSL ex_data slot for struct conn; set once by conn_server_ctx_new before
 * any thread starts, read-only afterwards. */
static int conn_ex_idx = -1;

static const char *status_text(unsigned s)
{
	static const struct pc_name names[] = {{400, "Bad Request"},
					       {403, "Forbidden"},
					       {405, "Method Not Allowed"},
					       {408, "Request Timeout"},
					       {417, "Expectation Failed"},
					       {421, "Misdirected Request"},
					       {431, "Request Header Fields Too Large"},
					       {500, "Internal Server Error"},
					       {501, "Not Implemented"},
					       {502, "Bad Gateway"},
					       {503, "Service Unavailable"},
					       {505, "HTTP Version Not Supported"}};

	return PC_NAME_OF(names, s, "Error");
}

/* Remember the current request's method and path (never the query). */
static void conn_note(struct conn *c, const struct http_request *req)
{
	size_t n = req->target_len;
	const char *q = memchr(req->target, '?', n);

	if (q)
		n = (size_t)(q - req->target);
	if (n >= sizeof(c->path))
		n = sizeof(c->path) - 1;
	memcpy(c->path, req->target, n);
	c->path[n] = '\0';
	pc_strlcpy(c->method, req->method, sizeof(c->method));
}

/* The metrics of one record: an allowed request counts (and injects) only
 * once logd acknowledged it; without the acknowledgement it is refused. */
static void conn_count(struct vault_daemon *d, const struct logrec *rec, bool wait, bool acked)
{
	struct vault_counters *n = d->n;

	if (wait && !acked)
		atomic_fetch_add(&n->log_failed, 1);
	switch (rec->action) {
	case LOGREC_HTTP_REQUEST:
		if (rec->verdict == LOGREC_REFUSED || (rec->verdict == LOGREC_ALLOWED && !acked)) {
			atomic_fetch_add(&n->requests_refused, 1);
		} else if (rec->verdict == LOGREC_ALLOWED) {
			atomic_fetch_add(&n->requests_allowed, 1);
			if (rec->secrets) {
				uint64_t k = 1;

				for (const char *p = rec->secrets; *p; p++)
					k += *p == ',';
				atomic_fetch_add(&n->injections, 1);
				atomic_fetch_add(&n->secrets_injected, k);
			}
		}
		break;
	case LOGREC_EXFIL:
		atomic_fetch_add(&n->exfil, 1);
		atomic_fetch_add(&n->requests_refused, 1);
		break;
	case LOGREC_CONNECT:
		if (rec->verdict == LOGREC_REFUSED)
			atomic_fetch_add(&n->conns_refused, 1);
		break;
	default:
		break;
	}
}

static void conn_log_code(struct conn *c, enum logrec_action action, enum logrec_verdict verdict,
			  const char *code, const char *reason, unsigned status,
			  const char *secrets, bool wait, int *acked)
{
	struct logrec rec = {0};
	/* during a request its state, without the daemon's lock */
	struct vault_state *st = c->st ? vault_state_ref(c->st) : vault_daemon_state(c->d);
	struct pc_err e = {0};
	int rc;

	rec.action = action;
	rec.verdict = verdict;
	rec.sandbox = c->sandbox;
	rec.policy = st ? policy_hash(st->policy) : NULL;
	rec.reason = reason;
	rec.code = code;
	rec.src = c->src;
	rec.dst = c->orig;
	rec.transport = IPPROTO_TCP;
	rec.domain = c->sni[0] ? c->sni : NULL;
	rec.sni = c->sni[0] ? c->sni : NULL;
	rec.http_method = c->method[0] ? c->method : NULL;
	rec.http_path = c->path[0] ? c->path : NULL;
	rec.http_status = (uint16_t)status;
	rec.secrets = secrets && *secrets ? secrets : NULL;
	/* a response's record (verdict none) rides along with the next
	 * acknowledged batch: nothing waits for it */
	rc = !wait && verdict == LOGREC_NONE ? logq_record_lazy(c->d->logq, &rec, &e)
					     : logq_record(c->d->logq, &rec, wait, &e);
	if (acked)
		*acked = rc == 0;
	conn_count(c->d, &rec, wait, rc == 0);
	vault_state_unref(st);
}

void conn_log(struct conn *c, enum logrec_action action, enum logrec_verdict verdict,
	      const char *reason, unsigned status, const char *secrets, bool wait, int *acked)
{
	conn_log_code(c, action, verdict, NULL, reason, status, secrets, wait, acked);
}

void conn_log_refused(struct conn *c, enum logrec_action action, const char *code,
		      const char *reason, unsigned status)
{
	conn_log_code(c, action, LOGREC_REFUSED, code, reason, status, NULL, false, NULL);
}

int conn_send_error(struct conn *c, unsigned status, const char *reason)
{
	char buf[1024];
	int n;

	n = snprintf(buf, sizeof(buf),
		     "HTTP/1.1 %u %s\r\nContent-Type: text/plain\r\nX-Portcullis-Error: %s\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\nportcullis: %s\n",
		     status, status_text(status), reason, strlen(reason) + 13, reason);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return PC_EINVAL;
	c->linger = true;
	return io_write(c->ssl, c->fd, buf, (size_t)n,
			pc_now_mono_ms() + c->d->cfg.vault.idle_timeout_ms);
}

/* Refuse a request: answer, and log (the refusal stands whether or not logd
 * acknowledges; the connection closes). */
enum conn_next conn_refuse(struct conn *c, unsigned status, bool exfil, const char *code,
			   const char *reason)
{
	return conn_refuse_named(c, status, exfil, code, reason, NULL);
}

/* As conn_refuse, the record naming the secret whose placeholder was
 * refused (V4; never a value): what `log audit` checks its binding by. */
enum conn_next conn_refuse_named(struct conn *c, unsigned status, bool exfil, const char *code,
				 const char *reason, const char *secret)
{
	if (exfil)
		pc_log(PC_LOG_WARN, "exfiltration attempt refused: sandbox %s, %s: %s", c->sandbox,
		       c->sni, reason);
	conn_log_code(c, exfil ? LOGREC_EXFIL : LOGREC_HTTP_REQUEST, LOGREC_REFUSED, code, reason,
		      status, secret, true, NULL);
	conn_send_error(c, status, reason);
	return CONN_CLOSE;
}

/* ---- the TLS server side ------------------------------------------------- */

static int hello_cb(SSL *ssl, int *al, void *arg)
{
	struct conn *c = SSL_get_ex_data(ssl, conn_ex_idx);
	const unsigned char *ext;
	const struct policy_sandbox *sb;
	struct vault_state *st;
	struct pc_err e = {0};
	void *cert = NULL, *key = NULL;
	size_t len;
	bool ok;

	(void)arg;
	*al = SSL_AD_UNRECOGNIZED_NAME;
	if (!c)
		return SSL_CLIENT_HELLO_ERROR;
	if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &ext, &len)) {
		pc_strlcpy(c->refusal, "no TLS server name (SNI)", sizeof(c->refusal));
		c->refusal_code = "tls_no_server_name";
		return SSL_CLIENT_HELLO_ERROR;
	}
	if (sni_parse(ext, len, c->sni, sizeof(c->sni), &e) < 0) {
		snprintf(c->refusal, sizeof(c->refusal), "bad TLS server name: %s", e.msg);
		c->refusal_code = "tls_malformed";
		c->sni[0] = '\0';
		return SSL_CLIENT_HELLO_ERROR;
	}
	st = vault_daemon_state(c->d);
	sb = st ? policy_sandbox_by_name(st->policy, c->sandbox) : NULL;
	ok = sb && policy_host_allows(sb, c->sni, IPPROTO_TCP, c->orig.port, NULL);
	vault_state_unref(st);
	if (!ok) {
		snprintf(c->refusal, sizeof(c->refusal), "%s:%u is not on the allow list of %s",
			 c->sni, c->orig.port, c->sandbox);
		c->refusal_code = "vault_not_allowed";
		return SSL_CLIENT_HELLO_ERROR;
	}
	if (ca_leaf_get(c->d->ca, c->sni, c->orig.port, &cert, &key, &e) < 0) {
		*al = SSL_AD_INTERNAL_ERROR;
		snprintf(c->refusal, sizeof(c->refusal), "%s", e.msg);
		c->refusal_code = "vault_certificate_failed";
		return SSL_CLIENT_HELLO_ERROR;
	}
	ok = SSL_use_certificate(ssl, cert) == 1 && SSL_use_PrivateKey(ssl, key) == 1;
	X509_free(cert);
	EVP_PKEY_free(key);
	if (!ok) {
		*al = SSL_AD_INTERNAL_ERROR;
		pc_strlcpy(c->refusal, "installing the leaf certificate failed",
			   sizeof(c->refusal));
		c->refusal_code = "vault_certificate_failed";
		return SSL_CLIENT_HELLO_ERROR;
	}
	return SSL_CLIENT_HELLO_SUCCESS;
}

/* ALPN: http/1.1 only (HTTP/2 is not implemented; see docs/vault.md). */
static int alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		   const unsigned char *in, unsigned int inlen, void *arg)
{
	(void)ssl;
	(void)arg;
	for (unsigned i = 0; i < inlen;) {
		unsigned l = in[i];

		if (i + 1 + l > inlen)
			break;
		if (l == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) {
			*out = in + i + 1;
			*outlen = 8;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + l;
	}
	return SSL_TLSEXT_ERR_NOACK;
}

int conn_server_ctx_new(SSL_CTX **out, struct pc_err *err)
{
	static const unsigned char sid[] = "portcullis-vault";
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx)
		return pc_err_set(err, PC_ENOMEM, "SSL_CTX_new failed");
	if (conn_ex_idx < 0)
		conn_ex_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_client_hello_cb(ctx, hello_cb, NULL);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_cb, NULL);
	SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	/* one recv per record rather than header and body apart; waits check
	 * SSL_has_pending, which counts the bytes read ahead */
	SSL_CTX_set_read_ahead(ctx, 1);
	*out = ctx;
	return 0;
}

/* ---- the request loop ------------------------------------------------------- */

/* Read until a whole request head is parsed. true with *req, or false
 * when the connection ends: closed between requests, timed out, or refused
 * (answered and logged here). */
static bool read_head(struct conn *c, struct http_request *req)
{
	const struct config *cfg = &c->d->cfg;
	size_t maxh = cfg->vault.max_header_bytes;
	uint64_t deadline = pc_now_mono_ms() + cfg->vault.idle_timeout_ms;
	bool started = c->in_len > 0;
	struct pc_err e = {0};
	struct http_scan sc;
	unsigned status;

	http_scan_init(&sc);
	c->method[0] = c->path[0] = '\0';
	c->req_timed_out = false;
	if (started) {
		deadline = pc_now_mono_ms() + cfg->vault.handshake_timeout_ms;
		c->req_deadline = pc_now_mono_ms() + cfg->vault.request_timeout_ms;
	}
	for (;;) {
		/* incremental: a head sent a byte per record costs one parse */
		int rc = http_request_parse_more(&sc, c->in, c->in_len, maxh, req, &status, &e);

		if (rc > 0)
			return true;
		if (rc != PC_EAGAIN) {
			conn_refuse(c, status, false, "vault_bad_request", e.msg);
			return false;
		}
		if (c->in_len >= maxh) {
			conn_refuse(c, 431, false, "vault_head_too_large",
				    "header section too large");
			return false;
		}
		rc = io_read_wait(c->ssl, c->fd, c->in + c->in_len, c->in_cap - c->in_len,
				  started && c->req_deadline < deadline ? c->req_deadline
									: deadline);
		if (rc <= 0) {
			if (rc == PC_ETIMEOUT && started)
				conn_refuse(c, 400, false, "vault_request_timeout",
					    "request head not completed in time");
			return false;
		}
		c->in_len += (size_t)rc;
		if (!started) {
			/* slowloris: once a head starts it must end within the header timeout */
			started = true;
			deadline = pc_now_mono_ms() + cfg->vault.handshake_timeout_ms;
			c->req_deadline = pc_now_mono_ms() + cfg->vault.request_timeout_ms;
		}
	}
}

void conn_upstream_close(struct conn *c)
{
	if (c->ussl) {
		SSL_shutdown(c->ussl);
		SSL_free(c->ussl);
	}
	if (c->ufd >= 0) {
		vault_daemon_conn_fds(c->d, c->slot, c->fd, -1);
		close(c->ufd);
	}
	c->ussl = NULL;
	c->ufd = -1;
	c->ulen = c->uoff = 0;
}

/* The upstream socket exists (or is about to close): a stopping daemon
 * shuts it down to end a connect or handshake in progress. */
static void conn_track_ufd(void *arg, int fd)
{
	struct conn *c = arg;

	vault_daemon_conn_fds(c->d, c->slot, c->fd, fd);
}

/* An idle upstream connection that is readable has been closed by the
 * server (or sent something unasked): do not send a request into it. */
static bool upstream_stale(struct conn *c)
{
	struct pollfd p = {.fd = c->ufd, .events = POLLIN};

	return SSL_has_pending(c->ussl) || poll(&p, 1, 0) != 0;
}

/* Everything about one request after its head was parsed. */
static enum conn_next handle_request(struct conn *c, struct http_request *req)
{
	struct vault_daemon *d = c->d;
	struct vault_state *st = vault_daemon_state(d);
	const struct policy_sandbox *sb;
	struct inject_out io = {0};
	struct pc_err e = {0};
	enum conn_next rc;
	int acked = 0;

	conn_note(c, req);
	c->st = st;
	sb = st ? policy_sandbox_by_name(st->policy, c->sandbox) : NULL;
	if (!sb) {
		rc = conn_refuse(c, 403, false, "vault_sandbox_gone",
				 "sandbox is no longer in the policy");
		goto out;
	}
	if (inject_request(st, sb, c->sni, c->orig.port, c->in, req, c->out,
			   c->out_cap - CONN_OUT_BODY, &io) < 0) {
		rc = conn_refuse(c, 500, false, "internal_error", "internal error (out of memory)");
		goto out;
	}
	if (io.status) {
		rc = conn_refuse_named(c, io.status, io.exfil, io.code, io.reason, io.refused);
		goto out;
	}
	/* no record, no request */
	conn_log(c, LOGREC_HTTP_REQUEST, LOGREC_ALLOWED, NULL, 0, io.secrets, true, &acked);
	if (!acked) {
		conn_send_error(c, 503, "no log record: logd did not acknowledge the request");
		rc = CONN_CLOSE;
		goto out;
	}
	if (c->ussl && upstream_stale(c))
		conn_upstream_close(c);
	if (!c->ussl) {
		if (upstream_connect_tracked(d->client_ctx, c->sandbox, &c->orig, c->sni,
					     (int)d->cfg.vault.handshake_timeout_ms, conn_track_ufd,
					     c, &c->ufd, &c->ussl, &e) < 0) {
			pc_log(PC_LOG_WARN, "sandbox %s: %s: %s", c->sandbox, c->sni, e.msg);
			conn_log_refused(c, LOGREC_HTTP_REQUEST, "vault_upstream_failed", e.msg,
					 502);
			conn_send_error(c, 502, e.msg);
			rc = CONN_CLOSE;
			goto out;
		}
		atomic_fetch_add(SSL_session_reused(c->ussl) ? &d->n->upstream_resumed
							     : &d->n->upstream_full,
				 1);
	}
	rc = relay_exchange(c, st, req, &io);
out:
	sodium_memzero(c->out, io.head_len);
	inject_out_clear(&io);
	c->st = NULL;
	vault_state_unref(st);
	return rc;
}

/* After an error answer the client may still be sending (a refused body,
 * an oversized head): closing with unread data would reset the connection
 * and lose the answer. Half-close and drain, bounded in time and bytes. */
static void conn_linger(struct conn *c)
{
	uint64_t deadline = pc_now_mono_ms() + 1000;
	size_t drained = 0;

	SSL_shutdown(c->ssl);
	shutdown(c->fd, SHUT_WR);
	while (drained < 1024 * 1024) {
		int n = io_read(c->ssl, c->fd, c->in, c->in_cap, deadline);

		if (n <= 0)
			break;
		drained += (size_t)n;
	}
}

static void conn_free(struct conn *c)
{
	conn_upstream_close(c);
	relay_conn_free(c);
	if (c->ssl) {
		if (c->linger)
			conn_linger(c);
		else
			SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
	}
	if (c->fd >= 0) {
		vault_daemon_conn_fds(c->d, c->slot, -1, -1);
		close(c->fd);
	}
	if (c->in) {
		sodium_memzero(c->in, c->in_cap);
		free(c->in);
	}
	if (c->ubuf) {
		sodium_memzero(c->ubuf, c->ucap);
		free(c->ubuf);
	}
	secmem_free(c->out, c->out_cap);
	vault_daemon_conn_release(c->d, c->slot, c->sandbox);
	free(c);
}

void conn_main(void *arg)
{
	struct conn_start *cs = arg;
	struct conn *c = calloc(1, sizeof(*c));
	const struct config *cfg = &cs->d->cfg;
	int one = 1;

	if (!c) {
		vault_daemon_conn_fds(cs->d, cs->slot, -1, -1);
		close(cs->fd);
		vault_daemon_conn_release(cs->d, cs->slot, cs->sandbox);
		free(cs);
		return;
	}
	c->d = cs->d;
	c->slot = cs->slot;
	c->fd = cs->fd;
	c->ufd = -1;
	c->src = cs->src;
	c->orig = cs->orig;
	pc_strlcpy(c->sandbox, cs->sandbox, sizeof(c->sandbox));
	free(cs);
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->in_cap = cfg->vault.max_header_bytes + CONN_IO_BUF;
	c->ucap = cfg->vault.max_header_bytes + CONN_IO_BUF;
	/* room for the head and a small body after it: one write upstream */
	c->out_cap = inject_out_cap(cfg->vault.max_header_bytes) + CONN_OUT_BODY;
	c->in = malloc(c->in_cap);
	c->ubuf = malloc(c->ucap);
	c->out = secmem_alloc(c->out_cap);
	c->ssl = SSL_new(c->d->server_ctx);
	if (!c->in || !c->ubuf || !c->out || !c->ssl || !SSL_set_fd(c->ssl, c->fd) ||
	    !SSL_set_ex_data(c->ssl, conn_ex_idx, c)) {
		pc_log(PC_LOG_ERR, "connection from sandbox %s: out of memory", c->sandbox);
		goto out;
	}
	if (io_handshake(c->ssl, c->fd, true, pc_now_mono_ms() + cfg->vault.handshake_timeout_ms) <
	    0) {
		ERR_clear_error();
		if (c->refusal[0]) {
			pc_log(PC_LOG_NOTICE, "sandbox %s: TLS refused: %s", c->sandbox,
			       c->refusal);
			conn_log_refused(c, LOGREC_CONNECT, c->refusal_code, c->refusal, 0);
		}
		SSL_free(c->ssl);
		c->ssl = NULL;
		goto out;
	}
	for (;;) {
		struct http_request req;

		if (!read_head(c, &req) || handle_request(c, &req) != CONN_KEEP)
			break;
	}
out:
	conn_free(c);
}
