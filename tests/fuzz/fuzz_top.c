/* libFuzzer target: what `portcullis top` reads from other processes —
 * log lines (cli/top_agg.c through logd's reader), the engine's status
 * JSON and logd's metrics text (cli/top_health.c) — and the frame drawn
 * from them. The first byte picks which; the tables must stay within
 * their bounds whatever comes. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct top_agg a;
	struct top_health h;
	struct pc_buf b;
	const char *s = (const char *)data + 1;
	size_t n = size ? size - 1 : 0;

	if (size < 1)
		return 0;
	memset(&h, 0, sizeof(h));
	switch (data[0] % 3) {
	case 0: /* log lines */
		top_agg_init(&a);
		for (size_t i = 0, start = 0; i <= n; i++)
			if (i == n || s[i] == '\n') {
				top_agg_line(&a, s + start, i - start, 1796000000500ull);
				start = i + 1;
			}
		if (a.n_sb > TOP_SANDBOXES_MAX || a.n_dest > TOP_DEST_MAX)
			__builtin_trap();
		break;
	case 1:
		top_health_engine(s, n, &h);
		break;
	default: {
		/* a C string, as the control socket's reply is */
		char *t = malloc(n + 1);

		if (!t)
			return 0;
		memcpy(t, s, n);
		t[n] = '\0';
		top_health_logd(t, strlen(t), &h);
		free(t);
		break;
	}
	}
	pc_buf_init(&b, 0, 0);
	top_render(&b, &a, &h, NULL, TOP_SORT_TOTAL, 1796000000500ull, 80, 24);
	pc_buf_free(&b);
	return 0;
}
