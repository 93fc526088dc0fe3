/* checker: `portcullis cert` — issue a certificate (only after a proven
 * check, only once logd has the issuance record), verify one (signature,
 * key, and with --live the subjects against the live state), render one. */
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "checker/checker_int.h"

/* The sha256 of docs/spec.md, given by the Makefile when this file is
 * compiled: a certificate names the spec its guard was checked against. */
#ifndef PC_SPEC_SHA256
#error "PC_SPEC_SHA256 (the sha256 of docs/spec.md) is not defined: build with the Makefile"
#endif
#include "logd/logd.h"
#include "rules/rules.h"

static const char *assumptions[] = {
    "the kernel implements netfilter, bridge isolation, tc and routing as documented "
    "(nft(8): an accept ends only its base chain, a drop is final)",
    "the appliance host is not compromised: root on the gateway can change everything this "
    "certificate describes",
    "the state read at the time of issuance stays as it was; re-run `portcullis cert verify "
    "--live` to check it still holds",
    "the engine (portcullisd) judges queued packets as its policy says, and refuses when it "
    "cannot (fail closed)",
    "no program on the gateway relays the frames it captures: a packet socket bound to the "
    "bridge or a sandbox-facing device is refused, one bound to every interface (a capture "
    "such as tcpdump -i any) is listed in the evidence",
    "approved destinations are themselves secure: what they let the sandbox do is the "
    "administrator's responsibility",
    NULL};

static const char *not_covered[] = {
    "what an approved destination lets the agent do once it arrives there",
    "covert timing channels through approved flows",
    "compromise of the gateway host itself, and kernel bugs",
    "traffic the sandbox sends to other sandboxes through anything but this bridge",
    "changes made after the time of issuance (see --live)",
    NULL};

static void json_strlist(struct pc_buf *b, const char *const *v)
{
	pc_buf_printf(b, "[");
	for (int i = 0; v[i]; i++) {
		pc_buf_printf(b, "%s", i ? "," : "");
		pc_json_quote(b, v[i]);
	}
	pc_buf_printf(b, "]");
}

static void subject(struct pc_buf *b, bool first, const char *name, const char *digest)
{
	pc_buf_printf(b, "%s{\"name\":", first ? "" : ",");
	pc_json_quote(b, name);
	pc_buf_printf(b, ",\"digest\":{\"sha256\":");
	pc_json_quote(b, strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest);
	pc_buf_printf(b, "}}");
}

static void self_paths(char *self, char *engine, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", self, len - 1);
	char tmp[PATH_MAX];

	self[n > 0 ? n : 0] = 0;
	pc_strlcpy(tmp, self, sizeof(tmp));
	snprintf(engine, len, "%s/portcullisd", dirname(tmp));
}

void ck_json_obligations(const struct checker_result *r, struct pc_json *j);

