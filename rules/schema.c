/* Error collection and the schema helpers both loaders use: errors located
 * at a YAML node, type errors, unknown keys with a did-you-mean, and strict
 * scalar conversions. */
#include "rules/rules_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void diag_init(struct diag *d, struct pc_err *err, pc_err_report_fn report, void *arg)
{
	*d = (struct diag){.err = err, .report = report, .arg = arg};
}

int diag_add(struct diag *d, const struct pc_err *e)
{
	if (d->gave_up)
		return e->code;
	if (d->count == 0) {
		d->first_code = e->code;
		if (d->err)
			*d->err = *e;
	}
	d->count++;
	if (d->report)
		d->report(e, d->arg);
	if (d->count >= DIAG_MAX) {
		struct pc_err more;

		d->gave_up = true;
		pc_err_set(&more, PC_EPARSE, "too many errors (%u); stopping here", DIAG_MAX);
		if (d->report)
			d->report(&more, d->arg);
	}
	return e->code;
}

int diag_vat(struct diag *d, int code, const char *file, unsigned line, unsigned col,
	     const char *fmt, va_list ap)
{
	struct pc_err e = {0};

	e.code = code;
	pc_strlcpy(e.file, file ? file : "", sizeof(e.file));
	e.line = line;
	e.col = line ? col : 0;
	vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
	return diag_add(d, &e);
}

int diag_at(struct diag *d, int code, const char *file, unsigned line, unsigned col,
	    const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = diag_vat(d, code, file, line, col, fmt, ap);
	va_end(ap);
	return rc;
}

int diag_code(const struct diag *d)
{
	if (!d->count)
		return 0;
	if (d->first_code && d->first_code != PC_EINVAL)
		return d->first_code;
	return PC_EPARSE;
}

int yerr(struct yctx *c, const struct ynode *n, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = diag_vat(c->d, PC_EPARSE, c->file, n ? n->line : 0, n ? n->col : 0, fmt, ap);
	va_end(ap);
	return rc;
}

int yerr_type(struct yctx *c, const struct ynode *n, const char *what, const char *expected)
{
	char desc[96];

	return yerr(c, n, "%s: expected %s, found %s", what, expected,
		    ynode_describe(n, desc, sizeof(desc)));
}

/* Optimal string alignment distance (edits and adjacent swaps), case
 * blind: "prots" -> "ports" is one swap. Words longer than 32 are never
 * close to a key. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), d[33][33];

	if (la > 32 || lb > 32)
		return 99;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = (a[i - 1] | 0x20) == (b[j - 1] | 0x20) ? 0 : 1;
			size_t v = d[i - 1][j] + 1;

			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && (a[i - 1] | 0x20) == (b[j - 2] | 0x20) &&
			    (a[i - 2] | 0x20) == (b[j - 1] | 0x20) && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

const char *rules_suggest(const char *word, const char *const *cands, size_t n)
{
	size_t best = 99, wl = strlen(word);
	const char *pick = NULL;
	/* Close means: at most 2 edits, and fewer than a third of the word for
	 * short ones, so "ip" does not become "mac". */
	size_t limit = wl <= 3 ? 1 : wl <= 5 ? 2 : 3;

	for (size_t i = 0; i < n; i++) {
		size_t dist = edit_distance(word, cands[i]);

		if (dist < best) {
			best = dist;
			pick = cands[i];
		}
	}
	return best <= limit && best < wl ? pick : NULL;
}

void yerr_unknown_key(struct yctx *c, const struct ynode *key, const char *const *known,
		      size_t n_known, const char *where)
{
	char list[256], q[48];
	const char *s = rules_suggest(key->str, known, n_known);
	size_t o = 0;

	list[0] = '\0';
	for (size_t i = 0; i < n_known && o < sizeof(list); i++) {
		int w = snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "", known[i]);

		if (w < 0)
			break;
		o += (size_t)w;
	}
	pc_strlcpy(q, key->str, sizeof(q));
	if (s)
		yerr(c, key, "unknown key '%s' in %s (did you mean '%s'?); expected one of: %s", q,
		     where, s, list);
	else
		yerr(c, key, "unknown key '%s' in %s; expected one of: %s", q, where, list);
}

