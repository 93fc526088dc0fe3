/* `portcullis secrets set|list|rm|placeholder` and `portcullis ca init`: the
 * administrator's side of the vault. Values come from stdin only, are kept
 * in locked memory, and are never printed. */
#include "vault/vault_int.h"

#include <getopt.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <termios.h>
#include <unistd.h>

#include "rules/rules.h"

static int load_config(const char *config, struct config *cfg)
{
	struct pc_err e = {0};
	char b[700];

	if (config_load(config, cfg, &e) < 0) {
		pc_cli_error("configuration", "%s", pc_err_str(&e, b, sizeof(b)));
		return -1;
	}
	return 0;
}

/* Read the value from stdin into locked memory; one trailing newline (as
 * `echo` adds) is dropped. Returns its length or -1. */
static long value_read(uint8_t *buf, size_t cap)
{
	struct termios old, noecho;
	bool tty = isatty(STDIN_FILENO);
	size_t n = 0;

	if (tty) {
		fprintf(stderr, "value (not echoed): ");
		tcgetattr(STDIN_FILENO, &old);
		noecho = old;
		noecho.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &noecho);
	}
	for (;;) {
		ssize_t r = read(STDIN_FILENO, buf + n, cap - n);

		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == cap || (tty && buf[n - 1] == '\n'))
			break;
	}
	if (tty) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	if (n == cap)
		return -1;
	if (n && buf[n - 1] == '\n')
		n--;
	if (n && buf[n - 1] == '\r')
		n--;
	return (long)n;
}

static int secrets_set(int argc, char **argv, const struct config *cfg)
{
	static const struct option opts[] = {{"keep-placeholder", no_argument, NULL, 'k'},
					     {"json", no_argument, NULL, 'j'},
					     {NULL, 0, NULL, 0}};
	char ph[VAULT_PH_MAX];
	struct pc_err e = {0};
	bool keep = false, json = false;
	uint8_t *val;
	uid_t uid;
	gid_t gid;
	long n;
	int o, rc;

	while ((o = getopt_long(argc, argv, "k", opts, NULL)) != -1) {
		if (o == 'j')
			json = true;
		else if (o == 'k')
			keep = true;
		else
			return PC_EXIT_USAGE;
	}
	if (optind + 1 != argc) {
		fprintf(stderr,
			"usage: portcullis secrets set [--keep-placeholder] NAME < value\n");
		return PC_EXIT_USAGE;
	}
	if (!store_name_valid(argv[optind])) {
		pc_cli_error("secrets set", "invalid name %s (want [A-Z][A-Z0-9_]*)", argv[optind]);
		return PC_EXIT_USAGE;
	}
	if (pc_user_lookup(cfg->vault.user, &uid, &gid, &e) < 0) {
		pc_cli_error("secrets set", "%s", e.msg);
		return PC_EXIT_ERROR;
	}
	val = sodium_malloc(VAULT_VALUE_MAX + 2);
	if (!val) {
		pc_cli_error("secrets set", "out of memory");
		return PC_EXIT_ERROR;
	}
	n = value_read(val, VAULT_VALUE_MAX + 2);
	if (n < 0) {
		sodium_free(val);
		pc_cli_error("secrets set", "value longer than %d bytes", VAULT_VALUE_MAX);
		return PC_EXIT_USAGE;
	}
	rc = store_secret_set(cfg->vault.secrets, argv[optind], val, (size_t)n, uid, gid, keep, ph,
			      &e);
	sodium_free(val);
	if (rc < 0) {
		pc_cli_error("secrets set", "%s", e.msg);
		return rc == PC_EINVAL ? PC_EXIT_USAGE : PC_EXIT_ERROR;
	}
	if (json)
		printf("{\"name\":\"%s\",\"placeholder\":\"%s\"}\n", argv[optind], ph);
	else
		printf("%s\n", ph);
	fprintf(stderr,
		"portcullis: %s sealed; send SIGHUP to portcullis-vault (or `portcullis "
		"reload`) to serve it\n",
		argv[optind]);
	return PC_EXIT_OK;
}

static int secrets_list(int argc, char **argv, const struct config *cfg)
{
	char(*names)[VAULT_NAME_MAX] = NULL;
	struct policy *pol = NULL;
	struct pc_err e = {0};
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	struct pc_buf out = {0};
	struct pc_json j;
	size_t n;

	if (argc > 2 || (argc == 2 && !json)) {
		fprintf(stderr, "usage: portcullis secrets list [--json]\n");
		return PC_EXIT_USAGE;
	}
	if (store_names(cfg->vault.secrets, &names, &n, &e) < 0) {
		pc_cli_error("secrets list", "%s", e.msg);
		return PC_EXIT_ERROR;
	}
	if (policy_load_dir(cfg->rules_dir, cfg, &pol, &e) < 0)
		fprintf(stderr,
			"portcullis: secrets list: policy not loaded, bindings unknown: %s\n",
			e.msg);
	pc_json_init(&j, &out);
	if (json)
		pc_json_arr(&j);
	for (size_t i = 0; i < n; i++) {
		char ph[VAULT_PH_MAX] = "?";
		bool first = true;

		store_placeholder_read(cfg->vault.secrets, names[i], ph, NULL);
		if (json) {
			pc_json_obj(&j);
			pc_json_kstr(&j, "name", names[i]);
			pc_json_kstr(&j, "placeholder", ph);
			pc_json_key(&j, "bindings");
			pc_json_arr(&j);
		} else {
			printf("%-24s %s", names[i], ph);
		}
		for (size_t s = 0; pol && s < policy_sandbox_count(pol); s++) {
			const struct policy_sandbox *sb = policy_sandbox_at(pol, s);
			const struct policy_secret *ps = policy_secret_by_name(sb, names[i]);

			if (!ps)
				continue;
			if (json) {
				pc_json_obj(&j);
				pc_json_kstr(&j, "sandbox", sb->name);
				pc_json_kstr(&j, "host", ps->host);
				pc_json_ku64(&j, "port", ps->port);
				pc_json_kstr(&j, "header", ps->header);
				pc_json_obj_end(&j);
			} else {
				printf(" %s:%s:%u", sb->name, ps->host, ps->port);
			}
			first = false;
		}
		if (json) {
			pc_json_arr_end(&j);
			pc_json_obj_end(&j);
		} else {
			printf("%s\n", first ? (pol ? " (bound nowhere)" : "") : "");
		}
	}
	if (json)
		pc_json_arr_end(&j);
	policy_unref(pol);
	free(names);
	if (out.err) {
		pc_buf_free(&out);
		pc_cli_error("secrets list", "%s", pc_strerror(PC_ENOMEM));
		return PC_EXIT_ERROR;
	}
	if (json)
		printf("%s\n", out.p);
	pc_buf_free(&out);
	return PC_EXIT_OK;
}

