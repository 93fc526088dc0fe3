/* Unit tests of the checker's netlink screen (checker/nft_screen.c): every
 * message it lets through survives libnftnl (no exit(), no read past the
 * message — under ASan), probed attribute by attribute in every context
 * libnftnl parses, with payloads of every small size and nested shapes;
 * and what the engine really builds passes it. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nf_tables_compat.h>
#include <linux/netfilter/nfnetlink.h>

#include "nft/nft.h"
#include "checker/checker_int.h"
#include "rules/rules.h"
#include "unit.h"

/* ---- building one probe message ----------------------------------------- */

/* A step of the path down to the probed attribute: a string attribute, a
 * u32 attribute or the start of a nest. */
struct step {
	char kind; /* 's', 'u', 'n', 0 = end */
	uint16_t type;
	const char *s;
	uint32_t u;
};

struct msg {
	char buf[4096];
	struct nlmsghdr *nlh;
	struct nlattr *nests[8];
	int n_nests;
};

static void msg_start(struct msg *m, uint16_t type, const struct step *path)
{
	struct nfgenmsg *nfg;

	memset(m->buf, 0, sizeof(m->buf));
	m->nlh = mnl_nlmsg_put_header(m->buf);
	m->nlh->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | type;
	nfg = mnl_nlmsg_put_extra_header(m->nlh, sizeof(*nfg));
	nfg->nfgen_family = NFPROTO_INET;
	m->n_nests = 0;
	for (const struct step *p = path; p && p->kind; p++) {
		if (p->kind == 's')
			mnl_attr_put_strz(m->nlh, p->type, p->s);
		else if (p->kind == 'u')
			mnl_attr_put_u32(m->nlh, p->type, htonl(p->u));
		else
			m->nests[m->n_nests++] = mnl_attr_nest_start(m->nlh, p->type);
	}
}

/* Append raw bytes at the end of the message, unpadded: a read past the
 * last attribute leaves the buffer the test hands over. */
static void put_raw(struct msg *m, const void *d, size_t len)
{
	memcpy((char *)m->nlh + m->nlh->nlmsg_len, d, len);
	m->nlh->nlmsg_len += (uint32_t)len;
}

static void put_attr_hdr(struct msg *m, uint16_t type, size_t payload)
{
	struct nlattr a = {.nla_len = (uint16_t)(sizeof(a) + payload), .nla_type = type};

	put_raw(m, &a, sizeof(a));
}

/* Close the open nests so that each ends exactly where the message ends. */
static void msg_end(struct msg *m)
{
	for (int i = m->n_nests - 1; i >= 0; i--)
		m->nests[i]->nla_len =
		    (uint16_t)((char *)m->nlh + m->nlh->nlmsg_len - (char *)m->nests[i]);
}

/* Payload shapes: n 'A's (no NUL); a nested attribute of child type c
 * holding "AAA"; a nest of type c holding a nest of type g holding "AAA". */
#define SHAPE_RAW_N 13
static const size_t raw_lens[SHAPE_RAW_N] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17};
#define SHAPE_CHILD_N 8
#define SHAPE_GRAND_N 3
#define SHAPES	      (SHAPE_RAW_N + SHAPE_CHILD_N + SHAPE_GRAND_N * SHAPE_GRAND_N)

static void put_probe(struct msg *m, uint16_t type, int shape)
{
	static const char as[32] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

	if (shape < SHAPE_RAW_N) {
		put_attr_hdr(m, type, raw_lens[shape]);
		put_raw(m, as, raw_lens[shape]);
	} else if (shape < SHAPE_RAW_N + SHAPE_CHILD_N) {
		put_attr_hdr(m, type, 4 + 3);
		put_attr_hdr(m, (uint16_t)(shape - SHAPE_RAW_N + 1), 3);
		put_raw(m, as, 3);
	} else {
		int k = shape - SHAPE_RAW_N - SHAPE_CHILD_N;

		put_attr_hdr(m, type, 4 + 4 + 3);
		put_attr_hdr(m, (uint16_t)(k / SHAPE_GRAND_N + 1), 4 + 3);
		put_attr_hdr(m, (uint16_t)(k % SHAPE_GRAND_N + 1), 3);
		put_raw(m, as, 3);
	}
	msg_end(m);
}

/* ---- contexts: where libnftnl parses attributes ------------------------- */

