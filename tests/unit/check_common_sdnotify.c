/* Unit tests for common/sdnotify.c: the readiness datagram reaches the
 * socket systemd names in $NOTIFY_SOCKET (path and abstract forms), and
 * nothing is sent when the daemon was not started by systemd. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/pc.h"
#include "tests/unit/unit.h"

/* A datagram socket bound at name (path, or "@x" abstract). */
static int listener(const char *name)
{
	struct sockaddr_un sun;
	socklen_t len;
	int fd;

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, name);
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	if (name[0] == '@')
		sun.sun_path[0] = '\0';
	else
		len++;
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, len), 0);
	return fd;
}

static void expect_datagram(int fd, const char *want)
{
	char buf[128];
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

	ck_assert_int_eq(n, (ssize_t)strlen(want));
	buf[n] = '\0';
	ck_assert_str_eq(buf, want);
}

START_TEST(notify_path_socket)
{
	char dir[] = "/tmp/pc-sdnotify-XXXXXX", path[64];
	struct pc_err err;
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/notify", dir);
	fd = listener(path);
	setenv("NOTIFY_SOCKET", path, 1);
	ck_assert_int_eq(pc_sd_notify("READY=1", &err), 0);
	expect_datagram(fd, "READY=1");
	ck_assert_int_eq(pc_sd_notify("STATUS=policy sha256:00", &err), 0);
	expect_datagram(fd, "STATUS=policy sha256:00");
	unsetenv("NOTIFY_SOCKET");
	close(fd);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(notify_abstract_socket)
{
	char name[64];
	struct pc_err err;
	int fd;

	snprintf(name, sizeof(name), "@pc-sdnotify-%d", (int)getpid());
	fd = listener(name);
	setenv("NOTIFY_SOCKET", name, 1);
	ck_assert_int_eq(pc_sd_notify("READY=1", &err), 0);
	expect_datagram(fd, "READY=1");
	unsetenv("NOTIFY_SOCKET");
	close(fd);
}
END_TEST

START_TEST(notify_without_systemd_is_a_no_op)
{
	struct pc_err err;

	unsetenv("NOTIFY_SOCKET");
	ck_assert_int_eq(pc_sd_notify("READY=1", &err), 0);
}
END_TEST

START_TEST(notify_errors_are_reported)
{
	struct pc_err err;

	/* No listener at that path: the daemon learns it was not heard. */
	setenv("NOTIFY_SOCKET", "/nonexistent/pc-notify", 1);
	ck_assert_int_eq(pc_sd_notify("READY=1", &err), PC_EIO);
	ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/pc-notify"));
	setenv("NOTIFY_SOCKET", "vsock:2:1234", 1);
	ck_assert_int_eq(pc_sd_notify("READY=1", &err), PC_EINVAL);
	unsetenv("NOTIFY_SOCKET");
	ck_assert_int_eq(pc_sd_notify("", &err), PC_EINVAL);
	ck_assert_int_eq(pc_sd_notify(NULL, &err), PC_EINVAL);
}
END_TEST

PC_UNIT_SUITE("sdnotify", "notify", 0, notify_path_socket, notify_abstract_socket,
	      notify_without_systemd_is_a_no_op, notify_errors_are_reported)
