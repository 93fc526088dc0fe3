/* Test client for portcullis-logd: sends records through the real client
 * library (or raw, malformed messages through a raw socket) and prints what
 * logd acknowledged, for the logd integration tests and the benchmark.
 *
 *   logd_client SOCKET [-n N] [-b BATCH] [-t TIMEOUT_MS] [-s SANDBOX] [-q]
 *               [-a ACTION] [-V VERDICT] [-m MESSAGE] [-d NAME] [-U USER] [-w MS]
 *       send N records, flush every BATCH; prints "acked SEQ" after each
 *       successful flush (-q: only the last), exits 1 at the first failure.
 *       -a: the action by name (connect, http-request, ...; default
 *       connect), -V: allowed, refused or none (default: alternating),
 *       -m: the message; -d: the destination name (default hostN.example,
 *       N the record's index); -U: connect first, then drop to USER and send
 *       (as a daemon that connects before its privilege drop); -w: wait
 *       MS after each send, so that logd takes each record in a round of
 *       its own (and acknowledges it before it reads the next)
 *   logd_client SOCKET -F N:FILE [-a ACTION] [-V VERDICT] [-m MESSAGE] [-U USER]
 *       send one record (raw, not through the client library) with N
 *       descriptors of FILE attached (SCM_RIGHTS); prints "acked SEQ" and
 *       exits 0 if logd acknowledged it, "closed" and exits 1 if logd
 *       ended the session, "open" and exits 2 if neither within 3 s
 *   logd_client SOCKET --every-kind
 *       send one record of each action and verdict a client may write,
 *       every field the record has filled (the SIEM tests check each
 *       field's type against the shipped Elastic template); prints
 *       "acked SEQ"
 *   logd_client SOCKET --malformed KIND
 *       send one malformed message; prints "closed" if logd ended the
 *       session, "open" if it did not (KIND: short, version, length, tag,
 *       order, utf8, oversize, segment, noaction)
 */
#include "logd/logd.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int malformed(const char *path, const char *kind)
{
	struct logrec rec = {
	    .action = LOGREC_CONNECT, .verdict = LOGREC_REFUSED, .sandbox = "agent-1"};
	uint8_t buf[LOGWIRE_MAX + 64];
	struct pc_err err;
	struct pollfd p;
	int fd, n;
	char c;

	n = logrec_encode(&rec, buf, sizeof(buf), &err);
	if (n < 0)
		return 2;
	if (!strcmp(kind, "short")) {
		n = 5;
	} else if (!strcmp(kind, "version")) {
		buf[0] = 9;
	} else if (!strcmp(kind, "length")) {
		buf[7]++;
	} else if (!strcmp(kind, "tag")) {
		buf[n] = 99, buf[n + 1] = 0, buf[n + 2] = 1, buf[n + 3] = 'x';
		n += 4;
		buf[7] = (uint8_t)n;
	} else if (!strcmp(kind, "order")) {
		buf[n] = 1, buf[n + 1] = 0, buf[n + 2] = 1, buf[n + 3] = 1;
		n += 4;
		buf[7] = (uint8_t)n;
	} else if (!strcmp(kind, "utf8")) {
		/* the sandbox string's first byte becomes an invalid lead byte */
		for (int i = 8; i < n - 3; i++)
			if (buf[i] == 3) {
				buf[i + 3] = 0xff;
				break;
			}
	} else if (!strcmp(kind, "oversize")) {
		memset(buf, 0, sizeof(buf));
		n = LOGWIRE_MAX + 32;
	} else if (!strcmp(kind, "segment")) {
		buf[8 + 3] = LOGREC_SEGMENT;
	} else if (!strcmp(kind, "noaction")) {
		memmove(buf + 8, buf + 12, (size_t)n - 12);
		n -= 4;
		buf[6] = (uint8_t)(n >> 8), buf[7] = (uint8_t)n;
	} else {
		fprintf(stderr, "unknown kind %s\n", kind);
		return 2;
	}
	fd = pc_unix_connect(path, 0, &err);
	if (fd < 0) {
		fprintf(stderr, "connect: %s\n", err.msg);
		return 2;
	}
	if (send(fd, buf, (size_t)n, MSG_NOSIGNAL) != n) {
		perror("send");
		return 2;
	}
	p.fd = fd;
	p.events = POLLIN;
	if (poll(&p, 1, 3000) == 1 && recv(fd, &c, 1, 0) == 0)
		printf("closed\n");
	else
		printf("open\n");
	close(fd);
	return 0;
}

/* One record with n descriptors of file attached: what a compromised
 * sender can hand logd besides its bytes. */
