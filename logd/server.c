/* portcullis-logd's event loop: accepts clients whose SO_PEERCRED uid is
 * allowed, reads their records with the kernel's credentials of each
 * message, names the sender in each record and refuses what that sender
 * may not write, hands each round's records to the writer in one batch,
 * and acknowledges them once they are in the file. */
#include "logd/logd_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_BURST	256	   /* messages read from one client per round: fairness */
#define BATCH_MAX_BYTES (4u << 20) /* commit early past this much buffered */
#define RECV_VEC	32
/* SCM_CREDENTIALS, and room for a few descriptors: those are closed and
 * the message refused; more than fit truncate it, refused as well */
#define CMSG_ROOM  CMSG_SPACE(sizeof(struct ucred) + 64)
#define EVENTS	   64
#define KEY_LISTEN UINT64_MAX
#define KEY_SIGNAL (UINT64_MAX - 1)
#define KEY_BELL   (1ULL << 32) /* | the slot: a ring's bell rang */

struct client {
	int fd; /* -1: free slot */
	pid_t pid;
	uid_t uid;
	uint32_t pending;     /* records in the current batch */
	uint64_t pending_seq; /* seq of the last of them */
	uint32_t unacked;     /* written, acknowledgement not yet sent (socket full) */
	uint64_t unacked_seq;
	bool want_out;
	/* its record ring (docs/logd.md "The record ring"); NULL: none. What
	 * logd keeps of the ring's state is its own: the shared page is only
	 * read for prod, and only written with what logd publishes */
	struct logring_hdr *rh;
	const uint8_t *rdata;
	uint64_t rcons;	 /* bytes copied out */
	uint64_t racked; /* records acknowledged through it */
	uid_t ring_uid;	 /* the kernel's credentials of the registration */
	/* its bells, eventfds it passed with the ring (-1: none, bells on
	 * the socket): rung by the client, and rung by logd */
	int bell_rd, bell_wr;
};

struct server {
	int lfd, sfd, ep;
	/* the inode every eventfd shares (an anonymous inode's): what a
	 * ring's bells must be */
	dev_t anon_dev;
	ino_t anon_ino;
	struct logw *w;
	const struct logd_server_conf *conf;
	struct client *c;
	unsigned n;
	struct logd_stats st;
	/* receive vectors: RECV_VEC messages, each one byte more than the
	 * largest allowed, so that a longer one shows as truncated */
	struct mmsghdr mv[RECV_VEC];
	struct iovec iov[RECV_VEC];
	uint8_t (*msg)[LOGWIRE_DGRAM_MAX + 1]; /* RECV_VEC of them */
	/* each message's SCM_CREDENTIALS (SO_PASSCRED on the listening
	 * socket, inherited by every accepted one) */
	union {
		struct cmsghdr align;
		uint8_t b[CMSG_ROOM];
	} ctl[RECV_VEC];
	char strbuf[LOGWIRE_MAX];
	uint8_t rbuf[LOGWIRE_MAX]; /* one record copied out of a ring */
	uint64_t last_warn_ms;
	unsigned warn_suppressed;
	uint64_t tick_retry_ms; /* after a failed seal: wait before the next try */
	/* records in the batch whose sender's session ended before the
	 * commit: written all the same, so counted at the commit */
	uint64_t orphaned;
	/* the engine's deferred DNS query records, held until redeemed or
	 * its sessions end (pledge.c) */
	struct pledges *pl;
	char pbuf[LOGWIRE_MAX]; /* a pledge's strings while it is written */
	bool stopping;		/* logd ends: its clients' pledges are not theirs to write */
	uint64_t pledges_written;
};

/* A peer that misbehaves could flood the journal: at most one warning a
 * second, with a count of what was held back. */
