/* Unit tests for the sender of a record (portcullis.sender): the policy of
 * which sender may write which record, the member in the JSON line, the
 * wire form that cannot carry it, and the daemon naming the sender from
 * the kernel's credentials of each message (a client that connects as root
 * and then drops privileges is what it is when it sends). */
#include "logd/logd_int.h"
#include "tests/unit/unit.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define VAULT_UID  12345 /* no user needs to exist: the server maps uids */
#define ENGINE_UID 12346

START_TEST(sender_policy_table)
{
	static const struct {
		enum logrec_sender s;
		enum logrec_action a;
		enum logrec_verdict v;
		bool may;
	} t[] = {
	    {LOGREC_SENDER_ENGINE, LOGREC_CONNECT, LOGREC_ALLOWED, true},
	    {LOGREC_SENDER_ENGINE, LOGREC_CONNECT, LOGREC_REFUSED, true},
	    {LOGREC_SENDER_ENGINE, LOGREC_DNS_QUERY, LOGREC_REFUSED, true},
	    {LOGREC_SENDER_ENGINE, LOGREC_DNS_LEARN, LOGREC_NONE, true},
	    {LOGREC_SENDER_ENGINE, LOGREC_POLICY_LOAD, LOGREC_ALLOWED, true},
	    {LOGREC_SENDER_ENGINE, LOGREC_CHECK, LOGREC_ALLOWED, true},
	    {LOGREC_SENDER_ENGINE, LOGREC_HTTP_REQUEST, LOGREC_ALLOWED, false},
	    {LOGREC_SENDER_ENGINE, LOGREC_EXFIL, LOGREC_REFUSED, false},
	    {LOGREC_SENDER_ENGINE, LOGREC_CERT_ISSUE, LOGREC_NONE, false},
	    {LOGREC_SENDER_ENGINE, LOGREC_SANDBOX, LOGREC_NONE, false},
	    {LOGREC_SENDER_ENGINE, LOGREC_SEGMENT, LOGREC_NONE, false},
	    {LOGREC_SENDER_VAULT, LOGREC_HTTP_REQUEST, LOGREC_ALLOWED, true},
	    {LOGREC_SENDER_VAULT, LOGREC_HTTP_REQUEST, LOGREC_NONE, true},
	    {LOGREC_SENDER_VAULT, LOGREC_EXFIL, LOGREC_REFUSED, true},
	    {LOGREC_SENDER_VAULT, LOGREC_CONNECT, LOGREC_REFUSED, true},
	    {LOGREC_SENDER_VAULT, LOGREC_CONNECT, LOGREC_ALLOWED, false},
	    {LOGREC_SENDER_VAULT, LOGREC_CONNECT, LOGREC_NONE, false},
	    {LOGREC_SENDER_VAULT, LOGREC_DNS_QUERY, LOGREC_ALLOWED, false},
	    {LOGREC_SENDER_VAULT, LOGREC_DNS_LEARN, LOGREC_NONE, false},
	    {LOGREC_SENDER_VAULT, LOGREC_POLICY_LOAD, LOGREC_ALLOWED, false},
	    {LOGREC_SENDER_VAULT, LOGREC_CHECK, LOGREC_ALLOWED, false},
	    {LOGREC_SENDER_VAULT, LOGREC_CERT_ISSUE, LOGREC_NONE, false},
	    {LOGREC_SENDER_VAULT, LOGREC_SANDBOX, LOGREC_NONE, false},
	    {LOGREC_SENDER_ROOT, LOGREC_SANDBOX, LOGREC_NONE, true},
	    {LOGREC_SENDER_ROOT, LOGREC_CERT_ISSUE, LOGREC_NONE, true},
	    {LOGREC_SENDER_ROOT, LOGREC_CONNECT, LOGREC_ALLOWED, true},
	    {LOGREC_SENDER_ROOT, LOGREC_POLICY_LOAD, LOGREC_ALLOWED, true},
	    {LOGREC_SENDER_ROOT, LOGREC_HTTP_REQUEST, LOGREC_ALLOWED, true},
	    {LOGREC_SENDER_ROOT, LOGREC_SEGMENT, LOGREC_NONE, false},
	    {LOGREC_SENDER_LOGD, LOGREC_SEGMENT, LOGREC_NONE, true},
	    {LOGREC_SENDER_LOGD, LOGREC_CONNECT, LOGREC_ALLOWED, false},
	    {LOGREC_SENDER_NONE, LOGREC_CONNECT, LOGREC_REFUSED, false},
	    {LOGREC_SENDER_NONE, LOGREC_SANDBOX, LOGREC_NONE, false},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct logrec r = {.action = t[i].a, .verdict = t[i].v};

		ck_assert_msg(logrec_sender_may(t[i].s, &r) == t[i].may, "%s %s %s: expected %s",
			      logrec_sender_name(t[i].s) ? logrec_sender_name(t[i].s) : "none",
			      logrec_action_name(t[i].a), logrec_verdict_name(t[i].v),
			      t[i].may ? "may" : "may not");
	}
	/* out of range: never */
	ck_assert(!logrec_sender_may(LOGREC_SENDER_MAX, &(struct logrec){.action = 1}));
	ck_assert(!logrec_sender_may(LOGREC_SENDER_ROOT, &(struct logrec){.action = 0}));
	ck_assert(
	    !logrec_sender_may(LOGREC_SENDER_ROOT, &(struct logrec){.action = LOGREC_ACTION_MAX}));
	/* pledges: the engine's allowed dns-query records, and only the
	 * engine redeems (docs/logd.md, "Pledges") */
	{
		struct logrec q = {
		    .action = LOGREC_DNS_QUERY, .verdict = LOGREC_ALLOWED, .pledge = 7};

		ck_assert(logrec_sender_may(LOGREC_SENDER_ENGINE, &q));
		ck_assert(!logrec_sender_may(LOGREC_SENDER_ROOT, &q));
		ck_assert(!logrec_sender_may(LOGREC_SENDER_VAULT, &q));
		q.verdict = LOGREC_REFUSED;
		ck_assert(!logrec_sender_may(LOGREC_SENDER_ENGINE, &q));
		q.verdict = LOGREC_ALLOWED;
		q.action = LOGREC_CONNECT;
		ck_assert(!logrec_sender_may(LOGREC_SENDER_ENGINE, &q));
		q.pledge = 0;
		q.redeems = 7;
		ck_assert(logrec_sender_may(LOGREC_SENDER_ENGINE, &q));
		q.action = LOGREC_HTTP_REQUEST;
		ck_assert(!logrec_sender_may(LOGREC_SENDER_VAULT, &q));
		q.action = LOGREC_CONNECT;
		ck_assert(!logrec_sender_may(LOGREC_SENDER_ROOT, &q));
	}
}
END_TEST

