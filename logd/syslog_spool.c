/* The syslog exporter's spool: one destination's queue of formatted
 * messages while they wait for the collector. Records and checkpoints are
 * queued apart so that records, when the spool is full, give way without
 * ever taking a checkpoint with them; they leave in the order they came.
 * Not thread-safe: syslog.c holds the sink's lock around every call. */
#include "logd/logd_int.h"

#include <stdlib.h>
#include <string.h>

/* Records live in fixed chunks, appended at the tail one after another and
 * freed once read: a spool that grows never copies what it holds (growing
 * happens on the writer's thread, which must not stall). A chunk holds at
 * least one message of the largest size. */
#define CHUNK_BYTES (32 * 1024)
#define REC_HDR	    20 /* [u32 length][u64 seq][u64 id] */
#define FREE_KEEP   2  /* empty chunks kept for reuse */

struct chunk {
	struct chunk *next;
	size_t head, tail; /* read and write offsets in data */
	uint8_t data[CHUNK_BYTES];
};

struct cp_ent {
	uint64_t id, epoch, size;
	uint32_t len;
	char *msg;
};

struct logx_spool {
	/* records */
	struct chunk *first, *last, *free;
	size_t nchunks, nfree, max_chunks;
	uint64_t records, max_records;
	/* checkpoints: a ring of max_cps */
	struct cp_ent *cps;
	size_t cp_head, cp_count, max_cps;
	uint64_t next_id;
	struct logx_spool_loss loss;
};

_Static_assert(CHUNK_BYTES >= LOGX_MSG_MAX + REC_HDR, "a chunk holds the largest message");

int logx_spool_new(uint64_t max_records, size_t max_bytes, size_t max_cps, struct logx_spool **out)
{
	struct logx_spool *s = calloc(1, sizeof(*s));

	if (!s)
		return PC_ENOMEM;
	s->max_cps = max_cps ? max_cps : 1;
	s->cps = calloc(s->max_cps, sizeof(*s->cps));
	if (!s->cps) {
		free(s);
		return PC_ENOMEM;
	}
	s->max_records = max_records;
	s->max_chunks = max_bytes / CHUNK_BYTES;
	if (s->max_chunks < 2) /* room to write while the oldest chunk drains */
		s->max_chunks = 2;
	*out = s;
	return 0;
}

static void chunk_list_free(struct chunk *c)
{
	while (c) {
		struct chunk *n = c->next;

		free(c);
		c = n;
	}
}

void logx_spool_free(struct logx_spool *s)
{
	if (!s)
		return;
	chunk_list_free(s->first);
	chunk_list_free(s->free);
	for (size_t i = 0; i < s->cp_count; i++)
		free(s->cps[(s->cp_head + i) % s->max_cps].msg);
	free(s->cps);
	free(s);
}

/* The oldest record's header, if any. */
static bool rec_head(const struct logx_spool *s, uint32_t *len, uint64_t *seq, uint64_t *id)
{
	const struct chunk *c = s->first;

	if (!s->records)
		return false;
	memcpy(len, c->data + c->head, 4);
	memcpy(seq, c->data + c->head + 4, 8);
	memcpy(id, c->data + c->head + 12, 8);
	return true;
}

/* Forget the oldest record; a chunk read to its end goes to the free list. */
static void rec_remove(struct logx_spool *s)
{
	struct chunk *c = s->first;
	uint32_t len;

	memcpy(&len, c->data + c->head, 4);
	c->head += REC_HDR + len;
	s->records--;
	if (c->head == c->tail && (c->next || !s->records)) {
		s->first = c->next;
		if (!s->first)
			s->last = NULL;
		s->nchunks--;
		if (s->nfree < FREE_KEEP) {
			c->next = s->free;
			s->free = c;
			s->nfree++;
		} else {
			free(c);
		}
	}
}

static void rec_drop_oldest(struct logx_spool *s)
{
	uint32_t len;
	uint64_t seq, id;

	rec_head(s, &len, &seq, &id);
	if (!s->loss.dropped)
		s->loss.dropped_first = seq;
	s->loss.dropped_last = seq;
	s->loss.dropped++;
	rec_remove(s);
}

static void rec_drop_new(struct logx_spool *s, uint64_t seq)
{
	if (!s->loss.dropped)
		s->loss.dropped_first = seq;
	s->loss.dropped_last = seq;
	s->loss.dropped++;
}

