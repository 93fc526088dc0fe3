/* The launcher's files: its rule file in the rules directory, the sandbox's
 * own directory (resolv.conf, hosts, trust bundle, home), the lock that
 * serializes launchers, the removal of what killed launchers left behind,
 * and the choice of the sandbox's addresses. */
#include "cli/cli_int.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SB_MARK "# portcullis sandbox: "

/* ---- who launched it ---------------------------------------------------- */

/* A process's start time in clock ticks since boot (field 22 of stat): with
 * the pid it names the process even after the pid is reused. */
static unsigned long long proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (!p)
		return 0;
	for (field = 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (field == 22)
		v = strtoull(p, NULL, 10);
	return v;
}

static bool owner_alive(const char *text)
{
	const char *p = strstr(text, "launcher ");
	unsigned long long start;
	int pid;

	if (!p || sscanf(p, "launcher %d start %llu", &pid, &start) != 2 || pid <= 0)
		return false;
	return proc_start(pid) == start && start != 0;
}

static void owner_text(char *buf, size_t len)
{
	snprintf(buf, len, "launcher %d start %llu", (int)getpid(), proc_start(getpid()));
}

int sbfile_lock(const struct config *cfg, struct pc_err *err)
{
	char path[PC_PATH_MAX + 32];
	int fd;

	snprintf(path, sizeof(path), "%s/sandbox", cfg->run_dir);
	if (mkdir(cfg->run_dir, 0755) < 0 && errno != EEXIST)
		return pc_err_errno(err, PC_EIO, "creating %s", cfg->run_dir);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return pc_err_errno(err, PC_EIO, "creating %s", path);
	snprintf(path, sizeof(path), "%s/sandbox/lock", cfg->run_dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "opening %s", path);
	if (flock(fd, LOCK_EX) < 0) {
		close(fd);
		return pc_err_errno(err, PC_EIO, "locking %s", path);
	}
	return fd;
}

void sbfile_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the flock */
}

static void rm_tree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	char sub[PC_PATH_MAX * 2];
	struct stat st;

	if (d) {
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
			if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
				rm_tree(sub);
			else
				unlink(sub);
		}
		closedir(d);
	}
	rmdir(path);
}

void sbfile_clean_stale(const struct config *cfg, void (*note)(const char *msg))
{
	char path[PC_PATH_MAX * 2], msg[PC_PATH_MAX * 4], *text;
	struct dirent *de;
	size_t len;
	DIR *d;

	d = opendir(cfg->rules_dir);
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "sandbox-", 8) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", cfg->rules_dir, de->d_name);
		if (pc_file_read(path, 65536, &text, &len, NULL) < 0)
			continue;
		if (!strncmp(text, SB_MARK, strlen(SB_MARK)) && !owner_alive(text) &&
		    unlink(path) == 0) {
			snprintf(msg, sizeof(msg), "removed %s: its launcher is gone", path);
			note(msg);
		}
		free(text);
	}
	if (d)
		closedir(d);
	snprintf(path, sizeof(path), "%s/sandbox", cfg->run_dir);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		char own[PC_PATH_MAX * 3 + 16];

		if (de->d_name[0] == '.' || !strcmp(de->d_name, "lock"))
			continue;
		snprintf(own, sizeof(own), "%s/%s/launcher", path, de->d_name);
		if (pc_file_read(own, 4096, &text, &len, NULL) < 0)
			continue;
		if (!owner_alive(text)) {
			snprintf(own, sizeof(own), "%s/%s", path, de->d_name);
			rm_tree(own);
			snprintf(msg, sizeof(msg), "removed %s: its launcher is gone", own);
			note(msg);
		}
		free(text);
	}
	if (d)
		closedir(d);
}

/* ---- the name and the addresses ----------------------------------------- */

