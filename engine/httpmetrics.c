/* The optional HTTP /metrics listener (issue 18, point 10): the engine's
 * Prometheus text for a scraper, off by default, on 127.0.0.1 when
 * engine.metrics_port is set (engine.metrics_listen for another address).
 * Served from the control thread's loop, non-blocking: a slow or hostile
 * peer costs a bounded buffer and a deadline, never a queue thread's time.
 * The request parser reads peer bytes: fuzzed by tests/fuzz/fuzz_httpmetrics.c.
 * docs/operations.md, "Metrics". */
#include "engine/engine_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HTTPM_WAIT_MS 2000 /* a client's whole exchange */

static bool tchar(uint8_t c)
{
	return c > 0x20 && c < 0x7f;
}

int httpm_request_parse(const uint8_t *buf, size_t len, struct httpm_req *out)
{
	struct httpm_req r;
	size_t i = 0, n, end = 0;

	/* the head ends at the first CRLF CRLF; nothing past HTTPM_REQ_MAX */
	for (size_t k = 0; k + 3 < len && k + 4 <= HTTPM_REQ_MAX; k++)
		if (buf[k] == '\r' && buf[k + 1] == '\n' && buf[k + 2] == '\r' &&
		    buf[k + 3] == '\n') {
			end = k + 4;
			break;
		}
	if (!end)
		return len >= HTTPM_REQ_MAX ? PC_EPARSE : 0;
	memset(&r, 0, sizeof(r));
	/* method SP */
	for (n = 0; i < end && buf[i] >= 'A' && buf[i] <= 'Z'; i++, n++)
		if (n + 1 >= sizeof(r.method))
			return PC_EPARSE;
	if (n == 0 || buf[i] != ' ')
		return PC_EPARSE;
	memcpy(r.method, buf, n);
	i++;
	/* request-target SP: origin form only */
	if (buf[i] != '/')
		return PC_EPARSE;
	for (n = 0; i < end && tchar(buf[i]); i++, n++) {
		if (n + 1 >= sizeof(r.target))
			return PC_EPARSE;
		r.target[n] = (char)buf[i];
	}
	if (buf[i] != ' ')
		return PC_EPARSE;
	i++;
	if (end - i < 10 || memcmp(buf + i, "HTTP/1.", 7) != 0 ||
	    (buf[i + 7] != '0' && buf[i + 7] != '1') || buf[i + 8] != '\r' || buf[i + 9] != '\n')
		return PC_EPARSE;
	i += 10;
	/* header fields: name ":" value CRLF, no bare CR or LF, no NUL */
	while (i < end - 2) {
		size_t ls = i;
		bool colon = false;

		while (i < end - 2 && buf[i] != '\r') {
			if (buf[i] == '\n' || buf[i] == '\0')
				return PC_EPARSE;
			if (buf[i] == ':' && i > ls)
				colon = true;
			else if (!colon && !tchar(buf[i]))
				return PC_EPARSE;
			i++;
		}
		if (!colon || buf[i] != '\r' || buf[i + 1] != '\n')
			return PC_EPARSE;
		i += 2;
	}
	*out = r;
	return (int)end;
}

/* ---- the listener ------------------------------------------------------ */

int httpm_open(struct engine *e, struct pc_err *err)
{
	struct httpm *h = &e->httpm;
	struct pc_endpoint ep;
	struct sockaddr_storage ss;
	socklen_t sl;
	char spec[80];
	int fd, one = 1;

	for (size_t i = 0; i < HTTPM_CLIENTS; i++)
		h->c[i].fd = -1;
	h->fd = -1;
	if (e->cfg.engine.metrics_listen[0])
		pc_strlcpy(spec, e->cfg.engine.metrics_listen, sizeof(spec));
	else if (e->cfg.engine.metrics_port)
		snprintf(spec, sizeof(spec), "127.0.0.1:%u", e->cfg.engine.metrics_port);
	else
		return 0; /* off (the default) */
	if (pc_endpoint_parse(spec, 0, &ep) < 0 || ep.port == 0)
		return pc_err_set(err, PC_EINVAL,
				  "%s: engine.metrics_listen: '%s' is not an IP address and port "
				  "(names are not resolved)",
				  e->cfg.path, spec);
	memset(&ss, 0, sizeof(ss));
	if (ep.addr.family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(ep.port);
		memcpy(&s4->sin_addr, ep.addr.a, 4);
		sl = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(ep.port);
		memcpy(&s6->sin6_addr, ep.addr.a, 16);
		sl = sizeof(*s6);
	}
	fd = socket(ep.addr.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "metrics listener: socket");
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ep.addr.family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 16) < 0) {
		int rc = pc_err_errno(err, PC_EIO, "metrics listener on %s", spec);

		close(fd);
		return rc;
	}
	h->fd = fd;
	pc_strlcpy(h->where, spec, sizeof(h->where));
	pc_log(PC_LOG_NOTICE, "metrics: HTTP /metrics on %s", spec);
	return 0;
}

