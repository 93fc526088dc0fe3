/* The record ring (docs/logd.md "The record ring"): records of a client
 * with a ring reach the file and are acknowledged through the shared page;
 * logd treats the ring as hostile (bounds every index and length, refuses
 * an unsealed memfd and one registered by root, ends the session on any
 * violation and keeps the records before it); the crash semantics: a
 * client killed leaves its published records in the log and never a
 * partial one, logd gone makes every unacknowledged record fail at once
 * and the next send makes a new ring, a full ring refuses after
 * LOGC_SEND_WAIT_MS and never passes. */
#include "logd/logd_int.h"
#include "tests/unit/unit.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define ENGINE_UID 12346 /* no user needs to exist: the server maps uids */

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
	    .allowed_uids = {0, ENGINE_UID},
	    .senders = {LOGREC_SENDER_ROOT, LOGREC_SENDER_ENGINE},
	    .n_allowed = 2,
	};

	s->rc = logd_serve(s->lfd, s->w, &sc, &s->st, NULL);
	return NULL;
}

static void serve_start(struct served *s)
{
	struct logw_conf wc = {
	    .cp_records = 1000, .cp_ms = 100000, .owner = (uid_t)-1, .group = (gid_t)-1};
	sigset_t set;

	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/check_logd_ring.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(s->dir));
	ck_assert_int_eq(chmod(s->dir, 0755), 0); /* the engine's uid connects */
	snprintf(s->file, sizeof(s->file), "%s/log.jsonl", s->dir);
	snprintf(s->sock, sizeof(s->sock), "%s/logd.sock", s->dir);
	ck_assert_int_eq(note_signer_generate("test/portcullis-log", &s->key, NULL), 0);
	wc.file = s->file;
	ck_assert_int_eq(logw_open(&wc, s->key, NULL, &s->w, NULL), 0);
	s->lfd = pc_unix_listen(s->sock, 0666, (uid_t)-1, (gid_t)-1, NULL);
	ck_assert_int_ge(s->lfd, 0);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	ck_assert_int_eq(pthread_create(&s->th, NULL, serve_thread, s), 0);
}

/* Stop the server; the file must verify. The text of the log (freed by
 * the caller). */
static char *serve_stop(struct served *s)
{
	char cmd[120], *text = NULL;
	size_t len = 0;
	struct logv *v;
	struct pc_err err;

	kill(getpid(), SIGTERM);
	pthread_join(s->th, NULL);
	ck_assert_int_eq(s->rc, 0);
	ck_assert_int_eq(logw_close(s->w, NULL), 0);
	close(s->lfd);
	ck_assert_int_eq(logv_new(note_signer_verifier(s->key), &v, NULL), 0);
	ck_assert_msg(logv_file(v, s->file, 0, &err) == 0, "%s", err.msg);
	logv_free(v);
	ck_assert_int_eq(pc_file_read(s->file, 16 << 20, &text, &len, NULL), 0);
	note_signer_free(s->key);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", s->dir);
	ck_assert_int_eq(system(cmd), 0);
	return text;
}

