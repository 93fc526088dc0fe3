/* systemd readiness notification (Type=notify units): one datagram to
 * $NOTIFY_SOCKET, written here because it is the whole protocol and
 * libsystemd would be a dependency for a single sendto. */
#include "common/pc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int pc_sd_notify(const char *state, struct pc_err *err)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun;
	socklen_t sunlen;
	size_t plen, slen;
	ssize_t n;
	int fd, rc = 0;

	if (!state || !*state)
		return pc_err_set(err, PC_EINVAL, "sd_notify: empty state");
	if (!path || !*path)
		return 0; /* not started by systemd (or not Type=notify): nothing to tell */
	plen = strlen(path);
	/* "/path" or "@abstract"; anything else (vsock:...) is not ours to speak. */
	if ((path[0] != '/' && path[0] != '@') || plen < 2 || plen >= sizeof(sun.sun_path))
		return pc_err_set(err, PC_EINVAL, "sd_notify: unsupported NOTIFY_SOCKET %s", path);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, plen);
	if (path[0] == '@')
		sun.sun_path[0] = '\0';
	sunlen =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen + (path[0] == '/' ? 1 : 0));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return pc_err_errno(err, PC_EIO, "sd_notify: socket");
	slen = strlen(state);
	do {
		n = sendto(fd, state, slen, MSG_NOSIGNAL, (struct sockaddr *)&sun, sunlen);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		rc = pc_err_errno(err, PC_EIO, "sd_notify: sending to %s", path);
	else if ((size_t)n != slen)
		rc = pc_err_set(err, PC_EIO, "sd_notify: short send to %s", path);
	close(fd);
	return rc;
}
