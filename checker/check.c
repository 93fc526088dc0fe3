/* checker: checker_run — read the live state, derive what the engine
 * installs, run every obligation (including "our tables are identical to
 * what the engine builds") — and the text and JSON renderings of a result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>

#include "nft/nft.h"
#include "checker/checker_int.h"
#include "rules/rules.h"

/* ---- identity text: one form for the built and the live tables --------- */

struct itext {
	char key[800];
	size_t seq;
	char *text;
};

static int itext_cmp(const void *a, const void *b)
{
	const struct itext *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	if (c)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

struct ilist {
	struct itext *v;
	size_t n, cap;
	bool oom;
};

static void ilist_add(struct ilist *l, int kind, uint32_t fam, const char *table, const char *name,
		      int sub, char *text)
{
	struct itext *t;

	if (!text) {
		l->oom = true;
		return;
	}
	t = ck_grow(&l->v, &l->n, &l->cap, sizeof(*t));
	if (!t) {
		free(text);
		l->oom = true;
		return;
	}
	snprintf(t->key, sizeof(t->key), "%d|%u|%s|%s|%d", kind, fam, table ? table : "",
		 name ? name : "", sub);
	t->seq = l->n;
	t->text = text;
}

/* Sort (objects by kind/family/table/name, rules in their chain order) and
 * join. Returns NULL on allocation failure. */
static char *ilist_join(struct ilist *l)
{
	struct pc_buf b = {0};

	if (l->oom)
		return NULL;
	qsort(l->v, l->n, sizeof(*l->v), itext_cmp);
	for (size_t i = 0; i < l->n; i++)
		pc_buf_put(&b, l->v[i].text, strlen(l->v[i].text));
	return pc_buf_take(&b, NULL); /* NULL after a failure */
}

static void ilist_free(struct ilist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].text);
	free(l->v);
}

typedef int (*text_fn)(const void *, struct pc_buf *);

static char *one_text(text_fn fn, const void *obj)
{
	struct pc_buf b = {0};

	if (fn(obj, &b) < 0) {
		pc_buf_free(&b);
		return NULL;
	}
	return pc_buf_take(&b, NULL);
}

static int t_table(const void *o, struct pc_buf *b)
{
	return nft_table_text(o, b);
}
static int t_chain(const void *o, struct pc_buf *b)
{
	return nft_chain_text(o, b);
}
static int t_set(const void *o, struct pc_buf *b)
{
	return nft_set_text(o, b);
}
static int t_rule(const void *o, struct pc_buf *b)
{
	return nft_rule_text(o, b);
}

static char *built_text(const struct nft_ruleset *rs)
{
	struct ilist l = {0};
	char *out;

	for (size_t i = 0; i < nft_ruleset_count(rs); i++) {
		const struct nft_obj *o = nft_ruleset_at(rs, i);

		switch (o->kind) {
		case NFT_TABLE_OBJ:
			ilist_add(&l, 0, o->family,
				  nftnl_table_get_str(o->u.table, NFTNL_TABLE_NAME), NULL, 0,
				  one_text(t_table, o->u.table));
			break;
		case NFT_CHAIN_OBJ:
			ilist_add(&l, 1, o->family,
				  nftnl_chain_get_str(o->u.chain, NFTNL_CHAIN_TABLE),
				  nftnl_chain_get_str(o->u.chain, NFTNL_CHAIN_NAME), 0,
				  one_text(t_chain, o->u.chain));
			break;
		case NFT_SET_OBJ:
			ilist_add(&l, 2, o->family, nftnl_set_get_str(o->u.set, NFTNL_SET_TABLE),
				  nftnl_set_get_str(o->u.set, NFTNL_SET_NAME), 0,
				  one_text(t_set, o->u.set));
			break;
		case NFT_RULE_OBJ:
			ilist_add(&l, 1, o->family, nftnl_rule_get_str(o->u.rule, NFTNL_RULE_TABLE),
				  nftnl_rule_get_str(o->u.rule, NFTNL_RULE_CHAIN), 1,
				  one_text(t_rule, o->u.rule));
			break;
		}
	}
	out = ilist_join(&l);
	ilist_free(&l);
	return out;
}

