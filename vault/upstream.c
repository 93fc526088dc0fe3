/* TLS toward the real destination: TLS 1.2+, the certificate verified against
 * vault.trust and the bound host name. No verification, no connection — and
 * nothing is sent before it succeeded. */
#include "vault/vault_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
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

int upstream_connect_tracked(SSL_CTX *ctx, const struct pc_endpoint *dst, const char *host,
			     int timeout_ms, void (*track)(void *arg, int fd), void *arg, int *fdp,
			     SSL **sslp, struct pc_err *err)
{
	uint64_t deadline = pc_now_mono_ms() + (uint64_t)timeout_ms;
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
