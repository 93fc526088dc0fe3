/* bench/audit: records per second `portcullis log audit` reads (the log
 * verified, then every verdict replayed through the spec's model), next
 * to `portcullis log verify` alone on the same file, the baseline.
 *
 * The log is written by logd's own writer (logw) with a fresh key, in
 * groups of four records as the guard leaves them: a sandbox's allowed
 * query, its answer (dns-learn), an allowed connect to the learned address
 * (UDP, or a held TCP flow allowed on its server name, alternately) and a
 * refused connect to an address no answer taught; 16 sandboxes. Every
 * verdict is one the spec allows: the run fails unless the audit confirms
 * all of them.
 *   bench/audit.c -P PORTCULLIS [-n RECORDS] [-r ROUNDS] [-d DIR] [--json FILE] */
#include "logd/logd_int.h"
#include "rules/rules_int.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SANDBOXES 16

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, const struct pc_err *err)
{
	fprintf(stderr, "bench/audit: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
	exit(1);
}

static void put(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "w");

	if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0)
		die(path, NULL);
}

/* The group's k-th record (i = 4k + j). */
static void rec_fill(struct logrec *r, uint64_t i, const char *hash, char *name, char *ans,
		     char *sb)
{
	uint64_t k = i / 4;
	unsigned s = (unsigned)(k % SANDBOXES);
	char a[64];

	memset(r, 0, sizeof(*r));
	snprintf(sb, 32, "agent-%u", s);
	snprintf(name, 64, "h%llu.example.com", (unsigned long long)(k % 1000));
	r->sandbox = sb;
	r->policy = hash;
	r->src.addr.family = AF_INET;
	snprintf(a, sizeof(a), "10.77.0.%u", s + 10);
	inet_pton(AF_INET, a, r->src.addr.a);
	r->src.port = (uint16_t)(20000 + k % 30000);
	r->dst.addr.family = AF_INET;
	snprintf(ans, 64, "93.184.%u.%u", (unsigned)(k % 200), s + 1);
	switch (i % 4) {
	case 0: /* the query */
		r->action = LOGREC_DNS_QUERY;
		r->verdict = LOGREC_ALLOWED;
		r->reason = "name allowed";
		r->transport = IPPROTO_UDP;
		inet_pton(AF_INET, "198.51.100.53", r->dst.addr.a);
		r->dst.port = 53;
		r->dns_name = name;
		r->dns_type = 1;
		break;
	case 1: /* its answer */
		r->action = LOGREC_DNS_LEARN;
		r->reason = "answer released, addresses learned";
		r->transport = IPPROTO_UDP;
		r->dst = r->src;
		r->src.addr.family = AF_INET;
		inet_pton(AF_INET, "198.51.100.53", r->src.addr.a);
		r->src.port = 53;
		r->dns_name = name;
		r->dns_type = 1;
		r->dns_answers = ans;
		r->dns_rcode = "NOERROR";
		break;
	case 2: /* the flow to what it taught */
		r->action = LOGREC_CONNECT;
		r->verdict = LOGREC_ALLOWED;
		r->domain = name;
		inet_pton(AF_INET, ans, r->dst.addr.a);
		r->dst.port = 443;
		r->src.port++;
		if (k % 2) {
			r->transport = IPPROTO_TCP;
			r->reason = "allowed host; TLS server name checked";
			r->sni = name;
		} else {
			r->transport = IPPROTO_UDP;
			r->reason = "allowed host";
		}
		break;
	default: /* an address nothing taught */
		r->action = LOGREC_CONNECT;
		r->verdict = LOGREC_REFUSED;
		r->reason = "no allowed name resolved to this address";
		r->transport = IPPROTO_TCP;
		snprintf(a, sizeof(a), "8.8.%u.1", (unsigned)(k % 200));
		inet_pton(AF_INET, a, r->dst.addr.a);
		r->dst.port = 443;
		r->src.port += 2;
		break;
	}
}

/* Wall seconds of one command, its output to out (a file); its exit
 * status in *rc. */
