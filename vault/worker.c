/* A per-sandbox worker process: the only code that parses a sandbox's bytes
 * (TLS, HTTP, WebSocket). Started by the monitor (vault/monitor.c) on the
 * sandbox's first connection, it holds that sandbox's secrets alone, runs
 * as its own user (vault.worker_user, wuser.c) under a seccomp filter
 * without file system access, gets its connections from the monitor as
 * sockets (SCM_RIGHTS) and ends when idle, when the monitor retires it
 * (reload), or at SIGTERM (docs/vault.md, "Processes"). */
#include "vault/vault_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the monitor -> worker channel ----------------------------------------
 *   CONN  src endpoint | orig endpoint   (+ the accepted socket, SCM_RIGHTS)
 * an endpoint: u8 family (4 or 6) | 16 bytes address | u16 port */

static void put_ep(struct pc_msg_w *w, const struct pc_endpoint *ep)
{
	uint8_t a[16] = {0};

	memcpy(a, ep->addr.a, ep->addr.family == AF_INET ? 4 : 16);
	pc_msg_put_u8(w, ep->addr.family == AF_INET ? 4 : 6);
	for (size_t i = 0; i < sizeof(a); i++)
		pc_msg_put_u8(w, a[i]);
	pc_msg_put_u16(w, ep->port);
}

static int get_ep(struct pc_msg_r *r, struct pc_endpoint *ep, struct pc_err *err)
{
	uint8_t fam, a[16];
	int rc;

	memset(ep, 0, sizeof(*ep));
	if ((rc = pc_msg_get_u8(r, &fam, err)) < 0)
		return rc;
	if (fam != 4 && fam != 6)
		return pc_err_set(err, PC_EPARSE, "address family %u", fam);
	for (size_t i = 0; i < sizeof(a); i++)
		if ((rc = pc_msg_get_u8(r, &a[i], err)) < 0)
			return rc;
	if (fam == 4) {
		for (size_t i = 4; i < sizeof(a); i++)
			if (a[i])
				return pc_err_set(err, PC_EPARSE,
						  "IPv4 address with trailing bytes");
	}
	ep->addr.family = fam == 4 ? AF_INET : AF_INET6;
	memcpy(ep->addr.a, a, fam == 4 ? 4 : 16);
	return pc_msg_get_u16(r, &ep->port, err);
}

int wmsg_conn_encode(const struct pc_endpoint *src, const struct pc_endpoint *orig, uint8_t *buf,
		     size_t cap)
{
	struct pc_msg_w w;

	pc_msg_w_init(&w, buf, cap);
	put_ep(&w, src);
	put_ep(&w, orig);
	return pc_msg_finish(&w, WMSG_PROTO, WMSG_VERSION, WMSG_CONN, WMSG_MAX);
}

int wmsg_conn_decode(const uint8_t *buf, size_t len, struct pc_endpoint *src,
		     struct pc_endpoint *orig, struct pc_err *err)
{
	struct pc_endpoint s, o;
	struct pc_msg_r r;
	uint8_t type;
	int rc;

	if ((rc = pc_msg_open(&r, buf, len, WMSG_PROTO, WMSG_VERSION, &type, err)) < 0)
		return rc;
	if (type != WMSG_CONN)
		return pc_err_set(err, PC_EPARSE, "message type %u", type);
	if ((rc = get_ep(&r, &s, err)) < 0 || (rc = get_ep(&r, &o, err)) < 0 ||
	    (rc = pc_msg_end(&r, err)) < 0)
		return rc;
	*src = s;
	*orig = o;
	return 0;
}

/* ---- the worker ----------------------------------------------------------- */

static bool keep_secret(const char *name, void *arg)
{
	return policy_secret_by_name(arg, name) != NULL;
}

/* One CONN from the monitor: serve it, or refuse it if it is malformed.
 * Returns 0, or <0 when the channel ended (EOF or error). */
static int take_conn(struct vault_daemon *d, int chan, const char *sandbox)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	uint8_t buf[WMSG_MAX + 1];
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof(cb.b)};
	struct pc_endpoint src, orig;
	struct cmsghdr *c;
	struct pc_err e = {0};
	int fd = -1;
	ssize_t n = recvmsg(chan, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0)
		return PC_EIO;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)) && fd < 0)
			memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (fd < 0 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    wmsg_conn_decode(buf, (size_t)n, &src, &orig, &e) < 0) {
		pc_log(PC_LOG_ERR, "worker %s: bad message from the monitor: %s", sandbox,
		       e.msg[0] ? e.msg : "no socket");
		if (fd >= 0)
			close(fd);
		return 0;
	}
	/* the monitor made it blocking-agnostic; the connection code wants
	 * a non-blocking socket, as accept4 gave it */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	conn_spawn(d, fd, &src, &orig, sandbox);
	return 0;
}

