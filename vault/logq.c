/* The vault's logd client, shared through a queue by everything that makes
 * records. Two ways to serve it:
 * - in the monitor, threads (logq_start): whichever thread needs an
 *   acknowledgement first sends everything queued, flushes once and wakes
 *   the others (group commit, leader/follower); a background thread leads
 *   for records nobody waits for;
 * - in a worker, its event loop (logq_start_loop): once per round, after
 *   the connections that had work ran, everything queued goes to logd in one
 *   batch, and its acknowledgement is an event of the loop that wakes the
 *   connections waiting for it; no thread of its own.
 * Either way "no record, no request" costs one logd round trip per batch. */
#include "vault/vault_int.h"

#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Lazy records (a response's status) are not sent on their own: they ride
 * along with the next acknowledged batch, which a keep-alive connection's
 * next request makes within a fraction of a millisecond under load. The
 * background thread sends them itself only once the oldest waited this
 * long or this many are queued. Per request that saves a thread wake-up
 * and a logd round trip; it delays no decision (nobody waits for these).
 * Other records without a waiter (refusals at accept) go at once. */
#define LOGQ_LAZY_MS	5
#define LOGQ_LAZY_MAX	64
#define LOGQ_SEND_CHUNK 64 /* records handed to logc_send_batch at once */
/* A worker's loop keeps up to two batches in flight: the next leaves while
 * logd writes the one before, so logd may find it without going to sleep
 * and the worker without waiting for the first acknowledgement (bench/
 * report-notes.md, "two batches in flight"). Acknowledgements are
 * cumulative (logc_acked_total), so each batch is covered at its own
 * count. */
#define LOGQ_FLIGHTS 2

struct logq_item {
	struct logrec rec;
	bool wait;	     /* a thread (a coroutine) waits for the outcome */
	struct vloop_co *co; /* loop mode: the coroutine that waits */
	bool lost;	     /* not handed to logd (the leader's own note) */
	int outcome;	     /* 0 pending, 1 acknowledged, <0 lost: atomic */
	/* wait items: posted by the leader that set outcome, or to make the
	 * waiter lead the next batch; one wake per waiter, no herd on the
	 * lock. The waiter may see the outcome before that leader's post (it
	 * was woken to lead meanwhile), so the item is freed by the last of
	 * the two to drop its reference. */
	sem_t sem;
	atomic_int refs;
	struct logq_item *next;
	char strs[]; /* copies of rec's strings: one allocation with the item */
};

struct logq {
	/* lock guards everything below but lc, and every queued item's outcome. */
	pthread_mutex_t lock;
	pthread_cond_t work; /* the background thread: records without a waiter */
	pthread_cond_t done; /* the background thread: the leader finished */
	struct logq_item *head, *tail;
	size_t n;	   /* items queued */
	size_t n_urgent;   /* of which not lazy */
	uint64_t since_ms; /* when the oldest queued item was queued */
	bool leader;	   /* a thread is sending and flushing a batch now */
	bool bg_idle;	   /* the background thread waits with nothing queued */
	bool bg_on_done;   /* the background thread waits for the leader */
	bool stop;
	struct logc *lc; /* used only by the leader of the moment */
	int timeout_ms;
	pthread_t thr;
	/* loop mode (no lock, no thread: one loop's thread uses it) */
	struct vloop *loop;
	struct logq_flight {
		struct logq_item *items;
		uint64_t want;	   /* logc_sent_total once they were sent */
		uint64_t deadline; /* until when logd may acknowledge them */
	} fl[LOGQ_FLIGHTS];	   /* batches sent, not acknowledged: oldest first */
	size_t nfl;
	size_t n_waiters; /* queued items a coroutine waits for */
};

/* Every string field of a record, by number: what a queued copy holds. */
#define REC_STRS 15
static const char **rec_str(struct logrec *r, size_t i)
{
	const char **f[REC_STRS] = {&r->sandbox,     &r->policy,    &r->reason,	     &r->rule,
				    &r->domain,	     &r->dns_name,  &r->dns_answers, &r->sni,
				    &r->http_method, &r->http_path, &r->secrets,     &r->message,
				    &r->code,	     &r->dns_rcode, &r->held_bytes};

	return i < REC_STRS ? f[i] : NULL;
}

static struct logq_item *item_new(const struct logrec *rec)
{
	struct logrec r = *rec;
	struct logq_item *it;
	size_t total = 0, len[REC_STRS];
	const char **s;
	char *p;

