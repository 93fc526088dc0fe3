/* Syslog export: each record and checkpoint that reached the file becomes
 * an RFC 5424 message (ECS fields and the record hash as structured data),
 * sent to the local syslog socket and/or a remote collector over TCP with
 * octet counting (RFC 6587), optionally TLS (RFC 5425).
 *
 * Nothing here may hold up the packet path. The writer's hooks run on the
 * server's thread: they format, then append to each destination's spool
 * under a lock held only for that copy. Each destination has a thread of
 * its own that does every bit of I/O (connect, TLS handshake, writes, the
 * collector's TLS session tickets and alerts) on a non-blocking socket with
 * poll, and takes the spool's lock only to move messages out of it, never
 * across a system call that could wait. A slow, stalled or hostile
 * collector fills its spool, never the writer's time. */
#include "logd/logd_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define BATCH_BYTES	       65536
#define BATCH_MSGS	       512
#define SPOOL_BYTES_PER_RECORD 2048  /* the spool's byte bound, per record of log.syslog.spool */
#define CONNECT_MS	       10000 /* connect and TLS handshake */
#define STALL_MS	       30000 /* a collector that takes nothing this long is dropped */

/* A staged message: [struct stage_hdr][bytes]. */
struct stage_hdr {
	uint32_t len;
	uint64_t seq; /* 0: a checkpoint */
	uint64_t epoch, cp_size;
};

enum sink_kind { SINK_LOCAL, SINK_TCP, SINK_TLS };

struct sink {
	enum sink_kind kind;
	char target[PC_PATH_MAX]; /* socket path, or host */
	char port[8];
	SSL_CTX *ctx;
	pthread_t th;
	bool started;
	int efd; /* eventfd: a push to an idle thread, or stop */
	/* mu guards sp and idle, and is never held across I/O: the server
	 * thread pushes, the sink thread takes */
	pthread_mutex_t mu;
	struct logx_spool *sp;
	bool idle; /* the thread waits for messages: the next push wakes it */
	_Atomic bool stop, detached;
	_Atomic int refs; /* retired: the thread and logx_retire, the last frees */
	_Atomic uint64_t deadline_ms;
	/* the sink thread's own */
	int fd;
	SSL *ssl;
	uint8_t out[BATCH_BYTES + LOGX_MSG_MAX + 64];
	size_t out_len, out_pos;     /* the batch taken, and how much of it was written */
	size_t ends[BATCH_MSGS + 1]; /* where each of its messages ends */
	size_t n_msgs, msg_i;	     /* its messages, the first not yet written whole */
	uint64_t progress_ms;	     /* last time the collector took bytes */
	uint64_t sent, dropped;
	uint64_t sp_max; /* records the spool holds */
	char last_err[600];
	bool down; /* told the operator it is unreachable */
	/* the exporter's HOSTNAME and PROCID, for the spool-overflow notice
	 * (a copy: a retired sink outlives its logx) */
	char host[256];
	long pid;
};

struct logx {
	struct sink *sinks[2];
	size_t n;
	char host[256];
	long pid;
	uint64_t epoch;	     /* log-segment records staged: a new tree each */
	struct pc_buf stage; /* messages of the current batch */
};

/* ---- staging (server thread) --------------------------------------------- */

static void stage_add(struct logx *x, uint64_t seq, uint64_t cp_size, const char *msg, int n)
{
	struct stage_hdr h = {
	    .len = (uint32_t)n, .seq = seq, .epoch = x->epoch, .cp_size = cp_size};

	if (n <= 0)
		return;
	if (pc_buf_reserve(&x->stage, sizeof(h) + h.len) < 0) {
		/* the file has it; the copy is what a spool overflow loses:
		 * drop this one, keep staging the next */
		x->stage.err = 0;
		return;
	}
	pc_buf_put(&x->stage, &h, sizeof(h));
	pc_buf_put(&x->stage, msg, h.len);
}

static void hook_stage(void *ctx, const struct logrec *rec, uint64_t seq, uint64_t time_ms,
		       const uint8_t hash[MERKLE_HASH])
{
	struct logx *x = ctx;
	char msg[LOGX_MSG_MAX + 1];

	if (x->n == 0) /* no sink: hook_done would discard the copy unread */
		return;
	if (rec->action == LOGREC_SEGMENT) /* a new file: its tree starts afresh */
		x->epoch++;
	stage_add(x, seq, 0, msg,
		  logx_format_export(rec, seq, time_ms, hash, x->host, x->pid, msg, sizeof(msg)));
}

