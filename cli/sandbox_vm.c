/* `portcullis sandbox run --vm`: the sandbox is a real QEMU VM whose
 * virtio-net is a tap on the bridge (docs/sandbox.md). Here: the tap, the
 * run's configuration for the guest (placeholders only), the QEMU command
 * line, and the guest's console streamed back with its exit status. */
#include "cli/cli_int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/kvm.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The line the guest's init prints after the command (packaging/vm/init). */
#define SBVM_MARK "@@portcullis-exit "
/* The tap's descriptor in QEMU (after stdin, stdout, stderr). */
#define SBVM_TAP_FD 3
/* What the guest's init prints, and nothing else, when booted with
 * portcullis.probe=1 (the KVM probe). */
#define SBVM_PROBE_MARK "@@portcullis-probe@@"
/* How long a KVM guest gets to reach its init before KVM is taken as not
 * working. Where KVM works the probe guest is there in well under a second;
 * where it hangs (nested virtualisation here) it never is. */
#define SBVM_PROBE_MS 4000
/* qboot (Debian's qemu-system-data) starts a -kernel guest in a fraction
 * of SeaBIOS's time under TCG; SeaBIOS is the fallback. */
#define SBVM_QBOOT "/usr/share/qemu/qboot.rom"
/* Kernel arguments that skip what a throwaway guest does not need and is
 * slow under software emulation (docs/sandbox.md, "Boot time"): crypto
 * self-tests, the TSC and timer checks, the PS/2 controller, serial ports
 * beyond the console, audit, KASLR, and the CPU vulnerability mitigations
 * (they protect the guest's processes from each other; the guest runs one
 * command as its root, and the host's own mitigations are not affected).
 * noreplace-smp: with one vCPU the kernel rewrites every lock prefix in its
 * text into a no-op at boot, and every such write throws away code QEMU has
 * translated: about 0.2 s of a TCG boot, for a saving the guest never
 * notices (a lock prefix on one CPU costs a few cycles). The initcalls
 * left out are work the guest has no use for, each 20-150 ms under TCG
 * (initcall_debug): the kprobe tracer's setup, the KDF108 and CRC-T10DIF
 * self-tests and modules, TOMOYO's interface and IMA's measurement list; and
 * the ACPI PnP scan (the guest has no PnP devices to find). */
#define SBVM_FAST_ARGS                                                                             \
	" cryptomgr.notests tsc=reliable no_timer_check i8042.noaux i8042.nokbd i8042.nopnp"       \
	" 8250.nr_uarts=1 audit=0 nokaslr mitigations=off random.trust_cpu=on noreplace-smp"       \
	" pnpacpi=off initcall_blacklist=init_kprobe_trace,crypto_kdf108_init,"                    \
	"tomoyo_initerface_init,init_ima,crc_t10dif_mod_init"
/* One vCPU under TCG: no local APIC timer, the HPET is the clock event
 * device. The kernel calibrates the APIC timer for 100 ms of guest time
 * (LAPIC_CAL_LOOPS) and the guest has no use for a per-CPU timer; under
 * TCG both timers are emulated by QEMU alike. Not under KVM, whose APIC
 * timer is in the host kernel and cheaper than the HPET, nor with several
 * vCPUs, which would all need the HPET's broadcast. */
#define SBVM_TCG_UP_ARGS " nolapic_timer"

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

	n = (size_t)snprintf(out, len, "console=ttyS0 quiet loglevel=0 panic=-1 rdinit=/init%s%s",
			     SBVM_FAST_ARGS, !s->vm_kvm && s->vm_cpus == 1 ? SBVM_TCG_UP_ARGS : "");
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

/* The kernel QEMU loads: make vm-image writes, beside vmlinuz, vmlinux, the
 * same kernel uncompressed (an ELF that QEMU starts at its PVH entry point):
 * under TCG that skips running the decompressor, about 0.5 s of QEMU's CPU
 * (docs/sandbox.md, "Boot time"). Taken only when the kernel asked for is
 * named vmlinuz and vmlinux beside it is not older (written with it). */
