/* The monitor's side of the per-sandbox workers: starting a worker on a
 * sandbox's first connection (a fresh exec of portcullis-vault -W, with its
 * channel, its own channel to the CA process and a shared counters page),
 * handing it the capabilities to become vault.worker_user (wuser.c),
 * handing it accepted sockets, retiring every worker on reload, stopping
 * them at SIGTERM, and adding up their counters and memory for the metrics.
 * The monitor reads nothing a worker sends (a worker is as untrusted as the
 * sandbox it serves): it sees only that its channel or process ended. */
#include "vault/vault_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct worker {
	char sandbox[POLICY_NAME_MAX];
	pid_t pid;
	int fd;			  /* the channel; -1 once retired */
	struct vault_counters *n; /* shared with the worker */
	struct worker *next;
};

/* The accept loop changes the list; the control thread (metrics) reads it. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct worker *workers;
static struct vault_counters ended; /* the counts of workers that ended */
static char config_path[PC_PATH_MAX], exe_path[PC_PATH_MAX] = "/proc/self/exe";

void monitor_init(const char *config)
{
	char p[PC_PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", p, sizeof(p) - 1);

	pc_strlcpy(config_path, config, sizeof(config_path));
	/* the program's own path, resolved now: under valgrind /proc/self/exe
	 * is the tool, and the binary may be replaced by an upgrade (then the
	 * workers run the new one, as a restart would) */
	if (n > 0) {
		p[n] = '\0';
		pc_strlcpy(exe_path, p, sizeof(exe_path));
	}
}

/* The running worker of sandbox (the lock held). */
static struct worker *find(const char *sandbox)
{
	for (struct worker *w = workers; w; w = w->next)
		if (w->fd >= 0 && !strcmp(w->sandbox, sandbox))
			return w;
	return NULL;
}

/* Move fd to target in a child about to exec (async-signal-safe calls). */
static int child_fd(int fd, int target)
{
	return dup2(fd, target) == target ? 0 : -1;
}

static struct worker *spawn(struct vault_daemon *d, const char *sandbox, struct pc_err *err)
{
	int chan[2] = {-1, -1}, ca[2] = {-1, -1}, mfd = -1, hi[3];
	struct worker *w = calloc(1, sizeof(*w));
	void *page = MAP_FAILED;
	pid_t pid;

	if (!w) {
		pc_err_set(err, PC_ENOMEM, "out of memory");
		return NULL;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ca) < 0 ||
	    (mfd = memfd_create("vault-worker-counters", MFD_CLOEXEC)) < 0 ||
	    ftruncate(mfd, sizeof(struct vault_counters)) < 0 ||
	    (page = mmap(NULL, sizeof(struct vault_counters), PROT_READ | PROT_WRITE, MAP_SHARED,
			 mfd, 0)) == MAP_FAILED) {
		pc_err_errno(err, PC_EIO, "making a worker's channels");
		goto fail;
	}
	if (casign_client(d->casign, sandbox, ca[0], err) < 0)
		goto fail;
	/* above 5, so that the dup2s below cannot clobber one another */
	hi[0] = fcntl(chan[1], F_DUPFD_CLOEXEC, 10);
	hi[1] = fcntl(ca[1], F_DUPFD_CLOEXEC, 10);
	hi[2] = fcntl(mfd, F_DUPFD_CLOEXEC, 10);
	pid = hi[0] < 0 || hi[1] < 0 || hi[2] < 0 ? -1 : fork();
	if (pid == 0) {
		/* a threaded parent: only async-signal-safe calls until exec */
		char *argv[] = {"portcullis-vault", "-c", config_path, "-W", (char *)sandbox, NULL};

		if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0 ||
		    vault_worker_caps_child() < 0 || child_fd(hi[0], WORKER_FD_CHAN) < 0 ||
		    child_fd(hi[1], WORKER_FD_CA) < 0 || child_fd(hi[2], WORKER_FD_COUNTERS) < 0)
			_exit(PC_EXIT_ERROR);
		execv(exe_path, argv);
		_exit(PC_EXIT_ERROR);
	}
	for (int i = 0; i < 3; i++)
		if (hi[i] >= 0)
			close(hi[i]);
	if (pid < 0) {
		pc_err_errno(err, PC_EIO, "starting a worker");
		goto fail;
	}
	close(chan[1]);
	close(ca[0]);
	close(ca[1]);
	close(mfd);
	pc_strlcpy(w->sandbox, sandbox, sizeof(w->sandbox));
	w->pid = pid;
	w->fd = chan[0];
	w->n = page;
	pthread_mutex_lock(&lock);
	w->next = workers;
	workers = w;
	pthread_mutex_unlock(&lock);
	pc_log(PC_LOG_INFO, "started the worker of %s (pid %d)", sandbox, (int)pid);
	return w;
