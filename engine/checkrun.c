/* The engine's own containment check (checker_run) after each change of its
 * tables, against the policy the engine enforces: a helper process forked
 * before the privilege drop runs the check on request; the control thread
 * logs the result, records it with logd and shows it in `portcullis
 * status`. docs/engine.md, "Containment check". */
#include "engine/engine_int.h"
#include "checker/checker.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_REQ	"check"
#define CHECK_REPLY_MAX 65536 /* findings beyond this are counted, not sent */
#define CHECK_LOG_MS	2000
#define EXPECT_MAX	(256u << 20) /* a sane bound on the expectation's size */
#define EXPECT_PORTS	64

/* ---- the expectation: what the engine's loaded policy makes ---------------
 *
 * The engine builds it (checker_expect_from_policy with the policy in
 * force, never the files in rules.d, which an admin may be editing before a
 * reload) and hands it to the helper in a memfd sent with each request:
 *   table NAME / marks MASK DECIDED / queues LO HI / listen N P... /
 *   brnf N / port NAME (each match.port) / canon LEN, then LEN bytes. */

static int expect_encode(const struct checker_expect *ex, char **buf, size_t *len)
{
	int rc = pc_buf_appendf(buf, len, "table %s\nmarks %u %u\nqueues %u %u\nlisten %zu",
				ex->table, ex->mark_mask, ex->mark_decided, ex->queue_lo,
				ex->queue_hi, ex->n_listen);

	for (size_t i = 0; rc == 0 && i < ex->n_listen; i++)
		rc = pc_buf_appendf(buf, len, " %u", ex->listen_ports[i]);
	if (rc == 0)
		rc = pc_buf_appendf(buf, len, "\nbrnf %d\n", ex->br_nf_call);
	for (size_t i = 0; rc == 0 && i < ex->n_policy_ports; i++)
		rc = pc_buf_appendf(buf, len, "port %s\n", ex->policy_ports[i]);
	if (rc == 0)
		rc = pc_buf_appendf(buf, len, "canon %zu\n", ex->canon ? ex->canon_len : 0);
	/* the canon may be large: appended as bytes, not through a format */
	if (rc == 0 && ex->canon && ex->canon_len) {
		char *nb = realloc(*buf, *len + ex->canon_len + 1);

		if (!nb)
			return PC_ENOMEM;
		memcpy(nb + *len, ex->canon, ex->canon_len);
		*len += ex->canon_len;
		nb[*len] = '\0';
		*buf = nb;
	}
	return rc;
}

/* The expectation the helper decoded; ex borrows names and text. */
struct expect_in {
	struct checker_expect ex;
	char names[EXPECT_PORTS][PC_IFNAMSIZ];
	const char *ports[EXPECT_PORTS];
	char *text; /* the memfd's bytes, NUL-terminated */
};

/* Parse text (NUL-terminated, len bytes) into in. 0 or -1 (malformed). */
static int expect_decode(char *text, size_t len, struct expect_in *in)
{
	struct checker_expect *ex = &in->ex;
	char *p = text, *nl;
	unsigned a, b;
	size_t n, canon_len;
	int k;

	memset(ex, 0, sizeof(*ex));
	if (sscanf(p, "table %63s\nmarks %u %u\nqueues %u %u\nlisten %zu%n", ex->table,
		   &ex->mark_mask, &ex->mark_decided, &a, &b, &n, &k) != 6 ||
	    a > 65535 || b > 65535 || n > sizeof(ex->listen_ports) / sizeof(ex->listen_ports[0]))
		return -1;
	ex->queue_lo = (uint16_t)a;
	ex->queue_hi = (uint16_t)b;
	p += k;
	for (size_t i = 0; i < n; i++) {
		if (sscanf(p, " %u%n", &a, &k) != 1 || a > 65535)
			return -1;
		ex->listen_ports[i] = (uint16_t)a;
		p += k;
	}
	ex->n_listen = n;
	if (sscanf(p, "\nbrnf %d%n", &ex->br_nf_call, &k) != 1 || p[k] != '\n')
		return -1;
	p += k + 1;
	while (strncmp(p, "port ", 5) == 0) {
		size_t i = ex->n_policy_ports, nlen;

		p += 5;
		nl = strchr(p, '\n');
		nlen = nl ? (size_t)(nl - p) : 0;
		if (!nlen || nlen >= PC_IFNAMSIZ || i >= EXPECT_PORTS)
			return -1;
		memcpy(in->names[i], p, nlen);
		in->names[i][nlen] = '\0';
		in->ports[i] = in->names[i];
		ex->n_policy_ports++;
		p = nl + 1;
	}
	ex->policy_ports = in->ports;
	if (sscanf(p, "canon %zu%n", &canon_len, &k) != 1 || p[k] != '\n')
		return -1;
	p += k + 1;
	if (canon_len != len - (size_t)(p - text))
		return -1;
	ex->canon = canon_len ? p : NULL;
	ex->canon_len = canon_len;
	return 0;
}

