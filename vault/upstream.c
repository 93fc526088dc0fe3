/* TLS toward the real destination: TLS 1.2+, the certificate verified against
 * vault.trust and the bound host name. No verification, no connection — and
 * nothing is sent before it succeeded.
 *
 * A connection resumes a session an earlier one of the same sandbox, host
 * and address established (docs/vault.md, "Upstream sessions"): the
 * certificate was verified then, for the same name against the same trust
 * store, and the upstream proves it is the server that issued the ticket.
 * That spares the parse and verification of its chain, about a quarter of
 * a worker's CPU per new connection. */
#include "vault/vault_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- sessions to resume ------------------------------------------------------
 * Per process (a worker's loop, or the daemon's threads: hence the lock),
 * keyed by sandbox, host name and address: one sandbox's session is never
 * offered on another's behalf (a ticket links the connections that use
 * it), nor for another name or server. One session per key, the newest,
 * offered again until a newer one replaces it, a handshake that offered it
 * fails, or UPS_MAX_AGE_MS pass: upstreams such as nginx send no new
 * ticket on a resumed connection, so a ticket used once would make every
 * other handshake a full one. Reuse links nothing the upstream cannot
 * link already: every connection comes from the gateway's address. */
#define UPS_SLOTS      64
#define UPS_MAX_AGE_MS (300 * 1000)
#define UPS_KEY_MAX    (POLICY_NAME_MAX + 256 + 64)

static struct {
	SSL_SESSION *sess; /* NULL: a free slot */
	uint64_t added_ms;
	char key[UPS_KEY_MAX];
} ups[UPS_SLOTS];
static pthread_mutex_t ups_lock = PTHREAD_MUTEX_INITIALIZER;
static int ups_key_idx = -1;
static pthread_once_t ups_once = PTHREAD_ONCE_INIT;

static void ups_key_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
			 void *argp)
{
	(void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
	free(ptr);
}

static void ups_init(void)
{
	ups_key_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, ups_key_free);
}

static void ups_slot_clear(size_t i)
{
	SSL_SESSION_free(ups[i].sess);
	ups[i].sess = NULL;
	ups[i].key[0] = '\0';
}

/* The slot of key, or UPS_SLOTS. Under the lock. */
static size_t ups_find(const char *key)
{
	for (size_t i = 0; i < UPS_SLOTS; i++)
		if (ups[i].sess && strcmp(ups[i].key, key) == 0)
			return i;
	return UPS_SLOTS;
}

/* The session of key (a reference of the caller's), or NULL. */
static SSL_SESSION *ups_get(const char *key)
{
	SSL_SESSION *found = NULL;
	size_t i;

	pthread_mutex_lock(&ups_lock);
	if ((i = ups_find(key)) < UPS_SLOTS) {
		if (pc_now_mono_ms() - ups[i].added_ms < UPS_MAX_AGE_MS &&
		    SSL_SESSION_is_resumable(ups[i].sess) && SSL_SESSION_up_ref(ups[i].sess))
			found = ups[i].sess;
		else
			ups_slot_clear(i);
	}
	pthread_mutex_unlock(&ups_lock);
	return found;
}

static void ups_drop(const char *key)
{
	size_t i;

	pthread_mutex_lock(&ups_lock);
	if ((i = ups_find(key)) < UPS_SLOTS)
		ups_slot_clear(i);
	pthread_mutex_unlock(&ups_lock);
}

/* OpenSSL's new-session callback: a verified handshake's session (TLS 1.3:
 * each ticket, as it arrives after the handshake). 1: the cache keeps the
 * reference. */
static int ups_new(SSL *ssl, SSL_SESSION *sess)
{
	const char *key = ups_key_idx >= 0 ? SSL_get_ex_data(ssl, ups_key_idx) : NULL;
	size_t pick;

	if (!key || SSL_get_verify_result(ssl) != X509_V_OK || !SSL_SESSION_is_resumable(sess))
		return 0;
	pthread_mutex_lock(&ups_lock);
	/* the key's own slot; else a free one; else the oldest */
	if ((pick = ups_find(key)) == UPS_SLOTS) {
		for (size_t i = 0; i < UPS_SLOTS; i++)
			if (!ups[i].sess) {
				pick = i;
				break;
			}
	}
	if (pick == UPS_SLOTS) {
		pick = 0;
		for (size_t i = 1; i < UPS_SLOTS; i++)
			if (ups[i].added_ms < ups[pick].added_ms)
				pick = i;
	}
	if (ups[pick].sess)
		ups_slot_clear(pick);
	ups[pick].sess = sess;
	ups[pick].added_ms = pc_now_mono_ms();
	pc_strlcpy(ups[pick].key, key, sizeof(ups[pick].key));
	pthread_mutex_unlock(&ups_lock);
	return 1;
}

int upstream_ctx_new(const char *trust, SSL_CTX **out, struct pc_err *err)
{
	static const unsigned char alpn[] = "\x08http/1.1";
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	int ok;

	if (!ctx)
		return pc_err_set(err, PC_ENOMEM, "SSL_CTX_new failed");
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	ok = trust && *trust ? SSL_CTX_load_verify_locations(ctx, trust, NULL)
			     : SSL_CTX_set_default_verify_paths(ctx);
	if (!ok) {
		SSL_CTX_free(ctx);
		ERR_clear_error();
		return pc_err_set(err, PC_EINVAL, "cannot load the upstream trust store %s",
				  trust && *trust ? trust : "(system default)");
	}
	SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1);
	/* sessions go to ups_new, and are offered by upstream_connect_tracked */
	pthread_once(&ups_once, ups_init);
	SSL_CTX_set_session_cache_mode(ctx,
				       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(ctx, ups_new);
	SSL_CTX_set_read_ahead(ctx, 1); /* as the server side (conn.c) */
	*out = ctx;
	return 0;
}

