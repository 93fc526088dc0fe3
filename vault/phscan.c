/* Placeholders in the forms an upstream or an application may decode
 * before it reads them: percent-encoding undone (one level, either hex
 * case, mixed with plain characters) and case folded. The whole
 * placeholder is compared without case, its random part too: the random
 * part is lower-case base32, so a case-changed spelling is one an
 * application that folds case reads as the placeholder, and a chance
 * match of 26 random characters does not happen. The exact placeholder is
 * found by the callers' own scans (inject.c, relay.c, tunnel.c); this one
 * catches what they would pass. */
#include "vault/vault_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

static uint8_t fold(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c - 'A' + 'a') : c;
}

/* Percent-decode and fold in[0..n) into out (room for n), continuing the
 * escape state of ps (a '%' or '%H' left at the end of the previous
 * input). */
static size_t fold_run(struct ph_stream *ps, const uint8_t *in, size_t n, uint8_t *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = in[i];

		if (ps->esc == 1) {
			if (pc_hex_digit((char)c) >= 0) {
				ps->h1 = c;
				ps->esc = 2;
				continue;
			}
			out[o++] = '%';
			ps->esc = 0;
		} else if (ps->esc == 2) {
			ps->esc = 0;
			if (pc_hex_digit((char)c) >= 0) {
				out[o++] = fold((uint8_t)(pc_hex_digit((char)ps->h1) * 16 +
							  pc_hex_digit((char)c)));
				continue;
			}
			/* "%H" then a non-hex byte: three bytes in, two out
			 * before c; out has room since '%' and H were not
			 * written when read */
			out[o++] = '%';
			out[o++] = fold(ps->h1);
		}
		if (c == '%')
			ps->esc = 1;
		else
			out[o++] = fold(c);
	}
	return o;
}

/* Does b[0..n) hold placeholder ph folded at its start? */
static bool folded_at(const uint8_t *b, size_t n, const char *ph, size_t len)
{
	if (len > n)
		return false;
	for (size_t i = 0; i < len; i++)
		if (b[i] != fold((uint8_t)ph[i]))
			return false;
	return true;
}

/* The first secret (in the store's order) whose placeholder b[0..n)
 * holds folded, or -1. Every placeholder starts with the common prefix, so
 * each is where that prefix is: one memmem for the prefix, then each
 * placeholder compared at each place found. */
static int find_folded(const struct ph_stream *ps, const uint8_t *b, size_t n)
{
	const struct vault_store *store = ps->store;
	int best = -1;

	if (ps->plen) {
		const uint8_t *p = b;

		while ((p = memmem(p, n - (size_t)(p - b), ps->pre, ps->plen))) {
			for (size_t k = 0; k < (best < 0 ? store->n : (size_t)best); k++)
				if (folded_at(p, n - (size_t)(p - b), store->s[k].placeholder,
					      store->s[k].ph_len))
					best = (int)k;
			if (best == 0)
				break;
			p++;
		}
		return best;
	}
	/* no common prefix (not a store the vault writes): one at a time */
	for (size_t k = 0; k < store->n; k++) {
		const struct vault_secret *s = &store->s[k];
		uint8_t ph[VAULT_PH_MAX];

		for (size_t i = 0; i < s->ph_len; i++)
			ph[i] = fold((uint8_t)s->placeholder[i]);
		if (memmem(b, n, ph, s->ph_len))
			return (int)k;
	}
	return -1;
}

/* The length of the prefix every placeholder of the store shares, as
 * written or (folded) without case; 0 for an empty store. */
static size_t common_prefix(const struct vault_store *store, bool folded)
{
	size_t pl = store->n ? store->s[0].ph_len : 0;

	for (size_t k = 1; k < store->n; k++) {
		const char *a = store->s[0].placeholder, *b = store->s[k].placeholder;
		size_t i = 0;

		while (i < pl && i < store->s[k].ph_len &&
		       (folded ? fold((uint8_t)a[i]) == fold((uint8_t)b[i]) : a[i] == b[i]))
			i++;
		pl = i;
	}
	return pl;
}

void ph_stream_init(struct ph_stream *ps, const struct vault_store *store)
{
	memset(ps, 0, sizeof(*ps));
	ps->store = store;
	for (size_t k = 0; k < store->n; k++)
		if (store->s[k].ph_len > ps->maxlen)
			ps->maxlen = store->s[k].ph_len;
	/* the folded prefix all placeholders share: its length first (a few
	 * bytes, "pcph_", where the placeholders differ after it), then only
	 * it folded, not the whole of the first placeholder (a scanner is
	 * made for each header a request has) */
	ps->plen = common_prefix(store, true);
	for (size_t i = 0; i < ps->plen; i++)
		ps->pre[i] = fold((uint8_t)store->s[0].placeholder[i]);
}

