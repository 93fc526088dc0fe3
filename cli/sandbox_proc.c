/* The launcher's processes: the command (inside the sandbox's namespaces,
 * as its unprivileged user), signals while it runs, the processes it
 * leaves in the namespace, and the vault's reload. */
#include "cli/cli_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What a child that could not exec tells its parent. */
struct spawn_fail {
	int code;
	char msg[480];
};

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* The private mounts of a `run` sandbox: the guard's resolv.conf and a
 * loopback-only hosts over the gateway's (as `ip netns exec` does with
 * /etc/netns/NAME, without leaving anything in /etc), and a sysfs of the
 * sandbox's own network namespace. */
static int sandbox_mounts(const struct sb *s, struct pc_err *err)
{
	static const char *const files[] = {"resolv.conf", "hosts"};
	char src[sizeof(s->dir) + 32], dst[64];

	if (unshare(CLONE_NEWNS) < 0)
		return pc_err_errno(err, PC_EIO, "creating the sandbox's mount namespace");
	/* nothing mounted here may propagate back to the gateway */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return pc_err_errno(err, PC_EIO, "making the sandbox's mounts private");
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		sbfile_path(s, files[i], src, sizeof(src));
		snprintf(dst, sizeof(dst), "/etc/%s", files[i]);
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			return pc_err_errno(err, PC_EIO, "mounting the sandbox's %s over %s", src,
					    dst);
	}
	if (umount2("/sys", MNT_DETACH) < 0 && errno != EINVAL)
		return pc_err_errno(err, PC_EIO, "unmounting the gateway's /sys");
	if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return pc_err_errno(err, PC_EIO, "mounting the sandbox's /sys");
	return 0;
}

/* In the child, after fork: everything up to exec. Returns only on failure. */
static void child_run(const struct sb *s, char *const *argv, char *const *envp, pid_t parent,
		      int efd)
{
	struct spawn_fail f = {.code = PC_EIO};
	struct pc_err e = {0};
	sigset_t none;
	char cwd[PC_PATH_MAX], home[sizeof(s->dir) + 8];

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (s->netns_fd >= 0) {
		if (setns(s->netns_fd, CLONE_NEWNET) < 0) {
			pc_err_errno(&e, PC_EIO, "entering the sandbox's network namespace");
			goto fail;
		}
		if (sandbox_mounts(s, &e) < 0)
			goto fail;
	}
	if (s->user[0]) {
		if (pc_privdrop(s->user, 0, &e) < 0) {
			pc_err_prefix(&e, "dropping to user %s: ", s->user);
			goto fail;
		}
		/* the sandbox does not outlive its launcher (set after the uid
		 * change, which clears it) */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent) {
			pc_err_set(&e, PC_EIO, "the launcher went away");
			goto fail;
		}
	}
	/* the caller's directory when the user may use it, else its home */
	if (!getcwd(cwd, sizeof(cwd)) || access(cwd, R_OK | X_OK) < 0) {
		sbfile_path(s, "home", home, sizeof(home));
		if (chdir(s->netns_fd >= 0 ? home : "/") < 0) {
			pc_err_errno(&e, PC_EIO, "changing to %s", home);
			goto fail;
		}
	}
	/* only stdin, stdout, stderr and the report pipe (close-on-exec) */
	if (efd > 3)
		close_range(3, (unsigned)efd - 1, 0);
	close_range((unsigned)efd + 1, ~0U, 0);
	execvpe(argv[0], argv, envp);
	f.code = errno == ENOENT ? PC_ENOENT : PC_EPERM;
	pc_err_errno(&e, f.code, "cannot run '%s'", argv[0]);
fail:
	if (f.code != PC_ENOENT && f.code != PC_EPERM)
		f.code = e.code ? e.code : PC_EIO;
	pc_strlcpy(f.msg, e.msg, sizeof(f.msg));
	if (write(efd, &f, sizeof(f)) < 0) {
		/* nothing more to tell anyone */
	}
	_exit(127);
}

int sbproc_spawn(const struct sb *s, char *const *argv, char *const *envp, pid_t *pid,
		 struct pc_err *err)
{
	struct spawn_fail f;
	pid_t parent = getpid(), c;
	int ep[2];
	ssize_t n;

	if (pipe2(ep, O_CLOEXEC) < 0)
		return pc_err_errno(err, PC_EIO, "pipe");
	fflush(NULL);
	c = fork();
	if (c < 0) {
		close(ep[0]);
		close(ep[1]);
		return pc_err_errno(err, PC_EIO, "fork");
	}
	if (c == 0) {
		close(ep[0]);
		child_run(s, argv, envp, parent, ep[1]);
	}
	close(ep[1]);
	do
		n = read(ep[0], &f, sizeof(f));
	while (n < 0 && errno == EINTR);
	close(ep[0]);
	if (n == (ssize_t)sizeof(f)) { /* exec did not happen */
		waitpid(c, NULL, 0);
		f.msg[sizeof(f.msg) - 1] = '\0';
		return pc_err_set(err, f.code, "%s", f.msg);
	}
	*pid = c;
	return 0;
}

int sbproc_wait(pid_t pid)
{
	sigset_t set;
	siginfo_t si;
	int st = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	/* (blocked by the caller since before the fork: nothing is missed) */
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return 128 + SIGKILL; /* cannot happen: it is our child */
		if (sigwaitinfo(&set, &si) < 0)
			continue;
		if (si.si_signo == SIGCHLD)
			continue;
		/* a signal from the terminal reached the whole foreground group,
		 * the command included; anything sent to us alone is passed on */
		if (si.si_code == SI_KERNEL)
			continue;
		kill(pid, si.si_signo);
	}
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 1;
}