/* Its resident memory into its counters page, from /proc/self/statm
 * (opened before the filter: pread is allowed, open is not). */
static void report_rss(struct vault_daemon *d, int statm)
{
	char b[128];
	unsigned long size, rss;
	ssize_t n = statm >= 0 ? pread(statm, b, sizeof(b) - 1, 0) : -1;

	if (n <= 0)
		return;
	b[n] = '\0';
	if (sscanf(b, "%lu %lu", &size, &rss) == 2)
		atomic_store(&d->n->rss_bytes, (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE));
}

static unsigned open_conns(struct vault_daemon *d)
{
	unsigned n;

	pthread_mutex_lock(&d->lock);
	n = d->conns;
	pthread_mutex_unlock(&d->lock);
	return n;
}

/* One of the worker's own descriptors in its event loop: armed (one-shot)
 * while nothing fired, and fired until the worker handled it. */
struct wev {
	bool armed, fired;
};

static void wev_fire(void *arg, int fd, short rev)
{
	struct wev *w = arg;

	(void)fd;
	(void)rev;
	w->armed = false;
	w->fired = true;
}

static int wev_arm(struct vault_daemon *d, struct wev *w, int fd)
{
	int rc;

	if (w->armed || w->fired)
		return 0;
	if ((rc = vloop_arm(d->loop, fd, POLLIN, wev_fire, w)) == 0)
		w->armed = true;
	return rc;
}

/* The test hook (PORTCULLIS_VAULT_TEST_OPEN=path:path...): after the
 * filter is in place, try to open each path and say what happened — how
 * the tests show, from inside a real worker, that it cannot. */
