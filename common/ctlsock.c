/* Control sockets served on a thread of their own: one request word in,
 * one reply out, then the connection is closed (the vault's and logd's
 * `metrics`; the engine serves its socket from its control loop). */
#include "common/pc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CTL_REQ_MAX 256
#define CTL_WAIT_MS 1000 /* for the request, once connected */

struct pc_ctl {
	int fd;
	bool root_only;
	pc_ctl_fn fn;
	void *ctx;
	pthread_t thr;
	int stop[2]; /* a pipe: pc_ctl_stop writes, the thread wakes and ends */
};

/* One request word without waiting: NUL-terminated, trailing CR/LF removed.
 * Its length, 0 at EOF, -1 on error. */
static ssize_t ctl_read(int fd, char *req, size_t size)
{
	ssize_t n = recv(fd, req, size - 1, MSG_DONTWAIT);

	if (n <= 0)
		return n;
	req[n] = '\0';
	while (n > 0 && (req[n - 1] == '\n' || req[n - 1] == '\r'))
		req[--n] = '\0';
	return n;
}

static void ctl_client(struct pc_ctl *c, int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char req[CTL_REQ_MAX], *reply = NULL;
	uid_t uid = (uid_t)-1;
	ssize_t n;

	if (c->root_only && (pc_unix_peercred(fd, NULL, &uid, NULL, NULL) < 0 || uid != 0))
		return; /* the socket file is root's already: belt and braces */
	if (poll(&p, 1, CTL_WAIT_MS) != 1)
		return;
	n = ctl_read(fd, req, sizeof(req));
	if (n <= 0)
		return;
	reply = c->fn(c->ctx, req);
	if (reply)
		send(fd, reply, strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
	free(reply);
}

static void *ctl_main(void *arg)
{
	struct pc_ctl *c = arg;

	for (;;) {
		struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN},
				      {.fd = c->stop[0], .events = POLLIN}};
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		/* one client at a time: each waits at most CTL_WAIT_MS */
		ctl_client(c, fd);
		close(fd);
	}
	return NULL;
}

int pc_ctl_start(int fd, bool root_only, pc_ctl_fn fn, void *ctx, struct pc_ctl **out,
		 struct pc_err *err)
{
	struct pc_ctl *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		close(fd);
		return pc_err_set(err, PC_ENOMEM, "control socket: out of memory");
	}
	c->fd = fd;
	c->root_only = root_only;
	c->fn = fn;
	c->ctx = ctx;
	if (pipe2(c->stop, O_CLOEXEC) < 0) {
		rc = pc_err_errno(err, PC_EIO, "control socket: pipe");
		close(fd);
		free(c);
		return rc;
	}
	rc = pthread_create(&c->thr, NULL, ctl_main, c);
	if (rc) {
		errno = rc;
		rc = pc_err_errno(err, PC_EIO, "control socket: thread");
		close(c->stop[0]);
		close(c->stop[1]);
		close(fd);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void pc_ctl_stop(struct pc_ctl *c)
{
	if (!c)
		return;
	if (write(c->stop[1], "x", 1) == 1)
		pthread_join(c->thr, NULL);
	close(c->stop[0]);
	close(c->stop[1]);
	close(c->fd);
	free(c);
}

int pc_ctl_request(const char *path, const char *req, int timeout_ms, size_t max, char **reply,
		   struct pc_err *err)
{
	struct pollfd p;
	char *buf;
	ssize_t n;
	int fd;

	fd = pc_unix_connect(path, 0, err);
	if (fd < 0)
		return fd;
	if (send(fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
		close(fd);
		return pc_err_errno(err, PC_EIO, "sending to the engine");
	}
	p.fd = fd;
	p.events = POLLIN;
	n = poll(&p, 1, timeout_ms);
	if (n <= 0) {
		close(fd);
		return n == 0 ? pc_err_set(err, PC_ETIMEOUT, "the engine did not answer in %d ms",
					   timeout_ms)
			      : pc_err_errno(err, PC_EIO, "waiting for the engine");
	}
	buf = malloc(max + 1);
	if (!buf) {
		close(fd);
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	}
	n = recv(fd, buf, max, 0);
	close(fd);
	if (n <= 0) {
		free(buf);
		return n == 0 ? pc_err_set(err, PC_EIO, "the engine closed the connection")
			      : pc_err_errno(err, PC_EIO, "reading the engine's reply");
	}
	buf[n] = '\0';
	*reply = buf;
	return 0;
}
