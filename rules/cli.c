/* `portcullis policy lint` and `portcullis policy hash`: the admin's way to
 * check rule files and the configuration before a reload, and to see the
 * hash logs and certificates will cite. docs/policy.md documents both. */
#include "rules/rules_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lint {
	const char *what; /* "policy lint" */
	size_t errors;
	size_t unreadable;
};

static void lint_report(const struct pc_err *e, void *arg)
{
	struct lint *l = arg;
	char buf[1024];

	if (e->code == PC_ENOENT || e->code == PC_EIO || e->code == PC_EPERM)
		l->unreadable++;
	else
		l->errors++;
	if (e->file[0])
		fprintf(stderr, "%s\n", pc_err_str(e, buf, sizeof(buf)));
	else
		pc_cli_error(l->what, "%s", e->msg);
}

static int lint_exit(const struct lint *l)
{
	return l->unreadable ? PC_EXIT_ERROR : l->errors ? PC_EXIT_FAIL : PC_EXIT_OK;
}

static void policy_summary(const char *where, const struct policy *p, bool hash)
{
	size_t n = policy_sandbox_count(p), allow = 0, secrets = 0;

	for (size_t i = 0; i < n; i++) {
		allow += policy_sandbox_at(p, i)->n_allow;
		secrets += policy_sandbox_at(p, i)->n_secrets;
	}
	printf("%s: ok: %zu sandbox%s, %zu allow entr%s, %zu secret%s%s%s\n", where, n,
	       n == 1 ? "" : "es", allow, allow == 1 ? "y" : "ies", secrets,
	       secrets == 1 ? "" : "s", hash ? ", policy " : "", hash ? policy_hash(p) : "");
}

static bool lint_routable(const struct config *cfg, const struct pc_prefix *p)
{
	for (size_t i = 0; cfg && i < cfg->dns.n_routable; i++)
		if (cfg->dns.routable[i].len <= p->len &&
		    pc_prefix_contains(&cfg->dns.routable[i], &p->addr))
			return true;
	return false;
}

static void lint_warn_one(const struct policy_sandbox *sb, const struct policy_allow *a,
			  const struct pc_special *e)
{
	char c[PC_ADDRSTRLEN];

	pc_addr_str(&a->cidr.addr, c, sizeof(c));
	fprintf(stderr,
		"%s:%u:%u: warning: cidr %s/%u of sandbox '%s' opens %s, %s (%s), a "
		"special-purpose range: this sandbox may reach it, and DNS answers in it are "
		"learned for its names; expected only addresses you mean it to reach\n",
		a->file ? a->file : "?", a->vline, a->vcol, c, a->cidr.len, sb->name, e->text,
		e->name, e->rfc);
}

/* cidr entries that open special-purpose ranges (not an error: an
 * internal service may be meant; but a metadata service or the gateway
 * rarely is). One warning per entry and block: the most specific block
 * holding the whole entry, else each outermost block inside it. Ranges
 * the configuration declares routable (dns.routable) are ordinary. */
static void lint_warn_special(const struct policy *p, const struct config *cfg)
{
	for (size_t i = 0; i < policy_sandbox_count(p); i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(p, i);

		for (size_t k = 0; k < sb->n_allow; k++) {
			const struct policy_allow *a = &sb->allow[k];
			const struct pc_special *holds = NULL;
			size_t n = pc_special_count();

			if (a->kind != POLICY_ALLOW_CIDR)
				continue;
			for (size_t j = 0; j < n; j++) {
				const struct pc_special *e = pc_special_at(j);

				if (e->prefix.len <= a->cidr.len &&
				    pc_prefix_contains(&e->prefix, &a->cidr.addr) &&
				    (!holds || e->prefix.len > holds->prefix.len))
					holds = e;
			}
			if (holds) {
				if (!lint_routable(cfg, &a->cidr))
					lint_warn_one(sb, a, holds);
				continue;
			}
			for (size_t j = 0; j < n; j++) {
				const struct pc_special *e = pc_special_at(j);
				bool outer = true;

				if (e->prefix.len <= a->cidr.len ||
				    !pc_prefix_contains(&a->cidr, &e->prefix.addr) ||
				    lint_routable(cfg, &e->prefix))
					continue;
				for (size_t m = 0; m < n && outer; m++) {
					const struct pc_special *o = pc_special_at(m);

					if (m != j && o->prefix.len > a->cidr.len &&
					    o->prefix.len < e->prefix.len &&
					    pc_prefix_contains(&o->prefix, &e->prefix.addr))
						outer = false;
				}
				if (outer)
					lint_warn_one(sb, a, e);
			}
		}
	}
}

/* A configuration and the rules directory it names. */
static void lint_config(struct lint *l, const char *path)
{
	struct config cfg;
	struct policy *p = NULL;
	size_t before = l->errors + l->unreadable;

	if (config_load_report(path, &cfg, NULL, lint_report, l) < 0) {
		if (l->errors + l->unreadable == before)
			l->errors++;
		return;
	}
	printf("%s: ok\n", path);
	before = l->errors + l->unreadable;
	if (policy_load_dir_report(cfg.rules_dir, &cfg, &p, NULL, lint_report, l) < 0) {
		if (l->errors + l->unreadable == before)
			l->errors++;
		return;
	}
	lint_warn_special(p, &cfg);
	policy_summary(cfg.rules_dir, p, true);
	policy_unref(p);
}

