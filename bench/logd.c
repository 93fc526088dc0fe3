/* bench/logd: how fast portcullis-logd takes records in, seals and writes
 * them, and how fast the log verifies, next to libsodium's raw ed25519
 * signing rate measured in the same run (the reason logd signs checkpoints,
 * not records). Prints rates and their ratios to the signing rate, the CPU
 * time per record of each accept row; then the p99 acknowledgement latency
 * with a syslog collector that reads nothing, next to the same without a
 * collector (export_latency).
 *
 * The accept rows run the real daemons: portcullis-logd (-L) on a
 * configuration of its own in DIR, and for the witnessed row
 * `portcullis-logd --witness` beside it, both on the loopback of a network
 * namespace this program makes for itself (as root: never the root
 * namespace's). The senders are processes of the engine's user (-u), one
 * per queue thread of the engine (-k), each sending batches as the
 * engine's queue threads do (logc_send_batch of up to -b records, then
 * logc_flush).
 *
 *   logd_bench -L PORTCULLIS_LOGD [-n RECORDS] [-b BATCH] [-k SENDERS]
 *              [-c CHECKPOINT_RECORDS] [-u ENGINE_USER] [-d DIR]
 */
#include "logd/logd_int.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	return (double)pc_now_mono_ns() / 1e9;
}

/* CPU seconds this process used (all threads): with other work on the
 * machine, rates per CPU second say more than rates per wall second. */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* the daemons this program started: stopped if it dies, never left
 * running */
static pid_t daemons[4];
/* the directory this program made (none with -d), and its process: what
 * die() removes, in that process only */
static char made_dir[PC_PATH_MAX];
static pid_t main_pid;

static void remove_made_dir(void)
{
	char cmd[PC_PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", made_dir);
	if (made_dir[0] && strncmp(made_dir, "/tmp/pc-bench-logd.", 19) == 0 && system(cmd) != 0)
		fprintf(stderr, "logd bench: could not remove %s\n", made_dir);
}

static void die(const char *what, const struct pc_err *err)
{
	for (size_t i = 0; i < sizeof(daemons) / sizeof(daemons[0]); i++)
		if (daemons[i] > 0) {
			kill(daemons[i], SIGTERM);
			waitpid(daemons[i], NULL, 0);
		}
	fprintf(stderr, "logd bench: %s: %s\n", what, err ? err->msg : "failed");
	if (getpid() == main_pid)
		remove_made_dir();
	exit(1);
}

static void rec_fill(struct logrec *r, uint64_t i, char *domain, size_t dlen)
{
	memset(r, 0, sizeof(*r));
	r->action = LOGREC_CONNECT;
	r->verdict = i % 3 ? LOGREC_ALLOWED : LOGREC_REFUSED;
	r->sandbox = "agent-1";
	r->policy = "sha256:4be1c0ffee09c24be1c0ffee09c24be1c0ffee09c24be1c0ffee09c2aa";
	r->reason = i % 3 ? "allowed by rule" : "not on the allow list";
	r->rule = i % 3 ? "agent-1/allow[0]" : NULL;
	r->transport = IPPROTO_TCP;
	snprintf(domain, dlen, "host%llu.example", (unsigned long long)(i % 100000));
	r->domain = domain;
	r->src.addr.family = AF_INET;
	inet_pton(AF_INET, "10.203.0.11", r->src.addr.a);
	r->src.port = (uint16_t)(40000 + i % 20000);
	r->dst.addr.family = AF_INET;
	inet_pton(AF_INET, "203.0.113.12", r->dst.addr.a);
	r->dst.port = 443;
}

static double bench_sign(double *per_cpu)
{
	unsigned char pk[32], sk[64], sig[64], msg[100] = {0};
	double t0, c0, dt;
	int n = 0;

	crypto_sign_keypair(pk, sk);
	t0 = now_s();
	c0 = cpu_s();
	do {
		for (int i = 0; i < 1000; i++, n++) {
			msg[0] = (unsigned char)i;
			crypto_sign_detached(sig, NULL, msg, sizeof(msg), sk);
		}
		dt = now_s() - t0;
	} while (dt < 0.5);
	*per_cpu = n / (cpu_s() - c0);
	return n / dt;
}

/* ---- the accept rows: the real portcullis-logd (and witness), senders
 * of the engine's user ---- */

/* The loopback of a network namespace of this process's own, up: the
 * witness and logd's connection to it live there, never in the root
 * namespace. */
static int own_netns(void)
{
	struct ifreq ifr = {0};
	int s;

	if (unshare(CLONE_NEWNET) < 0)
		return -1;
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return -1;
	close(s);
	return 0;
}

/* CPU time of every thread of a process, from the scheduler's account
 * (the tick-sampled utime/stime miss threads that wake and sleep between
 * ticks: bench_cpu_ns in bench/lib.sh reads the same). */
static double proc_cpu_s(pid_t pid)
{
	char path[64];
	uint64_t ns = 0;
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%ld/task", (long)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char f[360];
		unsigned long long run = 0;
		FILE *fp;

		if (de->d_name[0] == '.')
			continue;
		snprintf(f, sizeof(f), "%s/%s/schedstat", path, de->d_name);
		fp = fopen(f, "r");
		if (fp && fscanf(fp, "%llu", &run) == 1)
			ns += run;
		if (fp)
			fclose(fp);
	}
	closedir(d);
	return (double)ns / 1e9;
}

