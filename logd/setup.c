/* portcullis-logd's setup, kept out of main.c: directories (and whether
 * the log user can write there), the signing key (created at first start),
 * earlier public keys, who may connect and as which sender, the syslog
 * settings from the configuration and their reload on SIGHUP. */
#include "logd/logd_int.h"
#include "rules/rules.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void logd_key_default_name(char *buf, size_t len)
{
	char host[64];

	if (gethostname(host, sizeof(host)) < 0 || !host[0])
		pc_strlcpy(host, "localhost", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	snprintf(buf, len, "%s/portcullis-log", host);
}

void logd_xconf(const struct config *cfg, struct logx_conf *xc)
{
	*xc = (struct logx_conf){
	    .local = cfg->log.syslog.local,
	    .local_path = cfg->log.syslog.socket,
	    .remote = cfg->log.syslog.remote,
	    .tls = cfg->log.syslog.tls,
	    .ca = cfg->log.syslog.ca,
	    .spool_records = cfg->log.syslog.spool_records,
	};
}

/* mkdir -p for the last component only, owned by the log user when
 * created: the daemon must create files there after dropping root. */
int logd_dir_ensure(const char *file, mode_t mode, uid_t uid, gid_t gid, struct pc_err *err)
{
	char dir[PC_PATH_MAX];
	char *slash;

	pc_strlcpy(dir, file, sizeof(dir));
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, mode) < 0) {
		if (errno == EEXIST)
			return 0;
		return pc_err_errno(err, PC_EIO, "creating %s", dir);
	}
	if (uid != (uid_t)-1 && chown(dir, uid, gid) < 0)
		return pc_err_errno(err, PC_EIO, "chown %s", dir);
	return 0;
}

/* The signing key, generated on first start. */
int logd_key_open(const char *path, bool create, struct note_signer **out, struct pc_err *err)
{
	char name[NOTE_NAME_MAX];
	struct note_signer *s;
	int rc = note_key_load(path, out, err);

	if (rc != PC_ENOENT || !create)
		return rc;
	logd_key_default_name(name, sizeof(name));
	if ((rc = note_signer_generate(name, &s, err)) < 0)
		return rc;
	if ((rc = logd_dir_ensure(path, 0755, (uid_t)-1, (gid_t)-1, err)) < 0 ||
	    (rc = note_key_write(path, s, err)) < 0) {
		note_signer_free(s);
		return rc;
	}
	pc_log(PC_LOG_NOTICE, "generated the log signing key %s (public key %s.pub)", path, path);
	*out = s;
	return 0;
}

/* The public keys keygen --force kept: <key>.pub.<hash>. */
size_t logd_old_keys_load(const char *key, struct note_verifier *out, size_t max)
{
	char pat[PC_PATH_MAX + 16];
	glob_t g;
	size_t n = 0;

	snprintf(pat, sizeof(pat), "%s.pub.*", key);
	if (glob(pat, 0, NULL, &g) != 0)
		return 0;
	for (size_t i = 0; i < g.gl_pathc && n < max; i++)
		if (note_verifier_load(g.gl_pathv[i], &out[n], NULL) == 0)
			n++;
	globfree(&g);
	return n;
}

static bool syslog_same(const struct config *a, const struct config *b)
{
	return a->log.syslog.local == b->log.syslog.local &&
	       a->log.syslog.tls == b->log.syslog.tls &&
	       a->log.syslog.spool_records == b->log.syslog.spool_records &&
	       !strcmp(a->log.syslog.remote, b->log.syslog.remote) &&
	       !strcmp(a->log.syslog.ca, b->log.syslog.ca) &&
	       !strcmp(a->log.syslog.socket, b->log.syslog.socket);
}

void logd_on_hup(void *ctx)
{
	struct logd_hup *h = ctx;
	struct config cfg;
	struct logx_conf xc;
	struct logw_export exp;
	struct logx *nx = NULL;
	struct pc_err err;

	if (config_load(h->config, &cfg, &err) < 0) {
		pc_log(PC_LOG_ERR, "SIGHUP: %s: %s; keeping the syslog settings", h->config,
		       err.msg);
		return;
	}
	/* the identity of the messages is set once, at start: the export
	 * threads read it without a lock */
	if (cfg.log.syslog.facility != h->cfg->log.syslog.facility ||
	    cfg.log.syslog.pen != h->cfg->log.syslog.pen)
		pc_log(PC_LOG_WARN, "SIGHUP: log.syslog.facility and "
				    "log.syslog.enterprise_number take effect at the next start");
	if (syslog_same(&cfg, h->cfg))
		return;
	logd_xconf(&cfg, &xc);
	if (logx_start(&xc, &nx, &err) < 0) {
		pc_log(PC_LOG_ERR, "SIGHUP: syslog settings: %s; keeping the old ones", err.msg);
		return;
	}
	logx_hooks(nx, &exp);
	if (h->wc) { /* the witness keeps its place in front of the exporter */
		struct logw_export next = exp;

		logwc_hooks(h->wc, &next, &exp);
	}
	logw_set_export(h->w, &exp);
	logx_retire(*h->x, 1000); /* never wait on a collector here */
	*h->x = nx;
	cfg.log.syslog.facility = h->cfg->log.syslog.facility; /* in force till restart */
	cfg.log.syslog.pen = h->cfg->log.syslog.pen;
	h->cfg->log.syslog = cfg.log.syslog;
	pc_log(PC_LOG_NOTICE, "SIGHUP: syslog settings changed: now %s%s%s%s",
	       cfg.log.syslog.local ? cfg.log.syslog.socket : "no local socket",
	       cfg.log.syslog.remote[0] ? ", " : "", cfg.log.syslog.remote,
	       cfg.log.syslog.tls ? " (TLS)" : "");
}