START_TEST(record_json_names_the_sender_logd_set)
{
	static const uint8_t prev[32];
	struct logrec r = {
	    .action = LOGREC_CONNECT, .verdict = LOGREC_ALLOWED, .sender = LOGREC_SENDER_ENGINE};
	char buf[LOGREC_JSON_MAX];
	uint8_t a[LOGWIRE_MAX], b[LOGWIRE_MAX];
	int n, m;

	n = logrec_json_format(&r, 7, 1764424933123ULL, prev, NULL, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_msg(strstr(buf, "\"observer.type\":\"firewall\",\"portcullis.sender\":"
				  "\"engine\",\"event.kind\"") != NULL,
		      "%s", buf);
	r.sender = LOGREC_SENDER_NONE;
	n = logrec_json_format(&r, 7, 1764424933123ULL, prev, NULL, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_ptr_null(strstr(buf, "portcullis.sender"));
	/* a log-segment record is logd's, whatever the struct says */
	r = (struct logrec){.action = LOGREC_SEGMENT, .sender = LOGREC_SENDER_VAULT};
	n = logrec_json_format(&r, 7, 1764424933123ULL, prev, NULL, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_ptr_nonnull(strstr(buf, "\"portcullis.sender\":\"logd\""));
	/* the wire form has no room for it: a client cannot send one */
	r = (struct logrec){.action = LOGREC_HTTP_REQUEST, .sender = LOGREC_SENDER_ENGINE};
	n = logrec_encode(&r, a, sizeof(a), NULL);
	r.sender = LOGREC_SENDER_NONE;
	m = logrec_encode(&r, b, sizeof(b), NULL);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(n, m);
	ck_assert(memcmp(a, b, (size_t)n) == 0);
	{
		struct logrec_decoded d;

		ck_assert_int_eq(logrec_decode(a, (size_t)n, &d, NULL), 0);
		ck_assert_int_eq(d.rec.sender, LOGREC_SENDER_NONE);
		logrec_decoded_free(&d);
	}
}
END_TEST

/* ---- the daemon, with clients of other uids ----------------------------- */

struct served {
	char dir[64], file[96], sock[96];
	struct note_signer *key;
	struct logw *w;
	int lfd;
	pthread_t th;
	struct logd_stats st;
	int rc;
};

static void *serve_thread(void *arg)
{
	struct served *s = arg;
	struct logd_server_conf sc = {
	    .allowed_uids = {0, VAULT_UID, ENGINE_UID},
	    .senders = {LOGREC_SENDER_ROOT, LOGREC_SENDER_VAULT, LOGREC_SENDER_ENGINE},
	    .n_allowed = 3,
	};

	s->rc = logd_serve(s->lfd, s->w, &sc, &s->st, NULL);
	return NULL;
}

/* One record from a child that connects as root, then becomes uid (the
 * way the engine connects before its privilege drop): 0 acknowledged, 1
 * the session ended, 2 the test failed. No allocation after the fork. */
static int send_as(const struct served *s, uid_t uid, enum logrec_action a, enum logrec_verdict v)
{
	struct logrec r = {.action = a, .verdict = v, .sandbox = "agent-1"};
	uint8_t buf[LOGWIRE_MAX], ack[LOGWIRE_ACK_LEN];
	int n = logrec_encode(&r, buf, sizeof(buf), NULL), status;
	pid_t pid;

	ck_assert_int_gt(n, 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = pc_unix_connect(s->sock, 0, NULL);
		ssize_t got;

		if (fd < 0 || setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
		    setresuid(uid, uid, uid) < 0 || send(fd, buf, (size_t)n, 0) != n)
			_exit(2);
		got = recv(fd, ack, sizeof(ack), 0);
		_exit(got == (ssize_t)sizeof(ack) ? 0 : got == 0 ? 1 : 2);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

START_TEST(daemon_names_the_sender_from_each_message)
{
	struct logw_conf wc = {
	    .cp_records = 1000, .cp_ms = 100000, .owner = (uid_t)-1, .group = (gid_t)-1};
	struct served s;
	char cmd[300], *text = NULL;
	size_t len = 0;
	sigset_t set;

	memset(&s, 0, sizeof(s));
	snprintf(s.dir, sizeof(s.dir), "/tmp/check_logd_sender.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(s.dir));
	snprintf(s.file, sizeof(s.file), "%s/log.jsonl", s.dir);
	snprintf(s.sock, sizeof(s.sock), "%s/logd.sock", s.dir);
	ck_assert_int_eq(note_signer_generate("test/portcullis-log", &s.key, NULL), 0);
	wc.file = s.file;
	ck_assert_int_eq(logw_open(&wc, s.key, NULL, &s.w, NULL), 0);
	s.lfd = pc_unix_listen(s.sock, 0600, (uid_t)-1, (gid_t)-1, NULL);
	ck_assert_int_ge(s.lfd, 0);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	ck_assert_int_eq(pthread_create(&s.th, NULL, serve_thread, &s), 0);

	ck_assert_int_eq(send_as(&s, ENGINE_UID, LOGREC_CONNECT, LOGREC_ALLOWED), 0);
	ck_assert_int_eq(send_as(&s, VAULT_UID, LOGREC_HTTP_REQUEST, LOGREC_ALLOWED), 0);
	/* connected as root, sent as the vault: the vault's, refused */
	ck_assert_int_eq(send_as(&s, VAULT_UID, LOGREC_CONNECT, LOGREC_ALLOWED), 1);
	ck_assert_int_eq(send_as(&s, VAULT_UID, LOGREC_DNS_QUERY, LOGREC_REFUSED), 1);
	ck_assert_int_eq(send_as(&s, ENGINE_UID, LOGREC_EXFIL, LOGREC_REFUSED), 1);
	/* a uid let in at connect time (root) but not a sender when it sends */
	ck_assert_int_eq(send_as(&s, 54321, LOGREC_CONNECT, LOGREC_REFUSED), 1);
	ck_assert_int_eq(send_as(&s, VAULT_UID, LOGREC_CONNECT, LOGREC_REFUSED), 0);

	kill(getpid(), SIGTERM);
	pthread_join(s.th, NULL);
	ck_assert_int_eq(s.rc, 0);
	ck_assert_int_eq(logw_close(s.w, NULL), 0);
	close(s.lfd);
	ck_assert_uint_eq(s.st.records, 3);
	ck_assert_uint_eq(s.st.refused_records, 4);
	ck_assert_uint_eq(s.st.malformed, 0);
	ck_assert_int_eq(pc_file_read(s.file, 1 << 20, &text, &len, NULL), 0);
	ck_assert_msg(strstr(text, "\"portcullis.sender\":\"engine\",\"event.kind\":\"event\","
				   "\"event.category\":[\"network\"],\"event.type\":["
				   "\"connection\",\"allowed\"]") != NULL,
		      "%s", text);
	ck_assert_ptr_nonnull(strstr(text,
				     "\"portcullis.sender\":\"vault\",\"event.kind\":\"event\","
				     "\"event.category\":[\"network\",\"web\"]"));
	ck_assert_ptr_nonnull(strstr(text,
				     "\"portcullis.sender\":\"vault\",\"event.kind\":\"event\","
				     "\"event.category\":[\"network\"],\"event.type\":["
				     "\"connection\",\"denied\"]"));
	ck_assert_ptr_null(strstr(text, "dns-query"));
	ck_assert_ptr_null(strstr(text, "exfiltration"));
	free(text);
	note_signer_free(s.key);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", s.dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* What the kernel hands logd with each message, on a real socket pair: a
 * message queued before the receiver asked for credentials arrives with
 * pid 0 and the overflow uid, which is "none" (the connection's
 * credentials stand), not a sender uid 65534 to refuse; one sent after
 * carries the sender's own uid. */
static enum logd_cred recv_cred(int fd, uid_t *uid, bool *has, size_t room)
{
	char buf[16];
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(64 * sizeof(int))];
	} ctl;
	struct iovec iov = {buf, sizeof(buf)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = room ? room : sizeof(ctl)};
	const char *why = NULL;
	enum logd_cred r;

	ck_assert_int_gt(recvmsg(fd, &mh, 0), 0);
	*has = CMSG_FIRSTHDR(&mh) != NULL;
	r = logd_msg_cred(&mh, uid, &why);
	ck_assert(r == LOGD_CRED_BAD ? why != NULL : why == NULL);
	return r;
}

START_TEST(credentials_the_kernel_did_not_attach_are_none)
{
	int sv[2];
	uid_t uid = 4242;
	bool has;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	ck_assert_int_eq(send(sv[0], "before", 6, 0), 6);
	ck_assert_int_eq(setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &(int){1}, sizeof(int)), 0);
	ck_assert_int_eq(send(sv[0], "after", 5, 0), 5);
	/* the kernel does report credentials for the first: pid 0, 65534 */
	ck_assert_int_eq(recv_cred(sv[1], &uid, &has, 0), LOGD_CRED_NONE);
	ck_assert(has);
	ck_assert_uint_eq(uid, 4242);
	ck_assert_int_eq(recv_cred(sv[1], &uid, &has, 0), LOGD_CRED_UID);
	ck_assert_uint_eq(uid, getuid());
	close(sv[0]);
	close(sv[1]);
}
END_TEST

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");

	ck_assert_ptr_nonnull(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* n descriptors of /dev/null with one message */
static void send_fds(int fd, int n)
{
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(64 * sizeof(int))];
	} ctl;
	struct iovec iov = {"rec", 3};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int))};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(nul, 0);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	for (int i = 0; i < n; i++)
		memcpy(CMSG_DATA(c) + (size_t)i * sizeof(int), &nul, sizeof(int));
	ck_assert_int_eq(sendmsg(fd, &mh, 0), 3);
	close(nul);
}

