/* The CA process: the one process that reads ca.key. The daemon (which
 * parses sandbox bytes) asks it over a socketpair to sign a leaf for a
 * public key; it signs only names some sandbox's policy allows on the port
 * asked, as the policy it compiled itself says (docs/vault.md, "Processes").
 * The protocol's codec, the daemon's client and the CA's loop live here. */
#include "vault/vault_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CASIGN_TIMEOUT_MS 5000 /* a signature takes ~1 ms */
/* DER is binary (NULs and all): a tag-length-value field, not a string */
#define CASIGN_TAG_DER 1

/* ---- the codec -------------------------------------------------------------- */

int casign_encode(const struct casign_msg *m, uint8_t *buf, size_t cap)
{
	struct pc_msg_w w;

	if ((m->type == CASIGN_SIGN || m->type == CASIGN_CERT) &&
	    (!m->der || m->der_len > CASIGN_DER_MAX))
		return PC_EINVAL;
	pc_msg_w_init(&w, buf, cap);
	pc_msg_put_u32(&w, m->id);
	switch (m->type) {
	case CASIGN_SIGN:
		pc_msg_put_u16(&w, m->port);
		pc_msg_put_str(&w, m->host, strlen(m->host));
		pc_msg_put_tlv(&w, CASIGN_TAG_DER, m->der, m->der_len);
		break;
	case CASIGN_CERT:
		pc_msg_put_tlv(&w, CASIGN_TAG_DER, m->der, m->der_len);
		break;
	case CASIGN_REFUSED:
	case CASIGN_RELOADED:
	case CASIGN_CLIENT:
		pc_msg_put_str(&w, m->text, strnlen(m->text, sizeof(m->text)));
		break;
	case CASIGN_RELOAD:
	case CASIGN_OK:
		break;
	default:
		return PC_EINVAL;
	}
	return pc_msg_finish(&w, CASIGN_PROTO, CASIGN_VERSION, m->type, CASIGN_MAX);
}

static int get_der(struct pc_msg_r *r, struct casign_msg *m, struct pc_err *err)
{
	const uint8_t *v;
	uint8_t tag;
	size_t n;
	int rc = pc_msg_get_tlv(r, &tag, &v, &n, err);

	if (rc < 0)
		return rc;
	if (tag != CASIGN_TAG_DER || n == 0 || n > CASIGN_DER_MAX)
		return pc_err_set(err, PC_EPARSE, "DER field: tag %u, %zu bytes", tag, n);
	m->der = v;
	m->der_len = n;
	return 0;
}

int casign_decode(const uint8_t *buf, size_t len, bool from_ca, struct casign_msg *out,
		  struct pc_err *err)
{
	struct casign_msg m = {0};
	struct pc_msg_r r;
	struct pc_host h;
	const char *why = "";
	int rc;

	if (len > CASIGN_MAX)
		return pc_err_set(err, PC_EPARSE, "message of %zu bytes (at most %u)", len,
				  CASIGN_MAX);
	if ((rc = pc_msg_open(&r, buf, len, CASIGN_PROTO, CASIGN_VERSION, &m.type, err)) < 0)
		return rc;
	if (from_ca != (m.type >= 0x80))
		return pc_err_set(err, PC_EPARSE, "message type %u from the wrong side", m.type);
	if ((rc = pc_msg_get_u32(&r, &m.id, err)) < 0)
		return rc;
	switch (m.type) {
	case CASIGN_SIGN:
		if ((rc = pc_msg_get_u16(&r, &m.port, err)) < 0 ||
		    (rc = pc_msg_get_strcpy(&r, m.host, sizeof(m.host), err)) < 0 ||
		    (rc = get_der(&r, &m, err)) < 0)
			return rc;
		if (m.port == 0)
			return pc_err_set(err, PC_EPARSE, "port 0");
		/* The name goes into the leaf's subjectAltName: only the one
		 * grammar's canonical form, so that nothing (a ',', a NUL, upper
		 * case) can add to or change what is signed. */
		if (pc_host_parse_str(m.host, PC_HOST_SNI, &h, &why) < 0 || strcmp(h.name, m.host))
			return pc_err_set(err, PC_EPARSE, "host is not a canonical server name");
		break;
	case CASIGN_RELOAD:
	case CASIGN_OK:
		break;
	case CASIGN_CERT:
		if ((rc = get_der(&r, &m, err)) < 0)
			return rc;
		break;
	case CASIGN_CLIENT:
		if ((rc = pc_msg_get_strcpy(&r, m.text, POLICY_NAME_MAX, err)) < 0)
			return rc;
		if (!m.text[0])
			return pc_err_set(err, PC_EPARSE, "empty sandbox name");
		break;
	case CASIGN_REFUSED:
	case CASIGN_RELOADED:
		if ((rc = pc_msg_get_strcpy(&r, m.text, sizeof(m.text), err)) < 0)
			return rc;
		break;
	default:
		return pc_err_set(err, PC_EPARSE, "unknown message type %u", m.type);
	}
	if ((rc = pc_msg_end(&r, err)) < 0)
		return rc;
	*out = m;
	return 0;
}

