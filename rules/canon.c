/* The canonical form of a compiled policy and its sha256: one JSON text,
 * keys in byte order, no spaces, every default written out, every
 * unordered list sorted. Equal meaning gives equal bytes, so the hash in a
 * log line or certificate names what was enforced, not how it was typed. */
#include "rules/rules_int.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Policy strings are validated printable ASCII: the common escaper writes
 * them as they are but for quote and backslash (pinned by check_checker_golden). */
static void quote_prefix(struct pc_buf *b, const struct pc_prefix *p)
{
	char a[PC_ADDRSTRLEN], s[PC_ADDRSTRLEN + 8];

	snprintf(s, sizeof(s), "%s/%u", pc_addr_str(&p->addr, a, sizeof(a)), p->len);
	pc_json_quote(b, s);
}

static int prefix_cmp(const void *x, const void *y)
{
	const struct pc_prefix *a = x, *b = y;
	int c;

	if (a->addr.family != b->addr.family)
		return a->addr.family < b->addr.family ? -1 : 1;
	c = memcmp(a->addr.a, b->addr.a, 16);
	return c ? c : (a->len > b->len) - (a->len < b->len);
}

static void canon_match(struct pc_buf *b, const struct policy_match *m)
{
	struct pc_prefix *src = NULL;
	const char *sep = "";

	pc_buf_puts(b, "\"match\":{");
	if (m->has_mac) {
		pc_buf_printf(b, "\"mac\":\"%02x:%02x:%02x:%02x:%02x:%02x\"", m->mac[0], m->mac[1],
			      m->mac[2], m->mac[3], m->mac[4], m->mac[5]);
		sep = ",";
	}
	if (m->port[0]) {
		pc_buf_puts(b, sep);
		pc_buf_puts(b, "\"port\":");
		pc_json_quote(b, m->port);
		sep = ",";
	}
	if (m->n_sources) {
		/* Source order has no meaning: sort a copy (the compiled
		 * order is the file's, which error messages refer to). */
		src = malloc(m->n_sources * sizeof(*src));
		if (!src) {
			b->err = b->err ? b->err : PC_ENOMEM;
			return;
		}
		memcpy(src, m->sources, m->n_sources * sizeof(*src));
		qsort(src, m->n_sources, sizeof(*src), prefix_cmp);
		pc_buf_puts(b, sep);
		pc_buf_puts(b, "\"source\":[");
		for (size_t i = 0; i < m->n_sources; i++) {
			pc_buf_puts(b, i ? "," : "");
			quote_prefix(b, &src[i]);
		}
		pc_buf_puts(b, "]");
		free(src);
	}
	pc_buf_puts(b, "}");
}

static void canon_allow(struct pc_buf *b, const struct policy_allow *a)
{
	static const char *const proto[] = {"", "tcp", "udp", "any"};

	pc_buf_puts(b, "{");
	if (a->kind == POLICY_ALLOW_CIDR) {
		pc_buf_puts(b, "\"cidr\":");
		quote_prefix(b, &a->cidr);
	} else {
		char h[POLICY_HOST_MAX + 2];

		snprintf(h, sizeof(h), "%s%s", a->kind == POLICY_ALLOW_WILDCARD ? "*." : "",
			 a->host);
		pc_buf_puts(b, "\"host\":");
		pc_json_quote(b, h);
	}
	pc_buf_puts(b, ",\"ports\":[");
	for (size_t i = 0; i < a->n_ports; i++) {
		if (a->ports[i].lo == a->ports[i].hi)
			pc_buf_printf(b, "%s\"%u\"", i ? "," : "", a->ports[i].lo);
		else
			pc_buf_printf(b, "%s\"%u-%u\"", i ? "," : "", a->ports[i].lo,
				      a->ports[i].hi);
	}
	pc_buf_printf(b, "],\"proto\":\"%s\"}", proto[a->proto & 3]);
}

