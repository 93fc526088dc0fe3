/* Streaming multi-needle replacement: real secret values in responses become
 * placeholders, and placeholders in request bodies are caught, however the
 * stream is cut into reads. At most (longest needle - 1) bytes are held back. */
#include "vault/vault_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* ---- the escaped forms the vault knows (the one table) ---------------------------
 * A secret value or encoding is searched for with each character that is
 * not a letter or digit also written the ways encoders write it, mixed as
 * an encoder mixes them (PHP's json_encode writes '/' as "\/" and '"' as
 * "\"", Gson '=' as "\u003d"): JSON's "\/", "\"" and "\\" and "\uXXXX";
 * percent-encoding, and '+' for a space (forms); HTML's numeric references
 * and the named ones below. Hex digits in either case. Letters and digits
 * are never escaped by any of them. */

#define ESC_FORM_MAX 8 /* longest form of one character: "&#x002F;", "&equals;" */

static const struct {
	char c;
	const char *name;
} html_names[] = {
    {'"', "quot"},   {'"', "QUOT"},   {'&', "amp"},    {'&', "AMP"},	{'<', "lt"},
    {'<', "LT"},     {'>', "gt"},     {'>', "GT"},     {'\'', "apos"},	{'/', "sol"},
    {'+', "plus"},   {'=', "equals"}, {'\\', "bsol"},  {':', "colon"},	{'!', "excl"},
    {'?', "quest"},  {'#', "num"},    {'$', "dollar"}, {'%', "percnt"}, {'(', "lpar"},
    {')', "rpar"},   {'*', "ast"},    {',', "comma"},  {'.', "period"}, {';', "semi"},
    {'[', "lsqb"},   {']', "rsqb"},   {'_', "lowbar"}, {'`', "grave"},	{'{', "lcub"},
    {'|', "verbar"}, {'}', "rcub"},   {'^', "Hat"},    {'@', "commat"},
};

