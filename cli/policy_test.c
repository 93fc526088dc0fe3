/* `portcullis policy test SANDBOX HOST|IP PORT [--proto tcp|udp]`: would
 * the policy allow this connection (or, PORT 53, this DNS query), by which
 * rule, or why not. The answer is the engine's own decision
 * (engine_whatif, engine/whatif.c) on the packets the sandbox would send,
 * under the configuration and the rules directory the engine loads; when
 * the engine runs another policy (rules.d edited, not reloaded), that is
 * said. Exit 0 allowed, 1 refused, 2 usage, 3 error. */
#include "cli/cli_int.h"
#include "engine/engine.h"

#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void json_out(const struct whatif_req *q, const struct whatif_res *r, const char *hash,
		     const char *engine_hash)
{
	struct pc_buf b = {0};
	struct pc_json j;

	pc_json_init(&j, &b);
	pc_json_obj(&j);
	pc_json_kstr(&j, "sandbox", q->sandbox);
	pc_json_kstr(&j, "target", q->target);
	pc_json_ku64(&j, "port", q->port);
	pc_json_kstr(&j, "proto", q->proto == IPPROTO_UDP ? "udp" : "tcp");
	pc_json_kstr(&j, "policy", hash);
	pc_json_key(&j, "engine_policy");
	if (engine_hash[0])
		pc_json_str(&j, engine_hash);
	else
		pc_json_null(&j);
	pc_json_key(&j, "allowed");
	pc_json_bool(&j, r->allowed);
	pc_json_key(&j, "vault");
	pc_json_bool(&j, r->vault);
	pc_json_kstr(&j, "rule", r->rule);
	pc_json_kstr(&j, "reason", r->reason);
	pc_json_key(&j, "steps");
	pc_json_arr(&j);
	for (size_t i = 0; i < r->n_steps; i++) {
		const struct whatif_step *s = &r->steps[i];

		pc_json_obj(&j);
		pc_json_kstr(&j, "packet", s->what);
		pc_json_kstr(&j, "verdict", s->held ? "held" : s->allowed ? "allowed" : "refused");
		if (s->recorded) {
			pc_json_kstr(&j, "rule", s->rule);
			pc_json_kstr(&j, "reason", s->reason);
		}
		pc_json_obj_end(&j);
	}
	pc_json_arr_end(&j);
	pc_json_obj_end(&j);
	printf("%s\n", pc_buf_str(&b));
	pc_buf_free(&b);
}

static void text_out(const struct whatif_req *q, const struct whatif_res *r)
{
	for (size_t i = 0; i < r->n_steps; i++) {
		const struct whatif_step *s = &r->steps[i];

		printf("  %s: %s", s->what,
		       s->held	    ? "held until its TLS ClientHello names the server"
		       : s->allowed ? "allowed"
				    : "refused");
		if (s->recorded && s->rule[0])
			printf(" by %s", s->rule);
		if (s->recorded && s->reason[0])
			printf(" (%s)", s->reason);
		putchar('\n');
	}
	if (r->allowed && q->port == 53 && r->n_steps > 1)
		printf("allowed: %s may resolve %s%s%s\n", q->sandbox, q->target,
		       r->rule[0] ? " by " : "", r->rule);
	else if (r->allowed)
		printf("allowed: %s %s port %u/%s%s%s%s\n", q->sandbox, q->target, q->port,
		       q->proto == IPPROTO_UDP ? "udp" : "tcp", r->rule[0] ? " by " : "", r->rule,
		       r->vault ? ", through the vault (a secret is bound to this host)" : "");
	else
		printf("refused: %s %s port %u/%s: %s\n", q->sandbox, q->target, q->port,
		       q->proto == IPPROTO_UDP ? "udp" : "tcp",
		       r->reason[0] ? r->reason : "not allowed");
}