#define S(t, v)                                                                                    \
	{                                                                                          \
		's', t, v, 0                                                                       \
	}
#define U(t, v)                                                                                    \
	{                                                                                          \
		'u', t, NULL, v                                                                    \
	}
#define N(t)                                                                                       \
	{                                                                                          \
		'n', t, NULL, 0                                                                    \
	}
#define RULE	S(NFTA_RULE_TABLE, "t"), S(NFTA_RULE_CHAIN, "c")
#define EXPR(n) RULE, N(NFTA_RULE_EXPRESSIONS), N(NFTA_LIST_ELEM), S(NFTA_EXPR_NAME, n)

struct ctx {
	const char *name;
	uint16_t msg;
	uint16_t max_type;
	struct step path[10];
};

static const struct ctx ctxs[] = {
    {"table", NFT_MSG_NEWTABLE, NFTA_TABLE_MAX, {{0}}},
    {"chain", NFT_MSG_NEWCHAIN, NFTA_CHAIN_MAX, {S(NFTA_CHAIN_TABLE, "t")}},
    {"chain hook",
     NFT_MSG_NEWCHAIN,
     NFTA_HOOK_MAX,
     {S(NFTA_CHAIN_TABLE, "t"), S(NFTA_CHAIN_NAME, "c"), N(NFTA_CHAIN_HOOK)}},
    {"chain hook devs",
     NFT_MSG_NEWCHAIN,
     3,
     {S(NFTA_CHAIN_TABLE, "t"), N(NFTA_CHAIN_HOOK), N(NFTA_HOOK_DEVS)}},
    {"chain counters",
     NFT_MSG_NEWCHAIN,
     NFTA_COUNTER_MAX,
     {S(NFTA_CHAIN_TABLE, "t"), N(NFTA_CHAIN_COUNTERS)}},
    {"rule", NFT_MSG_NEWRULE, NFTA_RULE_MAX, {S(NFTA_RULE_TABLE, "t")}},
    {"rule compat", NFT_MSG_NEWRULE, NFTA_RULE_COMPAT_MAX, {RULE, N(NFTA_RULE_COMPAT)}},
    {"rule expressions", NFT_MSG_NEWRULE, 3, {RULE, N(NFTA_RULE_EXPRESSIONS)}},
    {"expression",
     NFT_MSG_NEWRULE,
     NFTA_EXPR_MAX,
     {RULE, N(NFTA_RULE_EXPRESSIONS), N(NFTA_LIST_ELEM)}},
    {"immediate data",
     NFT_MSG_NEWRULE,
     NFTA_DATA_MAX,
     {EXPR("immediate"), N(NFTA_EXPR_DATA), N(NFTA_IMMEDIATE_DATA)}},
    {"immediate verdict",
     NFT_MSG_NEWRULE,
     NFTA_VERDICT_MAX,
     {EXPR("immediate"), N(NFTA_EXPR_DATA), N(NFTA_IMMEDIATE_DATA), N(NFTA_DATA_VERDICT)}},
    {"immediate jump",
     NFT_MSG_NEWRULE,
     NFTA_VERDICT_MAX,
     {EXPR("immediate"), N(NFTA_EXPR_DATA), N(NFTA_IMMEDIATE_DATA), N(NFTA_DATA_VERDICT),
      U(NFTA_VERDICT_CODE, (uint32_t)NFT_JUMP)}},
    {"dynset expression",
     NFT_MSG_NEWRULE,
     NFTA_EXPR_MAX,
     {EXPR("dynset"), N(NFTA_EXPR_DATA), S(NFTA_DYNSET_SET_NAME, "s"), N(NFTA_DYNSET_EXPR)}},
    {"dynset expressions",
     NFT_MSG_NEWRULE,
     3,
     {EXPR("dynset"), N(NFTA_EXPR_DATA), N(NFTA_DYNSET_EXPRESSIONS)}},
    {"set", NFT_MSG_NEWSET, NFTA_SET_MAX, {S(NFTA_SET_TABLE, "t")}},
    {"set desc",
     NFT_MSG_NEWSET,
     NFTA_SET_DESC_MAX,
     {S(NFTA_SET_TABLE, "t"), S(NFTA_SET_NAME, "s"), N(NFTA_SET_DESC)}},
    {"set desc concat",
     NFT_MSG_NEWSET,
     3,
     {S(NFTA_SET_TABLE, "t"), N(NFTA_SET_DESC), N(NFTA_SET_DESC_CONCAT)}},
    {"set concat field",
     NFT_MSG_NEWSET,
     NFTA_SET_FIELD_MAX,
     {S(NFTA_SET_TABLE, "t"), N(NFTA_SET_DESC), N(NFTA_SET_DESC_CONCAT), N(NFTA_LIST_ELEM)}},
    {"set expression",
     NFT_MSG_NEWSET,
     NFTA_EXPR_MAX,
     {S(NFTA_SET_TABLE, "t"), S(NFTA_SET_NAME, "s"), N(NFTA_SET_EXPR)}},
    {"set expressions", NFT_MSG_NEWSET, 3, {S(NFTA_SET_TABLE, "t"), N(NFTA_SET_EXPRESSIONS)}},
    {"set elements", NFT_MSG_NEWSETELEM, NFTA_SET_ELEM_LIST_MAX, {S(NFTA_SET_TABLE, "t")}},
    {"set element list",
     NFT_MSG_NEWSETELEM,
     3,
     {S(NFTA_SET_ELEM_LIST_TABLE, "t"), S(NFTA_SET_ELEM_LIST_SET, "s"),
      N(NFTA_SET_ELEM_LIST_ELEMENTS)}},
    {"set element",
     NFT_MSG_NEWSETELEM,
     NFTA_SET_ELEM_MAX,
     {S(NFTA_SET_ELEM_LIST_TABLE, "t"), S(NFTA_SET_ELEM_LIST_SET, "s"),
      N(NFTA_SET_ELEM_LIST_ELEMENTS), N(NFTA_LIST_ELEM)}},
    {"set element key",
     NFT_MSG_NEWSETELEM,
     NFTA_DATA_MAX,
     {S(NFTA_SET_ELEM_LIST_TABLE, "t"), N(NFTA_SET_ELEM_LIST_ELEMENTS), N(NFTA_LIST_ELEM),
      N(NFTA_SET_ELEM_KEY)}},
    {"set element verdict",
     NFT_MSG_NEWSETELEM,
     NFTA_VERDICT_MAX,
     {S(NFTA_SET_ELEM_LIST_TABLE, "t"), N(NFTA_SET_ELEM_LIST_ELEMENTS), N(NFTA_LIST_ELEM),
      N(NFTA_SET_ELEM_DATA), N(NFTA_DATA_VERDICT), U(NFTA_VERDICT_CODE, (uint32_t)NFT_GOTO)}},
    {"set element expression",
     NFT_MSG_NEWSETELEM,
     NFTA_EXPR_MAX,
     {S(NFTA_SET_ELEM_LIST_TABLE, "t"), N(NFTA_SET_ELEM_LIST_ELEMENTS), N(NFTA_LIST_ELEM),
      N(NFTA_SET_ELEM_EXPR)}},
    {"object", NFT_MSG_NEWOBJ, NFTA_OBJ_MAX, {S(NFTA_OBJ_TABLE, "t")}},
};

