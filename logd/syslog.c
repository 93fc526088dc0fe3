/* Syslog export: each record and checkpoint that reached the file becomes
 * an RFC 5424 message (ECS fields and the record hash as structured data),
 * sent to the local syslog socket and/or a remote collector over TCP with
 * octet counting (RFC 6587), optionally TLS (RFC 5425). Each destination
 * has a bounded spool and its own thread, so a slow or absent collector
 * never holds up the log itself. */
#include "logd/logd_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MSG_MAX		       16384
#define BATCH_BYTES	       65536
#define SPOOL_BYTES_PER_RECORD 2048 /* the spool's byte bound, per record of log.syslog.spool */
#define IO_TIMEOUT_MS	       5000

/* A spooled message: [u32 length][u64 seq][bytes] in a byte ring. */
#define HDR 12

struct spool {
	uint8_t *buf;
	size_t cap, max_cap, head, used;
	uint64_t count, max_count;
	uint64_t first_id, next_id; /* ids of the oldest and of the next message */
	uint64_t dropped, dropped_first, dropped_last;
};

enum sink_kind { SINK_LOCAL, SINK_TCP, SINK_TLS };

struct sink {
	enum sink_kind kind;
	char target[PC_PATH_MAX]; /* socket path, or host */
	char port[8];
	SSL_CTX *ctx;
	pthread_t th;
	bool started;
	/* mu guards the spool, stop and deadline: the server thread pushes,
	 * the sink thread sends */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct spool sp;
	bool stop;
	uint64_t deadline_ms;
	/* the sink thread's own */
	int fd;
	SSL *ssl;
	uint8_t out[BATCH_BYTES + MSG_MAX + 64];
	uint64_t sent;
	char last_err[600];
	bool down; /* told the operator it is unreachable */
};

struct logx {
	struct sink *sinks[2];
	size_t n;
	char host[256];
	long pid;
	struct pc_buf stage; /* messages of the current batch, framed as in the spool */
};

/* ---- spool -------------------------------------------------------------- */

static void ring_put(struct spool *s, size_t off, const void *p, size_t n)
{
	size_t a = off % s->cap, first = n < s->cap - a ? n : s->cap - a;

	memcpy(s->buf + a, p, first);
	memcpy(s->buf, (const uint8_t *)p + first, n - first);
}

static void ring_get(const struct spool *s, size_t off, void *p, size_t n)
{
	size_t a = off % s->cap, first = n < s->cap - a ? n : s->cap - a;

	memcpy(p, s->buf + a, first);
	memcpy((uint8_t *)p + first, s->buf, n - first);
}

static void spool_drop_oldest(struct spool *s)
{
	uint32_t len;
	uint64_t seq;

	ring_get(s, s->head, &len, 4);
	ring_get(s, s->head + 4, &seq, 8);
	if (!s->dropped)
		s->dropped_first = seq;
	s->dropped_last = seq;
	s->dropped++;
	s->head = (s->head + HDR + len) % s->cap;
	s->used -= HDR + len;
	s->count--;
	s->first_id++;
}

/* Grow to at least need bytes (up to max_cap), keeping the order. */
static bool spool_grow(struct spool *s, size_t need)
{
	size_t cap = s->cap ? s->cap : 1 << 16;
	uint8_t *nb;

	while (cap < need && cap < s->max_cap)
		cap *= 2;
	if (cap > s->max_cap)
		cap = s->max_cap;
	if (cap <= s->cap || cap < need)
		return false;
	nb = malloc(cap);
	if (!nb)
		return false;
	if (s->used)
		ring_get(s, s->head, nb, s->used);
	free(s->buf);
	s->buf = nb;
	s->cap = cap;
	s->head = 0;
	return true;
}

/* Oldest messages give way when the spool is full: the file has them all,
 * and a notice tells the collector which seqs it missed. */
