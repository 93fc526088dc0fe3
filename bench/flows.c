/* Load generator for bench/flows: new TCP connections as fast as they go,
 * with a bounded number in flight, timing each handshake (connect() to
 * established: the SYN's trip through the gateway, and the engine's verdict
 * when it is there).
 *   flows serve ADDR PORT                   accept and close, until killed
 *   flows serve-hello ADDR PORT             accept, read one TLS record (the
 *                                           ClientHello), answer with a
 *                                           ServerHello record, until killed
 *   flows conn ADDR PORT SECONDS INFLIGHT [HELLO_FILE]
 *                                           print: conns N fails F secs S
 *                                           rate R p50_us A p99_us B
 * With HELLO_FILE (a ClientHello, bytes as a TLS client sent them), each
 * connection sends it once established and waits for the server's first
 * bytes before it resets: a flow held for its ClientHello (a host entry) is
 * then judged and promoted as a real TLS client's is, instead of being
 * reset before anything was judged (which only fills the held table). The
 * time measured is then connect() to the server's answer. */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int addr_fill(const char *a, const char *p, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, a, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)atoi(p));
		*len = sizeof(*s4);
		return 0;
	}
	if (inet_pton(AF_INET6, a, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)atoi(p));
		*len = sizeof(*s6);
		return 0;
	}
	return -1;
}

/* Accept, then wait for the client's RST/FIN before closing: the server
 * never closes first, so no server-side FIN_WAIT entry blocks a client port
 * the kernel hands out again a moment later. */
/* What serve-hello answers: a TLS 1.2-framed handshake record holding a
 * ServerHello (TLS 1.3 suite, no extensions) whose random is not RFC 8446's
 * HelloRetryRequest value: the engine promotes a held flow on it (H13a). */
static const uint8_t server_hello[] = {0x16, 0x03, 0x03, 0x00, 0x2c, 0x02, 0x00, 0x00, 0x28, 0x03,
				       0x03, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
				       0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
				       0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
				       0x11, 0x11, 0x11, 0x00, 0x13, 0x01, 0x00, 0x00, 0x00};

/* Per connection of serve-hello: bytes of the first record read so far. */
struct hconn {
	int fd;
	size_t got, need;
	bool answered;
	uint8_t hdr[5];
};

static int serve(const struct sockaddr_storage *ss, socklen_t len, bool hello)
{
	int one = 1, l = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN}, evs[256];

	if (l < 0 || ep < 0)
		return 1;
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (const struct sockaddr *)ss, len) < 0 || listen(l, 4096) < 0) {
		perror("flows serve");
		return 1;
	}
	ev.data.ptr = NULL; /* the listener; connections carry their hconn */
	epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
	for (;;) {
		int k = epoll_wait(ep, evs, 256, -1);

		for (int i = 0; i < k; i++) {
			if (evs[i].data.ptr == NULL) {
				int c;

				while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >=
				       0) {
					struct hconn *h = calloc(1, sizeof(*h));
					struct epoll_event ce = {.events = EPOLLIN | EPOLLRDHUP,
								 .data.ptr = h};

					if (!h || epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce) < 0) {
						close(c);
						free(h);
						continue;
					}
					h->fd = c;
					h->need = 5;
				}
			} else {
				struct hconn *h = evs[i].data.ptr;
				uint8_t b[4096];
				ssize_t r = read(h->fd, b, sizeof(b));

				if (r <= 0) {
					close(h->fd);
					free(h);
					continue;
				}
				/* the record's header says how long the ClientHello is */
				for (ssize_t j = 0; hello && !h->answered && j < r; j++) {
					if (h->got < 5)
						h->hdr[h->got] = b[j];
					if (++h->got == 5)
						h->need = 5 + ((size_t)h->hdr[3] << 8 | h->hdr[4]);
				}
				if (hello && !h->answered && h->got >= h->need) {
					h->answered = true;
					if (write(h->fd, server_hello, sizeof(server_hello)) < 0) {
						close(h->fd);
						free(h);
					}
				}
			}
		}
	}
}

struct slot {
	int fd;
	bool sent; /* the ClientHello went: waiting for the server's answer */
	uint64_t t0;
};

static const uint8_t *hello_buf;
static size_t hello_len;