/* ---- the CA's side ------------------------------------------------------------ */

/* Whether the policy of sandbox (NULL: of some sandbox) allows host on TCP
 * port: the question the daemon asked, answered without trusting it. */
static bool name_allowed(const struct policy *p, const char *sandbox, const char *host,
			 uint16_t port)
{
	const struct policy_sandbox *sb;

	if (!p)
		return false;
	if (sandbox) {
		sb = policy_sandbox_by_name(p, sandbox);
		return sb && policy_host_allows(sb, host, IPPROTO_TCP, port, NULL);
	}
	for (size_t i = 0; i < policy_sandbox_count(p); i++)
		if (policy_host_allows(policy_sandbox_at(p, i), host, IPPROTO_TCP, port, NULL))
			return true;
	return false;
}

/* The leaf for a SIGN request into reply (CERT or REFUSED); der is a
 * buffer of CASIGN_DER_MAX bytes that the reply may borrow. */
static void sign_one(struct vault_ca *ca, const struct policy *p, const char *sandbox,
		     const struct casign_msg *q, struct casign_msg *reply, uint8_t *der)
{
	const uint8_t *kp = q->der;
	EVP_PKEY *pub = NULL;
	X509 *x = NULL;
	uint8_t *o = der;
	int n;

	reply->type = CASIGN_REFUSED;
	if (!name_allowed(p, sandbox, q->host, q->port)) {
		if (sandbox)
			snprintf(reply->text, sizeof(reply->text),
				 "%s:%u is not on the allow list of %s: the CA does not sign it",
				 q->host, q->port, sandbox);
		else
			snprintf(reply->text, sizeof(reply->text),
				 "%s:%u is on no sandbox's allow list: the CA does not sign it",
				 q->host, q->port);
		return;
	}
	/* a P-256 key as the daemon makes them, nothing else: what the CA
	 * signs stays what the docs say */
	pub = d2i_PUBKEY(NULL, &kp, (long)q->der_len);
	if (!pub || kp != q->der + q->der_len || !EVP_PKEY_is_a(pub, "EC") ||
	    EVP_PKEY_get_bits(pub) != 256) {
		pc_strlcpy(reply->text, "the public key is not a P-256 key", sizeof(reply->text));
		goto out;
	}
	x = ca_leaf_sign(ca, q->host, pub);
	n = x ? i2d_X509(x, NULL) : -1;
	if (n <= 0 || n > CASIGN_DER_MAX || i2d_X509(x, &o) != n) {
		pc_strlcpy(reply->text, "signing failed", sizeof(reply->text));
		goto out;
	}
	reply->type = CASIGN_CERT;
	reply->der = der;
	reply->der_len = (size_t)n;
out:
	ERR_clear_error();
	X509_free(x);
	EVP_PKEY_free(pub);
}