/* Every expression libnftnl knows, with its data's highest attribute. */
static const struct {
	const char *name;
	uint16_t max;
} exprs[] = {
    {"bitwise", NFTA_BITWISE_MAX},
    {"byteorder", NFTA_BYTEORDER_MAX},
    {"cmp", NFTA_CMP_MAX},
    {"connlimit", NFTA_CONNLIMIT_MAX},
    {"counter", NFTA_COUNTER_MAX},
    {"ct", NFTA_CT_MAX},
    {"dup", NFTA_DUP_MAX},
    {"dynset", NFTA_DYNSET_MAX},
    {"exthdr", NFTA_EXTHDR_MAX},
    {"fib", NFTA_FIB_MAX},
    {"flow_offload", NFTA_FLOW_MAX},
    {"fwd", NFTA_FWD_MAX},
    {"hash", NFTA_HASH_MAX},
    {"immediate", NFTA_IMMEDIATE_MAX},
    {"last", NFTA_LAST_MAX},
    {"limit", NFTA_LIMIT_MAX},
    {"log", NFTA_LOG_MAX},
    {"lookup", NFTA_LOOKUP_MAX},
    {"masq", NFTA_MASQ_MAX},
    {"match", NFTA_MATCH_MAX},
    {"meta", NFTA_META_MAX},
    {"nat", NFTA_NAT_MAX},
    {"notrack", 4},
    {"numgen", NFTA_NG_MAX},
    {"objref", NFTA_OBJREF_MAX},
    {"osf", NFTA_OSF_MAX},
    {"payload", NFTA_PAYLOAD_MAX},
    {"queue", NFTA_QUEUE_MAX},
    {"quota", NFTA_QUOTA_MAX},
    {"range", NFTA_RANGE_MAX},
    {"redir", NFTA_REDIR_MAX},
    {"reject", NFTA_REJECT_MAX},
    {"rt", NFTA_RT_MAX},
    {"socket", NFTA_SOCKET_MAX},
    {"synproxy", NFTA_SYNPROXY_MAX},
    {"target", NFTA_TARGET_MAX},
    {"tproxy", NFTA_TPROXY_MAX},
    {"tunnel", NFTA_TUNNEL_MAX},
    {"xfrm", NFTA_XFRM_MAX},
};

