/* The connections of a process that serves sandbox connections (the
 * vault's per-sandbox worker, vault/worker.c): the per-sandbox quota,
 * starting a coroutine of the worker's event loop per connection
 * (vloop.c), freeing their slots, and ending them all at SIGTERM within a
 * bound. Moved from main.c when the monitor and the workers became
 * separate processes. */
#include "vault/vault_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define VAULT_MAX_CONNS 4096	     /* all of one process's connections */
#define CONN_STACK	(256 * 1024) /* per connection coroutine */

struct vault_state *vault_daemon_state(struct vault_daemon *d)
{
	struct vault_state *st;

	pthread_mutex_lock(&d->lock);
	st = vault_state_ref(d->state);
	pthread_mutex_unlock(&d->lock);
	return st;
}

static bool conn_acquire(struct vault_daemon *d, const char *sandbox)
{
	struct sb_count *sc = NULL;
	bool ok = false;

	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < d->n_counts && !sc; i++)
		if (!strcmp(d->counts[i].name, sandbox))
			sc = &d->counts[i];
	if (!sc) {
		struct sb_count *n = realloc(d->counts, (d->n_counts + 1) * sizeof(*n));

		if (n) {
			d->counts = n;
			sc = &n[d->n_counts++];
			memset(sc, 0, sizeof(*sc));
			pc_strlcpy(sc->name, sandbox, sizeof(sc->name));
		}
	}
	/* the sandbox's connections in workers that retired count too: a
	 * reload must not give it a second quota (others_open only shrinks
	 * while we read it: the check is never too lenient) */
	if (sc && sc->n + atomic_load(&d->n->others_open) < d->cfg.vault.max_conns_per_sandbox &&
	    d->conns < VAULT_MAX_CONNS) {
		sc->n++;
		d->conns++;
		atomic_fetch_add(&d->n->conns_open, 1);
		ok = true;
	}
	pthread_mutex_unlock(&d->lock);
	return ok;
}

void vault_daemon_conn_release(struct vault_daemon *d, struct conn_slot *s, const char *sandbox)
{
	uint64_t one = 1;

	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < d->n_counts; i++)
		if (!strcmp(d->counts[i].name, sandbox) && d->counts[i].n) {
			d->counts[i].n--;
			d->conns--;
			atomic_fetch_sub(&d->n->conns_open, 1);
			break;
		}
	if (s)
		s->done = true;
	pthread_mutex_unlock(&d->lock);
	/* wake the loop to free the slot; a full counter (never in
	 * practice) only delays that to the next wake-up */
	if (s && write(d->reap_fd, &one, sizeof(one)) < 0)
		return;
}

void vault_daemon_conn_fds(struct vault_daemon *d, struct conn_slot *s, int fd, int ufd)
{
	if (!s)
		return;
	pthread_mutex_lock(&d->lock);
	/* a socket the connection lets go of leaves its loop before it is
	 * closed: its number may come back as another socket */
	if (s->fd >= 0 && s->fd != fd)
		vloop_forget(d->loop, s->fd);
	if (s->ufd >= 0 && s->ufd != ufd)
		vloop_forget(d->loop, s->ufd);
	s->fd = fd;
	s->ufd = ufd;
	pthread_mutex_unlock(&d->lock);
}

/* Free the slots of the connections that said they are done; returns how
 * many are still running. */
