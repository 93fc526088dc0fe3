/* libFuzzer target: the sandbox launcher's summary, which reads the signed
 * log file's lines (cli/sandbox_summary.c) and counts the records of
 * one sandbox. The first byte picks the first sequence number counted. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cli/cli_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sb_counts c;

	if (size < 1)
		return 0;
	memset(&c, 0, sizeof(c));
	sbsum_count_buffer("agent-1", data[0], (const char *)data + 1, size - 1, &c);
	/* the names list stays a terminated string within its buffer */
	if (strnlen(c.injected_names, sizeof(c.injected_names)) >= sizeof(c.injected_names))
		__builtin_trap();
	return 0;
}
