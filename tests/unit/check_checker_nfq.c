/* Unit test of who holds the engine's queues (ck_nfq_read) while other
 * netlink sockets of the namespace open and close: /proc/net/netlink is
 * read a page at a time, each page restarting its walk at a line count,
 * so a socket closed meanwhile made the next page skip a line, and the
 * queue's own socket read as "bound by a process not found" — a false
 * exit that refused `sandbox run` now and then. Runs in a network
 * namespace of its own (Check forks each test). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter/nfnetlink_queue.h>

#include "checker/checker_int.h"
#include "tests/unit/unit.h"

#define QNUM  4242
#define CHURN 200

static atomic_bool stop;
static int churn_fd[CHURN];

static int nl_open(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	struct sockaddr_nl a = {.nl_family = AF_NETLINK};

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void *churn(void *arg)
{
	unsigned seed = 1;

	(void)arg;
	while (!atomic_load(&stop)) {
		int i = (int)(rand_r(&seed) % CHURN);

		close(churn_fd[i]);
		churn_fd[i] = nl_open();
	}
	return NULL;
}

START_TEST(queue_owner_found_under_socket_churn)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl;
	struct nlmsghdr *nlh;
	pthread_t th;
	int wrong = 0, runs = 2000;

	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "# SKIP: no network namespace of our own (%s)\n", strerror(errno));
		return;
	}
	nl = mnl_socket_open(NETLINK_NETFILTER);
	ck_assert_ptr_nonnull(nl);
	ck_assert_int_eq(mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID), 0);
	nlh = nfq_nlmsg_put(buf, NFQNL_MSG_CONFIG, QNUM);
	nfq_nlmsg_cfg_put_cmd(nlh, AF_INET, NFQNL_CFG_CMD_BIND);
	ck_assert_int_ge(mnl_socket_sendto(nl, nlh, nlh->nlmsg_len), 0);
	for (int i = 0; i < CHURN; i++)
		ck_assert_int_ge(churn_fd[i] = nl_open(), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, churn, NULL), 0);
	for (int r = 0; r < runs; r++) {
		struct ck_state st;
		bool seen = false;

		memset(&st, 0, sizeof(st));
		ck_nfq_read(&st, getpid());
		for (size_t i = 0; i < st.n_nfq; i++)
			if (st.nfq[i].queue == QNUM) {
				seen = true;
				wrong += st.nfq[i].pid != getpid();
			}
		ck_assert_msg(seen, "queue %d not in nfnetlink_queue", QNUM);
		ck_state_free(&st);
	}
	atomic_store(&stop, true);
	pthread_join(th, NULL);
	ck_assert_msg(wrong == 0, "the queue's own socket read as another's in %d of %d reads",
		      wrong, runs);
	mnl_socket_close(nl);
}
END_TEST

PC_UNIT_SUITE("checker_nfq", "nfq", 120, queue_owner_found_under_socket_churn)