int sbfile_name_free(struct sb *s, struct policy **pol, struct pc_err *err)
{
	struct pc_err perr = {0};
	struct policy *p = NULL;
	struct stat st;
	char eb[700];

	snprintf(s->rule_file, sizeof(s->rule_file), "%s/sandbox-%s.yaml", s->cfg.rules_dir,
		 s->name);
	snprintf(s->dir, sizeof(s->dir), "%s/sandbox/%s", s->cfg.run_dir, s->name);
	if (stat(s->rule_file, &st) == 0 || stat(s->dir, &st) == 0)
		return pc_err_set(err, PC_EEXIST,
				  "sandbox name '%s' is in use by another running launcher (%s): "
				  "choose another --name",
				  s->name, s->rule_file);
	if (policy_load_dir(s->cfg.rules_dir, &s->cfg, &p, &perr) < 0)
		return pc_err_set(err, PC_EINVAL,
				  "the policy in %s does not load, so no sandbox can be added: %s "
				  "(portcullis policy lint)",
				  s->cfg.rules_dir, pc_err_str(&perr, eb, sizeof(eb)));
	for (size_t i = 0; i < policy_sandbox_count(p); i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(p, i);

		if (strcasecmp(sb->name, s->name) == 0) {
			int rc = pc_err_set(err, PC_EEXIST,
					    "sandbox name '%s' is in use by the policy (%s:%u): "
					    "choose another --name",
					    s->name, sb->file ? sb->file : "?", sb->line);
			policy_unref(p);
			return rc;
		}
	}
	*pol = p;
	return 0;
}

static bool addr_claimed(const struct policy *pol, const struct pc_addr *a)
{
	for (size_t i = 0; i < policy_sandbox_count(pol); i++) {
		const struct policy_sandbox *sb = policy_sandbox_at(pol, i);

		for (size_t k = 0; k < sb->match.n_sources; k++)
			if (pc_prefix_contains(&sb->match.sources[k], a))
				return true;
	}
	return false;
}

