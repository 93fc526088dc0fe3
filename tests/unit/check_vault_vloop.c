/* The vault worker's event loop (vault/vloop.c), without sockets of a lab:
 * a coroutine that never has to wait takes turns with one whose socket
 * became ready (vloop_tick); a socket number closed and given to another
 * socket is registered anew (vloop_forget); a wait ends at its deadline;
 * a parked coroutine runs again when woken. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vault/vault_int.h"
#include "tests/unit/unit.h"

#define SPIN 1000

struct spin {
	int done;   /* ticks made */
	int at_b;   /* ticks the spinner had made when the waiter ran */
	bool b_ran; /* the waiter got its socket */
	int fd;
};

static struct spin sp;

static void spinner(void *arg)
{
	(void)arg;
	/* reads and writes that never wait, as a download both ends keep
	 * up with */
	for (sp.done = 0; sp.done < SPIN; sp.done++)
		vloop_tick();
}

static void waiter(void *arg)
{
	char c;

	(void)arg;
	if (vloop_wait(sp.fd, POLLIN, pc_now_mono_ms() + 5000) == 0 && read(sp.fd, &c, 1) == 1) {
		sp.b_ran = true;
		sp.at_b = sp.done;
	}
}

static void run_until_idle(struct vloop *l)
{
	for (int i = 0; i < 10000 && vloop_count(l); i++)
		vloop_run_once(l, 100);
}

START_TEST(a_coroutine_that_never_waits_takes_turns)
{
	struct vloop *l = NULL;
	struct pc_err e = {0};
	int sv[2];

	memset(&sp, 0, sizeof(sp));
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	ck_assert_int_eq(write(sv[1], "x", 1), 1); /* the waiter's socket is ready */
	sp.fd = sv[0];
	ck_assert_int_eq(vloop_new(&l, &e), 0);
	ck_assert_int_eq(vloop_spawn(l, 64 * 1024, spinner, NULL, &e), 0);
	ck_assert_int_eq(vloop_spawn(l, 64 * 1024, waiter, NULL, &e), 0);
	run_until_idle(l);
	ck_assert_int_eq(vloop_count(l), 0);
	ck_assert_int_eq(sp.done, SPIN);
	ck_assert(sp.b_ran);
	/* it ran while the spinner was still at it, within a few turns */
	ck_assert_msg(sp.at_b < 100, "the waiter ran after %d of %d ticks", sp.at_b, SPIN);
	vloop_free(l);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

struct reuse {
	struct vloop *l;
	int fd;
	int rc, rc2;
	bool got, got2;
	int b1; /* the second socket's other end */
};

static void wait_read(void *arg)
{
	struct reuse *r = arg;
	char c;

	r->rc = vloop_wait(r->fd, POLLIN, pc_now_mono_ms() + 2000);
	r->got = r->rc == 0 && read(r->fd, &c, 1) == 1;
}

/* As a connection whose upstream is closed and connected again: the same
 * coroutine, the same number, another socket. */
static void reconnect(void *arg)
{
	struct reuse *r = arg;
	int b[2];
	char c;

	wait_read(r);
	vloop_forget(r->l, r->fd); /* (vault_daemon_conn_fds, before the close) */
	close(r->fd);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, b) < 0 || b[0] != r->fd)
		return;
	r->b1 = b[1];
	r->rc2 = vloop_wait(b[0], POLLIN, pc_now_mono_ms() + 2000);
	r->got2 = r->rc2 == 0 && read(b[0], &c, 1) == 1;
	close(b[0]);
}

START_TEST(a_reused_socket_number_is_registered_anew)
{
	struct vloop *l = NULL;
	struct pc_err e = {0};
	struct reuse r = {0};
	int a[2];

	ck_assert_int_eq(vloop_new(&l, &e), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a), 0);
	r.l = l;
	r.fd = a[0];
	r.b1 = -1;
	r.rc2 = 1;
	ck_assert_int_eq(write(a[1], "x", 1), 1);
	ck_assert_int_eq(vloop_spawn(l, 64 * 1024, reconnect, &r, &e), 0);
	vloop_run_once(l, 0); /* the first wait: ready at once */
	vloop_run_once(l, 0); /* it reads, reconnects and waits on the new socket */
	close(a[1]);
	ck_assert_int_ge(r.b1, 0);
	ck_assert(r.got);
	ck_assert_int_eq(write(r.b1, "y", 1), 1);
	run_until_idle(l);
	ck_assert_int_eq(r.rc2, 0);
	ck_assert(r.got2);
	vloop_free(l);
	close(r.b1);
}
END_TEST

START_TEST(a_wait_ends_at_its_deadline)
{
	struct vloop *l = NULL;
	struct pc_err e = {0};
	struct reuse r = {0};
	uint64_t t0;
	int a[2];

	ck_assert_int_eq(vloop_new(&l, &e), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, a), 0);
	r.fd = a[0];
	t0 = pc_now_mono_ms();
	ck_assert_int_eq(vloop_spawn(l, 64 * 1024, wait_read, &r, &e), 0);
	run_until_idle(l);
	ck_assert_int_eq(r.rc, PC_ETIMEOUT);
	ck_assert(!r.got);
	ck_assert_uint_ge(pc_now_mono_ms() - t0, 2000);
	vloop_free(l);
	close(a[0]);
	close(a[1]);
}
END_TEST

static struct vloop_co *parked;
static int park_rc = 1;

static void sleeper(void *arg)
{
	(void)arg;
	parked = vloop_self();
	park_rc = vloop_park(UINT64_MAX);
}

START_TEST(a_parked_coroutine_runs_when_woken)
{
	struct vloop *l = NULL;
	struct pc_err e = {0};

	ck_assert_int_eq(vloop_new(&l, &e), 0);
	ck_assert_int_eq(vloop_spawn(l, 64 * 1024, sleeper, NULL, &e), 0);
	vloop_run_once(l, 0);
	ck_assert_ptr_nonnull(parked);
	ck_assert_int_eq(park_rc, 1);
	ck_assert_int_eq(vloop_count(l), 1);
	vloop_wake(parked);
	vloop_run_once(l, 0);
	ck_assert_int_eq(park_rc, 0);
	ck_assert_int_eq(vloop_count(l), 0);
	vloop_free(l);
}
END_TEST

PC_UNIT_SUITE("vault_vloop", "vloop", 30, a_coroutine_that_never_waits_takes_turns,
	      a_reused_socket_number_is_registered_anew, a_wait_ends_at_its_deadline,
	      a_parked_coroutine_runs_when_woken)
