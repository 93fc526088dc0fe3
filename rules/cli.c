/* `portcullis policy lint` and `portcullis policy hash`: the admin's way to
 * check rule files and the configuration before a reload, and to see the
 * hash logs and certificates will cite; `policy show`, the policy a hash
 * names, from the store. docs/policy.md documents them. */
#include "rules/rules_int.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lint {
	const char *what; /* "policy lint" */
	size_t errors;
	size_t unreadable;
	size_t warnings;
	bool strict, json;
	/* --json: the diagnostics and the parts checked, as JSON arrays */
	struct pc_buf dbuf, cbuf;
	struct pc_json dj, cj;
};

static void lint_diag_json(struct lint *l, const char *sev, const char *file, unsigned line,
			   unsigned col, const char *msg)
{
	pc_json_obj(&l->dj);
	pc_json_kstr(&l->dj, "severity", sev);
	if (file && file[0]) {
		pc_json_kstr(&l->dj, "file", file);
		pc_json_ku64(&l->dj, "line", line);
		pc_json_ku64(&l->dj, "col", col);
	}
	pc_json_kstr(&l->dj, "message", msg);
	pc_json_obj_end(&l->dj);
}

static void lint_report(const struct pc_err *e, void *arg)
{
	struct lint *l = arg;
	char buf[1024];

	if (e->code == PC_ENOENT || e->code == PC_EIO || e->code == PC_EPERM)
		l->unreadable++;
	else
		l->errors++;
	if (l->json)
		lint_diag_json(l, "error", e->file, e->line, e->col, e->msg);
	else if (e->file[0])
		fprintf(stderr, "%s\n", pc_err_str(e, buf, sizeof(buf)));
	else
		pc_cli_error(l->what, "%s", e->msg);
}

static void lint_warned(void *arg, const char *file, unsigned line, unsigned col, const char *msg)
{
	struct lint *l = arg;

	l->warnings++;
	if (l->json)
		lint_diag_json(l, "warning", file, line, col, msg);
	else
		fprintf(stderr, "%s:%u:%u: warning: %s\n", file, line, col, msg);
}

static int lint_exit(const struct lint *l)
{
	return l->unreadable		  ? PC_EXIT_ERROR
	       : l->errors		  ? PC_EXIT_FAIL
	       : l->strict && l->warnings ? PC_EXIT_FAIL
					  : PC_EXIT_OK;
}

/* One checked part: "PATH: ok" (with the policy's counts), on stdout or as
 * an item of --json's "checked". */
static void lint_ok(struct lint *l, const char *where, const char *kind, const struct policy *p,
		    bool hash)
{
	size_t n = p ? policy_sandbox_count(p) : 0, allow = 0, secrets = 0;

	for (size_t i = 0; i < n; i++) {
		allow += policy_sandbox_at(p, i)->n_allow;
		secrets += policy_sandbox_at(p, i)->n_secrets;
	}
	if (l->json) {
		pc_json_obj(&l->cj);
		pc_json_kstr(&l->cj, "path", where);
		pc_json_kstr(&l->cj, "kind", kind);
		if (p) {
			pc_json_ku64(&l->cj, "sandboxes", n);
			pc_json_ku64(&l->cj, "allow_entries", allow);
			pc_json_ku64(&l->cj, "secrets", secrets);
			if (hash)
				pc_json_kstr(&l->cj, "policy", policy_hash(p));
		}
		pc_json_obj_end(&l->cj);
		return;
	}
	if (!p) {
		printf("%s: ok\n", where);
		return;
	}
	printf("%s: ok: %zu sandbox%s, %zu allow entr%s, %zu secret%s%s%s\n", where, n,
	       n == 1 ? "" : "es", allow, allow == 1 ? "y" : "ies", secrets,
	       secrets == 1 ? "" : "s", hash ? ", policy " : "", hash ? policy_hash(p) : "");
}

/* The warnings of a policy (lint.c), with the configuration it was loaded
 * under (NULL: rule files alone). */
static void lint_warnings(struct lint *l, const struct policy *p, const struct config *cfg,
			  const char *rules_dir)
{
	struct lint_ctx w = {.cfg = cfg, .warn = lint_warned, .arg = l};

	w.psl_file = getenv("PORTCULLIS_PSL_FILE"); /* tests: a list of their own */
	if (cfg)
		lint_config(&w, cfg);
	if (rules_dir)
		lint_rules_dir(&w, rules_dir);
	if (p)
		lint_policy(&w, p);
	lint_ctx_free(&w);
}

