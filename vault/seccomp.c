/* The worker's seccomp filter (libseccomp): the system calls a worker needs
 * to serve connections it is handed — socket I/O, upstream connects,
 * threads, memory, time, randomness — and nothing that reaches the file
 * system (open, exec, link, mkdir, ...), other processes (ptrace,
 * process_vm_*, kill of others) or the kernel's configuration. Anything not
 * listed fails with EPERM; the worst (exec, ptrace) kill the process. */
#include "vault/vault_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <seccomp.h>
#include <unistd.h>
#include <sys/socket.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* An argument test (SCMP_A0 and friends leave datum_b to the compiler,
 * which clang's -Wmissing-field-initializers refuses). */
static struct scmp_arg_cmp arg_cmp(unsigned arg, enum scmp_compare op, scmp_datum_t a,
				   scmp_datum_t b)
{
	return (struct scmp_arg_cmp){.arg = arg, .op = op, .datum_a = a, .datum_b = b};
}

/* An AddressSanitizer build (make sanitize) only: LeakSanitizer checks for
 * leaks at exit from a tracer it clone()s without CLONE_THREAD, which
 * ptrace()s the threads, waits for them and lists /proc/self/task. Without
 * these the check dies ("LeakSanitizer has encountered a fatal error") and
 * every worker fails; with them its leaks are reported like the monitor's.
 * The files it opens are read-only and opened without O_CLOEXEC, which
 * the program's own opens always use: so the worker still cannot open a
 * file as the program does (vault_privsep's test hook). Never compiled
 * into a normal build, whose filter stays as strict as above. */
#if defined(__SANITIZE_ADDRESS__)
#define VAULT_SECCOMP_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define VAULT_SECCOMP_LSAN 1
#endif
#endif

#ifdef VAULT_SECCOMP_LSAN
static int allow_lsan(scmp_filter_ctx ctx)
{
	static const int allow[] = {SCMP_SYS(ptrace),	SCMP_SYS(wait4),      SCMP_SYS(prctl),
				    SCMP_SYS(getdents), SCMP_SYS(getdents64), SCMP_SYS(clone)};
	const scmp_datum_t ro = O_ACCMODE | O_CLOEXEC | O_CREAT | O_TRUNC | O_APPEND | O_PATH;
	int rc = 0;

	for (size_t i = 0; i < sizeof(allow) / sizeof(allow[0]) && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allow[i], 0);
	/* (x86-64's sanitizer runtime calls open itself; openat elsewhere) */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(open), 1,
				      arg_cmp(1, SCMP_CMP_MASKED_EQ, ro, 0));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
				      arg_cmp(2, SCMP_CMP_MASKED_EQ, ro, 0));
	return rc;
}
#endif

int vault_seccomp_worker(struct pc_err *err)
{
	static const int allow[] = {
	    /* I/O on descriptors it has */
	    SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(pread64),
	    SCMP_SYS(close), SCMP_SYS(fcntl), SCMP_SYS(fstat), SCMP_SYS(lseek), SCMP_SYS(poll),
	    SCMP_SYS(ppoll), SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait), SCMP_SYS(epoll_ctl),
	    SCMP_SYS(select), SCMP_SYS(pselect6), SCMP_SYS(dup),
	    /* sockets: the connections handed over, upstream connections, logd */
	    SCMP_SYS(recvfrom), SCMP_SYS(recvmsg), SCMP_SYS(sendto), SCMP_SYS(sendmsg),
	    SCMP_SYS(sendmmsg), SCMP_SYS(recvmmsg), SCMP_SYS(connect), SCMP_SYS(shutdown),
	    SCMP_SYS(getsockopt), SCMP_SYS(setsockopt), SCMP_SYS(getsockname),
	    SCMP_SYS(getpeername), SCMP_SYS(eventfd2),
	    /* logd's record ring, made again with each connection to logd:
	     * anonymous memory, sized and sealed (no file system) */
	    SCMP_SYS(memfd_create), SCMP_SYS(ftruncate),
	    /* threads, signals, time */
	    SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list), SCMP_SYS(rseq),
	    SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity), SCMP_SYS(gettid), SCMP_SYS(getpid),
	    SCMP_SYS(getppid), SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid),
	    SCMP_SYS(getegid), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigaction),
	    SCMP_SYS(rt_sigreturn), SCMP_SYS(sigaltstack), SCMP_SYS(restart_syscall),
	    SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday),
	    SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep), SCMP_SYS(exit), SCMP_SYS(exit_group),
	    SCMP_SYS(madvise),
	    /* memory (sodium_malloc: mprotect, mlock) and randomness */
	    SCMP_SYS(brk), SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(mprotect),
	    SCMP_SYS(mlock), SCMP_SYS(munlock), SCMP_SYS(mlock2), SCMP_SYS(getrandom),
	    SCMP_SYS(membarrier)};
	static const int kill_[] = {SCMP_SYS(execve), SCMP_SYS(execveat),
#ifndef VAULT_SECCOMP_LSAN
				    SCMP_SYS(ptrace),
#endif
				    SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev)};
	scmp_filter_ctx ctx;
	int rc = 0;

	/* make valgrind (tests/faults/valgrind.bash) only: valgrind (3.19)
	 * implements no seccomp(2) — loading fails with EINVAL — and a filter
	 * would bind valgrind's own system calls too. So a worker that runs
	 * on valgrind AND was told so by the test's environment serves
	 * unfiltered, saying so; anywhere else (or on valgrind without the
	 * variable) a filter that cannot be installed ends the worker. */
	if (RUNNING_ON_VALGRIND && getenv("PORTCULLIS_VAULT_TEST_VALGRIND")) {
		pc_log(PC_LOG_WARN, "worker: on valgrind (test): no seccomp filter");
		return 0;
	}
	ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return pc_err_set(err, PC_ENOMEM, "seccomp_init failed");
	for (size_t i = 0; i < sizeof(allow) / sizeof(allow[0]) && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allow[i], 0);
	for (size_t i = 0; i < sizeof(kill_) / sizeof(kill_[0]) && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, kill_[i], 0);
#ifdef VAULT_SECCOMP_LSAN
	if (rc == 0)
		rc = allow_lsan(ctx);
#endif
	/* signals to its own threads only (raise, abort): the workers of
	 * other sandboxes share its uid, so the uid alone would let it
	 * signal them */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
				      arg_cmp(0, SCMP_CMP_EQ, (scmp_datum_t)getpid(), 0));
	/* new sockets: IP (upstream) and UNIX (logd, on reconnect) only */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				      arg_cmp(0, SCMP_CMP_EQ, AF_INET, 0));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				      arg_cmp(0, SCMP_CMP_EQ, AF_INET6, 0));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				      arg_cmp(0, SCMP_CMP_EQ, AF_UNIX, 0));
	/* newfstatat only with AT_EMPTY_PATH: the C library's fstat. (The
	 * filter cannot read the path: a crafted call with a path and that
	 * flag still gets a file's metadata — never its content.) */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(newfstatat), 1,
				      arg_cmp(3, SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH));
		/* threads, not processes: clone with CLONE_THREAD only; clone3's flags
		 * are behind a pointer the filter cannot read, so it is refused with
		 * ENOSYS and the C library falls back to clone */
#ifndef VAULT_SECCOMP_LSAN /* (there any clone is allowed) */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				      arg_cmp(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
#endif
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc < 0)
		return pc_err_set(err, PC_EIO, "installing the seccomp filter: %s", strerror(-rc));
	return 0;
}
