/* bench/wake_micro: what one wake-up each way between two processes costs
 * on this machine, the least any verdict that waits on logd pays when
 * nothing else is queued (docs/logd.md, "The record ring"). Two processes
 * ring each other through a pair of eventfds watched with epoll, as the
 * engine and logd ring the record ring's bells, one round trip at a time:
 * nothing else to do, so each side sleeps until the other rings.
 * Run it where the daemons would run: `taskset -c 0` puts both processes
 * on one CPU, no taskset lets the kernel place them (docs/operations.md,
 * "CPU placement"). Prints the round trip's mean, median and 99th
 * percentile, and the CPU time both processes spent per round trip.
 *   cc -O2 -std=c11 -D_GNU_SOURCE -o build/bench/wake_micro bench/wake_micro.c
 *   [taskset -c 0] build/bench/wake_micro [ROUND_TRIPS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* Sleep until fd is readable, then take its count. */
static void await(int ep, int fd)
{
	struct epoll_event ev;
	uint64_t n;

	while (epoll_wait(ep, &ev, 1, -1) != 1)
		;
	if (read(fd, &n, sizeof(n)) != sizeof(n))
		die("read");
}

static void ring(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) != sizeof(one))
		die("write");
}

static int watch(int fd)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		die("epoll");
	return ep;
}

static double seconds(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec * 1e-6;
}

static double cpu_of(int who)
{
	struct rusage r;

	if (getrusage(who, &r) != 0)
		die("getrusage");
	return seconds(&r.ru_utime) + seconds(&r.ru_stime);
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	int to_peer = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int to_me = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	double *rt, t0, c0, mean;
	pid_t peer;

	if (n < 100 || to_peer < 0 || to_me < 0)
		die(n < 100 ? "ROUND_TRIPS < 100" : "eventfd");
	rt = malloc((size_t)n * sizeof(*rt));
	if (rt == NULL)
		die("malloc");
	peer = fork();
	if (peer < 0)
		die("fork");
	if (peer == 0) { /* logd's part: answer each bell */
		int ep = watch(to_peer);

		for (long i = 0; i < n; i++) {
			await(ep, to_peer);
			ring(to_me);
		}
		_exit(0);
	}
	int ep = watch(to_me);

	c0 = cpu_of(RUSAGE_SELF);
	t0 = now();
	for (long i = 0; i < n; i++) {
		double s = now();

		ring(to_peer);
		await(ep, to_me);
		rt[i] = now() - s;
	}
	mean = (now() - t0) / (double)n;
	if (waitpid(peer, NULL, 0) != peer)
		die("waitpid");
	double self = cpu_of(RUSAGE_SELF) - c0, child = cpu_of(RUSAGE_CHILDREN);

	qsort(rt, (size_t)n, sizeof(*rt), by_value);
	printf("wake_micro: %ld round trips: mean %.1f us, p50 %.1f us, p99 %.1f us; "
	       "CPU per round trip %.1f us (%.1f + %.1f)\n",
	       n, mean * 1e6, rt[n / 2] * 1e6, rt[n * 99 / 100] * 1e6,
	       (self + child) / (double)n * 1e6, self / (double)n * 1e6, child / (double)n * 1e6);
	free(rt);
	return 0;
}
