/* A worker's event loop: one thread, one epoll set, and each sandbox
 * connection a coroutine with a stack of its own. A connection's life stays
 * the linear sequence conn.c reads as (handshake, request, log, forward,
 * relay, next request), but where a thread used to park in poll (a TLS
 * read or write that wants the socket, an upstream connect, logd's
 * acknowledgement) the coroutine hands the thread back to the loop, which
 * runs whatever else is ready: one wake-up serves every connection that has
 * work, and logd's acknowledgement of a batch is one event of the loop
 * (docs/vault.md, "Concurrency model"). */
/* The switches are _setjmp/_longjmp between stacks that are all alive (the
 * loop's frame that resumed a coroutine, the coroutine's frame that
 * parked): fortified longjmp refuses a jump to another stack, and
 * swapcontext would make a system call (the signal mask) per switch. */
#undef _FORTIFY_SOURCE
#include "vault/vault_int.h"

#include <errno.h>
#include <openssl/err.h>
#include <poll.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define VLOOP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VLOOP_ASAN 1
#endif
#endif
#ifdef VLOOP_ASAN
/* AddressSanitizer must be told when the stack changes under it, or it
 * reports the other stack's frames as overflows. */
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
				     size_t *size_old);
#endif

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
/* memcheck must know the coroutines' stacks, or it reads a switch as a
 * huge stack frame (a no-op outside valgrind) */
#include <valgrind/valgrind.h>
#define VLOOP_VALGRIND 1
#endif
#endif

#define VLOOP_MAXWAIT 2 /* descriptors one coroutine waits on at once */

struct vloop_co {
	ucontext_t ctx; /* its first start only */
	jmp_buf jb;	/* where it parked */
	bool started;
	struct vloop *l;
	void *map; /* the stack and its guard page below it */
	size_t map_len, guard;
	void (*fn)(void *);
	void *arg;
	uint64_t deadline; /* of the wait it is parked in */
	int fds[VLOOP_MAXWAIT];
	short rev[VLOOP_MAXWAIT];
	int nfds;
	bool parked, queued, timed_out, done;
	unsigned ops;		      /* I/O operations since it last handed the thread back */
	unsigned vg_id;		      /* its stack, registered with valgrind */
	struct vloop_co *prev, *next; /* every coroutine of the loop */
	struct vloop_co *rnext;	      /* the ready list */
};

/* A descriptor of the loop, in one of two ways. The loop's own (the
 * worker's channel and signals, logd's socket): armed one-shot, with a
 * callback. A connection's socket: registered once, edge-triggered, with
 * the readiness seen since its coroutine last waited (rdy), so that a wait
 * costs no system call (vloop_wait); forgotten when the connection lets
 * go of it (vloop_forget), before it is closed. gen tells an event of this
 * arming or registration from one of an earlier one of the same number. */
struct vloop_fd {
	uint32_t gen;
	bool added; /* believed to be in the epoll set (a close removes it) */
	void (*cb)(void *arg, int fd, short rev);
	void *arg;
	struct vloop_co *owner; /* edge-triggered: the coroutine it is for */
	struct vloop_co *waiter;
	short rdy, want;
};

struct vloop {
	int ep;
	jmp_buf main; /* where the loop resumed the running coroutine */
	struct vloop_co *all;
	size_t n_co;
	struct vloop_co *ready, *ready_tail;
	struct vloop_fd *fds;
	size_t n_fds;
	uint32_t gen;
	void (*prep)(void *arg, uint64_t *deadline);
	void *prep_arg;
#ifdef VLOOP_ASAN
	const void *main_bottom;
	size_t main_size;
#endif
};

/* The coroutine running now (NULL: the loop itself, or a thread without a
 * loop: then the waits below are not used and io.c polls). */
static _Thread_local struct vloop_co *vloop_cur;

