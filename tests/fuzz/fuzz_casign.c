/* libFuzzer target: the CA process's protocol (vault/casign.c), decoded on
 * both sides — the CA reads the daemon's requests (a compromised daemon is
 * what it defends against), the daemon reads the CA's replies. What decodes
 * must encode back to the same bytes, and a SIGN's host must be canonical. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vault/vault_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[CASIGN_MAX];

	for (int from_ca = 0; from_ca < 2; from_ca++) {
		struct casign_msg m;
		struct pc_host h;
		int n;

		if (casign_decode(data, size, from_ca, &m, NULL) < 0)
			continue;
		if ((m.type >= 0x80) != from_ca)
			abort();
		if (m.type == CASIGN_SIGN &&
		    (pc_host_parse_str(m.host, PC_HOST_SNI, &h, NULL) < 0 ||
		     strcmp(h.name, m.host) || !m.port || !m.der_len || m.der_len > CASIGN_DER_MAX))
			abort();
		if ((m.type == CASIGN_SIGN || m.type == CASIGN_CERT) &&
		    (m.der < data || m.der + m.der_len > data + size))
			abort();
		n = casign_encode(&m, out, sizeof(out));
		if (n < 0 || (size_t)n != size || memcmp(out, data, size))
			abort();
	}
	return 0;
}
