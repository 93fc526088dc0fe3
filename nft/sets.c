/* nftables sets of the ruleset: address sets built from policy prefixes
 * (interval sets, merged so the kernel never sees overlaps), resolver sets
 * and the bridge port set. */
#include "nft/nft_int.h"

#include <netinet/in.h> /* before the linux/ headers (libc-compat) */
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h> /* libnftnl headers use FILE */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <libnftnl/expr.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>

/* nft's datatype numbers, so that `nft list ruleset` prints our sets in
 * their own types (the kernel itself does not interpret them). */
#define NFT_TYPE_IPADDR	 7
#define NFT_TYPE_IP6ADDR 8
#define NFT_TYPE_IFINDEX 20
#define NFT_TYPE_MARK	 19
/* A meter declares no size (issue 20, 1,000 sandboxes): the kernel sizes
 * a set's hash table for its declared size at creation — 65,535 elements
 * took a 1 MiB table, cleared, per meter, two meters per sandbox: 2 GiB of
 * kernel memory and seconds per reload at 1,000 sandboxes. Undeclared, the
 * table starts small and grows with the elements (one per sandbox port
 * that sent a new flow in the last timeout); a dynamic set without a size
 * holds at most 65,535 elements (nft_dynset_init), as before, and a full
 * meter still makes the rule not match: the packet goes on to the queue,
 * never to an accept. */

struct range {
	uint8_t lo[16], hi[16];
};

static int range_cmp(const void *a, const void *b, size_t n)
{
	return memcmp(a, b, n);
}

/* Ranges are zero-padded past the address length, so comparing all 16
 * bytes orders IPv4 ranges correctly too. */
static int range_sort_cmp(const void *a, const void *b)
{
	return range_cmp(((const struct range *)a)->lo, ((const struct range *)b)->lo, 16);
}

/* x + 1 in place (big endian); false on overflow (x was all ones). */
static bool be_inc(uint8_t *x, size_t n)
{
	for (size_t i = n; i-- > 0;) {
		if (++x[i] != 0)
			return true;
	}
	return false;
}

static void prefix_range(const struct pc_prefix *p, size_t n, struct range *r)
{
	memset(r, 0, sizeof(*r));
	memcpy(r->lo, p->addr.a, n);
	memcpy(r->hi, p->addr.a, n);
	for (size_t bit = p->len; bit < n * 8; bit++)
		r->hi[bit / 8] |= (uint8_t)(0x80 >> (bit % 8));
}

static struct nftnl_set *nftset_new(uint16_t family, const char *name, uint32_t keytype,
				    uint32_t keylen, uint32_t flags)
{
	struct nftnl_set *s = nftnl_set_alloc();

	if (!s)
		return NULL;
	if (nftnl_set_set_str(s, NFTNL_SET_TABLE, NFT_TABLE) < 0 ||
	    nftnl_set_set_str(s, NFTNL_SET_NAME, name) < 0) {
		nftnl_set_free(s);
		return NULL;
	}
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, family);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, keytype);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, keylen);
	nftnl_set_set_u32(s, NFTNL_SET_FLAGS, flags);
	return s;
}

static int elem_add(struct nftnl_set *s, const void *key, uint32_t len, bool end)
{
	struct nftnl_set_elem *e = nftnl_set_elem_alloc();

	if (!e)
		return PC_ENOMEM;
	if (nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, len) < 0) {
		nftnl_set_elem_free(e);
		return PC_ENOMEM;
	}
	if (end)
		nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
	nftnl_set_elem_add(s, e);
	return 0;
}

/* An interval set of the prefixes of one family; duplicates and overlaps
 * are merged. */
struct nftnl_set *nftset_prefixes(uint16_t family, const char *name, uint8_t af,
				  const struct pc_prefix *const *pfx, size_t n)
{
	size_t alen = af == AF_INET ? 4 : 16, nr = 0;
	struct range *r = NULL;
	struct nftnl_set *s;

	s = nftset_new(family, name, af == AF_INET ? NFT_TYPE_IPADDR : NFT_TYPE_IP6ADDR,
		       (uint32_t)alen, NFT_SET_INTERVAL);
	if (!s)
		return NULL;
	if (n) {
		r = calloc(n, sizeof(*r));
		if (!r)
			goto fail;
	}
	for (size_t i = 0; i < n; i++)
		if (pfx[i]->addr.family == af)
			prefix_range(pfx[i], alen, &r[nr++]);
	if (nr) /* qsort on the NULL of an empty set is undefined */
		qsort(r, nr, sizeof(*r), range_sort_cmp);
	for (size_t i = 0; i < nr;) {
		struct range cur = r[i++];
		uint8_t next[16];

		/* absorb every later range that overlaps or touches cur */
		for (; i < nr; i++) {
			memcpy(next, cur.hi, alen);
			if (!be_inc(next, alen)) {
				i = nr; /* cur reaches the top: it holds every later range */
				break;
			}
			if (range_cmp(r[i].lo, next, alen) > 0)
				break;
			if (range_cmp(r[i].hi, cur.hi, alen) > 0)
				memcpy(cur.hi, r[i].hi, alen);
		}
		if (elem_add(s, cur.lo, (uint32_t)alen, false) < 0)
			goto fail;
		/* the end element is the first address after the range; a range
		 * ending at the top of the space has none */
		memcpy(next, cur.hi, alen);
		if (be_inc(next, alen) && elem_add(s, next, (uint32_t)alen, true) < 0)
			goto fail;
	}
	free(r);
	return s;
fail:
	free(r);
	nftnl_set_free(s);
	return NULL;
}

