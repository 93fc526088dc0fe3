/* `portcullis sandbox run --vm`: the sandbox is a real QEMU VM whose
 * virtio-net is a tap on the bridge (docs/sandbox.md). Here: the tap, the
 * run's configuration for the guest (placeholders only), the QEMU command
 * line, and the guest's console streamed back with its exit status. */
#include "cli/cli_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The line the guest's init prints after the command (packaging/vm/init). */
#define SBVM_MARK "@@portcullis-exit "
/* The tap's descriptor in QEMU (after stdin, stdout, stderr). */
#define SBVM_TAP_FD 3

int sbvm_tap_add(const char *name, int *fd_out, struct pc_err *err)
{
	struct ifreq ifr = {0};
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "opening /dev/net/tun (for the VM's tap)");
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	pc_strlcpy(ifr.ifr_name, name, sizeof(ifr.ifr_name));
	/* not persistent: the launcher holds it open (the port has its
	 * carrier, so the bridge forwards and the check can prove it) and
	 * hands the descriptor to QEMU; it goes when the last one closes */
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int rc = pc_err_errno(err, PC_EIO, "creating tap %s", name);

		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

/* 'text' quoted for sh. */
static void sq(struct pc_buf *b, const char *text)
{
	pc_buf_putc(b, '\'');
	for (const char *p = text; *p; p++)
		if (*p == '\'')
			pc_buf_puts(b, "'\\''");
		else
			pc_buf_putc(b, *p);
	pc_buf_putc(b, '\'');
}

/* The guest's run file: its environment (placeholders, never values), the
 * trust bundle, and the command, as a script the guest's init sources. */
static int write_run(const struct sb *s, const char *path, struct pc_err *err)
{
	static const char *const ca_vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
					      "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
					      "GIT_SSL_CAINFO"};
	struct pc_buf b;
	char bundle[sizeof(s->dir) + 32];
	char *ca = NULL;
	size_t calen = 0;
	int rc;

	pc_buf_init(&b, 0, 0);
	sbfile_path(s, "ca-bundle.pem", bundle, sizeof(bundle));
	if ((rc = pc_file_read(bundle, 1 << 20, &ca, &calen, err)) < 0)
		return rc;
	pc_buf_printf(&b, "# portcullis sandbox %s: the guest's run (sourced by /init)\n", s->name);
	pc_buf_printf(&b,
		      "cat >/run/ca-bundle.pem <<'PORTCULLIS_CA_END'\n%.*s%s"
		      "PORTCULLIS_CA_END\n",
		      (int)calen, ca, calen && ca[calen - 1] != '\n' ? "\n" : "");
	pc_buf_printf(&b, "export HOME=/root PATH=/bin:/usr/bin PORTCULLIS_SANDBOX=");
	sq(&b, s->name);
	pc_buf_printf(&b, "\n");
	for (size_t i = 0; i < sizeof(ca_vars) / sizeof(ca_vars[0]); i++)
		pc_buf_printf(&b, "export %s=/run/ca-bundle.pem\n", ca_vars[i]);
	for (size_t i = 0; i < s->n_secrets; i++) {
		pc_buf_printf(&b, "export %s=", s->secrets[i].name);
		sq(&b, s->secrets[i].placeholder);
		pc_buf_printf(&b, "\n");
	}
	for (size_t i = 0; i < s->n_env; i++) {
		const char *eq = strchr(s->env[i], '='), *v = eq ? eq + 1 : NULL;
		int nl = eq ? (int)(eq - s->env[i]) : (int)strlen(s->env[i]);

		if (!v)
			v = getenv(s->env[i]);
		if (!v)
			continue;
		pc_buf_printf(&b, "export %.*s=", nl, s->env[i]);
		sq(&b, v);
		pc_buf_printf(&b, "\n");
	}
	pc_buf_printf(&b, "exec");
	for (char **a = s->cmd; *a; a++) {
		pc_buf_printf(&b, " ");
		sq(&b, *a);
	}
	pc_buf_printf(&b, "\n");
	free(ca);
	if (b.err) {
		pc_buf_free(&b);
		return pc_err_set(err, PC_ENOMEM, "the guest's run file");
	}
	rc = pc_file_write_atomic(path, b.p, b.len, 0600, err);
	pc_buf_free(&b);
	return rc;
}

/* The kernel command line: the documented static assignment. */
static void cmdline(const struct sb *s, char *out, size_t len)
{
	char a[PC_ADDRSTRLEN], g[PC_ADDRSTRLEN];
	size_t n;

	n = (size_t)snprintf(out, len, "console=ttyS0 quiet loglevel=0 panic=-1 rdinit=/init");
	if (s->addr4.family && n < len)
		n += (size_t)snprintf(out + n, len - n, " portcullis.ip=%s/%u portcullis.gw=%s",
				      pc_addr_str(&s->addr4, a, sizeof(a)), s->br.net4.len,
				      pc_addr_str(&s->br.net4.addr, g, sizeof(g)));
	if (s->addr6.family && n < len)
		n += (size_t)snprintf(out + n, len - n, " portcullis.ip6=%s/%u portcullis.gw6=%s",
				      pc_addr_str(&s->addr6, a, sizeof(a)), s->br.net6.len,
				      pc_addr_str(&s->br.net6.addr, g, sizeof(g)));
	if (s->cfg.dns.n_resolvers && n < len)
		snprintf(out + n, len - n, " portcullis.dns=%s",
			 pc_addr_str(&s->cfg.dns.resolvers[0], a, sizeof(a)));
}

/* Pass the guest's console through, line by line, up to the status line;
 * what comes after it (the kernel's own goodbye) is dropped. */
