/* portcullis-logd: the only writer of the verdict log. As root it binds the
 * socket, opens the log and its key, then drops to log.user and serves. */
#include "logd/logd_int.h"
#include "rules/rules.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: portcullis-logd [-c FILE] [-t] [-v] [--new-segment REASON]\n"
	       "  -c FILE, --config FILE  configuration (default /etc/portcullis/portcullis.yaml)\n"
	       "  -t        check the configuration, the key and the syslog settings, and exit\n"
	       "  -v        verbose\n"
	       "  -h, --help      this text\n"
	       "  -V, --version   print the version\n"
	       "  --new-segment REASON\n"
	       "            set the current log file aside and start a new segment whose\n"
	       "            first record says REASON (for a file that no longer verifies,\n"
	       "            or a new key)\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"new-segment", required_argument, NULL, 'N'},
					     {"config", required_argument, NULL, 'c'},
					     {"help", no_argument, NULL, 'h'},
					     {"version", no_argument, NULL, 'V'},
					     {NULL, 0, NULL, 0}};
	const char *config = "/etc/portcullis/portcullis.yaml", *new_segment = NULL;
	static struct logd_live live; /* the control thread reads it until exit */
	struct logd_server_conf sc = {.max_clients = 256, .live = &live};
	struct pc_ctl *ctl = NULL;
	struct note_signer *key = NULL;
	struct logw *w = NULL;
	struct logx *x = NULL;
	struct logx_conf xc;
	struct logx_stats xs;
	struct logd_stats st;
	struct config cfg;
	struct pc_err err = {0};
	bool test = false, root = geteuid() == 0;
	uid_t log_uid = (uid_t)-1;
	gid_t log_gid = (gid_t)-1;
	int opt, lfd = -1, cfd = -1, rc = 0; /* 0 or a PC_E* code; pc_daemon_exit maps it */
	enum pc_loglevel lvl = PC_LOG_INFO;
	sigset_t set;
	/* the witness: its key, its client thread, the metrics that name it */
	struct cosig_verifier wkey;
	struct logwc *wcl = NULL;
	struct logd_metrics_ctx mctx = {.live = &live};
	char witnessed[PC_PATH_MAX + 16];
	const char *anchors[1] = {witnessed};

	for (int i = 1; i < argc; i++) /* portcullis-logd --witness: another daemon */
		if (!strcmp(argv[i], "--witness"))
			return witness_main(argc, argv);
	while ((opt = getopt_long(argc, argv, "c:tvhV", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config = optarg;
			break;
		case 't':
			test = true;
			break;
		case 'v':
			lvl = PC_LOG_DEBUG;
			break;
		case 'N':
			new_segment = optarg;
			break;
		case 'V':
			printf("portcullis-logd %s\n", PC_VERSION);
			return PC_EXIT_OK;
		case 'h':
			usage(stdout);
			return PC_EXIT_OK;
		default:
			usage(stderr);
			return PC_EXIT_USAGE;
		}
	}
	if (optind != argc || (new_segment && !new_segment[0])) {
		usage(stderr);
		return PC_EXIT_USAGE;
	}
	pc_log_init("portcullis-logd", lvl);
	/* The signing key will be in this process's memory: no core dumps,
	 * no ptrace by the same user (dropping to log.user keeps it so). */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* -t: 1 for an invalid configuration (or key, or syslog settings),
	 * 3 for a file that could not be read, as portcullisd and the vault */
	if ((rc = config_load(config, &cfg, &err)) < 0) {
		char buf[1024];

		pc_log(PC_LOG_ERR, "%s", pc_err_str(&err, buf, sizeof(buf)));
		return pc_daemon_exit(rc, test);
	}
	/* What stops logd that the configuration decides (log.user; the
	 * senders' users): the list `policy lint` reports too. Not as a user
	 * (a test's logd): it drops to nobody then, and -t still answers for
	 * the real start. */
	if ((test || root) && (rc = config_start_check(&cfg, CFGD_LOGD, NULL, NULL, &err)) < 0) {
		char buf[1024];

		pc_log(PC_LOG_ERR, "%s", pc_err_str(&err, buf, sizeof(buf)));
		return pc_daemon_exit(rc, test);
	}
	if (root && pc_user_lookup(cfg.log.user, &log_uid, &log_gid, &err) < 0)
		return pc_daemon_exit(PC_EINVAL, test); /* checked just above */
	logd_xconf(&cfg, &xc);
	/* Who may write, and as which sender (portcullis.sender): root, the
	 * engine's and the vault's users, each a user of its own. */
	sc.allowed_uids[sc.n_allowed] = 0;
	sc.senders[sc.n_allowed++] = LOGREC_SENDER_ROOT;
	if ((rc = logd_allow_user(&sc, cfg.engine.user, LOGREC_SENDER_ENGINE, &err)) < 0 ||
	    (rc = logd_allow_user(&sc, cfg.vault.user, LOGREC_SENDER_VAULT, &err)) < 0 ||
	    /* the vault's workers (vault.worker_user) log as the vault */
	    (rc = logd_allow_user(&sc, cfg.vault.worker_user, LOGREC_SENDER_VAULT, &err)) < 0)
		goto fail;
	if (cfg.log.witness.address[0] &&
	    (rc = cosig_verifier_load(cfg.log.witness.key, &wkey, &err)) < 0) {
		pc_err_prefix(&err, "log.witness.key: ");
		goto fail;
	}
	snprintf(witnessed, sizeof(witnessed), "%s%s", cfg.log.file, LOGWC_SUFFIX);
	if (test) {
		/* The configuration, the key and the syslog settings; the log
		 * file itself is verified by every start (docs/logd.md). */
		if ((rc = logd_key_open(cfg.log.key, false, &key, &err)) < 0) {
			if (err.code != PC_ENOENT)
				goto fail;
			pc_log(PC_LOG_NOTICE, "%s: no key yet (generated at first start)",
			       cfg.log.key);
		}
		if ((rc = logx_check(&xc, &err)) < 0)
			goto fail;
		/* as log.user: what the daemon will need after its drop (3) */
		rc = logd_dir_writable_as(cfg.log.file, root ? cfg.log.user : NULL, log_uid, &err);
		if (rc == PC_ENOENT)
			pc_log(PC_LOG_NOTICE, "%s (created at first start)", err.msg);
		else if (rc < 0)
			goto fail;
		pc_log(PC_LOG_NOTICE, "%s: configuration ok", config);
		rc = 0;
		goto out;
	}

	/* Signals are read from a signalfd by the server; a full disk or a
	 * file size limit shows as a write error, not a signal. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGXFSZ, SIG_IGN);

	if (!root)
		pc_log(PC_LOG_WARN,
		       "not started as root: running as uid %ld without dropping "
		       "privileges",
		       (long)geteuid());
	if ((rc = logd_key_open(cfg.log.key, true, &key, &err)) < 0)
		goto fail;
	if ((rc = logd_dir_ensure(cfg.log.file, 0750, log_uid, log_gid, &err)) < 0 ||
	    (rc = logd_dir_ensure(cfg.log.socket, 0755, (uid_t)-1, (gid_t)-1, &err)) < 0)
		goto fail;
	/* Before anything is written as root: the log user must be able to
	 * create files there (the sidecar, rotation), or nothing would say so
	 * until the first checkpoint after the drop. */
	if ((rc = logd_dir_writable_as(cfg.log.file, root ? cfg.log.user : NULL, log_uid, &err)) <
	    0)
		goto fail;
	{
		struct note_verifier old[16];
		struct logw_conf wc = {
		    .file = cfg.log.file,
		    .cp_records = cfg.log.checkpoint_records,
		    .cp_ms = cfg.log.checkpoint_ms,
		    .rotate_bytes = cfg.log.rotate_bytes,
		    .fsync = cfg.log.fsync_batch ? LOGD_FSYNC_BATCH : LOGD_FSYNC_CHECKPOINT,
		    .owner = log_uid,
		    .group = log_gid,
		    .old_keys = old,
		    .n_old_keys = new_segment ? logd_old_keys_load(cfg.log.key, old, 16) : 0,
		    .anchors = anchors,
		    .n_anchors = access(witnessed, F_OK) == 0 ? 1 : 0,
		};

		char host[256] = "";

		/* observer.hostname of the records: the gateway that judged */
		if (gethostname(host, sizeof(host) - 1) == 0)
			logrec_set_observer(host);
		if ((rc = logw_open(&wc, key, new_segment, &w, &err)) < 0)
			goto fail;
	}
	/* The socket only once the log is ready: until then clients find
	 * nobody, rather than a logd that goes away. Anyone may connect();
	 * SO_PEERCRED decides who is served. */
	lfd = pc_unix_listen(cfg.log.socket, 0666, (uid_t)-1, (gid_t)-1, &err);
	if (lfd < 0) {
		rc = lfd;
		goto fail;
	}
	if (logw_notice(w)[0])
		pc_log(PC_LOG_WARN, "%s", logw_notice(w));
	/* The metrics socket: made by root, root's and 0600, before the drop. */
	{
		char path[PC_PATH_MAX + 32];

		snprintf(path, sizeof(path), "%s/%s", cfg.run_dir, LOGD_CTL_SOCK);
		if ((rc = logd_dir_ensure(path, 0755, (uid_t)-1, (gid_t)-1, &err)) < 0)
			goto fail;
		cfd = pc_unix_listen(path, 0600, (uid_t)-1, (gid_t)-1, &err);
		if (cfd < 0) {
			rc = cfd;
			goto fail;
		}
	}
	if (root && (rc = pc_privdrop(cfg.log.user, 0, &err)) < 0)
		goto fail;
	/* and once more as what this process now is */
	if ((rc = logd_dir_writable_as(cfg.log.file, root ? cfg.log.user : NULL, (uid_t)-1, &err)) <
	    0)
		goto fail;
	atomic_store(&live.start_ms, pc_now_real_ms());
	if (cfg.log.witness.address[0]) {
		struct logwc_conf wcc = {.address = cfg.log.witness.address,
					 .wkey = &wkey,
					 .logkey = note_signer_verifier(key),
					 .file = cfg.log.file,
					 .required = cfg.log.witness.required,
					 .max_lag_ms = cfg.log.witness.max_lag_ms};

		wcc.start_note = logw_sealed_note(w, &wcc.start_len);

		if ((rc = logwc_start(&wcc, &wcl, &err)) < 0)
			goto fail;
		sc.gate = logwc_gate;
		sc.gate_ctx = wcl;
		mctx.wc = wcl;
		pc_log(PC_LOG_NOTICE, "witness %s (%s+%08x)%s", cfg.log.witness.address, wkey.name,
		       wkey.hash,
		       cfg.log.witness.required ? ": required, records are refused when nothing "
						  "was cosigned for log.witness.max_lag_ms"
						: ": not required, logd keeps working without it");
	}
	rc = pc_ctl_start(cfd, true, logd_metrics_all, &mctx, &ctl, &err);
	cfd = -1; /* the control thread owns it, or it is closed */
	if (rc < 0)
		goto fail;
	{
		struct logw_export exp;

		logx_set_identity(cfg.log.syslog.facility, cfg.log.syslog.pen);
		if ((rc = logx_start(&xc, &x, &err)) < 0)
			goto fail;
		logx_hooks(x, &exp);
		if (wcl) {
			struct logw_export next = exp;

			logwc_hooks(wcl, &next, &exp);
		}
		logw_set_export(w, &exp);
	}
	struct logd_hup hup = {.config = config, .cfg = &cfg, .x = &x, .w = w, .wc = wcl};

	sc.on_hup = logd_on_hup;
	sc.hup_ctx = &hup;
	pc_log(PC_LOG_NOTICE, "serving %s, writing %s from seq %llu", cfg.log.socket, cfg.log.file,
	       (unsigned long long)logw_next_seq(w));
	pc_sd_notify("READY=1", NULL);
	if ((rc = logd_serve(lfd, w, &sc, &st, &err)) < 0) {
		pc_log(PC_LOG_ERR, "%s", err.msg);
		logw_close(w, NULL);
		w = NULL;
		goto out;
	}
	pc_log(PC_LOG_NOTICE,
	       "stopping: %llu records written, %llu malformed messages rejected, %llu "
	       "connections refused, %llu write errors",
	       (unsigned long long)st.records, (unsigned long long)st.malformed,
	       (unsigned long long)st.refused, (unsigned long long)st.write_errors);
	/* The final checkpoint: a failure here is a log left unsealed, exit
	 * status 3 like any other failure to keep the log (it returned 253
	 * once, main returning the negative code itself). */
	rc = logw_close(w, &err);
	w = NULL;
	/* the final checkpoint is staged: give the collectors a moment */
	logx_stop(x, 2000, &xs);
	x = NULL;
	pc_log(PC_LOG_NOTICE, "syslog export: %llu messages sent, %llu left unsent, %llu dropped",
	       (unsigned long long)xs.sent, (unsigned long long)xs.unsent,
	       (unsigned long long)xs.dropped);
	if (rc < 0)
		goto fail;
	goto out;
fail:
	pc_log(PC_LOG_ERR, "%s", err.msg);
out:
	pc_ctl_stop(ctl);
	logwc_stop(wcl);
	if (cfd >= 0)
		close(cfd);
	logw_close(w, NULL);
	logx_stop(x, 0, NULL);
	note_signer_free(key);
	if (lfd >= 0)
		close(lfd);
	return pc_daemon_exit(rc, test);
}
