/* libFuzzer target for common/hostname.c, the one host-name grammar that
 * reads sandbox bytes (server names, query names, Host headers). Each form
 * is run on the input; what it accepts must be a normalized name, and the
 * forms must agree where docs/policy.md says they do. */
#include "common/pc.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const struct pc_host *h)
{
	size_t n = strlen(h->name);

	if (n == 0 || n > PC_HOST_MAX)
		abort();
	for (size_t i = 0; i < n; i++)
		if (!((h->name[i] >= 'a' && h->name[i] <= 'z') ||
		      (h->name[i] >= '0' && h->name[i] <= '9') || h->name[i] == '-' ||
		      h->name[i] == '_' || h->name[i] == '.'))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pc_host h[4], again;
	int rc[4];

	for (int f = PC_HOST_NAME; f <= PC_HOST_HTTP; f++) {
		const char *why = NULL;

		rc[f] = pc_host_parse(data, 0, size, (enum pc_host_form)f, &h[f], &why);
		if (rc[f] != 0 && (rc[f] != PC_EPARSE || !why))
			abort();
		if (rc[f] == 0)
			check_name(&h[f]);
	}
	/* a server name is a DNS name; a DNS name is a rule's host without
	 * a wildcard and a Host header without a port */
	if (rc[PC_HOST_SNI] == 0 &&
	    (rc[PC_HOST_NAME] != 0 || strcmp(h[PC_HOST_SNI].name, h[PC_HOST_NAME].name) != 0))
		abort();
	if (rc[PC_HOST_NAME] == 0 &&
	    (rc[PC_HOST_POLICY] != 0 || h[PC_HOST_POLICY].wildcard ||
	     strcmp(h[PC_HOST_POLICY].name, h[PC_HOST_NAME].name) != 0 || rc[PC_HOST_HTTP] != 0 ||
	     h[PC_HOST_HTTP].port != 0 || strcmp(h[PC_HOST_HTTP].name, h[PC_HOST_NAME].name) != 0))
		abort();
	/* what any form yields is a server name as it is, unchanged */
	for (int f = PC_HOST_NAME; f <= PC_HOST_HTTP; f++) {
		if (rc[f] != 0)
			continue;
		if (pc_host_parse_str(h[f].name, PC_HOST_SNI, &again, NULL) != 0 ||
		    strcmp(again.name, h[f].name) != 0)
			abort();
	}
	return 0;
}