static pid_t spawn(char *const argv[], const char *errfile)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork", NULL);
	if (pid == 0) {
		int fd = open(errfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		if (fd >= 0)
			dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	for (size_t i = 0; i < sizeof(daemons) / sizeof(daemons[0]); i++)
		if (daemons[i] <= 0) {
			daemons[i] = pid;
			break;
		}
	return pid;
}

/* Poll (never a fixed sleep) until connect() to addr succeeds: the
 * daemon is serving. 0, or -1 once it exited or the deadline passed. */
static int wait_listening(pid_t pid, int family, const struct sockaddr *sa, socklen_t len)
{
	for (int i = 0; i < 300; i++) {
		int fd = socket(
		    family, (family == AF_UNIX ? SOCK_SEQPACKET : SOCK_STREAM) | SOCK_CLOEXEC, 0);

		if (fd >= 0 && connect(fd, sa, len) == 0) {
			close(fd);
			return 0;
		}
		if (fd >= 0)
			close(fd);
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		usleep(100 * 1000);
	}
	return -1;
}

static void show_err(const char *errfile)
{
	char *text = NULL;
	size_t len = 0;

	if (pc_file_read(errfile, 65536, &text, &len, NULL) == 0 && len)
		fprintf(stderr, "%.*s", (int)len, text);
	free(text);
}

/* A portcullis-logd on DIR/NAME.yaml (log in DIR/NAME/, the key in
 * DIR/state, shared by both rows), serving once its socket answers. */
static pid_t logd_start(const char *logd, const char *dir, const char *name, const char *witness,
			uint64_t cp, char *sock, size_t socklen)
{
	char cfg[PC_PATH_MAX + 32], errf[PC_PATH_MAX + 32];
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	FILE *f;
	pid_t pid;

	snprintf(cfg, sizeof(cfg), "%s/%s.yaml", dir, name);
	snprintf(errf, sizeof(errf), "%s/%s.err", dir, name);
	snprintf(sock, socklen, "%s/run-%s/logd.sock", dir, name);
	f = fopen(cfg, "w");
	if (!f)
		die("config", NULL);
	fprintf(f,
		"run_dir: %s/run-%s\nstate_dir: %s/state\nlog:\n  file: %s/%s/verdicts.jsonl\n"
		"  checkpoint:\n    records: %llu\n    interval_ms: 1000\n"
		"  syslog:\n    local: false\n",
		dir, name, dir, dir, name, (unsigned long long)cp);
	if (witness)
		fprintf(f, "  witness:\n    address: \"%s\"\n    key: %s/wit/w.key.pub\n", witness,
			dir);
	fclose(f);
	pid = spawn((char *[]){(char *)logd, "-c", cfg, NULL}, errf);
	pc_strlcpy(sun.sun_path, sock, sizeof(sun.sun_path));
	if (wait_listening(pid, AF_UNIX, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		show_err(errf);
		die("portcullis-logd did not start", NULL);
	}
	return pid;
}

/* SIGTERM: a final checkpoint, then exit 0 (anything else is a failure
 * of the run). */
static void stop(pid_t pid, const char *what)
{
	int st;

	for (size_t i = 0; i < sizeof(daemons) / sizeof(daemons[0]); i++)
		if (daemons[i] == pid)
			daemons[i] = 0;
	kill(pid, SIGTERM);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		struct pc_err e;

		pc_err_set(&e, PC_EIO, "%s did not stop cleanly (SIGTERM)", what);
		die("stop", &e);
	}
}

/* A witness (`portcullis-logd --witness`) for the log's key, on this
 * namespace's loopback. */
static pid_t witness_start(const char *logd, const char *dir, const char *addr, int port)
{
	char key[PC_PATH_MAX + 32], state[PC_PATH_MAX + 32], pub[PC_PATH_MAX + 32],
	    errf[PC_PATH_MAX + 32];
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	pid_t pid;

	snprintf(key, sizeof(key), "%s/wit/w.key", dir);
	snprintf(state, sizeof(state), "%s/wit/state", dir);
	snprintf(errf, sizeof(errf), "%s/witness.err", dir);
	snprintf(pub, sizeof(pub), "%s/wit", dir);
	if (mkdir(pub, 0700) < 0 && errno != EEXIST)
		die("mkdir", NULL);
	snprintf(pub, sizeof(pub), "%s/state/log.key.pub", dir);
	pid = spawn((char *[]){(char *)logd, "--witness", "--listen", (char *)addr, "--key", key,
			       "--state", state, "--log", pub, "--name", "bench/witness", NULL},
		    errf);
	if (wait_listening(pid, AF_INET, (struct sockaddr *)&a, sizeof(a)) < 0) {
		show_err(errf);
		die("the witness did not start", NULL);
	}
	return pid;
}

struct sender_result {
	double cpu;
	int ok;
	char msg[600];
};

/* A sender becomes the engine's user, as the engine's queue threads run;
 * <0 with why in msg. */
static int drop_to_engine(uid_t uid, gid_t gid, char *msg, size_t len)
{
	if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
		snprintf(msg, len, "dropping to the engine's user: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* One sender, as a queue thread of the engine: its user, its own
 * connection, batches of up to `batch` records in one send, then a wait
 * for their acknowledgement. */
static void sender(const char *sock, uid_t uid, gid_t gid, uint64_t first, uint64_t n,
		   uint64_t batch, int go, int out)
{
	struct sender_result res = {0};
	struct logrec *recs = calloc(batch, sizeof(*recs));
	const struct logrec **ptrs = calloc(batch, sizeof(*ptrs));
	char(*domains)[64] = calloc(batch, 64);
	bool *sent = calloc(batch, sizeof(*sent));
	struct logc *lc = NULL;
	struct pc_err err = {0};
	char c;
	double c0;

	if (!recs || !ptrs || !domains || !sent)
		_exit(1);
	if (drop_to_engine(uid, gid, res.msg, sizeof(res.msg)) < 0)
		goto out;
	if (read(go, &c, 1) < 0) /* the start: every sender at once */
		_exit(1);
	c0 = cpu_s();
	if (logc_open(sock, &lc, &err) < 0)
		goto fail;
	for (uint64_t i = 0; i < n; i += batch) {
		size_t m = (size_t)(n - i < batch ? n - i : batch);

		for (size_t k = 0; k < m; k++) {
			rec_fill(&recs[k], first + i + k, domains[k], 64);
			ptrs[k] = &recs[k];
		}
		if (logc_send_batch(lc, ptrs, m, sent, &err) != m)
			goto fail;
		if (logc_flush(lc, 10000, &err) < 0) {
			pc_err_prefix(&err, "flush: logd did not acknowledge every record: ");
			goto fail;
		}
	}
	res.cpu = cpu_s() - c0;
	res.ok = 1;
	goto out;
fail:
	pc_strlcpy(res.msg, err.msg, sizeof(res.msg));
out:
	logc_close(lc);
	if (write(out, &res, sizeof(res)) != (ssize_t)sizeof(res))
		_exit(1);
	_exit(res.ok ? 0 : 1);
}

struct accept_run {
	double wall, logd_cpu, senders_cpu, witness_cpu;
};

/* n records from k senders of the engine's user to the logd at sock (pid
 * logd_pid; witness_pid, if any, measured too), all at once. */
static void accept_run(const char *sock, pid_t logd_pid, pid_t witness_pid, const char *user,
		       uint64_t n, uint64_t batch, unsigned k, struct accept_run *r)
{
	struct passwd *pw = getpwnam(user);
	int go[2], res[2];
	pid_t pids[64];
	double t0, l0, w0 = 0;
	bool failed = false;

	if (!pw)
		die("the engine's user does not exist (-u)", NULL);
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(res, O_CLOEXEC) < 0)
		die("pipe", NULL);
	for (unsigned i = 0; i < k; i++) {
		uint64_t first = n * i / k, last = n * (i + 1) / k;

		pids[i] = fork();
		if (pids[i] < 0)
			die("fork", NULL);
		if (pids[i] == 0) {
			close(go[1]);
			close(res[0]);
			sender(sock, pw->pw_uid, pw->pw_gid, first, last - first, batch, go[0],
			       res[1]);
		}
	}
	close(go[0]);
	close(res[1]);
	memset(r, 0, sizeof(*r));
	l0 = proc_cpu_s(logd_pid);
	if (witness_pid)
		w0 = proc_cpu_s(witness_pid);
	t0 = now_s();
	close(go[1]); /* go: each sender's read returns */
	for (unsigned i = 0; i < k; i++) {
		struct sender_result sr;

		if (read(res[0], &sr, sizeof(sr)) != (ssize_t)sizeof(sr)) {
			failed = true;
			break;
		}
		if (!sr.ok) {
			fprintf(stderr, "logd bench: sender: %s\n", sr.msg);
			failed = true;
		}
		r->senders_cpu += sr.cpu;
	}
	r->wall = now_s() - t0;
	r->logd_cpu = proc_cpu_s(logd_pid) - l0;
	if (witness_pid)
		r->witness_cpu = proc_cpu_s(witness_pid) - w0;
	close(res[0]);
	for (unsigned i = 0; i < k; i++)
		waitpid(pids[i], NULL, 0);
	if (failed)
		die("a sender failed", NULL);
}

/* The size of the checkpoint in a note file (its second line), or 0. */
static uint64_t note_size(const char *path)
{
	char *text = NULL, *nl;
	size_t len = 0;
	uint64_t size = 0;

	if (pc_file_read(path, 65536, &text, &len, NULL) == 0 && (nl = memchr(text, '\n', len)))
		size = strtoull(nl + 1, NULL, 10);
	free(text);
	return size;
}

static void row(const char *what, uint64_t n, double wall, double cpu, double sign, double sign_cpu)
{
	printf("  %-40s %10.0f %7.1fx %12.0f %7.1fx\n", what, n / wall, n / wall / sign, n / cpu,
	       n / cpu / sign_cpu);
}

/* ---- acknowledgement latency with a stalled syslog collector ----------
 * Two logd servers, each in a child process of its own: one without
 * syslog export, one exporting to a local syslog socket that nobody reads
 * (its queue fills, the exporter's writes would block: a collector that
 * stalled). One client sends batches of 10 records to each in turn and
 * times each flush, so both see the same machine at the same moments; the
 * p99 of each and their ratio are printed (issue 21: within 1.5x), and
 * each server's CPU per record (its whole process: what export costs). */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static pid_t serve_child(const struct logw_conf *wc0, struct note_signer *key, const char *file,
			 const char *sock, const char *collector)
{
	struct logw_conf wc = *wc0;
	struct pc_err err;
	struct logw *w;
	int lfd;
	pid_t pid;

	lfd = pc_unix_listen(sock, 0600, (uid_t)-1, (gid_t)-1, &err);
	if (lfd < 0)
		die("listen", &err);
	pid = fork();
	if (pid < 0)
		die("fork", NULL);
	if (pid == 0) {
		struct logd_server_conf sc = {.allowed_uids = {getuid()}, .n_allowed = 1};
		struct logx_conf xc = {
		    .local = true, .local_path = collector, .spool_records = 100000};
		struct logx *x = NULL;
		struct logw_export exp;

		wc.file = file;
		if (logw_open(&wc, key, NULL, &w, &err) < 0)
			die("open", &err);
		if (collector) {
			if (logx_start(&xc, &x, &err) < 0)
				die("export", &err);
			logx_hooks(x, &exp);
			logw_set_export(w, &exp);
		}
		if (logd_serve(lfd, w, &sc, NULL, &err) < 0)
			die("serve", &err);
		logw_close(w, NULL);
		logx_stop(x, 0, NULL);
		_exit(0);
	}
	close(lfd);
	return pid;
}

static void export_latency(const char *dir, const struct logw_conf *wc, struct note_signer *key,
			   uint64_t n)
{
	char stalled[PC_PATH_MAX + 32], f[2][PC_PATH_MAX + 32], so[2][PC_PATH_MAX + 32];
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct logc *lc[2];
	uint64_t *lat[2], nb = 0, p99[2];
	double cpu_us[2] = {0, 0};
	struct pc_err err;
	struct logrec r;
	char domain[64];
	pid_t pid[2];
	int cfd;

	/* the collector: bound, never read */
	snprintf(stalled, sizeof(stalled), "%s/stalled.sock", dir);
	pc_strlcpy(sun.sun_path, stalled, sizeof(sun.sun_path));
	cfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (cfd < 0 || bind(cfd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		die("collector socket", NULL);
	for (int k = 0; k < 2; k++) {
		snprintf(f[k], sizeof(f[k]), "%s/lat%d.jsonl", dir, k);
		snprintf(so[k], sizeof(so[k]), "%s/lat%d.sock", dir, k);
		pid[k] = serve_child(wc, key, f[k], so[k], k ? stalled : NULL);
		if (logc_open(so[k], &lc[k], &err) < 0)
			die("client", &err);
		lat[k] = calloc(n / 10 + 1, sizeof(*lat[k]));
		if (!lat[k])
			die("memory", NULL);
	}
	for (uint64_t i = 0; i < n; i += 10, nb++) {
		for (int j = 0; j < 2; j++) {
			int k = (int)((j + nb) % 2); /* each goes first in turn */
			uint64_t t0 = pc_now_mono_ns();

			for (uint64_t q = i; q < i + 10; q++) {
				rec_fill(&r, q, domain, sizeof(domain));
				if (logc_send(lc[k], &r, &err) < 0)
					die("send", &err);
			}
			if (logc_flush(lc[k], 10000, &err) < 0)
				die("flush", &err);
			lat[k][nb] = (pc_now_mono_ns() - t0) / 1000;
		}
		usleep(200); /* a flow rate, not a flood: latency, not throughput */
	}
	for (int k = 0; k < 2; k++) {
		logc_close(lc[k]);
		qsort(lat[k], nb, sizeof(*lat[k]), cmp_u64);
		p99[k] = lat[k][(nb * 99 + 99) / 100 - 1];
		kill(pid[k], SIGTERM);
		{
			struct rusage ru;

			if (wait4(pid[k], NULL, 0, &ru) == pid[k])
				cpu_us[k] =
				    ((double)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
				    (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec;
		}
		free(lat[k]);
	}
	close(cfd);
	printf(
	    "  ack latency p99: stalled collector %llu us, none %llu us, ratio %.2f (%llu flushes "
	    "each, batches of 10; target <= 1.5)\n",
	    (unsigned long long)p99[1], (unsigned long long)p99[0],
	    p99[0] ? (double)p99[1] / (double)p99[0] : 0.0, (unsigned long long)nb);
	printf("  CPU per record, the same servers: exporting to the stalled collector %.2f us, "
	       "no export %.2f us\n",
	       cpu_us[1] / (double)(nb * 10), cpu_us[0] / (double)(nb * 10));
}

/* ---- the record round trip -------------------------------------------------
 * One record through the engine's path (the ring, logc_use_ring) and its
 * acknowledgement, one at a time, as a lone SYN makes it: the real
 * portcullis-logd against two bare processes that only wake each other
 * through eventfds, the least any round trip between two processes costs
 * on this machine (its sleeps and wake-ups). Wall time and CPU per round
 * trip of each side. */

struct rt_result {
	double wall, cpu; /* per round trip: the sender's own CPU */
	int ok;
	char msg[300];
};

static void rt_send(int out, const struct rt_result *r)
{
	if (write(out, r, sizeof(*r)) != (ssize_t)sizeof(*r))
		_exit(1);
	_exit(r->ok ? 0 : 1);
}

/* The sender, as a queue thread of the engine (its user, a ring). */
static void rt_ring_sender(const char *sock, uid_t uid, gid_t gid, uint64_t n, int out)
{
	struct rt_result r = {0};
	struct logc *lc = NULL;
	struct pc_err err = {0};
	char domain[64];
	struct logrec rec;
	const struct logrec *p = &rec;
	bool sent;
	double t0 = 0, c0 = 0;

	if (logc_open(sock, &lc, &err) < 0 || logc_use_ring(lc, &err) < 0)
		goto fail;
	if (drop_to_engine(uid, gid, err.msg, sizeof(err.msg)) < 0)
		goto fail;
	for (uint64_t i = 0; i < n + 200; i++) {
		if (i == 200) { /* the first 200: the connection, the ring, warm caches */
			t0 = now_s();
			c0 = cpu_s();
		}
		rec_fill(&rec, i, domain, sizeof(domain));
		if (logc_send_batch(lc, &p, 1, &sent, &err) != 1 || logc_flush(lc, 10000, &err) < 0)
			goto fail;
	}
	r.wall = (now_s() - t0) / (double)n;
	r.cpu = (cpu_s() - c0) / (double)n;
	r.ok = 1;
	logc_close(lc);
	rt_send(out, &r);
fail:
	pc_strlcpy(r.msg, err.msg, sizeof(r.msg));
	rt_send(out, &r);
}

static double children_cpu_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_CHILDREN, &ru) < 0)
		die("getrusage", NULL);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* The floor: a parent and a child ringing each other's eventfd. */
static void rt_bare(uint64_t n, struct rt_result *parent, double *child_cpu)
{
	int to_child = eventfd(0, EFD_CLOEXEC), to_parent = eventfd(0, EFD_CLOEXEC);
	uint64_t one = 1, v;
	double t0 = 0, c0 = 0, k0 = children_cpu_s();
	pid_t pid;

	if (to_child < 0 || to_parent < 0)
		die("eventfd", NULL);
	pid = fork();
	if (pid < 0)
		die("fork", NULL);
	if (pid == 0) {
		for (uint64_t i = 0; i < n + 200; i++)
			if (read(to_child, &v, sizeof(v)) != sizeof(v) ||
			    write(to_parent, &one, sizeof(one)) != sizeof(one))
				_exit(1);
		_exit(0);
	}
	for (uint64_t i = 0; i < n + 200; i++) {
		if (i == 200) {
			t0 = now_s();
			c0 = cpu_s();
		}
		if (write(to_child, &one, sizeof(one)) != sizeof(one) ||
		    read(to_parent, &v, sizeof(v)) != sizeof(v))
			die("eventfd ping-pong", NULL);
	}
	parent->wall = (now_s() - t0) / (double)n;
	parent->cpu = (cpu_s() - c0) / (double)n;
	if (waitpid(pid, NULL, 0) != pid)
		die("the ping-pong's child", NULL);
	/* the child's whole life, its 200 first round trips too (as logd's
	 * below) */
	*child_cpu = (children_cpu_s() - k0) / (double)(n + 200);
	close(to_child);
	close(to_parent);
}

static void round_trip(const char *logd, const char *dir, const char *user, uint64_t cp, uint64_t n)
{
	struct passwd *pw = getpwnam(user);
	struct rt_result ring = {0}, bare = {0};
	char sock[PC_PATH_MAX + 32];
	double bare_child, l0, logd_cpu;
	int res[2];
	pid_t lp, pid;

	if (!pw)
		die("the engine's user does not exist (-u)", NULL);
	rt_bare(n, &bare, &bare_child);
	lp = logd_start(logd, dir, "ring", NULL, cp, sock, sizeof(sock));
	if (pipe2(res, O_CLOEXEC) < 0)
		die("pipe", NULL);
	l0 = proc_cpu_s(lp);
	pid = fork();
	if (pid < 0)
		die("fork", NULL);
	if (pid == 0) {
		close(res[0]);
		rt_ring_sender(sock, pw->pw_uid, pw->pw_gid, n, res[1]);
	}
	close(res[1]);
	if (read(res[0], &ring, sizeof(ring)) != (ssize_t)sizeof(ring) || !ring.ok) {
		fprintf(stderr, "logd bench: ring sender: %s\n", ring.msg);
		die("the round-trip sender failed", NULL);
	}
	/* logd's CPU over the whole exchange, its warm-up too (a little more
	 * than its share) */
	logd_cpu = (proc_cpu_s(lp) - l0) / (double)(n + 200);
	close(res[0]);
	waitpid(pid, NULL, 0);
	stop(lp, "portcullis-logd");
	printf("  record round trip (one record through the ring, then its acknowledgement; %llu "
	       "times): %.1f us, CPU per round trip portcullis-logd %.2f us, sender %.2f us; two "
	       "processes ringing eventfds: %.1f us, CPU %.2f + %.2f us\n",
	       (unsigned long long)n, ring.wall * 1e6, logd_cpu * 1e6, ring.cpu * 1e6,
	       bare.wall * 1e6, bare.cpu * 1e6, bare_child * 1e6);
}

/* Read a file once, so that what reads it next finds it in the page cache. */
static void warm(const char *path)
{
	char buf[1 << 16];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		die("open", NULL);
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

static void cpu_line(const struct accept_run *a, uint64_t n, bool witness)
{
	printf("    CPU per record: portcullis-logd %.2f us (all threads), senders %.2f us",
	       a->logd_cpu * 1e6 / (double)n, a->senders_cpu * 1e6 / (double)n);
	if (witness)
		printf(", witness %.2f us", a->witness_cpu * 1e6 / (double)n);
	printf("\n");
}

int main(int argc, char **argv)
{
	uint64_t n = 1000000, batch = 64, cp = 1000;
	unsigned senders = 2;
	const char *logd = NULL, *user = "portcullis";
	char dir[PC_PATH_MAX] = "", file[PC_PATH_MAX + 32], sock[PC_PATH_MAX + 32];
	struct logw_conf wc = {.cp_ms = 1000, .owner = (uid_t)-1, .group = (gid_t)-1};
	struct note_signer *key;
	struct logw *w;
	struct logv *v;
	struct pc_err err;
	struct logrec r;
	char domain[64];
	double sign, sign_cpu, t0, c0, t_write, t_verify, c_write, c_verify;
	struct accept_run acc = {0}, wit = {0};
	uint64_t wit_size = 0, log_size = 0;
	bool root = geteuid() == 0;
	int opt;

	while ((opt = getopt(argc, argv, "n:b:c:d:k:L:u:")) != -1) {
		switch (opt) {
		case 'n':
			n = strtoull(optarg, NULL, 10);
			break;
		case 'b':
			batch = strtoull(optarg, NULL, 10);
			break;
		case 'c':
			cp = strtoull(optarg, NULL, 10);
			break;
		case 'd':
			snprintf(dir, sizeof(dir), "%s", optarg);
			break;
		case 'k':
			senders = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'L':
			logd = optarg;
			break;
		case 'u':
			user = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: logd_bench -L PORTCULLIS_LOGD [-n RECORDS] [-b BATCH] "
				"[-k SENDERS] [-c CHECKPOINT_RECORDS] [-u ENGINE_USER] "
				"[-d DIR]\n");
			return 2;
		}
	}
	if (!n || !batch || !cp || !logd || !senders || senders > 64 || sodium_init() < 0)
		return 2;
	main_pid = getpid();
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/pc-bench-logd.XXXXXX");
		if (!mkdtemp(dir))
			die("mkdtemp", NULL);
		pc_strlcpy(made_dir, dir, sizeof(made_dir));
	}
	/* logd drops to its own user, the senders to the engine's: both
	 * must reach the directory */
	chmod(dir, 0755);
	if (root && own_netns() < 0)
		die("a network namespace of its own", NULL);
	wc.cp_records = (uint32_t)cp;
	if (note_signer_generate("bench/portcullis-log", &key, &err) < 0)
		die("key", &err);

	printf("portcullis logd benchmark: %llu records, %u senders of the engine's user (%s) in "
	       "batches of %llu (one datagram, then one acknowledgement), a checkpoint every %llu "
	       "records (or 1 s), files in %s\n",
	       (unsigned long long)n, senders, user, (unsigned long long)batch,
	       (unsigned long long)cp, dir);
	sign = bench_sign(&sign_cpu);
	printf("  %-40s %10s %8s %12s %8s\n", "", "per s", "ratio", "per CPU s", "ratio");
	printf("  %-40s %10.0f %8s %12.0f %8s\n", "ed25519 signatures (libsodium, raw)", sign,
	       "1.0", sign_cpu, "1.0");

	/* 1. the writer alone: format, hash, chain, tree, seal, write */
	snprintf(file, sizeof(file), "%s/write.jsonl", dir);
	unlink(file);
	wc.file = file;
	if (logw_open(&wc, key, NULL, &w, &err) < 0)
		die("open", &err);
	t0 = now_s();
	c0 = cpu_s();
	for (uint64_t i = 0; i < n; i++) {
		rec_fill(&r, i, domain, sizeof(domain));
		if (logw_append(w, &r, NULL, &err) < 0)
			die("append", &err);
		if ((i + 1) % batch == 0 && logw_commit(w, &err) < 0)
			die("commit", &err);
	}
	if (logw_close(w, &err) < 0)
		die("close", &err);
	t_write = now_s() - t0;
	c_write = cpu_s() - c0;

	/* 2. verification of what was written, from the page cache: the
	 * writer released it once durable, and the row measures the
	 * verifier, not this machine's disk */
	warm(file);
	if (logv_new(note_signer_verifier(key), &v, &err) < 0)
		die("verifier", &err);
	t0 = now_s();
	c0 = cpu_s();
	if (logv_file(v, file, 0, &err) < 0)
		die("verify", &err);
	t_verify = now_s() - t0;
	c_verify = cpu_s() - c0;
	if (logv_result(v)->records < n)
		die("verify: record count", NULL);
	logv_free(v);

	/* 3. end to end: senders -> socket -> portcullis-logd -> file -> ack */
	if (root) {
		pid_t lp = logd_start(logd, dir, "plain", NULL, cp, sock, sizeof(sock));

		accept_run(sock, lp, 0, user, n, batch, senders, &acc);
		stop(lp, "portcullis-logd");
	}

	/* 4. the same with a witness cosigning checkpoints (logd's witness
	 * client thread: a consistency proof and an HTTP exchange per
	 * cosignature, at most 5 a second) */
	if (root) {
		const char *addr = "127.0.0.1:7380"; /* this namespace's own loopback */
		char side[PC_PATH_MAX + 64], wf[PC_PATH_MAX + 64];
		pid_t wp = witness_start(logd, dir, addr, 7380), lp;

		lp = logd_start(logd, dir, "witnessed", addr, cp, sock, sizeof(sock));
		accept_run(sock, lp, wp, user, n, batch, senders, &wit);
		/* how far the witness kept up: the log's last checkpoint
		 * (sidecar) against the cosigned one, once logd had a second
		 * to seal the tail */
		snprintf(side, sizeof(side), "%s/witnessed/verdicts.jsonl.checkpoint", dir);
		snprintf(wf, sizeof(wf), "%s/witnessed/verdicts.jsonl%s", dir, LOGWC_SUFFIX);
		for (int i = 0; i < 50; i++) {
			log_size = note_size(side);
			wit_size = note_size(wf);
			if (log_size >= n && wit_size == log_size)
				break;
			usleep(100 * 1000);
		}
		stop(lp, "portcullis-logd");
		stop(wp, "the witness");
	}

	row("write + seal (writer, no socket)", n, t_write, c_write, sign, sign_cpu);
	if (acc.wall > 0) {
		row("accept + seal + write + ack (socket)", n, acc.wall,
		    acc.logd_cpu + acc.senders_cpu, sign, sign_cpu);
		cpu_line(&acc, n, false);
	}
	row("verify (chain, tree, checkpoints)", n + 1, t_verify, c_verify, sign, sign_cpu);
	if (wit.wall > 0) {
		row("witnessed: accept + seal + write + ack", n, wit.wall,
		    wit.logd_cpu + wit.senders_cpu + wit.witness_cpu, sign, sign_cpu);
		cpu_line(&wit, n, true);
		printf("  the witness cosigned a checkpoint for %llu of %llu records\n",
		       (unsigned long long)wit_size, (unsigned long long)log_size);
	}
	if (!root)
		printf("  (no accept rows: portcullis-logd and a network namespace of its own "
		       "need root)\n");
	printf("  targets: accept+write >= 200000/s (%s), verify >= 1000000/s (%s), with a witness "
	       ">= 200000/s (%s)\n",
	       acc.wall <= 0		? "not measured"
	       : n / acc.wall >= 200000 ? "met"
					: "not met",
	       (n + 1) / t_verify >= 1000000 ? "met" : "not met",
	       wit.wall <= 0		? "not measured"
	       : n / wit.wall >= 200000 ? "met"
					: "not met");
	printf("  a signature per record would cap logd at the signing rate: %.0f /s\n", sign);
	export_latency(dir, &wc, key, n / 20 < 100000 ? n / 20 : 100000);
	if (root)
		round_trip(logd, dir, user, cp, n / 50 < 20000 ? n / 50 : 20000);
	note_signer_free(key);
	remove_made_dir();
	return 0;
}