void sbproc_wait_signal(void)
{
	sigset_t set;
	siginfo_t si;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	while (sigwaitinfo(&set, &si) < 0 && errno == EINTR) {
	}
}

int sbproc_kill_netns(int netns_fd)
{
	struct stat ns, st;
	int killed = 0;

	if (netns_fd < 0 || fstat(netns_fd, &ns) < 0)
		return 0;
	for (int round = 0; round < 200; round++) {
		struct dirent *de;
		DIR *d = opendir("/proc");
		int found = 0;

		if (!d)
			break;
		while ((de = readdir(d))) {
			char path[300];
			pid_t p = (pid_t)atoi(de->d_name);

			if (p <= 0 || p == getpid())
				continue;
			snprintf(path, sizeof(path), "/proc/%s/ns/net", de->d_name);
			if (stat(path, &st) == 0 && st.st_ino == ns.st_ino &&
			    st.st_dev == ns.st_dev) {
				kill(p, SIGKILL);
				found++;
			}
		}
		closedir(d);
		/* orphans were handed to us (child subreaper): collect them */
		while (waitpid(-1, NULL, WNOHANG) > 0) {
		}
		if (!found)
			break;
		killed += round == 0 ? found : 0;
		sleep_ms(10);
	}
	return killed;
}

/* ---- the vault ----------------------------------------------------------- */

/* The inode of a listening TCP socket on port in /proc/net/tcp or tcp6
 * (this network namespace's). */
static unsigned long listen_inode(const char *file, uint16_t port)
{
	char line[512];
	unsigned long ino = 0;
	FILE *f = fopen(file, "re");

	if (!f)
		return 0;
	while (!ino && fgets(line, sizeof(line), f)) {
		char local[64], rem[64], st[8];
		unsigned lport;
		unsigned long inode;

		if (sscanf(line, " %*s %63s %63s %7s %*s %*s %*s %*s %*s %lu", local, rem, st,
			   &inode) != 4)
			continue;
		const char *colon = strrchr(local, ':');

		if (!colon || sscanf(colon + 1, "%x", &lport) != 1)
			continue;
		if (lport == port && strcmp(st, "0A") == 0) /* TCP_LISTEN */
			ino = inode;
	}
	fclose(f);
	return ino;
}

pid_t sbproc_vault_pid(const struct config *cfg)
{
	unsigned long ino = listen_inode("/proc/net/tcp", cfg->vault.listen.port);
	char want[64], path[300], link[PATH_MAX];
	struct dirent *de;
	pid_t found = 0;
	DIR *d;

	if (!ino)
		ino = listen_inode("/proc/net/tcp6", cfg->vault.listen.port);
	if (!ino)
		return 0;
	snprintf(want, sizeof(want), "socket:[%lu]", ino);
	d = opendir("/proc");
	while (d && !found && (de = readdir(d))) {
		pid_t p = (pid_t)atoi(de->d_name);
		struct dirent *fe;
		DIR *fd;
		ssize_t n;

		if (p <= 0)
			continue;
		/* only the vault: whatever else holds the port must not get a
		 * SIGHUP (its default action ends a process) */
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)p);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		const char *base = strrchr(link, '/');

		if (strncmp(base ? base + 1 : link, "portcullis-vault", 16) != 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)p);
		fd = opendir(path);
		while (fd && !found && (fe = readdir(fd))) {
			char fpath[600];

			snprintf(fpath, sizeof(fpath), "%s/%s", path, fe->d_name);
			n = readlink(fpath, link, sizeof(link) - 1);
			if (n > 0) {
				link[n] = '\0';
				if (!strcmp(link, want))
					found = p;
			}
		}
		if (fd)
			closedir(fd);
	}
	if (d)
		closedir(d);
	return found;
}

static bool hup_pending(pid_t pid)
{
	char path[64], line[256];
	bool pending = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long mask;

		if ((sscanf(line, "ShdPnd: %llx", &mask) == 1 ||
		     sscanf(line, "SigPnd: %llx", &mask) == 1) &&
		    (mask & (1ULL << (SIGHUP - 1))))
			pending = true;
	}
	fclose(f);
	return pending;
}

/* Is the vault's main thread back in its accept loop's poll? 1 yes, 0 no,
 * -1 when the kernel does not say (no /proc/PID/syscall). */
static int in_poll(pid_t pid)
{
	char path[64], buf[64];
	ssize_t n;
	long nr;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "%ld", &nr) != 1)
		return 0; /* "running" */
#ifdef SYS_poll
	if (nr == SYS_poll)
		return 1;
#endif
	return nr == SYS_ppoll;
}

int sbproc_vault_reload(pid_t pid, struct pc_err *err)
{
	char path[64];

	if (kill(pid, SIGHUP) < 0)
		return pc_err_errno(err, PC_EIO, "signalling the vault (pid %d)", (int)pid);
	/* The vault has no control socket: it reloads in its main loop right
	 * after reading the signal, then polls again. So: once the signal is
	 * no longer pending and the main thread is back in poll, the reload
	 * is done (it logs its result to its own stderr). */
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	for (int i = 0, taken = 0; i < 1000; i++) {
		int p;

		if (access(path, F_OK) < 0)
			return pc_err_set(err, PC_EIO, "the vault (pid %d) exited on reload",
					  (int)pid);
		if (!hup_pending(pid)) {
			p = in_poll(pid);
			/* without /proc/PID/syscall: the signal was taken; a reload
			 * reads a few files, give it a moment */
			if (p == 1 || (p < 0 && ++taken > 30))
				return 0;
		}
		sleep_ms(10);
	}
	return pc_err_set(err, PC_ETIMEOUT, "the vault (pid %d) did not reload within 10 s",
			  (int)pid);
}