static void client_close(struct httpm_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

void httpm_close(struct engine *e)
{
	for (size_t i = 0; i < HTTPM_CLIENTS; i++)
		client_close(&e->httpm.c[i]);
	if (e->httpm.fd >= 0)
		close(e->httpm.fd);
	e->httpm.fd = -1;
}

size_t httpm_pollfds(struct engine *e, struct pollfd *p)
{
	struct httpm *h = &e->httpm;

	p[0].fd = h->fd; /* -1 when off: poll ignores it */
	p[0].events = POLLIN;
	for (size_t i = 0; i < HTTPM_CLIENTS; i++) {
		p[1 + i].fd = h->c[i].fd;
		p[1 + i].events = h->c[i].out ? POLLOUT : POLLIN;
	}
	return HTTPM_POLLFDS;
}

static void respond(struct engine *e, struct httpm_client *c, int status, const char *why,
		    bool head_only)
{
	char *body = NULL, hdr[256];
	size_t blen;
	int hl;

	if (status == 200 && engine_metrics_text(e, &body) < 0) {
		status = 500;
		why = "Internal Server Error";
	}
	if (!body) {
		char *b = malloc(64);

		if (b)
			snprintf(b, 64, "%d %s\n", status, why);
		body = b;
	}
	blen = body ? strlen(body) : 0;
	hl = snprintf(hdr, sizeof(hdr),
		      "HTTP/1.1 %d %s\r\nContent-Type: text/plain; version=0.0.4; "
		      "charset=utf-8\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		      status, why, blen);
	c->out = malloc((size_t)hl + (head_only ? 0 : blen) + 1);
	if (!c->out) {
		free(body);
		client_close(c);
		return;
	}
	memcpy(c->out, hdr, (size_t)hl);
	if (!head_only && blen)
		memcpy(c->out + hl, body, blen);
	c->out_len = (size_t)hl + (head_only ? 0 : blen);
	c->out_off = 0;
	free(body);
}

static void client_read(struct engine *e, struct httpm_client *c)
{
	struct httpm_req r;
	ssize_t n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);
	int rc;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		client_close(c);
		return;
	}
	c->in_len += (size_t)n;
	rc = httpm_request_parse(c->in, c->in_len, &r);
	if (rc == 0)
		return; /* more to come (within the deadline) */
	e->httpm.requests++;
	if (rc < 0)
		respond(e, c, 400, "Bad Request", false);
	else if (strcmp(r.target, "/metrics") != 0 && strncmp(r.target, "/metrics?", 9) != 0)
		respond(e, c, 404, "Not Found", false);
	else if (strcmp(r.method, "GET") != 0 && strcmp(r.method, "HEAD") != 0)
		respond(e, c, 405, "Method Not Allowed", false);
	else
		respond(e, c, 200, "OK", strcmp(r.method, "HEAD") == 0);
}

static void client_write(struct httpm_client *c)
{
	ssize_t n =
	    send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		client_close(c);
		return;
	}
	c->out_off += (size_t)n;
	if (c->out_off == c->out_len) {
		shutdown(c->fd, SHUT_WR);
		client_close(c);
	}
}

void httpm_handle(struct engine *e, const struct pollfd *p, uint64_t now)
{
	struct httpm *h = &e->httpm;

	if (h->fd < 0)
		return;
	for (size_t i = 0; i < HTTPM_CLIENTS; i++) {
		struct httpm_client *c = &h->c[i];

		if (c->fd < 0)
			continue;
		if (p[1 + i].fd == c->fd && (p[1 + i].revents & (POLLERR | POLLHUP | POLLNVAL)) &&
		    !(p[1 + i].revents & (POLLIN | POLLOUT))) {
			client_close(c);
			continue;
		}
		if (p[1 + i].fd == c->fd && (p[1 + i].revents & POLLOUT) && c->out)
			client_write(c);
		else if (p[1 + i].fd == c->fd && (p[1 + i].revents & POLLIN) && !c->out)
			client_read(e, c);
		if (c->fd >= 0 && now >= c->deadline)
			client_close(c); /* too slow: its bytes and our answer are dropped */
	}
	if (p[0].revents & POLLIN) {
		int fd;

		while ((fd = accept4(h->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
			size_t i = 0;

			while (i < HTTPM_CLIENTS && h->c[i].fd >= 0)
				i++;
			if (i == HTTPM_CLIENTS) {
				close(fd); /* busy: the scraper retries */
				continue;
			}
			h->c[i].fd = fd;
			h->c[i].deadline = now + HTTPM_WAIT_MS;
		}
	}
}

bool httpm_waiting(const struct engine *e)
{
	for (size_t i = 0; i < HTTPM_CLIENTS; i++)
		if (e->httpm.c[i].fd >= 0)
			return true;
	return false;
}