static void reload_one(const struct config *cfg, struct policy **p, struct casign_msg *reply)
{
	struct policy *np = NULL;
	struct pc_err e = {0};

	reply->type = CASIGN_REFUSED;
	if (!cfg) {
		pc_strlcpy(reply->text, "no configuration to reload from", sizeof(reply->text));
		return;
	}
	if (policy_load_dir_since(cfg->rules_dir, cfg, *p, &np, &e) < 0) {
		char b[sizeof(reply->text)];

		/* the position says it is the policy; without one, say so */
		snprintf(reply->text, sizeof(reply->text), "%s%s",
			 e.file[0] ? "" : "policy: ", pc_err_str(&e, b, sizeof(b)));
		return;
	}
	policy_unref(*p);
	*p = np;
	reply->type = CASIGN_RELOADED;
	pc_strlcpy(reply->text, policy_hash(np), sizeof(reply->text));
}

/* One channel the CA serves: the daemon's (sandbox "", may do anything)
 * or a worker's (may only SIGN, for its sandbox). */
struct ca_chan {
	int fd;
	char sandbox[POLICY_NAME_MAX];
};
#define CA_CHANS 4096 /* the daemon's and one per worker */

/* A message and, with it, at most one passed socket (*pfd, else -1). */
static ssize_t recv_fd(int fd, uint8_t *buf, size_t cap, int *pfd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof(cb.b)};
	struct cmsghdr *c;
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

	*pfd = -1;
	for (c = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int))) {
			if (*pfd >= 0)
				close(*pfd);
			memcpy(pfd, CMSG_DATA(c), sizeof(int));
		}
	if (n >= 0 && (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
		n = -1; /* too long, or more sockets than one: refused */
	if (n < 0 && *pfd >= 0) {
		close(*pfd);
		*pfd = -1;
	}
	return n;
}

/* Serve the message waiting on chans[i]; returns 0, or <0 to close that
 * channel (the daemon's: to stop). */
static int serve_one(struct ca_chan *chans, size_t *n_chans, size_t i, struct vault_ca *ca,
		     const struct config *cfg, struct policy **policy)
{
	static uint8_t in[CASIGN_MAX + 1], out[CASIGN_MAX], der[CASIGN_DER_MAX];
	struct casign_msg q, reply = {0};
	struct pc_err e = {0};
	bool daemon = i == 0;
	int pfd = -1, len;
	ssize_t n = recv_fd(chans[i].fd, in, sizeof(in), &pfd);

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0)
		return PC_EIO; /* gone */
	/* A request that does not decode, or one this channel may not make,
	 * is a process out of its mind: close its channel rather than guess
	 * (the daemon's: the CA stops, and the daemon fails closed). */
	if (casign_decode(in, (size_t)n, false, &q, &e) < 0 || (!daemon && q.type != CASIGN_SIGN) ||
	    (q.type == CASIGN_CLIENT) != (pfd >= 0)) {
		pc_log(PC_LOG_ERR, "CA process: bad request from %s%s: %s",
		       daemon ? "the vault" : "the worker of ", chans[i].sandbox,
		       e.msg[0] ? e.msg : "not allowed on this channel");
		if (pfd >= 0)
			close(pfd);
		return PC_EPARSE;
	}
	reply.id = q.id;
	if (q.type == CASIGN_SIGN) {
		sign_one(ca, *policy, daemon ? NULL : chans[i].sandbox, &q, &reply, der);
	} else if (q.type == CASIGN_RELOAD) {
		reload_one(cfg, policy, &reply);
	} else if (*n_chans < CA_CHANS) {
		chans[*n_chans].fd = pfd;
		pc_strlcpy(chans[*n_chans].sandbox, q.text, sizeof(chans[*n_chans].sandbox));
		(*n_chans)++;
		reply.type = CASIGN_OK;
	} else {
		close(pfd);
		reply.type = CASIGN_REFUSED;
		pc_strlcpy(reply.text, "too many workers", sizeof(reply.text));
	}
	if (reply.type == CASIGN_REFUSED)
		pc_log(PC_LOG_WARN, "CA process: %s", reply.text);
	len = casign_encode(&reply, out, sizeof(out));
	if (len < 0 || send(chans[i].fd, out, (size_t)len, MSG_NOSIGNAL) != len)
		return daemon ? PC_EIO : 0; /* a worker that went away is reaped on EOF */
	return 0;
}