struct nftnl_set *nftset_addrs(uint16_t family, const char *name, uint8_t af,
			       const struct pc_addr *a, size_t n)
{
	size_t alen = af == AF_INET ? 4 : 16;
	struct nftnl_set *s;

	s = nftset_new(family, name, af == AF_INET ? NFT_TYPE_IPADDR : NFT_TYPE_IP6ADDR,
		       (uint32_t)alen, 0);
	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		bool dup = false;

		if (a[i].family != af)
			continue;
		for (size_t j = 0; j < i; j++)
			dup = dup || pc_addr_eq(&a[i], &a[j]);
		if (!dup && elem_add(s, a[i].a, (uint32_t)alen, false) < 0) {
			nftnl_set_free(s);
			return NULL;
		}
	}
	return s;
}

/* Tell nft(8) the key is host-endian, so `nft list` shows ifindexes and
 * marks as numbers (the kernel does not read user data). */
static int set_key_host_order(struct nftnl_set *s)
{
	struct nftnl_udata_buf *ud = nftnl_udata_buf_alloc(16);
	int rc = PC_ENOMEM;

	if (ud && nftnl_udata_put_u32(ud, NFTNL_UDATA_SET_KEYBYTEORDER, 1 /* host */) &&
	    nftnl_set_set_data(s, NFTNL_SET_USERDATA, nftnl_udata_buf_data(ud),
			       nftnl_udata_buf_len(ud)) == 0)
		rc = 0;
	nftnl_udata_buf_free(ud);
	return rc;
}

struct nftnl_set *nftset_meter(uint16_t family, const char *name)
{
	struct nftnl_set *s =
	    nftset_new(family, name, NFT_TYPE_MARK, 4, NFT_SET_EVAL | NFT_SET_TIMEOUT);

	if (!s)
		return NULL;
	if (set_key_host_order(s) < 0) {
		nftnl_set_free(s);
		return NULL;
	}
	return s;
}

struct nftnl_set *nftset_ports(const struct nft_port *ports, size_t n)
{
	struct nftnl_set *s = nftset_new(NFPROTO_BRIDGE, NFT_SET_PORTS, NFT_TYPE_IFINDEX, 4, 0);

	if (!s)
		return NULL;
	if (set_key_host_order(s) < 0) {
		nftnl_set_free(s);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t idx = ports[i].ifindex;

		/* A port whose index does not fit the stamp stays out of the
		 * set: its frames are never stamped and the inet table drops
		 * them (fail closed). */
		if (idx == 0 || idx > NFT_MARK_PORT_MASK)
			continue;
		if (elem_add(s, &idx, 4, false) < 0) {
			nftnl_set_free(s);
			return NULL;
		}
	}
	return s;
}

/* ---- bindings: concatenated "port/MAC . address" sets (nft/bridge.c) ---- */

#define NFT_TYPE_ETHERADDR 9
#define NFT_TYPE_IFNAME	   41
#define NFT_TYPE_BITS	   6 /* nft(8)'s concatenated type: types shifted in */

struct pair_range {
	uint8_t who[16];
	struct range r;
};

static int pair_cmp(const void *a, const void *b)
{
	const struct pair_range *x = a, *y = b;
	int c = memcmp(x->who, y->who, sizeof(x->who));

	return c ? c : range_sort_cmp(&x->r, &y->r);
}

static uint32_t round4(uint32_t n)
{
	return (n + 3) & ~3u;
}

/* An element of a concatenated set: who (padded to a register) then the
 * address, for the key (lo) and the key's end (hi, inclusive). */
