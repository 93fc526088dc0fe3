/* `portcullis config show [--json]`: the effective configuration — every
 * key of portcullis.yaml with the value the daemons use and where it came
 * from (the default, derived from run_dir/state_dir, or file:line), as
 * `sshd -T` does: a conffile shows only what it changes, so the rest must
 * be asked for. */
#include "rules/rules_int.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void show_report(const struct pc_err *e, void *arg)
{
	bool *unreadable = arg;
	char buf[1024];

	if (e->code == PC_ENOENT || e->code == PC_EIO || e->code == PC_EPERM)
		*unreadable = true;
	if (e->file[0])
		fprintf(stderr, "%s\n", pc_err_str(e, buf, sizeof(buf)));
	else
		pc_cli_error("config show", "%s", e->msg);
}

static void show_text(const char *path, const struct config_entry *e, size_t n)
{
	int w = 0;

	for (size_t i = 0; i < n; i++)
		if ((int)strlen(e[i].key) > w)
			w = (int)strlen(e[i].key);
	printf("# the effective configuration of %s\n", path);
	for (size_t i = 0; i < n; i++) {
		/* an empty string shown as one; an unset prefix as none */
		printf("%-*s  %-40s  # ", w, e[i].key,
		       e[i].text[0]			? e[i].text
		       : strcmp(e[i].json, "null") == 0 ? "none"
							: "\"\"");
		if (e[i].origin == CONFIG_FROM_FILE)
			printf("%s:%u\n", path, e[i].line);
		else if (e[i].origin == CONFIG_DERIVED)
			printf("derived from %s\n", e[i].from);
		else
			printf("default\n");
	}
}

static int show_json(const char *path, const struct config_entry *e, size_t n)
{
	struct pc_buf b = {0};
	struct pc_json j;
	char *s;

	pc_json_init(&j, &b);
	pc_json_obj(&j);
	pc_json_kstr(&j, "file", path);
	pc_json_key(&j, "keys");
	pc_json_arr(&j);
	for (size_t i = 0; i < n; i++) {
		pc_json_obj(&j);
		pc_json_kstr(&j, "key", e[i].key);
		pc_json_key(&j, "value");
		pc_json_raw(&j, e[i].json);
		if (e[i].origin == CONFIG_FROM_FILE) {
			pc_json_kstr(&j, "source", "file");
			pc_json_ku64(&j, "line", e[i].line);
		} else if (e[i].origin == CONFIG_DERIVED) {
			pc_json_kstr(&j, "source", "derived");
			pc_json_kstr(&j, "from", e[i].from);
		} else {
			pc_json_kstr(&j, "source", "default");
		}
		pc_json_obj_end(&j);
	}
	pc_json_arr_end(&j);
	pc_json_obj_end(&j);
	s = pc_buf_take(&b, NULL);
	if (!s) {
		pc_cli_error("config show", "out of memory");
		return PC_EXIT_ERROR;
	}
	printf("%s\n", s);
	free(s);
	return PC_EXIT_OK;
}

int config_cli(int argc, char **argv, const char *config)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
	static const char usage[] = "usage: portcullis [-c FILE] config show [--json]\n";
	struct config_entry *e = NULL;
	struct pc_err err = {0};
	bool json = false, unreadable = false;
	size_t n = 0;
	int opt, rc;

	if (argc < 2 || strcmp(argv[1], "show") != 0) {
		if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
			fputs(usage, stdout);
			return PC_EXIT_OK;
		}
		fputs(usage, stderr);
		return PC_EXIT_USAGE;
	}
	argc--;
	argv++;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'j') {
			json = true;
		} else if (opt == 'h') {
			fputs(usage, stdout);
			return PC_EXIT_OK;
		} else {
			fputs(usage, stderr);
			return PC_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		pc_cli_error("config show", "unexpected argument '%s'", argv[optind]);
		fputs(usage, stderr);
		return PC_EXIT_USAGE;
	}
	/* errors are reported (file:line:col) as they are found */
	if (config_describe(config, NULL, &e, &n, &err, show_report, &unreadable) < 0)
		return unreadable ? PC_EXIT_ERROR : PC_EXIT_FAIL;
	if (json) {
		rc = show_json(config, e, n);
	} else {
		show_text(config, e, n);
		rc = PC_EXIT_OK;
	}
	config_entries_free(e, n);
	return rc;
}