/* base (masked to its prefix) + off in the low 32 bits. */
static void addr_at(const struct pc_prefix *net, uint32_t off, struct pc_addr *out)
{
	size_t alen = pc_addr_len(&net->addr);
	uint32_t low;

	*out = net->addr;
	for (size_t bit = net->len; bit < alen * 8; bit++)
		out->a[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
	memcpy(&low, out->a + alen - 4, 4);
	low = htonl(ntohl(low) + off);
	memcpy(out->a + alen - 4, &low, 4);
}

/* The pool of family af: sandbox.pool4/6, else the bridge's own subnet. It
 * must lie inside the bridge's subnet: the gateway must be on-link. */
static int pool_get(const struct sb *s, int af, struct pc_prefix *pool, struct pc_err *err)
{
	const struct pc_prefix *net = af == AF_INET ? &s->br.net4 : &s->br.net6;
	const struct pc_prefix *cfgp =
	    af == AF_INET ? &s->cfg.sandbox.pool4 : &s->cfg.sandbox.pool6;
	char b1[PC_ADDRSTRLEN], b2[PC_ADDRSTRLEN];

	if (!net->addr.family) {
		pool->addr.family = 0;
		if (cfgp->addr.family)
			return pc_err_set(
			    err, PC_EINVAL,
			    "sandbox.pool%d is set but bridge %s has no IPv%d address",
			    af == AF_INET ? 4 : 6, s->cfg.bridge, af == AF_INET ? 4 : 6);
		return 0;
	}
	if (!cfgp->addr.family) {
		*pool = *net;
		return 0;
	}
	if (cfgp->len < net->len || !pc_prefix_contains(net, &cfgp->addr))
		return pc_err_set(
		    err, PC_EINVAL, "sandbox.pool%d %s/%u is not inside bridge %s's subnet %s/%u",
		    af == AF_INET ? 4 : 6, pc_addr_str(&cfgp->addr, b1, sizeof(b1)), cfgp->len,
		    s->cfg.bridge, pc_addr_str(&net->addr, b2, sizeof(b2)), net->len);
	*pool = *cfgp;
	return 0;
}

static bool candidate_ok(const struct policy *pol, const struct pc_prefix *pool,
			 const struct pc_prefix *br, uint32_t off, struct pc_addr *out)
{
	size_t bits = pc_addr_len(&pool->addr) * 8 - pool->len;

	if (bits < 32 && off >= (1u << bits) - (pool->addr.family == AF_INET ? 1 : 0))
		return false; /* past the pool (IPv4: its broadcast address) */
	addr_at(pool, off, out);
	return !pc_addr_eq(out, &br->addr) && !addr_claimed(pol, out);
}

int sbfile_pick_addresses(struct sb *s, const struct policy *pol, struct pc_err *err)
{
	struct pc_prefix p4, p6;
	struct pc_addr a4 = {0}, a6 = {0};
	char b[PC_ADDRSTRLEN];
	int rc;

	if ((rc = pool_get(s, AF_INET, &p4, err)) < 0 || (rc = pool_get(s, AF_INET6, &p6, err)) < 0)
		return rc;
	if (!p4.addr.family && !p6.addr.family)
		return pc_err_set(err, PC_EINVAL,
				  "bridge %s has no address: give it the sandboxes' gateway "
				  "address (e.g. ip addr add 10.203.0.1/24 dev %s)",
				  s->cfg.bridge, s->cfg.bridge);
	if (s->attach && (s->want4.family || s->want6.family)) {
		/* the VM's configured address(es): checked, not chosen */
		const struct pc_addr *w[2] = {&s->want4, &s->want6};
		const struct pc_prefix *net[2] = {&s->br.net4, &s->br.net6};

		for (int i = 0; i < 2; i++) {
			if (!w[i]->family)
				continue;
			if (!net[i]->addr.family || !pc_prefix_contains(net[i], w[i]) ||
			    pc_addr_eq(w[i], &net[i]->addr))
				return pc_err_set(err, PC_EINVAL,
						  "--address %s is not a host address of bridge "
						  "%s's subnet",
						  pc_addr_str(w[i], b, sizeof(b)), s->cfg.bridge);
			if (addr_claimed(pol, w[i]))
				return pc_err_set(err, PC_EEXIST,
						  "--address %s belongs to a sandbox of the policy "
						  "already",
						  pc_addr_str(w[i], b, sizeof(b)));
		}
		s->addr4 = s->want4;
		s->addr6 = s->want6;
		return 0;
	}
	/* the same host number in both families when both exist, which makes
	 * the pair easy to recognise (10.203.0.2 and fd00:203::2) */
	for (uint32_t off = 1; off < (1u << 20); off++) {
		bool ok4 = !p4.addr.family || candidate_ok(pol, &p4, &s->br.net4, off, &a4);
		bool ok6 = !p6.addr.family || candidate_ok(pol, &p6, &s->br.net6, off, &a6);
		size_t b4 = p4.addr.family ? 32u - p4.len : 64u;

		if (ok4 && ok6) {
			s->addr4 = p4.addr.family ? a4 : (struct pc_addr){0};
			s->addr6 = p6.addr.family ? a6 : (struct pc_addr){0};
			return 0;
		}
		if (b4 < 32 && off >= (1u << b4))
			break;
	}
	return pc_err_set(err, PC_ENOENT,
			  "no free address left in the sandbox pool (sandbox.pool4/pool6, "
			  "default: the bridge's subnet)");
}

/* ---- the rule file ------------------------------------------------------ */

char *sbfile_rule_text(const struct sb *s)
{
	struct pc_buf t = {0};
	char own[96], b[PC_ADDRSTRLEN];

	owner_text(own, sizeof(own));
	pc_buf_printf(&t,
		      SB_MARK "%s, %s; written by `portcullis sandbox %s`, removed when "
			      "the sandbox ends\n",
		      s->name, own, s->attach ? "attach" : "run");
	pc_buf_printf(&t, "sandbox: %s\nmatch:\n  source: [", s->name);
	if (s->addr4.family)
		pc_buf_printf(&t, "\"%s/32\"", pc_addr_str(&s->addr4, b, sizeof(b)));
	if (s->addr6.family)
		pc_buf_printf(&t, "%s\"%s/128\"", s->addr4.family ? ", " : "",
			      pc_addr_str(&s->addr6, b, sizeof(b)));
	pc_buf_printf(&t, "]\n  port: \"%s\"\n", s->port);
	if (s->has_mac)
		pc_buf_printf(&t, "  mac: \"%02x:%02x:%02x:%02x:%02x:%02x\"\n", s->mac[0],
			      s->mac[1], s->mac[2], s->mac[3], s->mac[4], s->mac[5]);
	pc_buf_printf(&t, "allow:%s\n", s->n_allow ? "" : " []");
	for (size_t i = 0; i < s->n_allow; i++) {
		const struct sb_allow *a = &s->allow[i];
		bool range = strchr(a->ports, '-') != NULL;

		if (a->cidr)
			pc_buf_printf(&t, "  - cidr: \"%s/%u\"\n",
				      pc_addr_str(&a->prefix.addr, b, sizeof(b)), a->prefix.len);
		else
			pc_buf_printf(&t, "  - host: \"%s\"\n", a->host);
		pc_buf_printf(&t, "    ports: [%s%s%s]\n    proto: %s\n", range ? "\"" : "",
			      a->ports, range ? "\"" : "", a->proto);
	}
	if (s->n_secrets)
		pc_buf_printf(&t, "secrets:\n");
	for (size_t i = 0; i < s->n_secrets; i++)
		pc_buf_printf(&t, "  - name: %s\n    host: \"%s\"\n    port: %u\n",
			      s->secrets[i].name, s->secrets[i].host, s->secrets[i].port);
	return pc_buf_take(&t, NULL);
}

static int write_file(const char *path, const char *data, size_t len, mode_t mode, bool excl,
		      struct pc_err *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (excl ? O_EXCL : O_TRUNC),
		      mode);

	if (fd < 0)
		return errno == EEXIST ? pc_err_set(err, PC_EEXIST, "%s exists already", path)
				       : pc_err_errno(err, PC_EIO, "creating %s", path);
	while (len) {
		ssize_t w = write(fd, data, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			close(fd);
			unlink(path);
			return pc_err_errno(err, PC_EIO, "writing %s", path);
		}
		data += w;
		len -= (size_t)w;
	}
	if (fchmod(fd, mode) < 0 || close(fd) < 0) {
		unlink(path);
		return pc_err_errno(err, PC_EIO, "writing %s", path);
	}
	return 0;
}

