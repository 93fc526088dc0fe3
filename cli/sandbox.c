/* `portcullis sandbox run|attach`: a sandbox from one command — its network
 * (a namespace standing in for a VM, or a real VM's tap), its rule file, the
 * engine's reload, the containment check, the certificate, the command, and
 * on exit the teardown and a summary from the signed log. docs/sandbox.md. */
#include "cli/cli_int.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checker/checker.h"

extern char **environ;

/* Set once from the command line before anything else runs; the launcher
 * has no threads. */
static bool quiet;
static const char *cur_name = "";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	if (quiet)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "portcullis sandbox %s: ", cur_name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void note(const char *msg)
{
	say("%s", msg);
}

/* ---- before anything changes --------------------------------------------- */

static int preflight(struct sb *s, struct pc_err *err)
{
	struct pc_eng_reply reply;
	char eb[700];
	struct pc_err e = {0};
	bool hosts = false;
	int fd;

	if (geteuid() != 0)
		return pc_err_set(err, PC_EPERM,
				  "must run as root: it creates network links and changes the "
				  "policy");
	if (sbnet_bridge_get(s->cfg.bridge, &s->br, &e) < 0)
		return pc_err_set(err, PC_ENOENT,
				  "%s: create the sandbox bridge (ip link add %s type bridge, with "
				  "the gateway's address; docs/operations.md) or set bridge: in %s",
				  e.msg, s->cfg.bridge, s->config);
	if (pc_engine_call(s->cfg.run_dir, PC_ENG_STATUS, 5000, &reply, &e) < 0)
		return pc_err_set(err, PC_EIO,
				  "the engine is not running (%s): start it (systemctl start "
				  "portcullisd)",
				  pc_err_str(&e, eb, sizeof(eb)));
	pc_eng_reply_free(&reply);
	fd = pc_unix_connect(s->cfg.log.socket, 0, &e);
	if (fd < 0)
		return pc_err_set(err, PC_EIO,
				  "portcullis-logd is not running (%s): start it (systemctl start "
				  "portcullis-logd)",
				  pc_err_str(&e, eb, sizeof(eb)));
	close(fd);
	for (size_t i = 0; i < s->n_secrets; i++)
		if (store_placeholder_read(s->cfg.vault.secrets, s->secrets[i].name,
					   s->secrets[i].placeholder, &e) < 0)
			return pc_err_set(err, PC_ENOENT,
					  "secret %s is not in the store %s: store it with "
					  "`portcullis secrets set %s` (the value on stdin)",
					  s->secrets[i].name, s->cfg.vault.secrets,
					  s->secrets[i].name);
	if (s->n_secrets && !sbproc_vault_pid(&s->cfg))
		return pc_err_set(err, PC_EIO,
				  "the vault is not running (nothing here listens on port %u, "
				  "vault.listen): start it (systemctl start portcullis-vault)",
				  s->cfg.vault.listen.port);
	s->vault_needed = s->n_secrets > 0;
	for (size_t i = 0; i < s->n_allow; i++)
		hosts |= !s->allow[i].cidr;
	if (hosts && !s->cfg.dns.n_resolvers)
		return pc_err_set(err, PC_EINVAL,
				  "dns.resolvers is empty in %s: the sandbox could not resolve "
				  "any --allow host",
				  s->config);
	return 0;
}

/* ---- the engine and the log ---------------------------------------------- */

static int sb_engine_reload(struct sb *s, char *policy, size_t plen, struct pc_err *err)
{
	struct pc_eng_reply r;
	int rc = pc_engine_call(s->cfg.run_dir, PC_ENG_RELOAD, 60000, &r, err);

	if (rc < 0)
		return rc;
	if (r.type == PC_ENG_ERROR)
		rc = pc_err_set(err, PC_EREFUSED, "the engine refused the policy: %s", r.message);
	else
		pc_strlcpy(policy, r.policy, plen);
	pc_eng_reply_free(&r);
	return rc;
}

