/* libFuzzer target: the engine's HTTP /metrics request parser
 * (engine/httpmetrics.c), which reads whatever a peer of the listener
 * sends. Properties: it never reads past len, a whole head it accepts is
 * within the bytes given and ends with CRLF CRLF, its method and target
 * are NUL-terminated and printable, and feeding the same bytes in two
 * pieces gives the same answer once the head is whole. */
#include "engine/engine_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct httpm_req r, r2;
	uint8_t *copy;
	int n, m;

	if (size > 2 * HTTPM_REQ_MAX)
		return 0;
	copy = malloc(size ? size : 1); /* exact size: ASan sees any overread */
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	n = httpm_request_parse(copy, size, &r);
	if (n > 0) {
		if ((size_t)n > size || (size_t)n > HTTPM_REQ_MAX ||
		    memcmp(copy + n - 4, "\r\n\r\n", 4) != 0)
			abort();
		if (!memchr(r.method, '\0', sizeof(r.method)) ||
		    !memchr(r.target, '\0', sizeof(r.target)) || r.target[0] != '/')
			abort();
		for (const char *p = r.target; *p; p++)
			if (*p <= 0x20 || *p >= 0x7f)
				abort();
		/* the head alone parses the same */
		m = httpm_request_parse(copy, (size_t)n, &r2);
		if (m != n || strcmp(r.method, r2.method) != 0 || strcmp(r.target, r2.target) != 0)
			abort();
	} else if (n == 0 && size >= HTTPM_REQ_MAX) {
		abort(); /* no head within the limit must be an error, not "more" */
	}
	free(copy);
	return 0;
}
