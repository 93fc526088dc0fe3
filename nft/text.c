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

int pc_buf_appendf(char **buf, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;
	char *nb;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return PC_EINVAL;
	nb = realloc(*buf, *len + (size_t)n + 1);
	if (!nb)
		return PC_ENOMEM;
	va_start(ap, fmt);
	vsnprintf(nb + *len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	*buf = nb;
	*len += (size_t)n;
	return 0;
}

int pc_buf_append_json(char **buf, size_t *len, const char *s)
{
	int rc = pc_buf_appendf(buf, len, "\"");

	for (; rc == 0 && s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			rc = pc_buf_appendf(buf, len, "\\%c", c);
		else if (c < 0x20)
			rc = pc_buf_appendf(buf, len, "\\u%04x", c);
		else
			rc = pc_buf_appendf(buf, len, "%c", c);
	}
	return rc ? rc : pc_buf_appendf(buf, len, "\"");
}

static const char *family_name(uint32_t f)
{
	switch (f) {
	case NFPROTO_INET:
		return "inet";
	case NFPROTO_BRIDGE:
		return "bridge";
	case NFPROTO_IPV4:
		return "ip";
	case NFPROTO_IPV6:
		return "ip6";
	case NFPROTO_ARP:
		return "arp";
	case NFPROTO_NETDEV:
		return "netdev";
	default:
		return "?";
	}
}

static int hex_append(char **buf, size_t *len, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (pc_buf_appendf(buf, len, "%02x", p[i]) < 0)
			return PC_ENOMEM;
	return 0;
}

int nft_table_text(const struct nftnl_table *t, char **buf, size_t *len)
{
	return pc_buf_appendf(buf, len, "table %s %s\n",
			      family_name(nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY)),
			      nftnl_table_get_str(t, NFTNL_TABLE_NAME));
}

int nft_chain_text(const struct nftnl_chain *c, char **buf, size_t *len)
{
	int rc = pc_buf_appendf(
	    buf, len, "chain %s %s %s", family_name(nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY)),
	    nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE), nftnl_chain_get_str(c, NFTNL_CHAIN_NAME));

	if (rc == 0 && nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM))
		rc = pc_buf_appendf(
		    buf, len, " type %s hook %u prio %d policy %s",
		    nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE),
		    nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM),
		    nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO),
		    nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY) == NF_ACCEPT ? "accept" : "drop");
	return rc ? rc : pc_buf_appendf(buf, len, "\n");
}

struct elem_line {
	uint8_t key[64];
	uint32_t klen, flags;
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
	return x->flags < y->flags ? -1 : x->flags > y->flags;
}

int nft_set_text(const struct nftnl_set *s, char **buf, size_t *len)
{
	struct nftnl_set_elems_iter *it;
	struct nftnl_set_elem *e;
	struct elem_line *el = NULL;
	size_t n = 0, cap = 0;
	int rc;

	rc = pc_buf_appendf(
	    buf, len, "set %s %s %s flags 0x%x keytype %u keylen %u\n",
	    family_name(nftnl_set_get_u32(s, NFTNL_SET_FAMILY)),
	    nftnl_set_get_str(s, NFTNL_SET_TABLE), nftnl_set_get_str(s, NFTNL_SET_NAME),
	    nftnl_set_get_u32(s, NFTNL_SET_FLAGS), nftnl_set_get_u32(s, NFTNL_SET_KEY_TYPE),
	    nftnl_set_get_u32(s, NFTNL_SET_KEY_LEN));
	if (rc)
		return rc;
	/* A dynamic set's elements are what traffic made (kernel state, like
	 * counter values): the built set has none, the live one some. */
	if (nftnl_set_get_u32(s, NFTNL_SET_FLAGS) & NFT_SET_EVAL)
		return 0;
	it = nftnl_set_elems_iter_create(s);
	if (!it)
		return PC_ENOMEM;
	/* The kernel dumps elements in its own order: sort them. */
	while ((e = nftnl_set_elems_iter_next(it))) {
		uint32_t kl = 0;
		const void *k = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &kl);

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
		if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS))
			el[n].flags = nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS);
		n++;
	}
	if (n)
		qsort(el, n, sizeof(*el), elem_cmp);
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = pc_buf_appendf(buf, len, "  elem ");
		if (rc == 0)
			rc = hex_append(buf, len, el[i].key, el[i].klen);
		if (rc == 0)
			rc = pc_buf_appendf(buf, len, " flags 0x%x\n", el[i].flags);
	}
out:
	nftnl_set_elems_iter_destroy(it);
	free(el);
	return rc;
}

static int expr_text(struct nftnl_expr *e, char **buf, size_t *len)
{
	const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
	char tmp[512];
	int rc;

	if (name && strcmp(name, "counter") == 0)
		return pc_buf_appendf(buf, len, "  [ counter ]\n"); /* values change */
	if (nftnl_expr_snprintf(tmp, sizeof(tmp), e, NFTNL_OUTPUT_DEFAULT, 0) < 0)
		tmp[0] = '\0';
	rc = pc_buf_appendf(buf, len, "  [ %s %s", name ? name : "?", tmp);
	if (rc == 0 && name && (strcmp(name, "target") == 0 || strcmp(name, "match") == 0)) {
		uint32_t il = 0;
		const void *info = nftnl_expr_get(
		    e, strcmp(name, "target") == 0 ? NFTNL_EXPR_TG_INFO : NFTNL_EXPR_MT_INFO, &il);

		rc = pc_buf_appendf(buf, len, " info ");
		if (rc == 0 && info)
			rc = hex_append(buf, len, info, il);
	}
	return rc ? rc : pc_buf_appendf(buf, len, "]\n");
}

int nft_rule_text(const struct nftnl_rule *r, char **buf, size_t *len)
{
	struct nftnl_expr_iter *it;
	struct nftnl_expr *e;
	int rc;

	rc = pc_buf_appendf(
	    buf, len, "rule %s %s %s\n", family_name(nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY)),
	    nftnl_rule_get_str(r, NFTNL_RULE_TABLE), nftnl_rule_get_str(r, NFTNL_RULE_CHAIN));
	if (rc)
		return rc;
	it = nftnl_expr_iter_create(r);
	if (!it)
		return PC_ENOMEM;
	while (rc == 0 && (e = nftnl_expr_iter_next(it)))
		rc = expr_text(e, buf, len);
	nftnl_expr_iter_destroy(it);
	return rc;
}

int nft_ruleset_text(const struct nft_ruleset *rs, char **out, size_t *outlen)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = pc_buf_appendf(&buf, &len, "%s", "");

	for (size_t i = 0; rc == 0 && i < nft_ruleset_count(rs); i++) {
		const struct nft_obj *o = nft_ruleset_at(rs, i);

		switch (o->kind) {
		case NFT_TABLE_OBJ:
			rc = nft_table_text(o->u.table, &buf, &len);
			break;
		case NFT_CHAIN_OBJ:
			rc = nft_chain_text(o->u.chain, &buf, &len);
			break;
		case NFT_SET_OBJ:
			rc = nft_set_text(o->u.set, &buf, &len);
			break;
		case NFT_RULE_OBJ:
			rc = nft_rule_text(o->u.rule, &buf, &len);
			break;
		}
	}
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
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
