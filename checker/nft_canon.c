/* checker: the canonical text form of nftables tables — what "our table is
 * identical to what the engine installed" compares and what the
 * certificate's ruleset subject digests. Kernel-owned values (handles,
 * counters, quota consumption, anonymous set numbers) are left out so that
 * the same ruleset always has the same form. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>

#include "checker/checker_int.h"

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void canon_elems(const struct ck_set *s, struct pc_buf *out)
{
	char **lines = calloc(s->n_elems ? s->n_elems : 1, sizeof(char *));

	if (!lines) {
		out->err = PC_ENOMEM;
		return;
	}
	for (size_t i = 0; i < s->n_elems; i++) {
		const struct ck_elem *e = &s->elems[i];
		struct pc_buf l = {0};

		pc_buf_hex(&l, e->key, e->klen);
		if (e->kelen) {
			pc_buf_put(&l, "-", 1);
			pc_buf_hex(&l, e->kend, e->kelen);
		}
		if (e->flags)
			pc_buf_printf(&l, " flags %u", e->flags);
		if (e->has_verdict)
			pc_buf_printf(&l, " : verdict %d%s%s", e->verdict, e->chain[0] ? " " : "",
				      e->chain);
		if (e->dlen) {
			pc_buf_put(&l, " : ", 3);
			pc_buf_hex(&l, e->data, e->dlen);
		}
		lines[i] = pc_buf_take(&l, NULL);
		if (!lines[i])
			out->err = PC_ENOMEM;
	}
	qsort(lines, s->n_elems, sizeof(char *), str_cmp);
	pc_buf_printf(out, "{");
	for (size_t i = 0; i < s->n_elems; i++) {
		pc_buf_printf(out, "%s%s", i ? ", " : " ", lines[i] ? lines[i] : "");
		free(lines[i]);
	}
	pc_buf_printf(out, " }%s", s->elems_read ? "" : " (unreadable)");
	free(lines);
}

static void canon_set_head(const struct ck_set *s, struct pc_buf *out)
{
	pc_buf_printf(out, "flags %u key %u/%u data %u/%u obj %u ",
		      s->flags & ~(uint32_t)NFT_SET_ANONYMOUS, s->key_type, s->key_len,
		      s->data_type, s->data_len, s->obj_type);
	canon_elems(s, out);
}

static void canon_expr(const struct ck_ruleset *rs, const struct ck_chain *c, struct nftnl_expr *x,
		       struct pc_buf *out)
{
	const char *n = nftnl_expr_get_str(x, NFTNL_EXPR_NAME);
	char buf[1024];

	if (!n)
		n = "?";
	if (strcmp(n, "counter") == 0 || strcmp(n, "last") == 0) {
		pc_buf_printf(out, " [%s]", n); /* values are kernel state */
		return;
	}
	if (strcmp(n, "quota") == 0) {
		pc_buf_printf(out, " [quota %llu flags %u]",
			      (unsigned long long)nftnl_expr_get_u64(x, NFTNL_EXPR_QUOTA_BYTES),
			      nftnl_expr_get_u32(x, NFTNL_EXPR_QUOTA_FLAGS));
		return;
	}
	if (strcmp(n, "lookup") == 0 || strcmp(n, "dynset") == 0) {
		const char *sn =
		    nftnl_expr_get_str(x, strcmp(n, "lookup") == 0 ? NFTNL_EXPR_LOOKUP_SET
								   : NFTNL_EXPR_DYNSET_SET_NAME);
		const struct ck_set *s = sn ? ck_set_find(rs, c->family, c->table, sn) : NULL;

		if (strcmp(n, "lookup") == 0)
			pc_buf_printf(out, " [lookup sreg %u dreg %u flags %u ",
				      nftnl_expr_get_u32(x, NFTNL_EXPR_LOOKUP_SREG),
				      nftnl_expr_is_set(x, NFTNL_EXPR_LOOKUP_DREG)
					  ? nftnl_expr_get_u32(x, NFTNL_EXPR_LOOKUP_DREG)
					  : 999u,
				      nftnl_expr_get_u32(x, NFTNL_EXPR_LOOKUP_FLAGS));
		else
			pc_buf_printf(
			    out, " [dynset op %u sreg %u timeout %llu ",
			    nftnl_expr_get_u32(x, NFTNL_EXPR_DYNSET_OP),
			    nftnl_expr_get_u32(x, NFTNL_EXPR_DYNSET_SREG_KEY),
			    (unsigned long long)nftnl_expr_get_u64(x, NFTNL_EXPR_DYNSET_TIMEOUT));
		if (s && (s->flags & NFT_SET_ANONYMOUS)) {
			pc_buf_printf(out, "anonymous ");
			canon_set_head(s, out);
		} else {
			pc_buf_printf(out, "set %s", sn ? sn : "?");
		}
		pc_buf_printf(out, "]");
		return;
	}
	buf[0] = 0;
	nftnl_expr_snprintf(buf, sizeof(buf), x, NFTNL_OUTPUT_DEFAULT, 0);
	pc_buf_printf(out, " [%s %s]", n, buf);
}

