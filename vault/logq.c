/* The vault's one logd client, shared by every connection thread through a
 * queue: whichever thread needs an acknowledgement first sends everything
 * queued, flushes once and wakes the others (group commit, leader/follower),
 * so that "no record, no request" costs one logd round trip per batch and
 * no thread hop; a background thread leads for records nobody waits for. */
#include "vault/vault_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct logq_item {
	struct logrec rec;
	char *strs;  /* copies of rec's strings */
	bool wait;   /* a thread waits for the outcome (and frees the item) */
	int outcome; /* 0 pending, 1 acknowledged, <0 lost */
	struct logq_item *next;
};

struct logq {
	/* lock guards everything below but lc, and every queued item's outcome. */
	pthread_mutex_t lock;
	pthread_cond_t work; /* the background thread: records without a waiter */
	pthread_cond_t done; /* waiters: a batch was acknowledged (or not) */
	struct logq_item *head, *tail;
	bool leader; /* a thread is sending and flushing a batch now */
	bool stop;
	struct logc *lc; /* used only by the leader of the moment */
	int timeout_ms;
	pthread_t thr;
};

static const char **rec_str(struct logrec *r, size_t i)
{
	const char **f[] = {&r->sandbox,     &r->policy,    &r->reason,	     &r->rule,
			    &r->domain,	     &r->dns_name,  &r->dns_answers, &r->sni,
			    &r->http_method, &r->http_path, &r->secrets,     &r->message};

	return i < sizeof(f) / sizeof(f[0]) ? f[i] : NULL;
}

static struct logq_item *item_new(const struct logrec *rec)
{
	struct logq_item *it = calloc(1, sizeof(*it));
	size_t total = 0;
	const char **s;
	char *p;

	if (!it)
		return NULL;
	it->rec = *rec;
	for (size_t i = 0; (s = rec_str(&it->rec, i)); i++)
		if (*s)
			total += strlen(*s) + 1;
	it->strs = p = malloc(total + 1);
	if (!p) {
		free(it);
		return NULL;
	}
	for (size_t i = 0; (s = rec_str(&it->rec, i)); i++) {
		if (*s) {
			size_t n = strlen(*s) + 1;

			memcpy(p, *s, n);
			*s = p;
			p += n;
		}
	}
	return it;
}

static void item_free(struct logq_item *it)
{
	if (it) {
		free(it->strs);
		free(it);
	}
}

/* Send and flush everything queued, as the leader: called and returns with
 * the lock held, releases it while talking to logd. Group commit without a
 * hop: the first thread that needs an acknowledgement does the round trip
 * for every record queued until then, and the others wait for its result. */
static void logq_lead(struct logq *q)
{
	struct logq_item *batch, *it, *next;
	struct pc_err e = {0};
	int flushed;

	q->leader = true;
	batch = q->head;
	q->head = q->tail = NULL;
	pthread_mutex_unlock(&q->lock);

	for (it = batch; it; it = it->next) {
		if (logc_send(q->lc, &it->rec, &e) < 0) {
			/* the socket may be full of unread acks: flush, retry once */
			logc_flush(q->lc, q->timeout_ms, NULL);
			if (logc_send(q->lc, &it->rec, &e) < 0)
				it->outcome = -1;
		}
	}
	flushed = logc_flush(q->lc, q->timeout_ms, &e);
	if (flushed < 0)
		pc_log(PC_LOG_ERR, "logd did not acknowledge records: %s", e.msg);

	pthread_mutex_lock(&q->lock);
	for (it = batch; it; it = next) {
		next = it->next;
		if (!it->outcome)
			it->outcome = flushed < 0 ? -1 : 1;
		if (!it->wait)
			item_free(it);
	}
	q->leader = false;
	pthread_cond_broadcast(&q->done);
	if (q->head)
		pthread_cond_signal(&q->work);
}

/* The background thread: leads for records no thread waits for. */
static void *logq_main(void *arg)
{
	struct logq *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		if (q->head && !q->leader)
			logq_lead(q);
		else if (q->stop && !q->head && !q->leader)
			break;
		else
			pthread_cond_wait(q->head && q->leader ? &q->done : &q->work, &q->lock);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

int logq_start(const char *socket, int timeout_ms, struct logq **out, struct pc_err *err)
{
	struct logq *q = calloc(1, sizeof(*q));
	int rc;

	if (!q)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	if ((rc = logc_open(socket, &q->lc, err)) < 0) {
		free(q);
		return rc;
	}
	q->timeout_ms = timeout_ms;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->work, NULL);
	pthread_cond_init(&q->done, NULL);
	if (pthread_create(&q->thr, NULL, logq_main, q) != 0) {
		logc_close(q->lc);
		free(q);
		return pc_err_set(err, PC_EIO, "starting the log thread");
	}
	*out = q;
	return 0;
}

int logq_record(struct logq *q, const struct logrec *rec, bool wait, struct pc_err *err)
{
	struct logq_item *it = item_new(rec);
	int outcome;

	if (!it)
		return pc_err_set(err, PC_ENOMEM, "log record: out of memory");
	it->wait = wait;
	pthread_mutex_lock(&q->lock);
	if (q->stop) {
		pthread_mutex_unlock(&q->lock);
		item_free(it);
		return pc_err_set(err, PC_EIO, "the log queue is stopping");
	}
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	if (!wait) {
		pthread_cond_signal(&q->work);
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	while (!it->outcome) {
		if (!q->leader)
			logq_lead(q); /* our item is in the batch it takes */
		else
			pthread_cond_wait(&q->done, &q->lock);
	}
	outcome = it->outcome;
	pthread_mutex_unlock(&q->lock);
	item_free(it);
	if (outcome < 0)
		return pc_err_set(err, PC_EIO, "logd did not acknowledge the record");
	return 0;
}

void logq_stop(struct logq *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thr, NULL);
	logc_close(q->lc);
	free(q);
}