int casign_serve(int fd, struct vault_ca *ca, const struct config *cfg, struct policy *policy)
{
	struct ca_chan *chans = calloc(CA_CHANS, sizeof(*chans));
	struct pollfd *p = calloc(CA_CHANS, sizeof(*p));
	size_t n_chans = 1;
	int rc = 0;

	if (!chans || !p) {
		rc = PC_ENOMEM;
		goto out;
	}
	chans[0].fd = fd;
	while (rc == 0) {
		size_t np = n_chans;

		for (size_t i = 0; i < np; i++)
			p[i] = (struct pollfd){.fd = chans[i].fd, .events = POLLIN};
		if (poll(p, np, -1) < 0) {
			if (errno != EINTR)
				rc = PC_EIO;
			continue;
		}
		for (size_t i = np; i-- > 0;) {
			if (!p[i].revents)
				continue;
			if (serve_one(chans, &n_chans, i, ca, cfg, &policy) == 0)
				continue;
			if (i == 0) {
				rc = PC_EIO; /* the daemon is gone or mad: stop */
				break;
			}
			close(chans[i].fd); /* a worker's channel: only it ends */
			chans[i] = chans[--n_chans];
		}
	}
	/* EOF from the daemon is the normal end */
	if (rc == PC_EIO)
		rc = 0;
	for (size_t i = 1; i < n_chans; i++)
		close(chans[i].fd);
out:
	free(chans);
	free(p);
	policy_unref(policy);
	return rc;
}

/* ca.key is root's (`portcullis ca init`), so that the daemon, which runs
 * as the same vault user as this process, cannot read it. A key made by an
 * older version (the vault user's) is made root's here, while root. */
static void key_make_roots(const char *dir)
{
	char path[PC_PATH_MAX + 8];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/ca.key", dir);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return; /* ca_load says why */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (st.st_uid != 0 || st.st_gid != 0 || (st.st_mode & 07777) != 0400)) {
		if (fchown(fd, 0, 0) == 0 && fchmod(fd, 0400) == 0)
			pc_log(PC_LOG_NOTICE,
			       "%s is now root's, mode 0400: only the CA process "
			       "reads it",
			       path);
		else
			pc_log(PC_LOG_WARN, "cannot make %s root's: %s", path, strerror(errno));
	}
	close(fd);
}

/* The CA process's life: read the key and the policy while root, drop to
 * the vault user, say it is ready, serve, exit. Never returns. */
static void __attribute__((noreturn)) ca_process(int fd, const struct config *cfg)
{
	struct casign_msg ready = {.type = CASIGN_RELOADED, .id = 0};
	struct vault_ca *ca = NULL;
	struct policy *policy = NULL;
	struct pc_err e = {0};
	uint8_t out[CASIGN_MAX];
	sigset_t sigs;
	int rc, len;

	prctl(PR_SET_NAME, "vault-ca", 0, 0, 0);
	/* the daemon blocked these for its signalfd: here SIGTERM ends the
	 * process (systemd signals the whole group), SIGHUP stays blocked
	 * (reloads come as messages) */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
	/* a CA without its daemon has nothing to do */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() == 1)
		_exit(PC_EXIT_ERROR);
	if (geteuid() == 0)
		key_make_roots(cfg->vault.ca_dir);
	if ((rc = ca_load(cfg->vault.ca_dir, &ca, &e)) < 0 ||
	    (rc = policy_load_dir(cfg->rules_dir, cfg, &policy, &e)) < 0 ||
	    (rc = pc_privdrop(cfg->vault.user, 0, &e)) < 0) {
		pc_log(PC_LOG_ERR, "CA process: %s", e.msg);
		_exit(PC_EXIT_ERROR);
	}
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	pc_strlcpy(ready.text, policy_hash(policy), sizeof(ready.text));
	len = casign_encode(&ready, out, sizeof(out));
	if (len < 0 || send(fd, out, (size_t)len, MSG_NOSIGNAL) != len)
		_exit(PC_EXIT_ERROR);
	rc = casign_serve(fd, ca, cfg, policy);
	ca_free(ca);
	_exit(rc < 0 ? PC_EXIT_ERROR : PC_EXIT_OK);
}

