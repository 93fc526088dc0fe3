/* The main thread's loop: signals (SIGHUP reloads, SIGTERM/SIGINT stop),
 * the control socket (status, reload, metrics, recheck: typed messages of
 * common/engmsg.c), bridge port changes and periodic
 * housekeeping. The queue threads never wait for anything here. */
#include "engine/engine_int.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define HOUSEKEEPING_MS 10000
#define CLIENT_WAIT_MS	1000

int control_status_json(struct engine *e, char **out)
{
	struct policy *pol = engine_policy_get(e);
	struct dnsguard_stats ds;
	char *b = NULL;
	size_t l = 0;
	size_t held = 0;
	uint64_t sent = 0, failed = 0;
	int rc;

	memset(&ds, 0, sizeof(ds));
	dnsguard_stats(e->dg, &ds);
	rc = pc_buf_appendf(&b, &l,
			    "{\"ok\":true,\"version\":\"%s\",\"pid\":%d,\"uptime_s\":%llu,"
			    "\"policy\":",
			    PC_VERSION, (int)getpid(),
			    (unsigned long long)((pc_now_mono_ms() - e->start_ms) / 1000));
	rc = rc ? rc : pc_buf_append_json(&b, &l, pol ? policy_hash(pol) : "");
	rc = rc ? rc
		: pc_buf_appendf(&b, &l, ",\"queue_path\":\"%s\",\"queues\":[",
				 nft_queue_path_name(e->qpath));
	for (size_t i = 0; rc == 0 && i < e->nq; i++) {
		struct qthread *t = &e->q[i];
		uint64_t kd = 0, ud = 0;

		queue_kernel_stats(e->nfq_proc_fd, t->num, &kd, &ud);
		held += atomic_load(&t->held_n);
		sent += atomic_load(&t->st.log_sent);
		failed += atomic_load(&t->st.log_failed);
		rc = pc_buf_appendf(
		    &b, &l,
		    "%s{\"num\":%u,\"queued\":%llu,\"accepted\":%llu,\"refused\":%llu,"
		    "\"kernel_dropped\":%llu,\"user_dropped\":%llu,\"enobufs\":%llu}",
		    i ? "," : "", t->num, (unsigned long long)atomic_load(&t->st.queued),
		    (unsigned long long)atomic_load(&t->st.accepted),
		    (unsigned long long)atomic_load(&t->st.refused), (unsigned long long)kd,
		    (unsigned long long)ud, (unsigned long long)atomic_load(&t->st.enobufs));
	}
	rc =
	    rc ? rc
	       : pc_buf_appendf(
		     &b, &l,
		     "],\"flows\":%zu,\"held\":%zu,\"log\":{\"sent\":%llu,\"failed\":%llu},"
		     "\"dnsguard\":{\"queries_allowed\":%llu,\"queries_refused\":%llu,"
		     "\"queries_malformed\":%llu,\"answers_released\":%llu,"
		     "\"answers_dropped\":%llu,\"learned_entries\":%llu,"
		     "\"learned_evicted\":%llu,\"ech_stripped\":%llu,"
		     "\"pending_queries\":%llu,\"pending_evicted\":%llu}}",
		     flow_registry_count(e->flows), held, (unsigned long long)sent,
		     (unsigned long long)failed, (unsigned long long)ds.queries_allowed,
		     (unsigned long long)ds.queries_refused,
		     (unsigned long long)ds.queries_malformed,
		     (unsigned long long)ds.answers_released,
		     (unsigned long long)ds.answers_dropped, (unsigned long long)ds.learned_entries,
		     (unsigned long long)ds.learned_evicted, (unsigned long long)ds.ech_stripped,
		     (unsigned long long)ds.pending_queries,
		     (unsigned long long)ds.pending_evicted);
	/* the limits and the check join the outer object: before its closing brace */
	if (rc == 0 && l > 0 && b[l - 1] == '}') {
		b[--l] = '\0';
		rc = limits_status_json(pol, &b, &l);
		rc = rc ? rc
			: quota_status_json(&e->quota, pol, e->nq ? held_capacity(e->q[0].held) : 0,
					    e->nq ? dnstcp_capacity(e->q[0].dnstcp) : 0, &b, &l);
		rc = rc ? rc : checkrun_status_json(e, &b, &l);
		rc = rc ? rc : cutoff_status_json(e, &b, &l);
		if (rc == 0) {
			struct rulehits *h = engine_hits_get(e);

			rc = rulehits_status_json(h, &b, &l);
			rulehits_unref(h);
		}
		rc = rc ? rc : pc_buf_appendf(&b, &l, "}");
	}
	policy_unref(pol);
	if (rc) {
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

/* A reply is one SOCK_SEQPACKET record, which the kernel refuses when it
 * is longer than the socket's send buffer (default about 200 KiB): the
 * status and metrics of hundreds of sandboxes are longer (per-sandbox
 * limits and quotas, per-rule hits). Room for this one (the engine keeps
 * CAP_NET_ADMIN, which SO_SNDBUFFORCE needs; else up to wmem_max). */
static void reply_room(int fd, size_t len)
{
	int want = len > (size_t)INT_MAX / 2 - 65536 ? INT_MAX / 2 : (int)len + 65536, have = 0;
	socklen_t sl = sizeof(have);

	if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &have, &sl) == 0 && have >= want + 64)
		return;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof(want)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
}