size_t ymap_check_keys(struct yctx *c, const struct ynode *m, const char *const *known,
		       const char *where)
{
	size_t n_known = 0, bad = 0;

	while (known[n_known])
		n_known++;
	for (size_t i = 0; i < m->n; i++) {
		const struct ynode *k = ymap_key(m, i);
		size_t j;

		for (j = 0; j < n_known; j++)
			if (strcmp(k->str, known[j]) == 0)
				break;
		if (j == n_known) {
			yerr_unknown_key(c, k, known, n_known, where);
			bad++;
		}
	}
	return bad;
}

bool rules_nondecimal(const char *s, char *why, size_t len)
{
	static const struct {
		char letter;
		int base;
		const char *name;
	} forms[] = {{'x', 16, "a hexadecimal"}, {'o', 8, "an octal"}, {'b', 2, "a binary"}};
	const char *p = s;

	if (*p == '+' || *p == '-')
		p++;
	for (size_t i = 0; p[0] == '0' && i < sizeof(forms) / sizeof(forms[0]); i++) {
		char *end;
		unsigned long long v;

		if ((p[1] | 0x20) != forms[i].letter)
			continue;
		errno = 0;
		v = strtoull(p + 2, &end, forms[i].base);
		if (end == p + 2 || *end || errno)
			snprintf(why, len, "'%.32s' is not a decimal number", s);
		else
			snprintf(why, len, "'%.32s' is %s number (%llu in decimal)", s,
				 forms[i].name, v);
		return true;
	}
	return false;
}

int yget_uint(struct yctx *c, const struct ynode *n, const char *what, uint64_t min, uint64_t max,
	      uint64_t *out)
{
	char expected[96], desc[96];
	uint64_t v = 0;
	const char *s;

	snprintf(expected, sizeof(expected), "a whole number from %llu to %llu",
		 (unsigned long long)min, (unsigned long long)max);
	if (n->type != YN_SCALAR || ynode_is_null(n))
		return yerr_type(c, n, what, expected);
	if (n->quoted)
		return yerr(c, n, "%s: expected %s, found %s; write numbers without quotes", what,
			    expected, ynode_describe(n, desc, sizeof(desc)));
	s = n->str;
	if (!*s)
		return yerr_type(c, n, what, expected);
	if (rules_nondecimal(s, desc, sizeof(desc)))
		return yerr(c, n, "%s: %s; expected %s, written in decimal", what, desc, expected);
	if (s[0] == '0' && s[1])
		return yerr(c, n, "%s: expected %s, found '%.32s' (leading zeros are ambiguous)",
			    what, expected, s);
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return yerr_type(c, n, what, expected);
		if (v > (UINT64_MAX - 9) / 10) {
			v = UINT64_MAX;
			break;
		}
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v < min || v > max)
		return yerr(c, n, "%s: expected %s, found %.32s", what, expected, n->str);
	*out = v;
	return 0;
}

int yget_bool(struct yctx *c, const struct ynode *n, const char *what, bool *out)
{
	static const char *const t[] = {"true", "True", "TRUE"}, *const f[] = {"false", "False",
									       "FALSE"};

	for (size_t i = 0; n->type == YN_SCALAR && !n->quoted && i < 3; i++) {
		if (strcmp(n->str, t[i]) == 0 || strcmp(n->str, f[i]) == 0) {
			*out = strcmp(n->str, t[i]) == 0;
			return 0;
		}
	}
	return yerr_type(c, n, what, "true or false");
}

int yget_str(struct yctx *c, const struct ynode *n, const char *what, const char **out)
{
	if (n->type != YN_SCALAR || ynode_is_null(n))
		return yerr_type(c, n, what, "a string");
	*out = n->str;
	return 0;
}