int sbfile_rule_write(struct sb *s, struct pc_err *err)
{
	char tmp[sizeof(s->rule_file) + 16], *text = sbfile_rule_text(s);
	int rc;

	if (!text)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	/* written under a dot name the loader ignores, then linked into place:
	 * the engine never reads half a file, and link() never replaces one */
	snprintf(tmp, sizeof(tmp), "%s/.sandbox-%s.tmp", s->cfg.rules_dir, s->name);
	unlink(tmp);
	rc = write_file(tmp, text, strlen(text), 0644, true, err);
	free(text);
	if (rc < 0)
		return rc;
	if (link(tmp, s->rule_file) < 0) {
		rc = errno == EEXIST
			 ? pc_err_set(err, PC_EEXIST, "sandbox name '%s' is in use (%s exists)",
				      s->name, s->rule_file)
			 : pc_err_errno(err, PC_EIO, "creating %s", s->rule_file);
		unlink(tmp);
		return rc;
	}
	unlink(tmp);
	s->rule_written = true;
	return 0;
}

int sbfile_rule_remove(struct sb *s, struct pc_err *err)
{
	if (!s->rule_written)
		return 0;
	if (unlink(s->rule_file) < 0 && errno != ENOENT)
		return pc_err_errno(err, PC_EIO, "removing %s", s->rule_file);
	s->rule_written = false;
	return 0;
}

/* ---- the sandbox's directory -------------------------------------------- */

const char *sbfile_path(const struct sb *s, const char *file, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", s->dir, file);
	return buf;
}

/* The trust bundle: the vault's CA (it terminates TLS toward secret-bound
 * hosts), then what the gateway itself trusts for upstream servers
 * (vault.trust), so that hosts reached directly verify as they would from
 * the gateway. */