static int start(int ep, const struct sockaddr_storage *ss, socklen_t len, struct slot *s)
{
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = s};
	struct linger lg = {1, 0}; /* close with RST: no TIME_WAIT, ports recycle */

	s->sent = false;
	s->fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return -1;
	setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	s->t0 = now_ns();
	if (connect(s->fd, (const struct sockaddr *)ss, len) < 0 && errno != EINPROGRESS) {
		close(s->fd);
		return -1;
	}
	return epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int conn(const struct sockaddr_storage *ss, socklen_t len, double secs, int inflight)
{
	size_t cap = 1 << 22, n = 0, fails = 0, errs[134] = {0};
	uint32_t *lat = malloc(cap * sizeof(*lat));
	struct slot *slots = calloc((size_t)inflight, sizeof(*slots));
	struct epoll_event evs[256];
	uint64_t t_start = now_ns(), t_end = t_start + (uint64_t)(secs * 1e9), t_last;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (!lat || !slots || ep < 0)
		return 1;
	for (int i = 0; i < inflight; i++)
		if (start(ep, ss, len, &slots[i]) < 0)
			fails++;
	for (;;) {
		int k = epoll_wait(ep, evs, 256, 100);
		uint64_t t = now_ns();

		for (int i = 0; i < k; i++) {
			struct slot *s = evs[i].data.ptr;
			int err = 0;
			socklen_t el = sizeof(err);

			getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &el);
			if (err == 0 && hello_buf && !s->sent) {
				struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};

				/* established: the ClientHello, then wait for the answer */
				if (write(s->fd, hello_buf, hello_len) == (ssize_t)hello_len &&
				    epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &ev) == 0) {
					s->sent = true;
					continue;
				}
				err = EIO;
			} else if (err == 0 && hello_buf) {
				uint8_t b[512];

				if (read(s->fd, b, sizeof(b)) <= 0)
					err = ECONNRESET;
			}
			if (err == 0 && n < cap) {
				lat[n++] = (uint32_t)((t - s->t0) / 1000);
			} else if (err) {
				fails++;
				errs[err > 0 && err < 134 ? err : 0]++;
			}
			close(s->fd);
			s->fd = -1;
			if (t < t_end && start(ep, ss, len, s) < 0)
				fails++;
		}
		/* a handshake stuck for 2 s counts as a failure */
		t = now_ns();
		for (int i = 0; i < inflight; i++) {
			if (slots[i].fd >= 0 && t > slots[i].t0 + 2000000000ull) {
				close(slots[i].fd);
				slots[i].fd = -1;
				fails++;
				if (t < t_end && start(ep, ss, len, &slots[i]) < 0)
					fails++;
			}
		}
		if (t >= t_end) {
			bool open = false;

			for (int i = 0; i < inflight; i++)
				open = open || slots[i].fd >= 0;
			if (!open || t > t_end + 3000000000ull)
				break;
		}
	}
	t_last = now_ns();
	for (int e = 0; e < 134; e++)
		if (errs[e])
			fprintf(stderr, "flows: %zu connections failed: %s\n", errs[e],
				strerror(e));
	qsort(lat, n, sizeof(*lat), cmp_u32);
	printf("conns %zu fails %zu secs %.3f rate %.1f p50_us %u p99_us %u\n", n, fails,
	       (double)(t_last - t_start) / 1e9, (double)n / ((double)(t_end - t_start) / 1e9),
	       n ? lat[n / 2] : 0, n ? lat[(n * 99) / 100] : 0);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;

	if (argc >= 4 && (strcmp(argv[1], "serve") == 0 || strcmp(argv[1], "serve-hello") == 0) &&
	    addr_fill(argv[2], argv[3], &ss, &len) == 0)
		return serve(&ss, len, strcmp(argv[1], "serve-hello") == 0);
	if (argc >= 6 && strcmp(argv[1], "conn") == 0 &&
	    addr_fill(argv[2], argv[3], &ss, &len) == 0) {
		static uint8_t hb[16384];

		if (argc >= 7) {
			FILE *f = fopen(argv[6], "rb");

			hello_len = f ? fread(hb, 1, sizeof(hb), f) : 0;
			if (f)
				fclose(f);
			if (hello_len < 6 || hb[0] != 0x16) {
				fprintf(stderr, "flows: %s holds no TLS record\n", argv[6]);
				return 2;
			}
			hello_buf = hb;
		}
		return conn(&ss, len, atof(argv[4]), atoi(argv[5]) > 0 ? atoi(argv[5]) : 1);
	}
	fprintf(stderr, "usage: flows serve|serve-hello ADDR PORT | flows conn ADDR PORT SECONDS "
			"INFLIGHT [HELLO_FILE]\n");
	return 2;
}
