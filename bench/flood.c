/* SYN flood sender for bench/flood: bare TCP SYNs from a raw socket, as fast
 * as one thread can send them, each from a new random source port (each a
 * new flow for the gateway), for a fixed time and at most a fixed count, or
 * until SIGTERM/SIGINT (then it still prints what it sent).
 *   flood SRC DST PORT SECONDS [MAX]   print: sent N secs S rate R */
#define _GNU_SOURCE /* sendmmsg */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64

static volatile sig_atomic_t stop; /* set by the signal handler only */

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)*s;
}

/* TCP checksum over the IPv4 pseudo-header and a 20-byte header. */
static uint16_t tcp_csum(struct in_addr src, struct in_addr dst, const struct tcphdr *th)
{
	const uint16_t *w = (const uint16_t *)th;
	uint32_t sum = 0;

	sum += (ntohl(src.s_addr) >> 16) + (ntohl(src.s_addr) & 0xffff);
	sum += (ntohl(dst.s_addr) >> 16) + (ntohl(dst.s_addr) & 0xffff);
	sum += IPPROTO_TCP + sizeof(*th);
	for (size_t i = 0; i < sizeof(*th) / 2; i++)
		sum += ntohs(w[i]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

int main(int argc, char **argv)
{
	struct sockaddr_in to = {.sin_family = AF_INET};
	struct in_addr src;
	struct tcphdr th[BATCH];
	struct iovec iov[BATCH];
	struct mmsghdr m[BATCH];
	uint64_t seed, sent = 0, max, t0, t_end, t;
	double secs;
	int fd;

	if (argc < 5 || inet_pton(AF_INET, argv[1], &src) != 1 ||
	    inet_pton(AF_INET, argv[2], &to.sin_addr) != 1) {
		fprintf(stderr, "usage: flood SRC DST PORT SECONDS [MAX]\n");
		return 2;
	}
	secs = atof(argv[4]);
	max = argc > 5 ? strtoull(argv[5], NULL, 10) : 100000000ull;
	if (secs <= 0 || secs > 600) {
		fprintf(stderr, "flood: SECONDS must be in (0, 600]\n");
		return 2;
	}
	fd = socket(AF_INET, SOCK_RAW, IPPROTO_TCP); /* the kernel adds the IP header */
	if (fd < 0) {
		perror("flood: raw socket");
		return 1;
	}
	{
		struct sigaction sa = {.sa_handler = on_signal};

		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
	}
	seed = now_ns() | 1;
	memset(m, 0, sizeof(m));
	for (int i = 0; i < BATCH; i++) {
		iov[i].iov_base = &th[i];
		iov[i].iov_len = sizeof(th[i]);
		m[i].msg_hdr.msg_name = &to;
		m[i].msg_hdr.msg_namelen = sizeof(to);
		m[i].msg_hdr.msg_iov = &iov[i];
		m[i].msg_hdr.msg_iovlen = 1;
	}
	t0 = now_ns();
	t_end = t0 + (uint64_t)(secs * 1e9);
	for (t = t0; t < t_end && sent < max && !stop; t = now_ns()) {
		int k;

		for (int i = 0; i < BATCH; i++) {
			memset(&th[i], 0, sizeof(th[i]));
			th[i].source = htons((uint16_t)(1024 + rnd(&seed) % 64000));
			th[i].dest = htons((uint16_t)atoi(argv[3]));
			th[i].seq = htonl(rnd(&seed));
			th[i].doff = 5;
			th[i].syn = 1;
			th[i].window = htons(64240);
			th[i].check = tcp_csum(src, to.sin_addr, &th[i]);
		}
		k = sendmmsg(fd, m, BATCH, 0);
		if (k > 0)
			sent += (uint64_t)k;
		else if (errno != ENOBUFS && errno != EAGAIN && errno != EPERM && errno != EINTR) {
			perror("flood: sendmmsg");
			return 1;
		}
	}
	printf("sent %llu secs %.3f rate %.1f\n", (unsigned long long)sent, (double)(t - t0) / 1e9,
	       (double)sent / ((double)(t - t0) / 1e9));
	close(fd);
	return 0;
}
