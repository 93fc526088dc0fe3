/* Flow tables of the engine: the registry of allowed flows (what a reload
 * needs to judge them again) and, per queue thread, the TCP flows held
 * until their TLS ClientHello shows the server name. */
#include "engine/engine_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The sandbox chooses every field of a flow key (its ports, and the
 * addresses it sends to): keyed, or it could fill one hash chain. */
static uint64_t key_hash(const uint8_t hkey[HKEY_BYTES], const struct flow_key *k)
{
	return hkey_hash(hkey, k, sizeof(*k));
}

static void flow_key_set(struct flow_key *k, uint8_t family, uint8_t proto, uint16_t sport,
			 uint16_t dport, const uint8_t src[16], const uint8_t dst[16])
{
	memset(k, 0, sizeof(*k));
	k->family = family;
	k->proto = proto;
	k->sport = sport;
	k->dport = dport;
	memcpy(k->src, src, 16);
	memcpy(k->dst, dst, 16);
}

void flow_key_from_pkt(struct flow_key *k, const struct pkt *p)
{
	flow_key_set(k, p->family, p->proto, p->sport, p->dport, p->src.a, p->dst.a);
}

void flow_key_from_ct(struct flow_key *k, const struct ct_tuple *t)
{
	flow_key_set(k, t->family, t->proto, t->sport, t->dport, t->src.a, t->dst.a);
}

static size_t buckets_for(size_t max)
{
	size_t n = 64;

	while (n < max && n < (1u << 22))
		n <<= 1;
	return n;
}

/* ---- registry of allowed flows (shared, mutex) ---------------------------- */

struct reg_ent {
	struct flow_key k;
	struct flow_meta m;
	bool seen;
	struct reg_ent *hnext;	       /* hash chain */
	struct reg_ent *older, *newer; /* age list: evict the oldest */
};

struct flow_registry {
	pthread_mutex_t mu;
	uint8_t hkey[HKEY_BYTES];
	struct reg_ent **b;
	size_t nb, n, max;
	struct reg_ent *oldest, *newest;
};

int flow_registry_new(size_t max, struct flow_registry **out)
{
	struct flow_registry *r = calloc(1, sizeof(*r));

	if (!r)
		return PC_ENOMEM;
	r->max = max ? max : 1;
	r->nb = buckets_for(r->max);
	r->b = calloc(r->nb, sizeof(*r->b));
	if (!r->b || hkey_new(r->hkey) < 0) {
		free(r->b);
		free(r);
		return PC_ENOMEM;
	}
	pthread_mutex_init(&r->mu, NULL);
	*out = r;
	return 0;
}

void flow_registry_free(struct flow_registry *r)
{
	struct reg_ent *e, *n;

	if (!r)
		return;
	for (e = r->oldest; e; e = n) {
		n = e->newer;
		free(e);
	}
	pthread_mutex_destroy(&r->mu);
	free(r->b);
	free(r);
}

