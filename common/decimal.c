/* Decimals with one spelling: sizes and sequence numbers the guard reads
 * from files and peers (a log's seq, a witness's request and its 409
 * answer). A number written two ways is two texts for one value, and a
 * lenient reader (strtoull takes blanks, a sign, "-1" as UINT64_MAX) lets
 * a peer say what the writer never would. */
#include "common/pc.h"

#include <stdint.h>

int pc_dec_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t x = 0;

	if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
		return PC_EPARSE;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || x > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return PC_EPARSE;
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	*out = x;
	return 0;
}
