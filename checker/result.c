/* checker: the result of a check (findings and evidence per obligation),
 * and the array helper the other checker files share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "checker/checker_int.h"

static const struct {
	const char *id, *title;
} oblig_names[CK_OB_COUNT] = {
    [CK_OB_TABLE] = {"table-identical",
		     "our nftables tables are present and identical to what the engine installs"},
    [CK_OB_ORDER] = {"chain-order", "our base chains run before any chain that could accept, "
				    "redirect, duplicate, mangle our marks or change the "
				    "destination of sandbox traffic"},
    [CK_OB_PATHS] = {"paths-guarded", "every path of a packet from a sandbox port ends in our "
				      "queue, our listeners or a drop"},
    [CK_OB_QUEUE] = {"no-bypass-queue",
		     "no queue rule on the sandbox path has bypass or sends to another queue"},
    [CK_OB_MEMBERS] = {"bridge-members",
		       "no other interface (uplink, host veth, second bridge) is a port of "
		       "the sandbox bridge"},
    [CK_OB_ISOLATED] = {"ports-isolated", "every sandbox port of the bridge is isolated"},
    [CK_OB_TCXDP] = {"no-tc-xdp-exit",
		     "no tc filter or XDP program on the sandbox ports or the bridge "
		     "redirects, mirrors or cannot be classified"},
    [CK_OB_LOCAL] = {"local-delivery", "no other address on the bridge accepts local delivery "
				       "beyond our listeners"},
    [CK_OB_IPV6] = {"ipv6-guarded", "the IPv6 path is as guarded as the IPv4 one"},
    [CK_OB_BRNF] = {"bridge-netfilter", "bridge netfilter settings are what the ruleset expects"},
    [CK_OB_PASS] = {"pass-restricted",
		    "a packet the engine released (PASS) from a sandbox port, on a flow it neither "
		    "allowed nor holds, is accepted only toward a resolver's port 53"},
    [CK_OB_MODEL] = {"fully-modelled", "everything on the sandbox path was modelled (no "
				       "unknown expression, set, program or hook)"},
};

const char *checker_oblig_id(enum checker_oblig ob)
{
	return ob < CK_OB_COUNT ? oblig_names[ob].id : "?";
}

const char *checker_oblig_title(enum checker_oblig ob)
{
	return ob < CK_OB_COUNT ? oblig_names[ob].title : "?";
}

void *ck_grow(void *arrp, size_t *n, size_t *cap, size_t elsize)
{
	void **arr = arrp;
	char *p;

	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		void *q = realloc(*arr, nc * elsize);

		if (!q)
			return NULL;
		*arr = q;
		*cap = nc;
	}
	p = (char *)*arr + *n * elsize;
	memset(p, 0, elsize);
	(*n)++;
	return p;
}

static void ck_vappend(struct checker_result *res, enum checker_oblig ob, char *line)
{
	char **slot;

	slot = ck_grow(&res->ob[ob].lines, &res->ob[ob].n, &res->ob[ob].cap, sizeof(char *));
	if (!slot) {
		free(line);
		return;
	}
	*slot = line;
}

void ck_evid(struct checker_result *res, enum checker_oblig ob, const char *fmt, ...)
{
	va_list ap;
	char *line = NULL;

	if (ob >= CK_OB_COUNT)
		return;
	va_start(ap, fmt);
	if (vasprintf(&line, fmt, ap) < 0)
		line = NULL;
	va_end(ap);
	if (!line)
		return;
	for (size_t i = 0; i < res->ob[ob].n; i++) {
		if (strcmp(res->ob[ob].lines[i], line) == 0) {
			free(line);
			return;
		}
	}
	ck_vappend(res, ob, line);
}

void ck_find(struct checker_result *res, enum checker_oblig ob, enum checker_kind kind,
	     const char *fmt, ...)
{
	va_list ap;
	char *body = NULL, *line = NULL;
	struct checker_finding *f;

	if (ob >= CK_OB_COUNT)
		return;
	va_start(ap, fmt);
	if (vasprintf(&body, fmt, ap) < 0)
		body = NULL;
	va_end(ap);
	/* A failure to record a finding must not read as "proven": the
	 * obligation is marked failed before anything can go wrong. */
	res->ob[ob].failed = true;
	if (kind == CHECKER_EXIT)
		res->status = CHECKER_EXIT_FOUND;
	else if (res->status == CHECKER_PROVEN)
		res->status = CHECKER_UNPROVEN;
	if (!body)
		return;
	if (asprintf(&line, "%s: %s", kind == CHECKER_EXIT ? "second exit" : "unproven", body) <
	    0) {
		free(body);
		return;
	}
	free(body);
	for (size_t i = 0; i < res->n_findings; i++) {
		if (strcmp(res->findings[i].text, line) == 0) {
			free(line);
			return; /* the same way out seen on another port/family */
		}
	}
	f = ck_grow(&res->findings, &res->n_findings, &res->cap_findings, sizeof(*f));
	if (!f) {
		free(line);
		return;
	}
	f->ob = ob;
	f->kind = kind;
	f->text = line;
}

void checker_result_free(struct checker_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_findings; i++)
		free(r->findings[i].text);
	free(r->findings);
	for (int o = 0; o < CK_OB_COUNT; o++) {
		for (size_t i = 0; i < r->ob[o].n; i++)
			free(r->ob[o].lines[i]);
		free(r->ob[o].lines);
	}
	free(r->ruleset_canon);
	free(r->snapshot_canon);
	free(r);
}

void ck_sha256_str(const void *data, size_t len, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32) {
		strcpy(out, "sha256:unavailable");
		return;
	}
	strcpy(out, "sha256:");
	for (unsigned i = 0; i < 32; i++)
		sprintf(out + 7 + 2 * i, "%02x", md[i]);
}

void ck_sha256_file(const char *path, char *out)
{
	char *buf = NULL;
	size_t len = 0;

	out[0] = 0;
	if (!path || pc_file_read(path, 256u << 20, &buf, &len, NULL) < 0)
		return;
	ck_sha256_str(buf, len, out);
	free(buf);
}
