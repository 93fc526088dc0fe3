/* Load generator for bench/flows: new TCP connections as fast as they go,
 * with a bounded number in flight, timing each handshake (connect() to
 * established: the SYN's trip through the gateway, and the engine's verdict
 * when it is there).
 *   flows serve ADDR PORT                   accept and close, until killed
 *   flows conn ADDR PORT SECONDS INFLIGHT   print: conns N fails F secs S
 *                                           rate R p50_us A p99_us B */
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
static int serve(const struct sockaddr_storage *ss, socklen_t len)
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
	ev.data.fd = l;
	epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
	for (;;) {
		int k = epoll_wait(ep, evs, 256, -1);

		for (int i = 0; i < k; i++) {
			int fd = evs[i].data.fd;

			if (fd == l) {
				int c;

				while ((c = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >=
				       0) {
					struct epoll_event ce = {.events = EPOLLIN | EPOLLRDHUP,
								 .data.fd = c};

					if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce) < 0)
						close(c);
				}
			} else {
				char b[256];

				if (read(fd, b, sizeof(b)) <= 0)
					close(fd);
			}
		}
	}
}

struct slot {
	int fd;
	uint64_t t0;
};

static int start(int ep, const struct sockaddr_storage *ss, socklen_t len, struct slot *s)
{
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = s};
	struct linger lg = {1, 0}; /* close with RST: no TIME_WAIT, ports recycle */

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

	if (argc >= 4 && strcmp(argv[1], "serve") == 0 &&
	    addr_fill(argv[2], argv[3], &ss, &len) == 0)
		return serve(&ss, len);
	if (argc >= 6 && strcmp(argv[1], "conn") == 0 &&
	    addr_fill(argv[2], argv[3], &ss, &len) == 0)
		return conn(&ss, len, atof(argv[4]), atoi(argv[5]) > 0 ? atoi(argv[5]) : 1);
	fprintf(stderr, "usage: flows serve ADDR PORT | flows conn ADDR PORT SECONDS INFLIGHT\n");
	return 2;
}