static void feed(char *line, size_t *n, bool *done, int *status)
{
	if (*done)
		goto out;
	if (*n && line[*n - 1] == '\r')
		(*n)--;
	line[*n] = '\0';
	if (!strncmp(line, SBVM_MARK, strlen(SBVM_MARK))) {
		*status = atoi(line + strlen(SBVM_MARK));
		*done = true;
		goto out;
	}
	fwrite(line, 1, *n, stdout);
	fputc('\n', stdout);
	fflush(stdout);
out:
	*n = 0;
}

int sbvm_run(const struct sb *s, int *status, struct pc_err *err)
{
	char run[sizeof(s->dir) + 16], fw[sizeof(run) + 40], append[1024], mac[32], net[64],
	    dev[96], mem[16], cpus[16], accel[48], line[4096];
	const char *argv[48];
	size_t n = 0, ll = 0;
	int p[2], rc, ws = 0, st = -1;
	bool done = false, killed = false;
	pid_t pid;

	sbfile_path(s, "guest-run.sh", run, sizeof(run));
	if ((rc = write_run(s, run, err)) < 0)
		return rc;
	snprintf(fw, sizeof(fw), "name=opt/portcullis/run,file=%s", run);
	cmdline(s, append, sizeof(append));
	snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", s->mac[0], s->mac[1], s->mac[2],
		 s->mac[3], s->mac[4], s->mac[5]);
	snprintf(net, sizeof(net), "tap,id=n0,fd=%d", SBVM_TAP_FD);
	snprintf(dev, sizeof(dev), "virtio-net-pci,netdev=n0,mac=%s", mac);
	snprintf(mem, sizeof(mem), "%u", s->vm_mem);
	snprintf(cpus, sizeof(cpus), "%u", s->vm_cpus);
	snprintf(accel, sizeof(accel), "%s", s->vm_kvm ? "kvm" : "tcg");
	argv[n++] = "qemu-system-x86_64";
	argv[n++] = "-M";
	argv[n++] = "q35";
	argv[n++] = "-accel";
	argv[n++] = accel;
	argv[n++] = "-m";
	argv[n++] = mem;
	argv[n++] = "-smp";
	argv[n++] = cpus;
	argv[n++] = "-nodefaults";
	argv[n++] = "-no-user-config";
	argv[n++] = "-display";
	argv[n++] = "none";
	argv[n++] = "-no-reboot";
	argv[n++] = "-serial";
	argv[n++] = "stdio";
	argv[n++] = "-kernel";
	argv[n++] = s->vm_kernel;
	argv[n++] = "-initrd";
	argv[n++] = s->vm_initrd;
	argv[n++] = "-append";
	argv[n++] = append;
	argv[n++] = "-fw_cfg";
	argv[n++] = fw;
	argv[n++] = "-netdev";
	argv[n++] = net;
	argv[n++] = "-device";
	argv[n++] = dev;
	argv[n++] = "-device";
	argv[n++] = "virtio-rng-pci";
	/* QEMU parses what the guest sends: it gets no more than it needs */
	argv[n++] = "-sandbox";
	argv[n++] = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny";
	argv[n] = NULL;
	if (pipe2(p, O_CLOEXEC) < 0)
		return pc_err_errno(err, PC_EIO, "pipe");
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return pc_err_errno(err, PC_EIO, "fork");
	}
	if (pid == 0) {
		sigset_t none;
		int nul = open("/dev/null", O_RDONLY);

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (nul >= 0)
			dup2(nul, 0);
		dup2(p[1], 1);
		/* dup2 clears close-on-exec on the copy */
		if (s->vm_tap_fd != SBVM_TAP_FD && dup2(s->vm_tap_fd, SBVM_TAP_FD) < 0)
			_exit(126);
		if (s->vm_tap_fd == SBVM_TAP_FD)
			fcntl(SBVM_TAP_FD, F_SETFD, 0);
		execvp(argv[0], (char *const *)argv);
		fprintf(
		    stderr,
		    "portcullis: sandbox run --vm: cannot run %s: %s (install qemu-system-x86)\n",
		    argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		sigset_t pend;
		ssize_t r;

		if (!killed && sigpending(&pend) == 0 &&
		    (sigismember(&pend, SIGINT) || sigismember(&pend, SIGTERM) ||
		     sigismember(&pend, SIGHUP) || sigismember(&pend, SIGQUIT))) {
			kill(pid, SIGTERM); /* QEMU stops the VM and exits */
			killed = true;
		}
		if (poll(&pf, 1, 200) <= 0)
			continue;
		r = read(p[0], line + ll, sizeof(line) - 1 - ll);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		for (size_t i = ll; i < ll + (size_t)r; i++) {
			if (line[i] != '\n')
				continue;
			size_t m = i;

			feed(line, &m, &done, &st);
			memmove(line, line + i + 1, ll + (size_t)r - i - 1);
			r -= (ssize_t)(i + 1 - ll);
			ll = 0;
			i = (size_t)-1;
		}
		ll += (size_t)r;
		if (ll == sizeof(line) - 1)
			feed(line, &ll, &done, &st);
	}
	if (ll)
		feed(line, &ll, &done, &st);
	close(p[0]);
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	if (killed)
		*status = 128 + SIGTERM;
	else if (done)
		*status = st;
	else if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127)
		return pc_err_set(err, PC_ENOENT, "qemu-system-x86_64 is not installed");
	else
		return pc_err_set(err, PC_EIO,
				  "the VM ended without the command's status (QEMU %s %d)",
				  WIFEXITED(ws) ? "exited with status" : "killed by signal",
				  WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
	return 0;
}
