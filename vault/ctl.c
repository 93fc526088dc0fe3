/* vault.sock's requests: "metrics" (metrics.c) and "reload", so that
 * `portcullis reload` (and the unit's ExecReload) learns whether the vault
 * took the new policy and secrets, which SIGHUP cannot tell it. */
#include "vault/vault_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *vault_ctl(void *ctx, const char *req)
{
	struct vault_daemon *d = ctx;
	struct vault_state *st;
	struct pc_err err = {0};
	char ebuf[700], *out = NULL;
	size_t n;

	if (strcmp(req, "metrics") == 0)
		return vault_metrics(ctx, req);
	if (strcmp(req, "reload") != 0)
		return strdup("unknown request (metrics, reload)\n");
	if (vault_daemon_reload(d, &err) < 0) {
		if (asprintf(&out, "%s%s\n", VAULT_CTL_RELOAD_REFUSED,
			     pc_err_str(&err, ebuf, sizeof(ebuf))) < 0)
			return NULL;
		return out;
	}
	/* the monitor holds no secret: it counts them (n_secrets, under
	 * the lock that guards the state swap) */
	pthread_mutex_lock(&d->lock);
	n = d->n_secrets;
	pthread_mutex_unlock(&d->lock);
	st = vault_daemon_state(d);
	if (asprintf(&out, "%spolicy %s secrets %zu\n", VAULT_CTL_RELOAD_OK,
		     st ? policy_hash(st->policy) : "-", n) < 0)
		out = NULL;
	vault_state_unref(st);
	return out;
}