static void canon_sandbox(struct pc_buf *b, const struct policy_sandbox *sb)
{
	const char *qt[32];
	size_t nq = rules_qtype_names(sb->dns_qtypes, qt, 32);

	pc_buf_puts(b, "{\"allow\":[");
	for (size_t i = 0; i < sb->n_allow; i++) {
		pc_buf_puts(b, i ? "," : "");
		canon_allow(b, &sb->allow[i]);
	}
	pc_buf_puts(b, "],\"dns\":{\"qtypes\":[");
	for (size_t i = 0; i < nq; i++)
		pc_buf_printf(b, "%s\"%s\"", i ? "," : "", qt[i]);
	pc_buf_printf(b, "],\"refuse_with\":\"%s\"},",
		      sb->dns_refuse == DNS_REFUSE_NXDOMAIN ? "nxdomain" : "refused");
	pc_buf_printf(b, "\"limits\":{\"new_flows_burst\":%u,\"new_flows_per_second\":%u},",
		      sb->new_flows_burst, sb->new_flows_per_second);
	canon_match(b, &sb->match);
	pc_buf_puts(b, ",\"name\":");
	pc_json_quote(b, sb->name);
	pc_buf_puts(b, ",\"secrets\":[");
	for (size_t i = 0; i < sb->n_secrets; i++) {
		const struct policy_secret *s = &sb->secrets[i];

		pc_buf_puts(b, i ? ",{\"format\":" : "{\"format\":");
		pc_json_quote(b, s->format);
		pc_buf_puts(b, ",\"header\":");
		pc_json_quote(b, s->header);
		pc_buf_puts(b, ",\"host\":");
		pc_json_quote(b, s->host);
		pc_buf_puts(b, ",\"name\":");
		pc_json_quote(b, s->name);
		pc_buf_printf(b, ",\"port\":%u}", s->port);
	}
	pc_buf_puts(b, "]}");
}

/* A sandbox's part of the canonical form depends on nothing else: it is
 * written once, when its file is parsed, and kept with the parse. */
int policy_canon_sandbox(struct sbb *s)
{
	struct pc_buf b;
	int rc = PC_ENOMEM;

	pc_buf_init(&b, 0, 0);
	canon_sandbox(&b, &s->sb);
	if (!b.err && (s->canon = arena_strndup(s->a, b.p, b.len))) {
		s->canon_len = b.len;
		rc = 0;
	}
	pc_buf_free(&b);
	return rc;
}

int policy_canon_build(struct policy *p, struct sbb *const *frag)
{
	unsigned char h[crypto_hash_sha256_BYTES];
	char hex[2 * sizeof(h) + 1];
	struct pc_buf b;
	size_t len = 64;
	int rc = PC_ENOMEM;

	if (sodium_init() < 0)
		return PC_EIO;
	for (size_t i = 0; i < p->n_sb; i++)
		len += frag[i]->canon_len + 1;
	pc_buf_init(&b, 0, 0);
	pc_buf_reserve(&b, len); /* failing, it sets b.err */
	/* Sandboxes are already in name order (policy_compile.c); secrets in
	 * name order; allow entries keep file order, which names the rules
	 * ("agent-1/allow[2]") that logs and certificates cite. */
	pc_buf_puts(&b, "{\"portcullis_policy\":1,\"sandboxes\":[");
	for (size_t i = 0; i < p->n_sb; i++) {
		pc_buf_puts(&b, i ? "," : "");
		pc_buf_put(&b, frag[i]->canon, frag[i]->canon_len);
	}
	pc_buf_puts(&b, "]}");
	if (b.err)
		goto out;
	p->canonical = arena_strndup(&p->arena, b.p, b.len);
	if (!p->canonical)
		goto out;
	p->canonical_len = b.len;
	crypto_hash_sha256(h, (const unsigned char *)b.p, b.len);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(p->hash, sizeof(p->hash), "sha256:%s", hex);
	rc = 0;
out:
	pc_buf_free(&b);
	return rc;
}
