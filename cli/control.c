/* `portcullis status`: one request to the engine's
 * control socket, one typed reply (common/engmsg.c) whose status JSON is
 * shown as it is (--json) or as a short summary for a person; and
 * `portcullis metrics`: every daemon's metrics in Prometheus text format. */
#include "cli/cli_int.h"
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

/* "1h02m", "3m07s", "42s": an uptime as a person reads it. */
static void duration(struct pc_buf *b, uint64_t s)
{
	if (s >= 86400)
		pc_buf_printf(b, "%llud%02lluh", (unsigned long long)(s / 86400),
			      (unsigned long long)(s % 86400 / 3600));
	else if (s >= 3600)
		pc_buf_printf(b, "%lluh%02llum", (unsigned long long)(s / 3600),
			      (unsigned long long)(s % 3600 / 60));
	else if (s >= 60)
		pc_buf_printf(b, "%llum%02llus", (unsigned long long)(s / 60),
			      (unsigned long long)(s % 60));
	else
		pc_buf_printf(b, "%llus", (unsigned long long)s);
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/* The few lines an admin reads first (what runs, whether it is proven and
 * serving, what it refused); every counter, per queue and per sandbox, is
 * in --json, the engine's own object. */
void cli_status_text(struct pc_buf *b, const struct top_health *h)
{
	const struct top_status *s = &h->st;
#define U(x) ((unsigned long long)(x))

	pc_buf_printf(b, "engine       portcullisd %s, pid %llu, up ",
		      s->version[0] ? s->version : "?", U(s->pid));
	duration(b, h->uptime_s);
	pc_buf_printf(b, "\npolicy       %s\n", h->policy[0] ? h->policy : "(none)");
	pc_buf_printf(b, "containment  %s", h->check[0] ? h->check : "?");
	if (s->check_time[0])
		pc_buf_printf(b, " (check %llu at %s, after %s)", U(s->check_runs), s->check_time,
			      s->check_trigger[0] ? s->check_trigger : "?");
	if (s->check_running)
		pc_buf_puts(b, "; a check is running");
	pc_buf_putc(b, '\n');
	if (h->check_findings)
		pc_buf_printf(b, "             %llu %s, the first: %s\n", U(h->check_findings),
			      plural(h->check_findings, "finding", "findings"), s->check_first);
	if (s->cutoff_active)
		pc_buf_printf(b, "cut off      YES since %s, %llu %s down, after %s\n",
			      s->cutoff_since[0] ? s->cutoff_since : "?", U(s->cutoff_ports_down),
			      plural(s->cutoff_ports_down, "port", "ports"),
			      s->cutoff_after[0] ? s->cutoff_after : "?");
	else
		pc_buf_printf(b, "cut off      no (%llu %s since start)\n", U(s->cutoff_count),
			      plural(s->cutoff_count, "time", "times"));
	pc_buf_printf(b,
		      "queues       %llu (%s): %llu packets, %llu accepted, %llu refused; dropped "
		      "%llu in the kernel, %llu by the engine, %llu ENOBUFS\n",
		      U(s->queues), s->queue_path[0] ? s->queue_path : "?", U(h->queued),
		      U(s->accepted), U(s->refused), U(h->kernel_dropped), U(h->user_dropped),
		      U(h->enobufs));
	pc_buf_printf(b, "flows        %llu allowed, %llu held for their ClientHello\n",
		      U(h->flows), U(h->held));
	pc_buf_printf(b,
		      "dns          %llu queries allowed, %llu refused, %llu malformed; %llu %s "
		      "learned, %llu evicted\n",
		      U(s->dns_allowed), U(s->dns_refused), U(s->dns_malformed), U(s->learned),
		      plural(s->learned, "address", "addresses"), U(s->evicted));
	pc_buf_printf(b, "log          %llu records sent, %llu not taken by logd\n", U(h->log_sent),
		      U(h->log_failed));
	pc_buf_printf(b,
		      "limits       %llu %s; %llu new flows dropped over a limit; refused over a "
		      "share: %llu held flows, %llu DNS-over-TCP streams\n",
		      U(s->limits), plural(s->limits, "sandbox", "sandboxes"), U(s->limit_dropped),
		      U(s->quota_held_refused), U(s->quota_dnstcp_refused));
	pc_buf_printf(b, "rules        %llu %s hit, %llu %s in all\n", U(s->rules_hit),
		      plural(s->rules_hit, "entry", "entries"), U(s->rule_hits),
		      plural(s->rule_hits, "hit", "hits"));
	pc_buf_puts(b, "(every counter, per queue, sandbox and rule: portcullis status --json)\n");
#undef U
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
	else {
		struct top_health h;
		struct pc_buf b = {0};

		memset(&h, 0, sizeof(h));
		if (top_health_engine(reply.json, strlen(reply.json), &h) < 0) {
			pc_cli_error(argv[0], "the engine's status is not a JSON object");
			pc_eng_reply_free(&reply);
			return PC_EXIT_ERROR;
		}
		cli_status_text(&b, &h);
		if (b.err) {
			pc_cli_error(argv[0], "out of memory");
			pc_buf_free(&b);
			pc_eng_reply_free(&reply);
			return PC_EXIT_ERROR;
		}
		fputs(pc_buf_str(&b), stdout);
		pc_buf_free(&b);
	}
	pc_eng_reply_free(&reply);
	return PC_EXIT_OK;
}