/* Under r->mu. Unlink e from its chain and the age list and free it. */
static void reg_remove(struct flow_registry *r, struct reg_ent *e)
{
	struct reg_ent **pp = &r->b[key_hash(r->hkey, &e->k) & (r->nb - 1)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	if (e->older)
		e->older->newer = e->newer;
	else
		r->oldest = e->newer;
	if (e->newer)
		e->newer->older = e->older;
	else
		r->newest = e->older;
	r->n--;
	free(e);
}

static struct reg_ent *reg_find(struct flow_registry *r, const struct flow_key *k)
{
	struct reg_ent *e = r->b[key_hash(r->hkey, k) & (r->nb - 1)];

	while (e && memcmp(&e->k, k, sizeof(*k)) != 0)
		e = e->hnext;
	return e;
}

int flow_registry_put(struct flow_registry *r, const struct flow_key *k, const struct flow_meta *m)
{
	struct reg_ent *e;
	size_t h;

	pthread_mutex_lock(&r->mu);
	e = reg_find(r, k);
	if (e) {
		e->m = *m;
		e->seen = true;
		pthread_mutex_unlock(&r->mu);
		return 0;
	}
	if (r->n >= r->max && r->oldest)
		reg_remove(r, r->oldest);
	e = calloc(1, sizeof(*e));
	if (!e) {
		pthread_mutex_unlock(&r->mu);
		return PC_ENOMEM;
	}
	e->k = *k;
	e->m = *m;
	e->seen = true;
	h = key_hash(r->hkey, k) & (r->nb - 1);
	e->hnext = r->b[h];
	r->b[h] = e;
	e->older = r->newest;
	if (r->newest)
		r->newest->newer = e;
	else
		r->oldest = e;
	r->newest = e;
	r->n++;
	pthread_mutex_unlock(&r->mu);
	return 0;
}

bool flow_registry_get(struct flow_registry *r, const struct flow_key *k, struct flow_meta *m)
{
	struct reg_ent *e;

	pthread_mutex_lock(&r->mu);
	e = reg_find(r, k);
	if (e)
		*m = e->m;
	pthread_mutex_unlock(&r->mu);
	return e != NULL;
}

void flow_registry_del(struct flow_registry *r, const struct flow_key *k)
{
	struct reg_ent *e;

	pthread_mutex_lock(&r->mu);
	e = reg_find(r, k);
	if (e)
		reg_remove(r, e);
	pthread_mutex_unlock(&r->mu);
}

size_t flow_registry_count(struct flow_registry *r)
{
	size_t n;

	pthread_mutex_lock(&r->mu);
	n = r->n;
	pthread_mutex_unlock(&r->mu);
	return n;
}

void flow_registry_unsee_all(struct flow_registry *r)
{
	pthread_mutex_lock(&r->mu);
	for (struct reg_ent *e = r->oldest; e; e = e->newer)
		e->seen = false;
	pthread_mutex_unlock(&r->mu);
}

void flow_registry_seen(struct flow_registry *r, const struct flow_key *k)
{
	struct reg_ent *e;

	pthread_mutex_lock(&r->mu);
	e = reg_find(r, k);
	if (e)
		e->seen = true;
	pthread_mutex_unlock(&r->mu);
}

void flow_registry_sweep(struct flow_registry *r)
{
	struct reg_ent *e, *n;

	pthread_mutex_lock(&r->mu);
	for (e = r->oldest; e; e = n) {
		n = e->newer;
		if (!e->seen)
			reg_remove(r, e);
	}
	pthread_mutex_unlock(&r->mu);
}

/* ---- held flows (one table per queue thread, no lock) ---------------------- */

struct held_table {
	struct held_flow **b;
	size_t nb, n, max;
	size_t n_grace; /* promoted entries, counted apart from n */
	uint8_t hkey[HKEY_BYTES];
	struct quota_map *quota;	 /* entries per sandbox (meta.sandbox) */
	struct quota_map *grace;	 /* promoted entries per sandbox */
	struct held_flow *ghead, *gtail; /* promoted entries, oldest first */
	struct held_flow *gsent;	 /* the first of them whose verdict is unsent */
	uint64_t batch;			 /* the batch being decided (held_batch_begin) */
	uint64_t added;			 /* entries made (their order, for held_add) */
	/* the last flows given up for another sandbox's share (held_add):
	 * their next packet is refused saying so (held_given_up) */
	struct flow_key given[HELD_GIVEN_RING];
	size_t n_given;
};

int held_table_new(size_t max, struct held_table **out)
{
	struct held_table *t = calloc(1, sizeof(*t));

	if (!t)
		return PC_ENOMEM;
	t->max = max ? max : 1;
	t->nb = buckets_for(t->max);
	t->b = calloc(t->nb, sizeof(*t->b));
	if (!t->b || hkey_new(t->hkey) < 0 || quota_map_new(&t->quota) < 0 ||
	    quota_map_new(&t->grace) < 0) {
		quota_map_free(t->quota);
		free(t->b);
		free(t);
		return PC_ENOMEM;
	}
	*out = t;
	return 0;
}

/* A waiting entry joins or leaves its sandbox's list (quota_list: kept
 * with the sandbox's count, so joined after quota_take and left before
 * quota_give). */
static void sb_link(struct held_table *t, struct held_flow *f)
{
	void **l = quota_list(t->quota, f->meta.sandbox);

	f->snext = NULL;
	f->sprev = l[1];
	if (f->sprev)
		f->sprev->snext = f;
	else
		l[0] = f;
	l[1] = f;
}

static void sb_unlink(struct held_table *t, struct held_flow *f)
{
	void **l = quota_list(t->quota, f->meta.sandbox);

	if (f->sprev)
		f->sprev->snext = f->snext;
	else if (l)
		l[0] = f->snext;
	if (f->snext)
		f->snext->sprev = f->sprev;
	else if (l)
		l[1] = f->sprev;
	f->snext = f->sprev = NULL;
}

/* The entry leaves the table: its sandbox's quota gets it back. */
static void held_free_one(struct held_table *t, struct held_flow *f)
{
	if (f->grace) {
		quota_give(t->grace, f->meta.sandbox);
		t->n_grace--;
		if (t->gsent == f)
			t->gsent = f->gnext;
		if (f->gprev)
			f->gprev->gnext = f->gnext;
		else
			t->ghead = f->gnext;
		if (f->gnext)
			f->gnext->gprev = f->gprev;
		else
			t->gtail = f->gprev;
	} else {
		sb_unlink(t, f);
		quota_give(t->quota, f->meta.sandbox);
		t->n--;
	}
	free(f->buf);
	free(f);
}

void held_table_free(struct held_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nb; i++) {
		struct held_flow *f = t->b[i], *n;

		for (; f; f = n) {
			n = f->next;
			held_free_one(t, f);
		}
	}
	quota_map_free(t->quota);
	quota_map_free(t->grace);
	free(t->b);
	free(t);
}