/* The engine's side: the expectation for its loaded policy, in a sealed
 * memfd (*out, the caller closes it). */
static int expect_memfd(struct engine *e, int *out, struct pc_err *err)
{
	struct policy *pol = engine_policy_get(e);
	struct checker_expect ex;
	void *owned = NULL;
	char *buf = NULL;
	size_t len = 0, off = 0;
	int fd = -1, rc;

	rc = checker_expect_from_policy(&e->cfg, pol, NULL, &ex, &owned, err);
	if (rc < 0) {
		pc_err_prefix(err, "building the engine's ruleset for the policy in force: ");
		goto out;
	}
	if (expect_encode(&ex, &buf, &len) < 0) {
		rc = pc_err_set(err, PC_ENOMEM, "out of memory");
		goto out;
	}
	fd = memfd_create("portcullis-check", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		rc = pc_err_errno(err, PC_EIO, "memfd");
		goto out;
	}
	while (off < len) {
		ssize_t w = write(fd, buf + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = pc_err_errno(err, PC_EIO, "memfd write");
			goto out;
		}
		off += (size_t)w;
	}
	/* what the helper reads is what was written here */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		rc = pc_err_errno(err, PC_EIO, "memfd seal");
		goto out;
	}
	*out = fd;
	fd = -1;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	checker_expect_free(owned);
	policy_unref(pol);
	return rc;
}

/* ---- the helper: a fixed request, one answer ------------------------------ */

/* Close every inherited descriptor but stdio and keep: the helper must not
 * hold the engine's queues, sockets or log connections. */
static void helper_close_fds(int keep)
{
	if (close_range(3, (unsigned)keep - 1, 0) == 0 &&
	    close_range((unsigned)keep + 1, ~0U, 0) == 0)
		return;
	for (int fd = 3; fd < 65536; fd++)
		if (fd != keep)
			close(fd);
}

/* The reply: "<status> <time_ms> <findings>\n" then one line per finding,
 * "exit <text>" or "doubt <text>" (newlines in text become spaces); or
 * "error <why>" when the state could not be read. */
