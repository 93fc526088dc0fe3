/* Test-only, LD_PRELOADed into portcullis-logd by tests/faults/logd_eio.sh:
 * once the file PC_TEST_FAILSYNC names exists, the log's file system fails
 * the way an ext4 error with errors=remount-ro fails it when the error
 * aborts the journal under a write in flight: the sync of the batch
 * returns EIO, and whatever comes after meets a file system already
 * read-only (ftruncate: EROFS). tests/faults/logd_readonly.sh meets that
 * order only now and then; this shim gives it every time.
 * PC_TEST_FAILSYNC_TRUNC=EIO makes the ftruncate fail with EIO instead: a
 * disk whose errors do not make the file system read-only, where logd can
 * neither keep nor take back the batch. Never built into a shipped
 * binary. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

int fdatasync(int fd);
int ftruncate(int fd, off_t len);

static int gone(void)
{
	const char *trigger = getenv("PC_TEST_FAILSYNC");

	return trigger && access(trigger, F_OK) == 0;
}

int fdatasync(int fd)
{
	static int (*real)(int);

	if (gone()) {
		errno = EIO;
		return -1;
	}
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	return real(fd);
}

int ftruncate(int fd, off_t len)
{
	static int (*real)(int, off_t);

	if (gone()) {
		const char *e = getenv("PC_TEST_FAILSYNC_TRUNC");

		errno = e && strcmp(e, "EIO") == 0 ? EIO : EROFS;
		return -1;
	}
	if (!real)
		real = (int (*)(int, off_t))dlsym(RTLD_NEXT, "ftruncate");
	return real(fd, len);
}