struct held_flow *held_get(struct held_table *t, const struct flow_key *k)
{
	struct held_flow *f = t->b[key_hash(t->hkey, k) & (t->nb - 1)];

	while (f && memcmp(&f->key, k, sizeof(*k)) != 0)
		f = f->next;
	return f;
}

/* quota_most's visit: among the lists of the sandboxes holding the most,
 * the oldest entry not yet promoted (best), and the oldest of all (any). A
 * promoted entry counted as waiting (its grace share full) still catches
 * its flow's packets queued before the ct mark acted: taken only when the
 * sandbox holds nothing else, so that one under its share still gets its
 * place. */
struct victim {
	struct held_flow *best, *any;
};

static void oldest_waiting(void *arg, void **list)
{
	struct victim *v = arg;
	struct held_flow *head = list[0];

	if (head && (!v->any || head->added < v->any->added))
		v->any = head;
	for (struct held_flow *f = head; f; f = f->snext)
		if (!f->promoted_ms) {
			if (!v->best || f->added < v->best->added)
				v->best = f;
			return;
		}
}

int held_add(struct held_table *t, const struct flow_key *k, const char *sandbox,
	     size_t n_sandboxes, struct held_flow **out, char *given_up)
{
	size_t share = quota_share(t->max, n_sandboxes);
	struct held_flow *f, *v = NULL;
	struct victim vc = {NULL, NULL};
	size_t h;
	int rc;

	if (given_up)
		given_up[0] = '\0';
	/* Room is lent: the share is what a sandbox is sure of, not what it
	 * may use. A full table gives a sandbox under its share the place of
	 * the one furthest over its own (docs/engine.md, "Per-sandbox
	 * quotas"): the shares together fit the table, so when it is full and
	 * one sandbox is under its share, another is over. */
	if (t->n >= t->max) {
		if (quota_used(t->quota, sandbox) >= share)
			return PC_EREFUSED;
		quota_most(t->quota, share, oldest_waiting, &vc);
		v = vc.best ? vc.best : vc.any;
		if (!v)
			return PC_EAGAIN;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return PC_ENOMEM;
	if (v) {
		if (given_up)
			pc_strlcpy(given_up, v->meta.sandbox, POLICY_NAME_MAX);
		t->given[t->n_given++ % HELD_GIVEN_RING] = v->key;
		held_del(t, v);
	}
	rc = quota_take(t->quota, sandbox, SIZE_MAX);
	if (rc < 0) {
		free(f);
		return rc;
	}
	f->key = *k;
	pc_strlcpy(f->meta.sandbox, sandbox, sizeof(f->meta.sandbox));
	f->added = ++t->added;
	sb_link(t, f);
	h = key_hash(t->hkey, k) & (t->nb - 1);
	f->next = t->b[h];
	t->b[h] = f;
	t->n++;
	*out = f;
	return 0;
}

int held_promoted(struct held_table *t, struct held_flow *f, size_t n_sandboxes)
{
	int rc;

	if (f->grace)
		return 0;
	/* promoted in time order (per queue thread): the oldest first */
	while (t->ghead && f->promoted_ms > t->ghead->promoted_ms + HELD_GRACE_MS)
		held_del(t, t->ghead);
	rc = quota_take(t->grace, f->meta.sandbox, quota_share(2 * t->max, n_sandboxes));
	if (rc < 0)
		return rc;
	sb_unlink(t, f);
	quota_give(t->quota, f->meta.sandbox);
	t->n--;
	t->n_grace++;
	f->grace = true;
	f->promo_batch = t->batch;
	f->sent_ms = 0;
	if (!t->gsent)
		t->gsent = f;
	f->gprev = t->gtail;
	f->gnext = NULL;
	if (t->gtail)
		t->gtail->gnext = f;
	else
		t->ghead = f;
	t->gtail = f;
	return 0;
}

void held_del(struct held_table *t, struct held_flow *f)
{
	struct held_flow **pp = &t->b[key_hash(t->hkey, &f->key) & (t->nb - 1)];

	while (*pp && *pp != f)
		pp = &(*pp)->next;
	if (!*pp)
		return;
	*pp = f->next;
	held_free_one(t, f);
}

void held_batch_begin(struct held_table *t, uint64_t seq)
{
	t->batch = seq;
}

void held_verdicts_sent(struct held_table *t, uint64_t seq, uint64_t now_ms)
{
	/* promoted in batch order: the unsent ones are the list's tail */
	while (t->gsent && t->gsent->promo_batch <= seq) {
		t->gsent->sent_ms = now_ms ? now_ms : 1;
		t->gsent = t->gsent->gnext;
	}
}

size_t held_drained(struct held_table *t, uint64_t start_ms)
{
	size_t gone = 0;

	/* sent in promotion order, so the oldest decides when to stop */
	while (t->ghead && t->ghead->sent_ms && start_ms >= t->ghead->sent_ms + HELD_DRAIN_MIN_MS) {
		held_del(t, t->ghead);
		gone++;
	}
	return gone;
}

size_t held_expire(struct held_table *t, uint64_t now_ms)
{
	size_t gone = 0;

	for (size_t i = 0; i < t->nb; i++) {
		struct held_flow **pp = &t->b[i];

		while (*pp) {
			struct held_flow *f = *pp;

			/* Kept a while past the deadline so that a late packet
			 * still meets its entry and gets a clear refusal; a
			 * promoted one only until its conntrack mark acts. */
			if (now_ms > f->deadline_ms + 60000 ||
			    (f->promoted_ms && now_ms > f->promoted_ms + HELD_GRACE_MS)) {
				*pp = f->next;
				held_free_one(t, f);
				gone++;
			} else {
				pp = &f->next;
			}
		}
	}
	return gone;
}

bool held_given_up(const struct held_table *t, const struct flow_key *k)
{
	size_t n = t->n_given < HELD_GIVEN_RING ? t->n_given : HELD_GIVEN_RING;

	for (size_t i = 0; i < n; i++)
		if (memcmp(&t->given[i], k, sizeof(*k)) == 0)
			return true;
	return false;
}

size_t held_count(const struct held_table *t)
{
	return t->n + t->n_grace;
}

size_t held_used(struct held_table *t, const char *sandbox)
{
	return quota_used(t->quota, sandbox);
}

size_t held_capacity(const struct held_table *t)
{
	return t->max;
}

uint64_t flow_registry_key_hash(const struct flow_registry *r, const struct flow_key *k)
{
	return key_hash(r->hkey, k);
}

uint64_t held_key_hash(const struct held_table *t, const struct flow_key *k)
{
	return key_hash(t->hkey, k);
}

size_t held_share(const struct held_table *t, size_t n_sandboxes)
{
	return quota_share(t->max, n_sandboxes);
}
