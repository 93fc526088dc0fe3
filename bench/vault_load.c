/* bench/vault's load generator: HTTPS GET requests from a sandbox for a
 * fixed time, over kept-alive connections or one new TLS connection per
 * request, with per-request latency. Prints one line of results.
 *   vault_load --connect HOST:PORT --sni NAME --cafile F [-H "Name: value"]...
 *              [--path /] [--newconn] [-c CONCURRENCY] [-t SECONDS] */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "vault/vault_int.h"

static struct {
	const char *host, *port, *sni, *cafile, *path;
	char headers[4096];
	bool newconn;
	int conc;
	double secs;
} opt = {.port = "443", .path = "/", .conc = 8, .secs = 5};

static SSL_CTX *ctx;
static struct addrinfo *ai;

struct worker {
	pthread_t thr;
	uint64_t done, errors;
	double *lat; /* ms */
	size_t nlat, cap;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static SSL *conn_open(int *fdp)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct timeval tv = {.tv_sec = 10};
	SSL *ssl;

	if (fd < 0)
		return NULL;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		close(fd);
		return NULL;
	}
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, opt.sni);
	SSL_set1_host(ssl, opt.sni);
	if (SSL_connect(ssl) != 1) {
		ERR_clear_error();
		SSL_free(ssl);
		close(fd);
		return NULL;
	}
	*fdp = fd;
	return ssl;
}

/* One request/response on ssl; 0 when a whole 200 response was read. */
static int exchange(SSL *ssl, const char *req, size_t rl, bool *keep)
{
	char buf[65536];
	size_t len = 0;
	struct http_response r;
	int n;

	if (SSL_write(ssl, req, (int)rl) != (int)rl)
		return -1;
	for (;;) {
		n = SSL_read(ssl, buf + len, (int)(sizeof(buf) - len));
		if (n <= 0)
			return -1;
		len += (size_t)n;
		n = http_response_parse(buf, len, sizeof(buf), false, &r, NULL);
		if (n > 0)
			break;
		if (n != PC_EAGAIN || len == sizeof(buf))
			return -1;
	}
	*keep = r.keep_alive;
	if (r.body == HTTP_BODY_LENGTH) {
		uint64_t have = len - r.head_len;

		while (have < r.content_length) {
			n = SSL_read(ssl, buf, sizeof(buf));
			if (n <= 0)
				return -1;
			have += (uint64_t)n;
		}
	} else if (r.body == HTTP_BODY_CHUNKED) {
		struct http_chunked c;
		size_t off = r.head_len;
		int rc = 0;

		http_chunked_init(&c);
		for (;;) {
			while (off < len) {
				size_t cons, doff, dl;

				rc = http_chunked_feed(&c, buf + off, len - off, &cons, &doff, &dl,
						       NULL);
				if (rc < 0)
					return -1;
				off += cons;
				if (rc == 1)
					break;
			}
			if (rc == 1)
				break;
			n = SSL_read(ssl, buf, sizeof(buf));
			if (n <= 0)
				return -1;
			len = (size_t)n;
			off = 0;
		}
	} else if (r.body == HTTP_BODY_CLOSE) {
		while (SSL_read(ssl, buf, sizeof(buf)) > 0)
			;
		*keep = false;
	}
	return r.status == 200 ? 0 : -1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char req[8192];
	int rl = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", opt.path,
			  opt.sni, opt.headers);
	double end = now_ms() + opt.secs * 1000;
	SSL *ssl = NULL;
	int fd = -1;

	while (now_ms() < end) {
		double t0 = now_ms();
		bool keep = false;

		if (!ssl && !(ssl = conn_open(&fd))) {
			w->errors++;
			continue;
		}
		if (exchange(ssl, req, (size_t)rl, &keep) < 0) {
			w->errors++;
			keep = false;
		} else {
			if (w->nlat == w->cap) {
				w->cap = w->cap ? w->cap * 2 : 4096;
				w->lat = realloc(w->lat, w->cap * sizeof(double));
			}
			w->lat[w->nlat++] = now_ms() - t0;
			w->done++;
		}
		if (!keep || opt.newconn) {
			SSL_shutdown(ssl);
			SSL_free(ssl);
			close(fd);
			ssl = NULL;
		}
	}
	if (ssl) {
		SSL_free(ssl);
		close(fd);
	}
	return NULL;
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"connect", required_argument, NULL, 'C'}, {"sni", required_argument, NULL, 's'},
	    {"cafile", required_argument, NULL, 'a'},  {"path", required_argument, NULL, 'p'},
	    {"newconn", no_argument, NULL, 'N'},       {NULL, 0, NULL, 0}};
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	struct worker *ws;
	uint64_t done = 0, errors = 0;
	double *all = NULL;
	size_t nall = 0;
	int o;

	while ((o = getopt_long(argc, argv, "H:c:t:", lo, NULL)) != -1) {
		switch (o) {
		case 'C': {
			char *c = strrchr(optarg, ':');

			if (!c)
				return 2;
			*c = '\0';
			opt.host = optarg;
			opt.port = c + 1;
			break;
		}
		case 's':
			opt.sni = optarg;
			break;
		case 'a':
			opt.cafile = optarg;
			break;
		case 'p':
			opt.path = optarg;
			break;
		case 'N':
			opt.newconn = true;
			break;
		case 'H':
			strncat(opt.headers, optarg, sizeof(opt.headers) - strlen(opt.headers) - 3);
			strcat(opt.headers, "\r\n");
			break;
		case 'c':
			opt.conc = atoi(optarg);
			break;
		case 't':
			opt.secs = atof(optarg);
			break;
		default:
			return 2;
		}
	}
	if (!opt.host || !opt.sni || !opt.cafile || opt.conc < 1) {
		fprintf(stderr,
			"usage: vault_load --connect HOST:PORT --sni NAME --cafile F [-H H]... "
			"[--path P] [--newconn] [-c N] [-t SECONDS]\n");
		return 2;
	}
	if (getaddrinfo(opt.host, opt.port, &hints, &ai) != 0)
		return 3;
	ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF); /* full handshakes */
	if (!SSL_CTX_load_verify_locations(ctx, opt.cafile, NULL))
		return 3;
	ws = calloc((size_t)opt.conc, sizeof(*ws));
	for (int i = 0; i < opt.conc; i++)
		pthread_create(&ws[i].thr, NULL, worker_main, &ws[i]);
	for (int i = 0; i < opt.conc; i++) {
		pthread_join(ws[i].thr, NULL);
		done += ws[i].done;
		errors += ws[i].errors;
		all = realloc(all, (nall + ws[i].nlat + 1) * sizeof(double));
		memcpy(all + nall, ws[i].lat, ws[i].nlat * sizeof(double));
		nall += ws[i].nlat;
		free(ws[i].lat);
	}
	qsort(all, nall, sizeof(double), dcmp);
	printf("requests=%llu errors=%llu rps=%.1f p50_ms=%.2f p99_ms=%.2f\n",
	       (unsigned long long)done, (unsigned long long)errors, done / opt.secs,
	       nall ? all[nall / 2] : 0.0, nall ? all[(size_t)(nall * 0.99)] : 0.0);
	free(all);
	free(ws);
	return errors && !done ? 1 : 0;
}
