/* Pledges: records logd holds instead of writing (docs/logd.md, "Pledges").
 *
 * The engine lets an allowed DNS query leave before its record is in the
 * log, and writes the record with the query's answer (or when none comes).
 * Before the query leaves, it hands logd the record as a pledge. logd
 * keeps it here under (the sender's pid, the pledge's id) and forgets it
 * when a record redeeming that id arrives; if every session of that pid
 * ends first — the engine was killed — the server writes what is still
 * held. So an engine's death no longer takes the records of its
 * outstanding queries with it.
 *
 * Bounded, and never by losing one: past PLEDGES_MAX pledges or
 * PLEDGE_BYTES_MAX bytes of them the oldest pledge is handed back to be
 * written now (its redeeming record may then be
 * written too: a record twice rather than none). A redeeming record can
 * overtake its pledge (two queue threads' rings read in the order logd
 * visits them), so a redeem finding nothing leaves a mark that the pledge
 * drops on arrival; marks are bounded by PLEDGE_MARKS_MAX, oldest
 * forgotten first (a pledge whose mark was forgotten is written at the
 * end: again twice rather than none). The ids are the engine's, so the
 * table is keyed with a secret hash: a compromised engine cannot choose
 * ids that share a chain. Its buckets are as many as what it holds (a
 * power of two from BUCKETS_MIN): at a resolver's few hundred outstanding
 * queries they stay in the cache, where a fixed table for the bound took
 * a cache miss per pledge and per redeem (a tenth of logd's time under
 * bench/dns). */
#include "logd/logd_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS_MIN 256u
#define BUCKETS_MAX (1u << 17) /* PLEDGES_MAX + PLEDGE_MARKS_MAX, and room */

enum { KIND_PLEDGE, KIND_MARK };

struct pledge {
	struct pledge *hnext;	    /* chain of its bucket */
	struct pledge *prev, *next; /* its kind's list, oldest first */
	pid_t pid;
	uint64_t id;
	uint32_t h; /* its keyed hash: the bucket, at any size */
	uint8_t kind;
	uint32_t len; /* the pledge's record message (a mark: 0) */
	uint8_t rec[];
};

struct pledges {
	struct pledge **b;
	size_t nb; /* buckets */
	struct pledge *head[2], *tail[2];
	size_t n[2];
	size_t bytes; /* of the pledges' records */
	uint8_t key[crypto_shorthash_KEYBYTES];
};

int pledges_new(struct pledges **out, struct pc_err *err)
{
	struct pledges *p = calloc(1, sizeof(*p));

	if (p)
		p->b = calloc(BUCKETS_MIN, sizeof(*p->b));
	if (!p || !p->b) {
		free(p);
		return pc_err_set(err, PC_ENOMEM, "pledge table: out of memory");
	}
	p->nb = BUCKETS_MIN;
	randombytes_buf(p->key, sizeof(p->key));
	*out = p;
	return 0;
}

void pledges_free(struct pledges *p)
{
	if (!p)
		return;
	for (int k = 0; k < 2; k++)
		while (p->head[k]) {
			struct pledge *e = p->head[k];

			p->head[k] = e->next;
			free(e);
		}
	free(p->b);
	free(p);
}

static uint32_t hash(const struct pledges *p, pid_t pid, uint64_t id)
{
	uint8_t in[sizeof(int64_t) + sizeof(id)], h[crypto_shorthash_BYTES];
	int64_t spid = pid;
	uint32_t x;

	memcpy(in, &spid, sizeof(spid));
	memcpy(in + sizeof(spid), &id, sizeof(id));
	crypto_shorthash(h, in, sizeof(in), p->key);
	memcpy(&x, h, sizeof(x));
	return x;
}

static struct pledge *find(const struct pledges *p, pid_t pid, uint64_t id, uint32_t h)
{
	for (struct pledge *e = p->b[h & (p->nb - 1)]; e; e = e->hnext)
		if (e->pid == pid && e->id == id)
			return e;
	return NULL;
}

/* The buckets made nb (a power of two), every entry moved over by its
 * kept hash. Without the memory, the table stays as it was: longer
 * chains, nothing lost. */