static int pair_elem_add(struct nftnl_set *s, const struct pair_range *p, uint32_t wholen,
			 uint32_t alen)
{
	uint8_t k[32], ke[32];
	uint32_t wl = round4(wholen);
	struct nftnl_set_elem *e;

	memset(k, 0, sizeof(k));
	memset(ke, 0, sizeof(ke));
	memcpy(k, p->who, wholen);
	memcpy(ke, p->who, wholen);
	memcpy(k + wl, p->r.lo, alen);
	memcpy(ke + wl, p->r.hi, alen);
	e = nftnl_set_elem_alloc();
	if (!e)
		return PC_ENOMEM;
	if (nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, k, wl + alen) < 0 ||
	    nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY_END, ke, wl + alen) < 0) {
		nftnl_set_elem_free(e);
		return PC_ENOMEM;
	}
	nftnl_set_elem_add(s, e);
	return 0;
}

struct nftnl_set *nftset_bind_pairs(const char *name, uint8_t af, uint32_t wholen,
				    const struct nft_bind_range *b, size_t n)
{
	uint32_t alen = af == AF_INET ? 4 : 16,
		 wtype = wholen == 6 ? NFT_TYPE_ETHERADDR : NFT_TYPE_IFNAME;
	uint8_t fields[3] = {(uint8_t)wholen, (uint8_t)alen, 0};
	struct pair_range *p = NULL;
	struct nftnl_set *s;
	size_t np = 0;

	s = nftset_new(NFPROTO_BRIDGE, name,
		       (wtype << NFT_TYPE_BITS) |
			   (af == AF_INET ? NFT_TYPE_IPADDR : NFT_TYPE_IP6ADDR),
		       round4(wholen) + alen, NFT_SET_INTERVAL | NFT_SET_CONCAT);
	if (!s)
		return NULL;
	/* the kernel's pipapo set needs each field's length */
	if (nftnl_set_set_data(s, NFTNL_SET_DESC_CONCAT, fields, 2) < 0)
		goto fail;
	if (n) {
		p = calloc(n, sizeof(*p));
		if (!p)
			goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		if (b[i].pfx.addr.family != af)
			continue;
		memcpy(p[np].who, b[i].who, sizeof(p[np].who));
		prefix_range(&b[i].pfx, alen, &p[np].r);
		np++;
	}
	if (np)
		qsort(p, np, sizeof(*p), pair_cmp);
	/* pipapo refuses overlapping elements: merge a who's ranges that
	 * overlap or touch */
	for (size_t i = 0; i < np;) {
		struct pair_range cur = p[i++];
		uint8_t next[16];

		for (; i < np && memcmp(p[i].who, cur.who, sizeof(cur.who)) == 0; i++) {
			memcpy(next, cur.r.hi, alen);
			if (!be_inc(next, alen))
				continue; /* cur reaches the top: it holds every later range */
			if (range_cmp(p[i].r.lo, next, alen) > 0)
				break;
			if (range_cmp(p[i].r.hi, cur.r.hi, alen) > 0)
				memcpy(cur.r.hi, p[i].r.hi, alen);
		}
		if (pair_elem_add(s, &cur, wholen, alen) < 0)
			goto fail;
	}
	free(p);
	return s;
fail:
	free(p);
	nftnl_set_free(s);
	return NULL;
}

struct nftnl_set *nftset_bind_whos(const char *name, uint32_t wholen,
				   const struct nft_bind_range *b, size_t n)
{
	struct nftnl_set *s = nftset_new(
	    NFPROTO_BRIDGE, name, wholen == 6 ? NFT_TYPE_ETHERADDR : NFT_TYPE_IFNAME, wholen, 0);

	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		bool dup = false;

		for (size_t j = 0; j < i && !dup; j++)
			dup = memcmp(b[i].who, b[j].who, wholen) == 0;
		if (!dup && elem_add(s, b[i].who, wholen, false) < 0) {
			nftnl_set_free(s);
			return NULL;
		}
	}
	return s;
}

struct nftnl_set *nftset_mac_pairs(const char *name, const struct nft_bind_range *b, size_t n)
{
	struct nftnl_set *s =
	    nftset_new(NFPROTO_BRIDGE, name,
		       (NFT_TYPE_ETHERADDR << NFT_TYPE_BITS) | NFT_TYPE_ETHERADDR, 16, 0);

	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		uint8_t k[16];
		bool dup = false;

		for (size_t j = 0; j < i && !dup; j++)
			dup = memcmp(b[i].who, b[j].who, 6) == 0;
		if (dup)
			continue;
		memset(k, 0, sizeof(k));
		memcpy(k, b[i].who, 6);
		memcpy(k + 8, b[i].who, 6);
		if (elem_add(s, k, 16, false) < 0) {
			nftnl_set_free(s);
			return NULL;
		}
	}
	return s;
}

/* ---- the new-flow limit's owner map (nft/inet.c) ------------------------ */

struct owned {
	struct range r;
	uint32_t owner;
};

/* Outer ranges first (first address up, last down), and of two equal ones
 * the higher owner first, so that the lower is inside and owns it. */
