/* DNS over TCP in the engine: each direction of a port-53 connection is a
 * stream of length-prefixed messages (RFC 7766). A message that spans
 * segments is put together here before it is judged; nothing of it passes
 * before that (docs/engine.md, "DNS over TCP"). */
#include "engine/engine_int.h"

#include <stdlib.h>
#include <string.h>

/* Streams are found by a keyed hash of their flow key (which the sandbox
 * chooses); the list of all of them is walked to forget idle ones. */
#define DNSTCP_BUCKETS 64

struct dnstcp_table {
	struct dnstcp_stream *head;
	struct dnstcp_stream *b[DNSTCP_BUCKETS];
	size_t n, max;
	uint8_t hkey[HKEY_BYTES];
	struct quota_map *quota; /* streams per sandbox */
};

int dnstcp_table_new(size_t max, struct dnstcp_table **out)
{
	struct dnstcp_table *t = calloc(1, sizeof(*t));

	if (!t)
		return PC_ENOMEM;
	t->max = max;
	if (hkey_new(t->hkey) < 0 || quota_map_new(&t->quota) < 0) {
		free(t);
		return PC_ENOMEM;
	}
	*out = t;
	return 0;
}

uint64_t dnstcp_key_hash(const struct dnstcp_table *t, const struct flow_key *k)
{
	return hkey_hash(t->hkey, k, sizeof(*k));
}

static struct dnstcp_stream **dnstcp_bucket(struct dnstcp_table *t, const struct flow_key *k)
{
	return &t->b[dnstcp_key_hash(t, k) & (DNSTCP_BUCKETS - 1)];
}

static void stream_bytes_free(struct dnstcp_stream *s)
{
	if (!s)
		return;
	free(s->buf);
	free(s->rw);
	free(s);
}

/* Out of the table (both lists, the quota), then freed with the
 * resolver's direction it owns. */
static void dnstcp_stream_free(struct dnstcp_table *t, struct dnstcp_stream *s)
{
	struct dnstcp_stream **pp;

	for (pp = dnstcp_bucket(t, &s->key); *pp && *pp != s; pp = &(*pp)->hnext)
		;
	if (*pp)
		*pp = s->hnext;
	quota_give(t->quota, s->sandbox);
	t->n--;
	stream_bytes_free(s->rev);
	stream_bytes_free(s);
}

/* The other direction's key. */
static void key_reverse(struct flow_key *r, const struct flow_key *k)
{
	*r = *k;
	memcpy(r->src, k->dst, sizeof(r->src));
	memcpy(r->dst, k->src, sizeof(r->dst));
	r->sport = k->dport;
	r->dport = k->sport;
}

void dnstcp_table_free(struct dnstcp_table *t)
{
	if (!t)
		return;
	while (t->head) {
		struct dnstcp_stream *s = t->head;

		t->head = s->next;
		dnstcp_stream_free(t, s);
	}
	quota_map_free(t->quota);
	free(t);
}

size_t dnstcp_count(const struct dnstcp_table *t)
{
	return t ? t->n : 0;
}

size_t dnstcp_capacity(const struct dnstcp_table *t)
{
	return t ? t->max : 0;
}

size_t dnstcp_used(struct dnstcp_table *t, const char *sandbox)
{
	return t ? quota_used(t->quota, sandbox) : 0;
}

/* Forget streams idle for DNSTCP_IDLE_MS. */
static void dnstcp_expire(struct dnstcp_table *t, uint64_t now_ms)
{
	struct dnstcp_stream **pp = &t->head;

	while (*pp) {
		struct dnstcp_stream *s = *pp;

		/* a connection is idle when neither direction moves */
		uint64_t last =
		    s->rev && s->rev->last_ms > s->last_ms ? s->rev->last_ms : s->last_ms;

		if (now_ms - last > DNSTCP_IDLE_MS) {
			*pp = s->next;
			dnstcp_stream_free(t, s);
		} else {
			pp = &s->next;
		}
	}
}

