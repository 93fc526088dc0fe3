/* libFuzzer target for tls_clienthello_sni: the first bytes of every TLS
 * flow a sandbox opens on a host entry. The input is the stream; it is also
 * fed in two parts, as the engine would after PC_EAGAIN, and the answers
 * must agree. */
#include "dnsguard/dnsguard.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char sni[POLICY_HOST_MAX], sni2[POLICY_HOST_MAX];
	size_t need = 0, need2 = 0, cut = size / 2;
	int rc, rc2;

	rc = tls_clienthello_sni(data, size, sni, sizeof(sni), &need);
	if (rc != 1 && rc != 0 && rc != PC_EAGAIN && rc != PC_EPARSE && rc != PC_EREFUSED)
		abort(); /* PC_EREFUSED: Encrypted Client Hello */
	if (rc == PC_EAGAIN && (need <= size || need > 16384))
		abort();
	if (rc == 1) {
		size_t n = strlen(sni);

		if (n == 0 || n > 253)
			abort();
		for (size_t i = 0; i < n; i++)
			if (!((sni[i] >= 'a' && sni[i] <= 'z') ||
			      (sni[i] >= '0' && sni[i] <= '9') || sni[i] == '-' || sni[i] == '_' ||
			      sni[i] == '.'))
				abort();
	}
	/* The parser decides on a prefix exactly as on the whole stream, or
	 * asks for more than the prefix has (and then the whole stream, if
	 * it has less than that, cannot be decided either). */
	rc2 = tls_clienthello_sni(data, cut, sni2, sizeof(sni2), &need2);
	if (rc2 == PC_EAGAIN) {
		if (need2 <= cut || (need2 > size && (rc == 0 || rc == 1 || rc == PC_EREFUSED)))
			abort();
	} else if (rc2 != rc || (rc == 1 && strcmp(sni, sni2) != 0)) {
		abort();
	}
	return 0;
}
