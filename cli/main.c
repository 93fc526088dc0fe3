/* portcullis: the administrator's command. A dispatch table of subcommands;
 * each module implements its own (declared in its header) and receives argv
 * from the subcommand name on, plus the configuration path. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "checker/checker.h"
#include "common/pc.h"
#include "logd/logd.h"
#include "rules/rules.h"
#include "vault/vault.h"

struct cli_cmd {
	const char *name;
	int (*run)(int argc, char **argv, const char *config);
	const char *usage;
};

/* Modules add their line here as their commands land. */
static const struct cli_cmd cli_cmds[] = {
    {"policy", rules_cli, "policy lint [FILE...] | policy hash"},
    {"secrets", vault_cli,
     "secrets set [--keep-placeholder] NAME < VALUE | secrets list [--json] | "
     "secrets placeholder NAME | secrets rm NAME"},
    {"ca", vault_cli, "ca init [--force]"},
    {"log", logd_cli, "log verify|show|prove|keygen ..."},
    {"check", checker_cli, "check [--bridge BR] [--json] [--verbose]"},
    {"cert", checker_cli,
     "cert SANDBOX [-o FILE] [--html|--md] | cert verify FILE [--key PUB] [--live] | "
     "cert render FILE | cert keygen | cert pubkey"},
    {"config", config_cli, "config show [--json]"},
    {"status", cli_control, "status [--json]"},
    {"reload", cli_reload, "reload [--engine] [--vault] [--json]"},
    {"metrics", cli_control, "metrics"},
    {"sandbox", sandbox_cli,
     "sandbox run [--name N] --allow HOST[:PORT]... [--secret NAME...] -- CMD... | "
     "sandbox attach --port TAP --name N ..."},
    {NULL, NULL, NULL},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: portcullis [-c FILE] COMMAND [ARGS...]\n\ncommands:\n");
	for (const struct cli_cmd *c = cli_cmds; c->name; c++)
		fprintf(f, "  %s\n", c->usage);
	fprintf(f, "\n-c FILE  configuration (default /etc/portcullis/portcullis.yaml)\n"
		   "exit status: 0 ok, 1 negative result, 2 usage, 3 error (portcullis(8))\n");
}

int main(int argc, char **argv)
{
	const char *config = "/etc/portcullis/portcullis.yaml";
	int opt;

	pc_log_init("portcullis", PC_LOG_NOTICE);
	/* '+': stop at the subcommand, whose options are its own. */
	while ((opt = getopt(argc, argv, "+c:hV")) != -1) {
		switch (opt) {
		case 'c':
			config = optarg;
			break;
		case 'h':
			usage(stdout);
			return PC_EXIT_OK;
		case 'V':
			printf("portcullis %s\n", PC_VERSION);
			return PC_EXIT_OK;
		default:
			usage(stderr);
			return PC_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return PC_EXIT_USAGE;
	}
	for (const struct cli_cmd *c = cli_cmds; c->name; c++) {
		if (strcmp(c->name, argv[optind]) == 0) {
			int sub = optind;

			optind = 0; /* glibc: re-initialise getopt for the subcommand */
			return c->run(argc - sub, argv + sub, config);
		}
	}
	pc_cli_error(argv[optind], "unknown command (see portcullis -h)");
	return PC_EXIT_USAGE;
}