static bool esc_plain(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* t[0..n) as the number of up to 4 digits (base 16 or 10) then ';': the
 * length read, 0 when it is not one, the number in *v. */
static size_t num_ref(const uint8_t *t, size_t n, bool hex, unsigned *v)
{
	size_t i = 0;

	*v = 0;
	while (i < n && i < 4 &&
	       (hex ? pc_hex_digit((char)t[i]) >= 0 : (t[i] >= '0' && t[i] <= '9'))) {
		*v = *v * (hex ? 16 : 10) + (unsigned)(hex ? pc_hex_digit((char)t[i]) : t[i] - '0');
		i++;
	}
	return i && i < n && t[i] == ';' ? i + 1 : 0;
}

/* The length of an escaped form of c at t[0..n) (not c itself), or 0. */
static size_t esc_form(uint8_t c, const uint8_t *t, size_t n)
{
	unsigned v;
	size_t l;

	if (esc_plain(c) || !n)
		return 0;
	switch (t[0]) {
	case '\\':
		if (n >= 2 && t[1] == c && (c == '/' || c == '"' || c == '\\'))
			return 2;
		if (n >= 6 && t[1] == 'u' && pc_hex_digit((char)t[2]) >= 0 &&
		    pc_hex_digit((char)t[3]) >= 0 && pc_hex_digit((char)t[4]) >= 0 &&
		    pc_hex_digit((char)t[5]) >= 0 &&
		    ((unsigned)pc_hex_digit((char)t[2]) << 12 |
		     (unsigned)pc_hex_digit((char)t[3]) << 8 |
		     (unsigned)pc_hex_digit((char)t[4]) << 4 |
		     (unsigned)pc_hex_digit((char)t[5])) == c)
			return 6;
		return 0;
	case '%':
		return n >= 3 && pc_hex_digit((char)t[1]) >= 0 && pc_hex_digit((char)t[2]) >= 0 &&
			       ((unsigned)pc_hex_digit((char)t[1]) << 4 |
				(unsigned)pc_hex_digit((char)t[2])) == c
			   ? 3
			   : 0;
	case '+':
		return c == ' ';
	case '&':
		if (n >= 4 && t[1] == '#') {
			bool hex = t[2] == 'x' || t[2] == 'X';
			size_t at = hex ? 3 : 2;

			l = num_ref(t + at, n - at, hex, &v);
			return l && v == c ? at + l : 0;
		}
		for (size_t i = 0; i < sizeof(html_names) / sizeof(html_names[0]); i++) {
			l = strlen(html_names[i].name);
			if ((uint8_t)html_names[i].c == c && n >= l + 2 &&
			    memcmp(t + 1, html_names[i].name, l) == 0 && t[l + 1] == ';')
				return l + 2;
		}
		return 0;
	}
	return 0;
}

/* ---- line breaks inside a base64 encoding --------------------------------------
 * Encoders wrap base64 in lines (MIME and base64(1): 76 columns; PEM and
 * OpenSSL: 64), with LF or CRLF, written raw or JSON-escaped when the
 * blob sits in a JSON string. A base64 pattern (lb) may have such a break
 * between any two of its characters, at most one per LB_COLS of them; a
 * break is no character of the value, so it is dropped with the match. */

#define LB_COLS	    64 /* the narrowest line encoders write */
#define LB_FORM_MAX 4  /* "\\r\\n" */

/* The length of a line break at t[0..n), or 0. */
static size_t lb_form(const uint8_t *t, size_t n)
{
	if (n >= 1 && t[0] == '\n')
		return 1;
	if (n >= 2 && t[0] == '\r' && t[1] == '\n')
		return 2;
	if (n >= 2 && t[0] == '\\' && t[1] == 'n')
		return 2;
	if (n >= 4 && t[0] == '\\' && t[1] == 'r' && t[2] == '\\' && t[3] == 'n')
		return 4;
	return 0;
}

/* How many line breaks a match of p may hold. */
static size_t lb_max(const struct scrub_pat *p)
{
	return p->lb ? p->nlen / LB_COLS + 1 : 0;
}

/* Can a form of c start with byte b? */
static bool esc_may_start(uint8_t c, uint8_t b)
{
	return b == c ||
	       (!esc_plain(c) && (b == '\\' || b == '%' || b == '&' || (c == ' ' && b == '+')));
}

/* Text offsets a match may be at, at once: a character has at most two
 * forms at one offset (itself and an escape that starts with it: '\\'
 * and "\\\\", '%' and "%25", '&' and "&amp;"), so more takes a value
 * with dozens of those in a row. Beyond, the match cannot be decided and
 * the stream stops (fail closed). */
#define ESC_LIVE      64
#define ESC_UNDECIDED ((size_t)-1)

/* The end of the longest match of the needle, escaped, at b[at..len): 0
 * when none, ESC_UNDECIDED. */
static size_t esc_match(const struct scrub_pat *p, const uint8_t *b, size_t len, size_t at)
{
	/* each candidate: where the next character is, and the line breaks
	 * it went past (a lb pattern only) */
	size_t cur[ESC_LIVE], nxt[ESC_LIVE], nc = 1, end = 0, maxb = lb_max(p);
	uint8_t cb[ESC_LIVE], nb[ESC_LIVE];

	cur[0] = at;
	cb[0] = 0;
	for (size_t k = 0; k < p->nlen && nc; k++) {
		uint8_t c = p->needle[k];
		size_t nn = 0;

		for (size_t j = 0; j < nc; j++) {
			size_t starts[2] = {cur[j], 0}, ns = 1, ends[4], ne = 0, l;
			uint8_t brk[4];

			/* a break before any character but the first */
			if (k && cb[j] < maxb && cur[j] < len &&
			    (l = lb_form(b + cur[j], len - cur[j])))
				starts[ns++] = cur[j] + l;
			for (size_t i = 0; i < ns; i++) {
				size_t o = starts[i];

				if (o >= len)
					continue;
				if (b[o] == c) {
					brk[ne] = (uint8_t)(cb[j] + i);
					ends[ne++] = o + 1;
				}
				if ((l = esc_form(c, b + o, len - o))) {
					brk[ne] = (uint8_t)(cb[j] + i);
					ends[ne++] = o + l;
				}
			}
			for (size_t e = 0; e < ne; e++) {
				bool dup = false;

				/* the same place with fewer breaks behind it wins */
				for (size_t q = 0; q < nn && !dup; q++)
					if ((dup = nxt[q] == ends[e]) && brk[e] < nb[q])
						nb[q] = brk[e];
				if (dup)
					continue;
				if (nn == ESC_LIVE)
					return ESC_UNDECIDED;
				nb[nn] = brk[e];
				nxt[nn++] = ends[e];
			}
		}
		memcpy(cur, nxt, nn * sizeof(*cur));
		memcpy(cb, nb, nn * sizeof(*cb));
		nc = nn;
	}
	for (size_t j = 0; j < nc; j++)
		end = cur[j] > end ? cur[j] : end;
	return end;
}

/* The most bytes a match of p may hold for needle[0..n): each byte in
 * its longest escaped form, and the line breaks a base64 pattern may
 * have. */
static size_t esc_span(const struct scrub_pat *p, size_t n)
{
	size_t m = lb_max(p) * LB_FORM_MAX;

	for (size_t i = 0; i < n; i++)
		m += esc_plain(p->needle[i]) ? 1 : ESC_FORM_MAX;
	return m;
}

/* The longest any match of p can be. */
static size_t pat_maxlen(const struct scrub_pat *p)
{
	return p->esc ? esc_span(p, p->nlen) : p->nlen;
}

#define ESC_ANCHOR_MIN 4

/* The longest run of letters and digits in p's needle[lo..hi): its offset
 * *ao and length (returned). */
static size_t plain_run(const uint8_t *needle, size_t lo, size_t hi, size_t *ao)
{
	size_t al = 0;

	for (size_t i = lo, run = 0; i < hi; i++) {
		run = esc_plain(needle[i]) ? run + 1 : 0;
		if (run > al) {
			al = run;
			*ao = i + 1 - run;
		}
	}
	return al;
}

/* How an escaped pattern is searched for: by every byte a form of its
 * first character can start with (no anchor of ESC_ANCHOR_MIN), by one
 * anchor, or (a base64 pattern) by two, one in each half of its first
 * LB_COLS characters. */
enum { ANCHOR_NONE, ANCHOR_ONE, ANCHOR_TWO };

struct scrub_meta {
	size_t maxlen;
	size_t a_off[2], a_len[2];
	/* the most bytes a match may hold before anchor w: the escaped
	 * forms of the needle's bytes before it, and the line breaks a
	 * base64 pattern may have (esc_find_at tries starts that far back) */
	size_t a_pre[2];
	int mode;
};

static void meta_make(const struct scrub_pat *p, struct scrub_meta *m)
{
	memset(m, 0, sizeof(*m));
	m->maxlen = pat_maxlen(p);
	if (!p->esc)
		return;
	if (!p->lb) {
		m->a_len[0] = plain_run(p->needle, 0, p->nlen, &m->a_off[0]);
		m->mode = m->a_len[0] < ESC_ANCHOR_MIN ? ANCHOR_NONE : ANCHOR_ONE;
	} else {
		size_t w = p->nlen < LB_COLS ? p->nlen : LB_COLS;

		m->a_len[0] = plain_run(p->needle, 0, w / 2, &m->a_off[0]);
		m->a_len[1] = plain_run(p->needle, w / 2, w, &m->a_off[1]);
		m->mode = m->a_len[0] < ESC_ANCHOR_MIN || m->a_len[1] < ESC_ANCHOR_MIN ? ANCHOR_NONE
										       : ANCHOR_TWO;
	}
	m->a_pre[0] = esc_span(p, m->a_off[0]);
	m->a_pre[1] = esc_span(p, m->a_off[1]);
}

/* p's meta: kept with it, or worked out now. */
static void meta_get(const struct scrub_pat *p, struct scrub_meta *m)
{
	if (p->meta)
		memcpy(m, p->meta, sizeof(*m));
	else
		meta_make(p, m);
}

/* ---- a kept set's index ------------------------------------------------------------
 * Every anchor of the set's patterns under its first two bytes: a bit per
 * two-byte value says whether any anchor starts with it, and the anchors
 * sorted by those two bytes say which. One pass over a buffer finds, for
 * every anchor at once, its first place: what memmem would find for each. */
struct ix_ent {
	size_t pat, which, off, len;
	uint16_t key;
};

struct scrub_index {
	size_t size; /* as allocated: secmem_free's */
	size_t n_pats, n_ent;
	uint64_t bits[65536 / 64];
	struct ix_ent ent[];
};

static uint16_t key2(const uint8_t *b)
{
	return (uint16_t)(b[0] | b[1] << 8);
}

static int ent_cmp(const void *a, const void *b)
{
	const struct ix_ent *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->pat < y->pat ? -1 : x->pat > y->pat;
}

int scrub_keep_index(struct scrub_keep *k)
{
	struct scrub_index *ix;
	size_t n_ent = 0, size;

	if (k->ix && k->ix->n_pats == k->n)
		return 0;
	for (size_t i = 0; i < k->n; i++)
		k->pats[i].ix = NULL;
	if (k->ix)
		secmem_free(k->ix, k->ix->size); /* wipes */
	k->ix = NULL;
	for (size_t i = 0; i < k->n; i++) {
		struct scrub_meta m;

		if (!k->pats[i].meta)
			return 0; /* a borrowed pattern: no index (none is built for one) */
		meta_get(&k->pats[i], &m);
		n_ent += m.mode == ANCHOR_TWO ? 2 : m.mode == ANCHOR_ONE;
	}
	/* a multiple of 16: sodium_malloc puts it at the end of its pages */
	size = (sizeof(*ix) + n_ent * sizeof(ix->ent[0]) + 15) & ~(size_t)15;
	if (!(ix = secmem_alloc(size)))
		return PC_ENOMEM;
	memset(ix, 0, size);
	ix->size = size;
	ix->n_pats = k->n;
	for (size_t i = 0; i < k->n; i++) {
		struct scrub_meta m;

		meta_get(&k->pats[i], &m);
		for (size_t w = 0; w < (m.mode == ANCHOR_TWO ? 2u : m.mode == ANCHOR_ONE); w++) {
			struct ix_ent *e = &ix->ent[ix->n_ent++];

			*e = (struct ix_ent){.pat = i,
					     .which = w,
					     .off = m.a_off[w],
					     .len = m.a_len[w],
					     .key = key2(k->pats[i].needle + m.a_off[w])};
			ix->bits[e->key >> 6] |= (uint64_t)1 << (e->key & 63);
		}
	}
	qsort(ix->ent, ix->n_ent, sizeof(ix->ent[0]), ent_cmp);
	k->ix = ix;
	for (size_t i = 0; i < k->n; i++) {
		k->pats[i].ix = ix;
		k->pats[i].ixi = i;
	}
	return 0;
}

/* The indexes whose patterns pats holds whole and in a row. */
static void ix_attach(struct scrub *s)
{
	for (size_t j = 0; j < s->n_pats && s->n_ix < SCRUB_IX_MAX;) {
		const struct scrub_index *ix = s->pats[j].ix;
		size_t t = 0;

		if (!ix || s->pats[j].ixi || ix->n_pats > s->n_pats - j) {
			j++;
			continue;
		}
		while (t < ix->n_pats && s->pats[j + t].ix == ix && s->pats[j + t].ixi == t)
			t++;
		if (t == ix->n_pats) {
			s->ix[s->n_ix] = ix;
			s->ixb[s->n_ix++] = j;
		}
		j += t ? t : 1;
	}
}

/* The cache slot of pattern i's anchor w, or SIZE_MAX when i is in no
 * attached index. */
static size_t ix_slot(const struct scrub *s, size_t i, size_t w)
{
	for (size_t t = 0; t < s->n_ix; t++)
		if (i >= s->ixb[t] && i - s->ixb[t] < s->ix[t]->n_pats)
			return 2 * i + w;
	return SIZE_MAX;
}

/* Index t's anchors that start with key at b[i], given i where each not
 * placed yet matches whole: how many were placed. Apart from the pass,
 * so that the pass stays a bit test per byte. */
static size_t ix_hit(struct scrub *s, size_t t, const uint8_t *b, size_t len, size_t i,
		     uint16_t key)
{
	const struct scrub_index *ix = s->ix[t];
	size_t lo = 0, hi = ix->n_ent, placed = 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ix->ent[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < ix->n_ent && ix->ent[lo].key == key; lo++) {
		const struct ix_ent *e = &ix->ent[lo];
		size_t slot = 2 * (s->ixb[t] + e->pat) + e->which;

		if (s->nx[2 * slot + 1] == SIZE_MAX && e->len <= len - i &&
		    memcmp(b + i, s->pats[s->ixb[t] + e->pat].needle + e->off, e->len) == 0) {
			s->nx[2 * slot + 1] = i;
			placed++;
		}
	}
	return placed;
}

/* The one pass: every indexed anchor's first place in b[0..len), until
 * each is placed, for both indexes (a connection's and its state's) at
 * once: a pass per index read every byte twice. */
static void ix_fill(struct scrub *s, const uint8_t *b, size_t len)
{
	size_t left[SCRUB_IX_MAX], all = 0;

	for (size_t t = 0; t < s->n_ix; t++) {
		for (size_t e = 0; e < s->ix[t]->n_ent; e++) {
			size_t slot =
			    2 * (s->ixb[t] + s->ix[t]->ent[e].pat) + s->ix[t]->ent[e].which;

			s->nx[2 * slot] = 0;
			s->nx[2 * slot + 1] = SIZE_MAX;
		}
		all += left[t] = s->ix[t]->n_ent;
	}
	if (!s->n_ix)
		return;
	/* the bytes that start no anchor of either index, nearly all, cost
	 * one test of the two bitmaps or'ed; with one index it stands in for
	 * the second */
	_Static_assert(SCRUB_IX_MAX == 2, "the pass tests two bitmaps");
	const uint64_t *b0 = s->ix[0]->bits, *b1 = s->ix[s->n_ix - 1]->bits;

	for (size_t i = 0; i + 1 < len && all; i++) {
		uint16_t key = key2(b + i);

		if (!((b0[key >> 6] | b1[key >> 6]) >> (key & 63) & 1))
			continue;
		for (size_t t = 0; t < s->n_ix; t++)
			if (left[t] && s->ix[t]->bits[key >> 6] >> (key & 63) & 1) {
				size_t placed = ix_hit(s, t, b, len, i, key);

				left[t] -= placed;
				all -= placed;
			}
	}
}

/* The first place of needle[0..nl) in b[srch..len): from the cache when
 * it knows (slot's search was from at most srch, and found nothing
 * before its place), else memmem, remembered. */
static const uint8_t *anchor_find(struct scrub *s, size_t slot, const uint8_t *b, size_t len,
				  size_t srch, const uint8_t *needle, size_t nl)
{
	const uint8_t *m;

	if (slot != SIZE_MAX && srch >= s->nx[2 * slot] && srch <= s->nx[2 * slot + 1])
		return s->nx[2 * slot + 1] == SIZE_MAX ? NULL : b + s->nx[2 * slot + 1];
	m = memmem(b + srch, len - srch, needle, nl);
	if (slot != SIZE_MAX) {
		s->nx[2 * slot] = srch;
		s->nx[2 * slot + 1] = m ? (size_t)(m - b) : SIZE_MAX;
	}
	return m;
}

int scrub_init(struct scrub *s, const struct scrub_pat *pats, size_t n, struct pc_err *err)
{
	memset(s, 0, sizeof(*s));
	s->pats = pats;
	s->n_pats = n;
	s->hit = -1;
	for (size_t i = 0; i < n; i++) {
		/* a kept pattern's is worked out already (an escaped one's is
		 * a walk of the needle): a response's scrubber is made for
		 * every request */
		size_t ml;

		if (!pats[i].nlen)
			return pc_err_set(err, PC_EINVAL, "empty scrub needle");
		ml = pats[i].meta ? pats[i].meta->maxlen : pat_maxlen(&pats[i]);
		if (ml > s->maxlen)
			s->maxlen = ml;
	}
	ix_attach(s);
	if (s->n_ix) {
		/* without room for the cache, one memmem per pattern as
		 * without an index: the same matches */
		s->nx = n <= sizeof(s->nx_small) / sizeof(s->nx_small[0]) / 4
			    ? s->nx_small
			    : malloc(4 * n * sizeof(*s->nx));
		if (!s->nx)
			s->n_ix = 0;
	}
	return 0;
}

void scrub_free(struct scrub *s)
{
	if (!s)
		return;
	if (s->nx != s->nx_small)
		free(s->nx); /* places in the buffer only */
	s->nx = NULL;
	s->n_ix = 0;
	if (s->buf) {
		/* the held-back tail may be the start of a secret */
		sodium_memzero(s->buf, s->cap);
		free(s->buf);
	}
	s->buf = NULL;
	s->len = s->cap = 0;
}

/* The earliest escaped match of p starting in b[from..stop), tried at
 * every byte a form of its first character can start with. */
/* An escaped match of p starting at b[q]: 1 with its start and end, -1
 * when it cannot be told (*undecided set), 0 when there is none. */
static int esc_try(const struct scrub_pat *p, const uint8_t *b, size_t len, size_t q, size_t *at,
		   size_t *end, bool *undecided)
{
	size_t e = esc_match(p, b, len, q);

	if (e == ESC_UNDECIDED) {
		*undecided = true;
		return -1;
	}
	if (!e)
		return 0;
	*at = q;
	*end = e;
	return 1;
}

static bool esc_scan(const struct scrub_pat *p, const uint8_t *b, size_t len, size_t from,
		     size_t stop, size_t *at, size_t *end, bool *undecided)
{
	uint8_t c0 = p->needle[0];

	for (size_t q = from; q < stop; q++) {
		int r;

		if (esc_plain(c0)) {
			/* a letter or digit is only ever itself */
			const uint8_t *m = memchr(b + q, c0, stop - q);

			if (!m)
				return false;
			q = (size_t)(m - b);
		} else if (!esc_may_start(c0, b[q])) {
			continue;
		}
		if ((r = esc_try(p, b, len, q, at, end, undecided)) != 0)
			return r > 0;
	}
	return false;
}

/* The earliest escaped match of p in b[from..len) starting before limit
 * that holds needle[ao..ao+al) as it is: its start and end, or false;
 * *undecided when it could not be told. Letters and digits only ever
 * match themselves, so found with memmem the anchor leaves a few starts
 * to try (the escaped forms before it are 1 to ESC_FORM_MAX bytes each,
 * and a base64 pattern's line breaks up to LB_FORM_MAX), instead of every
 * byte. */
static bool esc_find_at(struct scrub *s, size_t slot, const struct scrub_pat *p, const uint8_t *b,
			size_t len, size_t from, size_t limit, size_t ao, size_t al, size_t pmax,
			size_t *at, size_t *end, bool *undecided)
{
	size_t stop = limit < len ? limit : len, q = from, srch;

	/* candidates are tried in increasing order, each once: the first
	 * match is the earliest */
	for (srch = from + ao; q < stop && srch < len;) {
		const uint8_t *m = anchor_find(s, slot, b, len, srch, p->needle + ao, al);
		size_t h, lo, hi;

		if (!m)
			return false;
		h = (size_t)(m - b);
		lo = h >= pmax ? h - pmax : 0;
		lo = lo > q ? lo : q;
		hi = h - ao; /* at most ao bytes before the anchor: the prefix unescaped */
		for (size_t c = lo; c <= hi && c < stop; c++) {
			int r;

			if (esc_may_start(p->needle[0], b[c]) &&
			    (r = esc_try(p, b, len, c, at, end, undecided)) != 0)
				return r > 0;
		}
		q = hi + 1 > q ? hi + 1 : q;
		srch = h + 1;
	}
	return false;
}

/* The earliest escaped match of p in b[from..len) starting before limit:
 * its start and end, or false; *undecided when it could not be told.
 * Every match holds the needle's longest run of letters and digits as it
 * is; a base64 pattern's (lb) may have a line break in it, but not in both
 * of two runs within LB_COLS characters of each other: the match holds
 * one of them, and the earlier of the two searches is the earliest. */
static bool esc_find(struct scrub *s, size_t i, const uint8_t *b, size_t len, size_t from,
		     size_t limit, size_t *at, size_t *end, bool *undecided)
{
	const struct scrub_pat *p = &s->pats[i];
	size_t a_at, a_end;
	struct scrub_meta m;

	meta_get(p, &m);
	if (m.mode == ANCHOR_NONE)
		return esc_scan(p, b, len, from, limit < len ? limit : len, at, end, undecided);
	if (m.mode == ANCHOR_ONE)
		return esc_find_at(s, ix_slot(s, i, 0), p, b, len, from, limit, m.a_off[0],
				   m.a_len[0], m.a_pre[0], at, end, undecided);
	if (esc_find_at(s, ix_slot(s, i, 0), p, b, len, from, limit, m.a_off[0], m.a_len[0],
			m.a_pre[0], &a_at, &a_end, undecided)) {
		if (esc_find_at(s, ix_slot(s, i, 1), p, b, len, from, a_at, m.a_off[1], m.a_len[1],
				m.a_pre[1], at, end, undecided))
			return true;
		if (*undecided)
			return false;
		*at = a_at;
		*end = a_end;
		return true;
	}
	if (*undecided)
		return false;
	return esc_find_at(s, ix_slot(s, i, 1), p, b, len, from, limit, m.a_off[1], m.a_len[1],
			   m.a_pre[1], at, end, undecided);
}

/* Earliest match starting before limit (ties: the longest match): the
 * pattern's index, its start and its length; -1 none, -2 undecided. */
static int find_first(struct scrub *s, const uint8_t *b, size_t len, size_t from, size_t limit,
		      size_t *at, size_t *mlen)
{
	int best = -1;
	size_t best_at = limit, best_len = 0;

	for (size_t i = 0; i < s->n_pats; i++) {
		const struct scrub_pat *p = &s->pats[i];
		size_t m_at, m_end;
		bool undecided = false;

		if (from >= len || len - from < p->nlen)
			continue;
		if (p->esc) {
			/* a tie with the best so far still counts */
			if (!esc_find(s, i, b, len, from, best >= 0 ? best_at + 1 : limit, &m_at,
				      &m_end, &undecided)) {
				if (undecided)
					return -2;
				continue;
			}
		} else {
			const uint8_t *m = memmem(b + from, len - from, p->needle, p->nlen);

			if (!m)
				continue;
			m_at = (size_t)(m - b);
			m_end = m_at + p->nlen;
		}
		if (m_at < best_at || (m_at == best_at && best >= 0 && m_end - m_at > best_len)) {
			best_at = m_at;
			best_len = m_end - m_at;
			best = (int)i;
		}
	}
	if (best >= 0) {
		*at = best_at;
		*mlen = best_len;
	}
	return best;
}

/* Process buf[0..len): matches starting before safe_end are decided; bytes
 * from max(safe_end, end of last match) on are kept as the new tail. */
static int scrub_run(struct scrub *s, size_t safe_end, scrub_out_fn out, void *ctx)
{
	size_t pos = 0, keep;
	int rc = 0;

	if (s->n_ix)
		ix_fill(s, s->buf, s->len);
	for (;;) {
		size_t at, mlen;
		int i = find_first(s, s->buf, s->len, pos, safe_end, &at, &mlen);

		if (i == -2)
			return PC_EUNSUPP; /* undecided: nothing more goes out */
		if (i < 0)
			break;
		if (at > pos && (rc = out(ctx, s->buf + pos, at - pos)) < 0)
			return rc;
		s->hits++;
		if (!s->pats[i].repl) {
			s->hit = i;
			s->len = 0; /* nothing at or after a refused needle goes out */
			return PC_EREFUSED;
		}
		if (s->pats[i].rlen && (rc = out(ctx, s->pats[i].repl, s->pats[i].rlen)) < 0)
			return rc;
		pos = at + mlen;
	}
	keep = safe_end > pos ? safe_end : pos;
	if (keep > pos && (rc = out(ctx, s->buf + pos, keep - pos)) < 0)
		return rc;
	memmove(s->buf, s->buf + keep, s->len - keep);
	sodium_memzero(s->buf + (s->len - keep), keep);
	s->len -= keep;
	return 0;
}

#define SCRUB_CHUNK 16384

/* in[0..n) after the held-back tail. */
static int buf_append(struct scrub *s, const uint8_t *in, size_t n)
{
	if (s->len + n > s->cap) {
		size_t cap = s->len + n + 64;
		uint8_t *nb = malloc(cap);

		if (!nb)
			return PC_ENOMEM;
		if (s->buf) {
			memcpy(nb, s->buf, s->len);
			sodium_memzero(s->buf, s->cap);
			free(s->buf);
		}
		s->buf = nb;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, in, n);
	s->len += n;
	return 0;
}

int scrub_feed(struct scrub *s, const uint8_t *in, size_t len, scrub_out_fn out, void *ctx)
{
	size_t hold = s->maxlen ? s->maxlen - 1 : 0;

	if (s->hit >= 0)
		return PC_EREFUSED;
	if (!s->n_pats)
		return len ? out(ctx, in, len) : 0;
	while (len) {
		/* bounded working buffer: tail + up to 16 KiB of input at a time */
		size_t take = len < SCRUB_CHUNK ? len : SCRUB_CHUNK;
		int rc;

		if ((rc = buf_append(s, in, take)) < 0)
			return rc;
		in += take;
		len -= take;
		rc = scrub_run(s, s->len > hold ? s->len - hold : 0, out, ctx);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int scrub_finish(struct scrub *s, scrub_out_fn out, void *ctx)
{
	if (s->hit >= 0)
		return PC_EREFUSED;
	if (!s->len)
		return 0;
	return scrub_run(s, s->len, out, ctx);
}

/* scrub_buffer's output: a buffer that wipes what it leaves behind when
 * it grows (a head may hold what the scrubber does not know). */
static int buf_out(void *ctx, const uint8_t *p, size_t n)
{
	struct pc_buf *b = ctx;

	pc_buf_put(b, p, n);
	return b->err;
}

int scrub_buffer(const struct scrub_pat *pats, size_t n, const uint8_t *in, size_t len,
		 uint8_t **out, size_t *out_len, struct pc_err *err)
{
	struct scrub s;
	struct pc_buf m;
	int rc;

	if (scrub_init(&s, pats, n, err) < 0)
		return PC_EINVAL;
	pc_buf_init(&m, SIZE_MAX, PC_BUF_SECRET);
	if (n && len && len <= SCRUB_CHUNK) {
		/* all of it at hand, and one chunk: one run to its end, where
		 * a feed and a finish read it twice (the feed holds back the
		 * longest match but one, often all of a response's head) */
		if ((rc = buf_append(&s, in, len)) == 0)
			rc = scrub_run(&s, s.len, buf_out, &m);
	} else {
		rc = scrub_feed(&s, in, len, buf_out, &m);
		if (rc == 0)
			rc = scrub_finish(&s, buf_out, &m);
	}
	scrub_free(&s);
	if (rc == 0 && !(*out = (uint8_t *)pc_buf_take(&m, out_len)))
		rc = PC_ENOMEM; /* buf_out reported any failure before */
	if (rc < 0) {
		pc_buf_free(&m); /* wipes */
		return pc_err_set(err, rc, "%s",
				  rc == PC_EREFUSED ? "refused needle found" : "out of memory");
	}
	return 0;
}

/* ---- kept patterns ------------------------------------------------------------ */

/* Copies live in sodium_malloc'ed chunks (locked, guarded, wiped when
 * freed): they are real credentials or their encodings. */
struct keep_chunk {
	struct keep_chunk *next;
	uint8_t *mem;
	size_t used, size;
};

#define KEEP_CHUNK 16384

void scrub_keep_free(struct scrub_keep *k)
{
	struct keep_chunk *c, *next;

	if (!k)
		return;
	for (c = k->chunks; c; c = next) {
		next = c->next;
		secmem_free(c->mem, c->size); /* wipes */
		free(c);
	}
	free(k->pats);
	if (k->ix)
		secmem_free(k->ix, k->ix->size); /* wipes */
	memset(k, 0, sizeof(*k));
}

static bool keep_has(const struct scrub_keep *k, const uint8_t *needle, size_t nlen)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->pats[i].nlen == nlen && memcmp(k->pats[i].needle, needle, nlen) == 0)
			return true;
	return false;
}

/* Room for n bytes of locked memory, or NULL; counted: against the
 * set's bound (needles and replacements; not what the search works out
 * of them, which the bound was not written for). */
static uint8_t *keep_alloc(struct scrub_keep *k, size_t n, bool counted)
{
	struct keep_chunk *c = k->chunks;

	if (counted && !k->unbounded && k->bytes + n > SCRUB_KEEP_MAX_BYTES)
		return NULL;
	/* what is not counted is a struct: aligned (a chunk's size is a
	 * multiple of 16, and sodium_malloc puts it at the end of its pages) */
	if (!counted && c)
		c->used = c->used + 15 <= c->size ? (c->used + 15) & ~(size_t)15 : c->size;
	if (!c || c->size - c->used < n) {
		size_t size = n > KEEP_CHUNK ? (n + 15) & ~(size_t)15 : KEEP_CHUNK;

		c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		c->mem = secmem_alloc(size);
		if (!c->mem) {
			free(c);
			return NULL;
		}
		c->size = size;
		c->next = k->chunks;
		k->chunks = c;
	}
	c->used += n;
	if (counted)
		k->bytes += n;
	return c->mem + c->used - n;
}

static int keep_push(struct scrub_keep *k, const struct scrub_pat *p)
{
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 16;
		struct scrub_pat *np = malloc(cap * sizeof(*np));

		if (!np)
			return PC_ENOMEM;
		if (k->n)
			memcpy(np, k->pats, k->n * sizeof(*np));
		free(k->pats); /* pointers and lengths only: nothing to wipe */
		k->pats = np;
		k->cap = cap;
	}
	k->pats[k->n++] = *p;
	return 0;
}

