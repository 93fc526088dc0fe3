/* The checks that need more than one entry at a time: duplicate sandbox
 * and secret names, overlapping selectors (two sandboxes that could claim
 * one packet), and secrets bound to a host the sandbox may not reach. Each
 * runs in O(n log n) so a large policy cannot make it crawl. */
#include "rules/rules_int.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool loc_before(const struct loc *a, const struct loc *b)
{
	int c = strcmp(a->file, b->file);

	if (c)
		return c < 0;
	return a->line < b->line || (a->line == b->line && a->col < b->col);
}

static int loc_err(struct pbuild *b, const struct loc *l, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int loc_err(struct pbuild *b, const struct loc *l, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = diag_vat(b->d, PC_EPARSE, l->file, l->line, l->col, fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- sandbox names -------------------------------------------------------- */

struct nameref {
	const char *name;
	size_t i;
};

static int nameref_cmp(const void *x, const void *y)
{
	const struct nameref *a = x, *b = y;
	int c = strcasecmp(a->name, b->name);

	return c ? c : (a->i > b->i) - (a->i < b->i);
}

/* Names are compared ignoring case: "Agent-1" and "agent-1" in one log
 * would be one sandbox to a reader. */
static void check_names(struct pbuild *b, const size_t *idx, size_t n)
{
	struct nameref *r = calloc(n ? n : 1, sizeof(*r));

	if (!r) {
		diag_at(b->d, PC_ENOMEM, "", 0, 0, "out of memory");
		return;
	}
	for (size_t k = 0; k < n; k++)
		r[k] = (struct nameref){b->v[idx[k]].sb.name, idx[k]};
	qsort(r, n, sizeof(*r), nameref_cmp);
	for (size_t k = 1, f = 0; k < n; k++) {
		const struct sbb *first, *s = &b->v[r[k].i];

		if (strcasecmp(r[f].name, r[k].name)) {
			f = k;
			continue;
		}
		/* The first of a run of equal names is the one loaded first. */
		first = &b->v[r[f].i];
		if (strcmp(first->sb.name, s->sb.name) == 0)
			loc_err(b, &s->name,
				"duplicate sandbox name '%s' (first at %s:%u:%u); expected each "
				"sandbox once across all rule files",
				s->sb.name, first->name.file, first->name.line, first->name.col);
		else
			loc_err(b, &s->name,
				"duplicate sandbox name '%s' ('%s' at %s:%u:%u; names are compared "
				"ignoring case); expected each sandbox once across all rule files",
				s->sb.name, first->sb.name, first->name.file, first->name.line,
				first->name.col);
	}
	free(r);
}

/* ---- sources ------------------------------------------------------------ */

struct srcref {
	struct pc_prefix pfx;
	size_t sb, i; /* sandbox, source index */
};

static int srcref_cmp(const void *x, const void *y)
{
	const struct srcref *a = x, *b = y;
	int c;

	if (a->pfx.addr.family != b->pfx.addr.family)
		return a->pfx.addr.family < b->pfx.addr.family ? -1 : 1;
	c = memcmp(a->pfx.addr.a, b->pfx.addr.a, 16);
	if (c)
		return c;
	if (a->pfx.len != b->pfx.len)
		return a->pfx.len < b->pfx.len ? -1 : 1;
	if (a->sb != b->sb)
		return a->sb < b->sb ? -1 : 1;
	return (a->i > b->i) - (a->i < b->i);
}

static const char *pfx_str(const struct pc_prefix *p, char *buf, size_t len)
{
	char a[PC_ADDRSTRLEN];

	snprintf(buf, len, "%s/%u", pc_addr_str(&p->addr, a, sizeof(a)), p->len);
	return buf;
}

/* Sorted by address then length, a prefix that overlaps an earlier one is
 * inside it: prefixes nest or are disjoint. */
static void check_sources_within(struct pbuild *b, struct sbb *s, size_t si)
{
	size_t n = s->sb.match.n_sources;
	struct srcref *r;
	size_t cover = 0;

	if (n < 2)
		return;
	r = calloc(n, sizeof(*r));
	if (!r) {
		diag_at(b->d, PC_ENOMEM, s->name.file, 0, 0, "out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++)
		r[i] = (struct srcref){s->sb.match.sources[i], si, i};
	qsort(r, n, sizeof(*r), srcref_cmp);
	for (size_t k = 1; k < n; k++) {
		const struct loc *lc = &s->src[r[cover].i], *lk = &s->src[r[k].i], *at, *other;
		char p1[64], p2[64];

		if (!pc_prefix_overlap(&r[cover].pfx, &r[k].pfx)) {
			cover = k;
			continue;
		}
		at = loc_before(lc, lk) ? lk : lc;
		other = at == lk ? lc : lk;
		loc_err(b, at,
			"match.source: %s overlaps %s (line %u column %u) of the same sandbox; "
			"expected each address once",
			pfx_str(at == lk ? &r[k].pfx : &r[cover].pfx, p1, sizeof(p1)),
			pfx_str(at == lk ? &r[cover].pfx : &r[k].pfx, p2, sizeof(p2)), other->line,
			other->col);
		s->bad = true;
	}
	free(r);
}

/* ---- selector overlaps ------------------------------------------------------- */

static bool macport_compatible(const struct policy_match *a, const struct policy_match *b)
{
	if (a->has_mac && b->has_mac && memcmp(a->mac, b->mac, 6) != 0)
		return false;
	if (a->port[0] && b->port[0] && strcmp(a->port, b->port) != 0)
		return false;
	return true;
}

/* Report that sandboxes i < j (load order) can both claim a packet from
 * pfx (NULL: any address). */
static void overlap_report(struct pbuild *b, size_t i, size_t j, const struct pc_prefix *pfx,
			   bool *reported)
{
	const struct policy_match *mi = &b->v[i].sb.match, *mj = &b->v[j].sb.match;
	const struct policy_match *mm = mi->has_mac ? mi : mj, *mp = mi->port[0] ? mi : mj;
	char what[160], p[64], mac[24] = "";
	size_t o;

	if (reported[j])
		return;
	reported[j] = true;
	o = (size_t)snprintf(what, sizeof(what), "source %s",
			     pfx ? pfx_str(pfx, p, sizeof(p)) : "any address");
	if (mm->has_mac) {
		snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", mm->mac[0], mm->mac[1],
			 mm->mac[2], mm->mac[3], mm->mac[4], mm->mac[5]);
		o += (size_t)snprintf(what + o, sizeof(what) - o, ", mac %s", mac);
	}
	if (mp->port[0] && o < sizeof(what))
		snprintf(what + o, sizeof(what) - o, ", port %s", mp->port);
	loc_err(b, &b->v[j].match,
		"sandbox '%s' can claim the same packets as sandbox '%s' (%s:%u:%u): %s; expected "
		"selectors that no packet satisfies twice (make source, mac or port disjoint)",
		b->v[j].sb.name, b->v[i].sb.name, b->v[i].match.file, b->v[i].match.line,
		b->v[i].match.col, what);
}

static void check_overlaps(struct pbuild *b, const size_t *idx, size_t n)
{
	struct srcref *r = NULL, **stack = NULL;
	bool *reported = calloc(b->n ? b->n : 1, sizeof(*reported));
	size_t nr = 0, top = 0;

	for (size_t k = 0; k < n; k++)
		nr += b->v[idx[k]].sb.match.n_sources;
	r = calloc(nr ? nr : 1, sizeof(*r));
	stack = calloc(nr ? nr : 1, sizeof(*stack));
	if (!reported || !r || !stack) {
		diag_at(b->d, PC_ENOMEM, "", 0, 0, "out of memory");
		goto out;
	}
	nr = 0;
	for (size_t k = 0; k < n; k++) {
		const struct policy_match *m = &b->v[idx[k]].sb.match;

		for (size_t i = 0; i < m->n_sources; i++)
			r[nr++] = (struct srcref){m->sources[i], idx[k], i};
	}
	qsort(r, nr, sizeof(*r), srcref_cmp);
	/* The stack holds the chain of prefixes containing the current one. */
	for (size_t k = 0; k < nr; k++) {
		while (top && !pc_prefix_overlap(&stack[top - 1]->pfx, &r[k].pfx))
			top--;
		for (size_t t = 0; t < top; t++) {
			size_t i = stack[t]->sb, j = r[k].sb;

			if (i != j && macport_compatible(&b->v[i].sb.match, &b->v[j].sb.match))
				overlap_report(b, i < j ? i : j, i < j ? j : i, &r[k].pfx,
					       reported);
		}
		stack[top++] = &r[k];
	}
	/* A sandbox without source matches any address: compare it with all. */
	for (size_t k = 0; k < n; k++) {
		size_t x = idx[k];

		if (b->v[x].sb.match.n_sources)
			continue;
		for (size_t l = 0; l < n; l++) {
			size_t y = idx[l];

			if (y == x || (!b->v[y].sb.match.n_sources && y > x))
				continue;
			if (macport_compatible(&b->v[x].sb.match, &b->v[y].sb.match))
				overlap_report(b, x < y ? x : y, x < y ? y : x,
					       b->v[y].sb.match.n_sources
						   ? &b->v[y].sb.match.sources[0]
						   : NULL,
					       reported);
		}
	}
out:
	free(reported);
	free(r);
	free(stack);
}

/* ---- secrets --------------------------------------------------------------- */

struct secref {
	struct policy_secret sec;
	struct loc name, host;
	size_t i;
};

static int secref_cmp(const void *x, const void *y)
{
	const struct secref *a = x, *b = y;
	int c = strcmp(a->sec.name, b->sec.name);

	return c ? c : (a->i > b->i) - (a->i < b->i);
}

/* Secrets in name order (their order has no meaning), positions along. */
static int secrets_sort(struct pbuild *b, struct sbb *s)
{
	size_t n = s->sb.n_secrets;
	struct secref *r;

	if (n < 2)
		return 0;
	r = calloc(n, sizeof(*r));
	if (!r)
		return diag_at(b->d, PC_ENOMEM, s->name.file, 0, 0, "out of memory");
	for (size_t i = 0; i < n; i++)
		r[i] = (struct secref){s->sb.secrets[i], s->sec_name[i], s->sec_host[i], i};
	qsort(r, n, sizeof(*r), secref_cmp);
	for (size_t i = 0; i < n; i++) {
		s->sb.secrets[i] = r[i].sec;
		s->sec_name[i] = r[i].name;
		s->sec_host[i] = r[i].host;
	}
	free(r);
	return 0;
}

static void check_secrets(struct pbuild *b, struct sbb *s)
{
	for (size_t i = 0; i < s->sb.n_secrets; i++) {
		const struct policy_secret *sec = &s->sb.secrets[i];

		/* Sorted by name, then by position: a duplicate follows its first. */
		if (i && strcmp(sec->name, s->sb.secrets[i - 1].name) == 0) {
			size_t f = i - 1;

			while (f && strcmp(s->sb.secrets[f - 1].name, sec->name) == 0)
				f--;
			loc_err(
			    b, &s->sec_name[i],
			    "duplicate secret name '%s' in sandbox '%s' (first at line %u column "
			    "%u); expected each secret once per sandbox",
			    sec->name, s->sb.name, s->sec_name[f].line, s->sec_name[f].col);
		}
		if (!policy_host_allows(&s->sb, sec->host, IPPROTO_TCP, sec->port, NULL))
			loc_err(
			    b, &s->sec_host[i],
			    "secret '%s' is bound to %s:%u, which sandbox '%s' may not reach; "
			    "expected a host or wildcard entry of this sandbox allowing tcp port "
			    "%u to %s",
			    sec->name, sec->host, sec->port, s->sb.name, sec->port, sec->host);
	}
}

void pbuild_check(struct pbuild *b)
{
	size_t *idx = calloc(b->n ? b->n : 1, sizeof(*idx)), n = 0;

	if (!idx) {
		diag_at(b->d, PC_ENOMEM, "", 0, 0, "out of memory");
		return;
	}
	for (size_t i = 0; i < b->n; i++)
		if (b->v[i].name_ok)
			idx[n++] = i;
	check_names(b, idx, n);
	n = 0;
	for (size_t i = 0; i < b->n; i++)
		if (!b->v[i].bad)
			idx[n++] = i;
	/* A reused sandbox passed its own checks in the policy it was first
	 * loaded in, from the same bytes; only the checks across sandboxes
	 * run again (and its arrays, shared with that policy, stay as they
	 * are). */
	for (size_t k = 0; k < n; k++)
		if (!b->v[idx[k]].reused)
			check_sources_within(b, &b->v[idx[k]], idx[k]);
	n = 0;
	for (size_t i = 0; i < b->n; i++)
		if (!b->v[i].bad)
			idx[n++] = i;
	check_overlaps(b, idx, n);
	for (size_t k = 0; k < n && !b->d->gave_up; k++) {
		struct sbb *s = &b->v[idx[k]];

		if (s->reused)
			continue;
		if (secrets_sort(b, s) || policy_sandbox_index(&s->sb, s->a) < 0) {
			diag_at(b->d, PC_ENOMEM, s->name.file, 0, 0, "out of memory");
			break;
		}
		check_secrets(b, s);
	}
	free(idx);
}