/* ---- running the probes --------------------------------------------------- */

struct probe {
	char what[160];
	size_t len;
	char *buf; /* exactly len bytes: ASan sees any read past it */
};

/* Parse every probe the screen passed in one child; the child records the
 * probe it is in, so a death names it. 0 when the child finished. */
static int run_probes(const struct probe *p, size_t n, char *culprit, size_t clen)
{
	volatile size_t *cur =
	    mmap(NULL, sizeof(*cur), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid;
	int status = 0;

	ck_assert_ptr_ne((void *)cur, MAP_FAILED);
	*cur = n;
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		for (size_t i = 0; i < n; i++) {
			struct ck_ruleset rs = {0};

			*cur = i;
			(void)ck_nft_parse(&rs, p[i].buf, p[i].len, NULL);
			ck_ruleset_free(&rs);
		}
		*cur = n;
		_exit(0);
	}
	waitpid(pid, &status, 0);
	if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		snprintf(culprit, clen, "%s (%s %d)", *cur < n ? p[*cur].what : "?",
			 WIFSIGNALED(status) ? "signal" : "exit",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	munmap((void *)cur, sizeof(*cur));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

struct probe_set {
	struct probe *v;
	size_t n, cap, screened, passed;
};

static void probe_context(struct probe_set *ps, const char *name, uint16_t msgtype,
			  const struct step *path, uint16_t max_type)
{
	/* one type past what this kernel header knows: newer attributes */
	for (uint16_t t = 1; t <= max_type + 2; t++) {
		for (int shape = 0; shape < SHAPES; shape++) {
			struct msg m;
			struct probe *p;

			msg_start(&m, msgtype, path);
			put_probe(&m, t, shape);
			ps->screened++;
			if (ck_nft_screen(m.nlh) != CK_SCREEN_OK)
				continue;
			ps->passed++;
			p = ck_grow(&ps->v, &ps->n, &ps->cap, sizeof(*p));
			ck_assert_ptr_nonnull(p);
			snprintf(p->what, sizeof(p->what), "%s: attribute type %u, shape %d", name,
				 t, shape);
			p->len = m.nlh->nlmsg_len;
			p->buf = malloc(p->len);
			ck_assert_ptr_nonnull(p->buf);
			memcpy(p->buf, m.nlh, p->len);
		}
	}
}

static void probe_set_free(struct probe_set *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		free(ps->v[i].buf);
	free(ps->v);
	memset(ps, 0, sizeof(*ps));
}

START_TEST(whatever_passes_the_screen_survives_libnftnl)
{
	struct probe_set ps = {0};
	char culprit[256] = "";

	for (size_t i = 0; i < sizeof(ctxs) / sizeof(ctxs[0]); i++)
		probe_context(&ps, ctxs[i].name, ctxs[i].msg, ctxs[i].path, ctxs[i].max_type);
	for (size_t i = 0; i < sizeof(exprs) / sizeof(exprs[0]); i++) {
		struct step path[] = {EXPR(exprs[i].name), N(NFTA_EXPR_DATA), {0, 0, NULL, 0}};
		char name[64];

		snprintf(name, sizeof(name), "expression %s", exprs[i].name);
		probe_context(&ps, name, NFT_MSG_NEWRULE, path, exprs[i].max);
	}
	/* the screen must let well-formed messages through, or this proves
	 * nothing: most probes of known attributes at their size pass */
	ck_assert_uint_gt(ps.passed, ps.screened / 10);
	if (getenv("PC_SCREEN_PROBE_EACH")) {
		/* one child per probe, every failure listed (slow; for work
		 * on the screen or a new libnftnl) */
		int bad = 0;

		for (size_t i = 0; i < ps.n; i++)
			if (run_probes(&ps.v[i], 1, culprit, sizeof(culprit)) < 0 && ++bad)
				fprintf(stderr, "# %s\n", culprit);
		ck_assert_int_eq(bad, 0);
	}
	if (run_probes(ps.v, ps.n, culprit, sizeof(culprit)) < 0)
		ck_abort_msg("libnftnl failed on a screened message: %s", culprit);
	probe_set_free(&ps);
}
END_TEST

/* The screen refuses what libnftnl would choke on. */
START_TEST(screen_refuses_unterminated_and_wrong_sizes)
{
	static const struct step table_path[] = {{0, 0, NULL, 0}};
	static const struct step chain_path[] = {
	    S(NFTA_CHAIN_TABLE, "t"), N(NFTA_CHAIN_HOOK), {0, 0, NULL, 0}};
	static const struct step expr_path[] = {EXPR("queue"), N(NFTA_EXPR_DATA), {0, 0, NULL, 0}};
	struct msg m;

	msg_start(&m, NFT_MSG_NEWTABLE, table_path);
	put_probe(&m, NFTA_TABLE_NAME, 4); /* "AAAA", no NUL */
	ck_assert_int_eq(ck_nft_screen(m.nlh), CK_SCREEN_BAD);
	msg_start(&m, NFT_MSG_NEWTABLE, table_path);
	put_probe(&m, NFTA_TABLE_FLAGS, 2); /* a u32 of 2 bytes */
	ck_assert_int_eq(ck_nft_screen(m.nlh), CK_SCREEN_BAD);
	msg_start(&m, NFT_MSG_NEWCHAIN, chain_path);
	put_probe(&m, NFTA_HOOK_DEV, 3);
	ck_assert_int_eq(ck_nft_screen(m.nlh), CK_SCREEN_BAD);
	msg_start(&m, NFT_MSG_NEWRULE, expr_path);
	put_probe(&m, NFTA_QUEUE_NUM, 4); /* a u16 of 4 bytes */
	ck_assert_int_eq(ck_nft_screen(m.nlh), CK_SCREEN_BAD);
	msg_start(&m, NFT_MSG_NEWRULE, expr_path);
	put_probe(&m, NFTA_QUEUE_NUM, 2);
	ck_assert_int_eq(ck_nft_screen(m.nlh), CK_SCREEN_OK);
}
END_TEST

/* An expression the screen does not know is not handed to libnftnl: the
 * rule is kept as one we could not read, which the analysis reports. */
START_TEST(unknown_expression_rule_is_kept_as_unreadable)
{
	static const struct step path[] = {EXPR("inner"), {0, 0, NULL, 0}};
	struct ck_ruleset rs = {0};
	struct msg m;

	msg_start(&m, NFT_MSG_NEWRULE, path);
	msg_end(&m);
	ck_assert_int_eq(ck_nft_screen(m.nlh), CK_SCREEN_UNKNOWN);
	ck_assert_int_eq(ck_nft_parse(&rs, m.nlh, m.nlh->nlmsg_len, NULL), 0);
	ck_assert_uint_eq(rs.n_bad, 1);
	ck_assert_str_eq(rs.bad[0].table, "t");
	ck_assert_str_eq(rs.bad[0].chain, "c");
	ck_ruleset_free(&rs);
}
END_TEST

/* libnftnl's builder numbers the elements of a list 1, 2, 3 ...; the
 * kernel dumps each as NFTA_LIST_ELEM, which is what libnftnl's parser
 * (and so the screen) accepts. */
static void elems_as_the_kernel_dumps_them(struct nlmsghdr *nlh)
{
	struct nlattr *a, *e;

	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
	{
		if (mnl_attr_get_type(a) != NFTA_SET_ELEM_LIST_ELEMENTS)
			continue;
		mnl_attr_for_each_nested(e, a)
		{
			e->nla_type = (uint16_t)((e->nla_type & ~NLA_TYPE_MASK) | NFTA_LIST_ELEM);
		}
	}
}

/* What the engine installs, as libnftnl serializes it, passes the screen
 * and parses: the screen is not stricter than the real ruleset. */
START_TEST(engine_ruleset_passes_the_screen)
{
	static const char *cfgtext = "bridge: pcbr0\n"
				     "rules: /nonexistent\n"
				     "dns:\n  resolvers: [198.51.100.53]\n"
				     "vault:\n  listen: 0.0.0.0:8443\n";
	char dir[] = "/tmp/ckscreenXXXXXX", path[128];
	struct config cfg;
	struct policy *pol = NULL;
	struct nft_ruleset *rs = NULL;
	struct nft_port ports[2] = {{"pcv1", 4}, {"pcv2", 5}};
	struct pc_err err = {0};
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/portcullis.yaml", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(cfgtext, f);
	fclose(f);
	ck_assert_int_eq(config_load(path, &cfg, &err), 0);
	snprintf(path, sizeof(path), "%s/rules.d", dir);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	pc_strlcpy(cfg.rules_dir, path, sizeof(cfg.rules_dir));
	snprintf(path, sizeof(path), "%s/rules.d/a.yaml", dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("sandbox: a\nmatch: { source: 10.203.0.11/32 }\nallow:\n"
	      "  - host: api.github.test\n    ports: [443]\n"
	      "secrets:\n  - name: T\n    host: api.github.test\n",
	      f);
	fclose(f);
	ck_assert_msg(policy_load_dir(cfg.rules_dir, &cfg, &pol, &err) == 0, "%s", err.msg);
	for (int qp = NFT_QUEUE_NATIVE; qp <= NFT_QUEUE_COMPAT; qp++) {
		struct nft_ruleset_params prm = {&cfg, pol, ports, 2, (enum nft_queue_path)qp};
		size_t n_rules = 0;

		ck_assert_int_eq(nft_ruleset_build(&prm, &rs, &err), 0);
		for (size_t i = 0; i < nft_ruleset_count(rs); i++) {
			const struct nft_obj *o = nft_ruleset_at(rs, i);
			char buf[16384];
			struct nlmsghdr *nlh;

			memset(buf, 0, sizeof(buf));
			switch (o->kind) {
			case NFT_TABLE_OBJ:
				nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWTABLE, o->family, 0, 1);
				nftnl_table_nlmsg_build_payload(nlh, o->u.table);
				break;
			case NFT_CHAIN_OBJ:
				nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWCHAIN, o->family, 0, 1);
				nftnl_chain_nlmsg_build_payload(nlh, o->u.chain);
				break;
			case NFT_SET_OBJ:
				nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWSET, o->family, 0, 1);
				nftnl_set_nlmsg_build_payload(nlh, o->u.set);
				ck_assert_int_eq(ck_nft_screen(nlh), CK_SCREEN_OK);
				nlh =
				    nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWSETELEM, o->family, 0, 1);
				nftnl_set_elems_nlmsg_build_payload(nlh, o->u.set);
				elems_as_the_kernel_dumps_them(nlh);
				break;
			default:
				nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_NEWRULE, o->family, 0, 1);
				nftnl_rule_nlmsg_build_payload(nlh, o->u.rule);
				n_rules++;
				break;
			}
			if (ck_nft_screen(nlh) != CK_SCREEN_OK) {
				struct pc_buf text = {0};

				if (o->kind == NFT_RULE_OBJ)
					nft_rule_text(o->u.rule, &text);
				if (o->kind == NFT_SET_OBJ)
					nft_set_text(o->u.set, &text);
				ck_abort_msg("object %zu (kind %d) refused (%d): %s", i, o->kind,
					     ck_nft_screen(nlh), pc_buf_str(&text));
			}
		}
		ck_assert_uint_gt(n_rules, 10);
		nft_ruleset_free(rs);
		rs = NULL;
	}
	policy_unref(pol);
}
END_TEST

PC_UNIT_SUITE("checker_screen", "screen", 120, whatever_passes_the_screen_survives_libnftnl,
	      screen_refuses_unterminated_and_wrong_sizes,
	      unknown_expression_rule_is_kept_as_unreadable, engine_ruleset_passes_the_screen)