/* One typed reply (common/engmsg.c); a reply that cannot be encoded (too
 * long, out of memory) becomes an error reply saying so. */
static void reply_send(int fd, const struct pc_eng_reply *r)
{
	struct pc_err err = {0};
	uint8_t *b = NULL;
	size_t l = 0;

	if (pc_eng_reply_encode(r, &b, &l, &err) < 0) {
		struct pc_eng_reply e = {
		    .type = PC_ENG_ERROR, .code = err.code ? err.code : PC_EIO, .message = err.msg};

		pc_log(PC_LOG_ERR, "engine.sock: %s", err.msg);
		if (r->type == PC_ENG_ERROR || pc_eng_reply_encode(&e, &b, &l, NULL) < 0)
			return;
	}
	reply_room(fd, l);
	if (send(fd, b, l, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		pc_log(PC_LOG_WARN, "engine.sock: reply of %zu bytes not sent: %s", l,
		       strerror(errno));
	free(b);
}

static void error_send(int fd, int code, const char *msg)
{
	struct pc_eng_reply r = {.type = PC_ENG_ERROR, .code = code, .message = msg};

	reply_send(fd, &r);
}

static void status_send(struct engine *e, int fd)
{
	struct pc_eng_reply r = {.type = PC_ENG_STATUS_REPLY, .check_running = e->chk.busy};
	struct policy *pol;
	char *json = NULL;

	if (control_status_json(e, &json) < 0) {
		error_send(fd, PC_ENOMEM, "out of memory");
		return;
	}
	pol = engine_policy_get(e);
	r.policy = pol ? policy_hash(pol) : "";
	r.json = json;
	reply_send(fd, &r);
	policy_unref(pol);
	free(json);
}

static void reload_send(struct engine *e, int fd)
{
	struct pc_eng_reply r = {.type = PC_ENG_RELOAD_REPLY};
	struct pc_err err = {0};
	uid_t uid = (uid_t)-1;
	struct policy *pol;
	char ebuf[1024];

	if (pc_unix_peercred(fd, NULL, &uid, NULL, &err) < 0 || uid != 0) {
		error_send(fd, PC_EPERM, "permission denied: only root may reload the policy");
		return;
	}
	if (engine_reload(e, &err) < 0) {
		error_send(fd, err.code ? err.code : PC_EINVAL,
			   pc_err_str(&err, ebuf, sizeof(ebuf)));
		return;
	}
	pol = engine_policy_get(e);
	r.policy = pol ? policy_hash(pol) : "";
	reply_send(fd, &r);
	policy_unref(pol);
	checkrun_request(e, "reload");
}

/* The admin's `portcullis check` proved the guard while the sandboxes are
 * cut off, after a change the engine is not told of (a sysctl, a tc
 * filter): the engine does not take the client's word for it, it runs
 * its own check now, which lifts the cut-off if it proves (a check asked
 * for after every change so far). Root only, as reload: it costs a check. */
static void recheck_send(struct engine *e, int fd)
{
	struct pc_eng_reply r = {.type = PC_ENG_RECHECK_REPLY};
	struct pc_err err = {0};
	uid_t uid = (uid_t)-1;
	struct policy *pol;

	if (pc_unix_peercred(fd, NULL, &uid, NULL, &err) < 0 || uid != 0) {
		error_send(fd, PC_EPERM, "permission denied: only root may ask for a check");
		return;
	}
	if (e->chk.fd < 0) {
		error_send(fd, PC_EIO,
			   "no check helper: the engine cannot check (restart portcullisd)");
		return;
	}
	if (e->cut.active) {
		e->cut.seq++; /* the running check may predate what the admin undid */
		pc_log(PC_LOG_NOTICE,
		       "bridge %s: still cut off; an admin's check asks for one of the "
		       "engine's: checking containment again",
		       e->cfg.bridge);
	}
	checkrun_request(e, "admin");
	pol = engine_policy_get(e);
	r.policy = pol ? policy_hash(pol) : "";
	reply_send(fd, &r);
	policy_unref(pol);
}

static void metrics_send(struct engine *e, int fd)
{
	/* Prometheus text (docs/operations.md, "Metrics"), carried as a string */
	struct pc_eng_reply r = {.type = PC_ENG_METRICS_REPLY};
	char *text = NULL;

	if (engine_metrics_text(e, &text) < 0) {
		error_send(fd, PC_ENOMEM, "out of memory");
		return;
	}
	r.text = text;
	reply_send(fd, &r);
	free(text);
}

/* One request, one reply, then the connection is closed. Called when the
 * client's socket is readable: nothing here waits for a client. Anyone may
 * connect (mode 0666): the request is checked as hostile bytes, and only
 * uid 0 may reload. */
static void control_client(struct engine *e, int fd)
{
	struct pc_err err = {0};
	enum pc_eng_type type;
	uint8_t req[64];
	char ebuf[700];
	ssize_t n;
	int rc;

	/* MSG_TRUNC: the record's real length, so an oversized one is refused */
	n = recv(fd, req, sizeof(req), MSG_DONTWAIT | MSG_TRUNC);
	if (n <= 0)
		return;
	if ((size_t)n > sizeof(req)) {
		error_send(fd, PC_EPARSE, "malformed request: too long");
		return;
	}
	rc = pc_eng_request_decode(req, (size_t)n, &type, &err);
	if (rc == PC_EUNSUPP) {
		pc_log(PC_LOG_WARN,
		       "engine.sock: a client speaks protocol version %u, this engine %u "
		       "(portcullis and portcullisd from different releases?)",
		       req[0], PC_ENG_VERSION);
		snprintf(ebuf, sizeof(ebuf),
			 "this engine speaks engine.sock protocol version %u, the client %u: "
			 "portcullis and portcullisd are from different releases",
			 PC_ENG_VERSION, req[0]);
		error_send(fd, PC_EUNSUPP, ebuf);
		return;
	}
	if (rc < 0) {
		snprintf(ebuf, sizeof(ebuf), "malformed request: %s", err.msg);
		error_send(fd, PC_EPARSE, ebuf);
		return;
	}
	switch (type) {
	case PC_ENG_STATUS:
		status_send(e, fd);
		break;
	case PC_ENG_RELOAD:
		reload_send(e, fd);
		break;
	case PC_ENG_RECHECK:
		recheck_send(e, fd);
		break;
	default:
		metrics_send(e, fd);
		break;
	}
}

/* Clients waiting for their request; each may take CLIENT_WAIT_MS, and
 * none of them holds up signals, links or the others. */
#define CLIENTS_MAX 8

struct ctl_client {
	int fd;
	uint64_t deadline;
};

static void clients_accept(struct engine *e, struct ctl_client *c)
{
	int fd;

	/* the listening socket is non-blocking: this stops at EAGAIN */
	while ((fd = accept4(e->ctl_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
		size_t i = 0;

		while (i < CLIENTS_MAX && c[i].fd >= 0)
			i++;
		if (i == CLIENTS_MAX) {
			close(fd); /* busy: the client sees the connection closed */
			continue;
		}
		c[i].fd = fd;
		c[i].deadline = pc_now_mono_ms() + CLIENT_WAIT_MS;
	}
}

/* fixed pollfds before the clients' */
#define NFIX 7

int control_loop(struct engine *e)
{
	uint64_t next_hk = pc_now_mono_ms() + HOUSEKEEPING_MS;
	/* logd's connection is watched from then: a hang-up leaves it
	 * unwatched for a second, so a logd that ends each session at once
	 * (refusing the engine's user) wakes the loop no more than the
	 * rounds did */
	uint64_t lc_watch_from = 0;
	struct ctl_client cl[CLIENTS_MAX];

	for (size_t i = 0; i < CLIENTS_MAX; i++)
		cl[i].fd = -1;
	for (;;) {
		struct pollfd p[NFIX + CLIENTS_MAX + HTTPM_POLLFDS] = {
		    {.fd = e->sig_fd, .events = POLLIN},
		    {.fd = e->ctl_fd, .events = POLLIN},
		    {.fd = e->link_fd, .events = POLLIN},
		    {.fd = e->chk.fd, .events = POLLIN}, /* -1 (no helper): ignored */
		    {.fd = e->nft_fd, .events = POLLIN},
		    {.fd = e->route_fd, .events = POLLIN},
		    /* logd's end wakes the loop at once (a hang-up needs no
		     * events): what is still owed is pledged again as soon as
		     * a logd takes connections (engine_dns_repledge), not up
		     * to a round later, which an engine killed in between
		     * would lose (docs/logd.md, "Pledges") */
		    {.fd = pc_now_mono_ms() >= lc_watch_from ? logc_fd(e->ctl_lc) : -1,
		     .events = 0},
		};
		struct pc_err err = {0};
		struct cutoff_events ev;
		uint64_t now;
		int n;

		bool waiting = false;

		for (size_t i = 0; i < CLIENTS_MAX; i++) {
			p[NFIX + i].fd = cl[i].fd; /* -1: ignored by poll */
			p[NFIX + i].events = POLLIN;
			waiting = waiting || cl[i].fd >= 0;
		}
		httpm_pollfds(e, &p[NFIX + CLIENTS_MAX]);
		waiting = waiting || httpm_waiting(e);
		/* logd away: try it again every 100 ms */
		waiting = waiting || (e->ctl_lc && logc_fd(e->ctl_lc) < 0);
		n = poll(p, NFIX + CLIENTS_MAX + HTTPM_POLLFDS, waiting ? 100 : 1000);
		if (n < 0 && errno != EINTR) {
			pc_log(PC_LOG_ERR, "control loop: %s", strerror(errno));
			return PC_EIO;
		}
		if (n > 0 && (p[0].revents & POLLIN)) {
			struct signalfd_siginfo si;

			while (read(e->sig_fd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGHUP) {
					pc_log(PC_LOG_NOTICE, "SIGHUP: reloading the policy");
					if (engine_reload(e, &err) == 0)
						checkrun_request(e, "reload");
				} else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
					pc_log(PC_LOG_NOTICE, "signal %u: stopping", si.ssi_signo);
					for (size_t i = 0; i < CLIENTS_MAX; i++)
						if (cl[i].fd >= 0)
							close(cl[i].fd);
					return 0;
				}
			}
		}
		if (n > 0 && (p[1].revents & POLLIN))
			clients_accept(e, cl);
		if (n > 0 && (p[2].revents & POLLIN) &&
		    cutoff_events_read(e, e->link_fd, &ev) > 0) {
			if (engine_ports_refresh(e, false, &err) < 0)
				pc_log(PC_LOG_ERR, "bridge ports: %s", err.msg);
			if (engine_local_refresh(e, &err) < 0)
				pc_log(PC_LOG_ERR, "gateway addresses (kept the previous set): %s",
				       err.msg);
			cutoff_enforce(e); /* cut off: a port up again goes down again */
			cutoff_events_act(e, &ev);
		}
		if (n > 0 && p[3].revents)
			checkrun_readable(e);
		/* the guard taken away: put back at once, before anything else */
		if (n > 0 && (p[4].revents & POLLIN) && nftwatch_drain(e->nft_fd, &e->nftw) > 0)
			engine_tables_restore(e); /* its check covers the other tables too */
		else if (e->nftw.other)
			engine_nft_other_changed(e);
		if (n > 0 && p[6].revents)
			lc_watch_from = pc_now_mono_ms() + 1000;
		if (n > 0 && (p[5].revents & POLLIN) &&
		    cutoff_events_read(e, e->route_fd, &ev) > 0) {
			engine_routing_restore(e);
			cutoff_events_act(e, &ev);
		}
		now = pc_now_mono_ms();
		httpm_handle(e, &p[NFIX + CLIENTS_MAX], now); /* HTTP /metrics, if on */
		for (size_t i = 0; i < CLIENTS_MAX; i++) {
			if (cl[i].fd < 0)
				continue;
			if (n > 0 && p[NFIX + i].revents)
				control_client(e, cl[i].fd);
			else if (now < cl[i].deadline)
				continue; /* still waiting for its request */
			close(cl[i].fd);
			cl[i].fd = -1;
		}
		engine_dns_repledge(e); /* a poll of one socket while logd lives */
		/* What no event announces (a sysctl, an iptables-legacy table,
		 * a relay reading a port) is found by a check that runs
		 * anyway: one when none was asked for in the interval */
		if (e->cfg.engine.recheck_s && e->chk.fd >= 0 && !e->chk.busy &&
		    now - e->chk.started_ms >= (uint64_t)e->cfg.engine.recheck_s * 1000)
			checkrun_request(e, "periodic");
		if (now >= next_hk) {
			engine_housekeeping(e);
			next_hk = now + HOUSEKEEPING_MS;
		}
	}
}

int control_open(struct engine *e, struct pc_err *err)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	/* Blocked before any thread starts, so they all inherit the mask and
	 * only the signalfd sees these signals. */
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		return pc_err_set(err, PC_EIO, "blocking signals");
	e->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (e->sig_fd < 0)
		return pc_err_errno(err, PC_EIO, "signalfd");
	signal(SIGPIPE, SIG_IGN);
	return 0;
}