static int with_fds(const char *path, const struct logrec *rec, int n, const char *file,
		    const char *drop)
{
	uint8_t buf[LOGWIRE_MAX], ack[LOGWIRE_ACK_LEN];
	union {
		struct cmsghdr align;
		uint8_t b[CMSG_SPACE(64 * sizeof(int))];
	} ctl;
	struct iovec iov;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;
	struct pc_err err;
	struct pollfd p;
	uint64_t seq;
	uint32_t count;
	int fd, ffd, len;
	ssize_t got;

	len = logrec_encode(rec, buf, sizeof(buf), &err);
	if (len < 0 || n < 1 || n > 64)
		return 3;
	ffd = open(file, O_RDONLY | O_CLOEXEC);
	fd = pc_unix_connect(path, 0, &err);
	if (ffd < 0 || fd < 0) {
		fprintf(stderr, "open/connect failed\n");
		return 3;
	}
	if (drop) { /* connected: become USER, as a daemon after its drop */
		uid_t uid;
		gid_t gid;

		if (pc_user_lookup(drop, &uid, &gid, &err) < 0 || setgroups(1, &gid) < 0 ||
		    setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
			fprintf(stderr, "dropping to %s failed\n", drop);
			return 3;
		}
	}
	iov.iov_base = buf;
	iov.iov_len = (size_t)len;
	memset(&ctl, 0, sizeof(ctl));
	mh.msg_control = ctl.b;
	mh.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	for (int i = 0; i < n; i++)
		memcpy(CMSG_DATA(cm) + i * sizeof(int), &ffd, sizeof(int));
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != len) {
		perror("sendmsg");
		return 3;
	}
	p.fd = fd;
	p.events = POLLIN;
	if (poll(&p, 1, 3000) != 1) {
		printf("open\n");
		return 2;
	}
	got = recv(fd, ack, sizeof(ack), 0);
	if (got == (ssize_t)sizeof(ack) &&
	    logwire_ack_decode(ack, sizeof(ack), &count, &seq, &err) == 0) {
		printf("acked %llu\n", (unsigned long long)seq);
		return 0;
	}
	printf(got <= 0 ? "closed\n" : "open\n");
	return got <= 0 ? 1 : 2;
}

