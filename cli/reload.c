/* `portcullis reload [--engine] [--vault] [--json]`: ask the engine (over
 * engine.sock) and the vault (over vault.sock) to load the policy again and
 * wait for each answer, so that `systemctl reload` and configuration tools
 * learn the truth: exit 0 only when every daemon asked took the new policy,
 * 1 when one refused it (its reason printed), 3 when one could not be asked.
 * A SIGHUP, which the units sent before, cannot tell anyone it failed. */
#include "cli/cli.h"
#include "rules/rules.h"
#include "vault/vault.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A reload recompiles the whole policy and cuts flows: give it time. */
#define RELOAD_WAIT_MS 60000

enum answer { A_OK, A_REFUSED, A_ERROR, A_ABSENT };

struct result {
	const char *daemon;
	enum answer a;
	char policy[128];
	size_t secrets;
	char msg[1024];
};

static void engine_reload(const struct config *cfg, struct result *r)
{
	struct pc_eng_reply reply;
	struct pc_err err = {0};
	int rc = pc_engine_call(cfg->run_dir, PC_ENG_RELOAD, RELOAD_WAIT_MS, &reply, &err);

	if (rc < 0) {
		char ebuf[900];

		/* a reply we cannot read came from a running engine */
		r->a = A_ERROR;
		snprintf(r->msg, sizeof(r->msg), "%s%s", pc_err_str(&err, ebuf, sizeof(ebuf)),
			 rc == PC_EPARSE || rc == PC_EUNSUPP ? "" : " (is portcullisd running?)");
		return;
	}
	if (reply.type == PC_ENG_ERROR) {
		/* a rejected policy is a negative answer; a refused peer an error */
		r->a = reply.code == PC_EPERM ? A_ERROR : A_REFUSED;
		snprintf(r->msg, sizeof(r->msg), "%s", reply.message);
	} else {
		r->a = A_OK;
		snprintf(r->policy, sizeof(r->policy), "%s", reply.policy);
	}
	pc_eng_reply_free(&reply);
}

/* Is anything listening at path? No socket file, or one nobody accepts on
 * (left by a vault that crashed): no. */
static bool listening(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return true; /* let the real request say what is wrong */
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true;
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (rc < 0 && (errno == ENOENT || errno == ECONNREFUSED)) {
		close(fd);
		return false;
	}
	close(fd);
	return true;
}

static void vault_reload(const struct config *cfg, bool required, struct result *r)
{
	char path[PC_PATH_MAX + 32], ebuf[900], *reply = NULL, *nl;
	struct pc_err err = {0};

	snprintf(path, sizeof(path), "%s/%s", cfg->run_dir, VAULT_CTL_SOCK);
	if (!required && !listening(path)) {
		r->a = A_ABSENT;
		snprintf(r->msg, sizeof(r->msg), "not running (%s): nothing to reload", path);
		return;
	}
	if (pc_ctl_request(path, "reload", RELOAD_WAIT_MS, 4096, &reply, &err) < 0) {
		r->a = A_ERROR;
		snprintf(r->msg, sizeof(r->msg), "%s: %s (is portcullis-vault running?)", path,
			 pc_err_str(&err, ebuf, sizeof(ebuf)));
		return;
	}
	nl = strchr(reply, '\n');
	if (nl)
		*nl = '\0';
	if (strncmp(reply, VAULT_CTL_RELOAD_OK, strlen(VAULT_CTL_RELOAD_OK)) == 0 &&
	    sscanf(reply + strlen(VAULT_CTL_RELOAD_OK), "policy %127s secrets %zu", r->policy,
		   &r->secrets) == 2) {
		r->a = A_OK;
	} else if (strncmp(reply, VAULT_CTL_RELOAD_REFUSED, strlen(VAULT_CTL_RELOAD_REFUSED)) ==
		   0) {
		r->a = A_REFUSED;
		snprintf(r->msg, sizeof(r->msg), "%s", reply + strlen(VAULT_CTL_RELOAD_REFUSED));
	} else { /* an older vault answers "unknown request" */
		r->a = A_ERROR;
		snprintf(r->msg, sizeof(r->msg), "unexpected answer: %.200s", reply);
	}
	free(reply);
}

