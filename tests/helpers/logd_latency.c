/* Test client for portcullis-logd's acknowledgement latency, through the
 * real client library as the engine uses it (send a batch, then flush with
 * the engine's deadline): prints the latency of each batch's flush as a
 * distribution, and counts the flushes that hit the deadline (the engine
 * refuses traffic when one does). For the syslog export tests and bench.
 *
 *   logd_latency SOCKET [--vs SOCKET2] [-n N] [-b BATCH] [-t TIMEOUT_MS] [-s SANDBOX]
 *                [-p PAUSE_US]
 *       N records (default 2000) in batches of BATCH (10), each flush
 *       allowed TIMEOUT_MS (1000: the engine's LOG_FLUSH_MS), PAUSE_US
 *       between batches (1000); prints
 *         "latency: N flushes, p50 A us, p99 B us, max C us, F flushes failed"
 *       and exits 1 if a flush failed. With --vs, the same records go to a
 *       second logd too (a baseline), batches interleaved so both see the
 *       same machine at the same time; then also
 *         "baseline: N flushes, p50 ..., F flushes failed"
 *         "p99 ratio: R"  (latency p99 / baseline p99)
 *   logd_latency SOCKET --oversize
 *       one exfiltration record whose syslog form is over 16 KiB (its
 *       reason is 7,900 ']', each escaped in structured data); prints
 *       "oversize seq S"
 */
#include "logd/logd.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int oversize(struct logc *lc)
{
	static char reason[7901];
	struct logrec rec = {.action = LOGREC_EXFIL,
			     .verdict = LOGREC_REFUSED,
			     .sandbox = "agent-big",
			     .reason = reason,
			     .http_method = "POST",
			     .http_path = "/gists"};
	struct pc_err err;

	memset(reason, ']', sizeof(reason) - 1);
	if (logc_send(lc, &rec, &err) < 0 || logc_flush(lc, 2000, &err) < 0) {
		fprintf(stderr, "oversize: %s\n", err.msg);
		return 1;
	}
	printf("oversize seq %llu\n", (unsigned long long)logc_last_seq(lc));
	return 0;
}

struct run {
	struct logc *lc;
	uint64_t *lat;
	size_t n, failed;
};

/* One batch to r's logd, timed from its first send to the flush's end. */
static void batch_to(struct run *r, long first, long end, const char *sandbox, long timeout)
{
	uint64_t t0 = pc_now_mono_ns();
	struct pc_err err;

	for (long i = first; i < end; i++) {
		char domain[64];
		struct logrec rec = {
		    .action = LOGREC_CONNECT,
		    .verdict = i % 3 ? LOGREC_ALLOWED : LOGREC_REFUSED,
		    .sandbox = sandbox,
		    .policy = "sha256:4be1c0ffee09c2",
		    .reason = i % 3 ? "allowed by rule" : "not on the allow list",
		    .transport = IPPROTO_TCP,
		    .domain = domain,
		};

		snprintf(domain, sizeof(domain), "host%ld.example", i);
		rec.dst.addr.family = AF_INET;
		inet_pton(AF_INET, "203.0.113.12", rec.dst.addr.a);
		rec.dst.port = 443;
		if (logc_send(r->lc, &rec, &err) < 0) {
			fprintf(stderr, "send %ld: %s\n", i, err.msg);
			r->failed++;
		}
	}
	if (logc_flush(r->lc, (int)timeout, &err) < 0) {
		fprintf(stderr, "flush after %ld: %s\n", end, err.msg);
		r->failed++;
	}
	r->lat[r->n++] = (pc_now_mono_ns() - t0) / 1000;
}

static uint64_t report(const char *what, struct run *r)
{
	uint64_t p99;

	qsort(r->lat, r->n, sizeof(*r->lat), cmp_u64);
	p99 = r->lat[(r->n * 99 + 99) / 100 - 1];
	printf("%s: %zu flushes, p50 %llu us, p99 %llu us, max %llu us, %zu flushes failed\n", what,
	       r->n, (unsigned long long)r->lat[r->n / 2], (unsigned long long)p99,
	       (unsigned long long)r->lat[r->n - 1], r->failed);
	return p99;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"oversize", no_argument, NULL, 'o'},
					     {"vs", required_argument, NULL, 'v'},
					     {NULL, 0, NULL, 0}};
	long n = 2000, batch = 10, timeout = 1000, pause_us = 1000;
	const char *sandbox = "agent-lat", *vs = NULL;
	bool big = false;
	struct run r[2] = {{0}};
	struct pc_err err;
	int opt, nr;

	while ((opt = getopt_long(argc, argv, "n:b:t:s:p:", opts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			n = atol(optarg);
			break;
		case 'b':
			batch = atol(optarg);
			break;
		case 't':
			timeout = atol(optarg);
			break;
		case 's':
			sandbox = optarg;
			break;
		case 'p':
			pause_us = atol(optarg);
			break;
		case 'o':
			big = true;
			break;
		case 'v':
			vs = optarg;
			break;
		default:
			return 2;
		}
	}
	if (optind != argc - 1 || batch < 1 || n < 1)
		return 2;
	nr = vs ? 2 : 1;
	for (int k = 0; k < nr; k++) {
		if (logc_open(k ? vs : argv[optind], &r[k].lc, &err) < 0) {
			fprintf(stderr, "logc_open: %s\n", err.msg);
			return 2;
		}
		r[k].lat = calloc((size_t)(n / batch + 1), sizeof(*r[k].lat));
		if (!r[k].lat)
			return 2;
	}
	if (big) {
		int rc = oversize(r[0].lc);

		logc_close(r[0].lc);
		free(r[0].lat);
		return rc;
	}
	for (long i = 0, b = 0; i < n; i += batch, b++) {
		long end = i + batch < n ? i + batch : n;

		/* alternate which goes first, so neither always waits on the other */
		for (int k = 0; k < nr; k++)
			batch_to(&r[(k + b) % nr], i, end, sandbox, timeout);
		if (pause_us > 0)
			nanosleep(&(struct timespec){.tv_sec = pause_us / 1000000,
						     .tv_nsec = (pause_us % 1000000) * 1000},
				  NULL);
	}
	{
		uint64_t p = report("latency", &r[0]);

		if (vs) {
			uint64_t q = report("baseline", &r[1]);

			printf("p99 ratio: %.2f\n", q ? (double)p / (double)q : 0.0);
		}
	}
	for (int k = 0; k < nr; k++) {
		logc_close(r[k].lc);
		free(r[k].lat);
	}
	return r[0].failed || r[1].failed ? 1 : 0;
}
