/* The engine's own containment check (checker_run) after each change of its
 * tables: a helper process forked before the privilege drop runs the check
 * on request; the control thread logs the result, records it with logd and
 * shows it in `portcullis status`. docs/engine.md, "Containment check". */
#include "appliance/internal.h"
#include "checker/checker.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_REQ	"check"
#define CHECK_REPLY_MAX 65536 /* findings beyond this are counted, not sent */
#define CHECK_LOG_MS	2000

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
static size_t helper_answer(const struct pc_config *cfg, char *buf, size_t max)
{
	struct checker_result *r = NULL;
	struct pc_err err = {0};
	char eb[600];
	size_t len;
	int n;

	if (checker_run(cfg, NULL, NULL, &r, &err) < 0) {
		n = snprintf(buf, max, "error %s\n", pc_err_str(&err, eb, sizeof(eb)));
		return n < 0 ? 0 : (size_t)n < max ? (size_t)n : max - 1;
	}
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
		ssize_t n = recv(fd, req, sizeof(req), 0);
		size_t len;

		if (n == 0 || (n < 0 && errno != EINTR))
			_exit(0); /* the engine is gone or stopping */
		if (n < 0)
			continue;
		/* the one request there is; anything else ends the helper */
		if ((size_t)n != strlen(CHECK_REQ) || memcmp(req, CHECK_REQ, (size_t)n) != 0)
			_exit(1);
		len = helper_answer(cfg, buf, CHECK_REPLY_MAX);
		if (send(fd, buf, len, MSG_NOSIGNAL) < 0)
			_exit(0);
	}
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
	if (e->chk.fd < 0)
		return; /* no helper (-t, or it died: said so then) */
	if (e->chk.busy) {
		/* one more check after the running one: it may have read the
		 * state before this change */
		e->chk.again = true;
		pc_strlcpy(e->chk.next_trigger, trigger, sizeof(e->chk.next_trigger));
		return;
	}
	if (send(e->chk.fd, CHECK_REQ, strlen(CHECK_REQ), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		helper_gone(e, "cannot be reached");
		return;
	}
	e->chk.busy = true;
	e->chk.started_ms = pc_now_mono_ms();
	pc_strlcpy(e->chk.trigger, trigger, sizeof(e->chk.trigger));
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

/* s as a JSON string literal (quotes included). */
static int json_str(char **buf, size_t *len, const char *s)
{
	int rc = pc_buf_appendf(buf, len, "\"");

	for (; rc == 0 && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			rc = pc_buf_appendf(buf, len, "\\%c", c);
		else if (c < 0x20)
			rc = pc_buf_appendf(buf, len, "\\u%04x", c);
		else
			rc = pc_buf_appendf(buf, len, "%c", c);
	}
	return rc ? rc : pc_buf_appendf(buf, len, "\"");
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
		rc = rc ? rc : json_str(buf, len, e->chk.first);
	}
	return rc ? rc : pc_buf_appendf(buf, len, "}");
}