static void print_json(const struct result *r, size_t n)
{
	static const char *const names[] = {"ok", "refused", "error", "not running"};
	struct pc_buf b = {0};
	struct pc_json j;
	char *s;

	pc_json_init(&j, &b);
	pc_json_obj(&j);
	for (size_t i = 0; i < n; i++) {
		pc_json_key(&j, r[i].daemon);
		pc_json_obj(&j);
		pc_json_kstr(&j, "result", names[r[i].a]);
		if (r[i].a == A_OK) {
			pc_json_kstr(&j, "policy", r[i].policy);
			if (strcmp(r[i].daemon, "vault") == 0)
				pc_json_ku64(&j, "secrets", r[i].secrets);
		} else {
			pc_json_kstr(&j, "message", r[i].msg);
		}
		pc_json_obj_end(&j);
	}
	pc_json_obj_end(&j);
	s = pc_buf_take(&b, NULL);
	if (s)
		printf("%s\n", s);
	free(s);
}

int cli_reload(int argc, char **argv, const char *config)
{
	static const struct option opts[] = {{"engine", no_argument, NULL, 'e'},
					     {"vault", no_argument, NULL, 'v'},
					     {"json", no_argument, NULL, 'j'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	static const char usage[] = "usage: portcullis [-c FILE] reload [--engine] [--vault] "
				    "[--json]\n";
	struct result r[2];
	struct config cfg;
	struct pc_err err = {0};
	bool want_engine = false, want_vault = false, json = false;
	char ebuf[1024];
	size_t n = 0;
	int opt, exit_rc = PC_EXIT_OK;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 'e':
			want_engine = true;
			break;
		case 'v':
			want_vault = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return PC_EXIT_OK;
		default:
			fputs(usage, stderr);
			return PC_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		pc_cli_error("reload", "unexpected argument '%s'", argv[optind]);
		fputs(usage, stderr);
		return PC_EXIT_USAGE;
	}
	if (config_load(config, &cfg, &err) < 0) {
		pc_cli_error("configuration", "%s", pc_err_str(&err, ebuf, sizeof(ebuf)));
		return PC_EXIT_ERROR;
	}
	/* Neither named: the engine, which must run, and the vault if it runs
	 * (a gateway without secrets need not run one). A daemon named must
	 * answer: the units name theirs. */
	if (want_engine || !want_vault) {
		memset(&r[n], 0, sizeof(r[n]));
		r[n].daemon = "engine";
		engine_reload(&cfg, &r[n++]);
	}
	if (want_vault || !want_engine) {
		memset(&r[n], 0, sizeof(r[n]));
		r[n].daemon = "vault";
		vault_reload(&cfg, want_vault, &r[n++]);
	}
	for (size_t i = 0; i < n; i++) {
		if (r[i].a == A_ERROR)
			exit_rc = PC_EXIT_ERROR;
		else if (r[i].a == A_REFUSED && exit_rc == PC_EXIT_OK)
			exit_rc = PC_EXIT_FAIL;
		if (json)
			continue;
		if (r[i].a == A_OK && strcmp(r[i].daemon, "vault") == 0)
			printf("vault: policy %s in force, %zu secret%s\n", r[i].policy,
			       r[i].secrets, r[i].secrets == 1 ? "" : "s");
		else if (r[i].a == A_OK)
			printf("policy %s in force\n", r[i].policy);
		else if (r[i].a == A_ABSENT)
			printf("vault: %s\n", r[i].msg);
		else
			pc_cli_error(r[i].daemon, "%s%s",
				     r[i].a == A_REFUSED ? "reload refused: " : "", r[i].msg);
	}
	if (json)
		print_json(r, n);
	return exit_rc;
}
