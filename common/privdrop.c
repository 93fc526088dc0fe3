/* Privilege separation, OpenSSH style: do the privileged setup as root,
 * then become the process's own user keeping only named capabilities. */
#include "common/pc.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int pc_user_lookup(const char *user, uid_t *uid, gid_t *gid, struct pc_err *err)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	int rc;

	rc = getpwnam_r(user, &pw, buf, sizeof(buf), &res);
	if (rc != 0 || !res)
		return pc_err_set(err, PC_ENOENT, "user %s does not exist", user);
	*uid = pw.pw_uid;
	*gid = pw.pw_gid;
	return 0;
}

static int caps_set(uint64_t eff, uint64_t perm, struct pc_err *err)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	data[0].effective = (uint32_t)eff;
	data[1].effective = (uint32_t)(eff >> 32);
	data[0].permitted = (uint32_t)(eff | perm);
	data[1].permitted = (uint32_t)((eff | perm) >> 32);
	if (syscall(SYS_capset, &hdr, data) < 0)
		return pc_err_errno(err, PC_EPERM, "capset");
	return 0;
}

/* Threads: capset applies to the calling thread only, so this must run
 * before the process starts any thread. */
int pc_privdrop(const char *user, uint64_t keep_caps, struct pc_err *err)
{
	return pc_privdrop_permitted(user, keep_caps, 0, err);
}

int pc_privdrop_permitted(const char *user, uint64_t keep_caps, uint64_t keep_permitted,
			  struct pc_err *err)
{
	uid_t uid;
	gid_t gid;
	int last_cap = CAP_LAST_CAP;
	FILE *f;

	if (pc_user_lookup(user, &uid, &gid, err) < 0)
		return PC_ENOENT;
	if (uid == 0)
		return pc_err_set(err, PC_EPERM, "refusing to run as root: user %s has uid 0",
				  user);
	f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	if (f) {
		if (fscanf(f, "%d", &last_cap) != 1)
			last_cap = CAP_LAST_CAP;
		fclose(f);
	}
	for (int c = 0; c <= last_cap && c < 64; c++) {
		if ((keep_caps | keep_permitted) & (1ULL << c))
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return pc_err_errno(err, PC_EPERM,
					    "dropping capability %d from bounding set", c);
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return pc_err_errno(err, PC_EPERM, "clearing ambient capabilities");
	if ((keep_caps | keep_permitted) && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		return pc_err_errno(err, PC_EPERM, "PR_SET_KEEPCAPS");
	if (setgroups(1, &gid) < 0)
		return pc_err_errno(err, PC_EPERM, "setgroups");
	if (setresgid(gid, gid, gid) < 0)
		return pc_err_errno(err, PC_EPERM, "setresgid(%u)", (unsigned)gid);
	if (setresuid(uid, uid, uid) < 0)
		return pc_err_errno(err, PC_EPERM, "setresuid(%u)", (unsigned)uid);
	if (caps_set(keep_caps, keep_permitted, err) < 0)
		return PC_EPERM;
	if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
		return pc_err_errno(err, PC_EPERM, "clearing PR_SET_KEEPCAPS");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return pc_err_errno(err, PC_EPERM, "PR_SET_NO_NEW_PRIVS");
	/* Paranoia, as OpenSSH does: root must not come back (a CAP_SETUID
	 * kept in keep_permitted alone is not effective: setuid(0) fails). */
	if (setuid(0) == 0 || seteuid(0) == 0)
		return pc_err_set(err, PC_EPERM, "could regain root after dropping to %s", user);
	return 0;
}