static char *statement_build(const struct checker_result *res, const struct policy *pol,
			     const struct policy_sandbox *sb, uint64_t log_seq)
{
	struct pc_buf b = {0};
	struct pc_json j;
	char self[PATH_MAX], engine[PATH_MAX], ds[80], de[80], t[40];

	self_paths(self, engine, sizeof(self));
	ck_sha256_file(self, ds);
	ck_sha256_file(engine, de);
	pc_buf_printf(&b, "{\"_type\":\"https://in-toto.io/Statement/v1\",\"subject\":[");
	subject(&b, true, "nftables-ruleset", res->ruleset_digest);
	subject(&b, false, "network-snapshot", res->snapshot_digest);
	subject(&b, false, "policy", policy_hash(pol));
	subject(&b, false, "spec", PC_SPEC_SHA256);
	if (de[0])
		subject(&b, false, "portcullisd", de);
	if (ds[0])
		subject(&b, false, "portcullis", ds);
	pc_buf_printf(&b, "],\"predicateType\":\"https://portcullis.dev/containment/v1\","
			  "\"predicate\":{\"sandbox\":");
	pc_json_quote(&b, sb->name);
	pc_buf_printf(&b, ",\"bridge\":");
	pc_json_quote(&b, res->bridge);
	pc_buf_printf(
	    &b, ",\"issued\":\"%s\",\"policy\":", pc_time_rfc3339(res->time_ms, t, sizeof(t)));
	pc_json_quote(&b, policy_hash(pol));
	/* The guard's behaviour this build was checked against (docs/spec.md,
	 * hashed at build time): what "the guard does only its spec" means. */
	pc_buf_printf(&b, ",\"spec\":\"sha256:%s\"", PC_SPEC_SHA256);
	/* the model the proof was made in: what was read, what was assumed */
	pc_buf_printf(&b, ",\"model\":\"%s\"", CK_MODEL_VERSION);
	pc_buf_printf(&b, ",\"result\":\"proven\",\"our_tables\":\"%s\",\"log_seq\":%llu",
		      res->table_digest, (unsigned long long)log_seq);
	pc_buf_printf(&b, ",\"approved_destinations\":[");
	for (size_t i = 0; i < sb->n_allow; i++) {
		const struct policy_allow *a = &sb->allow[i];
		char host[POLICY_HOST_MAX + 2], ports[512] = "";
		size_t off = 0;

		if (a->kind == POLICY_ALLOW_CIDR) {
			char as[PC_ADDRSTRLEN];

			snprintf(host, sizeof(host), "%s/%u",
				 pc_addr_str(&a->cidr.addr, as, sizeof(as)), a->cidr.len);
		} else {
			snprintf(host, sizeof(host), "%s%s",
				 a->kind == POLICY_ALLOW_WILDCARD ? "*." : "", a->host);
		}
		for (size_t k = 0; k < a->n_ports && off < sizeof(ports) - 16; k++)
			off +=
			    (size_t)snprintf(ports + off, sizeof(ports) - off,
					     a->ports[k].lo == a->ports[k].hi ? "%s%u" : "%s%u-%u",
					     k ? "," : "", a->ports[k].lo, a->ports[k].hi);
		pc_buf_printf(&b, "%s{\"%s\":", i ? "," : "",
			      a->kind == POLICY_ALLOW_CIDR ? "cidr" : "host");
		pc_json_quote(&b, host);
		pc_buf_printf(&b, ",\"ports\":");
		pc_json_quote(&b, ports);
		pc_buf_printf(&b, ",\"proto\":\"%s\",\"rule\":",
			      a->proto == POLICY_PROTO_ANY   ? "tcp+udp"
			      : a->proto == POLICY_PROTO_UDP ? "udp"
							     : "tcp");
		pc_json_quote(&b, a->rule);
		pc_buf_printf(&b, "}");
	}
	pc_buf_printf(&b, "],\"secret_bindings\":[");
	for (size_t i = 0; i < sb->n_secrets; i++) {
		/* names and hosts only: a value never enters a certificate */
		pc_buf_printf(&b, "%s{\"name\":", i ? "," : "");
		pc_json_quote(&b, sb->secrets[i].name);
		pc_buf_printf(&b, ",\"host\":");
		pc_json_quote(&b, sb->secrets[i].host);
		pc_buf_printf(&b, ",\"port\":%u,\"header\":", sb->secrets[i].port);
		pc_json_quote(&b, sb->secrets[i].header);
		pc_buf_printf(&b, "}");
	}
	pc_buf_printf(&b, "],\"obligations\":");
	pc_json_init(&j, &b); /* a value of its own after the key */
	ck_json_obligations(res, &j);
	pc_buf_printf(&b, ",\"assumptions\":");
	json_strlist(&b, assumptions);
	pc_buf_printf(&b, ",\"not_covered\":");
	json_strlist(&b, not_covered);
	pc_buf_printf(&b, "}}");
	return pc_buf_take(&b, NULL); /* NULL after a failure */
}