/* A configuration and the rules directory it names. */
static void lint_config_file(struct lint *l, const char *path)
{
	struct config cfg;
	struct policy *p = NULL;
	size_t before = l->errors + l->unreadable;

	if (config_load_report(path, &cfg, NULL, lint_report, l) < 0) {
		if (l->errors + l->unreadable == before)
			l->errors++;
		return;
	}
	/* what would stop a daemon: errors, the daemons' -t's own answer */
	before = l->errors;
	(void)config_start_check(&cfg, CFGD_ALL, lint_report, l, NULL);
	if (l->errors == before)
		lint_ok(l, path, "configuration", NULL, false);
	before = l->errors + l->unreadable;
	if (policy_load_dir_report(cfg.rules_dir, &cfg, &p, NULL, lint_report, l) < 0) {
		if (l->errors + l->unreadable == before)
			l->errors++;
		lint_warnings(l, NULL, &cfg, cfg.rules_dir);
		return;
	}
	lint_warnings(l, p, &cfg, cfg.rules_dir);
	lint_ok(l, cfg.rules_dir, "rules", p, true);
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

/* --json: one object on stdout, whatever was found. */
static int lint_json_print(struct lint *l)
{
	struct pc_buf b = {0};
	struct pc_json j;
	int rc = lint_exit(l);

	pc_json_arr_end(&l->dj);
	pc_json_arr_end(&l->cj);
	pc_json_init(&j, &b);
	pc_json_obj(&j);
	pc_json_key(&j, "ok");
	pc_json_bool(&j, rc == PC_EXIT_OK);
	pc_json_key(&j, "strict");
	pc_json_bool(&j, l->strict);
	pc_json_ku64(&j, "errors", l->errors + l->unreadable);
	pc_json_ku64(&j, "warnings", l->warnings);
	pc_json_key(&j, "checked");
	pc_json_raw(&j, pc_buf_str(&l->cbuf));
	pc_json_key(&j, "diagnostics");
	pc_json_raw(&j, pc_buf_str(&l->dbuf));
	pc_json_obj_end(&j);
	if (b.err || l->dbuf.err || l->cbuf.err) {
		pc_cli_error(l->what, "out of memory");
		rc = PC_EXIT_ERROR;
	} else {
		printf("%s\n", pc_buf_str(&b));
	}
	pc_buf_free(&b);
	pc_buf_free(&l->dbuf);
	pc_buf_free(&l->cbuf);
	return rc;
}

static int lint_finish(struct lint *l)
{
	if (l->json)
		return lint_json_print(l);
	pc_buf_free(&l->dbuf);
	pc_buf_free(&l->cbuf);
	if (l->strict && l->warnings && !l->errors && !l->unreadable)
		pc_cli_error(l->what, "%zu warning%s, errors under --strict", l->warnings,
			     l->warnings == 1 ? "" : "s");
	return lint_exit(l);
}

static int cmd_lint(int argc, char **argv, const char *config)
{
	struct lint l = {.what = "policy lint"};
	const char **rules = NULL;
	size_t n = 0, nfiles = 0;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--strict") == 0)
			l.strict = true;
		else if (strcmp(argv[i], "--json") == 0)
			l.json = true;
		else
			nfiles++;
	}
	pc_json_init(&l.dj, &l.dbuf);
	pc_json_arr(&l.dj);
	pc_json_init(&l.cj, &l.cbuf);
	pc_json_arr(&l.cj);
	if (!nfiles) {
		lint_config_file(&l, config);
		return lint_finish(&l);
	}
	rules = calloc((size_t)argc, sizeof(*rules));
	if (!rules) {
		pc_cli_error("policy lint", "out of memory");
		pc_buf_free(&l.dbuf);
		pc_buf_free(&l.cbuf);
		return PC_EXIT_ERROR;
	}
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--strict") == 0 || strcmp(argv[i], "--json") == 0)
			continue;
		if (file_is_config(argv[i]))
			lint_config_file(&l, argv[i]);
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
			lint_warnings(&l, p, NULL, NULL);
			lint_ok(&l, where, "rule files", p, false);
			policy_unref(p);
		} else if (l.errors + l.unreadable == before) {
			l.errors++;
		}
	}
	free(rules);
	return lint_finish(&l);
}

static int cmd_hash(int argc, char **argv, const char *config)
{
	struct lint l = {.what = "policy hash"};
	struct config cfg;
	struct policy *p = NULL;
	bool canonical = false, json = false;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--canonical") == 0) {
			canonical = true;
		} else if (strcmp(argv[i], "--json") == 0) {
			json = true;
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
	if (json) {
		printf("{\"policy\":\"%s\",\"sandboxes\":%zu}\n", policy_hash(p),
		       policy_sandbox_count(p));
	} else if (canonical) {
		size_t len;
		const char *c = policy_canonical(p, &len);

		fwrite(c, 1, len, stdout);
	} else {
		printf("%s\n", policy_hash(p));
	}
	policy_unref(p);
	return fflush(stdout) == 0 ? PC_EXIT_OK : PC_EXIT_ERROR;
}