static int log_sandbox(struct sb *s, enum logrec_verdict v, const char *policy, const char *reason,
		       const char *msg, struct pc_err *err)
{
	struct logrec r = {.action = LOGREC_SANDBOX,
			   .verdict = v,
			   .sandbox = s->name,
			   .policy = policy && policy[0] ? policy : NULL,
			   .reason = reason,
			   .message = msg};
	int rc;

	if (s->addr4.family)
		r.src.addr = s->addr4;
	else
		r.src.addr = s->addr6;
	if (!s->lc && (rc = logc_open(s->cfg.log.socket, &s->lc, err)) < 0)
		return rc;
	if ((rc = logc_send_sync(s->lc, &r, 3000, err)) < 0)
		return rc;
	if (!s->seq_first)
		s->seq_first = logc_last_seq(s->lc);
	s->seq_last = logc_last_seq(s->lc);
	return 0;
}

/* The certificate, through `portcullis cert` itself (it checks again,
 * logs the issuance and signs). */
static int cert_issue(struct sb *s, struct pc_err *err)
{
	char dir[PC_PATH_MAX + 16], stamp[32], *argv[6];
	time_t now = time(NULL);
	struct tm tm;
	int rc;

	if (s->cert_out) {
		pc_strlcpy(s->cert_path, s->cert_out, sizeof(s->cert_path));
	} else {
		snprintf(dir, sizeof(dir), "%s/certs", s->cfg.state_dir);
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return pc_err_errno(err, PC_EIO, "creating %s", dir);
		gmtime_r(&now, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
		snprintf(s->cert_path, sizeof(s->cert_path), "%s/%s-%s.json", dir, s->name, stamp);
	}
	argv[0] = (char *)"cert";
	argv[1] = s->name;
	argv[2] = (char *)"-o";
	argv[3] = s->cert_path;
	argv[4] = (char *)"--md";
	argv[5] = NULL;
	optind = 0;
	rc = checker_cli(5, argv, s->config);
	if (rc != PC_EXIT_OK) {
		s->cert_path[0] = '\0';
		return pc_err_set(err, rc == PC_EXIT_FAIL ? PC_EREFUSED : PC_EIO,
				  "the certificate was not issued (portcullis cert said why)");
	}
	return 0;
}

/* ---- set up, run, tear down ---------------------------------------------- */

static int wait_port(struct sb *s, struct pc_err *err)
{
	uint32_t ifindex = 0, master = 0;
	char kind[16];
	bool in = false;
	int rc;

	if ((rc = sbnet_link_kind(s->port, kind, sizeof(kind), &ifindex, &master, err)) < 0)
		return rc;
	for (int i = 0; i < 500; i++) {
		if ((rc = sbnet_port_in_set(ifindex, &in, err)) < 0)
			return rc;
		if (in)
			return 0;
		usleep(10000);
	}
	return pc_err_set(err, PC_ETIMEOUT,
			  "the engine did not add port %s to its port set within 5 s (is it "
			  "running on this bridge?)",
			  s->port);
}

/* The engine runs its own containment check after each change of its
 * tables (a new port included) and reads the rules directory for it: let
 * the one the new port started finish before the directory changes, or it
 * would compare the old tables with the new rules and log a false exit.
 * (An engine that cannot say is not waited for.) */
static void wait_engine_check(struct sb *s)
{
	for (int i = 0; i < 1500; i++) {
		struct pc_eng_reply r;
		bool busy;

		if (pc_engine_call(s->cfg.run_dir, PC_ENG_STATUS, 5000, &r, NULL) < 0)
			return;
		busy = r.type == PC_ENG_STATUS_REPLY && r.check_running;
		pc_eng_reply_free(&r);
		if (!busy)
			return;
		usleep(20000);
	}
}

static void teardown(struct sb *s, bool reload)
{
	struct pc_err e = {0};
	char eb[700], pol[80];
	int lock = sbfile_lock(&s->cfg, &e);

	if (s->netns_fd >= 0)
		sbproc_kill_netns(s->netns_fd);
	/* the rules go first, then the port: the engine's tables and its own
	 * checks never see a port set and a policy from different moments */
	if (s->rule_written) {
		if (sbfile_rule_remove(s, &e) < 0)
			fprintf(stderr, "portcullis: sandbox %s: %s\n", s->name,
				pc_err_str(&e, eb, sizeof(eb)));
		else if (reload && sb_engine_reload(s, pol, sizeof(pol), &e) < 0)
			fprintf(stderr, "portcullis: sandbox %s: reloading the engine: %s\n",
				s->name, pc_err_str(&e, eb, sizeof(eb)));
		if (reload && s->vault_needed) {
			pid_t v = sbproc_vault_pid(&s->cfg);

			if (v && sbproc_vault_reload(v, &e) < 0)
				fprintf(stderr, "portcullis: sandbox %s: %s\n", s->name,
					pc_err_str(&e, eb, sizeof(eb)));
		}
	}
	if (s->vm_tap_fd >= 0) { /* the tap goes with its last descriptor */
		close(s->vm_tap_fd);
		s->vm_tap_fd = -1;
	}
	if (s->port_created && sbnet_link_del(s->port, &e) < 0)
		fprintf(stderr, "portcullis: sandbox %s: removing %s: %s\n", s->name, s->port,
			pc_err_str(&e, eb, sizeof(eb)));
	if (s->netns_fd >= 0) { /* empty now: the namespace goes with its last reference */
		close(s->netns_fd);
		s->netns_fd = -1;
	}
	if (s->port_enslaved && sbnet_port_release(s->port, &e) < 0)
		fprintf(stderr, "portcullis: sandbox %s: releasing %s: %s\n", s->name, s->port,
			pc_err_str(&e, eb, sizeof(eb)));
	sbfile_dir_remove(s);
	sbfile_unlock(lock);
}

/* The command's environment: nothing of the caller's but the basics (its
 * environment may hold credentials of its own), the trust bundle under
 * every name common clients read, and each secret's placeholder. */
static char **make_env(const struct sb *s, char *store, size_t cap)
{
	static const char *const keep[] = {"PATH", "TERM", "LANG", "LC_ALL", "TZ"};
	static const char *const ca_vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
					      "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
					      "GIT_SSL_CAINFO"};
	const size_t max = 160;
	char **env = calloc(max, sizeof(char *)), bundle[sizeof(s->dir) + 32];
	char home[sizeof(s->dir) + 8], b[PC_ADDRSTRLEN], envf[sizeof(s->dir) + 8];
	size_t n = 0, used = 0;

	if (!env)
		return NULL;
#define ADD(...)                                                                                   \
	do {                                                                                       \
		int w_ = snprintf(store + used, cap - used, __VA_ARGS__);                          \
		if (w_ < 0 || (size_t)w_ >= cap - used || n + 1 >= max)                            \
			goto fail;                                                                 \
		env[n++] = store + used;                                                           \
		used += (size_t)w_ + 1;                                                            \
	} while (0)
	sbfile_path(s, "ca-bundle.pem", bundle, sizeof(bundle));
	if (s->attach) {
		/* the VM's monitor runs on the gateway, as the admin's command:
		 * its environment, and what to give the guest */
		for (char **e = environ; *e; e++)
			if (strncmp(*e, "PORTCULLIS_", 11) != 0)
				ADD("%s", *e);
		ADD("PORTCULLIS_SANDBOX=%s", s->name);
		if (s->addr4.family) {
			ADD("PORTCULLIS_ADDRESS4=%s/%u", pc_addr_str(&s->addr4, b, sizeof(b)),
			    s->br.net4.len);
			ADD("PORTCULLIS_GATEWAY4=%s", pc_addr_str(&s->br.net4.addr, b, sizeof(b)));
		}
		if (s->addr6.family) {
			ADD("PORTCULLIS_ADDRESS6=%s/%u", pc_addr_str(&s->addr6, b, sizeof(b)),
			    s->br.net6.len);
			ADD("PORTCULLIS_GATEWAY6=%s", pc_addr_str(&s->br.net6.addr, b, sizeof(b)));
		}
		if (s->cfg.dns.n_resolvers)
			ADD("PORTCULLIS_DNS=%s",
			    pc_addr_str(&s->cfg.dns.resolvers[0], b, sizeof(b)));
		ADD("PORTCULLIS_ENV_FILE=%s", sbfile_path(s, "env", envf, sizeof(envf)));
		ADD("PORTCULLIS_CA_BUNDLE=%s", bundle);
	} else {
		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
			if (getenv(keep[i]))
				ADD("%s=%s", keep[i], getenv(keep[i]));
		if (!getenv("PATH"))
			ADD("PATH=/usr/local/bin:/usr/bin:/bin");
		ADD("HOME=%s", sbfile_path(s, "home", home, sizeof(home)));
		ADD("USER=%s", s->user);
		ADD("LOGNAME=%s", s->user);
		for (size_t i = 0; i < sizeof(ca_vars) / sizeof(ca_vars[0]); i++)
			ADD("%s=%s", ca_vars[i], bundle);
		ADD("PORTCULLIS_SANDBOX=%s", s->name);
		for (size_t i = 0; i < s->n_secrets; i++)
			ADD("%s=%s", s->secrets[i].name, s->secrets[i].placeholder);
	}
	for (size_t i = 0; i < s->n_env; i++) {
		if (strchr(s->env[i], '='))
			ADD("%s", s->env[i]);
		else if (getenv(s->env[i]))
			ADD("%s=%s", s->env[i], getenv(s->env[i]));
	}
#undef ADD
	env[n] = NULL;
	return env;
fail:
	free(env);
	return NULL;
}