static bool ours(const char *table, uint32_t fam, const char *name)
{
	return strcmp(table, name) == 0 && (fam == NFPROTO_INET || fam == NFPROTO_BRIDGE);
}

/* The same text for our tables as the kernel holds them. */
static char *ck_live_text(const struct ck_ruleset *rs, const char *name)
{
	struct ilist l = {0};
	char *out;

	for (size_t i = 0; i < rs->n_tables; i++)
		if (ours(rs->tables[i].name, rs->tables[i].family, name) && rs->tables[i].nt)
			ilist_add(&l, 0, rs->tables[i].family, rs->tables[i].name, NULL, 0,
				  one_text(t_table, rs->tables[i].nt));
	for (size_t i = 0; i < rs->n_chains; i++) {
		const struct ck_chain *c = &rs->chains[i];

		if (!ours(c->table, c->family, name) || !c->nc)
			continue;
		ilist_add(&l, 1, c->family, c->table, c->name, 0, one_text(t_chain, c->nc));
		for (size_t j = 0; j < c->n_rules; j++)
			ilist_add(&l, 1, c->family, c->table, c->name, 1,
				  one_text(t_rule, c->rules[j].r));
	}
	for (size_t i = 0; i < rs->n_sets; i++) {
		const struct ck_set *s = &rs->sets[i];

		if (ours(s->table, s->family, name) && s->ns)
			ilist_add(&l, 2, s->family, s->table, s->name, 0, one_text(t_set, s->ns));
	}
	out = ilist_join(&l);
	ilist_free(&l);
	return out;
}

/* The kernel fills in defaults the builder leaves unset: a lookup's flags
 * 0 ("0x0"), a redirect's proto_max equal to its proto_min. Both forms are
 * the same rule; drop the redundant part so the texts compare (only these
 * exact, semantically empty forms). */
static void norm_identity(char *t)
{
	for (char *p = strstr(t, "[ lookup "); p; p = strstr(p + 1, "[ lookup ")) {
		char *end = strchr(p, ']');
		char *z = end ? strstr(p, " 0x0 ]") : NULL;

		if (z && z + 5 == end)
			memmove(z, z + 4, strlen(z + 4) + 1);
	}
	for (char *p = strstr(t, "[ redir proto_min reg "); p;
	     p = strstr(p + 1, "[ redir proto_min reg ")) {
		char *r = p + strlen("[ redir proto_min reg ");
		size_t rl = strspn(r, "0123456789");
		char pat[64];

		snprintf(pat, sizeof(pat), " proto_max reg %.*s ", (int)rl, r);
		if (rl && strncmp(r + rl, pat, strlen(pat)) == 0)
			memmove(r + rl, r + rl + strlen(pat) - 1,
				strlen(r + rl + strlen(pat) - 1) + 1);
	}
}

/* The first line where a and b differ, for the evidence. */
static void first_diff(const char *a, const char *b, char *out, size_t len)
{
	size_t line = 1;
	const char *la = a, *lb = b;

	while (*a && *a == *b) {
		if (*a == '\n') {
			line++;
			la = a + 1;
			lb = b + 1;
		}
		a++;
		b++;
	}
	snprintf(out, len, "line %zu: expected \"%.*s\", found \"%.*s\"", line,
		 (int)strcspn(la, "\n") > 200 ? 200 : (int)strcspn(la, "\n"), la,
		 (int)strcspn(lb, "\n") > 200 ? 200 : (int)strcspn(lb, "\n"), lb);
}

static void table_check(const struct ck_state *st, const struct checker_expect *ex,
			struct checker_result *res)
{
	bool have_inet = false, have_bridge = false;
	char *live, *exp;

