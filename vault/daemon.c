/* The monitor of portcullis-vault (main.c parses the options and comes
 * here): its listeners and vault.sock bound as root, the CA process started,
 * the drop to vault.user; then the accept loop, which names each redirected
 * connection's sandbox and hands it to that sandbox's worker (monitor.c), and
 * reloads policy and secrets on SIGHUP. The state lives here, not in main.c,
 * because vault.sock's "reload" (ctl.c, in the archive) swaps it: libvault.a
 * must not call into a main file (docs/layout.md, tests/static/symbols.sh). */
#include "vault/vault_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80 /* linux/netfilter_ipv4.h */
#endif
#ifndef IP6T_SO_ORIGINAL_DST
#define IP6T_SO_ORIGINAL_DST 80 /* linux/netfilter_ipv6/ip6_tables.h */
#endif

static int listen_on(const struct pc_endpoint *ep, bool v6only, struct pc_err *err)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl;
	int fd, one = 1;

	if (ep->addr.family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;

		s->sin_family = AF_INET;
		s->sin_port = htons(ep->port);
		memcpy(&s->sin_addr, ep->addr.a, 4);
		sl = sizeof(*s);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;

		s->sin6_family = AF_INET6;
		s->sin6_port = htons(ep->port);
		memcpy(&s->sin6_addr, ep->addr.a, 16);
		sl = sizeof(*s);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, v6only ? sizeof(one) : 0);
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1024) < 0) {
		char b[64];

		pc_err_errno(err, PC_EIO, "listening on %s", pc_endpoint_str(ep, b, sizeof(b)));
		close(fd);
		return PC_EIO;
	}
	return fd;
}

static void sockaddr_to_ep(const struct sockaddr_storage *ss, struct pc_endpoint *ep)
{
	memset(ep, 0, sizeof(*ep));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)ss;

		ep->addr.family = AF_INET;
		memcpy(ep->addr.a, &s->sin_addr, 4);
		ep->port = ntohs(s->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;

		ep->addr.family = AF_INET6;
		memcpy(ep->addr.a, &s->sin6_addr, 16);
		ep->port = ntohs(s->sin6_port);
	}
}

static void accept_one(struct vault_daemon *d, int lfd)
{
	struct sockaddr_storage ss, orig_ss, local_ss;
	socklen_t sl = sizeof(ss), ol = sizeof(orig_ss), ll = sizeof(local_ss);
	struct pc_endpoint src, orig = {0}, local;
	struct policy_src psrc = {0};
	const struct policy_sandbox *sb;
	struct vault_state *st;
	char sandbox[POLICY_NAME_MAX] = "";
	int fd, rc;

	fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	sockaddr_to_ep(&ss, &src);
	/* SO_ORIGINAL_DST reads the conntrack entry: no capability needed */
	rc = ss.ss_family == AF_INET6
		 ? getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &orig_ss, &ol)
		 : getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig_ss, &ol);
	if (rc < 0 || getsockname(fd, (struct sockaddr *)&local_ss, &ll) < 0) {
		accept_refuse(d, fd, &src, &orig, NULL, "vault_not_redirected",
			      "no original destination (not redirected)");
		return;
	}
	sockaddr_to_ep(&orig_ss, &orig);
	sockaddr_to_ep(&local_ss, &local);
	if (pc_addr_eq(&orig.addr, &local.addr) && orig.port == local.port) {
		accept_refuse(d, fd, &src, &orig, NULL, "vault_not_redirected",
			      "direct connection to the vault (not redirected)");
		return;
	}
	psrc.addr = src.addr;
	st = vault_daemon_state(d);
	/* The vault sees an address only. The flow reached it because the
	 * engine attributed its SYN with every selector (source, MAC, bridge
	 * port) and redirected it, and the engine's bridge table binds port-
	 * and MAC-bound sandboxes' addresses to their port/MAC: so the address
	 * names the sandbox, unless several sandboxes' sources contain it. */
	sb = policy_sandbox_match(st->policy, &psrc);
	if (!sb)
		sb = policy_sandbox_by_source(st->policy, &src.addr);
	if (sb)
		pc_strlcpy(sandbox, sb->name, sizeof(sandbox));
	vault_state_unref(st);
	if (!sb) {
		accept_refuse(d, fd, &src, &orig, NULL, "not_a_sandbox",
			      "source address matches no sandbox");
		return;
	}
	monitor_dispatch(d, fd, &src, &orig, sandbox);
}

/* The monitor's state: the policy (to name sandboxes at accept) and no
 * secret — the store is unsealed only to check it (a store that does not
 * authenticate keeps the running state on reload) and to count it; each
 * worker unseals its own sandbox's secrets. */
static int monitor_state_load(const struct config *cfg, const struct vault_state *prev,
			      struct vault_state **out, size_t *n_secrets, struct pc_err *err)
{
	struct policy *policy = NULL;
	struct vault_store *store = NULL;
	int rc;

