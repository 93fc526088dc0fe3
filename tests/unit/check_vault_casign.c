/* The CA process's protocol (vault/casign.c): the codec refuses what it
 * must, and a real CA loop in a child process signs leaves only for names a
 * sandbox's policy allows, only for P-256 keys, and stops on garbage. */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rules/rules_int.h"
#include "tests/unit/unit.h"
#include "vault/vault_int.h"

static const char policy_yaml[] = "sandbox: agent-1\n"
				  "match: { source: 10.203.0.11/32 }\n"
				  "allow:\n"
				  "  - host: api.github.test\n"
				  "    ports: [443]\n"
				  "---\n"
				  "sandbox: agent-2\n"
				  "match: { source: 10.203.0.12/32 }\n"
				  "allow:\n"
				  "  - host: '*.pypi.test'\n"
				  "    ports: [8443]\n";

static char dir[] = "/tmp/casign.XXXXXX";
static struct casign *cli;
static struct vault_ca *ca;
static int raw_fd = -1; /* a second handle on the socket, for garbage */

/* A CA loop in a child process, on one end of a socketpair. */
static void setup(void)
{
	struct policy *p;
	struct pc_err e = {0};
	int sv[2];
	pid_t pid;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(ca_init(dir, getuid(), getgid(), true, &e), 0);
	ck_assert_int_eq(ca_load(dir, &ca, &e), 0);
	ck_assert_int_eq(
	    policy_load_buffer("t.yaml", policy_yaml, strlen(policy_yaml), NULL, &p, &e), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		_exit(casign_serve(sv[1], ca, NULL, p) < 0 ? 1 : 0);
	}
	close(sv[1]);
	policy_unref(p);
	raw_fd = dup(sv[0]);
	ck_assert_int_eq(casign_open(sv[0], pid, &cli, &e), 0);
}

static void teardown(void)
{
	char cmd[64];

	close(raw_fd);
	casign_stop(cli);
	ca_free(ca);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	memcpy(dir + sizeof(dir) - 7, "XXXXXX", 6);
}

/* Whether cert is for host and issued by the test CA. */
static void check_leaf(X509 *x, const char *host)
{
	char path[64];
	FILE *f;
	X509 *cax;
	EVP_PKEY *capub;

	ck_assert_int_eq(X509_check_host(x, host, 0, 0, NULL), 1);
	snprintf(path, sizeof(path), "%s/ca.pem", dir);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	cax = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	capub = X509_get0_pubkey(cax);
	ck_assert_int_eq(X509_verify(x, capub), 1);
	X509_free(cax);
}

START_TEST(signs_allowed_names)
{
	struct pc_err e = {0};
	EVP_PKEY *k = EVP_EC_gen("P-256");
	void *x = NULL;

	ck_assert_int_eq(casign_sign(cli, "api.github.test", 443, k, &x, &e), 0);
	check_leaf(x, "api.github.test");
	X509_free(x);
	/* another sandbox's wildcard, on its port */
	ck_assert_int_eq(casign_sign(cli, "files.pypi.test", 8443, k, &x, &e), 0);
	check_leaf(x, "files.pypi.test");
	X509_free(x);
	EVP_PKEY_free(k);
}
END_TEST

START_TEST(refuses_names_no_policy_allows)
{
	struct pc_err e = {0};
	EVP_PKEY *k = EVP_EC_gen("P-256");
	void *x = NULL;

	ck_assert_int_eq(casign_sign(cli, "www.google.test", 443, k, &x, &e), PC_EPERM);
	ck_assert_ptr_null(x);
	ck_assert_ptr_nonnull(strstr(e.msg, "no sandbox's allow list"));
	/* allowed, but not on that port */
	ck_assert_int_eq(casign_sign(cli, "api.github.test", 8443, k, &x, &e), PC_EPERM);
	ck_assert_int_eq(casign_sign(cli, "pypi.test", 8443, k, &x, &e), PC_EPERM);
	ck_assert_ptr_null(x);
	/* the CA keeps serving after refusals */
	ck_assert_int_eq(casign_sign(cli, "api.github.test", 443, k, &x, &e), 0);
	X509_free(x);
	EVP_PKEY_free(k);
}
END_TEST

START_TEST(refuses_other_keys)
{
	struct pc_err e = {0};
	EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
	void *x = NULL;

	ck_assert_ptr_nonnull(k);
	ck_assert_int_eq(casign_sign(cli, "api.github.test", 443, k, &x, &e), PC_EPERM);
	ck_assert_ptr_nonnull(strstr(e.msg, "P-256"));
	EVP_PKEY_free(k);
}
END_TEST

/* A name with a ',' would add a subjectAltName entry: refused by the
 * decoder on the CA's side (sent raw, bypassing the client). */
