/* checker: `portcullis check` and `portcullis cert ...` — the command-line
 * glue around checker_run and the certificate functions. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nft/nft.h"
#include "checker/checker_int.h"
#include "rules/rules.h"

static int load_config(const char *config, struct config *cfg)
{
	struct pc_err err = {0};
	char eb[1024];

	if (config_load(config, cfg, &err) < 0) {
		pc_cli_error("configuration", "%s", pc_err_str(&err, eb, sizeof(eb)));
		return PC_EXIT_ERROR;
	}
	return 0;
}

/* The hash of the policy the engine enforces, from its status. Fails when
 * there is no engine to ask: callers then have nothing to compare. */
int ck_engine_policy_hash(const struct config *cfg, char *out, size_t len)
{
	struct pc_err err = {0};
	struct pc_eng_reply r;
	int rc = PC_EIO;

	if (pc_engine_call(cfg->run_dir, PC_ENG_STATUS, 5000, &r, &err) < 0)
		return PC_EIO;
	if (r.type == PC_ENG_STATUS_REPLY && strlen(r.policy) < len) {
		memcpy(out, r.policy, strlen(r.policy) + 1);
		rc = 0;
	}
	pc_eng_reply_free(&r);
	return rc;
}

/* The check reads the policy in rules.d; the engine enforces the one it
 * loaded. When they differ (rules.d edited, not reloaded) the findings
 * compare the live tables with the files: say so on stderr, naming both
 * hashes (docs/checker.md). Silent when either is unknown (no engine).
 * Returns false when the engine was asked and did not answer. */
static bool policy_drift_warn(const struct config *cfg)
{
	struct policy *pol = NULL;
	struct pc_err err = {0};
	char loaded[128];
	bool answered = true;

	if (policy_load_dir(cfg->rules_dir, cfg, &pol, &err) < 0)
		goto out;
	if (ck_engine_policy_hash(cfg, loaded, sizeof(loaded)) < 0) {
		answered = false;
		goto out;
	}
	if (strcmp(loaded, policy_hash(pol)) != 0)
		fprintf(stderr,
			"portcullis: warning: the policy in %s (%s) is not the one the engine "
			"enforces (%s): this check compared the live tables with %s; "
			"`portcullis reload` puts it in force\n",
			cfg->rules_dir, policy_hash(pol), loaded, cfg->rules_dir);
out:
	policy_unref(pol);
	return answered;
}

/* The engine's cut-off (docs/engine.md, "Cut off until proven") ends only
 * with a check of the engine's own. It checks again on every nftables,
 * routing and link event; a change it is not told of (a sysctl, a tc
 * filter) needs someone to ask: a proving check run by root asks it, and
 * anything else says how the cut-off ends. Silent when there is no
 * engine or it has not cut the sandboxes off. */
static void cutoff_follow(const struct config *cfg, bool proven)
{
	struct pc_err err = {0};
	struct pc_eng_reply r;
	bool cut, called;

	if (pc_engine_call(cfg->run_dir, PC_ENG_STATUS, 5000, &r, &err) < 0)
		return;
	cut = r.type == PC_ENG_STATUS_REPLY && r.json &&
	      strstr(r.json, "\"cutoff\":{\"active\":true") != NULL;
	pc_eng_reply_free(&r);
	if (!cut)
		return;
	if (!proven) {
		fprintf(stderr,
			"portcullis: the engine has the sandboxes cut off: they stay so until a "
			"check proves the guard; remove what is named above (the engine checks "
			"again at every nftables, routing and link change; after a change it is "
			"not told of, a sysctl or tc, run `portcullis check` again as root)\n");
		return;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "portcullis: proven, but the engine has the sandboxes cut off: "
				"run `portcullis check` as root (it asks the engine to check "
				"again), or `portcullis reload`\n");
		return;
	}
	memset(&r, 0, sizeof(r));
	called = pc_engine_call(cfg->run_dir, PC_ENG_RECHECK, 5000, &r, &err) == 0;
	if (!called || r.type != PC_ENG_RECHECK_REPLY) {
		fprintf(stderr,
			"portcullis: proven, but the engine has the sandboxes cut off and did "
			"not take the request to check again (%s): `portcullis reload` runs its "
			"check\n",
			!called				      ? err.msg
			: r.type == PC_ENG_ERROR && r.message ? r.message
							      : "an unexpected reply");
		if (called)
			pc_eng_reply_free(&r);
		return;
	}
	pc_eng_reply_free(&r);
	fprintf(stderr, "portcullis: proven; the engine had the sandboxes cut off: it checks "
			"again now, and its check lets them out when it proves "
			"(`portcullis status`)\n");
}