	for (size_t i = 0; (s = rec_str(&r, i)); i++) {
		len[i] = *s ? strlen(*s) + 1 : 0;
		total += len[i];
	}
	if (!(it = calloc(1, sizeof(*it) + total)))
		return NULL;
	it->rec = r;
	p = it->strs;
	for (size_t i = 0; (s = rec_str(&it->rec, i)); i++) {
		if (*s) {
			memcpy(p, *s, len[i]);
			*s = p;
			p += len[i];
		}
	}
	return it;
}

static void item_free(struct logq_item *it)
{
	if (it) {
		if (it->wait)
			sem_destroy(&it->sem);
		free(it);
	}
}

static void item_unref(struct logq_item *it)
{
	if (atomic_fetch_sub(&it->refs, 1) == 1)
		item_free(it);
}

/* Send and flush everything queued, as the leader: called and returns with
 * the lock held, releases it while talking to logd. Group commit without a
 * hop: the first thread that needs an acknowledgement does the round trip
 * for every record queued until then, and the others wait for its result. */
static void logq_lead(struct logq *q)
{
	struct logq_item *batch, *it, *next;
	struct pc_err e = {0};
	bool mid_failed = false;
	int flushed;

	q->leader = true;
	batch = q->head;
	q->head = q->tail = NULL;
	q->n = q->n_urgent = 0;
	pthread_mutex_unlock(&q->lock);

	/* LOGQ_SEND_CHUNK records a datagram (or as many as fit one). */
	for (it = batch; it;) {
		const struct logrec *recs[LOGQ_SEND_CHUNK];
		struct logq_item *of[LOGQ_SEND_CHUNK];
		bool sent[LOGQ_SEND_CHUNK];
		size_t n = 0, m = 0;

		for (; it && n < LOGQ_SEND_CHUNK; it = it->next) {
			of[n] = it;
			recs[n++] = &it->rec;
		}
		if (logc_send_batch(q->lc, recs, n, sent, &e) == n)
			continue;
		/* The socket may be full of unread acks: flush, retry once. A
		 * failed flush here is the failure of every record sent
		 * before it, even if the final flush (maybe on a new
		 * connection) succeeds. */
		if (logc_flush(q->lc, q->timeout_ms, NULL) < 0)
			mid_failed = true;
		for (size_t k = 0; k < n; k++)
			if (!sent[k]) {
				of[m] = of[k];
				recs[m++] = recs[k];
			}
		logc_send_batch(q->lc, recs, m, sent, &e);
		for (size_t k = 0; k < m; k++)
			if (!sent[k])
				of[k]->lost = true;
	}
	flushed = logc_flush(q->lc, q->timeout_ms, &e);
	if (mid_failed && flushed == 0) {
		flushed = -1;
		pc_err_set(&e, PC_EIO, "an earlier wait for logd's acknowledgement failed");
	}
	if (flushed < 0)
		pc_log(PC_LOG_ERR, "logd did not acknowledge records: %s", e.msg);

	pthread_mutex_lock(&q->lock);
	for (it = batch; it; it = next) {
		next = it->next;
		if (it->wait) {
			__atomic_store_n(&it->outcome, it->lost || flushed < 0 ? -1 : 1,
					 __ATOMIC_RELEASE);
			sem_post(&it->sem);
			item_unref(it);
		} else {
			item_free(it);
		}
	}
	q->leader = false;
	/* records queued meanwhile: a thread waiting for one leads next */
	for (it = q->head; it; it = it->next)
		if (it->wait) {
			sem_post(&it->sem);
			break;
		}
	if (q->bg_on_done)
		pthread_cond_signal(&q->done);
	if (q->head && q->bg_idle)
		pthread_cond_signal(&q->work);
}

/* The background thread should send what is queued now. */
static bool logq_due(const struct logq *q)
{
	return q->stop || q->n_urgent || q->n >= LOGQ_LAZY_MAX ||
	       pc_now_mono_ms() - q->since_ms >= LOGQ_LAZY_MS;
}

/* Wait on work until the oldest queued item is due (CLOCK_MONOTONIC). */
static void logq_wait_due(struct logq *q)
{
	uint64_t at = q->since_ms + LOGQ_LAZY_MS;
	struct timespec ts = {.tv_sec = (time_t)(at / 1000),
			      .tv_nsec = (long)(at % 1000) * 1000000};

	pthread_cond_timedwait(&q->work, &q->lock, &ts);
}