int cli_policy_test(int argc, char **argv, const char *config)
{
	static const struct option lo[] = {{"proto", required_argument, NULL, 'p'},
					   {"address", required_argument, NULL, 'a'},
					   {"json", no_argument, NULL, 'j'},
					   {NULL, 0, NULL, 0}};
	struct whatif_req q = {.proto = IPPROTO_TCP};
	struct whatif_res r;
	struct config cfg;
	struct policy *pol = NULL;
	struct pc_err err = {0};
	struct pc_eng_reply er;
	char eb[1024], engine_hash[128] = "", *end;
	bool json = false;
	unsigned long port;
	int opt, rc;

	/* argv[0] "policy", argv[1] "test": options from argv[2] on (main
	 * reset getopt) */
	argc--;
	argv++;
	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (opt == 'p' && (strcmp(optarg, "tcp") == 0 || strcmp(optarg, "udp") == 0)) {
			q.proto = optarg[0] == 't' ? IPPROTO_TCP : IPPROTO_UDP;
		} else if (opt == 'a') {
			q.address = optarg;
		} else if (opt == 'j') {
			json = true;
		} else {
			pc_cli_error("policy test", "--proto: expected tcp or udp");
			return PC_EXIT_USAGE;
		}
	}
	if (argc - optind != 3) {
		pc_cli_error("policy test", "expected SANDBOX HOST|IP PORT");
		return PC_EXIT_USAGE;
	}
	q.sandbox = argv[optind];
	q.target = argv[optind + 1];
	port = strtoul(argv[optind + 2], &end, 10);
	if (!argv[optind + 2][0] || *end || port < 1 || port > 65535) {
		pc_cli_error("policy test", "PORT: expected a port from 1 to 65535, found '%s'",
			     argv[optind + 2]);
		return PC_EXIT_USAGE;
	}
	q.port = (uint16_t)port;
	if (config_load(config, &cfg, &err) < 0 ||
	    policy_load_dir(cfg.rules_dir, &cfg, &pol, &err) < 0) {
		pc_cli_error("policy test", "%s", pc_err_str(&err, eb, sizeof(eb)));
		return err.code == PC_ENOENT || err.code == PC_EIO || err.code == PC_EPERM
			   ? PC_EXIT_ERROR
			   : PC_EXIT_FAIL;
	}
	/* The engine may run another policy than rules.d holds: say which
	 * one this answer is for. */
	if (pc_engine_call(cfg.run_dir, PC_ENG_STATUS, 2000, &er, &err) == 0) {
		if (er.type == PC_ENG_STATUS_REPLY)
			pc_strlcpy(engine_hash, er.policy, sizeof(engine_hash));
		pc_eng_reply_free(&er);
	}
	rc = engine_whatif(&cfg, pol, &q, &r, &err);
	if (rc < 0) {
		pc_cli_error("policy test", "%s", pc_err_str(&err, eb, sizeof(eb)));
		policy_unref(pol);
		return rc == PC_ENOENT || rc == PC_EINVAL ? PC_EXIT_USAGE : PC_EXIT_ERROR;
	}
	if (json) {
		json_out(&q, &r, policy_hash(pol), engine_hash);
	} else {
		printf("policy %s (%s), sandbox %s:\n", policy_hash(pol),
		       !engine_hash[0] ? "the rules directory; the engine did not answer"
		       : strcmp(engine_hash, policy_hash(pol)) == 0 ? "the one the engine enforces"
								    : "the rules directory",
		       q.sandbox);
		text_out(&q, &r);
	}
	if (engine_hash[0] && strcmp(engine_hash, policy_hash(pol)) != 0)
		fprintf(stderr,
			"portcullis: warning: the engine enforces %s, not the policy in %s (%s): "
			"this answer is for %s; `portcullis reload` puts it in force\n",
			engine_hash, cfg.rules_dir, policy_hash(pol), cfg.rules_dir);
	policy_unref(pol);
	return fflush(stdout) != 0 ? PC_EXIT_ERROR : r.allowed ? PC_EXIT_OK : PC_EXIT_FAIL;
}