static void resize(struct pledges *p, size_t nb)
{
	struct pledge **b = calloc(nb, sizeof(*b));

	if (!b)
		return;
	for (int k = 0; k < 2; k++)
		for (struct pledge *e = p->head[k]; e; e = e->next) {
			struct pledge **to = &b[e->h & (nb - 1)];

			e->hnext = *to;
			*to = e;
		}
	free(p->b);
	p->b = b;
	p->nb = nb;
}

static void link_in(struct pledges *p, struct pledge *e)
{
	struct pledge **b;

	if (p->n[0] + p->n[1] >= p->nb && p->nb < BUCKETS_MAX)
		resize(p, p->nb * 2);
	b = &p->b[e->h & (p->nb - 1)];
	e->hnext = *b;
	*b = e;
	e->next = NULL;
	e->prev = p->tail[e->kind];
	if (e->prev)
		e->prev->next = e;
	else
		p->head[e->kind] = e;
	p->tail[e->kind] = e;
	p->n[e->kind]++;
	p->bytes += e->len;
}

static void unlink_out(struct pledges *p, struct pledge *e)
{
	struct pledge **b = &p->b[e->h & (p->nb - 1)];

	while (*b != e)
		b = &(*b)->hnext;
	*b = e->hnext;
	if (e->prev)
		e->prev->next = e->next;
	else
		p->head[e->kind] = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		p->tail[e->kind] = e->prev;
	p->n[e->kind]--;
	p->bytes -= e->len;
	/* after a flood, back to what fits the cache (hysteresis: halved at
	 * an eighth full, doubled when full) */
	if (p->nb > BUCKETS_MIN && (p->n[0] + p->n[1]) * 8 < p->nb)
		resize(p, p->nb / 2);
}

int pledges_hold(struct pledges *p, pid_t pid, uint64_t id, const uint8_t *rec, size_t len)
{
	uint32_t h = hash(p, pid, id);
	struct pledge *e = find(p, pid, id, h);

	if (e) {
		/* redeemed before it came: both done; or pledged twice (the
		 * engine pledges again after a restart of logd): once held */
		if (e->kind == KIND_MARK) {
			unlink_out(p, e);
			free(e);
		}
		return 0;
	}
	e = malloc(sizeof(*e) + len);
	if (!e)
		return PC_ENOMEM;
	e->pid = pid;
	e->id = id;
	e->h = h;
	e->kind = KIND_PLEDGE;
	e->len = (uint32_t)len;
	memcpy(e->rec, rec, len);
	link_in(p, e);
	return 0;
}

bool pledges_redeem(struct pledges *p, pid_t pid, uint64_t id)
{
	uint32_t h = hash(p, pid, id);
	struct pledge *e = find(p, pid, id, h);

	if (e) {
		unlink_out(p, e);
		free(e);
		return true;
	}
	/* Not here (yet): mark it. Without memory, the pledge, if it comes,
	 * is written at the end as well: twice rather than none. */
	e = malloc(sizeof(*e));
	if (!e)
		return false;
	if (p->n[KIND_MARK] >= PLEDGE_MARKS_MAX) {
		struct pledge *old = p->head[KIND_MARK];

		unlink_out(p, old);
		free(old);
	}
	e->pid = pid;
	e->id = id;
	e->h = h;
	e->kind = KIND_MARK;
	e->len = 0;
	link_in(p, e);
	return false;
}

size_t pledges_take(struct pledges *p, pid_t pid,
		    void (*write)(void *ctx, const uint8_t *rec, size_t len), void *ctx)
{
	struct pledge *e, *next;
	size_t n = 0;

	/* its marks too: no pledge of this process can come any more */
	for (int k = 0; k < 2; k++)
		for (e = p->head[k]; e; e = next) {
			next = e->next;
			if (e->pid != pid)
				continue;
			unlink_out(p, e);
			if (e->kind == KIND_PLEDGE) {
				write(ctx, e->rec, e->len);
				n++;
			}
			free(e);
		}
	return n;
}

struct pledge *pledges_over(struct pledges *p)
{
	struct pledge *e = p->head[KIND_PLEDGE];

	if (!e || (p->n[KIND_PLEDGE] <= PLEDGES_MAX && p->bytes <= PLEDGE_BYTES_MAX))
		return NULL;
	unlink_out(p, e);
	return e;
}

size_t pledges_held(const struct pledges *p)
{
	return p ? p->n[KIND_PLEDGE] : 0;
}

const uint8_t *pledge_rec(const struct pledge *e, size_t *len)
{
	*len = e->len;
	return e->rec;
}