__attribute__((format(printf, 2, 3))) static void warn_limited(struct server *s, const char *fmt,
							       ...)
{
	uint64_t now = pc_now_mono_ms();
	char line[600];
	va_list ap;

	if (now - s->last_warn_ms < 1000 && s->last_warn_ms) {
		s->warn_suppressed++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (s->warn_suppressed)
		pc_log(PC_LOG_WARN, "%s (and %u more warnings held back)", line,
		       s->warn_suppressed);
	else
		pc_log(PC_LOG_WARN, "%s", line);
	s->last_warn_ms = now;
	s->warn_suppressed = 0;
}

/* Write a pledge logd held (pledges_take's and pledges_hold's): its
 * engine ended before it redeemed it, or logd holds too many (why). */
struct pledge_out {
	struct server *s;
	const char *why;
};

static void pledge_write(void *ctx, const uint8_t *buf, size_t len)
{
	const struct pledge_out *o = ctx;
	struct server *s = o->s;
	struct logrec rec;
	struct pc_err e;
	uint64_t seq;

	if (logrec_decode_into(buf, len, &rec, s->pbuf, sizeof(s->pbuf), &e) == 0) {
		rec.pledge = 0;
		rec.message = o->why;
		rec.sender = LOGREC_SENDER_ENGINE; /* only the engine's are held */
		if (logw_append(s->w, &rec, &seq, &e) == 0) {
			s->orphaned++;
			s->pledges_written++;
			return;
		}
	}
	pc_log(PC_LOG_ERR, "a pledged DNS query record was not written (%s): %s", o->why, e.msg);
}

/* The last session of pid ended: the records it pledged and did not
 * redeem are written. Not when logd itself stops: the engine lives on
 * and writes them to the next logd. */
static void pledges_end(struct server *s, pid_t pid)
{
	struct pledge_out o = {s, "the engine ended before the query's answer (a pledged record)"};
	size_t n;

	if (s->stopping || !pledges_held(s->pl))
		return;
	for (unsigned i = 0; i < s->n; i++)
		if (s->c[i].fd >= 0 && s->c[i].pid == pid)
			return;
	n = pledges_take(s->pl, pid, pledge_write, &o);
	if (n)
		pc_log(PC_LOG_NOTICE,
		       "pid %ld ended with %zu DNS query record%s pledged and not redeemed: "
		       "written",
		       (long)pid, n, n == 1 ? "" : "s");
}

static void client_close(struct server *s, struct client *c)
{
	pid_t pid = c->pid;

	if (c->fd < 0)
		return;
	epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->rh)
		munmap(c->rh, LOGRING_SIZE);
	if (c->bell_rd >= 0) {
		epoll_ctl(s->ep, EPOLL_CTL_DEL, c->bell_rd, NULL);
		close(c->bell_rd);
	}
	if (c->bell_wr >= 0)
		close(c->bell_wr);
	s->orphaned += c->pending;
	memset(c, 0, sizeof(*c));
	c->fd = c->bell_rd = c->bell_wr = -1;
	pledges_end(s, pid);
}

static bool uid_allowed(const struct server *s, uid_t uid)
{
	for (size_t i = 0; i < s->conf->n_allowed; i++)
		if (s->conf->allowed_uids[i] == uid)
			return true;
	return false;
}

/* The sender a uid is: the configured users' roles; uid 0 is root. */
static enum logrec_sender uid_sender(const struct server *s, uid_t uid)
{
	for (size_t i = 0; i < s->conf->n_allowed; i++)
		if (s->conf->allowed_uids[i] == uid) {
			if (s->conf->senders[i] != LOGREC_SENDER_NONE)
				return s->conf->senders[i];
			break;
		}
	return uid == 0 && uid_allowed(s, 0) ? LOGREC_SENDER_ROOT : LOGREC_SENDER_NONE;
}

/* The kernel's overflow uid and gid (kernel.overflowuid, overflowgid) at
 * their default: what it reports for credentials it does not have. */
#define LOGD_OVERFLOW_ID 65534

/* Close the descriptors of one SCM_RIGHTS message (those the kernel
 * installed: with MSG_CTRUNC, as many as fitted; it dropped the rest). */
static unsigned close_rights(const struct msghdr *mh, struct cmsghdr *c)
{
	const uint8_t *end = (const uint8_t *)mh->msg_control + mh->msg_controllen;
	const uint8_t *data = CMSG_DATA(c);
	size_t len = c->cmsg_len - CMSG_LEN(0);
	unsigned n = 0;

	if (data + len > end)
		len = (size_t)(end - data);
	for (size_t off = 0; off + sizeof(int) <= len; off += sizeof(int)) {
		int fd;

		memcpy(&fd, data + off, sizeof(fd));
		if (fd >= 0)
			close(fd);
		n++;
	}
	return n;
}

/* The uid the kernel attached to a message (SCM_CREDENTIALS): the sender's
 * credentials when it sent, not when it connected — the engine connects
 * as root before it drops privileges — and not what the client claims
 * (only root may pass credentials other than its own). Anything but
 * exactly those credentials is refused, never put down to the uid the
 * connection had at connect time: descriptors (which would also fill
 * logd's table), and control data the kernel truncated — a sender can
 * force that by attaching more descriptors than the buffer holds, and
 * the credentials may then be what was cut. */
enum logd_cred logd_msg_cred(struct msghdr *mh, uid_t *uid, const char **why)
{
	return logd_msg_cred_fd(mh, uid, why, NULL);
}

