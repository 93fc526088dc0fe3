/* vault: portcullis-vault — TLS interception that swaps placeholders for real
 * credentials only toward the host a secret is bound to — and the
 * `portcullis secrets` / `portcullis ca` commands. docs/vault.md is the
 * admin's reference. This header is what other modules use of it: the
 * subcommands, the control socket's name, secret names and placeholders;
 * the rest is in vault/vault_int.h. */
#ifndef PC_VAULT_H
#define PC_VAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/pc.h"

/* `portcullis secrets ...` and `portcullis ca ...`: argv[0] is "secrets" or
 * "ca". Returns a PC_EXIT_* code; prints its own errors. */
int vault_cli(int argc, char **argv, const char *config);

/* The vault's control socket, <run_dir>/vault.sock (SOCK_SEQPACKET, root
 * only): the request "metrics" gets the vault's metrics in Prometheus text
 * format (docs/operations.md, "Metrics"). */
#define VAULT_CTL_SOCK "vault.sock"
/* The request "reload" (`portcullis reload`) loads the policy and secrets
 * again: the reply starts with VAULT_CTL_RELOAD_OK ("policy HASH secrets N"
 * follows) or VAULT_CTL_RELOAD_REFUSED (the reason follows; the running
 * state stays). */
#define VAULT_CTL_RELOAD_OK	 "ok "
#define VAULT_CTL_RELOAD_REFUSED "refused: "

/* Secret names and placeholders (the sealed store, store.c): the sandbox
 * launcher names secrets and hands their placeholders to sandboxes. */

#define VAULT_NAME_MAX	64
#define VAULT_PH_RANDOM 26 /* base32 characters after the name: 130 bits */
#define VAULT_PH_MAX	(5 + VAULT_NAME_MAX + 1 + VAULT_PH_RANDOM + 1)

/* Is name a valid secret name ([A-Z][A-Z0-9_]*, < VAULT_NAME_MAX)? */
bool store_name_valid(const char *name);
/* The placeholder of name, from its .placeholder file (no key needed). */
int store_placeholder_read(const char *dir, const char *name, char *ph, struct pc_err *err);

/* ======================================================================
 * SNI (sni.c): the server_name of a ClientHello extension body. Used only
 * inside vault/; it stays here while sni.c (which includes only this
 * header) is being merged into the one host-name validator.
 * ====================================================================== */

/* Parse the server_name extension data (RFC 6066) and write the host name,
 * lower-cased, into host (hostlen >= 254). Only one host_name entry is
 * accepted, and it must be a valid DNS name. */
int sni_parse(const uint8_t *ext, size_t len, char *host, size_t hostlen, struct pc_err *err);

#endif
