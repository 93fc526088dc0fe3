/* cli_globals_take (cli/cmds.c): the configuration's global options
 * (-c FILE, -cFILE, --config FILE, --config=FILE) are taken from anywhere
 * on the command line, and from nowhere they belong to something else: a
 * sandbox's command, what follows "--", the value of a command's option. */
#include "cli/cli_int.h"
#include "unit.h"

#include <string.h>

/* words: space-separated arguments after the program's name; the result
 * (what is left, space-separated) in out, the configuration in *config. */
static int take(const char *words, char *out, size_t len, const char **config)
{
	static char buf[512];
	char *argv[32], *save = NULL;
	int argc = 0, rc;
	char why[128];

	pc_strlcpy(buf, words, sizeof(buf));
	for (char *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	argv[argc] = NULL;
	*config = "DEFAULT";
	rc = cli_globals_take(&argc, argv, config, why, sizeof(why));
	out[0] = '\0';
	for (int i = 0; rc == 0 && i < argc; i++) {
		if (i)
			strncat(out, " ", len - strlen(out) - 1);
		strncat(out, argv[i], len - strlen(out) - 1);
	}
	if (rc == 0)
		ck_assert_ptr_null(argv[argc]);
	return rc;
}

static void expect(const char *words, const char *left, const char *config)
{
	char out[512];
	const char *cfg;

	ck_assert_int_eq(take(words, out, sizeof(out), &cfg), 0);
	ck_assert_str_eq(out, left);
	ck_assert_str_eq(cfg, config);
}

START_TEST(anywhere_on_the_line)
{
	expect("-c a.yaml status", "status", "a.yaml");
	expect("status -c a.yaml", "status", "a.yaml");
	expect("status --json --config a.yaml", "status --json", "a.yaml");
	expect("status --config=a.yaml --json", "status --json", "a.yaml");
	expect("policy -ca.yaml lint --strict", "policy lint --strict", "a.yaml");
	expect("log show --sandbox agent-1 -c a.yaml --json", "log show --sandbox agent-1 --json",
	       "a.yaml");
	expect("cert agent-1 -o out.json --config a.yaml", "cert agent-1 -o out.json", "a.yaml");
	expect("cert verify f.json -c a.yaml", "cert verify f.json", "a.yaml");
	expect("status", "status", "DEFAULT");
	/* the last one given wins, as with getopt */
	expect("-c a.yaml status -c b.yaml", "status", "b.yaml");
}
END_TEST

START_TEST(not_where_it_belongs_to_something_else)
{
	/* the value of a command's own option */
	expect("log show --sandbox -c", "log show --sandbox -c", "DEFAULT");
	expect("log verify --key -c --config a.yaml", "log verify --key -c", "a.yaml");
	/* a sandbox's command, with or without "--" */
	expect("sandbox run --allow x:443 -c a.yaml -- sh -c 'true'",
	       "sandbox run --allow x:443 -- sh -c 'true'", "a.yaml");
	expect("sandbox run --allow x:443 sh -c true", "sandbox run --allow x:443 sh -c true",
	       "DEFAULT");
	expect("sandbox attach --port tap0 --name vm -- qemu -c x",
	       "sandbox attach --port tap0 --name vm -- qemu -c x", "DEFAULT");
	/* an unknown command or subcommand is left for main to name */
	expect("nope -c a.yaml", "nope -c a.yaml", "DEFAULT");
	expect("log nope -c a.yaml", "log nope -c a.yaml", "DEFAULT");
}
END_TEST

START_TEST(a_missing_value_is_a_usage_error)
{
	char out[512];
	const char *cfg;

	ck_assert_int_eq(take("status -c", out, sizeof(out), &cfg), PC_EINVAL);
	ck_assert_int_eq(take("status --config", out, sizeof(out), &cfg), PC_EINVAL);
}
END_TEST

START_TEST(help_says_what_command_help_says)
{
	char a[4096], b[4096];
	FILE *f = fmemopen(a, sizeof(a), "w");

	ck_assert_int_eq(cli_cmd_help(f, "log", "show"), 0);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(a, "usage: portcullis [-c FILE] log show "));
	ck_assert_ptr_nonnull(strstr(a, "the log, one record a line"));
	ck_assert_ptr_null(strstr(a, "log verify"));
	f = fmemopen(b, sizeof(b), "w");
	ck_assert_int_eq(cli_cmd_help(f, "log", NULL), 0);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(b, "log verify"));
	ck_assert_ptr_nonnull(strstr(b, "log keygen"));
	f = fmemopen(b, sizeof(b), "w");
	ck_assert_int_eq(cli_cmd_help(f, "log", "nope"), PC_EINVAL);
	ck_assert_int_eq(cli_cmd_help(f, "nope", NULL), PC_EINVAL);
	fclose(f);
}
END_TEST

PC_UNIT_SUITE("cli_globals", "globals", 0, anywhere_on_the_line,
	      not_where_it_belongs_to_something_else, a_missing_value_is_a_usage_error,
	      help_says_what_command_help_says)
