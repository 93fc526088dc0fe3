/* vault internals shared by the daemon's files (not used outside vault/ and
 * its tests): the served state, request checking and injection, the log
 * queue, upstream TLS and the connection threads. */
#ifndef PC_VAULT_INT_H
#define PC_VAULT_INT_H

#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>

#include "logd/logd.h"
#include "rules/rules.h"
#include "vault/vault.h"

/* ---- log queue (logq.c) ---------------------------------------------------- */

struct logq;
/* Start the log thread with a client for socket; timeout_ms bounds each
 * acknowledgement wait. */
int logq_start(const char *socket, int timeout_ms, struct logq **out, struct pc_err *err);
/* Queue a copy of rec. wait: block until logd acknowledged it (0) or did
 * not (<0: refuse the action). Without wait, returns once queued. */
int logq_record(struct logq *q, const struct logrec *rec, bool wait, struct pc_err *err);
/* As logq_record without wait, for a record that may ride along with the
 * next acknowledged batch (at most a few ms later): a response's status. */
int logq_record_lazy(struct logq *q, const struct logrec *rec, struct pc_err *err);
void logq_stop(struct logq *q);

/* ---- the state requests are served from (state.c) ---------------------------- */

/* Policy plus unsealed secrets; immutable once built, reference counted, and
 * swapped whole on SIGHUP. */
struct vault_state {
	struct policy *policy;
	struct vault_store *store;
	struct scrub_pat *values; /* per secret: value -> placeholder (response scrubbing) */
	atomic_int refs;
};

int vault_state_load(const struct pc_config *cfg, struct vault_state **out, struct pc_err *err);
/* As vault_state_load, from a policy and store the caller hands over (tests). */
int vault_state_make(struct policy *policy, struct vault_store *store, struct vault_state **out,
		     struct pc_err *err);
struct vault_state *vault_state_ref(struct vault_state *st);
void vault_state_unref(struct vault_state *st);

/* ---- request checking and injection (inject.c) ------------------------------ */

#define INJECT_MAX_DERIVED 8

/* The verdict on one request head. status 0: forward out[0..head_len). */
struct inject_out {
	unsigned status;   /* else: refuse with this status */
	bool exfil;	   /* log the refusal as an exfiltration attempt */
	char reason[256];  /* X-Portcullis-Error; never holds a value */
	char secrets[512]; /* names injected, comma separated */
	size_t head_len;
	/* Encoded forms of injected values (Basic credentials) to scrub from
	 * the response, besides the raw values; needles live in derived_mem. */
	struct scrub_pat derived[INJECT_MAX_DERIVED];
	size_t n_derived;
	uint8_t *derived_mem; /* sodium_malloc'ed; inject_out_clear wipes it */
};

/* Check req (parsed from buf) from sandbox sb on a TLS connection for sni,
 * original port port, and write the head to send upstream into out (cap
 * bytes, locked memory: it will hold real values). Returns 0 with
 * res->status set (0 = forward), or <0 on internal failure (refuse 500). */
int inject_request(const struct vault_state *st, const struct policy_sandbox *sb, const char *sni,
		   uint16_t port, const char *buf, const struct http_request *req, uint8_t *out,
		   size_t cap, struct inject_out *res);
void inject_out_clear(struct inject_out *res);
/* Bytes of out-buffer inject_request may need for a head of head_len. */
size_t inject_out_cap(size_t max_head);

/* ---- upstream TLS (upstream.c) ---------------------------------------------- */

/* A client context: TLS 1.2+, verification against trust (a CA bundle file,
 * or the system store when empty), ALPN http/1.1. */
int upstream_ctx_new(const char *trust, SSL_CTX **out, struct pc_err *err);
/* Connect to dst, handshake for host and verify its certificate and name
 * within timeout_ms. On failure err says why (for the 502 reason).
 * track(arg, fd) is called with the socket as soon as it exists (so that a
 * stopping daemon can shut it down mid-connect) and with -1 before it is
 * closed on failure. */
int upstream_connect_tracked(SSL_CTX *ctx, const struct pc_endpoint *dst, const char *host,
			     int timeout_ms, void (*track)(void *arg, int fd), void *arg, int *fd,
			     SSL **ssl, struct pc_err *err);

/* ---- I/O with deadlines (io.c) ---------------------------------------------- */

/* Non-blocking SSL I/O that waits with poll until deadline (monotonic ms).
 * io_read: >0 bytes, 0 clean EOF, <0 error or timeout (PC_ETIMEOUT). */
int io_read(SSL *ssl, int fd, void *buf, size_t len, uint64_t deadline);
/* As io_read, for when the peer must answer first (a response, the next
 * request): waits before the first read. */
int io_read_wait(SSL *ssl, int fd, void *buf, size_t len, uint64_t deadline);
int io_write(SSL *ssl, int fd, const void *buf, size_t len, uint64_t deadline);
int io_handshake(SSL *ssl, int fd, bool server, uint64_t deadline);

