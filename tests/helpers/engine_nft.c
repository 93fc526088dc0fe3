/* Test helper: the engine's nftables ruleset without the engine.
 *   engine_nft -c CONFIG text|digest   print what portcullisd would install
 *                                        for the current bridge ports
 *   engine_nft -c CONFIG apply|remove  install / remove it (in this netns)
 *   engine_nft probe                    which queue path the kernel takes
 * Options: -q native|compat forces the queue path for text/digest/apply. */
#include "nft/nft_int.h"
#include "engine/engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(const char *what, const struct pc_err *e)
{
	char buf[1024];

	fprintf(stderr, "engine_nft: %s: %s\n", what, pc_err_str(e, buf, sizeof(buf)));
	return 1;
}

int main(int argc, char **argv)
{
	const char *config = NULL, *cmd;
	enum nft_queue_path qp = 0;
	struct config cfg;
	struct policy *pol = NULL;
	struct nft_port *ports = NULL;
	struct nft_ruleset *rs = NULL;
	struct pc_err e = {0};
	size_t nports = 0;
	uint32_t bri = 0;
	int opt, rc = 1;

	while ((opt = getopt(argc, argv, "c:q:")) != -1) {
		if (opt == 'c')
			config = optarg;
		else if (opt == 'q')
			qp = strcmp(optarg, "native") == 0 ? NFT_QUEUE_NATIVE : NFT_QUEUE_COMPAT;
		else
			return 2;
	}
	if (optind >= argc)
		return 2;
	cmd = argv[optind];
	if (strcmp(cmd, "probe") == 0 || !qp) {
		if (nft_probe_queue(&qp, &e) < 0)
			return fail("probe", &e);
		if (strcmp(cmd, "probe") == 0) {
			printf("%s\n", nft_queue_path_name(qp));
			return 0;
		}
	}
	if (strcmp(cmd, "remove") == 0)
		return nft_remove(&e) < 0 ? fail("remove", &e) : 0;
	if (!config)
		return 2;
	if (config_load(config, &cfg, &e) < 0)
		return fail("config", &e);
	if (policy_load_dir(cfg.rules_dir, &cfg, &pol, &e) < 0)
		return fail("policy", &e);
	if (links_bridge_ports(cfg.bridge, &ports, &nports, &bri, NULL, &e) < 0) {
		rc = fail("ports", &e);
		goto out;
	}
	{
		struct nft_ruleset_params p = {&cfg, pol, ports, nports, qp};

		if (nft_ruleset_build(&p, &rs, &e) < 0) {
			rc = fail("build", &e);
			goto out;
		}
	}
	if (strcmp(cmd, "text") == 0) {
		char *t = NULL;

		if (nft_ruleset_text(rs, &t, NULL) == 0) {
			fputs(t, stdout);
			rc = 0;
		}
		free(t);
	} else if (strcmp(cmd, "digest") == 0) {
		char d[80];

		if (nft_ruleset_digest(rs, d, sizeof(d)) == 0) {
			printf("%s\n", d);
			rc = 0;
		}
	} else if (strcmp(cmd, "apply") == 0) {
		rc = nft_apply(rs, &e) < 0 ? fail("apply", &e) : 0;
	} else {
		rc = 2;
	}
out:
	nft_ruleset_free(rs);
	free(ports);
	policy_unref(pol);
	return rc;
}