static void spool_push(struct spool *s, uint64_t seq, const uint8_t *msg, uint32_t len)
{
	size_t need = HDR + len;

	if (need > s->max_cap || s->max_count == 0) {
		if (!s->dropped)
			s->dropped_first = seq;
		s->dropped_last = seq;
		s->dropped++;
		return;
	}
	if (s->used + need > s->cap)
		spool_grow(s, s->used + need);
	while (s->count && (s->used + need > s->cap || s->count >= s->max_count))
		spool_drop_oldest(s);
	if (need > s->cap) {
		s->dropped++;
		return;
	}
	ring_put(s, s->head + s->used, &len, 4);
	ring_put(s, s->head + s->used + 4, &seq, 8);
	ring_put(s, s->head + s->used + HDR, msg, len);
	s->used += need;
	s->count++;
	s->next_id++;
}

/* ---- staging (server thread) --------------------------------------------- */

static void stage_add(struct logx *x, uint64_t seq, const char *msg, int n)
{
	uint32_t len = (uint32_t)n;

	if (n <= 0)
		return;
	if (pc_buf_reserve(&x->stage, HDR + len) < 0) {
		/* the file has it; the copy is what a spool overflow loses:
		 * drop this one, keep staging the next */
		x->stage.err = 0;
		return;
	}
	pc_buf_put(&x->stage, &len, 4);
	pc_buf_put(&x->stage, &seq, 8);
	pc_buf_put(&x->stage, msg, len);
}

static void hook_stage(void *ctx, const struct logrec *rec, uint64_t seq, uint64_t time_ms,
		       const uint8_t hash[MERKLE_HASH])
{
	struct logx *x = ctx;
	char msg[MSG_MAX];

	if (x->n == 0) /* no sink: hook_done would discard the copy unread */
		return;
	stage_add(x, seq, msg,
		  logx_format_record(rec, seq, time_ms, hash, x->host, x->pid, msg, sizeof(msg)));
}

static void hook_stage_checkpoint(void *ctx, const char *note, size_t len)
{
	struct logx *x = ctx;
	char msg[MSG_MAX];

	if (x->n == 0)
		return;
	stage_add(x, 0, msg, logx_format_checkpoint(note, len, x->host, x->pid, msg, sizeof(msg)));
}

static void hook_done(void *ctx, bool written)
{
	struct logx *x = ctx;

	if (written && x->stage.len) {
		for (size_t i = 0; i < x->n; i++) {
			struct sink *k = x->sinks[i];

			pthread_mutex_lock(&k->mu);
			for (size_t off = 0; off < x->stage.len;) {
				uint32_t len;
				uint64_t seq;

				memcpy(&len, x->stage.p + off, 4);
				memcpy(&seq, x->stage.p + off + 4, 8);
				spool_push(&k->sp, seq, (const uint8_t *)x->stage.p + off + HDR,
					   len);
				off += HDR + len;
			}
			pthread_cond_signal(&k->cv);
			pthread_mutex_unlock(&k->mu);
		}
	}
	pc_buf_reset(&x->stage);
}

void logx_hooks(struct logx *x, struct logw_export *exp)
{
	exp->stage = hook_stage;
	exp->stage_checkpoint = hook_stage_checkpoint;
	exp->done = hook_done;
	exp->ctx = x;
}

/* ---- the sink threads ----------------------------------------------------- */

static void sink_disconnect(struct sink *k)
{
	if (k->ssl) {
		SSL_free(k->ssl);
		k->ssl = NULL;
	}
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
}

