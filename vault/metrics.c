/* The vault's metrics in Prometheus text format: the reply to "metrics" on
 * <run_dir>/vault.sock (docs/operations.md, "Metrics"). */
#include "vault/vault_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define N(f) offsetof(struct vault_counters, f)
static const struct pc_prom_row conn_rows[] = {
    {"portcullis_vault_connections_total", "counter",
     "Redirected sandbox connections: accepted (handed to a thread) and refused (before or at "
     "the TLS handshake).",
     "outcome=\"accepted\"", N(conns_accepted)},
    {"portcullis_vault_connections_total", NULL, NULL, "outcome=\"refused\"", N(conns_refused)},
};
static const struct pc_prom_row req_rows[] = {
    {"portcullis_vault_requests_total", "counter",
     "HTTP requests: allowed (recorded and forwarded) and refused.", "outcome=\"allowed\"",
     N(requests_allowed)},
    {"portcullis_vault_requests_total", NULL, NULL, "outcome=\"refused\"", N(requests_refused)},
    {"portcullis_vault_injections_total", "counter",
     "Forwarded requests into which at least one secret was injected.", NULL, N(injections)},
    {"portcullis_vault_secrets_injected_total", "counter",
     "Secrets injected (a request with two secrets counts two).", NULL, N(secrets_injected)},
    {"portcullis_vault_exfiltration_refused_total", "counter",
     "Requests refused because a placeholder went where its secret is not bound.", NULL, N(exfil)},
    {"portcullis_vault_log_failures_total", "counter",
     "Records logd did not acknowledge (their requests were refused).", NULL, N(log_failed)},
    {"portcullis_vault_upstream_handshakes_total", "counter",
     "TLS handshakes with upstream servers that succeeded: full (the certificate verified) and "
     "resumed (a session of the same sandbox, host and address).",
     "kind=\"full\"", N(upstream_full)},
    {"portcullis_vault_upstream_handshakes_total", NULL, NULL, "kind=\"resumed\"",
     N(upstream_resumed)},
};
#undef N

char *vault_metrics(void *ctx, const char *req)
{
	struct vault_daemon *d = ctx;
	struct vault_counters sum = {0};
	struct pc_prom b = {0};
	size_t n_secrets;

	if (strcmp(req, "metrics") != 0)
		return strdup("unknown request (metrics)\n");
	/* the monitor's own counts (refusals at accept) and every worker's,
	 * ended ones included */
	sum.conns_refused = atomic_load(&d->n->conns_refused);
	monitor_counters(&sum);
	pthread_mutex_lock(&d->lock);
	n_secrets = d->n_secrets;
	pthread_mutex_unlock(&d->lock);
	pc_prom_rows(&b, conn_rows, sizeof(conn_rows) / sizeof(conn_rows[0]), &sum, true);
	pc_prom_family(&b, "portcullis_vault_connections_open", "gauge",
		       "Sandbox connections open now.");
	pc_prom_u64(&b, "portcullis_vault_connections_open", NULL, atomic_load(&sum.conns_open));
	pc_prom_rows(&b, req_rows, sizeof(req_rows) / sizeof(req_rows[0]), &sum, true);
	pc_prom_family(&b, "portcullis_vault_secrets", "gauge", "Secrets in the vault's store.");
	pc_prom_u64(&b, "portcullis_vault_secrets", NULL, n_secrets);
	monitor_metrics(&b);
	pc_prom_process(&b); /* process_* of the monitor (issue 18) */
	return pc_prom_take(&b);
}
