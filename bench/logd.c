/* bench/logd: how fast portcullis-logd takes records in, seals and writes
 * them, and how fast the log verifies, next to libsodium's raw ed25519
 * signing rate measured in the same run (the reason logd signs checkpoints,
 * not records). Prints rates and their ratios to the signing rate; then
 * the p99 acknowledgement latency with a syslog collector that reads
 * nothing, next to the same without a collector (export_latency).
 *
 *   logd_bench [-n RECORDS] [-b BATCH] [-c CHECKPOINT_RECORDS] [-d DIR]
 */
#include "logd/logd_int.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
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

static void die(const char *what, const struct pc_err *err)
{
	fprintf(stderr, "logd bench: %s: %s\n", what, err ? err->msg : "failed");
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

/* n records through the client library to the logd at sock, flushed (each
 * batch acknowledged) every batch records: its wall and CPU seconds. */
static void send_all(const char *sock, uint64_t n, uint64_t batch, double *wall, double *cpu)
{
	struct logrec r;
	struct logc *lc;
	struct pc_err err;
	char domain[64];
	double t0, c0;

	if (logc_open(sock, &lc, &err) < 0)
		die("client", &err);
	t0 = now_s();
	c0 = cpu_s();
	for (uint64_t i = 0; i < n; i++) {
		rec_fill(&r, i, domain, sizeof(domain));
		if (logc_send(lc, &r, &err) < 0)
			die("send", &err);
		if (((i + 1) % batch == 0 || i + 1 == n) && logc_flush(lc, 10000, &err) < 0)
			die("flush", &err);
	}
	*wall = now_s() - t0;
	*cpu = cpu_s() - c0;
	logc_close(lc);
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

struct served {
	int lfd;
	struct logw *w;
	struct logd_stats st;
};

static void *serve(void *arg)
{
	struct served *s = arg;
	struct logd_server_conf sc = {.allowed_uids = {getuid()}, .n_allowed = 1};
	struct pc_err err;

	if (logd_serve(s->lfd, s->w, &sc, &s->st, &err) < 0)
		die("serve", &err);
	return NULL;
}

/* ---- the witness stage: a witness in this process, on the loopback of a
 * network namespace of our own (never the root namespace's) ---- */
struct wserved {
	struct witness *w;
	int lfd;
	volatile bool stop;
};

static void *wserve(void *arg)
{
	struct wserved *ws = arg;

	while (!ws->stop) {
		int fd = accept(ws->lfd, NULL, NULL);

		if (fd < 0)
			continue;
		witness_serve_fd(ws->w, fd);
		close(fd);
	}
	return NULL;
}

/* A new network namespace with its loopback up; the port listened on. */
static int witness_listen(int *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	struct ifreq ifr = {0};
	int s, fd;

	if (unshare(CLONE_NEWNET) < 0)
		return -1;
	s = socket(AF_INET, SOCK_DGRAM, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		return -1;
	close(s);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
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
 * p99 of each and their ratio are printed (issue 21: within 1.5x). */

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
		waitpid(pid[k], NULL, 0);
		free(lat[k]);
	}
	close(cfd);
	printf(
	    "  ack latency p99: stalled collector %llu us, none %llu us, ratio %.2f (%llu flushes "
	    "each, batches of 10; target <= 1.5)\n",
	    (unsigned long long)p99[1], (unsigned long long)p99[0],
	    p99[0] ? (double)p99[1] / (double)p99[0] : 0.0, (unsigned long long)nb);
}

int main(int argc, char **argv)
{
	uint64_t n = 1000000, batch = 256, cp = 1000;
	char dir[PC_PATH_MAX] = "", file[PC_PATH_MAX + 32], sock[PC_PATH_MAX + 32];
	struct logw_conf wc = {.cp_ms = 1000, .owner = (uid_t)-1, .group = (gid_t)-1};
	struct note_signer *key;
	struct served s;
	struct logw *w;
	struct logv *v;
	struct pc_err err;
	struct logrec r;
	char domain[64];
	pthread_t th;
	sigset_t set;
	double sign, sign_cpu, t0, c0, t_write, t_sock, t_verify, c_write, c_sock, c_verify;
	double t_wit = 0, c_wit = 0;
	uint64_t wit_size = 0;
	int opt;

	while ((opt = getopt(argc, argv, "n:b:c:d:")) != -1) {
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
		default:
			fprintf(stderr, "usage: logd_bench [-n RECORDS] [-b BATCH] "
					"[-c CHECKPOINT_RECORDS] [-d DIR]\n");
			return 2;
		}
	}
	if (!n || !batch || !cp || sodium_init() < 0)
		return 2;
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/tmp/pc-bench-logd.XXXXXX");
		if (!mkdtemp(dir))
			die("mkdtemp", NULL);
	}
	wc.cp_records = (uint32_t)cp;
	if (note_signer_generate("bench/portcullis-log", &key, &err) < 0)
		die("key", &err);

	printf("portcullis logd benchmark: %llu records, batches of %llu, a checkpoint every %llu "
	       "records (or 1 s), files in %s\n",
	       (unsigned long long)n, (unsigned long long)batch, (unsigned long long)cp, dir);
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

	/* 2. end to end: client library -> socket -> logd -> file -> ack */
	snprintf(file, sizeof(file), "%s/socket.jsonl", dir);
	snprintf(sock, sizeof(sock), "%s/logd.sock", dir);
	unlink(file);
	if (logw_open(&wc, key, NULL, &s.w, &err) < 0)
		die("open", &err);
	s.lfd = pc_unix_listen(sock, 0600, (uid_t)-1, (gid_t)-1, &err);
	if (s.lfd < 0)
		die("listen", &err);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_create(&th, NULL, serve, &s);
	send_all(sock, n, batch, &t_sock, &c_sock);
	kill(getpid(), SIGTERM);
	pthread_join(th, NULL);
	if (logw_close(s.w, &err) < 0)
		die("close", &err);

	/* 3. verification of what was written */
	if (logv_new(note_signer_verifier(key), &v, &err) < 0)
		die("verifier", &err);
	t0 = now_s();
	c0 = cpu_s();
	if (logv_file(v, file, 0, &err) < 0)
		die("verify", &err);
	t_verify = now_s() - t0;
	c_verify = cpu_s() - c0;
	if (logv_result(v)->records != n + 1)
		die("verify: record count", NULL);
	logv_free(v);

	/* 4. end to end again, with a witness cosigning every checkpoint */
	{
		struct note_signer *wk;
		struct wserved ws = {0};
		struct cosig_verifier wv;
		struct logwc *wcl;
		struct logw_export exp;
		pthread_t wth;
		char addr[64];
		int port;

		snprintf(file, sizeof(file), "%s/witnessed.jsonl", dir);
		unlink(file);
		ws.lfd = witness_listen(&port);
		if (ws.lfd < 0) {
			printf("  (no witness stage: a network namespace of its own needs root)\n");
			goto rows;
		}
		if (note_signer_generate("bench/witness", &wk, &err) < 0 ||
		    witness_new(wk, note_signer_verifier(key), 1, NULL, &ws.w, &err) < 0)
			die("witness", &err);
		pthread_create(&wth, NULL, wserve, &ws);
		cosig_verifier_from(wk, &wv);
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
		if (logw_open(&wc, key, NULL, &s.w, &err) < 0)
			die("open", &err);
		{
			struct logwc_conf wcc = {.address = addr,
						 .wkey = &wv,
						 .logkey = note_signer_verifier(key),
						 .file = file,
						 .max_lag_ms = 10000};

			if (logwc_start(&wcc, &wcl, &err) < 0)
				die("witness client", &err);
		}
		logwc_hooks(wcl, NULL, &exp);
		logw_set_export(s.w, &exp);
		unlink(sock);
		s.lfd = pc_unix_listen(sock, 0600, (uid_t)-1, (gid_t)-1, &err);
		if (s.lfd < 0)
			die("listen", &err);
		pthread_create(&th, NULL, serve, &s);
		send_all(sock, n, batch, &t_wit, &c_wit);
		kill(getpid(), SIGTERM);
		pthread_join(th, NULL);
		if (logw_close(s.w, &err) < 0)
			die("close", &err);
		/* what it cosigned: <file>.witnessed, a checkpoint note */
		{
			char wf[PC_PATH_MAX + 48], *text = NULL;
			size_t len = 0;
			struct checkpoint wcp;

			/* the final checkpoint (at close) covers every record */
			for (int i = 0; i < 50 && wit_size != n + 1; i++) {
				snprintf(wf, sizeof(wf), "%s%s", file, LOGWC_SUFFIX);
				if (pc_file_read(wf, 4096, &text, &len, NULL) == 0 &&
				    checkpoint_open(note_signer_verifier(key), text, len, &wcp,
						    NULL) == 0)
					wit_size = wcp.size;
				free(text);
				text = NULL;
				if (wit_size != n + 1)
					usleep(100 * 1000);
			}
		}
		logwc_stop(wcl);
		ws.stop = true;
		shutdown(ws.lfd, SHUT_RDWR);
		close(ws.lfd);
		pthread_cancel(wth);
		pthread_join(wth, NULL);
		witness_free(ws.w);
		note_signer_free(wk);
	}
rows:
	row("write + seal (writer, no socket)", n, t_write, c_write, sign, sign_cpu);
	row("accept + seal + write + ack (socket)", n, t_sock, c_sock, sign, sign_cpu);
	row("verify (chain, tree, checkpoints)", n + 1, t_verify, c_verify, sign, sign_cpu);
	if (t_wit > 0) {
		row("witnessed: accept + seal + write + ack", n, t_wit, c_wit, sign, sign_cpu);
		printf("  the witness cosigned a checkpoint for %llu of %llu records\n",
		       (unsigned long long)wit_size, (unsigned long long)(n + 1));
	}
	printf("  targets: accept+write >= 200000/s (%s), verify >= 1000000/s (%s), with a witness "
	       ">= 200000/s (%s)\n",
	       n / t_sock >= 200000 ? "met" : "not met",
	       (n + 1) / t_verify >= 1000000 ? "met" : "not met",
	       t_wit <= 0	     ? "not measured"
	       : n / t_wit >= 200000 ? "met"
				     : "not met");
	printf("  a signature per record would cap logd at the signing rate: %.0f /s\n", sign);
	export_latency(dir, &wc, key, n / 20 < 100000 ? n / 20 : 100000);
	note_signer_free(key);
	{
		char cmd[PC_PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (strncmp(dir, "/tmp/pc-bench-logd.", 19) == 0 && system(cmd) != 0)
			fprintf(stderr, "logd bench: could not remove %s\n", dir);
	}
	return 0;
}
