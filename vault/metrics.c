/* The vault's metrics in Prometheus text format: the reply to "metrics" on
 * <run_dir>/vault.sock (docs/operations.md, "Metrics"). */
#include "vault/vault_int.h"

#include <stdlib.h>
#include <string.h>

char *vault_metrics(void *ctx, const char *req)
{
	struct vault_daemon *d = ctx;
	struct vault_counters *n = &d->n;
	struct pc_prom b = {0};
	struct vault_state *st;
	unsigned open_conns;

	if (strcmp(req, "metrics") != 0)
		return strdup("unknown request (metrics)\n");
	pthread_mutex_lock(&d->lock);
	open_conns = d->conns;
	pthread_mutex_unlock(&d->lock);
	pc_prom_family(&b, "portcullis_vault_connections_total", "counter",
		       "Redirected sandbox connections: accepted (handed to a thread) and "
		       "refused (before or at the TLS handshake).");
	pc_prom_u64(&b, "portcullis_vault_connections_total", "outcome=\"accepted\"",
		    atomic_load(&n->conns_accepted));
	pc_prom_u64(&b, "portcullis_vault_connections_total", "outcome=\"refused\"",
		    atomic_load(&n->conns_refused));
	pc_prom_family(&b, "portcullis_vault_connections_open", "gauge",
		       "Sandbox connections open now.");
	pc_prom_u64(&b, "portcullis_vault_connections_open", NULL, open_conns);
	pc_prom_family(&b, "portcullis_vault_requests_total", "counter",
		       "HTTP requests: allowed (recorded and forwarded) and refused.");
	pc_prom_u64(&b, "portcullis_vault_requests_total", "outcome=\"allowed\"",
		    atomic_load(&n->requests_allowed));
	pc_prom_u64(&b, "portcullis_vault_requests_total", "outcome=\"refused\"",
		    atomic_load(&n->requests_refused));
	pc_prom_family(&b, "portcullis_vault_injections_total", "counter",
		       "Forwarded requests into which at least one secret was injected.");
	pc_prom_u64(&b, "portcullis_vault_injections_total", NULL, atomic_load(&n->injections));
	pc_prom_family(&b, "portcullis_vault_secrets_injected_total", "counter",
		       "Secrets injected (a request with two secrets counts two).");
	pc_prom_u64(&b, "portcullis_vault_secrets_injected_total", NULL,
		    atomic_load(&n->secrets_injected));
	pc_prom_family(&b, "portcullis_vault_exfiltration_refused_total", "counter",
		       "Requests refused because a placeholder went where its secret is not "
		       "bound.");
	pc_prom_u64(&b, "portcullis_vault_exfiltration_refused_total", NULL,
		    atomic_load(&n->exfil));
	pc_prom_family(&b, "portcullis_vault_log_failures_total", "counter",
		       "Records logd did not acknowledge (their requests were refused).");
	pc_prom_u64(&b, "portcullis_vault_log_failures_total", NULL, atomic_load(&n->log_failed));
	st = vault_daemon_state(d);
	pc_prom_family(&b, "portcullis_vault_secrets", "gauge", "Secrets in the vault's store.");
	pc_prom_u64(&b, "portcullis_vault_secrets", NULL, st ? st->store->n : 0);
	vault_state_unref(st);
	return pc_prom_take(&b);
}