/* The expectation from the engine's memfd into in (in->text to free). */
static int helper_expect_read(int xfd, struct expect_in *in, struct pc_err *err)
{
	struct stat st;
	size_t off = 0, len;

	if (fstat(xfd, &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > EXPECT_MAX)
		return pc_err_set(err, PC_EINVAL, "the engine's expectation: bad size");
	len = (size_t)st.st_size;
	in->text = malloc(len + 1);
	if (!in->text)
		return pc_err_set(err, PC_ENOMEM, "the engine's expectation: out of memory");
	while (off < len) {
		ssize_t r = pread(xfd, in->text + off, len - off, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return pc_err_set(err, PC_EIO, "the engine's expectation: short read");
		off += (size_t)r;
	}
	in->text[len] = '\0';
	if (expect_decode(in->text, len, in) < 0)
		return pc_err_set(err, PC_EINVAL, "the engine's expectation: malformed");
	return 0;
}

static size_t helper_answer(const struct pc_config *cfg, int xfd, char *buf, size_t max)
{
	struct checker_result *r = NULL;
	struct pc_err err = {0};
	struct expect_in *in = calloc(1, sizeof(*in));
	char eb[600];
	size_t len;
	int n;

	if (!in)
		pc_err_set(&err, PC_ENOMEM, "out of memory");
	if (!in || helper_expect_read(xfd, in, &err) < 0 ||
	    checker_run(cfg, &in->ex, NULL, &r, &err) < 0) {
		if (in)
			free(in->text);
		free(in);
		n = snprintf(buf, max, "error %s\n", pc_err_str(&err, eb, sizeof(eb)));
		return n < 0 ? 0 : (size_t)n < max ? (size_t)n : max - 1;
	}
	free(in->text);
	free(in);
	n = snprintf(buf, max, "%d %llu %zu\n", (int)r->status, (unsigned long long)r->time_ms,
		     r->n_findings);
	len = n < 0 ? 0 : (size_t)n;
	for (size_t i = 0; i < r->n_findings; i++) {
		const struct checker_finding *f = &r->findings[i];
		size_t start = len;

		n = snprintf(buf + len, max - len, "%s %s\n",
			     f->kind == CHECKER_EXIT ? "exit" : "doubt", f->text ? f->text : "");
		if (n < 0 || (size_t)n >= max - len)
			break; /* the count says how many there were */
		len += (size_t)n;
		for (size_t k = start; k + 1 < len; k++)
			if (buf[k] == '\n' || buf[k] == '\r')
				buf[k] = ' ';
	}
	checker_result_free(r);
	return len;
}

static void __attribute__((noreturn)) helper_main(int fd, const struct pc_config *cfg, pid_t parent)
{
	/* CAP_NET_ADMIN: nftables dumps and tcx queries; CAP_SYS_ADMIN:
	 * enumerating netfilter BPF links (bpf() LINK_GET_NEXT_ID);
	 * CAP_DAC_READ_SEARCH: the root-only /proc/net/ip_tables_names and its
	 * ip6/arp siblings. */
	const uint64_t caps =
	    (1ULL << CAP_NET_ADMIN) | (1ULL << CAP_SYS_ADMIN) | (1ULL << CAP_DAC_READ_SEARCH);
	struct pc_err err = {0};
	sigset_t all;
	char *buf = malloc(CHECK_REPLY_MAX);

	helper_close_fds(fd);
	/* the engine blocked these for its signalfd: the helper just stops */
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	prctl(PR_SET_NAME, "portcullisd-chk", 0, 0, 0);
	if (!buf || pc_privdrop(cfg->engine.user, caps, &err) < 0) {
		pc_log(PC_LOG_ERR, "check helper: %s", buf ? err.msg : "out of memory");
		_exit(1);
	}
	/* after the drop (a credential change clears it): die with the engine */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (getppid() != parent)
		_exit(0);
	for (;;) {
		char req[16];
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int))];
		} cb;
		struct iovec iov = {req, sizeof(req)};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = cb.b,
				   .msg_controllen = sizeof(cb.b)};
		struct cmsghdr *c;
		ssize_t n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
		size_t len;
		int xfd = -1;

		if (n == 0 || (n < 0 && errno != EINTR))
			_exit(0); /* the engine is gone or stopping */
		if (n < 0)
			continue;
		c = CMSG_FIRSTHDR(&m);
		if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&xfd, CMSG_DATA(c), sizeof(int));
		/* the one request there is, with its expectation; anything
		 * else ends the helper */
		if ((size_t)n != strlen(CHECK_REQ) || memcmp(req, CHECK_REQ, (size_t)n) != 0 ||
		    xfd < 0 || (m.msg_flags & MSG_CTRUNC))
			_exit(1);
		len = helper_answer(cfg, xfd, buf, CHECK_REPLY_MAX);
		close(xfd);
		if (send(fd, buf, len, MSG_NOSIGNAL) < 0)
			_exit(0);
	}
}

/* The request with the expectation's memfd. */
static ssize_t request_send(int fd, int xfd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	struct iovec iov = {(void *)CHECK_REQ, strlen(CHECK_REQ)};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof(cb.b)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	memset(cb.b, 0, sizeof(cb.b));
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &xfd, sizeof(int));
	return sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int checkrun_start(struct engine *e, struct pc_err *err)
{
	int sv[2];
	pid_t parent = getpid(), pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return pc_err_errno(err, PC_EIO, "check helper: socketpair");
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return pc_err_errno(err, PC_EIO, "check helper: fork");
	}
	if (pid == 0) {
		close(sv[0]);
		helper_main(sv[1], &e->cfg, parent);
	}
	close(sv[1]);
	if (fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK) < 0) {
		close(sv[0]);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return pc_err_errno(err, PC_EIO, "check helper: socket");
	}
	e->chk.fd = sv[0];
	e->chk.pid = pid;
	return 0;
}

void checkrun_stop(struct engine *e)
{
	if (e->chk.fd >= 0)
		close(e->chk.fd);
	e->chk.fd = -1;
	if (e->chk.pid > 0) {
		kill(e->chk.pid, SIGKILL); /* it may be inside a check */
		waitpid(e->chk.pid, NULL, 0);
	}
	e->chk.pid = 0;
}

/* ---- the engine's side (control thread only) ----------------------------- */

