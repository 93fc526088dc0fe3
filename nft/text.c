/* Canonical text of nftables objects: what the engine built, or what a
 * dump of the live kernel returns, rendered the same way so the two can be
 * compared byte for byte (handles, ids, counter values left out). */
#include "nft/nft_int.h"

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

static const char *family_name(uint32_t f)
{
	static const struct pc_name names[] = {{NFPROTO_INET, "inet"}, {NFPROTO_BRIDGE, "bridge"},
					       {NFPROTO_IPV4, "ip"},   {NFPROTO_IPV6, "ip6"},
					       {NFPROTO_ARP, "arp"},   {NFPROTO_NETDEV, "netdev"}};

	return PC_NAME_OF(names, f, "?");
}

int nft_table_text(const struct nftnl_table *t, struct pc_buf *b)
{
	pc_buf_printf(b, "table %s %s\n", family_name(nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY)),
		      nftnl_table_get_str(t, NFTNL_TABLE_NAME));
	return b->err;
}

int nft_chain_text(const struct nftnl_chain *c, struct pc_buf *b)
{
	pc_buf_printf(b, "chain %s %s %s", family_name(nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY)),
		      nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE),
		      nftnl_chain_get_str(c, NFTNL_CHAIN_NAME));
	if (nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM))
		pc_buf_printf(b, " type %s hook %u prio %d policy %s",
			      nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE),
			      nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM),
			      nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO),
			      nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY) == NF_ACCEPT ? "accept"
										      : "drop");
	pc_buf_printf(b, "\n");
	return b->err;
}

struct elem_line {
	uint8_t key[64], kend[64];
	uint32_t klen, kelen, flags;
};

static int elem_cmp(const void *a, const void *b)
{
	const struct elem_line *x = a, *y = b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, n);

	if (c)
		return c;
	if (x->klen != y->klen)
		return x->klen < y->klen ? -1 : 1;
	c = memcmp(x->kend, y->kend, sizeof(x->kend));
	if (c)
		return c;
	return x->flags < y->flags ? -1 : x->flags > y->flags;
}

int nft_set_text(const struct nftnl_set *s, struct pc_buf *b)
{
	struct nftnl_set_elems_iter *it;
	struct nftnl_set_elem *e;
	struct elem_line *el = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	pc_buf_printf(b, "set %s %s %s flags 0x%x keytype %u keylen %u\n",
		      family_name(nftnl_set_get_u32(s, NFTNL_SET_FAMILY)),
		      nftnl_set_get_str(s, NFTNL_SET_TABLE), nftnl_set_get_str(s, NFTNL_SET_NAME),
		      nftnl_set_get_u32(s, NFTNL_SET_FLAGS),
		      nftnl_set_get_u32(s, NFTNL_SET_KEY_TYPE),
		      nftnl_set_get_u32(s, NFTNL_SET_KEY_LEN));
	if (b->err)
		return b->err;
	/* A dynamic set's elements are what traffic made (kernel state, like
	 * counter values): the built set has none, the live one some. */
	if (nftnl_set_get_u32(s, NFTNL_SET_FLAGS) & NFT_SET_EVAL)
		return 0;
	it = nftnl_set_elems_iter_create(s);
	if (!it)
		return PC_ENOMEM;
	/* The kernel dumps elements in its own order: sort them. */
	while ((e = nftnl_set_elems_iter_next(it))) {
		uint32_t kl = 0, kel = 0;
		const void *k = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &kl);
		const void *ke = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END)
				     ? nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &kel)
				     : NULL;

		if (n == cap) {
			struct elem_line *ne = realloc(el, (cap ? cap * 2 : 16) * sizeof(*ne));

			if (!ne) {
				rc = PC_ENOMEM;
				goto out;
			}
			el = ne;
			cap = cap ? cap * 2 : 16;
		}
		memset(&el[n], 0, sizeof(el[n]));
		el[n].klen = k && kl <= sizeof(el[n].key) ? kl : 0;
		if (el[n].klen)
			memcpy(el[n].key, k, el[n].klen);
		/* a range of a concatenation (interval|concat): its last key */
		el[n].kelen = ke && kel <= sizeof(el[n].kend) ? kel : 0;
		if (el[n].kelen)
			memcpy(el[n].kend, ke, el[n].kelen);
		if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS))
			el[n].flags = nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS);
		n++;
	}
	if (n)
		qsort(el, n, sizeof(*el), elem_cmp);
	for (size_t i = 0; i < n; i++) {
		pc_buf_printf(b, "  elem ");
		pc_buf_hex(b, el[i].key, el[i].klen);
		if (el[i].kelen) {
			pc_buf_printf(b, "-");
			pc_buf_hex(b, el[i].kend, el[i].kelen);
		}
		pc_buf_printf(b, " flags 0x%x\n", el[i].flags);
	}
	rc = b->err;