static int owned_cmp(const void *a, const void *b)
{
	const struct owned *x = a, *y = b;
	int c = range_cmp(x->r.lo, y->r.lo, 16);

	if (c)
		return c;
	c = range_cmp(y->r.hi, x->r.hi, 16);
	if (c)
		return c;
	return x->owner < y->owner ? 1 : x->owner > y->owner ? -1 : 0;
}

struct piece_out {
	struct nftnl_set *s;
	size_t alen;
	bool open; /* a piece is pending */
	uint8_t lo[16], hi[16];
	uint32_t owner;
	int err;
};

static void piece_flush(struct piece_out *o)
{
	uint8_t end[16];

	if (!o->open || o->err)
		return;
	o->open = false;
	if (elem_add(o->s, o->lo, (uint32_t)o->alen, false) < 0) {
		o->err = PC_ENOMEM;
		return;
	}
	memcpy(end, o->hi, o->alen);
	if (be_inc(end, o->alen) && elem_add(o->s, end, (uint32_t)o->alen, true) < 0)
		o->err = PC_ENOMEM;
}

/* The piece [lo, hi] belongs to owner: joined to the pending piece when it
 * continues it with the same owner. */
static void piece_emit(struct piece_out *o, const uint8_t *lo, const uint8_t *hi, uint32_t owner)
{
	uint8_t next[16];

	if (range_cmp(lo, hi, o->alen) > 0)
		return; /* empty */
	if (o->open && o->owner == owner) {
		memcpy(next, o->hi, o->alen);
		if (be_inc(next, o->alen) && range_cmp(next, lo, o->alen) == 0) {
			memcpy(o->hi, hi, o->alen);
			return;
		}
	}
	piece_flush(o);
	memcpy(o->lo, lo, o->alen);
	memcpy(o->hi, hi, o->alen);
	o->owner = owner;
	o->open = true;
}

struct nftnl_set *nftset_owned(const char *name, uint8_t af, const struct pc_prefix *const *pfx,
			       const uint32_t *owner, size_t n)
{
	size_t alen = af == AF_INET ? 4 : 16, nr = 0, top = 0;
	struct owned *r = calloc(n ? n : 1, sizeof(*r)),
		     **stack = calloc(n ? n : 1, sizeof(*stack));
	struct piece_out o = {.alen = alen};
	uint8_t pos[16], end[16];
	bool pos_valid = false;

	struct nftnl_expr *ctr = nftnl_expr_alloc("counter");

	o.s = nftset_new(NFPROTO_INET, name, af == AF_INET ? NFT_TYPE_IPADDR : NFT_TYPE_IP6ADDR,
			 (uint32_t)alen, NFT_SET_INTERVAL);
	if (!o.s || !r || !stack || !ctr) {
		if (ctr)
			nftnl_expr_free(ctr);
		goto fail;
	}
	/* every element gets a counter of its own (the kernel copies the
	 * set's expressions into each element it adds) */
	nftnl_set_add_expr(o.s, ctr);
	for (size_t i = 0; i < n; i++) {
		if (pfx[i]->addr.family != af)
			continue;
		prefix_range(pfx[i], alen, &r[nr].r);
		r[nr++].owner = owner[i];
	}
	if (nr)
		qsort(r, nr, sizeof(*r), owned_cmp);
	/* Prefixes nest or are disjoint: a sweep with the open ranges on a
	 * stack gives each address to the innermost range holding it, in
	 * disjoint pieces (an interval map holds no overlaps). pos: the first
	 * address not yet given. */
	for (size_t i = 0; i <= nr; i++) {
		/* close the open ranges that end before r[i] (all, at the end) */
		while (top && (i == nr || range_cmp(stack[top - 1]->r.hi, r[i].r.lo, alen) < 0)) {
			struct owned *t = stack[--top];

			if (pos_valid)
				piece_emit(&o, pos, t->r.hi, t->owner);
			memcpy(pos, t->r.hi, alen);
			pos_valid = be_inc(pos, alen);
		}
		if (i == nr)
			break;
		if (top && pos_valid && range_cmp(pos, r[i].r.lo, alen) < 0) {
			memcpy(end, r[i].r.lo, alen);
			for (size_t k = alen; k-- > 0;) /* end = lo - 1 */
				if (end[k]-- != 0)
					break;
			piece_emit(&o, pos, end, stack[top - 1]->owner);
		}
		stack[top++] = &r[i];
		memcpy(pos, r[i].r.lo, alen);
		pos_valid = true;
	}
	piece_flush(&o);
	if (o.err)
		goto fail;
	free(r);
	free(stack);
	return o.s;
fail:
	free(r);
	free(stack);
	if (o.s)
		nftnl_set_free(o.s);
	return NULL;
}
