/* The one list of every `portcullis` command and subcommand: its usage,
 * the options and number of arguments it takes, and the function that runs
 * it. cli/main.c dispatches through it, answers --help and --version for
 * every entry, and refuses a command line the entry does not accept (exit
 * 2 with that entry's usage) before the module's own parser sees it; the
 * CLI test walks it (`portcullis --commands`) and tests/static/cli_commands.sh
 * compares it with the modules' own dispatchers. */
#include "cli/cli_int.h"
#include "checker/checker.h"
#include "logd/logd.h"
#include "rules/rules.h"
#include "vault/vault.h"

#include <stdio.h>
#include <string.h>

/* opts: the options an entry accepts, space-separated; a trailing '='
 * takes a value (as `--key PUB` or `--key=PUB`). A leading "+" (as for
 * getopt): the first argument that is not an option, or "--", starts a
 * command whose arguments are its own (sandbox). */
const struct cli_cmd cli_cmds[] = {
    {"policy", "lint", "[--strict] [--json] [FILE...]", "--strict --json", 0, -1, rules_cli,
     "check the configuration and its rules (or FILEs): errors and warnings as "
     "file:line:col"},
    {"policy", "hash", "[--canonical] [--json]", "--canonical --json", 0, 0, rules_cli,
     "the sha256 of the policy logs and certificates cite"},
    {"policy", "show", "[--json] [--dir DIR] HASH", "--json --dir=", 1, 1, rules_cli,
     "a policy in force once, by its hash, from the store (checked against it)"},
    {"policy", "test", "SANDBOX HOST|IP PORT [--proto tcp|udp] [--address ADDR] [--json]",
     "--proto= --address= --json", 3, 3, cli_policy_test,
     "would the policy allow this connection (or DNS query, PORT 53), by which rule"},
    {"secrets", "set", "[--keep-placeholder] [--json] NAME < VALUE", "--keep-placeholder -k --json",
     1, 1, vault_cli, "seal a secret's value read from stdin; prints its placeholder"},
    {"secrets", "list", "[--json]", "--json", 0, 0, vault_cli,
     "stored secrets, their placeholders and bindings"},
    {"secrets", "placeholder", "[--json] NAME", "--json", 1, 1, vault_cli,
     "the placeholder of a stored secret"},
    {"secrets", "rm", "NAME", "", 1, 1, vault_cli, "delete a stored secret"},
    {"ca", "init", "[--force] [--json]", "--force --json", 0, 0, vault_cli,
     "create the vault's CA"},
    {"log", "verify",
     "[FILE...] [--key PUB] [--checkpoint NOTE] [--against NOTE]... [--witness-key PUB] "
     "[--allow-unsigned] [--json] | --proof PROOF [--key PUB] [--json]",
     "--key= --checkpoint= --proof= --against= --witness-key= --allow-unsigned --json -k= -C= -p=",
     0, -1, logd_cli, "check the signed log's integrity"},
    {"log", "show",
     "[FILE] [--checkpoints] [--follow] [--sandbox NAME] [--action ACTION] "
     "[--outcome allowed|refused] [--since TIME] [--json]",
     "--checkpoints -a --follow -f --sandbox= --action= --outcome= --since= --json", 0, 1, logd_cli,
     "the log, one record a line"},
    {"log", "prove", "SEQ [--file FILE] [--key PUB] [-o OUT] | --consistency OLD NEW [...]",
     "--consistency --file= --key= -o= -f= -k=", 1, 2, logd_cli,
     "an inclusion proof of one record, or a consistency proof between two checkpoints"},
    {"log", "status", "[--json]", "--json", 0, 0, logd_cli,
     "logd's state: the log, its last checkpoint, the witness"},
    {"log", "audit", "[FILE...] [--policies DIR] [--from SEQ] [--json]",
     "--policies= --from= --json", 0, -1, cli_log_audit,
     "verify the log, then check every verdict in it against the spec's model under the "
     "policy it names"},
    {"log", "keygen", "[--name NAME] [--force]", "--name= --force -n= -f", 0, 0, logd_cli,
     "logd's signing key"},
    {"check", NULL, "[--bridge BR] [--json] [--verbose]", "--bridge= --json --verbose -b= -j -v", 0,
     0, checker_cli, "prove that the guarded path is the only way out"},
    {"cert", NULL, "SANDBOX [-o FILE] [--html|--md] [--bridge BR]",
     "-o= --output= --html --md --bridge= -b=", 1, 1, checker_cli,
     "check, then issue a signed certificate for a sandbox"},
    {"cert", "verify", "FILE [--key PUB] [--live] [--bridge BR] [--json]",
     "--key= --live --bridge= --json -k= -b=", 1, 1, checker_cli,
     "verify a certificate's signature (--live: and the box now)"},
    {"cert", "render", "FILE [--html|--md] [-o OUT]", "--html --md -o= --output=", 1, 1,
     checker_cli, "a certificate as Markdown or HTML"},
    {"cert", "keygen", "[-o FILE]", "-o= --output=", 0, 0, checker_cli,
     "the appliance's certificate signing key"},
    {"cert", "pubkey", "[-o FILE]", "-o= --output=", 0, 0, checker_cli,
     "print the certificate signing public key"},
    {"config", "show", "[--json]", "--json", 0, 0, config_cli,
     "the effective configuration: every key, its value and where it came from"},
    {"status", NULL, "[--json]", "--json", 0, 0, cli_control, "what the engine runs"},
    {"reload", NULL, "[--engine] [--vault] [--json]", "--engine --vault --json", 0, 0, cli_reload,
     "load the policy into the running engine and vault, and say whether each took it"},
    {"metrics", NULL, "", "", 0, 0, cli_control, "every daemon's metrics (Prometheus text format)"},
    {"top", NULL, "[--once] [--json]", "--once --json", 0, 0, cli_top,
     "a live view: verdicts per sandbox per second, refused destinations, queue and log health"},
    {"sandbox", "run",
     "[--name N] --allow HOST[:PORT]... [--allow-cidr CIDR:PORT[/PROTO]...] "
     "[--secret NAME[@HOST[:PORT]]...] [--user U] [--env NAME[=VALUE]...] [--cert FILE] "
     "[--quiet] [--vm [--kernel K] [--initrd I] [--mem MiB] [--cpus N] [--accel auto|kvm|tcg]] "
     "-- CMD...",
     "+ --name= --allow= --allow-cidr= --secret= --user= --env= --cert= --quiet -q --vm "
     "--kernel= --initrd= --mem= --cpus= --accel=",
     0, -1, sandbox_cli, "launch a command in a new guarded sandbox"},
    {"sandbox", "attach",
     "--port TAP --name N [--mac MAC] [--address ADDR...] --allow ... [--secret ...] "
     "[--user U] [-- CMD...]",
     "+ --port= --name= --mac= --address= --allow= --allow-cidr= --secret= --user= --env= "
     "--cert= --quiet -q",
     0, -1, sandbox_cli, "guard a VM's tap as a sandbox"},
    {"help", NULL, "[COMMAND [SUBCOMMAND]]", "", 0, 2, cli_help,
     "the commands, or one command's usage (as COMMAND --help)"},
    {NULL, NULL, NULL, NULL, 0, 0, NULL, NULL},
};