static void send_sign(const char *host, uint16_t port)
{
	struct casign_msg q = {.type = CASIGN_SIGN, .id = 7, .port = port};
	static const uint8_t der[] = {0x30, 0x00};
	uint8_t buf[CASIGN_MAX];
	int n;

	pc_strlcpy(q.host, host, sizeof(q.host));
	q.der = der;
	q.der_len = sizeof(der);
	n = casign_encode(&q, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(send(raw_fd, buf, (size_t)n, 0), n);
}

START_TEST(garbage_stops_the_ca)
{
	struct pc_err e = {0};
	EVP_PKEY *k = EVP_EC_gen("P-256");
	uint8_t buf[CASIGN_MAX + 1];
	void *x = NULL;

	send_sign("api.github.test,DNS:*.evil.test", 443);
	/* the CA process ends instead of answering: EOF */
	ck_assert_int_eq(recv(raw_fd, buf, sizeof(buf), 0), 0);
	ck_assert_int_lt(casign_sign(cli, "api.github.test", 443, k, &x, &e), 0);
	ck_assert_ptr_null(x);
	EVP_PKEY_free(k);
}
END_TEST

/* A worker's channel (CLIENT): its SIGNs are checked against its own
 * sandbox's policy alone, and it may do nothing else. */
START_TEST(worker_channels)
{
	struct pc_err e = {0};
	EVP_PKEY *k = EVP_EC_gen("P-256");
	struct casign *w1, *w2;
	struct casign_msg q = {.type = CASIGN_RELOAD, .id = 1};
	uint8_t buf[CASIGN_MAX + 1];
	int a[2], b[2], n;
	void *x = NULL;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, a), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, b), 0);
	ck_assert_int_eq(casign_client(cli, "agent-1", a[1], &e), 0);
	ck_assert_int_eq(casign_client(cli, "agent-2", b[1], &e), 0);
	close(a[1]);
	close(b[1]);
	ck_assert_int_eq(casign_open(a[0], 0, &w1, &e), 0);
	ck_assert_int_eq(casign_open(b[0], 0, &w2, &e), 0);
	ck_assert_int_eq(casign_sign(w1, "api.github.test", 443, k, &x, &e), 0);
	check_leaf(x, "api.github.test");
	X509_free(x);
	x = NULL;
	/* allowed to agent-1, not to agent-2 */
	ck_assert_int_eq(casign_sign(w2, "api.github.test", 443, k, &x, &e), PC_EPERM);
	ck_assert_ptr_nonnull(strstr(e.msg, "allow list of agent-2"));
	ck_assert_int_eq(casign_sign(w2, "files.pypi.test", 8443, k, &x, &e), 0);
	X509_free(x);
	/* a worker may not reload: its channel is closed, the others go on */
	ck_assert_int_eq((n = casign_encode(&q, buf, sizeof(buf))) > 0, 1);
	ck_assert_int_eq(send(casign_fd(w2), buf, (size_t)n, 0), n);
	ck_assert_int_eq(recv(casign_fd(w2), buf, sizeof(buf), 0), 0);
	ck_assert_int_eq(casign_sign(w1, "api.github.test", 443, k, &x, &e), 0);
	X509_free(x);
	casign_stop(w1);
	casign_stop(w2);
	EVP_PKEY_free(k);
}
END_TEST

START_TEST(codec_refusals)
{
	struct casign_msg m = {.type = CASIGN_SIGN, .id = 1, .port = 443}, out;
	static const uint8_t der[] = {1, 2, 3};
	uint8_t buf[CASIGN_MAX + 16];
	struct pc_err e = {0};
	int n;

	pc_strlcpy(m.host, "api.github.test", sizeof(m.host));
	m.der = der;
	m.der_len = sizeof(der);
	n = casign_encode(&m, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(casign_decode(buf, (size_t)n, false, &out, &e), 0);
	ck_assert_str_eq(out.host, "api.github.test");
	ck_assert_uint_eq(out.port, 443);
	ck_assert_uint_eq(out.der_len, 3);
	/* a request is not a reply */
	ck_assert_int_lt(casign_decode(buf, (size_t)n, true, &out, &e), 0);
	/* every cut is refused */
	for (int i = 0; i < n; i++)
		ck_assert_int_lt(casign_decode(buf, (size_t)i, false, &out, &e), 0);
	/* another version */
	buf[0] = CASIGN_VERSION + 1;
	ck_assert_int_lt(casign_decode(buf, (size_t)n, false, &out, &e), 0);
	buf[0] = CASIGN_VERSION;
	/* bytes left over (the header's length says so too) */
	buf[n] = 0;
	pc_msg_put32(buf + 4, (uint32_t)n + 1);
	ck_assert_int_lt(casign_decode(buf, (size_t)n + 1, false, &out, &e), 0);
	/* upper case, a trailing dot, port 0, no key */
	const char *bad[] = {"API.github.test", "api.github.test.", "a b.test", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		pc_strlcpy(m.host, bad[i], sizeof(m.host));
		n = casign_encode(&m, buf, sizeof(buf));
		ck_assert_int_lt(casign_decode(buf, (size_t)n, false, &out, &e), 0);
	}
	pc_strlcpy(m.host, "api.github.test", sizeof(m.host));
	m.port = 0;
	n = casign_encode(&m, buf, sizeof(buf));
	ck_assert_int_lt(casign_decode(buf, (size_t)n, false, &out, &e), 0);
	m.port = 443;
	m.der_len = 0;
	n = casign_encode(&m, buf, sizeof(buf));
	ck_assert_int_lt(casign_decode(buf, (size_t)n, false, &out, &e), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("vault_casign");
	TCase *tc = tcase_create("casign");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	PC_UNIT_TESTS(tc, signs_allowed_names, refuses_names_no_policy_allows, refuses_other_keys,
		      garbage_stops_the_ca, worker_channels, codec_refusals);
	suite_add_tcase(s, tc);
	return s;
}

PC_UNIT_MAIN(suite)