static void test_open(const char *sandbox)
{
	const char *v = getenv("PORTCULLIS_VAULT_TEST_OPEN");
	char paths[1024], *save = NULL;

	if (!v || pc_strlcpy(paths, v, sizeof(paths)) >= sizeof(paths))
		return;
	for (char *p = strtok_r(paths, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		int fd = open(p, O_RDONLY | O_CLOEXEC);

		pc_log(PC_LOG_NOTICE, "worker %s: test: open(%s): %s", sandbox, p,
		       fd >= 0 ? "opened" : strerror(errno));
		if (fd >= 0)
			close(fd);
	}
}

int vault_worker_main(const char *config, const char *sandbox)
{
	struct vault_daemon d = {0};
	struct policy *policy = NULL;
	struct vault_store *store = NULL;
	const struct policy_sandbox *sb;
	struct pc_err e = {0};
	struct casign *signer = NULL;
	uint64_t idle_ms, idle_since, rss_at = 0;
	struct wev ev_sig = {0}, ev_reap = {0}, ev_chan = {0};
	bool retiring = false;
	int chan = WORKER_FD_CHAN, sfd = -1, statm = -1, rc;
	sigset_t sigs;
	void *page;
	char b[700];

	prctl(PR_SET_NAME, "vault-worker", 0, 0, 0);
	/* the monitor's death ends the worker (its connections as at SIGTERM) */
	prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
	d.n = &d.n_own;
	d.reap_fd = -1;
	pthread_mutex_init(&d.lock, NULL);
	page = mmap(NULL, sizeof(struct vault_counters), PROT_READ | PROT_WRITE, MAP_SHARED,
		    WORKER_FD_COUNTERS, 0);
	close(WORKER_FD_COUNTERS);
	if (page == MAP_FAILED) {
		rc = pc_err_errno(&e, PC_EIO, "mapping the counters");
		goto out;
	}
	d.n = page;
	/* a worker compiles the rules itself, and its records cite what it
	 * compiled: that is kept too (docs/policy.md, "Policies kept by
	 * hash") */
	if ((rc = config_load(config, &d.cfg, &e)) < 0 ||
	    (rc = policy_load_dir(d.cfg.rules_dir, &d.cfg, &policy, &e)) < 0 ||
	    (rc = polstore_put_cfg(&d.cfg, policy, &e)) < 0)
		goto out;
	sb = policy_sandbox_by_name(policy, sandbox);
	if (!sb) {
		rc = pc_err_set(&e, PC_ENOENT, "sandbox %s is not in the policy", sandbox);
		goto out;
	}
	if ((rc = store_load_only(d.cfg.vault.secrets, keep_secret, (void *)sb, &store, &e)) < 0)
		goto out;
	if ((rc = vault_state_make(policy, store, &d.state, &e)) < 0)
		goto out;
	policy = NULL;
	store = NULL;
	if ((rc = casign_open(WORKER_FD_CA, 0, &signer, &e)) < 0)
		goto out;
	d.casign = signer;
	if ((rc = ca_client_new(signer, &d.ca, &e)) < 0 ||
	    (rc = conn_server_ctx_new(&d.server_ctx, &e)) < 0 ||
	    (rc = upstream_ctx_new(d.cfg.vault.trust, &d.client_ctx, &e)) < 0)
		goto out;
	/* all it reads as the vault user is read: become the worker user,
	 * without any capability, before the first thread (capabilities are
	 * per thread) and the first sandbox byte */
	if ((rc = vault_worker_become(&d.cfg, &e)) < 0)
		goto out;
	d.reap_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (d.reap_fd < 0 || sfd < 0) {
		rc = pc_err_errno(&e, PC_EIO, "eventfd/signalfd");
		goto out;
	}
	/* everything it will ever open is open: from here on, no file system
	 * (the log thread reconnects to logd.sock with connect(), which the
	 * filter allows, as it allows the upstream connections) */
	if ((rc = vloop_new(&d.loop, &e)) < 0 ||
	    (rc = logq_start_loop(d.cfg.log.socket, 2000, d.loop, &d.logq, &e)) < 0 ||
	    (rc = vault_seccomp_worker(&e)) < 0)
		goto out;
	test_open(sandbox);
	pc_log(PC_LOG_INFO, "worker %s: serving (%zu secrets)", sandbox, d.state->store->n);
	idle_ms = 2 * (uint64_t)d.cfg.vault.idle_timeout_ms;
	idle_since = pc_now_mono_ms();
	for (;;) {
		uint64_t now = pc_now_mono_ms();
		int wait = retiring
			       ? 1000
			       : (int)(idle_since + idle_ms > now ? idle_since + idle_ms - now : 0);

		/* at least every 5 s, and not more than once a second: the
		 * memory reported stays current without a read per round */
		if (now - rss_at >= 1000) {
			report_rss(&d, statm);
			rss_at = now;
		}
		if (wev_arm(&d, &ev_sig, sfd) < 0 || wev_arm(&d, &ev_reap, d.reap_fd) < 0 ||
		    (!retiring && wev_arm(&d, &ev_chan, chan) < 0))
			break;
		vloop_run_once(d.loop, wait < 5000 ? wait : 5000);
		if (ev_sig.fired) {
			struct signalfd_siginfo si;

			ev_sig.fired = false;
			if (read(sfd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo != SIGHUP) {
				/* SIGTERM: end every connection, bounded */
				rc = conns_stop(&d) ? 0 : PC_EIO;
				goto stopped;
			}
		}
		if (ev_reap.fired) {
			ev_reap.fired = false;
			conns_reap(&d);
		}
		if (ev_chan.fired) {
			ev_chan.fired = false;
			if (!retiring && take_conn(&d, chan, sandbox) < 0)
				retiring = true; /* the monitor retired us (reload) or is gone */
		}
		if (open_conns(&d))
			idle_since = pc_now_mono_ms();
		else if (retiring)
			break;
		else if (pc_now_mono_ms() - idle_since >= idle_ms) {
			/* idle: refuse further connections (the monitor's send
			 * fails and it starts another worker), then serve what
			 * it had already sent */
			shutdown(chan, SHUT_RD);
			for (int i = 0; i < 4096 && take_conn(&d, chan, sandbox) == 0; i++)
				;
			retiring = true;
			if (!open_conns(&d))
				break;
		}
	}
	rc = conns_wait(&d, 0) ? PC_EIO : 0;
stopped:
	pc_log(PC_LOG_INFO, "worker %s: ending", sandbox);
	close(sfd);
	close(chan);
	if (statm >= 0)
		close(statm);
	if (rc == 0)
		daemon_free(&d);
	return rc < 0 ? PC_EXIT_ERROR : PC_EXIT_OK;
out:
	pc_log(PC_LOG_ERR, "worker %s: %s", sandbox, pc_err_str(&e, b, sizeof(b)));
	policy_unref(policy);
	store_free(store);
	return PC_EXIT_ERROR;
}