static void rec_push(struct logx_spool *s, uint64_t seq, const void *msg, uint32_t len)
{
	size_t need = REC_HDR + (size_t)len;
	struct chunk *c;

	if (need > CHUNK_BYTES || s->max_records == 0) {
		rec_drop_new(s, seq);
		return;
	}
	while (s->records && s->records >= s->max_records)
		rec_drop_oldest(s);
	c = s->last;
	if (!c || CHUNK_BYTES - c->tail < need) {
		/* a new chunk; at the limit the oldest chunk gives way whole */
		while (s->nchunks >= s->max_chunks && s->records)
			rec_drop_oldest(s);
		if (s->nchunks >= s->max_chunks) {
			rec_drop_new(s, seq);
			return;
		}
		if (s->free) {
			c = s->free;
			s->free = c->next;
			s->nfree--;
		} else if (!(c = malloc(sizeof(*c)))) {
			rec_drop_new(s, seq);
			return;
		}
		c->next = NULL;
		c->head = c->tail = 0;
		if (s->last)
			s->last->next = c;
		else
			s->first = c;
		s->last = c;
		s->nchunks++;
	}
	memcpy(c->data + c->tail, &len, 4);
	memcpy(c->data + c->tail + 4, &seq, 8);
	memcpy(c->data + c->tail + 12, &s->next_id, 8);
	memcpy(c->data + c->tail + REC_HDR, msg, len);
	c->tail += need;
	s->records++;
	s->next_id++;
}

static void cp_remove_at(struct logx_spool *s, size_t i)
{
	/* i-th oldest: shift the older ones up by one, the head moves */
	free(s->cps[(s->cp_head + i) % s->max_cps].msg);
	for (size_t j = i; j > 0; j--)
		s->cps[(s->cp_head + j) % s->max_cps] = s->cps[(s->cp_head + j - 1) % s->max_cps];
	s->cp_head = (s->cp_head + 1) % s->max_cps;
	s->cp_count--;
}

/* Room for one more checkpoint: a checkpoint that a later one of the same
 * tree (same segment, no smaller) covers gives way first, the oldest such;
 * only when every held checkpoint is the last of its tree does the oldest
 * go, counted. */
static void cp_make_room(struct logx_spool *s)
{
	for (size_t i = 0; i < s->cp_count; i++) {
		const struct cp_ent *a = &s->cps[(s->cp_head + i) % s->max_cps];

		for (size_t j = i + 1; j < s->cp_count; j++) {
			const struct cp_ent *b = &s->cps[(s->cp_head + j) % s->max_cps];

			if (b->epoch == a->epoch && b->size >= a->size) {
				s->loss.cps_superseded++;
				cp_remove_at(s, i);
				return;
			}
		}
	}
	s->loss.cps_dropped++;
	cp_remove_at(s, 0);
}

static void cp_push(struct logx_spool *s, uint64_t epoch, uint64_t size, const void *msg,
		    uint32_t len)
{
	struct cp_ent *e;
	char *m = malloc(len ? len : 1);

	if (!m) {
		s->loss.cps_dropped++;
		return;
	}
	memcpy(m, msg, len);
	if (s->cp_count == s->max_cps)
		cp_make_room(s);
	e = &s->cps[(s->cp_head + s->cp_count) % s->max_cps];
	*e =
	    (struct cp_ent){.id = s->next_id++, .epoch = epoch, .size = size, .len = len, .msg = m};
	s->cp_count++;
}

void logx_spool_push(struct logx_spool *s, uint64_t seq, uint64_t epoch, uint64_t cp_size,
		     const void *msg, uint32_t len)
{
	if (seq)
		rec_push(s, seq, msg, len);
	else
		cp_push(s, epoch, cp_size, msg, len);
}

/* Which queue holds the oldest message: 1 records, 2 checkpoints, 0 none. */
static int oldest(const struct logx_spool *s, uint32_t *len)
{
	uint32_t rlen = 0;
	uint64_t rseq, rid;
	bool r = rec_head(s, &rlen, &rseq, &rid);
	const struct cp_ent *c = s->cp_count ? &s->cps[s->cp_head] : NULL;

	if (r && (!c || rid < c->id)) {
		*len = rlen;
		return 1;
	}
	if (c) {
		*len = c->len;
		return 2;
	}
	return 0;
}

int logx_spool_next_len(const struct logx_spool *s)
{
	uint32_t len;

	return oldest(s, &len) ? (int)len : -1;
}

int logx_spool_pop(struct logx_spool *s, void *buf, size_t size, uint64_t *seq)
{
	uint32_t len;
	int q = oldest(s, &len);

	if (!q || len > size)
		return PC_EINVAL;
	if (q == 1) {
		const struct chunk *c = s->first;

		memcpy(seq, c->data + c->head + 4, 8);
		memcpy(buf, c->data + c->head + REC_HDR, len);
		rec_remove(s);
	} else {
		memcpy(buf, s->cps[s->cp_head].msg, len);
		*seq = 0;
		cp_remove_at(s, 0);
	}
	return (int)len;
}

uint64_t logx_spool_count(const struct logx_spool *s)
{
	return s->records + s->cp_count;
}

bool logx_spool_take_loss(struct logx_spool *s, struct logx_spool_loss *out)
{
	*out = s->loss;
	memset(&s->loss, 0, sizeof(s->loss));
	return out->dropped || out->cps_superseded || out->cps_dropped;
}