	for (size_t i = 0; i < st->nft.n_tables; i++) {
		if (strcmp(st->nft.tables[i].name, ex->table) != 0)
			continue;
		have_inet |= st->nft.tables[i].family == NFPROTO_INET;
		have_bridge |= st->nft.tables[i].family == NFPROTO_BRIDGE;
	}
	if (!have_inet)
		ck_find(res, CK_OB_TABLE, CHECKER_EXIT,
			"table inet %s is missing: nothing guards the sandbox path", ex->table);
	if (!have_bridge)
		ck_find(res, CK_OB_TABLE, CHECKER_EXIT,
			"table bridge %s is missing: frames are not stamped with their port",
			ex->table);
	if (!ex->canon) {
		ck_find(res, CK_OB_TABLE, CHECKER_DOUBT,
			"what the engine installs could not be built: identity not checked");
		return;
	}
	live = ck_live_text(&st->nft, ex->table);
	if (!live) {
		ck_find(res, CK_OB_TABLE, CHECKER_DOUBT, "out of memory rendering our tables");
		return;
	}
	exp = strdup(ex->canon);
	if (!exp) {
		free(live);
		ck_find(res, CK_OB_TABLE, CHECKER_DOUBT, "out of memory rendering our tables");
		return;
	}
	norm_identity(live);
	norm_identity(exp);
	if (strcmp(live, exp) != 0) {
		char d[600];

		first_diff(exp, live, d, sizeof(d));
		ck_find(res, CK_OB_TABLE, CHECKER_EXIT,
			"our tables differ from what the engine installs (edited by hand?): %s", d);
	} else {
		char dg[80];

		ck_sha256_str(live, strlen(live), dg);
		ck_evid(res, CK_OB_TABLE,
			"tables inet %s and bridge %s are identical to what the engine builds for "
			"this configuration, policy and ports (%s)",
			ex->table, ex->table, dg);
	}
	free(exp);
	free(live);
}

/* ---- expectation ------------------------------------------------------------ */

/* What checker_expect borrows: the built text and the policy's port names
 * — every one of them (a gateway may have 1,000 sandboxes: a port beyond a
 * fixed count would not be known as sandbox-facing by its name). */
struct ck_expect_store {
	char *canon;
	const char **ports;
	char (*names)[PC_IFNAMSIZ];
};

static bool table_uses_compat(const struct ck_ruleset *rs, const char *table)
{
	/* the engine picks the xt NFQUEUE target when the kernel lacks the
	 * native queue expression; the live table shows which it probed */
	for (size_t i = 0; i < rs->n_chains; i++) {
		const struct ck_chain *c = &rs->chains[i];

		if (c->family != NFPROTO_INET || strcmp(c->table, table) != 0)
			continue;
		for (size_t j = 0; j < c->n_rules; j++) {
			char buf[4096];

			buf[0] = 0;
			nftnl_rule_snprintf(buf, sizeof(buf), c->rules[j].r, NFTNL_OUTPUT_DEFAULT,
					    0);
			if (strstr(buf, "[ queue "))
				return false;
			if (strstr(buf, "[ target name NFQUEUE"))
				return true;
		}
	}
	return true;
}

/* given: the policy to build for (borrowed); NULL: the one in cfg->rules_dir. */
static int expect_build(const struct config *cfg, const struct policy *given, const char *bridge,
			const struct ck_state *st, struct checker_expect *ex, void **owned,
			struct pc_err *err)
{
	struct checker_expect e;
	struct policy *pol = NULL; /* loaded here when not given */
	const struct policy *use;
	struct nft_ruleset *rs = NULL;
	struct nft_port *ports = NULL;
	struct ck_expect_store *store = calloc(1, sizeof(*store));
	const struct ck_link *br = ck_link_by_name(st, bridge);
	size_t np = 0;
	int rc;