static void say_setup(const struct sb *s)
{
	char b4[PC_ADDRSTRLEN] = "", b6[PC_ADDRSTRLEN] = "", g[PC_ADDRSTRLEN] = "";

	if (s->addr4.family)
		pc_addr_str(&s->addr4, b4, sizeof(b4));
	if (s->addr6.family)
		pc_addr_str(&s->addr6, b6, sizeof(b6));
	if (s->br.net4.addr.family)
		pc_addr_str(&s->br.net4.addr, g, sizeof(g));
	else
		pc_addr_str(&s->br.net6.addr, g, sizeof(g));
	say("%s%s%s on %s, port %s (isolated), gateway %s", b4, b4[0] && b6[0] ? " and " : "", b6,
	    s->cfg.bridge, s->port, g);
}

/* What the sandbox's own side holds (issue 31): the checker proves the
 * gateway, but a second interface inside the sandbox (a veth elsewhere, a
 * physical NIC moved in) is a way in or out it never sees. run: the
 * namespace made for the command must hold exactly its interface and lo;
 * attach of a veth: its peer's namespace is read the same way; what cannot
 * be read (a VM's inside, a namespace nothing names) is said. Read as late
 * as possible before the command starts: just before the proof. 0, or
 * PC_EREFUSED (err names the extra link) or another PC_E*. */