static int tcp_connect(struct sink *k)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL, *ai;
	struct timeval tv = {.tv_sec = IO_TIMEOUT_MS / 1000};
	int fd = -1, rc;

	rc = getaddrinfo(k->target, k->port, &hints, &res);
	if (rc != 0) {
		snprintf(k->last_err, sizeof(k->last_err), "resolving %s: %s", k->target,
			 gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		snprintf(k->last_err, sizeof(k->last_err), "connecting to %s:%s: %s", k->target,
			 k->port, strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

static int sink_connect(struct sink *k)
{
	if (k->kind == SINK_LOCAL) {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};

		pc_strlcpy(sun.sun_path, k->target, sizeof(sun.sun_path));
		k->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (k->fd < 0 || connect(k->fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
			snprintf(k->last_err, sizeof(k->last_err), "%s: %s", k->target,
				 strerror(errno));
			sink_disconnect(k);
			return -1;
		}
		return 0;
	}
	k->fd = tcp_connect(k);
	if (k->fd < 0)
		return -1;
	if (k->kind == SINK_TLS) {
		struct in6_addr ip;
		bool is_ip = inet_pton(AF_INET, k->target, &ip) == 1 ||
			     inet_pton(AF_INET6, k->target, &ip) == 1;

		k->ssl = SSL_new(k->ctx);
		if (!k->ssl || SSL_set_fd(k->ssl, k->fd) != 1 ||
		    (!is_ip && SSL_set_tlsext_host_name(k->ssl, k->target) != 1) ||
		    (!is_ip && SSL_set1_host(k->ssl, k->target) != 1) ||
		    (is_ip &&
		     X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(k->ssl), k->target) != 1) ||
		    SSL_connect(k->ssl) != 1) {
			unsigned long e = ERR_get_error();
			long v = k->ssl ? SSL_get_verify_result(k->ssl) : X509_V_OK;

			snprintf(k->last_err, sizeof(k->last_err), "TLS with %s:%s: %s%s%s",
				 k->target, k->port,
				 e ? ERR_reason_error_string(e) : "handshake failed",
				 v != X509_V_OK ? ": " : "",
				 v != X509_V_OK ? X509_verify_cert_error_string(v) : "");
			ERR_clear_error();
			sink_disconnect(k);
			return -1;
		}
	}
	return 0;
}

/* Has the collector closed its side? (it never sends us anything) */
static bool peer_closed(struct sink *k)
{
	struct pollfd p = {.fd = k->fd, .events = POLLIN};
	char c;

	if (k->kind == SINK_LOCAL || poll(&p, 1, 0) != 1)
		return false;
	if (k->ssl)
		return SSL_peek(k->ssl, &c, 1) <= 0;
	return recv(k->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

static int sink_write(struct sink *k, const uint8_t *p, size_t n)
{
	while (n) {
		int w;

		if (k->ssl) {
			w = SSL_write(k->ssl, p, (int)(n < INT32_MAX ? n : INT32_MAX));
			if (w <= 0) {
				snprintf(k->last_err, sizeof(k->last_err), "TLS write failed");
				ERR_clear_error();
				return -1;
			}
		} else {
			ssize_t r = send(k->fd, p, n, MSG_NOSIGNAL);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				snprintf(k->last_err, sizeof(k->last_err), "sending: %s",
					 strerror(errno));
				return -1;
			}
			w = (int)r;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Frame one message into k->out: octet counting for TCP (RFC 6587 3.4.1). */
static size_t frame(struct sink *k, size_t off, const uint8_t *msg, uint32_t len)
{
	if (k->kind != SINK_LOCAL)
		off += (size_t)snprintf((char *)k->out + off, 16, "%u ", len);
	memcpy(k->out + off, msg, len);
	return off + len;
}

static void *sink_main(void *arg)
{
	struct sink *k = arg;
	unsigned backoff_ms = 250;

	pthread_mutex_lock(&k->mu);
	for (;;) {
		uint64_t last_id, dropped = 0;
		size_t off = 0, pos;
		int rc;

		while (!k->stop && k->sp.count == 0 && k->sp.dropped == 0)
			pthread_cond_wait(&k->cv, &k->mu);
		if (k->stop && ((k->sp.count == 0 && k->sp.dropped == 0) ||
				pc_now_mono_ms() >= k->deadline_ms))
			break;
		if (k->fd < 0 || peer_closed(k)) {
			sink_disconnect(k);
			pthread_mutex_unlock(&k->mu);
			rc = sink_connect(k);
			pthread_mutex_lock(&k->mu);
			if (rc < 0) {
				struct timespec ts;
				uint64_t until = pc_now_mono_ms() + backoff_ms;

				if (!k->down)
					pc_log(PC_LOG_WARN,
					       "syslog export to %s unavailable, spooling (at most "
					       "%llu records): %s",
					       k->target, (unsigned long long)k->sp.max_count,
					       k->last_err);
				k->down = true;

				if (k->stop)
					break; /* no collector to flush to */
				clock_gettime(CLOCK_REALTIME, &ts);
				ts.tv_sec += backoff_ms / 1000;
				ts.tv_nsec += (long)(backoff_ms % 1000) * 1000000L;
				if (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
				while (!k->stop && pc_now_mono_ms() < until)
					if (pthread_cond_timedwait(&k->cv, &k->mu, &ts) ==
					    ETIMEDOUT)
						break;
				backoff_ms = backoff_ms < 16000 ? backoff_ms * 2 : 30000;
				continue;
			}
			backoff_ms = 250;
			if (k->down)
				pc_log(PC_LOG_NOTICE, "syslog export to %s connected", k->target);
			k->down = false;
		}
		/* A batch: first a notice of what the spool lost, if anything. */
		if (k->sp.dropped) {
			char note[400];
			int n = snprintf(note, sizeof(note),
					 "<%d>1 - - portcullis-logd - spool-overflow [%s"
					 " dropped=\"%llu\" first_seq=\"%llu\" last_seq=\"%llu\"] "
					 "%llu records were not exported while the collector was "
					 "away; the log file has them",
					 logx_facility() * 8 + 4, logx_sd_id(),
					 (unsigned long long)k->sp.dropped,
					 (unsigned long long)k->sp.dropped_first,
					 (unsigned long long)k->sp.dropped_last,
					 (unsigned long long)k->sp.dropped);

			dropped = k->sp.dropped;
			off = frame(k, off, (const uint8_t *)note, (uint32_t)n);
		}
		last_id = k->sp.first_id;
		pos = k->sp.head;
		for (uint64_t i = 0; i < k->sp.count && off < BATCH_BYTES; i++) {
			uint32_t len;

			ring_get(&k->sp, pos, &len, 4);
			if (off + len + 16 > sizeof(k->out))
				break;
			if (k->kind == SINK_LOCAL && off) /* one datagram per message */
				break;
			if (k->kind != SINK_LOCAL)
				off += (size_t)snprintf((char *)k->out + off, 16, "%u ", len);
			ring_get(&k->sp, pos + HDR, k->out + off, len);
			off += len;
			pos = (pos + HDR + len) % k->sp.cap;
			last_id++;
		}
		pthread_mutex_unlock(&k->mu);
		rc = sink_write(k, k->out, off);
		pthread_mutex_lock(&k->mu);
		if (rc < 0) {
			sink_disconnect(k);
			continue;
		}
		/* Sent: forget it (unless the spool already dropped it meanwhile). */
		if (dropped && k->sp.dropped >= dropped) {
			k->sp.dropped -= dropped;
			if (!k->sp.dropped)
				k->sp.dropped_first = k->sp.dropped_last = 0;
		}
		while (k->sp.count && k->sp.first_id < last_id) {
			uint32_t len;

			ring_get(&k->sp, k->sp.head, &len, 4);
			k->sp.head = (k->sp.head + HDR + len) % k->sp.cap;
			k->sp.used -= HDR + len;
			k->sp.count--;
			k->sp.first_id++;
			k->sent++;
		}
	}
	pthread_mutex_unlock(&k->mu);
	sink_disconnect(k);
	return NULL;
}

/* ---- lifecycle ---------------------------------------------------------- */

static void sink_free(struct sink *k)
{
	if (!k)
		return;
	sink_disconnect(k);
	SSL_CTX_free(k->ctx);
	free(k->sp.buf);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k);
}

static int sink_new(enum sink_kind kind, const struct logx_conf *c, struct sink **out,
		    struct pc_err *err)
{
	struct sink *k = calloc(1, sizeof(*k));
	uint64_t bytes = (uint64_t)c->spool_records * SPOOL_BYTES_PER_RECORD;

	if (!k)
		return pc_err_set(err, PC_ENOMEM, "syslog: out of memory");
	k->kind = kind;
	k->fd = -1;
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, NULL);
	k->sp.max_count = c->spool_records ? c->spool_records : 1;
	k->sp.max_cap = bytes < (1ULL << 30) ? (size_t)bytes : (size_t)1 << 30;
	if (k->sp.max_cap < MSG_MAX + HDR)
		k->sp.max_cap = MSG_MAX + HDR;
	if (kind == SINK_LOCAL) {
		pc_strlcpy(k->target, c->local_path, sizeof(k->target));
	} else {
		/* host:port or [v6]:port */
		const char *r = c->remote, *colon = strrchr(r, ':');
		size_t hl;

		if (!colon || !colon[1] || strlen(colon + 1) >= sizeof(k->port))
			goto bad;
		hl = (size_t)(colon - r);
		if (r[0] == '[' && hl >= 2 && r[hl - 1] == ']') {
			r++;
			hl -= 2;
		}
		if (hl == 0 || hl >= sizeof(k->target))
			goto bad;
		memcpy(k->target, r, hl);
		k->target[hl] = '\0';
		pc_strlcpy(k->port, colon + 1, sizeof(k->port));
	}
	if (kind == SINK_TLS) {
		k->ctx = SSL_CTX_new(TLS_client_method());
		if (!k->ctx || SSL_CTX_set_min_proto_version(k->ctx, TLS1_2_VERSION) != 1) {
			sink_free(k);
			return pc_err_set(err, PC_EIO, "syslog: no TLS context");
		}
		/* No verification, no connection (RFC 5425 5.2: the server's
		 * certificate, against the configured CA or the system's). */
		SSL_CTX_set_verify(k->ctx, SSL_VERIFY_PEER, NULL);
		if ((c->ca && *c->ca ? SSL_CTX_load_verify_locations(k->ctx, c->ca, NULL)
				     : SSL_CTX_set_default_verify_paths(k->ctx)) != 1) {
			sink_free(k);
			ERR_clear_error();
			return pc_err_set(err, PC_EIO, "syslog: cannot load the CA bundle %s",
					  c->ca && *c->ca ? c->ca : "(system default)");
		}
	}
	*out = k;
	return 0;
bad:
	sink_free(k);
	return pc_err_set(err, PC_EINVAL, "log.syslog.remote \"%s\" is not host:port", c->remote);
}

int logx_check(const struct logx_conf *c, struct pc_err *err)
{
	struct sink *k = NULL;
	int rc = 0;

	if (c->remote && *c->remote &&
	    (rc = sink_new(c->tls ? SINK_TLS : SINK_TCP, c, &k, err)) == 0)
		sink_free(k);
	return rc;
}

int logx_start(const struct logx_conf *c, struct logx **out, struct pc_err *err)
{
	struct logx *x = calloc(1, sizeof(*x));
	int rc;

	if (!x)
		return pc_err_set(err, PC_ENOMEM, "syslog: out of memory");
	if (gethostname(x->host, sizeof(x->host)) < 0 || !x->host[0])
		pc_strlcpy(x->host, "-", sizeof(x->host));
	x->host[sizeof(x->host) - 1] = '\0';
	for (char *p = x->host; *p; p++) /* HOSTNAME is PRINTUSASCII */
		if (*p <= 0x20 || *p >= 0x7f)
			*p = '-';
	x->pid = (long)getpid();
	if (c->local && c->local_path && *c->local_path) {
		if ((rc = sink_new(SINK_LOCAL, c, &x->sinks[x->n], err)) < 0)
			goto fail;
		x->n++;
	}
	if (c->remote && *c->remote) {
		if ((rc = sink_new(c->tls ? SINK_TLS : SINK_TCP, c, &x->sinks[x->n], err)) < 0)
			goto fail;
		x->n++;
	}
	for (size_t i = 0; i < x->n; i++) {
		if (pthread_create(&x->sinks[i]->th, NULL, sink_main, x->sinks[i]) != 0) {
			rc = pc_err_set(err, PC_EIO, "syslog: cannot start a thread");
			goto fail;
		}
		x->sinks[i]->started = true;
	}
	*out = x;
	return 0;
fail:
	logx_stop(x, 0, NULL);
	return rc;
}

void logx_stop(struct logx *x, int flush_ms, struct logx_stats *st)
{
	if (!x)
		return;
	if (st)
		memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < x->n; i++) {
		struct sink *k = x->sinks[i];

		pthread_mutex_lock(&k->mu);
		k->stop = true;
		k->deadline_ms = pc_now_mono_ms() + (uint64_t)(flush_ms > 0 ? flush_ms : 0);
		pthread_cond_signal(&k->cv);
		pthread_mutex_unlock(&k->mu);
	}
	for (size_t i = 0; i < x->n; i++) {
		struct sink *k = x->sinks[i];

		if (k->started)
			pthread_join(k->th, NULL);
		if (st) {
			st->sent += k->sent;
			st->unsent += k->sp.count;
			st->dropped += k->sp.dropped;
		}
		sink_free(k);
	}
	pc_buf_free(&x->stage);
	free(x);
}
