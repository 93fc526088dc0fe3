/* The engine's own containment check (checker_run) after each change of its
 * tables, against the policy the engine enforces: a helper process forked
 * before the privilege drop runs the check on request; the control thread
 * logs the result, records it with logd and shows it in `portcullis
 * status`. docs/engine.md, "Containment check". */
#include "engine/engine_int.h"

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

#define CHECK_LOG_MS 2000

/* The engine's side: the expectation for its loaded policy, in a sealed
 * memfd (*out, the caller closes it). */
static int expect_memfd(struct engine *e, int *out, struct pc_err *err)
{
	struct policy *pol = engine_policy_get(e);
	struct checker_expect ex;
	void *owned = NULL;
	uint8_t *buf = NULL;
	size_t len = 0, off = 0;
	int fd = -1, rc;

	rc = checker_expect_from_policy(&e->cfg, pol, NULL, &ex, &owned, err);
	if (rc < 0) {
		pc_err_prefix(err, "building the engine's ruleset for the policy in force: ");
		goto out;
	}
	rc = chkmsg_expect_encode(&ex, &buf, &len, err);
	if (rc < 0)
		goto out;
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

/* The expectation from the engine's memfd into in (chkmsg_expect_free). */
static int helper_expect_read(int xfd, struct chk_expect_in *in, struct pc_err *err)
{
	struct stat st;
	size_t off = 0, len;
	uint8_t *buf;
	int rc;

	if (fstat(xfd, &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > CHK_EXPECT_MAX)
		return pc_err_set(err, PC_EINVAL, "the engine's expectation: bad size");
	len = (size_t)st.st_size;
	buf = malloc(len);
	if (!buf)
		return pc_err_set(err, PC_ENOMEM, "the engine's expectation: out of memory");
	while (off < len) {
		ssize_t r = pread(xfd, buf + off, len - off, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			free(buf);
			return pc_err_set(err, PC_EIO, "the engine's expectation: short read");
		}
		off += (size_t)r;
	}
	rc = chkmsg_expect_decode(buf, len, in, err);
	free(buf);
	if (rc < 0)
		pc_err_prefix(err, "the engine's expectation is malformed: ");
	return rc;
}

/* Run the check against the engine's expectation; the answer (a result or
 * why it could not run) into buf. Its length; 0: none (cannot happen with
 * a CHK_RESULT_MAX buffer, and the engine then sees no answer). */
static size_t helper_answer(const struct config *cfg, int xfd, uint8_t *buf, size_t max)
{
	struct checker_result *r = NULL;
	struct pc_err err = {0};
	struct chk_expect_in *in = calloc(1, sizeof(*in));
	char eb[600];
	int n;

	if (!in)
		pc_err_set(&err, PC_ENOMEM, "out of memory");
	if (!in || helper_expect_read(xfd, in, &err) < 0 ||
	    checker_run(cfg, &in->ex, NULL, &r, &err) < 0) {
		chkmsg_expect_free(in);
		free(in);
		n = chkmsg_error_encode(pc_err_str(&err, eb, sizeof(eb)), buf, max, NULL);
		return n < 0 ? 0 : (size_t)n;
	}
	chkmsg_expect_free(in);
	free(in);
	n = chkmsg_result_encode(r, buf, max, NULL);
	checker_result_free(r);
	return n < 0 ? 0 : (size_t)n;
}

static void __attribute__((noreturn)) helper_main(int fd, const struct config *cfg, pid_t parent)
{
	/* CAP_NET_ADMIN: nftables dumps and tcx queries; CAP_SYS_ADMIN:
	 * enumerating netfilter BPF links (bpf() LINK_GET_NEXT_ID);
	 * CAP_DAC_READ_SEARCH: the root-only /proc/net/ip_tables_names and its
	 * ip6/arp siblings. */
	const uint64_t caps =
	    (1ULL << CAP_NET_ADMIN) | (1ULL << CAP_SYS_ADMIN) | (1ULL << CAP_DAC_READ_SEARCH);
	struct pc_err err = {0};
	sigset_t all;
	uint8_t *buf = malloc(CHK_RESULT_MAX);

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
		uint8_t req[CHK_REQ_MAX];
		char trigger[16];
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
		/* the one request there is, well formed, with its expectation;
		 * anything else ends the helper before it acts on it */
		if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || xfd < 0 ||
		    chkmsg_request_decode(req, (size_t)n, trigger, sizeof(trigger), &err) < 0) {
			pc_log(PC_LOG_ERR, "check helper: malformed request from the engine%s%s",
			       err.msg[0] ? ": " : "", err.msg);
			_exit(1);
		}
		len = helper_answer(cfg, xfd, buf, CHK_RESULT_MAX);
		close(xfd);
		if (len == 0 || send(fd, buf, len, MSG_NOSIGNAL) < 0)
			_exit(0);
	}
}