int ph_stream_feed(struct ph_stream *ps, const uint8_t *in, size_t n)
{
	/* the kept tail (at most the longest placeholder - 1 folded bytes),
	 * then a block of input folded; a block may write one byte more than
	 * it reads (a '%H' held from before) */
	uint8_t b[VAULT_PH_MAX + PH_BLOCK + 2];
	size_t used = 0; /* what a block may have written: wiped, not all of b
			  * (a header's few bytes are most feeds) */
	int hit = -1;

	if (!ps->maxlen)
		return -1;
	while (n && hit < 0) {
		size_t take = n < PH_BLOCK ? n : PH_BLOCK, len, keep;

		if (ps->tlen + take + 1 > used)
			used = ps->tlen + take + 1;
		memcpy(b, ps->tail, ps->tlen);
		len = ps->tlen + fold_run(ps, in, take, b + ps->tlen);
		hit = find_folded(ps, b, len);
		keep = len < ps->maxlen - 1 ? len : ps->maxlen - 1;
		memcpy(ps->tail, b + len - keep, keep);
		ps->tlen = keep;
		in += take;
		n -= take;
	}
	sodium_memzero(b, used);
	return hit;
}

void ph_stream_wipe(struct ph_stream *ps)
{
	sodium_memzero(ps->tail, sizeof(ps->tail));
	ps->tlen = 0;
	ps->esc = 0;
	ps->h1 = 0;
}

int ph_find_folded(const struct vault_store *store, const uint8_t *in, size_t n)
{
	struct ph_stream ps;
	int hit;

	ph_stream_init(&ps, store);
	hit = ph_stream_feed(&ps, in, n);
	ph_stream_wipe(&ps);
	return hit;
}

/* Can in[0..n) hold a placeholder decoded or folded? Without a '%' the
 * decoding is the bytes themselves, so the folded stream holds one only
 * where the bytes hold the folded prefix; blanking exact ones adds none.
 * Most headers have neither, and cost this one read instead of a copy,
 * a fold and a search. pl: the folded common prefix's length. */
static bool may_alter(const struct vault_store *store, size_t pl, const uint8_t *in, size_t n)
{
	const char *ph = pl ? store->s[0].placeholder : NULL;

	if (!pl || memchr(in, '%', n))
		return true;
	for (size_t i = 0; i + pl <= n; i++) {
		size_t j = 0;

		while (j < pl && fold(in[i + j]) == fold((uint8_t)ph[j]))
			j++;
		if (j == pl)
			return true;
	}
	return false;
}

int ph_find_altered(const struct vault_store *store, const struct ph_prefix *pp, const uint8_t *in,
		    size_t n)
{
	uint8_t *b;
	bool may;
	int hit;

	if (!n || !may_alter(store, pp->folded, in, n))
		return -1;
	if (!(b = malloc(n)))
		return -2;
	memcpy(b, in, n);
	/* the exact placeholders are the callers' to judge (one in its bound
	 * header is injected); blanked, they cannot hide an altered copy.
	 * Each holds the placeholders' common prefix as it is: where that is
	 * nowhere (most headers), no placeholder is to be looked for. */
	may = ph_may_hold(store, pp->exact, b, n);
	for (size_t k = 0; k < store->n && may; k++) {
		const struct vault_secret *s = &store->s[k];
		uint8_t *p = b;

		while ((p = memmem(p, n - (size_t)(p - b), s->placeholder, s->ph_len)))
			memset(p, 0, s->ph_len);
	}
	/* the same look again once they are blanked: a header that held an
	 * exact placeholder and nothing else (an injected one) ends here */
	hit = may && !may_alter(store, pp->folded, b, n) ? -1 : ph_find_folded(store, b, n);
	sodium_memzero(b, n);
	free(b);
	return hit;
}

void ph_prefix_get(const struct vault_store *store, struct ph_prefix *pp)
{
	pp->exact = common_prefix(store, false);
	pp->folded = common_prefix(store, true);
}

bool ph_may_hold(const struct vault_store *store, size_t pl, const void *in, size_t n)
{
	return !pl || memmem(in, n, store->s[0].placeholder, pl);
}