/* `policy show [--json] [--dir DIR] HASH`: the stored policy, after
 * checking its bytes against its name (polstore_get). */
static int cmd_show(int argc, char **argv, const char *config)
{
	static const struct option o[] = {{"json", no_argument, NULL, 'j'},
					  {"dir", required_argument, NULL, 'd'},
					  {NULL, 0, NULL, 0}};
	char dir[PC_PATH_MAX + 16], file[PC_PATH_MAX + 96], name[POLSTORE_NAME_LEN + 1];
	const char *dirarg = NULL;
	struct pc_err err = {0};
	struct config cfg;
	bool json = false;
	char *text = NULL;
	size_t len;
	int opt, rc;

	/* argv[0] is "show" for getopt; the table checked the options */
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc + 1, argv - 1, "", o, NULL)) != -1) {
		if (opt == 'j') {
			json = true;
		} else if (opt == 'd') {
			dirarg = optarg;
		} else {
			pc_cli_error("policy show", "usage: policy show [--json] [--dir DIR] HASH");
			return PC_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		pc_cli_error("policy show", "usage: policy show [--json] [--dir DIR] HASH");
		return PC_EXIT_USAGE;
	}
	if (polstore_name(argv[optind - 1], name, &err) < 0) {
		pc_cli_error("policy show", "%s", err.msg);
		return PC_EXIT_USAGE;
	}
	if (dirarg) {
		if (pc_strlcpy(dir, dirarg, sizeof(dir)) >= sizeof(dir)) {
			pc_cli_error("policy show", "--dir: path too long");
			return PC_EXIT_USAGE;
		}
	} else if (config_load(config, &cfg, &err) < 0 ||
		   polstore_dir(&cfg, dir, sizeof(dir), &err) < 0) {
		pc_cli_error("policy show", "%s", err.msg);
		return pc_exit_for_check(err.code);
	}
	rc = polstore_get(dir, name, &text, &len, &err);
	if (rc < 0) {
		pc_cli_error("policy show", "%s", err.msg);
		/* a missing object answers 1, as for the other commands */
		return rc == PC_ETAMPER || rc == PC_ENOENT ? PC_EXIT_FAIL : PC_EXIT_ERROR;
	}
	/* A canonical form is printable ASCII (docs/policy.md): anything else
	 * was not written by portcullis, whatever its name, and must not reach
	 * a terminal. */
	for (size_t i = 0; i < len; i++) {
		if (text[i] < 0x20 || text[i] > 0x7e) {
			pc_cli_error("policy show",
				     "%s/%s is not a policy's canonical form (byte %zu is not "
				     "printable ASCII)",
				     dir, name, i);
			free(text);
			return PC_EXIT_FAIL;
		}
	}
	snprintf(file, sizeof(file), "%s/%s", dir, name);
	if (json) {
		struct pc_buf b;
		struct pc_json j;

		pc_buf_init(&b, 0, 0);
		pc_json_init(&j, &b);
		pc_json_obj(&j);
		pc_json_kstr(&j, "hash", name);
		pc_json_kstr(&j, "file", file);
		pc_json_key(&j, "canonical");
		pc_json_strn(&j, text, len);
		pc_json_obj_end(&j);
		rc = b.err ? PC_ENOMEM : 0;
		if (rc == 0)
			printf("%.*s\n", (int)b.len, b.p);
		pc_buf_free(&b);
		if (rc < 0) {
			free(text);
			pc_cli_error("policy show", "out of memory");
			return PC_EXIT_ERROR;
		}
	} else {
		fwrite(text, 1, len, stdout);
	}
	free(text);
	return fflush(stdout) == 0 ? PC_EXIT_OK : PC_EXIT_ERROR;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: portcullis [-c FILE] policy lint [--strict] [--json] [FILE...]\n"
		"       portcullis [-c FILE] policy hash [--canonical] [--json]\n"
		"       portcullis [-c FILE] policy test SANDBOX HOST|IP PORT [--proto tcp|udp]\n"
		"       portcullis [-c FILE] policy show [--json] [--dir DIR] HASH\n"
		"lint: check the configuration and its rules directory (or the given rule\n"
		"      files and configurations); errors as file:line:col: message,\n"
		"      warnings as file:line:col: warning: message (docs/policy.md)\n"
		"      exit 0 clean, 1 errors (or warnings with --strict), 3 unreadable input\n"
		"hash: print the sha256 of the policy the configuration points to\n"
		"      (--canonical: print the canonical form it is computed over)\n"
		"show: print a stored policy (the canonical form a hash was computed\n"
		"      over), after checking its hash; exit 1 if it does not match\n");
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
	if (strcmp(argv[1], "show") == 0)
		return cmd_show(argc - 2, argv + 2, config);
	pc_cli_error("policy", "unknown subcommand '%s' (lint, hash or show)", argv[1]);
	return PC_EXIT_USAGE;
}
