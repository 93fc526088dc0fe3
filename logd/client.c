/* The client side of logd's socket (engine, DNS guard, vault, CLI):
 * non-blocking sends, cumulative acknowledgements, and a flush that fails
 * closed — a record logd did not acknowledge is a record that does not
 * exist, and its action must be refused. */
#include "logd/logd.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
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
	/* logd may be down now; sends retry the connection. */
	lc->fd = pc_unix_connect(lc->path, 1, NULL);
	if (lc->fd < 0)
		lc->fd = -1;
	*out = lc;
	return 0;
}

/* Forget the connection. Records sent on it and not acknowledged are lost:
 * remember that, so the next flush reports it. */
static void logc_reset(struct logc *lc, const struct pc_err *why)
{
	if (lc->fd >= 0)
		close(lc->fd);
	lc->fd = -1;
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
static int take_acks(struct logc *lc, struct pc_err *err)
{
	uint8_t buf[LOGWIRE_ACK_LEN + 1];

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

static int logc_connect(struct logc *lc, struct pc_err *err)
{
	int fd = pc_unix_connect(lc->path, 1, err);

	if (fd < 0) {
		pc_err_prefix(err, "logd unreachable: ");
		return fd;
	}
	lc->fd = fd;
	lc->sent = lc->acked = 0;
	return 0;
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
	return send_dgram(lc, buf, (size_t)n, 1, err);
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
		if (lc->lost) {
			/* Reported once: the caller refuses everything since its
			 * last successful flush. */
			lc->lost = false;
			return pc_err_set(err, PC_EIO, "logd did not acknowledge every record: %s",
					  lc->why);
		}
		if (lc->acked == lc->sent)
			return 0;
		now = pc_now_mono_ms();
		if (now >= deadline && !last_look) {
			/* what came in since the last wait still counts */
			last_look = true;
			logc_drain(lc, err);
			continue;
		}
		if (now >= deadline) {
			pc_err_set(err, PC_ETIMEOUT,
				   "logd did not acknowledge %llu records within %d ms",
				   (unsigned long long)(lc->sent - lc->acked), timeout_ms);
			logc_reset(lc, NULL);
			lc->lost = false;
			return PC_ETIMEOUT;
		}
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
	if (lc->lost) {
		lc->lost = false;
		return pc_err_set(err, PC_EIO, "logd did not acknowledge every record: %s",
				  lc->why);
	}
	*all = lc->acked == lc->sent;
	return 0;
}

int logc_send_sync(struct logc *lc, const struct logrec *rec, int timeout_ms, struct pc_err *err)
{
	int rc = logc_send(lc, rec, err);

	if (rc < 0)
		return rc;
	return logc_flush(lc, timeout_ms, err);
}