/* ---- the daemon's side -------------------------------------------------------- */

struct casign {
	int fd;
	pid_t pid;
	/* one request at a time: a reply answers the request before it */
	pthread_mutex_t lock;
	uint32_t next_id;
	bool broken; /* an exchange failed midway: nothing more is trusted */
};

static int await(struct casign *c, uint32_t id, uint8_t *in, struct casign_msg *reply,
		 struct pc_err *err);

int casign_open(int fd, pid_t pid, struct casign **out, struct pc_err *err)
{
	struct casign *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	}
	c->fd = fd;
	c->pid = pid;
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

int casign_start(const struct config *cfg, struct casign **out, struct pc_err *err)
{
	struct casign *c = NULL;
	uint8_t in[CASIGN_MAX + 1];
	struct casign_msg m;
	int sv[2], rc;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return pc_err_errno(err, PC_EIO, "socketpair");
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return pc_err_errno(err, PC_EIO, "fork");
	}
	if (pid == 0) {
		close(sv[0]);
		ca_process(sv[1], cfg);
	}
	close(sv[1]);
	if ((rc = casign_open(sv[0], pid, &c, err)) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return rc;
	}
	/* it says it is ready (key and policy loaded, privileges dropped)
	 * with an unsolicited RELOADED, id 0; or it exits, having said why */
	rc = await(c, 0, in, &m, err);
	if (rc == 0 && m.type != CASIGN_RELOADED)
		rc = pc_err_set(err, PC_EPARSE, "unexpected first message");
	if (rc < 0) {
		pc_err_prefix(err, "the CA process did not start: ");
		casign_stop(c);
		return rc;
	}
	*out = c;
	return 0;
}

int casign_fd(const struct casign *c)
{
	return c ? c->fd : -1;
}

pid_t casign_pid(const struct casign *c)
{
	return c ? c->pid : -1;
}

void casign_stop(struct casign *c)
{
	if (!c)
		return;
	close(c->fd); /* the CA process reads EOF and exits */
	if (c->pid > 0)
		waitpid(c->pid, NULL, 0);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Wait for the reply to request id (the lock held). */
static int await(struct casign *c, uint32_t id, uint8_t *in, struct casign_msg *reply,
		 struct pc_err *err)
{
	uint64_t deadline = pc_now_mono_ms() + CASIGN_TIMEOUT_MS;
	int rc;

	for (;;) {
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		uint64_t now = pc_now_mono_ms();
		ssize_t n;

		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) == 0) {
			c->broken = true;
			return pc_err_set(err, PC_ETIMEOUT, "the CA process did not answer");
		}
		n = recv(c->fd, in, CASIGN_MAX + 1, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			c->broken = true;
			return pc_err_set(err, PC_EIO, "the CA process is gone");
		}
		rc = casign_decode(in, (size_t)n, true, reply, err);
		if (rc < 0 || reply->id != id) {
			c->broken = true;
			return rc < 0 ? rc : pc_err_set(err, PC_EPARSE, "CA reply out of turn");
		}
		return 0;
	}
}

/* Send q and wait for its reply (the lock held). */
static int exchange(struct casign *c, struct casign_msg *q, uint8_t *in, struct casign_msg *reply,
		    struct pc_err *err)
{
	uint8_t out[CASIGN_MAX];
	int len;

