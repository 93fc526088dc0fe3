/* The fastest NFQUEUE consumer we know how to write, for bench/flows' and
 * bench/dns' ceiling: it binds the engine's queues and lets every packet
 * through with the engine's "allowed" mark, batched (recvmmsg in, one
 * VERDICT_BATCH out per receive), deciding nothing and logging nothing.
 * The rate through it is what any NFQUEUE design reaches on this machine
 * before it does any work of its own; never used outside the benchmarks.
 * It reads as the engine's queue threads do: after a read of 2..BATCH-1
 * packets it holds its next read HOLD_US, for as long as held reads
 * gather GAIN packets or more on average, and when they gather fewer it
 * holds again only PROBE_MS later, for PROBE_HOLDS reads (engine/queue.c,
 * queue_gather_hold_us), so that the CPU per verdict of the two compares
 * their work, not their read policies (bench/report-notes.md).
 *   nullq MARK QUEUE...      (MARK: the engine's allow mark, e.g. 0x80000000)
 * Runs until killed; one thread per queue. */
#define _GNU_SOURCE /* recvmmsg */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <libnetfilter_queue/libnetfilter_queue.h>

#define BATCH	    64
#define SLOT	    4096 /* headers: the copy range below is small */
#define HOLD_US	    100	 /* the engine's GATHER_HOLD_US */
#define GAIN	    16	 /* GATHER_GAIN */
#define WEIGHT	    8	 /* GATHER_WEIGHT */
#define PROBE_MS    100	 /* GATHER_PROBE_MS */
#define PROBE_HOLDS 16	 /* GATHER_PROBE_HOLDS */

static uint32_t allow_mark;

struct q {
	uint16_t num;
	struct mnl_socket *nl;
};

static void die(const char *what, uint16_t num)
{
	fprintf(stderr, "nullq: queue %u: %s: %s\n", num, what, strerror(errno));
	exit(1);
}

static void cfg(struct q *q, struct nlmsghdr *nlh, const char *what)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];

	nlh->nlmsg_flags |= NLM_F_ACK;
	if (mnl_socket_sendto(q->nl, nlh, nlh->nlmsg_len) < 0)
		die(what, q->num);
	for (;;) {
		int n = (int)recv(mnl_socket_get_fd(q->nl), buf, sizeof(buf), 0);
		struct nlmsghdr *m = (struct nlmsghdr *)buf;

		if (n < 0)
			die(what, q->num);
		for (; mnl_nlmsg_ok(m, n); m = mnl_nlmsg_next(m, &n)) {
			if (m->nlmsg_type != NLMSG_ERROR)
				continue; /* a packet before the config: the kernel resends none */
			errno = -((const struct nlmsgerr *)mnl_nlmsg_get_payload(m))->error;
			if (errno)
				die(what, q->num);
			return;
		}
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *serve(void *arg)
{
	struct q *q = arg;
	char(*rx)[SLOT] = malloc(sizeof(char[BATCH][SLOT]));
	char buf[256];
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	int held = 0, avg = GAIN, probe_left = 0;
	uint64_t probe_ms = 0;

	if (!rx)
		die("out of memory", q->num);
	for (int i = 0; i < BATCH; i++) {
		iov[i] = (struct iovec){rx[i], SLOT};
		memset(&msgs[i], 0, sizeof(msgs[i]));
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	for (;;) {
		int n = recvmmsg(mnl_socket_get_fd(q->nl), msgs, BATCH, MSG_WAITFORONE, NULL);
		uint32_t last = 0;
		int seen = 0;

		if (held) { /* WEIGHT: the newest read's share, as the engine */
			avg = (avg * (WEIGHT - 1) + (n > 0 ? n : 0)) / WEIGHT;
			if ((!probe_left || !--probe_left) && avg < GAIN)
				probe_ms = now_ms() + PROBE_MS;
			held = 0;
		}
		if (n < 0) {
			if (errno == EINTR || errno == ENOBUFS)
				continue;
			die("receive", q->num);
		}
		for (int i = 0; i < n; i++) {
			struct nlmsghdr *m = (struct nlmsghdr *)rx[i];
			int len = (int)msgs[i].msg_len;

			for (; mnl_nlmsg_ok(m, len); m = mnl_nlmsg_next(m, &len)) {
				struct nlattr *attr[NFQA_MAX + 1] = {0};
				struct nfqnl_msg_packet_hdr *ph;

				if (nfq_nlmsg_parse(m, attr) < 0 || !attr[NFQA_PACKET_HDR])
					continue;
				ph = mnl_attr_get_payload(attr[NFQA_PACKET_HDR]);
				last = ntohl(ph->packet_id);
				seen = 1;
			}
		}
		if (!seen)
			continue;
		/* every queued id up to the last one received: all of them are
		 * ours, and all get the same verdict */
		memset(buf, 0, sizeof(buf));
		struct nlmsghdr *v = nfq_nlmsg_put(buf, NFQNL_MSG_VERDICT_BATCH, q->num);
		nfq_nlmsg_verdict_put(v, (int)last, NF_REPEAT);
		nfq_nlmsg_verdict_put_mark(v, allow_mark);
		if (mnl_socket_sendto(q->nl, v, v->nlmsg_len) < 0)
			die("verdict", q->num);
		if (n >= 2 && n < BATCH && !probe_left && avg < GAIN && now_ms() >= probe_ms)
			probe_left = PROBE_HOLDS;
		if (n >= 2 && n < BATCH && (avg >= GAIN || probe_left)) {
			struct timespec ts = {0, HOLD_US * 1000L};

			nanosleep(&ts, NULL);
			held = 1;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	pthread_t tid;
	int one = 1, rcv = 64 << 20;

	if (argc < 3) {
		fprintf(stderr, "usage: nullq MARK QUEUE...\n");
		return 2;
	}
	allow_mark = (uint32_t)strtoul(argv[1], NULL, 0);
	for (int i = 2; i < argc; i++) {
		struct q *q = calloc(1, sizeof(*q));
		struct nlmsghdr *nlh;

		if (!q)
			return 1;
		q->num = (uint16_t)atoi(argv[i]);
		q->nl = mnl_socket_open(NETLINK_NETFILTER);
		if (!q->nl || mnl_socket_bind(q->nl, 0, MNL_SOCKET_AUTOPID) < 0)
			die("netlink socket", q->num);
		setsockopt(mnl_socket_get_fd(q->nl), SOL_NETLINK, NETLINK_NO_ENOBUFS, &one,
			   sizeof(one));
		setsockopt(mnl_socket_get_fd(q->nl), SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv));
		memset(buf, 0, sizeof(buf));
		nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, q->num);
		nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_BIND);
		cfg(q, nlh, "bind");
		memset(buf, 0, sizeof(buf));
		nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, q->num);
		nfq_nlmsg_cfg_put_params(nlh, NFQNL_COPY_PACKET, 128);
		cfg(q, nlh, "configure");
		if (pthread_create(&tid, NULL, serve, q) != 0)
			die("thread", q->num);
	}
	printf("nullq: serving %d queue(s)\n", argc - 2);
	fflush(stdout);
	pthread_join(tid, NULL);
	return 0;
}