static size_t count(const char *text, const char *needle)
{
	size_t n = 0;

	for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static void become_engine(void)
{
	if (setgroups(0, NULL) < 0 || setresgid(ENGINE_UID, ENGINE_UID, ENGINE_UID) < 0 ||
	    setresuid(ENGINE_UID, ENGINE_UID, ENGINE_UID) < 0)
		_exit(90);
}

/* A logd served in this process and a child to speak to it, still root
 * (to open its clients before it drops, as the engine does): 0 in the
 * child, the child's pid here. */
static pid_t served_child(struct served *s)
{
	pid_t pid;

	serve_start(s);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	return pid;
}

/* ... the child as the engine's user from the start. */
static pid_t served_engine_child(struct served *s)
{
	pid_t pid = served_child(s);

	if (pid == 0)
		become_engine();
	return pid;
}

static int child_status(pid_t pid)
{
	int status;

	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A ring made by hand, as a hostile or a killed client leaves it: the
 * sealed memfd (seals: 0 for none), registered on a fresh connection,
 * alone or with two bells of the kind asked for. */
struct rawring {
	int fd;
	struct logring_hdr *h;
	uint8_t *data;
	uint64_t prod;
	int bell_out, bell_in; /* -1: bells on the socket */
};

enum bells { B_NONE, B_EVENTFD, B_PIPE, B_TIMERFD, B_SOCKET };

static int raw_open_bells(const char *sock, struct rawring *r, int seals, enum bells bells)
{
	uint8_t msg[LOGRING_REG_LEN];
	union {
		struct cmsghdr align;
		uint8_t b[CMSG_SPACE(LOGRING_FDS * sizeof(int))];
	} ctl;
	int fds[LOGRING_FDS] = {-1, -1, -1}, p[2];
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof(msg)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = sizeof(ctl.b)};
	struct cmsghdr *c;
	int mfd = memfd_create("test-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *map;

	memset(r, 0, sizeof(*r));
	r->bell_out = r->bell_in = -1;
	switch (bells) {
	case B_NONE:
		break;
	case B_EVENTFD:
		fds[1] = eventfd(0, EFD_NONBLOCK);
		fds[2] = eventfd(0, EFD_NONBLOCK);
		break;
	case B_PIPE: /* a descriptor logd could block on, or write where told */
		if (pipe(p) < 0)
			return -1;
		fds[1] = p[0];
		fds[2] = p[1];
		break;
	case B_TIMERFD: /* an anonymous inode, but not an eventfd */
		fds[1] = timerfd_create(CLOCK_MONOTONIC, 0);
		fds[2] = eventfd(0, EFD_NONBLOCK);
		break;
	case B_SOCKET: /* takes eight bytes as an eventfd does */
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, p) < 0)
			return -1;
		fds[1] = eventfd(0, EFD_NONBLOCK);
		fds[2] = p[0];
		break;
	}
	if (bells != B_NONE && (fds[1] < 0 || fds[2] < 0))
		return -1;
	r->bell_out = fds[1];
	r->bell_in = fds[2];
	r->fd = pc_unix_connect(sock, 0, NULL);
	if (r->fd < 0 || mfd < 0 || ftruncate(mfd, LOGRING_SIZE) < 0 ||
	    (seals && fcntl(mfd, F_ADD_SEALS, seals) < 0))
		return -1;
	map = mmap(NULL, LOGRING_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (map == MAP_FAILED)
		return -1;
	r->h = map;
	r->data = (uint8_t *)map + LOGRING_HDR;
	logwire_ring_encode(msg, sizeof(msg));
	memset(&ctl, 0, sizeof(ctl));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	fds[0] = mfd;
	c->cmsg_len = CMSG_LEN((bells == B_NONE ? 1 : LOGRING_FDS) * sizeof(int));
	mh.msg_controllen = CMSG_SPACE((bells == B_NONE ? 1 : LOGRING_FDS) * sizeof(int));
	memcpy(CMSG_DATA(c), fds, (bells == B_NONE ? 1 : LOGRING_FDS) * sizeof(int));
	if (sendmsg(r->fd, &mh, 0) != (ssize_t)sizeof(msg))
		return -1;
	close(mfd);
	return 0;
}

static int raw_open(const char *sock, struct rawring *r, int seals)
{
	return raw_open_bells(sock, r, seals, B_NONE);
}

/* bytes into the ring at the producer's place, not yet published */
static void raw_write(struct rawring *r, uint64_t at, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		r->data[(at + i) % LOGRING_DATA] = b[i];
}

static size_t rec_bytes(uint8_t *buf, size_t cap, const char *sandbox)
{
	struct logrec rec = {.action = LOGREC_CONNECT,
			     .verdict = LOGREC_REFUSED,
			     .sandbox = sandbox,
			     .reason = "not on the allow list"};
	int n = logrec_encode(&rec, buf, cap, NULL);

	ck_assert_int_gt(n, 0);
	return (size_t)n;
}

static void raw_publish_record(struct rawring *r, const char *sandbox)
{
	uint8_t buf[LOGWIRE_MAX];
	size_t n = rec_bytes(buf, sizeof(buf), sandbox);

	raw_write(r, r->prod, buf, n);
	r->prod += n;
	atomic_store(&r->h->prod, r->prod);
}

static void raw_bell(struct rawring *r)
{
	uint8_t bell[LOGWIRE_HDR_LEN];

	logwire_bell_encode(bell, sizeof(bell));
	send(r->fd, bell, sizeof(bell), MSG_NOSIGNAL);
}

/* Wait (up to 5 s) until logd acknowledged n records of the ring, or ended
 * the session (-1). */
static int raw_wait_acked(struct rawring *r, uint64_t n)
{
	uint64_t deadline = pc_now_mono_ms() + 5000;

	while (pc_now_mono_ms() < deadline) {
		struct pollfd p = {.fd = r->fd, .events = POLLIN};
		char b[64];

		if (atomic_load(&r->h->acked) >= n)
			return 0;
		atomic_store(&r->h->prod_waiting, 1);
		/* the end: 0, or ECONNRESET when a bell was left unread */
		if (poll(&p, 1, 50) > 0 && recv(r->fd, b, sizeof(b), MSG_DONTWAIT) <= 0)
			return -1;
	}
	return -2;
}

START_TEST(ring_records_are_acknowledged_through_the_page)
{
	struct served s;
	char *text;
	pid_t pid;

	pid = served_child(&s);
	if (pid == 0) {
		struct logc *lc;
		struct logrec rec[64];
		const struct logrec *recs[64];
		bool sent[64];

		/* opened as root, as the engine does before its drop; the ring
		 * is registered by the first send, as the engine's user */
		if (logc_open(s.sock, &lc, NULL) < 0 || logc_use_ring(lc, NULL) < 0)
			_exit(2);
		become_engine();
		for (int i = 0; i < 64; i++) {
			rec[i] = (struct logrec){.action = LOGREC_CONNECT,
						 .verdict = LOGREC_ALLOWED,
						 .sandbox = "agent-1",
						 .reason = "allowed address"};
			recs[i] = &rec[i];
		}
		/* 50 batches: more bytes than the ring holds, so it wraps */
		for (int b = 0; b < 50; b++) {
			if (logc_send_batch(lc, recs, 64, sent, NULL) != 64)
				_exit(3);
			if (logc_flush(lc, 2000, NULL) < 0)
				_exit(4);
		}
		if (logc_last_seq(lc) == 0)
			_exit(5);
		logc_close(lc);
		_exit(0);
	}
	ck_assert_int_eq(child_status(pid), 0);
	text = serve_stop(&s);
	ck_assert_uint_eq(s.st.records, 50 * 64);
	ck_assert_uint_eq(s.st.malformed, 0);
	ck_assert_uint_eq(count(text, "\"portcullis.sender\":\"engine\""), 50 * 64);
	free(text);
}
END_TEST

START_TEST(ring_client_killed_keeps_published_records_never_a_partial_one)
{
	struct served s;
	char *text;
	pid_t pid = served_engine_child(&s);

	if (pid == 0) {
		struct rawring r;
		uint8_t buf[LOGWIRE_MAX];
		size_t n;

		if (raw_open(s.sock, &r, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
			_exit(2);
		raw_publish_record(&r, "published-1");
		raw_publish_record(&r, "published-2");
		raw_publish_record(&r, "published-3");
		/* a fourth, half written and never published: the kill
		 * comes in the middle of it (no bell: logd finds them all
		 * at the session's end) */
		n = rec_bytes(buf, sizeof(buf), "partial-4");
		raw_write(&r, r.prod, buf, n / 2);
		raise(SIGKILL);
		_exit(3);
	}
	ck_assert_int_eq(child_status(pid), 128 + SIGKILL);
	/* the session's end is read before the stop (same epoll round or
	 * earlier): poll the log for the records, with a deadline */
	for (uint64_t deadline = pc_now_mono_ms() + 5000; pc_now_mono_ms() < deadline;) {
		char *t = NULL;
		size_t len = 0;
		bool done;

		if (pc_file_read(s.file, 1 << 20, &t, &len, NULL) < 0)
			continue;
		done = strstr(t, "published-3") != NULL;
		free(t);
		if (done)
			break;
		usleep(10000);
	}
	text = serve_stop(&s);
	ck_assert_uint_eq(s.st.records, 3);
	ck_assert_uint_eq(s.st.malformed, 0);
	ck_assert_ptr_nonnull(strstr(text, "published-1"));
	ck_assert_ptr_nonnull(strstr(text, "published-3"));
	ck_assert_ptr_null(strstr(text, "partial-4"));
	free(text);
}
END_TEST

/* One hostile ring per case: the session ends (counted malformed), the
 * records published before the violation are kept. */
enum hostile { H_PROD_PAST_RING, H_PROD_BACK, H_LONG_RECORD, H_SHORT_HEADER, H_NOT_A_RECORD };

static int hostile_child(const char *sock, enum hostile how)
{
	struct rawring r;
	uint8_t hdr[LOGWIRE_HDR_LEN] = {LOGWIRE_VERSION, LOGWIRE_RECORD, 0, 0, 0, 0, 0, 0};

	become_engine();
	if (raw_open(sock, &r, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		return 2;
	raw_publish_record(&r, "before");
	raw_bell(&r);
	if (raw_wait_acked(&r, 1) < 0)
		return 3;
	switch (how) {
	case H_PROD_PAST_RING: /* more published than the ring holds */
		atomic_store(&r.h->prod, r.prod + LOGRING_DATA + 1);
		break;
	case H_PROD_BACK: /* the index goes back */
		atomic_store(&r.h->prod, r.prod - 1);
		break;
	case H_LONG_RECORD: /* a header claiming more than a record may be */
		pc_msg_put32(hdr + 4, LOGWIRE_MAX + 1);
		raw_write(&r, r.prod, hdr, sizeof(hdr));
		atomic_store(&r.h->prod, r.prod + LOGRING_DATA);
		break;
	case H_SHORT_HEADER: /* fewer bytes published than a header */
		raw_write(&r, r.prod, hdr, 4);
		atomic_store(&r.h->prod, r.prod + 4);
		break;
	case H_NOT_A_RECORD: /* a bell inside the ring */
		logwire_bell_encode(hdr, sizeof(hdr));
		raw_write(&r, r.prod, hdr, sizeof(hdr));
		atomic_store(&r.h->prod, r.prod + sizeof(hdr));
		break;
	}
	raw_bell(&r);
	return raw_wait_acked(&r, 2) == -1 ? 0 : 4; /* the session ended */
}

START_TEST(ring_violations_end_the_session_and_keep_what_came_before)
{
	static const enum hostile how[] = {H_PROD_PAST_RING, H_PROD_BACK, H_LONG_RECORD,
					   H_SHORT_HEADER, H_NOT_A_RECORD};
	struct served s;
	char *text;

	serve_start(&s);
	for (size_t i = 0; i < sizeof(how) / sizeof(how[0]); i++) {
		pid_t pid = fork();

		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			_exit(hostile_child(s.sock, how[i]));
		ck_assert_msg(child_status(pid) == 0, "hostile ring %zu was not refused", i);
	}
	text = serve_stop(&s);
	ck_assert_uint_eq(s.st.records, 5);
	ck_assert_uint_eq(s.st.malformed, 5);
	free(text);
}
END_TEST

/* Refused at registration: the ring cannot be relied on (a memfd that may
 * shrink under logd's reads would kill it with SIGBUS; one not sealed
 * against growing), or it would speak for root. */
START_TEST(ring_unsealed_or_root_registrations_are_refused)
{
	static const int seals[] = {0, F_SEAL_GROW, F_SEAL_SHRINK};
	struct served s;
	struct rawring r;
	char b[64];
	char *text;

	serve_start(&s);
	for (size_t i = 0; i < sizeof(seals) / sizeof(seals[0]); i++) {
		pid_t pid = fork();

		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			become_engine();
			if (raw_open(s.sock, &r, seals[i]) < 0)
				_exit(2);
			raw_publish_record(&r, "unsealed");
			raw_bell(&r);
			/* the session ends: recv sees its end */
			_exit(recv(r.fd, b, sizeof(b), 0) <= 0 ? 0 : 3);
		}
		ck_assert_msg(child_status(pid) == 0, "seals %d accepted", seals[i]);
	}
	/* root (this process) */
	ck_assert_int_eq(raw_open(s.sock, &r, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	raw_publish_record(&r, "root-ring");
	raw_bell(&r);
	ck_assert_int_le(recv(r.fd, b, sizeof(b), 0), 0);
	close(r.fd);
	munmap(r.h, LOGRING_SIZE);
	text = serve_stop(&s);
	ck_assert_uint_eq(s.st.records, 0);
	ck_assert_uint_eq(s.st.malformed, 4);
	ck_assert_ptr_null(strstr(text, "unsealed"));
	ck_assert_ptr_null(strstr(text, "root-ring"));
	free(text);
}
END_TEST

/* A stand-in for logd: a listening socket this test accepts on itself. */
static int fake_listen(char *dir, size_t dlen, char *sock, size_t slen)
{
	int fd;

	snprintf(dir, dlen, "/tmp/check_logd_ring.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock, slen, "%s/fake.sock", dir);
	fd = pc_unix_listen(sock, 0600, (uid_t)-1, (gid_t)-1, NULL);
	ck_assert_int_ge(fd, 0);
	return fd;
}

/* Accept the client's connection and map the ring it registers; its
 * bell to logd is closed, the one to the client kept in *bell (NULL: both
 * closed). */
static struct logring_hdr *fake_accept_bell(int lfd, int *cfd, ino_t *ino, int *bell, int *bell_in)
{
	uint8_t msg[64];
	union {
		struct cmsghdr align;
		uint8_t b[CMSG_SPACE(LOGRING_FDS * sizeof(int))];
	} ctl;
	int fds[LOGRING_FDS];
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof(msg)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = sizeof(ctl.b)};
	struct cmsghdr *c;
	struct stat st;
	int mfd;
	void *map;

	/* the connection logc_open made, closed by logc_use_ring, first */
	for (;;) {
		ssize_t n;

		*cfd = accept(lfd, NULL, NULL);
		ck_assert_int_ge(*cfd, 0);
		n = recvmsg(*cfd, &mh, 0);
		if (n > 0) {
			ck_assert_int_eq(n, LOGRING_REG_LEN);
			break;
		}
		close(*cfd);
		mh.msg_controllen = sizeof(ctl.b);
	}
	ck_assert_int_eq(logwire_ring_decode(msg, LOGRING_REG_LEN, NULL), 0);
	c = CMSG_FIRSTHDR(&mh);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(c->cmsg_type, SCM_RIGHTS);
	/* the memfd and two bells, eventfds */
	ck_assert_uint_eq(c->cmsg_len, CMSG_LEN(sizeof(fds)));
	memcpy(fds, CMSG_DATA(c), sizeof(fds));
	mfd = fds[0];
	for (int i = 1; i < LOGRING_FDS; i++) {
		char link[64] = "", path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[i]);
		ck_assert_int_gt(readlink(path, link, sizeof(link) - 1), 0);
		ck_assert_str_eq(link, "anon_inode:[eventfd]");
	}
	if (bell_in) /* the client's bell to logd */
		*bell_in = fds[1];
	else
		close(fds[1]);
	if (bell)
		*bell = fds[2];
	else
		close(fds[2]);
	ck_assert_int_eq(fstat(mfd, &st), 0);
	ck_assert_int_eq(st.st_size, LOGRING_SIZE);
	ck_assert_int_eq(fcntl(mfd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW),
			 F_SEAL_SHRINK | F_SEAL_GROW);
	*ino = st.st_ino;
	map = mmap(NULL, LOGRING_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	close(mfd);
	return map;
}

static struct logring_hdr *fake_accept(int lfd, int *cfd, ino_t *ino)
{
	return fake_accept_bell(lfd, cfd, ino, NULL, NULL);
}

START_TEST(ring_logd_killed_fails_at_once_then_a_new_ring)
{
	char dir[64], sock[96], cmd[100];
	int lfd = fake_listen(dir, sizeof(dir), sock, sizeof(sock)), cfd;
	struct logrec rec = {.action = LOGREC_CONNECT, .verdict = LOGREC_ALLOWED};
	const struct logrec *recs[1] = {&rec};
	struct logring_hdr *h;
	struct pc_err err;
	struct logc *lc;
	bool sent[1];
	ino_t ino1, ino2;
	uint64_t t0;

	ck_assert_int_eq(logc_open(sock, &lc, NULL), 0);
	ck_assert_int_eq(logc_use_ring(lc, NULL), 0);
	ck_assert_uint_eq(logc_send_batch(lc, recs, 1, sent, &err), 1);
	h = fake_accept(lfd, &cfd, &ino1);
	ck_assert_uint_gt(atomic_load(&h->prod), 0);
	/* logd dies with the record unacknowledged */
	munmap(h, LOGRING_SIZE);
	close(cfd);
	t0 = pc_now_mono_ms();
	ck_assert_int_lt(logc_flush(lc, 1000, &err), 0);
	/* at once, not at the deadline: the connection's end wakes it */
	ck_assert_uint_lt(pc_now_mono_ms() - t0, 500);
	/* the next send makes a new connection with a new ring */
	ck_assert_uint_eq(logc_send_batch(lc, recs, 1, sent, &err), 1);
	h = fake_accept(lfd, &cfd, &ino2);
	ck_assert(ino1 != ino2);
	ck_assert_uint_gt(atomic_load(&h->prod), 0);
	atomic_store(&h->ack_seq, 7);
	atomic_store(&h->acked, 1);
	ck_assert_int_eq(logc_flush(lc, 1000, &err), 0);
	ck_assert_uint_eq(logc_last_seq(lc), 7);
	/* an acknowledgement of more than was sent is a broken logd: refused */
	ck_assert_uint_eq(logc_send_batch(lc, recs, 1, sent, &err), 1);
	atomic_store(&h->acked, 5);
	ck_assert_int_lt(logc_flush(lc, 1000, &err), 0);
	logc_close(lc);
	munmap(h, LOGRING_SIZE);
	close(cfd);
	close(lfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(ring_full_refuses_after_the_send_wait_and_never_passes)
{
	char dir[64], sock[96], cmd[100], big[7000];
	int lfd = fake_listen(dir, sizeof(dir), sock, sizeof(sock)), cfd = -1;
	struct logrec rec = {.action = LOGREC_CONNECT, .verdict = LOGREC_ALLOWED, .message = big};
	const struct logrec *recs[64];
	struct logring_hdr *h = NULL;
	struct pc_err err;
	struct logc *lc;
	bool sent[64];
	size_t total = 0, got;
	uint64_t t0, waited;
	ino_t ino;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	for (int i = 0; i < 64; i++)
		recs[i] = &rec;
	ck_assert_int_eq(logc_open(sock, &lc, NULL), 0);
	ck_assert_int_eq(logc_use_ring(lc, NULL), 0);
	/* logd takes the ring and then reads nothing (stopped, stuck) */
	for (;;) {
		t0 = pc_now_mono_ms();
		got = logc_send_batch(lc, recs, 64, sent, &err);
		waited = pc_now_mono_ms() - t0;
		if (!h)
			h = fake_accept(lfd, &cfd, &ino);
		total += got;
		if (got < 64)
			break;
		ck_assert_uint_lt(total, 10 * 64); /* it must fill */
	}
	ck_assert_int_eq(err.code, PC_EAGAIN);
	ck_assert_msg(strstr(err.msg, "ring stayed full") != NULL, "%s", err.msg);
	ck_assert_uint_ge(waited, LOGC_SEND_WAIT_MS);
	ck_assert_uint_lt(waited, 1000);
	ck_assert(!sent[got]);
	/* what went in is not acknowledged: the flush fails at its deadline */
	ck_assert_int_eq(logc_flush(lc, 200, &err), PC_ETIMEOUT);
	logc_close(lc);
	munmap(h, LOGRING_SIZE);
	close(cfd);
	close(lfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A pledge is never waited for: not counted, and no bell while the ring
 * has room, even with logd asleep; past half the ring it rings logd so
 * that a query need not wait for room; and a ring that stays full
 * refuses it after the send wait, as it refuses a record (the query does
 * not leave). */
START_TEST(pledges_ring_logd_only_past_half_the_ring_and_fail_when_full)
{
	char dir[64], sock[96], cmd[100], big[1000];
	int lfd = fake_listen(dir, sizeof(dir), sock, sizeof(sock)), cfd = -1, bell_in = -1;
	struct logrec rec = {
	    .action = LOGREC_DNS_QUERY, .verdict = LOGREC_ALLOWED, .dns_name = big, .pledge = 1};
	struct logring_hdr *h;
	uint8_t buf[LOGWIRE_MAX];
	struct pc_err err;
	struct logc *lc;
	uint64_t t0, count, published;
	size_t one;
	ino_t ino;
	int rc;

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	one = (size_t)logrec_encode(&rec, buf, sizeof(buf), NULL);
	ck_assert_int_eq(logc_open(sock, &lc, NULL), 0);
	ck_assert_int_eq(logc_use_ring(lc, NULL), 0);
	ck_assert_int_eq(logc_pledge(lc, &rec, &err), 0);
	h = fake_accept_bell(lfd, &cfd, &ino, NULL, &bell_in);
	ck_assert_int_eq(fcntl(bell_in, F_SETFL, O_NONBLOCK), 0);
	atomic_store(&h->cons_waiting, 1); /* logd sleeps and reads nothing */
	for (published = one; published + one <= LOGRING_DATA / 2; published += one) {
		rec.pledge++;
		ck_assert_int_eq(logc_pledge(lc, &rec, &err), 0);
		ck_assert_int_lt(read(bell_in, &count, sizeof(count)), 0); /* no bell */
		ck_assert_int_eq(errno, EAGAIN);
	}
	rec.pledge++;
	ck_assert_int_eq(logc_pledge(lc, &rec, &err), 0); /* past half the ring */
	ck_assert_int_eq(read(bell_in, &count, sizeof(count)), sizeof(count));
	ck_assert_uint_eq(logc_sent_total(lc), 0);
	ck_assert_uint_eq(atomic_load(&h->prod), published + one);
	for (;;) {
		rec.pledge++;
		t0 = pc_now_mono_ms();
		rc = logc_pledge(lc, &rec, &err);
		if (rc < 0)
			break;
		ck_assert_uint_lt(atomic_load(&h->prod), LOGRING_DATA + 1);
	}
	ck_assert_int_eq(rc, PC_EAGAIN);
	ck_assert_msg(strstr(err.msg, "ring stayed full") != NULL, "%s", err.msg);
	ck_assert_uint_ge(pc_now_mono_ms() - t0, LOGC_SEND_WAIT_MS);
	ck_assert_uint_eq(logc_sent_total(lc), 0);
	logc_close(lc);
	munmap(h, LOGRING_SIZE);
	close(bell_in);
	close(cfd);
	close(lfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* The table itself (logd/pledge.c): bounded in count and in bytes by
 * handing the oldest back to be written, never by dropping one; a redeem
 * before its pledge leaves a mark the pledge meets; a pledge twice is
 * held once; an ended process's pledges come out oldest first, the
 * others' stay. */
static size_t taken;
static uint8_t taken_first;
static void take_one(void *ctx, const uint8_t *rec, size_t len)
{
	(void)ctx;
	if (!taken++)
		taken_first = len ? rec[0] : 0;
}

START_TEST(pledge_table_bounds_marks_and_ends)
{
	static uint8_t big[8000];
	struct pledges *p;
	struct pledge *e;
	uint8_t one = 1;
	size_t n, len;
	uint64_t id;

	ck_assert_int_eq(pledges_new(&p, NULL), 0);
	/* bytes: the oldest goes once the records pass PLEDGE_BYTES_MAX */
	for (id = 1; (id - 1) * sizeof(big) <= PLEDGE_BYTES_MAX; id++) {
		big[0] = (uint8_t)id;
		ck_assert_int_eq(pledges_hold(p, 10, id, big, sizeof(big)), 0);
		if (id * sizeof(big) <= PLEDGE_BYTES_MAX)
			ck_assert_ptr_null(pledges_over(p));
	}
	e = pledges_over(p);
	ck_assert_ptr_nonnull(e);
	ck_assert_uint_eq(pledge_rec(e, &len)[0], 1); /* the oldest */
	ck_assert_uint_eq(len, sizeof(big));
	free(e);
	ck_assert_ptr_null(pledges_over(p));
	n = pledges_held(p);
	ck_assert_uint_eq(pledges_take(p, 10, take_one, NULL), n);
	ck_assert_uint_eq(pledges_held(p), 0);
	/* count: past PLEDGES_MAX the oldest goes */
	for (id = 1; id <= PLEDGES_MAX + 1; id++)
		ck_assert_int_eq(pledges_hold(p, 11, id, &one, 1), 0);
	e = pledges_over(p);
	ck_assert_ptr_nonnull(e);
	free(e);
	ck_assert_ptr_null(pledges_over(p));
	ck_assert_uint_eq(pledges_held(p), PLEDGES_MAX);
	/* a pledge twice is held once; a redeem takes it */
	ck_assert_int_eq(pledges_hold(p, 11, 2, &one, 1), 0);
	ck_assert_uint_eq(pledges_held(p), PLEDGES_MAX);
	ck_assert(pledges_redeem(p, 11, 2));
	ck_assert_uint_eq(pledges_held(p), PLEDGES_MAX - 1);
	/* a redeem before its pledge: a mark, and the pledge is dropped */
	ck_assert(!pledges_redeem(p, 12, 7));
	ck_assert_int_eq(pledges_hold(p, 12, 7, &one, 1), 0);
	ck_assert_uint_eq(pledges_held(p), PLEDGES_MAX - 1);
	/* ids are per process: 12's id 3 is not 11's */
	big[0] = 42;
	ck_assert_int_eq(pledges_hold(p, 12, 3, big, 1), 0);
	ck_assert(!pledges_redeem(p, 12, 4));
	taken = 0;
	ck_assert_uint_eq(pledges_take(p, 12, take_one, NULL), 1);
	ck_assert_uint_eq(taken_first, 42);
	ck_assert_uint_eq(pledges_held(p), PLEDGES_MAX - 1); /* 11's stay */
	ck_assert_uint_eq(pledges_take(p, 11, take_one, NULL), PLEDGES_MAX - 1);
	ck_assert_uint_eq(pledges_held(p), 0);
	pledges_free(p);
}
END_TEST

/* The table's buckets grow with what it holds and shrink after: every
 * pledge and mark is found again across each resize. */
START_TEST(pledge_table_finds_across_growth_and_shrink)
{
	struct pledges *p;
	uint8_t one = 1;

	ck_assert_int_eq(pledges_new(&p, NULL), 0);
	for (uint64_t id = 1; id <= 3000; id++) /* grows past 2,048 buckets */
		ck_assert_int_eq(pledges_hold(p, 20, id, &one, 1), 0);
	ck_assert_uint_eq(pledges_held(p), 3000);
	for (uint64_t id = 1; id <= 3000; id += 2)
		ck_assert(pledges_redeem(p, 20, id));
	ck_assert_uint_eq(pledges_held(p), 1500);
	for (uint64_t id = 1; id <= 3000; id += 2) /* redeemed: marks now */
		ck_assert(!pledges_redeem(p, 20, id));
	for (uint64_t id = 1; id <= 3000; id += 2) /* each meets its mark */
		ck_assert_int_eq(pledges_hold(p, 20, id, &one, 1), 0);
	ck_assert_uint_eq(pledges_held(p), 1500);
	for (uint64_t id = 2; id <= 3000; id += 2) /* held, not marked */
		ck_assert_int_eq(pledges_hold(p, 20, id, &one, 1), 0);
	ck_assert_uint_eq(pledges_held(p), 1500);
	taken = 0; /* the buckets shrink while the take walks the list */
	ck_assert_uint_eq(pledges_take(p, 20, take_one, NULL), 1500);
	ck_assert_uint_eq(pledges_held(p), 0);
	pledges_free(p);
}
END_TEST

/* The bells are eventfds: logd wakes on the client's (no datagram on the
 * socket) and rings the client's own when it acknowledges. */
START_TEST(ring_bells_are_eventfds_both_ways)
{
	struct served s;
	char *text;
	pid_t pid = served_engine_child(&s);

	if (pid == 0) {
		struct rawring r;
		const uint64_t one = 1;
		struct pollfd p;
		uint64_t n;

		if (raw_open_bells(s.sock, &r, F_SEAL_SHRINK | F_SEAL_GROW, B_EVENTFD) < 0)
			_exit(2);
		/* logd sleeps (its flag in the page) before the record */
		for (int i = 0; i < 500 && !atomic_load(&r.h->cons_waiting); i++)
			usleep(10000);
		raw_publish_record(&r, "rung-by-eventfd");
		atomic_store(&r.h->prod_waiting, 1);
		if (write(r.bell_out, &one, sizeof(one)) != sizeof(one))
			_exit(3);
		/* the acknowledgement rings our eventfd, not the socket */
		p = (struct pollfd){.fd = r.bell_in, .events = POLLIN};
		if (poll(&p, 1, 5000) != 1 || read(r.bell_in, &n, sizeof(n)) != sizeof(n))
			_exit(4);
		if (atomic_load(&r.h->acked) != 1)
			_exit(5);
		if (recv(r.fd, &n, sizeof(n), MSG_DONTWAIT) >= 0 || errno != EAGAIN)
			_exit(6); /* nothing came on the socket */
		_exit(0);
	}
	ck_assert_int_eq(child_status(pid), 0);
	text = serve_stop(&s);
	ck_assert_uint_eq(s.st.records, 1);
	ck_assert_uint_eq(s.st.malformed, 0);
	ck_assert_ptr_nonnull(strstr(text, "rung-by-eventfd"));
	free(text);
}
END_TEST

/* Bells logd would write to and wait on must be eventfds: a pipe or a
 * socket (which could block logd, or carry its writes where the client
 * points) or another anonymous inode (a timerfd would wake logd for
 * nothing, for ever) ends the session at registration. */
START_TEST(ring_bells_that_are_not_eventfds_are_refused)
{
	static const enum bells kinds[] = {B_PIPE, B_TIMERFD, B_SOCKET};
	struct served s;
	char *text;

	serve_start(&s);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		pid_t pid = fork();

		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			struct rawring r;
			char b[64];

			become_engine();
			if (raw_open_bells(s.sock, &r, F_SEAL_SHRINK | F_SEAL_GROW, kinds[i]) < 0)
				_exit(2);
			raw_publish_record(&r, "bad-bells");
			raw_bell(&r);
			_exit(recv(r.fd, b, sizeof(b), 0) <= 0 ? 0 : 3);
		}
		ck_assert_msg(child_status(pid) == 0, "bells of kind %d accepted", kinds[i]);
	}
	text = serve_stop(&s);
	ck_assert_uint_eq(s.st.records, 0);
	ck_assert_uint_eq(s.st.malformed, 3);
	ck_assert_ptr_null(strstr(text, "bad-bells"));
	free(text);
}
END_TEST

struct late_ack {
	struct logring_hdr *h;
	int bell;
};

static void *ack_late(void *arg)
{
	struct late_ack *a = arg;
	const uint64_t one = 1;

	usleep(200000);
	atomic_store(&a->h->ack_seq, 9);
	atomic_store(&a->h->acked, 1);
	if (write(a->bell, &one, sizeof(one)) != sizeof(one))
		abort();
	return NULL;
}

/* The client sleeping for its acknowledgement wakes on logd's eventfd
 * bell, long before its deadline (a client that slept on the socket alone
 * would wait it out). */
START_TEST(ring_client_wakes_on_the_eventfd_bell)
{
	char dir[64], sock[96], cmd[100];
	int lfd = fake_listen(dir, sizeof(dir), sock, sizeof(sock)), cfd;
	struct logrec rec = {.action = LOGREC_CONNECT, .verdict = LOGREC_ALLOWED};
	const struct logrec *recs[1] = {&rec};
	struct late_ack a;
	struct pc_err err;
	struct logc *lc;
	pthread_t th;
	bool sent[1];
	ino_t ino;
	uint64_t t0;

	ck_assert_int_eq(logc_open(sock, &lc, NULL), 0);
	ck_assert_int_eq(logc_use_ring(lc, NULL), 0);
	ck_assert_uint_eq(logc_send_batch(lc, recs, 1, sent, &err), 1);
	a.h = fake_accept_bell(lfd, &cfd, &ino, &a.bell, NULL);
	ck_assert_int_eq(pthread_create(&th, NULL, ack_late, &a), 0);
	t0 = pc_now_mono_ms();
	ck_assert_msg(logc_flush(lc, 10000, &err) == 0, "%s", err.msg);
	ck_assert_uint_lt(pc_now_mono_ms() - t0, 5000);
	ck_assert_uint_eq(logc_last_seq(lc), 9);
	pthread_join(th, NULL);
	logc_close(lc);
	munmap(a.h, LOGRING_SIZE);
	close(a.bell);
	close(cfd);
	close(lfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* An event loop's wait (the vault's workers: logc_loop_arm, logc_loop_woken):
 * arming raises the flag and looks after it (an acknowledgement that came
 * first is found, nothing to watch), logd's bell wakes the loop and is
 * taken with the flag, and the connection's end is a loss the count
 * reports. */
START_TEST(ring_loop_waits_on_its_bell_and_its_connection)
{
	char dir[64], sock[96], cmd[100];
	int lfd = fake_listen(dir, sizeof(dir), sock, sizeof(sock)), cfd, bell, fds[2], now[2];
	struct logrec rec = {.action = LOGREC_CONNECT, .verdict = LOGREC_ALLOWED};
	const struct logrec *recs[1] = {&rec};
	const uint64_t one = 1;
	struct logring_hdr *h;
	struct pollfd p[2];
	struct pc_err err;
	struct logc *lc;
	uint64_t acked;
	bool sent[1], covered;
	ino_t ino;

	ck_assert_int_eq(logc_open(sock, &lc, NULL), 0);
	ck_assert_int_eq(logc_use_ring(lc, NULL), 0);
	ck_assert_uint_eq(logc_send_batch(lc, recs, 1, sent, &err), 1);
	h = fake_accept_bell(lfd, &cfd, &ino, &bell, NULL);
	ck_assert_int_eq(logc_loop_arm(lc, logc_sent_total(lc), fds, &covered, &err), 0);
	ck_assert(!covered);
	ck_assert_int_ge(fds[0], 0);
	ck_assert_int_ge(fds[1], 0);
	logc_loop_fds(lc, now);
	ck_assert_int_eq(now[0], fds[0]);
	ck_assert_int_eq(now[1], fds[1]);
	ck_assert_uint_eq(atomic_load(&h->prod_waiting), 1);
	p[0] = (struct pollfd){.fd = fds[0], .events = POLLIN};
	p[1] = (struct pollfd){.fd = fds[1], .events = POLLIN};
	ck_assert_int_eq(poll(p, 2, 0), 0);
	/* logd writes it and rings, as its flag asks */
	atomic_store(&h->ack_seq, 4);
	atomic_store(&h->acked, 1);
	ck_assert_int_eq(write(bell, &one, sizeof(one)), sizeof(one));
	ck_assert_int_eq(poll(p, 2, 1000), 1);
	ck_assert(p[1].revents & POLLIN);
	ck_assert_int_eq(logc_loop_woken(lc, fds[1], &err), 0);
	ck_assert_uint_eq(atomic_load(&h->prod_waiting), 0);
	ck_assert_int_eq(poll(p, 2, 0), 0); /* the bell was taken */
	ck_assert_int_eq(logc_acked_total(lc, &acked, &err), 0);
	ck_assert_uint_eq(acked, logc_sent_total(lc));
	ck_assert_uint_eq(logc_last_seq(lc), 4);
	/* all covered: nothing to watch, no flag for logd */
	ck_assert_int_eq(logc_loop_arm(lc, logc_sent_total(lc), fds, &covered, &err), 0);
	ck_assert(covered);
	ck_assert_uint_eq(atomic_load(&h->prod_waiting), 0);
	/* acknowledged before the loop arms: the look after the flag finds it */
	ck_assert_uint_eq(logc_send_batch(lc, recs, 1, sent, &err), 1);
	atomic_store(&h->acked, 2);
	ck_assert_int_eq(logc_loop_arm(lc, logc_sent_total(lc), fds, &covered, &err), 0);
	ck_assert(covered);
	ck_assert_uint_eq(atomic_load(&h->prod_waiting), 0);
	/* a descriptor of no connection of this client says nothing */
	ck_assert_int_eq(logc_loop_woken(lc, 1000, &err), 0);
	/* logd dies under a record: its connection wakes the loop, and the
	 * count reports the loss */
	ck_assert_uint_eq(logc_send_batch(lc, recs, 1, sent, &err), 1);
	ck_assert_int_eq(logc_loop_arm(lc, logc_sent_total(lc), fds, &covered, &err), 0);
	ck_assert(!covered);
	munmap(h, LOGRING_SIZE);
	close(cfd);
	close(bell);
	p[0].fd = fds[0];
	ck_assert_int_eq(poll(p, 1, 1000), 1);
	ck_assert_int_lt(logc_loop_woken(lc, fds[0], &err), 0);
	ck_assert_int_lt(logc_acked_total(lc, &acked, &err), 0);
	logc_loop_fds(lc, now);
	ck_assert_int_eq(now[0], -1);
	ck_assert_int_eq(now[1], -1);
	logc_close(lc);
	close(lfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- pledges (docs/logd.md "Pledges") ------------------------------------ */

static struct logrec dns_rec(const char *name, uint64_t pledge, uint64_t redeems)
{
	return (struct logrec){.action = LOGREC_DNS_QUERY,
			       .verdict = LOGREC_ALLOWED,
			       .sandbox = "agent-1",
			       .reason = "name allowed",
			       .dns_name = name,
			       .dns_type = 1,
			       .pledge = pledge,
			       .redeems = redeems};
}

static void wait_for(const char *file, const char *needle)
{
	for (uint64_t deadline = pc_now_mono_ms() + 5000; pc_now_mono_ms() < deadline;) {
		char *t = NULL;
		size_t len = 0;
		bool done = false;

		if (pc_file_read(file, 1 << 20, &t, &len, NULL) == 0) {
			done = strstr(t, needle) != NULL;
			free(t);
		}
		if (done)
			return;
		usleep(10000);
	}
}

/* The engine pledges through its queue thread's ring and redeems through
 * the ring and through another session (its control thread's datagrams);
 * the ring's session ends while the other lives (its pledges stay held);
 * then the engine is killed: only the pledge never redeemed is written,
 * saying why, and a redeem that overtook its pledge drops it. */
START_TEST(pledges_are_written_only_for_an_engine_that_ended_first)
{
	struct served s;
	char *text;
	pid_t pid;

	pid = served_child(&s);
	if (pid == 0) {
		struct logc *ring, *ctl;
		struct logrec r;

		if (logc_open(s.sock, &ring, NULL) < 0 || logc_use_ring(ring, NULL) < 0 ||
		    logc_open(s.sock, &ctl, NULL) < 0)
			_exit(2);
		become_engine();
		/* the control thread redeems 4 before its pledge is read */
		r = dns_rec("answered-4", 0, 4);
		if (logc_send(ctl, &r, NULL) < 0 || logc_flush(ctl, 2000, NULL) < 0)
			_exit(3);
		/* the control thread pledges too (again, to a new logd) */
		r = dns_rec("pledged-5", 5, 0);
		if (logc_pledge(ctl, &r, NULL) < 0)
			_exit(9);
		for (uint64_t id = 1; id <= 4; id++) {
			char name[32];

			snprintf(name, sizeof(name), "pledged-%llu", (unsigned long long)id);
			r = dns_rec(name, id, 0);
			if (logc_pledge(ring, &r, NULL) < 0)
				_exit(4);
		}
		if (logc_sent_total(ring) != 0)
			_exit(5); /* a pledge is not waited for */
		r = dns_rec("answered-2", 0, 2);
		if (logc_send(ring, &r, NULL) < 0 || logc_flush(ring, 2000, NULL) < 0)
			_exit(6);
		logc_close(ring); /* held on: the control session lives */
		usleep(100000);
		r = dns_rec("answered-3", 0, 3);
		if (logc_send(ctl, &r, NULL) < 0 || logc_flush(ctl, 2000, NULL) < 0)
			_exit(7);
		raise(SIGKILL);
		_exit(8);
	}
	ck_assert_int_eq(child_status(pid), 128 + SIGKILL);
	wait_for(s.file, "pledged-1");
	text = serve_stop(&s);
	ck_assert_uint_eq(s.st.malformed, 0);
	ck_assert_uint_eq(s.st.records, 5);
	ck_assert_uint_eq(count(text, "pledged-1"), 1);
	ck_assert_uint_eq(count(text, "pledged-5"), 1);
	ck_assert_ptr_nonnull(strstr(text, "the engine ended before the query's answer"));
	ck_assert_uint_eq(count(text, "pledged-2"), 0);
	ck_assert_uint_eq(count(text, "pledged-3"), 0);
	ck_assert_uint_eq(count(text, "pledged-4"), 0);
	ck_assert_uint_eq(count(text, "answered-2"), 1);
	ck_assert_uint_eq(count(text, "answered-3"), 1);
	ck_assert_uint_eq(count(text, "answered-4"), 1);
	ck_assert_uint_eq(count(text, "portcullis.pledge"), 0); /* never in the file */
	free(text);
}
END_TEST

/* logd stopping is not its engine ending: the engine lives on and owes
 * the records to the next logd, so the pledges are not written. */
START_TEST(pledges_are_not_written_when_logd_stops)
{
	struct served s;
	char *text;
	int go[2];
	pid_t pid;

	ck_assert_int_eq(pipe(go), 0);
	pid = served_engine_child(&s);
	if (pid == 0) {
		struct logc *lc;
		struct logrec r = dns_rec("pledged-1", 1, 0), a = dns_rec("answered-9", 0, 9);
		char c;

		close(go[1]);
		if (logc_open(s.sock, &lc, NULL) < 0 || logc_use_ring(lc, NULL) < 0 ||
		    logc_pledge(lc, &r, NULL) < 0 || logc_send(lc, &a, NULL) < 0 ||
		    logc_flush(lc, 2000, NULL) < 0)
			_exit(2);
		(void)!read(go[0], &c, 1); /* alive until logd stopped */
		_exit(0);
	}
	close(go[0]);
	wait_for(s.file, "answered-9");
	text = serve_stop(&s);
	ck_assert_uint_eq(count(text, "answered-9"), 1);
	ck_assert_uint_eq(count(text, "pledged-1"), 0);
	close(go[1]);
	ck_assert_int_eq(child_status(pid), 0);
	free(text);
}
END_TEST

PC_UNIT_SUITE("logd_ring", "ring", 60, ring_records_are_acknowledged_through_the_page,
	      ring_client_killed_keeps_published_records_never_a_partial_one,
	      ring_violations_end_the_session_and_keep_what_came_before,
	      ring_unsealed_or_root_registrations_are_refused,
	      ring_logd_killed_fails_at_once_then_a_new_ring,
	      ring_full_refuses_after_the_send_wait_and_never_passes,
	      ring_bells_are_eventfds_both_ways, ring_bells_that_are_not_eventfds_are_refused,
	      ring_client_wakes_on_the_eventfd_bell, ring_loop_waits_on_its_bell_and_its_connection,
	      pledges_are_written_only_for_an_engine_that_ended_first,
	      pledges_are_not_written_when_logd_stops,
	      pledges_ring_logd_only_past_half_the_ring_and_fail_when_full,
	      pledge_table_bounds_marks_and_ends, pledge_table_finds_across_growth_and_shrink)