void cli_cmd_usage(FILE *f, const struct cli_cmd *c)
{
	fprintf(f, "usage: portcullis [-c FILE] %s%s%s%s%s\n", c->name, c->sub ? " " : "",
		c->sub ? c->sub : "", c->args[0] ? " " : "", c->args);
}

static bool has_entry(const char *name);

void cli_usage(FILE *f)
{
	const char *last = "";

	fprintf(f, "usage: portcullis [-c FILE] COMMAND [ARGS...]\n"
		   "       portcullis help [COMMAND [SUBCOMMAND]]\n"
		   "       portcullis --help | --version | --commands\n\ncommands:\n");
	for (const struct cli_cmd *c = cli_cmds; c->name; c++) {
		if (strcmp(c->name, last) != 0)
			fprintf(f, "  %s\n", c->name);
		last = c->name;
		fprintf(f, "    %s%s%s  %s\n", c->sub ? c->sub : "",
			c->sub && c->args[0] ? " " : "", c->args, c->what);
	}
	fprintf(f, "\n-c FILE, --config FILE  configuration (default "
		   "/etc/portcullis/portcullis.yaml), anywhere on the line\n"
		   "COMMAND [SUBCOMMAND] --help: its usage; --json: the result as JSON\n"
		   "exit status: 0 ok, 1 negative result, 2 usage, 3 error (portcullis(8))\n");
}