	if (c->broken)
		return pc_err_set(err, PC_EIO, "the CA process is gone");
	q->id = ++c->next_id;
	len = casign_encode(q, out, sizeof(out));
	if (len < 0)
		return pc_err_set(err, PC_EINVAL, "request too large for the CA process");
	if (send(c->fd, out, (size_t)len, MSG_NOSIGNAL) != len) {
		c->broken = true;
		return pc_err_errno(err, PC_EIO, "asking the CA process");
	}
	return await(c, q->id, in, reply, err);
}

int casign_sign(struct casign *c, const char *host, uint16_t port, void *pub, void **cert,
		struct pc_err *err)
{
	struct casign_msg q = {.type = CASIGN_SIGN, .port = port}, reply;
	uint8_t in[CASIGN_MAX + 1], kder[CASIGN_DER_MAX], *kp = kder;
	const uint8_t *cp;
	X509 *x;
	int n, rc;

	n = i2d_PUBKEY(pub, NULL);
	if (n <= 0 || n > CASIGN_DER_MAX || i2d_PUBKEY(pub, &kp) != n ||
	    pc_strlcpy(q.host, host, sizeof(q.host)) >= sizeof(q.host))
		return pc_err_set(err, PC_EINVAL, "cannot ask the CA for %s", host);
	q.der = kder;
	q.der_len = (size_t)n;
	pthread_mutex_lock(&c->lock);
	rc = exchange(c, &q, in, &reply, err);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc;
	if (reply.type != CASIGN_CERT)
		return pc_err_set(err, PC_EPERM, "%s",
				  reply.type == CASIGN_REFUSED ? reply.text
							       : "CA reply out of turn");
	cp = reply.der;
	x = d2i_X509(NULL, &cp, (long)reply.der_len);
	if (!x || cp != reply.der + reply.der_len) {
		X509_free(x);
		ERR_clear_error();
		return pc_err_set(err, PC_EPARSE, "the CA process sent a bad certificate");
	}
	*cert = x;
	return 0;
}

int casign_reload(struct casign *c, struct pc_err *err)
{
	struct casign_msg q = {.type = CASIGN_RELOAD}, reply;
	uint8_t in[CASIGN_MAX + 1];
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = exchange(c, &q, in, &reply, err);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0)
		return rc;
	if (reply.type != CASIGN_RELOADED)
		return pc_err_set(err, PC_EPARSE, "%s",
				  reply.type == CASIGN_REFUSED ? reply.text
							       : "CA reply out of turn");
	return 0;
}

int casign_client(struct casign *c, const char *sandbox, int fd, struct pc_err *err)
{
	struct casign_msg q = {.type = CASIGN_CLIENT}, reply;
	uint8_t out[CASIGN_MAX], in[CASIGN_MAX + 1];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	struct iovec iov = {.iov_base = out};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof(cb.b)};
	struct cmsghdr *cm;
	int len, rc;

	if (pc_strlcpy(q.text, sandbox, POLICY_NAME_MAX) >= POLICY_NAME_MAX)
		return pc_err_set(err, PC_EINVAL, "sandbox name too long");
	memset(&cb, 0, sizeof(cb));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	pthread_mutex_lock(&c->lock);
	if (c->broken) {
		pthread_mutex_unlock(&c->lock);
		return pc_err_set(err, PC_EIO, "the CA process is gone");
	}
	q.id = ++c->next_id;
	len = casign_encode(&q, out, sizeof(out));
	iov.iov_len = len > 0 ? (size_t)len : 0;
	if (len < 0 || sendmsg(c->fd, &mh, MSG_NOSIGNAL) != len) {
		c->broken = len >= 0;
		pthread_mutex_unlock(&c->lock);
		return pc_err_errno(err, PC_EIO, "handing the CA process a worker's channel");
	}
	rc = await(c, q.id, in, &reply, err);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0 && reply.type != CASIGN_OK)
		rc = pc_err_set(err, PC_EIO, "%s",
				reply.type == CASIGN_REFUSED ? reply.text : "CA reply out of turn");
	return rc;
}
