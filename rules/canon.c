/* The canonical form of a compiled policy and its sha256: one JSON text,
 * keys in byte order, no spaces, every default written out, every
 * unordered list sorted. Equal meaning gives equal bytes, so the hash in a
 * log line or certificate names what was enforced, not how it was typed. */
#include "rules/rules_int.h"

#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cbuf {
	char *p;
	size_t len, cap;
	bool failed;
};

static void cb_put(struct cbuf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *np;

		while (cap < b->len + n + 1)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->failed = true;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void cb_raw(struct cbuf *b, const char *s)
{
	cb_put(b, s, strlen(s));
}

static void cb_fmt(struct cbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cb_fmt(struct cbuf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		b->failed = true;
	else
		cb_put(b, tmp, (size_t)n);
}

/* A JSON string. Policy strings are validated printable ASCII; anything
 * else would still be escaped rather than passed through. */
static void cb_str(struct cbuf *b, const char *s)
{
	cb_raw(b, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};

			cb_put(b, e, 2);
		} else if (c < 0x20 || c >= 0x7f) {
			cb_fmt(b, "\\u%04x", c);
		} else {
			cb_put(b, s, 1);
		}
	}
	cb_raw(b, "\"");
}

static void cb_prefix(struct cbuf *b, const struct pc_prefix *p)
{
	char a[PC_ADDRSTRLEN], s[PC_ADDRSTRLEN + 8];

	snprintf(s, sizeof(s), "%s/%u", pc_addr_str(&p->addr, a, sizeof(a)), p->len);
	cb_str(b, s);
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

static void canon_match(struct cbuf *b, const struct policy_match *m)
{
	struct pc_prefix *src = NULL;
	const char *sep = "";

	cb_raw(b, "\"match\":{");
	if (m->has_mac) {
		cb_fmt(b, "\"mac\":\"%02x:%02x:%02x:%02x:%02x:%02x\"", m->mac[0], m->mac[1],
		       m->mac[2], m->mac[3], m->mac[4], m->mac[5]);
		sep = ",";
	}
	if (m->port[0]) {
		cb_raw(b, sep);
		cb_raw(b, "\"port\":");
		cb_str(b, m->port);
		sep = ",";
	}
	if (m->n_sources) {
		/* Source order has no meaning: sort a copy (the compiled
		 * order is the file's, which error messages refer to). */
		src = malloc(m->n_sources * sizeof(*src));
		if (!src) {
			b->failed = true;
			return;
		}
		memcpy(src, m->sources, m->n_sources * sizeof(*src));
		qsort(src, m->n_sources, sizeof(*src), prefix_cmp);
		cb_raw(b, sep);
		cb_raw(b, "\"source\":[");
		for (size_t i = 0; i < m->n_sources; i++) {
			cb_raw(b, i ? "," : "");
			cb_prefix(b, &src[i]);
		}
		cb_raw(b, "]");
		free(src);
	}
	cb_raw(b, "}");
}

static void canon_allow(struct cbuf *b, const struct policy_allow *a)
{
	static const char *const proto[] = {"", "tcp", "udp", "any"};

	cb_raw(b, "{");
	if (a->kind == POLICY_ALLOW_CIDR) {
		cb_raw(b, "\"cidr\":");
		cb_prefix(b, &a->cidr);
	} else {
		char h[POLICY_HOST_MAX + 2];

		snprintf(h, sizeof(h), "%s%s", a->kind == POLICY_ALLOW_WILDCARD ? "*." : "",
			 a->host);
		cb_raw(b, "\"host\":");
		cb_str(b, h);
	}
	cb_raw(b, ",\"ports\":[");
	for (size_t i = 0; i < a->n_ports; i++) {
		if (a->ports[i].lo == a->ports[i].hi)
			cb_fmt(b, "%s\"%u\"", i ? "," : "", a->ports[i].lo);
		else
			cb_fmt(b, "%s\"%u-%u\"", i ? "," : "", a->ports[i].lo, a->ports[i].hi);
	}
	cb_fmt(b, "],\"proto\":\"%s\"}", proto[a->proto & 3]);
}

static void canon_sandbox(struct cbuf *b, const struct policy_sandbox *sb)
{
	const char *qt[32];
	size_t nq = rules_qtype_names(sb->dns_qtypes, qt, 32);

	cb_raw(b, "{\"allow\":[");
	for (size_t i = 0; i < sb->n_allow; i++) {
		cb_raw(b, i ? "," : "");
		canon_allow(b, &sb->allow[i]);
	}
	cb_raw(b, "],\"dns\":{\"qtypes\":[");
	for (size_t i = 0; i < nq; i++)
		cb_fmt(b, "%s\"%s\"", i ? "," : "", qt[i]);
	cb_fmt(b, "],\"refuse_with\":\"%s\"},",
	       sb->dns_refuse == PC_DNS_REFUSE_NXDOMAIN ? "nxdomain" : "refused");
	cb_fmt(b, "\"limits\":{\"new_flows_burst\":%u,\"new_flows_per_second\":%u},",
	       sb->new_flows_burst, sb->new_flows_per_second);
	canon_match(b, &sb->match);
	cb_raw(b, ",\"name\":");
	cb_str(b, sb->name);
	cb_raw(b, ",\"secrets\":[");
	for (size_t i = 0; i < sb->n_secrets; i++) {
		const struct policy_secret *s = &sb->secrets[i];

		cb_raw(b, i ? ",{\"format\":" : "{\"format\":");
		cb_str(b, s->format);
		cb_raw(b, ",\"header\":");
		cb_str(b, s->header);
		cb_raw(b, ",\"host\":");
		cb_str(b, s->host);
		cb_raw(b, ",\"name\":");
		cb_str(b, s->name);
		cb_fmt(b, ",\"port\":%u}", s->port);
	}
	cb_raw(b, "]}");
}

int policy_canon_build(struct policy *p)
{
	unsigned char h[crypto_hash_sha256_BYTES];
	char hex[2 * sizeof(h) + 1];
	struct cbuf b = {0};
	int rc = PC_ENOMEM;

	if (sodium_init() < 0)
		return PC_EIO;
	/* Sandboxes are already in name order (policy_compile.c); secrets in
	 * name order; allow entries keep file order, which names the rules
	 * ("agent-1/allow[2]") that logs and certificates cite. */
	cb_raw(&b, "{\"portcullis_policy\":1,\"sandboxes\":[");
	for (size_t i = 0; i < p->n_sb; i++) {
		cb_raw(&b, i ? "," : "");
		canon_sandbox(&b, &p->sb[i]);
	}
	cb_raw(&b, "]}");
	if (b.failed)
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
	free(b.p);
	return rc;
}