int cli_cmd_help(FILE *f, const char *name, const char *sub)
{
	bool any = false;

	for (const struct cli_cmd *c = cli_cmds; c->name; c++) {
		if (strcmp(c->name, name) != 0 || (sub && (!c->sub || strcmp(c->sub, sub) != 0)))
			continue;
		cli_cmd_usage(f, c);
		fprintf(f, "    %s\n", c->what);
		any = true;
	}
	return any ? 0 : PC_EINVAL;
}

/* `portcullis help [COMMAND [SUBCOMMAND]]`: what --help says, for a
 * person who asks the way most tools are asked. */
int cli_help(int argc, char **argv, const char *config)
{
	(void)config;
	if (argc < 2) {
		cli_usage(stdout);
		return PC_EXIT_OK;
	}
	if (!has_entry(argv[1])) {
		pc_cli_error("help", "unknown command '%s' (see portcullis help)", argv[1]);
		return PC_EXIT_USAGE;
	}
	if (cli_cmd_help(stdout, argv[1], argc > 2 ? argv[2] : NULL) < 0) {
		pc_cli_error("help", "%s has no subcommand '%s'", argv[1], argv[2]);
		cli_cmd_help(stderr, argv[1], NULL);
		return PC_EXIT_USAGE;
	}
	return PC_EXIT_OK;
}

/* Every entry of command name, one usage line each. */
void cli_cmd_usage_all(FILE *f, const char *name)
{
	for (const struct cli_cmd *c = cli_cmds; c->name; c++)
		if (strcmp(c->name, name) == 0)
			cli_cmd_usage(f, c);
}

/* Is opt (an argument starting with '-') one of c's options? *takes: it
 * takes a value in the next argument. */
static bool opt_known(const struct cli_cmd *c, const char *arg, bool *takes)
{
	const char *eq = strchr(arg, '=');
	size_t n = eq && arg[1] == '-' ? (size_t)(eq - arg) : strlen(arg);
	const char *o = c->opts[0] == '+' ? c->opts + 1 : c->opts;

	while (*o == ' ')
		o++;
	while (*o) {
		size_t len = strcspn(o, " ");
		bool val = len && o[len - 1] == '=';
		size_t name_len = val ? len - 1 : len;

		if (name_len == n && strncmp(o, arg, n) == 0) {
			if (eq && !val)
				return false; /* --json=x */
			*takes = val && !eq;
			return true;
		}
		o += len;
		while (*o == ' ')
			o++;
	}
	return false;
}