static int keep_add(struct scrub_keep *k, const uint8_t *needle, size_t nlen, const uint8_t *repl,
		    size_t rlen, bool borrow, bool lb)
{
	/* what is kept is values and their encodings: searched for escaped */
	struct scrub_pat p = {
	    .needle = needle, .nlen = nlen, .repl = repl, .rlen = rlen, .esc = true, .lb = lb};
	uint8_t *m;

	if (!nlen || !repl)
		return PC_EINVAL;
	if (keep_has(k, needle, nlen))
		return 0;
	if (!k->unbounded && k->n >= SCRUB_KEEP_MAX_PATS)
		return PC_EREFUSED;
	if (!borrow) {
		struct scrub_meta meta;

		if (!(m = keep_alloc(k, nlen + rlen, true)))
			return !k->unbounded && k->bytes + nlen + rlen > SCRUB_KEEP_MAX_BYTES
				   ? PC_EREFUSED
				   : PC_ENOMEM;
		memcpy(m, needle, nlen);
		memcpy(m + nlen, repl, rlen);
		p.needle = m;
		p.repl = m + nlen;
		/* worked out once, beside the needle (a borrowed needle's set
		 * lives for one request: worked out at each search instead) */
		if (!(m = keep_alloc(k, sizeof(meta), false)))
			return PC_ENOMEM;
		meta_make(&p, &meta);
		memcpy(m, &meta, sizeof(meta));
		p.meta = (const struct scrub_meta *)m;
	}
	return keep_push(k, &p);
}