/* Descriptors with a message: closed, and the message refused, whether
 * they all fit (its credentials are there: refused all the same) or are
 * so many that the kernel truncates the control data (MSG_CTRUNC: the
 * credentials may be what was cut, and the connection's uid at connect
 * time — root, for the engine — must not stand for them). */
START_TEST(descriptors_are_closed_and_refused)
{
	static const size_t small = CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(4 * sizeof(int));
	int sv[2], before;
	uid_t uid = 4242;
	bool has;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	ck_assert_int_eq(setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &(int){1}, sizeof(int)), 0);
	before = open_fds();
	send_fds(sv[0], 3);
	send_fds(sv[0], 20); /* all fit the test's full buffer */
	send_fds(sv[0], 20); /* 4 fit the small one: truncated */
	send_fds(sv[0], 1);  /* no room for even one: truncated */
	ck_assert_int_eq(recv_cred(sv[1], &uid, &has, 0), LOGD_CRED_BAD);
	ck_assert_int_eq(open_fds(), before);
	ck_assert_int_eq(recv_cred(sv[1], &uid, &has, 0), LOGD_CRED_BAD);
	ck_assert_int_eq(open_fds(), before);
	ck_assert_int_eq(recv_cred(sv[1], &uid, &has, small), LOGD_CRED_BAD);
	ck_assert_int_eq(open_fds(), before);
	ck_assert_int_eq(
	    recv_cred(sv[1], &uid, &has, CMSG_SPACE(sizeof(struct ucred)) + sizeof(struct cmsghdr)),
	    LOGD_CRED_BAD);
	ck_assert_int_eq(open_fds(), before);
	ck_assert_uint_eq(uid, 4242); /* never set */
	/* and the next message, without any, is its sender's */
	ck_assert_int_eq(send(sv[0], "rec", 3, 0), 3);
	ck_assert_int_eq(recv_cred(sv[1], &uid, &has, 0), LOGD_CRED_UID);
	ck_assert_uint_eq(uid, getuid());
	/* no credentials at all (the option off): refused, not the peer's */
	ck_assert_int_eq(setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &(int){0}, sizeof(int)), 0);
	ck_assert_int_eq(send(sv[0], "rec", 3, 0), 3);
	ck_assert_int_eq(recv_cred(sv[1], &uid, &has, 0), LOGD_CRED_BAD);
	ck_assert(!has);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

PC_UNIT_SUITE("logd_sender", "core", 30, sender_policy_table, record_json_names_the_sender_logd_set,
	      daemon_names_the_sender_from_each_message,
	      credentials_the_kernel_did_not_attach_are_none, descriptors_are_closed_and_refused)