static int inside_check(struct sb *s, struct pc_err *err)
{
	struct sbnet_inv inv;
	char where[300] = "the sandbox's namespace";
	uint32_t peer = 0;
	int fd = s->netns_fd, rc;

	if (s->vm) {
		say("not read: the VM's inside (its interfaces and routes) is not visible from the "
		    "gateway; only its tap %s is guarded (a second NIC of the VM is seen only as "
		    "another tap of its QEMU process)",
		    s->port);
		return 0;
	}
	if (s->attach) {
		rc = sbnet_peer_netns(s->port, &fd, &peer, where, sizeof(where), err);
		if (rc == PC_ENOENT) {
			say("not read: %s; the guest's interfaces and routes are not checked, only "
			    "port %s is guarded",
			    err->msg, s->port);
			return 0;
		}
		if (rc < 0)
			return rc;
	}
	rc = sbnet_netns_inventory(fd, peer, s->attach ? NULL : SB_PEER_IFNAME, &inv, err);
	if (fd != s->netns_fd)
		close(fd);
	if (rc < 0)
		return rc;
	say("%s holds links %s; routes: %s", where, inv.links, inv.routes[0] ? inv.routes : "none");
	if (!inv.found)
		return pc_err_set(err, PC_EREFUSED, "%s does not hold the sandbox's interface%s%s",
				  where, s->attach ? "" : " ", s->attach ? "" : SB_PEER_IFNAME);
	if (inv.n_extra)
		return pc_err_set(err, PC_EREFUSED,
				  "%s holds %s besides its interface and lo: a way in or out that "
				  "the guard does not see; the command was not started",
				  where, inv.extra);
	return 0;
}

/* Everything up to a proven, certified sandbox. The exit code on failure
 * (after teardown), 0 on success. */
