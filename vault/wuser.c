/* The workers' own user (vault.worker_user, docs/vault.md "Processes"). The
 * monitor keeps CAP_SETUID and CAP_SETGID in its permitted set only, and
 * CAP_KILL (to stop workers of another uid); a worker it starts gets the
 * first two as ambient capabilities, loads its sandbox's secrets as the
 * vault user, then becomes the worker user with no capability at all —
 * before it starts a thread or reads a sandbox byte. */
#include "vault/vault_int.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CAPB(c) (1ULL << (c))

uint64_t vault_monitor_caps_effective(void)
{
	return CAPB(CAP_KILL);
}

uint64_t vault_monitor_caps_permitted(void)
{
	return CAPB(CAP_SETUID) | CAPB(CAP_SETGID);
}

/* In the monitor's child between fork and exec: only system calls (a
 * threaded parent). Hands CAP_SETUID and CAP_SETGID over the exec as
 * ambient capabilities, and nothing else (not CAP_KILL). */
int vault_worker_caps_child(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	uint64_t c = vault_monitor_caps_permitted();

	memset(data, 0, sizeof(data));
	data[0].permitted = data[0].inheritable = (uint32_t)c;
	data[1].permitted = data[1].inheritable = (uint32_t)(c >> 32);
	if (syscall(SYS_capset, &hdr, data) < 0 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SETUID, 0, 0) < 0 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SETGID, 0, 0) < 0)
		return -1;
	return 0;
}

static bool caps_none(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];

	/* (valgrind does not know capget fills both) */
	memset(data, 0xff, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	for (int i = 0; i < 2; i++)
		if (data[i].permitted || data[i].effective || data[i].inheritable)
			return false;
	return true;
}

int vault_worker_become(const struct config *cfg, struct pc_err *err)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct none[2];
	pid_t parent = getppid();
	uid_t vu = getuid(), wu;
	gid_t wg;
	int rc;

	if ((rc = pc_user_lookup(cfg->vault.worker_user, &wu, &wg, err)) < 0)
		return rc;
	if (wu == 0 || wu == vu)
		return pc_err_set(err, PC_EPERM, "vault.worker_user %s is root or the vault's user",
				  cfg->vault.worker_user);
	memset(none, 0, sizeof(none));
	if (setgroups(1, &wg) < 0 || setresgid(wg, wg, wg) < 0 || setresuid(wu, wu, wu) < 0)
		return pc_err_errno(err, PC_EPERM, "becoming %s", cfg->vault.worker_user);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
	    syscall(SYS_capset, &hdr, none) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return pc_err_errno(err, PC_EPERM, "dropping the capabilities");
	/* paranoia, as pc_privdrop: neither the vault user nor root comes back */
	if (!caps_none() || setresuid(vu, vu, vu) == 0 || setuid(0) == 0)
		return pc_err_set(err, PC_EPERM, "could regain a privilege after becoming %s",
				  cfg->vault.worker_user);
	/* a change of uid clears these: set them again (the monitor may have
	 * died meanwhile: then end, as the death signal would have made us) */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0 || getppid() != parent)
		return pc_err_set(err, PC_EIO, "the monitor ended");
	return 0;
}
