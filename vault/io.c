/* TLS I/O on non-blocking sockets with a deadline: every wait of a
 * connection is bounded, so a slow or silent peer costs its own connection
 * a timeout and nothing else. In a worker's event loop a wait (OpenSSL's
 * SSL_ERROR_WANT_READ or WANT_WRITE) hands the thread to the loop's other
 * connections until the socket is ready (vloop.c); elsewhere it polls. */
#include "vault/vault_int.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>

static int io_wait(int fd, short ev, uint64_t deadline)
{
	if (vloop_in_co())
		return vloop_wait(fd, ev, deadline);
	for (;;) {
		uint64_t now = pc_now_mono_ms();
		struct pollfd p = {.fd = fd, .events = ev};
		int r;

		if (now >= deadline)
			return PC_ETIMEOUT;
		r = poll(&p, 1, (int)(deadline - now > 60000 ? 60000 : deadline - now));
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return PC_EIO;
	}
}

/* One SSL operation's outcome: >0 done, 0 retry (waited), <0 failed. */
static int io_step(SSL *ssl, int fd, int ret, uint64_t deadline)
{
	int e = SSL_get_error(ssl, ret), rc;

	switch (e) {
	case SSL_ERROR_WANT_READ:
		rc = io_wait(fd, POLLIN, deadline);
		return rc < 0 ? rc : 0;
	case SSL_ERROR_WANT_WRITE:
		rc = io_wait(fd, POLLOUT, deadline);
		return rc < 0 ? rc : 0;
	case SSL_ERROR_ZERO_RETURN:
		return 1; /* clean close: reported by the caller as EOF */
	default:
		ERR_clear_error();
		return PC_EIO;
	}
}

int io_read(SSL *ssl, int fd, void *buf, size_t len, uint64_t deadline)
{
	for (;;) {
		size_t n = 0;
		int ret = SSL_read_ex(ssl, buf, len, &n), rc;

		if (ret == 1) {
			vloop_tick();
			return (int)n;
		}
		rc = io_step(ssl, fd, ret, deadline);
		if (rc == 1)
			return 0;
		if (rc < 0)
			return rc;
	}
}

int io_read_wait(SSL *ssl, int fd, void *buf, size_t len, uint64_t deadline)
{
	/* the peer has to answer first: poll, then read, saving the read that
	 * would only say EAGAIN */
	if (!SSL_pending(ssl) && !SSL_has_pending(ssl)) {
		int rc = io_wait(fd, POLLIN, deadline);

		if (rc < 0)
			return rc;
	}
	return io_read(ssl, fd, buf, len, deadline);
}

int io_write(SSL *ssl, int fd, const void *buf, size_t len, uint64_t deadline)
{
	const uint8_t *p = buf;

	while (len) {
		size_t n = 0;
		int ret = SSL_write_ex(ssl, p, len, &n), rc;

		if (ret == 1) {
			p += n;
			len -= n;
			vloop_tick();
			continue;
		}
		rc = io_step(ssl, fd, ret, deadline);
		if (rc != 0)
			return rc < 0 ? rc : PC_EIO;
	}
	return 0;
}

int io_handshake(SSL *ssl, int fd, bool server, uint64_t deadline)
{
	for (;;) {
		int ret = server ? SSL_accept(ssl) : SSL_connect(ssl), rc;

		if (ret == 1)
			return 0;
		if (SSL_get_error(ssl, ret) != SSL_ERROR_WANT_READ &&
		    SSL_get_error(ssl, ret) != SSL_ERROR_WANT_WRITE)
			return PC_EIO; /* the caller reads the error queue */
		rc = io_step(ssl, fd, ret, deadline);
		if (rc != 0)
			return rc < 0 ? rc : PC_EIO;
	}
}
