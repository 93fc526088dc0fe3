/* portcullis: the administrator's command. Dispatches through the one
 * table of commands and subcommands (cli/cmds.c): each module implements
 * its own (declared in its header) and receives argv from the command name
 * on, plus the configuration path. --help and --version are answered here
 * for every entry, and a command line the entry does not accept is refused
 * here with its usage, so every command behaves the same way. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_int.h"
#include "common/pc.h"

static int version(void)
{
	printf("portcullis %s\n", PC_VERSION);
	return PC_EXIT_OK;
}

/* --commands: every entry, "COMMAND [SUBCOMMAND]" a line (for scripts and
 * the CLI test, which walks them all). */
static int commands(void)
{
	for (const struct cli_cmd *c = cli_cmds; c->name; c++)
		printf("%s%s%s\n", c->name, c->sub ? " " : "", c->sub ? c->sub : "");
	return PC_EXIT_OK;
}

static bool is_help(const char *a)
{
	return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* The entry for argv (argv[0] is the command name); *skip: how many of
 * argv name it (1 or 2). NULL: no such command or subcommand. */
static const struct cli_cmd *cmd_find(int argc, char **argv, int *skip)
{
	const struct cli_cmd *bare = NULL;

	for (const struct cli_cmd *c = cli_cmds; c->name; c++) {
		if (strcmp(c->name, argv[0]) != 0)
			continue;
		if (!c->sub)
			bare = c;
		else if (argc > 1 && strcmp(c->sub, argv[1]) == 0) {
			*skip = 2;
			return c;
		}
	}
	*skip = 1;
	return bare;
}

static bool cmd_exists(const char *name)
{
	for (const struct cli_cmd *c = cli_cmds; c->name; c++)
		if (strcmp(c->name, name) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"help", no_argument, NULL, 'h'},
					   {"version", no_argument, NULL, 'V'},
					   {"commands", no_argument, NULL, 'L'},
					   {NULL, 0, NULL, 0}};
	const char *config = "/etc/portcullis/portcullis.yaml";
	const struct cli_cmd *c;
	char what[160], why[200];
	int opt, skip, n, rc;
	char **rest;

	pc_log_init("portcullis", PC_LOG_NOTICE);
	/* An admin adds -c at the end of the line recalled from history as
	 * often as at the front: the configuration is taken from anywhere. */
	n = argc - 1;
	if (cli_globals_take(&n, argv + 1, &config, why, sizeof(why)) < 0) {
		pc_cli_error("command line", "%s", why);
		cli_usage(stderr);
		return PC_EXIT_USAGE;
	}
	argc = n + 1;
	/* '+': stop at the command, whose options are its own. */
	while ((opt = getopt_long(argc, argv, "+c:hV", lo, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config = optarg;
			break;
		case 'h':
			cli_usage(stdout);
			return PC_EXIT_OK;
		case 'V':
			return version();
		case 'L':
			return commands();
		default:
			cli_usage(stderr);
			return PC_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		cli_usage(stderr);
		return PC_EXIT_USAGE;
	}
	rest = argv + optind;
	n = argc - optind;
	if (!cmd_exists(rest[0])) {
		pc_cli_error(rest[0], "unknown command (see portcullis --help)");
		return PC_EXIT_USAGE;
	}
	c = cmd_find(n, rest, &skip);
	if (!c) {
		/* a command of subcommands, without a known one */
		if (n > 1 && is_help(rest[1])) {
			cli_cmd_help(stdout, rest[0], NULL);
			return PC_EXIT_OK;
		}
		if (n > 1 && strcmp(rest[1], "--version") == 0)
			return version();
		if (n > 1)
			pc_cli_error(rest[0], "unknown subcommand '%s'", rest[1]);
		else
			pc_cli_error(rest[0], "missing subcommand");
		cli_cmd_usage_all(stderr, rest[0]);
		return PC_EXIT_USAGE;
	}
	snprintf(what, sizeof(what), "%s%s%s", c->name, c->sub ? " " : "", c->sub ? c->sub : "");
	for (int i = skip; i < n; i++) {
		if (strcmp(rest[i], "--") == 0 || (c->opts[0] == '+' && rest[i][0] != '-'))
			break; /* the sandbox's command: its options are its own */
		if (is_help(rest[i])) {
			cli_cmd_help(stdout, c->name, c->sub);
			return PC_EXIT_OK;
		}
		if (strcmp(rest[i], "--version") == 0)
			return version();
	}
	if (cli_cmd_check_args(c, n - skip, rest + skip, why, sizeof(why)) < 0) {
		pc_cli_error(what, "%s", why);
		cli_cmd_usage(stderr, c);
		return PC_EXIT_USAGE;
	}
	optind = 0; /* glibc: re-initialise getopt for the command */
	rc = c->run(n, rest, config);
	/* A usage error the command found itself (a value it cannot take):
	 * its usage too, as for those refused above. Not for the sandbox
	 * launcher, whose status is then its command's. */
	if (rc == PC_EXIT_USAGE && c->opts[0] != '+')
		cli_cmd_usage(stderr, c);
	return rc;
}