static void hook_stage_checkpoint(void *ctx, const char *note, size_t len)
{
	struct logx *x = ctx;
	char msg[LOGX_MSG_MAX + 1];
	const char *blank = memmem(note, len, "\n\n", 2);
	struct checkpoint cp = {0};

	if (x->n == 0)
		return;
	if (blank)
		checkpoint_body_parse(note, (size_t)(blank - note) + 1, &cp, NULL);
	stage_add(x, 0, cp.size, msg,
		  logx_format_checkpoint(note, len, x->host, x->pid, msg, sizeof(msg)));
}

static void wake(struct sink *k)
{
	uint64_t one = 1;

	/* non-blocking: a counter at its maximum already means "wake up" */
	if (write(k->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		pc_log(PC_LOG_WARN, "syslog export: waking the sender: %s", strerror(errno));
}

static void hook_done(void *ctx, bool written)
{
	struct logx *x = ctx;

	if (written && x->stage.len) {
		for (size_t i = 0; i < x->n; i++) {
			struct sink *k = x->sinks[i];
			bool idle;

			pthread_mutex_lock(&k->mu);
			for (size_t off = 0; off < x->stage.len;) {
				struct stage_hdr h;

				memcpy(&h, x->stage.p + off, sizeof(h));
				logx_spool_push(k->sp, h.seq, h.epoch, h.cp_size,
						x->stage.p + off + sizeof(h), h.len);
				off += sizeof(h) + h.len;
			}
			idle = k->idle;
			k->idle = false;
			pthread_mutex_unlock(&k->mu);
			if (idle)
				wake(k);
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

/* The poll timeout until the mono time until (0: none), earlier when
 * stopping with a deadline. */
static int timeout_to(const struct sink *k, uint64_t until)
{
	uint64_t now = pc_now_mono_ms();

	if (atomic_load(&k->stop)) {
		uint64_t d = atomic_load(&k->deadline_ms);

		if (!until || d < until)
			until = d;
	}
	if (!until)
		return -1;
	return until <= now ? 0 : until - now > INT_MAX ? INT_MAX : (int)(until - now);
}

/* Wait for fd to be ready for events (and the eventfd), until until.
 * Returns fd's revents (0 on a timeout or a wake-up). */
static short fd_wait(struct sink *k, int fd, short events, uint64_t until)
{
	struct pollfd p[2] = {{.fd = k->efd, .events = POLLIN}, {.fd = fd, .events = events}};
	int n = fd >= 0 ? 2 : 1;

	if (poll(p, (nfds_t)n, timeout_to(k, until)) <= 0)
		return 0;
	if (p[0].revents & POLLIN) {
		uint64_t v;

		if (read(k->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			pc_log(PC_LOG_WARN, "syslog export: eventfd: %s", strerror(errno));
	}
	return n == 2 ? p[1].revents : 0;
}

static bool stop_due(const struct sink *k)
{
	return atomic_load(&k->stop) && pc_now_mono_ms() >= atomic_load(&k->deadline_ms);
}

/* What the collector sent us: TLS session tickets, alerts, a close, or
 * bytes it should not send; read and dropped, never waited for (a read
 * that would block returns at once). -1 (last_err says why) if the
 * connection ended. */
static int sink_input(struct sink *k)
{
	char buf[4096];

	/* bounded: a collector flooding us cannot keep the thread here */
	for (int i = 0; i < 64; i++) {
		if (k->ssl) {
			int r = SSL_read(k->ssl, buf, sizeof(buf)), e;

			if (r > 0)
				continue;
			e = SSL_get_error(k->ssl, r);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
				return 0;
			snprintf(k->last_err, sizeof(k->last_err), "%s",
				 e == SSL_ERROR_ZERO_RETURN ? "the collector closed the connection"
				 : e == SSL_ERROR_SYSCALL && errno ? strerror(errno)
								   : "TLS read failed");
			ERR_clear_error();
			return -1;
		} else {
			ssize_t r = recv(k->fd, buf, sizeof(buf), MSG_DONTWAIT);

			if (r > 0 || (r < 0 && errno == EINTR))
				continue;
			if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 0;
			snprintf(k->last_err, sizeof(k->last_err), "%s",
				 r == 0 ? "the collector closed the connection" : strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int tcp_connect(struct sink *k)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL, *ai;
	int fd = -1, rc;

	/* (getaddrinfo may wait on a resolver: this thread's time only) */
	rc = getaddrinfo(k->target, k->port, &hints, &res);
	if (rc != 0) {
		snprintf(k->last_err, sizeof(k->last_err), "resolving %s: %s", k->target,
			 gai_strerror(rc));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		uint64_t until = pc_now_mono_ms() + CONNECT_MS;
		int e = 0;
		socklen_t el = sizeof(int);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			e = errno;
			while (e == EINPROGRESS && !stop_due(k) && pc_now_mono_ms() < until) {
				int soe = 0;

				if (!(fd_wait(k, fd, POLLOUT, until) &
				      (POLLOUT | POLLERR | POLLHUP)))
					continue; /* a wake-up, or the time ran out */
				e = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soe, &el) < 0 ? errno
											: soe;
			}
			if (e == EINPROGRESS)
				e = ETIMEDOUT;
		}
		if (e == 0)
			break;
		snprintf(k->last_err, sizeof(k->last_err), "connecting to %s:%s: %s", k->target,
			 k->port, strerror(e));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

static int tls_handshake(struct sink *k)
{
	struct in6_addr ip;
	bool is_ip =
	    inet_pton(AF_INET, k->target, &ip) == 1 || inet_pton(AF_INET6, k->target, &ip) == 1;
	uint64_t until = pc_now_mono_ms() + CONNECT_MS;
	int r = 0, e = SSL_ERROR_SSL;

	k->ssl = SSL_new(k->ctx);
	if (!k->ssl || SSL_set_fd(k->ssl, k->fd) != 1 ||
	    (!is_ip && SSL_set_tlsext_host_name(k->ssl, k->target) != 1) ||
	    (!is_ip && SSL_set1_host(k->ssl, k->target) != 1) ||
	    (is_ip && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(k->ssl), k->target) != 1))
		goto fail;
	while ((r = SSL_connect(k->ssl)) != 1) {
		e = SSL_get_error(k->ssl, r);
		if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) || stop_due(k) ||
		    pc_now_mono_ms() >= until)
			goto fail;
		fd_wait(k, k->fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, until);
	}
	return 0;
fail : {
	unsigned long err = ERR_get_error();
	long v = k->ssl ? SSL_get_verify_result(k->ssl) : X509_V_OK;

	snprintf(k->last_err, sizeof(k->last_err), "TLS with %s:%s: %s%s%s", k->target, k->port,
		 err ? ERR_reason_error_string(err)
		 : e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? "handshake timed out"
									 : "handshake failed",
		 v != X509_V_OK ? ": " : "",
		 v != X509_V_OK ? X509_verify_cert_error_string(v) : "");
	ERR_clear_error();
	sink_disconnect(k);
	return -1;
}
}

static int sink_connect(struct sink *k)
{
	if (k->kind == SINK_LOCAL) {
		struct sockaddr_un sun = {.sun_family = AF_UNIX};

		pc_strlcpy(sun.sun_path, k->target, sizeof(sun.sun_path));
		k->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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
	if (k->kind == SINK_TLS)
		return tls_handshake(k);
	return 0;
}

static void sink_advance(struct sink *k, size_t n)
{
	k->out_pos += n;
	while (k->msg_i < k->n_msgs && k->ends[k->msg_i] <= k->out_pos) {
		k->msg_i++;
		k->sent++;
	}
	k->progress_ms = pc_now_mono_ms();
}

/* Write what the collector takes now: 0 all of the batch, 1 it would
 * block (2: until the collector sends), -1 the connection failed. */
static int sink_send(struct sink *k)
{
	while (k->out_pos < k->out_len) {
		if (k->ssl) {
			int w = SSL_write(k->ssl, k->out + k->out_pos,
					  (int)(k->out_len - k->out_pos)),
			    e;

			if (w > 0) {
				sink_advance(k, (size_t)w);
				continue;
			}
			e = SSL_get_error(k->ssl, w);
			if (e == SSL_ERROR_WANT_WRITE)
				return 1;
			if (e == SSL_ERROR_WANT_READ) /* a key update, say */
				return 2;
			snprintf(k->last_err, sizeof(k->last_err), "TLS write failed");
			ERR_clear_error();
			return -1;
		} else {
			/* the local socket: one datagram per message */
			size_t n = k->kind == SINK_LOCAL ? k->ends[k->msg_i] - k->out_pos
							 : k->out_len - k->out_pos;
			ssize_t r =
			    send(k->fd, k->out + k->out_pos, n, MSG_DONTWAIT | MSG_NOSIGNAL);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 1;
			if (r < 0) {
				snprintf(k->last_err, sizeof(k->last_err), "sending: %s",
					 strerror(errno));
				return -1;
			}
			sink_advance(k, (size_t)r);
		}
	}
	return 0;
}

/* Frame one message into out (octet counting for TCP, RFC 6587 3.4.1). */
static void put_msg(struct sink *k, const void *msg, size_t len)
{
	if (k->kind != SINK_LOCAL)
		k->out_len += (size_t)snprintf((char *)k->out + k->out_len, 16, "%zu ", len);
	memcpy(k->out + k->out_len, msg, len);
	k->out_len += len;
	k->ends[k->n_msgs++] = k->out_len;
}

/* Take the next batch out of the spool (k->mu held): first a notice of
 * what the spool lost, if anything, then messages in order. */
static void take_batch(struct sink *k)
{
	struct logx_spool_loss loss;

	k->out_len = k->out_pos = 0;
	k->n_msgs = k->msg_i = 0;
	if (logx_spool_take_loss(k->sp, &loss)) {
		char note[600];
		int n = logx_format_overflow(&loss, pc_now_real_ms(), k->host, k->pid, note,
					     sizeof(note));

		k->dropped += loss.dropped;
		if (n > 0)
			put_msg(k, note, (size_t)n);
	}
	while (k->n_msgs < BATCH_MSGS && k->out_len < BATCH_BYTES &&
	       (k->kind != SINK_LOCAL || k->n_msgs == 0)) {
		int n = logx_spool_next_len(k->sp);
		uint64_t seq;
		size_t pre = k->kind != SINK_LOCAL ? (size_t)snprintf(NULL, 0, "%d ", n) : 0;

		if (n < 0 || k->out_len + pre + (size_t)n > sizeof(k->out))
			break;
		k->out_len += pre;
		if (pre)
			snprintf((char *)k->out + k->out_len - pre, pre + 1, "%d ", n);
		logx_spool_pop(k->sp, k->out + k->out_len, (size_t)n, &seq);
		k->out_len += (size_t)n;
		k->ends[k->n_msgs++] = k->out_len;
	}
}

static void sink_free(struct sink *k);

static unsigned next_backoff(unsigned ms)
{
	return ms < 16000 ? ms * 2 : 30000;
}

/* The connection failed: drop it, and try again after a pause that grows
 * while it keeps failing (a collector that resets every connection gets a
 * connection now and then, not a loop). */
static void sink_broken(struct sink *k, unsigned *backoff_ms, uint64_t *retry_at)
{
	pc_log(PC_LOG_WARN, "syslog export to %s: %s; reconnecting in %u ms", k->target,
	       k->last_err, *backoff_ms);
	sink_disconnect(k);
	*retry_at = pc_now_mono_ms() + *backoff_ms;
	*backoff_ms = next_backoff(*backoff_ms);
}

static void *sink_main(void *arg)
{
	struct sink *k = arg;
	unsigned backoff_ms = 250;
	uint64_t retry_at = 0;
	int rc;

	for (;;) {
		bool stopping = atomic_load(&k->stop);

		if (stopping && stop_due(k))
			break;
		if (k->msg_i == k->n_msgs) {
			pthread_mutex_lock(&k->mu);
			take_batch(k);
			k->idle = k->n_msgs == 0;
			pthread_mutex_unlock(&k->mu);
			if (!k->n_msgs) {
				if (stopping)
					break;
				/* wait for a push; meanwhile read what the
				 * collector sends (tickets, a close) */
				if (fd_wait(k, k->fd, POLLIN, 0) & (POLLIN | POLLHUP | POLLERR) &&
				    sink_input(k) < 0)
					sink_broken(k, &backoff_ms, &retry_at);
				continue;
			}
		}
		if (k->fd < 0) {
			/* (stopping: one last try now, then give up) */
			if (!stopping && pc_now_mono_ms() < retry_at) {
				fd_wait(k, -1, 0, retry_at);
				continue;
			}
			if (sink_connect(k) < 0) {
				if (!k->down)
					pc_log(PC_LOG_WARN,
					       "syslog export to %s unavailable, spooling (at most "
					       "%llu records): %s",
					       k->target, (unsigned long long)k->sp_max,
					       k->last_err);
				k->down = true;
				if (stopping)
					break; /* no collector to flush to */
				retry_at = pc_now_mono_ms() + backoff_ms;
				backoff_ms = next_backoff(backoff_ms);
				continue;
			}
			if (k->down)
				pc_log(PC_LOG_NOTICE, "syslog export to %s connected", k->target);
			k->down = false;
			/* a message the broken connection cut goes again whole */
			k->out_pos = k->msg_i ? k->ends[k->msg_i - 1] : 0;
			k->progress_ms = pc_now_mono_ms();
		}
		switch ((rc = sink_send(k))) {
		case -1:
			sink_broken(k, &backoff_ms, &retry_at);
			break;
		case 1:
		case 2:
			if (pc_now_mono_ms() - k->progress_ms >= STALL_MS) {
				snprintf(k->last_err, sizeof(k->last_err),
					 "the collector took nothing for %d s", STALL_MS / 1000);
				sink_broken(k, &backoff_ms, &retry_at);
				break;
			}
			if (fd_wait(k, k->fd, rc == 1 ? POLLIN | POLLOUT : POLLIN,
				    k->progress_ms + STALL_MS) &
				(POLLIN | POLLHUP | POLLERR) &&
			    sink_input(k) < 0)
				sink_broken(k, &backoff_ms, &retry_at);
			break;
		default:
			backoff_ms = 250; /* a whole batch went through */
			break;
		}
	}
	sink_disconnect(k);
	/* retired: nobody joins; the last of this thread and logx_retire frees */
	if (atomic_load(&k->detached) && atomic_fetch_sub(&k->refs, 1) == 1)
		sink_free(k);
	return NULL;
}

/* ---- lifecycle ---------------------------------------------------------- */

static void sink_free(struct sink *k)
{
	if (!k)
		return;
	sink_disconnect(k);
	SSL_CTX_free(k->ctx);
	logx_spool_free(k->sp);
	if (k->efd >= 0)
		close(k->efd);
	pthread_mutex_destroy(&k->mu);
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
	k->sp_max = c->spool_records ? c->spool_records : 1;
	k->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (k->efd < 0 ||
	    logx_spool_new(k->sp_max, bytes < (1ULL << 30) ? (size_t)bytes : (size_t)1 << 30,
			   LOGX_SPOOL_CPS, &k->sp) < 0) {
		sink_free(k);
		return pc_err_set(err, PC_ENOMEM, "syslog: out of memory");
	}
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
		/* non-blocking writes that may stop part way and resume */
		SSL_CTX_set_mode(k->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
					     SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
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
		pc_strlcpy(x->sinks[i]->host, x->host, sizeof(x->sinks[i]->host));
		x->sinks[i]->pid = x->pid;
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

static void sink_stop(struct sink *k, int flush_ms)
{
	atomic_store(&k->deadline_ms, pc_now_mono_ms() + (uint64_t)(flush_ms > 0 ? flush_ms : 0));
	atomic_store(&k->stop, true);
	wake(k);
}

void logx_stop(struct logx *x, int flush_ms, struct logx_stats *st)
{
	if (!x)
		return;
	if (st)
		memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < x->n; i++)
		sink_stop(x->sinks[i], flush_ms);
	for (size_t i = 0; i < x->n; i++) {
		struct sink *k = x->sinks[i];

		if (k->started)
			pthread_join(k->th, NULL);
		if (st) {
			struct logx_spool_loss loss;

			logx_spool_take_loss(k->sp, &loss);
			st->sent += k->sent;
			st->unsent += logx_spool_count(k->sp) + (k->n_msgs - k->msg_i);
			st->dropped += k->dropped + loss.dropped;
		}
		sink_free(k);
	}
	pc_buf_free(&x->stage);
	free(x);
}

void logx_retire(struct logx *x, int flush_ms)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->n; i++) {
		struct sink *k = x->sinks[i];

		if (!k->started) {
			sink_free(k);
			continue;
		}
		/* detached before stop: the thread sees it when it ends; and
		 * k lives until sink_stop's wake-up is done with it */
		atomic_store(&k->refs, 2);
		atomic_store(&k->detached, true);
		pthread_detach(k->th);
		sink_stop(k, flush_ms);
		if (atomic_fetch_sub(&k->refs, 1) == 1)
			sink_free(k);
	}
	pc_buf_free(&x->stage);
	free(x);
}
