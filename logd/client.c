/* The client side of logd's socket (engine, DNS guard, vault, CLI):
 * non-blocking sends, cumulative acknowledgements, and a flush that fails
 * closed — a record logd did not acknowledge is a record that does not
 * exist, and its action must be refused. */
#include "logd/logd_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* Drain pending acknowledgements every this many sends, so that a client
 * that flushes rarely does not let them pile up in its receive buffer. */
#define LOGC_DRAIN_EVERY 32

struct logc {
	char path[PC_PATH_MAX];
	int fd;		   /* -1: not connected (re-made on the next send) */
	uint64_t sent;	   /* records sent on this connection */
	uint64_t acked;	   /* records logd acknowledged on this connection */
	uint64_t last_seq; /* seq of the last acknowledged record */
	bool lost;	   /* a connection died with records unacknowledged */
	char why[160];	   /* ... and why it died */
	unsigned since_drain;
	bool ring_on;		/* records through the ring (logc_use_ring) */
	struct logring_hdr *rh; /* the ring, mapped while connected with one */
	uint8_t *rdata;
	uint64_t rprod;	  /* bytes of records published */
	uint64_t rcons;	  /* logd's cons as last seen (never goes back) */
	uint64_t rkicked; /* rprod when logd was last looked at for a bell */
	/* the ring's bells (eventfds, -1: none): to logd, and from it */
	int bell_out, bell_in;
	uint64_t base;	/* records of the connections before this one */
	uint64_t conns; /* connections made (logc_keepalive) */
};

int logc_open(const char *path, struct logc **out, struct pc_err *err)
{
	struct logc *lc;

	if (!path || !*path || !out)
		return pc_err_set(err, PC_EINVAL, "logc_open: no socket path");
	lc = calloc(1, sizeof(*lc));
	if (!lc)
		return pc_err_set(err, PC_ENOMEM, "logc_open: out of memory");
	if (pc_strlcpy(lc->path, path, sizeof(lc->path)) >= sizeof(lc->path)) {
		free(lc);
		return pc_err_set(err, PC_EINVAL, "logd socket path too long: %s", path);
	}
	lc->bell_out = lc->bell_in = -1;
	/* logd may be down now; sends retry the connection. */
	lc->fd = pc_unix_connect(lc->path, 1, NULL);
	if (lc->fd < 0)
		lc->fd = -1;
	else
		lc->conns++;
	*out = lc;
	return 0;
}

static void bells_close(struct logc *lc)
{
	if (lc->bell_out >= 0)
		close(lc->bell_out);
	if (lc->bell_in >= 0)
		close(lc->bell_in);
	lc->bell_out = lc->bell_in = -1;
}

/* Forget the connection. Records sent on it and not acknowledged are lost:
 * remember that, so the next flush reports it. */
static void logc_reset(struct logc *lc, const struct pc_err *why)
{
	if (lc->fd >= 0)
		close(lc->fd);
	lc->fd = -1;
	bells_close(lc);
	if (lc->rh)
		munmap(lc->rh, LOGRING_SIZE);
	lc->rh = NULL;
	lc->rdata = NULL;
	lc->rprod = lc->rcons = lc->rkicked = 0;
	lc->base += lc->sent; /* the lost ones too: lost is what says so */
	if (lc->sent != lc->acked && !lc->lost) {
		lc->lost = true;
		pc_strlcpy(lc->why, why && why->msg[0] ? why->msg : "connection closed",
			   sizeof(lc->why));
	}
	lc->sent = lc->acked = 0;
	lc->since_drain = 0;
}

void logc_close(struct logc *lc)
{
	if (!lc)
		return;
	if (lc->fd >= 0)
		close(lc->fd);
	bells_close(lc);
	if (lc->rh)
		munmap(lc->rh, LOGRING_SIZE);
	free(lc);
}

uint64_t logc_last_seq(const struct logc *lc)
{
	return lc ? lc->last_seq : 0;
}

/* Read the acknowledgements already queued, without waiting; it stops
 * once every record sent is acknowledged (logd sends nothing more then:
 * no recv just to see EAGAIN, one system call less per flush).
 * 0 ok, <0 the connection is broken (left for the caller to reset). */