/* What check_logd_ecs's records hold, through the client library. */
static int every_kind(const char *path)
{
	static const enum logrec_verdict vs[] = {LOGREC_NONE, LOGREC_ALLOWED, LOGREC_REFUSED};
	struct logc *lc;
	struct pc_err err;

	if (logc_open(path, &lc, &err) < 0) {
		fprintf(stderr, "logc_open: %s\n", err.msg);
		return 2;
	}
	for (int a = 1; a < LOGREC_ACTION_MAX; a++)
		for (size_t v = 0; v < 3; v++) {
			struct logrec r = {
			    .action = (enum logrec_action)a,
			    .verdict = vs[v],
			    .sandbox = "agent-1",
			    .policy = "sha256:4be1c0ffee09c2",
			    .reason =
				vs[v] == LOGREC_REFUSED ? "not on the allow list" : "allowed host",
			    .rule = "agent-1/allow[0]",
			    .transport = IPPROTO_TCP,
			    .domain = "paste.example",
			    .dns_name = "api.github.test",
			    .dns_type = 28,
			    .dns_answers = "2001:db8::10,203.0.113.10",
			    .sni = "paste.example",
			    .http_method = "POST",
			    .http_path = "/upload",
			    .http_status = 403,
			    .secrets = "GITHUB_TOKEN,NPM_TOKEN",
			    .message = "every kind",
			    .dns_rcode = vs[v] == LOGREC_REFUSED ? "REFUSED" : NULL,
			    .dns_ttl = 300,
			    .held_bytes = "timeout",
			    .held_ms = 3001,
			    .quota = 16,
			};

			if (a == LOGREC_SEGMENT) /* logd's own */
				continue;
			r.src.addr.family = AF_INET;
			inet_pton(AF_INET, "10.203.0.11", r.src.addr.a);
			r.src.port = 40001;
			r.dst.addr.family = AF_INET6;
			inet_pton(AF_INET6, "2001:db8::12", r.dst.addr.a);
			r.dst.port = 443;
			if (logc_send(lc, &r, &err) < 0) {
				fprintf(stderr, "send %s: %s\n", logrec_action_name(r.action),
					err.msg);
				logc_close(lc);
				return 1;
			}
		}
	if (logc_flush(lc, 5000, &err) < 0) {
		fprintf(stderr, "flush: %s\n", err.msg);
		logc_close(lc);
		return 1;
	}
	printf("acked %llu\n", (unsigned long long)logc_last_seq(lc));
	logc_close(lc);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"malformed", required_argument, NULL, 'M'},
					     {"every-kind", no_argument, NULL, 'K'},
					     {NULL, 0, NULL, 0}};
	bool every = false;
	long n = 1, batch = 1, timeout = 2000, pause_ms = 0;
	const char *sandbox = "agent-1", *path, *message = NULL, *drop = NULL, *fds = NULL;
	const char *dname = NULL;
	int action = LOGREC_CONNECT, verdict = -1;
	bool quiet = false;
	struct logc *lc;
	struct pc_err err;
	int opt;

	while ((opt = getopt_long(argc, argv, "n:b:t:s:qa:V:m:U:w:F:d:", opts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			n = atol(optarg);
			break;
		case 'b':
			batch = atol(optarg);
			break;
		case 't':
			timeout = atol(optarg);
			break;
		case 's':
			sandbox = optarg;
			break;
		case 'q':
			quiet = true;
			break;
		case 'a':
			for (action = 1; action < LOGREC_ACTION_MAX; action++)
				if (!strcmp(logrec_action_name((enum logrec_action)action), optarg))
					break;
			if (action == LOGREC_ACTION_MAX)
				return 2;
			break;
		case 'V':
			verdict = !strcmp(optarg, "allowed")   ? LOGREC_ALLOWED
				  : !strcmp(optarg, "refused") ? LOGREC_REFUSED
							       : LOGREC_NONE;
			break;
		case 'm':
			message = optarg;
			break;
		case 'U':
			drop = optarg;
			break;
		case 'w':
			pause_ms = atol(optarg);
			break;
		case 'F':
			fds = optarg;
			break;
		case 'd':
			dname = optarg;
			break;
		case 'K':
			every = true;
			break;
		case 'M':
			if (optind >= argc)
				return 2;
			return malformed(argv[optind], optarg);
		default:
			return 2;
		}
	}
	if (optind != argc - 1 || batch < 1)
		return 2;
	path = argv[optind];
	if (every)
		return every_kind(path);
	if (fds) {
		struct logrec rec = {
		    .action = (enum logrec_action)action,
		    .verdict = verdict >= 0 ? (enum logrec_verdict)verdict : LOGREC_REFUSED,
		    .message = message,
		    .sandbox = sandbox,
		};
		const char *colon = strchr(fds, ':');

		if (!colon)
			return 3;
		return with_fds(path, &rec, atoi(fds), colon + 1, drop);
	}
	if (logc_open(path, &lc, &err) < 0) {
		fprintf(stderr, "logc_open: %s\n", err.msg);
		return 2;
	}
	if (drop) { /* connected (logc_open connects now): become USER */
		uid_t uid;
		gid_t gid;

		if (pc_user_lookup(drop, &uid, &gid, &err) < 0 || setgroups(1, &gid) < 0 ||
		    setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0) {
			fprintf(stderr, "dropping to %s failed\n", drop);
			return 2;
		}
	}
	for (long i = 0; i < n; i++) {
		char domain[64];
		struct logrec rec = {
		    .action = (enum logrec_action)action,
		    .verdict = verdict >= 0 ? (enum logrec_verdict)verdict
			       : i % 3	    ? LOGREC_ALLOWED
					    : LOGREC_REFUSED,
		    .message = message,
		    .sandbox = sandbox,
		    .policy = "sha256:4be1c0ffee09c2",
		    .reason = i % 3 ? "allowed by rule" : "not on the allow list",
		    .rule = i % 3 ? "agent-1/allow[0]" : NULL,
		    .transport = IPPROTO_TCP,
		    .domain = domain,
		};

		snprintf(domain, sizeof(domain), "host%ld.example", i);
		if (dname)
			rec.domain = dname;
		rec.src.addr.family = AF_INET;
		inet_pton(AF_INET, "10.203.0.11", rec.src.addr.a);
		rec.src.port = (uint16_t)(40000 + i % 20000);
		rec.dst.addr.family = AF_INET;
		inet_pton(AF_INET, "203.0.113.12", rec.dst.addr.a);
		rec.dst.port = 443;
		if (logc_send(lc, &rec, &err) < 0) {
			fprintf(stderr, "send %ld: %s\n", i, err.msg);
			logc_close(lc);
			return 1;
		}
		if (pause_ms > 0)
			poll(NULL, 0, (int)pause_ms);
		if ((i + 1) % batch == 0 || i + 1 == n) {
			if (logc_flush(lc, (int)timeout, &err) < 0) {
				fprintf(stderr,
					"flush after %ld: %s (last acknowledged seq %llu)\n", i + 1,
					err.msg, (unsigned long long)logc_last_seq(lc));
				logc_close(lc);
				return 1;
			}
			if (!quiet || i + 1 == n)
				printf("acked %llu\n", (unsigned long long)logc_last_seq(lc));
			fflush(stdout);
		}
	}
	logc_close(lc);
	return 0;
}