enum logd_cred logd_msg_cred_fd(struct msghdr *mh, uid_t *uid, const char **why,
				int keep[LOGRING_FDS])
{
	unsigned fds = 0, kept = 0;
	bool found = false, other = false;
	struct ucred cr = {0};

	for (unsigned i = 0; keep && i < LOGRING_FDS; i++)
		keep[i] = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && keep && !kept &&
		    !fds && !(mh->msg_flags & MSG_CTRUNC) &&
		    (c->cmsg_len == CMSG_LEN(sizeof(int)) ||
		     c->cmsg_len == CMSG_LEN(LOGRING_FDS * sizeof(int)))) {
			/* the memfd alone, or with its two bells: perhaps a
			 * ring; the caller decides once the message is parsed */
			kept = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(keep, CMSG_DATA(c), kept * sizeof(int));
		} else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			fds += close_rights(mh, c);
		else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
			 c->cmsg_len >= CMSG_LEN(sizeof(struct ucred)) && !found) {
			memcpy(&cr, CMSG_DATA(c), sizeof(cr));
			found = true;
		} else {
			other = true;
		}
	}
	if (kept && (fds || (mh->msg_flags & MSG_CTRUNC) || other || !found)) {
		/* a ring comes alone, with its credentials */
		for (unsigned i = 0; i < kept; i++) {
			close(keep[i]);
			keep[i] = -1;
		}
		fds += kept;
	}
	if (fds || (mh->msg_flags & MSG_CTRUNC)) {
		*why = fds ? "descriptors attached (logd takes none; closed them)"
			   : "control data truncated (descriptors attached)";
		return LOGD_CRED_BAD;
	}
	if (other || !found) {
		*why = other ? "unexpected control data" : "no credentials";
		return LOGD_CRED_BAD;
	}
	/* pid 0 with the overflow uid and gid: the kernel attached no
	 * credentials when the message was sent (the socket had not asked for
	 * them yet), so these are none, not nobody's. No sender can claim pid
	 * 0 (the kernel finds no such pid). Only the three together: pid 0
	 * alone is also what a sender in a pid namespace logd cannot see
	 * looks like, and its uid is then real. (An overflow uid changed from
	 * its default makes such messages refused: closed.) */
	if (cr.pid == 0 && cr.uid == LOGD_OVERFLOW_ID && cr.gid == LOGD_OVERFLOW_ID)
		return LOGD_CRED_NONE;
	*uid = cr.uid;
	return LOGD_CRED_UID;
}

static void accept_all(struct server *s)
{
	for (;;) {
		struct epoll_event ev = {.events = EPOLLIN};
		struct client *slot = NULL;
		pid_t pid = 0;
		uid_t uid = (uid_t)-1;
		gid_t gid;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
			    errno != ECONNABORTED)
				warn_limited(s, "accept: %s", strerror(errno));
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		/* Credentials on every message from now on: a socket that
		 * connected before the listening one had the option does not
		 * inherit it (messages sent before the accept carry them all
		 * the same). */
		if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &(int){1}, sizeof(int)) < 0 ||
		    pc_unix_peercred(fd, &pid, &uid, &gid, NULL) < 0 || !uid_allowed(s, uid)) {
			s->st.refused++;
			warn_limited(s,
				     "refused a connection from pid %ld uid %ld: not root, the "
				     "engine's or the vault's user (%llu refused so far)",
				     (long)pid, (long)uid, (unsigned long long)s->st.refused);
			close(fd);
			continue;
		}
		for (unsigned i = 0; i < s->n; i++)
			if (s->c[i].fd < 0) {
				slot = &s->c[i];
				break;
			}
		if (!slot) {
			warn_limited(s, "refused a connection from pid %ld: %u clients already",
				     (long)pid, s->n);
			close(fd);
			continue;
		}
		ev.data.u64 = (uint64_t)(slot - s->c);
		if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			warn_limited(s, "epoll: %s", strerror(errno));
			close(fd);
			continue;
		}
		memset(slot, 0, sizeof(*slot));
		slot->fd = fd;
		slot->bell_rd = slot->bell_wr = -1;
		slot->pid = pid;
		slot->uid = uid;
	}
}

/* Anything unexpected ends that peer's session; its earlier records are
 * valid and stay in the batch. */
static void client_reject(struct server *s, struct client *c, const char *why)
{
	s->st.malformed++;
	warn_limited(s,
		     "rejected a malformed message from pid %ld uid %ld and closed its "
		     "connection (%llu rejected so far): %s",
		     (long)c->pid, (long)c->uid, (unsigned long long)s->st.malformed, why);
	client_close(s, c);
}

/* log.witness.required and no recent cosignature: fail closed, nothing
 * written, the sender's flush fails (docs/logd.md). True: the session
 * ended. */
static bool gate_closed(struct server *s, struct client *c)
{
	if (!s->conf->gate || s->conf->gate(s->conf->gate_ctx))
		return false;
	warn_limited(s,
		     "refusing records from pid %ld: no witness cosigned a checkpoint "
		     "recently and log.witness.required is true",
		     (long)c->pid);
	client_close(s, c);
	return true;
}

/* One record message (from a datagram, or copied out of a ring) into the
 * batch. 0: in; 1: the session ended (malformed, or not the sender's to
 * write); <0: the write failed. */