/* Close fd, telling the tracker first. */
static void tracked_close(void (*track)(void *, int), void *arg, int fd)
{
	track(arg, -1);
	close(fd);
}

static int tcp_connect(const struct pc_endpoint *dst, uint64_t deadline, void (*track)(void *, int),
		       void *arg, struct pc_err *err)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, one = 1, soerr = 0;
	socklen_t el = sizeof(soerr);

	memset(&ss, 0, sizeof(ss));
	if (dst->addr.family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(dst->port);
		memcpy(&s4->sin_addr, dst->addr.a, 4);
		sl = sizeof(*s4);
	} else if (dst->addr.family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(dst->port);
		memcpy(&s6->sin6_addr, dst->addr.a, 16);
		sl = sizeof(*s6);
	} else {
		return pc_err_set(err, PC_EINVAL, "no original destination");
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "socket");
	track(arg, fd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
		pc_err_errno(err, PC_EIO, "connecting upstream");
		tracked_close(track, arg, fd);
		return PC_EIO;
	}
	for (;;) {
		uint64_t now = pc_now_mono_ms();
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int r;

		if (vloop_in_co() && now < deadline) {
			/* the loop serves the worker's other connections
			 * meanwhile */
			if ((r = vloop_wait(fd, POLLOUT, deadline)) == 0)
				break;
			if (r != PC_ETIMEOUT) {
				pc_err_set(err, PC_EIO, "connecting upstream: waiting failed");
				tracked_close(track, arg, fd);
				return PC_EIO;
			}
			continue;
		}
		if (now >= deadline) {
			tracked_close(track, arg, fd);
			return pc_err_set(err, PC_ETIMEOUT, "connecting upstream: timed out");
		}
		r = poll(&p, 1, (int)(deadline - now));
		if (r > 0)
			break;
		if (r < 0 && errno != EINTR) {
			pc_err_errno(err, PC_EIO, "poll");
			tracked_close(track, arg, fd);
			return PC_EIO;
		}
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) < 0 || soerr) {
		errno = soerr ? soerr : errno;
		pc_err_errno(err, PC_EIO, "connecting upstream");
		tracked_close(track, arg, fd);
		return PC_EIO;
	}
	return fd;
}

int upstream_connect_tracked(SSL_CTX *ctx, const char *scope, const struct pc_endpoint *dst,
			     const char *host, int timeout_ms, void (*track)(void *arg, int fd),
			     void *arg, int *fdp, SSL **sslp, struct pc_err *err)
{
	uint64_t deadline = pc_now_mono_ms() + (uint64_t)timeout_ms;
	char ep[PC_ADDRSTRLEN + 8], *key = NULL; /* [addr]:port */
	SSL_SESSION *sess = NULL;
	SSL *ssl = NULL;
	int fd, rc;

	fd = tcp_connect(dst, deadline, track, arg, err);
	if (fd < 0)
		return fd;
	ssl = SSL_new(ctx);
	if (!ssl || !SSL_set_fd(ssl, fd) || !SSL_set_tlsext_host_name(ssl, host) ||
	    !SSL_set1_host(ssl, host)) {
		rc = pc_err_set(err, PC_ENOMEM, "upstream TLS setup failed");
		goto fail;
	}
	/* the key names everything the session's verification stood for */
	pc_endpoint_str(dst, ep, sizeof(ep));
	if (scope && ups_key_idx >= 0 && (key = malloc(UPS_KEY_MAX))) {
		if ((size_t)snprintf(key, UPS_KEY_MAX, "%s\n%s\n%s", scope, host, ep) >=
			UPS_KEY_MAX ||
		    !SSL_set_ex_data(ssl, ups_key_idx, key)) {
			free(key);
			key = NULL;
		}
	}
	/* offered, not trusted: a server that does not take it gets a full
	 * handshake, verified as any */
	if (key && (sess = ups_get(key))) {
		SSL_set_session(ssl, sess);
		SSL_SESSION_free(sess);
	}
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	rc = io_handshake(ssl, fd, false, deadline);
	if (rc < 0) {
		long v = SSL_get_verify_result(ssl);
		unsigned long e = ERR_peek_last_error();
		char buf[160];

		if (v != X509_V_OK)
			rc = pc_err_set(err, PC_EREFUSED,
					"upstream certificate for %s not trusted: %s", host,
					X509_verify_cert_error_string(v));
		else if (rc == PC_ETIMEOUT)
			rc = pc_err_set(err, PC_ETIMEOUT, "upstream TLS handshake timed out");
		else {
			ERR_error_string_n(e, buf, sizeof(buf));
			rc = pc_err_set(err, PC_EIO, "upstream TLS handshake failed: %s",
					e ? buf : "connection closed");
		}
		ERR_clear_error();
		/* whatever went wrong, the next handshake starts afresh */
		if (key)
			ups_drop(key);
		goto fail;
	}
	*fdp = fd;
	*sslp = ssl;
	return 0;
fail:
	SSL_free(ssl);
	tracked_close(track, arg, fd);
	return rc;
}
