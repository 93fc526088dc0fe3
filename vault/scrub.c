/* Streaming multi-needle replacement: real secret values in responses become
 * placeholders, and placeholders in request bodies are caught, however the
 * stream is cut into reads. At most (longest needle - 1) bytes are held back. */
#include "vault/vault_int.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

int scrub_init(struct scrub *s, const struct scrub_pat *pats, size_t n, struct pc_err *err)
{
	memset(s, 0, sizeof(*s));
	s->pats = pats;
	s->n_pats = n;
	s->hit = -1;
	for (size_t i = 0; i < n; i++) {
		if (!pats[i].nlen)
			return pc_err_set(err, PC_EINVAL, "empty scrub needle");
		if (pats[i].nlen > s->maxlen)
			s->maxlen = pats[i].nlen;
	}
	return 0;
}

void scrub_free(struct scrub *s)
{
	if (!s)
		return;
	if (s->buf) {
		/* the held-back tail may be the start of a secret */
		sodium_memzero(s->buf, s->cap);
		free(s->buf);
	}
	s->buf = NULL;
	s->len = s->cap = 0;
}

/* Earliest match starting before limit (ties: the longest needle). */
static int find_first(const struct scrub *s, const uint8_t *b, size_t len, size_t from,
		      size_t limit, size_t *at)
{
	int best = -1;
	size_t best_at = limit;

	for (size_t i = 0; i < s->n_pats; i++) {
		const struct scrub_pat *p = &s->pats[i];
		const uint8_t *m;

		if (from >= len || len - from < p->nlen)
			continue;
		m = memmem(b + from, len - from, p->needle, p->nlen);
		if (!m)
			continue;
		if ((size_t)(m - b) < best_at ||
		    ((size_t)(m - b) == best_at && best >= 0 && p->nlen > s->pats[best].nlen)) {
			best_at = (size_t)(m - b);
			best = (int)i;
		}
	}
	if (best >= 0)
		*at = best_at;
	return best;
}

/* Process buf[0..len): matches starting before safe_end are decided; bytes
 * from max(safe_end, end of last match) on are kept as the new tail. */
static int scrub_run(struct scrub *s, size_t safe_end, scrub_out_fn out, void *ctx)
{
	size_t pos = 0, keep;
	int rc = 0;

	for (;;) {
		size_t at;
		int i = find_first(s, s->buf, s->len, pos, safe_end, &at);

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
		pos = at + s->pats[i].nlen;
	}
	keep = safe_end > pos ? safe_end : pos;
	if (keep > pos && (rc = out(ctx, s->buf + pos, keep - pos)) < 0)
		return rc;
	memmove(s->buf, s->buf + keep, s->len - keep);
	sodium_memzero(s->buf + (s->len - keep), keep);
	s->len -= keep;
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
		size_t take = len < 16384 ? len : 16384;
		int rc;

		if (s->len + take > s->cap) {
			size_t cap = s->len + take + 64;
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
		memcpy(s->buf + s->len, in, take);
		s->len += take;
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

struct membuf {
	uint8_t *p;
	size_t len, cap;
};

static int membuf_out(void *ctx, const uint8_t *p, size_t n)
{
	struct membuf *m = ctx;

	if (m->len + n > m->cap) {
		size_t cap = (m->len + n) * 2 + 64;
		uint8_t *nb = malloc(cap);

		if (!nb)
			return PC_ENOMEM;
		if (m->p) {
			memcpy(nb, m->p, m->len);
			sodium_memzero(m->p, m->cap);
			free(m->p);
		}
		m->p = nb;
		m->cap = cap;
	}
	if (n) {
		memcpy(m->p + m->len, p, n);
		m->len += n;
	}
	return 0;
}

int scrub_buffer(const struct scrub_pat *pats, size_t n, const uint8_t *in, size_t len,
		 uint8_t **out, size_t *out_len, struct pc_err *err)
{
	struct scrub s;
	struct membuf m = {0};
	int rc;

	if (scrub_init(&s, pats, n, err) < 0)
		return PC_EINVAL;
	rc = membuf_out(&m, (const uint8_t *)"", 0);
	if (rc == 0)
		rc = scrub_feed(&s, in, len, membuf_out, &m);
	if (rc == 0)
		rc = scrub_finish(&s, membuf_out, &m);
	scrub_free(&s);
	if (rc < 0) {
		if (m.p) {
			sodium_memzero(m.p, m.cap);
			free(m.p);
		}
		return pc_err_set(err, rc, "%s",
				  rc == PC_EREFUSED ? "refused needle found" : "out of memory");
	}
	*out = m.p;
	*out_len = m.len;
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
		sodium_free(c->mem); /* wipes */
		free(c);
	}
	free(k->pats);
	memset(k, 0, sizeof(*k));
}

static bool keep_has(const struct scrub_keep *k, const uint8_t *needle, size_t nlen)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->pats[i].nlen == nlen && memcmp(k->pats[i].needle, needle, nlen) == 0)
			return true;
	return false;
}