fail:
	for (int i = 0; i < 2; i++) {
		if (chan[i] >= 0)
			close(chan[i]);
		if (ca[i] >= 0)
			close(ca[i]);
	}
	if (mfd >= 0)
		close(mfd);
	if (page != MAP_FAILED)
		munmap(page, sizeof(struct vault_counters));
	free(w);
	return NULL;
}

static int send_conn(struct worker *w, int fd, const struct pc_endpoint *src,
		     const struct pc_endpoint *orig)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	uint8_t buf[WMSG_MAX];
	struct iovec iov = {.iov_base = buf};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof(cb.b)};
	struct cmsghdr *c;
	int n = wmsg_conn_encode(src, orig, buf, sizeof(buf));

	if (n < 0)
		return PC_EINVAL;
	iov.iov_len = (size_t)n;
	memset(&cb, 0, sizeof(cb));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	/* never blocks the accept loop: a worker that does not keep up is
	 * busy (PC_EAGAIN: this connection is refused, the worker stays); a
	 * channel that is shut or closed is a worker that retired (PC_EIO) */
	if (sendmsg(w->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == n)
		return 0;
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS ? PC_EAGAIN : PC_EIO;
}

/* Send the connection to sandbox's running worker, under the lock (a
 * reload may retire workers from another thread): 0, PC_EAGAIN (busy),
 * or PC_ENOENT when it has no worker that takes connections (one whose
 * channel failed is retired here: it takes no more connections, and is
 * forgotten when its process ends, monitor_reap). */