const char *checkrun_result_name(int result)
{
	switch (result) {
	case CHECKER_PROVEN:
		return "proven";
	case CHECKER_EXIT_FOUND:
		return "exit found";
	case CHECKER_UNPROVEN:
		return "unproven";
	case CHECKRUN_ERROR:
		return "error";
	default:
		return "none";
	}
}

/* "after a reload" for the record's message. */
static const char *trigger_phrase(const char *trigger)
{
	if (strcmp(trigger, "start") == 0)
		return "at start";
	if (strcmp(trigger, "reload") == 0)
		return "after a reload";
	if (strcmp(trigger, "ports") == 0)
		return "after a port set change";
	if (strcmp(trigger, "nftables") == 0)
		return "after another program changed the tables (reinstalled)";
	if (strcmp(trigger, "routing") == 0)
		return "after routing rules went missing (reinstalled)";
	return trigger;
}

static void set_result(struct engine *e, int result, uint64_t time_ms, size_t findings,
		       const char *first)
{
	e->chk.result = result;
	e->chk.time_ms = time_ms;
	e->chk.findings = findings;
	pc_strlcpy(e->chk.first, first ? first : "", sizeof(e->chk.first));
	pc_strlcpy(e->chk.done_trigger, e->chk.trigger, sizeof(e->chk.done_trigger));
	e->chk.runs++;
}

/* The check record: outcome success when proven (docs/logd.md). Best
 * effort, as the policy records: the result is in the journal and status
 * whether or not logd took it. */
static void check_record(struct engine *e, const char *message)
{
	struct policy *pol = engine_policy_get(e);
	struct logrec r = {.action = LOGREC_CHECK};
	struct pc_err err = {0};

	r.verdict = e->chk.result == CHECKER_PROVEN ? LOGREC_ALLOWED : LOGREC_REFUSED;
	r.policy = pol ? policy_hash(pol) : NULL;
	r.reason = e->chk.result == CHECKER_PROVEN   ? "containment proven"
		   : e->chk.result == CHECKRUN_ERROR ? "containment check could not run"
						     : "containment not proven";
	r.message = message;
	if (e->ctl_lc && logc_send_sync(e->ctl_lc, &r, CHECK_LOG_MS, &err) < 0)
		pc_log(PC_LOG_WARN, "containment check not logged: %s", err.msg);
	policy_unref(pol);
}

static void helper_gone(struct engine *e, const char *why)
{
	pc_log(PC_LOG_ERR,
	       "containment check helper %s: the engine no longer checks its tables "
	       "(traffic is still refused unless judged; restart portcullisd)",
	       why);
	checkrun_stop(e);
	e->chk.busy = e->chk.again = false;
	set_result(e, CHECKRUN_ERROR, pc_now_real_ms(), 0, "the check helper is gone");
	check_record(e, "the check helper is gone");
}

void checkrun_request(struct engine *e, const char *trigger)
{
	struct pc_err err = {0};
	char eb[600];
	ssize_t sent;
	int xfd = -1;

	if (e->chk.fd < 0)
		return; /* no helper (-t, or it died: said so then) */
	if (e->chk.busy) {
		/* one more check after the running one: it may have read the
		 * state before this change */
		e->chk.again = true;
		pc_strlcpy(e->chk.next_trigger, trigger, sizeof(e->chk.next_trigger));
		return;
	}
	pc_strlcpy(e->chk.trigger, trigger, sizeof(e->chk.trigger));
	if (expect_memfd(e, &xfd, &err) < 0) {
		/* nothing to compare the tables with: a failed check, said so */
		pc_err_str(&err, eb, sizeof(eb));
		pc_log(PC_LOG_ERR, "containment check (%s) could not run: %s", trigger, eb);
		set_result(e, CHECKRUN_ERROR, pc_now_real_ms(), 0, eb);
		check_record(e, eb);
		return;
	}
	sent = request_send(e->chk.fd, xfd);
	close(xfd);
	if (sent < 0) {
		helper_gone(e, "cannot be reached");
		return;
	}
	e->chk.busy = true;
	e->chk.started_ms = pc_now_mono_ms();
}

/* One finding line of the reply: "exit text" / "doubt text" -> text. */
static const char *finding_text(const char *line)
{
	if (strncmp(line, "exit ", 5) == 0)
		return line + 5;
	if (strncmp(line, "doubt ", 6) == 0)
		return line + 6;
	return NULL;
}