static int write_out(const char *path, const char *data, struct pc_err *err)
{
	if (!path) {
		fputs(data, stdout);
		return fflush(stdout) == 0 ? 0 : pc_err_errno(err, PC_EIO, "stdout");
	}
	return pc_file_write_atomic(path, data, strlen(data), 0644, err);
}

int cert_cli_issue(int argc, char **argv, const struct config *cfg)
{
	static const struct option lo[] = {{"output", required_argument, NULL, 'o'},
					   {"html", no_argument, NULL, 'H'},
					   {"md", no_argument, NULL, 'M'},
					   {"bridge", required_argument, NULL, 'b'},
					   {NULL, 0, NULL, 0}};
	const char *out = NULL, *bridge = NULL, *name;
	int opt, rc = PC_EXIT_ERROR, fmt = 0;
	struct policy *pol = NULL;
	const struct policy_sandbox *sb;
	struct checker_result *res = NULL;
	struct logc *lc = NULL;
	struct pc_err err = {0};
	uint8_t sk[64], pk[32];
	char eb[1024], keyp[PC_PATH_MAX + 32], pubp[PC_PATH_MAX + 32], *stmt = NULL, *env = NULL;
	char msg[400], loaded[128];

	while ((opt = getopt_long(argc, argv, "o:b:", lo, NULL)) != -1) {
		switch (opt) {
		case 'o':
			out = optarg;
			break;
		case 'H':
			fmt = 'h';
			break;
		case 'M':
			fmt = 'm';
			break;
		case 'b':
			bridge = optarg;
			break;
		default:
			return PC_EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || (fmt && !out)) {
		fprintf(stderr, "usage: portcullis cert SANDBOX [-o FILE] [--html|--md] "
				"(a rendering needs -o; it goes to FILE.html / FILE.md)\n");
		return PC_EXIT_USAGE;
	}
	name = argv[optind];
	if (policy_load_dir(cfg->rules_dir, cfg, &pol, &err) < 0) {
		pc_cli_error("cert", "policy: %s", pc_err_str(&err, eb, sizeof(eb)));
		return PC_EXIT_ERROR;
	}
	sb = policy_sandbox_by_name(pol, name);
	if (!sb) {
		pc_cli_error("cert", "no sandbox '%s' in the policy", name);
		rc = PC_EXIT_FAIL;
		goto done;
	}
	/* A certificate names the policy it proves; one for files the engine
	 * has not put in force would describe rules no packet meets. */
	if (ck_engine_policy_hash(cfg, loaded, sizeof(loaded)) == 0 &&
	    strcmp(loaded, policy_hash(pol)) != 0) {
		pc_cli_error("cert",
			     "refused: the policy in %s (%s) is not the one the engine enforces "
			     "(%s); run `portcullis reload` first",
			     cfg->rules_dir, policy_hash(pol), loaded);
		rc = PC_EXIT_FAIL;
		goto done;
	}
	if (checker_run(cfg, NULL, bridge, &res, &err) < 0) {
		pc_cli_error("cert", "check: %s", pc_err_str(&err, eb, sizeof(eb)));
		goto done;
	}
	if (res->status != CHECKER_PROVEN) {
		char *txt = checker_result_text(res, false);

		if (txt)
			fputs(txt, stderr);
		free(txt);
		pc_cli_error("cert", "refused: containment of %s is not proven", name);
		rc = PC_EXIT_FAIL;
		goto done;
	}
	if (cert_key_paths(cfg, keyp, pubp, sizeof(keyp)) < 0 ||
	    cert_key_load_or_create(keyp, pubp, true, sk, pk, &err) < 0) {
		pc_cli_error("cert", "appliance key: %s", pc_err_str(&err, eb, sizeof(eb)));
		goto done;
	}
	/* No record, no certificate: issuance is logged before it happens. */
	snprintf(msg, sizeof(msg), "certificate issued for %s: ruleset %.80s snapshot %.80s", name,
		 res->ruleset_digest, res->snapshot_digest);
	{
		struct logrec rec = {.action = LOGREC_CERT_ISSUE,
				     .verdict = LOGREC_NONE,
				     .sandbox = name,
				     .policy = policy_hash(pol),
				     .reason = "containment proven",
				     .message = msg};

		if (logc_open(cfg->log.socket, &lc, &err) < 0 ||
		    logc_send_sync(lc, &rec, 3000, &err) < 0) {
			pc_cli_error("cert", "refused: the issuance could not be logged: %s",
				     pc_err_str(&err, eb, sizeof(eb)));
			goto done;
		}
	}
	stmt = statement_build(res, pol, sb, logc_last_seq(lc));
	if (!stmt || cert_env_sign(stmt, strlen(stmt), sk, pk, &env, &err) < 0) {
		pc_cli_error("cert", "signing failed");
		goto done;
	}
	if (write_out(out, env, &err) < 0) {
		pc_cli_error("cert", "%s", pc_err_str(&err, eb, sizeof(eb)));
		goto done;
	}
	if (fmt) {
		struct jv *st = jv_parse(stmt, strlen(stmt));
		char *r = st ? cert_render(st, fmt == 'h') : NULL, path[PC_PATH_MAX + 8];

		snprintf(path, sizeof(path), "%s.%s", out, fmt == 'h' ? "html" : "md");
		jv_free(st);
		if (!r || pc_file_write_atomic(path, r, strlen(r), 0644, &err) < 0) {
			free(r);
			pc_cli_error("cert", "rendering failed");
			goto done;
		}
		free(r);
	}
	rc = PC_EXIT_OK;
done:
	sodium_memzero(sk, sizeof(sk));
	logc_close(lc);
	free(stmt);
	free(env);
	checker_result_free(res);
	policy_unref(pol);
	return rc;
}

int cert_cli_key(int argc, char **argv, const struct config *cfg)
{
	char keyp[PC_PATH_MAX + 32], pubp[PC_PATH_MAX + 32], eb[1024], *pem = NULL;
	uint8_t sk[64], pk[32];
	struct pc_err err = {0};
	size_t len = 0;
	int rc;

	(void)argc;
	if (cert_key_paths(cfg, keyp, pubp, sizeof(keyp)) < 0)
		return PC_EXIT_ERROR;
	rc = cert_key_load_or_create(keyp, pubp, strcmp(argv[0], "keygen") == 0, sk, pk, &err);
	sodium_memzero(sk, sizeof(sk));
	if (rc < 0) {
		pc_cli_error("cert key", "%s", pc_err_str(&err, eb, sizeof(eb)));
		return PC_EXIT_ERROR;
	}
	if (pc_file_read(pubp, 4096, &pem, &len, &err) < 0) {
		pc_cli_error("cert key", "%s", pc_err_str(&err, eb, sizeof(eb)));
		return PC_EXIT_ERROR;
	}
	fputs(pem, stdout);
	free(pem);
	return PC_EXIT_OK;
}

/* --live: do the subjects still describe the kernel and the files? */
static int live_compare(const struct jv *stmt, const char *config, const char *bridge)
{
	struct config cfg;
	struct pc_err err = {0};
	struct checker_result *res = NULL;
	struct policy *pol = NULL;
	const struct jv *subj = jv_get(stmt, "subject"), *pred = jv_get(stmt, "predicate");
	char eb[1024], self[PATH_MAX], engine[PATH_MAX], ds[80], de[80];
	int bad = 0;

	if (config_load(config, &cfg, &err) < 0 ||
	    policy_load_dir(cfg.rules_dir, &cfg, &pol, &err) < 0) {
		pc_cli_error("cert verify", "%s", pc_err_str(&err, eb, sizeof(eb)));
		return PC_EXIT_ERROR;
	}
	if (!bridge)
		bridge = jv_str(jv_get(pred, "bridge"));
	if (checker_run(&cfg, NULL, bridge, &res, &err) < 0) {
		pc_cli_error("cert verify", "check: %s", pc_err_str(&err, eb, sizeof(eb)));
		policy_unref(pol);
		return PC_EXIT_ERROR;
	}
	self_paths(self, engine, sizeof(self));
	ck_sha256_file(self, ds);
	ck_sha256_file(engine, de);
	for (size_t i = 0; subj && subj->type == JV_ARRAY && i < subj->n; i++) {
		const char *n = jv_str(jv_get(subj->items[i], "name"));
		const char *d = jv_str(jv_get(jv_get(subj->items[i], "digest"), "sha256"));
		const char *now = NULL;

		if (!n || !d)
			continue;
		if (strcmp(n, "nftables-ruleset") == 0)
			now = res->ruleset_digest;
		else if (strcmp(n, "network-snapshot") == 0)
			now = res->snapshot_digest;
		else if (strcmp(n, "policy") == 0)
			now = policy_hash(pol);
		else if (strcmp(n, "spec") == 0)
			now = "sha256:" PC_SPEC_SHA256; /* the spec this build implements */
		else if (strcmp(n, "portcullisd") == 0)
			now = de;
		else if (strcmp(n, "portcullis") == 0)
			now = ds;
		if (!now || strncmp(now, "sha256:", 7) != 0 || strcmp(now + 7, d) != 0) {
			printf("stale: subject %s was sha256:%s, is now %s\n", n, d,
			       now && now[0] ? now : "(unavailable)");
			bad++;
		}
	}
	{
		const char *m = jv_str(jv_get(pred, "model"));

		if (!m || strcmp(m, CK_MODEL_VERSION) != 0) {
			printf("stale: proven under model %s, this build checks with %s\n",
			       m ? m : "(none: before models were versioned)", CK_MODEL_VERSION);
			bad++;
		}
	}
	if (res->status != CHECKER_PROVEN) {
		printf("stale: containment is no longer proven (%zu finding(s))\n",
		       res->n_findings);
		for (size_t i = 0; i < res->n_findings; i++)
			printf("  %s\n", res->findings[i].text);
		bad++;
	}
	checker_result_free(res);
	policy_unref(pol);
	return bad ? PC_EXIT_FAIL : PC_EXIT_OK;
}

/* cert verify --json: {"file","valid","sandbox","issued","error","live"};
 * live: -1 not asked, 0 differs, 1 matches. */
static void cert_verify_json(const char *file, const char *sandbox, const char *issued,
			     const char *error, int live)
{
	struct pc_buf b = {0};
	struct pc_json j;

	pc_json_init(&j, &b);
	pc_json_obj(&j);
	pc_json_kstr(&j, "file", file);
	pc_json_key(&j, "valid");
	pc_json_bool(&j, !error);
	if (sandbox)
		pc_json_kstr(&j, "sandbox", sandbox);
	if (issued)
		pc_json_kstr(&j, "issued", issued);
	if (error)
		pc_json_kstr(&j, "error", error);
	if (live >= 0) {
		pc_json_key(&j, "live");
		pc_json_bool(&j, live == 1);
	}
	pc_json_obj_end(&j);
	printf("%s\n", pc_buf_str(&b));
	pc_buf_free(&b);
}

int cert_cli_sub(int argc, char **argv, const char *config)
{
	static const struct option lo[] = {
	    {"key", required_argument, NULL, 'k'},    {"live", no_argument, NULL, 'l'},
	    {"bridge", required_argument, NULL, 'b'}, {"html", no_argument, NULL, 'H'},
	    {"md", no_argument, NULL, 'M'},	      {"output", required_argument, NULL, 'o'},
	    {"json", no_argument, NULL, 'j'},	      {NULL, 0, NULL, 0}};
	const char *keyf = NULL, *bridge = NULL, *out = NULL;
	bool live = false, render = strcmp(argv[0], "render") == 0, html = false, json = false;
	struct cert_env env;
	struct pc_err err = {0};
	char *buf = NULL, eb[1024], pubp[PC_PATH_MAX + 32];
	size_t len = 0;
	uint8_t pk[32];
	int opt, rc;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "k:b:o:", lo, NULL)) != -1) {
		switch (opt) {
		case 'k':
			keyf = optarg;
			break;
		case 'l':
			live = true;
			break;
		case 'b':
			bridge = optarg;
			break;
		case 'H':
			html = true;
			break;
		case 'M':
			html = false;
			break;
		case 'o':
			out = optarg;
			break;
		case 'j':
			json = !render;
			break;
		default:
			return PC_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: portcullis cert verify FILE [--key PUB] [--live]\n");
		return PC_EXIT_USAGE;
	}
	if (!keyf) {
		struct config cfg;
		char keyp[PC_PATH_MAX + 32];

		if (config_load(config, &cfg, &err) < 0 ||
		    cert_key_paths(&cfg, keyp, pubp, sizeof(pubp)) < 0) {
			pc_cli_error("cert verify", "no --key and no configuration: %s",
				     pc_err_str(&err, eb, sizeof(eb)));
			return PC_EXIT_ERROR;
		}
		keyf = pubp;
	}
	if (cert_pub_load(keyf, pk, &err) < 0 ||
	    pc_file_read(argv[optind], 1u << 22, &buf, &len, &err) < 0) {
		pc_cli_error("cert verify", "%s", pc_err_str(&err, eb, sizeof(eb)));
		return PC_EXIT_ERROR;
	}
	rc = cert_env_parse(buf, len, &env, &err);
	free(buf);
	if (rc < 0) {
		pc_cli_error("cert verify", "%s: %s", argv[optind],
			     pc_err_str(&err, eb, sizeof(eb)));
		return PC_EXIT_FAIL;
	}
	if (cert_env_verify(&env, pk, &err) < 0) {
		pc_cli_error("cert verify", "%s: %s", argv[optind],
			     pc_err_str(&err, eb, sizeof(eb)));
		if (json)
			cert_verify_json(argv[optind], NULL, NULL, err.msg, -1);
		cert_env_free(&env);
		return PC_EXIT_FAIL;
	}
	if (render) {
		char *r = cert_render(env.statement, html);

		rc = r && write_out(out, r, &err) == 0 ? PC_EXIT_OK : PC_EXIT_ERROR;
		free(r);
		cert_env_free(&env);
		return rc;
	}
	if (json) {
		/* --json: one object on stdout; what --live compares goes to stderr */
		int saved = -1;

		rc = PC_EXIT_OK;
		if (live) {
			fflush(stdout);
			saved = dup(STDOUT_FILENO);
			if (saved >= 0 && dup2(STDERR_FILENO, STDOUT_FILENO) >= 0)
				rc = live_compare(env.statement, config, bridge);
			else
				rc = PC_EXIT_ERROR;
			fflush(stdout);
			if (saved >= 0) {
				dup2(saved, STDOUT_FILENO);
				close(saved);
			}
		}
		cert_verify_json(argv[optind],
				 jv_str(jv_get(jv_get(env.statement, "predicate"), "sandbox")),
				 jv_str(jv_get(jv_get(env.statement, "predicate"), "issued")), NULL,
				 live ? rc == PC_EXIT_OK : -1);
		cert_env_free(&env);
		return rc;
	}
	printf("signature valid: %s for sandbox %s, issued %s\n", argv[optind],
	       jv_str(jv_get(jv_get(env.statement, "predicate"), "sandbox")) ?: "?",
	       jv_str(jv_get(jv_get(env.statement, "predicate"), "issued")) ?: "?");
	rc = live ? live_compare(env.statement, config, bridge) : PC_EXIT_OK;
	if (live && rc == PC_EXIT_OK)
		printf("live: every subject still matches the appliance\n");
	cert_env_free(&env);
	return rc;
}
