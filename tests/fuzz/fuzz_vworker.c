/* libFuzzer target: the monitor -> worker channel of the vault
 * (vault/worker.c, CONN): what decodes must encode back to the same bytes,
 * with IPv4 addresses holding nothing past their four bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "vault/vault_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pc_endpoint src, orig;
	uint8_t out[WMSG_MAX];
	int n;

	if (wmsg_conn_decode(data, size, &src, &orig, NULL) < 0)
		return 0;
	if ((src.addr.family != AF_INET && src.addr.family != AF_INET6) ||
	    (orig.addr.family != AF_INET && orig.addr.family != AF_INET6))
		abort();
	n = wmsg_conn_encode(&src, &orig, out, sizeof(out));
	if (n < 0 || (size_t)n != size || memcmp(out, data, size))
		abort();
	return 0;
}