static int launch(struct sb *s)
{
	struct pc_err e = {0};
	struct policy *pol = NULL;
	struct checker_result *res = NULL;
	char eb[1024], policy[80] = "", msg[400], kind[16];
	uid_t uid = 0;
	gid_t gid = 0;
	struct stat st;
	int code = PC_EXIT_ERROR, rc;
	bool reloaded = false;

	if (preflight(s, &e) < 0)
		goto fail;
	if (!s->attach && pc_user_lookup(s->user, &uid, &gid, &e) < 0) {
		pc_err_prefix(&e, "sandbox.user / --user: ");
		goto fail;
	}
	if (s->attach && s->user[0] && pc_user_lookup(s->user, &uid, &gid, &e) < 0)
		goto fail;
	if ((s->lock_fd = sbfile_lock(&s->cfg, &e)) < 0)
		goto fail;
	sbfile_clean_stale(&s->cfg, note);
	if (sbfile_name_free(s, &pol, &e) < 0 || sbfile_pick_addresses(s, pol, &e) < 0)
		goto fail;
	if (!s->attach) {
		const uint8_t *src = s->addr4.family ? s->addr4.a : s->addr6.a + 12;

		/* locally administered, derived from the address: unique with it */
		snprintf(s->port, sizeof(s->port), "pcs%d", (int)getpid());
		s->has_mac = true;
		memcpy(s->mac, (uint8_t[]){0x02, 0x70, src[0], src[1], src[2], src[3]}, 6);
	}
	if (s->vm) {
		/* the VM's tap: bridged and isolated (and proven) before QEMU
		 * opens it; the guest's MAC and addresses are bound in the rule */
		if (sbvm_tap_add(s->port, &s->vm_tap_fd, &e) < 0)
			goto fail;
		s->port_created = true;
		if (sbnet_port_attach(s->port, s->br.ifindex, &(bool){false}, &e) < 0)
			goto fail;
	} else if (!s->attach) {
		if (sbnet_netns_new(&s->netns_fd, &e) < 0)
			goto fail;
		if (sbnet_veth_add(s->port, s->netns_fd, s->mac, &e) < 0)
			goto fail;
		s->port_created = true;
		if (sbnet_port_attach(s->port, s->br.ifindex, &(bool){false}, &e) < 0 ||
		    sbnet_sandbox_config(s->netns_fd, &s->addr4, s->br.net4.len, &s->br.net4.addr,
					 &s->addr6, s->br.net6.len, &s->br.net6.addr, &e) < 0)
			goto fail;
	} else {
		uint32_t ifi, master;
		struct pc_prefix a4, a6;

		if (sbnet_link_kind(s->port, kind, sizeof(kind), &ifi, &master, &e) < 0) {
			pc_err_prefix(&e, "--port: ");
			goto fail;
		}
		if (strcmp(kind, "tun") != 0 && strcmp(kind, "veth") != 0) {
			pc_err_set(&e, PC_EINVAL,
				   "--port %s is a %s link, not a VM's tap (or veth)", s->port,
				   kind[0] ? kind : "plain");
			goto fail;
		}
		/* a VM's tap carries no address of the gateway's: one that does is
		 * some other interface (the uplink?), and the bridge would take it */
		if (sbnet_link_addrs(s->port, &a4, &a6, &e) < 0)
			goto fail;
		if (a4.addr.family || a6.addr.family) {
			pc_err_set(
			    &e, PC_EINVAL,
			    "--port %s has an address of the gateway's (%s): a VM's tap has "
			    "none; is it the right interface?",
			    s->port,
			    pc_addr_str(a4.addr.family ? &a4.addr : &a6.addr, eb, sizeof(eb)));
			goto fail;
		}
		if (sbnet_port_attach(s->port, s->br.ifindex, &s->port_enslaved, &e) < 0)
			goto fail;
	}
	say_setup(s);
	/* the engine has seen the new port before the policy changes under it */
	if (wait_port(s, &e) < 0)
		goto fail;
	wait_engine_check(s);
	if (sbfile_dir_make(s, uid, gid, &e) < 0 || sbfile_rule_write(s, &e) < 0)
		goto fail;
	policy_unref(pol);
	pol = NULL;
	/* what the engine would say, with file:line:col, before asking it */
	if (policy_load_dir(s->cfg.rules_dir, &s->cfg, &pol, &e) < 0) {
		pc_err_prefix(&e, "the sandbox's rules do not fit the policy: ");
		goto fail;
	}
	if (stat(s->cfg.log.file, &st) == 0) {
		s->log_off = (uint64_t)st.st_size;
		s->log_dev = st.st_dev;
		s->log_ino = st.st_ino;
	}
	if (sb_engine_reload(s, policy, sizeof(policy), &e) < 0)
		goto fail;
	reloaded = true;
	say("rules %s; engine reloaded: policy %s", s->rule_file, policy);
	if (wait_port(s, &e) < 0)
		goto fail;
	if (s->vault_needed) {
		pid_t v = sbproc_vault_pid(&s->cfg);

		if (!v) {
			pc_err_set(&e, PC_EIO,
				   "the vault stopped: start it (systemctl start "
				   "portcullis-vault)");
			goto fail;
		}
		if (sbproc_vault_reload(v, &e) < 0)
			goto fail;
		say("vault reloaded (pid %d): %zu secret%s bound", (int)v, s->n_secrets,
		    s->n_secrets == 1 ? "" : "s");
	}
	snprintf(msg, sizeof(msg), "sandbox %s created on %s port %s", s->name, s->cfg.bridge,
		 s->port);
	if (log_sandbox(s, LOGREC_NONE, policy, NULL, msg, &e) < 0) {
		pc_err_prefix(&e, "no record, no sandbox: ");
		goto fail;
	}
	if ((rc = inside_check(s, &e)) < 0) {
		if (rc == PC_EREFUSED) {
			/* the same refusal as a way out the check names: the
			 * containment is not proven */
			log_sandbox(s, LOGREC_REFUSED, policy, "containment not proven", e.msg,
				    NULL);
			code = PC_EXIT_FAIL;
		}
		goto fail;
	}
	if ((rc = checker_run(&s->cfg, NULL, NULL, &res, &e)) < 0) {
		pc_err_prefix(&e, "the containment check could not read the state: ");
		goto fail;
	}
	if (res->status != CHECKER_PROVEN) {
		char *txt = checker_result_text(res, false);

		if (txt)
			fputs(txt, stderr);
		free(txt);
		log_sandbox(s, LOGREC_REFUSED, policy, "containment not proven",
			    "the command was not started", NULL);
		pc_err_set(&e, PC_EREFUSED,
			   "containment is not proven (the way out is named above): the "
			   "command was not started");
		code = PC_EXIT_FAIL;
		goto fail;
	}
	say("check: proven: every packet from %s is judged by the engine, sent to the vault, or "
	    "dropped (%zu obligations held)",
	    s->port, (size_t)CK_OB_COUNT);
	checker_result_free(res);
	res = NULL;
	if (cert_issue(s, &e) < 0) {
		code = e.code == PC_EREFUSED ? PC_EXIT_FAIL : PC_EXIT_ERROR;
		goto fail;
	}
	say("certificate %s (and %s.md)", s->cert_path, s->cert_path);
	sbfile_unlock(s->lock_fd);
	s->lock_fd = -1;
	policy_unref(pol);
	return 0;
fail:
	pc_cli_error(s->attach ? "sandbox attach" : "sandbox run", "%s",
		     pc_err_str(&e, eb, sizeof(eb)));
	checker_result_free(res);
	policy_unref(pol);
	sbfile_unlock(s->lock_fd);
	s->lock_fd = -1;
	teardown(s, reloaded);
	return code;
}

