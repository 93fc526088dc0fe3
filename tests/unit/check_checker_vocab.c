/* Unit tests of the checker's vocabulary (checker/vocab.c), the closed
 * world's dictionary: every expression the libnftnl this checker runs with
 * knows is classified, found by asking libnftnl itself about every name its
 * shared object holds (so a newer libnftnl with a new expression fails here
 * before a rule using it could be misread); every xt target and match the
 * kernel here offers is classified; a name not in it is not found; and a
 * load writes the register width the vocabulary gives, for the path walk
 * and pass-restricted alike. */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnftnl/expr.h>
#include <linux/netfilter/nf_tables.h>

#include "checker/checker_int.h"
#include "unit.h"

/* Every NUL-terminated run of [a-z0-9_] in the file, and every suffix of
 * it (the linker merges a string into the tail of a longer one: "ct" lives
 * at the end of another string), that libnftnl allocates as an expression:
 * f(name) for each; returns how many. */
static int each_libnftnl_expr(const char *path, void (*f)(const char *name))
{
	FILE *fp = fopen(path, "rb");
	char run[64];
	size_t n = 0;
	int c, found = 0;

	ck_assert_msg(fp, "cannot read %s", path);
	while ((c = fgetc(fp)) != EOF) {
		if (islower(c) || isdigit(c) || c == '_') {
			if (n < sizeof(run) - 1)
				run[n++] = (char)c;
			else
				n = sizeof(run); /* too long: no name */
			continue;
		}
		if (c == 0 && n >= 2 && n < sizeof(run)) {
			run[n] = 0;
			for (size_t s = 0; s + 2 <= n; s++) {
				struct nftnl_expr *x = nftnl_expr_alloc(run + s);

				if (!x)
					continue;
				nftnl_expr_free(x);
				f(run + s);
				found++;
			}
		}
		n = 0;
	}
	fclose(fp);
	return found;
}

static int n_cmp;

static void classified(const char *name)
{
	const struct ck_vocab *v = ck_vocab_find(CK_V_EXPR, name);

	ck_assert_msg(v, "libnftnl knows expression '%s', the vocabulary does not", name);
	ck_assert_msg(v->schema, "expression '%s' has no schema: the screen cannot admit it", name);
	ck_assert_msg(v->model >= CK_VM_OWN && v->model <= CK_VM_NONE, "'%s' has no model", name);
	if (strcmp(name, "cmp") == 0)
		n_cmp++;
}

START_TEST(every_libnftnl_expression_is_classified)
{
	Dl_info di;
	int n;

	/* the object nftnl_expr_alloc comes from: the shared library, or this
	 * program when it is linked in statically */
	ck_assert(dladdr((void *)nftnl_expr_alloc, &di) && di.dli_fname);
	n = each_libnftnl_expr(di.dli_fname, classified);
	/* the enumeration itself works: libnftnl 1.2.4 has 39 expressions */
	ck_assert_msg(n >= 30, "only %d expressions found in %s", n, di.dli_fname);
	ck_assert_int_ge(n_cmp, 1);
}
END_TEST

/* Every name of a /proc list (one per line, repeated per family and
 * revision) is in the vocabulary as kind; a list this kernel lacks is
 * skipped. */
static void proc_names_classified(const char *path, enum ck_vkind kind)
{
	FILE *fp = fopen(path, "r");
	char line[64];

	if (!fp)
		return;
	while (fgets(line, sizeof(line), fp)) {
		line[strcspn(line, "\n")] = 0;
		if (line[0])
			ck_assert_msg(
			    ck_vocab_find(kind, line),
			    "the kernel offers xt %s '%s' (%s), the vocabulary does not know it",
			    kind == CK_V_TARGET ? "target" : "match", line, path);
	}
	fclose(fp);
}

START_TEST(every_kernel_xt_target_and_match_is_classified)
{
	proc_names_classified("/proc/net/ip_tables_targets", CK_V_TARGET);
	proc_names_classified("/proc/net/ip6_tables_targets", CK_V_TARGET);
	proc_names_classified("/proc/net/arp_tables_targets", CK_V_TARGET);
	proc_names_classified("/proc/net/ip_tables_matches", CK_V_MATCH);
	proc_names_classified("/proc/net/ip6_tables_matches", CK_V_MATCH);
	proc_names_classified("/proc/net/arp_tables_matches", CK_V_MATCH);
}
END_TEST