static int ring_take_acks(struct logc *lc, struct pc_err *err);

static int take_acks(struct logc *lc, struct pc_err *err)
{
	uint8_t buf[LOGWIRE_ACK_LEN + 1];

	if (lc->rh)
		return ring_take_acks(lc, err);
	while (lc->fd >= 0 && lc->acked != lc->sent) {
		ssize_t n = recv(lc->fd, buf, sizeof(buf), MSG_DONTWAIT);
		uint32_t count;
		uint64_t seq;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0)
			return pc_err_errno(err, PC_EIO, "reading from logd");
		if (n == 0)
			return pc_err_set(err, PC_EIO, "logd closed the connection");
		if (logwire_ack_decode(buf, (size_t)n, &count, &seq, err) < 0) {
			pc_err_prefix(err, "bad acknowledgement from logd: ");
			return PC_EIO;
		}
		if (count > lc->sent - lc->acked)
			return pc_err_set(err, PC_EIO,
					  "logd acknowledged %u records, %llu were pending", count,
					  (unsigned long long)(lc->sent - lc->acked));
		lc->acked += count;
		lc->last_seq = seq;
	}
	return 0;
}

/* A connection lost with records unacknowledged is reported once, by the
 * next flush or count: the caller refuses everything since its last good
 * flush (a reset has already counted the lost records in base). */
static int lost_report(struct logc *lc, struct pc_err *err)
{
	lc->lost = false;
	return pc_err_set(err, PC_EIO, "logd did not acknowledge every record: %s", lc->why);
}

static int logc_drain(struct logc *lc, struct pc_err *err)
{
	int rc = take_acks(lc, err);

	if (rc < 0)
		logc_reset(lc, err);
	return rc;
}

/* The connection failed under a send or a wait: logd may have written and
 * acknowledged part of what was sent before it ended the session (a write
 * that failed after one that did not). Those acknowledgements are still in
 * the receive queue; read them first, so the caller knows how far its
 * records got and nothing acknowledged counts as lost. */
static void logc_drop(struct logc *lc, const struct pc_err *why)
{
	take_acks(lc, NULL);
	logc_reset(lc, why);
}

/* ---- the record ring ------------------------------------------------------
 * logd acknowledges by publishing counts in the shared page; the socket
 * carries only the registration and bells, and a bell is sent only to a
 * side that said it sleeps (its waiting flag, read after a full fence
 * that follows the publication: one of the two always sees the other).
 * The bells are two eventfds passed with the ring, one each way: an
 * eventfd's write and read cost a third of a datagram's send and receive
 * (no buffer to allocate, no credentials attached), and a bell is rung
 * for nearly every batch when both sides sleep between them. */

static int logc_connect(struct logc *lc, struct pc_err *err);

/* The ring for a fresh connection: a sealed memfd (logd maps it and can
 * rely on its size: it cannot shrink under logd's reads), sent once. */