static void say_guest(const struct sb *s)
{
	char b[PC_ADDRSTRLEN], path[sizeof(s->dir) + 32];

	if (s->addr4.family)
		say("guest: address %s/%u, gateway %s", pc_addr_str(&s->addr4, b, sizeof(b)),
		    s->br.net4.len, pc_addr_str(&s->br.net4.addr, path, sizeof(path)));
	if (s->addr6.family)
		say("guest: address %s/%u, gateway %s", pc_addr_str(&s->addr6, b, sizeof(b)),
		    s->br.net6.len, pc_addr_str(&s->br.net6.addr, path, sizeof(path)));
	if (s->cfg.dns.n_resolvers)
		say("guest: resolver %s", pc_addr_str(&s->cfg.dns.resolvers[0], b, sizeof(b)));
	say("guest: trust %s; environment (placeholders) %s",
	    sbfile_path(s, "ca-bundle.pem", path, sizeof(path)), s->dir);
}

static int sandbox_go(struct sb *s)
{
	struct sb_counts c = {0};
	struct pc_err e = {0};
	char eb[700], how[300], msg[400], *store = NULL, **env = NULL;
	sigset_t sigs, pending;
	pid_t pid = 0;
	int status = 0, code;

	/* signals wait until we are ready to pass them on or to clean up */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	sigaddset(&sigs, SIGCHLD);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	if ((code = launch(s)) != 0)
		return code;
	if (s->attach)
		say_guest(s);
	if (sigpending(&pending) == 0 &&
	    (sigismember(&pending, SIGINT) || sigismember(&pending, SIGTERM) ||
	     sigismember(&pending, SIGHUP) || sigismember(&pending, SIGQUIT))) {
		/* interrupted while setting up: nothing is started */
		pc_err_set(&e, PC_EIO, "interrupted: the command was not started");
		teardown(s, true);
		pc_cli_error(s->attach ? "sandbox attach" : "sandbox run", "%s", e.msg);
		return 130;
	}
	if (s->vm) {
		sbvm_accel(s);
		snprintf(msg, sizeof(msg), "command %s started in a VM (%s; %s)", s->cmd[0],
			 s->vm_kvm ? "KVM" : "software emulation, TCG", s->vm_accel_why);
		if (log_sandbox(s, LOGREC_NONE, NULL, NULL, msg, &e) < 0) {
			pc_err_prefix(&e, "no record, no command: ");
			goto fail;
		}
		say("booting the VM (%s, %u MiB, %u vCPU) for %s; accelerator: %s",
		    s->vm_kvm ? "KVM" : "software emulation, TCG", s->vm_mem, s->vm_cpus, s->cmd[0],
		    s->vm_accel_why);
		if (sbvm_run(s, &status, &e) < 0) {
			status = e.code == PC_ENOENT ? 127 : 126;
			pc_cli_error("sandbox run", "%s", pc_err_str(&e, eb, sizeof(eb)));
			snprintf(how, sizeof(how), "not started (%.200s)", e.msg);
		} else {
			snprintf(how, sizeof(how), "%s exited %s %d in the VM", s->cmd[0],
				 status > 128 ? "by signal" : "with status",
				 status > 128 ? status - 128 : status);
		}
	} else if (s->cmd) {
		store = malloc(65536);
		env = store ? make_env(s, store, 65536) : NULL;
		if (!env) {
			pc_err_set(&e, PC_ENOMEM, "the command's environment is too large");
			goto fail;
		}
		if (!s->attach)
			prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
		snprintf(msg, sizeof(msg), "command %s started as %s", s->cmd[0],
			 s->user[0] ? s->user : "the launcher's user");
		if (log_sandbox(s, LOGREC_NONE, NULL, NULL, msg, &e) < 0) {
			pc_err_prefix(&e, "no record, no command: ");
			goto fail;
		}
		say("running %s as %s", s->cmd[0], s->user[0] ? s->user : "the launcher's user");
		if (sbproc_spawn(s, s->cmd, env, &pid, &e) < 0) {
			status = e.code == PC_ENOENT ? 127 : 126;
			pc_cli_error(s->attach ? "sandbox attach" : "sandbox run", "%s",
				     pc_err_str(&e, eb, sizeof(eb)));
			snprintf(how, sizeof(how), "not started (%.200s)", e.msg);
		} else {
			status = sbproc_wait(pid);
			snprintf(how, sizeof(how), "%s exited %s %d", s->cmd[0],
				 status > 128 ? "by signal" : "with status",
				 status > 128 ? status - 128 : status);
		}
	} else {
		say("attached; stop with Ctrl-C or SIGTERM");
		sbproc_wait_signal();
		snprintf(how, sizeof(how), "none (detached by a signal)");
	}
	if (s->netns_fd >= 0) {
		int left = sbproc_kill_netns(s->netns_fd);

		if (left)
			say("stopped %d process%s the command left in the sandbox", left,
			    left == 1 ? "" : "es");
	}
	snprintf(msg, sizeof(msg), "sandbox %s ended: %s", s->name, how);
	if (log_sandbox(s, LOGREC_NONE, NULL, NULL, msg, &e) < 0)
		fprintf(stderr, "portcullis: sandbox %s: the end could not be logged: %s\n",
			s->name, pc_err_str(&e, eb, sizeof(eb)));
	teardown(s, true);
	if (sbsum_count(s, &c, &e) < 0)
		fprintf(stderr, "portcullis: sandbox %s: summary: %s\n", s->name,
			pc_err_str(&e, eb, sizeof(eb)));
	sbsum_print(s, &c, status, how);
	free(env);
	free(store);
	return status;
fail:
	pc_cli_error(s->attach ? "sandbox attach" : "sandbox run", "%s",
		     pc_err_str(&e, eb, sizeof(eb)));
	teardown(s, true);
	free(env);
	free(store);
	return PC_EXIT_ERROR;
}

