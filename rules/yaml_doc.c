/* The YAML loader: libyaml events to a tree of nodes that remember their
 * line and column, so that every later error can point at the input. */
#include "rules/rules_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct yframe {
	struct ynode *node;
	struct ynode **items;
	size_t n, cap;
};

struct ybuild {
	struct yfile *f;
	struct yctx c;
	struct yframe stack[YDOC_MAX_DEPTH + 1];
	size_t depth;
	size_t nodes;
	struct ydoc *docs;
	size_t n_docs, cap_docs;
	struct ynode *root;
};

static int ybuild_err(struct ybuild *b, const yaml_mark_t *m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int ybuild_err(struct ybuild *b, const yaml_mark_t *m, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = diag_vat(b->c.d, PC_EPARSE, b->f->name, (unsigned)m->line + 1, (unsigned)m->column + 1,
		      fmt, ap);
	va_end(ap);
	return rc;
}

static int ybuild_nomem(struct ybuild *b)
{
	return diag_at(b->c.d, PC_ENOMEM, b->f->name, 0, 0, "out of memory");
}

/* The byte the reader refused: for a bad trailing octet libyaml names
 * the octet after the lead byte; the admin's character starts at the
 * lead byte (a Latin-1 'é' is that byte alone). */
static size_t reader_error_offset(const yaml_parser_t *p, const char *buf, size_t len)
{
	size_t off = p->problem_offset < len ? p->problem_offset : len;

	for (int back = 0;
	     back < 3 && off > 0 && off < len && ((unsigned char)buf[off] & 0xC0) != 0xC0 &&
	     (unsigned char)buf[off - 1] >= 0x80;
	     back++)
		off--;
	return off;
}

/* Where the syntax error is; the reader reports only a byte offset. */
static void yparse_error_pos(const yaml_parser_t *p, const char *buf, size_t len, unsigned *line,
			     unsigned *col)
{
	if (p->error == YAML_READER_ERROR) {
		size_t off = reader_error_offset(p, buf, len);

		*line = 1;
		*col = 1;
		for (size_t i = 0; i < off; i++) {
			if (buf[i] == '\n') {
				(*line)++;
				*col = 1;
			} else {
				(*col)++;
			}
		}
		return;
	}
	*line = (unsigned)p->problem_mark.line + 1;
	*col = (unsigned)p->problem_mark.column + 1;
}

static int yparse_error(struct ybuild *b, const yaml_parser_t *p, const char *buf, size_t len)
{
	unsigned line, col;

	if (p->error == YAML_MEMORY_ERROR)
		return ybuild_nomem(b);
	yparse_error_pos(p, buf, len, &line, &col);
	if (p->error == YAML_READER_ERROR && p->problem && strstr(p->problem, "UTF-8")) {
		size_t off = reader_error_offset(p, buf, len);

		return diag_at(b->c.d, PC_EPARSE, b->f->name, line, col,
			       "byte 0x%02X is not UTF-8 (%s); the file must be UTF-8: save it "
			       "as UTF-8 or convert it (iconv -f latin1 -t utf-8)",
			       off < len ? (unsigned char)buf[off] : 0, p->problem);
	}
	if (p->context && strcmp(p->context, "while scanning an alias") == 0 &&
	    p->context_mark.index < len && buf[p->context_mark.index] == '*') {
		/* `host: *.example.com`: the wildcard read as an alias */
		/* buf is the file's bytes, not a C string: scan within len;
		 * quote only what prints */
		const char *w = buf + p->context_mark.index;
		size_t wl = 0, room = len - p->context_mark.index;

		while (wl < room && wl < 200 && (unsigned char)w[wl] > 0x20 &&
		       (unsigned char)w[wl] < 0x7f && !strchr(",]}#\"", w[wl]))
			wl++;

		return diag_at(b->c.d, PC_EPARSE, b->f->name, (unsigned)p->context_mark.line + 1,
			       (unsigned)p->context_mark.column + 1,
			       "invalid YAML: an unquoted '*' starts a YAML alias; quote a "
			       "wildcard: \"%.*s\"",
			       (int)wl, w);
	}
	if (p->error != YAML_READER_ERROR && p->problem_mark.index < len &&
	    buf[p->problem_mark.index] == '\t')
		return diag_at(b->c.d, PC_EPARSE, b->f->name, line, col,
			       "invalid YAML: a tab character; expected spaces (YAML indents with "
			       "spaces only)");
	if (p->context)
		return diag_at(b->c.d, PC_EPARSE, b->f->name, line, col,
			       "invalid YAML: %s (%s at line %u column %u)",
			       p->problem ? p->problem : "syntax error", p->context,
			       (unsigned)p->context_mark.line + 1,
			       (unsigned)p->context_mark.column + 1);
	return diag_at(b->c.d, PC_EPARSE, b->f->name, line, col, "invalid YAML: %s",
		       p->problem ? p->problem : "syntax error");
}

static int ynode_sort_cmp(const void *x, const void *y)
{
	const struct ynode *a = *(const struct ynode *const *)x,
			   *b = *(const struct ynode *const *)y;
	int c = strcmp(a->str, b->str);

	if (c)
		return c;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return a->col < b->col ? -1 : a->col > b->col;
}

/* Keys must be scalars and unique. Sorting makes the duplicate check
 * O(n log n) even for a hostile mapping of a million keys. */
static int ymap_validate(struct ybuild *b, struct ynode *m)
{
	struct ynode **keys;
	int rc = 0;

	for (size_t i = 0; i < m->n; i++) {
		const struct ynode *k = m->kids[2 * i];
		char desc[96];

		if (k->type != YN_SCALAR || ynode_is_null(k))
			rc = yerr(&b->c, k, "expected a key (a name), found %s",
				  ynode_describe(k, desc, sizeof(desc)));
	}
	if (rc || m->n < 2)
		return rc;
	keys = malloc(m->n * sizeof(*keys));
	if (!keys)
		return ybuild_nomem(b);
	for (size_t i = 0; i < m->n; i++)
		keys[i] = m->kids[2 * i];
	qsort(keys, m->n, sizeof(*keys), ynode_sort_cmp);
	for (size_t i = 1; i < m->n; i++)
		if (strcmp(keys[i]->str, keys[i - 1]->str) == 0)
			rc = yerr(&b->c, keys[i],
				  "duplicate key '%s' (first at line %u column %u); expected each "
				  "key once per mapping",
				  keys[i]->str, keys[i - 1]->line, keys[i - 1]->col);
	free(keys);
	return rc;
}

static int ybuild_add(struct ybuild *b, struct ynode *n)
{
	struct yframe *top;

	if (++b->nodes > YDOC_MAX_NODES)
		return yerr(&b->c, n, "too many YAML nodes (limit %u); split the file",
			    YDOC_MAX_NODES);
	if (b->depth == 0) {
		b->root = n;
		return 0;
	}
	top = &b->stack[b->depth - 1];
	if (top->n == top->cap) {
		size_t cap = top->cap ? top->cap * 2 : 8;
		struct ynode **items = realloc(top->items, cap * sizeof(*items));

		if (!items)
			return ybuild_nomem(b);
		top->items = items;
		top->cap = cap;
	}
	top->items[top->n++] = n;
	return 0;
}

static struct ynode *ynode_new(struct ybuild *b, enum ynode_type t, const yaml_mark_t *m)
{
	struct ynode *n = arena_alloc(&b->f->arena, sizeof(*n));

	if (n) {
		n->type = t;
		n->line = (unsigned)m->line + 1;
		n->col = (unsigned)m->column + 1;
	}
	return n;
}

static int ybuild_scalar(struct ybuild *b, const yaml_event_t *ev)
{
	const char *tag = (const char *)ev->data.scalar.tag;
	const char *v = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	struct ynode *n;

	if (tag && strcmp(tag, YAML_STR_TAG) != 0)
		return ybuild_err(b, &ev->start_mark,
				  "YAML tag '%s' is not supported; expected a plain value", tag);
	if (memchr(v, '\0', len))
		return ybuild_err(b, &ev->start_mark,
				  "value contains a NUL character; expected text");
	n = ynode_new(b, YN_SCALAR, &ev->start_mark);
	if (!n || !(n->str = arena_strndup(&b->f->arena, v, len)))
		return ybuild_nomem(b);
	n->len = len;
	n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || tag;
	return ybuild_add(b, n);
}

static int ybuild_open(struct ybuild *b, const yaml_event_t *ev, enum ynode_type t)
{
	const yaml_char_t *tag =
	    t == YN_SEQ ? ev->data.sequence_start.tag : ev->data.mapping_start.tag;
	struct ynode *n;
	int rc;

	if (tag)
		return ybuild_err(b, &ev->start_mark,
				  "YAML tag '%s' is not supported; expected a plain %s",
				  (const char *)tag, t == YN_SEQ ? "list" : "mapping");
	if (b->depth >= YDOC_MAX_DEPTH)
		return ybuild_err(b, &ev->start_mark,
				  "nested too deeply (more than %u levels); expected a flat "
				  "structure",
				  YDOC_MAX_DEPTH);
	n = ynode_new(b, t, &ev->start_mark);
	if (!n)
		return ybuild_nomem(b);
	rc = ybuild_add(b, n);
	if (rc)
		return rc;
	b->stack[b->depth++] = (struct yframe){.node = n};
	return 0;
}

static int ybuild_close(struct ybuild *b)
{
	struct yframe *top = &b->stack[b->depth - 1];
	struct ynode *n = top->node;
	int rc = 0;

	if (top->n) {
		n->kids = arena_calloc(&b->f->arena, top->n, sizeof(*n->kids));
		if (!n->kids)
			rc = ybuild_nomem(b);
		else
			memcpy(n->kids, top->items, top->n * sizeof(*n->kids));
	}
	n->n = n->type == YN_MAP ? top->n / 2 : top->n;
	free(top->items);
	top->items = NULL;
	b->depth--;
	if (!rc && n->type == YN_MAP)
		rc = ymap_validate(b, n);
	return rc;
}

static int ybuild_doc_end(struct ybuild *b, const yaml_mark_t *start)
{
	struct ydoc *d;

	if (!b->root) {
		/* libyaml gives an empty document an empty scalar; be sure. */
		b->root = ynode_new(b, YN_SCALAR, start);
		if (!b->root || !(b->root->str = arena_strdup(&b->f->arena, "")))
			return ybuild_nomem(b);
	}
	if (b->n_docs == b->cap_docs) {
		size_t cap = b->cap_docs ? b->cap_docs * 2 : 4;
		struct ydoc *docs = arena_calloc(&b->f->arena, cap, sizeof(*docs));

		if (!docs)
			return ybuild_nomem(b);
		if (b->n_docs)
			memcpy(docs, b->docs, b->n_docs * sizeof(*docs));
		b->docs = docs;
		b->cap_docs = cap;
	}
	d = &b->docs[b->n_docs++];
	d->root = b->root;
	d->line = (unsigned)start->line + 1;
	d->col = (unsigned)start->column + 1;
	b->root = NULL;
	return 0;
}

int yfile_parse(const char *name, const char *buf, size_t len, struct yfile **out, struct diag *d)
{
	struct ybuild b = {0};
	yaml_parser_t parser;
	yaml_event_t ev;
	yaml_mark_t doc_start = {0};
	bool done = false;
	int rc = 0;

	b.f = calloc(1, sizeof(*b.f));
	if (!b.f)
		return diag_at(d, PC_ENOMEM, name, 0, 0, "out of memory");
	b.f->name = arena_strdup(&b.f->arena, name);
	if (!b.f->name) {
		free(b.f);
		return diag_at(d, PC_ENOMEM, name, 0, 0, "out of memory");
	}
	b.c.d = d;
	b.c.file = b.f->name;
	if (!yaml_parser_initialize(&parser)) {
		rc = ybuild_nomem(&b);
		goto out_nofree_parser;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	while (!done && !rc) {
		if (!yaml_parser_parse(&parser, &ev)) {
			rc = yparse_error(&b, &parser, buf, len);
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		case YAML_DOCUMENT_START_EVENT:
			doc_start = ev.start_mark;
			break;
		case YAML_DOCUMENT_END_EVENT:
			rc = ybuild_doc_end(&b, &doc_start);
			break;
		case YAML_ALIAS_EVENT:
			rc = ybuild_err(&b, &ev.start_mark,
					"YAML aliases (*%s) are not supported; write the value out "
					"(a wildcard or a value starting with '*' must be quoted: "
					"\"*%s\")",
					(const char *)ev.data.alias.anchor,
					(const char *)ev.data.alias.anchor);
			break;
		case YAML_SCALAR_EVENT:
			rc = ybuild_scalar(&b, &ev);
			break;
		case YAML_SEQUENCE_START_EVENT:
			rc = ybuild_open(&b, &ev, YN_SEQ);
			break;
		case YAML_MAPPING_START_EVENT:
			rc = ybuild_open(&b, &ev, YN_MAP);
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			rc = ybuild_close(&b);
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
out_nofree_parser:
	while (b.depth)
		free(b.stack[--b.depth].items);
	if (rc) {
		yfile_free(b.f);
		return rc;
	}
	b.f->docs = b.docs;
	b.f->n_docs = b.n_docs;
	*out = b.f;
	return 0;
}

void yfile_free(struct yfile *f)
{
	if (!f)
		return;
	arena_free(&f->arena);
	free(f);
}

const struct ynode *ymap_get(const struct ynode *m, const char *key)
{
	if (!m || m->type != YN_MAP)
		return NULL;
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(ymap_key(m, i)->str, key) == 0)
			return ymap_val(m, i);
	return NULL;
}

bool ynode_is_null(const struct ynode *n)
{
	if (n->type != YN_SCALAR || n->quoted)
		return false;
	return n->len == 0 || strcmp(n->str, "~") == 0 || strcmp(n->str, "null") == 0 ||
	       strcmp(n->str, "Null") == 0 || strcmp(n->str, "NULL") == 0;
}

static bool yplain_bool(const struct ynode *n)
{
	static const char *const b[] = {"true", "True", "TRUE", "false", "False", "FALSE"};

	for (size_t i = 0; !n->quoted && i < sizeof(b) / sizeof(b[0]); i++)
		if (strcmp(n->str, b[i]) == 0)
			return true;
	return false;
}

static bool yplain_number(const struct ynode *n)
{
	const char *s = n->str;

	if (n->quoted)
		return false;
	if (*s == '-' || *s == '+')
		s++;
	if (!*s)
		return false;
	for (; *s; s++)
		if ((*s < '0' || *s > '9') && *s != '.')
			return false;
	return true;
}

/* Quote a scalar for a message: short, and only printable ASCII. */
static void yquote(const char *s, char *buf, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; s[i] && o + 5 < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (i >= 40) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		buf[o++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	buf[o] = '\0';
}

const char *ynode_describe(const struct ynode *n, char *buf, size_t len)
{
	char q[48];

	if (n->type == YN_MAP)
		snprintf(buf, len, "a mapping");
	else if (n->type == YN_SEQ)
		snprintf(buf, len, "a list");
	else if (ynode_is_null(n))
		snprintf(buf, len, "nothing (null)");
	else {
		yquote(n->str, q, sizeof(q));
		if (yplain_bool(n))
			snprintf(buf, len, "a boolean (%s)", q);
		else if (yplain_number(n))
			snprintf(buf, len, "a number (%s)", q);
		else
			snprintf(buf, len, "a string ('%s')", q);
	}
	return buf;
}