static const char *kernel_file(const struct sb *s, char *buf, size_t len)
{
	const char *slash = strrchr(s->vm_kernel, '/'), *base = slash ? slash + 1 : s->vm_kernel;
	struct stat z, x;
	int dl = (int)(base - s->vm_kernel);

	if (strcmp(base, "vmlinuz") ||
	    (size_t)snprintf(buf, len, "%.*svmlinux", dl, s->vm_kernel) >= len)
		return s->vm_kernel;
	if (stat(s->vm_kernel, &z) < 0 || stat(buf, &x) < 0 || !S_ISREG(x.st_mode) ||
	    access(buf, R_OK) < 0 || x.st_mtime < z.st_mtime)
		return s->vm_kernel;
	return buf;
}

/* The QEMU arguments the run and the KVM probe share, into argv (room for
 * 24); returns how many. kbuf holds the kernel's path (kernel_file). */
static size_t qemu_common(const struct sb *s, const char **argv, const char *accel, const char *mem,
			  const char *cpus, char *kbuf, size_t klen)
{
	size_t n = 0;

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
	if (access(SBVM_QBOOT, R_OK) == 0) {
		argv[n++] = "-bios";
		argv[n++] = SBVM_QBOOT;
	}
	/* QEMU parses what the guest sends: it gets no more than it needs */
	argv[n++] = "-sandbox";
	argv[n++] = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny";
	argv[n++] = "-kernel";
	argv[n++] = kernel_file(s, kbuf, klen);
	argv[n++] = "-initrd";
	argv[n++] = s->vm_initrd;
	return n;
}

/* The tools disk (make vm-image: tools.img beside the initramfs; curl,
 * python3 and their libraries, mounted read-only on the guest's /usr) as a
 * -drive argument; false when there is none (an initramfs with everything
 * in it still boots). Read-only for QEMU: every VM shares the one file. */
static bool tools_drive(const struct sb *s, char *out, size_t len)
{
	char path[PC_PATH_MAX + 64];
	const char *slash = strrchr(s->vm_initrd, '/');
	size_t n;

	snprintf(path, sizeof(path), "%.*stools.img", slash ? (int)(slash - s->vm_initrd + 1) : 0,
		 s->vm_initrd);
	if (access(path, R_OK) < 0)
		return false;
	n = (size_t)snprintf(out, len, "if=none,id=t0,format=raw,readonly=on,file=");
	/* QEMU's option syntax: a comma in the value is written twice */
	for (const char *p = path; *p && n + 3 < len; p++) {
		out[n++] = *p;
		if (*p == ',')
			out[n++] = ',';
	}
	out[n] = '\0';
	return n + 3 < len;
}

int sbvm_run(const struct sb *s, int *status, struct pc_err *err)
{
	char run[sizeof(s->dir) + 16], fw[sizeof(run) + 40], append[1024], mac[32], net[64],
	    dev[96], mem[16], cpus[16], accel[48], line[4096], drive[2 * PC_PATH_MAX + 160],
	    kern[PC_PATH_MAX + 16];
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
	n = qemu_common(s, argv, accel, mem, cpus, kern, sizeof(kern));
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
	if (tools_drive(s, drive, sizeof(drive))) {
		argv[n++] = "-drive";
		argv[n++] = drive;
		argv[n++] = "-device";
		argv[n++] = "virtio-blk-pci,drive=t0";
	}
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

/* Boot the guest image under KVM with portcullis.probe=1: 0 when its init
 * printed the probe line within SBVM_PROBE_MS, -1 otherwise (QEMU is
 * killed). Nothing of the sandbox is given to it: no network, no run file. */
static int kvm_boots(const struct sb *s)
{
	const char *argv[40];
	char buf[4096], kern[PC_PATH_MAX + 16];
	size_t n, got = 0;
	int p[2], ok = -1, ws;
	long left = SBVM_PROBE_MS;
	struct timespec t0, t1;
	pid_t pid;

	n = qemu_common(s, argv, "kvm", "128", "1", kern, sizeof(kern));
	argv[n++] = "-append";
	argv[n++] = "console=ttyS0 quiet loglevel=0 panic=-1 rdinit=/init "
		    "portcullis.probe=1" SBVM_FAST_ARGS;
	argv[n] = NULL;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		sigset_t none;
		int nul = open("/dev/null", O_RDWR);

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 2);
		}
		dup2(p[1], 1);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (left > 0) {
		struct pollfd pf = {.fd = p[0], .events = POLLIN};
		ssize_t r;

		if (poll(&pf, 1, (int)left) > 0) {
			r = read(p[0], buf + got, sizeof(buf) - 1 - got);
			if (r <= 0 && !(r < 0 && errno == EINTR))
				break;
			if (r > 0) {
				got += (size_t)r;
				buf[got] = '\0';
				if (strstr(buf, SBVM_PROBE_MARK)) {
					ok = 0;
					break;
				}
				/* keep the tail: the mark may straddle two reads */
				if (got > sizeof(buf) / 2) {
					memmove(buf, buf + got - 64, 64);
					got = 64;
				}
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		left = SBVM_PROBE_MS -
		       ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
	}
	kill(pid, SIGKILL);
	close(p[0]);
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	return ok;
}

/* The probe's cache key: this host's boot, /dev/kvm, the guest image. */
static void probe_key(const struct sb *s, const struct stat *kvm, char *out, size_t len)
{
	char boot[64] = "";
	struct stat k = {0}, i = {0};
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			boot[0] = '\0';
		fclose(f);
		boot[strcspn(boot, "\n")] = '\0';
	}
	stat(s->vm_kernel, &k);
	stat(s->vm_initrd, &i);
	snprintf(out, len, "%s %lx %lu %s %lld %lld %s %lld %lld", boot,
		 (unsigned long)kvm->st_rdev, (unsigned long)kvm->st_ino, s->vm_kernel,
		 (long long)k.st_size, (long long)k.st_mtime, s->vm_initrd, (long long)i.st_size,
		 (long long)i.st_mtime);
}