int sandbox_cli(int argc, char **argv, const char *config)
{
	struct sb *s;
	struct pc_err e = {0};
	char eb[1024];
	int rc;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(sb_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? PC_EXIT_USAGE : PC_EXIT_OK;
	}
	if (strcmp(argv[1], "run") != 0 && strcmp(argv[1], "attach") != 0) {
		pc_cli_error("sandbox", "unknown subcommand '%s' (run or attach)", argv[1]);
		return PC_EXIT_USAGE;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		pc_cli_error("sandbox", "out of memory");
		return PC_EXIT_ERROR;
	}
	s->attach = argv[1][0] == 'a';
	s->netns_fd = -1;
	s->lock_fd = -1;
	s->vm_tap_fd = -1;
	s->config = config;
	optind = 0;
	rc = sbargs_parse(s, argc - 1, argv + 1, &e);
	if (rc != 0) {
		if (rc < 0) {
			pc_cli_error(s->attach ? "sandbox attach" : "sandbox run", "%s",
				     pc_err_str(&e, eb, sizeof(eb)));
			fputs(sb_usage, stderr);
		}
		free(s);
		return rc < 0 ? PC_EXIT_USAGE : PC_EXIT_OK;
	}
	if (!s->name[0])
		snprintf(s->name, sizeof(s->name), "sb-%d", (int)getpid());
	cur_name = s->name;
	quiet = s->quiet;
	if (config_load(config, &s->cfg, &e) < 0) {
		pc_cli_error("configuration", "%s", pc_err_str(&e, eb, sizeof(eb)));
		free(s);
		return PC_EXIT_ERROR;
	}
	if (!s->attach && !s->user[0])
		pc_strlcpy(s->user, s->cfg.sandbox.user, sizeof(s->user));
	if (s->vm) {
		if (!s->vm_kernel) {
			snprintf(s->vm_kernel_buf, sizeof(s->vm_kernel_buf), "%s/vm/vmlinuz",
				 s->cfg.state_dir);
			s->vm_kernel = s->vm_kernel_buf;
		}
		if (!s->vm_initrd) {
			snprintf(s->vm_initrd_buf, sizeof(s->vm_initrd_buf), "%s/vm/initrd.img",
				 s->cfg.state_dir);
			s->vm_initrd = s->vm_initrd_buf;
		}
		s->vm_mem = s->vm_mem ? s->vm_mem : 256;
		s->vm_cpus = s->vm_cpus ? s->vm_cpus : 1;
		if (access(s->vm_kernel, R_OK) < 0 || access(s->vm_initrd, R_OK) < 0) {
			pc_cli_error("sandbox run",
				     "--vm: no guest image at %s and %s: build it (make vm-image, "
				     "in build/vm/) and give --kernel and --initrd",
				     s->vm_kernel, s->vm_initrd);
			free(s);
			return PC_EXIT_ERROR;
		}
	}
	rc = sandbox_go(s);
	logc_close(s->lc);
	free(s);
	return rc;
}
