/* DNS over TCP in the engine: each direction of a port-53 connection is a
 * stream of length-prefixed messages (RFC 7766). A message that spans
 * segments is put together here before it is judged; nothing of it passes
 * before that (docs/engine.md, "DNS over TCP"). */
#include "appliance/internal.h"

#include <stdlib.h>
#include <string.h>

struct dnstcp_table {
	struct dnstcp_stream *head;
	size_t n, max;
};

int dnstcp_table_new(size_t max, struct dnstcp_table **out)
{
	struct dnstcp_table *t = calloc(1, sizeof(*t));

	if (!t)
		return PC_ENOMEM;
	t->max = max;
	*out = t;
	return 0;
}

static void dnstcp_stream_free(struct dnstcp_stream *s)
{
	free(s->buf);
	free(s->rw);
	free(s);
}

void dnstcp_table_free(struct dnstcp_table *t)
{
	if (!t)
		return;
	while (t->head) {
		struct dnstcp_stream *s = t->head;

		t->head = s->next;
		dnstcp_stream_free(s);
	}
	free(t);
}

size_t dnstcp_count(const struct dnstcp_table *t)
{
	return t ? t->n : 0;
}

/* Forget streams idle for DNSTCP_IDLE_MS. */
static void dnstcp_expire(struct dnstcp_table *t, uint64_t now_ms)
{
	struct dnstcp_stream **pp = &t->head;

	while (*pp) {
		struct dnstcp_stream *s = *pp;

		if (now_ms - s->last_ms > DNSTCP_IDLE_MS) {
			*pp = s->next;
			t->n--;
			dnstcp_stream_free(s);
		} else {
			pp = &s->next;
		}
	}
}

struct dnstcp_stream *dnstcp_get(struct dnstcp_table *t, const struct flow_key *k, uint64_t now_ms)
{
	struct dnstcp_stream *s;

	if (!t)
		return NULL;
	dnstcp_expire(t, now_ms);
	for (s = t->head; s; s = s->next)
		if (memcmp(&s->key, k, sizeof(*k)) == 0)
			return s;
	return NULL;
}

struct dnstcp_stream *dnstcp_add(struct dnstcp_table *t, const struct flow_key *k, uint32_t seq,
				 uint64_t now_ms)
{
	struct dnstcp_stream *s;

	if (!t)
		return NULL;
	dnstcp_expire(t, now_ms);
	if (t->n >= t->max)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->key = *k;
	s->base = seq;
	s->last_ms = now_ms;
	s->next = t->head;
	t->head = s;
	t->n++;
	return s;
}

void dnstcp_del(struct dnstcp_table *t, struct dnstcp_stream *s)
{
	struct dnstcp_stream **pp;

	if (!t || !s)
		return;
	for (pp = &t->head; *pp && *pp != s; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = s->next;
		t->n--;
	}
	dnstcp_stream_free(s);
}

/* Room for need bytes in buf (and rw, when there is one). */
static int dnstcp_reserve(struct dnstcp_stream *s, size_t need)
{
	size_t cap = s->cap ? s->cap : 2048;
	uint8_t *nb, *nr;

	if (need > DNSTCP_BUF_MAX)
		return PC_EREFUSED;
	if (need <= s->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	if (cap > DNSTCP_BUF_MAX)
		cap = DNSTCP_BUF_MAX;
	nb = realloc(s->buf, cap);
	if (!nb)
		return PC_ENOMEM;
	s->buf = nb;
	if (s->rw) {
		nr = realloc(s->rw, cap);
		if (!nr)
			return PC_ENOMEM;
		s->rw = nr;
	}
	s->cap = cap;
	return 0;
}

int dnstcp_add_bytes(struct dnstcp_stream *s, uint32_t seq, const uint8_t *data, size_t n,
		     uint64_t now_ms)
{
	int64_t off = (int32_t)(seq - s->base);
	size_t o, same, fresh;
	int rc;

	if (off < 0)
		return PC_EINVAL; /* before the stream began: nothing to compare with */
	o = (size_t)off;
	s->last_ms = now_ms;
	if (o > s->len)
		return 0; /* a gap: the sender sends again in order */
	same = s->len - o < n ? s->len - o : n;
	/* Bytes sent again must be the ones that were (or are being) judged. */
	if (same && memcmp(s->buf + o, data, same) != 0)
		return PC_ETAMPER;
	fresh = n - same;
	if (!fresh)
		return 0;
	rc = dnstcp_reserve(s, s->len + fresh);
	if (rc)
		return rc;
	memcpy(s->buf + s->len, data + same, fresh);
	s->len += fresh;
	return 0;
}

int dnstcp_next_msg(const struct dnstcp_stream *s, const uint8_t **msg, size_t *len)
{
	size_t l;

	if (s->len - s->judged < 2)
		return 0;
	l = (size_t)s->buf[s->judged] << 8 | s->buf[s->judged + 1];
	if (l == 0)
		return PC_EPARSE;
	if (s->len - s->judged < 2 + l)
		return 0;
	*msg = s->buf + s->judged + 2;
	*len = l;
	return 1;
}

int dnstcp_judged(struct dnstcp_stream *s, const uint8_t *rewritten)
{
	size_t l = (size_t)s->buf[s->judged] << 8 | s->buf[s->judged + 1];

	if (rewritten && !s->rw) {
		s->rw = malloc(s->cap);
		if (!s->rw)
			return PC_ENOMEM;
		memcpy(s->rw, s->buf, s->judged);
	}
	if (s->rw) {
		memcpy(s->rw + s->judged, s->buf + s->judged, 2);
		memcpy(s->rw + s->judged + 2, rewritten ? rewritten : s->buf + s->judged + 2, l);
	}
	s->judged += 2 + l;
	return 0;
}

bool dnstcp_releasable(struct dnstcp_stream *s, uint32_t seq, size_t n, const uint8_t **bytes)
{
	int64_t off = (int32_t)(seq - s->base);
	size_t o;

	if (off < 0 || (size_t)off + n > s->judged)
		return false;
	o = (size_t)off;
	/* nothing judged yet (an empty segment) means no buffer at all */
	*bytes = s->rw ? s->rw + o : s->buf ? s->buf + o : NULL;
	/* What was released: an in-order prefix, and one range past it (the
	 * segment that made a message whole is released before the ones the
	 * sender sends again), joined when they meet. */
	if (o <= s->delivered) {
		if (o + n > s->delivered)
			s->delivered = o + n;
	} else if (s->ahead_end == 0 || o + n < s->ahead_start || o > s->ahead_end) {
		s->ahead_start = o;
		s->ahead_end = o + n;
	} else {
		s->ahead_start = o < s->ahead_start ? o : s->ahead_start;
		s->ahead_end = o + n > s->ahead_end ? o + n : s->ahead_end;
	}
	if (s->ahead_end && s->ahead_start <= s->delivered) {
		if (s->ahead_end > s->delivered)
			s->delivered = s->ahead_end;
		s->ahead_start = s->ahead_end = 0;
	}
	return true;
}

bool dnstcp_done(const struct dnstcp_stream *s)
{
	return s->delivered == s->judged && s->judged == s->len;
}