static int client_record(struct server *s, struct client *c, const uint8_t *buf, size_t n,
			 uid_t uid, struct pc_err *err)
{
	enum logrec_sender sender = uid_sender(s, uid);
	struct logrec rec;
	struct pc_err e;
	uint64_t seq;

	if (logrec_decode_into(buf, n, &rec, s->strbuf, sizeof(s->strbuf), &e) < 0) {
		client_reject(s, c, e.msg);
		return 1;
	}
	if (rec.action == LOGREC_SEGMENT) {
		client_reject(s, c, "log-segment records are logd's own");
		return 1;
	}
	if (!logrec_sender_may(sender, &rec)) {
		/* A record its sender may not write: a compromised process
		 * trying to speak for another. As a malformed message, it
		 * ends the session; its earlier records are the sender's own
		 * and stay. */
		s->st.refused_records++;
		warn_limited(s,
			     "refused a %s%s%s record from pid %ld uid %ld (sender %s): that "
			     "sender may not write it; closed its connection (%llu records "
			     "refused so far)",
			     logrec_action_name(rec.action), rec.verdict ? " " : "",
			     rec.verdict ? logrec_verdict_name(rec.verdict) : "", (long)c->pid,
			     (long)uid,
			     sender ? logrec_sender_name(sender) : "none: not a configured user",
			     (unsigned long long)s->st.refused_records);
		client_close(s, c);
		return 1;
	}
	rec.sender = sender;
	if (rec.pledge) {
		struct pledge_out o = {s, "logd held too many pledged records: written before "
					  "the query's answer (its record may follow)"};
		struct pledge *ev;

		if (pledges_hold(s->pl, c->pid, rec.pledge, buf, n) == 0) {
			while ((ev = pledges_over(s->pl)) != NULL) {
				const uint8_t *eb = pledge_rec(ev, &n);

				pledge_write(&o, eb, n);
				free(ev);
			}
			return 0;
		}
		rec.pledge = 0; /* no memory to hold it: written now */
		rec.message = o.why;
	}
	if (rec.redeems) {
		pledges_redeem(s->pl, c->pid, rec.redeems);
		rec.redeems = 0;
	}
	if (logw_append(s->w, &rec, &seq, err) < 0)
		return PC_EIO;
	c->pending++;
	c->pending_seq = seq;
	return 0;
}

/* A bell the client passed with its ring: an eventfd, and nothing else
 * (another user's descriptor, which logd writes to and waits on). An
 * eventfd is an anonymous inode that takes a write of eight zero bytes;
 * of the other anonymous inodes (timerfd, signalfd, epoll, ...) none
 * does, and a pipe, socket or file is no anonymous inode. Made
 * non-blocking: logd never waits on a client's bell. */
static bool bell_valid(const struct server *s, int fd)
{
	const uint64_t zero = 0;
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == s->anon_dev &&
	       st.st_ino == s->anon_ino && fcntl(fd, F_SETFL, O_NONBLOCK) == 0 &&
	       write(fd, &zero, sizeof(zero)) == (ssize_t)sizeof(zero);
}

/* A ring registration: the first descriptor must be a memfd of exactly
 * the ring's size, sealed so that it can neither shrink (a read past its
 * end would kill logd with SIGBUS) nor grow; two more, if any, are its
 * bells (bell_valid): the client's to logd, watched edge-triggered (never
 * read: a bell's count says nothing, and a client cannot keep logd busy
 * with one), and logd's to the client. The sender of its records is
 * whoever sent this message (its credentials, as a datagram's). fd[] is
 * taken (the memfd mapped and closed, or everything closed). */
