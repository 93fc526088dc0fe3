/* Unit test of the packet sockets the checker lists (ck_packet_read) while
 * other packet sockets of the namespace open and close: /proc/net/packet
 * is read a page at a time, each page restarting its walk at a line count,
 * so a socket closed meanwhile earlier in the list made the next page skip
 * a line — and the skipped line could be the capture on the bridge that
 * the check exists to find. Runs in a network namespace of its own (Check
 * forks each test). */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checker/checker_int.h"
#include "tests/unit/unit.h"

/* enough sockets ahead of the capture that its line is several pages in */
#define CHURN 300
#define BURST 20

static atomic_bool stop;
static int churn_fd[CHURN];

static int pkt_open(int proto)
{
	return socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, proto);
}

/* Close a burst of sockets, then open as many: the closes shift the lines
 * after them back, the opens (at the head of the list) forward again. */
static void *churn(void *arg)
{
	unsigned seed = 1;

	(void)arg;
	while (!atomic_load(&stop)) {
		int first = (int)(rand_r(&seed) % (CHURN - BURST));

		for (int i = first; i < first + BURST; i++)
			close(churn_fd[i]);
		for (int i = first; i < first + BURST; i++)
			churn_fd[i] = pkt_open(0);
	}
	return NULL;
}

static bool listed(const struct ck_state *st, unsigned long ino)
{
	for (size_t i = 0; i < st->n_pkts; i++)
		if (st->pkts[i].inode == ino)
			return true;
	return false;
}

START_TEST(capture_listed_under_socket_churn)
{
	struct sockaddr_ll a = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL)};
	struct stat sb;
	pthread_t th;
	int cap, once_missed = 0, missed = 0, runs = 1000;

	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "# SKIP: no network namespace of our own (%s)\n", strerror(errno));
		return;
	}
	/* the capture first: the list is newest first, so it is listed last */
	cap = pkt_open(htons(ETH_P_ALL));
	if (cap < 0 && (errno == EAFNOSUPPORT || errno == EPERM)) {
		fprintf(stderr, "# SKIP: no packet sockets here (%s)\n", strerror(errno));
		return;
	}
	ck_assert_int_ge(cap, 0);
	a.sll_ifindex = (int)if_nametoindex("lo");
	ck_assert_int_eq(bind(cap, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(fstat(cap, &sb), 0);
	for (int i = 0; i < CHURN; i++)
		ck_assert_int_ge(churn_fd[i] = pkt_open(0), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, churn, NULL), 0);
	for (int r = 0; r < runs; r++) {
		struct ck_state st;
		char *buf = NULL;
		size_t len = 0;

		/* one read, as the checker did before */
		memset(&st, 0, sizeof(st));
		ck_assert_int_eq(pc_file_read("/proc/net/packet", 1 << 22, &buf, &len, NULL), 0);
		ck_packet_parse(&st, buf);
		free(buf);
		once_missed += !listed(&st, (unsigned long)sb.st_ino);
		ck_state_free(&st);

		memset(&st, 0, sizeof(st));
		ck_packet_read(&st);
		ck_assert_msg(!st.pkt_unreadable[0], "%s", st.pkt_unreadable);
		missed += !listed(&st, (unsigned long)sb.st_ino);
		ck_state_free(&st);
	}
	atomic_store(&stop, true);
	pthread_join(th, NULL);
	fprintf(stderr, "# a single read missed the capture in %d of %d reads\n", once_missed,
		runs);
	ck_assert_msg(missed == 0, "the capture on lo was not listed in %d of %d checks", missed,
		      runs);
	close(cap);
}
END_TEST

/* A list that cannot be read is a doubt, never an empty list: here the
 * process is out of file descriptors (EMFILE), as a checker run among many
 * open sockets could be. */
START_TEST(unreadable_list_is_a_doubt)
{
	struct ck_state st;
	struct rlimit old, lim;
	int next = dup(0);

	ck_assert_int_ge(next, 0);
	close(next);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)next; /* the next open fails */
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	memset(&st, 0, sizeof(st));
	ck_packet_read(&st);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	ck_assert_msg(st.pkt_unreadable[0], "an unreadable list read as complete");
	ck_assert_msg(strstr(st.pkt_unreadable, "/proc/net/packet could not be read"), "%s",
		      st.pkt_unreadable);
	ck_state_free(&st);
}
END_TEST

PC_UNIT_SUITE("checker_pkt", "pkt", 120, capture_listed_under_socket_churn,
	      unreadable_list_is_a_doubt)
