/* Base64 with one spelling: what the guard reads from files and peers
 * (keys, signatures, roots, proofs, the certificate). Apart from util.c
 * so that the helpers there stay libc alone (make prove reads them with
 * Frama-C's libc, which has no libsodium). */
#include "common/pc.h"

#include <sodium.h>
#include <stdint.h>
#include <string.h>

int pc_b64_decode(void *out, size_t cap, const char *in, size_t len, size_t *outlen)
{
	const int v = sodium_base64_VARIANT_ORIGINAL;
	char enc[sodium_base64_ENCODED_LEN(48, sodium_base64_VARIANT_ORIGINAL)];
	const uint8_t *o = out;
	size_t n = 0, at = 0;

	if (sodium_base642bin(out, cap, in, len, NULL, &n, NULL, v) != 0)
		return PC_EPARSE;
	/* encoded again, 48 bytes (64 characters, no padding) at a time, it
	 * must be the text it came from */
	for (size_t i = 0; i < n; i += 48) {
		size_t k = n - i < 48 ? n - i : 48, el = sodium_base64_ENCODED_LEN(k, v) - 1;

		sodium_bin2base64(enc, sizeof(enc), o + i, k, v);
		if (el > len - at || memcmp(enc, in + at, el) != 0)
			return PC_EPARSE;
		at += el;
	}
	if (at != len)
		return PC_EPARSE;
	*outlen = n;
	return 0;
}