static int send_to_worker(const char *sandbox, int fd, const struct pc_endpoint *src,
			  const struct pc_endpoint *orig)
{
	struct worker *w;
	int rc = PC_ENOENT;

	pthread_mutex_lock(&lock);
	if ((w = find(sandbox))) {
		uint64_t others = 0;

		/* what the sandbox still holds in its retired workers (they
		 * take no new connection, so this only shrinks): its quota is
		 * one, across a reload too (conn_acquire) */
		for (struct worker *o = workers; o; o = o->next)
			if (o != w && o->fd < 0 && !strcmp(o->sandbox, sandbox))
				others += atomic_load(&o->n->conns_open);
		atomic_store(&w->n->others_open, others);
		rc = send_conn(w, fd, src, orig);
		if (rc == PC_EIO) {
			close(w->fd);
			w->fd = -1;
			rc = PC_ENOENT;
		}
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

void monitor_dispatch(struct vault_daemon *d, int fd, const struct pc_endpoint *src,
		      const struct pc_endpoint *orig, const char *sandbox)
{
	struct pc_err e = {0};
	int rc = send_to_worker(sandbox, fd, src, orig);

	/* no worker, or one that just went idle (its channel is shut): start
	 * one and hand it the connection */
	if (rc == PC_ENOENT && spawn(d, sandbox, &e))
		rc = send_to_worker(sandbox, fd, src, orig);
	if (rc == 0) {
		close(fd); /* the worker has its own reference */
		return;
	}
	if (!e.msg[0])
		pc_strlcpy(e.msg,
			   rc == PC_EAGAIN ? "its worker is busy"
					   : "its worker does not take connections",
			   sizeof(e.msg));
	pc_log(PC_LOG_ERR, "no worker for %s: %s", sandbox, e.msg);
	accept_refuse(d, fd, src, orig, sandbox, "vault_no_worker", "no worker for the sandbox");
}

static void add(struct vault_counters *to, struct vault_counters *from, bool gauges)
{
	to->conns_accepted += atomic_load(&from->conns_accepted);
	to->conns_refused += atomic_load(&from->conns_refused);
	to->requests_allowed += atomic_load(&from->requests_allowed);
	to->requests_refused += atomic_load(&from->requests_refused);
	to->exfil += atomic_load(&from->exfil);
	to->injections += atomic_load(&from->injections);
	to->secrets_injected += atomic_load(&from->secrets_injected);
	to->log_failed += atomic_load(&from->log_failed);
	to->upstream_full += atomic_load(&from->upstream_full);
	to->upstream_resumed += atomic_load(&from->upstream_resumed);
	if (gauges)
		to->conns_open += atomic_load(&from->conns_open);
}

void monitor_reap(void)
{
	pthread_mutex_lock(&lock);
	for (struct worker **pp = &workers, *w; (w = *pp);) {
		int status;

		if (waitpid(w->pid, &status, WNOHANG) != w->pid) {
			pp = &w->next;
			continue;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			pc_log(PC_LOG_WARN, "the worker of %s (pid %d) ended: %s %d", w->sandbox,
			       (int)w->pid, WIFEXITED(status) ? "status" : "signal",
			       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		add(&ended, w->n, false);
		munmap(w->n, sizeof(*w->n));
		if (w->fd >= 0)
			close(w->fd);
		*pp = w->next;
		free(w);
	}
	pthread_mutex_unlock(&lock);
}

void monitor_retire_all(void)
{
	pthread_mutex_lock(&lock);
	for (struct worker *w = workers; w; w = w->next)
		if (w->fd >= 0) {
			close(w->fd); /* the worker reads EOF: it retires */
			w->fd = -1;
		}
	pthread_mutex_unlock(&lock);
}

void monitor_stop_all(void)
{
	uint64_t deadline = pc_now_mono_ms() + 8000; /* a worker's own bound is 5 s */
	bool left;

	pthread_mutex_lock(&lock);
	for (struct worker *w = workers; w; w = w->next)
		kill(w->pid, SIGTERM);
	pthread_mutex_unlock(&lock);
	for (;;) {
		monitor_reap();
		pthread_mutex_lock(&lock);
		left = workers != NULL;
		if (left && pc_now_mono_ms() >= deadline)
			for (struct worker *w = workers; w; w = w->next)
				kill(w->pid, SIGKILL);
		pthread_mutex_unlock(&lock);
		if (!left)
			break;
		usleep(20 * 1000);
	}
}

void monitor_counters(struct vault_counters *sum)
{
	pthread_mutex_lock(&lock);
	add(sum, &ended, false);
	for (struct worker *w = workers; w; w = w->next)
		add(sum, w->n, true);
	pthread_mutex_unlock(&lock);
}

/* Resident memory of pid in bytes (/proc/<pid>/statm), 0 if unknown. */
static uint64_t rss_bytes(pid_t pid)
{
	char path[64];
	unsigned long size, rss;
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	ok = fscanf(f, "%lu %lu", &size, &rss) == 2;
	fclose(f);
	return ok ? (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

void monitor_metrics(struct pc_prom *b)
{
	char lab[POLICY_NAME_MAX * 2 + 32], esc[POLICY_NAME_MAX * 2];
	uint64_t n = 0;

	pthread_mutex_lock(&lock);
	for (struct worker *w = workers; w; w = w->next)
		n++;
	pc_prom_one_u64(b, "portcullis_vault_workers", "gauge",
			"Per-sandbox worker processes running (retiring ones included).", n);
	pc_prom_family(b, "portcullis_vault_worker_rss_bytes", "gauge",
		       "Resident memory of each worker process.");
	for (struct worker *w = workers; w; w = w->next) {
		uint64_t rss = rss_bytes(w->pid);

		snprintf(lab, sizeof(lab), "sandbox=\"%s\",pid=\"%d\"",
			 pc_prom_label(w->sandbox, esc, sizeof(esc)), (int)w->pid);
		/* a worker runs as another user: under systemd's ProtectProc
		 * its /proc is hidden from us; then what it reports itself */
		if (!rss)
			rss = atomic_load(&w->n->rss_bytes);
		pc_prom_u64(b, "portcullis_vault_worker_rss_bytes", lab, rss);
	}
	pthread_mutex_unlock(&lock);
}