static void ring_attach(struct server *s, struct client *c, const uint8_t *buf, size_t len,
			uid_t uid, int fd[LOGRING_FDS])
{
	const int need = F_SEAL_SHRINK | F_SEAL_GROW;
	int f = fd[0], bell_rd = fd[1], bell_wr = fd[2], seals;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
	struct pc_err e;
	struct stat st;
	void *map;

	for (unsigned i = 0; i < LOGRING_FDS; i++)
		fd[i] = -1;
	if (f < 0) {
		pc_err_set(&e, PC_EPARSE, "a ring registration without its memfd");
		goto bad;
	}
	if (logwire_ring_decode(buf, len, &e) < 0)
		goto bad;
	/* one ring per session, from its start: acknowledgements then have
	 * one path only */
	if (c->rh || c->pending || c->unacked) {
		pc_err_set(&e, PC_EPARSE, "a ring registration after %s",
			   c->rh ? "a ring" : "records on the socket");
		goto bad;
	}
	/* A ring speaks for whoever registered it, for as long as it lives: a
	 * daemon that registered one before its privilege drop would write as
	 * root after it. Root sends few records; it keeps the socket. */
	if (uid == 0) {
		pc_err_set(&e, PC_EPARSE, "a ring registered by root (root sends on the socket)");
		goto bad;
	}
	if (fstat(f, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size != (off_t)LOGRING_SIZE) {
		pc_err_set(&e, PC_EPARSE, "the ring is not a memfd of %u bytes", LOGRING_SIZE);
		goto bad;
	}
	seals = fcntl(f, F_GET_SEALS);
	if (seals < 0 || (seals & need) != need) {
		pc_err_set(&e, PC_EPARSE,
			   "the ring is not sealed against shrinking and growing (it could be "
			   "cut under logd's reads)");
		goto bad;
	}
	if (bell_rd >= 0 && (!bell_valid(s, bell_rd) || !bell_valid(s, bell_wr))) {
		pc_err_set(&e, PC_EPARSE, "the ring's bells are not eventfds");
		goto bad;
	}
	ev.data.u64 = KEY_BELL | (uint64_t)(c - s->c);
	if (bell_rd >= 0 && epoll_ctl(s->ep, EPOLL_CTL_ADD, bell_rd, &ev) < 0) {
		pc_err_errno(&e, PC_EPARSE, "watching the ring's bell");
		goto bad;
	}
	map = mmap(NULL, LOGRING_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
	if (map == MAP_FAILED) {
		pc_err_errno(&e, PC_EPARSE, "mapping the ring");
		if (bell_rd >= 0)
			epoll_ctl(s->ep, EPOLL_CTL_DEL, bell_rd, NULL);
		goto bad;
	}
	close(f);
	c->rh = map;
	c->rdata = (const uint8_t *)map + LOGRING_HDR;
	c->rcons = c->racked = 0;
	c->ring_uid = uid;
	c->bell_rd = bell_rd;
	c->bell_wr = bell_wr;
	return;
bad:
	if (f >= 0)
		close(f);
	if (bell_rd >= 0)
		close(bell_rd);
	if (bell_wr >= 0)
		close(bell_wr);
	client_reject(s, c, e.msg);
}

/* One datagram from c: its records (one, or a client's batch back to back)
 * into the batch, or the session ends at the first one that is not a
 * record; those before it stay in the batch. A ring registration comes
 * alone; a client with a ring sends bells only. fd[] (the descriptors
 * that came with it, or -1) is taken. */
static int client_dgram(struct server *s, struct client *c, const uint8_t *buf, size_t len,
			bool truncated, uid_t uid, int fd[LOGRING_FDS], struct pc_err *err)
{
	struct pc_err e;
	size_t n;
	int rc;

	if (gate_closed(s, c))
		return 0;
	if (truncated) {
		pc_err_set(&e, PC_EPARSE, "datagram longer than %d bytes", LOGWIRE_DGRAM_MAX);
		goto malformed;
	}
	if (fd[0] >= 0 && logwire_type(buf, len) != LOGWIRE_RING) {
		pc_err_set(&e, PC_EPARSE,
			   "descriptors attached to a message that is no ring registration (logd "
			   "takes none; closed them)");
		goto malformed;
	}
	if (logwire_type(buf, len) == LOGWIRE_RING) {
		ring_attach(s, c, buf, len, uid, fd);
		return 0;
	}
	for (size_t off = 0; off < len; off += n) {
		if (logwire_next(buf + off, len - off, &n, &e) < 0)
			goto malformed;
		if (c->rh) {
			if (logwire_bell_decode(buf + off, n, &e) < 0) {
				pc_err_prefix(&e, "on the socket of a ring: ");
				goto malformed;
			}
			continue;
		}
		rc = client_record(s, c, buf + off, n, uid, err);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	return 0;
malformed:
	for (unsigned i = 0; i < LOGRING_FDS; i++)
		if (fd[i] >= 0) {
			close(fd[i]);
			fd[i] = -1;
		}
	client_reject(s, c, e.msg);
	return 0;
}

/* Bytes [at, at+n) of c's ring, wrapping, into out. */
static void ring_copy(const struct client *c, uint64_t at, uint8_t *out, size_t n)
{
	size_t off = (size_t)(at % LOGRING_DATA);
	size_t first = n < LOGRING_DATA - off ? n : LOGRING_DATA - off;

	memcpy(out, c->rdata + off, first);
	memcpy(out + first, c->rdata, n - first);
}

/* The records c published in its ring since the last look, into the batch
 * (up to READ_BURST; all: every one published now, when its session
 * ends). The ring is the client's memory, which it may change at any
 * moment: prod is read once and bounded, each record is copied out whole
 * (its length read once, from the copy) before the same decoder as a
 * datagram's parses it, and any violation ends the session. */
static int ring_read(struct server *s, struct client *c, bool all, struct pc_err *err)
{
	uint64_t prod;
	struct pc_err e;

	if (!c->rh || c->fd < 0)
		return 0;
	prod = atomic_load_explicit(&c->rh->prod, memory_order_acquire);
	if (prod == c->rcons)
		return 0;
	if (prod < c->rcons || prod - c->rcons > LOGRING_DATA) {
		pc_err_set(&e, PC_EPARSE, "ring index %llu outside %llu..%llu",
			   (unsigned long long)prod, (unsigned long long)c->rcons,
			   (unsigned long long)(c->rcons + LOGRING_DATA));
		goto bad;
	}
	if (gate_closed(s, c))
		return 0;
	for (unsigned got = 0; c->rcons != prod && (all || got < READ_BURST); got++) {
		uint64_t avail = prod - c->rcons;
		uint32_t total;
		int rc;

		if (avail < LOGWIRE_HDR_LEN) {
			pc_err_set(&e, PC_EPARSE, "%llu bytes in the ring, less than a header",
				   (unsigned long long)avail);
			goto bad;
		}
		ring_copy(c, c->rcons, s->rbuf, LOGWIRE_HDR_LEN);
		total = pc_msg_get32(s->rbuf + 4);
		if (total < LOGWIRE_HDR_LEN || total > LOGWIRE_MAX || total > avail) {
			pc_err_set(&e, PC_EPARSE,
				   "a ring record of %u bytes (%llu published, at most %d)", total,
				   (unsigned long long)avail, LOGWIRE_MAX);
			goto bad;
		}
		ring_copy(c, c->rcons + LOGWIRE_HDR_LEN, s->rbuf + LOGWIRE_HDR_LEN,
			  total - LOGWIRE_HDR_LEN);
		c->rcons += total;
		rc = client_record(s, c, s->rbuf, total, c->ring_uid, err);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	atomic_store_explicit(&c->rh->cons, c->rcons, memory_order_release);
	return 0;
bad:
	client_reject(s, c, e.msg);
	return 0;
}

/* Before logd sleeps: say so in every ring, then look once more (the
 * client reads the flag after it publishes). True: records came in
 * meanwhile, do not sleep. */
static bool rings_arm(struct server *s)
{
	bool any = false;

	for (unsigned i = 0; i < s->n; i++)
		if (s->c[i].fd >= 0 && s->c[i].rh)
			atomic_store_explicit(&s->c[i].rh->cons_waiting, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	for (unsigned i = 0; i < s->n; i++)
		if (s->c[i].fd >= 0 && s->c[i].rh &&
		    atomic_load_explicit(&s->c[i].rh->prod, memory_order_relaxed) != s->c[i].rcons)
			any = true;
	return any;
}

static void rings_disarm(struct server *s)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->c[i].fd >= 0 && s->c[i].rh)
			atomic_store_explicit(&s->c[i].rh->cons_waiting, 0, memory_order_relaxed);
}

/* The client ended its session (or was killed): what it published in its
 * ring before is read to the last whole record, as datagrams it sent
 * before are; then the session ends. */
static int client_gone(struct server *s, struct client *c, struct pc_err *err)
{
	int rc = ring_read(s, c, true, err);

	client_close(s, c);
	return rc;
}

/* Read up to READ_BURST records from one client into the batch, RECV_VEC
 * at a time (one system call for many records). */
static int client_read(struct server *s, struct client *c, struct pc_err *err)
{
	enum logd_cred cred[RECV_VEC];
	uid_t uid[RECV_VEC];
	const char *why[RECV_VEC];
	int rfd[RECV_VEC][LOGRING_FDS], rc = 0;

	for (int got = 0; got < READ_BURST && c->fd >= 0;) {
		int n;

		for (int i = 0; i < RECV_VEC; i++)
			s->mv[i].msg_hdr.msg_controllen = sizeof(s->ctl[i]);
		n = recvmmsg(c->fd, s->mv, RECV_VEC, MSG_DONTWAIT | MSG_CMSG_CLOEXEC, NULL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0) /* gone; what it sent is still written */
			return client_gone(s, c, err);
		/* every message first: the descriptors of those after one
		 * that ends the session are in logd's table all the same */
		for (int i = 0; i < n; i++)
			cred[i] = logd_msg_cred_fd(&s->mv[i].msg_hdr, &uid[i], &why[i], rfd[i]);
		for (int i = 0; i < n && c->fd >= 0; i++) {
			/* a message of no bytes is the peer's end */
			if (s->mv[i].msg_len == 0) {
				rc = client_gone(s, c, err);
				break;
			}
			if (cred[i] == LOGD_CRED_BAD) {
				client_reject(s, c, why[i]);
				break;
			}
			/* none: queued before the socket asked for them;
			 * the connection's own credentials (SO_PEERCRED),
			 * which let it in, are the sender's then */
			if (cred[i] == LOGD_CRED_NONE)
				uid[i] = c->uid;
			if (client_dgram(s, c, s->msg[i], s->mv[i].msg_len,
					 s->mv[i].msg_hdr.msg_flags & MSG_TRUNC, uid[i], rfd[i],
					 err) < 0) {
				rc = PC_EIO;
				break;
			}
		}
		for (int i = 0; i < n; i++)
			for (unsigned j = 0; j < LOGRING_FDS; j++)
				if (rfd[i][j] >= 0) /* left by a message after the session ended */
					close(rfd[i][j]);
		if (rc < 0 || c->fd < 0)
			return rc;
		got += n;
		/* fewer than asked for: the socket was empty at that moment,
		 * and the next round's epoll_wait says when it is not (no
		 * recvmmsg just to see EAGAIN, one system call less a round) */
		if (n < RECV_VEC)
			break;
	}
	return 0;
}

static void client_set_out(struct server *s, struct client *c, bool on)
{
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0)};

	if (c->want_out == on)
		return;
	ev.data.u64 = (uint64_t)(c - s->c);
	epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev);
	c->want_out = on;
}