/* The request (its trigger) with the expectation's memfd. */
static ssize_t request_send(int fd, int xfd, const char *trigger)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	uint8_t req[CHK_REQ_MAX];
	int n = chkmsg_request_encode(trigger, req, sizeof(req), NULL);
	struct iovec iov = {req, n < 0 ? 0 : (size_t)n};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof(cb.b)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);

	if (n < 0)
		return -1;
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
	if (strcmp(trigger, "foreign") == 0)
		return "after another program changed another nftables table";
	if (strcmp(trigger, "foreignroute") == 0)
		return "after another program changed the routing rules or tables the blackhole "
		       "relies on";
	if (strcmp(trigger, "cutoff") == 0)
		return "after a routing, rule or link event while cut off";
	if (strcmp(trigger, "links") == 0)
		return "after a link on the sandbox bridge or one of its ports changed";
	if (strcmp(trigger, "periodic") == 0)
		return "periodically (engine.recheck_interval_s)";
	if (strcmp(trigger, "admin") == 0)
		return "at an admin's request (portcullis check)";
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
	cutoff_check_done(e, result); /* proven: a cut-off may end */
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
	sent = request_send(e->chk.fd, xfd, trigger);
	close(xfd);
	if (sent < 0) {
		helper_gone(e, "cannot be reached");
		return;
	}
	e->chk.busy = true;
	e->chk.started_ms = pc_now_mono_ms();
	e->chk.cut_seq = e->cut.seq; /* a change after this: this check cannot lift a cut-off */
}

void checkrun_repeat(struct engine *e, const char *trigger)
{
	if (e->chk.fd >= 0 && e->chk.busy && !e->chk.again) {
		/* the running check may have read the state before the event:
		 * the same check once more, under the name that says why it runs */
		e->chk.again = true;
		pc_strlcpy(e->chk.next_trigger, e->chk.trigger, sizeof(e->chk.next_trigger));
		return;
	}
	if (!e->chk.busy)
		checkrun_request(e, trigger);
	/* else one is queued already: it runs after this event */
}

/* The helper's answer, decoded strictly: anything malformed is a check
 * that could not run (fail closed: never "proven"). */
static void reply_handle(struct engine *e, const uint8_t *buf, size_t len)
{
	struct pc_err err = {0};
	struct chk_result res;
	const char *first = NULL, *text;
	char msg[700];

	if (chkmsg_result_decode(buf, len, &res, &err) < 0) {
		pc_log(PC_LOG_ERR, "containment check (%s): malformed answer from the helper: %s",
		       e->chk.trigger, err.msg);
		set_result(e, CHECKRUN_ERROR, pc_now_real_ms(), 0, "malformed answer");
		check_record(e, "malformed answer from the check helper");
		return;
	}
	if (res.type == CHK_ERROR) {
		pc_log(PC_LOG_ERR, "containment check (%s) could not run: %s", e->chk.trigger,
		       res.message);
		set_result(e, CHECKRUN_ERROR, pc_now_real_ms(), 0, res.message);
		check_record(e, res.message);
		chkmsg_result_free(&res);
		return;
	}
	if (res.status == CHECKER_PROVEN) {
		pc_log(PC_LOG_NOTICE, "containment check (%s): proven for bridge %s",
		       e->chk.trigger, e->cfg.bridge);
		set_result(e, res.status, res.time_ms, 0, NULL);
		snprintf(msg, sizeof(msg), "bridge %s: proven %s", e->cfg.bridge,
			 trigger_phrase(e->chk.trigger));
		check_record(e, msg);
		chkmsg_result_free(&res);
		return;
	}
	/* Not proven. The engine opens nothing either way (it refuses every
	 * flow it has not judged): it says so loudly, names each finding and
	 * keeps the result in status. */
	pc_log(PC_LOG_ERR,
	       "containment check (%s): NOT proven for bridge %s (%s, %u finding%s): "
	       "sandboxes must not be launched until it is",
	       e->chk.trigger, e->cfg.bridge, checkrun_result_name(res.status), res.findings,
	       res.findings == 1 ? "" : "s");
	text = res.texts;
	for (uint32_t i = 0; i < res.shown; i++) {
		if (!first)
			first = text;
		pc_log(PC_LOG_ERR, "containment check: %s", text);
		text += strlen(text) + 1;
	}
	if (res.shown < res.findings)
		pc_log(PC_LOG_ERR, "containment check: ... and %u more (portcullis check)",
		       res.findings - res.shown);
	set_result(e, res.status, res.time_ms, res.findings, first);
	snprintf(msg, sizeof(msg), "bridge %s: %s %s (%u finding%s): %s", e->cfg.bridge,
		 checkrun_result_name(res.status), trigger_phrase(e->chk.trigger), res.findings,
		 res.findings == 1 ? "" : "s", first ? first : "");
	check_record(e, msg);
	chkmsg_result_free(&res);
	cutoff_on_loss(e);
}

void checkrun_readable(struct engine *e)
{
	uint8_t *buf;
	ssize_t n;

	if (e->chk.fd < 0)
		return;
	buf = malloc(CHK_RESULT_MAX);
	if (!buf) {
		pc_log(PC_LOG_ERR, "containment check: out of memory reading the answer");
		return; /* the answer waits on the socket for the next round */
	}
	/* MSG_TRUNC: the record's real length, so an oversized answer is malformed */
	n = recv(e->chk.fd, buf, CHK_RESULT_MAX, MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		free(buf);
		return;
	}
	if (n <= 0 || !e->chk.busy) {
		free(buf);
		helper_gone(e, n <= 0 ? "exited" : "answered without a request");
		return;
	}
	e->chk.busy = false;
	if ((size_t)n > CHK_RESULT_MAX)
		n = 0; /* cut: decoded as malformed */
	reply_handle(e, buf, (size_t)n);
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
