/* The vault's reload error (vault_state_inputs_load, which `portcullis
 * reload` prints after "vault: reload refused: "): a rule file's error is
 * "file:line:col: what", as the engine's, without a stray "policy: " after
 * the position; an error without a position still says what it concerns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rules/rules_int.h"
#include "vault/vault_int.h"
#include "tests/unit/unit.h"

static char dir[] = "/tmp/check_vault_reloadmsg_XXXXXX";

static void write_file(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static const char *load(struct config *cfg)
{
	static char buf[1024];
	struct policy *pol = NULL;
	struct vault_store *st = NULL;
	struct pc_err e = {0};

	ck_assert_int_lt(vault_state_inputs_load(cfg, NULL, &pol, &st, &e), 0);
	return pc_err_str(&e, buf, sizeof(buf));
}

START_TEST(rule_file_error_has_no_stray_prefix)
{
	struct config cfg;
	char want[512], rules[200];
	const char *got;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(rules, sizeof(rules), "%s/rules.d", dir);
	ck_assert_int_eq(mkdir(rules, 0755), 0);
	write_file(
	    "rules.d/zz-broken.yaml",
	    "sandbox: agent-9\nmatch: { source: 10.203.0.99/32 }\nallow:\n  - cidr: [oops\n");
	config_defaults(&cfg);
	pc_strlcpy(cfg.rules_dir, rules, sizeof(cfg.rules_dir));
	snprintf(cfg.vault.secrets, sizeof(cfg.vault.secrets), "%s/secrets", dir);
	got = load(&cfg);
	snprintf(want, sizeof(want), "%s/zz-broken.yaml:5:1: invalid YAML: ", rules);
	ck_assert_msg(strncmp(got, want, strlen(want)) == 0, "%s", got);
	ck_assert_msg(!strstr(got, "policy:"), "%s", got);

	/* the policy loads; the secrets do not: no position, so it says which */
	snprintf(want, sizeof(want), "%s/zz-broken.yaml", rules);
	ck_assert_int_eq(unlink(want), 0);
	write_file("secrets", "a file where the store's directory should be\n");
	got = load(&cfg);
	ck_assert_msg(strncmp(got, "secrets: ", 9) == 0, "%s", got);
	snprintf(want, sizeof(want), "%s/secrets", dir);
	unlink(want);
	rmdir(rules);
	rmdir(dir);
}
END_TEST

PC_UNIT_SUITE("vault_reloadmsg", "reload", 0, rule_file_error_has_no_stray_prefix)