/* Room for n bytes of locked memory, or NULL. */
static uint8_t *keep_alloc(struct scrub_keep *k, size_t n)
{
	struct keep_chunk *c = k->chunks;

	if (k->bytes + n > SCRUB_KEEP_MAX_BYTES)
		return NULL;
	if (!c || c->size - c->used < n) {
		size_t size = n > KEEP_CHUNK ? n : KEEP_CHUNK;

		c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		c->mem = sodium_malloc(size);
		if (!c->mem) {
			free(c);
			return NULL;
		}
		c->size = size;
		c->next = k->chunks;
		k->chunks = c;
	}
	c->used += n;
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

int scrub_keep_add(struct scrub_keep *k, const uint8_t *needle, size_t nlen, const uint8_t *repl,
		   size_t rlen, bool borrow)
{
	struct scrub_pat p = {.needle = needle, .nlen = nlen, .repl = repl, .rlen = rlen};
	uint8_t *m;

	if (!nlen || !repl)
		return PC_EINVAL;
	if (keep_has(k, needle, nlen))
		return 0;
	if (k->n >= SCRUB_KEEP_MAX_PATS)
		return PC_EREFUSED;
	if (!borrow) {
		if (!(m = keep_alloc(k, nlen + rlen)))
			return k->bytes + nlen + rlen > SCRUB_KEEP_MAX_BYTES ? PC_EREFUSED
									     : PC_ENOMEM;
		memcpy(m, needle, nlen);
		memcpy(m + nlen, repl, rlen);
		p.needle = m;
		p.repl = m + nlen;
	}
	return keep_push(k, &p);
}

int scrub_keep_merge(struct scrub_keep *dst, const struct scrub_keep *src)
{
	for (size_t i = 0; i < src->n; i++) {
		const struct scrub_pat *p = &src->pats[i];
		int rc = scrub_keep_add(dst, p->needle, p->nlen, p->repl, p->rlen, false);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* How encoders commonly write the three base64 characters that are not
 * letters or digits: JSON's escaped solidus (PHP, some Java), JSON \u
 * escapes in either case, percent-encoding in either case, and Gson's
 * HTML-safe "=". Letters and digits are never escaped by any of them. */
static const struct b64_esc {
	const char *plus, *slash, *eq;
} b64_escapes[] = {
    {"+", "\\/", "="},
    {"\\u002b", "\\u002f", "\\u003d"},
    {"\\u002B", "\\u002F", "\\u003D"},
    {"%2B", "%2F", "%3D"},
    {"%2b", "%2f", "%3d"},
    {"+", "/", "\\u003d"},
};
#define B64_ESC_MAX 6 /* longest escape */

/* s[0..n) written with escape e into out (room for n * B64_ESC_MAX);
 * the length, and whether anything changed. */
static size_t b64_escape(const struct b64_esc *e, const uint8_t *s, size_t n, uint8_t *out,
			 bool *changed)
{
	size_t o = 0;

	*changed = false;
	for (size_t i = 0; i < n; i++) {
		const char *r = s[i] == '+'   ? e->plus
				: s[i] == '/' ? e->slash
				: s[i] == '=' ? e->eq
					      : NULL;

		if (r && (strlen(r) != 1 || *r != (char)s[i])) {
			memcpy(out + o, r, strlen(r));
			o += strlen(r);
			*changed = true;
		} else {
			out[o++] = s[i];
		}
	}
	return o;
}

int scrub_keep_add_b64(struct scrub_keep *k, const uint8_t *needle, size_t nlen,
		       const uint8_t *repl, size_t rlen)
{
	size_t cap = (nlen + rlen) * B64_ESC_MAX;
	uint8_t *tmp;
	int rc = scrub_keep_add(k, needle, nlen, repl, rlen, false);

	if (rc < 0)
		return rc;
	if (!(tmp = sodium_malloc(cap)))
		return PC_ENOMEM;
	for (size_t i = 0; rc == 0 && i < sizeof(b64_escapes) / sizeof(b64_escapes[0]); i++) {
		bool ch, chr;
		size_t en = b64_escape(&b64_escapes[i], needle, nlen, tmp, &ch);
		/* the sandbox gets back its own encoding, escaped alike */
		size_t er = b64_escape(&b64_escapes[i], repl, rlen, tmp + en, &chr);

		if (ch)
			rc = scrub_keep_add(k, tmp, en, tmp + en, er, false);
	}
	sodium_free(tmp); /* wipes */
	return rc;
}