int logd_allow_user(struct logd_server_conf *sc, const char *user, enum logrec_sender sender,
		    struct pc_err *err)
{
	uid_t uid;
	gid_t gid;

	if (!user[0])
		return 0;
	if (pc_user_lookup(user, &uid, &gid, NULL) < 0) {
		pc_log(PC_LOG_WARN, "user %s does not exist: it cannot log", user);
		return 0;
	}
	/* One uid, one sender: records are told apart by the uid alone. */
	for (size_t i = 0; i < sc->n_allowed; i++) {
		enum logrec_sender other = sc->senders[i]	      ? sc->senders[i]
					   : sc->allowed_uids[i] == 0 ? LOGREC_SENDER_ROOT
								      : LOGREC_SENDER_NONE;

		if (sc->allowed_uids[i] != uid)
			continue;
		if (other == sender)
			return 0;
		return pc_err_set(err, PC_EINVAL,
				  "user %s (uid %ld) would log as %s but is already %s: logd tells "
				  "senders apart by their uid, so each needs a user of its own",
				  user, (long)uid, logrec_sender_name(sender),
				  other ? logrec_sender_name(other) : "another sender");
	}
	if (sc->n_allowed < sizeof(sc->allowed_uids) / sizeof(sc->allowed_uids[0])) {
		sc->senders[sc->n_allowed] = sender;
		sc->allowed_uids[sc->n_allowed++] = uid;
	}
	return 0;
}

/* Create and remove a probe file in dir as the process is now. 0 or errno. */
static int probe_dir(const char *dir)
{
	char path[PC_PATH_MAX + 48];
	int fd;

	snprintf(path, sizeof(path), "%s/.portcullis-logd-probe.%ld", dir, (long)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == EEXIST) { /* left by a crash: ours to remove */
		unlink(path);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd < 0)
		return errno;
	close(fd);
	if (unlink(path) < 0)
		return errno;
	return 0;
}

/* The log user must create files in the log's directory after the drop:
 * the checkpoint sidecar (a temporary file renamed into place), rotated
 * segments. Root can write anywhere, so a check made as root proves
 * nothing: a child drops to the user, as the daemon will, and tries. */
int logd_dir_writable_as(const char *file, const char *user, uid_t uid, struct pc_err *err)
{
	char dir[PC_PATH_MAX];
	char *slash;
	int rc, status;
	pid_t pid;

	pc_strlcpy(dir, file, sizeof(dir));
	slash = strrchr(dir, '/');
	if (!slash)
		pc_strlcpy(dir, ".", sizeof(dir));
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	if (access(dir, F_OK) < 0 && errno == ENOENT)
		return pc_err_set(err, PC_ENOENT, "the log directory %s does not exist yet", dir);
	if (uid == (uid_t)-1 || uid == geteuid()) {
		rc = probe_dir(dir);
		goto done;
	}
	pid = fork();
	if (pid < 0)
		return pc_err_errno(err, PC_EIO, "fork");
	if (pid == 0) {
		struct pc_err e;

		if (pc_privdrop(user, 0, &e) < 0)
			_exit(255);
		_exit(probe_dir(dir) & 0xff);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return pc_err_errno(err, PC_EIO, "waitpid");
	if (!WIFEXITED(status) || WEXITSTATUS(status) == 255)
		return pc_err_set(err, PC_EPERM,
				  "could not check the log directory %s as %s: dropping to that "
				  "user failed",
				  dir, user);
	rc = WEXITSTATUS(status);
done:
	if (rc == 0)
		return 0;
	return pc_err_set(err, PC_EPERM,
			  "log.user %s cannot create files in the log directory %s: %s (a probe "
			  "file, created as that user, failed); logd must, for the checkpoint "
			  "sidecar and rotation: make the directory writable by %s",
			  user && *user ? user : "(this process)", dir, strerror(rc),
			  user && *user ? user : "it");
}
