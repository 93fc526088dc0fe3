/* `portcullis status`: one request to the engine's
 * control socket, one typed reply (common/engmsg.c) whose status JSON is
 * shown as it is (--json) or indented; and
 * `portcullis metrics`: every daemon's metrics in Prometheus text format. */
#include "cli/cli.h"
#include "rules/rules.h"
#include "logd/logd.h"
#include "vault/vault.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* `portcullis metrics`: each daemon's metrics (engine.sock, vault.sock,
 * logd-control.sock in run_dir) and portcullis_up for each, in Prometheus
 * text format. Exit 0 when at least one daemon answered. */
#define METRICS_MAX (1u << 20)

/* The engine's metrics text (malloc'ed), or its error reply as the error. */
static int engine_metrics(const struct config *cfg, char **text, struct pc_err *err)
{
	struct pc_eng_reply r;
	int rc = pc_engine_call(cfg->run_dir, PC_ENG_METRICS, 5000, &r, err);

	if (rc < 0)
		return rc;
	if (r.type == PC_ENG_ERROR) {
		rc = pc_err_set(err, r.code, "%s", r.message);
		pc_eng_reply_free(&r);
		return rc;
	}
	*text = strdup(r.text);
	pc_eng_reply_free(&r);
	return *text ? 0 : pc_err_set(err, PC_ENOMEM, "out of memory");
}

static int metrics_cli(int argc, char **argv, const struct config *cfg)
{
	static const struct {
		const char *daemon, *sock;
	} d[] = {{"engine", PC_ENGINE_SOCK}, {"vault", VAULT_CTL_SOCK}, {"logd", LOGD_CTL_SOCK}};
	char *text[3] = {NULL, NULL, NULL};
	int answered = 0;

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: portcullis [-c FILE] metrics\n");
		return PC_EXIT_USAGE;
	}
	for (size_t i = 0; i < 3; i++) {
		char path[PC_PATH_MAX + 32], ebuf[700];
		struct pc_err err = {0};

		snprintf(path, sizeof(path), "%s/%s", cfg->run_dir, d[i].sock);
		if (i == 0) { /* the engine's socket speaks typed messages */
			if (engine_metrics(cfg, &text[i], &err) < 0) {
				pc_cli_error(d[i].daemon, "%s",
					     pc_err_str(&err, ebuf, sizeof(ebuf)));
				text[i] = NULL;
				continue;
			}
		} else if (pc_ctl_request(path, "metrics", 5000, METRICS_MAX, &text[i], &err) < 0) {
			/* the others are still worth printing; portcullis_up says */
			pc_cli_error(d[i].daemon, "%s", pc_err_str(&err, ebuf, sizeof(ebuf)));
			text[i] = NULL;
			continue;
		}
		if (strncmp(text[i], "# HELP ", 7) != 0) { /* an error message, not metrics */
			pc_cli_error(d[i].daemon, "%.200s", text[i]);
			free(text[i]);
			text[i] = NULL;
			continue;
		}
		answered++;
	}
	printf("# HELP portcullis_up Whether the daemon answered portcullis metrics.\n"
	       "# TYPE portcullis_up gauge\n");
	for (size_t i = 0; i < 3; i++)
		printf("portcullis_up{daemon=\"%s\"} %d\n", d[i].daemon, text[i] != NULL);
	{
		/* each daemon's process_* under one family, labelled daemon="..." */
		static const char *const lab[3] = {"daemon=\"engine\"", "daemon=\"vault\"",
						   "daemon=\"logd\""};
		char *all = pc_prom_merge(text, lab, 3);

		if (all)
			fputs(all, stdout);
		else
			pc_cli_error("metrics", "out of memory");
		free(all);
	}
	for (size_t i = 0; i < 3; i++)
		free(text[i]);
	return answered ? PC_EXIT_OK : PC_EXIT_ERROR;
}

static void json_print_indented(const char *js)
{
	int depth = 0;
	bool in_str = false;

	for (const char *p = js; *p; p++) {
		char c = *p;

		if (in_str) {
			putchar(c);
			if (c == '\\' && p[1])
				putchar(*++p);
			else if (c == '"')
				in_str = false;
			continue;
		}
		switch (c) {
		case '"':
			in_str = true;
			putchar(c);
			break;
		case '{':
		case '[':
			printf("%c\n%*s", c, ++depth * 2, "");
			break;
		case '}':
		case ']':
			printf("\n%*s%c", --depth * 2, "", c);
			break;
		case ',':
			printf(",\n%*s", depth * 2, "");
			break;
		case ':':
			printf(": ");
			break;
		default:
			putchar(c);
		}
	}
	putchar('\n');
}

int cli_control(int argc, char **argv, const char *config)
{
	static const struct option opts[] = {{"json", no_argument, NULL, 'j'}, {NULL, 0, NULL, 0}};
	struct config cfg;
	struct pc_err err = {0};
	struct pc_eng_reply reply;
	char ebuf[1024];
	bool json = false;
	int opt, rc;

	if (strcmp(argv[0], "metrics") == 0) {
		if (config_load(config, &cfg, &err) < 0) {
			pc_cli_error("configuration", "%s", pc_err_str(&err, ebuf, sizeof(ebuf)));
			return PC_EXIT_ERROR;
		}
		return metrics_cli(argc, argv, &cfg);
	}
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt != 'j') {
			fprintf(stderr, "usage: portcullis [-c FILE] status [--json]\n");
			return PC_EXIT_USAGE;
		}
		json = true;
	}
	if (optind != argc) {
		pc_cli_error(argv[0], "unexpected argument '%s'", argv[optind]);
		return PC_EXIT_USAGE;
	}
	if (config_load(config, &cfg, &err) < 0) {
		pc_cli_error("configuration", "%s", pc_err_str(&err, ebuf, sizeof(ebuf)));
		return PC_EXIT_ERROR;
	}
	rc = pc_engine_call(cfg.run_dir, PC_ENG_STATUS, 5000, &reply, &err);
	if (rc < 0) {
		/* a reply we cannot read came from a running engine */
		pc_cli_error(argv[0], "%s%s", pc_err_str(&err, ebuf, sizeof(ebuf)),
			     rc == PC_EPARSE || rc == PC_EUNSUPP ? ""
								 : " (is portcullisd running?)");
		return PC_EXIT_ERROR;
	}
	if (reply.type == PC_ENG_ERROR) {
		pc_cli_error(argv[0], "%s", reply.message);
		pc_eng_reply_free(&reply);
		return PC_EXIT_ERROR;
	}
	if (json)
		printf("%s\n", reply.json);
	else
		json_print_indented(reply.json);
	pc_eng_reply_free(&reply);
	return PC_EXIT_OK;
}
