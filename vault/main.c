/* portcullis-vault: its options, then the worker's life (-W, worker.c) or
 * the monitor's (daemon.c): it binds its listener and reads its keys as
 * root, drops to vault.user (keeping what starting workers of their own user
 * needs), then hands each redirected sandbox connection to that sandbox's
 * worker and reloads policy and secrets on SIGHUP. */
#include "vault/vault_int.h"

#include <getopt.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>

static int usage(FILE *f)
{
	fprintf(
	    f, "usage: portcullis-vault [-c FILE] [-t]\n"
	       "  -c FILE, --config FILE  configuration (default /etc/portcullis/portcullis.yaml)\n"
	       "  -t       check the configuration, CA, policy and secrets, then exit\n"
	       "  -W NAME  run as the worker of sandbox NAME (started by the vault itself)\n"
	       "  -h, --help     this text\n"
	       "  -V, --version  print the version\n");
	return f == stdout ? PC_EXIT_OK : PC_EXIT_USAGE;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {{"help", no_argument, NULL, 'h'},
					      {"config", required_argument, NULL, 'c'},
					      {"version", no_argument, NULL, 'V'},
					      {NULL, 0, NULL, 0}};
	const char *config = "/etc/portcullis/portcullis.yaml", *worker = NULL;
	struct vault_daemon d = {0};
	struct rlimit nocore = {0, 0};
	struct pc_err e = {0};
	bool test_only = false;
	int opt, rc = 0; /* rc: 0 or a PC_E* code; pc_daemon_exit maps it */
	sigset_t sigs;
	char b[700];

	/* before anything secret is in memory: no core dumps, no ptrace by
	 * the same user */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	setrlimit(RLIMIT_CORE, &nocore);
	pc_log_init("portcullis-vault", PC_LOG_INFO);
	/* blocked before any thread starts (the log thread starts in setup),
	 * so that signals only ever reach the accept loop's signalfd */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	while ((opt = getopt_long(argc, argv, "c:thVW:", lopts, NULL)) != -1) {
		switch (opt) {
		case 'W': /* a per-sandbox worker, started by the monitor */
			worker = optarg;
			break;
		case 'c':
			config = optarg;
			break;
		case 't':
			test_only = true;
			break;
		case 'h':
			return usage(stdout);
		case 'V':
			printf("portcullis-vault %s\n", PC_VERSION);
			return PC_EXIT_OK;
		default:
			return usage(stderr);
		}
	}
	if (optind != argc)
		return usage(stderr);
	if (sodium_init() < 0) {
		pc_log(PC_LOG_ERR, "libsodium failed to initialise");
		return pc_daemon_exit(PC_EIO, test_only);
	}
	if (worker)
		return vault_worker_main(config, worker);
	if ((rc = vault_daemon_setup(&d, config, test_only, &e)) < 0) {
		pc_log(PC_LOG_ERR, "%s", pc_err_str(&e, b, sizeof(b)));
		vault_daemon_end(&d);
		return pc_daemon_exit(rc, test_only);
	}
	if (test_only)
		printf("portcullis-vault: configuration ok (policy %s, %zu secrets)\n",
		       policy_hash(d.state->policy), d.n_secrets);
	else
		rc = vault_daemon_serve(&d, &sigs);
	vault_daemon_end(&d);
	return pc_daemon_exit(rc, test_only);
}
