/* portcullisd: the verdict engine. Privileged setup as root, then only
 * CAP_NET_ADMIN as engine.user (docs/engine.md, "Privileges"). */
#include "engine/engine_int.h"

#include <getopt.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: portcullisd [-c FILE] [-t] [-v]\n"
	       "  -c FILE, --config FILE  configuration (default /etc/portcullis/portcullis.yaml)\n"
	       "  -t       check the configuration and policy, then exit\n"
	       "  -v       log every verdict (debug)\n"
	       "  -h, --help     this text\n"
	       "  -V, --version  print the version\n");
}

/* -t: everything that does not need the kernel. 0 or a PC_E* code. */
static int check_only(const char *config)
{
	struct config cfg;
	struct policy *pol = NULL;
	struct nft_ruleset *rs = NULL;
	struct pc_err err = {0};
	char ebuf[1024], digest[80];
	int rc;

	rc = config_load(config, &cfg, &err);
	if (rc == 0)
		rc = engine_config_valid(&cfg, &err);
	if (rc == 0)
		rc = policy_load_dir(cfg.rules_dir, &cfg, &pol, &err);
	if (rc == 0) {
		struct nft_ruleset_params p = {&cfg, pol, NULL, 0, NFT_QUEUE_COMPAT};

		rc = nft_ruleset_build(&p, &rs, &err);
	}
	if (rc == 0)
		rc = nft_ruleset_digest(rs, digest, sizeof(digest));
	if (rc) {
		pc_log(PC_LOG_ERR, "%s", pc_err_str(&err, ebuf, sizeof(ebuf)));
		policy_unref(pol);
		return rc;
	}
	printf("configuration %s ok; policy %s (%zu sandbox%s)\n", config, policy_hash(pol),
	       policy_sandbox_count(pol), policy_sandbox_count(pol) == 1 ? "" : "es");
	nft_ruleset_free(rs);
	policy_unref(pol);
	return 0;
}

int main(int argc, char **argv)
{
	const char *config = "/etc/portcullis/portcullis.yaml";
	static struct engine e; /* large; lives for the whole process */
	struct pc_err err = {0};
	char ebuf[1024];
	bool test = false, verbose = false;
	int opt, rc; /* 0 or a PC_E* code; pc_daemon_exit maps it */

	static const struct option lopts[] = {{"help", no_argument, NULL, 'h'},
					      {"config", required_argument, NULL, 'c'},
					      {"version", no_argument, NULL, 'V'},
					      {NULL, 0, NULL, 0}};

	while ((opt = getopt_long(argc, argv, "c:tvhV", lopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config = optarg;
			break;
		case 't':
			test = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return PC_EXIT_OK;
		case 'V':
			printf("portcullisd %s\n", PC_VERSION);
			return PC_EXIT_OK;
		default:
			usage(stderr);
			return PC_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return PC_EXIT_USAGE;
	}
	pc_log_init("portcullisd", verbose ? PC_LOG_DEBUG : PC_LOG_INFO);
	if (test)
		return pc_daemon_exit(check_only(config), true);
	if (geteuid() != 0) {
		pc_log(PC_LOG_ERR, "must start as root (it drops to engine.user after setup)");
		return pc_daemon_exit(PC_EPERM, false);
	}
	engine_init(&e);
	e.verbose = verbose;
	rc = control_open(&e, &err); /* signals blocked before anything else */
	if (rc == 0)
		rc = engine_setup(&e, config, &err);
	/* The containment check reads more than CAP_NET_ADMIN allows: its
	 * helper is forked while still root (docs/engine.md). */
	if (rc == 0)
		rc = checkrun_start(&e, &err);
	/* Keep CAP_NET_ADMIN only: nf_tables (reload, port set), ctnetlink
	 * (cutting flows) and nfnetlink_queue verdicts all require it. */
	if (rc == 0)
		rc = pc_privdrop(e.cfg.engine.user, 1ULL << CAP_NET_ADMIN, &err);
	if (rc == 0)
		rc = engine_start_threads(&e, &err);
	if (rc) {
		pc_log(PC_LOG_ERR, "%s", pc_err_str(&err, ebuf, sizeof(ebuf)));
		engine_shutdown(&e);
		return pc_daemon_exit(rc, false);
	}
	pc_log(PC_LOG_NOTICE, "serving queues %u-%u as %s", e.cfg.queue.base,
	       e.cfg.queue.base + e.cfg.queue.count - 1, e.cfg.engine.user);
	pc_sd_notify("READY=1", NULL);
	checkrun_request(&e, "start");
	rc = control_loop(&e);
	pc_sd_notify("STOPPING=1", NULL);
	engine_shutdown(&e);
	return pc_daemon_exit(rc, false);
}