static int cmd_check(int argc, char **argv, const char *config)
{
	static const struct option lo[] = {{"bridge", required_argument, NULL, 'b'},
					   {"json", no_argument, NULL, 'j'},
					   {"verbose", no_argument, NULL, 'v'},
					   {NULL, 0, NULL, 0}};
	const char *bridge = NULL;
	bool json = false, verbose = false;
	struct config cfg;
	struct checker_result *res = NULL;
	struct pc_err err = {0};
	char eb[1024], *out;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "b:jv", lo, NULL)) != -1) {
		switch (opt) {
		case 'b':
			bridge = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'v':
			verbose = true;
			break;
		default:
			fprintf(stderr,
				"usage: portcullis check [--bridge BR] [--json] [--verbose]\n");
			return PC_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "usage: portcullis check [--bridge BR] [--json] [--verbose]\n");
		return PC_EXIT_USAGE;
	}
	rc = load_config(config, &cfg);
	if (rc)
		return rc;
	if (checker_run(&cfg, NULL, bridge, &res, &err) < 0) {
		pc_cli_error("check", "%s", pc_err_str(&err, eb, sizeof(eb)));
		return PC_EXIT_ERROR;
	}
	out = json ? checker_result_json(res) : checker_result_text(res, verbose);
	if (!out) {
		pc_cli_error("check", "out of memory");
		checker_result_free(res);
		return PC_EXIT_ERROR;
	}
	fputs(out, stdout);
	free(out);
	fflush(stdout);
	if (policy_drift_warn(&cfg)) /* no engine (or a stopped one): no cut-off to follow */
		cutoff_follow(&cfg, res->status == CHECKER_PROVEN);
	rc = res->status == CHECKER_PROVEN ? PC_EXIT_OK : PC_EXIT_FAIL;
	checker_result_free(res);
	return rc;
}

static void usage_cert(FILE *f)
{
	fprintf(f, "usage: portcullis cert SANDBOX [-o FILE] [--html|--md] [--bridge BR]\n"
		   "       portcullis cert verify FILE [--key PUB] [--live] [--bridge BR]\n"
		   "       portcullis cert render FILE [--html|--md] [-o OUT]\n"
		   "       portcullis cert keygen | pubkey [-o FILE]\n");
}

int checker_cli(int argc, char **argv, const char *config)
{
	struct config cfg;
	int rc;

	if (strcmp(argv[0], "check") == 0)
		return cmd_check(argc, argv, config);
	if (argc < 2) {
		usage_cert(stderr);
		return PC_EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage_cert(stdout);
		return PC_EXIT_OK;
	}
	if (strcmp(argv[1], "verify") == 0 || strcmp(argv[1], "render") == 0) {
		/* verify without --live needs no configuration */
		return cert_cli_sub(argc - 1, argv + 1, config);
	}
	rc = load_config(config, &cfg);
	if (rc)
		return rc;
	if (strcmp(argv[1], "keygen") == 0 || strcmp(argv[1], "pubkey") == 0)
		return cert_cli_key(argc - 1, argv + 1, &cfg);
	return cert_cli_issue(argc, argv, &cfg);
}