	if (!store)
		return pc_err_set(err, PC_ENOMEM, "expectation");
	memset(&e, 0, sizeof(e));
	pc_strlcpy(e.table, NFT_TABLE, sizeof(e.table));
	e.mark_mask = NFT_MARK_MASK;
	/* the verdict marks and the conntrack mark that mean "the engine decided" */
	e.mark_decided = NFT_MARK_ALLOW | NFT_MARK_HELD | NFT_MARK_PASS;
	e.queue_lo = cfg->queue.base;
	e.queue_hi = (uint16_t)(cfg->queue.base + (cfg->queue.count ? cfg->queue.count - 1 : 0));
	e.listen_ports[0] = cfg->vault.listen.port;
	e.n_listen = 1;
	e.br_nf_call = 0; /* sandbox traffic is routed by the gateway, never bridged */
	for (size_t i = 0; i < cfg->n_uplinks && i < RULES_MAX_UPLINKS; i++)
		pc_strlcpy(e.uplinks[i], cfg->uplinks[i], sizeof(e.uplinks[i]));
	e.n_uplinks = cfg->n_uplinks < RULES_MAX_UPLINKS ? cfg->n_uplinks : RULES_MAX_UPLINKS;

	rc = given ? 0 : policy_load_dir(cfg->rules_dir, cfg, &pol, err);
	if (rc < 0) {
		pc_err_prefix(err, "policy: ");
		goto out;
	}
	use = given ? given : pol;
	store->ports = calloc(policy_sandbox_count(use) + 1, sizeof(*store->ports));
	store->names = calloc(policy_sandbox_count(use) + 1, sizeof(*store->names));
	if (!store->ports || !store->names) {
		rc = pc_err_set(err, PC_ENOMEM, "policy ports");
		goto out;
	}
	for (size_t i = 0; i < policy_sandbox_count(use); i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(use, i);

		if (!sb->match.port[0])
			continue;
		pc_strlcpy(store->names[e.n_policy_ports], sb->match.port, PC_IFNAMSIZ);
		store->ports[e.n_policy_ports] = store->names[e.n_policy_ports];
		e.n_policy_ports++;
	}
	e.policy_ports = store->ports;
	ports = calloc(st->n_links ? st->n_links : 1, sizeof(*ports));
	if (!ports) {
		rc = pc_err_set(err, PC_ENOMEM, "ports");
		goto out;
	}
	for (size_t i = 0; br && i < st->n_links; i++) {
		if (st->links[i].master != br->ifindex)
			continue;
		pc_strlcpy(ports[np].name, st->links[i].name, sizeof(ports[np].name));
		ports[np].ifindex = (uint32_t)st->links[i].ifindex;
		np++;
	}
	{
		struct config c2 = *cfg;
		struct nft_ruleset_params p = {.cfg = &c2,
					       .policy = use,
					       .ports = ports,
					       .n_ports = np,
					       .qpath = table_uses_compat(&st->nft, NFT_TABLE)
							    ? NFT_QUEUE_COMPAT
							    : NFT_QUEUE_NATIVE};

		pc_strlcpy(c2.bridge, bridge, sizeof(c2.bridge));
		rc = nft_ruleset_build(&p, &rs, err);
		if (rc < 0)
			goto out;
	}
	store->canon = built_text(rs);
	if (!store->canon) {
		rc = pc_err_set(err, PC_ENOMEM, "ruleset text");
		goto out;
	}
	e.canon = store->canon;
	e.canon_len = strlen(store->canon);
	*ex = e;
	*owned = store;
	store = NULL;
	rc = 0;
out:
	checker_expect_free(store);
	free(ports);
	nft_ruleset_free(rs);
	policy_unref(pol);
	return rc;
}

void checker_expect_free(void *owned)
{
	struct ck_expect_store *s = owned;

	if (s) {
		free(s->canon);
		free(s->ports);
		free(s->names);
	}
	free(s);
}

int checker_expect_from_policy(const struct config *cfg, const struct policy *pol,
			       const char *bridge, struct checker_expect *ex, void **owned,
			       struct pc_err *err)
{
	struct ck_state st = {0};
	int rc = ck_nft_read(&st.nft, err);

	if (rc == 0)
		rc = ck_rtnl_read(&st, err);
	if (rc == 0)
		rc = expect_build(cfg, pol, bridge ? bridge : cfg->bridge, &st, ex, owned, err);
	ck_state_free(&st);
	return rc;
}

/* ---- the check ------------------------------------------------------------------ */

/* engine_pid: the engine's process when the caller knows it (its check
 * helper), 0 to look for it. */