out:
	nftnl_set_elems_iter_destroy(it);
	free(el);
	return rc;
}

static void expr_text(struct nftnl_expr *e, struct pc_buf *b)
{
	const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
	char tmp[512];

	if (name && strcmp(name, "counter") == 0) {
		pc_buf_printf(b, "  [ counter ]\n"); /* values change */
		return;
	}
	if (nftnl_expr_snprintf(tmp, sizeof(tmp), e, NFTNL_OUTPUT_DEFAULT, 0) < 0)
		tmp[0] = '\0';
	pc_buf_printf(b, "  [ %s %s", name ? name : "?", tmp);
	if (name && (strcmp(name, "target") == 0 || strcmp(name, "match") == 0)) {
		uint32_t il = 0;
		const void *info = nftnl_expr_get(
		    e, strcmp(name, "target") == 0 ? NFTNL_EXPR_TG_INFO : NFTNL_EXPR_MT_INFO, &il);

		pc_buf_printf(b, " info ");
		if (info)
			pc_buf_hex(b, info, il);
	}
	pc_buf_printf(b, "]\n");
}

int nft_rule_text(const struct nftnl_rule *r, struct pc_buf *b)
{
	struct nftnl_expr_iter *it;
	struct nftnl_expr *e;

	pc_buf_printf(b, "rule %s %s %s\n", family_name(nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY)),
		      nftnl_rule_get_str(r, NFTNL_RULE_TABLE),
		      nftnl_rule_get_str(r, NFTNL_RULE_CHAIN));
	if (b->err)
		return b->err;
	it = nftnl_expr_iter_create(r);
	if (!it)
		return PC_ENOMEM;
	while (!b->err && (e = nftnl_expr_iter_next(it)))
		expr_text(e, b);
	nftnl_expr_iter_destroy(it);
	return b->err;
}

int nft_ruleset_text(const struct nft_ruleset *rs, char **out, size_t *outlen)
{
	struct pc_buf b = {0};
	char *text;
	size_t len;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < nft_ruleset_count(rs); i++) {
		const struct nft_obj *o = nft_ruleset_at(rs, i);

		switch (o->kind) {
		case NFT_TABLE_OBJ:
			rc = nft_table_text(o->u.table, &b);
			break;
		case NFT_CHAIN_OBJ:
			rc = nft_chain_text(o->u.chain, &b);
			break;
		case NFT_SET_OBJ:
			rc = nft_set_text(o->u.set, &b);
			break;
		case NFT_RULE_OBJ:
			rc = nft_rule_text(o->u.rule, &b);
			break;
		}
	}
	if (rc) {
		pc_buf_free(&b);
		return rc;
	}
	text = pc_buf_take(&b, &len);
	if (!text)
		return PC_ENOMEM;
	*out = text;
	if (outlen)
		*outlen = len;
	return 0;
}

int nft_ruleset_digest(const struct nft_ruleset *rs, char *out, size_t outlen)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (outlen < 72)
		return PC_EINVAL;
	rc = nft_ruleset_text(rs, &text, &len);
	if (rc)
		return rc;
	if (EVP_Digest(text, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
		free(text);
		return PC_ENOMEM;
	}
	free(text);
	memcpy(out, "sha256:", 7);
	for (unsigned i = 0; i < mdlen; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
	return 0;
}