/* The background thread: leads for records no thread waits for. */
static void *logq_main(void *arg)
{
	struct logq *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		if (q->head && !q->leader && logq_due(q))
			logq_lead(q);
		else if (q->stop && !q->head && !q->leader)
			break;
		else if (q->head && !q->leader)
			logq_wait_due(q);
		else if (q->head) {
			q->bg_on_done = true;
			pthread_cond_wait(&q->done, &q->lock);
			q->bg_on_done = false;
		} else {
			q->bg_idle = true;
			pthread_cond_wait(&q->work, &q->lock);
			q->bg_idle = false;
		}
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

/* ---- loop mode ------------------------------------------------------------ */

/* The oldest batch in flight got its outcome (rc < 0: not acknowledged):
 * wake what waits for it and free what nobody does. */
static void loop_finish_one(struct logq *q, int rc)
{
	struct logq_item *it, *next;

	for (it = q->fl[0].items; it; it = next) {
		next = it->next;
		if (it->wait) {
			it->outcome = it->lost || rc < 0 ? -1 : 1;
			vloop_wake(it->co);
			item_unref(it);
		} else {
			item_free(it);
		}
	}
	memmove(&q->fl[0], &q->fl[1], (q->nfl - 1) * sizeof(q->fl[0]));
	q->nfl--;
}

/* Every batch in flight ends: rc < 0 for all (a lost connection loses
 * every record not covered before it). */
static void loop_finish(struct logq *q, int rc, const struct pc_err *e)
{
	if (rc < 0 && q->nfl)
		pc_log(PC_LOG_ERR, "logd did not acknowledge records: %s", e->msg);
	while (q->nfl)
		loop_finish_one(q, rc);
}

/* What logd acknowledged so far ends the batches it covers; 0 with
 * batches left, <0 when the connection was lost (the rest are lost). */
static int loop_settle(struct logq *q, struct pc_err *e)
{
	uint64_t acked;
	int rc = logc_acked_total(q->lc, &acked, e);

	if (rc < 0) {
		loop_finish(q, rc, e);
		return rc;
	}
	while (q->nfl && q->fl[0].want <= acked)
		loop_finish_one(q, 0);
	return 0;
}

static void loop_ack(void *arg, int fd, short rev);

/* Stop watching the connection's descriptors (they are q's callbacks). */
static void loop_disarm(struct logq *q)
{
	int fds[2];

	logc_loop_fds(q->lc, fds);
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			vloop_disarm(q->loop, fds[i]);
}

/* Watch for the oldest batch's acknowledgement: the connection, and with
 * a ring logd's bell, either waking loop_ack. Batches found covered while
 * arming end now; each pass ends one at least, or returns. */
static void loop_wait_ack(struct logq *q)
{
	struct pc_err e = {0};
	int fds[2];
	bool covered;

	while (q->nfl) {
		if (logc_loop_arm(q->lc, q->fl[0].want, fds, &covered, &e) < 0 || covered) {
			if (loop_settle(q, &e) < 0)
				return;
			continue;
		}
		if (vloop_arm(q->loop, fds[0], POLLIN, loop_ack, q) < 0 ||
		    (fds[1] >= 0 && vloop_arm(q->loop, fds[1], POLLIN, loop_ack, q) < 0)) {
			loop_disarm(q);
			logc_abandon(q->lc);
			loop_finish(q, pc_err_set(&e, PC_EIO, "cannot wait for logd"), &e);
		}
		return;
	}
}

static void loop_ack(void *arg, int fd, short rev)
{
	struct logq *q = arg;
	struct pc_err e = {0};

	(void)rev;
	/* a loss here is reported by loop_settle's count */
	logc_loop_woken(q->lc, fd, &e);
	if (loop_settle(q, &e) == 0)
		loop_wait_ack(q);
}

/* Hand everything queued to logd as one batch, behind those in flight. */
static void loop_send(struct logq *q)
{
	struct logq_flight *f = &q->fl[q->nfl++];
	struct logq_item *it;
	struct pc_err e = {0};
	size_t nsent = 0;

	f->items = q->head;
	q->head = q->tail = NULL;
	q->n = q->n_urgent = q->n_waiters = 0;
	for (it = f->items; it;) {
		const struct logrec *recs[LOGQ_SEND_CHUNK];
		struct logq_item *of[LOGQ_SEND_CHUNK];
		bool sent[LOGQ_SEND_CHUNK];
		size_t n = 0, m;

		for (; it && n < LOGQ_SEND_CHUNK; it = it->next) {
			of[n] = it;
			recs[n++] = &it->rec;
		}
		/* a record the socket refuses now is lost (its request is
		 * refused); the others still go */
		m = logc_send_batch(q->lc, recs, n, sent, &e);
		nsent += m;
		if (m != n)
			for (size_t k = 0; k < n; k++)
				of[k]->lost |= !sent[k];
	}
	f->want = logc_sent_total(q->lc);
	f->deadline = pc_now_mono_ms() + (uint64_t)q->timeout_ms;
	/* The acknowledgement of what just went out cannot be there yet: look
	 * only when nothing went out or the connection was lost under the
	 * send. What logd acknowledged before is then all there will be. */
	if (!nsent || logc_fd(q->lc) < 0) {
		if (loop_settle(q, &e) < 0)
			return;
		if (q->nfl && logc_fd(q->lc) < 0) {
			logc_abandon(q->lc);
			loop_finish(q, pc_err_set(&e, PC_EIO, "logd unreachable"), &e);
			return;
		}
	}
	/* armed once for the oldest; loop_ack arms it again while any is left */
	if (q->nfl == 1)
		loop_wait_ack(q);
}

/* The loop's prep: after the round's connections ran, send what they
 * queued (or what is due), or time the oldest batch in flight out. */
static void loop_prep(void *arg, uint64_t *deadline)
{
	struct logq *q = arg;
	struct pc_err e = {0};

	if (q->nfl && pc_now_mono_ms() >= q->fl[0].deadline && loop_settle(q, &e) == 0 && q->nfl &&
	    pc_now_mono_ms() >= q->fl[0].deadline) {
		/* what came in was looked at: the rest is given up, and the
		 * connection with it */
		loop_disarm(q);
		logc_abandon(q->lc);
		loop_finish(q,
			    pc_err_set(&e, PC_ETIMEOUT, "logd did not acknowledge within %d ms",
				       q->timeout_ms),
			    &e);
	}
	if (q->nfl < LOGQ_FLIGHTS && q->head && (q->n_waiters || logq_due(q)))
		loop_send(q);
	if (q->nfl && q->fl[0].deadline < *deadline)
		*deadline = q->fl[0].deadline;
	else if (!q->nfl && q->head && q->since_ms + LOGQ_LAZY_MS < *deadline)
		*deadline = q->since_ms + LOGQ_LAZY_MS;
}

int logq_start_loop(const char *socket, int timeout_ms, struct vloop *loop, struct logq **out,
		    struct pc_err *err)
{
	struct logq *q = calloc(1, sizeof(*q));
	int rc;

	if (!q)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	if ((rc = logc_open(socket, &q->lc, err)) < 0) {
		free(q);
		return rc;
	}
	/* A worker's records go through a shared-memory ring: a batch costs
	 * a copy and at most an eventfd's write each way, not a datagram
	 * with credentials and its acknowledgement (docs/logd.md, "The
	 * record ring"). logd refuses a ring registered by root, which keeps
	 * the socket (a worker started as root by a test). */
	if (geteuid() != 0 && (rc = logc_use_ring(q->lc, err)) < 0) {
		logc_close(q->lc);
		free(q);
		return rc;
	}
	q->timeout_ms = timeout_ms;
	q->loop = loop;
	pthread_mutex_init(&q->lock, NULL);
	vloop_set_prep(loop, loop_prep, q);
	*out = q;
	return 0;
}

/* The queue's tail: both the loop and the background thread's callers
 * append the same way (the caller holds q->lock where there is one). */
static void queue_append(struct logq *q, struct logq_item *it, bool lazy)
{
	if (q->tail) {
		q->tail->next = it;
	} else {
		q->head = it;
		q->since_ms = pc_now_mono_ms();
	}
	q->tail = it;
	q->n++;
	q->n_urgent += !lazy;
}

static int loop_put(struct logq *q, struct logq_item *it, bool wait, bool lazy, struct pc_err *err)
{
	int outcome;

	/* a record that must be waited for needs a coroutine to wait in */
	if (wait && !(it->co = vloop_self())) {
		item_free(it);
		return pc_err_set(err, PC_EINVAL, "log record: waited for outside the loop");
	}
	queue_append(q, it, lazy);
	if (!wait)
		return 0;
	q->n_waiters++;
	/* woken by loop_finish_one; its batch's deadline bounds it */
	while (!(outcome = it->outcome))
		vloop_park(UINT64_MAX);
	item_unref(it);
	if (outcome < 0)
		return pc_err_set(err, PC_EIO, "logd did not acknowledge the record");
	return 0;
}

/* Wait for every batch in flight and give each its outcome. The
 * callbacks come off first: the flush may reset the connection, and they
 * must not outlive q. */
static void loop_flush_all(struct logq *q)
{
	struct pc_err e = {0};
	int rc;

	if (!q->nfl)
		return;
	loop_disarm(q);
	rc = logc_flush(q->lc, q->timeout_ms, &e);
	loop_finish(q, rc, &e);
}

/* At the end: what is queued or in flight gets its answer, waiting. */
static void loop_stop(struct logq *q)
{
	loop_flush_all(q);
	if (q->head) {
		loop_send(q);
		loop_flush_all(q);
	}
	vloop_set_prep(q->loop, NULL, NULL);
	logc_close(q->lc);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

int logq_start(const char *socket, int timeout_ms, struct logq **out, struct pc_err *err)
{
	struct logq *q = calloc(1, sizeof(*q));
	pthread_condattr_t ca;
	int rc;

	if (!q)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	if ((rc = logc_open(socket, &q->lc, err)) < 0) {
		free(q);
		return rc;
	}
	q->timeout_ms = timeout_ms;
	pthread_mutex_init(&q->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* as pc_now_mono_ms */
	pthread_cond_init(&q->work, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&q->done, NULL);
	if (pthread_create(&q->thr, NULL, logq_main, q) != 0) {
		logc_close(q->lc);
		free(q);
		return pc_err_set(err, PC_EIO, "starting the log thread");
	}
	*out = q;
	return 0;
}

static int logq_put(struct logq *q, const struct logrec *rec, bool wait, bool lazy,
		    struct pc_err *err)
{
	struct logq_item *it = item_new(rec);
	int outcome;

	if (!it)
		return pc_err_set(err, PC_ENOMEM, "log record: out of memory");
	it->wait = wait;
	atomic_init(&it->refs, 2); /* the waiter and the leader of its batch */
	if (wait && sem_init(&it->sem, 0, 0) < 0) {
		it->wait = false;
		item_free(it);
		return pc_err_set(err, PC_EIO, "log record: no semaphore");
	}
	if (q->loop)
		return loop_put(q, it, wait, lazy, err);
	pthread_mutex_lock(&q->lock);
	if (q->stop) {
		pthread_mutex_unlock(&q->lock);
		item_free(it);
		return pc_err_set(err, PC_EIO, "the log queue is stopping");
	}
	queue_append(q, it, lazy);
	if (!wait) {
		/* wake the background thread for a record due now, or when it
		 * is not timing a queued lazy record already (it then waits
		 * until this one is due) */
		if (q->bg_idle || !lazy || q->n >= LOGQ_LAZY_MAX)
			pthread_cond_signal(&q->work);
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	for (;;) {
		if (!q->leader) {
			logq_lead(q); /* our item is in the batch it takes */
			pthread_mutex_unlock(&q->lock);
			outcome = __atomic_load_n(&it->outcome, __ATOMIC_ACQUIRE);
			break;
		}
		pthread_mutex_unlock(&q->lock);
		while (sem_wait(&it->sem) < 0)
			; /* EINTR */
		if ((outcome = __atomic_load_n(&it->outcome, __ATOMIC_ACQUIRE)))
			break;
		pthread_mutex_lock(&q->lock); /* woken to lead the next batch */
	}
	item_unref(it);
	if (outcome < 0)
		return pc_err_set(err, PC_EIO, "logd did not acknowledge the record");
	return 0;
}

int logq_record(struct logq *q, const struct logrec *rec, bool wait, struct pc_err *err)
{
	return logq_put(q, rec, wait, false, err);
}

int logq_record_lazy(struct logq *q, const struct logrec *rec, struct pc_err *err)
{
	return logq_put(q, rec, false, true, err);
}

void logq_stop(struct logq *q)
{
	if (!q)
		return;
	if (q->loop) {
		loop_stop(q);
		return;
	}
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thr, NULL);
	logc_close(q->lc);
	free(q);
}
