/* The state the vault serves from: the compiled policy and the unsealed
 * secrets, built together and swapped together on reload. */
#include "vault/vault_int.h"

#include <stdlib.h>
#include <string.h>

int vault_state_make(struct policy *policy, struct vault_store *store, struct vault_state **out,
		     struct pc_err *err)
{
	struct vault_state *st = calloc(1, sizeof(*st));

	if (!st)
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	st->forms.unbounded = true;
	for (size_t i = 0; i < store->n; i++) {
		const struct vault_secret *x = &store->s[i];
		int rc;

		/* a worker knows other sandboxes' secrets by placeholder only
		 * (no value): nothing of theirs to scrub */
		if (!x->value_len)
			continue;
		rc = scrub_keep_add_value(&st->forms, x->value, x->value_len,
					  (const uint8_t *)x->placeholder, x->ph_len);
		if (rc < 0) {
			scrub_keep_free(&st->forms);
			free(st);
			return pc_err_set(err, PC_ENOMEM, "out of memory");
		}
	}
	/* once per secret set: every response's scrubber finds the values'
	 * anchors in one pass (without it, one memmem per pattern: the same
	 * matches) */
	(void)scrub_keep_index(&st->forms);
	if (!(st->ph_pats = calloc(store->n + 1, sizeof(*st->ph_pats)))) {
		scrub_keep_free(&st->forms);
		free(st);
		return pc_err_set(err, PC_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < store->n; i++)
		st->ph_pats[i] = (struct scrub_pat){
		    .needle = (const uint8_t *)store->s[i].placeholder, .nlen = store->s[i].ph_len};
	ph_prefix_get(store, &st->ph_pre);
	st->policy = policy;
	st->store = store;
	atomic_init(&st->refs, 1);
	*out = st;
	return 0;
}

int vault_state_inputs_load(const struct config *cfg, const struct policy *prev,
			    struct policy **policy, struct vault_store **store, struct pc_err *err)
{
	struct policy *pol = NULL;
	int rc;

	if ((rc = policy_load_dir_since(cfg->rules_dir, cfg, prev, &pol, err)) < 0) {
		/* A rule file's error names its file:line:col, which says it is
		 * the policy; a prefix would land after the position. */
		if (!err || !err->file[0])
			pc_err_prefix(err, "policy: ");
		return rc;
	}
	if ((rc = store_load(cfg->vault.secrets, store, err)) < 0) {
		pc_err_prefix(err, "secrets: ");
		policy_unref(pol);
		return rc;
	}
	*policy = pol;
	return 0;
}

int vault_state_load(const struct config *cfg, struct vault_state **out, struct pc_err *err)
{
	struct policy *policy = NULL;
	struct vault_store *store = NULL;
	int rc;

	if ((rc = vault_state_inputs_load(cfg, NULL, &policy, &store, err)) < 0)
		return rc;
	if ((rc = vault_state_make(policy, store, out, err)) < 0) {
		policy_unref(policy);
		store_free(store);
	}
	return rc;
}

struct vault_state *vault_state_ref(struct vault_state *st)
{
	if (st)
		atomic_fetch_add(&st->refs, 1);
	return st;
}

void vault_state_unref(struct vault_state *st)
{
	if (!st || atomic_fetch_sub(&st->refs, 1) != 1)
		return;
	policy_unref(st->policy);
	store_free(st->store);
	scrub_keep_free(&st->forms);
	free(st->ph_pats);
	free(st);
}