static double timed(const char *const argv[], const char *out, int *rc)
{
	double t0;
	pid_t pid;

	fflush(stdout); /* or the child prints what the parent buffered */
	t0 = now_s();
	pid = fork();
	int st;

	if (pid < 0)
		die("fork", NULL);
	if (pid == 0) {
		if (!freopen(out, "w", stdout))
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		die("waitpid", NULL);
	*rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	return now_s() - t0;
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"json", required_argument, NULL, 'J'},
					   {NULL, 0, NULL, 0}};
	uint64_t n = 1000000;
	int rounds = 3, opt, rc;
	const char *portcullis = NULL, *json = NULL;
	char dir[PC_PATH_MAX] = "", conf[PC_PATH_MAX + 32], rules[PC_PATH_MAX + 32],
	     file[PC_PATH_MAX + 32], keyp[PC_PATH_MAX + 32], store[PC_PATH_MAX + 32],
	     out[PC_PATH_MAX + 32], path[PC_PATH_MAX + 128], hash[80], name[64], ans[64], sb[32];
	struct config cfg;
	struct policy *pol;
	struct note_signer *key;
	struct logw_conf wc = {
	    .cp_ms = 1000, .cp_records = 1000, .owner = (uid_t)-1, .group = (gid_t)-1};
	struct logw *w;
	struct logrec r;
	struct pc_err err = {0};
	struct pc_buf y;
	double tv[16], ta[16];
	const char *canon;
	size_t clen;

	while ((opt = getopt_long(argc, argv, "P:n:r:d:", lo, NULL)) != -1) {
		if (opt == 'P')
			portcullis = optarg;
		else if (opt == 'n')
			n = strtoull(optarg, NULL, 10) / 4 * 4;
		else if (opt == 'r')
			rounds = atoi(optarg);
		else if (opt == 'd')
			snprintf(dir, sizeof(dir), "%s", optarg);
		else if (opt == 'J')
			json = optarg;
		else
			return 2;
	}
	if (!portcullis || n == 0 || rounds < 1 || rounds > 16)
		return fprintf(stderr,
			       "usage: audit -P PORTCULLIS [-n RECORDS] [-r ROUNDS] [-d DIR] "
			       "[--json FILE]\n"),
		       2;
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/pc-bench-audit.XXXXXX");
		if (!mkdtemp(dir))
			die("mkdtemp", NULL);
	}
	snprintf(rules, sizeof(rules), "%s/rules.d", dir);
	snprintf(store, sizeof(store), "%s/policies", dir);
	snprintf(file, sizeof(file), "%s/verdicts.jsonl", dir);
	snprintf(keyp, sizeof(keyp), "%s/log.key", dir);
	snprintf(conf, sizeof(conf), "%s/portcullis.yaml", dir);
	snprintf(out, sizeof(out), "%s/audit.out", dir);
	mkdir(rules, 0755);
	mkdir(store, 0755);

	/* the policy: every sandbox may reach *.example.com on 443 */
	pc_buf_init(&y, 0, 0);
	for (unsigned s = 0; s < SANDBOXES; s++)
		pc_buf_printf(&y,
			      "%ssandbox: agent-%u\nmatch: { source: [10.77.0.%u/32] }\n"
			      "allow:\n  - host: \"*.example.com\"\n    ports: [443]\n"
			      "    proto: any\n",
			      s ? "---\n" : "", s, s + 10);
	snprintf(path, sizeof(path), "%s/agents.yaml", rules);
	put(path, y.p, y.len);
	pc_buf_free(&y);
	pc_buf_init(&y, 0, 0);
	pc_buf_printf(&y,
		      "bridge: pcbr0\nuplinks: [eth0]\nrules: %s\nstate_dir: %s\n"
		      "dns:\n  resolvers: [198.51.100.53]\nlog:\n  file: %s\n  key: %s\n",
		      rules, dir, file, keyp);
	put(conf, y.p, y.len);
	pc_buf_free(&y);
	if (config_load(conf, &cfg, &err) < 0 || policy_load_dir(rules, &cfg, &pol, &err) < 0)
		die("policy", &err);
	pc_strlcpy(hash, policy_hash(pol), sizeof(hash));
	canon = policy_canonical(pol, &clen);
	snprintf(path, sizeof(path), "%s/%s", store, hash);
	put(path, canon, clen);

	/* the log, signed by a key of its own */
	if (sodium_init() < 0 || note_signer_generate("bench/portcullis-log", &key, &err) < 0 ||
	    note_key_write(keyp, key, &err) < 0)
		die("key", &err);
	wc.file = file;
	unlink(file);
	if (logw_open(&wc, key, NULL, &w, &err) < 0)
		die("open", &err);
	for (uint64_t i = 0; i < n; i++) {
		rec_fill(&r, i, hash, name, ans, sb);
		if (logw_append(w, &r, NULL, &err) < 0)
			die("append", &err);
		if ((i + 1) % 64 == 0 && logw_commit(w, &err) < 0)
			die("commit", &err);
	}
	if (logw_close(w, &err) < 0)
		die("close", &err);

	printf("portcullis log audit benchmark: %llu records (%u sandboxes: query, answer, "
	       "allowed connect, refused connect), %d rounds, files in %s\n",
	       (unsigned long long)n, SANDBOXES, rounds, dir);
	printf("  %-52s %12s %8s\n", "", "records/s", "ratio");
	for (int i = 0; i < rounds; i++) {
		const char *va[] = {portcullis, "-c", conf, "log", "verify", file, NULL};
		const char *aa[] = {portcullis,	  "-c",	 conf, "log", "audit",
				    "--policies", store, file, NULL};

		tv[i] = timed(va, out, &rc);
		if (rc != 0)
			die("log verify failed", NULL);
		ta[i] = timed(aa, out, &rc);
		if (rc != 0) {
			fprintf(stderr, "bench/audit: log audit exit %d (see %s)\n", rc, out);
			return 1;
		}
		printf("round %d: verify %.0f records/s, audit %.0f records/s\n", i + 1,
		       (double)n / tv[i], (double)n / ta[i]);
	}
	{
		double sv[16], sa[16];

		memcpy(sv, tv, sizeof(double) * (size_t)rounds);
		memcpy(sa, ta, sizeof(double) * (size_t)rounds);
		qsort(sv, (size_t)rounds, sizeof(double), dcmp);
		qsort(sa, (size_t)rounds, sizeof(double), dcmp);
		printf("  %-52s %12.0f %8s\n", "log verify (the baseline)",
		       (double)n / sv[rounds / 2], "1.00");
		printf("  %-52s %12.0f %8.2f\n", "log audit (verify, then the model's replay)",
		       (double)n / sa[rounds / 2], sv[rounds / 2] / sa[rounds / 2]);
	}
	if (json) {
		FILE *f = fopen(json, "w");

		if (!f)
			die(json, NULL);
		fprintf(f,
			"{\"bench\":\"audit\",\"title\":\"portcullis log audit\","
			"\"workload\":\"%llu records of %u sandboxes (query, answer, allowed "
			"connect, refused connect) written by logd's writer, audited "
			"against the policy store\",\"command\":\"bench/audit -n %llu -r %d\","
			"\"rounds\":%d,\"metrics\":[{\"name\":\"audit_records_per_s\","
			"\"label\":\"records audited per second\",\"unit\":\"records/s\","
			"\"better\":\"higher\",\"baseline\":{\"name\":\"log verify alone\","
			"\"samples\":[",
			(unsigned long long)n, SANDBOXES, (unsigned long long)n, rounds, rounds);
		for (int i = 0; i < rounds; i++)
			fprintf(f, "%s%.0f", i ? "," : "", (double)n / tv[i]);
		fprintf(f, "]},\"subject\":{\"name\":\"log audit (verify and replay)\","
			   "\"samples\":[");
		for (int i = 0; i < rounds; i++)
			fprintf(f, "%s%.0f", i ? "," : "", (double)n / ta[i]);
		fprintf(f, "]},\"target\":{\"kind\":\"min\",\"value\":200000,"
			   "\"text\":\">= 200,000 records/s\"}}],\"notes\":[\"every verdict "
			   "of the log is confirmed, or the run fails\"]}\n");
		fclose(f);
	}
	note_signer_free(key);
	policy_unref(pol);
	return 0;
}