static int ring_setup(struct logc *lc, struct pc_err *err)
{
	uint8_t msg[LOGRING_REG_LEN];
	union {
		struct cmsghdr align;
		uint8_t b[CMSG_SPACE(LOGRING_FDS * sizeof(int))];
	} ctl;
	struct iovec iov = {.iov_base = msg, .iov_len = sizeof(msg)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = sizeof(ctl.b)};
	struct cmsghdr *c;
	void *map = MAP_FAILED;
	int fd = memfd_create("portcullis-logring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int fds[LOGRING_FDS];

	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "record ring: memfd_create");
	lc->bell_out = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	lc->bell_in = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (lc->bell_out < 0 || lc->bell_in < 0) {
		pc_err_errno(err, PC_EIO, "record ring: eventfd");
		goto fail;
	}
	if (ftruncate(fd, LOGRING_SIZE) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		pc_err_errno(err, PC_EIO, "record ring: sizing and sealing the memfd");
		goto fail;
	}
	map = mmap(NULL, LOGRING_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		pc_err_errno(err, PC_EIO, "record ring: mmap");
		goto fail;
	}
	logwire_ring_encode(msg, sizeof(msg));
	memset(&ctl, 0, sizeof(ctl));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	fds[0] = fd;
	fds[1] = lc->bell_out;
	fds[2] = lc->bell_in;
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	if (sendmsg(lc->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(msg)) {
		pc_err_errno(err, PC_EIO, "record ring: handing it to logd");
		goto fail;
	}
	close(fd);
	lc->rh = map;
	lc->rdata = (uint8_t *)map + LOGRING_HDR;
	lc->rprod = lc->rcons = lc->rkicked = 0;
	return 0;
fail:
	if (map != MAP_FAILED)
		munmap(map, LOGRING_SIZE);
	close(fd);
	bells_close(lc);
	return PC_EIO;
}

/* logd's acknowledgements, bounded: never back, never past what was sent. */
static int ring_take_acks(struct logc *lc, struct pc_err *err)
{
	uint64_t a = atomic_load_explicit(&lc->rh->acked, memory_order_acquire);

	if (a < lc->acked || a > lc->sent)
		return pc_err_set(err, PC_EIO,
				  "logd's ring acknowledges %llu records, %llu were sent and %llu "
				  "acknowledged",
				  (unsigned long long)a, (unsigned long long)lc->sent,
				  (unsigned long long)lc->acked);
	if (a != lc->acked) {
		lc->last_seq = atomic_load_explicit(&lc->rh->ack_seq, memory_order_relaxed);
		lc->acked = a;
	}
	return 0;
}

/* Bell logd if it said it sleeps. A full socket is no failure: logd has
 * bells to read already. */
static int ring_kick(struct logc *lc, struct pc_err *err)
{
	uint8_t bell[LOGWIRE_HDR_LEN];

	atomic_thread_fence(memory_order_seq_cst);
	lc->rkicked = lc->rprod;
	if (!atomic_load_explicit(&lc->rh->cons_waiting, memory_order_relaxed))
		return 0;
	if (lc->bell_out >= 0) {
		const uint64_t one = 1;

		/* logd never reads this bell (it watches it edge-triggered),
		 * so a full count (2^64 - 2 bells) would be a wake-up lost:
		 * not to be had in practice, and a broken connection if it
		 * were (the records are refused, a new ring is made) */
		for (;;) {
			if (write(lc->bell_out, &one, sizeof(one)) == (ssize_t)sizeof(one))
				return 0;
			if (errno != EINTR)
				return pc_err_errno(err, PC_EIO, "ringing logd");
		}
	}
	logwire_bell_encode(bell, sizeof(bell));
	for (;;) {
		if (send(lc->fd, bell, sizeof(bell), MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return pc_err_errno(err, PC_EIO, "ringing logd");
	}
}

/* Read the bell that woke us (its content says nothing the page does not);
 * <0 when the connection ended. One read, not a drain to EAGAIN: a bell
 * left over (logd saw the flag of a wait that then found its answer
 * without sleeping) costs the next wait a spurious wake-up, rarer than a
 * second read every time. */
static int ring_take_bell(struct logc *lc, struct pc_err *err)
{
	uint8_t buf[LOGWIRE_ACK_LEN];

	for (;;) {
		ssize_t n = recv(lc->fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n == 0)
			return pc_err_set(err, PC_EIO, "logd closed the connection");
		return pc_err_errno(err, PC_EIO, "reading from logd");
	}
}

/* Read logd's eventfd bell (its count says nothing the page does not). */
static int ring_take_eventfd(struct logc *lc, struct pc_err *err)
{
	uint64_t count;

	if (read(lc->bell_in, &count, sizeof(count)) < 0 && errno != EAGAIN && errno != EINTR)
		return pc_err_errno(err, PC_EIO, "reading logd's bell");
	return 0;
}

/* After a wait on the socket (p) and the bell from logd (b): the bell
 * read, the socket's end or bell found. */
static int ring_woken(struct logc *lc, const struct pollfd *p, const struct pollfd *b,
		      struct pc_err *err)
{
	int rc = b->fd >= 0 && b->revents ? ring_take_eventfd(lc, err) : 0;

	return rc == 0 && p->revents ? ring_take_bell(lc, err) : rc;
}

/* Say that we are about to sleep for logd, then look: the flag first (logd
 * reads it after it publishes), and records published since the last look
 * rung for (the bell's fence orders the flag too), else a fence alone.
 * The caller looks at what it waits for after this, and lowers the flag
 * when it wakes. */
static int ring_say_waiting(struct logc *lc, struct pc_err *err)
{
	atomic_store_explicit(&lc->rh->prod_waiting, 1, memory_order_relaxed);
	if (lc->rkicked != lc->rprod)
		return ring_kick(lc, err);
	atomic_thread_fence(memory_order_seq_cst);
	return 0;
}

static bool ring_all_acked(struct logc *lc)
{
	return atomic_load_explicit(&lc->rh->acked, memory_order_acquire) == lc->sent;
}

static bool ring_has_room(struct logc *lc)
{
	/* want: room for the largest record; checked exactly by ring_put */
	return LOGRING_DATA -
		   (lc->rprod - atomic_load_explicit(&lc->rh->cons, memory_order_acquire)) >=
	       LOGWIRE_MAX;
}

/* Sleep until logd rings, the deadline, or the connection ends: say so
 * first (the flag, then a look at what we wait for: logd reads the flag
 * after it publishes), and make sure logd is awake to see our records.
 * <0: the connection is broken. */
static int ring_sleep(struct logc *lc, uint64_t deadline, bool (*done)(struct logc *),
		      struct pc_err *err)
{
	struct pollfd p[2] = {{.fd = lc->fd, .events = POLLIN},
			      {.fd = lc->bell_in, .events = POLLIN}};
	uint64_t now = pc_now_mono_ms();
	int rc;

	if ((rc = ring_say_waiting(lc, err)) < 0)
		goto out;
	if (done(lc) || now >= deadline)
		goto out;
	if (poll(p, 2, (int)(deadline - now)) < 0 && errno != EINTR) {
		rc = pc_err_errno(err, PC_EIO, "waiting for logd");
		goto out;
	}
	rc = ring_woken(lc, &p[0], &p[1], err);
out:
	atomic_store_explicit(&lc->rh->prod_waiting, 0, memory_order_relaxed);
	return rc;
}

/* One encoded record into the ring, published. Waits up to
 * LOGC_SEND_WAIT_MS for room, as a full socket did, then PC_EAGAIN: the
 * caller refuses. counted: a record logd acknowledges (a pledge is not). */
static int ring_put(struct logc *lc, const uint8_t *buf, size_t n, bool counted, struct pc_err *err)
{
	uint64_t deadline = 0;
	size_t at, first;

	for (;;) {
		uint64_t cons = atomic_load_explicit(&lc->rh->cons, memory_order_acquire);
		uint64_t now;

		if (cons < lc->rcons || cons > lc->rprod)
			return pc_err_set(err, PC_EIO,
					  "logd's ring index %llu is outside %llu..%llu",
					  (unsigned long long)cons, (unsigned long long)lc->rcons,
					  (unsigned long long)lc->rprod);
		lc->rcons = cons;
		if (LOGRING_DATA - (lc->rprod - cons) >= n)
			break;
		now = pc_now_mono_ms();
		if (!deadline)
			deadline = now + LOGC_SEND_WAIT_MS;
		if (now >= deadline)
			return pc_err_set(err, PC_EAGAIN,
					  "logd's record ring stayed full for %d ms (%llu records "
					  "unacknowledged)",
					  LOGC_SEND_WAIT_MS,
					  (unsigned long long)(lc->sent - lc->acked));
		if (ring_sleep(lc, deadline, ring_has_room, err) < 0)
			return PC_EIO;
	}
	at = (size_t)(lc->rprod % LOGRING_DATA);
	first = n < LOGRING_DATA - at ? n : LOGRING_DATA - at;
	memcpy(lc->rdata + at, buf, first);
	memcpy(lc->rdata, buf + first, n - first);
	lc->rprod += n;
	/* release: the record's bytes are there before logd sees the index */
	atomic_store_explicit(&lc->rh->prod, lc->rprod, memory_order_release);
	lc->sent += counted;
	return 0;
}

/* As send_dgram, through the ring: a broken ring or connection is made
 * again once (logd restarted); the records on the old one are lost. */
static int ring_send(struct logc *lc, const uint8_t *buf, size_t n, bool counted,
		     struct pc_err *err)
{
	int rc;

	for (int attempt = 0;; attempt++) {
		if (lc->fd < 0 && (rc = logc_connect(lc, err)) < 0)
			return rc;
		rc = ring_put(lc, buf, n, counted, err);
		if (rc == 0 || rc == PC_EAGAIN)
			return rc;
		logc_drop(lc, err);
		if (attempt > 0)
			return PC_EIO;
	}
}

/* A flush that ran out of time: what was pending is given up (the caller
 * refuses it) and the connection made again by the next send, which is not
 * told of this loss a second time. */
static int flush_timeout(struct logc *lc, int timeout_ms, struct pc_err *err)
{
	pc_err_set(err, PC_ETIMEOUT, "logd did not acknowledge %llu records within %d ms",
		   (unsigned long long)(lc->sent - lc->acked), timeout_ms);
	logc_reset(lc, NULL);
	lc->lost = false;
	return PC_ETIMEOUT;
}

static int ring_flush(struct logc *lc, int timeout_ms, struct pc_err *err)
{
	uint64_t deadline = pc_now_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);

	for (;;) {
		if (lc->lost)
			return lost_report(lc, err);
		if (!lc->rh || lc->acked == lc->sent)
			return 0;
		if (ring_take_acks(lc, err) < 0) {
			logc_reset(lc, err);
			continue;
		}
		if (lc->acked == lc->sent)
			return 0;
		if (pc_now_mono_ms() >= deadline)
			return flush_timeout(lc, timeout_ms, err);
		if (ring_sleep(lc, deadline, ring_all_acked, err) < 0)
			logc_drop(lc, err);
	}
}

int logc_use_ring(struct logc *lc, struct pc_err *err)
{
	if (!lc)
		return pc_err_set(err, PC_EINVAL, "logc_use_ring: no client");
	if (lc->ring_on)
		return 0;
	lc->ring_on = true;
	/* The ring is registered by the next send's connection, not by this
	 * one: a ring speaks for whoever registered it, and this connection
	 * may have been made before a privilege drop (logd refuses root's). */
	if (lc->fd >= 0)
		logc_reset(lc, NULL);
	return 0;
}

static int logc_connect(struct logc *lc, struct pc_err *err)
{
	int rc, fd = pc_unix_connect(lc->path, 1, err);

	if (fd < 0) {
		pc_err_prefix(err, "logd unreachable: ");
		return fd;
	}
	lc->fd = fd;
	lc->sent = lc->acked = 0;
	if (lc->ring_on && (rc = ring_setup(lc, err)) < 0) {
		close(lc->fd);
		lc->fd = -1;
		return rc;
	}
	lc->conns++;
	return 0;
}

int logc_keepalive(struct logc *lc, uint64_t *conns, struct pc_err *err)
{
	struct pollfd p;
	int rc;

	if (!lc || !conns)
		return pc_err_set(err, PC_EINVAL, "logc_keepalive: no client");
	if (lc->fd >= 0) {
		p = (struct pollfd){.fd = lc->fd, .events = POLLIN};
		/* logd's end shows as a hang-up (and a read of nothing);
		 * acknowledgements waiting are read as a flush would */
		if (poll(&p, 1, 0) > 0) {
			if (p.revents & (POLLHUP | POLLERR))
				logc_drop(lc, NULL);
			else if (lc->acked != lc->sent)
				logc_drain(lc, NULL);
		}
	}
	if (lc->fd < 0 && (rc = logc_connect(lc, err)) < 0)
		return rc;
	*conns = lc->conns;
	return 0;
}

bool logc_alive(const struct logc *lc)
{
	struct pollfd p;

	if (!lc || lc->fd < 0)
		return false;
	p = (struct pollfd){.fd = lc->fd, .events = 0};
	return poll(&p, 1, 0) == 0;
}

/* Hand one datagram of nrec records to logd (see logc_send). */
static int send_dgram(struct logc *lc, const uint8_t *buf, size_t n, unsigned nrec,
		      struct pc_err *err)
{
	uint64_t deadline = 0;
	int rc;

	if (lc->fd < 0 && (rc = logc_connect(lc, err)) < 0)
		return rc;
	lc->since_drain += nrec;
	if (lc->since_drain >= LOGC_DRAIN_EVERY) {
		lc->since_drain = 0;
		if (logc_drain(lc, err) < 0 && (rc = logc_connect(lc, err)) < 0)
			return rc;
	}
	for (int attempt = 0;; attempt++) {
		ssize_t w = send(lc->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w == (ssize_t)n) {
			lc->sent += nrec;
			return 0;
		}
		if (w >= 0) /* a datagram is sent whole or not at all */
			return pc_err_set(err, PC_EIO, "short send to logd");
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			/* logd is behind: give it a moment to read (back
			 * pressure), then give up and let the caller refuse. */
			struct pollfd p = {.fd = lc->fd, .events = POLLOUT};
			uint64_t now = pc_now_mono_ms();

			if (!deadline)
				deadline = now + LOGC_SEND_WAIT_MS;
			if (now >= deadline)
				return pc_err_set(
				    err, PC_EAGAIN,
				    "logd's socket stayed full for %d ms (%llu records "
				    "unacknowledged)",
				    LOGC_SEND_WAIT_MS, (unsigned long long)(lc->sent - lc->acked));
			if (logc_drain(lc, err) < 0)
				return PC_EIO;
			if (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)
				return pc_err_errno(err, PC_EIO, "waiting for logd");
			attempt--; /* not a reconnection */
			continue;
		}
		/* logd went away (restart): one fresh connection, then give up. */
		pc_err_errno(err, PC_EIO, "sending to logd");
		logc_drop(lc, err);
		if (attempt > 0 || (rc = logc_connect(lc, err)) < 0)
			return PC_EIO;
	}
}

int logc_send(struct logc *lc, const struct logrec *rec, struct pc_err *err)
{
	uint8_t buf[LOGWIRE_MAX];
	int n;

	if (!lc || !rec)
		return pc_err_set(err, PC_EINVAL, "logc_send: no client or record");
	n = logrec_encode(rec, buf, sizeof(buf), err);
	if (n < 0)
		return n;
	if (lc->ring_on) {
		int rc = ring_send(lc, buf, (size_t)n, true, err);

		/* a failed bell leaves the record in: the flush reports it */
		if (rc == 0 && ring_kick(lc, err) < 0)
			logc_drop(lc, err);
		return rc;
	}
	return send_dgram(lc, buf, (size_t)n, 1, err);
}

int logc_pledge(struct logc *lc, const struct logrec *rec, struct pc_err *err)
{
	uint8_t buf[LOGWIRE_MAX];
	int n, rc;

	if (!lc || !rec || !rec->pledge)
		return pc_err_set(err, PC_EINVAL, "logc_pledge: no client or no pledge");
	n = logrec_encode(rec, buf, sizeof(buf), err);
	if (n < 0)
		return n;
	if (!lc->ring_on)
		return send_dgram(lc, buf, (size_t)n, 0, err);
	rc = ring_send(lc, buf, (size_t)n, false, err);
	/* No bell: logd reads it with the next records that ring, or when
	 * the session ends. Only a ring half full of them wakes logd, so
	 * that a query need not wait for room. */
	if (rc == 0 && lc->rprod - lc->rcons > LOGRING_DATA / 2 && lc->rkicked != lc->rprod &&
	    ring_kick(lc, err) < 0) {
		logc_drop(lc, err);
		return PC_EIO;
	}
	return rc;
}

/* The packed records [from, to) leave as one datagram. */
static int batch_flush(struct logc *lc, const uint8_t *buf, size_t *len, size_t from, size_t to,
		       bool *sent, size_t *done, struct pc_err *err)
{
	int rc = send_dgram(lc, buf, *len, (unsigned)(to - from), err);

	*len = 0;
	if (rc < 0)
		return rc;
	for (size_t k = from; k < to; k++)
		sent[k] = true;
	*done += to - from;
	return 0;
}

/* Each record into the ring, then one bell at most for the batch. */
static size_t ring_send_batch(struct logc *lc, const struct logrec *const *recs, size_t n,
			      bool *sent, struct pc_err *err)
{
	uint8_t buf[LOGWIRE_MAX];
	size_t done = 0;
	bool any = false;

	for (size_t i = 0; i < n; i++) {
		int m = logrec_encode(recs[i], buf, sizeof(buf), err);

		if (m < 0)
			continue; /* it does not encode: not sent, the rest go */
		if (ring_send(lc, buf, (size_t)m, true, err) < 0)
			break; /* nothing more is tried */
		sent[i] = true;
		any = true;
		done++;
	}
	/* a bell that fails leaves them in: the flush finds the connection
	 * ended and reports them lost */
	if (any && lc->fd >= 0 && ring_kick(lc, err) < 0)
		logc_drop(lc, err);
	return done;
}

size_t logc_send_batch(struct logc *lc, const struct logrec *const *recs, size_t n, bool *sent,
		       struct pc_err *err)
{
	uint8_t buf[LOGWIRE_DGRAM_MAX];
	size_t len = 0, from = 0, done = 0; /* recs [from, i) are packed in buf */

	if (!lc || (n && (!recs || !sent))) {
		pc_err_set(err, PC_EINVAL, "logc_send_batch: no client or records");
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		sent[i] = false;
	if (lc->ring_on)
		return ring_send_batch(lc, recs, n, sent, err);
	for (size_t i = 0; i < n;) {
		int m = logrec_encode(recs[i], buf + len, sizeof(buf) - len, NULL);

		if (m >= 0) {
			len += (size_t)m;
			i++;
		} else if (len == 0) {
			/* it does not encode even alone: not sent, the rest go */
			logrec_encode(recs[i], buf, sizeof(buf), err);
			from = ++i;
		} else {
			/* full: this datagram leaves, the record starts the next */
			if (batch_flush(lc, buf, &len, from, i, sent, &done, err) < 0)
				return done; /* nothing more is tried */
			from = i;
		}
	}
	if (len)
		batch_flush(lc, buf, &len, from, n, sent, &done, err);
	return done;
}

int logc_flush(struct logc *lc, int timeout_ms, struct pc_err *err)
{
	uint64_t deadline;
	bool last_look = false;

	if (!lc)
		return pc_err_set(err, PC_EINVAL, "logc_flush: no client");
	if (lc->rh || (lc->ring_on && lc->lost))
		return ring_flush(lc, timeout_ms, err);
	deadline = pc_now_mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
	for (;;) {
		struct pollfd p;
		uint64_t now;

		/* Waited for first, read after: the acknowledgement of what was
		 * just sent cannot be there yet, so a read before the wait only
		 * costs a system call (send, poll, recv per batch). A broken
		 * connection wakes the poll; the drain then resets the counters
		 * and sets lost when records were pending (with nothing pending
		 * it is no failure, and the next send finds it). */
		if (lc->lost)
			return lost_report(lc, err);
		if (lc->acked == lc->sent)
			return 0;
		now = pc_now_mono_ms();
		if (now >= deadline && !last_look) {
			/* what came in since the last wait still counts */
			last_look = true;
			logc_drain(lc, err);
			continue;
		}
		if (now >= deadline)
			return flush_timeout(lc, timeout_ms, err);
		p.fd = lc->fd;
		p.events = POLLIN;
		if (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR) {
			pc_err_errno(err, PC_EIO, "waiting for logd");
			logc_drop(lc, err);
			continue;
		}
		logc_drain(lc, err);
	}
}

int logc_fd(const struct logc *lc)
{
	return lc ? lc->fd : -1;
}

int logc_flush_nb(struct logc *lc, bool *all, struct pc_err *err)
{
	if (!lc || !all)
		return pc_err_set(err, PC_EINVAL, "logc_flush_nb: no client");
	if (lc->acked != lc->sent)
		logc_drain(lc, err);
	if (lc->lost)
		return lost_report(lc, err);
	*all = lc->acked == lc->sent;
	return 0;
}

uint64_t logc_sent_total(const struct logc *lc)
{
	return lc ? lc->base + lc->sent : 0;
}

int logc_acked_total(struct logc *lc, uint64_t *acked, struct pc_err *err)
{
	if (!lc || !acked)
		return pc_err_set(err, PC_EINVAL, "logc_acked_total: no client");
	if (lc->fd >= 0)
		logc_drain(lc, err);
	if (lc->lost)
		return lost_report(lc, err);
	*acked = lc->base + lc->acked;
	return 0;
}

int logc_wait_acked(struct logc *lc, uint64_t want, int fd, int timeout_ms, bool *fd_ready,
		    struct pc_err *err)
{
	struct pollfd p[3] = {{.fd = -1, .events = POLLIN},
			      {.fd = fd, .events = POLLIN},
			      {.fd = -1, .events = POLLIN}};
	int rc = 0;

	if (fd_ready)
		*fd_ready = false;
	if (!lc)
		return pc_err_set(err, PC_EINVAL, "logc_wait_acked: no client");
	if (lc->fd >= 0) {
		p[0].fd = lc->fd;
		p[2].fd = lc->bell_in;
		if (lc->rh) {
			/* as ring_sleep: the flag first, then the look */
			rc = ring_say_waiting(lc, err);
			if (rc == 0 && (rc = ring_take_acks(lc, err)) == 0 &&
			    lc->base + lc->acked >= want)
				goto out;
		} else if (lc->base + lc->acked >= want) {
			return 0;
		}
	}
	if (rc == 0 && poll(p, 3, timeout_ms) < 0 && errno != EINTR)
		rc = pc_err_errno(err, PC_EIO, "waiting for logd");
	if (rc == 0 && fd_ready && fd >= 0 && p[1].revents)
		*fd_ready = true;
	if (rc == 0 && lc->rh)
		rc = ring_woken(lc, &p[0], &p[2], err);
	else if (rc == 0 && p[0].fd >= 0 && p[0].revents)
		rc = take_acks(lc, err);
out:
	if (lc->rh)
		atomic_store_explicit(&lc->rh->prod_waiting, 0, memory_order_relaxed);
	if (rc < 0)
		logc_drop(lc, err); /* what was pending is lost: logc_acked_total says so */
	return rc;
}

void logc_abandon(struct logc *lc)
{
	if (!lc)
		return;
	logc_reset(lc, NULL);
	lc->lost = false;
}

void logc_loop_fds(const struct logc *lc, int fds[2])
{
	fds[0] = lc ? lc->fd : -1;
	fds[1] = lc && lc->rh ? lc->bell_in : -1;
}

int logc_loop_arm(struct logc *lc, uint64_t want, int fds[2], bool *covered, struct pc_err *err)
{
	int rc;

	if (!lc || !fds || !covered)
		return pc_err_set(err, PC_EINVAL, "logc_loop_arm: no client");
	logc_loop_fds(lc, fds);
	/* a loss waiting to be reported counts as covered: nothing to watch,
	 * and logc_acked_total reports it before any count */
	*covered = lc->lost || lc->base + lc->acked >= want;
	/* On the socket the acknowledgements are what the loop watches for:
	 * nothing to say first, and nothing to read yet (what just went out
	 * cannot be acknowledged already). */
	if (*covered || !lc->rh)
		return 0;
	/* as ring_sleep: the flag first, then the look; the flag stays up
	 * until logc_loop_woken, so logd rings while the loop runs other
	 * work too, and the loop takes the bell as one of its events */
	if ((rc = ring_say_waiting(lc, err)) == 0)
		rc = ring_take_acks(lc, err);
	if (rc < 0) {
		logc_drop(lc, err);
		return rc;
	}
	if ((*covered = lc->base + lc->acked >= want))
		atomic_store_explicit(&lc->rh->prod_waiting, 0, memory_order_relaxed);
	return 0;
}

int logc_loop_woken(struct logc *lc, int fd, struct pc_err *err)
{
	int rc;

	if (!lc)
		return pc_err_set(err, PC_EINVAL, "logc_loop_woken: no client");
	/* on the socket, logc_acked_total reads what woke the loop; a
	 * descriptor of a connection since closed says nothing */
	if (!lc->rh || fd < 0 || (fd != lc->fd && fd != lc->bell_in))
		return 0;
	atomic_store_explicit(&lc->rh->prod_waiting, 0, memory_order_relaxed);
	rc = fd == lc->fd ? ring_take_bell(lc, err) : ring_take_eventfd(lc, err);
	if (rc < 0)
		logc_drop(lc, err);
	return rc;
}

int logc_send_sync(struct logc *lc, const struct logrec *rec, int timeout_ms, struct pc_err *err)
{
	int rc = logc_send(lc, rec, err);

	if (rc < 0)
		return rc;
	return logc_flush(lc, timeout_ms, err);
}
