/* SOCK_SEQPACKET UNIX sockets: the only way portcullis processes talk. */
#include "common/pc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int sun_fill(struct sockaddr_un *sun, const char *path, struct pc_err *err)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	if (pc_strlcpy(sun->sun_path, path, sizeof(sun->sun_path)) >= sizeof(sun->sun_path))
		return pc_err_set(err, PC_EINVAL, "socket path too long: %s", path);
	return 0;
}

/* The socket is made under a temporary name and renamed into place once it
 * listens: a client that finds the path can connect, never a path that
 * refuses (bound, not yet listening) or an old socket nobody serves. */
int pc_unix_listen(const char *path, mode_t mode, uid_t owner, gid_t group, struct pc_err *err)
{
	struct sockaddr_un sun, tmp;
	char tmp_path[sizeof(tmp.sun_path) + 16];
	struct stat st;
	int fd;

	if (sun_fill(&sun, path, err) < 0)
		return PC_EINVAL;
	snprintf(tmp_path, sizeof(tmp_path), "%s.%ld", path, (long)getpid());
	if (sun_fill(&tmp, tmp_path, err) < 0)
		return PC_EINVAL;
	/* Only ever replace a socket, never a file someone put there. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return pc_err_set(err, PC_EEXIST, "%s exists and is not a socket", path);
		/* One that answers belongs to a running process: taking its
		 * path would leave that process serving nobody. One that
		 * refuses is stale. */
		int live = pc_unix_connect(path, 0, NULL);

		if (live >= 0) {
			close(live);
			return pc_err_set(err, PC_EEXIST, "another process is serving %s", path);
		}
	}
	if (lstat(tmp_path, &st) == 0 && (!S_ISSOCK(st.st_mode) || unlink(tmp_path) < 0))
		return pc_err_set(err, PC_EEXIST, "%s exists and cannot be replaced", tmp_path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "socket");
	if (bind(fd, (struct sockaddr *)&tmp, sizeof(tmp)) < 0) {
		pc_err_errno(err, PC_EIO, "bind %s", tmp_path);
		close(fd);
		return PC_EIO;
	}
	if (chmod(tmp_path, mode) < 0) {
		pc_err_errno(err, PC_EIO, "chmod %s", tmp_path);
		goto fail;
	}
	if ((owner != (uid_t)-1 || group != (gid_t)-1) && chown(tmp_path, owner, group) < 0) {
		pc_err_errno(err, PC_EIO, "chown %s", tmp_path);
		goto fail;
	}
	if (listen(fd, 64) < 0) {
		pc_err_errno(err, PC_EIO, "listen %s", path);
		goto fail;
	}
	if (rename(tmp_path, path) < 0) {
		pc_err_errno(err, PC_EIO, "renaming %s to %s", tmp_path, path);
		goto fail;
	}
	return fd;
fail:
	unlink(tmp_path);
	close(fd);
	return PC_EIO;
}

int pc_unix_connect(const char *path, int nonblock, struct pc_err *err)
{
	struct sockaddr_un sun;
	int fd;

	if (sun_fill(&sun, path, err) < 0)
		return PC_EINVAL;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "socket");
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		int code = errno == ENOENT || errno == ECONNREFUSED ? PC_ENOENT
			   : errno == EACCES			    ? PC_EPERM
								    : PC_EIO;

		pc_err_errno(err, code, "connect %s", path);
		close(fd);
		return code;
	}
	return fd;
}

int pc_unix_peercred(int fd, pid_t *pid, uid_t *uid, gid_t *gid, struct pc_err *err)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0 || len != sizeof(uc))
		return pc_err_errno(err, PC_EIO, "SO_PEERCRED");
	if (pid)
		*pid = uc.pid;
	if (uid)
		*uid = uc.uid;
	if (gid)
		*gid = uc.gid;
	return 0;
}