int cli_cmd_check_args(const struct cli_cmd *c, int argc, char **argv, char *why, size_t len)
{
	bool cmd_tail = c->opts[0] == '+';
	int pos = 0;

	for (int i = 0; i < argc; i++) {
		bool takes = false;

		if (strcmp(argv[i], "--") == 0 || (cmd_tail && argv[i][0] != '-'))
			break; /* the command's own arguments follow */
		if (argv[i][0] == '-' && argv[i][1]) {
			if (!opt_known(c, argv[i], &takes)) {
				snprintf(why, len, "unknown option '%s'", argv[i]);
				return PC_EINVAL;
			}
			if (takes && ++i >= argc) {
				snprintf(why, len, "option '%s' needs a value", argv[i - 1]);
				return PC_EINVAL;
			}
			continue;
		}
		pos++;
	}
	if (pos < c->min_pos) {
		snprintf(why, len, "missing argument%s", c->min_pos - pos > 1 ? "s" : "");
		return PC_EINVAL;
	}
	if (c->max_pos >= 0 && pos > c->max_pos) {
		snprintf(why, len, "too many arguments");
		return PC_EINVAL;
	}
	return 0;
}

/* Is a one of the global options that name the configuration? *val: its
 * value when the argument carries it (-cFILE, --config=FILE), else NULL
 * (the value is the next argument). */
static bool global_config(const char *a, const char **val)
{
	if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
		*val = NULL;
		return true;
	}
	if (strncmp(a, "--config=", 9) == 0) {
		*val = a + 9;
		return true;
	}
	if (a[0] == '-' && a[1] == 'c' && a[2]) {
		*val = a + 2;
		return true;
	}
	return false;
}

static const struct cli_cmd *entry_of(const char *name, const char *sub, bool *is_sub)
{
	const struct cli_cmd *bare = NULL;

	*is_sub = false;
	for (const struct cli_cmd *c = cli_cmds; c->name; c++) {
		if (strcmp(c->name, name) != 0)
			continue;
		if (!c->sub)
			bare = c;
		else if (sub && strcmp(c->sub, sub) == 0) {
			*is_sub = true;
			return c;
		}
	}
	return bare;
}

static bool has_entry(const char *name)
{
	for (const struct cli_cmd *c = cli_cmds; c->name; c++)
		if (strcmp(c->name, name) == 0)
			return true;
	return false;
}

int cli_globals_take(int *argc, char **argv, const char **config, char *why, size_t len)
{
	const struct cli_cmd *c = NULL; /* the entry, once its words are read */
	const char *name = NULL;
	int n = *argc, out = 0, i = 0;

	while (i < n) {
		const char *a = argv[i], *val;
		bool takes = false, is_sub;

		if (strcmp(a, "--") == 0)
			break; /* what follows is not ours (a sandbox's command) */
		if (a[0] == '-' && a[1] && !(c && opt_known(c, a, &takes)) &&
		    global_config(a, &val)) {
			if (!val && i + 1 >= n) {
				snprintf(why, len, "option '%s' needs a value", a);
				return PC_EINVAL;
			}
			*config = val ? val : argv[i + 1];
			i += val ? 1 : 2;
			continue;
		}
		if (a[0] == '-' && a[1]) {
			argv[out++] = argv[i++];
			if (takes && i < n)
				argv[out++] =
				    argv[i++]; /* the option's value, whatever it looks like */
			continue;
		}
		/* a word: the command, its subcommand, or an argument */
		if (!name) {
			name = a;
			if (!has_entry(name))
				break; /* main says it is unknown */
			c = entry_of(name, NULL, &is_sub);
			if (c && !c->sub) {
				/* a command with subcommands too (cert): the next word decides */
				bool any_sub = false;

				for (const struct cli_cmd *e = cli_cmds; e->name; e++)
					any_sub |= strcmp(e->name, name) == 0 && e->sub;
				if (any_sub)
					c = NULL;
			}
			argv[out++] = argv[i++];
			continue;
		}
		if (!c) {
			c = entry_of(name, a, &is_sub);
			if (!c)
				break; /* an unknown subcommand: main says so */
			argv[out++] = argv[i++];
			continue;
		}
		if (c->opts[0] == '+')
			break; /* the sandbox's command starts here */
		argv[out++] = argv[i++];
	}
	while (i < n)
		argv[out++] = argv[i++];
	argv[out] = NULL;
	*argc = out;
	return 0;
}