int scrub_keep_add(struct scrub_keep *k, const uint8_t *needle, size_t nlen, const uint8_t *repl,
		   size_t rlen, bool borrow)
{
	return keep_add(k, needle, nlen, repl, rlen, borrow, false);
}

int scrub_keep_merge(struct scrub_keep *dst, const struct scrub_keep *src)
{
	for (size_t i = 0; i < src->n; i++) {
		const struct scrub_pat *p = &src->pats[i];
		int rc = keep_add(dst, p->needle, p->nlen, p->repl, p->rlen, false, p->lb);

		if (rc < 0)
			return rc;
	}
	return 0;
}

int scrub_keep_add_value(struct scrub_keep *k, const uint8_t *value, size_t vlen,
			 const uint8_t *repl, size_t rlen)
{
	static const int variants[] = {sodium_base64_VARIANT_ORIGINAL,
				       sodium_base64_VARIANT_URLSAFE};
	size_t cap = 2 + vlen;
	size_t b64cap = sodium_base64_ENCODED_LEN(cap, sodium_base64_VARIANT_ORIGINAL);
	uint8_t *m;
	int rc = scrub_keep_add(k, value, vlen, repl, rlen, false);

	if (rc < 0)
		return rc;
	if (!(m = secmem_alloc(cap + b64cap)))
		return PC_ENOMEM;
	for (size_t v = 0; v < 2 && rc == 0; v++)
		for (size_t a = 0; a < 3 && rc == 0; a++) {
			char *b64 = (char *)m + cap;
			/* character i holds bits [6i, 6i + 6) of the encoded
			 * bytes; the value's are [8a, 8a + 8 vlen) */
			size_t first = (8 * a + 5) / 6, end = (8 * (a + vlen)) / 6;

			memset(m, 0, a);
			memcpy(m + a, value, vlen);
			sodium_bin2base64(b64, b64cap, m, a + vlen, variants[v]);
			if (end > first)
				rc = keep_add(k, (const uint8_t *)b64 + first, end - first, repl,
					      rlen, false, true);
		}
	secmem_free(m, cap + b64cap); /* wipes */
	return rc;
}