START_TEST(table_is_sorted_and_whole)
{
	size_t n;
	const struct ck_vocab *t = ck_vocab_table(&n);

	ck_assert_int_gt(n, 100);
	for (size_t i = 0; i < n; i++) {
		/* found by its own name: the bsearch needs each table sorted */
		ck_assert_msg(ck_vocab_find(t[i].kind, t[i].name) != NULL, "'%s' not found",
			      t[i].name);
		ck_assert_msg(t[i].model >= CK_VM_OWN && t[i].model <= CK_VM_NONE, "'%s'",
			      t[i].name);
		/* a load the walks do not track must say how wide it writes */
		if (t[i].model == CK_VM_PURE && t[i].dreg)
			ck_assert_msg(t[i].dlen || t[i].dbytes, "'%s' writes no width", t[i].name);
		if (t[i].kind == CK_V_MATCH)
			ck_assert_msg(t[i].cond && !(t[i].writes & (CK_F_MARK | CK_F_CTMARK)),
				      "match '%s'", t[i].name);
	}
	/* the mark writers are known as such */
	ck_assert(ck_vocab_find(CK_V_TARGET, "HMARK")->writes & CK_F_MARK);
	ck_assert(ck_vocab_find(CK_V_TARGET, "CONNMARK")->writes & CK_F_CTMARK);
	ck_assert(ck_vocab_find(CK_V_TARGET, "mark")->writes & CK_F_MARK);
	ck_assert(ck_vocab_find(CK_V_EXPR, "meta")->writes & CK_F_MARK);
	ck_assert(ck_vocab_find(CK_V_EXPR, "ct")->writes & CK_F_CTMARK);
}
END_TEST

START_TEST(unknown_names_are_not_found)
{
	ck_assert_ptr_null(ck_vocab_find(CK_V_EXPR, "inner"));
	ck_assert_ptr_null(ck_vocab_find(CK_V_EXPR, "MARK"));
	ck_assert_ptr_null(ck_vocab_find(CK_V_TARGET, "FOOMARK"));
	ck_assert_ptr_null(ck_vocab_find(CK_V_TARGET, "meta"));
	ck_assert_ptr_null(ck_vocab_find(CK_V_MATCH, "HMARK"));
	ck_assert_ptr_null(ck_vocab_find(CK_V_EXPR, ""));
	ck_assert_ptr_null(ck_vocab_find(CK_V_EXPR, NULL));
}
END_TEST

/* A load writes its destination register, as wide as it says (payload,
 * byteorder) or as the vocabulary knows (hash: 4 bytes), and nothing else:
 * both walks clear exactly that (pass.c cleared every register). */
START_TEST(a_load_writes_its_destination_only)
{
	struct nftnl_expr *h = nftnl_expr_alloc("hash"), *p = nftnl_expr_alloc("payload");
	struct nftnl_expr *c = nftnl_expr_alloc("counter");
	uint32_t reg = 0, len = 0;

	nftnl_expr_set_u32(h, NFTNL_EXPR_HASH_DREG, NFT_REG32_03);
	ck_assert(ck_vocab_dreg(ck_vocab_find(CK_V_EXPR, "hash"), h, &reg, &len));
	ck_assert_int_eq(reg, NFT_REG32_03);
	ck_assert_int_eq(len, 4);
	nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_2);
	nftnl_expr_set_u32(p, NFTNL_EXPR_PAYLOAD_LEN, 2);
	ck_assert(ck_vocab_dreg(ck_vocab_find(CK_V_EXPR, "payload"), p, &reg, &len));
	ck_assert_int_eq(reg, NFT_REG_2);
	ck_assert_int_eq(len, 2);
	ck_assert(!ck_vocab_dreg(ck_vocab_find(CK_V_EXPR, "counter"), c, &reg, &len));
	nftnl_expr_free(h);
	nftnl_expr_free(p);
	nftnl_expr_free(c);
}
END_TEST

PC_UNIT_SUITE("checker_vocab", "vocabulary", 0, every_libnftnl_expression_is_classified,
	      every_kernel_xt_target_and_match_is_classified, table_is_sorted_and_whole,
	      unknown_names_are_not_found, a_load_writes_its_destination_only)