void sbvm_accel(struct sb *s)
{
	const char *want = s->vm_accel ? s->vm_accel : "auto";
	char cache[sizeof(s->cfg.run_dir) + 16], key[PC_PATH_MAX * 2 + 160], rec[sizeof(key) + 8],
	    *old = NULL;
	size_t oldlen = 0;
	int rl;
	struct stat st;
	struct pc_err e;
	int fd, ver;

	s->vm_kvm = false;
	if (!strcmp(want, "tcg") || !strcmp(want, "kvm")) {
		s->vm_kvm = want[0] == 'k';
		snprintf(s->vm_accel_why, sizeof(s->vm_accel_why), "--accel %s", want);
		return;
	}
	/* auto: the cheap checks every time, then the boot probe once */
	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		snprintf(s->vm_accel_why, sizeof(s->vm_accel_why), "auto, no usable /dev/kvm (%s)",
			 strerror(errno));
		return;
	}
	ver = ioctl(fd, KVM_GET_API_VERSION, 0);
	if (ver != KVM_API_VERSION || fstat(fd, &st) < 0) {
		snprintf(s->vm_accel_why, sizeof(s->vm_accel_why),
			 "auto, /dev/kvm does not answer as KVM (KVM_GET_API_VERSION: %s)",
			 ver < 0 ? strerror(errno) : "unexpected version");
		close(fd);
		return;
	}
	close(fd);
	snprintf(cache, sizeof(cache), "%s/vm-accel", s->cfg.run_dir);
	probe_key(s, &st, key, sizeof(key));
	if (pc_file_read(cache, 4096, &old, &oldlen, &e) == 0) {
		size_t kl = strlen(key);

		if (oldlen > kl + 1 && !memcmp(old, key, kl) && old[kl] == '\n') {
			s->vm_kvm = !strncmp(old + kl + 1, "kvm", 3);
			snprintf(s->vm_accel_why, sizeof(s->vm_accel_why),
				 "auto, %s (probed earlier in this host's boot)",
				 s->vm_kvm ? "KVM booted a probe guest"
					   : "KVM did not boot a probe guest");
			free(old);
			return;
		}
		free(old);
	}
	s->vm_kvm = kvm_boots(s) == 0;
	if (s->vm_kvm)
		snprintf(s->vm_accel_why, sizeof(s->vm_accel_why),
			 "auto, KVM booted a probe guest");
	else
		snprintf(s->vm_accel_why, sizeof(s->vm_accel_why),
			 "auto, KVM did not boot a probe guest within %d ms", SBVM_PROBE_MS);
	rl = snprintf(rec, sizeof(rec), "%s\n%s\n", key, s->vm_kvm ? "kvm" : "tcg");
	/* no cache, no harm: the next run probes again */
	if (rl > 0 && (size_t)rl < sizeof(rec))
		pc_file_write_atomic(cache, rec, (size_t)rl, 0644, &e);
}