/* Rule files hold sandboxes: a list, or a mapping with a sandbox key (or
 * one of its siblings, so that a rule file missing its name is still linted
 * as one), or nothing at all. Any other mapping is a configuration. */
static bool file_is_config(const char *path)
{
	static const char *const rule_keys[] = {"sandbox", "match", "allow", "secrets"};
	struct diag d;
	struct yfile *yf = NULL;
	char *buf = NULL;
	size_t len;
	bool config = false;

	diag_init(&d, NULL, NULL, NULL);
	if (pc_file_read_regular(path, RULES_FILE_MAX, &buf, &len, NULL) < 0 ||
	    yfile_parse(path, buf, len, &yf, &d) < 0)
		goto out; /* the rule loader will say what is wrong */
	for (size_t i = 0; i < yf->n_docs; i++) {
		const struct ynode *r = yf->docs[i].root;

		if (ynode_is_null(r))
			continue;
		config = r->type == YN_MAP;
		for (size_t k = 0; config && k < sizeof(rule_keys) / sizeof(rule_keys[0]); k++)
			if (ymap_get(r, rule_keys[k]))
				config = false;
		break;
	}
out:
	yfile_free(yf);
	free(buf);
	return config;
}

static int cmd_lint(int argc, char **argv, const char *config)
{
	struct lint l = {.what = "policy lint"};
	const char **rules = NULL;
	size_t n = 0;

	if (argc < 1) {
		lint_config(&l, config);
		return lint_exit(&l);
	}
	rules = calloc((size_t)argc, sizeof(*rules));
	if (!rules) {
		pc_cli_error("policy lint", "out of memory");
		return PC_EXIT_ERROR;
	}
	for (int i = 0; i < argc; i++) {
		if (file_is_config(argv[i]))
			lint_config(&l, argv[i]);
		else
			rules[n++] = argv[i];
	}
	if (n) {
		struct policy *p = NULL;
		size_t before = l.errors + l.unreadable;

		/* Rule files named on the command line are checked together (as
		 * one rules directory would be), with built-in defaults. */
		if (policy_load_files_report(rules, n, NULL, &p, NULL, lint_report, &l) == 0) {
			char where[64];

			snprintf(where, sizeof(where), "%zu rule file%s", n, n == 1 ? "" : "s");
			lint_warn_special(p, NULL);
			policy_summary(where, p, false);
			policy_unref(p);
		} else if (l.errors + l.unreadable == before) {
			l.errors++;
		}
	}
	free(rules);
	return lint_exit(&l);
}

static int cmd_hash(int argc, char **argv, const char *config)
{
	struct lint l = {.what = "policy hash"};
	struct config cfg;
	struct policy *p = NULL;
	bool canonical = false;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--canonical") == 0) {
			canonical = true;
		} else {
			pc_cli_error("policy hash",
				     "unexpected argument '%s' (usage: policy hash "
				     "[--canonical])",
				     argv[i]);
			return PC_EXIT_USAGE;
		}
	}
	if (config_load_report(config, &cfg, NULL, lint_report, &l) < 0 ||
	    policy_load_dir_report(cfg.rules_dir, &cfg, &p, NULL, lint_report, &l) < 0) {
		if (!l.errors && !l.unreadable)
			l.errors++;
		return lint_exit(&l);
	}
	if (canonical) {
		size_t len;
		const char *c = policy_canonical(p, &len);

		fwrite(c, 1, len, stdout);
	} else {
		printf("%s\n", policy_hash(p));
	}
	policy_unref(p);
	return fflush(stdout) == 0 ? PC_EXIT_OK : PC_EXIT_ERROR;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: portcullis [-c FILE] policy lint [FILE...]\n"
		   "       portcullis [-c FILE] policy hash [--canonical]\n"
		   "lint: check the configuration and its rules directory (or the given rule\n"
		   "      files and configurations); errors as file:line:col: message,\n"
		   "      warnings (cidr entries opening special-purpose ranges) as\n"
		   "      file:line:col: warning: message\n"
		   "      exit 0 clean, 1 errors, 3 unreadable input\n"
		   "hash: print the sha256 of the policy the configuration points to\n"
		   "      (--canonical: print the canonical form it is computed over)\n");
}

int rules_cli(int argc, char **argv, const char *config)
{
	if (argc < 2) {
		usage(stderr);
		return PC_EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return PC_EXIT_OK;
	}
	if (strcmp(argv[1], "lint") == 0)
		return cmd_lint(argc - 2, argv + 2, config);
	if (strcmp(argv[1], "hash") == 0)
		return cmd_hash(argc - 2, argv + 2, config);
	pc_cli_error("policy", "unknown subcommand '%s' (lint or hash)", argv[1]);
	return PC_EXIT_USAGE;
}