int vloop_new(struct vloop **out, struct pc_err *err)
{
	struct vloop *l = calloc(1, sizeof(*l));

	if (!l)
		return pc_err_set(err, PC_ENOMEM, "event loop: out of memory");
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	if (l->ep < 0) {
		free(l);
		return pc_err_errno(err, PC_EIO, "epoll_create1");
	}
	*out = l;
	return 0;
}

void vloop_free(struct vloop *l)
{
	if (!l)
		return;
	/* coroutines still parked are abandoned with their stacks: only a
	 * stop that gave up on them frees the loop, and then it exits */
	close(l->ep);
	free(l->fds);
	free(l);
}

size_t vloop_count(const struct vloop *l)
{
	return l ? l->n_co : 0;
}

bool vloop_in_co(void)
{
	return vloop_cur != NULL;
}

void vloop_set_prep(struct vloop *l, void (*prep)(void *arg, uint64_t *deadline), void *arg)
{
	l->prep = prep;
	l->prep_arg = arg;
}

static void ready_push(struct vloop *l, struct vloop_co *co)
{
	if (co->queued)
		return;
	co->queued = true;
	co->rnext = NULL;
	if (l->ready_tail)
		l->ready_tail->rnext = co;
	else
		l->ready = co;
	l->ready_tail = co;
}

static int fd_slot(struct vloop *l, int fd, struct vloop_fd **out)
{
	if (fd < 0)
		return PC_EINVAL;
	if ((size_t)fd >= l->n_fds) {
		size_t n = l->n_fds ? l->n_fds : 64;
		struct vloop_fd *f;

		while (n <= (size_t)fd)
			n *= 2;
		f = realloc(l->fds, n * sizeof(*f));
		if (!f)
			return PC_ENOMEM;
		memset(f + l->n_fds, 0, (n - l->n_fds) * sizeof(*f));
		l->fds = f;
		l->n_fds = n;
	}
	*out = &l->fds[fd];
	return 0;
}

int vloop_arm(struct vloop *l, int fd, short ev, void (*cb)(void *arg, int fd, short rev),
	      void *arg)
{
	struct epoll_event e = {0};
	struct vloop_fd *f;
	int rc = fd_slot(l, fd, &f);

	if (rc < 0)
		return rc;
	/* one-shot: an event disarms it, so a descriptor nobody waits on
	 * never wakes the loop twice */
	e.events = EPOLLONESHOT | ((ev & POLLIN) ? EPOLLIN | EPOLLRDHUP : 0u) |
		   ((ev & POLLOUT) ? EPOLLOUT : 0u);
	f->gen = ++l->gen;
	e.data.u64 = (uint64_t)(uint32_t)fd | (uint64_t)f->gen << 32;
	/* the number may have been closed and reused since: the set forgot
	 * it then, and MOD says so */
	if (f->added) {
		if (epoll_ctl(l->ep, EPOLL_CTL_MOD, fd, &e) < 0 &&
		    (errno != ENOENT || epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &e) < 0))
			return PC_EIO;
	} else if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &e) < 0 &&
		   (errno != EEXIST || epoll_ctl(l->ep, EPOLL_CTL_MOD, fd, &e) < 0)) {
		return PC_EIO;
	}
	f->added = true;
	f->cb = cb;
	f->arg = arg;
	return 0;
}

void vloop_disarm(struct vloop *l, int fd)
{
	if (fd >= 0 && (size_t)fd < l->n_fds)
		l->fds[fd].cb = NULL;
}