	if ((rc = vault_state_inputs_load(cfg, prev ? prev->policy : NULL, &policy, &store, err)) <
	    0)
		return rc;
	/* kept before it goes in force (docs/policy.md, "Policies kept by
	 * hash"): a policy the store cannot keep is refused as a whole */
	if ((rc = polstore_put_cfg(cfg, policy, err)) < 0) {
		policy_unref(policy);
		store_free(store);
		return rc;
	}
	*n_secrets = store->n;
	store_free(store);
	if (!(store = calloc(1, sizeof(*store)))) {
		policy_unref(policy);
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	}
	if ((rc = vault_state_make(policy, store, out, err)) < 0) {
		policy_unref(policy);
		store_free(store);
	}
	return rc;
}

/* Load the policy and secrets again and swap them in; on failure the running
 * state stays. SIGHUP and "reload" on vault.sock (ctl.c) both come here. */
int vault_daemon_reload(struct vault_daemon *d, struct pc_err *err)
{
	struct vault_state *st, *old, *cur;
	size_t n_secrets = 0;
	char b[700];
	int rc;

	/* Our own state first: its errors name the file and line. */
	pthread_mutex_lock(&d->lock);
	cur = d->state ? vault_state_ref(d->state) : NULL;
	pthread_mutex_unlock(&d->lock);
	rc = monitor_state_load(&d->cfg, cur, &st, &n_secrets, err);
	vault_state_unref(cur);
	if (rc < 0) {
		pc_log(PC_LOG_ERR, "reload failed, keeping the running state: %s",
		       pc_err_str(err, b, sizeof(b)));
		return rc;
	}
	/* Then the CA, before the swap: a name the new policy allows is then
	 * signed by the time a worker lets a handshake ask for it. A CA that
	 * keeps its old policy refuses new names (fail closed) and allows no
	 * more than it did; the reload is then refused as a whole. */
	if ((rc = casign_reload(d->casign, err)) < 0) {
		pc_log(PC_LOG_ERR, "reload of the CA process failed, it keeps its policy: %s",
		       pc_err_str(err, b, sizeof(b)));
		vault_state_unref(st);
		return rc;
	}
	pthread_mutex_lock(&d->lock);
	old = d->state;
	d->state = st;
	d->n_secrets = n_secrets;
	pthread_mutex_unlock(&d->lock);
	vault_state_unref(old);
	/* every worker finishes its connections with what it has; the next
	 * connection of each sandbox starts a worker with the new policy and
	 * secrets */
	monitor_retire_all();
	pc_log(PC_LOG_NOTICE, "reloaded: policy %s, %zu secrets", policy_hash(st->policy),
	       n_secrets);
	return 0;
}

/* <run_dir>/vault.sock: made by root, so root's, and 0600 (metrics are for
 * the administrator); served on its own thread once the privileges are gone. */
static int control_listen(const struct config *cfg, struct pc_err *err)
{
	char path[PC_PATH_MAX + 32];

	if (mkdir(cfg->run_dir, 0755) < 0 && errno != EEXIST)
		return pc_err_errno(err, PC_EIO, "creating %s", cfg->run_dir);
	snprintf(path, sizeof(path), "%s/%s", cfg->run_dir, VAULT_CTL_SOCK);
	return pc_unix_listen(path, 0600, (uid_t)-1, (gid_t)-1, err);
}

int vault_daemon_setup(struct vault_daemon *d, const char *config, bool test_only,
		       struct pc_err *err)
{
	struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
	int rc, cfd;

