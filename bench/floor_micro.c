/* bench/floor_micro: what any DNS guard built as issue 34 asks pays per
 * query on this machine, before a line of its own logic: ldns' parse and
 * free of the query and of its answer (the mission parses sandbox DNS with
 * ldns), and SHA-256 over the bytes of the query's record (a
 * tamper-evident log hashes every byte it keeps; OpenSSL, which uses the
 * CPU's SHA instructions where it has them, through the calls logd's
 * tlog/merkle.c makes). The messages are the cheapest of bench/dns's: an
 * A query as dnsperf sends it (no EDNS) and an answer of one A record;
 * the answer with a CNAME (one name of bench/dns's four) is printed
 * beside, not counted. The record is a line of the given length (default
 * 957 bytes: a connect record of bench/logd).
 * CPU time of the process, best of five loops, so the machine's load
 * changes it little (bench/report-notes.md, "The run of 2026-12-07 21:39").
 *   cc -O2 -std=c11 -D_GNU_SOURCE -o build/bench/floor_micro bench/floor_micro.c \
 *     $(pkg-config --libs ldns openssl)
 *   build/bench/floor_micro [RECORD_BYTES]
 */
#include <ldns/ldns.h>
/* the SHA256_* calls, as tlog/merkle.c makes them: deprecated in OpenSSL
 * 3, and the cheapest way to it (no context allocated per digest) */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOOPS 200000

static double cpu(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "floor_micro: %s\n", what);
	exit(1);
}

/* The answer records of bench/dns's names: www is a CNAME to edge, edge
 * has two addresses. */
static const char *const cname_rrs[] = {
    "www.example.test. 300 IN CNAME edge.example.test.",
    "edge.example.test. 60 IN A 203.0.113.10",
    "edge.example.test. 60 IN A 203.0.113.11",
};

/* The wire form of an A query for qname (recursion desired, no EDNS) or,
 * with nrr records, of its answer. */
static uint8_t *message(const char *qname, const char *const *rrs, size_t nrr, size_t *len)
{
	ldns_pkt *p = NULL;
	ldns_rr *rr = NULL;
	uint8_t *wire = NULL;

	if (ldns_pkt_query_new_frm_str(&p, qname, LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN, LDNS_RD) !=
	    LDNS_STATUS_OK)
		die("cannot make the query");
	ldns_pkt_set_id(p, 4711);
	if (nrr) {
		ldns_pkt_set_qr(p, true);
		ldns_pkt_set_ra(p, true);
	}
	for (size_t i = 0; i < nrr; i++) {
		if (ldns_rr_new_frm_str(&rr, rrs[i], 0, NULL, NULL) != LDNS_STATUS_OK)
			die("cannot make an answer record");
		ldns_pkt_push_rr(p, LDNS_SECTION_ANSWER, rr);
	}
	if (ldns_pkt2wire(&wire, p, len) != LDNS_STATUS_OK)
		die("cannot write the message");
	ldns_pkt_free(p);
	return wire;
}

/* CPU seconds per parse and free of msg, best of five loops */
static double parse_cost(const uint8_t *msg, size_t len)
{
	double best = 1e9;

	for (int r = 0; r < 5; r++) {
		double t0 = cpu();

		for (int i = 0; i < LOOPS; i++) {
			ldns_pkt *p = NULL;

			if (ldns_wire2pkt(&p, msg, len) != LDNS_STATUS_OK)
				die("ldns refused the message");
			ldns_pkt_free(p);
		}
		double t = (cpu() - t0) / LOOPS;
		best = t < best ? t : best;
	}
	return best;
}

static double hash_cost(size_t n)
{
	unsigned char *line = malloc(n), md[32];
	SHA256_CTX c;
	double best = 1e9;

	if (!line)
		die("out of memory");
	memset(line, 'x', n);
	for (int r = 0; r < 5; r++) {
		double t0 = cpu();

		for (int i = 0; i < LOOPS; i++) {
			line[i % n] = (unsigned char)i; /* not a constant the compiler could keep */
			if (SHA256_Init(&c) != 1 || SHA256_Update(&c, line, n) != 1 ||
			    SHA256_Final(md, &c) != 1)
				die("SHA-256 failed");
		}
		double t = (cpu() - t0) / LOOPS;
		best = t < best ? t : best;
	}
	free(line);
	return best;
}

int main(int argc, char **argv)
{
	size_t qlen, alen, clen, rec = argc > 1 ? strtoul(argv[1], NULL, 10) : 957;
	/* the query; an answer of one A record (a name with no CNAME); the
	 * answer through the CNAME */
	uint8_t *q = message("www.example.test.", NULL, 0, &qlen);
	uint8_t *a = message("edge.example.test.", cname_rrs + 1, 1, &alen);
	uint8_t *c = message("www.example.test.", cname_rrs, 3, &clen);
	double pq, pa, pc, h;

	pq = parse_cost(q, qlen);
	pa = parse_cost(a, alen);
	pc = parse_cost(c, clen);
	h = hash_cost(rec);
	printf("ldns parse and free, query (%zu bytes): %.3f us\n", qlen, pq * 1e6);
	printf("ldns parse and free, answer of one A record (%zu bytes): %.3f us\n", alen,
	       pa * 1e6);
	printf("ldns parse and free, answer of a CNAME and two A records (%zu bytes; not "
	       "counted): %.3f us\n",
	       clen, pc * 1e6);
	printf("SHA-256 of a %zu-byte record: %.3f us\n", rec, h * 1e6);
	printf("floor per query (query, one-A answer, record's hash): %.3f us\n",
	       (pq + pa + h) * 1e6);
	free(q);
	free(a);
	free(c);
	return 0;
}