static void co_switch_in(struct vloop *l, struct vloop_co *co)
{
#ifdef VLOOP_ASAN
	void *fake = NULL;

	__sanitizer_start_switch_fiber(&fake, (char *)co->map + co->guard, co->map_len - co->guard);
#endif
	if (!_setjmp(l->main)) {
		if (co->started)
			_longjmp(co->jb, 1);
		co->started = true;
		setcontext(&co->ctx);
	}
#ifdef VLOOP_ASAN
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

static void co_switch_out(struct vloop_co *co)
{
	struct vloop *l = co->l;
#ifdef VLOOP_ASAN
	void *fake = NULL;

	__sanitizer_start_switch_fiber(co->done ? NULL : &fake, l->main_bottom, l->main_size);
#endif
	if (!_setjmp(co->jb))
		_longjmp(l->main, 1);
#ifdef VLOOP_ASAN
	__sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

static void co_entry(void)
{
	struct vloop_co *co = vloop_cur;

#ifdef VLOOP_ASAN
	__sanitizer_finish_switch_fiber(NULL, &co->l->main_bottom, &co->l->main_size);
#endif
	co->fn(co->arg);
	co->done = true;
	co_switch_out(co); /* never comes back: the loop frees the stack */
}

static void co_free(struct vloop *l, struct vloop_co *co)
{
	/* its sockets were forgotten before they were closed; should one
	 * not have been, a coroutine allocated at the same address must not
	 * take its registration for its own */
	for (size_t i = 0; i < l->n_fds; i++)
		if (l->fds[i].owner == co)
			vloop_forget(l, (int)i);
	if (co->prev)
		co->prev->next = co->next;
	else
		l->all = co->next;
	if (co->next)
		co->next->prev = co->prev;
	l->n_co--;
#ifdef VLOOP_VALGRIND
	VALGRIND_STACK_DEREGISTER(co->vg_id);
#endif
	munmap(co->map, co->map_len);
	free(co);
}

/* Run co until it parks or ends. */
static void co_resume(struct vloop *l, struct vloop_co *co)
{
	co->queued = false;
	co->parked = false;
	/* OpenSSL's error queue is the thread's: what one connection left in
	 * it must not make another's next SSL_get_error say SSL_ERROR_SSL
	 * (a coroutine parks only after it read its own outcome). Looked at
	 * first: SSL_get_error reads the queue with ERR_peek_error, so an
	 * empty peek is all the clearing would give, and the clearing walks
	 * every slot of the queue at each resume (98 ns against 18 here) */
	if (ERR_peek_error())
		ERR_clear_error();
	vloop_cur = co;
	co_switch_in(l, co);
	vloop_cur = NULL;
	if (co->done)
		co_free(l, co);
}

int vloop_spawn(struct vloop *l, size_t stack, void (*fn)(void *), void *arg, struct pc_err *err)
{
	struct vloop_co *co = calloc(1, sizeof(*co));

	if (!co)
		return pc_err_set(err, PC_ENOMEM, "coroutine: out of memory");
	co->guard = (size_t)sysconf(_SC_PAGESIZE);
	co->map_len = stack + co->guard;
	co->map =
	    mmap(NULL, co->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (co->map == MAP_FAILED) {
		free(co);
		return pc_err_errno(err, PC_ENOMEM, "coroutine stack");
	}
	/* a stack overflow faults on the guard page instead of writing
	 * into whatever lies below */
	if (mprotect(co->map, co->guard, PROT_NONE) < 0 || getcontext(&co->ctx) < 0) {
		munmap(co->map, co->map_len);
		free(co);
		return pc_err_errno(err, PC_EIO, "coroutine setup");
	}
	co->ctx.uc_stack.ss_sp = (char *)co->map + co->guard;
	co->ctx.uc_stack.ss_size = stack;
	co->ctx.uc_link = NULL;
#ifdef VLOOP_VALGRIND
	co->vg_id =
	    VALGRIND_STACK_REGISTER((char *)co->map + co->guard, (char *)co->map + co->map_len);
#endif
	makecontext(&co->ctx, co_entry, 0);
	co->l = l;
	co->fn = fn;
	co->arg = arg;
	co->next = l->all;
	if (l->all)
		l->all->prev = co;
	l->all = co;
	l->n_co++;
	ready_push(l, co);
	return 0;
}

static void co_wake_fd(void *arg, int fd, short rev)
{
	struct vloop_co *co = arg;

	for (int i = 0; i < co->nfds; i++)
		if (co->fds[i] == fd)
			co->rev[i] |= rev;
	ready_push(co->l, co);
}

static int co_park(struct vloop_co *co, uint64_t deadline)
{
	co->ops = 0;
	co->deadline = deadline;
	co->timed_out = false;
	co->parked = true;
	co_switch_out(co);
	return co->timed_out ? PC_ETIMEOUT : 0;
}

/* A connection's socket in the set, edge-triggered, for co. */
static int et_register(struct vloop *l, int fd, struct vloop_co *co, struct vloop_fd **out)
{
	struct epoll_event e = {0};
	struct vloop_fd *f;
	int rc = fd_slot(l, fd, &f);

	if (rc < 0)
		return rc;
	if (f->owner != co) {
		e.events = EPOLLET | EPOLLIN | EPOLLOUT | EPOLLRDHUP;
		f->gen = ++l->gen;
		e.data.u64 = (uint64_t)(uint32_t)fd | (uint64_t)f->gen << 32;
		/* an edge-triggered registration reports the readiness the
		 * socket has now, so nothing that came before is missed */
		if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &e) < 0 &&
		    (errno != EEXIST || epoll_ctl(l->ep, EPOLL_CTL_MOD, fd, &e) < 0))
			return PC_EIO;
		f->added = true;
		f->cb = NULL;
		f->owner = co;
		f->waiter = NULL;
		f->rdy = 0;
	}
	*out = f;
	return 0;
}

void vloop_forget(struct vloop *l, int fd)
{
	struct vloop_fd *f;

	if (!l || fd < 0 || (size_t)fd >= l->n_fds)
		return;
	f = &l->fds[fd];
	if (!f->owner)
		return;
	/* the close that follows takes it out of the set; events of it
	 * already fetched carry the old gen */
	f->gen = ++l->gen;
	f->owner = f->waiter = NULL;
	f->rdy = 0;
	f->added = false;
}

int vloop_waitn(const int *fd, const short *ev, short *rev, int n, uint64_t deadline)
{
	struct vloop_co *co = vloop_cur;
	struct vloop_fd *f[VLOOP_MAXWAIT];
	bool now = false;
	int rc = 0;

	if (!co || n < 1 || n > VLOOP_MAXWAIT)
		return PC_EINVAL;
	if (pc_now_mono_ms() >= deadline)
		return PC_ETIMEOUT;
	co->nfds = n;
	for (int i = 0; i < n && rc == 0; i++) {
		co->fds[i] = fd[i];
		co->rev[i] = 0;
		if ((rc = et_register(co->l, fd[i], co, &f[i])) < 0)
			return rc;
		/* an edge since the last wait: the operation that wanted
		 * this may go through now (at worst it wants it again) */
		if (f[i]->rdy & (ev[i] | POLLHUP)) {
			co->rev[i] = f[i]->rdy & (ev[i] | POLLHUP);
			now = true;
		}
	}
	if (!now) {
		for (int i = 0; i < n; i++) {
			f[i]->waiter = co;
			f[i]->want = ev[i];
		}
		rc = co_park(co, deadline);
		for (int i = 0; i < n; i++) {
			/* the slot may have been forgotten meanwhile: look again */
			struct vloop_fd *g = &co->l->fds[fd[i]];

			if (g->waiter == co)
				g->waiter = NULL;
		}
	}
	for (int i = 0; i < n; i++) {
		struct vloop_fd *g = &co->l->fds[fd[i]];

		if (g->owner == co)
			g->rdy &= (short)~(co->rev[i] & ~POLLHUP);
		if (rev)
			rev[i] = co->rev[i];
	}
	co->nfds = 0;
	return co->rev[0] || (n > 1 && co->rev[1]) ? 0 : rc;
}

int vloop_wait(int fd, short ev, uint64_t deadline)
{
	return vloop_waitn(&fd, &ev, NULL, 1, deadline);
}

/* A peer that always has bytes ready (a large upload or download that both
 * sides keep up with) would never make its connection wait: without this
 * it would keep the thread, and its worker's other connections, until it
 * ended. Every VLOOP_FAIR_OPS operations it goes to the back of the queue,
 * behind the connections the next epoll_wait finds ready. */
#define VLOOP_FAIR_OPS 16

void vloop_tick(void)
{
	struct vloop_co *co = vloop_cur;

	if (!co || ++co->ops < VLOOP_FAIR_OPS)
		return;
	co->nfds = 0;
	co->deadline = UINT64_MAX;
	co->parked = true;
	ready_push(co->l, co);
	co->ops = 0;
	co_switch_out(co);
}

struct vloop_co *vloop_self(void)
{
	return vloop_cur;
}

int vloop_park(uint64_t deadline)
{
	struct vloop_co *co = vloop_cur;

	if (!co)
		return PC_EINVAL;
	co->nfds = 0;
	return co_park(co, deadline);
}

void vloop_wake(struct vloop_co *co)
{
	if (co && co->parked)
		ready_push(co->l, co);
}

/* Events to the revents poll(2) would give, for a waiter that asked for
 * ev: an error or a hang-up wakes every kind of waiter, whose next read
 * or write then says what happened. */
static short rev_of(uint32_t e)
{
	short r = 0;

	if (e & (EPOLLIN | EPOLLRDHUP))
		r |= POLLIN;
	if (e & EPOLLOUT)
		r |= POLLOUT;
	if (e & (EPOLLERR | EPOLLHUP))
		r |= POLLIN | POLLOUT | POLLHUP;
	return r;
}

void vloop_run_once(struct vloop *l, int max_ms)
{
	struct epoll_event ev[64];
	struct vloop_co *batch;
	uint64_t now, until, prep_at = UINT64_MAX;
	int n, timeout;

	/* the coroutines ready when the round began, then the batch they
	 * made (logq), then sleep; one that becomes ready meanwhile (woken,
	 * or one that yielded: vloop_tick) runs next round, after the events
	 * this round's epoll_wait finds */
	batch = l->ready;
	l->ready = l->ready_tail = NULL;
	while (batch) {
		struct vloop_co *co = batch;

		batch = co->rnext;
		co_resume(l, co);
	}
	if (l->prep)
		l->prep(l->prep_arg, &prep_at);
	now = pc_now_mono_ms();
	until = max_ms < 0 ? UINT64_MAX : now + (uint64_t)max_ms;
	if (prep_at < until)
		until = prep_at;
	for (struct vloop_co *co = l->all; co; co = co->next)
		if (co->parked && !co->queued && co->deadline < until)
			until = co->deadline;
	timeout = l->ready		? 0
		  : until <= now	? 0
		  : until - now > 60000 ? 60000
					: (int)(until - now);
	n = epoll_wait(l->ep, ev, (int)(sizeof(ev) / sizeof(ev[0])), timeout);
	for (int i = 0; i < n; i++) {
		int fd = (int)(uint32_t)ev[i].data.u64;
		uint32_t gen = (uint32_t)(ev[i].data.u64 >> 32);
		struct vloop_fd *f = (size_t)fd < l->n_fds ? &l->fds[fd] : NULL;
		void (*cb)(void *, int, short);

		if (!f || f->gen != gen)
			continue; /* an earlier arming's: nobody waits for it */
		if (f->owner) {
			short r = rev_of(ev[i].events);
			struct vloop_co *co = f->waiter;

			f->rdy |= r;
			if (co && (r & (f->want | POLLHUP))) {
				co_wake_fd(co, fd, r & (f->want | POLLHUP));
				f->waiter = NULL;
			}
			continue;
		}
		if (!f->cb)
			continue;
		cb = f->cb;
		f->cb = NULL;
		cb(f->arg, fd, rev_of(ev[i].events));
	}
	now = pc_now_mono_ms();
	for (struct vloop_co *co = l->all; co; co = co->next)
		if (co->parked && !co->queued && co->deadline <= now) {
			co->timed_out = true;
			ready_push(l, co);
		}
}