/* Through the ring: the seq, then the count (the client reads them in the
 * other order), and a bell only if the client said it sleeps. */
static void ring_ack(struct server *s, struct client *c)
{
	uint8_t bell[LOGWIRE_HDR_LEN];

	c->racked += c->unacked;
	c->unacked = 0;
	atomic_store_explicit(&c->rh->ack_seq, c->unacked_seq, memory_order_relaxed);
	atomic_store_explicit(&c->rh->acked, c->racked, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&c->rh->prod_waiting, memory_order_relaxed))
		return;
	if (c->bell_wr >= 0) {
		const uint64_t one = 1;

		/* full (the client reads none): it has bells to read already */
		if (write(c->bell_wr, &one, sizeof(one)) < 0 && errno != EAGAIN && errno != EINTR)
			client_close(s, c);
		return;
	}
	logwire_bell_encode(bell, sizeof(bell));
	/* a full socket holds bells the client has not read: it is awake */
	if (send(c->fd, bell, sizeof(bell), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN &&
	    errno != EWOULDBLOCK && errno != EINTR)
		client_close(s, c);
}

/* Send what is written and not yet acknowledged, as one cumulative ack. */
static void client_ack(struct server *s, struct client *c)
{
	uint8_t ack[LOGWIRE_ACK_LEN];

	if (c->fd < 0 || !c->unacked)
		return;
	if (c->rh) {
		ring_ack(s, c);
		return;
	}
	logwire_ack_encode(c->unacked, c->unacked_seq, ack, sizeof(ack));
	if (send(c->fd, ack, sizeof(ack), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(ack)) {
		c->unacked = 0;
		client_set_out(s, c, false);
		return;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		client_set_out(s, c, true); /* keep counting; send when it drains */
		return;
	}
	client_close(s, c);
}

static int batch_commit(struct server *s, struct pc_err *err)
{
	bool any = false;

	for (unsigned i = 0; i < s->n; i++)
		if (s->c[i].pending)
			any = true;
	if (logw_commit(s->w, err) < 0) {
		/* Not in the file: not acknowledged. Ending the sessions makes
		 * their flush fail, so their actions are refused. */
		s->st.write_errors++;
		warn_limited(s, "log write failed, records of this batch refused: %s", err->msg);
		for (unsigned i = 0; i < s->n; i++)
			if (s->c[i].pending)
				client_close(s, &s->c[i]);
		s->orphaned = 0;
		return logw_broken(s->w) ? PC_EIO : 0;
	}
	s->st.records += s->orphaned;
	s->orphaned = 0;
	if (!any)
		return 0;
	for (unsigned i = 0; i < s->n; i++) {
		struct client *c = &s->c[i];

		if (!c->pending)
			continue;
		s->st.records += c->pending;
		c->unacked += c->pending;
		c->unacked_seq = c->pending_seq;
		c->pending = 0;
		client_ack(s, c);
	}
	return 0;
}

/* For the metrics thread: the counters and the writer after this round. */
static void publish(struct server *s)
{
	struct logd_live *l = s->conf->live;
	struct logw_stats ws;
	uint64_t clients = 0;

	if (!l)
		return;
	for (unsigned i = 0; i < s->n; i++)
		clients += s->c[i].fd >= 0;
	logw_stats(s->w, &ws);
	atomic_store(&l->records, s->st.records);
	atomic_store(&l->malformed, s->st.malformed);
	atomic_store(&l->refused, s->st.refused);
	atomic_store(&l->write_errors, s->st.write_errors);
	atomic_store(&l->refused_records, s->st.refused_records);
	atomic_store(&l->clients, clients);
	atomic_store(&l->next_seq, ws.next_seq);
	atomic_store(&l->tree_size, ws.tree_size);
	atomic_store(&l->unsealed, ws.unsealed);
	atomic_store(&l->file_bytes, ws.file_bytes);
	atomic_store(&l->last_cp_ms, ws.last_cp_ms);
	atomic_store(&l->rotate_failures, ws.rotate_failures);
	atomic_store(&l->pledges_held, pledges_held(s->pl));
	atomic_store(&l->pledges_written, s->pledges_written);
}

/* Read the pending signals: 0, with *stop set for SIGTERM/SIGINT (left
 * alone otherwise), or a PC_E* code when the log can no longer be kept. */
static int handle_signal(struct server *s, bool *stop, struct pc_err *err)
{
	struct signalfd_siginfo si;

	while (read(s->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			struct pc_err e;
			int rc = batch_commit(s, err);

			if (rc < 0)
				return rc;
			rc = logw_reopen(s->w, "reopened on SIGHUP (log rotation)", false, &e);
			if (rc < 0) {
				pc_log(PC_LOG_ERR, "reopening the log: %s", e.msg);
				if (logw_broken(s->w)) {
					*err = e;
					return rc;
				}
			} else {
				pc_log(PC_LOG_NOTICE, "log file reopened");
			}
			if (s->conf->on_hup)
				s->conf->on_hup(s->conf->hup_ctx);
		} else {
			*stop = true;
			return 0;
		}
	}
	return 0;
}

int logd_serve(int listen_fd, struct logw *w, const struct logd_server_conf *conf,
	       struct logd_stats *stats, struct pc_err *err)
{
	struct server s = {.lfd = listen_fd, .sfd = -1, .ep = -1, .w = w, .conf = conf};
	struct epoll_event ev;
	sigset_t set;
	int rc = PC_EIO;

	s.msg = malloc(RECV_VEC * sizeof(*s.msg));
	if (!s.msg)
		return pc_err_set(err, PC_ENOMEM, "receive buffers: out of memory");
	for (int i = 0; i < RECV_VEC; i++) {
		s.iov[i].iov_base = s.msg[i];
		s.iov[i].iov_len = sizeof(s.msg[i]);
		s.mv[i].msg_hdr.msg_iov = &s.iov[i];
		s.mv[i].msg_hdr.msg_iovlen = 1;
		s.mv[i].msg_hdr.msg_control = s.ctl[i].b;
		s.mv[i].msg_hdr.msg_controllen = sizeof(s.ctl[i]);
	}
	/* Every message then carries its sender's credentials: a socket
	 * that connects from now on has the option from the start (and each
	 * accepted one gets it again, for those that connected earlier); a
	 * message sent before its accept carries them anyway. */
	if (setsockopt(listen_fd, SOL_SOCKET, SO_PASSCRED, &(int){1}, sizeof(int)) < 0) {
		free(s.msg);
		return pc_err_errno(err, PC_EIO, "SO_PASSCRED on the socket");
	}
	/* accept until EAGAIN: the listening socket must not block */
	if (fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK) < 0) {
		free(s.msg);
		return pc_err_errno(err, PC_EIO, "making the socket non-blocking");
	}
	s.n = conf->max_clients ? conf->max_clients : 64;
	s.c = calloc(s.n, sizeof(*s.c));
	if (!s.c) {
		free(s.msg);
		return pc_err_set(err, PC_ENOMEM, "clients: out of memory");
	}
	for (unsigned i = 0; i < s.n; i++)
		s.c[i].fd = s.c[i].bell_rd = s.c[i].bell_wr = -1;
	if (pledges_new(&s.pl, err) < 0) {
		free(s.c);
		free(s.msg);
		return PC_ENOMEM;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	s.sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	s.ep = epoll_create1(EPOLL_CLOEXEC);
	if (s.sfd < 0 || s.ep < 0) {
		pc_err_errno(err, PC_EIO, "signalfd/epoll");
		goto out;
	}
	{
		int efd = eventfd(0, EFD_CLOEXEC);
		struct stat st;

		if (efd < 0 || fstat(efd, &st) < 0) {
			pc_err_errno(err, PC_EIO, "eventfd");
			if (efd >= 0)
				close(efd);
			goto out;
		}
		close(efd);
		s.anon_dev = st.st_dev;
		s.anon_ino = st.st_ino;
	}
	ev.events = EPOLLIN;
	ev.data.u64 = KEY_LISTEN;
	if (epoll_ctl(s.ep, EPOLL_CTL_ADD, s.lfd, &ev) < 0) {
		pc_err_errno(err, PC_EIO, "epoll");
		goto out;
	}
	ev.data.u64 = KEY_SIGNAL;
	if (epoll_ctl(s.ep, EPOLL_CTL_ADD, s.sfd, &ev) < 0) {
		pc_err_errno(err, PC_EIO, "epoll");
		goto out;
	}
	publish(&s);
	for (;;) {
		struct epoll_event evs[EVENTS];
		uint64_t now = pc_now_mono_ms(), due = logw_next_tick_ms(w);

		if (due < s.tick_retry_ms)
			due = s.tick_retry_ms;
		int timeout = due > now ? (int)(due - now < 60000 ? due - now : 60000) : 0;
		int n, sig = 0;

		if (rings_arm(&s))
			timeout = 0;
		n = epoll_wait(s.ep, evs, EVENTS, timeout);
		rings_disarm(&s);

		if (n < 0 && errno != EINTR) {
			pc_err_errno(err, PC_EIO, "epoll_wait");
			goto out;
		}
		for (int i = 0; i < n; i++) {
			uint64_t key = evs[i].data.u64;
			struct client *c;

			if (key == KEY_LISTEN) {
				accept_all(&s);
				continue;
			}
			if (key == KEY_SIGNAL) {
				sig = 1;
				continue;
			}
			if (key & KEY_BELL)
				continue; /* every ring is read below */
			c = &s.c[key];
			if (c->fd < 0)
				continue;
			if (evs[i].events & EPOLLOUT)
				client_ack(&s, c);
			if (c->fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) &&
			    client_read(&s, c, err) < 0)
				goto out;
			/* Records carry sandbox-chosen strings that can grow
			 * six-fold as JSON: bound what a round holds. */
			if (logw_pending(w) > BATCH_MAX_BYTES && batch_commit(&s, err) < 0)
				goto out;
		}
		for (unsigned i = 0; i < s.n; i++) {
			if (ring_read(&s, &s.c[i], false, err) < 0)
				goto out;
			if (logw_pending(w) > BATCH_MAX_BYTES && batch_commit(&s, err) < 0)
				goto out;
		}
		if (batch_commit(&s, err) < 0)
			goto out;
		if (sig) {
			bool stop = false;

			if (handle_signal(&s, &stop, err) < 0)
				goto out;
			if (stop)
				break;
		}
		now = pc_now_mono_ms();
		if (now >= logw_next_tick_ms(w) && now >= s.tick_retry_ms) {
			uint64_t side = logd_sidecar_errors();
			struct pc_err e;

			if (logw_tick(w, &e) < 0) {
				s.tick_retry_ms = now + 1000;
				/* a sidecar that could not be re-signed was
				 * reported as such (logd_sidecar_failed); the log
				 * itself is sealed */
				if (logd_sidecar_errors() == side)
					warn_limited(&s, "sealing the log: %s", e.msg);
				if (logw_broken(w)) {
					*err = e;
					goto out;
				}
			}
		}
		publish(&s);
	}
	rc = 0;
out:
	s.stopping = true;
	for (unsigned i = 0; i < s.n; i++)
		client_close(&s, &s.c[i]);
	if (pledges_held(s.pl))
		pc_log(PC_LOG_NOTICE,
		       "%zu DNS query records pledged and not redeemed left unwritten: their "
		       "engine writes them to the next logd",
		       pledges_held(s.pl));
	pledges_free(s.pl);
	if (s.ep >= 0)
		close(s.ep);
	if (s.sfd >= 0)
		close(s.sfd);
	free(s.c);
	free(s.msg);
	if (stats)
		*stats = s.st;
	return rc;
}