int vault_cli(int argc, char **argv, const char *config)
{
	struct config cfg;
	struct pc_err e = {0};
	const char *sub = argc > 1 ? argv[1] : "";

	/* a value passes through this process: no core dump of it */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (sodium_init() < 0) {
		pc_cli_error(argv[0], "libsodium failed to initialise");
		return PC_EXIT_ERROR;
	}
	if (!strcmp(argv[0], "ca")) {
		/* [--force] [--json], in either order */
		bool force = false, json = false, bad = false;
		uid_t uid;
		gid_t gid;
		int rc;

		for (int i = 2; i < argc; i++) {
			if (!strcmp(argv[i], "--force"))
				force = true;
			else if (!strcmp(argv[i], "--json"))
				json = true;
			else
				bad = true;
		}
		if (strcmp(sub, "init") || bad) {
			fprintf(stderr, "usage: portcullis ca init [--force] [--json]\n");
			return PC_EXIT_USAGE;
		}
		if (load_config(config, &cfg) < 0)
			return PC_EXIT_ERROR;
		/* the vault user must exist, but the key is root's: the vault's
		 * CA process reads it before it drops to that user, and the
		 * rest of the vault (same user) cannot (docs/vault.md) */
		if (pc_user_lookup(cfg.vault.user, &uid, &gid, &e) < 0 ||
		    (rc = ca_init(cfg.vault.ca_dir, 0, 0, force, &e)) < 0) {
			pc_cli_error("ca init", "%s", e.msg);
			return e.code == PC_EEXIST ? PC_EXIT_FAIL : PC_EXIT_ERROR;
		}
		if (json) {
			struct pc_buf b = {0};
			struct pc_json j;
			char pem[PC_PATH_MAX + 16];

			snprintf(pem, sizeof(pem), "%s/ca.pem", cfg.vault.ca_dir);
			pc_json_init(&j, &b);
			pc_json_obj(&j);
			pc_json_kstr(&j, "ca", pem);
			pc_json_obj_end(&j);
			printf("%s\n", pc_buf_str(&b));
			pc_buf_free(&b);
		} else {
			printf("%s/ca.pem\n", cfg.vault.ca_dir);
		}
		return PC_EXIT_OK;
	}
	if (load_config(config, &cfg) < 0)
		return PC_EXIT_ERROR;
	if (!strcmp(sub, "set"))
		return secrets_set(argc - 1, argv + 1, &cfg);
	if (!strcmp(sub, "list"))
		return secrets_list(argc - 1, argv + 1, &cfg);
	/* placeholder takes --json (on either side of the name) */
	bool json = argc == 4 && sub[0] == 'p' &&
		    (!strcmp(argv[2], "--json") || !strcmp(argv[3], "--json"));
	const char *name = json && !strcmp(argv[2], "--json") ? argv[3] : argv[2];

	if ((!strcmp(sub, "rm") || !strcmp(sub, "placeholder")) && (argc == 3 || json)) {
		char ph[VAULT_PH_MAX];
		int rc = sub[0] == 'r' ? store_secret_rm(cfg.vault.secrets, name, &e)
				       : store_placeholder_read(cfg.vault.secrets, name, ph, &e);

		if (rc < 0) {
			pc_cli_error(sub[0] == 'r' ? "secrets rm" : "secrets placeholder", "%s",
				     e.msg);
			/* rm of a name not stored could not do its job (3, portcullis(8));
			 * placeholder of one is a negative answer (1) */
			return rc == PC_ENOENT && sub[0] == 'p' ? PC_EXIT_FAIL : PC_EXIT_ERROR;
		}
		if (sub[0] == 'p' && json)
			printf("{\"name\":\"%s\",\"placeholder\":\"%s\"}\n", name, ph);
		else if (sub[0] == 'p')
			printf("%s\n", ph);
		return PC_EXIT_OK;
	}
	fprintf(stderr, "usage: portcullis secrets set [--keep-placeholder] NAME < value\n"
			"       portcullis secrets list [--json]\n"
			"       portcullis secrets placeholder NAME\n"
			"       portcullis secrets rm NAME\n");
	return PC_EXIT_USAGE;
}