struct dnstcp_stream *dnstcp_get(struct dnstcp_table *t, const struct flow_key *k, uint64_t now_ms)
{
	struct dnstcp_stream *s;
	struct flow_key r;

	if (!t)
		return NULL;
	dnstcp_expire(t, now_ms);
	for (s = *dnstcp_bucket(t, k); s; s = s->hnext)
		if (memcmp(&s->key, k, sizeof(*k)) == 0)
			return s;
	/* the resolver's direction of a connection kept from the SYN */
	key_reverse(&r, k);
	for (s = *dnstcp_bucket(t, &r); s; s = s->hnext)
		if (s->rev && memcmp(&s->key, &r, sizeof(r)) == 0)
			return s->rev;
	return NULL;
}

int dnstcp_add(struct dnstcp_table *t, const struct flow_key *k, uint32_t seq, uint64_t now_ms,
	       const char *sandbox, size_t n_sandboxes, struct dnstcp_stream **out, char *given_up)
{
	struct dnstcp_stream *s, **b, *v = NULL;
	size_t share, most;
	int rc;

	if (given_up)
		given_up[0] = '\0';
	if (!t)
		return PC_EINVAL;
	dnstcp_expire(t, now_ms);
	share = quota_share(t->max, n_sandboxes);
	/* Room is lent as in the held-flow table (docs/engine.md, "Per-sandbox
	 * quotas"): a stream lives from its connection's SYN until 10 s after
	 * its last segment, so a hard cap of 256 / n let a sandbox among
	 * 1,000 open one DNS-over-TCP connection per queue thread per 10 s. */
	if (t->n >= t->max) {
		if (quota_used(t->quota, sandbox) >= share)
			return PC_EREFUSED;
		most = quota_most(t->quota, share, NULL, NULL);
		/* newest first: the last of theirs is the oldest (at most the
		 * table's 256, and only when it is full) */
		for (s = t->head; most && s; s = s->next)
			if (quota_used(t->quota, s->sandbox) == most)
				v = s;
		if (!v)
			return PC_EAGAIN;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return PC_ENOMEM;
	if (v) {
		if (given_up)
			pc_strlcpy(given_up, v->sandbox, POLICY_NAME_MAX);
		dnstcp_del(t, v);
	}
	rc = quota_take(t->quota, sandbox, SIZE_MAX);
	if (rc < 0) {
		free(s);
		return rc;
	}
	s->key = *k;
	s->base = seq;
	s->last_ms = now_ms;
	pc_strlcpy(s->sandbox, sandbox, sizeof(s->sandbox));
	s->next = t->head;
	t->head = s;
	b = dnstcp_bucket(t, k);
	s->hnext = *b;
	*b = s;
	t->n++;
	*out = s;
	return 0;
}

void dnstcp_del(struct dnstcp_table *t, struct dnstcp_stream *s)
{
	struct dnstcp_stream **pp;

	if (!t || !s)
		return;
	if (s->owner)
		s = s->owner; /* one direction refused: the connection goes */
	for (pp = &t->head; *pp && *pp != s; pp = &(*pp)->next)
		;
	if (!*pp)
		return; /* not ours: nothing to free */
	*pp = s->next;
	dnstcp_stream_free(t, s);
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

/* The FIN's sequence number, as an offset in s (the first one seen). */
static void dnstcp_fin_at(struct dnstcp_stream *s, const struct pkt *p)
{
	int64_t off = (int32_t)(p->tcp_seq - s->base) + (int64_t)p->payload_len;

	if (off < 0)
		off = 0;
	if (!s->fin || (size_t)off < s->fin_at)
		s->fin_at = (size_t)off;
	s->fin = true;
}

/* ---- a segment's way through its stream ----------------------------------- */

/* One DNS message from a TCP segment: exactly one, complete, after its
 * two-byte length. Returns NULL otherwise. */
static const uint8_t *dnstcp_whole_msg(const struct pkt *p, size_t *len)
{
	size_t l;

	if (p->payload_len < 2)
		return NULL;
	l = (size_t)p->payload[0] << 8 | p->payload[1];
	if (l == 0 || l + 2 != p->payload_len)
		return NULL;
	*len = l;
	return p->payload + 2;
}

/* Release the segment when it lies inside the judged bytes (as judged:
 * rewritten if the message was), else drop it: held while the message is
 * not whole, or sent again later. The stream is forgotten once done. */
static void dnstcp_release(struct dnstcp_table *t, struct dnstcp_stream *st,
			   const struct dnstcp_seg *seg, struct dnstcp_fate *f)
{
	const struct pkt *p = seg->p;
	const uint8_t *bytes;

	f->pass = false;
	if (!dnstcp_releasable(st, p->tcp_seq, p->payload_len, &bytes))
		return;
	f->pass = true;
	if (st->rw) {
		int n =
		    pkt_replace_payload(seg->data, seg->len, p, bytes, p->payload_len, &f->new_pkt);

		if (n < 0)
			f->pass = false; /* sent again; the next copy may fare better */
		else
			f->new_pkt_len = (size_t)n;
	}
	if (!st->syn && dnstcp_done(st))
		dnstcp_del(t, st); /* one kept from the SYN lives as long as its connection */
}

/* A new stream of the sandbox's at seq. Each sandbox may hold its share of
 * the table only: one that sends partial messages or opens connections
 * cannot take another's streams. */
static int stream_open(struct dnstcp_table *t, const struct flow_key *k, uint32_t seq,
		       const char *sandbox, size_t n_sandboxes, uint64_t now_ms,
		       struct dnstcp_stream **s, struct dnstcp_fate *f)
{
	int rc = dnstcp_add(t, k, seq, now_ms, sandbox, n_sandboxes, s, f->given_up);

	if (rc == PC_EREFUSED) {
		f->why = "DNS over TCP: the sandbox's quota of streams being put together "
			 "is used up (engine quota)";
		f->over_quota = true;
		return rc;
	}
	if (rc < 0) {
		f->why = "DNS over TCP: too many streams being put together";
		return PC_EREFUSED;
	}
	return 0;
}

int dnstcp_take(struct dnstcp_table *t, const struct dnstcp_seg *seg, const char *sandbox,
		size_t n_sandboxes, bool from_syn, uint64_t now_ms, struct dnstcp_stream **st,
		const uint8_t **msg, size_t *len, struct dnstcp_fate *f)
{
	const struct pkt *p = seg->p;
	struct dnstcp_stream *s;
	struct flow_key k;
	int rc;

	*st = NULL;
	flow_key_from_pkt(&k, p);
	s = dnstcp_get(t, &k, now_ms);
	if (!s && from_syn && t) {
		/* Judged alone, a whole message says nothing of where the
		 * resolver's framing is: an overlapping segment the receiver
		 * trims (Linux keeps the bytes it got first) would frame the
		 * judged message's tail as the next one (issue 30). */
		f->why = "DNS over TCP: no stream: the guard did not see the connection open "
			 "(or forgot it: idle, or its place given to a sandbox under its share)";
		return PC_EREFUSED;
	}
	if (s && s->failed) {
		/* Its judged bytes are not in the log: resent, they would pass
		 * as judged before with no record of them. */
		f->pass = false;
		f->failed = true;
		return 0;
	}
	if (s && s->syn && !s->confirmed) {
		f->pass = false; /* the resolver has not taken this ISN yet: sent again */
		return 0;
	}
	if (s && s->syn) {
		int64_t off = (int32_t)(p->tcp_seq - s->base);

		if (s->fin && off + (int64_t)p->payload_len > (int64_t)s->fin_at) {
			f->why = "DNS over TCP: bytes overlap: data after the sender's FIN";
			dnstcp_del(t, s);
			return PC_ETAMPER;
		}
	}
	if (!s) {
		if ((*msg = dnstcp_whole_msg(p, len)) != NULL)
			return 1; /* the common case: one whole message, one segment */
		if (!t) {
			f->why = "DNS over TCP: a segment must hold exactly one whole message";
			return PC_EINVAL;
		}
		if (!sandbox) {
			f->why = "DNS over TCP: not a sandbox (no stream is kept for it)";
			return PC_EREFUSED;
		}
		if ((rc = stream_open(t, &k, p->tcp_seq, sandbox, n_sandboxes, now_ms, &s, f)) < 0)
			return rc;
	}
	rc = dnstcp_add_bytes(s, p->tcp_seq, p->payload, p->payload_len, now_ms);
	if (rc == 0 && s->syn && (p->tcp_flags & TH_FIN))
		dnstcp_fin_at(s, p);
	if (rc == PC_EINVAL) {
		f->pass = false; /* before the stream began: nothing to compare it with */
		return 0;
	}
	if (rc == 0) {
		rc = dnstcp_next_msg(s, msg, len);
		if (rc == 1) {
			*st = s;
			return 1;
		}
	}
	switch (rc) {
	case 0:
		break;
	case PC_ETAMPER:
		/* the receiver keeps the bytes it got first: others would
		 * not be the ones the guard judges */
		f->why = s->syn ? "DNS over TCP: bytes overlap kept ones and differ from them"
				: "DNS over TCP: bytes sent again differ from the ones judged";
		break;
	case PC_EREFUSED:
		f->why = "DNS over TCP: more than the engine keeps for one stream";
		break;
	case PC_EPARSE:
		f->why = "DNS over TCP: a message of length 0";
		break;
	default:
		f->why = "out of memory";
		break;
	}
	if (rc < 0) {
		dnstcp_del(t, s);
		return rc;
	}
	dnstcp_release(t, s, seg, f);
	return 0;
}

int dnstcp_allowed(struct dnstcp_table *t, struct dnstcp_stream *st, const struct dnstcp_seg *seg,
		   const uint8_t *rewritten, struct dnstcp_fate *f)
{
	if (dnstcp_judged(st, rewritten) < 0) {
		dnstcp_del(t, st);
		return PC_ENOMEM;
	}
	dnstcp_release(t, st, seg, f);
	return 0;
}

void dnstcp_fail(struct dnstcp_table *t, const struct flow_key *k, uint64_t now_ms)
{
	struct dnstcp_stream *s = dnstcp_get(t, k, now_ms);

	if (s)
		s->failed = true;
}

void dnstcp_forget(struct dnstcp_table *t, const struct pkt *p, uint64_t now_ms)
{
	struct flow_key k;

	flow_key_from_pkt(&k, p);
	dnstcp_del(t, dnstcp_get(t, &k, now_ms));
}

int dnstcp_open(struct dnstcp_table *t, const struct pkt *p, const char *sandbox,
		size_t n_sandboxes, uint64_t now_ms, struct dnstcp_fate *f)
{
	struct dnstcp_stream *s;
	struct flow_key k;
	int rc;

	if (!t)
		return 0; /* no table (policy test): segments are judged alone */
	flow_key_from_pkt(&k, p);
	s = dnstcp_get(t, &k, now_ms);
	if (s && s->syn && s->base == p->tcp_seq + 1)
		return 0; /* the same SYN again */
	/* Another ISN, or a stream forgotten: the stream begins here, but
	 * carries nothing until the resolver's SYN-ACK acknowledges this
	 * ISN. A receiver already in the connection ignores the SYN (a
	 * challenge ACK, no SYN-ACK) and keeps its own next byte, which a
	 * stream based here would misplace. */
	dnstcp_del(t, s);
	if ((rc = stream_open(t, &k, p->tcp_seq + 1, sandbox, n_sandboxes, now_ms, &s, f)) < 0)
		return rc;
	s->syn = true;
	/* The answers are framed from the resolver's first byte too: judged
	 * alone, a segment holding one whole message says nothing of where
	 * the sandbox's TCP frames them, and a stream that was refused or
	 * forgotten mid-answer let a segment cut from inside a record's data
	 * be judged (and taught) as an answer of its own. */
	s->rev = calloc(1, sizeof(*s->rev));
	if (!s->rev) {
		dnstcp_del(t, s);
		f->why = "out of memory";
		return PC_EREFUSED;
	}
	key_reverse(&s->rev->key, &k);
	s->rev->syn = true; /* its base is set by the resolver's SYN-ACK */
	s->rev->owner = s;
	s->rev->last_ms = now_ms;
	pc_strlcpy(s->rev->sandbox, sandbox, sizeof(s->rev->sandbox));
	return 0;
}

/* The acknowledgement number of p's TCP header (struct pkt keeps none). */
static uint32_t tcp_ack_of(const struct pkt *p, const uint8_t *data)
{
	const uint8_t *h = data + p->l4_off;

	return (uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 | (uint32_t)h[10] << 8 | h[11];
}

void dnstcp_synack(struct dnstcp_table *t, const struct pkt *p, const uint8_t *data,
		   uint64_t now_ms)
{
	struct dnstcp_stream *s;
	struct flow_key r, k;
	uint32_t ack = tcp_ack_of(p, data);

	/* the sandbox's direction of the connection */
	flow_key_from_pkt(&r, p);
	key_reverse(&k, &r);
	s = dnstcp_get(t, &k, now_ms);
	if (s && s->syn && ack == s->base) {
		s->confirmed = true;
		/* the first SYN-ACK for this ISN fixes the resolver's (a
		 * retransmitted one carries the same) */
		if (s->rev && !s->rev->confirmed) {
			s->rev->base = p->tcp_seq + 1;
			s->rev->confirmed = true;
		}
	}
}

/* The bytes of s before its receiver's cumulative acknowledgement ack
 * that were judged and released are not needed again: a copy of them sent
 * again falls before the stream and is dropped, which costs a receiver
 * that has them nothing (a sandbox that lied about having them stalls its
 * own connection). Kept, they bounded a connection to DNSTCP_BUF_MAX bytes
 * of answers over its life; now that bounds what is in flight. Moved in
 * pieces of 4 KiB at least (or the whole), so a long connection costs a
 * memmove per 4 KiB, not per segment. The framing stays: the stream's
 * first byte moves to a message boundary already judged. */
static void stream_trim(struct dnstcp_stream *s, uint32_t ack)
{
	int64_t off = (int32_t)(ack - s->base);
	size_t n;

	if (!s->confirmed || off <= 0)
		return;
	n = (size_t)off;
	if (n > s->delivered)
		n = s->delivered;
	if (n > s->judged)
		n = s->judged;
	if (n == 0 || (n < 4096 && n < s->len))
		return;
	memmove(s->buf, s->buf + n, s->len - n);
	if (s->rw)
		memmove(s->rw, s->rw + n, s->judged - n);
	s->len -= n;
	s->judged -= n;
	s->delivered -= n;
	if (s->ahead_end) { /* past delivered: past n */
		s->ahead_start -= n;
		s->ahead_end -= n;
	}
	if (s->fin)
		s->fin_at -= n;
	s->base += (uint32_t)n;
}

void dnstcp_acked(struct dnstcp_table *t, const struct pkt *p, const uint8_t *data, uint64_t now_ms)
{
	struct dnstcp_stream *s;
	struct flow_key k;

	if (!t || !(p->tcp_flags & TH_ACK) || (p->tcp_flags & TH_RST))
		return;
	flow_key_from_pkt(&k, p);
	s = dnstcp_get(t, &k, now_ms);
	/* the sandbox's ACK is of the resolver's bytes: its answers. The
	 * sandbox's own stream keeps its whole history (DNSTCP_BUF_MAX of
	 * queries a connection, as before): every byte of it stays
	 * comparable, as docs/spec.md S12a says. */
	if (s && s->rev)
		stream_trim(s->rev, tcp_ack_of(p, data));
}

void dnstcp_fin(struct dnstcp_table *t, const struct pkt *p, uint64_t now_ms)
{
	struct flow_key k;
	struct dnstcp_stream *s;

	flow_key_from_pkt(&k, p);
	s = dnstcp_get(t, &k, now_ms);
	if (s && s->syn)
		dnstcp_fin_at(s, p);
}