static int state_read(struct ck_state *st, const char *br, int engine_pid, struct pc_err *err)
{
	int rc = ck_nft_read(&st->nft, err);

	(void)br;
	if (rc == 0)
		rc = ck_rtnl_read(st, err);
	if (rc == 0)
		rc = ck_sysctl_read(st, br, err);
	if (rc == 0)
		rc = ck_listeners_read(st, err);
	/* tc on every interface: a sandbox packet reaches the bridge, its
	 * ports, devices stacked on them and the uplinks, and marks set on
	 * the uplink's ingress are saved to conntrack (issue 23) */
	if (rc == 0)
		rc = ck_tc_read(st, err);
	if (rc < 0)
		return rc;
	ck_bpf_probe(st);
	ck_legacy_read(st);
	ck_ebt_read(st);
	ck_nfq_read(st, engine_pid);
	ck_tun_owners(st);
	ck_packet_read(st);
	return ck_netns_read(st, err);
}

static int ck_result_finish(const struct ck_state *st, const char *br, struct checker_result *res)
{
	struct pc_buf rb = {0}, sb = {0};

	ck_nft_canon(&st->nft, 0, NULL, &rb);
	ck_state_canon(st, br, &sb);
	res->ruleset_canon = pc_buf_take(&rb, &res->ruleset_len);
	res->snapshot_canon = pc_buf_take(&sb, &res->snapshot_len);
	if (!res->ruleset_canon || !res->snapshot_canon)
		return PC_ENOMEM;
	ck_sha256_str(res->ruleset_canon, res->ruleset_len, res->ruleset_digest);
	ck_sha256_str(res->snapshot_canon, res->snapshot_len, res->snapshot_digest);
	return 0;
}

int checker_run(const struct config *cfg, const struct checker_expect *ex_in, const char *bridge,
		struct checker_result **out, struct pc_err *err)
{
	struct ck_state st = {0};
	struct checker_result *res = calloc(1, sizeof(*res));
	struct checker_expect ex;
	void *owned = NULL;
	const char *br = bridge ? bridge : cfg->bridge;
	int rc;

	if (!res)
		return pc_err_set(err, PC_ENOMEM, "check: out of memory");
	pc_strlcpy(res->bridge, br, sizeof(res->bridge));
	res->time_ms = pc_now_real_ms();
	/* the engine hands its expectation to its own check helper, a child
	 * of the engine: the queues must be bound by that parent */
	rc = state_read(&st, br, ex_in ? (int)getppid() : 0, err);
	if (rc < 0) {
		pc_err_prefix(err, "reading the kernel state: ");
		goto out;
	}
	if (ex_in) {
		ex = *ex_in;
	} else {
		rc = expect_build(cfg, NULL, br, &st, &ex, &owned, err);
		if (rc < 0) {
			pc_err_prefix(err, "building the engine's ruleset: ");
			goto out;
		}
	}
	/* what the engine's expectation (its memfd) does not carry */
	if (!ex.mark_pass) {
		ex.mark_pass = NFT_MARK_PASS;
		ex.ct_exempt = NFT_MARK_ALLOW | NFT_MARK_HELD;
	}
	if (!ex.resolvers) {
		ex.resolvers = cfg->dns.resolvers;
		ex.n_resolvers = cfg->dns.n_resolvers;
	}
	rc = ck_analyze(&st, &ex, br, res, err);
	if (rc == 0)
		table_check(&st, &ex, res);
	if (rc == 0) {
		char *live = ck_live_text(&st.nft, ex.table);

		if (live)
			ck_sha256_str(live, strlen(live), res->table_digest);
		free(live);
		rc = ck_result_finish(&st, br, res);
		if (rc < 0)
			pc_err_set(err, rc, "check: out of memory");
	}
out:
	checker_expect_free(owned);
	ck_state_free(&st);
	if (rc < 0) {
		checker_result_free(res);
		return rc;
	}
	*out = res;
	return 0;
}

/* ---- rendering ------------------------------------------------------------------ */