static int bundle_make(const struct sb *s, const char *path, struct pc_err *err)
{
	char ca[PC_PATH_MAX + 16], *a = NULL, *b = NULL;
	size_t alen = 0, blen = 0;
	struct pc_buf all = {0};
	int rc;

	snprintf(ca, sizeof(ca), "%s/ca.pem", s->cfg.vault.ca_dir);
	if (pc_file_read(ca, 1 << 20, &a, &alen, NULL) < 0) {
		if (s->n_secrets)
			return pc_err_set(
			    err, PC_ENOENT,
			    "the vault's CA %s is missing: create it with `portcullis "
			    "ca init` (then start the vault)",
			    ca);
		alen = 0; /* no secrets: nothing goes through the vault */
	}
	if (pc_file_read(s->cfg.vault.trust, 16 << 20, &b, &blen, NULL) < 0)
		blen = 0;
	pc_buf_printf(&all, "# portcullis sandbox %s: the vault's CA (%s)\n%.*s\n", s->name, ca,
		      (int)alen, a ? a : "");
	if (blen)
		pc_buf_printf(&all, "# what the gateway trusts upstream (%s)\n%.*s\n",
			      s->cfg.vault.trust, (int)blen, b);
	free(a);
	free(b);
	if (all.err) {
		pc_buf_free(&all);
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	}
	rc = write_file(path, all.p, all.len, 0644, true, err);
	pc_buf_free(&all);
	return rc;
}

/* Write the text built so far in t as file (0644), then start a new text. */
static int dir_file(struct sb *s, const char *file, struct pc_buf *t, struct pc_err *err)
{
	char path[sizeof(s->dir) + 32];
	int rc;

	if (t->err || !t->p)
		rc = pc_err_set(err, PC_ENOMEM, "out of memory");
	else
		rc = write_file(sbfile_path(s, file, path, sizeof(path)), t->p, t->len, 0644, true,
				err);
	pc_buf_free(t);
	return rc;
}

int sbfile_dir_make(struct sb *s, uid_t uid, gid_t gid, struct pc_err *err)
{
	char path[sizeof(s->dir) + 32], b[PC_ADDRSTRLEN], own[96];
	struct pc_buf t = {0};
	int rc;

	if (mkdir(s->dir, 0755) < 0)
		return errno == EEXIST
			   ? pc_err_set(err, PC_EEXIST, "sandbox name '%s' is in use (%s exists)",
					s->name, s->dir)
			   : pc_err_errno(err, PC_EIO, "creating %s", s->dir);
	s->dir_made = true;
	owner_text(own, sizeof(own));
	pc_buf_printf(&t, "%s\n", own);
	if ((rc = dir_file(s, "launcher", &t, err)) < 0)
		return rc;
	/* resolv.conf: the guard's resolvers, the only ones a query may go to
	 * (glibc reads at most three) */
	pc_buf_printf(&t, "# portcullis sandbox %s: the guard's resolvers\n", s->name);
	for (size_t i = 0; i < s->cfg.dns.n_resolvers && i < 3; i++)
		pc_buf_printf(&t, "nameserver %s\n",
			      pc_addr_str(&s->cfg.dns.resolvers[i], b, sizeof(b)));
	if ((rc = dir_file(s, "resolv.conf", &t, err)) < 0)
		return rc;
	/* hosts: loopback only, so every other name goes through the guard */
	pc_buf_printf(&t, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost "
			  "ip6-loopback\n");
	if ((rc = dir_file(s, "hosts", &t, err)) < 0)
		return rc;
	if ((rc = bundle_make(s, sbfile_path(s, "ca-bundle.pem", path, sizeof(path)), err)) < 0)
		return rc;
	/* env: what the guest needs besides its network (attach: for the VM) */
	pc_buf_printf(&t, "PORTCULLIS_SANDBOX=%s\n", s->name);
	for (size_t i = 0; i < s->n_secrets; i++)
		pc_buf_printf(&t, "%s=%s\n", s->secrets[i].name, s->secrets[i].placeholder);
	if ((rc = dir_file(s, "env", &t, err)) < 0)
		return rc;
	if (!s->attach) {
		sbfile_path(s, "home", path, sizeof(path));
		if (mkdir(path, 0700) < 0 || chown(path, uid, gid) < 0)
			return pc_err_errno(err, PC_EIO, "creating %s", path);
	}
	return 0;
}

void sbfile_dir_remove(struct sb *s)
{
	if (s->dir_made)
		rm_tree(s->dir);
	s->dir_made = false;
}