static void reply_handle(struct engine *e, char *buf)
{
	char *line, *save = NULL, msg[700];
	int status = -1, nf = 0;
	unsigned long long t = 0;
	size_t findings = 0, shown = 0;
	const char *first = NULL;

	line = strtok_r(buf, "\n", &save);
	if (line && strncmp(line, "error ", 6) == 0) {
		pc_log(PC_LOG_ERR, "containment check (%s) could not run: %s", e->chk.trigger,
		       line + 6);
		set_result(e, CHECKRUN_ERROR, pc_now_real_ms(), 0, line + 6);
		check_record(e, line + 6);
		return;
	}
	if (!line || sscanf(line, "%d %llu %zu%n", &status, &t, &findings, &nf) != 3 ||
	    line[nf] != '\0' || status < CHECKER_PROVEN || status > CHECKER_UNPROVEN) {
		pc_log(PC_LOG_ERR, "containment check (%s): malformed answer from the helper",
		       e->chk.trigger);
		set_result(e, CHECKRUN_ERROR, pc_now_real_ms(), 0, "malformed answer");
		check_record(e, "malformed answer from the check helper");
		return;
	}
	if (status == CHECKER_PROVEN) {
		pc_log(PC_LOG_NOTICE, "containment check (%s): proven for bridge %s",
		       e->chk.trigger, e->cfg.bridge);
		set_result(e, status, t, 0, NULL);
		snprintf(msg, sizeof(msg), "bridge %s: proven %s", e->cfg.bridge,
			 trigger_phrase(e->chk.trigger));
		check_record(e, msg);
		return;
	}
	/* Not proven. The engine opens nothing either way (it refuses every
	 * flow it has not judged): it says so loudly, names each finding and
	 * keeps the result in status. */
	pc_log(PC_LOG_ERR,
	       "containment check (%s): NOT proven for bridge %s (%s, %zu finding%s): "
	       "sandboxes must not be launched until it is",
	       e->chk.trigger, e->cfg.bridge, checkrun_result_name(status), findings,
	       findings == 1 ? "" : "s");
	while ((line = strtok_r(NULL, "\n", &save))) {
		const char *text = finding_text(line);

		if (!text)
			continue;
		if (!first)
			first = text;
		pc_log(PC_LOG_ERR, "containment check: %s", text);
		shown++;
	}
	if (shown < findings)
		pc_log(PC_LOG_ERR, "containment check: ... and %zu more (portcullis check)",
		       findings - shown);
	set_result(e, status, t, findings, first);
	snprintf(msg, sizeof(msg), "bridge %s: %s %s (%zu finding%s): %s", e->cfg.bridge,
		 checkrun_result_name(status), trigger_phrase(e->chk.trigger), findings,
		 findings == 1 ? "" : "s", first ? first : "");
	check_record(e, msg);
}

void checkrun_readable(struct engine *e)
{
	char *buf;
	ssize_t n;

	if (e->chk.fd < 0)
		return;
	buf = malloc(CHECK_REPLY_MAX + 1);
	if (!buf) {
		pc_log(PC_LOG_ERR, "containment check: out of memory reading the answer");
		return; /* the answer waits on the socket for the next round */
	}
	n = recv(e->chk.fd, buf, CHECK_REPLY_MAX, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		free(buf);
		return;
	}
	if (n <= 0 || !e->chk.busy) {
		free(buf);
		helper_gone(e, n <= 0 ? "exited" : "answered without a request");
		return;
	}
	buf[n] = '\0';
	e->chk.busy = false;
	reply_handle(e, buf);
	free(buf);
	if (e->chk.again) {
		e->chk.again = false;
		checkrun_request(e, e->chk.next_trigger);
	}
}

int checkrun_status_json(const struct engine *e, char **buf, size_t *len)
{
	char t[40];
	int rc;

	rc = pc_buf_appendf(buf, len, ",\"check\":{\"result\":\"%s\",\"runs\":%llu,\"running\":%s",
			    checkrun_result_name(e->chk.result), (unsigned long long)e->chk.runs,
			    e->chk.busy ? "true" : "false");
	if (rc == 0 && e->chk.runs)
		rc =
		    pc_buf_appendf(buf, len, ",\"time\":\"%s\",\"trigger\":\"%s\",\"findings\":%zu",
				   pc_time_rfc3339(e->chk.time_ms, t, sizeof(t)),
				   e->chk.done_trigger, e->chk.findings);
	if (rc == 0 && e->chk.first[0]) {
		rc = pc_buf_appendf(buf, len, ",\"first\":");
		rc = rc ? rc : pc_buf_append_json(buf, len, e->chk.first);
	}
	return rc ? rc : pc_buf_appendf(buf, len, "}");
}
