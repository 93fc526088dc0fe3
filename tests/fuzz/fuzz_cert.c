/* libFuzzer target: certificate files — the DSSE envelope and in-toto
 * statement parser, signature check, and the Markdown/HTML renderer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checker/checker_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t pk[32] = {1};
	struct cert_env e;
	struct jv *v;

	if (cert_env_parse((const char *)data, size, &e, NULL) == 0) {
		char *r = cert_render(e.statement, true);

		free(r);
		r = cert_render(e.statement, false);
		free(r);
		(void)cert_env_verify(&e, pk, NULL);
		cert_env_free(&e);
	}
	v = jv_parse((const char *)data, size);
	if (v) {
		char *r = cert_render(v, false);

		free(r);
		jv_free(v);
	}
	return 0;
}