static void canon_chain(const struct ck_ruleset *rs, const struct ck_chain *c, struct pc_buf *out)
{
	pc_buf_printf(out, "  chain %s", c->name);
	if (c->base) {
		pc_buf_printf(out, " { type %s hook %s priority %d policy %s",
			      c->type[0] ? c->type : "filter", ck_hook_name(c->family, c->hook),
			      c->prio, c->policy == NF_DROP ? "drop" : "accept");
		for (size_t i = 0; i < c->n_devs; i++)
			pc_buf_printf(out, " device %s", c->devs[i]);
		pc_buf_printf(out, " flags %u }", c->flags);
	}
	pc_buf_printf(out, "\n");
	for (size_t i = 0; i < c->n_rules; i++) {
		struct nftnl_expr_iter *it = nftnl_expr_iter_create(c->rules[i].r);
		struct nftnl_expr *x;

		if (!it) {
			out->err = PC_ENOMEM;
			return;
		}
		pc_buf_printf(out, "    rule");
		while ((x = nftnl_expr_iter_next(it)))
			canon_expr(rs, c, x, out);
		pc_buf_printf(out, "\n");
		nftnl_expr_iter_destroy(it);
	}
}

static int ptr_chain_cmp(const void *a, const void *b)
{
	const struct ck_chain *x = *(const struct ck_chain *const *)a;
	const struct ck_chain *y = *(const struct ck_chain *const *)b;

	return strcmp(x->name, y->name);
}

static void canon_table(const struct ck_ruleset *rs, const struct ck_table *t, struct pc_buf *out)
{
	const struct ck_chain **cv = calloc(rs->n_chains ? rs->n_chains : 1, sizeof(*cv));
	size_t n = 0;

	if (!cv) {
		out->err = PC_ENOMEM;
		return;
	}
	pc_buf_printf(out, "table %s %s flags %u\n", ck_family_name(t->family), t->name, t->flags);
	for (size_t i = 0; i < rs->n_chains; i++)
		if (rs->chains[i].family == t->family && strcmp(rs->chains[i].table, t->name) == 0)
			cv[n++] = &rs->chains[i];
	qsort(cv, n, sizeof(*cv), ptr_chain_cmp);
	for (size_t i = 0; i < n; i++)
		canon_chain(rs, cv[i], out);
	for (size_t i = 0; i < rs->n_sets; i++) {
		const struct ck_set *s = &rs->sets[i];

		if (s->family != t->family || strcmp(s->table, t->name) != 0 ||
		    (s->flags & NFT_SET_ANONYMOUS))
			continue;
		pc_buf_printf(out, "  set %s ", s->name);
		canon_set_head(s, out);
		pc_buf_printf(out, "\n");
	}
	for (size_t i = 0; i < rs->n_objs; i++) {
		const struct ck_obj *o = &rs->objs[i];

		if (o->family == t->family && strcmp(o->table, t->name) == 0)
			pc_buf_printf(out, "  object %s type %u\n", o->name, o->type);
	}
	free(cv);
}

static int ptr_table_cmp(const void *a, const void *b)
{
	const struct ck_table *x = *(const struct ck_table *const *)a;
	const struct ck_table *y = *(const struct ck_table *const *)b;

	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	return strcmp(x->name, y->name);
}

void ck_nft_canon(const struct ck_ruleset *rs, uint32_t family, const char *table,
		  struct pc_buf *out)
{
	const struct ck_table **tv = calloc(rs->n_tables ? rs->n_tables : 1, sizeof(*tv));
	size_t n = 0;

	if (!tv) {
		out->err = PC_ENOMEM;
		return;
	}
	for (size_t i = 0; i < rs->n_tables; i++) {
		if (table && (rs->tables[i].family != family || strcmp(rs->tables[i].name, table)))
			continue;
		tv[n++] = &rs->tables[i];
	}
	qsort(tv, n, sizeof(*tv), ptr_table_cmp);
	for (size_t i = 0; i < n; i++)
		canon_table(rs, tv[i], out);
	free(tv);
}