	d->n = &d->n_own;
	pthread_mutex_init(&d->lock, NULL);
	d->reap_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (d->reap_fd < 0)
		return pc_err_errno(err, PC_EIO, "eventfd");
	if ((rc = config_load(config, &d->cfg, err)) < 0)
		return rc;
	/* the vault's and the workers' users (there, not root, each of its
	 * own), or the drop or every worker would fail: say so now (-t too)
	 * rather than at the first connection; the list is the one `policy
	 * lint` reports (rules/startcheck.c) */
	if ((rc = config_start_check(&d->cfg, CFGD_VAULT, NULL, NULL, err)) < 0)
		return rc;
	if (test_only) {
		if ((rc = ca_load(d->cfg.vault.ca_dir, &d->ca, err)) < 0 ||
		    (rc = vault_state_load(&d->cfg, &d->state, err)) < 0 ||
		    (rc = conn_server_ctx_new(&d->server_ctx, err)) < 0 ||
		    (rc = upstream_ctx_new(d->cfg.vault.trust, &d->client_ctx, err)) < 0)
			return rc;
		d->n_secrets = d->state->store->n;
		return 0;
	}
	/* The CA process first, before any secret is loaded or thread
	 * started: it alone reads ca.key; the processes that parse sandbox
	 * bytes (the workers) never hold the CA key. -t checks it here. */
	if ((rc = casign_start(&d->cfg, &d->casign, err)) < 0 ||
	    (rc = polstore_prepare(&d->cfg, err)) < 0 ||
	    (rc = monitor_state_load(&d->cfg, NULL, &d->state, &d->n_secrets, err)) < 0)
		return rc;
	monitor_init(config);
	/* values must stay in RAM: lift the lock limit while still root */
	if (setrlimit(RLIMIT_MEMLOCK, &rl) < 0)
		pc_log(PC_LOG_WARN, "cannot raise RLIMIT_MEMLOCK: %s", strerror(errno));
	rc = listen_on(&d->cfg.vault.listen, false, err);
	if (rc < 0)
		return rc;
	d->lfds[d->n_lfds++] = rc;
	if (d->cfg.vault.listen.addr.family == AF_INET &&
	    !memcmp(d->cfg.vault.listen.addr.a, "\0\0\0\0", 4)) {
		/* 0.0.0.0 also means the IPv6 any address, for v6 redirects */
		struct pc_endpoint v6 = {.addr = {.family = AF_INET6},
					 .port = d->cfg.vault.listen.port};

		rc = listen_on(&v6, true, err);
		if (rc >= 0)
			d->lfds[d->n_lfds++] = rc;
		else
			pc_log(PC_LOG_WARN, "no IPv6 listener: %s", err->msg);
	}
	cfd = control_listen(&d->cfg, err);
	if (cfd < 0)
		return cfd;
	/* the vault user, keeping only what starting and stopping workers
	 * of another user needs: CAP_SETUID/CAP_SETGID permitted but not
	 * effective (handed to each worker for its own drop, wuser.c), and
	 * CAP_KILL (SIGTERM to a worker at stop) */
	if ((rc = pc_privdrop_permitted(d->cfg.vault.user, vault_monitor_caps_effective(),
					vault_monitor_caps_permitted(), err)) < 0) {
		close(cfd);
		return rc;
	}
	/* setuid already cleared it; say so explicitly anyway */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if ((rc = logq_start(d->cfg.log.socket, 2000, &d->logq, err)) < 0) {
		close(cfd);
		return rc;
	}
	return pc_ctl_start(cfd, true, vault_ctl, d, &d->ctl, err);
}

int vault_daemon_serve(struct vault_daemon *d, const sigset_t *sigs)
{
	char b[64];
	int sfd, rc = 0;

	sfd = signalfd(-1, sigs, SFD_CLOEXEC);
	if (sfd < 0) {
		pc_log(PC_LOG_ERR, "signalfd: %s", strerror(errno));
		return PC_EIO;
	}
	pc_log(PC_LOG_NOTICE, "serving on %s as %s: policy %s, %zu secrets",
	       pc_endpoint_str(&d->cfg.vault.listen, b, sizeof(b)), d->cfg.vault.user,
	       policy_hash(d->state->policy), d->n_secrets);
	pc_sd_notify("READY=1", NULL);
	for (;;) {
		struct pollfd p[5];
		size_t np = 0;

		p[np++] = (struct pollfd){.fd = sfd, .events = POLLIN};
		p[np++] = (struct pollfd){.fd = d->reap_fd, .events = POLLIN};
		/* no events: POLLHUP alone, when the CA process ended */
		p[np++] = (struct pollfd){.fd = casign_fd(d->casign), .events = 0};
		for (size_t i = 0; i < d->n_lfds; i++)
			p[np++] = (struct pollfd){.fd = d->lfds[i], .events = POLLIN};
		if (poll(p, np, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGCHLD) {
					monitor_reap();
				} else if (si.ssi_signo == SIGHUP) {
					struct pc_err re = {0};

					pc_sd_notify("RELOADING=1", NULL);
					(void)vault_daemon_reload(d, &re); /* logged there */
					pc_sd_notify("READY=1", NULL);
				} else {
					break;
				}
			}
		}
		if (p[1].revents)
			conns_reap(d);
		if (p[2].revents & (POLLHUP | POLLERR)) {
			/* no leaf can be signed any more, and this process
			 * cannot start another CA (it is no longer root): stop,
			 * failing closed, for the supervisor to restart us */
			pc_log(PC_LOG_ERR, "the CA process ended; stopping");
			rc = PC_EIO;
			break;
		}
		for (size_t i = 3; i < np; i++)
			if (p[i].revents)
				accept_one(d, p[i].fd);
	}
	pc_sd_notify("STOPPING=1", NULL);
	pc_log(PC_LOG_NOTICE, "stopping");
	close(sfd);
	return rc;
}

void vault_daemon_end(struct vault_daemon *d)
{
	for (size_t i = 0; i < d->n_lfds; i++)
		close(d->lfds[i]);
	d->n_lfds = 0;
	pc_ctl_stop(d->ctl);
	d->ctl = NULL;
	/* every worker ends its connections (bounded) and exits; their
	 * records were acknowledged or their requests refused */
	monitor_stop_all();
	daemon_free(d);
}