/* ---- the daemon and its connections (main.c, conn.c, relay.c) ------------- */

struct vault_daemon {
	struct pc_config cfg;
	struct vault_ca *ca;
	struct logq *logq;
	SSL_CTX *server_ctx;
	SSL_CTX *client_ctx;
	/* lock guards state and the per-sandbox connection counts: the accept
	 * loop, SIGHUP and every connection thread use them. */
	pthread_mutex_t lock;
	struct vault_state *state;
	struct sb_count {
		char name[POLICY_NAME_MAX];
		unsigned n;
	} * counts;
	size_t n_counts;
	unsigned conns; /* all connections */
	/* the connection threads (joinable): the accept loop joins each once
	 * it said it is done (a byte on reap_fd), and at SIGTERM shuts their
	 * sockets down and joins them all before freeing what they use */
	struct conn_slot *slots;
	int reap_fd; /* eventfd */
	struct vault_counters {
		/* counted where their records are made (conn_log, accept);
		 * read by the control thread (metrics.c) */
		_Atomic uint64_t conns_accepted, conns_refused;
		_Atomic uint64_t requests_allowed, requests_refused, exfil;
		_Atomic uint64_t injections, secrets_injected;
		_Atomic uint64_t log_failed;
	} n;
	struct pc_ctl *ctl;
};

/* metrics.c: the reply to "metrics" on vault.sock (pc_ctl_fn; ctx is the
 * daemon). */
char *vault_metrics(void *ctx, const char *req);

struct vault_state *vault_daemon_state(struct vault_daemon *d); /* a reference */

/* A connection thread as the daemon sees it: fd and ufd are the sockets
 * to shut down at SIGTERM (-1: none). Guarded by the daemon's lock; the
 * thread updates them before it closes a socket, so the daemon never shuts
 * down a number that was reused. */
struct conn_slot {
	pthread_t thr;
	int fd, ufd;
	bool done;
	struct conn_slot *next;
};
/* Set a slot's sockets (under the daemon's lock). */
void vault_daemon_conn_fds(struct vault_daemon *d, struct conn_slot *s, int fd, int ufd);

/* One accepted connection; conn_main owns it (and closes fd). */
struct conn_start {
	struct vault_daemon *d;
	struct conn_slot *slot;
	int fd;
	struct pc_endpoint src, orig;
	char sandbox[POLICY_NAME_MAX];
};
void *conn_main(void *arg);
/* Give back the per-sandbox slot conn_start took and say the thread is
 * done (its last call: the daemon then joins it). */
void vault_daemon_conn_release(struct vault_daemon *d, struct conn_slot *s, const char *sandbox);

/* One client connection (conn.c, relay.c). */
#define CONN_KEEP     0 /* the connection may carry another request */
#define CONN_CLOSE    1 /* close it */
#define CONN_IO_BUF   16384
#define CONN_OUT_BODY 4096 /* a body this small goes upstream with its head */

struct conn {
	struct vault_daemon *d;
	struct conn_slot *slot;
	int fd;
	SSL *ssl;
	int ufd; /* upstream: -1 / NULL until the first forwarded request */
	SSL *ussl;
	struct pc_endpoint src, orig;
	char sandbox[POLICY_NAME_MAX];
	char sni[256];
	char refusal[700];	/* why the handshake was refused */
	bool linger;		/* an error was answered: drain before closing */
	const char *why;	/* why relaying the current request failed (static text) */
	struct vault_state *st; /* the current request's (handle_request's reference) */
	/* the current request, for its log records */
	char method[24];
	char path[1024];
	/* client bytes: in[in_off..in_len) not consumed yet */
	char *in;
	size_t in_len, in_off, in_cap;
	/* upstream bytes: ubuf[uoff..ulen) */
	char *ubuf;
	size_t ulen, uoff, ucap;
	/* the head sent upstream (holds real values): locked, wiped after use;
	 * CONN_OUT_BODY more than the largest head, for a small body sent
	 * with it */
	uint8_t *out;
	size_t out_cap;
};

int conn_server_ctx_new(SSL_CTX **out, struct pc_err *err);
void conn_log(struct conn *c, enum logrec_action action, enum logrec_verdict verdict,
	      const char *reason, unsigned status, const char *secrets, bool wait, int *acked);
int conn_send_error(struct conn *c, unsigned status, const char *reason);
int conn_refuse(struct conn *c, unsigned status, bool exfil, const char *reason);
void conn_upstream_close(struct conn *c);
/* Forward the request (head in c->out) and its body, relay the response.
 * Returns CONN_KEEP or CONN_CLOSE. */
/* After a 101: relay WebSocket messages both ways (tunnel.c). Returns
 * CONN_CLOSE. */
int tunnel_run(struct conn *c, const struct vault_state *st, const struct scrub_pat *pats,
	       size_t n_pats);
int relay_exchange(struct conn *c, struct vault_state *st, const struct http_request *req,
		   const struct inject_out *io);

#endif