static const char *status_word(enum checker_status s)
{
	return s == CHECKER_PROVEN ? "proven" : s == CHECKER_EXIT_FOUND ? "exit found" : "unproven";
}

char *checker_result_text(const struct checker_result *r, bool verbose)
{
	struct pc_buf b = {0};

	for (size_t i = 0; i < r->n_findings; i++)
		pc_buf_printf(&b, "%s\n", r->findings[i].text);
	pc_buf_printf(&b, "%s: bridge %s: %s (%zu finding%s)\n",
		      r->status == CHECKER_PROVEN ? "proven" : "NOT proven", r->bridge,
		      status_word(r->status), r->n_findings, r->n_findings == 1 ? "" : "s");
	for (int o = 0; o < CK_OB_COUNT; o++) {
		pc_buf_printf(&b, "  [%s] %s: %s\n", r->ob[o].failed ? "FAIL" : " ok ",
			      checker_oblig_id((enum checker_oblig)o),
			      checker_oblig_title((enum checker_oblig)o));
		for (size_t i = 0; verbose && i < r->ob[o].n; i++)
			pc_buf_printf(&b, "      %s\n", r->ob[o].lines[i]);
	}
	pc_buf_printf(&b, "  ruleset %s\n  snapshot %s\n", r->ruleset_digest, r->snapshot_digest);
	return pc_buf_take(&b, NULL); /* NULL after a failure */
}

void ck_json_obligations(const struct checker_result *r, struct pc_json *j);

void ck_json_obligations(const struct checker_result *r, struct pc_json *j)
{
	pc_json_arr(j);
	for (int o = 0; o < CK_OB_COUNT; o++) {
		pc_json_obj(j);
		pc_json_kstr(j, "id", checker_oblig_id((enum checker_oblig)o));
		pc_json_kstr(j, "statement", checker_oblig_title((enum checker_oblig)o));
		pc_json_key(j, "held");
		pc_json_bool(j, !r->ob[o].failed);
		pc_json_key(j, "evidence");
		pc_json_arr(j);
		for (size_t i = 0; i < r->ob[o].n; i++)
			pc_json_str(j, r->ob[o].lines[i]);
		pc_json_arr_end(j);
		pc_json_key(j, "findings");
		pc_json_arr(j);
		for (size_t i = 0; i < r->n_findings; i++)
			if (r->findings[i].ob == (enum checker_oblig)o)
				pc_json_str(j, r->findings[i].text);
		pc_json_arr_end(j);
		pc_json_obj_end(j);
	}
	pc_json_arr_end(j);
}

char *checker_result_json(const struct checker_result *r)
{
	struct pc_buf b = {0};
	struct pc_json j;
	char t[40];

	pc_json_init(&j, &b);
	pc_json_obj(&j);
	pc_json_kstr(&j, "status", status_word(r->status));
	pc_json_kstr(&j, "bridge", r->bridge);
	pc_json_kstr(&j, "time", pc_time_rfc3339(r->time_ms, t, sizeof(t)));
	pc_json_key(&j, "findings");
	pc_json_arr(&j);
	for (size_t i = 0; i < r->n_findings; i++) {
		pc_json_obj(&j);
		pc_json_kstr(&j, "kind", r->findings[i].kind == CHECKER_EXIT ? "exit" : "unproven");
		pc_json_kstr(&j, "obligation", checker_oblig_id(r->findings[i].ob));
		pc_json_kstr(&j, "text", r->findings[i].text);
		pc_json_obj_end(&j);
	}
	pc_json_arr_end(&j);
	pc_json_key(&j, "obligations");
	ck_json_obligations(r, &j);
	pc_json_key(&j, "digests");
	pc_json_obj(&j);
	pc_json_kstr(&j, "ruleset", r->ruleset_digest);
	pc_json_kstr(&j, "tables", r->table_digest);
	pc_json_kstr(&j, "snapshot", r->snapshot_digest);
	pc_json_obj_end(&j);
	pc_json_obj_end(&j);
	pc_buf_putc(&b, '\n');
	return pc_buf_take(&b, NULL); /* NULL after a failure */
}