size_t conns_reap(struct vault_daemon *d)
{
	struct conn_slot *done = NULL, **pp, *s;
	uint64_t n;
	size_t left = 0;

	if (read(d->reap_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		pc_log(PC_LOG_WARN, "reading the reap eventfd: %s", strerror(errno));
	pthread_mutex_lock(&d->lock);
	for (pp = &d->slots; (s = *pp);) {
		if (s->done) {
			*pp = s->next;
			s->next = done;
			done = s;
		} else {
			left++;
			pp = &s->next;
		}
	}
	pthread_mutex_unlock(&d->lock);
	while ((s = done)) {
		done = s->next;
		free(s);
	}
	return left;
}

/* Shut down the sockets of every running connection: how (SHUT_RD lets a
 * response in flight finish, SHUT_RDWR ends any I/O). */
static void conns_shutdown(struct vault_daemon *d, int how)
{
	pthread_mutex_lock(&d->lock);
	for (struct conn_slot *s = d->slots; s; s = s->next) {
		if (s->fd >= 0)
			shutdown(s->fd, how);
		if (s->ufd >= 0 && how == SHUT_RDWR)
			shutdown(s->ufd, how);
	}
	pthread_mutex_unlock(&d->lock);
}

/* Reap until no connection is left or ms passed; returns how many are left. */
size_t conns_wait(struct vault_daemon *d, unsigned ms)
{
	uint64_t deadline = pc_now_mono_ms() + ms;
	size_t left;

	while ((left = conns_reap(d)) > 0) {
		uint64_t now = pc_now_mono_ms();

		if (now >= deadline || !d->loop)
			break;
		vloop_run_once(d->loop, (int)(deadline - now));
	}
	return left;
}

/* SIGTERM: end every connection, bounded. First no client reads (an idle
 * keep-alive connection ends at once, a response in flight is still
 * delivered), then, for what is left, no I/O at all (a connection stuck in
 * a read or write, or connecting upstream, fails at once). Returns false
 * when threads are still running: what they use must not be freed. */
bool conns_stop(struct vault_daemon *d)
{
	size_t left;

	conns_shutdown(d, SHUT_RD);
	if (!conns_wait(d, 2000))
		return true;
	conns_shutdown(d, SHUT_RDWR);
	left = conns_wait(d, 3000);
	if (left)
		pc_log(PC_LOG_WARN, "%zu connections did not end; exiting without them", left);
	return !left;
}

/* Free what setup made (after the connections using it ended). */
void daemon_free(struct vault_daemon *d)
{
	logq_stop(d->logq);
	vloop_free(d->loop);
	SSL_CTX_free(d->server_ctx);
	SSL_CTX_free(d->client_ctx);
	vault_state_unref(d->state);
	ca_free(d->ca);
	casign_stop(d->casign);
	free(d->counts);
	if (d->reap_fd >= 0)
		close(d->reap_fd);
	pthread_mutex_destroy(&d->lock);
}

/* A refusal before any coroutine exists for the connection: log, close. */
void accept_refuse(struct vault_daemon *d, int fd, const struct pc_endpoint *src,
		   const struct pc_endpoint *orig, const char *sandbox, const char *code,
		   const char *reason)
{
	struct logrec rec = {.action = LOGREC_CONNECT,
			     .verdict = LOGREC_REFUSED,
			     .sandbox = sandbox,
			     .reason = reason,
			     .code = code,
			     .src = *src,
			     .dst = *orig,
			     .transport = IPPROTO_TCP};
	char b[64];

	pc_log(PC_LOG_NOTICE, "refused connection from %s: %s", pc_endpoint_str(src, b, sizeof(b)),
	       reason);
	logq_record(d->logq, &rec, false, NULL);
	atomic_fetch_add(&d->n->conns_refused, 1);
	close(fd);
}

/* Serve an accepted connection of sandbox as a coroutine of the worker's
 * loop (the per-sandbox quota first); refusals are logged and close fd. */
void conn_spawn(struct vault_daemon *d, int fd, const struct pc_endpoint *src_,
		const struct pc_endpoint *orig_, const char *sandbox)
{
	struct pc_endpoint src = *src_, orig = *orig_;
	struct conn_start *cs = calloc(1, sizeof(*cs));
	struct conn_slot *slot;
	struct pc_err e = {0};

	if (!cs) {
		accept_refuse(d, fd, &src, &orig, sandbox, "internal_error", "out of memory");
		return;
	}
	pc_strlcpy(cs->sandbox, sandbox, sizeof(cs->sandbox));
	if (!conn_acquire(d, cs->sandbox)) {
		accept_refuse(d, fd, &src, &orig, cs->sandbox, "vault_connection_limit",
			      "connection limit reached");
		free(cs);
		return;
	}
	slot = calloc(1, sizeof(*slot));
	if (!slot || !d->loop || vloop_spawn(d->loop, CONN_STACK, conn_main, cs, &e) < 0) {
		vault_daemon_conn_release(d, NULL, cs->sandbox);
		accept_refuse(d, fd, &src, &orig, cs->sandbox, "internal_error",
			      slot ? "cannot start a coroutine" : "out of memory");
		free(cs);
		free(slot);
		return;
	}
	slot->fd = fd;
	slot->ufd = -1;
	cs->d = d;
	cs->slot = slot;
	cs->fd = fd;
	cs->src = src;
	cs->orig = orig;
	/* it runs only at the loop's next round: linked before it can end */
	pthread_mutex_lock(&d->lock);
	slot->next = d->slots;
	d->slots = slot;
	pthread_mutex_unlock(&d->lock);
	atomic_fetch_add(&d->n->conns_accepted, 1);
}
